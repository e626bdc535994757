/*
 * test_format.c -- the serialized filter format (bloomfilters.h, version 2;
 * version 1's files: test_legacy_files.c):
 * round trips and damage.
 *
 * What must hold:
 *   - every kind round-trips through memory (BF_LOAD_COPY, BF_LOAD_INPLACE on
 *     a 64-byte aligned buffer) and through files (bf_filter_save_file /
 *     bf_filter_load_file, copy and mmap): the loaded filter answers exactly
 *     as the original, has the same info, re-serializes to the same bytes,
 *     and (copied) keeps evolving exactly like the original; an in-place
 *     filter refuses writes with -BF_ERR_READONLY / BF_ERR_READONLY;
 *   - the bytes follow the documented layout: a writer written here from the
 *     documentation alone produces the library's bytes exactly, and its
 *     files load;
 *   - damage is rejected with the right code and an errstr naming it:
 *     truncation at every length up to the header and beyond ("truncated" or
 *     "size"), every single-bit flip in the header, a sample in the data, all
 *     of the trailer ("checksum" for data and trailer), wrong magic
 *     ("magic"), future version (BF_ERR_VERSION, "version"), kind, hash id,
 *     sizes that do not add up, layer counts, and absurd sizes (nblocks 2^60,
 *     offsets near 2^64, 65 layers) -- forged with the checksum recomputed
 *     (XXH3-64, seed 0, over all bytes but the last 8) so the structural
 *     check itself is reached, and again with BF_LOAD_NOVERIFY;
 *   - absurd sizes fail with BF_ERR_FORMAT before any allocation (never
 *     BF_ERR_NOMEM; under ASan a 2^66-byte request would abort the test);
 *   - nothing crashes: run under ASan/UBSan, every load goes through a
 *     buffer of exactly the given length.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* mkdtemp, posix_memalign */
#endif
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "bloomfilters.h"
#include "keys.h"

#define SEED UINT64_C(0xf0f0e1e1d2d2c3c3)
#define NKINDS 3

static const bf_kind kinds[NKINDS] = {BF_KIND_BLOCKED, BF_KIND_SCALABLE,
                                      BF_KIND_COUNTING};

/* ------------------------------------------------------------------------ */
/* Building filters and buffers                                              */

/* A small filter of each kind with keys [0, 3000) in it.  The scalable one
 * has 4 layers; the counting one has a few removals and a saturated key. */
static bf_filter *make_filter(bf_kind kind)
{
    char err[256] = "";
    bf_filter *f = NULL;
    switch (kind) {
    case BF_KIND_BLOCKED:
        f = bf_filter_from_blocked(
            bf_blocked_new(4000, 1e-3, SEED, err, sizeof err));
        break;
    case BF_KIND_SCALABLE: {
        bf_scalable_params p;
        bf_scalable_params_default(&p);
        p.initial_capacity = 250;
        p.fpr = 1e-3;
        p.growth = 2.0;
        p.tightening = 0.8;
        p.seed = SEED;
        f = bf_filter_from_scalable(bf_scalable_new(&p, err, sizeof err));
        break;
    }
    case BF_KIND_COUNTING:
        f = bf_filter_from_counting(
            bf_counting_new(4000, 1e-2, SEED, err, sizeof err));
        break;
    case BF_KIND_WINDOWED: /* its own format tests: test_windowed.c */
        break;
    }
    if (!f)
        fail_msg("cannot build a %s filter: %s", bf_kind_name(kind), err);
    for (uint64_t i = 0; i < 3000; i++) {
        unsigned char key[8];
        key_u64(i, key);
        int rc = bf_filter_add(f, key, 8);
        assert_true(rc == 0 || rc == 1);
    }
    if (kind == BF_KIND_COUNTING) {
        bf_counting *cf = bf_filter_counting(f);
        for (int j = 0; j < 20; j++)
            bf_counting_add(cf, "hot", 3);
        for (uint64_t i = 2900; i < 3000; i++) {
            unsigned char key[8];
            key_u64(i, key);
            assert_true(bf_counting_remove(cf, key, 8));
        }
        assert_true(bf_counting_saturated(cf) > 0);
    }
    if (kind == BF_KIND_SCALABLE)
        assert_int_equal(bf_scalable_layers(bf_filter_scalable(f)), 4);
    return f;
}

static keys_membuf serialize(const bf_filter *f)
{
    keys_membuf m = {0};
    assert_int_equal(keys_serialize(f, &m), BF_OK);
    assert_int_equal(m.len, bf_filter_serialized_size(f));
    return m;
}

/* A copy of buf[0..len) in memory of exactly len bytes (so ASan sees any
 * read past the end), 64-byte aligned (so BF_LOAD_INPLACE may use it). */
static unsigned char *exact_copy(const unsigned char *buf, size_t len)
{
    void *p = NULL;
    assert_int_equal(posix_memalign(&p, 64, len ? len : 1), 0);
    if (len)
        memcpy(p, buf, len);
    return p;
}

static uint32_t layer_count(const unsigned char *buf)
{
    return (uint32_t)keys_get_le(buf + KEYS_OFF_LAYERS, 4);
}

static uint64_t header_size(const unsigned char *buf)
{
    return keys_get_le(buf + KEYS_OFF_HEADER_SIZE, 4);
}

/* Either BF_ERR_FORMAT or BF_ERR_VERSION (a damaged version field). */
#define FORMAT_OR_VERSION ((bf_err)-1)

/* Loads buf[0..len) (through an exact copy) and expects failure with `code`
 * and an errstr containing one of the NULL-terminated words.  With flags
 * BF_LOAD_INPLACE the copy stays alive while the result is inspected. */
static void expect_load_fails(const unsigned char *buf, size_t len,
                              unsigned flags, bf_err code, const char *what,
                              ...)
{
    unsigned char *copy = exact_copy(buf, len);
    bf_filter *f = (bf_filter *)(uintptr_t)1;
    char err[512];
    memset(err, 0, sizeof err);
    bf_err rc = bf_filter_load_mem(copy, len, flags, &f, err, sizeof err);
    if (rc == BF_OK) {
        bf_filter_destroy(f);
        free(copy);
        fail_msg("%s (len %zu, flags %u): loaded, want error %d", what, len,
                 flags, (int)code);
    }
    if (rc != code && !(code == FORMAT_OR_VERSION &&
                        (rc == BF_ERR_FORMAT || rc == BF_ERR_VERSION))) {
        free(copy);
        fail_msg("%s (len %zu, flags %u): error %d (%s), want %d", what, len,
                 flags, (int)rc, err, (int)code);
    }
    if (getenv("BF_TEST_VERBOSE"))
        print_message("[  REASON  ] %s (len %zu, flags %u): %d \"%s\"\n", what,
                      len, flags, (int)rc, err);
    va_list ap;
    va_start(ap, what);
    bool found = false, any = false;
    for (const char *w = va_arg(ap, const char *); w;
         w = va_arg(ap, const char *)) {
        any = true;
        if (keys_icontains(err, w))
            found = true;
    }
    va_end(ap);
    free(copy);
    if (strlen(err) == 0)
        fail_msg("%s (len %zu, flags %u): no reason in errstr", what, len,
                 flags);
    if (any && !found)
        fail_msg("%s (len %zu, flags %u): errstr \"%s\" does not say what",
                 what, len, flags, err);
}

/* ------------------------------------------------------------------------ */
/* Round trips                                                               */

static void expect_same_info(const bf_info *a, const bf_info *b)
{
    assert_int_equal(a->kind, b->kind);
    assert_int_equal(a->hash_id, b->hash_id);
    assert_true(a->seed == b->seed);
    assert_int_equal(a->capacity, b->capacity);
    assert_true(a->fpr_target == b->fpr_target);
    assert_int_equal(a->k, b->k);
    assert_int_equal(a->layers, b->layers);
    assert_int_equal(a->cells, b->cells);
    assert_int_equal(a->bytes, b->bytes);
    assert_int_equal(a->inserts, b->inserts);
    assert_int_equal(a->cells_set, b->cells_set);
    assert_true(a->fill == b->fill);
    assert_true(a->est_keys == b->est_keys);
    assert_true(a->est_fpr == b->est_fpr);
}

/* The loaded filter `g` is `f` again: info, answers, bytes, kind details. */
static void expect_same_filter(const bf_filter *f, const bf_filter *g)
{
    bf_info a, b;
    bf_filter_info(f, &a);
    bf_filter_info(g, &b);
    expect_same_info(&a, &b);
    assert_int_equal(bf_filter_kind(f), bf_filter_kind(g));
    assert_true(bf_filter_seed(f) == bf_filter_seed(g));
    for (uint64_t i = 0; i < 3000; i++) {
        unsigned char key[8];
        key_u64(i, key);
        assert_int_equal(bf_filter_contains(f, key, 8),
                         bf_filter_contains(g, key, 8));
    }
    uint64_t fp = 0;
    for (uint64_t i = KEYS_ABSENT_BASE; i < KEYS_ABSENT_BASE + 50000; i++) {
        unsigned char key[8];
        key_u64(i, key);
        bool c = bf_filter_contains(f, key, 8);
        assert_int_equal(c, bf_filter_contains(g, key, 8));
        assert_int_equal(c, bf_filter_contains_h(g, bf_hash_key(key, 8, SEED)));
        fp += c;
    }
    assert_true(fp > 0); /* false positives are reproduced too */
    keys_membuf m1 = serialize(f), m2 = serialize(g);
    assert_int_equal(m1.len, m2.len);
    assert_memory_equal(m1.data, m2.data, m1.len);
    keys_membuf_free(&m1);
    keys_membuf_free(&m2);
    if (bf_filter_kind(f) == BF_KIND_SCALABLE) {
        bf_scalable_params p, q;
        bf_scalable_params_get(bf_filter_scalable((bf_filter *)f), &p);
        bf_scalable_params_get(bf_filter_scalable((bf_filter *)g), &q);
        assert_int_equal(p.initial_capacity, q.initial_capacity);
        assert_true(p.fpr == q.fpr);
        assert_true(p.growth == q.growth);
        assert_true(p.tightening == q.tightening);
        assert_true(p.seed == q.seed);
        for (uint32_t l = 0; l < a.layers; l++) {
            bf_info la, lb;
            assert_true(bf_scalable_layer_info(
                bf_filter_scalable((bf_filter *)f), l, &la));
            assert_true(bf_scalable_layer_info(
                bf_filter_scalable((bf_filter *)g), l, &lb));
            expect_same_info(&la, &lb);
        }
    }
    if (bf_filter_kind(f) == BF_KIND_COUNTING) {
        bf_counting *cf = bf_filter_counting((bf_filter *)f);
        bf_counting *cg = bf_filter_counting((bf_filter *)g);
        assert_int_equal(bf_counting_saturated(cf), bf_counting_saturated(cg));
        bf_hash h = bf_hash_key("hot", 3, SEED);
        assert_int_equal(bf_counting_min_count_h(cf, h),
                         bf_counting_min_count_h(cg, h));
    }
}

/* Adds the same new keys to both: same answers, same bytes after (the
 * loaded filter carries all the state the original grows with). */
static void expect_same_evolution(bf_filter *f, bf_filter *g)
{
    for (uint64_t i = 3000; i < 12000; i++) {
        unsigned char key[8];
        key_u64(i, key);
        int r1 = bf_filter_add(f, key, 8), r2 = bf_filter_add(g, key, 8);
        assert_int_equal(r1, r2);
        assert_true(r1 == 0 || r1 == 1);
    }
    if (bf_filter_kind(f) == BF_KIND_COUNTING) {
        for (uint64_t i = 0; i < 1000; i++) {
            unsigned char key[8];
            key_u64(i, key);
            assert_true(bf_counting_remove(bf_filter_counting(f), key, 8));
            assert_true(bf_counting_remove(bf_filter_counting(g), key, 8));
        }
    }
    keys_membuf m1 = serialize(f), m2 = serialize(g);
    assert_int_equal(m1.len, m2.len);
    assert_memory_equal(m1.data, m2.data, m1.len);
    keys_membuf_free(&m1);
    keys_membuf_free(&m2);
}

/* An in-place filter refuses every write and stays as it was. */
static void expect_readonly(bf_filter *g, const unsigned char *buf, size_t len)
{
    unsigned char *before = exact_copy(buf, len);
    for (uint64_t i = 0; i < 100; i++) {
        unsigned char key[8];
        key_u64(KEYS_ABSENT_BASE + 77 * i, key);
        assert_int_equal(bf_filter_add(g, key, 8), -BF_ERR_READONLY);
    }
    unsigned char key[8];
    key_u64(5, key); /* present: still refused or 0, never a change */
    int rc = bf_filter_add(g, key, 8);
    assert_true(rc == -BF_ERR_READONLY || rc == 0);
    bf_filter *src = make_filter(bf_filter_kind(g));
    char err[256] = "";
    assert_int_equal(bf_filter_merge(g, src, err, sizeof err), BF_ERR_READONLY);
    assert_true(strlen(err) > 0);
    bf_filter_destroy(src);
    assert_memory_equal(before, buf, len);
    free(before);
}

static void test_round_trip_memory(void **state)
{
    (void)state;
    for (int ki = 0; ki < NKINDS; ki++) {
        bf_filter *f = make_filter(kinds[ki]);
        keys_membuf m = serialize(f);
        char err[256];

        /* Copy: the buffer can go right after. */
        unsigned char *buf = exact_copy(m.data, m.len);
        bf_filter *g = NULL;
        err[0] = '\0';
        if (bf_filter_load_mem(buf, m.len, BF_LOAD_COPY, &g, err, sizeof err) !=
            BF_OK)
            fail_msg("%s: load copy: %s", bf_kind_name(kinds[ki]), err);
        memset(buf, 0xa5, m.len);
        free(buf);
        expect_same_filter(f, g);

        /* In place, from a 64-byte aligned buffer. */
        buf = exact_copy(m.data, m.len);
        bf_filter *h = NULL;
        if (bf_filter_load_mem(buf, m.len, BF_LOAD_INPLACE, &h, err,
                               sizeof err) != BF_OK)
            fail_msg("%s: load in place: %s", bf_kind_name(kinds[ki]), err);
        expect_same_filter(f, h);
        expect_readonly(h, buf, m.len);
        expect_same_filter(f, h);

        /* Without the checksum check, an intact buffer loads the same. */
        bf_filter *n = NULL;
        assert_int_equal(bf_filter_load_mem(m.data, m.len,
                                            BF_LOAD_COPY | BF_LOAD_NOVERIFY, &n,
                                            err, sizeof err),
                         BF_OK);
        expect_same_filter(f, n);
        bf_filter_destroy(n);

        /* A loaded copy evolves like the original. */
        expect_same_evolution(f, g);
        bf_filter_destroy(h);
        free(buf);
        bf_filter_destroy(g);
        bf_filter_destroy(f);
        keys_membuf_free(&m);
    }
}

/* An empty filter of each kind round-trips too. */
/* The prefetch hint of every kind (and of each kind directly) leaves the
 * filter byte for byte as it was, for keys present and absent: a prefetch
 * that wrote (a write-intent fetch gone wrong, a counter touched) would
 * show in the serialized bytes. */
static void test_prefetch_changes_nothing(void **state)
{
    (void)state;
    for (int i = 0; i < NKINDS; i++) {
        bf_filter *f = make_filter(kinds[i]);
        keys_membuf before = serialize(f);
        for (uint64_t j = 0; j < 6000; j++) {
            unsigned char key[8];
            key_u64(j, key);
            bf_hash h = bf_hash_key(key, 8, SEED);
            bf_filter_prefetch_h(f, h);
            if (bf_filter_blocked(f))
                bf_blocked_prefetch_h(bf_filter_blocked(f), h);
            if (bf_filter_scalable(f))
                bf_scalable_prefetch_h(bf_filter_scalable(f), h);
            if (bf_filter_counting(f))
                bf_counting_prefetch_h(bf_filter_counting(f), h);
        }
        keys_membuf after = serialize(f);
        assert_int_equal(after.len, before.len);
        if (memcmp(after.data, before.data, before.len) != 0)
            fail_msg("%s: prefetching changed the filter",
                     bf_kind_name(kinds[i]));
        keys_membuf_free(&before);
        keys_membuf_free(&after);
        bf_filter_destroy(f);
    }
}

static void test_round_trip_empty(void **state)
{
    (void)state;
    char err[256];
    bf_scalable_params p;
    bf_scalable_params_default(&p);
    p.initial_capacity = 10;
    bf_filter *fs[NKINDS] = {
        bf_filter_from_blocked(
            bf_blocked_new_geometry(1, 1, 0, err, sizeof err)),
        bf_filter_from_scalable(bf_scalable_new(&p, err, sizeof err)),
        bf_filter_from_counting(
            bf_counting_new(1, 0.5, UINT64_MAX, err, sizeof err)),
    };
    for (int ki = 0; ki < NKINDS; ki++) {
        assert_non_null(fs[ki]);
        keys_membuf m = serialize(fs[ki]);
        unsigned char *buf = exact_copy(m.data, m.len);
        for (unsigned flags = 0; flags < 4; flags++) {
            bf_filter *g = NULL;
            assert_int_equal(
                bf_filter_load_mem(buf, m.len, flags, &g, err, sizeof err),
                BF_OK);
            bf_info a, b;
            bf_filter_info(fs[ki], &a);
            bf_filter_info(g, &b);
            expect_same_info(&a, &b);
            assert_false(bf_filter_contains(g, "x", 1));
            bf_filter_destroy(g);
        }
        free(buf);
        keys_membuf_free(&m);
        bf_filter_destroy(fs[ki]);
    }
}

static void test_serialize_write_failure(void **state)
{
    (void)state;
    for (int ki = 0; ki < NKINDS; ki++) {
        bf_filter *f = make_filter(kinds[ki]);
        uint64_t total = bf_filter_serialized_size(f);
        const size_t cuts[] = {1,
                               8,
                               63,
                               64,
                               65,
                               200,
                               (size_t)total / 2,
                               (size_t)total - 8,
                               (size_t)total - 1};
        for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
            keys_membuf m = {0};
            m.fail_after = cuts[c];
            assert_int_equal(bf_filter_serialize(f, keys_membuf_write, &m),
                             BF_ERR_IO);
            keys_membuf_free(&m);
        }
        bf_filter_destroy(f);
    }
}

/* ------------------------------------------------------------------------ */
/* Files                                                                     */

static char tmpdir[256];

static int setup_tmpdir(void **state)
{
    (void)state;
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/bf_test_format.XXXXXX",
             base && *base ? base : "/tmp");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_tmpdir(void **state)
{
    (void)state;
    DIR *d = opendir(tmpdir);
    if (d) {
        struct dirent *e;
        char path[512];
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            snprintf(path, sizeof path, "%s/%s", tmpdir, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(tmpdir);
    return 0;
}

/* Names in tmpdir, sorted into one string, for "nothing else left behind". */
static int dir_entries(char *out, size_t cap)
{
    DIR *d = opendir(tmpdir);
    assert_non_null(d);
    int n = 0;
    out[0] = '\0';
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        n++;
        strncat(out, e->d_name, cap - strlen(out) - 2);
        strcat(out, " ");
    }
    closedir(d);
    return n;
}

static void write_bytes(const char *path, const unsigned char *buf, size_t len)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(buf, 1, len, fp), len);
    assert_int_equal(fclose(fp), 0);
}

static void test_save_load_file(void **state)
{
    (void)state;
    char path[512], err[512], names[1024];
    for (int ki = 0; ki < NKINDS; ki++) {
        bf_filter *f = make_filter(kinds[ki]);
        snprintf(path, sizeof path, "%s/%s.bf", tmpdir,
                 bf_kind_name(kinds[ki]));
        err[0] = '\0';
        if (bf_filter_save_file(f, path, err, sizeof err) != BF_OK)
            fail_msg("save %s: %s", path, err);
        /* Only the file itself is left in the directory. */
        assert_int_equal(dir_entries(names, sizeof names), ki + 1);
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal((uint64_t)st.st_size, bf_filter_serialized_size(f));

        /* The file holds exactly the serialized bytes. */
        keys_membuf m = serialize(f);
        FILE *fp = fopen(path, "rb");
        assert_non_null(fp);
        unsigned char *fb = malloc(m.len);
        assert_int_equal(fread(fb, 1, m.len, fp), m.len);
        fclose(fp);
        assert_memory_equal(fb, m.data, m.len);
        free(fb);

        bf_filter *g = NULL, *h = NULL;
        if (bf_filter_load_file(path, BF_LOAD_COPY, &g, err, sizeof err) !=
            BF_OK)
            fail_msg("load %s: %s", path, err);
        expect_same_filter(f, g);
        if (bf_filter_load_file(path, BF_LOAD_INPLACE, &h, err, sizeof err) !=
            BF_OK)
            fail_msg("load in place %s: %s", path, err);
        expect_same_filter(f, h);
        unsigned char key[8];
        key_u64(KEYS_ABSENT_BASE + 3, key);
        assert_int_equal(bf_filter_add(h, key, 8), -BF_ERR_READONLY);
        bf_filter *src = make_filter(kinds[ki]);
        assert_int_equal(bf_filter_merge(h, src, err, sizeof err),
                         BF_ERR_READONLY);
        bf_filter_destroy(src);
        expect_same_filter(f, h);
        expect_same_evolution(f, g);

        /* Saving over an existing file replaces it (with the evolved f). */
        bf_info hold, hnew;
        bf_filter_info(h, &hold);
        if (bf_filter_save_file(f, path, err, sizeof err) != BF_OK)
            fail_msg("save again %s: %s", path, err);
        assert_int_equal(dir_entries(names, sizeof names), ki + 1);
        /* The mapping of the old file is untouched: the rename replaced the
         * name, not the bytes under it. */
        bf_filter_info(h, &hnew);
        expect_same_info(&hold, &hnew);
        bf_filter *g2 = NULL;
        assert_int_equal(
            bf_filter_load_file(path, BF_LOAD_COPY, &g2, err, sizeof err),
            BF_OK);
        expect_same_filter(f, g2);
        bf_filter_destroy(g2);
        bf_filter_destroy(h);
        bf_filter_destroy(g);
        bf_filter_destroy(f);
        keys_membuf_free(&m);
    }

    /* A missing file, a missing directory: BF_ERR_IO naming the path. */
    bf_filter *g = NULL;
    snprintf(path, sizeof path, "%s/no-such-file.bf", tmpdir);
    err[0] = '\0';
    assert_int_equal(
        bf_filter_load_file(path, BF_LOAD_COPY, &g, err, sizeof err),
        BF_ERR_IO);
    assert_non_null(strstr(err, path));
    err[0] = '\0';
    assert_int_equal(
        bf_filter_load_file(path, BF_LOAD_INPLACE, &g, err, sizeof err),
        BF_ERR_IO);
    assert_non_null(strstr(err, path));
    bf_filter *f = make_filter(BF_KIND_BLOCKED);
    snprintf(path, sizeof path, "%s/no-such-dir/x.bf", tmpdir);
    err[0] = '\0';
    assert_int_equal(bf_filter_save_file(f, path, err, sizeof err), BF_ERR_IO);
    assert_non_null(strstr(err, "no-such-dir"));

    /* Damaged files: BF_ERR_FORMAT naming the path and what is wrong. */
    keys_membuf m = serialize(f);
    const struct {
        size_t len;
        int flip; /* byte to flip, or -1 */
        const char *word;
    } bad[] = {{0, -1, NULL},
               {40, -1, NULL},
               {m.len - 1, -1, NULL},
               {m.len, 0, "magic"},
               {m.len, (int)m.len - 20, "checksum"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        unsigned char *d = exact_copy(m.data, m.len);
        if (bad[i].flip >= 0)
            d[bad[i].flip] ^= 0x40;
        snprintf(path, sizeof path, "%s/damaged.bf", tmpdir);
        write_bytes(path, d, bad[i].len);
        free(d);
        for (unsigned flags = 0; flags < 2; flags++) {
            err[0] = '\0';
            g = NULL;
            bf_err rc = bf_filter_load_file(path, flags, &g, err, sizeof err);
            if (rc != BF_ERR_FORMAT)
                fail_msg("damaged file #%zu flags %u: %d (%s)", i, flags,
                         (int)rc, err);
            assert_non_null(strstr(err, path));
            if (bad[i].word)
                assert_true(keys_icontains(err, bad[i].word));
            else
                assert_true(keys_errstr_has_any(err, "truncated", "size",
                                                (const char *)NULL));
        }
        unlink(path);
    }
    /* A directory is not a filter file. */
    err[0] = '\0';
    assert_int_not_equal(
        bf_filter_load_file(tmpdir, BF_LOAD_COPY, &g, err, sizeof err), BF_OK);
    assert_true(strlen(err) > 0);
    keys_membuf_free(&m);
    bf_filter_destroy(f);
}

/* ------------------------------------------------------------------------ */
/* The documented layout                                                     */

typedef struct forge_layer {
    uint64_t nblocks;
    uint32_t k, block_cells;
    uint64_t capacity;
    double fpr;
    uint64_t inserts, cells_set;
    const unsigned char *data; /* nblocks * 64 bytes, or NULL for zeros */
    uint32_t scheme;           /* BF_SCHEME_*; 0 if left out */
} forge_layer;

static uint64_t dbits(double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}

/* A serialized filter written from the documentation alone. */
static unsigned char *forge(uint16_t kind, uint64_t seed, double P, double s,
                            double r, uint32_t L, const forge_layer *ly,
                            size_t *len_out)
{
    uint64_t H = 64 + 64 * (uint64_t)L, len = H;
    for (uint32_t i = 0; i < L; i++)
        len += ly[i].nblocks * 64;
    len += 8;
    unsigned char *b = calloc(1, len);
    assert_non_null(b);
    memcpy(b + KEYS_OFF_MAGIC, "BLMFLTR\0", 8);
    keys_put_le(b + KEYS_OFF_VERSION, 2, BF_FORMAT_VERSION);
    keys_put_le(b + KEYS_OFF_KIND, 2, kind);
    keys_put_le(b + KEYS_OFF_HASH_ID, 4, BF_HASH_XXH3_128);
    keys_put_le(b + KEYS_OFF_SEED, 8, seed);
    keys_put_le(b + KEYS_OFF_FILE_SIZE, 8, len);
    keys_put_le(b + KEYS_OFF_LAYERS, 4, L);
    keys_put_le(b + KEYS_OFF_HEADER_SIZE, 4, H);
    keys_put_le(b + 40, 8, dbits(P));
    keys_put_le(b + 48, 8, dbits(s));
    keys_put_le(b + 56, 8, dbits(r));
    uint64_t off = H;
    for (uint32_t i = 0; i < L; i++) {
        unsigned char *d = b + keys_desc_off(i);
        uint64_t size = ly[i].nblocks * 64;
        keys_put_le(d + KEYS_D_NBLOCKS, 8, ly[i].nblocks);
        keys_put_le(d + KEYS_D_K, 2, ly[i].k);
        keys_put_le(d + KEYS_D_SCHEME, 2, ly[i].scheme);
        keys_put_le(d + KEYS_D_BLOCK_CELLS, 4, ly[i].block_cells);
        keys_put_le(d + KEYS_D_CAPACITY, 8, ly[i].capacity);
        keys_put_le(d + KEYS_D_FPR, 8, dbits(ly[i].fpr));
        keys_put_le(d + KEYS_D_INSERTS, 8, ly[i].inserts);
        keys_put_le(d + KEYS_D_CELLS_SET, 8, ly[i].cells_set);
        keys_put_le(d + KEYS_D_DATA_OFF, 8, off);
        keys_put_le(d + KEYS_D_DATA_SIZE, 8, size);
        if (ly[i].data)
            memcpy(b + off, ly[i].data, size);
        off += size;
    }
    keys_reseal(b, len);
    *len_out = len;
    return b;
}

/* forge() from a live filter: its info and cell bytes. */
static unsigned char *forge_from(bf_filter *f, const keys_membuf *m,
                                 size_t *len)
{
    forge_layer ly[BF_MAX_LAYERS];
    bf_info info;
    bf_filter_info(f, &info);
    double P = 0, s = 0, r = 0;
    uint32_t L = info.layers;
    for (uint32_t i = 0; i < L; i++) {
        bf_info li = info;
        if (info.kind == BF_KIND_SCALABLE)
            assert_true(bf_scalable_layer_info(bf_filter_scalable(f), i, &li));
        uint32_t B = info.kind == BF_KIND_COUNTING ? BF_COUNTING_BLOCK_CELLS
                                                   : BF_BLOCK_BITS;
        const unsigned char *data = NULL;
        uint64_t size = 0;
        assert_true(keys_layer_data(m->data, m->len, i, &data, &size));
        ly[i] = (forge_layer){li.cells / B, li.k,          B,
                              li.capacity,  li.fpr_target, li.inserts,
                              li.cells_set, data,           li.scheme};
        assert_int_equal(size, ly[i].nblocks * 64);
    }
    if (info.kind == BF_KIND_SCALABLE) {
        bf_scalable_params p;
        bf_scalable_params_get(bf_filter_scalable(f), &p);
        P = p.fpr;
        s = p.growth;
        r = p.tightening;
    }
    return forge((uint16_t)info.kind, info.seed, P, s, r, L, ly, len);
}

static void test_layout_matches_documentation(void **state)
{
    (void)state;
    for (int ki = 0; ki < NKINDS; ki++) {
        bf_filter *f = make_filter(kinds[ki]);
        keys_membuf m = serialize(f);
        const unsigned char *b = m.data;
        bf_info info;
        bf_filter_info(f, &info);

        /* Field by field, as documented. */
        assert_memory_equal(b, "BLMFLTR\0", 8);
        assert_int_equal(keys_get_le(b + KEYS_OFF_VERSION, 2), 2);
        assert_int_equal(keys_get_le(b + KEYS_OFF_KIND, 2), kinds[ki]);
        assert_int_equal(keys_get_le(b + KEYS_OFF_HASH_ID, 4), 1);
        assert_true(keys_get_le(b + KEYS_OFF_SEED, 8) == SEED);
        assert_int_equal(keys_get_le(b + KEYS_OFF_FILE_SIZE, 8), m.len);
        uint32_t L = layer_count(b);
        assert_int_equal(L, info.layers);
        assert_int_equal(header_size(b), 64 + 64 * L);
        uint64_t prev_end = header_size(b);
        for (uint32_t i = 0; i < L; i++) {
            const unsigned char *d = b + keys_desc_off(i);
            uint64_t off = keys_get_le(d + KEYS_D_DATA_OFF, 8);
            uint64_t size = keys_get_le(d + KEYS_D_DATA_SIZE, 8);
            uint64_t nb = keys_get_le(d + KEYS_D_NBLOCKS, 8);
            /* New filters: lanes of the width their k takes, but for
             * the counting filter. */
            uint32_t k = (uint32_t)keys_get_le(d + KEYS_D_K, 2);
            assert_int_equal(keys_get_le(d + KEYS_D_SCHEME, 2),
                             kinds[ki] == BF_KIND_COUNTING ? BF_SCHEME_DISTINCT
                             : k % 16 == 0                 ? BF_SCHEME_LANES32
                                                           : BF_SCHEME_LANES);
            assert_int_equal(off % 64, 0);
            assert_true(off >= prev_end);
            assert_true(off + size <= m.len - 8);
            assert_int_equal(size, nb * 64);
            prev_end = off + size;
        }
        assert_int_equal(keys_get_le(b + m.len - 8, 8),
                         XXH3_64bits(b, m.len - 8));

        /* A file written from the documentation is byte for byte the
         * library's. */
        size_t flen = 0;
        unsigned char *forged = forge_from(f, &m, &flen);
        assert_int_equal(flen, m.len);
        for (size_t i = 0; i < flen; i++)
            if (forged[i] != m.data[i])
                fail_msg("%s: byte %zu is %#x, the documented layout gives "
                         "%#x",
                         bf_kind_name(kinds[ki]), i, m.data[i], forged[i]);
        /* And it loads. */
        bf_filter *g = NULL;
        char err[256] = "";
        unsigned char *copy = exact_copy(forged, flen);
        if (bf_filter_load_mem(copy, flen, BF_LOAD_COPY, &g, err, sizeof err) !=
            BF_OK)
            fail_msg("%s: documented layout rejected: %s",
                     bf_kind_name(kinds[ki]), err);
        expect_same_filter(f, g);
        bf_filter_destroy(g);
        free(copy);
        free(forged);
        keys_membuf_free(&m);
        bf_filter_destroy(f);
    }
}

/* ------------------------------------------------------------------------ */
/* Damage                                                                    */

static void test_truncated(void **state)
{
    (void)state;
    for (int ki = 0; ki < NKINDS; ki++) {
        bf_filter *f = make_filter(kinds[ki]);
        keys_membuf m = serialize(f);
        size_t H = (size_t)header_size(m.data);
        for (unsigned flags = 0; flags < 4; flags++) {
            /* Every length through the header and the first data block. */
            for (size_t len = 0; len <= H + 64; len++)
                expect_load_fails(m.data, len, flags, BF_ERR_FORMAT,
                                  "truncated", "truncated", "size",
                                  (const char *)NULL);
            /* A few in the data and the trailer. */
            const size_t more[] = {H + 65,    H + 1000,  m.len / 2, m.len - 64,
                                   m.len - 9, m.len - 8, m.len - 7, m.len - 1};
            for (size_t i = 0; i < sizeof more / sizeof more[0]; i++)
                expect_load_fails(m.data, more[i], flags, BF_ERR_FORMAT,
                                  "truncated", "truncated", "size",
                                  (const char *)NULL);
        }
        /* One byte too many. */
        unsigned char *longer = calloc(1, m.len + 64);
        memcpy(longer, m.data, m.len);
        expect_load_fails(longer, m.len + 1, 0, BF_ERR_FORMAT, "one byte more",
                          "extended", "size", "trailing", (const char *)NULL);
        expect_load_fails(longer, m.len + 64, 0, BF_ERR_FORMAT, "64 bytes more",
                          "extended", "size", "trailing", (const char *)NULL);
        free(longer);
        keys_membuf_free(&m);
        bf_filter_destroy(f);
    }
}

/* Loads a damaged buffer with NOVERIFY, where damage may go unnoticed: it
 * must not crash, and a filter that loads must work. */
static void load_noverify_and_use(const unsigned char *buf, size_t len,
                                  unsigned extra)
{
    unsigned char *copy = exact_copy(buf, len);
    bf_filter *g = NULL;
    char err[256] = "";
    bf_err rc = bf_filter_load_mem(copy, len, BF_LOAD_NOVERIFY | extra, &g, err,
                                   sizeof err);
    if (rc == BF_OK) {
        bf_info info;
        bf_filter_info(g, &info);
        for (uint64_t i = 0; i < 64; i++) {
            unsigned char key[8];
            key_u64(i * 97, key);
            (void)bf_filter_contains(g, key, 8);
        }
        if (!(extra & BF_LOAD_INPLACE)) {
            unsigned char key[8];
            key_u64(KEYS_ABSENT_BASE, key);
            int r = bf_filter_add(g, key, 8);
            assert_true(r >= -BF_ERR_READONLY && r <= 1);
        }
        keys_membuf m = {0};
        assert_int_equal(keys_serialize(g, &m), BF_OK);
        keys_membuf_free(&m);
        bf_filter_destroy(g);
    } else {
        assert_true(rc == BF_ERR_FORMAT || rc == BF_ERR_VERSION);
        assert_true(strlen(err) > 0);
    }
    free(copy);
}

static void test_bit_flips(void **state)
{
    (void)state;
    keys_rng rng = {42};
    for (int ki = 0; ki < NKINDS; ki++) {
        bf_filter *f = make_filter(kinds[ki]);
        keys_membuf m = serialize(f);
        size_t H = (size_t)header_size(m.data), len = m.len;
        unsigned char *d = exact_copy(m.data, len);
        char what[96];
        /* Every bit of the header. */
        for (size_t bit = 0; bit < 8 * H; bit++) {
            d[bit / 8] ^= (unsigned char)(1u << (bit % 8));
            snprintf(what, sizeof what, "%s: header bit %zu flipped",
                     bf_kind_name(kinds[ki]), bit);
            size_t byte = bit / 8;
            bool version =
                byte >= KEYS_OFF_VERSION && byte < KEYS_OFF_VERSION + 2;
            /* A flipped version may be reported as either. */
            bf_err want = version ? FORMAT_OR_VERSION : BF_ERR_FORMAT;
            expect_load_fails(d, len, BF_LOAD_COPY, want, what,
                              (const char *)NULL);
            if (bit % 7 == 0)
                expect_load_fails(d, len, BF_LOAD_INPLACE, want, what,
                                  (const char *)NULL);
            load_noverify_and_use(d, len, BF_LOAD_COPY);
            if (bit % 5 == 0)
                load_noverify_and_use(d, len, BF_LOAD_INPLACE);
            d[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        }
        /* A sample of the data bits. */
        for (int i = 0; i < 512; i++) {
            size_t bit = 8 * H + keys_rng_next(&rng) % (8 * (len - 8 - H));
            d[bit / 8] ^= (unsigned char)(1u << (bit % 8));
            snprintf(what, sizeof what, "%s: data bit %zu flipped",
                     bf_kind_name(kinds[ki]), bit);
            expect_load_fails(d, len, (unsigned)(i & 1), BF_ERR_FORMAT, what,
                              "checksum", (const char *)NULL);
            load_noverify_and_use(d, len, (unsigned)(i & 1));
            d[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        }
        /* Every bit of the trailer. */
        for (size_t bit = 8 * (len - 8); bit < 8 * len; bit++) {
            d[bit / 8] ^= (unsigned char)(1u << (bit % 8));
            snprintf(what, sizeof what, "%s: trailer bit %zu flipped",
                     bf_kind_name(kinds[ki]), bit);
            expect_load_fails(d, len, BF_LOAD_COPY, BF_ERR_FORMAT, what,
                              "checksum", (const char *)NULL);
            /* NOVERIFY: the checksum is all that is wrong, so it loads and
             * is the original. */
            bf_filter *g = NULL;
            char err[256] = "";
            assert_int_equal(bf_filter_load_mem(d, len, BF_LOAD_NOVERIFY, &g,
                                                err, sizeof err),
                             BF_OK);
            bf_info a, b;
            bf_filter_info(f, &a);
            bf_filter_info(g, &b);
            expect_same_info(&a, &b);
            bf_filter_destroy(g);
            d[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        }
        /* Restored: loads again. */
        bf_filter *g = NULL;
        char err[256] = "";
        assert_int_equal(bf_filter_load_mem(d, len, 0, &g, err, sizeof err),
                         BF_OK);
        bf_filter_destroy(g);
        free(d);
        keys_membuf_free(&m);
        bf_filter_destroy(f);
    }
}

/* A forged header: one field changed, the checksum recomputed, rejected
 * with `code` and one of the words -- and also with BF_LOAD_NOVERIFY, and
 * in place. */
typedef void (*forge_fn)(unsigned char *b, size_t len);

static void expect_forged_fails(bf_filter *f, forge_fn fn, bf_err code,
                                const char *what, const char *w1,
                                const char *w2, const char *w3)
{
    keys_membuf m = serialize(f);
    unsigned char *b = exact_copy(m.data, m.len);
    fn(b, m.len);
    keys_reseal(b, m.len);
    char msg[160];
    const unsigned flags[] = {BF_LOAD_COPY, BF_LOAD_INPLACE,
                              BF_LOAD_COPY | BF_LOAD_NOVERIFY,
                              BF_LOAD_INPLACE | BF_LOAD_NOVERIFY};
    for (size_t i = 0; i < 4; i++) {
        snprintf(msg, sizeof msg, "%s filter, %s",
                 bf_kind_name(bf_filter_kind(f)), what);
        expect_load_fails(b, m.len, flags[i], code, msg, w1, w2, w3,
                          (const char *)NULL);
    }
    free(b);
    keys_membuf_free(&m);
}

#define DESC(b, i) ((b) + keys_desc_off(i))

static void f_magic(unsigned char *b, size_t l)
{
    (void)l;
    b[0] = 'X';
}
static void f_magic_nul(unsigned char *b, size_t l)
{
    (void)l;
    b[7] = '!';
}
static void f_version3(unsigned char *b, size_t l)
{
    (void)l;
    keys_put_le(b + KEYS_OFF_VERSION, 2, 3);
}
static void f_version_max(unsigned char *b, size_t l)
{
    (void)l;
    keys_put_le(b + KEYS_OFF_VERSION, 2, 0xffff);
}
static void f_version0(unsigned char *b, size_t l)
{
    (void)l;
    keys_put_le(b + KEYS_OFF_VERSION, 2, 0);
}
static void f_kind0(unsigned char *b, size_t l)
{
    (void)l;
    keys_put_le(b + KEYS_OFF_KIND, 2, 0);
}
static void f_kind9(unsigned char *b, size_t l)
{
    (void)l;
    keys_put_le(b + KEYS_OFF_KIND, 2, 9);
}
static void f_hash2(unsigned char *b, size_t l)
{
    (void)l;
    keys_put_le(b + KEYS_OFF_HASH_ID, 4, 2);
}
static void f_size_plus(unsigned char *b, size_t l)
{
    keys_put_le(b + KEYS_OFF_FILE_SIZE, 8, l + 64);
}
static void f_size_minus(unsigned char *b, size_t l)
{
    keys_put_le(b + KEYS_OFF_FILE_SIZE, 8, l - 64);
}
static void f_size_huge(unsigned char *b, size_t l)
{
    (void)l;
    keys_put_le(b + KEYS_OFF_FILE_SIZE, 8, UINT64_C(1) << 63);
}
static void f_layers0(unsigned char *b, size_t l)
{
    (void)l;
    keys_put_le(b + KEYS_OFF_LAYERS, 4, 0);
}
static void f_layers_plus1(unsigned char *b, size_t l)
{
    (void)l;
    keys_put_le(b + KEYS_OFF_LAYERS, 4, layer_count(b) + 1);
}
static void f_layers_huge(unsigned char *b, size_t l)
{
    (void)l;
    /* H = 64 + 64 * L wraps to 0 in 32 bits for L = 2^26 * 1023 + ... : use
     * L = 0xffffffff and the H it would have modulo 2^32. */
    keys_put_le(b + KEYS_OFF_LAYERS, 4, 0xffffffffu);
    keys_put_le(b + KEYS_OFF_HEADER_SIZE, 4,
                (uint32_t)(64u + 64u * 0xffffffffu));
}
static void f_layers_65(unsigned char *b, size_t l)
{
    (void)l;
    keys_put_le(b + KEYS_OFF_LAYERS, 4, BF_MAX_LAYERS + 1);
    keys_put_le(b + KEYS_OFF_HEADER_SIZE, 4, 64 + 64 * (BF_MAX_LAYERS + 1));
}
static void f_header_plus(unsigned char *b, size_t l)
{
    (void)l;
    keys_put_le(b + KEYS_OFF_HEADER_SIZE, 4, header_size(b) + 64);
}
static void f_header_minus(unsigned char *b, size_t l)
{
    (void)l;
    keys_put_le(b + KEYS_OFF_HEADER_SIZE, 4, header_size(b) - 64);
}
static void f_header0(unsigned char *b, size_t l)
{
    (void)l;
    keys_put_le(b + KEYS_OFF_HEADER_SIZE, 4, 0);
}
/* Last layer's descriptor fields. */
static unsigned char *last_desc(unsigned char *b)
{
    return DESC(b, layer_count(b) - 1);
}
static void f_data_size_plus(unsigned char *b, size_t l)
{
    (void)l;
    unsigned char *d = last_desc(b);
    keys_put_le(d + KEYS_D_DATA_SIZE, 8,
                keys_get_le(d + KEYS_D_DATA_SIZE, 8) + 64);
}
static void f_data_size_minus(unsigned char *b, size_t l)
{
    (void)l;
    unsigned char *d = last_desc(b);
    keys_put_le(d + KEYS_D_DATA_SIZE, 8,
                keys_get_le(d + KEYS_D_DATA_SIZE, 8) - 64);
}
static void f_nblocks_plus(unsigned char *b, size_t l)
{
    (void)l;
    unsigned char *d = last_desc(b);
    keys_put_le(d + KEYS_D_NBLOCKS, 8, keys_get_le(d + KEYS_D_NBLOCKS, 8) + 1);
}
static void f_nblocks0(unsigned char *b, size_t l)
{
    (void)l;
    unsigned char *d = last_desc(b);
    keys_put_le(d + KEYS_D_NBLOCKS, 8, 0);
    keys_put_le(d + KEYS_D_DATA_SIZE, 8, 0);
}
/* nblocks 2^60: 2^66 bytes, which wraps to 0 in 64 bits -- the data size
 * field says 0 to match the wrapped product. */
static void f_nblocks_2_60(unsigned char *b, size_t l)
{
    (void)l;
    unsigned char *d = last_desc(b);
    keys_put_le(d + KEYS_D_NBLOCKS, 8, UINT64_C(1) << 60);
    keys_put_le(d + KEYS_D_DATA_SIZE, 8, 0);
}
/* nblocks 2^58: 2^64 bytes, also 0 modulo 2^64. */
static void f_nblocks_2_58(unsigned char *b, size_t l)
{
    (void)l;
    unsigned char *d = last_desc(b);
    keys_put_le(d + KEYS_D_NBLOCKS, 8, UINT64_C(1) << 58);
    keys_put_le(d + KEYS_D_DATA_SIZE, 8, 0);
}
/* Just past 2^40 blocks, size consistent with it. */
static void f_nblocks_2_40(unsigned char *b, size_t l)
{
    (void)l;
    unsigned char *d = last_desc(b);
    uint64_t nb = (UINT64_C(1) << 40) + 1;
    keys_put_le(d + KEYS_D_NBLOCKS, 8, nb);
    keys_put_le(d + KEYS_D_DATA_SIZE, 8, nb * 64);
}
static void f_nblocks_max(unsigned char *b, size_t l)
{
    (void)l;
    unsigned char *d = last_desc(b);
    keys_put_le(d + KEYS_D_NBLOCKS, 8, UINT64_MAX);
    keys_put_le(d + KEYS_D_DATA_SIZE, 8, UINT64_MAX * 64); /* wrapped */
}
static void f_offset_past(unsigned char *b, size_t l)
{
    (void)l;
    unsigned char *d = last_desc(b);
    keys_put_le(d + KEYS_D_DATA_OFF, 8,
                keys_get_le(d + KEYS_D_DATA_OFF, 8) + 64);
}
static void f_offset_unaligned(unsigned char *b, size_t l)
{
    (void)l;
    unsigned char *d = last_desc(b);
    keys_put_le(d + KEYS_D_DATA_OFF, 8,
                keys_get_le(d + KEYS_D_DATA_OFF, 8) - 8);
}
static void f_offset_in_header(unsigned char *b, size_t l)
{
    (void)l;
    keys_put_le(DESC(b, 0) + KEYS_D_DATA_OFF, 8, 0);
}
/* offset + size wraps around 2^64 to land inside the file. */
static void f_offset_wrap(unsigned char *b, size_t l)
{
    (void)l;
    unsigned char *d = last_desc(b);
    uint64_t size = keys_get_le(d + KEYS_D_DATA_SIZE, 8);
    keys_put_le(d + KEYS_D_DATA_OFF, 8, (uint64_t)0 - size + 64);
}
static void f_offset_huge(unsigned char *b, size_t l)
{
    (void)l;
    keys_put_le(last_desc(b) + KEYS_D_DATA_OFF, 8, UINT64_MAX - 63);
}
static void f_size_huge_data(unsigned char *b, size_t l)
{
    (void)l;
    keys_put_le(last_desc(b) + KEYS_D_DATA_SIZE, 8, UINT64_MAX - 63);
}
static void f_k0(unsigned char *b, size_t l)
{
    (void)l;
    keys_put_le(last_desc(b) + KEYS_D_K, 4, 0);
}
static void f_k65(unsigned char *b, size_t l)
{
    (void)l;
    keys_put_le(last_desc(b) + KEYS_D_K, 4, BF_MAX_K + 1);
}
static void f_k_huge(unsigned char *b, size_t l)
{
    (void)l;
    keys_put_le(last_desc(b) + KEYS_D_K, 2, 0xffffu);
}
static void f_scheme_unknown(unsigned char *b, size_t l)
{
    (void)l;
    keys_put_le(last_desc(b) + KEYS_D_SCHEME, 2, 3);
}
static void f_scheme_lanes32_k24(unsigned char *b, size_t l)
{
    (void)l;
    keys_put_le(last_desc(b) + KEYS_D_SCHEME, 2, BF_SCHEME_LANES32);
    keys_put_le(last_desc(b) + KEYS_D_K, 2, 24);
}
static void f_scheme_lanes(unsigned char *b, size_t l)
{
    (void)l;
    keys_put_le(last_desc(b) + KEYS_D_SCHEME, 2, BF_SCHEME_LANES);
}
static void f_cells256(unsigned char *b, size_t l)
{
    (void)l;
    keys_put_le(last_desc(b) + KEYS_D_BLOCK_CELLS, 4, 256);
}
static void f_cells_swapped(unsigned char *b, size_t l)
{
    (void)l;
    unsigned char *d = last_desc(b);
    uint32_t c = (uint32_t)keys_get_le(d + KEYS_D_BLOCK_CELLS, 4);
    keys_put_le(d + KEYS_D_BLOCK_CELLS, 4, c == 512 ? 128 : 512);
}

/* Scalable only: two layers over the same bytes. */
static void f_overlap(unsigned char *b, size_t l)
{
    (void)l;
    keys_put_le(DESC(b, 1) + KEYS_D_DATA_OFF, 8,
                keys_get_le(DESC(b, 0) + KEYS_D_DATA_OFF, 8));
}
static void f_growth_nan(unsigned char *b, size_t l)
{
    (void)l;
    keys_put_le(b + 48, 8, dbits(NAN));
}
static void f_growth_half(unsigned char *b, size_t l)
{
    (void)l;
    keys_put_le(b + 48, 8, dbits(0.5));
}
static void f_tightening_one(unsigned char *b, size_t l)
{
    (void)l;
    keys_put_le(b + 56, 8, dbits(1.0));
}
static void f_fpr_zero(unsigned char *b, size_t l)
{
    (void)l;
    keys_put_le(b + 40, 8, dbits(0.0));
}

static void test_forged_headers(void **state)
{
    (void)state;
    const char *SZ = "size";
    for (int ki = 0; ki < NKINDS; ki++) {
        bf_filter *f = make_filter(kinds[ki]);
        expect_forged_fails(f, f_magic, BF_ERR_FORMAT, "wrong magic", "magic",
                            NULL, NULL);
        expect_forged_fails(f, f_magic_nul, BF_ERR_FORMAT, "wrong magic byte 7",
                            "magic", NULL, NULL);
        expect_forged_fails(f, f_version3, BF_ERR_VERSION, "version 3",
                            "version", NULL, NULL);
        expect_forged_fails(f, f_version_max, BF_ERR_VERSION, "version 65535",
                            "version", NULL, NULL);
        expect_forged_fails(f, f_version0, BF_ERR_VERSION, "version 0",
                            "version", NULL, NULL);
        expect_forged_fails(f, f_kind0, BF_ERR_FORMAT, "kind 0", "kind", NULL,
                            NULL);
        expect_forged_fails(f, f_kind9, BF_ERR_FORMAT, "kind 9", "kind", NULL,
                            NULL);
        expect_forged_fails(f, f_hash2, BF_ERR_FORMAT, "hash id 2", "hash",
                            NULL, NULL);
        /* The file size field against the bytes given. */
        expect_forged_fails(f, f_size_plus, BF_ERR_FORMAT, "file size + 64", SZ,
                            "truncated", NULL);
        expect_forged_fails(f, f_size_minus, BF_ERR_FORMAT, "file size - 64",
                            SZ, "extended", NULL);
        expect_forged_fails(f, f_size_huge, BF_ERR_FORMAT, "file size 2^63", SZ,
                            "truncated", NULL);
        expect_forged_fails(f, f_layers0, BF_ERR_FORMAT, "0 layers", "layer",
                            NULL, NULL);
        expect_forged_fails(f, f_layers_plus1, BF_ERR_FORMAT, "one layer more",
                            "layer", "header", NULL);
        expect_forged_fails(f, f_layers_huge, BF_ERR_FORMAT,
                            "2^32-1 layers, header size wrapped", "layer",
                            "header", NULL);
        expect_forged_fails(f, f_layers_65, BF_ERR_FORMAT,
                            "65 layers, header size to match", "layer",
                            "header", NULL);
        expect_forged_fails(f, f_header_plus, BF_ERR_FORMAT, "header size + 64",
                            "header", "layer", NULL);
        expect_forged_fails(f, f_header_minus, BF_ERR_FORMAT,
                            "header size - 64", "header", "layer", NULL);
        expect_forged_fails(f, f_header0, BF_ERR_FORMAT, "header size 0",
                            "header", "layer", NULL);
        expect_forged_fails(f, f_data_size_plus, BF_ERR_FORMAT,
                            "data size + 64", SZ, NULL, NULL);
        expect_forged_fails(f, f_data_size_minus, BF_ERR_FORMAT,
                            "data size - 64", SZ, NULL, NULL);
        expect_forged_fails(f, f_nblocks_plus, BF_ERR_FORMAT, "nblocks + 1", SZ,
                            "block", NULL);
        expect_forged_fails(f, f_nblocks0, BF_ERR_FORMAT, "nblocks 0", "block",
                            SZ, NULL);
        expect_forged_fails(f, f_nblocks_2_60, BF_ERR_FORMAT,
                            "nblocks 2^60, data size 2^66 mod 2^64 = 0", SZ,
                            "block", NULL);
        expect_forged_fails(f, f_nblocks_2_58, BF_ERR_FORMAT,
                            "nblocks 2^58, data size 2^64 mod 2^64 = 0", SZ,
                            "block", NULL);
        expect_forged_fails(f, f_nblocks_2_40, BF_ERR_FORMAT,
                            "nblocks 2^40+1, data size to match", SZ, "block",
                            NULL);
        expect_forged_fails(f, f_nblocks_max, BF_ERR_FORMAT,
                            "nblocks 2^64-1, data size wrapped", SZ, "block",
                            NULL);
        expect_forged_fails(f, f_offset_past, BF_ERR_FORMAT,
                            "data offset + 64 (over the trailer)", SZ, "offset",
                            "outside");
        expect_forged_fails(f, f_offset_unaligned, BF_ERR_FORMAT,
                            "data offset - 8 (unaligned)", "align", "offset",
                            "overlap");
        expect_forged_fails(f, f_offset_in_header, BF_ERR_FORMAT,
                            "data offset 0 (in the header)", "offset", "header",
                            "overlap");
        expect_forged_fails(f, f_offset_wrap, BF_ERR_FORMAT,
                            "data offset + size wrapping 2^64", "offset", SZ,
                            "outside");
        expect_forged_fails(f, f_offset_huge, BF_ERR_FORMAT,
                            "data offset 2^64-64", "offset", SZ, "outside");
        expect_forged_fails(f, f_size_huge_data, BF_ERR_FORMAT,
                            "data size 2^64-64", SZ, NULL, NULL);
        expect_forged_fails(f, f_k0, BF_ERR_FORMAT, "k 0", "k", NULL, NULL);
        expect_forged_fails(f, f_k65, BF_ERR_FORMAT, "k 65", "k", NULL, NULL);
        expect_forged_fails(f, f_k_huge, BF_ERR_FORMAT, "k 2^16-1", "k", NULL,
                            NULL);
        expect_forged_fails(f, f_scheme_unknown, BF_ERR_FORMAT, "scheme 3",
                            "scheme", NULL, NULL);
        expect_forged_fails(f, f_scheme_lanes32_k24, BF_ERR_FORMAT,
                            "32-bit lanes with k 24", "scheme", "k 24", NULL);
        if (kinds[ki] == BF_KIND_COUNTING)
            expect_forged_fails(f, f_scheme_lanes, BF_ERR_FORMAT,
                                "counting filter with lane scheme", "scheme",
                                NULL, NULL);
        expect_forged_fails(f, f_cells256, BF_ERR_FORMAT, "block cells 256",
                            "cell", "block", NULL);
        expect_forged_fails(f, f_cells_swapped, BF_ERR_FORMAT,
                            "block cells of the other kind", "cell", "block",
                            NULL);
        if (kinds[ki] == BF_KIND_SCALABLE) {
            expect_forged_fails(f, f_overlap, BF_ERR_FORMAT,
                                "layers 0 and 1 on the same bytes", "overlap",
                                "offset", NULL);
            expect_forged_fails(f, f_growth_nan, BF_ERR_FORMAT, "growth NaN",
                                "growth", NULL, NULL);
            expect_forged_fails(f, f_growth_half, BF_ERR_FORMAT, "growth 0.5",
                                "growth", NULL, NULL);
            expect_forged_fails(f, f_tightening_one, BF_ERR_FORMAT,
                                "tightening 1", "tightening", NULL, NULL);
            expect_forged_fails(f, f_fpr_zero, BF_ERR_FORMAT, "fpr 0", "fpr",
                                NULL, NULL);
        }
        bf_filter_destroy(f);
    }
}

/* Whole files forged from the documentation: well-formed but for one
 * thing.  More layers than BF_MAX_LAYERS; a blocked filter with two layers;
 * a foreign file. */
static void test_forged_files(void **state)
{
    (void)state;
    forge_layer ly[BF_MAX_LAYERS + 1];
    for (uint32_t i = 0; i <= BF_MAX_LAYERS; i++)
        ly[i] = (forge_layer){1, 7, BF_BLOCK_BITS, 1, 1e-3, 0, 0, NULL, 0};
    size_t len = 0;
    unsigned char *b = forge(BF_KIND_SCALABLE, SEED, 1e-2, 2.0, 0.85,
                             BF_MAX_LAYERS + 1, ly, &len);
    for (unsigned flags = 0; flags < 4; flags++)
        expect_load_fails(b, len, flags, BF_ERR_FORMAT, "65 layers", "layer",
                          (const char *)NULL);
    free(b);
    b = forge(BF_KIND_BLOCKED, SEED, 0, 0, 0, 2, ly, &len);
    for (unsigned flags = 0; flags < 4; flags++)
        expect_load_fails(b, len, flags, BF_ERR_FORMAT,
                          "blocked filter with 2 layers", "layer",
                          (const char *)NULL);
    free(b);
    /* Counting with blocked cells, blocked with counting cells. */
    b = forge(BF_KIND_COUNTING, SEED, 0, 0, 0, 1, ly, &len);
    expect_load_fails(b, len, 0, BF_ERR_FORMAT, "counting with 512 cells",
                      "cell", "block", (const char *)NULL);
    free(b);
    forge_layer c = {1, 7, BF_COUNTING_BLOCK_CELLS, 1, 1e-3, 0, 0, NULL, 0};
    b = forge(BF_KIND_BLOCKED, SEED, 0, 0, 0, 1, &c, &len);
    expect_load_fails(b, len, 0, BF_ERR_FORMAT, "blocked with 128 cells",
                      "cell", "block", (const char *)NULL);
    free(b);
    /* A file that is not a filter at all. */
    unsigned char text[300];
    for (size_t i = 0; i < sizeof text; i++)
        text[i] = (unsigned char)("The quick brown fox. "[i % 21]);
    for (unsigned flags = 0; flags < 4; flags++)
        expect_load_fails(text, sizeof text, flags, BF_ERR_FORMAT,
                          "a text file", "magic", (const char *)NULL);
    /* A valid hand-made one to show the forger is right. */
    ly[0].cells_set = 0;
    b = forge(BF_KIND_BLOCKED, SEED, 0, 0, 0, 1, ly, &len);
    bf_filter *g = NULL;
    char err[256] = "";
    if (bf_filter_load_mem(b, len, 0, &g, err, sizeof err) != BF_OK)
        fail_msg("a hand-made empty blocked filter was rejected: %s", err);
    assert_false(bf_filter_contains(g, "x", 1));
    bf_filter_destroy(g);
    free(b);
}

/* A scalable filter with a memory cap keeps it through a round trip: the
 * loaded filter must refuse growth past max_bytes like the original (the
 * stage restores its dedup filter from a checkpoint and relies on the cap). */
static void test_round_trip_keeps_memory_cap(void **state)
{
    (void)state;
    char err[256] = "";
    bf_scalable_params p;
    bf_scalable_params_default(&p);
    p.initial_capacity = 500;
    p.fpr = 1e-3;
    p.seed = SEED;
    p.max_bytes = 4096 * 4;
    bf_filter *f =
        bf_filter_from_scalable(bf_scalable_new(&p, err, sizeof err));
    if (!f)
        fail_msg("%s", err);
    /* Fill it to the cap. */
    uint64_t i = 0;
    int rc = 0;
    for (; i < 1000000; i++) {
        unsigned char key[8];
        key_u64(i, key);
        rc = bf_filter_add(f, key, 8);
        if (rc < 0)
            break;
    }
    assert_int_equal(rc, -BF_ERR_NOMEM);
    keys_membuf m = serialize(f);
    bf_filter *g = NULL;
    assert_int_equal(
        bf_filter_load_mem(m.data, m.len, BF_LOAD_COPY, &g, err, sizeof err),
        BF_OK);
    bf_scalable_params q;
    bf_scalable_params_get(bf_filter_scalable(g), &q);
    /* The cap is the process's setting, not stored: a loaded filter has
     * none until the owner sets it again (bloomfilters.h). */
    assert_int_equal(q.max_bytes, 0);
    bf_scalable_set_max_bytes(bf_filter_scalable(g), p.max_bytes);
    bf_scalable_params_get(bf_filter_scalable(g), &q);
    uint64_t refused = 0, grew = 0;
    for (uint64_t j = KEYS_ABSENT_BASE; j < KEYS_ABSENT_BASE + 3000; j++) {
        unsigned char key[8];
        key_u64(j, key);
        int r1 = bf_filter_add(f, key, 8), r2 = bf_filter_add(g, key, 8);
        refused += r1 < 0;
        grew += r2 == 1 && r1 < 0;
    }
    bf_info gi;
    bf_filter_info(g, &gi);
    keys_membuf_free(&m);
    bf_filter_destroy(g);
    bf_filter_destroy(f);
    if (grew || q.max_bytes != p.max_bytes)
        fail_msg("loaded scalable filter lost its memory cap: max_bytes %llu "
                 "(was %llu); it took %llu keys the original refused and grew "
                 "to %llu bytes, %u layers (cap %llu)",
                 (unsigned long long)q.max_bytes,
                 (unsigned long long)p.max_bytes, (unsigned long long)grew,
                 (unsigned long long)gi.bytes, gi.layers,
                 (unsigned long long)p.max_bytes);
    assert_true(refused > 0);
    assert_true(gi.bytes <= p.max_bytes);
}

/* BF_LOAD_INPLACE needs a 64-byte aligned buffer: a misaligned one is
 * refused (using it would mean misaligned word access), COPY takes it. */
static void test_inplace_needs_alignment(void **state)
{
    (void)state;
    for (int ki = 0; ki < NKINDS; ki++) {
        bf_filter *f = make_filter(kinds[ki]);
        keys_membuf m = serialize(f);
        unsigned char *big = exact_copy(m.data, m.len + 64);
        const size_t shifts[] = {1, 8, 16, 32};
        for (size_t i = 0; i < 4; i++) {
            unsigned char *b = big + shifts[i];
            memcpy(b, m.data, m.len);
            bf_filter *g = NULL;
            char err[256] = "";
            assert_int_not_equal(bf_filter_load_mem(b, m.len, BF_LOAD_INPLACE,
                                                    &g, err, sizeof err),
                                 BF_OK);
            assert_true(strlen(err) > 0);
            assert_int_equal(
                bf_filter_load_mem(b, m.len, BF_LOAD_COPY, &g, err, sizeof err),
                BF_OK);
            expect_same_filter(f, g);
            bf_filter_destroy(g);
        }
        free(big);
        keys_membuf_free(&m);
        bf_filter_destroy(f);
    }
}

/* bf_write_file_atomic: a producer streaming through the write function. */
typedef struct producer {
    size_t total, chunk;
    bf_err fail_with; /* returned after half the bytes, or BF_OK */
} producer;

static bf_err produce(void *opaque, bf_write_fn write, void *wopaque)
{
    const producer *p = opaque;
    unsigned char *buf = malloc(p->chunk);
    assert_non_null(buf);
    bf_err rc = BF_OK;
    for (size_t off = 0; off < p->total; off += p->chunk) {
        if (p->fail_with != BF_OK && off >= p->total / 2) {
            rc = p->fail_with;
            break;
        }
        size_t n = p->total - off < p->chunk ? p->total - off : p->chunk;
        for (size_t j = 0; j < n; j++)
            buf[j] = (unsigned char)((off + j) * 131u >> 3);
        if (write(wopaque, buf, n) != 0) {
            rc = BF_ERR_IO;
            break;
        }
    }
    free(buf);
    return rc;
}

static void expect_file(const char *path, const producer *p)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    size_t n = 0;
    int c;
    while ((c = fgetc(fp)) != EOF) {
        if ((unsigned char)c != (unsigned char)(n * 131u >> 3))
            fail_msg("%s: byte %zu differs", path, n);
        n++;
    }
    fclose(fp);
    assert_int_equal(n, p->total);
}

static void test_write_file_atomic(void **state)
{
    (void)state;
    char path[512], names[1024], err[512];
    snprintf(path, sizeof path, "%s/atomic.bin", tmpdir);
    /* Small and large writes, odd chunk sizes. */
    const producer ok[] = {{0, 1, BF_OK},
                           {1, 1, BF_OK},
                           {100000, 7, BF_OK},
                           {3 << 20, 1 << 20, BF_OK},
                           {5000, 4096, BF_OK}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        err[0] = '\0';
        if (bf_write_file_atomic(path, produce, (void *)&ok[i], err,
                                 sizeof err) != BF_OK)
            fail_msg("write %zu bytes: %s", ok[i].total, err);
        expect_file(path, &ok[i]);
        assert_int_equal(dir_entries(names, sizeof names), 1);
    }
    const producer *last = &ok[sizeof ok / sizeof ok[0] - 1];

    /* The producer fails: its error comes back, the file is untouched and
     * no temp file is left. */
    producer bad = {200000, 1000, BF_ERR_INVALID};
    err[0] = '\0';
    assert_int_equal(bf_write_file_atomic(path, produce, &bad, err, sizeof err),
                     BF_ERR_INVALID);
    assert_non_null(strstr(err, path));
    expect_file(path, last);
    assert_int_equal(dir_entries(names, sizeof names), 1);

    /* The disk says no (file size limit: EFBIG, like ENOSPC): BF_ERR_IO,
     * errstr names the path and the system's reason, file untouched. */
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    void (*oldsig)(int) = signal(SIGXFSZ, SIG_IGN);
    lim = old;
    lim.rlim_cur = 64 * 1024;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    producer big = {1 << 20, 4096, BF_OK};
    err[0] = '\0';
    bf_err rc = bf_write_file_atomic(path, produce, &big, err, sizeof err);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, oldsig);
    assert_int_equal(rc, BF_ERR_IO);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, strerror(EFBIG)));
    expect_file(path, last);
    assert_int_equal(dir_entries(names, sizeof names), 1);

    /* The target is a directory: the rename fails, the temp file goes. */
    char dirpath[512];
    snprintf(dirpath, sizeof dirpath, "%s/adir", tmpdir);
    assert_int_equal(mkdir(dirpath, 0700), 0);
    err[0] = '\0';
    assert_int_equal(
        bf_write_file_atomic(dirpath, produce, (void *)&ok[2], err, sizeof err),
        BF_ERR_IO);
    assert_non_null(strstr(err, dirpath));
    assert_int_equal(dir_entries(names, sizeof names), 2);
    rmdir(dirpath);

    /* No such directory. */
    snprintf(dirpath, sizeof dirpath, "%s/missing/file", tmpdir);
    err[0] = '\0';
    assert_int_equal(
        bf_write_file_atomic(dirpath, produce, (void *)&ok[1], err, sizeof err),
        BF_ERR_IO);
    assert_non_null(strstr(err, dirpath));
    assert_int_equal(dir_entries(names, sizeof names), 1);
}

int main(int argc, char **argv)
{
    /* An optional argument runs only the tests matching it (a glob). */
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_memory),
        cmocka_unit_test(test_round_trip_empty),
        cmocka_unit_test(test_prefetch_changes_nothing),
        cmocka_unit_test(test_serialize_write_failure),
        cmocka_unit_test_setup_teardown(test_save_load_file, setup_tmpdir,
                                        teardown_tmpdir),
        cmocka_unit_test(test_round_trip_keeps_memory_cap),
        cmocka_unit_test(test_inplace_needs_alignment),
        cmocka_unit_test_setup_teardown(test_write_file_atomic, setup_tmpdir,
                                        teardown_tmpdir),
        cmocka_unit_test(test_layout_matches_documentation),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_bit_flips),
        cmocka_unit_test(test_forged_headers),
        cmocka_unit_test(test_forged_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
