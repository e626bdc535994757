/*
 * store_ops.h -- the contract every checkpoint store implements (the
 * directory store, store_dir.c; the Kafka store, store_kafka.c): its
 * operations as one table, bs_store_ops, with what each promises, the
 * results BS_STORE_*, and the handle the stage holds, bs_store (a store's
 * table and its state), with the calls that pass to the table.  store.h
 * makes the handle for the store checkpoint.store names.
 *
 * A checkpoint round: bs_store_put for each changed partition, then
 * bs_store_sync; only when sync returns 0 are the offsets of that round
 * covered by durable state; after the commit, bs_store_committed.
 *
 * Both stores mark the filters they are given (bf_filter_track) with the
 * id of the state written or restored, which is what lets the next
 * checkpoint of that filter be a delta.
 */
#ifndef BLOOMSTAGE_STORE_OPS_H
#define BLOOMSTAGE_STORE_OPS_H

#include "checkpoint/checkpoint.h"

#include <config.h>
#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BS_STORE_NEWEST (-1)
/* get's answer when the kafka store's one state is past at_offset: another
 * owner went on, or its commit is not visible yet; the state is not
 * damaged, and asking again later may find it matching. */
#define BS_STORE_AHEAD (-2)
/* get's answer when the kafka store's topic cannot be read now (no leader
 * known, a broker away, a read not done in time), or when the directory
 * store cannot remove, or make the removal durable of, the states past the
 * one asked for (a read-only or failing disk): nothing says the state is
 * damaged, and asking again later may read it. */
#define BS_STORE_UNREACHABLE (-3)
/* check's answer when the brokers' authorizer refuses the kafka store a
 * read of its topic (no Read ACL), and sync's when it refuses a write
 * (no Write ACL): errstr names it (bs_refusal_text); granted, the same
 * call passes. */
#define BS_STORE_REFUSED (-4)

/* One partition's state asked for with others (get_many): the question
 * (topic, partition, at_offset, as get's) and the answer (rc as get's;
 * out when rc is 1, the caller's to free; err when rc < 0). */
typedef struct bs_store_query {
    const char *topic;
    int32_t partition;
    int64_t at_offset;
    int rc;
    bs_checkpoint out;
    char err[BS_ERRSTR_SIZE];
} bs_store_query;

/* Each operation takes the store's own state, `impl`. */
typedef struct bs_store_ops {
    /* Before joining the group.  dir: every checkpoint file must verify,
     * and temp files left by a crash are removed.  kafka: the topic exists
     * (or is created), its partitions are known, and it may be read
     * (BS_STORE_REFUSED if not). */
    int (*check)(void *impl, char *errstr, size_t errstr_size);
    /* filter: the partition's filter, marked (bf_filter_track) once its
     * state is written, so the next checkpoint of it can be a delta;
     * audit: its audit sample (NULL: none), written whole in every state,
     * deltas included (checkpoint.h says why). */
    int (*put)(void *impl, const char *topic, int32_t partition,
               int64_t next_offset, const bs_ckpt_wm *wm, uint32_t nwm,
               bf_filter *filter, const bf_audit *audit, char *errstr,
               size_t errstr_size);
    int (*sync)(void *impl, char *errstr, size_t errstr_size);
    /* A partition's state.  at_offset BS_STORE_NEWEST: the newest durable
     * state.  Otherwise at_offset is the partition's committed input
     * offset (transactions: the state must match what the transaction
     * committed): the newest durable state whose next_offset <=
     * at_offset.  1 loaded, 0 none, -1 unreadable or damaged (errstr says
     * which and where).  The dir store removes the states newer than the
     * one loaded (written, never committed); BS_STORE_UNREACHABLE when it
     * cannot (a read-only or failing disk).  The kafka store keeps one
     * chain, restored to its newest state: BS_STORE_AHEAD when that one is
     * past at_offset, BS_STORE_UNREACHABLE when its topic cannot be read
     * now. */
    int (*get)(void *impl, const char *topic, int32_t partition,
               int64_t at_offset, bs_checkpoint *out, char *errstr,
               size_t errstr_size);
    /* get for each of q[0..n), a restore's partitions, answered as get
     * answers each (a failure to read answers every partition it leaves
     * unread).  The kafka store reads each partition of its topic once
     * for all the queries it holds, every partition at once.  NULL: get is
     * called for each. */
    void (*get_many)(void *impl, bs_store_query *q, size_t n);
    /* The partition's input offsets below next_offset are committed (the
     * round's commit, or transaction, succeeded).  Until this is called
     * for a state, put keeps the state before it, so a restore can still
     * be asked for it (a crash after the checkpoint was durable but before
     * the commit).  States older than the newest one with next_offset <=
     * this may then go. */
    int (*committed)(void *impl, const char *topic, int32_t partition,
                     int64_t next_offset, char *errstr, size_t errstr_size);
    /* Bytes the last put wrote (the record, before chunking) and whether
     * that was a delta. */
    uint64_t (*last_bytes)(const void *impl, bool *delta);
    /* "dir checkpoints" or "kafka topic:bloomstage-checkpoints" for logs. */
    const char *(*describe)(const void *impl);
    /* Transactions: the store's records go through `producer` (the
     * stage's transactional one; NULL: its own again), so they commit or
     * abort with the round's transaction, and a restore, which reads at
     * read_committed, finds the checkpoint the committed offsets were
     * committed with.  The producer's delivery reports for the store's
     * records must then be passed to delivery (true: it was the store's).
     * Both NULL for a store that produces nothing. */
    void (*use_producer)(void *impl, rd_kafka_t *producer);
    bool (*delivery)(void *impl, const rd_kafka_message_t *m);
    void (*destroy)(void *impl);
} bs_store_ops;

typedef struct bs_store {
    const bs_store_ops *ops;
    void *impl;
} bs_store;

/* The handle's calls: each is its table's operation of the same name. */
__attribute__((warn_unused_result)) static inline int
bs_store_check(bs_store *st, char *errstr, size_t errstr_size)
{
    return st->ops->check(st->impl, errstr, errstr_size);
}

__attribute__((warn_unused_result)) static inline int
bs_store_put(bs_store *st, const char *topic, int32_t partition,
             int64_t next_offset, const bs_ckpt_wm *wm, uint32_t nwm,
             bf_filter *filter, const bf_audit *audit, char *errstr,
             size_t errstr_size)
{
    return st->ops->put(st->impl, topic, partition, next_offset, wm, nwm,
                        filter, audit, errstr, errstr_size);
}

__attribute__((warn_unused_result)) static inline int
bs_store_sync(bs_store *st, char *errstr, size_t errstr_size)
{
    return st->ops->sync(st->impl, errstr, errstr_size);
}

__attribute__((warn_unused_result)) static inline int
bs_store_get(bs_store *st, const char *topic, int32_t partition,
             int64_t at_offset, bs_checkpoint *out, char *errstr,
             size_t errstr_size)
{
    return st->ops->get(st->impl, topic, partition, at_offset, out, errstr,
                        errstr_size);
}

static inline void bs_store_get_many(bs_store *st, bs_store_query *q,
                                     size_t n)
{
    if (st->ops->get_many) {
        st->ops->get_many(st->impl, q, n);
        return;
    }
    for (size_t i = 0; i < n; i++)
        q[i].rc = st->ops->get(st->impl, q[i].topic, q[i].partition,
                               q[i].at_offset, &q[i].out, q[i].err,
                               sizeof(q[i].err));
}

static inline int bs_store_committed(bs_store *st, const char *topic,
                                     int32_t partition, int64_t next_offset,
                                     char *errstr, size_t errstr_size)
{
    return st->ops->committed(st->impl, topic, partition, next_offset,
                              errstr, errstr_size);
}

static inline uint64_t bs_store_last_bytes(const bs_store *st, bool *delta)
{
    return st->ops->last_bytes(st->impl, delta);
}

static inline const char *bs_store_describe(const bs_store *st)
{
    return st->ops->describe(st->impl);
}

static inline void bs_store_use_producer(bs_store *st, rd_kafka_t *producer)
{
    if (st->ops->use_producer)
        st->ops->use_producer(st->impl, producer);
}

static inline bool bs_store_delivery(bs_store *st, const rd_kafka_message_t *m)
{
    return st->ops->delivery && st->ops->delivery(st->impl, m);
}

#endif
