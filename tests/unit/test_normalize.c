/*
 * test_normalize.c -- key normalization (formats/include/fm_normalize.h):
 * case folding of ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic
 * (and nothing outside them), trimming of every white-space character the
 * header names, invalid UTF-8 left byte for byte, in place, the output
 * bound, and the parsed list.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fm_normalize.h>
#include <stdio.h>
#include <string.h>

static void assert_norm(unsigned flags, const char *in, const char *want)
{
    uint8_t out[256];
    size_t n = 0;
    char err[256];
    size_t len = strlen(in);
    assert_int_equal(fm_norm_apply(flags, (const uint8_t *)in, len, out,
                                   len, &n, err, sizeof(err)), 0);
    if (n != strlen(want) || memcmp(out, want, n))
        fail_msg("\"%s\" -> \"%.*s\", want \"%s\"", in, (int)n, out, want);
}

static void test_lower(void **state)
{
    (void)state;
    assert_norm(FM_NORM_LOWER, "Ann@Spam.EXAMPLE", "ann@spam.example");
    /* Latin-1: A-grave..THORN fold, the multiplication sign and sharp s do
     * not */
    assert_norm(FM_NORM_LOWER, "ÀÉÎÕÜÞ×ß", "àéîõüþ×ß");
    /* Latin Extended-A: pairs, dotted I to i, Y-diaeresis to Latin-1 */
    assert_norm(FM_NORM_LOWER, "ĀĄĆČĐĘĞĹŁŃŇŒŠŸŹŻŽİ", "āąćčđęğĺłńňœšÿźżži");
    assert_norm(FM_NORM_LOWER, "ıĸŉſ", "ıĸŉſ"); /* lowercase already */
    /* Greek: capitals, tonos, final sigma kept */
    assert_norm(FM_NORM_LOWER, "ΑΒΓΔΩ ΆΈΉΊΌΎΏ ς", "αβγδω άέήίόύώ ς");
    /* Cyrillic: basic, Ѐ-Џ, historic pairs, Palochka */
    assert_norm(FM_NORM_LOWER, "ПРИВЕТ ЁЂЏ ѠҊӀӁӐӾ", "привет ёђџ ѡҋӏӂӑӿ");
    /* outside the blocks: Armenian, fullwidth, Kelvin sign unchanged */
    assert_norm(FM_NORM_LOWER, "ԱＡ\xe2\x84\xaa", "ԱＡ\xe2\x84\xaa");
    assert_int_equal(fm_norm_lower_cp(0x130), 'i');
    assert_int_equal(fm_norm_lower_cp(0x3A3), 0x3C3);
    assert_int_equal(fm_norm_lower_cp(0x3FD), 0x37B);
    assert_int_equal(fm_norm_lower_cp(0x4C0), 0x4CF);
    assert_int_equal(fm_norm_lower_cp(0x100 - 1), 0xFF);
    assert_int_equal(fm_norm_lower_cp(0x1E9E), 0x1E9E); /* not covered */
}

/* Invalid UTF-8 passes byte for byte; what follows is read as usual. */
static void test_invalid_utf8(void **state)
{
    (void)state;
    assert_norm(FM_NORM_LOWER, "\x80" "A\xc3", "\x80" "a\xc3");
    assert_norm(FM_NORM_LOWER, "\xc3\xc3\x80", "\xc3\xc3\xa0"); /* À after */
    assert_norm(FM_NORM_LOWER, "\xc0\x81\xe0\x80\x80Z", "\xc0\x81\xe0\x80\x80z");
    assert_norm(FM_NORM_LOWER, "\xed\xa0\x80\xf5\x80", "\xed\xa0\x80\xf5\x80");
    /* a 3-byte sequence holding bytes that look like a capital's tail */
    assert_norm(FM_NORM_LOWER, "\xe2\x82\xac", "\xe2\x82\xac"); /* € */
    assert_norm(FM_NORM_TRIM, " \xa0x\xa0 ", "\xa0x\xa0"); /* lone A0 */
}

static void test_trim(void **state)
{
    (void)state;
    assert_norm(FM_NORM_TRIM, " \t\r\n\v\fkey \t\r\n\v\f", "key");
    assert_norm(FM_NORM_TRIM, "\xc2\xa0\xc2\x85key\xc2\xa0", "key");
    assert_norm(FM_NORM_TRIM,
                "\xe2\x80\x80\xe2\x80\x8a\xe3\x80\x80\xef\xbb\xbf"
                "k e\xe2\x80\xaf\xe2\x81\x9f\xe2\x80\xa8\xe2\x80\xa9"
                "\xe1\x9a\x80",
                "k e");
    /* zero width space is not white space */
    assert_norm(FM_NORM_TRIM, "\xe2\x80\x8bk", "\xe2\x80\x8bk");
    assert_norm(FM_NORM_TRIM, "   ", "");
    assert_norm(FM_NORM_TRIM, "", "");
    assert_norm(FM_NORM_TRIM | FM_NORM_LOWER, "  Ünïcode Ⅻ  ", "ünïcode Ⅻ");
    assert_norm(0, " A ", " A ");
}

static void test_in_place_and_bound(void **state)
{
    (void)state;
    uint8_t buf[64];
    size_t n;
    char err[256];
    const char *in = "  İSTANBUL  ";
    size_t len = strlen(in);
    memcpy(buf, in, len);
    assert_int_equal(fm_norm_apply(FM_NORM_LOWER | FM_NORM_TRIM, buf, len,
                                   buf, len, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 8);
    assert_memory_equal(buf, "istanbul", 8);
    assert_int_equal(fm_norm_apply(FM_NORM_LOWER, (const uint8_t *)"ABC", 3,
                                   buf, 2, &n, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "too small"));
    assert_int_equal(fm_norm_apply(FM_NORM_TRIM, (const uint8_t *)" AB ", 4,
                                   buf, 1, &n, err, sizeof(err)), -1);
}

static void test_parse(void **state)
{
    (void)state;
    unsigned f = 99;
    char err[256];
    assert_int_equal(fm_norm_parse("lower,trim", &f, err, sizeof(err)), 0);
    assert_int_equal(f, FM_NORM_LOWER | FM_NORM_TRIM);
    assert_int_equal(fm_norm_parse(" trim ", &f, err, sizeof(err)), 0);
    assert_int_equal(f, FM_NORM_TRIM);
    assert_int_equal(fm_norm_parse("", &f, err, sizeof(err)), 0);
    assert_int_equal(f, 0);
    assert_int_equal(fm_norm_parse("lower,upper", &f, err, sizeof(err)), -1);
    assert_string_equal(err, "normalize: unknown \"upper\" in \"lower,upper\" "
                             "(known: lower, trim)");
    assert_int_equal(fm_norm_parse("lower,,trim", &f, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "empty word"));
    assert_int_equal(fm_norm_parse("lower,", &f, err, sizeof(err)), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lower),
        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_trim),
        cmocka_unit_test(test_in_place_and_bound),
        cmocka_unit_test(test_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
