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

# deploy/alerts.yml, the Prometheus alert rules README.md ("Metrics")
# gives: valid rules (promtool check rules), and each alert firing when
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
