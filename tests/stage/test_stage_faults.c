/*
 * test_stage_faults.c -- `bloomstage run` under crashes and failures: what
 * docs/guarantees.md and DESIGN.md ("Checkpoint, then
 * commit") promise, checked from the outside, on the real binary against
 * `bloomstage mock-broker`.
 *
 *   1. kill -9 at many moments (right after start, during the group join,
 *      just after the assignment, right after a checkpoint, between
 *      checkpoints), with delta checkpoints and with short chains that
 *      compact often, restart each time with the same directory and group:
 *      after every kill the group's committed offsets are at most the
 *      checkpoints on disk, every checkpoint verifies, and at the end every
 *      unique key is in the output, duplicates within a precise bound
 *      (at_least_once) or none (exactly_once);
 *   2. a delivery failure (Produce errors injected in the broker, retriable
 *      or permanent) commits nothing past the last checkpoint, rolls back
 *      (the stage says so), and loses nothing once the errors clear;
 *   3. the broker going away mid-stream and coming back loses nothing; a
 *      commit that failed (checkpoint ahead of it) is made again;
 *   4. a full checkpoint directory (a small tmpfs, filled) pauses the
 *      stage: commits stop, nothing is lost, it resumes when space is freed;
 *   5. the same with a read-only directory (chattr +i as root, else 0555);
 *   6. rebalances while paused: partitions taken away during the pause and
 *      given back after the resume are consumed again; partitions first
 *      assigned while the directory is unwritable neither stop the stage
 *      nor lose records;
 *   7. poison records (too large for the stage's producer once the copy
 *      carries bloomstage-src): routed to rejected.topic at once with
 *      reason too-large, without a rollback, both guarantees; forwarded
 *      when the producer takes them; without rejected.topic a stop naming
 *      the record, nothing committed past it; copies the broker refuses in
 *      delivery reports sent again alone, then routed; every record
 *      exactly once in the output or rejected.topic.
 *
 * Test 2 also checks the backoff of failed rounds in a row: 0.5, 1, 2 s,
 * each line naming the record whose delivery failed.
 *
 * A damaged checkpoint at start-up (exit 1 naming the file, nothing
 * consumed, produced or committed) is test_stage.c's
 * (test_graceful_stop_and_restart and the start-up failure tests), not
 * repeated here.
 *
 * Throughout, every poll of the committed offsets also checks invariant 1
 * of stage.c: the offset committed for a partition is at most the next
 * offset in that partition's checkpoint file (read after the commit, so a
 * violation seen is a real one: checkpoint files only move forward).
 *
 * Built on the support layer (harness/, support.h).  Needs
 * BLOOMSTAGE_BIN (ctest sets it).  Tests 4 to 6 use mount(2) and
 * chattr(1) as root and skip when they cannot (test 5 uses mode 0555 when
 * not root).  For debugging: BS_FAULTS_ONLY=PATTERN runs only the matching
 * tests (cmocka's filter), BS_FAULTS_VERBOSE=1 prints every stage's whole
 * log, BS_FAULTS_STAGE_X="k=v ..." adds -X settings to every stage.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support.h"

#define IN "in"
#define OUT "out"
#define NPART 3    /* partitions of IN and of OUT */
#define MAX_RUNS 16

/* ---- fixture --------------------------------------------------------- */

/* A test's state: the shared fixture (broker, temp directory, processes)
 * and its own. */
typedef struct fx {
    h_fixture h;
    char *ckdir;    /* checkpoint.dir, in h.dir */
    char *conf;     /* the stage's configuration file */
    char *filler;   /* test 4: the file that fills the tmpfs */
    char group[64];
    bool mounted, immutable, readonly;
    /* Input and output (h_stream owns the output as read back); freed by
     * the teardown too, so that a failed test leaks nothing. */
    h_stream *st;
    rd_kafka_t *member; /* test 6's other group member */
} fx;

/* Undoes what a test did to its checkpoint directory, then frees. */
static int fx_cleanup(h_fixture *hf)
{
    fx *f = (fx *)hf;
    int rc = 0;
    if (f->member) {
        rd_kafka_consumer_close(f->member);
        rd_kafka_destroy(f->member);
    }
    if (f->immutable) {
        char *cmd = h_strdupf("chattr -i '%s'", f->ckdir);
        if (system(cmd) != 0)
            fprintf(stderr, "teardown: %s failed\n", cmd);
        free(cmd);
    }
    if (f->readonly)
        chmod(f->ckdir, 0755);
    if (f->mounted && h_tmpfs_umount(f->ckdir) != 0) {
        fprintf(stderr, "teardown: %s\n", h_last_error());
        rc = -1;
    }
    h_stream_free(f->st);
    free(f->ckdir);
    free(f->conf);
    free(f->filler);
    return rc;
}

static int fx_setup(void **state)
{
    static unsigned seq;
    static const char *const topics[] = {IN ":3", OUT ":3", NULL};
    if (h_fixture_setup_sized(state, 1, topics, sizeof(fx), fx_cleanup))
        return -1;
    fx *f = *state;
    f->ckdir = h_strdupf("%s/ckpt", f->h.dir);
    f->conf = h_strdupf("%s/stage.conf", f->h.dir);
    snprintf(f->group, sizeof(f->group), "bs-faults-%d-%u", (int)getpid(),
             ++seq);
    if (mkdir(f->ckdir, 0755) != 0) {
        perror(f->ckdir);
        h_fixture_teardown(state);
        return -1;
    }
    /* Short timeouts everywhere so that failures surface in seconds: a
     * killed member leaves the group after session.timeout.ms, and the
     * mock's rebalance waits session.timeout.ms - 1 s for members to
     * rejoin. */
    char *text = h_strdupf(
        "input.topics=" IN "\n"
        "output.topic=" OUT "\n"
        "consumer.group.id=%s\n"
        "checkpoint.dir=%s\n"
        "checkpoint.interval.ms=100\n"
        "checkpoint.records=500\n"
        "kafka.bootstrap.servers=%s\n"
        "kafka.reconnect.backoff.ms=50\n"
        "kafka.reconnect.backoff.max.ms=500\n"
        "kafka.topic.metadata.refresh.interval.ms=1000\n"
        "consumer.session.timeout.ms=3000\n"
        "consumer.heartbeat.interval.ms=300\n"
        "consumer.fetch.wait.max.ms=100\n"
        "producer.message.timeout.ms=5000\n"
        "producer.retry.backoff.ms=100\n"
        "log.level=info\n",
        f->group, f->ckdir, f->h.bs);
    int rc = h_write_file(f->conf, text);
    free(text);
    if (rc) {
        fprintf(stderr, "setup: %s\n", h_last_error());
        h_fixture_teardown(state);
        return -1;
    }
    return 0;
}

/* ---- the input stream ------------------------------------------------ */

/* n records over NPART partitions, a key new with probability
 * 1 - dup_pct/100, else one seen before (h_stream_add). */
static h_stream *stream_new(size_t n, unsigned dup_pct, uint64_t seed)
{
    h_stream *st = h_stream_new(n, NPART, seed);
    h_stream_add(st, n, dup_pct);
    return st;
}

/* Produces records [from, to) of f->st in order, and checks that they got
 * the offsets the stream assigned them. */
static void produce_range(fx *f, size_t from, size_t to)
{
    h_stream_produce(f->st, f->h.bs, IN, from, to, NULL);
}

/* ---- checkpoints on disk --------------------------------------------- */

static void ckpt_all(const fx *f, int64_t *next)
{
    h_ckpt_all(f->ckdir, IN, NPART, next);
}

/* `bloomstage checkpoint info DIR` must exit 0 (every file verifies) and
 * report, for each partition with a file, the offset in its header.  Only
 * while no stage writes the directory. */
static void ckpt_info_check(fx *f)
{
    const char *const args[] = {"checkpoint", "info", f->ckdir, NULL};
    h_proc *p = h_bs_cmd(args, 0);
    const char *out = h_process_stdout(p);
    int64_t want[NPART];
    ckpt_all(f, want);
    for (int q = 0; q < NPART; q++) {
        if (want[q] < 0)
            continue;
        char pat[64];
        snprintf(pat, sizeof(pat), "\n%-24s %-9d %-12lld ", IN, q,
                 (long long)want[q]);
        if (!strstr(out, pat))
            fail_msg("checkpoint info does not show %s [%d] at %lld:\n%s", IN,
                     q, (long long)want[q], out);
    }
    h_proc_release(p);
}

/* No temp file of a checkpoint write is left in the directory. */
static void no_temp_files(const fx *f)
{
    char name[256];
    if (h_ckpt_temp_files(f->ckdir, name, sizeof(name)))
        fail_msg("a checkpoint temp file was left in %s: %s", f->ckdir, name);
}

/* ---- committed offsets and invariant 1 ------------------------------- */

/* Invariant 1 (h_expect_durable_commits) on committed offsets c, read
 * first; ckpt may be NULL. */
static void invariant1(const fx *f, const int64_t *c, int64_t *ckpt)
{
    h_expect_durable_commits(f->ckdir, IN, NPART, c, ckpt);
}

static void invariant1_cb(void *arg, const int64_t *c)
{
    invariant1(arg, c, NULL);
}

/* The group's committed offsets, then the checkpoint files, checked
 * (invariant1).  committed and ckpt may be NULL. */
static void committed_checked(fx *f, int64_t *committed, int64_t *ckpt)
{
    int64_t c[NPART];
    H_CHECK(h_committed(f->h.bs, f->group, IN, NPART, c));
    invariant1(f, c, ckpt);
    if (committed)
        memcpy(committed, c, sizeof(c));
}

/* Polls until every partition's committed offset equals want (checking
 * invariant 1 at every poll); fails after timeout_ms. */
static void wait_committed(fx *f, h_proc *p, const int64_t *want,
                           int timeout_ms)
{
    h_proc *const procs[] = {p, NULL};
    h_wait_committed(f->h.bs, f->group, IN, NPART, want, procs, timeout_ms,
                     invariant1_cb, f);
}

/* ---- the stage and its output ---------------------------------------- */

/* `bloomstage run -c CONF -X extra...` (extra: NULL-terminated, may be
 * NULL; BS_FAULTS_STAGE_X adds more). */
static h_proc *stage_start(fx *f, const char *const *extra)
{
    return h_stage_start(f->conf, extra, NULL);
}

/* The output, every record traced back to its input record (h_read_out). */
static h_outrec *read_out(fx *f, size_t *n)
{
    return h_read_out(f->st, f->h.bs, OUT, IN, n);
}

/* Copies per key id in the output just read; every key id whose first
 * record is before `upto` must be there (h_count_copies). */
static unsigned *count_copies(fx *f, size_t upto, size_t *extra)
{
    return h_count_copies(f->st, IN, upto, extra);
}

/* Every key id first seen before `upto` is in the output exactly once. */
static void exactly_once_before(fx *f, const unsigned *c, size_t upto,
                                const char *why)
{
    h_expect_once(f->st, c, IN, OUT, upto, why);
}

/* Batch A, records [0, na) of a stream of n (40% copies, seed), produced;
 * a stage started with extra (NULL-terminated, may be NULL) and batch A
 * committed: how tests 2 to 6 begin.  end_a, end_b: the input's ends after
 * batch A and after all n records. */
static h_proc *batch_a_committed(fx *f, size_t n, size_t na, uint64_t seed,
                                 const char *const *extra, int64_t *end_a,
                                 int64_t *end_b)
{
    f->st = stream_new(n, 40, seed);
    produce_range(f, 0, na);
    h_stream_ends(f->st, na, end_a);
    h_stream_ends(f->st, n, end_b);
    h_proc *p = stage_start(f, extra);
    wait_committed(f, p, end_a, 60000);
    return p;
}

/* ---- 1. kill -9 at many moments -------------------------------------- */

/* Delta files (TOPIC-P.SEQ.ckpd) in the checkpoint directory now: the
 * kill tests check that the stage wrote some, so that the restores they
 * exercise are of chains, not of snapshots alone. */
static size_t delta_files(const fx *f)
{
    size_t n = 0, len;
    DIR *d = opendir(f->ckdir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += (len = strlen(e->d_name)) > 5 &&
             !strcmp(e->d_name + len - 5, ".ckpd");
    if (d)
        closedir(d);
    return n;
}

/* When to kill: so long after the start; so long after a log line; so long
 * after the checkpoints cover a fraction of the input (and moved in this
 * run).  h_kill_at waits for it. */
static const h_kill_plan KILLS[] = {
    {.ms = 150, .what = "right after start"},
    {.ms = 1500, .what = "during the group join"},
    {.log = H_SAID_ASSIGNED, .ms = 30,
     .what = "just after the assignment"},
    {.ckpt_frac = 0.15, .what = "right after a checkpoint"},
    {.ckpt_frac = 0.35, .ms = 4, .what = "4 ms after a checkpoint"},
    {.ckpt_frac = 0.55, .ms = 23, .what = "23 ms after a checkpoint"},
    {.ckpt_frac = 0.80, .ms = 61, .what = "61 ms after a checkpoint"},
};
#define NKILLS (sizeof(KILLS) / sizeof(KILLS[0]))

/* Sorts output records by key id, then run, then input offset. */
static int by_id_run(const void *a, const void *b)
{
    const h_outrec *x = a, *y = b;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    if (x->run != y->run)
        return x->run < y->run ? -1 : 1;
    return (x->src_off > y->src_off) - (x->src_off < y->src_off);
}

/*
 * Run r (1-based) is the r-th `bloomstage run`; runs 1..NKILLS are killed,
 * run NKILLS+1 drains on SIGTERM.  After kill k we snapshot ckpt[k] (the
 * checkpoints on disk, which run k+1 starts from) and out_hw[k] (the
 * output's high watermarks: output records at offsets below them, and at or
 * above out_hw[k-1], were produced by run k).
 *
 * The duplicate bound asserted (sound, and exact in what it counts):
 *   a) run r produces nothing for input below ckpt[r-1] (it resumes at its
 *      checkpoint);
 *   b) no key is forwarded twice by one run (no rollback happens here);
 *   c) when a key is forwarded again by run j, its previous copy came from
 *      an input offset >= ckpt[j-1][p]: a key the loaded checkpoint covers
 *      is never forwarded again;
 *   d) hence extra copies <= sum over kills k of R_k, where R_k is the
 *      number of records run k forwarded from input at or beyond ckpt[k]
 *      (what it processed and delivered after its last checkpoint) -- each
 *      extra copy maps to a distinct such record (its previous copy, which
 *      by c) is beyond ckpt[j-1] >= ckpt[i] of its own run i);
 *   e) with processing.guarantee=exactly_once: no extra copy at all.
 * Run once with each guarantee.
 */
static void kill9_restart(fx *f, bool exactly_once, const char *capacity,
                          const char *delta_max)
{
    const size_t N = 20000;
    f->st = stream_new(N, 40, 1);
    produce_range(f, 0, N);
    int64_t end[NPART];
    h_stream_ends(f->st, N, end);

    int64_t ckpt[MAX_RUNS][NPART], out_hw[MAX_RUNS][NPART];
    for (int p = 0; p < NPART; p++)
        ckpt[0][p] = -1;
    const char *const extra[] = {
        capacity, delta_max,
        exactly_once ? "processing.guarantee=exactly_once"
                     : "processing.guarantee=at_least_once",
        NULL};
    size_t rollbacks = 0, deltas_seen = 0;

    for (size_t k = 1; k <= NKILLS; k++) {
        h_proc *p = stage_start(f, extra);
        const h_kill_ctx at = {.ckdir = f->ckdir, .in_topic = IN,
                               .in_parts = NPART, .in_total = (int64_t)N};
        h_kill_at(p, &KILLS[k - 1], &at);
        rollbacks += h_count_said(p, "rolling back");

        /* Let what the dead process had on the wire land (or not) before
         * the snapshots. */
        h_sleep_ms(300);
        int64_t c[NPART];
        committed_checked(f, c, ckpt[k]);
        ckpt_info_check(f);
        for (int q = 0; q < NPART; q++) {
            if (ckpt[k][q] < ckpt[k - 1][q])
                fail_msg("kill %zu (%s): %s [%d] checkpoint went back from "
                         "%lld to %lld", k, KILLS[k - 1].what, IN, q,
                         (long long)ckpt[k - 1][q], (long long)ckpt[k][q]);
            int64_t lo;
            H_CHECK(h_watermarks(f->h.bs, OUT, q, &lo, &out_hw[k][q]));
        }
        print_message("kill %zu (%s): checkpoints %lld/%lld/%lld, committed "
                      "%lld/%lld/%lld, output %lld\n", k, KILLS[k - 1].what,
                      (long long)ckpt[k][0], (long long)ckpt[k][1],
                      (long long)ckpt[k][2], (long long)c[0], (long long)c[1],
                      (long long)c[2],
                      (long long)h_sum_positive(out_hw[k], NPART));
        deltas_seen += delta_files(f);
        h_proc_release(p);
    }

    /* The last run finishes the input and drains. */
    h_proc *p = stage_start(f, extra);
    wait_committed(f, p, end, 120000);
    h_stage_stop(p);
    rollbacks += h_count_said(p, "rolling back");
    h_proc_release(p);
    int64_t fin[NPART];
    ckpt_all(f, fin);
    for (int q = 0; q < NPART; q++)
        assert_int_equal(fin[q], end[q]);
    ckpt_info_check(f);
    no_temp_files(f);
    assert_int_equal(rollbacks, 0);
    deltas_seen += delta_files(f);
    /* Asserted where filters are large against a round's keys (1.2 MiB):
     * there a delta is always well under the ratio. */
    if (deltas_seen == 0 && strstr(capacity, "200000"))
        fail_msg("no delta file seen after any kill: every checkpoint was "
                 "a snapshot (%s)", delta_max);
    print_message("delta files seen after the kills and at the end: %zu\n",
                  deltas_seen);

    size_t n = 0, extra_copies = 0;
    h_outrec *o = read_out(f, &n);
    const int runs = (int)NKILLS + 1;
    for (size_t i = 0; i < n; i++) {
        int r = 1;
        while (r < runs && o[i].off >= out_hw[r][o[i].part])
            r++;
        o[i].run = r;
        /* a) */
        if (o[i].src_off < ckpt[r - 1][o[i].src_part])
            fail_msg("run %d forwarded %s:%d:%lld, below the checkpoint it "
                     "started from (%lld)", r, IN, (int)o[i].src_part,
                     (long long)o[i].src_off,
                     (long long)ckpt[r - 1][o[i].src_part]);
    }
    unsigned *copies = count_copies(f, N, &extra_copies);
    size_t bound = 0;
    for (size_t i = 0; i < n; i++)
        if (o[i].run <= (int)NKILLS &&
            o[i].src_off >= ckpt[o[i].run][o[i].src_part])
            bound++;
    qsort(o, n, sizeof(*o), by_id_run);
    for (size_t i = 1; i < n; i++) {
        const h_outrec *a = &o[i - 1], *b = &o[i];
        if (a->id != b->id)
            continue;
        if (a->run == b->run) /* b) */
            fail_msg("k%07u forwarded twice by run %d (%s:%d:%lld and "
                     ":%lld)", b->id, b->run, IN, (int)b->src_part,
                     (long long)a->src_off, (long long)b->src_off);
        if (a->src_off < ckpt[b->run - 1][b->src_part]) /* c) */
            fail_msg("k%07u forwarded again by run %d although the checkpoint "
                     "it loaded (%s [%d] at %lld) covers its earlier copy "
                     "(offset %lld)", b->id, b->run, IN, (int)b->src_part,
                     (long long)ckpt[b->run - 1][b->src_part],
                     (long long)a->src_off);
    }
    print_message("%zu records, %zu unique keys, %zu output records, %zu "
                  "duplicates (bound: %zu forwarded after the last "
                  "checkpoint of a killed run)\n", N, f->st->nids, n,
                  extra_copies, bound);
    /* d) */
    if (extra_copies > bound)
        fail_msg("%zu duplicates in the output, more than the %zu records the "
                 "killed runs forwarded after their last checkpoints",
                 extra_copies, bound);
    /* e) exactly_once: the output tail since the checkpoint is replayed on
     * restart, so not even those. */
    if (exactly_once)
        exactly_once_before(f, copies, N, "processing.guarantee="
                            "exactly_once replays the output tail");
}

/* The filter grows layers (2000 keys first) and a round's new keys are
 * often a large part of it, so checkpoint.delta.ratio makes many rounds
 * snapshots and the others deltas (6 and 1 delta files seen in two runs):
 * kills land around both. */
static void test_kill9_restart_at_least_once(void **state)
{
    kill9_restart(*state, false, "dedup.capacity=2000",
                  "checkpoint.delta.max=32");
}

static void test_kill9_restart_exactly_once(void **state)
{
    kill9_restart(*state, true, "dedup.capacity=2000",
                  "checkpoint.delta.max=32");
}

/* Chains of two deltas, then a snapshot (the old one set aside, dropped
 * after the commit), with filters of 1.2 MiB so a snapshot write takes a
 * while: the kills land in delta writes, snapshot writes and the clean-up
 * after commits, and every restart restores snapshot + chain. */
static void test_kill9_restart_short_chains(void **state)
{
    kill9_restart(*state, true, "dedup.capacity=200000",
                  "checkpoint.delta.max=2");
}

/* ---- 2. delivery failures -------------------------------------------- */

/* The stage's first n "checkpoint round failed" lines (failures in a row,
 * no good round between them) wait twice as long as the one before
 * (retry_in_s 0.5, 1, 2, ...), and each names the record whose delivery
 * failed. */
static void backoff_doubles(h_proc *p, size_t n)
{
    const char *log = h_process_stderr(p), *at = log;
    double prev = 0;
    for (size_t i = 0; i < n; i++) {
        at = strstr(at, "checkpoint round failed, pausing consumption");
        if (!at)
            h_stage_fail(p, "%zu failed rounds logged, not %zu", i, n);
        const char *eol = strchr(at, '\n'), *r = strstr(at, "retry_in_s=");
        const char *who = strstr(at, "error=\"rolled back: ");
        who = who ? strstr(who, " of " IN ":") : NULL;
        if (!r || (eol && r > eol) || !who || (eol && who > eol))
            h_stage_fail(p, "failed round %zu: no retry_in_s, or no record "
                         "named: %.*s", i + 1,
                         (int)(eol ? eol - at : 200), at);
        double d = strtod(r + strlen("retry_in_s="), NULL);
        print_message("failed round %zu: retry_in_s=%.1f\n", i + 1, d);
        if (i == 0 ? d != 0.5 : d != 2 * prev)
            h_stage_fail(p, "failed round %zu waits %.1f s after %.1f s: the "
                         "backoff must double from 0.5 s", i + 1, d, prev);
        prev = d;
        at += 10;
    }
}

/*
 * Batch A is processed and committed; the stage is then stopped (SIGSTOP,
 * so that it does not see batch B before the errors are in place), batch B
 * produced, COUNT Produce errors pushed (cluster-wide: they would fail the
 * test's own producer too), the stage continued.  While the errors last:
 * the stage logs a rollback, and the committed offsets stay at A's end (no
 * delivery of B can succeed, so no checkpoint can reach past B's first
 * record to forward in each partition).  Then
 * the failed rounds back off, twice as long each time, naming the record
 * that failed.  Then
 * the errors are cleared: everything is committed, every key of A and B is
 * in the output, and the keys first seen in A exactly once (B's copies of
 * them must meet the filter reloaded from A's checkpoint); with
 * processing.guarantee=exactly_once (set here) every key exactly once.
 */
static void delivery_failure(fx *f, const char *error)
{
    const size_t N = 6000, NA = 3000;
    const char *const extra[] = {"producer.message.timeout.ms=3000",
                                 "consumer.session.timeout.ms=10000",
                                 "consumer.heartbeat.interval.ms=500",
                                 "processing.guarantee=exactly_once", NULL};
    int64_t end_a[NPART], end_b[NPART];
    h_proc *p = batch_a_committed(f, N, NA, 2, extra, end_a, end_b);

    H_CHECK(h_process_kill(p, SIGSTOP));
    produce_range(f, NA, N);
    char *cmd = h_strdupf("push-errors Produce 1000 %s", error);
    int rc = h_broker_control(f->h.broker, cmd);
    free(cmd);
    H_CHECK(h_process_kill(p, SIGCONT));
    H_CHECK(rc);

    h_wait_said(p, "delivery failed, rolling back", 1, 30000);
    h_wait_said(p, "checkpoint round failed, pausing consumption", 3, 60000);
    backoff_doubles(p, 3);
    /* Some seconds more of failures.  No record of B that must be forwarded
     * can be delivered, so no checkpoint (and no commit) may reach past the
     * first one in each partition: only B's leading duplicates, dropped
     * without a delivery, may be checkpointed. */
    int64_t first_fwd[NPART];
    for (int q = 0; q < NPART; q++)
        first_fwd[q] = end_b[q];
    for (size_t i = N; i-- > NA;)
        if (f->st->first[f->st->id[i]] == i)
            first_fwd[f->st->part[i]] = f->st->off[i];
    double t0 = h_now_s();
    while (h_now_s() - t0 < 4.0) {
        int64_t c[NPART], k[NPART];
        committed_checked(f, c, k);
        for (int q = 0; q < NPART; q++)
            if (c[q] > first_fwd[q] || k[q] > first_fwd[q])
                h_stage_fail(p, "%s [%d] committed at %lld, checkpointed at "
                             "%lld while every delivery fails (%s); the first "
                             "record to forward after batch A is at %lld", IN,
                             q, (long long)c[q], (long long)k[q], error,
                             (long long)first_fwd[q]);
        h_stage_alive(p, "while deliveries fail");
        h_sleep_ms(400);
    }
    H_CHECK(h_broker_control(f->h.broker, "clear-errors Produce"));
    wait_committed(f, p, end_b, 120000);
    size_t rollbacks = h_count_said(p, "delivery failed, rolling back");
    h_stage_stop(p);
    ckpt_info_check(f);

    size_t n = 0, extra_copies = 0;
    read_out(f, &n);
    unsigned *c = count_copies(f, N, &extra_copies);
    exactly_once_before(f, c, NA, "its copies in batch B must be dropped by "
                        "the filter reloaded from batch A's checkpoint");
    print_message("%s: %zu rollbacks, %zu output records, %zu unique keys, "
                  "%zu duplicates\n", error, rollbacks, n, f->st->nids,
                  extra_copies);
    exactly_once_before(f, c, N, "processing.guarantee=exactly_once: a "
                        "rollback replays what was delivered since the "
                        "checkpoint");
}

/* A retriable error: every retry fails until message.timeout.ms. */
static void test_delivery_failure_retriable(void **state)
{
    delivery_failure(*state, "NOT_ENOUGH_REPLICAS");
}

/* A permanent one: the batch fails at once, even with retries. */
static void test_delivery_failure_permanent(void **state)
{
    delivery_failure(*state, "TOPIC_AUTHORIZATION_FAILED");
}

/* ---- 3. the broker goes away ----------------------------------------- */

/*
 * The only broker goes down right after the checkpoint that passes a
 * quarter of the input, for
 * 4 s (longer than the producer's message timeout of 3 s and the session
 * timeout of 3 s, so deliveries fail and the group membership is lost),
 * then comes back: no key lost (and, with exactly_once, none twice),
 * everything committed, exit 0 on SIGTERM.
 */
static void test_broker_down(void **state)
{
    fx *f = *state;
    const size_t N = 20000;
    f->st = stream_new(N, 40, 3);
    produce_range(f, 0, N);
    int64_t end[NPART];
    h_stream_ends(f->st, N, end);

    const char *const extra[] = {"producer.message.timeout.ms=3000",
                                 "processing.guarantee=exactly_once", NULL};
    h_proc *p = stage_start(f, extra);
    double t0 = h_now_s();
    int64_t k[NPART];
    do {
        if (h_now_s() - t0 > 60)
            h_stage_fail(p, "no checkpoint within 60 s");
        usleep(500);
        ckpt_all(f, k);
    } while (h_sum_positive(k, NPART) < (int64_t)N / 4);
    H_CHECK(h_broker_control(f->h.broker, "broker-down 1"));
    h_sleep_ms(4000);
    h_stage_alive(p, "while the broker was down");
    H_CHECK(h_broker_control(f->h.broker, "broker-up 1"));
    print_message("broker down at checkpoints %lld/%lld/%lld of "
                  "%lld/%lld/%lld\n", (long long)k[0], (long long)k[1],
                  (long long)k[2], (long long)end[0], (long long)end[1],
                  (long long)end[2]);

    wait_committed(f, p, end, 180000);
    h_stage_stop(p);
    print_message("rollbacks: %zu, assignments lost: %zu\n",
                  h_count_said(p, "rolling back"),
                  h_count_said(p, "assignment lost"));
    ckpt_info_check(f);

    size_t n = 0, extra_copies = 0;
    read_out(f, &n);
    unsigned *c = count_copies(f, N, &extra_copies);
    print_message("%zu output records, %zu unique keys, %zu duplicates\n", n,
                  f->st->nids, extra_copies);
    exactly_once_before(f, c, N, "processing.guarantee=exactly_once");
}

/* ---- 3b. a failed commit ---------------------------------------------- */

/*
 * Batch A is processed and committed.  OffsetCommit requests are then made
 * to fail (a permanent error, so librdkafka does not retry them itself) and
 * a small batch B produced: the stage checkpoints B (the files reach B's
 * end) but cannot commit it.  The errors are cleared.  The checkpoints are
 * ahead of the committed offsets -- safe -- and stage.c promises "the next
 * round commits again": within some seconds, and at the latest when
 * SIGTERM drains, the committed offsets must reach B's end.  (With no new
 * records after B, only a round that re-commits the checkpointed offsets
 * can do it.)  A kill -9 between a checkpoint's rename and its commit
 * leaves the same state behind.
 */
static void test_commit_failure(void **state)
{
    fx *f = *state;
    const size_t N = 2030, NA = 2000;
    int64_t end_a[NPART], end_b[NPART];
    h_proc *p = batch_a_committed(f, N, NA, 10, NULL, end_a, end_b);

    H_CHECK(h_broker_control(f->h.broker, "push-errors OffsetCommit 100 "
                                   "OFFSET_METADATA_TOO_LARGE"));
    produce_range(f, NA, N);
    double t0 = h_now_s();
    for (;;) {
        int64_t k[NPART];
        committed_checked(f, NULL, k);
        if (k[0] == end_b[0] && k[1] == end_b[1] && k[2] == end_b[2])
            break;
        h_stage_alive(p, "while commits fail");
        if (h_now_s() - t0 > 60)
            h_stage_fail(p, "batch B was not checkpointed within 60 s");
        h_sleep_ms(100);
    }
    h_wait_said(p, "msg=\"commit failed\"", 1, 10000);
    h_sleep_ms(1000);
    H_CHECK(h_broker_control(f->h.broker, "clear-errors OffsetCommit"));
    int64_t c[NPART];
    committed_checked(f, c, NULL);
    print_message("checkpointed at %lld/%lld/%lld, committed %lld/%lld/%lld "
                  "when the commit errors were cleared\n",
                  (long long)end_b[0], (long long)end_b[1],
                  (long long)end_b[2], (long long)c[0], (long long)c[1],
                  (long long)c[2]);
    /* "the next round commits again" */
    t0 = h_now_s();
    bool caught_up = false;
    while (!caught_up && h_now_s() - t0 < 10) {
        committed_checked(f, c, NULL);
        caught_up = c[0] == end_b[0] && c[1] == end_b[1] && c[2] == end_b[2];
        h_sleep_ms(250);
    }
    h_stage_stop(p);
    committed_checked(f, c, NULL);
    if (!caught_up || c[0] != end_b[0] || c[1] != end_b[1] ||
        c[2] != end_b[2])
        h_stage_fail(p, "a failed commit is never retried: checkpoints at "
                     "%lld/%lld/%lld, committed %lld/%lld/%lld %s",
                     (long long)end_b[0], (long long)end_b[1],
                     (long long)end_b[2], (long long)c[0], (long long)c[1],
                     (long long)c[2], caught_up ? "after the drain"
                                              : "10 s after the errors "
                                                "cleared and after the "
                                                "drain on SIGTERM");
}

/* ---- 4, 5. checkpoints that cannot be written -------------------------- */

typedef enum { BLOCK_FULL, BLOCK_READONLY } block_kind;

/* Makes checkpoint writes fail; true if it could. */
static bool block_writes(fx *f, block_kind kind)
{
    if (kind == BLOCK_FULL) {
        f->filler = h_strdupf("%s/filler", f->ckdir);
        H_CHECK(h_fill_fs(f->filler));
        return true;
    }
    if (geteuid() == 0) {
        char *cmd = h_strdupf("chattr +i '%s' 2>&1", f->ckdir);
        int rc = system(cmd);
        free(cmd);
        if (rc != 0)
            return false;
        f->immutable = true;
    } else {
        if (chmod(f->ckdir, 0555) != 0)
            fail_msg("chmod %s: %s", f->ckdir, strerror(errno));
        f->readonly = true;
    }
    /* Really unwritable? */
    char *probe = h_strdupf("%s/probe", f->ckdir);
    int fd = open(probe, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) {
        close(fd);
        unlink(probe);
    }
    free(probe);
    if (fd >= 0)
        fail_msg("%s is still writable", f->ckdir);
    return true;
}

static void unblock_writes(fx *f, block_kind kind)
{
    if (kind == BLOCK_FULL) {
        if (unlink(f->filler) != 0)
            fail_msg("unlink %s: %s", f->filler, strerror(errno));
        return;
    }
    if (f->immutable) {
        char *cmd = h_strdupf("chattr -i '%s'", f->ckdir);
        assert_int_equal(system(cmd), 0);
        free(cmd);
        f->immutable = false;
    } else {
        assert_int_equal(chmod(f->ckdir, 0755), 0);
        f->readonly = false;
    }
}

/*
 * Batch A is processed and committed; checkpoint writes are then made to
 * fail and batch B produced.  The stage must log the failed checkpoint and
 * the pause; for some seconds the committed offsets and the checkpoint
 * files stay at A's end.  Writes are allowed again: the stage resumes
 * (logs it), commits B's end, and the output holds every key exactly once
 * (no crash and no delivery failure here, so not even duplicates).
 */
static void unwritable_checkpoints(fx *f, block_kind kind)
{
    const size_t N = 6000, NA = 2000;
    /* Small filters (a few KiB), so that they fit the tmpfs. */
    const char *const extra[] = {"dedup.capacity=1000", NULL};
    int64_t end_a[NPART], end_b[NPART];
    h_proc *p = batch_a_committed(f, N, NA, kind == BLOCK_FULL ? 4 : 5,
                                  extra, end_a, end_b);

    if (!block_writes(f, kind)) {
        print_message("chattr +i failed on %s (not ext2/3/4?): skipped\n",
                      f->ckdir);
        skip();
    }
    produce_range(f, NA, N);
    h_wait_said(p, "msg=\"checkpoint failed\"", 1, 30000);
    h_wait_said(p, "pausing consumption", 1, 30000);
    double t0 = h_now_s();
    while (h_now_s() - t0 < 3.0) {
        int64_t c[NPART], k[NPART];
        committed_checked(f, c, k);
        for (int q = 0; q < NPART; q++)
            if (c[q] != end_a[q] || k[q] != end_a[q])
                h_stage_fail(p, "%s [%d]: committed %lld, checkpoint %lld "
                             "while checkpoints cannot be written; want both "
                             "at batch A's end %lld", IN, q, (long long)c[q],
                             (long long)k[q], (long long)end_a[q]);
        h_stage_alive(p, "while checkpoints fail");
        h_sleep_ms(300);
    }
    unblock_writes(f, kind);
    wait_committed(f, p, end_b, 120000);
    h_wait_said(p, "checkpoints recovered, resuming", 1, 10000);
    h_stage_stop(p);
    ckpt_info_check(f);
    no_temp_files(f);

    size_t n = 0;
    read_out(f, &n);
    unsigned *c = count_copies(f, N, NULL);
    exactly_once_before(f, c, N, "nothing crashed and no delivery failed");
    print_message("%zu checkpoint failures logged, %zu output records, %zu "
                  "unique keys\n",
                  h_count_said(p, "msg=\"checkpoint failed\""), n,
                  f->st->nids);
}

/* Mounts a tmpfs on the checkpoint directory; false if that is not
 * possible here (not root, no CAP_SYS_ADMIN). */
static bool mount_tmpfs(fx *f, const char *size)
{
    if (h_tmpfs_mount(f->ckdir, size) != 0) {
        print_message("%s: skipped\n", h_last_error());
        return false;
    }
    f->mounted = true;
    return true;
}

static void test_disk_full(void **state)
{
    fx *f = *state;
    if (!mount_tmpfs(f, "512k"))
        skip();
    unwritable_checkpoints(f, BLOCK_FULL);
}

static void test_readonly_dir(void **state)
{
    unwritable_checkpoints(*state, BLOCK_READONLY);
}

/* ---- 6. a rebalance while paused --------------------------------------- */

/* A plain consumer in the stage's group (cooperative-sticky, as the stage),
 * committing nothing: the second member of test 6. */
static rd_kafka_t *member_new(fx *f)
{
    rd_kafka_conf_t *conf = h_conf_pairs(
        h_kafka_conf(f->h.bs), "group.id", f->group, "enable.auto.commit",
        "false", "auto.offset.reset", "earliest", "session.timeout.ms",
        "3000", "heartbeat.interval.ms", "300",
        "partition.assignment.strategy", "cooperative-sticky", NULL);
    char errstr[256];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr,
                                  sizeof(errstr));
    if (!rk)
        fail_msg("rd_kafka_new: %s", errstr);
    rd_kafka_poll_set_consumer(rk);
    rd_kafka_topic_partition_list_t *sub =
        rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(sub, IN, RD_KAFKA_PARTITION_UA);
    assert_int_equal(rd_kafka_subscribe(rk, sub), 0);
    rd_kafka_topic_partition_list_destroy(sub);
    return rk;
}

/* Polls the member until the stage's log has `needle` (count times). */
static void member_poll_until(rd_kafka_t *rk, h_proc *p, const char *needle,
                              size_t count, const char *what)
{
    double t0 = h_now_s();
    while (h_count_said(p, needle) < count) {
        h_member_poll(rk, 100);
        h_stage_alive(p, what);
        if (h_now_s() - t0 > 90)
            h_stage_fail(p, "%s: the stage did not log '%s' (x%zu) within "
                         "90 s",
                         what, needle, count);
    }
}

/* Polls the member until it has at least n partitions. */
static void member_wait_parts(rd_kafka_t *rk, h_proc *p, int n)
{
    double t0 = h_now_s();
    while (h_member_poll(rk, 100) < n) {
        if (p)
            h_stage_alive(p, "while the other member joined");
        if (h_now_s() - t0 > 90)
            h_stage_fail(p, "the other member did not get %d partition(s) "
                         "within 90 s", n);
    }
}

/* Closes the other member (it leaves the group). */
static void member_free(fx *f)
{
    rd_kafka_consumer_close(f->member);
    rd_kafka_destroy(f->member);
    f->member = NULL;
}

/*
 * Partitions taken away while paused and given back after the resume.
 * Batch A is processed and committed (every partition has a checkpoint);
 * the directory is made unwritable and batch B produced: the stage pauses.
 * Another member joins and takes some partitions (the stage's revoke
 * checkpoint fails; nothing is committed).  The directory is made writable:
 * the stage resumes what it still has.  The other member leaves, the stage
 * gets the partitions back.  Everything must then be processed: committed
 * at B's end within a minute, every key in the output exactly once.
 */
static void test_revoked_while_paused(void **state)
{
    fx *f = *state;
    const size_t N = 6000, NA = 2000;
    const char *const extra[] = {"dedup.capacity=1000", NULL};
    int64_t end_a[NPART], end_b[NPART];
    h_proc *p = batch_a_committed(f, N, NA, 8, extra, end_a, end_b);

    if (!block_writes(f, BLOCK_READONLY)) {
        print_message("chattr +i failed on %s: skipped\n", f->ckdir);
        skip();
    }
    produce_range(f, NA, N);
    h_wait_said(p, "pausing consumption", 1, 30000);

    rd_kafka_t *rk = f->member = member_new(f);
    member_wait_parts(rk, p, 1);
    int others = h_member_poll(rk, 100);
    unblock_writes(f, BLOCK_READONLY);
    member_poll_until(rk, p, "checkpoints recovered, resuming", 1,
                      "resuming while the other member is in the group");
    print_message("resumed while the other member had %d partition(s)\n",
                  others);
    member_free(f);

    /* The stage gets them back; they must be consumed. */
    wait_committed(f, p, end_b, 60000);
    h_stage_stop(p);
    size_t n = 0;
    read_out(f, &n);
    unsigned *c = count_copies(f, N, NULL);
    exactly_once_before(f, c, N, "no crash, no delivery failure");
}

/*
 * Partitions first assigned while the directory is unwritable.  Another
 * member is in the group first, so the stage, joining second, gets only
 * some partitions; it processes a first round of them and commits.  The
 * directory is made unwritable and the other member leaves: the stage is
 * assigned partitions it never had (no checkpoint file) while it cannot
 * write one.  docs/guarantees.md: a failed checkpoint write pauses and retries, losing
 * nothing -- so the stage must keep running; once the directory is
 * writable every key must reach the output.  Run with each
 * processing.guarantee: at_least_once processes such partitions from no
 * checkpoint (their records polled while paused must come again after the
 * resume); exactly_once must write them an initial checkpoint first.
 */
static void assigned_while_unwritable(fx *f, const char *guarantee)
{
    const size_t N = 6000;
    f->st = stream_new(N, 40, 9);
    produce_range(f, 0, N);
    int64_t end[NPART];
    h_stream_ends(f->st, N, end);

    rd_kafka_t *rk = f->member = member_new(f);
    member_wait_parts(rk, NULL, NPART);

    char *g = h_strdupf("processing.guarantee=%s", guarantee);
    const char *const extra[] = {"dedup.capacity=1000", g, NULL};
    h_proc *p = stage_start(f, extra);
    free(g);
    member_poll_until(rk, p, H_SAID_ASSIGNED, 1,
                      "joining second");
    /* Its first checkpoint covers some records. */
    double t0 = h_now_s();
    int64_t k[NPART];
    do {
        h_member_poll(rk, 50);
        ckpt_all(f, k);
        if (h_now_s() - t0 > 60)
            h_stage_fail(p, "no checkpoint with records within 60 s");
    } while (h_sum_positive(k, NPART) == 0);
    size_t had = h_count_said(p, H_SAID_ASSIGNED);
    if (!block_writes(f, BLOCK_READONLY)) {
        print_message("chattr +i failed on %s: skipped\n", f->ckdir);
        skip();
    }
    member_free(f);
    /* The others come to the stage while it cannot write a checkpoint. */
    t0 = h_now_s();
    while (h_count_said(p, H_SAID_ASSIGNED) < NPART) {
        h_stage_alive(p, "when given partitions while the checkpoint "
                         "directory is unwritable");
        if (h_now_s() - t0 > 60)
            h_stage_fail(p, "the other partitions did not come within 60 s");
        h_sleep_ms(100);
    }
    h_sleep_ms(2000);
    h_stage_alive(p, "2 s after being given partitions while the checkpoint "
                  "directory is unwritable");
    print_message("%s: had %zu partition(s), got the rest while unwritable\n",
                  guarantee, had);
    unblock_writes(f, BLOCK_READONLY);
    wait_committed(f, p, end, 120000);
    h_stage_stop(p);
    size_t n = 0;
    read_out(f, &n);
    count_copies(f, N, NULL);
    /* Records polled while paused are left for later, not errors. */
    size_t bogus = h_count_said(p, "msg=\"consume error\" error=NO_ERROR");
    if (bogus)
        h_stage_fail(p, "%zu records polled while paused were logged as "
                     "'consume error' error=NO_ERROR", bogus);
}

static void test_assigned_while_unwritable_alo(void **state)
{
    assigned_while_unwritable(*state, "at_least_once");
}

static void test_assigned_while_unwritable_eo(void **state)
{
    assigned_while_unwritable(*state, "exactly_once");
}

/* ---- 7. poison records ------------------------------------------------ */

#define REJ "rej"
#define NPOISON 3
/* Key and value of a poison record: under librdkafka's default
 * message.max.bytes (1,000,000) as the input takes it, over it once the
 * stage's copy carries bloomstage-src (the record). */
#define POISON_BYTES 999970

/* A stream of unique small records over NPART partitions with NPOISON
 * poison records mixed in, one per partition, at known offsets (the
 * topics are fresh: offsets count from 0). */
typedef struct poison_stream {
    size_t n;             /* records produced */
    int64_t end[NPART];   /* the input's ends */
    int32_t ppart[NPOISON];
    int64_t poff[NPOISON]; /* the poison records' partitions and offsets */
    size_t vlen;          /* a poison record's value length */
    int np;               /* poison records produced: 0..np-1 */
} poison_stream;

/* Produces records [from, to) of the stream of `total` small records
 * ("s%05zu", partition i % NPART), with (`poison`) poison record j before
 * small record total * (j + 1) / (NPOISON + 1) when that falls in
 * range. */
static void poison_produce(fx *f, poison_stream *ps, size_t from, size_t to,
                           size_t total, bool poison)
{
    static const char *const big_conf[] = {"message.max.bytes=2000000",
                                           NULL};
    char pkey[32];
    ps->vlen = POISON_BYTES - strlen("poison-0");
    char *big = h_xmalloc(ps->vlen);
    memset(big, 'p', ps->vlen);
    h_record *recs = h_xmalloc((to - from + NPOISON) * sizeof(*recs));
    char (*keys)[16] = h_xmalloc((to - from) * sizeof(*keys));
    size_t n = 0;
    for (size_t i = from; i < to; i++) {
        for (int j = 0; j < NPOISON; j++) {
            if (!poison || i != total * (size_t)(j + 1) / (NPOISON + 1))
                continue;
            ps->np = j + 1;
            snprintf(pkey, sizeof(pkey), "poison-%d", j);
            ps->ppart[j] = j % NPART;
            ps->poff[j] = ps->end[j % NPART];
            h_record r = {.key = strdup(pkey), .key_len = strlen(pkey),
                          .value = big, .value_len = ps->vlen,
                          .partition = j % NPART};
            recs[n++] = r;
            ps->end[j % NPART]++;
        }
        snprintf(keys[i - from], sizeof(keys[0]), "s%05zu", i);
        recs[n] = h_rec(keys[i - from], "v");
        recs[n++].partition = (int32_t)(i % NPART);
        ps->end[i % NPART]++;
    }
    H_CHECK(h_produce_conf(f->h.bs, IN, H_PARTITION_PER_RECORD, recs, n,
                           big_conf));
    for (size_t i = 0; i < n; i++)
        if (recs[i].value == big)
            free((void *)recs[i].key);
    ps->n += n;
    free(recs);
    free(keys);
    free(big);
}

/* Which poison record r's key names, or -1. */
static int poison_index(const h_record *r)
{
    int j;
    char tail;
    if (r->key && r->key_len > 7 && !memcmp(r->key, "poison-", 7) &&
        sscanf((const char *)r->key + 7, "%d%c", &j, &tail) == 1 &&
        j >= 0 && j < NPOISON)
        return j;
    return -1;
}

/* Reads OUT and REJ at read_committed and checks: every small record of
 * the `nsmall` once in OUT and not in REJ; poison record j once in OUT
 * when forwarded, else once in REJ with reason too-large, bloomstage-src
 * naming its input record and, its whole copy too large for the
 * producer, without its value (bloomstage-dropped: value, and the bytes
 * it had).  With `rej_any`, records of the small ones may be in REJ
 * instead of OUT (a delivery report refused them: the reason says so),
 * each still in exactly one of the two. */
static void poison_check(fx *f, const poison_stream *ps, size_t nsmall,
                         bool forwarded, bool rej_any, size_t *n_rej)
{
    h_record_list out = {0}, rej = {0};
    H_CHECK(h_consume_all_conf(f->h.bs, OUT, 60000, H_READ_COMMITTED, &out));
    H_CHECK(h_consume_all_conf(f->h.bs, REJ, 60000, H_READ_COMMITTED, &rej));
    unsigned *seen = h_xcalloc(nsmall, sizeof(*seen));
    unsigned pseen[NPOISON] = {0};
    for (int pass = 0; pass < 2; pass++) {
        const h_record_list *l = pass ? &rej : &out;
        for (size_t i = 0; i < l->n; i++) {
            const h_record *r = &l->recs[i];
            char b[300], want[64];
            int j = poison_index(r);
            unsigned k;
            if (j < 0 && (!r->key || sscanf(r->key, "s%u", &k) != 1 ||
                          k >= nsmall))
                fail_msg("unexpected record %.*s in %s", (int)r->key_len,
                         (const char *)r->key, pass ? REJ : OUT);
            if (j < 0 && pass && !rej_any)
                fail_msg("%s rejected (%s)", (const char *)r->key,
                         h_header_str(r, "bloomstage-reason", b, sizeof(b)));
            if (pass && strcmp(h_header_str(r, "bloomstage-reason", b, sizeof(b)),
                               "too-large"))
                fail_msg("%.*s in %s with reason '%s', not too-large",
                         (int)r->key_len, (const char *)r->key, REJ, b);
            if (j < 0) {
                seen[k]++;
                continue;
            }
            pseen[j]++;
            if (forwarded != !pass)
                fail_msg("poison-%d in %s", j, pass ? REJ : OUT);
            snprintf(want, sizeof(want), IN ":%d:%lld", (int)ps->ppart[j],
                     (long long)ps->poff[j]);
            if (strcmp(h_header_str(r, "bloomstage-src", b, sizeof(b)), want))
                fail_msg("poison-%d's bloomstage-src is '%s', not %s", j, b,
                         want);
            if (!pass && r->value_len != ps->vlen)
                fail_msg("poison-%d forwarded with %zu bytes of %zu", j,
                         r->value_len, ps->vlen);
            if (pass && (r->value_len != 0 ||
                         strcmp(h_header_str(r, "bloomstage-dropped", b,
                                        sizeof(b)), "value") ||
                         strtoull(h_header_str(r, "bloomstage-value-bytes", b,
                                          sizeof(b)), NULL, 10) != ps->vlen))
                fail_msg("poison-%d's rejected copy: %zu value bytes, "
                         "bloomstage-dropped '%s'", j, r->value_len,
                         h_header_str(r, "bloomstage-dropped", b, sizeof(b)));
        }
    }
    for (size_t k = 0; k < nsmall; k++)
        if (seen[k] != 1)
            fail_msg("s%05zu is in the output and rejected %u times", k,
                     seen[k]);
    for (int j = 0; j < ps->np; j++)
        if (pseen[j] != 1)
            fail_msg("poison-%d (%s [%d] at %lld) is there %u times", j, IN,
                     (int)ps->ppart[j], (long long)ps->poff[j], pseen[j]);
    print_message("%zu output records, %zu rejected\n", out.n, rej.n);
    if (n_rej)
        *n_rej = rej.n;
    free(seen);
    h_record_list_free(&out);
    h_record_list_free(&rej);
}

/* The stage's line for poison record j routed to rejected.topic. */
static void poison_said(h_proc *p, const poison_stream *ps, int j)
{
    char *needle = h_strdupf("routed to rejected.topic\" topic=" IN
                             " partition=%d offset=%lld reason=too-large",
                             (int)ps->ppart[j], (long long)ps->poff[j]);
    h_expect_said(p, needle);
    free(needle);
}

/*
 * A stream with three poison records, each a key and value of 999,970
 * bytes that the stage's producer (librdkafka's default message.max.bytes
 * of 1,000,000) refuses once the copy carries bloomstage-src.  With
 * rejected.topic, each is routed there at once, without its value (the
 * whole copy is too large too) and named in the log; no round rolls back,
 * every partition is committed to its end (no stall), every other record
 * is in the output once, and /metrics counts them
 * (bloomstage_records_dropped_total{reason="unproducible"}).  With a
 * producer that takes it
 * (producer.message.max.bytes, as the stage sizes it to the output
 * topic's max.message.bytes on a real broker: test_kafka_poison), each is
 * forwarded instead.
 */
static void poison_routed(fx *f, const char *guarantee, bool forward)
{
    const size_t N = 600;
    char *rej = h_strdupf("rejected.topic=" REJ);
    const char *const extra[] = {guarantee, rej,
                                 "metrics.listen=127.0.0.1:0",
                                 forward ? "producer.message.max.bytes="
                                           "1100000"
                                         : NULL,
                                 NULL};
    H_CHECK(h_broker_control(f->h.broker, "create-topic " REJ " 3"));
    poison_stream ps = {0};
    poison_produce(f, &ps, 0, N, N, true);
    h_proc *p = stage_start(f, extra);
    unsigned port = h_stage_metrics_port(p, 20000);
    wait_committed(f, p, ps.end, 60000);
    double unproducible = h_stage_metric(
        port, "bloomstage_records_dropped_total{reason=\"unproducible\"}");
    if (unproducible != (forward ? 0 : NPOISON))
        h_stage_fail(p, "bloomstage_records_dropped_total{reason="
                     "\"unproducible\"} is %g", unproducible);
    h_stage_stop(p);
    assert_int_equal(h_count_said(p, "rolling back"), 0);
    for (int j = 0; j < NPOISON && !forward; j++)
        poison_said(p, &ps, j);
    if (forward && h_said(p, "routed to rejected.topic"))
        h_stage_fail(p, "a poison record was rejected although the producer "
                     "takes it");
    poison_check(f, &ps, N, forward, false, NULL);
    free(rej);
}

static void test_poison_rejected_exactly_once(void **state)
{
    poison_routed(*state, "processing.guarantee=exactly_once", false);
}

static void test_poison_rejected_at_least_once(void **state)
{
    poison_routed(*state, "processing.guarantee=at_least_once", false);
}

static void test_poison_forwarded(void **state)
{
    poison_routed(*state, "processing.guarantee=exactly_once", true);
}

/*
 * Without rejected.topic, the first poison record met stops the stage:
 * exit non-zero with one error naming its topic, partition and offset,
 * and nothing committed past it (each partition's committed offset at
 * most its poison record's); the output holds no record twice.  Both
 * guarantees.
 */
static void poison_stops(fx *f, const char *guarantee)
{
    const size_t N = 600;
    const char *const extra[] = {guarantee, NULL};
    poison_stream ps = {0};
    poison_produce(f, &ps, 0, N, N, true);
    h_proc *p = stage_start(f, extra);
    int status = 0;
    if (h_process_wait(p, 60000, &status) != 0)
        h_stage_fail(p, "still running 60 s after a poison record with no "
                     "rejected.topic");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 1)
        h_stage_fail(p, "wait status %d: a poison record with no "
                     "rejected.topic must stop the stage with exit 1",
                     status);
    h_expect_said(p, "msg=\"stopping on a fatal error, committing nothing "
                     "more\" error=\"record " IN " [");
    int named = -1;
    for (int j = 0; j < NPOISON; j++) {
        char *needle = h_strdupf("record " IN " [%d] at offset %lld cannot "
                                 "be produced (too-large: MSG_SIZE_TOO_LARGE)"
                                 " to output.topic, and no rejected.topic",
                                 (int)ps.ppart[j], (long long)ps.poff[j]);
        if (h_said(p, needle))
            named = j;
        free(needle);
    }
    if (named < 0)
        h_stage_fail(p, "no error naming a poison record's topic, partition "
                     "and offset");
    int64_t c[NPART];
    committed_checked(f, c, NULL);
    for (int j = 0; j < NPOISON; j++)
        if (c[ps.ppart[j]] > ps.poff[j])
            h_stage_fail(p, "%s [%d] committed at %lld, past poison-%d at "
                         "%lld", IN, (int)ps.ppart[j],
                         (long long)c[ps.ppart[j]], j,
                         (long long)ps.poff[j]);
    size_t n = 0;
    h_record_list out = {0};
    H_CHECK(h_consume_all_conf(f->h.bs, OUT, 60000, H_READ_COMMITTED, &out));
    unsigned *seen = h_xcalloc(N, sizeof(*seen));
    for (size_t i = 0; i < out.n; i++) {
        unsigned k;
        if (poison_index(&out.recs[i]) >= 0 ||
            sscanf(out.recs[i].key, "s%u", &k) != 1 || k >= N)
            fail_msg("unexpected record %s in the output",
                     (const char *)out.recs[i].key);
        if (++seen[k] > 1)
            fail_msg("s%05u twice in the output", k);
        n++;
    }
    print_message("stopped at poison-%d (%s [%d] at %lld); %zu records in "
                  "the output, committed %lld/%lld/%lld\n", named, IN,
                  (int)ps.ppart[named], (long long)ps.poff[named], n,
                  (long long)c[0], (long long)c[1], (long long)c[2]);
    free(seen);
    h_record_list_free(&out);
}

static void test_poison_stops_exactly_once(void **state)
{
    poison_stops(*state, "processing.guarantee=exactly_once");
}

static void test_poison_stops_at_least_once(void **state)
{
    poison_stops(*state, "processing.guarantee=at_least_once");
}

/* Stops the stage (SIGSTOP), produces small records [from, to) of the
 * poison stream, pushes `errors` MSG_SIZE_TOO_LARGE answers to the next
 * Produce requests (only the stage produces meanwhile), lets it go on and
 * waits for every partition to be committed to its end. */
static void refused_batch(fx *f, h_proc *p, poison_stream *ps, size_t from,
                          size_t to, size_t total, int errors)
{
    H_CHECK(h_process_kill(p, SIGSTOP));
    poison_produce(f, ps, from, to, total, false);
    char *cmd = h_strdupf("push-errors Produce %d MSG_SIZE_TOO_LARGE", errors);
    int rc = h_broker_control(f->h.broker, cmd);
    free(cmd);
    H_CHECK(h_process_kill(p, SIGCONT));
    H_CHECK(rc);
    wait_committed(f, p, ps->end, 60000);
}

/*
 * Copies the broker refuses for good in delivery reports, after
 * librdkafka's own check passed them (MSG_SIZE_TOO_LARGE injected into the
 * stage's Produce requests).  librdkafka reports a batch's refusal on each
 * of its records, so:
 *   1. one batch of batch B refused: the round rolls back once, each
 *      refused record is sent again alone and delivered (the log says so
 *      for each): all of B in the output once, none rejected;
 *   2. one record C, refused in its batch and again alone: routed to
 *      rejected.topic (reason too-large), whole, in the rollback after.
 * Every record ends up exactly once in the output or rejected.topic
 * (these batches hold unique keys and no poison record: under the
 * replay, rejected.topic is at-least-once for records a rollback brings
 * again that were rejected before), and each note names its record.
 */
static void test_poison_refused_by_broker(void **state)
{
    fx *f = *state;
    const size_t N = 451, NA = 300, NB = 450;
    const char *const extra[] = {"processing.guarantee=exactly_once",
                                 "rejected.topic=" REJ, NULL};
    H_CHECK(h_broker_control(f->h.broker, "create-topic " REJ " 3"));
    poison_stream ps = {0};
    poison_produce(f, &ps, 0, NA, N, true);
    h_proc *p = stage_start(f, extra);
    wait_committed(f, p, ps.end, 60000);

    refused_batch(f, p, &ps, NA, NB, N, 1);
    size_t notes = h_count_said(p, "its next copy goes where it can");
    size_t alone = h_count_said(p, "record delivered alone");
    size_t rollbacks = h_count_said(p, "rolling back");
    print_message("batch B: %zu rollbacks, %zu records noted, %zu delivered "
                  "alone\n", rollbacks, notes, alone);
    if (notes == 0 || alone != notes || rollbacks == 0)
        h_stage_fail(p, "one batch refused: %zu records noted, %zu delivered "
                     "alone, %zu rollbacks", notes, alone, rollbacks);

    refused_batch(f, p, &ps, NB, N, N, 2);
    h_stage_stop(p);
    char *needle = h_strdupf("routed to rejected.topic\" topic=" IN
                             " partition=%d offset=%lld reason=too-large "
                             "error=MSG_SIZE_TOO_LARGE copy=whole",
                             (int)((N - 1) % NPART),
                             (long long)ps.end[(N - 1) % NPART] - 1);
    h_expect_said(p, needle);
    free(needle);
    size_t n_rej = 0;
    poison_check(f, &ps, N, false, true, &n_rej);
    print_message("record C: %zu rollbacks in all, %zu rejected\n",
                  h_count_said(p, "rolling back"), n_rej);
    if (n_rej != (size_t)ps.np + 1)
        h_stage_fail(p, "%zu records in %s: %d poison and record C", n_rej,
                     REJ, ps.np);
    h_expect_said(p, "msg=\"record cannot be produced: its next copy goes "
                     "where it can\" topic=" IN);
}

int main(void)
{
    h_test_main("test_stage_faults", "BS_FAULTS_ONLY", "BS_FAULTS_VERBOSE",
                "BS_FAULTS_STAGE_X");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_kill9_restart_at_least_once,
                                        fx_setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_kill9_restart_exactly_once,
                                        fx_setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_kill9_restart_short_chains,
                                        fx_setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_delivery_failure_retriable,
                                        fx_setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_delivery_failure_permanent,
                                        fx_setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_broker_down, fx_setup,
                                        h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_commit_failure, fx_setup,
                                        h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_disk_full, fx_setup,
                                        h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_readonly_dir, fx_setup,
                                        h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_revoked_while_paused, fx_setup,
                                        h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_assigned_while_unwritable_alo,
                                        fx_setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_assigned_while_unwritable_eo,
                                        fx_setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_poison_rejected_exactly_once,
                                        fx_setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_poison_rejected_at_least_once,
                                        fx_setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_poison_forwarded, fx_setup,
                                        h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_poison_stops_exactly_once,
                                        fx_setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_poison_stops_at_least_once,
                                        fx_setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_poison_refused_by_broker,
                                        fx_setup, h_fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
