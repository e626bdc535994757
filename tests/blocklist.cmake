# Live blocklists (blocklist.NAME.topic).
# test_blocklist: the list as data (stage/blocklist.c, no broker): records
# decoded, applied, the base file, growth, the measured rate.
include(${CMAKE_CURRENT_LIST_DIR}/support/support.cmake)
bs_add_cmocka_test(test_blocklist SOURCES test_blocklist.c
                   LIBS bsengine bstestsupport m TIMEOUT 120 LABELS stage)
