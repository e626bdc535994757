/*
 * stage.h -- the bloomstage binary under test, run as a user runs it: the
 * binary's path, `bloomstage run` processes (start with a configuration,
 * stop gracefully, kill -9, wait for a log line), short commands, the
 * stage's files and log lines, and waits on what it produces and commits.
 *
 * Every process started here is remembered until h_proc_release (or the
 * fixture's teardown, h_fixture_teardown, which kills and frees whatever a
 * failed test left running).  The void helpers check and fail the running
 * test (core.h), printing the stage's stderr (the last 12000 bytes; all of
 * it with the verbose variable set, see h_stage_debug_env).
 */
#ifndef BS_SUPPORT_STAGE_H
#define BS_SUPPORT_STAGE_H

#include "core.h"
#include "proc.h"

#include <librdkafka/rdkafka.h>

#include <stddef.h>
#include <stdint.h>

/* ---- the binary -------------------------------------------------------- */

/* The binary under test: $BLOOMSTAGE_BIN (ctest passes
 * $<TARGET_FILE:bloomstage>), as h_test_init copied it before scrubbing the
 * environment.  NULL, with h_last_error() set, when unset. */
const char *h_bloomstage_path(void);

/*
 * What every integration test's main() does first (h_test_main in
 * support.h does it and more): copy the binary's path, then remove every
 * BLOOMSTAGE_* variable from the environment (the stage reads each as a
 * configuration key, BLOOMSTAGE_BIN as 'unknown key bin', and no caller's
 * setting may leak into a test); ignore SIGPIPE.  -1 if there is no binary.
 */
int h_test_init(void) H_WARN_UNUSED;

/* Debugging aids, named per test (either may be NULL): with verbose_env
 * set, every stage's whole stderr is printed when it stops, is killed or
 * fails a test; stage_x_env="k=v k=v" adds -X settings to every stage
 * h_stage_start starts. */
void h_stage_debug_env(const char *verbose_env, const char *stage_x_env);

/* ---- processes --------------------------------------------------------- */

/* `bloomstage ARGS...` (args NULL-terminated), env added to the
 * environment (may be NULL); remembered. */
h_proc *h_bs_spawn(const char *const *args, char *const *env);
/* `bloomstage run -c conf [-X x]...` (xs NULL-terminated, may be NULL),
 * plus the stage_x_env settings; remembered. */
h_proc *h_stage_start(const char *conf, const char *const *xs,
                      char *const *env);
/* A short command (filter build, checkpoint info): it must exit `want`
 * within H_CMD_MS.  Remembered (its output stays readable). */
h_proc *h_bs_cmd(const char *const *args, int want);
/* Kills (if running) and frees p, and forgets it.  NULL: no-op. */
void h_proc_release(h_proc *p);
/* h_proc_release of every process remembered. */
void h_proc_release_all(void);

/* Fails the test with the message, printing p's stderr first (NULL: no
 * process to print). */
void h_stage_fail(h_proc *p, const char *fmt, ...) H_PRINTF(2, 3) H_NORETURN;
/* The stage must still be running. */
void h_stage_alive(h_proc *p, const char *when);
/* Each of procs (NULL-terminated; NULL is none) must still be running. */
void h_stages_alive(h_proc *const *procs, const char *when);
/* SIGTERM: the stage drains and must exit 0 within H_EXIT_MS. */
void h_stage_stop(h_proc *p);
/* SIGKILL; the stage must have been running until then (`when` says what
 * the moment was), and is reaped within H_REAP_MS. */
void h_stage_kill9(h_proc *p, const char *when);

/* ---- its log ----------------------------------------------------------- */

/* The lines tests wait for and count (docs/operations.md, "Logs"). */
#define H_SAID_ASSIGNED "msg=\"partition assigned\""
#define H_SAID_CKPT "msg=checkpoint " /* log.level=debug, one per round */
#define H_SAID_REPLAYED "msg=\"output tail replayed\""
#define H_SAID_ROLLBACK "delivery failed, rolling back"
#define H_SAID_TXN "msg=\"exactly_once method\" method=transactions"
#define H_SAID_FENCED "msg=\"fenced:"

/* Whether p's stderr holds needle; how many times. */
bool h_said(h_proc *p, const char *needle);
size_t h_count_said(h_proc *p, const char *needle);
/* p's stderr must hold needle. */
void h_expect_said(h_proc *p, const char *needle);
/* Waits (h_nap) until p's stderr holds needle at least n times; the stage
 * must stay alive meanwhile. */
void h_wait_said(h_proc *p, const char *needle, size_t n, int timeout_ms);

/* ---- its endpoint (metrics.listen) ------------------------------------- */

/* The port of p's `msg="metrics listening" ... port=N` line, waited for
 * up to timeout_ms (fails the test if p exits first or the line has no
 * port). */
unsigned h_stage_metrics_port(h_proc *p, int timeout_ms);
/* While p starts and no broker lets it: /healthz 200 "ok", and /ready 503
 * "starting: connecting to brokers..." naming one of `errors` (substrings,
 * NULL-terminated) within timeout_ms.  The reason into why; the seconds it
 * took.  Fails the test otherwise. */
double h_stage_start_reason(h_proc *p, unsigned port,
                            const char *const *errors, int timeout_ms,
                            char *why, size_t why_size);

/* One series' value (e.g. "bloomstage_blocklist_entries{list=\"x\"}") of
 * the /metrics on port, parsed strictly (a body that does not parse fails
 * the test); NaN if nothing answered 200 or the series is absent. */
double h_stage_metric(unsigned port, const char *series);

/* p is `bloomstage checkpoint info ...`: its lines for topic list exactly
 * partitions 0..parts-1, each at next_offset want[p] and verified (fails
 * the test otherwise). */
void h_expect_ckpt_info(h_proc *p, const char *topic, const int64_t *want,
                        int parts);

/* The integer value of key=N in a logfmt line (bare), or -1 if absent. */
long long h_log_int(const char *line, const char *key);
/* The number of key=X in a logfmt line (bare, as strtod reads it), or NaN
 * if absent or not a number. */
double h_log_double(const char *line, const char *key);
/* How many of p's `partition assigned` lines of topic restored a
 * checkpoint (checkpoint_offset > 0): partitions that came with their
 * state. */
size_t h_count_restored(h_proc *p, const char *topic);

/* One `partition assigned` (revoked = false) or `partition revoked` line
 * of p's log. */
typedef struct h_assigned {
    int32_t partition;
    bool revoked;
    long long ckpt; /* checkpoint_offset (assigned lines) */
    size_t fwd;     /* already_forwarded (assigned lines) */
} h_assigned;
/* What h_partition_line found in a log line. */
typedef enum {
    H_LINE_OTHER,     /* no partition message, or another topic's */
    H_LINE_PENDING,   /* assigned with its restore deferred (restore=pending):
                         its "partition restored" line says where */
    H_LINE_BAD,       /* the topic's partition message, not parsing */
    H_LINE_PARTITION, /* *out filled: assigned, restored or revoked */
} h_line_kind;
/* The first `partition revoked`, `assigned` or `restored` message in text
 * (a log line, or a log from that line on), if it is topic's.  The one
 * reading of those lines, for the tests (h_parse_assigned) and the benches
 * that read a stage's log file. */
h_line_kind h_partition_line(const char *text, const char *topic,
                             h_assigned *out);
/* p's assignment lines for topic, in the order logged, at most max into
 * out; returns how many there are.  An assignment whose restore was
 * deferred ("partition assigned ... restore=pending") counts where its
 * "partition restored" line is, with that line's offsets; one revoked
 * before that never counts as assigned.  A line that does not parse fails
 * the test. */
size_t h_parse_assigned(h_proc *p, const char *topic, h_assigned *out,
                        size_t max);
/* topic's partitions (< 32) p holds now -- assigned and not revoked since
 * -- as a mask; `ever`: every one it was ever assigned. */
unsigned h_assigned_mask(h_proc *p, const char *topic, bool ever);
/* Waits (h_nap) until p holds every partition in `want` of topic (a
 * takeover: after a member's kill or stop); p must stay alive meanwhile.
 * Fails after timeout_ms, naming p as `who`. */
void h_wait_holds(h_proc *p, const char *topic, unsigned want,
                  int timeout_ms, const char *who);
/* A line's leading "ts=2024-01-02T03:04:05.678Z" as seconds since the
 * epoch, or 0. */
double h_log_time(const char *line);

/* ---- its files --------------------------------------------------------- */

/* The next offset of a partition's newest state in a dir store (its
 * snapshot, or the last delta of its chain: store_dir.h): 0 with *next, 1
 * if there is none, -1 if a file is there but not a checkpoint header
 * (h_last_error() says why). */
int h_ckpt_next(const char *dir, const char *topic, int partition,
                int64_t *next) H_WARN_UNUSED;

/* ---- what it produces and commits -------------------------------------- */

/* The records of topic a read_committed consumer reads now (transaction
 * markers and aborted records not counted). */
int64_t h_count_committed(const char *bootstraps, const char *topic);

/* Polls (150 ms) until every topics[i] holds want[i] records, failing at
 * once if one holds more (records never disappear), and if the stage exits
 * or H_OUTPUT_MS passes first.  Records: as read at read_committed, once
 * the offsets reach want[i]. */
void h_wait_totals(h_proc *p, const char *bootstraps,
                   const char *const *topics, const int64_t *want, int n);

/* h_wait_totals of two topics, out and rej. */
void h_wait_out_rej(h_proc *p, const char *bootstraps, const char *out,
                    int64_t n_out, const char *rej, int64_t n_rej);

/* With a query client of the caller's: the high watermarks of a topic into
 * hw (may be NULL), retrying a failing query for H_QUERY_RETRY_MS; returns
 * their sum. */
int64_t h_topic_end(rd_kafka_t *q, const char *topic, int nparts,
                    int64_t *hw);
/* Polls (h_nap) until topic holds at least want records; procs (NULL-
 * terminated) must stay alive meanwhile. */
void h_wait_out(rd_kafka_t *q, const char *topic, int nparts,
                h_proc *const *procs, int64_t want, int timeout_ms);
/* h_wait_out, then until the topic has not grown for quiet_ms: the stages
 * have nothing left to forward. */
void h_wait_out_settled(rd_kafka_t *q, const char *topic, int nparts,
                        h_proc *const *procs, int64_t want, int quiet_ms,
                        int timeout_ms);

/* Polls (h_nap, 200 ms) until group's committed offsets on partitions
 * 0..nparts-1 of topic are want[]; procs must stay alive meanwhile.  check,
 * if not NULL, is called with every set of offsets read (test_stage_faults
 * checks its invariant there). */
void h_wait_committed(const char *bootstraps, const char *group,
                      const char *topic, int nparts, const int64_t *want,
                      h_proc *const *procs, int timeout_ms,
                      void (*check)(void *arg, const int64_t *committed),
                      void *arg);

#endif
