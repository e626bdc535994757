/*
 * store_dir.h -- the directory store behind bs_store (store.c) for
 * checkpoint.store=dir: a snapshot and a bounded chain of deltas per
 * partition (store_dir.c says how), its table of the contract's operations
 * (store_ops.h), a state read without a handle, and the two questions other
 * code asks of such a directory (which files are states or temp files, and
 * a partition's newest state).
 */
#ifndef BLOOMSTAGE_STORE_DIR_H
#define BLOOMSTAGE_STORE_DIR_H

#include "store/store_ops.h" /* the contract it implements, BS_STORE_* */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct bs_dirstore bs_dirstore;

/* dir is copied.  max_chain: deltas after a snapshot before the next
 * checkpoint is a snapshot again (0: every checkpoint is a snapshot);
 * max_ratio: the same once the chain's bytes would pass this fraction of
 * the snapshot's. */
bs_dirstore *bs_dirstore_new(const char *dir, uint32_t max_chain,
                             double max_ratio);
void bs_dirstore_destroy(bs_dirstore *ds);

/* The contract's operations (store_ops.h) on a bs_dirstore. */
extern const bs_store_ops bs_dirstore_ops;

/* As bs_store_get (store_ops.h), for a tool that reads a directory without
 * a handle. */
int bs_dirstore_get(bs_dirstore *ds, const char *topic, int32_t partition,
                    int64_t at_offset, bs_checkpoint *out, char *errstr,
                    size_t errstr_size);

/* Whether a directory entry is a state file (snapshot, delta, snapshot
 * set aside) or the temp file of a write that never reached its rename. */
bool bs_dirstore_is_state_name(const char *name);
bool bs_dirstore_is_temp_name(const char *name);

/* The header of a partition's newest state in dir (no checksum verified):
 * 1, 0 none, -1 with errstr. */
int bs_dirstore_newest(const char *dir, const char *topic, int32_t partition,
                       bs_ckpt_head *out, char *errstr, size_t errstr_size);

#endif
