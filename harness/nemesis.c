/*
 * nemesis.c -- a Jepsen-style fault schedule on a 3-node Apache Kafka
 * cluster while a known stream flows through two or three `bloomstage run`
 * instances, then one oracle over everything that came out (issue 26).
 * One program, built twice: ctest's test_kafka_nemesis (tests/
 * nemesis.cmake: a short schedule, labels kafka and nemesis) and
 * bench_nemesis (bench/nemesis.cmake; bench/nemesis builds a Release tree
 * and runs it for a soak).  It starts the cluster (scripts/kafka start
 * --proxied) and runs:
 *
 *   NAME --minutes N --seed S [--instances 2|3] [--rate R]
 *        [--bound SEC] [--each K] [--hold LO-HI] [--gap LO-HI]
 *        [--bloomstage PATH]
 *
 * The stages (exactly_once.method=transactions, checkpoint.store=kafka, a
 * file blocklist and a live one) reach the brokers only through one TCP
 * proxy per node
 * (harness/proxy.h, on the ports scripts/kafka advertises for its
 * PROXIED listener); the feeder and every check use the direct listener,
 * so they are never cut.  The feeder's idempotent producer can still fail
 * fatally under a broker pause (librdkafka 2.0.2, #4438); the feeder then
 * resends, with a new producer, what is not in the input, without changing
 * its offsets (realkafka.c), and the report counts those recoveries.  Every choice -- the stream, the blocked keys, the
 * faults, their targets and how long each is held -- comes from the seed,
 * which is printed first so that a failure can be replayed.  With --each K
 * the schedule first deals every fault kind K times in an order shuffled
 * from the seed, then draws by weight: a soak covers every kind by
 * construction, which weights alone do not promise.
 *
 * Faults: a stage instance killed -9 and started again, paused (SIGSTOP)
 * past its session timeout and resumed, restarted gracefully; a broker
 * killed -9 and started again, or paused and resumed, chosen as the
 * leader of an input partition, the transaction coordinator of a stage's
 * transactional id, or the group coordinator; a rolling restart of every
 * broker; one broker's proxy (or all of them) blackholed, reset or slowed,
 * then healed; two nodes at once, killed -9 (then started one after the
 * other) or paused: below min.insync.replicas and the KRaft quorum lost
 * (every node is a controller).  Every third step also adds keys to the live list.  After each heal the group's committed offsets must reach
 * everything fed by then (offsets commit with the output, in one
 * transaction) within --bound seconds: the stall, reported per fault type.
 *
 * The oracle, once the schedule ends, the feeder has produced the rest and
 * everything is committed: the output read at read_committed holds each
 * unique non-blocked key exactly once (its first record, in input order
 * per partition) but for false drops within what dedup.fpr allows and
 * keys a list's filter matches though they are not on it (confirmed by
 * that filter, rebuilt with `bloomstage filter build`, within what
 * blocklist.*.fpr allows); the rejected topic holds every other record
 * exactly once with its reason (blocklist:spam, blocklist:live, duplicate,
 * or too-large for the poison records mixed into the stream, whole or
 * without their value as the rejected topic's size allows); a key added
 * to the live
 * list meets it from one copy on, never without it after that; nothing
 * came out that was never fed; the group committed the input's end.
 * Each record counted against the stage is named (key, input partition
 * and offset, what came of it).  Exit 0 only if all of that holds and
 * every stall is within the bound; 1 otherwise; 2 on usage.
 */
#include "support.h"

#include <librdkafka/rdkafka.h>

#include <getopt.h>
#include <stdarg.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef BENCH_BLOOMSTAGE_PATH
#define BENCH_BLOOMSTAGE_PATH ""
#endif

#define NODES 3
#define NPARTS 6
#define MAXINST 3
#define FPR 1e-6
#define DUP_PCT 30   /* records that repeat an earlier key */
/* Keys by h_mix64 of the seed and the key id, mod 100: [0, 3) on the file
 * blocklist, [3, 5) on the live one from the start, [5, 7) the pool of
 * keys added to the live one while records flow. */
#define FILE_PCT 3
#define LIVE_PCT 2
#define LATE_PCT 2
#define BLOCKLIST "spam"
#define LIVELIST "live"
#define LATE_BATCH 40    /* keys a live add sends */
/* Poison records: one record in POISON_EVERY is a new key
 * whose value is too large for the output topic (the broker's default
 * max.message.bytes, 1,048,588): POISON_WHOLE bytes fit the rejected topic
 * (max.message.bytes REJ_MAX) and go there whole, POISON_BARE bytes do
 * not and go there without their value.  The input takes IN_MAX. */
#define POISON_EVERY 10000
#define POISON_WHOLE 1500000
#define POISON_BARE 4000000
#define REJ_MAX "3000000"
#define IN_MAX "8000000"
#define CATCHUP_MAX_S 300 /* past the bound: the run is abandoned */

typedef enum fault {
    F_STAGE_KILL9,
    F_STAGE_PAUSE,
    F_STAGE_RESTART,
    F_BROKER_KILL9,
    F_BROKER_PAUSE,
    F_ROLLING,
    F_NET_BLACKHOLE,
    F_NET_BLACKHOLE_ALL,
    F_NET_RESET,
    F_NET_SLOW,
    F_TWO_NODES_KILL9,
    F_TWO_NODES_PAUSE,
    F_COUNT
} fault;

static const char *const fault_name[F_COUNT] = {
    "stage-kill9",   "stage-pause",      "stage-restart", "broker-kill9",
    "broker-pause",  "rolling-restart",  "net-blackhole", "net-blackhole-all",
    "net-reset",     "net-slow",         "two-nodes-kill9",
    "two-nodes-pause",
};
/* How often each is drawn, relative: a rolling restart takes minutes. */
static const unsigned fault_weight[F_COUNT] = {3, 3, 2, 4, 3, 1, 2, 1, 2, 2,
                                               2, 1};

typedef enum target { T_LEADER, T_TXN_COORD, T_GROUP_COORD } target;
static const char *const target_name[] = {"input-leader", "txn-coordinator",
                                          "group-coordinator"};

/* What the stream's keys are, for the oracle. */
typedef enum key_class {
    K_PLAIN,
    K_FILE,
    K_LIVE,
    K_LATE_POOL,
    K_LATE,
    K_POISON
} key_class;

typedef struct nemesis {
    h_kcluster *c;
    h_kenv *e;
    h_proxy *px[NODES + 1]; /* 1-based, as the nodes */
    h_proc *st[MAXINST];
    unsigned run[MAXINST]; /* which run of instance i st[i] is */
    int ninst;
    char *logdir; /* every run's stderr: LOGDIR/iI-rR.log */
    uint64_t rng;
    double bound_s;
    int hold_lo, hold_hi; /* a fault's hold, seconds: [lo, hi) */
    int gap_lo, gap_hi;   /* the quiet time before a fault, the same */
    fault *deck;          /* --each: dealt before any draw */
    size_t ndeck, dealt;
    unsigned done[F_COUNT];
    double worst[F_COUNT];
    unsigned over_bound;
    unsigned restarts, died, fencings;
    uint8_t *cls;    /* key_class per key id */
    unsigned late_adds;
    size_t late_keys;
    char *spam_path; /* the file blocklist's text */
    size_t *poison;  /* the poison records, in input order */
    size_t npoison;
} nemesis;

/* blocklist.live.capacity: room for the keys on it and every late add. */
static size_t live_capacity(const h_stream *st)
{
    return st->nids / 10 + 1000;
}

static uint64_t draw(nemesis *n, uint64_t below)
{
    return h_splitmix64(&n->rng) % below;
}

/* Seconds in [lo, hi), seeded. */
static int draw_ms(nemesis *n, int lo_s, int hi_s)
{
    return lo_s * 1000 + (int)draw(n, (uint64_t)(hi_s - lo_s) * 1000);
}

static void say(const char *fmt, ...) H_PRINTF(1, 2);
static void say(const char *fmt, ...)
{
    static double t0;
    if (t0 == 0)
        t0 = h_now_s();
    va_list ap;
    va_start(ap, fmt);
    printf("[%7.1f] ", h_now_s() - t0);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

/* ---- stage instances --------------------------------------------------- */

static h_proc *stage_start(nemesis *n, int i)
{
    char *ck = h_strdupf("checkpoint.dir=%s/ck%d", n->e->h.dir, i);
    const char *const xs[] = {ck, NULL};
    h_proc *p = h_stage_start(n->e->conf, xs, NULL);
    free(ck);
    return p;
}

/* Run r of instance i's stderr, kept in the log directory. */
static void stage_save_log(nemesis *n, int i)
{
    char *path = h_strdupf("%s/i%d-r%u.log", n->logdir, i, n->run[i]);
    if (h_write_file(path, h_process_stderr(n->st[i])))
        fprintf(stderr, "bench_nemesis: %s\n", h_last_error());
    free(path);
}

/* The run failing: every live instance's log is kept first. */
static nemesis *g_n;
static void on_fail(const char *msg)
{
    h_set_fail_hook(NULL);
    for (int i = 0; g_n && i < g_n->ninst; i++)
        if (g_n->st[i])
            stage_save_log(g_n, i);
    fprintf(stderr, "FAILED: %s\n(the stages' logs: %s)\n", msg,
            g_n ? g_n->logdir : "-");
    exit(1);
}

/* What a run of instance i said, counted and kept before its process is
 * freed. */
static void stage_forget(nemesis *n, int i)
{
    stage_save_log(n, i);
    n->run[i]++;
    n->fencings += (unsigned)h_count_said(n->st[i], H_SAID_FENCED);
    h_proc_release(n->st[i]);
    n->st[i] = NULL;
}

/* An instance that exited by itself is a finding: said with its log's
 * tail, counted, and started again so that the schedule goes on. */
static void stages_check(nemesis *n)
{
    for (int i = 0; i < n->ninst; i++) {
        int status = 0;
        if (h_process_peek(n->st[i], &status) != 0)
            continue;
        say("FINDING: instance %d exited by itself (status 0x%x); its log "
            "ends:\n%s", i, status, h_process_stderr_tail(n->st[i], 3000));
        n->died++;
        stage_forget(n, i);
        n->st[i] = stage_start(n, i);
        n->restarts++;
    }
}

/* ---- the cluster ------------------------------------------------------- */

static long node_pid(nemesis *n, int node)
{
    char *path = h_strdupf("%s/node%d/pid", h_kcluster_dir(n->c), node);
    char *text = NULL;
    long pid = -1;
    if (h_read_file(path, &text, NULL) == 0)
        pid = atol(text);
    free(text);
    free(path);
    return pid;
}

/* A live instance's transactional id, from its start-up line. */
static bool txn_id_of(nemesis *n, char *buf, size_t size)
{
    for (int k = 0; k < n->ninst; k++) {
        const char *s = strstr(h_process_stderr(n->st[k]),
                               "transactional_id=");
        if (!s)
            continue;
        s += strlen("transactional_id=");
        size_t len = strcspn(s, " \n");
        snprintf(buf, size, "%.*s", (int)(len < size ? len : size - 1), s);
        return true;
    }
    return false;
}

/* The node a broker fault aims at (1..NODES), and which kind it is. */
static int pick_broker(nemesis *n, target *t)
{
    *t = (target)draw(n, 3);
    int node = -1;
    char id[256];
    if (*t == T_LEADER)
        node = h_kleader_of(n->e->q, n->e->in, (int32_t)draw(n, NPARTS),
                            NULL);
    else if (*t == T_TXN_COORD && txn_id_of(n, id, sizeof(id)))
        node = h_kleader_of(n->e->q, "__transaction_state", 0, id);
    else if (*t == T_GROUP_COORD)
        node = h_kleader_of(n->e->q, "__consumer_offsets", 0,
                            n->e->group);
    if (node < 1 || node > NODES) {
        say("  (%s unknown: a node drawn at random)", target_name[*t]);
        node = 1 + (int)draw(n, NODES);
    }
    return node;
}

static void set_links(nemesis *n, int node, h_link mode, int delay_ms)
{
    for (int i = 1; i <= NODES; i++)
        if (node == 0 || node == i)
            h_proxy_set(n->px[i], mode, delay_ms);
}

/* ---- liveness ---------------------------------------------------------- */

/* Waits until the group committed records [0, upto) of the stream;
 * returns the seconds since t_heal that took, or -1 past CATCHUP_MAX_S. */
static double catch_up(nemesis *n, double t_heal, size_t upto)
{
    int64_t want[NPARTS], got[NPARTS];
    h_stream_ends(n->e->st, upto, want);
    bool told = false;
    for (;;) {
        stages_check(n);
        for (int p = 0; p < NPARTS; p++)
            got[p] = -1;
        bool ok = h_committed_retry(n->e->h.bs, n->e->group, n->e->in,
                                    NPARTS, got, 3000) == 0;
        for (int p = 0; ok && p < NPARTS; p++)
            ok = got[p] >= want[p];
        double s = h_now_s() - t_heal;
        if (ok)
            return s;
        if (s > n->bound_s && !told) {
            /* Where it is stuck, and who holds that partition. */
            told = true;
            for (int p = 0; p < NPARTS; p++) {
                if (got[p] >= want[p])
                    continue;
                int holder = -1;
                for (int i = 0; i < n->ninst; i++)
                    if (h_assigned_mask(n->st[i], n->e->in, false) &
                        (1u << p))
                        holder = i;
                say("  past the bound: %s [%d] committed %lld of %lld, "
                    "held by instance %d", n->e->in, p, (long long)got[p],
                    (long long)want[p], holder);
            }
        }
        if (s > CATCHUP_MAX_S)
            return -1;
        h_nap(250);
    }
}

/* ---- the live blocklist ----------------------------------------------- */

/* `bloomstage blocklist VERB live ARGS... -c conf` on the direct listener
 * (the command is the operator's tool, not the stage under test). */
static void live_cmd(nemesis *n, const char *verb, const char *const *args,
                     size_t nargs)
{
    const char *argv[LATE_BATCH + 12];
    char *direct = h_strdupf("kafka.bootstrap.servers=%s", n->e->h.bs);
    size_t k = 0;
    argv[k++] = "blocklist";
    argv[k++] = verb;
    argv[k++] = LIVELIST;
    for (size_t i = 0; i < nargs && i < LATE_BATCH; i++)
        argv[k++] = args[i];
    argv[k++] = "-c";
    argv[k++] = n->e->conf;
    argv[k++] = "-X";
    argv[k++] = direct;
    argv[k] = NULL;
    /* Retried: a topic just created can be unknown to the broker asked. */
    for (int attempt = 1;; attempt++) {
        h_proc *p = h_bs_spawn(argv, NULL);
        int status = -1;
        bool ok = h_process_wait(p, H_CMD_MS, &status) == 0 &&
                  WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (ok || attempt == 5) {
            if (!ok)
                h_stage_fail(p, "bloomstage blocklist %s " LIVELIST
                             " failed %d times", verb, attempt);
            h_proc_release(p);
            break;
        }
        h_proc_release(p);
        h_nap(2000);
    }
    free(direct);
}

/* Adds up to LATE_BATCH keys of the late pool, drawn from the seed: the
 * copies processed before the stage applies the add meet the list without
 * them (forwarded if first, else duplicates), every later one with them.
 * A record meets the list as it is when processed, so where the switch
 * falls depends on the stage's lag; that it falls once, in input order,
 * does not. */
static void live_add(nemesis *n)
{
    const h_stream *st = n->e->st;
    char keys[LATE_BATCH][16];
    const char *args[LATE_BATCH];
    size_t k = 0;
    uint32_t from = (uint32_t)draw(n, st->nids);
    for (uint32_t j = 0; j < st->nids && k < LATE_BATCH; j++) {
        uint32_t id = (from + j) % (uint32_t)st->nids;
        if (n->cls[id] != K_LATE_POOL)
            continue;
        n->cls[id] = K_LATE;
        snprintf(keys[k], sizeof(keys[k]), "k%07u", id);
        args[k] = keys[k];
        k++;
    }
    if (!k)
        return;
    live_cmd(n, "add", args, k);
    n->late_adds++;
    n->late_keys += k;
    say("live-add: %zu keys on " LIVELIST " (fed %zu)", k, h_feed_next());
}

/* ---- one fault --------------------------------------------------------- */

/* Two of the three nodes away at once: every partition below
 * min.insync.replicas (2) and, every node being a KRaft controller, the
 * quorum lost.  Killed (-9, started again one after the other: the first
 * back regains the quorum and the ISR) or paused (SIGSTOP: alive but
 * silent, as a long GC or a frozen VM; resumed together). */
static void two_nodes(nemesis *n, fault f, int hold)
{
    int a = 1 + (int)draw(n, NODES), b = 1 + (a + (int)draw(n, NODES - 1)) % NODES;
    if (f == F_TWO_NODES_KILL9) {
        say("%s: nodes %d and %d, down %d ms, then %d back, then %d",
            fault_name[f], a, b, hold, a, b);
        H_MUST(h_kcluster_kill_node(n->c, a));
        H_MUST(h_kcluster_kill_node(n->c, b));
        h_nap(hold);
        H_MUST(h_kcluster_start_node(n->c, a));
        say("  node %d back: quorum and ISR regained", a);
        h_nap(hold / 2);
        H_MUST(h_kcluster_start_node(n->c, b));
        return;
    }
    long pa = node_pid(n, a), pb = node_pid(n, b);
    say("%s: nodes %d and %d (pids %ld, %ld), SIGSTOP for %d ms",
        fault_name[f], a, b, pa, pb, hold);
    if (pa <= 0 || pb <= 0 || kill((pid_t)pa, SIGSTOP) != 0 ||
        kill((pid_t)pb, SIGSTOP) != 0)
        h_test_fail("nodes %d, %d: no pid to stop", a, b);
    h_nap(hold);
    kill((pid_t)pa, SIGCONT);
    kill((pid_t)pb, SIGCONT);
}

static void run_fault(nemesis *n, fault f)
{
    int hold = draw_ms(n, n->hold_lo, n->hold_hi);
    int inst = (int)draw(n, (uint64_t)n->ninst);
    target t = T_LEADER;
    int node = 0;
    char what[160];
    snprintf(what, sizeof(what), "%s", fault_name[f]);
    switch (f) {
    case F_STAGE_KILL9:
        say("%s: instance %d, down %d ms", what, inst, hold);
        h_stage_kill9(n->st[inst], "the nemesis");
        stage_forget(n, inst);
        h_nap(hold);
        n->st[inst] = stage_start(n, inst);
        n->restarts++;
        break;
    case F_STAGE_PAUSE:
        hold += 8000; /* past consumer.session.timeout.ms (6 s) */
        say("%s: instance %d, SIGSTOP for %d ms", what, inst, hold);
        H_MUST(h_process_kill(n->st[inst], SIGSTOP));
        h_nap(hold);
        H_MUST(h_process_kill(n->st[inst], SIGCONT));
        break;
    case F_STAGE_RESTART:
        say("%s: instance %d (SIGTERM, drain, start)", what, inst);
        h_stage_stop(n->st[inst]);
        stage_forget(n, inst);
        n->st[inst] = stage_start(n, inst);
        n->restarts++;
        break;
    case F_BROKER_KILL9:
    case F_BROKER_PAUSE:
        node = pick_broker(n, &t);
        snprintf(what, sizeof(what), "%s(%s)", fault_name[f], target_name[t]);
        if (f == F_BROKER_KILL9) {
            say("%s: node %d, down %d ms", what, node, hold);
            H_MUST(h_kcluster_kill_node(n->c, node));
            h_nap(hold);
            H_MUST(h_kcluster_start_node(n->c, node));
        } else {
            long pid = node_pid(n, node);
            say("%s: node %d (pid %ld), SIGSTOP for %d ms", what, node, pid,
                hold);
            if (pid <= 0 || kill((pid_t)pid, SIGSTOP) != 0)
                h_test_fail("node %d: no pid to stop", node);
            h_nap(hold);
            kill((pid_t)pid, SIGCONT);
        }
        break;
    case F_ROLLING:
        say("%s: every node in turn (SIGTERM, start)", what);
        for (int i = 1; i <= NODES; i++) {
            H_MUST(h_kcluster_stop_node(n->c, i));
            H_MUST(h_kcluster_start_node(n->c, i));
            say("  node %d back", i);
            h_nap(5000); /* its replicas rejoin the ISR */
        }
        break;
    case F_NET_BLACKHOLE:
    case F_NET_RESET:
    case F_NET_SLOW:
    case F_NET_BLACKHOLE_ALL: {
        node = f == F_NET_BLACKHOLE_ALL ? 0 : 1 + (int)draw(n, NODES);
        h_link mode = f == F_NET_RESET  ? H_LINK_RESET
                      : f == F_NET_SLOW ? H_LINK_DELAY
                                        : H_LINK_BLACKHOLE;
        int delay = 100 + (int)draw(n, 700);
        if (f == F_NET_SLOW)
            say("%s: node %d's proxy, %d ms a byte, for %d ms", what, node,
                delay, hold);
        else if (node)
            say("%s: node %d's proxy, for %d ms", what, node, hold);
        else
            say("%s: every proxy, for %d ms", what, hold);
        set_links(n, node, mode, delay);
        h_nap(hold);
        set_links(n, node, H_LINK_PASS, 0);
        break;
    }
    case F_TWO_NODES_KILL9:
    case F_TWO_NODES_PAUSE:
        two_nodes(n, f, hold);
        break;
    case F_COUNT:
        break;
    }
    double t_heal = h_now_s();
    double s = catch_up(n, t_heal, h_feed_next());
    n->done[f]++;
    if (s < 0) {
        say("STALL: nothing caught up %d s after %s healed", CATCHUP_MAX_S,
            what);
        n->over_bound++;
        n->worst[f] = CATCHUP_MAX_S;
        h_test_fail("the stages stopped making progress after %s", what);
    }
    if (s > n->worst[f])
        n->worst[f] = s;
    if (s > n->bound_s)
        n->over_bound++;
    say("  healed; caught up in %.1f s%s (fed %zu)", s,
        s > n->bound_s ? " -- OVER THE BOUND" : "", h_feed_next());
}

static fault draw_fault(nemesis *n)
{
    if (n->dealt < n->ndeck)
        return n->deck[n->dealt++];
    unsigned sum = 0;
    for (int f = 0; f < F_COUNT; f++)
        sum += fault_weight[f];
    unsigned r = (unsigned)draw(n, sum);
    for (int f = 0; f < F_COUNT; f++) {
        if (r < fault_weight[f])
            return (fault)f;
        r -= fault_weight[f];
    }
    return F_STAGE_KILL9;
}

/* Every kind `each` times, shuffled from the seed (Fisher-Yates). */
static void deal(nemesis *n, unsigned each)
{
    n->ndeck = (size_t)each * F_COUNT;
    n->deck = h_xcalloc(n->ndeck ? n->ndeck : 1, sizeof(*n->deck));
    for (size_t i = 0; i < n->ndeck; i++)
        n->deck[i] = (fault)(i % F_COUNT);
    for (size_t i = n->ndeck; i > 1; i--) {
        size_t j = (size_t)draw(n, i);
        fault t = n->deck[i - 1];
        n->deck[i - 1] = n->deck[j];
        n->deck[j] = t;
    }
}

/* ---- the oracle -------------------------------------------------------- */

typedef struct verdict {
    size_t produced, forwarded, rejected, lost, duplicated, unexpected,
        disorder, false_drops, bad_reason, rej_missing, rej_twice,
        uncommitted, late_order, list_fps;
    uint64_t fp_allowed, list_fp_allowed;
    double fp_mean, list_fp_mean;
} verdict;

/* What the oracle knows of each input record and key while it checks. */
typedef struct facts {
    const h_stream *st;
    const uint8_t *cls;
    unsigned *fwd;  /* per record: copies in the output */
    unsigned *nrej; /* per record: copies in the rejected topic */
    char *reason;   /* per record: 'b', 'l', 'd', 't' (too-large) or '?'
                       (another) */
    char *fp;       /* per key: the list ('b', 'l') whose filter matches it
                       though it is not on that list, confirmed; else 0 */
} facts;

static const char *reason_name(char r)
{
    return r == 'b'   ? "blocklist:" BLOCKLIST
           : r == 'l' ? "blocklist:" LIVELIST
           : r == 'd' ? "duplicate"
           : r == 't' ? "too-large"
                      : "a reason not the stage's";
}

static const char *class_name(key_class c)
{
    static const char *const names[] = {
        "a key on no list", "a key on " BLOCKLIST, "a key on " LIVELIST,
        "a key of the late pool, never added", "a key added to " LIVELIST,
        "a poison record's key"};
    return names[c];
}

#define NAMED_MAX 10 /* records named per kind of finding */

/* Counts a record against the stage and names the first NAMED_MAX of each
 * kind: its key, what the key is, where it was in the input and what came
 * of it, so that a failed soak says which record to look for in the
 * stages' logs. */
static void blame(const facts *x, const char *kind, size_t *count, size_t r)
{
    if (++*count > NAMED_MAX) {
        if (*count == NAMED_MAX + 1)
            printf("  %s: more than %d, the rest not named\n", kind,
                   NAMED_MAX);
        return;
    }
    uint32_t id = x->st->id[r];
    printf("  %s: k%07u (%s), record %zu (copy %s), input partition %d "
           "offset %" PRId64 ": forwarded %u time(s), rejected %u time(s)%s"
           "%s\n", kind, id, class_name((key_class)x->cls[id]), r,
           r == x->st->first[id] ? "first" : "later", x->st->part[r],
           x->st->off[r], x->fwd[r], x->nrej[r],
           x->nrej[r] ? ", last as " : "",
           x->nrej[r] ? reason_name(x->reason[r]) : "");
}

/* The filter a stage builds for the spam list (from its text file) and
 * for the live one (a counting filter of blocklist.live.capacity over the
 * keys on it now: none is ever removed here), built by the product's own
 * `bloomstage filter build`, so that a key blocked by a list it is not on
 * can be told apart: the filter matches it (a false positive, within the
 * list's fpr) or does not (the stage's error). */
static char *list_filter(nemesis *n, char which)
{
    const h_stream *st = n->e->st;
    char *out = h_strdupf("%s/%s.bf", n->logdir,
                          which == 'b' ? BLOCKLIST : LIVELIST);
    char *list = NULL, *cap = NULL;
    if (which == 'b') {
        list = h_strdupf("%s", n->spam_path);
    } else {
        list = h_strdupf("%s/" LIVELIST "-at-end.txt", n->logdir);
        char *text = h_xmalloc(st->nids * 9 + 1);
        size_t len = 0;
        for (uint32_t id = 0; id < st->nids; id++)
            if (n->cls[id] == K_LIVE || n->cls[id] == K_LATE)
                len += (size_t)sprintf(text + len, "k%07u\n", id);
        text[len] = '\0';
        H_MUST(h_write_file(list, text));
        free(text);
        cap = h_strdupf("%zu", live_capacity(st));
    }
    char fpr[32];
    snprintf(fpr, sizeof(fpr), "%g", FPR);
    const char *const blocked[] = {"filter", "build", "--fpr", fpr, "-o",
                                   out, list, NULL};
    const char *const counting[] = {"filter", "build", "--fpr", fpr,
                                    "--counting", "--capacity", cap, "-o",
                                    out, list, NULL};
    h_proc_release(h_bs_cmd(which == 'b' ? blocked : counting, 0));
    free(list);
    free(cap);
    return out;
}

/* Sets x->fp[id] for every key some record of which was rejected by a
 * list it is not on, if that list's filter matches the key; the others
 * stay counted against the stage. */
static void confirm_list_fps(nemesis *n, facts *x)
{
    const h_stream *st = x->st;
    for (int which = 0; which < 2; which++) {
        char list = which ? 'l' : 'b';
        const char *args[NAMED_MAX * 4 + 4] = {"filter", "query", NULL};
        char keys[NAMED_MAX * 4][16];
        size_t k = 0;
        for (size_t r = 0; r < st->n && k < NAMED_MAX * 4; r++) {
            uint32_t id = st->id[r];
            key_class c = (key_class)x->cls[id];
            bool on = list == 'b' ? c == K_FILE : c == K_LIVE || c == K_LATE;
            if (!x->nrej[r] || x->reason[r] != list || on || x->fp[id])
                continue;
            x->fp[id] = '?'; /* asked once */
            snprintf(keys[k], sizeof(keys[k]), "k%07u", id);
            args[3 + k] = keys[k];
            k++;
        }
        if (!k)
            continue;
        char *filter = list_filter(n, list);
        args[2] = filter;
        args[3 + k] = NULL;
        h_proc *p = h_bs_spawn(args, NULL);
        int status = -1;
        if (h_process_wait(p, H_CMD_MS, &status) != 0 || !WIFEXITED(status) ||
            WEXITSTATUS(status) > 1)
            h_stage_fail(p, "bloomstage filter query %s failed", filter);
        for (const char *s = h_process_stdout(p); (s = strstr(s, "present\tk"));
             s++) {
            unsigned id = (unsigned)strtoul(s + strlen("present\tk"), NULL,
                                            10);
            if (id < st->nids)
                x->fp[id] = list;
        }
        say("oracle: %zu key(s) rejected by %s though not on it; its "
            "filter (%s) matches those confirmed", k, reason_name(list),
            filter);
        h_proc_release(p);
        free(filter);
    }
    for (uint32_t id = 0; id < st->nids; id++)
        if (x->fp[id] == '?')
            x->fp[id] = 0;
}

/* The input record a rejected copy r stands for: by its key and whole
 * value, or, for a poison record's copy without its value
 * (bloomstage-dropped: value; *bare set), by its bloomstage-src and key;
 * st->n if none. */
static size_t rejected_which(const nemesis *n, const h_record *r, bool *bare)
{
    const h_stream *st = n->e->st;
    size_t i = h_stream_which(st, r);
    *bare = false;
    if (i < st->n || r->value || !r->key)
        return i;
    char src[128], dropped[32];
    h_header_str(r, "bloomstage-src", src, sizeof(src));
    h_header_str(r, "bloomstage-dropped", dropped, sizeof(dropped));
    size_t len = strlen(n->e->in);
    int part = -1, end = 0;
    long long off = -1;
    if (strcmp(dropped, "value") || strncmp(src, n->e->in, len) ||
        src[len] != ':' ||
        sscanf(src + len + 1, "%d:%lld%n", &part, &off, &end) != 2 ||
        src[len + 1 + end])
        return st->n;
    for (size_t k = 0; k < n->npoison; k++) {
        size_t p = n->poison[k];
        if (st->part[p] == part && st->off[p] == off &&
            !strcmp(r->key, st->key[p])) {
            *bare = true;
            return p;
        }
    }
    return st->n;
}

static int cmp_out(const void *a, const void *b)
{
    const h_outrec *x = a, *y = b;
    if (x->part != y->part)
        return x->part < y->part ? -1 : 1;
    return x->off < y->off ? -1 : x->off > y->off;
}

static verdict oracle(nemesis *n)
{
    const uint8_t *cls = n->cls;
    h_kenv *e = n->e;
    h_stream *st = e->st;
    verdict v = {.produced = st->n};
    facts x = {.st = st, .cls = cls,
               .fwd = h_xcalloc(st->n, sizeof(unsigned)),
               .nrej = h_xcalloc(st->n, sizeof(unsigned)),
               .reason = h_xcalloc(st->n, 1),
               .fp = h_xcalloc(st->nids, 1)};
    printf("\n== the oracle's findings, each named (none: nothing "
           "below)\n");
    size_t nout = 0;
    h_outrec *o = h_read_out_committed(st, e->h.bs, e->out, e->in, &nout);
    v.forwarded = nout;
    unsigned *kfwd = h_xcalloc(st->nids, sizeof(*kfwd));
    qsort(o, nout, sizeof(*o), cmp_out);
    int64_t last[H_STREAM_MAXP][H_STREAM_MAXP];
    for (int a = 0; a < H_STREAM_MAXP; a++)
        for (int b = 0; b < H_STREAM_MAXP; b++)
            last[a][b] = -1;
    for (size_t i = 0; i < nout; i++) {
        x.fwd[o[i].rec]++;
        kfwd[o[i].id]++;
    }
    for (size_t i = 0; i < nout; i++) {
        if (cls[o[i].id] == K_FILE || cls[o[i].id] == K_LIVE)
            blame(&x, "unexpected (a listed key forwarded)", &v.unexpected,
                  o[i].rec);
        if (cls[o[i].id] == K_POISON)
            blame(&x, "unexpected (a poison record forwarded)",
                  &v.unexpected, o[i].rec);
        int64_t *l = &last[o[i].part][o[i].src_part];
        if (o[i].src_off <= *l)
            blame(&x, "out of order", &v.disorder, o[i].rec);
        *l = o[i].src_off;
    }
    h_record_list rej = {0};
    H_MUST(h_consume_all_conf(e->h.bs, e->rej, H_CONSUME_MS,
                              H_READ_COMMITTED, &rej));
    v.rejected = rej.n;
    for (size_t i = 0; i < rej.n; i++) {
        bool bare = false;
        size_t r = rejected_which(n, &rej.recs[i], &bare);
        if (r >= st->n) {
            if (++v.unexpected <= NAMED_MAX)
                printf("  unexpected: a rejected record that was never fed"
                       " (partition %d offset %" PRId64 ")\n",
                       rej.recs[i].partition, rej.recs[i].offset);
            continue;
        }
        x.nrej[r]++;
        const h_header *h = h_header_last(&rej.recs[i], "bloomstage-reason");
        char val[64] = "";
        if (h && h->value)
            snprintf(val, sizeof(val), "%.*s", (int)h->value_len,
                     (const char *)h->value);
        x.reason[r] = !strcmp(val, "blocklist:" BLOCKLIST)  ? 'b'
                      : !strcmp(val, "blocklist:" LIVELIST) ? 'l'
                      : !strcmp(val, "duplicate")          ? 'd'
                      : !strcmp(val, "too-large")          ? 't'
                                                           : '?';
        if (st->pad[r] && bare != (st->pad[r] >= POISON_BARE))
            blame(&x, bare ? "a poison record rejected without its value, "
                             "though it fits"
                           : "a poison record rejected whole, though too "
                             "large", &v.bad_reason, r);
    }
    confirm_list_fps(n, &x);
    size_t unblocked = 0;
    for (uint32_t id = 0; id < st->nids; id++) {
        size_t f = st->first[id];
        if (x.fp[id]) {
            v.list_fps++;
            printf("  a list's false positive: k%07u (%s), its filter "
                   "matches it; %s\n", id,
                   class_name((key_class)cls[id]), reason_name(x.fp[id]));
        }
        if (cls[id] == K_FILE || cls[id] == K_LIVE)
            continue;
        unblocked++;
        if (cls[id] == K_POISON)
            continue; /* never forwarded: checked per record below */
        if (kfwd[id] > 1)
            v.duplicated += kfwd[id] - 1;
        if (kfwd[id] == 0 && cls[id] == K_LATE && x.reason[f] == 'l')
            continue; /* its first copy met the list with it */
        if (kfwd[id] == 0 && x.nrej[f] == 1 && x.reason[f] == x.fp[id])
            continue; /* a list's false positive, counted above */
        if (kfwd[id] == 0) {
            if (x.nrej[f] == 1 && x.reason[f] == 'd')
                v.false_drops++;
            else
                blame(&x, "lost (no copy forwarded)", &v.lost, f);
        }
    }
    /* Per late key, in input order: copies without the list (the first
     * forwarded, the others duplicates), then from the first copy that met
     * the list with it (blocklist:live) on, every copy so. */
    bool *listed = h_xcalloc(st->nids, sizeof(*listed));
    size_t dup_named = 0;
    for (size_t r = 0; r < st->n; r++) {
        uint32_t id = st->id[r];
        char want = cls[id] == K_FILE     ? 'b'
                    : cls[id] == K_LIVE   ? 'l'
                    : cls[id] == K_POISON ? 't'
                                          : 'd';
        if (cls[id] == K_LATE) {
            bool now = x.nrej[r] == 1 && x.reason[r] == 'l';
            if (listed[id] && !now)
                blame(&x, "live list not kept", &v.late_order, r);
            listed[id] = listed[id] || now;
            if (now)
                want = 'l';
        }
        if (x.fp[id] && x.reason[r] == x.fp[id])
            want = x.fp[id];
        if (x.fwd[r] && r != st->first[id]) {
            blame(&x, "duplicated (a later copy forwarded)", &dup_named, r);
            continue; /* counted above, by key */
        }
        if (x.fwd[r]) {
            if (x.nrej[r])
                blame(&x, "rejected and forwarded", &v.rej_twice, r);
            continue;
        }
        if (x.nrej[r] == 0)
            blame(&x, "neither forwarded nor rejected", &v.rej_missing, r);
        else if (x.nrej[r] > 1)
            blame(&x, "rejected twice", &v.rej_twice, r);
        else if (x.reason[r] != want)
            blame(&x, "rejected with a wrong reason", &v.bad_reason, r);
    }
    free(listed);
    int64_t c[NPARTS];
    H_MUST(h_committed_retry(e->h.bs, e->group, e->in, NPARTS, c, 30000));
    for (int p = 0; p < NPARTS; p++)
        if (c[p] != st->next[p]) {
            v.uncommitted++;
            printf("  not committed to the end: %s [%d] committed %" PRId64
                   ", end %" PRId64 "\n", e->in, p, c[p], st->next[p]);
        }
    v.fp_mean = (double)unblocked * FPR;
    v.fp_allowed = h_poisson_upper(v.fp_mean, 1e-4);
    /* Each list's filter is sized for at most FPR; every key not on a
     * list is a draw against it. */
    size_t off_spam = 0, off_live = 0;
    for (uint32_t id = 0; id < st->nids; id++) {
        off_spam += cls[id] != K_FILE;
        off_live += cls[id] != K_LIVE && cls[id] != K_LATE;
    }
    v.list_fp_mean = (double)(off_spam + off_live) * FPR;
    v.list_fp_allowed = h_poisson_upper(v.list_fp_mean, 1e-4);
    h_record_list_free(&rej);
    free(x.fp);
    free(x.reason);
    free(x.nrej);
    free(x.fwd);
    free(kfwd);
    return v;
}

/* ---- the run ----------------------------------------------------------- */

static void usage(const char *me)
{
    fprintf(stderr,
            "usage: %s --minutes N --seed S [--instances 2|3] [--rate R]\n"
            "          [--bound SEC] [--each K] [--hold LO-HI] [--gap LO-HI]"
            "\n          [--bloomstage PATH]\n"
            "  --minutes N    how long the fault schedule runs (default 3)\n"
            "  --seed S       the stream, the blocked keys, the faults\n"
            "                 (default: from the clock; printed first)\n"
            "  --instances K  bloomstage run instances (default 2)\n"
            "  --rate R       input records a second (default 400)\n"
            "  --bound SEC    the stall allowed after a heal (default 60)\n"
            "  --each K       deal every fault kind K times first, in a "
            "seeded\n"
            "                 order, then draw by weight (default 0: draw "
            "only)\n"
            "  --hold LO-HI   how long a fault is held, whole seconds drawn "
            "in\n"
            "                 [LO, HI) (default 3-12; a stage pause adds 8)\n"
            "  --gap LO-HI    the quiet time before each fault, the same way"
            "\n                 (default 2-6)\n"
            "  --bloomstage P the binary (default: $BLOOMSTAGE_BIN or the "
            "build's)\n",
            me);
}

int main(int argc, char **argv)
{
    double minutes = 3, rate = 400, bound = 60;
    uint64_t seed = (uint64_t)h_wall_s() ^ (uint64_t)getpid() << 20;
    int ninst = 2, each = 0, hold_lo = 3, hold_hi = 12, gap_lo = 2,
        gap_hi = 6;
    const char *bin = getenv("BLOOMSTAGE_BIN");
    if (!bin || !*bin)
        bin = BENCH_BLOOMSTAGE_PATH;
    static const struct option opts[] = {
        {"minutes", required_argument, 0, 'm'},
        {"seed", required_argument, 0, 's'},
        {"instances", required_argument, 0, 'i'},
        {"rate", required_argument, 0, 'r'},
        {"bound", required_argument, 0, 'b'},
        {"each", required_argument, 0, 'e'},
        {"hold", required_argument, 0, 'H'},
        {"gap", required_argument, 0, 'g'},
        {"bloomstage", required_argument, 0, 'B'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    for (int ch; (ch = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
        switch (ch) {
        case 'm': minutes = atof(optarg); break;
        case 's': seed = strtoull(optarg, NULL, 0); break;
        case 'i': ninst = atoi(optarg); break;
        case 'r': rate = atof(optarg); break;
        case 'b': bound = atof(optarg); break;
        case 'e': each = atoi(optarg); break;
        case 'H':
        case 'g': {
            int end = 0;
            if (sscanf(optarg, "%d-%d%n", ch == 'H' ? &hold_lo : &gap_lo,
                       ch == 'H' ? &hold_hi : &gap_hi, &end) != 2 ||
                optarg[end] != '\0') {
                fprintf(stderr, "%s: --%s '%s': want LO-HI, whole "
                        "seconds\n", argv[0], ch == 'H' ? "hold" : "gap",
                        optarg);
                return 2;
            }
            break;
        }
        case 'B': bin = optarg; break;
        case 'h': usage(argv[0]); return 0;
        default: usage(argv[0]); return 2;
        }
    }
    if (optind != argc || minutes <= 0 || rate <= 0 || bound <= 0 ||
        ninst < 2 || ninst > MAXINST || each < 0 || each > 100 ||
        hold_lo < 1 || hold_hi <= hold_lo || hold_hi > 600 || gap_lo < 0 ||
        gap_hi <= gap_lo || gap_hi > 600 || !*bin) {
        usage(argv[0]);
        return 2;
    }
    printf("seed %" PRIu64 " (replay: bench/nemesis --minutes %g --seed %"
           PRIu64 " --instances %d --rate %g --bound %g --each %d --hold "
           "%d-%d --gap %d-%d)\n", seed, minutes, seed, ninst, rate, bound,
           each, hold_lo, hold_hi, gap_lo, gap_hi);
    fflush(stdout);
    setenv("BLOOMSTAGE_BIN", bin, 1);
    if (h_test_init()) {
        fprintf(stderr, "bench_nemesis: %s\n", h_last_error());
        return 1;
    }

    nemesis n = {.ninst = ninst, .rng = seed, .bound_s = bound,
                 .hold_lo = hold_lo, .hold_hi = hold_hi, .gap_lo = gap_lo,
                 .gap_hi = gap_hi};
    H_MUST(h_tmpdir_new(&n.logdir));
    g_n = &n;
    h_set_fail_hook(on_fail);
    printf("stage logs in %s\n", n.logdir);
    static const char *const proxied[] = {"--proxied", NULL};
    say("starting a %d-node Apache Kafka cluster (--proxied)", NODES);
    H_MUST(h_kcluster_start_args(NODES, proxied, &n.c));
    char list[256] = "";
    for (int i = 1; i <= NODES; i++) {
        n.px[i] = h_proxy_new(h_kcluster_proxy_port(n.c, i),
                              h_kcluster_proxied_port(n.c, i));
        if (!n.px[i])
            h_test_fail("proxy of node %d: %s", i, h_last_error());
        size_t len = strlen(list);
        snprintf(list + len, sizeof(list) - len, "%s127.0.0.1:%d",
                 i > 1 ? "," : "", h_proxy_port(n.px[i]));
    }
    say("cluster %s; the stages' bootstrap (proxies) %s",
        h_kcluster_bootstraps(n.c), list);

    /* The stream: its records fed at `rate` over the schedule, the rest at
     * its end. */
    size_t total = (size_t)(rate * (minutes * 60 + 30));
    h_stream *st = h_stream_new(total, NPARTS, seed);
    n.poison = h_xcalloc(total / POISON_EVERY + 1, sizeof(*n.poison));
    while (st->n < total) {
        size_t k = total - st->n < POISON_EVERY ? total - st->n
                                                : POISON_EVERY - 1;
        h_stream_add(st, k, DUP_PCT);
        if (st->n == total)
            break;
        n.poison[n.npoison] = st->n;
        h_stream_add_big(st, n.npoison % 2 ? POISON_BARE : POISON_WHOLE);
        n.npoison++;
    }
    n.cls = h_xcalloc(st->nids, 1);
    for (size_t k = 0; k < n.npoison; k++)
        n.cls[st->id[n.poison[k]]] = K_POISON;
    size_t nfile = 0, nlive = 0;
    char *spam_text = h_xmalloc(st->nids * 9 + 1), *live_text =
                                                      h_xmalloc(st->nids * 9 + 1);
    size_t slen = 0, llen = 0;
    for (uint32_t id = 0; id < st->nids; id++) {
        uint64_t m = h_mix64(seed ^ ((uint64_t)id << 1 | 1)) % 100;
        if (n.cls[id] == K_POISON) {
            continue;
        } else if (m < FILE_PCT) {
            n.cls[id] = K_FILE;
            nfile++;
            slen += (size_t)sprintf(spam_text + slen, "k%07u\n", id);
        } else if (m < FILE_PCT + LIVE_PCT) {
            n.cls[id] = K_LIVE;
            nlive++;
            llen += (size_t)sprintf(live_text + llen, "k%07u\n", id);
        } else if (m < FILE_PCT + LIVE_PCT + LATE_PCT) {
            n.cls[id] = K_LATE_POOL;
        }
    }
    spam_text[slen] = live_text[llen] = '\0';
    char *spam_path = n.spam_path =
        h_strdupf("%s/" BLOCKLIST ".txt", n.logdir);
    char *live_path = h_strdupf("%s/" LIVELIST ".txt", n.logdir);
    H_MUST(h_write_file(spam_path, spam_text));
    H_MUST(h_write_file(live_path, live_text));
    free(spam_text);
    free(live_text);
    static const char *const in_conf[] = {"max.message.bytes=" IN_MAX,
                                          NULL};
    static const char *const rej_conf[] = {"max.message.bytes=" REJ_MAX,
                                           NULL};
    h_kenv_opts o = {.nparts = NPARTS, .rejected = true, .kafka_store = true,
                     .in_conf = in_conf, .rej_conf = rej_conf,
                     .checkpoint_ms = 1000,
                     .capacity = (int)(st->nids + 100000),
                     .bootstraps = list};
    char *conf_extra = h_strdupf(
        "exactly_once.method=transactions\n"
        "dedup.fpr=%g\n"
        "blocklist." BLOCKLIST ".path=%s\n"
        "blocklist." LIVELIST ".topic=nemesis-" LIVELIST "\n"
        "blocklist." LIVELIST ".capacity=%zu\n",
        FPR, spam_path, live_capacity(st));
    o.extra = conf_extra;
    n.e = h_kenv_new(n.c, "nemesis", &o);
    n.e->st = st;
    static const char *const compact[] = {"cleanup.policy=compact", NULL};
    H_MUST(h_create_topic(n.e->h.bs, "nemesis-" LIVELIST, 2,
                          h_kcluster_rf(n.c), compact));
    const char *const load[] = {live_path};
    live_cmd(&n, "load", load, 1);
    say("stream: %zu records, %zu keys (%zu on " BLOCKLIST ", %zu on "
        LIVELIST ", %d%% more to add to " LIVELIST "), %d%% repeats, %zu "
        "poison (one in %d: %d and %d bytes); %g records/s", st->n, st->nids,
        nfile, nlive, LATE_PCT, DUP_PCT, n.npoison, POISON_EVERY,
        POISON_WHOLE, POISON_BARE, rate);

    for (int i = 0; i < ninst; i++)
        n.st[i] = stage_start(&n, i);
    for (int i = 0; i < ninst; i++)
        h_wait_said(n.st[i], H_SAID_TXN, 1, 120000);
    h_feed_start(n.e->h.bs, n.e->in, st, 0);
    h_feed_rate(rate);
    double t_first = catch_up(&n, h_now_s(), h_feed_next());
    say("%d instances up; caught up with the feed in %.1f s", ninst,
        t_first);

    deal(&n, (unsigned)each);
    double t_end = h_now_s() + minutes * 60;
    unsigned faults = 0;
    while (h_now_s() < t_end) {
        h_nap(draw_ms(&n, n.gap_lo, n.gap_hi));
        if (faults % 3 == 1)
            live_add(&n);
        run_fault(&n, draw_fault(&n));
        faults++;
    }
    say("schedule over after %u faults; producing the rest", faults);
    h_feed_finish(180000);
    double s_last = catch_up(&n, h_now_s(), st->n);
    if (s_last < 0)
        h_test_fail("the input's end was not committed %d s after the feed "
                    "ended", CATCHUP_MAX_S);
    say("input's end committed %.1f s after the feed ended", s_last);
    for (int i = 0; i < ninst; i++) {
        h_stage_stop(n.st[i]);
        stage_forget(&n, i);
    }
    verdict v = oracle(&n);

    printf("\n== bench/nemesis report\n");
    printf("seed                 %" PRIu64 "\n", seed);
    printf("instances            %d, %g records/s, stall bound %g s\n",
           ninst, rate, bound);
    printf("records produced     %zu (%zu keys: %zu on " BLOCKLIST ", %zu on "
           LIVELIST " from the start, %zu added in %u live adds)\n",
           v.produced, st->nids, nfile, nlive, n.late_keys, n.late_adds);
    printf("records forwarded    %zu\n", v.forwarded);
    printf("records rejected     %zu\n", v.rejected);
    printf("poison records       %zu (too large for the output: %zu to go "
           "to the rejected topic whole, %zu without their value)\n",
           n.npoison, (n.npoison + 1) / 2, n.npoison / 2);
    printf("faults               %u (holds %d - %d s, gaps %d - %d s; %zu "
           "dealt of a deck of every kind %d times, the rest drawn by "
           "weight)\n", faults, hold_lo, hold_hi, gap_lo, gap_hi, n.dealt,
           each);
    printf("  %-22s %5s %14s\n", "type", "count", "largest stall");
    for (int f = 0; f < F_COUNT; f++)
        printf("  %-22s %5u %12.1f s\n", fault_name[f], n.done[f],
               n.worst[f]);
    if (each > 0) {
        unsigned fewest = n.done[0];
        for (int f = 1; f < F_COUNT; f++)
            if (n.done[f] < fewest)
                fewest = n.done[f];
        printf("coverage             every kind at least %d times: %s "
               "(fewest %u)\n", each, fewest >= (unsigned)each ? "PASS" :
               "MISS", fewest);
    }
    printf("lost                 %zu\n", v.lost);
    printf("duplicated           %zu\n", v.duplicated);
    printf("unexpected           %zu\n", v.unexpected);
    printf("out of order         %zu\n", v.disorder);
    printf("live list not kept   %zu (a copy after one that met the list "
           "with its key, without it)\n", v.late_order);
    printf("rejected missing     %zu, twice %zu, wrong reason %zu\n",
           v.rej_missing, v.rej_twice, v.bad_reason);
    printf("false drops          %zu (dedup.fpr %g: expected %.4f, at most "
           "%" PRIu64 ")\n", v.false_drops, FPR, v.fp_mean, v.fp_allowed);
    printf("list false positives %zu (keys a list's filter matches though "
           "not on it, confirmed by that filter; blocklist.*.fpr %g: "
           "expected at most %.4f, allowed %" PRIu64 ")\n", v.list_fps, FPR,
           v.list_fp_mean, v.list_fp_allowed);
    printf("partitions not committed to the end  %zu\n", v.uncommitted);
    printf("stalls over the bound %u\n", n.over_bound);
    printf("stage restarts       %u (%u exited by themselves)\n", n.restarts,
           n.died);
    printf("fencings logged      %u\n", n.fencings);
    printf("feeder recoveries    %u\n", h_feed_recoveries());
    printf("stage logs           %s\n", n.logdir);
    bool ok = v.lost == 0 && v.duplicated == 0 && v.unexpected == 0 &&
              v.disorder == 0 && v.rej_missing == 0 && v.rej_twice == 0 &&
              v.bad_reason == 0 && v.false_drops <= v.fp_allowed &&
              v.list_fps <= v.list_fp_allowed &&
              v.late_order == 0 &&
              v.uncommitted == 0 && n.over_bound == 0 && n.died == 0;
    printf("verdict              %s\n", ok ? "PASS" : "FAIL");

    for (int i = 1; i <= NODES; i++)
        h_proxy_free(n.px[i]);
    h_kenv_free(n.e);
    (void)h_kcluster_stop(n.c);
    free(spam_path);
    free(live_path);
    free(conf_extra);
    free(n.cls);
    free(n.poison);
    free(n.deck);
    return ok ? 0 : 1;
}
