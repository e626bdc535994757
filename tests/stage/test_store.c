/*
 * test_store.c -- the checkpoint stores (store.c), both kinds.  The
 * directory store: a round of puts made durable by sync, read back by get;
 * a damaged file stops bs_store_check and get with its name; temp files a
 * crash left are removed by check; a partition never checkpointed reads as
 * "none"; a dead branch a read-only disk keeps makes a restore one to
 * retry.  The Kafka
 * store against librdkafka's mock cluster in process: the round trip, the
 * chunking under checkpoint.chunk.bytes, the manifest written only after
 * every chunk was acknowledged, the previous checkpoint's chunks
 * tombstoned, the newest manifest winning, delivery reports that land on
 * the right checkpoint whatever failed before, and a leader that does not
 * answer told apart from a damaged state.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "support.h"
#include "inproc_mock.h"
#include "base/settings.h"
#include "store/store.h"
#include "store/store_kafka_records.h"

#include <dirent.h>
#include <sys/stat.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#define GROUP "g"
#define CKTOPIC "ckpts"

/* -- helpers -------------------------------------------------------------- */

/* A scalable filter holding "TAG-0".."TAG-(n-1)"; `capacity` sets its size
 * (and so the checkpoint's). */
static bf_filter *filter_with(const char *tag, int n, uint64_t capacity)
{
    bf_scalable_params p;
    bf_scalable_params_default(&p);
    p.initial_capacity = capacity;
    bf_scalable *sb = bf_scalable_new(&p, NULL, 0);
    assert_non_null(sb);
    for (int i = 0; i < n; i++) {
        char k[64];
        int len = snprintf(k, sizeof(k), "%s-%d", tag, i);
        assert_int_equal(bf_scalable_add_if_absent(sb, k, (size_t)len), 1);
    }
    return bf_filter_from_scalable(sb);
}

static void assert_holds(const bf_filter *f, const char *tag, int n)
{
    for (int i = 0; i < n; i++) {
        char k[64];
        int len = snprintf(k, sizeof(k), "%s-%d", tag, i);
        if (!bf_filter_contains(f, k, (size_t)len))
            fail_msg("the restored filter lacks %s", k);
    }
}

static bs_config *store_config(const char *const *kv)
{
    bs_config *cfg = bs_config_new();
    assert_non_null(cfg);
    char err[512];
    for (size_t i = 0; kv[i]; i += 2)
        if (bs_config_set(cfg, kv[i], kv[i + 1], "test", err, sizeof(err)))
            fail_msg("%s=%s: %s", kv[i], kv[i + 1], err);
    return cfg;
}

/* bs_store_new on cfg's typed settings (cfg completed with the required
 * topics and validated, as the stage has it). */
static bs_store *new_store(bs_config *cfg, rd_kafka_t *reader,
                           rd_kafka_conf_t *conf, char *err, size_t size)
{
    if (bs_config_set(cfg, "input.topics", "in", "test", err, size) ||
        bs_config_set(cfg, "output.topic", "out", "test", err, size) ||
        bs_config_validate(cfg, err, size))
        fail_msg("config: %s", err);
    bs_settings set;
    if (bs_settings_from_config(cfg, &set, err, size) != 0)
        fail_msg("settings: %s", err);
    return bs_store_new(&set, reader, conf, err, size);
}

/* The checkpoint of topic/part: 1, 0 or -1 as bs_store_get. */
static int get(bs_store *st, const char *topic, int32_t part,
               bs_checkpoint *c, char *err, size_t size)
{
    return bs_store_get(st, topic, part, BS_STORE_NEWEST, c, err, size);
}

static void expect_ckpt(bs_store *st, const char *topic, int32_t part,
                        int64_t next, const char *tag, int n)
{
    bs_checkpoint c;
    char err[1024] = "";
    int r = get(st, topic, part, &c, err, sizeof(err));
    if (r != 1)
        fail_msg("get %s [%d]: %d: %s", topic, (int)part, r, err);
    assert_string_equal(c.topic, topic);
    assert_int_equal(c.partition, part);
    assert_int_equal(c.next_offset, next);
    assert_holds(c.filter, tag, n);
    bs_ckpt_free(&c);
}

/* -- the directory store -------------------------------------------------- */

static char *tmpdir;

static int dir_setup(void **state)
{
    (void)state;
    return h_tmpdir_new(&tmpdir);
}

/* tmpdir is a tmpfs of the test's own (test_dir_dead_branch_kept). */
static bool tmpdir_mounted;

static int dir_teardown(void **state)
{
    (void)state;
    chmod(tmpdir, 0755);
    if (tmpdir_mounted && h_tmpfs_umount(tmpdir) != 0)
        fprintf(stderr, "teardown: %s\n", h_last_error());
    tmpdir_mounted = false;
    h_tmpdir_remove(tmpdir);
    free(tmpdir);
    tmpdir = NULL;
    return 0;
}

static bs_store *dir_store(bs_config **cfg)
{
    const char *kv[] = {"checkpoint.store", "dir", "checkpoint.dir", tmpdir,
                        NULL};
    *cfg = store_config(kv);
    char err[512] = "";
    bs_store *st = new_store(*cfg, NULL, NULL, err, sizeof(err));
    if (!st)
        fail_msg("bs_store_new: %s", err);
    return st;
}

static void test_dir_round_trip(void **state)
{
    (void)state;
    bs_config *cfg;
    bs_store *st = dir_store(&cfg);
    char err[1024] = "";
    if (bs_store_check(st, err, sizeof(err)) != 0) /* empty: fine */
        fail_msg("check: %s", err);
    bs_checkpoint c;
    assert_int_equal(get(st, "in", 0, &c, err, sizeof(err)), 0); /* none */
    bf_filter *f0 = filter_with("zero", 300, 1000);
    bf_filter *f1 = filter_with("one", 50, 1000);
    bs_ckpt_wm wm[2] = {{0, 5}, {1, 9}};
    assert_int_equal(bs_store_put(st, "in", 0, 300, wm, 2, f0, NULL, err,
                                  sizeof(err)), 0);
    assert_int_equal(bs_store_put(st, "in", 1, 50, NULL, 0, f1, NULL, err,
                                  sizeof(err)), 0);
    if (bs_store_sync(st, err, sizeof(err)) != 0)
        fail_msg("sync: %s", err);
    assert_int_equal(bs_store_sync(st, err, sizeof(err)), 0); /* nothing */
    expect_ckpt(st, "in", 0, 300, "zero", 300);
    expect_ckpt(st, "in", 1, 50, "one", 50);
    assert_int_equal(get(st, "in", 0, &c, err, sizeof(err)), 1);
    assert_int_equal(c.nwm, 2);
    assert_int_equal(c.wm[1].partition, 1);
    assert_int_equal(c.wm[1].high, 9);
    bs_ckpt_free(&c);
    assert_int_equal(get(st, "in", 2, &c, err, sizeof(err)), 0);
    if (bs_store_check(st, err, sizeof(err)) != 0)
        fail_msg("check: %s", err);
    assert_non_null(strstr(bs_store_describe(st), tmpdir));
    bs_store_destroy(st);
    bs_config_destroy(cfg);
    bf_filter_destroy(f0);
    bf_filter_destroy(f1);
}

/* The state at a committed offset (transactions): a state stays until one
 * after it is committed, so a crash between a checkpoint's write and its
 * commit still finds the committed one -- from the files alone after a
 * restart -- and a restore at an offset drops the states after it (never
 * committed: the next checkpoint builds on the one restored). */
static void expect_at(bs_store *st, int64_t at, int64_t want)
{
    bs_checkpoint c;
    char err[1024] = "";
    int r = bs_store_get(st, "in", 0, at, &c, err, sizeof(err));
    if (r < 0)
        fail_msg("get at %lld: %s", (long long)at, err);
    if (want < 0) {
        if (r != 0)
            fail_msg("get at %lld: found %lld, want none", (long long)at,
                     (long long)c.next_offset);
        return;
    }
    if (r != 1)
        fail_msg("get at %lld: none, want %lld", (long long)at,
                 (long long)want);
    assert_int_equal(c.next_offset, want);
    bs_ckpt_free(&c);
}

/* Puts and syncs; want_delta 1 or 0: the put must have written a delta, or
 * a snapshot; -1: either. */
/* put_sync with the partition's audit sample a (NULL: none). */
static void put_sync_audit(bs_store *st, int64_t next, bf_filter *f,
                           const bf_audit *a, int want_delta)
{
    char err[1024] = "";
    if (bs_store_put(st, "in", 0, next, NULL, 0, f, a, err, sizeof(err)) != 0 ||
        bs_store_sync(st, err, sizeof(err)) != 0)
        fail_msg("put %lld: %s", (long long)next, err);
    bool delta;
    uint64_t bytes = bs_store_last_bytes(st, &delta);
    if (want_delta >= 0 && delta != (want_delta == 1))
        fail_msg("put %lld wrote a %s (%llu bytes), expected a %s",
                 (long long)next, delta ? "delta" : "snapshot",
                 (unsigned long long)bytes, want_delta == 1 ? "delta" : "snapshot");
}

static void put_sync(bs_store *st, int64_t next, bf_filter *f,
                     int want_delta)
{
    put_sync_audit(st, next, f, NULL, want_delta);
}

/* An audit sample of every key (rate 1) for filters of the default seed,
 * and n lookups of "TAG-i" counted in it, every fifth a false positive. */
static bf_audit *audit_new(void)
{
    bf_scalable_params p;
    bf_scalable_params_default(&p);
    bf_audit *a = bf_audit_new(1.0, p.seed, NULL, 0);
    assert_non_null(a);
    return a;
}

static void audit_count(bf_audit *a, const char *tag, int n)
{
    for (int i = 0; i < n; i++) {
        char k[64];
        int len = snprintf(k, sizeof(k), "%s-%d", tag, i);
        assert_true(bf_audit_check(a, bf_hash_key(k, (size_t)len,
                                                  bf_audit_seed(a)),
                                   i % 5 == 0) >= 0);
    }
}

/* A restored state's audit sample has these counts. */
static void assert_audit(const bs_checkpoint *c, uint64_t lookups,
                         uint64_t fps)
{
    bf_audit_stats st;
    assert_non_null(c->audit);
    bf_audit_stats_get(c->audit, &st);
    if (st.lookups != lookups || st.false_positives != fps)
        fail_msg("state %llu: audit lookups %llu, false positives %llu; "
                 "expected %llu, %llu", (unsigned long long)c->seq,
                 (unsigned long long)st.lookups,
                 (unsigned long long)st.false_positives,
                 (unsigned long long)lookups, (unsigned long long)fps);
}


static void test_dir_state_at_committed_offset(void **state)
{
    (void)state;
    bs_config *cfg;
    bs_store *st = dir_store(&cfg);
    char err[1024] = "";
    bf_filter *f = filter_with("k", 100, 1000);
    put_sync(st, 100, f, -1);
    assert_int_equal(bs_store_committed(st, "in", 0, 100, err, sizeof(err)),
                     0);
    put_sync(st, 200, f, -1); /* written, not committed */
    put_sync(st, 300, f, -1); /* again not committed */
    expect_at(st, BS_STORE_NEWEST, 300);
    /* A restart: nothing in memory. */
    bs_store_destroy(st);
    bs_config_destroy(cfg);
    st = dir_store(&cfg);
    expect_at(st, 300, 300);
    expect_at(st, 250, 200); /* 300 is dropped */
    expect_at(st, BS_STORE_NEWEST, 200);
    expect_at(st, 150, 100); /* and 200 */
    expect_at(st, BS_STORE_NEWEST, 100);
    put_sync(st, 400, f, -1);
    assert_int_equal(bs_store_committed(st, "in", 0, 400, err, sizeof(err)),
                     0);
    expect_at(st, 400, 400);
    bs_store_destroy(st);
    bs_config_destroy(cfg);
    bf_filter_destroy(f);
}

/* Whether main could give the tests a mount namespace of their own (as
 * root): test_dir_dead_branch_kept's read-only disk is then a tmpfs. */
static bool own_mounts;

/*
 * A restore at a committed offset that must remove a dead branch (states
 * written past it, never committed) on a disk that refuses (read-only: a
 * tmpfs remounted so as root, the directory 0555 otherwise).  The get is
 * one to retry, BS_STORE_UNREACHABLE naming the file and the error, not
 * damage (-1, the stage's FATAL) and not a restore (1) with the dead
 * state left on disk: the next checkpoint would take its seq and a later
 * restore meet two states of one seq, or a delta on the wrong base.  The
 * disk writable again, the same get restores and removes it, and what is
 * written next reads back after a restart.
 */
static void test_dir_dead_branch_kept(void **state)
{
    (void)state;
    bool root = geteuid() == 0;
    if (root && !own_mounts)
        fail_msg("root without a mount namespace of its own: %s",
                 h_last_error());
    if (root) {
        H_CHECK(h_tmpfs_mount(tmpdir, "4m"));
        tmpdir_mounted = true;
    }
    bs_config *cfg;
    bs_store *st = dir_store(&cfg);
    char err[1024] = "";
    bf_filter *f = filter_with("k", 100, 1000);
    put_sync(st, 100, f, 0);
    assert_int_equal(bs_store_committed(st, "in", 0, 100, err, sizeof(err)),
                     0);
    put_sync(st, 200, f, 1); /* written, not committed: state 2, a delta */
    bs_store_destroy(st);
    bs_config_destroy(cfg);
    st = dir_store(&cfg);
    if (root)
        H_CHECK(h_tmpfs_remount(tmpdir, true, 10000));
    else
        assert_int_equal(chmod(tmpdir, 0555), 0);
    bs_checkpoint c;
    int r = bs_store_get(st, "in", 0, 150, &c, err, sizeof(err));
    if (r != BS_STORE_UNREACHABLE)
        fail_msg("get at 150 with the dead state not removable: %d (%s), "
                 "want BS_STORE_UNREACHABLE", r, err);
    if (!strstr(err, "in-0.2.ckpd: cannot remove it: "))
        fail_msg("get at 150: '%s' does not name the file kept", err);
    char *dead = h_strdupf("%s/in-0.2.ckpd", tmpdir);
    assert_int_equal(access(dead, F_OK), 0);
    if (root)
        H_CHECK(h_tmpfs_remount(tmpdir, false, 10000));
    else
        assert_int_equal(chmod(tmpdir, 0755), 0);
    expect_at(st, 150, 100);
    if (access(dead, F_OK) == 0)
        fail_msg("%s: still there after the restore", dead);
    free(dead);
    bf_filter_destroy(f);
    f = filter_with("k", 300, 1000); /* more changes: a snapshot */
    put_sync(st, 300, f, -1);
    bs_store_destroy(st);
    bs_config_destroy(cfg);
    st = dir_store(&cfg);
    expect_at(st, BS_STORE_NEWEST, 300);
    bs_store_destroy(st);
    bs_config_destroy(cfg);
    bf_filter_destroy(f);
}

static void test_dir_damage_and_crash_leftovers(void **state)
{
    (void)state;
    bs_config *cfg;
    bs_store *st = dir_store(&cfg);
    char err[1024] = "";
    bf_filter *f = filter_with("k", 100, 1000);
    for (int p = 0; p < 2; p++)
        assert_int_equal(bs_store_put(st, "in", p, 100, NULL, 0, f, NULL, err,
                                      sizeof(err)), 0);
    assert_int_equal(bs_store_sync(st, err, sizeof(err)), 0);

    /* What a crash between the temp file's creation and its rename leaves,
     * next to files that are not the store's. */
    char *tmp_ckpt = h_strdupf("%s/in-0.ckpt.tmp.Ab3dEf", tmpdir);
    char *tmp_other = h_strdupf("%s/other.bin.tmp.Ab3dEf", tmpdir);
    char *notes = h_strdupf("%s/notes.txt", tmpdir);
    H_CHECK(h_write_file(tmp_ckpt, "half a checkpoint"));
    H_CHECK(h_write_file(tmp_other, "someone else's"));
    H_CHECK(h_write_file(notes, "not a checkpoint"));
    if (bs_store_check(st, err, sizeof(err)) != 0)
        fail_msg("check: %s", err);
    assert_int_equal(access(tmp_ckpt, F_OK), -1);
    assert_int_equal(access(tmp_other, F_OK), 0);
    assert_int_equal(access(notes, F_OK), 0);

    /* One flipped byte in in-1.ckpt: check and get both name the file. */
    char *path = h_strdupf("%s/in-1.ckpt", tmpdir);
    char *buf;
    size_t len;
    H_CHECK(h_read_file(path, &buf, &len));
    buf[len / 2] ^= 0x40;
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(buf, 1, len, fp), len);
    assert_int_equal(fclose(fp), 0);
    free(buf);
    err[0] = '\0';
    assert_int_equal(bs_store_check(st, err, sizeof(err)), -1);
    if (!strstr(err, "in-1.ckpt"))
        fail_msg("check's error does not name in-1.ckpt: %s", err);
    bs_checkpoint c;
    err[0] = '\0';
    assert_int_equal(get(st, "in", 1, &c, err, sizeof(err)), -1);
    if (!strstr(err, "in-1.ckpt"))
        fail_msg("get's error does not name in-1.ckpt: %s", err);
    expect_ckpt(st, "in", 0, 100, "k", 100); /* the other is fine */

    free(tmp_ckpt);
    free(tmp_other);
    free(notes);
    free(path);
    bs_store_destroy(st);
    bs_config_destroy(cfg);
    bf_filter_destroy(f);
}

/* -- the directory store's chains ----------------------------------------- */

static bs_store *chain_store(bs_config **cfg, const char *dir,
                             const char *max, const char *ratio)
{
    const char *kv[] = {"checkpoint.store", "dir", "checkpoint.dir", dir,
                        "checkpoint.delta.max", max,
                        "checkpoint.delta.ratio", ratio, NULL};
    *cfg = store_config(kv);
    char err[512] = "";
    bs_store *st = new_store(*cfg, NULL, NULL, err, sizeof(err));
    if (!st)
        fail_msg("bs_store_new: %s", err);
    return st;
}

static void add_tagged(bf_filter *f, const char *tag, int n)
{
    for (int i = 0; i < n; i++) {
        char k[64];
        int len = snprintf(k, sizeof(k), "%s-%d", tag, i);
        assert_int_equal(bf_filter_add(f, k, (size_t)len), 1);
    }
}

/* How many of TAG-0..n-1 f holds. */
static int holds_count(const bf_filter *f, const char *tag, int n)
{
    int c = 0;
    for (int i = 0; i < n; i++) {
        char k[64];
        int len = snprintf(k, sizeof(k), "%s-%d", tag, i);
        c += bf_filter_contains(f, k, (size_t)len);
    }
    return c;
}

static bool exists(const char *dir, const char *name)
{
    char *p = h_strdupf("%s/%s", dir, name);
    bool e = access(p, F_OK) == 0;
    free(p);
    return e;
}

static size_t count_files(const char *dir)
{
    size_t n = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

static void assert_same_filter(const bf_filter *a, const bf_filter *b)
{
    bf_membuf x = {NULL, 0, 0}, y = {NULL, 0, 0};
    assert_int_equal(bf_filter_serialize(a, bf_membuf_write, &x), BF_OK);
    assert_int_equal(bf_filter_serialize(b, bf_membuf_write, &y), BF_OK);
    assert_int_equal(x.len, y.len);
    assert_memory_equal(x.buf, y.buf, x.len);
    free(x.buf);
    free(y.buf);
}

/* Snapshot, deltas up to checkpoint.delta.max, a snapshot again (the old
 * one set aside); a restore of the newest state is the filter bit for bit;
 * a commit drops what no restore can need; a restore at an older offset
 * gives that state and removes the ones after it, and the next checkpoint
 * is a delta on it. */
static void test_dir_chain(void **state)
{
    (void)state;
    bs_config *cfg;
    bs_store *st = chain_store(&cfg, tmpdir, "3", "10");
    char err[1024] = "", tag[16];
    assert_int_equal(bs_store_check(st, err, sizeof(err)), 0);
    bf_filter *f = filter_with("r0", 50, 20000);
    /* The audit sample goes whole into every state, deltas too: state s
     * holds 50 s lookups, 10 s false positives. */
    bf_audit *a = audit_new();
    audit_count(a, "r0", 50);
    put_sync_audit(st, 100, f, a, false); /* seq 1 */
    for (int r = 1; r <= 8; r++) {
        snprintf(tag, sizeof(tag), "r%d", r);
        add_tagged(f, tag, 50);
        audit_count(a, tag, 50);
        /* seq r+1: deltas 2-4, a snapshot at 5, deltas 6-8, one at 9 */
        put_sync_audit(st, 100 * (r + 1), f, a, (r + 1) % 4 != 1);
    }
    bf_audit_destroy(a);
    const char *all[] = {"in-0.1.ckps", "in-0.2.ckpd", "in-0.3.ckpd",
                         "in-0.4.ckpd", "in-0.5.ckps", "in-0.6.ckpd",
                         "in-0.7.ckpd", "in-0.8.ckpd", "in-0.ckpt"};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        if (!exists(tmpdir, all[i]))
            fail_msg("%s missing: no commit yet, every state is kept",
                     all[i]);
    assert_int_equal(count_files(tmpdir), 9);
    assert_int_equal(bs_store_check(st, err, sizeof(err)), 0);

    /* A delta is its changed blocks, not the filter. */
    bf_info in;
    bf_filter_info(f, &in);
    char *d2 = h_strdupf("%s/in-0.2.ckpd", tmpdir);
    struct stat sb;
    assert_int_equal(stat(d2, &sb), 0);
    if ((uint64_t)sb.st_size > in.bytes / 10)
        fail_msg("a 50-key delta of a %llu-byte filter is %lld bytes",
                 (unsigned long long)in.bytes, (long long)sb.st_size);
    free(d2);

    /* The newest state, by a store that knows nothing yet. */
    bs_config *cfg2;
    bs_store *st2 = chain_store(&cfg2, tmpdir, "3", "10");
    bs_checkpoint c;
    assert_int_equal(get(st2, "in", 0, &c, err, sizeof(err)), 1);
    assert_int_equal(c.next_offset, 900);
    assert_int_equal(c.seq, 9);
    assert_same_filter(f, c.filter);
    assert_audit(&c, 450, 90);
    bs_ckpt_free(&c);

    /* Offsets up to 700 committed: states 1-4 go, 5 (under 7) stays. */
    assert_int_equal(bs_store_committed(st, "in", 0, 700, err, sizeof(err)),
                     0);
    assert_false(exists(tmpdir, "in-0.1.ckps"));
    assert_false(exists(tmpdir, "in-0.4.ckpd"));
    assert_true(exists(tmpdir, "in-0.5.ckps"));
    assert_int_equal(count_files(tmpdir), 5);

    /* A restore at offset 650 (the committed state of a transaction): the
     * state covering up to 600, seq 6 = snapshot 5 + delta 6. */
    assert_int_equal(bs_store_get(st2, "in", 0, 650, &c, err, sizeof(err)),
                     1);
    assert_int_equal(c.next_offset, 600);
    assert_int_equal(c.seq, 6);
    assert_audit(&c, 300, 60);
    for (int r = 0; r <= 8; r++) {
        snprintf(tag, sizeof(tag), "r%d", r);
        int have = holds_count(c.filter, tag, 50);
        if (r <= 5 ? have != 50 : have > 1)
            fail_msg("state 6 holds %d of %s's 50 keys", have, tag);
    }
    /* States 7-9 were never committed: gone, so nothing chains onto them. */
    assert_false(exists(tmpdir, "in-0.7.ckpd"));
    assert_false(exists(tmpdir, "in-0.ckpt"));
    assert_int_equal(count_files(tmpdir), 2);
    /* The restored filter's next checkpoint is a delta on state 6. */
    add_tagged(c.filter, "after", 40);
    put_sync(st2, 610, c.filter, true);
    assert_true(exists(tmpdir, "in-0.7.ckpd"));
    bs_config *cfg3;
    bs_store *st3 = chain_store(&cfg3, tmpdir, "3", "10");
    bs_checkpoint c3;
    assert_int_equal(get(st3, "in", 0, &c3, err, sizeof(err)), 1);
    assert_int_equal(c3.next_offset, 610);
    assert_same_filter(c.filter, c3.filter);
    bs_ckpt_free(&c3);
    /* Nothing at or before offset 50: said, not a fresh filter. */
    assert_int_equal(bs_store_get(st3, "in", 0, 50, &c3, err, sizeof(err)),
                     -1);
    assert_non_null(strstr(err, "no checkpoint of in [0] at or before"));
    bs_ckpt_free(&c);
    bs_store_destroy(st3);
    bs_config_destroy(cfg3);
    bs_store_destroy(st2);
    bs_config_destroy(cfg2);
    bs_store_destroy(st);
    bs_config_destroy(cfg);
    bf_filter_destroy(f);
}

/* checkpoint.delta.ratio: the chain's bytes stay under that fraction of
 * the snapshot's; checkpoint.delta.max 0: snapshots only; a windowed
 * filter is always whole. */
static void test_dir_chain_bounds(void **state)
{
    (void)state;
    bs_config *cfg;
    bs_store *st = chain_store(&cfg, tmpdir, "1000", "0.5");
    bf_filter *f = filter_with("b0", 10, 1000);
    put_sync(st, 1, f, false);
    int deltas = 0;
    for (int r = 1; r <= 30; r++) {
        char tag[16];
        snprintf(tag, sizeof(tag), "b%d", r);
        add_tagged(f, tag, 5);
        char err[1024];
        assert_int_equal(bs_store_put(st, "in", 0, r + 1, NULL, 0, f, NULL, err,
                                      sizeof(err)), 0);
        assert_int_equal(bs_store_sync(st, err, sizeof(err)), 0);
        bool delta;
        (void)bs_store_last_bytes(st, &delta);
        deltas += delta;
    }
    /* ~5 blocks of 72 bytes and ~250 bytes of headers a delta against a
     * ~5 KiB snapshot: a few deltas, then a snapshot */
    assert_true(deltas > 0 && deltas < 30);
    bs_store_destroy(st);
    bs_config_destroy(cfg);

    st = chain_store(&cfg, tmpdir, "0", "0.5");
    add_tagged(f, "zero", 5);
    put_sync(st, 100, f, false);
    add_tagged(f, "zero2", 5);
    put_sync(st, 101, f, false);
    bs_store_destroy(st);
    bs_config_destroy(cfg);

    st = chain_store(&cfg, tmpdir, "10", "0.5");
    bf_windowed_params wp;
    bf_windowed_params_default(&wp);
    bf_filter *w = bf_filter_from_windowed(bf_windowed_new(&wp, NULL, 0));
    put_sync(st, 1000, w, false);
    assert_int_equal(bf_filter_add(w, "k", 1), 1);
    put_sync(st, 1001, w, false);
    bs_checkpoint c;
    char err[1024];
    assert_int_equal(get(st, "in", 0, &c, err, sizeof(err)), 1);
    assert_int_equal(c.next_offset, 1001);
    assert_true(bf_filter_contains(c.filter, "k", 1));
    bs_ckpt_free(&c);
    bs_store_destroy(st);
    bs_config_destroy(cfg);
    bf_filter_destroy(w);
    bf_filter_destroy(f);
}

static void expect_get_fails(const char *dir, const char *want1,
                             const char *want2)
{
    bs_config *cfg;
    bs_store *st = chain_store(&cfg, dir, "10", "10");
    bs_checkpoint c;
    char err[1024] = "";
    assert_int_equal(get(st, "in", 0, &c, err, sizeof(err)), -1);
    if (!strstr(err, want1) || (want2 && !strstr(err, want2)))
        fail_msg("expected \"%s\" and \"%s\" in: %s", want1,
                 want2 ? want2 : "", err);
    bs_store_destroy(st);
    bs_config_destroy(cfg);
}

/* A chain that cannot reach its newest state fails, naming the file and
 * what is wrong: a damaged delta, a missing one, one of another chain. */
static void test_dir_chain_damage_named(void **state)
{
    (void)state;
    bs_config *cfg;
    bs_store *st = chain_store(&cfg, tmpdir, "10", "10");
    bf_filter *f = filter_with("d0", 50, 5000);
    put_sync(st, 10, f, false);
    add_tagged(f, "d1", 30);
    put_sync(st, 20, f, true);
    add_tagged(f, "d2", 30);
    put_sync(st, 30, f, true);
    bs_store_destroy(st);
    bs_config_destroy(cfg);
    char *d2 = h_strdupf("%s/in-0.2.ckpd", tmpdir);
    char *d3 = h_strdupf("%s/in-0.3.ckpd", tmpdir);
    char *buf, *good;
    size_t len;
    H_CHECK(h_read_file(d2, &good, &len));

    /* damaged: check and get name it */
    buf = malloc(len);
    memcpy(buf, good, len);
    buf[len / 2] ^= 0x08;
    H_CHECK(h_write_bytes(d2, buf, len));
    expect_get_fails(tmpdir, "in-0.2.ckpd", "checksum");
    st = chain_store(&cfg, tmpdir, "10", "10");
    char err[1024] = "";
    assert_int_equal(bs_store_check(st, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "in-0.2.ckpd"));
    bs_store_destroy(st);
    bs_config_destroy(cfg);
    /* truncated */
    H_CHECK(h_write_bytes(d2, good, len - 9));
    expect_get_fails(tmpdir, "in-0.2.ckpd", "truncated");

    /* missing: the chain breaks at the next one */
    assert_int_equal(unlink(d2), 0);
    expect_get_fails(tmpdir, "in-0.3.ckpd", "missing");

    /* a delta of another chain (same partition, same seq, another run) */
    char *other;
    H_CHECK(h_tmpdir_new(&other));
    st = chain_store(&cfg, other, "10", "10");
    bf_filter *g = filter_with("d0", 50, 5000);
    put_sync(st, 10, g, false);
    add_tagged(g, "d1", 30);
    put_sync(st, 20, g, true);
    bs_store_destroy(st);
    bs_config_destroy(cfg);
    char *od2 = h_strdupf("%s/in-0.2.ckpd", other), *obuf;
    size_t olen;
    H_CHECK(h_read_file(od2, &obuf, &olen));
    H_CHECK(h_write_bytes(d2, obuf, olen));
    expect_get_fails(tmpdir, "in-0.2.ckpd", "base mismatch");
    /* the right one back: whole again */
    H_CHECK(h_write_bytes(d2, good, len));
    st = chain_store(&cfg, tmpdir, "10", "10");
    bs_checkpoint c;
    assert_int_equal(get(st, "in", 0, &c, err, sizeof(err)), 1);
    assert_same_filter(f, c.filter);
    bs_ckpt_free(&c);
    bs_store_destroy(st);
    bs_config_destroy(cfg);
    /* A crash between setting the snapshot aside and writing the new one
     * leaves no in-0.ckpt: the set-aside one still anchors the chain. */
    char *snap = h_strdupf("%s/in-0.ckpt", tmpdir);
    char *aside = h_strdupf("%s/in-0.1.ckps", tmpdir);
    assert_int_equal(rename(snap, aside), 0);
    st = chain_store(&cfg, tmpdir, "10", "10");
    assert_int_equal(get(st, "in", 0, &c, err, sizeof(err)), 1);
    assert_same_filter(f, c.filter);
    assert_int_equal(c.next_offset, 30);
    /* and the next checkpoint chains on it */
    add_tagged(c.filter, "d3", 30);
    put_sync(st, 40, c.filter, true);
    bs_checkpoint c2;
    assert_int_equal(get(st, "in", 0, &c2, err, sizeof(err)), 1);
    assert_same_filter(c.filter, c2.filter);
    bs_ckpt_free(&c2);
    bs_ckpt_free(&c);
    free(snap);
    free(aside);
    /* a crash mid-write of a delta leaves a temp file: check removes it */
    char *tmp = h_strdupf("%s/in-0.4.ckpd.tmp.Ab3dEf", tmpdir);
    H_CHECK(h_write_file(tmp, "half a delta"));
    assert_int_equal(bs_store_check(st, err, sizeof(err)), 0);
    assert_int_equal(access(tmp, F_OK), -1);
    bs_store_destroy(st);
    bs_config_destroy(cfg);
    h_tmpdir_remove(other);
    free(other);
    free(od2);
    free(obuf);
    free(tmp);
    free(buf);
    free(good);
    free(d2);
    free(d3);
    bf_filter_destroy(f);
    bf_filter_destroy(g);
}

static void test_dir_missing_dir(void **state)
{
    (void)state;
    const char *kv[] = {"checkpoint.store", "dir", "checkpoint.dir",
                        "/nonexistent-bs-store-parent/dir", NULL};
    bs_config *cfg = store_config(kv);
    char err[1024] = "";
    bs_store *st = new_store(cfg, NULL, NULL, err, sizeof(err));
    assert_non_null(st);
    assert_int_equal(bs_store_check(st, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "/nonexistent-bs-store-parent/dir"));
    bs_store_destroy(st);
    bs_config_destroy(cfg);
}

/* -- the Kafka store's records without a broker --------------------------- */

/* Parses a manifest that must name one state (into *m), or none (-1). */
static int parse_str(const char *json, bs_store_manifest *m)
{
    bs_store_manifest *states;
    size_t n;
    if (bs_store_manifest_parse(json, strlen(json), &states, &n) != 0)
        return -1;
    assert_int_equal(n, 1);
    *m = states[0];
    free(states);
    return 0;
}

#define STATE_JSON(seq, first)                                                \
    "{\"seq\":" #seq ",\"chunks\":2,\"chunk_bytes\":1024,\"size\":1500,"     \
    "\"xxh3\":\"00000000deadbeef\",\"first\":" #first "}"

static void test_manifest_parse(void **state)
{
    (void)state;
    bs_store_manifest m;
    assert_int_equal(parse_str("{\"v\":1,\"seq\":3,\"chunks\":2,"
                               "\"chunk_bytes\":1024,\"size\":1500,"
                               "\"xxh3\":\"00000000deadBEEF\",\"first\":7,"
                               "\"input_offset\":9}", &m), 0);
    assert_int_equal(m.seq, 3);
    assert_int_equal(m.nchunks, 2);
    assert_int_equal(m.chunk_bytes, 1024);
    assert_int_equal(m.size, 1500);
    assert_int_equal(m.xxh3, 0xdeadbeefULL);
    assert_int_equal(m.first, 7);
    const char *bad[] = {
        "",
        "{",
        "[]",
        "{\"v\":1}",
        /* each field wrong in turn */
        "{\"v\":2,\"seq\":3,\"chunks\":2,\"chunk_bytes\":1024,\"size\":1500,"
        "\"xxh3\":\"00000000deadbeef\",\"first\":7}",
        "{\"v\":1,\"seq\":0,\"chunks\":2,\"chunk_bytes\":1024,\"size\":1500,"
        "\"xxh3\":\"00000000deadbeef\",\"first\":7}",
        "{\"v\":1,\"seq\":3,\"chunks\":3,\"chunk_bytes\":1024,\"size\":1500,"
        "\"xxh3\":\"00000000deadbeef\",\"first\":7}",
        "{\"v\":1,\"seq\":3,\"chunks\":1,\"chunk_bytes\":1024,\"size\":1500,"
        "\"xxh3\":\"00000000deadbeef\",\"first\":7}",
        "{\"v\":1,\"seq\":3,\"chunks\":2,\"chunk_bytes\":0,\"size\":1500,"
        "\"xxh3\":\"00000000deadbeef\",\"first\":7}",
        "{\"v\":1,\"seq\":3,\"chunks\":2,\"chunk_bytes\":1024,\"size\":0,"
        "\"xxh3\":\"00000000deadbeef\",\"first\":7}",
        "{\"v\":1,\"seq\":3,\"chunks\":2,\"chunk_bytes\":1024,\"size\":1500,"
        "\"xxh3\":\"deadbeef\",\"first\":7}",
        "{\"v\":1,\"seq\":3,\"chunks\":2,\"chunk_bytes\":1024,\"size\":1500,"
        "\"xxh3\":\"00000000deadbeeg\",\"first\":7}",
        "{\"v\":1,\"seq\":3,\"chunks\":2,\"chunk_bytes\":1024,\"size\":1500,"
        "\"xxh3\":\"00000000deadbeef\",\"first\":-1}",
        "{\"v\":1,\"seq\":3,\"chunks\":2,\"chunk_bytes\":1024,\"size\":1500,"
        "\"xxh3\":\"00000000deadbeef\"}",
        "{\"v\":1,\"seq\":3,\"chunks\":2,\"chunk_bytes\":1024,\"size\":1500.5,"
        "\"xxh3\":\"00000000deadbeef\",\"first\":7}",
        "{\"v\":1,\"seq\":3,\"chunks\":2,\"chunk_bytes\":\"1024\","
        "\"size\":1500,\"xxh3\":\"00000000deadbeef\",\"first\":7}",
        /* a size no checkpoint has, and chunks too big for the config */
        "{\"v\":1,\"seq\":3,\"chunks\":1048576,\"chunk_bytes\":16777216,"
        "\"size\":17592186044416,\"xxh3\":\"00000000deadbeef\",\"first\":7}",
        "{\"v\":1,\"seq\":3,\"chunks\":1,\"chunk_bytes\":33554432,"
        "\"size\":33554432,\"xxh3\":\"00000000deadbeef\",\"first\":7}",
        /* version 2: a chain, seq consecutive, first not decreasing */
        "{\"v\":2,\"states\":[]}",
        "{\"v\":2,\"states\":{}}",
        "{\"v\":2}",
        "{\"v\":3,\"states\":[" STATE_JSON(3, 7) "]}",
        "{\"v\":2,\"states\":[" STATE_JSON(3, 7) "," STATE_JSON(5, 9) "]}",
        "{\"v\":2,\"states\":[" STATE_JSON(3, 7) "," STATE_JSON(3, 9) "]}",
        "{\"v\":2,\"states\":[" STATE_JSON(3, 7) "," STATE_JSON(4, 6) "]}",
        "{\"v\":2,\"states\":[" STATE_JSON(3, 7) ",{\"seq\":4}]}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        bs_store_manifest *states = NULL;
        size_t n = 99;
        if (bs_store_manifest_parse(bad[i], strlen(bad[i]), &states, &n) ==
            0)
            fail_msg("accepted as a manifest: %s", bad[i]);
        assert_null(states);
        assert_int_equal(n, 0);
    }
    /* version 2's chain */
    const char *v2 = "{\"v\":2,\"input_offset\":9,\"states\":["
                     STATE_JSON(3, 7) "," STATE_JSON(4, 7) ","
                     STATE_JSON(5, 12) "]}";
    bs_store_manifest *states;
    size_t n;
    assert_int_equal(bs_store_manifest_parse(v2, strlen(v2), &states, &n), 0);
    assert_int_equal(n, 3);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(states[i].seq, 3 + (int64_t)i);
        assert_int_equal(states[i].nchunks, 2);
        assert_int_equal(states[i].xxh3, 0xdeadbeefULL);
    }
    assert_int_equal(states[2].first, 12);
    free(states);
}

/* Encodes a checkpoint and cuts it into chunks of `chunk` bytes. */
static uint8_t *encoded(size_t *len)
{
    bf_filter *f = filter_with("c", 200, 1000);
    uint8_t *buf;
    char err[512];
    assert_int_equal(bs_ckpt_encode("in", 4, 99, NULL, 0, f, &buf, len, err,
                                    sizeof(err)), 0);
    bf_filter_destroy(f);
    return buf;
}

static void test_chunks_gather(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf = encoded(&len);
    const uint64_t chunk = 200;
    bs_store_manifest m = {5, (uint32_t)((len + chunk - 1) / chunk), chunk,
                           len, XXH3_64bits(buf, len), 0};
    assert_true(m.nchunks >= 3);
    bs_store_chunks *g = bs_store_chunks_new("bs1/g/in/4", &m);
    assert_non_null(g);
    char key[64], err[1024] = "";
    /* strangers: other keys, a leading zero, an index past the end, a
     * tombstone, a wrong size, another seq */
    assert_int_equal(bs_store_chunks_add(g, "bs1/g/in/4", 10, buf, chunk), 0);
    assert_int_equal(bs_store_chunks_add(g, "bs1/g/in/4/5/01", 15, buf + chunk,
                                         chunk), 0);
    snprintf(key, sizeof(key), "bs1/g/in/4/5/%u", m.nchunks);
    assert_int_equal(bs_store_chunks_add(g, key, strlen(key), buf, chunk), 0);
    assert_int_equal(bs_store_chunks_add(g, "bs1/g/in/4/5/0", 14, NULL, 0),
                     0);
    assert_int_equal(bs_store_chunks_add(g, "bs1/g/in/4/5/0", 14, buf,
                                         chunk - 1), 0);
    assert_int_equal(bs_store_chunks_add(g, "bs1/g/in/4/4/0", 14, buf, chunk),
                     0);
    assert_int_equal(bs_store_chunks_add(g, NULL, 0, buf, chunk), 0);
    /* the chunks, last first; one twice */
    bs_checkpoint c;
    for (uint32_t i = m.nchunks; i-- > 0;) {
        if (i == 0) { /* one missing: an error that says how many */
            assert_int_equal(bs_store_chunks_decode(g, "NAME", &c, err,
                                                    sizeof(err)), -1);
            assert_non_null(strstr(err, "NAME"));
            assert_non_null(strstr(err, "chunks"));
        }
        snprintf(key, sizeof(key), "bs1/g/in/4/5/%u", i);
        size_t off = i * chunk, n = len - off < chunk ? len - off : chunk;
        assert_int_equal(bs_store_chunks_add(g, key, strlen(key), buf + off,
                                             n), i == 0);
        if (i == 1) /* a duplicate is ignored */
            assert_int_equal(bs_store_chunks_add(g, key, strlen(key),
                                                 buf + off, n), 0);
    }
    assert_int_equal(bs_store_chunks_decode(g, "NAME", &c, err, sizeof(err)),
                     1);
    assert_string_equal(c.topic, "in");
    assert_int_equal(c.partition, 4);
    assert_int_equal(c.next_offset, 99);
    assert_holds(c.filter, "c", 200);
    bs_ckpt_free(&c);
    bs_store_chunks_free(g);

    /* A checksum the bytes do not match. */
    m.xxh3 ^= 1;
    g = bs_store_chunks_new("bs1/g/in/4", &m);
    assert_non_null(g);
    for (uint32_t i = 0; i < m.nchunks; i++) {
        snprintf(key, sizeof(key), "bs1/g/in/4/5/%u", i);
        size_t off = i * chunk, n = len - off < chunk ? len - off : chunk;
        (void)bs_store_chunks_add(g, key, strlen(key), buf + off, n);
    }
    assert_int_equal(bs_store_chunks_decode(g, "NAME", &c, err, sizeof(err)),
                     -1);
    assert_non_null(strstr(err, "checksum"));
    bs_store_chunks_free(g);
    free(buf);
}

/* One state's manifest entry for a record of len bytes in chunks of
 * `chunk`, its chunk 0 at offset `first`. */
static bs_store_manifest state_of(int64_t seq, const uint8_t *buf,
                                  size_t len, size_t chunk, int64_t first)
{
    bs_store_manifest m = {seq, (uint32_t)((len + chunk - 1) / chunk), chunk,
                           len, XXH3_64bits(buf, len), first};
    return m;
}

/* Offers a record's chunks (keys PREFIX/SEQ/I) to a chain at offsets from
 * `first` on; returns the chain's last answer. */
static int offer_chunks(bs_store_chain *c, const char *prefix, int64_t seq,
                        const uint8_t *buf, size_t len, size_t chunk,
                        int64_t first)
{
    int r = 0;
    for (size_t off = 0, i = 0; off < len; off += chunk, i++) {
        char key[128];
        snprintf(key, sizeof(key), "%s/%lld/%zu", prefix, (long long)seq, i);
        size_t n = len - off < chunk ? len - off : chunk;
        r = bs_store_chain_add(c, first + (int64_t)i, key, strlen(key),
                               buf + off, n);
    }
    return r;
}

/* A chain without a broker: a snapshot and a delta gathered from chunks in
 * any order make the filter bit for bit; stale chunks under the same keys
 * before a state's chunk 0 are passed over; a damaged delta, a chain that
 * starts with a delta, and a delta on another base are refused by name. */
static void test_chain_gather(void **state)
{
    (void)state;
    char err[1024] = "";
    const size_t chunk = 512;
    bf_filter *f = filter_with("s", 200, 20000);
    bs_ckpt_meta m1 = {"in", 4, 100, NULL, 0, 1, bs_ckpt_new_id(), 0, NULL};
    uint8_t *snap, *delta, *other;
    size_t slen, dlen, olen;
    assert_int_equal(bs_ckpt_encode_record(&m1, f, false, &snap, &slen, err,
                                           sizeof(err)), 0);
    assert_int_equal(bf_filter_track(f, m1.id, err, sizeof(err)), BF_OK);
    add_tagged(f, "d", 30);
    bs_ckpt_meta m2 = {"in", 4, 130, NULL, 0, 2, bs_ckpt_new_id(), m1.id, NULL};
    assert_int_equal(bs_ckpt_encode_record(&m2, f, true, &delta, &dlen, err,
                                           sizeof(err)), 0);
    assert_true(dlen < slen / 10);
    /* a delta of seq 2 on a base that is not state 1 */
    bs_ckpt_meta m3 = {"in", 4, 130, NULL, 0, 2, bs_ckpt_new_id(), 777, NULL};
    assert_int_equal(bf_filter_track(f, 777, err, sizeof(err)), BF_OK);
    add_tagged(f, "o", 5);
    assert_int_equal(bs_ckpt_encode_record(&m3, f, true, &other, &olen, err,
                                           sizeof(err)), 0);
    bs_store_manifest st[2] = {state_of(1, snap, slen, chunk, 10),
                               state_of(2, delta, dlen, chunk, 40)};

    /* the delta's chunks first, a stale copy of it (garbage) before its
     * chunk 0, then the snapshot's */
    bs_store_chain *c = bs_store_chain_new("bs1/g/in/4", st, 2);
    assert_non_null(c);
    uint8_t *junk = calloc(1, dlen);
    assert_int_equal(offer_chunks(c, "bs1/g/in/4", 2, junk, dlen, chunk, 20),
                     0);
    assert_int_equal(offer_chunks(c, "bs1/g/in/4", 2, delta, dlen, chunk,
                                  40), 0);
    assert_int_equal(offer_chunks(c, "bs1/g/in/4", 1, snap, slen, chunk, 10),
                     1);
    bs_checkpoint out;
    assert_int_equal(bs_store_chain_decode(c, "NAME", &out, err,
                                           sizeof(err)), 1);
    assert_int_equal(out.next_offset, 130);
    assert_int_equal(out.seq, 2);
    assert_int_equal(out.id, m2.id);
    assert_int_equal(holds_count(out.filter, "s", 200), 200);
    assert_int_equal(holds_count(out.filter, "d", 30), 30);
    uint64_t mark;
    assert_true(bf_filter_tracked(out.filter, &mark));
    assert_int_equal(mark, m2.id); /* the next checkpoint chains onto it */
    bs_ckpt_free(&out);
    bs_store_chain_free(c);

    /* a damaged delta */
    c = bs_store_chain_new("bs1/g/in/4", st, 2);
    delta[dlen / 2] ^= 1;
    (void)offer_chunks(c, "bs1/g/in/4", 1, snap, slen, chunk, 10);
    assert_int_equal(offer_chunks(c, "bs1/g/in/4", 2, delta, dlen, chunk,
                                  40), 1);
    delta[dlen / 2] ^= 1;
    assert_int_equal(bs_store_chain_decode(c, "NAME", &out, err,
                                           sizeof(err)), -1);
    if (!strstr(err, "NAME (delta 2)") || !strstr(err, "checksum"))
        fail_msg("not named: %s", err);
    bs_store_chain_free(c);

    /* a delta where the snapshot belongs */
    bs_store_manifest d1 = state_of(2, delta, dlen, chunk, 40);
    c = bs_store_chain_new("bs1/g/in/4", &d1, 1);
    assert_int_equal(offer_chunks(c, "bs1/g/in/4", 2, delta, dlen, chunk,
                                  40), 1);
    assert_int_equal(bs_store_chain_decode(c, "NAME", &out, err,
                                           sizeof(err)), -1);
    assert_non_null(strstr(err, "is a delta, not the snapshot"));
    bs_store_chain_free(c);

    /* a delta on another base */
    bs_store_manifest so[2] = {st[0], state_of(2, other, olen, chunk, 40)};
    c = bs_store_chain_new("bs1/g/in/4", so, 2);
    (void)offer_chunks(c, "bs1/g/in/4", 1, snap, slen, chunk, 10);
    assert_int_equal(offer_chunks(c, "bs1/g/in/4", 2, other, olen, chunk,
                                  40), 1);
    assert_int_equal(bs_store_chain_decode(c, "NAME", &out, err,
                                           sizeof(err)), -1);
    if (!strstr(err, "NAME (delta 2)") || !strstr(err, "base mismatch"))
        fail_msg("not named: %s", err);
    bs_store_chain_free(c);
    free(junk);
    free(snap);
    free(delta);
    free(other);
    bf_filter_destroy(f);
}

/* -- the Kafka store ------------------------------------------------------ */

typedef struct kfx {
    im_cluster c;
    bs_config *cfg;
    rd_kafka_t *reader;
} kfx;

/* A cluster of `brokers` with the checkpoint topic (nparts partitions);
 * extra: NULL or more configuration, name, value pairs. */
static void kfx_start(kfx *k, int brokers, int nparts,
                      const char *const *extra)
{
    memset(k, 0, sizeof(*k));
    im_start(&k->c, brokers);
    im_topic(&k->c, CKTOPIC, nparts);
    const char *kv[] = {"checkpoint.store", "kafka", "consumer.group.id",
                        GROUP, "checkpoint.topic", CKTOPIC,
                        "checkpoint.chunk.bytes", "1024", NULL};
    k->cfg = store_config(kv);
    char err[512];
    for (size_t i = 0; extra && extra[i]; i += 2)
        if (bs_config_set(k->cfg, extra[i], extra[i + 1], "test", err,
                          sizeof(err)))
            fail_msg("%s: %s", extra[i], err);
    k->reader = im_consumer(&k->c, NULL);
}

static void kfx_stop(kfx *k)
{
    rd_kafka_destroy(k->reader);
    bs_config_destroy(k->cfg);
    im_stop(&k->c);
}

/* A checked Kafka store; extra: NULL or name, value pairs for its
 * producer. */
static bs_store *kafka_store(kfx *k, const char *const *extra)
{
    rd_kafka_conf_t *conf = h_kafka_conf(k->c.bootstraps);
    const char *base[] = {"enable.idempotence", "true", "acks", "all",
                          "linger.ms", "1", "message.timeout.ms", "10000",
                          NULL};
    char err[1024] = "";
    for (int pass = 0; pass < 2; pass++) {
        const char *const *kv = pass ? extra : base;
        for (size_t i = 0; kv && kv[i]; i += 2)
            if (rd_kafka_conf_set(conf, kv[i], kv[i + 1], err,
                                  sizeof(err)) != RD_KAFKA_CONF_OK)
                fail_msg("%s: %s", kv[i], err);
    }
    bs_store *st = new_store(k->cfg, k->reader, conf, err, sizeof(err));
    if (!st)
        fail_msg("bs_store_new: %s", err);
    if (bs_store_check(st, err, sizeof(err)) != 0)
        fail_msg("check: %s", err);
    return st;
}

/* The partition of the checkpoint topic a partition's records go to, as
 * store.h documents: every record of one input partition to one partition,
 * chosen by the manifest key bs1/GROUP/TOPIC/PARTITION (XXH3-64 mod n). */
static int32_t ckpt_part(const char *topic, int32_t part, int nparts)
{
    char key[300];
    int n = snprintf(key, sizeof(key), "bs1/" GROUP "/%s/%d", topic,
                     (int)part);
    return (int32_t)(XXH3_64bits(key, (size_t)n) % (uint64_t)nparts);
}

static bool key_is(const h_record *r, const char *key)
{
    return r->key && r->key_len == strlen(key) &&
           !memcmp(r->key, key, r->key_len);
}

static bool has_prefix(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static void test_kafka_round_trip_and_chunks(void **state)
{
    (void)state;
    kfx k;
    kfx_start(&k, 1, 3, NULL);
    bs_store *st = kafka_store(&k, NULL);
    assert_non_null(strstr(bs_store_describe(st), CKTOPIC));
    char err[1024] = "";
    bs_checkpoint c;
    assert_int_equal(get(st, "in", 0, &c, err, sizeof(err)), 0); /* none */

    bf_filter *f = filter_with("a", 2000, 8000); /* ~10 KiB: chunks */
    uint8_t *enc;
    size_t enc_len;
    bs_ckpt_wm wm[1] = {{0, 77}};
    assert_int_equal(bs_ckpt_encode("in", 0, 2000, wm, 1, f, &enc, &enc_len,
                                    err, sizeof(err)), 0);
    free(enc);
    size_t want_chunks = (enc_len + 1023) / 1024;
    assert_true(want_chunks >= 3);
    assert_int_equal(bs_store_put(st, "in", 0, 2000, wm, 1, f, NULL, err,
                                  sizeof(err)), 0);
    if (bs_store_sync(st, err, sizeof(err)) != 0)
        fail_msg("sync: %s", err);
    expect_ckpt(st, "in", 0, 2000, "a", 2000);
    assert_int_equal(get(st, "in", 0, &c, err, sizeof(err)), 1);
    assert_int_equal(c.nwm, 1);
    assert_int_equal(c.wm[0].high, 77);
    bs_ckpt_free(&c);
    assert_int_equal(get(st, "in", 1, &c, err, sizeof(err)), 0);

    /* The records: chunks no larger than chunk.bytes, then the manifest,
     * all in the partition of the topic the manifest key maps to. */
    h_record_list l = {0};
    H_CHECK(h_consume_all(k.c.bootstraps, CKTOPIC, 10000, &l));
    int32_t cp = ckpt_part("in", 0, 3);
    size_t nchunks = 0, total = 0;
    int64_t first = -1, last_chunk = -1, manifest_at = -1;
    const h_record *manifest = NULL;
    for (size_t i = 0; i < l.n; i++) {
        const h_record *r = &l.recs[i];
        assert_int_equal(r->partition, cp);
        char want[64];
        snprintf(want, sizeof(want), "bs1/" GROUP "/in/0/1/%zu", nchunks);
        if (key_is(r, want)) {
            assert_true(r->value_len <= 1024);
            if (nchunks == 0)
                first = r->offset;
            last_chunk = r->offset;
            total += r->value_len;
            nchunks++;
        } else if (key_is(r, "bs1/" GROUP "/in/0")) {
            manifest = r;
            manifest_at = r->offset;
        } else {
            fail_msg("unexpected record %.*s", (int)r->key_len,
                     (const char *)r->key);
        }
    }
    assert_int_equal(nchunks, want_chunks);
    assert_int_equal(total, enc_len);
    assert_non_null(manifest);
    assert_true(manifest_at > last_chunk);
    json_error_t jerr;
    json_t *j = json_loadb(manifest->value, manifest->value_len, 0, &jerr);
    assert_non_null(j);
    assert_int_equal(json_integer_value(json_object_get(j, "v")), 2);
    assert_int_equal(
        json_integer_value(json_object_get(j, "input_offset")), 2000);
    json_t *states = json_object_get(j, "states");
    assert_int_equal(json_array_size(states), 1); /* a snapshot */
    json_t *s0 = json_array_get(states, 0);
    assert_int_equal(json_integer_value(json_object_get(s0, "chunks")),
                     (json_int_t)nchunks);
    assert_int_equal(json_integer_value(json_object_get(s0, "first")), first);
    assert_int_equal(json_integer_value(json_object_get(s0, "seq")), 1);
    assert_int_equal(json_integer_value(json_object_get(s0, "size")),
                     (json_int_t)enc_len);
    json_decref(j);
    h_record_list_free(&l);
    bs_store_destroy(st);
    bf_filter_destroy(f);
    kfx_stop(&k);
}

static void test_kafka_newer_manifest_wins_and_tombstones(void **state)
{
    (void)state;
    kfx k;
    kfx_start(&k, 1, 2, NULL);
    bs_store *st = kafka_store(&k, NULL);
    char err[1024] = "";
    bf_filter *f1 = filter_with("first", 1000, 4000);
    bf_filter *f2 = filter_with("second", 1000, 4000);
    assert_int_equal(bs_store_put(st, "in", 0, 100, NULL, 0, f1, NULL, err,
                                  sizeof(err)), 0);
    assert_int_equal(bs_store_sync(st, err, sizeof(err)), 0);
    assert_int_equal(bs_store_put(st, "in", 0, 200, NULL, 0, f2, NULL, err,
                                  sizeof(err)), 0);
    if (bs_store_sync(st, err, sizeof(err)) != 0)
        fail_msg("sync: %s", err);
    bs_store_destroy(st); /* flushes the tombstones */

    /* A fresh instance (nothing known) finds the newest. */
    st = kafka_store(&k, NULL);
    expect_ckpt(st, "in", 0, 200, "second", 1000);

    /* Every chunk of checkpoint 1 has a tombstone after it; checkpoint 2's
     * have none. */
    h_record_list l = {0};
    H_CHECK(h_consume_all(k.c.bootstraps, CKTOPIC, 10000, &l));
    size_t chunks1 = 0, tomb1 = 0, chunks2 = 0, tomb2 = 0, manifests = 0;
    for (size_t i = 0; i < l.n; i++) {
        const h_record *r = &l.recs[i];
        const char *key = r->key;
        if (key_is(r, "bs1/" GROUP "/in/0")) {
            manifests++;
            continue;
        }
        bool tomb = r->value == NULL;
        if (has_prefix(key, "bs1/" GROUP "/in/0/1/"))
            tomb ? tomb1++ : chunks1++;
        else if (has_prefix(key, "bs1/" GROUP "/in/0/2/"))
            tomb ? tomb2++ : chunks2++;
        else
            fail_msg("unexpected record %s", key);
    }
    assert_int_equal(manifests, 2);
    assert_true(chunks1 > 1);
    assert_int_equal(tomb1, chunks1);
    assert_true(chunks2 > 1);
    assert_int_equal(tomb2, 0);
    h_record_list_free(&l);

    /* A third checkpoint by the fresh instance tombstones checkpoint 2's
     * chunks: get taught it which one is current. */
    assert_int_equal(bs_store_put(st, "in", 0, 300, NULL, 0, f1, NULL, err,
                                  sizeof(err)), 0);
    assert_int_equal(bs_store_sync(st, err, sizeof(err)), 0);
    bs_store_destroy(st);
    H_CHECK(h_consume_all(k.c.bootstraps, CKTOPIC, 10000, &l));
    tomb2 = 0;
    for (size_t i = 0; i < l.n; i++)
        if (!l.recs[i].value &&
            has_prefix(l.recs[i].key, "bs1/" GROUP "/in/0/2/"))
            tomb2++;
    assert_int_equal(tomb2, chunks2);
    h_record_list_free(&l);

    st = kafka_store(&k, NULL);
    expect_ckpt(st, "in", 0, 300, "first", 1000);
    bs_store_destroy(st);
    bf_filter_destroy(f1);
    bf_filter_destroy(f2);
    kfx_stop(&k);
}

/* The Kafka store's chains: a snapshot, deltas up to checkpoint.delta.max
 * (each manifest naming the snapshot and every delta since), a snapshot
 * again whose manifest is followed by tombstones for every chunk of the
 * chain before it; a delta only onto a committed state (an uncommitted
 * one, as after an aborted transaction, is followed by a snapshot); a
 * fresh instance restores the newest state bit for bit and chains onto
 * it. */
static void test_kafka_chain(void **state)
{
    (void)state;
    kfx k;
    const char *extra[] = {"checkpoint.delta.max", "3",
                           "checkpoint.delta.ratio", "10", NULL};
    kfx_start(&k, 1, 2, extra);
    bs_store *st = kafka_store(&k, NULL);
    char err[1024] = "", tag[16];
    bf_filter *f = filter_with("r0", 50, 20000);
    /* seq 1 snapshot, 2-4 deltas, 5 snapshot, 6-8 deltas, 9 snapshot, 10
     * a delta never committed, so 11 is a snapshot */
    const bool want_delta[12] = {false, false, true, true, true, false,
                                 true, true, true, false, true, false};
    uint64_t snap_bytes = 0, delta_bytes = 0;
    bf_audit *a = audit_new(); /* state s: 50 s lookups, 10 s false pos. */
    for (int seq = 1; seq <= 11; seq++) {
        snprintf(tag, sizeof(tag), "r%d", seq);
        if (seq > 1)
            add_tagged(f, tag, 50);
        audit_count(a, tag, 50);
        put_sync_audit(st, 100 * seq, f, a, want_delta[seq]);
        bool delta;
        uint64_t bytes = bs_store_last_bytes(st, &delta);
        if (delta)
            delta_bytes = bytes;
        else
            snap_bytes = bytes;
        if (seq != 10)
            assert_int_equal(bs_store_committed(st, "in", 0, 100 * seq, err,
                                                sizeof(err)), 0);
    }
    if (delta_bytes * 10 > snap_bytes)
        fail_msg("a 50-key delta is %llu bytes, the snapshot %llu",
                 (unsigned long long)delta_bytes,
                 (unsigned long long)snap_bytes);
    bs_store_destroy(st); /* flushes the tombstones */

    /* The records: each manifest names the chain so far; every chunk of
     * seq 1-10 has a tombstone after it, seq 11's none. */
    h_record_list l = {0};
    H_CHECK(h_consume_all(k.c.bootstraps, CKTOPIC, 10000, &l));
    const size_t want_states[] = {1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 1};
    size_t manifests = 0, chunks[12] = {0}, tombs[12] = {0};
    for (size_t i = 0; i < l.n; i++) {
        const h_record *r = &l.recs[i];
        if (key_is(r, "bs1/" GROUP "/in/0")) {
            assert_true(manifests < 11);
            json_t *j = json_loadb(r->value, r->value_len, 0, NULL);
            assert_non_null(j);
            json_t *states = json_object_get(j, "states");
            if (json_array_size(states) != want_states[manifests])
                fail_msg("manifest %zu names %zu states", manifests + 1,
                         json_array_size(states));
            json_t *last = json_array_get(states, json_array_size(states) - 1);
            assert_int_equal(json_integer_value(json_object_get(last, "seq")),
                             (json_int_t)manifests + 1);
            json_decref(j);
            manifests++;
            continue;
        }
        int seq = -1;
        assert_int_equal(sscanf(r->key, "bs1/" GROUP "/in/0/%d/", &seq), 1);
        assert_true(seq >= 1 && seq <= 11);
        r->value ? chunks[seq]++ : tombs[seq]++;
    }
    assert_int_equal(manifests, 11);
    for (int seq = 1; seq <= 11; seq++) {
        assert_true(chunks[seq] >= 1);
        if (tombs[seq] != (seq < 11 ? chunks[seq] : 0))
            fail_msg("seq %d: %zu chunks, %zu tombstones", seq, chunks[seq],
                     tombs[seq]);
    }
    h_record_list_free(&l);

    /* A fresh instance restores state 11 bit for bit, and its next
     * checkpoint of the restored filter is a delta on it. */
    st = kafka_store(&k, NULL);
    bs_checkpoint c;
    assert_int_equal(get(st, "in", 0, &c, err, sizeof(err)), 1);
    assert_int_equal(c.next_offset, 1100);
    assert_int_equal(c.seq, 11);
    assert_same_filter(f, c.filter);
    assert_audit(&c, 550, 110);
    bf_audit_destroy(a);
    add_tagged(c.filter, "after", 40);
    audit_count(c.audit, "after", 40);
    put_sync_audit(st, 1200, c.filter, c.audit, true);
    bs_store_destroy(st);
    st = kafka_store(&k, NULL);
    bs_checkpoint c2;
    assert_int_equal(get(st, "in", 0, &c2, err, sizeof(err)), 1);
    assert_int_equal(c2.seq, 12);
    assert_same_filter(c.filter, c2.filter);
    assert_audit(&c2, 590, 118); /* the delta's sample */
    bs_ckpt_free(&c2);
    bs_ckpt_free(&c);
    bs_store_destroy(st);
    bf_filter_destroy(f);
    kfx_stop(&k);
}

/* The newest manifest is looked for backwards from the end of the
 * partition in growing ranges: found when other partitions' checkpoints
 * (thousands of records) were written after it, and the newest of two
 * (the second range holds both) wins. */
static void test_kafka_manifest_far_back(void **state)
{
    (void)state;
    kfx k;
    kfx_start(&k, 1, 1, NULL);
    bs_store *st = kafka_store(&k, NULL);
    char err[1024] = "";
    bf_filter *f0 = filter_with("zero", 500, 2000);
    bf_filter *f1 = filter_with("one", 500, 2000);
    bf_filter *big = filter_with("big", 100, 20000); /* ~100 chunks */
    put_sync(st, 10, f0, -1);
    put_sync(st, 20, f1, -1);
    for (int i = 0; i < 20; i++) {
        assert_int_equal(bs_store_put(st, "in", 1 + i % 3, 100 + i, NULL, 0,
                                      big, NULL, err, sizeof(err)), 0);
        if (bs_store_sync(st, err, sizeof(err)) != 0)
            fail_msg("sync: %s", err);
    }
    bs_store_destroy(st);
    h_record_list l = {0};
    H_CHECK(h_consume_all(k.c.bootstraps, CKTOPIC, 10000, &l));
    size_t after = 0;
    for (size_t i = l.n; i-- > 0 && !key_is(&l.recs[i], "bs1/" GROUP "/in/0");)
        after++;
    if (after < 1000)
        fail_msg("only %zu records after in [0]'s manifest", after);
    h_record_list_free(&l);
    st = kafka_store(&k, NULL);
    expect_ckpt(st, "in", 0, 20, "one", 500);
    expect_ckpt(st, "in", 3, 117, "big", 100); /* i = 17 */
    bs_checkpoint c;
    assert_int_equal(get(st, "in", 4, &c, err, sizeof(err)), 0); /* none */
    bs_store_destroy(st);
    bf_filter_destroy(f0);
    bf_filter_destroy(f1);
    bf_filter_destroy(big);
    kfx_stop(&k);
}

/* A chunk the broker refuses: sync fails and writes no manifest, so the
 * previous checkpoint stands. */
static void test_kafka_no_manifest_without_every_chunk(void **state)
{
    (void)state;
    kfx k;
    kfx_start(&k, 1, 1, NULL);
    bs_store *st = kafka_store(&k, NULL);
    char err[1024] = "";
    bf_filter *f1 = filter_with("old", 500, 4000);
    bf_filter *f2 = filter_with("new", 500, 4000);
    assert_int_equal(bs_store_put(st, "in", 0, 10, NULL, 0, f1, NULL, err,
                                  sizeof(err)), 0);
    assert_int_equal(bs_store_sync(st, err, sizeof(err)), 0);
    int64_t lo, hi_before, hi_after;
    H_CHECK(h_watermarks(k.c.bootstraps, CKTOPIC, 0, &lo, &hi_before));

    rd_kafka_mock_push_request_errors(
        k.c.mc, 0 /* ApiKey Produce */, 1,
        RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE);
    assert_int_equal(bs_store_put(st, "in", 0, 20, NULL, 0, f2, NULL, err,
                                  sizeof(err)), 0);
    err[0] = '\0';
    assert_int_equal(bs_store_sync(st, err, sizeof(err)), -1);
    if (!strstr(err, CKTOPIC))
        fail_msg("sync's error does not name the topic: %s", err);

    /* No manifest after the failed round: only (some of) its chunks. */
    h_record_list l = {0};
    H_CHECK(h_consume_all(k.c.bootstraps, CKTOPIC, 10000, &l));
    H_CHECK(h_watermarks(k.c.bootstraps, CKTOPIC, 0, &lo, &hi_after));
    for (size_t i = 0; i < l.n; i++)
        if (l.recs[i].offset >= hi_before &&
            key_is(&l.recs[i], "bs1/" GROUP "/in/0"))
            fail_msg("a manifest at offset %lld after a failed chunk",
                     (long long)l.recs[i].offset);
    h_record_list_free(&l);
    expect_ckpt(st, "in", 0, 10, "old", 500);

    /* The next round works again. */
    if (bs_store_put(st, "in", 0, 30, NULL, 0, f2, NULL, err, sizeof(err)) != 0)
        fail_msg("put: %s", err);
    if (bs_store_sync(st, err, sizeof(err)) != 0)
        fail_msg("sync: %s", err);
    expect_ckpt(st, "in", 0, 30, "new", 500);
    bs_store_destroy(st);
    bf_filter_destroy(f1);
    bf_filter_destroy(f2);
    kfx_stop(&k);
}

/* The largest key + value a producer with message.max.bytes=`max` accepts
 * (librdkafka refuses larger records in producev, before any request). */
static size_t largest_record(const char *bootstraps, int max)
{
    rd_kafka_conf_t *conf = h_kafka_conf(bootstraps);
    char err[512], v[32];
    snprintf(v, sizeof(v), "%d", max);
    assert_int_equal(rd_kafka_conf_set(conf, "message.max.bytes", v, err,
                                       sizeof(err)), RD_KAFKA_CONF_OK);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
    assert_non_null(rk);
    static char buf[65536];
    size_t lo = 0, hi = (size_t)max; /* lo fits, hi does not */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        rd_kafka_resp_err_t e = rd_kafka_producev(
            rk, RD_KAFKA_V_TOPIC("probe"), RD_KAFKA_V_PARTITION(0),
            RD_KAFKA_V_KEY("k", 1), RD_KAFKA_V_VALUE(buf, mid),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
            lo = mid;
        else if (e == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE)
            hi = mid;
        else
            fail_msg("probe: %s", rd_kafka_err2str(e));
    }
    rd_kafka_purge(rk, RD_KAFKA_PURGE_F_QUEUE);
    rd_kafka_destroy(rk);
    return 1 + lo;
}

/*
 * A put that fails half-way leaves chunk 0 in flight, and its delivery
 * report arrives later, during the sync.  It must not land on the
 * checkpoint of another partition put after it.  The interleaving, made
 * deterministic:
 *   - put A fails at its chunk 10: message.max.bytes is set so that a
 *     full chunk fits with a one-digit chunk index in its key, not with
 *     two; chunks 0..9 are already queued;
 *   - put B (one chunk) succeeds;
 *   - A's records go to checkpoint partition X, led by broker 1, which
 *     answers 1.5 s late; B's to Y, led by broker 2, which answers at once:
 *     A's report for its chunk 0 comes after B's;
 *   - X holds 40 records already, so A's chunk 0 offset is past anything
 *     in Y: a manifest of B naming it points at no chunk of B.
 */
static void test_kafka_late_report_of_failed_put(void **state)
{
    (void)state;
    kfx k;
    kfx_start(&k, 2, 2, NULL);
    assert_int_equal(rd_kafka_mock_partition_set_leader(k.c.mc, CKTOPIC, 0,
                                                        1), 0);
    assert_int_equal(rd_kafka_mock_partition_set_leader(k.c.mc, CKTOPIC, 1,
                                                        2), 0);
    int32_t pa = -1, pb = -1, pw = -1;
    for (int32_t p = 0; p < 10 && (pa < 0 || pb < 0 || pw < 0); p++) {
        if (ckpt_part("in", p, 2) == 0) {
            if (pa < 0)
                pa = p;
            else if (pw < 0)
                pw = p;
        } else if (pb < 0) {
            pb = p;
        }
    }
    assert_true(pa >= 0 && pb >= 0 && pw >= 0);
    h_record fill = h_rec("fill", "x");
    for (int i = 0; i < 40; i++)
        H_CHECK(h_produce(k.c.bootstraps, CKTOPIC, 0, &fill, 1));

    char key0[64], mmb[32], err[1024] = "";
    int klen = snprintf(key0, sizeof(key0), "bs1/" GROUP "/in/%d/1/0",
                        (int)pa);
    size_t overhead = 4000 - largest_record(k.c.bootstraps, 4000);
    snprintf(mmb, sizeof(mmb), "%zu", overhead + (size_t)klen + 1024);
    const char *extra[] = {"message.max.bytes", mmb, NULL};
    bs_store *st = kafka_store(&k, extra);

    /* Warm-up: both brokers connected, B at seq 1. */
    bf_filter *small_w = filter_with("w", 10, 100);
    bf_filter *small_b = filter_with("B", 10, 100);
    assert_int_equal(bs_store_put(st, "in", pw, 5, NULL, 0, small_w, NULL, err,
                                  sizeof(err)), 0);
    assert_int_equal(bs_store_put(st, "in", pb, 5, NULL, 0, small_b, NULL, err,
                                  sizeof(err)), 0);
    if (bs_store_sync(st, err, sizeof(err)) != 0)
        fail_msg("warm-up sync: %s", err);

    bf_filter *big_a = filter_with("A", 3000, 12000);
    uint8_t *enc;
    size_t enc_len;
    assert_int_equal(bs_ckpt_encode("in", pa, 7, NULL, 0, big_a, &enc,
                                    &enc_len, err, sizeof(err)), 0);
    free(enc);
    assert_true(enc_len > 11 * 1024); /* chunk 10 is a full one */

    assert_int_equal(rd_kafka_mock_broker_set_rtt(k.c.mc, 1, 1500), 0);
    err[0] = '\0';
    assert_int_equal(bs_store_put(st, "in", pa, 7, NULL, 0, big_a, NULL, err,
                                  sizeof(err)), -1);
    if (!strstr(err, rd_kafka_err2str(RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE)))
        fail_msg("put A failed otherwise than planned: %s", err);
    if (bs_store_put(st, "in", pb, 500, NULL, 0, small_b, NULL, err, sizeof(err)))
        fail_msg("put B: %s", err);
    if (bs_store_sync(st, err, sizeof(err)) != 0)
        fail_msg("sync: %s", err);
    assert_int_equal(rd_kafka_mock_broker_set_rtt(k.c.mc, 1, 0), 0);

    expect_ckpt(st, "in", pb, 500, "B", 10);
    bs_store_destroy(st);
    st = kafka_store(&k, NULL); /* a fresh reader agrees */
    expect_ckpt(st, "in", pb, 500, "B", 10);
    expect_ckpt(st, "in", pw, 5, "w", 10);
    bs_checkpoint c;
    assert_int_equal(get(st, "in", pa, &c, err, sizeof(err)), 0);
    bs_store_destroy(st);
    bf_filter_destroy(small_w);
    bf_filter_destroy(small_b);
    bf_filter_destroy(big_a);
    kfx_stop(&k);
}

/* A checkpoint topic whose partition's leader keeps answering that it is
 * not the leader (a broker killed, its successor not known yet) is
 * BS_STORE_UNREACHABLE once the store has retried for
 * BS_TIMEOUT_TOPIC_KNOWN_MS: a restore waits and retries it, where -1, a
 * damaged state, stops the stage (issue 26's nemesis: a restore while a
 * broker was killed stopped both instances).  The same state reads once
 * the broker answers again. */
static void test_kafka_unreachable(void **state)
{
    (void)state;
    kfx k;
    kfx_start(&k, 1, 1, NULL);
    bs_store *st = kafka_store(&k, NULL);
    bf_filter *f = filter_with("u", 10, 100);
    char err[1024] = "";
    if (bs_store_put(st, "in", 0, 9, NULL, 0, f, NULL, err, sizeof(err)) != 0 ||
        bs_store_sync(st, err, sizeof(err)) != 0)
        fail_msg("put: %s", err);
    rd_kafka_resp_err_t nl[400];
    for (size_t i = 0; i < sizeof(nl) / sizeof(nl[0]); i++)
        nl[i] = RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION;
    rd_kafka_mock_push_request_errors_array(
        k.c.mc, 2 /* ListOffsets */, sizeof(nl) / sizeof(nl[0]), nl);
    bs_checkpoint c;
    err[0] = '\0';
    assert_int_equal(get(st, "in", 0, &c, err, sizeof(err)),
                     BS_STORE_UNREACHABLE);
    if (!strstr(err, CKTOPIC))
        fail_msg("the error does not name the topic: %s", err);
    rd_kafka_mock_clear_request_errors(k.c.mc, 2);
    expect_ckpt(st, "in", 0, 9, "u", 10);
    bs_store_destroy(st);
    bf_filter_destroy(f);
    kfx_stop(&k);
}

/* A restore's partitions asked for at once (get_many), six input
 * partitions on a topic of two partitions, so some share one and it is
 * read once for them all: each answers what get answers alone -- a
 * snapshot, a delta chain, the state at its committed offset, a state
 * ahead of it, a damaged manifest, none -- and a restored chain is known
 * for the next put, which is a delta on it. */
static void test_kafka_get_many(void **state)
{
    (void)state;
    kfx k;
    const char *extra[] = {"checkpoint.delta.max", "3",
                           "checkpoint.delta.ratio", "10", NULL};
    kfx_start(&k, 1, 2, extra);
    int shared = 0; /* input partitions beside another on their cp */
    for (int32_t p = 0; p < 6; p++)
        for (int32_t o = 0; o < 6; o++)
            shared += o != p && ckpt_part("in", p, 2) == ckpt_part("in", o, 2);
    assert_true(shared > 0);
    bs_store *st = kafka_store(&k, NULL);
    char err[1024] = "", tag[16];
    bf_filter *f[4];
    for (int32_t p = 0; p < 4; p++) {
        snprintf(tag, sizeof(tag), "g%d", (int)p);
        f[p] = filter_with(tag, 100 + p, 5000);
        if (bs_store_put(st, "in", p, 1000 + p, NULL, 0, f[p], NULL, err,
                         sizeof(err)) != 0)
            fail_msg("put in [%d]: %s", (int)p, err);
    }
    if (bs_store_sync(st, err, sizeof(err)) != 0)
        fail_msg("sync: %s", err);
    for (int32_t p = 0; p < 4; p++)
        assert_int_equal(bs_store_committed(st, "in", p, 1000 + p, err,
                                            sizeof(err)), 0);
    add_tagged(f[1], "d1", 20); /* in [1]: a delta on its snapshot */
    bool delta = false;
    if (bs_store_put(st, "in", 1, 2000, NULL, 0, f[1], NULL, err,
                     sizeof(err)) != 0 ||
        bs_store_sync(st, err, sizeof(err)) != 0)
        fail_msg("put in [1]: %s", err);
    (void)bs_store_last_bytes(st, &delta);
    assert_true(delta);
    bs_store_destroy(st);
    h_record bad = h_rec("bs1/" GROUP "/in/5", "{\"v\":1,\"seq\":\"x\"}");
    H_CHECK(h_produce(k.c.bootstraps, CKTOPIC, ckpt_part("in", 5, 2), &bad,
                      1));

    bs_store_query q[6] = {
        {.topic = "in", .partition = 0, .at_offset = BS_STORE_NEWEST},
        {.topic = "in", .partition = 1, .at_offset = BS_STORE_NEWEST},
        {.topic = "in", .partition = 2, .at_offset = 1002},
        {.topic = "in", .partition = 3, .at_offset = 500},
        {.topic = "in", .partition = 5, .at_offset = BS_STORE_NEWEST},
        {.topic = "in", .partition = 6, .at_offset = BS_STORE_NEWEST}};
    const int want_rc[6] = {1, 1, 1, BS_STORE_AHEAD, -1, 0};
    st = kafka_store(&k, NULL);
    bs_store_get_many(st, q, 6);
    bs_store *one = kafka_store(&k, NULL); /* get, one at a time */
    for (int i = 0; i < 6; i++) {
        if (q[i].rc != want_rc[i])
            fail_msg("in [%d]: %d (%s), expected %d", (int)q[i].partition,
                     q[i].rc, q[i].err, want_rc[i]);
        bs_checkpoint c;
        char err1[1024] = "";
        int r = bs_store_get(one, "in", q[i].partition, q[i].at_offset, &c,
                             err1, sizeof(err1));
        assert_int_equal(r, q[i].rc);
        if (r < 0)
            assert_string_equal(err1, q[i].err);
        if (r == 1) {
            assert_int_equal(c.next_offset, q[i].out.next_offset);
            assert_int_equal(c.seq, q[i].out.seq);
            assert_same_filter(c.filter, q[i].out.filter);
            bs_ckpt_free(&c);
        }
    }
    bs_store_destroy(one);
    assert_int_equal(q[0].out.next_offset, 1000);
    assert_holds(q[0].out.filter, "g0", 100);
    assert_int_equal(q[1].out.next_offset, 2000);
    assert_int_equal(q[1].out.seq, 2);
    assert_same_filter(f[1], q[1].out.filter);
    assert_int_equal(q[2].out.next_offset, 1002);
    if (!strstr(q[3].err, "past the committed 500"))
        fail_msg("in [3]: %s", q[3].err);
    if (!strstr(q[4].err, "bs1/" GROUP "/in/5") ||
        !strstr(q[4].err, "manifest"))
        fail_msg("the error does not name the manifest: %s", q[4].err);

    /* The chains restored are known: in [0]'s next state is a delta. */
    add_tagged(q[0].out.filter, "after", 10);
    if (bs_store_put(st, "in", 0, 1100, NULL, 0, q[0].out.filter, NULL, err,
                     sizeof(err)) != 0 ||
        bs_store_sync(st, err, sizeof(err)) != 0)
        fail_msg("put in [0] after the restore: %s", err);
    (void)bs_store_last_bytes(st, &delta);
    assert_true(delta);
    for (int i = 0; i < 3; i++)
        bs_ckpt_free(&q[i].out);
    for (int32_t p = 0; p < 4; p++)
        bf_filter_destroy(f[p]);
    bs_store_destroy(st);
    kfx_stop(&k);
}

/* A damaged manifest is an error naming it, never a fresh filter. */
static void test_kafka_damaged_manifest(void **state)
{
    (void)state;
    kfx k;
    kfx_start(&k, 1, 1, NULL);
    h_record r = h_rec("bs1/" GROUP "/in/0", "{\"v\":1,\"seq\":\"x\"}");
    H_CHECK(h_produce(k.c.bootstraps, CKTOPIC, 0, &r, 1));
    bs_store *st = kafka_store(&k, NULL);
    char err[1024] = "";
    bs_checkpoint c;
    assert_int_equal(get(st, "in", 0, &c, err, sizeof(err)), -1);
    if (!strstr(err, "bs1/" GROUP "/in/0") || !strstr(err, "manifest"))
        fail_msg("the error does not name the manifest: %s", err);
    bs_store_destroy(st);
    kfx_stop(&k);
}

int main(void)
{
    /* Before any thread (unshare(2) refuses a threaded process); not
     * root, test_dir_dead_branch_kept makes its directory 0555 instead. */
    own_mounts = geteuid() == 0 && h_private_mounts() == 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_dir_round_trip, dir_setup,
                                        dir_teardown),
        cmocka_unit_test_setup_teardown(test_dir_damage_and_crash_leftovers,
                                        dir_setup, dir_teardown),
        cmocka_unit_test_setup_teardown(test_dir_chain, dir_setup,
                                        dir_teardown),
        cmocka_unit_test_setup_teardown(test_dir_chain_bounds, dir_setup,
                                        dir_teardown),
        cmocka_unit_test_setup_teardown(test_dir_chain_damage_named,
                                        dir_setup, dir_teardown),
        cmocka_unit_test_setup_teardown(test_dir_state_at_committed_offset,
                                        dir_setup, dir_teardown),
        cmocka_unit_test_setup_teardown(test_dir_dead_branch_kept,
                                        dir_setup, dir_teardown),
        cmocka_unit_test(test_dir_missing_dir),
        cmocka_unit_test(test_manifest_parse),
        cmocka_unit_test(test_chunks_gather),
        cmocka_unit_test(test_chain_gather),
        cmocka_unit_test(test_kafka_round_trip_and_chunks),
        cmocka_unit_test(test_kafka_newer_manifest_wins_and_tombstones),
        cmocka_unit_test(test_kafka_chain),
        cmocka_unit_test(test_kafka_manifest_far_back),
        cmocka_unit_test(test_kafka_no_manifest_without_every_chunk),
        cmocka_unit_test(test_kafka_unreachable),
        cmocka_unit_test(test_kafka_damaged_manifest),
        cmocka_unit_test(test_kafka_get_many),
        cmocka_unit_test(test_kafka_late_report_of_failed_put),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
