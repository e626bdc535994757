# Unit tests of the stage's own modules (no broker needed).
bs_add_cmocka_test(test_checkpoint
  SOURCES test_checkpoint.c ${PROJECT_SOURCE_DIR}/stage/checkpoint.c
  LIBS bloomfilters PkgConfig::XXHASH TIMEOUT 120 LABELS stage)
target_include_directories(test_checkpoint PRIVATE ${PROJECT_SOURCE_DIR}/stage)
