/*
 * fuzz_filter_file.c -- libFuzzer target for the serialized filter format
 * (filters/format.c, bf_filter_load_mem): the bytes of a filter file, as
 * blocklists, `bloomstage filter info|query|merge` and checkpoints read
 * them.  The input is a whole filter file; seeds in fuzz/corpus/filter_file/
 * are real ones (fuzz/make-seeds), of format version 2 (lane scheme) and,
 * v1-*.bf, version 1 (distinct probes: copies of tests/data/).
 *
 * Each input is loaded three ways:
 *   1. as given, BF_LOAD_COPY (checksum verified): what the product does;
 *   2. as given, BF_LOAD_COPY | BF_LOAD_NOVERIFY;
 *   3. a 64-byte aligned copy whose trailing checksum is recomputed,
 *      BF_LOAD_INPLACE: so a mutated header still gets past the checksum
 *      and into the structural checks, and the in-place path runs.
 * A filter that loads is queried, and must survive a round trip: its
 * serialization must load back (checksum verified) into a filter that
 * answers every query the same, has the same statistics and serializes to
 * the same bytes, and merge with it answering as before (a windowed filter
 * refuses every merge, and cannot be loaded in place).  A copy-loaded
 * filter then takes a few adds (a scalable one under a 16 MiB cap, as the
 * stage caps its dedup filters) and must round-trip again.
 *
 * The same input is also loaded as an audit sample (bf_audit: kind 5 of
 * the format, which the filter loader refuses), as given and with the
 * checksum made right: one that loads keeps its counters in order and its
 * interval in [0, 1], round-trips to the same bytes,
 * and takes a few checks (a key it now holds is never a false positive)
 * under a 1 MiB cap, then round-trips again, and again after moving on
 * a few slices (its entries only drop).  Any broken promise aborts,
 * which libFuzzer reports as a crash with the input.
 */
#include "fuzz_check.h"
#include <bloomfilters.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* The filter's serialization; a filter that loaded must serialize. */
static bf_membuf serialize(const bf_filter *f)
{
    bf_membuf m = {NULL, 0, 0};
    CHECK(bf_filter_serialize(f, bf_membuf_write, &m) == BF_OK);
    CHECK(m.len == bf_filter_serialized_size(f));
    return m;
}

/* -- comparisons ----------------------------------------------------------- */

static bool same_double(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

static void check_same_info(const bf_info *a, const bf_info *b)
{
    CHECK(a->kind == b->kind);
    CHECK(a->hash_id == b->hash_id);
    CHECK(a->seed == b->seed);
    CHECK(a->capacity == b->capacity);
    CHECK(same_double(a->fpr_target, b->fpr_target));
    CHECK(a->k == b->k);
    CHECK(a->scheme == b->scheme);
    CHECK(a->layers == b->layers);
    CHECK(a->cells == b->cells);
    CHECK(a->bytes == b->bytes);
    CHECK(a->inserts == b->inserts);
    CHECK(a->cells_set == b->cells_set);
    CHECK(same_double(a->fill, b->fill));
    CHECK(same_double(a->est_keys, b->est_keys));
    CHECK(same_double(a->est_fpr, b->est_fpr));
}

/* Keys to ask about: slices of the input, so the fuzzer can steer them
 * onto set bits, plus a fixed few. */
#define NKEYS 8

static void keys_of(const uint8_t *data, size_t size, const void *key[NKEYS],
                    size_t len[NKEYS])
{
    static const char *const fixed[] = {"", "a", "user-42"};
    size_t i = 0;
    for (; i < 3; i++) {
        key[i] = fixed[i];
        len[i] = strlen(fixed[i]);
    }
    for (size_t off = 0; i < NKEYS; i++, off += 13) {
        key[i] = data + (off < size ? off : size);
        len[i] = off < size ? (size - off < 16 ? size - off : 16) : 0;
    }
}

/* What f says about every key, and about its hashes in one batch; the
 * lane scheme's scalar code must say the same as its AVX2 code (when the
 * CPU has AVX2; bf_simd_use). */
static void query(const bf_filter *f, const void *const key[NKEYS],
                  const size_t len[NKEYS], bool out[NKEYS])
{
    uint64_t seed = bf_filter_seed(f);
    const char *simd = bf_simd_name();
    for (size_t i = 0; i < NKEYS; i++) {
        bf_hash h = bf_hash_key(key[i], len[i], seed);
        bf_filter_prefetch_h(f, h);
        out[i] = bf_filter_contains(f, key[i], len[i]);
        CHECK(out[i] == bf_filter_contains_h(f, h));
        CHECK(bf_simd_use("scalar"));
        CHECK(out[i] == bf_filter_contains_h(f, h));
        CHECK(bf_simd_use(simd));
    }
}

/* A load of what was just serialized: refused, it is a broken promise. */
static void loads_back(bf_err e, const char *what, const char *err)
{
    if (e == BF_OK)
        return;
    fprintf(stderr, "fuzz_filter_file: %s's own serialization does not "
                    "load: %s\n", what, err);
    abort();
}

/* serialize(f) loads back into a filter equal to f in every way asked. */
static void round_trip(bf_filter *f, const void *const key[NKEYS],
                       const size_t len[NKEYS])
{
    bf_membuf m1 = serialize(f);
    bf_filter *g = NULL;
    char err[256];
    loads_back(bf_filter_load_mem(m1.buf, m1.len, BF_LOAD_COPY, &g, err,
                                  sizeof err),
               "a filter", err);
    bf_info a, b;
    bf_filter_info(f, &a);
    bf_filter_info(g, &b);
    check_same_info(&a, &b);
    bool qa[NKEYS], qb[NKEYS];
    query(f, key, len, qa);
    query(g, key, len, qb);
    CHECK(memcmp(qa, qb, sizeof qa) == 0);
    bf_membuf m2 = serialize(g);
    CHECK(m1.len == m2.len && memcmp(m1.buf, m2.buf, m1.len) == 0);
    /* The union with an equal filter changes no answer; windowed filters
     * have no union. */
    if (bf_filter_kind(f) == BF_KIND_WINDOWED)
        CHECK(bf_filter_merge(g, f, err, sizeof err) == BF_ERR_INCOMPATIBLE);
    else
        CHECK(bf_filter_merge(g, f, err, sizeof err) == BF_OK);
    query(g, key, len, qb);
    CHECK(memcmp(qa, qb, sizeof qa) == 0);
    free(m1.buf);
    free(m2.buf);
    bf_filter_destroy(g);
}

static void exercise(bf_filter *f, bool writable, const uint8_t *data,
                     size_t size)
{
    const void *key[NKEYS];
    size_t len[NKEYS];
    keys_of(data, size, key, len);

    bf_info info;
    bf_filter_info(f, &info);
    CHECK(info.kind == bf_filter_kind(f));
    bf_scalable *sb = bf_filter_scalable(f);
    if (sb) {
        for (uint32_t i = 0; i < bf_scalable_layers(sb); i++) {
            bf_info li;
            CHECK(bf_scalable_layer_info(sb, i, &li));
        }
        bf_scalable_params p;
        bf_scalable_params_get(sb, &p);
    }
    bf_windowed *wf = bf_filter_windowed(f);
    if (wf) {
        bf_generation_info g;
        for (uint32_t i = 0; i < bf_windowed_generations(wf); i++)
            CHECK(bf_windowed_generation_info(wf, i, &g));
        CHECK(!bf_windowed_generation_info(wf, bf_windowed_generations(wf),
                                           &g));
    }
    bf_counting *cf = bf_filter_counting(f);
    if (cf) {
        (void)bf_counting_saturated(cf);
        for (size_t i = 0; i < NKEYS; i++)
            (void)bf_counting_min_count_h(
                cf, bf_hash_key(key[i], len[i], bf_filter_seed(f)));
    }
    round_trip(f, key, len);

    if (!writable) {
        CHECK(bf_filter_add(f, "x", 1) == -(int)BF_ERR_READONLY);
        return;
    }
    if (sb)
        bf_scalable_set_max_bytes(sb, (uint64_t)16 << 20);
    if (wf) {
        bf_windowed_set_max_bytes(wf, (uint64_t)16 << 20);
        /* Time moves on by a slice and a window: generations go. */
        bf_windowed_params wp;
        bf_windowed_params_get(wf, &wp);
        int64_t t = bf_windowed_stream_time(wf);
        if (t < INT64_MAX / 4 && wp.window < INT64_MAX / 4) {
            (void)bf_windowed_advance(wf, t + wp.window / wp.generations);
            CHECK(bf_windowed_stream_time(wf) >= t);
            if (size && data[0] & 1)
                (void)bf_windowed_advance(wf, t + 2 * wp.window);
        }
    }
    for (size_t i = 0; i < NKEYS; i++) {
        int r = bf_filter_add(f, key[i], len[i]);
        /* Only a scalable or windowed filter can refuse (a layer or a
         * generation it cannot make). */
        CHECK(r == 0 || r == 1 || ((sb || wf) && r == -(int)BF_ERR_NOMEM));
        if (r >= 0)
            CHECK(bf_filter_contains(f, key[i], len[i]));
    }
    if (cf) {
        /* Removing what was just added leaves no false negative behind
         * for keys added twice. */
        CHECK(bf_filter_add(f, key[0], len[0]) >= 0);
        CHECK(bf_counting_remove(cf, key[0], len[0]));
        CHECK(bf_filter_contains(f, key[0], len[0]));
    }
    round_trip(f, key, len);
}

/* -- the audit sample ------------------------------------------------------ */

static bf_membuf audit_serialize(const bf_audit *a)
{
    bf_membuf m = {NULL, 0, 0};
    CHECK(bf_audit_serialize(a, bf_membuf_write, &m) == BF_OK);
    CHECK(m.len == bf_audit_serialized_size(a));
    return m;
}

static void audit_round_trip(const bf_audit *a)
{
    char err[256];
    bf_audit *b = NULL;
    bf_membuf m1 = audit_serialize(a);
    loads_back(bf_audit_load_mem(m1.buf, m1.len, BF_LOAD_COPY, &b, err,
                                 sizeof err),
               "an audit sample", err);
    /* The file holds the sample's whole state (its cap aside), so the
     * same bytes back mean the same sample. */
    CHECK(bf_audit_seed(a) == bf_audit_seed(b));
    bf_membuf m2 = audit_serialize(b);
    CHECK(m1.len == m2.len && memcmp(m1.buf, m2.buf, m1.len) == 0);
    free(m1.buf);
    free(m2.buf);
    bf_audit_destroy(b);
}

static void exercise_audit(bf_audit *a, const uint8_t *data, size_t size)
{
    bf_audit_stats st;
    bf_audit_stats_get(a, &st);
    CHECK(st.false_positives <= st.lookups && st.lookups <= st.sampled);
    CHECK(0 <= st.lo && st.lo <= st.hi && st.hi <= 1);
    CHECK(st.rate > 0 && st.rate <= 1);
    audit_round_trip(a);
    const void *key[NKEYS];
    size_t len[NKEYS];
    keys_of(data, size, key, len);
    bf_audit_set_max_bytes(a, (uint64_t)1 << 20);
    for (size_t i = 0; i < NKEYS; i++) {
        bf_hash h = bf_hash_key(key[i], len[i], bf_audit_seed(a));
        int r = bf_audit_check(a, h, true);
        CHECK(r == 0 || r == 1 || r == -(int)BF_ERR_NOMEM);
        CHECK(r != 1 || bf_audit_sampled(a, h));
        if (r >= 0 && bf_audit_sampled(a, h))
            CHECK(bf_audit_check(a, h, true) == 0);
    }
    audit_round_trip(a);
    /* On by 1..8 slices, keeping the last 0..4 (a window's forgetting):
     * entries only drop, the slice moves, and it still round-trips. */
    bf_audit_stats_get(a, &st);
    if (bf_audit_slice(a) > INT64_MAX - 16)
        return;
    int64_t s = bf_audit_slice(a) + 1 + (size ? data[0] % 8 : 0);
    bf_audit_set_slice(a, s, s - (size > 1 ? data[1] % 5 : 0));
    bf_audit_stats after;
    bf_audit_stats_get(a, &after);
    CHECK(after.entries <= st.entries && bf_audit_slice(a) == s);
    CHECK(after.lookups == st.lookups && after.sampled == st.sampled);
    audit_round_trip(a);
}

/* buf[0..size) loaded as an audit sample: exercised if it loads, else
 * refused with a reason.  The keys come from the fuzzer's data. */
static void load_audit(const uint8_t *buf, const uint8_t *data, size_t size)
{
    char err[512];
    bf_audit *a = NULL;
    if (bf_audit_load_mem(buf, size, BF_LOAD_COPY, &a, err, sizeof err) !=
        BF_OK) {
        CHECK(a == NULL && err[0] != '\0');
        return;
    }
    exercise_audit(a, data, size);
    bf_audit_destroy(a);
}

/* The input as an audit sample: as given, and with its checksum made
 * right so a mutated header reaches the structural checks. */
static void try_audit(const uint8_t *data, size_t size)
{
    load_audit(data, data, size);
    if (size < 8)
        return;
    uint8_t *copy = malloc(size);
    CHECK(copy != NULL);
    memcpy(copy, data, size);
    uint64_t sum = XXH3_64bits(copy, size - 8);
    for (int i = 0; i < 8; i++)
        copy[size - 8 + i] = (uint8_t)(sum >> (8 * i));
    load_audit(copy, data, size);
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512];
    bf_filter *f = NULL;

    /* 1. As the product loads a file into memory. */
    if (bf_filter_load_mem(data, size, BF_LOAD_COPY, &f, err, sizeof err) ==
        BF_OK) {
        exercise(f, true, data, size);
        bf_filter_destroy(f);
    } else {
        CHECK(f == NULL && err[0] != '\0');
    }

    /* 2. Without the checksum. */
    if (bf_filter_load_mem(data, size, BF_LOAD_COPY | BF_LOAD_NOVERIFY, &f,
                           err, sizeof err) == BF_OK) {
        exercise(f, true, data, size);
        bf_filter_destroy(f);
    } else {
        CHECK(f == NULL && err[0] != '\0');
    }

    /* 3. In place, in an aligned copy with the checksum made right. */
    uint8_t *copy = aligned_alloc(64, (size + 63) / 64 * 64 + 64);
    CHECK(copy != NULL);
    if (size)
        memcpy(copy, data, size);
    if (size >= 8) {
        uint64_t sum = XXH3_64bits(copy, size - 8);
        for (int i = 0; i < 8; i++)
            copy[size - 8 + i] = (uint8_t)(sum >> (8 * i));
    }
    if (bf_filter_load_mem(copy, size, BF_LOAD_INPLACE, &f, err,
                           sizeof err) == BF_OK) {
        exercise(f, false, data, size);
        bf_filter_destroy(f);
    } else {
        CHECK(f == NULL && err[0] != '\0');
    }
    free(copy);

    /* 4. As an audit sample. */
    try_audit(data, size);
    return 0;
}
