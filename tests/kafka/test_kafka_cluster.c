/*
 * test_kafka_cluster.c -- the stage against a three-node Apache Kafka
 * cluster (scripts/kafka --nodes 3: replication 3, min.insync.replicas 2,
 * the internal topics too), started once for the binary; every test has
 * topics and a group of its own; the output is read at read_committed:
 *
 *   5. one broker killed -9 mid-stream (no controlled shutdown: leaders
 *      move by the controller's failure detection) and started again: the
 *      stage stays up, and every unique key is in the output exactly once,
 *      the group commits the input's end;
 *   6a. two instances with checkpoint.store=kafka (a compacted checkpoint
 *      topic made with the Admin API), one killed -9 while records flow:
 *      the survivor takes its partitions with their state from the store
 *      (checkpoint_offset > 0), no key the killed one forwarded is
 *      forwarded again, every key exactly once;
 *   6b. scale-out from one instance to three and back to one while records
 *      flow: partitions that move arrive with their state
 *      (checkpoint_offset > 0), and a copy of every key seen so far,
 *      produced after the moves, is dropped: every key exactly once.
 *
 * Needs BLOOMSTAGE_BIN (ctest sets it), Java and Maven.  BS_KC_ONLY=PATTERN
 * runs only the matching tests; BS_KC_VERBOSE=1 prints every stage's
 * stderr; BS_KC_STAGE_X="k=v ..." adds -X settings.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support.h"

#define NPARTS 6
#define ALLP ((1u << NPARTS) - 1)


typedef h_kenv env;

/* Topics NAME-in, NAME-out (NPARTS each) and, with a Kafka store,
 * NAME-ckpt; group NAME; each instance its own checkpoint.dir. */
static env *env_new(const char *name, bool kafka_store)
{
    /* A capacity 10x the keys a partition gets: a round of one second
     * changes a few percent of the filter's blocks, so the store writes
     * deltas (a delta larger than checkpoint.delta.ratio's 15% of the
     * snapshot would be a snapshot instead). */
    h_kenv_opts o = {.nparts = NPARTS, .kafka_store = kafka_store,
                     .checkpoint_ms = 1000, .capacity = 200000};
    return h_kenv_new(h_kgroup_cluster(), name, &o);
}

/* Instance i's own checkpoint.dir (unused by the Kafka store). */
static h_proc *stage_start(env *e, int i)
{
    char *ck = h_strdupf("checkpoint.dir=%s/ck%d", e->h.dir, i);
    const char *const xs[] = {ck, NULL};
    h_proc *p = h_stage_start(e->conf, xs, NULL);
    free(ck);
    return p;
}

/* The partitions of IN that p holds now. */
static unsigned held(env *e, h_proc *p)
{
    return h_assigned_mask(p, e->in, false);
}

static void wait_committed_end(env *e, h_proc *const *procs, int timeout_ms)
{
    h_wait_committed_tolerant(e->h.bs, e->group, e->in, NPARTS, e->st->next,
                              procs, timeout_ms);
}

static void assert_committed_end(env *e)
{
    int64_t c[NPARTS];
    H_CHECK(h_committed_retry(e->h.bs, e->group, e->in, NPARTS, c, 30000));
    for (int p = 0; p < NPARTS; p++)
        if (c[p] != e->st->next[p])
            fail_msg("%s [%d]: the group committed %lld, want the input's "
                     "end %lld", e->in, p, (long long)c[p],
                     (long long)e->st->next[p]);
}

static h_outrec *expect_exactly_once(env *e, size_t *n, const char *why)
{
    h_outrec *o = h_read_out_committed(e->st, e->h.bs, e->out, e->in, n);
    unsigned *c = h_count_copies(e->st, e->in, e->st->n, NULL);
    h_expect_once(e->st, c, e->in, e->out, e->st->n, why);
    assert_int_equal(*n, e->st->nids);
    return o;
}

/* ---- 5. one broker of three killed and restarted ------------------------- */

static void test_broker_killed_restarted(void **state)
{
    (void)state;
    env *e = env_new("kc-broker", false);
    const size_t N = 60000, N0 = 5000;
    e->st = h_stream_new(N, NPARTS, 201);
    h_stream_add(e->st, N, 40);
    h_stream_produce(e->st, e->h.bs, e->in, 0, N0, NULL);
    h_feed_start(e->h.bs, e->in, e->st, N0);
    h_proc *p = stage_start(e, 0);
    h_proc *const procs[] = {p, NULL};
    h_wait_said(p, H_SAID_ASSIGNED, 1, 120000);
    h_feed_rate(3000);
    h_wait_out(e->q, e->out, NPARTS, procs, 8000, 120000);

    const int victim = 2;
    int64_t out_kill = h_topic_end(e->q, e->out, NPARTS, NULL);
    size_t fed_kill = h_feed_next();
    H_CHECK(h_kcluster_kill_node(h_kgroup_cluster(), victim));
    double t0 = h_now_s();
    /* Records go on flowing through the two left (min.insync.replicas 2). */
    h_wait_out_tolerant(e->q, e->out, NPARTS, procs, out_kill + 4000, 120000);
    double flowing = h_now_s() - t0;
    H_CHECK(h_kcluster_start_node(h_kgroup_cluster(), victim));
    double away = h_now_s() - t0;
    h_feed_finish(180000);
    wait_committed_end(e, procs, 180000);
    h_stage_stop(p);
    size_t n = 0;
    expect_exactly_once(e, &n, "a broker of three killed -9 and restarted");
    assert_committed_end(e);
    print_message("node %d killed -9 with %lld output records and %zu of %zu "
                  "input records fed; 4000 more forwarded %.1f s later, with "
                  "it away; back after %.1f s; %zu output records, every key "
                  "exactly once; the stage logged %zu 'rolling back', %zu "
                  "'assignment lost', %zu 'commit failed'\n", victim,
                  (long long)out_kill, fed_kill, N, flowing, away, n,
                  h_count_said(p, "rolling back"),
                  h_count_said(p, "assignment lost"),
                  h_count_said(p, "msg=\"commit failed\""));
    h_kenv_free(e);
}

/* ---- 6a. two instances, Kafka store, one killed -9 ------------------------ */

static void test_two_instances_kill9(void **state)
{
    (void)state;
    env *e = env_new("kc-two", true);
    /* 100 s of input at 2500/s: the kill must come while it still flows,
     * and on a loaded machine (CI runs other tests beside this one) the
     * phase before the kill took over 40 s. */
    const size_t N = 250000;
    e->st = h_stream_new(N, NPARTS, 211);
    h_stream_add(e->st, N, 50);
    h_proc *a = stage_start(e, 0);
    h_proc *b = stage_start(e, 1);
    h_proc *const both[] = {a, b, NULL};
    h_feed_start(e->h.bs, e->in, e->st, 0);
    h_feed_rate(2500);
    double t0 = h_now_s();
    for (;;) {
        unsigned ma = held(e, a), mb = held(e, b);
        if (ma && mb && (ma | mb) == ALLP)
            break;
        h_stages_alive(both, "before both had partitions");
        if (h_now_s() - t0 > 90)
            h_stage_fail(b, "the two instances did not share the partitions "
                         "within 90 s (masks 0x%x, 0x%x)", ma, mb);
        h_nap(50);
    }
    double shared = h_now_s() - t0;
    /* Enough output that A forwarded keys B must not forward again, well
     * before the feed ends (a quarter of the keys took the whole feed on
     * a loaded CI machine). */
    h_wait_said(a, H_SAID_CKPT, 2, 120000);
    h_wait_out(e->q, e->out, NPARTS, both, 10000, 120000);
    h_nap(300);
    unsigned ma = held(e, a), mb = held(e, b);
    if (!ma)
        h_stage_fail(a, "A holds no partition now (B 0x%x): none to lose",
                     mb);
    h_stage_kill9(a, "mid-run, both instances busy");
    size_t fed_kill = h_feed_next();
    if (fed_kill >= N)
        fail_msg("all %zu records were fed before the kill, %.1f s after "
                 "the start (shared after %.1f s): not mid-stream", N,
                 h_now_s() - t0, shared);
    h_nap(300);
    int64_t hw_kill[NPARTS];
    int64_t out_kill = h_topic_end(e->q, e->out, NPARTS, hw_kill);

    double t1 = h_now_s();
    h_wait_holds(b, e->in, ma, 90000, "B");
    double takeover = h_now_s() - t1;
    h_assigned as[1024];
    size_t nas = h_parse_assigned(b, e->in, as, 1024);
    int64_t resume[NPARTS] = {0};
    bool from_store = false;
    /* The takeover is each partition's last assignment. */
    for (size_t i = 0; i < nas && i < 1024; i++)
        if (!as[i].revoked && as[i].partition < NPARTS &&
            ma >> as[i].partition & 1)
            resume[as[i].partition] = as[i].ckpt;
    for (int p = 0; p < NPARTS; p++)
        from_store = from_store || resume[p] > 0;
    if (!from_store)
        h_stage_fail(b, "none of A's partitions came to B with a checkpoint "
                     "offset > 0: no state from the Kafka store");
    h_feed_finish(180000);
    h_proc *const only_b[] = {b, NULL};
    wait_committed_end(e, only_b, 180000);
    h_stage_stop(b);

    size_t n = 0;
    h_outrec *o = expect_exactly_once(e, &n, "two instances, one killed -9");
    size_t n_a = 0, seen_again = 0;
    h_check_killed_keys(e->st, o, n, ma, hw_kill, resume, e->in, &n_a,
                        &seen_again);
    assert_committed_end(e);
    /* The store's checkpoints were incremental: rounds of one second each
     * added a delta to their partition's chain. */
    h_ckpt_chains ch = h_kenv_ckpt_chains(e);
    if (ch.chains == 0)
        fail_msg("none of the %zu manifests in %s names a delta",
                 ch.manifests, e->ckt);
    print_message("shared after %.1f s (A 0x%x, B 0x%x); A killed with %lld "
                  "output records, %zu of %zu fed; B had A's partitions %.1f "
                  "s later, from the store; %zu input records B processed "
                  "repeat a key A forwarded, none forwarded; %zu output "
                  "records, every key exactly once; %zu of %zu manifests "
                  "name a chain, the longest %zu states\n", shared, ma, mb,
                  (long long)out_kill, fed_kill, N, takeover, seen_again, n,
                  ch.chains, ch.manifests, ch.longest);
    h_kenv_free(e);
}

/* ---- 6b. scale-out 1 -> 3 -> 1 ------------------------------------------- */

/* Waits until every p in procs[0..n) has at least one partition assigned
 * after its line count start[i] (a fresh assignment). */
static void wait_spread(env *e, h_proc **procs, size_t n)
{
    double t0 = h_now_s();
    for (;;) {
        size_t have = 0;
        for (size_t i = 0; i < n; i++)
            have += held(e, procs[i]) != 0;
        if (have == n)
            return;
        for (size_t i = 0; i < n; i++)
            h_stage_alive(procs[i], "while the group spread out");
        if (h_now_s() - t0 > 120)
            h_stage_fail(procs[n - 1], "not every instance got a partition "
                         "within 120 s");
        h_nap(50);
    }
}

static void test_scale_out_in(void **state)
{
    (void)state;
    env *e = env_new("kc-scale", true);
    /* 125 s of input at 2000/s, so records still flow at the scale-in on
     * a loaded machine (see test_two_instances_kill9). */
    const size_t N1 = 250000, NNEW = 2000;
    e->st = h_stream_new(2 * N1 + NNEW, NPARTS, 221);
    h_stream_add(e->st, N1, 50);
    h_proc *a = stage_start(e, 0);
    h_proc *const only_a[] = {a, NULL};
    h_feed_start(e->h.bs, e->in, e->st, 0);
    h_wait_said(a, H_SAID_ASSIGNED, NPARTS, 120000);
    h_feed_rate(2000);
    h_wait_out(e->q, e->out, NPARTS, only_a, 5000, 120000);

    /* Out to three. */
    h_proc *b = stage_start(e, 1), *c = stage_start(e, 2);
    h_proc *abc[] = {a, b, c};
    double t0 = h_now_s();
    wait_spread(e, abc, 3);
    double spread = h_now_s() - t0;
    unsigned mb = held(e, b), mc = held(e, c);
    h_proc *const all3[] = {a, b, c, NULL};
    int64_t out_mid = h_topic_end(e->q, e->out, NPARTS, NULL);
    h_wait_out(e->q, e->out, NPARTS, all3, out_mid + 3000, 120000);
    size_t a_lines = h_parse_assigned(a, e->in, NULL, 0);

    /* Back to one: B and C drain on SIGTERM, checkpointing what they
     * give up; A gets every partition back. */
    size_t fed_out = h_feed_next();
    if (fed_out >= N1)
        fail_msg("all %zu records were fed before the scale-in: not while "
                 "records flow", N1);
    h_stage_stop(b);
    h_stage_stop(c);
    double t1 = h_now_s();
    h_wait_holds(a, e->in, ALLP, 120000, "A");
    double scale_in = h_now_s() - t1;
    size_t fed_in = h_feed_next();
    if (fed_in >= N1)
        fail_msg("all %zu records were fed before A had the partitions "
                 "back: not while records flow", N1);
    h_feed_finish(180000);
    wait_committed_end(e, only_a, 180000);

    /* Every partition that moved came with its state. */
    h_proc *const who[] = {b, c, a};
    const char *names[] = {"B", "C", "A (back)"};
    for (size_t w = 0; w < 3; w++) {
        h_assigned as[1024];
        size_t na = h_parse_assigned(who[w], e->in, as, 1024);
        for (size_t i = w == 2 ? a_lines : 0; i < na && i < 1024; i++)
            if (!as[i].revoked && as[i].ckpt <= 0)
                h_stage_fail(who[w], "%s got %s [%d] at checkpoint_offset="
                             "%lld: its state did not follow it", names[w],
                             e->in, (int)as[i].partition, as[i].ckpt);
    }

    /* A copy of every key so far, and new keys: only the new ones pass. */
    size_t old_end = e->st->n;
    h_stream_add_copies(e->st, 0, old_end);
    size_t copies_end = e->st->n;
    h_stream_add(e->st, NNEW, 0);
    h_stream_produce(e->st, e->h.bs, e->in, old_end, e->st->n, NULL);
    wait_committed_end(e, only_a, 180000);
    h_stage_stop(a);
    size_t n = 0;
    h_outrec *o = expect_exactly_once(e, &n, "scale-out 1 -> 3 -> 1");
    for (size_t k = 0; k < n; k++)
        if (o[k].rec >= old_end && o[k].rec < copies_end)
            fail_msg("%s:%d:%lld, a copy of k%07u produced after the moves, "
                     "was forwarded", e->in, (int)o[k].src_part,
                     (long long)o[k].src_off, o[k].id);
    assert_committed_end(e);
    print_message("1 -> 3: every instance had partitions %.1f s after B and C "
                  "started (B 0x%x, C 0x%x); 3 -> 1: A had them back %.1f s "
                  "after B and C stopped; %zu copies of old keys dropped; %zu "
                  "output records, every key exactly once; lost assignments: "
                  "A %zu, B %zu, C %zu; fed %zu and %zu of %zu at the two "
                  "moves\n", spread, mb, mc, scale_in,
                  copies_end - old_end, n, h_count_said(a, "assignment lost"),
                  h_count_said(b, "assignment lost"),
                  h_count_said(c, "assignment lost"), fed_out, fed_in, N1);
    h_kenv_free(e);
}

/* ---- main ----------------------------------------------------------------- */

int main(void)
{
    h_test_main("test_kafka_cluster", "BS_KC_ONLY", "BS_KC_VERBOSE",
                "BS_KC_STAGE_X");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_two_instances_kill9,
                                  h_kfixture_teardown),
        cmocka_unit_test_teardown(test_scale_out_in, h_kfixture_teardown),
        cmocka_unit_test_teardown(test_broker_killed_restarted,
                                  h_kfixture_teardown),
    };
    return cmocka_run_group_tests(tests, h_kgroup_setup3, h_kgroup_teardown);
}
