# bstestsupport: the support layer of the integration tests and of
# bench/e2e.c (tests/support/; support.h says what is where).  A static
# library without cmocka (bench/e2e builds without the tests), included
# from tests/integration.cmake and bench/e2e.cmake, defined by whichever
# comes first.
include_guard(GLOBAL)
add_library(bstestsupport STATIC
  ${CMAKE_CURRENT_LIST_DIR}/broker.c
  ${CMAKE_CURRENT_LIST_DIR}/core.c
  ${CMAKE_CURRENT_LIST_DIR}/crash.c
  ${CMAKE_CURRENT_LIST_DIR}/files.c
  ${CMAKE_CURRENT_LIST_DIR}/fixture.c
  ${CMAKE_CURRENT_LIST_DIR}/http.c
  ${CMAKE_CURRENT_LIST_DIR}/kafka.c
  ${CMAKE_CURRENT_LIST_DIR}/proc.c
  ${CMAKE_CURRENT_LIST_DIR}/proxy.c
  ${CMAKE_CURRENT_LIST_DIR}/realkafka.c
  ${CMAKE_CURRENT_LIST_DIR}/secure.c
  ${CMAKE_CURRENT_LIST_DIR}/stage.c
  ${CMAKE_CURRENT_LIST_DIR}/stream.c)
target_include_directories(bstestsupport PUBLIC ${CMAKE_CURRENT_LIST_DIR})
# bsengine: h_ckpt_next reads a dir store's chain with the store's own code.
target_link_libraries(bstestsupport PUBLIC bsengine PkgConfig::RDKAFKA Threads::Threads m)
# realkafka.c runs scripts/kafka: the source tree's unless $BS_KAFKA_SCRIPT.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/realkafka.c PROPERTIES
  COMPILE_DEFINITIONS "H_KAFKA_SCRIPT_DEFAULT=\"${PROJECT_SOURCE_DIR}/scripts/kafka\"")
# secure.c reads the ACLs a stage needs from the README's table.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/secure.c PROPERTIES
  COMPILE_DEFINITIONS "H_README_MD=\"${PROJECT_SOURCE_DIR}/README.md\"")
