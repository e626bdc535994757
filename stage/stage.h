/*
 * stage.h -- the stage: consume input topics in a consumer group, drop
 * blocklisted and duplicate records, produce the rest to the output topic,
 * and commit offsets only after the filter state that covers them is
 * checkpointed to disk (DESIGN.md, "The stage").
 *
 *   bs_stage_new    configure clients, load blocklists (before joining)
 *   bs_stage_run    the poll loop, until bs_stage_stop or a fatal error
 *   bs_stage_stop   async-signal-safe and thread-safe request to drain
 *   bs_stage_stats  counters, readable from any thread while it runs
 *
 * The stage borrows the configuration, which must outlive it.
 */
#ifndef BLOOMSTAGE_STAGE_H
#define BLOOMSTAGE_STAGE_H

#include "counters.h"

#include <config.h>
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

/* NULL with errstr on a bad configuration, an unloadable blocklist or a
 * client that cannot be created.  Nothing is consumed before run. */
bs_stage *bs_stage_new(const bs_config *cfg, char *errstr,
                       size_t errstr_size);

/* Runs until stopped: drains (finishes the batch, flushes, checkpoints,
 * commits), leaves the group, returns 0.  Returns -1 with errstr on a fatal
 * error (e.g. a damaged checkpoint), having committed nothing it should
 * not have. */
int bs_stage_run(bs_stage *s, char *errstr, size_t errstr_size);

/* Checkpoint round durations: a histogram with these upper bounds (s). */
#define BS_CKPT_BUCKETS 10
extern const double bs_ckpt_bucket_bounds[BS_CKPT_BUCKETS];

typedef struct bs_stage_hist {
    uint64_t count;
    double sum;
    uint64_t buckets[BS_CKPT_BUCKETS]; /* cumulative, Prometheus style */
} bs_stage_hist;
void bs_stage_checkpoint_hist(bs_stage *s, bs_stage_hist *out);

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
    uint64_t bytes;      /* the filter's cell memory */
    /* dedup.window.ms: live generations, the partition's stream time and
     * where the oldest generation starts (ms timestamps; -1: no window or
     * nothing yet). */
    uint32_t generations;
    int64_t stream_time_ms;
    int64_t oldest_ms;
} bs_part_metrics;

/* Copies up to max partitions into out (may be NULL to count); returns the
 * number assigned.  Thread-safe. */
size_t bs_stage_partitions(bs_stage *s, bs_part_metrics *out, size_t max);

/* Ready: partitions assigned, the loop turning (polled within the last
 * 10 s), not paused, checkpoints not failing.  why says what is missing.
 * Thread-safe. */
bool bs_stage_ready(bs_stage *s, char *why, size_t why_size);

void bs_stage_stop(bs_stage *s);
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

void bs_stage_destroy(bs_stage *s);

#endif
