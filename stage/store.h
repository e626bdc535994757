/*
 * store.h -- where checkpoints are kept (checkpoint.store):
 *
 *   dir    per partition a snapshot and a bounded chain of deltas in
 *          checkpoint.dir (store_dir.c), each file written and fsynced by
 *          bs_store_put and renamed into place; the directory is fsynced
 *          once per round by bs_store_sync;
 *   kafka  the compacted topic checkpoint.topic, so a partition's state
 *          follows the partition to whichever instance of the consumer
 *          group gets it.  Each state (a snapshot or a delta, as the dir
 *          store writes them) is split into chunks under
 *          checkpoint.chunk.bytes, keyed
 *            bs1/GROUP/TOPIC/PARTITION/SEQ/I
 *          and made valid by a manifest, keyed bs1/GROUP/TOPIC/PARTITION
 *          (compaction keeps the newest), naming the snapshot and the
 *          deltas after it, written only after the broker acknowledged
 *          every chunk; a crash mid-write leaves chunks no manifest names,
 *          never a manifest without its chunks.  When a new snapshot's
 *          manifest is written the old chain's chunks are deleted
 *          (tombstones), so compaction keeps what a restore reads and no
 *          more.  The chain's bounds are the dir store's
 *          (checkpoint.delta.max, checkpoint.delta.ratio); a delta chains
 *          only onto a state whose offsets were committed
 *          (bs_store_committed), so an aborted round is never a base.
 *          Every record of one partition's checkpoints goes to one
 *          partition of checkpoint.topic, so a restore reads only that
 *          (store_kafka.c).
 *
 * A checkpoint round: bs_store_put for each changed partition, then
 * bs_store_sync; only when sync returns 0 are the offsets of that round
 * covered by durable state; after the commit, bs_store_committed.
 *
 * Both mark the filters they are given (bf_filter_track) with the id of
 * the state written or restored, which is what lets the next checkpoint of
 * that filter be a delta.
 */
#ifndef BLOOMSTAGE_STORE_H
#define BLOOMSTAGE_STORE_H

#include "checkpoint.h"
#include "settings.h"

#include <librdkafka/rdkafka.h>

typedef struct bs_store bs_store;

/* set: checkpoint.store, .dir, .topic, .chunk.bytes and consumer.group.id
 * are read from it; the store copies the fields and keeps the strings,
 * which are the bs_config's (settings.h): that configuration must outlive
 * the store.  reader: an assign-only consumer the kafka store reads with
 * (borrowed; NULL for dir).  producer_conf: a librdkafka configuration for
 * the kafka store's own producer (taken over, destroyed on failure too;
 * NULL for dir). */
bs_store *bs_store_new(const bs_settings *set, rd_kafka_t *reader,
                       rd_kafka_conf_t *producer_conf, char *errstr,
                       size_t errstr_size);
void bs_store_destroy(bs_store *st);

/* Before joining the group.  dir: every checkpoint file must verify, and
 * temp files left by a crash are removed.  kafka: the topic exists (or is
 * created) and its partitions are known. */
int bs_store_check(bs_store *st, char *errstr, size_t errstr_size)
    __attribute__((warn_unused_result));

/* filter: the partition's filter, marked (bf_filter_track) once its state
 * is written, so the next checkpoint of it can be a delta. */
int bs_store_put(bs_store *st, const char *topic, int32_t partition,
                 int64_t next_offset, const bs_ckpt_wm *wm, uint32_t nwm,
                 bf_filter *filter, char *errstr, size_t errstr_size)
    __attribute__((warn_unused_result));
int bs_store_sync(bs_store *st, char *errstr, size_t errstr_size)
    __attribute__((warn_unused_result));

#define BS_STORE_NEWEST (-1)
/* A partition's state.  at_offset BS_STORE_NEWEST: the newest durable state
 * (today's behaviour).  Otherwise at_offset is the partition's committed
 * input offset (transactions: the state must match what the transaction
 * committed): the newest durable state whose next_offset <= at_offset.  1
 * loaded, 0 none, -1 unreadable or damaged (errstr says which and where).
 * The dir store removes the states newer than the one loaded (written,
 * never committed).  The kafka store keeps one chain, restored to its
 * newest state: BS_STORE_AHEAD when that one is past at_offset. */
/* bs_store_get's answer when the kafka store's one state is past
 * at_offset: another owner went on, or its commit is not visible yet; the
 * state is not damaged, and asking again later may find it matching. */
#define BS_STORE_AHEAD (-2)
int bs_store_get(bs_store *st, const char *topic, int32_t partition,
                 int64_t at_offset, bs_checkpoint *out, char *errstr,
                 size_t errstr_size) __attribute__((warn_unused_result));

/* The partition's input offsets below next_offset are committed (the
 * round's commit, or transaction, succeeded).  Until this is called for a
 * state, bs_store_put keeps the state before it, so a restore can still be
 * asked for it (a crash after the checkpoint was durable but before the
 * commit).  States older than the newest one with next_offset <= this may
 * then go. */
int bs_store_committed(bs_store *st, const char *topic, int32_t partition,
                       int64_t next_offset, char *errstr, size_t errstr_size);

/* Bytes the last bs_store_put wrote (the record, before chunking) and
 * whether that was a delta. */
uint64_t bs_store_last_bytes(const bs_store *st, bool *delta);

/* Transactions: the kafka store's records go through `producer` (the
 * stage's transactional one; NULL: its own again), so they commit or abort
 * with the round's transaction, and a restore, which reads at
 * read_committed, finds the checkpoint the committed offsets were
 * committed with.  The producer's delivery reports for checkpoint.topic
 * must then be passed to bs_store_delivery (true: it was the store's). */
void bs_store_use_producer(bs_store *st, rd_kafka_t *producer);
bool bs_store_delivery(bs_store *st, const rd_kafka_message_t *m);

/* "dir checkpoints" or "kafka topic:bloomstage-checkpoints" for logs. */
const char *bs_store_describe(const bs_store *st);

#endif
