/*
 * fuzz_registry_reply.c -- libFuzzer target for bs_registry_reply_parse
 * (stage/registry/reply.c), which reads what a Schema Registry answers:
 * whoever runs the registry, or sits between it and the stage, chooses
 * those bytes.
 *
 * Input: byte 0 picks the HTTP status from a table (200 most often, the
 * error statuses a registry sends, and odd ones); the rest is the body.
 * Checks, beyond the sanitizers: FOUND and only FOUND yields a reply; a
 * reply's text has no NUL inside and one after it, its type is one of
 * three, its references are within BS_REGISTRY_MAX_REFS, each with a
 * non-empty name and subject of at most BS_REGISTRY_MAX_NAME bytes and a
 * version >= 1; any other answer leaves a message; errstr buffers of 1 and
 * 17 bytes give the same answer and, unless FOUND, a NUL-terminated message.
 */
#include "registry/registry.h"

#include "fuzz_check.h"

#include <config.h> /* BS_ERRSTR_SIZE */

#include <stdint.h>
#include <string.h>

static const long statuses[] = {200, 200, 200, 200, 404, 404, 401, 403,
                                500, 503, 422, 429, 408, 302, 0,   999};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    long status = statuses[data[0] % (sizeof statuses / sizeof statuses[0])];
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    char errstr[BS_ERRSTR_SIZE];
    errstr[0] = '\0';
    bs_registry_reply *r = (bs_registry_reply *)1;
    bs_registry_result got =
        bs_registry_reply_parse(status, body, len, &r, errstr, sizeof errstr);
    CHECK(got == BS_REGISTRY_FOUND || got == BS_REGISTRY_NOT_FOUND ||
          got == BS_REGISTRY_UNREACHABLE || got == BS_REGISTRY_BAD);
    CHECK(memchr(errstr, '\0', sizeof errstr) != NULL);
    if (got == BS_REGISTRY_FOUND) {
        CHECK(status == 200);
        CHECK(r != NULL);
        CHECK(r->text != NULL && r->text_len > 0);
        CHECK(r->text[r->text_len] == '\0');
        CHECK(strlen(r->text) == r->text_len);
        CHECK(r->type == BS_REGISTRY_AVRO || r->type == BS_REGISTRY_PROTOBUF ||
              r->type == BS_REGISTRY_JSON);
        CHECK(r->nrefs <= BS_REGISTRY_MAX_REFS);
        CHECK(r->nrefs == 0 || r->refs != NULL);
        for (size_t i = 0; i < r->nrefs; i++) {
            size_t n = strlen(r->refs[i].name), s = strlen(r->refs[i].subject);
            CHECK(n > 0 && n <= BS_REGISTRY_MAX_NAME);
            CHECK(s > 0 && s <= BS_REGISTRY_MAX_NAME);
            CHECK(r->refs[i].version >= 1);
        }
        bs_registry_reply_destroy(r);
    } else {
        CHECK(r == NULL);
        CHECK(errstr[0] != '\0');
    }
    /* Small buffers: truncated, terminated, the same answer. */
    size_t sizes[] = {1, 17};
    for (size_t k = 0; k < 2; k++) {
        char small[17];
        memset(small, 'x', sizeof small);
        bs_registry_reply *r2 = NULL;
        bs_registry_result again =
            bs_registry_reply_parse(status, body, len, &r2, small, sizes[k]);
        CHECK(again == got);
        CHECK(again == BS_REGISTRY_FOUND || memchr(small, '\0', sizes[k]));
        bs_registry_reply_destroy(r2);
    }
    return 0;
}
