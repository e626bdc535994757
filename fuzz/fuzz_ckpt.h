/*
 * fuzz_ckpt.h -- what the two checkpoint targets (fuzz_checkpoint.c,
 * fuzz_ckpt_delta.c) share: little-endian fields and the recomputation of a
 * checkpoint record's two checksums (the filter's or filter delta's own
 * trailer where the header places it, then the record's), so mutations
 * reach the checks behind them.  Header-only; each target includes it once.
 */
#ifndef BS_FUZZ_CKPT_H
#define BS_FUZZ_CKPT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <xxhash.h>

/* checkpoint.h: a 40-byte header, the topic, the watermarks, the ids
 * (none in a version-1 snapshot, seq and id in a version-2 one, seq, id
 * and prev in a delta), the payload's length, the payload, the sum. */
#define FUZZ_CKPT_FIXED 40u

static inline uint64_t get_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static inline void put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline void fix_ckpt_checksums(uint8_t *buf, size_t len)
{
    if (len < FUZZ_CKPT_FIXED + 16)
        return;
    size_t ids = !memcmp(buf, "BLMCKPD", 8) ? 24
                 : get_le(buf + 8, 2) == 1 ? 0
                                           : 16;
    size_t off = FUZZ_CKPT_FIXED + (size_t)get_le(buf + 10, 2) +
                 (size_t)get_le(buf + 32, 4) * 12 + ids + 8;
    if (off + 8 <= len - 8) {
        size_t plen = len - 8 - off;
        put_le64(buf + off + plen - 8, XXH3_64bits(buf + off, plen - 8));
    }
    put_le64(buf + len - 8, XXH3_64bits(buf, len - 8));
}

#endif
