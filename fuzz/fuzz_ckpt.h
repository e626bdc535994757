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
 * (none in a version-1 snapshot, seq and id in a later one, seq, id and
 * prev in a delta), the payload's length, the payload, then (snapshots
 * from version 3, deltas from version 2) the audit sample's length and
 * the sample, and the sum. */
#define FUZZ_CKPT_FIXED 40u

/* The XXH3-64 trailer of the part [at, at + n) of buf[0..end), if there. */
static inline void fix_part_checksum(uint8_t *buf, size_t end, size_t at,
                                     uint64_t n)
{
    if (n >= 8 && at <= end && n <= end - at)
        bf_put64(buf + at + n - 8, XXH3_64bits(buf + at, (size_t)n - 8));
}

static inline void fix_ckpt_checksums(uint8_t *buf, size_t len)
{
    if (len < FUZZ_CKPT_FIXED + 16)
        return;
    bool delta = !memcmp(buf, "BLMCKPD", 8);
    unsigned version = (unsigned)bf_getn(buf + 8, 2);
    bool audited = delta ? version >= 2 : version >= 3;
    size_t ids = delta ? 24 : version == 1 ? 0 : 16;
    size_t off = FUZZ_CKPT_FIXED + (size_t)bf_getn(buf + 10, 2) +
                 (size_t)bf_getn(buf + 32, 4) * 12 + ids + 8;
    size_t end = len - 8;
    if (!audited) {
        if (off <= end)
            fix_part_checksum(buf, end, off, end - off);
    } else if (off <= end) {
        uint64_t flen = bf_getn(buf + off - 8, 8);
        fix_part_checksum(buf, end, off, flen);
        if (flen <= end - off && end - off - flen >= 8) {
            size_t aoff = off + (size_t)flen + 8;
            fix_part_checksum(buf, end, aoff, bf_getn(buf + aoff - 8, 8));
        }
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
