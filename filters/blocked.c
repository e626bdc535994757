/*
 * blocked.c -- the blocked Bloom filter: 512-bit blocks, k probes inside one
 * block, so an insert or a lookup touches one cache line.
 *
 * Two probe schemes (bf_internal.h): the lane scheme of every new filter,
 * branch-free, with AVX-512 (k = 8 and 16) and AVX2 versions chosen at run
 * time (the library is built for the baseline x86-64, never -march=native:
 * the SIMD functions carry their own target attribute and run only when
 * the CPU reports the instructions) and a scalar one everywhere else; and
 * the distinct-probe scheme of version-1 files, kept so they answer as
 * they did.  Every operation is a table jump from the public function into
 * a kernel for the filter's k and the instruction set (set_level).
 *
 * The filter owns its word array unless it was wrapped around memory the
 * loader maps from a file (owns_words false: the bf_filter that loaded it
 * unmaps it, and the filter is read-only).
 */
#include "bf_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#define BF_HAVE_AVX2_CODE 1
#include <immintrin.h>
#endif

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

static void lane_salt_init(void);
#endif

static void set_level(unsigned level);

__attribute__((constructor)) static void simd_init(void)
{
#ifdef BF_HAVE_AVX2_CODE
    lane_salt_init();
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
    bf->kernel = scheme != BF_SCHEME_LANES ? BF_KERNEL_SCALAR
                 : k == 8                  ? BF_KERNEL_AVX2_K8
                 : k == 16                 ? BF_KERNEL_AVX2_K16
                                           : BF_KERNEL_AVX2;
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
    bf_blocked *bf =
        bf_blocked_wrap(words, nblocks, k, BF_SCHEME_LANES, true, seed);
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
                  "must be >= 1 and fpr in (0, 0.5]",
                  (unsigned long long)capacity, fpr);
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

uint64_t bf_blocked_seed(const bf_blocked *bf) { return bf->seed; }

static inline const uint64_t *block_of(const bf_blocked *bf, bf_hash h)
{
    return bf->words + bf_block_of(h, bf->nblocks) * BF_BLOCK_WORDS;
}

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
    if (bf->scheme == BF_SCHEME_LANES)
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

/* The scalar forms of every operation, either scheme: out of line, so
 * that the public functions stay a few compares and a tail jump. */
__attribute__((noinline)) static bool contains_scalar(const bf_blocked *bf, bf_hash h)
{
    const uint64_t *block = block_of(bf, h);
    __builtin_prefetch(block);
    uint64_t pat[8];
    pattern(bf, h, pat);
    return covered(block, pat);
}

__attribute__((noinline)) static bool add_scalar(bf_blocked *bf, bf_hash h)
{
    uint64_t *block = (uint64_t *)block_of(bf, h);
    __builtin_prefetch(block, 1);
    uint64_t pat[8];
    pattern(bf, h, pat);
    unsigned added = or_pattern(block, pat);
    if (added)
        bf_blocked_touch(bf, bf_block_of(h, bf->nblocks));
    bf->bits_set += added;
    bf->inserts += added != 0;
    return added != 0;
}

/* Batches prefetch this many keys ahead, so several cache misses are in
 * flight: 16 beat 8 at n = 1e8 (bench/filters), a lookup being short
 * enough that 8 did not cover a miss. */
enum { AHEAD = 16 };

__attribute__((noinline)) static void contains_many_scalar(const bf_blocked *bf, const bf_hash *h,
                                 size_t n, bool *out)
{
    for (size_t i = 0; i < n && i < AHEAD; i++)
        __builtin_prefetch(block_of(bf, h[i]));
    for (size_t i = 0; i < n; i++) {
        if (i + AHEAD < n)
            __builtin_prefetch(block_of(bf, h[i + AHEAD]));
        const uint64_t *block = block_of(bf, h[i]);
        if (bf->scheme == BF_SCHEME_LANES) {
            uint64_t pat[8];
            bf_lanes_pattern(h[i], bf->k, pat);
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
    for (size_t i = 0; i < n && i < AHEAD; i++)
        __builtin_prefetch(block_of(bf, h[i]), 1);
    for (size_t i = 0; i < n; i++) {
        if (i + AHEAD < n)
            __builtin_prefetch(block_of(bf, h[i + AHEAD]), 1);
        uint64_t pat[8];
        pattern(bf, h[i], pat);
        unsigned added = or_pattern((uint64_t *)block_of(bf, h[i]), pat);
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

/* -- the lane scheme in AVX2 -------------------------------------------- */

#ifdef BF_HAVE_AVX2_CODE
#define AVX2 __attribute__((target("avx2,popcnt")))
#define AVX2_INLINE AVX2 __attribute__((always_inline)) static inline

/* Each round's salts interleaved, lanes 0 and 4, 1 and 5, ...: one 8 x
 * 32-bit multiply then holds in 64-bit lane i the products of lanes i (low
 * half) and 4 + i (high half), so two 64-bit shifts give the bit positions
 * of both halves of the block already widened for the variable shift (no
 * unpacking).  Filled once from BF_LANE_SALT by simd_init. */
static uint32_t lane_salt_il[8][8] __attribute__((aligned(32)));

/* For AVX-512, rounds in pairs: 64-bit lane l of pair q holds the salts of
 * lane l in rounds 2q (low half) and 2q + 1 (high half), so one 16 x
 * 32-bit multiply of the two hash words (a 64-bit broadcast) does two
 * rounds. */
static uint32_t lane_salt_pair[4][16] __attribute__((aligned(64)));

static void lane_salt_init(void)
{
    for (unsigned r = 0; r < 8; r++)
        for (unsigned i = 0; i < 4; i++) {
            lane_salt_il[r][2 * i] = BF_LANE_SALT[r][i];
            lane_salt_il[r][2 * i + 1] = BF_LANE_SALT[r][4 + i];
        }
    for (unsigned q = 0; q < 4; q++)
        for (unsigned l = 0; l < 8; l++) {
            lane_salt_pair[q][2 * l] = BF_LANE_SALT[2 * q][l];
            lane_salt_pair[q][2 * l + 1] = BF_LANE_SALT[2 * q + 1][l];
        }
}

/* One full round (8 probes, one a lane) ORed into the pattern's halves
 * (lanes 0-3, 4-7). */
AVX2_INLINE void lanes_round8_avx2(uint32_t x, uint32_t r, __m256i *a,
                                   __m256i *b)
{
    const __m256i one = _mm256_set1_epi64x(1), six = _mm256_set1_epi64x(63);
    __m256i m =
        _mm256_mullo_epi32(_mm256_set1_epi32((int)x),
                           _mm256_load_si256((const __m256i *)lane_salt_il[r]));
    *a = _mm256_or_si256(
        *a, _mm256_sllv_epi64(one, _mm256_and_si256(_mm256_srli_epi64(m, 26),
                                                    six)));
    *b = _mm256_or_si256(*b, _mm256_sllv_epi64(one, _mm256_srli_epi64(m, 58)));
}

/* A partial round (k not a multiple of 8): the round's salts in lane
 * order, `off` holding 64 in the lanes the round leaves out (the shift
 * turns position 64 into no bit at all). */
AVX2_INLINE void lanes_round_part_avx2(uint32_t x, uint32_t r, __m256i off,
                                       __m256i *a, __m256i *b)
{
    const __m256i one = _mm256_set1_epi64x(1);
    __m256i salt = _mm256_loadu_si256((const __m256i *)BF_LANE_SALT[r]);
    __m256i pos = _mm256_or_si256(
        _mm256_srli_epi32(_mm256_mullo_epi32(_mm256_set1_epi32((int)x), salt),
                          26),
        off);
    *a = _mm256_or_si256(
        *a, _mm256_sllv_epi64(
                one, _mm256_cvtepu32_epi64(_mm256_castsi256_si128(pos))));
    *b = _mm256_or_si256(
        *b, _mm256_sllv_epi64(
                one, _mm256_cvtepu32_epi64(_mm256_extracti128_si256(pos, 1))));
}

static inline uint32_t lane_word(bf_hash h, uint32_t r)
{
    switch (r & 3) {
    case 0:
        return (uint32_t)h.hi;
    case 1:
        return (uint32_t)(h.hi >> 32);
    case 2:
        return (uint32_t)h.lo;
    default:
        return (uint32_t)(h.lo >> 32);
    }
}

/* The whole pattern.  Inlined into kernels whose k is a constant (8 and
 * 16, what the sizing picks from 1e-1 to 1e-7) it is straight-line code
 * with no lane mask; other k loop over rounds. */
AVX2_INLINE void lanes_pattern_avx2(bf_hash h, uint32_t k, __m256i *p0,
                                    __m256i *p1)
{
    if (k == 16) {
        /* Both rounds from one broadcast of h.hi and the AVX-512 form's
         * paired salts (lane_salt_pair[0]): 64-bit lane l holds lane l's
         * products of rounds 0 (low half) and 1 (high half), lanes 0-3 in
         * one multiply and 4-7 in the other.  Three instructions fewer
         * than two rounds of lanes_round8_avx2, the same bits. */
        const __m256i one = _mm256_set1_epi64x(1);
        const __m256i six = _mm256_set1_epi64x(63);
        const __m256i *salt = (const __m256i *)lane_salt_pair[0];
        __m256i x = _mm256_set1_epi64x((long long)h.hi);
        __m256i m0 = _mm256_mullo_epi32(x, _mm256_load_si256(salt));
        __m256i m1 = _mm256_mullo_epi32(x, _mm256_load_si256(salt + 1));
        __m256i lo0 = _mm256_and_si256(_mm256_srli_epi64(m0, 26), six);
        __m256i lo1 = _mm256_and_si256(_mm256_srli_epi64(m1, 26), six);
        __m256i hi0 = _mm256_srli_epi64(m0, 58);
        __m256i hi1 = _mm256_srli_epi64(m1, 58);
        *p0 = _mm256_or_si256(_mm256_sllv_epi64(one, lo0),
                              _mm256_sllv_epi64(one, hi0));
        *p1 = _mm256_or_si256(_mm256_sllv_epi64(one, lo1),
                              _mm256_sllv_epi64(one, hi1));
        return;
    }
    __m256i a = _mm256_setzero_si256(), b = _mm256_setzero_si256();
    uint32_t full = k / 8;
    for (uint32_t r = 0; r < full; r++)
        lanes_round8_avx2(lane_word(h, r), r, &a, &b);
    if (k % 8) {
        /* lanes l >= k mod 8 are off */
        const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        __m256i on = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(k % 8)), idx);
        lanes_round_part_avx2(lane_word(h, full), full,
                              _mm256_andnot_si256(on, _mm256_set1_epi32(64)),
                              &a, &b);
    }
    *p0 = a;
    *p1 = b;
}

AVX2_INLINE bool covered_avx2(const uint64_t *block, __m256i p0, __m256i p1)
{
    __m256i miss = _mm256_or_si256(
        _mm256_andnot_si256(_mm256_load_si256((const __m256i *)block), p0),
        _mm256_andnot_si256(_mm256_load_si256((const __m256i *)block + 1),
                            p1));
    return _mm256_testz_si256(miss, miss);
}

/* Bits set in a 256-bit vector, all in vector registers (Mula's nibble
 * lookup, then sums of bytes): cheaper than moving eight words out for
 * popcnt. */
AVX2_INLINE __m256i popcount_avx2(__m256i v)
{
    const __m256i table = _mm256_setr_epi8(0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2,
                                           3, 2, 3, 3, 4, 0, 1, 1, 2, 1, 2,
                                           2, 3, 1, 2, 2, 3, 2, 3, 3, 4);
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    __m256i lo = _mm256_shuffle_epi8(table, _mm256_and_si256(v, low4));
    __m256i hi = _mm256_shuffle_epi8(
        table, _mm256_and_si256(_mm256_srli_epi16(v, 4), low4));
    return _mm256_sad_epu8(_mm256_add_epi8(lo, hi), _mm256_setzero_si256());
}

/* ORs the pattern into the block; returns the bits that were new.  With
 * one probe a lane (k <= 8) a lane's new bits are its being non-zero: two
 * compares and one popcnt of their masks.  With at most two (k <= 16) a
 * lane's new bits x are counted as (x != 0) + (x & (x - 1) != 0).  More
 * probes a lane take the nibble-table popcount. */
AVX2_INLINE unsigned or_avx2(uint64_t *block, __m256i p0, __m256i p1,
                             uint32_t k)
{
    __m256i b0 = _mm256_load_si256((const __m256i *)block);
    __m256i b1 = _mm256_load_si256((const __m256i *)block + 1);
    _mm256_store_si256((__m256i *)block, _mm256_or_si256(b0, p0));
    _mm256_store_si256((__m256i *)block + 1, _mm256_or_si256(b1, p1));
    __m256i x0 = _mm256_andnot_si256(b0, p0), x1 = _mm256_andnot_si256(b1, p1);
    const __m256i z = _mm256_setzero_si256();
#define ZMASK(v) \
    (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(v, z)))
    if (k <= 8)
        return 8u - (unsigned)__builtin_popcount(ZMASK(x0) | ZMASK(x1) << 4);
    if (k <= 16) {
        const __m256i m1 = _mm256_set1_epi64x(-1);
        __m256i y0 = _mm256_and_si256(x0, _mm256_add_epi64(x0, m1));
        __m256i y1 = _mm256_and_si256(x1, _mm256_add_epi64(x1, m1));
        /* The four compares packed to bytes, two a zero lane, for one
         * movemask: five instructions fewer than four movemasks. */
        __m256i zx = _mm256_packs_epi32(_mm256_cmpeq_epi64(x0, z),
                                        _mm256_cmpeq_epi64(x1, z));
        __m256i zy = _mm256_packs_epi32(_mm256_cmpeq_epi64(y0, z),
                                        _mm256_cmpeq_epi64(y1, z));
        unsigned zero2 = (unsigned)_mm256_movemask_epi8(
            _mm256_packs_epi16(zx, zy));
        return 16u - (unsigned)__builtin_popcount(zero2) / 2;
    }
#undef ZMASK
    __m256i c = _mm256_add_epi64(popcount_avx2(x0), popcount_avx2(x1));
    __m128i d = _mm_add_epi64(_mm256_castsi256_si128(c),
                              _mm256_extracti128_si256(c, 1));
    return (unsigned)_mm_cvtsi128_si64(_mm_add_epi64(d, _mm_unpackhi_epi64(d, d)));
}

/* One key in the block it falls in: covered, and ORed in (the new bits). */
AVX2_INLINE bool key_covered_avx2(const uint64_t *block, bf_hash h,
                                  uint32_t k)
{
    __m256i p0, p1;
    lanes_pattern_avx2(h, k, &p0, &p1);
    return covered_avx2(block, p0, p1);
}

AVX2_INLINE unsigned key_or_avx2(uint64_t *block, bf_hash h, uint32_t k)
{
    __m256i p0, p1;
    lanes_pattern_avx2(h, k, &p0, &p1);
    return or_avx2(block, p0, p1, k);
}

/* The kernels of one instruction set ISA (avx2, avx512: its key_covered_ISA
 * and key_or_ISA) for k = K, written once.  They are instantiated for k =
 * 8 and 16 (constants: the pattern is straight-line code) and, in AVX2,
 * for any k.  The one-key forms are whole operations (the counts updated
 * too), so the public functions reach them by a tail jump: no frame, no
 * second call, few instructions a key, which is what lets the CPU keep
 * many keys' cache misses in flight when the caller loops over keys.  The
 * batches prefetch AHEAD keys ahead.  The one-key add turns off GCC's SLP
 * vectorizer, which would make the two counter updates a 128-bit load,
 * insert, add and store (six instructions for two adds). */
#define NOINLINE __attribute__((noinline))
#if defined(__clang__)
#define NOSLP /* clang has no such attribute, nor the habit */
#else
#define NOSLP __attribute__((optimize("no-tree-slp-vectorize")))
#endif
#define BLOCK(i) (words + bf_block_of(h[i], nblocks) * BF_BLOCK_WORDS)
#define LANE_KERNELS(ATTR, ISA, SUFFIX, K)                                    \
    ATTR NOINLINE static bool contains_##ISA##_##SUFFIX(const bf_blocked *bf, \
                                                        bf_hash h)            \
    {                                                                         \
        return key_covered_##ISA(block_of(bf, h), h, K);                      \
    }                                                                         \
    ATTR NOINLINE NOSLP static bool add_##ISA##_##SUFFIX(bf_blocked *bf,      \
                                                         bf_hash h)           \
    {                                                                         \
        unsigned added = key_or_##ISA((uint64_t *)block_of(bf, h), h, K);     \
        if (added) /* change tracking (delta.c) */                            \
            bf_blocked_touch(bf, bf_block_of(h, bf->nblocks));                \
        bf->bits_set += added;                                                \
        bf->inserts += added != 0;                                            \
        return added != 0;                                                    \
    }                                                                         \
    ATTR NOINLINE static void contains_many_##ISA##_##SUFFIX(                 \
        const bf_blocked *bf, const bf_hash *h, size_t n, bool *out)          \
    {                                                                         \
        const uint64_t *words = bf->words, nblocks = bf->nblocks;             \
        for (size_t i = 0; i < n && i < AHEAD; i++)                           \
            __builtin_prefetch(BLOCK(i));                                     \
        for (size_t i = 0; i < n; i++) {                                      \
            if (i + AHEAD < n)                                                \
                __builtin_prefetch(BLOCK(i + AHEAD));                         \
            out[i] = key_covered_##ISA(BLOCK(i), h[i], K);                    \
        }                                                                     \
    }                                                                         \
    ATTR NOINLINE static size_t add_many_##ISA##_##SUFFIX(                    \
        bf_blocked *bf, const bf_hash *h, size_t n, bool *out)                \
    {                                                                         \
        /* Locals: a store into a block could alias the filter's fields. */   \
        uint64_t *words = bf->words, nblocks = bf->nblocks, bits = 0;         \
        uint64_t *dirty = bf->dirty;                                          \
        size_t added_keys = 0;                                                \
        for (size_t i = 0; i < n && i < AHEAD; i++)                           \
            __builtin_prefetch(BLOCK(i), 1);                                  \
        for (size_t i = 0; i < n; i++) {                                      \
            if (i + AHEAD < n)                                                \
                __builtin_prefetch(BLOCK(i + AHEAD), 1);                      \
            unsigned added = key_or_##ISA(BLOCK(i), h[i], K);                 \
            if (dirty && added) {                                             \
                uint64_t b = bf_block_of(h[i], nblocks);                      \
                dirty[b >> 6] |= UINT64_C(1) << (b & 63);                     \
            }                                                                 \
            bits += added;                                                    \
            added_keys += added != 0;                                         \
            if (out)                                                          \
                out[i] = added != 0;                                          \
        }                                                                     \
        bf->bits_set += bits;                                                 \
        bf->inserts += added_keys;                                            \
        return added_keys;                                                    \
    }
LANE_KERNELS(AVX2, avx2, k8, 8)
LANE_KERNELS(AVX2, avx2, k16, 16)
LANE_KERNELS(AVX2, avx2, kany, bf->k)

/* -- the lane scheme in AVX-512 (k = 8 and 16) --------------------------- */

/* The block is one 512-bit register, and two rounds are one multiply: the
 * pattern of k = 16 is about ten instructions, and a whole one-key
 * operation about twenty to thirty, against about twice that in AVX2.
 * One at a time, a key's cache miss overlaps with the misses of the keys
 * after it only as far as the CPU's reorder window reaches, so fewer
 * instructions a key are more keys in flight (bench/README.md).  Other k
 * run the AVX2 kernels. */
#define AVX512 __attribute__((target("avx512f,avx512dq,avx2,popcnt")))
#define AVX512_INLINE AVX512 __attribute__((always_inline)) static inline

/* k = 8 or 16: the rounds 0 and 1 from the words of h.hi. */
AVX512_INLINE __m512i lanes_pattern_avx512(bf_hash h, uint32_t k)
{
    const __m512i one = _mm512_set1_epi64(1);
    __m512i m = _mm512_mullo_epi32(
        _mm512_set1_epi64((long long)h.hi),
        _mm512_load_si512((const void *)lane_salt_pair[0]));
    __m512i p = _mm512_sllv_epi64(
        one, _mm512_and_si512(_mm512_srli_epi64(m, 26), _mm512_set1_epi64(63)));
    if (k == 16)
        p = _mm512_or_si512(p, _mm512_sllv_epi64(one, _mm512_srli_epi64(m, 58)));
    return p;
}

/* One key, as key_covered_avx2 and key_or_avx2; the new bits are counted
 * as in or_avx2, from the lanes' masks. */
AVX512_INLINE bool key_covered_avx512(const uint64_t *block, bf_hash h,
                                      uint32_t k)
{
    __m512i p = lanes_pattern_avx512(h, k);
    __m512i miss = _mm512_andnot_si512(_mm512_load_si512(block), p);
    return _mm512_test_epi64_mask(miss, miss) == 0;
}

AVX512_INLINE unsigned key_or_avx512(uint64_t *block, bf_hash h, uint32_t k)
{
    __m512i p = lanes_pattern_avx512(h, k);
    __m512i b = _mm512_load_si512(block);
    _mm512_store_si512(block, _mm512_or_si512(b, p));
    __m512i x = _mm512_andnot_si512(b, p);
    unsigned nz = _mm512_test_epi64_mask(x, x);
    if (k == 8)
        return (unsigned)__builtin_popcount(nz);
    __m512i y = _mm512_and_si512(x, _mm512_add_epi64(x, _mm512_set1_epi64(-1)));
    return (unsigned)__builtin_popcount(
        nz | (unsigned)_mm512_test_epi64_mask(y, y) << 8);
}

LANE_KERNELS(AVX512, avx512, k8, 8)
LANE_KERNELS(AVX512, avx512, k16, 16)
#undef LANE_KERNELS
#undef BLOCK
#endif

/* -- the operations ------------------------------------------------------ */

/* Each operation's kernels, indexed by BF_KERNEL_* and the AVX-512 forms
 * after them: the public functions are one table jump (the filter's
 * kernel, chosen by scheme and k when it is made, mapped through the
 * instruction set bf_simd_use last chose), a few instructions a key. */
typedef bool (*contains_fn)(const bf_blocked *, bf_hash);
typedef bool (*add_fn)(bf_blocked *, bf_hash);
typedef void (*contains_many_fn)(const bf_blocked *, const bf_hash *, size_t,
                                 bool *);
typedef size_t (*add_many_fn)(bf_blocked *, const bf_hash *, size_t, bool *);

#ifdef BF_HAVE_AVX2_CODE
#define KERNEL_TABLE(fn)                                                      \
    {fn##_scalar,     fn##_avx2_kany,   fn##_avx2_k8,                         \
     fn##_avx2_k16,   fn##_avx512_k8,   fn##_avx512_k16}
#else
#define KERNEL_TABLE(fn)                                                      \
    {fn##_scalar, fn##_scalar, fn##_scalar, fn##_scalar, fn##_scalar,         \
     fn##_scalar}
#endif
static const contains_fn contains_k[] = KERNEL_TABLE(contains);
static const add_fn add_k[] = KERNEL_TABLE(add);
static const contains_many_fn contains_many_k[] = KERNEL_TABLE(contains_many);
static const add_many_fn add_many_k[] = KERNEL_TABLE(add_many);
#undef KERNEL_TABLE

/* simd level x filter kernel -> table index (4, 5: AVX-512 k = 8, 16). */
static const uint8_t kernel_map[3][4] = {
    {BF_KERNEL_SCALAR, BF_KERNEL_SCALAR, BF_KERNEL_SCALAR, BF_KERNEL_SCALAR},
    {BF_KERNEL_SCALAR, BF_KERNEL_AVX2, BF_KERNEL_AVX2_K8, BF_KERNEL_AVX2_K16},
    {BF_KERNEL_SCALAR, BF_KERNEL_AVX2, 4, 5},
};

/* The kernels the current instruction set runs, by the filter's kernel
 * (BF_KERNEL_*): kernel_map applied once, when the level is chosen
 * (set_level), so that a public function is a byte load and a table jump
 * (three instructions, not seven: one at a time, fewer instructions a key
 * are more keys' cache misses in flight). */
#define SCALAR4(fn) {fn##_scalar, fn##_scalar, fn##_scalar, fn##_scalar}
static contains_fn contains_cur[4] = SCALAR4(contains);
static add_fn add_cur[4] = SCALAR4(add);
static contains_many_fn contains_many_cur[4] = SCALAR4(contains_many);
static add_many_fn add_many_cur[4] = SCALAR4(add_many);
#undef SCALAR4

static void set_level(unsigned level)
{
    simd_level = level;
    for (unsigned i = 0; i < 4; i++) {
        unsigned t = kernel_map[level][i];
        contains_cur[i] = contains_k[t];
        add_cur[i] = add_k[t];
        contains_many_cur[i] = contains_many_k[t];
        add_many_cur[i] = add_many_k[t];
    }
}

bool bf_blocked_contains_h(const bf_blocked *bf, bf_hash h)
{
    return contains_cur[bf->kernel](bf, h);
}

void bf_blocked_prefetch_h(const bf_blocked *bf, bf_hash h)
{
    __builtin_prefetch(block_of(bf, h));
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
    return add_cur[bf->kernel](bf, h);
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
    return bf_estimate_count_scheme(block_cells == BF_BLOCK_BITS
                                        ? BF_SCHEME_LANES
                                        : BF_SCHEME_DISTINCT,
                                    nblocks, block_cells, set, k);
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
     * k distinct cells: k/B.  Lanes: 1 - (63/64)^c for a lane taking c
     * probes a key, averaged over the lanes (exact for k = 8c, when every
     * lane takes the same).  With Poisson loads a cell stays clear with
     * probability exp(-lambda q). */
    double q;
    if (scheme == BF_SCHEME_LANES && block_cells == BF_BLOCK_BITS) {
        uint32_t c = k / 8, d = k % 8;
        q = ((8.0 - d) * -expm1((double)c * log1p(-1.0 / 64)) +
             d * -expm1((double)(c + 1) * log1p(-1.0 / 64))) / 8.0;
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
    double n = est_keys(bf, bf->bits_set);
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
    out->inserts = bf->inserts;
    out->cells_set = bf->bits_set;
    out->fill = (double)bf->bits_set / (double)out->cells;
    out->est_keys = est_keys(bf, bf->bits_set);
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
                  "different probe schemes: %u vs %u (a filter of format "
                  "version 1 and a newer one)", a->scheme, b->scheme);
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

static uint64_t popcount_words(const uint64_t *w, uint64_t n)
{
    uint64_t c = 0;
    for (uint64_t i = 0; i < n; i++)
        c += (uint64_t)__builtin_popcountll(w[i]);
    return c;
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
    dst->bits_set = popcount_words(dst->words, n);
    /* Keys inserted into the union: estimated, since overlap is unknown. */
    double est = est_keys(dst, dst->bits_set);
    dst->inserts = isinf(est) ? dst->inserts + src->inserts : (uint64_t)llround(est);
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
    double x = est_keys(a, a->bits_set) + est_keys(b, b->bits_set) - u;
    *out = x > 0 ? x : 0;
    return BF_OK;
}
