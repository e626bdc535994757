# bench_e2e: bloomstage end to end against a minimal librdkafka
# consume -> produce pass-through, on one mock Kafka cluster (bench/e2e.c;
# bench/e2e builds a Release tree and runs it).  Included from
# bench/CMakeLists.txt.
#
# It runs the bloomstage binary (`mock-broker`, `run`) rather than linking
# the stage, so it depends on the target and is told where the binary is;
# --bloomstage or $BLOOMSTAGE_BIN override that at run time.  Its processes,
# mock broker and Kafka helpers are the integration tests' support layer
# (harness/, bstestsupport: no cmocka in it, so this builds with
# BLOOMSTAGE_TESTS=OFF too).
add_executable(bench_e2e ${CMAKE_CURRENT_LIST_DIR}/e2e.c)
target_link_libraries(bench_e2e PRIVATE bsengine bstestsupport PkgConfig::RDKAFKA
  Threads::Threads)
target_compile_definitions(bench_e2e PRIVATE
  BENCH_BLOOMSTAGE_PATH="$<TARGET_FILE:bloomstage>")
add_dependencies(bench_e2e bloomstage)

# bench_e2e_je: the same source linked with jemalloc, as bloomstage is
# (cli/CMakeLists.txt), run by bench_e2e as a child for its
# pass-through-je phase (--pass-child): the pass-through on bloomstage's
# allocator, so that the allocator's share of the ratio shows.  Without
# jemalloc in the tree (BLOOMSTAGE_JEMALLOC=OFF, the sanitizers) it is not
# built and bench_e2e skips that phase, saying why.
if(TARGET PkgConfig::JEMALLOC)
  add_executable(bench_e2e_je ${CMAKE_CURRENT_LIST_DIR}/e2e.c
    ${PROJECT_SOURCE_DIR}/cli/malloc_conf.c)
  target_link_libraries(bench_e2e_je PRIVATE bsengine bstestsupport PkgConfig::RDKAFKA
    PkgConfig::JEMALLOC Threads::Threads)
  target_compile_definitions(bench_e2e_je PRIVATE BENCH_E2E_JE=1)
  target_compile_definitions(bench_e2e PRIVATE
    BENCH_E2E_JE_PATH="$<TARGET_FILE:bench_e2e_je>")
  add_dependencies(bench_e2e bench_e2e_je)
endif()
