/*
 * cmd_blocklist.c -- `bloomstage blocklist add|remove|load NAME ... -c
 * CONF`: publishes changes to live blocklist NAME's topic
 * (blocklist.NAME.topic), so a user needs no other Kafka tool.
 *
 *   add NAME ENTRY...      one record per entry: key ENTRY, value "1"
 *   remove NAME ENTRY...   one tombstone per entry (key ENTRY, null value)
 *   load NAME FILE         every entry of a text list (the rules of
 *                          `filter build`: one per line, '#' comments and
 *                          blank lines skipped, white space stripped) as
 *                          adds; FILE - is stdin; a progress bar on a
 *                          terminal
 *
 * The configuration is the stage's own (-c FILE, BLOOMSTAGE_*, -X): the
 * kafka.* and producer.* keys reach the producer.  Records are keyed by
 * entry and partitioned with Kafka's own default partitioner (murmur2),
 * so every change to one entry lands in one partition, in order, whatever
 * tool wrote the earlier ones.  The producer is idempotent with acks=all;
 * the command exits 0 only when every record was acknowledged.  Entries
 * are checked before anything is sent (bs_list_record_decode: non-empty,
 * at most BS_BLOCKLIST_MAX_ENTRY bytes): a bad one is a usage error.
 */
#include "keys/blocklist.h"
#include "cli_opts.h"
#include "commands.h"
#include "kafka/kafka_util.h"
#include "base/settings.h"
#include "base/timeouts.h"
#include "base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char HELP[] =
    "usage: bloomstage blocklist add NAME ENTRY... -c FILE [-X key=value]...\n"
    "       bloomstage blocklist remove NAME ENTRY... -c FILE [-X k=v]...\n"
    "       bloomstage blocklist load NAME FILE|- -c FILE [-X k=v]...\n"
    "\n"
    "Publishes changes to live blocklist NAME: records keyed by entry on its\n"
    "compacted topic blocklist.NAME.topic (add: value \"1\"; remove: a\n"
    "tombstone).  A running stage applies them between records.  load adds\n"
    "every entry of a text list (one per line, '#' comments and blank lines\n"
    "skipped, white space stripped; - reads stdin), with a progress bar on a\n"
    "terminal.  Entries are exact bytes, 1 to 16384 of them.\n"
    "\n"
    "  -c, --config FILE   the stage's configuration (kafka.* and producer.*\n"
    "                      keys reach the producer)\n"
    "  -X key=value        set a key, overriding FILE and BLOOMSTAGE_* env\n"
    "\n"
    "Exit 0 when every record was acknowledged (acks=all), 1 if any was not\n"
    "or the topic is missing, 2 on a usage or configuration error.\n";

#define FLUSH_STEP_MS 500
#define MAX_LINE (1u << 20)

typedef struct sender {
    const bs_config *cfg; /* the stage's (the principal a refusal names) */
    rd_kafka_t *rk;
    rd_kafka_topic_t *rkt;
    uint64_t sent, failed;
    char first_error[BS_ERRSTR_SIZE];
} sender;

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    sender *sd = opaque;
    if (m->err && sd->failed++ == 0) {
        /* No Write ACL: said as the stage says a refusal. */
        if (!bs_refusal_message(sd->cfg, m->err, "Write",
                                rd_kafka_topic_name(m->rkt), sd->first_error,
                                sizeof(sd->first_error)))
            snprintf(sd->first_error, sizeof(sd->first_error), "%s",
                     rd_kafka_err2str(m->err));
    }
}

/* linger: "0" for a few entries (sent at once), more for a load (batched). */
static int sender_open(const bs_config *cfg, const char *topic,
                       const char *linger, sender *sd)
{
    const char *const defaults[] = {"client.id", "bloomstage-blocklist",
                                    "linger.ms", linger, NULL};
    static const char *const forced[] = {
        "enable.idempotence", "true", "acks", "all",
        "partitioner", "murmur2_random", "allow.auto.create.topics", "false",
        NULL};
    char err[BS_ERRSTR_SIZE];
    rd_kafka_conf_t *conf = bs_kafka_conf_new(cfg, "producer", defaults,
                                              forced, err, sizeof(err));
    if (!conf) {
        fprintf(stderr, "bloomstage blocklist: %s\n", err);
        return BS_EXIT_USAGE;
    }
    sd->cfg = cfg;
    rd_kafka_conf_set_opaque(conf, sd);
    rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
    sd->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
    if (!sd->rk) {
        rd_kafka_conf_destroy(conf);
        fprintf(stderr, "bloomstage blocklist: cannot create a producer: "
                "%s\n", err);
        return BS_EXIT_FAIL;
    }
    err[0] = '\0';
    if (bs_topic_lookup(sd->rk, topic, BS_TIMEOUT_BROKER_MS, NULL, err,
                        sizeof(err)) <= 0) {
        /* Left out of the metadata of every topic when it may not be
         * described (Write brings Describe): asked by name, the brokers
         * say whether they refuse it. */
        char why[BS_ERRSTR_SIZE];
        int refused = bs_topic_refused(cfg, sd->rk, topic,
                                       BS_TIMEOUT_BROKER_MS);
        if (refused && bs_refusal_message(cfg, refused, "Write", topic, why,
                                          sizeof(why)))
            fprintf(stderr, "bloomstage blocklist: %s\n", why);
        else
            fprintf(stderr, "bloomstage blocklist: %s (create it with "
                    "cleanup.policy=compact)\n", err);
        return BS_EXIT_FAIL;
    }
    sd->rkt = rd_kafka_topic_new(sd->rk, topic, NULL);
    if (!sd->rkt) {
        fprintf(stderr, "bloomstage blocklist: topic %s: %s\n", topic,
                rd_kafka_err2str(rd_kafka_last_error()));
        return BS_EXIT_FAIL;
    }
    return BS_EXIT_OK;
}

/* Queues one record (value NULL: a tombstone), waiting while the queue
 * is full.  -1 if it cannot be queued. */
static int send_one(sender *sd, const char *entry, size_t len, bool add)
{
    for (;;) {
        if (rd_kafka_produce(sd->rkt, RD_KAFKA_PARTITION_UA,
                             RD_KAFKA_MSG_F_COPY, add ? (void *)"1" : NULL,
                             add ? 1 : 0, entry, len, NULL) == 0) {
            sd->sent++;
            rd_kafka_poll(sd->rk, 0);
            return 0;
        }
        if (rd_kafka_last_error() != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            fprintf(stderr, "bloomstage blocklist: cannot produce: %s\n",
                    rd_kafka_err2str(rd_kafka_last_error()));
            return -1;
        }
        rd_kafka_poll(sd->rk, 50);
    }
}

/* Flushes, destroys: the exit status. */
static int sender_close(sender *sd, int rc)
{
    if (!sd->rk)
        return rc;
    int left = 0;
    for (int waited = 0; waited < 60000; waited += FLUSH_STEP_MS) {
        rd_kafka_flush(sd->rk, FLUSH_STEP_MS);
        if ((left = rd_kafka_outq_len(sd->rk)) == 0)
            break;
    }
    if (sd->rkt)
        rd_kafka_topic_destroy(sd->rkt);
    rd_kafka_destroy(sd->rk);
    if (rc == BS_EXIT_OK && (sd->failed || left)) {
        fprintf(stderr, "bloomstage blocklist: %llu of %llu records not "
                "delivered%s%s\n",
                (unsigned long long)(sd->failed + (uint64_t)left),
                (unsigned long long)sd->sent, sd->failed ? ": " : "",
                sd->first_error);
        rc = BS_EXIT_FAIL;
    }
    return rc;
}

static bool entry_ok(const char *e, size_t len, const char *where)
{
    bs_list_change c = bs_list_record_decode(e, len, "1", 1);
    if (c == BS_LIST_ADDED)
        return true;
    fprintf(stderr, "bloomstage blocklist: %s: %s\n", where,
            c == BS_LIST_BAD_EMPTY_KEY ? "an empty entry"
                                       : "an entry longer than 16384 bytes");
    return false;
}

/* One pass over the list's lines at fd: pass 0 checks every entry, pass 1
 * checks and sends each, with a progress bar over size bytes (0:
 * unknown).  *n: the entries taken.  The exit status so far. */
static int load_pass(sender *sd, int fd, const char *path, int pass,
                     uint64_t size, uint64_t *n)
{
    bool in = !strcmp(path, "-");
    *n = 0;
    bs_lines *lr = bs_lines_new(fd, MAX_LINE);
    if (!lr)
        return BS_EXIT_FAIL;
    bs_progress bar;
    if (pass == 1)
        bs_progress_start(&bar, "loading", size);
    const char *line;
    size_t len;
    int r, rc = BS_EXIT_OK;
    while ((r = bs_lines_next(lr, &line, &len)) > 0) {
        if (!bs_list_entry(&line, &len))
            continue;
        char where[600];
        snprintf(where, sizeof(where), "%s:%llu", in ? "stdin" : path,
                 (unsigned long long)bs_lines_number(lr));
        if (!entry_ok(line, len, where)) {
            if (pass == 1 && *n)
                fprintf(stderr, "bloomstage blocklist: the %llu entries "
                        "before it were sent\n", (unsigned long long)*n);
            rc = BS_EXIT_USAGE;
            break;
        }
        (*n)++;
        if (pass == 1) {
            if (send_one(sd, line, len, true) != 0) {
                rc = BS_EXIT_FAIL;
                break;
            }
            bs_progress_update(&bar, bs_lines_bytes(lr), *n);
        }
    }
    if (r < 0 && rc == BS_EXIT_OK) {
        fprintf(stderr, "bloomstage blocklist: %s:%llu: %s\n", path,
                (unsigned long long)bs_lines_number(lr) + 1,
                errno == E2BIG ? "line longer than 1 MiB" : strerror(errno));
        rc = BS_EXIT_FAIL;
    }
    if (pass == 1)
        bs_progress_end(&bar);
    bs_lines_destroy(lr);
    return rc;
}

/* The text list at path (or stdin for "-"): checked whole first when it
 * is a regular file (a bad line sends nothing), then sent. */
static int load(sender *sd, const char *path, uint64_t *entries)
{
    bool in = !strcmp(path, "-");
    int fd = in ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "bloomstage blocklist: %s: %s\n", path,
                strerror(errno));
        return BS_EXIT_FAIL;
    }
    struct stat stt;
    bool regular = fstat(fd, &stt) == 0 && S_ISREG(stt.st_mode);
    int rc = BS_EXIT_OK;
    for (int pass = regular ? 0 : 1; pass < 2 && rc == BS_EXIT_OK; pass++) {
        if (regular && lseek(fd, 0, SEEK_SET) < 0) {
            fprintf(stderr, "bloomstage blocklist: %s: %s\n", path,
                    strerror(errno));
            rc = BS_EXIT_FAIL;
            break;
        }
        uint64_t n;
        rc = load_pass(sd, fd, path, pass,
                       regular ? (uint64_t)stt.st_size : 0, &n);
        if (pass == 1)
            *entries = n;
    }
    if (!in)
        close(fd);
    return rc;
}

/* The operands after the options: add|remove NAME ENTRY... or load NAME
 * FILE.  -1 to go on, else the exit status after a message. */
static int check_operands(int nargs, char **args)
{
    const char *verb = nargs > 0 ? args[0] : "";
    bool ld = !strcmp(verb, "load");
    if (strcmp(verb, "add") && strcmp(verb, "remove") && !ld) {
        fprintf(stderr, "bloomstage blocklist: expected add, remove or load"
                "%s%s\n(see 'bloomstage blocklist --help')\n",
                nargs ? ", not " : "", verb);
        return BS_EXIT_USAGE;
    }
    if (nargs < 3 || (ld && nargs != 3)) {
        fprintf(stderr, "bloomstage blocklist %s: expected NAME and %s\n",
                verb, ld ? "one FILE" : "at least one ENTRY");
        return BS_EXIT_USAGE;
    }
    return -1;
}

/* The topic of blocklist name in cfg (read from file): NULL after a
 * message when there is no such blocklist or it has no topic. */
static const char *blocklist_topic(const bs_config *cfg, const char *name,
                                   const char *file)
{
    const bs_config_blocklist *bls;
    size_t nbl = bs_config_blocklists(cfg, &bls);
    const char *topic = NULL;
    bool known = false;
    for (size_t i = 0; i < nbl; i++)
        if (!strcmp(bls[i].name, name)) {
            known = true;
            topic = bls[i].topic;
        }
    if (!topic) {
        fprintf(stderr, "bloomstage blocklist: %s\n",
                known ? "blocklist has no topic: set blocklist.NAME.topic"
                      : "no such blocklist in the configuration");
        fprintf(stderr, "  (blocklist '%s', configuration %s)\n", name, file);
    }
    return topic;
}

/* The n ENTRY operands, each checked before anything is sent: false after
 * a message. */
static bool entries_ok(int n, char **entries)
{
    for (int i = 0; i < n; i++) {
        char where[64];
        snprintf(where, sizeof(where), "entry %d", i + 1);
        if (!entry_ok(entries[i], strlen(entries[i]), where))
            return false;
    }
    return true;
}

/* Sends what the operands say to topic (the entries, or the list's) and
 * says what was sent once every record is acknowledged: the exit
 * status. */
static int blocklist_send(const bs_config *cfg, const char *topic,
                          int nargs, char **args)
{
    bool rm = !strcmp(args[0], "remove"), ld = !strcmp(args[0], "load");
    sender sd = {0};
    double t0 = bs_now();
    uint64_t entries = 0;
    int rc = sender_open(cfg, topic, ld ? "20" : "0", &sd);
    if (rc == BS_EXIT_OK) {
        if (ld) {
            rc = load(&sd, args[2], &entries);
        } else {
            for (int i = 2; i < nargs && rc == BS_EXIT_OK; i++)
                if (send_one(&sd, args[i], strlen(args[i]), !rm) != 0)
                    rc = BS_EXIT_FAIL;
            entries = (uint64_t)(nargs - 2);
        }
    }
    rc = sender_close(&sd, rc);
    if (rc == BS_EXIT_OK)
        fprintf(stderr, "bloomstage blocklist: %s %llu %s %s blocklist %s "
                "(topic %s) in %.2f s\n", rm ? "removed" : "added",
                (unsigned long long)entries,
                entries == 1 ? "entry" : "entries", rm ? "from" : "to",
                args[1], topic, bs_now() - t0);
    return rc;
}

int cmd_blocklist(int argc, char **argv)
{
    cli_config_opts o;
    int rc = cli_config_opts_parse(argc, argv, "blocklist", HELP, &o);
    if (rc >= 0)
        return rc;
    int nargs = argc - optind;
    char **args = argv + optind;
    if ((rc = check_operands(nargs, args)) >= 0)
        return rc;
    bs_config *cfg = cli_config_opts_load(&o, "blocklist",
                                          "the stage's configuration");
    if (!cfg)
        return BS_EXIT_USAGE;
    const char *topic = blocklist_topic(cfg, args[1], o.file);
    if (!topic || (strcmp(args[0], "load") &&
                   !entries_ok(nargs - 2, args + 2)))
        rc = BS_EXIT_USAGE;
    else
        rc = blocklist_send(cfg, topic, nargs, args);
    bs_config_destroy(cfg);
    return rc;
}
