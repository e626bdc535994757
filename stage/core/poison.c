/*
 * poison.c -- records that cannot be produced for a reason retrying will
 * not heal: the errors that say so, a copy's weight on the wire, and the
 * notes of such records that delivery reports named (poison.h says how
 * the stage uses them).  The notes are few (one per such record since the
 * last commit), so a linear search serves; the record path asks only when
 * there is one.
 *
 * Runs on the stage thread: delivery reports come from rd_kafka_poll and
 * rd_kafka_flush there.
 */
#include "core/poison.h"
#include "base/util.h"
#include "core/stage_int.h"
#include "base/log.h"
#include "checkpoint/replay.h"
#include "core/partitions.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A record batch's header (61 bytes, with the log's 12-byte entry
 * header) and one record's framing at its widest (librdkafka's
 * RD_KAFKAP_MESSAGE_V2_MAX_OVERHEAD: 36). */
#define BATCH_OVERHEAD 61
#define RECORD_OVERHEAD 36
#define HEADER_OVERHEAD 10 /* two varints of a header, at their widest */

int64_t bs_copy_wire_bytes(size_t key_len, size_t value_len,
                           const rd_kafka_headers_t *hdrs)
{
    int64_t n = BATCH_OVERHEAD + RECORD_OVERHEAD + (int64_t)key_len +
                (int64_t)value_len;
    const char *name;
    const void *v;
    size_t vlen;
    for (size_t i = 0;
         hdrs && rd_kafka_header_get_all(hdrs, i, &name, &v, &vlen) ==
                     RD_KAFKA_RESP_ERR_NO_ERROR;
         i++)
        n += HEADER_OVERHEAD + (int64_t)strlen(name) + (int64_t)vlen;
    return n;
}

bool bs_unproducible(rd_kafka_resp_err_t err)
{
    switch (err) {
    case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
    case RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE:
    case RD_KAFKA_RESP_ERR_INVALID_RECORD:
    case RD_KAFKA_RESP_ERR_INVALID_TIMESTAMP:
        return true;
    default:
        return false;
    }
}

const char *bs_unproducible_reason(rd_kafka_resp_err_t err, char *buf,
                                   size_t size)
{
    if (err == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE ||
        err == RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE)
        snprintf(buf, size, "too-large");
    else
        snprintf(buf, size, "unproducible:%s", rd_kafka_err2name(err));
    return buf;
}

bs_poison *bs_poison_find(const bs_stage *s, const char *topic,
                          int32_t partition, int64_t offset)
{
    for (size_t i = 0; i < s->npoison; i++) {
        bs_poison *e = &s->poison[i];
        if (e->offset == offset && e->partition == partition &&
            !strcmp(e->topic, topic))
            return e;
    }
    return NULL;
}

/* A header's value as a string into buf ("" when absent). */
static const char *header_str(rd_kafka_headers_t *hdrs, const char *name,
                              char *buf, size_t size)
{
    const void *v = NULL;
    size_t len = 0;
    buf[0] = '\0';
    if (hdrs && rd_kafka_header_get_last(hdrs, name, &v, &len) ==
                    RD_KAFKA_RESP_ERR_NO_ERROR && v) {
        if (len >= size)
            len = size - 1;
        memcpy(buf, v, len);
        buf[len] = '\0';
    }
    return buf;
}

/* The copy that failed, as its headers tell: an output copy has no
 * reason; a rejected one says what it lost. */
static bs_copy failed_copy(rd_kafka_headers_t *hdrs)
{
    char b[64];
    if (!*header_str(hdrs, BS_HDR_REASON, b, sizeof(b)))
        return BS_COPY_OUTPUT;
    header_str(hdrs, BS_HDR_DROPPED, b, sizeof(b));
    return !*b ? BS_COPY_WHOLE
           : !strcmp(b, "value") ? BS_COPY_NO_VALUE
                                 : BS_COPY_BARE;
}

/* The note of topic/partition/offset, made if absent; NULL: no memory. */
static bs_poison *note(bs_stage *s, const char *topic, int32_t partition,
                       int64_t offset)
{
    bs_poison *e = bs_poison_find(s, topic, partition, offset);
    if (e)
        return e;
    bs_poison *np = bs_grow(s->poison, &s->cappoison, s->npoison + 1,
                            sizeof(*np), 8);
    if (!np)
        return NULL;
    s->poison = np;
    char *t = strdup(topic);
    if (!t)
        return NULL;
    e = &s->poison[s->npoison++];
    memset(e, 0, sizeof(*e));
    e->topic = t;
    e->partition = partition;
    e->offset = offset;
    return e;
}

/* The input record m is a copy of (its bloomstage-src) and m's headers;
 * false if it names none. */
static bool source_of(const rd_kafka_message_t *m, rd_kafka_headers_t **hdrs,
                      char *topic, size_t topic_size, int32_t *partition,
                      int64_t *offset)
{
    const void *v = NULL;
    size_t len = 0;
    return rd_kafka_message_headers(m, hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR &&
           rd_kafka_header_get_last(*hdrs, BS_HDR_SRC, &v, &len) ==
               RD_KAFKA_RESP_ERR_NO_ERROR &&
           bs_parse_src(v, len, topic, topic_size, partition, offset);
}

void bs_poison_delivered(bs_stage *s, const rd_kafka_message_t *m)
{
    rd_kafka_headers_t *hdrs = NULL;
    char topic[256];
    int32_t partition;
    int64_t offset;
    if (!source_of(m, &hdrs, topic, sizeof(topic), &partition, &offset))
        return;
    bs_poison *e = bs_poison_find(s, topic, partition, offset);
    if (!e || !e->alone || e->next != BS_COPY_OUTPUT ||
        failed_copy(hdrs) != BS_COPY_OUTPUT)
        return;
    bs_log(BS_LOG_INFO, "record delivered alone: its batch was refused, not "
           "the record", "topic=%s partition=%d offset=%lld", topic,
           (int)partition, (long long)offset);
    free(e->topic);
    *e = s->poison[--s->npoison];
}

bool bs_poison_from_report(bs_stage *s, const rd_kafka_message_t *m)
{
    rd_kafka_headers_t *hdrs = NULL;
    char topic[256];
    int32_t partition;
    int64_t offset;
    if (!source_of(m, &hdrs, topic, sizeof(topic), &partition, &offset))
        return false;
    bs_copy failed = failed_copy(hdrs);
    bs_poison *e = note(s, topic, partition, offset);
    if (!e)
        return false;
    /* An output copy refused in a batch is sent again alone first. */
    e->next = failed == BS_COPY_OUTPUT && !e->alone ? BS_COPY_OUTPUT
                                                    : failed + 1;
    e->err = m->err;
    if (failed == BS_COPY_OUTPUT)
        bs_unproducible_reason(m->err, e->reason, sizeof(e->reason));
    else
        header_str(hdrs, BS_HDR_REASON, e->reason, sizeof(e->reason));
    bs_log(BS_LOG_WARN, "record cannot be produced: its next copy goes "
           "where it can", "topic=%s partition=%d offset=%lld to=%s "
           "error=%s next=%s", topic, (int)partition, (long long)offset,
           rd_kafka_topic_name(m->rkt), rd_kafka_err2name(m->err),
           e->next == BS_COPY_OUTPUT     ? "output-alone"
           : e->next == BS_COPY_WHOLE    ? "rejected"
           : e->next == BS_COPY_NO_VALUE ? "rejected-without-value"
           : e->next == BS_COPY_BARE     ? "rejected-bare"
                                         : "stop");
    return true;
}

void bs_poison_prune(bs_stage *s)
{
    size_t k = 0;
    for (size_t i = 0; i < s->npoison; i++) {
        bs_poison *e = &s->poison[i];
        const part *p = bs_part_find(s, e->topic, e->partition);
        if (!p || p->committed > e->offset) {
            free(e->topic);
            continue;
        }
        s->poison[k++] = *e;
    }
    s->npoison = k;
}

void bs_poison_free(bs_stage *s)
{
    for (size_t i = 0; i < s->npoison; i++)
        free(s->poison[i].topic);
    free(s->poison);
    s->poison = NULL;
    s->npoison = s->cappoison = 0;
}
