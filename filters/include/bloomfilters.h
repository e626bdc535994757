/*
 * bloomfilters.h -- libbloomfilters, the filters bloomstage runs on.
 *
 * Three structures share one hash and one file format:
 *
 *   bf_blocked    a blocked Bloom filter: 512-bit (one cache line) blocks,
 *                 k probes inside one block, so an insert or a lookup costs
 *                 one cache miss.  Sized from (capacity, fpr) with the
 *                 blocked-filter formula so the *measured* rate meets fpr.
 *   bf_scalable   a cascade of blocked layers (Almeida et al.): layer i has
 *                 capacity n0*s^i and error P0*r^i with P0 = P*(1-r), so the
 *                 compound error stays <= P however many keys arrive.
 *   bf_counting   a blocked counting filter: 128 four-bit saturating counters
 *                 per cache line, for entries that must be removable.
 *
 * Hashing: a key is hashed once with XXH3-128 (bf_hash_key); every operation
 * has an `_h` form taking that hash, so a caller checking one key against a
 * dedup filter and several blocklists hashes it once.  The low 64 bits pick
 * the block (multiply-shift, no modulo), the high 64 bits drive the
 * in-block probes.  Blocked filters (and scalable layers) use a lane
 * scheme: the block is eight 64-bit lanes (k = 8, 24, ...) or sixteen
 * 32-bit lanes (k = 16, 32, ...), and probe j sets one bit of lane j mod 8
 * (or 16) chosen by a 32-bit multiply-shift of a hash word -- branch-free,
 * one SIMD pass (AVX-512 or AVX2 when the CPU has it, chosen at run time;
 * scalar otherwise).  A loaded filter keeps the scheme each layer stores:
 * a version-2 layer may hold any k in 64-bit lanes (k = 16 included), and
 * every layer of a version-1 file has k distinct 9-bit probes (slices of
 * the hash and splitmix64 outputs); the counting filter always uses
 * distinct (7-bit) probes.
 *
 *   bf_windowed   a ring of time-sliced generations of scalable filters that
 *                 forgets a key a window after it was added: "drop a repeat
 *                 within 24 hours" in memory bounded by one window of keys.
 *
 * bf_filter is a tagged handle over any of the four, used by whatever works
 * on "a filter file" without caring which kind it holds (blocklists, the
 * `filter` commands, checkpoints).
 *
 * Conventions (librdkafka's): functions that can fail return bf_err and, when
 * given one, write a human-readable reason into errstr[errstr_size].  This
 * library never prints and never exits.  _destroy accepts NULL.
 * Nothing here is thread-safe for concurrent writers; concurrent readers of a
 * filter nobody writes are fine.
 */
#ifndef BLOOMFILTERS_H
#define BLOOMFILTERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define BF_WARN_UNUSED __attribute__((warn_unused_result))
#else
#define BF_WARN_UNUSED
#endif

typedef enum bf_err {
    BF_OK = 0,
    BF_ERR_NOMEM,        /* allocation failed, or a memory cap was reached */
    BF_ERR_INVALID,      /* a parameter out of range */
    BF_ERR_IO,           /* reading or writing a file failed (errno kept) */
    BF_ERR_FORMAT,       /* a serialized filter is damaged or not ours */
    BF_ERR_VERSION,      /* a serialized filter from an unknown format version */
    BF_ERR_INCOMPATIBLE, /* two filters that cannot be combined */
    BF_ERR_READONLY,     /* a write to a filter used in place from a file */
} bf_err;

/* A short constant name for an error code ("corrupt or foreign data", ...). */
const char *bf_err_str(bf_err err);

/* ------------------------------------------------------------------------ */
/* Hashing                                                                   */

/* Hash functions a serialized filter can name.  Only one exists so far; the
 * id is stored so a future one can be told apart. */
#define BF_HASH_XXH3_128 1u

typedef struct bf_hash {
    uint64_t lo; /* picks the block */
    uint64_t hi; /* drives the probes */
} bf_hash;

/* XXH3-128 of key[0..len) with `seed`.  Filters only agree on a key's hash
 * when they share the seed: every filter stores its seed, and bf_hash values
 * must be computed with the seed of the filter they are passed to. */
bf_hash bf_hash_key(const void *key, size_t len, uint64_t seed);

/* The default seed of filters built by bloomstage. */
#define BF_DEFAULT_SEED UINT64_C(0x626c6f6f6d737467) /* "bloomstg" */

/* The instruction set the lane scheme runs on: "avx512" when the CPU has
 * AVX-512 F and DQ (for k = 8 and 16: the block in one register; other k
 * run the AVX2 code), else "avx2" when it has AVX2 (checked once, at
 * load), else "scalar".  bf_simd_use("scalar"), ("avx2") or ("avx512")
 * forces one (false, changing nothing, on a CPU without it or for another
 * name): for tests and benchmarks that compare them; all give the same
 * answers and set the same bits.  Not to be called while another thread
 * uses a filter. */
const char *bf_simd_name(void);
bool bf_simd_use(const char *name);

/* Zeroed memory as the filters take it for their cells, freed with free():
 * 64-byte aligned, and from 4 MiB on aligned to 2 MiB and offered to the
 * kernel as huge pages (so a lookup in a filter far larger than the caches
 * is one cache miss, not also a page-table walk).  NULL for 0 bytes or
 * when out of memory.  For arrays that are looked up like a filter's: the
 * bench gives its baseline filter the same memory. */
void *bf_alloc_aligned(uint64_t bytes);

/* ------------------------------------------------------------------------ */
/* Statistics, common to every kind                                          */

typedef enum bf_kind {
    BF_KIND_BLOCKED = 1,
    BF_KIND_SCALABLE = 2,
    BF_KIND_COUNTING = 3,
    BF_KIND_WINDOWED = 4,
} bf_kind;

/* "blocked", "scalable", "counting", "windowed" */
const char *bf_kind_name(bf_kind kind);

/* In-block probe schemes (bf_info.scheme, stored per layer in the file). */
#define BF_SCHEME_DISTINCT 0u /* k distinct probes anywhere in the block:
                                 counting filters, and blocked filters of
                                 format-version-1 files */
#define BF_SCHEME_LANES 1u    /* one bit per probe in lane j mod 8 of eight
                                 64-bit lanes: new blocked filters whose k
                                 is not a multiple of 16 (k = 8, 24, ...);
                                 a version-2 file's layer may hold any k
                                 in it (k = 16 included) */
#define BF_SCHEME_LANES32 2u  /* one bit per probe in lane j mod 16 of
                                 sixteen 32-bit lanes: new blocked filters
                                 whose k is a multiple of 16 */

/* "distinct probes", "64-bit lanes", "32-bit lanes" (or "unknown"). */
const char *bf_scheme_name(uint32_t scheme);

typedef struct bf_info {
    bf_kind kind;
    uint32_t hash_id;
    uint64_t seed;
    uint64_t capacity;  /* keys the filter was sized for (all layers so far) */
    double fpr_target;  /* the design target (compound, for scalable) */
    uint32_t k;         /* probes per key (of the newest layer) */
    uint32_t layers;    /* 1 unless scalable */
    uint64_t cells;     /* bits, or counters for counting filters */
    uint64_t bytes;     /* memory of the cell arrays */
    uint64_t inserts;   /* inserts that changed the filter (new keys) */
    uint64_t cells_set; /* bits set / counters non-zero */
    double fill;        /* cells_set / cells */
    double est_keys;    /* distinct keys estimated from the bits */
    double est_fpr;     /* false-positive rate estimated from the fill */
    uint32_t scheme;    /* BF_SCHEME_* (of the newest layer) */
} bf_info;

/* ------------------------------------------------------------------------ */
/* Sizing                                                                    */

/* Cells per block: 512 bits for bf_blocked, 128 counters for bf_counting. */
#define BF_BLOCK_BITS 512u
#define BF_COUNTING_BLOCK_CELLS 128u
#define BF_MAX_K 64u
/* The largest false-positive rate a filter is sized for: every target
 * fpr lies in (0, BF_FPR_MAX]; a layer's own rate, read from a file, in
 * [0, BF_FPR_MAX]. */
#define BF_FPR_MAX 0.5

/* Chooses block count and k so that `capacity` keys in blocks of
 * `block_cells` cells give a false-positive rate <= fpr by the blocked-filter
 * formula (Poisson-distributed block loads, the exact in-block rate of the
 * probe scheme: sizing.c).  block_cells BF_BLOCK_BITS sizes a new blocked
 * filter (k a multiple of 8, in BF_SCHEME_LANES32 when it is one of 16 and
 * BF_SCHEME_LANES otherwise: bf_scheme_for); other block sizes
 * (BF_COUNTING_BLOCK_CELLS) use BF_SCHEME_DISTINCT.
 * Returns BF_ERR_INVALID for capacity 0, fpr outside (0, BF_FPR_MAX], or a
 * size beyond 2^40 blocks. */
bf_err bf_size_for(uint64_t capacity, double fpr, uint32_t block_cells,
                   uint64_t *nblocks, uint32_t *k) BF_WARN_UNUSED;
/* The same for an explicit scheme (the lane schemes need 512 cells;
 * BF_SCHEME_LANES tries k = 8, 16, 24 ..., BF_SCHEME_LANES32 k = 16, 32
 * ...). */
bf_err bf_size_for_scheme(uint32_t scheme, uint64_t capacity, double fpr,
                          uint32_t block_cells, uint64_t *nblocks,
                          uint32_t *k) BF_WARN_UNUSED;

/* The scheme a new filter of blocks of `block_cells` cells and k probes
 * uses: BF_SCHEME_LANES32 for 512 cells and k a multiple of 16,
 * BF_SCHEME_LANES for 512 cells otherwise, BF_SCHEME_DISTINCT for other
 * block sizes. */
uint32_t bf_scheme_for(uint32_t block_cells, uint32_t k);

/* The blocked-filter formula itself: expected false-positive rate of a
 * filter of `nblocks` blocks of `block_cells` cells, k probes, holding n
 * keys, in the scheme bf_scheme_for gives. */
double bf_blocked_fpr_expected(uint64_t nblocks, uint32_t block_cells,
                               uint32_t k, double n);
/* The same for an explicit scheme (1.0 for a scheme or geometry that does
 * not exist). */
double bf_fpr_expected_scheme(uint32_t scheme, uint64_t nblocks,
                              uint32_t block_cells, uint32_t k, double n);

/* ------------------------------------------------------------------------ */
/* Blocked Bloom filter                                                      */

typedef struct bf_blocked bf_blocked;

/* A filter for `capacity` keys at false-positive rate `fpr`.  Returns NULL
 * and writes why into errstr on bad parameters or allocation failure. */
bf_blocked *bf_blocked_new(uint64_t capacity, double fpr, uint64_t seed,
                           char *errstr, size_t errstr_size);
/* A filter with explicit geometry (nblocks >= 1, 1 <= k <= BF_MAX_K), in
 * the scheme bf_scheme_for(BF_BLOCK_BITS, k) gives. */
bf_blocked *bf_blocked_new_geometry(uint64_t nblocks, uint32_t k,
                                    uint64_t seed, char *errstr,
                                    size_t errstr_size);
void bf_blocked_destroy(bf_blocked *bf);

uint64_t bf_blocked_seed(const bf_blocked *bf);

/* Adds a key; returns true if it set at least one new bit (the key was not
 * already "maybe present").  Never fails.  Must not be called on a filter
 * loaded read-only in place (bf_filter with BF_LOAD_INPLACE).  It counts
 * the key (bf_info.inserts) but not the bits it set: the next reader of
 * the bit count (bf_blocked_info, the estimates, serialization, a delta)
 * recounts them, once, in time linear in the filter's size; the batched
 * add and the scalable filter's add keep the count as they go. */
bool bf_blocked_add_h(bf_blocked *bf, bf_hash h);
bool bf_blocked_add(bf_blocked *bf, const void *key, size_t len);
/* True if the key may be present; false means certainly absent. */
bool bf_blocked_contains_h(const bf_blocked *bf, bf_hash h);
bool bf_blocked_contains(const bf_blocked *bf, const void *key, size_t len);
/* out[i] = contains(h[i]) for i < n, with the blocks of the next keys
 * prefetched so their cache misses overlap: for many lookups at once in a
 * filter far larger than the caches (a batch of records against a
 * blocklist). */
void bf_blocked_contains_many_h(const bf_blocked *bf, const bf_hash *h,
                                size_t n, bool *out);
/* The batched add: out[i] = add_h(h[i]) for i < n in order (out may be
 * NULL), with the next keys' blocks prefetched.  Returns how many were
 * new. */
size_t bf_blocked_add_many_h(bf_blocked *bf, const bf_hash *h, size_t n,
                             bool *out);
/* One call: true if the key was new (and is now added), false if it was
 * already maybe-present (filter unchanged). */
bool bf_blocked_add_if_absent_h(bf_blocked *bf, bf_hash h);
bool bf_blocked_add_if_absent(bf_blocked *bf, const void *key, size_t len);
/* A hint, for one lookup at a time in a filter larger than the caches:
 * starts bringing the key's block into the cache and returns at once, so a
 * lookup or add of that key a little later (after other work: reading the
 * next record, say) does not wait on memory.  The filter is left as
 * it was; it cannot fail.  The scalable and counting filters and bf_filter
 * have one too. */
void bf_blocked_prefetch_h(const bf_blocked *bf, bf_hash h);

void bf_blocked_info(const bf_blocked *bf, bf_info *out);

/* Union in place: dst |= src.  Both must have the same geometry, seed and
 * hash; otherwise BF_ERR_INCOMPATIBLE with the reason in errstr. */
bf_err bf_blocked_merge(bf_blocked *dst, const bf_blocked *src, char *errstr,
                        size_t errstr_size) BF_WARN_UNUSED;

/* ------------------------------------------------------------------------ */
/* Scalable filter                                                           */

typedef struct bf_scalable_params {
    uint64_t initial_capacity; /* n0: keys in the first layer (> 0) */
    double fpr;                /* P: compound target, (0, BF_FPR_MAX] */
    double growth;             /* s: capacity ratio of layer i+1 to i, >= 1 */
    double tightening;         /* r: error ratio of layer i+1 to i, (0, 1) */
    uint64_t seed;
    uint64_t max_bytes;        /* cap on cell memory; 0 = no cap (not
                                  stored in files: see set_max_bytes) */
} bf_scalable_params;

/* n0 = 1e5, P = 1e-6, s = 2, r = 0.85, BF_DEFAULT_SEED, no cap. */
void bf_scalable_params_default(bf_scalable_params *p);

typedef struct bf_scalable bf_scalable;

bf_scalable *bf_scalable_new(const bf_scalable_params *p, char *errstr,
                             size_t errstr_size);
void bf_scalable_destroy(bf_scalable *sb);

uint64_t bf_scalable_seed(const bf_scalable *sb);

/* The cap on cell memory (0 = none) is a setting of the process, not of
 * the data: the file format does not store it, so a loaded filter has none
 * until this sets it. */
void bf_scalable_set_max_bytes(bf_scalable *sb, uint64_t max_bytes);
void bf_scalable_params_get(const bf_scalable *sb, bf_scalable_params *out);

/* Maybe present in any layer (newest first). */
bool bf_scalable_contains_h(const bf_scalable *sb, bf_hash h);
bool bf_scalable_contains(const bf_scalable *sb, const void *key, size_t len);

/* Insert = lookup + add to the newest layer, growing a new layer when the
 * newest is full.  Returns 1 if the key was new and is now added, 0 if it was
 * already maybe-present, or -BF_ERR_NOMEM if a new layer could not be
 * allocated (or max_bytes would be passed): the key is then NOT added. */
int bf_scalable_add_if_absent_h(bf_scalable *sb, bf_hash h) BF_WARN_UNUSED;
int bf_scalable_add_if_absent(bf_scalable *sb, const void *key,
                              size_t len) BF_WARN_UNUSED;
/* The key's block in every layer (see bf_blocked_prefetch_h). */
void bf_scalable_prefetch_h(const bf_scalable *sb, bf_hash h);

uint32_t bf_scalable_layers(const bf_scalable *sb);
/* Per-layer statistics (layer 0 is the oldest); false if no such layer. */
bool bf_scalable_layer_info(const bf_scalable *sb, uint32_t layer,
                            bf_info *out);
/* Whole-filter statistics: est_fpr is the compound rate
 * 1 - prod(1 - rate_i) of the layers at their current fill. */
void bf_scalable_info(const bf_scalable *sb, bf_info *out);

/* ------------------------------------------------------------------------ */
/* Counting Bloom filter                                                     */

typedef struct bf_counting bf_counting;

bf_counting *bf_counting_new(uint64_t capacity, double fpr, uint64_t seed,
                             char *errstr, size_t errstr_size);
void bf_counting_destroy(bf_counting *cf);

uint64_t bf_counting_seed(const bf_counting *cf);

/* Increments the key's k counters; a counter at 15 saturates and stays 15
 * for ever (it is never decremented again), so saturation can never cause a
 * false negative.  Returns true if the key was not maybe-present before. */
bool bf_counting_add_h(bf_counting *cf, bf_hash h);
bool bf_counting_add(bf_counting *cf, const void *key, size_t len);

/* Removes one occurrence of a key.  If the filter says the key is absent
 * (some counter is 0) nothing changes and false is returned: removing a key
 * that was never added is then a no-op.  Otherwise every non-saturated
 * counter of the key is decremented and true is returned.
 *
 * Caveat, inherent to counting filters: removing a key that was never added
 * but is a false positive (probability <= fpr) decrements counters that
 * belong to other keys and may turn one of them into a false negative.  Only
 * remove keys you added. */
bool bf_counting_remove_h(bf_counting *cf, bf_hash h);
bool bf_counting_remove(bf_counting *cf, const void *key, size_t len);

bool bf_counting_contains_h(const bf_counting *cf, bf_hash h);
/* See bf_blocked_prefetch_h. */
void bf_counting_prefetch_h(const bf_counting *cf, bf_hash h);
bool bf_counting_contains(const bf_counting *cf, const void *key, size_t len);

/* The smallest of the key's counters (0..15): 0 means absent. */
unsigned bf_counting_min_count_h(const bf_counting *cf, bf_hash h);
/* Counters stuck at 15. */
uint64_t bf_counting_saturated(const bf_counting *cf);

void bf_counting_info(const bf_counting *cf, bf_info *out);

/* ------------------------------------------------------------------------ */
/* Windowed filter (windowed.c)                                              */

/*
 * A filter that remembers a key for a window of time W and then forgets it,
 * in memory bounded by the keys of one window plus one slice.  Time is the
 * caller's: record timestamps in ms, input line numbers, anything that only
 * matters through its order; it must be >= 0.
 *
 * Stream time T is the largest time passed to bf_windowed_advance so far.
 * Time is cut into slices of W/G (G = generations; slice s covers
 * [ceil(s*W/G), ceil((s+1)*W/G)), so W need not divide by G).  Each slice
 * has its own generation, a scalable filter sized for what arrives in it
 * (the first from initial_capacity, later ones from what the previous one
 * took).  The generations of the current slice and the G before it are
 * live; an insert goes to the current one; a lookup asks every live one;
 * the generation of a slice that falls out of the last G+1 is freed whole.
 *
 * The contract, with tau(x) the stream time right after x was passed (for
 * times that never go back, the time itself): for a key added at tau(a),
 * - a lookup at tau(b) < tau(a) + W finds it: never forgotten early;
 * - a lookup at tau(b) >= tau(a) + W*(1 + 1/G) finds it only as a false
 *   positive, with probability <= fpr;
 * - in between, either answer may come.
 * The fpr budget is split evenly: each generation is a scalable filter with
 * compound rate fpr/(G+1), so the union of the G+1 live ones stays <= fpr.
 *
 * A time older than the oldest live generation's start is "late": its
 * window's keys may be forgotten already.  bf_windowed_advance reports it;
 * what to do with such a record is the caller's policy.
 */
#define BF_WINDOWED_MAX_GENERATIONS 64u

typedef struct bf_windowed_params {
    int64_t window;            /* W, in the caller's time units, >= G */
    uint32_t generations;      /* G, 1..BF_WINDOWED_MAX_GENERATIONS */
    double fpr;                /* P: for the union of live generations */
    uint64_t initial_capacity; /* keys the first generation is sized for */
    double growth;             /* each generation's scalable growth s */
    double tightening;         /* and tightening r */
    uint64_t seed;
    uint64_t max_bytes; /* cap on the cell memory of all generations
                           together; 0 = none (not stored in files) */
} bf_windowed_params;

/* W = 1000, G = 4, the scalable defaults (n0 = 1e5, P = 1e-6, s = 2,
 * r = 0.85, BF_DEFAULT_SEED), no cap. */
void bf_windowed_params_default(bf_windowed_params *p);

typedef struct bf_windowed bf_windowed;

/* A filter with no generation yet and no stream time. */
bf_windowed *bf_windowed_new(const bf_windowed_params *p, char *errstr,
                             size_t errstr_size);
void bf_windowed_destroy(bf_windowed *w);

void bf_windowed_params_get(const bf_windowed *w, bf_windowed_params *out);
void bf_windowed_set_max_bytes(bf_windowed *w, uint64_t max_bytes);
uint64_t bf_windowed_seed(const bf_windowed *w);

/* Moves stream time to max(T, t), freeing the generations it leaves
 * behind.  Returns true if t is late: older than the start of the oldest
 * live generation (after the move).  t < 0 is not a time: T stays, and the
 * answer is false. */
bool bf_windowed_advance(bf_windowed *w, int64_t t);
/* Stream time, or -1 before any advance. */
int64_t bf_windowed_stream_time(const bf_windowed *w);

/* Maybe present in a live generation. */
bool bf_windowed_contains_h(const bf_windowed *w, bf_hash h);
/* Lookup + add to the current generation (made when needed).  1 if the
 * key was new and is now added, 0 if it was maybe-present already,
 * -BF_ERR_NOMEM if a generation or layer could not be made (memory or
 * max_bytes): the key is then NOT added.  Before any advance the current
 * slice is that of time 0. */
int bf_windowed_add_if_absent_h(bf_windowed *w, bf_hash h) BF_WARN_UNUSED;
/* The key's block in every live generation (see bf_blocked_prefetch_h). */
void bf_windowed_prefetch_h(const bf_windowed *w, bf_hash h);

/* One live generation, oldest first. */
typedef struct bf_generation_info {
    int64_t slice;      /* its slice number */
    int64_t time_from;  /* the stream time it covers: [from, to) */
    int64_t time_to;
    bf_info info;       /* its scalable filter */
} bf_generation_info;

/* Generations holding a filter (those of empty slices are not counted). */
uint32_t bf_windowed_generations(const bf_windowed *w);
bool bf_windowed_generation_info(const bf_windowed *w, uint32_t i,
                                 bf_generation_info *out);
/* Whole-filter statistics: sums over the live generations; est_fpr is the
 * union's 1 - prod(1 - rate_g) at the current fill; fpr_target is P. */
void bf_windowed_info(const bf_windowed *w, bf_info *out);

/* ------------------------------------------------------------------------ */
/* Estimates from the bits                                                   */

/* Distinct keys in a set of `cells` bits with `set` of them set, k probes:
 * n = -(m/k) ln(1 - X/m).  Returns INFINITY for a full filter. */
double bf_estimate_count(uint64_t cells, uint64_t set, uint32_t k);

/* The same for a blocked filter of nblocks blocks of block_cells cells, in
 * the scheme bf_scheme_for gives.  A key sets a given cell of its block
 * with probability q (k/B for k distinct probes, 1 - (1 - 1/W)^(k/L) for L
 * lanes of W bits), so a cell stays clear with probability
 * exp(-lambda q) under Poisson block loads: n = -nblocks ln(1 - X/m) / q,
 * exactly the plain formula for distinct probes.  bf_info.est_keys and the
 * union/intersection estimates use it. */
double bf_estimate_count_blocked(uint64_t nblocks, uint32_t block_cells,
                                 uint64_t set, uint32_t k);
double bf_estimate_count_scheme(uint32_t scheme, uint64_t nblocks,
                                uint32_t block_cells, uint64_t set,
                                uint32_t k);

/* Estimated |A u B| and |A n B| (inclusion-exclusion) of two compatible
 * blocked filters, without changing either. */
bf_err bf_blocked_estimate_union(const bf_blocked *a, const bf_blocked *b,
                                 double *out, char *errstr,
                                 size_t errstr_size) BF_WARN_UNUSED;
bf_err bf_blocked_estimate_intersection(const bf_blocked *a,
                                        const bf_blocked *b, double *out,
                                        char *errstr,
                                        size_t errstr_size) BF_WARN_UNUSED;

/* ------------------------------------------------------------------------ */
/* Any filter, and the serialized format                                     */

typedef struct bf_filter bf_filter;

/* Wrap a filter; the bf_filter owns it from then on. */
bf_filter *bf_filter_from_blocked(bf_blocked *bf);
bf_filter *bf_filter_from_scalable(bf_scalable *sb);
bf_filter *bf_filter_from_counting(bf_counting *cf);
bf_filter *bf_filter_from_windowed(bf_windowed *w);
void bf_filter_destroy(bf_filter *f);

bf_kind bf_filter_kind(const bf_filter *f);
/* The wrapped filter if it is of that kind, else NULL.  Still owned by f. */
bf_blocked *bf_filter_blocked(bf_filter *f);
bf_scalable *bf_filter_scalable(bf_filter *f);
bf_counting *bf_filter_counting(bf_filter *f);
bf_windowed *bf_filter_windowed(bf_filter *f);
uint64_t bf_filter_seed(const bf_filter *f);

bool bf_filter_contains_h(const bf_filter *f, bf_hash h);
bool bf_filter_contains(const bf_filter *f, const void *key, size_t len);
/* See bf_blocked_prefetch_h. */
void bf_filter_prefetch_h(const bf_filter *f, bf_hash h);
/* Adds a key: 1 new, 0 was maybe-present, negative -bf_err on failure
 * (-BF_ERR_READONLY for a filter used in place from a file).  A windowed
 * filter adds at its current stream time. */
int bf_filter_add(bf_filter *f, const void *key, size_t len) BF_WARN_UNUSED;
void bf_filter_info(const bf_filter *f, bf_info *out);

/* Union in place (dst |= src) of two filters of the same kind and geometry;
 * scalable filters merge layer by layer and must have the same layers. */
bf_err bf_filter_merge(bf_filter *dst, const bf_filter *src, char *errstr,
                       size_t errstr_size) BF_WARN_UNUSED;

/* The first bytes of every serialized filter (the NUL included): a file
 * that starts with them is a filter, not a text list. */
#define BF_FORMAT_MAGIC "BLMFLTR"
#define BF_FORMAT_MAGIC_LEN 8

/*
 * Serialized format (version 2), all integers little-endian:
 *
 *   offset size
 *   0      8    magic "BLMFLTR\0"
 *   8      2    format version (2; 1 is still read)
 *   10     2    kind (bf_kind)
 *   12     4    hash id (BF_HASH_XXH3_128)
 *   16     8    seed
 *   24     8    total file size in bytes, trailer included
 *   32     4    layer count L (1 for blocked and counting)
 *   36     4    header size H (64 + 64*L), reserved for later growth
 *   40     8    scalable: compound fpr P (double); 0 for other kinds
 *   48     8    scalable: growth s (double); 0 for other kinds
 *   56     8    scalable: tightening r (double); 0 for other kinds
 *   64     64*L layer descriptors:
 *                 u64 nblocks, u16 k, u16 scheme, u32 block_cells,
 *                 u64 capacity, f64 fpr, u64 inserts, u64 cells_set,
 *                 u64 data offset, u64 data size
 *   H      ...  each layer's cell array at its data offset, 64-byte aligned
 *   end-8  8    XXH3-64 (seed 0) of every byte before it
 *
 * A loader checks, before allocating anything: magic, version, kind, hash
 * id, that the file size field equals the bytes given, that L and H agree
 * and are bounded, that every layer's data size equals what its geometry
 * needs and lies inside the file without overlap, and the checksum.
 *
 * Version 1 is the same but for the descriptor's u16 k, u16 scheme, which
 * was one u32 k (k <= 64, so its high half, where version 2 keeps the
 * scheme, was 0): every layer of a version-1 file is BF_SCHEME_DISTINCT.
 * A blocked layer may be of any scheme (a scalable filter loaded from a
 * version-1 file grows layers of the lane schemes on top of its
 * distinct-probe ones), the 32-bit lanes only with k a multiple of 16; a
 * counting filter is always BF_SCHEME_DISTINCT.  Files are written as
 * version 2.  A reader refuses a layer whose scheme it does not know, so a
 * new scheme needs no new version.
 * A windowed filter (kind 4) shares the first 32 bytes and the trailer and
 * holds its generations as whole scalable filters in this same format:
 *
 *   32     4    generation count L (0..G+1)
 *   36     4    header size H (128 + 32*L)
 *   40     8    compound fpr P (double)
 *   48     8    growth s (double)
 *   56     8    tightening r (double)
 *   64     8    window W (int64, >= G)
 *   72     4    G
 *   76     4    reserved (0)
 *   80     8    stream time T (int64; -1: none yet, and then L = 0)
 *   88     8    initial capacity
 *   96     8    keys the last finished generation took (sizing hint)
 *   104    24   reserved (0)
 *   128    32*L generation descriptors, oldest first: i64 slice, u64 data
 *                 offset, u64 data size, u64 reserved (0)
 *   ...         each generation's scalable filter at its data offset
 *               (64-byte aligned; zero padding between)
 *   end-8  8    XXH3-64 (seed 0) of every byte before it
 *
 * Its loader checks, besides the envelope: W, G and P in range, slices
 * strictly increasing and live at T, offsets aligned, in order and inside
 * the file, padding zero, and each generation a scalable filter with the
 * same seed and a rate within P/(G+1).  It cannot be used in place.
 */
#define BF_FORMAT_VERSION 2u
#define BF_MAX_LAYERS 64u

/* Bytes bf_filter_serialize will write. */
uint64_t bf_filter_serialized_size(const bf_filter *f);

/* Streams the serialized filter through `write`, which returns 0 on success
 * and anything else to abort (its value is then returned as BF_ERR_IO). */
typedef int (*bf_write_fn)(void *opaque, const void *buf, size_t len);
bf_err bf_filter_serialize(const bf_filter *f, bf_write_fn write,
                           void *opaque) BF_WARN_UNUSED;

/* A bf_write_fn that appends to a malloc'd buffer: pass a bf_membuf
 * (zeroed, or with buf/cap preallocated) as the opaque.  The caller owns
 * and frees buf, after a failure too.  Returns -1 when memory runs out. */
typedef struct bf_membuf {
    uint8_t *buf;
    size_t len, cap;
} bf_membuf;
int bf_membuf_write(void *opaque, const void *data, size_t len);

/* Load flags. */
#define BF_LOAD_COPY 0u    /* copy the cell arrays; buffer can go after */
#define BF_LOAD_INPLACE 1u /* use buf's cell arrays in place (read-only);
                              buf must be 64-byte aligned and outlive f */
#define BF_LOAD_NOVERIFY 2u /* skip the checksum (structure still checked) */

bf_err bf_filter_load_mem(const void *buf, size_t len, unsigned flags,
                          bf_filter **out, char *errstr,
                          size_t errstr_size) BF_WARN_UNUSED;

/* Reads (BF_LOAD_COPY) or memory-maps (BF_LOAD_INPLACE, read-only, unmapped
 * by bf_filter_destroy) a filter file.  errstr names the path. */
bf_err bf_filter_load_file(const char *path, unsigned flags, bf_filter **out,
                           char *errstr, size_t errstr_size) BF_WARN_UNUSED;

/* Writes a filter to `path` atomically: a temp file beside it, fsync,
 * rename, fsync of the directory. */
bf_err bf_filter_save_file(const bf_filter *f, const char *path, char *errstr,
                           size_t errstr_size) BF_WARN_UNUSED;

/* Opens `path` for reading when it is a regular file, without blocking on
 * anything else: opened O_NONBLOCK (a FIFO's open does not wait for a
 * writer; O_NONBLOCK is cleared once the type is checked), never as a
 * controlling terminal, and refused by its type ("PATH: a FIFO, not a
 * regular file"; a socket, a character or block device, a directory).
 * Returns the descriptor (close-on-exec) and its size in *size (may be
 * NULL); -1 with errstr and errno: open's (ENOENT for a missing file), or
 * EINVAL for a file of another type. */
int bf_open_regular(const char *path, uint64_t *size, char *errstr,
                    size_t errstr_size) BF_WARN_UNUSED;

/* Writes a file atomically: `produce` streams its bytes through the given
 * write function into a temp file beside `path` (buffered); then fsync,
 * rename over path, fsync of the directory.  On any failure the temp file is
 * removed, path is untouched, and errstr says which step failed and why
 * (e.g. "No space left on device").  Used for filter files and the stage's
 * checkpoints alike.  The file is made 0600 whatever the umask (the temp
 * file's mode, kept through the rename): a filter answers whether any key
 * one tries was added, so it tells who is in the data; sharing it is a
 * chmod made on purpose. */
typedef bf_err (*bf_produce_fn)(void *opaque, bf_write_fn write,
                                void *wopaque);
bf_err bf_write_file_atomic(const char *path, bf_produce_fn produce,
                            void *opaque, char *errstr,
                            size_t errstr_size) BF_WARN_UNUSED;

/* The same with flags: BF_WRITE_NO_DIRSYNC leaves out the fsync of the
 * directory, for a caller writing many files into one directory that
 * calls bf_fsync_dir once after the last (the renames are durable only
 * then). */
#define BF_WRITE_NO_DIRSYNC 1u
bf_err bf_write_file_atomic_flags(const char *path, unsigned flags,
                                  bf_produce_fn produce, void *opaque,
                                  char *errstr,
                                  size_t errstr_size) BF_WARN_UNUSED;
/* Whether `name` (a file name, or a path) is one of the temp files
 * bf_write_file_atomic creates beside its target, which a crash before the
 * rename leaves behind, for a target whose name ends in `target_suffix`
 * ("" for any).  The temp-file naming is this library's; callers that clean
 * up after a crash ask here instead of matching names themselves. */
bool bf_is_atomic_temp_name(const char *name, const char *target_suffix);

/* fsync of the directory holding `path` (a file in it). */
bf_err bf_fsync_dir(const char *path, char *errstr,
                    size_t errstr_size) BF_WARN_UNUSED;


/* ------------------------------------------------------------------------ */
/* Audit sample (audit.c): the filter's real false-positive rate             */

/*
 * A fixed fraction r of keys is also kept exactly, so that the filter's
 * answer for them can be checked: a sampled key the exact set never saw,
 * which the filter calls "seen", is a false positive, counted.  The share
 * of false positives among the sampled lookups of unseen keys measures the
 * filter's rate, with a Wilson 95% interval, where bf_info.est_fpr is a
 * model of it.
 *
 * Which keys: every bit of the 128-bit hash feeds some filter's probes
 * (the block is the top bits of lo; the 64-bit lanes' probes 1..16 take
 * hi, probes 17..32 lo; the 32-bit lanes' take hi for k = 16 and lo
 * beyond; the distinct probes hi and splitmix64 outputs of it), and
 * dedup's tightened layers reach k > 16, so no bits are free.  The sample
 * takes the splitmix64 finalizer of c = hi ^ lo * F (F a fixed odd word)
 * instead: a key is sampled when the top 53 bits of mix(c) fall below
 * r * 2^53.  The probes read hash bits through multiply-shifts by fixed
 * salts (top bits of 32-bit products) and the block through lo's top
 * bits; mix(c) is a full-avalanche function of all 128 bits that shares
 * no structure with them (for any fixed lo, so any block, it is a
 * bijective scramble of hi), so which keys are sampled is, as far as any
 * filter state can tell, a coin of weight r tossed apart from where the
 * key lands (the tests check the sample's rate, and its measured rate
 * against the whole stream's).
 *
 * Fingerprints: lo, 64 bits (0 stored as 1; 0 marks an empty slot).
 * (hi, lo) -> (c, lo) is a bijection, so for a uniform hash c and lo are
 * uniform and independent: the fingerprint is independent of the
 * sampling bits, and sampled keys' fingerprints are uniform 64-bit words.
 * Two distinct sampled keys share one with probability 2^-64, so n
 * sampled keys hold a collision
 * with probability about n^2 / 2^65 (3e-8 for a million sampled keys, a
 * billion keys at r = 1/1024).  A collision makes one key look seen: one
 * lookup not counted.  The filter's n*f false positives among them
 * outnumber the collisions by 2^65 f / n: for a million sampled keys,
 * 4e4 at f = 1e-9, 4e7 at dedup.fpr's default 1e-6 (the configuration
 * allows up to 0.1).  Neither a 32-bit fingerprint (n^2 / 2^33, a
 * collision certain at a million keys) nor 128 bits (twice the memory for
 * nothing measurable) fits as well.
 *
 * The set is open addressing with linear probing, from 64 slots, doubling
 * at 3/4 full (9 bytes a slot, the fingerprint and a slice tag: 12 to 24
 * bytes a sampled key, 0.01 to 0.02 bytes a key at r = 1/1024, where a
 * filter takes 1 to 10).
 *
 * Forgetting, beside a windowed filter: each entry carries the slice it
 * was added in (a byte, the slice mod 256, beside the fingerprint, which
 * keeps its 64 bits and the argument above).  bf_audit_set_slice (or
 * bf_audit_follow_window) moves the set to the window's current slice and
 * drops the entries of slices before the oldest live one: a pass over the
 * set that empties their slots and puts the rest back in place (a rebuild,
 * not backward-shift deletion), then halves the set while a quarter of
 * what it may hold would do, so its memory follows the sampled keys of
 * one window.  A key the set holds is not re-tagged when it comes again,
 * as the windowed filter does not add a key again that a live generation
 * holds: the set forgets a key exactly when the window's ring drops the
 * slice it was first seen in, so a lookup counts as unseen exactly when
 * the window is no longer meant to remember the key, and the audit
 * measures the rate on what the window should not find.  A set never
 * given a slice (beside a scalable filter) forgets nothing; one that is
 * given one takes what it held before as of that slice.  Tags span at
 * most 256 slices: a slice 256 or more before the current one is dropped
 * too (a window has at most 65 live).
 *
 * Its file: kind BF_FORMAT_KIND_AUDIT of the filter format (not a filter:
 * bf_filter_load_mem refuses it by name, and readers older than the audit
 * refuse the unknown kind), little-endian:
 *
 *   0      32   the envelope: magic, version 2, kind 5, hash id, seed, size
 *   32     8    sampling threshold t, 1..2^53 (rate r = t / 2^53)
 *   40     8    slots S: a power of two, 64..2^40
 *   48     8    entries n (<= 3S/4)
 *   56     8    sampled keys checked (repeats included)
 *   64     8    lookups of unseen sampled keys (<= sampled)
 *   72     8    false positives among them (<= lookups)
 *   80     8    flags: bit 0, tags follow the slots (others 0)
 *   88     8    the current slice, signed (-1: none yet); 0 without tags
 *   96     32   reserved (0)
 *   128    8*S  the slots: fingerprints, 0 = empty
 *   128+8S S    with tags: each slot's slice mod 256 (0 when empty)
 *   end-8  8    XXH3-64 (seed 0) of every byte before it
 *
 * Files written before tags (flags 0, bytes 80..127 all 0) load: their
 * entries are taken as of the first slice set.  The loader checks the
 * envelope and checksum, every field's range, the file size against S
 * and the flags before allocating, that the slots hold exactly n non-zero
 * fingerprints each reachable from its home slot (so every lookup finds
 * what the set holds), and that a tag is 0 in an empty slot and in every
 * slot before any slice.  Used in place never: it is copied.
 */
#define BF_FORMAT_KIND_AUDIT 5u
#define BF_AUDIT_DEFAULT_RATE (1.0 / 1024)

typedef struct bf_audit bf_audit;

/* An empty sample of fraction `rate` ((0, 1], rounded to a multiple of
 * 2^-53) for hashes computed with `seed` (stored in its file, checked by
 * the caller against the filter's).  NULL, and why in errstr, for a rate
 * out of range or without memory. */
bf_audit *bf_audit_new(double rate, uint64_t seed, char *errstr,
                       size_t errstr_size);
void bf_audit_destroy(bf_audit *a);
/* A cap on the set's memory (0 = none; not stored in files). */
void bf_audit_set_max_bytes(bf_audit *a, uint64_t max_bytes);
uint64_t bf_audit_seed(const bf_audit *a);

/* Whether the key of hash h is in the sample (cheap: three multiplies,
 * for a caller that asks ahead, as bloomstage dedup does when it hashes a
 * line; bf_audit_check asks again). */
bool bf_audit_sampled(const bf_audit *a, bf_hash h);

/* The filter answered `filter_seen` for the key of hash h (true: maybe
 * present, the record would be dropped).  For a sampled key the exact set
 * is consulted and updated: a key it had not seen counts one lookup, and
 * one false positive if the filter said seen; the key is then held.
 * Returns 1 for a false positive (the key is known unique: a caller may
 * forward it anyway, which is rescue), 0 otherwise (not sampled, seen
 * before, or the filter right), -BF_ERR_NOMEM when the set cannot grow
 * (memory or the cap): nothing is then counted or held. */
int bf_audit_check(bf_audit *a, bf_hash h, bool filter_seen) BF_WARN_UNUSED;

/* The key of hash h is known seen without a filter's answer to check (a
 * key the stage's output-tail replay finds already forwarded): a sampled
 * one is held, nothing is counted.  0, or -BF_ERR_NOMEM as above. */
int bf_audit_note(bf_audit *a, bf_hash h) BF_WARN_UNUSED;

/* Moves the set to `slice` (>= 0; a slice not past the current one
 * changes nothing): keys held from now on are tagged with it, and the
 * entries of slices before `oldest` (or 256 or more before `slice`) are
 * dropped.  The first slice a set is given drops nothing. */
void bf_audit_set_slice(bf_audit *a, int64_t slice, int64_t oldest);
/* The current slice, -1 before any. */
int64_t bf_audit_slice(const bf_audit *a);
/* bf_audit_set_slice to the window's current slice (0 before any
 * advance, as its inserts) and its oldest live one: called after each
 * bf_windowed_advance, the set forgets what the window forgets. */
void bf_audit_follow_window(bf_audit *a, const bf_windowed *w);

typedef struct bf_audit_stats {
    double rate;              /* the sampling fraction */
    uint64_t sampled;         /* sampled keys checked, repeats included */
    uint64_t lookups;         /* of those, keys the set had not seen */
    uint64_t false_positives; /* of those, the ones the filter said seen */
    double measured;          /* false_positives / lookups (0 for none) */
    double lo, hi;            /* its Wilson 95% interval ([0, 1] for none) */
    uint64_t entries;         /* fingerprints held */
    uint64_t bytes;           /* memory of the set's slots and tags */
} bf_audit_stats;

void bf_audit_stats_get(const bf_audit *a, bf_audit_stats *out);

/* The Wilson score interval at 95% (z = 1.959964) of a proportion of
 * `successes` in `trials`: [0, 1] for no trials. */
void bf_wilson95(uint64_t successes, uint64_t trials, double *lo,
                 double *hi);

/* Bytes bf_audit_serialize writes. */
uint64_t bf_audit_serialized_size(const bf_audit *a);
bf_err bf_audit_serialize(const bf_audit *a, bf_write_fn write,
                          void *opaque) BF_WARN_UNUSED;
/* Loads an audit file (flags: BF_LOAD_NOVERIFY skips the checksum;
 * BF_LOAD_INPLACE is refused).  Every check above is made before the set
 * is allocated; on failure *out is NULL and errstr names the fault. */
bf_err bf_audit_load_mem(const void *buf, size_t len, unsigned flags,
                         bf_audit **out, char *errstr,
                         size_t errstr_size) BF_WARN_UNUSED;

/* ------------------------------------------------------------------------ */
/* Deltas: what changed since a mark                                         */

/*
 * A blocked or scalable filter can track which of its 512-bit blocks changed
 * since a mark (one bit per block, 1/512 of the cell memory; an add that sets
 * a new bit sets its block's), so a checkpoint can write those blocks instead
 * of the whole filter.  A mark is a 64-bit name the caller gives a state of
 * the filter (bloomstage: a checkpoint's id).  A delta names the mark it
 * applies to (its base) and the mark the filter has once it is applied, so a
 * delta offered to any other state is refused by name.  Scalable layers
 * added since the mark are described in the delta (geometry, capacity, rate)
 * and carry only their changed blocks, like the old ones.  Counting and
 * windowed filters are not tracked (bf_filter_track says so): their
 * checkpoints stay whole.
 *
 * Delta format (version 1), little-endian:
 *
 *   offset size
 *   0      8    magic "BLMDELT\0"
 *   8      2    version (1)
 *   10     2    kind (blocked or scalable)
 *   12     4    hash id
 *   16     8    seed
 *   24     8    total size in bytes, trailer included
 *   32     8    base mark: the state it applies to
 *   40     8    new mark: the state it makes
 *   48     4    layer count L after it (1..BF_MAX_LAYERS; 1 for blocked)
 *   52     4    layer count B of the base (1..L)
 *   56     8    changed blocks in all layers
 *   64     64*L layer descriptors: u64 nblocks, u16 k, u16 scheme, u32 0,
 *                 u64 capacity, f64 fpr, u64 inserts, u64 cells_set,
 *                 u64 changed blocks n, u64 0
 *   ...         per layer: n u64 block numbers, strictly increasing, then
 *               the n blocks' 64 bytes each
 *   end-8  8    XXH3-64 (seed 0) of every byte before it
 *
 * Applying checks the envelope and checksum, kind and seed, that the base
 * mark is the filter's mark with nothing changed since and B its layer
 * count, that the old layers' geometry matches and new layers are exactly
 * what the filter's own growth adds, that every block number is inside its
 * layer, that no changed block loses a bit the filter has (a Bloom filter
 * only gains bits) and that the bits set come out as each descriptor says.
 * A failed check leaves the filter as it was (the per-block checks are made
 * as each block is written, its old contents kept and put back).  The
 * result is the tracked filter bit for bit, its statistics included
 * (bf_filter_serialize writes the same bytes).
 */
#define BF_DELTA_MAGIC "BLMDELT"
#define BF_DELTA_VERSION 1u

/* Starts tracking changes; the filter's present state is called `mark`.
 * Again on a tracked filter: the same as bf_filter_mark.  BF_ERR_INVALID
 * for a counting or windowed filter, BF_ERR_READONLY for one used in place,
 * BF_ERR_NOMEM when the bitmaps cannot be allocated. */
bf_err bf_filter_track(bf_filter *f, uint64_t mark, char *errstr,
                       size_t errstr_size) BF_WARN_UNUSED;
/* Whether changes are tracked, and the mark they are relative to. */
bool bf_filter_tracked(const bf_filter *f, uint64_t *mark);
/* The present state is now `mark`: the changed-block bits are cleared
 * (after a delta, or a whole checkpoint, was made durable).  A no-op on an
 * untracked filter. */
void bf_filter_mark(bf_filter *f, uint64_t mark);
/* Blocks changed since the mark, and the bytes bf_filter_delta_serialize
 * writes (0 and 0 for an untracked filter). */
uint64_t bf_filter_delta_blocks(const bf_filter *f);
uint64_t bf_filter_delta_size(const bf_filter *f);
/* Streams the delta from the mark to the present state, which it names
 * new_mark; the filter is not changed (bf_filter_mark does that once the
 * delta is safe).  BF_ERR_INVALID for an untracked filter. */
bf_err bf_filter_delta_serialize(const bf_filter *f, uint64_t new_mark,
                                 bf_write_fn write,
                                 void *opaque) BF_WARN_UNUSED;

typedef struct bf_delta_info {
    bf_kind kind;
    uint64_t seed;
    uint64_t base_mark, new_mark;
    uint32_t base_layers, layers;
    uint64_t blocks; /* changed blocks, all layers */
} bf_delta_info;

/* Checks a delta's envelope, checksum and structure on its own (no filter
 * to apply it to); fills *out. */
bf_err bf_delta_check(const void *buf, size_t len, bf_delta_info *out,
                      char *errstr, size_t errstr_size) BF_WARN_UNUSED;
/* Applies a delta to a tracked filter at its base mark; on success the
 * filter is at the delta's new mark, with no changes pending.  On any
 * failure the filter is unchanged and errstr says what is wrong (damaged,
 * truncated, base mismatch, another filter's). */
bf_err bf_filter_delta_apply(bf_filter *f, const void *buf, size_t len,
                             char *errstr, size_t errstr_size) BF_WARN_UNUSED;

#ifdef __cplusplus
}
#endif
#endif /* BLOOMFILTERS_H */
