# Operations: the files a container deployment uses stay true to the binary.
add_test(NAME spam_list_matches_demo
  COMMAND sh -c "$<TARGET_FILE:bloomstage> demo --print-spam-list | diff -u ${PROJECT_SOURCE_DIR}/config/spam-senders.txt -")
set_tests_properties(spam_list_matches_demo PROPERTIES LABELS ops)

# docker-compose.yml is validated with Debian's docker-compose (no Docker
# engine runs on these machines; `config` parses and checks the file only).
find_program(DOCKER_COMPOSE docker-compose)
if(DOCKER_COMPOSE)
  add_test(NAME compose_config_valid
    COMMAND ${DOCKER_COMPOSE} -f ${PROJECT_SOURCE_DIR}/docker-compose.yml config -q)
  set_tests_properties(compose_config_valid PROPERTIES LABELS ops)
else()
  message(WARNING "docker-compose not found: the compose file is not validated")
endif()

# deploy/alerts.yml, the Prometheus alert rules docs/operations.md
# ("Alerts") gives: valid rules (promtool check rules), and each alert firing when
# and only when its test case says (promtool test rules on
# deploy/alerts_test.yml's input series).  promtool is Debian's
# prometheus package (scripts/install-deps).
find_program(PROMTOOL promtool)
if(PROMTOOL)
  add_test(NAME alerts_check
    COMMAND ${PROMTOOL} check rules ${PROJECT_SOURCE_DIR}/deploy/alerts.yml)
  add_test(NAME alerts_test
    COMMAND ${PROMTOOL} test rules ${PROJECT_SOURCE_DIR}/deploy/alerts_test.yml)
  set_tests_properties(alerts_check alerts_test PROPERTIES LABELS ops
                       TIMEOUT 60)
else()
  message(WARNING "promtool not found: deploy/alerts.yml is not checked "
                  "(scripts/install-deps installs prometheus)")
endif()

# The docs against the code (scripts/check-docs): the key reference is
# `bloomstage config --list` and every key the docs name exists; the
# metrics table names exactly the families the stage exports; the fuzz
# table exactly fuzz/'s targets; the README's layout exactly the top-level
# directories; every relative link and anchor resolves.
foreach(check metrics fuzz layout links)
  add_test(NAME check_docs_${check}
    COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/check-docs ${check})
endforeach()
add_test(NAME check_docs_keys
  COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/check-docs keys
          $<TARGET_FILE:bloomstage>)
set_tests_properties(check_docs_metrics check_docs_fuzz check_docs_layout
                     check_docs_links check_docs_keys
                     PROPERTIES LABELS ops TIMEOUT 60)
