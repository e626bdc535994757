/*
 * crash_point.h -- the names of the points of a checkpoint round where
 * BLOOMSTAGE_CRASH_AT=NAME[:N] makes the stage exit abruptly (test-only,
 * crash_point.c), the exit status it then has, and bs_crash_point, which
 * the engine calls at each point.  The names and the status are macros, so
 * the test support layer (harness/crash.h) shares the one list
 * without linking the engine.  Owned by the engine; tests only read it.
 *
 * In the order a round passes them (after-send-offsets with transactions
 * only; after-commit is after the transaction's commit, or the consumer's):
 */
#ifndef BLOOMSTAGE_CRASH_POINT_H
#define BLOOMSTAGE_CRASH_POINT_H

#include <stdbool.h>

#define BS_CRASH_POINTS(X)                                                   \
    X(AFTER_FLUSH, "after-flush")                                            \
    X(AFTER_CKPT_WRITE, "after-checkpoint-write")                            \
    X(AFTER_STORE_SYNC, "after-store-sync")                                  \
    X(AFTER_SEND_OFFSETS, "after-send-offsets")                              \
    X(AFTER_COMMIT, "after-commit")                                          \
    X(AFTER_STORE_COMMITTED, "after-store-committed")

#define BS_CRASH_POINT_NAME_(id, name) name,
#define BS_CRASH_POINT_DEFINE_(id, name) static const char *const BS_CRASH_##id = name;
BS_CRASH_POINTS(BS_CRASH_POINT_DEFINE_)

/* Fail points (BLOOMSTAGE_FAIL_AT=NAME[:N]): commit, the transaction's
 * commit_transaction refused 0.3 s later instead of made (its transaction
 * left open, as a commit that timed out leaves it). */
#define BS_FAIL_POINTS(X) X(COMMIT, "commit")
#define BS_FAIL_POINT_DEFINE_(id, name) static const char *const BS_FAIL_##id = name;
BS_FAIL_POINTS(BS_FAIL_POINT_DEFINE_)

/* The exit status of a stage that stopped at a crash point. */
#define BS_CRASH_EXIT 86

/* A round passing point `name` (round.c, outcome.c, txn.c): exits there when
 * BLOOMSTAGE_CRASH_AT arms it, else returns. */
void bs_crash_point(const char *name);
/* Whether point `name`'s pass is the one BLOOMSTAGE_FAIL_AT arms: then
 * the caller fails its step (test-only). */
bool bs_fail_point(const char *name);

#endif
