# bench_ckpt_delta: incremental vs full checkpoints by filter size and keys
# added, and the restore of a chain vs one snapshot, for the dir store or
# (--kafka) the Kafka store on a real broker (included from
# bench/CMakeLists.txt).  It links the support layer (harness,
# bstestsupport) for the broker.
add_executable(bench_ckpt_delta ckpt_delta.c)
target_link_libraries(bench_ckpt_delta PRIVATE bstestsupport bsengine)
