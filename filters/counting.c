/*
 * counting.c -- a blocked counting Bloom filter: 128 four-bit saturating
 * counters per 64-byte block, k probes inside one block.
 *
 * Counter rules (the guarantee: no false negative for a key added and not
 * removed):
 *   - add increments each of the key's counters that is below 15;
 *   - a counter that reached 15 is saturated: it has lost count, so it is
 *     never decremented again (it may make keys look present for ever,
 *     which costs false positives, never false negatives);
 *   - remove first checks the key looks present (all counters > 0); if not,
 *     nothing changes.  See bloomfilters.h for the false-positive caveat.
 */
#include "bf_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CELL_MAX 15u

bf_counting *bf_counting_wrap(uint8_t *cells, uint64_t nblocks, uint32_t k,
                              bool owns, uint64_t seed)
{
    bf_counting *cf = calloc(1, sizeof(*cf));
    if (!cf)
        return NULL;
    cf->cells = cells;
    cf->nblocks = nblocks;
    cf->k = k;
    cf->owns_cells = owns;
    cf->seed = seed;
    /* Recount what the counters say (a loaded filter). */
    uint64_t n = nblocks * BF_BLOCK_BYTES;
    for (uint64_t i = 0; i < n; i++) {
        unsigned lo = cells[i] & 0xf, hi = cells[i] >> 4;
        cf->cells_set += (lo != 0) + (hi != 0);
        cf->saturated += (lo == CELL_MAX) + (hi == CELL_MAX);
    }
    return cf;
}

bf_counting *bf_counting_new(uint64_t capacity, double fpr, uint64_t seed,
                             char *errstr, size_t errstr_size)
{
    uint64_t nblocks;
    uint32_t k;
    if (bf_size_for(capacity, fpr, BF_COUNTING_BLOCK_CELLS, &nblocks, &k) !=
        BF_OK) {
        bf_seterr(errstr, errstr_size,
                  "cannot size a counting filter for %llu keys at fpr %g: "
                  "capacity must be >= 1 and fpr in (0, %g]",
                  (unsigned long long)capacity, fpr, BF_FPR_MAX);
        return NULL;
    }
    uint8_t *cells = bf_alloc_aligned(nblocks * BF_BLOCK_BYTES);
    if (!cells) {
        bf_seterr(errstr, errstr_size,
                  "cannot allocate %llu bytes for a counting filter",
                  (unsigned long long)(nblocks * BF_BLOCK_BYTES));
        return NULL;
    }
    bf_counting *cf = bf_counting_wrap(cells, nblocks, k, true, seed);
    if (!cf) {
        free(cells);
        bf_seterr(errstr, errstr_size, "out of memory");
        return NULL;
    }
    cf->capacity = capacity;
    cf->fpr = fpr;
    return cf;
}

void bf_counting_destroy(bf_counting *cf)
{
    if (!cf)
        return;
    if (cf->owns_cells)
        free(cf->cells);
    free(cf);
}

uint64_t bf_counting_seed(const bf_counting *cf) { return cf->seed; }

static inline unsigned cell_get(const uint8_t *block, unsigned c)
{
    return (block[c >> 1] >> ((c & 1) * 4)) & 0xf;
}

static inline void cell_set(uint8_t *block, unsigned c, unsigned v)
{
    unsigned shift = (c & 1) * 4;
    block[c >> 1] = (uint8_t)((block[c >> 1] & ~(0xfu << shift)) | (v << shift));
}

static inline uint8_t *block_of(const bf_counting *cf, bf_hash h)
{
    return cf->cells + bf_block_of(h, cf->nblocks) * BF_BLOCK_BYTES;
}

unsigned bf_counting_min_count_h(const bf_counting *cf, bf_hash h)
{
    const uint8_t *block = block_of(cf, h);
    bf_probe p = bf_probe_start(h);
    unsigned min = CELL_MAX;
    for (uint32_t i = 0; i < cf->k; i++) {
        unsigned v = cell_get(block, bf_probe_next(&p, 7));
        if (v < min)
            min = v;
    }
    return min;
}

void bf_counting_prefetch_h(const bf_counting *cf, bf_hash h)
{
    __builtin_prefetch(block_of(cf, h));
}

bool bf_counting_contains_h(const bf_counting *cf, bf_hash h)
{
    return bf_counting_min_count_h(cf, h) > 0;
}

bool bf_counting_add_h(bf_counting *cf, bf_hash h)
{
    uint8_t *block = block_of(cf, h);
    bool was_present = bf_counting_contains_h(cf, h);
    bf_probe p = bf_probe_start(h);
    for (uint32_t i = 0; i < cf->k; i++) {
        unsigned c = bf_probe_next(&p, 7);
        unsigned v = cell_get(block, c);
        if (v == CELL_MAX)
            continue;
        cell_set(block, c, v + 1);
        if (v == 0)
            cf->cells_set++;
        if (v + 1 == CELL_MAX)
            cf->saturated++;
    }
    cf->inserts++;
    return !was_present;
}

bool bf_counting_remove_h(bf_counting *cf, bf_hash h)
{
    if (!bf_counting_contains_h(cf, h))
        return false;
    uint8_t *block = block_of(cf, h);
    bf_probe p = bf_probe_start(h);
    for (uint32_t i = 0; i < cf->k; i++) {
        unsigned c = bf_probe_next(&p, 7);
        unsigned v = cell_get(block, c);
        /* A key probing one counter twice decrements it twice, as its add
         * incremented it twice; the counter cannot reach 0 early because
         * it was incremented once per probe. */
        if (v == CELL_MAX || v == 0)
            continue;
        cell_set(block, c, v - 1);
        if (v == 1)
            cf->cells_set--;
    }
    if (cf->inserts)
        cf->inserts--;
    return true;
}

bool bf_counting_add(bf_counting *cf, const void *key, size_t len)
{
    return bf_counting_add_h(cf, bf_hash_key(key, len, cf->seed));
}

bool bf_counting_remove(bf_counting *cf, const void *key, size_t len)
{
    return bf_counting_remove_h(cf, bf_hash_key(key, len, cf->seed));
}

bool bf_counting_contains(const bf_counting *cf, const void *key, size_t len)
{
    return bf_counting_contains_h(cf, bf_hash_key(key, len, cf->seed));
}

uint64_t bf_counting_saturated(const bf_counting *cf) { return cf->saturated; }

void bf_counting_info(const bf_counting *cf, bf_info *out)
{
    memset(out, 0, sizeof(*out));
    out->kind = BF_KIND_COUNTING;
    out->hash_id = BF_HASH_XXH3_128;
    out->seed = cf->seed;
    out->capacity = cf->capacity;
    out->fpr_target = cf->fpr;
    out->k = cf->k;
    out->scheme = BF_SCHEME_DISTINCT;
    out->layers = 1;
    out->cells = cf->nblocks * BF_COUNTING_BLOCK_CELLS;
    out->bytes = cf->nblocks * BF_BLOCK_BYTES;
    out->inserts = cf->inserts;
    out->cells_set = cf->cells_set;
    out->fill = (double)cf->cells_set / (double)out->cells;
    out->est_keys = bf_estimate_count_blocked(
        cf->nblocks, BF_COUNTING_BLOCK_CELLS, cf->cells_set, cf->k);
    out->est_fpr = isinf(out->est_keys)
                       ? 1.0
                       : bf_blocked_fpr_expected(cf->nblocks,
                                                 BF_COUNTING_BLOCK_CELLS,
                                                 cf->k, out->est_keys);
}
