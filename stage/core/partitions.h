/*
 * partitions.h -- the assigned input partitions (partitions.c): lookup, add
 * and remove, restore to the last checkpoint, the first checkpoint, and
 * their share of the open transaction.
 */
#ifndef BLOOMSTAGE_PARTITIONS_H
#define BLOOMSTAGE_PARTITIONS_H

#include "core/stage_int.h"

part *bs_part_find(bs_stage *s, const char *topic, int32_t partition);
part *bs_part_add(bs_stage *s, const char *topic, int32_t partition);
void bs_part_remove(bs_stage *s, const char *topic, int32_t partition);
void bs_part_free(part *p);
/* Restores parts[0..n) (pointers into s->parts) to their last checkpoint:
 * filter and offsets from the store and, with exactly_once, the output
 * tail since (replay.h).  BS_FATAL: a checkpoint that cannot be used;
 * BS_RETRY: the output tail could not be read (the partitions are left
 * RESTORE_PENDING).  Either way their records must not be processed. */
bs_rc bs_parts_restore(bs_stage *s, part **parts, size_t n, char *errstr,
                       size_t errstr_size);
/* Logs where p's state came from: `msg` with checkpoint_offset and
 * already_forwarded, or restore=pending while its restore waits (a
 * "partition restored" line follows the retry, rollback.c). */
void bs_part_log_restored(const part *p, const char *msg);
/* exactly_once: a first checkpoint for a partition that has none. */
bs_rc bs_part_initial_checkpoint(bs_stage *s, part *p, char *errstr,
                                 size_t errstr_size);
/* True when some partition has records not in a durable checkpoint:
 * processed since its last one, or taken back by a restore (a rollback)
 * and not processed and checkpointed again since. */
bool bs_parts_owe(const bs_stage *s);
/* True when some partition's durable checkpoint is not committed yet. */
bool bs_parts_commit_behind(const bs_stage *s);
/* Transactions: whether p has output in the open transaction (records
 * processed since its last commit or restore). */
bool bs_part_in_txn(const part *p);
/* Transactions: the open transaction was aborted (or its producer
 * replaced): every partition with output in it is marked txn_aborted. */
void bs_parts_txn_aborted(bs_stage *s);
/* Transactions: a transaction committed; every partition's output so far
 * is in it. */
void bs_parts_txn_committed(bs_stage *s);

/* bs_store_sync of s's store; a write the brokers refused (the Kafka
 * store's own producer: BS_STORE_REFUSED) said by bs_refused. */
int bs_ckpt_sync(bs_stage *s, char *errstr, size_t errstr_size);

#endif
