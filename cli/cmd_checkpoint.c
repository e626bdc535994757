/*
 * cmd_checkpoint.c -- `bloomstage checkpoint info DIR`: what is on disk,
 * per partition, and whether each file verifies; `checkpoint info -c
 * FILE`: the same for the store the stage's configuration names, the
 * directory or the Kafka store (read through a consumer that takes the
 * kafka.* and consumer.* keys, as the stage's own reader does).
 */
#include "checkpoint/checkpoint.h"
#include "cli_audit.h"
#include "cli_opts.h"
#include "commands.h"
#include "kafka/kafka_util.h"
#include "base/settings.h"
#include "store/store_dir.h"
#include "store/store_kafka.h"
#include "base/timeouts.h"
#include "base/util.h"

#include <dirent.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char CKPT_HELP[] =
    "usage: bloomstage checkpoint info DIR\n"
    "       bloomstage checkpoint info -c FILE [-X key=value]...\n"
    "\n"
    "For every partition with a checkpoint in DIR (a stage's checkpoint.dir):\n"
    "topic, partition, the next input offset its newest state covers (the\n"
    "snapshot and the deltas after it), when it was written, the dedup\n"
    "filter's layers, memory, estimated keys and false-positive rate, and\n"
    "whether every file of it verifies (checksums, structure, the chain);\n"
    "under it the audit sample's counts, measured rate with its 95%\n"
    "interval, and memory (dedup.audit.rate).\n"
    "With -c, the same for the store the stage's configuration names: its\n"
    "checkpoint.dir, or with checkpoint.store=kafka the newest committed\n"
    "state of each partition consumer.group.id has in checkpoint.topic (read\n"
    "whole, through a consumer given the kafka.* and consumer.* keys).\n"
    "\n"
    "  -c, --config FILE   the stage's configuration\n"
    "  -X key=value        set a key, overriding FILE and BLOOMSTAGE_* env\n"
    "\n"
    "Exit 0 if every state verifies, 1 if any does not (or the store cannot\n"
    "be read), 2 on a usage or configuration error.\n";

#define HEADER_FMT "%-24s %-9s %-12s %-20s %-6s %-10s %-12s %-9s %s\n"
#define HEADER_ARGS                                                          \
    "topic", "partition", "next_offset", "written (UTC)", "layers",          \
        "memory", "est. keys", "est. fpr", "verifies"

/* A ms timestamp as UTC text, to the millisecond. */
static const char *utc_ms(int64_t ms, char *buf, size_t size)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    size_t n = strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm);
    snprintf(buf + n, size - n, ".%03d", (int)(ms % 1000));
    return buf;
}

/* dedup.window.ms: the window, the stream time, and each live generation
 * with the time it covers, under the partition's line. */
static void print_window(const bf_windowed *w)
{
    if (!w)
        return;
    bf_windowed_params wp;
    bf_windowed_params_get(w, &wp);
    int64_t T = bf_windowed_stream_time(w);
    char a[40], b[40], hb[32];
    printf("  window %lld ms in %u generations, stream time %s\n",
           (long long)wp.window, wp.generations,
           T < 0 ? "none yet" : utc_ms(T, a, sizeof(a)));
    bf_generation_info g;
    for (uint32_t i = 0; bf_windowed_generation_info(w, i, &g); i++)
        printf("    generation %u: %s .. %s  est. keys %.0f  memory %s  "
               "layers %u\n", i, utc_ms(g.time_from, a, sizeof(a)),
               utc_ms(g.time_to, b, sizeof(b)), g.info.est_keys,
               bs_human_bytes(g.info.bytes, hb, sizeof(hb)), g.info.layers);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The snapshot files in dir, sorted by name, into *names and *n (a name
 * is NULL where it could not be copied; the caller frees each and the
 * array).  -1 after a message if dir cannot be read. */
static int list_snapshots(const char *dir, char ***names, size_t *n)
{
    DIR *d = opendir(dir);
    if (!d) {
        perror(dir);
        return -1;
    }
    size_t cap = 0;
    struct dirent *e;
    *names = NULL;
    *n = 0;
    while ((e = readdir(d))) {
        /* Snapshots: the newest (.ckpt) and those set aside (.ckps), which
         * anchor a partition whose newest one a crash left unwritten. */
        size_t len = strlen(e->d_name);
        if (!bs_ckpt_is_file_name(e->d_name) &&
            !(bs_dirstore_is_state_name(e->d_name) &&
              !strcmp(e->d_name + len - 5, ".ckps")))
            continue;
        char **nn = bs_grow(*names, &cap, *n + 1, sizeof(*nn), 32);
        if (!nn)
            break;
        *names = nn;
        (*names)[(*n)++] = strdup(e->d_name);
    }
    closedir(d);
    if (*n > 1)
        qsort(*names, *n, sizeof(**names), by_name);
    return 0;
}

/* A partition already listed: the snapshots set aside name it again. */
typedef struct shown_part {
    char topic[250];
    int32_t partition;
} shown_part;

/* The newest state (the snapshot and its deltas) of the partition whose
 * snapshot file in dir is name, into *c; *snap_seq is that snapshot's own
 * state.  1 loaded, 2 when the partition is in shown already (or shown
 * is NULL), 0 when a file vanished while read, -1 with the reason in
 * err.  A partition loaded is added to shown. */
static int load_newest(const char *dir, const char *name, shown_part *shown,
                       size_t *nshown, bs_checkpoint *c, uint64_t *snap_seq,
                       char *err, size_t err_size)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    int r = name ? bs_ckpt_load(path, c, err, err_size) : -1;
    *snap_seq = r == 1 ? c->seq : 0;
    if (r != 1)
        return r;
    char topic[sizeof(c->topic)];
    int32_t part = c->partition;
    snprintf(topic, sizeof(topic), "%s", c->topic);
    bs_ckpt_free(c);
    bool seen = false;
    for (size_t j = 0; shown && j < *nshown && !seen; j++)
        seen = shown[j].partition == part && !strcmp(shown[j].topic, topic);
    if (seen || !shown)
        return 2;
    snprintf(shown[*nshown].topic, sizeof(shown[*nshown].topic), "%s",
             topic);
    shown[(*nshown)++].partition = part;
    bs_dirstore *ds = bs_dirstore_new(dir, 0, 0);
    r = ds ? bs_dirstore_get(ds, topic, part, BS_STORE_NEWEST, c, err,
                             err_size)
           : -1;
    bs_dirstore_destroy(ds);
    return r;
}

/* A partition's line (and its state and window lines) for its newest
 * state c, which builds on the snapshot of state snap_seq. */
static void print_state(const bs_checkpoint *c, uint64_t snap_seq)
{
    bf_info in;
    bf_filter_info(c->filter, &in);
    time_t t = (time_t)(c->written_ms / 1000);
    struct tm tm;
    char when[32], hb[32];
    gmtime_r(&t, &tm);
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
    printf("%-24s %-9d %-12lld %-20s %-6u %-10s %-12.0f %-9.2g yes\n",
           c->topic, (int)c->partition, (long long)c->next_offset, when,
           in.layers, bs_human_bytes(in.bytes, hb, sizeof(hb)), in.est_keys,
           in.est_fpr);
    if (c->seq > snap_seq)
        printf("  state %llu: the snapshot (state %llu) and %llu deltas\n",
               (unsigned long long)c->seq, (unsigned long long)snap_seq,
               (unsigned long long)(c->seq - snap_seq));
    print_window(bf_filter_windowed(c->filter));
    if (c->audit) {
        printf("  ");
        cli_audit_line(stdout, c->audit, &in, NULL);
    } else {
        printf("  audit: none (dedup.audit.rate=0, or written before the "
               "audit)\n");
    }
}

/* `checkpoint info DIR`. */
static int info_dir(const char *dir)
{
    char **names;
    size_t n;
    if (list_snapshots(dir, &names, &n) != 0)
        return BS_EXIT_FAIL;
    printf(HEADER_FMT, HEADER_ARGS);
    int bad = 0;
    shown_part *shown = calloc(n ? n : 1, sizeof(*shown));
    size_t nshown = 0;
    for (size_t i = 0; i < n; i++) {
        char err[BS_ERRSTR_SIZE];
        bs_checkpoint c;
        uint64_t snap_seq;
        int r = load_newest(dir, names[i], shown, &nshown, &c, &snap_seq,
                            err, sizeof(err));
        if (r <= 0) {
            printf("%-24s %s\n", names[i] ? names[i] : "?",
                   r == 0 ? "vanished while read" : err);
            bad++;
        } else if (r == 1) {
            print_state(&c, snap_seq);
            bs_ckpt_free(&c);
        }
        free(names[i]);
    }
    free(names);
    free(shown);
    if (n == 0)
        printf("(no checkpoints in %s)\n", dir);
    return bad ? BS_EXIT_FAIL : BS_EXIT_OK;
}

/* Whether the brokers' authorizer refused the read of the checkpoint
 * topic that failed (ks NULL: its lookup): then said in one line naming
 * the ACL, into err. */
static bool info_refused(const bs_config *cfg, const bs_settings *set,
                         rd_kafka_t *rk, bs_kafkastore *ks, char *err,
                         size_t err_size)
{
    char why[BS_ERRSTR_SIZE];
    /* Not in the metadata of every topic: asked by name (the reader
     * creates no topic: bs_kafka_reader_conf); found, but not read: one
     * fetch says. */
    int refused = !ks ? bs_topic_refused(cfg, rk, set->checkpoint_topic,
                                         BS_TIMEOUT_BROKER_MS)
                  : bs_kafkastore_read_check(ks, why, sizeof(why)) ==
                          BS_STORE_REFUSED
                      ? RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED
                      : 0;
    return refused && bs_refusal_message(cfg, refused, "Read",
                                         set->checkpoint_topic, err,
                                         err_size);
}

/* The newest state of each partition the group has in the Kafka store
 * (set: checkpoint.topic, consumer.group.id), read through rk. */
static int info_kafka_read(const bs_config *cfg, const bs_settings *set,
                           rd_kafka_t *rk)
{
    char err[BS_ERRSTR_SIZE];
    bs_kafkastore *ks = bs_kafkastore_open_read(set, rk, err, sizeof(err));
    bs_store_part *parts = NULL;
    size_t n = 0;
    if (!ks || bs_kafkastore_list(ks, &parts, &n, err, sizeof(err)) != 0) {
        (void)info_refused(cfg, set, rk, ks, err, sizeof(err));
        fprintf(stderr, "bloomstage checkpoint: %s\n", err);
        if (ks)
            bs_kafkastore_ops.destroy(ks);
        return BS_EXIT_FAIL;
    }
    printf(HEADER_FMT, HEADER_ARGS);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        bs_checkpoint c;
        int r = bs_kafkastore_ops.get(ks, parts[i].topic, parts[i].partition,
                                      BS_STORE_NEWEST, &c, err, sizeof(err));
        if (r == 1) {
            print_state(&c, c.seq); /* the chain is the store's */
            bs_ckpt_free(&c);
        } else {
            printf("%-24s %-9d %s\n", parts[i].topic,
                   (int)parts[i].partition,
                   r == 0 ? "deleted while read" : err);
            bad++;
        }
    }
    if (n == 0)
        printf("(no checkpoints of group %s in %s)\n", set->group_id,
               set->checkpoint_topic);
    free(parts);
    bs_kafkastore_ops.destroy(ks);
    return bad ? BS_EXIT_FAIL : BS_EXIT_OK;
}

/* `checkpoint info -c FILE` on the Kafka store. */
static int info_kafka(const bs_config *cfg, const bs_settings *set)
{
    char err[BS_ERRSTR_SIZE];
    rd_kafka_conf_t *conf = bs_kafka_reader_conf(
        cfg, set->group_id, "bloomstage-checkpoint-info", err, sizeof(err));
    if (!conf) {
        fprintf(stderr, "bloomstage checkpoint: %s\n", err);
        return BS_EXIT_USAGE;
    }
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
    if (!rk) {
        rd_kafka_conf_destroy(conf);
        fprintf(stderr, "bloomstage checkpoint: cannot create a consumer: "
                "%s\n", err);
        return BS_EXIT_FAIL;
    }
    rd_kafka_poll_set_consumer(rk);
    int rc = info_kafka_read(cfg, set, rk);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return rc;
}

/* `checkpoint info -c FILE [-X k=v]...`: the store the configuration
 * names. */
static int info_config(int argc, char **argv)
{
    cli_config_opts o;
    int rc = cli_config_opts_parse(argc, argv, "checkpoint", CKPT_HELP, &o);
    if (rc >= 0)
        return rc;
    if (argc - optind != 1 || strcmp(argv[optind], "info") != 0) {
        fprintf(stderr, "bloomstage checkpoint: expects 'info -c FILE'\n%s",
                CKPT_HELP);
        return BS_EXIT_USAGE;
    }
    bs_config *cfg = cli_config_opts_load(&o, "checkpoint",
                                          "the stage's configuration");
    if (!cfg)
        return BS_EXIT_USAGE;
    bs_settings set;
    char err[BS_ERRSTR_SIZE];
    if (bs_settings_from_config(cfg, &set, err, sizeof(err)) != 0) {
        fprintf(stderr, "bloomstage checkpoint: %s\n", err);
        rc = BS_EXIT_USAGE;
    } else {
        rc = set.checkpoint_store == BS_CONFIG_STORE_KAFKA
                 ? info_kafka(cfg, &set)
                 : info_dir(set.checkpoint_dir);
    }
    bs_config_destroy(cfg);
    return rc;
}

int cmd_checkpoint(int argc, char **argv)
{
    /* --help anywhere asks for help: `checkpoint --help` and `checkpoint
     * info --help` alike (a directory named --help needs ./--help). */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(CKPT_HELP, stdout);
            return BS_EXIT_OK;
        }
    for (int i = 1; i < argc; i++)
        if (!strncmp(argv[i], "-c", 2) || !strncmp(argv[i], "--config", 8) ||
            !strncmp(argv[i], "-X", 2))
            return info_config(argc, argv);
    if (argc != 3 || strcmp(argv[1], "info") != 0) {
        fprintf(stderr, "bloomstage checkpoint: expects 'info DIR'\n%s",
                CKPT_HELP);
        return BS_EXIT_USAGE;
    }
    if (argv[2][0] == '-') {
        fprintf(stderr, "bloomstage checkpoint info: unknown option '%s' "
                        "(a directory named so: ./%s)\n%s",
                argv[2], argv[2], CKPT_HELP);
        return BS_EXIT_USAGE;
    }
    return info_dir(argv[2]);
}
