# bench_growth: the scalable filter's growth policies (initial capacity,
# growth, tightening) by bytes per key, measured false-positive rate and
# lookup time, against the stage's default in the same run
# (bench/growth.c; bench/growth builds and runs it).  The filters' public
# API, harness/keys.h's keys and the support layer's h_sort_median.
add_executable(bench_growth ${CMAKE_CURRENT_LIST_DIR}/growth.c)
target_link_libraries(bench_growth PRIVATE bloomfilters bstestsupport m)
