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
 * snapshot replaced.  A get finds the newest manifest backwards from the
 * partition's end, then reads once from the snapshot's chunk 0 and gathers
 * every state the manifest names (bs_store_chain_*).
 */
#include "store_kafka.h"
#include "store_kafka_records.h"
#include "timeouts.h"
#include "log.h"
#include "kafka_util.h"
#include "util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#define KEY_PREFIX "bs1"

/* A state produced in chunks and waiting for its manifest. */
typedef struct pending {
    uintptr_t ticket; /* its chunk 0's message opaque (kafka_dr) */
    char topic[250];
    int32_t partition;
    bs_store_manifest rec; /* rec.first from chunk 0's delivery report */
    bool delta;            /* chains onto the known tip, base_id */
    uint64_t id, base_id;
    int64_t input_offset;
} pending;

/* The newest manifest this instance knows of, per partition: the chain it
 * names (for the next manifest, the next seq and the tombstones), the
 * newest state's id (a delta's base) and whether its offsets are
 * committed. */
typedef struct known {
    char topic[250];
    int32_t partition;
    bs_store_manifest *chain; /* [0] the snapshot */
    size_t n, cap;
    uint64_t tip_id;
    bool tip_chainable; /* the tip's record seq is its key's (not a v1
                         * manifest's) and its id is known */
    int64_t tip_input;  /* the tip's next input offset */
    bool committed;     /* bs_store_committed reached tip_input */
} known;

struct bs_kafkastore {
    char desc[300];
    const char *group;
    const char *topic;
    size_t chunk;
    uint32_t max_chain; /* checkpoint.delta.max */
    double max_ratio;   /* checkpoint.delta.ratio */
    int nparts;
    rd_kafka_t *producer; /* the one records go through: own, or lent */
    rd_kafka_t *own;      /* the store's own (bs_kafkastore_new) */
    rd_kafka_t *reader;
    pending *pend; /* in ticket order */
    size_t npend, cappend;
    uintptr_t next_ticket;
    known *known;
    size_t nknown, capknown;
    uint64_t dr_failed;
    char dr_error[512];
    bool dr_refused; /* the first of them refused by the authorizer */
    uint64_t last_bytes;
    bool last_delta;
};

/* -- keys and delivery reports -------------------------------------------- */

static int manifest_key(const bs_kafkastore *ks, const char *topic,
                        int32_t part, char *buf, size_t size)
{
    return snprintf(buf, size, KEY_PREFIX "/%s/%s/%d", ks->group, topic,
                    (int)part);
}

static int chunk_key(const bs_kafkastore *ks, const char *topic, int32_t part,
                     int64_t seq, uint32_t i, char *buf, size_t size)
{
    return snprintf(buf, size, KEY_PREFIX "/%s/%s/%d/%lld/%u", ks->group,
                    topic, (int)part, (long long)seq, i);
}

/* All of one partition's records go to one partition of the topic. */
static int32_t ckpt_partition(const bs_kafkastore *ks, const char *topic,
                              int32_t part)
{
    char key[600];
    int n = manifest_key(ks, topic, part, key, sizeof(key));
    return (int32_t)(XXH3_64bits(key, (size_t)n) % (uint64_t)ks->nparts);
}

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

static known *known_find(bs_kafkastore *ks, const char *topic, int32_t part,
                         bool add)
{
    for (size_t i = 0; i < ks->nknown; i++)
        if (ks->known[i].partition == part &&
            !strcmp(ks->known[i].topic, topic))
            return &ks->known[i];
    if (!add)
        return NULL;
    if (ks->nknown == ks->capknown) {
        size_t cap = ks->capknown ? ks->capknown * 2 : 16;
        known *nk = realloc(ks->known, cap * sizeof(*nk));
        if (!nk)
            return NULL;
        ks->known = nk;
        ks->capknown = cap;
    }
    known *k = &ks->known[ks->nknown++];
    memset(k, 0, sizeof(*k));
    snprintf(k->topic, sizeof(k->topic), "%s", topic);
    k->partition = part;
    return k;
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
    if (ks->npend == ks->cappend) {
        size_t cap = ks->cappend ? ks->cappend * 2 : 16;
        pending *np = realloc(ks->pend, cap * sizeof(*np));
        if (!np) {
            snprintf(errstr, errstr_size, "out of memory");
            return -1;
        }
        ks->pend = np;
        ks->cappend = cap;
    }
    known *k = known_find(ks, topic, part, false);
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
    int32_t cp = ckpt_partition(ks, topic, part);
    int rc = 0;
    for (uint32_t i = 0; i < p->rec.nchunks && rc == 0; i++) {
        char key[600];
        chunk_key(ks, topic, part, p->rec.seq, i, key, sizeof(key));
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

static bool known_reserve(known *k, size_t n)
{
    if (n <= k->cap)
        return true;
    size_t cap = k->cap ? k->cap : 4;
    while (cap < n)
        cap *= 2;
    bs_store_manifest *c = realloc(k->chain, cap * sizeof(*c));
    if (!c)
        return false;
    k->chain = c;
    k->cap = cap;
    return true;
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
        known *k = known_find(ks, p->topic, p->partition, true);
        if (!k || !known_reserve(k, k->n + 1)) {
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
        manifest_key(ks, p->topic, p->partition, key, sizeof(key));
        k->chain[k->n] = p->rec; /* room reserved; counted below */
        char *val = p->delta
                        ? bs_store_manifest_json(k->chain, k->n + 1,
                                                 p->input_offset)
                        : bs_store_manifest_json(&p->rec, 1, p->input_offset);
        int r = val ? produce_rec(ks, ckpt_partition(ks, p->topic,
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
        known *k = known_find(ks, p->topic, p->partition, true);
        if (!k)
            continue;
        if (!p->delta) {
            int32_t cp = ckpt_partition(ks, p->topic, p->partition);
            for (size_t s = 0; s < k->n; s++)
                for (uint32_t c = 0; c < k->chain[s].nchunks; c++) {
                    char key[600];
                    chunk_key(ks, p->topic, p->partition, k->chain[s].seq, c,
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

/* -- reading ------------------------------------------------------------- */

static bool unknown_yet(rd_kafka_resp_err_t err)
{
    return err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
           err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION ||
           err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC ||
           err == RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE ||
           err == RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION;
}

/* A read that failed for want of a broker now (none answered in time, the
 * leader away or not known yet): BS_STORE_UNREACHABLE, not a damaged or
 * refused state. */
static bool transient(rd_kafka_resp_err_t err)
{
    return unknown_yet(err) || err == RD_KAFKA_RESP_ERR__TIMED_OUT ||
           err == RD_KAFKA_RESP_ERR__TRANSPORT ||
           err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN ||
           err == RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT;
}

/* Partition cp's low and high watermarks: 0, else -1 or (transient)
 * BS_STORE_UNREACHABLE. */
static int bounds(bs_kafkastore *ks, int32_t cp, int64_t *lo, int64_t *hi,
                  char *errstr, size_t errstr_size)
{
    rd_kafka_resp_err_t err;
    /* A topic created a moment ago (by this store, or beside it) is not
     * yet known to every broker: those answer that it does not exist.
     * Leaders are asked for first, and again before each retry: the reader
     * may have been idle while a broker went away, and librdkafka 2.0.2
     * sends a watermark query to the leader it last knew, dead or not. */
    double known_by = bs_now() + BS_TIMEOUT_TOPIC_KNOWN_MS / 1000.0;
    (void)bs_topic_partitions(ks->reader, ks->topic, BS_TIMEOUT_BROKER_MS,
                              NULL, NULL, 0);
    while ((err = rd_kafka_query_watermark_offsets(
                ks->reader, ks->topic, cp, lo, hi, BS_TIMEOUT_BROKER_MS)) &&
           unknown_yet(err) && bs_now() < known_by) {
        bs_log(BS_LOG_INFO, "checkpoint topic not known yet, retrying",
               "topic=%s partition=%d error=%s", ks->topic, (int)cp,
               rd_kafka_err2name(err));
        usleep(BS_TOPIC_KNOWN_RETRY_MS * 1000u);
        (void)bs_topic_partitions(ks->reader, ks->topic,
                                  BS_TIMEOUT_BROKER_MS, NULL, NULL, 0);
    }
    if (err) {
        snprintf(errstr, errstr_size, "checkpoint topic %s [%d]: %s",
                 ks->topic, (int)cp, rd_kafka_err2str(err));
        return transient(err) ? BS_STORE_UNREACHABLE : -1;
    }
    return 0;
}

/* Reads partition cp of the topic over offsets [from, to), calling fn for
 * each record until it returns non-zero: 0, else -1 or (not read in time)
 * BS_STORE_UNREACHABLE. */
static int read_range(bs_kafkastore *ks, int32_t cp, int64_t from, int64_t to,
                      int (*fn)(const rd_kafka_message_t *m, void *op),
                      void *op, char *errstr, size_t errstr_size)
{
    if (from >= to)
        return 0;
    rd_kafka_topic_partition_list_t *a = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(a, ks->topic, cp)->offset = from;
    rd_kafka_resp_err_t err = rd_kafka_assign(ks->reader, a);
    rd_kafka_topic_partition_list_destroy(a);
    if (err) {
        snprintf(errstr, errstr_size, "checkpoint topic %s: assign: %s",
                 ks->topic, rd_kafka_err2str(err));
        return -1;
    }
    int rc = 0;
    double deadline = bs_now() + BS_TIMEOUT_STORE_READ_MS / 1000.0;
    for (;;) {
        if (bs_now() > deadline) {
            snprintf(errstr, errstr_size, "checkpoint topic %s [%d]: not "
                     "read within %d ms", ks->topic, (int)cp,
                     BS_TIMEOUT_STORE_READ_MS);
            rc = BS_STORE_UNREACHABLE;
            break;
        }
        rd_kafka_message_t *m = rd_kafka_consumer_poll(ks->reader,
                                                       BS_POLL_MS);
        if (!m)
            continue;
        bool end = false;
        /* read_committed: the end is the last stable offset, which an
         * open transaction (another instance's, a zombie's until it is
         * aborted) holds below the high watermark; what lies beyond is
         * not committed yet.  Without transactions the two are equal.  A
         * compacted topic has gaps: the first record at or past `to`
         * ends the range unread. */
        char what[300];
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF)
            end = true;
        else if (m->err == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED &&
                 bs_refusal_text(m->err, "Read", ks->topic, what,
                                 sizeof(what))) {
            /* No Read ACL: waiting would not heal it. */
            snprintf(errstr, errstr_size, "checkpoint topic %s [%d]: %s "
                     "refused (%s)", ks->topic, (int)cp, what,
                     rd_kafka_err2name(m->err));
            rc = -1;
            end = true;
        } else if (!m->err && m->offset >= to)
            end = true;
        else if (!m->err) {
            if (fn(m, op) != 0)
                end = true;
            else
                end = m->offset + 1 >= to;
        }
        rd_kafka_message_destroy(m);
        if (end)
            break;
    }
    rd_kafka_assign(ks->reader, NULL);
    return rc;
}

/* The manifest is rewritten every round its partition is checkpointed, so
 * the newest is near the end: ranges are read backwards from the end,
 * each twice the one after it, until one holds the key (*seen); the last
 * record of the key in that range is the newest.  The rest of the
 * partition (older states, not yet compacted away) is never read. */
#define FIND_FIRST_RANGE 64

static int find_newest(bs_kafkastore *ks, int32_t cp, int64_t lo, int64_t hi,
                       int (*fn)(const rd_kafka_message_t *m, void *op),
                       void *op, const bool *seen, char *errstr,
                       size_t errstr_size)
{
    for (int64_t to = hi, w = FIND_FIRST_RANGE; to > lo && !*seen; w *= 2) {
        int64_t from = to - lo > w ? to - w : lo;
        int rc = read_range(ks, cp, from, to, fn, op, errstr, errstr_size);
        if (rc != 0)
            return rc;
        to = from;
    }
    return 0;
}

typedef struct find_manifest {
    const char *key;
    size_t keylen;
    bool seen;   /* a record with the key, a tombstone too */
    char *value; /* newest; NULL if none or deleted */
    size_t len;
    bool oom;
} find_manifest;

static int on_manifest(const rd_kafka_message_t *m, void *op)
{
    find_manifest *f = op;
    if (m->key_len == f->keylen && !memcmp(m->key, f->key, f->keylen)) {
        f->seen = true;
        free(f->value);
        f->value = NULL;
        f->len = 0;
        if (m->payload) { /* NULL: deleted */
            f->value = malloc(m->len ? m->len : 1);
            if (!f->value) {
                f->oom = true;
                return 1;
            }
            memcpy(f->value, m->payload, m->len);
            f->len = m->len;
        }
    }
    return 0;
}

static int on_chunk(const rd_kafka_message_t *m, void *op)
{
    return bs_store_chain_add(op, m->offset, m->key, m->key_len, m->payload,
                              m->len);
}

static int kafka_get(void *impl, const char *topic, int32_t part,
                     int64_t at_offset, bs_checkpoint *out, char *errstr,
                     size_t errstr_size)
{
    bs_kafkastore *ks = impl;
    char key[600], name[700];
    int klen = manifest_key(ks, topic, part, key, sizeof(key));
    snprintf(name, sizeof(name), "%s:%s", ks->topic, key);
    int32_t cp = ckpt_partition(ks, topic, part);
    /* One look at the partition's bounds: the manifest is searched for
     * below hi, and the chunks it names lie below it too. */
    int64_t lo, hi;
    int br = bounds(ks, cp, &lo, &hi, errstr, errstr_size);
    if (br != 0)
        return br;
    find_manifest f = {key, (size_t)klen, false, NULL, 0, false};
    br = find_newest(ks, cp, lo, hi, on_manifest, &f, &f.seen, errstr,
                     errstr_size);
    if (br != 0) {
        free(f.value);
        return br;
    }
    if (f.oom) {
        snprintf(errstr, errstr_size, "%s: out of memory", name);
        return -1;
    }
    if (!f.value)
        return 0;
    bs_store_manifest *states;
    size_t n;
    int parsed = bs_store_manifest_parse(f.value, f.len, &states, &n);
    free(f.value);
    if (parsed != 0) {
        snprintf(errstr, errstr_size, "%s: damaged manifest", name);
        return -1;
    }
    uint64_t bytes = 0;
    for (size_t i = 0; i < n; i++)
        bytes += states[i].size;
    bs_store_chain *c = bs_store_chain_new(key, states, n);
    if (!c) {
        snprintf(errstr, errstr_size, "%s: cannot allocate %llu bytes for "
                 "%zu states", name, (unsigned long long)bytes, n);
        free(states);
        return -1;
    }
    int rc = read_range(ks, cp, states[0].first < lo ? lo : states[0].first,
                        hi, on_chunk, c, errstr, errstr_size);
    if (rc == 0)
        rc = bs_store_chain_decode(c, name, out, errstr, errstr_size);
    bs_store_chain_free(c);
    if (rc == 1 && at_offset != BS_STORE_NEWEST &&
        out->next_offset > at_offset) {
        /* The topic keeps one chain per partition (compaction), restored
         * to its newest state. */
        snprintf(errstr, errstr_size, "%s: the checkpoint covers up to offset "
                 "%lld, past the committed %lld, and no older one is kept",
                 name, (long long)out->next_offset, (long long)at_offset);
        bs_ckpt_free(out);
        rc = BS_STORE_AHEAD;
    }
    known *k = rc == 1 ? known_find(ks, topic, part, true) : NULL;
    if (k && known_reserve(k, n)) {
        memcpy(k->chain, states, n * sizeof(*states));
        k->n = n;
        k->tip_id = out->id;
        /* a v1 manifest's snapshot has record seq 0 under key seq >= 1 */
        k->tip_chainable = (int64_t)out->seq == states[n - 1].seq;
        k->tip_input = out->next_offset;
        k->committed = true; /* read at read_committed, or the newest */
    } else if (k) {
        k->n = 0; /* the next put is a snapshot and tombstones nothing */
    }
    free(states);
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
        for (int attempt = 0;
             attempt < BS_TOPIC_CREATED_ATTEMPTS && ks->nparts <= 0;
             attempt++) {
            ks->nparts = bs_topic_partitions(ks->producer, ks->topic,
                                     BS_TIMEOUT_STORE_ADMIN_MS, NULL, NULL,
                                     0);
            if (ks->nparts <= 0)
                usleep(BS_TOPIC_CREATED_RETRY_MS * 1000u);
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
    char err[512];
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
    char why[512] = "";
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
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 16;
        bs_store_part *np = realloc(l->parts, nc * sizeof(*np));
        if (!np) {
            l->oom = true;
            return 1;
        }
        l->parts = np;
        l->cap = nc;
    }
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
    l.plen = (size_t)snprintf(l.prefix, sizeof(l.prefix), KEY_PREFIX "/%s/",
                              ks->group);
    int rc = l.plen < sizeof(l.prefix) ? 0 : -1;
    if (rc)
        snprintf(errstr, errstr_size, "consumer.group.id too long");
    for (int32_t cp = 0; rc == 0 && cp < ks->nparts; cp++) {
        int64_t lo, hi;
        rc = bounds(ks, cp, &lo, &hi, errstr, errstr_size);
        if (rc == 0)
            rc = read_range(ks, cp, lo, hi, on_listed, &l, errstr,
                            errstr_size);
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
    known *k = known_find(ks, topic, partition, false);
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
    .get = kafka_get, .committed = kafka_committed,
    .last_bytes = kafka_last_bytes, .describe = kafka_describe,
    .use_producer = kafka_use_producer, .delivery = kafka_delivery,
    .destroy = kafka_destroy};
