# Integration tests: the real bloomstage binary run as a user runs it, against
# `bloomstage mock-broker` (librdkafka's mock cluster in a process of its own),
# driven through the support layer, harness/ (the static library
# bstestsupport, which bench/e2e.c uses too).  Every integration test
# registers the same way: link bstestsupport, pass the binary in
# BLOOMSTAGE_BIN, label it `integration`, give it a TIMEOUT (the support
# layer never waits without one, but ctest's is the last line of defence).
#
# test_harness proves the support layer itself against the mock broker:
# start and control the broker, produce/consume with headers (and
# read_committed), committed offsets, fault injection, process helpers.
bs_add_cmocka_test(test_harness SOURCES stage/test_harness.c
                   LIBS bstestsupport TIMEOUT 120 LABELS integration)
set_tests_properties(test_harness PROPERTIES
  ENVIRONMENT "BLOOMSTAGE_BIN=$<TARGET_FILE:bloomstage>")

# test_proxy: the support layer's TCP proxy (support/proxy.h), whose links
# the nemesis cuts, slows and heals, against an echo server.  Seconds.
bs_add_cmocka_test(test_proxy SOURCES stage/test_proxy.c
                   LIBS bstestsupport TIMEOUT 120 LABELS integration)

# test_window: windowed dedup (dedup.window.ms) end to end against the mock:
# the output against a model of the window over 100 windows of record time,
# across kill -9 under exactly_once; late records rejected and forwarded; a
# rebalance and a kill moving generations through the Kafka store; /metrics.
# ~1-2 min.
bs_add_cmocka_test(test_window SOURCES stage/test_window.c
                   LIBS bstestsupport TIMEOUT 600 LABELS integration)
set_tests_properties(test_window PROPERTIES
  ENVIRONMENT "BLOOMSTAGE_BIN=$<TARGET_FILE:bloomstage>")
