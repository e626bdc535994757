/*
 * bf_internal.h -- what the filter files share and the public header hides:
 * the structs, the probe sequence and the block choice.  Not installed.
 */
#ifndef BF_INTERNAL_H
#define BF_INTERNAL_H

#include "bloomfilters.h"

#include <stdarg.h>

/* A 512-bit block: the unit of one cache miss. */
#define BF_BLOCK_BYTES 64u
#define BF_BLOCK_WORDS 8u
/* Geometry bounds a filter may have (2^40 blocks = 64 TiB). */
#define BF_MAX_BLOCKS (UINT64_C(1) << 40)

/* The code a blocked filter's operations run (blocked.c): the scalar
 * forms (any scheme), or the SIMD forms (blocked_simd.c) of the 64-bit lane
 * scheme for any k, k = 8 and k = 16, and of the 32-bit lane scheme for
 * any k and k = 16.  Set once, from scheme and k, when the filter is made;
 * the SIMD tables are indexed by kernel - 1. */
enum { BF_KERNEL_SCALAR, BF_KERNEL_L64, BF_KERNEL_L64_K8, BF_KERNEL_L64_K16,
       BF_KERNEL_L32, BF_KERNEL_L32_K16, BF_NKERNELS };

/* A one-key operation's kernel (and the batches', below). */
typedef bool (*bf_contains_fn)(const bf_blocked *, bf_hash);
typedef bool (*bf_add_fn)(bf_blocked *, bf_hash);

struct bf_blocked {
    uint64_t *words;   /* nblocks * 8 words, 64-byte aligned */
    uint64_t nblocks;
    uint32_t k;
    uint32_t scheme;   /* BF_SCHEME_LANES32 or BF_SCHEME_LANES, or
                          BF_SCHEME_DISTINCT if loaded from a version-1
                          file */
    uint8_t kernel;    /* BF_KERNEL_*, from scheme and k, when AVX2 is used */
    /* The one-key operations' entries in blocked.c's tables of the kernels
     * the current instruction set runs (which bf_simd_use rewrites, so
     * they follow it): the lookup's is kernel's; the add's is kernel's,
     * or while changes are tracked the counted add's (which marks the
     * block), kept by bf_blocked_track.  Pointers, not indexes, so
     * that a public one-key function is a load and a jump. */
    const bf_contains_fn *contains_entry;
    const bf_add_fn *add_entry;
    bool owns_words;   /* false when used in place from a file */
    uint64_t seed;
    uint64_t capacity; /* keys it was sized for (0 if built by geometry) */
    double fpr;        /* target it was sized for (0 if by geometry) */
    uint64_t inserts;  /* adds that set at least one new bit, but for
                          those in uncounted: read through
                          bf_blocked_inserts */
    uint64_t bits_set; /* read through bf_blocked_bits */
    uint64_t uncounted; /* one-key adds (bf_blocked_add_h) that set new
                          bits not yet in bits_set: the next
                          bf_blocked_bits recounts the bits and moves
                          these into inserts.  One counter, so that such
                          an add stores nothing else */
    uint64_t *dirty;   /* change tracking (delta.c): one bit per block
                          changed since the mark, or NULL when changes are
                          not tracked; set through bf_blocked_track */
};

/* Adds that set at least one new bit, counted or not. */
static inline uint64_t bf_blocked_inserts(const bf_blocked *bf)
{
    return bf->inserts + bf->uncounted;
}

/* Starts change tracking: a fresh zeroed bitmap of one bit per block
 * (replacing any the filter had), which the filter owns and its adds
 * mark from then on.  False, and the filter as it was, if the bitmap
 * cannot be allocated. */
bool bf_blocked_track(bf_blocked *bf);
/* Ends change tracking: the bitmap freed. */
void bf_blocked_untrack(bf_blocked *bf);

struct bf_counting {
    uint8_t *cells; /* nblocks * 64 bytes: 128 nibbles per block */
    uint64_t nblocks;
    uint32_t k;
    bool owns_cells;
    uint64_t seed;
    uint64_t capacity;
    double fpr;
    uint64_t inserts;   /* adds minus successful removes */
    uint64_t cells_set; /* non-zero counters */
    uint64_t saturated; /* counters at 15 */
};

struct bf_scalable {
    bf_scalable_params params;
    bf_blocked **layers; /* oldest first */
    uint32_t nlayers;
    uint64_t bytes;      /* cell memory of all layers */
    uint64_t next_bytes; /* the next layer's size once computed, else 0:
                            a filter at max_bytes refuses in O(1) */
    bool track;          /* new layers get a dirty bitmap (delta.c) */
};

/* The words of a blocked filter's change bitmap: one bit a block. */
static inline uint64_t bf_dirty_words(const bf_blocked *bf)
{
    return (bf->nblocks + 63) / 64;
}

/* Marks block `i` of a tracked filter changed (delta.c). */
static inline void bf_blocked_touch(bf_blocked *bf, uint64_t i)
{
    if (bf->dirty)
        bf->dirty[i >> 6] |= UINT64_C(1) << (i & 63);
}

/* The block a hash falls in: multiply-shift of the low word, no modulo. */
static inline uint64_t bf_block_of(bf_hash h, uint64_t nblocks)
{
    return (uint64_t)(((unsigned __int128)h.lo * nblocks) >> 64);
}

/* Functions that popcount many words: the library is built for the
 * baseline x86-64, where __builtin_popcountll is a call into libgcc for
 * every word; they get a popcnt clone chosen at load. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define POPCNT_CLONES __attribute__((target_clones("popcnt", "default")))
#else
#define POPCNT_CLONES
#endif

/* The bits set in w[0..n). */
uint64_t bf_popcount_words(const uint64_t *w, uint64_t n);

/* The bits a blocked filter has set (bits_set), recounted first if a
 * one-key add left it stale: O(filter) then, once. */
uint64_t bf_blocked_bits(const bf_blocked *bf);

/* bf_blocked_add_h that also keeps bits_set exact: the new bits counted
 * and added in, which waits for the key's block.  For a caller that has
 * just looked the key up, so the block is in cache and the count costs
 * nothing (bf_scalable_add_if_absent_h: the stage's, dedup's path). */
bool bf_blocked_add_counted_h(bf_blocked *bf, bf_hash h);

/* The words of the block a hash falls in, among nblocks blocks at words
 * (the SIMD kernels pass a filter's fields, or locals of them in a
 * batch), or in a filter. */
static inline uint64_t *bf_block_at(uint64_t *words, uint64_t nblocks,
                                    bf_hash h)
{
    return words + bf_block_of(h, nblocks) * BF_BLOCK_WORDS;
}

static inline uint64_t *bf_block_words(const bf_blocked *bf, bf_hash h)
{
    return bf_block_at(bf->words, bf->nblocks, h);
}

/* A blocked filter's operations in one scheme, k and instruction set
 * (a kernel): blocked.c's scalar forms, blocked_simd.c's SIMD ones.  The
 * batches prefetch the blocks of the keys BF_AHEAD ahead, so several
 * cache misses are in flight: a lookup is short, and the distance must
 * span a miss's latency. */
typedef void (*bf_contains_many_fn)(const bf_blocked *, const bf_hash *,
                                    size_t, bool *);
typedef size_t (*bf_add_many_fn)(bf_blocked *, const bf_hash *, size_t,
                                 bool *);
typedef struct bf_kernels {
    bf_contains_fn contains;
    bf_add_fn add;         /* bf_blocked_add_h: bits_set left stale */
    bf_add_fn add_counted; /* bf_blocked_add_counted_h: bits_set kept */
    bf_contains_many_fn contains_many;
    bf_add_many_fn add_many; /* counts in registers: bits_set kept */
} bf_kernels;
enum { BF_AHEAD = 16 };

#if defined(__x86_64__) && defined(__GNUC__)
#define BF_HAVE_AVX2_CODE 1
/* blocked_simd.c: the lane schemes' kernels, one table an instruction
 * set indexed by BF_KERNEL_* - 1 (AVX-512 has its own forms of the k = 8
 * and 16 kernels and uses AVX2's for any other k), and the salt table they
 * load, filled by bf_simd_init (blocked.c calls it before choosing an
 * instruction set). */
extern const bf_kernels bf_kernels_avx2[BF_NKERNELS - 1];
extern const bf_kernels bf_kernels_avx512[BF_NKERNELS - 1];
void bf_simd_init(void);
#endif

/* In-block probes: consecutive 9-bit (or 7-bit) slices of the key's high
 * hash word, then of splitmix64 outputs seeded from it, so every probe gets
 * fresh hash bits; a slice naming a cell the key already probes is skipped,
 * so a key's k probes are k distinct cells.
 *
 * Distinct probes, rather than k independent draws, make a key set exactly
 * k bits: the same rate needs fewer bits, and the classic estimate
 * n = -(m/k) ln(1 - X/m) is exact in expectation for the blocked layout.
 * The probe sets are random, not double hashing's (h1 + i*h2) arithmetic
 * progressions, which inside a 512-bit block overlap one another far more
 * than random sets do: the exact formula in sizing.c assumes random sets.
 * This sequence is part of the file format: changing it makes filters
 * already written answer wrongly. */
typedef struct bf_probe {
    uint64_t seed, x;
    unsigned left;
    uint64_t used[BF_BLOCK_WORDS]; /* cells probed so far */
} bf_probe;

static inline uint64_t bf_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static inline bf_probe bf_probe_start(bf_hash h)
{
    bf_probe p = {h.hi, h.hi, 64, {0}};
    return p;
}

/* The next distinct cell of 2^bits (bits <= 9). */
static inline unsigned bf_probe_next(bf_probe *p, unsigned bits)
{
    for (;;) {
        if (p->left < bits) {
            p->seed += UINT64_C(0x9e3779b97f4a7c15);
            p->x = bf_mix64(p->seed);
            p->left = 64;
        }
        unsigned v = (unsigned)(p->x >> (64 - bits));
        p->x <<= bits;
        p->left -= bits;
        uint64_t m = UINT64_C(1) << (v & 63);
        if (!(p->used[v >> 6] & m)) {
            p->used[v >> 6] |= m;
            return v;
        }
    }
}

/* The lane scheme (BF_SCHEME_LANES): a 512-bit block is eight 64-bit
 * lanes; probe j of a key sets one bit in lane j mod 8, at
 *
 *   (x_r * SALT[r][j mod 8]) >> 26,   r = j / 8,
 *
 * the top 6 bits of a 32-bit multiply of the hash word x_r by an odd salt:
 * x_0 = low 32 bits of h.hi, x_1 = its high 32, x_2 and x_3 the low and
 * high halves of h.lo (which also picks the block, by its top bits; only
 * k > 16 reaches them), and rounds 4..7 reuse x_{r-4} with other salts.
 * Eight probes are eight independent multiply-shifts, no branches and no
 * duplicate check: one SIMD multiply, shift and variable shift each (the
 * split-block filter's idea, Parquet BloomFilter.md, with 64-bit lanes in
 * a 512-bit block and k = 8c instead of 256 bits and fixed k = 8).  New
 * filters use it for k = 8, 24, 40 ... (the sizing chooses k in {8, 16,
 * 24, ...}, and a multiple of 16 takes the 32-bit lanes below); any k from
 * 1 to 64 works, lanes below k mod 8 then taking one probe more.  The
 * salts are odd constants >= 2^30 from splitmix64 (seed "lanes"), fixed
 * for ever: they are part of the file format.  64-byte aligned: the SIMD
 * kernels load a row (AVX2) or two (AVX-512) as one vector. */
static const uint32_t BF_LANE_SALT[8][8] __attribute__((aligned(64))) = {
    {0xa5f4956fu, 0xf49fbdefu, 0xde24d799u, 0x985ecfe3u, 0xd3bda3d3u, 0x71456645u, 0xa834bf3fu, 0xb447a58fu},
    {0xfcd97d93u, 0x4daf00ddu, 0x806e8a77u, 0xeccb9ca1u, 0x7b9a599bu, 0x8562f469u, 0x45469ed7u, 0x821cb2efu},
    {0x9b086423u, 0x7e66662bu, 0x7ebabd6fu, 0xa70f9249u, 0x9e61a6b9u, 0x4cfe8adbu, 0x9912cf2bu, 0x4d28674du},
    {0xa9fe7fc3u, 0x72683a0bu, 0xdb3fda8fu, 0x6fa9d767u, 0xd845461fu, 0x58c90431u, 0xd48fe5b3u, 0x6101c5b1u},
    {0xc7d9dd87u, 0x4c95ef87u, 0x77b4ed7fu, 0x58f55665u, 0xe0a5526du, 0xb810ba2bu, 0x9239697fu, 0xa2b8d9cbu},
    {0xd13cc201u, 0xc032ceabu, 0x61c64d0bu, 0x486362fdu, 0xde1c2b75u, 0xc4b30707u, 0xe708efd3u, 0x880d1b97u},
    {0x806787d9u, 0x4670a68bu, 0x490fabc5u, 0xde58df4fu, 0xe82c5e4fu, 0xe4d9fc8fu, 0xe36c826du, 0x8650bbefu},
    {0xf9f1adf5u, 0xcb2cb0edu, 0xee814c29u, 0xd7007151u, 0x80362dadu, 0xdde8a5a9u, 0xaa9f1efbu, 0xe5237739u},
};

/* The key's lane-scheme pattern: pat |= one bit per probe. */
static inline void bf_lanes_pattern(bf_hash h, uint32_t k, uint64_t pat[8])
{
    const uint32_t x[4] = {(uint32_t)h.hi, (uint32_t)(h.hi >> 32),
                           (uint32_t)h.lo, (uint32_t)(h.lo >> 32)};
    for (unsigned l = 0; l < 8; l++)
        pat[l] = 0;
    for (uint32_t j = 0; j < k; j++) {
        uint32_t r = j >> 3, l = j & 7;
        pat[l] |= UINT64_C(1) << ((x[r & 3] * BF_LANE_SALT[r][l]) >> 26);
    }
}

/* The lanes a lane scheme splits the block into (8 of 64 bits, 16 of 32),
 * or 0 for a scheme without lanes: the sizing's rate and the estimates
 * both read the geometry here. */
static inline uint32_t bf_scheme_lanes(uint32_t scheme)
{
    return scheme == BF_SCHEME_LANES     ? 8
           : scheme == BF_SCHEME_LANES32 ? 16
                                         : 0;
}

/* The 32-bit lane scheme (BF_SCHEME_LANES32), for k a multiple of 16: the
 * block is sixteen 32-bit lanes, lane l bits 32 (l mod 2) .. + 31 of word
 * l / 2 (the little-endian order of the file); probe j = 16 r + l sets one
 * bit of lane l, at
 *
 *   (x * SALT[2r + l / 8][l mod 8]) >> 27,
 *
 * the top 5 bits of a multiply of a 32-bit hash word by an odd salt (the
 * salts of the 64-bit scheme, rounds 2r and 2r + 1 side by side), x the
 * low (even l) or high (odd l) half of h.hi in even rounds and of h.lo in
 * odd ones (only k > 16 reaches h.lo, which also picks the block).  This
 * is the split-block filter's own probe, a 32-bit lane each, in 512 bits:
 * sixteen probes are one 64-bit broadcast, then a multiply, a shift and a
 * variable shift of each half of the block (of the whole one in AVX-512),
 * where the 64-bit lanes' two probes a lane take two shifts, a mask and
 * two variable shifts more a half: a shorter insert, which one key at a
 * time keeps more keys' cache misses in flight.  The rate costs slightly
 * more bits than two probes in a 64-bit lane (sizing.c computes both).
 * Part of the file format, like the salts. */
static inline void bf_lanes32_pattern(bf_hash h, uint32_t k, uint64_t pat[8])
{
    for (unsigned w = 0; w < 8; w++)
        pat[w] = 0;
    for (uint32_t j = 0; j < k; j++) {
        uint32_t r = j >> 4, l = j & 15;
        uint64_t word = r & 1 ? h.lo : h.hi;
        uint32_t x = (uint32_t)(l & 1 ? word >> 32 : word);
        uint32_t salt = BF_LANE_SALT[(2 * r + (l >> 3)) & 7][l & 7];
        pat[l >> 1] |= UINT64_C(1) << (32 * (l & 1) + ((x * salt) >> 27));
    }
}

/* printf into errstr if there is one. */
void bf_seterr(char *errstr, size_t errstr_size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same, returning code: `return bf_refuse(BF_ERR_FORMAT, errstr,
 * errstr_size, ...)` is a refusal in one statement. */
bf_err bf_refuse(bf_err code, char *errstr, size_t errstr_size,
                 const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Builders the loader uses: a filter around existing cell memory. */
bf_blocked *bf_blocked_wrap(uint64_t *words, uint64_t nblocks, uint32_t k,
                            uint32_t scheme, bool owns, uint64_t seed);
bf_counting *bf_counting_wrap(uint8_t *cells, uint64_t nblocks, uint32_t k,
                              bool owns, uint64_t seed);
bf_scalable *bf_scalable_wrap(const bf_scalable_params *p,
                              bf_blocked **layers, uint32_t nlayers);

/* The geometry add_layer gives layer i of sb (delta.c checks a delta's new
 * layers against it, so a delta cannot make the filter allocate what its
 * own growth never would). */
bf_err bf_scalable_layer_geometry(const bf_scalable *sb, uint32_t i,
                                  uint64_t *nblocks, uint32_t *k,
                                  uint64_t *capacity, double *fpr);

/* -- the serialized form ---------------------------------------------------
 *
 * format.c writes and reads the envelope every kind shares and the layered
 * form of blocked, counting and scalable filters; windowed.c writes its
 * ring of generations around scalable filters in the layered form; the
 * bf_filter handle (filter.c) chooses between them by kind. */

/* Writes the first 32 bytes every file of the format starts with (magic,
 * version, kind, hash id, seed, file size) into hdr (format.c). */
void bf_format_put_envelope(uint8_t *hdr, uint16_t kind, uint64_t seed,
                            uint64_t size);

/* The envelope of any file of the format, filter or not: magic, version,
 * file size, checksum (unless BF_LOAD_NOVERIFY) and hash id; the kind
 * field is written to *kind unchecked, for the caller to check. */
bf_err bf_format_check_file(const uint8_t *buf, size_t len, unsigned flags,
                            uint16_t *kind, char *errstr, size_t errstr_size);

/* The part of a serialized filter every kind shares (format.c): magic,
 * version, file size, checksum (unless BF_LOAD_NOVERIFY), a known kind and
 * hash id.  The kind is written to *kind. */
bf_err bf_format_check_envelope(const uint8_t *buf, size_t len,
                                unsigned flags, bf_kind *kind, char *errstr,
                                size_t errstr_size);

/* Maps the filter file at path read-only (format.c): a regular file, at
 * least a header and a checksum long.  The caller unmaps *map, *len. */
bf_err bf_format_map_file(const char *path, void **map, size_t *len,
                          char *errstr, size_t errstr_size);

/* A filter in the layered form: the kind (blocked, scalable or counting)
 * says which member is set.  It names the filter, and neither owns nor
 * frees it but through bf_layered_destroy. */
typedef struct bf_layered {
    bf_kind kind;
    union {
        bf_blocked *b;
        bf_scalable *s;
        bf_counting *c;
    } u;
} bf_layered;

uint64_t bf_layered_seed(const bf_layered *f);
void bf_layered_destroy(const bf_layered *f);
uint64_t bf_layered_serialized_size(const bf_layered *f);
bf_err bf_layered_serialize(const bf_layered *f, bf_write_fn write,
                            void *opaque);
/* Loads a filter in the layered form: the envelope (the checksum unless
 * BF_LOAD_NOVERIFY), then every header field, descriptor, size and offset,
 * checked before anything is allocated; a windowed file is refused.  With
 * BF_LOAD_INPLACE the filter uses buf's cells, which the caller keeps
 * mapped and 64-byte aligned; else it copies them. */
bf_err bf_layered_load(const uint8_t *buf, size_t len, unsigned flags,
                       bf_layered *out, char *errstr, size_t errstr_size);

/* The windowed filter's serialized form (windowed.c), for the handle.
 * bf_windowed_load expects the envelope checked already
 * (bf_format_check_envelope). */
uint64_t bf_windowed_serialized_size(const bf_windowed *w);
bf_err bf_windowed_serialize(const bf_windowed *w, bf_write_fn write,
                             void *opaque);
bf_err bf_windowed_load(const uint8_t *buf, size_t len, unsigned flags,
                        bf_windowed **out, char *errstr, size_t errstr_size);

/* Whether a layer of `scheme` with k probes in blocks of block_cells cells
 * exists (sizing.c): the lane schemes need 512 cells, and the 32-bit lanes
 * k a multiple of 16; distinct probes k <= block_cells.  The loaders check
 * every layer they read with it. */
bool bf_scheme_ok(uint32_t scheme, uint32_t block_cells, uint32_t k);

/* Expected fpr of a blocked layer at its current estimated key count. */
double bf_blocked_est_fpr(const bf_blocked *bf);

#endif
