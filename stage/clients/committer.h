/*
 * committer.h -- a transaction's commit on a thread of its own
 * (committer.c), so that the stage produces the next transaction on its
 * other producer meanwhile (exactly_once.overlap; overlap.c hands commits
 * over and takes their outcomes).  One commit at a time: the stage thread
 * hands over a producer whose every record is delivered, the offsets and
 * the group's metadata, and touches that producer again only once it has
 * taken the outcome.  The thread runs bs_txn_commit_on and nothing else.
 */
#ifndef BLOOMSTAGE_COMMITTER_H
#define BLOOMSTAGE_COMMITTER_H

#include "core/stage_int.h"

#include <stdbool.h>

typedef struct bs_committer bs_committer;

/* What a commit came to: BS_OK (committed) or not (err says why), and
 * what its two calls took. */
typedef struct bs_commit_outcome {
    bs_rc rc;
    char err[BS_ERRSTR_SIZE];
    double send_s, commit_s;
} bs_commit_outcome;

/* The committer and its thread; NULL with errstr if the thread cannot be
 * started. */
bs_committer *bs_committer_new(char *errstr, size_t errstr_size);
/* Hands over the commit of rk's open transaction with offsets (borrowed:
 * the caller keeps them unchanged until it has taken the outcome) and md
 * (taken over).  The committer must be idle: no commit handed over whose
 * outcome is not taken. */
void bs_committer_start(bs_committer *c, rd_kafka_t *rk,
                        const rd_kafka_topic_partition_list_t *offsets,
                        rd_kafka_consumer_group_metadata_t *md);
/* The outcome of the commit handed over, into *out: true once it is
 * done (waiting for it if wait), false while it runs or when none was
 * handed over.  Taking it makes the committer idle. */
bool bs_committer_take(bs_committer *c, bool wait, bs_commit_outcome *out);
/* Waits for a commit in progress (its outcome dropped), then ends the
 * thread.  NULL is a no-op. */
void bs_committer_destroy(bs_committer *c);

#endif
