/*
 * rollback.h -- back to the last committed state (rollback.c), and the
 * pause and resume of consumption around a failed round.
 */
#ifndef BLOOMSTAGE_ROLLBACK_H
#define BLOOMSTAGE_ROLLBACK_H

#include "core/stage_int.h"

/* Every partition back to the last state it committed (invariant 3):
 * with transactions the open one is aborted first.  pending: only the
 * partitions RESTORE_PENDING are restored, and the open transaction and
 * the failures noted for the round are kept. */
void bs_rollback(bs_stage *s, bool pending);
/* Whether a partition waits for a restore that could not read its tail
 * (the next round retries it first: bs_rollback with pending). */
bool bs_restore_pending(const bs_stage *s);
/* Pauses or resumes every assigned partition (a resume seeks each to where
 * this stage's own state says it is). */
void bs_pause_all(bs_stage *s, bool pause);

#endif
