/*
 * txn.c -- bench_txn: what exactly_once by Kafka transactions costs in
 * latency, on a real Apache Kafka broker (bench/txn starts a 1-node one
 * with scripts/kafka, or --bootstrap LIST uses one that runs).  The rate
 * comparison against at_least_once is bench/e2e --kafka's (its `stage`
 * phase is exactly_once, which a real broker runs with transactions).
 *
 *   bench_txn [--rate R] [--seconds S] [--intervals MS,MS,...] [--rounds K]
 *             [--bootstrap LIST] [--bloomstage PATH]
 *
 * For each round and each configuration -- at_least_once with a 1000 ms
 * checkpoint interval (the baseline: its output is visible as soon as it is
 * produced), then exactly_once.method=transactions with each checkpoint
 * interval -- it creates an input and an output topic (4 partitions),
 * starts `bloomstage run` on them, and once the stage has its partitions
 * appends R records/s of distinct keys for S seconds, each with its append
 * time as the record timestamp (which the stage forwards).  A
 * read_committed consumer on the output takes each record's latency: the
 * time it was read minus its timestamp (one clock: all on this machine).
 * It prints p50, p99 and the maximum per configuration and round, and the
 * median over rounds; every record of the input must arrive once.
 *
 * Owns its topics and its stage processes; the broker is the support
 * layer's (tests/support/realkafka.h) when it starts one.
 */
#include "support.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NPARTS 4
#define MAX_CONF 8
#define MAX_ROUNDS 9

typedef struct conf {
    bool txn;
    int interval_ms;
    double p50[MAX_ROUNDS], p99[MAX_ROUNDS], max[MAX_ROUNDS];
} conf;

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, int n)
{
    double s[MAX_ROUNDS];
    memcpy(s, v, (size_t)n * sizeof(*s));
    qsort(s, (size_t)n, sizeof(*s), cmp_d);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/* One configuration, one round: 0, or -1 with a message on stderr. */
static int run_one(const char *bs, const char *bin, const char *dir,
                   conf *c, int round, double rate, double seconds)
{
    char in[64], out[64], group[64];
    snprintf(in, sizeof(in), "bt-in-%s%d-%d", c->txn ? "txn" : "alo",
             c->interval_ms, round);
    snprintf(out, sizeof(out), "bt-out-%s%d-%d", c->txn ? "txn" : "alo",
             c->interval_ms, round);
    snprintf(group, sizeof(group), "bt-%s%d-%d", c->txn ? "txn" : "alo",
             c->interval_ms, round);
    if (h_create_topic(bs, in, NPARTS, 1, NULL) ||
        h_create_topic(bs, out, NPARTS, 1, NULL)) {
        fprintf(stderr, "bench_txn: %s\n", h_last_error());
        return -1;
    }
    char *conf_path = h_strdupf("%s/%s.conf", dir, group);
    char *text = h_strdupf(
        "input.topics=%s\noutput.topic=%s\nconsumer.group.id=%s\n"
        "kafka.bootstrap.servers=%s\ncheckpoint.dir=%s/%s\n"
        "checkpoint.interval.ms=%d\nprocessing.guarantee=%s\n"
        "exactly_once.method=transactions\n"
        "consumer.fetch.wait.max.ms=10\nlog.stats.interval.ms=0\n",
        in, out, group, bs, dir, group, c->interval_ms,
        c->txn ? "exactly_once" : "at_least_once");
    int rc = h_write_file(conf_path, text);
    free(text);
    if (rc) {
        fprintf(stderr, "bench_txn: %s\n", h_last_error());
        free(conf_path);
        return -1;
    }
    char *log_path = h_strdupf("%s/%s.log", dir, group);
    char *const argv[] = {(char *)bin, "run", "-c", conf_path, NULL};
    h_spawn_opts so = {.log_path = log_path};
    h_proc *stage = NULL;
    rc = -1;
    rd_kafka_t *prod = NULL, *cons = NULL;
    size_t total = (size_t)(rate * seconds);
    int64_t *lat = calloc(total ? total : 1, sizeof(*lat));
    uint8_t *seen = calloc(total ? total : 1, 1);
    if (!lat || !seen || h_process_spawn_opts(argv, &so, &stage)) {
        fprintf(stderr, "bench_txn: cannot start the stage: %s\n",
                h_last_error());
        goto out;
    }
    /* The stage has its partitions: its log says so. */
    for (double t0 = h_now_s();;) {
        char *l = NULL;
        size_t llen = 0;
        bool ok = h_read_file(log_path, &l, &llen) == 0 && l &&
                  strstr(l, "msg=\"partition assigned\"");
        free(l);
        if (ok)
            break;
        int st;
        if (h_process_wait(stage, 0, &st) == 0 || h_now_s() - t0 > 120) {
            fprintf(stderr, "bench_txn: the stage was not assigned its "
                    "partitions (log %s)\n", log_path);
            goto out;
        }
        h_nap(100);
    }
    rd_kafka_conf_t *pc = h_kafka_conf(bs);
    rd_kafka_conf_set(pc, "linger.ms", "0", NULL, 0);
    prod = rd_kafka_new(RD_KAFKA_PRODUCER, pc, NULL, 0);
    rd_kafka_conf_t *cc = h_kafka_conf(bs);
    char cgroup[80];
    snprintf(cgroup, sizeof(cgroup), "%s-reader", group);
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
    rd_kafka_topic_partition_list_add(sub, out, RD_KAFKA_PARTITION_UA);
    rd_kafka_subscribe(cons, sub);
    rd_kafka_topic_partition_list_destroy(sub);
    size_t sent = 0, got = 0;
    double start = h_now_s(), deadline = start + seconds + 60;
    while (got < total && h_now_s() < deadline) {
        double now = h_now_s();
        while (sent < total && sent < (size_t)((now - start) * rate)) {
            char key[32];
            int klen = snprintf(key, sizeof(key), "k%09zu", sent);
            int64_t ts = (int64_t)(h_wall_s() * 1000);
            rd_kafka_producev(prod, RD_KAFKA_V_TOPIC(in),
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
                lat[got++] = now_ms - rd_kafka_message_timestamp(m, NULL);
            } else if (i < total) {
                fprintf(stderr, "bench_txn: %s: key %zu twice\n", out, i);
                rd_kafka_message_destroy(m);
                goto out;
            }
        }
        rd_kafka_message_destroy(m);
    }
    if (got < total) {
        fprintf(stderr, "bench_txn: %s: %zu of %zu records arrived\n", out,
                got, total);
        goto out;
    }
    qsort(lat, got, sizeof(*lat), cmp_i64);
    c->p50[round] = (double)lat[got / 2];
    c->p99[round] = (double)lat[(got * 99) / 100];
    c->max[round] = (double)lat[got - 1];
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
    if (stage) {
        int st = 0;
        if (h_process_terminate(stage, 30000, &st) != 0 || !WIFEXITED(st) ||
            WEXITSTATUS(st) != 0) {
            fprintf(stderr, "bench_txn: the stage did not stop cleanly (log "
                    "%s)\n", log_path);
            rc = -1;
        }
        h_process_free(stage);
    }
    free(lat);
    free(seen);
    free(conf_path);
    free(log_path);
    return rc;
}

static const char USAGE[] =
    "usage: bench_txn [--rate R] [--seconds S] [--intervals MS,MS,...]\n"
    "                 [--rounds K] [--bootstrap LIST] [--bloomstage PATH]\n"
    "Latency (append -> visible to a read_committed consumer) of bloomstage\n"
    "with exactly_once.method=transactions at each checkpoint interval,\n"
    "against at_least_once, on a real Kafka broker.\n";

int main(int argc, char **argv)
{
    double rate = 2000, seconds = 20;
    int rounds = 3;
    const char *intervals = "100,1000,5000";
    const char *bs = NULL;
    const char *bin = getenv("BLOOMSTAGE_BIN");
    if (!bin)
        bin = BENCH_BLOOMSTAGE_PATH;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(USAGE, stdout);
            return 0;
        }
        if (!v) {
            fputs(USAGE, stderr);
            return 2;
        }
        if (!strcmp(a, "--rate"))
            rate = atof(v);
        else if (!strcmp(a, "--seconds"))
            seconds = atof(v);
        else if (!strcmp(a, "--intervals"))
            intervals = v;
        else if (!strcmp(a, "--rounds"))
            rounds = atoi(v);
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
    if (rate <= 0 || seconds <= 0 || rounds < 1 || rounds > MAX_ROUNDS) {
        fputs(USAGE, stderr);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    h_env_scrub("BLOOMSTAGE_");
    conf confs[MAX_CONF] = {{.txn = false, .interval_ms = 1000}};
    int nconf = 1;
    for (const char *p = intervals; *p && nconf < MAX_CONF;) {
        confs[nconf].txn = true;
        confs[nconf].interval_ms = atoi(p);
        if (confs[nconf].interval_ms <= 0) {
            fputs(USAGE, stderr);
            return 2;
        }
        nconf++;
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
    printf("bench_txn: %g records/s of distinct keys for %g s, %d "
           "partitions, %d rounds; latency = read (read_committed) - append "
           "(ms)\n", rate, seconds, NPARTS, rounds);
    int rc = 0;
    for (int r = 0; r < rounds && rc == 0; r++)
        for (int k = 0; k < nconf && rc == 0; k++) {
            rc = run_one(bs, bin, dir, &confs[k], r, rate, seconds);
            if (rc == 0)
                printf("round %d %-13s interval %5d ms: p50 %6.0f  p99 "
                       "%6.0f  max %6.0f\n", r + 1,
                       confs[k].txn ? "transactions" : "at_least_once",
                       confs[k].interval_ms, confs[k].p50[r],
                       confs[k].p99[r], confs[k].max[r]);
            fflush(stdout);
        }
    if (rc == 0) {
        printf("median over %d rounds (min-max of the round values):\n",
               rounds);
        for (int k = 0; k < nconf; k++) {
            double lo50 = confs[k].p50[0], hi50 = lo50;
            double lo99 = confs[k].p99[0], hi99 = lo99;
            for (int r = 1; r < rounds; r++) {
                lo50 = confs[k].p50[r] < lo50 ? confs[k].p50[r] : lo50;
                hi50 = confs[k].p50[r] > hi50 ? confs[k].p50[r] : hi50;
                lo99 = confs[k].p99[r] < lo99 ? confs[k].p99[r] : lo99;
                hi99 = confs[k].p99[r] > hi99 ? confs[k].p99[r] : hi99;
            }
            printf("  %-13s interval %5d ms: p50 %6.0f ms (%.0f-%.0f)  p99 "
                   "%6.0f ms (%.0f-%.0f)\n",
                   confs[k].txn ? "transactions" : "at_least_once",
                   confs[k].interval_ms, median(confs[k].p50, rounds), lo50,
                   hi50, median(confs[k].p99, rounds), lo99, hi99);
        }
    }
    h_tmpdir_remove(dir);
    free(dir);
    if (cluster && h_kcluster_stop(cluster))
        fprintf(stderr, "bench_txn: stopping the broker: %s\n",
                h_last_error());
    return rc ? 1 : 0;
}
