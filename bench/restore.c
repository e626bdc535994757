/*
 * restore.c -- bench_restore: how long `bloomstage run` takes to restore
 * after a kill -9 on a 3-node Apache Kafka cluster (replication 3, min ISR
 * 2), with every broker up and with one away (issue 26's target: under 2 s
 * plus the session timeout, under 2 s with static membership).  bench/
 * restore starts nothing itself; this starts the cluster (scripts/kafka,
 * through the support layer) and stops it at the end.
 *
 *   bench_restore [--records N] [--rounds R] [--methods replay,transactions]
 *                 [--membership dynamic,static] [--bloomstage PATH]
 *                 [--baseline PATH]
 *
 * For each exactly_once.method and each membership (a configuration): its
 * own topics (6 partitions, checkpoint.store=kafka), N records of N
 * distinct keys loaded, one stage that forwards them all.  With replay
 * nothing is checkpointed after the first (empty) state
 * (checkpoint.interval.ms one hour, checkpoint.records 0), so every
 * restore reads the whole output back: an output tail of N records.  With
 * transactions the checkpoint is written with the transaction every 5 s
 * (the default checkpoint.interval.ms) and a restore reads it from the
 * checkpoint topic, with no tail.  The stage's configuration is the
 * tests' (h_kenv_new: consumer.session.timeout.ms 6 s, the broker's least,
 * 1 s heartbeats) but for two of its settings, left at the product's
 * defaults (product_defaults says which).
 * Then, R rounds of two cycles each:
 *
 *   up:   kill -9 of the stage, a new one started at once on the same
 *         configuration; the restore time is its spawn to the moment it
 *         holds every input partition restored (its log's `partition
 *         assigned` lines, or `partition restored` for one deferred),
 *         polled every 10 ms -- from then on it consumes -- and the
 *         stage's CPU seconds until then, and the seconds its threads
 *         waited for a CPU (what a loaded machine adds);
 *   away: one broker killed -9 first -- with replay the leader of output
 *         partition 0 (the tail the restore reads), with transactions the
 *         group's coordinator (the committed offsets the restore reads) --
 *         and, once metadata shows no partition led by it (the controller
 *         moved them), the same kill -9 and start; the broker is started
 *         again after the measurement.
 *
 * The up cycle is the baseline: each round prints both times and their
 * ratio, and the end the median with min - max, the target (2 s plus
 * consumer.session.timeout.ms, 6 s here, for a dynamic member; 2 s for a
 * static one) marked PASS or MISS by the away cycles' largest time, and a
 * breakdown from the stage's log: spawn to `started`, to the group's
 * assignment (the rebalance callback, where the restore's own work
 * begins), to the first partition restored, and the seconds the output
 * tail took.  At
 * the end of each configuration the stage is stopped and its output read
 * at read_committed: every key exactly once, or the run fails.
 *
 * --baseline PATH: every round runs its two cycles with the baseline
 * binary (e.g. one built from main) as well as with --bloomstage's, on
 * the same cluster and topics, which of the two goes first alternating
 * from round to round; each round prints the pair's ratios (restore
 * time and CPU), the end their medians and spread.  The stage that
 * forwards the records first is --bloomstage's.
 *
 * BENCH_RESTORE_X="k=v k=v" adds -X settings to every stage, e.g.
 * kafka.debug=protocol,cgrp to see which request a restore waits on.
 *
 * Exit 0 if every restore finished and every output checked out (a target
 * missed is printed, not a failure), 1 otherwise, 2 on usage.
 */
#include "support.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef BENCH_BLOOMSTAGE_PATH
#define BENCH_BLOOMSTAGE_PATH ""
#endif

#define NODES 3
#define NPARTS 6
#define MAX_ROUNDS 9
#define SESSION_S 6.0      /* h_kenv's consumer.session.timeout.ms */
#define RESTORE_MAX_S 180  /* a restore not done by then: the run fails */
#define MOVE_MAX_S 120     /* leaders still on the killed node: fails */

typedef struct cycle {
    double restore; /* spawn to every partition restored */
    double started; /* spawn to the `started` line */
    double join;    /* spawn to the rebalance callback (the group's
                     * answer: the restore's own work begins) */
    double first;   /* spawn to the first partition restored */
    double tail;    /* the `output tail replayed` lines' seconds */
    double cpu;     /* the stage's CPU seconds until then */
    double runq;    /* and its threads' seconds waiting for a CPU */
    double moved;   /* away: the broker's kill to its leaders moved */
    int node;       /* away: the node killed */
} cycle;

/* The binaries compared: [0] --bloomstage's, [1] --baseline's (NULL:
 * none). */
#define NBIN 2

typedef struct config {
    const char *method;
    bool stat; /* static membership */
    cycle up[NBIN][MAX_ROUNDS], away[NBIN][MAX_ROUNDS];
} config;

static h_kcluster *g_c;
static const char *g_logdir;
static const char *g_bins[NBIN];
static const char *const g_bin_names[NBIN] = {"new", "base"};
static char *g_link; /* the path the support layer starts, a symlink to
                      * the binary of the cycle */

/* Points g_link at binary b (a new link renamed over it). */
static void use_binary(int b)
{
    if (!g_link)
        return;
    char *tmp = h_strdupf("%s.tmp", g_link);
    unlink(tmp);
    if (symlink(g_bins[b], tmp) != 0 || rename(tmp, g_link) != 0)
        h_test_fail("%s -> %s: %s", g_link, g_bins[b], strerror(errno));
    free(tmp);
}

static double median_of(const double *v, int n, double *lo, double *hi)
{
    double s[MAX_ROUNDS];
    memcpy(s, v, (size_t)n * sizeof(*s));
    *lo = *hi = v[0];
    for (int i = 1; i < n; i++) {
        *lo = v[i] < *lo ? v[i] : *lo;
        *hi = v[i] > *hi ? v[i] : *hi;
    }
    return h_sort_median(s, (size_t)n);
}

/* Whether metadata (every topic, internal ones too) shows a partition
 * led by node, or by nobody. */
static bool leads_any(rd_kafka_t *q, int node)
{
    const rd_kafka_metadata_t *md = NULL;
    if (rd_kafka_metadata(q, 1, NULL, &md, 5000) != 0)
        return true;
    bool any = false;
    for (int t = 0; t < md->topic_cnt && !any; t++)
        for (int p = 0; p < md->topics[t].partition_cnt && !any; p++) {
            int l = md->topics[t].partitions[p].leader;
            any = l == node || l < 0;
        }
    rd_kafka_metadata_destroy(md);
    return any;
}

/* The stage's log, read for the cycle's breakdown: the `started` line,
 * the rebalance callback's start (its debug line `stage state ...
 * to=rebalancing`), the first partition of topic restored, the output
 * tail's seconds. */
static void breakdown(h_proc *p, const char *topic, double spawn, cycle *cy)
{
    const char *log = h_process_stderr(p);
    unsigned held = 0;
    cy->started = cy->join = cy->first = -1;
    cy->tail = 0;
    for (const char *l = log; l && *l;) {
        const char *eol = strchr(l, '\n');
        size_t len = eol ? (size_t)(eol - l) : strlen(l);
        char line[2048];
        snprintf(line, sizeof(line), "%.*s", (int)len, l);
        double t = h_log_time(line);
        if (t > 0 && cy->started < 0 && strstr(line, "msg=started "))
            cy->started = t - spawn;
        if (t > 0 && cy->join < 0 && strstr(line, "to=rebalancing"))
            cy->join = t - spawn;
        if (strstr(line, H_SAID_REPLAYED)) {
            const char *s = strstr(line, " seconds=");
            if (s)
                cy->tail += atof(s + strlen(" seconds="));
        }
        h_assigned a;
        if (t > 0 && h_partition_line(line, topic, &a) == H_LINE_PARTITION &&
            !a.revoked && !(held & (1u << a.partition))) {
            if (!held)
                cy->first = t - spawn;
            held |= 1u << a.partition;
        }
        l = eol ? eol + 1 : NULL;
    }
}

/* h_kenv_new's configuration without the two lines that are the tests'
 * and slow a restore down: checkpoint.chunk.bytes=16k (the default is
 * 512k) and consumer.fetch.wait.max.ms=100, which the checkpoint and tail
 * readers take too (theirs is 10 ms by default, and a read that ends on
 * a transaction marker waits for one empty fetch). */
static void product_defaults(h_kenv *e)
{
    char *text = NULL;
    H_MUST(h_read_file(e->conf, &text, NULL));
    size_t len = strlen(text), k = 0;
    char *out = h_xmalloc(len + 1);
    for (char *l = text; *l;) {
        char *eol = strchr(l, '\n');
        size_t n = eol ? (size_t)(eol - l) + 1 : strlen(l);
        if (strncmp(l, "checkpoint.chunk.bytes=", 23) != 0 &&
            strncmp(l, "consumer.fetch.wait.max.ms=", 27) != 0) {
            memcpy(out + k, l, n);
            k += n;
        }
        l += n;
    }
    out[k] = '\0';
    H_MUST(h_write_file(e->conf, out));
    free(out);
    free(text);
}

/* The seconds pid's threads waited, runnable, for a CPU (the second
 * field of /proc/PID/task/TID/schedstat, summed): what a busy machine
 * adds to a restore's wall time.  -1 if unreadable. */
static double runq_wait_s(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    double sum = 0;
    for (struct dirent *t; (t = readdir(d));) {
        if (t->d_name[0] == '.')
            continue;
        char *sp = h_strdupf("%s/%s/schedstat", path, t->d_name);
        char *text = NULL;
        unsigned long long run = 0, wait = 0;
        if (h_read_file(sp, &text, NULL) == 0 &&
            sscanf(text, "%llu %llu", &run, &wait) == 2)
            sum += (double)wait / 1e9;
        free(text);
        free(sp);
    }
    closedir(d);
    return sum;
}

/* A kill -9 of *p and a new stage on e's configuration: the cycle's
 * times.  *p is the new one. */
static void restart(h_kenv *e, const char *const *xs, h_proc **p, cycle *cy,
                    const char *tag)
{
    h_stage_kill9(*p, tag);
    h_proc_release(*p);
    double spawn = h_wall_s();
    *p = h_stage_start(e->conf, xs, NULL);
    unsigned all = (1u << NPARTS) - 1;
    for (;;) {
        if (h_assigned_mask(*p, e->in, false) == all)
            break;
        h_stage_alive(*p, "while it restored");
        if (h_wall_s() - spawn > RESTORE_MAX_S)
            h_stage_fail(*p, "%s: not every partition restored after %d s",
                         tag, RESTORE_MAX_S);
        h_nap(10);
    }
    cy->restore = h_wall_s() - spawn;
    cy->cpu = h_proc_cpu_s(h_process_pid(*p));
    cy->runq = runq_wait_s(h_process_pid(*p));
    breakdown(*p, e->in, spawn, cy);
    char *path = h_strdupf("%s/%s.log", g_logdir, tag);
    if (h_write_file(path, h_process_stderr(*p)))
        fprintf(stderr, "bench_restore: %s\n", h_last_error());
    free(path);
}

static void print_cycle(const char *what, const cycle *cy)
{
    printf("    %-4s %6.2f s  (started %.2f, assignment %.2f, first "
           "partition %.2f, restored %.2f s after the assignment, tail "
           "%.2f s; CPU %.2f s, waiting for a CPU %.2f s", what, cy->restore,
           cy->started, cy->join, cy->first, cy->restore - cy->join,
           cy->tail, cy->cpu, cy->runq);
    if (cy->node)
        printf("; node %d killed, its leaders moved in %.1f s", cy->node,
               cy->moved);
    printf(")\n");
}

/* Round r's two cycles (up, then away) with binary b. */
static void run_cycles(h_kenv *e, const char *const *xs, h_proc **p,
                       config *cf, int r, int b, const char *name,
                       bool replay)
{
    char tag[64];
    use_binary(b);
    snprintf(tag, sizeof(tag), "%s-r%d-%s-up", name, r + 1,
             g_bin_names[b]);
    restart(e, xs, p, &cf->up[b][r], tag);
    printf("   %s\n", g_bins[1] ? g_bin_names[b] : "");
    print_cycle("up", &cf->up[b][r]);
    fflush(stdout);

    int node = replay ? h_kleader_of(e->q, e->out, 0, NULL)
                      : h_kleader_of(e->q, "__consumer_offsets", 0, e->group);
    if (node < 1 || node > NODES)
        h_test_fail("no leader known to kill (%d)", node);
    cycle *cy = &cf->away[b][r];
    cy->node = node;
    double k0 = h_now_s();
    H_MUST(h_kcluster_kill_node(g_c, node));
    while (leads_any(e->q, node)) {
        if (h_now_s() - k0 > MOVE_MAX_S)
            h_test_fail("node %d still leads partitions %d s after its "
                        "kill", node, MOVE_MAX_S);
        h_nap(100);
    }
    cy->moved = h_now_s() - k0;
    snprintf(tag, sizeof(tag), "%s-r%d-%s-away", name, r + 1,
             g_bin_names[b]);
    restart(e, xs, p, cy, tag);
    print_cycle("away", cy);
    fflush(stdout);
    H_MUST(h_kcluster_start_node(g_c, node));
}

static void run_config(config *cf, size_t nrec, int rounds, int ci)
{
    char name[32];
    snprintf(name, sizeof(name), "restore%d", ci);
    bool replay = !strcmp(cf->method, "replay");
    char *extra = h_strdupf("exactly_once.method=%s\n%s%s%s", cf->method,
                            replay ? "checkpoint.records=0\n" : "",
                            cf->stat ? "consumer.group.instance.id=" : "",
                            cf->stat ? "bench-restore\n" : "");
    h_kenv_opts o = {.nparts = NPARTS, .kafka_store = true,
                     .checkpoint_ms = replay ? 3600000 : 5000,
                     .capacity = (int)(nrec / NPARTS + 10000),
                     .extra = extra};
    h_kenv *e = h_kenv_new(g_c, name, &o);
    product_defaults(e);
    h_stream *st = h_stream_new(nrec, NPARTS, 0x7e57 + (uint64_t)ci);
    h_stream_add(st, nrec, 0);
    e->st = st;
    printf("\n== %s, %s membership: loading %zu records\n", cf->method,
           cf->stat ? "static" : "dynamic", nrec);
    fflush(stdout);
    double t0 = h_now_s();
    h_stream_produce(st, e->h.bs, e->in, 0, nrec, NULL);
    printf("   loaded in %.1f s; the first stage forwards them\n",
           h_now_s() - t0);
    fflush(stdout);
    char *ck = h_strdupf("checkpoint.dir=%s/ck", e->h.dir);
    const char *const xs[] = {ck, NULL};
    h_proc *p = h_stage_start(e->conf, xs, NULL);
    h_proc *procs[] = {p, NULL};
    t0 = h_now_s();
    if (replay)
        h_wait_out_tolerant(e->q, e->out, NPARTS, procs, (int64_t)nrec,
                            600000);
    else
        h_wait_committed_tolerant(e->h.bs, e->group, e->in, NPARTS, st->next,
                                  procs, 600000);
    printf("   forwarded in %.1f s\n", h_now_s() - t0);
    fflush(stdout);
    int nbin = g_bins[1] ? NBIN : 1;
    for (int r = 0; r < rounds; r++) {
        printf("  round %d\n", r + 1);
        for (int k = 0; k < nbin; k++) {
            int b = (r + k) % nbin; /* who goes first alternates */
            run_cycles(e, xs, &p, cf, r, b, name, replay);
        }
    }
    use_binary(0);
    h_stage_stop(p);
    h_proc_release(p);
    size_t n = 0;
    (void)h_kenv_expect_once(e, &n, "after every restore");
    printf("   output: %zu records, every key once\n", n);
    free(ck);
    free(extra);
    h_kenv_free(e);
}

/* One binary's line: up and away medians (min - max), away / up, the
 * tail, the CPU, and the target. */
static void report_bin(const config *cf, int rounds, int bin)
{
    double up[MAX_ROUNDS], away[MAX_ROUNDS], ratio[MAX_ROUNDS],
        tail[MAX_ROUNDS], cpu[MAX_ROUNDS], lo, hi, rlo, rhi, tlo, thi, clo,
        chi;
    for (int r = 0; r < rounds; r++) {
        up[r] = cf->up[bin][r].restore;
        away[r] = cf->away[bin][r].restore;
        ratio[r] = away[r] / up[r];
        tail[r] = cf->away[bin][r].tail;
        cpu[r] = cf->away[bin][r].cpu;
    }
    double target = cf->stat ? 2.0 : 2.0 + SESSION_S;
    double um = median_of(up, rounds, &lo, &hi);
    printf("  %-12s %-7s %-4s up %5.2f s (%.2f - %.2f)", cf->method,
           cf->stat ? "static" : "dynamic", g_bins[1] ? g_bin_names[bin] : "",
           um, lo, hi);
    double m = median_of(away, rounds, &lo, &hi);
    double rm = median_of(ratio, rounds, &rlo, &rhi);
    double tm = median_of(tail, rounds, &tlo, &thi);
    double cm = median_of(cpu, rounds, &clo, &chi);
    printf("  away %5.2f s (%.2f - %.2f) = %.2fx up (%.2f - %.2f); tail "
           "%.2f s (%.2f - %.2f); CPU away %.2f s (%.2f - %.2f)\n", m, lo,
           hi, rm, rlo, rhi, tm, tlo, thi, cm, clo, chi);
    printf("  %-25s target away < %.0f s: %s (largest %.2f s)\n", "",
           target, hi < target ? "PASS" : "MISS", hi);
}

/* With a baseline: per cycle kind, new / base of the restore time, of
 * the restore's own work (from the assignment to the last partition
 * restored) and of the stage's CPU, round by round, as median (min -
 * max). */
static void report_pair(const config *cf, int rounds)
{
    for (int away = 0; away < 2; away++) {
        double t[MAX_ROUNDS], w[MAX_ROUNDS], c[MAX_ROUNDS], tlo, thi, wlo,
            whi, clo, chi;
        for (int r = 0; r < rounds; r++) {
            const cycle *n = away ? &cf->away[0][r] : &cf->up[0][r];
            const cycle *b = away ? &cf->away[1][r] : &cf->up[1][r];
            t[r] = n->restore / b->restore;
            w[r] = (n->restore - n->join) / (b->restore - b->join);
            c[r] = n->cpu / b->cpu;
        }
        double tm = median_of(t, rounds, &tlo, &thi);
        double wm = median_of(w, rounds, &wlo, &whi);
        double cm = median_of(c, rounds, &clo, &chi);
        printf("  %-25s new / base, %-4s time %.2fx (%.2f - %.2f), from "
               "the assignment %.2fx (%.2f - %.2f), CPU %.2fx (%.2f - "
               "%.2f)\n", "", away ? "away" : "up", tm, tlo, thi, wm, wlo,
               whi, cm, clo, chi);
    }
}

static void report(const config *cf, int rounds)
{
    for (int b = 0; b < (g_bins[1] ? NBIN : 1); b++)
        report_bin(cf, rounds, b);
    if (g_bins[1])
        report_pair(cf, rounds);
}

static void usage(const char *me)
{
    fprintf(stderr,
            "usage: %s [--records N] [--rounds R] [--methods LIST]\n"
            "          [--membership LIST] [--bloomstage PATH]\n"
            "  --records N       records (and keys) before the kill "
            "(default 1000000)\n"
            "  --rounds R        rounds of an up and an away cycle "
            "(default 3, at most %d)\n"
            "  --methods LIST    exactly_once.method values, comma-"
            "separated\n"
            "                    (default replay,transactions)\n"
            "  --membership LIST dynamic and/or static (default "
            "dynamic,static)\n"
            "  --bloomstage P    the binary (default: $BLOOMSTAGE_BIN or "
            "the build's)\n"
            "  --baseline P      a second binary, run beside it in every "
            "round\n",
            me, MAX_ROUNDS);
}

int main(int argc, char **argv)
{
    size_t nrec = 1000000;
    int rounds = 3;
    const char *methods = "replay,transactions", *members = "dynamic,static";
    const char *bin = getenv("BLOOMSTAGE_BIN");
    if (!bin || !*bin)
        bin = BENCH_BLOOMSTAGE_PATH;
    static const struct option opts[] = {
        {"records", required_argument, 0, 'n'},
        {"rounds", required_argument, 0, 'r'},
        {"methods", required_argument, 0, 'm'},
        {"membership", required_argument, 0, 'M'},
        {"bloomstage", required_argument, 0, 'B'},
        {"baseline", required_argument, 0, 'b'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    for (int ch; (ch = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
        switch (ch) {
        case 'n': nrec = (size_t)strtoull(optarg, NULL, 10); break;
        case 'r': rounds = atoi(optarg); break;
        case 'm': methods = optarg; break;
        case 'M': members = optarg; break;
        case 'B': bin = optarg; break;
        case 'b': g_bins[1] = optarg; break;
        case 'h': usage(argv[0]); return 0;
        default: usage(argv[0]); return 2;
        }
    }
    config cfs[4];
    int ncf = 0;
    const char *const mnames[] = {"replay", "transactions"};
    for (int m = 0; m < 2; m++)
        for (int s = 0; s < 2; s++)
            if (strstr(methods, mnames[m]) &&
                strstr(members, s ? "static" : "dynamic"))
                cfs[ncf++] = (config){.method = mnames[m], .stat = s};
    if (optind != argc || nrec < 1000 || nrec > 9000000 || rounds < 1 ||
        rounds > MAX_ROUNDS || !ncf || !*bin) {
        usage(argv[0]);
        return 2;
    }
    char *logdir = NULL;
    H_MUST(h_tmpdir_new(&logdir));
    g_logdir = logdir;
    g_bins[0] = bin;
    if (g_bins[1]) {
        /* The support layer starts the path it was given at init: a link
         * that each cycle points at its binary. */
        g_link = h_strdupf("%s/bloomstage", logdir);
        use_binary(0);
        bin = g_link;
    }
    setenv("BLOOMSTAGE_BIN", bin, 1);
    if (h_test_init()) {
        fprintf(stderr, "bench_restore: %s\n", h_last_error());
        return 1;
    }
    h_stage_debug_env(NULL, "BENCH_RESTORE_X");
    printf("bench_restore: %zu records, %d rounds; the stages' logs in %s\n",
           nrec, rounds, logdir);
    if (g_bins[1])
        printf("new: %s\nbase: %s\n", g_bins[0], g_bins[1]);
    printf("starting a %d-node Apache Kafka cluster\n", NODES);
    fflush(stdout);
    H_MUST(h_kcluster_start(NODES, &g_c));
    printf("cluster %s (replication %d)\n", h_kcluster_bootstraps(g_c),
           h_kcluster_rf(g_c));
    for (int i = 0; i < ncf; i++)
        run_config(&cfs[i], nrec, rounds, i);
    printf("\n== restore after kill -9: median (min - max) over %d rounds; "
           "consumer.session.timeout.ms %.0f s\n", rounds, SESSION_S);
    for (int i = 0; i < ncf; i++)
        report(&cfs[i], rounds);
    H_MUST(h_kcluster_stop(g_c));
    return 0;
}
