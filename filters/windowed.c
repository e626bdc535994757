/*
 * windowed.c -- a filter that forgets: a ring of G+1 time-sliced
 * generations of scalable filters (the contract is in bloomfilters.h), and
 * its serialized form.
 *
 * Time is the caller's (record timestamps, line numbers).  Slice s covers
 * [ceil(s*W/G), ceil((s+1)*W/G)); the generation of a slice is made at its
 * first insert, sized from what the previous generation took, asked by
 * every lookup while its slice is one of the last G+1, and freed whole when
 * stream time leaves it behind -- so memory follows one window of keys, not
 * the whole stream.  The filter owns its generations; the ring is indexed
 * by slice mod (G+1), and an entry whose slice is not live is empty.
 *
 * The file holds each generation as a whole scalable filter in the layered
 * form (format.c writes and loads it, with all its checks), so this file
 * adds only the ring around them.
 */
#include "bf_endian.h"
#include "bf_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define W_HDR_SIZE 128u
#define W_DESC_SIZE 32u
#define W_TRAILER_SIZE 8u
/* The sizing hint a file may carry: 2^40 keys. */
#define W_MAX_HINT (UINT64_C(1) << 40)
/* Keys a generation is sized for at least, once the first has set the
 * pace: a slice that took nothing must not make the next one tiny. */
#define W_MIN_CAPACITY 64u

typedef struct gen {
    int64_t slice;
    bf_scalable *sb; /* NULL: this ring entry holds no generation */
} gen;

struct bf_windowed {
    bf_windowed_params p;
    double gen_fpr;        /* each generation's compound rate: P/(G+1) */
    int64_t T;             /* stream time; -1 before any */
    int64_t cur;           /* slice of T; -1 before any */
    uint64_t last_inserts; /* keys the last finished generation took */
    gen *ring;             /* G+1 entries, by slice mod (G+1) */
};

void bf_windowed_params_default(bf_windowed_params *p)
{
    bf_scalable_params sp;
    bf_scalable_params_default(&sp);
    p->window = 1000;
    p->generations = 4;
    p->fpr = sp.fpr;
    p->initial_capacity = sp.initial_capacity;
    p->growth = sp.growth;
    p->tightening = sp.tightening;
    p->seed = sp.seed;
    p->max_bytes = 0;
}

/* floor(t*G/W) and ceil(s*W/G) for t, s >= 0, in 128 bits. */
static int64_t slice_of(const bf_windowed *w, int64_t t)
{
    return (int64_t)(((__int128)t * w->p.generations) / w->p.window);
}

static int64_t slice_start(const bf_windowed *w, int64_t s)
{
    __int128 v = ((__int128)s * w->p.window + w->p.generations - 1) /
                 w->p.generations;
    return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

static bool params_valid(const bf_windowed_params *p, char *errstr,
                         size_t errstr_size)
{
    if (p->generations < 1 || p->generations > BF_WINDOWED_MAX_GENERATIONS) {
        bf_seterr(errstr, errstr_size, "generations %u is outside 1..%u",
                  p->generations, BF_WINDOWED_MAX_GENERATIONS);
        return false;
    }
    if (p->window < (int64_t)p->generations) {
        bf_seterr(errstr, errstr_size, "window %lld is shorter than its %u "
                  "generations (each slice needs at least one time unit)",
                  (long long)p->window, p->generations);
        return false;
    }
    if (!(p->fpr > 0 && p->fpr <= BF_FPR_MAX)) {
        bf_seterr(errstr, errstr_size, "fpr %g is outside (0, %g]", p->fpr,
                  BF_FPR_MAX);
        return false;
    }
    if (p->initial_capacity == 0 || p->initial_capacity > W_MAX_HINT) {
        bf_seterr(errstr, errstr_size, "initial capacity %llu is outside "
                  "1..2^40", (unsigned long long)p->initial_capacity);
        return false;
    }
    if (!(p->growth >= 1.0 && p->growth <= 1024.0) ||
        !(p->tightening > 0 && p->tightening < 1)) {
        bf_seterr(errstr, errstr_size, "growth %g or tightening %g out of "
                  "range", p->growth, p->tightening);
        return false;
    }
    return true;
}

bf_windowed *bf_windowed_new(const bf_windowed_params *p, char *errstr,
                             size_t errstr_size)
{
    if (!params_valid(p, errstr, errstr_size))
        return NULL;
    bf_windowed *w = calloc(1, sizeof(*w));
    gen *ring = calloc(p->generations + 1u, sizeof(*ring));
    if (!w || !ring) {
        free(w);
        free(ring);
        bf_seterr(errstr, errstr_size, "out of memory");
        return NULL;
    }
    w->p = *p;
    w->gen_fpr = p->fpr / (p->generations + 1.0);
    w->T = w->cur = -1;
    w->ring = ring;
    return w;
}

void bf_windowed_destroy(bf_windowed *w)
{
    if (!w)
        return;
    for (uint32_t i = 0; i <= w->p.generations; i++)
        bf_scalable_destroy(w->ring[i].sb);
    free(w->ring);
    free(w);
}

void bf_windowed_params_get(const bf_windowed *w, bf_windowed_params *out)
{
    *out = w->p;
}

uint64_t bf_windowed_seed(const bf_windowed *w) { return w->p.seed; }

int64_t bf_windowed_stream_time(const bf_windowed *w) { return w->T; }

static gen *ring_at(const bf_windowed *w, int64_t slice)
{
    return &w->ring[(uint64_t)slice % (w->p.generations + 1u)];
}

/* The generation of a live slice, or NULL. */
static bf_scalable *gen_of(const bf_windowed *w, int64_t slice)
{
    if (slice < 0)
        return NULL;
    const gen *g = ring_at(w, slice);
    return g->sb && g->slice == slice ? g->sb : NULL;
}

/* Keys a generation took, as a sizing hint: at most W_MAX_HINT (a loaded
 * file's counts are data, and the hint must load back). */
static uint64_t gen_inserts(const bf_scalable *sb)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < sb->nlayers; i++) {
        uint64_t x = bf_blocked_inserts(sb->layers[i]);
        n = x > W_MAX_HINT - n ? W_MAX_HINT : n + x;
    }
    return n;
}

/* Cell bytes of every generation but the current one's. */
static uint64_t older_bytes(const bf_windowed *w)
{
    uint64_t b = 0;
    for (uint32_t i = 0; i <= w->p.generations; i++)
        if (w->ring[i].sb && w->ring[i].slice != w->cur)
            b += w->ring[i].sb->bytes;
    return b;
}

/* The current generation may grow to what the cap leaves it (the older
 * ones only shrink, so this is recomputed when one is made). */
static void cap_current(bf_windowed *w)
{
    bf_scalable *sb = gen_of(w, w->cur);
    if (!sb || !w->p.max_bytes)
        return;
    uint64_t older = older_bytes(w);
    /* 1 byte, not 0 (no cap): a generation at the cap grows no more. */
    bf_scalable_set_max_bytes(sb, w->p.max_bytes > older
                                      ? w->p.max_bytes - older
                                      : 1);
}

void bf_windowed_set_max_bytes(bf_windowed *w, uint64_t max_bytes)
{
    w->p.max_bytes = max_bytes;
    bf_scalable *sb = gen_of(w, w->cur);
    if (sb && !max_bytes)
        bf_scalable_set_max_bytes(sb, 0);
    cap_current(w);
}

bool bf_windowed_advance(bf_windowed *w, int64_t t)
{
    if (t < 0)
        return false;
    if (t > w->T) {
        w->T = t;
        int64_t ns = slice_of(w, t);
        if (ns != w->cur) {
            bf_scalable *old = gen_of(w, w->cur);
            if (old)
                w->last_inserts = gen_inserts(old);
            for (uint32_t i = 0; i <= w->p.generations; i++) {
                gen *g = &w->ring[i];
                if (g->sb && g->slice < ns - (int64_t)w->p.generations) {
                    bf_scalable_destroy(g->sb);
                    g->sb = NULL;
                }
            }
            w->cur = ns;
        }
    }
    return slice_of(w, t) < w->cur - (int64_t)w->p.generations;
}

void bf_audit_follow_window(bf_audit *a, const bf_windowed *w)
{
    /* Before any advance an insert goes to slice 0's generation. */
    int64_t cur = w->cur < 0 ? 0 : w->cur;
    bf_audit_set_slice(a, cur, cur - (int64_t)w->p.generations);
}

bool bf_windowed_contains_h(const bf_windowed *w, bf_hash h)
{
    /* Newest first: a repeat is likeliest soon after its key. */
    for (int64_t s = w->cur; s >= 0 && s >= w->cur - (int64_t)w->p.generations;
         s--) {
        const bf_scalable *sb = gen_of(w, s);
        if (sb && bf_scalable_contains_h(sb, h))
            return true;
    }
    return false;
}

void bf_windowed_prefetch_h(const bf_windowed *w, bf_hash h)
{
    for (int64_t s = w->cur; s >= 0 && s >= w->cur - (int64_t)w->p.generations;
         s--) {
        const bf_scalable *sb = gen_of(w, s);
        if (sb)
            bf_scalable_prefetch_h(sb, h);
    }
}

/* The current slice's generation, made now: sized for what the previous
 * one took (a quarter more), the first for initial_capacity. */
static bf_scalable *make_current(bf_windowed *w)
{
    uint64_t n0 = w->p.initial_capacity;
    if (w->last_inserts) {
        n0 = w->last_inserts + w->last_inserts / 4;
        if (n0 < W_MIN_CAPACITY)
            n0 = W_MIN_CAPACITY;
        if (n0 > W_MAX_HINT)
            n0 = W_MAX_HINT;
    }
    uint64_t older = older_bytes(w);
    if (w->p.max_bytes && older >= w->p.max_bytes)
        return NULL;
    bf_scalable_params sp = {
        .initial_capacity = n0,
        .fpr = w->gen_fpr,
        .growth = w->p.growth,
        .tightening = w->p.tightening,
        .seed = w->p.seed,
        .max_bytes = w->p.max_bytes ? w->p.max_bytes - older : 0,
    };
    bf_scalable *sb = bf_scalable_new(&sp, NULL, 0);
    if (!sb)
        return NULL;
    gen *g = ring_at(w, w->cur);
    bf_scalable_destroy(g->sb); /* a dead slice's, if any */
    g->slice = w->cur;
    g->sb = sb;
    return sb;
}

int bf_windowed_add_if_absent_h(bf_windowed *w, bf_hash h)
{
    if (w->T < 0)
        (void)bf_windowed_advance(w, 0);
    if (bf_windowed_contains_h(w, h))
        return 0;
    bf_scalable *sb = gen_of(w, w->cur);
    if (!sb && !(sb = make_current(w)))
        return -BF_ERR_NOMEM;
    return bf_scalable_add_if_absent_h(sb, h);
}

uint32_t bf_windowed_generations(const bf_windowed *w)
{
    uint32_t n = 0;
    for (int64_t s = w->cur - (int64_t)w->p.generations; s <= w->cur; s++)
        n += gen_of(w, s) != NULL;
    return n;
}

bool bf_windowed_generation_info(const bf_windowed *w, uint32_t i,
                                 bf_generation_info *out)
{
    for (int64_t s = w->cur - (int64_t)w->p.generations; s <= w->cur; s++) {
        const bf_scalable *sb = gen_of(w, s);
        if (!sb || i-- > 0)
            continue;
        out->slice = s;
        out->time_from = slice_start(w, s);
        out->time_to = slice_start(w, s + 1);
        bf_scalable_info(sb, &out->info);
        return true;
    }
    return false;
}

void bf_windowed_info(const bf_windowed *w, bf_info *out)
{
    memset(out, 0, sizeof(*out));
    out->kind = BF_KIND_WINDOWED;
    out->hash_id = BF_HASH_XXH3_128;
    out->seed = w->p.seed;
    out->fpr_target = w->p.fpr;
    double keep = 1.0;
    bf_generation_info g;
    for (uint32_t i = 0; bf_windowed_generation_info(w, i, &g); i++) {
        out->capacity += g.info.capacity;
        out->k = g.info.k; /* and scheme: of the newest generation's */
        out->scheme = g.info.scheme; /* newest layer */
        out->layers += g.info.layers;
        out->cells += g.info.cells;
        out->bytes += g.info.bytes;
        out->inserts += g.info.inserts;
        out->cells_set += g.info.cells_set;
        out->est_keys += g.info.est_keys;
        keep *= 1.0 - g.info.est_fpr;
    }
    out->fill = out->cells ? (double)out->cells_set / (double)out->cells : 0;
    out->est_fpr = 1.0 - keep;
}

/* -- the serialized form ---------------------------------------------------- */

static uint64_t align64(uint64_t x) { return (x + 63) & ~UINT64_C(63); }

/* The generation's scalable filter in the layered form, for format.c. */
static bf_layered as_layered(bf_scalable *sb)
{
    bf_layered f = {.kind = BF_KIND_SCALABLE, .u.s = sb};
    return f;
}

uint64_t bf_windowed_serialized_size(const bf_windowed *w)
{
    uint32_t n = bf_windowed_generations(w);
    uint64_t end = W_HDR_SIZE + (uint64_t)W_DESC_SIZE * n;
    for (int64_t s = w->cur - (int64_t)w->p.generations; s <= w->cur; s++) {
        bf_scalable *sb = gen_of(w, s);
        if (!sb)
            continue;
        bf_layered f = as_layered(sb);
        end = align64(end) + bf_layered_serialized_size(&f);
    }
    return end + W_TRAILER_SIZE;
}

typedef struct chained {
    bf_write_fn write;
    void *opaque;
    XXH3_state_t *state;
    uint64_t written;
} chained;

static int chained_write(void *opaque, const void *buf, size_t len)
{
    chained *c = opaque;
    if (XXH3_64bits_update(c->state, buf, len) != XXH_OK)
        return -1;
    c->written += len;
    return c->write(c->opaque, buf, len);
}

static int pad_to(chained *c, uint64_t offset)
{
    static const uint8_t zero[64];
    size_t n = (size_t)(offset - c->written);
    return n ? chained_write(c, zero, n) : 0;
}

bf_err bf_windowed_serialize(const bf_windowed *w, bf_write_fn write,
                             void *opaque)
{
    uint32_t n = bf_windowed_generations(w);
    uint32_t hsize = W_HDR_SIZE + W_DESC_SIZE * n;
    uint8_t *hdr = calloc(1, hsize);
    chained c = {write, opaque, XXH3_createState(), 0};
    bf_err err = BF_ERR_NOMEM;
    if (!hdr || !c.state || XXH3_64bits_reset(c.state) != XXH_OK)
        goto out;
    bf_format_put_envelope(hdr, BF_KIND_WINDOWED, w->p.seed,
                           bf_windowed_serialized_size(w));
    bf_put32(hdr + 32, n);
    bf_put32(hdr + 36, hsize);
    bf_putf64(hdr + 40, w->p.fpr);
    bf_putf64(hdr + 48, w->p.growth);
    bf_putf64(hdr + 56, w->p.tightening);
    bf_put64(hdr + 64, (uint64_t)w->p.window);
    bf_put32(hdr + 72, w->p.generations);
    bf_put64(hdr + 80, (uint64_t)w->T);
    bf_put64(hdr + 88, w->p.initial_capacity);
    bf_put64(hdr + 96, w->last_inserts);
    uint64_t off = hsize;
    uint32_t i = 0;
    for (int64_t s = w->cur - (int64_t)w->p.generations; s <= w->cur; s++) {
        bf_scalable *sb = gen_of(w, s);
        if (!sb)
            continue;
        bf_layered f = as_layered(sb);
        uint64_t size = bf_layered_serialized_size(&f);
        off = align64(off);
        uint8_t *d = hdr + W_HDR_SIZE + W_DESC_SIZE * i++;
        bf_put64(d, (uint64_t)s);
        bf_put64(d + 8, off);
        bf_put64(d + 16, size);
        off += size;
    }
    err = BF_ERR_IO;
    if (chained_write(&c, hdr, hsize))
        goto out;
    for (int64_t s = w->cur - (int64_t)w->p.generations; s <= w->cur; s++) {
        bf_scalable *sb = gen_of(w, s);
        if (!sb)
            continue;
        bf_layered f = as_layered(sb);
        if (pad_to(&c, align64(c.written)) ||
            bf_layered_serialize(&f, chained_write, &c) != BF_OK)
            goto out;
    }
    uint8_t trailer[8];
    bf_put64(trailer, XXH3_64bits_digest(c.state));
    if (write(opaque, trailer, sizeof(trailer)))
        goto out;
    err = BF_OK;
out:
    XXH3_freeState(c.state);
    free(hdr);
    return err;
}

#define FAIL(code, ...)                                                        \
    do {                                                                       \
        bf_seterr(errstr, errstr_size, __VA_ARGS__);                           \
        err = code;                                                            \
        goto fail;                                                             \
    } while (0)

static bool all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

/* What a windowed filter's header says, once checked. */
typedef struct w_header {
    bf_windowed_params p;
    uint32_t n;     /* generations stored */
    uint32_t hsize; /* header and descriptors */
    int64_t T;      /* stream time, -1: none yet */
    uint64_t hint;  /* the last generation's inserts, for sizing */
} w_header;

static bf_err parse_header(const uint8_t *buf, size_t len, w_header *h,
                           char *errstr, size_t errstr_size)
{
    bf_err err = BF_OK;
    if (len < W_HDR_SIZE + W_TRAILER_SIZE)
        FAIL(BF_ERR_FORMAT, "truncated: %zu bytes is too short for a windowed "
             "filter header", len);
    h->n = (uint32_t)bf_getn(buf + 32, 4);
    h->hsize = (uint32_t)bf_getn(buf + 36, 4);
    h->p = (bf_windowed_params){
        .window = (int64_t)bf_getn(buf + 64, 8),
        .generations = (uint32_t)bf_getn(buf + 72, 4),
        .fpr = bf_getf64(buf + 40),
        .initial_capacity = bf_getn(buf + 88, 8),
        .growth = bf_getf64(buf + 48),
        .tightening = bf_getf64(buf + 56),
        .seed = bf_getn(buf + 16, 8),
        .max_bytes = 0,
    };
    char why[200];
    if (!params_valid(&h->p, why, sizeof(why)))
        FAIL(BF_ERR_FORMAT, "bad windowed parameters: %s", why);
    if (h->n > h->p.generations + 1u)
        FAIL(BF_ERR_FORMAT, "%u generations, more than the %u a window of %u "
             "slices keeps", h->n, h->p.generations + 1u, h->p.generations);
    if (h->hsize != W_HDR_SIZE + W_DESC_SIZE * h->n)
        FAIL(BF_ERR_FORMAT, "header size %u does not match %u generations",
             h->hsize, h->n);
    if ((uint64_t)h->hsize + W_TRAILER_SIZE > len)
        FAIL(BF_ERR_FORMAT, "truncated: %u generation descriptors do not fit "
             "in %zu bytes", h->n, len);
    if (!all_zero(buf + 76, 4) || !all_zero(buf + 104, 24))
        FAIL(BF_ERR_FORMAT, "reserved header bytes are not zero");
    h->T = (int64_t)bf_getn(buf + 80, 8);
    h->hint = bf_getn(buf + 96, 8);
    if (h->T < -1)
        FAIL(BF_ERR_FORMAT, "stream time %lld is negative", (long long)h->T);
    if (h->T == -1 && h->n > 0)
        FAIL(BF_ERR_FORMAT, "%u generations but no stream time", h->n);
    if (h->hint > W_MAX_HINT)
        FAIL(BF_ERR_FORMAT, "sizing hint %llu keys is beyond 2^40",
             (unsigned long long)h->hint);
fail:
    return err;
}

/* Every descriptor checked before any generation is loaded: live slices
 * in order, each generation where the last one ended (aligned, zero
 * padding), the last one ending at the checksum. */
static bf_err check_descriptors(const uint8_t *buf, size_t len,
                                const w_header *h, const bf_windowed *w,
                                char *errstr, size_t errstr_size)
{
    bf_err err = BF_OK;
    uint64_t expect = h->hsize;
    int64_t prev = -1;
    for (uint32_t i = 0; i < h->n; i++) {
        const uint8_t *d = buf + W_HDR_SIZE + W_DESC_SIZE * i;
        int64_t s = (int64_t)bf_getn(d, 8);
        uint64_t off = bf_getn(d + 8, 8), size = bf_getn(d + 16, 8);
        if (s <= prev || s > w->cur ||
            s < w->cur - (int64_t)h->p.generations)
            FAIL(BF_ERR_FORMAT, "generation %u: slice %lld is not live at "
                 "stream time %lld (or out of order)", i, (long long)s,
                 (long long)h->T);
        if (!all_zero(d + 24, 8))
            FAIL(BF_ERR_FORMAT, "generation %u: reserved bytes are not zero",
                 i);
        if (off != align64(expect))
            FAIL(BF_ERR_FORMAT, "generation %u: data offset %llu, expected "
                 "%llu", i, (unsigned long long)off,
                 (unsigned long long)align64(expect));
        if (off > len - W_TRAILER_SIZE || size > len - W_TRAILER_SIZE - off)
            FAIL(BF_ERR_FORMAT, "truncated: generation %u (%llu bytes at "
                 "%llu) runs past the end of the %zu-byte file", i,
                 (unsigned long long)size, (unsigned long long)off, len);
        if (!all_zero(buf + expect, (size_t)(off - expect)))
            FAIL(BF_ERR_FORMAT, "generation %u: padding before it is not "
                 "zero", i);
        prev = s;
        expect = off + size;
    }
    if (expect != len - W_TRAILER_SIZE)
        FAIL(BF_ERR_FORMAT, "sizes do not add up: generations end at %llu, "
             "checksum at %zu", (unsigned long long)expect,
             len - W_TRAILER_SIZE);
fail:
    return err;
}

/* Each generation loaded into its ring slot: a scalable filter with the
 * window's seed and per-generation rate.  The outer checksum covered the
 * generations' bytes already. */
static bf_err load_generations(const uint8_t *buf, const w_header *h,
                               bf_windowed *w, char *errstr,
                               size_t errstr_size)
{
    unsigned gflags = BF_LOAD_COPY | BF_LOAD_NOVERIFY;
    char why[200];
    for (uint32_t i = 0; i < h->n; i++) {
        const uint8_t *d = buf + W_HDR_SIZE + W_DESC_SIZE * i;
        int64_t s = (int64_t)bf_getn(d, 8);
        uint64_t off = bf_getn(d + 8, 8), size = bf_getn(d + 16, 8);
        bf_layered f;
        bf_err e = bf_layered_load(buf + off, (size_t)size, gflags, &f, why,
                                   sizeof(why));
        if (e) {
            bf_seterr(errstr, errstr_size, "generation %u: %s", i, why);
            return e;
        }
        bf_scalable *sb = f.kind == BF_KIND_SCALABLE ? f.u.s : NULL;
        if (!sb || sb->params.seed != h->p.seed ||
            fabs(sb->params.fpr - w->gen_fpr) > 1e-9 * w->gen_fpr) {
            bf_seterr(errstr, errstr_size, "generation %u: a %s filter with "
                      "seed %#llx and fpr %g, not a scalable one with seed "
                      "%#llx and fpr %g", i, bf_kind_name(f.kind),
                      (unsigned long long)bf_layered_seed(&f),
                      sb ? sb->params.fpr : 0.0,
                      (unsigned long long)h->p.seed, w->gen_fpr);
            bf_layered_destroy(&f);
            return BF_ERR_FORMAT;
        }
        gen *g = ring_at(w, s);
        g->slice = s;
        g->sb = sb;
    }
    return BF_OK;
}

bf_err bf_windowed_load(const uint8_t *buf, size_t len, unsigned flags,
                        bf_windowed **out, char *errstr, size_t errstr_size)
{
    /* The caller checked the envelope (magic, version, kind, hash id, file
     * size, checksum unless NOVERIFY) before calling here. */
    *out = NULL;
    if (flags & BF_LOAD_INPLACE) {
        bf_seterr(errstr, errstr_size, "a windowed filter cannot be used in "
                  "place (load it as a copy)");
        return BF_ERR_INVALID;
    }
    w_header h;
    bf_err err = parse_header(buf, len, &h, errstr, errstr_size);
    if (err)
        return err;
    char why[200];
    bf_windowed *w = bf_windowed_new(&h.p, why, sizeof(why));
    if (!w) {
        bf_seterr(errstr, errstr_size, "%s", why);
        return BF_ERR_NOMEM;
    }
    w->T = h.T;
    w->cur = h.T < 0 ? -1 : slice_of(w, h.T);
    w->last_inserts = h.hint;
    err = check_descriptors(buf, len, &h, w, errstr, errstr_size);
    if (!err)
        err = load_generations(buf, &h, w, errstr, errstr_size);
    if (err) {
        bf_windowed_destroy(w);
        return err;
    }
    *out = w;
    return BF_OK;
}
