/*
 * rollback.c -- back to the last committed state (invariant 3): the open
 * transaction aborted by replacing the producer, every partition restored
 * from the store and the consumer seeked to where each resumes; and the
 * pause and resume of consumption around a failed round, which seek from
 * the stage's own state.
 */
#include "loop/rollback.h"
#include "core/stage_int.h"
#include "base/log.h"
#include "base/util.h"
#include "clients/clients.h"
#include "clients/txn.h"
#include "core/partitions.h"
#include "core/state.h"
#include "loop/outcome.h"
#include "loop/overlap.h"
#include "ops/publish.h"

#include <stdlib.h>
#include <unistd.h>

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

bool bs_restore_pending(const bs_stage *s)
{
    for (size_t i = 0; i < s->nparts; i++)
        if (s->parts[i].state == BS_PART_RESTORE_PENDING)
            return true;
    return false;
}

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
        bs_round_note(s, "restore incomplete: %s", err);
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
        bs_round_note(s, "rolled back: %s",
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
