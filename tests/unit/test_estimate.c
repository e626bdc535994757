/*
 * test_estimate.c -- counts estimated from the bits, union and intersection,
 * and merging filters.
 *
 * What must hold (tolerances stated where they are checked):
 *   - bf_estimate_count is n = -(m/k) ln(1 - X/m) (1e-12 relative), 0 for an
 *     empty filter, INFINITY for a full one; bf_estimate_count_blocked is the
 *     closed-form solution of its documented equation (1e-9 relative);
 *   - info.est_keys of blocked, counting and scalable filters is within 3% of
 *     the true distinct count while fill <= 0.5 (the statistical error at
 *     these sizes is ~0.1-0.3%, the rest is room for estimator bias), and
 *     within 6% up to fill 0.7;
 *   - merging (bf_blocked_merge, bf_filter_merge) gives bit for bit the
 *     filter built from the union of the key sets (blocked; scalable layer by
 *     layer); counting merge keeps every key of both, and removals after it
 *     lose none;
 *   - union estimates within 3% of the true union, intersection estimates
 *     within 5% of the true intersection when it is >= 25% of a set, within
 *     1% of the union when it is empty;
 *   - merges and estimates refuse incompatible filters (geometry, k, seed,
 *     kind, layer count) with BF_ERR_INCOMPATIBLE, a reason in errstr, and
 *     the destination unchanged.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>

#include "bloomfilters.h"
#include "keys.h"

#define SEED UINT64_C(0xe571a7e5e571a7e5)

static double rel_err(double est, double truth)
{
    return fabs(est - truth) / truth;
}

static bf_blocked *blocked(uint64_t cap, double p, uint64_t seed)
{
    char err[256] = "";
    bf_blocked *bf = bf_blocked_new(cap, p, seed, err, sizeof err);
    if (!bf)
        fail_msg("bf_blocked_new: %s", err);
    return bf;
}

/* Adds key numbers [from, to) (8-byte keys). */
static void fill_range(bf_blocked *bf, uint64_t from, uint64_t to)
{
    for (uint64_t i = from; i < to; i++) {
        unsigned char key[8];
        key_u64(i, key);
        bf_blocked_add(bf, key, 8);
    }
}

/* ------------------------------------------------------------------------ */

static void test_estimate_formulas(void **state)
{
    (void)state;
    assert_true(bf_estimate_count(1000, 0, 7) == 0.0);
    assert_true(isinf(bf_estimate_count(1000, 1000, 7)));
    const uint64_t m = 1 << 20;
    for (uint64_t x = 1; x < m; x = x * 3 + 7) {
        for (uint32_t k = 1; k <= 64; k *= 2) {
            double want = -((double)m / k) * log1p(-(double)x / (double)m);
            double got = bf_estimate_count(m, x, k);
            if (rel_err(got, want) > 1e-12)
                fail_msg("bf_estimate_count(%llu, %llu, %u) = %.17g, want "
                         "%.17g",
                         (unsigned long long)m, (unsigned long long)x, k, got,
                         want);
        }
    }
    /* The blocked estimate solves
     * X = nb*B*(1 - exp(lambda*((1-1/B)^k - 1))) for lambda, n = lambda*nb:
     * n = nb * ln(1 - X/(nb B)) / ((1-1/B)^k - 1). */
    const uint64_t nbs[] = {1, 7, 1000, 123457};
    const uint32_t Bs[] = {BF_BLOCK_BITS, BF_COUNTING_BLOCK_CELLS};
    for (size_t b = 0; b < 2; b++)
        for (size_t i = 0; i < 4; i++) {
            uint64_t nb = nbs[i], cells = nb * Bs[b];
            assert_true(bf_estimate_count_blocked(nb, Bs[b], 0, 7) == 0.0);
            assert_true(isinf(bf_estimate_count_blocked(nb, Bs[b], cells, 7)));
            for (uint32_t k = 1; k <= 64; k += k % 8 ? 7 : 1)
                for (uint64_t x = 1; x < cells; x = x * 2 + 1) {
                    double B = Bs[b];
                    /* k distinct probes a key: a cell stays clear with
                     * exp(-lambda k / B), the plain formula per block. */
                    double want = -(double)nb * B / (double)k *
                                  log1p(-(double)x / (double)cells);
                    double got = bf_estimate_count_scheme(
                        BF_SCHEME_DISTINCT, nb, Bs[b], x, k);
                    if (rel_err(got, want) > 1e-7)
                        fail_msg("bf_estimate_count_scheme(distinct, %llu, "
                                 "%u, %llu, %u) = %.17g, want %.17g",
                                 (unsigned long long)nb, Bs[b],
                                 (unsigned long long)x, k, got, want);
                    if (Bs[b] != BF_BLOCK_BITS || k % 8)
                        continue;
                    /* Lanes, k = 8c in 64-bit lanes: a cell of a lane
                     * stays clear with (63/64)^c per key,
                     * exp(-lambda(1-(63/64)^c)); k = 16c in 32-bit ones
                     * (bf_scheme_for), with (31/32)^c. */
                    double keep = k % 16 ? pow(63.0 / 64.0, k / 8)
                                         : pow(31.0 / 32.0, k / 16);
                    want = -(double)nb * log1p(-(double)x / (double)cells) /
                           (1.0 - keep);
                    got = bf_estimate_count_blocked(nb, Bs[b], x, k);
                    if (rel_err(got, want) > 1e-7)
                        fail_msg("bf_estimate_count_blocked(%llu, %u, %llu, "
                                 "%u) = %.17g, want %.17g (lanes)",
                                 (unsigned long long)nb, Bs[b],
                                 (unsigned long long)x, k, got, want);
                }
        }
    /* "For k << B the two agree" (0.5% at k = 2, B = 512). */
    assert_true(rel_err(bf_estimate_count_scheme(BF_SCHEME_DISTINCT, 1000, 512,
                                                 100000, 2),
                        bf_estimate_count(512000, 100000, 2)) < 0.005);
}

/* est_keys against the truth as a blocked filter fills. */
static void test_est_keys_blocked(void **state)
{
    (void)state;
    const double ps[] = {1e-2, 1e-4, 1e-6};
    const uint64_t cap = 200000;
    double worst_half = 0, worst_70 = 0;
    for (size_t pi = 0; pi < 3; pi++) {
        bf_blocked *bf = blocked(cap, ps[pi], SEED);
        uint64_t n = 0;
        const double loads[] = {0.01, 0.1,  0.25, 0.5, 0.75,
                                1.0,  1.25, 1.5,  2.0};
        for (size_t li = 0; li < sizeof loads / sizeof loads[0]; li++) {
            uint64_t to = (uint64_t)(loads[li] * (double)cap);
            fill_range(bf, n, to);
            n = to;
            bf_info info;
            bf_blocked_info(bf, &info);
            double e = rel_err(info.est_keys, (double)n);
            print_message("[  EST     ] blocked p=%g k=%u n=%llu fill=%.3f "
                          "est=%.0f err=%+.3f%%\n",
                          ps[pi], info.k, (unsigned long long)n, info.fill,
                          info.est_keys,
                          100.0 * (info.est_keys - (double)n) / (double)n);
            if (info.fill <= 0.5) {
                assert_true(e <= 0.03);
                worst_half = e > worst_half ? e : worst_half;
            } else if (info.fill <= 0.7) {
                assert_true(e <= 0.06);
                worst_70 = e > worst_70 ? e : worst_70;
            }
        }
        bf_blocked_destroy(bf);
    }
    print_message("[  EST     ] blocked est_keys: worst %.3f%% at fill <= 0.5, "
                  "%.3f%% at fill <= 0.7\n",
                  100 * worst_half, 100 * worst_70);
}

static void test_est_keys_counting_and_scalable(void **state)
{
    (void)state;
    char err[256];
    /* Counting: 128-cell blocks, where the blocked correction matters most. */
    const double ps[] = {1e-2, 1e-4};
    for (size_t pi = 0; pi < 2; pi++) {
        const uint64_t cap = 200000;
        bf_counting *cf = bf_counting_new(cap, ps[pi], SEED, err, sizeof err);
        assert_non_null(cf);
        uint64_t n = 0;
        const double loads[] = {0.1, 0.5, 1.0};
        for (size_t li = 0; li < 3; li++) {
            uint64_t to = (uint64_t)(loads[li] * (double)cap);
            for (; n < to; n++) {
                unsigned char key[8];
                key_u64(n, key);
                bf_counting_add(cf, key, 8);
            }
            bf_info info;
            bf_counting_info(cf, &info);
            double e = rel_err(info.est_keys, (double)n);
            print_message("[  EST     ] counting p=%g k=%u n=%llu fill=%.3f "
                          "est=%.0f err=%+.3f%%\n",
                          ps[pi], info.k, (unsigned long long)n, info.fill,
                          info.est_keys,
                          100.0 * (info.est_keys - (double)n) / (double)n);
            if (info.fill <= 0.5)
                assert_true(e <= 0.03);
            else if (info.fill <= 0.7)
                assert_true(e <= 0.06);
        }
        /* Removing keys lowers the estimate with them. */
        for (uint64_t i = 0; i < n / 2; i++) {
            unsigned char key[8];
            key_u64(i, key);
            assert_true(bf_counting_remove(cf, key, 8));
        }
        bf_info info;
        bf_counting_info(cf, &info);
        print_message("[  EST     ] counting p=%g after removing half: "
                      "n=%llu est=%.0f\n",
                      ps[pi], (unsigned long long)(n - n / 2), info.est_keys);
        assert_true(rel_err(info.est_keys, (double)(n - n / 2)) <= 0.03);
        bf_counting_destroy(cf);
    }

    /* Scalable: the sum over layers, each at most at its capacity. */
    bf_scalable_params prm;
    bf_scalable_params_default(&prm);
    prm.initial_capacity = 1000;
    prm.fpr = 1e-3;
    prm.seed = SEED;
    bf_scalable *sb = bf_scalable_new(&prm, err, sizeof err);
    assert_non_null(sb);
    uint64_t n = 0;
    const uint64_t points[] = {500, 5000, 50000, 500000};
    for (size_t pi = 0; pi < 4; pi++) {
        for (; n < points[pi]; n++) {
            unsigned char key[8];
            key_u64(n, key);
            assert_true(bf_scalable_add_if_absent(sb, key, 8) >= 0);
        }
        bf_info info;
        bf_scalable_info(sb, &info);
        print_message("[  EST     ] scalable layers=%u n=%llu est=%.0f "
                      "err=%+.3f%%\n",
                      info.layers, (unsigned long long)n, info.est_keys,
                      100.0 * (info.est_keys - (double)n) / (double)n);
        assert_true(rel_err(info.est_keys, (double)n) <= 0.03);
    }
    bf_scalable_destroy(sb);
}

/* ------------------------------------------------------------------------ */
/* Union                                                                     */

/* The cell array of layer `layer` of a serialized filter, copied out. */
static unsigned char *layer_copy(const bf_filter *f, uint32_t layer,
                                 uint64_t *size)
{
    keys_membuf m = {0};
    assert_int_equal(keys_serialize(f, &m), BF_OK);
    const unsigned char *data = NULL;
    assert_true(keys_layer_data(m.data, m.len, layer, &data, size));
    unsigned char *copy = malloc(*size ? *size : 1);
    assert_non_null(copy);
    memcpy(copy, data, *size);
    keys_membuf_free(&m);
    return copy;
}

static void test_merge_is_union_blocked(void **state)
{
    (void)state;
    char err[256];
    /* S1 = [0, 60000), S2 = [40000, 100000), S1 u S2 = [0, 100000). */
    bf_blocked *a = blocked(100000, 1e-3, SEED);
    bf_blocked *b = blocked(100000, 1e-3, SEED);
    bf_blocked *c = blocked(100000, 1e-3, SEED);
    fill_range(a, 0, 60000);
    fill_range(b, 40000, 100000);
    fill_range(c, 0, 100000);
    double est_u = 0, est_i = 0;
    assert_int_equal(bf_blocked_estimate_union(a, b, &est_u, err, sizeof err),
                     BF_OK);
    assert_int_equal(
        bf_blocked_estimate_intersection(a, b, &est_i, err, sizeof err), BF_OK);
    assert_int_equal(bf_blocked_merge(a, b, err, sizeof err), BF_OK);

    bf_filter *fa = bf_filter_from_blocked(a), *fc = bf_filter_from_blocked(c);
    uint64_t sa, sc;
    unsigned char *da = layer_copy(fa, 0, &sa), *dc = layer_copy(fc, 0, &sc);
    assert_int_equal(sa, sc);
    assert_memory_equal(da, dc, sa);
    bf_info ia, ic;
    bf_blocked_info(a, &ia);
    bf_blocked_info(c, &ic);
    assert_int_equal(ia.cells_set, ic.cells_set);
    assert_int_equal(ia.cells_set, keys_popcount(da, sa));
    assert_true(ia.est_keys == ic.est_keys);
    /* The union estimate read the same bits the merge produced. */
    assert_true(rel_err(est_u, ic.est_keys) < 1e-9);
    assert_true(rel_err(est_u, 100000) <= 0.03);
    assert_true(rel_err(est_i, 20000) <= 0.05);
    for (uint64_t i = 0; i < 200000; i++) {
        unsigned char key[8];
        key_u64(i < 100000 ? i : KEYS_ABSENT_BASE + i, key);
        assert_int_equal(bf_filter_contains(fa, key, 8),
                         bf_filter_contains(fc, key, 8));
    }
    free(da);
    free(dc);

    /* Merging b again, or an empty filter, changes nothing. */
    bf_blocked *empty = blocked(100000, 1e-3, SEED);
    assert_int_equal(bf_blocked_merge(a, b, err, sizeof err), BF_OK);
    assert_int_equal(bf_blocked_merge(a, empty, err, sizeof err), BF_OK);
    da = layer_copy(fa, 0, &sa);
    dc = layer_copy(fc, 0, &sc);
    assert_memory_equal(da, dc, sa);
    free(da);
    free(dc);
    bf_blocked_destroy(empty);
    bf_blocked_destroy(b);

    /* The same through bf_filter_merge. */
    bf_filter *f1 = bf_filter_from_blocked(blocked(100000, 1e-3, SEED));
    bf_filter *f2 = bf_filter_from_blocked(blocked(100000, 1e-3, SEED));
    fill_range(bf_filter_blocked(f1), 0, 50000);
    fill_range(bf_filter_blocked(f2), 50000, 100000);
    assert_int_equal(bf_filter_merge(f1, f2, err, sizeof err), BF_OK);
    da = layer_copy(f1, 0, &sa);
    dc = layer_copy(fc, 0, &sc);
    assert_memory_equal(da, dc, sa);
    bf_info i1;
    bf_filter_info(f1, &i1);
    assert_int_equal(i1.cells_set, ic.cells_set);
    free(da);
    free(dc);
    bf_filter_destroy(f1);
    bf_filter_destroy(f2);
    bf_filter_destroy(fa);
    bf_filter_destroy(fc);
}

static void test_union_intersection_estimates(void **state)
{
    (void)state;
    char err[256];
    const uint64_t size = 100000;
    const double overlaps[] = {0.0, 0.25, 0.5, 0.75, 1.0};
    for (size_t oi = 0; oi < 5; oi++) {
        /* Room for the union at fill <= 0.5: capacity 2 * size. */
        bf_blocked *a = blocked(2 * size, 1e-3, SEED);
        bf_blocked *b = blocked(2 * size, 1e-3, SEED);
        uint64_t shift = (uint64_t)((1.0 - overlaps[oi]) * (double)size);
        fill_range(a, 0, size);
        fill_range(b, shift, shift + size);
        double true_u = (double)(size + shift), true_i = (double)(size - shift);
        bf_filter *fa = bf_filter_from_blocked(a);
        keys_membuf before = {0}, after = {0};
        assert_int_equal(keys_serialize(fa, &before), BF_OK);
        double u = -1, x = -1;
        assert_int_equal(bf_blocked_estimate_union(a, b, &u, err, sizeof err),
                         BF_OK);
        assert_int_equal(
            bf_blocked_estimate_intersection(a, b, &x, err, sizeof err), BF_OK);
        /* Estimating changes neither filter. */
        assert_int_equal(keys_serialize(fa, &after), BF_OK);
        assert_int_equal(before.len, after.len);
        assert_memory_equal(before.data, after.data, before.len);
        print_message("[  EST     ] |A|=|B|=%llu overlap=%.0f%%: union %.0f "
                      "(true %.0f, %+.3f%%), intersection %.0f (true %.0f)\n",
                      (unsigned long long)size, 100 * overlaps[oi], u, true_u,
                      100 * (u - true_u) / true_u, x, true_i);
        assert_true(rel_err(u, true_u) <= 0.03);
        if (true_i >= 0.25 * (double)size)
            assert_true(rel_err(x, true_i) <= 0.05);
        else
            assert_true(fabs(x - true_i) <= 0.01 * true_u);
        /* Symmetric. */
        double u2 = -1, x2 = -1;
        assert_int_equal(bf_blocked_estimate_union(b, a, &u2, err, sizeof err),
                         BF_OK);
        assert_int_equal(
            bf_blocked_estimate_intersection(b, a, &x2, err, sizeof err),
            BF_OK);
        assert_true(rel_err(u2, u) < 1e-12);
        assert_true(fabs(x2 - x) <= 1e-9 * true_u);
        keys_membuf_free(&before);
        keys_membuf_free(&after);
        bf_filter_destroy(fa);
        bf_blocked_destroy(b);
    }
}

/* Scalable: layer by layer, bit for bit the OR of the two. */
static void test_merge_scalable(void **state)
{
    (void)state;
    char err[256];
    bf_scalable_params prm;
    bf_scalable_params_default(&prm);
    prm.initial_capacity = 1000;
    prm.fpr = 1e-3;
    prm.seed = SEED;
    bf_filter *fa =
        bf_filter_from_scalable(bf_scalable_new(&prm, err, sizeof err));
    bf_filter *fb =
        bf_filter_from_scalable(bf_scalable_new(&prm, err, sizeof err));
    assert_non_null(fa);
    assert_non_null(fb);
    /* 5000 and 6000 new keys: both open 3 layers (1000 + 2000 + 4000). */
    for (uint64_t i = 0; i < 11000; i++) {
        unsigned char key[8];
        key_u64(i, key);
        assert_true(bf_filter_add(i < 5000 ? fa : fb, key, 8) >= 0);
    }
    bf_info ia, ib;
    bf_filter_info(fa, &ia);
    bf_filter_info(fb, &ib);
    assert_int_equal(ia.layers, 3);
    assert_int_equal(ib.layers, 3);
    unsigned char *want[3];
    uint64_t sz[3];
    for (uint32_t l = 0; l < 3; l++) {
        uint64_t s2;
        want[l] = layer_copy(fa, l, &sz[l]);
        unsigned char *o = layer_copy(fb, l, &s2);
        assert_int_equal(sz[l], s2);
        for (uint64_t j = 0; j < s2; j++)
            want[l][j] |= o[j];
        free(o);
    }
    assert_int_equal(bf_filter_merge(fa, fb, err, sizeof err), BF_OK);
    bf_info im;
    bf_filter_info(fa, &im);
    assert_int_equal(im.layers, 3);
    uint64_t set = 0;
    for (uint32_t l = 0; l < 3; l++) {
        uint64_t s2;
        unsigned char *got = layer_copy(fa, l, &s2);
        assert_int_equal(s2, sz[l]);
        assert_memory_equal(got, want[l], s2);
        set += keys_popcount(got, s2);
        free(got);
        free(want[l]);
    }
    assert_int_equal(im.cells_set, set);
    for (uint64_t i = 0; i < 11000; i++) {
        unsigned char key[8];
        key_u64(i, key);
        assert_true(bf_filter_contains(fa, key, 8));
    }
    /* It keeps working as a scalable filter afterwards. */
    for (uint64_t i = 11000; i < 100000; i++) {
        unsigned char key[8];
        key_u64(i, key);
        assert_true(bf_filter_add(fa, key, 8) >= 0);
    }
    for (uint64_t i = 0; i < 100000; i++) {
        unsigned char key[8];
        key_u64(i, key);
        assert_true(bf_filter_contains(fa, key, 8));
    }
    bf_filter_destroy(fa);
    bf_filter_destroy(fb);
}

/* Counting: the merged filter holds both multisets, so removing one set's
 * keys afterwards loses none of the other's. */
static void test_merge_counting(void **state)
{
    (void)state;
    char err[256];
    bf_filter *fa = bf_filter_from_counting(
        bf_counting_new(100000, 1e-3, SEED, err, sizeof err));
    bf_filter *fb = bf_filter_from_counting(
        bf_counting_new(100000, 1e-3, SEED, err, sizeof err));
    assert_non_null(fa);
    assert_non_null(fb);
    bf_counting *a = bf_filter_counting(fa), *b = bf_filter_counting(fb);
    for (uint64_t i = 0; i < 80000; i++) {
        unsigned char key[8];
        key_u64(i, key);
        bf_counting_add(i < 40000 ? a : b, key, 8);
    }
    assert_int_equal(bf_filter_merge(fa, fb, err, sizeof err), BF_OK);
    for (uint64_t i = 0; i < 80000; i++) {
        unsigned char key[8];
        key_u64(i, key);
        assert_true(bf_counting_contains(a, key, 8));
    }
    for (uint64_t i = 0; i < 40000; i++) {
        unsigned char key[8];
        key_u64(i, key);
        assert_true(bf_counting_remove(a, key, 8));
    }
    for (uint64_t i = 40000; i < 80000; i++) {
        unsigned char key[8];
        key_u64(i, key);
        if (!bf_counting_contains(a, key, 8))
            fail_msg("key %llu of the merged-in filter lost after removing "
                     "the other filter's keys",
                     (unsigned long long)i);
    }
    /* And then it is b exactly (no counter saturated at this load). */
    assert_int_equal(bf_counting_saturated(a), 0);
    uint64_t s1, s2;
    unsigned char *d1 = layer_copy(fa, 0, &s1), *d2 = layer_copy(fb, 0, &s2);
    assert_int_equal(s1, s2);
    assert_memory_equal(d1, d2, s1);
    free(d1);
    free(d2);
    bf_filter_destroy(fa);
    bf_filter_destroy(fb);
}

/* ------------------------------------------------------------------------ */
/* Refusals                                                                  */

/* dst's serialized bytes before and after a refused merge are equal. */
static void expect_refused(bf_filter *dst, const bf_filter *src,
                           const char *word1, const char *word2)
{
    keys_membuf before = {0}, after = {0};
    assert_int_equal(keys_serialize(dst, &before), BF_OK);
    char err[256] = "";
    assert_int_equal(bf_filter_merge(dst, src, err, sizeof err),
                     BF_ERR_INCOMPATIBLE);
    if (!keys_errstr_has_any(err, word1, word2, (const char *)NULL))
        fail_msg("merge refused with \"%s\": expected it to say \"%s\"%s%s",
                 err, word1, word2 ? " or " : "", word2 ? word2 : "");
    assert_int_equal(keys_serialize(dst, &after), BF_OK);
    assert_int_equal(before.len, after.len);
    assert_memory_equal(before.data, after.data, before.len);
    keys_membuf_free(&before);
    keys_membuf_free(&after);
}

static void test_incompatible_refused(void **state)
{
    (void)state;
    char err[256];
    bf_blocked *base = blocked(10000, 1e-3, SEED);
    fill_range(base, 0, 5000);
    bf_filter *fbase = bf_filter_from_blocked(base);
    bf_info bi;
    bf_blocked_info(base, &bi);
    uint64_t nb = bi.cells / BF_BLOCK_BITS;

    /* Different block count. */
    bf_blocked *other = blocked(20000, 1e-3, SEED);
    fill_range(other, 0, 10);
    err[0] = '\0';
    assert_int_equal(bf_blocked_merge(base, other, err, sizeof err),
                     BF_ERR_INCOMPATIBLE);
    assert_true(
        keys_errstr_has_any(err, "geometry", "block", (const char *)NULL));
    double out = -1;
    err[0] = '\0';
    assert_int_equal(
        bf_blocked_estimate_union(base, other, &out, err, sizeof err),
        BF_ERR_INCOMPATIBLE);
    assert_true(strlen(err) > 0);
    err[0] = '\0';
    assert_int_equal(
        bf_blocked_estimate_intersection(base, other, &out, err, sizeof err),
        BF_ERR_INCOMPATIBLE);
    assert_true(strlen(err) > 0);
    bf_filter *fo = bf_filter_from_blocked(other);
    expect_refused(fbase, fo, "geometry", "block");
    bf_filter_destroy(fo);

    /* Same blocks, different k. */
    other = bf_blocked_new_geometry(nb, bi.k + 1, SEED, err, sizeof err);
    assert_non_null(other);
    fill_range(other, 0, 10);
    fo = bf_filter_from_blocked(other);
    expect_refused(fbase, fo, "geometry", "k=");
    bf_filter_destroy(fo);

    /* Same geometry, different seed. */
    other = bf_blocked_new_geometry(nb, bi.k, SEED + 1, err, sizeof err);
    assert_non_null(other);
    fill_range(other, 0, 10);
    err[0] = '\0';
    assert_int_equal(
        bf_blocked_estimate_union(base, other, &out, err, sizeof err),
        BF_ERR_INCOMPATIBLE);
    assert_true(keys_errstr_has_any(err, "seed", (const char *)NULL));
    fo = bf_filter_from_blocked(other);
    expect_refused(fbase, fo, "seed", NULL);
    bf_filter_destroy(fo);

    /* Different kinds. */
    bf_filter *fc = bf_filter_from_counting(
        bf_counting_new(10000, 1e-3, SEED, err, sizeof err));
    assert_non_null(fc);
    expect_refused(fbase, fc, "kind", "counting");
    expect_refused(fc, fbase, "kind", "blocked");

    /* Counting: different seed. */
    bf_filter *fc2 = bf_filter_from_counting(
        bf_counting_new(10000, 1e-3, SEED + 1, err, sizeof err));
    assert_non_null(fc2);
    expect_refused(fc, fc2, "seed", NULL);
    bf_filter_destroy(fc2);
    /* Counting: different geometry. */
    fc2 = bf_filter_from_counting(
        bf_counting_new(30000, 1e-3, SEED, err, sizeof err));
    assert_non_null(fc2);
    expect_refused(fc, fc2, "geometry", "block");
    bf_filter_destroy(fc2);

    /* Scalable: different layer counts, different seeds. */
    bf_scalable_params prm;
    bf_scalable_params_default(&prm);
    prm.initial_capacity = 100;
    prm.fpr = 1e-3;
    prm.seed = SEED;
    bf_filter *s1 =
        bf_filter_from_scalable(bf_scalable_new(&prm, err, sizeof err));
    bf_filter *s2 =
        bf_filter_from_scalable(bf_scalable_new(&prm, err, sizeof err));
    prm.seed = SEED + 1;
    bf_filter *s3 =
        bf_filter_from_scalable(bf_scalable_new(&prm, err, sizeof err));
    assert_non_null(s1);
    assert_non_null(s2);
    assert_non_null(s3);
    for (uint64_t i = 0; i < 1000; i++) {
        unsigned char key[8];
        key_u64(i, key);
        assert_true(bf_filter_add(s1, key, 8) >= 0); /* 4 layers */
        if (i < 50) {
            assert_true(bf_filter_add(s2, key, 8) >= 0); /* 1 layer */
            assert_true(bf_filter_add(s3, key, 8) >= 0);
        }
    }
    expect_refused(s1, s2, "layer", NULL);
    expect_refused(s2, s1, "layer", NULL);
    expect_refused(s2, s3, "seed", NULL);
    expect_refused(s2, fbase, "kind", "blocked");
    bf_filter_destroy(s1);
    bf_filter_destroy(s2);
    bf_filter_destroy(s3);
    bf_filter_destroy(fc);
    bf_filter_destroy(fbase);
}

int main(int argc, char **argv)
{
    /* An optional argument runs only the tests matching it (a glob). */
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_estimate_formulas),
        cmocka_unit_test(test_est_keys_blocked),
        cmocka_unit_test(test_est_keys_counting_and_scalable),
        cmocka_unit_test(test_merge_is_union_blocked),
        cmocka_unit_test(test_union_intersection_estimates),
        cmocka_unit_test(test_merge_scalable),
        cmocka_unit_test(test_merge_counting),
        cmocka_unit_test(test_incompatible_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
