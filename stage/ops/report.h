/*
 * report.h -- what a stage tells other threads while it runs (the metrics
 * endpoint, the demo): its counters, the checkpoint-duration histogram, the
 * partitions it has, readiness, and its blocklists' figures.  Every call
 * is thread-safe.  Part of the engine's public API: stage.h includes it;
 * report.c answers from what the stage thread publishes.
 */
#ifndef BLOOMSTAGE_REPORT_H
#define BLOOMSTAGE_REPORT_H

#include "base/counters.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct bs_stage bs_stage;

/* A snapshot of the counters (counters.h declares them, with what each
 * counts); checkpoint_us is the duration of the last checkpoint round. */
typedef struct bs_stage_stats {
#define BS_X_FIELD(field, kind, prom, help, stat) uint64_t field;
    BS_STAGE_COUNTERS(BS_X_FIELD)
#undef BS_X_FIELD
} bs_stage_stats;

/* Checkpoint round durations, in counters.h's buckets. */
typedef struct bs_stage_hist {
    uint64_t count;
    double sum;
    uint64_t buckets[BS_CKPT_BUCKETS]; /* cumulative, Prometheus style */
} bs_stage_hist;
void bs_stage_checkpoint_hist(bs_stage *s, bs_stage_hist *out);
/* The time those rounds spent in each phase (counters.h's
 * BS_ROUND_PHASES), summed, in seconds. */
void bs_stage_round_phases(bs_stage *s, double out[BS_NPHASES]);

/* One assigned partition, as last published by the stage thread (every
 * second, and on each checkpoint and rebalance). */
typedef struct bs_part_metrics {
    char topic[250];
    int32_t partition;
    uint32_t layers;
    uint64_t bits;
    double fill;
    double est_keys;
    double est_fpr;
    int64_t lag;         /* from librdkafka's statistics; -1 unknown */
    int64_t ckpt_offset; /* in the newest checkpoint; -1 none */
    double committed_at; /* unix time of its last commit by this stage, or
                            of its assignment before the first */
    uint64_t bytes;      /* the filter's cell memory */
    /* dedup.window.ms: live generations, the partition's stream time and
     * where the oldest generation starts (ms timestamps; -1: no window or
     * nothing yet). */
    uint32_t generations;
    int64_t stream_time_ms;
    int64_t oldest_ms;
    uint64_t inserts; /* keys the filter holds (inserts that set a bit) */
    /* dedup.audit.rate: the partition's audit sample (bf_audit_stats:
     * lookups of unseen sampled keys, the false positives among them, the
     * measured rate and its Wilson 95% interval, the sample's memory) and
     * the records rescued since it was assigned.  audit false: no sample,
     * the rest 0. */
    bool audit;
    uint64_t audit_lookups, audit_false_positives, audit_rescued;
    double audit_fpr, audit_fpr_low, audit_fpr_high;
    uint64_t audit_bytes;
} bs_part_metrics;

/* dedup.fpr, the bound the measured rates are read against (thread-safe:
 * a setting). */
double bs_stage_fpr_bound(bs_stage *s);

/* Copies up to max partitions into out (may be NULL to count); returns the
 * number assigned.  Thread-safe. */
size_t bs_stage_partitions(bs_stage *s, bs_part_metrics *out, size_t max);

/* Ready: partitions assigned, the loop turning (polled within the last
 * 10 s), no refusal by the brokers' authorizer since the last commit, and
 * checkpoints not failing for longer than bs_ready_ckpt_bound_s: counted
 * from the start of the first round that failed since the last good one
 * (outcome.c), or from the start of a round still running.  why says what
 * is missing, for failing checkpoints with the last failure's text; until
 * the first partitions are assigned, "starting: " and the step, with the
 * error librdkafka reported that holds it.  Thread-safe. */
bool bs_stage_ready(bs_stage *s, char *why, size_t why_size);

/* How long checkpoints may fail before /ready says so, for
 * checkpoint.interval.ms: max(2 intervals, an interval +
 * BS_READY_CKPT_GRACE_S).  An interval and more: with transactions a
 * failed round rolls back and the next real attempt comes an interval
 * later, so one transient failure is retried at least once first; the
 * grace covers the backoff's first retries (0.5, 1, 2, 4 s) and a slow
 * round's flush; two intervals for long intervals, where the grace is
 * small beside one. */
double bs_ready_ckpt_bound_s(int64_t checkpoint_interval_ms);
/* checkpoint.interval.ms in seconds (a setting: thread-safe). */
double bs_stage_checkpoint_interval_s(bs_stage *s);

void bs_stage_stats_get(bs_stage *s, bs_stage_stats *out);
/* Records dropped by blocklist i (config order) and its name. */
size_t bs_stage_blocklists(bs_stage *s);
const char *bs_stage_blocklist_name(bs_stage *s, size_t i);
uint64_t bs_stage_blocklist_drops(bs_stage *s, size_t i);

/* Blocklist i's figures (thread-safe).  Live lists (blocklist.NAME.topic)
 * have them all; static ones only entries. */
#define BS_LIST_METRICS_NBAD 3
typedef struct bs_list_metrics {
    bool live;
    bool caught_up;        /* its topic read to its end at start-up */
    uint64_t entries;
    uint64_t updates;      /* list-topic records applied */
    uint64_t skipped[BS_LIST_METRICS_NBAD]; /* bad records, by reason */
    const char *skipped_reason[BS_LIST_METRICS_NBAD];
    uint64_t saturated;    /* counters stuck at their maximum */
    uint64_t rebuilds;     /* filter rebuilds (grown, unsaturated) */
    int64_t lag;           /* records behind its topic's end; -1 unknown */
    double since_update;   /* seconds since the last change (or the load) */
} bs_list_metrics;
bool bs_stage_blocklist_metrics(bs_stage *s, size_t i, bs_list_metrics *out);

#endif
