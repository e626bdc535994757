# bench_window: windowed dedup (24 h window) over synthetic days of traffic,
# time compressed through record timestamps, against unwindowed dedup and an
# exact hash set of the window's keys (bench/window.c).  Public API only.
add_executable(bench_window window.c)
target_link_libraries(bench_window PRIVATE bloomfilters m)
