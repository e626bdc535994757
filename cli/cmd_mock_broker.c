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
 * running mock by tests/stage/test_harness.c):
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
#include "cli_opts.h"
#include "commands.h"
#include "base/util.h"

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
    "  broker-rtt ID MS                every response of broker ID (-1:\n"    \
    "                                  all) comes MS ms late\n"                \
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

/* A control command's arguments, tok[1..] (their count checked), acted
 * on; the answer ("ok" already, or "error: ...") in reply. */
typedef void control_fn(rd_kafka_mock_cluster_t *mc, char **tok, char *reply,
                        size_t reply_size);

/* create-topic TOPIC PARTITIONS */
static void control_create_topic(rd_kafka_mock_cluster_t *mc, char **tok,
                                 char *reply, size_t reply_size)
{
    long v;
    char why[BS_ERRSTR_SIZE];
    if (!valid_topic(tok[1], strlen(tok[1])))
        snprintf(reply, reply_size, "error: invalid topic name '%s'", tok[1]);
    else if (!parse_int(tok[2], 1, MAX_PARTITIONS, &v))
        snprintf(reply, reply_size, "error: partitions '%s' must be 1..%d",
                 tok[2], MAX_PARTITIONS);
    else if (create_topic(mc, tok[1], v, why, sizeof(why)))
        snprintf(reply, reply_size, "error: %s", why);
}

/* push-errors API COUNT ERRNAME */
static void control_push_errors(rd_kafka_mock_cluster_t *mc, char **tok,
                                char *reply, size_t reply_size)
{
    long v;
    int16_t api;
    rd_kafka_resp_err_t err;
    if (!parse_api(tok[1], &api)) {
        snprintf(reply, reply_size, "error: unknown API '%s'", tok[1]);
    } else if (!parse_int(tok[2], 1, MAX_ERROR_COUNT, &v)) {
        snprintf(reply, reply_size, "error: count '%s' must be 1..%d",
                 tok[2], MAX_ERROR_COUNT);
    } else if (!parse_err(tok[3], &err)) {
        snprintf(reply, reply_size, "error: unknown error name '%s'", tok[3]);
    } else {
        rd_kafka_resp_err_t *errs = malloc((size_t)v * sizeof(*errs));
        if (!errs) {
            snprintf(reply, reply_size, "error: out of memory");
            return;
        }
        for (long i = 0; i < v; i++)
            errs[i] = err;
        rd_kafka_mock_push_request_errors_array(mc, api, (size_t)v, errs);
        free(errs);
    }
}

/* clear-errors API */
static void control_clear_errors(rd_kafka_mock_cluster_t *mc, char **tok,
                                 char *reply, size_t reply_size)
{
    int16_t api;
    if (!parse_api(tok[1], &api))
        snprintf(reply, reply_size, "error: unknown API '%s'", tok[1]);
    else
        rd_kafka_mock_clear_request_errors(mc, api);
}

/* topic-error TOPIC ERRNAME */
static void control_topic_error(rd_kafka_mock_cluster_t *mc, char **tok,
                                char *reply, size_t reply_size)
{
    rd_kafka_resp_err_t err;
    if (!valid_topic(tok[1], strlen(tok[1])))
        snprintf(reply, reply_size, "error: invalid topic name '%s'", tok[1]);
    else if (!parse_err(tok[2], &err))
        snprintf(reply, reply_size, "error: unknown error name '%s'", tok[2]);
    else
        rd_kafka_mock_topic_set_error(mc, tok[1], err);
}

/* broker-down ID or broker-up ID, as down says. */
static void control_broker_set(rd_kafka_mock_cluster_t *mc, char **tok,
                               char *reply, size_t reply_size, bool down)
{
    long v;
    if (!parse_int(tok[1], -1, INT32_MAX, &v) || v == 0) {
        snprintf(reply, reply_size,
                 "error: broker id '%s' must be >= 1, or -1 for all", tok[1]);
        return;
    }
    rd_kafka_resp_err_t err =
        down ? rd_kafka_mock_broker_set_down(mc, (int32_t)v)
             : rd_kafka_mock_broker_set_up(mc, (int32_t)v);
    if (err)
        snprintf(reply, reply_size, "error: broker %ld: %s", v,
                 rd_kafka_err2name(err));
}

/* broker-down ID */
static void control_broker_down(rd_kafka_mock_cluster_t *mc, char **tok,
                                char *reply, size_t reply_size)
{
    control_broker_set(mc, tok, reply, reply_size, true);
}

/* broker-up ID */
static void control_broker_up(rd_kafka_mock_cluster_t *mc, char **tok,
                              char *reply, size_t reply_size)
{
    control_broker_set(mc, tok, reply, reply_size, false);
}

/* broker-rtt ID MS: every response of broker ID (-1: all) comes MS
 * milliseconds late, a slow link or broker. */
static void control_broker_rtt(rd_kafka_mock_cluster_t *mc, char **tok,
                               char *reply, size_t reply_size)
{
    long id, ms;
    if (!parse_int(tok[1], -1, INT32_MAX, &id) || id == 0 ||
        !parse_int(tok[2], 0, 600000, &ms)) {
        snprintf(reply, reply_size, "error: broker-rtt ID MS: ID >= 1 or -1 "
                 "for all, MS in [0, 600000]");
        return;
    }
    rd_kafka_resp_err_t err =
        rd_kafka_mock_broker_set_rtt(mc, (int32_t)id, (int)ms);
    if (err)
        snprintf(reply, reply_size, "error: broker %ld: %s", id,
                 rd_kafka_err2name(err));
}

/* The control commands: name, argument count, usage, handler (NULL for
 * quit). */
static const struct control_cmd {
    const char *name;
    int nargs;
    const char *synopsis;
    control_fn *fn;
} CONTROL_CMDS[] = {
    {"quit", 0, "quit", NULL},
    {"create-topic", 2, "create-topic TOPIC PARTITIONS", control_create_topic},
    {"push-errors", 3, "push-errors API COUNT ERRNAME", control_push_errors},
    {"clear-errors", 1, "clear-errors API", control_clear_errors},
    {"topic-error", 2, "topic-error TOPIC ERRNAME", control_topic_error},
    {"broker-down", 1, "broker-down ID", control_broker_down},
    {"broker-up", 1, "broker-up ID", control_broker_up},
    {"broker-rtt", 2, "broker-rtt ID MS", control_broker_rtt},
};

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
    for (size_t i = 0; i < sizeof(CONTROL_CMDS) / sizeof(CONTROL_CMDS[0]);
         i++) {
        const struct control_cmd *c = &CONTROL_CMDS[i];
        if (strcmp(tok[0], c->name))
            continue;
        if (n != c->nargs + 1) {
            snprintf(reply, reply_size, "error: usage: %s", c->synopsis);
            return 0;
        }
        if (!c->fn)
            return 1;
        c->fn(mc, tok, reply, reply_size);
        return 0;
    }
    snprintf(reply, reply_size,
             "error: unknown command '%s' (create-topic, push-errors, "
             "clear-errors, topic-error, broker-down, broker-up, "
             "broker-rtt, quit)",
             tok[0]);
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

/* Answers every complete line in buf[0..*used) and keeps the incomplete
 * rest at the start of buf; a full buffer with no newline starts
 * discarding an over-long line.  1 after quit (answered), 0 to go on, -1
 * if stdout fails. */
static int control_lines(rd_kafka_mock_cluster_t *mc, char *buf,
                         size_t *used, bool *discarding)
{
    char *start = buf;
    char *nl;
    while ((nl = memchr(start, '\n', *used - (size_t)(start - buf)))) {
        *nl = '\0';
        char reply[512];
        int quit = 0;
        if (*discarding) {
            snprintf(reply, sizeof(reply),
                     "error: line longer than %d bytes", CONTROL_LINE_MAX);
            *discarding = false;
        } else if (memchr(start, '\0', (size_t)(nl - start))) {
            snprintf(reply, sizeof(reply), "error: NUL byte in command");
        } else {
            quit = control_command(mc, start, reply, sizeof(reply));
        }
        if (quit)
            return reply_line("ok") ? -1 : 1;
        if (reply_line(reply))
            return -1;
        start = nl + 1;
    }
    *used -= (size_t)(start - buf);
    memmove(buf, start, *used);
    if (*used == CONTROL_LINE_MAX) { /* no newline in a full buffer */
        *discarding = true;
        *used = 0;
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
        int q = control_lines(mc, buf, &used, &discarding);
        if (q != 0)
            return q > 0 ? BS_EXIT_OK : BS_EXIT_FAIL;
    }
    return BS_EXIT_OK;
}

/* The options, as read and checked. */
typedef struct mock_opts {
    long brokers;
    bool control;
    /* -t T:P, validated while parsing and created once the cluster
     * exists: names cut out of T:P into `names`, NUL-separated. */
    const char **topics;
    long *partitions;
    int ntopics;
    char *names;
    size_t names_used;
} mock_opts;

/* Room in o for every -t that argv can hold: -1 after a message. */
static int mock_opts_alloc(mock_opts *o, int argc, char **argv)
{
    o->topics = calloc((size_t)argc + 1, sizeof(*o->topics));
    o->partitions = calloc((size_t)argc + 1, sizeof(*o->partitions));
    size_t names_cap = 0;
    for (int i = 0; i < argc; i++)
        names_cap += strlen(argv[i]) + 1;
    if (o->topics && o->partitions)
        o->names = malloc(names_cap + 1);
    if (!o->names) {
        fprintf(stderr, "bloomstage mock-broker: out of memory\n");
        return -1;
    }
    return 0;
}

/* Frees what mock_opts_alloc allocated. */
static void mock_opts_free(mock_opts *o)
{
    free(o->names);
    free(o->partitions);
    free(o->topics);
}

/* Adds -t T:P to o: false after a message. */
static bool mock_add_topic(mock_opts *o, const char *arg)
{
    const char *colon = strrchr(arg, ':');
    size_t len = colon ? (size_t)(colon - arg) : 0;
    long p;
    if (!colon || !valid_topic(arg, len) ||
        !parse_int(colon + 1, 1, MAX_PARTITIONS, &p)) {
        fprintf(stderr, "bloomstage mock-broker: -t '%s' must be "
                "TOPIC:PARTITIONS (topic of [A-Za-z0-9._-], at most %d "
                "characters; partitions 1..%d)\n", arg, MAX_TOPIC_LEN,
                MAX_PARTITIONS);
        return false;
    }
    char *name = o->names + o->names_used;
    memcpy(name, arg, len);
    name[len] = '\0';
    o->names_used += len + 1;
    for (int i = 0; i < o->ntopics; i++)
        if (!strcmp(o->topics[i], name)) {
            fprintf(stderr, "bloomstage mock-broker: topic '%s' given "
                    "twice\n", name);
            return false;
        }
    o->topics[o->ntopics] = name;
    o->partitions[o->ntopics++] = p;
    return true;
}

/* Reads the command line into o: -1 to go on, else the exit status. */
static int mock_parse(mock_opts *o, int argc, char **argv)
{
    static const struct option opts[] = {
        {"brokers", required_argument, NULL, 'b'},
        {"topic", required_argument, NULL, 't'},
        {"control", no_argument, NULL, 'C'},
        {"help", no_argument, NULL, 'h'},
        {0, 0, 0, 0}};
    int c;
    optind = 0;
    while ((c = getopt_long(argc, argv, "b:t:h", opts, NULL)) != -1) {
        switch (c) {
        case 'b':
            if (!parse_int(optarg, 1, MAX_BROKERS, &o->brokers)) {
                fprintf(stderr, "bloomstage mock-broker: -b '%s' must be a "
                        "broker count 1..%d\n", optarg, MAX_BROKERS);
                return BS_EXIT_USAGE;
            }
            break;
        case 't':
            if (!mock_add_topic(o, optarg))
                return BS_EXIT_USAGE;
            break;
        case 'C':
            o->control = true;
            break;
        default:
            return cli_opts_help(c, "mock-broker", MOCK_HELP);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "bloomstage mock-broker: unexpected argument '%s'\n"
                "(see 'bloomstage mock-broker --help')\n", argv[optind]);
        return BS_EXIT_USAGE;
    }
    return -1;
}

/* Blocks SIGINT and SIGTERM (the mask before in *old) and handles them:
 * librdkafka's threads (and the mock's) inherit this mask, so the signals
 * can only land on the main thread, which is the one that polls. */
static void mock_signals(sigset_t *old)
{
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, old);
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN); /* a closed stdout is a write error */
}

/* Starts the cluster o asks for, creates its topics and prints its
 * bootstrap servers.  *rk and *mc are the caller's to destroy, also on
 * failure; -1 after a message. */
static int mock_start(const mock_opts *o, rd_kafka_t **rk,
                      rd_kafka_mock_cluster_t **mc)
{
    char errstr[BS_ERRSTR_SIZE];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    /* The handle only hosts the cluster; it talks to no broker itself.
     * Warnings and errors from the mock still reach stderr. */
    if (rd_kafka_conf_set(conf, "client.id", "bloomstage-mock-broker", errstr,
                          sizeof(errstr)) != RD_KAFKA_CONF_OK ||
        rd_kafka_conf_set(conf, "log_level", "4", errstr, sizeof(errstr)) !=
            RD_KAFKA_CONF_OK) {
        fprintf(stderr, "bloomstage mock-broker: %s\n", errstr);
        rd_kafka_conf_destroy(conf);
        return -1;
    }
    *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (!*rk) {
        fprintf(stderr, "bloomstage mock-broker: %s\n", errstr);
        rd_kafka_conf_destroy(conf);
        return -1;
    }
    *mc = rd_kafka_mock_cluster_new(*rk, (int)o->brokers);
    if (!*mc) {
        fprintf(stderr, "bloomstage mock-broker: cannot start a mock cluster "
                "of %ld broker(s)\n", o->brokers);
        return -1;
    }
    for (int i = 0; i < o->ntopics; i++)
        if (create_topic(*mc, o->topics[i], o->partitions[i], errstr,
                         sizeof(errstr))) {
            fprintf(stderr, "bloomstage mock-broker: %s\n", errstr);
            return -1;
        }
    return reply_line(rd_kafka_mock_cluster_bootstraps(*mc));
}

/* Serves until a signal, or with control until the control channel ends:
 * the exit status. */
static int mock_serve(rd_kafka_mock_cluster_t *mc, bool control)
{
    int rc = BS_EXIT_OK;
    if (control) {
        rc = control_loop(mc);
    } else {
        while (!stop_signal)
            poll(NULL, 0, 500); /* interrupted at once by the signal */
    }
    if (stop_signal)
        fprintf(stderr, "bloomstage mock-broker: %s, stopping\n",
                strsignal(stop_signal));
    return rc;
}

int cmd_mock_broker(int argc, char **argv)
{
    mock_opts o = {.brokers = 1};
    int rc = mock_opts_alloc(&o, argc, argv) != 0 ? BS_EXIT_FAIL
                                                  : mock_parse(&o, argc, argv);
    if (rc < 0) {
        rd_kafka_t *rk = NULL;
        rd_kafka_mock_cluster_t *mc = NULL;
        sigset_t old;
        mock_signals(&old);
        bool started = mock_start(&o, &rk, &mc) == 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        rc = started ? mock_serve(mc, o.control) : BS_EXIT_FAIL;
        if (mc)
            rd_kafka_mock_cluster_destroy(mc);
        if (rk)
            rd_kafka_destroy(rk);
    }
    mock_opts_free(&o);
    return rc;
}
