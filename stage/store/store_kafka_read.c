/*
 * store_kafka_read.c -- the Kafka store's reading half (store_kafka_read.h
 * says what it shares with the writing half, store_kafka.c): the keys its
 * records go under, what it knows of each partition's chain, and the
 * restore.
 *
 * A restore is asked for every input partition it restores at once
 * (get_many; get is one of them): the brokers are asked for the leaders
 * once, each partition of the topic that holds one of them has its bounds
 * asked once, and is read once for all the input partitions it holds
 * (several hash to one partition of the topic), every such partition at
 * once: first backwards from its end until each manifest is found, then
 * from the oldest chunk 0 the manifests name, gathering every state
 * (bs_store_chain_*).  Reading them one after another cost a restore of 6
 * partitions some 47 requests, mostly one after another, at the 50 - 250
 * ms a broker takes to answer while another is away (bench/HISTORY.md, bench/restore).
 */
#include "store/store_kafka_read.h"
#include "kafka/kafka_util.h"
#include "base/log.h"
#include "base/timeouts.h"
#include "base/util.h"

#include <config.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

/* -- keys and chains ------------------------------------------------------ */

int bs_kafkastore_manifest_key(const bs_kafkastore *ks, const char *topic,
                               int32_t part, char *buf, size_t size)
{
    return snprintf(buf, size, BS_KAFKASTORE_KEY_PREFIX "/%s/%s/%d", ks->group, topic,
                    (int)part);
}

int bs_kafkastore_chunk_key(const bs_kafkastore *ks, const char *topic,
                            int32_t part, int64_t seq, uint32_t i, char *buf,
                            size_t size)
{
    return snprintf(buf, size, BS_KAFKASTORE_KEY_PREFIX "/%s/%s/%d/%lld/%u", ks->group,
                    topic, (int)part, (long long)seq, i);
}

int32_t bs_kafkastore_partition(const bs_kafkastore *ks, const char *topic,
                                int32_t part)
{
    char key[600];
    int n = bs_kafkastore_manifest_key(ks, topic, part, key, sizeof(key));
    return (int32_t)(XXH3_64bits(key, (size_t)n) % (uint64_t)ks->nparts);
}

bs_kafkastore_known *bs_kafkastore_known_find(bs_kafkastore *ks,
                                              const char *topic, int32_t part,
                                              bool add)
{
    for (size_t i = 0; i < ks->nknown; i++)
        if (ks->known[i].partition == part &&
            !strcmp(ks->known[i].topic, topic))
            return &ks->known[i];
    if (!add)
        return NULL;
    bs_kafkastore_known *nk = bs_grow(ks->known, &ks->capknown,
                                      ks->nknown + 1, sizeof(*nk), 16);
    if (!nk)
        return NULL;
    ks->known = nk;
    bs_kafkastore_known *k = &ks->known[ks->nknown++];
    memset(k, 0, sizeof(*k));
    snprintf(k->topic, sizeof(k->topic), "%s", topic);
    k->partition = part;
    return k;
}

bool bs_kafkastore_known_reserve(bs_kafkastore_known *k, size_t n)
{
    bs_store_manifest *c = bs_grow(k->chain, &k->cap, n ? n : 1,
                                   sizeof(*c), 4);
    if (!c)
        return false;
    k->chain = c;
    return true;
}

/* -- bounds and ranges ---------------------------------------------------- */

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

int bs_kafkastore_bounds(bs_kafkastore *ks, int32_t cp, bool ask_leaders,
                         int64_t *lo, int64_t *hi, char *errstr,
                         size_t errstr_size)
{
    rd_kafka_resp_err_t err;
    /* A topic created a moment ago (by this store, or beside it) is not
     * yet known to every broker: those answer that it does not exist.
     * Leaders are asked for first, and again before each retry: the reader
     * may have been idle while a broker went away, and librdkafka 2.0.2
     * sends a watermark query to the leader it last knew, dead or not. */
    double known_by = bs_now() + BS_TIMEOUT_TOPIC_KNOWN_MS / 1000.0;
    if (ask_leaders)
        (void)bs_topic_partitions(ks->reader, ks->topic,
                                  BS_TIMEOUT_BROKER_MS, NULL, NULL, 0);
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

/* The range of partition cp among r[0..n), NULL if none is. */
static bs_kafkastore_range *range_of(bs_kafkastore_range *r, size_t n,
                                     int32_t cp)
{
    for (size_t i = 0; i < n; i++)
        if (r[i].cp == cp)
            return &r[i];
    return NULL;
}

int bs_kafkastore_read_ranges(bs_kafkastore *ks, bs_kafkastore_range *r,
                              size_t n, char *errstr, size_t errstr_size)
{
    rd_kafka_topic_partition_list_t *a =
        rd_kafka_topic_partition_list_new((int)n);
    size_t open = 0;
    for (size_t i = 0; i < n; i++) {
        r[i].done = r[i].from >= r[i].to;
        if (!r[i].done) {
            rd_kafka_topic_partition_list_add(a, ks->topic, r[i].cp)
                ->offset = r[i].from;
            open++;
        }
    }
    rd_kafka_resp_err_t err =
        open ? rd_kafka_assign(ks->reader, a) : RD_KAFKA_RESP_ERR_NO_ERROR;
    rd_kafka_topic_partition_list_destroy(a);
    if (err) {
        snprintf(errstr, errstr_size, "checkpoint topic %s: assign: %s",
                 ks->topic, rd_kafka_err2str(err));
        return -1;
    }
    if (!open)
        return 0;
    int rc = 0;
    double deadline = bs_now() + BS_TIMEOUT_STORE_READ_MS / 1000.0;
    while (open > 0) {
        if (bs_now() > deadline) {
            const bs_kafkastore_range *late = r;
            while (late->done)
                late++;
            snprintf(errstr, errstr_size, "checkpoint topic %s [%d]: not "
                     "read within %d ms", ks->topic, (int)late->cp,
                     BS_TIMEOUT_STORE_READ_MS);
            rc = BS_STORE_UNREACHABLE;
            break;
        }
        rd_kafka_message_t *m = rd_kafka_consumer_poll(ks->reader,
                                                       BS_POLL_MS);
        if (!m)
            continue;
        bs_kafkastore_range *g = range_of(r, n, m->partition);
        if (!g || g->done) {
            rd_kafka_message_destroy(m); /* not ours, or read already */
            continue;
        }
        /* read_committed: the end is the last stable offset, which an
         * open transaction (another instance's, a zombie's until it is
         * aborted) holds below the high watermark; what lies beyond is
         * not committed yet.  Without transactions the two are equal.  A
         * compacted topic has gaps: the first record at or past `to`
         * ends the range unread. */
        char what[300];
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF)
            g->done = true;
        else if (m->err == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED &&
                 bs_refusal_text(m->err, "Read", ks->topic, what,
                                 sizeof(what))) {
            /* No Read ACL: waiting would not heal it. */
            snprintf(errstr, errstr_size, "checkpoint topic %s [%d]: %s "
                     "refused (%s)", ks->topic, (int)g->cp, what,
                     rd_kafka_err2name(m->err));
            rc = -1;
        } else if (!m->err && m->offset >= g->to)
            g->done = true;
        else if (!m->err)
            g->done = g->fn(m, g->op) != 0 || m->offset + 1 >= g->to;
        rd_kafka_message_destroy(m);
        if (rc)
            break;
        if (g->done)
            open--;
    }
    rd_kafka_assign(ks->reader, NULL);
    return rc;
}

/* -- a restore ------------------------------------------------------------ */

/* One query's reading: its manifest key, the newest manifest found, the
 * chain of states it names and their chunks gathered. */
typedef struct want {
    bs_store_query *q;
    char key[600];
    size_t klen;
    char name[700]; /* "TOPIC:KEY", for errors */
    int32_t cp;
    bool seen;     /* a record with the key (a tombstone too) in a range
                    * read before the current one: newer than any there */
    bool seen_now; /* ... in the current one */
    char *value;   /* the newest manifest; NULL if none or deleted */
    size_t len;
    bs_store_manifest *states;
    size_t nstates;
    bs_store_chain *chain;
    bool complete; /* every chunk of the chain gathered */
    bool open;     /* q not answered for good yet */
} want;

/* One partition of the topic and the queries it holds. */
typedef struct cpread {
    int32_t cp;
    int64_t lo, hi;
    int64_t to, width; /* the manifests' search: the next range's end and
                        * width */
    want **w;
    size_t nw;
    bool oom;
} cpread;

/* The manifest is rewritten every round its partition is checkpointed, so
 * the newest is near the end: ranges are read backwards from the end,
 * each twice the one after it, until one holds the key; the last record
 * of the key in that range is the newest.  The rest of the partition
 * (older states, not yet compacted away) is never read. */
#define FIND_FIRST_RANGE 64

/* Whether the search of c goes on: a key not seen yet, and more below. */
static bool searching(const cpread *c)
{
    if (c->to <= c->lo || c->oom)
        return false;
    for (size_t i = 0; i < c->nw; i++)
        if (!c->w[i]->seen)
            return true;
    return false;
}

static int on_manifest(const rd_kafka_message_t *m, void *op)
{
    cpread *c = op;
    for (size_t i = 0; i < c->nw; i++) {
        want *w = c->w[i];
        if (w->seen || m->key_len != w->klen ||
            memcmp(m->key, w->key, w->klen) != 0)
            continue;
        w->seen_now = true;
        free(w->value);
        w->value = NULL;
        w->len = 0;
        if (m->payload) { /* NULL: deleted */
            w->value = malloc(m->len ? m->len : 1);
            if (!w->value) {
                c->oom = true;
                return 1;
            }
            memcpy(w->value, m->payload, m->len);
            w->len = m->len;
        }
    }
    return 0;
}

/* Every chain of c still gathering is offered the record: 1 once all
 * are complete. */
static int on_chunk(const rd_kafka_message_t *m, void *op)
{
    cpread *c = op;
    bool all = true;
    for (size_t i = 0; i < c->nw; i++) {
        want *w = c->w[i];
        if (w->chain && !w->complete)
            w->complete = bs_store_chain_add(w->chain, m->offset, m->key,
                                             m->key_len, m->payload,
                                             m->len) != 0;
        all = all && (!w->chain || w->complete);
    }
    return all;
}

/* Every query of c not answered yet is answered rc, with err. */
static void fail_cp(cpread *c, int rc, const char *err)
{
    for (size_t i = 0; i < c->nw; i++) {
        want *w = c->w[i];
        if (!w->open)
            continue;
        w->q->rc = rc;
        snprintf(w->q->err, sizeof(w->q->err), "%s", err);
        bs_store_chain_free(w->chain);
        w->chain = NULL;
        w->open = false;
    }
}

/* The manifests of every cp at once, backwards from the ends. */
static int find_manifests(bs_kafkastore *ks, cpread *cps, size_t ncp,
                          bs_kafkastore_range *r, char *errstr,
                          size_t errstr_size)
{
    for (;;) {
        size_t nr = 0;
        for (size_t i = 0; i < ncp; i++) {
            cpread *c = &cps[i];
            if (!searching(c))
                continue;
            int64_t from = c->to - c->lo > c->width ? c->to - c->width
                                                    : c->lo;
            r[nr++] = (bs_kafkastore_range){c->cp, from, c->to, on_manifest,
                                            c, false};
            c->to = from;
            c->width *= 2;
        }
        if (nr == 0)
            return 0;
        int rc = bs_kafkastore_read_ranges(ks, r, nr, errstr, errstr_size);
        if (rc != 0)
            return rc;
        for (size_t i = 0; i < ncp; i++)
            for (size_t j = 0; j < cps[i].nw; j++)
                cps[i].w[j]->seen |= cps[i].w[j]->seen_now;
    }
}

/* w's manifest parsed and its chain made ready to gather (w stays
 * open), or w answered: 0 (no manifest, or deleted) or -1. */
static void start_chain(want *w)
{
    bs_store_query *q = w->q;
    w->open = false;
    if (!w->value) {
        q->rc = 0;
        return;
    }
    int parsed = bs_store_manifest_parse(w->value, w->len, &w->states,
                                         &w->nstates);
    if (parsed != 0) {
        q->rc = -1;
        snprintf(q->err, sizeof(q->err), "%.300s: damaged manifest", w->name);
        return;
    }
    uint64_t bytes = 0;
    for (size_t i = 0; i < w->nstates; i++)
        bytes += w->states[i].size;
    w->chain = bs_store_chain_new(w->key, w->states, w->nstates);
    if (!w->chain) {
        q->rc = -1;
        snprintf(q->err, sizeof(q->err), "%.300s: cannot allocate %llu bytes for "
                 "%zu states", w->name, (unsigned long long)bytes,
                 w->nstates);
        return;
    }
    w->open = true;
}

/* The gathered chain of w decoded into q->out, checked against
 * at_offset, and the chain known for the next put. */
static void finish_chain(bs_kafkastore *ks, want *w)
{
    bs_store_query *q = w->q;
    w->open = false;
    int rc = bs_store_chain_decode(w->chain, w->name, &q->out, q->err,
                                   sizeof(q->err));
    if (rc == 1 && q->at_offset != BS_STORE_NEWEST &&
        q->out.next_offset > q->at_offset) {
        /* The topic keeps one chain per partition (compaction), restored
         * to its newest state. */
        snprintf(q->err, sizeof(q->err), "%.300s: the checkpoint covers up to "
                 "offset %lld, past the committed %lld, and no older one is "
                 "kept", w->name, (long long)q->out.next_offset,
                 (long long)q->at_offset);
        bs_ckpt_free(&q->out);
        rc = BS_STORE_AHEAD;
    }
    q->rc = rc;
    bs_kafkastore_known *k =
        rc == 1 ? bs_kafkastore_known_find(ks, q->topic, q->partition, true)
                : NULL;
    size_t n = w->nstates;
    if (k && bs_kafkastore_known_reserve(k, n)) {
        memcpy(k->chain, w->states, n * sizeof(*w->states));
        k->n = n;
        k->tip_id = q->out.id;
        /* a v1 manifest's snapshot has record seq 0 under key seq >= 1 */
        k->tip_chainable = (int64_t)q->out.seq == w->states[n - 1].seq;
        k->tip_input = q->out.next_offset;
        k->committed = true; /* read at read_committed, or the newest */
    } else if (k) {
        k->n = 0; /* the next put is a snapshot and tombstones nothing */
    }
}

/* The bounds of every cp, the leaders asked for once: 0, else the first
 * failure's, every query of that cp answered with it. */
static int all_bounds(bs_kafkastore *ks, cpread *cps, size_t ncp)
{
    (void)bs_topic_partitions(ks->reader, ks->topic, BS_TIMEOUT_BROKER_MS,
                              NULL, NULL, 0);
    for (size_t i = 0; i < ncp; i++) {
        char err[BS_ERRSTR_SIZE];
        int rc = bs_kafkastore_bounds(ks, cps[i].cp, false, &cps[i].lo,
                                      &cps[i].hi, err, sizeof(err));
        if (rc != 0) {
            for (size_t j = i; j < ncp; j++)
                fail_cp(&cps[j], rc, err);
            return rc;
        }
        cps[i].to = cps[i].hi;
        cps[i].width = FIND_FIRST_RANGE;
    }
    return 0;
}

/* Every chain's chunks, every cp read once from the oldest chunk 0 any of
 * its chains names. */
static void gather(bs_kafkastore *ks, cpread *cps, size_t ncp,
                   bs_kafkastore_range *r)
{
    size_t nr = 0;
    for (size_t i = 0; i < ncp; i++) {
        cpread *c = &cps[i];
        int64_t from = INT64_MAX;
        for (size_t j = 0; j < c->nw; j++)
            if (c->w[j]->chain) {
                int64_t f = c->w[j]->states[0].first;
                f = f < c->lo ? c->lo : f;
                from = f < from ? f : from;
            }
        if (from != INT64_MAX)
            r[nr++] = (bs_kafkastore_range){c->cp, from, c->hi, on_chunk, c,
                                            false};
    }
    char err[BS_ERRSTR_SIZE];
    int rc = nr ? bs_kafkastore_read_ranges(ks, r, nr, err, sizeof(err)) : 0;
    for (size_t i = 0; i < ncp; i++) {
        if (rc != 0) {
            fail_cp(&cps[i], rc, err);
            continue;
        }
        for (size_t j = 0; j < cps[i].nw; j++) {
            want *w = cps[i].w[j];
            if (!w->chain)
                continue;
            finish_chain(ks, w);
            /* Its records go as soon as its state is decoded: a restore's
             * peak is every partition's state and one chain's records, as
             * when partitions were read one after another. */
            bs_store_chain_free(w->chain);
            w->chain = NULL;
        }
    }
}

void bs_kafkastore_get_many(void *impl, bs_store_query *q, size_t n)
{
    bs_kafkastore *ks = impl;
    if (n == 0)
        return;
    want *ws = calloc(n, sizeof(*ws));
    want **byc = calloc(n, sizeof(*byc)); /* grouped by cp */
    cpread *cps = calloc(n, sizeof(*cps));
    bs_kafkastore_range *r = calloc(n, sizeof(*r));
    size_t ncp = 0;
    if (!ws || !byc || !cps || !r) {
        for (size_t i = 0; i < n; i++) {
            q[i].rc = -1;
            snprintf(q[i].err, sizeof(q[i].err), "out of memory");
        }
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        want *w = &ws[i];
        w->q = &q[i];
        w->open = true;
        q[i].rc = 0;
        q[i].err[0] = '\0';
        memset(&q[i].out, 0, sizeof(q[i].out));
        int klen = bs_kafkastore_manifest_key(ks, q[i].topic, q[i].partition,
                                              w->key, sizeof(w->key));
        w->klen = (size_t)klen;
        snprintf(w->name, sizeof(w->name), "%s:%s", ks->topic, w->key);
        w->cp = bs_kafkastore_partition(ks, q[i].topic, q[i].partition);
        size_t c = 0;
        while (c < ncp && cps[c].cp != w->cp)
            c++;
        if (c == ncp)
            cps[ncp++].cp = w->cp;
        cps[c].nw++;
    }
    /* Each cp's queries, a slice of byc. */
    for (size_t c = 0, at = 0; c < ncp; c++) {
        cps[c].w = &byc[at];
        at += cps[c].nw;
        cps[c].nw = 0;
    }
    for (size_t i = 0; i < n; i++) {
        cpread *c = cps;
        while (c->cp != ws[i].cp)
            c++;
        c->w[c->nw++] = &ws[i];
    }
    if (all_bounds(ks, cps, ncp) != 0)
        goto out;
    char err[BS_ERRSTR_SIZE];
    int rc = find_manifests(ks, cps, ncp, r, err, sizeof(err));
    for (size_t c = 0; c < ncp; c++) {
        if (rc != 0) {
            fail_cp(&cps[c], rc, err);
        } else if (cps[c].oom) {
            char oom[BS_ERRSTR_SIZE];
            snprintf(oom, sizeof(oom), "%.300s: out of memory",
                     cps[c].w[0]->name);
            fail_cp(&cps[c], -1, oom);
        } else {
            for (size_t j = 0; j < cps[c].nw; j++)
                start_chain(cps[c].w[j]);
        }
    }
    if (rc == 0)
        gather(ks, cps, ncp, r);
out:
    for (size_t i = 0; ws && i < n; i++) {
        free(ws[i].value);
        free(ws[i].states);
        bs_store_chain_free(ws[i].chain);
    }
    free(ws);
    free(byc);
    free(cps);
    free(r);
}

int bs_kafkastore_get(void *impl, const char *topic, int32_t part,
                      int64_t at_offset, bs_checkpoint *out, char *errstr,
                      size_t errstr_size)
{
    bs_store_query q = {.topic = topic, .partition = part,
                        .at_offset = at_offset};
    bs_kafkastore_get_many(impl, &q, 1);
    if (q.rc == 1)
        *out = q.out;
    else if (q.rc < 0)
        snprintf(errstr, errstr_size, "%s", q.err);
    return q.rc;
}
