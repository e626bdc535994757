/*
 * test_record_key.c -- record_key.c: every key-spec kind over plain bytes
 * (bs_record_view) and over real Kafka records (produced to and consumed
 * from an in-process mock cluster, so rd_kafka_message_t and its headers
 * are librdkafka's own), JSON pointers with escapes and array indices,
 * non-string JSON values serialized compactly with sorted keys, missing
 * keys, bad JSON, bs_keyspec_equal.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "support.h"
#include "inproc_mock.h"
#include "keys/record_key.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -- key specs, parsed by the configuration as the stage gets them ------- */

static bs_config *cfgs[64];
static size_t ncfgs;

static bs_config *new_cfg(void)
{
    assert_true(ncfgs < sizeof(cfgs) / sizeof(cfgs[0]));
    bs_config *cfg = bs_config_new();
    assert_non_null(cfg);
    cfgs[ncfgs++] = cfg;
    return cfg;
}

/* The spec `text` as configuration key `name` of a fresh configuration
 * (freed by teardown). */
static const bs_config_keyspec *spec_as(const char *name, const char *text)
{
    bs_config *cfg = new_cfg();
    char err[512];
    if (bs_config_set(cfg, name, text, "test", err, sizeof(err)) != 0)
        fail_msg("%s=%s: %s", name, text, err);
    const bs_config_keyspec *ks = bs_config_get_keyspec(cfg, name);
    assert_non_null(ks);
    return ks;
}

static const bs_config_keyspec *spec(const char *text)
{
    return spec_as("dedup.key", text);
}

static int teardown(void **state)
{
    (void)state;
    for (size_t i = 0; i < ncfgs; i++)
        bs_config_destroy(cfgs[i]);
    ncfgs = 0;
    return 0;
}

/* -- records as plain bytes ---------------------------------------------- */

typedef struct hdr {
    const char *name, *value; /* value NULL: a null header value */
} hdr;

typedef struct hdrs {
    const hdr *h;
    size_t n;
} hdrs;

/* Last of that name wins, as bs_header_fn promises. */
static bool table_header(const void *opaque, const char *name,
                         const void **v, size_t *len)
{
    const hdrs *t = opaque;
    for (size_t i = t->n; i-- > 0;)
        if (!strcmp(t->h[i].name, name)) {
            if (!t->h[i].value)
                return false;
            *v = t->h[i].value;
            *len = strlen(t->h[i].value);
            return true;
        }
    return false;
}

static bs_record_view view(const char *key, const char *value,
                           const hdrs *h)
{
    bs_record_view r = {key, key ? strlen(key) : 0, value,
                        value ? strlen(value) : 0, h ? table_header : NULL,
                        h};
    return r;
}

/* The key `text` gives for the record, as a NUL-terminated copy in buf
 * (*n its length); false when the record has none. */
static bool key_of(const bs_record_view *r, const char *text, char *buf,
                   size_t size, size_t *n)
{
    bs_record_keys rk;
    bs_record_keys_init_view(&rk, r);
    const void *k = NULL;
    size_t len = 0;
    bool ok = bs_record_key(&rk, spec(text), &k, &len);
    if (ok) {
        assert_non_null(k);
        assert_true(len < size);
        memcpy(buf, k, len);
        buf[len] = '\0';
        *n = len;
    }
    bs_record_keys_reset(&rk);
    return ok;
}

/* The key `text` gives is exactly the n bytes of want (typed keys hold
 * NUL bytes in their lengths). */
#define assert_key_bytes(r, text, want, n)                                   \
    do {                                                                     \
        char got_[512];                                                      \
        size_t n_;                                                           \
        if (!key_of((r), (text), got_, sizeof(got_), &n_))                   \
            fail_msg("%s: no key", (text));                                  \
        if (n_ != (size_t)(n) || memcmp(got_, (want), n_) != 0)              \
            fail_msg("%s: a key of %zu bytes, not the %zu expected", (text), \
                     n_, (size_t)(n));                                       \
    } while (0)
#define KEY_LIT(lit) lit, sizeof(lit) - 1
#define assert_key_is(r, text, lit) assert_key_bytes(r, text, lit, sizeof(lit) - 1)

#define assert_key(r, text, want)                                            \
    do {                                                                     \
        char got_[512];                                                      \
        size_t n_;                                                           \
        if (!key_of((r), (text), got_, sizeof(got_), &n_))                   \
            fail_msg("%s: no key, expected \"%s\"", (text), (want));         \
        if (strcmp(got_, (want)) != 0)                                       \
            fail_msg("%s: key \"%s\", expected \"%s\"", (text), got_,        \
                     (want));                                                \
    } while (0)

#define assert_missing(r, text)                                              \
    do {                                                                     \
        char got_[512];                                                      \
        size_t n_;                                                           \
        if (key_of((r), (text), got_, sizeof(got_), &n_))                    \
            fail_msg("%s: key \"%s\", expected none", (text), got_);         \
    } while (0)

static void test_key_and_value(void **state)
{
    (void)state;
    bs_record_view r = view("k1", "the value", NULL);
    assert_key(&r, "key", "k1");
    assert_key(&r, "value", "the value");

    bs_record_view none = view(NULL, NULL, NULL); /* no key, a tombstone */
    assert_missing(&none, "key");
    assert_missing(&none, "value");

    /* An empty key is a key (an empty one), not a missing one. */
    bs_record_view empty = view("", "", NULL);
    bs_record_keys rk;
    bs_record_keys_init_view(&rk, &empty);
    const void *k = NULL;
    size_t len = 99;
    assert_true(bs_record_key(&rk, spec("key"), &k, &len));
    assert_non_null(k);
    assert_int_equal(len, 0);
    assert_true(bs_record_key(&rk, spec("value"), &k, &len));
    assert_int_equal(len, 0);
    bs_record_keys_reset(&rk);
}

static void test_header(void **state)
{
    (void)state;
    const hdr h[] = {{"id", "first"}, {"other", "x"}, {"id", "last"},
                     {"nul", NULL}, {"empty", ""}};
    hdrs t = {h, sizeof(h) / sizeof(h[0])};
    bs_record_view r = view("k", "v", &t);
    assert_key(&r, "header:id", "last"); /* the last one wins */
    assert_key(&r, "header:other", "x");
    assert_key(&r, "header:empty", "");
    assert_missing(&r, "header:nul");
    assert_missing(&r, "header:absent");
    assert_missing(&r, "header:ID"); /* names are case-sensitive */
    bs_record_view bare = view("k", "v", NULL); /* no headers at all */
    assert_missing(&bare, "header:id");
}

static void test_json_pointer(void **state)
{
    (void)state;
    bs_record_view r = view(
        NULL,
        "{\"user\":{\"id\":\"u-1\",\"n\":42},\"a/b\":\"slash\","
        "\"m~n\":\"tilde\",\"~1\":\"literal\",\"arr\":[\"zero\",\"one\","
        "{\"deep\":\"d\"}],\"\":\"empty name\",\"s\":\"caf\\u00e9\"}",
        NULL);
    assert_key(&r, "json:/user/id", "u-1");
    assert_key(&r, "json:/a~1b", "slash");   /* ~1 is '/' */
    assert_key(&r, "json:/m~0n", "tilde");   /* ~0 is '~' */
    assert_key(&r, "json:/~01", "literal");  /* ~01 is "~1", not "/" */
    assert_key(&r, "json:/arr/0", "zero");
    assert_key(&r, "json:/arr/1", "one");
    assert_key(&r, "json:/arr/2/deep", "d");
    assert_key(&r, "json:/", "empty name");  /* the member named "" */
    assert_key(&r, "json:/s", "caf\xc3\xa9"); /* a string yields UTF-8 */

    assert_missing(&r, "json:/user/absent");
    assert_missing(&r, "json:/absent/id");
    assert_missing(&r, "json:/arr/3");  /* out of range */
    assert_missing(&r, "json:/arr/01"); /* leading zero: not an index */
    assert_missing(&r, "json:/arr/-");  /* past the end: no element */
    assert_missing(&r, "json:/arr/x");
    assert_missing(&r, "json:/arr/99999999999999999999999"); /* overflow */
    assert_missing(&r, "json:/user/id/more"); /* through a string */
    assert_missing(&r, "json:/a/b"); /* the escape matters */
}

static void test_json_non_strings(void **state)
{
    (void)state;
    bs_record_view r = view(
        NULL,
        "{\"n\":42,\"f\":1.5,\"t\":true,\"z\":null,\"neg\":-7,"
        "\"o\":{\"b\":[1, 2],  \"a\":{\"y\":1,\"x\":\"s\"}},\"e\":{},"
        "\"l\":[ ],\"nul\":\"a\\u0000b\"}",
        NULL);
    /* Typed (formats/include/fm_key.h): 0xFF, a type letter, the value. */
    assert_key_is(&r, "json:/n", ("\xffi42"));
    assert_key_is(&r, "json:/f", ("\xff" "d1.5"));
    assert_key_is(&r, "json:/t", ("\xfft"));
    assert_key_is(&r, "json:/z", ("\xffn"));
    assert_key_is(&r, "json:/neg", ("\xffi-7"));
    assert_key_is(&r, "json:/e", ("\xffm"));
    assert_key_is(&r, "json:/l", ("\xff" "a"));
    /* An object: a map sorted by key, each key and value an element (its
     * length, 4 bytes little-endian, then its bytes). */
    bs_record_view small = view(NULL, "{\"id\":7}", NULL);
    assert_key_is(&small, "json:", ("\xffm\x02\0\0\0id"
                                              "\x03\0\0\0\xffi7"));

    /* The same object written in another order gives the same key. */
    bs_record_view r2 = view(NULL, "{\"o\":{\"a\":{\"x\":\"s\",\"y\":1},"
                                   "\"b\":[1,2]}}", NULL);
    char a[512], b[512];
    size_t na, nb;
    assert_true(key_of(&r, "json:/o", a, sizeof(a), &na));
    assert_true(key_of(&r2, "json:/o", b, sizeof(b), &nb));
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na);
    /* 7 and "7", null and "null", 1 and 1.0, [] and {}: typed, so only
     * equal values of one kind give one key. */
    bs_record_view num7 = view(NULL, "7", NULL), str7 = view(NULL, "\"7\"", NULL);
    assert_true(key_of(&num7, "json:", a, sizeof(a), &na));
    assert_true(key_of(&str7, "json:", b, sizeof(b), &nb));
    assert_false(na == nb && memcmp(a, b, na) == 0);
    bs_record_view nul = view(NULL, "null", NULL), snul = view(NULL, "\"null\"", NULL);
    assert_true(key_of(&nul, "json:", a, sizeof(a), &na));
    assert_true(key_of(&snul, "json:", b, sizeof(b), &nb));
    assert_false(na == nb && memcmp(a, b, na) == 0);
    bs_record_view one = view(NULL, "1", NULL), onef = view(NULL, "1.0", NULL);
    assert_true(key_of(&one, "json:", a, sizeof(a), &na));
    assert_true(key_of(&onef, "json:", b, sizeof(b), &nb));
    assert_int_equal(na, nb); /* numbers by value */
    assert_memory_equal(a, b, na);

    /* A string with a NUL in it keeps every byte. */
    bs_record_keys rk;
    bs_record_keys_init_view(&rk, &r);
    const void *k;
    size_t len;
    assert_true(bs_record_key(&rk, spec("json:/nul"), &k, &len));
    assert_int_equal(len, 3);
    assert_memory_equal(k, "a\0b", 3);
    bs_record_keys_reset(&rk);

    /* The whole document ("json:" is the empty pointer). */
    bs_record_view doc = view(NULL, "{\"b\":2,\"a\":1}", NULL);
    assert_key_is(&doc, "json:", ("\xffm\x01\0\0\0a\x03\0\0\0\xffi1"
                                            "\x01\0\0\0b\x03\0\0\0\xffi2"));
    bs_record_view scalar = view(NULL, "\"top\"", NULL);
    assert_key(&scalar, "json:", "top");
    bs_record_view num = view(NULL, " 17 ", NULL);
    assert_key_is(&num, "json:", ("\xffi17"));
}

static void test_bad_json(void **state)
{
    (void)state;
    const char *bad[] = {"{\"a\":", "not json", "{\"a\":1}}", "[1,2",
                         "{\"a\":\"\xff\"}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        bs_record_view r = view("k", bad[i], NULL);
        assert_missing(&r, "json:/a");
        assert_missing(&r, "json:");
        assert_key(&r, "value", bad[i]); /* the value is still a value */
    }
    bs_record_view empty = view("k", "", NULL);
    assert_missing(&empty, "json:");
    bs_record_view tomb = view("k", NULL, NULL);
    assert_missing(&tomb, "json:");
    /* Not JSON is remembered: every json spec of the record says so. */
    bs_record_view r = view(NULL, "{oops", NULL);
    bs_record_keys rk;
    bs_record_keys_init_view(&rk, &r);
    const void *k;
    size_t len;
    assert_false(bs_record_key(&rk, spec("json:/a"), &k, &len));
    assert_false(bs_record_key(&rk, spec("json:/b"), &k, &len));
    assert_true(bs_record_key(&rk, spec("value"), &k, &len));
    bs_record_keys_reset(&rk);
}

/* Several specs on one record: the JSON is parsed once and every key
 * stays valid until the reset. */
static void test_many_keys_one_record(void **state)
{
    (void)state;
    bs_record_view r = view("rk", "{\"a\":\"x\",\"b\":[1],\"c\":3}", NULL);
    bs_record_keys rk;
    bs_record_keys_init_view(&rk, &r);
    const char *texts[] = {"json:/a", "json:/b", "key", "json:/c", "json:"};
    static const struct {
        const char *b;
        size_t n;
    } want[] = {{KEY_LIT("x")},
                {KEY_LIT("\xff" "a\x03\0\0\0\xffi1")},
                {KEY_LIT("rk")},
                {KEY_LIT("\xffi3")},
                {KEY_LIT("\xffm\x01\0\0\0a\x01\0\0\0x\x01\0\0\0b"
                         "\x09\0\0\0\xff" "a\x03\0\0\0\xffi1"
                         "\x01\0\0\0c\x03\0\0\0\xffi3")}};
    const void *k[5];
    size_t len[5];
    for (int i = 0; i < 5; i++)
        assert_true(bs_record_key(&rk, spec(texts[i]), &k[i], &len[i]));
    for (int i = 0; i < 5; i++) {
        assert_int_equal(len[i], want[i].n);
        assert_memory_equal(k[i], want[i].b, len[i]);
    }
    bs_record_keys_reset(&rk);
}

/* More non-string JSON keys on one record than were ever kept inline
 * (blocklists with json keys, one per list): every one works. */
static void test_many_non_string_json_keys(void **state)
{
    (void)state;
    enum { N = 20 };
    bs_config *cfg = new_cfg();
    char err[512], value[1024];
    size_t vlen = (size_t)snprintf(value, sizeof(value), "{");
    for (int i = 0; i < N; i++) {
        char name[64], text[64];
        snprintf(name, sizeof(name), "blocklist.b%d.key", i);
        snprintf(text, sizeof(text), "json:/n%d", i);
        if (bs_config_set(cfg, name, text, "test", err, sizeof(err)) != 0)
            fail_msg("%s: %s", name, err);
        vlen += (size_t)snprintf(value + vlen, sizeof(value) - vlen,
                                 "%s\"n%d\":{\"v\":%d}", i ? "," : "", i,
                                 i * 11);
    }
    snprintf(value + vlen, sizeof(value) - vlen, "}");
    bs_record_view r = view(NULL, value, NULL);
    bs_record_keys rk;
    bs_record_keys_init_view(&rk, &r);
    const void *k[N];
    size_t len[N];
    for (int i = 0; i < N; i++) {
        char name[64];
        snprintf(name, sizeof(name), "blocklist.b%d.key", i);
        const bs_config_keyspec *ks = bs_config_get_keyspec(cfg, name);
        assert_non_null(ks);
        if (!bs_record_key(&rk, ks, &k[i], &len[i]))
            fail_msg("json key %d of %d (%s) reported missing", i + 1, N,
                     ks->parts[0].arg);
    }
    for (int i = 0; i < N; i++) { /* all still valid */
        char want[32], num[16];
        int nn = snprintf(num, sizeof(num), "\xffi%d", i * 11);
        memcpy(want, "\xffm\x01\0\0\0v", 7);
        want[7] = (char)nn;
        memcpy(want + 8, "\0\0\0", 3);
        memcpy(want + 11, num, (size_t)nn);
        assert_int_equal(len[i], 11 + (size_t)nn);
        assert_memory_equal(k[i], want, len[i]);
    }
    bs_record_keys_reset(&rk);
    /* reset leaves it empty and reusable */
    bs_record_keys_init_view(&rk, &r);
    assert_true(bs_record_key(&rk, spec("json:/n3"), &k[0], &len[0]));
    bs_record_keys_reset(&rk);
}

/* A composite key is the tuple of its parts: unambiguous where the
 * parts' bytes concatenate alike, missing when any part is. */
static void test_composite(void **state)
{
    (void)state;
    bs_record_view ab_c = view("k", "{\"u\":\"ab\",\"e\":\"c\"}", NULL);
    bs_record_view a_bc = view("k", "{\"u\":\"a\",\"e\":\"bc\"}", NULL);
    assert_key_is(&ab_c, "json:/u,json:/e",
                  "\xffT\x02\0\0\0ab\x01\0\0\0c");
    assert_key_is(&a_bc, "json:/u,json:/e",
                  "\xffT\x01\0\0\0a\x02\0\0\0bc");
    /* A part that is typed stays typed inside the tuple. */
    bs_record_view n = view("k", "{\"u\":7,\"e\":null}", NULL);
    assert_key_is(&n, "json:/u,json:/e,key",
                  "\xffT\x03\0\0\0\xffi7\x02\0\0\0\xffn\x01\0\0\0k");
    /* One part missing: the whole key is missing. */
    assert_missing(&ab_c, "json:/u,json:/nope");
    assert_missing(&ab_c, "header:h,json:/u");
    bs_record_view nokey = view(NULL, "{\"u\":\"x\"}", NULL);
    assert_missing(&nokey, "json:/u,key");
}

/* A JSON value framed by a JSON Schema serializer (magic byte 0, a 4-byte
 * schema id) is read after its prefix; a prefix cut short is no JSON. */
static void test_json_framed(void **state)
{
    (void)state;
    static const char framed[] = "\0\0\0\0\x2a{\"id\":\"f-1\"}";
    bs_record_view r = {.key = "\0\0\0\x01\x00\"k\"", .key_len = 8,
                        .value = framed, .value_len = sizeof(framed) - 1};
    assert_key(&r, "json:/id", "f-1");
    assert_key(&r, "key.json:", "k");
    bs_record_view cut = {.value = "\0\0\x01", .value_len = 3};
    assert_missing(&cut, "json:");
}

/* key.json: reads the record key as JSON, the value untouched. */
static void test_json_record_key(void **state)
{
    (void)state;
    bs_record_view r = view("{\"id\":\"k-1\",\"n\":2}", "{\"id\":\"v-1\"}",
                            NULL);
    assert_key(&r, "key.json:/id", "k-1");
    assert_key(&r, "json:/id", "v-1");
    assert_key_is(&r, "key.json:/n", "\xffi2");
    assert_key_is(&r, "key.json:/id,json:/id",
                  "\xffT\x03\0\0\0k-1\x03\0\0\0v-1");
    bs_record_view plain = view("not json", "{\"id\":1}", NULL);
    assert_missing(&plain, "key.json:/id");
    assert_missing(&plain, "key.json:");
    bs_record_view none = view(NULL, "{\"id\":1}", NULL);
    assert_missing(&none, "key.json:");
    assert_false(bs_keyspec_equal(spec("json:/id"), spec("key.json:/id")));
    assert_true(bs_keyspec_equal(spec("json:/a,key"), spec("json:/a,key")));
    assert_false(bs_keyspec_equal(spec("json:/a,key"), spec("json:/a")));
    assert_false(bs_keyspec_equal(spec("json:/a,key"), spec("key,json:/a")));
}

static void test_keyspec_equal(void **state)
{
    (void)state;
    assert_true(bs_keyspec_equal(spec("key"), spec("key")));
    assert_true(bs_keyspec_equal(spec("value"), spec("value")));
    assert_true(bs_keyspec_equal(spec("header:id"), spec("header:id")));
    assert_true(bs_keyspec_equal(spec("json:/a/0"), spec("json:/a/0")));
    assert_true(bs_keyspec_equal(spec("json:"), spec("json:")));
    assert_true(bs_keyspec_equal(spec("json:/x"),
                                 spec_as("blocklist.l.key", "json:/x")));
    assert_false(bs_keyspec_equal(spec("key"), spec("value")));
    assert_false(bs_keyspec_equal(spec("header:id"), spec("header:ID")));
    assert_false(bs_keyspec_equal(spec("header:/a"), spec("json:/a")));
    assert_false(bs_keyspec_equal(spec("json:/a"), spec("json:/b")));
    assert_false(bs_keyspec_equal(spec("json:/a"), spec("json:/a/0")));
    assert_false(bs_keyspec_equal(spec("json:"), spec("json:/")));
}

/* -- real Kafka records -------------------------------------------------- */

static void test_kafka_message(void **state)
{
    (void)state;
    im_cluster c;
    im_start(&c, 1);
    im_topic(&c, "rk", 1);
    const h_header h[] = {{"id", "first", 5},
                          {"bin", "a\0b", 3},
                          {"id", "last", 4},
                          {"nul", NULL, 0}};
    h_record recs[2] = {h_rec("the-key", "{\"u\":{\"id\":7},\"s\":\"x\"}"),
                        h_rec(NULL, NULL)};
    recs[0].headers = h;
    recs[0].n_headers = sizeof(h) / sizeof(h[0]);
    H_CHECK(h_produce(c.bootstraps, "rk", 0, recs, 2));
    rd_kafka_t *consumer = im_consumer(&c, NULL);

    rd_kafka_message_t *m = im_fetch(consumer, "rk", 0, 0);
    bs_record_keys rk;
    bs_record_keys_init(&rk, m);
    const void *k;
    size_t len;
    assert_true(bs_record_key(&rk, spec("key"), &k, &len));
    assert_int_equal(len, 7);
    assert_memory_equal(k, "the-key", 7);
    assert_true(bs_record_key(&rk, spec("value"), &k, &len));
    assert_int_equal(len, m->len);
    assert_ptr_equal(k, m->payload); /* no copy */
    assert_true(bs_record_key(&rk, spec("header:id"), &k, &len));
    assert_int_equal(len, 4);
    assert_memory_equal(k, "last", 4);
    assert_true(bs_record_key(&rk, spec("header:bin"), &k, &len));
    assert_int_equal(len, 3);
    assert_memory_equal(k, "a\0b", 3);
    assert_false(bs_record_key(&rk, spec("header:nul"), &k, &len));
    assert_false(bs_record_key(&rk, spec("header:absent"), &k, &len));
    assert_true(bs_record_key(&rk, spec("json:/u"), &k, &len));
    assert_int_equal(len, 15);
    assert_memory_equal(k, "\xffm\x02\0\0\0id\x03\0\0\0\xffi7", 15);
    assert_true(bs_record_key(&rk, spec("json:/s"), &k, &len));
    assert_memory_equal(k, "x", 1);
    bs_record_keys_reset(&rk);
    rd_kafka_message_destroy(m);

    /* No key, no value, no headers. */
    m = im_fetch(consumer, "rk", 0, 1);
    bs_record_keys_init(&rk, m);
    assert_false(bs_record_key(&rk, spec("key"), &k, &len));
    assert_false(bs_record_key(&rk, spec("value"), &k, &len));
    assert_false(bs_record_key(&rk, spec("header:id"), &k, &len));
    assert_false(bs_record_key(&rk, spec("json:"), &k, &len));
    bs_record_keys_reset(&rk);
    rd_kafka_message_destroy(m);

    rd_kafka_consumer_close(consumer);
    rd_kafka_destroy(consumer);
    im_stop(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_key_and_value, teardown),
        cmocka_unit_test_teardown(test_header, teardown),
        cmocka_unit_test_teardown(test_json_pointer, teardown),
        cmocka_unit_test_teardown(test_json_non_strings, teardown),
        cmocka_unit_test_teardown(test_bad_json, teardown),
        cmocka_unit_test_teardown(test_many_keys_one_record, teardown),
        cmocka_unit_test_teardown(test_many_non_string_json_keys, teardown),
        cmocka_unit_test_teardown(test_composite, teardown),
        cmocka_unit_test_teardown(test_json_record_key, teardown),
        cmocka_unit_test_teardown(test_json_framed, teardown),
        cmocka_unit_test_teardown(test_keyspec_equal, teardown),
        cmocka_unit_test_teardown(test_kafka_message, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
