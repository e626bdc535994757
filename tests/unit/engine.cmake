# Unit tests of the engine's own modules (no broker needed).
bs_add_cmocka_test(test_checkpoint
  SOURCES unit/test_checkpoint.c
  LIBS bsengine TIMEOUT 120 LABELS stage)
# A checkpoint of format version 1 (before seq and ids) still loads.
target_compile_definitions(test_checkpoint PRIVATE
  BS_TEST_DATA_DIR="${PROJECT_SOURCE_DIR}/tests/data")
# test_state: the engine's state machine (stage/core/state.c) with its checks
# compiled in whatever the build's BLOOMSTAGE_CHECKS: legal moves pass,
# illegal ones and broken invariants abort.  Its own state.o comes first,
# so the library's copy is not linked.
bs_add_cmocka_test(test_state
  SOURCES unit/test_state.c ${PROJECT_SOURCE_DIR}/stage/core/state.c
  LIBS bsengine TIMEOUT 60 LABELS stage)
# It also checks DESIGN.md's lists of legal moves against state.c's tables.
target_compile_definitions(test_state PRIVATE BLOOMSTAGE_CHECKS=1
  BS_DESIGN_MD="${PROJECT_SOURCE_DIR}/DESIGN.md")

# test_util: the engine's small shared helpers (stage/base/util.c).
bs_add_cmocka_test(test_util
  SOURCES unit/test_util.c
  LIBS bsengine TIMEOUT 60 LABELS stage)

# test_txn_id: the transactional id a stage derives and the host slots
# behind it (stage/kafka/txn_id.c), with slot files in a directory of its own.
bs_add_cmocka_test(test_txn_id
  SOURCES unit/test_txn_id.c
  LIBS bsengine TIMEOUT 60 LABELS stage)

# test_startup: start-up's errors (stage/core/startup.c): the verdict on each
# error code, what /ready says at each step, the error lines' rate limit.
bs_add_cmocka_test(test_startup
  SOURCES unit/test_startup.c
  LIBS bsengine TIMEOUT 60 LABELS stage)

# test_rebalance: the consumer's rebalance callback (stage/loop/rebalance.c)
# after the consumer's close and once a stop is requested, on a consumer
# that reaches no broker.
bs_add_cmocka_test(test_rebalance
  SOURCES unit/test_rebalance.c
  LIBS bsengine TIMEOUT 60 LABELS stage)

# The engine's rooms and modules form layers (scripts/check-layers
# --rooms): no file of stage/ depends, through its includes or its
# object's symbols, on one that depends back on it, no room on a room that
# depends back on it; and DESIGN.md's file table lists every module, room
# by room, top layer first.  A property of the sources: checked in the plain build, not
# again under the sanitizers.
if(NOT BLOOMSTAGE_SANITIZE)
  add_test(NAME layers_engine
    COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/check-layers --rooms
            --table ${PROJECT_SOURCE_DIR}/DESIGN.md
            ${PROJECT_SOURCE_DIR}/stage $<TARGET_FILE:bsengine>)
  set_tests_properties(layers_engine PROPERTIES TIMEOUT 60 LABELS stage)
endif()

# test_blocklist: the list as data (stage/keys/blocklist.c, no broker): records
# decoded, applied, the base file, growth, the measured rate.
bs_add_cmocka_test(test_blocklist SOURCES unit/test_blocklist.c
                   LIBS bsengine bstestsupport m TIMEOUT 120 LABELS stage)

# test_log: the engine's log lines as bytes (stage/base/log.c): text from
# outside that is not UTF-8, or holds control characters, is written \xNN.
bs_add_cmocka_test(test_log SOURCES unit/test_log.c LIBS bsengine
                   TIMEOUT 60 LABELS stage)
