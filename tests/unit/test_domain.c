/*
 * test_domain.c -- domain lookups (formats/include/fm_domain.h): the
 * issue's cases (a subdomain's address is looked up as its listed parent,
 * look-alikes never are), URLs with user info, ports, IPv6 brackets and
 * queries, bare hosts with a path, and the caps on empty, over-long and
 * too many labels.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fm_domain.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The lookups of key, joined by '|', in out. */
static int lookups(const char *key, char *out, size_t out_size)
{
    fm_domain d;
    char err[256];
    int rc = fm_domain_parse(&d, key, strlen(key), err, sizeof(err));
    out[0] = 0;
    if (rc) {
        assert_int_equal(fm_domain_count(&d), 0);
        snprintf(out, out_size, "error: %s", err);
        return rc;
    }
    size_t at = 0;
    for (unsigned i = 0; i < fm_domain_count(&d); i++) {
        size_t n;
        const char *s = fm_domain_at(&d, i, &n);
        assert_true(n >= 1 && n <= FM_DOMAIN_MAX);
        assert_true(at + n + 2 < out_size);
        if (i)
            out[at++] = '|';
        memcpy(out + at, s, n);
        at += n;
        out[at] = 0;
    }
    return 0;
}

static void assert_lookups(const char *key, const char *want)
{
    char got[4096];
    lookups(key, got, sizeof(got));
    if (strcmp(got, want))
        fail_msg("%s: \"%s\", want \"%s\"", key, got, want);
}

static bool yields(const char *key, const char *name)
{
    fm_domain d;
    char err[256];
    if (fm_domain_parse(&d, key, strlen(key), err, sizeof(err)))
        return false;
    for (unsigned i = 0; i < fm_domain_count(&d); i++) {
        size_t n;
        const char *s = fm_domain_at(&d, i, &n);
        if (n == strlen(name) && !memcmp(s, name, n))
            return true;
    }
    return false;
}

static void test_issue_cases(void **state)
{
    (void)state;
    assert_lookups("u@MX3.Spam.Example", "mx3.spam.example|spam.example|example");
    assert_true(yields("u@MX3.Spam.Example", "spam.example"));
    assert_true(yields("spam.example", "spam.example"));
    assert_false(yields("u@notspam.example", "spam.example"));
    assert_false(yields("spam.example.org", "spam.example"));
    assert_false(yields("u@example", "spam.example"));
    assert_false(yields("u@spam.examples", "spam.example"));
    assert_false(yields("u@spam-example", "spam.example"));
    assert_lookups("u@notspam.example", "notspam.example|example");
    assert_lookups("u@example", "example");
}

static void test_addresses(void **state)
{
    (void)state;
    assert_lookups("a@b@Host.Example", "host.example|example"); /* last @ */
    assert_lookups("u@spam.example.", "spam.example|example");  /* root dot */
    assert_lookups("mailto:u@x.example", "x.example|example");
    assert_lookups("\"a b\"@x.example", "x.example|example");
    assert_lookups("u@x.example/p", "x.example|example");
    assert_lookups("u@[192.0.2.1]", "192.0.2.1"); /* address literals */
    assert_lookups("u@[IPv6:2001:DB8::1]", "ipv6:2001:db8::1");
}

static void test_urls(void **state)
{
    (void)state;
    assert_lookups("https://WWW.Spam.Example/path?q=1#f",
                   "www.spam.example|spam.example|example");
    assert_lookups("http://spam.example:8080/x", "spam.example|example");
    assert_lookups("http://user:pw@spam.example:8080/x@y.example",
                   "spam.example|example");
    assert_lookups("http://spam.example?u=a@b.example", "spam.example|example");
    assert_lookups("http://spam.example#frag", "spam.example|example");
    assert_lookups("ftp://u@[2001:DB8::1]:21/f", "2001:db8::1");
    assert_lookups("http://[::1]/", "::1");
    assert_lookups("http://192.0.2.7:80/", "192.0.2.7");
    assert_lookups("svn+ssh://h.example/r", "h.example|example");
    assert_lookups("spam.example/x", "spam.example|example");
    assert_lookups("spam.example:8080/x", "spam.example|example");
    assert_lookups("spam.example?q", "spam.example|example");
    assert_lookups("[2001:db8::2]:443", "2001:db8::2");
    /* not a scheme: the key is a host with a path */
    assert_lookups("1http://x.example", "1http:");
    char got[512];
    assert_int_equal(lookups("http:///path", got, sizeof(got)), -1);
    assert_non_null(strstr(got, "no host"));
    assert_int_equal(lookups("http://u@:80/", got, sizeof(got)), -1);
}

static void test_whole_key(void **state)
{
    (void)state;
    assert_lookups("Spam.Example", "spam.example|example");
    assert_lookups("localhost", "localhost");
    assert_lookups("a:b", "a:b"); /* not a port: kept */
    char got[512];
    assert_int_equal(lookups("", got, sizeof(got)), -1);
    assert_int_equal(lookups("u@", got, sizeof(got)), -1);
    assert_int_equal(lookups(".", got, sizeof(got)), -1);
}

/* Empty and over-long labels end the lookups, from the right: the
 * well-formed suffixes are still looked up. */
static void test_caps(void **state)
{
    (void)state;
    assert_lookups("u@a..spam.example", "spam.example|example");
    assert_lookups("u@.spam.example", "spam.example|example");
    char got[512];
    assert_int_equal(lookups("u@spam.example..", got, sizeof(got)), -1);
    assert_non_null(strstr(got, "last label of 0 bytes"));
    char key[1024];
    snprintf(key, sizeof(key), "u@%s.spam.example",
             "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    assert_lookups(key, "spam.example|example"); /* a 64-byte label */
    snprintf(key, sizeof(key), "u@%s.spam.example",
             "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    assert_true(yields(key, key + 2)); /* 63 bytes: kept */
    /* 300 bytes of 2-byte labels: the suffix of at most 253 bytes */
    strcpy(key, "u@");
    for (int i = 0; i < 150; i++)
        strcat(key, "x.");
    strcat(key, "example");
    fm_domain d;
    char err[256];
    assert_int_equal(fm_domain_parse(&d, key, strlen(key), err, sizeof(err)),
                     0);
    assert_int_equal(d.len, 253);
    assert_int_equal(fm_domain_count(&d), 124);
    size_t n;
    assert_memory_equal(fm_domain_at(&d, 123, &n), "example", 7);
    /* the most lookups a key can take */
    strcpy(key, "");
    for (int i = 0; i < 126; i++)
        strcat(key, "a.");
    strcat(key, "b");
    assert_int_equal(fm_domain_parse(&d, key, strlen(key), err, sizeof(err)),
                     0);
    assert_int_equal(d.len, 253);
    assert_int_equal(fm_domain_count(&d), FM_DOMAIN_MAX_LOOKUPS);
    /* an IPv6 address too long for a name: refused */
    char v6[400] = "http://[";
    memset(v6 + 8, 'f', 300);
    strcpy(v6 + 308, "]/");
    assert_int_equal(lookups(v6, got, sizeof(got)), -1);
    assert_non_null(strstr(got, "longer than 253"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_issue_cases),
        cmocka_unit_test(test_addresses),
        cmocka_unit_test(test_urls),
        cmocka_unit_test(test_whole_key),
        cmocka_unit_test(test_caps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
