/*
 * scale.c -- bench_scale: bloomstage at a scale the mock broker could never
 * hold, on a real Apache Kafka broker (bench/scale starts one and runs
 * this).  bench/HISTORY.md explains the output.
 *
 *   bench_scale --bootstrap B [--records N] [--keys K] [--partitions P]
 *               [--kill-at F] [--bloomstage PATH] [--keep] [-X key=value]...
 *
 * What it does, in order:
 *   1. creates scale-in and scale-out (P partitions each, retention.ms=-1
 *      and no size limit: nothing is deleted before the stage read it);
 *   2. loads N records into scale-in: keys user-NNNNNNNNNN, exactly K
 *      distinct ones (each at least once, the other N-K records random
 *      repeats), the whole sequence shuffled with a fixed seed; ~40-byte
 *      JSON values; partition hash(key) % P, so a key's copies share a
 *      partition.  Checked: the input's high watermarks are what was sent;
 *   3. starts `bloomstage run` (dedup.key=key, exactly_once, every other
 *      setting its default: dedup.fpr 1e-6, checkpoints every 5 s or 1M
 *      records into a directory), with /metrics on a loopback port, and
 *      polls /metrics every second, printing a row every 10 s: records in,
 *      the rate over those 10 s, the filters' memory, the last checkpoint
 *      round's bytes, checkpoints and their mean duration so far;
 *   4. once records_in reaches F*N (default 0.5; --kill-at 0: no kill),
 *      kill -9, and at once a new `bloomstage run` on the same config and
 *      checkpoint directory: the restore time is spawn to its first record
 *      consumed (records_in leaving 0 on /metrics, polled every 10 ms), and
 *      its "output tail replayed" and "partition assigned" lines are
 *      printed;
 *   5. waits until the group's committed offsets reach the input's end
 *      (everything processed and checkpointed), SIGTERM (the stage drains
 *      and must exit 0);
 *   6. reads all of scale-out (read_committed, from the beginning): every
 *      key must be one of the input's, none may occur twice (exactly_once
 *      across the kill), and the unique keys missing from it -- first
 *      copies the filter took for repeats -- are counted against what
 *      dedup.fpr allows: each first copy is a false positive with
 *      probability <= fpr, so the count is at most Poisson(K * fpr); the
 *      run fails if it exceeds the Poisson quantile exceeded with
 *      probability 1e-4.
 *
 * Exit 0 when everything checked out, 1 on a failure (a count that does not
 * add up is a failure, not a number), 2 on usage.
 */
#include "support.h"
#include "bench_kafka.h"

#include <librdkafka/rdkafka.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef BENCH_BLOOMSTAGE_PATH
#define BENCH_BLOOMSTAGE_PATH ""
#endif

#define T_IN "scale-in"
#define T_OUT "scale-out"
#define GROUP "bench-scale"
#define FPR 1e-6 /* dedup.fpr: the stage's default, set explicitly */
#define KEY_FMT "user-%010" PRIu32
#define VALUE_FMT "{\"seq\":%010" PRIu64 ",\"type\":\"signup\",\"r\":%d}"

static volatile sig_atomic_t interrupted;
static void on_signal(int sig) { interrupted = sig; }

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "bench_scale: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return -1;
}

static int32_t partition_of(uint32_t key, int32_t nparts)
{
    return (int32_t)(h_mix64(key ^ UINT64_C(0xb100b100)) % (uint64_t)nparts);
}

/* -- the input ------------------------------------------------------------ */

static uint32_t *make_order(uint64_t n, uint32_t k)
{
    uint32_t *o = malloc(n * sizeof(uint32_t));
    if (!o)
        return NULL;
    uint64_t s = 0x5ca1e;
    for (uint64_t i = 0; i < n; i++) {
        if (i < k) {
            o[i] = (uint32_t)i;
        } else {
            s = h_mix64(s);
            o[i] = (uint32_t)(s % k);
        }
    }
    for (uint64_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
        s = h_mix64(s + i);
        uint64_t j = s % (i + 1);
        uint32_t t = o[i];
        o[i] = o[j];
        o[j] = t;
    }
    return o;
}

static int load_input(const char *bootstrap, const uint32_t *order,
                      uint64_t n, uint32_t k, int32_t nparts,
                      rd_kafka_t *q)
{
    rd_kafka_conf_t *conf = h_conf_pairs(
        NULL, "bootstrap.servers", bootstrap, "client.id", "bench-scale-load",
        "enable.idempotence", "true", "compression.type", "lz4", "linger.ms",
        "50", "batch.num.messages", "10000", "batch.size", "1000000",
        "queue.buffering.max.messages", "1000000", NULL);
    h_producer *lp = NULL;
    if (h_producer_new(conf, 0, &lp))
        return fail("cannot create the loader: %s", h_last_error());
    uint8_t *seen = calloc(k, 1);
    uint64_t *per = calloc((size_t)nparts, sizeof(uint64_t));
    if (!seen || !per) {
        h_producer_abandon(lp);
        free(seen);
        free(per);
        return fail("out of memory");
    }
    double t0 = h_now_s(), shown = t0;
    char kb[64], vb[128];
    int rc = 0;
    for (uint64_t i = 0; i < n && !interrupted; i++) {
        uint32_t key = order[i];
        int kl = snprintf(kb, sizeof(kb), KEY_FMT, key);
        int copy = seen[key] < 255 ? ++seen[key] : 255;
        int vl = snprintf(vb, sizeof(vb), VALUE_FMT, i, copy);
        int32_t p = partition_of(key, nparts);
        h_record r = {.key = kb, .key_len = (size_t)kl, .value = vb,
                      .value_len = (size_t)vl};
        if (h_producer_send(lp, T_IN, p, &r)) {
            rc = fail("loading: %s", h_last_error());
            break;
        }
        per[p]++;
        if ((i & 1023) == 0) {
            h_producer_poll(lp);
            double t = h_now_s();
            if (t - shown >= 10) {
                printf("  loading: %" PRIu64 " of %" PRIu64 " sent, %.0f/s\n",
                       i, n, (double)i / (t - t0));
                shown = t;
            }
        }
    }
    if (rc || interrupted)
        h_producer_abandon(lp);
    else if (h_producer_close(lp, T_IN, 300000))
        rc = fail("loading: %s", h_last_error());
    double dt = h_now_s() - t0;
    free(seen);
    if (rc || interrupted) {
        free(per);
        return -1;
    }
    int64_t hw[nparts];
    if (h_offsets(q, T_IN, nparts, RD_KAFKA_OFFSET_END, hw, 10000)) {
        free(per);
        return fail("%s: cannot read the high watermarks", T_IN);
    }
    for (int32_t p = 0; p < nparts; p++)
        if ((uint64_t)hw[p] != per[p]) {
            fail("%s [%d] holds %" PRId64 " records, %" PRIu64 " were sent",
                 T_IN, (int)p, hw[p], per[p]);
            free(per);
            return -1;
        }
    free(per);
    printf("  loaded %" PRIu64 " records in %.1f s (%.0f/s)\n", n, dt,
           (double)n / dt);
    return 0;
}

/* -- the stage ------------------------------------------------------------ */

typedef struct scale {
    const char *bootstrap, *bloomstage;
    char dir[512], conf[700];
    char **xs;
    int nx;
    int32_t nparts;
    uint64_t n;
    uint32_t k;
    rd_kafka_t *q;
} scale;

static h_proc *stage_spawn(const scale *sc, const char *log_path)
{
    h_proc *c = bk_stage_spawn(sc->bloomstage, sc->conf, sc->xs, sc->nx,
                               log_path);
    if (!c)
        fail("%s: %s", sc->bloomstage, h_last_error());
    return c;
}

static bool alive(h_proc *c) { return h_process_wait(c, 0, NULL) == 1; }

/* Waits for the stage's /metrics port (from its log). */
static unsigned wait_port(h_proc *c, const char *log_path)
{
    return interrupted ? 0 : bk_wait_metrics_port(c, log_path, 60);
}

typedef struct sample {
    double t, in, out, filter, ckpt_bytes, ckpts, ckpt_sum, ckpt_count;
} sample;

static bool sample_of(unsigned port, sample *s)
{
    static const char *const names[] = {
        "bloomstage_records_in_total", "bloomstage_records_out_total",
        "bloomstage_filter_memory_bytes", "bloomstage_checkpoint_bytes",
        "bloomstage_checkpoints_total",
        "bloomstage_checkpoint_duration_seconds_sum",
        "bloomstage_checkpoint_duration_seconds_count"};
    double v[7];
    s->t = h_now_s();
    if (bk_metrics(port, names, v, 7))
        return false;
    s->in = v[0];
    s->out = v[1];
    s->filter = v[2];
    s->ckpt_bytes = v[3];
    s->ckpts = v[4];
    s->ckpt_sum = v[5];
    s->ckpt_count = v[6];
    return s->in >= 0 && s->out >= 0;
}

/* The sum of checkpoint_offset= over the "partition assigned" lines of a
 * log (a deferred one's "partition restored" line instead): where the
 * restarted stage resumes, so it has consumed everything once its
 * records_in reaches n minus that (the lines read by the tests' own
 * h_partition_line).  -1 if not all are there, or one does not parse. */
static double resume_offsets(const char *path, int nparts)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[4096];
    double sum = 0;
    int got = 0;
    while (fgets(line, sizeof(line), f)) {
        h_assigned a;
        h_line_kind kind = h_partition_line(line, T_IN, &a);
        if (kind == H_LINE_BAD) {
            fprintf(stderr, "bench/scale: %s: a 'partition' line does not "
                    "parse: %s", path, line);
            got = -1;
            break;
        }
        if (kind == H_LINE_PARTITION && !a.revoked) {
            sum += a.ckpt > 0 ? (double)a.ckpt : 0;
            got++;
        }
    }
    fclose(f);
    return got >= nparts ? sum : -1;
}

/* The wall-clock time (h_log_time) of the first log line holding needle,
 * or 0. */
static double log_time(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[4096];
    double t = 0;
    while (fgets(line, sizeof(line), f))
        if (strstr(line, needle)) {
            t = h_log_time(line);
            break;
        }
    fclose(f);
    return t;
}

static void print_sample(double t0, const sample *s, const sample *prev,
                         double in_before)
{
    double dt = s->t - prev->t;
    double dc = s->ckpt_count - prev->ckpt_count;
    char ck[32] = "-";
    if (dc > 0)
        snprintf(ck, sizeof(ck), "%.0f ms", 1e3 * (s->ckpt_sum -
                                                 prev->ckpt_sum) / dc);
    printf("%7.1f %12.0f %12.0f %10.0f %9.1f %10.1f %8.0f %12s\n",
           s->t - t0, in_before + s->in, s->out,
           dt > 0 ? (s->in - prev->in) / dt : 0, s->filter / 1048576.0,
           s->ckpt_bytes / 1048576.0, dc, ck);
}

static void print_rows_header(void)
{
    printf("%7s %12s %12s %10s %9s %10s %8s %12s\n", "t (s)", "records in",
           "records out", "rate/s", "filt MiB", "ckpt MiB", "ckpts",
           "ckpt mean");
}

/* All input committed: the group's offsets are the input's ends. */
static int committed_all(const scale *sc, const int64_t *end, bool *done)
{
    int64_t off[sc->nparts];
    *done = false;
    if (h_committed(sc->bootstrap, GROUP, T_IN, sc->nparts, off))
        return 0; /* not yet readable: not done */
    for (int32_t p = 0; p < sc->nparts; p++)
        if (off[p] < end[p])
            return 0;
    *done = true;
    return 0;
}

/* Lines of a log file containing `needle`, printed indented (at most max). */
static void print_lines(const char *path, const char *needle, int max)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char line[4096];
    int n = 0, total = 0;
    while (fgets(line, sizeof(line), f))
        if (strstr(line, needle)) {
            if (n++ < max)
                printf("    %s", line);
            total++;
        }
    if (total > max)
        printf("    ... %d such lines in all\n", total);
    fclose(f);
}

static void print_tail(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, size > 4000 ? size - 4000 : 0, SEEK_SET);
    char buf[4001];
    size_t got = fread(buf, 1, 4000, f);
    buf[got] = '\0';
    fclose(f);
    fprintf(stderr, "--- %s (tail)\n%s\n---\n", path, buf);
}

/* -- reading the output --------------------------------------------------- */

typedef struct verdict {
    uint64_t records, distinct, dups, unknown, missing;
} verdict;

/* A read_committed consumer of scale-out, assigned from the beginning
 * every partition that holds anything (end[p] > 0), or NULL after the
 * message; *eofs counts the empty ones, already at their end. */
static rd_kafka_t *verifier(const scale *sc, const int64_t *end, int *eofs)
{
    char err[512];
    rd_kafka_conf_t *conf = h_conf_pairs(
        NULL, "bootstrap.servers", sc->bootstrap, "client.id",
        "bench-scale-verify", "group.id", "bench-scale-verify",
        "isolation.level", "read_committed", "enable.auto.commit", "false",
        "enable.partition.eof", "true", "queued.min.messages", "1000000",
        "fetch.max.bytes", "104857600", NULL);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
    if (!rk) {
        fail("verify consumer: %s", err);
        return NULL;
    }
    rd_kafka_poll_set_consumer(rk);
    rd_kafka_topic_partition_list_t *l =
        rd_kafka_topic_partition_list_new(sc->nparts);
    *eofs = 0;
    for (int32_t p = 0; p < sc->nparts; p++) {
        if (end[p] == 0) {
            (*eofs)++;
            continue;
        }
        rd_kafka_topic_partition_list_add(l, T_OUT, p)->offset =
            RD_KAFKA_OFFSET_BEGINNING;
    }
    rd_kafka_assign(rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    return rk;
}

/* One output record's key counted: unknown (not user-N for an N < K), a
 * duplicate, or a distinct key (seen: a bit per key). */
static void tally(const scale *sc, const rd_kafka_message_t *m,
                  uint8_t *seen, verdict *v)
{
    v->records++;
    uint32_t key = 0;
    char kb[32];
    size_t kl = m->key_len < sizeof(kb) - 1 ? m->key_len : sizeof(kb) - 1;
    memcpy(kb, m->key ? m->key : "", m->key ? kl : 0);
    kb[m->key ? kl : 0] = '\0';
    if (sscanf(kb, "user-%10" SCNu32, &key) != 1 || key >= sc->k) {
        v->unknown++;
    } else if (seen[key / 8] & (1u << (key % 8))) {
        v->dups++;
    } else {
        seen[key / 8] |= (uint8_t)(1u << (key % 8));
        v->distinct++;
    }
}

/* scale-out read to its high watermarks, every key tallied into v. */
static int read_output(const scale *sc, verdict *v)
{
    memset(v, 0, sizeof(*v));
    int64_t end[sc->nparts];
    if (h_offsets(sc->q, T_OUT, sc->nparts, RD_KAFKA_OFFSET_END, end, 10000))
        return fail("%s: cannot read the high watermarks", T_OUT);
    uint8_t *seen = calloc(((size_t)sc->k + 7) / 8, 1);
    if (!seen)
        return fail("out of memory");
    int eofs = 0;
    rd_kafka_t *rk = verifier(sc, end, &eofs);
    if (!rk) {
        free(seen);
        return -1;
    }
    bool *at_end = calloc((size_t)sc->nparts, sizeof(bool));
    double t0 = h_now_s(), moved = t0;
    int rc = 0;
    while (eofs < sc->nparts && !interrupted && at_end) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 500);
        if (!m) {
            if (h_now_s() - moved > 60) {
                rc = fail("verify: nothing read for 60 s");
                break;
            }
            continue;
        }
        moved = h_now_s();
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            if (m->partition >= 0 && m->partition < sc->nparts &&
                m->offset >= end[m->partition] && !at_end[m->partition]) {
                at_end[m->partition] = true;
                eofs++;
            }
        } else if (m->err) {
            rc = fail("verify: %s", rd_kafka_message_errstr(m));
        } else {
            tally(sc, m, seen, v);
        }
        rd_kafka_message_destroy(m);
        if (rc)
            break;
    }
    free(at_end);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    free(seen);
    v->missing = sc->k - v->distinct;
    printf("  read %" PRIu64 " output records in %.1f s\n", v->records,
           h_now_s() - t0);
    if (interrupted)
        return fail("interrupted");
    return rc;
}

/* -- main ----------------------------------------------------------------- */

static const char USAGE[] =
    "usage: bench_scale --bootstrap B [--records N] [--keys K]\n"
    "                   [--partitions P] [--kill-at F] [--bloomstage PATH]\n"
    "                   [--keep] [-X key=value]...\n"
    "\n"
    "bloomstage on a real broker at scale (see bench/scale, and the top of\n"
    "bench/scale.c): N records (default 20M) with K distinct keys (default\n"
    "10M) through `bloomstage run` (exactly_once, dedup on the key), a\n"
    "kill -9 when records_in reaches F*N (default 0.5; 0: none) and a\n"
    "restart; prints throughput every 10 s, the filters' memory, checkpoint\n"
    "bytes and time, the restore time, and the unique keys missing from the\n"
    "output against the bound dedup.fpr allows.\n";

/* One run of main: the options the stage does not see, the files, and
 * what the watch over the stage's two lives measures. */
typedef struct scale_run {
    scale sc;
    double kill_at; /* 0: no kill */
    bool keep;
    char log1[700], log2[700], ckpt[700];
    int64_t *in_end;    /* the input's high watermarks once loaded */
    h_proc *st;         /* the running stage, or NULL */
    unsigned port;      /* its /metrics port */
    sample prev, cur;   /* the last row printed, the last sample */
    double t0;          /* the first run's spawn */
    double t_first_in;  /* its first record consumed */
    double in_before;   /* records_in of the killed run */
    double target_in;   /* records_in of the last run once it consumed all */
    double t_all_in;    /* when it did */
    bool killed;        /* killed and restarted, or no kill asked for */
    long hwm1, hwm2;    /* peak RSS of the killed and the last run, KiB */
    double t_kill, t_restart, t_restored, w_restart, t_end;
} scale_run;

/* One option from getopt_long: -1 to go on, else main's exit status. */
static int parse_option(int c, char *arg, scale_run *r, uint64_t *n,
                        uint64_t *k, uint64_t *parts)
{
    char *end;
    switch (c) {
    case 'B':
        r->sc.bootstrap = arg;
        return -1;
    case 'n':
        return bench_count_opt(arg, 1000, 1000000000, n,
                               "--records: 1000 to 1e9") ? -1 : 2;
    case 'k':
        return bench_count_opt(arg, 1, 4000000000u, k, "--keys: 1 to 4e9")
                   ? -1 : 2;
    case 'p':
        return bench_count_opt(arg, 1, 1000, parts,
                               "--partitions: 1 to 1000") ? -1 : 2;
    case 'K':
        r->kill_at = strtod(arg, &end);
        if (*end || r->kill_at < 0 || r->kill_at >= 1)
            return fprintf(stderr, "--kill-at: 0 (none) or a fraction "
                           "below 1\n"), 2;
        return -1;
    case 's':
        r->sc.bloomstage = arg;
        return -1;
    case 'e':
        r->keep = true;
        return -1;
    case 'X':
        r->sc.xs[r->sc.nx++] = arg;
        return -1;
    default:
        return bench_usage(c, USAGE);
    }
}

/* The command line into r, checked: -1 to go on, else main's exit
 * status. */
static int parse_args(int argc, char **argv, scale_run *r)
{
    static const struct option opts[] = {
        {"bootstrap", required_argument, NULL, 'B'},
        {"records", required_argument, NULL, 'n'},
        {"keys", required_argument, NULL, 'k'},
        {"partitions", required_argument, NULL, 'p'},
        {"kill-at", required_argument, NULL, 'K'},
        {"bloomstage", required_argument, NULL, 's'},
        {"keep", no_argument, NULL, 'e'},
        {"help", no_argument, NULL, 'h'},
        {0, 0, 0, 0}};
    uint64_t n = 20000000, k = 10000000, parts = 10;
    r->kill_at = 0.5;
    r->sc.bloomstage = getenv("BLOOMSTAGE_BIN");
    r->sc.xs = calloc((size_t)argc, sizeof(char *));
    int c, rc;
    while ((c = getopt_long(argc, argv, "hX:", opts, NULL)) != -1)
        if ((rc = parse_option(c, optarg, r, &n, &k, &parts)) >= 0)
            return rc;
    if (!r->sc.bootstrap || optind < argc || k > n) {
        fputs(USAGE, stderr);
        return 2;
    }
    if (strncmp(r->sc.bootstrap, "127.", 4) &&
        strncmp(r->sc.bootstrap, "localhost:", 10))
        return fprintf(stderr, "--bootstrap: loopback only\n"), 2;
    if (!r->sc.bloomstage || !*r->sc.bloomstage)
        r->sc.bloomstage = BENCH_BLOOMSTAGE_PATH;
    if (!*r->sc.bloomstage || access(r->sc.bloomstage, X_OK) != 0)
        return fprintf(stderr, "bench_scale: no bloomstage binary: "
                       "--bloomstage PATH\n"), 2;
    r->sc.n = n;
    r->sc.k = (uint32_t)k;
    r->sc.nparts = (int32_t)parts;
    return -1;
}

static void catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* The work directory under $TMPDIR (or /tmp) and the paths in it. */
static int make_workdir(scale_run *r)
{
    scale *sc = &r->sc;
    const char *tmp = getenv("TMPDIR");
    snprintf(sc->dir, sizeof(sc->dir), "%s/bench-scale.XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(sc->dir))
        return fail("mkdtemp: %s", strerror(errno));
    snprintf(sc->conf, sizeof(sc->conf), "%s/bloomstage.conf", sc->dir);
    snprintf(r->log1, sizeof(r->log1), "%s/bloomstage-1.log", sc->dir);
    snprintf(r->log2, sizeof(r->log2), "%s/bloomstage-2.log", sc->dir);
    snprintf(r->ckpt, sizeof(r->ckpt), "%s/checkpoints", sc->dir);
    return 0;
}

/* The query client, and scale-in and scale-out created. */
static int create_topics(scale *sc)
{
    sc->q = h_query_client(h_conf_pairs(NULL, "bootstrap.servers",
                                        sc->bootstrap, "client.id",
                                        "bench-scale-query", NULL));
    if (!sc->q)
        return fail("query client: %s", h_last_error());
    const char *names[] = {T_IN, T_OUT};
    /* Nothing deleted by time or size: the stage must see every record
     * (the broker's data stays a few GB at 20M records). */
    const char *cfg[] = {"retention.ms", "-1", "retention.bytes", "-1",
                         NULL};
    char err[512];
    if (bk_create_topics(sc->bootstrap, names, 2, sc->nparts, cfg, err,
                         sizeof(err)))
        return fail("%s", err);
    return 0;
}

/* The input loaded into scale-in, and its high watermarks noted. */
static int load(scale_run *r)
{
    scale *sc = &r->sc;
    uint32_t *order = make_order(sc->n, sc->k);
    if (!order)
        return fail("out of memory");
    printf("loading %s...\n", T_IN);
    int rc = load_input(sc->bootstrap, order, sc->n, sc->k, sc->nparts,
                        sc->q);
    free(order);
    if (rc)
        return -1;
    r->in_end = calloc((size_t)sc->nparts, sizeof(int64_t));
    if (!r->in_end || h_offsets(sc->q, T_IN, sc->nparts,
                                RD_KAFKA_OFFSET_END, r->in_end, 10000))
        return fail("%s: cannot read the high watermarks", T_IN);
    return 0;
}

/* The stage's configuration file: dedup on the key, exactly_once. */
static int write_conf(const scale_run *r)
{
    const scale *sc = &r->sc;
    FILE *f = fopen(sc->conf, "w");
    if (!f)
        return fail("%s: %s", sc->conf, strerror(errno));
    fprintf(f,
            "# bench_scale: dedup on the record key, exactly_once, the\n"
            "# product's defaults otherwise (checkpoints every 5 s or 1M\n"
            "# records, into a directory).\n"
            "kafka.bootstrap.servers=%s\n"
            "input.topics=" T_IN "\n"
            "output.topic=" T_OUT "\n"
            "consumer.group.id=" GROUP "\n"
            "processing.guarantee=exactly_once\n"
            "dedup.key=key\n"
            "dedup.fpr=%g\n"
            "checkpoint.dir=%s\n"
            "metrics.listen=127.0.0.1:0\n"
            "log.level=info\n"
            "log.stats.interval.ms=10000\n"
            "producer.topic.metadata.refresh.interval.ms=100\n",
            sc->bootstrap, FPR, r->ckpt);
    if (fclose(f) != 0)
        return fail("%s: %s", sc->conf, strerror(errno));
    return 0;
}

/* A stage spawned on the run's config, its log at log_path, and its
 * /metrics port; `what` names it in the message if it opens none. */
static int spawn_stage(scale_run *r, const char *log_path, const char *what)
{
    r->st = stage_spawn(&r->sc, log_path);
    if (!r->st)
        return -1;
    r->port = wait_port(r->st, log_path);
    if (!r->port) {
        fail("%s did not open /metrics", what);
        print_tail(log_path);
        return -1;
    }
    return 0;
}

/* The first run: spawned, its /metrics port, the rows' header. */
static int start_first(scale_run *r)
{
    printf("\nrun 1: bloomstage run (exactly_once)%s\n",
           r->kill_at > 0 ? ", kill -9 part way" : "");
    r->t0 = h_now_s();
    if (spawn_stage(r, r->log1, "bloomstage"))
        return -1;
    print_rows_header();
    return 0;
}

/* kill -9 of the first run once its records_in reached kill_at * n. */
static int kill_stage(scale_run *r)
{
    r->hwm1 = h_proc_status_kib(h_process_pid(r->st), "VmHWM");
    print_sample(r->t_first_in, &r->cur, &r->prev, r->in_before);
    h_process_kill(r->st, SIGKILL);
    int status;
    if (h_process_wait(r->st, 10000, &status))
        return fail("bloomstage survived SIGKILL?");
    h_process_free(r->st);
    r->st = NULL;
    r->t_kill = h_now_s();
    r->in_before = r->cur.in;
    printf("  kill -9 at records_in=%.0f (%.1f s into the run; "
           "peak RSS %.1f MiB); restarting\n", r->cur.in,
           r->t_kill - r->t_first_in, (double)r->hwm1 / 1024);
    r->killed = true;
    return 0;
}

/* The restarted stage's first record consumed: /metrics every 10 ms. */
static int wait_restored(scale_run *r)
{
    for (;;) {
        if (!alive(r->st)) {
            fail("the restarted bloomstage exited");
            print_tail(r->log2);
            return -1;
        }
        double t = h_now_s();
        double in = bk_metric(r->port, "bloomstage_records_in_total");
        if (in > 0) {
            r->t_restored = t;
            return 0;
        }
        if (t - r->t_restart > 600) {
            fail("no record consumed 600 s after the restart");
            print_tail(r->log2);
            return -1;
        }
        h_sleep_ms(10);
    }
}

/* Where the restore's time went, from the restarted stage's log. */
static void print_restore(const scale_run *r, double resume)
{
    double w_started = log_time(r->log2, "msg=started"),
           w_assigned = log_time(r->log2, "msg=\"partition assigned\""),
           w_replayed = log_time(r->log2, "msg=\"output tail replayed\"");
    printf("  restored: first record consumed %.2f s after the "
           "restart's spawn:\n", r->t_restored - r->t_restart);
    if (w_started > 0 && w_assigned > 0)
        printf("    %.2f s to \"started\", %.2f s more to \"partition "
               "assigned\" (the group rebalance: without\n"
               "    group.instance.id the killed member holds its "
               "partitions until its session.timeout.ms runs out),\n"
               "    %.2f s more to \"output tail replayed\",\n"
               "    %.2f s more to the first record consumed\n",
               w_started - r->w_restart, w_assigned - w_started,
               w_replayed > 0 ? w_replayed - w_assigned : 0,
               (r->t_restored - r->t_restart) -
                   ((w_replayed > 0 ? w_replayed : w_assigned) -
                    r->w_restart));
    printf("  it resumes from the checkpoints at %.0f records "
           "(%.0f consumed before the kill: %.0f to redo)\n",
           resume, r->in_before, r->in_before - resume);
    print_lines(r->log2, "msg=\"output tail replayed\"", 3);
    print_lines(r->log2, "msg=\"partition assigned\"", 3);
}

/* A new stage on the same config and checkpoints, timed to its first
 * record consumed; where it resumes sets the records_in to wait for. */
static int restart_stage(scale_run *r)
{
    r->t_restart = h_now_s();
    r->w_restart = h_wall_s();
    if (spawn_stage(r, r->log2, "the restarted bloomstage") ||
        wait_restored(r))
        return -1;
    double resume = resume_offsets(r->log2, r->sc.nparts);
    if (resume < 0)
        return fail("the restarted stage logged fewer than %d \"partition "
                    "assigned\" lines", (int)r->sc.nparts);
    r->target_in = (double)r->sc.n - resume;
    print_restore(r, resume);
    return 0;
}

/* The stage watched through /metrics until all input is committed: a row
 * every 10 s, the kill and the restart on the way. */
static int watch(scale_run *r)
{
    memset(&r->prev, 0, sizeof(r->prev));
    r->prev.t = h_now_s();
    r->killed = r->kill_at <= 0;
    r->target_in = (double)r->sc.n; /* this process has consumed it all */
    bool done_all = false;
    uint64_t ticks = 0;
    for (;;) {
        if (interrupted)
            return fail("interrupted");
        if (!alive(r->st)) {
            fail("bloomstage exited unexpectedly");
            print_tail(r->killed && r->t_restart > 0 ? r->log2 : r->log1);
            return -1;
        }
        /* Before the first record and around the kill: every 10 ms. */
        bool fine = r->t_first_in == 0 || (!r->killed);
        h_sleep_ms(fine ? 10 : 1000);
        if (!sample_of(r->port, &r->cur))
            continue;
        if (r->t_first_in == 0 && r->cur.in > 0) {
            r->t_first_in = r->cur.t;
            printf("  first record consumed %.2f s after spawn\n",
                   r->cur.t - r->t0);
            r->prev = r->cur;
            r->prev.in = 0;
        }
        if (!r->killed && r->cur.in >= r->kill_at * (double)r->sc.n) {
            if (kill_stage(r) || restart_stage(r))
                return -1;
            memset(&r->prev, 0, sizeof(r->prev));
            r->prev.t = r->t_restored;
            ticks = 0;
            continue;
        }
        if (r->cur.t - r->prev.t >= 10) {
            print_sample(r->t_first_in, &r->cur, &r->prev, r->in_before);
            r->prev = r->cur;
        }
        if (r->killed && r->t_all_in == 0 && r->cur.in >= r->target_in) {
            r->t_all_in = r->cur.t;
            printf("  every input record consumed %.1f s after the first "
                   "(1 s resolution); waiting for the commit\n",
                   r->t_all_in - r->t_first_in);
        }
        if (r->t_all_in > 0 && ++ticks % 3 == 0) {
            committed_all(&r->sc, r->in_end, &done_all);
            if (done_all)
                return 0;
        }
    }
}

/* SIGTERM: the stage must drain and exit 0. */
static int stop_stage(scale_run *r)
{
    r->t_end = h_now_s();
    print_sample(r->t_first_in, &r->cur, &r->prev, r->in_before);
    r->hwm2 = h_proc_status_kib(h_process_pid(r->st), "VmHWM");
    int status = -1;
    if (h_process_terminate(r->st, 120000, &status) != 0)
        status = -1;
    h_process_free(r->st);
    r->st = NULL;
    if (status < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fail("bloomstage did not drain and exit 0 on SIGTERM (status %d)",
             status);
        print_tail(r->log2);
        return -1;
    }
    printf("  all input committed %.1f s after the first record; stopped "
           "(exit 0)\n", r->t_end - r->t_first_in);
    print_lines(r->killed && r->kill_at > 0 ? r->log2 : r->log1,
                "msg=stopped", 1);
    return 0;
}

/* The summary: throughput, memory, checkpoints, restore and the output
 * against the bound dedup.fpr allows. */
static void print_summary(const scale_run *r, const verdict *v,
                          double lambda, uint64_t bound)
{
    const scale *sc = &r->sc;
    const sample *last = &r->cur;
    bool with_kill = r->kill_at > 0;
    double run1 = with_kill ? r->t_kill - r->t_first_in : 0;
    double run2 = r->t_all_in - (with_kill ? r->t_restored : r->t_first_in);
    printf("\nsummary\n");
    printf("  input               %" PRIu64 " records, %" PRIu32 " distinct "
           "keys, %d partitions\n", sc->n, sc->k, (int)sc->nparts);
    printf("  throughput          %.0f records/s: %" PRIu64 " records over "
           "%.1f s of processing (first record to every record consumed,\n"
           "                      the restore's %.1f s left out, the %.0f "
           "records redone after the kill in)\n",
           (double)sc->n / (run1 + run2), sc->n, run1 + run2,
           with_kill ? r->t_restored - r->t_kill : 0,
           with_kill ? r->in_before + r->target_in - (double)sc->n : 0);
    if (with_kill)
        printf("                      before the kill %.0f/s (%.0f records, "
               "%.1f s), after the restart %.0f/s (%.0f records, %.1f s)\n",
               r->in_before / run1, r->in_before, run1, r->target_in / run2,
               r->target_in, run2);
    printf("  filters' memory     %.1f MiB at the end "
           "(bloomstage_filter_memory_bytes), %.2f bits per key\n",
           last->filter / 1048576.0, 8 * last->filter / (double)sc->k);
    printf("  checkpoints         %.0f rounds after the restart, mean %.0f "
           "ms; last round %.1f MiB\n", last->ckpt_count,
           last->ckpt_count > 0 ? 1e3 * last->ckpt_sum / last->ckpt_count
                                : 0,
           last->ckpt_bytes / 1048576.0);
    printf("  peak RSS            %.1f MiB (killed run), %.1f MiB (restarted "
           "run)\n", (double)r->hwm1 / 1024, (double)r->hwm2 / 1024);
    if (with_kill)
        printf("  restore             %.2f s from the restart's spawn to its "
               "first record consumed\n", r->t_restored - r->t_restart);
    printf("  output              %" PRIu64 " records: %" PRIu64
           " distinct keys, %" PRIu64 " duplicates, %" PRIu64
           " unknown keys\n", v->records, v->distinct, v->dups, v->unknown);
    printf("  wrongly dropped     %" PRIu64 " unique keys missing; dedup.fpr "
           "%g allows on average at most %.1f (K x fpr),\n"
           "                      %" PRIu64 " at the Poisson(%.1f) quantile "
           "exceeded with probability 1e-4: %s\n", v->missing, FPR, lambda,
           bound, lambda, v->missing <= bound ? "within" : "EXCEEDED");
}

/* scale-out read back and judged: 0 when it checks out, else 1. */
static int verify(const scale_run *r)
{
    printf("\nverifying %s...\n", T_OUT);
    verdict v;
    if (read_output(&r->sc, &v))
        return 1;
    double lambda = (double)r->sc.k * FPR;
    uint64_t bound = h_poisson_upper(lambda, 1e-4);
    print_summary(r, &v, lambda, bound);
    int rc = 0;
    if (v.unknown)
        rc = fail("the output holds %" PRIu64 " keys that are not in the "
                  "input", v.unknown);
    if (v.dups)
        rc = fail("the output holds %" PRIu64 " duplicate keys "
                  "(exactly_once across a kill -9 must leave none)", v.dups);
    if (v.missing > bound)
        rc = fail("%" PRIu64 " unique keys missing, more than the bound %"
                  PRIu64, v.missing, bound);
    return rc ? 1 : 0;
}

/* What the run leaves: the stage stopped, the work directory removed after
 * a success unless --keep, the memory freed. */
static void finish(scale_run *r, int rc)
{
    if (r->st) {
        int s2;
        if (h_process_terminate(r->st, 30000, &s2) != 0)
            fprintf(stderr, "bench_scale: bloomstage had to be killed\n");
        h_process_free(r->st);
    }
    free(r->in_end);
    if (r->sc.q)
        rd_kafka_destroy(r->sc.q);
    if (rc == 0 && !r->keep) {
        if (h_tmpdir_remove(r->sc.dir))
            fprintf(stderr, "bench_scale: could not remove %s\n", r->sc.dir);
    } else {
        fprintf(stderr, "bench_scale: work directory kept: %s\n", r->sc.dir);
    }
    free(r->sc.xs);
}

int main(int argc, char **argv)
{
    scale_run r;
    memset(&r, 0, sizeof(r));
    int rc = parse_args(argc, argv, &r);
    if (rc >= 0)
        return rc;
    catch_signals();
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (make_workdir(&r))
        return 1;
    printf("bench_scale: %" PRIu64 " records, %" PRIu32 " distinct keys, %d "
           "partitions, real broker at %s\n", r.sc.n, r.sc.k,
           (int)r.sc.nparts, r.sc.bootstrap);
    printf("  work dir %s\n", r.sc.dir);
    rc = 1;
    if (!create_topics(&r.sc) && !load(&r) && !write_conf(&r) &&
        !start_first(&r) && !watch(&r) && !stop_stage(&r))
        rc = verify(&r);
    finish(&r, rc);
    return rc;
}
