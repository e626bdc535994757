/*
 * state.c -- the stage's states and its partitions' states: names, the
 * legal transitions, and the numbered invariants, checked at every
 * transition in builds with BLOOMSTAGE_CHECKS (the test builds; SQLite's
 * assert_pager_state() is the model).  A state changes nowhere else.
 *
 * An illegal move is logged as an engine bug in every build; with
 * BLOOMSTAGE_CHECKS it, and any invariant that does not hold, aborts.
 *
 * Besides FATAL's reason (bs_stage_fatal), the one other condition every
 * layer may set is here: a failure noted for the next round, which rolls
 * back (bs_delivery_failed, bs_deliveries_unconfirmed; invariants 3, 8).
 *
 * The moves legal_stage and legal_part allow, the diagram and the function
 * that makes each move are in DESIGN.md (States); test_state fails when its
 * lists and these tables differ.  The numbered invariants are DESIGN.md's
 * too (Invariants); bs_stage_check_invariants checks 1, 4, 5, 8 and 9 by
 * those numbers, and bs_stage_check_commit the same before a transaction
 * commits, with 9 as a commit reads it.
 */
#include "core/state.h"
#include "core/stage_int.h"
#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const stage_names[BS_STAGE_NSTATES] = {
    [BS_STAGE_NEW] = "new",
    [BS_STAGE_RUNNING] = "running",
    [BS_STAGE_CHECKPOINTING] = "checkpointing",
    [BS_STAGE_REBALANCING] = "rebalancing",
    [BS_STAGE_BACKOFF] = "backoff",
    [BS_STAGE_DRAINING] = "draining",
    [BS_STAGE_STOPPED] = "stopped",
    [BS_STAGE_FATAL] = "fatal",
};

static const char *const part_names[BS_PART_NSTATES] = {
    [BS_PART_RESTORING] = "restoring",
    [BS_PART_WAITING_FIRST] = "waiting-first-checkpoint",
    [BS_PART_ACTIVE] = "active",
    [BS_PART_RESTORE_PENDING] = "restore-pending",
    [BS_PART_SCHEMA_WAIT] = "schema-wait",
};

#define BIT(st) (1u << (st))

/* legal_stage[from]: the states `from` may change to. */
static const unsigned legal_stage[BS_STAGE_NSTATES] = {
    [BS_STAGE_NEW] = BIT(BS_STAGE_RUNNING) | BIT(BS_STAGE_STOPPED) |
                     BIT(BS_STAGE_FATAL),
    [BS_STAGE_RUNNING] = BIT(BS_STAGE_CHECKPOINTING) |
                         BIT(BS_STAGE_REBALANCING) | BIT(BS_STAGE_DRAINING) |
                         BIT(BS_STAGE_FATAL),
    [BS_STAGE_BACKOFF] = BIT(BS_STAGE_CHECKPOINTING) |
                         BIT(BS_STAGE_REBALANCING) | BIT(BS_STAGE_DRAINING) |
                         BIT(BS_STAGE_FATAL),
    [BS_STAGE_CHECKPOINTING] = BIT(BS_STAGE_RUNNING) | BIT(BS_STAGE_BACKOFF) |
                               BIT(BS_STAGE_REBALANCING) |
                               BIT(BS_STAGE_DRAINING) | BIT(BS_STAGE_FATAL),
    [BS_STAGE_REBALANCING] = BIT(BS_STAGE_RUNNING) | BIT(BS_STAGE_BACKOFF) |
                             BIT(BS_STAGE_DRAINING) |
                             BIT(BS_STAGE_CHECKPOINTING) |
                             BIT(BS_STAGE_FATAL),
    [BS_STAGE_DRAINING] = BIT(BS_STAGE_CHECKPOINTING) |
                          BIT(BS_STAGE_REBALANCING) | BIT(BS_STAGE_STOPPED) |
                          BIT(BS_STAGE_FATAL),
    [BS_STAGE_STOPPED] = 0,
    [BS_STAGE_FATAL] = 0,
};

static const unsigned legal_part[BS_PART_NSTATES] = {
    [BS_PART_RESTORING] = BIT(BS_PART_ACTIVE) | BIT(BS_PART_WAITING_FIRST) |
                          BIT(BS_PART_RESTORE_PENDING),
    [BS_PART_WAITING_FIRST] = BIT(BS_PART_ACTIVE) | BIT(BS_PART_RESTORING) |
                              BIT(BS_PART_RESTORE_PENDING),
    [BS_PART_ACTIVE] = BIT(BS_PART_RESTORING) | BIT(BS_PART_SCHEMA_WAIT),
    [BS_PART_RESTORE_PENDING] = BIT(BS_PART_RESTORING),
    [BS_PART_SCHEMA_WAIT] = BIT(BS_PART_ACTIVE) | BIT(BS_PART_RESTORING),
};

const char *bs_stage_state_name(bs_stage_state st)
{
    return st < BS_STAGE_NSTATES ? stage_names[st] : "?";
}

const char *bs_part_state_name(bs_part_state st)
{
    return st < BS_PART_NSTATES ? part_names[st] : "?";
}

#ifdef BLOOMSTAGE_CHECKS
/* An invariant that does not hold is a bug in the engine: say which and
 * where, and stop before anything more is committed. */
static void violated(const char *what, const char *detail)
{
    bs_log(BS_LOG_ERROR, "engine invariant violated", "invariant=\"%s\" %s",
           what, detail);
    abort();
}
#endif

#ifdef BLOOMSTAGE_CHECKS
/* Every invariant; committing: a transaction is about to commit, which
 * makes every partition's output since the last commit visible. */
static void check(const bs_stage *s, bool committing)
{
    char d[400];
    for (size_t i = 0; i < s->nparts; i++) {
        const part *p = &s->parts[i];
        snprintf(d, sizeof(d), "topic=%s partition=%d state=%s stage=%s "
                 "committed=%lld ckpt=%lld base=%lld next=%lld "
                 "txn_from=%lld", p->topic, (int)p->partition,
                 bs_part_state_name(p->state), bs_stage_state_name(s->state),
                 (long long)p->committed, (long long)p->ckpt_offset,
                 (long long)p->base_offset, (long long)p->next_offset,
                 (long long)p->txn_from);
        if (p->committed >= 0 && p->committed > p->ckpt_offset)
            violated("1: committed <= checkpointed", d);
        if ((p->state == BS_PART_ACTIVE || p->state == BS_PART_SCHEMA_WAIT) &&
            !p->filter)
            violated("4: an active partition has a filter", d);
        if (p->state == BS_PART_ACTIVE && bs_exactly_once(s) &&
            p->ckpt_offset < 0)
            violated("4: exactly_once: an active partition has a checkpoint",
                     d);
        if (s->txn && s->state == BS_STAGE_RUNNING && !s->txn_open &&
            !s->dr_failed)
            violated("8: transactions: records are processed only inside "
                     "an open transaction", d);
        if (p->next_offset >= 0 &&
            ((p->base_offset >= 0 && p->base_offset > p->next_offset) ||
             (p->ckpt_offset >= 0 && p->ckpt_offset > p->next_offset)))
            violated("5: base, checkpoint <= next offset", d);
        if (p->txn_aborted && committing)
            violated("9: transactions: nothing is committed past output "
                     "that was aborted", d);
        if (s->inflight && committing)
            violated("10: the overlap: a transaction is committed only "
                     "after the one before it is settled", d);
        if (p->txn_aborted && p->state == BS_PART_ACTIVE &&
            s->state == BS_STAGE_RUNNING)
            violated("9: transactions: a partition whose output was aborted "
                     "is rolled back before more is processed", d);
    }
}
#endif

void bs_stage_check_invariants(const bs_stage *s)
{
#ifdef BLOOMSTAGE_CHECKS
    check(s, false);
#else
    (void)s;
#endif
}

void bs_stage_check_commit(const bs_stage *s)
{
#ifdef BLOOMSTAGE_CHECKS
    check(s, true);
#else
    (void)s;
#endif
}

/* An illegal move is a bug in the engine.  With BLOOMSTAGE_CHECKS it stops
 * the process (violated); without, it is logged as an error and the move is
 * made, since stopping a production stage would not undo it. */
static void illegal(const char *what, const char *detail)
{
#ifdef BLOOMSTAGE_CHECKS
    violated(what, detail);
#else
    bs_log(BS_LOG_ERROR, "engine bug: illegal state transition",
           "what=\"%s\" %s", what, detail);
#endif
}

bs_stage_state bs_stage_set_state(bs_stage *s, bs_stage_state to)
{
    bs_stage_state from = s->state;
    if (from == to)
        return from;
    if (!(legal_stage[from] & BIT(to))) {
        char d[128];
        snprintf(d, sizeof(d), "from=%s to=%s", bs_stage_state_name(from),
                 bs_stage_state_name(to));
        illegal("stage", d);
    }
    s->state = to;
    atomic_store(&s->pub_state, (int)to);
    bs_log(BS_LOG_DEBUG, "stage state", "from=%s to=%s",
           bs_stage_state_name(from), bs_stage_state_name(to));
    bs_stage_check_invariants(s);
    return from;
}

void bs_part_set_state(bs_stage *s, part *p, bs_part_state to)
{
    if (p->state == to)
        return;
    if (!(legal_part[p->state] & BIT(to))) {
        char d[400];
        snprintf(d, sizeof(d), "topic=%s partition=%d from=%s to=%s",
                 p->topic, (int)p->partition, bs_part_state_name(p->state),
                 bs_part_state_name(to));
        illegal("partition", d);
    }
    p->state = to;
    bs_stage_check_invariants(s);
}

void bs_stage_fatal(bs_stage *s, const char *fmt, ...)
{
    if (s->state == BS_STAGE_FATAL)
        return; /* the first reason is the one that matters */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof(s->err), fmt, ap);
    va_end(ap);
    bs_stage_set_state(s, BS_STAGE_FATAL);
}

static void vnote(bs_stage *s, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
static void vnote(bs_stage *s, const char *fmt, va_list ap)
{
    if (s->dr_failed++ == 0)
        vsnprintf(s->dr_error, sizeof(s->dr_error), fmt, ap);
}

void bs_delivery_failed(bs_stage *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vnote(s, fmt, ap);
    va_end(ap);
    BS_INC(s->ctr.delivery_failures);
}

void bs_deliveries_unconfirmed(bs_stage *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vnote(s, fmt, ap);
    va_end(ap);
}

/* The tables must cover every state (a new state without a row would be
 * unreachable and unleavable). */
_Static_assert(sizeof(stage_names) / sizeof(stage_names[0]) ==
                   BS_STAGE_NSTATES, "a name for every stage state");
_Static_assert(sizeof(part_names) / sizeof(part_names[0]) == BS_PART_NSTATES,
               "a name for every partition state");
_Static_assert(BS_STAGE_NSTATES <= 32 && BS_PART_NSTATES <= 32,
               "transition sets are bit masks");
