/*
 * txn_id.h -- the transactional producer's id (exactly_once.method
 * transactions) when exactly_once.transactional.id leaves it to the stage,
 * and the watch on how often the broker fences it.  No Kafka here: the
 * locks are the kernel's, the clock is the caller's.
 *
 * Correctness needs the id unique to each live instance: two producers
 * with one id fence each other for as long as both run.  Stability across a
 * restart only saves time: the restart's init_transactions aborts the
 * transaction its predecessor left open at once, instead of leaving
 * read_committed readers behind it until transaction.timeout.ms.  So an
 * instance without a configured id takes a slot on its host: the lowest N
 * whose slot file (bs_txn_slot_dir()/GROUP.N.lock) it can lock (flock,
 * exclusive) and holds that lock for its whole life.  The kernel releases
 * it when the process ends, kill -9 included, so a restart takes the same
 * slot back, while two live instances never hold one together.
 */
#ifndef BLOOMSTAGE_TXN_ID_H
#define BLOOMSTAGE_TXN_ID_H

#include "base/timeouts.h"

#include <stdbool.h>
#include <stddef.h>

/* A slot held: the lock's descriptor, its number, its file. */
typedef struct bs_txn_slot {
    bool held;
    int fd;
    int slot;
    char path[4096];
} bs_txn_slot;

/* Where slot files go: /run/lock/bloomstage (the host's lock directory:
 * on tmpfs, shared by every user and not hidden by a unit's PrivateTmp),
 * else /tmp/bloomstage-txn when /run/lock is missing or read-only.  Both
 * are made world-writable with the sticky bit, as /tmp is, so instances
 * under different users see one another's slots. */
const char *bs_txn_slot_dir(void);

/* Takes the lowest free slot of `group` in dir (made if missing; NULL:
 * bs_txn_slot_dir()).  0 with *sl held; -1 with errstr if dir cannot hold
 * slot files or every slot is taken.  The lock is released by
 * bs_txn_slot_release or when the process ends. */
int bs_txn_slot_take(bs_txn_slot *sl, const char *dir, const char *group,
                     char *errstr, size_t errstr_size);
/* Releases a slot taken (no-op if none). */
void bs_txn_slot_release(bs_txn_slot *sl);

/* Fencings of the producer, the last BS_TXN_FENCED_MAX of them. */
typedef struct bs_fence_window {
    double at[BS_TXN_FENCED_MAX];
    unsigned n;
} bs_fence_window;

/* Notes a fencing at now_s (seconds, any monotonic clock): true when this
 * one makes BS_TXN_FENCED_MAX within BS_TXN_FENCED_WINDOW_S. */
bool bs_fence_window_add(bs_fence_window *w, double now_s);

#endif
