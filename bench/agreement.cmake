# bench_agreement: the audit sample's 95% interval against the true rate of
# unique keys dropped, over seeded streams through the stage's kind of
# scalable filter (bench/agreement.c; bench/agreement builds and runs it).
# The filters' public API, the stream of tests/audit_agree.h (shared with
# tests/test_audit.c) and the support layer's h_sort_median (tests/support).
include(${PROJECT_SOURCE_DIR}/tests/support/support.cmake)
add_executable(bench_agreement ${CMAKE_CURRENT_LIST_DIR}/agreement.c)
target_include_directories(bench_agreement PRIVATE ${PROJECT_SOURCE_DIR}/tests)
target_link_libraries(bench_agreement PRIVATE bloomfilters bstestsupport
  Threads::Threads m)
