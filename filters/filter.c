/*
 * filter.c -- bf_filter, one handle over any kind of filter, for the code
 * that works on "a filter file" (blocklists, the filter commands,
 * checkpoints) without caring which kind it holds.  Each operation, saving
 * and loading included, passes to the wrapped kind's own: the layered form
 * (format.c) for blocked, counting and scalable filters, windowed.c's ring
 * for windowed ones.  The handle is the top of the library: the kinds and
 * the format know nothing of it.
 *
 * A bf_filter owns the filter it wraps and, for a filter loaded in place from
 * a file, the mapping its cells live in (unmapped by bf_filter_destroy).
 */
#include "bf_internal.h"
#include "bf_filter_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

static bf_filter *wrap(bf_kind kind, void *p)
{
    if (!p)
        return NULL;
    bf_filter *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    f->kind = kind;
    switch (kind) {
    case BF_KIND_BLOCKED:
        f->u.b = p;
        break;
    case BF_KIND_SCALABLE:
        f->u.s = p;
        break;
    case BF_KIND_COUNTING:
        f->u.c = p;
        break;
    case BF_KIND_WINDOWED:
        f->u.w = p;
        break;
    }
    return f;
}

bf_filter *bf_filter_from_blocked(bf_blocked *bf)
{
    return wrap(BF_KIND_BLOCKED, bf);
}
bf_filter *bf_filter_from_scalable(bf_scalable *sb)
{
    return wrap(BF_KIND_SCALABLE, sb);
}
bf_filter *bf_filter_from_counting(bf_counting *cf)
{
    return wrap(BF_KIND_COUNTING, cf);
}
bf_filter *bf_filter_from_windowed(bf_windowed *w)
{
    return wrap(BF_KIND_WINDOWED, w);
}

/* The wrapped filter in the layered form, or false for a windowed one. */
static bool layered_of(const bf_filter *f, bf_layered *out)
{
    out->kind = f->kind;
    switch (f->kind) {
    case BF_KIND_BLOCKED:
        out->u.b = f->u.b;
        return true;
    case BF_KIND_SCALABLE:
        out->u.s = f->u.s;
        return true;
    case BF_KIND_COUNTING:
        out->u.c = f->u.c;
        return true;
    case BF_KIND_WINDOWED:
        break;
    }
    return false;
}

void bf_filter_destroy(bf_filter *f)
{
    if (!f)
        return;
    bf_layered l;
    if (layered_of(f, &l))
        bf_layered_destroy(&l);
    else
        bf_windowed_destroy(f->u.w);
    if (f->map)
        munmap(f->map, f->maplen);
    free(f);
}

bf_kind bf_filter_kind(const bf_filter *f) { return f->kind; }

bf_blocked *bf_filter_blocked(bf_filter *f)
{
    return f->kind == BF_KIND_BLOCKED ? f->u.b : NULL;
}
bf_scalable *bf_filter_scalable(bf_filter *f)
{
    return f->kind == BF_KIND_SCALABLE ? f->u.s : NULL;
}
bf_counting *bf_filter_counting(bf_filter *f)
{
    return f->kind == BF_KIND_COUNTING ? f->u.c : NULL;
}
bf_windowed *bf_filter_windowed(bf_filter *f)
{
    return f->kind == BF_KIND_WINDOWED ? f->u.w : NULL;
}

uint64_t bf_filter_seed(const bf_filter *f)
{
    bf_layered l;
    return layered_of(f, &l) ? bf_layered_seed(&l) : bf_windowed_seed(f->u.w);
}

bool bf_filter_contains_h(const bf_filter *f, bf_hash h)
{
    switch (f->kind) {
    case BF_KIND_BLOCKED:
        return bf_blocked_contains_h(f->u.b, h);
    case BF_KIND_SCALABLE:
        return bf_scalable_contains_h(f->u.s, h);
    case BF_KIND_COUNTING:
        return bf_counting_contains_h(f->u.c, h);
    case BF_KIND_WINDOWED:
        return bf_windowed_contains_h(f->u.w, h);
    }
    return false;
}

void bf_filter_prefetch_h(const bf_filter *f, bf_hash h)
{
    switch (f->kind) {
    case BF_KIND_BLOCKED:
        bf_blocked_prefetch_h(f->u.b, h);
        break;
    case BF_KIND_SCALABLE:
        bf_scalable_prefetch_h(f->u.s, h);
        break;
    case BF_KIND_COUNTING:
        bf_counting_prefetch_h(f->u.c, h);
        break;
    case BF_KIND_WINDOWED:
        bf_windowed_prefetch_h(f->u.w, h);
        break;
    }
}

bool bf_filter_contains(const bf_filter *f, const void *key, size_t len)
{
    return bf_filter_contains_h(f, bf_hash_key(key, len, bf_filter_seed(f)));
}

int bf_filter_add(bf_filter *f, const void *key, size_t len)
{
    if (f->readonly)
        return -BF_ERR_READONLY;
    bf_hash h = bf_hash_key(key, len, bf_filter_seed(f));
    switch (f->kind) {
    case BF_KIND_BLOCKED:
        return bf_blocked_add_h(f->u.b, h) ? 1 : 0;
    case BF_KIND_SCALABLE:
        return bf_scalable_add_if_absent_h(f->u.s, h);
    case BF_KIND_COUNTING:
        return bf_counting_add_h(f->u.c, h) ? 1 : 0;
    case BF_KIND_WINDOWED:
        return bf_windowed_add_if_absent_h(f->u.w, h);
    }
    return -BF_ERR_INVALID;
}

void bf_filter_info(const bf_filter *f, bf_info *out)
{
    switch (f->kind) {
    case BF_KIND_BLOCKED:
        bf_blocked_info(f->u.b, out);
        break;
    case BF_KIND_SCALABLE:
        bf_scalable_info(f->u.s, out);
        break;
    case BF_KIND_COUNTING:
        bf_counting_info(f->u.c, out);
        break;
    case BF_KIND_WINDOWED:
        bf_windowed_info(f->u.w, out);
        break;
    }
}

static bf_err merge_counting(bf_counting *dst, const bf_counting *src,
                             char *errstr, size_t errstr_size)
{
    if (dst->nblocks != src->nblocks || dst->k != src->k ||
        dst->seed != src->seed) {
        bf_seterr(errstr, errstr_size,
                  "different geometry or seed: %llu blocks k=%u seed %#llx vs "
                  "%llu blocks k=%u seed %#llx",
                  (unsigned long long)dst->nblocks, dst->k,
                  (unsigned long long)dst->seed,
                  (unsigned long long)src->nblocks, src->k,
                  (unsigned long long)src->seed);
        return BF_ERR_INCOMPATIBLE;
    }
    uint64_t n = dst->nblocks * BF_BLOCK_BYTES;
    dst->cells_set = dst->saturated = 0;
    for (uint64_t i = 0; i < n; i++) {
        unsigned lo = (dst->cells[i] & 0xfu) + (src->cells[i] & 0xfu);
        unsigned hi = (unsigned)(dst->cells[i] >> 4) + (src->cells[i] >> 4);
        lo = lo > 15 ? 15 : lo;
        hi = hi > 15 ? 15 : hi;
        dst->cells[i] = (uint8_t)(lo | hi << 4);
        dst->cells_set += (lo != 0) + (hi != 0);
        dst->saturated += (lo == 15) + (hi == 15);
    }
    dst->inserts += src->inserts;
    return BF_OK;
}

bf_err bf_filter_merge(bf_filter *dst, const bf_filter *src, char *errstr,
                       size_t errstr_size)
{
    if (dst->readonly) {
        bf_seterr(errstr, errstr_size,
                  "the destination filter is read-only (used in place)");
        return BF_ERR_READONLY;
    }
    if (dst->kind != src->kind) {
        bf_seterr(errstr, errstr_size, "cannot merge a %s filter into a %s "
                  "filter", bf_kind_name(src->kind), bf_kind_name(dst->kind));
        return BF_ERR_INCOMPATIBLE;
    }
    switch (dst->kind) {
    case BF_KIND_BLOCKED:
        return bf_blocked_merge(dst->u.b, src->u.b, errstr, errstr_size);
    case BF_KIND_COUNTING:
        return merge_counting(dst->u.c, src->u.c, errstr, errstr_size);
    case BF_KIND_WINDOWED:
        /* Generations of two streams cover different times: no union. */
        bf_seterr(errstr, errstr_size, "windowed filters cannot be merged");
        return BF_ERR_INCOMPATIBLE;
    case BF_KIND_SCALABLE:
        break;
    }
    bf_scalable *a = dst->u.s;
    const bf_scalable *b = src->u.s;
    if (a->nlayers != b->nlayers) {
        bf_seterr(errstr, errstr_size,
                  "scalable filters with %u and %u layers cannot be merged",
                  a->nlayers, b->nlayers);
        return BF_ERR_INCOMPATIBLE;
    }
    /* Check every layer before changing any, so a refusal changes nothing. */
    for (uint32_t i = 0; i < a->nlayers; i++) {
        const bf_blocked *x = a->layers[i], *y = b->layers[i];
        if (x->nblocks != y->nblocks || x->k != y->k || x->seed != y->seed ||
            x->scheme != y->scheme) {
            bf_seterr(errstr, errstr_size,
                      "layer %u differs: %llu blocks k=%u vs %llu blocks k=%u"
                      " (or different seeds or probe schemes)",
                      i, (unsigned long long)x->nblocks, x->k,
                      (unsigned long long)y->nblocks, y->k);
            return BF_ERR_INCOMPATIBLE;
        }
    }
    for (uint32_t i = 0; i < a->nlayers; i++) {
        bf_err err = bf_blocked_merge(a->layers[i], b->layers[i], errstr,
                                      errstr_size);
        if (err)
            return err;
    }
    return BF_OK;
}

/* -- saving and loading ---------------------------------------------------- */

/* A handle over a loaded filter; on failure the filter is destroyed. */
static bf_filter *from_layered(const bf_layered *l)
{
    bf_filter *f = NULL;
    switch (l->kind) {
    case BF_KIND_BLOCKED:
        f = wrap(l->kind, l->u.b);
        break;
    case BF_KIND_SCALABLE:
        f = wrap(l->kind, l->u.s);
        break;
    case BF_KIND_COUNTING:
        f = wrap(l->kind, l->u.c);
        break;
    case BF_KIND_WINDOWED:
        break;
    }
    if (!f)
        bf_layered_destroy(l);
    return f;
}

uint64_t bf_filter_serialized_size(const bf_filter *f)
{
    bf_layered l;
    return layered_of(f, &l) ? bf_layered_serialized_size(&l)
                             : bf_windowed_serialized_size(f->u.w);
}

bf_err bf_filter_serialize(const bf_filter *f, bf_write_fn write, void *opaque)
{
    bf_layered l;
    return layered_of(f, &l) ? bf_layered_serialize(&l, write, opaque)
                             : bf_windowed_serialize(f->u.w, write, opaque);
}

bf_err bf_filter_load_mem(const void *buf, size_t len, unsigned flags,
                          bf_filter **out, char *errstr, size_t errstr_size)
{
    *out = NULL;
    bool inplace = flags & BF_LOAD_INPLACE;
    if (inplace && ((uintptr_t)buf % BF_BLOCK_BYTES) != 0) {
        bf_seterr(errstr, errstr_size,
                  "in-place use needs a 64-byte aligned buffer");
        return BF_ERR_INVALID;
    }
    bf_kind kind;
    bf_err err = bf_format_check_envelope(buf, len, flags, &kind, errstr,
                                          errstr_size);
    if (err)
        return err;
    bf_filter *f;
    if (kind == BF_KIND_WINDOWED) {
        bf_windowed *w = NULL;
        err = bf_windowed_load(buf, len, flags, &w, errstr, errstr_size);
        if (err)
            return err;
        if (!(f = bf_filter_from_windowed(w))) {
            bf_windowed_destroy(w);
            bf_seterr(errstr, errstr_size, "out of memory");
            return BF_ERR_NOMEM;
        }
    } else {
        /* The loader checks the envelope again: cheap but for the
         * checksum, which it can skip now. */
        bf_layered l;
        err = bf_layered_load(buf, len, flags | BF_LOAD_NOVERIFY, &l, errstr,
                              errstr_size);
        if (err)
            return err;
        if (!(f = from_layered(&l))) {
            bf_seterr(errstr, errstr_size,
                      "out of memory loading a %zu-byte filter", len);
            return BF_ERR_NOMEM;
        }
        f->readonly = inplace;
    }
    *out = f;
    return BF_OK;
}

bf_err bf_filter_load_file(const char *path, unsigned flags, bf_filter **out,
                           char *errstr, size_t errstr_size)
{
    *out = NULL;
    void *map;
    size_t len;
    bf_err err = bf_format_map_file(path, &map, &len, errstr, errstr_size);
    if (err)
        return err;
    char why[256] = "";
    err = bf_filter_load_mem(map, len, flags, out, why, sizeof(why));
    if (err) {
        munmap(map, len);
        bf_seterr(errstr, errstr_size, "%s: %s", path, why);
        return err;
    }
    if (flags & BF_LOAD_INPLACE) {
        (*out)->map = map;
        (*out)->maplen = len;
    } else {
        munmap(map, len);
    }
    return BF_OK;
}

static bf_err produce_filter(void *opaque, bf_write_fn write, void *wopaque)
{
    return bf_filter_serialize(opaque, write, wopaque);
}

bf_err bf_filter_save_file(const bf_filter *f, const char *path, char *errstr,
                           size_t errstr_size)
{
    return bf_write_file_atomic(path, produce_filter, (void *)f, errstr,
                                errstr_size);
}
