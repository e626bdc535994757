/*
 * test_avro.c -- Avro keys (formats/include/fm_avro.h) on payloads that
 * avro-c's own writer (avro_value_write) encodes from the same schema:
 * every leaf type's key bytes, nested records, unions with null (missing),
 * union branches with and without the path's field, enums, maps, arrays,
 * recursive schemas; the whole value against an encoder of avro-c's own
 * decoded value; every damaged payload (each truncation, bad branch index,
 * negative and past-the-end lengths, a 2 GB length, counts past the end)
 * BAD without allocating; schema and path errors named.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <avro.h>
#include <fm_avro.h>
#include <fm_key.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char SCHEMA[] =
    "{\"type\":\"record\",\"name\":\"Event\",\"namespace\":\"t\",\"fields\":["
    "{\"name\":\"id\",\"type\":\"long\"},"
    "{\"name\":\"user\",\"type\":\"string\"},"
    "{\"name\":\"email\",\"type\":\"string\"},"
    "{\"name\":\"n\",\"type\":\"int\"},"
    "{\"name\":\"f\",\"type\":\"float\"},"
    "{\"name\":\"d\",\"type\":\"double\"},"
    "{\"name\":\"ok\",\"type\":\"boolean\"},"
    "{\"name\":\"nothing\",\"type\":\"null\"},"
    "{\"name\":\"raw\",\"type\":\"bytes\"},"
    "{\"name\":\"fx\",\"type\":{\"type\":\"fixed\",\"name\":\"Four\","
    "\"size\":4}},"
    "{\"name\":\"color\",\"type\":{\"type\":\"enum\",\"name\":\"Color\","
    "\"symbols\":[\"RED\",\"GREEN\",\"BLUE\"]}},"
    "{\"name\":\"tags\",\"type\":{\"type\":\"array\",\"items\":\"string\"}},"
    "{\"name\":\"attrs\",\"type\":{\"type\":\"map\",\"values\":\"long\"}},"
    "{\"name\":\"session\",\"type\":[\"null\",\"string\"]},"
    "{\"name\":\"addr\",\"type\":{\"type\":\"record\",\"name\":\"Addr\","
    "\"fields\":[{\"name\":\"city\",\"type\":\"string\"},"
    "{\"name\":\"zip\",\"type\":[\"null\",\"int\"]}]}},"
    "{\"name\":\"maybe\",\"type\":[\"null\",\"Addr\"]},"
    "{\"name\":\"choice\",\"type\":[\"null\","
    "{\"type\":\"record\",\"name\":\"A\",\"fields\":[{\"name\":\"x\","
    "\"type\":\"string\"}]},"
    "{\"type\":\"record\",\"name\":\"B\",\"fields\":[{\"name\":\"x\","
    "\"type\":\"long\"},{\"name\":\"y\",\"type\":\"int\"}]},"
    "\"string\"]}"
    "]}";

/* -- payloads written by avro-c ------------------------------------------ */

typedef struct payload {
    uint8_t b[4096];
    size_t len;
} payload;

static avro_schema_t avro_parse(const char *json)
{
    avro_schema_t s;
    if (avro_schema_from_json_length(json, strlen(json), &s))
        fail_msg("avro-c: %s", avro_strerror());
    return s;
}

static void field(avro_value_t *rec, const char *name, avro_value_t *out)
{
    assert_int_equal(avro_value_get_by_name(rec, name, out, NULL), 0);
}

static void write_value(avro_value_t *v, payload *p)
{
    avro_writer_t w = avro_writer_memory((const char *)p->b, sizeof(p->b));
    assert_int_equal(avro_value_write(w, v), 0);
    p->len = (size_t)avro_writer_tell(w);
    avro_writer_free(w);
}

/* An Event: session, addr.zip, maybe and choice vary with `variant`
 * (0: null branches; 1: values, choice A; 2: choice B; 3: choice string). */
static void event(payload *p, int variant)
{
    avro_schema_t s = avro_parse(SCHEMA);
    avro_value_iface_t *iface = avro_generic_class_from_schema(s);
    avro_value_t v, f, g, h;
    assert_int_equal(avro_generic_value_new(iface, &v), 0);
    field(&v, "id", &f);
    avro_value_set_long(&f, -1234567890123LL);
    field(&v, "user", &f);
    avro_value_set_string(&f, "Ann");
    field(&v, "email", &f);
    avro_value_set_string(&f, "ann@spam.example");
    field(&v, "n", &f);
    avro_value_set_int(&f, 7);
    field(&v, "f", &f);
    avro_value_set_float(&f, 1.5f);
    field(&v, "d", &f);
    avro_value_set_double(&f, 0.1);
    field(&v, "ok", &f);
    avro_value_set_boolean(&f, 1);
    field(&v, "nothing", &f);
    avro_value_set_null(&f);
    field(&v, "raw", &f);
    avro_value_set_bytes(&f, "\x00\xff\x01", 3);
    field(&v, "fx", &f);
    avro_value_set_fixed(&f, "WXYZ", 4);
    field(&v, "color", &f);
    avro_value_set_enum(&f, 1);
    field(&v, "tags", &f);
    avro_value_append(&f, &g, NULL);
    avro_value_set_string(&g, "b");
    avro_value_append(&f, &g, NULL);
    avro_value_set_string(&g, "a");
    field(&v, "attrs", &f);
    avro_value_add(&f, "zz", &g, NULL, NULL);
    avro_value_set_long(&g, 1);
    avro_value_add(&f, "aa", &g, NULL, NULL);
    avro_value_set_long(&g, 2);
    field(&v, "session", &f);
    if (variant) {
        avro_value_set_branch(&f, 1, &g);
        avro_value_set_string(&g, "s1");
    } else {
        avro_value_set_branch(&f, 0, &g);
        avro_value_set_null(&g);
    }
    field(&v, "addr", &f);
    field(&f, "city", &g);
    avro_value_set_string(&g, "Oslo");
    field(&f, "zip", &g);
    avro_value_set_branch(&g, variant ? 1 : 0, &h);
    if (variant)
        avro_value_set_int(&h, 150);
    else
        avro_value_set_null(&h);
    field(&v, "maybe", &f);
    avro_value_set_branch(&f, variant ? 1 : 0, &g);
    if (variant) {
        field(&g, "city", &h);
        avro_value_set_string(&h, "Rome");
        field(&g, "zip", &h);
        avro_value_t z;
        avro_value_set_branch(&h, 0, &z);
        avro_value_set_null(&z);
    } else
        avro_value_set_null(&g);
    field(&v, "choice", &f);
    avro_value_set_branch(&f, variant, &g);
    if (variant == 0)
        avro_value_set_null(&g);
    else if (variant == 1) {
        field(&g, "x", &h);
        avro_value_set_string(&h, "ax");
    } else if (variant == 2) {
        field(&g, "x", &h);
        avro_value_set_long(&h, 99);
        field(&g, "y", &h);
        avro_value_set_int(&h, 5);
    } else
        avro_value_set_string(&g, "plain");
    write_value(&v, p);
    avro_value_decref(&v);
    avro_value_iface_decref(iface);
    avro_schema_decref(s);
}

/* -- extraction helpers -------------------------------------------------- */

static fm_avro_schema *schema(const char *json)
{
    char err[512];
    fm_avro_schema *s = fm_avro_schema_new(json, strlen(json), err,
                                           sizeof(err));
    if (!s)
        fail_msg("%s", err);
    return s;
}

static fm_avro_path *path(fm_avro_schema *s, const char *text)
{
    char err[512];
    fm_avro_path *p = fm_avro_path_compile(s, text, err, sizeof(err));
    if (!p)
        fail_msg("%s", err);
    return p;
}

/* The result of extracting `text` from p; the key in k (reset first). */
static fm_avro_result get(fm_avro_schema *s, const char *text,
                          const payload *p, fm_key *k, char *err,
                          size_t err_size)
{
    fm_avro_path *ph = path(s, text);
    fm_key_reset(k);
    /* an exact-size copy, so a read past the end is an ASan report */
    uint8_t *copy = malloc(p->len ? p->len : 1);
    assert_non_null(copy);
    memcpy(copy, p->b, p->len);
    err[0] = 0;
    fm_avro_result r = fm_avro_extract(ph, copy, p->len, k, err, err_size);
    free(copy);
    fm_avro_path_destroy(ph);
    return r;
}

static void assert_found(fm_avro_schema *s, const char *text,
                         const payload *p, const void *want, size_t n)
{
    fm_key k;
    char err[512];
    fm_key_init(&k);
    fm_avro_result r = get(s, text, p, &k, err, sizeof(err));
    if (r != FM_AVRO_FOUND)
        fail_msg("%s: result %d: %s", text, r, err);
    assert_int_equal(k.len, n);
    assert_memory_equal(k.p, want, n);
    fm_key_free(&k);
}

static void assert_missing(fm_avro_schema *s, const char *text,
                           const payload *p, const char *reason)
{
    fm_key k;
    char err[512];
    fm_key_init(&k);
    fm_avro_result r = get(s, text, p, &k, err, sizeof(err));
    if (r != FM_AVRO_MISSING)
        fail_msg("%s: result %d, want MISSING: %s", text, r, err);
    assert_int_equal(k.len, 0);
    if (!strstr(err, reason))
        fail_msg("%s: reason \"%s\" lacks \"%s\"", text, err, reason);
    fm_key_free(&k);
}

static void assert_bad(fm_avro_schema *s, const char *text, const payload *p,
                       const char *reason)
{
    fm_key k;
    char err[512];
    fm_key_init(&k);
    fm_key_bytes(&k, "pre", 3); /* left as it was */
    fm_avro_path *ph = path(s, text);
    fm_avro_result r = fm_avro_extract(ph, p->b, p->len, &k, err, sizeof(err));
    fm_avro_path_destroy(ph);
    if (r != FM_AVRO_BAD)
        fail_msg("%s: result %d, want BAD", text, r);
    assert_int_equal(k.len, 3);
    assert_true(fm_key_ok(&k));
    assert_ptr_equal(k.p, k.inl); /* nothing was allocated for the key */
    if (!strstr(err, reason))
        fail_msg("%s: reason \"%s\" lacks \"%s\"", text, err, reason);
    fm_key_free(&k);
}

/* The fm_key.h encoding of one element appended by hand. */
static void elem(fm_key *k, const void *b, size_t n)
{
    fm_key_mark m = fm_key_elem_begin(k);
    fm_key_bytes(k, b, n);
    fm_key_elem_end(k, m);
}

/* -- leaves ---------------------------------------------------------------- */

static void test_every_leaf(void **state)
{
    (void)state;
    fm_avro_schema *s = schema(SCHEMA);
    payload p;
    event(&p, 1);
    assert_found(s, "/id", &p, "\xffi-1234567890123", 16);
    assert_found(s, "/user", &p, "Ann", 3);
    assert_found(s, "/email", &p, "ann@spam.example", 16);
    assert_found(s, "/n", &p, "\xffi7", 3);
    assert_found(s, "/f", &p, "\xff" "d1.5", 5);
    assert_found(s, "/d", &p, "\xff" "d0.10000000000000001", 21);
    assert_found(s, "/ok", &p, "\xfft", 2);
    assert_found(s, "/raw", &p, "\x00\xff\x01", 3);
    assert_found(s, "/fx", &p, "WXYZ", 4);
    assert_found(s, "/color", &p, "GREEN", 5);
    assert_found(s, "/session", &p, "s1", 2);
    assert_found(s, "/addr/city", &p, "Oslo", 4);
    assert_found(s, "/addr/zip", &p, "\xffi150", 5);
    assert_found(s, "/maybe/city", &p, "Rome", 4);
    assert_found(s, "/choice/x", &p, "ax", 2);

    fm_key want;
    fm_key_init(&want);
    fm_key_compound(&want, 'a'); /* items in their order */
    elem(&want, "b", 1);
    elem(&want, "a", 1);
    assert_found(s, "/tags", &p, want.p, want.len);
    fm_key_reset(&want);
    fm_key_compound(&want, 'm'); /* entries sorted by key */
    elem(&want, "aa", 2);
    elem(&want, "\xffi2", 3);
    elem(&want, "zz", 2);
    elem(&want, "\xffi1", 3);
    assert_found(s, "/attrs", &p, want.p, want.len);
    fm_key_reset(&want);
    fm_key_compound(&want, 'r'); /* a nested null is a value, FF 'n' */
    elem(&want, "Rome", 4);
    elem(&want, "\xffn", 2);
    assert_found(s, "/maybe", &p, want.p, want.len);
    fm_key_free(&want);
    fm_avro_schema_destroy(s);
}

/* A null on the path, or a branch without the next field: missing, with
 * where and why. */
static void test_unions_and_null(void **state)
{
    (void)state;
    fm_avro_schema *s = schema(SCHEMA);
    payload p;
    event(&p, 0);
    assert_missing(s, "/nothing", &p, "/nothing is null");
    assert_missing(s, "/session", &p, "/session is null");
    assert_missing(s, "/addr/zip", &p, "/addr/zip is null");
    assert_missing(s, "/maybe/city", &p, "/maybe is null, without field city");
    assert_missing(s, "/choice/x", &p, "/choice is null");
    assert_found(s, "/addr/city", &p, "Oslo", 4);
    event(&p, 2); /* branch B: x is a long there */
    assert_found(s, "/choice/x", &p, "\xffi99", 4);
    assert_found(s, "/choice/y", &p, "\xffi5", 3);
    event(&p, 1); /* branch A has no y */
    assert_missing(s, "/choice/y", &p, "/choice is A, without field y");
    event(&p, 3); /* the string branch has no field at all */
    assert_missing(s, "/choice/x", &p, "/choice is string, without field x");
    fm_avro_schema_destroy(s);
}

/* -- the whole value against avro-c's own reading of it ------------------- */

/* fm_key.h's encoding of a value avro-c decoded: an encoder independent of
 * avro.c's, over avro-c's value interface. */
static void encode_value(avro_value_t *v, fm_key *k)
{
    const char *str;
    const void *buf;
    size_t size, n;
    int32_t i32;
    int64_t i64;
    float fl;
    double db;
    int bo;
    avro_value_t c;
    switch (avro_value_get_type(v)) {
    case AVRO_STRING:
        avro_value_get_string(v, &str, &size);
        fm_key_bytes(k, str, size - 1); /* avro-c counts the NUL */
        break;
    case AVRO_BYTES:
        avro_value_get_bytes(v, &buf, &size);
        fm_key_bytes(k, buf, size);
        break;
    case AVRO_FIXED:
        avro_value_get_fixed(v, &buf, &size);
        fm_key_bytes(k, buf, size);
        break;
    case AVRO_INT32:
        avro_value_get_int(v, &i32);
        fm_key_int(k, i32);
        break;
    case AVRO_INT64:
        avro_value_get_long(v, &i64);
        fm_key_int(k, i64);
        break;
    case AVRO_FLOAT:
        avro_value_get_float(v, &fl);
        fm_key_real(k, fl);
        break;
    case AVRO_DOUBLE:
        avro_value_get_double(v, &db);
        fm_key_real(k, db);
        break;
    case AVRO_BOOLEAN:
        avro_value_get_boolean(v, &bo);
        fm_key_bool(k, bo);
        break;
    case AVRO_NULL: fm_key_null(k); break;
    case AVRO_ENUM: {
        avro_value_get_enum(v, &i32);
        avro_schema_t es = avro_value_get_schema(v);
        str = avro_schema_enum_get(es, i32);
        fm_key_bytes(k, str, strlen(str));
        break;
    }
    case AVRO_UNION:
        avro_value_get_current_branch(v, &c);
        encode_value(&c, k);
        break;
    case AVRO_RECORD:
    case AVRO_ARRAY:
    case AVRO_MAP: {
        avro_type_t t = avro_value_get_type(v);
        fm_key_compound(k, t == AVRO_RECORD ? 'r' : t == AVRO_ARRAY ? 'a' : 'm');
        size_t start = k->len;
        avro_value_get_size(v, &n);
        for (size_t i = 0; i < n; i++) {
            const char *name;
            avro_value_get_by_index(v, i, &c, &name);
            if (t == AVRO_MAP)
                elem(k, name, strlen(name));
            fm_key_mark m = fm_key_elem_begin(k);
            encode_value(&c, k);
            fm_key_elem_end(k, m);
        }
        if (t == AVRO_MAP)
            assert_true(fm_key_map_sort(k, start));
        break;
    }
    default: fail_msg("type %d", avro_value_get_type(v));
    }
}

static void test_whole_value_agrees_with_avro_c(void **state)
{
    (void)state;
    fm_avro_schema *s = schema(SCHEMA);
    avro_schema_t as = avro_parse(SCHEMA);
    avro_value_iface_t *iface = avro_generic_class_from_schema(as);
    for (int variant = 0; variant < 4; variant++) {
        payload p;
        event(&p, variant);
        avro_value_t v;
        assert_int_equal(avro_generic_value_new(iface, &v), 0);
        avro_reader_t rd = avro_reader_memory((const char *)p.b,
                                              (int64_t)p.len);
        assert_int_equal(avro_value_read(rd, &v), 0);
        avro_reader_free(rd);
        fm_key want;
        fm_key_init(&want);
        encode_value(&v, &want);
        assert_true(fm_key_ok(&want));
        assert_found(s, "", &p, want.p, want.len);
        assert_found(s, "/", &p, want.p, want.len);
        /* each field alone is its element of the whole */
        fm_key_free(&want);
        avro_value_decref(&v);
    }
    avro_value_iface_decref(iface);
    avro_schema_decref(as);
    fm_avro_schema_destroy(s);
}

/* -- damage ---------------------------------------------------------------- */

/* Every strict prefix of a real record is BAD (the reader checks every
 * byte of the value, also past the leaf), for every path; never a crash
 * (ASan checks the exact-size copies). */
static void test_every_truncation(void **state)
{
    (void)state;
    static const char *paths[] = {"", "/id", "/email", "/session",
                                  "/addr/zip", "/maybe/city", "/choice/x",
                                  "/choice/y", "/attrs", "/tags"};
    fm_avro_schema *s = schema(SCHEMA);
    for (int variant = 0; variant < 4; variant++) {
        payload p, cut;
        event(&p, variant);
        for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
            for (size_t n = 0; n < p.len; n++) {
                memcpy(cut.b, p.b, n);
                cut.len = n;
                fm_key k;
                char err[512];
                fm_key_init(&k);
                fm_avro_result r = get(s, paths[i], &cut, &k, err,
                                       sizeof(err));
                if (r != FM_AVRO_BAD)
                    fail_msg("%s cut at %zu of %zu: result %d", paths[i], n,
                             p.len, r);
                assert_non_null(strstr(err, "past the end"));
                fm_key_free(&k);
            }
    }
    fm_avro_schema_destroy(s);
}

static payload bytes(const char *b, size_t n)
{
    payload p;
    memcpy(p.b, b, n);
    p.len = n;
    return p;
}

#define BYTES(lit) bytes(lit, sizeof(lit) - 1)

static void test_damage(void **state)
{
    (void)state;
    fm_avro_schema *s = schema(
        "{\"type\":\"record\",\"name\":\"R\",\"fields\":["
        "{\"name\":\"u\",\"type\":[\"null\",\"string\"]},"
        "{\"name\":\"e\",\"type\":{\"type\":\"enum\",\"name\":\"E\","
        "\"symbols\":[\"A\",\"B\"]}},"
        "{\"name\":\"b\",\"type\":\"boolean\"},"
        "{\"name\":\"i\",\"type\":\"int\"},"
        "{\"name\":\"a\",\"type\":{\"type\":\"array\",\"items\":\"long\"}}]}");
    /* a good one: u "x", e B, b true, i 1, a [] */
    payload p = BYTES("\x02\x02x\x02\x01\x02\x00");
    assert_found(s, "/u", &p, "x", 1);
    p = BYTES("\x04\x02x\x02\x01\x02\x00");
    assert_bad(s, "/u", &p, "union branch 2 of 2 at byte 1");
    p = BYTES("\x01\x02x\x02\x01\x02\x00"); /* zigzag 1 is -1 */
    assert_bad(s, "/u", &p, "union branch -1 of 2");
    p = BYTES("\x02\x01x\x02\x01\x02\x00");
    assert_bad(s, "/u", &p, "field u of record R: string length -1 is "
                            "negative");
    p = BYTES("\x02\x20x\x02\x01\x02\x00");
    assert_bad(s, "/u", &p, "string length 16 past the end (5 left)");
    /* a string claiming 2 GB: no allocation (assert_bad checks the key
     * stayed inline) and no read past the end */
    p = BYTES("\x02\x80\x80\x80\x80\x10xyz");
    assert_bad(s, "/u", &p, "string length 2147483648 past the end");
    p = BYTES("\x02\x02x\x04\x01\x02\x00");
    assert_bad(s, "/u", &p, "enum E symbol 2 of 2");
    p = BYTES("\x02\x02x\x02\x02\x02\x00");
    assert_bad(s, "/i", &p, "field b of record R: boolean byte 0x02");
    p = BYTES("\x02\x02x\x02\x01\xff\xff\xff\xff\x7f\x00");
    assert_bad(s, "/u", &p, "int: varint longer than 32 bits");
    p = BYTES("\x02\x02x\x02\x01\xff\xff\xff\xff\x0f\x00");
    assert_found(s, "/i", &p, "\xffi-2147483648", 13);
    p = BYTES("\x02\x02x\x02\x01\xfe\xff\xff\xff\x0f\x00");
    assert_found(s, "/i", &p, "\xffi2147483647", 12);
    /* a block of 2^40 longs in 2 bytes: refused before any is read */
    p = BYTES("\x02\x02x\x02\x01\x02\x80\x80\x80\x80\x80\x40\x02\x00");
    assert_bad(s, "/a", &p, "array block of 1099511627776 items of at least "
                            "1 bytes past the end");
    /* a block stating its size (count -2, then its bytes): 2 is right,
     * 3 and 1 are belied by the items */
    fm_key want;
    fm_key_init(&want);
    fm_key_compound(&want, 'a');
    elem(&want, "\xffi1", 3);
    elem(&want, "\xffi2", 3);
    p = BYTES("\x02\x02x\x02\x01\x02\x03\x04\x02\x04\x00");
    assert_found(s, "/a", &p, want.p, want.len);
    fm_key_free(&want);
    p = BYTES("\x02\x02x\x02\x01\x02\x03\x06\x02\x04\x00");
    assert_bad(s, "/a", &p, "array block states 11 bytes, its items took 10");
    p = BYTES("\x02\x02x\x02\x01\x02\x03\x02\x02\x04\x00");
    assert_bad(s, "/a", &p, "array block states 9 bytes, its items took 10");
    /* a varint running past 64 bits */
    p = BYTES("\x02\x02x\x02\x01\x02\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f");
    assert_bad(s, "/a", &p, "varint longer than 64 bits");
    fm_avro_schema_destroy(s);
}

/* Items that take no bytes (null, an empty record): a count is bounded by
 * FM_AVRO_MAX_EMPTY_ITEMS per payload, not by the bytes left. */
static void test_empty_items(void **state)
{
    (void)state;
    fm_avro_schema *s = schema(
        "{\"type\":\"array\",\"items\":\"null\"}");
    payload p = BYTES("\xd0\x0f\x00"); /* 1000 nulls */
    fm_key k;
    char err[512];
    fm_key_init(&k);
    assert_int_equal(get(s, "", &p, &k, err, sizeof(err)), FM_AVRO_FOUND);
    assert_int_equal(k.len, 2 + 1000 * 6);
    fm_key_free(&k);
    p = BYTES("\x80\x80\x80\x80\x80\x80\x80\x80\x01\x00"); /* 2^55 nulls */
    assert_bad(s, "", &p, "items that take no bytes: more than 4096");
    fm_avro_schema_destroy(s);
}

/* A recursive schema (a linked list): paths through it, and a value
 * nested past FM_AVRO_MAX_DEPTH refused (no stack exhaustion). */
static void test_recursive(void **state)
{
    (void)state;
    static const uint8_t no_bytes[2] = {0, 0};
    fm_avro_schema *s = schema(
        "{\"type\":\"record\",\"name\":\"Node\",\"fields\":["
        "{\"name\":\"v\",\"type\":\"int\"},"
        "{\"name\":\"next\",\"type\":[\"null\",\"Node\"]}]}");
    payload p = BYTES("\x02\x02\x04\x02\x06\x00"); /* 1 -> 2 -> 3 */
    assert_found(s, "/next/next/v", &p, "\xffi3", 3);
    assert_missing(s, "/next/next/next/v", &p, "/next/next/next is null");
    /* 100000 nodes */
    uint8_t *big = malloc(200001);
    assert_non_null(big);
    for (size_t i = 0; i < 100000; i++) {
        big[2 * i] = 0x02;     /* v = 1 */
        big[2 * i + 1] = 0x02; /* next: branch Node */
    }
    big[200000] = 0; /* ... then null: never reached */
    fm_avro_path *ph = path(s, "/v");
    fm_key k;
    char err[512];
    fm_key_init(&k);
    assert_int_equal(fm_avro_extract(ph, big, 200001, &k, err, sizeof(err)),
                     FM_AVRO_BAD);
    assert_non_null(strstr(err, "nested deeper than 256"));
    fm_avro_path_destroy(ph);
    free(big);
    fm_avro_schema_destroy(s);
    /* a record that holds itself outside a union has no finite value:
     * avro-c takes the schema, every payload is BAD */
    s = schema("{\"type\":\"record\",\"name\":\"R\",\"fields\":["
               "{\"name\":\"a\",\"type\":\"R\"}]}");
    ph = path(s, "/a/a");
    assert_int_equal(fm_avro_extract(ph, no_bytes, 2, &k, err,
                                     sizeof(err)),
                     FM_AVRO_BAD);
    assert_non_null(strstr(err, "nested deeper than 256"));
    assert_int_equal(k.len, 0);
    fm_avro_path_destroy(ph);
    fm_key_free(&k);
    fm_avro_schema_destroy(s);
}

/* -- schema and path errors ---------------------------------------------- */

static void assert_schema_error(const char *json, const char *reason)
{
    char err[512] = "";
    fm_avro_schema *s = fm_avro_schema_new(json, strlen(json), err,
                                           sizeof(err));
    if (s)
        fail_msg("schema %s parsed", json);
    if (!strstr(err, reason))
        fail_msg("reason \"%s\" lacks \"%s\"", err, reason);
}

static void assert_path_error(fm_avro_schema *s, const char *text,
                              const char *reason)
{
    char err[512] = "";
    fm_avro_path *p = fm_avro_path_compile(s, text, err, sizeof(err));
    if (p)
        fail_msg("path %s compiled", text);
    if (!strstr(err, reason))
        fail_msg("reason \"%s\" lacks \"%s\"", err, reason);
}

static void test_schema_errors(void **state)
{
    (void)state;
    assert_schema_error("{\"type\":", "avro: schema does not parse: ");
    assert_schema_error("{\"type\":\"recrod\",\"name\":\"R\",\"fields\":[]}",
                        "avro: schema does not parse: ");
    assert_schema_error("{\"type\":\"record\",\"name\":\"R\",\"fields\":["
                        "{\"name\":\"a\",\"type\":\"Nope\"}]}",
                        "avro: schema does not parse: ");
    assert_schema_error("", "avro: schema does not parse: ");
    /* avro-c leaks on this error path unless avro.c frees what it left:
     * the sanitizer build's leak check fails this test then */
    assert_schema_error("[\"null\",{\"type\":\"record\",\"name\":\"Q\","
                        "\"fields\":[{\"name\":\"x\",\"type\":\"int\"}]},"
                        "{\"type\":\"record\",\"name\":\"Q\",\"fields\":["
                        "{\"name\":\"y\",\"type\":\"long\"}]}]",
                        "avro: schema does not parse: ");

    fm_avro_schema *s = schema(SCHEMA);
    assert_path_error(s, "/nope", "record Event (at /) has no field nope");
    assert_path_error(s, "/addr/town", "record Addr (at /addr) has no field "
                                       "town");
    assert_path_error(s, "/id/x", "/id is a long, not a record with field x");
    assert_path_error(s, "/tags/x", "/tags is an array");
    assert_path_error(s, "id", "does not begin with '/'");
    assert_path_error(s, "/addr//city", "empty field name at byte 6");
    assert_path_error(s, "/choice/z", "no record branch of the union at "
                                      "/choice has a field z");
    assert_path_error(s, "/session/x", "no record branch of the union at "
                                       "/session has a field x");
    /* a path outlives the caller's reference to its schema */
    fm_avro_path *p = path(s, "/user");
    fm_avro_schema_destroy(s);
    payload pl;
    event(&pl, 1);
    fm_key k;
    char err[512];
    fm_key_init(&k);
    assert_int_equal(fm_avro_extract(p, pl.b, pl.len, &k, err, sizeof(err)),
                     FM_AVRO_FOUND);
    assert_int_equal(k.len, 3);
    fm_key_free(&k);
    fm_avro_path_destroy(p);
    fm_avro_schema_destroy(NULL);
    fm_avro_path_destroy(NULL);
}

/* A top-level primitive (a registry holds "\"string\"" for plain string
 * values) and a top-level union. */
static void test_top_level(void **state)
{
    (void)state;
    fm_avro_schema *s = schema("\"string\"");
    payload p = BYTES("\x06" "abc");
    assert_found(s, "", &p, "abc", 3);
    assert_path_error(s, "/x", "/ is a string, not a record with field x");
    fm_avro_schema_destroy(s);
    s = schema("[\"null\",{\"type\":\"record\",\"name\":\"R\",\"fields\":["
               "{\"name\":\"x\",\"type\":\"int\"}]}]");
    p = BYTES("\x02\x0e");
    assert_found(s, "/x", &p, "\xffi7", 3);
    p = BYTES("\x00");
    assert_missing(s, "/x", &p, "/ is null, without field x");
    assert_missing(s, "", &p, "/ is null");
    fm_avro_schema_destroy(s);
}

/* Logical types are their underlying types. */
static void test_logical_types(void **state)
{
    (void)state;
    fm_avro_schema *s = schema(
        "{\"type\":\"record\",\"name\":\"L\",\"fields\":["
        "{\"name\":\"id\",\"type\":{\"type\":\"string\","
        "\"logicalType\":\"uuid\"}},"
        "{\"name\":\"day\",\"type\":{\"type\":\"int\","
        "\"logicalType\":\"date\"}},"
        "{\"name\":\"at\",\"type\":{\"type\":\"long\","
        "\"logicalType\":\"timestamp-millis\"}},"
        "{\"name\":\"amount\",\"type\":{\"type\":\"bytes\","
        "\"logicalType\":\"decimal\",\"precision\":6,\"scale\":2}}]}");
    payload p = BYTES("\x08u-01\x02\x04\x04\x01\x86");
    assert_found(s, "/id", &p, "u-01", 4);
    assert_found(s, "/day", &p, "\xffi1", 3);
    assert_found(s, "/at", &p, "\xffi2", 3);
    assert_found(s, "/amount", &p, "\x01\x86", 2);
    fm_avro_schema_destroy(s);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_leaf),
        cmocka_unit_test(test_unions_and_null),
        cmocka_unit_test(test_whole_value_agrees_with_avro_c),
        cmocka_unit_test(test_every_truncation),
        cmocka_unit_test(test_damage),
        cmocka_unit_test(test_empty_items),
        cmocka_unit_test(test_recursive),
        cmocka_unit_test(test_schema_errors),
        cmocka_unit_test(test_top_level),
        cmocka_unit_test(test_logical_types),
    };
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
