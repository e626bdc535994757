/*
 * overlap.h -- exactly_once.overlap (overlap.c): a loop round's commit
 * handed to the committer while the next transaction takes records, and
 * its outcome taken once known.
 */
#ifndef BLOOMSTAGE_OVERLAP_H
#define BLOOMSTAGE_OVERLAP_H

#include "core/stage_int.h"
#include "loop/outcome.h"

/* Whether this round's commit may run on the committer: a loop round
 * (rounds in a rebalance or the drain commit before they return), the
 * spare producer ready, no commit running. */
bool bs_overlap_may(const bs_stage *s, bool loop_round);
/* Hands the commit of `commit` (the round's transaction, on the current
 * producer; r its report so far) to the committer, makes the spare
 * producer the current one and begins the next transaction on it.  false
 * (nothing handed over) if memory runs out: the round commits itself. */
bool bs_overlap_hand_over(bs_stage *s, rd_kafka_topic_partition_list_t *commit,
                          const bs_round_report *r);
/* The outcome of the commit the committer runs, if it is done (or once it
 * is, with wait): a success moves the partitions' committed state and
 * reports and judges the round; a failure is noted as a failed delivery
 * (the next round rolls back both transactions).  false only for a
 * failure; true with nothing running or still running. */
bool bs_round_settle(bs_stage *s, bool wait);

#endif
