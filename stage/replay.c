/*
 * replay.c -- see replay.h.
 */
#include "replay.h"
#include "dedup_filter.h"
#include "fetch_wake.h"
#include "kafka_util.h"
#include "log.h"
#include "record_key.h"
#include "timeouts.h"
#include "util.h"

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
    if (t->nskip == *cap) {
        size_t nc = *cap ? *cap * 2 : 256;
        int64_t *ns = realloc(t->skip, nc * sizeof(*ns));
        if (!ns)
            return -1;
        t->skip = ns;
        if (keyed) {
            bs_replay_key *nk = realloc(t->skip_keys, nc * sizeof(*nk));
            if (!nk)
                return -1;
            t->skip_keys = nk;
        }
        *cap = nc;
    }
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

int bs_replay_tail(rd_kafka_t *tail, const char *output_topic,
                   const bs_config_keyspec *key, uint64_t seed,
                   bs_replay_target *targets, size_t n, int timeout_ms,
                   char *errstr, size_t errstr_size)
{
    if (n == 0)
        return 0;
    /* Per output partition: start at the smallest watermark any target
     * recorded, stop at the end as it is now (nothing of ours is in flight:
     * the caller restores before it produces). */
    uint32_t nparts = 0;
    for (size_t i = 0; i < n; i++)
        if (targets[i].nwm > nparts)
            nparts = targets[i].nwm;
    if (nparts == 0)
        return 0; /* no watermarks recorded: nothing was produced after */
    int64_t *from = malloc(nparts * sizeof(*from));
    int64_t *to = malloc(nparts * sizeof(*to));
    size_t *caps = calloc(n, sizeof(*caps));
    rd_kafka_topic_partition_list_t *assign =
        rd_kafka_topic_partition_list_new((int)nparts);
    int rc = -1;
    bs_fetch_wake *wake = NULL;
    if (!from || !to || !caps) {
        snprintf(errstr, errstr_size, "out of memory");
        goto out;
    }
    for (uint32_t p = 0; p < nparts; p++)
        from[p] = INT64_MAX;
    for (size_t i = 0; i < n; i++)
        for (uint32_t w = 0; w < targets[i].nwm; w++) {
            const bs_ckpt_wm *wm = &targets[i].wm[w];
            if (wm->partition >= 0 && (uint32_t)wm->partition < nparts &&
                wm->high < from[wm->partition])
                from[wm->partition] = wm->high;
        }
    /* Leaders as they are now: this client may have been idle while a
     * broker went away, and a query sent to a dead leader waits out its
     * whole timeout. */
    (void)bs_topic_partitions(tail, output_topic, BS_TIMEOUT_BROKER_MS, NULL,
                              0);
    int pending = 0;
    for (uint32_t p = 0; p < nparts; p++) {
        int64_t lo, hi;
        rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(
            tail, output_topic, (int32_t)p, &lo, &hi, BS_TIMEOUT_BROKER_MS);
        if (err) {
            snprintf(errstr, errstr_size, "replay: watermarks of %s [%u]: %s",
                     output_topic, p, rd_kafka_err2str(err));
            goto out;
        }
        if (from[p] == INT64_MAX)
            from[p] = hi; /* no target recorded it: nothing to read */
        if (from[p] < lo) {
            /* Retention removed part of the tail: what was there cannot
             * be recognised, so some records may be produced twice. */
            bs_log(BS_LOG_WARN, "output tail partly gone, replaying what "
                   "is left", "topic=%s partition=%u from=%lld low=%lld",
                   output_topic, p, (long long)from[p], (long long)lo);
            from[p] = lo;
        }
        to[p] = hi;
        if (from[p] < to[p]) {
            rd_kafka_topic_partition_list_add(assign, output_topic,
                                              (int32_t)p)
                ->offset = from[p];
            pending++;
        }
    }
    if (pending == 0) {
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
     * every refill (fetch_wake.h): 12 s for 315k records in bench/scale.
     * Without the helper the replay is only slower. */
    char werr[256];
    wake = bs_fetch_wake_new(tail, NULL, werr, sizeof(werr));
    if (!wake)
        bs_log(BS_LOG_WARN, "replay: no fetch wake-ups", "error=%s", werr);
    double deadline = bs_now() + timeout_ms / 1000.0;
    uint64_t read = 0;
    char topic[256];
    while (pending > 0) {
        if (bs_now() > deadline) {
            snprintf(errstr, errstr_size, "replay: the output tail of %s was "
                     "not read within %d ms (%llu records read)",
                     output_topic, timeout_ms, (unsigned long long)read);
            goto unassign;
        }
        rd_kafka_message_t *m = rd_kafka_consumer_poll(tail, BS_POLL_MS);
        if (wake && (!m || read % 64 == 0))
            bs_fetch_wake_check(wake);
        if (!m)
            continue;
        int32_t op = m->partition;
        if (op < 0 || (uint32_t)op >= nparts || to[op] < 0) {
            rd_kafka_message_destroy(m); /* not ours, or done already */
            continue;
        }
        if (m->err) {
            /* The end of a partition whose last offsets hold no record
             * (transaction markers, compaction) is an EOF event. */
            if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF &&
                m->offset >= to[op]) {
                to[op] = -1;
                pending--;
            } else if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                bs_log(BS_LOG_WARN, "replay: consume error", "error=%s",
                       rd_kafka_err2name(m->err));
            }
            rd_kafka_message_destroy(m);
            continue;
        }
        bool last = m->offset + 1 >= to[op];
        read++;
        if (wake)
            bs_fetch_wake_note(wake, m->key_len + m->len);
        rd_kafka_headers_t *hdrs;
        const void *v;
        size_t vlen;
        int32_t sp;
        int64_t so;
        if (rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR &&
            rd_kafka_header_get_last(hdrs, BS_HDR_SRC, &v, &vlen) ==
                RD_KAFKA_RESP_ERR_NO_ERROR &&
            bs_parse_src(v, vlen, topic, sizeof(topic), &sp, &so)) {
            for (size_t i = 0; i < n; i++) {
                bs_replay_target *t = &targets[i];
                if (t->partition != sp || so < t->from_offset ||
                    strcmp(t->topic, topic) != 0)
                    continue;
                t->records++;
                bs_record_keys keys;
                bs_record_keys_init(&keys, m);
                const void *k;
                size_t klen;
                bs_replay_key rk = {{0, 0}, false};
                if ((rk.have = bs_record_key(&keys, key, &k, &klen)))
                    rk.h = bf_hash_key(k, klen, seed);
                if (skip_push(t, &caps[i], so, rk) != 0) {
                    snprintf(errstr, errstr_size, "out of memory");
                    bs_record_keys_reset(&keys);
                    rd_kafka_message_destroy(m);
                    goto unassign;
                }
                /* Added now, or (windowed) when consumption reaches it. */
                if (rk.have && !bf_filter_windowed(t->filter) &&
                    bs_dedup_add(t->filter, rk.h) < 0)
                    bs_log(BS_LOG_ERROR, "replay: dedup filter at "
                           "dedup.max.bytes", "topic=%s partition=%d",
                           t->topic, (int)t->partition);
                bs_record_keys_reset(&keys);
                break;
            }
        }
        rd_kafka_message_destroy(m);
        if (last) {
            to[op] = -1; /* done with this partition */
            pending--;
        }
    }
    for (size_t i = 0; i < n; i++)
        if (skip_sort(&targets[i]) != 0) {
            snprintf(errstr, errstr_size, "out of memory");
            goto unassign;
        }
    rc = 0;
unassign:
    bs_fetch_wake_destroy(wake); /* before the assignment goes */
    rd_kafka_assign(tail, NULL);
out:
    rd_kafka_topic_partition_list_destroy(assign);
    free(from);
    free(to);
    free(caps);
    return rc;
}
