/*
 * format.c -- the serialized filter format (described in bloomfilters.h):
 * the envelope every kind shares, the layered form of blocked, counting and
 * scalable filters (writing it, loading it defensively), mapping a filter
 * file, and atomic file writes.  A windowed filter's file is a ring of
 * scalable filters in the layered form (windowed.c), and the bf_filter
 * handle (filter.c) chooses between the two by kind: this file knows
 * neither.
 *
 * Loading trusts nothing: every length, count and offset is checked against
 * the bytes actually given before anything is allocated, so a damaged or
 * hostile file costs at most its own size in memory, and each rejection
 * names what is wrong.  Cell arrays are 64-byte aligned in the file so a
 * blocklist can be mmap'd and used in place.
 */
#include "bf_endian.h"
#include "bf_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the filter format stores cell words little-endian; port format.c"
#endif

static const char MAGIC[BF_FORMAT_MAGIC_LEN] = BF_FORMAT_MAGIC;
#define HDR_SIZE 64u
#define DESC_SIZE 64u
#define TRAILER_SIZE 8u

/* -- a uniform view of a filter's layers ---------------------------------- */

typedef struct layer_view {
    uint64_t nblocks;
    uint32_t k, scheme, block_cells;
    uint64_t capacity;
    double fpr;
    uint64_t inserts, cells_set;
    const void *cells; /* nblocks * 64 bytes */
} layer_view;

static void view_blocked(const bf_blocked *bf, layer_view *v)
{
    v->nblocks = bf->nblocks;
    v->k = bf->k;
    v->scheme = bf->scheme;
    v->block_cells = BF_BLOCK_BITS;
    v->capacity = bf->capacity;
    v->fpr = bf->fpr;
    v->inserts = bf_blocked_inserts(bf);
    v->cells_set = bf_blocked_bits(bf);
    v->cells = bf->words;
}

static uint32_t filter_layers(const bf_layered *f)
{
    return f->kind == BF_KIND_SCALABLE ? f->u.s->nlayers : 1;
}

static void filter_layer(const bf_layered *f, uint32_t i, layer_view *v)
{
    memset(v, 0, sizeof(*v));
    switch (f->kind) {
    case BF_KIND_BLOCKED:
        view_blocked(f->u.b, v);
        return;
    case BF_KIND_SCALABLE:
        view_blocked(f->u.s->layers[i], v);
        return;
    case BF_KIND_COUNTING: {
        const bf_counting *cf = f->u.c;
        v->nblocks = cf->nblocks;
        v->k = cf->k;
        v->scheme = BF_SCHEME_DISTINCT;
        v->block_cells = BF_COUNTING_BLOCK_CELLS;
        v->capacity = cf->capacity;
        v->fpr = cf->fpr;
        v->inserts = cf->inserts;
        v->cells_set = cf->cells_set;
        v->cells = cf->cells;
        return;
    }
    case BF_KIND_WINDOWED: /* not layered: never a bf_layered's kind */
        return;
    }
}

uint64_t bf_layered_seed(const bf_layered *f)
{
    switch (f->kind) {
    case BF_KIND_BLOCKED:
        return f->u.b->seed;
    case BF_KIND_SCALABLE:
        return f->u.s->params.seed;
    case BF_KIND_COUNTING:
        return f->u.c->seed;
    case BF_KIND_WINDOWED:
        break;
    }
    return 0;
}

void bf_layered_destroy(const bf_layered *f)
{
    switch (f->kind) {
    case BF_KIND_BLOCKED:
        bf_blocked_destroy(f->u.b);
        break;
    case BF_KIND_SCALABLE:
        bf_scalable_destroy(f->u.s);
        break;
    case BF_KIND_COUNTING:
        bf_counting_destroy(f->u.c);
        break;
    case BF_KIND_WINDOWED:
        break;
    }
}

uint64_t bf_layered_serialized_size(const bf_layered *f)
{
    uint32_t n = filter_layers(f);
    uint64_t size = HDR_SIZE + (uint64_t)DESC_SIZE * n + TRAILER_SIZE;
    for (uint32_t i = 0; i < n; i++) {
        layer_view v;
        filter_layer(f, i, &v);
        size += v.nblocks * BF_BLOCK_BYTES;
    }
    return size;
}

/* -- writing --------------------------------------------------------------- */

typedef struct hashing_writer {
    bf_write_fn write;
    void *opaque;
    XXH3_state_t *state;
} hashing_writer;

static int hw_write(hashing_writer *w, const void *buf, size_t len)
{
    if (XXH3_64bits_update(w->state, buf, len) != XXH_OK)
        return -1;
    return w->write(w->opaque, buf, len);
}

int bf_membuf_write(void *opaque, const void *data, size_t len)
{
    bf_membuf *m = opaque;
    if (len > m->cap - m->len) {
        size_t cap = m->cap ? m->cap : 4096;
        while (len > cap - m->len) {
            if (cap > SIZE_MAX / 2)
                return -1;
            cap *= 2;
        }
        uint8_t *nb = realloc(m->buf, cap);
        if (!nb)
            return -1;
        m->buf = nb;
        m->cap = cap;
    }
    memcpy(m->buf + m->len, data, len);
    m->len += len;
    return 0;
}

void bf_format_put_envelope(uint8_t *hdr, uint16_t kind, uint64_t seed,
                            uint64_t size)
{
    memcpy(hdr, MAGIC, BF_FORMAT_MAGIC_LEN);
    bf_put16(hdr + 8, BF_FORMAT_VERSION);
    bf_put16(hdr + 10, kind);
    bf_put32(hdr + 12, BF_HASH_XXH3_128);
    bf_put64(hdr + 16, seed);
    bf_put64(hdr + 24, size);
}

bf_err bf_layered_serialize(const bf_layered *f, bf_write_fn write,
                            void *opaque)
{
    uint32_t n = filter_layers(f);
    uint32_t hsize = HDR_SIZE + DESC_SIZE * n;
    uint8_t *hdr = calloc(1, hsize);
    XXH3_state_t *state = XXH3_createState();
    bf_err err = BF_ERR_NOMEM;
    if (!hdr || !state || XXH3_64bits_reset(state) != XXH_OK)
        goto out;

    bf_format_put_envelope(hdr, (uint16_t)f->kind, bf_layered_seed(f),
                           bf_layered_serialized_size(f));
    bf_put32(hdr + 32, n);
    bf_put32(hdr + 36, hsize);
    if (f->kind == BF_KIND_SCALABLE) {
        bf_putf64(hdr + 40, f->u.s->params.fpr);
        bf_putf64(hdr + 48, f->u.s->params.growth);
        bf_putf64(hdr + 56, f->u.s->params.tightening);
    }
    uint64_t offset = hsize;
    for (uint32_t i = 0; i < n; i++) {
        layer_view v;
        filter_layer(f, i, &v);
        uint8_t *d = hdr + HDR_SIZE + DESC_SIZE * i;
        bf_put64(d, v.nblocks);
        bf_put16(d + 8, (uint16_t)v.k);
        bf_put16(d + 10, (uint16_t)v.scheme);
        bf_put32(d + 12, v.block_cells);
        bf_put64(d + 16, v.capacity);
        bf_putf64(d + 24, v.fpr);
        bf_put64(d + 32, v.inserts);
        bf_put64(d + 40, v.cells_set);
        bf_put64(d + 48, offset);
        bf_put64(d + 56, v.nblocks * BF_BLOCK_BYTES);
        offset += v.nblocks * BF_BLOCK_BYTES;
    }

    hashing_writer w = {write, opaque, state};
    err = BF_ERR_IO;
    if (hw_write(&w, hdr, hsize))
        goto out;
    for (uint32_t i = 0; i < n; i++) {
        layer_view v;
        filter_layer(f, i, &v);
        /* In slices: a write callback may take size_t, a layer is u64. */
        const uint8_t *p = v.cells;
        uint64_t left = v.nblocks * BF_BLOCK_BYTES;
        while (left) {
            size_t chunk = left > (1u << 30) ? (1u << 30) : (size_t)left;
            if (hw_write(&w, p, chunk))
                goto out;
            p += chunk;
            left -= chunk;
        }
    }
    uint8_t trailer[8];
    bf_put64(trailer, XXH3_64bits_digest(state));
    if (write(opaque, trailer, sizeof(trailer)))
        goto out;
    err = BF_OK;
out:
    XXH3_freeState(state);
    free(hdr);
    return err;
}

/* -- loading --------------------------------------------------------------- */

typedef struct parsed {
    bf_kind kind;
    uint64_t seed;
    uint32_t nlayers;
    bf_scalable_params sp;
    layer_view layers[BF_MAX_LAYERS];
} parsed;

#define FAIL(code, ...)                                                        \
    do {                                                                       \
        bf_seterr(errstr, errstr_size, __VA_ARGS__);                           \
        return code;                                                           \
    } while (0)

bf_err bf_format_check_file(const uint8_t *buf, size_t len, unsigned flags,
                            uint16_t *kind_out, char *errstr,
                            size_t errstr_size)
{
    if (len < 16 || memcmp(buf, MAGIC, BF_FORMAT_MAGIC_LEN) != 0) {
        if (len >= 8 && memcmp(buf, MAGIC, 8) != 0)
            FAIL(BF_ERR_FORMAT, "not a bloomstage filter (bad magic)");
        FAIL(BF_ERR_FORMAT, "truncated: %zu bytes is too short for a filter "
             "header", len);
    }
    uint16_t version = (uint16_t)bf_getn(buf + 8, 2);
    if (version != 1 && version != BF_FORMAT_VERSION)
        FAIL(BF_ERR_VERSION, "format version %u is not supported (this "
             "build reads versions 1 to %u)", version, BF_FORMAT_VERSION);
    if (len < HDR_SIZE + TRAILER_SIZE)
        FAIL(BF_ERR_FORMAT, "truncated: %zu bytes is too short for a filter "
             "header", len);
    uint64_t file_size = bf_getn(buf + 24, 8);
    if (file_size != len)
        FAIL(BF_ERR_FORMAT, "truncated or extended: header says %llu bytes, "
             "got %zu", (unsigned long long)file_size, len);
    if (!(flags & BF_LOAD_NOVERIFY)) {
        uint64_t want = bf_getn(buf + len - TRAILER_SIZE, 8);
        uint64_t got = XXH3_64bits(buf, len - TRAILER_SIZE);
        if (want != got)
            FAIL(BF_ERR_FORMAT, "checksum mismatch: stored %016llx, computed "
                 "%016llx (the file is damaged)", (unsigned long long)want,
                 (unsigned long long)got);
    }
    uint32_t hash_id = (uint32_t)bf_getn(buf + 12, 4);
    if (hash_id != BF_HASH_XXH3_128)
        FAIL(BF_ERR_FORMAT, "unknown hash function id %u", hash_id);
    *kind_out = (uint16_t)bf_getn(buf + 10, 2);
    return BF_OK;
}

/* A file's kind field names a filter: an audit sample's is refused by
 * name. */
static bf_err check_filter_kind(uint16_t kind, char *errstr,
                                size_t errstr_size)
{
    if (kind == BF_FORMAT_KIND_AUDIT)
        FAIL(BF_ERR_FORMAT, "an audit sample (bf_audit), not a filter");
    if (kind != BF_KIND_BLOCKED && kind != BF_KIND_SCALABLE &&
        kind != BF_KIND_COUNTING && kind != BF_KIND_WINDOWED)
        FAIL(BF_ERR_FORMAT, "unknown filter kind %u", kind);
    return BF_OK;
}

bf_err bf_format_check_envelope(const uint8_t *buf, size_t len,
                                unsigned flags, bf_kind *kind_out,
                                char *errstr, size_t errstr_size)
{
    uint16_t kind = 0;
    bf_err err = bf_format_check_file(buf, len, flags, &kind, errstr,
                                      errstr_size);
    if (err == BF_OK)
        err = check_filter_kind(kind, errstr, errstr_size);
    if (err == BF_OK)
        *kind_out = (bf_kind)kind;
    return err;
}

static bf_err parse(const uint8_t *buf, size_t len, unsigned flags, parsed *p,
                    char *errstr, size_t errstr_size)
{
    bf_kind kind;
    bf_err err = bf_format_check_envelope(buf, len, flags, &kind, errstr,
                                          errstr_size);
    if (err)
        return err;
    p->kind = kind;
    uint16_t version = (uint16_t)bf_getn(buf + 8, 2); /* checked: 1 or 2 */
    p->seed = bf_getn(buf + 16, 8);
    p->nlayers = (uint32_t)bf_getn(buf + 32, 4);
    uint32_t hsize = (uint32_t)bf_getn(buf + 36, 4);
    if (kind == BF_KIND_WINDOWED)
        FAIL(BF_ERR_FORMAT, "a windowed filter where a blocked, scalable or "
             "counting one was expected");
    if (p->nlayers == 0 || p->nlayers > BF_MAX_LAYERS ||
        (kind != BF_KIND_SCALABLE && p->nlayers != 1))
        FAIL(BF_ERR_FORMAT, "bad layer count %u for a %s filter", p->nlayers,
             bf_kind_name(kind));
    if (hsize != HDR_SIZE + DESC_SIZE * p->nlayers)
        FAIL(BF_ERR_FORMAT, "header size %u does not match %u layers", hsize,
             p->nlayers);
    if ((uint64_t)hsize + TRAILER_SIZE > len)
        FAIL(BF_ERR_FORMAT, "truncated: %u layer descriptors do not fit in "
             "%zu bytes", p->nlayers, len);
    if (kind == BF_KIND_SCALABLE) {
        p->sp.fpr = bf_getf64(buf + 40);
        p->sp.growth = bf_getf64(buf + 48);
        p->sp.tightening = bf_getf64(buf + 56);
        if (!(p->sp.fpr > 0 && p->sp.fpr <= BF_FPR_MAX) ||
            !(p->sp.growth >= 1 && p->sp.growth <= 1024) ||
            !(p->sp.tightening > 0 && p->sp.tightening < 1))
            FAIL(BF_ERR_FORMAT, "bad scalable parameters: fpr %g, growth %g, "
                 "tightening %g", p->sp.fpr, p->sp.growth, p->sp.tightening);
        p->sp.seed = p->seed;
        p->sp.max_bytes = 0;
    }
    uint32_t want_cells =
        kind == BF_KIND_COUNTING ? BF_COUNTING_BLOCK_CELLS : BF_BLOCK_BITS;
    uint64_t expect_offset = hsize;
    for (uint32_t i = 0; i < p->nlayers; i++) {
        const uint8_t *d = buf + HDR_SIZE + DESC_SIZE * i;
        layer_view *v = &p->layers[i];
        v->nblocks = bf_getn(d, 8);
        if (version == 1) { /* u32 k: the high half must be 0 (k <= 64) */
            v->k = (uint32_t)bf_getn(d + 8, 4);
            v->scheme = BF_SCHEME_DISTINCT;
        } else {
            v->k = (uint32_t)bf_getn(d + 8, 2);
            v->scheme = (uint32_t)bf_getn(d + 10, 2);
        }
        v->block_cells = (uint32_t)bf_getn(d + 12, 4);
        v->capacity = bf_getn(d + 16, 8);
        v->fpr = bf_getf64(d + 24);
        v->inserts = bf_getn(d + 32, 8);
        v->cells_set = bf_getn(d + 40, 8);
        uint64_t off = bf_getn(d + 48, 8), size = bf_getn(d + 56, 8);
        if (v->nblocks == 0 || v->nblocks > BF_MAX_BLOCKS)
            FAIL(BF_ERR_FORMAT, "layer %u: block count %llu out of range", i,
                 (unsigned long long)v->nblocks);
        if (v->k == 0 || v->k > BF_MAX_K)
            FAIL(BF_ERR_FORMAT, "layer %u: k %u out of range 1..%u", i, v->k,
                 BF_MAX_K);
        if (!bf_scheme_ok(v->scheme, want_cells, v->k))
            FAIL(BF_ERR_FORMAT, "layer %u: no probe scheme %u with k %u for "
                 "a %s filter", i, v->scheme, v->k, bf_kind_name(kind));
        if (v->block_cells != want_cells)
            FAIL(BF_ERR_FORMAT, "layer %u: %u cells per block, expected %u",
                 i, v->block_cells, want_cells);
        if (size != v->nblocks * BF_BLOCK_BYTES)
            FAIL(BF_ERR_FORMAT, "layer %u: data size %llu does not match %llu "
                 "blocks", i, (unsigned long long)size,
                 (unsigned long long)v->nblocks);
        if (off != expect_offset || off % BF_BLOCK_BYTES)
            FAIL(BF_ERR_FORMAT, "layer %u: data offset %llu, expected %llu", i,
                 (unsigned long long)off, (unsigned long long)expect_offset);
        if (size > len - TRAILER_SIZE - off)
            FAIL(BF_ERR_FORMAT, "truncated: layer %u data (%llu bytes at "
                 "%llu) runs past the end of the %zu-byte file", i,
                 (unsigned long long)size, (unsigned long long)off, len);
        if (v->cells_set > v->nblocks * want_cells)
            FAIL(BF_ERR_FORMAT, "layer %u: %llu cells set of %llu", i,
                 (unsigned long long)v->cells_set,
                 (unsigned long long)(v->nblocks * want_cells));
        if (!(v->fpr >= 0 && v->fpr <= BF_FPR_MAX))
            FAIL(BF_ERR_FORMAT, "layer %u: fpr %g out of range", i, v->fpr);
        v->cells = buf + off;
        expect_offset = off + size;
    }
    if (expect_offset != len - TRAILER_SIZE)
        FAIL(BF_ERR_FORMAT, "sizes do not add up: layers end at %llu, "
             "checksum at %zu", (unsigned long long)expect_offset,
             len - TRAILER_SIZE);
    if (kind == BF_KIND_SCALABLE)
        p->sp.initial_capacity = p->layers[0].capacity;
    return BF_OK;
}

/* A layer's cells: the file's own (in place) or a fresh aligned copy. */
static void *layer_cells(const layer_view *v, bool inplace)
{
    if (inplace)
        return (void *)v->cells;
    void *c = bf_alloc_aligned(v->nblocks * BF_BLOCK_BYTES);
    if (c)
        memcpy(c, v->cells, v->nblocks * BF_BLOCK_BYTES);
    return c;
}

static bf_blocked *build_blocked(const layer_view *v, uint64_t seed,
                                 bool inplace)
{
    uint64_t *w = layer_cells(v, inplace);
    bf_blocked *bf = w ? bf_blocked_wrap(w, v->nblocks, v->k, v->scheme, !inplace,
                                       seed)
                       : NULL;
    if (!bf) {
        if (!inplace)
            free(w);
        return NULL;
    }
    bf->capacity = v->capacity;
    bf->fpr = v->fpr;
    bf->inserts = v->inserts;
    /* Counted, not taken from the file: statistics must not be forgeable
     * (the count was checked against the cells when the file was
     * checksummed, but NOVERIFY skips that). */
    bf->bits_set = bf_popcount_words(bf->words, v->nblocks * BF_BLOCK_WORDS);
    return bf;
}

bf_err bf_layered_load(const uint8_t *buf, size_t len, unsigned flags,
                       bf_layered *out, char *errstr, size_t errstr_size)
{
    bool inplace = flags & BF_LOAD_INPLACE;
    parsed *p = calloc(1, sizeof(*p));
    if (!p)
        FAIL(BF_ERR_NOMEM, "out of memory");
    bf_err err = parse(buf, len, flags, p, errstr, errstr_size);
    if (err) {
        free(p);
        return err;
    }
    out->kind = p->kind;
    bool built = false;
    switch (p->kind) {
    case BF_KIND_BLOCKED:
        out->u.b = build_blocked(&p->layers[0], p->seed, inplace);
        built = out->u.b != NULL;
        break;
    case BF_KIND_COUNTING: {
        const layer_view *v = &p->layers[0];
        uint8_t *c = layer_cells(v, inplace);
        bf_counting *cf =
            c ? bf_counting_wrap(c, v->nblocks, v->k, !inplace, p->seed)
              : NULL;
        if (cf) {
            cf->capacity = v->capacity;
            cf->fpr = v->fpr;
            cf->inserts = v->inserts;
        } else if (!inplace) {
            free(c);
        }
        out->u.c = cf;
        built = cf != NULL;
        break;
    }
    case BF_KIND_SCALABLE: {
        bf_blocked **layers = calloc(p->nlayers, sizeof(*layers));
        uint32_t n = 0;
        while (layers && n < p->nlayers &&
               (layers[n] = build_blocked(&p->layers[n], p->seed, inplace)))
            n++;
        bf_scalable *sb =
            n == p->nlayers ? bf_scalable_wrap(&p->sp, layers, n) : NULL;
        if (!sb && layers) {
            for (uint32_t i = 0; i < n; i++)
                bf_blocked_destroy(layers[i]);
            free(layers);
        }
        out->u.s = sb;
        built = sb != NULL;
        break;
    }
    case BF_KIND_WINDOWED: /* refused by parse() */
        break;
    }
    free(p);
    if (!built)
        FAIL(BF_ERR_NOMEM, "out of memory loading a %zu-byte filter", len);
    return BF_OK;
}

/* What a file that is not a regular one is, for messages. */
static const char *file_kind(mode_t m)
{
    return S_ISFIFO(m)   ? "a FIFO"
           : S_ISSOCK(m) ? "a socket"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISDIR(m)  ? "a directory"
                         : "not a plain file";
}

int bf_open_regular(const char *path, uint64_t *size, char *errstr,
                    size_t errstr_size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        int e = errno;
        bf_seterr(errstr, errstr_size, "%s: cannot open: %s", path,
                  strerror(e));
        errno = e;
        return -1;
    }
    struct stat st;
    int e = 0;
    if (fstat(fd, &st) != 0) {
        e = errno;
        bf_seterr(errstr, errstr_size, "%s: cannot stat: %s", path,
                  strerror(e));
    } else if (!S_ISREG(st.st_mode)) {
        e = EINVAL;
        bf_seterr(errstr, errstr_size, "%s: %s, not a regular file", path,
                  file_kind(st.st_mode));
    } else if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
        e = errno;
        bf_seterr(errstr, errstr_size, "%s: cannot open: %s", path,
                  strerror(e));
    }
    if (e) {
        close(fd);
        errno = e;
        return -1;
    }
    if (size)
        *size = (uint64_t)st.st_size;
    return fd;
}

bf_err bf_format_map_file(const char *path, void **map, size_t *len,
                          char *errstr, size_t errstr_size)
{
    uint64_t size;
    int fd = bf_open_regular(path, &size, errstr, errstr_size);
    if (fd < 0)
        return BF_ERR_IO;
    if (size < HDR_SIZE + TRAILER_SIZE) {
        close(fd);
        FAIL(BF_ERR_FORMAT, "%s: truncated: %llu bytes is too short for a "
             "filter", path, (unsigned long long)size);
    }
    *len = (size_t)size;
    *map = mmap(NULL, *len, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (*map == MAP_FAILED)
        FAIL(BF_ERR_IO, "%s: cannot map: %s", path, strerror(e));
    return BF_OK;
}

/* -- atomic file writes ---------------------------------------------------- */

typedef struct file_writer {
    int fd;
    int err; /* errno of the first failure */
    size_t used;
    uint8_t buf[1 << 16];
} file_writer;

static int fw_flush(file_writer *w)
{
    size_t off = 0;
    while (off < w->used) {
        ssize_t n = write(w->fd, w->buf + off, w->used - off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            w->err = errno;
            return -1;
        }
        off += (size_t)n;
    }
    w->used = 0;
    return 0;
}

static int fw_write(void *opaque, const void *data, size_t len)
{
    file_writer *w = opaque;
    const uint8_t *p = data;
    while (len) {
        if (w->used == sizeof(w->buf) && fw_flush(w))
            return -1;
        size_t n = sizeof(w->buf) - w->used;
        n = n < len ? n : len;
        memcpy(w->buf + w->used, p, n);
        w->used += n;
        p += n;
        len -= n;
    }
    return 0;
}

static int fsync_dir_of(const char *path)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, sizeof(dir), ".");
    else if (slash == path)
        snprintf(dir, sizeof(dir), "/");
    else
        snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

bf_err bf_fsync_dir(const char *path, char *errstr, size_t errstr_size)
{
    if (fsync_dir_of(path) != 0)
        FAIL(BF_ERR_IO, "%s: fsync of the directory failed: %s", path,
             strerror(errno));
    return BF_OK;
}

/* The temp file of an atomic write: PATH + TMP_INFIX + mkostemp's six
 * random characters. */
#define TMP_INFIX ".tmp."
#define TMP_RANDOM "XXXXXX"

bool bf_is_atomic_temp_name(const char *name, const char *target_suffix)
{
    size_t len = strlen(name), slen = strlen(target_suffix);
    size_t tail = sizeof(TMP_INFIX) - 1 + sizeof(TMP_RANDOM) - 1;
    if (len < slen + tail)
        return false;
    const char *t = name + len - tail;
    return memcmp(t, TMP_INFIX, sizeof(TMP_INFIX) - 1) == 0 &&
           memcmp(t - slen, target_suffix, slen) == 0;
}

bf_err bf_write_file_atomic(const char *path, bf_produce_fn produce,
                            void *opaque, char *errstr, size_t errstr_size)
{
    return bf_write_file_atomic_flags(path, 0, produce, opaque, errstr,
                                      errstr_size);
}

bf_err bf_write_file_atomic_flags(const char *path, unsigned flags,
                                  bf_produce_fn produce, void *opaque,
                                  char *errstr, size_t errstr_size)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof(tmp), "%s" TMP_INFIX TMP_RANDOM, path) >=
        (int)sizeof(tmp))
        FAIL(BF_ERR_INVALID, "%s: path too long", path);
    file_writer *w = malloc(sizeof(*w));
    if (!w)
        FAIL(BF_ERR_NOMEM, "%s: out of memory", path);
    w->used = 0;
    w->err = 0;
    w->fd = mkostemp(tmp, O_CLOEXEC);
    if (w->fd < 0) {
        int e = errno;
        free(w);
        FAIL(BF_ERR_IO, "%s: cannot create a temp file: %s", path,
             strerror(e));
    }
    const char *step = "write";
    /* mkostemp makes it 0600, whatever the umask, and the rename keeps
     * it (bloomfilters.h says why). */
    bf_err err = produce(opaque, fw_write, w);
    if (err == BF_OK && fw_flush(w) != 0)
        err = BF_ERR_IO;
    if (err == BF_OK && fsync(w->fd) != 0) {
        w->err = errno;
        step = "fsync";
        err = BF_ERR_IO;
    }
    if (close(w->fd) != 0 && err == BF_OK) {
        w->err = errno;
        step = "close";
        err = BF_ERR_IO;
    }
    if (err == BF_OK && rename(tmp, path) != 0) {
        w->err = errno;
        step = "rename";
        err = BF_ERR_IO;
    }
    if (err != BF_OK) {
        unlink(tmp);
        if (w->err)
            bf_seterr(errstr, errstr_size, "%s: %s failed: %s", path, step,
                      strerror(w->err));
        else
            bf_seterr(errstr, errstr_size, "%s: %s failed: %s", path, step,
                      bf_err_str(err));
        free(w);
        return err;
    }
    free(w);
    if (flags & BF_WRITE_NO_DIRSYNC)
        return BF_OK;
    return bf_fsync_dir(path, errstr, errstr_size);
}
