/*
 * round.c -- checkpoint, then commit: one round flushes the producer and
 * checks every delivery, writes each changed partition's checkpoint to the
 * store, makes the round durable, and commits exactly the offsets written
 * (invariants 1 and 2, state.c).  A failed delivery rolls back instead
 * (invariant 3, rollback.c), and with transactions so does a checkpoint
 * not written; a failed round pauses consumption and is retried with
 * backoff (BACKOFF), never losing what is in memory or in Kafka.  A loop
 * round's transaction may commit on the committer while the next one
 * takes records (overlap.c); what a round's end does is outcome.c's.
 *
 * Everything here runs on the stage thread, in CHECKPOINTING (or inside a
 * rollback, which is part of a round).
 */
#include "loop/round.h"
#include "core/stage_int.h"
#include "base/crash_point.h"
#include "kafka/kafka_util.h"
#include "base/log.h"
#include "base/util.h"
#include "core/state.h"
#include "core/startup.h"
#include "clients/clients.h"
#include "core/partitions.h"
#include "core/poison.h"
#include "clients/txn.h"
#include "loop/outcome.h"
#include "loop/overlap.h"
#include "loop/rollback.h"
#include "ops/publish.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bool in_list(const rd_kafka_topic_partition_list_t *l, const part *p)
{
    if (!l)
        return true;
    for (int i = 0; i < l->cnt; i++)
        if (l->elems[i].partition == p->partition &&
            !strcmp(l->elems[i].topic, p->topic))
            return true;
    return false;
}

/* Waits for every produced record's delivery report.  false if the wait
 * was cut short by a fatal error; librdkafka itself fails undeliverable
 * records after message.timeout.ms. */
static bool flush_producer(bs_stage *s)
{
    double t0 = bs_now();
    for (;;) {
        rd_kafka_resp_err_t err = rd_kafka_flush(s->producer,
                                                 BS_FLUSH_STEP_MS);
        if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
            return true;
        if (s->state == BS_STAGE_FATAL)
            return false;
        if (bs_now() - t0 >= 5.0)
            bs_log(BS_LOG_INFO, "waiting for deliveries", "in_flight=%d",
                   rd_kafka_outq_len(s->producer));
    }
}

/* exactly_once: the output's end, now that everything is delivered: a
 * replay from this round's checkpoints starts there.  NULL (logged and
 * counted) if it cannot be read. */
static bs_ckpt_wm *output_watermarks(bs_stage *s)
{
    char err[BS_ERRSTR_SIZE];
    bs_ckpt_wm *wm = calloc((size_t)s->out_parts, sizeof(*wm));
    if (!wm)
        snprintf(err, sizeof(err), "out of memory");
    if (!wm || bs_output_watermarks(s->producer, s->set.output_topic,
                                    s->out_parts, wm, BS_TIMEOUT_BROKER_MS,
                                    err, sizeof(err)) != 0) {
        bs_round_note_failure(s, NULL, -1, err);
        BS_INC(s->ctr.checkpoint_failures);
        free(wm);
        return NULL;
    }
    return wm;
}

/* Commits the offsets in `commit`; an entry that failed is logged (and
 * keeps its error: committed() passes it over).  A failed commit is safe
 * (the checkpoints are durable and ahead of the committed offsets) and
 * made again by the next round. */
static bool commit_offsets(bs_stage *s, rd_kafka_topic_partition_list_t *commit)
{
    rd_kafka_resp_err_t cerr = rd_kafka_commit(s->consumer, commit, 0);
    bs_round_lap(s, BS_PHASE_COMMIT);
    if (cerr) {
        bs_log(BS_LOG_WARN, "commit failed", "error=%s partitions=%d",
               rd_kafka_err2name(cerr), commit->cnt);
        bs_round_note(s, "commit failed: %s", rd_kafka_err2str(cerr));
        return false;
    }
    for (int i = 0; i < commit->cnt; i++) {
        const rd_kafka_topic_partition_t *e = &commit->elems[i];
        if (e->err) {
            bs_log(BS_LOG_WARN, "commit failed", "topic=%s partition=%d "
                   "error=%s", e->topic, (int)e->partition,
                   rd_kafka_err2name(e->err));
            bs_round_note(s, "commit of %s [%d] failed: %s", e->topic,
                      (int)e->partition, rd_kafka_err2str(e->err));
        }
    }
    return true;
}

/* Transactions: sends the offsets and commits the transaction that holds
 * the round's output.  false: not committed; rolled back (everything since
 * the last committed state is processed again). */
static bool commit_txn(bs_stage *s, rd_kafka_topic_partition_list_t *commit)
{
    char err[BS_ERRSTR_SIZE];
    bs_stage_check_commit(s);
    if (bs_txn_commit(s, commit, err, sizeof(err)) != BS_OK) {
        bs_round_note_failure(s, NULL, -1, err);
        BS_INC(s->ctr.checkpoint_failures);
        bs_deliveries_unconfirmed(s, "transaction not committed: %s", err);
        bs_rollback(s, false);
        return false;
    }
    bs_parts_txn_committed(s);
    (void)bs_txn_begin(s); /* a failure: the next round rolls back */
    return true;
}

/* The output watermarks a partition's checkpoint records: the round's,
 * unless the partition still has skip entries from its last replay that
 * consumption has not reached.  Then its own, the ones that replay read
 * from: the records those entries stand for are in the output before the
 * round's watermarks, and a restore from this checkpoint must find them
 * again (a windowed filter holds their keys only once consumption reaches
 * them: test_window's kill -9 test produced a record twice when a kill
 * came right after such a checkpoint). */
static const bs_ckpt_wm *ckpt_wm(const part *p, const bs_ckpt_wm *wm)
{
    return wm && p->skip_i < p->nskip && p->wm ? p->wm : wm;
}

/* exactly_once partitions still without a first checkpoint get one
 * (those in `only`); true while some still has none. */
static bool first_checkpoints(bs_stage *s,
                              const rd_kafka_topic_partition_list_t *only)
{
    bool waiting = false;
    char err[BS_ERRSTR_SIZE];
    for (size_t i = 0; i < s->nparts; i++) {
        part *p = &s->parts[i];
        if (p->state != BS_PART_WAITING_FIRST || !in_list(only, p))
            continue;
        if (bs_part_initial_checkpoint(s, p, err, sizeof(err)) == BS_OK) {
            bs_part_set_state(s, p, BS_PART_ACTIVE);
        } else {
            bs_round_note_failure(s, p->topic, p->partition, err);
            BS_INC(s->ctr.checkpoint_failures);
            waiting = true;
            /* Transactions: as any checkpoint not written (below), it
             * rolls back, which aborts the transaction its records may
             * have left needing an abort (every later record refused). */
            if (s->txn)
                bs_deliveries_unconfirmed(s, "first checkpoint not written: "
                                          "%s", err);
        }
    }
    return waiting;
}

/* What a round wrote: written[i] for s->parts[i], their count, and the
 * bytes the store wrote (deltas or snapshots). */
typedef struct round_writes {
    bool *written;
    size_t n;
    uint64_t bytes;
} round_writes;

/* Each changed partition in `only` written to the store with the round's
 * output watermarks wm[0..nwm), then the store made durable (the
 * directory's fsync, the Kafka store's manifests): nothing of this round
 * is committed if that fails (w->n is then 0).  BS_RETRY when anything
 * failed, with err saying what. */
static bs_rc write_checkpoints(bs_stage *s,
                               const rd_kafka_topic_partition_list_t *only,
                               const bs_ckpt_wm *wm, uint32_t nwm,
                               round_writes *w, char *err, size_t err_size)
{
    bs_rc rc = BS_OK;
    for (size_t i = 0; w->written && i < s->nparts; i++) {
        part *p = &s->parts[i];
        if (!in_list(only, p) || p->next_offset < 0 ||
            p->next_offset == p->ckpt_offset)
            continue;
        if (ckpt_wm(p, wm) != wm)
            bs_log(BS_LOG_DEBUG, "checkpoint keeps the replay's watermarks",
                   "topic=%s partition=%d skip_entries_left=%zu", p->topic,
                   (int)p->partition, p->nskip - p->skip_i);
        if (bs_store_put(s->store, p->topic, p->partition, p->next_offset,
                         ckpt_wm(p, wm), ckpt_wm(p, wm) == wm ? nwm : p->nwm,
                         p->filter, p->audit, err, err_size) != 0) {
            bs_round_note_failure(s, p->topic, p->partition, err);
            BS_INC(s->ctr.checkpoint_failures);
            rc = BS_RETRY;
            continue;
        }
        w->written[i] = true;
        w->n++;
        w->bytes += bs_store_last_bytes(s->store, NULL);
    }
    bs_round_lap(s, BS_PHASE_WRITE);
    if (w->n)
        bs_crash_point(BS_CRASH_AFTER_CKPT_WRITE);
    bool synced = w->written && bs_ckpt_sync(s, err, err_size) == 0;
    bs_round_lap(s, BS_PHASE_SYNC);
    if (!synced) {
        if (!w->written)
            snprintf(err, err_size, "out of memory");
        bs_round_note_failure(s, NULL, -1, err);
        BS_INC(s->ctr.checkpoint_failures);
        rc = BS_RETRY;
        w->n = 0;
    }
    if (w->n)
        bs_crash_point(BS_CRASH_AFTER_STORE_SYNC);
    return rc;
}

/* The offsets to commit: every partition written (its checkpoint and
 * watermarks now the newest), and without transactions each one in
 * `only` whose durable checkpoint an earlier commit failed to cover. */
static rd_kafka_topic_partition_list_t *
commit_list(bs_stage *s, const rd_kafka_topic_partition_list_t *only,
            const round_writes *w, const bs_ckpt_wm *wm, uint32_t nwm)
{
    rd_kafka_topic_partition_list_t *commit =
        rd_kafka_topic_partition_list_new((int)s->nparts);
    for (size_t i = 0; i < s->nparts; i++) {
        part *p = &s->parts[i];
        if (w->n && w->written[i]) {
            BS_INC(s->ctr.checkpoints);
            p->ckpt_offset = p->base_offset = p->next_offset;
            if (wm && ckpt_wm(p, wm) == wm) {
                bs_ckpt_wm *copy = malloc(nwm * sizeof(*copy));
                if (copy) {
                    memcpy(copy, wm, nwm * sizeof(*copy));
                    free(p->wm);
                    p->wm = copy;
                    p->nwm = nwm;
                }
            }
            rd_kafka_topic_partition_list_add(commit, p->topic, p->partition)
                ->offset = p->ckpt_offset;
        } else if (in_list(only, p) && p->ckpt_offset >= 0 &&
                   p->committed < p->ckpt_offset &&
                   p->state != BS_PART_WAITING_FIRST && !s->txn) {
            /* A commit that failed earlier is made again even when nothing
             * new was checkpointed since (its checkpoint is durable). */
            rd_kafka_topic_partition_list_add(commit, p->topic, p->partition)
                ->offset = p->ckpt_offset;
        }
    }
    return commit;
}

/* The commit of a round's list, and its figures on success; with the
 * overlap (a loop round: bs_overlap_may) handed to the committer instead.
 * BS_RETRY when a transaction's commit failed (rolled back); a failed
 * plain commit is not a failed round (the next makes it again). */
static bs_rc commit_round(bs_stage *s, rd_kafka_topic_partition_list_t *commit,
                          const char *why, uint64_t bytes, double t0,
                          bool loop_round)
{
    if (commit->cnt == 0)
        return BS_OK;
    if (bs_overlap_may(s, loop_round)) {
        bs_round_lap(s, BS_PHASE_OTHER);
        bs_round_report r = bs_round_report_now(s, why, commit->cnt, bytes, t0);
        if (bs_overlap_hand_over(s, commit, &r))
            return BS_OK;
    }
    bool ok = s->txn ? commit_txn(s, commit) : commit_offsets(s, commit);
    if (!ok)
        return s->txn ? BS_RETRY : BS_OK;
    if (!s->txn)
        bs_crash_point(BS_CRASH_AFTER_COMMIT);
    bs_round_committed(s, commit);
    bs_round_lap(s, BS_PHASE_OTHER);
    bs_round_report r = bs_round_report_now(s, why, commit->cnt, bytes, t0);
    bs_round_report_log(s, &r);
    return BS_OK;
}

/* The body of a round, in CHECKPOINTING: first checkpoints, the flush
 * (invariant 2: nothing is written before every delivery succeeded), the
 * writes, the commit; each phase timed (bs_round_lap). */
static bs_rc round_body(bs_stage *s, const rd_kafka_topic_partition_list_t *only,
                        const char *why, double t0, bool loop_round)
{
    if (bs_restore_pending(s)) {
        bs_rollback(s, true);
        if (bs_restore_pending(s) || s->state == BS_STAGE_FATAL)
            return BS_RETRY;
    }
    /* Transactions: a commit makes everything the open transaction holds
     * visible, every partition's output, so a round covers them all. */
    if (s->txn)
        only = NULL;
    bool waiting = first_checkpoints(s, only);
    if (!flush_producer(s) || s->dr_failed) {
        if (!s->dr_failed)
            bs_deliveries_unconfirmed(s, "flush interrupted");
        bs_rollback(s, false);
        BS_INC(s->ctr.checkpoint_failures);
        return BS_RETRY;
    }
    bs_crash_point(BS_CRASH_AFTER_FLUSH);
    bs_round_lap(s, BS_PHASE_FLUSH);
    bs_ckpt_wm *wm = NULL;
    uint32_t nwm = 0;
    if (bs_exactly_once(s)) {
        if (!(wm = output_watermarks(s)))
            return BS_RETRY;
        nwm = (uint32_t)s->out_parts;
    }
    bs_round_lap(s, BS_PHASE_WATERMARKS);
    char err[BS_ERRSTR_SIZE];
    round_writes w = {calloc(s->nparts ? s->nparts : 1, sizeof(bool)), 0, 0};
    bs_rc rc = write_checkpoints(s, only, wm, nwm, &w, err, sizeof(err));
    /* Transactions: a checkpoint not written is handled as a failed
     * delivery of the output.  The transaction holds the round's output
     * without it, and the Kafka store's records are in it too: one of them
     * not delivered (a delivery timed out) leaves the transaction needing
     * an abort, and librdkafka refuses every later record ("Erroneous
     * state") until it has one.  So the transaction is aborted (librdkafka
     * bumps the producer's epoch where the error asks for it) and the
     * stage rolls back to the last committed state. */
    if (s->txn && rc != BS_OK) {
        bs_deliveries_unconfirmed(s, "checkpoint not written: %s", err);
        bs_rollback(s, false);
    } else {
        rd_kafka_topic_partition_list_t *commit =
            commit_list(s, only, &w, wm, nwm);
        if (commit_round(s, commit, why, w.n ? w.bytes : 0, t0,
                         loop_round) != BS_OK)
            rc = BS_RETRY;
        rd_kafka_topic_partition_list_destroy(commit);
    }
    free(w.written);
    free(wm);
    if (waiting)
        rc = BS_RETRY; /* some partition still has no first checkpoint */
    return rc;
}

/* A round's verdict for /ready and the failed-rounds gauge.  Failed: it
 * returned BS_RETRY or a step of it failed (a commit too).  Good: every
 * partition's records are in a durable, committed checkpoint (none owed:
 * bs_parts_owe), so an idle stage's rounds, which have nothing to write,
 * are good.  Otherwise neither: a round after a rollback has nothing to
 * write only because the rollback took the records back, and they are
 * owed until a round checkpoints them again; such a round ends no failing
 * spell. */
static void round_verdict(bs_stage *s, bs_rc rc, double t0)
{
    if (rc != BS_OK || s->round_err[0]) {
        bs_round_note(s, "the round did not complete");
        bs_verdict_failed(s, t0, s->round_err);
    } else if (!s->inflight && !bs_parts_owe(s)) {
        /* (a round whose commit runs on the committer is judged when its
         * outcome is taken: bs_round_settle) */
        bs_verdict_good(s);
    }
    atomic_store(&s->round_since_ms, 0);
}

/* A round; loop_round: one the loop asked for, whose commit may overlap
 * the next transaction.  Any round first takes the outcome of the commit
 * still running (a failed one rolls this round back). */
static bs_rc round_run(bs_stage *s, const rd_kafka_topic_partition_list_t *only,
                       const char *why, bool loop_round)
{
    double t0 = bs_now();
    if (s->state == BS_STAGE_FATAL)
        return BS_RETRY;
    bs_stage_state prev = bs_stage_set_state(s, BS_STAGE_CHECKPOINTING);
    s->round_err[0] = '\0';
    bs_round_clock_start(s, t0);
    atomic_store(&s->round_since_ms, (int64_t)(t0 * 1000));
    (void)bs_round_settle(s, true);
    bs_round_lap(s, BS_PHASE_OTHER); /* a wait for that commit */
    bs_rc rc = round_body(s, only, why, t0, loop_round);
    round_verdict(s, rc, t0);
    /* The interval runs from the round's end: a round slower than
     * checkpoint.interval.ms (a loaded cluster's acks=all round trips)
     * must not start the next at once, leaving no time for records. */
    s->last_ckpt = bs_now();
    if (rc == BS_OK)
        s->since_ckpt = 0;
    bs_publish(s);
    if (s->state == BS_STAGE_FATAL)
        return BS_RETRY;
    /* A loop round's outcome decides between RUNNING and BACKOFF; inside
     * a rebalance or the drain the round goes back to where it came from. */
    if (prev == BS_STAGE_RUNNING || prev == BS_STAGE_BACKOFF)
        bs_stage_set_state(s, rc == BS_OK ? BS_STAGE_RUNNING
                                          : BS_STAGE_BACKOFF);
    else
        bs_stage_set_state(s, prev);
    return rc;
}

bs_rc bs_round(bs_stage *s, const rd_kafka_topic_partition_list_t *only,
               const char *why)
{
    return round_run(s, only, why, false);
}

void bs_backoff_start(bs_stage *s)
{
    s->backoff = s->backoff == 0 ? BS_BACKOFF_MIN_S : s->backoff * 2;
    if (s->backoff > BS_BACKOFF_MAX_S)
        s->backoff = BS_BACKOFF_MAX_S;
    s->retry_at = bs_now() + s->backoff;
}

/* Nothing is lost while paused: the filters and offsets stay in memory and
 * the records stay in Kafka. */
void bs_round_from_loop(bs_stage *s, const char *why)
{
    bs_stage_state before = s->state; /* RUNNING or BACKOFF */
    /* A retry's commit is its own: its verdict ends or goes on with a
     * failing spell at once. */
    bs_rc rc = round_run(s, NULL, why, before == BS_STAGE_RUNNING);
    if (s->state == BS_STAGE_FATAL)
        return;
    if (rc == BS_OK) {
        /* The backoff is kept until a good round (round_verdict): a round
         * that succeeds only because a rollback took the records back says
         * nothing of the next, and the same failure doubles it again. */
        if (before == BS_STAGE_BACKOFF) {
            bs_log(BS_LOG_INFO, "checkpoints recovered, resuming", "backoff_s=%.1f",
                   s->backoff);
            bs_pause_all(s, false);
        }
        return;
    }
    bs_refusals_collect(s);
    bs_backoff_start(s);
    if (before != BS_STAGE_BACKOFF) {
        char q[600];
        bs_log(BS_LOG_WARN, "checkpoint round failed, pausing consumption",
               "retry_in_s=%.1f error=%s", s->backoff,
               bs_log_quote(s->round_err, q, sizeof(q)));
        bs_pause_all(s, true);
    }
}
