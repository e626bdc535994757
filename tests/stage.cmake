# Unit tests of the stage's own modules (no broker needed).
bs_add_cmocka_test(test_checkpoint
  SOURCES test_checkpoint.c
  LIBS bsengine TIMEOUT 120 LABELS stage)
