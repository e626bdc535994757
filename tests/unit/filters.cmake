# libbloomfilters tests (tests/test_{blocked,scalable,counting,estimate,format,windowed,audit}.c,
# shared helpers in harness/keys.h).  Each binary takes ~5-30 s in an -O2
# build; the timeouts leave room for the ASan/UBSan configuration (3-5x).
# An optional argument runs only the matching tests: ./test_format 'test_damage*'
bs_add_cmocka_test(test_blocked  SOURCES unit/test_blocked.c  LIBS bloomfilters TIMEOUT 300 LABELS filters)
bs_add_cmocka_test(test_scalable SOURCES unit/test_scalable.c LIBS bloomfilters TIMEOUT 300 LABELS filters)
bs_add_cmocka_test(test_counting SOURCES unit/test_counting.c LIBS bloomfilters TIMEOUT 300 LABELS filters)
bs_add_cmocka_test(test_estimate SOURCES unit/test_estimate.c LIBS bloomfilters TIMEOUT 300 LABELS filters)
bs_add_cmocka_test(test_format   SOURCES unit/test_format.c   LIBS bloomfilters TIMEOUT 300 LABELS filters)
# Filter files written by earlier versions (tests/data/: format version 1,
# and version 2 before k = 16 moved to 32-bit lanes) still load and answer
# as they did (~0.2 s).
bs_add_cmocka_test(test_legacy_files SOURCES unit/test_legacy_files.c LIBS bloomfilters TIMEOUT 60 LABELS filters)
target_compile_definitions(test_legacy_files PRIVATE
  BS_TEST_DATA_DIR="${PROJECT_SOURCE_DIR}/tests/data")
bs_add_cmocka_test(test_windowed SOURCES unit/test_windowed.c LIBS bloomfilters TIMEOUT 600 LABELS filters)
# Deltas of blocked and scalable filters: round trips bit for bit, damage
# and wrong bases named (~1 s).
bs_add_cmocka_test(test_delta SOURCES unit/test_delta.c LIBS bloomfilters TIMEOUT 120 LABELS filters)
# The audit sample: its sampling, exact set and file, and its interval
# against the true rate of an undersized filter over 20 seeds and of a
# scalable filter grown 1000x at fixed seeds (~3 s).
bs_add_cmocka_test(test_audit SOURCES unit/test_audit.c LIBS bloomfilters TIMEOUT 120 LABELS filters)
# The files of filters/ form layers, no dependency loop among them
# (scripts/check-layers, on the sources and the built library).  It checks
# the source's structure, which a sanitizer build does not change.
if(NOT BLOOMSTAGE_SANITIZE)
  add_test(NAME layers_filters
    COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/check-layers
            ${PROJECT_SOURCE_DIR}/filters $<TARGET_FILE:bloomfilters>)
  set_tests_properties(layers_filters PROPERTIES LABELS filters TIMEOUT 60)
endif()
