# test_stage_faults: `bloomstage run` under crashes and failures (kill -9 at
# many moments and restart, delivery failures injected in the mock broker, a
# broker going away, a full or read-only checkpoint directory, a corrupt
# checkpoint at start-up, poison records too large to produce): committed
# offsets never pass the checkpoints, and every unique record ends up in
# the output (or, poison, in rejected.topic) exactly once.  Tests 4 and 5
# need root for mount(8) / chattr(1) and skip without it (test 5 falls
# back to chmod).
bs_add_cmocka_test(test_stage_faults SOURCES stage/test_stage_faults.c
                   LIBS bstestsupport TIMEOUT 900 LABELS integration)
set_tests_properties(test_stage_faults PROPERTIES
  ENVIRONMENT "BLOOMSTAGE_BIN=$<TARGET_FILE:bloomstage>")

# test_stage_audit: the audit sample in `bloomstage run` (dedup.audit.*):
# an undersized filter warned of and its sampled keys rescued (and the
# rescue-off control), the counts across a crash and the output-tail
# replay.  Checks which keys are sampled with libbloomfilters itself.
bs_add_cmocka_test(test_stage_audit SOURCES stage/test_stage_audit.c
                   LIBS bstestsupport bloomfilters TIMEOUT 300
                   LABELS integration)
set_tests_properties(test_stage_audit PROPERTIES
  ENVIRONMENT "BLOOMSTAGE_BIN=$<TARGET_FILE:bloomstage>")
