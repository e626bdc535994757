/*
 * store.h -- where checkpoints are kept (checkpoint.store), and the
 * handle for the store it names:
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
 * Both follow one contract (store_ops.h: the operations, what each
 * promises, and the handle's calls); bs_store_new (store.c) makes the
 * handle for the one checkpoint.store names.
 */
#ifndef BLOOMSTAGE_STORE_H
#define BLOOMSTAGE_STORE_H

#include "base/settings.h"
#include "store/store_ops.h" /* the contract; bs_store and its calls */

#include <librdkafka/rdkafka.h>

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

#endif
