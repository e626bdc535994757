/*
 * counters.h -- the stage's counters and gauges, declared once.
 *
 * BS_STAGE_COUNTERS is the one list: it generates the atomic struct the
 * stage thread writes (bs_counters), the plain snapshot other threads read
 * (bs_stage_stats, report.h), the copy between them (report.c), the
 * Prometheus families (metrics.c) and the fields of the periodic stats log
 * line (report.c).  Adding a counter is one line here (and a row in
 * docs/operations.md's metrics table when it is exported).
 *
 * Columns:
 *   field  the C name in both structs
 *   kind   COUNTER or GAUGE (Prometheus type)
 *   prom   the Prometheus family, or NULL: not exported on its own
 *   help   the family's HELP text
 *   stat   the key in the `msg=stats` log line, or NULL: not in it
 *
 * The labelled family bloomstage_records_dropped_total (by reason and
 * blocklist), the checkpoint-duration histogram and the rounds' time by
 * phase (BS_ROUND_PHASES, below) are rendered by metrics.c from dropped_*,
 * the histogram and the phases' totals; they are not rows here.
 * dropped_unproducible counts records to forward that could not be
 * produced to output.topic for good (poison.h): routed to rejected.topic,
 * or the record the stage stopped at.
 *
 * Each counter has one writer, the stage thread (fetch_wakes: the fetch
 * wake-up thread, fetch_wake.c), and readers anywhere: a relaxed load and
 * store is enough and costs no locked instruction on the record path.
 */
#ifndef BLOOMSTAGE_COUNTERS_H
#define BLOOMSTAGE_COUNTERS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define BS_STAGE_COUNTERS(X)                                                  \
    X(records_in, COUNTER, "bloomstage_records_in_total",                     \
      "Records consumed from the input topics.", "records_in")                \
    X(records_out, COUNTER, "bloomstage_records_out_total",                   \
      "Records forwarded to the output topic.", "records_out")                \
    X(dropped_duplicate, COUNTER, NULL, NULL, "duplicates")                   \
    X(dropped_blocklist, COUNTER, NULL, NULL, "blocked")                      \
    X(missing_key, COUNTER, "bloomstage_records_missing_key_total",           \
      "Records without the dedup key (handled by dedup.on.missing.key).",     \
      "missing_key")                                                          \
    X(undecodable, COUNTER, "bloomstage_records_undecodable_total",          \
      "Records whose avro: or protobuf: key could not be read (not in "       \
      "Confluent framing, a schema id the registry does not know, a "         \
      "payload that does not decode); counted in missing_key too.",           \
      "undecodable")                                                          \
    X(schema_waiting, GAUGE, "bloomstage_partitions_waiting_for_schema",      \
      "Input partitions paused at a record whose schema the registry gives "  \
      "no answer about.", NULL)                                               \
    X(late, COUNTER, "bloomstage_records_late_total",                         \
      "Records older than the dedup window keeps (dedup.window.late).",       \
      "late")                                                                 \
    X(rejected_out, COUNTER, "bloomstage_records_rejected_total",             \
      "Dropped records produced to rejected.topic.", NULL)                    \
    X(dropped_unproducible, COUNTER, NULL, NULL, "unproducible")              \
    X(delivery_failures, COUNTER, "bloomstage_delivery_failures_total",       \
      "Produced records whose delivery failed.", NULL)                        \
    X(rollbacks, COUNTER, "bloomstage_rollbacks_total",                       \
      "Rewinds to the last checkpoint after a failed delivery.", NULL)        \
    X(replayed, COUNTER, NULL, NULL, NULL)                                    \
    X(checkpoints, COUNTER, "bloomstage_checkpoints_total",                   \
      "Partition checkpoints written.", "checkpoints")                        \
    X(checkpoint_failures, COUNTER, "bloomstage_checkpoint_failures_total",   \
      "Failed checkpoint writes and checkpoint rounds.",                      \
      "checkpoint_failures")                                                  \
    X(commits, COUNTER, "bloomstage_commits_total",                           \
      "Offset commits after a checkpoint round.", "commits")                  \
    X(failed_rounds, GAUGE, "bloomstage_checkpoint_failed_rounds",            \
      "Checkpoint rounds failed in a row; 0 again once a round succeeds "     \
      "with every partition's records committed.", "failed_rounds")           \
    X(checkpoint_bytes, GAUGE, "bloomstage_checkpoint_bytes",                 \
      "Bytes of filter state written by the last checkpoint round.", NULL)    \
    X(checkpoint_us, GAUGE, NULL, NULL, NULL)                                 \
    X(partitions, GAUGE, "bloomstage_partitions_assigned",                    \
      "Input partitions assigned.", "partitions")                             \
    X(filter_bytes, GAUGE, "bloomstage_filter_memory_bytes",                  \
      "Memory of the dedup filters of all assigned partitions.",              \
      "filter_bytes")                                                         \
    X(filter_layers, GAUGE, NULL, NULL, NULL)                                 \
    X(filter_inserts, GAUGE, NULL, NULL, NULL)                                \
    X(audit_rescued, COUNTER, "bloomstage_audit_rescued_total",               \
      "Sampled records the filter called seen that the audit sample knew "    \
      "were new, forwarded (dedup.audit.rescue).", "audit_rescued")           \
    X(audit_lookups, GAUGE, "bloomstage_audit_all_lookups",                   \
      "Sampled lookups of keys the audit samples had not seen, all "          \
      "assigned partitions (restored with their checkpoints).",               \
      "audit_lookups")                                                        \
    X(audit_false_positives, GAUGE, "bloomstage_audit_all_false_positives",   \
      "Of those, the ones the filters called seen: false positives.",         \
      "audit_false_positives")                                                \
    X(audit_bytes, GAUGE, "bloomstage_audit_all_memory_bytes",                \
      "Memory of the audit samples of all assigned partitions.",              \
      "audit_bytes")                                                          \
    X(fetch_wakes, COUNTER, "bloomstage_fetch_wakeups_total",                \
      "Wake-ups sent to the consumer's fetcher when its read-ahead ran low "  \
      "(fetch_wake.h).", NULL)

typedef _Atomic uint64_t bs_counter;

/* The checkpoint-duration histogram: round durations in buckets with these
 * upper bounds (s; report.c). */
#define BS_CKPT_BUCKETS 10
extern const double bs_ckpt_bucket_bounds[BS_CKPT_BUCKETS];

/* The phases of a checkpoint round, in order, each timed once per round
 * (round.c, txn.c): the `phase` label of
 * bloomstage_checkpoint_phase_seconds_total and the NAME_seconds keys of
 * the `msg=checkpoint` debug line.
 *   flush         the output's delivery reports (and, first, a new
 *                 partition's first checkpoint or a pending restore)
 *   watermarks    exactly_once: the output's high watermarks (ListOffsets)
 *   write         the changed partitions' checkpoints handed to the store
 *   sync          the store made durable: the directory's fsyncs, or the
 *                 Kafka store's chunks delivered and manifests written
 *   send_offsets  transactions: send_offsets_to_transaction (with
 *                 exactly_once.overlap on the committer's thread, beside
 *                 the next transaction)
 *   commit        commit_transaction (the same), or the consumer's offset
 *                 commit
 *   other         the rest: the wait for the commit before (the overlap),
 *                 the next transaction begun, the store told what is
 *                 committed */
#define BS_ROUND_PHASES(X)                                                    \
    X(FLUSH, "flush")                                                         \
    X(WATERMARKS, "watermarks")                                               \
    X(WRITE, "write")                                                         \
    X(SYNC, "sync")                                                           \
    X(SEND_OFFSETS, "send_offsets")                                           \
    X(COMMIT, "commit")                                                       \
    X(OTHER, "other")

typedef enum bs_round_phase {
#define BS_X_PHASE(id, name) BS_PHASE_##id,
    BS_ROUND_PHASES(BS_X_PHASE)
#undef BS_X_PHASE
    BS_NPHASES
} bs_round_phase;
extern const char *const bs_round_phase_names[BS_NPHASES];

/* The list as data, for code that walks it (report.c, metrics.c); the
 * values are read from a bs_stage_stats (report.h) with bs_stats_value. */
typedef enum bs_counter_kind { BS_COUNTER, BS_GAUGE } bs_counter_kind;
typedef struct bs_counter_info {
    const char *field;
    bs_counter_kind kind;
    const char *prom, *help, *stat; /* NULL: not exported there */
    size_t offset;                  /* in bs_stage_stats */
} bs_counter_info;
extern const bs_counter_info bs_counter_infos[];
extern const size_t bs_ncounters;
struct bs_stage_stats;
uint64_t bs_stats_value(const struct bs_stage_stats *st, size_t i);



typedef struct bs_counters {
#define BS_X_FIELD(field, kind, prom, help, stat) bs_counter field;
    BS_STAGE_COUNTERS(BS_X_FIELD)
#undef BS_X_FIELD
} bs_counters;

#define BS_INC(c)                                                             \
    atomic_store_explicit(&(c),                                               \
                          atomic_load_explicit(&(c), memory_order_relaxed) + 1, \
                          memory_order_relaxed)
#define BS_GET(c) atomic_load_explicit(&(c), memory_order_relaxed)
#define BS_SET(c, v) atomic_store_explicit(&(c), (v), memory_order_relaxed)

#endif
