# container/ tests: the image built from the working tree and the compose
# stack run with Docker (tests/container/test_container.sh): the model of
# the demo producer's stream at read_committed, /metrics, the HEALTHCHECK,
# a drain and a SIGKILL with restarts, the hardening docker inspect shows,
# bad input.  Needs a Docker daemon and the base and Kafka images, which
# `scripts/container setup` provides (scripts/test runs it first; the test
# runs it too, a no-op once done): a machine where that fails fails the
# test, saying why.  Label container.  Run in the plain build only: the
# image does not depend on the build directory.  A high COST starts it
# first; its own RESOURCE_LOCK keeps two runs from sharing the daemon's
# CPU.  The timeout covers a machine's first run, when the test waits for
# the set-up (debootstrap, the Kafka stand-in) and builds the image cold.
if(NOT BLOOMSTAGE_SANITIZE)
  add_test(NAME container_stack
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/container/test_container.sh)
  set_tests_properties(container_stack PROPERTIES
    LABELS container TIMEOUT 1200 COST 1000 RESOURCE_LOCK docker)
endif()
