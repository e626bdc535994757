/*
 * txn.c -- bench_txn: what exactly_once by Kafka transactions costs in
 * rate and in latency, on a real Apache Kafka broker (bench/txn: this
 * starts a 1-node one with scripts/kafka, or --bootstrap LIST uses one that
 * runs).
 *
 *   bench_txn [--records N] [--rate R] [--seconds S] [--no-latency]
 *             [--intervals MS,MS,...] [--rounds K]
 *             [--breakdown MS,MS,...] [--stores dir,kafka]
 *             [--overlap on|off|both] [--bootstrap LIST] [--bloomstage PATH]
 *
 * Every configuration with transactions runs with exactly_once.overlap
 * as --overlap says: on (the default), off, or both, the second labelled
 * txn-no-overlap; both puts the two side by side in one run.  With
 * --streams-cp (bench/txn --streams) the latency is measured for Kafka
 * Streams too (kafka-streams: bench/streams' Dedup, exactly_once_v2,
 * commit.interval.ms at each interval, fed once it says it runs), the
 * same way: its output keeps the input's timestamps.
 *
 * Rate: for each round, N records (each key twice) are loaded into a fresh
 * input, then `bloomstage run` (checkpoint.interval.ms=1000) with
 * at_least_once, exactly_once by replay and by transactions; the rate is N
 * over the time from its assignment until the group's committed offsets
 * reach the input's end (with transactions the output is then visible);
 * the commits come once a second, so N should take several seconds.
 *
 * Latency: for each round and each configuration -- at_least_once and
 * replay with a 1000 ms checkpoint interval (the baselines: their output
 * is visible as soon as it is produced), then
 * exactly_once.method=transactions with each checkpoint interval -- it
 * creates an input and an output topic (4 partitions),
 * starts `bloomstage run` on them, and once the stage has its partitions
 * appends R records/s of distinct keys for S seconds, each with its append
 * time as the record timestamp (which the stage forwards).  A
 * read_committed consumer on the output takes each record's latency: the
 * time it was read minus its timestamp (one clock: all on this machine),
 * except for the records of the first WARMUP_S seconds (the clients'
 * start-up; they are checked like the others); the first is appended once
 * that consumer has the output's partitions.  Runs not counted warm a
 * fresh broker up first (its first idempotent and transactional
 * producers wait seconds for their ids while it loads its internal
 * topics): see main.  The stage learns its
 * output's partitions within 0.1 s, as in bench/e2e.
 * It prints p50, p99 and the maximum per configuration and round, and the
 * median over rounds; every record of the input must arrive once.
 *
 * Breakdown (--breakdown MS,...): where a round's time goes under load.
 * For each round, each of those checkpoint intervals and each checkpoint
 * store of --stores, a rate run as above with exactly_once by
 * transactions and log.level=debug; the stage's `msg=checkpoint` lines
 * (one per round: each phase's seconds, BS_ROUND_PHASES in
 * stage/base/counters.h, the round's and the time since the round before)
 * give, per run, each phase's median and p99 over its rounds (the first
 * round, which holds the partitions' first checkpoints, left out) and
 * its share of the round and of the cycle (round + the time between
 * rounds, when records are consumed and produced; during a round the
 * stage consumes nothing), and the rate between rounds (their records
 * over the time between them).  The summary is the median over runs with
 * the spread.
 *
 * Rollback (--rollbacks K, 0 to skip): what ending an open transaction
 * costs the way the stage's rollback ends it -- the producer replaced:
 * purged, destroyed, a new one's init_transactions and
 * begin_transaction, as stage/clients/clients.c does -- against librdkafka's
 * abort_transaction and begin_transaction (the baseline), on one
 * transactional id each, K times each way in turn.  Each transaction
 * holds RB_RECORDS delivered records over NPARTS partitions, as a round's
 * output does when its commit fails.  It prints the median and the
 * spread of each way and of their ratio.
 *
 * Owns its topics and its stage processes; the broker is the support
 * layer's (harness/realkafka.h) when it starts one.
 */
#include "support.h"
#include "base/counters.h"
#include "base/timeouts.h"

#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NPARTS 4
#define MAX_CONF 16
#define MAX_ROUNDS 9
#define WARMUP_S 3.0 /* latency: the first seconds' records not timed */
#define WARM_MAX 6        /* latency: warm-up runs, at most */
#define WARM_P50_MS 100.0 /* latency: a warm broker's at_least_once p50 */
#define RB_RECORDS 1000 /* rollback: in each transaction ended */
#define RB_MAX 50       /* rollback: most times each way */
#define BD_MAX 32       /* breakdown: most configurations */

/* Breakdown: the columns of a round read from its `msg=checkpoint` line:
 * the stage's phases, then the whole round and the time before it. */
static const char *const bd_key[] = {
#define BD_X_KEY(id, name) name "_seconds",
    BS_ROUND_PHASES(BD_X_KEY)
#undef BD_X_KEY
    "seconds", "between_seconds"};
static const char *const bd_name[] = {
#define BD_X_NAME(id, name) name,
    BS_ROUND_PHASES(BD_X_NAME)
#undef BD_X_NAME
    "(round)", "(between)"};
#define BD_NCOL (BS_NPHASES + 2)
#define BD_ROUND BS_NPHASES         /* the column of the whole round */
#define BD_BETWEEN (BS_NPHASES + 1) /* and of the time before it */

/* One run's breakdown: over its rounds, each column's median and p99 (s),
 * its share of the rounds' time and of the cycles' (round + between). */
enum { BD_MED, BD_P99, BD_OF_ROUND, BD_OF_CYCLE, BD_NFIG };
typedef struct bd_run {
    size_t rounds;
    double records;    /* per round, median */
    double running;    /* records/s between rounds: their records over
                          the time between them */
    double fig[BD_NFIG][BD_NCOL];
} bd_run;

typedef struct conf {
    const char *method; /* exactly_once.method; NULL: at_least_once */
    int interval_ms;
    bool rate_too;      /* also in the rate comparison */
    const char *store;  /* breakdown: checkpoint.store; NULL: not one */
    bool no_overlap;    /* transactions with exactly_once.overlap=false */
    bool streams;       /* Kafka Streams' Dedup instead of bloomstage:
                           exactly_once_v2, commit.interval.ms the
                           interval */
    double p50[MAX_ROUNDS], p99[MAX_ROUNDS], max[MAX_ROUNDS];
    double rate[MAX_ROUNDS];
    bd_run bd[MAX_ROUNDS];
} conf;

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, int n)
{
    double s[MAX_ROUNDS];
    memcpy(s, v, (size_t)n * sizeof(*s));
    return h_sort_median(s, (size_t)n);
}

/* Topics NAME-in and NAME-out, and `bloomstage run` on them as the
 * configuration says, assigned its partitions.  0, or -1 with a message. */
typedef struct stage_run {
    char in[64], out[64], group[64];
    char *log_path;
    h_proc *proc;
    bool streams; /* Kafka Streams: a SIGTERM ends its JVM with 143 */
} stage_run;

static int stage_setup(stage_run *r, const char *bs, const char *name)
{
    memset(r, 0, sizeof(*r));
    snprintf(r->in, sizeof(r->in), "%s-in", name);
    snprintf(r->out, sizeof(r->out), "%s-out", name);
    snprintf(r->group, sizeof(r->group), "%s", name);
    if (h_create_topic(bs, r->in, NPARTS, 1, NULL) ||
        h_create_topic(bs, r->out, NPARTS, 1, NULL)) {
        fprintf(stderr, "bench_txn: %s\n", h_last_error());
        return -1;
    }
    return 0;
}

/* r's process logs `needle` within 120 s.  0, or -1 with a message. */
static int wait_said(stage_run *r, const char *needle)
{
    for (double t0 = h_now_s();;) {
        char *l = NULL;
        size_t llen = 0;
        bool ok = h_read_file(r->log_path, &l, &llen) == 0 && l &&
                  strstr(l, needle);
        free(l);
        if (ok)
            return 0;
        int st;
        if (h_process_wait(r->proc, 0, &st) == 0 || h_now_s() - t0 > 120) {
            fprintf(stderr, "bench_txn: no '%s' from the process (log %s)\n",
                    needle, r->log_path);
            return -1;
        }
        h_nap(20);
    }
}

/* The classpath of bench/streams (bench/txn --streams: `bench/streams/run
 * --build` prints it); NULL: no Kafka Streams contestant. */
static const char *streams_cp;

/* Kafka Streams' Dedup (bench/streams) on r's topics with exactly_once_v2
 * and commit.interval.ms the interval, running (its tasks assigned: it
 * says `dedup running`).  0, or -1 with a message. */
static int streams_start(stage_run *r, const char *bs, const char *dir,
                         const conf *c)
{
    char *state = h_strdupf("%s/%s-state", dir, r->group);
    char ms[32];
    snprintf(ms, sizeof(ms), "%d", c->interval_ms);
    r->log_path = h_strdupf("%s/%s.log", dir, r->group);
    char *const argv[] = {"java", "-cp", (char *)streams_cp,
                          "org.bloomstage.bench.streams.Dedup",
                          "--bootstrap", (char *)bs, "--input", r->in,
                          "--output", r->out, "--application-id", r->group,
                          "--guarantee", "exactly_once_v2", "--state-dir",
                          state, "--commit-interval-ms", ms, NULL};
    h_spawn_opts so = {.log_path = r->log_path};
    int rc = h_process_spawn_opts(argv, &so, &r->proc);
    free(state);
    if (rc) {
        fprintf(stderr, "bench_txn: cannot start Kafka Streams: %s\n",
                h_last_error());
        return -1;
    }
    return 0;
}

static int stage_start(stage_run *r, const char *bs, const char *bin,
                       const char *dir, const conf *c)
{
    if (c->streams) {
        r->streams = true;
        if (streams_start(r, bs, dir, c))
            return -1;
        return wait_said(r, "dedup running");
    }
    char *conf_path = h_strdupf("%s/%s.conf", dir, r->group);
    char *text = h_strdupf(
        "input.topics=%s\noutput.topic=%s\nconsumer.group.id=%s\n"
        "kafka.bootstrap.servers=%s\ncheckpoint.dir=%s/%s\n"
        "checkpoint.interval.ms=%d\nprocessing.guarantee=%s\n"
        "exactly_once.method=%s\nexactly_once.overlap=%s\n"
        "consumer.fetch.wait.max.ms=10\nlog.stats.interval.ms=0\n"
        /* the first-record lag (bench/e2e.c): the output topic's
         * partitions learnt within 0.1 s */
        "producer.topic.metadata.refresh.interval.ms=100\n"
        /* breakdown: the store, and a `msg=checkpoint` line per round */
        "checkpoint.store=%s\nlog.level=%s\n",
        r->in, r->out, r->group, bs, dir, r->group, c->interval_ms,
        c->method ? "exactly_once" : "at_least_once",
        c->method ? c->method : "auto", c->no_overlap ? "false" : "true",
        c->store ? c->store : "dir",
        c->store ? "debug" : "info");
    int rc = h_write_file(conf_path, text);
    free(text);
    if (rc) {
        fprintf(stderr, "bench_txn: %s\n", h_last_error());
        free(conf_path);
        return -1;
    }
    r->log_path = h_strdupf("%s/%s.log", dir, r->group);
    char *const argv[] = {(char *)bin, "run", "-c", conf_path, NULL};
    h_spawn_opts so = {.log_path = r->log_path};
    rc = h_process_spawn_opts(argv, &so, &r->proc);
    free(conf_path);
    if (rc) {
        fprintf(stderr, "bench_txn: cannot start the stage: %s\n",
                h_last_error());
        return -1;
    }
    /* The stage has its partitions: its log says so. */
    return wait_said(r, "msg=\"partition assigned\"");
}

/* SIGTERM: it must drain and exit 0.  0 or -1. */
static int stage_stop(stage_run *r)
{
    int rc = 0;
    if (r->proc) {
        int st = 0;
        if (h_process_terminate(r->proc, 30000, &st) != 0 || !WIFEXITED(st) ||
            WEXITSTATUS(st) != (r->streams ? 143 : 0)) {
            fprintf(stderr, "bench_txn: the stage did not stop cleanly (log "
                    "%s)\n", r->log_path);
            rc = -1;
        }
        h_process_free(r->proc);
    }
    free(r->log_path);
    memset(r, 0, sizeof(*r));
    return rc;
}

static void conf_name(const conf *c, int round, const char *phase,
                      char *buf, size_t size)
{
    snprintf(buf, size, "bt-%s-%s%s%d-%d", phase,
             c->streams ? "streams" : c->method ? c->method : "alo",
             c->no_overlap ? "-seq" : "",
             c->interval_ms, round);
}

/* The median and the p99 of v[0..n) (sorted in place). */
static void bd_quantiles(double *v, size_t n, double *med, double *p99)
{
    *med = h_sort_median(v, n);
    *p99 = v[(n * 99) / 100];
}

/* out's figures from n rounds' rows v[i * BD_NCOL + column] and their
 * records rec[0..n); col has room for n. */
static void bd_figures(const double *v, double *rec, double *col, size_t n,
                       bd_run *out)
{
    double sum[BD_NCOL] = {0}, records = 0;
    memset(out, 0, sizeof(*out));
    out->rounds = n;
    for (size_t i = 0; i < n; i++)
        records += rec[i];
    for (int k = 0; k < BD_NCOL; k++) {
        for (size_t i = 0; i < n; i++)
            sum[k] += col[i] = v[i * BD_NCOL + k];
        bd_quantiles(col, n, &out->fig[BD_MED][k], &out->fig[BD_P99][k]);
    }
    double cycle = sum[BD_ROUND] + sum[BD_BETWEEN], unused;
    out->running = sum[BD_BETWEEN] > 0 ? records / sum[BD_BETWEEN] : 0;
    for (int k = 0; k < BD_NCOL; k++) {
        out->fig[BD_OF_ROUND][k] =
            sum[BD_ROUND] > 0 ? sum[k] / sum[BD_ROUND] : 0;
        out->fig[BD_OF_CYCLE][k] = cycle > 0 ? sum[k] / cycle : 0;
    }
    bd_quantiles(rec, n, &out->records, &unused);
}

/* The breakdown of the stage's log at path: its `msg=checkpoint` lines of
 * reason=trigger but the first (it holds the partitions' first
 * checkpoints).  0, or -1 with a message. */
static int bd_read(const char *path, bd_run *out)
{
    char *text = NULL;
    if (h_read_file(path, &text, NULL) || !text) {
        fprintf(stderr, "bench_txn: %s: %s\n", path, h_last_error());
        return -1;
    }
    size_t cap = 0, n = 0;
    double *v = NULL, *rec = NULL;
    bool first = true, oom = false;
    for (const char *l = text; !oom && l && *l;
         l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        char *line = h_strdupf("%.*s", (int)len, l);
        double row[BD_NCOL];
        bool take = strstr(line, " msg=checkpoint reason=trigger ") != NULL;
        if (take && first)
            take = first = false;
        for (int k = 0; take && k < BD_NCOL; k++)
            take = !isnan(row[k] = h_log_double(line, bd_key[k]));
        if (take && n == cap) {
            cap = cap ? cap * 2 : 256;
            double *nv = realloc(v, cap * BD_NCOL * sizeof(*v));
            v = nv ? nv : v;
            double *nr = nv ? realloc(rec, cap * sizeof(*rec)) : NULL;
            rec = nr ? nr : rec;
            oom = !nv || !nr;
        }
        if (take && !oom) {
            memcpy(v + n * BD_NCOL, row, sizeof(row));
            rec[n++] = (double)h_log_int(line, "records");
        }
        free(line);
    }
    free(text);
    double *col = n && !oom ? malloc(n * sizeof(*col)) : NULL;
    int rc = col ? 0 : -1;
    if (rc)
        fprintf(stderr, "bench_txn: %s: %s\n", path, oom || n ? "out of "
                "memory" : "no `msg=checkpoint reason=trigger` rounds past "
                "the first");
    else
        bd_figures(v, rec, col, n, out);
    free(col);
    free(v);
    free(rec);
    return rc;
}

/* Rate: n records (each key twice, the second copy later) loaded first,
 * then the stage started; from its assignment until the group's committed
 * offsets reach the input's end (with transactions: the output committed
 * and visible).  A breakdown configuration (c->store) also reads its
 * rounds from the stage's log. */
static int rate_one(const char *bs, const char *bin, const char *dir,
                    conf *c, int round, size_t n)
{
    char name[64];
    conf_name(c, round, c->store ? c->store : "rate", name, sizeof(name));
    stage_run r;
    if (stage_setup(&r, bs, name))
        return -1;
    rd_kafka_conf_t *pc = h_kafka_conf(bs);
    rd_kafka_conf_set(pc, "linger.ms", "20", NULL, 0);
    rd_kafka_t *prod = rd_kafka_new(RD_KAFKA_PRODUCER, pc, NULL, 0);
    if (!prod)
        return -1;
    size_t half = (n + 1) / 2;
    for (size_t i = 0; i < n; i++) {
        size_t k = i < half ? i : i - half;
        char key[32];
        int klen = snprintf(key, sizeof(key), "k%09zu", k);
        while (rd_kafka_producev(prod, RD_KAFKA_V_TOPIC(r.in),
                                 RD_KAFKA_V_PARTITION((int32_t)(k % NPARTS)),
                                 RD_KAFKA_V_KEY(key, (size_t)klen),
                                 RD_KAFKA_V_VALUE(key, (size_t)klen),
                                 RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                 RD_KAFKA_V_END) ==
               RD_KAFKA_RESP_ERR__QUEUE_FULL)
            rd_kafka_poll(prod, 10);
    }
    rd_kafka_flush(prod, 60000);
    int64_t end[NPARTS];
    for (int p = 0; p < NPARTS; p++) {
        int64_t lo;
        if (rd_kafka_query_watermark_offsets(prod, r.in, p, &lo, &end[p],
                                             10000)) {
            rd_kafka_destroy(prod);
            return -1;
        }
    }
    rd_kafka_destroy(prod);
    int rc = stage_start(&r, bs, bin, dir, c);
    double t0 = h_now_s();
    while (rc == 0) {
        int64_t got[NPARTS];
        bool done = h_committed(bs, r.group, r.in, NPARTS, got) == 0;
        for (int p = 0; done && p < NPARTS; p++)
            done = got[p] == end[p];
        if (done)
            break;
        if (h_now_s() - t0 > 600) {
            fprintf(stderr, "bench_txn: %s: not committed to the end in "
                    "600 s\n", name);
            rc = -1;
        }
        h_nap(20);
    }
    double dt = h_now_s() - t0;
    char *log = r.log_path ? h_strdupf("%s", r.log_path) : NULL;
    if (stage_stop(&r))
        rc = -1;
    if (rc == 0)
        c->rate[round] = (double)n / dt;
    if (rc == 0 && c->store)
        rc = bd_read(log, &c->bd[round]);
    free(log);
    return rc;
}

/* cons has its assignment (every partition of topic): polled up to 60 s.
 * 0, or -1 with a message. */
static int reader_assigned(rd_kafka_t *cons, const char *topic)
{
    for (double t0 = h_now_s(); h_now_s() - t0 < 60;)
        if (h_member_poll(cons, 100) == NPARTS)
            return 0; /* nothing is appended yet: nothing polled is lost */
    fprintf(stderr, "bench_txn: the reader of %s has no assignment after "
            "60 s\n", topic);
    return -1;
}

/* Latency: rate records/s appended for `seconds` while the stage runs. */
static int latency_one(const char *bs, const char *bin, const char *dir,
                       conf *c, int round, double rate, double seconds,
                       const char *phase)
{
    char name[64];
    conf_name(c, round, phase, name, sizeof(name));
    stage_run r;
    if (stage_setup(&r, bs, name))
        return -1;
    int rc = -1;
    rd_kafka_t *prod = NULL, *cons = NULL;
    size_t total = (size_t)(rate * seconds);
    int64_t *lat = calloc(total ? total : 1, sizeof(*lat));
    uint8_t *seen = calloc(total ? total : 1, 1);
    if (!lat || !seen || stage_start(&r, bs, bin, dir, c))
        goto out;
    rd_kafka_conf_t *pc = h_kafka_conf(bs);
    rd_kafka_conf_set(pc, "linger.ms", "0", NULL, 0);
    prod = rd_kafka_new(RD_KAFKA_PRODUCER, pc, NULL, 0);
    rd_kafka_conf_t *cc = h_kafka_conf(bs);
    char cgroup[80];
    snprintf(cgroup, sizeof(cgroup), "%s-reader", r.group);
    rd_kafka_conf_set(cc, "group.id", cgroup, NULL, 0);
    rd_kafka_conf_set(cc, "auto.offset.reset", "earliest", NULL, 0);
    rd_kafka_conf_set(cc, "isolation.level", "read_committed", NULL, 0);
    rd_kafka_conf_set(cc, "fetch.wait.max.ms", "10", NULL, 0);
    cons = rd_kafka_new(RD_KAFKA_CONSUMER, cc, NULL, 0);
    if (!prod || !cons) {
        fprintf(stderr, "bench_txn: cannot create the clients\n");
        goto out;
    }
    rd_kafka_poll_set_consumer(cons);
    rd_kafka_topic_partition_list_t *sub = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(sub, r.out, RD_KAFKA_PARTITION_UA);
    rd_kafka_subscribe(cons, sub);
    rd_kafka_topic_partition_list_destroy(sub);
    /* The reader has the output's partitions before the first record is
     * appended: a group join still under way would add its wait to the
     * first records' latency, past the warm-up on a loaded machine. */
    if (reader_assigned(cons, r.out) != 0)
        goto out;
    size_t sent = 0, got = 0, nlat = 0;
    double start = h_now_s(), deadline = start + seconds + 60;
    while (got < total && h_now_s() < deadline) {
        double now = h_now_s();
        while (sent < total && sent < (size_t)((now - start) * rate)) {
            char key[32];
            int klen = snprintf(key, sizeof(key), "k%09zu", sent);
            int64_t ts = (int64_t)(h_wall_s() * 1000);
            rd_kafka_producev(prod, RD_KAFKA_V_TOPIC(r.in),
                              RD_KAFKA_V_PARTITION((int32_t)(sent % NPARTS)),
                              RD_KAFKA_V_KEY(key, (size_t)klen),
                              RD_KAFKA_V_VALUE(key, (size_t)klen),
                              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                              RD_KAFKA_V_TIMESTAMP(ts), RD_KAFKA_V_END);
            sent++;
        }
        rd_kafka_poll(prod, 0);
        rd_kafka_message_t *m = rd_kafka_consumer_poll(cons, 1);
        if (!m)
            continue;
        if (!m->err && m->key_len > 1) {
            int64_t now_ms = (int64_t)(h_wall_s() * 1000);
            size_t i = strtoul((const char *)m->key + 1, NULL, 10);
            if (i < total && !seen[i]++) {
                got++;
                /* Records appended in the first WARMUP_S seconds are
                 * checked, not timed: the clients' start-up. */
                if ((double)i >= WARMUP_S * rate)
                    lat[nlat++] = now_ms - rd_kafka_message_timestamp(m, NULL);
            } else if (i < total) {
                fprintf(stderr, "bench_txn: %s: key %zu twice\n", r.out, i);
                rd_kafka_message_destroy(m);
                goto out;
            }
        }
        rd_kafka_message_destroy(m);
    }
    if (got < total) {
        fprintf(stderr, "bench_txn: %s: %zu of %zu records arrived\n", r.out,
                got, total);
        goto out;
    }
    if (nlat == 0) {
        fprintf(stderr, "bench_txn: --seconds must exceed the %g s "
                "warm-up\n", WARMUP_S);
        goto out;
    }
    qsort(lat, nlat, sizeof(*lat), cmp_i64);
    c->p50[round] = (double)lat[nlat / 2];
    c->p99[round] = (double)lat[(nlat * 99) / 100];
    c->max[round] = (double)lat[nlat - 1];
    rc = 0;
out:
    if (cons) {
        rd_kafka_consumer_close(cons);
        rd_kafka_destroy(cons);
    }
    if (prod) {
        rd_kafka_flush(prod, 10000);
        rd_kafka_destroy(prod);
    }
    if (stage_stop(&r))
        rc = -1;
    free(lat);
    free(seen);
    return rc;
}

static const char USAGE[] =
    "usage: bench_txn [--records N] [--rate R] [--seconds S] [--no-latency]\n"
    "                 [--no-rate] [--intervals MS,MS,...] [--rounds K]\n"
    "                 [--rollbacks K] [--breakdown MS,MS,...]\n"
    "                 [--stores dir,kafka] [--overlap on|off|both]\n"
    "                 [--streams-cp CLASSPATH]\n"
    "                 [--bootstrap LIST] [--bloomstage PATH]\n"
    "On a real Kafka broker: bloomstage's rate with exactly_once by\n"
    "transactions (and by replay) against at_least_once (N records loaded\n"
    "first, checkpoint.interval.ms=1000), and the latency append -> visible\n"
    "to a read_committed consumer (R records/s for S s, the first 3 s not\n"
    "timed) at each checkpoint\n"
    "interval with transactions, against at_least_once and replay; and\n"
    "what a rollback's new producer costs against abort_transaction\n"
    "(K times each way, default 20, 0: not measured).  --breakdown: also,\n"
    "at each of those checkpoint intervals with each checkpoint store, a\n"
    "rate run with transactions whose rounds' phases (the stage's debug\n"
    "log) are summed up: each phase's median and p99, its share of the\n"
    "round and of all the time.  --overlap: transactions with\n"
    "exactly_once.overlap on (the default), off, or both (each\n"
    "transactions configuration twice, txn-no-overlap the second).\n"
    "--streams-cp (bench/txn --streams passes it): the latency of Kafka\n"
    "Streams' Dedup (bench/streams) too, exactly_once_v2 with\n"
    "commit.interval.ms at each interval.\n"
    "Only the breakdown (N large enough for\n"
    "tens of rounds at the longest interval):\n"
    "  bench/txn --breakdown 100,500,1000 --records 6000000 --no-rate\n"
    "      --no-latency --rollbacks 0\n";

static const char *conf_label(const conf *c)
{
    return c->streams       ? "kafka-streams"
           : !c->method     ? "at_least_once"
           : c->no_overlap ? "txn-no-overlap"
                           : c->method;
}

static void spread(const double *v, int n, double *lo, double *hi)
{
    *lo = *hi = v[0];
    for (int i = 1; i < n; i++) {
        *lo = v[i] < *lo ? v[i] : *lo;
        *hi = v[i] > *hi ? v[i] : *hi;
    }
}

/* -- breakdown: where a round's time goes --------------------------------- */

/* The breakdown's configurations: each interval of `intervals` with each
 * store of `stores`, into c[0..BD_MAX).  Their count, or -1. */
static int bd_confs(const char *intervals, const char *stores,
                    const bool *overlaps, conf *c)
{
    int n = 0;
    for (const char *p = intervals; p; p = strchr(p, ','), p = p ? p + 1 : p)
        for (const char *q = stores; q; q = strchr(q, ','),
                        q = q ? q + 1 : q) {
            int ms = atoi(p);
            const char *store = !strncmp(q, "dir", 3) &&
                                        (q[3] == ',' || !q[3])
                                    ? "dir"
                                : !strncmp(q, "kafka", 5) &&
                                        (q[5] == ',' || !q[5])
                                    ? "kafka"
                                    : NULL;
            for (int o = 0; o < 2; o++) {
                if (!overlaps[o])
                    continue;
                if (ms <= 0 || !store || n == BD_MAX)
                    return -1;
                c[n++] = (conf){.method = "transactions", .interval_ms = ms,
                                .store = store, .no_overlap = o == 1};
            }
        }
    return n;
}

/* One breakdown run, in a line. */
static void bd_line(const conf *c, int round)
{
    const bd_run *b = &c->bd[round];
    printf("round %d breakdown %-14s store %-5s interval %5d ms: %8.0f "
           "records/s "
           "(%.0f between rounds), %zu rounds of %.0f records; round %.1f ms, "
           "between %.1f ms (medians); consuming nothing %.0f%% of the "
           "time\n", round + 1, conf_label(c), c->store, c->interval_ms,
           c->rate[round],
           b->running, b->rounds, b->records, b->fig[BD_MED][BD_ROUND] * 1000,
           b->fig[BD_MED][BD_BETWEEN] * 1000,
           b->fig[BD_OF_CYCLE][BD_ROUND] * 100);
}

/* "median (min-max)" of the runs' values of one figure, times scale. */
static void bd_cell(const conf *c, int rounds, int fig, int col,
                    double scale, int decimals)
{
    double v[MAX_ROUNDS] = {0}, lo, hi;
    for (int r = 0; r < rounds; r++)
        v[r] = c->bd[r].fig[fig][col];
    spread(v, rounds, &lo, &hi);
    char cell[64];
    snprintf(cell, sizeof(cell), "%.*f (%.*f-%.*f)", decimals,
             median(v, rounds) * scale, decimals, lo * scale, decimals,
             hi * scale);
    printf(" %-22s", cell);
}

/* A configuration's breakdown, the median of its runs with their spread. */
static void bd_print(const conf *c, int rounds)
{
    double rec[MAX_ROUNDS], nr[MAX_ROUNDS], run[MAX_ROUNDS];
    double lo, hi, lo2, hi2, lo3, hi3;
    for (int r = 0; r < rounds; r++) {
        rec[r] = c->bd[r].records;
        nr[r] = (double)c->bd[r].rounds;
        run[r] = c->bd[r].running;
    }
    spread(c->rate, rounds, &lo, &hi);
    spread(rec, rounds, &lo2, &hi2);
    spread(run, rounds, &lo3, &hi3);
    printf("breakdown, %s, checkpoint.store=%s, "
           "checkpoint.interval.ms=%d: %.0f records/s (%.0f-%.0f); between "
           "rounds %.0f records/s (%.0f-%.0f); %.0f rounds a run, %.0f "
           "records a round (%.0f-%.0f)%s\n", conf_label(c), c->store,
           c->interval_ms,
           median(c->rate, rounds), lo, hi, median(run, rounds), lo3, hi3,
           median(nr, rounds), median(rec, rounds), lo2, hi2,
           c->no_overlap ? ""
                         : "; send_offsets and commit run beside the next "
                           "transaction, outside the round");
    printf("  %-14s %-22s %-22s %-22s %-22s\n", "phase", "median ms",
           "p99 ms", "% of the round", "% of all the time");
    for (int k = 0; k < BD_NCOL; k++) {
        printf("  %-14s", bd_name[k]);
        bd_cell(c, rounds, BD_MED, k, 1000, 1);
        bd_cell(c, rounds, BD_P99, k, 1000, 1);
        if (k == BD_BETWEEN)
            printf(" %-22s", "-");
        else
            bd_cell(c, rounds, BD_OF_ROUND, k, 100, 0);
        bd_cell(c, rounds, BD_OF_CYCLE, k, 100, 0);
        printf("\n");
    }
}

/* -- rollback: a new producer against abort_transaction ------------------ */

/* A transactional producer for `id`, its transactions initialised and one
 * begun; NULL with a message. */
static rd_kafka_t *rb_producer(const char *bs, const char *id)
{
    rd_kafka_conf_t *kc =
        h_conf_pairs(h_kafka_conf(bs), "transactional.id", id, NULL);
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, kc, err, sizeof(err));
    if (!rk) {
        rd_kafka_conf_destroy(kc);
        fprintf(stderr, "bench_txn: producer: %s\n", err);
        return NULL;
    }
    rd_kafka_error_t *e =
        rd_kafka_init_transactions(rk, BS_TIMEOUT_BROKER_MS);
    if (!e)
        e = rd_kafka_begin_transaction(rk);
    if (e) {
        fprintf(stderr, "bench_txn: %s: %s\n", id, rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
        rd_kafka_destroy(rk);
        return NULL;
    }
    return rk;
}

/* RB_RECORDS records into the open transaction, delivered. */
static int rb_fill(rd_kafka_t *rk, const char *topic)
{
    for (int i = 0; i < RB_RECORDS; i++) {
        char key[32];
        snprintf(key, sizeof(key), "k%d", i);
        rd_kafka_resp_err_t err = rd_kafka_producev(
            rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(i % NPARTS),
            RD_KAFKA_V_KEY(key, strlen(key)),
            RD_KAFKA_V_VALUE(key, strlen(key)),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
        if (err) {
            fprintf(stderr, "bench_txn: produce: %s\n",
                    rd_kafka_err2str(err));
            return -1;
        }
    }
    if (rd_kafka_flush(rk, BS_TIMEOUT_BROKER_MS)) {
        fprintf(stderr, "bench_txn: the records were not delivered\n");
        return -1;
    }
    return 0;
}

/* Ends the open transaction and begins the next one, by abort (the
 * baseline) or by a new producer; the seconds it took, or -1. */
static double rb_end(rd_kafka_t **rk, const char *bs, const char *id,
                     bool replace)
{
    double t0 = h_now_s();
    if (replace) {
        rd_kafka_purge(*rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
        rd_kafka_flush(*rk, BS_TIMEOUT_PURGE_FLUSH_MS);
        rd_kafka_destroy(*rk);
        *rk = rb_producer(bs, id);
        return *rk ? h_now_s() - t0 : -1;
    }
    rd_kafka_error_t *e = rd_kafka_abort_transaction(*rk, -1);
    if (!e)
        e = rd_kafka_begin_transaction(*rk);
    if (e) {
        fprintf(stderr, "bench_txn: abort: %s\n", rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
        return -1;
    }
    return h_now_s() - t0;
}

static void rb_print(const char *what, double *v, int n, const char *unit,
                     double scale)
{
    double lo, hi;
    spread(v, n, &lo, &hi);
    printf("  %-34s %8.2f%s (%.2f-%.2f)\n", what,
           h_sort_median(v, (size_t)n) * scale, unit, lo * scale,
           hi * scale);
}

static int rollback_all(const char *bs, int times)
{
    const char *topic = "bench-rollback";
    if (h_create_topic(bs, topic, NPARTS, 1, NULL)) {
        fprintf(stderr, "bench_txn: %s\n", h_last_error());
        return -1;
    }
    rd_kafka_t *ab = rb_producer(bs, "bench-rollback-abort");
    rd_kafka_t *re = ab ? rb_producer(bs, "bench-rollback-replace") : NULL;
    double t_ab[RB_MAX], t_re[RB_MAX], ratio[RB_MAX];
    int rc = re ? 0 : -1;
    for (int i = 0; i < times && rc == 0; i++) {
        if (rb_fill(ab, topic) || (t_ab[i] = rb_end(&ab, bs,
                                       "bench-rollback-abort", false)) < 0 ||
            rb_fill(re, topic) || (t_re[i] = rb_end(&re, bs,
                                       "bench-rollback-replace", true)) < 0)
            rc = -1;
        else
            ratio[i] = t_re[i] / t_ab[i];
    }
    if (rc == 0) {
        printf("rollback: a transaction of %d delivered records over %d "
               "partitions ended and the next begun, %d times each way, "
               "median (min-max):\n", RB_RECORDS, NPARTS, times);
        rb_print("abort_transaction (baseline)", t_ab, times, " ms", 1000);
        rb_print("new producer (the stage's)", t_re, times, " ms", 1000);
        rb_print("ratio new producer / abort", ratio, times, "x", 1);
    }
    if (ab)
        rd_kafka_destroy(ab);
    if (re)
        rd_kafka_destroy(re);
    return rc;
}

int main(int argc, char **argv)
{
    double rate = 2000, seconds = 20;
    size_t records = 1000000;
    int rounds = 3;
    const char *intervals = "100,1000,5000";
    const char *bs = NULL;
    bool latency = true, rate_on = true;
    int rollbacks = 20;
    const char *breakdown = NULL, *stores = "dir,kafka";
    const char *overlap = "on";
    const char *bin = getenv("BLOOMSTAGE_BIN");
    if (!bin)
        bin = BENCH_BLOOMSTAGE_PATH;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(USAGE, stdout);
            return 0;
        }
        if (!strcmp(a, "--no-latency")) {
            latency = false;
            continue;
        }
        if (!strcmp(a, "--no-rate")) {
            rate_on = false;
            continue;
        }
        if (!v) {
            fputs(USAGE, stderr);
            return 2;
        }
        if (!strcmp(a, "--records"))
            records = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--rate"))
            rate = atof(v);
        else if (!strcmp(a, "--seconds"))
            seconds = atof(v);
        else if (!strcmp(a, "--intervals"))
            intervals = v;
        else if (!strcmp(a, "--rounds"))
            rounds = atoi(v);
        else if (!strcmp(a, "--rollbacks"))
            rollbacks = atoi(v);
        else if (!strcmp(a, "--breakdown"))
            breakdown = v;
        else if (!strcmp(a, "--stores"))
            stores = v;
        else if (!strcmp(a, "--overlap"))
            overlap = v;
        else if (!strcmp(a, "--streams-cp"))
            streams_cp = v;
        else if (!strcmp(a, "--bootstrap"))
            bs = v;
        else if (!strcmp(a, "--bloomstage"))
            bin = v;
        else {
            fputs(USAGE, stderr);
            return 2;
        }
        i++;
    }
    if (rate <= 0 || seconds <= 0 || records < 2 || rounds < 1 ||
        rounds > MAX_ROUNDS || rollbacks < 0 || rollbacks > RB_MAX) {
        fputs(USAGE, stderr);
        return 2;
    }
    /* exactly_once.overlap on, off (txn-no-overlap), or both. */
    const bool overlaps[2] = {strcmp(overlap, "off") != 0,
                              strcmp(overlap, "on") != 0};
    if (strcmp(overlap, "on") && strcmp(overlap, "off") &&
        strcmp(overlap, "both")) {
        fputs(USAGE, stderr);
        return 2;
    }
    conf bd[BD_MAX];
    int nbd = breakdown ? bd_confs(breakdown, stores, overlaps, bd) : 0;
    if (nbd < 0) {
        fputs(USAGE, stderr);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    h_env_scrub("BLOOMSTAGE_");
    conf confs[MAX_CONF] = {
        {.method = NULL, .interval_ms = 1000, .rate_too = true},
        {.method = "replay", .interval_ms = 1000, .rate_too = true},
    };
    int nconf = 2;
    for (const char *p = intervals; *p && nconf < MAX_CONF;) {
        for (int o = 0; o < 3 && nconf < MAX_CONF; o++) {
            if (o < 2 ? !overlaps[o] : !streams_cp)
                continue;
            conf *c = &confs[nconf++];
            c->method = "transactions";
            c->no_overlap = o == 1;
            c->streams = o == 2;
            c->interval_ms = atoi(p);
            c->rate_too = c->interval_ms == 1000 && !c->streams;
            if (c->interval_ms <= 0) {
                fputs(USAGE, stderr);
                return 2;
            }
        }
        p = strchr(p, ',');
        if (!p)
            break;
        p++;
    }
    h_kcluster *cluster = NULL;
    if (!bs) {
        if (h_kcluster_start(1, &cluster)) {
            fprintf(stderr, "bench_txn: %s\n", h_last_error());
            return 1;
        }
        bs = h_kcluster_bootstraps(cluster);
    }
    char *dir = NULL;
    if (h_tmpdir_new(&dir)) {
        fprintf(stderr, "bench_txn: %s\n", h_last_error());
        return 1;
    }
    printf("bench_txn: rate: %zu records (each key twice) loaded, then the "
           "stage, checkpoint.interval.ms=1000, until the committed offsets "
           "are the input's end; latency: %g records/s of new keys for %g s, "
           "read (read_committed) - append, the first %g s not timed; %d "
           "partitions, %d rounds\n",
           records, rate, seconds, WARMUP_S, NPARTS, rounds);
    printf("command: bench/txn");
    for (int i = 1; i < argc; i++)
        printf(" %s", argv[i]);
    printf("\n");
    int rc = 0;
    /* A fresh broker's first idempotent and transactional producers wait
     * seconds for their ids while it loads its internal topics: runs not
     * counted, at_least_once and the first configuration with
     * transactions, until at_least_once's p50 is under WARM_P50_MS and the
     * other's under its interval and that (WARM_MAX rounds at most). */
    for (int w = 0; latency && rc == 0 && w < WARM_MAX; w++) {
        bool warm_enough = true;
        for (int k = 0; k < nconf && k <= 2 && rc == 0; k += 2) {
            conf warm = confs[k];
            rc = latency_one(bs, bin, dir, &warm, w, rate, seconds, "warm");
            if (rc)
                break;
            printf("warm-up %d latency %-13s interval %5d ms (not counted): "
                   "p50 %.0f  p99 %.0f ms\n", w + 1, conf_label(&warm),
                   warm.interval_ms, warm.p50[w], warm.p99[w]);
            fflush(stdout);
            warm_enough &= warm.p50[w] <
                           WARM_P50_MS + (warm.method ? warm.interval_ms : 0);
        }
        if (warm_enough)
            break;
    }
    for (int r = 0; r < rounds && rc == 0; r++) {
        for (int k = 0; k < nconf && rc == 0; k++) {
            if (!rate_on || !confs[k].rate_too)
                continue;
            rc = rate_one(bs, bin, dir, &confs[k], r, records);
            if (rc == 0)
                printf("round %d rate    %-13s interval %5d ms: %8.0f "
                       "records/s\n", r + 1, conf_label(&confs[k]),
                       confs[k].interval_ms, confs[k].rate[r]);
            fflush(stdout);
        }
        for (int k = 0; latency && k < nconf && rc == 0; k++) {
            rc = latency_one(bs, bin, dir, &confs[k], r, rate, seconds,
                             "lat");
            if (rc == 0)
                printf("round %d latency %-13s interval %5d ms: p50 %6.0f  "
                       "p99 %6.0f  max %6.0f ms\n", r + 1,
                       conf_label(&confs[k]), confs[k].interval_ms,
                       confs[k].p50[r], confs[k].p99[r], confs[k].max[r]);
            fflush(stdout);
        }
        for (int k = 0; k < nbd && rc == 0; k++) {
            if ((rc = rate_one(bs, bin, dir, &bd[k], r, records)) == 0)
                bd_line(&bd[k], r);
            fflush(stdout);
        }
    }
    if (rc == 0 && (rate_on || latency)) {
        printf("median over %d rounds (min-max):\n", rounds);
        const conf *alo = &confs[0];
        for (int k = 0; k < nconf; k++) {
            const conf *c = &confs[k];
            double lo, hi;
            if (rate_on && c->rate_too) {
                double ratio[MAX_ROUNDS];
                for (int r = 0; r < rounds; r++)
                    ratio[r] = c->rate[r] / alo->rate[r];
                spread(ratio, rounds, &lo, &hi);
                printf("  rate    %-13s: %8.0f records/s, %.2fx "
                       "at_least_once's (%.2f-%.2f)\n", conf_label(c),
                       median(c->rate, rounds), median(ratio, rounds), lo,
                       hi);
            }
        }
        for (int k = 0; latency && k < nconf; k++) {
            const conf *c = &confs[k];
            double lo50, hi50, lo99, hi99;
            spread(c->p50, rounds, &lo50, &hi50);
            spread(c->p99, rounds, &lo99, &hi99);
            printf("  latency %-13s interval %5d ms: p50 %6.0f ms "
                   "(%.0f-%.0f)  p99 %6.0f ms (%.0f-%.0f)\n", conf_label(c),
                   c->interval_ms, median(c->p50, rounds), lo50, hi50,
                   median(c->p99, rounds), lo99, hi99);
        }
    }
    for (int k = 0; k < nbd && rc == 0; k++)
        bd_print(&bd[k], rounds);
    if (rc == 0 && rollbacks > 0)
        rc = rollback_all(bs, rollbacks);
    h_tmpdir_remove(dir);
    free(dir);
    if (cluster && h_kcluster_stop(cluster))
        fprintf(stderr, "bench_txn: stopping the broker: %s\n",
                h_last_error());
    return rc ? 1 : 0;
}
