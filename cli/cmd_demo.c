/*
 * cmd_demo.c -- `bloomstage demo`: the whole product in one process with no
 * setup.  A mock Kafka cluster (librdkafka's, on loopback), a generated
 * stream of sign-up events with the duplicates real streams have (producer
 * retries right behind the original, late replays of whole batches) and
 * senders from a small bundled spam list, the real stage on it, and a
 * summary; then the output topic is read back and checked against what the
 * generator knows should be there.
 */
#include "cli_opts.h"
#include "commands.h"
#include "base/log.h"
#include "loop/stage.h"
#include "base/util.h"

#include <config.h>
#include <errno.h>
#include <getopt.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define IN_TOPIC "events"
#define OUT_TOPIC "events-unique"
#define REJ_TOPIC "events-rejected"
/* The mock cluster keeps at most 5 MiB per partition and silently drops
 * older data past that: the demo spreads its input wide and caps --events
 * so every partition stays well under (about 110 bytes an event). */
#define PARTITIONS 6
#define MAX_EVENTS 200000

/* The bundled spam list (also config/spam-senders.txt for the compose
 * stack).  Entries are matched exactly against the "from" field. */
static const char *const SPAM[] = {
    "winner@prize-claim.example",  "noreply@cheap-meds.example",
    "offers@crypto-double.example", "admin@account-verify.example",
    "support@refund-now.example",  "hr@work-from-home.example",
    "alert@bank-secure.example",   "deals@replica-watch.example",
    "info@lottery-intl.example",   "promo@free-gift.example",
    "billing@invoice-due.example", "security@reset-password.example",
};
#define NSPAM (sizeof(SPAM) / sizeof(SPAM[0]))

/* The list as a file: config/spam-senders.txt is this output (a test
 * diffs them). */
static void print_spam_list(FILE *f)
{
    fprintf(f, "# Spam senders of bloomstage's demo stream: one address a "
               "line, matched\n# exactly against the events' \"from\" "
               "field (blocklist.spam.key=json:/from).\n");
    for (size_t i = 0; i < NSPAM; i++)
        fprintf(f, "%s\n", SPAM[i]);
}

static const char DEMO_HELP[] =
    "usage: bloomstage demo [--events N] [--keep DIR]\n"
    "\n"
    "Runs the stage on an embedded mock Kafka cluster: generates N sign-up\n"
    "events (default 100000, at most 200000) with producer retries, late replays and spam\n"
    "senders, dedups them on json:/id, blocks the bundled spam list on\n"
    "json:/from, and prints what happened.  Then reads the output back and\n"
    "checks every unique non-spam event is there exactly once.\n"
    "\n"
    "  --events N   how many events to generate (suffixes k, M: powers of\n"
    "               1000, so 50k = 50000)\n"
    "  --keep DIR   keep the checkpoints and spam list in DIR\n"
    "  --print-spam-list   print the bundled spam list and exit\n"
    "\n"
    "Exit 0 if the check passes, 1 otherwise.\n";

/* xorshift64*: a fixed stream, so every run tells the same story. */
static uint64_t rnd(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * UINT64_C(2685821657736338717);
}

typedef struct gen {
    uint64_t unique, spam_unique, retries, replays;
    uint64_t total;
    bool *is_spam; /* per event id */
} gen;

static int produce_event(rd_kafka_t *rk, uint64_t id, bool spam, uint64_t *s)
{
    static const char *const names[] = {"ana", "bo", "chen", "dara", "eli",
                                        "femi", "gus", "hana"};
    char key[32], value[256], from[96];
    if (spam)
        snprintf(from, sizeof(from), "%s", SPAM[rnd(s) % NSPAM]);
    else
        snprintf(from, sizeof(from), "%s%llu@mail.example",
                 names[id % 8], (unsigned long long)(id % 50000));
    int klen = snprintf(key, sizeof(key), "evt-%08llu", (unsigned long long)id);
    int vlen = snprintf(value, sizeof(value),
                        "{\"id\":\"%s\",\"type\":\"signup\",\"from\":\"%s\","
                        "\"plan\":\"%s\"}",
                        key, from, (id % 3) ? "free" : "pro");
    for (;;) {
        rd_kafka_resp_err_t err = rd_kafka_producev(
            rk, RD_KAFKA_V_TOPIC(IN_TOPIC), RD_KAFKA_V_KEY(key, (size_t)klen),
            RD_KAFKA_V_VALUE(value, (size_t)vlen),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
        if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            rd_kafka_poll(rk, 10);
            continue;
        }
        return err ? -1 : 0;
    }
}

static uint64_t dr_failed;

static void demo_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *op)
{
    (void)rk;
    (void)op;
    if (m->err)
        dr_failed++;
}

/* The input stream: each new event, now and then its retry right behind
 * it, and every so often a replay of a batch of recent events. */
static int generate(rd_kafka_t *rk, uint64_t n, gen *g)
{
    uint64_t s = 0x5eed5eed5eedULL, id = 0;
    g->is_spam = calloc(n + 1, sizeof(bool));
    if (!g->is_spam)
        return -1;
    while (g->total < n) {
        bool spam = rnd(&s) % 100 < 4;
        g->is_spam[id] = spam;
        if (produce_event(rk, id, spam, &s))
            return -1;
        g->total++;
        g->unique++;
        g->spam_unique += spam;
        if (rnd(&s) % 100 < 8 && g->total < n) { /* producer retry */
            if (produce_event(rk, id, spam, &s))
                return -1;
            g->total++;
            g->retries++;
        }
        id++;
        if (id % 5000 == 0 && id >= 10000) { /* a late replay of a batch */
            uint64_t from = id - 10000 + rnd(&s) % 5000;
            for (uint64_t r = from; r < from + 500 && g->total < n; r++) {
                uint64_t s2 = r * 7919 + 1; /* spam stays spam */
                if (produce_event(rk, r, g->is_spam[r], &s2))
                    return -1;
                g->total++;
                g->replays++;
            }
        }
    }
    rd_kafka_flush(rk, 30000);
    return dr_failed ? -1 : 0;
}

typedef struct runner {
    bs_stage *stage;
    int rc;
    char err[BS_ERRSTR_SIZE];
} runner;

static void *run_stage(void *arg)
{
    runner *r = arg;
    r->rc = bs_stage_run(r->stage, r->err, sizeof(r->err));
    return NULL;
}

/* Reads the output topic back: count, and ids seen more than once. */
static int verify(const char *bootstraps, const gen *g, uint64_t expect,
                  uint64_t *got, uint64_t *dups, uint64_t *spam_out)
{
    char err[BS_ERRSTR_SIZE];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", bootstraps, err,
                          sizeof(err)) ||
        rd_kafka_conf_set(conf, "group.id", "bloomstage-demo-verify", err,
                          sizeof(err)) ||
        rd_kafka_conf_set(conf, "enable.auto.commit", "false", err,
                          sizeof(err))) {
        rd_kafka_conf_destroy(conf);
        return -1;
    }
    rd_kafka_t *c = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
    if (!c)
        return -1;
    rd_kafka_topic_partition_list_t *a =
        rd_kafka_topic_partition_list_new(PARTITIONS);
    for (int p = 0; p < PARTITIONS; p++)
        rd_kafka_topic_partition_list_add(a, OUT_TOPIC, p)->offset =
            RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_assign(c, a);
    rd_kafka_topic_partition_list_destroy(a);
    uint8_t *seen = calloc(g->unique + 1, 1);
    *got = *dups = *spam_out = 0;
    double deadline = bs_now() + 30;
    while (*got < expect && bs_now() < deadline && seen) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(c, 200);
        if (!m)
            continue;
        if (!m->err && m->key_len > 4) {
            unsigned long long id = strtoull((const char *)m->key + 4, NULL,
                                             10);
            if (id <= g->unique) {
                if (seen[id]++)
                    (*dups)++;
                else
                    (*got)++;
                *spam_out += g->is_spam[id];
            }
        }
        rd_kafka_message_destroy(m);
    }
    free(seen);
    rd_kafka_consumer_close(c);
    rd_kafka_destroy(c);
    return 0;
}

/* The demo's own files: checkpoints, the spam list, the directories. */
static void remove_workdir(const char *dir, const char *ckpt_dir,
                           const char *spam_path)
{
    DIR *d = opendir(ckpt_dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[1024];
        snprintf(path, sizeof(path), "%s/%s", ckpt_dir, e->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(ckpt_dir);
    unlink(spam_path);
    rmdir(dir);
}

/* One run of the demo, from its options to its clean-up. */
typedef struct demo {
    uint64_t events;  /* --events */
    const char *keep; /* --keep DIR, or NULL: a temporary directory */
    char dir[256], spam_path[512], ckpt_dir[512];
    rd_kafka_t *prod; /* the input's producer; the cluster lives in it */
    const char *bootstraps;
    gen g;
} demo;

/* Reads the options into d: -1 to go on, else the exit status. */
static int demo_parse(demo *d, int argc, char **argv)
{
    static const struct option opts[] = {
        {"events", required_argument, NULL, 'n'},
        {"keep", required_argument, NULL, 'k'},
        {"print-spam-list", no_argument, NULL, 'S'},
        {"help", no_argument, NULL, 'h'},
        {0, 0, 0, 0}};
    int c;
    optind = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'n':
            if (!bs_parse_count(optarg, &d->events) || d->events < 1000 ||
                d->events > MAX_EVENTS) {
                fprintf(stderr, "bloomstage demo: --events '%s' must be a "
                        "count from 1000 to %d (the mock broker keeps 5 MiB "
                        "a partition)\n", optarg, MAX_EVENTS);
                return BS_EXIT_USAGE;
            }
            break;
        case 'k':
            d->keep = optarg;
            break;
        case 'S':
            print_spam_list(stdout);
            return BS_EXIT_OK;
        default:
            return cli_opts_help(c, "demo", DEMO_HELP);
        }
    }
    return -1;
}

/* Creates the working directory (--keep's, or a temporary one) and writes
 * the spam list into it.  -1 after a message. */
static int demo_workdir(demo *d)
{
    if (d->keep) {
        snprintf(d->dir, sizeof(d->dir), "%s", d->keep);
        if (mkdir(d->dir, 0755) != 0 && errno != EEXIST) {
            fprintf(stderr, "bloomstage demo: %s: %s\n", d->dir,
                    strerror(errno));
            return -1;
        }
    } else {
        snprintf(d->dir, sizeof(d->dir), "/tmp/bloomstage-demo.XXXXXX");
        if (!mkdtemp(d->dir)) {
            perror("bloomstage demo: mkdtemp");
            return -1;
        }
    }
    snprintf(d->spam_path, sizeof(d->spam_path), "%s/spam-senders.txt",
             d->dir);
    snprintf(d->ckpt_dir, sizeof(d->ckpt_dir), "%s/checkpoints", d->dir);
    FILE *f = fopen(d->spam_path, "w");
    if (!f) {
        perror(d->spam_path);
        return -1;
    }
    print_spam_list(f);
    if (fclose(f) != 0) {
        perror(d->spam_path);
        return -1;
    }
    return 0;
}

/* Starts the mock cluster inside a producer for the input stream and
 * creates the demo's topics on it.  -1 after a message. */
static int demo_cluster(demo *d)
{
    char err[BS_ERRSTR_SIZE];
    rd_kafka_conf_t *pconf = rd_kafka_conf_new();
    rd_kafka_conf_set_dr_msg_cb(pconf, demo_dr);
    rd_kafka_conf_set_log_cb(pconf, bs_log_rdkafka);
    /* The cluster lives inside this producer and goes with it. */
    if (rd_kafka_conf_set(pconf, "test.mock.num.brokers", "1", err,
                          sizeof(err)) ||
        rd_kafka_conf_set(pconf, "linger.ms", "20", err, sizeof(err)) ||
        rd_kafka_conf_set(pconf, "queue.buffering.max.messages", "500000",
                          err, sizeof(err))) {
        fprintf(stderr, "bloomstage demo: %s\n", err);
        rd_kafka_conf_destroy(pconf);
        return -1;
    }
    d->prod = rd_kafka_new(RD_KAFKA_PRODUCER, pconf, err, sizeof(err));
    if (!d->prod) {
        fprintf(stderr, "bloomstage demo: %s\n", err);
        return -1;
    }
    rd_kafka_mock_cluster_t *mc = rd_kafka_handle_mock_cluster(d->prod);
    if (!mc) {
        fprintf(stderr, "bloomstage demo: cannot start the mock cluster\n");
        rd_kafka_destroy(d->prod);
        return -1;
    }
    d->bootstraps = rd_kafka_mock_cluster_bootstraps(mc);
    rd_kafka_mock_topic_create(mc, IN_TOPIC, PARTITIONS, 1);
    rd_kafka_mock_topic_create(mc, OUT_TOPIC, PARTITIONS, 1);
    rd_kafka_mock_topic_create(mc, REJ_TOPIC, PARTITIONS, 1);
    return 0;
}

/* Says where the demo runs, then produces the input stream and says what
 * is in it.  -1 after a message. */
static int demo_input(demo *d)
{
    printf("bloomstage demo\n");
    printf("  mock Kafka cluster   %s (librdkafka's, in this process)\n",
           d->bootstraps);
    printf("  input                %s, %d partitions\n", IN_TOPIC, PARTITIONS);
    printf("  working directory    %s\n\n", d->dir);
    printf("generating %llu events (retries, late replays, spam senders)...\n",
           (unsigned long long)d->events);
    fflush(stdout);
    if (generate(d->prod, d->events, &d->g) != 0) {
        fprintf(stderr, "bloomstage demo: producing the input failed\n");
        return -1;
    }
    printf("  %llu unique events, %llu producer retries, %llu replayed, "
           "%llu from spam senders\n\n",
           (unsigned long long)d->g.unique, (unsigned long long)d->g.retries,
           (unsigned long long)d->g.replays,
           (unsigned long long)d->g.spam_unique);
    return 0;
}

/* Sets one key of the demo's configuration: -1 after a message. */
static int set(bs_config *cfg, const char *k, const char *v)
{
    char err[BS_ERRSTR_SIZE];
    if (bs_config_set(cfg, k, v, "demo", err, sizeof(err))) {
        fprintf(stderr, "bloomstage demo: %s\n", err);
        return -1;
    }
    return 0;
}

/* The stage's configuration for the demo's cluster and files, validated:
 * NULL after a message (or without memory). */
static bs_config *demo_config(const demo *d)
{
    char err[BS_ERRSTR_SIZE];
    bs_config *cfg = bs_config_new();
    if (!cfg)
        return NULL;
    if (set(cfg, "kafka.bootstrap.servers", d->bootstraps) ||
        set(cfg, "input.topics", IN_TOPIC) ||
        set(cfg, "output.topic", OUT_TOPIC) ||
        set(cfg, "rejected.topic", REJ_TOPIC) ||
        set(cfg, "dedup.key", "json:/id") ||
        set(cfg, "dedup.capacity", "20000") ||
        set(cfg, "blocklist.spam.path", d->spam_path) ||
        set(cfg, "blocklist.spam.key", "json:/from") ||
        set(cfg, "checkpoint.dir", d->ckpt_dir) ||
        set(cfg, "checkpoint.interval.ms", "1000") ||
        set(cfg, "log.stats.interval.ms", "0")) {
        bs_config_destroy(cfg);
        return NULL;
    }
    if (bs_config_validate(cfg, err, sizeof(err))) {
        fprintf(stderr, "bloomstage demo: %s\n", err);
        bs_config_destroy(cfg);
        return NULL;
    }
    return cfg;
}

/* Runs the stage on a thread until it has read all total records (or
 * stalls for 120 s), showing progress on a terminal, then drains it.  st:
 * its counters at the end; at_end: as they were before the drain gave the
 * partitions up; secs: from its first record to its last.  -1 after a
 * message if the thread cannot start. */
static int demo_run_to_end(runner *r, uint64_t total, bs_stage_stats *st,
                           bs_stage_stats *at_end, double *secs)
{
    pthread_t th;
    double t_start = bs_now(), t_first = 0, t_last = 0;
    if (pthread_create(&th, NULL, run_stage, r) != 0) {
        fprintf(stderr, "bloomstage demo: cannot start a thread\n");
        return -1;
    }
    bool tty = isatty(STDOUT_FILENO);
    for (;;) {
        usleep(20000);
        bs_stage_stats_get(r->stage, st);
        if (st->records_in && !t_first)
            t_first = bs_now();
        if (tty)
            printf("\r  %llu/%llu records processed", (unsigned long long)
                   st->records_in, (unsigned long long)total);
        if (st->records_in >= total) {
            t_last = bs_now();
            break;
        }
        if (bs_now() - t_start > 120) {
            fprintf(stderr, "\nbloomstage demo: the stage stalled at %llu "
                    "records\n", (unsigned long long)st->records_in);
            break;
        }
    }
    /* Partition gauges now, before the drain gives the partitions up. */
    bs_stage_stats_get(r->stage, at_end);
    bs_stage_stop(r->stage);
    pthread_join(th, NULL);
    if (tty)
        printf("\r\033[K");
    bs_stage_stats_get(r->stage, st);
    *secs = t_last > t_first ? t_last - t_first : 0;
    return 0;
}

/* Prints what the stage did: counts, rate, filters, checkpoints. */
static void print_summary(bs_stage *s, const bs_stage_stats *st,
                          const bs_stage_stats *at_end, double secs)
{
    char hb[32];
    printf("\nsummary\n");
    printf("  records in           %llu\n", (unsigned long long)st->records_in);
    printf("  forwarded            %llu  -> %s\n",
           (unsigned long long)st->records_out, OUT_TOPIC);
    printf("  duplicates dropped   %llu  -> %s (header bloomstage-reason)\n",
           (unsigned long long)st->dropped_duplicate, REJ_TOPIC);
    for (size_t i = 0; i < bs_stage_blocklists(s); i++)
        printf("  blocked (%s)       %llu\n", bs_stage_blocklist_name(s, i),
               (unsigned long long)bs_stage_blocklist_drops(s, i));
    printf("  missing key          %llu\n",
           (unsigned long long)st->missing_key);
    if (secs > 0)
        printf("  rate                 %.0f records/s (first to last record, "
               "one core, mock broker)\n", (double)st->records_in / secs);
    printf("  dedup filters        %s in %u layers over %u partitions\n",
           bs_human_bytes(at_end->filter_bytes, hb, sizeof(hb)),
           (unsigned)at_end->filter_layers, (unsigned)at_end->partitions);
    printf("  checkpoints          %llu written, %llu commits, last %s\n",
           (unsigned long long)st->checkpoints,
           (unsigned long long)st->commits,
           bs_human_bytes(st->checkpoint_bytes, hb, sizeof(hb)));
}

/* Reads the output back and prints whether every unique non-spam event
 * is there exactly once: the exit status. */
static int demo_check(const demo *d)
{
    const gen *g = &d->g;
    uint64_t expect = g->unique - g->spam_unique, got, dups, spam_out;
    if (verify(d->bootstraps, g, expect, &got, &dups, &spam_out) != 0)
        return BS_EXIT_FAIL;
    printf("\ncheck (output read back)\n");
    printf("  unique non-spam events expected   %llu\n",
           (unsigned long long)expect);
    printf("  found in %s          %llu, %llu twice, %llu spam\n",
           OUT_TOPIC, (unsigned long long)got, (unsigned long long)dups,
           (unsigned long long)spam_out);
    /* A Bloom filter may drop a new event as a false positive with
     * probability <= dedup.fpr (1e-6): allow for that, say it. */
    if (dups == 0 && spam_out == 0 && got <= expect &&
        expect - got <= 1 + expect / 100000) {
        printf("  %s\n", got == expect ? "OK: every unique event exactly once"
                                       : "OK within the false-positive bound");
        return BS_EXIT_OK;
    }
    printf("  MISMATCH\n");
    return BS_EXIT_FAIL;
}

/* Runs the stage on the generated input with cfg, prints its summary and
 * the check of its output: the exit status. */
static int demo_stage(const demo *d, bs_config *cfg)
{
    printf("running the stage: dedup.key=json:/id, blocklist.spam.key="
           "json:/from, checkpoint every 1 s...\n");
    fflush(stdout);
    runner r = {0};
    r.stage = bs_stage_new(cfg, r.err, sizeof(r.err));
    if (!r.stage) {
        fprintf(stderr, "bloomstage demo: %s\n", r.err);
        return BS_EXIT_FAIL;
    }
    bs_stage_stats st, at_end;
    double secs;
    if (demo_run_to_end(&r, d->g.total, &st, &at_end, &secs) != 0) {
        bs_stage_destroy(r.stage);
        return BS_EXIT_FAIL;
    }
    print_summary(r.stage, &st, &at_end, secs);
    if (r.rc != 0)
        fprintf(stderr, "bloomstage demo: the stage failed: %s\n", r.err);
    bs_stage_destroy(r.stage);
    int rc = r.rc == 0 ? demo_check(d) : BS_EXIT_FAIL;
    if (d->keep)
        printf("\ncheckpoints kept: bloomstage checkpoint info %s\n",
               d->ckpt_dir);
    return rc;
}

int cmd_demo(int argc, char **argv)
{
    demo d = {.events = 100000};
    int rc = demo_parse(&d, argc, argv);
    if (rc >= 0)
        return rc;
    bs_log_set_level(BS_LOG_WARN);
    if (demo_workdir(&d) != 0 || demo_cluster(&d) != 0)
        return BS_EXIT_FAIL;
    if (demo_input(&d) != 0) {
        free(d.g.is_spam);
        rd_kafka_destroy(d.prod);
        return BS_EXIT_FAIL;
    }
    bs_config *cfg = demo_config(&d);
    rc = cfg ? demo_stage(&d, cfg) : BS_EXIT_FAIL;
    if (!d.keep)
        remove_workdir(d.dir, d.ckpt_dir, d.spam_path);
    bs_config_destroy(cfg);
    free(d.g.is_spam);
    rd_kafka_destroy(d.prod);
    return rc;
}
