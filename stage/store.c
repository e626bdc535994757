/*
 * store.c -- see store.h.  The directory store is store_dir.c; the Kafka
 * store is here.
 */
#include "store.h"
#include "store_dir.h"
#include "timeouts.h"
#include "log.h"
#include "kafka_util.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

struct bs_store {
    bs_ckpt_store_kind kind;
    bs_dirstore *ds; /* dir */
    char desc[300];
    /* kafka */
    const char *group;
    const char *topic;
    size_t chunk;
    uint32_t max_chain; /* checkpoint.delta.max */
    double max_ratio;   /* checkpoint.delta.ratio */
    int nparts;
    rd_kafka_t *producer; /* the one records go through: own, or lent */
    rd_kafka_t *own;      /* the store's own (bs_store_new) */
    rd_kafka_t *reader;
    pending *pend; /* in ticket order */
    size_t npend, cappend;
    uintptr_t next_ticket;
    known *known;
    size_t nknown, capknown;
    uint64_t dr_failed;
    char dr_error[256];
    uint64_t last_bytes;
    bool last_delta;
};

/* -- kafka: keys and delivery reports --------------------------------------- */

static int manifest_key(const bs_store *st, const char *topic, int32_t part,
                        char *buf, size_t size)
{
    return snprintf(buf, size, KEY_PREFIX "/%s/%s/%d", st->group, topic,
                    (int)part);
}

static int chunk_key(const bs_store *st, const char *topic, int32_t part,
                     int64_t seq, uint32_t i, char *buf, size_t size)
{
    return snprintf(buf, size, KEY_PREFIX "/%s/%s/%d/%lld/%u", st->group,
                    topic, (int)part, (long long)seq, i);
}

/* All of one partition's records go to one partition of the topic. */
static int32_t ckpt_partition(const bs_store *st, const char *topic,
                              int32_t part)
{
    char key[600];
    int n = manifest_key(st, topic, part, key, sizeof(key));
    return (int32_t)(XXH3_64bits(key, (size_t)n) % (uint64_t)st->nparts);
}

/* Message opaque: NULL nothing to note; UINTPTR_MAX a tombstone (its
 * failure is harmless: compaction or the next tombstone removes the chunk);
 * anything else the ticket of the pending checkpoint whose chunk 0 it is.
 * Tickets are never reused, so the report of a chunk whose put failed
 * half-way (its pending entry dropped, the slot reused) finds no entry
 * instead of another partition's. */
#define OPQ_TOMBSTONE ((void *)UINTPTR_MAX)

static uintptr_t new_ticket(bs_store *st)
{
    if (st->next_ticket == 0 || st->next_ticket == UINTPTR_MAX)
        st->next_ticket = 1; /* (wraps only on a 32-bit build, after 4G) */
    return st->next_ticket++;
}

/* The pending entry with that ticket (pend is in ticket order), or NULL. */
static pending *pending_by_ticket(bs_store *st, uintptr_t ticket)
{
    size_t lo = 0, hi = st->npend;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (st->pend[mid].ticket < ticket)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < st->npend && st->pend[lo].ticket == ticket ? &st->pend[lo]
                                                           : NULL;
}

static void kafka_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *op)
{
    (void)rk;
    bs_store *st = op;
    if (m->err) {
        if (m->_private == OPQ_TOMBSTONE)
            return;
        if (st->dr_failed++ == 0)
            snprintf(st->dr_error, sizeof(st->dr_error), "%s",
                     rd_kafka_err2str(m->err));
        return;
    }
    if (m->_private && m->_private != OPQ_TOMBSTONE) {
        pending *p = pending_by_ticket(st, (uintptr_t)m->_private);
        if (p)
            p->rec.first = m->offset;
    }
}

static known *known_find(bs_store *st, const char *topic, int32_t part,
                         bool add)
{
    for (size_t i = 0; i < st->nknown; i++)
        if (st->known[i].partition == part &&
            !strcmp(st->known[i].topic, topic))
            return &st->known[i];
    if (!add)
        return NULL;
    if (st->nknown == st->capknown) {
        size_t cap = st->capknown ? st->capknown * 2 : 16;
        known *nk = realloc(st->known, cap * sizeof(*nk));
        if (!nk)
            return NULL;
        st->known = nk;
        st->capknown = cap;
    }
    known *k = &st->known[st->nknown++];
    memset(k, 0, sizeof(*k));
    snprintf(k->topic, sizeof(k->topic), "%s", topic);
    k->partition = part;
    return k;
}

/* Produces and waits; false if any delivery (but tombstones) failed. */
static bool kafka_flush(bs_store *st, char *errstr, size_t errstr_size)
{
    double t0 = bs_now();
    while (rd_kafka_flush(st->producer, 500) != RD_KAFKA_RESP_ERR_NO_ERROR)
        if (bs_now() - t0 > 5)
            bs_log(BS_LOG_INFO, "waiting for checkpoint deliveries",
                   "in_flight=%d", rd_kafka_outq_len(st->producer));
    if (st->dr_failed) {
        snprintf(errstr, errstr_size, "checkpoint topic %s: %llu records "
                 "not delivered: %s", st->topic,
                 (unsigned long long)st->dr_failed, st->dr_error);
        st->dr_failed = 0;
        return false;
    }
    return true;
}

static int produce_rec(bs_store *st, int32_t part, const char *key,
                       const void *val, size_t len, void *opaque,
                       char *errstr, size_t errstr_size)
{
    for (;;) {
        rd_kafka_resp_err_t err = rd_kafka_producev(
            st->producer, RD_KAFKA_V_TOPIC(st->topic),
            RD_KAFKA_V_PARTITION(part), RD_KAFKA_V_KEY(key, strlen(key)),
            RD_KAFKA_V_VALUE((void *)val, len),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_OPAQUE(opaque), RD_KAFKA_V_END);
        if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            rd_kafka_poll(st->producer, 50);
            continue;
        }
        if (err) {
            snprintf(errstr, errstr_size, "checkpoint topic %s: %s",
                     st->topic, rd_kafka_err2str(err));
            return -1;
        }
        return 0;
    }
}

/* -- kafka: put and sync ------------------------------------------------------ */

/* The longest chain the Kafka store writes, whatever checkpoint.delta.max
 * says: a manifest names every state in ~120 bytes of JSON, and must stay
 * under the broker's message.max.bytes (1 MiB by default). */
#define KAFKA_MAX_CHAIN 1000u

/* Whether this put may be a delta on the partition's known chain: its
 * newest state is committed and the filter's changes are tracked from it,
 * and the chain stays within checkpoint.delta.max and .ratio. */
static bool chain_onto(const bs_store *st, const known *k,
                       const bs_ckpt_meta *m, const bf_filter *filter)
{
    uint64_t mark;
    if (!k || k->n == 0 || !k->tip_chainable || !k->committed ||
        st->max_chain == 0 || !bf_filter_tracked(filter, &mark) ||
        mark != k->tip_id || k->n - 1 >= st->max_chain ||
        k->n - 1 >= KAFKA_MAX_CHAIN)
        return false;
    uint64_t bytes = bs_ckpt_size(m, filter, true);
    for (size_t i = 1; i < k->n; i++)
        bytes += k->chain[i].size;
    return (double)bytes <= st->max_ratio * (double)k->chain[0].size;
}

static int kafka_put(bs_store *st, const char *topic, int32_t part,
                     int64_t next_offset, const bs_ckpt_wm *wm, uint32_t nwm,
                     bf_filter *filter, char *errstr, size_t errstr_size)
{
    if (st->npend == st->cappend) {
        size_t cap = st->cappend ? st->cappend * 2 : 16;
        pending *np = realloc(st->pend, cap * sizeof(*np));
        if (!np) {
            snprintf(errstr, errstr_size, "out of memory");
            return -1;
        }
        st->pend = np;
        st->cappend = cap;
    }
    known *k = known_find(st, topic, part, false);
    const bs_store_manifest *tip = k && k->n ? &k->chain[k->n - 1] : NULL;
    bs_ckpt_meta m = {topic, part, next_offset, wm, nwm,
                      (uint64_t)(tip ? tip->seq + 1 : 1), bs_ckpt_new_id(),
                      k ? k->tip_id : 0};
    bool delta = chain_onto(st, k, &m, filter);
    uint8_t *buf;
    size_t len;
    if (bs_ckpt_encode_record(&m, filter, delta, &buf, &len, errstr,
                              errstr_size) != 0)
        return -1;
    st->last_bytes = len;
    st->last_delta = delta;
    pending *p = &st->pend[st->npend];
    memset(p, 0, sizeof(*p));
    /* Tickets grow, and only the last entry is ever dropped (below): pend
     * stays in ticket order.  A wrap (32-bit only) would break the order
     * only across 4G puts, with the round long gone. */
    p->ticket = new_ticket(st);
    snprintf(p->topic, sizeof(p->topic), "%s", topic);
    p->partition = part;
    p->rec.seq = (int64_t)m.seq;
    p->rec.nchunks = (uint32_t)((len + st->chunk - 1) / st->chunk);
    p->rec.chunk_bytes = st->chunk;
    p->rec.size = len;
    p->rec.xxh3 = XXH3_64bits(buf, len);
    p->rec.first = -1;
    p->delta = delta;
    p->id = m.id;
    p->base_id = m.prev_id;
    p->input_offset = next_offset;
    st->npend++;
    int32_t cp = ckpt_partition(st, topic, part);
    int rc = 0;
    for (uint32_t i = 0; i < p->rec.nchunks && rc == 0; i++) {
        char key[600];
        chunk_key(st, topic, part, p->rec.seq, i, key, sizeof(key));
        size_t off = (size_t)i * st->chunk;
        size_t n = len - off < st->chunk ? len - off : st->chunk;
        rc = produce_rec(st, cp, key, buf + off, n,
                         i == 0 ? (void *)p->ticket : NULL,
                         errstr, errstr_size);
    }
    free(buf);
    if (rc != 0) {
        st->npend--; /* its chunks never get a manifest; a late report of
                      * its chunk 0 finds no ticket (kafka_dr) */
        return rc;
    }
    /* Changes count from this state on; if its manifest is never written,
     * the known tip is another id and the next checkpoint a snapshot. */
    bs_ckpt_track_from(filter, m.id);
    return 0;
}

/* A manifest naming `n` states, chain[0] the snapshot (malloc'd JSON). */
static char *manifest_json(const bs_store_manifest *chain, size_t n,
                           int64_t input_offset)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++) {
        const bs_store_manifest *r = &chain[i];
        char hex[17];
        snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)r->xxh3);
        if (json_array_append_new(
                arr, json_pack("{s:I, s:I, s:I, s:I, s:s, s:I}", "seq",
                               (json_int_t)r->seq, "chunks",
                               (json_int_t)r->nchunks, "chunk_bytes",
                               (json_int_t)r->chunk_bytes, "size",
                               (json_int_t)r->size, "xxh3", hex, "first",
                               (json_int_t)r->first)) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    json_t *j = arr ? json_pack("{s:i, s:I, s:o}", "v", 2, "input_offset",
                                (json_int_t)input_offset, "states", arr)
                    : NULL;
    char *val = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return val;
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

static int kafka_sync(bs_store *st, char *errstr, size_t errstr_size)
{
    int rc = -1;
    if (st->npend == 0)
        return 0;
    /* 1. every chunk acknowledged */
    if (!kafka_flush(st, errstr, errstr_size))
        goto out;
    /* 2. the manifests, which make the states valid: a delta's names the
     * known chain and the delta, a snapshot's the snapshot alone */
    for (size_t i = 0; i < st->npend; i++) {
        pending *p = &st->pend[i];
        if (p->rec.first < 0) {
            snprintf(errstr, errstr_size, "checkpoint of %s [%d]: no offset "
                     "for its first chunk", p->topic, (int)p->partition);
            goto out;
        }
        known *k = known_find(st, p->topic, p->partition, true);
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
        manifest_key(st, p->topic, p->partition, key, sizeof(key));
        k->chain[k->n] = p->rec; /* room reserved; counted below */
        char *val = p->delta ? manifest_json(k->chain, k->n + 1,
                                             p->input_offset)
                             : manifest_json(&p->rec, 1, p->input_offset);
        int r = val ? produce_rec(st, ckpt_partition(st, p->topic,
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
    if (!kafka_flush(st, errstr, errstr_size))
        goto out;
    /* 3. the known chains move on; a new snapshot's old chain is garbage */
    for (size_t i = 0; i < st->npend; i++) {
        pending *p = &st->pend[i];
        known *k = known_find(st, p->topic, p->partition, true);
        if (!k)
            continue;
        if (!p->delta) {
            int32_t cp = ckpt_partition(st, p->topic, p->partition);
            for (size_t s = 0; s < k->n; s++)
                for (uint32_t c = 0; c < k->chain[s].nchunks; c++) {
                    char key[600];
                    chunk_key(st, p->topic, p->partition, k->chain[s].seq, c,
                              key, sizeof(key));
                    char ignored[64];
                    (void)produce_rec(st, cp, key, NULL, 0, OPQ_TOMBSTONE,
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
    rd_kafka_poll(st->producer, 0);
    rc = 0;
out:
    st->npend = 0;
    return rc;
}

/* -- kafka: reading ----------------------------------------------------------- */

static bool unknown_yet(rd_kafka_resp_err_t err)
{
    return err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
           err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION ||
           err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC ||
           err == RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE ||
           err == RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION;
}

/* Partition cp's low and high watermarks. */
static int bounds(bs_store *st, int32_t cp, int64_t *lo, int64_t *hi,
                  char *errstr, size_t errstr_size)
{
    rd_kafka_resp_err_t err;
    /* A topic created a moment ago (by this store, or beside it) is not
     * yet known to every broker: those answer that it does not exist. */
    double known_by = bs_now() + BS_TIMEOUT_TOPIC_KNOWN_MS / 1000.0;
    while ((err = rd_kafka_query_watermark_offsets(
                st->reader, st->topic, cp, lo, hi, BS_TIMEOUT_BROKER_MS)) &&
           unknown_yet(err) && bs_now() < known_by) {
        bs_log(BS_LOG_INFO, "checkpoint topic not known yet, retrying",
               "topic=%s partition=%d error=%s", st->topic, (int)cp,
               rd_kafka_err2name(err));
        usleep(500000);
    }
    if (err) {
        snprintf(errstr, errstr_size, "checkpoint topic %s [%d]: %s",
                 st->topic, (int)cp, rd_kafka_err2str(err));
        return -1;
    }
    return 0;
}

/* Reads partition cp of the topic over offsets [from, to), calling fn for
 * each record until it returns non-zero. */
static int read_range(bs_store *st, int32_t cp, int64_t from, int64_t to,
                      int (*fn)(const rd_kafka_message_t *m, void *op),
                      void *op, char *errstr, size_t errstr_size)
{
    if (from >= to)
        return 0;
    rd_kafka_topic_partition_list_t *a = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(a, st->topic, cp)->offset = from;
    rd_kafka_resp_err_t err = rd_kafka_assign(st->reader, a);
    rd_kafka_topic_partition_list_destroy(a);
    if (err) {
        snprintf(errstr, errstr_size, "checkpoint topic %s: assign: %s",
                 st->topic, rd_kafka_err2str(err));
        return -1;
    }
    int rc = 0;
    double deadline = bs_now() + 60;
    for (;;) {
        if (bs_now() > deadline) {
            snprintf(errstr, errstr_size, "checkpoint topic %s [%d]: not "
                     "read within 60 s", st->topic, (int)cp);
            rc = -1;
            break;
        }
        rd_kafka_message_t *m = rd_kafka_consumer_poll(st->reader, 100);
        if (!m)
            continue;
        bool end = false;
        /* read_committed: the end is the last stable offset, which an
         * open transaction (another instance's, a zombie's until it is
         * aborted) holds below the high watermark; what lies beyond is
         * not committed yet.  Without transactions the two are equal.  A
         * compacted topic has gaps: the first record at or past `to`
         * ends the range unread. */
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF)
            end = true;
        else if (!m->err && m->offset >= to)
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
    rd_kafka_assign(st->reader, NULL);
    return rc;
}

/* Reads partition cp of the topic from `from` to its end as it is now. */
static int read_partition(bs_store *st, int32_t cp, int64_t from,
                          int (*fn)(const rd_kafka_message_t *m, void *op),
                          void *op, char *errstr, size_t errstr_size)
{
    int64_t lo, hi;
    if (bounds(st, cp, &lo, &hi, errstr, errstr_size) != 0)
        return -1;
    return read_range(st, cp, from < lo ? lo : from, hi, fn, op, errstr,
                      errstr_size);
}

/* The manifest is rewritten every round its partition is checkpointed, so
 * the newest is near the end: ranges are read backwards from the end,
 * each twice the one after it, until one holds the key (*seen); the last
 * record of the key in that range is the newest.  The rest of the
 * partition (older states, not yet compacted away) is never read. */
#define FIND_FIRST_RANGE 64

static int find_newest(bs_store *st, int32_t cp,
                       int (*fn)(const rd_kafka_message_t *m, void *op),
                       void *op, const bool *seen, char *errstr,
                       size_t errstr_size)
{
    int64_t lo, hi;
    if (bounds(st, cp, &lo, &hi, errstr, errstr_size) != 0)
        return -1;
    for (int64_t to = hi, w = FIND_FIRST_RANGE; to > lo && !*seen; w *= 2) {
        int64_t from = to - lo > w ? to - w : lo;
        if (read_range(st, cp, from, to, fn, op, errstr, errstr_size) != 0)
            return -1;
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

#define MAX_CHUNK_BYTES (UINT64_C(16) << 20) /* checkpoint.chunk.bytes' */
#define MAX_CKPT_BYTES (UINT64_C(1) << 40)

/* One state's fields (v1: at the top of the manifest).  0 or -1. */
static int state_parse(json_t *j, bs_store_manifest *m)
{
    json_int_t seq = 0, nchunks = 0, chunk = 0, size = 0, first = -1;
    const char *hex = NULL;
    size_t hexlen = 0;
    if (json_unpack(j, "{s:I, s:I, s:I, s:I, s:s%, s:I}", "seq", &seq,
                    "chunks", &nchunks, "chunk_bytes", &chunk, "size", &size,
                    "xxh3", &hex, &hexlen, "first", &first) != 0)
        return -1;
    if (seq < 1 || first < 0 || chunk < 1 ||
        (uint64_t)chunk > MAX_CHUNK_BYTES || size < 1 ||
        (uint64_t)size > MAX_CKPT_BYTES || nchunks < 1 ||
        nchunks > (json_int_t)UINT32_MAX || hexlen != 16 ||
        strspn(hex, "0123456789abcdefABCDEF") != 16)
        return -1;
    /* exactly as many chunks as the size needs */
    if ((uint64_t)nchunks != ((uint64_t)size + (uint64_t)chunk - 1) /
                                 (uint64_t)chunk)
        return -1;
    m->seq = seq;
    m->nchunks = (uint32_t)nchunks;
    m->chunk_bytes = (uint64_t)chunk;
    m->size = (uint64_t)size;
    m->xxh3 = strtoull(hex, NULL, 16);
    m->first = first;
    return 0;
}

int bs_store_manifest_parse(const void *v, size_t len,
                            bs_store_manifest **states, size_t *n)
{
    *states = NULL;
    *n = 0;
    json_t *j = json_loadb(v, len, 0, NULL), *arr = NULL;
    json_int_t ver = 0;
    bs_store_manifest *out = NULL;
    size_t count = 1;
    int rc = -1;
    if (!j || json_unpack(j, "{s:I}", "v", &ver) != 0)
        goto out;
    if (ver == 2) {
        if (json_unpack(j, "{s:o}", "states", &arr) != 0 ||
            !json_is_array(arr) || (count = json_array_size(arr)) < 1 ||
            count > BS_STORE_MAX_STATES)
            goto out;
    } else if (ver != 1) {
        goto out;
    }
    if (!(out = malloc(count * sizeof(*out))))
        goto out;
    for (size_t i = 0; i < count; i++) {
        if (state_parse(arr ? json_array_get(arr, i) : j, &out[i]) != 0)
            goto out;
        /* a chain: seq consecutive, each state written after the one
         * before it (a restore reads from states[0].first on) */
        if (i > 0 && (out[i].seq != out[i - 1].seq + 1 ||
                      out[i].first < out[i - 1].first))
            goto out;
    }
    *states = out;
    *n = count;
    out = NULL;
    rc = 0;
out:
    free(out);
    json_decref(j);
    return rc;
}

struct bs_store_chunks {
    char prefix[600]; /* MANIFEST_KEY/SEQ/ */
    size_t prefixlen;
    bs_store_manifest m;
    uint8_t *buf;
    uint8_t *have;
    uint32_t got;
};

bs_store_chunks *bs_store_chunks_new(const char *manifest_key,
                                     const bs_store_manifest *m)
{
    bs_store_chunks *g = calloc(1, sizeof(*g));
    if (!g)
        return NULL;
    int n = snprintf(g->prefix, sizeof(g->prefix), "%s/%lld/", manifest_key,
                     (long long)m->seq);
    g->m = *m;
    g->buf = m->size <= SIZE_MAX ? malloc((size_t)m->size) : NULL;
    g->have = calloc(m->nchunks, 1);
    if (n < 0 || (size_t)n >= sizeof(g->prefix) || !g->buf || !g->have) {
        bs_store_chunks_free(g);
        return NULL;
    }
    g->prefixlen = (size_t)n;
    return g;
}

int bs_store_chunks_add(bs_store_chunks *g, const void *key, size_t klen,
                        const void *val, size_t vlen)
{
    if (!key || klen <= g->prefixlen || memcmp(key, g->prefix, g->prefixlen))
        return 0;
    /* the chunk index: decimal digits, no leading zero */
    const char *d = (const char *)key + g->prefixlen;
    size_t n = klen - g->prefixlen;
    if (n > 10 || (n > 1 && d[0] == '0'))
        return 0;
    uint64_t i = 0;
    for (size_t k = 0; k < n; k++) {
        if (d[k] < '0' || d[k] > '9')
            return 0;
        i = i * 10 + (uint64_t)(d[k] - '0');
    }
    if (i >= g->m.nchunks || g->have[i] || !val)
        return 0;
    uint64_t off = i * g->m.chunk_bytes;
    uint64_t want = g->m.size - off < g->m.chunk_bytes ? g->m.size - off
                                                       : g->m.chunk_bytes;
    if (vlen != want)
        return 0; /* not ours after all: the count check will say */
    memcpy(g->buf + off, val, vlen);
    g->have[i] = 1;
    return ++g->got == g->m.nchunks;
}

int bs_store_chunks_decode(bs_store_chunks *g, const char *name,
                           bs_checkpoint *out, char *errstr,
                           size_t errstr_size)
{
    memset(out, 0, sizeof(*out));
    if (g->got != g->m.nchunks) {
        snprintf(errstr, errstr_size, "%s: checkpoint %lld has %u of its %u "
                 "chunks (deleted by retention?)", name, (long long)g->m.seq,
                 g->got, g->m.nchunks);
        return -1;
    }
    if (XXH3_64bits(g->buf, (size_t)g->m.size) != g->m.xxh3) {
        snprintf(errstr, errstr_size, "%s: checkpoint %lld does not match "
                 "its manifest's checksum", name, (long long)g->m.seq);
        return -1;
    }
    return bs_ckpt_decode(g->buf, (size_t)g->m.size, name, out, errstr,
                          errstr_size);
}

void bs_store_chunks_free(bs_store_chunks *g)
{
    if (!g)
        return;
    free(g->buf);
    free(g->have);
    free(g);
}

struct bs_store_chain {
    size_t n, complete;
    bs_store_manifest *states;
    bs_store_chunks **g;
};

bs_store_chain *bs_store_chain_new(const char *manifest_key,
                                   const bs_store_manifest *states, size_t n)
{
    bs_store_chain *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->n = n;
    c->states = malloc((n ? n : 1) * sizeof(*c->states));
    c->g = calloc(n ? n : 1, sizeof(*c->g));
    if (!c->states || !c->g) {
        bs_store_chain_free(c);
        return NULL;
    }
    memcpy(c->states, states, n * sizeof(*states));
    for (size_t i = 0; i < n; i++)
        if (!(c->g[i] = bs_store_chunks_new(manifest_key, &states[i]))) {
            bs_store_chain_free(c);
            return NULL;
        }
    return c;
}

int bs_store_chain_add(bs_store_chain *c, int64_t offset, const void *key,
                       size_t klen, const void *val, size_t vlen)
{
    for (size_t i = 0; i < c->n; i++)
        /* A state's chunks are the ones from its chunk 0 on: a put that
         * failed before its manifest may have left chunks under the same
         * keys earlier. */
        if (offset >= c->states[i].first &&
            bs_store_chunks_add(c->g[i], key, klen, val, vlen) == 1)
            c->complete++;
    return c->n && c->complete == c->n;
}

int bs_store_chain_decode(bs_store_chain *c, const char *name,
                          bs_checkpoint *out, char *errstr,
                          size_t errstr_size)
{
    memset(out, 0, sizeof(*out));
    if (c->n == 0) {
        snprintf(errstr, errstr_size, "%s: a manifest naming no state", name);
        return -1;
    }
    if (bs_store_chunks_decode(c->g[0], name, out, errstr, errstr_size) != 1)
        return -1;
    if (out->delta) {
        snprintf(errstr, errstr_size, "%s: checkpoint %lld is a delta, not "
                 "the snapshot a chain starts from", name,
                 (long long)c->states[0].seq);
        bs_ckpt_free(out);
        return -1;
    }
    for (size_t i = 1; i < c->n; i++) {
        bs_checkpoint d;
        char dname[800];
        snprintf(dname, sizeof(dname), "%s (delta %lld)", name,
                 (long long)c->states[i].seq);
        int r = -1;
        if (bs_store_chunks_decode(c->g[i], dname, &d, errstr,
                                   errstr_size) == 1) {
            if (!d.delta)
                snprintf(errstr, errstr_size, "%s: a snapshot where a delta "
                         "belongs", dname);
            else if (bs_ckpt_apply(out, &d, dname, errstr, errstr_size) == 0)
                r = 1;
            bs_ckpt_free(&d);
        }
        if (r != 1) {
            bs_ckpt_free(out);
            return -1;
        }
    }
    bs_ckpt_track_from(out->filter, out->id);
    return 1;
}

void bs_store_chain_free(bs_store_chain *c)
{
    if (!c)
        return;
    for (size_t i = 0; c->g && i < c->n; i++)
        bs_store_chunks_free(c->g[i]);
    free(c->g);
    free(c->states);
    free(c);
}

static int on_chunk(const rd_kafka_message_t *m, void *op)
{
    return bs_store_chain_add(op, m->offset, m->key, m->key_len, m->payload,
                              m->len);
}

static int kafka_get(bs_store *st, const char *topic, int32_t part,
                     int64_t at_offset, bs_checkpoint *out, char *errstr,
                     size_t errstr_size)
{
    char key[600], name[700];
    int klen = manifest_key(st, topic, part, key, sizeof(key));
    snprintf(name, sizeof(name), "%s:%s", st->topic, key);
    int32_t cp = ckpt_partition(st, topic, part);
    find_manifest f = {key, (size_t)klen, false, NULL, 0, false};
    if (find_newest(st, cp, on_manifest, &f, &f.seen, errstr, errstr_size)) {
        free(f.value);
        return -1;
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
    int rc = -1;
    if (read_partition(st, cp, states[0].first, on_chunk, c, errstr,
                       errstr_size) == 0)
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
    known *k = rc == 1 ? known_find(st, topic, part, true) : NULL;
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

/* The topic must exist, compacted; if it does not, it is created so with
 * the admin API (never auto-created: a broker's auto-creation would make
 * it a deleting topic, and old checkpoints would vanish). */
static int kafka_check(bs_store *st, char *errstr, size_t errstr_size)
{
    st->nparts = bs_topic_partitions(st->producer, st->topic,
                                      BS_TIMEOUT_STORE_ADMIN_MS, NULL,
                                     0);
    if (st->nparts <= 0) {
        rd_kafka_NewTopic_t *nt =
            rd_kafka_NewTopic_new(st->topic, -1, -1, NULL, 0);
        rd_kafka_queue_t *q = rd_kafka_queue_new(st->producer);
        rd_kafka_AdminOptions_t *o =
            rd_kafka_AdminOptions_new(st->producer, RD_KAFKA_ADMIN_OP_ANY);
        rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR__TIMED_OUT;
        if (nt && q && o) {
            rd_kafka_NewTopic_set_config(nt, "cleanup.policy", "compact");
            rd_kafka_AdminOptions_set_request_timeout(
                o, BS_TIMEOUT_STORE_ADMIN_MS, NULL, 0);
            rd_kafka_CreateTopics(st->producer, &nt, 1, o, q);
            rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 7000);
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
                   "cleanup.policy=compact", st->topic);
        for (int attempt = 0; attempt < 10 && st->nparts <= 0; attempt++) {
            st->nparts = bs_topic_partitions(st->producer, st->topic,
                                      BS_TIMEOUT_STORE_ADMIN_MS, NULL,
                                     0);
            if (st->nparts <= 0)
                usleep(300000);
        }
        if (st->nparts <= 0) {
            snprintf(errstr, errstr_size, "checkpoint topic %s does not exist"
                     " and could not be created (%s): create it with "
                     "cleanup.policy=compact", st->topic,
                     rd_kafka_err2str(e));
            return -1;
        }
    }
    snprintf(st->desc, sizeof(st->desc), "kafka topic:%s partitions:%d",
             st->topic, st->nparts);
    return 0;
}

/* -- dispatch ---------------------------------------------------------------- */

bs_store *bs_store_new(const bs_settings *set, rd_kafka_t *reader,
                       rd_kafka_conf_t *producer_conf, char *errstr,
                       size_t errstr_size)
{
    bs_store *st = calloc(1, sizeof(*st));
    if (!st) {
        if (producer_conf)
            rd_kafka_conf_destroy(producer_conf);
        snprintf(errstr, errstr_size, "out of memory");
        return NULL;
    }
    st->kind = set->checkpoint_store;
    snprintf(st->desc, sizeof(st->desc), "dir %s", set->checkpoint_dir);
    if (st->kind != BS_CONFIG_STORE_KAFKA) {
        if (producer_conf)
            rd_kafka_conf_destroy(producer_conf);
        st->ds = bs_dirstore_new(set->checkpoint_dir,
                                 (uint32_t)set->checkpoint_delta_max,
                                 set->checkpoint_delta_ratio);
        if (!st->ds) {
            snprintf(errstr, errstr_size, "out of memory");
            free(st);
            return NULL;
        }
        return st;
    }
    st->group = set->group_id;
    st->topic = set->checkpoint_topic;
    st->chunk = (size_t)set->checkpoint_chunk_bytes;
    st->max_chain = (uint32_t)set->checkpoint_delta_max;
    st->max_ratio = set->checkpoint_delta_ratio;
    st->reader = reader;
    rd_kafka_conf_set_opaque(producer_conf, st);
    rd_kafka_conf_set_dr_msg_cb(producer_conf, kafka_dr);
    rd_kafka_conf_set_log_cb(producer_conf, bs_log_rdkafka);
    char err[512];
    st->producer = st->own = rd_kafka_new(RD_KAFKA_PRODUCER, producer_conf,
                                          err, sizeof(err));
    if (!st->producer) {
        rd_kafka_conf_destroy(producer_conf);
        snprintf(errstr, errstr_size, "checkpoint store producer: %s", err);
        free(st);
        return NULL;
    }
    return st;
}

void bs_store_destroy(bs_store *st)
{
    if (!st)
        return;
    if (st->own) {
        rd_kafka_flush(st->own, BS_TIMEOUT_STORE_ADMIN_MS);
        rd_kafka_destroy(st->own);
    }
    bs_dirstore_destroy(st->ds);
    free(st->pend);
    for (size_t i = 0; i < st->nknown; i++)
        free(st->known[i].chain);
    free(st->known);
    free(st);
}

int bs_store_check(bs_store *st, char *errstr, size_t errstr_size)
{
    return st->kind == BS_CONFIG_STORE_KAFKA
               ? kafka_check(st, errstr, errstr_size)
               : bs_dirstore_check(st->ds, errstr, errstr_size);
}

int bs_store_put(bs_store *st, const char *topic, int32_t partition,
                 int64_t next_offset, const bs_ckpt_wm *wm, uint32_t nwm,
                 bf_filter *filter, char *errstr, size_t errstr_size)
{
    if (st->kind == BS_CONFIG_STORE_KAFKA)
        return kafka_put(st, topic, partition, next_offset, wm, nwm, filter,
                         errstr, errstr_size);
    return bs_dirstore_put(st->ds, topic, partition, next_offset, wm, nwm,
                           filter, errstr, errstr_size);
}

int bs_store_sync(bs_store *st, char *errstr, size_t errstr_size)
{
    if (st->kind == BS_CONFIG_STORE_KAFKA)
        return kafka_sync(st, errstr, errstr_size);
    return bs_dirstore_sync(st->ds, errstr, errstr_size);
}

int bs_store_get(bs_store *st, const char *topic, int32_t partition,
                 int64_t at_offset, bs_checkpoint *out, char *errstr,
                 size_t errstr_size)
{
    if (st->kind == BS_CONFIG_STORE_KAFKA)
        return kafka_get(st, topic, partition, at_offset, out, errstr,
                         errstr_size);
    return bs_dirstore_get(st->ds, topic, partition, at_offset, out, errstr,
                           errstr_size);
}

int bs_store_committed(bs_store *st, const char *topic, int32_t partition,
                       int64_t next_offset, char *errstr, size_t errstr_size)
{
    /* The kafka store keeps one chain per partition, and compaction drops
     * what its manifests no longer name: a commit only lets the next
     * checkpoint chain onto the state it covers. */
    if (st->kind == BS_CONFIG_STORE_KAFKA) {
        known *k = known_find(st, topic, partition, false);
        if (k && k->n && k->tip_input <= next_offset)
            k->committed = true;
        return 0;
    }
    return bs_dirstore_committed(st->ds, topic, partition, next_offset,
                                 errstr, errstr_size);
}

uint64_t bs_store_last_bytes(const bs_store *st, bool *delta)
{
    if (st->kind == BS_CONFIG_STORE_KAFKA) {
        if (delta)
            *delta = st->last_delta;
        return st->last_bytes;
    }
    return bs_dirstore_last_bytes(st->ds, delta);
}

const char *bs_store_describe(const bs_store *st) { return st->desc; }

void bs_store_use_producer(bs_store *st, rd_kafka_t *producer)
{
    if (st->kind == BS_CONFIG_STORE_KAFKA)
        st->producer = producer ? producer : st->own;
}

bool bs_store_delivery(bs_store *st, const rd_kafka_message_t *m)
{
    if (st->kind != BS_CONFIG_STORE_KAFKA || st->producer == st->own ||
        strcmp(rd_kafka_topic_name(m->rkt), st->topic) != 0)
        return false;
    kafka_dr(st->producer, m, st);
    return true;
}
