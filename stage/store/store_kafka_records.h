/*
 * store_kafka_records.h -- the Kafka store's records (store.h says what it
 * keeps), written and decoded without a broker: the manifest, and the
 * chunks of one state or of a whole chain.  The store's get reads with
 * these (store_kafka.c); tests and fuzz targets call them on bytes of
 * their own.  Nothing here trusts its input.
 */
#ifndef BLOOMSTAGE_STORE_KAFKA_RECORDS_H
#define BLOOMSTAGE_STORE_KAFKA_RECORDS_H

#include "checkpoint/checkpoint.h"

#include <stddef.h>
#include <stdint.h>

/* One state a manifest names: its seq, its chunks (count, size of each
 * but the last, total size, XXH3-64 of the whole) and the offset of its
 * chunk 0 in the checkpoint topic. */
typedef struct bs_store_manifest {
    int64_t seq;
    uint32_t nchunks;
    uint64_t chunk_bytes, size, xxh3;
    int64_t first;
} bs_store_manifest;

/* A version-2 manifest naming `n` states, chain[0] the snapshot, and the
 * next input offset they cover: malloc'd JSON, NULL when out of memory. */
char *bs_store_manifest_json(const bs_store_manifest *chain, size_t n,
                             int64_t input_offset);

/* The most states one manifest may name: a snapshot and the longest chain
 * checkpoint.delta.max allows. */
#define BS_STORE_MAX_STATES 100001u

/* A manifest's value:
 *   version 2  {"v":2, "input_offset", "states":[S, ...]}, each S
 *              {"seq", "chunks", "chunk_bytes", "size", "xxh3" (16 hex
 *              digits), "first"}: states[0] the snapshot, then the deltas
 *              after it, seq consecutive, first not decreasing;
 *   version 1  one S's fields and "input_offset" at the top (a whole
 *              checkpoint, written before deltas).
 * *states (malloc'd, the caller frees it) gets the n states.  0, or -1 when
 * v[0..len) is not a manifest this build wrote: not JSON, a field missing,
 * mistyped or out of range, a chunk count that does not fit the size and
 * chunk size, a broken chain. */
int bs_store_manifest_parse(const void *v, size_t len,
                            bs_store_manifest **states, size_t *n)
    __attribute__((warn_unused_result));

/* The chunks one state names, gathered from the records of the checkpoint
 * topic in any order.  new: NULL when out of memory (it allocates the
 * state's size). */
typedef struct bs_store_chunks bs_store_chunks;
bs_store_chunks *bs_store_chunks_new(const char *manifest_key,
                                     const bs_store_manifest *m);
/* Offers one record (key, value; value NULL for a tombstone): 1 when it
 * completed the set, else 0 (also for a record that is not one of them: a
 * different key, a duplicate, the wrong size). */
int bs_store_chunks_add(bs_store_chunks *g, const void *key, size_t klen,
                        const void *val, size_t vlen);
/* The record the chunks make: 1, or -1 with errstr (missing chunks,
 * checksum, or bs_ckpt_decode's reasons; `name` in every message).  A
 * delta comes out as bs_ckpt_decode gives it (out->delta). */
int bs_store_chunks_decode(bs_store_chunks *g, const char *name,
                           bs_checkpoint *out, char *errstr,
                           size_t errstr_size)
    __attribute__((warn_unused_result));
void bs_store_chunks_free(bs_store_chunks *g);

/* Every state of one manifest gathered at once (a restore reads the
 * topic once from states[0].first), then made into the newest state: the
 * snapshot with each delta applied in order (bs_ckpt_apply, which refuses
 * a broken link by name).  new: NULL when out of memory. */
typedef struct bs_store_chain bs_store_chain;
bs_store_chain *bs_store_chain_new(const char *manifest_key,
                                   const bs_store_manifest *states,
                                   size_t n);
/* As bs_store_chunks_add, offered to every state whose chunk 0 is at or
 * before `offset` (the record's in the checkpoint topic): 1 once every
 * state is complete. */
int bs_store_chain_add(bs_store_chain *c, int64_t offset, const void *key,
                       size_t klen, const void *val, size_t vlen);
/* 1 with *out the newest state (its filter tracked from its id), or -1
 * with errstr naming `name` and the state at fault (missing chunks, a
 * checksum, a snapshot that is a delta, a delta that does not apply). */
int bs_store_chain_decode(bs_store_chain *c, const char *name,
                          bs_checkpoint *out, char *errstr,
                          size_t errstr_size)
    __attribute__((warn_unused_result));
void bs_store_chain_free(bs_store_chain *c);

#endif
