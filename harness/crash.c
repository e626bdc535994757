/*
 * crash.c -- see crash.h.
 */
#include "crash.h"
#include "stage.h"
#include "base/crash_point.h"
#include "store/store_dir.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

void h_ckpt_all(const char *dir, const char *topic, int nparts,
                int64_t *next)
{
    for (int p = 0; p < nparts; p++) {
        int rc = h_ckpt_next(dir, topic, p, &next[p]);
        if (rc < 0)
            h_test_fail("%s", h_last_error());
        if (rc > 0)
            next[p] = -1;
    }
}

void h_expect_durable_commits(const char *dir, const char *topic, int nparts,
                              const int64_t *committed, int64_t *ckpt)
{
    int64_t k[256];
    if (nparts < 1 || nparts > 256)
        h_test_fail("h_expect_durable_commits: %d partitions", nparts);
    h_ckpt_all(dir, topic, nparts, k);
    for (int p = 0; p < nparts; p++) {
        if (committed[p] < 0)
            continue;
        if (k[p] < 0)
            h_test_fail("invariant 1: %s [%d] committed at %lld, but there "
                        "is no checkpoint file", topic, p,
                        (long long)committed[p]);
        if (committed[p] > k[p])
            h_test_fail("invariant 1: %s [%d] committed at %lld, past its "
                        "checkpoint at %lld", topic, p,
                        (long long)committed[p], (long long)k[p]);
    }
    if (ckpt)
        memcpy(ckpt, k, (size_t)nparts * sizeof(*k));
}

size_t h_ckpt_temp_files(const char *dir, char *first, size_t first_size)
{
    size_t n = 0;
    if (first && first_size)
        first[0] = '\0';
    DIR *d = opendir(dir);
    if (!d)
        h_test_fail("%s: %s", dir, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!bs_dirstore_is_temp_name(e->d_name))
            continue;
        if (n++ == 0 && first)
            snprintf(first, first_size, "%s", e->d_name);
    }
    closedir(d);
    return n;
}

int64_t h_sum_positive(const int64_t *v, int n)
{
    int64_t s = 0;
    for (int p = 0; p < n; p++)
        s += v[p] > 0 ? v[p] : 0;
    return s;
}

/* Until the checkpoint files cover k->ckpt_frac of the input, having moved
 * since the wait began. */
static void wait_ckpt(h_proc *p, const h_kill_plan *k, const h_kill_ctx *c)
{
    int64_t start[256], now[256];
    if (c->in_parts < 1 || c->in_parts > 256)
        h_test_fail("h_kill_at: %d partitions", c->in_parts);
    double t0 = h_now_s();
    unsigned polls = 0;
    h_ckpt_all(c->ckdir, c->in_topic, c->in_parts, start);
    int64_t s0 = h_sum_positive(start, c->in_parts);
    for (;;) {
        h_ckpt_all(c->ckdir, c->in_topic, c->in_parts, now);
        int64_t s = h_sum_positive(now, c->in_parts);
        if (s > s0 && s >= (int64_t)(k->ckpt_frac * (double)c->in_total))
            return;
        if (s == c->in_total && s0 == c->in_total)
            return; /* nothing left to do: kill it anyway */
        if ((h_now_s() - t0) * 1000 > H_KILL_WAIT_MS)
            h_stage_fail(p, "no checkpoint past %.0f%% of the input within "
                         "%d s", k->ckpt_frac * 100, H_KILL_WAIT_MS / 1000);
        if (++polls % 256 == 0)
            h_stage_alive(p, "while waiting for a checkpoint");
        usleep(500);
    }
}

void h_kill_at(h_proc *p, const h_kill_plan *k, const h_kill_ctx *ctx)
{
    if (k->out_delta > 0) {
        h_proc *const procs[] = {p, NULL};
        h_wait_out(ctx->q, ctx->out_topic, ctx->out_parts, procs,
                   ctx->out0 + k->out_delta, H_KILL_WAIT_MS);
    }
    if (k->log)
        h_wait_said(p, k->log, k->log_next ? h_count_said(p, k->log) + 1 : 1,
                    H_KILL_WAIT_MS);
    if (k->ckpt_frac > 0)
        wait_ckpt(p, k, ctx);
    if (k->ms)
        h_nap(k->ms);
    h_stage_kill9(p, k->what);
}

const char *const h_crash_points[] = {BS_CRASH_POINTS(BS_CRASH_POINT_NAME_)
                                          NULL};

char *const *h_crash_env(const char *name, int pass)
{
    static char entry[128];
    static char *env[2];
    snprintf(entry, sizeof(entry), "BLOOMSTAGE_CRASH_AT=%s:%d", name, pass);
    env[0] = entry;
    env[1] = NULL;
    return env;
}

void h_wait_crashed(h_proc *p, const char *name, int timeout_ms)
{
    int status = 0;
    double t0 = h_now_s();
    /* h_nap's steps: the layer's idle hook (a feeder) keeps running. */
    while (h_process_wait(p, 0, &status) != 0) {
        if ((h_now_s() - t0) * 1000 > timeout_ms)
            h_stage_fail(p, "the stage did not stop at crash point %s "
                         "within %d s", name, timeout_ms / 1000);
        h_nap(20);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != BS_CRASH_EXIT)
        h_stage_fail(p, "the stage ended by %s, not at crash point %s (exit "
                     "%d)", h_status_str(status), name, BS_CRASH_EXIT);
    char said[160];
    snprintf(said, sizeof(said), "msg=\"crash point\" point=%s ", name);
    if (!h_said(p, said))
        h_stage_fail(p, "the stage exited %d without logging '%s'",
                     BS_CRASH_EXIT, said);
}
