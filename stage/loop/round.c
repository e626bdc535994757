/*
 * round.c -- checkpoint, then commit: one round flushes the producer and
 * checks every delivery, writes each changed partition's checkpoint to the
 * store, makes the round durable, and commits exactly the offsets written
 * (invariants 1 and 2, state.c).  A failed delivery rolls back instead
 * (invariant 3), and with transactions so does a checkpoint not written; a
 * failed round pauses consumption and is retried with backoff (BACKOFF),
 * never losing what is in memory or in Kafka.
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
#include "clients/committer.h"
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

/* The round's first failure, kept for /ready (bs_round hands it on when
 * the round ends); cut to its room. */
__attribute__((format(printf, 2, 3))) static void
note_text(bs_stage *s, const char *fmt, ...)
{
    if (s->round_err[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->round_err, sizeof(s->round_err), fmt, ap);
    va_end(ap);
}

/* A failed step of the round: logged, and noted. */
static void note_failure(bs_stage *s, const char *topic, int32_t partition,
                         const char *err)
{
    bs_log_ckpt_failed(topic, partition, err);
    if (topic)
        note_text(s, "%s [%d]: %s", topic, (int)partition, err);
    else
        note_text(s, "%s", err);
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

/* Seeks the consumer to the offsets in `seek` (nothing if empty).  A seek
 * that cannot be made at all, BS_SEEK_ATTEMPTS times in a row, is fatal:
 * where consumption goes on would be unknown.  librdkafka 2.0.2 can answer
 * "Timed out waiting for N remaining partition seek(s)" within milliseconds
 * of the call, several times in a row on a loaded machine; seeking the same
 * partitions again is harmless, so it is retried after a pause that
 * doubles from BS_SEEK_RETRY_MS.  A partition the broker refuses is
 * logged. */
static void seek_to(bs_stage *s, rd_kafka_topic_partition_list_t *seek,
                    const char *why)
{
    if (seek->cnt == 0)
        return;
    rd_kafka_error_t *e = NULL;
    for (int attempt = 1; attempt <= BS_SEEK_ATTEMPTS; attempt++) {
        e = rd_kafka_seek_partitions(s->consumer, seek, BS_TIMEOUT_BROKER_MS);
        if (!e)
            break;
        if (attempt < BS_SEEK_ATTEMPTS) {
            char q[512];
            bs_log(BS_LOG_WARN, "seek failed, retrying", "reason=%s "
                   "attempt=%d error=%s", why, attempt,
                   bs_log_quote(rd_kafka_error_string(e), q, sizeof(q)));
            rd_kafka_error_destroy(e);
            e = NULL;
            usleep((BS_SEEK_RETRY_MS * 1000u) << (attempt - 1));
        }
    }
    if (e) {
        bs_stage_fatal(s, "%s: seek failed %d times: %s", why,
                       BS_SEEK_ATTEMPTS, rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
        return;
    }
    for (int i = 0; i < seek->cnt; i++)
        if (seek->elems[i].err)
            bs_log(BS_LOG_WARN, "seek failed", "reason=%s topic=%s "
                   "partition=%d error=%s", why, seek->elems[i].topic,
                   (int)seek->elems[i].partition,
                   rd_kafka_err2name(seek->elems[i].err));
}

/* A resume also seeks each partition to where this stage's own state says
 * it is (after the last record processed, or its base after a rollback),
 * so where fetching restarts never depends on what librdkafka remembers
 * across a pause and a seek. */
void bs_pause_all(bs_stage *s, bool pause)
{
    rd_kafka_topic_partition_list_t *a = NULL;
    if (rd_kafka_assignment(s->consumer, &a) != RD_KAFKA_RESP_ERR_NO_ERROR)
        return;
    if (a->cnt == 0) {
        rd_kafka_topic_partition_list_destroy(a);
        return;
    }
    if (pause) {
        rd_kafka_pause_partitions(s->consumer, a);
        rd_kafka_topic_partition_list_destroy(a);
        return;
    }
    /* A partition waiting for a schema stays paused (schema_wait.c
     * resumes it). */
    rd_kafka_topic_partition_list_t *resume =
        rd_kafka_topic_partition_list_new(a->cnt);
    for (int i = 0; i < a->cnt; i++) {
        part *p = bs_part_find(s, a->elems[i].topic, a->elems[i].partition);
        if (!p || p->state != BS_PART_SCHEMA_WAIT)
            rd_kafka_topic_partition_list_add(resume, a->elems[i].topic,
                                              a->elems[i].partition);
    }
    rd_kafka_resume_partitions(s->consumer, resume);
    rd_kafka_topic_partition_list_destroy(resume);
    rd_kafka_topic_partition_list_t *seek =
        rd_kafka_topic_partition_list_new(a->cnt);
    for (int i = 0; i < a->cnt; i++) {
        part *p = bs_part_find(s, a->elems[i].topic, a->elems[i].partition);
        if (p && p->state == BS_PART_SCHEMA_WAIT)
            continue;
        int64_t pos = !p ? -1 : p->next_offset >= 0 ? p->next_offset
                                                     : p->base_offset;
        if (pos >= 0)
            rd_kafka_topic_partition_list_add(seek, p->topic, p->partition)
                ->offset = pos;
    }
    seek_to(s, seek, "resume");
    rd_kafka_topic_partition_list_destroy(seek);
    rd_kafka_topic_partition_list_destroy(a);
}

static bool restore_pending(const bs_stage *s)
{
    for (size_t i = 0; i < s->nparts; i++)
        if (s->parts[i].state == BS_PART_RESTORE_PENDING)
            return true;
    return false;
}

/* Invariant 3: every partition back to its last checkpoint (with
 * transactions: the one matching its committed offset), filters reloaded
 * from the store and the consumer seeked.  A tail that cannot be read
 * leaves partitions RESTORE_PENDING: the next round retries them (pending
 * = true), and only them: the others are ACTIVE and may have records in
 * flight, which a rollback must flush first (invariant 2).  So a retry
 * keeps what is theirs: the open transaction, which holds their output
 * since the last commit (aborting it would discard that output while they
 * keep their offsets, and the round would commit past it: invariant 9),
 * and the failures noted for the round, which then rolls back every
 * partition.  A producer that must be replaced loses the transaction all
 * the same: then every partition rolls back. */
/* The producer a rollback needs: with transactions what the open
 * transaction holds is aborted (read_committed readers never see it) by
 * replacing the producer, whose init_transactions fences the old one and
 * aborts its transaction.  Not by abort_transaction: librdkafka 2.0.2's
 * abort sets its count of the transaction's requests in flight to 0, and
 * a request the network lost (an AddPartitionsToTxn) then fails an
 * assertion on that count when it times out, seconds later (SIGABRT);
 * destroying the producer ends the request instead.  The partitions whose
 * output that was are all restored after.  BS_RETRY: the broker did not
 * answer init_transactions; BS_FATAL: it refused (the stage is FATAL). */
static bs_rc rollback_producer(bs_stage *s, bool pending, char *err,
                               size_t err_size)
{
    bool replace = rd_kafka_fatal_error(s->producer, NULL, 0) ||
                   (s->txn && !pending && s->txn_open);
    /* A spare whose commit failed: its transaction ended with the
     * current one's (exactly_once.overlap). */
    bool spare = s->spare.rk && (s->spare.broken ||
                                 rd_kafka_fatal_error(s->spare.rk, NULL, 0));
    if (s->txn && (replace || s->spare.broken))
        bs_parts_txn_aborted(s);
    bs_rc prc = BS_OK;
    if (replace)
        prc = bs_producer_recreate(s, err, err_size);
    else if (s->txn && !s->txn_ready)
        prc = bs_txn_start(s, err, err_size); /* an earlier one failed */
    if (prc == BS_OK && spare)
        prc = bs_spare_recreate(s, err, err_size);
    if (prc == BS_FATAL) {
        bs_stage_fatal(s, "%s", err);
        return BS_FATAL;
    }
    /* The next transaction is open before the restore: a partition
     * restored without a committed state gets a first checkpoint, and the
     * Kafka store writes it with the transactional producer, which refuses
     * a record outside a transaction ("Erroneous state"). */
    if (prc == BS_OK && s->txn)
        (void)bs_txn_begin(s); /* a failure: the next round rolls back */
    if (prc != BS_OK) {
        /* The broker is away: no partition is processed until a later
         * round's retry can. */
        char rq[1100];
        bs_log(BS_LOG_WARN, "rollback incomplete, will retry", "error=%s",
               bs_log_quote(err, rq, sizeof(rq)));
        for (size_t i = 0; i < s->nparts; i++) {
            bs_part_set_state(s, &s->parts[i], BS_PART_RESTORING);
            bs_part_set_state(s, &s->parts[i], BS_PART_RESTORE_PENDING);
        }
        s->dr_failed = 0;
        bs_deliveries_unconfirmed(s, "%s", err); /* the next round retries */
        bs_publish(s);
    }
    return prc;
}

/* The partitions chosen[0..n) restored (bases[i]: where each was before,
 * for one with no checkpoint yet) and the consumer seeked to where each
 * now resumes; their records are processed again from there. */
static void rollback_parts(bs_stage *s, part **chosen, const int64_t *bases,
                           size_t n, bool pending)
{
    char err[BS_ERRSTR_SIZE];
    bs_rc r = bs_parts_restore(s, chosen, n, err, sizeof(err));
    for (size_t i = 0; pending && r != BS_FATAL && i < n; i++)
        if (chosen[i]->state != BS_PART_RESTORE_PENDING)
            bs_part_log_restored(chosen[i], "partition restored");
    if (r == BS_FATAL) {
        bs_stage_fatal(s, "rollback: %s", err);
    } else if (r == BS_RETRY) {
        /* Nothing of theirs is processed until a retry reads the tail
         * (the next round calls back here first). */
        char rq[1100];
        bs_log(BS_LOG_WARN, pending ? "restore incomplete, will retry"
                                    : "rollback incomplete, will retry",
               "error=%s", bs_log_quote(err, rq, sizeof(rq)));
        note_text(s, "restore incomplete: %s", err);
    }
    rd_kafka_topic_partition_list_t *seek =
        rd_kafka_topic_partition_list_new((int)n);
    for (size_t i = 0; i < n && s->state != BS_STAGE_FATAL; i++) {
        part *p = chosen[i];
        /* No checkpoint yet: back to the first record consumed. */
        if (p->ckpt_offset < 0)
            p->base_offset = bases[i];
        if (p->base_offset >= 0)
            rd_kafka_topic_partition_list_add(seek, p->topic, p->partition)
                ->offset = p->base_offset;
        p->next_offset = p->txn_from = -1;
        p->txn_aborted = false;
    }
    if (s->state != BS_STAGE_FATAL)
        seek_to(s, seek, "rollback");
    rd_kafka_topic_partition_list_destroy(seek);
}

void bs_rollback(bs_stage *s, bool pending)
{
    char q[600];
    /* A commit that failed ends the open transaction too: every partition
     * rolls back. */
    if (!bs_round_settle(s, true))
        pending = false;
    if (pending && s->txn && rd_kafka_fatal_error(s->producer, NULL, 0)) {
        bs_deliveries_unconfirmed(s, "the transactional producer failed "
                                  "fatally");
        pending = false;
    }
    if (pending) {
        bs_log(BS_LOG_INFO, "retrying the restore", NULL);
    } else {
        BS_INC(s->ctr.rollbacks);
        bs_log(BS_LOG_WARN, s->txn ? "transaction aborted, rolling back to "
               "the last committed state" : "delivery failed, rolling back "
               "to the last checkpoint", "failed=%llu error=%s",
               (unsigned long long)s->dr_failed,
               bs_log_quote(s->dr_error, q, sizeof(q)));
        note_text(s, "rolled back: %s",
                  s->dr_error[0] ? s->dr_error : "a delivery failed");
    }
    char err[BS_ERRSTR_SIZE];
    if (rollback_producer(s, pending, err, sizeof(err)) != BS_OK)
        return;
    size_t n = s->nparts, m = 0;
    part **chosen = calloc(n ? n : 1, sizeof(*chosen));
    int64_t *bases = calloc(n ? n : 1, sizeof(*bases));
    if (!chosen || !bases) {
        free(chosen);
        free(bases);
        bs_stage_fatal(s, "rollback: out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (pending && s->parts[i].state != BS_PART_RESTORE_PENDING)
            continue;
        bases[m] = s->parts[i].base_offset;
        chosen[m++] = &s->parts[i];
    }
    rollback_parts(s, chosen, bases, m, pending);
    free(chosen);
    free(bases);
    if (!pending) {
        s->dr_failed = 0;
        s->dr_error[0] = '\0';
        s->since_ckpt = 0;
    }
    if (s->state != BS_STAGE_FATAL)
        (void)bs_txn_begin(s); /* a failure: the next round rolls back */
    bs_publish(s);
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
        note_failure(s, NULL, -1, err);
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
        note_text(s, "commit failed: %s", rd_kafka_err2str(cerr));
        return false;
    }
    for (int i = 0; i < commit->cnt; i++) {
        const rd_kafka_topic_partition_t *e = &commit->elems[i];
        if (e->err) {
            bs_log(BS_LOG_WARN, "commit failed", "topic=%s partition=%d "
                   "error=%s", e->topic, (int)e->partition,
                   rd_kafka_err2name(e->err));
            note_text(s, "commit of %s [%d] failed: %s", e->topic,
                      (int)e->partition, rd_kafka_err2str(e->err));
        }
    }
    return true;
}

/* After the commit of `commit` (the entries without an error): the store
 * may let go of the states before them. */
static void store_committed(bs_stage *s, rd_kafka_topic_partition_list_t *commit)
{
    char err[BS_ERRSTR_SIZE];
    for (int i = 0; i < commit->cnt; i++) {
        const rd_kafka_topic_partition_t *e = &commit->elems[i];
        if (e->err)
            continue;
        if (bs_store_committed(s->store, e->topic, e->partition, e->offset,
                               err, sizeof(err)) != 0) {
            part *p = bs_part_find(s, e->topic, e->partition);
            bs_log_ckpt_failed(p ? p->topic : NULL, p ? p->partition : -1,
                               err); /* only older states stay behind */
        }
    }
    bs_crash_point(BS_CRASH_AFTER_STORE_COMMITTED);
}

/* Transactions: sends the offsets and commits the transaction that holds
 * the round's output.  false: not committed; rolled back (everything since
 * the last committed state is processed again). */
static bool commit_txn(bs_stage *s, rd_kafka_topic_partition_list_t *commit)
{
    char err[BS_ERRSTR_SIZE];
    bs_stage_check_commit(s);
    if (bs_txn_commit(s, commit, err, sizeof(err)) != BS_OK) {
        note_failure(s, NULL, -1, err);
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
            note_failure(s, p->topic, p->partition, err);
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
            note_failure(s, p->topic, p->partition, err);
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
        note_failure(s, NULL, -1, err);
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

/* What a completed round reports: its size, its duration (with the
 * overlap, until its commit was handed over: the time the stage took no
 * records), the time each phase took (BS_ROUND_PHASES; with the overlap
 * send_offsets and commit ran on the committer's thread) and the time
 * since the round before ended (`between_seconds`, records processed). */
typedef struct round_report {
    const char *why;
    int partitions;
    uint64_t bytes, records;
    double t0, seconds, between; /* t0: when the round began */
    double phase[BS_NPHASES];
    bool overlapped;
} round_report;

/* A completed round's figures into the metrics and its debug line. */
static void report_round(bs_stage *s, const round_report *r)
{
    BS_SET(s->ctr.checkpoint_bytes, r->bytes);
    bs_report_round(s, r->phase, r->seconds);
    char phases[BS_NPHASES * 40];
    size_t len = 0;
    for (int k = 0; k < BS_NPHASES && len < sizeof(phases); k++)
        len += (size_t)snprintf(phases + len, sizeof(phases) - len,
                                " %s_seconds=%.4f", bs_round_phase_names[k],
                                r->phase[k]);
    bs_log(BS_LOG_DEBUG, "checkpoint", "reason=%s partitions=%d bytes=%llu "
           "records=%llu seconds=%.4f%s between_seconds=%.4f overlapped=%d",
           r->why, r->partitions, (unsigned long long)r->bytes,
           (unsigned long long)r->records, r->seconds, phases, r->between,
           r->overlapped);
}

/* A round's report as it stands now (its phases so far). */
static round_report round_now(const bs_stage *s, const char *why,
                              int partitions, uint64_t bytes, double t0)
{
    round_report r = {.why = why, .partitions = partitions, .bytes = bytes,
                      .records = s->since_ckpt, .t0 = t0,
                      .seconds = s->round_lap - t0,
                      .between = t0 - s->last_ckpt};
    memcpy(r.phase, s->round_phase, sizeof(r.phase));
    return r;
}

/* After a commit of `commit` (the entries without an error) that made
 * the round's transaction visible: each partition's committed offset,
 * and the store and the poison notes told. */
static void committed(bs_stage *s, rd_kafka_topic_partition_list_t *commit)
{
    double now = bs_unix_now();
    for (int i = 0; i < commit->cnt; i++) {
        part *p = bs_part_find(s, commit->elems[i].topic,
                               commit->elems[i].partition);
        if (p && !commit->elems[i].err) {
            p->committed = commit->elems[i].offset;
            p->committed_at = now;
        }
    }
    BS_INC(s->ctr.commits);
    store_committed(s, commit);
    bs_poison_prune(s); /* records the commit passed do not come again */
    bs_refusal_healed(s);
}

/* A failed round (one that started at t0): counted, and the start of a
 * failing spell if none runs; why for /ready. */
static void verdict_failed(bs_stage *s, double t0, const char *why)
{
    BS_INC(s->ctr.failed_rounds);
    int64_t zero = 0;
    atomic_compare_exchange_strong(&s->failing_since_ms, &zero,
                                   (int64_t)(t0 * 1000));
    pthread_mutex_lock(&s->pub_lock);
    snprintf(s->ckpt_why, sizeof(s->ckpt_why), "%.*s",
             (int)sizeof(s->ckpt_why) - 1, why);
    pthread_mutex_unlock(&s->pub_lock);
}

/* A good round: the failing spell, if one runs, ends. */
static void verdict_good(bs_stage *s)
{
    if (atomic_load(&s->failing_since_ms))
        bs_log(BS_LOG_INFO, "checkpoints good again", "failed_rounds=%llu",
               (unsigned long long)BS_GET(s->ctr.failed_rounds));
    BS_SET(s->ctr.failed_rounds, 0);
    atomic_store(&s->failing_since_ms, 0);
    s->backoff = 0; /* the next failure waits the least again */
}

/* exactly_once.overlap: a round whose transaction the committer commits
 * while the next one takes records on the other producer, and what is
 * done once its outcome is known (bs_round_settle). */
struct bs_inflight {
    rd_kafka_topic_partition_list_t *commit; /* lent to the committer */
    int64_t *txn_from; /* per s->parts[i]: its next_offset at the hand-off */
    size_t nparts;
    round_report report;
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

/* Whether this round's commit may run on the committer: a loop round
 * (rounds in a rebalance or the drain commit before they return), the
 * spare producer ready, no commit running. */
static bool may_overlap(const bs_stage *s, bool loop_round)
{
    return loop_round && s->txn && s->committer && !s->inflight &&
           s->spare.rk && s->spare.txn_ready && !s->spare.broken &&
           !rd_kafka_fatal_error(s->spare.rk, NULL, 0);
}

/* Hands the commit of `commit` (the round's transaction, on the current
 * producer) to the committer, makes the spare producer the current one
 * and begins the next transaction on it.  The partitions' committed
 * state moves when the outcome is taken.  false (nothing handed over) if
 * memory runs out: the round commits itself. */
static bool hand_over(bs_stage *s, rd_kafka_topic_partition_list_t *commit,
                      const round_report *r)
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
        verdict_failed(s, f->report.t0, o.err);
        inflight_free(f);
        return false;
    }
    s->spare.txn_open = false;
    committed(s, f->commit);
    for (size_t i = 0; i < f->nparts && i < s->nparts; i++)
        s->parts[i].txn_from = f->txn_from[i];
    f->report.phase[BS_PHASE_SEND_OFFSETS] += o.send_s;
    f->report.phase[BS_PHASE_COMMIT] += o.commit_s;
    report_round(s, &f->report);
    verdict_good(s);
    inflight_free(f);
    return true;
}

/* The commit of a round's list, and its figures on success; with the
 * overlap (a loop round: may_overlap) handed to the committer instead.
 * BS_RETRY when a transaction's commit failed (rolled back); a failed
 * plain commit is not a failed round (the next makes it again). */
static bs_rc commit_round(bs_stage *s, rd_kafka_topic_partition_list_t *commit,
                          const char *why, uint64_t bytes, double t0,
                          bool loop_round)
{
    if (commit->cnt == 0)
        return BS_OK;
    if (may_overlap(s, loop_round)) {
        bs_round_lap(s, BS_PHASE_OTHER);
        round_report r = round_now(s, why, commit->cnt, bytes, t0);
        if (hand_over(s, commit, &r))
            return BS_OK;
    }
    bool ok = s->txn ? commit_txn(s, commit) : commit_offsets(s, commit);
    if (!ok)
        return s->txn ? BS_RETRY : BS_OK;
    if (!s->txn)
        bs_crash_point(BS_CRASH_AFTER_COMMIT);
    committed(s, commit);
    bs_round_lap(s, BS_PHASE_OTHER);
    round_report r = round_now(s, why, commit->cnt, bytes, t0);
    report_round(s, &r);
    return BS_OK;
}

/* The body of a round, in CHECKPOINTING: first checkpoints, the flush
 * (invariant 2: nothing is written before every delivery succeeded), the
 * writes, the commit; each phase timed (bs_round_lap). */
static bs_rc round_body(bs_stage *s, const rd_kafka_topic_partition_list_t *only,
                        const char *why, double t0, bool loop_round)
{
    if (restore_pending(s)) {
        bs_rollback(s, true);
        if (restore_pending(s) || s->state == BS_STAGE_FATAL)
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
        note_text(s, "the round did not complete");
        verdict_failed(s, t0, s->round_err);
    } else if (!s->inflight && !bs_parts_owe(s)) {
        /* (a round whose commit runs on the committer is judged when its
         * outcome is taken: bs_round_settle) */
        verdict_good(s);
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
