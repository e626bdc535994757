/*
 * core.h -- the support layer's ground floor: errors, memory, the clock,
 * the benches' median, random numbers, the environment, how a helper fails
 * the running test, and every timeout the layer waits with.
 *
 * Conventions, for the whole layer (harness/):
 *   - an h_ function returning int returns 0 on success and -1 on failure
 *     (h_process_wait also 1 on a timeout), with a one-line reason in
 *     h_last_error(); it prints nothing, since tests provoke failures on
 *     purpose.  These are what bench/e2e.c uses;
 *   - the helpers that check (h_stage_*, h_wait_*, h_expect_*, h_read_out,
 *     h_count_copies, h_kill_at, ...; void or returning a value) fail the
 *     running test themselves, through h_test_fail(): in a cmocka test
 *     that is fail_msg() (h_test_main installs it); elsewhere the message
 *     is printed and the process exits 1;
 *   - every wait has a timeout (below): a broken broker or stage fails the
 *     test, it never hangs it;
 *   - objects come in _new/_free pairs (or start/stop); free accepts NULL.
 * Not thread-safe: one thread uses the layer (librdkafka's own threads, and
 * bench/e2e.c's observer thread reading the clock, are fine).
 */
#ifndef BS_SUPPORT_CORE_H
#define BS_SUPPORT_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define H_WARN_UNUSED __attribute__((warn_unused_result))
#define H_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define H_NORETURN __attribute__((noreturn))

/* ---- timeouts ----------------------------------------------------------
 *
 * One value each.  Where the tests' own copies had drifted apart, the
 * larger was kept, so that no test waits less than it used to. */

/* mock-broker: its bootstrap line, the answer to a control command, its
 * exit after SIGTERM.  tests/harness.c waited 10 s for the bootstrap line,
 * bench/e2e.c 20 s. */
#define H_BROKER_MS 20000
/* One Kafka request of a helper: metadata, watermarks, committed offsets. */
#define H_REQUEST_MS 10000
/* h_produce's message.timeout.ms (its flush waits 5 s more). */
#define H_MESSAGE_MS 10000
/* A stage exits: after SIGTERM (it drains first) or after a fatal error.
 * test_stage and test_metrics waited 30 s, test_stage_faults and test_eos
 * 60 s. */
#define H_EXIT_MS 60000
/* A process killed with SIGKILL is reaped. */
#define H_REAP_MS 10000
/* A short bloomstage command (filter build, checkpoint info) exits. */
#define H_CMD_MS 60000
/* A topic is read to its end (h_consume_all from the checking helpers):
 * test_harness, test_stage and test_metrics read with 20 s,
 * test_stage_faults' read_out with 60 s, test_eos' with 180 s. */
#define H_CONSUME_MS 180000
/* Output topics reach the size a test expects (h_wait_totals). */
#define H_OUTPUT_MS 30000
/* The moment of a kill plan comes (h_kill_at): a log line, output growth,
 * a checkpoint. */
#define H_KILL_WAIT_MS 120000
/* h_topic_end retries a failing watermark query this long (a topic error
 * injected in the mock is cached by the client until its next metadata
 * refresh). */
#define H_QUERY_RETRY_MS 15000

/* ---- errors ------------------------------------------------------------ */

/* The reason for the last failure ("" if none yet); valid until the next
 * h_ call. */
const char *h_last_error(void);
/* Records a reason; returns -1, for `return h_fail(...)`. */
int h_fail(const char *fmt, ...) H_PRINTF(1, 2);

/* Fails the running test with the message (see the conventions above). */
void h_test_fail(const char *fmt, ...) H_PRINTF(1, 2) H_NORETURN;
/* What h_test_fail calls with the formatted message; it must not return
 * (cmocka's fail_msg longjmps).  NULL: print and exit 1. */
void h_set_fail_hook(void (*hook)(const char *msg));

/* Fails the test with the expression and h_last_error() (and librdkafka's
 * recent log) unless expr is 0.  For the layer's own code; tests use
 * H_CHECK (support.h), which reports the test's own line. */
#define H_MUST(expr)                                                         \
    do {                                                                     \
        if ((expr) != 0)                                                     \
            h_must_failed(#expr);                                            \
    } while (0)
void h_must_failed(const char *expr) H_NORETURN;

/* ---- memory and strings (abort on out-of-memory) ----------------------- */

void *h_xmalloc(size_t n);
void *h_xcalloc(size_t n, size_t size);
void *h_xrealloc(void *p, size_t n);
char *h_xstrdup(const char *s);
/* asprintf; free() the result. */
char *h_strdupf(const char *fmt, ...) H_PRINTF(1, 2);

/* ---- the clock --------------------------------------------------------- */

/* Monotonic seconds and milliseconds. */
double h_now_s(void);
int64_t h_now_ms(void);
/* Wall-clock seconds since the epoch. */
double h_wall_s(void);
void h_sleep_ms(int ms);
/* Sleeps ms, calling the idle hook every 2 ms meanwhile (test_eos feeds its
 * input from there); without a hook, h_sleep_ms.  Every wait loop of the
 * checking helpers sleeps with it. */
void h_nap(int ms);
void h_set_idle_hook(void (*hook)(void *arg), void *arg);

/* ---- the benches' statistics ------------------------------------------- */

/* Sorts v[0..n) ascending and returns its median (the middle value, the
 * mean of the two middle ones for even n, 0 for none): the benches print
 * it with v[0] and v[n - 1] as the spread of their rounds. */
double h_sort_median(double *v, size_t n);

/* ---- random numbers ---------------------------------------------------- */

/* splitmix64 of x (the state advanced once, then mixed). */
uint64_t h_mix64(uint64_t x);
/* The next number of the splitmix64 sequence in *state. */
uint64_t h_splitmix64(uint64_t *state);
/* The smallest c with P(X > c) <= alpha for X ~ Poisson(mean), mean up to
 * a few hundred: a count of false positives above it breaks the rate it
 * was measured against (the benchmarks' fpr checks). */
uint64_t h_poisson_upper(double mean, double alpha);
/* The next number of the xorshift32 sequence in *state (not 0). */
uint32_t h_xorshift32(uint32_t *state);

/* ---- the environment --------------------------------------------------- */

/* Removes every variable whose name starts with prefix. */
void h_env_scrub(const char *prefix);

#endif
