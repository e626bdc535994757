/*
 * sbbf.h -- the split-block Bloom filter of the Apache Parquet format, the
 * baseline bench_filters measures bloomstage's blocked filter against.
 * Written here from the specification (parquet-format BloomFilter.md), not
 * taken from an implementation:
 *
 *   - z blocks of 256 bits, each eight 32-bit words;
 *   - a key's 64-bit hash x: block i = ((x >> 32) * z) >> 32 (so z < 2^32);
 *   - mask: for each word j, y = (uint32)x * SALT[j]; set bit y >> 27 of
 *     word j (eight fixed odd salts: k = 8, one bit per word);
 *   - insert ORs the mask into the block, a lookup checks it is covered.
 *
 * The 64-bit hash is the low word of the same XXH3-128 hash every filter in
 * the bench gets.  Like the library, it has an AVX2 form (8 x 32-bit
 * multiply, shift, variable shift: the form Impala and Arrow use) and a
 * scalar one; sbbf_init picks what the library picked (bf_simd_name), so
 * both filters run on the same instruction set.  Only the bench uses it.
 * Its words are memory as the library gives its own filters
 * (bf_alloc_aligned: huge pages), so the two differ in design only.  The
 * struct owns its words; sbbf_free releases them.
 */
#ifndef BENCH_SBBF_H
#define BENCH_SBBF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bloomfilters.h"

typedef struct sbbf {
    uint32_t *words; /* nblocks * 8, 64-byte aligned */
    uint64_t nblocks;
    bool avx2;
} sbbf;

/* A filter of nblocks (1 .. 2^32-1) blocks; false if out of memory. */
bool sbbf_init(sbbf *s, uint64_t nblocks);
void sbbf_free(sbbf *s);
void sbbf_clear(sbbf *s);

/* One key; noinline calls, like the library's. */
void sbbf_add(sbbf *s, bf_hash h);
bool sbbf_contains(const sbbf *s, bf_hash h);
/* Many keys, the blocks of the next 16 prefetched (the library's batch
 * paths do the same). */
void sbbf_add_many(sbbf *s, const bf_hash *h, size_t n);
void sbbf_contains_many(const sbbf *s, const bf_hash *h, size_t n,
                        bool *out);

/* The rate the spec's structure predicts for n keys: blocks hold
 * Poisson(n/z) keys, and with i keys in a block a probe bit of a word is
 * set with probability 1 - (31/32)^i, the eight words independent:
 * sum_i Poisson(i; n/z) (1 - (31/32)^i)^8. */
double sbbf_fpr_expected(uint64_t nblocks, double n);
/* The fewest blocks whose predicted rate for n keys is <= p. */
uint64_t sbbf_blocks_for(double n, double p);

#endif
