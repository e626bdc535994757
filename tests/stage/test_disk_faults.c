/*
 * test_disk_faults.c -- the directory store (checkpoint.store=dir) when its
 * disk fails under a running stage, checked from the outside: `bloomstage
 * run` (exactly_once; the output-tail replay on the mock cluster) against
 * `bloomstage mock-broker`, its checkpoint.dir a small tmpfs of the test's
 * own.  The tmpfs lives in a mount namespace of the test's own
 * (h_private_mounts), so it goes away with the test's processes even when
 * the test is killed before its teardown, which unmounts it otherwise.
 *
 * One stage, one stream, four faults in turn, each while a new batch of
 * records comes in:
 *   1. the disk full (a filler file takes the rest of it);
 *   2. the disk read-only (mount -o remount,ro);
 *   3. an I/O error: the test's fault library (harness/eio_preload.c,
 *      LD_PRELOAD) fails fsync(2) of the files in checkpoint.dir with EIO
 *      while its trigger file exists, as a disk reports a failed writeback;
 *   4. the disk full again, and kill -9 while it is; the filler removed
 *      and a truncated checkpoint left under a temp file's name (what a
 *      kill in the middle of a write leaves), then a restart.
 * Under 1 to 3: the log names the failure ("checkpoint failed" with the
 * system's error text), /ready turns 503 naming it ("checkpoints are
 * failing: ... <error>"), the committed offsets and the checkpoint files
 * stay at the previous batch's end (nothing committed past a durable
 * checkpoint), and once the fault is removed the stage goes on by itself:
 * /ready 200 again, the batch committed, no temp file left.  Under 4: the
 * restart loads the last good checkpoints (each partition's restored
 * offset is the previous batch's end), removes the temp file, and
 * finishes the stream.  At every read of the committed offsets, invariant
 * 1 (committed <= the checkpoint on disk).  At the end `checkpoint info`
 * verifies every file and the output read at read_committed holds every
 * key exactly once: nothing lost or duplicated across all of it.
 *
 * Timings are printed, not asserted: from each fault to /ready 503 (the
 * readiness bound, max(2 x checkpoint.interval.ms, interval + 10 s), is
 * printed beside it) and from its removal to /ready 200.
 *
 * Needs root (mount(2), unshare(2)), as CI runs: without it the test
 * fails saying so -- it is nothing but the faults the mount makes.
 * BLOOMSTAGE_BIN and BS_EIO_PRELOAD (the fault library) come from ctest;
 * BS_DISK_VERBOSE=1 prints the stage's whole log.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support.h"
#include "ops/report.h" /* bs_ready_ckpt_bound_s */

#define IN "in"
#define OUT "out"
#define NPART 3
#define INTERVAL_MS 500 /* checkpoint.interval.ms */
#define BATCH 1500      /* records a fault sees come in */
#define NBATCH 6        /* the first, one per fault (4), the last */
#define N (BATCH * NBATCH)
#define PROBE_MS 100    /* /ready probed this often */
#define FAULT_WAIT_S 90 /* generous: for /ready to turn, either way */

/* Why the mount namespace could not be had (main, single-threaded). */
static char ns_error[512];

typedef struct fx {
    h_fixture h;
    char *ckdir;   /* checkpoint.dir: the tmpfs */
    char *conf;
    char *filler;  /* fills the tmpfs */
    char *trigger; /* exists: fsync in ckdir fails (eio_preload.c) */
    char group[64];
    bool mounted;
    h_stream *st;
} fx;

static int fx_cleanup(h_fixture *hf)
{
    fx *f = (fx *)hf;
    int rc = 0;
    if (f->mounted && h_tmpfs_umount(f->ckdir) != 0) {
        fprintf(stderr, "teardown: %s\n", h_last_error());
        rc = -1;
    }
    h_stream_free(f->st);
    free(f->ckdir);
    free(f->conf);
    free(f->filler);
    free(f->trigger);
    return rc;
}

static int fx_setup(void **state)
{
    static const char *const topics[] = {IN ":3", OUT ":3", NULL};
    if (h_fixture_setup_sized(state, 1, topics, sizeof(fx), fx_cleanup))
        return -1;
    fx *f = *state;
    f->ckdir = h_strdupf("%s/ckpt", f->h.dir);
    f->conf = h_strdupf("%s/stage.conf", f->h.dir);
    f->filler = h_strdupf("%s/filler", f->ckdir);
    f->trigger = h_strdupf("%s/eio-on", f->h.dir);
    snprintf(f->group, sizeof(f->group), "bs-disk-%d", (int)getpid());
    if (mkdir(f->ckdir, 0755) != 0) {
        perror(f->ckdir);
        h_fixture_teardown(state);
        return -1;
    }
    /* Filters of about 300 KiB a partition: a round's changes (a few
     * hundred new keys a partition) stay under checkpoint.delta.ratio,
     * so faults meet deltas as well as snapshots, and the snapshots, one
     * set aside each and their deltas fit the 4 MiB tmpfs.  Short
     * timeouts, so that a restart's join takes seconds. */
    char *text = h_strdupf(
        "input.topics=" IN "\n"
        "output.topic=" OUT "\n"
        "consumer.group.id=%s\n"
        "checkpoint.dir=%s\n"
        "checkpoint.interval.ms=%d\n"
        "processing.guarantee=exactly_once\n"
        "dedup.capacity=50000\n"
        "metrics.listen=127.0.0.1:0\n"
        "kafka.bootstrap.servers=%s\n"
        "kafka.reconnect.backoff.ms=50\n"
        "kafka.reconnect.backoff.max.ms=500\n"
        "consumer.session.timeout.ms=3000\n"
        "consumer.heartbeat.interval.ms=300\n"
        "consumer.fetch.wait.max.ms=100\n"
        "log.level=info\n",
        f->group, f->ckdir, INTERVAL_MS, f->h.bs);
    int rc = h_write_file(f->conf, text);
    free(text);
    if (rc) {
        fprintf(stderr, "setup: %s\n", h_last_error());
        h_fixture_teardown(state);
        return -1;
    }
    return 0;
}

/* ---- the stage ---------------------------------------------------------- */

/* A stage with the fault library preloaded (its trigger absent: no
 * fault), and its metrics port. */
static h_proc *stage_start(fx *f, unsigned *port)
{
    const char *lib = getenv("BS_EIO_PRELOAD");
    if (!lib || access(lib, R_OK) != 0)
        fail_msg("BS_EIO_PRELOAD (the fault library) is %s", lib ? lib
                 : "unset: run under ctest");
    /* A sanitizer build's runtime wants to be loaded first; the fault
     * library, built without it, may come before it. */
    const char *asan = getenv("ASAN_OPTIONS");
    char *env_lib = h_strdupf("LD_PRELOAD=%s", lib);
    char *env_dir = h_strdupf("BS_EIO_DIR=%s", f->ckdir);
    char *env_trig = h_strdupf("BS_EIO_TRIGGER=%s", f->trigger);
    char *env_asan = h_strdupf("ASAN_OPTIONS=%s%sverify_asan_link_order=0",
                               asan ? asan : "", asan && *asan ? ":" : "");
    char *const env[] = {env_lib, env_dir, env_trig, env_asan, NULL};
    h_proc *p = h_stage_start(f->conf, NULL, env);
    free(env_lib);
    free(env_dir);
    free(env_trig);
    free(env_asan);
    *port = h_stage_metrics_port(p, 30000);
    return p;
}

/* /ready's status, its body (its first line) into why. */
static int ready(h_proc *p, unsigned port, char *why, size_t why_size)
{
    h_http_resp r;
    char err[256];
    if (h_http_request(port, "GET", "/ready", &r, err, sizeof(err)) != 0)
        h_stage_fail(p, "GET /ready: %s", err);
    int status = r.status;
    snprintf(why, why_size, "%.*s", (int)strcspn(r.body, "\n"), r.body);
    h_http_resp_free(&r);
    return status;
}

/* The committed offsets into c (may be NULL), checked against the
 * checkpoint files (invariant 1), whose offsets go to k (may be NULL). */
static void committed_checked(fx *f, int64_t *c, int64_t *k)
{
    int64_t got[NPART];
    H_CHECK(h_committed(f->h.bs, f->group, IN, NPART, got));
    h_expect_durable_commits(f->ckdir, IN, NPART, got, k);
    if (c)
        memcpy(c, got, sizeof(got));
}

static void invariant1_cb(void *arg, const int64_t *c)
{
    fx *f = arg;
    h_expect_durable_commits(f->ckdir, IN, NPART, c, NULL);
}

static void wait_committed(fx *f, h_proc *p, const int64_t *want)
{
    h_proc *const procs[] = {p, NULL};
    h_wait_committed(f->h.bs, f->group, IN, NPART, want, procs,
                     FAULT_WAIT_S * 1000, invariant1_cb, f);
}

/* Nothing moved past the batch before the fault: the committed offsets
 * and the checkpoint files are both at `end`. */
static void held_at(fx *f, h_proc *p, const int64_t *end, const char *fault)
{
    int64_t c[NPART], k[NPART];
    committed_checked(f, c, k);
    for (int q = 0; q < NPART; q++)
        if (c[q] != end[q] || k[q] != end[q])
            h_stage_fail(p, "%s: %s [%d] committed at %lld, checkpoint at "
                         "%lld; want both at the previous batch's end %lld",
                         fault, IN, q, (long long)c[q], (long long)k[q],
                         (long long)end[q]);
}

/* ---- one fault ---------------------------------------------------------- */

typedef enum { FULL, READONLY, EIO_FSYNC } fault_kind;

static const char *const FAULT_NAME[] = {"disk full", "read-only",
                                         "I/O error on fsync"};
/* What the log and /ready must name, strerror's text. */
static const char *const FAULT_TEXT[] = {"No space left on device",
                                         "Read-only file system",
                                         "Input/output error"};

static void fault_set(fx *f, fault_kind kind, bool on)
{
    switch (kind) {
    case FULL:
        if (on)
            H_CHECK(h_fill_fs(f->filler));
        else if (unlink(f->filler) != 0)
            fail_msg("unlink %s: %s", f->filler, strerror(errno));
        break;
    case READONLY:
        H_CHECK(h_tmpfs_remount(f->ckdir, on, 30000));
        break;
    case EIO_FSYNC:
        if (on)
            H_CHECK(h_write_file(f->trigger, "on\n"));
        else if (unlink(f->trigger) != 0)
            fail_msg("unlink %s: %s", f->trigger, strerror(errno));
        break;
    }
}

/* /ready probed until it answers `want`, failing after FAULT_WAIT_S; with
 * 503, the body must say checkpoints are failing and name `text`.  Every
 * tenth probe, `held` (if not NULL): the offsets must not have moved past
 * it.  Returns the seconds since t0. */
static double wait_ready(fx *f, h_proc *p, unsigned port, int want,
                         const char *text, const int64_t *held,
                         const char *fault, double t0)
{
    char why[1024];
    for (unsigned i = 1;; i++) {
        int st = ready(p, port, why, sizeof(why));
        if (st == want)
            break;
        if (st != 200 && st != 503)
            h_stage_fail(p, "%s: /ready %d '%s'", fault, st, why);
        h_stage_alive(p, fault);
        if (held && i % 10 == 0)
            held_at(f, p, held, fault);
        if (h_now_s() - t0 > FAULT_WAIT_S)
            h_stage_fail(p, "%s: /ready still %d '%s' %d s on", fault, st, why,
                         FAULT_WAIT_S);
        h_sleep_ms(PROBE_MS);
    }
    double dt = h_now_s() - t0;
    if (want == 503 &&
        (strncmp(why, "checkpoints are failing: ", 25) != 0 ||
         !strstr(why, text)))
        h_stage_fail(p, "%s: /ready 503 '%s', want 'checkpoints are "
                     "failing: ...' naming '%s'", fault, why, text);
    if (want == 503)
        print_message("  %s: /ready says: %s\n", fault, why);
    return dt;
}

/* Records [from, to) come in while the fault is on: the failure named in
 * the log and /ready 503; nothing committed or checkpointed past `end`
 * (the input's end before `from`); the fault removed, /ready 200 again,
 * the batch committed, no temp file left. */
static void one_fault(fx *f, h_proc *p, unsigned port, fault_kind kind,
                      size_t from, size_t to)
{
    const char *name = FAULT_NAME[kind];
    int64_t end[NPART], next[NPART];
    h_stream_ends(f->st, from, end);
    h_stream_ends(f->st, to, next);
    size_t failed0 = h_count_said(p, "msg=\"checkpoint failed\"");

    fault_set(f, kind, true);
    double t_on = h_now_s();
    h_stream_produce(f->st, f->h.bs, IN, from, to, NULL);
    double to_503 = wait_ready(f, p, port, 503, FAULT_TEXT[kind], end, name,
                               t_on);
    held_at(f, p, end, name);
    if (h_count_said(p, "msg=\"checkpoint failed\"") <= failed0)
        h_stage_fail(p, "%s: /ready 503 with no 'checkpoint failed' line",
                     name);
    if (!h_said(p, FAULT_TEXT[kind]))
        h_stage_fail(p, "%s: the log does not name '%s'", name,
                     FAULT_TEXT[kind]);

    fault_set(f, kind, false);
    double t_off = h_now_s();
    double to_200 = wait_ready(f, p, port, 200, NULL, NULL, name, t_off);
    wait_committed(f, p, next);
    char tmp[256];
    if (h_ckpt_temp_files(f->ckdir, tmp, sizeof(tmp)))
        h_stage_fail(p, "%s: a temp file left in %s: %s", name, f->ckdir,
                     tmp);
    print_message("  %s: /ready 503 %.1f s after the fault (bound %.1f s); "
                  "200 %.1f s after its removal; %zu 'checkpoint failed' "
                  "lines\n", name, to_503,
                  bs_ready_ckpt_bound_s(INTERVAL_MS), to_200,
                  h_count_said(p, "msg=\"checkpoint failed\"") - failed0);
}

/* ---- kill -9 while the disk is full -------------------------------------- */

/* A snapshot of the partition in ckdir (TOPIC-P.ckpt, or one set aside,
 * TOPIC-P.SEQ.ckps, by a snapshot whose write then failed), its first
 * half copied under the temp file name of TOPIC-P.ckpt: what a kill in
 * the middle of writing that snapshot leaves.  Returns the temp file's
 * path. */
static char *plant_truncated_temp(fx *f, int partition)
{
    char prefix[32], name[256] = "";
    snprintf(prefix, sizeof(prefix), IN "-%d.", partition);
    DIR *d = opendir(f->ckdir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 && len > 5 &&
            (!strcmp(e->d_name + len - 5, ".ckpt") ||
             !strcmp(e->d_name + len - 5, ".ckps")))
            snprintf(name, sizeof(name), "%s", e->d_name);
    }
    if (d)
        closedir(d);
    if (!name[0])
        fail_msg("no snapshot of %s [%d] in %s", IN, partition, f->ckdir);
    char *src = h_strdupf("%s/%s", f->ckdir, name), *bytes = NULL;
    size_t len = 0;
    H_CHECK(h_read_file(src, &bytes, &len));
    if (len < 64)
        fail_msg("%s: %zu bytes, too short to cut", src, len);
    /* The store's temp name: PATH.tmp. and mkostemp's six characters. */
    char *tmp = h_strdupf("%s/%s%s.tmp.k1ll3d", f->ckdir, prefix, "ckpt");
    H_CHECK(h_write_bytes(tmp, bytes, len / 2));
    free(bytes);
    free(src);
    return tmp;
}

/* Records [from, to) come in with the disk full; once the stage has
 * failed a checkpoint (and, mostly, forwarded some of them past its
 * durable checkpoint), kill -9.  The files and commits stay at the batch before;
 * the filler goes and a truncated temp file is left; a restart must load
 * the last good checkpoints and remove the temp file.  Returns the new
 * stage. */
static h_proc *kill_while_full(fx *f, h_proc *p, unsigned *port, size_t from,
                               size_t to)
{
    int64_t end[NPART], out0 = 0, out = 0;
    h_stream_ends(f->st, from, end);
    size_t failed0 = h_count_said(p, "msg=\"checkpoint failed\"");
    H_CHECK(h_topic_total(f->h.bs, OUT, &out0));
    fault_set(f, FULL, true);
    h_stream_produce(f->st, f->h.bs, IN, from, to, NULL);
    /* A failed checkpoint is what the kill must follow.  Output past the
     * last good checkpoint comes too when the stage processed records
     * before its first failed round; when that round came first (a
     * commit still behind from the fault before, the sanitizer build's
     * pace), consumption pauses at once and there is none: said below,
     * not required. */
    double t0 = h_now_s();
    while (h_count_said(p, "msg=\"checkpoint failed\"") <= failed0) {
        h_stage_alive(p, "with the disk full before the kill");
        if (h_now_s() - t0 > FAULT_WAIT_S)
            h_stage_fail(p, "disk full: no failed checkpoint within %d s",
                         FAULT_WAIT_S);
        h_sleep_ms(PROBE_MS);
    }
    for (double t1 = h_now_s(); out <= out0 && h_now_s() - t1 < 5;) {
        h_sleep_ms(PROBE_MS);
        H_CHECK(h_topic_total(f->h.bs, OUT, &out));
    }
    h_stage_kill9(p, "with the disk full");
    held_at(f, NULL, end, "killed with the disk full");
    char left[256], files[2048] = "";
    size_t temps = h_ckpt_temp_files(f->ckdir, left, sizeof(left));
    DIR *d = opendir(f->ckdir);
    struct dirent *e;
    while (d && (e = readdir(d))) /* what the restart finds */
        if (e->d_name[0] != '.' && strlen(files) + strlen(e->d_name) + 2 <
                                       sizeof(files))
            strcat(strcat(files, " "), e->d_name);
    if (d)
        closedir(d);
    print_message("  killed with the disk full: %lld records forwarded past "
                  "the checkpoints, %zu temp file(s) left by the kill; "
                  "files:%s\n", (long long)(out - out0), temps, files);

    fault_set(f, FULL, false);
    char *planted = plant_truncated_temp(f, 1);
    h_proc *q = stage_start(f, port);
    h_wait_holds(q, IN, (1u << NPART) - 1, FAULT_WAIT_S * 1000,
                 "the stage restarted after the kill");
    /* Each partition's first restore in this run: its last good
     * checkpoint (a later one would load what this run wrote since). */
    h_assigned a[64];
    size_t n = h_parse_assigned(q, IN, a, 64);
    unsigned seen = 0;
    for (size_t i = 0; i < n && i < 64; i++) {
        if (a[i].revoked || (seen & (1u << a[i].partition)))
            continue;
        seen |= 1u << a[i].partition;
        if (a[i].ckpt != end[a[i].partition])
            h_stage_fail(q, "%s [%d] restored at %lld after the kill, want "
                         "its last good checkpoint, at %lld", IN,
                         (int)a[i].partition, a[i].ckpt,
                         (long long)end[a[i].partition]);
    }
    h_expect_said(q, "removing an unfinished checkpoint write");
    if (access(planted, F_OK) == 0 || errno != ENOENT)
        h_stage_fail(q, "%s is still there after the restart", planted);
    free(planted);
    return q;
}

/* ---- the test ----------------------------------------------------------- */

static void test_disk_faults(void **state)
{
    fx *f = *state;
    if (ns_error[0])
        fail_msg("%s", ns_error);
    H_CHECK(h_tmpfs_mount(f->ckdir, "4m"));
    f->mounted = true;
    f->st = h_stream_new(N, NPART, 37);
    h_stream_add(f->st, N, 40);
    int64_t end[NPART];

    h_stream_produce(f->st, f->h.bs, IN, 0, BATCH, NULL);
    unsigned port = 0;
    h_proc *p = stage_start(f, &port);
    h_stream_ends(f->st, BATCH, end);
    wait_committed(f, p, end);
    wait_ready(f, p, port, 200, NULL, NULL, "start", h_now_s());

    one_fault(f, p, port, FULL, 1 * BATCH, 2 * BATCH);
    one_fault(f, p, port, READONLY, 2 * BATCH, 3 * BATCH);
    one_fault(f, p, port, EIO_FSYNC, 3 * BATCH, 4 * BATCH);
    p = kill_while_full(f, p, &port, 4 * BATCH, 5 * BATCH);

    h_stream_produce(f->st, f->h.bs, IN, 5 * BATCH, N, NULL);
    h_stream_ends(f->st, N, end);
    wait_committed(f, p, end);
    wait_ready(f, p, port, 200, NULL, NULL, "after the restart", h_now_s());
    h_stage_stop(p);

    const char *const args[] = {"checkpoint", "info", f->ckdir, NULL};
    h_expect_ckpt_info(h_bs_cmd(args, 0), IN, end, NPART);
    size_t n = 0;
    h_read_out_conf(f->st, f->h.bs, OUT, IN, H_READ_COMMITTED, &n);
    unsigned *c = h_count_copies(f->st, IN, N, NULL);
    h_expect_once(f->st, c, IN, OUT, N, "exactly_once, across a full disk, "
                  "a read-only one, I/O errors and kill -9 while full");
    print_message("  %zu output records at read_committed, %zu keys, each "
                  "once\n", n, f->st->nids);
}

int main(void)
{
    h_test_main("test_disk_faults", NULL, "BS_DISK_VERBOSE", NULL);
    /* Before any thread: unshare(2) refuses a threaded process. */
    if (h_private_mounts() != 0)
        snprintf(ns_error, sizeof(ns_error), "%s", h_last_error());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_disk_faults, fx_setup,
                                        h_fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
