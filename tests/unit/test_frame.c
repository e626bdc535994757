/*
 * test_frame.c -- Confluent's wire-format prefix (formats/include/
 * fm_frame.h): the schema id read big-endian, the payload after it, a
 * wrong magic byte and a short buffer named, and JSON framed or not.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fm_frame.h>
#include <string.h>

static void test_parse(void **state)
{
    (void)state;
    const uint8_t buf[] = {0, 0x01, 0x02, 0x03, 0xFE, 'x', 'y'};
    uint32_t id = 0;
    const uint8_t *rest = NULL;
    size_t n = 0;
    char err[256];
    assert_int_equal(fm_frame_parse(buf, sizeof(buf), &id, &rest, &n, err,
                                    sizeof(err)), 0);
    assert_int_equal(id, 0x010203FEu);
    assert_ptr_equal(rest, buf + 5);
    assert_int_equal(n, 2);
    assert_int_equal(fm_frame_parse(buf, 5, &id, &rest, &n, err,
                                    sizeof(err)), 0);
    assert_int_equal(n, 0);
    const uint8_t top[] = {0, 0xFF, 0xFF, 0xFF, 0xFF};
    assert_int_equal(fm_frame_parse(top, 5, &id, &rest, &n, err,
                                    sizeof(err)), 0);
    assert_int_equal(id, UINT32_MAX);
}

static void test_errors(void **state)
{
    (void)state;
    uint32_t id;
    const uint8_t *rest;
    size_t n;
    char err[256];
    assert_int_equal(fm_frame_parse("{\"a\":1}", 7, &id, &rest, &n, err,
                                    sizeof(err)), -1);
    assert_string_equal(err,
                        "not Confluent-framed: magic byte 0x7b, want 0x00");
    assert_int_equal(fm_frame_parse("\0\0\0", 3, &id, &rest, &n, err,
                                    sizeof(err)), -1);
    assert_string_equal(err, "not Confluent-framed: 3 bytes, shorter than "
                             "the 5-byte prefix (magic byte 0x00, 4-byte "
                             "schema id)");
    assert_int_equal(fm_frame_parse("", 0, &id, &rest, &n, err,
                                    sizeof(err)), -1);
    assert_non_null(strstr(err, "0 bytes"));
}

static void test_json(void **state)
{
    (void)state;
    const uint8_t *j;
    size_t n;
    uint32_t id;
    int framed;
    char err[256];
    assert_int_equal(fm_frame_json("{\"a\":1}", 7, &j, &n, &id, &framed, err,
                                   sizeof(err)), 0);
    assert_int_equal(framed, 0);
    assert_int_equal(n, 7);
    assert_int_equal(id, 0);
    assert_int_equal(fm_frame_json("\0\0\0\0\x2a{\"a\":1}", 12, &j, &n, &id,
                                   &framed, err, sizeof(err)), 0);
    assert_int_equal(framed, 1);
    assert_int_equal(id, 42);
    assert_int_equal(n, 7);
    assert_memory_equal(j, "{\"a\":1}", 7);
    assert_int_equal(fm_frame_json("\0\0", 2, &j, &n, &id, &framed, err,
                                   sizeof(err)), -1);
    assert_non_null(strstr(err, "2 bytes"));
    assert_int_equal(fm_frame_json("", 0, &j, &n, &id, &framed, err,
                                   sizeof(err)), 0);
    assert_int_equal(framed, 0);
    assert_int_equal(n, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
