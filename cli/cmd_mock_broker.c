/*
 * cmd_mock_broker.c -- `bloomstage mock-broker`: librdkafka's mock cluster
 * (rdkafka_mock.h) on loopback, as a process of its own, so tests and demos
 * can run the stage against "a Kafka" on machines where none can be
 * installed.
 *
 *   bloomstage mock-broker [-b BROKERS] [-t TOPIC:PARTITIONS]... [--control]
 *
 * The first line on stdout is the cluster's bootstrap.servers list (flushed
 * at once, so a parent reading a pipe sees it); then the cluster serves until
 * SIGTERM or SIGINT.  With --control, stdin is a line-oriented control
 * channel for fault injection (commands in CONTROL_HELP below); each command
 * is answered with exactly one line, "ok" or "error: ...", and stdin EOF
 * means quit, so a test that dies takes its broker with it.
 *
 * How the mock treats topics it does not know (librdkafka 2.0.2,
 * src/rdkafka_mock.c and rdkafka_mock_handlers.c, checked against the
 * running mock by tests/test_harness.c):
 *   - a Metadata request naming an unknown topic auto-creates it when the
 *     request allows auto-creation (AllowAutoTopicCreation, which clients
 *     set from `allow.auto.create.topics`: true by default for a producer,
 *     false for a consumer; Metadata < v4 always allows it).  The new topic
 *     gets the cluster default of 4 partitions and replication factor
 *     min(3, brokers), and there is no public API to change that default:
 *     create topics with -t or `create-topic` when the count matters;
 *   - every other request (Produce, Fetch, ListOffsets, OffsetCommit,
 *     OffsetFetch) on an unknown topic or partition answers
 *     UNKNOWN_TOPIC_OR_PART and creates nothing;
 *   - the CreateTopics admin API is not implemented by the mock.
 *
 * Signals: SIGINT and SIGTERM are blocked while librdkafka starts its
 * threads (they inherit the mask), so the signal is always delivered to the
 * main thread, where it interrupts poll() and sets `stop_signal`.  Exit
 * then takes a few milliseconds, occasionally about one second: that is
 * rd_kafka_mock_cluster_destroy() in 2.0.2 waiting on its own thread.
 */
#include "commands.h"
#include "util.h"

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define MAX_BROKERS 32
#define MAX_PARTITIONS 10000
#define MAX_TOPIC_LEN 249 /* Kafka's own limit */
#define MAX_ERROR_COUNT 100000
#define CONTROL_LINE_MAX 1024

#define CONTROL_HELP                                                          \
    "Control commands (with --control; one per line on stdin, each answered\n" \
    "by one line on stdout, \"ok\" or \"error: MESSAGE\"):\n"                  \
    "  create-topic TOPIC PARTITIONS   create a topic (replication 1)\n"      \
    "  push-errors API COUNT ERR       fail the next COUNT requests of API\n" \
    "                                  (cluster-wide) with ERR\n"             \
    "  clear-errors API                drop the errors still queued for API\n" \
    "  topic-error TOPIC ERR           Metadata answers ERR for TOPIC\n"      \
    "                                  (NO_ERROR clears it)\n"                \
    "  broker-down ID | broker-up ID   disconnect a broker and refuse\n"      \
    "                                  connections / accept them again (ID\n" \
    "                                  from 1; -1 = every broker); leaders\n" \
    "                                  do not move\n"                         \
    "  quit                            stop (as stdin EOF does)\n"            \
    "API is a Kafka request name (Produce, Fetch, ListOffsets, Metadata,\n"   \
    "OffsetCommit, OffsetFetch, FindCoordinator, JoinGroup, Heartbeat,\n"     \
    "LeaveGroup, SyncGroup, InitProducerId, ...) or its ApiKey number.  ERR\n" \
    "is a librdkafka error name as rd_kafka_err2name() prints it, e.g.\n"     \
    "NOT_LEADER_FOR_PARTITION, REQUEST_TIMED_OUT, MSG_SIZE_TOO_LARGE,\n"      \
    "TOPIC_AUTHORIZATION_FAILED, or _TRANSPORT to make the broker drop the\n" \
    "connection.\n"

static const char MOCK_HELP[] =
    "usage: bloomstage mock-broker [-b BROKERS] [-t TOPIC:PARTITIONS]...\n"
    "                              [--control]\n"
    "\n"
    "Runs librdkafka's mock Kafka cluster on 127.0.0.1 (random ports) for\n"
    "tests and demos.  The first line of standard output is the cluster's\n"
    "bootstrap.servers list.  It serves until SIGTERM or SIGINT, then exits\n"
    "0.  Nothing is persisted.\n"
    "\n"
    "  -b, --brokers N          brokers in the cluster, 1..32 (default 1);\n"
    "                           ids run from 1 to N\n"
    "  -t, --topic T:P          create topic T with P partitions (1..10000,\n"
    "                           replication 1); repeatable\n"
    "      --control            read control commands on stdin (below);\n"
    "                           stdin EOF then stops the cluster\n"
    "  -h, --help               this text\n"
    "\n"
    "Unknown topics: a producer's metadata request auto-creates the topic\n"
    "with 4 partitions (replication min(3, N)); consumers do not\n"
    "(allow.auto.create.topics is false for them).  Produce, Fetch and\n"
    "offset requests on unknown topics fail with UNKNOWN_TOPIC_OR_PART.\n"
    "Create topics with -t when the partition count matters.\n"
    "\n"
    "Limits of the mock (librdkafka 2.0.2): a partition keeps at most 5 MiB\n"
    "or 100000 message sets (older ones are dropped silently);\n"
    "transactional offset commits are acknowledged but not stored;\n"
    "read_committed is not emulated; a consumer-group join takes ~3 s.\n"
    "\n" CONTROL_HELP "\n"
    "Exit 0 when stopped, 1 if the cluster cannot start or stdout cannot be\n"
    "written, 2 on a usage error.\n";

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
    stop_signal = sig;
}

/* Kafka protocol ApiKeys (the RD_KAFKAP_* constants are private to
 * librdkafka; these numbers are the protocol's and never change). */
static const struct api_name {
    const char *name;
    int16_t key;
} API_NAMES[] = {
    {"Produce", 0},           {"Fetch", 1},
    {"ListOffsets", 2},       {"Metadata", 3},
    {"OffsetCommit", 8},      {"OffsetFetch", 9},
    {"FindCoordinator", 10},  {"JoinGroup", 11},
    {"Heartbeat", 12},        {"LeaveGroup", 13},
    {"SyncGroup", 14},        {"DescribeGroups", 15},
    {"ListGroups", 16},       {"SaslHandshake", 17},
    {"ApiVersions", 18},      {"CreateTopics", 19},
    {"DeleteTopics", 20},     {"DeleteRecords", 21},
    {"InitProducerId", 22},   {"OffsetForLeaderEpoch", 23},
    {"AddPartitionsToTxn", 24}, {"AddOffsetsToTxn", 25},
    {"EndTxn", 26},           {"TxnOffsetCommit", 28},
    {"DescribeConfigs", 32},  {"AlterConfigs", 33},
    {"SaslAuthenticate", 36}, {"CreatePartitions", 37},
    {"DeleteGroups", 42},     {"OffsetDelete", 47},
};

/* strtol with the whole string, in [min, max]. */
static bool parse_int(const char *s, long min, long max, long *out)
{
    if (!s || !*s || isspace((unsigned char)*s))
        return false;
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (errno || *end != '\0' || v < min || v > max)
        return false;
    *out = v;
    return true;
}

static bool parse_api(const char *s, int16_t *key)
{
    for (size_t i = 0; i < sizeof(API_NAMES) / sizeof(API_NAMES[0]); i++)
        if (!strcasecmp(s, API_NAMES[i].name)) {
            *key = API_NAMES[i].key;
            return true;
        }
    long v;
    if (parse_int(s, 0, INT16_MAX, &v)) {
        *key = (int16_t)v;
        return true;
    }
    return false;
}

/* An error name as rd_kafka_err2name() prints it ("NOT_LEADER_FOR_PARTITION",
 * "_TRANSPORT"); the RD_KAFKA_RESP_ERR_ prefix and any letter case are
 * accepted too. */
static bool parse_err(const char *s, rd_kafka_resp_err_t *err)
{
    static const char prefix[] = "RD_KAFKA_RESP_ERR_";
    if (!strncasecmp(s, prefix, sizeof(prefix) - 1))
        s += sizeof(prefix) - 1;
    const struct rd_kafka_err_desc *descs;
    size_t n;
    rd_kafka_get_err_descs(&descs, &n);
    for (size_t i = 0; i < n; i++)
        if (descs[i].name && !strcasecmp(s, descs[i].name)) {
            *err = descs[i].code;
            return true;
        }
    return false;
}

static bool valid_topic(const char *t, size_t len)
{
    if (len == 0 || len > MAX_TOPIC_LEN)
        return false;
    if ((len == 1 && t[0] == '.') || (len == 2 && t[0] == '.' && t[1] == '.'))
        return false;
    for (size_t i = 0; i < len; i++)
        if (!isalnum((unsigned char)t[i]) && !strchr("._-", t[i]))
            return false;
    return true;
}

/* Creates a topic; on failure writes the reason to errstr. */
static int create_topic(rd_kafka_mock_cluster_t *mc, const char *topic,
                        long partitions, char *errstr, size_t errstr_size)
{
    rd_kafka_resp_err_t err =
        rd_kafka_mock_topic_create(mc, topic, (int)partitions, 1);
    if (err) {
        snprintf(errstr, errstr_size, "cannot create topic '%s': %s", topic,
                 rd_kafka_err2name(err));
        return -1;
    }
    return 0;
}

/*
 * One control command: tokens are split on blanks (topic names have none).
 * Writes "ok" or "error: ..." to `reply`; returns 1 for quit, else 0.
 */
static int control_command(rd_kafka_mock_cluster_t *mc, char *line,
                           char *reply, size_t reply_size)
{
    char *tok[6];
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(line, " \t\r", &save); t;
         t = strtok_r(NULL, " \t\r", &save)) {
        if (n == (int)(sizeof(tok) / sizeof(tok[0]))) {
            snprintf(reply, reply_size, "error: too many arguments");
            return 0;
        }
        tok[n++] = t;
    }
    snprintf(reply, reply_size, "ok");
    if (n == 0) {
        snprintf(reply, reply_size, "error: empty command");
        return 0;
    }

    const char *cmd = tok[0];
    long v;
    int16_t api;
    rd_kafka_resp_err_t err;

#define NEED_ARGS(k, synopsis)                                               \
    do {                                                                     \
        if (n != (k) + 1) {                                                  \
            snprintf(reply, reply_size, "error: usage: %s", synopsis);       \
            return 0;                                                        \
        }                                                                    \
    } while (0)

    if (!strcmp(cmd, "quit")) {
        NEED_ARGS(0, "quit");
        return 1;
    } else if (!strcmp(cmd, "create-topic")) {
        NEED_ARGS(2, "create-topic TOPIC PARTITIONS");
        if (!valid_topic(tok[1], strlen(tok[1])))
            snprintf(reply, reply_size, "error: invalid topic name '%s'",
                     tok[1]);
        else if (!parse_int(tok[2], 1, MAX_PARTITIONS, &v))
            snprintf(reply, reply_size,
                     "error: partitions '%s' must be 1..%d", tok[2],
                     MAX_PARTITIONS);
        else {
            char why[300];
            if (create_topic(mc, tok[1], v, why, sizeof(why)))
                snprintf(reply, reply_size, "error: %s", why);
        }
    } else if (!strcmp(cmd, "push-errors")) {
        NEED_ARGS(3, "push-errors API COUNT ERRNAME");
        if (!parse_api(tok[1], &api))
            snprintf(reply, reply_size, "error: unknown API '%s'", tok[1]);
        else if (!parse_int(tok[2], 1, MAX_ERROR_COUNT, &v))
            snprintf(reply, reply_size, "error: count '%s' must be 1..%d",
                     tok[2], MAX_ERROR_COUNT);
        else if (!parse_err(tok[3], &err))
            snprintf(reply, reply_size, "error: unknown error name '%s'",
                     tok[3]);
        else {
            rd_kafka_resp_err_t *errs = malloc((size_t)v * sizeof(*errs));
            if (!errs) {
                snprintf(reply, reply_size, "error: out of memory");
                return 0;
            }
            for (long i = 0; i < v; i++)
                errs[i] = err;
            rd_kafka_mock_push_request_errors_array(mc, api, (size_t)v, errs);
            free(errs);
        }
    } else if (!strcmp(cmd, "clear-errors")) {
        NEED_ARGS(1, "clear-errors API");
        if (!parse_api(tok[1], &api))
            snprintf(reply, reply_size, "error: unknown API '%s'", tok[1]);
        else
            rd_kafka_mock_clear_request_errors(mc, api);
    } else if (!strcmp(cmd, "topic-error")) {
        NEED_ARGS(2, "topic-error TOPIC ERRNAME");
        if (!valid_topic(tok[1], strlen(tok[1])))
            snprintf(reply, reply_size, "error: invalid topic name '%s'",
                     tok[1]);
        else if (!parse_err(tok[2], &err))
            snprintf(reply, reply_size, "error: unknown error name '%s'",
                     tok[2]);
        else
            rd_kafka_mock_topic_set_error(mc, tok[1], err);
    } else if (!strcmp(cmd, "broker-down") || !strcmp(cmd, "broker-up")) {
        bool down = !strcmp(cmd, "broker-down");
        NEED_ARGS(1, down ? "broker-down ID" : "broker-up ID");
        if (!parse_int(tok[1], -1, INT32_MAX, &v) || v == 0)
            snprintf(reply, reply_size,
                     "error: broker id '%s' must be >= 1, or -1 for all",
                     tok[1]);
        else {
            err = down ? rd_kafka_mock_broker_set_down(mc, (int32_t)v)
                       : rd_kafka_mock_broker_set_up(mc, (int32_t)v);
            if (err)
                snprintf(reply, reply_size, "error: broker %ld: %s", v,
                         rd_kafka_err2name(err));
        }
    } else {
        snprintf(reply, reply_size,
                 "error: unknown command '%s' (create-topic, push-errors, "
                 "clear-errors, topic-error, broker-down, broker-up, quit)",
                 cmd);
    }
#undef NEED_ARGS
    return 0;
}

static int reply_line(const char *reply)
{
    if (printf("%s\n", reply) < 0 || fflush(stdout) != 0) {
        fprintf(stderr, "bloomstage mock-broker: cannot write stdout: %s\n",
                strerror(errno));
        return -1;
    }
    return 0;
}

/*
 * Serves the control channel until quit, stdin EOF or a signal.  Returns
 * BS_EXIT_OK, or BS_EXIT_FAIL if stdin/stdout fail.
 */
static int control_loop(rd_kafka_mock_cluster_t *mc)
{
    char buf[CONTROL_LINE_MAX + 1];
    size_t used = 0;
    bool discarding = false; /* inside an over-long line */

    while (!stop_signal) {
        struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
        int r = poll(&pfd, 1, 500);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "bloomstage mock-broker: poll: %s\n",
                    strerror(errno));
            return BS_EXIT_FAIL;
        }
        if (r == 0)
            continue;
        ssize_t got = read(STDIN_FILENO, buf + used, CONTROL_LINE_MAX - used);
        if (got < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            fprintf(stderr, "bloomstage mock-broker: reading stdin: %s\n",
                    strerror(errno));
            return BS_EXIT_FAIL;
        }
        if (got == 0) /* EOF: our controller is gone */
            return BS_EXIT_OK;
        used += (size_t)got;

        char *start = buf;
        char *nl;
        while ((nl = memchr(start, '\n', used - (size_t)(start - buf)))) {
            *nl = '\0';
            char reply[512];
            int quit = 0;
            if (discarding) {
                snprintf(reply, sizeof(reply),
                         "error: line longer than %d bytes", CONTROL_LINE_MAX);
                discarding = false;
            } else if (memchr(start, '\0', (size_t)(nl - start))) {
                snprintf(reply, sizeof(reply), "error: NUL byte in command");
            } else {
                quit = control_command(mc, start, reply, sizeof(reply));
            }
            if (!quit && reply_line(reply))
                return BS_EXIT_FAIL;
            if (quit)
                return reply_line("ok") ? BS_EXIT_FAIL : BS_EXIT_OK;
            start = nl + 1;
        }
        used -= (size_t)(start - buf);
        memmove(buf, start, used);
        if (used == CONTROL_LINE_MAX) { /* no newline in a full buffer */
            discarding = true;
            used = 0;
        }
    }
    return BS_EXIT_OK;
}

int cmd_mock_broker(int argc, char **argv)
{
    static const struct option opts[] = {
        {"brokers", required_argument, NULL, 'b'},
        {"topic", required_argument, NULL, 't'},
        {"control", no_argument, NULL, 'C'},
        {"help", no_argument, NULL, 'h'},
        {0, 0, 0, 0}};
    long brokers = 1;
    bool control = false;
    int c;

    /* Topics are validated while parsing and created once the cluster
     * exists; argv outlives this function's use of it. */
    const char **topics = calloc((size_t)argc + 1, sizeof(*topics));
    long *partitions = calloc((size_t)argc + 1, sizeof(*partitions));
    int ntopics = 0;
    int rc = BS_EXIT_USAGE;
    rd_kafka_t *rk = NULL;
    rd_kafka_mock_cluster_t *mc = NULL;
    char *names = NULL; /* topic names cut out of T:P, NUL-separated */
    size_t names_used = 0;
    if (!topics || !partitions) {
        fprintf(stderr, "bloomstage mock-broker: out of memory\n");
        rc = BS_EXIT_FAIL;
        goto out;
    }
    size_t names_cap = 0;
    for (int i = 0; i < argc; i++)
        names_cap += strlen(argv[i]) + 1;
    if (!(names = malloc(names_cap + 1))) {
        fprintf(stderr, "bloomstage mock-broker: out of memory\n");
        rc = BS_EXIT_FAIL;
        goto out;
    }

    optind = 0;
    while ((c = getopt_long(argc, argv, "b:t:h", opts, NULL)) != -1) {
        switch (c) {
        case 'b':
            if (!parse_int(optarg, 1, MAX_BROKERS, &brokers)) {
                fprintf(stderr, "bloomstage mock-broker: -b '%s' must be a "
                        "broker count 1..%d\n", optarg, MAX_BROKERS);
                goto out;
            }
            break;
        case 't': {
            const char *colon = strrchr(optarg, ':');
            size_t len = colon ? (size_t)(colon - optarg) : 0;
            long p;
            if (!colon || !valid_topic(optarg, len) ||
                !parse_int(colon + 1, 1, MAX_PARTITIONS, &p)) {
                fprintf(stderr, "bloomstage mock-broker: -t '%s' must be "
                        "TOPIC:PARTITIONS (topic of [A-Za-z0-9._-], at most "
                        "%d characters; partitions 1..%d)\n", optarg,
                        MAX_TOPIC_LEN, MAX_PARTITIONS);
                goto out;
            }
            char *name = names + names_used;
            memcpy(name, optarg, len);
            name[len] = '\0';
            names_used += len + 1;
            for (int i = 0; i < ntopics; i++)
                if (!strcmp(topics[i], name)) {
                    fprintf(stderr, "bloomstage mock-broker: topic '%s' "
                            "given twice\n", name);
                    goto out;
                }
            topics[ntopics] = name;
            partitions[ntopics++] = p;
            break;
        }
        case 'C':
            control = true;
            break;
        case 'h':
            fputs(MOCK_HELP, stdout);
            rc = BS_EXIT_OK;
            goto out;
        default:
            fprintf(stderr, "(see 'bloomstage mock-broker --help')\n");
            goto out;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "bloomstage mock-broker: unexpected argument '%s'\n"
                "(see 'bloomstage mock-broker --help')\n", argv[optind]);
        goto out;
    }

    rc = BS_EXIT_FAIL;
    /* librdkafka's threads (and the mock's) inherit this mask: the signals
     * can only land on the main thread, which is the one that polls. */
    sigset_t sigs, old;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, &old);
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN); /* a closed stdout is a write error */

    char errstr[512];
    bool started = false;
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    /* The handle only hosts the cluster; it talks to no broker itself.
     * Warnings and errors from the mock still reach stderr. */
    if (rd_kafka_conf_set(conf, "client.id", "bloomstage-mock-broker", errstr,
                          sizeof(errstr)) != RD_KAFKA_CONF_OK ||
        rd_kafka_conf_set(conf, "log_level", "4", errstr, sizeof(errstr)) !=
            RD_KAFKA_CONF_OK) {
        fprintf(stderr, "bloomstage mock-broker: %s\n", errstr);
        rd_kafka_conf_destroy(conf);
        goto unblock;
    }
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (!rk) {
        fprintf(stderr, "bloomstage mock-broker: %s\n", errstr);
        rd_kafka_conf_destroy(conf);
        goto unblock;
    }
    mc = rd_kafka_mock_cluster_new(rk, (int)brokers);
    if (!mc) {
        fprintf(stderr, "bloomstage mock-broker: cannot start a mock cluster "
                "of %ld broker(s)\n", brokers);
        goto unblock;
    }
    for (int i = 0; i < ntopics; i++)
        if (create_topic(mc, topics[i], partitions[i], errstr,
                         sizeof(errstr))) {
            fprintf(stderr, "bloomstage mock-broker: %s\n", errstr);
            goto unblock;
        }
    if (reply_line(rd_kafka_mock_cluster_bootstraps(mc)))
        goto unblock;
    started = true;

unblock:
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!started)
        goto out; /* rc is BS_EXIT_FAIL */
    if (control) {
        rc = control_loop(mc);
    } else {
        while (!stop_signal)
            poll(NULL, 0, 500); /* interrupted at once by the signal */
        rc = BS_EXIT_OK;
    }
    if (stop_signal)
        fprintf(stderr, "bloomstage mock-broker: %s, stopping\n",
                strsignal(stop_signal));

out:
    if (mc)
        rd_kafka_mock_cluster_destroy(mc);
    if (rk)
        rd_kafka_destroy(rk);
    free(names);
    free(partitions);
    free(topics);
    return rc;
}
