/*
 * crash.h -- kill -9 at a chosen moment of a stage's run (test_stage_faults,
 * test_eos), and the stage's own named crash points (BLOOMSTAGE_CRASH_AT,
 * stage/base/crash_point.h: it exits abruptly at a named step of a round;
 * test_kafka_txn).  Checking helpers (they fail the test, core.h).
 */
#ifndef BS_SUPPORT_CRASH_H
#define BS_SUPPORT_CRASH_H

#include "core.h"
#include "proc.h"

#include <librdkafka/rdkafka.h>

#include <stdint.h>

/*
 * A moment, as the conditions to wait for, in this order (each one not set
 * is skipped), every wait bounded by H_KILL_WAIT_MS:
 *   1. out_delta > 0: the output topic grew by out_delta records since the
 *      run started (h_kill_ctx.out0);
 *   2. log: the stage logged this (the first time; with log_next, once more
 *      than it had when the wait began);
 *   3. ckpt_frac > 0: the checkpoint files (dir store) cover this fraction
 *      of the input and moved in this run (or cover all of it already);
 *   4. ms: then this many milliseconds more (h_nap).
 * then SIGKILL (h_stage_kill9; `what` names the moment in messages).
 */
typedef struct h_kill_plan {
    int64_t out_delta;
    const char *log;
    bool log_next;
    double ckpt_frac;
    int ms;
    const char *what;
} h_kill_plan;

/* What the conditions look at; only what the plan uses need be set. */
typedef struct h_kill_ctx {
    rd_kafka_t *q;         /* out_delta: a query client */
    const char *out_topic; /* out_delta: the output topic, its partitions */
    int out_parts;
    int64_t out0;          /* out_delta: the output's size at the start */
    const char *ckdir;     /* ckpt_frac: checkpoint.dir, */
    const char *in_topic;  /* the input topic, its partitions */
    int in_parts;
    int64_t in_total;      /* and the records it holds */
} h_kill_ctx;

/* Waits for the moment k describes in p's run, then kills p with -9. */
void h_kill_at(h_proc *p, const h_kill_plan *k, const h_kill_ctx *ctx);

/* The next offsets of the checkpoint files of partitions 0..nparts-1 of
 * topic in dir (-1 where there is none); a file that is there but not a
 * whole checkpoint fails the test (checkpoints are renamed into place
 * whole). */
void h_ckpt_all(const char *dir, const char *topic, int nparts,
                int64_t *next);
/* Invariant 1 seen from outside: for every partition p < nparts of topic,
 * committed[p] (the group's committed offset, read before this call; -1:
 * none) is at most the next offset of p's newest checkpoint in dir; a
 * commit with no checkpoint file fails too.  Files only move forward, so
 * reading them second hides no violation.  Their offsets into ckpt (may
 * be NULL), as h_ckpt_all gives them. */
void h_expect_durable_commits(const char *dir, const char *topic, int nparts,
                              const int64_t *committed, int64_t *ckpt);
/* How many temp files of a checkpoint write (the store's naming:
 * bs_dirstore_is_temp_name) dir holds now; the first one's name into
 * first (may be NULL; "" if none). */
size_t h_ckpt_temp_files(const char *dir, char *first, size_t first_size);
/* The sum of the entries > 0 of v[0..n). */
int64_t h_sum_positive(const int64_t *v, int n);

/* ---- named crash points --------------------------------------------- */

/* The engine's crash point names, in the order a round passes them
 * (NULL-terminated). */
extern const char *const h_crash_points[];
/* The environment entry that arms point `name` at its pass-th passing, as
 * h_stage_start's env wants it: {"BLOOMSTAGE_CRASH_AT=NAME:PASS", NULL}
 * (static storage, overwritten by the next call). */
char *const *h_crash_env(const char *name, int pass);
/* p must stop at crash point `name` within timeout_ms: exit with the
 * engine's crash status, having logged that point. */
void h_wait_crashed(h_proc *p, const char *name, int timeout_ms);

#endif
