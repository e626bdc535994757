/*
 * fuzz_avro_schema.c -- libFuzzer target for Avro schemas as a registry
 * might return them: arbitrary JSON through avro-c's parser and
 * fm_avro_schema_new's copy of it (recursive and shared named types,
 * unions, fixed sizes), a path compiled against it, and a payload read
 * with that path (so the reader meets every shape of schema, not only the
 * fixed ones of fuzz_avro).
 *
 * Input: the path ('/'-separated field names, up to the first '\n'), the
 * schema JSON (up to the first NUL byte), then the payload.  Checks,
 * beyond the sanitizers: a refused schema or path names why ("avro: ");
 * a read leaves the key as fuzz_avro requires.
 */
#include "fm_avro.h"
#include "fuzz_check.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size);
    if (!nl)
        return 0;
    size_t plen = (size_t)(nl - data);
    if (plen > FM_AVRO_PATH_MAX || memchr(data, 0, plen))
        return 0;
    char path[FM_AVRO_PATH_MAX + 1];
    memcpy(path, data, plen);
    path[plen] = 0;
    const char *json = (const char *)nl + 1;
    size_t rest = size - plen - 1;
    const uint8_t *nul = memchr(json, 0, rest);
    size_t jlen = nul ? (size_t)(nul - (const uint8_t *)json) : rest;
    const uint8_t *payload = nul ? nul + 1 : NULL;
    size_t paylen = nul ? rest - jlen - 1 : 0;

    char err[512] = "";
    fm_avro_schema *s = fm_avro_schema_new(json, jlen, err, sizeof(err));
    if (!s) {
        CHECK(!strncmp(err, "avro: ", 6));
        return 0;
    }
    err[0] = 0;
    fm_avro_path *p = fm_avro_path_compile(s, path, err, sizeof(err));
    fm_avro_schema_destroy(s);
    if (!p) {
        CHECK(!strncmp(err, "avro: ", 6));
        return 0;
    }
    fm_key k;
    fm_key_init(&k);
    fm_key_bytes(&k, "pre", 3);
    fm_avro_result r = fm_avro_extract(p, payload, paylen, &k, err,
                                       sizeof(err));
    if (r == FM_AVRO_FOUND)
        CHECK(fm_key_ok(&k) && k.len >= 3 && !memcmp(k.p, "pre", 3));
    else
        CHECK(fm_key_ok(&k) && k.len == 3 && !strncmp(err, "avro: ", 6));
    fm_key_free(&k);
    fm_avro_path_destroy(p);
    return 0;
}
