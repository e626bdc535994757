/*
 * report.c -- what the stage tells the world: the counters (declared once
 * in counters.h) and their snapshot for other threads, the per-partition
 * view the metrics endpoint reads (published under a lock by the stage
 * thread, at most once a second and on every checkpoint and rebalance),
 * librdkafka's statistics (consumer lag), the checkpoint-duration
 * histogram and its rounds' time by phase, readiness, the periodic
 * `msg=stats` log line and the live status line on a terminal.
 */
#include "ops/report.h"
#include "core/stage_int.h"
#include "base/log.h"
#include "base/util.h"
#include "core/startup.h"

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

const bs_counter_info bs_counter_infos[] = {
#define BS_X_INFO(field, kind, prom, help, stat)                              \
    {#field, BS_##kind, prom, help, stat, offsetof(bs_stage_stats, field)},
    BS_STAGE_COUNTERS(BS_X_INFO)
#undef BS_X_INFO
};
const size_t bs_ncounters =
    sizeof(bs_counter_infos) / sizeof(bs_counter_infos[0]);

uint64_t bs_stats_value(const bs_stage_stats *st, size_t i)
{
    uint64_t v;
    memcpy(&v, (const char *)st + bs_counter_infos[i].offset, sizeof(v));
    return v;
}

double bs_stage_fpr_bound(bs_stage *s)
{
    return s->set.dedup_fpr;
}

double bs_stage_checkpoint_interval_s(bs_stage *s)
{
    return (double)s->set.checkpoint_interval_ms / 1000.0;
}

double bs_ready_ckpt_bound_s(int64_t checkpoint_interval_ms)
{
    double i = (double)checkpoint_interval_ms / 1000.0;
    return 2 * i > i + BS_READY_CKPT_GRACE_S ? 2 * i
                                             : i + BS_READY_CKPT_GRACE_S;
}

/* Whether checkpoints have failed for longer than the bound: the spell
 * since the first failed round's start, or a round running that long. */
static bool ckpt_failing(bs_stage *s, char *buf, size_t size)
{
    double now = bs_now(), bound = bs_ready_ckpt_bound_s(
                                       s->set.checkpoint_interval_ms);
    int64_t since = atomic_load(&s->failing_since_ms);
    int64_t round = atomic_load(&s->round_since_ms);
    if (since > 0 && now - (double)since / 1000 > bound) {
        pthread_mutex_lock(&s->pub_lock);
        snprintf(buf, size, "checkpoints are failing: none good for %.1f s "
                 "(bound %.1f s), %llu rounds failed in a row; last: %s",
                 now - (double)since / 1000, bound,
                 (unsigned long long)BS_GET(s->ctr.failed_rounds),
                 s->ckpt_why);
        pthread_mutex_unlock(&s->pub_lock);
        return true;
    }
    if (round > 0 && now - (double)round / 1000 > bound) {
        snprintf(buf, size, "checkpoints are failing: a round has run for "
                 "%.1f s (bound %.1f s)", now - (double)round / 1000, bound);
        return true;
    }
    return false;
}

void bs_stage_stats_get(bs_stage *s, bs_stage_stats *o)
{
#define BS_X_COPY(field, kind, prom, help, stat) o->field = BS_GET(s->ctr.field);
    BS_STAGE_COUNTERS(BS_X_COPY)
#undef BS_X_COPY
}

const double bs_ckpt_bucket_bounds[BS_CKPT_BUCKETS] = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0};

void bs_stage_checkpoint_hist(bs_stage *s, bs_stage_hist *out)
{
    out->count = BS_GET(s->ckpt_rounds);
    out->sum = (double)BS_GET(s->ckpt_sum_us) / 1e6;
    for (int b = 0; b < BS_CKPT_BUCKETS; b++)
        out->buckets[b] = BS_GET(s->ckpt_hist[b]);
}

const char *const bs_round_phase_names[BS_NPHASES] = {
#define BS_X_NAME(id, name) name,
    BS_ROUND_PHASES(BS_X_NAME)
#undef BS_X_NAME
};

void bs_stage_round_phases(bs_stage *s, double out[BS_NPHASES])
{
    for (int k = 0; k < BS_NPHASES; k++)
        out[k] = (double)BS_GET(s->phase_us[k]) / 1e6;
}

size_t bs_stage_partitions(bs_stage *s, bs_part_metrics *out, size_t max)
{
    pthread_mutex_lock(&s->pub_lock);
    size_t n = s->npub;
    if (out)
        memcpy(out, s->pub, (n < max ? n : max) * sizeof(*out));
    pthread_mutex_unlock(&s->pub_lock);
    return n;
}

bool bs_stage_ready(bs_stage *s, char *why, size_t why_size)
{
    const char *no = NULL;
    char list_why[300], stall_why[80], ckpt_why[600];
    if (bs_startup_why(s, why, why_size))
        return false; /* starting: the step, and what holds it */
    int64_t last = atomic_load(&s->last_poll_ms);
    for (size_t i = 0; i < s->nlists && !no; i++)
        if (s->lists[i].topic && !BS_GET(s->lists[i].caught_up)) {
            snprintf(list_why, sizeof(list_why), "blocklist %s: its topic "
                     "is not read to its end yet", s->lists[i].name);
            no = list_why;
        }
    if (!no && BS_GET(s->ctr.schema_waiting)) {
        pthread_mutex_lock(&s->pub_lock);
        snprintf(ckpt_why, sizeof(ckpt_why), "%s", s->wait_why);
        pthread_mutex_unlock(&s->pub_lock);
        if (ckpt_why[0])
            no = ckpt_why;
    }
    if (no)
        ;
    else if (BS_GET(s->ctr.partitions) == 0)
        no = "no partitions assigned";
    else if (last == 0 || bs_now() * 1000 - (double)last >
                              BS_READY_STALL_S * 1000) {
        snprintf(stall_why, sizeof(stall_why), "the poll loop has not "
                 "turned for %.0f s", BS_READY_STALL_S);
        no = stall_why;
    } else {
        /* Refused since the last commit (a round with nothing to write
         * goes through between refused ones), with the refusal
         * (bs_refused); else failing for longer than the bound. */
        pthread_mutex_lock(&s->pub_lock);
        if (s->refused_why[0]) {
            snprintf(ckpt_why, sizeof(ckpt_why), "checkpoints are failing: "
                     "%s", s->refused_why);
            no = ckpt_why;
        }
        pthread_mutex_unlock(&s->pub_lock);
        if (!no && ckpt_failing(s, ckpt_why, sizeof(ckpt_why)))
            no = ckpt_why;
    }
    if (why && why_size)
        snprintf(why, why_size, "%s", no ? no : "ready");
    return no == NULL;
}

size_t bs_stage_blocklists(bs_stage *s) { return s->nlists; }
const char *bs_stage_blocklist_name(bs_stage *s, size_t i)
{
    return i < s->nlists ? s->lists[i].name : NULL;
}
uint64_t bs_stage_blocklist_drops(bs_stage *s, size_t i)
{
    return i < s->nlists ? BS_GET(s->list_drops[i]) : 0;
}

bool bs_stage_blocklist_metrics(bs_stage *s, size_t i, bs_list_metrics *o)
{
    if (i >= s->nlists)
        return false;
    const bs_blocklist *bl = &s->lists[i];
    memset(o, 0, sizeof(*o));
    o->live = bl->topic != NULL;
    o->entries = BS_GET(bl->entries);
    if (!o->live)
        return true;
    o->caught_up = BS_GET(bl->caught_up) != 0;
    o->updates = BS_GET(bl->updates);
    for (int k = 0; k < BS_LIST_NBAD; k++) {
        o->skipped[k] = BS_GET(bl->skipped[k]);
        o->skipped_reason[k] = bs_list_bad_name(BS_LIST_FIRST_BAD + k);
    }
    o->saturated = BS_GET(bl->saturated);
    o->rebuilds = BS_GET(bl->rebuilds);
    o->lag = atomic_load(&bl->lag);
    int64_t last = atomic_load(&bl->last_update_ms);
    struct timeval tv;
    gettimeofday(&tv, NULL);
    double nowms = (double)tv.tv_sec * 1000 + (double)tv.tv_usec / 1000;
    o->since_update = last > 0 ? (nowms - (double)last) / 1000 : -1;
    return true;
}

