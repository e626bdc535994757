/*
 * test_log.c -- the engine's log lines (stage/base/log.c) as bytes: a line
 * that quotes text from outside (a topic named in the configuration,
 * librdkafka's messages) holding bytes that are not UTF-8, or control
 * characters, comes out as one line of valid UTF-8 with those bytes
 * written \xNN; valid UTF-8 passes unchanged, and so does a plain line.
 * Each bs_log call's output is caught by pointing stderr at a temp file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"

/* What one bs_log call writes: the line after "level=info msg=NAME ",
 * its trailing newline removed (the call must write exactly one). */
static char *logged(const char *msg, const char *value)
{
    char path[] = "/tmp/bs-test-log-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_int_equal(dup2(fd, STDERR_FILENO), STDERR_FILENO);
    bs_log(BS_LOG_INFO, msg, "topic=%s", value);
    assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
    close(saved);
    off_t len = lseek(fd, 0, SEEK_END);
    assert_true(len > 0 && len < 65536);
    char *buf = calloc(1, (size_t)len + 1);
    assert_non_null(buf);
    assert_int_equal(pread(fd, buf, (size_t)len, 0), len);
    close(fd);
    assert_int_equal(buf[len - 1], '\n');
    buf[len - 1] = '\0';
    assert_null(strchr(buf, '\n')); /* one line */
    const char *body = strstr(buf, " level=info msg=");
    assert_non_null(body);
    char *out = strdup(body + strlen(" level=info msg="));
    free(buf);
    return out;
}

static void expect(const char *value, const char *want)
{
    char *got = logged("started", value);
    char line[512];
    snprintf(line, sizeof(line), "started topic=%s", want);
    assert_string_equal(got, line);
    free(got);
}

static void test_plain_and_utf8_unchanged(void **state)
{
    (void)state;
    expect("events-unique", "events-unique");
    expect("caf\xc3\xa9-\xe2\x82\xac-\xf0\x9f\x98\x80",
           "caf\xc3\xa9-\xe2\x82\xac-\xf0\x9f\x98\x80");
}

static void test_bytes_not_utf8_escaped(void **state)
{
    (void)state;
    expect("ev\xffnts", "ev\\xffnts");
    expect("o\xfe", "o\\xfe");
    /* A lead byte without its continuation, an overlong '/', a UTF-16
     * surrogate, past U+10FFFF, a lone continuation byte. */
    expect("a\xc3(", "a\\xc3(");
    expect("\xc0\xaf", "\\xc0\\xaf");
    expect("\xed\xa0\x80", "\\xed\\xa0\\x80");
    expect("\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80");
    expect("\x80x", "\\x80x");
}

static void test_control_characters_escaped(void **state)
{
    (void)state;
    /* A newline would end the line early; an escape sequence would reach
     * a terminal. */
    expect("in\nlevel=error", "in\\x0alevel=error");
    expect("\x1b[31mred", "\\x1b[31mred");
    expect("tab\there", "tab\\x09here");
}

/* bs_log_quote's quoting meets the escaping: quoted, then escaped. */
static void test_quoted_value(void **state)
{
    (void)state;
    char q[64];
    char *got = logged("x", bs_log_quote("a b\xff", q, sizeof(q)));
    assert_string_equal(got, "x topic=\"a b\\xff\"");
    free(got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_and_utf8_unchanged),
        cmocka_unit_test(test_bytes_not_utf8_escaped),
        cmocka_unit_test(test_control_characters_escaped),
        cmocka_unit_test(test_quoted_value),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
