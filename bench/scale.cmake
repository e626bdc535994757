# bench_scale: bloomstage at scale on a real Apache Kafka broker (20M
# records, 10M keys by default, a kill -9 and restore part way; bench/scale.c;
# bench/scale starts the broker, builds a Release tree and runs it).
# Included from bench/CMakeLists.txt.  Like bench_e2e it runs the bloomstage
# binary and links the support layer (harness, bstestsupport).
add_executable(bench_scale ${CMAKE_CURRENT_LIST_DIR}/scale.c)
target_link_libraries(bench_scale PRIVATE bsengine bstestsupport PkgConfig::RDKAFKA
  Threads::Threads m)
target_compile_definitions(bench_scale PRIVATE
  BENCH_BLOOMSTAGE_PATH="$<TARGET_FILE:bloomstage>")
add_dependencies(bench_scale bloomstage)
