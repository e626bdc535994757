/*
 * test_fm_key.c -- the key encoding (formats/include/fm_key.h): each kind's
 * bytes, the collisions it rules out (a string and a typed value, tuples
 * that concatenate alike), map order, and the bound.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fm_key.h>
#include <stdlib.h>
#include <string.h>

static void assert_key(const fm_key *k, const void *want, size_t n)
{
    assert_true(fm_key_ok(k));
    assert_int_equal(k->len, n);
    assert_memory_equal(k->p, want, n);
}

static void test_scalars(void **state)
{
    (void)state;
    fm_key k;
    fm_key_init(&k);
    fm_key_bytes(&k, "abc", 3);
    assert_key(&k, "abc", 3);
    fm_key_reset(&k);
    fm_key_null(&k);
    assert_key(&k, "\xffn", 2);
    fm_key_reset(&k);
    fm_key_bool(&k, true);
    assert_key(&k, "\xfft", 2);
    fm_key_reset(&k);
    fm_key_int(&k, -7);
    assert_key(&k, "\xffi-7", 4);
    fm_key_reset(&k);
    fm_key_uint(&k, UINT64_MAX);
    assert_key(&k, "\xffi18446744073709551615", 22);
    fm_key_free(&k);
}

/* One number, one key, whatever its width or form; a real that is not
 * integral keeps every digit a double needs. */
static void test_numbers_by_value(void **state)
{
    (void)state;
    fm_key a, b;
    fm_key_init(&a);
    fm_key_init(&b);
    fm_key_int(&a, 7);
    fm_key_real(&b, 7.0);
    assert_key(&b, a.p, a.len);
    fm_key_reset(&a);
    fm_key_reset(&b);
    fm_key_uint(&a, 0);
    fm_key_real(&b, -0.0);
    assert_key(&b, a.p, a.len);
    fm_key_reset(&b);
    fm_key_real(&b, 0.1);
    assert_key(&b, "\xff" "d0.10000000000000001", 21);
    fm_key_reset(&b);
    fm_key_real(&b, 9223372036854775808.0); /* 2^63: past int64 */
    assert_key(&b, "\xff" "d9.2233720368547758e+18", 24);
    fm_key_free(&a);
    fm_key_free(&b);
}

/* "7" and 7, "null" and null: two keys each. */
static void test_string_never_equals_typed(void **state)
{
    (void)state;
    fm_key s, t;
    fm_key_init(&s);
    fm_key_init(&t);
    fm_key_bytes(&s, "7", 1);
    fm_key_int(&t, 7);
    assert_false(s.len == t.len && memcmp(s.p, t.p, s.len) == 0);
    fm_key_reset(&s);
    fm_key_reset(&t);
    fm_key_bytes(&s, "null", 4);
    fm_key_null(&t);
    assert_false(s.len == t.len && memcmp(s.p, t.p, s.len) == 0);
    fm_key_free(&s);
    fm_key_free(&t);
}

static void tuple(fm_key *k, const char *a, const char *b)
{
    fm_key_reset(k);
    fm_key_compound(k, 'T');
    fm_key_mark m = fm_key_elem_begin(k);
    fm_key_bytes(k, a, strlen(a));
    fm_key_elem_end(k, m);
    m = fm_key_elem_begin(k);
    fm_key_bytes(k, b, strlen(b));
    fm_key_elem_end(k, m);
}

static void test_tuples_unambiguous(void **state)
{
    (void)state;
    fm_key x, y;
    fm_key_init(&x);
    fm_key_init(&y);
    tuple(&x, "ab", "c");
    tuple(&y, "a", "bc");
    assert_true(fm_key_ok(&x) && fm_key_ok(&y));
    assert_int_equal(x.len, y.len);
    assert_memory_not_equal(x.p, y.p, x.len);
    assert_key(&x, "\xffT\x02\0\0\0ab\x01\0\0\0c", 2 + 4 + 2 + 4 + 1);
    fm_key_free(&x);
    fm_key_free(&y);
}

static void entry(fm_key *k, const char *key, int64_t v)
{
    fm_key_mark m = fm_key_elem_begin(k);
    fm_key_bytes(k, key, strlen(key));
    fm_key_elem_end(k, m);
    m = fm_key_elem_begin(k);
    fm_key_int(k, v);
    fm_key_elem_end(k, m);
}

/* A map's entries in any order give one key. */
static void test_map_sorted(void **state)
{
    (void)state;
    fm_key x, y;
    fm_key_init(&x);
    fm_key_init(&y);
    fm_key_compound(&x, 'm');
    size_t sx = x.len;
    entry(&x, "b", 2);
    entry(&x, "a", 1);
    entry(&x, "ab", 3);
    assert_true(fm_key_map_sort(&x, sx));
    fm_key_compound(&y, 'm');
    size_t sy = y.len;
    entry(&y, "a", 1);
    entry(&y, "ab", 3);
    entry(&y, "b", 2);
    assert_true(fm_key_map_sort(&y, sy));
    assert_key(&x, y.p, y.len);
    /* An odd count of elements is no map. */
    fm_key_mark m = fm_key_elem_begin(&y);
    fm_key_bytes(&y, "c", 1);
    fm_key_elem_end(&y, m);
    assert_false(fm_key_map_sort(&y, sy));
    fm_key_free(&x);
    fm_key_free(&y);
}

/* Past FM_KEY_MAX the key fails, and stays failed until reset. */
static void test_bound(void **state)
{
    (void)state;
    size_t n = FM_KEY_MAX / 2 + 1;
    char *big = calloc(1, n);
    assert_non_null(big);
    fm_key k;
    fm_key_init(&k);
    fm_key_bytes(&k, big, n);
    assert_true(fm_key_ok(&k));
    fm_key_bytes(&k, big, n);
    assert_false(fm_key_ok(&k));
    assert_int_equal(k.len, n);
    fm_key_null(&k);
    assert_int_equal(k.len, n);
    fm_key_reset(&k);
    fm_key_null(&k);
    assert_key(&k, "\xffn", 2);
    fm_key_free(&k);
    free(big);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scalars),
        cmocka_unit_test(test_numbers_by_value),
        cmocka_unit_test(test_string_never_equals_typed),
        cmocka_unit_test(test_tuples_unambiguous),
        cmocka_unit_test(test_map_sorted),
        cmocka_unit_test(test_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
