/*
 * clients.c -- the stage's librdkafka clients: the group consumer, the
 * idempotent or (exactly_once.method, txn.c) transactional producer
 * (replaced whole when it fails fatally), the
 * assign-only consumer that reads the output tail and the Kafka checkpoint
 * store, and the store itself; their configuration (our defaults, then the
 * kafka.* and consumer.* / producer.* keys, then what the stage must
 * force), and the callbacks librdkafka makes into the stage thread.
 *
 * The stage owns every client; bs_clients_destroy frees them in the order
 * their dependencies need (the store borrows the tail consumer).
 */
#include "clients/clients.h"
#include "core/stage_int.h"
#include "kafka/client_defaults.h"
#include "kafka/kafka_util.h"
#include "base/log.h"
#include "store/store.h"
#include "core/state.h"
#include "core/startup.h"
#include "core/poison.h"
#include "clients/txn.h"
#include "clients/committer.h"
#include "ops/publish.h"
#include "base/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void error_cb(rd_kafka_t *rk, int err, const char *reason,
                     void *opaque)
{
    bs_stage *s = opaque;
    char q[512];
    if (rk == s->spare.rk) {
        /* The spare producer (exactly_once.overlap): idle, or committing
         * on the committer's thread, which then serves this.  Logged
         * only: its commit's outcome, or its next transaction, says what
         * the error did. */
        bs_log(BS_LOG_WARN, "kafka error", "client=%s error=%s detail=%s",
               rd_kafka_name(rk), rd_kafka_err2name((rd_kafka_resp_err_t)err),
               bs_log_quote(reason, q, sizeof(q)));
        return;
    }
    if (err == RD_KAFKA_RESP_ERR__FATAL) {
        char fe[512];
        rd_kafka_resp_err_t orig = rd_kafka_fatal_error(rk, fe, sizeof(fe));
        bs_log(BS_LOG_ERROR, "kafka fatal error", "client=%s error=%s "
               "detail=%s", rd_kafka_name(rk), rd_kafka_err2name(orig),
               bs_log_quote(fe, q, sizeof(q)));
        if (rk == s->producer && s->txn && bs_txn_fenced_error(orig))
            bs_log(BS_LOG_WARN, "fenced: the producer's transaction was "
                   "ended by the broker (it timed out, or another producer "
                   "took its transactional.id); rolling back to the last "
                   "committed state with a new producer", "error=%s",
                   rd_kafka_err2name(orig));
        if (rk == s->producer)
            /* The producer cannot go on: everything since the checkpoint
             * (with transactions: since the last commit) is redone with a
             * new producer (rollback.c); counted as a failure but
             * not as a failed delivery. */
            bs_deliveries_unconfirmed(s, "producer fatal error: %s", fe);
        else
            bs_stage_fatal(s, "consumer fatal error: %s", fe);
        return;
    }
    /* The group's Read refused (FindCoordinator, JoinGroup): said, and it
     * holds start-up.  Another client's refusal (the output-tail reader
     * looks up the coordinator of a group it never joins) is only
     * logged. */
    if (rk == s->consumer &&
        err == RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED) {
        (void)bs_consumer_refused(s, err, NULL, reason);
        return;
    }
    bs_log_kafka_error(s, rd_kafka_name(rk), err, reason);
    if (!bs_kafka_refused(err))
        bs_startup_kafka_error(s, err, reason);
}

/* librdkafka's lines, through log.c; its FAIL lines (a connection that
 * failed or was refused: the same text from every client, on every
 * reconnect) once per text and then at most every BS_ERROR_LOG_REPEAT_S
 * (they carry librdkafka's own count of the identical ones).  Called from
 * librdkafka's threads. */
static void log_cb(const rd_kafka_t *rk, int level, const char *fac,
                   const char *buf)
{
    uint64_t repeats;
    bs_refusal_from_log(rd_kafka_opaque(rk), fac, buf);
    if (!strcmp(fac, "FAIL") &&
        !bs_error_log_due(rd_kafka_opaque(rk), "librdkafka", buf, &repeats))
        return;
    bs_log_rdkafka(rk, level, fac, buf);
}

static void dr_msg_cb(rd_kafka_t *rk, const rd_kafka_message_t *m,
                      void *opaque)
{
    (void)rk;
    bs_stage *s = opaque;
    /* No Write on the output, rejected or checkpoint topic: said. */
    if (m->err)
        (void)bs_refused(s, m->err, "Write", rd_kafka_topic_name(m->rkt),
                         rd_kafka_err2str(m->err));
    if (s->store && bs_store_delivery(s->store, m))
        return; /* a checkpoint record (transactions, kafka store) */
    if (!m->err) {
        if (s->npoison)
            bs_poison_delivered(s, m);
        return;
    }
    /* The input record the copy was of, for the log: bloomstage-src. */
    rd_kafka_headers_t *hdrs = NULL;
    const void *v = NULL;
    size_t len = 0;
    char src[300] = "?";
    if (rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR &&
        rd_kafka_header_get_last(hdrs, BS_HDR_SRC, &v, &len) ==
            RD_KAFKA_RESP_ERR_NO_ERROR && v)
        snprintf(src, sizeof(src), "%.*s", (int)(len < 250 ? len : 250),
                 (const char *)v);
    /* Refused for good: noted, so that the record goes where it can when
     * the rollback brings it again (poison.h). */
    if (bs_unproducible(m->err))
        (void)bs_poison_from_report(s, m);
    bs_delivery_failed(s, "delivery of %s to %s [%d] failed: %s", src,
                       rd_kafka_topic_name(m->rkt), (int)m->partition,
                       rd_kafka_err2str(m->err));
}

/* The stage's callbacks on conf. */
static rd_kafka_conf_t *with_callbacks(bs_stage *s, rd_kafka_conf_t *conf)
{
    rd_kafka_conf_set_opaque(conf, s);
    rd_kafka_conf_set_log_cb(conf, log_cb);
    rd_kafka_conf_set_error_cb(conf, error_cb);
    return conf;
}

/* A librdkafka configuration (bs_kafka_conf_new: our defaults, the
 * kafka.* and role.* keys, what the stage must force) with the stage's
 * callbacks. */
static rd_kafka_conf_t *client_conf(bs_stage *s, const char *role,
                                    const char *const *defaults,
                                    const char *const *forced, char *errstr,
                                    size_t errstr_size)
{
    rd_kafka_conf_t *conf = bs_kafka_conf_new(s->cfg, role, defaults, forced,
                                              errstr, errstr_size);
    return conf ? with_callbacks(s, conf) : NULL;
}

static void drop_topics(bs_stage *s)
{
    if (s->out_rkt)
        rd_kafka_topic_destroy(s->out_rkt);
    if (s->rej_rkt)
        rd_kafka_topic_destroy(s->rej_rkt);
    s->out_rkt = s->rej_rkt = NULL;
}

/* The producer's defaults (before the user's producer.* keys) into d, a
 * NULL-terminated list of pairs backed by buf: the tuning, and sized to
 * the topics it writes (their max.message.bytes read at start-up):
 * message.max.bytes as large as the larger, so that librdkafka refuses no
 * record a topic takes (the record path measures each copy against its
 * own topic's), batch.size no larger than the smaller, so that no batch
 * of several records passes a topic's limit (a record larger than
 * batch.size goes in a batch of its own), and a queue that holds two of
 * the largest.  With transactions, the client's transaction timeout;
 * with the Kafka store too, room for its chunks (checkpoint.chunk.bytes,
 * up to 16 MiB), which go through this producer. */
typedef struct producer_defaults {
    const char *d[24];
    char mmb[24], batch[24], kbytes[24], ttimeout[24];
} producer_defaults;

static void producer_defaults_fill(const bs_stage *s, producer_defaults *pd)
{
    static const char *const tuning[] = {"client.id", "bloomstage",
                                         BS_PRODUCER_TUNING, NULL};
    size_t n = 0;
    while (tuning[n]) {
        pd->d[n] = tuning[n];
        n++;
    }
    int64_t hi = s->out_max_bytes > s->rej_max_bytes ? s->out_max_bytes
                                                     : s->rej_max_bytes;
    int64_t lo = s->rej_max_bytes > 0 && s->rej_max_bytes < s->out_max_bytes
                     ? s->rej_max_bytes
                     : s->out_max_bytes > 0 ? s->out_max_bytes
                                            : s->rej_max_bytes;
    bool big = s->txn && s->set.checkpoint_store == BS_CONFIG_STORE_KAFKA;
    if (big && hi < 20000000)
        hi = 20000000;
    int64_t kb = big ? 4096 + 2 * (int64_t)s->set.checkpoint_chunk_bytes / 1024
                     : 0;
    if (hi > 0) {
        hi = hi < 1000 ? 1000 : hi > 1000000000 ? 1000000000 : hi;
        snprintf(pd->mmb, sizeof(pd->mmb), "%lld", (long long)hi);
        pd->d[n++] = "message.max.bytes";
        pd->d[n++] = pd->mmb;
        if (2 * hi / 1024 + 64 > kb && 2 * hi / 1024 + 64 > 4096)
            kb = 2 * hi / 1024 + 64;
    }
    if (lo > 0) {
        snprintf(pd->batch, sizeof(pd->batch), "%lld", (long long)lo);
        pd->d[n++] = "batch.size";
        pd->d[n++] = pd->batch;
    }
    if (kb > 0) {
        snprintf(pd->kbytes, sizeof(pd->kbytes), "%lld", (long long)kb);
        pd->d[n++] = "queue.buffering.max.kbytes";
        pd->d[n++] = pd->kbytes;
    }
    if (s->txn) {
        /* A transaction left open by a crashed instance holds
         * read_committed readers (and the restore of its partitions) back
         * until the broker aborts it: BS_TXN_TIMEOUT_INTERVALS checkpoint
         * intervals within BS_TXN_TIMEOUT_MIN_MS..MAX_MS, rather than
         * librdkafka's 60 s. */
        int64_t tt = BS_TXN_TIMEOUT_INTERVALS * s->set.checkpoint_interval_ms;
        tt = tt < BS_TXN_TIMEOUT_MIN_MS   ? BS_TXN_TIMEOUT_MIN_MS
             : tt > BS_TXN_TIMEOUT_MAX_MS ? BS_TXN_TIMEOUT_MAX_MS
                                          : tt;
        snprintf(pd->ttimeout, sizeof(pd->ttimeout), "%lld", (long long)tt);
        pd->d[n++] = "transaction.timeout.ms";
        pd->d[n++] = pd->ttimeout;
    }
    pd->d[n] = NULL;
}

bs_rc bs_producer_recreate(bs_stage *s, char *errstr, size_t errstr_size)
{
    static const char *const forced[] = {"enable.idempotence", "true", NULL};
    const char *tforced[] = {"enable.idempotence", "true",
                             "transactional.id", s->txn_id, NULL};
    producer_defaults pd;
    producer_defaults_fill(s, &pd);
    if (bs_txn_fenced_check(s, errstr, errstr_size) != BS_OK)
        return BS_FATAL; /* and the other instance keeps the id */
    rd_kafka_conf_t *conf = client_conf(s, "producer", pd.d,
                                        s->txn ? tforced : forced, errstr,
                                        errstr_size);
    if (!conf)
        return BS_FATAL;
    rd_kafka_conf_set_dr_msg_cb(conf, dr_msg_cb);
    char err[BS_ERRSTR_SIZE];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
    if (!rk) {
        rd_kafka_conf_destroy(conf);
        snprintf(errstr, errstr_size, "cannot create the producer: %s", err);
        return BS_FATAL;
    }
    rd_kafka_topic_t *out = rd_kafka_topic_new(rk, s->set.output_topic, NULL);
    rd_kafka_topic_t *rej =
        s->set.rejected_topic ? rd_kafka_topic_new(rk, s->set.rejected_topic, NULL)
                          : NULL;
    if (!out || (s->set.rejected_topic && !rej)) {
        snprintf(errstr, errstr_size, "cannot use the output topics: %s",
                 rd_kafka_err2str(rd_kafka_last_error()));
        if (out)
            rd_kafka_topic_destroy(out);
        if (rej)
            rd_kafka_topic_destroy(rej);
        rd_kafka_destroy(rk);
        return BS_FATAL;
    }
    if (s->producer) {
        /* A fatal producer, or one whose transaction a rollback ends:
         * what it still holds is discarded. */
        rd_kafka_purge(s->producer, RD_KAFKA_PURGE_F_QUEUE |
                                        RD_KAFKA_PURGE_F_INFLIGHT);
        rd_kafka_flush(s->producer, BS_TIMEOUT_PURGE_FLUSH_MS);
        drop_topics(s);
        rd_kafka_destroy(s->producer);
    }
    s->producer = rk;
    s->out_rkt = out;
    s->rej_rkt = rej;
    /* Transactions: the new producer fences the old one (same id) and
     * aborts what it left open, then a transaction is begun. */
    if (s->store)
        bs_store_use_producer(s->store, s->txn ? rk : NULL);
    return s->txn ? bs_txn_start(s, errstr, errstr_size) : BS_OK;
}

void bs_producers_swap(bs_stage *s)
{
    struct bs_spare *o = &s->spare;
    rd_kafka_t *rk = s->producer;
    rd_kafka_topic_t *out = s->out_rkt, *rej = s->rej_rkt;
    bool ready = s->txn_ready, open = s->txn_open;
    char id[sizeof(s->txn_id)];
    memcpy(id, s->txn_id, sizeof(id));
    s->producer = o->rk;
    s->out_rkt = o->out_rkt;
    s->rej_rkt = o->rej_rkt;
    s->txn_ready = o->txn_ready;
    s->txn_open = o->txn_open;
    memcpy(s->txn_id, o->txn_id, sizeof(id));
    o->rk = rk;
    o->out_rkt = out;
    o->rej_rkt = rej;
    o->txn_ready = ready;
    o->txn_open = open;
    memcpy(o->txn_id, id, sizeof(id));
    if (s->store)
        bs_store_use_producer(s->store, s->producer);
}

bs_rc bs_spare_recreate(bs_stage *s, char *errstr, size_t errstr_size)
{
    bs_producers_swap(s);
    bs_rc rc = bs_producer_recreate(s, errstr, errstr_size);
    bs_producers_swap(s);
    s->spare.broken = rc != BS_OK;
    return rc;
}

/* A transactional producer made for the current slot (spare false) or the
 * spare one; a refusal of the transactional id's Write (bs_txn_start said
 * it) is waited out as start-up holds refusals, with a new producer each
 * time. */
static bs_rc start_producer(bs_stage *s, bool spare, char *errstr,
                            size_t errstr_size)
{
    for (;;) {
        s->refused_err = 0;
        bs_rc rc = spare ? bs_spare_recreate(s, errstr, errstr_size)
                         : bs_producer_recreate(s, errstr, errstr_size);
        if (rc != BS_FATAL || !s->txn ||
            s->refused_err !=
                RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            return rc;
        bs_rc w = bs_startup_refusal_wait(s, errstr, errstr_size);
        if (w != BS_OK)
            return w;
    }
}

/* exactly_once.overlap: the spare producer, on the current one's id
 * followed by /2 (its init_transactions fences that id's earlier owner
 * too), and the committer's thread. */
static bs_rc start_overlap(bs_stage *s, char *errstr, size_t errstr_size)
{
    int n = snprintf(s->spare.txn_id, sizeof(s->spare.txn_id), "%s/2",
                     s->txn_id);
    if (n < 0 || (size_t)n >= sizeof(s->spare.txn_id)) {
        snprintf(errstr, errstr_size, "transactional id %s: too long for "
                 "exactly_once.overlap's second id", s->txn_id);
        return BS_FATAL;
    }
    s->committer = bs_committer_new(errstr, errstr_size);
    if (!s->committer)
        return BS_FATAL;
    return start_producer(s, true, errstr, errstr_size);
}

/* exactly_once.method: transactions when asked for, or with auto when the
 * broker accepts them (init_transactions succeeds); else the output-tail
 * replay.  Said in the log either way. */
static bs_rc choose_method(bs_stage *s, char *errstr, size_t errstr_size)
{
    bs_eos_method m = s->set.eos_method;
    s->txn = bs_exactly_once(s) && m != BS_CONFIG_EOS_REPLAY;
    if (s->txn && m == BS_CONFIG_EOS_AUTO) {
        /* librdkafka's mock cluster answers the transactional requests but
         * writes no transaction markers (read_committed readers would see
         * aborted records): auto keeps the replay there.  Its cluster id
         * says which it is. */
        char *id = rd_kafka_clusterid(s->consumer, BS_TIMEOUT_BROKER_MS);
        if (id && !strncmp(id, "mockCluster", 11)) {
            bs_log(BS_LOG_INFO, "exactly_once method", "method=replay "
                   "reason=\"librdkafka's mock cluster\"");
            s->txn = false;
        }
        rd_kafka_mem_free(s->consumer, id);
    }
    if (s->txn)
        bs_txn_id(s, NULL);
    bs_rc rc = start_producer(s, false, errstr, errstr_size);
    if (rc == BS_OK && s->txn && s->set.eos_overlap)
        rc = start_overlap(s, errstr, errstr_size);
    if (rc == BS_OK || !s->txn) {
        if (rc == BS_OK && bs_exactly_once(s) &&
            (s->txn || m == BS_CONFIG_EOS_REPLAY))
            bs_log(BS_LOG_INFO, "exactly_once method", "method=%s%s%s%s%s",
                   s->txn ? "transactions" : "replay",
                   s->txn ? " transactional_id=" : "",
                   s->txn ? s->txn_id : "",
                   s->spare.rk ? " overlap_transactional_id=" : "",
                   s->spare.rk ? s->spare.txn_id : "");
        return rc;
    }
    /* auto: the replay when the broker refused transactions; a broker
     * that did not answer stops start-up, as any broker error there. */
    if (m == BS_CONFIG_EOS_TRANSACTIONS || rc == BS_RETRY) {
        size_t l = strlen(errstr);
        snprintf(errstr + l, errstr_size - l, " (exactly_once.method=%s)",
                 m == BS_CONFIG_EOS_TRANSACTIONS ? "transactions" : "auto");
        return BS_FATAL;
    }
    char q[700];
    bs_log(BS_LOG_WARN, "exactly_once method", "method=replay reason=%s",
           bs_log_quote(errstr, q, sizeof(q)));
    s->txn = false;
    return bs_producer_recreate(s, errstr, errstr_size) == BS_OK ? BS_OK
                                                                 : BS_FATAL;
}

bs_rc bs_clients_new(bs_stage *s, bs_rebalance_fn *rebalance_cb,
                     char *errstr, size_t errstr_size)
{
    const char *group = s->set.group_id;
    static const char *const cdefaults[] = {
        "client.id", "bloomstage", "auto.offset.reset", "earliest",
        "partition.assignment.strategy", "cooperative-sticky",
        "statistics.interval.ms", "5000",
        /* A small read-ahead, kept fetching by s->fwake. */
        BS_CONSUMER_TUNING, NULL};
    /* exactly_once reads only committed records (librdkafka's default
     * too): an aborted transaction's never count as input, and the
     * committed offsets it asks for are stable ones (KIP-447). */
    const char *cforced[] = {"enable.auto.commit", "false",
                             "enable.auto.offset.store", "false",
                             "group.id", group,
                             bs_exactly_once(s) ? "isolation.level" : NULL,
                             "read_committed", NULL};
    rd_kafka_conf_t *cconf = client_conf(s, "consumer", cdefaults, cforced,
                                         errstr, errstr_size);
    if (!cconf)
        return BS_FATAL;
    rd_kafka_conf_set_rebalance_cb(cconf, rebalance_cb);
    rd_kafka_conf_set_stats_cb(cconf, bs_stats_cb);
    char err[BS_ERRSTR_SIZE];
    s->consumer = rd_kafka_new(RD_KAFKA_CONSUMER, cconf, err, sizeof(err));
    if (!s->consumer) {
        rd_kafka_conf_destroy(cconf);
        snprintf(errstr, errstr_size, "cannot create the consumer: %s", err);
        return BS_FATAL;
    }
    rd_kafka_poll_set_consumer(s->consumer);
    s->fwake = bs_fetch_wake_new(s->consumer, &s->ctr.fetch_wakes, errstr,
                                 errstr_size);
    if (!s->fwake)
        return BS_FATAL;

    bool kafka_store = s->set.checkpoint_store ==
                       BS_CONFIG_STORE_KAFKA;
    if (bs_exactly_once(s) || kafka_store) {
        /* Reads the output tail: assigned, never subscribed, commits
         * nothing. */
        rd_kafka_conf_t *tconf = bs_kafka_reader_conf(
            s->cfg, group, "bloomstage-replay", errstr, errstr_size);
        if (!tconf)
            return BS_FATAL;
        with_callbacks(s, tconf);
        s->tail = rd_kafka_new(RD_KAFKA_CONSUMER, tconf, err, sizeof(err));
        if (!s->tail) {
            rd_kafka_conf_destroy(tconf);
            snprintf(errstr, errstr_size, "cannot create the replay "
                     "consumer: %s", err);
            return BS_FATAL;
        }
        rd_kafka_poll_set_consumer(s->tail);
    }

    /* The checkpoint store, checked by bs_clients_start. */
    rd_kafka_conf_t *sconf = NULL;
    if (kafka_store) {
        static const char *const sdefaults[] = {
            "client.id", "bloomstage-checkpoints", "linger.ms", "1",
            "message.max.bytes", "20000000", NULL};
        static const char *const sforced[] = {
            "enable.idempotence", "true", "acks", "all",
            "allow.auto.create.topics", "false", NULL};
        sconf = client_conf(s, "producer", sdefaults, sforced, errstr,
                            errstr_size);
        if (!sconf)
            return BS_FATAL;
    }
    s->store = bs_store_new(&s->set, s->tail, sconf, errstr, errstr_size);
    return s->store ? BS_OK : BS_FATAL;
}

/* Serves the callbacks of the clients the loop polls (their errors come
 * to error_cb only then); a consumer error returned before the
 * subscription is shown by /ready. */
static void serve(bs_stage *s)
{
    rd_kafka_message_t *m;
    while ((m = rd_kafka_consumer_poll(s->consumer, 0)) != NULL) {
        if (m->err &&
            !bs_consumer_refused(s, m->err,
                                 m->rkt ? rd_kafka_topic_name(m->rkt) : NULL,
                                 rd_kafka_message_errstr(m))) {
            bs_log_kafka_error(s, rd_kafka_name(s->consumer), m->err,
                               rd_kafka_message_errstr(m));
            bs_startup_kafka_error(s, m->err, rd_kafka_message_errstr(m));
        }
        rd_kafka_message_destroy(m);
    }
    if (s->producer)
        rd_kafka_poll(s->producer, 0);
}

bs_rc bs_clients_probe(bs_stage *s, int timeout_ms)
{
    serve(s);
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t err =
        rd_kafka_metadata(s->consumer, 0, NULL, &md, timeout_ms);
    if (md)
        rd_kafka_metadata_destroy(md);
    serve(s);
    return err ? BS_RETRY : BS_OK;
}

/* A topic the stage produces to: its max.message.bytes as the brokers
 * say, logged; 0 when unknown (a broker that does not answer
 * DescribeConfigs, as librdkafka's mock; a refusal: no DescribeConfigs
 * ACL; a topic missing, which the topics' check says next): then
 * librdkafka's message.max.bytes alone decides what is too large. */
static int64_t topic_max_bytes(bs_stage *s, const char *key,
                               const char *topic)
{
    char why[BS_ERRSTR_SIZE] = "", v[64] = "", q[600];
    int32_t leader = -1;
    int refused = 0;
    if (bs_topic_lookup(s->consumer, topic, BS_TIMEOUT_BROKER_MS, &leader,
                        why, sizeof(why)) <= 0)
        return 0;
    int rc = bs_topic_config(s->consumer, topic, leader, "max.message.bytes",
                             v, sizeof(v), BS_TIMEOUT_BROKER_MS, &refused,
                             why, sizeof(why));
    char *end = NULL;
    long long n = rc == 1 ? strtoll(v, &end, 10) : 0;
    if (rc == 1 && end && end != v && !*end && n > 0) {
        bs_log(BS_LOG_INFO, "topic size limit", "key=%s topic=%s "
               "max_message_bytes=%lld", key, topic, n);
        return n;
    }
    if (rc == 1)
        snprintf(why, sizeof(why), "max.message.bytes=%s", v);
    bs_log(rc == 2 ? BS_LOG_INFO : BS_LOG_WARN, "topic size limit unknown: "
           "the producer's message.max.bytes decides", "key=%s topic=%s "
           "reason=%s", key, topic,
           bs_log_quote(rc == 2 ? "the broker does not answer "
                                  "DescribeConfigs" : why, q, sizeof(q)));
    return 0;
}

bs_rc bs_clients_start(bs_stage *s, char *errstr, size_t errstr_size)
{
    int rc;
    /* The checkpoint topic's Read refused: tried again, as start-up holds
     * refusals. */
    while ((rc = bs_store_check(s->store, errstr, errstr_size)) ==
           BS_STORE_REFUSED) {
        (void)bs_refused(s, RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED,
                         "Read", s->set.checkpoint_topic, errstr);
        bs_rc w = bs_startup_refusal_wait(s, errstr, errstr_size);
        if (w != BS_OK)
            return w;
    }
    if (rc != 0)
        return BS_FATAL;
    /* The producer is sized to the topics it writes (producer_defaults). */
    s->out_max_bytes = topic_max_bytes(s, "output.topic", s->set.output_topic);
    if (s->set.rejected_topic)
        s->rej_max_bytes = topic_max_bytes(s, "rejected.topic",
                                           s->set.rejected_topic);
    return choose_method(s, errstr, errstr_size);
}

/* librdkafka 2.0.2's cooperative-sticky assignor keeps a state that its
 * group's first SyncGroup answer creates, and rd_kafka_destroy asserts it
 * exists once a JoinGroup has been answered (rdkafka_sticky_assignor.c:
 * "Assertion 'assignor_state' failed", SIGABRT; librdkafka #4312, fixed
 * in 2.3.0).  A consumer stopped while it joins may be between the two:
 * its group has a rebalance protocol (the JoinGroup's answer chose the
 * assignor) and no rebalance came yet.  Such a consumer is polled until
 * its first rebalance comes (the stage, stopping, declines what it is
 * given), for at most BS_TIMEOUT_FIRST_REBALANCE_MS and not when the
 * stage is FATAL (nothing more is taken then); one still in the window is
 * closed but not destroyed: the process ends with it
 * (abandoned_consumer). */
static bool in_join_window(bs_stage *s)
{
    if (!s->subscribed || s->rebalanced)
        return false;
    const char *proto = rd_kafka_rebalance_protocol(s->consumer);
    return !proto || strcmp(proto, "NONE") != 0;
}

static void await_first_rebalance(bs_stage *s)
{
    if (s->state == BS_STAGE_FATAL || !in_join_window(s))
        return;
    double until = bs_now() + BS_TIMEOUT_FIRST_REBALANCE_MS / 1000.0;
    while (!s->rebalanced && bs_now() < until) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(s->consumer, 100);
        if (m) /* nothing assigned is kept: nothing to process */
            rd_kafka_message_destroy(m);
    }
}

/* Where an abandoned consumer stays reachable until the process ends (so
 * a leak checker does not call it lost). */
static rd_kafka_t *abandoned_consumer;

void bs_consumer_close(bs_stage *s)
{
    bs_fetch_wake_destroy(s->fwake); /* it uses the consumer */
    s->fwake = NULL;
    if (s->consumer_closed)
        return;
    await_first_rebalance(s);
    s->consumer_closed = true;
    rd_kafka_consumer_close(s->consumer);
}

void bs_clients_destroy(bs_stage *s)
{
    /* A commit still running ends before its producer does. */
    bs_committer_destroy(s->committer);
    s->committer = NULL;
    bs_fetch_wake_destroy(s->fwake);
    s->fwake = NULL;
    if (s->consumer && !s->consumer_closed && in_join_window(s))
        bs_consumer_close(s);
    if (s->consumer && in_join_window(s)) {
        bs_log(BS_LOG_WARN, "stopping while joining the group: the "
               "consumer is closed but not destroyed (librdkafka 2.0.2's "
               "cooperative-sticky assignor would abort)", NULL);
        abandoned_consumer = s->consumer; /* see in_join_window */
    } else if (s->consumer) {
        rd_kafka_destroy(s->consumer);
    }
    bs_store_destroy(s->store);
    if (s->tail) {
        rd_kafka_consumer_close(s->tail);
        rd_kafka_destroy(s->tail);
    }
    drop_topics(s);
    if (s->producer)
        rd_kafka_destroy(s->producer);
    if (s->spare.out_rkt)
        rd_kafka_topic_destroy(s->spare.out_rkt);
    if (s->spare.rej_rkt)
        rd_kafka_topic_destroy(s->spare.rej_rkt);
    if (s->spare.rk)
        rd_kafka_destroy(s->spare.rk);
    s->spare.rk = NULL;
    s->spare.out_rkt = s->spare.rej_rkt = NULL;
    bs_txn_slot_release(&s->txn_slot); /* after the producer using it */
    s->consumer = s->tail = s->producer = NULL;
    s->store = NULL;
}

/* For the clients other engine files make (blocklist_feed.c). */
rd_kafka_conf_t *bs_client_conf(bs_stage *s, const char *role,
                                const char *const *defaults,
                                const char *const *forced, char *errstr,
                                size_t errstr_size)
{
    return client_conf(s, role, defaults, forced, errstr, errstr_size);
}
