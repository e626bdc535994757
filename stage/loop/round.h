/*
 * round.h -- checkpoint rounds (round.c): flush, write, commit; the
 * back-off after a failed round.
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
/* From RUNNING (or a rebalance) to BACKOFF: pause and schedule a retry. */
void bs_backoff_start(bs_stage *s);

#endif
