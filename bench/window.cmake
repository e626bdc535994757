# bench_window: windowed dedup (24 h window) over synthetic days of traffic,
# time compressed through record timestamps, against unwindowed dedup and an
# exact hash set of the window's keys (bench/window.c).  The filters' public
# API, and the support layer's stream generator (harness, bstestsupport).
add_executable(bench_window window.c)
target_link_libraries(bench_window PRIVATE bloomfilters bstestsupport m)

# bench_window_kafka: the same job on a real broker, bloomstage against its
# Kafka Streams peer (bench/window_kafka.c; `bench/e2e --kafka --window`
# builds and runs it).  Runs the bloomstage binary, like bench_e2e.
add_executable(bench_window_kafka window_kafka.c)
target_link_libraries(bench_window_kafka PRIVATE bsengine bstestsupport
  PkgConfig::RDKAFKA Threads::Threads m)
target_compile_definitions(bench_window_kafka PRIVATE
  BENCH_BLOOMSTAGE_PATH="$<TARGET_FILE:bloomstage>")
add_dependencies(bench_window_kafka bloomstage)
