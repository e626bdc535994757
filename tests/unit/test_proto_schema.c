/*
 * test_proto_schema.c -- the `.proto` parser (formats/include/fm_proto.h):
 * realistic schemas with imports given as references, nested messages,
 * oneofs, maps, enums, comments of both kinds and options everywhere read
 * into the model; protoc's name scoping; every error named with its
 * file:line:col; the bounds; Confluent's message indexes.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fm_proto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static fm_proto_schema *parse_n(const fm_proto_source *src, size_t n,
                                char *err, size_t size)
{
    return fm_proto_schema_new(src, n, 0, err, size);
}

static fm_proto_source file(const char *name, const char *text)
{
    return (fm_proto_source){name, text, strlen(text)};
}

/* The schema of a shop's order topic: the main file imports two
 * references, one of which publicly imports a third. */
static const char common_proto[] =
    "// common.proto: shared types\n"
    "syntax = \"proto3\";\n"
    "package shop.common;\n"
    "import public \"money.proto\";\n"
    "option java_package = \"com.example.shop\";\n"
    "option (my.file_opt) = { a: 1 b: [1, 2] c { d: \"}\" } };\n"
    "enum Status {\n"
    "  option allow_alias = true;\n"
    "  STATUS_UNSPECIFIED = 0;\n"
    "  OPEN = 1 [(my.enum_value_opt) = \"x\"];\n"
    "  STARTED = 1;\n"
    "  CLOSED = 2;\n"
    "  reserved 3 to 5, 9;\n"
    "  reserved \"OLD\";\n"
    "}\n"
    "message Address { string street = 1; string city = 2; }\n";

static const char money_proto[] =
    "syntax = 'proto3';\n"
    "package shop.common;\n"
    "message Money { string currency = 1; int64 units = 2; sfixed32 nanos = 3; }\n";

static const char order_proto[] =
    "/* order.proto: the topic's value.\n"
    "   A block comment spanning lines, with \"quotes\" and // inside. */\n"
    "syntax = \"proto3\";\n"
    "package shop.v1;\n"
    "import \"common.proto\";\n"
    "import weak \"extra.proto\";\n"
    "\n"
    "message Order {\n"
    "  option (my.msg_opt).x = 5;\n"
    "  reserved 8, 15 to 17;\n"
    "  reserved \"legacy\";\n"
    "  message Line {\n"
    "    string sku = 1;\n"
    "    uint32 qty = 2 [deprecated = true, (my.f) = { a: [ { b: 1 } ] }];\n"
    "    common.Money price = 3;\n"
    "    enum Kind { KIND_UNSPECIFIED = 0; PHYSICAL = 1; }\n"
    "    Kind kind = 4;\n"
    "  }\n"
    "  string id = 1;  // the dedup key\n"
    "  repeated Line lines = 2;\n"
    "  shop.common.Status status = 3;\n"
    "  map<string, string> attrs = 4;\n"
    "  map<int64, Line> by_pos = 5 [json_name = \"byPos\"];\n"
    "  oneof payer {\n"
    "    option (my.oneof_opt) = true;\n"
    "    string card = 6;\n"
    "    .shop.common.Address billing = 7;\n"
    "  }\n"
    "  optional int32 priority = 9;\n"
    "  Line.Kind first_kind = 10;\n"
    "  common.Money total = 11;\n"
    "  bytes blob = 12;\n"
    "  extend Foo { int32 ext = 100; }\n"
    "  ;\n"
    "}\n"
    "message Empty {}\n"
    "service Orders {\n"
    "  option (svc) = { x: 1 };\n"
    "  rpc Get (Order) returns (stream Order) { option idempotency_level = NO_SIDE_EFFECTS; }\n"
    "  rpc Put (Order) returns (Empty);\n"
    "}\n"
    "extend google.protobuf.MessageOptions { string my_opt = 50000; }\n";

static const char extra_proto[] = "syntax = \"proto3\";\npackage extra;\n";

static void test_realistic(void **state)
{
    (void)state;
    char err[512];
    fm_proto_source src[] = {
        file("order.proto", order_proto), file("common.proto", common_proto),
        file("money.proto", money_proto), file("extra.proto", extra_proto),
    };
    fm_proto_schema *s = parse_n(src, 4, err, sizeof(err));
    if (!s)
        fail_msg("%s", err);
    const fm_proto_file *f = fm_proto_schema_main(s);
    assert_string_equal(f->name, "order.proto");
    assert_string_equal(f->package, "shop.v1");
    assert_int_equal(f->syntax, 3);
    assert_int_equal(f->n_messages, 2);
    const fm_proto_message *o = f->messages[0];
    assert_string_equal(o->full_name, "shop.v1.Order");
    assert_ptr_equal(fm_proto_schema_message(s, ".shop.v1.Order"), o);
    assert_int_equal(o->n_fields, 11);
    /* Sorted by number. */
    for (size_t i = 1; i < o->n_fields; i++)
        assert_true(o->fields[i - 1].number < o->fields[i].number);

    const fm_proto_field *id = fm_proto_message_field(o, "id");
    assert_int_equal(id->number, 1);
    assert_int_equal(id->type, FM_PROTO_STRING);
    assert_int_equal(id->label, FM_PROTO_IMPLICIT);
    assert_false(fm_proto_field_has_presence(id));

    const fm_proto_field *lines = fm_proto_message_field(o, "lines");
    assert_int_equal(lines->label, FM_PROTO_REPEATED);
    assert_int_equal(lines->type, FM_PROTO_MESSAGE);
    assert_string_equal(lines->message->full_name, "shop.v1.Order.Line");
    const fm_proto_field *price =
        fm_proto_message_field(lines->message, "price");
    assert_string_equal(price->message->full_name, "shop.common.Money");
    const fm_proto_field *kind = fm_proto_message_field(lines->message, "kind");
    assert_int_equal(kind->type, FM_PROTO_ENUM);
    assert_string_equal(kind->enumeration->full_name,
                        "shop.v1.Order.Line.Kind");

    const fm_proto_field *status = fm_proto_message_field(o, "status");
    assert_int_equal(status->type, FM_PROTO_ENUM);
    const fm_proto_enum *st = status->enumeration;
    assert_true(st->allow_alias);
    assert_int_equal(st->n_values, 4);
    assert_string_equal(st->values[2].name, "STARTED");
    assert_int_equal(st->values[2].number, 1);

    /* Maps: a repeated entry message, nested, key = 1, value = 2. */
    const fm_proto_field *attrs = fm_proto_message_field(o, "attrs");
    assert_true(attrs->map);
    assert_int_equal(attrs->label, FM_PROTO_REPEATED);
    assert_string_equal(attrs->message->full_name,
                        "shop.v1.Order.AttrsEntry");
    assert_true(attrs->message->map_entry);
    assert_int_equal(attrs->message->fields[0].number, 1);
    assert_int_equal(attrs->message->fields[0].type, FM_PROTO_STRING);
    assert_int_equal(attrs->message->fields[1].number, 2);
    const fm_proto_field *by_pos = fm_proto_message_field(o, "by_pos");
    assert_string_equal(by_pos->message->name, "ByPosEntry");
    assert_int_equal(by_pos->message->fields[0].type, FM_PROTO_INT64);
    assert_ptr_equal(by_pos->message->fields[1].message, lines->message);

    /* The oneof, its members explicit. */
    assert_int_equal(o->n_oneofs, 1);
    assert_string_equal(o->oneofs[0], "payer");
    const fm_proto_field *card = fm_proto_message_field(o, "card");
    const fm_proto_field *billing = fm_proto_message_field(o, "billing");
    assert_int_equal(card->oneof, 0);
    assert_int_equal(billing->oneof, 0);
    assert_true(fm_proto_field_has_presence(card));
    assert_string_equal(billing->message->full_name, "shop.common.Address");
    assert_int_equal(fm_proto_message_field(o, "id")->oneof, -1);

    const fm_proto_field *prio = fm_proto_message_field(o, "priority");
    assert_int_equal(prio->label, FM_PROTO_OPTIONAL);
    assert_true(fm_proto_field_has_presence(prio));
    assert_string_equal(fm_proto_message_field(o, "first_kind")
                            ->enumeration->full_name,
                        "shop.v1.Order.Line.Kind");
    /* Money comes from money.proto through common.proto's public import. */
    assert_string_equal(fm_proto_message_field(o, "total")->message->file->name,
                        "money.proto");
    assert_null(fm_proto_message_field(o, "ext"));
    assert_ptr_equal(fm_proto_message_field_number(o, 12),
                     fm_proto_message_field(o, "blob"));
    assert_null(fm_proto_message_field_number(o, 8));
    /* Nested declarations in order: Line, then the map entries. */
    assert_int_equal(o->n_messages, 3);
    assert_string_equal(o->messages[0]->name, "Line");
    fm_proto_schema_destroy(s);
}

/* proto2: labels required, optional, repeated; explicit presence. */
static void test_proto2(void **state)
{
    (void)state;
    char err[512];
    fm_proto_source src = file("p2.proto",
        "syntax = \"proto2\";\n"
        "package p2;\n"
        "message M {\n"
        "  required string id = 1;\n"
        "  optional int32 n = 2 [default = 7];\n"
        "  repeated int32 r = 3 [packed = true];\n"
        "  extensions 100 to max;\n"
        "  oneof o { string a = 4; }\n"
        "  map <string, int32> spaced = 5;\n"
        "}\n");
    fm_proto_schema *s = parse_n(&src, 1, err, sizeof(err));
    if (!s)
        fail_msg("%s", err);
    const fm_proto_message *m = fm_proto_schema_message(s, "p2.M");
    assert_int_equal(m->fields[0].label, FM_PROTO_REQUIRED);
    assert_int_equal(m->fields[1].label, FM_PROTO_OPTIONAL);
    assert_true(fm_proto_field_has_presence(&m->fields[1]));
    assert_int_equal(m->fields[2].label, FM_PROTO_REPEATED);
    assert_int_equal(m->fields[3].oneof, 0);
    assert_true(m->fields[4].map);
    assert_int_equal(m->fields[4].line, 9);
    assert_int_equal(m->fields[4].col, 3);
    assert_int_equal(fm_proto_schema_main(s)->syntax, 2);
    fm_proto_schema_destroy(s);
}

/* protoc's scoping: innermost scope first, then outwards through the
 * package's parts; a leading dot is fully qualified; a compound name
 * resolves in the first scope that has its first part, or not at all. */
static void test_scoping(void **state)
{
    (void)state;
    char err[512];
    fm_proto_source src[] = {
        file("a.proto",
             "syntax = \"proto3\";\n"
             "package x.y;\n"
             "import \"b.proto\";\n"
             "message B { int32 top = 1; }\n"
             "message A {\n"
             "  message B { int32 inner = 1; }\n"
             "  message C {\n"
             "    B near = 1;\n"       /* x.y.A.B, the innermost */
             "    .x.y.B far = 2;\n"   /* fully qualified */
             "    Other other = 3;\n"  /* x.Other: a package part */
             "    y.B via_pkg = 4;\n"  /* x.y.B by its package part */
             "    x.Other abs = 5;\n"
             "  }\n"
             "}\n"),
        file("b.proto", "syntax = \"proto3\";\npackage x;\n"
                        "message Other { string s = 1; }\n"),
    };
    fm_proto_schema *s = parse_n(src, 2, err, sizeof(err));
    if (!s)
        fail_msg("%s", err);
    const fm_proto_message *c = fm_proto_schema_message(s, "x.y.A.C");
    assert_non_null(c);
    assert_string_equal(c->fields[0].message->full_name, "x.y.A.B");
    assert_string_equal(c->fields[1].message->full_name, "x.y.B");
    assert_string_equal(c->fields[2].message->full_name, "x.Other");
    assert_string_equal(c->fields[3].message->full_name, "x.y.B");
    assert_string_equal(c->fields[4].message->full_name, "x.Other");
    fm_proto_schema_destroy(s);
}

/* One schema text and the error it must give (a substring of errstr). */
typedef struct bad_case {
    const char *text;
    const char *want;
} bad_case;

static void test_errors_name_place(void **state)
{
    (void)state;
    static const bad_case cases[] = {
        {"syntax = \"proto3\";\nmessage M {\n  int32 a = 1\n}\n",
         "m.proto:4:1: expected ';', found \"}\""},
        {"syntax = \"proto3\";\nmessage M { int32 = 1; }\n",
         "m.proto:2:19: expected field name, found \"=\""},
        {"syntax = \"proto4\";\n",
         "m.proto:1:10: unknown syntax \"proto4\""},
        {"message M { /* never closed\n", "m.proto:1:13: unterminated /* comment"},
        {"option x = \"never closed;\n", "m.proto:1:12: unterminated string"},
        {"syntax = \"proto2\";\nmessage M {\n  optional group G = 1 { }\n}\n",
         "m.proto:3:12: proto2 groups are not supported (message M)"},
        {"syntax = \"proto3\";\nmessage M { Nope n = 1; }\n",
         "m.proto:2:13: type Nope of field n in message M is not defined"},
        {"syntax = \"proto3\";\nimport \"gone.proto\";\n",
         "m.proto:2:1: import \"gone.proto\" is not among the schema's files"},
        {"syntax = \"proto3\";\nmessage M { int32 a = 0; }\n",
         "m.proto:2:23: field number 0 is reserved or out of range"},
        {"syntax = \"proto3\";\nmessage M { int32 a = 19001; }\n",
         "m.proto:2:23: field number 19001 is reserved or out of range"},
        {"syntax = \"proto3\";\nmessage M { int32 a = 536870912; }\n",
         "m.proto:2:23: field number out of range"},
        {"syntax = \"proto3\";\nmessage M { int32 a = 1; string b = 1; }\n",
         "m.proto:2:26: message M: fields a and b share number 1"},
        {"syntax = \"proto3\";\nmessage M { int32 a = 1; string a = 2; }\n",
         "m.proto:2:26: message M: two fields named a"},
        {"syntax = \"proto3\";\nenum E { A = 0; B = 0; }\n",
         "m.proto:2:1: enum E: A and B share value 0 without allow_alias"},
        {"syntax = \"proto3\";\nenum E { }\n", "m.proto:2:1: enum E has no values"},
        {"syntax = \"proto3\";\nmessage M { map<float, string> m = 1; }\n",
         "m.proto:2:17: map key type float is not an integer, bool or string type"},
        {"syntax = \"proto3\";\nmessage M { int32 a = 1; }\nmessage M { }\n",
         "m.proto:3:1: M is already defined (m.proto:2)"},
        {"syntax = \"proto3\";\nmessage M { int32 a = 1; } @\n",
         "m.proto:2:28: unexpected character 0x40"},
        {"message M { int32 a = 1; }\nsyntax = \"proto3\";\n",
         "m.proto:2:1: syntax must come first"},
        {"syntax = \"proto3\";\nenum E { A = 2147483648; }\n",
         "m.proto:2:14: enum value out of range"},
        {"syntax = \"proto3\";\nmessage M {\n", "m.proto:3:1: expected '}', found end of file"},
        {"syntax = \"proto3\";\nwhat M {}\n",
         "m.proto:2:1: expected message, enum, import, package, option, "
         "service, extend or syntax, found \"what\""},
        {"syntax = \"proto3\";\nmessage M { option (x) = { a: 1 ; }\n",
         "m.proto:3:1: expected ';', found end of file"},
        /* protoc's rule: Foo resolves to M.Foo, which has no Bar. */
        {"syntax = \"proto3\";\nmessage Foo { message Bar {} }\n"
         "message M { message Foo {} Foo.Bar x = 1; }\n",
         "m.proto:3:28: type Foo.Bar of field x in message M is not defined"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char err[512] = "";
        fm_proto_source src = file("m.proto", cases[i].text);
        fm_proto_schema *s = parse_n(&src, 1, err, sizeof(err));
        if (s || !strstr(err, cases[i].want))
            fail_msg("case %zu: want \"%s\", got \"%s\"", i, cases[i].want,
                     s ? "(parsed)" : err);
    }
}

/* A name is visible through the file's own imports and the public imports
 * of those, not through another file's plain import. */
static void test_visibility(void **state)
{
    (void)state;
    char err[512];
    fm_proto_source src[] = {
        file("a.proto", "syntax = \"proto3\";\nimport \"b.proto\";\n"
                        "message A {\n  C c = 1;\n  D d = 2;\n}\n"),
        file("b.proto", "syntax = \"proto3\";\nimport public \"c.proto\";\n"
                        "import \"d.proto\";\n"),
        file("c.proto", "syntax = \"proto3\";\nmessage C {}\n"),
        file("d.proto", "syntax = \"proto3\";\nmessage D {}\n"),
    };
    fm_proto_schema *s = parse_n(src, 4, err, sizeof(err));
    assert_null(s);
    assert_non_null(strstr(err, "a.proto:5:3: type D of field d is defined "
                                "in d.proto, which a.proto does not import"));
    /* Without d, it parses: C is seen through the public import. */
    src[0] = file("a.proto", "syntax = \"proto3\";\nimport \"b.proto\";\n"
                             "message A {\n  C c = 1;\n}\n");
    s = parse_n(src, 4, err, sizeof(err));
    if (!s)
        fail_msg("%s", err);
    fm_proto_schema_destroy(s);
    /* Two files defining one name. */
    src[3] = file("d.proto", "syntax = \"proto3\";\nmessage C {}\n");
    s = parse_n(src, 4, err, sizeof(err));
    assert_null(s);
    assert_non_null(strstr(err, "C is already defined (c.proto:2)"));
}

static void test_bounds(void **state)
{
    (void)state;
    char err[512];
    /* Input size: refused before a byte is read. */
    fm_proto_source big = {"big.proto", "", FM_PROTO_MAX_INPUT + 1};
    assert_null(parse_n(&big, 1, err, sizeof(err)));
    assert_non_null(strstr(err, "larger than"));
    /* Nesting. */
    size_t cap = 64 * (FM_PROTO_MAX_DEPTH + 2);
    char *t = malloc(cap);
    assert_non_null(t);
    size_t n = 0;
    for (int i = 0; i <= FM_PROTO_MAX_DEPTH; i++)
        n += (size_t)snprintf(t + n, cap - n, "message M%d {", i);
    for (int i = 0; i <= FM_PROTO_MAX_DEPTH; i++)
        t[n++] = '}';
    fm_proto_source deep = {"deep.proto", t, n};
    assert_null(parse_n(&deep, 1, err, sizeof(err)));
    assert_non_null(strstr(err, "deep.proto:1:"));
    assert_non_null(strstr(err, "messages nested deeper than 32"));
    /* One level less parses. */
    n = 0;
    for (int i = 0; i < FM_PROTO_MAX_DEPTH; i++)
        n += (size_t)snprintf(t + n, cap - n, "message M%d {", i);
    for (int i = 0; i < FM_PROTO_MAX_DEPTH; i++)
        t[n++] = '}';
    deep.len = n;
    fm_proto_schema *s = parse_n(&deep, 1, err, sizeof(err));
    if (!s)
        fail_msg("%s", err);
    fm_proto_schema_destroy(s);
    free(t);
    /* Identifier length. */
    char id[FM_PROTO_MAX_IDENT + 32];
    memcpy(id, "message ", 8);
    memset(id + 8, 'x', FM_PROTO_MAX_IDENT + 1);
    memcpy(id + 8 + FM_PROTO_MAX_IDENT + 1, " {}", 4);
    fm_proto_source longid = file("id.proto", id);
    assert_null(parse_n(&longid, 1, err, sizeof(err)));
    assert_non_null(strstr(err, "id.proto:1:9: identifier longer than 256"));
    /* Definitions. */
    cap = 16 * (FM_PROTO_MAX_DEFS + 1) + 1;
    t = malloc(cap);
    assert_non_null(t);
    n = 0;
    for (int i = 0; i <= FM_PROTO_MAX_DEFS; i++)
        n += (size_t)snprintf(t + n, cap - n, "message M%d{}", i);
    fm_proto_source many = {"many.proto", t, n};
    assert_null(parse_n(&many, 1, err, sizeof(err)));
    assert_non_null(strstr(err, "more than 20000 messages and enums"));
    free(t);
    /* Files. */
    fm_proto_source files[FM_PROTO_MAX_FILES + 1];
    for (size_t i = 0; i <= FM_PROTO_MAX_FILES; i++)
        files[i] = file("f.proto", "");
    assert_null(parse_n(files, FM_PROTO_MAX_FILES + 1, err, sizeof(err)));
    assert_non_null(strstr(err, "more than 256 files"));
}

/* Confluent's message indexes walk declared messages: top level of the
 * main file, then nested; enums and map entries do not count. */
static void test_message_indexes(void **state)
{
    (void)state;
    char err[512];
    fm_proto_source src[] = {
        file("dep.proto", "syntax = \"proto3\";\nmessage Dep {}\n"),
        file("main.proto",
             "syntax = \"proto3\";\npackage p;\nimport \"dep.proto\";\n"
             "enum E { Z = 0; }\n"
             "message M0 {\n"
             "  map<string, string> m = 1;\n"
             "  enum F { Y = 0; }\n"
             "  message N0 {}\n"
             "  message N1 { message Deep {} }\n"
             "}\n"
             "message M1 {}\n"),
    };
    fm_proto_schema *s = fm_proto_schema_new(src, 2, 1, err, sizeof(err));
    if (!s)
        fail_msg("%s", err);
    static const struct {
        const char *bytes;
        size_t n;
        const char *want; /* full name, or an error substring */
        size_t payload_at;
    } cases[] = {
        {"\x00" "P", 2, "p.M0", 1},           /* lone 0: [0] */
        {"\x02\x00" "P", 3, "p.M0", 2},       /* [0] written out */
        {"\x02\x02", 2, "p.M1", 2},           /* [1] */
        {"\x04\x00\x02", 3, "p.M0.N1", 3},    /* [0, 1]: the map entry skipped */
        {"\x06\x00\x02\x00", 4, "p.M0.N1.Deep", 4},
        {"\x04\x00\x04", 3, "message index 2 (at byte 2) is not a message "
                            "nested in p.M0", 0},
        {"\x02\x04", 2, "message index 2 (at byte 1) is not a message of "
                        "the main file main.proto", 0},
        {"\x01", 1, "message-index count -1 is negative", 0},
        {"\x04\x00", 2, "message index 1 truncated or too long at byte 2", 0},
        {"", 0, "message-index count truncated", 0},
        {"\x80", 1, "message-index count truncated", 0},
        {"\x02\x03", 2, "message index -2 (at byte 1) is not a message", 0},
        {"\x50", 1, "message-index count 40 is negative or above 32", 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const fm_proto_message *m = NULL;
        const uint8_t *pl = NULL;
        size_t pn = 0;
        err[0] = '\0';
        const uint8_t *b = (const uint8_t *)cases[i].bytes;
        int rc = fm_proto_message_by_index(s, b, cases[i].n, &m, &pl, &pn, err,
                                           sizeof(err));
        if (cases[i].payload_at) {
            if (rc != 0)
                fail_msg("case %zu: %s", i, err);
            assert_string_equal(m->full_name, cases[i].want);
            assert_ptr_equal(pl, b + cases[i].payload_at);
            assert_int_equal(pn, cases[i].n - cases[i].payload_at);
        } else if (rc != -1 || !strstr(err, cases[i].want)) {
            fail_msg("case %zu: want \"%s\", got rc %d \"%s\"", i,
                     cases[i].want, rc, err);
        }
    }
    fm_proto_schema_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_realistic),
        cmocka_unit_test(test_proto2),
        cmocka_unit_test(test_scoping),
        cmocka_unit_test(test_errors_name_place),
        cmocka_unit_test(test_visibility),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_message_indexes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
