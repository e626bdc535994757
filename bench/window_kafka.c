/*
 * window_kafka.c -- bench_window_kafka: the windowed dedup job of
 * bench_window on a real broker, run by bloomstage (dedup.window.ms) and by
 * its Kafka Streams peer (bench/streams: a persistent window store), each
 * to the end of the input, several rounds; `bench/e2e --kafka --window`
 * builds it, starts the broker and runs it.
 *
 * The input: the support layer's synthetic days (h_stream_add_days,
 * harness/stream.c: the very stream bench_window times in memory),
 * DAYS days of PER_DAY records with a diurnal rate, time compressed through
 * the record timestamps (the last day ending about now), a key's copies in
 * one partition.  The job: drop a repeat of a key within 24 hours of the
 * copy that was forwarded.  bloomstage runs it with dedup.window.ms =
 * 86400000 (G = dedup.window.generations, default 4) and dedup.fpr;
 * Streams with --window-ms 86400000 --refresh false (a dropped copy does
 * not renew its key: the same contract) under exactly_once_v2.
 *
 * The end of a run, honestly, without knowing the output's size: for
 * bloomstage, its /metrics (every 10 ms) show records_in = N (everything
 * consumed) and the output topic's high watermarks add up to its
 * records_out, unchanged for a second; for Streams (bench/streams/run
 * without --distinct) its group's committed offsets reach the input's end
 * (lag 0) and no output comes for 5 s.  Either way the interval runs from
 * the first input record consumed to the last output record seen, and the
 * rate is N over it.
 *
 * Measured per run: rate, peak RSS (bloomstage's VmHWM before SIGTERM, the
 * Streams JVM's), state (bloomstage: the largest
 * bloomstage_filter_memory_bytes seen; Streams: the largest size of its
 * window store by RocksDB's own properties, memtables + SST files, which
 * Dedup samples every second: at the end most of it is still in memtables,
 * so the state directory's files say little), on disk (bloomstage's largest
 * checkpoint round; the blocks of Streams' state directory), and
 * correctness: both outputs are
 * read back (read_committed) and traced to their input records, and each
 * is checked against the exact answer, an exact set of the window's keys:
 * a copy less than a window after the copy the contestant forwarded must
 * be dropped (violations counted; any fails the run), a copy 1 + 1/G
 * windows or more after it (or a key never forwarded) must be forwarded
 * except with probability dedup.fpr (false drops counted, against a
 * Poisson bound), in between either; and the output's size against the
 * exact set's.
 *
 * Owned by the windowed-dedup work; the helpers are harness/'s and
 * bench_kafka.h's.
 */
#include "bench_kafka.h"
#include "support.h"

#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#ifndef BENCH_BLOOMSTAGE_PATH
#define BENCH_BLOOMSTAGE_PATH ""
#endif

#define DAY_MS INT64_C(86400000)
#define WINDOW_MS DAY_MS
#define MAX_ROUNDS 15

enum { C_STAGE, C_STREAMS, NCONT };
static const char *const cont_name[NCONT] = {"bloomstage", "streams-eos-v2"};

typedef struct run_res {
    bool ran;
    double seconds, startup_s;
    long hwm_kib;
    /* state: bloomstage's largest bloomstage_filter_memory_bytes, Streams'
     * largest store size (RocksDB memtables + SST files); disk: the
     * largest checkpoint round (bloomstage_checkpoint_bytes), the state
     * directory's blocks at the end (du) */
    double state_bytes, disk_bytes;
    double state_end; /* the state once the whole input was consumed */
    uint64_t out;
    int64_t model_diff; /* bloomstage: records decided unlike the model */
    /* correctness against the exact answer */
    uint64_t early, fp, fp_queries, between, exact_out;
} run_res;

typedef struct bench {
    const char *bootstrap, *bloomstage, *streams;
    char *dir;
    int nparts, rounds, days;
    unsigned G;
    double fpr;
    uint64_t per_day;
    bool keep;
    h_stream *st;
    rd_kafka_t *q;
    uint64_t exact_out; /* the exact set's forwards over the whole input */
    bool *model;        /* the stage's window without false positives */
} bench;

/* -- the exact answer ----------------------------------------------------- */

/* The exact set's forwards: a record is forwarded iff its key was not
 * forwarded within the window before it (gap > W, as Streams' fetch of
 * [ts - W, ts + W] has it). */
static uint64_t exact_forwards(const h_stream *st)
{
    int64_t *last = h_xcalloc(st->nids, sizeof(*last));
    bool *seen = h_xcalloc(st->nids, sizeof(*seen));
    uint64_t n = 0;
    for (size_t i = 0; i < st->n; i++) {
        uint32_t id = st->id[i];
        if (seen[id] && st->ts[i] - last[id] <= WINDOW_MS)
            continue;
        seen[id] = true;
        last[id] = st->ts[i];
        n++;
    }
    free(last);
    free(seen);
    return n;
}

/* Reads out_topic (read_committed), traces it to the input (in_topic: the
 * stage's provenance header is checked; NULL for Streams) and checks the
 * contestant's decisions against the contract, relative to its own
 * forwards (a key's copies are in one partition, in input order). */
static void check_output(const bench *b, const char *out_topic,
                         const char *in_topic, run_res *r)
{
    h_stream *st = b->st;
    size_t n = 0;
    h_outrec *o = h_read_out_conf(st, b->bootstrap, out_topic, in_topic,
                                  H_READ_COMMITTED, &n);
    bool *fwd = h_xcalloc(st->n, sizeof(*fwd));
    for (size_t k = 0; k < n; k++) {
        if (fwd[o[k].rec])
            h_test_fail("%s: input record %zu (key %s) is in the output "
                        "twice", out_topic, o[k].rec, st->key[o[k].rec]);
        fwd[o[k].rec] = true;
    }
    int64_t *last = h_xcalloc(st->nids, sizeof(*last));
    bool *seen = h_xcalloc(st->nids, sizeof(*seen));
    const double forget = (double)WINDOW_MS * (b->G + 1) / b->G;
    r->out = n;
    r->model_diff = -1;
    if (in_topic) {
        r->model_diff = 0;
        for (size_t i = 0; i < st->n; i++)
            r->model_diff += fwd[i] != b->model[i];
    }
    for (size_t i = 0; i < st->n; i++) {
        uint32_t id = st->id[i];
        double gap = seen[id] ? (double)(st->ts[i] - last[id]) : INFINITY;
        if (gap >= forget) {
            r->fp_queries++;
            r->fp += !fwd[i];
        } else if (gap < (double)WINDOW_MS) {
            r->early += fwd[i];
        } else {
            r->between++;
        }
        if (fwd[i]) {
            seen[id] = true;
            last[id] = st->ts[i];
        }
    }
    r->exact_out = b->exact_out;
    free(fwd);
    free(last);
    free(seen);
}

/* -- bloomstage ------------------------------------------------------------ */

static void run_stage(const bench *b, int round, const char *in,
                      const char *out, run_res *r)
{
    char conf[700], log[700], ckpt[700], group[64];
    snprintf(conf, sizeof(conf), "%s/stage-%d.conf", b->dir, round);
    snprintf(log, sizeof(log), "%s/stage-%d.log", b->dir, round);
    snprintf(ckpt, sizeof(ckpt), "%s/ckpt-%d", b->dir, round);
    snprintf(group, sizeof(group), "bench-window-%d", round);
    char *text = NULL;
    if (asprintf(&text,
                 "# bench_window_kafka: dedup on the key within a 24-hour "
                 "window of record time.\n"
                 "processing.guarantee=exactly_once\n"
                 "kafka.bootstrap.servers=%s\n"
                 "input.topics=%s\n"
                 "output.topic=%s\n"
                 "consumer.group.id=%s\n"
                 "dedup.key=key\n"
                 "dedup.fpr=%g\n"
                 "dedup.window.ms=%" PRId64 "\n"
                 "dedup.window.generations=%u\n"
                 "checkpoint.dir=%s\n"
                 "metrics.listen=127.0.0.1:0\n"
                 "log.level=info\n"
                 "# librdkafka learns a new topic's partitions on its topic "
                 "scan: see bench/e2e.c.\n"
                 "producer.topic.metadata.refresh.interval.ms=100\n",
                 b->bootstrap, in, out, group, b->fpr, WINDOW_MS, b->G,
                 ckpt) < 0)
        h_test_fail("out of memory");
    H_MUST(h_write_file(conf, text));
    free(text);
    double t_spawn = h_now_s();
    h_proc *c = bk_stage_spawn(b->bloomstage, conf, NULL, 0, log);
    if (!c)
        h_test_fail("%s: %s", b->bloomstage, h_last_error());
    unsigned port = bk_wait_metrics_port(c, log, 60);
    if (!port)
        h_test_fail("bloomstage gave no metrics port (log: %s)", log);
    static const char *const names[] = {"bloomstage_records_in_total",
                                        "bloomstage_records_out_total",
                                        "bloomstage_filter_memory_bytes",
                                        "bloomstage_checkpoint_bytes"};
    double t_first = 0, t_hw = 0, t_settled = 0;
    int64_t hw_sum = -1;
    for (double t0 = h_now_s();;) {
        double v[4];
        double now = h_now_s();
        if (h_process_wait(c, 0, NULL) != 1)
            h_test_fail("bloomstage exited during the run (log: %s)", log);
        if (now - t0 > 1800)
            h_test_fail("bloomstage: no end after 30 minutes (log: %s)", log);
        if (bk_metrics(port, names, v, 4) == 0) {
            if (v[3] > r->disk_bytes)
                r->disk_bytes = v[3];
            if (v[0] > 0 && t_first == 0)
                t_first = now;
            if (v[2] > r->state_bytes)
                r->state_bytes = v[2];
            /* The output's growth, watched all along: the interval ends
             * at its last record, as Streams' watcher ends it. */
            int64_t s = h_topic_end(b->q, out, b->nparts, NULL);
            if (s != hw_sum) {
                hw_sum = s;
                t_hw = now;
                t_settled = 0;
            }
            if (v[0] >= (double)b->st->n) {
                if ((double)s == v[1] && t_settled == 0)
                    t_settled = now;
                if (t_settled > 0 && now - t_settled >= 1.0) {
                    r->state_end = v[2];
                    break;
                }
            }
        }
        h_sleep_ms(10);
    }
    r->hwm_kib = h_proc_status_kib(h_process_pid(c), "VmHWM");
    int status = 0;
    if (h_process_terminate(c, 120000, &status) != 0 || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0)
        h_test_fail("bloomstage did not drain and exit 0 on SIGTERM (%s; "
                    "log: %s)", h_status_str(status), log);
    h_process_free(c);
    r->seconds = t_hw - t_first;
    r->startup_s = t_first - t_spawn;
    r->ran = true;
    check_output(b, out, in, r);
}

/* -- Kafka Streams ----------------------------------------------------------- */

#define STREAMS_LINE "streams guarantee=%63s records=%" SCNu64 \
                     " seconds=%lf rate=%lf peak_rss_kib=%ld out=%" SCNu64 \
                     " startup_s=%lf state_kib=%lf state_blocks_kib=%lf" \
                     " store_bytes=%lf store_bytes_end=%lf"

static void run_streams(const bench *b, int round, const char *in,
                        const char *out, run_res *r)
{
    char nstr[32], wstr[32], log[700];
    snprintf(nstr, sizeof(nstr), "%zu", b->st->n);
    snprintf(wstr, sizeof(wstr), "%" PRId64, WINDOW_MS);
    snprintf(log, sizeof(log), "%s/streams-%d.log", b->dir, round);
    char *argv[] = {(char *)b->streams, "--bootstrap", (char *)b->bootstrap,
                    "--input", (char *)in, "--output", (char *)out,
                    "--records", nstr, "--guarantee", "exactly_once_v2",
                    "--window-ms", wstr, "--refresh", "false",
                    "--timeout", "1800", NULL};
    h_spawn_opts o = {.log_path = log, .pipe_stdout = true};
    h_proc *c = NULL;
    if (h_process_spawn_opts(argv, &o, &c))
        h_test_fail("%s: %s", b->streams, h_last_error());
    char line[512] = "", g[64] = "";
    uint64_t recs = 0, n_out = 0;
    double rt = 0, state_kib = 0, blocks_kib = 0, store = 0, store_end = 0;
    if (h_process_read_line(c, 1900 * 1000, line, sizeof(line)))
        h_test_fail("bench/streams/run gave no result line (log: %s)", log);
    int status = 0;
    if (h_process_wait(c, 120000, &status) != 0 || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0)
        h_test_fail("bench/streams/run did not exit 0 (%s; log: %s)",
                    h_status_str(status), log);
    h_process_free(c);
    if (sscanf(line, STREAMS_LINE, g, &recs, &r->seconds, &rt, &r->hwm_kib,
               &n_out, &r->startup_s, &state_kib, &blocks_kib,
               &store, &store_end) != 11 ||
        recs != b->st->n)
        h_test_fail("cannot parse bench/streams/run's line '%s'", line);
    r->state_bytes = store;
    r->state_end = store_end;
    r->disk_bytes = blocks_kib * 1024;
    r->ran = true;
    check_output(b, out, NULL, r);
    if (r->out != n_out)
        h_test_fail("streams: its watcher counted %" PRIu64 " output "
                    "records, the topic holds %" PRIu64, n_out, r->out);
}

/* -- rounds and figures ------------------------------------------------------ */

static double rate_of(const bench *b, const run_res *r)
{
    return r->seconds > 0 ? (double)b->st->n / r->seconds : 0;
}

static void one_round(bench *b, int round, run_res *res)
{
    char in[64], out[NCONT][64], err[512];
    snprintf(in, sizeof(in), "window-in-%d", round);
    snprintf(out[C_STAGE], sizeof(out[C_STAGE]), "window-out-stage-%d",
             round);
    snprintf(out[C_STREAMS], sizeof(out[C_STREAMS]), "window-out-streams-%d",
             round);
    /* Record time is days old: nothing may be deleted by its age. */
    static const char *const cfg[] = {"retention.ms", "-1", "retention.bytes",
                                      "-1", NULL};
    const char *topics[] = {in, out[C_STAGE], out[C_STREAMS]};
    if (bk_create_topics(b->bootstrap, topics, b->streams ? 3 : 2,
                         b->nparts, cfg, err, sizeof(err)))
        h_test_fail("round %d: %s", round, err);
    printf("round %d: loading %s...", round, in);
    fflush(stdout);
    double t0 = h_now_s();
    h_stream_produce(b->st, b->bootstrap, in, 0, b->st->n, NULL);
    printf(" %.1f s; bloomstage...", h_now_s() - t0);
    fflush(stdout);
    run_stage(b, round, in, out[C_STAGE], &res[C_STAGE]);
    printf(" %.2f s", res[C_STAGE].seconds);
    if (b->streams) {
        printf("; streams exactly_once_v2...");
        fflush(stdout);
        run_streams(b, round, in, out[C_STREAMS], &res[C_STREAMS]);
        printf(" %.2f s", res[C_STREAMS].seconds);
    }
    printf("\n");
}

static const char *mib(double bytes, char *buf, size_t size)
{
    snprintf(buf, size, "%.1f MiB", bytes / 1048576.0);
    return buf;
}

static int report(const bench *b, run_res (*res)[NCONT], const char *load0)
{
    char load1[160], m1[32], m2[32];
    bk_machine_load(load1, sizeof(load1));
    printf("\n%5s  %-15s %9s %9s %8s %11s %10s %10s %10s %10s %5s %13s "
           "%7s %5s\n", "round", "contestant", "out", "exact", "seconds",
           "rate (in/s)", "peak RSS", "state", "at end", "on disk",
           "early", "false drops", "between", "model");
    int bad = 0;
    for (int r = 0; r < b->rounds; r++)
        for (int k = 0; k < NCONT; k++) {
            const run_res *x = &res[r][k];
            if (!x->ran)
                continue;
            char fp[48], md[24], m3[32] = "-", m4[32];
            snprintf(fp, sizeof(fp), "%" PRIu64 "/%" PRIu64, x->fp,
                     x->fp_queries);
            snprintf(md, sizeof(md), "%" PRId64, x->model_diff);
            mib(x->disk_bytes, m3, sizeof(m3));
            printf("%5d  %-15s %9" PRIu64 " %9" PRIu64 " %8.2f %11.0f "
                   "%10s %10s %10s %10s %5" PRIu64 " %13s %7" PRIu64
                   " %5s\n",
                   r + 1, cont_name[k], x->out, x->exact_out, x->seconds,
                   rate_of(b, x), mib((double)x->hwm_kib * 1024, m1,
                                      sizeof(m1)),
                   mib(x->state_bytes, m2, sizeof(m2)),
                   mib(x->state_end, m4, sizeof(m4)), m3, x->early, fp,
                   x->between, x->model_diff < 0 ? "-" : md);
            uint64_t lim = h_poisson_upper(b->fpr * (double)x->fp_queries,
                                         1e-6);
            if (x->early || x->fp > lim) {
                printf("       ^ contract broken: %" PRIu64 " copies within "
                       "the window forwarded (must be 0), %" PRIu64
                       " false drops (limit %" PRIu64 ")\n", x->early, x->fp,
                       lim);
                bad = 1;
            }
        }
    double rate[NCONT][MAX_ROUNDS], med[NCONT], best[NCONT], worst[NCONT];
    double rss[NCONT] = {0}, state[NCONT] = {0}, disk[NCONT] = {0};
    double end[NCONT] = {0};
    uint64_t fp[NCONT] = {0}, fq[NCONT] = {0};
    printf("\nover %d rounds (rate in input records/s; spread: (best - "
           "worst) / median; the largest RSS and state of the rounds)\n",
           b->rounds);
    printf("%-16s %10s %10s %10s %8s %10s %11s %22s\n", "contestant", "best",
           "median", "worst", "spread", "peak RSS", "state",
           "false drops (rate)");
    for (int k = 0; k < NCONT; k++) {
        int n = 0;
        for (int r = 0; r < b->rounds; r++) {
            const run_res *x = &res[r][k];
            if (!x->ran)
                continue;
            rate[k][n++] = rate_of(b, x);
            if ((double)x->hwm_kib * 1024 > rss[k])
                rss[k] = (double)x->hwm_kib * 1024;
            if (x->state_bytes > state[k])
                state[k] = x->state_bytes;
            if (x->state_end > end[k])
                end[k] = x->state_end;
            if (x->disk_bytes > disk[k])
                disk[k] = x->disk_bytes;
            /* Every round runs the same input: the largest count, not
             * the sum (bloomstage's decisions repeat; the model column
             * shows they are the model's). */
            if (x->fp >= fp[k]) {
                fp[k] = x->fp;
                fq[k] = x->fp_queries;
            }
        }
        if (!n)
            continue;
        med[k] = bk_median(rate[k], n);
        best[k] = rate[k][n - 1];
        worst[k] = rate[k][0];
        char f[64];
        snprintf(f, sizeof(f), "%" PRIu64 " (%.2g)", fp[k],
                 fq[k] ? (double)fp[k] / (double)fq[k] : 0.0);
        printf("%-16s %10.0f %10.0f %10.0f %7.1f%% %10s %11s %22s\n",
               cont_name[k], best[k], med[k], worst[k],
               100 * (best[k] - worst[k]) / med[k],
               mib(rss[k], m1, sizeof(m1)), mib(state[k], m2, sizeof(m2)),
               f);
    }
    double keys_per_window = (double)b->exact_out / b->days;
    printf("\nkeys in a window (the exact set's forwards a day, on average): "
           "%.0f\n", keys_per_window);
    printf("false drops: the largest count of a round (every round runs "
           "the same input)\n");
    printf("bloomstage filter memory per key of a window: %.1f bytes (%.1f "
           "bits) at the end (every partition at the last record's time); %.1f bytes at the "
           "peak of the run\n", end[C_STAGE] / keys_per_window,
           8 * end[C_STAGE] / keys_per_window,
           state[C_STAGE] / keys_per_window);
    printf("bloomstage false drops: %" PRIu64 " of %" PRIu64 " copies 1.25 "
           "windows or more after the forwarded one: rate %.3g, dedup.fpr %g "
           "(Poisson limit %" PRIu64 " at alpha 1e-6)\n", fp[C_STAGE],
           fq[C_STAGE], fq[C_STAGE] ? (double)fp[C_STAGE] / (double)fq[C_STAGE]
                                    : 0.0,
           b->fpr, h_poisson_upper(b->fpr * (double)fq[C_STAGE], 1e-6));
    if (b->streams) {
        printf("bloomstage / streams rate: median %.2fx, best %.2fx, per "
               "round", med[C_STAGE] / med[C_STREAMS],
               best[C_STAGE] / best[C_STREAMS]);
        for (int r = 0; r < b->rounds; r++)
            printf(" %.2f", rate_of(b, &res[r][C_STAGE]) /
                                rate_of(b, &res[r][C_STREAMS]));
        printf("\nbloomstage / streams peak RSS: %.3f (%.1f / %.1f MiB)\n",
               rss[C_STAGE] / rss[C_STREAMS], rss[C_STAGE] / 1048576,
               rss[C_STREAMS] / 1048576);
        printf("bloomstage filters / streams store (RocksDB memtables + "
               "SST): peak %.4f (%.1f / %.1f MiB, the largest of each), at "
               "the end %.4f (%.1f / %.1f MiB)\n",
               state[C_STAGE] / state[C_STREAMS], state[C_STAGE] / 1048576,
               state[C_STREAMS] / 1048576, end[C_STAGE] / end[C_STREAMS],
               end[C_STAGE] / 1048576, end[C_STREAMS] / 1048576);
        printf("on disk: bloomstage's largest checkpoint round %.1f MiB, "
               "Streams' state directory %.1f MiB of blocks\n",
               disk[C_STAGE] / 1048576, disk[C_STREAMS] / 1048576);
    }
    printf("columns: out/exact: output records, and the exact set's "
           "(forward iff no copy forwarded within 24 h); state: bloomstage's\n"
           "  largest bloomstage_filter_memory_bytes, Streams' largest store "
           "(RocksDB size-all-mem-tables + total-sst-files-size), peak\n"
           "  and once all input was consumed (at end);\n"
           "  on disk: bloomstage's largest bloomstage_checkpoint_bytes, "
           "Streams' state directory at the end (du); early: copies within\n"
           "  the window of the forwarded one let through (must be 0); false "
           "drops: of the copies 1.25 windows or more after\n"
           "  it (or never forwarded); between: either answer allowed; model: "
           "records bloomstage decided unlike the window's\n"
           "  model without false positives (h_stream_window_model)\n");
    printf("machine: at start %s\n         at end   %s\n", load0, load1);
    return bad;
}

static const char USAGE[] =
    "usage: bench_window_kafka --bootstrap HOST:PORT [--bloomstage BIN]\n"
    "           [--streams bench/streams/run | --no-streams]\n"
    "           [--records-per-day N] [--days D] [--partitions P]\n"
    "           [--rounds R] [--fpr P] [--generations G] [--keep]\n";

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"bootstrap", required_argument, NULL, 'b'},
        {"bloomstage", required_argument, NULL, 'B'},
        {"streams", required_argument, NULL, 's'},
        {"no-streams", no_argument, NULL, 'S'},
        {"records-per-day", required_argument, NULL, 'n'},
        {"days", required_argument, NULL, 'd'},
        {"partitions", required_argument, NULL, 'p'},
        {"rounds", required_argument, NULL, 'r'},
        {"fpr", required_argument, NULL, 'f'},
        {"generations", required_argument, NULL, 'g'},
        {"keep", no_argument, NULL, 'k'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    bench b = {.bloomstage = BENCH_BLOOMSTAGE_PATH, .nparts = 8, .rounds = 3,
               .days = 3, .G = 4, .fpr = 1e-6, .per_day = 500000};
    bool no_streams = false;
    uint64_t v;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'b': b.bootstrap = optarg; break;
        case 'B': b.bloomstage = optarg; break;
        case 's': b.streams = optarg; break;
        case 'S': no_streams = true; break;
        case 'k': b.keep = true; break;
        case 'n':
            if (!bench_parse_count(optarg, 1000, 3000000, &b.per_day))
                goto usage;
            break;
        case 'd':
            if (!bench_parse_count(optarg, 2, 30, &v))
                goto usage;
            b.days = (int)v;
            break;
        case 'p':
            if (!bench_parse_count(optarg, 1, H_STREAM_MAXP, &v))
                goto usage;
            b.nparts = (int)v;
            break;
        case 'r':
            if (!bench_parse_count(optarg, 1, MAX_ROUNDS, &v))
                goto usage;
            b.rounds = (int)v;
            break;
        case 'g':
            if (!bench_parse_count(optarg, 1, 64, &v))
                goto usage;
            b.G = (unsigned)v;
            break;
        case 'f':
            b.fpr = strtod(optarg, NULL);
            if (!(b.fpr > 0 && b.fpr < 0.5))
                goto usage;
            break;
        case 'h': fputs(USAGE, stdout); return 0;
        default: goto usage;
        }
    }
    if (!b.bootstrap || optind != argc || !b.bloomstage[0] ||
        (uint64_t)b.days * b.per_day >= 10000000)
        goto usage;
    if (no_streams)
        b.streams = NULL;
    signal(SIGPIPE, SIG_IGN);
    char load0[160];
    bk_machine_load(load0, sizeof(load0));
    H_MUST(h_tmpdir_new(&b.dir));
    /* Record time ends about now (a broker keeps records of any age, but
     * Streams' changelog retention is counted from them). */
    int64_t t0 = (int64_t)(h_wall_s() * 1000) - b.days * DAY_MS;
    b.st = h_stream_new(b.per_day * (uint64_t)b.days, b.nparts, 1);
    h_stream_add_days(b.st, b.per_day, b.days, t0);
    b.exact_out = exact_forwards(b.st);
    b.model = h_stream_window_model(b.st, b.st->n, WINDOW_MS, b.G, false,
                                    NULL);
    b.q = h_query_client(h_conf_pairs(NULL, "bootstrap.servers", b.bootstrap,
                                      NULL));
    printf("bench_window_kafka: %d days of record time, %" PRIu64 " records "
           "a day (diurnal), %zu records, %zu keys, %d partitions; window "
           "24 h, G=%u, dedup.fpr %g; %d rounds; the exact set forwards %"
           PRIu64 "\n", b.days, b.per_day, b.st->n, b.st->nids, b.nparts,
           b.G, b.fpr, b.rounds, b.exact_out);
    printf("streams: %s\nwork directory: %s\n\n",
           b.streams ? "exactly_once_v2, --window-ms 86400000 --refresh false"
                     : "not run",
           b.dir);
    run_res res[MAX_ROUNDS][NCONT];
    memset(res, 0, sizeof(res));
    for (int r = 0; r < b.rounds; r++)
        one_round(&b, r + 1, res[r]);
    int bad = report(&b, res, load0);
    rd_kafka_destroy(b.q);
    h_stream_free(b.st);
    free(b.model);
    if (!b.keep && !bad)
        (void)h_tmpdir_remove(b.dir);
    else
        printf("work directory kept: %s\n", b.dir);
    free(b.dir);
    return bad;
usage:
    fputs(USAGE, stderr);
    return 2;
}
