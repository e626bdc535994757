/*
 * fuzz_proto_schema.c -- libFuzzer target for the `.proto` parser of
 * formats/proto_schema.c, and for the wire reader driven by whatever
 * schema the parser accepts.
 *
 * Input: up to four files separated by NUL bytes, named main.proto,
 * a.proto, b.proto, c.proto (so imports between them resolve); main.proto
 * is the main file.  Checks, beyond the sanitizers: a refused schema has
 * a message naming it; an accepted one is whole (fields sorted by number
 * and unique, every named type resolved, every map an entry of key and
 * value, every enum with a value); for each field of each top-level
 * message, a path to it compiles and reads the input itself as a payload
 * to FOUND, MISSING or BAD; Confluent's message indexes read the input.
 */
#include <fm_proto.h>
#include <fm_protobuf.h>

#include <stdint.h>
#include <string.h>

#include "fuzz_check.h"

static void check_message(const fm_proto_message *m, int depth)
{
    CHECK(depth <= FM_PROTO_MAX_DEPTH + 1);
    for (size_t i = 0; i < m->n_fields; i++) {
        const fm_proto_field *f = &m->fields[i];
        CHECK(i == 0 || m->fields[i - 1].number < f->number);
        CHECK(fm_proto_message_field_number(m, f->number) == f);
        CHECK(fm_proto_message_field(m, f->name) == f);
        if (f->type == FM_PROTO_MESSAGE)
            CHECK(f->message != NULL);
        if (f->type == FM_PROTO_ENUM)
            CHECK(f->enumeration && f->enumeration->n_values > 0);
        if (f->map)
            CHECK(f->message->map_entry && f->message->n_fields == 2 &&
                  f->label == FM_PROTO_REPEATED);
        CHECK(f->oneof < (int)m->n_oneofs);
    }
    for (size_t i = 0; i < m->n_messages; i++)
        check_message(m->messages[i], depth + 1);
}

static void read_with(const fm_proto_message *m, const uint8_t *data,
                      size_t size)
{
    char err[512];
    fm_key k;
    fm_key_init(&k);
    fm_pb_path *p = fm_pb_path_compile(m, "", err, sizeof(err));
    CHECK(p != NULL);
    fm_pb_result r = fm_pb_extract(p, data, size, &k, err, sizeof(err));
    CHECK(r == FM_PB_FOUND || r == FM_PB_BAD);
    fm_pb_path_destroy(p);
    for (size_t i = 0; i < m->n_fields && i < 16; i++) {
        char path[FM_PROTO_MAX_IDENT + 2];
        snprintf(path, sizeof(path), "/%s", m->fields[i].name);
        p = fm_pb_path_compile(m, path, err, sizeof(err));
        CHECK(p != NULL);
        r = fm_pb_extract(p, data, size, &k, err, sizeof(err));
        CHECK(r == FM_PB_FOUND || r == FM_PB_MISSING || r == FM_PB_BAD);
        CHECK(r != FM_PB_BAD || strncmp(err, "protobuf: ", 10) == 0);
        fm_pb_path_destroy(p);
    }
    fm_key_free(&k);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const names[] = {"main.proto", "a.proto", "b.proto",
                                        "c.proto"};
    fm_proto_source src[4];
    size_t n = 0, start = 0;
    for (size_t i = 0; i <= size; i++) {
        if (i < size && (data[i] != 0 || n == 3))
            continue; /* the fourth file keeps its NULs */
        src[n].name = names[n];
        src[n].text = (const char *)data + start;
        src[n].len = i - start;
        n++;
        start = i + 1;
    }
    char err[512] = "";
    fm_proto_schema *s = fm_proto_schema_new(src, n, 0, err, sizeof(err));
    if (!s) {
        CHECK(strncmp(err, "protobuf schema: ", 17) == 0);
        return 0;
    }
    const fm_proto_file *f = fm_proto_schema_main(s);
    for (size_t i = 0; i < f->n_messages; i++) {
        check_message(f->messages[i], 1);
        CHECK(fm_proto_schema_message(s, f->messages[i]->full_name) ==
              f->messages[i]);
        if (i < 4)
            read_with(f->messages[i], data, size);
    }
    const fm_proto_message *m;
    const uint8_t *pl;
    size_t pn;
    if (fm_proto_message_by_index(s, data, size, &m, &pl, &pn, err,
                                  sizeof(err)) == 0)
        CHECK(pl >= data && pl + pn == data + size && m != NULL);
    fm_proto_schema_destroy(s);
    return 0;
}
