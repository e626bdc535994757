/*
 * publish.c -- the stage thread's side of what the stage tells the world:
 * the counters and per-partition view published under a lock for other
 * threads (report.c reads them), librdkafka's statistics (consumer lag),
 * round durations into the histogram and their phases' times into their
 * totals, audit warnings, the periodic
 * `msg=stats` log line and the live status line on a terminal.
 */
#include "ops/publish.h"
#include "ops/report.h"
#include "core/partitions.h"
#include "core/startup.h"
#include "base/log.h"
#include "base/util.h"

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

void bs_round_clock_start(bs_stage *s, double t0)
{
    for (int k = 0; k < BS_NPHASES; k++)
        s->round_phase[k] = 0;
    s->round_lap = t0;
}

void bs_round_lap(bs_stage *s, bs_round_phase phase)
{
    double now = bs_now();
    s->round_phase[phase] += now - s->round_lap;
    s->round_lap = now;
}

void bs_round_lap_timed(bs_stage *s, bs_round_phase phase, double seconds)
{
    s->round_phase[phase] += seconds;
    s->round_lap = bs_now();
}

void bs_report_round(bs_stage *s, const double *phase, double dt)
{
    for (int k = 0; k < BS_NPHASES; k++)
        atomic_fetch_add_explicit(&s->phase_us[k],
                                  (uint64_t)(phase[k] * 1e6),
                                  memory_order_relaxed);
    BS_SET(s->ctr.checkpoint_us, (uint64_t)(dt * 1e6));
    BS_INC(s->ckpt_rounds);
    atomic_fetch_add_explicit(&s->ckpt_sum_us, (uint64_t)(dt * 1e6),
                              memory_order_relaxed);
    for (int b = 0; b < BS_CKPT_BUCKETS; b++)
        if (dt <= bs_ckpt_bucket_bounds[b])
            BS_INC(s->ckpt_hist[b]);
}

/* librdkafka's statistics (consumer): the lag of each assigned partition,
 * topics.T.partitions.P.consumer_lag. */
int bs_stats_cb(rd_kafka_t *rk, char *json, size_t len, void *opaque)
{
    (void)rk;
    bs_stage *s = opaque;
    json_t *root = json_loadb(json, len, 0, NULL);
    json_t *topics = json_object_get(root, "topics");
    const char *tname;
    json_t *t;
    json_object_foreach(topics, tname, t) {
        const char *pname;
        json_t *pj;
        json_object_foreach(json_object_get(t, "partitions"), pname, pj) {
            json_t *lag = json_object_get(pj, "consumer_lag");
            if (!json_is_integer(lag) || json_integer_value(lag) < 0)
                continue;
            part *p = bs_part_find(s, tname, (int32_t)atoi(pname));
            if (p)
                p->lag = json_integer_value(lag);
        }
    }
    json_decref(root);
    return 0; /* librdkafka frees json */
}

/* A partition whose audit measures its filter's rate above dedup.fpr with
 * 95% confidence (the interval's low end above it): a warning, repeated
 * at most every BS_AUDIT_WARN_REPEAT_S while it holds. */
static void audit_warn(bs_stage *s, part *p)
{
    bf_audit_stats st;
    bf_audit_stats_get(p->audit, &st);
    double now = bs_now();
    if (st.lo <= s->set.dedup_fpr ||
        (p->audit_warned > 0 && now - p->audit_warned < BS_AUDIT_WARN_REPEAT_S))
        return;
    p->audit_warned = now;
    bf_info in;
    bf_filter_info(p->filter, &in);
    bs_log(BS_LOG_WARN, "audit: the filter's measured false-positive rate "
           "is above dedup.fpr", "topic=%s partition=%d lookups=%llu "
           "false_positives=%llu measured_fpr=%.3g fpr_low=%.3g "
           "fpr_high=%.3g estimated_fpr=%.3g dedup_fpr=%g", p->topic,
           (int)p->partition, (unsigned long long)st.lookups,
           (unsigned long long)st.false_positives, st.measured, st.lo,
           st.hi, in.est_fpr, s->set.dedup_fpr);
}

/* Recomputes the filter and audit gauges, publishes the per-partition view
 * for other threads, and warns of a filter measured above dedup.fpr. */
void bs_publish(bs_stage *s)
{
    uint64_t bytes = 0, layers = 0, inserts = 0;
    uint64_t a_lookups = 0, a_fps = 0, a_bytes = 0;
    pthread_mutex_lock(&s->pub_lock);
    if (s->nparts > s->cappub) {
        bs_part_metrics *np = realloc(s->pub, s->nparts * sizeof(*np));
        if (np) {
            s->pub = np;
            s->cappub = s->nparts;
        }
    }
    s->npub = 0;
    for (size_t i = 0; i < s->nparts; i++) {
        part *p = &s->parts[i];
        if (!p->filter)
            continue; /* being restored */
        bf_info in;
        bf_filter_info(p->filter, &in);
        bytes += in.bytes;
        layers += in.layers;
        inserts += in.inserts;
        bf_audit_stats as;
        memset(&as, 0, sizeof(as));
        if (p->audit) {
            bf_audit_stats_get(p->audit, &as);
            a_lookups += as.lookups;
            a_fps += as.false_positives;
            a_bytes += as.bytes;
        }
        if (s->npub < s->cappub) {
            bs_part_metrics *m = &s->pub[s->npub++];
            snprintf(m->topic, sizeof(m->topic), "%s", p->topic);
            m->partition = p->partition;
            m->layers = in.layers;
            m->bits = in.cells;
            m->fill = in.fill;
            m->est_keys = in.est_keys;
            m->est_fpr = in.est_fpr;
            m->lag = p->lag;
            m->ckpt_offset = p->ckpt_offset;
            m->committed_at = p->committed_at;
            m->bytes = in.bytes;
            bf_windowed *w = bf_filter_windowed(p->filter);
            m->generations = w ? bf_windowed_generations(w) : 0;
            m->stream_time_ms = w ? bf_windowed_stream_time(w) : -1;
            m->oldest_ms = -1;
            bf_generation_info g;
            if (w && bf_windowed_generation_info(w, 0, &g))
                m->oldest_ms = g.time_from;
            m->inserts = in.inserts;
            m->audit = p->audit != NULL;
            m->audit_lookups = as.lookups;
            m->audit_false_positives = as.false_positives;
            m->audit_rescued = p->rescued;
            m->audit_fpr = as.measured;
            m->audit_fpr_low = as.lo;
            m->audit_fpr_high = as.hi;
            m->audit_bytes = as.bytes;
        }
    }
    pthread_mutex_unlock(&s->pub_lock);
    for (size_t i = 0; i < s->nparts; i++) /* logged outside the lock */
        if (s->parts[i].filter && s->parts[i].audit)
            audit_warn(s, &s->parts[i]);
    s->last_publish = bs_now();
    BS_SET(s->ctr.filter_bytes, bytes);
    BS_SET(s->ctr.filter_layers, layers);
    BS_SET(s->ctr.filter_inserts, inserts);
    BS_SET(s->ctr.audit_lookups, a_lookups);
    BS_SET(s->ctr.audit_false_positives, a_fps);
    BS_SET(s->ctr.audit_bytes, a_bytes);
    BS_SET(s->ctr.partitions, s->nparts);
}

static int64_t total_lag(bs_stage *s)
{
    int64_t lag = 0;
    bool known = false;
    for (size_t i = 0; i < s->nparts; i++)
        if (s->parts[i].lag >= 0) {
            lag += s->parts[i].lag;
            known = true;
        }
    return known ? lag : -1;
}

/* The periodic stats log line, and the live status line on a terminal. */
void bs_report(bs_stage *s, double now)
{
    bool status = s->set.stats_interval_ms > 0 && bs_log_is_tty() &&
                  now - s->last_status >= 1.0;
    bool stats = s->set.stats_interval_ms > 0 &&
                 (now - s->last_stats) * 1000 >=
                     (double)s->set.stats_interval_ms;
    if (!status && !stats)
        return;
    if (stats)
        bs_publish(s); /* the gauges as of now, beside the counters */
    bs_stage_stats st;
    bs_stage_stats_get(s, &st);
    int64_t lag = total_lag(s);
    if (stats) {
        double dt = s->last_stats > 0 ? now - s->last_stats : 0;
        double rate = dt > 0 ? (double)(st.records_in - s->stats_in_before) /
                                   dt
                             : 0;
        char line[1024];
        size_t len = 0;
        for (size_t i = 0; i < bs_ncounters; i++)
            if (bs_counter_infos[i].stat && len < sizeof(line))
                len += (size_t)snprintf(line + len, sizeof(line) - len,
                                        "%s=%llu ", bs_counter_infos[i].stat,
                                        (unsigned long long)bs_stats_value(
                                            &st, i));
        /* The audit, all partitions together: the measured rate and its
         * interval beside the worst partition's estimate and the bound. */
        double lo, hi, est = 0;
        bf_wilson95(st.audit_false_positives, st.audit_lookups, &lo, &hi);
        for (size_t i = 0; i < s->nparts; i++) {
            bf_info in;
            if (s->parts[i].filter) {
                bf_filter_info(s->parts[i].filter, &in);
                est = in.est_fpr > est ? in.est_fpr : est;
            }
        }
        bs_log(BS_LOG_INFO, "stats", "%saudit_fpr=%.3g audit_fpr_low=%.3g "
               "audit_fpr_high=%.3g estimated_fpr=%.3g dedup_fpr=%g "
               "filter_bytes_per_key=%.2f rate=%.0f lag=%lld", line,
               st.audit_lookups ? (double)st.audit_false_positives /
                                      (double)st.audit_lookups
                                : 0,
               lo, hi, est, s->set.dedup_fpr,
               st.filter_inserts ? (double)st.filter_bytes /
                                       (double)st.filter_inserts
                                 : 0,
               rate, (long long)lag);
        s->last_stats = now;
        s->stats_in_before = st.records_in;
    }
    if (status) {
        double dt = s->last_status > 0 ? now - s->last_status : 0;
        double rate = dt > 0 ? (double)(st.records_in - s->status_in_before) /
                                   dt
                             : 0;
        char line[256], lagbuf[32];
        if (lag >= 0)
            snprintf(lagbuf, sizeof(lagbuf), "%lld", (long long)lag);
        else
            snprintf(lagbuf, sizeof(lagbuf), "?");
        snprintf(line, sizeof(line), "in %llu (%.0f/s)  out %llu  dup %llu  "
                 "blocked %llu  lag %s  partitions %llu  %s",
                 (unsigned long long)st.records_in, rate,
                 (unsigned long long)st.records_out,
                 (unsigned long long)st.dropped_duplicate,
                 (unsigned long long)st.dropped_blocklist, lagbuf,
                 (unsigned long long)st.partitions,
                 s->state == BS_STAGE_BACKOFF ? "CHECKPOINTS FAILING"
                                                : "checkpoints ok");
        bs_log_status(line);
        s->last_status = now;
        s->status_in_before = st.records_in;
    }
}
