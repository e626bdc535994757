/*
 * keys.h -- deterministic keys and statistical tolerances for the filter
 * tests (tests/unit/test_blocked.c, test_scalable.c, test_counting.c,
 * test_estimate.c, test_format.c).
 *
 * Keys: key number i maps to one key, in one of two shapes:
 *   - key_u64(i): the 8 bytes of splitmix64(i), little-endian.  splitmix64 is
 *     a bijection on 64-bit integers, so distinct i give distinct keys;
 *   - key_str(i): the string "key-<i>" (no NUL in the key), like the message
 *     keys the stage sees.
 * A test inserts numbers from one range and queries "never inserted" keys
 * from a disjoint range (KEYS_ABSENT_BASE and up), so absence is known
 * without keeping a set.  A test uses one shape for both ranges: an 8-byte
 * string key could equal some key_u64 in principle.
 *
 * Tolerances: the false positives among N never-inserted queries of a filter
 * whose false-positive rate is at most p are Binomial(N, p') with p' <= p.
 * For counts above the mean, the Binomial upper tail is below the Poisson
 * upper tail of the same mean (Anderson & Samuels 1967), so
 * poisson_upper_limit(p*N, alpha) is a count a correct filter exceeds with
 * probability below alpha.  The tests use alpha = KEYS_ALPHA = 1e-6 per
 * check (about z = 4.75 in a normal approximation); a correct library fails
 * one of the few dozen such checks in the suite in fewer than 1e-4 runs.
 *
 * Header-only (static functions): each test binary includes it once.
 */
#ifndef BS_TESTS_KEYS_H
#define BS_TESTS_KEYS_H

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "bloomfilters.h"

/* First number of the "never inserted" range; inserted keys stay below. */
#define KEYS_ABSENT_BASE (UINT64_C(1) << 48)

/* Per-check probability that a correct filter fails a tolerance check. */
#define KEYS_ALPHA 1e-6

static inline uint64_t keys_splitmix64(uint64_t x)
{
    x += UINT64_C(0x9e3779b97f4a7c15);
    x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
    return x ^ (x >> 31);
}

/* Writes key i (8 bytes) to out; returns 8. */
static inline size_t key_u64(uint64_t i, unsigned char out[8])
{
    uint64_t v = keys_splitmix64(i);
    for (int b = 0; b < 8; b++)
        out[b] = (unsigned char)(v >> (8 * b));
    return 8;
}

/* Writes "key-<i>" to out (cap >= 32); returns its length (no NUL counted). */
static inline size_t key_str(uint64_t i, char *out, size_t cap)
{
    int n = snprintf(out, cap, "key-%llu", (unsigned long long)i);
    return n < 0 ? 0 : (size_t)n;
}

/* Key i in the given shape: 0 = key_u64, 1 = key_str.  buf holds >= 32. */
static inline size_t key_make(int shape, uint64_t i, void *buf)
{
    if (shape == 0)
        return key_u64(i, (unsigned char *)buf);
    return key_str(i, (char *)buf, 32);
}

/* A small deterministic PRNG for sampling (bit positions, subsets). */
typedef struct keys_rng {
    uint64_t s;
} keys_rng;

static inline uint64_t keys_rng_next(keys_rng *r)
{
    r->s += UINT64_C(0x9e3779b97f4a7c15);
    uint64_t z = r->s;
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* log of the Poisson(mean) probability of exactly i. */
static inline double keys_poisson_logpmf(double mean, double i)
{
    if (mean <= 0)
        return i == 0 ? 0.0 : -INFINITY;
    return -mean + i * log(mean) - lgamma(i + 1.0);
}

/*
 * The smallest count c with P(X > c) <= alpha for X ~ Poisson(mean): a
 * measured count above it fails the check.  The tail is summed from far
 * above the mean downwards, so tiny tails are accurate.
 */
static inline uint64_t poisson_upper_limit(double mean, double alpha)
{
    if (mean <= 0)
        return 0;
    double top = mean + 60.0 * sqrt(mean) + 100.0;
    double tail = 0.0; /* P(X > i) while walking i down from top */
    for (double i = floor(top); i >= 0; i -= 1.0) {
        double next_tail = tail + exp(keys_poisson_logpmf(mean, i));
        /* next_tail = P(X >= i) = P(X > i - 1) */
        if (next_tail > alpha)
            return (uint64_t)i;
        tail = next_tail;
    }
    return 0;
}

/* Classic Bloom filter bits per key for rate p: -log2(p)/ln 2. */
static inline double keys_classic_bits_per_key(double p)
{
    return -log2(p) / log(2.0);
}

/* Case-insensitive substring test. */
static inline bool keys_icontains(const char *hay, const char *needle)
{
    size_t nl = strlen(needle);
    for (const char *h = hay; *h; h++) {
        size_t j = 0;
        while (j < nl && h[j] &&
               tolower((unsigned char)h[j]) ==
                   tolower((unsigned char)needle[j]))
            j++;
        if (j == nl)
            return true;
    }
    return nl == 0;
}

/* True if errstr contains any of the NULL-terminated list of words. */
static inline bool keys_errstr_has_any(const char *errstr, ...)
{
    va_list ap;
    bool found = false;
    va_start(ap, errstr);
    for (const char *w = va_arg(ap, const char *); w;
         w = va_arg(ap, const char *)) {
        if (keys_icontains(errstr, w)) {
            found = true;
            break;
        }
    }
    va_end(ap);
    return found;
}

/* Little-endian field access for forging serialized filters. */
static inline uint64_t keys_get_le(const unsigned char *p, int width)
{
    uint64_t v = 0;
    for (int b = width - 1; b >= 0; b--)
        v = (v << 8) | p[b];
    return v;
}

static inline void keys_put_le(unsigned char *p, int width, uint64_t v)
{
    for (int b = 0; b < width; b++)
        p[b] = (unsigned char)(v >> (8 * b));
}

/* A forged field of a serialized file: `width` bytes at offset `at` set
 * to `value` (the checksum then made right), and a word the loader's
 * refusal must contain. */
typedef struct keys_forged {
    size_t at;
    int width;
    uint64_t value;
    const char *says;
} keys_forged;

/* A growable memory sink with the bf_write_fn signature, for serializing. */
typedef struct keys_membuf {
    unsigned char *data;
    size_t len, cap;
    size_t fail_after; /* fail a write that would pass this many bytes; 0 =
                          never */
} keys_membuf;

static inline int keys_membuf_write(void *opaque, const void *buf, size_t len)
{
    keys_membuf *m = (keys_membuf *)opaque;
    if (m->fail_after && m->len + len > m->fail_after)
        return -1;
    if (m->len + len > m->cap) {
        size_t cap = m->cap ? m->cap : 4096;
        while (cap < m->len + len)
            cap *= 2;
        unsigned char *d = (unsigned char *)realloc(m->data, cap);
        if (!d)
            return -1;
        m->data = d;
        m->cap = cap;
    }
    if (len)
        memcpy(m->data + m->len, buf, len);
    m->len += len;
    return 0;
}

static inline void keys_membuf_free(keys_membuf *m)
{
    free(m->data);
    memset(m, 0, sizeof *m);
}

/* Set bits in a byte range. */
static inline uint64_t keys_popcount(const unsigned char *p, size_t len)
{
    uint64_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += (uint64_t)__builtin_popcount(p[i]);
    return n;
}

/* Non-zero 4-bit counters in a byte range. */
static inline uint64_t keys_nonzero_nibbles(const unsigned char *p, size_t len)
{
    uint64_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += (uint64_t)((p[i] & 0x0f) != 0) + (uint64_t)((p[i] & 0xf0) != 0);
    return n;
}

/*
 * Checks a measured false-positive count: `fp` of `n` never-inserted queries
 * against target rate p.  Prints the numbers (the report quotes them) and
 * returns false if fp exceeds the Poisson(p*n) upper limit at KEYS_ALPHA.
 * Only the upper side is checked: a filter that beats its target is fine.
 */
static inline bool keys_fpr_within(const char *what, uint64_t fp, uint64_t n,
                                   double p)
{
    double expected = p * (double)n;
    uint64_t limit = poisson_upper_limit(expected, KEYS_ALPHA);
    bool ok = fp <= limit;
    printf("[   FPR    ] %s: p=%g queries=%llu fp=%llu rate=%.3g (%.2fx p) "
           "E=%.1f limit=%llu %s\n",
           what, p, (unsigned long long)n, (unsigned long long)fp,
           (double)fp / (double)n, (double)fp / (double)n / p, expected,
           (unsigned long long)limit, ok ? "ok" : "TOO HIGH");
    fflush(stdout);
    return ok;
}

/*
 * The documented serialized layout (bloomfilters.h, format version 1), read
 * back by the tests: header fields and each layer's descriptor.
 */
#define KEYS_HDR_SIZE 64u
#define KEYS_DESC_SIZE 64u
#define KEYS_OFF_MAGIC 0
#define KEYS_OFF_VERSION 8
#define KEYS_OFF_KIND 10
#define KEYS_OFF_HASH_ID 12
#define KEYS_OFF_SEED 16
#define KEYS_OFF_FILE_SIZE 24
#define KEYS_OFF_LAYERS 32
#define KEYS_OFF_HEADER_SIZE 36
#define KEYS_OFF_GROWTH 40
#define KEYS_OFF_TIGHTENING 48
#define KEYS_OFF_N0 56
/* within a layer descriptor at 64 + 64*i */
#define KEYS_D_NBLOCKS 0
#define KEYS_D_K 8 /* u16 (u32 in version 1) */
#define KEYS_D_SCHEME 10 /* u16, version 2 */
#define KEYS_D_BLOCK_CELLS 12
#define KEYS_D_CAPACITY 16
#define KEYS_D_FPR 24
#define KEYS_D_INSERTS 32
#define KEYS_D_CELLS_SET 40
#define KEYS_D_DATA_OFF 48
#define KEYS_D_DATA_SIZE 56

static inline size_t keys_desc_off(uint32_t layer)
{
    return KEYS_HDR_SIZE + (size_t)KEYS_DESC_SIZE * layer;
}

/* Recomputes the trailer of a serialized filter, delta or checkpoint:
 * XXH3-64 (seed 0) of all bytes but the last 8, little-endian. */
static inline void keys_reseal(void *buf, size_t len)
{
    unsigned char *b = (unsigned char *)buf;
    keys_put_le(b + len - 8, 8, XXH3_64bits(b, len - 8));
}

/* Serializes f into m (which it resets first). */
static inline bf_err keys_serialize(const bf_filter *f, keys_membuf *m)
{
    m->len = 0;
    return bf_filter_serialize(f, keys_membuf_write, m);
}

/* The cell array of `layer` inside a serialized filter, by the documented
 * descriptor; false if it does not lie inside the buffer. */
static inline bool keys_layer_data(const unsigned char *buf, size_t len,
                                   uint32_t layer, const unsigned char **data,
                                   uint64_t *size)
{
    size_t d = keys_desc_off(layer);
    if (d + KEYS_DESC_SIZE > len)
        return false;
    uint64_t off = keys_get_le(buf + d + KEYS_D_DATA_OFF, 8);
    uint64_t sz = keys_get_le(buf + d + KEYS_D_DATA_SIZE, 8);
    if (off > len || sz > len - off)
        return false;
    *data = buf + off;
    *size = sz;
    return true;
}

#endif /* BS_TESTS_KEYS_H */
