/*
 * round.h -- checkpoint rounds (round.c): flush, write, commit; the
 * back-off after a failed round, and the rollback to the last committed
 * state.
 */
#ifndef BLOOMSTAGE_ROUND_H
#define BLOOMSTAGE_ROUND_H

#include "core/stage_int.h"

/* One checkpoint round for the partitions in `only` (NULL: all): flush and
 * check deliveries, write each changed partition, commit exactly what was
 * written.  BS_OK, or BS_RETRY if anything failed (nothing is committed for
 * a partition whose checkpoint was not written); FATAL is entered, not
 * returned, when going on is unsafe. */
bs_rc bs_round(bs_stage *s, const rd_kafka_topic_partition_list_t *only,
                    const char *why);
/* A round from the loop: on failure to BACKOFF (paused, retried with
 * exponential backoff), on success back to RUNNING. */
void bs_round_from_loop(bs_stage *s, const char *why);
/* exactly_once.overlap: the outcome of the commit the committer runs, if
 * it is done (or once it is, with wait): a success moves the partitions'
 * committed state and reports the round; a failure is noted as a failed
 * delivery (the next round rolls back both transactions).  false only
 * for a failure; true with nothing running or still running. */
bool bs_round_settle(bs_stage *s, bool wait);
/* From RUNNING (or a rebalance) to BACKOFF: pause and schedule a retry. */
void bs_backoff_start(bs_stage *s);
/* Pauses or resumes every assigned partition (a resume seeks each to where
 * this stage's own state says it is). */
void bs_pause_all(bs_stage *s, bool pause);

/* Every partition back to the last state it committed (invariant 3):
 * with transactions the open one is aborted first.  pending: only the
 * partitions RESTORE_PENDING are restored, and the open transaction and
 * the failures noted for the round are kept (round.c). */
void bs_rollback(bs_stage *s, bool pending);

#endif
