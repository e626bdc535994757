/*
 * hash.c -- the one hash every filter uses (XXH3-128, seeded), the error
 * strings, and the small helpers every filter file shares.
 */
#include "bf_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
    case BF_KIND_WINDOWED:
        return "windowed";
    }
    return "unknown";
}

const char *bf_scheme_name(uint32_t scheme)
{
    switch (scheme) {
    case BF_SCHEME_DISTINCT:
        return "distinct probes";
    case BF_SCHEME_LANES:
        return "64-bit lanes";
    case BF_SCHEME_LANES32:
        return "32-bit lanes";
    }
    return "unknown";
}

static void vseterr(char *errstr, size_t errstr_size, const char *fmt,
                    va_list ap) __attribute__((format(printf, 3, 0)));

static void vseterr(char *errstr, size_t errstr_size, const char *fmt,
                    va_list ap)
{
    if (errstr && errstr_size > 0)
        vsnprintf(errstr, errstr_size, fmt, ap);
}

void bf_seterr(char *errstr, size_t errstr_size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vseterr(errstr, errstr_size, fmt, ap);
    va_end(ap);
}

bf_err bf_refuse(bf_err code, char *errstr, size_t errstr_size,
                 const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vseterr(errstr, errstr_size, fmt, ap);
    va_end(ap);
    return code;
}

/* Large arrays are aligned to 2 MiB and offered to the kernel as huge
 * pages (bloomfilters.h). */
#define HUGE_PAGE (2u << 20)

void *bf_alloc_aligned(uint64_t bytes)
{
    if (bytes == 0 || bytes > SIZE_MAX - HUGE_PAGE)
        return NULL;
    size_t align = bytes >= 2 * HUGE_PAGE ? HUGE_PAGE : BF_BLOCK_BYTES;
    /* aligned_alloc wants a multiple of the alignment; only the whole huge
     * pages are advised, so the tail costs 4 KiB pages, not a 2 MiB one. */
    size_t sz = (size_t)((bytes + align - 1) / align * align);
    void *p = aligned_alloc(align, sz);
    if (!p)
        return NULL;
#ifdef MADV_HUGEPAGE
    if (align == HUGE_PAGE)
        (void)madvise(p, (size_t)bytes / HUGE_PAGE * HUGE_PAGE,
                      MADV_HUGEPAGE); /* advice: failure is fine */
#endif
    memset(p, 0, (size_t)bytes); /* the rest is never touched */
    return p;
}
