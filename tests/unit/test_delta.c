/*
 * test_delta.c -- change tracking and deltas of blocked and scalable filters
 * (filters/delta.c, format in bloomfilters.h).
 *
 * What must hold:
 *   - a delta applied to a copy of the filter at its base makes the copy the
 *     filter bit for bit: bf_filter_serialize writes the same bytes (cells,
 *     statistics, layers), over several deltas in a row, for a blocked
 *     filter and for a scalable one that grows layers between marks;
 *   - a delta holds only the blocks changed (at most one per new key), and
 *     bf_filter_delta_size is the bytes written;
 *   - every rejection names what is wrong and leaves the filter as it was:
 *     damage anywhere ("checksum"), truncation ("truncated"), a delta
 *     applied twice or to another state ("base mismatch"), another seed, a
 *     filter changed since its mark, an untracked filter;
 *   - counting and windowed filters are not tracked, and say so.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <xxhash.h>

#include "bloomfilters.h"
#include "keys.h"

static bf_membuf serialize(const bf_filter *f)
{
    bf_membuf m = {NULL, 0, 0};
    assert_int_equal(bf_filter_serialize(f, bf_membuf_write, &m), BF_OK);
    return m;
}

static bf_membuf delta(const bf_filter *f, uint64_t mark)
{
    bf_membuf m = {NULL, 0, 0};
    assert_int_equal(bf_filter_delta_serialize(f, mark, bf_membuf_write, &m),
                     BF_OK);
    assert_int_equal(m.len, bf_filter_delta_size(f));
    return m;
}

/* A copy of f through its serialized form, tracked at `mark`. */
static bf_filter *copy_at(const bf_filter *f, uint64_t mark)
{
    bf_membuf m = serialize(f);
    bf_filter *c = NULL;
    char err[256];
    assert_int_equal(bf_filter_load_mem(m.buf, m.len, BF_LOAD_COPY, &c, err,
                                        sizeof(err)),
                     BF_OK);
    free(m.buf);
    assert_int_equal(bf_filter_track(c, mark, err, sizeof(err)), BF_OK);
    return c;
}

static void assert_same(const bf_filter *a, const bf_filter *b)
{
    bf_membuf x = serialize(a), y = serialize(b);
    assert_int_equal(x.len, y.len);
    assert_memory_equal(x.buf, y.buf, x.len);
    free(x.buf);
    free(y.buf);
}

static void add_keys(bf_filter *f, uint64_t from, uint64_t n)
{
    for (uint64_t i = from; i < from + n; i++) {
        uint8_t k[8];
        key_u64(i, k);
        assert_true(bf_filter_add(f, k, sizeof(k)) >= 0);
    }
}

/* Applies `d` to c expecting failure whose message holds `want`, and c
 * unchanged. */
static void refused(bf_filter *c, const uint8_t *d, size_t len,
                    const char *want)
{
    bf_membuf before = serialize(c);
    uint64_t mark0 = 0, mark1 = 0;
    assert_true(bf_filter_tracked(c, &mark0));
    char err[256] = "";
    assert_int_not_equal(bf_filter_delta_apply(c, d, len, err, sizeof(err)),
                         BF_OK);
    if (!strstr(err, want))
        fail_msg("expected \"%s\" in: %s", want, err);
    bf_membuf after = serialize(c);
    assert_int_equal(before.len, after.len);
    assert_memory_equal(before.buf, after.buf, before.len);
    assert_true(bf_filter_tracked(c, &mark1));
    assert_true(mark0 == mark1);
    free(before.buf);
    free(after.buf);
}

static void round_trips(bf_filter *f, uint64_t per_round)
{
    char err[256];
    assert_int_equal(bf_filter_track(f, 1, err, sizeof(err)), BF_OK);
    bf_filter *c = copy_at(f, 1);
    for (uint64_t r = 0; r < 4; r++) {
        add_keys(f, r * per_round, per_round);
        uint64_t blocks = bf_filter_delta_blocks(f);
        assert_true(blocks > 0 && blocks <= per_round);
        bf_membuf d = delta(f, r + 2);
        bf_filter_mark(f, r + 2);
        assert_int_equal(bf_filter_delta_blocks(f), 0);
        if (bf_filter_delta_apply(c, d.buf, d.len, err, sizeof(err)) != BF_OK)
            fail_msg("round %llu: %s", (unsigned long long)r, err);
        assert_same(f, c);
        uint64_t mark = 0;
        assert_true(bf_filter_tracked(c, &mark));
        assert_true(mark == r + 2);
        /* once is enough: the same delta again is refused by its base */
        refused(c, d.buf, d.len, "base mismatch");
        free(d.buf);
    }
    /* the copy keeps evolving like the original */
    add_keys(f, 1u << 20, 100);
    add_keys(c, 1u << 20, 100);
    assert_same(f, c);
    bf_filter_destroy(c);
}

static void test_blocked_round_trip(void **state)
{
    (void)state;
    bf_filter *f = bf_filter_from_blocked(
        bf_blocked_new(20000, 1e-4, BF_DEFAULT_SEED, NULL, 0));
    round_trips(f, 3000);
    bf_filter_destroy(f);
}

static void test_scalable_grows_between_marks(void **state)
{
    (void)state;
    bf_scalable_params p;
    bf_scalable_params_default(&p);
    p.initial_capacity = 1000; /* 4 x 3000 keys: several new layers */
    bf_filter *f = bf_filter_from_scalable(bf_scalable_new(&p, NULL, 0));
    round_trips(f, 3000);
    assert_true(bf_scalable_layers(bf_filter_scalable(f)) >= 4);
    bf_filter_destroy(f);
}

/* A scalable filter, a copy at mark 1, and a delta to mark 2 with new
 * layers in it. */
typedef struct fx {
    bf_filter *f, *c;
    bf_membuf d;
} fx;

static int setup(void **state)
{
    fx *x = calloc(1, sizeof(*x));
    bf_scalable_params p;
    bf_scalable_params_default(&p);
    p.initial_capacity = 500;
    x->f = bf_filter_from_scalable(bf_scalable_new(&p, NULL, 0));
    add_keys(x->f, 0, 300);
    assert_int_equal(bf_filter_track(x->f, 1, NULL, 0), BF_OK);
    x->c = copy_at(x->f, 1);
    add_keys(x->f, 300, 1500);
    x->d = delta(x->f, 2);
    *state = x;
    return 0;
}

static int teardown(void **state)
{
    fx *x = *state;
    bf_filter_destroy(x->f);
    bf_filter_destroy(x->c);
    free(x->d.buf);
    free(x);
    return 0;
}

static void test_damage_named(void **state)
{
    fx *x = *state;
    size_t len = x->d.len;
    uint8_t *d = malloc(len);
    /* a flipped bit anywhere: header, descriptors, numbers, blocks, sum */
    size_t at[] = {0, 9, 20, 40, 70, 64 + 64 * 2, len / 2, len - 20, len - 1};
    for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
        memcpy(d, x->d.buf, len);
        d[at[i]] ^= 0x10;
        const char *want = at[i] < 8                      ? "magic"
                           : at[i] < 10                   ? "version"
                           : at[i] >= 24 && at[i] < 32    ? "truncated"
                                                          : "checksum";
        refused(x->c, d, len, want);
    }
    /* cut short at every length up to past the header, and near the end */
    for (size_t n = 0; n < len; n += n < 200 ? 1 : len / 7)
        refused(x->c, x->d.buf, n, "truncated");
    refused(x->c, x->d.buf, len - 1, "truncated");
    /* structure forged with a valid checksum: still named */
    memcpy(d, x->d.buf, len);
    d[64 + 48] ^= 1; /* layer 0's changed-block count */
    keys_reseal(d, len);
    refused(x->c, d, len, "layer 0");
    /* Found by fuzz_ckpt_delta: a new layer of 2^32 blocks and no changed
     * block, a 4 GiB allocation from a few hundred bytes.  A new layer
     * must be the one the filter's own growth makes. */
    memcpy(d, x->d.buf, len);
    d[64 + 64 + 4] = 1; /* layer 1's nblocks += 2^32 */
    keys_reseal(d, len);
    refused(x->c, d, len, "new layer 1");
    memcpy(d, x->d.buf, len);
    d[8] = 9; /* a future version */
    keys_reseal(d, len);
    refused(x->c, d, len, "version");
    free(d);
    /* the intact delta still applies after all that */
    char err[256];
    assert_int_equal(bf_filter_delta_apply(x->c, x->d.buf, x->d.len, err,
                                           sizeof(err)),
                     BF_OK);
    assert_same(x->f, x->c);
}

static void test_wrong_base_named(void **state)
{
    fx *x = *state;
    char err[256];
    /* the copy moved on: at another mark */
    bf_filter_mark(x->c, 7);
    refused(x->c, x->d.buf, x->d.len, "base mismatch");
    /* right mark, but changed since */
    bf_filter_mark(x->c, 1);
    add_keys(x->c, 5000, 10);
    refused(x->c, x->d.buf, x->d.len, "changed since");
    /* another filter at the same mark (same geometry): its bits differ */
    bf_filter *o = copy_at(x->c, 1);
    bf_filter_mark(o, 1);
    refused(o, x->d.buf, x->d.len, "base mismatch");
    bf_filter_destroy(o);
    /* another seed */
    bf_scalable_params p;
    bf_scalable_params_default(&p);
    p.initial_capacity = 500;
    p.seed = 42;
    bf_filter *s = bf_filter_from_scalable(bf_scalable_new(&p, NULL, 0));
    assert_int_equal(bf_filter_track(s, 1, err, sizeof(err)), BF_OK);
    refused(s, x->d.buf, x->d.len, "seed");
    bf_filter_destroy(s);
    /* a blocked filter is not a scalable one */
    bf_filter *b = bf_filter_from_blocked(
        bf_blocked_new(500, 1e-3, BF_DEFAULT_SEED, NULL, 0));
    assert_int_equal(bf_filter_track(b, 1, err, sizeof(err)), BF_OK);
    refused(b, x->d.buf, x->d.len, "scalable");
    bf_filter_destroy(b);
    /* an untracked filter has no state to name */
    bf_filter *u = bf_filter_from_scalable(bf_scalable_new(&p, NULL, 0));
    assert_int_not_equal(bf_filter_delta_apply(u, x->d.buf, x->d.len, err,
                                               sizeof(err)),
                         BF_OK);
    assert_non_null(strstr(err, "no mark"));
    assert_int_equal(bf_filter_delta_size(u), 0);
    bf_filter_destroy(u);
}

static void test_check_alone(void **state)
{
    fx *x = *state;
    bf_delta_info in;
    char err[256];
    assert_int_equal(bf_delta_check(x->d.buf, x->d.len, &in, err,
                                    sizeof(err)),
                     BF_OK);
    assert_int_equal(in.kind, BF_KIND_SCALABLE);
    assert_true(in.base_mark == 1 && in.new_mark == 2);
    assert_int_equal(in.base_layers, 1);
    assert_true(in.layers > 1); /* 1800 keys in layers of 500, 1000, ... */
    assert_true(in.blocks > 0 && in.blocks <= 1500);
}

/* Every add path marks its block: one key at a time and batched, on every
 * instruction set this CPU has (scalar, AVX2, AVX-512 kernels for k = 8,
 * 16 and any k). */
static void test_every_add_path_tracked(void **state)
{
    (void)state;
    char start[32];
    snprintf(start, sizeof(start), "%s", bf_simd_name());
    static const char *const isas[] = {"scalar", "avx2", "avx512"};
    static const double fprs[] = {1e-2, 1e-6, 1e-9}; /* k = 8, 16, 32 */
    for (size_t i = 0; i < sizeof(isas) / sizeof(isas[0]); i++) {
        if (!bf_simd_use(isas[i]))
            continue;
        for (size_t j = 0; j < sizeof(fprs) / sizeof(fprs[0]); j++) {
            bf_filter *f = bf_filter_from_blocked(
                bf_blocked_new(5000, fprs[j], BF_DEFAULT_SEED, NULL, 0));
            assert_int_equal(bf_filter_track(f, 1, NULL, 0), BF_OK);
            bf_filter *c = copy_at(f, 1);
            bf_hash h[1000];
            for (uint64_t k = 0; k < 1000; k++)
                h[k] = bf_hash_key(&k, sizeof(k), BF_DEFAULT_SEED);
            (void)bf_blocked_add_many_h(bf_filter_blocked(f), h, 500, NULL);
            for (size_t k = 500; k < 1000; k++)
                (void)bf_blocked_add_h(bf_filter_blocked(f), h[k]);
            bf_membuf d = delta(f, 2);
            char err[256];
            if (bf_filter_delta_apply(c, d.buf, d.len, err, sizeof(err)) !=
                BF_OK)
                fail_msg("%s, fpr %g: %s", isas[i], fprs[j], err);
            assert_same(f, c);
            free(d.buf);
            bf_filter_destroy(c);
            bf_filter_destroy(f);
        }
    }
    assert_true(bf_simd_use(start));
}

static void test_untrackable_kinds(void **state)
{
    (void)state;
    char err[256];
    bf_filter *c = bf_filter_from_counting(
        bf_counting_new(100, 1e-3, BF_DEFAULT_SEED, NULL, 0));
    assert_int_equal(bf_filter_track(c, 1, err, sizeof(err)), BF_ERR_INVALID);
    assert_non_null(strstr(err, "counting"));
    assert_false(bf_filter_tracked(c, NULL));
    bf_filter_destroy(c);
    bf_windowed_params wp;
    bf_windowed_params_default(&wp);
    bf_filter *w = bf_filter_from_windowed(bf_windowed_new(&wp, NULL, 0));
    assert_int_equal(bf_filter_track(w, 1, err, sizeof(err)), BF_ERR_INVALID);
    assert_non_null(strstr(err, "windowed"));
    bf_filter_destroy(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocked_round_trip),
        cmocka_unit_test(test_scalable_grows_between_marks),
        cmocka_unit_test_setup_teardown(test_damage_named, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wrong_base_named, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_check_alone, setup, teardown),
        cmocka_unit_test(test_every_add_path_tracked),
        cmocka_unit_test(test_untrackable_kinds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
