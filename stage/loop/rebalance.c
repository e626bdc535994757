/*
 * rebalance.c -- the consumer's rebalance callback (REBALANCING).
 *
 * Assign: every new partition is restored from its checkpoint before any of
 * its records is processed (invariant 4), and consumption starts exactly
 * where that checkpoint ends.  Revoke: a checkpoint round for the revoked
 * partitions first, so their next owner starts from this state; a lost
 * assignment commits nothing.  librdkafka calls this from
 * rd_kafka_consumer_poll and rd_kafka_consumer_close, on the stage thread.
 *
 * Once a stop is requested (or FATAL entered) an assignment is declined:
 * librdkafka is answered, so the group's protocol goes on, but nothing is
 * taken or restored; the close that follows gives the partitions up, and
 * their next owner restores them.  The close may call back after the
 * group handle is gone: the protocol is then the one of the last
 * rebalance.
 */
#include "loop/rebalance.h"
#include "core/stage_int.h"
#include "base/log.h"
#include "core/state.h"
#include "core/partitions.h"
#include "loop/round.h"
#include "loop/overlap.h"
#include "loop/rollback.h"
#include "path/record_path.h"
#include "ops/publish.h"

#include <stdlib.h>
#include <string.h>

/* Transactions: whether a partition in `parts` has output in the open
 * transaction (its revoke's round did not commit). */
static bool revoked_in_txn(bs_stage *s,
                           const rd_kafka_topic_partition_list_t *parts)
{
    for (int i = 0; s->txn && i < parts->cnt; i++) {
        const part *p = bs_part_find(s, parts->elems[i].topic,
                                     parts->elems[i].partition);
        if (p && bs_part_in_txn(p))
            return true;
    }
    return false;
}

/* Restores the assigned partitions.  false (FATAL entered, none of them
 * taken) if a checkpoint cannot be used.  An output tail that cannot be
 * read now (a broker away) leaves its partitions RESTORE_PENDING: they
 * are taken paused, and the next round retries (round.c). */
static bool on_assign(bs_stage *s, rd_kafka_topic_partition_list_t *parts)
{
    for (int i = 0; i < parts->cnt; i++) {
        rd_kafka_topic_partition_t *tp = &parts->elems[i];
        if (!bs_part_find(s, tp->topic, tp->partition) &&
            !bs_part_add(s, tp->topic, tp->partition)) {
            bs_stage_fatal(s, "out of memory");
            return false;
        }
    }
    /* Pointers only now: bs_part_add may move the array. */
    part **chosen = calloc((size_t)parts->cnt + 1, sizeof(*chosen));
    if (!chosen) {
        bs_stage_fatal(s, "out of memory");
        return false;
    }
    for (int i = 0; i < parts->cnt; i++)
        chosen[i] = bs_part_find(s, parts->elems[i].topic,
                                 parts->elems[i].partition);
    char err[BS_ERRSTR_SIZE];
    bs_rc r = bs_parts_restore(s, chosen, (size_t)parts->cnt, err,
                               sizeof(err));
    if (r == BS_RETRY) {
        char q[1100];
        bs_log(BS_LOG_WARN, "restore incomplete, will retry", "error=%s",
               bs_log_quote(err, q, sizeof(q)));
    } else if (r != BS_OK) {
        free(chosen);
        /* None of them is taken: no half-restored state stays behind. */
        for (int i = 0; i < parts->cnt; i++)
            bs_part_remove(s, parts->elems[i].topic,
                           parts->elems[i].partition);
        bs_stage_fatal(s, "cannot restore the assigned partitions: %s", err);
        bs_publish(s);
        return false;
    }
    for (int i = 0; i < parts->cnt; i++) {
        rd_kafka_topic_partition_t *tp = &parts->elems[i];
        part *p = chosen[i];
        /* Resume exactly where the checkpoint ends (the committed offset
         * may lag it, never lead it: invariant 1). */
        if (p->ckpt_offset >= 0)
            tp->offset = p->ckpt_offset;
        bs_part_log_restored(p, "partition assigned");
    }
    free(chosen);
    bs_publish(s);
    return true;
}

/* Answers librdkafka's rebalance by the group's protocol: parts taken
 * (take) or given up; a failed answer is logged. */
static void answer(rd_kafka_t *rk, bool cooperative, bool take,
                   rd_kafka_topic_partition_list_t *parts)
{
    if (cooperative) {
        rd_kafka_error_t *e = take ? rd_kafka_incremental_assign(rk, parts)
                                   : rd_kafka_incremental_unassign(rk, parts);
        if (e) {
            char eq[512];
            bs_log(BS_LOG_ERROR, "assignment failed", "error=%s",
                   bs_log_quote(rd_kafka_error_string(e), eq, sizeof(eq)));
            rd_kafka_error_destroy(e);
        }
        return;
    }
    rd_kafka_resp_err_t aerr = rd_kafka_assign(rk, take ? parts : NULL);
    if (aerr)
        bs_log(BS_LOG_ERROR, "assignment failed", "error=%s",
               rd_kafka_err2name(aerr));
}

/* An assignment this stage does not take (a stop is requested, FATAL, or
 * its restore failed): answered, so librdkafka's rebalance goes on (it
 * waits for the call; in a close it makes it an unassign), with the
 * partitions paused, none of them added or restored. */
static void decline(rd_kafka_t *rk, bool cooperative,
                    rd_kafka_topic_partition_list_t *parts, const char *why)
{
    bs_log(BS_LOG_INFO, "assignment declined", "partitions=%d reason=\"%s\"",
           parts->cnt, why);
    answer(rk, cooperative, true, parts);
    rd_kafka_pause_partitions(rk, parts);
}

/* Assigns, then sets each new partition's pause flag to what this stage
 * wants (librdkafka keeps it across revocation and re-assignment).  Returns
 * whether a partition waits for its first checkpoint or its restore. */
static bool assign(bs_stage *s, rd_kafka_t *rk, bool cooperative,
                   bool paused, rd_kafka_topic_partition_list_t *parts)
{
    answer(rk, cooperative, true, parts);
    rd_kafka_topic_partition_list_t *hold =
        rd_kafka_topic_partition_list_new(parts->cnt);
    bool waiting = false;
    for (int i = 0; i < parts->cnt; i++) {
        part *p = bs_part_find(s, parts->elems[i].topic,
                               parts->elems[i].partition);
        bool first = p && (p->state == BS_PART_WAITING_FIRST ||
                           p->state == BS_PART_RESTORE_PENDING);
        if (paused || first)
            rd_kafka_topic_partition_list_add(hold, parts->elems[i].topic,
                                              parts->elems[i].partition);
        waiting |= first;
    }
    rd_kafka_resume_partitions(rk, parts);
    if (hold->cnt > 0)
        rd_kafka_pause_partitions(rk, hold);
    rd_kafka_topic_partition_list_destroy(hold);
    return waiting;
}

static void unassign(bs_stage *s, rd_kafka_t *rk, bool cooperative,
                     rd_kafka_topic_partition_list_t *parts)
{
    for (int i = 0; i < parts->cnt; i++) {
        bs_part_remove(s, parts->elems[i].topic, parts->elems[i].partition);
        bs_log(BS_LOG_INFO, "partition revoked", "topic=%s partition=%d",
               parts->elems[i].topic, (int)parts->elems[i].partition);
    }
    bs_publish(s);
    /* Not paused when they come back (see assign). */
    rd_kafka_resume_partitions(rk, parts);
    answer(rk, cooperative, false, parts);
}

/* Whether the group's rebalance protocol is COOPERATIVE.  librdkafka says
 * NULL once the consumer's group handle is gone (a close that calls back
 * after it) and NONE while no assignor is chosen: then the last known
 * answer stands (the protocol does not change while the consumer lives). */
static bool cooperative_protocol(bs_stage *s, rd_kafka_t *rk)
{
    const char *proto = rd_kafka_rebalance_protocol(rk);
    if (proto && strcmp(proto, "NONE") != 0)
        s->rebalance_cooperative = !strcmp(proto, "COOPERATIVE");
    return s->rebalance_cooperative;
}

void bs_rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                     rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    bs_stage *s = opaque;
    s->rebalanced = true;
    /* The held record belongs to the assignment before this one. */
    bs_record_release(s);
    bool cooperative = cooperative_protocol(s, rk);
    if (s->state == BS_STAGE_FATAL) {
        /* Nothing more is taken or committed (invariant 7): an assignment
         * is declined, a revocation gives the partitions up. */
        if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS)
            unassign(s, rk, cooperative, parts);
        else if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS)
            decline(rk, cooperative, parts, "fatal");
        return;
    }
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS &&
        (atomic_load(&s->stop) || s->state == BS_STAGE_DRAINING)) {
        /* Restoring what the drain gives up at once would only delay it
         * (and hold its final rounds back: a partition waiting for its
         * restore fails every round). */
        decline(rk, cooperative, parts, "stopping");
        return;
    }
    /* The commit still running belongs to the assignment before this
     * one (a failure: the revoke's round, or the next, rolls back). */
    (void)bs_round_settle(s, true);
    bs_stage_state prev = bs_stage_set_state(s, BS_STAGE_REBALANCING);
    bs_stage_state next = prev;
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        if (!on_assign(s, parts)) {
            /* Take nothing: no record of a partition whose state is
             * unusable may be processed.  FATAL is entered, which ends the
             * loop. */
            decline(rk, cooperative, parts, "fatal");
            return;
        }
        if (assign(s, rk, cooperative, prev == BS_STAGE_BACKOFF, parts) &&
            prev == BS_STAGE_RUNNING) {
            /* Their first checkpoint, or their restore, is retried as
             * any failed round is. */
            next = BS_STAGE_BACKOFF;
            s->backoff = 0;
            bs_backoff_start(s);
            bs_pause_all(s, true);
        }
    } else if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS) {
        bool lost = rd_kafka_assignment_lost(rk);
        if (lost)
            bs_log(BS_LOG_WARN, "assignment lost, committing nothing",
                   "partitions=%d", parts->cnt);
        else
            /* (with transactions a round for every partition) */
            (void)bs_round(s, parts, "revoke"); /* failures logged */
        /* A round that did not commit (a restore still pending, the
         * output's watermarks not read) leaves their output in the open
         * transaction: committed later, it would double what their next
         * owner produces from their committed offsets. */
        bool held = !lost && revoked_in_txn(s, parts);
        unassign(s, rk, cooperative, parts);
        if ((lost || held) && s->txn && s->state != BS_STAGE_FATAL) {
            /* The open transaction holds records of partitions that are
             * someone else's now: it is aborted, and any partitions left
             * go back to their committed state. */
            if (lost)
                bs_log(BS_LOG_WARN, "fenced: the group gave this "
                       "instance's partitions to another (its session "
                       "timed out); aborting the open transaction",
                       "partitions=%d", parts->cnt);
            else
                bs_log(BS_LOG_WARN, "revoked partitions' output is in the "
                       "open transaction, not committed; aborting it",
                       "partitions=%d", parts->cnt);
            bs_deliveries_unconfirmed(s, lost ? "assignment lost"
                                              : "revoked uncommitted");
            bs_rollback(s, false);
        }
    } else {
        bs_log(BS_LOG_ERROR, "rebalance failed", "error=%s",
               rd_kafka_err2name(err));
        rd_kafka_resp_err_t aerr = rd_kafka_assign(rk, NULL);
        if (aerr)
            bs_log(BS_LOG_ERROR, "assignment failed", "error=%s",
                   rd_kafka_err2name(aerr));
    }
    if (s->state != BS_STAGE_FATAL)
        bs_stage_set_state(s, next);
}
