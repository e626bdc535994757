/*
 * blocked_simd.c -- the blocked filter's lane-scheme kernels, for 64-bit
 * lanes in AVX2 (any k, and k = 8 and 16 as constants) and AVX-512 (k = 8
 * and 16), and for 32-bit lanes in AVX2 (any k, and k = 16) and AVX-512 (k
 * = 16): one bf_kernels table (bf_internal.h) for each instruction set,
 * which blocked.c maps its filters onto once the instruction set is
 * chosen.  They set exactly the bits of the scalar patterns
 * (bf_lanes_pattern, bf_lanes32_pattern; test_blocked compares them bit
 * for bit).  This file is built for the baseline x86-64 like the rest:
 * each function carries its own target attribute, and runs only when
 * blocked.c has seen the CPU report support for it.  It owns the
 * interleaved salt tables the kernels load (filled by bf_simd_init).
 */
#include "bf_internal.h"

#ifdef BF_HAVE_AVX2_CODE
#include <immintrin.h>

/* -- the lane scheme in AVX2 -------------------------------------------- */

#define AVX2 __attribute__((target("avx2,popcnt")))
#define AVX2_INLINE AVX2 __attribute__((always_inline)) static inline

/* Each round's salts interleaved, lanes 0 and 4, 1 and 5, ...: one 8 x
 * 32-bit multiply then holds in 64-bit lane i the products of lanes i (low
 * half) and 4 + i (high half), so two 64-bit shifts give the bit positions
 * of both halves of the block already widened for the variable shift (no
 * unpacking).  Filled once from BF_LANE_SALT by bf_simd_init. */
static uint32_t lane_salt_il[8][8] __attribute__((aligned(32)));

/* For AVX-512, rounds in pairs: 64-bit lane l of pair q holds the salts of
 * lane l in rounds 2q (low half) and 2q + 1 (high half), so one 16 x
 * 32-bit multiply of the two hash words (a 64-bit broadcast) does two
 * rounds. */
static uint32_t lane_salt_pair[4][16] __attribute__((aligned(64)));

/* Sixteen 32-bit ones, the bit the 32-bit lanes shift: filled at run time
 * too, so that the compiler loads them in one go rather than building
 * them from an immediate. */
static uint32_t ones32[16] __attribute__((aligned(64)));

void bf_simd_init(void)
{
    for (unsigned i = 0; i < 16; i++)
        ones32[i] = 1;
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

/* The top six bits of each 64-bit lane's low 32-bit product: two shifts,
 * no mask to load. */
AVX2_INLINE __m256i low_top6(__m256i m)
{
    return _mm256_srli_epi64(_mm256_slli_epi64(m, 32), 58);
}

/* One full round (8 probes, one a lane) ORed into the pattern's halves
 * (lanes 0-3, 4-7). */
AVX2_INLINE void lanes_round8_avx2(uint32_t x, uint32_t r, __m256i *a,
                                   __m256i *b)
{
    const __m256i one = _mm256_set1_epi64x(1);
    __m256i m =
        _mm256_mullo_epi32(_mm256_set1_epi32((int)x),
                           _mm256_load_si256((const __m256i *)lane_salt_il[r]));
    *a = _mm256_or_si256(*a, _mm256_sllv_epi64(one, low_top6(m)));
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

/* The 32-bit lanes' pattern (bf_lanes32_pattern), k a multiple of 16:
 * a round is one broadcast of its 64-bit hash word, whose two halves
 * alternate along the lanes as the scheme has them, and per half of the
 * block a multiply by that round's row of salts, a shift and a variable
 * shift: the split-block filter's mask, twice. */
AVX2_INLINE void lanes32_pattern_avx2(bf_hash h, uint32_t k, __m256i *p0,
                                      __m256i *p1)
{
    const __m256i one = _mm256_load_si256((const __m256i *)ones32);
    __m256i a = _mm256_setzero_si256(), b = _mm256_setzero_si256();
    for (uint32_t r = 0; r < k / 16; r++) {
        __m256i x = _mm256_set1_epi64x((long long)(r & 1 ? h.lo : h.hi));
        const __m256i *salt = (const __m256i *)BF_LANE_SALT[2 * r];
        a = _mm256_or_si256(
            a, _mm256_sllv_epi32(
                   one, _mm256_srli_epi32(
                            _mm256_mullo_epi32(x, _mm256_load_si256(salt)),
                            27)));
        b = _mm256_or_si256(
            b, _mm256_sllv_epi32(
                   one, _mm256_srli_epi32(
                            _mm256_mullo_epi32(x, _mm256_load_si256(salt + 1)),
                            27)));
    }
    *p0 = a;
    *p1 = b;
}

/* The whole pattern, of the 32-bit lanes (l32) or the 64-bit ones.
 * Inlined into kernels whose k and l32 are constants (k = 8 and 16, what
 * the sizing picks from 1e-1 to 1e-7) it is straight-line code with no
 * lane mask; other k loop over rounds. */
AVX2_INLINE void lanes_pattern_avx2(bf_hash h, uint32_t k, bool l32,
                                    __m256i *p0, __m256i *p1)
{
    if (l32) {
        lanes32_pattern_avx2(h, k, p0, p1);
        return;
    }
    if (k == 16) {
        /* Both rounds from one broadcast of h.hi and the AVX-512 form's
         * paired salts (lane_salt_pair[0]): 64-bit lane l holds lane l's
         * products of rounds 0 (low half) and 1 (high half), lanes 0-3 in
         * one multiply and 4-7 in the other: shorter than two rounds of
         * lanes_round8_avx2, with the same bits. */
        const __m256i one = _mm256_set1_epi64x(1);
        const __m256i *salt = (const __m256i *)lane_salt_pair[0];
        __m256i x = _mm256_set1_epi64x((long long)h.hi);
        __m256i m0 = _mm256_mullo_epi32(x, _mm256_load_si256(salt));
        __m256i m1 = _mm256_mullo_epi32(x, _mm256_load_si256(salt + 1));
        __m256i lo0 = low_top6(m0), lo1 = low_top6(m1);
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
 * one probe a lane (k <= 8 in 64-bit lanes, k = 16 in 32-bit ones) a
 * lane's new bits are its being non-zero: two compares and one popcnt of
 * their masks.  With at most two in a 64-bit lane (k <= 16) a lane's new
 * bits x are counted as (x != 0) + (x & (x - 1) != 0).  More probes a lane
 * take the nibble-table popcount. */
AVX2_INLINE unsigned or_avx2(uint64_t *block, __m256i p0, __m256i p1,
                             uint32_t k, bool l32)
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
    if (l32 && k == 16) { /* the compares packed to bytes, two a lane */
        unsigned zero2 = (unsigned)_mm256_movemask_epi8(_mm256_packs_epi32(
            _mm256_cmpeq_epi32(x0, z), _mm256_cmpeq_epi32(x1, z)));
        return 16u - (unsigned)__builtin_popcount(zero2) / 2;
    }
    if (k <= 16) {
        const __m256i m1 = _mm256_set1_epi64x(-1);
        __m256i y0 = _mm256_and_si256(x0, _mm256_add_epi64(x0, m1));
        __m256i y1 = _mm256_and_si256(x1, _mm256_add_epi64(x1, m1));
        /* The four compares packed to bytes, two a zero lane, for one
         * movemask instead of four. */
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

/* One key in the block it falls in: covered, and ORed in (the new bits).
 * The lookup (and key_set_avx2 below) takes the filter's words and finds
 * the block after the pattern: GCC then reads the hash's pattern word
 * into a vector before the block's multiply takes its register, rather
 * than keep a copy. */
AVX2_INLINE bool key_covered_avx2(uint64_t *words, uint64_t nblocks,
                                  bf_hash h, uint32_t k, bool l32)
{
    __m256i p0, p1;
    lanes_pattern_avx2(h, k, l32, &p0, &p1);
    return covered_avx2(bf_block_at(words, nblocks, h), p0, p1);
}

AVX2_INLINE unsigned key_or_avx2(uint64_t *block, bf_hash h, uint32_t k,
                                 bool l32)
{
    __m256i p0, p1;
    lanes_pattern_avx2(h, k, l32, &p0, &p1);
    return or_avx2(block, p0, p1, k, l32);
}

/* ORs the key's pattern into its block; true if that set a new bit, the
 * bits not counted (bf_blocked_add_h): nothing after the block's load but
 * an andnot, an or and a test.  The test is vptest's carry against zero
 * (CF = ((~0 & misses) == 0): no bit missing), so that the caller's
 * counter is one sbb of that flag and its return one setae, where the
 * zero flag would need two setne, a zero extension and an add. */
AVX2_INLINE bool key_set_avx2(uint64_t *words, uint64_t nblocks, bf_hash h,
                              uint32_t k, bool l32)
{
    __m256i p0, p1;
    lanes_pattern_avx2(h, k, l32, &p0, &p1);
    uint64_t *block = bf_block_at(words, nblocks, h);
    __m256i b0 = _mm256_load_si256((const __m256i *)block);
    __m256i b1 = _mm256_load_si256((const __m256i *)block + 1);
    _mm256_store_si256((__m256i *)block, _mm256_or_si256(b0, p0));
    _mm256_store_si256((__m256i *)block + 1, _mm256_or_si256(b1, p1));
    __m256i x = _mm256_or_si256(_mm256_andnot_si256(b0, p0),
                                _mm256_andnot_si256(b1, p1));
    return !_mm256_testc_si256(_mm256_setzero_si256(), x);
}

/* The kernels of one instruction set ISA (avx2, avx512: its key_covered_ISA
 * and key_or_ISA) for k = K in the 32-bit lanes (L32 true) or the 64-bit
 * ones, written once.  They are instantiated for k = 8 and 16 (constants:
 * the pattern is straight-line code) and, in AVX2, for any k.  The one-key
 * forms are whole operations (the counts updated too), so the public
 * functions reach them by a tail jump: no frame, no second call, a short
 * sequence a key, which is what lets the CPU keep many keys' cache misses
 * in flight when the caller loops over keys.  The batches prefetch
 * BF_AHEAD keys ahead.  The one-key add only tests for a new bit and
 * stores one counter, branch-free (bf->uncounted: the bits are recounted
 * by their next reader): counting the bits into bits_set is a
 * read-modify-write whose value waits on the block's cache miss, and each
 * further store or branch is one fewer key in flight.  It never marks a
 * block: a tracked filter's one-key add is the counted add (add_entry,
 * bf_internal.h), which, for a block the caller has just read, keeps
 * bits_set too.  That one turns off GCC's SLP vectorizer, which would
 * make its two counter updates a 128-bit load, insert, add and store. */
#define NOINLINE __attribute__((noinline))
#if defined(__clang__)
#define NOSLP /* clang has no such attribute, nor the habit */
#else
#define NOSLP __attribute__((optimize("no-tree-slp-vectorize")))
#endif
#define BLOCK(i) bf_block_at(words, nblocks, h[i])
#define LANE_KERNELS(ATTR, ISA, SUFFIX, K, L32)                               \
    ATTR NOINLINE static bool contains_##ISA##_##SUFFIX(const bf_blocked *bf, \
                                                        bf_hash h)            \
    {                                                                         \
        return key_covered_##ISA(bf->words, bf->nblocks, h, K, L32);          \
    }                                                                         \
    ATTR NOINLINE static bool add_##ISA##_##SUFFIX(bf_blocked *bf, bf_hash h) \
    {                                                                         \
        bool added = key_set_##ISA(bf->words, bf->nblocks, h, K, L32);        \
        bf->uncounted += added;                                               \
        return added;                                                         \
    }                                                                         \
    ATTR NOINLINE NOSLP static bool add_counted_##ISA##_##SUFFIX(             \
        bf_blocked *bf, bf_hash h)                                            \
    {                                                                         \
        /* the block's index once: the store into the block could alias  \
         * bf->nblocks, so the compiler would compute it again */         \
        uint64_t b = bf_block_of(h, bf->nblocks);                             \
        unsigned added = key_or_##ISA(bf->words + b * BF_BLOCK_WORDS, h, K,   \
                                      L32);                                   \
        if (added) /* change tracking (delta.c) */                            \
            bf_blocked_touch(bf, b);                                          \
        bf->bits_set += added;                                                \
        bf->inserts += added != 0;                                            \
        return added != 0;                                                    \
    }                                                                         \
    ATTR NOINLINE static void contains_many_##ISA##_##SUFFIX(                 \
        const bf_blocked *bf, const bf_hash *h, size_t n, bool *out)          \
    {                                                                         \
        uint64_t *words = bf->words, nblocks = bf->nblocks;                   \
        for (size_t i = 0; i < n && i < BF_AHEAD; i++)                        \
            __builtin_prefetch(BLOCK(i));                                     \
        for (size_t i = 0; i < n; i++) {                                      \
            if (i + BF_AHEAD < n)                                             \
                __builtin_prefetch(BLOCK(i + BF_AHEAD));                      \
            out[i] = key_covered_##ISA(words, nblocks, h[i], K, L32);         \
        }                                                                     \
    }                                                                         \
    ATTR NOINLINE static size_t add_many_##ISA##_##SUFFIX(                    \
        bf_blocked *bf, const bf_hash *h, size_t n, bool *out)                \
    {                                                                         \
        /* Locals: a store into a block could alias the filter's fields. */   \
        uint64_t *words = bf->words, nblocks = bf->nblocks, bits = 0;         \
        uint64_t *dirty = bf->dirty;                                          \
        size_t added_keys = 0;                                                \
        for (size_t i = 0; i < n && i < BF_AHEAD; i++)                        \
            __builtin_prefetch(BLOCK(i), 1);                                  \
        for (size_t i = 0; i < n; i++) {                                      \
            if (i + BF_AHEAD < n)                                             \
                __builtin_prefetch(BLOCK(i + BF_AHEAD), 1);                   \
            unsigned added = key_or_##ISA(BLOCK(i), h[i], K, L32);            \
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
LANE_KERNELS(AVX2, avx2, k8, 8, false)
LANE_KERNELS(AVX2, avx2, k16, 16, false)
LANE_KERNELS(AVX2, avx2, kany, bf->k, false)
LANE_KERNELS(AVX2, avx2, l32_k16, 16, true)
LANE_KERNELS(AVX2, avx2, l32_kany, bf->k, true)

/* -- the lane scheme in AVX-512 (k = 8 and 16) --------------------------- */

/* The block is one 512-bit register, and two rounds are one multiply: a
 * one-key operation is about half as long as in AVX2.  One key at a time,
 * a key's cache miss overlaps with the misses of the keys after it only
 * as far as the CPU's reorder window reaches, so a shorter operation keeps
 * more keys in flight.  Other k run the AVX2 kernels. */
#define AVX512 __attribute__((target("avx512f,avx512dq,avx2,popcnt")))
#define AVX512_INLINE AVX512 __attribute__((always_inline)) static inline

/* k = 8 or 16: the rounds 0 and 1 from the words of h.hi; or, for the
 * 32-bit lanes (k = 16), the split-block filter's mask over the whole
 * block: a multiply by rows 0 and 1 of the salts, a shift and a variable
 * shift. */
AVX512_INLINE __m512i lanes_pattern_avx512(bf_hash h, uint32_t k, bool l32)
{
    if (l32)
        return _mm512_sllv_epi32(
            _mm512_load_si512(ones32),
            _mm512_srli_epi32(
                _mm512_mullo_epi32(_mm512_set1_epi64((long long)h.hi),
                                   _mm512_load_si512(BF_LANE_SALT[0])),
                27));
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
 * as in or_avx2, from the lanes' masks (for the 32-bit lanes, one bit at
 * most in each). */
AVX512_INLINE bool key_covered_avx512(uint64_t *words, uint64_t nblocks,
                                      bf_hash h, uint32_t k, bool l32)
{
    __m512i p = lanes_pattern_avx512(h, k, l32);
    __m512i miss =
        _mm512_andnot_si512(_mm512_load_si512(bf_block_at(words, nblocks, h)), p);
    return _mm512_test_epi64_mask(miss, miss) == 0;
}

AVX512_INLINE unsigned key_or_avx512(uint64_t *block, bf_hash h, uint32_t k,
                                     bool l32)
{
    __m512i p = lanes_pattern_avx512(h, k, l32);
    __m512i b = _mm512_load_si512(block);
    _mm512_store_si512(block, _mm512_or_si512(b, p));
    __m512i x = _mm512_andnot_si512(b, p);
    if (l32)
        return (unsigned)__builtin_popcount(_mm512_test_epi32_mask(x, x));
    unsigned nz = _mm512_test_epi64_mask(x, x);
    if (k == 8)
        return (unsigned)__builtin_popcount(nz);
    __m512i y = _mm512_and_si512(x, _mm512_add_epi64(x, _mm512_set1_epi64(-1)));
    return (unsigned)__builtin_popcount(
        nz | (unsigned)_mm512_test_epi64_mask(y, y) << 8);
}

AVX512_INLINE bool key_set_avx512(uint64_t *words, uint64_t nblocks,
                                   bf_hash h, uint32_t k, bool l32)
{
    __m512i p = lanes_pattern_avx512(h, k, l32);
    uint64_t *block = bf_block_at(words, nblocks, h);
    __m512i b = _mm512_load_si512(block);
    _mm512_store_si512(block, _mm512_or_si512(b, p));
    __m512i x = _mm512_andnot_si512(b, p);
    return _mm512_test_epi64_mask(x, x) != 0;
}

LANE_KERNELS(AVX512, avx512, k8, 8, false)
LANE_KERNELS(AVX512, avx512, k16, 16, false)
LANE_KERNELS(AVX512, avx512, l32_k16, 16, true)

#undef LANE_KERNELS
#undef BLOCK

#define KERNELS(ISA, SUFFIX)                                                  \
    {contains_##ISA##_##SUFFIX, add_##ISA##_##SUFFIX,                         \
     add_counted_##ISA##_##SUFFIX, contains_many_##ISA##_##SUFFIX,            \
     add_many_##ISA##_##SUFFIX}
/* In BF_KERNEL_* order, from BF_KERNEL_L64. */
const bf_kernels bf_kernels_avx2[BF_NKERNELS - 1] = {
    KERNELS(avx2, kany), KERNELS(avx2, k8), KERNELS(avx2, k16),
    KERNELS(avx2, l32_kany), KERNELS(avx2, l32_k16)};
const bf_kernels bf_kernels_avx512[BF_NKERNELS - 1] = {
    KERNELS(avx2, kany), KERNELS(avx512, k8), KERNELS(avx512, k16),
    KERNELS(avx2, l32_kany), KERNELS(avx512, l32_k16)};
#undef KERNELS
#else
typedef int bf_no_simd_code; /* ISO C: a translation unit is not empty */
#endif
