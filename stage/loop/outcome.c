/*
 * outcome.c -- what the end of a round does to the stage, whoever ends it
 * (the round itself, or the overlap's settle once the committer's outcome
 * is known): the round's first failure kept for /ready, the committed
 * offsets moved on, the figures reported, and the verdict that starts or
 * ends a failing spell.
 */
#include "loop/outcome.h"
#include "core/stage_int.h"
#include "base/crash_point.h"
#include "base/log.h"
#include "base/util.h"
#include "core/partitions.h"
#include "core/poison.h"
#include "core/startup.h"
#include "ops/publish.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void bs_round_note(bs_stage *s, const char *fmt, ...)
{
    if (s->round_err[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->round_err, sizeof(s->round_err), fmt, ap);
    va_end(ap);
}

void bs_round_note_failure(bs_stage *s, const char *topic, int32_t partition,
                           const char *err)
{
    bs_log_ckpt_failed(topic, partition, err);
    if (topic)
        bs_round_note(s, "%s [%d]: %s", topic, (int)partition, err);
    else
        bs_round_note(s, "%s", err);
}

/* After the commit of `commit` (the entries without an error): the store
 * may let go of the states before them. */
static void store_committed(bs_stage *s, rd_kafka_topic_partition_list_t *commit)
{
    char err[BS_ERRSTR_SIZE];
    for (int i = 0; i < commit->cnt; i++) {
        const rd_kafka_topic_partition_t *e = &commit->elems[i];
        if (e->err)
            continue;
        if (bs_store_committed(s->store, e->topic, e->partition, e->offset,
                               err, sizeof(err)) != 0) {
            part *p = bs_part_find(s, e->topic, e->partition);
            bs_log_ckpt_failed(p ? p->topic : NULL, p ? p->partition : -1,
                               err); /* only older states stay behind */
        }
    }
    bs_crash_point(BS_CRASH_AFTER_STORE_COMMITTED);
}

void bs_round_report_log(bs_stage *s, const bs_round_report *r)
{
    BS_SET(s->ctr.checkpoint_bytes, r->bytes);
    bs_report_round(s, r->phase, r->seconds);
    char phases[BS_NPHASES * 40];
    size_t len = 0;
    for (int k = 0; k < BS_NPHASES && len < sizeof(phases); k++)
        len += (size_t)snprintf(phases + len, sizeof(phases) - len,
                                " %s_seconds=%.4f", bs_round_phase_names[k],
                                r->phase[k]);
    bs_log(BS_LOG_DEBUG, "checkpoint", "reason=%s partitions=%d bytes=%llu "
           "records=%llu seconds=%.4f%s between_seconds=%.4f overlapped=%d",
           r->why, r->partitions, (unsigned long long)r->bytes,
           (unsigned long long)r->records, r->seconds, phases, r->between,
           r->overlapped);
}

bs_round_report bs_round_report_now(const bs_stage *s, const char *why,
                                    int partitions, uint64_t bytes, double t0)
{
    bs_round_report r = {.why = why, .partitions = partitions,
                         .bytes = bytes, .records = s->since_ckpt, .t0 = t0,
                         .seconds = s->round_lap - t0,
                         .between = t0 - s->last_ckpt};
    memcpy(r.phase, s->round_phase, sizeof(r.phase));
    return r;
}

void bs_round_committed(bs_stage *s, rd_kafka_topic_partition_list_t *commit)
{
    double now = bs_unix_now();
    for (int i = 0; i < commit->cnt; i++) {
        part *p = bs_part_find(s, commit->elems[i].topic,
                               commit->elems[i].partition);
        if (p && !commit->elems[i].err) {
            p->committed = commit->elems[i].offset;
            p->committed_at = now;
        }
    }
    BS_INC(s->ctr.commits);
    store_committed(s, commit);
    bs_poison_prune(s); /* records the commit passed do not come again */
    bs_refusal_healed(s);
}

void bs_verdict_failed(bs_stage *s, double t0, const char *why)
{
    BS_INC(s->ctr.failed_rounds);
    int64_t zero = 0;
    atomic_compare_exchange_strong(&s->failing_since_ms, &zero,
                                   (int64_t)(t0 * 1000));
    pthread_mutex_lock(&s->pub_lock);
    snprintf(s->ckpt_why, sizeof(s->ckpt_why), "%.*s",
             (int)sizeof(s->ckpt_why) - 1, why);
    pthread_mutex_unlock(&s->pub_lock);
}

void bs_verdict_good(bs_stage *s)
{
    if (atomic_load(&s->failing_since_ms))
        bs_log(BS_LOG_INFO, "checkpoints good again", "failed_rounds=%llu",
               (unsigned long long)BS_GET(s->ctr.failed_rounds));
    BS_SET(s->ctr.failed_rounds, 0);
    atomic_store(&s->failing_since_ms, 0);
    s->backoff = 0; /* the next failure waits the least again */
}
