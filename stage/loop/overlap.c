/*
 * overlap.c -- exactly_once.overlap: a loop round hands its transaction's
 * commit to the committer's thread (clients/committer.c), makes the spare
 * producer current and begins the next transaction on it, so records go
 * on while the commit runs; its outcome is taken later (bs_round_settle),
 * and only then does the round count as committed, reported and judged.
 * One commit at most runs: every round, rollback and rebalance settles
 * first.
 */
#include "loop/overlap.h"
#include "core/stage_int.h"
#include "base/log.h"
#include "clients/clients.h"
#include "clients/committer.h"
#include "clients/txn.h"
#include "core/partitions.h"
#include "core/state.h"
#include "loop/outcome.h"

#include <stdlib.h>

/* A round whose transaction the committer commits while the next one
 * takes records on the other producer, and what is done once its outcome
 * is known (bs_round_settle). */
struct bs_inflight {
    rd_kafka_topic_partition_list_t *commit; /* lent to the committer */
    int64_t *txn_from; /* per s->parts[i]: its next_offset at the hand-off */
    size_t nparts;
    bs_round_report report;
};

static void inflight_free(struct bs_inflight *f)
{
    if (!f)
        return;
    if (f->commit)
        rd_kafka_topic_partition_list_destroy(f->commit);
    free(f->txn_from);
    free(f);
}

bool bs_overlap_may(const bs_stage *s, bool loop_round)
{
    return loop_round && s->txn && s->committer && !s->inflight &&
           s->spare.rk && s->spare.txn_ready && !s->spare.broken &&
           !rd_kafka_fatal_error(s->spare.rk, NULL, 0);
}

/* The partitions' committed state moves when the outcome is taken. */
bool bs_overlap_hand_over(bs_stage *s, rd_kafka_topic_partition_list_t *commit,
                          const bs_round_report *r)
{
    struct bs_inflight *f = calloc(1, sizeof(*f));
    if (f) {
        f->commit = rd_kafka_topic_partition_list_copy(commit);
        f->txn_from = calloc(s->nparts ? s->nparts : 1, sizeof(int64_t));
    }
    if (!f || !f->commit || !f->txn_from) {
        inflight_free(f);
        return false;
    }
    bs_stage_check_commit(s);
    f->nparts = s->nparts;
    for (size_t i = 0; i < s->nparts; i++)
        f->txn_from[i] = s->parts[i].next_offset;
    f->report = *r;
    f->report.overlapped = true;
    bs_committer_start(s->committer, s->producer, f->commit,
                       rd_kafka_consumer_group_metadata(s->consumer));
    s->inflight = f;
    s->txn_open = false; /* the transaction is the committer's now */
    bs_producers_swap(s);
    (void)bs_txn_begin(s); /* a failure: the next round rolls back */
    return true;
}

bool bs_round_settle(bs_stage *s, bool wait)
{
    struct bs_inflight *f = s->inflight;
    bs_commit_outcome o;
    if (!f || !bs_committer_take(s->committer, wait, &o))
        return true;
    s->inflight = NULL;
    if (o.rc != BS_OK) {
        /* Both transactions end: this one is not committed, and the
         * current one holds records processed after it.  The rollback
         * the failure calls for replaces both producers. */
        s->spare.broken = true;
        BS_INC(s->ctr.checkpoint_failures);
        char q[BS_ERRSTR_SIZE + 100];
        bs_log(BS_LOG_WARN, "transaction not committed; the next one, which "
               "holds records processed after it, is aborted with it",
               "records_after=%llu error=%s",
               (unsigned long long)s->since_ckpt,
               bs_log_quote(o.err, q, sizeof(q)));
        bs_deliveries_unconfirmed(s, "transaction not committed: %s",
                                  o.err);
        bs_verdict_failed(s, f->report.t0, o.err);
        inflight_free(f);
        return false;
    }
    s->spare.txn_open = false;
    bs_round_committed(s, f->commit);
    for (size_t i = 0; i < f->nparts && i < s->nparts; i++)
        s->parts[i].txn_from = f->txn_from[i];
    f->report.phase[BS_PHASE_SEND_OFFSETS] += o.send_s;
    f->report.phase[BS_PHASE_COMMIT] += o.commit_s;
    bs_round_report_log(s, &f->report);
    bs_verdict_good(s);
    inflight_free(f);
    return true;
}
