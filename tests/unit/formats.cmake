# bsformats tests (formats/): the key encoding and the record decoders.
bs_add_cmocka_test(test_fm_key SOURCES unit/test_fm_key.c LIBS bsformats TIMEOUT 60 LABELS formats)
# formats/'s files form layers, like filters/'s.
if(NOT BLOOMSTAGE_SANITIZE)
  add_test(NAME layers_formats
    COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/check-layers
            ${PROJECT_SOURCE_DIR}/formats $<TARGET_FILE:bsformats>)
  set_tests_properties(layers_formats PROPERTIES LABELS formats TIMEOUT 60)
endif()
