# bench_nemesis: a fault schedule on a 3-node Apache Kafka cluster with an
# oracle over everything that came out (harness/nemesis.c, which ctest's
# test_kafka_nemesis runs for a short schedule; bench/nemesis builds a
# Release tree and runs it for a soak).  Included from
# bench/CMakeLists.txt.  Like bench_scale it runs the bloomstage binary and
# links the support layer (harness, bstestsupport).
add_executable(bench_nemesis ${PROJECT_SOURCE_DIR}/harness/nemesis.c)
target_link_libraries(bench_nemesis PRIVATE bstestsupport PkgConfig::RDKAFKA Threads::Threads m)
target_compile_definitions(bench_nemesis PRIVATE BENCH_BLOOMSTAGE_PATH="$<TARGET_FILE:bloomstage>")
add_dependencies(bench_nemesis bloomstage)
