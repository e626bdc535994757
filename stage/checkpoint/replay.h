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
 *
 * The partition's audit sample notes the same keys as seen (without
 * counting them): a sampled key forwarded before the crash must not count
 * as a false positive when a copy comes after the restore.
 *
 * A windowed filter (dedup.window.ms) must see its keys at the stream time
 * they were first added: the tail is read output partition by output
 * partition, not in input order, and spans any stretch of record time, so
 * adding its keys at once would move stream time ahead of the records
 * consumption resumes with (forgetting keys those still need).  For such a
 * filter each key stays with its skip entry (skip_keys) and is added when
 * consumption reaches that offset, where the first pass added it.
 */
#ifndef BLOOMSTAGE_REPLAY_H
#define BLOOMSTAGE_REPLAY_H

#include "checkpoint/checkpoint.h"

#include <config.h>
#include <librdkafka/rdkafka.h>

#define BS_HDR_SRC "bloomstage-src"

/* A forwarded record's dedup key, hashed (have: it had one). */
typedef struct bs_replay_key {
    bf_hash h;
    bool have;
} bs_replay_key;

typedef struct bs_replay_target {
    const char *topic; /* input partition being restored */
    int32_t partition;
    int64_t from_offset;        /* C: input offsets >= C count */
    const bs_ckpt_wm *wm;       /* W: output watermarks at the checkpoint */
    uint32_t nwm;
    bf_filter *filter;          /* keys found are added here (a dedup
                                   filter: dedup_filter.h); windowed:
                                   into skip_keys instead */
    bf_audit *audit;            /* keys found are noted here (held as
                                   seen, not counted: bf_audit_note);
                                   NULL: no audit */
    /* Results.  skip: sorted input offsets already forwarded (malloc'd,
     * the caller frees); skip_keys: for a windowed filter, the key of each
     * (malloc'd, the caller frees; NULL otherwise); records: how many tail
     * records named the partition. */
    int64_t *skip;
    bs_replay_key *skip_keys;
    size_t nskip;
    uint64_t records;
} bs_replay_target;

/* What bs_replay_tail returns when the brokers' authorizer refuses the
 * tail's fetch (no Read ACL on the output topic): waiting out timeout_ms
 * would not heal it. */
#define BS_REPLAY_REFUSED (-2)

/* Reads the output tail once for all targets (from the smallest of their
 * watermarks per output partition to the current end) with `tail`, a
 * consumer that is assigned, never subscribed; each record's key is `key`
 * normalized as `norm` (as the record path takes it), hashed with `seed`.  0, or -1 with errstr (a
 * broker that does not answer within timeout_ms, an unreadable log), or
 * BS_REPLAY_REFUSED with errstr (at once). */
int bs_replay_tail(rd_kafka_t *tail, const char *output_topic,
                   const bs_config_keyspec *key, bs_normalize norm,
                   uint64_t seed,
                   bs_replay_target *targets, size_t n, int timeout_ms,
                   char *errstr, size_t errstr_size);

/* Parses the v[0..len) of a bloomstage-src header, "TOPIC:PARTITION:OFFSET"
 * as the stage writes it (v need not be NUL-terminated): split at the last
 * two ':', the topic non-empty and shorter than topic_size, partition and
 * offset decimal digits only (no sign, no blanks) within int32/int64, no NUL
 * byte anywhere.  false for anything else, leaving the outputs alone. */
bool bs_parse_src(const void *v, size_t len, char *topic, size_t topic_size,
                  int32_t *partition, int64_t *offset);

/* High watermarks of partitions 0..n-1 of `topic` into wm[0..n): 0, or -1
 * with errstr. */
int bs_output_watermarks(rd_kafka_t *rk, const char *topic, int n,
                         bs_ckpt_wm *wm, int timeout_ms, char *errstr,
                         size_t errstr_size)
    __attribute__((warn_unused_result));

#endif
