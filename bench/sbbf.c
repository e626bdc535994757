/*
 * sbbf.c -- the split-block Bloom filter baseline (see sbbf.h for what it
 * is and where it comes from).
 */
#include "sbbf.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#define SBBF_AVX2 1
#include <immintrin.h>
#endif

#define NOINLINE __attribute__((noinline))
enum { AHEAD = 16 };

static const uint32_t SALT[8] = {0x47b6137bu, 0x44974d91u, 0x8824ad5bu,
                                 0xa2b7289du, 0x705495c7u, 0x2df1424bu,
                                 0x9efc4947u, 0x5c6bfb31u};

bool sbbf_init(sbbf *s, uint64_t nblocks)
{
    s->nblocks = nblocks < 1 ? 1 : nblocks;
    if (s->nblocks >= (UINT64_C(1) << 32))
        return false;
    /* the memory the library gives its own filters (huge pages): the two
     * are compared as designs, not as page sizes */
    s->words = bf_alloc_aligned(s->nblocks * 32);
    if (!s->words)
        return false;
    s->avx2 = strcmp(bf_simd_name(), "scalar") != 0;
    return true;
}

void sbbf_free(sbbf *s)
{
    free(s->words);
    s->words = NULL;
}

void sbbf_clear(sbbf *s) { memset(s->words, 0, (size_t)s->nblocks * 32); }

static inline uint32_t *block_of(const sbbf *s, bf_hash h)
{
    uint64_t i = ((h.lo >> 32) * s->nblocks) >> 32;
    return s->words + i * 8;
}

static inline void add_scalar(uint32_t *b, uint32_t x)
{
    for (int j = 0; j < 8; j++)
        b[j] |= UINT32_C(1) << ((x * SALT[j]) >> 27);
}

static inline bool contains_scalar(const uint32_t *b, uint32_t x)
{
    for (int j = 0; j < 8; j++)
        if (!(b[j] & (UINT32_C(1) << ((x * SALT[j]) >> 27))))
            return false;
    return true;
}

#ifdef SBBF_AVX2
#define AVX2 __attribute__((target("avx2")))
AVX2 static inline __m256i mask_avx2(uint32_t x)
{
    const __m256i salt = _mm256_loadu_si256((const __m256i *)SALT);
    __m256i y = _mm256_srli_epi32(
        _mm256_mullo_epi32(_mm256_set1_epi32((int)x), salt), 27);
    return _mm256_sllv_epi32(_mm256_set1_epi32(1), y);
}

AVX2 NOINLINE static void add_avx2(sbbf *s, bf_hash h)
{
    __m256i *b = (__m256i *)block_of(s, h);
    _mm256_store_si256(b, _mm256_or_si256(_mm256_load_si256(b),
                                          mask_avx2((uint32_t)h.lo)));
}

AVX2 NOINLINE static bool contains_avx2(const sbbf *s, bf_hash h)
{
    const __m256i *b = (const __m256i *)block_of(s, h);
    return _mm256_testc_si256(_mm256_load_si256(b), mask_avx2((uint32_t)h.lo));
}

AVX2 NOINLINE static void add_many_avx2(sbbf *s, const bf_hash *h, size_t n)
{
    for (size_t i = 0; i < n && i < AHEAD; i++)
        __builtin_prefetch(block_of(s, h[i]), 1);
    for (size_t i = 0; i < n; i++) {
        if (i + AHEAD < n)
            __builtin_prefetch(block_of(s, h[i + AHEAD]), 1);
        __m256i *b = (__m256i *)block_of(s, h[i]);
        _mm256_store_si256(b, _mm256_or_si256(_mm256_load_si256(b),
                                              mask_avx2((uint32_t)h[i].lo)));
    }
}

AVX2 NOINLINE static void contains_many_avx2(const sbbf *s, const bf_hash *h,
                                             size_t n, bool *out)
{
    for (size_t i = 0; i < n && i < AHEAD; i++)
        __builtin_prefetch(block_of(s, h[i]));
    for (size_t i = 0; i < n; i++) {
        if (i + AHEAD < n)
            __builtin_prefetch(block_of(s, h[i + AHEAD]));
        const __m256i *b = (const __m256i *)block_of(s, h[i]);
        out[i] = _mm256_testc_si256(_mm256_load_si256(b),
                                    mask_avx2((uint32_t)h[i].lo));
    }
}
#endif

NOINLINE void sbbf_add(sbbf *s, bf_hash h)
{
#ifdef SBBF_AVX2
    if (s->avx2) {
        add_avx2(s, h);
        return;
    }
#endif
    add_scalar(block_of(s, h), (uint32_t)h.lo);
}

NOINLINE bool sbbf_contains(const sbbf *s, bf_hash h)
{
#ifdef SBBF_AVX2
    if (s->avx2)
        return contains_avx2(s, h);
#endif
    return contains_scalar(block_of(s, h), (uint32_t)h.lo);
}

NOINLINE void sbbf_add_many(sbbf *s, const bf_hash *h, size_t n)
{
#ifdef SBBF_AVX2
    if (s->avx2) {
        add_many_avx2(s, h, n);
        return;
    }
#endif
    for (size_t i = 0; i < n && i < AHEAD; i++)
        __builtin_prefetch(block_of(s, h[i]), 1);
    for (size_t i = 0; i < n; i++) {
        if (i + AHEAD < n)
            __builtin_prefetch(block_of(s, h[i + AHEAD]), 1);
        add_scalar(block_of(s, h[i]), (uint32_t)h[i].lo);
    }
}

NOINLINE void sbbf_contains_many(const sbbf *s, const bf_hash *h, size_t n,
                                 bool *out)
{
#ifdef SBBF_AVX2
    if (s->avx2) {
        contains_many_avx2(s, h, n, out);
        return;
    }
#endif
    for (size_t i = 0; i < n && i < AHEAD; i++)
        __builtin_prefetch(block_of(s, h[i]));
    for (size_t i = 0; i < n; i++) {
        if (i + AHEAD < n)
            __builtin_prefetch(block_of(s, h[i + AHEAD]));
        out[i] = contains_scalar(block_of(s, h[i]), (uint32_t)h[i].lo);
    }
}

double sbbf_fpr_expected(uint64_t nblocks, double n)
{
    double lambda = n / (double)nblocks;
    if (lambda <= 0)
        return 0.0;
    double sum = 0.0, mass = 0.0, logp = -lambda;
    double top = lambda + 12.0 * sqrt(lambda) + 40.0;
    for (double i = 0; i <= top; i += 1.0) {
        double p = exp(logp);
        sum += p * pow(-expm1(i * log1p(-1.0 / 32)), 8);
        mass += p;
        logp += log(lambda) - log(i + 1.0);
    }
    return sum + (1.0 - mass > 0 ? 1.0 - mass : 0.0);
}

uint64_t sbbf_blocks_for(double n, double p)
{
    uint64_t lo = 1, hi = 1;
    while (sbbf_fpr_expected(hi, n) > p && hi < (UINT64_C(1) << 32))
        hi *= 2;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (sbbf_fpr_expected(mid, n) <= p)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}
