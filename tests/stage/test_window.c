/*
 * test_window.c -- windowed dedup (dedup.window.ms) end to end: the real
 * `bloomstage run` against `bloomstage mock-broker`, checked from the
 * outside against a model of the window (h_stream_window_model: the
 * windowed filter without false positives, per partition, on record
 * timestamps).  What docs/configuration.md ("Windowed dedup")
 * promises:
 *
 *   1. the contract on a stream spanning 200 windows of record time whose
 *      copies fall inside the window, at its edge and well past it: the
 *      output holds exactly the records the model forwards, each once --
 *      across kill -9 at several moments under exactly_once (the restarts
 *      replay the output tail at the records' timestamps); `checkpoint
 *      info` shows each partition's generations (at most G+1) and their
 *      time ranges;
 *   2. late records (timestamps older than the window keeps) rejected to
 *      rejected.topic with reason `late` under dedup.window.late=reject,
 *      and forwarded (deduplicated, counted in the stats line) under
 *      forward;
 *   3. a rebalance moves a partition's generations with it: two instances
 *      on the Kafka store, the second joins mid-stream and the first is
 *      killed -9; the output is still exactly the model's;
 *   4. /metrics shows the window gauges; a restart with another window
 *      keeps the checkpoints' own and logs that it does;
 *   5. over 120 windows the stage's filter memory (/metrics) and resident
 *      memory stay flat, where an unwindowed stage's filters grow;
 *   6. the replay's watermark rule: a kill right after a round taken
 *      while a restored partition's skip entries are not yet consumed
 *      (the engine's crash point) loses nothing and forwards nothing
 *      twice.
 *
 * The model is exact at dedup.fpr 1e-6 on these few thousand keys (a
 * false positive has probability ~1e-2 over the whole file, and the seeds
 * are fixed: if it passes once, it passes always).  Built on the support
 * layer (harness/).  BS_WINDOW_ONLY=PATTERN runs some tests,
 * BS_WINDOW_VERBOSE=1 prints the stages' stderr.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support.h"

#define IN "in"
#define OUT "out"
#define REJ "rej"
#define CKT "bloomstage-checkpoints"
#define NPARTS 4
#define IN1 "in1" /* one partition: test_replay_watermark_rule */
#define T0 INT64_C(1767225600000) /* 2026-01-01T00:00:00Z */
#define WINDOW_MS 60000
#define STEP_MS 100 /* record i at T0 + i*100 ms: 600 records a window */

typedef struct wenv {
    h_fixture h;
    char *conf;
    char group[64];
    const char *in; /* the input topic (IN) and its partitions */
    int nin;
    rd_kafka_t *q;
    h_stream *st;
    bool *fwd; /* the model's answer */
} wenv;

static int wenv_cleanup(h_fixture *fx)
{
    wenv *e = (wenv *)fx;
    if (e->q)
        rd_kafka_destroy(e->q);
    h_stream_free(e->st);
    free(e->fwd);
    free(e->conf);
    return 0;
}

static wenv *wenv_new(void **state, const char *late_policy)
{
    static const char *const topics[] = {IN ":4", IN1 ":1", OUT ":4",
                                         REJ ":2", CKT ":3", NULL};
    H_CHECK(h_fixture_setup_sized(state, 1, topics, sizeof(wenv),
                                  wenv_cleanup));
    wenv *e = *state;
    e->in = IN;
    e->nin = NPARTS;
    static unsigned seq;
    snprintf(e->group, sizeof(e->group), "bs-window-%d-%u", (int)getpid(),
             ++seq);
    e->conf = h_strdupf("%s/stage.conf", e->h.dir);
    char *text = h_strdupf(
        "input.topics=" IN "\n"
        "output.topic=" OUT "\n"
        "rejected.topic=" REJ "\n"
        "consumer.group.id=%s\n"
        "kafka.bootstrap.servers=%s\n"
        "consumer.session.timeout.ms=3000\n"
        "consumer.heartbeat.interval.ms=500\n"
        "consumer.fetch.wait.max.ms=100\n"
        "processing.guarantee=exactly_once\n"
        "dedup.window.ms=%d\n"
        "dedup.window.generations=4\n"
        "dedup.window.late=%s\n"
        "dedup.capacity=1000\n"
        "checkpoint.interval.ms=200\n"
        "log.stats.interval.ms=0\n"
        "log.level=debug\n",
        e->group, e->h.bs, WINDOW_MS, late_policy);
    int rc = h_write_file(e->conf, text);
    free(text);
    H_CHECK(rc);
    e->q = h_query_client(h_kafka_conf(e->h.bs));
    if (!e->q)
        fail_msg("%s", h_last_error());
    return e;
}

static h_proc *stage_start(wenv *e, const char *ckdir,
                           const char *const *extra)
{
    const char *xs[16];
    char *ck = h_strdupf("checkpoint.dir=%s", ckdir);
    size_t n = 0;
    xs[n++] = ck;
    for (size_t i = 0; extra && extra[i] && n < 15; i++)
        xs[n++] = extra[i];
    xs[n] = NULL;
    h_proc *p = h_stage_start(e->conf, xs, NULL);
    free(ck);
    return p;
}

static int64_t out_total(wenv *e)
{
    return h_topic_end(e->q, OUT, NPARTS, NULL);
}

/* Drains p (SIGTERM) once the group committed the input's end. */
static void finish(wenv *e, h_proc *p)
{
    h_proc *const procs[] = {p, NULL};
    h_wait_committed(e->h.bs, e->group, e->in, e->nin, e->st->next, procs,
                     180000, NULL, NULL);
    h_stage_alive(p, "before SIGTERM");
    h_stage_stop(p);
}

/* The output is exactly the model's; prints the numbers. */
static void expect_model(wenv *e, const char *why)
{
    size_t n = 0, want = 0;
    h_read_out(e->st, e->h.bs, OUT, e->in, &n);
    for (size_t i = 0; i < e->st->n; i++)
        want += e->fwd[i];
    h_expect_window_output(e->st, e->fwd, e->st->n, why);
    print_message("%s: %zu records, %zu keys, %zu forwarded = the model's\n",
                  why, e->st->n, e->st->nids, n);
    assert_int_equal(n, want);
}

/* n records in order, a record every STEP_MS of record time, each key
 * copied within a window, on e->in; the model's answer in e->fwd. */
static void timed_stream(wenv *e, size_t n, uint64_t seed)
{
    e->st = h_stream_new(n, e->nin, seed);
    h_stream_add_timed(e->st, n, T0, STEP_MS, WINDOW_MS / STEP_MS);
    size_t late = 0;
    e->fwd = h_stream_window_model(e->st, n, WINDOW_MS, 4, false, &late);
    assert_int_equal(late, 0);
    h_stream_produce(e->st, e->h.bs, e->in, 0, n, NULL);
}

/* -- 1. the contract, across kill -9 --------------------------------------- */

static const h_kill_plan KILLS[] = {
    {.log = H_SAID_ASSIGNED, .what = "right after the "
                                                  "assignment"},
    {.out_delta = 3000, .what = "mid-stream"},
    {.out_delta = 2000, .log = H_SAID_CKPT, .log_next = true,
     .what = "right after a checkpoint"},
    {.out_delta = 2000, .log = H_SAID_CKPT, .log_next = true, .ms = 20,
     .what = "20 ms after a checkpoint"},
};

static void test_contract_kill9(void **state)
{
    wenv *e = wenv_new(state, "forward");
    timed_stream(e, 120000, 7); /* 200 windows of record time */
    char *ckdir = h_strdupf("%s/ck", e->h.dir);
    size_t nk = sizeof(KILLS) / sizeof(KILLS[0]), replays = 0;
    /* Rounds every 50 ms: a kill "after a checkpoint" comes before the
     * mock's stage (~200k records/s) is through the input. */
    const char *const fast[] = {"checkpoint.interval.ms=50", NULL};
    for (size_t k = 0; k <= nk; k++) {
        int64_t out0 = out_total(e);
        h_proc *p = stage_start(e, ckdir, fast);
        if (k < nk) {
            h_wait_said(p, H_SAID_ASSIGNED, 1, 120000);
            const h_kill_ctx at = {.q = e->q, .out_topic = OUT,
                                   .out_parts = NPARTS, .out0 = out0};
            h_kill_at(p, &KILLS[k], &at);
        } else {
            finish(e, p);
        }
        replays += h_count_said(p, H_SAID_REPLAYED);
        print_message("run %zu (%s): output %lld -> %lld\n", k + 1,
                      k < nk ? KILLS[k].what : "drained",
                      (long long)out0, (long long)out_total(e));
        h_proc_release(p);
    }
    if (replays == 0)
        fail_msg("no restart replayed the output tail");
    expect_model(e, "dedup.window.ms=60000 across 4 kills -9");
    print_message("%zu tail replays\n", replays);

    /* checkpoint info: the window and each partition's generations. */
    const char *args[] = {"checkpoint", "info", ckdir, NULL};
    h_proc *c = h_bs_cmd(args, 0);
    const char *out = h_process_stdout(c);
    if (!strstr(out, "window 60000 ms in 4 generations"))
        fail_msg("checkpoint info does not show the window:\n%s", out);
    /* The newest record is at T0 + (N-1)*100 ms, 03:19:59.9, in the
     * slice [03:19:45, 03:20:00). */
    if (!strstr(out, "03:19:45.000 .. 2026-01-01 03:20:00.000"))
        fail_msg("checkpoint info lacks the newest slice's range:\n%s", out);
    size_t gens = 0;
    for (const char *s = out; (s = strstr(s, "    generation ")); s++)
        gens++;
    print_message("checkpoint info:\n%s", out);
    assert_true(gens >= NPARTS && gens <= NPARTS * 5);
    h_proc_release(c);
    free(ckdir);
}

/* The replay's watermark rule (round.c ckpt_wm), deterministically: a
 * checkpoint taken while a restored partition still has skip entries that
 * consumption has not reached keeps the watermarks its replay read from.
 * A windowed filter takes a replayed key only when consumption reaches
 * its record, so such a checkpoint holds neither those keys nor, with the
 * round's watermarks, the records' place in the tail: a restore from it
 * would forward them again.  A forwards a long tail past its only
 * checkpoint (the first, at assignment) and is killed -9; B restores (the
 * tail becomes skip entries), takes a round within its first 500 records
 * and dies at that round's after-store-sync, having logged that the rule
 * applied; C runs to the end.  The output is the model's.  One input
 * partition: partitions restored together replay the tail once, from the
 * lowest watermarks any of them recorded, so another partition's older
 * checkpoint would hide the mistake (with the rule broken on purpose, the
 * test fails: records twice in the output). */
static void test_replay_watermark_rule(void **state)
{
    wenv *e = wenv_new(state, "forward");
    e->in = IN1;
    e->nin = 1;
    timed_stream(e, 60000, 11); /* 100 windows */
    char *ckdir = h_strdupf("%s/ck", e->h.dir);

    const char *const rare[] = {"input.topics=" IN1,
                                "checkpoint.interval.ms=3600000",
                                "checkpoint.records=0", NULL};
    h_proc *a = stage_start(e, ckdir, rare);
    h_wait_said(a, H_SAID_ASSIGNED, 1, 120000);
    const h_kill_plan k = {.out_delta = 10000, .what = "10000 records out"};
    const h_kill_ctx at = {.q = e->q, .out_topic = OUT,
                           .out_parts = NPARTS, .out0 = 0};
    h_kill_at(a, &k, &at);
    h_proc_release(a);
    int64_t tail = out_total(e);

    char *ck = h_strdupf("checkpoint.dir=%s", ckdir);
    const char *const soon[] = {ck, "input.topics=" IN1,
                                "checkpoint.interval.ms=3600000",
                                "checkpoint.records=500", NULL};
    h_proc *b = h_stage_start(e->conf, soon,
                              h_crash_env("after-store-sync", 1));
    free(ck);
    h_wait_crashed(b, "after-store-sync", 120000);
    if (!h_said(b, H_SAID_REPLAYED))
        h_stage_fail(b, "the restart did not replay the output tail");
    if (!h_said(b, "msg=\"checkpoint keeps the replay's watermarks\""))
        h_stage_fail(b, "the first round after the replay came after every "
                     "skip entry was consumed: the rule was not exercised");
    print_message("A forwarded %lld records past its first checkpoint; B's "
                  "first round kept the replay's watermarks for %zu "
                  "partition(s)\n", (long long)tail,
                  h_count_said(b, "msg=\"checkpoint keeps the replay's "
                               "watermarks\""));
    h_proc_release(b);

    const char *const in1[] = {"input.topics=" IN1, NULL};
    h_proc *c = stage_start(e, ckdir, in1);
    finish(e, c);
    h_proc_release(c);
    expect_model(e, "a kill right after a round that kept the replay's "
                    "watermarks");
    free(ckdir);
}

/* -- 2. late records ---------------------------------------------------------- */

/* 3000 records in order, then 300 whose timestamps are 2 windows older
 * (late), then 300 more in order. */
static void late_stream(wenv *e)
{
    e->st = h_stream_new(3600, NPARTS, 9);
    h_stream_add_timed(e->st, 3000, T0, STEP_MS, WINDOW_MS / STEP_MS);
    h_stream_add_timed(e->st, 300, T0 - 2 * WINDOW_MS, STEP_MS,
                       WINDOW_MS / STEP_MS);
    h_stream_add_timed(e->st, 300, T0 - 2 * WINDOW_MS, STEP_MS,
                       WINDOW_MS / STEP_MS);
    /* The last 300 back in order: after the late block's times. */
    for (size_t i = 3300; i < 3600; i++)
        e->st->ts[i] = T0 + (int64_t)i * STEP_MS;
}

static void test_late_reject(void **state)
{
    wenv *e = wenv_new(state, "reject");
    late_stream(e);
    size_t late = 0;
    e->fwd = h_stream_window_model(e->st, e->st->n, WINDOW_MS, 4, true,
                                   &late);
    print_message("%zu late records\n", late);
    assert_true(late >= 250);
    h_stream_produce(e->st, e->h.bs, IN, 0, e->st->n, NULL);
    h_proc *p = stage_start(e, e->h.dir, NULL);
    finish(e, p);
    h_proc_release(p);
    expect_model(e, "dedup.window.late=reject");
    /* Every late record is in REJ with reason late. */
    h_record_list l = {0};
    H_CHECK(h_consume_all(e->h.bs, REJ, 30000, &l));
    size_t n_late = h_record_list_count_header(&l, "bloomstage-reason",
                                               "late");
    h_record_list_free(&l);
    assert_int_equal(n_late, late);
}

static void test_late_forward(void **state)
{
    wenv *e = wenv_new(state, "forward");
    late_stream(e);
    size_t late = 0;
    e->fwd = h_stream_window_model(e->st, e->st->n, WINDOW_MS, 4, false,
                                   &late);
    h_stream_produce(e->st, e->h.bs, IN, 0, e->st->n, NULL);
    const char *const extra[] = {"log.stats.interval.ms=100", NULL};
    h_proc *p = stage_start(e, e->h.dir, extra);
    finish(e, p);
    /* The last stats line counts every late record. */
    const char *err = h_process_stderr(p), *last = NULL;
    for (const char *s = err; (s = strstr(s, "msg=stats ")); s++)
        last = s;
    if (!last)
        h_stage_fail(p, "no stats line");
    long long counted = h_log_int(last, "late");
    h_proc_release(p);
    print_message("%zu late records, the stage counted %lld\n", late,
                  counted);
    assert_int_equal(counted, (long long)late);
    expect_model(e, "dedup.window.late=forward");
}

/* -- 3. a rebalance moves the generations ------------------------------------ */

static void test_rebalance_moves_generations(void **state)
{
    wenv *e = wenv_new(state, "forward");
    const size_t N = 40000;
    e->st = h_stream_new(N, NPARTS, 13);
    h_stream_add_timed(e->st, N, T0, STEP_MS, WINDOW_MS / STEP_MS);
    e->fwd = h_stream_window_model(e->st, N, WINDOW_MS, 4, false, NULL);
    static const char *const kstore[] = {"checkpoint.store=kafka",
                                         "checkpoint.chunk.bytes=16k", NULL};
    /* A alone on the first half, then B joins (cooperative rebalance:
     * some partitions move with their state), then A is killed and B
     * takes the rest from the checkpoint topic. */
    h_stream_produce(e->st, e->h.bs, IN, 0, N / 2, NULL);
    char *da = h_strdupf("%s/a", e->h.dir), *db = h_strdupf("%s/b", e->h.dir);
    h_proc *a = stage_start(e, da, kstore);
    h_proc *const pa[] = {a, NULL};
    h_wait_out(e->q, OUT, NPARTS, pa, 1000, 120000);
    h_proc *b = stage_start(e, db, kstore);
    h_wait_said(b, H_SAID_ASSIGNED, 1, 120000);
    h_stream_produce(e->st, e->h.bs, IN, N / 2, N, NULL);
    h_nap(1500);
    h_stage_kill9(a, "after B joined");
    finish(e, b);
    size_t moved = h_count_restored(b, IN);
    print_message("B was assigned %zu partitions with their checkpoint "
                  "(generations and stream time)\n", moved);
    if (moved == 0)
        h_stage_fail(b, "no partition came to B with its state");
    h_proc_release(a);
    h_proc_release(b);
    free(da);
    free(db);
    expect_model(e, "a rebalance and a kill -9 under the Kafka store");
}

/* -- 4. /metrics ----------------------------------------------------------- */

static void test_metrics_show_window(void **state)
{
    wenv *e = wenv_new(state, "forward");
    e->st = h_stream_new(3000, NPARTS, 17);
    h_stream_add_timed(e->st, 3000, T0, STEP_MS, WINDOW_MS / STEP_MS);
    e->fwd = h_stream_window_model(e->st, 3000, WINDOW_MS, 4, false, NULL);
    h_stream_produce(e->st, e->h.bs, IN, 0, 3000, NULL);
    const char *const extra[] = {"metrics.listen=127.0.0.1:0", NULL};
    h_proc *p = stage_start(e, e->h.dir, extra);
    h_proc *const procs[] = {p, NULL};
    unsigned port = h_stage_metrics_port(p, 60000);
    h_wait_committed(e->h.bs, e->group, IN, NPARTS, e->st->next, procs,
                     120000, NULL, NULL);
    h_nap(1500); /* the per-partition view is published once a second */
    h_http_resp r;
    char err[256];
    if (h_http_request((unsigned)port, "GET", "/metrics", &r, err,
                       sizeof(err)) != 0)
        h_stage_fail(p, "GET /metrics: %s", err);
    const char *body = r.body;
    static const char *const want[] = {
        "bloomstage_window_generations{topic=\"in\",partition=\"0\"}",
        "bloomstage_window_stream_time_seconds{topic=\"in\"",
        "bloomstage_window_oldest_seconds{topic=\"in\"",
        "bloomstage_filter_bytes{topic=\"in\"",
        "bloomstage_records_late_total 0"};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        if (!strstr(body, want[i]))
            fail_msg("/metrics lacks %s:\n%s", want[i], body);
    /* Stream time of a partition: its newest record, T0 + i*100 ms. */
    const char *g = strstr(body, "bloomstage_window_generations{");
    unsigned gens = 0;
    assert_int_equal(sscanf(strchr(g, '}') + 1, " %u", &gens), 1);
    assert_true(gens >= 1 && gens <= 5);
    h_http_resp_free(&r);
    h_stage_stop(p);
    h_proc_release(p);
    expect_model(e, "with /metrics");
    /* Restarted without a window: the checkpoints keep theirs, and say so. */
    const char *const nowin[] = {"dedup.window.ms=0", NULL};
    p = stage_start(e, e->h.dir, nowin);
    h_wait_said(p, "checkpoint keeps its own dedup window", 1, 120000);
    h_expect_said(p, "checkpoint_window_ms=60000 checkpoint_generations=4 "
                     "window_ms=0 generations=0");
    h_stage_stop(p);
    h_proc_release(p);
}

/* -- 5. memory flat over 120 windows --------------------------------------- */

/* One gauge of p's /metrics (a series without labels). */
static double scrape(h_proc *p, unsigned port, const char *series)
{
    h_http_resp r;
    char err[256];
    if (h_http_request(port, "GET", "/metrics", &r, err, sizeof(err)) != 0)
        h_stage_fail(p, "GET /metrics: %s", err);
    h_prom pm;
    if (h_prom_parse(r.body, &pm, err, sizeof(err)) != 0)
        h_stage_fail(p, "/metrics: %s", err);
    double v = h_prom_get(&pm, r.body, "%s", series);
    h_prom_free(&pm);
    h_http_resp_free(&r);
    return v;
}

static h_proc *start_with_metrics(wenv *e, const char *ckdir,
                                  const char *window, unsigned *port)
{
    const char *const extra[] = {"metrics.listen=127.0.0.1:0", window, NULL};
    h_proc *p = stage_start(e, ckdir, extra);
    *port = h_stage_metrics_port(p, 60000);
    return p;
}

/*
 * A stream of 120 windows, fed 10 windows at a time: after each part the
 * windowed stage's filter memory (bloomstage_filter_memory_bytes) stays
 * within 1.5x of what it was after 30 windows, and, on the product's
 * allocator (jemalloc; not the sanitizer build's), its resident memory
 * within 8 MiB of it; the same stream through an unwindowed stage ends
 * with at least 3x the filter memory.  The output is the model's.
 */
static void test_memory_flat(void **state)
{
    wenv *e = wenv_new(state, "forward");
    enum { W = WINDOW_MS / STEP_MS, NW = 120, PART = 10 * W,
           NPARTS_FED = NW * W / PART };
    const size_t N = (size_t)NW * W;
    e->st = h_stream_new(N, NPARTS, 29);
    h_stream_add_timed(e->st, N, T0, STEP_MS, W);
    e->fwd = h_stream_window_model(e->st, N, WINDOW_MS, 4, false, NULL);
    unsigned port;
    char *ckw = h_strdupf("%s/ckw", e->h.dir);
    h_proc *p = start_with_metrics(e, ckw, "dedup.window.ms=60000", &port);
    h_proc *const procs[] = {p, NULL};
    bool product_malloc = strstr(h_process_stderr(p), "malloc=jemalloc");
    double bytes[NPARTS_FED];
    long rss[NPARTS_FED];
    char line[1024];
    int len = 0;
    for (int c = 0; c < NPARTS_FED; c++) {
        h_stream_produce(e->st, e->h.bs, IN, (size_t)c * PART,
                         (size_t)(c + 1) * PART, NULL);
        int64_t end[NPARTS];
        h_stream_ends(e->st, (size_t)(c + 1) * PART, end);
        h_wait_committed(e->h.bs, e->group, IN, NPARTS, end, procs, 120000,
                         NULL, NULL);
        h_nap(1300); /* the gauges are published once a second */
        bytes[c] = scrape(p, port, "bloomstage_filter_memory_bytes");
        rss[c] = h_proc_status_kib(h_process_pid(p), "VmRSS");
        len += snprintf(line + len, sizeof(line) - (size_t)len, " %.0fk",
                        bytes[c] / 1024);
    }
    h_stage_stop(p);
    h_proc_release(p);
    expect_model(e, "120 windows");
    print_message("filter KiB after every 10 windows:%s; RSS %ld KiB after "
                  "30 windows, %ld at the end (%s)\n", line, rss[2],
                  rss[NPARTS_FED - 1],
                  product_malloc ? "jemalloc" : "not checked: not jemalloc");
    for (int c = 3; c < NPARTS_FED; c++) {
        if (bytes[c] > 1.5 * bytes[2])
            fail_msg("filter memory after %d windows %.0f bytes, after 30 "
                     "%.0f: not flat", (c + 1) * 10, bytes[c], bytes[2]);
        if (product_malloc && rss[c] > rss[2] + 8192)
            fail_msg("resident memory after %d windows %ld KiB, after 30 "
                     "%ld KiB: not flat", (c + 1) * 10, rss[c], rss[2]);
    }

    /* The same stream without a window, in a group of its own. */
    snprintf(e->group + strlen(e->group),
             sizeof(e->group) - strlen(e->group), "-nowin");
    char *cku = h_strdupf("%s/cku", e->h.dir);
    char *grp = h_strdupf("consumer.group.id=%s", e->group);
    const char *const extra[] = {"metrics.listen=127.0.0.1:0",
                                 "dedup.window.ms=0", grp, NULL};
    h_proc *u = stage_start(e, cku, extra);
    h_proc *const uprocs[] = {u, NULL};
    unsigned uport = h_stage_metrics_port(u, 60000);
    h_wait_committed(e->h.bs, e->group, IN, NPARTS, e->st->next, uprocs,
                     120000, NULL, NULL);
    h_nap(1300);
    double ub = scrape(u, uport, "bloomstage_filter_memory_bytes");
    h_stage_stop(u);
    h_proc_release(u);
    print_message("unwindowed, same stream: %.0f KiB of filters, %.1fx the "
                  "windowed stage's\n", ub / 1024,
                  ub / bytes[NPARTS_FED - 1]);
    if (ub < 3 * bytes[NPARTS_FED - 1])
        fail_msg("unwindowed filters %.0f bytes, windowed %.0f: the window "
                 "saves less than 3x", ub, bytes[NPARTS_FED - 1]);
    free(ckw);
    free(cku);
    free(grp);
}

int main(void)
{
    h_test_main("test_window", "BS_WINDOW_ONLY", "BS_WINDOW_VERBOSE", NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_contract_kill9, h_fixture_teardown),
        cmocka_unit_test_teardown(test_replay_watermark_rule,
                                  h_fixture_teardown),
        cmocka_unit_test_teardown(test_late_reject, h_fixture_teardown),
        cmocka_unit_test_teardown(test_late_forward, h_fixture_teardown),
        cmocka_unit_test_teardown(test_rebalance_moves_generations,
                                  h_fixture_teardown),
        cmocka_unit_test_teardown(test_memory_flat, h_fixture_teardown),
        cmocka_unit_test_teardown(test_metrics_show_window,
                                  h_fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
