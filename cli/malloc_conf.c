/*
 * malloc_conf.c -- jemalloc's options for the programs linked with it
 * (bloomstage, and bench/e2e's pass-through child that stands for the
 * stage's limit).  jemalloc reads this global at start-up; the
 * MALLOC_CONF environment variable still overrides it.  Without jemalloc
 * (the sanitizer builds, BLOOMSTAGE_JEMALLOC=OFF) nothing reads it.
 *
 * dirty_decay_ms: freed pages go back to the system after 1 s instead of
 * jemalloc's 10 s.  librdkafka allocates every record on its broker
 * threads and frees it on the stage thread; with the 10 s default the
 * pages of a burst stay resident long after it, and the stage's peak RSS
 * is a multiple of what it holds live.
 *
 * narenas:1: one arena instead of four per core.  The stage's threads are
 * librdkafka's (a few per client) and its own; spread over many arenas
 * their freed pages are reused less, so one arena gives a lower peak at
 * the same rate (bench/README.md, bench/e2e, has the figures).
 */
const char *malloc_conf = "narenas:1,dirty_decay_ms:1000";
