/*
 * audit.c -- the audit sample (bf_audit, described in bloomfilters.h): a
 * fixed fraction of keys, chosen by a mix of the key's hash that no
 * filter's probes compute, held exactly as 64-bit fingerprints in an
 * open-addressing set, so that the filter's answer for each of them can be
 * checked against the truth and its false positives counted.  Each entry
 * carries the slice it was added in, so that beside a windowed filter the
 * set forgets what the window forgets.  Its file is a kind of the filter
 * format of its own (format.c's envelope and checksum), loaded as
 * defensively as a filter.
 */
#include "bf_endian.h"
#include "bf_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define A_HDR_SIZE 128u
#define A_TRAILER_SIZE 8u
#define A_MIN_SLOTS UINT64_C(64)
#define A_MAX_SLOTS (UINT64_C(1) << 40)
/* A slot: an 8-byte fingerprint and a 1-byte slice tag. */
#define A_SLOT_BYTES 9u
/* Tags are slices mod 256: the set holds at most this many slices. */
#define A_TAG_SPAN 256
/* Header flags: the slots are followed by their tags. */
#define A_FLAG_TAGS UINT64_C(1)
/* The sampling word's top 53 bits against the threshold: a rate is a
 * multiple of 2^-53, so a double holds it exactly. */
#define A_RATE_BITS 53
#define A_RATE_ONE (UINT64_C(1) << A_RATE_BITS)

/* The odd multiplier that folds lo into hi: any fixed odd word unlike
 * the probes' salts (sqrt(2)'s fraction). */
#define A_FOLD UINT64_C(0x6a09e667f3bcc909)

struct bf_audit {
    uint64_t *slots;   /* nslots fingerprints, 0 = empty */
    uint8_t *tags;     /* each slot's slice mod 256 (0 when empty) */
    uint64_t nslots;   /* a power of two */
    unsigned shift;    /* 64 - log2(nslots): a fingerprint's home slot is
                          its top bits */
    uint64_t entries;
    uint64_t threshold; /* sampled when s >> 11 < threshold */
    uint64_t seed;
    uint64_t max_bytes;
    uint64_t sampled, lookups, false_positives;
    int64_t slice; /* the current slice; -1 before any (tags all 0) */
    int64_t floor; /* no entry's slice is older (with slice >= 0) */
};

/* A key's fingerprint and sampling word: lo, and the splitmix64
 * finalizer of hi ^ lo * A_FOLD ((hi, lo) -> (hi ^ lo * A_FOLD, lo) is a
 * bijection: bloomfilters.h says why that matters).  One multiply and a
 * finalizer, asked of every key: the sampling word alone first. */
static inline uint64_t audit_word(bf_hash h)
{
    return bf_mix64(h.hi ^ h.lo * A_FOLD);
}

static inline uint64_t audit_fp(bf_hash h)
{
    return h.lo ? h.lo : 1;
}

static inline bool audit_in(const bf_audit *a, bf_hash h)
{
    return (audit_word(h) >> (64 - A_RATE_BITS)) < a->threshold;
}

static unsigned log2_of(uint64_t pow2)
{
    return (unsigned)__builtin_ctzll(pow2);
}

/* Most entries nslots slots hold before the set doubles. */
static uint64_t max_load(uint64_t nslots)
{
    return nslots / 4 * 3;
}

static uint64_t home_of(uint64_t fp, unsigned shift)
{
    return fp >> shift;
}

/* The tag of the current slice. */
static uint8_t tag_now(const bf_audit *a)
{
    return a->slice < 0 ? 0 : (uint8_t)a->slice;
}

/* The slice of an entry tagged t when the current one is `now`: the
 * latest at or before it that is t mod 256 (every entry is within
 * A_TAG_SPAN of it). */
static int64_t tag_slice(int64_t now, uint8_t t)
{
    return now - (uint8_t)((uint8_t)now - t);
}

static int64_t slice_of_tag(const bf_audit *a, uint8_t t)
{
    return tag_slice(a->slice, t);
}

/* The slot holding fp, or the empty slot ending its probe run. */
static uint64_t slot_of(const uint64_t *slots, uint64_t nslots,
                        unsigned shift, uint64_t fp)
{
    uint64_t i = home_of(fp, shift);
    while (slots[i] && slots[i] != fp)
        i = (i + 1) & (nslots - 1);
    return i;
}

static bf_audit *audit_alloc(uint64_t threshold, uint64_t seed,
                             uint64_t nslots)
{
    bf_audit *a = calloc(1, sizeof(*a));
    if (!a)
        return NULL;
    a->slots = calloc(nslots, sizeof(uint64_t));
    a->tags = calloc(nslots, 1);
    if (!a->slots || !a->tags) {
        free(a->slots);
        free(a->tags);
        free(a);
        return NULL;
    }
    a->nslots = nslots;
    a->shift = 64 - log2_of(nslots);
    a->threshold = threshold;
    a->seed = seed;
    a->slice = -1;
    return a;
}

bf_audit *bf_audit_new(double rate, uint64_t seed, char *errstr,
                       size_t errstr_size)
{
    double t = rate * (double)A_RATE_ONE;
    if (!(rate > 0 && rate <= 1) || llround(t) < 1) {
        bf_seterr(errstr, errstr_size, "audit rate %g is outside (0, 1]",
                  rate);
        return NULL;
    }
    bf_audit *a = audit_alloc((uint64_t)llround(t), seed, A_MIN_SLOTS);
    if (!a)
        bf_seterr(errstr, errstr_size, "out of memory");
    return a;
}

void bf_audit_destroy(bf_audit *a)
{
    if (a) {
        free(a->slots);
        free(a->tags);
    }
    free(a);
}

void bf_audit_set_max_bytes(bf_audit *a, uint64_t max_bytes)
{
    a->max_bytes = max_bytes;
}

uint64_t bf_audit_seed(const bf_audit *a)
{
    return a->seed;
}

bool bf_audit_sampled(const bf_audit *a, bf_hash h)
{
    return audit_in(a, h);
}

/* The set moved to n slots (a power of two holding its entries), every
 * fingerprint and tag moved; false (the set as it was) without memory. */
static bool audit_resize(bf_audit *a, uint64_t n)
{
    uint64_t *slots = calloc(n, sizeof(uint64_t));
    uint8_t *tags = calloc(n, 1);
    if (!slots || !tags) {
        free(slots);
        free(tags);
        return false;
    }
    unsigned shift = 64 - log2_of(n);
    for (uint64_t i = 0; i < a->nslots; i++)
        if (a->slots[i]) {
            uint64_t j = slot_of(slots, n, shift, a->slots[i]);
            slots[j] = a->slots[i];
            tags[j] = a->tags[i];
        }
    free(a->slots);
    free(a->tags);
    a->slots = slots;
    a->tags = tags;
    a->nslots = n;
    a->shift = shift;
    return true;
}

/* Twice the slots; false past the cap or without memory. */
static bool audit_grow(bf_audit *a)
{
    uint64_t n = a->nslots * 2;
    if (n > A_MAX_SLOTS || (a->max_bytes && n * A_SLOT_BYTES > a->max_bytes))
        return false;
    return audit_resize(a, n);
}

/* Drops the entries of slices before `from`, in place: the dropped slots
 * emptied, then, walking once round from an empty slot, each remaining
 * fingerprint taken out and put back from its home (it lands between its
 * home and where it was, so every lookup reaches it again).  A rebuild in
 * place, not backward-shift deletion one entry at a time: one pass for
 * any number dropped, and no memory to fail.  Then, if a quarter of the
 * most the set may hold would do, it shrinks (kept as it is without
 * memory). */
static void audit_drop_before(bf_audit *a, int64_t from)
{
    uint64_t mask = a->nslots - 1, start = 0;
    for (uint64_t i = 0; i < a->nslots; i++)
        if (a->slots[i] && slice_of_tag(a, a->tags[i]) < from) {
            a->slots[i] = 0;
            a->tags[i] = 0;
            a->entries--;
        }
    while (a->slots[start])
        start++; /* the set is at most 3/4 full: an empty slot exists */
    for (uint64_t j = 1; j <= a->nslots; j++) {
        uint64_t i = (start + j) & mask;
        uint64_t fp = a->slots[i];
        if (!fp)
            continue;
        uint8_t t = a->tags[i];
        a->slots[i] = 0;
        a->tags[i] = 0;
        uint64_t k = slot_of(a->slots, a->nslots, a->shift, fp);
        a->slots[k] = fp;
        a->tags[k] = t;
    }
    uint64_t n = a->nslots;
    while (n > A_MIN_SLOTS && a->entries <= max_load(n / 2) / 2)
        n /= 2;
    if (n < a->nslots)
        (void)audit_resize(a, n);
}

void bf_audit_set_slice(bf_audit *a, int64_t slice, int64_t oldest)
{
    if (slice < 0 || slice <= a->slice)
        return;
    if (a->slice < 0) {
        /* The first slice: what was held before it is taken as its. */
        for (uint64_t i = 0; i < a->nslots; i++)
            a->tags[i] = a->slots[i] ? (uint8_t)slice : 0;
        a->slice = a->floor = slice;
        return;
    }
    int64_t from = slice - (A_TAG_SPAN - 1);
    if (oldest > from)
        from = oldest < slice ? oldest : slice;
    if (from > a->floor) {
        audit_drop_before(a, from);
        a->floor = from;
    }
    a->slice = slice;
}

int64_t bf_audit_slice(const bf_audit *a)
{
    return a->slice;
}

/* Holds a sampled key's fingerprint: 1 if it is new (now held), 0 if
 * the set held it, -BF_ERR_NOMEM if the set cannot grow for it. */
static int audit_hold(bf_audit *a, uint64_t fp)
{
    uint64_t i = slot_of(a->slots, a->nslots, a->shift, fp);
    if (a->slots[i])
        return 0;
    if (a->entries + 1 > max_load(a->nslots)) {
        if (!audit_grow(a))
            return -BF_ERR_NOMEM;
        i = slot_of(a->slots, a->nslots, a->shift, fp);
    }
    a->slots[i] = fp;
    a->tags[i] = tag_now(a);
    a->entries++;
    return 1;
}

int bf_audit_check(bf_audit *a, bf_hash h, bool filter_seen)
{
    if (!audit_in(a, h))
        return 0;
    int held = audit_hold(a, audit_fp(h));
    if (held < 0)
        return held;
    a->sampled++;
    if (!held)
        return 0;
    a->lookups++;
    a->false_positives += filter_seen;
    return filter_seen;
}

int bf_audit_note(bf_audit *a, bf_hash h)
{
    if (!audit_in(a, h))
        return 0;
    int held = audit_hold(a, audit_fp(h));
    return held < 0 ? held : 0;
}

void bf_wilson95(uint64_t successes, uint64_t trials, double *lo, double *hi)
{
    if (trials == 0) {
        *lo = 0;
        *hi = 1;
        return;
    }
    const double z = 1.959963984540054, z2 = z * z;
    double n = (double)trials, p = (double)successes / n;
    double denom = 1 + z2 / n;
    double centre = (p + z2 / (2 * n)) / denom;
    double half = z / denom * sqrt(p * (1 - p) / n + z2 / (4 * n * n));
    /* The ends at 0 and 1 are exact (the formula rounds near them). */
    *lo = successes == 0 ? 0 : fmax(0, centre - half);
    *hi = successes == trials ? 1 : fmin(1, centre + half);
}

void bf_audit_stats_get(const bf_audit *a, bf_audit_stats *out)
{
    memset(out, 0, sizeof(*out));
    out->rate = (double)a->threshold / (double)A_RATE_ONE;
    out->sampled = a->sampled;
    out->lookups = a->lookups;
    out->false_positives = a->false_positives;
    out->measured =
        a->lookups ? (double)a->false_positives / (double)a->lookups : 0;
    bf_wilson95(a->false_positives, a->lookups, &out->lo, &out->hi);
    out->entries = a->entries;
    out->bytes = a->nslots * A_SLOT_BYTES;
}

/* -- the file -------------------------------------------------------------- */

uint64_t bf_audit_serialized_size(const bf_audit *a)
{
    return A_HDR_SIZE + a->nslots * A_SLOT_BYTES + A_TRAILER_SIZE;
}

/* The whole file in one buffer, checksummed at once: the set is small
 * next to the filter it audits (1/1024 of its keys at the default rate),
 * so the copy costs little. */
bf_err bf_audit_serialize(const bf_audit *a, bf_write_fn write, void *opaque)
{
    uint64_t size = bf_audit_serialized_size(a);
    if (size > SIZE_MAX)
        return BF_ERR_NOMEM;
    uint8_t *buf = calloc(1, (size_t)size);
    if (!buf)
        return BF_ERR_NOMEM;
    bf_format_put_envelope(buf, BF_FORMAT_KIND_AUDIT, a->seed, size);
    bf_put64(buf + 32, a->threshold);
    bf_put64(buf + 40, a->nslots);
    bf_put64(buf + 48, a->entries);
    bf_put64(buf + 56, a->sampled);
    bf_put64(buf + 64, a->lookups);
    bf_put64(buf + 72, a->false_positives);
    bf_put64(buf + 80, A_FLAG_TAGS);
    bf_put64(buf + 88, (uint64_t)a->slice);
    for (uint64_t i = 0; i < a->nslots; i++)
        bf_put64(buf + A_HDR_SIZE + 8 * i, a->slots[i]);
    memcpy(buf + A_HDR_SIZE + 8 * a->nslots, a->tags, a->nslots);
    bf_put64(buf + size - A_TRAILER_SIZE,
             XXH3_64bits(buf, (size_t)size - A_TRAILER_SIZE));
    bf_err err = write(opaque, buf, (size_t)size) ? BF_ERR_IO : BF_OK;
    free(buf);
    return err;
}

/* A damaged or foreign file: the reason into errstr, BF_ERR_FORMAT. */
#define REFUSE(...)                                                            \
    return bf_refuse(BF_ERR_FORMAT, errstr, errstr_size, __VA_ARGS__)

/* The slots as stored: exactly `entries` fingerprints, each reachable by
 * linear probing from its home slot (it lies in the run of full slots
 * that starts at or before its home), and tags (NULL in a file without
 * them) that are 0 in every empty slot and, before any slice (slice -1),
 * in every slot, and otherwise name no slice before 0 (the first slice
 * set is the oldest a set can hold).  One pass, from an empty slot (a
 * set at most 3/4 full has one). */
static bf_err check_slots(const uint8_t *p, const uint8_t *tags,
                          int64_t slice, uint64_t nslots, uint64_t entries,
                          char *errstr, size_t errstr_size)
{
    for (uint64_t i = 0; tags && i < nslots; i++)
        if (tags[i] && (slice < 0 || !bf_getn(p + 8 * i, 8)))
            REFUSE("audit set: slot %llu has tag %u %s",
                   (unsigned long long)i, tags[i],
                   slice < 0 ? "before any slice" : "and no fingerprint");
        else if (tags[i] && tag_slice(slice, tags[i]) < 0)
            REFUSE("audit set: slot %llu has tag %u, a slice before 0 at "
                   "slice %lld", (unsigned long long)i, tags[i],
                   (long long)slice);
    unsigned shift = 64 - log2_of(nslots);
    uint64_t start = 0;
    while (start < nslots && bf_getn(p + 8 * start, 8))
        start++;
    if (start == nslots)
        REFUSE("audit set: no empty slot among %llu",
               (unsigned long long)nslots);
    uint64_t held = 0, run = 0; /* run: full slots just before this one */
    for (uint64_t j = 1; j <= nslots; j++) {
        uint64_t i = (start + j) & (nslots - 1);
        uint64_t fp = bf_getn(p + 8 * i, 8);
        if (!fp) {
            run = 0;
            continue;
        }
        uint64_t dist = (i - home_of(fp, shift)) & (nslots - 1);
        if (dist > run)
            REFUSE("audit set: slot %llu holds a fingerprint its lookup "
                   "cannot reach", (unsigned long long)i);
        run++;
        held++;
    }
    if (held != entries)
        REFUSE("audit set: %llu fingerprints in the slots, the header says "
               "%llu", (unsigned long long)held, (unsigned long long)entries);
    return BF_OK;
}

bf_err bf_audit_load_mem(const void *buf_, size_t len, unsigned flags,
                         bf_audit **out, char *errstr, size_t errstr_size)
{
    const uint8_t *buf = buf_;
    *out = NULL;
    if (flags & BF_LOAD_INPLACE)
        return bf_refuse(BF_ERR_INVALID, errstr, errstr_size,
                         "an audit sample cannot be used in place");
    uint16_t kind;
    bf_err err = bf_format_check_file(buf, len, flags, &kind, errstr,
                                      errstr_size);
    if (err)
        return err;
    if (kind != BF_FORMAT_KIND_AUDIT)
        REFUSE("kind %u where an audit sample (kind %u) was expected", kind,
               BF_FORMAT_KIND_AUDIT);
    if (bf_getn(buf + 8, 2) != BF_FORMAT_VERSION)
        REFUSE("an audit sample of format version %u (only version %u has "
               "them)", (unsigned)bf_getn(buf + 8, 2), BF_FORMAT_VERSION);
    if (len < A_HDR_SIZE + A_TRAILER_SIZE)
        REFUSE("truncated: %zu bytes is too short for an audit header", len);
    uint64_t threshold = bf_getn(buf + 32, 8), nslots = bf_getn(buf + 40, 8);
    uint64_t entries = bf_getn(buf + 48, 8), sampled = bf_getn(buf + 56, 8);
    uint64_t lookups = bf_getn(buf + 64, 8), fps = bf_getn(buf + 72, 8);
    if (threshold < 1 || threshold > A_RATE_ONE)
        REFUSE("audit threshold %llu is outside 1..2^53",
               (unsigned long long)threshold);
    if (nslots < A_MIN_SLOTS || nslots > A_MAX_SLOTS ||
        (nslots & (nslots - 1)))
        REFUSE("audit set of %llu slots: not a power of two in 64..2^40",
               (unsigned long long)nslots);
    /* Without tags (bit 0 of the flags, checked below) a slot is 8 bytes. */
    uint64_t hflags = bf_getn(buf + 80, 8);
    uint64_t slot_bytes = hflags & A_FLAG_TAGS ? A_SLOT_BYTES : 8;
    uint64_t want = A_HDR_SIZE + slot_bytes * nslots + A_TRAILER_SIZE;
    if (len != want)
        REFUSE("audit file of %zu bytes for %llu slots (%llu expected)", len,
               (unsigned long long)nslots, (unsigned long long)want);
    if (entries > max_load(nslots) || fps > lookups || lookups > sampled)
        REFUSE("audit counters out of order: %llu entries in %llu slots, "
               "%llu sampled, %llu lookups, %llu false positives",
               (unsigned long long)entries, (unsigned long long)nslots,
               (unsigned long long)sampled, (unsigned long long)lookups,
               (unsigned long long)fps);
    int64_t slice = (int64_t)bf_getn(buf + 88, 8);
    if (hflags & ~A_FLAG_TAGS)
        REFUSE("audit header: unknown flags %#llx",
               (unsigned long long)(hflags & ~A_FLAG_TAGS));
    if (hflags ? slice < -1 : slice != 0)
        REFUSE("audit header: slice %lld %s", (long long)slice,
               hflags ? "is below -1" : "in a file without tags");
    for (unsigned i = 96; i < A_HDR_SIZE; i++)
        if (buf[i])
            REFUSE("audit header: reserved byte %u is not 0", i);
    /* A file without tags (written before them): every entry is taken as
     * of the first slice set. */
    if (!hflags)
        slice = -1;
    const uint8_t *tags = hflags ? buf + A_HDR_SIZE + 8 * nslots : NULL;
    err = check_slots(buf + A_HDR_SIZE, tags, slice, nslots, entries, errstr,
                      errstr_size);
    if (err)
        return err;
    bf_audit *a = audit_alloc(threshold, bf_getn(buf + 16, 8), nslots);
    if (!a)
        return bf_refuse(BF_ERR_NOMEM, errstr, errstr_size,
                         "out of memory loading an audit set of %llu slots",
                         (unsigned long long)nslots);
    for (uint64_t i = 0; i < nslots; i++)
        a->slots[i] = bf_getn(buf + A_HDR_SIZE + 8 * i, 8);
    a->slice = a->floor = slice;
    if (tags) {
        memcpy(a->tags, tags, nslots);
        for (uint64_t i = 0; slice >= 0 && i < nslots; i++)
            if (a->slots[i] && slice_of_tag(a, a->tags[i]) < a->floor)
                a->floor = slice_of_tag(a, a->tags[i]);
    }
    a->entries = entries;
    a->sampled = sampled;
    a->lookups = lookups;
    a->false_positives = fps;
    *out = a;
    return BF_OK;
}
