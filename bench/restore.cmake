# bench_restore: the restore after a kill -9 on a 3-node Apache Kafka
# cluster, every broker up and one away, for each exactly_once method and
# membership (bench/restore.c; bench/restore builds a Release tree and runs
# it).  Included from bench/CMakeLists.txt.  Like bench_nemesis it runs the
# bloomstage binary and links the support layer (harness).
add_executable(bench_restore ${CMAKE_CURRENT_LIST_DIR}/restore.c)
target_link_libraries(bench_restore PRIVATE bstestsupport PkgConfig::RDKAFKA
  Threads::Threads m)
target_compile_definitions(bench_restore PRIVATE
  BENCH_BLOOMSTAGE_PATH="$<TARGET_FILE:bloomstage>")
add_dependencies(bench_restore bloomstage)
