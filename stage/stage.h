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

#include <config.h>
#include <stddef.h>
#include <stdint.h>

typedef struct bs_stage bs_stage;

typedef struct bs_stage_stats {
    uint64_t records_in;
    uint64_t records_out;         /* forwarded to output.topic */
    uint64_t dropped_duplicate;
    uint64_t dropped_blocklist;   /* all lists */
    uint64_t missing_key;         /* records without the dedup key */
    uint64_t rejected_out;        /* copies produced to rejected.topic */
    uint64_t delivery_failures;
    uint64_t rollbacks;           /* rewinds to the last checkpoint */
    uint64_t checkpoints;         /* partition checkpoints written */
    uint64_t checkpoint_failures;
    uint64_t commits;
    uint64_t checkpoint_bytes;    /* size of the last checkpoint round */
    double checkpoint_seconds;    /* duration of the last checkpoint round */
    uint64_t filter_bytes;        /* dedup filters of assigned partitions */
    uint32_t partitions;          /* assigned */
    uint32_t filter_layers;       /* sum over assigned partitions */
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

void bs_stage_stop(bs_stage *s);
void bs_stage_stats_get(bs_stage *s, bs_stage_stats *out);
/* Records dropped by blocklist i (config order) and its name. */
size_t bs_stage_blocklists(bs_stage *s);
const char *bs_stage_blocklist_name(bs_stage *s, size_t i);
uint64_t bs_stage_blocklist_drops(bs_stage *s, size_t i);

void bs_stage_destroy(bs_stage *s);

#endif
