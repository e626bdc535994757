/*
 * hash.c -- the one hash every filter uses (XXH3-128, seeded), the error
 * strings, and the small helpers every filter file shares.
 */
#include "bf_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

bf_hash bf_hash_key(const void *key, size_t len, uint64_t seed)
{
    XXH128_hash_t x = XXH3_128bits_withSeed(key, len, seed);
    bf_hash h = {x.low64, x.high64};
    return h;
}

const char *bf_err_str(bf_err err)
{
    switch (err) {
    case BF_OK:
        return "success";
    case BF_ERR_NOMEM:
        return "out of memory";
    case BF_ERR_INVALID:
        return "invalid argument";
    case BF_ERR_IO:
        return "I/O error";
    case BF_ERR_FORMAT:
        return "damaged or foreign filter data";
    case BF_ERR_VERSION:
        return "unsupported filter format version";
    case BF_ERR_INCOMPATIBLE:
        return "incompatible filters";
    case BF_ERR_READONLY:
        return "filter is read-only";
    }
    return "unknown error";
}

const char *bf_kind_name(bf_kind kind)
{
    switch (kind) {
    case BF_KIND_BLOCKED:
        return "blocked";
    case BF_KIND_SCALABLE:
        return "scalable";
    case BF_KIND_COUNTING:
        return "counting";
    }
    return "unknown";
}

void bf_seterr(char *errstr, size_t errstr_size, const char *fmt, ...)
{
    if (!errstr || errstr_size == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errstr, errstr_size, fmt, ap);
    va_end(ap);
}

void *bf_alloc_aligned(uint64_t bytes)
{
    if (bytes == 0 || bytes > SIZE_MAX - BF_BLOCK_BYTES)
        return NULL;
    size_t sz = (size_t)((bytes + BF_BLOCK_BYTES - 1) / BF_BLOCK_BYTES *
                         BF_BLOCK_BYTES);
    void *p = aligned_alloc(BF_BLOCK_BYTES, sz);
    if (p)
        memset(p, 0, sz);
    return p;
}
