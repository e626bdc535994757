# bench_ckpt_delta: incremental vs full checkpoints of the dir store by
# filter size and keys added, and the restore of a chain vs one snapshot
# (included from bench/CMakeLists.txt).
add_executable(bench_ckpt_delta ckpt_delta.c)
target_link_libraries(bench_ckpt_delta PRIVATE bsengine)
