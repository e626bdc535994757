# test_eos: exactly-once output (processing.guarantee=exactly_once, output-
# tail replay) and scale-out (checkpoint.store=kafka), end to end on the real
# binary against `bloomstage mock-broker`: kill -9 at many moments and
# restart (with an at_least_once control run), delivery failures that roll
# back, two instances with one killed, a graceful cooperative rebalance, and
# a printed table of restart replay times against records since the last
# checkpoint.  ~4-5 min in an -O2 build; BS_EOS_ONLY=PATTERN runs some.
bs_add_cmocka_test(test_eos SOURCES stage/test_eos.c LIBS bstestsupport TIMEOUT 900 LABELS integration)
set_tests_properties(test_eos PROPERTIES ENVIRONMENT "BLOOMSTAGE_BIN=$<TARGET_FILE:bloomstage>")
