/*
 * bench/blocklist.c -- live blocklists at size on a real Apache Kafka
 * broker: `bloomstage blocklist load` of N entries (default 1M) into a
 * compacted topic, and the stage's bootstrap of that topic at start-up
 * (blocklist.NAME.topic read to its end before any input), each against a
 * baseline measured in the same round on the same broker:
 *
 *   load       `bloomstage blocklist load NAME FILE` (read, check, produce
 *              with acks=all, idempotent)  vs  the support layer's
 *              h_produce of the same records (one producer, one flush)
 *   bootstrap  the stage's "blocklist topic read to its end" seconds (read,
 *              decode, insert into the entry set and counting filter)
 *              vs  h_consume_all of the same topic (a bare librdkafka read
 *              that keeps copies of the records)
 *
 * R rounds (default 3), each on fresh topics; per round and as medians
 * with min-max.  Also the stage's wall time from spawn to the list being
 * read (process start, clients, metadata included) and its peak RSS.
 *
 *   bench_blocklist [--entries N] [--rounds R] [--partitions P]
 *
 * Starts its own 1-node broker (realkafka.h, scripts/kafka) and runs the
 * bloomstage binary ($BLOOMSTAGE_BIN, or the one built beside it).
 * Figures only, no targets: the issue asks for the times.
 */
#include "support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static void stats(const char *what, double *v, int n, const char *unit)
{
    double s[64];
    memcpy(s, v, (size_t)n * sizeof(double));
    double m = h_sort_median(s, (size_t)n);
    printf("  %-44s median %8.3f %s  (min %.3f, max %.3f)\n", what, m,
           unit, s[0], s[n - 1]);
}

int main(int argc, char **argv)
{
    long n = 1000000;
    int rounds = 3, parts = 4;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--entries") && i + 1 < argc)
            n = (long)atof(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--partitions") && i + 1 < argc)
            parts = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_blocklist [--entries N] "
                    "[--rounds R] [--partitions P]\n");
            return 2;
        }
    }
    if (n < 1 || rounds < 1 || rounds > 64 || parts < 1) {
        fprintf(stderr, "bench_blocklist: bad arguments\n");
        return 2;
    }
    if (!getenv("BLOOMSTAGE_BIN"))
        setenv("BLOOMSTAGE_BIN", BENCH_BLOOMSTAGE_PATH, 1);
    if (h_test_init() != 0) {
        fprintf(stderr, "bench_blocklist: %s\n", h_last_error());
        return 1;
    }
    char *dir = NULL;
    H_MUST(h_tmpdir_new(&dir));
    char *file = h_strdupf("%s/list.txt", dir);
    FILE *fp = fopen(file, "w");
    if (!fp)
        return 1;
    for (long i = 0; i < n; i++)
        fprintf(fp, "spammer-%ld@example.com\n", i);
    if (fclose(fp) != 0)
        return 1;
    /* The baseline's records, built once. */
    h_record *recs = h_xcalloc((size_t)n, sizeof(*recs));
    char *keys = h_xmalloc((size_t)n * 40);
    for (long i = 0; i < n; i++) {
        char *k = keys + i * 40;
        snprintf(k, 40, "spammer-%ld@example.com", i);
        recs[i] = h_rec(k, "1");
    }

    h_kcluster *c = NULL;
    printf("bench_blocklist: %ld entries, %d rounds, list topics of %d "
           "partitions, 1-node Apache Kafka\n", n, rounds, parts);
    fflush(stdout);
    H_MUST(h_kcluster_start(1, &c));
    const char *bs = h_kcluster_bootstraps(c);
    static const char *const compact[] = {"cleanup.policy=compact", NULL};
    H_MUST(h_create_topic(bs, "in", 1, 1, NULL));
    H_MUST(h_create_topic(bs, "out", 1, 1, NULL));

    double load[64], load_base[64], boot[64], read_base[64], wall[64];
    long rss[64];
    for (int r = 0; r < rounds; r++) {
        char lst[64], base[64];
        snprintf(lst, sizeof lst, "list-%d", r);
        snprintf(base, sizeof base, "baseline-%d", r);
        H_MUST(h_create_topic(bs, lst, parts, 1, compact));
        H_MUST(h_create_topic(bs, base, parts, 1, compact));
        char *conf = h_strdupf("%s/stage-%d.conf", dir, r);
        char *text = h_strdupf(
            "input.topics=in\noutput.topic=out\nconsumer.group.id=bench-%d\n"
            "kafka.bootstrap.servers=%s\ncheckpoint.dir=%s/ckpt-%d\n"
            "blocklist.x.topic=%s\nblocklist.x.capacity=%ld\n"
            "log.stats.interval.ms=0\n", r, bs, dir, r, lst, n);
        H_MUST(h_write_file(conf, text));
        free(text);

        /* load: the baseline producer, then the command. */
        double t0 = h_now_s();
        H_MUST(h_produce(bs, base, RD_KAFKA_PARTITION_UA, recs, (size_t)n));
        load_base[r] = h_now_s() - t0;
        const char *args[] = {"blocklist", "load", "x", file, "-c", conf,
                              NULL};
        t0 = h_now_s();
        h_proc *cmd = h_bs_cmd(args, 0);
        load[r] = h_now_s() - t0;
        h_proc_release(cmd);

        /* bootstrap: a bare read, then the stage. */
        h_record_list got = {0};
        t0 = h_now_s();
        H_MUST(h_consume_all(bs, lst, 600000, &got));
        read_base[r] = h_now_s() - t0;
        if (got.n != (size_t)n) {
            fprintf(stderr, "bench_blocklist: %s holds %zu records, want "
                    "%ld\n", lst, got.n, n);
            return 1;
        }
        h_record_list_free(&got);
        t0 = h_now_s();
        h_proc *p = h_stage_start(conf, NULL, NULL);
        h_wait_said(p, "blocklist topic read to its end", 1, 600000);
        wall[r] = h_now_s() - t0;
        const char *line = strstr(h_process_stderr(p),
                                  "blocklist topic read to its end");
        const char *sec = strstr(line, " seconds=");
        boot[r] = sec ? atof(sec + 9) : NAN;
        if (h_log_int(line, "entries") != n) {
            fprintf(stderr, "bench_blocklist: the stage read %lld entries, "
                    "want %ld\n", h_log_int(line, "entries"), n);
            return 1;
        }
        /* Stopped once it has joined: a SIGTERM while the first join is
         * under way has been seen to abort inside librdkafka 2.0.2's
         * sticky assignor (rd_kafka_sticky_assignor_state_destroy). */
        h_wait_said(p, "partition assigned", 1, 120000);
        h_stage_stop(p);
        const struct rusage *ru = h_process_rusage(p);
        rss[r] = ru ? ru->ru_maxrss : -1;
        h_proc_release(p);
        printf("round %d: load %.2f s (baseline %.2f s, %.2fx); bootstrap "
               "%.2f s (bare read %.2f s, %.2fx), spawn to read %.2f s, "
               "stage peak RSS %ld MiB\n", r + 1, load[r], load_base[r],
               load[r] / load_base[r], boot[r], read_base[r],
               boot[r] / read_base[r], wall[r], rss[r] / 1024);
        fflush(stdout);
        free(conf);
    }
    double lr[64], br[64];
    for (int r = 0; r < rounds; r++) {
        lr[r] = load[r] / load_base[r];
        br[r] = boot[r] / read_base[r];
    }
    printf("\n%ld entries, %d rounds:\n", n, rounds);
    stats("blocklist load", load, rounds, "s");
    stats("  baseline h_produce", load_base, rounds, "s");
    stats("  ratio", lr, rounds, "x");
    stats("bootstrap (read to its end, applied)", boot, rounds, "s");
    stats("  baseline bare read", read_base, rounds, "s");
    stats("  ratio", br, rounds, "x");
    stats("stage spawn to list read", wall, rounds, "s");
    H_MUST(h_kcluster_stop(c));
    free(recs);
    free(keys);
    (void)h_tmpdir_remove(dir);
    free(dir);
    free(file);
    return 0;
}
