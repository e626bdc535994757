/*
 * record_path.c -- what happens to each consumed record: its keys taken and
 * hashed when it is polled (prepare), its filter blocks prefetched, and one
 * poll later (hold/release) the blocklists and the partition's dedup filter
 * asked (at the record's timestamp, when the filter is windowed; a record
 * older than the window keeps follows dedup.window.late), the filter's
 * answer checked by the audit sample (a sampled false positive is counted
 * and, with dedup.audit.rescue, forwarded), and the record produced to
 * output.topic or, dropped, to rejected.topic with its reason -- never
 * dropped silently.  A record that cannot be produced for good (too large
 * for the topic, or refused by a delivery report: poison.h) goes to
 * rejected.topic as the first copy that can be produced (whole, without
 * its value, bare), or the stage stops naming it.  Every copy carries
 * bloomstage-src
 * (TOPIC:PARTITION:OFFSET of the input), which the exactly_once replay
 * reads back (replay.h).
 *
 * The hot path: no allocation per record beyond librdkafka's own, no
 * printf, counters without locked instructions (counters.h).
 */
#include "path/record_path.h"
#include "core/stage_int.h"
#include "base/log.h"
#include "keys/record_key.h"
#include "checkpoint/replay.h"
#include "core/state.h"
#include "core/partitions.h"
#include "core/poison.h"
#include "path/schema_wait.h"
#include "base/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "TOPIC:PARTITION:OFFSET" without printf (once per record).  Topic names
 * are at most 249 bytes; buf must hold 249 + 1 + 11 + 1 + 20 + 1. */
static size_t format_src(char *buf, size_t size, const char *topic,
                         int32_t partition, int64_t offset)
{
    size_t tl = strlen(topic);
    if (tl + 34 > size)
        tl = size - 34;
    memcpy(buf, topic, tl);
    char *p = buf + tl;
    *p++ = ':';
    char tmp[24];
    int n = 0;
    uint64_t v = partition < 0 ? 0 : (uint64_t)partition;
    do
        tmp[n++] = (char)('0' + v % 10);
    while (v /= 10);
    while (n)
        *p++ = tmp[--n];
    *p++ = ':';
    v = offset < 0 ? 0 : (uint64_t)offset;
    do
        tmp[n++] = (char)('0' + v % 10);
    while (v /= 10);
    while (n)
        *p++ = tmp[--n];
    *p = '\0';
    return (size_t)(p - buf);
}

/* The headers of m's copies: the record's own (moved off m, no copying:
 * the caller has taken every key it needed from them) and bloomstage-src
 * (TOPIC:PARTITION:OFFSET of the input). */
static rd_kafka_headers_t *copy_headers(rd_kafka_message_t *m)
{
    rd_kafka_headers_t *hdrs = NULL;
    if (rd_kafka_message_detach_headers(m, &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR ||
        !hdrs)
        hdrs = rd_kafka_headers_new(4);
    char src[320];
    size_t n = format_src(src, sizeof(src), rd_kafka_topic_name(m->rkt),
                          m->partition, m->offset);
    rd_kafka_header_add(hdrs, BS_HDR_SRC, -1, src, (ssize_t)n);
    return hdrs;
}

/* Queues one copy of m to rkt: key, value and hdrs as given, m's
 * timestamp.  The producer owns hdrs once it is queued; the caller keeps
 * them otherwise.  A copy over the topic's max.message.bytes (limit; 0:
 * unknown) is refused here, as the broker would refuse it, and so is one
 * larger than the producer's whole queue; otherwise a full queue is waited
 * on: a consumed record is never dropped for lack of room. */
static rd_kafka_resp_err_t send_copy(bs_stage *s, const rd_kafka_message_t *m,
                                rd_kafka_topic_t *rkt, int64_t limit,
                                const void *key, size_t klen, const void *val,
                                size_t vlen, rd_kafka_headers_t *hdrs)
{
    if (limit > 0 && bs_copy_wire_bytes(klen, vlen, hdrs) > limit)
        return RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE;
    rd_kafka_timestamp_type_t tstype;
    int64_t ts = rd_kafka_message_timestamp(m, &tstype);
    for (;;) {
        rd_kafka_resp_err_t err = rd_kafka_producev(
            s->producer, RD_KAFKA_V_RKT(rkt), RD_KAFKA_V_KEY(key, klen),
            RD_KAFKA_V_VALUE((void *)val, vlen),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_TIMESTAMP(ts > 0 ? ts : 0), RD_KAFKA_V_HEADERS(hdrs),
            RD_KAFKA_V_END);
        if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL)
            return err;
        if (rd_kafka_outq_len(s->producer) == 0)
            return RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE;
        rd_kafka_poll(s->producer, BS_QUEUE_FULL_POLL_MS);
    }
}

static const char *const copy_names[] = {
    [BS_COPY_OUTPUT] = "output", [BS_COPY_WHOLE] = "whole",
    [BS_COPY_NO_VALUE] = "without-value", [BS_COPY_BARE] = "bare",
    [BS_COPY_NONE] = "none"};

/* The bare copy's headers: m's bloomstage-src (from hdrs), the reason and
 * what it lost. */
static rd_kafka_headers_t *bare_headers(rd_kafka_headers_t *hdrs,
                                        const char *reason, const char *vb)
{
    rd_kafka_headers_t *h = rd_kafka_headers_new(4);
    const void *v = NULL;
    size_t len = 0;
    if (rd_kafka_header_get_last(hdrs, BS_HDR_SRC, &v, &len) ==
        RD_KAFKA_RESP_ERR_NO_ERROR)
        rd_kafka_header_add(h, BS_HDR_SRC, -1, v, (ssize_t)len);
    rd_kafka_header_add(h, BS_HDR_REASON, -1, reason, -1);
    rd_kafka_header_add(h, BS_HDR_DROPPED, -1, "value,key,headers", -1);
    rd_kafka_header_add(h, BS_HDR_VALUE_BYTES, -1, vb, -1);
    return h;
}

/* m to rejected.topic with `reason`, as the first of its copies from
 * `from` on that can be produced: whole, without its value, bare (its
 * coordinates and reason only).  hdrs (copy_headers) are consumed.  The
 * copy queued; BS_COPY_NONE when every one was refused for good; *err,
 * when it holds none yet, gets the first refusal; BS_COPY_OUTPUT when one failed in a way that may heal (a
 * failed delivery noted: the round rolls back). */
static bs_copy to_rejected(bs_stage *s, rd_kafka_message_t *m, bs_copy from,
                           const char *reason, rd_kafka_headers_t *hdrs,
                           rd_kafka_resp_err_t *err)
{
    char vb[24];
    rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR_NO_ERROR;
    snprintf(vb, sizeof(vb), "%zu", m->payload ? m->len : 0);
    rd_kafka_header_add(hdrs, BS_HDR_REASON, -1, reason, -1);
    bs_copy c = from < BS_COPY_WHOLE ? BS_COPY_WHOLE : from;
    for (; c <= BS_COPY_BARE; c++) {
        bool whole = c == BS_COPY_WHOLE;
        if (c == BS_COPY_NO_VALUE) {
            rd_kafka_header_add(hdrs, BS_HDR_DROPPED, -1, "value", -1);
            rd_kafka_header_add(hdrs, BS_HDR_VALUE_BYTES, -1, vb, -1);
        }
        rd_kafka_headers_t *h =
            c == BS_COPY_BARE ? bare_headers(hdrs, reason, vb) : hdrs;
        e = send_copy(s, m, s->rej_rkt, s->rej_max_bytes,
                      c == BS_COPY_BARE ? NULL : m->key,
                      c == BS_COPY_BARE ? 0 : m->key_len,
                      whole ? m->payload : NULL, whole ? m->len : 0, h);
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR) {
            if (h != hdrs)
                rd_kafka_headers_destroy(hdrs);
            return c;
        }
        if (h != hdrs)
            rd_kafka_headers_destroy(h);
        if (!bs_unproducible(e))
            break;
        if (!*err)
            *err = e;
    }
    rd_kafka_headers_destroy(hdrs);
    if (c > BS_COPY_BARE)
        return BS_COPY_NONE;
    bs_delivery_failed(s, "produce of %s:%d:%lld to %s failed: %s",
                       rd_kafka_topic_name(m->rkt), (int)m->partition,
                       (long long)m->offset, s->set.rejected_topic,
                       rd_kafka_err2str(e));
    return BS_COPY_OUTPUT;
}

/* m routed to rejected.topic (reason), from its copy `from` on.  `usual`
 * is the copy such a record gets when nothing is wrong (a drop's whole
 * copy; for a record to forward, the output): another one is logged,
 * naming the record, and a record to forward that is not is counted
 * (dropped_unproducible).  When no copy can be produced at all, or
 * there is no rejected.topic, the stage stops naming the record: nothing
 * is committed past it. */
static void reject(bs_stage *s, rd_kafka_message_t *m, bs_copy from,
                   bs_copy usual, const char *reason,
                   rd_kafka_headers_t *hdrs, rd_kafka_resp_err_t err)
{
    bs_copy c = BS_COPY_NONE;
    if (s->rej_rkt)
        c = to_rejected(s, m, from, reason, hdrs, &err);
    else
        rd_kafka_headers_destroy(hdrs);
    if (c == BS_COPY_OUTPUT)
        return;
    const char *topic = rd_kafka_topic_name(m->rkt);
    if (usual == BS_COPY_OUTPUT)
        BS_INC(s->ctr.dropped_unproducible);
    if (c != BS_COPY_NONE) {
        BS_INC(s->ctr.rejected_out);
        if (c == usual)
            return;
        bs_log(BS_LOG_WARN, "record cannot be produced as it is, routed to "
               "rejected.topic", "topic=%s partition=%d offset=%lld "
               "reason=%s error=%s copy=%s", topic, (int)m->partition,
               (long long)m->offset, reason, rd_kafka_err2name(err),
               copy_names[c]);
        return;
    }
    bs_stage_fatal(s, "record %s [%d] at offset %lld cannot be produced "
                   "(%s: %s) %s: stopping, nothing committed past it",
                   topic, (int)m->partition, (long long)m->offset, reason,
                   rd_kafka_err2name(err),
                   s->rej_rkt ? "to rejected.topic, not even bare"
                              : "to output.topic, and no rejected.topic is "
                                "set to take it");
}

/* The note a delivery report left of m (poison.h), if any. */
static bs_poison *noted(const bs_stage *s, const rd_kafka_message_t *m)
{
    return s->npoison ? bs_poison_find(s, rd_kafka_topic_name(m->rkt),
                                       m->partition, m->offset)
                      : NULL;
}

/* Every record queued delivered or failed (a failure noted for the round);
 * bounded by message.timeout.ms. */
static void flush_all(bs_stage *s)
{
    while (rd_kafka_flush(s->producer, BS_FLUSH_STEP_MS) ==
               RD_KAFKA_RESP_ERR__TIMED_OUT &&
           s->state != BS_STAGE_FATAL)
        ;
}

/* A record to forward: produced to output.topic, unless it cannot be for
 * good (too large for it, or refused by delivery reports: poison.h): then
 * to rejected.topic, or the stage stops naming it (reject).  A record
 * whose copy was refused in a batch goes alone, in a batch of its own. */
static void forward(bs_stage *s, rd_kafka_message_t *m)
{
    bs_poison *e = noted(s, m);
    rd_kafka_headers_t *hdrs = copy_headers(m);
    if (e && e->next != BS_COPY_OUTPUT) {
        reject(s, m, e->next, BS_COPY_OUTPUT, e->reason, hdrs,
               (rd_kafka_resp_err_t)e->err);
        return;
    }
    if (e) {
        e->alone = true;
        flush_all(s);
    }
    rd_kafka_resp_err_t err = send_copy(s, m, s->out_rkt, s->out_max_bytes,
                                        m->key, m->key_len, m->payload,
                                        m->len, hdrs);
    if (e)
        flush_all(s);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        BS_INC(s->ctr.records_out);
        return;
    }
    if (bs_unproducible(err)) {
        char reason[64];
        reject(s, m, BS_COPY_WHOLE, BS_COPY_OUTPUT,
               bs_unproducible_reason(err, reason, sizeof(reason)), hdrs,
               err);
        return;
    }
    /* Not queued, for a reason that may heal: a failed delivery, so the
     * next round rolls back and the record is processed again. */
    rd_kafka_headers_destroy(hdrs);
    bs_delivery_failed(s, "produce of %s:%d:%lld to %s failed: %s",
                       rd_kafka_topic_name(m->rkt), (int)m->partition,
                       (long long)m->offset, s->set.output_topic,
                       rd_kafka_err2str(err));
}

/* A dropped record: with rejected.topic, produced there with its reason
 * (a copy an earlier delivery report refused: the next one). */
static void drop(bs_stage *s, rd_kafka_message_t *m, const char *reason)
{
    if (!s->rej_rkt)
        return;
    const bs_poison *e = noted(s, m);
    reject(s, m, e && e->next > BS_COPY_WHOLE ? e->next : BS_COPY_WHOLE, BS_COPY_WHOLE, reason,
           copy_headers(m), e ? (rd_kafka_resp_err_t)e->err : 0);
}

/* The audit sample could not hold a key (rc < 0): logged once. */
static void audit_held(bs_stage *s, const part *p, int rc)
{
    if (rc < 0 && !s->audit_full_logged) {
        s->audit_full_logged = true;
        bs_log(BS_LOG_ERROR, "audit sample cannot grow (out of memory): "
               "keys it would sample go unaudited", "topic=%s partition=%d",
               p->topic, (int)p->partition);
    }
}

/* A windowed filter's key of skip entry i goes in now, at the stream time
 * the first pass added it (replay.h), and into the audit sample in the
 * same slice, so that both forget it together. */
static void skip_key_add(bs_stage *s, part *p, size_t i)
{
    if (!p->skip_keys || !p->skip_keys[i].have)
        return;
    if (bs_dedup_add(p->filter, p->skip_keys[i].h) < 0 &&
        !s->filter_full_logged) {
        s->filter_full_logged = true;
        bs_log(BS_LOG_ERROR, "dedup filter at dedup.max.bytes", "topic=%s "
               "partition=%d", p->topic, (int)p->partition);
    }
    if (p->audit)
        audit_held(s, p, bf_audit_note(p->audit, p->skip_keys[i].h));
}

/* exactly_once: forwarded before a crash or rollback (the output tail
 * shows it), its key is in the filter already: true, and not produced
 * again.  The skip entries before it are added on the way. */
static bool replayed(bs_stage *s, part *p, int64_t offset)
{
    while (p->skip_i < p->nskip && p->skip[p->skip_i] < offset)
        skip_key_add(s, p, p->skip_i++);
    if (p->skip_i >= p->nskip || p->skip[p->skip_i] != offset)
        return false;
    skip_key_add(s, p, p->skip_i++);
    BS_INC(s->ctr.replayed);
    if (p->skip_i == p->nskip) {
        free(p->skip);
        free(p->skip_keys);
        p->skip = NULL;
        p->skip_keys = NULL;
        p->nskip = p->skip_i = 0;
    }
    return true;
}

/* true, and the record dropped naming the list, when a blocklist holds
 * one of its lookups (none: it has no such key; a domain list: the
 * domain, then each parent). */
static bool blocked(bs_stage *s, rd_kafka_message_t *m, const prepared *pp)
{
    for (size_t i = 0; i < s->nlists; i++) {
        bs_blocklist *bl = &s->lists[i];
        const bf_hash *lh = &pp->list_h[s->list_at[i]];
        bool hit = false;
        for (unsigned j = 0; !hit && j < pp->list_n[i]; j++)
            hit = bf_filter_contains_h(bl->filter, lh[j]);
        if (hit) {
            char reason[300];
            snprintf(reason, sizeof(reason), "blocklist:%s", bl->name);
            BS_INC(s->ctr.dropped_blocklist);
            BS_INC(s->list_drops[i]);
            drop(s, m, reason);
            return true;
        }
    }
    return false;
}

/* A record without its dedup key: counted; one that could not be read
 * with its schema (not framed, an unknown schema id, a payload that does
 * not decode) counted apart and logged, at most once a minute. */
static void missing_key(bs_stage *s, const rd_kafka_message_t *m,
                        const prepared *pp)
{
    BS_INC(s->ctr.missing_key);
    if (!pp->bad)
        return;
    BS_INC(s->ctr.undecodable);
    double now = bs_now();
    if (now - s->undecodable_logged < 60)
        return;
    s->undecodable_logged = now;
    char q[512];
    bs_log(BS_LOG_WARN, "record not decodable, handled as a missing key",
           "topic=%s partition=%d offset=%lld policy=%s error=%s",
           rd_kafka_topic_name(m->rkt), (int)m->partition,
           (long long)m->offset,
           s->set.missing_key == BS_CONFIG_MISSING_REJECT ? "reject"
                                                          : "forward",
           bs_log_quote(pp->why, q, sizeof(q)));
}

static void process(bs_stage *s, rd_kafka_message_t *m, const prepared *pp)
{
    const char *topic = rd_kafka_topic_name(m->rkt);
    part *p = bs_part_find(s, topic, m->partition);
    if (!p) {
        /* Fetched before its partition was revoked, handed out after: not
         * ours any more (its next owner starts from the checkpoint). */
        bs_log(BS_LOG_DEBUG, "record from an unassigned partition skipped",
               "topic=%s partition=%d offset=%lld", topic, (int)m->partition,
               (long long)m->offset);
        return;
    }
    if (p->state != BS_PART_ACTIVE)
        return; /* invariant 4: comes again after its restore's seek */
    if (pp->wait) {
        /* No decision without its schema: the partition waits here. */
        bs_schema_wait(s, p, m->offset, pp->wait_schema, pp->why);
        return;
    }
    BS_INC(s->ctr.records_in);
    if (p->base_offset < 0)
        p->base_offset = m->offset;
    p->next_offset = m->offset + 1;
    s->since_ckpt++;
    /* dedup.window.ms: every record moves the partition's stream time,
     * those skipped below too, so a restore replays the time the first
     * pass saw.  A record without a timestamp (-1) takes the stream time. */
    bool late = bs_dedup_advance(p->filter, p->audit,
                                 rd_kafka_message_timestamp(m, NULL));

    if (replayed(s, p, m->offset) || blocked(s, m, pp))
        return;

    if (!pp->have) {
        missing_key(s, m, pp);
        if (s->set.missing_key == BS_CONFIG_MISSING_REJECT) {
            char reason[sizeof(pp->why) + 16];
            snprintf(reason, sizeof(reason), "missing-key%s%s",
                     pp->why[0] ? ": " : "", pp->why);
            drop(s, m, reason);
            return;
        }
        forward(s, m);
        return;
    }
    if (late) {
        /* Older than the window keeps: its copies may be forgotten. */
        BS_INC(s->ctr.late);
        if (s->set.window_late == BS_CONFIG_LATE_REJECT) {
            drop(s, m, "late");
            return;
        }
    }
    int added = bs_dedup_add(p->filter, pp->h);
    /* The audit sample's verdict on the filter's answer: 1 for a sampled
     * key it knows is new that the filter calls seen (bloomfilters.h). */
    int fp = p->audit ? bf_audit_check(p->audit, pp->h, added == 0) : 0;
    audit_held(s, p, fp);
    if (added == 0 && fp == 1 && s->set.audit_rescue) {
        /* Rescue: known unique, so forwarded as the filter would have
         * without its false positive; the filter is left as it is. */
        BS_INC(s->ctr.audit_rescued);
        p->rescued++;
    } else if (added == 0) {
        BS_INC(s->ctr.dropped_duplicate);
        drop(s, m, "duplicate");
        return;
    }
    if (added < 0 && !s->filter_full_logged) {
        /* dedup.max.bytes reached: forwarding without dedup loses nothing;
         * dropping would. */
        s->filter_full_logged = true;
        bs_log(BS_LOG_ERROR, "dedup filter at dedup.max.bytes, forwarding "
               "without dedup", "topic=%s partition=%d", topic,
               (int)m->partition);
    }
    forward(s, m);
}

/* Takes a polled record's keys and hashes them, and starts bringing the
 * filter blocks they will touch into the cache: the lookups come one poll
 * later (hold), when the blocks are there instead of ~100 ns away.  The
 * filters and partitions may change before then (a new layer, a
 * rebalance): process() looks everything up again, only the hashes
 * carry over, and they depend on the record alone. */
static void prepare(bs_stage *s, rd_kafka_message_t *m, prepared *pp)
{
    bs_record_keys keys;
    bs_record_keys_init(&keys, m);
    keys.framed = s->framed;
    const void *key;
    size_t len;
    pp->have = bs_record_key_norm(&keys, s->set.dedup_key,
                                  s->set.dedup_normalize, &key, &len);
    if (pp->have)
        pp->h = bf_hash_key(key, len, s->fparams.seed);
    for (size_t i = 0; i < s->nlists; i++) {
        bs_blocklist *bl = &s->lists[i];
        bf_hash *lh = &pp->list_h[s->list_at[i]];
        const void *bk;
        size_t blen;
        if (s->list_shares_hash[i]) {
            pp->list_n[i] = pp->have; /* one hash serves both */
            lh[0] = pp->h;
        } else {
            pp->list_n[i] = bs_record_key(&keys, bl->key, &bk, &blen)
                                ? bs_blocklist_lookups(bl, bk, blen, lh)
                                : 0;
        }
        for (unsigned j = 0; j < pp->list_n[i]; j++)
            bf_filter_prefetch_h(bl->filter, lh[j]);
    }
    pp->wait = keys.hold;
    pp->bad = keys.bad;
    if (keys.hold || (!pp->have && keys.why[0])) {
        pp->wait_schema = keys.hold_id;
        snprintf(pp->why, sizeof(pp->why), "%s", keys.why);
    } else {
        pp->why[0] = '\0';
    }
    bs_record_keys_reset(&keys);
    if (pp->have) {
        part *p = bs_part_find(s, rd_kafka_topic_name(m->rkt), m->partition);
        if (p && p->filter)
            bf_filter_prefetch_h(p->filter, pp->h);
    }
}

/* The held record, processed now (or left, if consumption is paused: the
 * resume seeks back to it), then destroyed.  Called before anything that
 * checkpoints, seeks or rebalances, so that all of that sees every polled
 * record either processed or not consumed at all. */
void bs_record_release(bs_stage *s)
{
    rd_kafka_message_t *m = s->held;
    if (!m)
        return;
    s->held = NULL;
    /* Invariants 6 and 7. */
    if (s->state != BS_STAGE_BACKOFF && s->state != BS_STAGE_FATAL)
        process(s, m, &s->prep[s->held_slot]);
    rd_kafka_message_destroy(m);
}

/* Holds m (just polled, no error) and processes the record held before:
 * a lookahead of one record. */
void bs_record_hold(bs_stage *s, rd_kafka_message_t *m)
{
    unsigned slot = s->held ? s->held_slot ^ 1u : s->held_slot;
    prepare(s, m, &s->prep[slot]);
    bs_record_release(s);
    s->held = m;
    s->held_slot = slot;
}

