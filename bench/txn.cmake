# bench_txn: the latency exactly_once by Kafka transactions adds (append ->
# visible to a read_committed consumer, p50/p99) at several checkpoint
# intervals, against at_least_once, and where a round's time goes
# (--breakdown), on a real Apache Kafka broker
# (bench/txn.c; bench/txn starts the broker, builds a Release tree and runs
# it).  Like bench_e2e it runs the bloomstage binary and links the support
# layer (harness, bstestsupport).
add_executable(bench_txn ${CMAKE_CURRENT_LIST_DIR}/txn.c)
target_link_libraries(bench_txn PRIVATE bstestsupport PkgConfig::RDKAFKA
  Threads::Threads m)
# stage/base/timeouts.h: the rollback's timeouts are the stage's.
target_include_directories(bench_txn PRIVATE ${PROJECT_SOURCE_DIR}/stage)
target_compile_definitions(bench_txn PRIVATE
  BENCH_BLOOMSTAGE_PATH="$<TARGET_FILE:bloomstage>")
add_dependencies(bench_txn bloomstage)
