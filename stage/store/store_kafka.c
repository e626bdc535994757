/*
 * store_kafka.c -- the Kafka store behind bs_store (store.c) for
 * checkpoint.store=kafka; store.h says what it keeps and why, store_ops.h
 * what every store promises.  It owns the records it writes to
 * checkpoint.topic (the chunks, the manifests, the tombstones), the
 * producer they go through unless the stage lends its transactional one,
 * and what it knows of each partition's chain; the reader it restores with
 * is the caller's.
 *
 * A put produces a state's chunks and remembers it as pending; sync
 * flushes, learns chunk 0's offset from its delivery report, writes each
 * manifest and flushes again, then sends tombstones for chains a new
 * snapshot replaced.  The reads of a restore (get, get_many) are
 * store_kafka_read.c's, with the keys and the known chains both halves
 * share.
 */
#include "store/store_kafka.h"
#include "store/store_kafka_read.h"
#include "base/timeouts.h"
#include "base/log.h"
#include "kafka/kafka_util.h"
#include "base/util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

/* A state produced in chunks and waiting for its manifest. */
struct bs_kafkastore_pending {
    uintptr_t ticket; /* its chunk 0's message opaque (kafka_dr) */
    char topic[250];
    int32_t partition;
    bs_store_manifest rec; /* rec.first from chunk 0's delivery report */
    bool delta;            /* chains onto the known tip, base_id */
    uint64_t id, base_id;
    int64_t input_offset;
};
typedef bs_kafkastore_pending pending;
typedef bs_kafkastore_known known;

/* -- delivery reports ----------------------------------------------------- */

/* Message opaque: NULL nothing to note; UINTPTR_MAX a tombstone (its
 * failure is harmless: compaction or the next tombstone removes the chunk);
 * anything else the ticket of the pending checkpoint whose chunk 0 it is.
 * Tickets are never reused, so the report of a chunk whose put failed
 * half-way (its pending entry dropped, the slot reused) finds no entry
 * instead of another partition's. */
#define OPQ_TOMBSTONE ((void *)UINTPTR_MAX)

static uintptr_t new_ticket(bs_kafkastore *ks)
{
    if (ks->next_ticket == 0 || ks->next_ticket == UINTPTR_MAX)
        ks->next_ticket = 1; /* (wraps only on a 32-bit build, after 4G) */
    return ks->next_ticket++;
}

/* The pending entry with that ticket (pend is in ticket order), or NULL. */
static pending *pending_by_ticket(bs_kafkastore *ks, uintptr_t ticket)
{
    size_t lo = 0, hi = ks->npend;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ks->pend[mid].ticket < ticket)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < ks->npend && ks->pend[lo].ticket == ticket ? &ks->pend[lo]
                                                           : NULL;
}

static void kafka_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *op)
{
    (void)rk;
    bs_kafkastore *ks = op;
    if (m->err) {
        if (m->_private == OPQ_TOMBSTONE)
            return;
        char what[300];
        if (ks->dr_failed++ == 0 &&
            (ks->dr_refused = bs_refusal_text(m->err, "Write", ks->topic,
                                              what, sizeof(what))))
            snprintf(ks->dr_error, sizeof(ks->dr_error), "%s refused (%s)",
                     what, rd_kafka_err2name(m->err));
        else if (ks->dr_failed == 1)
            snprintf(ks->dr_error, sizeof(ks->dr_error), "%s",
                     rd_kafka_err2str(m->err));
        return;
    }
    if (m->_private && m->_private != OPQ_TOMBSTONE) {
        pending *p = pending_by_ticket(ks, (uintptr_t)m->_private);
        if (p)
            p->rec.first = m->offset;
    }
}

/* Produces and waits: 0; -1 with errstr if any delivery (but
 * tombstones) failed, BS_STORE_REFUSED if the first that did was refused
 * by the brokers' authorizer (no Write ACL). */
static int kafka_flush(bs_kafkastore *ks, char *errstr, size_t errstr_size)
{
    double t0 = bs_now();
    while (rd_kafka_flush(ks->producer, BS_FLUSH_STEP_MS) !=
           RD_KAFKA_RESP_ERR_NO_ERROR)
        if (bs_now() - t0 > BS_STORE_FLUSH_LOG_S)
            bs_log(BS_LOG_INFO, "waiting for checkpoint deliveries",
                   "in_flight=%d", rd_kafka_outq_len(ks->producer));
    if (ks->dr_failed) {
        snprintf(errstr, errstr_size, "checkpoint topic %s: %llu records "
                 "not delivered: %s", ks->topic,
                 (unsigned long long)ks->dr_failed, ks->dr_error);
        bool refused = ks->dr_refused;
        ks->dr_failed = 0;
        ks->dr_refused = false;
        return refused ? BS_STORE_REFUSED : -1;
    }
    return 0;
}

static int produce_rec(bs_kafkastore *ks, int32_t part, const char *key,
                       const void *val, size_t len, void *opaque,
                       char *errstr, size_t errstr_size)
{
    for (;;) {
        rd_kafka_resp_err_t err = rd_kafka_producev(
            ks->producer, RD_KAFKA_V_TOPIC(ks->topic),
            RD_KAFKA_V_PARTITION(part), RD_KAFKA_V_KEY(key, strlen(key)),
            RD_KAFKA_V_VALUE((void *)val, len),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_OPAQUE(opaque), RD_KAFKA_V_END);
        if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            rd_kafka_poll(ks->producer, BS_QUEUE_FULL_POLL_MS);
            continue;
        }
        if (err) {
            snprintf(errstr, errstr_size, "checkpoint topic %s: %s",
                     ks->topic, rd_kafka_err2str(err));
            return -1;
        }
        return 0;
    }
}

/* -- put and sync -------------------------------------------------------- */

/* The longest chain the Kafka store writes, whatever checkpoint.delta.max
 * says: a manifest names every state in ~120 bytes of JSON, and must stay
 * under the broker's message.max.bytes (1 MiB by default). */
#define KAFKA_MAX_CHAIN 1000u

/* Whether this put may be a delta on the partition's known chain: its
 * newest state is committed and the filter's changes are tracked from it,
 * and the chain stays within checkpoint.delta.max and .ratio. */
static bool chain_onto(const bs_kafkastore *ks, const known *k,
                       const bs_ckpt_meta *m, const bf_filter *filter)
{
    uint64_t mark;
    if (!k || k->n == 0 || !k->tip_chainable || !k->committed ||
        ks->max_chain == 0 || !bf_filter_tracked(filter, &mark) ||
        mark != k->tip_id || k->n - 1 >= ks->max_chain ||
        k->n - 1 >= KAFKA_MAX_CHAIN)
        return false;
    uint64_t bytes = bs_ckpt_size(m, filter, true);
    for (size_t i = 1; i < k->n; i++)
        bytes += k->chain[i].size;
    return (double)bytes <= ks->max_ratio * (double)k->chain[0].size;
}

static int kafka_put(void *impl, const char *topic, int32_t part,
                     int64_t next_offset, const bs_ckpt_wm *wm, uint32_t nwm,
                     bf_filter *filter, const bf_audit *audit, char *errstr,
                     size_t errstr_size)
{
    bs_kafkastore *ks = impl;
    pending *np = bs_grow(ks->pend, &ks->cappend, ks->npend + 1, sizeof(*np),
                          16);
    if (!np) {
        snprintf(errstr, errstr_size, "out of memory");
        return -1;
    }
    ks->pend = np;
    known *k = bs_kafkastore_known_find(ks, topic, part, false);
    const bs_store_manifest *tip = k && k->n ? &k->chain[k->n - 1] : NULL;
    bs_ckpt_meta m = {topic, part, next_offset, wm, nwm,
                      (uint64_t)(tip ? tip->seq + 1 : 1), bs_ckpt_new_id(),
                      k ? k->tip_id : 0, audit};
    bool delta = chain_onto(ks, k, &m, filter);
    uint8_t *buf;
    size_t len;
    if (bs_ckpt_encode_record(&m, filter, delta, &buf, &len, errstr,
                              errstr_size) != 0)
        return -1;
    ks->last_bytes = len;
    ks->last_delta = delta;
    pending *p = &ks->pend[ks->npend];
    memset(p, 0, sizeof(*p));
    /* Tickets grow, and only the last entry is ever dropped (below): pend
     * stays in ticket order.  A wrap (32-bit only) would break the order
     * only across 4G puts, with the round long gone. */
    p->ticket = new_ticket(ks);
    snprintf(p->topic, sizeof(p->topic), "%s", topic);
    p->partition = part;
    p->rec.seq = (int64_t)m.seq;
    p->rec.nchunks = (uint32_t)((len + ks->chunk - 1) / ks->chunk);
    p->rec.chunk_bytes = ks->chunk;
    p->rec.size = len;
    p->rec.xxh3 = XXH3_64bits(buf, len);
    p->rec.first = -1;
    p->delta = delta;
    p->id = m.id;
    p->base_id = m.prev_id;
    p->input_offset = next_offset;
    ks->npend++;
    int32_t cp = bs_kafkastore_partition(ks, topic, part);
    int rc = 0;
    for (uint32_t i = 0; i < p->rec.nchunks && rc == 0; i++) {
        char key[600];
        bs_kafkastore_chunk_key(ks, topic, part, p->rec.seq, i, key, sizeof(key));
        size_t off = (size_t)i * ks->chunk;
        size_t n = len - off < ks->chunk ? len - off : ks->chunk;
        rc = produce_rec(ks, cp, key, buf + off, n,
                         i == 0 ? (void *)p->ticket : NULL,
                         errstr, errstr_size);
    }
    free(buf);
    if (rc != 0) {
        ks->npend--; /* its chunks never get a manifest; a late report of
                      * its chunk 0 finds no ticket (kafka_dr) */
        return rc;
    }
    /* Changes count from this state on; if its manifest is never written,
     * the known tip is another id and the next checkpoint a snapshot. */
    bs_ckpt_track_from(filter, m.id);
    return 0;
}

static int kafka_sync(void *impl, char *errstr, size_t errstr_size)
{
    bs_kafkastore *ks = impl;
    int rc = -1;
    if (ks->npend == 0)
        return 0;
    /* 1. every chunk acknowledged */
    int fr = kafka_flush(ks, errstr, errstr_size);
    if (fr != 0) {
        rc = fr;
        goto out;
    }
    /* 2. the manifests, which make the states valid: a delta's names the
     * known chain and the delta, a snapshot's the snapshot alone */
    for (size_t i = 0; i < ks->npend; i++) {
        pending *p = &ks->pend[i];
        if (p->rec.first < 0) {
            snprintf(errstr, errstr_size, "checkpoint of %s [%d]: no offset "
                     "for its first chunk", p->topic, (int)p->partition);
            goto out;
        }
        known *k = bs_kafkastore_known_find(ks, p->topic, p->partition, true);
        if (!k || !bs_kafkastore_known_reserve(k, k->n + 1)) {
            snprintf(errstr, errstr_size, "out of memory");
            goto out;
        }
        if (p->delta && (k->n == 0 || k->tip_id != p->base_id ||
                         k->chain[k->n - 1].seq + 1 != p->rec.seq)) {
            snprintf(errstr, errstr_size, "checkpoint of %s [%d]: the chain "
                     "changed under its delta (seq %lld)", p->topic,
                     (int)p->partition, (long long)p->rec.seq);
            goto out;
        }
        char key[600];
        bs_kafkastore_manifest_key(ks, p->topic, p->partition, key, sizeof(key));
        k->chain[k->n] = p->rec; /* room reserved; counted below */
        char *val = p->delta
                        ? bs_store_manifest_json(k->chain, k->n + 1,
                                                 p->input_offset)
                        : bs_store_manifest_json(&p->rec, 1, p->input_offset);
        int r = val ? produce_rec(ks, bs_kafkastore_partition(ks, p->topic,
                                                     p->partition),
                                  key, val, strlen(val), NULL, errstr,
                                  errstr_size)
                    : -1;
        if (!val)
            snprintf(errstr, errstr_size, "out of memory");
        free(val);
        if (r != 0)
            goto out;
    }
    if ((fr = kafka_flush(ks, errstr, errstr_size)) != 0) {
        rc = fr;
        goto out;
    }
    /* 3. the known chains move on; a new snapshot's old chain is garbage */
    for (size_t i = 0; i < ks->npend; i++) {
        pending *p = &ks->pend[i];
        known *k = bs_kafkastore_known_find(ks, p->topic, p->partition, true);
        if (!k)
            continue;
        if (!p->delta) {
            int32_t cp = bs_kafkastore_partition(ks, p->topic, p->partition);
            for (size_t s = 0; s < k->n; s++)
                for (uint32_t c = 0; c < k->chain[s].nchunks; c++) {
                    char key[600];
                    bs_kafkastore_chunk_key(ks, p->topic, p->partition, k->chain[s].seq, c,
                              key, sizeof(key));
                    char ignored[64];
                    (void)produce_rec(ks, cp, key, NULL, 0, OPQ_TOMBSTONE,
                                      ignored, sizeof(ignored));
                }
            k->n = 0;
        }
        k->chain[k->n++] = p->rec; /* room reserved in step 2 */
        k->tip_id = p->id;
        k->tip_chainable = true;
        k->tip_input = p->input_offset;
        k->committed = false;
    }
    rd_kafka_poll(ks->producer, 0);
    rc = 0;
out:
    ks->npend = 0;
    return rc;
}

/* Whether the store may read its topic: a fetch at the end of partition
 * 0, which answers at once (PARTITION_EOF) when it may.  BS_STORE_REFUSED
 * with errstr when the brokers refuse it; 0 otherwise, a broker that does
 * not answer included (a restore says that). */
static int read_probe(bs_kafkastore *ks, char *errstr, size_t errstr_size)
{
    rd_kafka_topic_partition_list_t *a = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(a, ks->topic, 0)->offset =
        RD_KAFKA_OFFSET_END;
    rd_kafka_resp_err_t err = rd_kafka_assign(ks->reader, a);
    rd_kafka_topic_partition_list_destroy(a);
    int rc = 0;
    for (double deadline = bs_now() + BS_TIMEOUT_BROKER_MS / 1000.0;
         !err && bs_now() < deadline;) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(ks->reader,
                                                       BS_POLL_MS);
        if (!m)
            continue;
        rd_kafka_resp_err_t e = m->err;
        rd_kafka_message_destroy(m);
        /* (The reader's group.id is never joined: the brokers refusing
         * its FindCoordinator, GROUP_AUTHORIZATION_FAILED, stops
         * nothing.) */
        char what[300];
        if (e == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED &&
            bs_refusal_text(e, "Read", ks->topic, what, sizeof(what))) {
            snprintf(errstr, errstr_size, "checkpoint topic %s: %s refused "
                     "(%s)", ks->topic, what, rd_kafka_err2name(e));
            rc = BS_STORE_REFUSED;
        }
        if (rc || e == RD_KAFKA_RESP_ERR__PARTITION_EOF || !e)
            break;
    }
    rd_kafka_assign(ks->reader, NULL);
    return rc;
}

int bs_kafkastore_read_check(bs_kafkastore *ks, char *errstr,
                             size_t errstr_size)
{
    return read_probe(ks, errstr, errstr_size);
}

/* The topic must exist, compacted; if it does not, it is created so with
 * the admin API (never auto-created: a broker's auto-creation would make
 * it a deleting topic, and old checkpoints would vanish). */
static int kafka_check(void *impl, char *errstr, size_t errstr_size)
{
    bs_kafkastore *ks = impl;
    ks->nparts = bs_topic_partitions(ks->producer, ks->topic,
                                     BS_TIMEOUT_STORE_ADMIN_MS, NULL, NULL,
                                     0);
    if (ks->nparts <= 0) {
        rd_kafka_NewTopic_t *nt =
            rd_kafka_NewTopic_new(ks->topic, -1, -1, NULL, 0);
        rd_kafka_queue_t *q = rd_kafka_queue_new(ks->producer);
        rd_kafka_AdminOptions_t *o =
            rd_kafka_AdminOptions_new(ks->producer, RD_KAFKA_ADMIN_OP_ANY);
        rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR__TIMED_OUT;
        if (nt && q && o) {
            rd_kafka_NewTopic_set_config(nt, "cleanup.policy", "compact");
            rd_kafka_AdminOptions_set_request_timeout(
                o, BS_TIMEOUT_STORE_ADMIN_MS, NULL, 0);
            rd_kafka_CreateTopics(ks->producer, &nt, 1, o, q);
            /* The request's own timeout, and a little for the reply. */
            rd_kafka_event_t *ev =
                rd_kafka_queue_poll(q, BS_TIMEOUT_STORE_ADMIN_MS +
                                           BS_REPLY_GRACE_MS);
            if (ev) {
                const rd_kafka_CreateTopics_result_t *res =
                    rd_kafka_event_CreateTopics_result(ev);
                size_t n = 0;
                const rd_kafka_topic_result_t **tr =
                    res ? rd_kafka_CreateTopics_result_topics(res, &n) : NULL;
                e = n ? rd_kafka_topic_result_error(tr[0])
                      : rd_kafka_event_error(ev);
                rd_kafka_event_destroy(ev);
            }
        }
        if (o)
            rd_kafka_AdminOptions_destroy(o);
        if (q)
            rd_kafka_queue_destroy(q);
        if (nt)
            rd_kafka_NewTopic_destroy(nt);
        if (!e)
            bs_log(BS_LOG_INFO, "checkpoint topic created", "topic=%s "
                   "cleanup.policy=compact", ks->topic);
        /* A topic created (here, or by another instance at once) is in
         * the metadata once its partitions have leaders; after another
         * error it is looked for a tenth as long (a request that timed
         * out may still have created it). */
        int attempts = !e || e == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS
                           ? BS_TOPIC_CREATED_ATTEMPTS
                           : BS_TOPIC_CREATED_ATTEMPTS / 10;
        for (int attempt = 0; attempt < attempts && ks->nparts <= 0;
             attempt++) {
            ks->nparts = bs_topic_partitions(ks->producer, ks->topic,
                                     BS_TIMEOUT_STORE_ADMIN_MS, NULL, NULL,
                                     0);
            if (ks->nparts <= 0)
                usleep(BS_TOPIC_CREATED_RETRY_MS * 1000u);
        }
        if (ks->nparts <= 0 && !e) {
            snprintf(errstr, errstr_size, "checkpoint topic %s was created "
                     "but has no partitions with a leader after %d s",
                     ks->topic, BS_TOPIC_CREATED_ATTEMPTS *
                                    BS_TOPIC_CREATED_RETRY_MS / 1000);
            return -1;
        }
        if (ks->nparts <= 0) {
            snprintf(errstr, errstr_size, "checkpoint topic %s does not exist"
                     " and could not be created (%s): create it with "
                     "cleanup.policy=compact", ks->topic,
                     rd_kafka_err2str(e));
            return -1;
        }
    }
    snprintf(ks->desc, sizeof(ks->desc), "kafka topic:%s partitions:%d",
             ks->topic, ks->nparts);
    return read_probe(ks, errstr, errstr_size);
}

bs_kafkastore *bs_kafkastore_new(const bs_settings *set, rd_kafka_t *reader,
                                 rd_kafka_conf_t *producer_conf, char *errstr,
                                 size_t errstr_size)
{
    bs_kafkastore *ks = calloc(1, sizeof(*ks));
    if (!ks) {
        rd_kafka_conf_destroy(producer_conf);
        snprintf(errstr, errstr_size, "out of memory");
        return NULL;
    }
    ks->group = set->group_id;
    ks->topic = set->checkpoint_topic;
    ks->chunk = (size_t)set->checkpoint_chunk_bytes;
    ks->max_chain = (uint32_t)set->checkpoint_delta_max;
    ks->max_ratio = set->checkpoint_delta_ratio;
    ks->reader = reader;
    snprintf(ks->desc, sizeof(ks->desc), "kafka topic:%s", ks->topic);
    /* This client's opaque is the store: the stage's callbacks, which
     * take the stage as theirs, are replaced (without an error callback
     * librdkafka logs its errors, through bs_log_rdkafka). */
    rd_kafka_conf_set_opaque(producer_conf, ks);
    rd_kafka_conf_set_dr_msg_cb(producer_conf, kafka_dr);
    rd_kafka_conf_set_log_cb(producer_conf, bs_log_rdkafka);
    rd_kafka_conf_set_error_cb(producer_conf, NULL);
    char err[BS_ERRSTR_SIZE];
    ks->producer = ks->own = rd_kafka_new(RD_KAFKA_PRODUCER, producer_conf,
                                          err, sizeof(err));
    if (!ks->producer) {
        rd_kafka_conf_destroy(producer_conf);
        snprintf(errstr, errstr_size, "checkpoint store producer: %s", err);
        free(ks);
        return NULL;
    }
    return ks;
}

bs_kafkastore *bs_kafkastore_open_read(const bs_settings *set,
                                       rd_kafka_t *reader, char *errstr,
                                       size_t errstr_size)
{
    bs_kafkastore *ks = calloc(1, sizeof(*ks));
    if (!ks) {
        snprintf(errstr, errstr_size, "out of memory");
        return NULL;
    }
    ks->group = set->group_id;
    ks->topic = set->checkpoint_topic;
    ks->reader = reader;
    char why[BS_ERRSTR_SIZE] = "";
    ks->nparts = bs_topic_lookup(reader, ks->topic, BS_TIMEOUT_STORE_ADMIN_MS,
                                 NULL, why, sizeof(why));
    if (ks->nparts <= 0) {
        snprintf(errstr, errstr_size, "checkpoint topic %s: %s", ks->topic,
                 why[0] ? why : "no partitions");
        free(ks);
        return NULL;
    }
    snprintf(ks->desc, sizeof(ks->desc), "kafka topic:%s partitions:%d",
             ks->topic, ks->nparts);
    return ks;
}

/* bs_kafkastore_list's reading: the group's key prefix, what it found. */
typedef struct lister {
    char prefix[300];
    size_t plen;
    bs_store_part *parts;
    size_t n, cap;
    bool oom;
} lister;

/* A record: if its key is a manifest's of the group ("bs1/GROUP/TOPIC/
 * PARTITION"; a chunk's has two more parts), its partition is added, or
 * removed by a tombstone. */
static int on_listed(const rd_kafka_message_t *m, void *op)
{
    lister *l = op;
    const char *k = m->key;
    if (!k || m->key_len <= l->plen || memcmp(k, l->prefix, l->plen))
        return 0;
    char rest[300], *end;
    size_t rlen = m->key_len - l->plen;
    if (rlen >= sizeof(rest))
        return 0;
    memcpy(rest, k + l->plen, rlen);
    rest[rlen] = '\0';
    char *slash = strchr(rest, '/');
    if (!slash || strchr(slash + 1, '/') || slash - rest >= 250)
        return 0;
    *slash = '\0';
    long p = strtol(slash + 1, &end, 10);
    if (*end || end == slash + 1 || p < 0 || p > INT32_MAX)
        return 0;
    size_t i = 0;
    while (i < l->n && !(l->parts[i].partition == (int32_t)p &&
                         !strcmp(l->parts[i].topic, rest)))
        i++;
    if (!m->payload) { /* deleted */
        if (i < l->n)
            l->parts[i] = l->parts[--l->n];
        return 0;
    }
    if (i < l->n)
        return 0;
    bs_store_part *np = bs_grow(l->parts, &l->cap, l->n + 1, sizeof(*np), 16);
    if (!np) {
        l->oom = true;
        return 1;
    }
    l->parts = np;
    memcpy(l->parts[l->n].topic, rest, (size_t)(slash - rest) + 1);
    l->parts[l->n++].partition = (int32_t)p;
    return 0;
}

static int cmp_part(const void *a, const void *b)
{
    const bs_store_part *x = a, *y = b;
    int c = strcmp(x->topic, y->topic);
    return c ? c : (x->partition > y->partition) - (x->partition < y->partition);
}

int bs_kafkastore_list(bs_kafkastore *ks, bs_store_part **parts, size_t *n,
                       char *errstr, size_t errstr_size)
{
    lister l = {.plen = 0};
    l.plen = (size_t)snprintf(l.prefix, sizeof(l.prefix), BS_KAFKASTORE_KEY_PREFIX "/%s/",
                              ks->group);
    int rc = l.plen < sizeof(l.prefix) ? 0 : -1;
    if (rc)
        snprintf(errstr, errstr_size, "consumer.group.id too long");
    for (int32_t cp = 0; rc == 0 && cp < ks->nparts; cp++) {
        bs_kafkastore_range r = {.cp = cp, .fn = on_listed, .op = &l};
        rc = bs_kafkastore_bounds(ks, cp, true, &r.from, &r.to, errstr,
                                  errstr_size);
        if (rc == 0)
            rc = bs_kafkastore_read_ranges(ks, &r, 1, errstr, errstr_size);
        if (rc == 0 && l.oom) {
            snprintf(errstr, errstr_size, "out of memory");
            rc = -1;
        }
    }
    if (rc) {
        free(l.parts);
        return -1;
    }
    if (l.n > 1)
        qsort(l.parts, l.n, sizeof(*l.parts), cmp_part);
    *parts = l.parts;
    *n = l.n;
    return 0;
}

static void kafka_destroy(void *impl)
{
    bs_kafkastore *ks = impl;
    if (!ks)
        return;
    if (ks->own) {
        rd_kafka_flush(ks->own, BS_TIMEOUT_STORE_ADMIN_MS);
        rd_kafka_destroy(ks->own);
    }
    free(ks->pend);
    for (size_t i = 0; i < ks->nknown; i++)
        free(ks->known[i].chain);
    free(ks->known);
    free(ks);
}

static int kafka_committed(void *impl, const char *topic, int32_t partition,
                           int64_t next_offset, char *errstr,
                           size_t errstr_size)
{
    (void)errstr;
    (void)errstr_size;
    bs_kafkastore *ks = impl;
    /* One chain per partition, and compaction drops what its manifests no
     * longer name: a commit only lets the next checkpoint chain onto the
     * state it covers. */
    known *k = bs_kafkastore_known_find(ks, topic, partition, false);
    if (k && k->n && k->tip_input <= next_offset)
        k->committed = true;
    return 0;
}

static uint64_t kafka_last_bytes(const void *impl, bool *delta)
{
    const bs_kafkastore *ks = impl;
    if (delta)
        *delta = ks->last_delta;
    return ks->last_bytes;
}

static const char *kafka_describe(const void *impl)
{
    return ((const bs_kafkastore *)impl)->desc;
}

static void kafka_use_producer(void *impl, rd_kafka_t *producer)
{
    bs_kafkastore *ks = impl;
    ks->producer = producer ? producer : ks->own;
}

static bool kafka_delivery(void *impl, const rd_kafka_message_t *m)
{
    bs_kafkastore *ks = impl;
    if (ks->producer == ks->own ||
        strcmp(rd_kafka_topic_name(m->rkt), ks->topic) != 0)
        return false;
    kafka_dr(ks->producer, m, ks);
    return true;
}

const bs_store_ops bs_kafkastore_ops = {
    .check = kafka_check, .put = kafka_put, .sync = kafka_sync,
    .get = bs_kafkastore_get, .get_many = bs_kafkastore_get_many, .committed = kafka_committed,
    .last_bytes = kafka_last_bytes, .describe = kafka_describe,
    .use_producer = kafka_use_producer, .delivery = kafka_delivery,
    .destroy = kafka_destroy};
