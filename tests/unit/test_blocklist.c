/*
 * test_blocklist.c -- live blocklists as data (stage/keys/blocklist.c, no
 * broker): what one list-topic record is (bs_list_record_decode), what
 * applying it does to the entry set and the counting filter
 * (bs_blocklist_apply), the base text list a topic's changes apply to,
 * growth past the capacity, and the measured false-positive rate after it.
 *
 * What must hold:
 *   - null or empty keys, keys over BS_BLOCKLIST_MAX_ENTRY and empty (not
 *     null) values are skipped and counted by reason, and change nothing;
 *   - an add makes the entry blocked, a tombstone unblocks it; repeated
 *     adds and removes of absent entries change nothing (a compacted
 *     topic holds several records for one key until it is compacted);
 *   - against a model (a random walk of adds and removes over a pool of
 *     keys) the set agrees exactly and the filter has no false negative;
 *   - base-file entries are removed by a tombstone like topic entries; a
 *     filter file as the base of a live list and an over-long base entry
 *     are start-up errors naming the list and the file;
 *   - a list that outgrows its capacity is rebuilt larger, keeps every
 *     entry, and its measured false-positive rate on 200k absent keys is
 *     within the target (tolerance: the Poisson bound below);
 *   - saturated counters (keys found by search whose probes all land on
 *     one entry's counters) are counted, never cause a false negative, and
 *     once removals bring the counts down a rebuild clears them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "keys/blocklist.h"
#include <config.h>
#include "base/settings.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"
#include "files.h"

typedef struct fx {
    bs_config *cfg;
    bs_blocklist *lists;
    size_t n;
    char *dir;
    char err[1024];
} fx;

/* One live list "t" on topic "lst" with capacity and fpr, and a base file
 * with `base` as its text (NULL: none), its blocklist.t.normalize and
 * .match as given (NULL: the defaults).  0, or -1 with f->err. */
static int load_as(fx *f, uint64_t capacity, const char *fpr,
                   const char *base, const char *normalize, const char *match)
{
    char cap[32], path[600];
    snprintf(cap, sizeof cap, "%llu", (unsigned long long)capacity);
    f->cfg = bs_config_new();
    assert_non_null(f->cfg);
    assert_int_equal(bs_config_set(f->cfg, "input.topics", "in", NULL, f->err,
                                   sizeof f->err), 0);
    assert_int_equal(bs_config_set(f->cfg, "output.topic", "out", NULL,
                                   f->err, sizeof f->err), 0);
    assert_int_equal(bs_config_set(f->cfg, "blocklist.t.topic", "lst", NULL,
                                   f->err, sizeof f->err), 0);
    assert_int_equal(bs_config_set(f->cfg, "blocklist.t.capacity", cap, NULL,
                                   f->err, sizeof f->err), 0);
    assert_int_equal(bs_config_set(f->cfg, "blocklist.t.fpr", fpr, NULL,
                                   f->err, sizeof f->err), 0);
    if (base) {
        snprintf(path, sizeof path, "%s/base.txt", f->dir);
        assert_int_equal(h_write_file(path, base), 0);
        assert_int_equal(bs_config_set(f->cfg, "blocklist.t.path", path,
                                       NULL, f->err, sizeof f->err), 0);
    }
    if (normalize)
        assert_int_equal(bs_config_set(f->cfg, "blocklist.t.normalize",
                                       normalize, NULL, f->err,
                                       sizeof f->err), 0);
    if (match)
        assert_int_equal(bs_config_set(f->cfg, "blocklist.t.match", match,
                                       NULL, f->err, sizeof f->err), 0);
    assert_int_equal(bs_config_validate(f->cfg, f->err, sizeof f->err), 0);
    bs_settings set;
    assert_int_equal(bs_settings_from_config(f->cfg, &set, f->err,
                                             sizeof f->err), 0);
    return bs_blocklists_load(&set, &f->lists, &f->n, f->err, sizeof f->err);
}

static int load(fx *f, uint64_t capacity, const char *fpr, const char *base)
{
    return load_as(f, capacity, fpr, base, NULL, NULL);
}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof(*f));
    if (!f || h_tmpdir_new(&f->dir) != 0)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    bs_blocklists_free(f->lists, f->n);
    bs_config_destroy(f->cfg);
    (void)h_tmpdir_remove(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static bs_list_change add(bs_blocklist *bl, const char *e)
{
    return bs_blocklist_apply(bl, e, strlen(e), "1", 1);
}

static bs_list_change del(bs_blocklist *bl, const char *e)
{
    return bs_blocklist_apply(bl, e, strlen(e), NULL, 0);
}

static bool blocked(const bs_blocklist *bl, const char *e)
{
    return bf_filter_contains(bl->filter, e, strlen(e));
}

static void test_decode(void **state)
{
    (void)state;
    static char big[BS_BLOCKLIST_MAX_ENTRY + 1];
    memset(big, 'x', sizeof big);
    assert_int_equal(bs_list_record_decode("a", 1, "1", 1), BS_LIST_ADDED);
    assert_int_equal(bs_list_record_decode("a", 1, NULL, 0), BS_LIST_REMOVED);
    assert_int_equal(bs_list_record_decode("a", 1, "", 0),
                     BS_LIST_BAD_EMPTY_VALUE);
    assert_int_equal(bs_list_record_decode(NULL, 0, "1", 1),
                     BS_LIST_BAD_EMPTY_KEY);
    assert_int_equal(bs_list_record_decode("", 0, NULL, 0),
                     BS_LIST_BAD_EMPTY_KEY);
    assert_int_equal(bs_list_record_decode(big, sizeof big - 1, "1", 1),
                     BS_LIST_ADDED);
    assert_int_equal(bs_list_record_decode(big, sizeof big, "1", 1),
                     BS_LIST_BAD_LONG_KEY);
    assert_string_equal(bs_list_bad_name(BS_LIST_BAD_EMPTY_KEY), "empty-key");
    assert_string_equal(bs_list_bad_name(BS_LIST_BAD_LONG_KEY), "too-long");
    assert_string_equal(bs_list_bad_name(BS_LIST_BAD_EMPTY_VALUE),
                        "empty-value");
    assert_null(bs_list_bad_name(BS_LIST_ADDED));
}

static void test_add_remove(void **state)
{
    fx *f = *state;
    assert_int_equal(load(f, 1000, "1e-9", NULL), 0);
    bs_blocklist *bl = &f->lists[0];
    assert_string_equal(bl->topic, "lst");
    assert_int_equal(bf_filter_kind(bl->filter), BF_KIND_COUNTING);
    assert_int_equal(BS_GET(bl->entries), 0);
    assert_false(blocked(bl, "alice"));

    assert_int_equal(add(bl, "alice"), BS_LIST_ADDED);
    assert_true(blocked(bl, "alice"));
    assert_int_equal(add(bl, "alice"), BS_LIST_UNCHANGED);
    assert_int_equal(add(bl, "bob"), BS_LIST_ADDED);
    assert_int_equal(BS_GET(bl->entries), 2);
    /* Two adds of alice, one tombstone: a table, not a multiset. */
    assert_int_equal(del(bl, "alice"), BS_LIST_REMOVED);
    assert_false(blocked(bl, "alice"));
    assert_false(bs_blocklist_has(bl, "alice", 5));
    assert_true(blocked(bl, "bob"));
    assert_int_equal(del(bl, "alice"), BS_LIST_UNCHANGED);
    assert_int_equal(del(bl, "carol"), BS_LIST_UNCHANGED);
    assert_true(blocked(bl, "bob"));
    assert_int_equal(BS_GET(bl->entries), 1);
    assert_int_equal(BS_GET(bl->updates), 6);

    /* Bad records: counted by reason, nothing changes. */
    static char big[BS_BLOCKLIST_MAX_ENTRY + 1];
    memset(big, 'b', sizeof big);
    assert_int_equal(bs_blocklist_apply(bl, NULL, 0, "1", 1),
                     BS_LIST_BAD_EMPTY_KEY);
    assert_int_equal(bs_blocklist_apply(bl, "", 0, NULL, 0),
                     BS_LIST_BAD_EMPTY_KEY);
    assert_int_equal(bs_blocklist_apply(bl, big, sizeof big, "1", 1),
                     BS_LIST_BAD_LONG_KEY);
    assert_int_equal(bs_blocklist_apply(bl, "bob", 3, "", 0),
                     BS_LIST_BAD_EMPTY_VALUE);
    assert_true(blocked(bl, "bob"));
    assert_false(bf_filter_contains(bl->filter, big, sizeof big));
    assert_int_equal(BS_GET(bl->skipped[0]), 2);
    assert_int_equal(BS_GET(bl->skipped[1]), 1);
    assert_int_equal(BS_GET(bl->skipped[2]), 1);
    assert_int_equal(BS_GET(bl->updates), 6);
    assert_int_equal(BS_GET(bl->entries), 1);
}

/* A random walk over a pool of keys against an exact model. */
static void test_model(void **state)
{
    fx *f = *state;
    assert_int_equal(load(f, 4000, "1e-6", NULL), 0);
    bs_blocklist *bl = &f->lists[0];
    enum { POOL = 5000, STEPS = 60000 };
    bool *in = calloc(POOL, 1);
    assert_non_null(in);
    uint64_t x = 88172645463325252ull, n = 0;
    char key[32];
    for (int step = 0; step < STEPS; step++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        int k = (int)(x % POOL);
        bool adding = (x >> 32) % 3 != 0; /* grows, so it passes 4000 */
        snprintf(key, sizeof key, "k%d", k);
        bs_list_change c = adding ? add(bl, key) : del(bl, key);
        if (adding)
            assert_int_equal(c, in[k] ? BS_LIST_UNCHANGED : BS_LIST_ADDED);
        else
            assert_int_equal(c, in[k] ? BS_LIST_REMOVED : BS_LIST_UNCHANGED);
        n += adding && !in[k];
        n -= !adding && in[k];
        in[k] = adding;
    }
    assert_int_equal(BS_GET(bl->entries), n);
    for (int k = 0; k < POOL; k++) {
        snprintf(key, sizeof key, "k%d", k);
        assert_int_equal(bs_blocklist_has(bl, key, strlen(key)), in[k]);
        if (in[k])
            assert_true(blocked(bl, key)); /* never a false negative */
    }
    free(in);
}

static void test_base_file(void **state)
{
    fx *f = *state;
    assert_int_equal(load(f, 100, "1e-9",
                          "# base\nfile-a\n  file-b \r\n\nfile-a\n"), 0);
    bs_blocklist *bl = &f->lists[0];
    assert_true(bl->from_list);
    assert_int_equal(bl->base_entries, 2);
    assert_int_equal(BS_GET(bl->entries), 2);
    assert_int_equal(BS_GET(bl->updates), 0);
    assert_true(blocked(bl, "file-a") && blocked(bl, "file-b"));
    /* A tombstone removes an entry that came from the file. */
    assert_int_equal(del(bl, "file-a"), BS_LIST_REMOVED);
    assert_false(blocked(bl, "file-a"));
    assert_int_equal(add(bl, "file-b"), BS_LIST_UNCHANGED);
    assert_int_equal(add(bl, "topic-c"), BS_LIST_ADDED);
    assert_int_equal(BS_GET(bl->entries), 2);
}

static void test_base_file_refused(void **state)
{
    fx *f = *state;
    /* A filter file cannot be a live list's base. */
    char path[600], *text = NULL;
    snprintf(path, sizeof path, "%s/x.bf", f->dir);
    bf_blocked *b = bf_blocked_new(10, 0.01, BF_DEFAULT_SEED, f->err,
                                   sizeof f->err);
    bf_filter *flt = bf_filter_from_blocked(b);
    assert_int_equal(bf_filter_save_file(flt, path, f->err, sizeof f->err),
                     BF_OK);
    bf_filter_destroy(flt);
    f->cfg = bs_config_new();
    const char *kv[] = {"input.topics", "in", "output.topic", "out",
                        "blocklist.t.topic", "lst", "blocklist.t.path", path};
    for (size_t i = 0; i < 8; i += 2)
        assert_int_equal(bs_config_set(f->cfg, kv[i], kv[i + 1], NULL,
                                       f->err, sizeof f->err), 0);
    assert_int_equal(bs_config_validate(f->cfg, f->err, sizeof f->err), 0);
    bs_settings set;
    assert_int_equal(bs_settings_from_config(f->cfg, &set, f->err,
                                             sizeof f->err), 0);
    assert_int_equal(bs_blocklists_load(&set, &f->lists, &f->n, f->err,
                                        sizeof f->err), -1);
    assert_null(f->lists);
    assert_non_null(strstr(f->err, "blocklist 't': "));
    assert_non_null(strstr(f->err, "a filter file cannot be the base"));
    bs_config_destroy(f->cfg);
    f->cfg = NULL;

    /* An entry over the cap, named by line. */
    size_t len = BS_BLOCKLIST_MAX_ENTRY + 20;
    text = malloc(len + 8);
    memcpy(text, "ok\n", 3);
    memset(text + 3, 'z', len);
    strcpy(text + 3 + len, "\n");
    assert_int_equal(load(f, 100, "1e-6", text), -1);
    assert_non_null(strstr(f->err, "base.txt:2: an entry of 16404 bytes"));
    free(text);
}

/* Far past its capacity: rebuilt larger, every entry kept, the measured
 * rate within the target. */
static void test_grows(void **state)
{
    fx *f = *state;
    const double fpr = 1e-3;
    assert_int_equal(load(f, 1000, "1e-3", NULL), 0);
    bs_blocklist *bl = &f->lists[0];
    char key[32];
    enum { N = 50000, PROBES = 200000 };
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof key, "entry-%d", i);
        assert_int_equal(add(bl, key), BS_LIST_ADDED);
    }
    assert_true(BS_GET(bl->rebuilds) >= 5); /* 1000 -> 2000 -> ... 64000 */
    assert_true(bl->capacity >= N);
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof key, "entry-%d", i);
        assert_true(blocked(bl, key));
    }
    uint64_t fp = 0;
    for (int i = 0; i < PROBES; i++) {
        snprintf(key, sizeof key, "absent-%d", i);
        fp += blocked(bl, key);
    }
    /* Expected <= 200 at 1e-3; allow the mean plus 4 standard deviations
     * of a Poisson count (200 + 4 * sqrt(200) = 257). */
    double mean = fpr * PROBES;
    printf("test_grows: %llu false positives in %d absent keys (target "
           "rate %.0e, %llu rebuilds, capacity %llu)\n",
           (unsigned long long)fp, PROBES, fpr,
           (unsigned long long)BS_GET(bl->rebuilds),
           (unsigned long long)bl->capacity);
    assert_true((double)fp <= mean + 4 * sqrt(mean));
    assert_int_equal(BS_GET(bl->saturated), 0);
}

/* Keys whose counters, in a filter of capacity 64 at 1e-1, are exactly
 * those of "anchor": found with a scratch filter of the same geometry
 * (same capacity, rate and seed) holding the anchor alone.  Then 17 of
 * them on the list push the anchor's counters past 15. */
static void test_saturation(void **state)
{
    fx *f = *state;
    assert_int_equal(load(f, 64, "0.1", NULL), 0);
    bs_blocklist *bl = &f->lists[0];
    bf_counting *scratch = bf_counting_new(64, 0.1, bl->seed, f->err,
                                           sizeof f->err);
    assert_non_null(scratch);
    assert_true(bf_counting_add(scratch, "anchor", 6));
    enum { TWINS = 17 };
    char twins[TWINS][32];
    int found = 0;
    for (long i = 0; found < TWINS && i < 200000000L; i++) {
        char key[32];
        int len = snprintf(key, sizeof key, "twin-%ld", i);
        if (bf_counting_min_count_h(scratch, bf_hash_key(key, (size_t)len,
                                                         bl->seed)) > 0)
            memcpy(twins[found++], key, (size_t)len + 1);
    }
    bf_counting_destroy(scratch);
    assert_int_equal(found, TWINS);

    assert_int_equal(add(bl, "anchor"), BS_LIST_ADDED);
    for (int i = 0; i < TWINS; i++)
        assert_int_equal(add(bl, twins[i]), BS_LIST_ADDED);
    assert_int_equal(BS_GET(bl->rebuilds), 0); /* 18 entries <= 64 */
    assert_true(BS_GET(bl->saturated) > 0);
    uint64_t sat = BS_GET(bl->saturated);
    printf("test_saturation: %llu counters saturated by 18 entries on one "
           "entry's counters\n", (unsigned long long)sat);

    /* Removals: each one (1 >= 1% of 17 entries) rebuilds from the set
     * while counters stay saturated; nothing on the list is ever missed. */
    for (int i = 0; i < TWINS; i++) {
        assert_int_equal(del(bl, twins[i]), BS_LIST_REMOVED);
        assert_true(blocked(bl, "anchor"));
        for (int j = i + 1; j < TWINS; j++)
            assert_true(blocked(bl, twins[j]));
    }
    /* Down to the anchor alone: the rebuilds cleared the saturation, and
     * the removed twins are unblocked only as far as the anchor allows
     * (they share its counters: still maybe-present, by construction). */
    assert_true(BS_GET(bl->rebuilds) >= 1);
    assert_int_equal(BS_GET(bl->saturated), 0);
    assert_int_equal(BS_GET(bl->entries), 1);
    assert_int_equal(del(bl, "anchor"), BS_LIST_REMOVED);
    assert_false(blocked(bl, "anchor"));
    for (int i = 0; i < TWINS; i++)
        assert_false(blocked(bl, twins[i]));
}

/* Whether a record's key is blocked by bl, as the record path asks: its
 * lookups (one, or a domain and its parents), any of them present. */
static bool key_blocked(bs_blocklist *bl, const char *key)
{
    bf_hash h[BS_BLOCKLIST_MAX_LOOKUPS];
    unsigned n = bs_blocklist_lookups(bl, key, strlen(key), h);
    for (unsigned i = 0; i < n; i++)
        if (bf_filter_contains_h(bl->filter, h[i]))
            return true;
    return false;
}

/* A domain list: an entry blocks its domain and every subdomain, from an
 * address or a URL, whatever the case; never a look-alike or a parent. */
static void test_domain_list(void **state)
{
    fx *f = *state;
    assert_int_equal(load_as(f, 1000, "1e-9", "# spam\n Spam.Example\n",
                             "lower,trim", "domain"), 0);
    bs_blocklist *bl = &f->lists[0];
    assert_int_equal(BS_GET(bl->entries), 1);
    assert_true(bs_blocklist_has(bl, "spam.example", 12));
    /* Entries from the topic are made into domains the same way. */
    assert_int_equal(add(bl, " @Other.Example. "), BS_LIST_ADDED);
    assert_int_equal(add(bl, "OTHER.example"), BS_LIST_UNCHANGED);
    assert_int_equal(add(bl, "   "), BS_LIST_BAD_EMPTY_KEY);
    static const char *const yes[] = {
        "u@MX3.Spam.Example", "spam.example", "SPAM.EXAMPLE.",
        " u@spam.example ", "https://user@mx.spam.example:8443/x?q=1",
        "a@b@deep.sub.other.example", "other.example"};
    static const char *const no[] = {
        "u@notspam.example", "spam.example.org", "u@example", "example",
        "u@spam-example", "https://example/spam.example", "@", ""};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
        if (!key_blocked(bl, yes[i]))
            fail_msg("'%s' should be blocked", yes[i]);
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        if (key_blocked(bl, no[i]))
            fail_msg("'%s' should not be blocked", no[i]);
    /* A removal by another spelling of the same domain removes it. */
    assert_int_equal(del(bl, "Other.Example"), BS_LIST_REMOVED);
    assert_false(key_blocked(bl, "u@other.example"));
}

/* normalize alone: the key and the entries lowercased, exact match. */
static void test_normalized_list(void **state)
{
    fx *f = *state;
    assert_int_equal(load_as(f, 1000, "1e-9", "Bad@Mail.Example\n", "lower",
                             NULL), 0);
    bs_blocklist *bl = &f->lists[0];
    assert_true(key_blocked(bl, "BAD@MAIL.EXAMPLE"));
    assert_true(key_blocked(bl, "bad@mail.example"));
    assert_false(key_blocked(bl, " bad@mail.example")); /* not trimmed */
    assert_false(key_blocked(bl, "x.bad@mail.example"));
    assert_int_equal(add(bl, "\xc3\x89TAT"), BS_LIST_ADDED); /* ÉTAT */
    assert_true(key_blocked(bl, "\xc3\xa9tat"));                 /* état */
}

/* The bound a domain list states: a key of L labels takes L lookups, so
 * its chance of a false block is at most L * fpr.  Measured: 200,000 keys
 * of three labels none of which is listed, against 10,000 listed domains
 * at fpr 1e-3: at most the Poisson(3 * 1e-3 * 200,000) 1e-6 quantile. */
static void test_domain_fpr_bound(void **state)
{
    fx *f = *state;
    enum { LISTED = 10000, KEYS = 200000 };
    char *base = h_xcalloc(LISTED, 32);
    size_t o = 0;
    for (int i = 0; i < LISTED; i++)
        o += (size_t)sprintf(base + o, "listed%d.example\n", i);
    assert_int_equal(load_as(f, 2 * LISTED, "1e-3", base, NULL, "domain"),
                     0);
    bs_blocklist *bl = &f->lists[0];
    uint64_t blocked = 0;
    char key[64];
    for (int i = 0; i < KEYS; i++) {
        snprintf(key, sizeof(key), "u@mx%d.host%d.tld%d", i, i % 977, i % 13);
        blocked += key_blocked(bl, key);
    }
    uint64_t bound = h_poisson_upper(3 * 1e-3 * KEYS, 1e-6);
    print_message("domain list: %llu of %d three-label keys falsely blocked "
                  "(L * fpr expects %.0f, at most %llu allowed)\n",
                  (unsigned long long)blocked, KEYS, 3 * 1e-3 * KEYS,
                  (unsigned long long)bound);
    assert_true(blocked <= bound);
    free(base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode),
        cmocka_unit_test_setup_teardown(test_add_remove, setup, teardown),
        cmocka_unit_test_setup_teardown(test_model, setup, teardown),
        cmocka_unit_test_setup_teardown(test_base_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_base_file_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_grows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_saturation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_domain_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_normalized_list, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_domain_fpr_bound, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
