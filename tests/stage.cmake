# Unit tests of the stage's own modules (no broker needed).
bs_add_cmocka_test(test_checkpoint
  SOURCES test_checkpoint.c
  LIBS bsengine TIMEOUT 120 LABELS stage)
# test_state: the engine's state machine (stage/state.c) with its checks
# compiled in whatever the build's BLOOMSTAGE_CHECKS: legal moves pass,
# illegal ones and broken invariants abort.  Its own state.o comes first,
# so the library's copy is not linked.
bs_add_cmocka_test(test_state
  SOURCES test_state.c ${PROJECT_SOURCE_DIR}/stage/state.c
  LIBS bsengine TIMEOUT 60 LABELS stage)
target_compile_definitions(test_state PRIVATE BLOOMSTAGE_CHECKS=1)
