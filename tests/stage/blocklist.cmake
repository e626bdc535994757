# Live blocklists (blocklist.NAME.topic).
# test_live_blocklist: `bloomstage run` and `bloomstage blocklist` against
# `bloomstage mock-broker`: add/remove while running (update latency
# printed), base file + tombstones + malformed records + restart, start-up
# errors, /ready until the list is read, a 100k-entry load bootstrapped.
# About 60 s.  test_kafka_blocklist: the same source against one Apache
# Kafka node (the list topic really compacted, cleanup.policy checked);
# about 3 minutes.
if(TARGET bloomstage)
  bs_add_cmocka_test(test_live_blocklist SOURCES stage/test_live_blocklist.c
                     LIBS bstestsupport m TIMEOUT 600 LABELS integration)
  set_tests_properties(test_live_blocklist PROPERTIES
    ENVIRONMENT "BLOOMSTAGE_BIN=$<TARGET_FILE:bloomstage>")
  bs_add_cmocka_test(test_kafka_blocklist SOURCES stage/test_live_blocklist.c
                     LIBS bstestsupport m TIMEOUT 900)
  target_compile_definitions(test_kafka_blocklist PRIVATE BS_REAL_KAFKA=1)
  bs_real_broker_test(test_kafka_blocklist b)
  set_tests_properties(test_kafka_blocklist PROPERTIES
    ENVIRONMENT "BLOOMSTAGE_BIN=$<TARGET_FILE:bloomstage>")
endif()
