/*
 * make_seeds.c -- writes the generated part of the fuzz seed corpora and the
 * config dictionary with the project's own code, so they match the formats
 * the product writes today:
 *
 *   fuzz/corpus/filter_file/   small filter files of every kind (blocked
 *                              at k = 8 and at k = 16, in 32-bit lanes,
 *                              counting, scalable with 1 and 3 layers and
 *                              with its newest layer full; windowed with
 *                              3 generations, and empty), audit samples
 *                              (empty, and holding 34 keys over 4 slices,
 *                              some of them false positives), and
 *                              damaged ones (bad magic, version, kind,
 *                              checksum, probe scheme; truncated; a header
 *                              only; an audit's slot count, entries,
 *                              flags and a tag); older files are the
 *                              hand-copied v1-*.bf and v2-*.bf (from
 *                              tests/data/; v2-audit-untagged.bf is an
 *                              audit sample from before slice tags)
 *   fuzz/corpus/blocklist_list/  blocked.bf and counting.bf, as above
 *   fuzz/corpus/checkpoint/    small checkpoints (0 and 3 watermarks, 1 and 3
 *                              layers, a windowed filter, an audit sample),
 *                              and damaged ones; v1-*.ckpt and v2-*.ckpt
 *                              are hand-copied older files
 *   fuzz/corpus/ckpt_delta/    deltas of the base in ckpt_delta_base.h (a few
 *                              keys, new layers, none, with an audit
 *                              sample), and damaged ones; v1-*.ckpd is a
 *                              hand-copied older file
 *   fuzz/corpus/store_kafka/chain-*  a version-2 manifest naming that base
 *                              as a snapshot and a delta after it, with
 *                              their chunks (the other seeds there, of
 *                              version 1, are hand-written)
 *   fuzz/fuzz_config.dict      every key of the table (patterns with NAME
 *                              "spam"), its BLOOMSTAGE_ name, enum values,
 *                              the markers fuzz_config.c splits at, @file:
 *                              and the files of fuzz_config_files.h
 *
 * Built in the fuzz tree (not a fuzz target: no fuzz_ prefix); run it after
 * a change to a format or to the key table and commit what changes:
 *
 *   build-fuzz/fuzz/make_seeds fuzz
 *
 * The hand-written seeds (config files, text lists) live beside these.
 * Output is deterministic (fixed seeds, fixed keys) but for the time a
 * checkpoint stores.
 */
#include "ckpt_delta_base.h"
#include "fuzz_config_files.h"

#include <bloomfilters.h>
#include "checkpoint/checkpoint.h"
#include <config_int.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

static const char *root;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "make_seeds: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static void write_file(const char *dir, const char *name, const void *buf,
                       size_t len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/%s", root, dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0)
        die("%s: cannot write", path);
}

static bf_membuf serialize(const bf_filter *f)
{
    bf_membuf m = {NULL, 0, 0};
    if (bf_filter_serialize(f, bf_membuf_write, &m) != BF_OK)
        die("serialize failed");
    return m;
}

static void add_keys(bf_filter *f, int from, int n)
{
    for (int i = from; i < from + n; i++) {
        char key[32];
        int len = snprintf(key, sizeof key, "user-%d", i);
        if (bf_filter_add(f, key, (size_t)len) < 0)
            die("add failed");
    }
}

static bf_filter *scalable(uint64_t n0, int keys)
{
    bf_scalable_params p;
    bf_scalable_params_default(&p);
    p.initial_capacity = n0;
    p.fpr = 0.01;
    char err[256];
    bf_filter *f = bf_filter_from_scalable(bf_scalable_new(&p, err,
                                                           sizeof err));
    if (!f)
        die("scalable: %s", err);
    add_keys(f, 0, keys);
    return f;
}

/* A windowed filter over W = 100, G = 4 with keys at times 200, 230 and
 * 275 (slices 8, 9, 11: three generations and an empty slice), or none. */
static bf_filter *windowed(int keys_per_time)
{
    bf_windowed_params p;
    bf_windowed_params_default(&p);
    p.window = 100;
    p.generations = 4;
    p.fpr = 0.01;
    p.initial_capacity = 8;
    char err[256];
    bf_filter *f = bf_filter_from_windowed(bf_windowed_new(&p, err,
                                                           sizeof err));
    if (!f)
        die("windowed: %s", err);
    static const int64_t at[] = {200, 230, 275};
    for (int i = 0; keys_per_time && i < 3; i++) {
        (void)bf_windowed_advance(bf_filter_windowed(f), at[i]);
        add_keys(f, i * 100, keys_per_time);
    }
    return f;
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* A copy of m with `len` bytes and `at` overwritten by `val` (n bytes),
 * the trailing checksum recomputed if `fix`. */
static void damaged(const char *dir, const char *name, const bf_membuf *m,
                    size_t len, size_t at, const void *val, size_t n,
                    int fix)
{
    uint8_t *b = malloc(m->len);
    if (!b)
        die("out of memory");
    memcpy(b, m->buf, m->len);
    if (val)
        memcpy(b + at, val, n);
    if (fix && len >= 8)
        put64(b + len - 8, XXH3_64bits(b, len - 8));
    write_file(dir, name, b, len);
    free(b);
}

/* Audit samples: an empty one at the default rate; one at rate 1/2
 * holding the sampled keys of 80 (34, in 64 slots), every fourth called
 * seen by the filter, added over slices 3..6 (tagged), and damaged
 * copies of it. */
static void audit_seeds(const char *dir)
{
    char err[256];
    bf_audit *e = bf_audit_new(BF_AUDIT_DEFAULT_RATE, BF_DEFAULT_SEED, err,
                               sizeof err);
    bf_audit *a = bf_audit_new(0.5, BF_DEFAULT_SEED, err, sizeof err);
    if (!e || !a)
        die("audit: %s", err);
    for (int i = 0; i < 80; i++) {
        if (i % 20 == 0)
            bf_audit_set_slice(a, 3 + i / 20, i / 20 - 1);
        char k[32];
        int n = snprintf(k, sizeof k, "user-%d", i);
        if (bf_audit_check(a, bf_hash_key(k, (size_t)n, BF_DEFAULT_SEED),
                           i % 4 == 0) < 0)
            die("audit: out of memory");
    }
    bf_membuf me = {NULL, 0, 0}, ma = {NULL, 0, 0};
    if (bf_audit_serialize(e, bf_membuf_write, &me) != BF_OK ||
        bf_audit_serialize(a, bf_membuf_write, &ma) != BF_OK)
        die("audit: serialize failed");
    write_file(dir, "audit-empty.bf", me.buf, me.len);
    write_file(dir, "audit-keys.bf", ma.buf, ma.len);
    /* Slots not a power of two; more entries than the slots hold. */
    damaged(dir, "audit-bad-slots.bf", &ma, ma.len, 40, "\x7f", 1, 1);
    damaged(dir, "audit-bad-entries.bf", &ma, ma.len, 48, "\x30", 1, 1);
    /* Unknown flags; a tag in slot 0's place when it is empty or not. */
    damaged(dir, "audit-bad-flags.bf", &ma, ma.len, 80, "\x03", 1, 1);
    damaged(dir, "audit-bad-tag.bf", &ma, ma.len, 128 + 8 * 64, "\x09", 1,
            1);
    free(me.buf);
    free(ma.buf);
    bf_audit_destroy(e);
    bf_audit_destroy(a);
}

static void filter_seeds(void)
{
    const char *dir = "corpus/filter_file";
    char err[256];
    bf_filter *b = bf_filter_from_blocked(
        bf_blocked_new(20, 0.01, BF_DEFAULT_SEED, err, sizeof err));
    bf_filter *c = bf_filter_from_counting(
        bf_counting_new(20, 0.01, 7, err, sizeof err));
    if (!b || !c)
        die("filters: %s", err);
    add_keys(b, 0, 10);
    add_keys(c, 0, 10);
    bf_filter *b16 = bf_filter_from_blocked(
        bf_blocked_new(20, 1e-6, BF_DEFAULT_SEED, err, sizeof err));
    if (!b16)
        die("filters: %s", err);
    add_keys(b16, 0, 10);
    bf_membuf mb16 = serialize(b16);
    write_file(dir, "blocked-k16.bf", mb16.buf, mb16.len);
    free(mb16.buf);
    bf_filter_destroy(b16);
    bf_filter *s1 = scalable(16, 5), *s3 = scalable(4, 40);
    if (bf_scalable_layers(bf_filter_scalable(s3)) < 3)
        die("the 3-layer seed has %u layers",
            bf_scalable_layers(bf_filter_scalable(s3)));

    bf_membuf mb = serialize(b), mc = serialize(c), m1 = serialize(s1),
           m3 = serialize(s3);
    write_file(dir, "blocked.bf", mb.buf, mb.len);
    write_file(dir, "counting.bf", mc.buf, mc.len);
    /* A blocklist may be a filter file too. */
    write_file("corpus/blocklist_list", "blocked.bf", mb.buf, mb.len);
    write_file("corpus/blocklist_list", "counting.bf", mc.buf, mc.len);
    write_file(dir, "scalable-1layer.bf", m1.buf, m1.len);
    write_file(dir, "scalable-3layers.bf", m3.buf, m3.len);
    /* Its newest layer full: the target's next add opens a layer. */
    bf_filter *sf = scalable(4, 4);
    bf_membuf mf = serialize(sf);
    write_file(dir, "scalable-full.bf", mf.buf, mf.len);
    free(mf.buf);
    bf_filter_destroy(sf);
    bf_filter *w3 = windowed(6), *w0 = windowed(0);
    bf_membuf mw3 = serialize(w3), mw0 = serialize(w0);
    write_file(dir, "windowed-3gens.bf", mw3.buf, mw3.len);
    write_file(dir, "windowed-empty.bf", mw0.buf, mw0.len);
    /* Damaged: a stream time that leaves no generation live; one more
     * generation than G + 1. */
    damaged(dir, "windowed-not-live.bf", &mw3, mw3.len, 80,
            "\x10\x27\x00\x00\x00\x00\x00\x00", 8, 1);
    damaged(dir, "windowed-bad-count.bf", &mw3, mw3.len, 32, "\x06", 1, 1);
    free(mw3.buf);
    free(mw0.buf);
    bf_filter_destroy(w3);
    bf_filter_destroy(w0);

    damaged(dir, "bad-magic.bf", &mb, mb.len, 0, "BLMFLTX", 7, 1);
    damaged(dir, "bad-version.bf", &mb, mb.len, 8, "\x03\x00", 2, 1);
    /* Layer 0's probe scheme (descriptor at 64, scheme at +10): 32-bit
     * lanes, which k = 8 cannot have. */
    damaged(dir, "bad-scheme.bf", &mb, mb.len, 74, "\x02\x00", 2, 1);
    damaged(dir, "bad-kind.bf", &mb, mb.len, 10, "\x09\x00", 2, 1);
    damaged(dir, "bad-checksum.bf", &mb, mb.len, mb.len - 1, "\xff", 1, 0);
    damaged(dir, "truncated.bf", &m3, m3.len - 64, 0, NULL, 0, 0);
    damaged(dir, "header-only.bf", &mb, 64, 0, NULL, 0, 0);
    damaged(dir, "bad-layer-count.bf", &m3, m3.len, 32, "\x41\x00", 2, 1);
    audit_seeds(dir);
    free(mb.buf);
    free(mc.buf);
    free(m1.buf);
    free(m3.buf);
    bf_filter_destroy(b);
    bf_filter_destroy(c);
    bf_filter_destroy(s1);
    bf_filter_destroy(s3);
}

static void ckpt(const char *name, const char *topic, int32_t partition,
                 int64_t next, const bs_ckpt_wm *wm, uint32_t nwm,
                 const bf_filter *f, bf_membuf *keep)
{
    char err[512];
    bf_membuf m;
    if (bs_ckpt_encode(topic, partition, next, wm, nwm, f, &m.buf, &m.len,
                       err, sizeof err) != 0)
        die("%s", err);
    /* The time written and the state id are the only varying fields: fix
     * them so the seeds regenerate identically. */
    put64(m.buf + 24, UINT64_C(1700000000000));
    put64(m.buf + 40 + strlen(topic) + (size_t)nwm * 12 + 8,
          UINT64_C(0x1d1d1d1d1d1d1d1d));
    put64(m.buf + m.len - 8, XXH3_64bits(m.buf, m.len - 8));
    write_file("corpus/checkpoint", name, m.buf, m.len);
    if (keep)
        *keep = m;
    else
        free(m.buf);
}

/* A checkpoint record (snapshot or delta) with the time written fixed, so
 * the seeds regenerate identically. */
static bf_membuf record_fixed(const bs_ckpt_meta *m, const bf_filter *f,
                              bool delta)
{
    bf_membuf out;
    char err[512];
    if (bs_ckpt_encode_record(m, f, delta, &out.buf, &out.len, err,
                              sizeof err) != 0)
        die("%s", err);
    put64(out.buf + 24, UINT64_C(1700000000000));
    put64(out.buf + out.len - 8, XXH3_64bits(out.buf, out.len - 8));
    return out;
}

/* An audit sample (rate 1/2) of hashes under `seed` that counted 40
 * lookups, every third a false positive. */
static bf_audit *counted_audit(uint64_t seed)
{
    char err[256];
    bf_audit *a = bf_audit_new(0.5, seed, err, sizeof err);
    if (!a)
        die("audit: %s", err);
    for (int i = 0; i < 80; i++) {
        char k[32];
        int n = snprintf(k, sizeof k, "seen-%d", i);
        if (bf_audit_check(a, bf_hash_key(k, (size_t)n, seed), i % 3 == 0) <
            0)
            die("audit: out of memory");
    }
    return a;
}

/* A delta of the base after `more` keys, as the file a checkpoint writes,
 * with the audit sample a (NULL: none). */
static bf_membuf delta_record(uint64_t more, uint32_t nwm, const bf_audit *a)
{
    static const bs_ckpt_wm wm[2] = {{0, 77}, {1, 12345}};
    bf_filter *f = delta_base();
    if (!f)
        die("out of memory");
    delta_base_add(f, 1000, more);
    bs_ckpt_meta m = {DELTA_BASE_TOPIC, DELTA_BASE_PARTITION, 100 + (int64_t)more,
                      wm, nwm, DELTA_BASE_SEQ + 1, UINT64_C(0xfedcba9876543210),
                      DELTA_BASE_ID, a};
    bf_membuf out = record_fixed(&m, f, true);
    bf_filter_destroy(f);
    return out;
}

static void delta_seeds(void)
{
    const char *dir = "corpus/ckpt_delta";
    bf_membuf few = delta_record(10, 0, NULL),
              layers = delta_record(200, 2, NULL),
              none = delta_record(0, 0, NULL);
    bf_audit *a = counted_audit(BF_DEFAULT_SEED);
    bf_membuf audited = delta_record(10, 0, a);
    write_file(dir, "audit.ckpd", audited.buf, audited.len);
    free(audited.buf);
    bf_audit_destroy(a);
    write_file(dir, "few-keys.ckpd", few.buf, few.len);
    write_file(dir, "new-layers.ckpd", layers.buf, layers.len);
    write_file(dir, "no-change.ckpd", none.buf, none.len);
    damaged(dir, "bad-magic.ckpd", &few, few.len, 0, "BLMCKPX", 7, 1);
    damaged(dir, "bad-checksum.ckpd", &few, few.len, few.len - 1, "\xff", 1,
            0);
    damaged(dir, "truncated.ckpd", &few, few.len - 50, 0, NULL, 0, 0);
    /* names another base (the prev id, right after seq and id) */
    damaged(dir, "other-base.ckpd", &few, few.len,
            40 + strlen(DELTA_BASE_TOPIC) + 16, "\x11\x22", 2, 1);
    free(few.buf);
    free(layers.buf);
    free(none.buf);
}

/* One record of fuzz_store_kafka's input: u8 key length, key, u16 value
 * length, value. */
static void store_rec(bf_membuf *out, const char *key, const uint8_t *val,
                      size_t vlen)
{
    size_t klen = strlen(key);
    uint8_t head[3] = {(uint8_t)klen, (uint8_t)vlen, (uint8_t)(vlen >> 8)};
    if (bf_membuf_write(out, head, 1) != 0 ||
        bf_membuf_write(out, key, klen) != 0 ||
        bf_membuf_write(out, head + 1, 2) != 0 ||
        bf_membuf_write(out, val, vlen) != 0)
        die("out of memory");
}

/* A chain in the Kafka store: the base as the snapshot (seq 4), a delta of
 * 10 keys (seq 5), chunks of 256 bytes, then each damaged in turn. */
static void store_kafka_seeds(void)
{
    const size_t chunk = 256;
    bf_filter *f = delta_base();
    if (!f)
        die("out of memory");
    bs_ckpt_meta m = {DELTA_BASE_TOPIC, DELTA_BASE_PARTITION, 100, NULL, 0,
                      DELTA_BASE_SEQ, DELTA_BASE_ID, 0, NULL};
    bf_membuf snap = record_fixed(&m, f, false), delta = delta_record(10, 0, NULL);
    const bf_membuf *rec[2] = {&snap, &delta};
    for (int variant = 0; variant < 3; variant++) {
        bf_membuf out = {NULL, 0, 0};
        char line[1024];
        size_t first[2], at = 0;
        for (int r = 0; r < 2; r++) {
            first[r] = at;
            at += (rec[r]->len + chunk - 1) / chunk;
        }
        int n = snprintf(line, sizeof line, "{\"v\":2,\"input_offset\":110,"
                         "\"states\":[");
        for (int r = 0; r < 2; r++)
            n += snprintf(line + n, sizeof line - (size_t)n,
                          "%s{\"seq\":%d,\"chunks\":%zu,\"chunk_bytes\":%zu,"
                          "\"size\":%zu,\"xxh3\":\"%016llx\",\"first\":%zu}",
                          r ? "," : "", DELTA_BASE_SEQ + r,
                          (rec[r]->len + chunk - 1) / chunk, chunk,
                          rec[r]->len,
                          (unsigned long long)XXH3_64bits(rec[r]->buf,
                                                          rec[r]->len),
                          first[r]);
        n += snprintf(line + n, sizeof line - (size_t)n, "]}\n");
        if (bf_membuf_write(&out, line, (size_t)n) != 0)
            die("out of memory");
        for (int r = 0; r < 2; r++)
            for (size_t off = 0, i = 0; off < rec[r]->len; off += chunk, i++) {
                char key[64];
                snprintf(key, sizeof key, "bs1/g/t/0/%d/%zu",
                         DELTA_BASE_SEQ + r, i);
                size_t len = rec[r]->len - off < chunk ? rec[r]->len - off
                                                       : chunk;
                uint8_t buf[256];
                memcpy(buf, rec[r]->buf + off, len);
                if (variant == 1 && r == 1 && i == 0)
                    buf[len / 2] ^= 0x40; /* the delta's checksum fails */
                if (variant == 2 && r == 1 && i == 0)
                    continue; /* a chunk of the delta missing */
                store_rec(&out, key, buf, len);
            }
        static const char *const names[] = {"chain-valid", "chain-damaged",
                                            "chain-missing"};
        write_file("corpus/store_kafka", names[variant], out.buf, out.len);
        free(out.buf);
    }
    free(snap.buf);
    free(delta.buf);
    bf_filter_destroy(f);
}

static void checkpoint_seeds(void)
{
    const char *dir = "corpus/checkpoint";
    bf_filter *s1 = scalable(16, 5), *s3 = scalable(4, 40);
    static const bs_ckpt_wm wm[3] = {{0, 100}, {1, 0}, {2, 123456789}};
    bf_membuf m;
    ckpt("events-0.ckpt", "events", 0, 42, NULL, 0, s1, &m);
    ckpt("clicks-7.ckpt", "clicks.eu-west_1", 7, 1000000, wm, 3, s3, NULL);
    /* dedup.window.ms: a windowed filter inside. */
    bf_filter *w3 = windowed(6);
    ckpt("windowed-3gens.ckpt", "events", 2, 5000, wm, 3, w3, NULL);
    bf_filter_destroy(w3);
    /* dedup.audit.rate: an audit sample after the filter. */
    bf_audit *a = counted_audit(bf_filter_seed(s1));
    bs_ckpt_meta am = {"events", 0, 42, NULL, 0, 0,
                       UINT64_C(0x1d1d1d1d1d1d1d1d), 0, a};
    bf_membuf audited = record_fixed(&am, s1, false);
    write_file(dir, "events-audit.ckpt", audited.buf, audited.len);
    free(audited.buf);
    bf_audit_destroy(a);

    damaged(dir, "bad-magic.ckpt", &m, m.len, 0, "BLMCKPX", 7, 1);
    damaged(dir, "bad-version.ckpt", &m, m.len, 8, "\x09\x00", 2, 1);
    damaged(dir, "bad-checksum.ckpt", &m, m.len, m.len - 1, "\xff", 1, 0);
    damaged(dir, "truncated.ckpt", &m, m.len - 100, 0, NULL, 0, 0);
    damaged(dir, "negative-offset.ckpt", &m, m.len, 16,
            "\xff\xff\xff\xff\xff\xff\xff\xff", 8, 1);
    damaged(dir, "bad-topic-length.ckpt", &m, m.len, 10, "\x00\x00", 2, 1);
    free(m.buf);

    /* A checkpoint holding a blocked filter: decodes, then is refused. */
    char err[256];
    bf_filter *b = bf_filter_from_blocked(
        bf_blocked_new(20, 0.01, BF_DEFAULT_SEED, err, sizeof err));
    if (!b)
        die("%s", err);
    ckpt("blocked-filter.ckpt", "events", 1, 5, NULL, 0, b, NULL);
    bf_filter_destroy(b);
    bf_filter_destroy(s1);
    bf_filter_destroy(s3);
}

/* One dictionary entry: "text", escaped as libFuzzer reads it. */
static void dict_entry(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p >= 0x7f)
            fprintf(f, "\\x%02X", *p);
        else
            fputc(*p, f);
    }
    fputs("\"\n", f);
}

static void config_dict(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/fuzz_config.dict", root);
    FILE *f = fopen(path, "w");
    if (!f)
        die("%s: cannot write", path);
    fputs("# fuzz_config's dictionary, written by fuzz/make_seeds.c from "
          "the key table.\n",
          f);
    static const char *const fixed[] = {
        "%%env\n", "%%-X\n", "BLOOMSTAGE_", "=", "\r\n", "#", "!", "___",
        "__", "true", "false", "key", "value", "header:", "json:/", "~0",
        "~1", "1e-9", "0.1", "-1", "9223372036854775807", "1k", "1M", "1G",
        "1T", ",", "kafka.", "consumer.", "producer.", "blocklist.",
        "\xEF\xBB\xBF", BS_CONFIG_FILE_PREFIX, "_FILE=",
        BS_CONFIG_FILE_PREFIX FUZZ_CONFIG_SECRET,
        BS_CONFIG_FILE_PREFIX FUZZ_CONFIG_NUMBER, FUZZ_CONFIG_SECRET,
        FUZZ_CONFIG_DIR, "sasl.password", "security.protocol=SASL_SSL",
        "sasl.mechanism", "ssl.ca.location", "ssl.key.location", "probe",
        NULL};
    for (size_t i = 0; fixed[i]; i++)
        dict_entry(f, fixed[i]);
    for (size_t i = 0; i < bs_config_nrows; i++) {
        const bs_config_row *row = &bs_config_rows[i];
        char key[512], env[1024];
        const char *star = strchr(row->name, '*');
        if (!star)
            snprintf(key, sizeof key, "%s", row->name);
        else if (star[1])
            snprintf(key, sizeof key, "%.*sspam%s", (int)(star - row->name),
                     row->name, star + 1);
        else
            snprintf(key, sizeof key, "%.*sbootstrap.servers",
                     (int)(star - row->name), row->name);
        dict_entry(f, key);
        if (bs_config_env_encode(key, env, sizeof env) == 0) {
            char full[1100];
            snprintf(full, sizeof full, "BLOOMSTAGE_%s=", env);
            dict_entry(f, full);
        }
        for (size_t v = 0; row->type == BS_CT_ENUM && row->values[v]; v++)
            dict_entry(f, row->values[v]);
    }
    if (fclose(f) != 0)
        die("%s: write failed", path);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: make_seeds FUZZ_DIR (the source's fuzz/)\n");
        return 2;
    }
    root = argv[1];
    filter_seeds();
    checkpoint_seeds();
    delta_seeds();
    store_kafka_seeds();
    config_dict();
    return 0;
}
