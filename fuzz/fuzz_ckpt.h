/*
 * fuzz_ckpt.h -- what the two checkpoint targets (fuzz_checkpoint.c,
 * fuzz_ckpt_delta.c) share: the recomputation of a checkpoint record's two
 * checksums (the filter's or filter delta's own trailer where the header
 * places it, then the record's), so mutations reach the checks behind them,
 * and the run of each input as given and so repaired.  Header-only; each
 * target includes it once.
 */
#ifndef BS_FUZZ_CKPT_H
#define BS_FUZZ_CKPT_H

#include <bf_endian.h>

#include <stddef.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <xxhash.h>

/* checkpoint.h: a 40-byte header, the topic, the watermarks, the ids
 * (none in a version-1 snapshot, seq and id in a version-2 one, seq, id
 * and prev in a delta), the payload's length, the payload, the sum. */
#define FUZZ_CKPT_FIXED 40u

static inline void fix_ckpt_checksums(uint8_t *buf, size_t len)
{
    if (len < FUZZ_CKPT_FIXED + 16)
        return;
    size_t ids = !memcmp(buf, "BLMCKPD", 8) ? 24
                 : bf_getn(buf + 8, 2) == 1 ? 0
                                           : 16;
    size_t off = FUZZ_CKPT_FIXED + (size_t)bf_getn(buf + 10, 2) +
                 (size_t)bf_getn(buf + 32, 4) * 12 + ids + 8;
    if (off + 8 <= len - 8) {
        size_t plen = len - 8 - off;
        bf_put64(buf + off + plen - 8, XXH3_64bits(buf + off, plen - 8));
    }
    bf_put64(buf + len - 8, XXH3_64bits(buf, len - 8));
}

/* Each input decoded twice: as given, then with its checksums recomputed.
 * decode must free what it allocates; false only when out of memory. */
static inline bool fuzz_ckpt_twice(const uint8_t *data, size_t size,
                                   void (*decode)(const uint8_t *, size_t))
{
    decode(data, size);
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return false;
    if (size)
        memcpy(copy, data, size);
    fix_ckpt_checksums(copy, size);
    decode(copy, size);
    free(copy);
    return true;
}

#endif
