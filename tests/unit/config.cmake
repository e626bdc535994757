# config/ tests: libbsconfig's unit tests and the typed settings of the
# engine (test_settings).  `bloomstage config` as a user runs it is in
# tests/cli/config.cmake: its sample check diffs `bloomstage config
# --sample` against the checked-in config/bloomstage.conf; after changing
# config/keys.c, regenerate it with
# `bloomstage config --sample > config/bloomstage.conf`.
bs_add_cmocka_test(test_config SOURCES unit/test_config.c LIBS bsconfig
                   LABELS config)
# The unit test also compares the sample in-process, so the check holds even
# in a build without the binary.
target_compile_definitions(test_config PRIVATE
  BS_SAMPLE_CONF="${PROJECT_SOURCE_DIR}/config/bloomstage.conf")
# The typed settings the engine reads (stage/base/settings.h) against the table.
bs_add_cmocka_test(test_settings SOURCES unit/test_settings.c LIBS bsengine
                   LABELS config)

# config/'s files form layers (scripts/check-layers): the public config.h
# below config_int.h, the shared insides, below the files that use them.
if(NOT BLOOMSTAGE_SANITIZE)
  add_test(NAME layers_config
    COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/check-layers
            ${PROJECT_SOURCE_DIR}/config $<TARGET_FILE:bsconfig>)
  set_tests_properties(layers_config PROPERTIES LABELS config TIMEOUT 60)
endif()
