/*
 * fuzz_avro.c -- libFuzzer target for the Avro payload reader of
 * formats/avro.c: arbitrary bytes as the payload of three fixed schemas
 * (a record holding every type, nested records and unions of records; a
 * recursive list; an array of nulls), each read through several paths.
 *
 * Input: the payload, as is.  Checks, beyond the sanitizers: FOUND leaves
 * a whole key (not failed) that starts with what the key held before;
 * MISSING and BAD leave the key exactly as it was and name a reason; the
 * same payload read twice gives the same result and key.
 */
#include "fm_avro.h"
#include "fuzz_check.h"

#include <stdint.h>
#include <string.h>

static const char EVERY[] =
    "{\"type\":\"record\",\"name\":\"Event\",\"namespace\":\"t\",\"fields\":["
    "{\"name\":\"id\",\"type\":\"long\"},"
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
    "\"string\"]},"
    "{\"name\":\"nested\",\"type\":{\"type\":\"array\",\"items\":{\"type\":"
    "\"map\",\"values\":[\"null\",\"Addr\",\"Color\",\"float\"]}}}"
    "]}";
static const char LIST[] =
    "{\"type\":\"record\",\"name\":\"Node\",\"fields\":["
    "{\"name\":\"v\",\"type\":\"int\"},"
    "{\"name\":\"next\",\"type\":[\"null\",\"Node\"]}]}";
static const char NULLS[] = "{\"type\":\"array\",\"items\":\"null\"}";

static const struct {
    const char *schema;
    const char *paths[16];
} SETS[] = {
    {EVERY,
     {"", "/id", "/email", "/n", "/f", "/d", "/ok", "/raw", "/fx", "/color",
      "/tags", "/attrs", "/session", "/addr/zip", "/maybe/city",
      "/choice/y"}},
    {LIST, {"", "/v", "/next/next/v", "/next/next/next/next/next"}},
    {NULLS, {""}},
};
#define NSETS (sizeof(SETS) / sizeof(SETS[0]))

static fm_avro_path *paths[NSETS][16];

static void setup(void)
{
    char err[512];
    for (size_t i = 0; i < NSETS; i++) {
        fm_avro_schema *s = fm_avro_schema_new(
            SETS[i].schema, strlen(SETS[i].schema), err, sizeof(err));
        CHECK(s);
        for (size_t j = 0; j < 16 && SETS[i].paths[j]; j++) {
            paths[i][j] = fm_avro_path_compile(s, SETS[i].paths[j], err,
                                               sizeof(err));
            CHECK(paths[i][j]);
        }
        fm_avro_schema_destroy(s); /* the paths hold it */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    if (!ready) {
        setup();
        ready = 1;
    }
    fm_key k, again;
    fm_key_init(&k);
    fm_key_init(&again);
    char err[512], err2[512];
    for (size_t i = 0; i < NSETS; i++)
        for (size_t j = 0; j < 16 && paths[i][j]; j++) {
            fm_key_reset(&k);
            fm_key_bytes(&k, "pre", 3);
            err[0] = 0;
            fm_avro_result r = fm_avro_extract(paths[i][j], data, size, &k,
                                               err, sizeof(err));
            if (r == FM_AVRO_FOUND) {
                CHECK(fm_key_ok(&k) && k.len >= 3 && !memcmp(k.p, "pre", 3));
            } else {
                CHECK(r == FM_AVRO_MISSING || r == FM_AVRO_BAD);
                CHECK(fm_key_ok(&k) && k.len == 3 && !memcmp(k.p, "pre", 3));
                CHECK(!strncmp(err, "avro: ", 6));
            }
            fm_key_reset(&again);
            fm_key_bytes(&again, "pre", 3);
            CHECK(fm_avro_extract(paths[i][j], data, size, &again, err2,
                                  sizeof(err2)) == r);
            CHECK(again.len == k.len && !memcmp(again.p, k.p, k.len));
        }
    fm_key_free(&k);
    fm_key_free(&again);
    return 0;
}
