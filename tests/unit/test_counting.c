/*
 * test_counting.c -- the counting filter (bf_counting): 128 four-bit
 * saturating counters per cache line, for blocklists updated live.
 *
 * What must hold:
 *   - no false negatives over millions of keys (key and `_h` forms), and none
 *     for keys still present after other added keys were removed, over many
 *     rounds of churn;
 *   - add/remove round trip: removing every added key empties the filter
 *     (except counters that saturated, which stay 15 for ever);
 *   - remove of a key the filter says is absent is a no-op returning false
 *     (the serialized bytes do not change);
 *   - saturation: a key added more than 15 times and removed 16+ times is
 *     still present, its counters stay at 15;
 *   - a removed key is as absent as a never-inserted one: the measured rate
 *     on removed keys and on never-inserted keys stays under p within the
 *     Poisson tolerance of harness/keys.h;
 *   - cells_set and bf_counting_saturated() count the non-zero and the
 *     saturated counters of the serialized cell array.
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

#define SEED UINT64_C(0xc0c0a1f0f0e1d2c3)

static bf_counting *make(uint64_t cap, double p)
{
    char err[256] = "";
    bf_counting *cf = bf_counting_new(cap, p, SEED, err, sizeof err);
    if (!cf)
        fail_msg("bf_counting_new(%llu, %g): %s", (unsigned long long)cap, p,
                 err);
    return cf;
}

/* Saturated counters in the serialized cell array of a counting filter. */
static uint64_t nibbles_at_15(const unsigned char *p, size_t len)
{
    uint64_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += (uint64_t)((p[i] & 0x0f) == 0x0f) +
             (uint64_t)((p[i] & 0xf0) == 0xf0);
    return n;
}

/* Serializes a counting filter (wrapped and unwrapped again is not
 * possible, so the caller passes the bf_filter that owns it). */
static void cells_of(bf_filter *f, keys_membuf *m, const unsigned char **data,
                     uint64_t *size)
{
    assert_int_equal(keys_serialize(f, m), BF_OK);
    assert_true(keys_layer_data(m->data, m->len, 0, data, size));
}

/* ------------------------------------------------------------------------ */

static void test_params_and_info(void **state)
{
    (void)state;
    char err[256];
    const struct {
        uint64_t cap;
        double p;
    } bad[] = {{0, 0.01}, {100, 0}, {100, 0.7}, {100, NAN}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        assert_null(
            bf_counting_new(bad[i].cap, bad[i].p, SEED, err, sizeof err));
        assert_true(strlen(err) > 0);
    }
    bf_counting_destroy(NULL);

    bf_counting *cf = make(50000, 1e-3);
    uint64_t nb = 0;
    uint32_t k = 0;
    assert_int_equal(bf_size_for(50000, 1e-3, BF_COUNTING_BLOCK_CELLS, &nb, &k),
                     BF_OK);
    assert_true(bf_counting_seed(cf) == SEED);
    bf_info info;
    bf_counting_info(cf, &info);
    assert_int_equal(info.kind, BF_KIND_COUNTING);
    assert_int_equal(info.hash_id, BF_HASH_XXH3_128);
    assert_true(info.seed == SEED);
    assert_int_equal(info.capacity, 50000);
    assert_true(info.fpr_target == 1e-3);
    assert_int_equal(info.layers, 1);
    assert_int_equal(info.k, k);
    assert_int_equal(info.cells, nb * BF_COUNTING_BLOCK_CELLS);
    assert_int_equal(info.bytes, nb * 64);
    assert_int_equal(info.cells_set, 0);
    assert_true(info.fill == 0.0);
    assert_int_equal(bf_counting_saturated(cf), 0);
    print_message("[  SIZE    ] counting p=1e-3: k=%u, %.2f counters/key, "
                  "%.2f bits/key\n",
                  info.k, (double)info.cells / 50000.0,
                  8.0 * (double)info.bytes / 50000.0);

    bf_filter *f = bf_filter_from_counting(cf);
    assert_non_null(f);
    assert_ptr_equal(bf_filter_counting(f), cf);
    assert_null(bf_filter_blocked(f));
    assert_int_equal(bf_filter_kind(f), BF_KIND_COUNTING);
    keys_membuf m = {0};
    for (uint64_t i = 0; i < 50000; i++) {
        unsigned char key[8];
        key_u64(i, key);
        bool was = bf_counting_contains(cf, key, 8);
        assert_int_equal(bf_counting_add(cf, key, 8), !was);
        if (i % 5 == 0) /* some keys twice */
            assert_false(bf_counting_add(cf, key, 8));
    }
    bf_counting_info(cf, &info);
    const unsigned char *data = NULL;
    uint64_t size = 0;
    cells_of(f, &m, &data, &size);
    assert_int_equal(size, info.bytes);
    assert_int_equal(keys_nonzero_nibbles(data, size), info.cells_set);
    assert_int_equal(nibbles_at_15(data, size), bf_counting_saturated(cf));
    assert_true(fabs(info.fill - (double)info.cells_set / (double)info.cells) <
                1e-12);
    bf_info fi;
    bf_filter_info(f, &fi);
    assert_memory_equal(&fi, &info, sizeof fi);
    keys_membuf_free(&m);
    bf_filter_destroy(f);
}

static void test_min_count(void **state)
{
    (void)state;
    bf_counting *cf = make(1000, 1e-3);
    bf_hash h = bf_hash_key("dup", 3, SEED);
    assert_int_equal(bf_counting_min_count_h(cf, h), 0);
    for (unsigned j = 1; j <= 20; j++) {
        bool r = bf_counting_add_h(cf, h);
        assert_int_equal(r, j == 1);
        assert_int_equal(bf_counting_min_count_h(cf, h), j < 15 ? j : 15);
    }
    bf_counting_destroy(cf);

    /* Twice added, once removed: still present; twice removed: gone (the
     * filter is otherwise empty, so exactly absent). */
    cf = make(1000, 1e-3);
    assert_true(bf_counting_add(cf, "a", 1));
    assert_false(bf_counting_add(cf, "a", 1));
    assert_true(bf_counting_remove(cf, "a", 1));
    assert_true(bf_counting_contains(cf, "a", 1));
    assert_int_equal(bf_counting_min_count_h(cf, bf_hash_key("a", 1, SEED)), 1);
    assert_true(bf_counting_remove(cf, "a", 1));
    assert_false(bf_counting_contains(cf, "a", 1));
    assert_false(bf_counting_remove(cf, "a", 1));
    bf_info info;
    bf_counting_info(cf, &info);
    assert_int_equal(info.cells_set, 0);
    bf_counting_destroy(cf);
}

static void test_add_remove_round_trip(void **state)
{
    (void)state;
    const uint64_t n = 200000;
    bf_counting *cf = make(n, 1e-3);
    unsigned char key[32];
    for (uint64_t i = 0; i < n; i++) {
        size_t len = key_make((int)(i & 1), i, key);
        if (i & 2)
            bf_counting_add_h(cf, bf_hash_key(key, len, SEED));
        else
            bf_counting_add(cf, key, len);
    }
    for (uint64_t i = 0; i < n; i++) {
        size_t len = key_make((int)(i & 1), i, key);
        assert_true(bf_counting_contains(cf, key, len));
    }
    uint64_t sat = bf_counting_saturated(cf);
    for (uint64_t i = 0; i < n; i++) {
        size_t len = key_make((int)(i & 1), i, key);
        bool r = (i & 4) ? bf_counting_remove_h(cf, bf_hash_key(key, len, SEED))
                         : bf_counting_remove(cf, key, len);
        if (!r)
            fail_msg("remove of added key %llu returned false",
                     (unsigned long long)i);
    }
    /* Everything is back to zero except counters that saturated. */
    bf_info info;
    bf_counting_info(cf, &info);
    assert_int_equal(bf_counting_saturated(cf), sat);
    assert_int_equal(info.cells_set, sat);
    if (sat == 0) {
        for (uint64_t i = 0; i < n; i++) {
            size_t len = key_make((int)(i & 1), i, key);
            assert_false(bf_counting_contains(cf, key, len));
        }
    }
    print_message("[  INFO    ] counting round trip: %llu keys, %llu "
                  "saturated counters\n",
                  (unsigned long long)n, (unsigned long long)sat);
    bf_counting_destroy(cf);
}

static void test_remove_absent_is_noop(void **state)
{
    (void)state;
    bf_counting *cf = make(20000, 1e-2);
    assert_false(bf_counting_remove(cf, "nothing", 7)); /* empty filter */
    bf_filter *f = bf_filter_from_counting(cf);
    for (uint64_t i = 0; i < 30000; i++) { /* over capacity: many FPs */
        unsigned char key[8];
        key_u64(i, key);
        bf_counting_add(cf, key, 8);
    }
    keys_membuf before = {0}, after = {0};
    assert_int_equal(keys_serialize(f, &before), BF_OK);
    uint64_t tried = 0, fps = 0;
    for (uint64_t i = KEYS_ABSENT_BASE; i < KEYS_ABSENT_BASE + 200000; i++) {
        unsigned char key[8];
        key_u64(i, key);
        bf_hash h = bf_hash_key(key, 8, SEED);
        if (bf_counting_contains_h(cf, h)) {
            fps++; /* removing it would hurt other keys: not done */
            continue;
        }
        tried++;
        assert_false((i & 1) ? bf_counting_remove_h(cf, h)
                             : bf_counting_remove(cf, key, 8));
    }
    assert_int_equal(keys_serialize(f, &after), BF_OK);
    assert_int_equal(before.len, after.len);
    assert_memory_equal(before.data, after.data, before.len);
    assert_true(tried > 100000 && fps > 0);
    /* And every added key is still there. */
    for (uint64_t i = 0; i < 30000; i++) {
        unsigned char key[8];
        key_u64(i, key);
        assert_true(bf_counting_contains(cf, key, 8));
    }
    keys_membuf_free(&before);
    keys_membuf_free(&after);
    bf_filter_destroy(f);
}

static void test_saturation_never_decrements(void **state)
{
    (void)state;
    bf_counting *cf = make(10000, 1e-3);
    /* Other keys first. */
    for (uint64_t i = 0; i < 10000; i++) {
        unsigned char key[8];
        key_u64(i, key);
        bf_counting_add(cf, key, 8);
    }
    const char *x = "saturating-key";
    bf_hash hx = bf_hash_key(x, strlen(x), SEED);
    for (int j = 0; j < 20; j++) /* > 15 times */
        bf_counting_add(cf, x, strlen(x));
    assert_int_equal(bf_counting_min_count_h(cf, hx), 15);
    uint64_t sat = bf_counting_saturated(cf);
    bf_info info;
    bf_counting_info(cf, &info);
    assert_true(sat >= 1 && sat <= info.k + 10);
    for (int j = 0; j < 25; j++) { /* 16+ removes */
        assert_true(bf_counting_remove(cf, x, strlen(x)));
        assert_true(bf_counting_contains(cf, x, strlen(x)));
        assert_true(bf_counting_contains_h(cf, hx));
    }
    assert_int_equal(bf_counting_min_count_h(cf, hx), 15);
    assert_int_equal(bf_counting_saturated(cf), sat);
    /* Removing the other keys leaves x, and no added key was lost on the
     * way (each is checked before its own removal). */
    for (uint64_t i = 0; i < 10000; i++) {
        unsigned char key[8];
        key_u64(i, key);
        assert_true(bf_counting_contains(cf, key, 8));
        assert_true(bf_counting_remove(cf, key, 8));
    }
    assert_true(bf_counting_contains(cf, x, strlen(x)));
    bf_counting_info(cf, &info);
    assert_int_equal(info.cells_set, bf_counting_saturated(cf));
    bf_counting_destroy(cf);
}

/* Live blocklist churn: every round adds a batch of new keys and removes the
 * batch added two rounds earlier.  Present keys: never a false negative.
 * Removed keys: as absent as never-inserted ones (rate under p). */
static void test_churn(void **state)
{
    (void)state;
    const uint64_t batch = 30000, rounds = 40;
    const double p = 1e-3;
    bf_counting *cf = make(3 * batch, p); /* never more than 3 batches in */
    uint64_t removed_fp = 0, removed_checked = 0;
    for (uint64_t r = 0; r < rounds; r++) {
        char key[32];
        for (uint64_t i = r * batch; i < (r + 1) * batch; i++) {
            size_t len = key_str(i, key, sizeof key);
            bf_counting_add(cf, key, len);
        }
        if (r >= 2) {
            for (uint64_t i = (r - 2) * batch; i < (r - 1) * batch; i++) {
                size_t len = key_str(i, key, sizeof key);
                if (!bf_counting_remove(cf, key, len))
                    fail_msg("round %llu: remove of added key %llu said "
                             "absent",
                             (unsigned long long)r, (unsigned long long)i);
            }
        }
        /* Present: batches r-1 and r. */
        uint64_t first = r >= 1 ? (r - 1) * batch : 0;
        for (uint64_t i = first; i < (r + 1) * batch; i++) {
            size_t len = key_str(i, key, sizeof key);
            if (!bf_counting_contains(cf, key, len))
                fail_msg("round %llu: false negative for key %llu",
                         (unsigned long long)r, (unsigned long long)i);
        }
        /* The batch just removed. */
        if (r >= 2) {
            for (uint64_t i = (r - 2) * batch; i < (r - 1) * batch; i++) {
                size_t len = key_str(i, key, sizeof key);
                removed_fp += bf_counting_contains(cf, key, len);
                removed_checked++;
            }
        }
    }
    assert_int_equal(bf_counting_saturated(cf), 0);
    assert_true(keys_fpr_within("counting: removed keys after churn",
                                removed_fp, removed_checked, p));
    /* Remove the last two batches: the filter is empty again. */
    for (uint64_t i = (rounds - 2) * batch; i < rounds * batch; i++) {
        char key[32];
        size_t len = key_str(i, key, sizeof key);
        assert_true(bf_counting_remove(cf, key, len));
    }
    bf_info info;
    bf_counting_info(cf, &info);
    assert_int_equal(info.cells_set, 0);
    bf_counting_destroy(cf);
}

static void test_no_false_negatives_millions(void **state)
{
    (void)state;
    const uint64_t n = 2000000;
    bf_counting *cf = make(n, 1e-3);
    unsigned char key[8];
    for (uint64_t i = 0; i < n; i++) {
        key_u64(i, key);
        if (i & 1)
            bf_counting_add_h(cf, bf_hash_key(key, 8, SEED));
        else
            bf_counting_add(cf, key, 8);
    }
    uint64_t missing = 0;
    for (uint64_t i = 0; i < n; i++) {
        key_u64(i, key);
        missing += !bf_counting_contains(cf, key, 8);
        missing += !bf_counting_contains_h(cf, bf_hash_key(key, 8, SEED));
        assert_true(bf_counting_min_count_h(cf, bf_hash_key(key, 8, SEED)) >=
                    1);
    }
    assert_int_equal(missing, 0);
    bf_counting_destroy(cf);
}

static void check_fpr(double p, uint64_t cap, uint64_t queries)
{
    bf_counting *cf = make(cap, p);
    unsigned char key[8];
    for (uint64_t i = 0; i < cap; i++) {
        key_u64(i, key);
        bf_counting_add(cf, key, 8);
    }
    uint64_t fp = 0;
    for (uint64_t i = 0; i < queries; i++) {
        key_u64(KEYS_ABSENT_BASE + i, key);
        fp += bf_counting_contains(cf, key, 8);
    }
    bf_info info;
    bf_counting_info(cf, &info);
    char what[128];
    snprintf(what, sizeof what, "counting cap=%llu k=%u counters/key=%.2f",
             (unsigned long long)cap, info.k, (double)info.cells / (double)cap);
    bf_counting_destroy(cf);
    assert_true(keys_fpr_within(what, fp, queries, p));
}

static void test_fpr_1e2(void **state)
{
    (void)state;
    check_fpr(1e-2, 1000000, 1000000);
}

static void test_fpr_1e4(void **state)
{
    (void)state;
    check_fpr(1e-4, 1000000, 3000000);
}

int main(int argc, char **argv)
{
    /* An optional argument runs only the tests matching it (a glob). */
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_params_and_info),
        cmocka_unit_test(test_min_count),
        cmocka_unit_test(test_add_remove_round_trip),
        cmocka_unit_test(test_remove_absent_is_noop),
        cmocka_unit_test(test_saturation_never_decrements),
        cmocka_unit_test(test_churn),
        cmocka_unit_test(test_no_false_negatives_millions),
        cmocka_unit_test(test_fpr_1e2),
        cmocka_unit_test(test_fpr_1e4),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
