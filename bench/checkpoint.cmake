# bench_checkpoint: checkpoint size and time by filter size, dir and kafka
# stores (included from bench/CMakeLists.txt).
add_executable(bench_checkpoint checkpoint.c)
target_link_libraries(bench_checkpoint PRIVATE bsengine)
