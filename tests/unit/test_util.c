/*
 * test_util.c -- stage/base/util.c's growing array (bs_grow): the capacity it
 * picks, the array it keeps, and what it leaves untouched when the size
 * would overflow.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/util.h"

#include <stdlib.h>

static void test_grow_doubles_from_first(void **state)
{
    (void)state;
    size_t cap = 0;
    int *a = bs_grow(NULL, &cap, 1, sizeof(*a), 16);
    assert_non_null(a);
    assert_int_equal(cap, 16);
    for (int i = 0; i < 16; i++)
        a[i] = i;
    /* Room enough: the same array, the same capacity. */
    assert_ptr_equal(bs_grow(a, &cap, 16, sizeof(*a), 16), a);
    assert_int_equal(cap, 16);
    /* One more: doubled, the contents kept. */
    a = bs_grow(a, &cap, 17, sizeof(*a), 16);
    assert_non_null(a);
    assert_int_equal(cap, 32);
    for (int i = 0; i < 16; i++)
        assert_int_equal(a[i], i);
    /* Far more: doubled until it holds them. */
    a = bs_grow(a, &cap, 1000, sizeof(*a), 16);
    assert_non_null(a);
    assert_int_equal(cap, 1024);
    assert_int_equal(a[15], 15);
    free(a);
}

static void test_grow_refuses_an_overflow(void **state)
{
    (void)state;
    size_t cap = 0;
    char *a = bs_grow(NULL, &cap, 8, 1, 8);
    assert_non_null(a);
    assert_null(bs_grow(a, &cap, SIZE_MAX / 4, 16, 8)); /* bytes overflow */
    assert_int_equal(cap, 8);
    assert_null(bs_grow(a, &cap, SIZE_MAX, 1, 8)); /* count overflows */
    assert_int_equal(cap, 8);
    a[7] = 'x'; /* still the caller's, still valid */
    free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grow_doubles_from_first),
        cmocka_unit_test(test_grow_refuses_an_overflow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
