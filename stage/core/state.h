/*
 * state.h -- the stage's and its partitions' state changes (state.c), the
 * only ways a state changes, with the transitions and invariants checked;
 * the failure noted for the next round.
 */
#ifndef BLOOMSTAGE_STATE_H
#define BLOOMSTAGE_STATE_H

#include "core/stage_int.h"

const char *bs_stage_state_name(bs_stage_state st);
const char *bs_part_state_name(bs_part_state st);
/* The only ways a state changes: the transition must be legal (checked in
 * builds with BLOOMSTAGE_CHECKS), and the invariants hold after it.
 * Returns the state left. */
bs_stage_state bs_stage_set_state(bs_stage *s, bs_stage_state to);
void bs_part_set_state(bs_stage *s, part *p, bs_part_state to);
/* To FATAL with the reason (the first reason is kept). */
void bs_stage_fatal(bs_stage *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Checks every invariant (state.c lists them); a no-op without
 * BLOOMSTAGE_CHECKS. */
void bs_stage_check_invariants(const bs_stage *s);
/* Transactions, before a commit: every invariant, and 9 as a commit
 * reads it, that no partition's output since its last commit was aborted
 * without the partition rolled back (the commit would pass records whose
 * output is gone).  A no-op without BLOOMSTAGE_CHECKS. */
void bs_stage_check_commit(const bs_stage *s);
/* The round since the last checkpoint cannot be trusted: the next one
 * rolls back (rollback.c).  The first reason's text is kept for the log.
 * bs_delivery_failed also counts a failed delivery (a report with an error,
 * a record that could not be queued); bs_deliveries_unconfirmed does not
 * (a flush cut short, a producer that failed fatally). */
void bs_delivery_failed(bs_stage *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void bs_deliveries_unconfirmed(bs_stage *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
