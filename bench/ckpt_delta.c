/*
 * bench/ckpt_delta.c -- incremental checkpoints against whole ones, for
 * checkpoint.store=dir (temp file, fsync, rename, fsync of the directory:
 * bs_store_put + bs_store_sync, the stage's round) or, with --kafka,
 * checkpoint.store=kafka (chunks, acknowledged, then the manifest, on a
 * 1-node Apache Kafka started by scripts/kafka, or the one --bootstrap
 * names; each store its own compacted topic, read back at read_committed
 * for the restores).  A benchmark, not a test: it prints a table.
 *
 *   bench_ckpt_delta [--dir DIR] [--rounds R] [--kafka | --bootstrap LIST]
 *                    [KEYS...]
 *
 * For each KEYS (default 1e6 1e7 1e8) one filter is built once (dedup.fpr
 * 1e-6, one layer sized for KEYS plus every key the run adds, so no layer
 * is added on the way and the whole filter is what a steady state
 * writes), holding KEYS keys.  Then, R rounds each:
 *   - adds A = KEYS/1e4, KEYS/1e3, KEYS/1e2 new keys, each followed by one
 *     checkpoint of a store with deltas (the defaults: checkpoint.delta.max
 *     32, checkpoint.delta.ratio 0.15): bytes and time of the delta;
 *   - one checkpoint of a store with checkpoint.delta.max=0 (a snapshot):
 *     bytes and time of the full one (the same whatever A);
 * and the restore: one full snapshot (bs_store_get, from a store that knew
 * nothing) against the longest chain the defaults allow at A = KEYS/1e3:
 * a snapshot and deltas until the store writes a snapshot again.  Medians
 * with min-max over the rounds, and the ratios, are printed.  Reads come
 * from the page cache (the files were just written), as for a restart on
 * the same machine.  First, what tracking changes costs an insert: 1e7
 * new keys into an untracked and a tracked filter, alternating.
 */
#include "checkpoint/checkpoint.h"
#include "base/log.h"
#include "store/store.h"
#include "support.h"
#include "base/util.h"

#include <bloomfilters.h>
#include <config.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_ROUNDS 16
#define DELTA_RATIO 0.15 /* checkpoint.delta.ratio's default */

static uint64_t next_key; /* keys are 0, 1, 2, ... hashed: never repeated */

static void add_keys(bf_filter *f, uint64_t n)
{
    bf_scalable *sb = bf_filter_scalable(f);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t k = next_key++;
        if (bf_scalable_add_if_absent(sb, &k, sizeof(k)) < 0) {
            fprintf(stderr, "filter full\n");
            exit(1);
        }
    }
}

/* --kafka / --bootstrap: the broker the Kafka stores use (NULL: dir). */
static const char *kafka;

/* The Kafka store's reader of each store made (it must outlive its
 * store): destroyed by drop(). */
static struct {
    bs_store *st;
    rd_kafka_t *reader;
} readers[16];

/* The checkpoint topic standing for directory `dir`: its path with '/' as
 * '.', so every store of a run has its own. */
static void topic_of(const char *dir, char *out, size_t size)
{
    snprintf(out, size, "ckd%s", dir);
    for (char *c = out; *c; c++)
        if (*c == '/')
            *c = '.';
}

/* A client configuration for the broker with the stage's settings for its
 * checkpoint clients (stage/clients/clients.c): name, value pairs. */
static rd_kafka_conf_t *kconf(const char *const *kv)
{
    rd_kafka_conf_t *conf = h_kafka_conf(kafka);
    char err[512];
    for (size_t i = 0; kv[i]; i += 2)
        if (rd_kafka_conf_set(conf, kv[i], kv[i + 1], err, sizeof(err)) !=
            RD_KAFKA_CONF_OK) {
            fprintf(stderr, "%s: %s\n", kv[i], err);
            exit(1);
        }
    return conf;
}

static bs_store *store(const char *dir, const char *max, bs_config **cfg)
{
    char err[512], topic[600];
    topic_of(dir, topic, sizeof(topic));
    bs_config *c = bs_config_new();
    bs_settings set;
    if (!c || bs_config_set(c, "checkpoint.dir", dir, NULL, err, sizeof(err)) ||
        bs_config_set(c, "checkpoint.delta.max", max, NULL, err,
                      sizeof(err)) ||
        bs_config_set(c, "kafka.bootstrap.servers",
                      kafka ? kafka : "localhost:1", NULL, err, sizeof(err)) ||
        (kafka && (bs_config_set(c, "checkpoint.store", "kafka", NULL, err,
                                 sizeof(err)) ||
                   bs_config_set(c, "checkpoint.topic", topic, NULL, err,
                                 sizeof(err)))) ||
        bs_config_set(c, "input.topics", "in", NULL, err, sizeof(err)) ||
        bs_config_set(c, "output.topic", "out", NULL, err, sizeof(err)) ||
        bs_config_validate(c, err, sizeof(err)) ||
        bs_settings_from_config(c, &set, err, sizeof(err))) {
        fprintf(stderr, "config: %s\n", err);
        exit(1);
    }
    rd_kafka_t *reader = NULL;
    rd_kafka_conf_t *pconf = NULL;
    if (kafka) {
        static const char *const rkv[] = {
            "group.id", "bench-ckpt-delta", "enable.auto.commit", "false",
            "enable.partition.eof", "true", "isolation.level",
            "read_committed", "fetch.wait.max.ms", "10", NULL};
        static const char *const pkv[] = {
            "enable.idempotence", "true", "acks", "all", "linger.ms", "1",
            "message.max.bytes", "20000000", NULL};
        reader = rd_kafka_new(RD_KAFKA_CONSUMER, kconf(rkv), err,
                              sizeof(err));
        if (!reader) {
            fprintf(stderr, "reader: %s\n", err);
            exit(1);
        }
        rd_kafka_poll_set_consumer(reader);
        pconf = kconf(pkv);
    }
    bs_store *st = bs_store_new(&set, reader, pconf, err, sizeof(err));
    if (!st || bs_store_check(st, err, sizeof(err))) {
        fprintf(stderr, "store %s: %s\n", kafka ? topic : dir, err);
        exit(1);
    }
    for (size_t i = 0; reader && i < sizeof(readers) / sizeof(readers[0]);
         i++)
        if (!readers[i].st) {
            readers[i].st = st;
            readers[i].reader = reader;
            break;
        }
    *cfg = c;
    return st;
}

/* A store made by store(), and its configuration. */
static void drop(bs_store *st, bs_config *cfg)
{
    bs_store_destroy(st);
    for (size_t i = 0; i < sizeof(readers) / sizeof(readers[0]); i++)
        if (readers[i].st == st) {
            rd_kafka_consumer_close(readers[i].reader);
            rd_kafka_destroy(readers[i].reader);
            readers[i].st = NULL;
        }
    bs_config_destroy(cfg);
}

/* One checkpoint round of partition 0: put + sync.  Seconds; *bytes and
 * *delta from the store. */
static double round_once(bs_store *st, bf_filter *f, int64_t next,
                         uint64_t *bytes, bool *delta)
{
    char err[1024];
    double t0 = bs_now();
    if (bs_store_put(st, "t", 0, next, NULL, 0, f, NULL, err, sizeof(err)) ||
        bs_store_sync(st, err, sizeof(err))) {
        fprintf(stderr, "put: %s\n", err);
        exit(1);
    }
    double dt = bs_now() - t0;
    *bytes = bs_store_last_bytes(st, delta);
    /* committed: the older states may go (the set-aside snapshots) */
    if (bs_store_committed(st, "t", 0, next, err, sizeof(err))) {
        fprintf(stderr, "committed: %s\n", err);
        exit(1);
    }
    return dt;
}

/* Restore of partition 0's newest state by a store that knew nothing. */
static double restore(const char *dir, int64_t want_next)
{
    bs_config *cfg;
    bs_store *st = store(dir, "32", &cfg);
    char err[1024];
    bs_checkpoint c;
    double t0 = bs_now();
    if (bs_store_get(st, "t", 0, BS_STORE_NEWEST, &c, err, sizeof(err)) !=
        1) {
        fprintf(stderr, "restore %s: %s\n", dir, err);
        exit(1);
    }
    double dt = bs_now() - t0;
    if (c.next_offset != want_next) {
        fprintf(stderr, "restore %s: at %lld, expected %lld\n", dir,
                (long long)c.next_offset, (long long)want_next);
        exit(1);
    }
    bs_ckpt_free(&c);
    drop(st, cfg);
    return dt;
}

/* "median (min-max)" of v[0..n) seconds in units of 1/scale, sorting
 * v. */
static const char *spread(double *v, int n, double scale, char *buf,
                          size_t size)
{
    double m = h_sort_median(v, (size_t)n);
    snprintf(buf, size, "%.1f (%.1f-%.1f)", m * scale, v[0] * scale,
             v[n - 1] * scale);
    return buf;
}

#define spread_ms(v, n, buf, size) spread(v, n, 1e3, buf, size)
#define spread_ns(v, n, buf, size) spread(v, n, 1e9, buf, size)

static void sub(char *out, size_t size, const char *dir, const char *name)
{
    snprintf(out, size, "%s/%s", dir, name);
    if (mkdir(out, 0755) != 0) {
        perror(out);
        exit(1);
    }
}

static void rm_dir(const char *dir)
{
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

/* What tracking costs the record path: ns per insert of n new keys into a
 * filter sized for them, untracked and tracked, alternating, `rounds`
 * times each. */
static void tracking_cost(uint64_t n, int rounds)
{
    double t[2][MAX_ROUNDS];
    for (int r = 0; r < rounds; r++) {
        for (int tracked = 0; tracked < 2; tracked++) {
            bf_scalable_params p;
            bf_scalable_params_default(&p);
            p.initial_capacity = n;
            bf_filter *f = bf_filter_from_scalable(bf_scalable_new(&p, NULL,
                                                                   0));
            if (!f || (tracked && bf_filter_track(f, 1, NULL, 0) != BF_OK)) {
                fprintf(stderr, "cannot build a %llu-key filter\n",
                        (unsigned long long)n);
                exit(1);
            }
            double t0 = bs_now();
            add_keys(f, n);
            t[tracked][r] = (bs_now() - t0) / (double)n;
            bf_filter_destroy(f);
        }
    }
    char a[64], b[64];
    double m0 = h_sort_median(t[0], (size_t)rounds),
           m1 = h_sort_median(t[1], (size_t)rounds);
    printf("insert of %llu new keys (lookup + add, hashing included), ns a "
           "key: untracked %s, tracked %s: %.3fx\n",
           (unsigned long long)n, spread_ns(t[0], rounds, a, sizeof(a)),
           spread_ns(t[1], rounds, b, sizeof(b)), m1 / m0);
}

int main(int argc, char **argv)
{
    char dir[512] = "";
    int rounds = 3;
    uint64_t sizes[8];
    size_t nsizes = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dir") && i + 1 < argc)
            snprintf(dir, sizeof(dir), "%s", argv[++i]);
        else if (!strcmp(argv[i], "--bootstrap") && i + 1 < argc)
            kafka = argv[++i];
        else if (!strcmp(argv[i], "--kafka"))
            kafka = "";
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (nsizes < 8 && strtod(argv[i], NULL) >= 1e4)
            sizes[nsizes++] = (uint64_t)strtod(argv[i], NULL);
        else {
            fprintf(stderr, "usage: bench_ckpt_delta [--dir DIR] [--rounds "
                    "R] [--kafka | --bootstrap LIST] [KEYS...]\n");
            return 2;
        }
    }
    if (rounds < 1 || rounds > MAX_ROUNDS)
        rounds = 3;
    if (!nsizes) {
        sizes[0] = 1000000;
        sizes[1] = 10000000;
        sizes[2] = 100000000;
        nsizes = 3;
    }
    if (!dir[0]) {
        snprintf(dir, sizeof(dir), "/var/tmp/bs-bench-delta.XXXXXX");
        if (!mkdtemp(dir)) {
            perror("mkdtemp");
            return 1;
        }
    }
    bs_log_set_level(BS_LOG_WARN);
    h_kcluster *cluster = NULL;
    if (kafka && !kafka[0]) {
        if (h_kcluster_start(1, &cluster)) {
            fprintf(stderr, "could not start Apache Kafka (scripts/kafka)\n");
            return 1;
        }
        kafka = h_kcluster_bootstraps(cluster);
    }
    if (kafka)
        printf("incremental vs full checkpoints, checkpoint.store=kafka on "
               "Apache Kafka at %s (a compacted topic a store; acks=all, "
               "idempotent), dedup.fpr 1e-6, %d rounds; ms as median "
               "(min-max)\n", kafka, rounds);
    else
        printf("incremental vs full checkpoints, checkpoint.store=dir in %s "
               "(fsync'd), dedup.fpr 1e-6, %d rounds; ms as median "
               "(min-max)\n", dir, rounds);
    tracking_cost(10000000, rounds);
    for (size_t s = 0; s < nsizes; s++) {
        uint64_t n = sizes[s];
        uint64_t adds[3] = {n / 10000, n / 1000, n / 100};
        uint64_t chain_max = 32; /* checkpoint.delta.max's default */
        uint64_t headroom = (uint64_t)rounds * (adds[0] + adds[1] + adds[2]) +
                            chain_max * adds[1];
        bf_scalable_params p;
        bf_scalable_params_default(&p);
        p.initial_capacity = n + headroom;
        bf_scalable *sb = bf_scalable_new(&p, NULL, 0);
        if (!sb) {
            fprintf(stderr, "cannot build a filter for %llu keys\n",
                    (unsigned long long)n);
            return 1;
        }
        bf_filter *f = bf_filter_from_scalable(sb);
        double t0 = bs_now();
        add_keys(f, n);
        char hb[32], hb2[32], a[64], b[64];
        printf("\n%llu keys (filter %s, sized for %llu; built in %.1f s)\n",
               (unsigned long long)n,
               bs_human_bytes(bf_filter_serialized_size(f), hb, sizeof(hb)),
               (unsigned long long)(n + headroom), bs_now() - t0);
        fflush(stdout);

        char ddir[600], fdir[600], cdir[600];
        char dname[64], fname[64], cname[64];
        snprintf(dname, sizeof(dname), "delta-%llu", (unsigned long long)n);
        snprintf(fname, sizeof(fname), "full-%llu", (unsigned long long)n);
        snprintf(cname, sizeof(cname), "chain-%llu", (unsigned long long)n);
        sub(ddir, sizeof(ddir), dir, dname);
        sub(fdir, sizeof(fdir), dir, fname);
        sub(cdir, sizeof(cdir), dir, cname);
        bs_config *dcfg, *fcfg, *ccfg;
        bs_store *dst = store(ddir, "32", &dcfg);
        bs_store *fst = store(fdir, "0", &fcfg);
        int64_t off = 1;
        uint64_t bytes, full_bytes = 0;
        int64_t full_next = 0; /* the full store's newest state */
        bool delta;
        /* the delta store's first state is its snapshot */
        (void)round_once(dst, f, off++, &bytes, &delta);
        double tdelta[3][MAX_ROUNDS], tfull[MAX_ROUNDS];
        uint64_t bdelta[3] = {0, 0, 0};
        for (int r = 0; r < rounds; r++) {
            for (int k = 0; k < 3; k++) {
                add_keys(f, adds[k]);
                tdelta[k][r] = round_once(dst, f, off++, &bytes, &delta);
                if (!delta) { /* past delta.ratio: say so, count it */
                    printf("  (round %d, %llu keys: the store wrote a "
                           "snapshot, its chain at its bound)\n", r,
                           (unsigned long long)adds[k]);
                }
                if (bytes > bdelta[k])
                    bdelta[k] = bytes;
            }
            /* A whole checkpoint of the same filter, by the other store.
             * It marks the filter, so the delta store's next checkpoint of
             * it is whole: that one is taken at once, untimed, and the
             * next round's deltas chain on it. */
            full_next = off;
            tfull[r] = round_once(fst, f, off++, &full_bytes, &delta);
            (void)round_once(dst, f, off++, &bytes, &delta);
        }
        printf("  %-22s %12s %26s %12s %10s\n", "checkpoint", "bytes",
               "ms", "bytes ratio", "ms ratio");
        double mfull = h_sort_median(tfull, (size_t)rounds);
        printf("  %-22s %12s %26s %12s %10s\n", "full", bs_human_bytes(
               full_bytes, hb, sizeof(hb)), spread_ms(tfull, rounds, a,
               sizeof(a)), "1", "1");
        for (int k = 0; k < 3; k++) {
            char label[64];
            snprintf(label, sizeof(label), "delta, %llu keys added",
                     (unsigned long long)adds[k]);
            double md = h_sort_median(tdelta[k], (size_t)rounds);
            char br[32], tr[32];
            snprintf(br, sizeof(br), "1/%.0f",
                     (double)full_bytes / (double)bdelta[k]);
            snprintf(tr, sizeof(tr), "1/%.1f", mfull / md);
            printf("  %-22s %12s %26s %12s %10s\n", label,
                   bs_human_bytes(bdelta[k], hb2, sizeof(hb2)),
                   spread_ms(tdelta[k], rounds, b, sizeof(b)), br, tr);
        }
        fflush(stdout);

        /* The longest chain the defaults allow at adds[1] a round:
         * checkpoint.delta.max deltas, or fewer when the next delta would
         * pass delta.ratio of the snapshot. */
        bs_store *cst = store(cdir, "32", &ccfg);
        int64_t coff = 1;
        (void)round_once(cst, f, coff++, &bytes, &delta);
        uint64_t snap_bytes = bytes, chain_bytes = 0, chain = 0;
        for (uint64_t i = 0; i < chain_max; i++) {
            add_keys(f, adds[1]);
            (void)round_once(cst, f, coff++, &bytes, &delta);
            if (!delta) {
                printf("  (the store wrote a snapshot after %llu deltas: "
                       "the restore below is of that)\n",
                       (unsigned long long)chain);
                snap_bytes = bytes;
                chain = 0;
                chain_bytes = 0;
                break;
            }
            chain++;
            chain_bytes += bytes;
            /* the next one, as big, would pass delta.ratio: the store
             * would write a snapshot, so this is the longest chain */
            if ((double)(chain_bytes + bytes) >
                DELTA_RATIO * (double)snap_bytes)
                break;
        }
        drop(cst, ccfg);
        /* One full snapshot of the same filter, alone in a store of its
         * own: the full store's topic (--kafka) still holds every round's
         * snapshot until compaction runs, and a restore reads the
         * partition from its start to find the newest manifest. */
        char sdir[600], sname[64];
        snprintf(sname, sizeof(sname), "snap-%llu", (unsigned long long)n);
        sub(sdir, sizeof(sdir), dir, sname);
        bs_config *scfg;
        bs_store *sst = store(sdir, "0", &scfg);
        (void)round_once(sst, f, off, &full_bytes, &delta);
        drop(sst, scfg);
        double rfull[MAX_ROUNDS], rchain[MAX_ROUNDS], rold[MAX_ROUNDS];
        for (int r = 0; r < rounds; r++) {
            rfull[r] = restore(sdir, off);
            rchain[r] = restore(cdir, coff - 1);
            rold[r] = restore(fdir, full_next);
        }
        double mf = h_sort_median(rfull, (size_t)rounds),
               mc = h_sort_median(rchain, (size_t)rounds);
        printf("  restore: one snapshot (%s) %s ms; snapshot (%s) + %llu "
               "deltas of %llu keys (%s) %s ms: %.2fx\n",
               bs_human_bytes(full_bytes, hb, sizeof(hb)),
               spread_ms(rfull, rounds, a, sizeof(a)),
               bs_human_bytes(snap_bytes, hb2, sizeof(hb2)),
               (unsigned long long)chain, (unsigned long long)adds[1],
               bs_human_bytes(chain_bytes, (char[32]){0}, 32),
               spread_ms(rchain, rounds, b, sizeof(b)), mc / mf);
        /* The full store's newest snapshot, its older ones (a round each)
         * still before it: a Kafka restore looks for the newest manifest
         * backwards from the end, so they should cost nothing. */
        printf("  restore: one snapshot after %d older ones %s ms: %.2fx "
               "one snapshot alone\n", rounds - 1, spread_ms(rold, rounds, a,
               sizeof(a)), h_sort_median(rold, (size_t)rounds) / mf);
        fflush(stdout);
        drop(dst, dcfg);
        drop(fst, fcfg);
        bf_filter_destroy(f);
        rm_dir(ddir);
        rm_dir(fdir);
        rm_dir(cdir);
        rm_dir(sdir);
    }
    rmdir(dir);
    if (cluster && h_kcluster_stop(cluster))
        fprintf(stderr, "Apache Kafka did not stop cleanly\n");
    return 0;
}
