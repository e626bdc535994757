/*
 * fuzz_protobuf.c -- libFuzzer target for the Protobuf wire reader of
 * formats/protobuf.c: a fixed schema with every field type, nested and
 * recursive messages, maps of string, integer and bool keys, a oneof,
 * proto2 presence; the input read as a payload of t.All by every path
 * below and as a whole message, then as a Confluent record after its
 * schema id (message indexes, then the payload).
 *
 * Seeds (fuzz/corpus/protobuf/): records protoc encodes with this schema
 * (`protoc --encode=t.All`), and a few framed ones.  Checks, beyond the
 * sanitizers: a result is FOUND, MISSING or BAD; a whole message is never
 * MISSING; a BAD result names it ("protobuf: ..."); a FOUND key is whole.
 */
#include <fm_proto.h>
#include <fm_protobuf.h>

#include <stdint.h>
#include <string.h>

#include "fuzz_check.h"

static const char schema_text[] =
    "syntax = \"proto3\";\n"
    "package t;\n"
    "enum Color { COLOR_UNSPECIFIED = 0; RED = 1; GREEN = 2; }\n"
    "message Inner { string s = 1; int32 i = 2; Inner deeper = 3;\n"
    "                repeated int32 r = 4; map<string, Inner> kids = 5; }\n"
    "message All {\n"
    "  double d = 1; float f = 2; int64 i64 = 3; uint64 u64 = 4;\n"
    "  int32 i32 = 5; fixed64 fx64 = 6; fixed32 fx32 = 7; bool b = 8;\n"
    "  string s = 9; bytes by = 10; uint32 u32 = 11; Color color = 12;\n"
    "  sfixed32 sfx32 = 13; sfixed64 sfx64 = 14; sint32 si32 = 15;\n"
    "  sint64 si64 = 16; Inner inner = 17;\n"
    "  repeated int32 packed_i = 18; repeated double packed_d = 19;\n"
    "  repeated fixed32 packed_f = 20; repeated string tags = 21;\n"
    "  map<string, string> attrs = 22; map<int64, Inner> by_num = 23;\n"
    "  map<bool, Color> by_bool = 24; map<sint32, bytes> by_s = 25;\n"
    "  oneof choice { string name = 26; int64 num = 27; Inner sub = 28; }\n"
    "  optional int32 opt = 29; repeated Inner inners = 30;\n"
    "  repeated Color colors = 31; string id = 32;\n"
    "}\n";

static const char *const paths[] = {
    "",           "/id",        "/d",          "/f",
    "/i64",       "/u64",       "/i32",        "/fx64",
    "/fx32",      "/b",         "/s",          "/by",
    "/u32",       "/color",     "/sfx32",      "/sfx64",
    "/si32",      "/si64",      "/inner",      "/inner/s",
    "/inner/deeper/deeper/s",   "/inner/r",    "/inner/kids/a/i",
    "/packed_i",  "/packed_d",  "/packed_f",   "/tags",
    "/attrs",     "/attrs/k",   "/by_num/7",   "/by_num/-1/deeper",
    "/by_bool/true", "/by_bool", "/by_s/-3",   "/name",
    "/num",       "/sub/kids/x/r", "/opt",     "/inners",
    "/colors",
};
#define N_PATHS (sizeof(paths) / sizeof(paths[0]))

static fm_proto_schema *schema;
static fm_pb_path *compiled[N_PATHS];

static void setup(void)
{
    char err[512];
    fm_proto_source src = {"t.proto", schema_text, strlen(schema_text)};
    schema = fm_proto_schema_new(&src, 1, 0, err, sizeof(err));
    CHECK(schema != NULL);
    const fm_proto_message *all = fm_proto_schema_message(schema, "t.All");
    CHECK(all != NULL);
    for (size_t i = 0; i < N_PATHS; i++) {
        compiled[i] = fm_pb_path_compile(all, paths[i], err, sizeof(err));
        CHECK(compiled[i] != NULL);
    }
}

static void read_one(const fm_pb_path *p, bool whole, const uint8_t *data,
                     size_t size, fm_key *k)
{
    char err[512] = "";
    fm_pb_result r = fm_pb_extract(p, data, size, k, err, sizeof(err));
    CHECK(r == FM_PB_FOUND || r == FM_PB_MISSING || r == FM_PB_BAD);
    CHECK(!whole || r != FM_PB_MISSING);
    CHECK(r != FM_PB_BAD || strncmp(err, "protobuf: ", 10) == 0);
    CHECK(r != FM_PB_FOUND || fm_key_ok(k));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!schema)
        setup();
    fm_key k;
    fm_key_init(&k);
    for (size_t i = 0; i < N_PATHS; i++)
        read_one(compiled[i], i == 0, data, size, &k);
    /* As a Confluent record after the schema id. */
    char err[512];
    const fm_proto_message *m;
    const uint8_t *pl;
    size_t pn;
    if (fm_proto_message_by_index(schema, data, size, &m, &pl, &pn, err,
                                  sizeof(err)) == 0) {
        fm_pb_path *p = fm_pb_path_compile(m, "", err, sizeof(err));
        CHECK(p != NULL);
        read_one(p, true, pl, pn, &k);
        fm_pb_path_destroy(p);
    }
    fm_key_free(&k);
    return 0;
}
