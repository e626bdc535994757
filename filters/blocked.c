/*
 * blocked.c -- the blocked Bloom filter: 512-bit blocks, k probes inside one
 * block, so an insert or a lookup touches one cache line.
 *
 * Three probe schemes (bf_internal.h): the two lane schemes of new filters
 * (sixteen 32-bit lanes for k a multiple of 16, eight 64-bit lanes
 * otherwise; a version-2 file may also hold k = 16 in 64-bit lanes),
 * branch-free, with AVX-512 (k = 8 and 16) and AVX2 versions chosen at run
 * time (the library is built for the baseline x86-64, never -march=native:
 * the SIMD functions carry their own target attribute and run only when
 * the CPU reports support for it) and a scalar one everywhere else; and the
 * distinct-probe scheme of version-1 files, kept so they answer as they
 * did.  This file owns the filter, the choice of instruction set and
 * the scalar kernels; blocked_simd.c owns the SIMD ones.  Every operation
 * is a jump from the public function into a kernel for the filter's k and
 * the instruction set (set_level), through the filter's pointers into the
 * tables of the current kernels for the one-key ones.
 *
 * The filter owns its word array unless it was wrapped around memory the
 * loader maps from a file (owns_words false: the bf_filter that loaded it
 * unmaps it, and the filter is read-only).
 */
#include "bf_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* -- instruction set, chosen once --------------------------------------- */

/* SIMD_SCALAR, SIMD_AVX2 or SIMD_AVX512: what the lane scheme runs on. */
enum { SIMD_SCALAR, SIMD_AVX2, SIMD_AVX512 };
static const char *const simd_names[] = {"scalar", "avx2", "avx512"};
static unsigned simd_level;

#ifdef BF_HAVE_AVX2_CODE
static bool cpu_has(unsigned level)
{
    __builtin_cpu_init();
    bool avx2 =
        __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
    if (level == SIMD_AVX2)
        return avx2;
    return level == SIMD_AVX512 && avx2 &&
           __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512dq");
}
#endif

/* The kernels the current instruction set runs, by the filter's kernel
 * (BF_KERNEL_*): kernels_for applied once, when the level is chosen
 * (set_level), one array an operation.  A filter points at its entries
 * of the one-key arrays (contains_entry, add_entry), so that a public
 * one-key function is a pointer load and a jump: one key at a time, the
 * shorter the operation, the more keys' cache misses are in flight
 * (bench/HISTORY.md part 1, "The one-key path"). */
static bf_contains_fn contains_cur[BF_NKERNELS];
static bf_add_fn add_cur[2 * BF_NKERNELS]; /* the one-key adds, then the
                                              counted ones (BF_NKERNELS +
                                              kernel) */
static bf_contains_many_fn contains_many_cur[BF_NKERNELS];
static bf_add_many_fn add_many_cur[BF_NKERNELS];

static void set_level(unsigned level);

__attribute__((constructor)) static void simd_init(void)
{
#ifdef BF_HAVE_AVX2_CODE
    bf_simd_init();
    set_level(cpu_has(SIMD_AVX512) ? SIMD_AVX512
              : cpu_has(SIMD_AVX2) ? SIMD_AVX2
                                   : SIMD_SCALAR);
#else
    set_level(SIMD_SCALAR);
#endif
}

const char *bf_simd_name(void) { return simd_names[simd_level]; }

bool bf_simd_use(const char *name)
{
    for (unsigned level = 0; level < 3; level++) {
        if (strcmp(name, simd_names[level]))
            continue;
#ifdef BF_HAVE_AVX2_CODE
        if (level != SIMD_SCALAR && !cpu_has(level))
            return false;
#else
        if (level != SIMD_SCALAR)
            return false;
#endif
        set_level(level);
        return true;
    }
    return false;
}

bf_blocked *bf_blocked_wrap(uint64_t *words, uint64_t nblocks, uint32_t k,
                            uint32_t scheme, bool owns, uint64_t seed)
{
    bf_blocked *bf = calloc(1, sizeof(*bf));
    if (!bf)
        return NULL;
    bf->words = words;
    bf->nblocks = nblocks;
    bf->k = k;
    bf->scheme = scheme;
    if (scheme == BF_SCHEME_LANES32)
        bf->kernel = k == 16 ? BF_KERNEL_L32_K16 : BF_KERNEL_L32;
    else if (scheme == BF_SCHEME_LANES)
        bf->kernel = k == 8    ? BF_KERNEL_L64_K8
                     : k == 16 ? BF_KERNEL_L64_K16
                               : BF_KERNEL_L64;
    else
        bf->kernel = BF_KERNEL_SCALAR;
    bf->contains_entry = &contains_cur[bf->kernel];
    bf->add_entry = &add_cur[bf->kernel];
    bf->owns_words = owns;
    bf->seed = seed;
    return bf;
}

bf_blocked *bf_blocked_new_geometry(uint64_t nblocks, uint32_t k,
                                    uint64_t seed, char *errstr,
                                    size_t errstr_size)
{
    if (nblocks == 0 || nblocks > BF_MAX_BLOCKS || k == 0 || k > BF_MAX_K) {
        bf_seterr(errstr, errstr_size,
                  "blocked filter geometry out of range: %llu blocks (1..2^40)"
                  ", k %u (1..%u)",
                  (unsigned long long)nblocks, k, BF_MAX_K);
        return NULL;
    }
    uint64_t *words = bf_alloc_aligned(nblocks * BF_BLOCK_BYTES);
    if (!words) {
        bf_seterr(errstr, errstr_size,
                  "cannot allocate %llu bytes for a blocked filter",
                  (unsigned long long)(nblocks * BF_BLOCK_BYTES));
        return NULL;
    }
    bf_blocked *bf = bf_blocked_wrap(
        words, nblocks, k, bf_scheme_for(BF_BLOCK_BITS, k), true, seed);
    if (!bf) {
        free(words);
        bf_seterr(errstr, errstr_size, "out of memory");
    }
    return bf;
}

bf_blocked *bf_blocked_new(uint64_t capacity, double fpr, uint64_t seed,
                           char *errstr, size_t errstr_size)
{
    uint64_t nblocks;
    uint32_t k;
    if (bf_size_for(capacity, fpr, BF_BLOCK_BITS, &nblocks, &k) != BF_OK) {
        bf_seterr(errstr, errstr_size,
                  "cannot size a filter for %llu keys at fpr %g: capacity "
                  "must be >= 1 and fpr in (0, %g]",
                  (unsigned long long)capacity, fpr, BF_FPR_MAX);
        return NULL;
    }
    bf_blocked *bf =
        bf_blocked_new_geometry(nblocks, k, seed, errstr, errstr_size);
    if (bf) {
        bf->capacity = capacity;
        bf->fpr = fpr;
    }
    return bf;
}

void bf_blocked_destroy(bf_blocked *bf)
{
    if (!bf)
        return;
    if (bf->owns_words)
        free(bf->words);
    free(bf->dirty);
    free(bf);
}

/* The one-key add's entry follows the bitmap: the counted add (which
 * marks the block) while changes are tracked, the plain one otherwise. */
static void set_dirty(bf_blocked *bf, uint64_t *dirty)
{
    free(bf->dirty);
    bf->dirty = dirty;
    bf->add_entry = &add_cur[bf->kernel + (dirty ? BF_NKERNELS : 0)];
}

bool bf_blocked_track(bf_blocked *bf)
{
    uint64_t *dirty = calloc((size_t)bf_dirty_words(bf), sizeof(uint64_t));
    if (!dirty)
        return false;
    set_dirty(bf, dirty);
    return true;
}

void bf_blocked_untrack(bf_blocked *bf) { set_dirty(bf, NULL); }

uint64_t bf_blocked_seed(const bf_blocked *bf) { return bf->seed; }

/* -- the distinct-probe scheme (version-1 files) ----------------------- */

/* The key's k probes as a 512-bit pattern: an insert ORs it into the
 * block, a lookup checks it is covered.  Both then touch the block once,
 * branch-free, and the pattern is computed while the block's cache line is
 * on its way (prefetched first). */
static inline void distinct_pattern(bf_hash h, uint32_t k, uint64_t pat[8])
{
    bf_probe p = bf_probe_start(h);
    for (uint32_t i = 0; i < k; i++)
        (void)bf_probe_next(&p, 9);
    memcpy(pat, p.used, sizeof(p.used));
}

static inline bool covered(const uint64_t *block, const uint64_t pat[8])
{
    uint64_t miss = 0;
    for (unsigned w = 0; w < BF_BLOCK_WORDS; w++)
        miss |= pat[w] & ~block[w];
    return miss == 0;
}

/* Probe by probe, stopping at the first clear bit: for a block already in
 * cache (the batch path prefetched it). */
static inline bool distinct_probe_block(const uint64_t *block, bf_hash h,
                                        uint32_t k)
{
    bf_probe p = bf_probe_start(h);
    for (uint32_t j = 0; j < k; j++) {
        unsigned bit = bf_probe_next(&p, 9);
        if (!((block[bit >> 6] >> (bit & 63)) & 1))
            return false;
    }
    return true;
}

static inline void pattern(const bf_blocked *bf, bf_hash h, uint64_t pat[8])
{
    if (bf->scheme == BF_SCHEME_LANES32)
        bf_lanes32_pattern(h, bf->k, pat);
    else if (bf->scheme == BF_SCHEME_LANES)
        bf_lanes_pattern(h, bf->k, pat);
    else
        distinct_pattern(h, bf->k, pat);
}

/* OR a pattern into a block; returns the bits that were new. */
static inline unsigned or_pattern(uint64_t *block, const uint64_t pat[8])
{
    unsigned added = 0;
    for (unsigned w = 0; w < BF_BLOCK_WORDS; w++) {
        added += (unsigned)__builtin_popcountll(pat[w] & ~block[w]);
        block[w] |= pat[w];
    }
    return added;
}

POPCNT_CLONES uint64_t bf_popcount_words(const uint64_t *w, uint64_t n)
{
    uint64_t c = 0;
    for (uint64_t i = 0; i < n; i++)
        c += (uint64_t)__builtin_popcountll(w[i]);
    return c;
}

uint64_t bf_blocked_bits(const bf_blocked *bf)
{
    if (bf->uncounted) {
        /* A cache of the count, not of the filter's contents: the one
         * place a const filter changes (read-only filters never go
         * stale, nothing adds to them); bf_blocked_inserts stays what it
         * was. */
        bf_blocked *w = (bf_blocked *)bf;
        w->bits_set = bf_popcount_words(bf->words,
                                        bf->nblocks * BF_BLOCK_WORDS);
        w->inserts += w->uncounted;
        w->uncounted = 0;
    }
    return bf->bits_set;
}

/* The scalar forms of every operation, any scheme: out of line, so
 * that the public functions stay a few compares and a tail jump. */
__attribute__((noinline)) static bool contains_scalar(const bf_blocked *bf, bf_hash h)
{
    const uint64_t *block = bf_block_words(bf, h);
    __builtin_prefetch(block);
    uint64_t pat[8];
    pattern(bf, h, pat);
    return covered(block, pat);
}

/* The one-key add, counted (bits_set kept, the block marked if tracked)
 * or not (in uncounted; never a tracked filter's, see add_entry), as the
 * SIMD kernels do it (blocked_simd.c). */
static inline bool add_one_scalar(bf_blocked *bf, bf_hash h, bool counted)
{
    uint64_t *block = bf_block_words(bf, h);
    __builtin_prefetch(block, 1);
    uint64_t pat[8];
    pattern(bf, h, pat);
    unsigned added = or_pattern(block, pat);
    if (!added)
        return false;
    if (counted) {
        bf_blocked_touch(bf, bf_block_of(h, bf->nblocks));
        bf->inserts++;
        bf->bits_set += added;
    } else {
        bf->uncounted++;
    }
    return true;
}

__attribute__((noinline)) static bool add_scalar(bf_blocked *bf, bf_hash h)
{
    return add_one_scalar(bf, h, false);
}

__attribute__((noinline)) static bool add_counted_scalar(bf_blocked *bf,
                                                         bf_hash h)
{
    return add_one_scalar(bf, h, true);
}

__attribute__((noinline)) static void contains_many_scalar(const bf_blocked *bf, const bf_hash *h,
                                 size_t n, bool *out)
{
    for (size_t i = 0; i < n && i < BF_AHEAD; i++)
        __builtin_prefetch(bf_block_words(bf, h[i]));
    for (size_t i = 0; i < n; i++) {
        if (i + BF_AHEAD < n)
            __builtin_prefetch(bf_block_words(bf, h[i + BF_AHEAD]));
        const uint64_t *block = bf_block_words(bf, h[i]);
        if (bf->scheme != BF_SCHEME_DISTINCT) {
            uint64_t pat[8];
            pattern(bf, h[i], pat);
            out[i] = covered(block, pat);
        } else {
            /* The block is (nearly) in cache: an absent key costs a
             * couple of probes instead of the whole pattern. */
            out[i] = distinct_probe_block(block, h[i], bf->k);
        }
    }
}

__attribute__((noinline)) static size_t add_many_scalar(bf_blocked *bf, const bf_hash *h, size_t n,
                              bool *out)
{
    uint64_t bits = 0;
    size_t added_keys = 0;
    for (size_t i = 0; i < n && i < BF_AHEAD; i++)
        __builtin_prefetch(bf_block_words(bf, h[i]), 1);
    for (size_t i = 0; i < n; i++) {
        if (i + BF_AHEAD < n)
            __builtin_prefetch(bf_block_words(bf, h[i + BF_AHEAD]), 1);
        uint64_t pat[8];
        pattern(bf, h[i], pat);
        unsigned added = or_pattern(bf_block_words(bf, h[i]), pat);
        if (added)
            bf_blocked_touch(bf, bf_block_of(h[i], bf->nblocks));
        bits += added;
        added_keys += added != 0;
        if (out)
            out[i] = added != 0;
    }
    bf->bits_set += bits;
    bf->inserts += added_keys;
    return added_keys;
}

/* -- the operations ------------------------------------------------------ */

/* The scalar kernels: any scheme, any instruction set. */
static const bf_kernels scalar_kernels = {contains_scalar, add_scalar,
                                          add_counted_scalar,
                                          contains_many_scalar,
                                          add_many_scalar};

/* The kernels a filter of kernel `kernel` (BF_KERNEL_*, chosen by scheme
 * and k when it is made) runs at instruction set `level`. */
static const bf_kernels *kernels_for(unsigned level, unsigned kernel)
{
#ifdef BF_HAVE_AVX2_CODE
    if (level == SIMD_SCALAR || kernel == BF_KERNEL_SCALAR)
        return &scalar_kernels;
    return level == SIMD_AVX512 ? &bf_kernels_avx512[kernel - 1]
                                : &bf_kernels_avx2[kernel - 1];
#else
    (void)level;
    (void)kernel;
    return &scalar_kernels;
#endif
}

static void set_level(unsigned level)
{
    simd_level = level;
    for (unsigned i = 0; i < BF_NKERNELS; i++) {
        const bf_kernels *t = kernels_for(level, i);
        contains_cur[i] = t->contains;
        add_cur[i] = t->add;
        add_cur[BF_NKERNELS + i] = t->add_counted;
        contains_many_cur[i] = t->contains_many;
        add_many_cur[i] = t->add_many;
    }
}

bool bf_blocked_contains_h(const bf_blocked *bf, bf_hash h)
{
    return (*bf->contains_entry)(bf, h);
}

void bf_blocked_prefetch_h(const bf_blocked *bf, bf_hash h)
{
    __builtin_prefetch(bf_block_words(bf, h));
}

void bf_blocked_contains_many_h(const bf_blocked *bf, const bf_hash *h,
                                size_t n, bool *out)
{
    contains_many_cur[bf->kernel](bf, h, n, out);
}

size_t bf_blocked_add_many_h(bf_blocked *bf, const bf_hash *h, size_t n,
                             bool *out)
{
    return add_many_cur[bf->kernel](bf, h, n, out);
}

bool bf_blocked_add_h(bf_blocked *bf, bf_hash h)
{
    return (*bf->add_entry)(bf, h);
}

bool bf_blocked_add_counted_h(bf_blocked *bf, bf_hash h)
{
    return add_cur[BF_NKERNELS + bf->kernel](bf, h);
}

bool bf_blocked_add_if_absent_h(bf_blocked *bf, bf_hash h)
{
    /* An add that sets no new bit is exactly a key that was maybe-present,
     * and it leaves the filter unchanged: one pass does both. */
    return bf_blocked_add_h(bf, h);
}

bool bf_blocked_add(bf_blocked *bf, const void *key, size_t len)
{
    return bf_blocked_add_h(bf, bf_hash_key(key, len, bf->seed));
}

bool bf_blocked_contains(const bf_blocked *bf, const void *key, size_t len)
{
    return bf_blocked_contains_h(bf, bf_hash_key(key, len, bf->seed));
}

bool bf_blocked_add_if_absent(bf_blocked *bf, const void *key, size_t len)
{
    return bf_blocked_add_if_absent_h(bf, bf_hash_key(key, len, bf->seed));
}

double bf_estimate_count(uint64_t cells, uint64_t set, uint32_t k)
{
    if (cells == 0 || k == 0)
        return 0.0;
    if (set >= cells)
        return INFINITY;
    return -((double)cells / k) * log1p(-(double)set / (double)cells);
}

double bf_estimate_count_blocked(uint64_t nblocks, uint32_t block_cells,
                                 uint64_t set, uint32_t k)
{
    return bf_estimate_count_scheme(bf_scheme_for(block_cells, k), nblocks,
                                    block_cells, set, k);
}

double bf_estimate_count_scheme(uint32_t scheme, uint64_t nblocks,
                                uint32_t block_cells, uint64_t set,
                                uint32_t k)
{
    uint64_t cells = nblocks * block_cells;
    if (cells == 0 || k == 0)
        return 0.0;
    if (set >= cells)
        return INFINITY;
    /* q: the chance one key landing in a block sets a given cell of it.
     * k distinct cells: k/B.  L lanes of W bits: 1 - (1 - 1/W)^c for a
     * lane taking c probes a key, averaged over the lanes (exact for k =
     * Lc, when every lane takes the same).  With Poisson loads a cell
     * stays clear with probability exp(-lambda q). */
    double q;
    uint32_t lanes = bf_scheme_lanes(scheme);
    if (lanes && block_cells == BF_BLOCK_BITS) {
        double L = lanes, W = (double)(BF_BLOCK_BITS / lanes);
        uint32_t c = k / lanes, d = k % lanes;
        q = ((L - d) * -expm1((double)c * log1p(-1.0 / W)) +
             d * -expm1((double)(c + 1) * log1p(-1.0 / W))) / L;
    } else {
        q = (double)k / (double)block_cells;
    }
    return -(double)nblocks * log1p(-(double)set / (double)cells) / q;
}

static double est_keys(const bf_blocked *bf, uint64_t set)
{
    return bf_estimate_count_scheme(bf->scheme, bf->nblocks, BF_BLOCK_BITS,
                                    set, bf->k);
}

double bf_blocked_est_fpr(const bf_blocked *bf)
{
    double n = est_keys(bf, bf_blocked_bits(bf));
    if (isinf(n))
        return 1.0;
    return bf_fpr_expected_scheme(bf->scheme, bf->nblocks, BF_BLOCK_BITS,
                                  bf->k, n);
}

void bf_blocked_info(const bf_blocked *bf, bf_info *out)
{
    memset(out, 0, sizeof(*out));
    out->kind = BF_KIND_BLOCKED;
    out->hash_id = BF_HASH_XXH3_128;
    out->seed = bf->seed;
    out->capacity = bf->capacity;
    out->fpr_target = bf->fpr;
    out->k = bf->k;
    out->scheme = bf->scheme;
    out->layers = 1;
    out->cells = bf->nblocks * BF_BLOCK_BITS;
    out->bytes = bf->nblocks * BF_BLOCK_BYTES;
    out->inserts = bf_blocked_inserts(bf);
    out->cells_set = bf_blocked_bits(bf);
    out->fill = (double)out->cells_set / (double)out->cells;
    out->est_keys = est_keys(bf, out->cells_set);
    out->est_fpr = bf_blocked_est_fpr(bf);
}

static bf_err check_compatible(const bf_blocked *a, const bf_blocked *b,
                               char *errstr, size_t errstr_size)
{
    if (a->nblocks != b->nblocks || a->k != b->k) {
        bf_seterr(errstr, errstr_size,
                  "different geometry: %llu blocks k=%u vs %llu blocks k=%u",
                  (unsigned long long)a->nblocks, a->k,
                  (unsigned long long)b->nblocks, b->k);
        return BF_ERR_INCOMPATIBLE;
    }
    if (a->scheme != b->scheme) {
        bf_seterr(errstr, errstr_size,
                  "different probe schemes: %u vs %u (files written by "
                  "different versions of bloomstage)", a->scheme, b->scheme);
        return BF_ERR_INCOMPATIBLE;
    }
    if (a->seed != b->seed) {
        bf_seterr(errstr, errstr_size,
                  "different hash seeds: %#llx vs %#llx",
                  (unsigned long long)a->seed, (unsigned long long)b->seed);
        return BF_ERR_INCOMPATIBLE;
    }
    return BF_OK;
}

bf_err bf_blocked_merge(bf_blocked *dst, const bf_blocked *src, char *errstr,
                        size_t errstr_size)
{
    bf_err err = check_compatible(dst, src, errstr, errstr_size);
    if (err)
        return err;
    if (!dst->owns_words) {
        bf_seterr(errstr, errstr_size,
                  "the destination filter is read-only (used in place)");
        return BF_ERR_READONLY;
    }
    uint64_t n = dst->nblocks * BF_BLOCK_WORDS;
    for (uint64_t i = 0; i < n; i++) {
        if (dst->dirty && (src->words[i] & ~dst->words[i]))
            bf_blocked_touch(dst, i / BF_BLOCK_WORDS);
        dst->words[i] |= src->words[i];
    }
    dst->bits_set = bf_popcount_words(dst->words, n);
    /* Keys inserted into the union: estimated, since overlap is unknown. */
    double est = est_keys(dst, dst->bits_set);
    dst->inserts = isinf(est)
                       ? bf_blocked_inserts(dst) + bf_blocked_inserts(src)
                       : (uint64_t)llround(est);
    dst->uncounted = 0;
    if (dst->capacity < src->capacity)
        dst->capacity = src->capacity;
    return BF_OK;
}

bf_err bf_blocked_estimate_union(const bf_blocked *a, const bf_blocked *b,
                                 double *out, char *errstr,
                                 size_t errstr_size)
{
    bf_err err = check_compatible(a, b, errstr, errstr_size);
    if (err)
        return err;
    uint64_t n = a->nblocks * BF_BLOCK_WORDS, set = 0;
    for (uint64_t i = 0; i < n; i++)
        set += (uint64_t)__builtin_popcountll(a->words[i] | b->words[i]);
    *out = est_keys(a, set);
    return BF_OK;
}

bf_err bf_blocked_estimate_intersection(const bf_blocked *a,
                                        const bf_blocked *b, double *out,
                                        char *errstr, size_t errstr_size)
{
    double u;
    bf_err err = bf_blocked_estimate_union(a, b, &u, errstr, errstr_size);
    if (err)
        return err;
    double x = est_keys(a, bf_blocked_bits(a)) +
               est_keys(b, bf_blocked_bits(b)) - u;
    *out = x > 0 ? x : 0;
    return BF_OK;
}
