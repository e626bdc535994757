/*
 * test_scalable.c -- the scalable filter (bf_scalable): a cascade of blocked
 * layers, layer i holding n0*s^i keys at error P*(1-r)*r^i.
 *
 * What must hold:
 *   - no false negatives over millions of keys, key and `_h` forms, however
 *     many layers were added;
 *   - grown more than 1000x past its initial capacity (n0 = 1000, ~2M keys,
 *     11 full layers), the measured false-positive rate over >= 1M
 *     never-inserted keys stays under the compound target P (1e-2 to
 *     1e-6, every power of ten) within the Poisson tolerance of harness/keys.h;
 *   - layers follow the documented schedule (capacity, error, "full" when
 *     inserts reach capacity), counts in bf_info add up over layers;
 *   - add_if_absent returns 1 / 0 / -BF_ERR_NOMEM as documented, and a key
 *     refused for the memory cap is not added.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "bloomfilters.h"
#include "keys.h"

#define SEED UINT64_C(0x5ca1ab1e0ddba11)

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static bf_scalable *make(uint64_t n0, double p, double s, double r,
                         uint64_t max_bytes)
{
    bf_scalable_params prm;
    bf_scalable_params_default(&prm);
    prm.initial_capacity = n0;
    prm.fpr = p;
    prm.growth = s;
    prm.tightening = r;
    prm.seed = SEED;
    prm.max_bytes = max_bytes;
    char err[256] = "";
    bf_scalable *sb = bf_scalable_new(&prm, err, sizeof err);
    if (!sb)
        fail_msg("bf_scalable_new: %s", err);
    return sb;
}

static void test_params(void **state)
{
    (void)state;
    bf_scalable_params p;
    bf_scalable_params_default(&p);
    assert_int_equal(p.initial_capacity, 100000);
    assert_true(p.fpr == 1e-6);
    assert_true(p.growth == 2.0);
    assert_true(p.tightening == 0.85);
    assert_true(p.seed == BF_DEFAULT_SEED);
    assert_int_equal(p.max_bytes, 0);

    char err[256];
    bf_scalable *sb = bf_scalable_new(&p, err, sizeof err);
    assert_non_null(sb);
    bf_scalable_params q;
    bf_scalable_params_get(sb, &q);
    assert_memory_equal(&p, &q, sizeof p);
    assert_true(bf_scalable_seed(sb) == BF_DEFAULT_SEED);
    assert_int_equal(bf_scalable_layers(sb), 1);
    bf_scalable_destroy(sb);
    bf_scalable_destroy(NULL);

    const struct {
        uint64_t n0;
        double p, s, r;
    } bad[] = {{0, 1e-3, 2, 0.85},      {1000, 0, 2, 0.85},
               {1000, 0.6, 2, 0.85},    {1000, NAN, 2, 0.85},
               {1000, 1e-3, 0.5, 0.85}, {1000, 1e-3, NAN, 0.85},
               {1000, 1e-3, 2, 0},      {1000, 1e-3, 2, 1},
               {1000, 1e-3, 2, -0.5},   {1000, 1e-3, 2, NAN}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bf_scalable_params b;
        bf_scalable_params_default(&b);
        b.initial_capacity = bad[i].n0;
        b.fpr = bad[i].p;
        b.growth = bad[i].s;
        b.tightening = bad[i].r;
        err[0] = '\0';
        assert_null(bf_scalable_new(&b, err, sizeof err));
        if (strlen(err) == 0)
            fail_msg("bad params #%zu rejected without a reason", i);
    }
    /* A cap smaller than the first layer: it cannot be honoured. */
    bf_scalable_params b;
    bf_scalable_params_default(&b);
    b.max_bytes = 64;
    err[0] = '\0';
    assert_null(bf_scalable_new(&b, err, sizeof err));
    assert_true(strlen(err) > 0);
}

/* Layers opened when n new keys went in: the fewest L with
 * n0 (s^L - 1)/(s - 1) >= n, for integer n0 * s^i. */
static uint32_t layers_for(uint64_t n0, uint64_t s, uint64_t n)
{
    uint64_t total = 0, cap = n0;
    uint32_t L = 0;
    do {
        total += cap;
        cap *= s;
        L++;
    } while (total < n);
    return L;
}

static void test_layer_schedule(void **state)
{
    (void)state;
    const uint64_t n0 = 1000;
    const double P = 1e-3, r = 0.85;
    bf_scalable *sb = make(n0, P, 2.0, r, 0);
    uint64_t fresh = 0;
    for (uint64_t i = 0; i < 300000; i++) {
        unsigned char key[8];
        key_u64(i, key);
        int rc = bf_scalable_add_if_absent(sb, key, 8);
        assert_in_range(rc, 0, 1);
        fresh += (uint64_t)rc;
        if (rc == 1)
            assert_int_equal(bf_scalable_layers(sb), layers_for(n0, 2, fresh));
    }
    uint32_t L = bf_scalable_layers(sb);
    assert_int_equal(L, layers_for(n0, 2, fresh));
    assert_int_equal(L, 9); /* 300k keys: 1000 * (2^9 - 1) = 511000 */

    bf_info sum = {0};
    for (uint32_t i = 0; i < L; i++) {
        bf_info li;
        assert_true(bf_scalable_layer_info(sb, i, &li));
        assert_int_equal(li.kind, BF_KIND_BLOCKED);
        assert_int_equal(li.layers, 1);
        assert_true(li.seed == SEED);
        assert_int_equal(li.capacity, n0 << i);
        double want = P * (1 - r) * pow(r, i);
        if (fabs(li.fpr_target - want) > 1e-9 * want)
            fail_msg("layer %u fpr %g, want %g", i, li.fpr_target, want);
        /* The layer is sized for its own target by the blocked formula. */
        assert_true(bf_blocked_fpr_expected(
                        li.cells / BF_BLOCK_BITS, BF_BLOCK_BITS, li.k,
                        (double)li.capacity) <= want * (1 + 1e-9));
        if (i + 1 < L)
            assert_int_equal(li.inserts, li.capacity); /* full */
        else
            assert_true(li.inserts >= 1 && li.inserts <= li.capacity);
        sum.capacity += li.capacity;
        sum.cells += li.cells;
        sum.bytes += li.bytes;
        sum.inserts += li.inserts;
        sum.cells_set += li.cells_set;
        sum.est_keys += li.est_keys;
    }
    bf_info none;
    assert_false(bf_scalable_layer_info(sb, L, &none));
    bf_info info;
    bf_scalable_info(sb, &info);
    assert_int_equal(info.kind, BF_KIND_SCALABLE);
    assert_int_equal(info.hash_id, BF_HASH_XXH3_128);
    assert_true(info.seed == SEED);
    assert_int_equal(info.layers, L);
    assert_true(info.fpr_target == P);
    assert_int_equal(info.capacity, sum.capacity);
    assert_int_equal(info.cells, sum.cells);
    assert_int_equal(info.bytes, sum.bytes);
    assert_int_equal(info.inserts, sum.inserts);
    assert_int_equal(info.inserts, fresh);
    assert_int_equal(info.cells_set, sum.cells_set);
    assert_true(fabs(info.est_keys - sum.est_keys) < 1e-6 * sum.est_keys);
    assert_true(fabs(info.fill - (double)info.cells_set / (double)info.cells) <
                1e-12);
    /* The compound estimate stays under the target. */
    assert_true(info.est_fpr > 0 && info.est_fpr <= P);
    /* The newest layer's k. */
    bf_info top;
    assert_true(bf_scalable_layer_info(sb, L - 1, &top));
    assert_int_equal(info.k, top.k);
    bf_scalable_destroy(sb);

    /* Non-integer growth, strong tightening: still no false negatives. */
    sb = make(100, 1e-2, 1.5, 0.5, 0);
    for (uint64_t i = 0; i < 100000; i++) {
        char key[32];
        size_t len = key_str(i, key, sizeof key);
        assert_true(bf_scalable_add_if_absent(sb, key, len) >= 0);
    }
    for (uint64_t i = 0; i < 100000; i++) {
        char key[32];
        size_t len = key_str(i, key, sizeof key);
        assert_true(bf_scalable_contains(sb, key, len));
    }
    L = bf_scalable_layers(sb);
    uint64_t cap = 0;
    for (uint32_t i = 0; i < L; i++) {
        bf_info li;
        assert_true(bf_scalable_layer_info(sb, i, &li));
        /* n0 * 1.5^i, rounded up or down but never off by more than one */
        double want = 100 * pow(1.5, i);
        assert_true(fabs((double)li.capacity - want) <= 1.0);
        cap += li.capacity;
    }
    bf_info info2;
    bf_scalable_info(sb, &info2);
    assert_true(cap >= info2.inserts);
    bf_scalable_destroy(sb);
}

static void test_no_false_negatives_millions(void **state)
{
    (void)state;
    const uint64_t n = 2000000;
    bf_scalable *sb = make(1000, 1e-4, 2.0, 0.85, 0);
    uint64_t fresh = 0;
    unsigned char key[32];
    for (uint64_t i = 0; i < n; i++) {
        size_t len = key_make(0, i, key);
        int rc =
            (i & 1)
                ? bf_scalable_add_if_absent_h(sb, bf_hash_key(key, len, SEED))
                : bf_scalable_add_if_absent(sb, key, len);
        assert_true(rc == 0 || rc == 1);
        fresh += (uint64_t)rc;
    }
    uint64_t missing = 0;
    for (uint64_t i = 0; i < n; i++) {
        size_t len = key_make(0, i, key);
        if (!bf_scalable_contains(sb, key, len) ||
            !bf_scalable_contains_h(sb, bf_hash_key(key, len, SEED)))
            missing++;
        /* Present keys are not added again. */
        if ((i & 1023) == 0)
            assert_int_equal(bf_scalable_add_if_absent(sb, key, len), 0);
    }
    if (missing)
        fail_msg("%llu of %llu inserted keys reported absent",
                 (unsigned long long)missing, (unsigned long long)n);
    bf_info info;
    bf_scalable_info(sb, &info);
    assert_int_equal(info.inserts, fresh);
    assert_true(info.layers >= 11);
    print_message("[  INFO    ] scalable n0=1000 P=1e-4: %llu keys, %u layers, "
                  "%.2f bits/key, est_keys %.0f\n",
                  (unsigned long long)n, info.layers,
                  (double)info.cells / (double)n, info.est_keys);

    /* String keys through the bf_filter wrapper. */
    bf_filter *f = bf_filter_from_scalable(make(100, 1e-3, 2.0, 0.85, 0));
    assert_non_null(f);
    assert_int_equal(bf_filter_kind(f), BF_KIND_SCALABLE);
    assert_non_null(bf_filter_scalable(f));
    for (uint64_t i = 0; i < 300000; i++) {
        size_t len = key_make(1, i, key);
        int rc = bf_filter_add(f, key, len);
        assert_true(rc == 0 || rc == 1);
    }
    for (uint64_t i = 0; i < 300000; i++) {
        size_t len = key_make(1, i, key);
        assert_true(bf_filter_contains(f, key, len));
        assert_true(bf_filter_contains_h(f, bf_hash_key(key, len, SEED)));
    }
    bf_filter_destroy(f);
    bf_scalable_destroy(sb);
}

/* ------------------------------------------------------------------------ */
/* Measured false-positive rate after growing 2000x past n0                 */

static void check_fpr(double p, uint64_t queries)
{
    const uint64_t n0 = 1000;
    /* 11 layers of 1000 * 2^i hold 2,047,000 keys: ~2M fills them all. */
    const uint64_t n = 2000000;
    bf_scalable *sb = make(n0, p, 2.0, 0.85, 0);
    unsigned char key[8];
    for (uint64_t i = 0; i < n; i++) {
        key_u64(i, key);
        assert_true(bf_scalable_add_if_absent(sb, key, 8) >= 0);
    }
    uint64_t fp = 0;
    for (uint64_t i = 0; i < queries; i++) {
        key_u64(KEYS_ABSENT_BASE + i, key);
        fp += bf_scalable_contains(sb, key, 8);
    }
    bf_info info;
    bf_scalable_info(sb, &info);
    char what[160];
    snprintf(what, sizeof what,
             "scalable n0=%llu keys=%llu (%.0fx n0) layers=%u bits/key=%.2f "
             "est_fpr=%.3g",
             (unsigned long long)n0, (unsigned long long)n,
             (double)n / (double)n0, info.layers,
             (double)info.cells / (double)info.inserts, info.est_fpr);
    bf_scalable_destroy(sb);
    assert_true(info.layers >= 11);
    assert_true(keys_fpr_within(what, fp, queries, p));
}

static void test_fpr_1e2_grown(void **state)
{
    (void)state;
    check_fpr(1e-2, 1000000);
}

static void test_fpr_1e3_grown(void **state)
{
    (void)state;
    check_fpr(1e-3, 1000000);
}

static void test_fpr_1e4_grown(void **state)
{
    (void)state;
    check_fpr(1e-4, 2000000);
}

static void test_fpr_1e5_grown(void **state)
{
    (void)state;
    /* E = 40 false positives expected at the target. */
    check_fpr(1e-5, 4000000);
}

static void test_fpr_1e6_grown(void **state)
{
    (void)state;
    /* E = 20 false positives expected at the target. */
    check_fpr(1e-6, 20000000);
}

/* ------------------------------------------------------------------------ */

static void test_add_if_absent_semantics(void **state)
{
    (void)state;
    bf_scalable *sb = make(10, 1e-2, 2.0, 0.85, 0);
    assert_false(bf_scalable_contains(sb, "k", 1));
    assert_int_equal(bf_scalable_add_if_absent(sb, "k", 1), 1);
    assert_true(bf_scalable_contains(sb, "k", 1));
    assert_int_equal(bf_scalable_add_if_absent(sb, "k", 1), 0);
    assert_int_equal(bf_scalable_add_if_absent_h(sb, bf_hash_key("k", 1, SEED)),
                     0);
    bf_info info;
    bf_scalable_info(sb, &info);
    assert_int_equal(info.inserts, 1);

    /* Over many layers: 1 exactly when the key was not maybe-present, and a
     * 0 changes nothing.  bf_scalable_info may be slow (it evaluates every
     * layer's rate formula): counters are compared on every 16th key. */
    uint64_t ones = 0, zeros = 0;
    for (uint64_t i = 0; i < 50000; i++) {
        unsigned char key[8];
        key_u64(i % 40000, key); /* the last 10000 are repeats */
        bf_info before, after;
        bool sample = (i % 16) == 0;
        if (sample)
            bf_scalable_info(sb, &before);
        bool was = bf_scalable_contains(sb, key, 8);
        uint32_t layers_before = bf_scalable_layers(sb);
        int rc = bf_scalable_add_if_absent(sb, key, 8);
        assert_int_equal(rc, was ? 0 : 1);
        assert_true(bf_scalable_contains(sb, key, 8));
        ones += rc == 1;
        zeros += rc == 0;
        if (rc == 0)
            assert_int_equal(bf_scalable_layers(sb), layers_before);
        if (!sample)
            continue;
        bf_scalable_info(sb, &after);
        if (rc == 1) {
            assert_int_equal(after.inserts, before.inserts + 1);
            assert_true(after.cells_set > before.cells_set);
        } else {
            assert_int_equal(after.inserts, before.inserts);
            assert_int_equal(after.cells_set, before.cells_set);
        }
    }
    assert_true(zeros >= 10000);
    bf_scalable_info(sb, &info);
    assert_int_equal(info.inserts, ones + 1);
    bf_scalable_destroy(sb);
}

static void test_memory_cap(void **state)
{
    (void)state;
    /* Learn the layer sizes from an uncapped filter. */
    bf_scalable *sb = make(1000, 1e-3, 2.0, 0.85, 0);
    for (uint64_t i = 0; bf_scalable_layers(sb) < 4; i++) {
        unsigned char key[8];
        key_u64(i, key);
        assert_true(bf_scalable_add_if_absent(sb, key, 8) >= 0);
    }
    uint64_t bytes3 = 0, bytes4;
    for (uint32_t i = 0; i < 3; i++) {
        bf_info li;
        assert_true(bf_scalable_layer_info(sb, i, &li));
        bytes3 += li.bytes;
    }
    bf_info l3;
    assert_true(bf_scalable_layer_info(sb, 3, &l3));
    bytes4 = bytes3 + l3.bytes;
    bf_scalable_destroy(sb);

    /* Capped between 3 and 4 layers. */
    const uint64_t cap = bytes3 + (bytes4 - bytes3) / 2;
    sb = make(1000, 1e-3, 2.0, 0.85, cap);
    uint64_t accepted = 0, i = 0;
    int rc;
    unsigned char key[8];
    for (;; i++) {
        key_u64(i, key);
        rc = bf_scalable_add_if_absent(sb, key, 8);
        if (rc < 0)
            break;
        accepted += (uint64_t)rc;
        assert_true(i < 100000);
    }
    assert_int_equal(rc, -BF_ERR_NOMEM);
    assert_int_equal(bf_scalable_layers(sb), 3);
    assert_int_equal(accepted, 7000); /* 1000 + 2000 + 4000 */
    /* The refused key was not added. */
    assert_false(bf_scalable_contains(sb, key, 8));
    bf_info info;
    bf_scalable_info(sb, &info);
    assert_true(info.bytes <= cap);
    assert_int_equal(info.inserts, 7000);
    /* Keys already in still answer 0, new ones keep being refused, and the
     * earlier keys are all there. */
    for (uint64_t j = 0; j < i; j++) {
        key_u64(j, key);
        assert_true(bf_scalable_contains(sb, key, 8));
        assert_int_equal(bf_scalable_add_if_absent(sb, key, 8), 0);
    }
    uint64_t refused = 0;
    for (uint64_t j = KEYS_ABSENT_BASE; j < KEYS_ABSENT_BASE + 1000; j++) {
        key_u64(j, key);
        bool was = bf_scalable_contains(sb, key, 8);
        rc = bf_scalable_add_if_absent(sb, key, 8);
        assert_int_equal(rc, was ? 0 : -BF_ERR_NOMEM);
        assert_int_equal(bf_scalable_contains(sb, key, 8), was);
        refused += rc < 0;
    }
    assert_true(refused > 990);

    /* Through bf_filter_add too. */
    bf_filter *f = bf_filter_from_scalable(sb);
    key_u64(KEYS_ABSENT_BASE + 5000, key);
    if (!bf_filter_contains(f, key, 8))
        assert_int_equal(bf_filter_add(f, key, 8), -BF_ERR_NOMEM);
    bf_scalable_info(bf_filter_scalable(f), &info);
    assert_int_equal(info.layers, 3);
    bf_filter_destroy(f);
}

/* A refusal at the cap costs about a lookup, so a stage whose dedup filter
 * reached its cap keeps its throughput.  Lookups take ~0.1 us (~1 us under
 * ASan); 20 us on average leaves room for a loaded machine, and catches
 * re-sizing the refused layer on every call (~400 us). */
static void test_memory_cap_refusal_is_cheap(void **state)
{
    (void)state;
    bf_scalable *sb = make(1000, 1e-3, 2.0, 0.85, 0);
    bf_info l0;
    assert_true(bf_scalable_layer_info(sb, 0, &l0));
    bf_scalable_destroy(sb);
    sb = make(1000, 1e-3, 2.0, 0.85, l0.bytes + 1); /* one layer only */
    unsigned char key[8];
    int rc = 0;
    for (uint64_t i = 0; rc >= 0; i++) {
        key_u64(i, key);
        rc = bf_scalable_add_if_absent(sb, key, 8);
        assert_true(i < 10000);
    }
    assert_int_equal(bf_scalable_layers(sb), 1);
    double t0 = now_s();
    for (uint64_t j = 0; j < 2000; j++) {
        key_u64(KEYS_ABSENT_BASE + j, key);
        rc = bf_scalable_add_if_absent(sb, key, 8);
        assert_true(rc == 0 || rc == -BF_ERR_NOMEM);
    }
    double per = (now_s() - t0) / 2000 * 1e6;
    bf_scalable_destroy(sb);
    print_message("[  INFO    ] refused add at the memory cap: %.2f us\n", per);
    if (per > 20.0)
        fail_msg("an add refused at the memory cap takes %.0f us (a lookup "
                 "takes ~0.1 us)",
                 per);
}

/* Without growth the layers run out: at most BF_MAX_LAYERS, then new keys
 * are refused (-BF_ERR_NOMEM, not added), old ones stay, and a filter with
 * the most layers serializes and loads. */
static void test_layer_limit(void **state)
{
    (void)state;
    bf_scalable *sb = make(10, 1e-2, 1.0, 0.5, 0);
    uint64_t i = 0, accepted = 0;
    int rc = 0;
    unsigned char key[8];
    for (; i < 100000; i++) {
        key_u64(i, key);
        rc = bf_scalable_add_if_absent(sb, key, 8);
        if (rc < 0)
            break;
        accepted += (uint64_t)rc;
    }
    assert_int_equal(rc, -BF_ERR_NOMEM);
    assert_false(bf_scalable_contains(sb, key, 8));
    assert_int_equal(bf_scalable_layers(sb), BF_MAX_LAYERS);
    assert_int_equal(accepted, 10 * BF_MAX_LAYERS);
    for (uint64_t j = 0; j < i; j++) {
        key_u64(j, key);
        assert_true(bf_scalable_contains(sb, key, 8));
    }
    bf_info info;
    bf_scalable_info(sb, &info);
    assert_true(info.est_fpr <= 1e-2);
    /* The compound error stays under P with the most layers: measured. */
    uint64_t fp = 0;
    for (uint64_t j = 0; j < 200000; j++) {
        key_u64(KEYS_ABSENT_BASE + j, key);
        fp += bf_scalable_contains(sb, key, 8);
    }
    assert_true(
        keys_fpr_within("scalable, 64 layers of 10 keys", fp, 200000, 1e-2));
    bf_filter *f = bf_filter_from_scalable(sb);
    keys_membuf m = {0};
    assert_int_equal(keys_serialize(f, &m), BF_OK);
    bf_filter *g = NULL;
    char err[256] = "";
    if (bf_filter_load_mem(m.data, m.len, BF_LOAD_COPY, &g, err, sizeof err) !=
        BF_OK)
        fail_msg("a filter with %u layers does not load: %s", BF_MAX_LAYERS,
                 err);
    bf_info gi;
    bf_filter_info(g, &gi);
    assert_int_equal(gi.layers, BF_MAX_LAYERS);
    key_u64(KEYS_ABSENT_BASE + 999999, key);
    if (!bf_filter_contains(g, key, 8))
        assert_int_equal(bf_filter_add(g, key, 8), -BF_ERR_NOMEM);
    bf_filter_destroy(g);
    keys_membuf_free(&m);
    bf_filter_destroy(f);
}

int main(int argc, char **argv)
{
    /* An optional argument runs only the tests matching it (a glob). */
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_params),
        cmocka_unit_test(test_layer_schedule),
        cmocka_unit_test(test_add_if_absent_semantics),
        cmocka_unit_test(test_memory_cap),
        cmocka_unit_test(test_memory_cap_refusal_is_cheap),
        cmocka_unit_test(test_layer_limit),
        cmocka_unit_test(test_no_false_negatives_millions),
        cmocka_unit_test(test_fpr_1e2_grown),
        cmocka_unit_test(test_fpr_1e3_grown),
        cmocka_unit_test(test_fpr_1e4_grown),
        cmocka_unit_test(test_fpr_1e5_grown),
        cmocka_unit_test(test_fpr_1e6_grown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
