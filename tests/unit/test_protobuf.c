/*
 * test_protobuf.c -- the Protobuf wire reader (formats/include/
 * fm_protobuf.h) on bytes the real protoc encodes: every leaf type,
 * defaults and presence, fields out of order and repeated, merged
 * messages, packed and unpacked, maps, oneofs, unknown fields, every BAD
 * case with its named field and offset, every truncation of a real record,
 * Confluent framing, and a timing of /id.
 *
 * The test runs protoc itself (BS_PROTOC, `protoc --encode=TYPE`), so each
 * case's text format sits beside what it must read as; a CMake step
 * writing .bin files would put the inputs in another file from the
 * assertions.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fm_frame.h>
#include <fm_protobuf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef BS_PROTOC
#define BS_PROTOC "protoc"
#endif

static char dir[64];

/* ---------------------------------------------------------- the schema */

#define HEAD                                                                 \
    "syntax = \"proto3\";\n"                                                 \
    "package t;\n"                                                           \
    "enum Color { COLOR_UNSPECIFIED = 0; RED = 1; GREEN = 2; }\n"            \
    "message Inner { string s = 1; int32 i = 2; Inner2 deeper = 3;\n"        \
    "                repeated int32 r = 4; }\n"                              \
    "message Inner2 { string leaf = 1; }\n"
#define FIELDS_A                                                             \
    "  double d = 1; float f = 2; int64 i64 = 3; uint64 u64 = 4;\n"          \
    "  int32 i32 = 5; fixed64 fx64 = 6; fixed32 fx32 = 7; bool b = 8;\n"     \
    "  string s = 9; bytes by = 10; uint32 u32 = 11; Color color = 12;\n"    \
    "  sfixed32 sfx32 = 13; sfixed64 sfx64 = 14; sint32 si32 = 15;\n"        \
    "  sint64 si64 = 16; Inner inner = 17;\n"
#define PACKED "  repeated int32 packed_i = 18;\n"
#define UNPACKED "  repeated int32 packed_i = 18 [packed = false];\n"
#define FIELDS_B                                                             \
    "  repeated int32 unpacked_i = 19 [packed = false];\n"                   \
    "  repeated string tags = 20;\n"                                         \
    "  map<string, string> attrs = 21;\n"                                    \
    "  map<string, Inner> objs = 22;\n"                                      \
    "  map<int32, string> by_num = 23;\n"                                    \
    "  oneof choice { string name = 24; int64 num = 25; Inner sub = 26; }\n" \
    "  optional int32 opt = 27;\n"                                           \
    "  repeated Inner inners = 28;\n"                                        \
    "  string id = 29;\n"
#define EXTRA                                                                \
    "  string x1 = 100; Inner x2 = 101; fixed32 x3 = 102; fixed64 x4 = 103;\n" \
    "  repeated sint64 x5 = 104; float x6 = 105;\n"

static const char all_proto[] = HEAD "message All {\n" FIELDS_A PACKED FIELDS_B "}\n";
static const char unpacked_proto[] =
    HEAD "message All {\n" FIELDS_A UNPACKED FIELDS_B "}\n";
static const char extra_proto[] =
    HEAD "message All {\n" FIELDS_A PACKED FIELDS_B EXTRA "}\n";

static const char p2_proto[] =
    "syntax = \"proto2\";\npackage p2;\n"
    "message M { required string id = 1; optional int32 n = 2 [default = 7];\n"
    "            optional Sub sub = 3; repeated int32 r = 4; }\n"
    "message Sub { optional string a = 1; }\n"
    "message Node { optional Node child = 1; optional string v = 2; }\n";

/* ------------------------------------------------------------- helpers */

static fm_key want; /* expected keys, built with fm_key's own calls */

static int setup(void **state)
{
    (void)state;
    fm_key_init(&want);
    snprintf(dir, sizeof(dir), "/tmp/bs_pbXXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    static const char *const names[] = {"t.proto", "in.txt", "out.bin",
                                        "err.txt"};
    char p[128];
    for (size_t i = 0; i < 4; i++) {
        snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
        unlink(p);
    }
    return rmdir(dir);
}

static void write_file(const char *name, const char *text)
{
    char p[128];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    assert_int_equal(fclose(f), 0);
}

/* A growing byte buffer: the records the cases build. */
typedef struct buf {
    uint8_t p[8192];
    size_t n;
} buf;

/* Appends protoc's encoding of `text` as message `type` of schema `proto`. */
static void encode(buf *b, const char *proto, const char *type,
                   const char *text)
{
    write_file("t.proto", proto);
    write_file("in.txt", text);
    char cmd[512];
    snprintf(cmd, sizeof(cmd),
             "'%s' --encode=%s -I '%s' '%s/t.proto' < '%s/in.txt' > "
             "'%s/out.bin' 2> '%s/err.txt'",
             BS_PROTOC, type, dir, dir, dir, dir, dir);
    if (system(cmd) != 0) {
        char p[128], e[512] = "";
        snprintf(p, sizeof(p), "%s/err.txt", dir);
        FILE *f = fopen(p, "r");
        if (f) {
            size_t n = fread(e, 1, sizeof(e) - 1, f);
            e[n] = '\0';
            fclose(f);
        }
        fail_msg("protoc --encode=%s of \"%s\": %s", type, text, e);
    }
    char p[128];
    snprintf(p, sizeof(p), "%s/out.bin", dir);
    FILE *f = fopen(p, "rb");
    assert_non_null(f);
    b->n += fread(b->p + b->n, 1, sizeof(b->p) - b->n, f);
    assert_true(feof(f));
    fclose(f);
}

static void enc_all(buf *b, const char *text)
{
    encode(b, all_proto, "t.All", text);
}

static fm_proto_schema *schema(const char *text)
{
    char err[512];
    fm_proto_source src = {"t.proto", text, strlen(text)};
    fm_proto_schema *s = fm_proto_schema_new(&src, 1, 0, err, sizeof(err));
    if (!s)
        fail_msg("%s", err);
    return s;
}

static const fm_proto_message *all_msg(const fm_proto_schema *s)
{
    const fm_proto_message *m = fm_proto_schema_message(s, "t.All");
    assert_non_null(m);
    return m;
}

/* Reads path from b; the result, with the key in k and errstr in err. */
static fm_pb_result get(const fm_proto_message *m, const char *path,
                        const uint8_t *p, size_t n, fm_key *k, char *err,
                        size_t size)
{
    char cerr[512];
    fm_pb_path *pp = fm_pb_path_compile(m, path, cerr, sizeof(cerr));
    if (!pp)
        fail_msg("compile %s: %s", path, cerr);
    fm_pb_result r = fm_pb_extract(pp, p, n, k, err, size);
    fm_pb_path_destroy(pp);
    return r;
}

/* path must read as exactly the key want. */
static void expect(const fm_proto_message *m, const buf *b, const char *path,
                   const fm_key *w)
{
    fm_key k;
    char err[512] = "";
    fm_key_init(&k);
    fm_pb_result r = get(m, path, b->p, b->n, &k, err, sizeof(err));
    if (r != FM_PB_FOUND)
        fail_msg("%s: result %d (%s)", path, r, err);
    if (k.len != w->len || memcmp(k.p, w->p, k.len) != 0) {
        char got[256] = "", exp[256] = "";
        size_t gn = 0, en = 0;
        for (size_t i = 0; i < k.len && gn < sizeof(got) - 4; i++)
            gn += (size_t)snprintf(got + gn, sizeof(got) - gn, "%02x", k.p[i]);
        for (size_t i = 0; i < w->len && en < sizeof(exp) - 4; i++)
            en += (size_t)snprintf(exp + en, sizeof(exp) - en, "%02x",
                                   w->p[i]);
        fail_msg("%s: key %s, want %s", path, got, exp);
    }
    fm_key_free(&k);
}

static const fm_key *w_str(const char *s)
{
    fm_key_reset(&want);
    fm_key_bytes(&want, s, strlen(s));
    return &want;
}

static const fm_key *w_int(int64_t v)
{
    fm_key_reset(&want);
    fm_key_int(&want, v);
    return &want;
}

static const fm_key *w_uint(uint64_t v)
{
    fm_key_reset(&want);
    fm_key_uint(&want, v);
    return &want;
}

static const fm_key *w_real(double v)
{
    fm_key_reset(&want);
    fm_key_real(&want, v);
    return &want;
}

static const fm_key *w_bool(bool v)
{
    fm_key_reset(&want);
    fm_key_bool(&want, v);
    return &want;
}

/* One element of a compound: a string, an integer, or null. */
static void elem_str(fm_key *k, const char *s)
{
    fm_key_mark mk = fm_key_elem_begin(k);
    fm_key_bytes(k, s, strlen(s));
    fm_key_elem_end(k, mk);
}

static void elem_int(fm_key *k, int64_t v)
{
    fm_key_mark mk = fm_key_elem_begin(k);
    fm_key_int(k, v);
    fm_key_elem_end(k, mk);
}

static void elem_null(fm_key *k)
{
    fm_key_mark mk = fm_key_elem_begin(k);
    fm_key_null(k);
    fm_key_elem_end(k, mk);
}

static const fm_key *w_ints(const int64_t *v, size_t n)
{
    fm_key_reset(&want);
    fm_key_compound(&want, 'a');
    for (size_t i = 0; i < n; i++)
        elem_int(&want, v[i]);
    return &want;
}

/* Appends Inner {s, i, deeper {leaf} or null, r} as a message key. */
static void w_inner(fm_key *k, const char *s, int64_t i, const char *leaf,
                    const int64_t *r, size_t nr)
{
    fm_key_compound(k, 'r');
    elem_str(k, s);
    elem_int(k, i);
    fm_key_mark mk = fm_key_elem_begin(k);
    if (leaf) {
        fm_key_compound(k, 'r');
        elem_str(k, leaf);
    } else {
        fm_key_null(k);
    }
    fm_key_elem_end(k, mk);
    mk = fm_key_elem_begin(k);
    fm_key_compound(k, 'a');
    for (size_t j = 0; j < nr; j++)
        elem_int(k, r[j]);
    fm_key_elem_end(k, mk);
}

static void expect_result(const fm_proto_message *m, const uint8_t *p,
                          size_t n, const char *path, fm_pb_result r,
                          const char *err_has)
{
    fm_key k;
    char err[512] = "";
    fm_key_init(&k);
    fm_pb_result got = get(m, path, p, n, &k, err, sizeof(err));
    if (got != r || (err_has && !strstr(err, err_has)))
        fail_msg("%s: result %d \"%s\", want %d \"%s\"", path, got, err, r,
                 err_has ? err_has : "");
    fm_key_free(&k);
}

/* --------------------------------------------------------------- cases */

/* One field of each type, written by protoc, read by value. */
static const char *const every_field[] = {
    "d: 1.5",
    "f: 2.5",
    "i64: -5",
    "u64: 18446744073709551615",
    "i32: -7",
    "fx64: 9",
    "fx32: 4294967295",
    "b: true",
    "s: \"hello\"",
    "by: \"\\000\\377\"",
    "u32: 4294967295",
    "color: GREEN",
    "sfx32: -3",
    "sfx64: -4",
    "si32: -2147483648",
    "si64: -9223372036854775808",
    "inner { s: \"x\" i: 1 deeper { leaf: \"L\" } r: [1, 2] }",
    "packed_i: [1, 300, -1]",
    "unpacked_i: 4",
    "unpacked_i: 5",
    "tags: \"a\"",
    "tags: \"b\"",
    "attrs { key: \"size\" value: \"L\" }",
    "attrs { key: \"color\" value: \"red\" }",
    "attrs { key: \"a/b\" value: \"slash\" }",
    "objs { key: \"k\" value { s: \"v\" } }",
    "by_num { key: -7 value: \"minus seven\" }",
    "name: \"nm\"",
    "opt: 0",
    "inners { s: \"i1\" }",
    "inners { i: 2 }",
    "id: \"ID-1\"",
};

static void build_every(buf *b, size_t *cuts)
{
    b->n = 0;
    for (size_t i = 0; i < sizeof(every_field) / sizeof(every_field[0]); i++) {
        enc_all(b, every_field[i]);
        if (cuts)
            cuts[i] = b->n;
    }
}

static void test_every_leaf(void **state)
{
    (void)state;
    fm_proto_schema *s = schema(all_proto);
    const fm_proto_message *m = all_msg(s);
    buf b;
    build_every(&b, NULL);
    expect(m, &b, "/d", w_real(1.5));
    expect(m, &b, "/f", w_real(2.5));
    expect(m, &b, "/i64", w_int(-5));
    expect(m, &b, "/u64", w_uint(UINT64_MAX));
    expect(m, &b, "/i32", w_int(-7));
    expect(m, &b, "/fx64", w_uint(9));
    expect(m, &b, "/fx32", w_uint(UINT32_MAX));
    expect(m, &b, "/b", w_bool(true));
    expect(m, &b, "/s", w_str("hello"));
    fm_key_reset(&want);
    fm_key_bytes(&want, "\0\xff", 2);
    expect(m, &b, "/by", &want);
    expect(m, &b, "/u32", w_uint(UINT32_MAX));
    expect(m, &b, "/color", w_str("GREEN"));
    expect(m, &b, "/sfx32", w_int(-3));
    expect(m, &b, "/sfx64", w_int(-4));
    expect(m, &b, "/si32", w_int(INT32_MIN));
    expect(m, &b, "/si64", w_int(INT64_MIN));
    expect(m, &b, "/inner/s", w_str("x"));
    expect(m, &b, "/inner/deeper/leaf", w_str("L"));
    expect(m, &b, "/inner/r", w_ints((int64_t[]){1, 2}, 2));
    expect(m, &b, "/packed_i", w_ints((int64_t[]){1, 300, -1}, 3));
    expect(m, &b, "/unpacked_i", w_ints((int64_t[]){4, 5}, 2));
    expect(m, &b, "/attrs/color", w_str("red"));
    expect(m, &b, "/attrs/a~1b", w_str("slash"));
    expect(m, &b, "/objs/k/s", w_str("v"));
    expect(m, &b, "/objs/k/i", w_int(0));
    expect(m, &b, "/by_num/-7", w_str("minus seven"));
    expect(m, &b, "/name", w_str("nm"));
    expect(m, &b, "/opt", w_int(0));
    expect(m, &b, "/id", w_str("ID-1"));
    expect_result(m, b.p, b.n, "/num", FM_PB_MISSING, NULL);
    expect_result(m, b.p, b.n, "/sub/s", FM_PB_MISSING, NULL);
    expect_result(m, b.p, b.n, "/attrs/shape", FM_PB_MISSING, NULL);
    expect_result(m, b.p, b.n, "/by_num/7", FM_PB_MISSING, NULL);

    /* Compound leaves. */
    fm_key_reset(&want);
    w_inner(&want, "x", 1, "L", (int64_t[]){1, 2}, 2);
    expect(m, &b, "/inner", &want);
    fm_key_reset(&want);
    fm_key_compound(&want, 'a');
    for (int i = 0; i < 2; i++) {
        fm_key_mark mk = fm_key_elem_begin(&want);
        w_inner(&want, i ? "" : "i1", i ? 2 : 0, NULL, NULL, 0);
        fm_key_elem_end(&want, mk);
    }
    expect(m, &b, "/inners", &want);
    fm_key_reset(&want);
    fm_key_compound(&want, 'a');
    elem_str(&want, "a");
    elem_str(&want, "b");
    expect(m, &b, "/tags", &want);
    /* The map sorted by key: a/b, color, size (written size first). */
    fm_key_reset(&want);
    fm_key_compound(&want, 'm');
    static const char *const kv[] = {"a/b", "slash", "color", "red", "size",
                                     "L"};
    for (int i = 0; i < 6; i++)
        elem_str(&want, kv[i]);
    expect(m, &b, "/attrs", &want);
    fm_key_free(&want);
    fm_proto_schema_destroy(s);
}

/* An empty payload: implicit fields read as defaults, explicit ones are
 * missing, repeated ones empty. */
static void test_defaults(void **state)
{
    (void)state;
    fm_proto_schema *s = schema(all_proto);
    const fm_proto_message *m = all_msg(s);
    buf b = {.n = 0};
    expect(m, &b, "/i32", w_int(0));
    expect(m, &b, "/d", w_int(0));
    expect(m, &b, "/b", w_bool(false));
    expect(m, &b, "/s", w_str(""));
    expect(m, &b, "/by", w_str(""));
    expect(m, &b, "/color", w_str("COLOR_UNSPECIFIED"));
    expect(m, &b, "/tags", (fm_key_reset(&want), fm_key_compound(&want, 'a'),
                            &want));
    expect(m, &b, "/attrs", (fm_key_reset(&want), fm_key_compound(&want, 'm'),
                             &want));
    expect_result(m, b.p, 0, "/opt", FM_PB_MISSING, NULL);
    expect_result(m, b.p, 0, "/inner", FM_PB_MISSING, NULL);
    expect_result(m, b.p, 0, "/inner/s", FM_PB_MISSING, NULL);
    expect_result(m, b.p, 0, "/name", FM_PB_MISSING, NULL);
    expect_result(m, b.p, 0, "/attrs/x", FM_PB_MISSING, NULL);
    /* A present but empty inner message: its fields are defaults. */
    enc_all(&b, "inner { }");
    expect(m, &b, "/inner/s", w_str(""));
    fm_key_reset(&want);
    w_inner(&want, "", 0, NULL, NULL, 0);
    expect(m, &b, "/inner", &want);
    /* A map entry without its value: the value's default. */
    b.n = 0;
    enc_all(&b, "attrs { key: \"k\" } objs { key: \"o\" }");
    expect(m, &b, "/attrs/k", w_str(""));
    expect(m, &b, "/objs/o/s", w_str(""));
    fm_key_reset(&want);
    w_inner(&want, "", 0, NULL, NULL, 0);
    expect(m, &b, "/objs/o", &want);
    /* An enum number the schema does not name: the integer. */
    b.n = 0;
    b.p[b.n++] = 12 << 3;
    b.p[b.n++] = 77;
    expect(m, &b, "/color", w_int(77));

    /* proto2: optional fields are absent, not defaults. */
    fm_proto_schema *s2 = schema(p2_proto);
    const fm_proto_message *m2 = fm_proto_schema_message(s2, "p2.M");
    b.n = 0;
    encode(&b, p2_proto, "p2.M", "id: \"x\"");
    expect(m2, &b, "/id", w_str("x"));
    expect_result(m2, b.p, b.n, "/n", FM_PB_MISSING, NULL);
    expect_result(m2, b.p, b.n, "/sub/a", FM_PB_MISSING, NULL);
    /* The whole message: id, then null for n and sub, [] for r. */
    fm_key_reset(&want);
    fm_key_compound(&want, 'r');
    elem_str(&want, "x");
    elem_null(&want);
    elem_null(&want);
    fm_key_mark mk = fm_key_elem_begin(&want);
    fm_key_compound(&want, 'a');
    fm_key_elem_end(&want, mk);
    expect(m2, &b, "", &want);
    fm_key_free(&want);
    fm_proto_schema_destroy(s2);
    fm_proto_schema_destroy(s);
}

/* Fields in any order; a scalar's last occurrence wins; occurrences of a
 * message merge, at every level. */
static void test_order_and_merge(void **state)
{
    (void)state;
    fm_proto_schema *s = schema(all_proto);
    const fm_proto_message *m = all_msg(s);
    buf b = {.n = 0};
    enc_all(&b, "id: \"first\" s: \"b\"");
    enc_all(&b, "i32: 3 inner { s: \"x\" i: 1 r: [1] }");
    enc_all(&b, "s: \"c\" inner { i: 2 deeper { leaf: \"L\" } r: [3] }");
    enc_all(&b, "inner { deeper { } } id: \"last\"");
    expect(m, &b, "/s", w_str("c"));
    expect(m, &b, "/i32", w_int(3));
    expect(m, &b, "/id", w_str("last"));
    expect(m, &b, "/inner/s", w_str("x"));
    expect(m, &b, "/inner/i", w_int(2));
    expect(m, &b, "/inner/deeper/leaf", w_str("L"));
    expect(m, &b, "/inner/r", w_ints((int64_t[]){1, 3}, 2));
    fm_key_reset(&want);
    w_inner(&want, "x", 2, "L", (int64_t[]){1, 3}, 2);
    expect(m, &b, "/inner", &want);
    enc_all(&b, "inner { deeper { leaf: \"M\" } }");
    expect(m, &b, "/inner/deeper/leaf", w_str("M"));
    /* A map's repeated key: the last entry wins, once. */
    b.n = 0;
    enc_all(&b, "attrs { key: \"color\" value: \"red\" }");
    enc_all(&b, "attrs { key: \"size\" value: \"S\" }");
    enc_all(&b, "attrs { key: \"color\" value: \"blue\" }");
    expect(m, &b, "/attrs/color", w_str("blue"));
    fm_key_reset(&want);
    fm_key_compound(&want, 'm');
    static const char *const kv[] = {"color", "blue", "size", "S"};
    for (int i = 0; i < 4; i++)
        elem_str(&want, kv[i]);
    expect(m, &b, "/attrs", &want);
    fm_key_free(&want);
    fm_proto_schema_destroy(s);
}

/* A oneof: the member written last is the one set. */
static void test_oneof(void **state)
{
    (void)state;
    fm_proto_schema *s = schema(all_proto);
    const fm_proto_message *m = all_msg(s);
    buf b = {.n = 0};
    enc_all(&b, "name: \"x\"");
    enc_all(&b, "num: 5");
    expect_result(m, b.p, b.n, "/name", FM_PB_MISSING, NULL);
    expect(m, &b, "/num", w_int(5));
    enc_all(&b, "sub { s: \"q\" }");
    expect(m, &b, "/sub/s", w_str("q"));
    expect_result(m, b.p, b.n, "/num", FM_PB_MISSING, NULL);
    enc_all(&b, "name: \"y\"");
    expect_result(m, b.p, b.n, "/sub/s", FM_PB_MISSING, NULL);
    expect(m, &b, "/name", w_str("y"));
    fm_proto_schema_destroy(s);
}

/* Packed (proto3's default) and unpacked repeated scalars both read, and
 * mixed in one record. */
static void test_packed_unpacked(void **state)
{
    (void)state;
    fm_proto_schema *s = schema(all_proto);
    const fm_proto_message *m = all_msg(s);
    buf packed = {.n = 0}, unpacked = {.n = 0};
    enc_all(&packed, "packed_i: [1, 300, -1]");
    encode(&unpacked, unpacked_proto, "t.All", "packed_i: [1, 300, -1]");
    /* protoc wrote them differently: wire type 2 once, or 0 per value. */
    assert_int_equal(packed.p[0], (18 << 3 | 2) & 0xff);
    assert_int_equal(unpacked.p[0], (18 << 3 | 0) & 0xff);
    assert_true(packed.n < unpacked.n);
    expect(m, &packed, "/packed_i", w_ints((int64_t[]){1, 300, -1}, 3));
    expect(m, &unpacked, "/packed_i", w_ints((int64_t[]){1, 300, -1}, 3));
    encode(&packed, unpacked_proto, "t.All", "packed_i: 9");
    enc_all(&packed, "packed_i: [10]");
    expect(m, &packed, "/packed_i",
           w_ints((int64_t[]){1, 300, -1, 9, 10}, 5));
    fm_key_free(&want);
    fm_proto_schema_destroy(s);
}

/* Fields the schema does not know are skipped, whatever their wire type. */
static void test_unknown_skipped(void **state)
{
    (void)state;
    fm_proto_schema *s = schema(all_proto);
    const fm_proto_message *m = all_msg(s);
    buf b = {.n = 0};
    encode(&b, extra_proto, "t.All",
           "x1: \"zz\" x2 { s: \"q\" } x3: 1 x4: 2 x5: [1, -1] x6: 0.5 "
           "id: \"ID\" inner { s: \"in\" }");
    expect(m, &b, "/id", w_str("ID"));
    expect(m, &b, "/inner/s", w_str("in"));
    fm_key k;
    char err[256];
    fm_key_init(&k);
    assert_int_equal(get(m, "", b.p, b.n, &k, err, sizeof(err)), FM_PB_FOUND);
    fm_key_free(&k);
    fm_key_free(&want);
    fm_proto_schema_destroy(s);
}

/* Payloads that do not decode: BAD, naming the field and offset. */
static void test_bad(void **state)
{
    (void)state;
    fm_proto_schema *s = schema(all_proto);
    const fm_proto_message *m = all_msg(s);
    static const struct {
        const char *bytes;
        size_t n;
        const char *path, *err;
    } cases[] = {
        {"\x28", 1, "/i32", "field 5 (i32) of message t.All: truncated varint at byte 0"},
        {"\x08\x01\x28\xff", 4, "/i32", "field 5 (i32) of message t.All: truncated varint at byte 2"},
        {"\x28\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12, "/i32", "overlong varint at byte 0"},
        {"\x28\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", 11, "/i32", "overlong varint"},
        {"\x4a\x05" "a", 3, "/s", "field 9 (s) of message t.All: length 5 past the end at byte 0"},
        {"\x48\x01", 2, "/s", "field 9 (s) of message t.All: wire type 0 does not fit its type at byte 0"},
        {"\x2d\x01\x00\x00\x00", 5, "/i32", "field 5 (i32) of message t.All: wire type 5 does not fit"},
        {"\x31\x01\x02\x03", 4, "/fx64", "field 6 (fx64) of message t.All: 8-byte value past the end at byte 0"},
        {"\x3d\x01", 2, "/fx32", "4-byte value past the end"},
        {"\x0b\x0c", 2, "/id", "field 1 (d) of message t.All: group wire type 3 is not supported at byte 0"},
        {"\x0c", 1, "/id", "group wire type 4"},
        {"\x0e", 1, "/id", "invalid wire type 6"},
        {"\x0f", 1, "/id", "invalid wire type 7"},
        {"\x00\x00", 2, "/id", "message t.All: field number 0 out of range at byte 0"},
        {"\x80", 1, "/id", "message t.All: truncated field tag at byte 0"},
        {"\x08\x01\xa2\x06\x05", 5, "/i32", "field 100 of message t.All: length 5 past the end at byte 2"},
        {"\x92\x01\x02\x01\x80", 5, "/packed_i", "field 18 (packed_i) of message t.All: bad varint in a packed field at byte 4"},
        {"\x8a\x01\x02\x10\x80", 5, "/inner/i", "field 2 (i) of message t.Inner: truncated varint at byte 3"},
        {"\x88\x01\x01", 3, "/inner/s", "field 17 (inner) of message t.All: wire type 0 for a message at byte 0"},
        {"\xa8\x01\x01", 3, "/attrs/x", "field 21 (attrs) of message t.All: wire type 0 for a map entry at byte 0"},
        {"\xaa\x01\x02\x08\x01", 5, "/attrs/x", "field 1 (key) of message t.All.AttrsEntry: wire type 0 does not fit its type at byte 3"},
        {"\xc2\x01\x02\x01", 4, "/name", "field 24 (name) of message t.All: length 2 past the end"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        fm_key k;
        char err[512] = "";
        fm_key_init(&k);
        fm_pb_result r = get(m, cases[i].path, (const uint8_t *)cases[i].bytes,
                             cases[i].n, &k, err, sizeof(err));
        if (r != FM_PB_BAD || !strstr(err, cases[i].err))
            fail_msg("case %zu: result %d \"%s\", want BAD \"%s\"", i, r, err,
                     cases[i].err);
        fm_key_free(&k);
    }
    fm_proto_schema_destroy(s);
}

/* Node { child { child { ... { v: "p" } } } } with `depth` children,
 * built inside out at the end of b; returns where it starts. */
static size_t nested(uint8_t *b, size_t size, size_t depth)
{
    size_t at = size;
    b[--at] = 'p';
    b[--at] = 1;
    b[--at] = 2 << 3 | 2;
    for (size_t i = 0; i < depth; i++) {
        size_t len = size - at;
        assert_true(len < 16384);
        if (len >= 128) {
            b[--at] = (uint8_t)(len >> 7);
            b[--at] = (uint8_t)(len | 0x80);
        } else {
            b[--at] = (uint8_t)len;
        }
        b[--at] = 1 << 3 | 2;
    }
    return at;
}

/* Nesting: a path of FM_PB_MAX_PATH fields reads; a message leaf nested
 * past FM_PB_MAX_DEPTH is BAD, not a stack overflow. */
static void test_nesting(void **state)
{
    (void)state;
    fm_proto_schema *s = schema(p2_proto);
    const fm_proto_message *node = fm_proto_schema_message(s, "p2.Node");
    static uint8_t b[4096];
    size_t at = nested(b, sizeof(b), FM_PB_MAX_DEPTH + 6);
    expect_result(node, b + at, sizeof(b) - at, "", FM_PB_BAD,
                  "message p2.Node: messages nested deeper than 64");
    at = nested(b, sizeof(b), FM_PB_MAX_DEPTH - 1);
    expect_result(node, b + at, sizeof(b) - at, "", FM_PB_FOUND, NULL);
    char path[512] = "";
    for (int i = 0; i < FM_PB_MAX_PATH - 1; i++)
        strcat(path, "/child");
    strcat(path, "/v");
    at = nested(b, sizeof(b), FM_PB_MAX_PATH - 1);
    buf one = {.n = sizeof(b) - at};
    memcpy(one.p, b + at, one.n);
    expect(node, &one, path, w_str("p"));
    strcat(path, "/v");
    char err[512];
    assert_null(fm_pb_path_compile(node, path, err, sizeof(err)));
    fm_key_free(&want);
    fm_proto_schema_destroy(s);
}

/* Every prefix of a real record: at a field boundary it is a shorter
 * valid record (the whole message reads), anywhere else the whole message
 * is BAD; every path gives BAD, MISSING or FOUND, never a crash (ASan and
 * UBSan watch the sanitizer build). */
static void test_truncations(void **state)
{
    (void)state;
    fm_proto_schema *s = schema(all_proto);
    const fm_proto_message *m = all_msg(s);
    size_t cuts[64];
    buf b;
    build_every(&b, cuts);
    size_t n_fields = sizeof(every_field) / sizeof(every_field[0]);
    static const char *const paths[] = {
        "", "/id", "/inner", "/inner/deeper/leaf", "/attrs", "/attrs/color",
        "/objs/k/s", "/packed_i", "/inners", "/tags", "/name", "/by_num/-7",
        "/si64", "/color",
    };
    size_t counts[3] = {0};
    fm_key k;
    fm_key_init(&k);
    for (size_t cut = 0; cut < b.n; cut++) {
        bool boundary = cut == 0;
        for (size_t i = 0; i < n_fields; i++)
            boundary |= cuts[i] == cut;
        char err[512];
        fm_pb_result whole = get(m, "", b.p, cut, &k, err, sizeof(err));
        if (whole != (boundary ? FM_PB_FOUND : FM_PB_BAD))
            fail_msg("cut at %zu of %zu: whole message %d (%s)", cut, b.n,
                     whole, err);
        for (size_t p = 1; p < sizeof(paths) / sizeof(paths[0]); p++) {
            fm_pb_result r = get(m, paths[p], b.p, cut, &k, err, sizeof(err));
            assert_true(r == FM_PB_BAD || r == FM_PB_MISSING ||
                        r == FM_PB_FOUND);
            counts[r + 1]++;
        }
    }
    /* Each outcome happens. */
    assert_true(counts[0] > 0 && counts[1] > 0 && counts[2] > 0);
    fm_key_free(&k);
    fm_proto_schema_destroy(s);
}

/* Path errors name the field and the message it was looked for in. */
static void test_path_errors(void **state)
{
    (void)state;
    fm_proto_schema *s = schema(all_proto);
    const fm_proto_message *m = all_msg(s);
    static const struct {
        const char *path, *err;
    } cases[] = {
        {"/nope", "protobuf path /nope: message t.All has no field nope"},
        {"/inner/nope", "message t.Inner has no field nope"},
        {"/tags/0", "it goes through repeated field tags of message t.All"},
        {"/inners/s", "it goes through repeated field inners of message t.All"},
        {"/s/x", "field s is not a message, so has no field x"},
        {"/by_num/x", "\"x\" is not a key of map by_num"},
        {"/by_num/2147483648", "is not a key of map by_num"},
        {"/attrs/k/x", "the value of map attrs is not a message"},
        {"id", "it must start with '/'"},
        {"/a~2", "'~' must be followed by 0 or 1"},
        {"/", "message t.All has no field "},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char err[512] = "";
        fm_pb_path *p = fm_pb_path_compile(m, cases[i].path, err, sizeof(err));
        if (p || !strstr(err, cases[i].err))
            fail_msg("%s: \"%s\", want \"%s\"", cases[i].path, err,
                     cases[i].err);
    }
    fm_proto_schema_destroy(s);
}

/* A framed record end to end: prefix, message indexes, payload. */
static void test_confluent_frame(void **state)
{
    (void)state;
    fm_proto_schema *s = schema(all_proto);
    buf b = {.n = 0};
    static const uint8_t head[] = {0, 0, 0, 1, 2, 0x02, 0x04}; /* [2]: All */
    memcpy(b.p, head, sizeof(head));
    b.n = sizeof(head);
    enc_all(&b, "id: \"framed\" s: \"x\"");
    char err[512];
    uint32_t id;
    const uint8_t *rest, *pl;
    size_t rest_n, pl_n;
    const fm_proto_message *m;
    assert_int_equal(fm_frame_parse(b.p, b.n, &id, &rest, &rest_n, err,
                                    sizeof(err)), 0);
    assert_int_equal(id, 258);
    assert_int_equal(fm_proto_message_by_index(s, rest, rest_n, &m, &pl,
                                               &pl_n, err, sizeof(err)), 0);
    assert_string_equal(m->full_name, "t.All");
    fm_key k;
    fm_key_init(&k);
    assert_int_equal(get(m, "/id", pl, pl_n, &k, err, sizeof(err)),
                     FM_PB_FOUND);
    assert_int_equal(k.len, 6);
    assert_memory_equal(k.p, "framed", 6);
    /* Framing's own errors. */
    assert_int_equal(fm_frame_parse(b.p, 4, &id, &rest, &rest_n, err,
                                     sizeof(err)), -1);
    assert_non_null(strstr(err, "4 bytes, shorter than the 5-byte prefix"));
    b.p[0] = 1;
    assert_int_equal(fm_frame_parse(b.p, b.n, &id, &rest, &rest_n, err,
                                     sizeof(err)), -1);
    assert_non_null(strstr(err, "magic byte 0x01"));
    b.p[0] = 0;
    /* Every truncation of the framed record fails somewhere, or reads. */
    for (size_t cut = 0; cut < b.n; cut++) {
        if (fm_frame_parse(b.p, cut, &id, &rest, &rest_n, err,
                           sizeof(err)) < 0 ||
            fm_proto_message_by_index(s, rest, rest_n, &m, &pl, &pl_n, err,
                                      sizeof(err)) < 0)
            continue;
        fm_pb_result r = get(m, "/id", pl, pl_n, &k, err, sizeof(err));
        assert_true(r >= FM_PB_BAD && r <= FM_PB_MISSING);
    }
    fm_key_free(&k);
    fm_proto_schema_destroy(s);
}

/* The cost of /id from a ~200-byte record of ~10 fields, id last on the
 * wire (protoc writes by number): printed, and each read checked. */
static void test_timing_id(void **state)
{
    (void)state;
    fm_proto_schema *s = schema(all_proto);
    const fm_proto_message *m = all_msg(s);
    buf b = {.n = 0};
    enc_all(&b, "d: 3.25 i64: 1234567890123 u64: 99 b: true color: RED "
                "s: \"a string field of some forty bytes ok\" "
                "inner { s: \"inner text\" i: 42 } "
                "tags: [\"alpha\", \"beta\", \"gamma\"] "
                "attrs { key: \"country\" value: \"fr\" } "
                "attrs { key: \"channel\" value: \"web\" } "
                "id: \"3f2b9c1e-7d4a-4e8f-9b6c-2a1d5e7f8c90\"");
    char err[256];
    fm_pb_path *p = fm_pb_path_compile(m, "/id", err, sizeof(err));
    assert_non_null(p);
    fm_key k;
    fm_key_init(&k);
    int n = 200000;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < n; i++) {
        if (fm_pb_extract(p, b.p, b.n, &k, err, sizeof(err)) != FM_PB_FOUND ||
            k.len != 36)
            fail_msg("read %d: %s", i, err);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ns = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 +
                 (double)(t1.tv_nsec - t0.tv_nsec)) / n;
    print_message("/id from a %zu-byte record: %.0f ns per read\n", b.n, ns);
    fm_key_free(&k);
    fm_pb_path_destroy(p);
    fm_proto_schema_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_leaf),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_order_and_merge),
        cmocka_unit_test(test_oneof),
        cmocka_unit_test(test_packed_unpacked),
        cmocka_unit_test(test_unknown_skipped),
        cmocka_unit_test(test_bad),
        cmocka_unit_test(test_nesting),
        cmocka_unit_test(test_truncations),
        cmocka_unit_test(test_path_errors),
        cmocka_unit_test(test_confluent_frame),
        cmocka_unit_test(test_timing_id),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
