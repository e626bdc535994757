# bench_blocklist: live blocklists at size on a real Apache Kafka broker
# (bench/blocklist.c; bench/blocklist builds a Release tree and runs it):
# `bloomstage blocklist load` and the stage's bootstrap of 1M entries, each
# against a baseline of the same run.  Runs the bloomstage binary and links
# the support layer (harness, bstestsupport).
add_executable(bench_blocklist ${CMAKE_CURRENT_LIST_DIR}/blocklist.c)
target_link_libraries(bench_blocklist PRIVATE bstestsupport PkgConfig::RDKAFKA
  m)
target_compile_definitions(bench_blocklist PRIVATE
  BENCH_BLOOMSTAGE_PATH="$<TARGET_FILE:bloomstage>")
add_dependencies(bench_blocklist bloomstage)
