/*
 * fuzz_src_header.c -- libFuzzer target for bs_parse_src (stage/checkpoint/replay.c),
 * the parser of the bloomstage-src header every output record carries and
 * replay reads back from the output topic, where anyone may have written
 * anything.
 *
 * Input: the header value, as is.  Checks, beyond the sanitizers: an
 * accepted value yields a non-empty topic, and printing the result the way
 * the stage writes the header parses back to the same result; a smaller
 * topic buffer never overflows (it is refused instead).
 */
#include "checkpoint/replay.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char topic[256];
    int32_t part;
    int64_t off;
    if (!bs_parse_src(data, size, topic, sizeof(topic), &part, &off))
        return 0;
    if (!topic[0] || part < 0 || off < 0)
        __builtin_trap();
    char again[320], t2[256];
    int n = snprintf(again, sizeof(again), "%s:%d:%lld", topic, (int)part,
                     (long long)off);
    int32_t p2;
    int64_t o2;
    if (n <= 0 || (size_t)n >= sizeof(again) ||
        !bs_parse_src(again, (size_t)n, t2, sizeof(t2), &p2, &o2) ||
        strcmp(topic, t2) != 0 || p2 != part || o2 != off)
        __builtin_trap();
    /* a buffer just too small for the topic: refused */
    size_t tlen = strlen(topic);
    char small[256];
    if (bs_parse_src(data, size, small, tlen, &p2, &o2))
        __builtin_trap();
    return 0;
}
