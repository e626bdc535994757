/*
 * test_kafka_guarantees.c -- what docs/guarantees.md promises, shown against Apache
 * Kafka itself (one KRaft node from scripts/kafka, started once for the
 * binary and reused by its tests, each test with topics and a group of its
 * own), the output read as downstream consumers read it
 * (isolation.level=read_committed):
 *
 *   1. graceful stop: SIGTERM drains, exits 0, the group's committed
 *      offsets are the input's end; a restart keeps the dedup state
 *      (copies of every earlier key, produced after the restart, are all
 *      dropped: in the rejected topic as duplicates, none in the output);
 *   2. kill -9 at seven moments of a run (right after the assignment,
 *      mid-batch, right after / 7 ms / 90 ms after a checkpoint, ...) with
 *      processing.guarantee=exactly_once (the default), restarting each
 *      time, input fed while the runs last: every unique key exactly once
 *      in the output; every other input record is in the rejected topic
 *      as a duplicate (at least once: rejected.topic is at-least-once) and
 *      no first record of a key is there;
 *   2b. SIGTERM at random instants of start-up, the join, the restore and
 *      steady state (BS_KG_SIGTERMS runs, the seed printed): each drains
 *      and exits 0, and the output is exact after a last run;
 *   3. the output topic missing (the broker does not auto-create topics):
 *      the stage exits non-zero with an error naming the topic, having
 *      consumed and committed nothing (the group has no offsets);
 *   4. the broker stopped (scripts/kafka stop-node) and started again mid-
 *      stream: it comes back on the same port, the stage resumes by
 *      itself, /ready answers 503 with a reason while the broker is away
 *      and 200 after, and every unique key is in the output exactly once.
 *
 * Beside them, one test of the harness itself (issue 26): the feeder
 * (h_feed_*) recovers from its idempotent producer's fatal error, raised
 * mid-stream, and the input still holds exactly the stream's records at
 * the stream's offsets.
 *
 * Needs BLOOMSTAGE_BIN (ctest sets it), Java and Maven (scripts/install-
 * deps).  BS_KG_ONLY=PATTERN runs only the matching tests; BS_KG_VERBOSE=1
 * prints every stage's stderr; BS_KG_STAGE_X="k=v ..." adds -X settings.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support.h"

#define NPARTS 4


/* ---- the environment: topics, a group, a configuration ------------------ */

typedef h_kenv env;

/* Topics NAME-in, NAME-out (unless !with_out) and NAME-rej (NPARTS
 * partitions each), group NAME, checkpoint.dir DIR/ckpt, a checkpoint
 * every 500 ms, small filters. */
static env *env_new(const char *name, bool with_out)
{
    h_kenv_opts o = {.nparts = NPARTS, .no_out = !with_out,
                     .rejected = true, .ckdir = true, .checkpoint_ms = 500,
                     .capacity = 30000};
    return h_kenv_new(h_kgroup_cluster(), name, &o);
}

static h_proc *stage_start(env *e, const char *const *xs)
{
    return h_stage_start(e->conf, xs, NULL);
}

static void assert_committed_end(env *e) { h_kenv_committed_end(e); }

static void wait_committed_end(env *e, h_proc *const *procs, int timeout_ms)
{
    h_kenv_wait_committed_end(e, procs, timeout_ms);
}

/* checkpoint_offset per partition of e->in, as p's assignment lines said
 * it last (-2: never assigned). */
static void assigned_at(env *e, h_proc *p, long long *ck)
{
    for (int i = 0; i < NPARTS; i++)
        ck[i] = -2;
    h_assigned as[1024];
    size_t n = h_parse_assigned(p, e->in, as, 1024);
    for (size_t i = 0; i < n && i < 1024; i++)
        if (!as[i].revoked && as[i].partition < NPARTS)
            ck[as[i].partition] = as[i].ckpt;
}

static h_outrec *expect_exactly_once(env *e, size_t *n, const char *why)
{
    return h_kenv_expect_once(e, n, why);
}

static size_t expect_rejected(env *e, size_t *extra)
{
    return h_kenv_expect_rejected(e, extra);
}

/* ---- 1. graceful stop, restart keeps the dedup state --------------------- */

static void test_graceful_stop_restart(void **state)
{
    (void)state;
    env *e = env_new("kg-graceful", true);
    const size_t N1 = 20000, NNEW = 2000;
    e->st = h_stream_new(2 * N1 + NNEW, NPARTS, 101);
    h_stream_add(e->st, N1, 30);
    h_stream_produce(e->st, e->h.bs, e->in, 0, N1, NULL);
    int64_t end1[NPARTS];
    memcpy(end1, e->st->next, sizeof(end1));

    double t0 = h_now_s();
    h_proc *p = stage_start(e, NULL);
    h_proc *const procs[] = {p, NULL};
    h_wait_said(p, H_SAID_ASSIGNED, 1, 120000);
    double joined = h_now_s() - t0;
    wait_committed_end(e, procs, 120000);
    h_stage_stop(p); /* SIGTERM: exits 0 */
    assert_committed_end(e);
    size_t n = 0;
    expect_exactly_once(e, &n, "first run, stopped with SIGTERM");
    h_expect_said(p, "msg=stopped");
    print_message("run 1: %zu records, %zu keys forwarded; first partition "
                  "assigned %.1f s after the start; committed = input end\n",
                  N1, n, joined);
    h_proc_release(p);

    /* A copy of every record so far, and some new keys, produced while the
     * second run starts. */
    size_t old_end = e->st->n;
    h_stream_add_copies(e->st, 0, old_end);
    size_t copies_end = e->st->n;
    h_stream_add(e->st, NNEW, 0);
    p = stage_start(e, NULL);
    h_proc *const procs2[] = {p, NULL};
    h_wait_said(p, H_SAID_ASSIGNED, 1, 120000);
    h_stream_produce(e->st, e->h.bs, e->in, old_end, e->st->n, NULL);
    wait_committed_end(e, procs2, 120000);
    long long ck[NPARTS];
    assigned_at(e, p, ck);
    h_stage_stop(p);
    for (int q = 0; q < NPARTS; q++)
        if (ck[q] != end1[q])
            fail_msg("restart: %s [%d] assigned at checkpoint_offset=%lld, "
                     "want %lld (where run 1 stopped)", e->in, q, ck[q],
                     (long long)end1[q]);
    assert_committed_end(e);
    h_outrec *o = expect_exactly_once(e, &n, "after a restart");
    for (size_t k = 0; k < n; k++)
        if (o[k].rec >= old_end && o[k].rec < copies_end)
            fail_msg("%s:%d:%lld, a copy (produced after the restart) of "
                     "key k%07u, was forwarded: the restart lost the dedup "
                     "state", e->in, (int)o[k].src_part,
                     (long long)o[k].src_off, o[k].id);
    size_t extra = 0, nrej = expect_rejected(e, &extra);
    assert_int_equal(nrej, e->st->n - e->st->nids); /* graceful: no replay */
    print_message("run 2: %zu copies of old keys all dropped, %zu new keys "
                  "forwarded; out %zu, rej %zu\n", copies_end - old_end,
                  NNEW, n, nrej);
    h_kenv_free(e);
}

/* ---- 2. kill -9 at many moments, exactly_once ------------------------------ */

static const h_kill_plan KILLS[] = {
    {.log = H_SAID_ASSIGNED, .what = "right after the assignment"},
    {.out_delta = 3000, .what = "mid-batch"},
    {.out_delta = 1500, .log = H_SAID_CKPT, .log_next = true,
     .what = "right after a checkpoint"},
    {.out_delta = 1500, .log = H_SAID_CKPT, .log_next = true, .ms = 7,
     .what = "7 ms after a checkpoint"},
    {.log = H_SAID_ASSIGNED, .ms = 250, .what = "250 ms after the assignment"},
    {.out_delta = 6000, .what = "mid-batch, later in the run"},
    {.out_delta = 1000, .log = H_SAID_CKPT, .log_next = true, .ms = 90,
     .what = "90 ms after a checkpoint"},
};
#define NKILLS (sizeof(KILLS) / sizeof(KILLS[0]))

static void test_kill9_exactly_once(void **state)
{
    (void)state;
    env *e = env_new("kg-kill9", true);
    const size_t N = 80000, N0 = 15000;
    const double FEED = 4000;
    e->st = h_stream_new(N, NPARTS, 111);
    h_stream_add(e->st, N, 50);
    h_stream_produce(e->st, e->h.bs, e->in, 0, N0, NULL);
    h_feed_start(e->h.bs, e->in, e->st, N0);
    /* The output-tail replay (test_kafka_txn kills the transactional
     * route at every crash point). */
    const char *const xs[] = {"processing.guarantee=exactly_once",
                              "exactly_once.method=replay", NULL};
    size_t replays = 0;
    for (size_t k = 0; k <= NKILLS; k++) {
        int64_t out0 = h_topic_end(e->q, e->out, NPARTS, NULL);
        double t0 = h_now_s();
        h_proc *p = stage_start(e, xs);
        double joined = -1;
        if (k < NKILLS) {
            h_wait_said(p, H_SAID_ASSIGNED, 1, 120000);
            joined = h_now_s() - t0;
            h_feed_rate(FEED);
            const h_kill_ctx at = {.q = e->q, .out_topic = e->out,
                                   .out_parts = NPARTS, .out0 = out0};
            h_kill_at(p, &KILLS[k], &at);
            h_feed_rate(0);
        } else {
            h_wait_said(p, H_SAID_ASSIGNED, 1, 120000);
            joined = h_now_s() - t0;
            h_feed_finish(120000);
            h_proc *const procs[] = {p, NULL};
            wait_committed_end(e, procs, 180000);
            h_stage_stop(p);
        }
        size_t nr = h_count_said(p, H_SAID_REPLAYED);
        replays += nr;
        print_message("run %zu (%s): output %lld -> %lld, assigned %.1f s "
                      "after the start, tail replayed %zu times\n", k + 1,
                      k < NKILLS ? KILLS[k].what : "drained on SIGTERM",
                      (long long)out0,
                      (long long)h_topic_end(e->q, e->out, NPARTS, NULL),
                      joined, nr);
        h_proc_release(p);
    }
    assert_committed_end(e);
    if (replays == 0)
        fail_msg("no restart logged '%s': the replay path never ran",
                 H_SAID_REPLAYED);
    size_t n = 0, extra = 0;
    expect_exactly_once(e, &n, "exactly_once after kill -9 and restart");
    size_t nrej = expect_rejected(e, &extra);
    print_message("%zu records, %zu unique keys exactly once in %s after %zu "
                  "kills; %s holds all %zu duplicates (%zu records, %zu "
                  "rejected again after a kill)\n", N, e->st->nids, e->out,
                  NKILLS, e->rej, e->st->n - e->st->nids, nrej, extra);
    h_kenv_free(e);
}

/* ---- 2b. SIGTERM at any instant ---------------------------------------------- */

/* How far a run got when its SIGTERM came, from its log. */
static const char *phase_of(h_proc *p)
{
    if (!h_said(p, "msg=started"))
        return "start-up";
    if (!h_said(p, H_SAID_ASSIGNED))
        return "joining";
    if (!h_said(p, H_SAID_CKPT))
        return "restore, first round";
    return "steady state";
}

/* SIGTERM at a random instant of start-up, the group join, the restore
 * and steady state, BS_KG_SIGTERMS times (default 6; the seed printed,
 * BS_KG_SEED repeats a run), input fed meanwhile: each run drains and
 * exits 0 (h_stage_stop), and after a last run to the input's end every
 * unique key is in the output exactly once.  A SIGTERM between the
 * group's JoinGroup and SyncGroup answers is the moment librdkafka
 * 2.0.2's cooperative-sticky assignor would abort in (clients.c). */
static void test_sigterm_anytime(void **state)
{
    (void)state;
    env *e = env_new("kg-sigterm", true);
    const char *n_env = getenv("BS_KG_SIGTERMS"), *seed_env = getenv("BS_KG_SEED");
    int runs = n_env && atoi(n_env) > 0 ? atoi(n_env) : 6;
    uint32_t seed = seed_env && *seed_env ? (uint32_t)strtoul(seed_env, NULL, 10)
                                          : (uint32_t)h_now_ms() | 1u;
    print_message("BS_KG_SEED=%u BS_KG_SIGTERMS=%d\n", seed, runs);
    const size_t N = 20000 + 2000 * (size_t)runs, N0 = 10000;
    e->st = h_stream_new(N, NPARTS, 131);
    h_stream_add(e->st, N, 40);
    h_stream_produce(e->st, e->h.bs, e->in, 0, N0, NULL);
    h_feed_start(e->h.bs, e->in, e->st, N0);
    h_feed_rate(2000);
    const char *names[] = {"start-up", "joining", "restore, first round",
                           "steady state"};
    int seen[4] = {0};
    uint32_t rng = seed;
    for (int k = 0; k < runs; k++) {
        /* Every other run aims at the join: 0-150 ms after "started"
         * (a static member rejoins within about 40-200 ms). */
        bool at_join = k % 2 == 1;
        int delay = (int)(h_xorshift32(&rng) % (at_join ? 150 : 5000));
        h_proc *p = stage_start(e, NULL);
        /* The instants start when `run` handles SIGTERM (its first step;
         * before, the loader's default action kills any process). */
        while (!h_proc_catches(h_process_pid(p), SIGTERM)) {
            h_stage_alive(p, "starting");
            h_nap(1);
        }
        if (at_join)
            h_wait_said(p, "msg=started", 1, 120000);
        for (double t0 = h_now_s(); (h_now_s() - t0) * 1000 < delay;)
            h_nap(5);
        const char *phase = phase_of(p);
        h_stage_stop(p); /* exit 0 within H_EXIT_MS, or the test fails */
        for (int i = 0; i < 4; i++)
            seen[i] += strcmp(phase, names[i]) == 0;
        print_message("run %d: SIGTERM %d ms after %s, in %s: drained, "
                      "exit 0\n", k + 1, delay,
                      at_join ? "msg=started" : "SIGTERM is handled", phase);
        h_proc_release(p);
    }
    h_feed_finish(120000);
    h_proc *p = stage_start(e, NULL);
    h_wait_said(p, H_SAID_ASSIGNED, 1, 120000);
    h_proc *const procs[] = {p, NULL};
    wait_committed_end(e, procs, 180000);
    h_stage_stop(p);
    h_proc_release(p);
    size_t n = 0;
    expect_exactly_once(e, &n, "after SIGTERMs at random instants");
    print_message("%d SIGTERMs (start-up %d, joining %d, restore %d, steady "
                  "%d), all exit 0; %zu unique keys exactly once\n", runs,
                  seen[0], seen[1], seen[2], seen[3], n);
    h_kenv_free(e);
}

/* ---- 3. the output topic missing -------------------------------------------- */

static void output_topic_missing(const char *name, const char *guarantee)
{
    env *e = env_new(name, false);
    e->st = h_stream_new(1000, NPARTS, 121);
    h_stream_add(e->st, 1000, 20);
    h_stream_produce(e->st, e->h.bs, e->in, 0, 1000, NULL);
    const char *const xs[] = {guarantee, NULL};
    h_proc *p = stage_start(e, xs);
    int status = 0;
    int rc = h_process_wait(p, H_EXIT_MS, &status);
    if (rc != 0)
        h_stage_fail(p, "the stage still runs %d s after its start, its "
                     "output topic %s missing", H_EXIT_MS / 1000, e->out);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        h_stage_fail(p, "the stage exited 0 with its output topic missing");
    if (!WIFEXITED(status))
        h_stage_fail(p, "the stage ended by %s, not an exit",
                     h_status_str(status));
    /* The error: a line naming the topic and saying it does not exist. */
    /* (copied: p's stderr buffer is captured afresh by the next call) */
    char said[512] = "";
    for (const char *l = h_process_stderr(p); l && *l && !said[0];) {
        const char *eol = strchr(l, '\n');
        size_t len = eol ? (size_t)(eol - l) : strlen(l);
        char *line = h_strdupf("%.*s", (int)len, l);
        if (strstr(line, e->out) && (strstr(line, "Unknown topic") ||
                                     strstr(line, "does not exist") ||
                                     strstr(line, "must exist")))
            snprintf(said, sizeof(said), "%s", line);
        free(line);
        l = eol ? eol + 1 : NULL;
    }
    if (!said[0])
        h_stage_fail(p, "no error line names the output topic %s as "
                     "missing", e->out);
    if (h_said(p, H_SAID_ASSIGNED))
        h_stage_fail(p, "the stage had partitions assigned before failing");
    int64_t c[NPARTS];
    H_CHECK(h_committed_retry(e->h.bs, e->group, e->in, NPARTS, c, 30000));
    for (int q = 0; q < NPARTS; q++)
        if (c[q] != RD_KAFKA_OFFSET_INVALID)
            fail_msg("%s [%d]: the group committed %lld; want nothing",
                     e->in, q, (long long)c[q]);
    int64_t rej = 0;
    H_CHECK(h_topic_total(e->h.bs, e->rej, &rej));
    assert_int_equal(rej, 0);
    print_message("%s; the line: %s\n", h_status_str(status), said);
    h_kenv_free(e);
}

static void test_output_topic_missing(void **state)
{
    (void)state;
    output_topic_missing("kg-noout", "processing.guarantee=exactly_once");
}

/*
 * The same with at_least_once, which does not read the output: the stage
 * used to check the output topic only for exactly_once, took its
 * partitions, and rolled back on failed deliveries until a seek timed out
 * (~45 s, an error that did not name the topic).  Now every topic the
 * stage produces to is checked at start-up.
 */
static void test_output_topic_missing_at_least_once(void **state)
{
    (void)state;
    output_topic_missing("kg-noout-alo", "processing.guarantee=at_least_once");
}


/* ---- 4. the broker away and back -------------------------------------------- */

/* Polls /ready until it answers `want` (body into why), the stage alive;
 * returns the seconds it took. */
static double wait_ready(h_proc *p, unsigned port, int want, char *why,
                         size_t why_size, int timeout_ms)
{
    double t0 = h_now_s();
    int last = 0;
    char err[256] = "";
    for (;;) {
        h_http_resp r = {0};
        if (h_http_request(port, "GET", "/ready", &r, err, sizeof(err)) == 0) {
            last = r.status;
            if (r.status == want) {
                snprintf(why, why_size, "%.*s", (int)r.body_len, r.body);
                size_t l = strlen(why);
                while (l && why[l - 1] == '\n')
                    why[--l] = '\0';
                h_http_resp_free(&r);
                return h_now_s() - t0;
            }
            h_http_resp_free(&r);
        }
        h_stage_alive(p, "while /ready was polled");
        if ((h_now_s() - t0) * 1000 > timeout_ms)
            h_stage_fail(p, "/ready did not answer %d within %d s (last: %d%s"
                         "%s)", want, timeout_ms / 1000, last,
                         err[0] ? ", " : "", err);
        h_nap(250);
    }
}

static void test_broker_restart(void **state)
{
    (void)state;
    env *e = env_new("kg-restart", true);
    const size_t N = 60000, N0 = 5000;
    e->st = h_stream_new(N, NPARTS, 131);
    h_stream_add(e->st, N, 40);
    h_stream_produce(e->st, e->h.bs, e->in, 0, N0, NULL);
    h_feed_start(e->h.bs, e->in, e->st, N0);
    const char *const xs[] = {"metrics.listen=127.0.0.1:0", NULL};
    h_proc *p = stage_start(e, xs);
    h_proc *const procs[] = {p, NULL};
    unsigned port = h_stage_metrics_port(p, 60000);
    char why[160];
    wait_ready(p, port, 200, why, sizeof(why), 120000);
    h_feed_rate(3000);
    h_wait_out(e->q, e->out, NPARTS, procs, 6000, 120000);

    int port0 = h_kcluster_port(h_kgroup_cluster(), 1);
    int64_t out_down = h_topic_end(e->q, e->out, NPARTS, NULL);
    size_t fed_down = h_feed_next();
    double t_stop = h_now_s();
    H_CHECK(h_kcluster_stop_node(h_kgroup_cluster(), 1));
    double down = wait_ready(p, port, 503, why, sizeof(why), 90000);
    if (!why[0])
        h_stage_fail(p, "/ready answered 503 with no reason");
    char why_down[160];
    snprintf(why_down, sizeof(why_down), "%s", why);
    h_nap(3000); /* the stage, and the feeder, go on without a broker */
    h_stage_alive(p, "with the broker away");
    H_CHECK(h_kcluster_start_node(h_kgroup_cluster(), 1));
    double away = h_now_s() - t_stop;
    int port1 = h_kcluster_port(h_kgroup_cluster(), 1);
    if (port0 <= 0 || port1 != port0)
        fail_msg("node 1 came back on port %d, it was on %d", port1, port0);
    double up = wait_ready(p, port, 200, why, sizeof(why), 120000);
    if (strcmp(why, "ready"))
        h_stage_fail(p, "/ready answered 200 with '%s', want 'ready'", why);
    h_feed_finish(180000);
    wait_committed_end(e, procs, 180000);
    h_stage_stop(p);
    size_t n = 0, extra = 0;
    expect_exactly_once(e, &n, "the broker stopped and started mid-stream");
    size_t nrej = expect_rejected(e, &extra);
    assert_committed_end(e);
    print_message("broker stopped with %lld output records and %zu of %zu "
                  "input records fed; /ready 503 ('%s') %.1f s after "
                  "stop-node returned; the broker away %.1f s (same port %d); /ready 200 "
                  "%.1f s after it answered; out %zu (exactly once), rej %zu "
                  "(%zu again)\n", (long long)out_down, fed_down, N, why_down,
                  down, away, port1, up, n, nrej, extra);
    print_message("the stage logged %zu 'assignment lost', %zu 'commit "
                  "failed', %zu 'checkpoint failed', %zu 'rolling back'\n",
                  h_count_said(p, "assignment lost"),
                  h_count_said(p, "msg=\"commit failed\""),
                  h_count_said(p, "msg=\"checkpoint failed\""),
                  h_count_said(p, "rolling back"));
    h_kenv_free(e);
}

/* ---- 5. static membership (docs/configuration.md, "Fast restarts") ------- */

/*
 * With consumer.group.instance.id, a stage killed -9 and restarted with the
 * same id gets its partitions back at once, where a new member waits for
 * the dead one's session to time out (30 s here); and a second live
 * instance with the same id fences the first, which stops with a fatal
 * error while the second goes on.  Exactly once throughout.  (The second
 * instance comes while the input is idle; a zombie with records in flight
 * is test_kafka_txn's.)
 */
static void test_static_membership(void **state)
{
    (void)state;
    env *e = env_new("kg-static", true);
    const size_t N = 60000, N0 = 10000;
    e->st = h_stream_new(N, NPARTS, 131);
    h_stream_add(e->st, N, 50);
    h_stream_produce(e->st, e->h.bs, e->in, 0, N0, NULL);
    h_feed_start(e->h.bs, e->in, e->st, N0);
    const char *const xs[] = {"consumer.group.instance.id=kg-static-1",
                              "consumer.session.timeout.ms=30000", NULL};
    h_proc *a = stage_start(e, xs);
    h_wait_said(a, H_SAID_ASSIGNED, 1, 120000);
    h_feed_rate(4000);
    h_nap(3000);
    h_stage_kill9(a, "mid-stream");
    size_t fed_at_kill = h_feed_next();

    double t0 = h_now_s();
    h_proc *a2 = stage_start(e, xs);
    h_wait_said(a2, H_SAID_ASSIGNED, 1, 120000);
    double back = h_now_s() - t0;
    if (back >= 20.0)
        fail_msg("the restart with the same group.instance.id was assigned "
                 "%.1f s after its start: it waited for the dead member's "
                 "session (30 s)", back);

    /* Caught up with what was fed, and idle; then a second instance with
     * the same id. */
    h_feed_rate(0);
    int64_t fed_end[NPARTS];
    h_stream_ends(e->st, h_feed_next(), fed_end);
    h_proc *const procs[] = {a2, NULL};
    h_wait_committed_tolerant(e->h.bs, e->group, e->in, NPARTS, fed_end,
                              procs, 120000);
    h_proc *b = stage_start(e, xs);
    int status = 0;
    if (h_process_wait(a2, 60000, &status) != 0) {
        fprintf(stderr, "--- first instance ---\n%s\n--- second ---\n%s\n",
                h_process_stderr_tail(a2, 3000), h_process_stderr_tail(b, 3000));
        fail_msg("the first instance still runs 60 s after a second one "
                 "joined with its group.instance.id");
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        fail_msg("the fenced instance exited 0");
    h_expect_said(a2, "fenced");
    h_wait_said(b, H_SAID_ASSIGNED, 1, 120000);
    h_feed_finish(120000);
    h_proc *const procs2[] = {b, NULL};
    wait_committed_end(e, procs2, 180000);
    h_stage_stop(b);
    assert_committed_end(e);
    size_t n = 0;
    expect_exactly_once(e, &n, "static membership: kill -9, restart, fenced");
    print_message("killed -9 with %zu of %zu fed; the restart (same "
                  "group.instance.id, session 30 s) assigned %.1f s after its "
                  "start; a second instance with the id fenced the first "
                  "(%s); %zu records, %zu keys exactly once\n", fed_at_kill,
                  N, back, h_status_str(status), N, n);
    h_kenv_free(e);
}

/* ---- 6. the harness's feeder survives its producer's fatal error -------- */

/* Issue 26: librdkafka 2.0.2's idempotent producer can fail fatally under
 * a broker pause (#4438).  A fatal error raised into a stream fed at a
 * rate: the feeder recovers once, and the input holds exactly the
 * stream's records at the stream's offsets, each once, none missing. */
static void test_feeder_recovers(void **state)
{
    (void)state;
    env *e = env_new("kg-feeder", false);
    const size_t N = 60000;
    e->st = h_stream_new(N, NPARTS, 151);
    h_stream_add(e->st, N, 30);
    unsigned before = h_feed_recoveries();
    h_feed_start(e->h.bs, e->in, e->st, 0);
    h_feed_rate(10000);
    /* Raised once every partition holds records, while more are queued
     * or in flight and more are still to come: some of what was sent is
     * in the log, some is not, and the feeder goes on after it. */
    int64_t hw[NPARTS] = {0}, in_log = 0;
    for (bool all = false; !all;) {
        h_nap(20);
        H_MUST(h_offsets(e->q, e->in, NPARTS, RD_KAFKA_OFFSET_END, hw,
                         H_REQUEST_MS));
        all = true;
        in_log = 0;
        for (int p = 0; p < NPARTS; p++) {
            all = all && hw[p] > 0;
            in_log += hw[p];
        }
    }
    size_t fed_at_fatal = h_feed_next();
    if (fed_at_fatal >= N || (size_t)in_log >= fed_at_fatal)
        fail_msg("%zu of %zu records fed, %lld in %s: nothing left to feed "
                 "or nothing in flight, the test would prove little",
                 fed_at_fatal, N, (long long)in_log, e->in);
    h_feed_test_fatal("raised by test_feeder_recovers");
    h_feed_finish(120000);
    if (h_feed_recoveries() != before + 1)
        fail_msg("the feeder recovered %u times, want once",
                 h_feed_recoveries() - before);

    h_record_list l = {0};
    H_MUST(h_consume_all(e->h.bs, e->in, H_CONSUME_MS, &l));
    bool *seen = h_xcalloc(N, sizeof(*seen));
    char bad[300] = "";
    for (size_t k = 0; k < l.n && !bad[0]; k++) {
        const h_record *r = &l.recs[k];
        size_t i = h_stream_which(e->st, r);
        if (i >= N)
            snprintf(bad, sizeof(bad), "%s [%d] offset %lld holds a record "
                     "that is not the stream's: key %s", e->in,
                     (int)r->partition, (long long)r->offset,
                     r->key ? (const char *)r->key : "NULL");
        else if (seen[i])
            snprintf(bad, sizeof(bad), "record %zu (%s) is in %s twice, the "
                     "second time at [%d] offset %lld", i, e->st->key[i],
                     e->in, (int)r->partition, (long long)r->offset);
        else if (r->partition != e->st->part[i] || r->offset != e->st->off[i])
            snprintf(bad, sizeof(bad), "record %zu (%s) is at %s [%d] offset "
                     "%lld, the stream has it at [%d] offset %lld", i,
                     e->st->key[i], e->in, (int)r->partition,
                     (long long)r->offset, (int)e->st->part[i],
                     (long long)e->st->off[i]);
        else
            seen[i] = true;
    }
    if (!bad[0] && l.n != N)
        snprintf(bad, sizeof(bad), "%s holds %zu records, the stream %zu",
                 e->in, l.n, N);
    free(seen);
    h_record_list_free(&l);
    if (bad[0])
        fail_msg("after the feeder's producer failed at record %zu: %s",
                 fed_at_fatal, bad);
    print_message("a fatal error raised at record %zu of %zu (input ends "
                  "%lld %lld %lld %lld): the input holds the stream's records "
                  "at its offsets, each once\n", fed_at_fatal, N,
                  (long long)hw[0], (long long)hw[1], (long long)hw[2],
                  (long long)hw[3]);
    h_kenv_free(e);
}

/* ---- main ----------------------------------------------------------------- */

int main(void)
{
    h_test_main("test_kafka_guarantees", "BS_KG_ONLY", "BS_KG_VERBOSE",
                "BS_KG_STAGE_X");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_graceful_stop_restart,
                                  h_kfixture_teardown),
        cmocka_unit_test_teardown(test_kill9_exactly_once,
                                  h_kfixture_teardown),
        cmocka_unit_test_teardown(test_sigterm_anytime, h_kfixture_teardown),
        cmocka_unit_test_teardown(test_output_topic_missing,
                                  h_kfixture_teardown),
        cmocka_unit_test_teardown(test_output_topic_missing_at_least_once,
                                  h_kfixture_teardown),
        cmocka_unit_test_teardown(test_broker_restart, h_kfixture_teardown),
        cmocka_unit_test_teardown(test_static_membership,
                                  h_kfixture_teardown),
        cmocka_unit_test_teardown(test_feeder_recovers, h_kfixture_teardown),
    };
    return cmocka_run_group_tests(tests, h_kgroup_setup1, h_kgroup_teardown);
}
