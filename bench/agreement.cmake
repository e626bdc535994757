# bench_agreement: the audit sample's 95% interval against the true rate of
# unique keys dropped, over seeded streams through the stage's kind of
# scalable filter (bench/agreement.c; bench/agreement builds and runs it).
# The filters' public API, the stream of harness/audit_agree.h (shared with
# tests/unit/test_audit.c) and the support layer's h_sort_median (harness).
add_executable(bench_agreement ${CMAKE_CURRENT_LIST_DIR}/agreement.c)
target_link_libraries(bench_agreement PRIVATE bloomfilters bstestsupport
  Threads::Threads m)
