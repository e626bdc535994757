# cli/ tests: the bloomstage binary's `filter build|info|query|merge` and
# `dedup` commands run from a shell as a user runs them (bash, coreutils,
# awk, grep, cmp, od, dd).  Each script prints `ok - ...` / `not ok - ...`
# per check and exits non-zero if any failed; every invocation must exit
# with exactly the expected status and leave no sanitizer report, so the
# ASan+UBSan run catches memory errors on these paths too.
if(TARGET bloomstage)
  add_test(NAME cli_filter
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/test_filter_cli.sh $<TARGET_FILE:bloomstage>)
  add_test(NAME cli_dedup
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/test_dedup_cli.sh $<TARGET_FILE:bloomstage>)
  # Every command and subcommand: --help exits 0 with its usage on
  # stdout, an unknown option exits 2 (commands read from --help).
  add_test(NAME cli_help
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cli/test_help.sh $<TARGET_FILE:bloomstage>)
  # The demo, the first thing a newcomer runs: it passes its own check
  # and logs no warning or error (librdkafka's included).
  add_test(NAME cli_demo
    COMMAND sh -c "\"$0\" demo --events 20000 2>\"$1\" | grep -qx '  OK: every unique event exactly once' &&
                   ! grep -E 'level=(warn|error)' \"$1\""
            $<TARGET_FILE:bloomstage> ${CMAKE_CURRENT_BINARY_DIR}/cli_demo.err)
  set_tests_properties(cli_filter cli_dedup cli_help cli_demo PROPERTIES TIMEOUT 300 LABELS cli)
else()
  message(WARNING "tests/cli/cli.cmake: no bloomstage target; the `bloomstage "
                  "filter` and `bloomstage dedup` CLI tests are not registered")
endif()
# cli/'s files form layers (scripts/check-layers): main.c on the commands,
# the commands on the shared option parsing, none on another command.
if(NOT BLOOMSTAGE_SANITIZE)
  add_test(NAME layers_cli
    COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/check-layers
            ${PROJECT_SOURCE_DIR}/cli $<TARGET_FILE:bscli>)
  set_tests_properties(layers_cli PROPERTIES LABELS cli TIMEOUT 60)
endif()
