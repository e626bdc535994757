/*
 * bench/checkpoint.c -- checkpoint size and time as a function of filter
 * size, for checkpoint.store=dir (temp file, fsync, rename, fsync of the
 * directory) and checkpoint.store=kafka (chunks and a manifest produced to
 * librdkafka's mock cluster in this process, acks=all, idempotent), plus
 * the time to load each back.  A benchmark, not a test: it prints a table.
 *
 *   bench_checkpoint [--dir DIR]     (DIR: where the dir store writes;
 *                                     default a temp dir under /tmp)
 *
 * The mock cluster keeps at most 5 MiB per partition, so the Kafka column
 * stops at filters that fit; the dir column goes on to 100M keys.
 */
#include "checkpoint/checkpoint.h"
#include "base/log.h"
#include "store/store.h"
#include "base/util.h"

#include <bloomfilters.h>
#include <config.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bf_filter *filled(uint64_t keys)
{
    bf_scalable_params p;
    bf_scalable_params_default(&p);
    p.initial_capacity = keys; /* one layer, full: a steady-state filter */
    bf_scalable *sb = bf_scalable_new(&p, NULL, 0);
    if (!sb)
        return NULL;
    for (uint64_t i = 0; i < keys; i++) {
        uint64_t k = i * 0x9e3779b97f4a7c15ULL;
        if (bf_scalable_add_if_absent(sb, &k, sizeof(k)) < 0)
            break;
    }
    return bf_filter_from_scalable(sb);
}

static bs_config *config(const char *bootstraps, const char *dir)
{
    char err[512];
    bs_config *cfg = bs_config_new();
    if (!cfg || bs_config_set(cfg, "kafka.bootstrap.servers", bootstraps,
                              NULL, err, sizeof(err)) ||
        bs_config_set(cfg, "checkpoint.dir", dir, NULL, err, sizeof(err)) ||
        bs_config_set(cfg, "input.topics", "bench-in", NULL, err,
                      sizeof(err)) ||
        bs_config_set(cfg, "output.topic", "bench-out", NULL, err,
                      sizeof(err))) {
        fprintf(stderr, "config: %s\n", err);
        exit(1);
    }
    return cfg;
}

int main(int argc, char **argv)
{
    char dir[256] = "/tmp/bs-bench-ckpt.XXXXXX";
    if (argc == 3 && !strcmp(argv[1], "--dir"))
        snprintf(dir, sizeof(dir), "%s", argv[2]);
    else if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    bs_log_set_level(BS_LOG_WARN);

    /* The mock cluster lives inside this producer. */
    char err[512];
    rd_kafka_conf_t *mconf = rd_kafka_conf_new();
    rd_kafka_conf_set(mconf, "test.mock.num.brokers", "1", err, sizeof(err));
    rd_kafka_t *mk = rd_kafka_new(RD_KAFKA_PRODUCER, mconf, err, sizeof(err));
    if (!mk) {
        fprintf(stderr, "mock: %s\n", err);
        return 1;
    }
    rd_kafka_mock_cluster_t *mc = rd_kafka_handle_mock_cluster(mk);
    const char *bootstraps = rd_kafka_mock_cluster_bootstraps(mc);
    rd_kafka_mock_topic_create(mc, "bloomstage-checkpoints", 8, 1);

    bs_config *dcfg = config(bootstraps, dir);
    bs_config *kcfg = config(bootstraps, dir);
    bs_settings dset, kset;
    if (bs_config_set(kcfg, "checkpoint.store", "kafka", NULL, err,
                      sizeof(err)) ||
        bs_config_validate(dcfg, err, sizeof(err)) ||
        bs_config_validate(kcfg, err, sizeof(err)) ||
        bs_settings_from_config(dcfg, &dset, err, sizeof(err)) ||
        bs_settings_from_config(kcfg, &kset, err, sizeof(err))) {
        fprintf(stderr, "config: %s\n", err);
        return 1;
    }
    /* The reader the Kafka store restores with. */
    rd_kafka_conf_t *rconf = rd_kafka_conf_new();
    rd_kafka_conf_set(rconf, "bootstrap.servers", bootstraps, err,
                      sizeof(err));
    rd_kafka_conf_set(rconf, "group.id", "bench-reader", err, sizeof(err));
    rd_kafka_conf_set(rconf, "enable.partition.eof", "true", err,
                      sizeof(err));
    rd_kafka_conf_set(rconf, "fetch.wait.max.ms", "10", err, sizeof(err));
    rd_kafka_t *reader = rd_kafka_new(RD_KAFKA_CONSUMER, rconf, err,
                                      sizeof(err));
    rd_kafka_poll_set_consumer(reader);
    rd_kafka_conf_t *pconf = rd_kafka_conf_new();
    rd_kafka_conf_set(pconf, "bootstrap.servers", bootstraps, err,
                      sizeof(err));
    rd_kafka_conf_set(pconf, "enable.idempotence", "true", err, sizeof(err));
    rd_kafka_conf_set(pconf, "allow.auto.create.topics", "false", err,
                      sizeof(err));
    rd_kafka_conf_set(pconf, "message.max.bytes", "20000000", err,
                      sizeof(err));
    bs_store *dstore = bs_store_new(&dset, NULL, NULL, err, sizeof(err));
    bs_store *kstore = bs_store_new(&kset, reader, pconf, err, sizeof(err));
    if (!dstore || !kstore || bs_store_check(kstore, err, sizeof(err))) {
        fprintf(stderr, "store: %s\n", err);
        return 1;
    }

    printf("checkpoint size and time by filter size (dedup.fpr 1e-6, one "
           "full layer)\n");
    printf("dir: %s (fsync'd); kafka: in-process mock, 512 KiB chunks\n\n",
           dir);
    printf("%12s %12s | %10s %10s | %10s %10s\n", "keys", "bytes",
           "dir write", "dir load", "kafka put", "kafka get");
    static const uint64_t sizes[] = {10000, 100000, 500000, 1000000,
                                     10000000, 50000000};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        bf_filter *f = filled(sizes[i]);
        if (!f) {
            fprintf(stderr, "cannot build a %llu-key filter\n",
                    (unsigned long long)sizes[i]);
            return 1;
        }
        uint64_t bytes = bf_filter_serialized_size(f);
        double t0 = bs_now();
        if (bs_store_put(dstore, "t", (int32_t)i, 1, NULL, 0, f, NULL, err,
                         sizeof(err))) {
            fprintf(stderr, "dir: %s\n", err);
            return 1;
        }
        double dw = bs_now() - t0;
        bs_checkpoint c;
        t0 = bs_now();
        if (bs_store_get(dstore, "t", (int32_t)i, BS_STORE_NEWEST, &c, err, sizeof(err)) != 1) {
            fprintf(stderr, "dir load: %s\n", err);
            return 1;
        }
        double dl = bs_now() - t0;
        bs_ckpt_free(&c);
        char kp[32] = "-", kg[32] = "-";
        /* 8 checkpoint partitions of 5 MiB each on the mock: one checkpoint
         * must fit in one partition's 5 MiB with room to spare. */
        if (bytes < (4u << 20)) {
            t0 = bs_now();
            if (bs_store_put(kstore, "t", (int32_t)i, 1, NULL, 0, f, NULL, err,
                             sizeof(err)) ||
                bs_store_sync(kstore, err, sizeof(err))) {
                fprintf(stderr, "kafka: %s\n", err);
                return 1;
            }
            snprintf(kp, sizeof(kp), "%.1f ms", (bs_now() - t0) * 1e3);
            t0 = bs_now();
            if (bs_store_get(kstore, "t", (int32_t)i, BS_STORE_NEWEST, &c, err, sizeof(err)) !=
                1) {
                fprintf(stderr, "kafka get: %s\n", err);
                return 1;
            }
            snprintf(kg, sizeof(kg), "%.1f ms", (bs_now() - t0) * 1e3);
            bs_ckpt_free(&c);
        }
        char hb[32];
        printf("%12llu %12s | %7.1f ms %7.1f ms | %10s %10s\n",
               (unsigned long long)sizes[i],
               bs_human_bytes(bytes, hb, sizeof(hb)), dw * 1e3, dl * 1e3, kp,
               kg);
        fflush(stdout);
        bf_filter_destroy(f);
        char path[512];
        if (bs_ckpt_path(dir, "t", (int32_t)i, path, sizeof(path)) == 0)
            unlink(path);
    }
    bs_store_destroy(kstore);
    bs_store_destroy(dstore);
    rd_kafka_consumer_close(reader);
    rd_kafka_destroy(reader);
    bs_config_destroy(dcfg);
    bs_config_destroy(kcfg);
    rd_kafka_destroy(mk);
    if (argc != 3)
        rmdir(dir);
    return 0;
}
