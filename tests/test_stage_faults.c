/*
 * test_stage_faults.c -- `bloomstage run` under crashes and failures: what
 * README.md ("What it guarantees") and DESIGN.md ("Checkpoint, then
 * commit") promise, checked from the outside, on the real binary against
 * `bloomstage mock-broker`.
 *
 *   1. kill -9 at many moments (right after start, during the group join,
 *      just after the assignment, right after a checkpoint, between
 *      checkpoints), restart each time with the same directory and group:
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
 *      nor lose records.
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
 * Needs BLOOMSTAGE_BIN (ctest sets it).  Tests 4 to 6 use mount(2) and
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

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define IN "in"
#define OUT "out"
#define NPART 3    /* partitions of IN and of OUT */
#define MAX_RUNS 16

extern char **environ;

/* The binary, copied before BLOOMSTAGE_BIN is removed from the environment
 * (the stage reads every BLOOMSTAGE_* variable as a configuration key). */
static char g_bin[4096];

/* ---- small things ---------------------------------------------------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static int64_t sum3(const int64_t *v)
{
    int64_t s = 0;
    for (int p = 0; p < NPART; p++)
        s += v[p] > 0 ? v[p] : 0;
    return s;
}

/* ---- the input stream ------------------------------------------------ */

/*
 * n records over NPART partitions.  Record i has key "k<id>" and value
 * "v<i>" (so an output record names the input record it copies); a key id
 * is new with probability 1 - dup_pct/100, else one seen before, chosen at
 * random.  The partition is a function of the key, so every copy of a key
 * meets the same partition's filter (dedup is per partition).  Offsets are
 * the input offsets once produced in order to a fresh topic.
 */
typedef struct stream {
    size_t n, nids;
    uint32_t *id;      /* per record */
    int32_t *part;     /* per record */
    int64_t *off;      /* per record: its offset in its partition */
    size_t *first;     /* per key id: index of its first record */
    char (*key)[16];
    char (*val)[16];
} stream;

static int32_t part_of_id(uint32_t id)
{
    uint64_t x = id;
    return (int32_t)(splitmix64(&x) % NPART);
}

static stream *stream_new(size_t n, unsigned dup_pct, uint64_t seed)
{
    stream *st = calloc(1, sizeof(*st));
    assert_non_null(st);
    st->n = n;
    st->id = calloc(n, sizeof(*st->id));
    st->part = calloc(n, sizeof(*st->part));
    st->off = calloc(n, sizeof(*st->off));
    st->first = calloc(n, sizeof(*st->first));
    st->key = calloc(n, sizeof(*st->key));
    st->val = calloc(n, sizeof(*st->val));
    assert_true(st->id && st->part && st->off && st->first && st->key &&
                st->val);
    int64_t next[NPART] = {0};
    for (size_t i = 0; i < n; i++) {
        uint32_t id;
        if (st->nids > 0 && splitmix64(&seed) % 100 < dup_pct) {
            id = (uint32_t)(splitmix64(&seed) % st->nids);
        } else {
            id = (uint32_t)st->nids++;
            st->first[id] = i;
        }
        st->id[i] = id;
        st->part[i] = part_of_id(id);
        st->off[i] = next[st->part[i]]++;
        snprintf(st->key[i], sizeof(st->key[i]), "k%07u", id);
        snprintf(st->val[i], sizeof(st->val[i]), "v%07zu", i);
    }
    return st;
}

static void stream_free(stream *st)
{
    if (!st)
        return;
    free(st->id);
    free(st->part);
    free(st->off);
    free(st->first);
    free(st->key);
    free(st->val);
    free(st);
}

/* ---- fixture --------------------------------------------------------- */

typedef struct fx {
    h_broker *b;
    const char *bs;
    char *dir;      /* the test's temp directory */
    char *ckdir;    /* checkpoint.dir, inside it */
    char *conf;     /* the stage's configuration file */
    char *filler;   /* test 4: the file that fills the tmpfs */
    char group[64];
    bool mounted, immutable, readonly;
    h_proc *stage;  /* the running stage, if any (killed by teardown) */
    stream *st;
    /* Freed by the teardown too, so that a failed test leaks nothing. */
    h_proc *aux;          /* a short-lived bloomstage command */
    rd_kafka_t *member;   /* test 6's other group member */
    struct outrec *out;   /* the output, as read_out() traced it */
    unsigned *copies;     /* copies per key id, from count_copies() */
    double t0;            /* when the setup started */
} fx;

static int fx_setup(void **state)
{
    static unsigned seq;
    static const char *topics[] = {IN ":3", OUT ":3", NULL};
    fx *f = calloc(1, sizeof(*f));
    if (!f)
        return -1;
    f->t0 = now_s();
    if (h_broker_start(g_bin, 1, topics, &f->b) ||
        h_tmpdir_new(&f->dir)) {
        fprintf(stderr, "setup: %s\n", h_last_error());
        h_broker_stop(f->b);
        free(f);
        return -1;
    }
    f->bs = h_broker_bootstraps(f->b);
    f->ckdir = h_strdupf("%s/ckpt", f->dir);
    f->conf = h_strdupf("%s/stage.conf", f->dir);
    snprintf(f->group, sizeof(f->group), "bs-faults-%d-%u", (int)getpid(),
             ++seq);
    if (mkdir(f->ckdir, 0755) != 0) {
        perror(f->ckdir);
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
        f->group, f->ckdir, f->bs);
    int rc = h_write_file(f->conf, text);
    free(text);
    if (rc) {
        fprintf(stderr, "setup: %s\n", h_last_error());
        return -1;
    }
    *state = f;
    return 0;
}

static int fx_teardown(void **state)
{
    fx *f = *state;
    int rc = 0;
    h_process_free(f->stage);
    h_process_free(f->aux);
    if (f->member) {
        rd_kafka_consumer_close(f->member);
        rd_kafka_destroy(f->member);
    }
    free(f->out);
    free(f->copies);
    if (f->immutable) {
        char *cmd = h_strdupf("chattr -i '%s'", f->ckdir);
        if (system(cmd) != 0)
            fprintf(stderr, "teardown: %s failed\n", cmd);
        free(cmd);
    }
    if (f->readonly)
        chmod(f->ckdir, 0755);
    if (f->mounted && umount2(f->ckdir, MNT_DETACH) != 0) {
        fprintf(stderr, "teardown: umount %s: %s\n", f->ckdir,
                strerror(errno));
        rc = -1;
    }
    h_tmpdir_remove(f->dir);
    if (h_broker_stop(f->b)) {
        fprintf(stderr, "teardown: %s\n", h_last_error());
        rc = -1;
    }
    print_message("(%.1f s)\n", now_s() - f->t0);
    stream_free(f->st);
    free(f->dir);
    free(f->ckdir);
    free(f->conf);
    free(f->filler);
    free(f);
    return rc;
}

/* ---- producing the input --------------------------------------------- */

/* Produces records [from, to) of f->st in order, and checks that they got
 * the offsets the stream assigned them. */
static void produce_range(fx *f, size_t from, size_t to)
{
    h_record *recs = calloc(to - from, sizeof(*recs));
    assert_non_null(recs);
    for (size_t i = from; i < to; i++) {
        recs[i - from] = h_rec(f->st->key[i], f->st->val[i]);
        recs[i - from].partition = f->st->part[i];
    }
    H_CHECK(h_produce(f->bs, IN, H_PARTITION_PER_RECORD, recs, to - from));
    free(recs);
    int64_t want[NPART] = {0};
    for (size_t i = 0; i < to; i++)
        want[f->st->part[i]] = f->st->off[i] + 1;
    for (int p = 0; p < NPART; p++) {
        int64_t lo, hi;
        H_CHECK(h_watermarks(f->bs, IN, p, &lo, &hi));
        assert_int_equal(lo, 0);
        assert_int_equal(hi, want[p]);
    }
}

/* The input's end offsets after records [0, upto). */
static void ends_after(const stream *st, size_t upto, int64_t *end)
{
    for (int p = 0; p < NPART; p++)
        end[p] = 0;
    for (size_t i = 0; i < upto; i++)
        end[st->part[i]] = st->off[i] + 1;
}

/* ---- checkpoints on disk --------------------------------------------- */

/* The next offset in partition p's checkpoint file (its header, offset 16,
 * int64 little-endian), or -1 if there is no such file.  A file that is
 * there but too short or without the magic fails the test: checkpoints are
 * renamed into place whole. */
static int64_t ckpt_next(const fx *f, int32_t p)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s-%d.ckpt", f->ckdir, IN, (int)p);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return -1;
        fail_msg("%s: %s", path, strerror(errno));
    }
    uint8_t h[24];
    ssize_t n = read(fd, h, sizeof(h));
    close(fd);
    if (n != (ssize_t)sizeof(h) || memcmp(h, "BLMCKPT", 8) != 0)
        fail_msg("%s: not a whole checkpoint (%zd header bytes)", path, n);
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | h[16 + i];
    return (int64_t)v;
}

static void ckpt_all(const fx *f, int64_t *next)
{
    for (int p = 0; p < NPART; p++)
        next[p] = ckpt_next(f, p);
}

/* `bloomstage checkpoint info DIR` must exit 0 (every file verifies) and
 * report, for each partition with a file, the offset in its header.  Only
 * while no stage writes the directory. */
static void ckpt_info_check(fx *f)
{
    char *argv[] = {g_bin, "checkpoint", "info", f->ckdir, NULL};
    int st = 0;
    H_CHECK(h_process_spawn(argv, NULL, &f->aux));
    H_CHECK(h_process_wait(f->aux, 60000, &st));
    const char *out = h_process_stdout(f->aux);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("checkpoint info %s: %s\n%s%s", f->ckdir, h_status_str(st),
                 out, h_process_stderr(f->aux));
    int64_t want[NPART];
    ckpt_all(f, want);
    for (int p = 0; p < NPART; p++) {
        if (want[p] < 0)
            continue;
        char pat[64];
        snprintf(pat, sizeof(pat), "\n%-24s %-9d %-12lld ", IN, p,
                 (long long)want[p]);
        if (!strstr(out, pat))
            fail_msg("checkpoint info does not show %s [%d] at %lld:\n%s", IN,
                     p, (long long)want[p], out);
    }
    h_process_free(f->aux);
    f->aux = NULL;
}

/* No temp file of a checkpoint write is left in the directory. */
static void no_temp_files(const fx *f)
{
    char *cmd = h_strdupf("ls -a '%s' | grep -q '\\.tmp\\.'", f->ckdir);
    int rc = system(cmd);
    free(cmd);
    if (rc == 0)
        fail_msg("a checkpoint temp file was left in %s", f->ckdir);
}

/* ---- committed offsets and invariant 1 ------------------------------- */

/*
 * Reads the group's committed offsets, then the checkpoint files, and
 * fails the test unless committed <= checkpoint for every partition (a
 * partition with a commit but no checkpoint file is a violation).  Files
 * only move forward, so reading them second can hide no violation.
 * ckpt may be NULL.
 */
static void committed_checked(fx *f, int64_t *committed, int64_t *ckpt)
{
    int64_t c[NPART], k[NPART];
    H_CHECK(h_committed(f->bs, f->group, IN, NPART, c));
    ckpt_all(f, k);
    for (int p = 0; p < NPART; p++) {
        if (c[p] < 0)
            continue;
        if (k[p] < 0)
            fail_msg("invariant 1: %s [%d] committed at %lld, but there is no "
                     "checkpoint file", IN, p, (long long)c[p]);
        if (c[p] > k[p])
            fail_msg("invariant 1: %s [%d] committed at %lld, past its "
                     "checkpoint at %lld", IN, p, (long long)c[p],
                     (long long)k[p]);
    }
    if (committed)
        memcpy(committed, c, sizeof(c));
    if (ckpt)
        memcpy(ckpt, k, sizeof(k));
}

static void fail_stage(h_proc *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));

/* Fails the test, printing the stage's stderr first (the tail of it: its
 * last 12000 bytes, all with BS_FAULTS_VERBOSE set; cmocka cuts long
 * failure messages short). */
static void fail_stage(h_proc *p, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    const char *err = p ? h_process_stderr(p) : "";
    size_t len = strlen(err);
    if (len > 12000 && !getenv("BS_FAULTS_VERBOSE"))
        err += len - 12000;
    fprintf(stderr, "--- stage stderr (tail) ---\n%s--- end ---\n", err);
    fail_msg("%s", msg);
    abort(); /* not reached */
}

/* The stage must still be running. */
static void alive(h_proc *p, const char *when)
{
    int st = 0;
    int r = h_process_wait(p, 0, &st);
    if (r == 0)
        fail_stage(p, "the stage exited (%s) %s", h_status_str(st), when);
    if (r < 0)
        fail_stage(p, "waiting for the stage: %s", h_last_error());
}

/* Polls until every partition's committed offset equals want (checking
 * invariant 1 at every poll); fails after timeout_ms. */
static void wait_committed(fx *f, h_proc *p, const int64_t *want,
                           int timeout_ms)
{
    double t0 = now_s();
    int64_t c[NPART];
    for (;;) {
        committed_checked(f, c, NULL);
        bool done = true;
        for (int q = 0; q < NPART; q++)
            done = done && c[q] == want[q];
        if (done)
            return;
        if (p)
            alive(p, "before committing the end of the input");
        if ((now_s() - t0) * 1000 > timeout_ms)
            fail_stage(p, "committed %lld/%lld/%lld, want %lld/%lld/%lld "
                       "within %d ms", (long long)c[0], (long long)c[1],
                       (long long)c[2], (long long)want[0],
                       (long long)want[1], (long long)want[2], timeout_ms);
        sleep_ms(200);
    }
}

/* ---- the stage process ----------------------------------------------- */

/* `bloomstage run -c CONF -X extra...` (extra: NULL-terminated, may be
 * NULL). */
static h_proc *stage_start(fx *f, const char *const *extra)
{
    char *argv[64];
    int n = 0;
    argv[n++] = g_bin;
    argv[n++] = "run";
    argv[n++] = "-c";
    argv[n++] = f->conf;
    for (size_t i = 0; extra && extra[i]; i++) {
        assert_true(n < 60);
        argv[n++] = "-X";
        argv[n++] = (char *)extra[i];
    }
    /* For debugging: BS_FAULTS_STAGE_X="k=v k=v" adds -X settings to every
     * stage (e.g. log.level=debug consumer.debug=topic,fetch). */
    const char *x = getenv("BS_FAULTS_STAGE_X");
    char *dbg = x ? strdup(x) : NULL;
    char *save = NULL;
    for (char *t = dbg ? strtok_r(dbg, " ", &save) : NULL; t && n < 62;
         t = strtok_r(NULL, " ", &save)) {
        argv[n++] = "-X";
        argv[n++] = t;
    }
    argv[n] = NULL;
    h_proc *p = NULL;
    int rc = h_process_spawn(argv, NULL, &p);
    free(dbg);
    H_CHECK(rc);
    return p;
}

/* SIGTERM: the stage drains and must exit 0 within a minute. */
static void stage_stop(h_proc *p)
{
    int st = 0;
    H_CHECK(h_process_kill(p, SIGTERM));
    int r = h_process_wait(p, 60000, &st);
    if (r != 0)
        fail_stage(p, "no exit within 60 s of SIGTERM: %s", h_last_error());
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_stage(p, "SIGTERM: %s, want exit 0", h_status_str(st));
    if (getenv("BS_FAULTS_VERBOSE"))
        fprintf(stderr, "--- stage stderr ---\n%s--- end ---\n",
                h_process_stderr(p));
}

/* SIGKILL, and the stage must have been running until then. */
static void stage_kill9(h_proc *p, const char *when)
{
    alive(p, when);
    H_CHECK(h_process_kill(p, SIGKILL));
    int st = 0;
    if (h_process_wait(p, 10000, &st) != 0)
        fail_stage(p, "not reaped after SIGKILL: %s", h_last_error());
    if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL)
        fail_stage(p, "%s: %s before the SIGKILL", when, h_status_str(st));
}

static bool stage_said(h_proc *p, const char *needle)
{
    return strstr(h_process_stderr(p), needle) != NULL;
}

static size_t count_said(h_proc *p, const char *needle)
{
    size_t n = 0;
    for (const char *s = h_process_stderr(p); (s = strstr(s, needle));
         s += strlen(needle))
        n++;
    return n;
}

/* Waits until the stage's log contains needle. */
static void wait_said(h_proc *p, const char *needle, int timeout_ms)
{
    double t0 = now_s();
    while (!stage_said(p, needle)) {
        alive(p, "while waiting for its log");
        if ((now_s() - t0) * 1000 > timeout_ms)
            fail_stage(p, "the stage did not log '%s' within %d ms", needle,
                       timeout_ms);
        sleep_ms(20);
    }
}

/* ---- the output ------------------------------------------------------ */

/* One output record, traced back to the input record it copies. */
typedef struct outrec {
    uint32_t id;       /* key id */
    size_t rec;        /* input record index */
    int32_t src_part;
    int64_t src_off;
    int32_t part;      /* in OUT */
    int64_t off;       /* in OUT */
    int run;           /* test 1: which run produced it (1-based) */
} outrec;

static const char *header(const h_record *r, const char *name)
{
    for (size_t i = 0; i < r->n_headers; i++)
        if (!strcmp(r->headers[i].name, name) && r->headers[i].value)
            return r->headers[i].value;
    return NULL;
}

/*
 * Reads all of OUT and traces every record back to its input record: the
 * value names it ("v<i>"), the key must be that record's key, and the
 * bloomstage-src header must be IN:partition:offset of that record.
 * Returns the records (owned by f, as f->out) and their count.
 */
static outrec *read_out(fx *f, size_t *n)
{
    h_record_list l = {0};
    H_CHECK(h_consume_all(f->bs, OUT, 60000, &l));
    free(f->out);
    outrec *o = f->out = calloc(l.n ? l.n : 1, sizeof(*o));
    assert_non_null(o);
    const stream *st = f->st;
    char bad[512] = "";
    for (size_t k = 0; k < l.n && !bad[0]; k++) {
        const h_record *r = &l.recs[k];
        const char *v = r->value;
        char *end = NULL;
        size_t i = v && v[0] == 'v' ? strtoul(v + 1, &end, 10) : st->n;
        if (i >= st->n || *end || !r->key || strcmp(r->key, st->key[i])) {
            snprintf(bad, sizeof(bad), "output %d:%lld: key '%s' value '%s' "
                     "is no input record", (int)r->partition,
                     (long long)r->offset,
                     r->key ? (const char *)r->key : "NULL", v ? v : "NULL");
            break;
        }
        const char *src = header(r, "bloomstage-src");
        char want[64];
        snprintf(want, sizeof(want), "%s:%d:%lld", IN, (int)st->part[i],
                 (long long)st->off[i]);
        if (!src || strcmp(src, want))
            snprintf(bad, sizeof(bad), "output %d:%lld: bloomstage-src '%s', "
                     "want '%s'", (int)r->partition, (long long)r->offset,
                     src ? src : "(none)", want);
        o[k] = (outrec){st->id[i], i, st->part[i], st->off[i], r->partition,
                        r->offset, 0};
    }
    *n = l.n;
    h_record_list_free(&l);
    if (bad[0])
        fail_msg("%s", bad);
    return o;
}

/*
 * Copies per key id in the output, and checks that every key id whose
 * first record is before `upto` is there at least once.  *extra (if not
 * NULL) gets the number of copies beyond the first, summed over keys.
 * The counts are owned by f (f->copies).
 */
static unsigned *count_copies(fx *f, const outrec *o, size_t n, size_t upto,
                              size_t *extra)
{
    const stream *st = f->st;
    free(f->copies);
    unsigned *c = f->copies = calloc(st->nids ? st->nids : 1, sizeof(*c));
    assert_non_null(c);
    for (size_t k = 0; k < n; k++)
        c[o[k].id]++;
    size_t missing = 0, x = 0, first_missing = 0;
    for (size_t id = 0; id < st->nids; id++) {
        if (c[id] > 1)
            x += c[id] - 1;
        if (st->first[id] < upto && c[id] == 0 && missing++ == 0)
            first_missing = id;
    }
    if (missing)
        fail_msg("%zu unique keys are not in the output (lost), e.g. k%07zu "
                 "(first at %s:%d:%lld)", missing, first_missing, IN,
                 (int)st->part[st->first[first_missing]],
                 (long long)st->off[st->first[first_missing]]);
    for (size_t k = 0; k < n; k++)
        if (o[k].rec >= upto)
            fail_msg("output holds input record %zu, which was never produced",
                     o[k].rec);
    if (extra)
        *extra = x;
    return c;
}

/* Every key id first seen before `upto` is in the output exactly once. */
static void exactly_once_before(fx *f, const unsigned *c, size_t upto,
                                const char *why)
{
    for (size_t id = 0; id < f->st->nids; id++)
        if (f->st->first[id] < upto && c[id] != 1)
            fail_msg("key k%07zu (first at %s:%d:%lld) is in the output %u "
                     "times, want exactly once: %s", id, IN,
                     (int)f->st->part[f->st->first[id]],
                     (long long)f->st->off[f->st->first[id]], c[id], why);
}

/* ---- 1. kill -9 at many moments -------------------------------------- */

typedef enum { K_TIME, K_LOG, K_CKPT } kill_kind;

typedef struct kill_plan {
    kill_kind kind;
    int ms;             /* K_TIME: after the start; K_LOG, K_CKPT: after the
                           event */
    const char *log;    /* K_LOG: a log message */
    double frac;        /* K_CKPT: once the checkpoints cover this fraction
                           of the input (and moved in this run) */
    const char *what;
} kill_plan;

static const kill_plan KILLS[] = {
    {K_TIME, 150, NULL, 0, "right after start"},
    {K_TIME, 1500, NULL, 0, "during the group join"},
    {K_LOG, 30, "msg=\"partition assigned\"", 0, "just after the assignment"},
    {K_CKPT, 0, NULL, 0.15, "right after a checkpoint"},
    {K_CKPT, 4, NULL, 0.35, "4 ms after a checkpoint"},
    {K_CKPT, 23, NULL, 0.55, "23 ms after a checkpoint"},
    {K_CKPT, 61, NULL, 0.80, "61 ms after a checkpoint"},
};
#define NKILLS (sizeof(KILLS) / sizeof(KILLS[0]))

/* Waits for the moment KILLS[k] describes, then kills the stage with -9. */
static void kill_at(fx *f, h_proc *p, const kill_plan *k, int64_t total)
{
    double t0 = now_s();
    const double limit = 120.0;
    if (k->kind == K_TIME) {
        sleep_ms(k->ms);
    } else if (k->kind == K_LOG) {
        wait_said(p, k->log, (int)(limit * 1000));
        sleep_ms(k->ms);
    } else {
        int64_t start[NPART], now[NPART];
        unsigned polls = 0;
        ckpt_all(f, start);
        for (;;) {
            ckpt_all(f, now);
            int64_t s = sum3(now);
            if (s > sum3(start) && s >= (int64_t)(k->frac * (double)total))
                break;
            if (s == total && sum3(start) == total)
                break; /* nothing left to do: kill it anyway */
            if (now_s() - t0 > limit)
                fail_stage(p, "no checkpoint past %.0f%% of the input within "
                           "%.0f s", k->frac * 100, limit);
            if (++polls % 256 == 0)
                alive(p, "while waiting for a checkpoint");
            usleep(500);
        }
        if (k->ms)
            sleep_ms(k->ms);
    }
    stage_kill9(p, k->what);
}

/* Sorts output records by key id, then run, then input offset. */
static int by_id_run(const void *a, const void *b)
{
    const outrec *x = a, *y = b;
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
static void kill9_restart(fx *f, bool exactly_once)
{
    const size_t N = 20000;
    f->st = stream_new(N, 40, 1);
    produce_range(f, 0, N);
    int64_t end[NPART];
    ends_after(f->st, N, end);

    int64_t ckpt[MAX_RUNS][NPART], out_hw[MAX_RUNS][NPART];
    for (int p = 0; p < NPART; p++)
        ckpt[0][p] = -1;
    const char *const extra[] = {
        "dedup.capacity=2000",
        exactly_once ? "processing.guarantee=exactly_once"
                     : "processing.guarantee=at_least_once",
        NULL};
    size_t rollbacks = 0;

    for (size_t k = 1; k <= NKILLS; k++) {
        h_proc *p = f->stage = stage_start(f, extra);
        kill_at(f, p, &KILLS[k - 1], (int64_t)N);
        rollbacks += count_said(p, "rolling back");

        /* Let what the dead process had on the wire land (or not) before
         * the snapshots. */
        sleep_ms(300);
        int64_t c[NPART];
        committed_checked(f, c, ckpt[k]);
        ckpt_info_check(f);
        for (int q = 0; q < NPART; q++) {
            if (ckpt[k][q] < ckpt[k - 1][q])
                fail_msg("kill %zu (%s): %s [%d] checkpoint went back from "
                         "%lld to %lld", k, KILLS[k - 1].what, IN, q,
                         (long long)ckpt[k - 1][q], (long long)ckpt[k][q]);
            int64_t lo;
            H_CHECK(h_watermarks(f->bs, OUT, q, &lo, &out_hw[k][q]));
        }
        print_message("kill %zu (%s): checkpoints %lld/%lld/%lld, committed "
                      "%lld/%lld/%lld, output %lld\n", k, KILLS[k - 1].what,
                      (long long)ckpt[k][0], (long long)ckpt[k][1],
                      (long long)ckpt[k][2], (long long)c[0], (long long)c[1],
                      (long long)c[2], (long long)sum3(out_hw[k]));
        h_process_free(p);
        f->stage = NULL;
    }

    /* The last run finishes the input and drains. */
    h_proc *p = f->stage = stage_start(f, extra);
    wait_committed(f, p, end, 120000);
    stage_stop(p);
    rollbacks += count_said(p, "rolling back");
    h_process_free(p);
    f->stage = NULL;
    int64_t fin[NPART];
    ckpt_all(f, fin);
    for (int q = 0; q < NPART; q++)
        assert_int_equal(fin[q], end[q]);
    ckpt_info_check(f);
    no_temp_files(f);
    assert_int_equal(rollbacks, 0);

    size_t n = 0, extra_copies = 0;
    outrec *o = read_out(f, &n);
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
    unsigned *copies = count_copies(f, o, n, N, &extra_copies);
    size_t bound = 0;
    for (size_t i = 0; i < n; i++)
        if (o[i].run <= (int)NKILLS &&
            o[i].src_off >= ckpt[o[i].run][o[i].src_part])
            bound++;
    qsort(o, n, sizeof(*o), by_id_run);
    for (size_t i = 1; i < n; i++) {
        const outrec *a = &o[i - 1], *b = &o[i];
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

static void test_kill9_restart_at_least_once(void **state)
{
    kill9_restart(*state, false);
}

static void test_kill9_restart_exactly_once(void **state)
{
    kill9_restart(*state, true);
}

/* ---- 2. delivery failures -------------------------------------------- */

/*
 * Batch A is processed and committed; the stage is then stopped (SIGSTOP,
 * so that it does not see batch B before the errors are in place), batch B
 * produced, COUNT Produce errors pushed (cluster-wide: they would fail the
 * test's own producer too), the stage continued.  While the errors last:
 * the stage logs a rollback, and the committed offsets stay at A's end (no
 * delivery of B can succeed, so no checkpoint can reach past B's first
 * record to forward in each partition).  Then
 * the errors are cleared: everything is committed, every key of A and B is
 * in the output, and the keys first seen in A exactly once (B's copies of
 * them must meet the filter reloaded from A's checkpoint); with
 * processing.guarantee=exactly_once (set here) every key exactly once.
 */
static void delivery_failure(fx *f, const char *error)
{
    const size_t N = 6000, NA = 3000;
    f->st = stream_new(N, 40, 2);
    produce_range(f, 0, NA);
    int64_t end_a[NPART], end_b[NPART];
    ends_after(f->st, NA, end_a);
    ends_after(f->st, N, end_b);

    const char *const extra[] = {"producer.message.timeout.ms=3000",
                                 "consumer.session.timeout.ms=10000",
                                 "consumer.heartbeat.interval.ms=500",
                                 "processing.guarantee=exactly_once", NULL};
    h_proc *p = f->stage = stage_start(f, extra);
    wait_committed(f, p, end_a, 60000);

    H_CHECK(h_process_kill(p, SIGSTOP));
    produce_range(f, NA, N);
    char *cmd = h_strdupf("push-errors Produce 1000 %s", error);
    int rc = h_broker_control(f->b, cmd);
    free(cmd);
    H_CHECK(h_process_kill(p, SIGCONT));
    H_CHECK(rc);

    wait_said(p, "delivery failed, rolling back", 30000);
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
    double t0 = now_s();
    while (now_s() - t0 < 4.0) {
        int64_t c[NPART], k[NPART];
        committed_checked(f, c, k);
        for (int q = 0; q < NPART; q++)
            if (c[q] > first_fwd[q] || k[q] > first_fwd[q])
                fail_stage(p, "%s [%d] committed at %lld, checkpointed at %lld"
                           " while every delivery fails (%s); the first record"
                           " to forward after batch A is at %lld", IN, q,
                           (long long)c[q], (long long)k[q], error,
                           (long long)first_fwd[q]);
        alive(p, "while deliveries fail");
        sleep_ms(400);
    }
    H_CHECK(h_broker_control(f->b, "clear-errors Produce"));
    wait_committed(f, p, end_b, 120000);
    size_t rollbacks = count_said(p, "delivery failed, rolling back");
    stage_stop(p);
    ckpt_info_check(f);

    size_t n = 0, extra_copies = 0;
    outrec *o = read_out(f, &n);
    unsigned *c = count_copies(f, o, n, N, &extra_copies);
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
    ends_after(f->st, N, end);

    const char *const extra[] = {"producer.message.timeout.ms=3000",
                                 "processing.guarantee=exactly_once", NULL};
    h_proc *p = f->stage = stage_start(f, extra);
    double t0 = now_s();
    int64_t k[NPART];
    do {
        if (now_s() - t0 > 60)
            fail_stage(p, "no checkpoint within 60 s");
        usleep(500);
        ckpt_all(f, k);
    } while (sum3(k) < (int64_t)N / 4);
    H_CHECK(h_broker_control(f->b, "broker-down 1"));
    sleep_ms(4000);
    alive(p, "while the broker was down");
    H_CHECK(h_broker_control(f->b, "broker-up 1"));
    print_message("broker down at checkpoints %lld/%lld/%lld of "
                  "%lld/%lld/%lld\n", (long long)k[0], (long long)k[1],
                  (long long)k[2], (long long)end[0], (long long)end[1],
                  (long long)end[2]);

    wait_committed(f, p, end, 180000);
    stage_stop(p);
    print_message("rollbacks: %zu, assignments lost: %zu\n",
                  count_said(p, "rolling back"),
                  count_said(p, "assignment lost"));
    ckpt_info_check(f);

    size_t n = 0, extra_copies = 0;
    outrec *o = read_out(f, &n);
    unsigned *c = count_copies(f, o, n, N, &extra_copies);
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
    f->st = stream_new(N, 40, 10);
    produce_range(f, 0, NA);
    int64_t end_a[NPART], end_b[NPART];
    ends_after(f->st, NA, end_a);
    ends_after(f->st, N, end_b);
    h_proc *p = f->stage = stage_start(f, NULL);
    wait_committed(f, p, end_a, 60000);

    H_CHECK(h_broker_control(f->b, "push-errors OffsetCommit 100 "
                                   "OFFSET_METADATA_TOO_LARGE"));
    produce_range(f, NA, N);
    double t0 = now_s();
    for (;;) {
        int64_t k[NPART];
        committed_checked(f, NULL, k);
        if (k[0] == end_b[0] && k[1] == end_b[1] && k[2] == end_b[2])
            break;
        alive(p, "while commits fail");
        if (now_s() - t0 > 60)
            fail_stage(p, "batch B was not checkpointed within 60 s");
        sleep_ms(100);
    }
    wait_said(p, "msg=\"commit failed\"", 10000);
    sleep_ms(1000);
    H_CHECK(h_broker_control(f->b, "clear-errors OffsetCommit"));
    int64_t c[NPART];
    committed_checked(f, c, NULL);
    print_message("checkpointed at %lld/%lld/%lld, committed %lld/%lld/%lld "
                  "when the commit errors were cleared\n",
                  (long long)end_b[0], (long long)end_b[1],
                  (long long)end_b[2], (long long)c[0], (long long)c[1],
                  (long long)c[2]);
    /* "the next round commits again" */
    t0 = now_s();
    bool caught_up = false;
    while (!caught_up && now_s() - t0 < 10) {
        committed_checked(f, c, NULL);
        caught_up = c[0] == end_b[0] && c[1] == end_b[1] && c[2] == end_b[2];
        sleep_ms(250);
    }
    stage_stop(p);
    committed_checked(f, c, NULL);
    if (!caught_up || c[0] != end_b[0] || c[1] != end_b[1] ||
        c[2] != end_b[2])
        fail_stage(p, "a failed commit is never retried: checkpoints at "
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
        /* Fill the tmpfs: 4 KiB at a time until ENOSPC. */
        f->filler = h_strdupf("%s/filler", f->ckdir);
        int fd = open(f->filler, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                      0644);
        if (fd < 0)
            fail_msg("%s: %s", f->filler, strerror(errno));
        char buf[4096];
        memset(buf, 0xa5, sizeof(buf));
        for (;;) {
            ssize_t w = write(fd, buf, sizeof(buf));
            if (w < 0 && errno == ENOSPC)
                break;
            if (w < 0)
                fail_msg("filling %s: %s", f->filler, strerror(errno));
        }
        /* the last partial block too */
        while (write(fd, buf, 1) == 1)
            ;
        close(fd);
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
    f->st = stream_new(N, 40, kind == BLOCK_FULL ? 4 : 5);
    produce_range(f, 0, NA);
    int64_t end_a[NPART], end_b[NPART];
    ends_after(f->st, NA, end_a);
    ends_after(f->st, N, end_b);

    /* Small filters (a few KiB), so that they fit the tmpfs. */
    const char *const extra[] = {"dedup.capacity=1000", NULL};
    h_proc *p = f->stage = stage_start(f, extra);
    wait_committed(f, p, end_a, 60000);

    if (!block_writes(f, kind)) {
        print_message("chattr +i failed on %s (not ext2/3/4?): skipped\n",
                      f->ckdir);
        skip();
    }
    produce_range(f, NA, N);
    wait_said(p, "msg=\"checkpoint failed\"", 30000);
    wait_said(p, "pausing consumption", 30000);
    double t0 = now_s();
    while (now_s() - t0 < 3.0) {
        int64_t c[NPART], k[NPART];
        committed_checked(f, c, k);
        for (int q = 0; q < NPART; q++)
            if (c[q] != end_a[q] || k[q] != end_a[q])
                fail_stage(p, "%s [%d]: committed %lld, checkpoint %lld while "
                           "checkpoints cannot be written; want both at "
                           "batch A's end %lld", IN, q, (long long)c[q],
                           (long long)k[q], (long long)end_a[q]);
        alive(p, "while checkpoints fail");
        sleep_ms(300);
    }
    unblock_writes(f, kind);
    wait_committed(f, p, end_b, 120000);
    wait_said(p, "checkpoints recovered, resuming", 10000);
    stage_stop(p);
    ckpt_info_check(f);
    no_temp_files(f);

    size_t n = 0;
    outrec *o = read_out(f, &n);
    unsigned *c = count_copies(f, o, n, N, NULL);
    exactly_once_before(f, c, N, "nothing crashed and no delivery failed");
    print_message("%zu checkpoint failures logged, %zu output records, %zu "
                  "unique keys\n", count_said(p, "msg=\"checkpoint failed\""),
                  n, f->st->nids);
}

/* Mounts a tmpfs on the checkpoint directory; false if that is not
 * possible here (not root, no CAP_SYS_ADMIN). */
static bool mount_tmpfs(fx *f, const char *size)
{
    char opts[64];
    snprintf(opts, sizeof(opts), "size=%s,mode=0755", size);
    if (mount("tmpfs", f->ckdir, "tmpfs", 0, opts) != 0) {
        print_message("mount -t tmpfs on %s: %s: skipped\n", f->ckdir,
                      strerror(errno));
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
    rd_kafka_conf_t *conf = h_kafka_conf(f->bs);
    char errstr[256];
    const char *kv[][2] = {{"group.id", f->group},
                           {"enable.auto.commit", "false"},
                           {"auto.offset.reset", "earliest"},
                           {"session.timeout.ms", "3000"},
                           {"heartbeat.interval.ms", "300"},
                           {"partition.assignment.strategy",
                            "cooperative-sticky"}};
    for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++)
        if (rd_kafka_conf_set(conf, kv[i][0], kv[i][1], errstr,
                              sizeof(errstr)) != RD_KAFKA_CONF_OK)
            fail_msg("%s: %s", kv[i][0], errstr);
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

/* Polls the member for ms milliseconds (it must keep polling to take part
 * in rebalances); returns how many partitions it has. */
static int member_poll(rd_kafka_t *rk, int ms)
{
    double t0 = now_s();
    while ((now_s() - t0) * 1000 < ms) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 50);
        if (m)
            rd_kafka_message_destroy(m);
    }
    rd_kafka_topic_partition_list_t *a = NULL;
    int n = 0;
    if (rd_kafka_assignment(rk, &a) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        n = a->cnt;
        rd_kafka_topic_partition_list_destroy(a);
    }
    return n;
}

/* Polls the member until the stage's log has `needle` (count times). */
static void member_poll_until(rd_kafka_t *rk, h_proc *p, const char *needle,
                              size_t count, const char *what)
{
    double t0 = now_s();
    while (count_said(p, needle) < count) {
        member_poll(rk, 100);
        alive(p, what);
        if (now_s() - t0 > 90)
            fail_stage(p, "%s: the stage did not log '%s' (x%zu) within 90 s",
                       what, needle, count);
    }
}

/* Polls the member until it has at least n partitions. */
static void member_wait_parts(rd_kafka_t *rk, h_proc *p, int n)
{
    double t0 = now_s();
    while (member_poll(rk, 100) < n) {
        if (p)
            alive(p, "while the other member joined");
        if (now_s() - t0 > 90)
            fail_stage(p, "the other member did not get %d partition(s) "
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
    f->st = stream_new(N, 40, 8);
    produce_range(f, 0, NA);
    int64_t end_a[NPART], end_b[NPART];
    ends_after(f->st, NA, end_a);
    ends_after(f->st, N, end_b);
    const char *const extra[] = {"dedup.capacity=1000", NULL};
    h_proc *p = f->stage = stage_start(f, extra);
    wait_committed(f, p, end_a, 60000);

    if (!block_writes(f, BLOCK_READONLY)) {
        print_message("chattr +i failed on %s: skipped\n", f->ckdir);
        skip();
    }
    produce_range(f, NA, N);
    wait_said(p, "pausing consumption", 30000);

    rd_kafka_t *rk = f->member = member_new(f);
    member_wait_parts(rk, p, 1);
    int others = member_poll(rk, 100);
    unblock_writes(f, BLOCK_READONLY);
    member_poll_until(rk, p, "checkpoints recovered, resuming", 1,
                      "resuming while the other member is in the group");
    print_message("resumed while the other member had %d partition(s)\n",
                  others);
    member_free(f);

    /* The stage gets them back; they must be consumed. */
    wait_committed(f, p, end_b, 60000);
    stage_stop(p);
    size_t n = 0;
    outrec *o = read_out(f, &n);
    unsigned *c = count_copies(f, o, n, N, NULL);
    exactly_once_before(f, c, N, "no crash, no delivery failure");
}

/*
 * Partitions first assigned while the directory is unwritable.  Another
 * member is in the group first, so the stage, joining second, gets only
 * some partitions; it processes a first round of them and commits.  The
 * directory is made unwritable and the other member leaves: the stage is
 * assigned partitions it never had (no checkpoint file) while it cannot
 * write one.  README: a failed checkpoint write pauses and retries, losing
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
    ends_after(f->st, N, end);

    rd_kafka_t *rk = f->member = member_new(f);
    member_wait_parts(rk, NULL, NPART);

    char *g = h_strdupf("processing.guarantee=%s", guarantee);
    const char *const extra[] = {"dedup.capacity=1000", g, NULL};
    h_proc *p = f->stage = stage_start(f, extra);
    free(g);
    member_poll_until(rk, p, "msg=\"partition assigned\"", 1,
                      "joining second");
    /* Its first checkpoint covers some records. */
    double t0 = now_s();
    int64_t k[NPART];
    do {
        member_poll(rk, 50);
        ckpt_all(f, k);
        if (now_s() - t0 > 60)
            fail_stage(p, "no checkpoint with records within 60 s");
    } while (sum3(k) == 0);
    size_t had = count_said(p, "msg=\"partition assigned\"");
    if (!block_writes(f, BLOCK_READONLY)) {
        print_message("chattr +i failed on %s: skipped\n", f->ckdir);
        skip();
    }
    member_free(f);
    /* The others come to the stage while it cannot write a checkpoint. */
    t0 = now_s();
    while (count_said(p, "msg=\"partition assigned\"") < NPART) {
        alive(p, "when given partitions while the checkpoint directory is "
              "unwritable");
        if (now_s() - t0 > 60)
            fail_stage(p, "the other partitions did not come within 60 s");
        sleep_ms(100);
    }
    sleep_ms(2000);
    alive(p, "2 s after being given partitions while the checkpoint "
          "directory is unwritable");
    print_message("%s: had %zu partition(s), got the rest while unwritable\n",
                  guarantee, had);
    unblock_writes(f, BLOCK_READONLY);
    wait_committed(f, p, end, 120000);
    stage_stop(p);
    size_t n = 0;
    outrec *o = read_out(f, &n);
    count_copies(f, o, n, N, NULL);
    /* Records polled while paused are left for later, not errors. */
    size_t bogus = count_said(p, "msg=\"consume error\" error=NO_ERROR");
    if (bogus)
        fail_stage(p, "%zu records polled while paused were logged as "
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

int main(void)
{
    const char *bin = h_bloomstage_path();
    if (!bin) {
        fprintf(stderr, "test_stage_faults: %s\n", h_last_error());
        return 1;
    }
    snprintf(g_bin, sizeof(g_bin), "%s", bin);
    /* No BLOOMSTAGE_* of the caller's (BLOOMSTAGE_BIN included) may reach
     * the stages started here. */
    for (bool again = true; again;) {
        again = false;
        for (char **e = environ; *e; e++)
            if (!strncmp(*e, "BLOOMSTAGE_", 11)) {
                char name[256];
                snprintf(name, sizeof(name), "%.*s", (int)strcspn(*e, "="),
                         *e);
                unsetenv(name);
                again = true;
                break;
            }
    }
    const char *only = getenv("BS_FAULTS_ONLY");
    if (only && *only)
        cmocka_set_test_filter(only);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_kill9_restart_at_least_once,
                                        fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_kill9_restart_exactly_once,
                                        fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_delivery_failure_retriable,
                                        fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_delivery_failure_permanent,
                                        fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_broker_down, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_commit_failure, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_disk_full, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_readonly_dir, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_revoked_while_paused, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_assigned_while_unwritable_alo,
                                        fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_assigned_while_unwritable_eo,
                                        fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
