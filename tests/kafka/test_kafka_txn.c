/*
 * test_kafka_txn.c -- exactly_once by Kafka transactions
 * (exactly_once.method=transactions), shown against Apache Kafka itself
 * (one KRaft node from scripts/kafka --proxied, started once for the
 * binary with a proxy to its proxied listener; each test with topics and a
 * group of its own), every topic read as downstream consumers read it
 * (isolation.level=read_committed):
 *
 *   1. the stage stopped abruptly at every named crash point of a round
 *      (BLOOMSTAGE_CRASH_AT: after the flush, the checkpoint write, the
 *      store's sync, send_offsets, the commit, the store's release), and
 *      killed -9 at two moments, restarting each time with the input fed
 *      meanwhile: every unique key exactly once in the output, and -- the
 *      rejected records being in the transaction too -- every other input
 *      record exactly once in the rejected topic; with the dir store, and
 *      again with the Kafka store, whose chains of deltas are in the
 *      transactions (the crash comes in the third round: two deltas);
 *   2. the zombie, twice: an instance SIGSTOPped past its session timeout
 *      while a second one takes its partitions, then SIGCONTed with records
 *      in flight; it logs that it was fenced, rejoins, and nothing is lost
 *      or doubled (the Kafka store, whose records are in the transaction);
 *   3. a transaction that times out (producer.transaction.timeout.ms far
 *      below a stall of the stage, the session timeout above it): rolled
 *      back, then exactly once;
 *   4. the broker stopped and started again mid-transaction: exactly once;
 *   5. two instances of one configuration (one checkpoint.dir, the Kafka
 *      store) on one host: each has a transactional id of its own, neither
 *      is fenced more than once, and every unique key is once in the
 *      output (issue 26: they had one id and fenced each other hundreds of
 *      times);
 *   6. two instances given one exactly_once.transactional.id: fenced over
 *      and over, one of them says so, naming the id, and exits non-zero.
 *   7. the Kafka store's checkpoint records cut off in the open
 *      transaction (the stage reaches the node through a proxy, the link
 *      blackholed past the transaction timeout as they are sent):
 *      the transaction is aborted and rolled back, the stage commits again
 *      after the heal, and every unique key is once in the output (issue
 *      26: it was never aborted, and the instance stopped committing);
 *   8. the link cut (the proxy, past a record's delivery timeout) in the
 *      stage's first transaction, which holds the partitions' first
 *      checkpoints (the Kafka store): it is aborted and rolled back, the
 *      stage goes on after the heal, and every unique key is once in the
 *      output (the rollback wrote no first checkpoint, outside any
 *      transaction, and broke invariant 1: SIGABRT).  Tests 2, 3 and 7
 *      roll back later transactions.
 *   9. a restore deferred beside partitions with output in the open
 *      transaction: a second instance stops right after sending its
 *      offsets (its transaction left open, holding them), the first is
 *      given its partitions, whose committed offsets stay unstable past
 *      the restore's wait, so their restore waits RESTORE_PENDING for
 *      later rounds; every unique key is once in the output (the retry
 *      aborted the transaction holding the first instance's output, then
 *      committed that instance's offsets past it: records lost).
 *  10. partitions given to an instance while it drains (its link slowed
 *      by the proxy, so the group's rebalance ends inside its consumer
 *      close): it declines them, takes and restores nothing, exits 0, and
 *      every unique key is once in the output after a third instance
 *      took everything.
 *  11. an AddPartitionsToTxn lost in a cut (the proxy's trip wire drops
 *      it, later requests on its connection are answered): its records
 *      time out, the transaction is rolled back, and the stage outlives
 *      the lost request's own timeout (librdkafka 2.0.2's abort zeroed its
 *      count of requests in flight, and that timeout failed an assertion:
 *      SIGABRT); every unique key is once in the output.
 *  12. exactly_once.overlap: a commit refused while the next transaction,
 *      on the other producer, holds records: both are aborted, and every
 *      unique key is once in the output (the directory store, then the
 *      Kafka store).  Every other test runs with the overlap too (the
 *      default).
 *
 * Needs BLOOMSTAGE_BIN (ctest sets it), Java and Maven (scripts/install-
 * deps).  BS_KT_ONLY=PATTERN runs only the matching tests; BS_KT_VERBOSE=1
 * prints every stage's stderr; BS_KT_STAGE_X="k=v ..." adds -X settings.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support.h"

#define NPARTS 4

/* Every stage here: transactions, and a transaction timeout short enough
 * that one left open by a killed instance (a restart has the same
 * transactional.id and aborts it at once; a second instance does not) ends
 * within the test's waits. */
#define TXN_X "exactly_once.method=transactions"
#define TXN_TIMEOUT_X "producer.transaction.timeout.ms=10000"

static h_kenv *env_new(const char *name, bool kafka_store, int ckpt_ms)
{
    h_kenv_opts o = {.nparts = NPARTS, .rejected = true, .ckdir = !kafka_store,
                     .kafka_store = kafka_store, .checkpoint_ms = ckpt_ms,
                     .capacity = 30000};
    return h_kenv_new(h_kgroup_cluster(), name, &o);
}

/* The run used transactions (start-up says so). */
static void expect_txn(h_proc *p)
{
    if (!h_said(p, H_SAID_TXN))
        h_stage_fail(p, "the stage did not log '%s'", H_SAID_TXN);
}

/* e->st: n records (dup_pct of them copies of earlier keys), the first n0
 * in the input already, the rest fed from the wait loops once
 * h_feed_rate says how fast. */
static void stream_fed(h_kenv *e, size_t n, size_t n0, uint64_t seed,
                       unsigned dup_pct)
{
    e->st = h_stream_new(n, NPARTS, seed);
    h_stream_add(e->st, n, dup_pct);
    h_stream_produce(e->st, e->h.bs, e->in, 0, n0, NULL);
    h_feed_start(e->h.bs, e->in, e->st, n0);
}

/* A stage with -X xs (and env), assigned its partitions, on transactions. */
static h_proc *start_txn(h_kenv *e, const char *const *xs, char *const *env)
{
    h_proc *p = h_stage_start(e->conf, xs, env);
    h_wait_said(p, H_SAID_ASSIGNED, 1, 120000);
    expect_txn(p);
    return p;
}

/* Records in p's open transaction: the output holds out_min records, a
 * round committed after that, and then 200 more records were produced (the
 * high watermark counts records of open transactions). */
static void mid_transaction(h_kenv *e, h_proc *p, int64_t out_min)
{
    h_proc *const procs[] = {p, NULL};
    h_wait_out(e->q, e->out, NPARTS, procs, out_min, 60000);
    h_wait_said(p, H_SAID_CKPT, h_count_said(p, H_SAID_CKPT) + 1,
                60000);
    int64_t end = h_topic_end(e->q, e->out, NPARTS, NULL);
    h_wait_out(e->q, e->out, NPARTS, procs, end + 200, 60000);
}

/* The end of a test: every unique key once in the output, every other
 * record once in the rejected topic, the offsets at the input's end. */
static void expect_all_once(h_kenv *e, const char *why)
{
    h_kenv_committed_end(e);
    size_t n = 0, extra = 0;
    h_kenv_expect_once(e, &n, why);
    size_t nrej = h_kenv_expect_rejected(e, &extra);
    if (extra)
        fail_msg("%s: %zu records are in %s more than once (the rejected "
                 "records are in the transaction)", why, extra, e->rej);
    print_message("%s: %zu records, %zu keys once in %s, %zu duplicates once "
                  "in %s\n", why, e->st->n, n, e->out, nrej, e->rej);
}

/* A fault made by fn(e, p, arg) until p logs needle once more within 20 s
 * of it, three times at most: a fault that misses its moment (the test's
 * thread late on a loaded machine) changes nothing and is made again.
 * Returns how many it took; the test fails after three, naming `what`. */
typedef void fault_fn(h_kenv *e, h_proc *p, void *arg);
static int fault_until_said(h_kenv *e, h_proc *p, fault_fn *fn, void *arg,
                            const char *needle, const char *what)
{
    for (int n = 1;; n++) {
        size_t before = h_count_said(p, needle);
        fn(e, p, arg);
        double t0 = h_now_s();
        while (h_count_said(p, needle) == before && h_now_s() - t0 < 20) {
            h_stage_alive(p, what);
            h_nap(100);
        }
        if (h_count_said(p, needle) > before)
            return n;
        if (n == 3)
            h_stage_fail(p, "3 times %s, and no '%s'", what, needle);
    }
}

/* ---- 1. a crash at every named point, kill -9 at two moments ----------- */

static const h_kill_plan KILLS[] = {
    {.out_delta = 3000, .what = "mid-batch"},
    {.out_delta = 1500, .log = H_SAID_CKPT, .log_next = true, .ms = 7,
     .what = "7 ms after a checkpoint"},
};
#define NKILLS (sizeof(KILLS) / sizeof(KILLS[0]))

static void crash_points(const char *name, bool kafka_store)
{
    h_kenv *e = env_new(name, kafka_store, 500);
    size_t npoints = 0;
    while (h_crash_points[npoints])
        npoints++;
    stream_fed(e, 150000, 10000, 211, 50);
    const char *const xs[] = {TXN_X, TXN_TIMEOUT_X, NULL};
    size_t runs = npoints + NKILLS;
    for (size_t k = 0; k <= runs; k++) {
        int64_t out0 = h_topic_end(e->q, e->out, NPARTS, NULL);
        const char *point = k < npoints ? h_crash_points[k] : NULL;
        /* The third round of the run: partitions restored, records in
         * flight. */
        h_proc *p = start_txn(e, xs, point ? h_crash_env(point, 3) : NULL);
        const char *what;
        if (point) {
            h_feed_rate(3000);
            h_wait_crashed(p, point, 120000);
            h_feed_rate(0);
            what = point;
        } else if (k < runs) {
            h_feed_rate(3000);
            const h_kill_ctx at = {.q = e->q, .out_topic = e->out,
                                   .out_parts = NPARTS, .out0 = out0};
            h_kill_at(p, &KILLS[k - npoints], &at);
            h_feed_rate(0);
            what = KILLS[k - npoints].what;
        } else {
            h_feed_finish(120000);
            h_proc *const procs[] = {p, NULL};
            h_kenv_wait_committed_end(e, procs, 180000);
            h_stage_stop(p);
            what = "drained on SIGTERM";
        }
        print_message("run %zu (%s): output %lld -> %lld (read_uncommitted "
                      "ends), %zu rollbacks\n", k + 1, what, (long long)out0,
                      (long long)h_topic_end(e->q, e->out, NPARTS, NULL),
                      h_count_said(p, "rolling back"));
        h_proc_release(p);
    }
    expect_all_once(e, kafka_store ? "transactions and the Kafka store, a "
                    "crash at every named point" : "transactions, a crash at "
                    "every named point");
    if (kafka_store) {
        /* The crashes came in rounds that wrote deltas. */
        h_ckpt_chains ch = h_kenv_ckpt_chains(e);
        if (ch.chains == 0)
            fail_msg("none of the %zu manifests in %s names a delta",
                     ch.manifests, e->ckt);
        print_message("the Kafka store: %zu of %zu committed manifests name "
                      "a chain, the longest %zu states\n", ch.chains,
                      ch.manifests, ch.longest);
    }
    h_kenv_free(e);
}

static void test_crash_points(void **state)
{
    (void)state;
    crash_points("kt-crash", false);
}

static void test_crash_points_kafka_store(void **state)
{
    (void)state;
    crash_points("kt-crashk", true);
}

/* ---- 2. the zombie ------------------------------------------------------ */

/* How many of e->in's partitions p has had assigned (its log). */
static size_t assigned(h_kenv *e, h_proc *p)
{
    char pat[128];
    snprintf(pat, sizeof(pat), H_SAID_ASSIGNED " topic=%s ", e->in);
    return h_count_said(p, pat);
}

/*
 * z is stopped past its session timeout (6 s) and its transaction timeout
 * (10 s, with the broker's 10 s check) while the feed goes on: `other`
 * takes its partitions.  Then z resumes with records in flight.
 */
static void zombie(h_kenv *e, h_proc *z, h_proc *other, const char *zname)
{
    h_proc *const both[] = {z, other, NULL};
    size_t before = assigned(e, other);
    int64_t out0 = h_topic_end(e->q, e->out, NPARTS, NULL);
    h_wait_out(e->q, e->out, NPARTS, both, out0 + 2000, 60000);
    H_CHECK(h_process_kill(z, SIGSTOP));
    double t0 = h_now_s();
    /* The other takes z's partitions once z's session has timed out. */
    while (assigned(e, other) == before) {
        if (h_now_s() - t0 > 90)
            h_stage_fail(other, "%s stopped 90 s ago; the other instance "
                         "was given none of its partitions", zname);
        h_stage_alive(other, "while the zombie was stopped");
        h_nap(200);
    }
    double taken = h_now_s() - t0;
    h_nap(12000); /* and beyond z's transaction timeout */
    size_t fenced0 = h_count_said(z, H_SAID_FENCED);
    H_CHECK(h_process_kill(z, SIGCONT));
    h_wait_said(z, H_SAID_FENCED, fenced0 + 1, 60000);
    h_stages_alive(both, "after the zombie resumed");
    print_message("%s stopped: the other instance had its partitions %.1f s "
                  "later; resumed after %.1f s, it logged it was fenced\n",
                  zname, taken, h_now_s() - t0);
}

static void test_zombie_twice(void **state)
{
    (void)state;
    h_kenv *e = env_new("kt-zombie", true, 1000);
    stream_fed(e, 120000, 10000, 221, 50);
    char *cka = h_strdupf("checkpoint.dir=%s/a", e->h.dir);
    char *ckb = h_strdupf("checkpoint.dir=%s/b", e->h.dir);
    const char *const xa[] = {TXN_X, TXN_TIMEOUT_X, cka, NULL};
    const char *const xb[] = {TXN_X, TXN_TIMEOUT_X, ckb, NULL};
    h_proc *a = start_txn(e, xa, NULL);
    h_feed_rate(2000);
    h_proc *b = start_txn(e, xb, NULL);
    zombie(e, a, b, "instance a");
    /* a rejoined: the group gives it partitions again. */
    size_t a0 = assigned(e, a);
    h_proc *const both[] = {a, b, NULL};
    double t0 = h_now_s();
    while (assigned(e, a) == a0) {
        if (h_now_s() - t0 > 90)
            h_stage_fail(a, "the fenced instance was given no partition "
                         "again within 90 s");
        h_stages_alive(both, "while the fenced instance rejoined");
        h_nap(200);
    }
    zombie(e, b, a, "instance b");
    h_feed_finish(180000);
    h_kenv_wait_committed_end(e, both, 240000);
    h_stage_stop(a);
    h_stage_stop(b);
    expect_all_once(e, "transactions, two zombies");
    free(cka);
    free(ckb);
    h_kenv_free(e);
}

/* ---- 3. a transaction that times out ------------------------------------ */

/* p stopped for 16 s with records in its open transaction. */
static void stall(h_kenv *e, h_proc *p, void *arg)
{
    (void)arg;
    mid_transaction(e, p, 3000);
    H_CHECK(h_process_kill(p, SIGSTOP));
    h_nap(16000);
    H_CHECK(h_process_kill(p, SIGCONT));
}

static void test_txn_timeout(void **state)
{
    (void)state;
    h_kenv *e = env_new("kt-timeout", false, 500);
    /* 78 s of feed: room for three stalls of up to 26 s each (a stall,
     * up to 20 s waiting for its rollback, a round before the next); the
     * rest is produced at once at the end. */
    stream_fed(e, 240000, 5000, 231, 40);
    /* The stall (SIGSTOP, 16 s) outlasts the transaction (2 s, ended by
     * the broker's check every 10 s), not the session (45 s). */
    const char *const xs[] = {TXN_X, "producer.transaction.timeout.ms=2000",
                              "consumer.session.timeout.ms=45000", NULL};
    h_proc *p = start_txn(e, xs, NULL);
    h_proc *const procs[] = {p, NULL};
    h_feed_rate(3000);
    /* A stall that lands between a commit and the transaction's first
     * record (a loaded machine) times nothing out: the stage goes on
     * without a rollback, and the stall is made again, three times at
     * most. */
    int stalls = fault_until_said(e, p, stall, NULL, "rolling back",
                                  "a stall of 16 s with a 2 s transaction "
                                  "timeout");
    h_feed_finish(120000);
    h_kenv_wait_committed_end(e, procs, 180000);
    print_message("after %d stall(s) of 16 s with a 2 s transaction "
                  "timeout: %zu rollbacks, %zu 'fenced' lines\n", stalls,
                  h_count_said(p, "rolling back"),
                  h_count_said(p, H_SAID_FENCED));
    h_stage_stop(p);
    expect_all_once(e, "transactions, a transaction timed out");
    h_kenv_free(e);
}

/* ---- 4. the broker restarted mid-transaction ---------------------------- */

static void test_broker_restart_mid_txn(void **state)
{
    (void)state;
    h_kenv *e = env_new("kt-broker", false, 1000);
    stream_fed(e, 50000, 5000, 241, 40);
    const char *const xs[] = {TXN_X, NULL};
    h_proc *p = start_txn(e, xs, NULL);
    h_proc *const procs[] = {p, NULL};
    h_feed_rate(3000);
    mid_transaction(e, p, 5000);
    double t0 = h_now_s();
    H_CHECK(h_kcluster_stop_node(h_kgroup_cluster(), 1));
    h_nap(3000);
    H_CHECK(h_kcluster_start_node(h_kgroup_cluster(), 1));
    double away = h_now_s() - t0;
    h_feed_finish(180000);
    h_kenv_wait_committed_end(e, procs, 240000);
    print_message("broker away %.1f s mid-transaction: %zu rollbacks, %zu "
                  "failed checkpoints\n", away,
                  h_count_said(p, "rolling back"),
                  h_count_said(p, "msg=\"checkpoint failed\""));
    h_stage_stop(p);
    expect_all_once(e, "transactions, the broker restarted");
    h_kenv_free(e);
}

/* ---- 5. two instances of one configuration on one host --------------- */

/* The transactional id p's start-up line names, into id. */
static void txn_id_of(h_proc *p, char *id, size_t size)
{
    const char *at = strstr(h_process_stderr(p), H_SAID_TXN);
    const char *v = at ? strstr(at, "transactional_id=") : NULL;
    if (!v)
        h_stage_fail(p, "no transactional_id in the line '%s'", H_SAID_TXN);
    v += strlen("transactional_id=");
    size_t n = strcspn(v, " \n");
    snprintf(id, size, "%.*s", (int)(n < size ? n : size - 1), v);
}

static void test_one_config_two_instances(void **state)
{
    (void)state;
    h_kenv_opts o = {.nparts = NPARTS, .rejected = true, .ckdir = true,
                     .kafka_store = true, .checkpoint_ms = 500,
                     .capacity = 30000};
    h_kenv *e = h_kenv_new(h_kgroup_cluster(), "kt-twin", &o);
    stream_fed(e, 4000, 500, 251, 50);
    const char *const xs[] = {TXN_X, TXN_TIMEOUT_X, NULL};
    h_proc *a = start_txn(e, xs, NULL);
    h_proc *b = start_txn(e, xs, NULL);
    h_proc *const both[] = {a, b, NULL};
    /* a gave b its share: both are in the group before the feed. */
    h_wait_said(a, "msg=\"partition revoked\"", 1, 60000);
    h_feed_rate(1000);
    h_feed_finish(120000);
    h_kenv_wait_committed_end(e, both, 120000);
    h_stages_alive(both, "at the input's end");
    char ida[300], idb[300];
    txn_id_of(a, ida, sizeof(ida));
    txn_id_of(b, idb, sizeof(idb));
    size_t fa = h_count_said(a, H_SAID_FENCED);
    size_t fb = h_count_said(b, H_SAID_FENCED);
    print_message("one configuration, two instances: transactional ids %s "
                  "and %s, fenced %zu and %zu times\n", ida, idb, fa, fb);
    if (!strcmp(ida, idb))
        h_stage_fail(b, "both instances have transactional id %s", ida);
    if (fa > 1 || fb > 1)
        h_stage_fail(fa > 1 ? a : b, "fenced %zu and %zu times", fa, fb);
    h_stage_stop(a);
    h_stage_stop(b);
    expect_all_once(e, "transactions, two instances of one configuration");
    h_kenv_free(e);
}

/* ---- 6. two instances given one transactional id ------------------------ */

static void test_shared_id_stops(void **state)
{
    (void)state;
    h_kenv_opts o = {.nparts = NPARTS, .ckdir = true, .checkpoint_ms = 500,
                     .capacity = 30000};
    h_kenv *e = h_kenv_new(h_kgroup_cluster(), "kt-shared", &o);
    stream_fed(e, 60000, 500, 261, 50);
    const char *const xs[] = {TXN_X, TXN_TIMEOUT_X,
                              "exactly_once.transactional.id=kt-shared-id",
                              NULL};
    h_proc *a = start_txn(e, xs, NULL);
    h_proc *b = start_txn(e, xs, NULL);
    h_proc *const both[] = {a, b, NULL};
    h_feed_rate(1000);
    /* Fenced BS_TXN_FENCED_MAX times within minutes, one of them stops:
     * each fencing takes a round or two. */
    const char *said = "msg=\"fenced repeatedly: another live instance is "
                       "probably using this transactional id";
    h_proc *quit = NULL;
    int st = 0;
    double t0 = h_now_s();
    while (!quit) {
        for (size_t i = 0; both[i] && !quit; i++) {
            int r = h_process_peek(both[i], &st);
            if (r < 0)
                h_stage_fail(both[i], "waiting: %s", h_last_error());
            if (r == 0)
                quit = both[i];
        }
        if (!quit && h_now_s() - t0 > 90)
            h_stage_fail(a, "two instances with one transactional id ran "
                         "90 s (fenced %zu and %zu times) and neither "
                         "stopped", h_count_said(a, H_SAID_FENCED),
                         h_count_said(b, H_SAID_FENCED));
        if (!quit)
            h_nap(200);
    }
    h_feed_rate(0);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        h_stage_fail(quit, "the instance fenced over and over exited 0");
    h_expect_said(quit, said);
    h_expect_said(quit, "transactional_id=kt-shared-id");
    h_proc *other = quit == a ? b : a;
    print_message("one transactional id, two instances: one stopped (%s) "
                  "%.1f s after both ran, fenced %zu times; the other "
                  "fenced %zu times\n", h_status_str(st), h_now_s() - t0,
                  h_count_said(quit, H_SAID_FENCED),
                  h_count_said(other, H_SAID_FENCED));
    h_feed_abandon();
    h_proc_release(a);
    h_proc_release(b);
    h_kenv_free(e);
}

/* ---- 7. the Kafka store's records cut off in the transaction ---------- */

/* The node's proxy (group setup): the stages of tests 7 and 8 reach the
 * broker only through it; the feeder and every check use the direct
 * listener. */
static h_proxy *g_proxy;

static int setup_proxied(void **state)
{
    (void)state;
    static const char *const proxied[] = {"--proxied", NULL};
    if (h_kgroup_setup_args(1, proxied))
        return -1;
    h_kcluster *c = h_kgroup_cluster();
    g_proxy = h_proxy_new(h_kcluster_proxy_port(c, 1),
                          h_kcluster_proxied_port(c, 1));
    if (!g_proxy)
        fprintf(stderr, "setup: the node's proxy: %s\n", h_last_error());
    return g_proxy ? 0 : -1;
}

static int teardown_proxied(void **state)
{
    h_proxy_free(g_proxy);
    g_proxy = NULL;
    return h_kgroup_teardown(state);
}

/* Group `name`'s environment with the Kafka store, its stages reaching the
 * node through the proxy (the link passing), a round every checkpoint_ms. */
static h_kenv *proxied_env(const char *name, int checkpoint_ms)
{
    char bs[64];
    snprintf(bs, sizeof(bs), "127.0.0.1:%d", h_proxy_port(g_proxy));
    h_proxy_set(g_proxy, H_LINK_PASS, 0);
    h_kenv_opts o = {.nparts = NPARTS, .rejected = true, .kafka_store = true,
                     .checkpoint_ms = checkpoint_ms, .capacity = 30000,
                     .bootstraps = bs};
    return h_kenv_new(h_kgroup_cluster(), name, &o);
}

/*
 * The link blackholed by the proxy's trip wire at the first request that
 * names the checkpoint topic after a round: the next round's checkpoint
 * records are then in the open transaction, after the round's output was
 * delivered.  The cut outlasts the transaction timeout, which bounds a
 * record's delivery, so they time out and the transaction needs an abort
 * (with an epoch bump).  After the heal the stage commits again, and every unique
 * key is once in the output (issue 26: the failed transaction was never
 * aborted, and every later round failed with "Erroneous state").  The
 * session timeout is above the cut, and the clients' socket timeout below
 * it, so the group keeps the instance and its requests lost in the cut
 * are given up soon after.
 */
#define CUT_TXN_MS 10000
#define CUT_HOLD_MS 14000

typedef struct cut_times {
    double cut, healed;
} cut_times;

/* After p's next round, the link cut at the first request that names the
 * checkpoint topic (the next round's, adding its partition to the
 * transaction or producing to it: the round's output is delivered by
 * then); returns when. */
static double cut_next_ckpt_request(h_kenv *e, h_proc *p)
{
    h_wait_said(p, H_SAID_CKPT, h_count_said(p, H_SAID_CKPT) + 1, 60000);
    uint64_t trips = h_proxy_stats_get(g_proxy).trips;
    h_proxy_cut_on(g_proxy, e->ckt);
    double t0 = h_now_s();
    while (h_proxy_stats_get(g_proxy).trips == trips) {
        if (h_now_s() - t0 > 60)
            h_stage_fail(p, "no request named %s within 60 s", e->ckt);
        h_stage_alive(p, "waiting for the checkpoint records");
        h_nap(20);
    }
    return h_now_s();
}

/* cut_next_ckpt_request, the link healed CUT_HOLD_MS later; *arg
 * (cut_times) when. */
static void cut_ckpt_records(h_kenv *e, h_proc *p, void *arg)
{
    cut_times *t = arg;
    t->cut = cut_next_ckpt_request(e, p);
    h_nap(CUT_HOLD_MS);
    h_proxy_set(g_proxy, H_LINK_PASS, 0);
    t->healed = h_now_s();
}

static void test_store_records_cut_off(void **state)
{
    (void)state;
    h_kenv *e = proxied_env("kt-cut", 1000);
    stream_fed(e, 150000, 2000, 271, 40);
    /* librdkafka wants the socket timeout within the transaction's. */
    char *ttx = h_strdupf("producer.transaction.timeout.ms=%d", CUT_TXN_MS);
    char *sto = h_strdupf("kafka.socket.timeout.ms=%d", CUT_TXN_MS);
    /* Deltas only: no snapshot replaces a chain, so no tombstones go to
     * the checkpoint topic between rounds. */
    const char *const xs[] = {TXN_X, ttx, sto,
                              "consumer.session.timeout.ms=45000",
                              "checkpoint.delta.max=1000",
                              "checkpoint.delta.ratio=100", NULL};
    h_proc *p = start_txn(e, xs, NULL);
    h_proc *const procs[] = {p, NULL};
    h_feed_rate(1000);
    /* The store saying its records were not delivered shows the cut
     * caught them (a request of another kind naming the topic, a metadata
     * refresh, would cut the output instead: rolled back as before). */
    size_t fail0 = h_count_said(p, "msg=\"checkpoint failed\"");
    h_wait_said(p, H_SAID_CKPT, 3, 60000); /* every partition's first */
    cut_times t = {0};
    int cuts = fault_until_said(e, p, cut_ckpt_records, &t,
                                "records not delivered",
                                "a cut of the checkpoint records");
    h_feed_finish(120000);
    h_kenv_wait_committed_end(e, procs, 90000);
    print_message("cut %d: the checkpoint records cut off for %.1f s: %zu "
                  "failed checkpoints, %zu rollbacks; the input's end "
                  "committed %.1f s after the heal\n", cuts,
                  t.healed - t.cut,
                  h_count_said(p, "msg=\"checkpoint failed\"") - fail0,
                  h_count_said(p, "rolling back"), h_now_s() - t.healed);
    h_stage_stop(p);
    free(ttx);
    free(sto);
    expect_all_once(e, "transactions and the Kafka store, its records cut "
                    "off in the transaction");
    h_kenv_free(e);
}

/* ---- 8. the first transaction aborted ---------------------------------- */

#define SAID_ABORTED "msg=\"transaction aborted, rolling back"
#define FIRST_DELAY_MS 1000
#define FIRST_HOLD_MS 8000

/* p's link slowed (FIRST_DELAY_MS a byte) until its output grows
 * (records of the open transaction reach the broker, more on the way),
 * then blackholed for FIRST_HOLD_MS, past a record's delivery timeout:
 * the records in flight time out, so the transaction needs an abort, and
 * p rolls back once more and goes on after the heal (it stays alive
 * throughout). */
static void cut_link(h_kenv *e, h_proc *p, const char *when)
{
    size_t before = h_count_said(p, SAID_ABORTED);
    h_proxy_set(g_proxy, H_LINK_DELAY, FIRST_DELAY_MS);
    int64_t out0 = h_topic_end(e->q, e->out, NPARTS, NULL);
    double t0 = h_now_s();
    while (h_topic_end(e->q, e->out, NPARTS, NULL) == out0) {
        if (h_now_s() - t0 > 60)
            h_stage_fail(p, "%s: %s did not grow within 60 s", when, e->out);
        h_stage_alive(p, "on the slow link");
        h_nap(20); /* the feeder goes on */
    }
    h_proxy_set(g_proxy, H_LINK_BLACKHOLE, 0);
    h_nap(FIRST_HOLD_MS);
    h_proxy_set(g_proxy, H_LINK_PASS, 0);
    h_wait_said(p, SAID_ABORTED, before + 1, 60000); /* of the heal */
    h_nap(2000); /* the rollback's restore, and the next round */
    h_stage_alive(p, when);
}

static void test_first_txn_aborted(void **state)
{
    (void)state;
    /* The first round 15 s after the start: the cut comes before it. */
    h_kenv *e = proxied_env("kt-first", 15000);
    stream_fed(e, 30000, 3000, 281, 40);
    /* A record's delivery times out within the cut, the transaction does
     * not (nor the session); requests lost in the cut are given up soon
     * after the heal. */
    const char *const xs[] = {TXN_X, "producer.transaction.timeout.ms=30000",
                              "producer.message.timeout.ms=4000",
                              "kafka.socket.timeout.ms=5000",
                              "consumer.session.timeout.ms=45000", NULL};
    h_proc *p = start_txn(e, xs, NULL);
    h_proc *const procs[] = {p, NULL};
    h_feed_rate(1000);
    cut_link(e, p, "the first transaction aborted");
    if (h_count_said(p, H_SAID_CKPT) != 0)
        h_stage_fail(p, "a round committed before the first cut");
    h_wait_said(p, H_SAID_CKPT, 1, 60000);
    h_feed_finish(120000);
    h_kenv_wait_committed_end(e, procs, 90000);
    print_message("the first transaction aborted: %zu rollbacks, %zu "
                  "rounds committed\n",
                  h_count_said(p, SAID_ABORTED), h_count_said(p, H_SAID_CKPT));
    h_stage_stop(p);
    expect_all_once(e, "transactions and the Kafka store, the first "
                    "transaction aborted");
    h_kenv_free(e);
}

/* ---- 9. a restore deferred beside active partitions --------------------- */

/*
 * The Kafka store, whose state follows the partitions.  b stops at the
 * crash point after send_offsets of its second round: its transaction
 * stays open, holding offsets for its partitions, for DEFER_TXN_MS.  a (a round only every minute) is given them once b's
 * session times out (6 s), with its own output since its last round in its
 * open transaction.  Their committed offsets stay unstable past the
 * restore's wait (BS_TIMEOUT_TXN_STABLE_MS, 90 s), so their restore is
 * deferred, and the rounds that follow retry it until the broker aborts
 * b's transaction.  Every unique key must be once in the output at
 * read_committed: a retry that aborted a's transaction, and restored only
 * the partitions it was retrying, committed a's other partitions' offsets
 * past the output the abort had discarded.
 */
#define DEFER_TXN_MS 120000

static void test_rebalance_deferred_restore(void **state)
{
    (void)state;
    h_kenv *e = env_new("kt-defer", true, 500);
    stream_fed(e, 200000, 2000, 291, 40);
    char *ttb = h_strdupf("producer.transaction.timeout.ms=%d", DEFER_TXN_MS);
    /* a's transaction outlives the wait (its rounds are a minute apart,
     * and the restore holds the stage for up to 90 s at a time). */
    const char *const xa[] = {TXN_X, "checkpoint.interval.ms=60000",
                              "checkpoint.records=0",
                              "producer.transaction.timeout.ms=600000", NULL};
    const char *const xb[] = {TXN_X, ttb, NULL};
    h_proc *a = start_txn(e, xa, NULL);
    h_proc *const procs[] = {a, NULL};
    h_feed_rate(1000);
    h_proc *b = start_txn(e, xb, h_crash_env("after-send-offsets", 2));
    h_wait_crashed(b, "after-send-offsets", 120000);
    double t0 = h_now_s();
    size_t rounds0 = h_count_said(a, H_SAID_CKPT);
    /* b's partitions come to a, and wait. */
    h_wait_said(a, "restore=pending", 1, 150000);
    double deferred = h_now_s() - t0;
    if (h_count_said(a, H_SAID_CKPT) != rounds0)
        h_stage_fail(a, "a round committed between b's stop and the "
                     "deferred restore: nothing of a's was in the open "
                     "transaction");
    h_wait_said(a, "msg=\"retrying the restore\"", 1, 60000);
    h_wait_said(a, "msg=\"partition restored\"", 1, 120000);
    double restored = h_now_s() - t0;
    h_feed_finish(120000);
    h_kenv_wait_committed_end(e, procs, 180000);
    print_message("b stopped after send_offsets: its partitions' restore "
                  "deferred %.1f s later, restored %.1f s later (%zu "
                  "retries); %zu rollbacks\n", deferred, restored,
                  h_count_said(a, "msg=\"retrying the restore\""),
                  h_count_said(a, "rolling back"));
    h_stage_stop(a);
    h_proc_release(b);
    free(ttb);
    expect_all_once(e, "transactions, a restore deferred beside active "
                    "partitions");
    h_kenv_free(e);
}

/* ---- 10. partitions assigned while the stage drains -------------------- */

#define DRAIN_DELAY_MS 700
#define SAID_DECLINED "msg=\"assignment declined\""

/* p's log lines holding needle after its first "draining" line. */
static size_t said_draining(h_proc *p, const char *needle)
{
    const char *d = strstr(h_process_stderr(p), "msg=draining");
    size_t n = 0;
    for (const char *at = d; at && (at = strstr(at, needle));
         at += strlen(needle))
        n++;
    return n;
}

/*
 * An assignment that comes while the stage stops.  Two instances share the
 * partitions: S reaches the node through the proxy, T directly.  S's link
 * is slowed (DRAIN_DELAY_MS each way), then T is stopped and S sent
 * SIGTERM at once: T's leave makes the group give its partitions to S,
 * and S's rejoin (a few round trips) ends while S's final round (more of
 * them) still runs, so the assignment is served by S's consumer close.
 * S must decline it (answer librdkafka, take and restore nothing: its
 * next owner restores it) rather than take the partitions with their
 * restore deferred ("restore=pending"), then exit 0 (a stage given
 * partitions in its close died with SIGSEGV in test_kafka_cluster's
 * scale-in).  A third instance then takes every partition and every
 * unique key is once in the output.
 */
static void test_rebalance_while_draining(void **state)
{
    (void)state;
    h_kenv *e = proxied_env("kt-drain", 1000);
    stream_fed(e, 40000, 4000, 291, 40);
    char *direct = h_strdupf("kafka.bootstrap.servers=%s", e->h.bs);
    char *ck_s = h_strdupf("checkpoint.dir=%s/ck-s", e->h.dir);
    char *ck_t = h_strdupf("checkpoint.dir=%s/ck-t", e->h.dir);
    char *ck_u = h_strdupf("checkpoint.dir=%s/ck-u", e->h.dir);
    /* S's session outlasts the slowed link's round trips. */
    const char *const xs_s[] = {TXN_X, ck_s,
                                "consumer.session.timeout.ms=45000", NULL};
    const char *const xs_t[] = {TXN_X, ck_t, direct, NULL};
    const char *const xs_u[] = {TXN_X, ck_u, direct, NULL};
    h_proc *s = start_txn(e, xs_s, NULL);
    h_proc *t = start_txn(e, xs_t, NULL);
    h_proc *const both[] = {s, t, NULL};
    h_feed_rate(1000);
    const unsigned all = (1u << NPARTS) - 1;
    double t0 = h_now_s();
    while (!h_assigned_mask(s, e->in, false) ||
           (h_assigned_mask(s, e->in, false) |
            h_assigned_mask(t, e->in, false)) != all) {
        h_stages_alive(both, "before both had partitions");
        if (h_now_s() - t0 > 90)
            h_stage_fail(t, "the two instances did not share the "
                         "partitions within 90 s");
        h_nap(50);
    }
    h_wait_said(s, H_SAID_CKPT, h_count_said(s, H_SAID_CKPT) + 1, 60000);
    h_proxy_set(g_proxy, H_LINK_DELAY, DRAIN_DELAY_MS);
    h_stage_stop(t);
    H_MUST(h_process_kill(s, SIGTERM));
    /* The link heals once S was given T's partitions (declined, or taken
     * pending), or S exited. */
    int st = 0;
    t0 = h_now_s();
    while (said_draining(s, SAID_DECLINED) == 0 &&
           said_draining(s, "restore=pending") == 0 &&
           h_process_peek(s, &st) == 1 && h_now_s() - t0 < 60)
        h_nap(50);
    h_proxy_set(g_proxy, H_LINK_PASS, 0);
    if (h_process_wait(s, H_EXIT_MS, &st) != 0)
        h_stage_fail(s, "no exit within %d ms of SIGTERM: %s", H_EXIT_MS,
                     h_last_error());
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        h_stage_fail(s, "after SIGTERM, given partitions while draining: "
                     "%s, want exit 0", h_status_str(st));
    size_t declined = said_draining(s, SAID_DECLINED);
    size_t pending = said_draining(s, "restore=pending");
    if (pending)
        h_stage_fail(s, "%zu partition(s) given to it while it drained "
                     "were taken with their restore deferred: a stopping "
                     "stage declines an assignment", pending);
    if (!declined)
        h_stage_fail(s, "no assignment came while it drained: the test did "
                     "not reach its case");
    /* A third instance takes everything, with its state. */
    h_proc *u = start_txn(e, xs_u, NULL);
    h_proc *const only_u[] = {u, NULL};
    h_feed_finish(120000);
    h_kenv_wait_committed_end(e, only_u, 120000);
    h_stage_stop(u);
    print_message("S declined %zu assignment(s) while it drained (its link "
                  "slowed to %d ms each way) and exited 0\n", declined,
                  DRAIN_DELAY_MS);
    free(direct);
    free(ck_s);
    free(ck_t);
    free(ck_u);
    expect_all_once(e, "partitions assigned while an instance drained");
    h_kenv_free(e);
}

/* ---- 11. a transactional request lost in a cut ------------------------- */

/*
 * The proxy's trip wire blackholes the link at the first request that
 * names the checkpoint topic after a round: the next round's
 * AddPartitionsToTxn for its checkpoint records, after its output's
 * partitions were registered.  The cut drops that request whole (the
 * connection stays open, and later requests on it are answered after the
 * heal).  The checkpoint records wait for the registration and time out
 * (message.timeout.ms), so the transaction is aborted (EndTxn, then an
 * epoch bump), and the abort completes while the lost request is still in
 * flight: its own timeout (socket.timeout.ms, transaction.timeout.ms -
 * 100 ms) comes later, when no transaction has partitions registered (the
 * feed paused).  librdkafka 2.0.2's handler then fails
 * `rk_eos.txn_req_cnt > 0` (SIGABRT): the abort set the count to 0.  The
 * stage must stay alive and every unique key be once in the output.
 */
#define SAID_CKPT_TIMED_OUT "records not delivered: Local: Message timed out"
#define LOST_HOLD_MS 2600
#define LOST_WAIT_MS 25000

static void test_request_lost_in_cut(void **state)
{
    (void)state;
    h_kenv *e = proxied_env("kt-lost", 1000);
    stream_fed(e, 30000, 2000, 301, 40);
    /* Deliveries time out well before the lost request does. */
    const char *const xs[] = {TXN_X, "producer.message.timeout.ms=5000",
                              "consumer.session.timeout.ms=45000", NULL};
    h_proc *p = start_txn(e, xs, NULL);
    h_proc *const procs[] = {p, NULL};
    h_feed_rate(1000);
    h_wait_said(p, H_SAID_CKPT, 3, 60000);
    size_t aborted0 = h_count_said(p, SAID_ABORTED);
    size_t timed_out0 = h_count_said(p, SAID_CKPT_TIMED_OUT);
    double cut = cut_next_ckpt_request(e, p);
    h_feed_rate(0);
    h_nap(LOST_HOLD_MS);
    h_proxy_set(g_proxy, H_LINK_PASS, 0);
    h_wait_said(p, SAID_ABORTED, aborted0 + 1, 60000);
    double aborted = h_now_s();
    if (h_count_said(p, SAID_CKPT_TIMED_OUT) == timed_out0)
        h_stage_fail(p, "the rollback after the cut was not for checkpoint "
                     "records that timed out: the cut missed their "
                     "registration, and the test did not reach its case");
    while (h_now_s() - cut < LOST_WAIT_MS / 1000.0) {
        h_stage_alive(p, "past the lost request's timeout");
        h_nap(100);
    }
    h_feed_rate(1000);
    h_feed_finish(120000);
    h_kenv_wait_committed_end(e, procs, 120000);
    print_message("a request lost in a %d ms cut: aborted %.1f s after the "
                  "cut, alive %d s after it; %zu rollbacks\n", LOST_HOLD_MS,
                  aborted - cut, LOST_WAIT_MS / 1000,
                  h_count_said(p, SAID_ABORTED));
    h_stage_stop(p);
    expect_all_once(e, "transactions, a transactional request lost in a "
                    "cut");
    h_kenv_free(e);
}

/* ---- 12. the overlap: a commit refused, the next transaction with it --- */

/*
 * exactly_once.overlap (the default): the third commit is refused
 * (BLOOMSTAGE_FAIL_AT=commit:3, 0.3 s after it began, as a slow broker's
 * refusal comes) while the next round's transaction, on the other
 * producer, takes records processed after it.  Both transactions are
 * aborted (the stage says so, with how many records the second held: more
 * than none, or the test proved nothing), every partition goes back to
 * the second commit's state, and the stage goes on: every unique key once
 * in the output, every other record once in the rejected topic.
 */
static void overlap_refused(const char *name, bool kafka_store)
{
    h_kenv *e = env_new(name, kafka_store, 200);
    stream_fed(e, 60000, 5000, 251, 40);
    const char *const xs[] = {TXN_X, NULL};
    char entry[] = "BLOOMSTAGE_FAIL_AT=commit:3";
    char *const env[] = {entry, NULL};
    h_proc *p = start_txn(e, xs, env);
    h_proc *const procs[] = {p, NULL};
    h_feed_rate(3000);
    const char *said = "is aborted with it";
    h_wait_said(p, said, 1, 120000);
    const char *at = strstr(h_process_stderr(p), said);
    const char *n = at ? strstr(at, "records_after=") : NULL;
    unsigned long after = n ? strtoul(n + strlen("records_after="), NULL, 10)
                            : 0;
    if (after == 0)
        h_stage_fail(p, "the refused commit's next transaction held no "
                     "record (records_after=0)");
    h_feed_finish(120000);
    h_kenv_wait_committed_end(e, procs, 180000);
    print_message("%s: the third commit refused with %lu records in the "
                  "next transaction; %zu rollbacks\n", name, after,
                  h_count_said(p, "rolling back"));
    h_stage_stop(p);
    expect_all_once(e, kafka_store ? "the overlap, a commit refused, the "
                    "Kafka store" : "the overlap, a commit refused");
    h_kenv_free(e);
}

static void test_overlap_commit_refused(void **state)
{
    (void)state;
    overlap_refused("kt-overlap", false);
    overlap_refused("kt-overlap-ks", true);
}

int main(void)
{
    h_test_main("test_kafka_txn", "BS_KT_ONLY", "BS_KT_VERBOSE",
                "BS_KT_STAGE_X");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_crash_points, h_kfixture_teardown),
        cmocka_unit_test_teardown(test_crash_points_kafka_store,
                                  h_kfixture_teardown),
        cmocka_unit_test_teardown(test_zombie_twice, h_kfixture_teardown),
        cmocka_unit_test_teardown(test_txn_timeout, h_kfixture_teardown),
        cmocka_unit_test_teardown(test_broker_restart_mid_txn,
                                  h_kfixture_teardown),
        cmocka_unit_test_teardown(test_one_config_two_instances,
                                  h_kfixture_teardown),
        cmocka_unit_test_teardown(test_shared_id_stops, h_kfixture_teardown),
        cmocka_unit_test_teardown(test_store_records_cut_off,
                                  h_kfixture_teardown),
        cmocka_unit_test_teardown(test_first_txn_aborted, h_kfixture_teardown),
        cmocka_unit_test_teardown(test_rebalance_deferred_restore,
                                  h_kfixture_teardown),
        cmocka_unit_test_teardown(test_rebalance_while_draining,
                                  h_kfixture_teardown),
        cmocka_unit_test_teardown(test_request_lost_in_cut,
                                  h_kfixture_teardown),
        cmocka_unit_test_teardown(test_overlap_commit_refused,
                                  h_kfixture_teardown),
    };
    return cmocka_run_group_tests(tests, setup_proxied, teardown_proxied);
}
