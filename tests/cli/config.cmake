# `bloomstage config` as a user runs it: the documents the key table
# drives, --check's verdicts and messages, usage errors, secrets never
# shown.  Label config.
if(TARGET bloomstage)
  set(_bs $<TARGET_FILE:bloomstage>)
  set(_conf ${PROJECT_SOURCE_DIR}/config/bloomstage.conf)
  # `env -i`: BLOOMSTAGE_* variables of whoever runs ctest must not leak in.
  add_test(NAME config_sample_matches_file
    COMMAND sh -c "env -i \"$0\" config --sample | diff -u \"$1\" -"
            ${_bs} ${_conf})
  add_test(NAME config_list
    COMMAND sh -c "out=$(env -i \"$0\" config --list) &&
                   printf '%s' \"$out\" | grep -q '^dedup.fpr ' &&
                   printf '%s' \"$out\" | grep -q '^blocklist.NAME.path '"
            ${_bs})
  # The sample with its required keys set is a valid configuration.
  add_test(NAME config_check_sample
    COMMAND env -i ${_bs} config --check -c ${_conf}
            -X input.topics=in -X output.topic=out)
  # A bad value: exit 1, the message names -X, key, value and range.
  add_test(NAME config_check_bad_value
    COMMAND sh -c "env -i \"$0\" config --check -c \"$1\" -X input.topics=in \
                     -X output.topic=out -X dedup.fpr=2 2>&1 >/dev/null |
                   grep -qxF \"bloomstage config: -X dedup.fpr=2: key 'dedup.fpr': value '2' out of range (0, 0.1]\" &&
                   { env -i \"$0\" config --check -X dedup.fpr=2 \
                       >/dev/null 2>&1; test $? -eq 1; }"
            ${_bs} ${_conf})
  # A port past 65535 (getaddrinfo would wrap it) and an empty
  # checkpoint.dir with the directory store: exit 1 naming the key.
  add_test(NAME config_check_port_and_empty_dir
    COMMAND sh -c "env -i \"$0\" config --check -X input.topics=in \
                     -X output.topic=out -X metrics.listen=127.0.0.1:99999 \
                     2>&1 >/dev/null |
                   grep -qxF \"bloomstage config: -X metrics.listen=127.0.0.1:99999: key 'metrics.listen': port 99999 out of range [1, 65535] (0: any free port)\" &&
                   env -i \"$0\" config --check -X input.topics=in \
                     -X output.topic=out -X checkpoint.dir= 2>&1 >/dev/null |
                   grep -qxF \"bloomstage config: -X checkpoint.dir=: key 'checkpoint.dir': must not be empty with checkpoint.store=dir\""
            ${_bs})
  # A typo in an environment variable is caught, with a suggestion.
  add_test(NAME config_check_env_typo
    COMMAND sh -c "env -i BLOOMSTAGE_DEDUP_FRP=0.01 \"$0\" config --check \
                     -X input.topics=in -X output.topic=out 2>&1 |
                   grep -qF \"did you mean 'dedup.fpr', set as BLOOMSTAGE_DEDUP_FPR?\""
            ${_bs})
  # Usage errors exit 2.
  add_test(NAME config_usage_errors
    COMMAND sh -c "for a in '' --bogus '--list --sample' '--list -c x' \
                     '--check -c'; do
                     \"$0\" config $a >/dev/null 2>&1; rc=$?
                     [ $rc -eq 2 ] || { echo \"config $a: exit $rc\"; exit 1; }
                   done"
            ${_bs})
  # A secret set by -X, env, _FILE and @file: is printed 0 times by
  # `config --check` and `config --list`, on success and on errors.
  add_test(NAME config_secrets_never_shown
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cli/config_secrets.sh ${_bs})
  set_tests_properties(config_sample_matches_file config_list
    config_check_sample config_check_bad_value config_check_env_typo
    config_check_port_and_empty_dir
    config_usage_errors config_secrets_never_shown
    PROPERTIES LABELS config TIMEOUT 60)
else()
  message(WARNING "tests/cli/config.cmake: no bloomstage target; the "
                  "`bloomstage config` tests are not registered")
endif()
