/*
 * store_kafka_read.h -- inside the Kafka store (store_kafka.c): its state,
 * which both halves share, and the reading half (store_kafka_read.c):
 * the keys its records go under, the chain it knows of each partition,
 * and the reads of its topic -- a partition's bounds, ranges of several
 * partitions at once, and a restore's states, every input partition of a
 * restore gathered in one pass.  Not for the rest of the engine, which
 * goes through bs_store (store_ops.h).
 */
#ifndef BLOOMSTAGE_STORE_KAFKA_READ_H
#define BLOOMSTAGE_STORE_KAFKA_READ_H

#include "store/store_kafka_records.h"
#include "store/store_ops.h"

#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The store (store_kafka.h's opaque handle, defined here). */
typedef struct bs_kafkastore bs_kafkastore;

/* A state produced in chunks and waiting for its manifest (store_kafka.c's
 * put and sync). */
typedef struct bs_kafkastore_pending bs_kafkastore_pending;

/* The newest manifest this instance knows of, per partition: the chain it
 * names (for the next manifest, the next seq and the tombstones), the
 * newest state's id (a delta's base) and whether its offsets are
 * committed. */
typedef struct bs_kafkastore_known {
    char topic[250];
    int32_t partition;
    bs_store_manifest *chain; /* [0] the snapshot */
    size_t n, cap;
    uint64_t tip_id;
    bool tip_chainable; /* the tip's record seq is its key's (not a v1
                         * manifest's) and its id is known */
    int64_t tip_input;  /* the tip's next input offset */
    bool committed;     /* bs_store_committed reached tip_input */
} bs_kafkastore_known;

struct bs_kafkastore {
    char desc[300];
    const char *group;
    const char *topic;
    size_t chunk;
    uint32_t max_chain; /* checkpoint.delta.max */
    double max_ratio;   /* checkpoint.delta.ratio */
    int nparts;
    rd_kafka_t *producer; /* the one records go through: own, or lent */
    rd_kafka_t *own;      /* the store's own (bs_kafkastore_new) */
    rd_kafka_t *reader;
    bs_kafkastore_pending *pend; /* in ticket order */
    size_t npend, cappend;
    uintptr_t next_ticket;
    bs_kafkastore_known *known;
    size_t nknown, capknown;
    uint64_t dr_failed;
    char dr_error[BS_ERRSTR_SIZE];
    bool dr_refused; /* the first of them refused by the authorizer */
    uint64_t last_bytes;
    bool last_delta;
};

/* -- keys --------------------------------------------------------------- */

/* What every key the store writes starts with (then "/GROUP/"). */
#define BS_KAFKASTORE_KEY_PREFIX "bs1"

/* A partition's manifest key, "bs1/GROUP/TOPIC/PARTITION", into buf: its
 * length, as snprintf's. */
int bs_kafkastore_manifest_key(const struct bs_kafkastore *ks,
                               const char *topic, int32_t part, char *buf,
                               size_t size);

/* The key of chunk i of state seq: the manifest key + "/SEQ/I". */
int bs_kafkastore_chunk_key(const struct bs_kafkastore *ks, const char *topic,
                            int32_t part, int64_t seq, uint32_t i, char *buf,
                            size_t size);

/* The partition of the topic all of one input partition's records go to
 * (XXH3-64 of its manifest key, mod the topic's partitions). */
int32_t bs_kafkastore_partition(const struct bs_kafkastore *ks,
                                const char *topic, int32_t part);

/* -- what is known of each chain ------------------------------------------ */

/* The partition's entry, NULL if none (add: a new empty one, NULL only
 * out of memory). */
bs_kafkastore_known *bs_kafkastore_known_find(struct bs_kafkastore *ks,
                                              const char *topic, int32_t part,
                                              bool add);

/* Room for n states in k's chain: false out of memory. */
bool bs_kafkastore_known_reserve(bs_kafkastore_known *k, size_t n);

/* -- reading ---------------------------------------------------------------- */

/* Partition cp's low and high watermarks: 0, else -1 or (transient)
 * BS_STORE_UNREACHABLE with errstr.  ask_leaders: ask the brokers for the
 * leaders first (a caller that just did says false); they are asked again
 * before each retry either way. */
int bs_kafkastore_bounds(struct bs_kafkastore *ks, int32_t cp,
                         bool ask_leaders, int64_t *lo, int64_t *hi,
                         char *errstr, size_t errstr_size);

/* One range of the topic to read: partition cp over offsets [from, to),
 * fn called for each record with op until it returns non-zero. */
typedef struct bs_kafkastore_range {
    int32_t cp;
    int64_t from, to;
    int (*fn)(const rd_kafka_message_t *m, void *op);
    void *op;
    bool done; /* set by the read */
} bs_kafkastore_range;

/* Reads every range at once (one assignment: the partitions' leaders are
 * fetched from side by side), each to its end, its fn's non-zero answer,
 * or (read_committed) the partition's last stable offset.  The ranges'
 * partitions must differ.  0, else -1 (refused) or (not read within
 * BS_TIMEOUT_STORE_READ_MS) BS_STORE_UNREACHABLE, with errstr. */
int bs_kafkastore_read_ranges(struct bs_kafkastore *ks,
                              bs_kafkastore_range *r, size_t n, char *errstr,
                              size_t errstr_size);

/* The contract's get and get_many (store_ops.h), for the ops table. */
int bs_kafkastore_get(void *impl, const char *topic, int32_t part,
                      int64_t at_offset, bs_checkpoint *out, char *errstr,
                      size_t errstr_size);
void bs_kafkastore_get_many(void *impl, bs_store_query *q, size_t n);

#endif
