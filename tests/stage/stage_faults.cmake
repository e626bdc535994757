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

# test_disk_faults: the directory store's disk failing under a running
# stage (exactly_once): full, read-only (a tmpfs of the test's own, in a
# mount namespace of its own), fsync failing with EIO (bs_eio_preload), and
# kill -9 while full then a restart: the failure named, /ready 503, nothing
# committed past a checkpoint, no damaged file loaded, back by itself, the
# output exactly once at read_committed.  Needs root, as CI runs; fails
# without it.
bs_add_cmocka_test(test_disk_faults SOURCES stage/test_disk_faults.c
                   LIBS bstestsupport TIMEOUT 240 LABELS integration)
add_dependencies(test_disk_faults bs_eio_preload)
set_tests_properties(test_disk_faults PROPERTIES
  ENVIRONMENT "BLOOMSTAGE_BIN=$<TARGET_FILE:bloomstage>;BS_EIO_PRELOAD=$<TARGET_FILE:bs_eio_preload>")
