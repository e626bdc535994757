# bench_checkpoint: checkpoint size and time by filter size, dir and kafka
# stores (included from bench/CMakeLists.txt).
add_executable(bench_checkpoint checkpoint.c
  ${PROJECT_SOURCE_DIR}/stage/checkpoint.c
  ${PROJECT_SOURCE_DIR}/stage/store.c
  ${PROJECT_SOURCE_DIR}/stage/replay.c
  ${PROJECT_SOURCE_DIR}/stage/record_key.c
  ${PROJECT_SOURCE_DIR}/stage/log.c
  ${PROJECT_SOURCE_DIR}/stage/util.c)
target_include_directories(bench_checkpoint PRIVATE ${PROJECT_SOURCE_DIR}/stage)
target_link_libraries(bench_checkpoint PRIVATE bloomfilters bsconfig
  PkgConfig::RDKAFKA PkgConfig::JANSSON PkgConfig::XXHASH)
