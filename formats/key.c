/*
 * key.c -- the key encoding of fm_key.h: a bounded growing buffer and the
 * bytes each kind of value appends.
 */
#include "fm_key.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fm_key_init(fm_key *k)
{
    k->p = k->inl;
    k->len = 0;
    k->cap = sizeof(k->inl);
    k->failed = false;
}

void fm_key_reset(fm_key *k)
{
    k->len = 0;
    k->failed = false;
}

void fm_key_free(fm_key *k)
{
    if (k->p != k->inl)
        free(k->p);
    fm_key_init(k);
}

/* Room for n more bytes: false (and the key failed) past FM_KEY_MAX or
 * when memory runs out. */
static bool room(fm_key *k, size_t n)
{
    if (k->failed)
        return false;
    if (n > FM_KEY_MAX - k->len) {
        k->failed = true;
        return false;
    }
    if (k->len + n <= k->cap)
        return true;
    size_t cap = k->cap;
    while (cap < k->len + n)
        cap *= 2;
    if (cap > FM_KEY_MAX)
        cap = FM_KEY_MAX;
    uint8_t *p;
    if (k->p == k->inl) {
        p = malloc(cap);
        if (p)
            memcpy(p, k->inl, k->len);
    } else {
        p = realloc(k->p, cap);
    }
    if (!p) {
        k->failed = true;
        return false;
    }
    k->p = p;
    k->cap = cap;
    return true;
}

void fm_key_bytes(fm_key *k, const void *b, size_t n)
{
    if (!room(k, n))
        return;
    if (n)
        memcpy(k->p + k->len, b, n);
    k->len += n;
}

static void typed(fm_key *k, char t, const char *text, size_t n)
{
    if (!room(k, 2 + n))
        return;
    k->p[k->len++] = FM_KEY_TYPED;
    k->p[k->len++] = (uint8_t)t;
    memcpy(k->p + k->len, text, n);
    k->len += n;
}

void fm_key_null(fm_key *k)
{
    typed(k, 'n', "", 0);
}

void fm_key_bool(fm_key *k, bool v)
{
    typed(k, v ? 't' : 'f', "", 0);
}

void fm_key_int(fm_key *k, int64_t v)
{
    char t[24];
    int n = snprintf(t, sizeof(t), "%" PRId64, v);
    typed(k, 'i', t, (size_t)n);
}

void fm_key_uint(fm_key *k, uint64_t v)
{
    char t[24];
    int n = snprintf(t, sizeof(t), "%" PRIu64, v);
    typed(k, 'i', t, (size_t)n);
}

void fm_key_real(fm_key *k, double v)
{
    /* 2^63 is the first double past int64's range. */
    if (v == v && v >= -9223372036854775808.0 && v < 9223372036854775808.0 &&
        v == floor(v)) {
        fm_key_int(k, (int64_t)v);
        return;
    }
    char t[32];
    int n = isnan(v) ? snprintf(t, sizeof(t), "nan")
                     : snprintf(t, sizeof(t), "%.17g", v);
    typed(k, 'd', t, (size_t)n);
}

void fm_key_compound(fm_key *k, char kind)
{
    typed(k, kind, "", 0);
}

fm_key_mark fm_key_elem_begin(fm_key *k)
{
    fm_key_mark m = k->len;
    if (room(k, 4))
        k->len += 4;
    return m;
}

void fm_key_elem_end(fm_key *k, fm_key_mark m)
{
    if (k->failed)
        return;
    size_t n = k->len - m - 4;
    if (n > UINT32_MAX) { /* unreachable under FM_KEY_MAX; kept exact */
        k->failed = true;
        return;
    }
    for (int i = 0; i < 4; i++)
        k->p[m + (size_t)i] = (uint8_t)(n >> (8 * i));
}

/* One element of a written compound: where its bytes start, how many. */
typedef struct elem {
    size_t off, len;
} elem;

static uint32_t len_at(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static int pair_cmp(const void *a, const void *b, void *base)
{
    const elem *x = a, *y = b; /* each the first (key) element of a pair */
    const uint8_t *sort_base = base;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(sort_base + x->off, sort_base + y->off, n);
    if (c)
        return c;
    return (x->len > y->len) - (x->len < y->len);
}

bool fm_key_map_sort(fm_key *k, size_t start)
{
    if (k->failed || start > k->len)
        return false;
    size_t n = 0;
    for (size_t at = start; at < k->len; n++) {
        if (k->len - at < 4 || len_at(k->p + at) > k->len - at - 4)
            return false;
        at += 4 + len_at(k->p + at);
    }
    if (n % 2)
        return false;
    if (n < 4)
        return true;
    /* Pairs as (key element, value element), sorted by the key element. */
    elem *e = malloc(n * sizeof(*e));
    uint8_t *copy = malloc(k->len - start);
    if (!e || !copy) {
        free(e);
        free(copy);
        k->failed = true;
        return false;
    }
    memcpy(copy, k->p + start, k->len - start);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        e[i].off = at + 4;
        e[i].len = len_at(copy + at);
        at += 4 + e[i].len;
    }
    qsort_r(e, n / 2, 2 * sizeof(*e), pair_cmp, copy);
    size_t w = start;
    for (size_t i = 0; i < n; i++) {
        memcpy(k->p + w, copy + e[i].off - 4, 4 + e[i].len);
        w += 4 + e[i].len;
    }
    free(e);
    free(copy);
    return true;
}
