/*
 * test_windowed.c -- the windowed filter (filters/windowed.c): its
 * contract, its memory, its serialized form.
 *
 *   - the contract over hundreds of windows for several windows and G:
 *     every copy less than a window after its key (in stream time) is
 *     found, always; a copy window*(1+1/G) or more after is found only as a
 *     false positive, measured against dedup fpr with the Poisson bound of
 *     keys.h (alpha 1e-6 per check);
 *   - the same with timestamps out of order (stream time is the largest
 *     seen), and late times reported as late;
 *   - slices when W does not divide by G;
 *   - memory flat over 200+ windows where a scalable filter grows;
 *   - the memory cap;
 *   - round trips mid-stream (the contract holds across them), and damaged
 *     or forged files rejected, each with a message that names the damage.
 *
 * Owns nothing outside the test; keys and tolerances come from keys.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "bloomfilters.h"
#include "keys.h"

#define SEED UINT64_C(0x77696e646f776564) /* "windowed" */

static bf_windowed *make(int64_t window, uint32_t g, double fpr, uint64_t n0)
{
    bf_windowed_params p;
    bf_windowed_params_default(&p);
    p.window = window;
    p.generations = g;
    p.fpr = fpr;
    p.initial_capacity = n0;
    p.seed = SEED;
    char err[256] = "";
    bf_windowed *w = bf_windowed_new(&p, err, sizeof err);
    if (!w)
        fail_msg("bf_windowed_new: %s", err);
    return w;
}

static bf_hash hkey(uint64_t i)
{
    unsigned char k[8];
    key_u64(i, k);
    return bf_hash_key(k, 8, SEED);
}

static bf_membuf serialize(const bf_windowed *w)
{
    bf_filter *f = bf_filter_from_windowed((bf_windowed *)w);
    bf_membuf m = {NULL, 0, 0};
    assert_int_equal(bf_filter_serialize(f, bf_membuf_write, &m), BF_OK);
    assert_int_equal(m.len, bf_filter_serialized_size(f));
    free(f); /* the handle only: w stays the caller's */
    return m;
}

/* w through its serialization: the copy must serialize to the same bytes. */
static bf_windowed *round_trip(bf_windowed *w)
{
    bf_membuf m = serialize(w);
    bf_filter *f = NULL;
    char err[256] = "";
    if (bf_filter_load_mem(m.buf, m.len, BF_LOAD_COPY, &f, err, sizeof err))
        fail_msg("a windowed filter's own bytes do not load: %s", err);
    assert_int_equal(bf_filter_kind(f), BF_KIND_WINDOWED);
    bf_windowed *c = bf_filter_windowed(f);
    bf_membuf m2 = serialize(c);
    assert_int_equal(m.len, m2.len);
    assert_memory_equal(m.buf, m2.buf, m.len);
    free(m.buf);
    free(m2.buf);
    free(f); /* keep c */
    bf_windowed_destroy(w);
    return c;
}

/*
 * A stream of `windows` windows of K keys each, key i at time
 * floor(i*W/K) (plus up to `jitter` units out of order).  tau[i] is the
 * stream time after key i.  At each key, before adding it:
 *   - the previous key, the key about half a window back and the oldest
 *     key whose tau is less than W back must be found if they were added
 *     (a miss fails; a key whose own add was a false drop was never in);
 *   - the 4 newest keys whose tau is at least W*(1+1/G) back are asked,
 *     and a "found" counts as a false drop;
 *   - the fresh key's add answering "already there" counts too.
 * Returns the false drops and the queries they came from.
 */
typedef struct run_result {
    uint64_t fp, queries;
    uint64_t bytes_early, bytes_late; /* most bytes in windows 2..9, and in
                                         the second half */
    uint64_t max_gens;
} run_result;

static run_result run_stream(int64_t W, uint32_t G, uint64_t K,
                             uint64_t windows, double fpr, int64_t jitter,
                             uint64_t reload_every)
{
    run_result r = {0};
    bf_windowed *w = make(W, G, fpr, K);
    uint64_t n = K * windows;
    int64_t *tau = malloc(n * sizeof(*tau));
    bool *added = malloc(n * sizeof(*added));
    assert_non_null(tau);
    assert_non_null(added);
    keys_rng rng = {UINT64_C(0x1234) + (uint64_t)W};
    uint64_t in_lo = 0, out_hi = 0; /* pointers into the keys by tau */
    const long double forget = (long double)W * (G + 1) / G;
    for (uint64_t i = 0; i < n; i++) {
        int64_t t = (int64_t)((__int128)i * W / (int64_t)K);
        if (jitter)
            t += (int64_t)(keys_rng_next(&rng) % (uint64_t)(jitter + 1));
        bool late = bf_windowed_advance(w, t);
        int64_t now = bf_windowed_stream_time(w);
        assert_true(now >= t);
        /* Jitter smaller than a slice is never late. */
        if (jitter < W / G)
            assert_false(late);
        while (in_lo < i && now - tau[in_lo] >= W)
            in_lo++;
        uint64_t must[3] = {i ? i - 1 : i, in_lo + (i - in_lo) / 2, in_lo};
        for (int j = 0; j < 3; j++)
            if (must[j] < i && added[must[j]] &&
                !bf_windowed_contains_h(w, hkey(must[j])))
                fail_msg("W=%lld G=%u: key %llu (tau %lld) forgotten at "
                         "stream time %lld, less than a window later",
                         (long long)W, G, (unsigned long long)must[j],
                         (long long)tau[must[j]], (long long)now);
        while (out_hi < i && (long double)(now - tau[out_hi]) >= forget)
            out_hi++;
        /* keys [0, out_hi) are forgotten by the contract */
        for (uint64_t j = out_hi; j > 0 && j + 4 > out_hi; j--) {
            r.queries++;
            r.fp += bf_windowed_contains_h(w, hkey(j - 1));
        }
        int a = bf_windowed_add_if_absent_h(w, hkey(i));
        assert_true(a == 0 || a == 1);
        r.queries++;
        r.fp += a == 0;
        tau[i] = now;
        added[i] = a == 1; /* a false drop was not added: nothing to find */
        if ((i + 1) % K == 0) {
            uint64_t win = (i + 1) / K;
            bf_info in;
            bf_windowed_info(w, &in);
            if (win >= 2 && win < 10 && in.bytes > r.bytes_early)
                r.bytes_early = in.bytes;
            if (win > windows / 2 && in.bytes > r.bytes_late)
                r.bytes_late = in.bytes;
            uint32_t gens = bf_windowed_generations(w);
            if (gens > r.max_gens)
                r.max_gens = gens;
        }
        if (reload_every && (i + 1) % reload_every == 0)
            w = round_trip(w);
    }
    free(tau);
    free(added);
    bf_windowed_destroy(w);
    return r;
}

static void check_run(const char *what, run_result r, double fpr, uint32_t G)
{
    char label[128];
    snprintf(label, sizeof label, "%s false drops", what);
    assert_true(keys_fpr_within(label, r.fp, r.queries, fpr));
    assert_true(r.max_gens <= G + 1);
    printf("[  MEMORY  ] %s: %llu bytes in windows 2-9, %llu in the second "
           "half (most)\n",
           what, (unsigned long long)r.bytes_early,
           (unsigned long long)r.bytes_late);
    /* Flat: the second half needs no more than the start. */
    assert_true(r.bytes_late <= r.bytes_early + r.bytes_early / 20);
}

static void test_contract_windows(void **state)
{
    (void)state;
    static const struct {
        int64_t W;
        uint32_t G;
        uint64_t K, windows;
        double fpr;
    } c[] = {
        {1000, 4, 1000, 300, 1e-2},        /* one key per unit */
        {86400000, 4, 2000, 200, 1e-2},    /* a day in ms */
        {997, 7, 600, 300, 1e-2},          /* W not a multiple of G */
        {64, 1, 200, 300, 1e-2},           /* G = 1: two generations */
        {50000, 16, 3000, 120, 1e-3},      /* many slices, tighter fpr */
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char what[96];
        snprintf(what, sizeof what, "W=%lld G=%u K=%llu/window, %llu windows",
                 (long long)c[i].W, c[i].G, (unsigned long long)c[i].K,
                 (unsigned long long)c[i].windows);
        run_result r = run_stream(c[i].W, c[i].G, c[i].K, c[i].windows,
                                  c[i].fpr, 0, 0);
        check_run(what, r, c[i].fpr, c[i].G);
    }
}

/* Timestamps out of order by up to half a slice: the contract holds in
 * stream time. */
static void test_contract_out_of_order(void **state)
{
    (void)state;
    run_result r = run_stream(1000, 4, 1000, 200, 1e-2, 120, 0);
    check_run("W=1000 G=4 jitter 120", r, 1e-2, 4);
}

/* Saved and loaded every 2.3 windows: nothing changes for the contract. */
static void test_contract_across_reloads(void **state)
{
    (void)state;
    run_result r = run_stream(1000, 4, 1000, 60, 1e-2, 0, 2300);
    check_run("W=1000 G=4 reloaded", r, 1e-2, 4);
}

static void test_slices_and_late(void **state)
{
    (void)state;
    /* W = 10, G = 3: slices start at 0, 4, 7, 10, 14, ... */
    bf_windowed *w = make(10, 3, 1e-3, 100);
    assert_int_equal(bf_windowed_stream_time(w), -1);
    assert_false(bf_windowed_contains_h(w, hkey(1)));
    int64_t times[] = {0, 3, 4, 6, 7, 9, 10, 13};
    for (size_t i = 0; i < sizeof times / sizeof times[0]; i++) {
        assert_false(bf_windowed_advance(w, times[i]));
        assert_int_equal(bf_windowed_add_if_absent_h(w, hkey(100 + i)), 1);
    }
    /* Slices 0..3 live at T = 13 (slice 3 = [10, 14)). */
    assert_int_equal(bf_windowed_generations(w), 4);
    static const int64_t from[] = {0, 4, 7, 10}, to[] = {4, 7, 10, 14};
    for (uint32_t i = 0; i < 4; i++) {
        bf_generation_info g;
        assert_true(bf_windowed_generation_info(w, i, &g));
        assert_int_equal(g.slice, i);
        assert_int_equal(g.time_from, from[i]);
        assert_int_equal(g.time_to, to[i]);
        assert_int_equal(g.info.inserts, 2);
    }
    /* T = 14 opens slice 4 and drops slice 0 (keys at 0 and 3). */
    assert_false(bf_windowed_advance(w, 14));
    assert_false(bf_windowed_contains_h(w, hkey(100)));
    assert_false(bf_windowed_contains_h(w, hkey(101)));
    assert_true(bf_windowed_contains_h(w, hkey(102)));
    assert_int_equal(bf_windowed_generations(w), 3); /* 4 is empty */
    /* Late: before slice 1's start (4). */
    assert_true(bf_windowed_advance(w, 3));
    assert_false(bf_windowed_advance(w, 4));
    assert_false(bf_windowed_advance(w, -5)); /* not a time */
    assert_int_equal(bf_windowed_stream_time(w), 14);
    /* A jump of many windows forgets everything. */
    assert_false(bf_windowed_advance(w, 1000));
    assert_int_equal(bf_windowed_generations(w), 0);
    for (size_t i = 0; i < sizeof times / sizeof times[0]; i++)
        assert_false(bf_windowed_contains_h(w, hkey(100 + i)));
    bf_windowed_destroy(w);

    char err[256] = "";
    bf_windowed_params p;
    bf_windowed_params_default(&p);
    p.window = 3;
    p.generations = 4;
    assert_null(bf_windowed_new(&p, err, sizeof err));
    assert_true(keys_icontains(err, "shorter than"));
    p.window = 1000;
    p.generations = 0;
    assert_null(bf_windowed_new(&p, err, sizeof err));
    assert_true(keys_icontains(err, "generations"));
}

/* 200 windows of 20,000 keys: the windowed filter stays at its size, a
 * scalable filter holding the same keys grows with the stream. */
static void test_memory_flat(void **state)
{
    (void)state;
    const uint64_t K = 20000, windows = 200;
    bf_windowed *w = make(3600000, 4, 1e-6, K);
    bf_scalable_params sp;
    bf_scalable_params_default(&sp);
    sp.initial_capacity = K;
    sp.seed = SEED;
    bf_scalable *sb = bf_scalable_new(&sp, NULL, 0);
    assert_non_null(sb);
    uint64_t first = 0, most = 0;
    for (uint64_t i = 0; i < K * windows; i++) {
        (void)bf_windowed_advance(w, (int64_t)(i * 3600000 / K));
        assert_true(bf_windowed_add_if_absent_h(w, hkey(i)) >= 0);
        assert_true(bf_scalable_add_if_absent_h(sb, hkey(i)) >= 0);
        if ((i + 1) % K == 0) {
            bf_info in;
            bf_windowed_info(w, &in);
            if ((i + 1) / K == 5)
                first = in.bytes;
            if ((i + 1) / K > 5 && in.bytes > most)
                most = in.bytes;
        }
    }
    bf_info wi, si;
    bf_windowed_info(w, &wi);
    bf_scalable_info(sb, &si);
    printf("[  MEMORY  ] 1.25 windows of %llu keys at 1e-6: %llu bytes at "
           "window 5, at most %llu after (%.1f bytes a key of a window); "
           "the scalable filter of the same stream: %llu bytes; estimated "
           "keys %.0f\n",
           (unsigned long long)K, (unsigned long long)first,
           (unsigned long long)most, (double)most / (double)K,
           (unsigned long long)si.bytes, wi.est_keys);
    assert_true(most <= first + first / 20);
    assert_true(si.bytes > 20 * most);
    /* The estimate counts the keys of the live generations: between one
     * window and 1.25 windows of keys. */
    assert_true(wi.est_keys > 0.95 * (double)K &&
                wi.est_keys < 1.3 * (double)K);
    /* k and scheme are the newest layer's, as for a scalable filter. */
    assert_true(wi.k >= 16);
    assert_int_equal(wi.scheme, bf_scheme_for(BF_BLOCK_BITS, wi.k));
    bf_scalable_destroy(sb);
    bf_windowed_destroy(w);
}

static void test_memory_cap(void **state)
{
    (void)state;
    bf_windowed *w = make(1000, 4, 1e-3, 1000);
    bf_windowed_set_max_bytes(w, 64 << 10);
    uint64_t refused = 0;
    for (uint64_t i = 0; i < 200000; i++) {
        (void)bf_windowed_advance(w, (int64_t)(i / 100));
        int a = bf_windowed_add_if_absent_h(w, hkey(i));
        assert_true(a == 0 || a == 1 || a == -(int)BF_ERR_NOMEM);
        refused += a < 0;
        bf_info in;
        bf_windowed_info(w, &in);
        assert_true(in.bytes <= 64 << 10);
    }
    assert_true(refused > 0);
    bf_windowed_destroy(w);
}

static void test_filter_handle(void **state)
{
    (void)state;
    bf_filter *f = bf_filter_from_windowed(make(100, 4, 1e-3, 100));
    bf_filter *g = bf_filter_from_windowed(make(100, 4, 1e-3, 100));
    assert_int_equal(bf_filter_kind(f), BF_KIND_WINDOWED);
    assert_string_equal(bf_kind_name(BF_KIND_WINDOWED), "windowed");
    assert_int_equal(bf_filter_add(f, "a", 1), 1);
    assert_int_equal(bf_filter_add(f, "a", 1), 0);
    assert_true(bf_filter_contains(f, "a", 1));
    bf_filter_prefetch_h(f, bf_hash_key("a", 1, bf_filter_seed(f)));
    bf_info in;
    bf_filter_info(f, &in);
    assert_int_equal(in.kind, BF_KIND_WINDOWED);
    assert_int_equal(in.inserts, 1);
    char err[256] = "";
    assert_int_equal(bf_filter_merge(g, f, err, sizeof err),
                     BF_ERR_INCOMPATIBLE);
    assert_true(keys_icontains(err, "windowed"));
    bf_filter_destroy(f);
    bf_filter_destroy(g);
}

/* -- the serialized form ---------------------------------------------------- */

/* A filter with 3 live generations (slices 8..10 of W=100, G=4) and one
 * empty slice among them. */
static bf_membuf sample_bytes(void)
{
    bf_windowed *w = make(100, 4, 1e-3, 50);
    int64_t at[] = {200, 230, 250, 275};
    for (int s = 0; s < 4; s++) {
        if (s == 2)
            continue;
        (void)bf_windowed_advance(w, at[s]);
        for (uint64_t i = 0; i < 40; i++)
            assert_true(bf_windowed_add_if_absent_h(w, hkey(s * 100 + i)) >=
                        0);
    }
    assert_int_equal(bf_windowed_generations(w), 3);
    bf_membuf m = serialize(w);
    bf_windowed_destroy(w);
    return m;
}

static void expect_rejected(const unsigned char *b, size_t len, unsigned flags,
                            const char *what, ...)
{
    bf_filter *f = NULL;
    char err[512] = "";
    bf_err e = bf_filter_load_mem(b, len, flags, &f, err, sizeof err);
    if (e == BF_OK)
        fail_msg("%s: loaded", what);
    assert_null(f);
    va_list ap;
    va_start(ap, what);
    bool named = false;
    for (const char *w; (w = va_arg(ap, const char *));)
        named = named || keys_icontains(err, w);
    va_end(ap);
    if (!named)
        fail_msg("%s: rejected, but the message does not say why: %s", what,
                 err);
}

static void test_format_round_trip_and_layout(void **state)
{
    (void)state;
    bf_membuf m = sample_bytes();
    const unsigned char *b = m.buf;
    assert_memory_equal(b, BF_FORMAT_MAGIC, BF_FORMAT_MAGIC_LEN);
    assert_int_equal(keys_get_le(b + 10, 2), BF_KIND_WINDOWED);
    assert_int_equal(keys_get_le(b + 32, 4), 3);
    assert_int_equal(keys_get_le(b + 36, 4), 128 + 3 * 32);
    assert_int_equal(keys_get_le(b + 64, 8), 100);
    assert_int_equal(keys_get_le(b + 72, 4), 4);
    assert_int_equal(keys_get_le(b + 80, 8), 275);
    for (uint32_t i = 0; i < 3; i++) {
        const unsigned char *d = b + 128 + 32 * i;
        static const uint64_t slice[] = {8, 9, 11};
        assert_int_equal(keys_get_le(d, 8), slice[i]);
        uint64_t off = keys_get_le(d + 8, 8);
        assert_int_equal(off % 64, 0);
        assert_memory_equal(b + off, BF_FORMAT_MAGIC, BF_FORMAT_MAGIC_LEN);
        assert_int_equal(keys_get_le(b + off + 10, 2), BF_KIND_SCALABLE);
    }
    bf_filter *f = NULL;
    char err[256] = "";
    assert_int_equal(bf_filter_load_mem(b, m.len, BF_LOAD_COPY, &f, err,
                                        sizeof err),
                     BF_OK);
    for (int s = 0; s < 4; s++)
        for (uint64_t i = 0; i < 40; i++)
            assert_int_equal(bf_filter_contains_h(f, hkey(s * 100 + i)),
                             s != 2);
    bf_filter_destroy(f);
    /* Not in place: its generations are separate filters. */
    unsigned char *al = aligned_alloc(64, (m.len + 63) / 64 * 64);
    memcpy(al, b, m.len);
    assert_int_equal(bf_filter_load_mem(al, m.len, BF_LOAD_INPLACE, &f, err,
                                        sizeof err),
                     BF_ERR_INVALID);
    assert_true(keys_icontains(err, "in place"));
    free(al);
    free(m.buf);

    /* An empty filter (no stream time) round-trips too. */
    bf_windowed *w = round_trip(make(1000, 4, 1e-3, 10));
    assert_int_equal(bf_windowed_stream_time(w), -1);
    bf_windowed_destroy(w);
}

static void test_format_damage(void **state)
{
    (void)state;
    bf_membuf m = sample_bytes();
    unsigned char *b = malloc(m.len);
    /* Every truncation. */
    for (size_t len = 0; len < m.len; len += len < 400 ? 1 : 97)
        expect_rejected(m.buf, len, BF_LOAD_COPY, "truncated", "truncated",
                        "too short", "header says", NULL);
    /* A flipped bit anywhere: the checksum says so; without the check, the
     * structure does or the filter loads (and is then usable). */
    for (size_t i = 0; i < m.len - 8; i += i < 512 ? 1 : 61) {
        memcpy(b, m.buf, m.len);
        b[i] ^= (unsigned char)(1u << (i % 8));
        expect_rejected(b, m.len, BF_LOAD_COPY, "bit flip", "checksum",
                        "magic", "version", "header says", NULL);
        bf_filter *f = NULL;
        char err[512];
        if (bf_filter_load_mem(b, m.len, BF_LOAD_COPY | BF_LOAD_NOVERIFY, &f,
                               err, sizeof err) == BF_OK) {
            assert_true(bf_filter_add(f, "x", 1) >= 0);
            bf_filter_destroy(f);
        } else {
            assert_true(err[0] != '\0');
        }
    }
    /* Forged fields with the checksum made right: named by what is
     * wrong. */
    static const keys_forged forged[] = {
        {72, 4, 0, "generations"},              /* G = 0 */
        {72, 4, 1000, "generations"},           /* G too big */
        {64, 8, 2, "shorter than"},             /* W < G */
        {40, 8, 0, "fpr"},                      /* P = 0.0 */
        {32, 4, 9, "more than"},                /* L > G+1 */
        {32, 4, 2, "header size"},              /* L != descriptors */
        {76, 4, 1, "reserved"},
        {110, 1, 1, "reserved"},
        {80, 8, UINT64_MAX, "no stream time"},  /* T = -1 with generations */
        {80, 8, UINT64_MAX - 5, "negative"},
        {80, 8, 10000, "not live"},             /* T far ahead */
        {96, 8, UINT64_C(1) << 50, "hint"},
        {128, 8, 9, "not live"},                /* slices out of order */
        {128 + 24, 1, 7, "reserved"},
        {128 + 8, 8, 64, "offset"},
        {128 + 16, 8, UINT64_C(1) << 40, "past the end"},
        {128 + 16, 8, 64, "offset"},            /* size: next one moves */
    };
    for (size_t i = 0; i < sizeof forged / sizeof forged[0]; i++) {
        memcpy(b, m.buf, m.len);
        if (forged[i].at == 40)
            memset(b + 40, 0, 8);
        else
            keys_put_le(b + forged[i].at, forged[i].width, forged[i].value);
        keys_reseal(b, m.len);
        char what[64];
        snprintf(what, sizeof what, "forged byte %zu", forged[i].at);
        expect_rejected(b, m.len, BF_LOAD_COPY, what, forged[i].says, NULL);
    }
    /* Padding between generations must be zero. */
    memcpy(b, m.buf, m.len);
    uint64_t off1 = keys_get_le(b + 128 + 32 + 8, 8);
    b[off1 - 1] = 1;
    keys_reseal(b, m.len);
    expect_rejected(b, m.len, BF_LOAD_COPY, "padding", "padding", NULL);
    /* A generation with another fpr or seed than the window's share. */
    uint64_t off0 = keys_get_le(b + 128 + 8, 8);
    for (int which = 0; which < 2; which++) {
        memcpy(b, m.buf, m.len);
        if (which == 0)
            keys_put_le(b + off0 + 40, 8, 0x3fb999999999999aull); /* 0.1 */
        else
            b[off0 + 16] ^= 1; /* its seed */
        uint64_t size0 = keys_get_le(b + 128 + 16, 8);
        keys_reseal(b + off0, (size_t)size0);
        keys_reseal(b, m.len);
        expect_rejected(b, m.len, BF_LOAD_COPY, "generation params",
                        "generation 0", NULL);
    }
    /* A generation damaged inside (its own structure). */
    memcpy(b, m.buf, m.len);
    keys_put_le(b + off0 + 32, 4, 0); /* its layer count */
    keys_reseal(b, m.len);
    expect_rejected(b, m.len, BF_LOAD_COPY, "inner damage", "generation 0",
                    NULL);
    free(b);
    free(m.buf);
}

/* Found by fuzz_filter_file: a generation whose layer counts say 2^62 keys
 * set the sizing hint past what a file may hold, so the filter's own bytes
 * no longer loaded once its slice was over.  The hint is clamped now. */
static void test_huge_insert_count_still_round_trips(void **state)
{
    (void)state;
    bf_membuf m = sample_bytes();
    unsigned char *b = m.buf;
    /* The newest generation (slice 11, current at T = 275): its first
     * layer's insert count, at descriptor offset 32 inside it. */
    uint64_t off2 = keys_get_le(b + 128 + 64 + 8, 8);
    uint64_t size2 = keys_get_le(b + 128 + 64 + 16, 8);
    keys_put_le(b + off2 + 64 + 32, 8, UINT64_C(1) << 62);
    keys_reseal(b + off2, (size_t)size2);
    keys_reseal(b, m.len);
    bf_filter *f = NULL;
    char err[256] = "";
    assert_int_equal(bf_filter_load_mem(b, m.len, BF_LOAD_COPY, &f, err,
                                        sizeof err),
                     BF_OK);
    bf_windowed *w = bf_filter_windowed(f);
    (void)bf_windowed_advance(w, 300); /* slice 12: 11 is finished */
    bf_windowed_set_max_bytes(w, 1 << 20);
    /* Sized from the hint, under the cap: refused, not allocated. */
    assert_true(bf_windowed_add_if_absent_h(w, hkey(999)) < 0);
    free(f);
    w = round_trip(w);
    bf_windowed_destroy(w);
    free(m.buf);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slices_and_late),
        cmocka_unit_test(test_filter_handle),
        cmocka_unit_test(test_format_round_trip_and_layout),
        cmocka_unit_test(test_format_damage),
        cmocka_unit_test(test_huge_insert_count_still_round_trips),
        cmocka_unit_test(test_memory_cap),
        cmocka_unit_test(test_contract_across_reloads),
        cmocka_unit_test(test_contract_out_of_order),
        cmocka_unit_test(test_memory_flat),
        cmocka_unit_test(test_contract_windows),
    };
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
