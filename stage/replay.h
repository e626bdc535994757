/*
 * replay.h -- output-tail replay, the route to exactly-once output without
 * Kafka transactions (DESIGN.md).
 *
 * Every forwarded record carries `bloomstage-src: TOPIC:PARTITION:OFFSET`.
 * A checkpoint records the output topic's high watermarks right after the
 * producer flushed.  To restore a partition after a crash (or a rollback),
 * the stage loads its checkpoint (filter, input offset C, watermarks W) and
 * reads the output from W to its current end: every record whose header
 * names the partition with an offset >= C was forwarded after the
 * checkpoint.  Its key goes back into the filter and its input offset onto
 * a skip list, so when consumption resumes at C those records are
 * recognised as already forwarded instead of being produced again.
 * Records whose delivery failed are not in the log, so they are produced
 * again: every unique record ends up in the output exactly once.
 */
#ifndef BLOOMSTAGE_REPLAY_H
#define BLOOMSTAGE_REPLAY_H

#include "checkpoint.h"

#include <config.h>
#include <librdkafka/rdkafka.h>

#define BS_HDR_SRC "bloomstage-src"

typedef struct bs_replay_target {
    const char *topic; /* input partition being restored */
    int32_t partition;
    int64_t from_offset;        /* C: input offsets >= C count */
    const bs_ckpt_wm *wm;       /* W: output watermarks at the checkpoint */
    uint32_t nwm;
    bf_scalable *filter;        /* keys found are added here */
    /* Results.  skip: sorted input offsets already forwarded (malloc'd,
     * the caller frees); records: how many tail records named the
     * partition. */
    int64_t *skip;
    size_t nskip;
    uint64_t records;
} bs_replay_target;

/* Reads the output tail once for all targets (from the smallest of their
 * watermarks per output partition to the current end) with `tail`, a
 * consumer that is assigned, never subscribed.  0, or -1 with errstr (a
 * broker that does not answer within timeout_ms, an unreadable log). */
int bs_replay_tail(rd_kafka_t *tail, const char *output_topic,
                   const bs_config_keyspec *key, uint64_t seed,
                   bs_replay_target *targets, size_t n, int timeout_ms,
                   char *errstr, size_t errstr_size);

/* Parses the v[0..len) of a bloomstage-src header, "TOPIC:PARTITION:OFFSET"
 * as the stage writes it (v need not be NUL-terminated): split at the last
 * two ':', the topic non-empty and shorter than topic_size, partition and
 * offset decimal digits only (no sign, no blanks) within int32/int64, no NUL
 * byte anywhere.  false for anything else, leaving the outputs alone. */
bool bs_parse_src(const void *v, size_t len, char *topic, size_t topic_size,
                  int32_t *partition, int64_t *offset);

#endif
