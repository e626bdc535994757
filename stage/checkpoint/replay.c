/*
 * replay.c -- see replay.h.
 */
#include "checkpoint/replay.h"
#include "keys/dedup_filter.h"
#include "kafka/fetch_wake.h"
#include "kafka/kafka_util.h"
#include "base/log.h"
#include "keys/record_key.h"
#include "base/timeouts.h"
#include "base/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The decimal number in s[0..n): digits only (no sign, no blanks), at most
 * max. */
static bool parse_decimal(const char *s, size_t n, int64_t max, int64_t *out)
{
    if (n == 0)
        return false;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        int d = s[i] - '0';
        if (v > (max - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

bool bs_parse_src(const void *v, size_t len, char *topic, size_t topic_size,
                  int32_t *partition, int64_t *offset)
{
    /* The stage writes "%s:%d:%lld"; anything else is not ours.  Parsed in
     * place: the bytes are not NUL-terminated. */
    const char *s = v;
    if (!s || len == 0 || memchr(s, '\0', len))
        return false;
    const char *c2 = memrchr(s, ':', len);
    if (!c2)
        return false;
    const char *c1 = memrchr(s, ':', (size_t)(c2 - s));
    if (!c1 || c1 == s)
        return false;
    int64_t part, off;
    size_t tlen = (size_t)(c1 - s);
    if (!parse_decimal(c1 + 1, (size_t)(c2 - c1 - 1), INT32_MAX, &part) ||
        !parse_decimal(c2 + 1, len - (size_t)(c2 + 1 - s), INT64_MAX, &off) ||
        tlen >= topic_size)
        return false;
    memcpy(topic, s, tlen);
    topic[tlen] = '\0';
    *partition = (int32_t)part;
    *offset = off;
    return true;
}

/* A skip entry with its key, while the tail is read. */
typedef struct skip_ent {
    int64_t off;
    bs_replay_key key;
} skip_ent;

static int cmp_ent(const void *a, const void *b)
{
    int64_t x = ((const skip_ent *)a)->off, y = ((const skip_ent *)b)->off;
    return (x > y) - (x < y);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Appends an entry: to skip, and for a windowed filter to skip_keys (both
 * grown together; cap is theirs). */
static int skip_push(bs_replay_target *t, size_t *cap, int64_t off,
                     bs_replay_key key)
{
    bool keyed = bf_filter_windowed(t->filter) != NULL;
    size_t nc = *cap, kc = *cap; /* both grow alike */
    int64_t *ns = bs_grow(t->skip, &nc, t->nskip + 1, sizeof(*ns), 256);
    if (!ns)
        return -1;
    t->skip = ns;
    if (keyed) {
        bs_replay_key *nk = bs_grow(t->skip_keys, &kc, t->nskip + 1,
                                    sizeof(*nk), 256);
        if (!nk)
            return -1;
        t->skip_keys = nk;
    }
    *cap = nc;
    t->skip[t->nskip] = off;
    if (keyed)
        t->skip_keys[t->nskip] = key;
    t->nskip++;
    return 0;
}

/* Sorts a target's skip list by offset (its keys with it). */
static int skip_sort(bs_replay_target *t)
{
    if (t->nskip < 2)
        return 0;
    if (!t->skip_keys) {
        qsort(t->skip, t->nskip, sizeof(int64_t), cmp_i64);
        return 0;
    }
    skip_ent *e = malloc(t->nskip * sizeof(*e));
    if (!e)
        return -1;
    for (size_t i = 0; i < t->nskip; i++)
        e[i] = (skip_ent){t->skip[i], t->skip_keys[i]};
    qsort(e, t->nskip, sizeof(*e), cmp_ent);
    for (size_t i = 0; i < t->nskip; i++) {
        t->skip[i] = e[i].off;
        t->skip_keys[i] = e[i].key;
    }
    free(e);
    return 0;
}

/* Records between fetch wake-up checks, as fetch_wake.h asks: every few
 * dozen records, and at every empty poll. */
#define WAKE_CHECK_EVERY 64

/* One replay's reading: the targets, and per output partition the range
 * [from, to) still to read (to = -1 once read). */
typedef struct tail_read {
    rd_kafka_t *tail;
    const char *topic; /* the output topic */
    const bs_config_keyspec *key;
    bs_normalize norm; /* the dedup key normalized as the stage does */
    uint64_t seed;
    bs_replay_target *targets;
    size_t n;
    size_t *caps;    /* per target: its skip list's capacity */
    uint32_t nparts; /* output partitions any target has a watermark of */
    int64_t *from, *to;
    int pending;   /* output partitions not read to their end yet */
    uint64_t read; /* records read */
} tail_read;

/* The output partitions any target recorded a watermark of: 0..max-1. */
static uint32_t watermarked_partitions(const bs_replay_target *targets,
                                       size_t n)
{
    uint32_t nparts = 0;
    for (size_t i = 0; i < n; i++)
        if (targets[i].nwm > nparts)
            nparts = targets[i].nwm;
    return nparts;
}

/* from[p]: the smallest watermark any target recorded for partition p,
 * INT64_MAX if none did. */
static void lowest_watermarks(tail_read *r)
{
    for (uint32_t p = 0; p < r->nparts; p++)
        r->from[p] = INT64_MAX;
    for (size_t i = 0; i < r->n; i++)
        for (uint32_t w = 0; w < r->targets[i].nwm; w++) {
            const bs_ckpt_wm *wm = &r->targets[i].wm[w];
            if (wm->partition >= 0 && (uint32_t)wm->partition < r->nparts &&
                wm->high < r->from[wm->partition])
                r->from[wm->partition] = wm->high;
        }
}

/* Each partition's range: from its lowest watermark (or its low one, if
 * retention removed part of the tail) to its end as it is now, which
 * nothing of ours passes (the caller restores before it produces).
 * Partitions with records to read are added to `assign`. */
static int tail_ranges(tail_read *r, rd_kafka_topic_partition_list_t *assign,
                       char *errstr, size_t errstr_size)
{
    /* Leaders as they are now: this client may have been idle while a
     * broker went away, and a query sent to a dead leader waits out its
     * whole timeout. */
    (void)bs_topic_partitions(r->tail, r->topic, BS_TIMEOUT_BROKER_MS, NULL,
                              NULL, 0);
    for (uint32_t p = 0; p < r->nparts; p++) {
        int64_t lo, hi;
        rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(
            r->tail, r->topic, (int32_t)p, &lo, &hi, BS_TIMEOUT_BROKER_MS);
        if (err) {
            snprintf(errstr, errstr_size, "replay: watermarks of %s [%u]: %s",
                     r->topic, p, rd_kafka_err2str(err));
            return -1;
        }
        if (r->from[p] == INT64_MAX)
            r->from[p] = hi; /* no target recorded it: nothing to read */
        if (r->from[p] < lo) {
            /* Retention removed part of the tail: what was there cannot
             * be recognised, so some records may be produced twice. */
            bs_log(BS_LOG_WARN, "output tail partly gone, replaying what "
                   "is left", "topic=%s partition=%u from=%lld low=%lld",
                   r->topic, p, (long long)r->from[p], (long long)lo);
            r->from[p] = lo;
        }
        r->to[p] = hi;
        if (r->from[p] < r->to[p]) {
            rd_kafka_topic_partition_list_add(assign, r->topic, (int32_t)p)
                ->offset = r->from[p];
            r->pending++;
        }
    }
    return 0;
}

/* The target a tail record stands for: the one whose input partition its
 * bloomstage-src header names, at or after the target's checkpoint; NULL
 * if none (no header, not ours, before the checkpoint).  *so: its input
 * offset. */
static bs_replay_target *record_target(const tail_read *r,
                                       const rd_kafka_message_t *m,
                                       int64_t *so)
{
    rd_kafka_headers_t *hdrs;
    const void *v;
    size_t vlen;
    char topic[256];
    int32_t sp;
    if (rd_kafka_message_headers(m, &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR ||
        rd_kafka_header_get_last(hdrs, BS_HDR_SRC, &v, &vlen) !=
            RD_KAFKA_RESP_ERR_NO_ERROR ||
        !bs_parse_src(v, vlen, topic, sizeof(topic), &sp, so))
        return NULL;
    for (size_t i = 0; i < r->n; i++) {
        bs_replay_target *t = &r->targets[i];
        if (t->partition == sp && *so >= t->from_offset &&
            strcmp(t->topic, topic) == 0)
            return t;
    }
    return NULL;
}

/* A tail record of target t at input offset so: its offset onto the skip
 * list, its key into the filter and noted by the audit sample (windowed:
 * kept with the skip entry, added and noted when consumption reaches it,
 * in the slice the first pass added it).  -1: out of memory. */
static int replay_record(tail_read *r, bs_replay_target *t,
                         rd_kafka_message_t *m, int64_t so)
{
    t->records++;
    bs_record_keys keys;
    bs_record_keys_init(&keys, m);
    const void *k;
    size_t klen;
    bs_replay_key rk = {{0, 0}, false};
    if ((rk.have = bs_record_key_norm(&keys, r->key, r->norm, &k, &klen)))
        rk.h = bf_hash_key(k, klen, r->seed);
    int rc = skip_push(t, &r->caps[t - r->targets], so, rk);
    bool now = rc == 0 && rk.have && !bf_filter_windowed(t->filter);
    if (now && bs_dedup_add(t->filter, rk.h) < 0)
        bs_log(BS_LOG_ERROR, "replay: dedup filter at dedup.max.bytes",
               "topic=%s partition=%d", t->topic, (int)t->partition);
    if (now && t->audit && bf_audit_note(t->audit, rk.h) < 0)
        bs_log(BS_LOG_ERROR, "replay: the audit sample cannot grow (out of "
               "memory): a sampled key is not held", "topic=%s "
               "partition=%d", t->topic, (int)t->partition);
    bs_record_keys_reset(&keys);
    return rc;
}

/* One message of the tail (destroyed here): a record is replayed, an EOF
 * event at or past a partition's end ends it.  0, or -1 (out of memory) /
 * BS_REPLAY_REFUSED with errstr. */
static int tail_message(tail_read *r, bs_fetch_wake *wake,
                        rd_kafka_message_t *m, char *errstr,
                        size_t errstr_size)
{
    if (m->err == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED) {
        snprintf(errstr, errstr_size, "replay: reading the output tail "
                 "of %s: %s", r->topic, rd_kafka_message_errstr(m));
        rd_kafka_message_destroy(m);
        return BS_REPLAY_REFUSED;
    }
    int32_t op = m->partition;
    if (op < 0 || (uint32_t)op >= r->nparts || r->to[op] < 0) {
        rd_kafka_message_destroy(m); /* not ours, or done already */
        return 0;
    }
    bool last;
    if (m->err) {
        last = m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF &&
               m->offset >= r->to[op];
        if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
            bs_log(BS_LOG_WARN, "replay: consume error", "error=%s",
                   rd_kafka_err2name(m->err));
    } else {
        last = m->offset + 1 >= r->to[op];
        if (wake) {
            bs_fetch_wake_note(wake, m->key_len + m->len);
            if (r->read % WAKE_CHECK_EVERY == 0)
                bs_fetch_wake_check(wake);
        }
        r->read++;
        int64_t so;
        bs_replay_target *t = record_target(r, m, &so);
        if (t && replay_record(r, t, m, so) != 0) {
            snprintf(errstr, errstr_size, "out of memory");
            rd_kafka_message_destroy(m);
            return -1;
        }
    }
    rd_kafka_message_destroy(m);
    if (last) {
        r->to[op] = -1; /* done with this partition */
        r->pending--;
    }
    return 0;
}

/* Messages taken from the tail's queue at a time: what is queued already
 * comes in one call (one lock of the queue, not one a message). */
#define TAIL_BATCH 512

/* Reads the assigned tail until every partition is read to its end (an
 * EOF event ends one whose last offsets hold no record: transaction
 * markers, compaction), replaying each record.  What is queued is taken
 * in batches without waiting; only an empty queue waits, up to BS_POLL_MS
 * for one message (a batch call that waits would wait to fill the batch).
 * -1 with errstr past timeout_ms or out of memory; BS_REPLAY_REFUSED with
 * errstr at the brokers' first refusal of a fetch. */
static int read_tail(tail_read *r, bs_fetch_wake *wake, int timeout_ms,
                     char *errstr, size_t errstr_size)
{
    rd_kafka_queue_t *q = rd_kafka_queue_get_consumer(r->tail);
    if (!q) {
        snprintf(errstr, errstr_size, "replay: the tail reader has no "
                 "consumer queue");
        return -1;
    }
    rd_kafka_message_t *batch[TAIL_BATCH];
    double deadline = bs_now() + timeout_ms / 1000.0;
    int rc = 0;
    while (rc == 0 && r->pending > 0) {
        if (bs_now() > deadline) {
            snprintf(errstr, errstr_size, "replay: the output tail of %s was "
                     "not read within %d ms (%llu records read)",
                     r->topic, timeout_ms, (unsigned long long)r->read);
            rc = -1;
            break;
        }
        ssize_t got = rd_kafka_consume_batch_queue(q, 0, batch, TAIL_BATCH);
        if (got <= 0) {
            batch[0] = rd_kafka_consumer_poll(r->tail, BS_POLL_MS);
            got = batch[0] != NULL;
        }
        if (got == 0 && wake)
            bs_fetch_wake_check(wake);
        ssize_t i = 0;
        while (i < got && rc == 0)
            rc = tail_message(r, wake, batch[i++], errstr, errstr_size);
        while (i < got)
            rd_kafka_message_destroy(batch[i++]); /* after a failure */
    }
    rd_kafka_queue_destroy(q);
    return rc;
}

int bs_replay_tail(rd_kafka_t *tail, const char *output_topic,
                   const bs_config_keyspec *key, bs_normalize norm,
                   uint64_t seed,
                   bs_replay_target *targets, size_t n, int timeout_ms,
                   char *errstr, size_t errstr_size)
{
    if (n == 0)
        return 0;
    uint32_t nparts = watermarked_partitions(targets, n);
    if (nparts == 0)
        return 0; /* no watermarks recorded: nothing was produced after */
    tail_read r = {.tail = tail,
                   .topic = output_topic,
                   .key = key,
                   .norm = norm,
                   .seed = seed,
                   .targets = targets,
                   .n = n,
                   .caps = calloc(n, sizeof(size_t)),
                   .nparts = nparts,
                   .from = malloc(nparts * sizeof(int64_t)),
                   .to = malloc(nparts * sizeof(int64_t))};
    rd_kafka_topic_partition_list_t *assign =
        rd_kafka_topic_partition_list_new((int)nparts);
    int rc = -1;
    if (!r.from || !r.to || !r.caps) {
        snprintf(errstr, errstr_size, "out of memory");
        goto out;
    }
    lowest_watermarks(&r);
    if (tail_ranges(&r, assign, errstr, errstr_size) != 0)
        goto out;
    if (r.pending == 0) {
        rc = 0;
        goto out;
    }
    rd_kafka_resp_err_t aerr = rd_kafka_assign(tail, assign);
    if (aerr) {
        snprintf(errstr, errstr_size, "replay: assign: %s",
                 rd_kafka_err2str(aerr));
        goto out;
    }
    /* A tail of more than the read-ahead would otherwise wait a second at
     * every refill (fetch_wake.h).  Without the helper the replay is only
     * slower. */
    char werr[BS_ERRSTR_SIZE];
    bs_fetch_wake *wake = bs_fetch_wake_new(tail, NULL, werr, sizeof(werr));
    if (!wake)
        bs_log(BS_LOG_WARN, "replay: no fetch wake-ups", "error=%s", werr);
    rc = read_tail(&r, wake, timeout_ms, errstr, errstr_size);
    if (rc == 0) {
        for (size_t i = 0; i < n && rc == 0; i++)
            if (skip_sort(&targets[i]) != 0) {
                snprintf(errstr, errstr_size, "out of memory");
                rc = -1;
            }
    }
    bs_fetch_wake_destroy(wake); /* before the assignment goes */
    rd_kafka_assign(tail, NULL);
out:
    rd_kafka_topic_partition_list_destroy(assign);
    free(r.from);
    free(r.to);
    free(r.caps);
    return rc;
}

int bs_output_watermarks(rd_kafka_t *rk, const char *topic, int n,
                         bs_ckpt_wm *wm, int timeout_ms, char *errstr,
                         size_t errstr_size)
{
    /* One ListOffsets request per leader for all partitions: "the offset
     * for timestamp -1" is each partition's end. */
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(n);
    for (int p = 0; p < n; p++)
        rd_kafka_topic_partition_list_add(l, topic, p)->offset =
            RD_KAFKA_OFFSET_END;
    rd_kafka_resp_err_t err = rd_kafka_offsets_for_times(rk, l, timeout_ms);
    int rc = 0;
    for (int i = 0; !err && i < l->cnt; i++) {
        const rd_kafka_topic_partition_t *e = &l->elems[i];
        if (e->err || e->offset < 0 || e->partition < 0 ||
            e->partition >= n) {
            err = e->err ? e->err : RD_KAFKA_RESP_ERR__BAD_MSG;
            break;
        }
        wm[e->partition].partition = e->partition;
        wm[e->partition].high = e->offset;
    }
    if (err) {
        snprintf(errstr, errstr_size, "end offsets of %s: %s", topic,
                 rd_kafka_err2str(err));
        rc = -1;
    }
    rd_kafka_topic_partition_list_destroy(l);
    return rc;
}
