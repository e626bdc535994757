# test_stage: `bloomstage run` end to end, as a user runs it, against
# `bloomstage mock-broker` through harness/: routing of a known
# stream (out/rejected, headers, order), graceful stop and restart from the
# checkpoints, dedup.key variants and dedup.on.missing.key, start-up failures
# that must leave the group untouched, configuration errors and overrides,
# blocklists from text lists and from `bloomstage filter build` files.
bs_add_cmocka_test(test_stage SOURCES stage/test_stage.c
                   LIBS bstestsupport TIMEOUT 600 LABELS integration)
set_tests_properties(test_stage PROPERTIES
  ENVIRONMENT "BLOOMSTAGE_BIN=$<TARGET_FILE:bloomstage>")
