/*
 * test_legacy_files.c -- filter files written by an earlier bloomstage keep
 * loading and answering exactly as they did.
 *
 * tests/data/make_filters.c wrote, with the library of each time:
 *   - {blocked,scalable,counting}_v1.bf: format version 1 (probe scheme 0:
 *     k distinct 9-bit probes per key), before the lane schemes;
 *   - {blocked,scalable}_v2.bf (k = 8) and {blocked16,scalable16}_v2.bf
 *     (k = 16 and more, p = 1e-6): format version 2 with every layer in
 *     64-bit lanes (scheme 1), before k = 16 moved to 32-bit lanes.
 * tests/data/<version>_answers.txt lists, per file, every key number i <
 * 20000 (key "key-<i>") that answered "maybe present" then.  Inserted keys
 * are 0..1999 (the counting filter then had every fourth one removed), so
 * the list holds the present keys and the old scheme's false positives;
 * both must come out identical, loaded by copy and in place, and a loaded
 * filter must keep working (a key added to it is found, by the old scheme,
 * and a scalable filter grows today's layers on top).  The files are never
 * regenerated: they are the record of what each version wrote.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bloomfilters.h"

#define NQUERY 20000

/* The answers file's line for `name` (<kind>_<version>.bf, its answers in
 * <version>_answers.txt): yes[i] for i < NQUERY. */
static void expected(const char *name, bool *yes)
{
    char path[1024];
    const char *v = strrchr(name, '_');
    assert_non_null(v);
    snprintf(path, sizeof path, "%s/%.*s_answers.txt", BS_TEST_DATA_DIR,
             (int)strcspn(v + 1, "."), v + 1);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    memset(yes, 0, NQUERY * sizeof(bool));
    char word[64];
    bool in = false, found = false;
    while (fscanf(f, "%63s", word) == 1) {
        if (word[0] < '0' || word[0] > '9') {
            in = !strcmp(word, name);
            found |= in;
            continue;
        }
        if (in) {
            long i = strtol(word, NULL, 10);
            assert_true(i >= 0 && i < NQUERY);
            yes[i] = true;
        }
    }
    fclose(f);
    assert_true(found);
}

static bf_filter *load(const char *name, unsigned flags)
{
    char path[1024], err[256] = "";
    snprintf(path, sizeof path, "%s/%s", BS_TEST_DATA_DIR, name);
    bf_filter *f = NULL;
    bf_err rc = bf_filter_load_file(path, flags, &f, err, sizeof err);
    if (rc != BF_OK)
        fail_msg("%s: %s", path, err);
    return f;
}

static void check_answers(const char *name, bf_kind kind, uint32_t scheme)
{
    static bool yes[NQUERY];
    expected(name, yes);
    const unsigned flags[] = {BF_LOAD_COPY, BF_LOAD_INPLACE};
    for (unsigned fl = 0; fl < 2; fl++) {
        bf_filter *f = load(name, flags[fl]);
        assert_int_equal(bf_filter_kind(f), kind);
        bf_info info;
        bf_filter_info(f, &info);
        assert_int_equal(info.scheme, scheme);
        unsigned yes_count = 0, wrong = 0;
        for (unsigned i = 0; i < NQUERY; i++) {
            char key[32];
            int n = snprintf(key, sizeof key, "key-%u", i);
            bool got = bf_filter_contains(f, key, (size_t)n);
            yes_count += got;
            if (got != yes[i] && wrong++ < 5)
                print_error("%s: key-%u answered %d, its version said %d\n",
                            name, i, got, yes[i]);
        }
        assert_int_equal(wrong, 0);
        assert_true(yes_count > 1000); /* the file did hold keys */
        bf_filter_destroy(f);
    }
}

static void test_blocked_v1(void **state)
{
    (void)state;
    check_answers("blocked_v1.bf", BF_KIND_BLOCKED, BF_SCHEME_DISTINCT);
}

static void test_scalable_v1(void **state)
{
    (void)state;
    check_answers("scalable_v1.bf", BF_KIND_SCALABLE, BF_SCHEME_DISTINCT);
}

static void test_counting_v1(void **state)
{
    (void)state;
    check_answers("counting_v1.bf", BF_KIND_COUNTING, BF_SCHEME_DISTINCT);
}

static void test_v2_64bit_lanes(void **state)
{
    (void)state;
    check_answers("blocked_v2.bf", BF_KIND_BLOCKED, BF_SCHEME_LANES);
    check_answers("scalable_v2.bf", BF_KIND_SCALABLE, BF_SCHEME_LANES);
    check_answers("blocked16_v2.bf", BF_KIND_BLOCKED, BF_SCHEME_LANES);
    check_answers("scalable16_v2.bf", BF_KIND_SCALABLE, BF_SCHEME_LANES);
    /* blocked16 is k = 16 in 64-bit lanes, what new filters no longer
     * are. */
    bf_filter *f = load("blocked16_v2.bf", BF_LOAD_COPY);
    bf_info info;
    bf_filter_info(f, &info);
    assert_int_equal(info.k, 16);
    assert_int_equal(bf_scheme_for(BF_BLOCK_BITS, 16), BF_SCHEME_LANES32);
    bf_filter_destroy(f);
}

/* An old filter loaded by copy keeps taking keys (a checkpoint of the old
 * version restored and continued): new keys are found, old ones still
 * are, and saved again it loads with the same answers. */
static void test_old_files_keep_working(void **state)
{
    (void)state;
    const char *names[] = {"blocked_v1.bf", "scalable_v1.bf",
                           "blocked16_v2.bf", "scalable16_v2.bf"};
    for (unsigned t = 0; t < sizeof names / sizeof names[0]; t++) {
        bf_filter *f = load(names[t], BF_LOAD_COPY);
        bf_info before, after;
        bf_filter_info(f, &before);
        for (unsigned i = 0; i < 3000; i++) {
            char key[32];
            int n = snprintf(key, sizeof key, "new-%u", i);
            int rc = bf_filter_add(f, key, (size_t)n);
            assert_true(rc >= 0);
        }
        bf_filter_info(f, &after);
        if (after.kind == BF_KIND_SCALABLE) { /* grown in today's schemes */
            assert_true(after.layers > before.layers);
            assert_int_equal(after.scheme,
                             bf_scheme_for(BF_BLOCK_BITS, after.k));
        }
        bf_membuf mb = {0};
        assert_int_equal(bf_filter_serialize(f, bf_membuf_write, &mb), BF_OK);
        bf_filter *g = NULL;
        char err[256];
        assert_int_equal(
            bf_filter_load_mem(mb.buf, mb.len, BF_LOAD_COPY, &g, err, sizeof err),
            BF_OK);
        for (unsigned i = 0; i < 3000; i++) {
            char key[32];
            int n = snprintf(key, sizeof key, "new-%u", i);
            assert_true(bf_filter_contains(f, key, (size_t)n));
            assert_true(bf_filter_contains(g, key, (size_t)n));
        }
        for (unsigned i = 0; i < NQUERY; i++) {
            char key[32];
            int n = snprintf(key, sizeof key, "key-%u", i);
            assert_int_equal(bf_filter_contains(f, key, (size_t)n),
                             bf_filter_contains(g, key, (size_t)n));
            if (i < 2000)
                assert_true(bf_filter_contains(g, key, (size_t)n));
        }
        free(mb.buf);
        bf_filter_destroy(g);
        bf_filter_destroy(f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocked_v1),
        cmocka_unit_test(test_scalable_v1),
        cmocka_unit_test(test_counting_v1),
        cmocka_unit_test(test_v2_64bit_lanes),
        cmocka_unit_test(test_old_files_keep_working),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
