/*
 * test_eos.c -- exactly-once output and scale-out, end to end: the real
 * `bloomstage run` against `bloomstage mock-broker`, checked only from the
 * outside (the topics, the group's committed offsets, the stage's logfmt
 * stderr).  What DESIGN.md ("Exactly-once output without transactions",
 * "Scale-out") and `bloomstage config --list` (processing.guarantee,
 * checkpoint.store) promise:
 *
 *   1. exactly_once, kill -9 at many moments (right after the assignment,
 *      mid-batch, right after a `msg=checkpoint` line, a little after one),
 *      restarting each time with the same directory and group, the last run
 *      draining on SIGTERM: every unique key is in the output exactly once,
 *      the restarts replayed the output tail, the group committed the input
 *      end.  The same kills with at_least_once as a control: every key at
 *      least once, no output read, duplicates counted and printed;
 *   2. exactly_once with deliveries failing (Produce errors injected in the
 *      broker, or the output topic made unauthorized in its metadata),
 *      several times mid-stream: the stage rolls back, and once the
 *      failures stop every unique key is in the output exactly once;
 *   3. scale-out, checkpoint.store=kafka: two instances in one group share
 *      6 partitions; one is killed -9 mid-run; the survivor takes its
 *      partitions over with their state from the checkpoint topic (a
 *      checkpoint_offset > 0); every key exactly once, and in particular no
 *      key the killed instance forwarded is forwarded again by the survivor;
 *      at the end the group has committed the input end;
 *   4. a cooperative rebalance (a second instance joins), with the first
 *      instance idle (strict: nothing lost in its log, the partitions that
 *      move arrive exactly at its committed offsets) and busy (a lost
 *      assignment only with the mock's cause, see lost_not_by_mock):
 *      re-producing every old record into the input forwards none of them;
 *   5. measured, printed, not asserted (except exactly-once at the end):
 *      restart replay time against the records since the last checkpoint;
 *   6. a commit that failed is made again once commits work (found by 3;
 *      deterministic here);
 *   7. an output tail that cannot be read when partitions are assigned (a
 *      broker away; ListOffsets errors here): the partitions wait, paused,
 *      and a later round restores them; every key exactly once.
 * Not run by default: a paused instance that resumes after the survivor
 * took over (a zombie) -- a known limit, BS_EOS_ZOMBIE=1 runs it.
 *
 * Input: records are produced up front or fed at a fixed rate while the
 * stage runs (feed_*): the stage forwards several hundred thousand records
 * a second on the mock, so a kill "mid-stream" needs a stream that lasts.
 *
 * Mock limits the tests stay under (DESIGN.md "Test broker"): each
 * partition keeps at most 5 MiB or 100,000 message sets, older data is
 * dropped silently; check_nothing_dropped() fails a test whose topics lost
 * anything, so a test that outgrew the mock says so instead of passing or
 * failing for the wrong reason.  The mock does not implement CreateTopics:
 * the checkpoint topic is created with the broker.
 *
 * Built on the support layer (harness/, support.h).  Needs
 * BLOOMSTAGE_BIN (ctest sets it).  BS_EOS_ONLY=PATTERN runs only the
 * matching tests (cmocka's filter); BS_EOS_VERBOSE=1 prints every stage's
 * stderr; BS_EOS_STAGE_X="k=v k=v" adds -X settings to every stage;
 * BS_EOS_BIG=1 runs test 5's 1M row under sanitizers too (skipped there by
 * default: it alone takes minutes); BS_EOS_ZOMBIE=1 runs the zombie test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support.h"

#define IN "in"
#define OUT "out"
#define CKT "bloomstage-checkpoints" /* checkpoint.topic's default */
#define MAXP H_STREAM_MAXP           /* partitions of IN or OUT, at most */

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

/* ---- the environment: a broker, a group, files ------------------------- */

typedef struct env {
    h_fixture h; /* the broker, the temp directory, the processes */
    char *conf;  /* the stages' common configuration file */
    char group[64];
    int in_parts, out_parts, ckt_parts; /* ckt_parts 0: no CKT topic */
    rd_kafka_t *q; /* for watermark queries (a producer handle) */
    /* The input; it owns the output as h_read_out last read it. */
    h_stream *st;
    void *scratch; /* freed with the env (a failed assertion leaks nothing) */
} env;

static int env_cleanup(h_fixture *fx)
{
    env *e = (env *)fx;
    if (e->q)
        rd_kafka_destroy(e->q);
    h_stream_free(e->st);
    free(e->conf);
    free(e->scratch);
    return 0;
}

/* A broker with IN, OUT (and CKT if ckt_parts > 0), and the stages'
 * configuration: short session timeouts so a killed member leaves the
 * group in ~3 s, small filters (so checkpoints stay ~100 KB), stats off.
 * A fixture of the support layer (made in the test): the teardown frees
 * what a failed test left. */
static env *env_new_group(int in_parts, int out_parts, int ckt_parts,
                          const char *group)
{
    static unsigned seq;
    char *specs[4] = {h_strdupf(IN ":%d", in_parts),
                      h_strdupf(OUT ":%d", out_parts),
                      ckt_parts > 0 ? h_strdupf(CKT ":%d", ckt_parts) : NULL,
                      NULL};
    h_fixture *fx = NULL;
    int rc = h_fixture_new_sized(1, (const char *const *)specs, sizeof(env),
                                 env_cleanup, &fx);
    for (int i = 0; specs[i]; i++)
        free(specs[i]);
    H_CHECK(rc);
    env *e = (env *)fx;
    e->in_parts = in_parts;
    e->out_parts = out_parts;
    e->ckt_parts = ckt_parts;
    e->conf = h_strdupf("%s/stage.conf", e->h.dir);
    if (group)
        snprintf(e->group, sizeof(e->group), "%s", group);
    else
        snprintf(e->group, sizeof(e->group), "bs-eos-%d-%u", (int)getpid(),
                 ++seq);
    char *text = h_strdupf(
        "input.topics=" IN "\n"
        "output.topic=" OUT "\n"
        "consumer.group.id=%s\n"
        "kafka.bootstrap.servers=%s\n"
        "kafka.reconnect.backoff.ms=50\n"
        "kafka.reconnect.backoff.max.ms=500\n"
        "kafka.topic.metadata.refresh.interval.ms=1000\n"
        "consumer.session.timeout.ms=3000\n"
        "consumer.heartbeat.interval.ms=500\n"
        "consumer.fetch.wait.max.ms=100\n"
        "producer.retry.backoff.ms=100\n"
        "dedup.capacity=30000\n"
        "log.stats.interval.ms=0\n"
        "log.level=info\n",
        e->group, e->h.bs);
    rc = h_write_file(e->conf, text);
    free(text);
    H_CHECK(rc);
    e->q = h_query_client(h_kafka_conf(e->h.bs));
    if (!e->q)
        fail_msg("%s", h_last_error());
    return e;
}

static env *env_new(int in_parts, int out_parts, int ckt_parts)
{
    return env_new_group(in_parts, out_parts, ckt_parts, NULL);
}

static void env_free(env *e)
{
    if (e)
        h_fixture_free(&e->h);
}

/* checkpoint.dir of instance A (0) or B (1): dir/a, dir/b. */
static char *ck_dir(const env *e, int i)
{
    static char buf[2][4096];
    snprintf(buf[i], sizeof(buf[i]), "%s/%s", e->h.dir, i ? "b" : "a");
    return buf[i];
}

/* ---- feeding the input at a rate ------------------------------------------ */

/*
 * The stage forwards several hundred thousand records a second on the
 * mock, so input produced up front is gone before a kill "mid-stream" can
 * happen: the support layer's feeder (realkafka.h, any broker) produces
 * e->st's records in order at a set rate from the test's wait loops.
 */
static void feed_start(env *e, size_t from)
{
    h_feed_start(e->h.bs, IN, e->st, from);
}

/* ---- the stage processes ------------------------------------------------ */

static int teardown(void **state)
{
    h_feed_abandon();
    return h_fixture_teardown(state);
}

/* `bloomstage run -c CONF -X checkpoint.dir=CKDIR -X extra...` (extra:
 * NULL-terminated, may be NULL; BS_EOS_STAGE_X adds more). */
static h_proc *stage_start(env *e, const char *ckdir,
                           const char *const *extra)
{
    const char *xs[40];
    char *ck = h_strdupf("checkpoint.dir=%s", ckdir);
    size_t n = 0;
    xs[n++] = ck;
    for (size_t i = 0; extra && extra[i]; i++) {
        assert_true(n < 38);
        xs[n++] = extra[i];
    }
    xs[n] = NULL;
    h_proc *p = h_stage_start(e->conf, xs, NULL);
    free(ck);
    return p;
}

/* SIGTERM, running until then: the stage drains and must exit 0. */
static void stage_stop(h_proc *p)
{
    h_stage_alive(p, "before SIGTERM");
    h_stage_stop(p);
}

/* `output tail replayed` lines: their records= and seconds= summed;
 * returns how many. */
static size_t parse_replayed(h_proc *p, uint64_t *records, double *seconds)
{
    size_t n = 0;
    uint64_t r = 0;
    double sec = 0;
    const char *s = h_process_stderr(p);
    while ((s = strstr(s, H_SAID_REPLAYED))) {
        s += strlen(H_SAID_REPLAYED);
        size_t parts;
        unsigned long long rec;
        double secs;
        if (sscanf(s, " partitions=%zu records=%llu seconds=%lf", &parts, &rec,
                   &secs) != 3)
            h_stage_fail(p, "an 'output tail replayed' line does not parse: "
                         "%.120s", s);
        r += rec;
        sec += secs;
        n++;
    }
    if (records)
        *records = r;
    if (seconds)
        *seconds = sec;
    return n;
}

/* ---- topics --------------------------------------------------------------- */

/* Produces records [from, to) of e->st in order (chunks of 100k, lz4), then
 * checks IN's end offsets against the stream's. */
static void produce_range(env *e, size_t from, size_t to)
{
    static const char *const lz4[] = {"compression.type=lz4", NULL};
    h_stream_produce(e->st, e->h.bs, IN, from, to, lz4);
}

/* High watermarks of a topic's partitions into hw (if not NULL); returns
 * their sum.  (Test 2 makes the topic's metadata fail for a while: the
 * query client caches that too, until its next metadata refresh, so
 * h_topic_end retries.) */
static int64_t topic_end(env *e, const char *topic, int nparts, int64_t *hw)
{
    return h_topic_end(e->q, topic, nparts, hw);
}

static int64_t out_total(env *e)
{
    return topic_end(e, OUT, e->out_parts, NULL);
}

/* Polls until OUT holds at least want records; the stages in procs (NULL-
 * terminated) must stay alive meanwhile. */
static void wait_out(env *e, h_proc *const *procs, int64_t want,
                     int timeout_ms)
{
    h_wait_out(e->q, OUT, e->out_parts, procs, want, timeout_ms);
}

/* Polls until the group's committed offsets are the input's end; the
 * stages in procs (NULL-terminated) must stay alive meanwhile. */
static void wait_committed_end(env *e, h_proc *const *procs, int timeout_ms)
{
    h_wait_committed(e->h.bs, e->group, IN, e->in_parts, e->st->next, procs,
                     timeout_ms, NULL, NULL);
}

/* Waits until OUT holds at least want records and has not grown for
 * quiet_ms: the stages (alive meanwhile) have nothing left to forward. */
static void wait_out_settled(env *e, h_proc *const *procs, int64_t want,
                             int quiet_ms, int timeout_ms)
{
    h_wait_out_settled(e->q, OUT, e->out_parts, procs, want, quiet_ms,
                       timeout_ms);
}

/* The committed offsets are the input's end (once the stages stopped). */
static void assert_committed_end(env *e)
{
    int64_t c[MAXP];
    H_CHECK(h_committed(e->h.bs, e->group, IN, e->in_parts, c));
    for (int p = 0; p < e->in_parts; p++)
        if (c[p] != e->st->next[p])
            fail_msg("%s [%d] committed at %lld, want the input end %lld", IN,
                     p, (long long)c[p], (long long)e->st->next[p]);
}

/* The mock drops a partition's oldest data past 5 MiB without a word: a
 * test that outgrew it would check the wrong thing.  Every partition of
 * IN, OUT and CKT must still start at offset 0. */
static void check_nothing_dropped(env *e)
{
    const struct {
        const char *topic;
        int n;
    } t[] = {{IN, e->in_parts}, {OUT, e->out_parts}, {CKT, e->ckt_parts}};
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        if (h_check_nothing_dropped(e->q, t[i].topic, t[i].n))
            fail_msg("%s: the test outgrew it", h_last_error());
}

/* ---- the output ------------------------------------------------------------ */

/* All of OUT, every record traced to its input record (h_read_out); owned
 * by e->st, valid until the next read_out. */
static h_outrec *read_out(env *e, size_t *n)
{
    return h_read_out(e->st, e->h.bs, OUT, IN, n);
}

/* Copies per key id in the output just read (owned by e->st); fails if a
 * key id is missing (lost).  *extra gets the copies beyond the first,
 * summed. */
static unsigned *count_copies(env *e, size_t *extra)
{
    return h_count_copies(e->st, IN, e->st->n, extra);
}

/* Every key of the stream is in the output exactly once, so the output
 * holds exactly as many records as there are distinct keys. */
static void assert_exactly_once(env *e, size_t n, const char *why)
{
    unsigned *c = count_copies(e, NULL);
    h_expect_once(e->st, c, IN, OUT, e->st->n, why);
    assert_int_equal(n, e->st->nids);
}

/* ---- 1. kill -9 at many moments ------------------------------------------- */

/* When to kill: once the run has its assignment; once the output grew so
 * much in this run; then at the next `msg=checkpoint` line; then so many
 * ms later (h_kill_at). */
static const h_kill_plan KILLS[] = {
    {.log = H_SAID_ASSIGNED, .what = "right after the assignment"},
    {.out_delta = 3000, .what = "mid-batch"},
    {.out_delta = 2000, .log = H_SAID_CKPT, .log_next = true,
     .what = "right after a checkpoint"},
    {.out_delta = 2000, .log = H_SAID_CKPT, .log_next = true, .ms = 7,
     .what = "7 ms after a checkpoint"},
    {.log = H_SAID_ASSIGNED, .ms = 250, .what = "250 ms after the assignment"},
    {.out_delta = 12000, .what = "mid-batch, later in the run"},
    {.out_delta = 1000, .log = H_SAID_CKPT, .log_next = true, .ms = 90,
     .what = "90 ms after a checkpoint"},
};
#define NKILLS (sizeof(KILLS) / sizeof(KILLS[0]))

/*
 * N records, half of them copies of keys seen before: a backlog of N0
 * produced up front, the rest fed at FEED records/s while a run has its
 * partitions.  NKILLS runs each killed -9 at KILLS[i], then one drained
 * with SIGTERM after the rest of the input is produced.  exactly_once:
 * every key exactly once, the tail replayed at least once, input end
 * committed.  at_least_once: every key at least once, no tail read; the
 * duplicates are printed (timing-dependent: not asserted).
 */
static void kill_restart(bool exactly_once)
{
    env *e = env_new(6, 6, 0);
    const size_t N = 200000, N0 = 40000;
    const double FEED = 20000;
    e->st = h_stream_new(N, 6, exactly_once ? 11 : 12);
    h_stream_add(e->st, N, 50);
    produce_range(e, 0, N0);
    feed_start(e, N0);
    const char *ckdir = ck_dir(e, 0);
    const char *const extra[] = {
        exactly_once ? "processing.guarantee=exactly_once"
                     : "processing.guarantee=at_least_once",
        "checkpoint.interval.ms=200", "log.level=debug", NULL};
    const char *mode = exactly_once ? "exactly_once" : "at_least_once";

    size_t replays = 0, rollbacks = 0, fwd = 0;
    uint64_t replayed = 0;
    for (size_t k = 0; k <= NKILLS; k++) {
        int64_t out0 = out_total(e);
        h_proc *p = stage_start(e, ckdir, extra);
        if (k < NKILLS) {
            h_wait_said(p, H_SAID_ASSIGNED, 1, 120000);
            h_feed_rate(FEED);
            const h_kill_ctx at = {.q = e->q, .out_topic = OUT,
                                   .out_parts = e->out_parts, .out0 = out0};
            h_kill_at(p, &KILLS[k], &at);
            h_feed_rate(0);
        } else {
            h_feed_finish(120000);
            h_proc *const procs[] = {p, NULL};
            wait_committed_end(e, procs, 180000);
            stage_stop(p);
        }
        uint64_t r = 0;
        size_t nr = parse_replayed(p, &r, NULL);
        h_assigned a[64];
        size_t na = h_parse_assigned(p, IN, a, 64), f = 0;
        for (size_t i = 0; i < na && i < 64; i++)
            f += a[i].fwd;
        replays += nr;
        replayed += r;
        fwd += f;
        rollbacks += h_count_said(p, "rolling back");
        print_message("%s run %zu (%s): output %lld -> %lld, %zu "
                      "partitions assigned, tail replayed %zu times (%llu "
                      "records, %zu already forwarded)\n", mode, k + 1,
                      k < NKILLS ? KILLS[k].what : "drained on SIGTERM",
                      (long long)out0, (long long)out_total(e), na, nr,
                      (unsigned long long)r, f);
        h_proc_release(p);
    }
    assert_committed_end(e);
    check_nothing_dropped(e);
    assert_int_equal(rollbacks, 0); /* nothing here makes a delivery fail */

    size_t n = 0, extra_copies = 0;
    read_out(e, &n);
    if (exactly_once) {
        if (replays == 0)
            fail_msg("no restart logged '%s': the replay path never ran",
                     H_SAID_REPLAYED);
        assert_exactly_once(e, n, "exactly_once after kill -9 and "
                            "restart");
        print_message("exactly_once: %zu records, %zu unique keys, %zu "
                      "output records, 0 duplicates; %zu tail replays read "
                      "%llu records, %zu input records recognised as "
                      "forwarded\n", N, e->st->nids, n, replays,
                      (unsigned long long)replayed, fwd);
    } else {
        count_copies(e, &extra_copies);
        if (replays != 0)
            fail_msg("at_least_once logged '%s' %zu times: it must not read "
                     "the output", H_SAID_REPLAYED, replays);
        print_message("at_least_once (control): %zu records, %zu unique keys,"
                      " %zu output records, %zu duplicates after %zu kills\n",
                      N, e->st->nids, n, extra_copies, NKILLS);
    }
    env_free(e);
}

static void test_kill9_exactly_once(void **state)
{
    (void)state;
    kill_restart(true);
}

static void test_kill9_at_least_once_control(void **state)
{
    (void)state;
    kill_restart(false);
}

/* ---- 2. delivery failures ---------------------------------------------------- */

/*
 * A first chunk is processed and committed.  Then, three times: the stage
 * is stopped (SIGSTOP), a chunk produced, the stage continued, and once
 * 2000 of the chunk's records are in the output (most are still on their
 * way) the fault is injected (`inject`).  The stage's producer has a short
 * message timeout and few retries, so batches still in flight fail: the
 * stage must log a rollback, and the rollback must recognise the records
 * that did get through from the output tail (asserted: some rollback
 * replayed the tail).  The fault is then cleared (`clear`) and the chunk
 * committed.  At the end every unique key is in the output exactly once.
 * A fault that the stage only learns of from a metadata refresh
 * (topic-error) is injected ahead_ms before the SIGSTOP instead, so that
 * the refresh (kafka.topic.metadata.refresh.interval.ms is 1 s) has seen
 * it when the chunk comes.
 */
static void delivery_failures(const char *inject, const char *clear,
                              int ahead_ms)
{
    env *e = env_new(6, 6, 0);
    const size_t CHUNK = 50000, ROUNDS = 3;
    e->st = h_stream_new(CHUNK * (ROUNDS + 1), 6, 21);
    h_stream_add(e->st, CHUNK, 50);
    produce_range(e, 0, CHUNK);
    const char *ckdir = ck_dir(e, 0);
    const char *const extra[] = {"processing.guarantee=exactly_once",
                                 "checkpoint.interval.ms=200",
                                 "producer.message.timeout.ms=3000",
                                 "producer.retries=2",
                                 "consumer.session.timeout.ms=10000", NULL};
    h_proc *p = stage_start(e, ckdir, extra);
    h_proc *const procs[] = {p, NULL};
    wait_committed_end(e, procs, 120000);
    for (size_t r = 1; r <= ROUNDS; r++) {
        int64_t out0 = out_total(e);
        size_t before = h_count_said(p, H_SAID_ROLLBACK);
        if (ahead_ms) {
            H_CHECK(h_broker_control(e->h.broker, inject));
            h_nap(ahead_ms);
        }
        H_CHECK(h_process_kill(p, SIGSTOP));
        h_stream_add(e->st, CHUNK, 50);
        produce_range(e, r * CHUNK, (r + 1) * CHUNK);
        H_CHECK(h_process_kill(p, SIGCONT));
        double t0 = h_now_s();
        if (!ahead_ms) {
            wait_out(e, procs, out0 + 2000, 60000);
            H_CHECK(h_broker_control(e->h.broker, inject));
        }
        h_wait_said(p, H_SAID_ROLLBACK, before + 1, 60000);
        double dt = h_now_s() - t0;
        int64_t out_at = out_total(e);
        H_CHECK(h_broker_control(e->h.broker, clear));
        wait_committed_end(e, procs, 120000);
        print_message("round %zu: '%s': rollback %.2f s after the chunk "
                      "started, %lld of its records were in the output by "
                      "then; chunk committed\n", r, inject, dt,
                      (long long)(out_at - out0));
    }
    stage_stop(p);
    uint64_t replayed = 0;
    size_t replays = parse_replayed(p, &replayed, NULL);
    size_t rollbacks = h_count_said(p, H_SAID_ROLLBACK);
    size_t failures = h_count_said(p, "msg=\"checkpoint failed\"");
    check_nothing_dropped(e);

    size_t n = 0;
    read_out(e, &n);
    assert_exactly_once(e, n, "exactly_once across rollbacks");
    if (!ahead_ms && replays == 0)
        h_stage_fail(p, "no rollback found a delivered record in the output "
                     "tail: the replay path of a rollback never ran");
    print_message("'%s': %zu rollbacks, %zu failed checkpoints, %zu tail "
                  "replays (%llu records); %zu records, %zu output records, "
                  "each key exactly once\n", inject, rollbacks, failures,
                  replays, (unsigned long long)replayed, e->st->n, n);
    h_proc_release(p);
    env_free(e);
}

static void test_delivery_failures_produce_errors(void **state)
{
    (void)state;
    delivery_failures("push-errors Produce 30 NOT_ENOUGH_REPLICAS",
                      "clear-errors Produce", 0);
}

/* Not run by default (BS_EOS_TOPIC_ERROR=1 runs it): after the topic error
 * is cleared, the test's own query client (librdkafka 2.0.2) kept
 * answering UNKNOWN_PARTITION for "out" past its 15 s retry in a loaded
 * run, failing the test while the stage was fine; the NOT_ENOUGH_REPLICAS
 * variant covers the same rollback path. */
static void test_delivery_failures_topic_unauthorized(void **state)
{
    (void)state;
    if (!getenv("BS_EOS_TOPIC_ERROR")) {
        print_message("not run by default: BS_EOS_TOPIC_ERROR=1 runs it\n");
        skip();
    }
    delivery_failures("topic-error " OUT " TOPIC_AUTHORIZATION_FAILED",
                      "topic-error " OUT " NO_ERROR", 1500);
}

/* ---- 3, 4. scale-out with checkpoint.store=kafka ------------------------------ */

/* Checkpoints in CKT: 16 KiB chunks (a checkpoint is ~90 KiB: several),
 * every 1.5 s, and filters sized so that all of a test's rounds stay well
 * under the mock's 5 MiB per partition of CKT (check_nothing_dropped).
 * Debug logs: one `msg=checkpoint` line per round. */
static const char *const KAFKA_STORE[] = {
    "processing.guarantee=exactly_once", "checkpoint.store=kafka",
    "checkpoint.chunk.bytes=16k", "checkpoint.interval.ms=1500",
    "checkpoint.records=0", "dedup.capacity=15000", "log.level=debug",
    NULL};

/* CKT's records per partition, printed: the checkpoint traffic. */
static void print_ckt(env *e)
{
    int64_t hw[MAXP];
    topic_end(e, CKT, e->ckt_parts, hw);
    char line[256] = "";
    size_t len = 0;
    for (int p = 0; p < e->ckt_parts && len < sizeof(line) - 32; p++)
        len += (size_t)snprintf(line + len, sizeof(line) - len, " [%d] %lld",
                                p, (long long)hw[p]);
    print_message("%s records (chunks, manifests, tombstones):%s\n", CKT,
                  line);
}

/* The partitions of IN p holds now. */
static unsigned held(h_proc *p)
{
    return h_assigned_mask(p, IN, false);
}

static int popcount(unsigned m) { return __builtin_popcount(m); }

/* Waits until A and B (started together, fed meanwhile) share the six
 * partitions (the group has no other member), A has written two
 * checkpoint rounds and the output holds 40% of the keys. */
static void busy_together(env *e, h_proc *a, h_proc *b)
{
    h_proc *const both[] = {a, b, NULL};
    double t0 = h_now_s();
    for (;;) {
        unsigned mb = held(b);
        if (h_count_said(a, H_SAID_ASSIGNED) > 0 && mb != 0 && mb != 0x3f)
            break;
        h_stages_alive(both, "before both instances had partitions");
        if (h_now_s() - t0 > 60)
            h_stage_fail(b, "the two instances did not share the partitions "
                         "within 60 s (B has mask 0x%x)", mb);
        h_nap(5);
    }
    h_wait_said(a, H_SAID_CKPT, 2, 120000);
    wait_out(e, both, (int64_t)(e->st->nids * 2 / 5), 120000);
}

/* Waits until B has A's partitions ma too (after A's session times
 * out). */
static void wait_takeover(h_proc *b, unsigned ma)
{
    h_wait_holds(b, IN, ma, 60000, "B");
}

/*
 * Two instances, A and B, same group, checkpoint.store=kafka, separate
 * checkpoint.dir (unused by that store), started together; N records (half
 * duplicates) are fed at 15000 records/s from then on.  Once both have
 * partitions, A has written two checkpoint rounds and the output holds 40%
 * of the keys, A is killed -9 (300 ms later: some of what it forwarded is
 * past its last checkpoint).  B must take A's partitions over (its
 * log shows them assigned, at least one with a checkpoint_offset > 0: state
 * from the Kafka store) and finish.  Every key exactly once; in particular
 * no key that A forwarded is forwarded again by B, and some of those keys
 * do come again in the input after B took over (so the check is not
 * vacuous).
 */
static void test_scale_out_kill(void **state)
{
    (void)state;
    env *e = env_new_group(6, 6, 3, "bs-eos-scale-out");
    const size_t N = 150000;
    e->st = h_stream_new(N, 6, 31);
    h_stream_add(e->st, N, 50);
    const char *cka = ck_dir(e, 0), *ckb = ck_dir(e, 1);
    h_proc *a = stage_start(e, cka, KAFKA_STORE);
    h_proc *b = stage_start(e, ckb, KAFKA_STORE);
    feed_start(e, 0);
    /* 30 s of input: the kill must come while it still flows, and the
     * sharing and the first rounds took over 10 s in a loaded CI run. */
    h_feed_rate(5000);

    /* Both have partitions; A's are those B does not have (the group has
     * no other member). */
    busy_together(e, a, b);
    h_nap(300);
    unsigned mb = held(b), ma = held(a);
    if (!ma)
        h_stage_fail(a, "A holds no partition now (B 0x%x)", mb);
    h_stage_kill9(a, "mid-run, both instances busy");
    size_t fed_at_kill = h_feed_next();
    h_nap(300); /* whatever A had on the wire lands, or not */
    int64_t hw_kill[MAXP];
    int64_t out_kill = topic_end(e, OUT, e->out_parts, hw_kill);
    print_message("killed A (partitions mask 0x%x) with %lld output records, "
                  "%zu of %zu input records fed; B has mask 0x%x\n", ma,
                  (long long)out_kill, fed_at_kill, N, mb);

    /* B takes A's partitions over (after A's session times out). */
    wait_takeover(b, ma);
    h_assigned as[256];
    size_t nas = h_parse_assigned(b, IN, as, 256);
    int64_t resume[MAXP] = {0};
    bool from_store = false;
    for (size_t i = 0; i < nas && i < 256; i++) {
        if (as[i].revoked || !(ma >> as[i].partition & 1))
            continue;
        resume[as[i].partition] = as[i].ckpt;
        from_store = from_store || as[i].ckpt > 0;
        print_message("B took %s [%d] at checkpoint_offset=%lld (input end "
                      "%lld), already_forwarded=%zu\n", IN,
                      (int)as[i].partition, as[i].ckpt,
                      (long long)e->st->next[as[i].partition], as[i].fwd);
    }
    if (!from_store)
        h_stage_fail(b, "none of A's partitions came to B with a checkpoint "
                     "offset > 0: no state from the Kafka store");
    h_feed_finish(120000);
    /* The output settles (exactly one copy per key is all there is to
     * forward); the committed offsets are checked last, below. */
    h_proc *const only_b[] = {b, NULL};
    wait_out_settled(e, only_b, (int64_t)e->st->nids, 3000, 180000);
    stage_stop(b);
    uint64_t replayed = 0;
    size_t replays = parse_replayed(b, &replayed, NULL);
    print_ckt(e);
    check_nothing_dropped(e);

    size_t n = 0;
    h_outrec *o = read_out(e, &n);
    assert_exactly_once(e, n, "two instances, one killed -9, kafka store");
    /* Directly: the keys A forwarded (A's partitions, below the output's
     * end when A died) are never forwarded by B; and count those of them
     * that came again in the input where B resumed. */
    size_t n_a = 0, seen_again = 0;
    h_check_killed_keys(e->st, o, n, ma, hw_kill, resume, IN, &n_a,
                        &seen_again);
    print_message("A forwarded %zu records of its partitions; %zu input "
                  "records B processed repeat one of those keys, none "
                  "forwarded; B replayed the tail %zu times (%llu records); "
                  "%zu output records, %zu unique keys\n", n_a, seen_again,
                  replays, (unsigned long long)replayed, n, e->st->nids);
    if (h_count_said(b, "commit failed"))
        print_message("B logged %zu failed commits (%zu lost assignments)\n",
                      h_count_said(b, "commit failed"),
                      h_count_said(b, "assignment lost"));
    assert_committed_end(e);
    h_proc_release(a);
    h_proc_release(b);
    env_free(e);
}

/*
 * Whether p's log shows a lost assignment that is not the mock's doing.
 * The mock (librdkafka 2.0.2's) bumps the group generation when it elects
 * the leader and checks the generation of an OffsetCommit before the group
 * state, so a commit a member sends while the group is rebalancing gets
 * ILLEGAL_GENERATION (a real broker answers REBALANCE_IN_PROGRESS while it
 * completes the rebalance), and librdkafka then takes the assignment as
 * lost.  *mock gets how many lost assignments had that cause.
 */
static bool lost_not_by_mock(h_proc *p, size_t *mock)
{
    static const char failed[] = "msg=\"commit failed\"";
    size_t lost = 0, explained = 0;
    const char *s = h_process_stderr(p);
    for (const char *l = s; (l = strstr(l, "assignment lost")); l++) {
        lost++;
        /* The last failed commit before it, since the last assignment. */
        const char *c = NULL, *a = NULL;
        for (const char *x = s; (x = strstr(x, failed)) && x < l; x++)
            c = x;
        for (const char *x = s; (x = strstr(x, H_SAID_ASSIGNED)) && x < l; x++)
            a = x;
        if (c && (!a || a < c) &&
            !strncmp(c + strlen(failed), " error=ILLEGAL_GENERATION", 25))
            explained++;
    }
    *mock = explained;
    return lost > explained;
}

/*
 * A runs alone and processes part 1 (committed).  B starts (same group,
 * Kafka store): the cooperative rebalance moves some partitions to B.
 *   busy = false: nothing is fed while B joins (A is idle, so no commit of
 *     A's can meet the rebalance): A's log shows no lost assignment at all,
 *     and each partition comes to B at checkpoint_offset == where A had
 *     committed part 1 (A's state, from the store);
 *   busy = true: part 2 is fed at 15000 records/s while B joins, so A is
 *     checkpointing and committing through the rebalance; a lost
 *     assignment is accepted only with the mock's cause (above), and the
 *     partitions come to B at or past A's committed offsets.
 * Then every old record is produced again, plus new keys: none of the old
 * ones may be forwarded, every key is in the output exactly once, and the
 * group commits the input end.
 */
static void rebalance(bool busy)
{
    env *e = env_new_group(6, 6, 3, busy ? "bs-eos-rebalance-busy"
                                         : "bs-eos-rebalance-idle");
    const size_t N1 = 60000, N2 = busy ? 90000 : 0, NNEW = 3000;
    e->st = h_stream_new(2 * (N1 + N2) + NNEW, 6, busy ? 42 : 41);
    h_stream_add(e->st, N1, 50);
    produce_range(e, 0, N1);
    int64_t end1[MAXP];
    memcpy(end1, e->st->next, sizeof(end1));
    const char *cka = ck_dir(e, 0), *ckb = ck_dir(e, 1);
    h_proc *a = stage_start(e, cka, KAFKA_STORE);
    h_proc *const only_a[] = {a, NULL};
    wait_committed_end(e, only_a, 120000);

    h_stream_add(e->st, N2, 50);
    h_proc *b = stage_start(e, ckb, KAFKA_STORE);
    h_proc *const both[] = {a, b, NULL};
    feed_start(e, N1);
    h_feed_rate(15000);
    double t0 = h_now_s();
    double b_assigned_at = -1;
    size_t fed_then = 0;
    while (h_feed_next() < N1 + N2 || b_assigned_at < 0) {
        if (b_assigned_at < 0 && h_count_said(b, H_SAID_ASSIGNED) > 0) {
            b_assigned_at = h_now_s() - t0;
            fed_then = h_feed_next() - N1;
        }
        h_stage_alive(a, "while B joins");
        h_stage_alive(b, "while B joins");
        if (h_now_s() - t0 > 60)
            h_stage_fail(b, "B got no partition within 60 s of its start");
        h_nap(20);
    }
    h_feed_finish(120000);
    wait_committed_end(e, both, 120000);
    unsigned mb = held(b);
    h_assigned as[256];
    size_t nas = h_parse_assigned(b, IN, as, 256);
    for (size_t i = 0; i < nas && i < 256; i++) {
        if (as[i].revoked)
            continue;
        int32_t q = as[i].partition;
        print_message("B got %s [%d] at checkpoint_offset=%lld (A had "
                      "committed %lld before B started)\n", IN, (int)q,
                      as[i].ckpt, (long long)end1[q]);
        if (as[i].ckpt < end1[q] || (!busy && as[i].ckpt != end1[q]))
            h_stage_fail(b, "%s [%d] came to B at checkpoint_offset=%lld; A "
                         "had committed %lld there: its filter did not come "
                         "with it", IN, (int)q, as[i].ckpt,
                         (long long)end1[q]);
    }
    size_t mock_lost = 0;
    if (lost_not_by_mock(a, &mock_lost) || (!busy && mock_lost))
        h_stage_fail(a, "A lost its assignment in a graceful rebalance");
    if (h_count_said(a, "rolling back"))
        h_stage_fail(a, "A rolled back in a graceful rebalance");
    print_message("B joined: mask 0x%x (%d partitions), first assigned %.1f s "
                  "after its start (%zu records of part 2 fed by then); A "
                  "lost its assignment %zu times (mock: commit during the "
                  "rebalance)\n", mb, popcount(mb), b_assigned_at, fed_then,
                  mock_lost);
    if (popcount(mb) == 0 || popcount(mb) == 6)
        h_stage_fail(b, "after the rebalance B has %d partitions: nothing was "
                     "shared", popcount(mb));

    /* The old records again, and some new keys. */
    size_t old_end = e->st->n;
    h_stream_add_copies(e->st, 0, old_end);
    size_t replay_end = e->st->n;
    h_stream_add(e->st, NNEW, 0);
    produce_range(e, old_end, e->st->n);
    wait_committed_end(e, both, 120000);
    stage_stop(b);
    stage_stop(a);
    size_t mock_lost_b = 0;
    if (lost_not_by_mock(a, &mock_lost) || lost_not_by_mock(b, &mock_lost_b))
        fail_msg("an assignment was lost (not by the mock's generation "
                 "check)");
    print_ckt(e);
    check_nothing_dropped(e);

    size_t n = 0, to_b = 0;
    h_outrec *o = read_out(e, &n);
    for (size_t k = 0; k < n; k++)
        if (o[k].rec >= old_end && o[k].rec < replay_end)
            fail_msg("%s:%d:%lld, a copy of old record %zu (k%07u), was "
                     "forwarded", IN, (int)o[k].src_part,
                     (long long)o[k].src_off, o[k].rec - old_end, o[k].id);
    for (size_t i = old_end; i < replay_end; i++)
        to_b += mb >> e->st->part[i] & 1;
    assert_exactly_once(e, n, "rebalance, old records again");
    size_t new_by_b = 0;
    for (size_t k = 0; k < n; k++)
        new_by_b += o[k].rec >= replay_end && (mb >> o[k].src_part & 1);
    print_message("%zu old records produced again (%zu to B's partitions), "
                  "none forwarded; %zu new keys forwarded (%zu by B); %zu "
                  "output records\n", replay_end - old_end, to_b, NNEW,
                  new_by_b, n);
    assert_true(to_b > 0 && new_by_b > 0);
    assert_committed_end(e);
    h_proc_release(a);
    h_proc_release(b);
    env_free(e);
}

static void test_rebalance_idle(void **state)
{
    (void)state;
    rebalance(false);
}

static void test_rebalance_busy(void **state)
{
    (void)state;
    rebalance(true);
}

/*
 * Not run by default (BS_EOS_ZOMBIE=1 runs it): a known limit of
 * exactly-once by output-tail replay, kept as its reproduction.  As test 3,
 * but A is paused (SIGSTOP) instead of killed, past its session timeout;
 * B takes its partitions over and replays the tail; then A continues
 * (SIGCONT).  What A's producer had in flight when it was paused lands
 * after B read the tail, and A goes on processing what it had fetched
 * until it notices its assignment is lost: B forwards those keys again.
 * Nothing but fencing (a transactional producer per partition owner) can
 * stop a zombie's writes; the mock cannot run that (no read_committed).
 * Observed: a few hundred duplicates.
 */
static void test_scale_out_zombie(void **state)
{
    (void)state;
    if (!getenv("BS_EOS_ZOMBIE")) {
        print_message("known limit, not run by default: BS_EOS_ZOMBIE=1 "
                      "runs it\n");
        skip();
    }
    env *e = env_new_group(6, 6, 3, "bs-eos-zombie");
    const size_t N = 150000;
    e->st = h_stream_new(N, 6, 71);
    h_stream_add(e->st, N, 50);
    h_proc *a = stage_start(e, ck_dir(e, 0), KAFKA_STORE);
    h_proc *b = stage_start(e, ck_dir(e, 1), KAFKA_STORE);
    feed_start(e, 0);
    h_feed_rate(15000);
    busy_together(e, a, b);
    unsigned mb = held(b), ma = held(a);
    if (!ma)
        h_stage_fail(a, "A holds no partition now (B 0x%x)", mb);
    H_CHECK(h_process_kill(a, SIGSTOP));
    wait_takeover(b, ma);
    h_nap(1500);
    H_CHECK(h_process_kill(a, SIGCONT));
    h_feed_finish(120000);
    h_proc *const only_b[] = {b, NULL};
    wait_out_settled(e, only_b, (int64_t)e->st->nids, 4000, 180000);
    stage_stop(a);
    stage_stop(b);
    size_t n = 0;
    read_out(e, &n);
    assert_exactly_once(e, n, "an instance paused past its session "
                        "timeout, then continued (a zombie)");
    h_proc_release(a);
    h_proc_release(b);
    env_free(e);
}

/* ---- 6. a failed commit is retried ---------------------------------------------- */

/* The offset in partition p's checkpoint file (dir store; the header's
 * next offset, int64 little-endian at 16), or -1 if there is none. */
static int64_t ckpt_file_offset(const char *ckdir, int32_t p)
{
    int64_t v = -1;
    return h_ckpt_next(ckdir, IN, p, &v) == 0 ? v : -1;
}

/*
 * Found by test 3: there, a commit that failed during the rebalance after
 * the kill (ILLEGAL_GENERATION) was never made again for a partition that
 * got no more records, so the group's committed offset stayed behind the
 * checkpoint for good (stage.c checkpoint() commits only partitions it
 * writes a checkpoint for; "the next round commits again" does not hold).
 * Deterministic here: chunk 1 is committed; OffsetCommit is then made to
 * fail (a permanent error, no rejoin) while chunk 2 is processed and
 * checkpointed; the errors are cleared.  Within some seconds, and at the
 * latest after a graceful stop, the committed offsets must be the input
 * end -- the checkpoints on disk are.
 */
static void test_failed_commit_is_retried(void **state)
{
    (void)state;
    env *e = env_new(6, 6, 0);
    e->st = h_stream_new(4000, 6, 61);
    h_stream_add(e->st, 2000, 50);
    produce_range(e, 0, 2000);
    const char *ckdir = ck_dir(e, 0);
    const char *const extra[] = {"checkpoint.interval.ms=200", NULL};
    h_proc *p = stage_start(e, ckdir, extra);
    h_proc *const procs[] = {p, NULL};
    wait_committed_end(e, procs, 60000);

    H_CHECK(h_broker_control(e->h.broker,
                             "push-errors OffsetCommit 1000 "
                             "OFFSET_METADATA_TOO_LARGE"));
    h_stream_add(e->st, 2000, 50);
    produce_range(e, 2000, 4000);
    /* Every checkpoint file reaches the input end; the commits fail. */
    double t0 = h_now_s();
    for (int q = 0; q < e->in_parts;) {
        if (ckpt_file_offset(ckdir, q) == e->st->next[q]) {
            q++;
            continue;
        }
        h_stage_alive(p, "while commits fail");
        if (h_now_s() - t0 > 60)
            h_stage_fail(p, "%s [%d]: checkpoint at %lld, not the input end "
                         "%lld, within 60 s", IN, q,
                         (long long)ckpt_file_offset(ckdir, q),
                         (long long)e->st->next[q]);
        h_nap(20);
    }
    h_wait_said(p, "msg=\"commit failed\"", 1, 10000);
    H_CHECK(h_broker_control(e->h.broker, "clear-errors OffsetCommit"));
    h_nap(3000); /* many checkpoint intervals */
    int64_t c[MAXP];
    H_CHECK(h_committed(e->h.bs, e->group, IN, e->in_parts, c));
    stage_stop(p);
    int64_t c2[MAXP];
    H_CHECK(h_committed(e->h.bs, e->group, IN, e->in_parts, c2));
    for (int q = 0; q < e->in_parts; q++)
        if (c2[q] != e->st->next[q])
            h_stage_fail(p, "%s [%d]: committed %lld 3 s after the commit "
                         "errors were cleared and %lld after a graceful stop, "
                         "but its checkpoint holds %lld (the input end): the "
                         "failed commit was never made again", IN, q,
                         (long long)c[q], (long long)c2[q],
                         (long long)ckpt_file_offset(ckdir, q));
    h_proc_release(p);
    env_free(e);
}

/* ---- 7. an output tail that cannot be read at the assignment ----------- */

/*
 * A stage forwards 3000 records with checkpoints off but for the initial
 * one (so its whole output is the tail), and is killed -9.  The restart is
 * assigned while ListOffsets requests fail (a broker away looks the same
 * to the replay): the partitions must be taken paused and their restore
 * retried by the following rounds -- not a fatal error, not a stall --
 * and, once the tail is read, nothing is forwarded twice.
 */
static void test_tail_unreadable_at_assign(void **state)
{
    (void)state;
    env *e = env_new(6, 6, 0);
    e->st = h_stream_new(6000, 6, 71);
    h_stream_add(e->st, 3000, 50);
    produce_range(e, 0, 3000);
    const char *ckdir = ck_dir(e, 0);
    const char *const extra[] = {"checkpoint.interval.ms=3600000",
                                 "checkpoint.records=0", NULL};
    h_proc *p = stage_start(e, ckdir, extra);
    h_proc *const procs[] = {p, NULL};
    wait_out(e, procs, (int64_t)e->st->nids, 60000);
    h_stage_kill9(p, "with its whole output past its checkpoints");
    h_proc_release(p);

    h_stream_add(e->st, 3000, 50);
    produce_range(e, 3000, 6000);
    H_CHECK(h_broker_control(e->h.broker,
                             "push-errors ListOffsets 6 "
                             "TOPIC_AUTHORIZATION_FAILED"));
    const char *const normal[] = {"checkpoint.interval.ms=200", NULL};
    p = stage_start(e, ckdir, normal);
    h_proc *const again[] = {p, NULL};
    h_wait_said(p, "msg=\"restore incomplete, will retry\"", 1, 60000);
    h_wait_said(p, H_SAID_REPLAYED, 1, 60000);
    wait_committed_end(e, again, 60000);
    stage_stop(p);
    assert_committed_end(e);
    uint64_t r = 0;
    parse_replayed(p, &r, NULL);
    size_t n = 0;
    read_out(e, &n);
    assert_exactly_once(e, n, "a tail unreadable at the assignment, read "
                        "by a later round");
    /* The assignment said the restore was deferred, not "no checkpoint";
     * each partition's "partition restored" says where its state ended. */
    if (h_count_said(p, "restore=pending") == 0)
        h_stage_fail(p, "no assignment said restore=pending");
    h_assigned as[64];
    size_t na = h_parse_assigned(p, IN, as, 64);
    unsigned from_state = 0;
    for (size_t i = 0; i < na && i < 64; i++)
        if (!as[i].revoked && as[i].ckpt >= 0)
            from_state |= 1u << as[i].partition;
    if (from_state != 0x3f)
        h_stage_fail(p, "partitions restored from their checkpoints: 0x%x, "
                     "want 0x3f", from_state);
    print_message("restore retried %zu times before the tail (%llu records) "
                  "was read; %zu output records, every key exactly once\n",
                  h_count_said(p, "msg=\"retrying the restore\""),
                  (unsigned long long)r, n);
    h_proc_release(p);
    env_free(e);
}

/* ---- 5. restart replay time ---------------------------------------------------- */

/*
 * One row: K unique records, one stage with checkpoints off but for the
 * initial one (checkpoint.interval.ms of an hour, checkpoint.records=0), so
 * the output tail since the last checkpoint is all K records; kill -9 once
 * all are in the output; produce M new records; restart and time it: the
 * assignment, the stage's own `output tail replayed ... records=R
 * seconds=S`, the first new output record, the last.  12 partitions of IN
 * and of OUT.  Asserts only exactly-once at the end.
 */
typedef struct replay_row {
    size_t k;
    uint64_t r;
    double s, assigned, first_new, all_new, run1;
} replay_row;

static void replay_row_run(size_t K, replay_row *row)
{
    const size_t M = 1000;
    env *e = env_new(12, 12, 0);
    e->st = h_stream_new(K + M, 12, 51);
    h_stream_add(e->st, K, 0);
    produce_range(e, 0, K);
    const char *ckdir = ck_dir(e, 0);
    const char *const extra[] = {"processing.guarantee=exactly_once",
                                 "checkpoint.interval.ms=3600000",
                                 "checkpoint.records=0",
                                 "dedup.capacity=100000", NULL};
    double t0 = h_now_s();
    h_proc *p = stage_start(e, ckdir, extra);
    h_proc *const procs[] = {p, NULL};
    wait_out(e, procs, (int64_t)K, 600000);
    row->run1 = h_now_s() - t0;
    if (h_count_said(p, H_SAID_CKPT) != 0)
        h_stage_fail(p, "a regular checkpoint happened");
    h_stage_kill9(p, "with every record forwarded");
    h_proc_release(p);

    h_stream_add(e->st, M, 0);
    produce_range(e, K, K + M);
    t0 = h_now_s();
    p = stage_start(e, ckdir, extra);
    h_proc *const procs2[] = {p, NULL};
    row->assigned = row->first_new = -1;
    for (;;) {
        double t = h_now_s() - t0;
        if (row->assigned < 0 && h_count_said(p, H_SAID_ASSIGNED) > 0)
            row->assigned = t;
        if (out_total(e) > (int64_t)K) {
            row->first_new = t;
            break;
        }
        h_stage_alive(p, "while restarting");
        if (t > 600)
            h_stage_fail(p, "no new output within 600 s of the restart");
        h_sleep_ms(2);
    }
    wait_out(e, procs2, (int64_t)(K + M), 600000);
    row->all_new = h_now_s() - t0;
    stage_stop(p); /* the drain checkpoints and commits */
    assert_committed_end(e);
    if (parse_replayed(p, &row->r, &row->s) != 1)
        h_stage_fail(p, "want exactly one '%s' line", H_SAID_REPLAYED);
    row->k = K;
    check_nothing_dropped(e);
    size_t n = 0;
    read_out(e, &n);
    assert_exactly_once(e, n, "after replaying the whole tail");
    h_proc_release(p);
    env_free(e);
}

static void test_replay_time(void **state)
{
    (void)state;
    /*
     * What fits the mock: 1M records of ~20 bytes (key "k%07u", value
     * "v%07zu") over 12 partitions is ~83k records a partition; with the
     * bloomstage-src header and record overhead an output record is ~45
     * bytes uncompressed (~3.7 MB a partition) and the stage's producer
     * compresses with lz4 (well under 1 MB); the input is produced lz4 too.
     * So 1M fits under the 5 MiB per partition (check_nothing_dropped
     * proves it for each row).
     */
    size_t ks[] = {10000, 50000, 100000, 200000, 1000000};
    size_t nk = sizeof(ks) / sizeof(ks[0]);
    bool big = !SANITIZED || getenv("BS_EOS_BIG");
    if (!big)
        nk--;
    replay_row rows[8];
    for (size_t i = 0; i < nk; i++) {
        replay_row_run(ks[i], &rows[i]);
        print_message("K=%zu: replayed %llu records in %.3f s\n", ks[i],
                      (unsigned long long)rows[i].r, rows[i].s);
    }
    print_message("restart after kill -9, K records forwarded since the last "
                  "checkpoint (12 partitions, mock broker%s):\n",
                  SANITIZED ? ", sanitizer build" : "");
    print_message("%10s %10s %10s %12s %14s %14s %12s\n", "K", "replayed R",
                  "replay S", "assigned at", "1st new out at", "all new at",
                  "first run");
    for (size_t i = 0; i < nk; i++)
        print_message("%10zu %10llu %9.3fs %11.2fs %13.2fs %13.2fs %11.2fs\n",
                      rows[i].k, (unsigned long long)rows[i].r, rows[i].s,
                      rows[i].assigned, rows[i].first_new, rows[i].all_new,
                      rows[i].run1);
    if (!big)
        print_message("(the 1M row is skipped in a sanitizer build; "
                      "BS_EOS_BIG=1 runs it)\n");
    print_message("(times from the restart; 'assigned at' includes the group "
                  "join, ~3 s after the dead member's session times out)\n");
}

int main(void)
{
    h_test_main("test_eos", "BS_EOS_ONLY", "BS_EOS_VERBOSE", "BS_EOS_STAGE_X");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_kill9_exactly_once, teardown),
        cmocka_unit_test_teardown(test_kill9_at_least_once_control, teardown),
        cmocka_unit_test_teardown(test_delivery_failures_produce_errors,
                                  teardown),
        cmocka_unit_test_teardown(test_delivery_failures_topic_unauthorized,
                                  teardown),
        cmocka_unit_test_teardown(test_scale_out_kill, teardown),
        cmocka_unit_test_teardown(test_rebalance_idle, teardown),
        cmocka_unit_test_teardown(test_rebalance_busy, teardown),
        cmocka_unit_test_teardown(test_scale_out_zombie, teardown),
        cmocka_unit_test_teardown(test_failed_commit_is_retried, teardown),
        cmocka_unit_test_teardown(test_tail_unreadable_at_assign, teardown),
        cmocka_unit_test_teardown(test_replay_time, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
