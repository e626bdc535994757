/*
 * test_kafka_window.c -- windowed dedup (dedup.window.ms) against a real
 * Apache Kafka (one KRaft node through scripts/kafka, realkafka.h), the
 * output read as downstream consumers read it (read_committed) and checked
 * record by record against the model of the window (stream.h,
 * h_stream_window_model):
 *
 *   1. exactly_once, kill -9 at four moments and a drained last run over
 *      a stream of 150 windows of record time: the output is exactly the
 *      records the window forwards, each once (nothing lost, nothing
 *      duplicated, no copy within the window let through after a restart);
 *   2. a rebalance moves a partition's generations: two instances on the
 *      Kafka store (a compacted checkpoint topic); the second joins after
 *      the first half of the stream, the second half (with copies of the
 *      first half's keys within the window) comes, the first instance is
 *      killed -9; the output is still exactly the model's;
 *   3. dedup.window.late=reject: records two windows older than the stream
 *      time go to rejected.topic with reason `late`, every one of them.
 *
 * Input is produced up front with its timestamps (the stage is through
 * it within seconds; the kills land where they land, and each run's
 * output range is printed).  BS_KW_ONLY=PATTERN runs some tests,
 * BS_KW_VERBOSE=1 prints the stages' stderr.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "support.h"

#define NPARTS 4
#define ALLP ((1u << NPARTS) - 1)
/* Record time starts a day before now: a real broker deletes segments
 * whose records are older than retention.ms (7 days) by their timestamps,
 * so a fixed date would see the input and output vanish (found so). */
static int64_t T0;
#define WINDOW_MS 60000
#define STEP_MS 100 /* 600 records a window */

/* The support layer's real-broker environment (h_kenv_new): NAME-in,
 * -out, -rej (rejected.topic) and a compacted NAME-ckpt named by
 * checkpoint.topic, each instance choosing its store; the model's answer
 * is kept in e->scratch (fwd_of). */
static h_kenv *kenv_new(const char *name, const char *late)
{
    char *extra = h_strdupf("processing.guarantee=exactly_once\n"
                            "dedup.window.ms=%d\n"
                            "dedup.window.generations=4\n"
                            "dedup.window.late=%s\n",
                            WINDOW_MS, late);
    const h_kenv_opts o = {.nparts = NPARTS, .rejected = true,
                           .ckpt_topic = true, .checkpoint_ms = 100,
                           .capacity = 1000, .extra = extra};
    h_kenv *e = h_kenv_new(h_kgroup_cluster(), name, &o);
    free(extra);
    return e;
}

static bool *fwd_of(h_kenv *e) { return (bool *)e->scratch; }

static h_proc *stage_start(h_kenv *e, const char *ckdir, const char *store)
{
    char *ck = h_strdupf("checkpoint.dir=%s", ckdir);
    const char *const xs[] = {ck, store, NULL};
    h_proc *p = h_stage_start(e->conf, xs, NULL);
    free(ck);
    return p;
}

static int64_t out_total(h_kenv *e)
{
    return h_topic_end(e->q, e->out, NPARTS, NULL);
}

static void finish(h_kenv *e, h_proc *p)
{
    h_proc *const procs[] = {p, NULL};
    h_wait_committed_tolerant(e->h.bs, e->group, e->in, NPARTS, e->st->next,
                              procs, 180000);
    h_stage_alive(p, "before SIGTERM");
    h_stage_stop(p);
}

/* The stream: n records over n/600 windows, the model's answer kept;
 * records [0, upto) produced with their timestamps. */
static void stream(h_kenv *e, size_t n, uint64_t seed, size_t upto)
{
    e->st = h_stream_new(n, NPARTS, seed);
    h_stream_add_timed(e->st, n, T0, STEP_MS, WINDOW_MS / STEP_MS);
    e->scratch = (uint8_t *)h_stream_window_model(e->st, n, WINDOW_MS, 4, false, NULL);
    h_stream_produce(e->st, e->h.bs, e->in, 0, upto, NULL);
}

static void expect_model(h_kenv *e, const char *why)
{
    size_t n = 0, want = 0;
    h_read_out_committed(e->st, e->h.bs, e->out, e->in, &n);
    for (size_t i = 0; i < e->st->n; i++)
        want += fwd_of(e)[i];
    print_message("%s: read %zu output records (read_committed), the model "
                  "forwards %zu\n", e->out, n, want);
    h_expect_window_output(e->st, fwd_of(e), e->st->n, why);
    assert_int_equal(n, want);
    print_message("%s: %zu records, %zu keys, %zu forwarded (read_committed)"
                  " = the model's\n", why, e->st->n, e->st->nids, n);
}

/* ---- 1. kill -9 mid-window ----------------------------------------------- */

static const h_kill_plan KILLS[] = {
    {.log = H_SAID_ASSIGNED, .what = "right after the assignment"},
    {.out_delta = 3000, .what = "mid-stream"},
    {.log = H_SAID_CKPT, .log_next = true, .what = "right after a checkpoint"},
    {.log = H_SAID_CKPT, .log_next = true, .ms = 7,
     .what = "7 ms after a checkpoint"},
};
#define NKILLS (sizeof(KILLS) / sizeof(KILLS[0]))

static void test_kill9_mid_window(void **state)
{
    (void)state;
    h_kenv *e = kenv_new("kw-kill9", "forward");
    stream(e, 90000, 21, 90000);
    char *ckdir = h_strdupf("%s/ck", e->h.dir);
    size_t replays = 0;
    for (size_t k = 0; k <= NKILLS; k++) {
        int64_t out0 = out_total(e);
        h_proc *p = stage_start(e, ckdir, NULL);
        h_wait_said(p, H_SAID_ASSIGNED, 1, 120000);
        if (k < NKILLS) {
            const h_kill_ctx at = {.q = e->q, .out_topic = e->out,
                                   .out_parts = NPARTS, .out0 = out0};
            h_kill_at(p, &KILLS[k], &at);
        } else {
            finish(e, p);
        }
        replays += h_count_said(p, H_SAID_REPLAYED);
        print_message("run %zu (%s): output %lld -> %lld\n", k + 1,
                      k < NKILLS ? KILLS[k].what : "drained",
                      (long long)out0, (long long)out_total(e));
        h_proc_release(p);
    }
    free(ckdir);
    print_message("%zu tail replays\n", replays);
    expect_model(e, "exactly_once, dedup.window.ms=60000, 4 kills -9");
    h_kenv_free(e);
}

/* ---- 2. a rebalance moves the generations --------------------------------- */

static void test_rebalance_moves_generations(void **state)
{
    (void)state;
    h_kenv *e = kenv_new("kw-rebalance", "forward");
    /* A takes the first half alone and checkpoints every partition; B
     * joins; the second half (copies of the first half's keys within the
     * window among them) comes once the partitions moved; then A is
     * killed and B has them all.  Without the wait for A's commits, B got
     * partitions A had read nothing of yet (CI: no state moved). */
    stream(e, 60000, 22, 30000);
    char *da = h_strdupf("%s/a", e->h.dir), *db = h_strdupf("%s/b", e->h.dir);
    h_proc *a = stage_start(e, da, "checkpoint.store=kafka");
    h_proc *const pa[] = {a, NULL};
    h_wait_out(e->q, e->out, NPARTS, pa, 1000, 120000);
    int64_t one[NPARTS];
    for (int p = 0; p < NPARTS; p++)
        one[p] = 1;
    h_wait_committed_past(e->h.bs, e->group, e->in, NPARTS, one, pa, 120000);
    h_proc *b = stage_start(e, db, "checkpoint.store=kafka");
    h_wait_said(b, H_SAID_ASSIGNED, 1, 120000);
    h_stream_produce(e->st, e->h.bs, e->in, 30000, 60000, NULL);
    h_nap(1000);
    h_stage_kill9(a, "after B joined and the second half came");
    h_wait_holds(b, e->in, ALLP, 90000, "B");
    finish(e, b);
    size_t moved = h_count_restored(b, e->in);
    print_message("B was assigned %zu partitions with their checkpoint "
                  "(generations and stream time)\n", moved);
    if (moved == 0)
        h_stage_fail(b, "no partition came to B with its state");
    h_proc_release(a);
    h_proc_release(b);
    free(da);
    free(db);
    expect_model(e, "B joined, A killed -9, Kafka store");
    h_kenv_free(e);
}

/* ---- 3. late records rejected ------------------------------------------------ */

static void test_late_reject(void **state)
{
    (void)state;
    h_kenv *e = kenv_new("kw-late", "reject");
    e->st = h_stream_new(4000, NPARTS, 23);
    h_stream_add_timed(e->st, 3000, T0, STEP_MS, WINDOW_MS / STEP_MS);
    /* 500 records two windows behind the stream time: late. */
    h_stream_add_timed(e->st, 500, T0, STEP_MS, WINDOW_MS / STEP_MS);
    for (size_t i = 3000; i < 3500; i++)
        e->st->ts[i] -= 3500 * STEP_MS + 2 * WINDOW_MS;
    h_stream_add_timed(e->st, 500, T0, STEP_MS, WINDOW_MS / STEP_MS);
    size_t late = 0;
    e->scratch = (uint8_t *)h_stream_window_model(e->st, 4000, WINDOW_MS, 4, true, &late);
    assert_true(late >= 400);
    h_stream_produce(e->st, e->h.bs, e->in, 0, 4000, NULL);
    h_proc *p = stage_start(e, e->h.dir, NULL);
    finish(e, p);
    h_proc_release(p);
    expect_model(e, "dedup.window.late=reject");
    h_record_list l = {0};
    H_CHECK(h_consume_all(e->h.bs, e->rej, 30000, &l));
    size_t n_late = h_record_list_count_header(&l, "bloomstage-reason",
                                               "late");
    h_record_list_free(&l);
    print_message("%zu late records, %zu in %s with reason late\n", late,
                  n_late, e->rej);
    assert_int_equal(n_late, late);
    h_kenv_free(e);
}

static int group_setup(void **state)
{
    T0 = (int64_t)time(NULL) * 1000 - 86400000;
    return h_kgroup_setup1(state);
}

int main(void)
{
    h_test_main("test_kafka_window", "BS_KW_ONLY", "BS_KW_VERBOSE", NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_kill9_mid_window,
                                  h_kfixture_teardown),
        cmocka_unit_test_teardown(test_rebalance_moves_generations,
                                  h_kfixture_teardown),
        cmocka_unit_test_teardown(test_late_reject, h_kfixture_teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, h_kgroup_teardown);
}
