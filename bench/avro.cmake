# bench_avro: the cost of one Avro key (formats/avro.c) on a 10-field,
# ~200-byte record, the walker against avro-c's generic value reader, and
# of a domain's lookups (bench/avro.c; run build-bench/bench/bench_avro in
# a Release tree).
add_executable(bench_avro ${CMAKE_CURRENT_LIST_DIR}/avro.c)
target_link_libraries(bench_avro PRIVATE bsformats)
