# Integration tests: the real bloomstage binary run as a user runs it, against
# `bloomstage mock-broker` (librdkafka's mock cluster in a process of its own),
# driven through tests/harness.{h,c}.  Every later integration test registers
# here too, the same way: link harness.c, pass the binary in BLOOMSTAGE_BIN,
# label it `integration`, give it a TIMEOUT (the harness never waits without
# one, but ctest's is the last line of defence).
#
# test_harness proves the harness itself against the mock broker: start and
# control the broker, produce/consume with headers, committed offsets, fault
# injection, process helpers.
bs_add_cmocka_test(test_harness SOURCES test_harness.c harness.c
                   LIBS PkgConfig::RDKAFKA TIMEOUT 120 LABELS integration)
set_tests_properties(test_harness PROPERTIES
  ENVIRONMENT "BLOOMSTAGE_BIN=$<TARGET_FILE:bloomstage>")
