/*
 * txn.c -- exactly_once by Kafka transactions (exactly_once.method
 * transactions, or auto on a broker that accepts them): one transactional
 * producer for the instance, and a transaction open between rounds, so a
 * round's output and rejected records, its input offsets (sent with the
 * consumer group's metadata: KIP-447, the broker refuses them from a
 * member of an older generation) and, with checkpoint.store=kafka, its
 * checkpoint records become visible to read_committed readers together, or
 * not at all.  round.c drives a round; this file wraps librdkafka's calls
 * and their error classes (retriable: the same call again; abortable or
 * fatal: the stage rolls back, and the rollback replaces the producer,
 * whose init_transactions aborts the transaction: bs_rollback says why).
 *
 * Everything here runs on the stage thread and uses s->producer, which
 * clients.c makes and replaces, but bs_txn_commit_on: it touches only the
 * producer it is given, so the committer's thread (committer.c) runs it
 * while the stage produces on its other producer.  A commit times its two
 * calls as phases of the round (send_offsets, commit).
 */
#include "clients/txn.h"
#include "core/stage_int.h"
#include "base/crash_point.h"
#include "base/log.h"
#include "kafka/txn_id.h"
#include "base/util.h"
#include "core/state.h"
#include "core/startup.h"
#include "ops/publish.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

/* Tries of a call that failed with a retriable error (each bounded by
 * BS_TIMEOUT_BROKER_MS) before the round gives up on the transaction. */
#define TXN_ATTEMPTS 3

void bs_txn_id(bs_stage *s, const char *slot_dir)
{
    const char *id = s->set.transactional_id;
    const char *inst = bs_config_get_str(s->cfg, "consumer.group.instance.id");
    const char *group = s->set.group_id;
    if (id && *id) {
        snprintf(s->txn_id, sizeof(s->txn_id), "%s", id);
        return;
    }
    if (inst && *inst) {
        /* The broker lets one live member hold a static id. */
        snprintf(s->txn_id, sizeof(s->txn_id), "bloomstage-%s-%s", group,
                 inst);
        return;
    }
    char host[128] = "", err[4300], q[4400];
    if (gethostname(host, sizeof(host) - 1) != 0 || !*host)
        snprintf(host, sizeof(host), "host");
    if (bs_txn_slot_take(&s->txn_slot, slot_dir, group, err,
                         sizeof(err)) == 0) {
        snprintf(s->txn_id, sizeof(s->txn_id), "bloomstage-%s-%s-slot%d",
                 group, host, s->txn_slot.slot);
        bs_log(BS_LOG_INFO, "transactional id", "transactional_id=%s "
               "slot_file=%s", s->txn_id,
               bs_log_quote(s->txn_slot.path, q, sizeof(q)));
        return;
    }
    /* Unique all the same: the process id, and the clock for a process
     * id reused; only a restart no longer aborts what this one leaves
     * open (transaction.timeout.ms does). */
    uint64_t salt = (uint64_t)(bs_now() * 1e9) ^ (uint64_t)time(NULL);
    snprintf(s->txn_id, sizeof(s->txn_id), "bloomstage-%s-%s-p%ld-%08x",
             group, host, (long)getpid(),
             (unsigned)XXH3_64bits(&salt, sizeof(salt)));
    bs_log(BS_LOG_WARN, "transactional id: no host slot, using one unique "
           "to the process", "transactional_id=%s error=%s", s->txn_id,
           bs_log_quote(err, q, sizeof(q)));
}

bs_rc bs_txn_fenced_check(bs_stage *s, char *errstr, size_t errstr_size)
{
    rd_kafka_resp_err_t fe = s->producer && s->txn
                                 ? rd_kafka_fatal_error(s->producer, NULL, 0)
                                 : RD_KAFKA_RESP_ERR_NO_ERROR;
    if (fe != RD_KAFKA_RESP_ERR__FENCED &&
        fe != RD_KAFKA_RESP_ERR_PRODUCER_FENCED &&
        fe != RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH)
        return BS_OK;
    if (!bs_fence_window_add(&s->txn_fencings, bs_now()))
        return BS_OK;
    bs_log(BS_LOG_ERROR, "fenced repeatedly: another live instance is "
           "probably using this transactional id; stopping",
           "transactional_id=%s fencings=%d window_s=%.0f error=%s "
           "hint=\"give each instance its own exactly_once.transactional.id, "
           "or leave it empty\"", s->txn_id, BS_TXN_FENCED_MAX,
           BS_TXN_FENCED_WINDOW_S, rd_kafka_err2name(fe));
    snprintf(errstr, errstr_size, "the producer was fenced %d times within "
             "%.0f s: another live instance is probably using "
             "transactional.id %s (exactly_once.transactional.id)",
             BS_TXN_FENCED_MAX, BS_TXN_FENCED_WINDOW_S, s->txn_id);
    return BS_FATAL;
}

bool bs_txn_fenced_error(rd_kafka_resp_err_t err)
{
    switch (err) {
    case RD_KAFKA_RESP_ERR__FENCED:
    case RD_KAFKA_RESP_ERR_PRODUCER_FENCED:
    case RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH:
    case RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION:
    case RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID:
    case RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID:
    case RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS:
        return true;
    default:
        return false;
    }
}

/* errstr gets the call and the error; the error is destroyed. */
static void say(rd_kafka_error_t *e, const char *call, char *errstr,
                size_t errstr_size)
{
    snprintf(errstr, errstr_size, "%s: %s: %s%s", call,
             rd_kafka_err2name(rd_kafka_error_code(e)),
             rd_kafka_error_string(e),
             rd_kafka_error_is_fatal(e) ? " (fatal)"
             : rd_kafka_error_txn_requires_abort(e) ? " (abortable)"
                                                    : "");
}

bs_rc bs_txn_start(bs_stage *s, char *errstr, size_t errstr_size)
{
    s->txn_open = s->txn_ready = false;
    rd_kafka_error_t *e = NULL;
    for (int attempt = 1; attempt <= TXN_ATTEMPTS * 2; attempt++) {
        e = rd_kafka_init_transactions(s->producer, BS_TIMEOUT_BROKER_MS);
        if (!e || !rd_kafka_error_is_retriable(e))
            break;
        char q[512];
        bs_log(BS_LOG_WARN, "init_transactions failed, retrying",
               "attempt=%d error=%s", attempt,
               bs_log_quote(rd_kafka_error_string(e), q, sizeof(q)));
        rd_kafka_error_destroy(e);
        e = NULL;
        if (attempt == TXN_ATTEMPTS * 2) {
            snprintf(errstr, errstr_size, "init_transactions: no answer "
                     "from the transaction coordinator");
            return BS_RETRY;
        }
    }
    if (e) {
        /* Retriable: the coordinator did not answer (a broker away);
         * otherwise refused (no transactions, not authorised, a timeout
         * out of the broker's range). */
        bool retriable = rd_kafka_error_is_retriable(e);
        say(e, "init_transactions", errstr, errstr_size);
        /* No Write on the transactional id: the refusal said (a fatal
         * error's code is the broker's, not __FATAL). */
        (void)bs_refused(s, rd_kafka_error_code(e), "Write", s->txn_id,
                         errstr);
        rd_kafka_error_destroy(e);
        return retriable ? BS_RETRY : BS_FATAL;
    }
    s->txn_ready = true;
    if (!bs_txn_begin(s)) {
        snprintf(errstr, errstr_size, "begin_transaction failed after "
                 "init_transactions");
        return BS_RETRY;
    }
    return BS_OK;
}

bool bs_txn_begin(bs_stage *s)
{
    if (!s->txn || s->txn_open)
        return true;
    if (!s->txn_ready) {
        bs_deliveries_unconfirmed(s, "transactions not initialised");
        return false;
    }
    rd_kafka_error_t *e = rd_kafka_begin_transaction(s->producer);
    if (e) {
        char err[BS_ERRSTR_SIZE];
        say(e, "begin_transaction", err, sizeof(err));
        rd_kafka_error_destroy(e);
        bs_deliveries_unconfirmed(s, "%s", err);
        return false;
    }
    s->txn_open = true;
    return true;
}

/* A failed call's outcome for bs_txn_commit: the round's text, and the
 * `fenced` log line when the broker fenced this instance. */
static bs_rc failed(rd_kafka_error_t *e, const char *call, char *errstr,
                    size_t errstr_size)
{
    say(e, call, errstr, errstr_size);
    if (bs_txn_fenced_error(rd_kafka_error_code(e))) {
        char q[700];
        bs_log(BS_LOG_WARN, "fenced: another instance owns these partitions "
               "now, or the transaction timed out; aborting and rolling "
               "back to the last committed state", "error=%s",
               bs_log_quote(errstr, q, sizeof(q)));
    }
    rd_kafka_error_destroy(e);
    return BS_RETRY;
}

bs_rc bs_txn_commit_on(rd_kafka_t *rk,
                      const rd_kafka_topic_partition_list_t *offsets,
                      const rd_kafka_consumer_group_metadata_t *md,
                      char *errstr, size_t errstr_size, double *send_s,
                      double *commit_s)
{
    rd_kafka_error_t *e = NULL;
    double t0 = bs_now();
    *send_s = *commit_s = 0;
    if (offsets->cnt > 0) {
        for (int attempt = 1; attempt <= TXN_ATTEMPTS; attempt++) {
            e = rd_kafka_send_offsets_to_transaction(rk, offsets, md,
                                                     BS_TIMEOUT_BROKER_MS);
            if (!e || !rd_kafka_error_is_retriable(e) ||
                attempt == TXN_ATTEMPTS)
                break;
            rd_kafka_error_destroy(e);
            e = NULL;
        }
        if (e)
            return failed(e, "send_offsets_to_transaction", errstr,
                          errstr_size);
        bs_crash_point(BS_CRASH_AFTER_SEND_OFFSETS);
    }
    double t1 = bs_now();
    *send_s = t1 - t0;
    if (bs_fail_point(BS_FAIL_COMMIT)) {
        /* As a slow broker's refusal: the stage goes on meanwhile. */
        usleep(300 * 1000);
        snprintf(errstr, errstr_size, "commit_transaction: refused at "
                 "BLOOMSTAGE_FAIL_AT=commit (a test)");
        return BS_RETRY;
    }
    for (int attempt = 1; attempt <= TXN_ATTEMPTS; attempt++) {
        /* A retriable failure (a timeout) goes on in the background and
         * the same call resumes it. */
        e = rd_kafka_commit_transaction(rk, BS_TIMEOUT_BROKER_MS);
        if (!e || !rd_kafka_error_is_retriable(e) || attempt == TXN_ATTEMPTS)
            break;
        rd_kafka_error_destroy(e);
        e = NULL;
    }
    if (e)
        /* Committed or not is then unknown: the rollback reads the
         * committed offsets back from the broker and restores the state
         * that matches them, whichever it is. */
        return failed(e, "commit_transaction", errstr, errstr_size);
    *commit_s = bs_now() - t1;
    bs_crash_point(BS_CRASH_AFTER_COMMIT);
    return BS_OK;
}

bs_rc bs_txn_commit(bs_stage *s, rd_kafka_topic_partition_list_t *offsets,
                    char *errstr, size_t errstr_size)
{
    rd_kafka_consumer_group_metadata_t *md =
        rd_kafka_consumer_group_metadata(s->consumer);
    double send_s, commit_s;
    bs_rc rc = bs_txn_commit_on(s->producer, offsets, md, errstr,
                                errstr_size, &send_s, &commit_s);
    rd_kafka_consumer_group_metadata_destroy(md);
    bs_round_lap_timed(s, BS_PHASE_SEND_OFFSETS, send_s);
    bs_round_lap_timed(s, BS_PHASE_COMMIT, commit_s);
    if (rc == BS_OK)
        s->txn_open = false;
    return rc;
}
