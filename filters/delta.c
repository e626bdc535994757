/*
 * delta.c -- change tracking and deltas of blocked and scalable filters
 * (the format and its checks are described in bloomfilters.h).
 *
 * Each tracked layer owns a bitmap with one bit per 512-bit block, set by
 * the add paths (blocked.c) when a key sets a new bit in that block; the
 * bf_filter handle keeps the mark the bits are relative to and the layer
 * count at the mark.  A delta is the changed blocks whole (a block is the
 * unit an insert touches, so a key costs one block plus its number), plus
 * the descriptors of every layer so new scalable layers can be made on the
 * other side.  Applying trusts nothing: every count, size, block number
 * and layer is checked against the bytes given and against the filter
 * before the filter is touched; the one check that needs each changed
 * block of the filter (it may only gain bits) is made as the block is
 * written, in the same pass, with its old contents kept and put back if
 * any check fails -- so a rejected delta leaves the filter as it was.
 */
#include "bf_endian.h"
#include "bf_filter_internal.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define D_HDR 64u
#define D_DESC 64u
#define D_TRAILER 8u

/* The layers of a blocked or scalable filter; 0 for other kinds. */
static uint32_t nlayers(const bf_filter *f)
{
    if (f->kind == BF_KIND_BLOCKED)
        return 1;
    if (f->kind == BF_KIND_SCALABLE)
        return f->u.s->nlayers;
    return 0;
}

static bf_blocked *layer(const bf_filter *f, uint32_t i)
{
    return f->kind == BF_KIND_BLOCKED ? f->u.b : f->u.s->layers[i];
}

POPCNT_CLONES static uint64_t dirty_count(const bf_blocked *bf)
{
    uint64_t n = 0;
    if (bf->dirty)
        for (uint64_t i = 0; i < bf_dirty_words(bf); i++)
            n += (uint64_t)__builtin_popcountll(bf->dirty[i]);
    return n;
}

bf_err bf_filter_track(bf_filter *f, uint64_t mark, char *errstr,
                       size_t errstr_size)
{
    if (f->kind != BF_KIND_BLOCKED && f->kind != BF_KIND_SCALABLE) {
        bf_seterr(errstr, errstr_size, "changes of a %s filter are not "
                  "tracked (only blocked and scalable filters have deltas)",
                  bf_kind_name(f->kind));
        return BF_ERR_INVALID;
    }
    if (f->readonly) {
        bf_seterr(errstr, errstr_size, "the filter is read-only (used in "
                  "place): it cannot change, so there is nothing to track");
        return BF_ERR_READONLY;
    }
    if (f->tracking) {
        bf_filter_mark(f, mark);
        return BF_OK;
    }
    uint32_t n = nlayers(f);
    for (uint32_t i = 0; i < n; i++) {
        bf_blocked *bf = layer(f, i);
        if (!bf_blocked_track(bf)) {
            for (uint32_t j = 0; j < i; j++)
                bf_blocked_untrack(layer(f, j));
            bf_seterr(errstr, errstr_size, "out of memory for the change "
                      "bitmap of a %llu-block layer",
                      (unsigned long long)bf->nblocks);
            return BF_ERR_NOMEM;
        }
    }
    if (f->kind == BF_KIND_SCALABLE)
        f->u.s->track = true;
    f->tracking = true;
    f->mark = mark;
    f->mark_layers = n;
    return BF_OK;
}

bool bf_filter_tracked(const bf_filter *f, uint64_t *mark)
{
    if (f->tracking && mark)
        *mark = f->mark;
    return f->tracking;
}

void bf_filter_mark(bf_filter *f, uint64_t mark)
{
    if (!f->tracking)
        return;
    uint32_t n = nlayers(f);
    for (uint32_t i = 0; i < n; i++) {
        bf_blocked *bf = layer(f, i);
        memset(bf->dirty, 0, (size_t)bf_dirty_words(bf) * sizeof(uint64_t));
    }
    f->mark = mark;
    f->mark_layers = n;
}

uint64_t bf_filter_delta_blocks(const bf_filter *f)
{
    if (!f->tracking)
        return 0;
    uint64_t n = 0;
    for (uint32_t i = 0; i < nlayers(f); i++)
        n += dirty_count(layer(f, i));
    return n;
}

uint64_t bf_filter_delta_size(const bf_filter *f)
{
    if (!f->tracking)
        return 0;
    return D_HDR + (uint64_t)D_DESC * nlayers(f) +
           bf_filter_delta_blocks(f) * (8 + BF_BLOCK_BYTES) + D_TRAILER;
}

typedef struct hashed {
    bf_write_fn write;
    void *opaque;
    XXH3_state_t *state;
} hashed;

static int hwrite(hashed *h, const void *buf, size_t len)
{
    if (XXH3_64bits_update(h->state, buf, len) != XXH_OK)
        return -1;
    return h->write(h->opaque, buf, len);
}

/* Writes the changed block numbers (numbers = true) or contents of one
 * layer, through a small buffer. */
static int write_blocks(hashed *h, const bf_blocked *bf, bool numbers)
{
    uint8_t buf[64 * 64];
    size_t used = 0;
    for (uint64_t w = 0; w < bf_dirty_words(bf); w++) {
        for (uint64_t bits = bf->dirty[w]; bits; bits &= bits - 1) {
            uint64_t b = w * 64 + (uint64_t)__builtin_ctzll(bits);
            if (numbers) {
                bf_put64(buf + used, b);
                used += 8;
            } else {
                memcpy(buf + used, bf->words + b * BF_BLOCK_WORDS,
                       BF_BLOCK_BYTES);
                used += BF_BLOCK_BYTES;
            }
            if (used == sizeof(buf)) {
                if (hwrite(h, buf, used))
                    return -1;
                used = 0;
            }
        }
    }
    return used ? hwrite(h, buf, used) : 0;
}

bf_err bf_filter_delta_serialize(const bf_filter *f, uint64_t new_mark,
                                 bf_write_fn write, void *opaque)
{
    if (!f->tracking)
        return BF_ERR_INVALID;
    uint32_t n = nlayers(f);
    uint8_t hdr[D_HDR], desc[D_DESC];
    memset(hdr, 0, sizeof(hdr));
    memcpy(hdr, BF_DELTA_MAGIC, sizeof(BF_DELTA_MAGIC));
    bf_put16(hdr + 8, BF_DELTA_VERSION);
    bf_put16(hdr + 10, (uint16_t)f->kind);
    bf_put32(hdr + 12, BF_HASH_XXH3_128);
    bf_put64(hdr + 16, bf_filter_seed(f));
    bf_put64(hdr + 24, bf_filter_delta_size(f));
    bf_put64(hdr + 32, f->mark);
    bf_put64(hdr + 40, new_mark);
    bf_put32(hdr + 48, n);
    bf_put32(hdr + 52, f->mark_layers);
    bf_put64(hdr + 56, bf_filter_delta_blocks(f));
    XXH3_state_t *state = XXH3_createState();
    if (!state || XXH3_64bits_reset(state) != XXH_OK) {
        XXH3_freeState(state);
        return BF_ERR_NOMEM;
    }
    hashed h = {write, opaque, state};
    bf_err err = BF_ERR_IO;
    if (hwrite(&h, hdr, sizeof(hdr)))
        goto out;
    for (uint32_t i = 0; i < n; i++) {
        const bf_blocked *bf = layer(f, i);
        memset(desc, 0, sizeof(desc));
        bf_put64(desc, bf->nblocks);
        bf_put16(desc + 8, (uint16_t)bf->k);
        bf_put16(desc + 10, (uint16_t)bf->scheme);
        bf_put64(desc + 16, bf->capacity);
        bf_putf64(desc + 24, bf->fpr);
        bf_put64(desc + 32, bf_blocked_inserts(bf));
        bf_put64(desc + 40, bf_blocked_bits(bf));
        bf_put64(desc + 48, dirty_count(bf));
        if (hwrite(&h, desc, sizeof(desc)))
            goto out;
    }
    for (uint32_t i = 0; i < n; i++)
        if (write_blocks(&h, layer(f, i), true) ||
            write_blocks(&h, layer(f, i), false))
            goto out;
    uint8_t sum[8];
    bf_put64(sum, XXH3_64bits_digest(state));
    if (write(opaque, sum, sizeof(sum)))
        goto out;
    err = BF_OK;
out:
    XXH3_freeState(state);
    return err;
}

/* -- reading -------------------------------------------------------------- */

#define FAIL(code, ...)                                                        \
    do {                                                                       \
        bf_seterr(errstr, errstr_size, __VA_ARGS__);                           \
        return code;                                                           \
    } while (0)

typedef struct dlayer {
    uint64_t nblocks;
    uint32_t k, scheme;
    uint64_t capacity;
    double fpr;
    uint64_t inserts, cells_set, n;
    const uint8_t *numbers, *blocks;
} dlayer;

typedef struct parsed {
    bf_delta_info info;
    dlayer l[BF_MAX_LAYERS];
} parsed;

/* The envelope: magic, version, size, checksum, then the header's kind,
 * hash, marks and layer counts into p->info. */
static bf_err parse_header(const uint8_t *buf, size_t len, parsed *p,
                           char *errstr, size_t errstr_size)
{
    if (len < 8 || memcmp(buf, BF_DELTA_MAGIC, sizeof(BF_DELTA_MAGIC)) != 0) {
        if (len >= 8)
            FAIL(BF_ERR_FORMAT, "not a filter delta (bad magic)");
        FAIL(BF_ERR_FORMAT, "truncated: %zu bytes is too short for a filter "
             "delta", len);
    }
    if (len < D_HDR + D_TRAILER)
        FAIL(BF_ERR_FORMAT, "truncated: %zu bytes is too short for a filter "
             "delta header", len);
    uint16_t version = (uint16_t)bf_getn(buf + 8, 2);
    if (version != BF_DELTA_VERSION)
        FAIL(BF_ERR_VERSION, "delta format version %u is not supported (this "
             "build reads version %u)", version, BF_DELTA_VERSION);
    uint64_t size = bf_getn(buf + 24, 8);
    if (size != len)
        FAIL(BF_ERR_FORMAT, "truncated or extended: the delta says %llu "
             "bytes, got %zu", (unsigned long long)size, len);
    uint64_t want = bf_getn(buf + len - D_TRAILER, 8);
    uint64_t got = XXH3_64bits(buf, len - D_TRAILER);
    if (want != got)
        FAIL(BF_ERR_FORMAT, "checksum mismatch: stored %016llx, computed "
             "%016llx (the delta is damaged)", (unsigned long long)want,
             (unsigned long long)got);
    bf_delta_info *in = &p->info;
    uint16_t kind = (uint16_t)bf_getn(buf + 10, 2);
    if (kind != BF_KIND_BLOCKED && kind != BF_KIND_SCALABLE)
        FAIL(BF_ERR_FORMAT, "a delta of filter kind %u (only blocked and "
             "scalable filters have deltas)", kind);
    in->kind = (bf_kind)kind;
    if (bf_getn(buf + 12, 4) != BF_HASH_XXH3_128)
        FAIL(BF_ERR_FORMAT, "unknown hash function id %u",
             (unsigned)bf_getn(buf + 12, 4));
    in->seed = bf_getn(buf + 16, 8);
    in->base_mark = bf_getn(buf + 32, 8);
    in->new_mark = bf_getn(buf + 40, 8);
    in->layers = (uint32_t)bf_getn(buf + 48, 4);
    in->base_layers = (uint32_t)bf_getn(buf + 52, 4);
    in->blocks = bf_getn(buf + 56, 8);
    if (in->layers == 0 || in->layers > BF_MAX_LAYERS ||
        (kind == BF_KIND_BLOCKED && in->layers != 1) ||
        in->base_layers == 0 || in->base_layers > in->layers)
        FAIL(BF_ERR_FORMAT, "bad layer counts: %u after, %u before, for a %s "
             "filter", in->layers, in->base_layers, bf_kind_name(in->kind));
    if (D_HDR + (uint64_t)D_DESC * in->layers + D_TRAILER > len)
        FAIL(BF_ERR_FORMAT, "truncated: %u layer descriptors do not fit in "
             "%zu bytes", in->layers, len);
    return BF_OK;
}

/* Layer i's descriptor, and its changed blocks at *off (numbers, then
 * blocks), which *off then passes. */
static bf_err parse_layer(const uint8_t *buf, size_t len, uint32_t i,
                          dlayer *l, uint64_t *off, char *errstr,
                          size_t errstr_size)
{
    const uint8_t *d = buf + D_HDR + D_DESC * i;
    l->nblocks = bf_getn(d, 8);
    l->k = (uint32_t)bf_getn(d + 8, 2);
    l->scheme = (uint32_t)bf_getn(d + 10, 2);
    l->capacity = bf_getn(d + 16, 8);
    l->fpr = bf_getf64(d + 24);
    l->inserts = bf_getn(d + 32, 8);
    l->cells_set = bf_getn(d + 40, 8);
    l->n = bf_getn(d + 48, 8);
    if (l->nblocks == 0 || l->nblocks > BF_MAX_BLOCKS)
        FAIL(BF_ERR_FORMAT, "layer %u: block count %llu out of range", i,
             (unsigned long long)l->nblocks);
    if (l->k == 0 || l->k > BF_MAX_K)
        FAIL(BF_ERR_FORMAT, "layer %u: k %u out of range 1..%u", i, l->k,
             BF_MAX_K);
    if (!bf_scheme_ok(l->scheme, BF_BLOCK_BITS, l->k))
        FAIL(BF_ERR_FORMAT, "layer %u: no probe scheme %u with k %u", i,
             l->scheme, l->k);
    if (!(l->fpr >= 0 && l->fpr <= BF_FPR_MAX))
        FAIL(BF_ERR_FORMAT, "layer %u: fpr %g out of range", i, l->fpr);
    if (l->cells_set > l->nblocks * BF_BLOCK_BITS)
        FAIL(BF_ERR_FORMAT, "layer %u: %llu bits set of %llu", i,
             (unsigned long long)l->cells_set,
             (unsigned long long)(l->nblocks * BF_BLOCK_BITS));
    if (l->n > l->nblocks)
        FAIL(BF_ERR_FORMAT, "layer %u: %llu changed blocks of %llu", i,
             (unsigned long long)l->n, (unsigned long long)l->nblocks);
    /* n <= 2^40: n * 72 and the running offset stay far below 2^64 */
    if (l->n * (8 + BF_BLOCK_BYTES) > len - D_TRAILER - *off)
        FAIL(BF_ERR_FORMAT, "truncated: layer %u's %llu changed blocks "
             "run past the end of the %zu-byte delta", i,
             (unsigned long long)l->n, len);
    l->numbers = buf + *off;
    l->blocks = buf + *off + l->n * 8;
    *off += l->n * (8 + BF_BLOCK_BYTES);
    uint64_t prev = 0;
    for (uint64_t j = 0; j < l->n; j++) {
        uint64_t b = bf_getn(l->numbers + j * 8, 8);
        if (b >= l->nblocks || (j > 0 && b <= prev))
            FAIL(BF_ERR_FORMAT, "layer %u: block number %llu (entry %llu)"
                 " is %s", i, (unsigned long long)b, (unsigned long long)j,
                 b >= l->nblocks ? "outside the layer"
                                 : "not after the one before it");
        prev = b;
    }
    return BF_OK;
}

/* Everything that can be checked without the filter. */
static bf_err parse(const uint8_t *buf, size_t len, parsed *p, char *errstr,
                    size_t errstr_size)
{
    memset(p, 0, sizeof(*p));
    bf_err err = parse_header(buf, len, p, errstr, errstr_size);
    if (err)
        return err;
    const bf_delta_info *in = &p->info;
    uint64_t off = D_HDR + (uint64_t)D_DESC * in->layers;
    uint64_t total = 0;
    for (uint32_t i = 0; i < in->layers; i++) {
        if ((err = parse_layer(buf, len, i, &p->l[i], &off, errstr,
                               errstr_size)))
            return err;
        total += p->l[i].n;
    }
    if (off != len - D_TRAILER)
        FAIL(BF_ERR_FORMAT, "sizes do not add up: the blocks end at %llu, "
             "the checksum is at %zu", (unsigned long long)off,
             len - D_TRAILER);
    if (total != in->blocks)
        FAIL(BF_ERR_FORMAT, "the header says %llu changed blocks, the layers "
             "hold %llu", (unsigned long long)in->blocks,
             (unsigned long long)total);
    return BF_OK;
}

bf_err bf_delta_check(const void *buf, size_t len, bf_delta_info *out,
                      char *errstr, size_t errstr_size)
{
    parsed *p = malloc(sizeof(*p));
    if (!p)
        FAIL(BF_ERR_NOMEM, "out of memory");
    bf_err err = parse(buf, len, p, errstr, errstr_size);
    if (!err && out)
        *out = p->info;
    free(p);
    return err;
}

/* The blocks a delta changes are scattered over a filter far larger than
 * the caches: the pass over them fetches the next ones ahead, as the
 * batched adds do (blocked.c), so that their misses overlap instead of
 * being waited on one after another. */
enum { AHEAD = 16 };

static inline void prefetch_block(const bf_blocked *bf, const dlayer *l,
                                  uint64_t j)
{
    uint64_t b = bf_getn(l->numbers + j * 8, 8);
    __builtin_prefetch(bf->words + b * BF_BLOCK_WORDS, 1);
}

/* Block number j of layer l, for a pass over j = 0, 1, ...: the first
 * AHEAD are fetched at j = 0, then each step fetches the one AHEAD on. */
static inline uint64_t block_at(const bf_blocked *bf, const dlayer *l,
                                uint64_t j)
{
    for (uint64_t a = 0; j == 0 && a < l->n && a < AHEAD; a++)
        prefetch_block(bf, l, a);
    if (j + AHEAD < l->n)
        prefetch_block(bf, l, j + AHEAD);
    return bf_getn(l->numbers + j * 8, 8);
}

/* The checks that need the filter, and the bit counts the delta gives. */
POPCNT_CLONES static bf_err check_against(const bf_filter *f,
                                         const parsed *p,
                            uint64_t *bits_after, char *errstr,
                            size_t errstr_size)
{
    const bf_delta_info *in = &p->info;
    if (!f->tracking)
        FAIL(BF_ERR_INVALID, "the filter has no mark (changes not tracked): "
             "a delta cannot name its state");
    if (in->kind != f->kind)
        FAIL(BF_ERR_INCOMPATIBLE, "a delta of a %s filter, offered to a %s "
             "one", bf_kind_name(in->kind), bf_kind_name(f->kind));
    if (in->seed != bf_filter_seed(f))
        FAIL(BF_ERR_INCOMPATIBLE, "a delta of a filter with seed %#llx, "
             "offered to one with seed %#llx", (unsigned long long)in->seed,
             (unsigned long long)bf_filter_seed(f));
    if (in->base_mark != f->mark)
        FAIL(BF_ERR_INCOMPATIBLE, "base mismatch: the delta applies to state "
             "%016llx, the filter is at state %016llx",
             (unsigned long long)in->base_mark, (unsigned long long)f->mark);
    if (bf_filter_delta_blocks(f) != 0)
        FAIL(BF_ERR_INCOMPATIBLE, "base mismatch: the filter has changed "
             "since state %016llx, and a delta applies to that state only",
             (unsigned long long)f->mark);
    uint32_t have = nlayers(f);
    if (in->base_layers != have)
        FAIL(BF_ERR_INCOMPATIBLE, "base mismatch: the delta's base has %u "
             "layers, the filter %u", in->base_layers, have);
    for (uint32_t i = 0; i < in->layers; i++) {
        const dlayer *l = &p->l[i];
        if (i >= have) { /* a new layer: starts empty */
            uint64_t nb, cap;
            uint32_t k;
            double fpr;
            if (bf_scalable_layer_geometry(f->u.s, i, &nb, &k, &cap, &fpr) !=
                    BF_OK ||
                l->nblocks != nb || l->k != k || l->capacity != cap ||
                l->fpr != fpr || l->scheme != bf_scheme_for(BF_BLOCK_BITS, k))
                FAIL(BF_ERR_INCOMPATIBLE, "base mismatch: new layer %u is "
                     "%llu blocks k=%u for %llu keys at %g in the delta; "
                     "this filter grows it as %llu blocks k=%u for %llu keys "
                     "at %g", i, (unsigned long long)l->nblocks, l->k,
                     (unsigned long long)l->capacity, l->fpr,
                     (unsigned long long)nb, k, (unsigned long long)cap, fpr);
            uint64_t set = 0;
            for (uint64_t j = 0; j < l->n; j++)
                for (unsigned w = 0; w < BF_BLOCK_WORDS; w++)
                    set += (uint64_t)__builtin_popcountll(
                        bf_getn(l->blocks + j * 64 + w * 8, 8));
            if (set != l->cells_set)
                FAIL(BF_ERR_FORMAT, "new layer %u: its blocks hold %llu bits, "
                     "its descriptor says %llu", i, (unsigned long long)set,
                     (unsigned long long)l->cells_set);
            bits_after[i] = set;
            continue;
        }
        const bf_blocked *bf = layer(f, i);
        if (l->nblocks != bf->nblocks || l->k != bf->k ||
            l->scheme != bf->scheme)
            FAIL(BF_ERR_INCOMPATIBLE, "base mismatch: layer %u is %llu blocks"
                 " k=%u scheme %u in the delta, %llu blocks k=%u scheme %u in"
                 " the filter", i, (unsigned long long)l->nblocks, l->k,
                 l->scheme, (unsigned long long)bf->nblocks, bf->k,
                 bf->scheme);
    }
    return BF_OK;
}

/* Applies layer i's changed blocks to an old layer in one pass, each block
 * checked (it may only gain bits) just before it is written, its old
 * contents saved to undo[*u] first; *set gets the layer's bits after.  A
 * block that would lose bits stops it (blocks written so far are in undo:
 * the caller puts them back). */
POPCNT_CLONES static bf_err apply_old_layer(bf_blocked *bf, const dlayer *l,
                                           uint32_t i, uint8_t *undo,
                                           size_t *u, uint64_t *set,
                                           char *errstr, size_t errstr_size)
{
    uint64_t bits = bf_blocked_bits(bf);
    for (uint64_t j = 0; j < l->n; j++) {
        uint64_t b = block_at(bf, l, j);
        uint64_t *old = bf->words + b * BF_BLOCK_WORDS, nw[BF_BLOCK_WORDS];
        for (unsigned w = 0; w < BF_BLOCK_WORDS; w++) {
            nw[w] = bf_getn(l->blocks + j * 64 + w * 8, 8);
            if (old[w] & ~nw[w])
                FAIL(BF_ERR_INCOMPATIBLE, "base mismatch: block %llu of "
                     "layer %u would lose bits the filter has (a delta "
                     "only adds)", (unsigned long long)b, i);
            bits += (uint64_t)__builtin_popcountll(nw[w]) -
                    (uint64_t)__builtin_popcountll(old[w]);
        }
        memcpy(undo + (*u)++ * BF_BLOCK_BYTES, old, BF_BLOCK_BYTES);
        memcpy(old, nw, BF_BLOCK_BYTES);
    }
    *set = bits;
    return BF_OK;
}

/* Puts back the first u blocks apply_old_layer wrote, layer by layer. */
static void undo_old_layers(bf_filter *f, const parsed *p, uint32_t have,
                            const uint8_t *undo, size_t u)
{
    size_t k = 0;
    for (uint32_t i = 0; i < have && k < u; i++) {
        const dlayer *l = &p->l[i];
        bf_blocked *bf = layer(f, i);
        for (uint64_t j = 0; j < l->n && k < u; j++, k++)
            memcpy(bf->words + bf_getn(l->numbers + j * 8, 8) *
                                   BF_BLOCK_WORDS,
                   undo + k * BF_BLOCK_BYTES, BF_BLOCK_BYTES);
    }
}

/* The layers a delta adds (fresh[have..want), tracked) made and the
 * filter's layer array grown for them; the filter itself unchanged. */
static bf_err grow_for(bf_filter *f, const parsed *p, uint32_t have,
                       uint32_t want, bf_blocked **fresh, char *errstr,
                       size_t errstr_size)
{
    for (uint32_t i = have; i < want; i++) {
        const dlayer *l = &p->l[i];
        fresh[i] = bf_blocked_new_geometry(l->nblocks, l->k,
                                           bf_filter_seed(f), errstr,
                                           errstr_size);
        if (!fresh[i] || !bf_blocked_track(fresh[i]))
            FAIL(BF_ERR_NOMEM, "out of memory for new layer %u (%llu "
                 "blocks)", i, (unsigned long long)l->nblocks);
    }
    if (want > have) {
        bf_blocked **nl = realloc(f->u.s->layers, want * sizeof(*nl));
        if (!nl)
            FAIL(BF_ERR_NOMEM, "out of memory");
        f->u.s->layers = nl; /* the first `have` still the only ones */
    }
    return BF_OK;
}

/* After the old layers took their blocks: the new layers' blocks copied
 * in and the layers added (fresh[] handed over), every layer's counts as
 * the delta says, and the filter's mark moved to the delta's. */
static void install(bf_filter *f, const parsed *p, uint32_t have,
                    uint32_t want, bf_blocked **fresh, const uint64_t *bits)
{
    for (uint32_t i = have; i < want; i++) {
        const dlayer *l = &p->l[i];
        for (uint64_t j = 0; j < l->n; j++)
            memcpy(fresh[i]->words + bf_getn(l->numbers + j * 8, 8) *
                                         BF_BLOCK_WORDS,
                   l->blocks + j * 64, BF_BLOCK_BYTES);
        f->u.s->layers[i] = fresh[i];
        f->u.s->bytes += fresh[i]->nblocks * BF_BLOCK_BYTES;
        fresh[i] = NULL;
    }
    if (want > have) {
        f->u.s->nlayers = want;
        f->u.s->next_bytes = 0;
    }
    for (uint32_t i = 0; i < want; i++) {
        const dlayer *l = &p->l[i];
        bf_blocked *bf = layer(f, i);
        bf->capacity = l->capacity;
        bf->fpr = l->fpr;
        bf->inserts = l->inserts;
        bf->bits_set = bits[i];
        bf->uncounted = 0;
    }
    f->mark = p->info.new_mark;
    f->mark_layers = want;
}

bf_err bf_filter_delta_apply(bf_filter *f, const void *buf, size_t len,
                             char *errstr, size_t errstr_size)
{
    if (f->readonly)
        FAIL(BF_ERR_READONLY, "the filter is read-only (used in place)");
    parsed *p = malloc(sizeof(*p));
    uint64_t *bits = calloc(BF_MAX_LAYERS, sizeof(*bits));
    bf_blocked *fresh[BF_MAX_LAYERS] = {NULL};
    uint8_t *undo = NULL;
    size_t u = 0;
    bf_err err = BF_ERR_NOMEM;
    if (!p || !bits) {
        bf_seterr(errstr, errstr_size, "out of memory");
        goto out;
    }
    if ((err = parse(buf, len, p, errstr, errstr_size)) ||
        (err = check_against(f, p, bits, errstr, errstr_size)))
        goto out;
    uint32_t have = nlayers(f), want = p->info.layers;
    /* New layers are made, the layer array grown and the undo space taken
     * before anything of the filter changes: a failure here leaves it as
     * it was. */
    if ((err = grow_for(f, p, have, want, fresh, errstr, errstr_size)))
        goto out;
    err = BF_ERR_NOMEM;
    uint64_t old_blocks = 0;
    for (uint32_t i = 0; i < have; i++)
        old_blocks += p->l[i].n;
    if (old_blocks && !(undo = malloc((size_t)old_blocks * BF_BLOCK_BYTES))) {
        bf_seterr(errstr, errstr_size, "out of memory for %llu blocks of "
                  "undo space", (unsigned long long)old_blocks);
        goto out;
    }
    /* The old layers in one pass over their scattered blocks (each checked
     * as it is written, the old contents kept): a pass to check and one to
     * copy would make every random access twice. */
    for (uint32_t i = 0; i < have; i++) {
        const dlayer *l = &p->l[i];
        err = apply_old_layer(layer(f, i), l, i, undo, &u, &bits[i], errstr,
                              errstr_size);
        if (!err && bits[i] != l->cells_set) {
            bf_seterr(errstr, errstr_size, "base mismatch: layer %u would "
                      "hold %llu bits, the delta says %llu", i,
                      (unsigned long long)bits[i],
                      (unsigned long long)l->cells_set);
            err = BF_ERR_INCOMPATIBLE;
        }
        if (err) {
            undo_old_layers(f, p, have, undo, u);
            goto out;
        }
    }
    install(f, p, have, want, fresh, bits);
    err = BF_OK;
out:
    for (uint32_t i = 0; i < BF_MAX_LAYERS; i++)
        bf_blocked_destroy(fresh[i]);
    free(undo);
    free(bits);
    free(p);
    return err;
}
