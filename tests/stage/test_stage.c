/*
 * test_stage.c -- `bloomstage run` end to end, as a user runs it: a
 * `bloomstage mock-broker` process as the cluster, the stage as another
 * process with a configuration file in a temp directory, records fed and
 * read back with librdkafka (harness/, support.h).
 *
 * Every test computes what the stage must do from the input it reads back
 * (a model of DESIGN.md's record path: blocklists, then the missing-key
 * policy, then the per-partition dedup filter) and checks the output against
 * it record by record: each input record is in exactly one of output.topic
 * and rejected.topic, with its key, value, timestamp and headers, a
 * bloomstage-src header naming it, on rejected.topic a bloomstage-reason
 * saying why, and in input order within a partition.
 *
 * What must hold:
 *   - a known stream with duplicates and two blocklists (a sender list
 *     checked against a JSON member, a key list checked against the dedup
 *     key) is routed exactly as the model says, from text lists and from
 *     `bloomstage filter build` files alike;
 *   - SIGTERM drains: exit 0, the group's offsets committed at the end of
 *     the input, every partition checkpointed there; a restart on the same
 *     checkpoints reads only what came after them and forwards only new
 *     keys from a replay; a damaged checkpoint stops a restart before the
 *     group's offsets or the output change (under both
 *     processing.guarantee settings);
 *   - dedup.key header:NAME (last header wins), json:/a/b (non-string
 *     values, whitespace-insensitive), json:/a~1b and a blocklist keyed by
 *     json:/m~0n, value; records without the key forwarded and counted, or
 *     rejected with reason missing-key, never silently dropped;
 *   - start-up failures (missing or damaged blocklist, damaged checkpoint,
 *     a FIFO or a directory where a filter or checkpoint file should be)
 *     exit 1 naming the file, within REFUSE_S (a FIFO does not block the
 *     open), before the stage joins the group (a later standalone commit
 *     still succeeds, which the mock refuses once anyone has joined),
 *     commit nothing and produce nothing;
 *   - secrets: a secret key's -X value is gone from /proc/PID/cmdline of
 *     the running stage, with a warning pointing to @file: and the _FILE
 *     variable and no value; the process is not dumpable (/proc/PID/status
 *     owned by root although it runs as another user) unless
 *     BLOOMSTAGE_CORE_DUMPS=1; checkpoint files are 0600 whatever the
 *     umask;
 *   - configuration errors exit 2 with FILE:LINE; BLOOMSTAGE_* overrides
 *     the file and -X overrides both.
 *
 * Waiting is by polling high watermarks with a bounded timeout, never by
 * sleeping for a fixed time.  The stage's stderr is printed when a test
 * fails.  Needs BLOOMSTAGE_BIN (ctest sets it).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support.h"

#define REFUSE_S 20.0     /* for a stage that must refuse to start */
#define MAX_PARTS 16

/* ---- fixture: a broker with in:3 out:3 rej:1 and a temp directory --- */

typedef h_fixture fixture;

static int setup(void **state)
{
    static const char *const topics[] = {"in:3", "out:3", "rej:1", NULL};
    return h_fixture_setup(state, 1, topics);
}

#define teardown h_fixture_teardown

/* ---- files -------------------------------------------------------- */

static char *write_text(fixture *fx, const char *name, const char *text)
{
    char *path = h_strdupf("%s/%s", fx->dir, name);
    H_CHECK(h_write_file(path, text));
    return path;
}

static void write_bytes(const char *path, const void *buf, size_t len)
{
    H_CHECK(h_write_bytes(path, buf, len));
}

#define MIDDLE LONG_MIN

/* XORs the byte at `at` of path with 0xff (at < 0: from the end; MIDDLE:
 * the middle one). */
static void damage_byte(const char *path, long at)
{
    char *buf = NULL;
    size_t len = 0;
    H_CHECK(h_read_file(path, &buf, &len));
    size_t i = at == MIDDLE ? len / 2
               : at >= 0    ? (size_t)at
                            : len - (size_t)-at;
    assert_true(i < len);
    buf[i] ^= (char)0xff;
    write_bytes(path, buf, len);
    free(buf);
}

static void copy_file(const char *from, const char *to, size_t max)
{
    char *buf = NULL;
    size_t len = 0;
    H_CHECK(h_read_file(from, &buf, &len));
    write_bytes(to, buf, len < max ? len : max);
    free(buf);
}

/* ---- processes ---------------------------------------------------- */

/* The stage must refuse to start: exit `want` within REFUSE_S, without
 * ever logging "started" (it subscribes right after). */
static void stage_refuses(h_proc *p, int want)
{
    double t0 = h_now_s();
    int st = 0;
    for (;;) {
        int r = h_process_wait(p, 100, &st);
        if (r == 0)
            break;
        if (r < 0)
            h_stage_fail(p, "wait: %s", h_last_error());
        if (h_said(p, "msg=started")) {
            h_process_kill(p, SIGKILL);
            h_stage_fail(p, "the stage started instead of refusing to");
        }
        if (h_now_s() - t0 > REFUSE_S)
            h_stage_fail(p, "still running after %.0f s instead of refusing "
                         "to start", REFUSE_S);
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != want)
        h_stage_fail(p, "%s, want exit %d", h_status_str(st), want);
}

/* ---- topics ------------------------------------------------------- */

static int64_t topic_total(fixture *fx, const char *topic)
{
    int64_t total = 0;
    H_CHECK(h_topic_total(fx->bs, topic, &total));
    return total;
}

static void consume(fixture *fx, const char *topic, h_record_list *l)
{
    h_record_list_free(l);
    H_CHECK(h_consume_all(fx->bs, topic, H_CONSUME_MS, l));
}

static void committed(fixture *fx, const char *group, int64_t *off)
{
    for (int p = 0; p < 3; p++)
        off[p] = -2;
    H_CHECK(h_committed(fx->bs, group, "in", 3, off));
}

static void high_watermarks(fixture *fx, const char *topic, int64_t *hw,
                            int parts)
{
    for (int p = 0; p < parts; p++) {
        int64_t lo;
        H_CHECK(h_watermarks(fx->bs, topic, p, &lo, &hw[p]));
    }
}

/* ---- generated input ---------------------------------------------- */

/* One input record as generated, with what the model needs to know. */
typedef struct grec {
    char key[48];
    char value[224];
    char seq[24]; /* a size_t in decimal */
    char hv[2][48];
    h_header hdrs[4]; /* hdrs[0] is always seq=INDEX */
    h_record rec;
    int id;              /* its identity under dedup.key; -1: no key there */
    const char *blocked; /* "blocklist:NAME" if a blocklist must catch it */
} grec;

static grec *grecs_new(size_t n)
{
    grec *g = calloc(n, sizeof(*g));
    assert_non_null(g);
    for (size_t i = 0; i < n; i++) {
        snprintf(g[i].seq, sizeof(g[i].seq), "%zu", i);
        g[i].hdrs[0] = (h_header){"seq", g[i].seq, strlen(g[i].seq)};
        g[i].id = -1;
    }
    return g;
}

/* Sets g's record: key/value (NULL: null), headers hdrs[0..nh), partition. */
static void grec_set(grec *g, const char *key, const char *value, size_t nh,
                     int32_t partition)
{
    if (key)
        snprintf(g->key, sizeof(g->key), "%s", key);
    if (value)
        snprintf(g->value, sizeof(g->value), "%s", value);
    g->rec = h_rec(key ? g->key : NULL, value ? g->value : NULL);
    g->rec.headers = g->hdrs;
    g->rec.n_headers = nh;
    g->rec.partition = partition;
}

static void produce_grecs(fixture *fx, const char *topic, const grec *g,
                          size_t n)
{
    h_record *r = malloc(n * sizeof(*r));
    assert_non_null(r);
    for (size_t i = 0; i < n; i++)
        r[i] = g[i].rec;
    H_CHECK(h_produce(fx->bs, topic, H_PARTITION_PER_RECORD, r, n));
    free(r);
}

static uint32_t rng_state;
static uint32_t rng(void)
{
    return h_xorshift32(&rng_state);
}

static bool hdr_is(const h_header *h, const char *s)
{
    return h && h->value && h->value_len == strlen(s) &&
           !memcmp(h->value, s, h->value_len);
}

/* ---- the model and the check -------------------------------------- */

/* What the stage must have done with each record of the input topic (as
 * read back: partition order, offset order within one). */
typedef struct model {
    const char **fate; /* per input record: NULL forwarded, else the reason */
    size_t n, out, dup, blocked, missing, rejected;
} model;

/* DESIGN.md's record path: a blocklist hit drops; else a missing key is
 * forwarded or rejected by policy (counted either way); else the first
 * record of an identity in its partition is forwarded, later ones are
 * duplicates. */
static void model_run(const h_record_list *in, const grec *g, size_t ng,
                      bool reject_missing, model *m)
{
    int max_id = 0;
    for (size_t i = 0; i < ng; i++)
        if (g[i].id > max_id)
            max_id = g[i].id;
    bool *seen = calloc((size_t)MAX_PARTS * (size_t)(max_id + 1), 1);
    assert_non_null(seen);
    *m = (model){.fate = calloc(in->n ? in->n : 1, sizeof(char *)),
                 .n = in->n};
    assert_non_null(m->fate);
    for (size_t i = 0; i < in->n; i++) {
        const h_record *r = &in->recs[i];
        const h_header *s = h_header_last(r, "seq");
        assert_non_null(s);
        size_t k = (size_t)strtoul((const char *)s->value, NULL, 10);
        assert_true(k < ng);
        assert_true(r->partition >= 0 && r->partition < MAX_PARTS);
        if (g[k].blocked) {
            m->fate[i] = g[k].blocked;
            m->blocked++;
        } else if (g[k].id < 0) {
            m->missing++;
            if (reject_missing)
                m->fate[i] = "missing-key";
        } else {
            bool *sn = &seen[(size_t)r->partition * (size_t)(max_id + 1) +
                             (size_t)g[k].id];
            if (*sn) {
                m->fate[i] = "duplicate";
                m->dup++;
            }
            *sn = true;
        }
        if (m->fate[i])
            m->rejected++;
        else
            m->out++;
    }
    free(seen);
}

static void model_free(model *m)
{
    free(m->fate);
    *m = (model){0};
}

/* The stage's last log line, with the model's counts. */
static void expect_stopped_line(h_proc *p, size_t in, const model *m)
{
    char line[256];
    snprintf(line, sizeof(line), "msg=stopped records_in=%zu records_out=%zu "
             "duplicates=%zu blocked=%zu missing_key=%zu ", in, m->out,
             m->dup, m->blocked, m->missing);
    h_expect_said(p, line);
}

static bool same_bytes(const void *a, size_t alen, const void *b, size_t blen)
{
    if (!a || !b)
        return !a && !b;
    return alen == blen && !memcmp(a, b, alen);
}

/* Index in `in` of the record on partition p at offset off, or -1. */
static long find_input(const h_record_list *in, int32_t p, int64_t off)
{
    size_t lo = 0, hi = in->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const h_record *r = &in->recs[mid];
        if (r->partition < p || (r->partition == p && r->offset < off))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < in->n && in->recs[lo].partition == p &&
        in->recs[lo].offset == off)
        return (long)lo;
    return -1;
}

/* Checks one output or rejected record against the model: it names an
 * input record by bloomstage-src, is a faithful copy of it plus the
 * stage's headers, and went where the model says.  Returns the input
 * index. */
static size_t check_copy(const h_record *got, const char *where,
                         const char *in_topic, const h_record_list *in,
                         const model *m, bool rejected)
{
    const h_header *src = h_header_last(got, "bloomstage-src");
    if (!src || !src->value)
        fail_msg("%s [%d] @%" PRId64 ": no bloomstage-src header", where,
                 (int)got->partition, got->offset);
    char want_prefix[256];
    int np = snprintf(want_prefix, sizeof(want_prefix), "%s:", in_topic);
    int sp = -1;
    long long so = -1;
    char tail;
    if (strncmp(src->value, want_prefix, (size_t)np) != 0 ||
        sscanf((const char *)src->value + np, "%d:%lld%c", &sp, &so,
               &tail) != 2)
        fail_msg("%s [%d] @%" PRId64 ": bloomstage-src '%s' is not "
                 "%s:PARTITION:OFFSET", where, (int)got->partition,
                 got->offset, (const char *)src->value, in_topic);
    long k = find_input(in, sp, so);
    if (k < 0)
        fail_msg("%s: bloomstage-src %s names no input record", where,
                 (const char *)src->value);
    const h_record *want = &in->recs[k];
    const char *fate = m->fate[k];
    const h_header *seq = h_header_last(want, "seq");
    if (rejected && !fate)
        fail_msg("%s holds %s (seq %s), which must be forwarded", where,
                 (const char *)src->value, (const char *)seq->value);
    if (!rejected && fate)
        fail_msg("%s holds %s (seq %s), which must be rejected as %s",
                 where, (const char *)src->value, (const char *)seq->value,
                 fate);
    if (!same_bytes(got->key, got->key_len, want->key, want->key_len) ||
        !same_bytes(got->value, got->value_len, want->value,
                    want->value_len))
        fail_msg("%s: the copy of %s changed its key or value", where,
                 (const char *)src->value);
    if (got->timestamp != want->timestamp)
        fail_msg("%s: the copy of %s has timestamp %" PRId64 ", not %"
                 PRId64, where, (const char *)src->value, got->timestamp,
                 want->timestamp);
    /* The original headers in their order, then bloomstage-src and (only
     * on rejected.topic) bloomstage-reason. */
    size_t extra = rejected ? 2 : 1;
    if (got->n_headers != want->n_headers + extra)
        fail_msg("%s: the copy of %s has %zu headers, want %zu + %zu", where,
                 (const char *)src->value, got->n_headers, want->n_headers,
                 extra);
    for (size_t h = 0; h < want->n_headers; h++)
        if (strcmp(got->headers[h].name, want->headers[h].name) ||
            !same_bytes(got->headers[h].value, got->headers[h].value_len,
                        want->headers[h].value, want->headers[h].value_len))
            fail_msg("%s: the copy of %s changed header %zu (%s)", where,
                     (const char *)src->value, h, want->headers[h].name);
    const h_header *reason = h_header_last(got, "bloomstage-reason");
    bool src_added = false, reason_added = false;
    for (size_t h = want->n_headers; h < got->n_headers; h++) {
        src_added |= &got->headers[h] == src;
        reason_added |= &got->headers[h] == reason;
    }
    if (!src_added || (rejected && !reason_added))
        fail_msg("%s: the copy of %s lacks the stage's own headers after "
                 "the original ones", where, (const char *)src->value);
    if (rejected && !hdr_is(reason, fate))
        fail_msg("%s: %s (seq %s) rejected as '%s', want '%s'", where,
                 (const char *)src->value, (const char *)seq->value,
                 reason && reason->value ? (const char *)reason->value
                                         : "(none)",
                 fate);
    return (size_t)k;
}

/* out and rej (NULL: must not exist) against the model: every input record
 * is in exactly one of them, as the model routes it, and the records of
 * one input partition keep their order within each output partition. */
static void check_routing(const char *in_topic, const h_record_list *in,
                          const model *m, const char *out_name,
                          const h_record_list *out, const char *rej_name,
                          const h_record_list *rej)
{
    unsigned *seen = calloc(in->n ? in->n : 1, sizeof(unsigned));
    assert_non_null(seen);
    for (int which = 0; which < 2; which++) {
        const h_record_list *l = which ? rej : out;
        const char *name = which ? rej_name : out_name;
        if (!l)
            continue;
        int64_t last[MAX_PARTS];
        int32_t cur = -1;
        for (size_t i = 0; i < l->n; i++) {
            const h_record *r = &l->recs[i];
            if (r->partition != cur) {
                cur = r->partition;
                for (int p = 0; p < MAX_PARTS; p++)
                    last[p] = -1;
            }
            size_t k = check_copy(r, name, in_topic, in, m, which == 1);
            if (seen[k]++)
                fail_msg("input %s:%d:%" PRId64 " was produced twice (again "
                         "at %s [%d] @%" PRId64 ")", in_topic,
                         (int)in->recs[k].partition, in->recs[k].offset,
                         name, (int)r->partition, r->offset);
            int32_t sp = in->recs[k].partition;
            if (in->recs[k].offset <= last[sp])
                fail_msg("%s [%d]: %s:%d:%" PRId64 " after offset %" PRId64
                         ": input order not kept", name, (int)r->partition,
                         in_topic, (int)sp, in->recs[k].offset, last[sp]);
            last[sp] = in->recs[k].offset;
        }
    }
    for (size_t k = 0; k < in->n; k++)
        if (!seen[k])
            fail_msg("input %s:%d:%" PRId64 " (%s) is in neither %s nor %s: "
                     "silently dropped", in_topic, (int)in->recs[k].partition,
                     in->recs[k].offset,
                     m->fate[k] ? m->fate[k] : "to be forwarded", out_name,
                     rej_name ? rej_name : "(no rejected topic)");
    assert_int_equal(out->n, m->out);
    if (rej)
        assert_int_equal(rej->n, m->rejected);
    free(seen);
}

/* ---- 1, 6: a known stream --------------------------------------------- */

#define KS_RECORDS 3000
#define KS_KEYS 1000

/* Key j is always sent by the same sender; senders 3, 17 and 29 are spam
 * (but "User3@..." is not: entries match as exact bytes); a few keys are
 * on the key list (none of them from a spam sender). */
static bool ks_spam(int j)
{
    int u = j % 40;
    return j % 41 != 0 && (u == 3 || u == 17 || u == 29);
}
static bool ks_key_listed(int j) { return !ks_spam(j) && j % 97 == 5; }

static grec *ks_generate(void)
{
    grec *g = grecs_new(KS_RECORDS);
    rng_state = 2463534242u;
    for (size_t i = 0; i < KS_RECORDS; i++) {
        int j = (int)(rng() % KS_KEYS);
        char key[32], from[40], value[160];
        snprintf(key, sizeof(key), "user-key-%04d", j);
        if (j % 41 == 0)
            snprintf(from, sizeof(from), "User3@example.com");
        else
            snprintf(from, sizeof(from), "user%d@example.com", j % 40);
        snprintf(value, sizeof(value), "{\"from\":\"%s\",\"n\":%zu,\"text\":"
                 "\"hello number %zu\"}", from, i, i);
        g[i].hdrs[1] = (h_header){"origin", "test_stage", 10};
        g[i].hdrs[2] = (h_header){"flag", NULL, 0};
        grec_set(&g[i], key, value, i % 5 == 0 ? 3 : 2, j % 3);
        g[i].id = j;
        g[i].blocked = ks_spam(j)         ? "blocklist:spam"
                       : ks_key_listed(j) ? "blocklist:keys"
                                          : NULL;
    }
    return g;
}

static void ks_lists(fixture *fx, char **spam, char **keys)
{
    /* The list rules: comments, blank lines, white space, CRLF. */
    *spam = write_text(fx, "spam.txt",
                       "# spam senders\n\n  user3@example.com  \r\n"
                       "user17@example.com\r\n\t user29@example.com\n"
                       "# user5@example.com is not on it\n"
                       "nobody@example.com\n");
    size_t cap = 64 * 1024, o = 0;
    char *text = malloc(cap);
    assert_non_null(text);
    o += (size_t)snprintf(text, cap, "never-seen-key\n");
    for (int j = 0; j < KS_KEYS; j++)
        if (ks_key_listed(j))
            o += (size_t)snprintf(text + o, cap - o, "user-key-%04d\n", j);
    assert_true(o < cap);
    *keys = write_text(fx, "keys.txt", text);
    free(text);
}

static void known_stream(fixture *fx, bool filter_files)
{
    char *spam, *keys;
    ks_lists(fx, &spam, &keys);
    if (filter_files) {
        /* Both with seeds of their own: each looked up with a hash of its
         * own (the text lists use bloomstage's seed, and the key list,
         * checked against the dedup key, then shares the dedup hash). */
        char *spam_bf = h_strdupf("%s/spam.bf", fx->dir);
        char *keys_bf = h_strdupf("%s/keys.bf", fx->dir);
        const char *b1[] = {"filter", "build", "--fpr", "1e-9", "--seed",
                            "12345", "-o", spam_bf, spam, NULL};
        const char *b2[] = {"filter", "build", "--fpr", "1e-9", "--seed",
                            "999", "-o", keys_bf, keys, NULL};
        h_bs_cmd(b1, 0);
        h_bs_cmd(b2, 0);
        free(spam);
        free(keys);
        spam = spam_bf;
        keys = keys_bf;
    }
    char *text = h_strdupf(
        "# test_stage: a known stream\n"
        "input.topics=in\noutput.topic=out\nrejected.topic=rej\n"
        "kafka.bootstrap.servers=%s\nconsumer.group.id=known\n"
        "checkpoint.dir=%s/ckpt\ncheckpoint.interval.ms=300\n"
        "dedup.key=key\ndedup.fpr=1e-9\n"
        "# small, so the filters grow layers during the stream\n"
        "dedup.capacity=100\n"
        "blocklist.spam.path=%s\nblocklist.spam.key=json:/from\n"
        "blocklist.spam.fpr=1e-9\n"
        "blocklist.keys.path=%s\nblocklist.keys.fpr=1e-9\n",
        fx->bs, fx->dir, spam, keys);
    char *conf = write_text(fx, "stage.conf", text);

    grec *g = ks_generate();
    produce_grecs(fx, "in", g, KS_RECORDS);
    h_record_list in = {0}, out = {0}, rej = {0};
    consume(fx, "in", &in);
    assert_int_equal(in.n, KS_RECORDS);
    model m;
    model_run(&in, g, KS_RECORDS, false, &m);
    /* The stream exercises every path. */
    assert_true(m.out > 300 && m.dup > 1000 && m.blocked > 100);

    h_proc *p = h_stage_start(conf, NULL, NULL);
    h_wait_out_rej(p, fx->bs, "out", (int64_t)m.out, "rej",
                   (int64_t)m.rejected);
    h_stage_stop(p);
    h_expect_said(p, filter_files ? "source=filter" : "source=list");
    expect_stopped_line(p, KS_RECORDS, &m);

    consume(fx, "out", &out);
    consume(fx, "rej", &rej);
    check_routing("in", &in, &m, "out", &out, "rej", &rej);

    /* Every unique key not listed is in out exactly once. */
    bool *fwd = calloc(KS_KEYS, 1);
    assert_non_null(fwd);
    for (size_t i = 0; i < out.n; i++) {
        int j = atoi((const char *)out.recs[i].key + strlen("user-key-"));
        assert_false(fwd[j]);
        fwd[j] = true;
    }
    for (size_t i = 0; i < KS_RECORDS; i++)
        assert_int_equal(fwd[g[i].id], !g[i].blocked);
    /* Every spam sender's and listed key's record went to rej as such. */
    size_t spam_n = 0, keys_n = 0;
    for (size_t i = 0; i < rej.n; i++) {
        const h_header *r = h_header_last(&rej.recs[i], "bloomstage-reason");
        spam_n += hdr_is(r, "blocklist:spam");
        keys_n += hdr_is(r, "blocklist:keys");
    }
    size_t want_spam = 0, want_keys = 0;
    for (size_t i = 0; i < KS_RECORDS; i++) {
        want_spam += ks_spam(g[i].id);
        want_keys += ks_key_listed(g[i].id);
    }
    assert_int_equal(spam_n, want_spam);
    assert_int_equal(keys_n, want_keys);
    assert_int_equal(in.n, out.n + rej.n);

    free(fwd);
    model_free(&m);
    h_record_list_free(&in);
    h_record_list_free(&out);
    h_record_list_free(&rej);
    free(g);
    free(conf);
    free(text);
    free(spam);
    free(keys);
}

static void test_known_stream_text_lists(void **state)
{
    known_stream(*state, false);
}

static void test_known_stream_filter_files(void **state)
{
    known_stream(*state, true);
}

/* ---- 2: graceful stop, restart, replay ------------------------------ */

#define RS_OLD 600
#define RS_NEW 150

/* Every file in dir (the checkpoints a stage wrote) is 0600. */
static void ckpt_modes_0600(const char *dir)
{
    char *cmd = h_strdupf("find '%s' -type f ! -perm 0600 | grep -q .", dir);
    int rc = system(cmd);
    free(cmd);
    if (rc == 0) {
        cmd = h_strdupf("ls -l '%s' >&2", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "ls failed\n");
        free(cmd);
        fail_msg("a checkpoint file in %s is not 0600", dir);
    }
}

static void graceful_restart(fixture *fx, const char *guarantee)
{
    char *text = h_strdupf(
        "input.topics=in\noutput.topic=out\nrejected.topic=rej\n"
        "kafka.bootstrap.servers=%s\nconsumer.group.id=restart\n"
        "processing.guarantee=%s\ncheckpoint.dir=%s/ckpt\n"
        "# a checkpoint interval longer than the test: only the drain\n"
        "# checkpoints and commits\n"
        "checkpoint.interval.ms=600000\ncheckpoint.records=0\n"
        "dedup.fpr=1e-9\ndedup.capacity=20\n"
        "# After a member leaves, the mock (2.0.2) holds the next join\n"
        "# for the group's session timeout (45 s by default).\n"
        "consumer.session.timeout.ms=6000\n",
        fx->bs, guarantee, fx->dir);
    char *conf = write_text(fx, "stage.conf", text);
    char *ckpt = h_strdupf("%s/ckpt", fx->dir);

    /* Old records: 200 keys; new ones: 100 keys never seen before. */
    grec *g = grecs_new(RS_OLD + RS_NEW);
    rng_state = 88172645u;
    for (size_t i = 0; i < RS_OLD + RS_NEW; i++) {
        int j = i < RS_OLD ? (int)(rng() % 200) : 200 + (int)(rng() % 100);
        char key[32], value[64];
        snprintf(key, sizeof(key), "k%03d", j);
        snprintf(value, sizeof(value), "value of %s, record %zu", key, i);
        grec_set(&g[i], key, value, 1, j % 3);
        g[i].id = j;
    }
    produce_grecs(fx, "in", g, RS_OLD);
    h_record_list in = {0}, out = {0}, rej = {0};
    consume(fx, "in", &in);
    model m;
    model_run(&in, g, RS_OLD + RS_NEW, false, &m);

    /* With umask 000: the checkpoint files are 0600 all the same. */
    mode_t mask = umask(0);
    h_proc *p = h_stage_start(conf, NULL, NULL);
    umask(mask);
    h_wait_out_rej(p, fx->bs, "out", (int64_t)m.out, "rej",
                   (int64_t)m.rejected);
    h_stage_stop(p);
    expect_stopped_line(p, RS_OLD, &m);

    /* The drain committed exactly the end of the input and checkpointed
     * every partition there. */
    int64_t hw[3], off[3];
    high_watermarks(fx, "in", hw, 3);
    committed(fx, "restart", off);
    for (int i = 0; i < 3; i++) {
        assert_true(hw[i] > 0);
        if (off[i] != hw[i])
            h_stage_fail(p, "in [%d]: committed %" PRId64 ", end of input %"
                         PRId64, i, off[i], hw[i]);
    }
    const char *info[] = {"checkpoint", "info", ckpt, NULL};
    h_expect_ckpt_info(h_bs_cmd(info, 0), "in", hw, 3);
    ckpt_modes_0600(ckpt);
    /* The same by the stage's configuration (its checkpoint.dir). */
    const char *info_c[] = {"checkpoint", "info", "-c", conf, NULL};
    h_expect_ckpt_info(h_bs_cmd(info_c, 0), "in", hw, 3);
    consume(fx, "out", &out);
    consume(fx, "rej", &rej);
    check_routing("in", &in, &m, "out", &out, "rej", &rej);
    size_t out_before = out.n, rej_before = rej.n;

    /* A replay of every old record, then new ones. */
    produce_grecs(fx, "in", g, RS_OLD);
    produce_grecs(fx, "in", g + RS_OLD, RS_NEW);
    consume(fx, "in", &in);
    assert_int_equal(in.n, 2 * RS_OLD + RS_NEW);
    model_free(&m);
    model_run(&in, g, RS_OLD + RS_NEW, false, &m);

    /* A damaged copy of those checkpoints stops the restart cold: exit 1
     * naming the file, nothing committed, nothing produced. */
    char *bad = h_strdupf("%s/ckpt-bad", fx->dir);
    assert_int_equal(mkdir(bad, 0755), 0);
    for (int i = 0; i < 3; i++) {
        char *from = h_strdupf("%s/in-%d.ckpt", ckpt, i);
        char *to = h_strdupf("%s/in-%d.ckpt", bad, i);
        copy_file(from, to, SIZE_MAX);
        if (i == 1)
            damage_byte(to, MIDDLE); /* in the filter's bits */
        free(from);
        free(to);
    }
    char *xbad = h_strdupf("checkpoint.dir=%s", bad);
    const char *xs[] = {xbad, NULL};
    p = h_stage_start(conf, xs, NULL);
    stage_refuses(p, 1);
    char *bad_file = h_strdupf("%s/in-1.ckpt", bad);
    h_expect_said(p, bad_file);
    committed(fx, "restart", off);
    for (int i = 0; i < 3; i++)
        assert_int_equal(off[i], hw[i]);
    assert_int_equal(topic_total(fx, "out"), (int64_t)out_before);
    assert_int_equal(topic_total(fx, "rej"), (int64_t)rej_before);

    /* The real restart resumes at the checkpoints: only the new keys come
     * out, every replayed record is a duplicate. */
    p = h_stage_start(conf, NULL, NULL);
    h_wait_out_rej(p, fx->bs, "out", (int64_t)m.out, "rej",
                   (int64_t)m.rejected);
    h_stage_stop(p);
    /* This run read only what came after the checkpoints. */
    char line[128];
    snprintf(line, sizeof(line), "msg=stopped records_in=%d ",
             RS_OLD + RS_NEW);
    h_expect_said(p, line);
    consume(fx, "out", &out);
    consume(fx, "rej", &rej);
    check_routing("in", &in, &m, "out", &out, "rej", &rej);
    size_t new_out = 0;
    for (size_t i = 0; i < out.n; i++)
        new_out += atoi((const char *)out.recs[i].key + 1) >= 200;
    size_t new_keys = 0;
    bool seen_new[100] = {false};
    for (size_t i = RS_OLD; i < RS_OLD + RS_NEW; i++)
        if (!seen_new[g[i].id - 200]) {
            seen_new[g[i].id - 200] = true;
            new_keys++;
        }
    assert_int_equal(new_out, new_keys);
    assert_int_equal(out.n, out_before + new_keys);
    for (size_t i = rej_before; i < rej.n; i++)
        assert_true(hdr_is(h_header_last(&rej.recs[i], "bloomstage-reason"),
                           "duplicate"));
    high_watermarks(fx, "in", hw, 3);
    committed(fx, "restart", off);
    for (int i = 0; i < 3; i++)
        assert_int_equal(off[i], hw[i]);
    h_expect_ckpt_info(h_bs_cmd(info, 0), "in", hw, 3);

    model_free(&m);
    h_record_list_free(&in);
    h_record_list_free(&out);
    h_record_list_free(&rej);
    free(g);
    free(bad_file);
    free(xbad);
    free(bad);
    free(ckpt);
    free(conf);
    free(text);
}

/* ---- 6: secrets -------------------------------------------------- */

/* The file the stage's pid has under /proc, read whole. */
static char *proc_file(pid_t pid, const char *name, size_t *len)
{
    char *path = h_strdupf("/proc/%d/%s", (int)pid, name);
    char *buf = NULL;
    H_CHECK(h_read_file(path, &buf, len));
    free(path);
    return buf;
}

/*
 * `bloomstage run` with a secret on its command line, waiting for a broker
 * that is not there (the configuration names a closed port), as user
 * 65534 when the test is root (through setpriv), so that /proc says
 * whether it is dumpable: the files under /proc/PID of a process that is
 * not are owned by root.  With core_dumps, BLOOMSTAGE_CORE_DUMPS=1.
 */
static void secret_run(fixture *fx, bool core_dumps)
{
    static const char SECRET[] = "hunter2-Xy9";
    bool root = geteuid() == 0;
    if (root && access("/usr/bin/setpriv", X_OK) != 0) {
        print_message("setpriv(1) missing: the dumpable check needs another "
                      "user than root\n");
        skip();
    }
    /* A configuration the other user can read. */
    assert_int_equal(chmod(fx->dir, 0755), 0);
    char *conf = write_text(fx, "secret.conf",
                            "input.topics=in\noutput.topic=out\n"
                            "kafka.bootstrap.servers=127.0.0.1:1\n"
                            "consumer.group.id=secret\n"
                            "checkpoint.dir=/nonexistent/ckpt\n");
    assert_int_equal(chmod(conf, 0644), 0);
    char *x = h_strdupf("kafka.sasl.password=%s", SECRET);
    char *argv[] = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534",
                    "--clear-groups", (char *)h_bloomstage_path(), "run",
                    "-c", conf, "-X", x, NULL};
    char *env[] = {core_dumps ? "BLOOMSTAGE_CORE_DUMPS=1" : NULL, NULL};
    h_proc *p = NULL;
    H_CHECK(h_process_spawn(root ? argv : argv + 4, env, &p));
    h_wait_said(p, "msg=\"a secret on the command line\"", 1, 20000);

    /* Its command line, as ps reads it. */
    size_t len = 0;
    char *cmd = proc_file(h_process_pid(p), "cmdline", &len);
    if (memmem(cmd, len, SECRET, strlen(SECRET)))
        h_stage_fail(p, "/proc/PID/cmdline still shows the secret");
    char *blanked = h_strdupf("kafka.sasl.password=%.*s",
                              (int)strlen(SECRET), "****************");
    if (!memmem(cmd, len, blanked, strlen(blanked)))
        h_stage_fail(p, "/proc/PID/cmdline lacks '%s'", blanked);
    /* The warning points the way and shows no value. */
    h_expect_said(p, "key=kafka.sasl.password");
    h_expect_said(p, "@file:PATH");
    h_expect_said(p, "BLOOMSTAGE_KAFKA_SASL_PASSWORD_FILE=PATH");
    if (strstr(h_process_stderr(p), SECRET))
        h_stage_fail(p, "the secret is in the stage's stderr");

    /* Dumpable or not, by the owner of the files in /proc/PID. */
    struct stat st;
    char *dir = h_strdupf("/proc/%d/status", (int)h_process_pid(p));
    assert_int_equal(stat(dir, &st), 0);
    uid_t runs_as = root ? 65534 : getuid();
    print_message("%s: /proc/PID/status owned by uid %u, the stage runs "
                  "as %u\n",
                  core_dumps ? "BLOOMSTAGE_CORE_DUMPS=1" : "default",
                  (unsigned)st.st_uid, (unsigned)runs_as);
    if (runs_as == 0)
        print_message("(root only: the owner cannot tell)\n");
    else if (core_dumps ? st.st_uid != runs_as : st.st_uid != 0)
        h_stage_fail(p, "/proc/PID/status owned by uid %u: the stage is %s "
                     "dumpable", (unsigned)st.st_uid,
                     core_dumps ? "not" : "still");
    int status = 0;
    if (h_process_terminate(p, 10000, &status) != 0 || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0)
        h_stage_fail(p, "SIGTERM while waiting for a broker: %s, want "
                     "exit 0", h_status_str(status));
    h_process_free(p);
    free(dir);
    free(blanked);
    free(cmd);
    free(x);
    free(conf);
}

static void test_secrets_in_the_process(void **state)
{
    secret_run(*state, false);
    secret_run(*state, true);
}

static void test_graceful_stop_and_restart(void **state)
{
    graceful_restart(*state, "exactly_once");
}

static void test_graceful_stop_and_restart_at_least_once(void **state)
{
    graceful_restart(*state, "at_least_once");
}

/* ---- 3: dedup.key variants and missing keys ------------------------- */

/* header:id, missing keys forwarded.  Every record has the same record
 * key, so a stage keyed on it would drop nearly everything. */
static grec *hdr_generate(size_t n)
{
    grec *g = grecs_new(n);
    for (size_t i = 0; i < n; i++) {
        int id = (int)((i * 7) % 60);
        size_t nh = 2;
        snprintf(g[i].hv[0], sizeof(g[i].hv[0]), "h-%d", id);
        snprintf(g[i].hv[1], sizeof(g[i].hv[1]), "stale-%zu", i);
        g[i].id = id;
        switch (i % 10) {
        case 6: /* no such header */
            g[i].hdrs[1] = (h_header){"other", "x", 1};
            g[i].id = -1;
            break;
        case 7: /* a null header value is no key */
            g[i].hdrs[1] = (h_header){"id", NULL, 0};
            g[i].id = -1;
            break;
        case 8: /* twice: the last one counts, the first is unique */
            g[i].hdrs[1] = (h_header){"id", g[i].hv[1], strlen(g[i].hv[1])};
            g[i].hdrs[2] = (h_header){"id", g[i].hv[0], strlen(g[i].hv[0])};
            nh = 3;
            break;
        case 9: /* header names are case-sensitive */
            g[i].hdrs[1] = (h_header){"ID", g[i].hv[0], strlen(g[i].hv[0])};
            g[i].id = -1;
            break;
        default:
            g[i].hdrs[1] = (h_header){"id", g[i].hv[0], strlen(g[i].hv[0])};
        }
        char value[48];
        snprintf(value, sizeof(value), "payload %zu", i);
        grec_set(&g[i], "same-key", value, nh,
                 g[i].id >= 0 ? g[i].id % 3 : (int32_t)(i % 3));
    }
    return g;
}

/* json:/a/b, missing keys rejected.  Identity ids: strings 0..39, numbers
 * 100.., arrays 200.., objects 300.. */
static grec *json_generate(size_t n)
{
    grec *g = grecs_new(n);
    for (size_t i = 0; i < n; i++) {
        char v[200];
        int k = (int)(i / 12), id = -1;
        switch (i % 12) {
        case 0:
            snprintf(v, sizeof(v), "{\"a\":{\"b\":\"s%d\"}}", k % 15);
            id = k % 15;
            break;
        case 1: /* the same strings, spaced and with other members */
            snprintf(v, sizeof(v), "{ \"z\": 1, \"a\" : { \"b\" : \"s%d\" "
                     "} }", k * 7 % 15);
            id = k * 7 % 15;
            break;
        case 2: /* a number is keyed by its JSON text */
            snprintf(v, sizeof(v), "{\"a\":{\"b\":%d}}", 1000 + k % 8);
            id = 100 + k % 8;
            break;
        case 3: /* ...whatever the spacing around it */
            snprintf(v, sizeof(v), "{\"c\":[1,2],\"a\":{\"b\":  %d\n}}",
                     1000 + k * 3 % 8);
            id = 100 + k * 3 % 8;
            break;
        case 4:
            snprintf(v, sizeof(v), "{\"a\":{\"b\":[1, %d]}}", k % 4);
            id = 200 + k % 4;
            break;
        case 5:
            snprintf(v, sizeof(v), "{\"a\":{\"b\":{\"x\": %d}}}", k % 4);
            id = 300 + k % 4;
            break;
        case 6:
            snprintf(v, sizeof(v), "plain text %zu, not JSON", i);
            break;
        case 7:
            snprintf(v, sizeof(v), "{\"a\":{},\"n\":%zu}", i);
            break;
        case 8:
            snprintf(v, sizeof(v), "{\"a\":\"b\",\"n\":%zu}", i);
            break;
        case 9:
            snprintf(v, sizeof(v), "{\"a\":[{\"b\":\"s1\"}],\"n\":%zu}", i);
            break;
        case 10: /* a tombstone */
            break;
        case 11:
            snprintf(v, sizeof(v), "{\"x\":{\"b\":\"s1\"},\"n\":%zu}", i);
            break;
        }
        char key[24];
        snprintf(key, sizeof(key), "r%zu", i);
        g[i].id = id;
        grec_set(&g[i], key, i % 12 == 10 ? NULL : v, 1,
                 id >= 0 ? id % 3 : (int32_t)(i % 3));
    }
    return g;
}

/* json:/a~1b (member "a/b"), missing keys rejected; blocklist "bad" keyed
 * by json:/m~0n (member "m~n"). */
static grec *esc_generate(size_t n)
{
    grec *g = grecs_new(n);
    for (size_t i = 0; i < n; i++) {
        char v[200];
        int d = (int)((i / 6 * 7 + i % 6) % 20), id = d;
        const char *blocked = NULL;
        switch (i % 6) {
        case 0:
            snprintf(v, sizeof(v), "{\"a/b\":\"e%d\"}", d);
            break;
        case 1:
            snprintf(v, sizeof(v), "{\"a/b\":\"e%d\",\"m~n\":\"evil\"}", d);
            blocked = "blocklist:bad";
            break;
        case 2: /* /m/n is not /m~0n */
            snprintf(v, sizeof(v), "{\"m\":{\"n\":\"evil\"},\"a/b\":\"e%d\"}",
                     d);
            break;
        case 3: /* /a/b is not /a~1b */
            snprintf(v, sizeof(v), "{\"a\":{\"b\":\"e%d\"}}", d);
            id = -1;
            break;
        case 4: /* nor is the escape a member name */
            snprintf(v, sizeof(v), "{\"a~1b\":\"e%d\"}", d);
            id = -1;
            break;
        case 5:
            snprintf(v, sizeof(v), "{\"a/b\":%d}", 500 + (int)(i % 4));
            id = 100 + (int)(i % 4);
            break;
        }
        char key[24];
        snprintf(key, sizeof(key), "r%zu", i);
        g[i].id = id;
        g[i].blocked = blocked;
        grec_set(&g[i], key, v, 1, id >= 0 ? id % 3 : (int32_t)(i % 3));
    }
    return g;
}

/* value, missing keys (tombstones) forwarded; record keys all differ. */
static grec *val_generate(size_t n)
{
    grec *g = grecs_new(n);
    for (size_t i = 0; i < n; i++) {
        char key[24], v[32];
        int id = (int)((i / 5 * 3 + i % 5) % 25);
        snprintf(key, sizeof(key), "r%zu", i);
        snprintf(v, sizeof(v), "the whole value %d", id);
        g[i].id = i % 9 == 4 ? -1 : id;
        grec_set(&g[i], key, g[i].id < 0 ? NULL : v, 1,
                 g[i].id >= 0 ? id % 3 : (int32_t)(i % 3));
    }
    return g;
}

typedef struct variant {
    const char *name; /* topics NAME-in, NAME-out, NAME-rej; group NAME */
    const char *settings;
    grec *(*generate)(size_t n);
    size_t n;
    bool reject_missing;
    grec *g;
    h_proc *p;
    model m;
    h_record_list in;
} variant;

static void test_dedup_key_variants(void **state)
{
    fixture *fx = *state;
    char *bad_list = write_text(fx, "bad.txt", "# bad words\nevil\n");
    char *bad_conf = h_strdupf("blocklist.bad.path=%s\n"
                               "blocklist.bad.key=json:/m~0n\n"
                               "blocklist.bad.fpr=1e-9\n"
                               "dedup.on.missing.key=reject\n", bad_list);
    variant vs[] = {
        {"hdr", "dedup.key=header:id\ndedup.on.missing.key=forward\n",
         hdr_generate, 300, false, NULL, NULL, {0}, {0}},
        {"json", "dedup.key=json:/a/b\ndedup.on.missing.key=reject\n",
         json_generate, 240, true, NULL, NULL, {0}, {0}},
        {"esc", "dedup.key=json:/a~1b\n", esc_generate, 180, true, NULL,
         NULL, {0}, {0}},
        {"val", "dedup.key=value\n", val_generate, 150, false, NULL, NULL,
         {0}, {0}},
    };
    const size_t nv = sizeof(vs) / sizeof(vs[0]);

    /* Four stages at once, one per variant, each with its own topics,
     * group and checkpoints: one group join's wait for all three. */
    for (size_t v = 0; v < nv; v++) {
        variant *x = &vs[v];
        char *cmd = h_strdupf("create-topic %s-in 3", x->name);
        H_CHECK(h_broker_control(fx->broker, cmd));
        free(cmd);
        cmd = h_strdupf("create-topic %s-out 3", x->name);
        H_CHECK(h_broker_control(fx->broker, cmd));
        free(cmd);
        cmd = h_strdupf("create-topic %s-rej 1", x->name);
        H_CHECK(h_broker_control(fx->broker, cmd));
        free(cmd);
        char *text = h_strdupf(
            "input.topics=%s-in\noutput.topic=%s-out\n"
            "rejected.topic=%s-rej\nkafka.bootstrap.servers=%s\n"
            "consumer.group.id=%s\ncheckpoint.dir=%s/ckpt-%s\n"
            "checkpoint.interval.ms=300\ndedup.fpr=1e-9\n"
            "dedup.capacity=50\n%s%s",
            x->name, x->name, x->name, fx->bs, x->name, fx->dir, x->name,
            x->settings, v == 2 ? bad_conf : "");
        char *name = h_strdupf("%s.conf", x->name);
        char *conf = write_text(fx, name, text);
        x->g = x->generate(x->n);
        char *topic = h_strdupf("%s-in", x->name);
        produce_grecs(fx, topic, x->g, x->n);
        consume(fx, topic, &x->in);
        assert_int_equal(x->in.n, x->n);
        model_run(&x->in, x->g, x->n, x->reject_missing, &x->m);
        assert_true(x->m.out > 0 && x->m.dup > 0 && x->m.missing > 0);
        x->p = h_stage_start(conf, NULL, NULL);
        free(topic);
        free(conf);
        free(name);
        free(text);
    }
    assert_true(vs[2].m.blocked > 0);
    for (size_t v = 0; v < nv; v++) {
        variant *x = &vs[v];
        char *out = h_strdupf("%s-out", x->name);
        char *rej = h_strdupf("%s-rej", x->name);
        h_wait_out_rej(x->p, fx->bs, out, (int64_t)x->m.out, rej,
                     (int64_t)x->m.rejected);
        free(out);
        free(rej);
    }
    for (size_t v = 0; v < nv; v++) {
        variant *x = &vs[v];
        h_stage_stop(x->p);
        /* Missing keys are counted under either policy. */
        expect_stopped_line(x->p, x->n, &x->m);
        char *in = h_strdupf("%s-in", x->name);
        char *out = h_strdupf("%s-out", x->name);
        char *rej = h_strdupf("%s-rej", x->name);
        h_record_list lo = {0}, lr = {0};
        consume(fx, out, &lo);
        consume(fx, rej, &lr);
        check_routing(in, &x->in, &x->m, out, &lo, rej, &lr);
        assert_int_equal(x->in.n, lo.n + lr.n);
        size_t missing_rej = 0;
        for (size_t i = 0; i < lr.n; i++)
            missing_rej += hdr_is(
                h_header_last(&lr.recs[i], "bloomstage-reason"),
                "missing-key");
        assert_int_equal(missing_rej, x->reject_missing ? x->m.missing : 0);
        h_record_list_free(&lo);
        h_record_list_free(&lr);
        h_record_list_free(&x->in);
        model_free(&x->m);
        free(x->g);
        free(in);
        free(out);
        free(rej);
    }
    free(bad_conf);
    free(bad_list);
}

/* dedup.key.normalize and a domain blocklist, end to end: a key that
 * differs only in case and surrounding space is a duplicate, an address
 * at a listed domain or any of its subdomains is rejected naming the list,
 * look-alikes pass.  One partition, so dedup is in input order. */
static void test_normalized_and_domain_keys(void **state)
{
    fixture *fx = *state;
    static const struct {
        const char *from, *verdict; /* NULL: forwarded */
    } recs[] = {
        {"a@x.example", NULL},
        {" A@X.EXAMPLE ", "duplicate"},
        {"u@MX3.Spam.Example", "blocklist:dom"},
        {"u@notspam.example", NULL},
        {"u@spam.example.org", NULL},
        {"https://spam.example/login", "blocklist:dom"},
        {"b@x.example", NULL},
        {"\\tb@X.example", "duplicate"}, /* JSON's \t: a tab */
    };
    enum { N = sizeof(recs) / sizeof(recs[0]) };
    char *list = write_text(fx, "domains.txt", "# spam domains\nSpam.Example\n");
    char *text = h_strdupf(
        "input.topics=in\noutput.topic=out\nrejected.topic=rej\n"
        "kafka.bootstrap.servers=%s\nconsumer.group.id=norm\n"
        "checkpoint.dir=%s/ckpt\ncheckpoint.interval.ms=300\n"
        "dedup.key=json:/from\ndedup.key.normalize=lower,trim\n"
        "blocklist.dom.path=%s\nblocklist.dom.match=domain\n"
        "blocklist.dom.fpr=1e-9\n", fx->bs, fx->dir, list);
    char *conf = write_text(fx, "norm.conf", text);
    h_record r[N];
    char *values[N];
    size_t nout = 0;
    for (int i = 0; i < N; i++) {
        values[i] = h_strdupf("{\"from\":\"%s\",\"n\":%d}", recs[i].from, i);
        r[i] = h_rec(NULL, values[i]);
        r[i].partition = 0;
        nout += recs[i].verdict == NULL;
    }
    H_CHECK(h_produce(fx->bs, "in", H_PARTITION_PER_RECORD, r, N));
    h_proc *p = h_stage_start(conf, NULL, NULL);
    h_wait_out_rej(p, fx->bs, "out", (int64_t)nout, "rej",
                   (int64_t)(N - nout));
    h_stage_stop(p);
    h_record_list lo = {0}, lr = {0};
    consume(fx, "out", &lo);
    consume(fx, "rej", &lr);
    assert_int_equal(lo.n, nout);
    assert_int_equal(lr.n, N - nout);
    for (int i = 0; i < N; i++) {
        const h_record_list *l = recs[i].verdict ? &lr : &lo;
        const h_record *found = NULL;
        for (size_t k = 0; k < l->n && !found; k++)
            if (l->recs[k].value_len == strlen(values[i]) &&
                !memcmp(l->recs[k].value, values[i], strlen(values[i])))
                found = &l->recs[k];
        if (!found)
            h_stage_fail(p, "record %d (%s) not on %s", i, recs[i].from,
                         recs[i].verdict ? "rej" : "out");
        if (recs[i].verdict &&
            !hdr_is(h_header_last(found, "bloomstage-reason"),
                    recs[i].verdict))
            h_stage_fail(p, "record %d (%s) rejected, not as %s", i,
                         recs[i].from, recs[i].verdict);
        free(values[i]);
    }
    h_record_list_free(&lo);
    h_record_list_free(&lr);
    free(conf);
    free(text);
    free(list);
}

/* ---- 4: start-up failures ------------------------------------------- */

static const int64_t SEEDED[3] = {1, 2, 3};

/* 30 records in `in` and offsets seeded for group "startup", so a stage
 * that got as far as consuming would show. */
static char *startup_prepare(fixture *fx, const char *extra)
{
    h_record r[30];
    char keys[30][8];
    for (int i = 0; i < 30; i++) {
        snprintf(keys[i], sizeof(keys[i]), "k%d", i);
        r[i] = h_rec(keys[i], "{\"from\":\"a@example.com\"}");
        r[i].partition = i % 3;
    }
    H_CHECK(h_produce(fx->bs, "in", H_PARTITION_PER_RECORD, r, 30));
    H_CHECK(h_commit(fx->bs, "startup", "in", 3, SEEDED));
    char *text = h_strdupf(
        "input.topics=in\noutput.topic=out\nrejected.topic=rej\n"
        "kafka.bootstrap.servers=%s\nconsumer.group.id=startup\n"
        "checkpoint.dir=%s/ckpt\ncheckpoint.interval.ms=100\n%s",
        fx->bs, fx->dir, extra);
    char *conf = write_text(fx, "stage.conf", text);
    free(text);
    return conf;
}

/* Nothing committed, nothing produced, and the group never joined: the
 * mock refuses standalone commits once a member has joined a group. */
static void assert_untouched(fixture *fx)
{
    int64_t off[3];
    committed(fx, "startup", off);
    for (int i = 0; i < 3; i++)
        assert_int_equal(off[i], SEEDED[i]);
    assert_int_equal(topic_total(fx, "out"), 0);
    assert_int_equal(topic_total(fx, "rej"), 0);
    if (h_commit(fx->bs, "startup", "in", 3, SEEDED))
        fail_msg("the stage joined group 'startup' before failing: %s",
                 h_last_error());
}

/* startup_prepare with blocklist "spam" at path, keyed by json:/from. */
static char *spam_prepare(fixture *fx, const char *path)
{
    char *extra = h_strdupf("blocklist.spam.path=%s\n"
                            "blocklist.spam.key=json:/from\n", path);
    char *conf = startup_prepare(fx, extra);
    free(extra);
    return conf;
}

/* A stage on conf must refuse to start (exit 1) naming the blocklist and
 * its file, and leave the group untouched. */
static void refuses_spam(fixture *fx, const char *conf, const char *file)
{
    h_proc *p = h_stage_start(conf, NULL, NULL);
    stage_refuses(p, 1);
    h_expect_said(p, "'spam'");
    h_expect_said(p, file);
    assert_untouched(fx);
}

static void test_refuses_missing_blocklist(void **state)
{
    fixture *fx = *state;
    char *path = h_strdupf("%s/no-such-list.txt", fx->dir);
    char *conf = spam_prepare(fx, path);
    refuses_spam(fx, conf, path);
    free(conf);
    free(path);
}

static void test_refuses_damaged_filter(void **state)
{
    fixture *fx = *state;
    char *list = write_text(fx, "spam.txt", "a@example.com\n"
                            "b@example.com\nc@example.com\n");
    char *good = h_strdupf("%s/spam.bf", fx->dir);
    const char *build[] = {"filter", "build", "--fpr", "1e-6", "-o", good,
                           list, NULL};
    h_bs_cmd(build, 0);
    char *bf = h_strdupf("%s/damaged.bf", fx->dir);
    char *conf = spam_prepare(fx, bf);

    /* A flipped bit in the bit array; cut short; a damaged magic (the
     * file is still a damaged filter, not a text list). */
    static const struct {
        const char *what;
        long at;  /* damage_byte there, or -1 */
        size_t keep;
    } cases[] = {{"a byte in the middle", MIDDLE, SIZE_MAX},
                 {"the file cut short", -1, 120},
                 {"the last byte (checksum)", -2, SIZE_MAX},
                 {"the first byte (magic)", 0, SIZE_MAX}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        fprintf(stderr, "    damaged filter: %s\n", cases[c].what);
        copy_file(good, bf, cases[c].keep);
        if (cases[c].at != -1)
            damage_byte(bf, cases[c].at == -2 ? -1 : cases[c].at);
        refuses_spam(fx, conf, bf);
    }
    /* A FIFO in its place: refused by name, not waited on. */
    assert_int_equal(unlink(bf), 0);
    assert_int_equal(mkfifo(bf, 0600), 0);
    fprintf(stderr, "    a FIFO in the filter's place\n");
    h_proc *p = h_stage_start(conf, NULL, NULL);
    stage_refuses(p, 1);
    h_expect_said(p, "a FIFO, not a regular file");
    h_expect_said(p, bf);
    assert_untouched(fx);
    free(conf);
    free(bf);
    free(good);
    free(list);
}

static void test_refuses_damaged_checkpoint(void **state)
{
    fixture *fx = *state;
    char *conf = startup_prepare(fx, "");
    char *dir = h_strdupf("%s/ckpt", fx->dir);
    char *file = h_strdupf("%s/in-2.ckpt", dir);
    assert_int_equal(mkdir(dir, 0755), 0);

    /* Not a checkpoint at all; the right magic, then nothing. */
    char junk[200];
    memset(junk, 'x', sizeof(junk));
    static const char magic[] = "BLMCKPT\0\1\0\2\0\2\0\0\0";
    const struct {
        const void *bytes;
        size_t len;
    } cases[] = {{junk, sizeof(junk)}, {magic, sizeof(magic) - 1}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        write_bytes(file, cases[c].bytes, cases[c].len);
        h_proc *p = h_stage_start(conf, NULL, NULL);
        stage_refuses(p, 1);
        h_expect_said(p, file);
        assert_untouched(fx);
    }
    /* A FIFO (an open would wait for a writer for ever) and a directory
     * under a checkpoint's name: refused by name, at once. */
    static const char *const kinds[] = {"a FIFO", "a directory"};
    for (size_t k = 0; k < 2; k++) {
        assert_int_equal(unlink(file), 0); /* the file, then the FIFO */
        assert_int_equal(k ? mkdir(file, 0700) : mkfifo(file, 0600), 0);
        fprintf(stderr, "    %s in the checkpoint's place\n", kinds[k]);
        h_proc *p = h_stage_start(conf, NULL, NULL);
        stage_refuses(p, 1);
        char *want = h_strdupf("%s: %s, not a regular file", file, kinds[k]);
        h_expect_said(p, want);
        free(want);
        assert_untouched(fx);
    }
    assert_int_equal(rmdir(file), 0);
    free(file);
    free(dir);
    free(conf);
}

/* ---- 5: configuration ---------------------------------------------- */

static void refused_config(fixture *fx, const char *name, const char *text,
                           const char *const *xs, char *const *env,
                           const char *want1, const char *want2)
{
    char *conf = write_text(fx, name, text);
    h_proc *p = h_stage_start(conf, xs, env);
    stage_refuses(p, 2);
    char *where = want1 && want1[0] == ':' ? h_strdupf("%s%s", conf, want1)
                                           : NULL;
    if (want1)
        h_expect_said(p, where ? where : want1);
    if (want2)
        h_expect_said(p, want2);
    free(where);
    free(conf);
}

/* Five lines of a valid configuration for group "startup", whose offsets
 * are seeded (so assert_untouched can tell it was never joined). */
static char *config_base(fixture *fx)
{
    H_CHECK(h_commit(fx->bs, "startup", "in", 3, SEEDED));
    return h_strdupf("input.topics=in\noutput.topic=out\n"
                     "kafka.bootstrap.servers=%s\n"
                     "consumer.group.id=startup\n"
                     "checkpoint.dir=%s/ckpt\n", fx->bs, fx->dir);
}

static void test_config_errors(void **state)
{
    fixture *fx = *state;
    char *base = config_base(fx);
    char *t;

    t = h_strdupf("%sdedup.fpx=0.01\n", base); /* line 6 */
    refused_config(fx, "unknown.conf", t, NULL, NULL, ":6:",
                   "did you mean 'dedup.fpr'");
    free(t);
    t = h_strdupf("%s# comment\ndedup.fpr=2\n", base); /* line 7 */
    refused_config(fx, "value.conf", t, NULL, NULL, ":7:", "dedup.fpr");
    free(t);
    t = h_strdupf("%sdedup.capacity=lots\n", base);
    refused_config(fx, "int.conf", t, NULL, NULL, ":6:", "dedup.capacity");
    free(t);
    t = h_strdupf("input.topics=in\nthis line has no equals sign\n%s", base);
    refused_config(fx, "malformed.conf", t, NULL, NULL, ":2:", NULL);
    free(t);
    t = h_strdupf("%sdedup.key=json:a/b\n", base);
    refused_config(fx, "pointer.conf", t, NULL, NULL, ":6:", "dedup.key");
    free(t);
    refused_config(fx, "required.conf",
                   "input.topics=in\nkafka.bootstrap.servers=x:1\n", NULL,
                   NULL, "output.topic", NULL);
    /* The environment and -X are checked the same way. */
    char *typo[] = {"BLOOMSTAGE_DEDUP_FRP=0.01", NULL};
    refused_config(fx, "env.conf", base, NULL, typo,
                   "BLOOMSTAGE_DEDUP_FRP", "did you mean 'dedup.fpr'");
    const char *xs[] = {"checkpoint.interval.ms=5", NULL};
    refused_config(fx, "x.conf", base, xs, NULL, "checkpoint.interval.ms=5",
                   NULL);
    assert_untouched(fx);
    free(base);
}

/* Configuration errors only the stage's set-up can see are still
 * configuration errors: exit 2, named by where they were set. */
static void test_config_errors_found_at_setup(void **state)
{
    fixture *fx = *state;
    char *base = config_base(fx);
    char *t;
    /* reject needs somewhere to reject to */
    t = h_strdupf("%sdedup.on.missing.key=reject\n", base);
    refused_config(fx, "reject.conf", t, NULL, NULL, ":6:",
                   "rejected.topic");
    free(t);
    /* librdkafka knows no such property */
    t = h_strdupf("%skafka.no.such.property=1\n", base);
    refused_config(fx, "kafka.conf", t, NULL, NULL, ":6:",
                   "no.such.property");
    free(t);
    assert_untouched(fx);
    free(base);
}

/* A SIGTERM between the group's JoinGroup and SyncGroup answers: the
 * moment librdkafka 2.0.2's cooperative-sticky assignor aborts in
 * rd_kafka_destroy (#4312).  Every SyncGroup fails here (the mock cluster
 * answers REBALANCE_IN_PROGRESS), so the consumer goes round JoinGroup,
 * SyncGroup, JoinGroup... and never gets its first assignment; a SIGTERM
 * after a JoinGroup answer (the consumer's cgrp debug log says it) lands
 * in the window every time.  The stage must drain and exit 0: it waits
 * for a first rebalance that does not come, closes the consumer and
 * leaves it to the process's exit (clients.c). */
static void test_sigterm_in_the_join(void **state)
{
    fixture *fx = *state;
    char *text = h_strdupf(
        "input.topics=in\noutput.topic=out\nrejected.topic=rej\n"
        "kafka.bootstrap.servers=%s\nconsumer.group.id=join-group\n"
        "checkpoint.dir=%s/ckpt-join\nlog.level=debug\n"
        "consumer.debug=cgrp\n", fx->bs, fx->dir);
    char *conf = write_text(fx, "join.conf", text);
    H_CHECK(h_broker_control(fx->broker, "push-errors SyncGroup 100000 "
                                         "REBALANCE_IN_PROGRESS"));
    h_proc *p = h_stage_start(conf, NULL, NULL);
    h_wait_said(p, "JoinGroup response", 1, 60000);
    int status = 0;
    int rc = h_process_terminate(p, H_EXIT_MS, &status);
    H_CHECK(h_broker_control(fx->broker, "clear-errors SyncGroup"));
    if (rc != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        h_stage_fail(p, "SIGTERM after a JoinGroup answer: %s, want exit 0",
                     h_status_str(status));
    assert_false(h_said(p, H_SAID_ASSIGNED));
    h_expect_said(p, "stopping while joining the group");
    h_proc_release(p);
    free(conf);
    free(text);
}

static void test_config_overrides(void **state)
{
    fixture *fx = *state;
    H_CHECK(h_broker_control(fx->broker, "create-topic env-out 3"));
    H_CHECK(h_broker_control(fx->broker, "create-topic env-rej 1"));
    H_CHECK(h_broker_control(fx->broker, "create-topic x-rej 1"));
    char *text = h_strdupf(
        "input.topics=in\noutput.topic=out\nrejected.topic=rej\n"
        "kafka.bootstrap.servers=%s\nconsumer.group.id=file-group\n"
        "checkpoint.dir=%s/ckpt\ncheckpoint.interval.ms=300\n"
        "dedup.fpr=1e-9\ndedup.capacity=50\n", fx->bs, fx->dir);
    char *conf = write_text(fx, "stage.conf", text);

    grec *g = grecs_new(90);
    for (size_t i = 0; i < 90; i++) {
        char key[16];
        snprintf(key, sizeof(key), "k%zu", i % 30);
        grec_set(&g[i], key, "v", 1, (int32_t)(i % 30) % 3);
        g[i].id = (int)(i % 30);
    }
    produce_grecs(fx, "in", g, 90);
    h_record_list in = {0}, out = {0}, rej = {0};
    consume(fx, "in", &in);
    model m;
    model_run(&in, g, 90, false, &m);

    /* env over the file, -X over env. */
    char *env[] = {"BLOOMSTAGE_OUTPUT_TOPIC=env-out",
                   "BLOOMSTAGE_REJECTED_TOPIC=env-rej",
                   "BLOOMSTAGE_CONSUMER_GROUP_ID=env-group", NULL};
    const char *xs[] = {"rejected.topic=x-rej", NULL};
    h_proc *p = h_stage_start(conf, xs, env);
    h_wait_out_rej(p, fx->bs, "env-out", (int64_t)m.out, "x-rej",
                 (int64_t)m.rejected);
    h_stage_stop(p);
    consume(fx, "env-out", &out);
    consume(fx, "x-rej", &rej);
    check_routing("in", &in, &m, "env-out", &out, "x-rej", &rej);
    assert_int_equal(topic_total(fx, "out"), 0);
    assert_int_equal(topic_total(fx, "rej"), 0);
    assert_int_equal(topic_total(fx, "env-rej"), 0);
    int64_t hw[3], off[3];
    high_watermarks(fx, "in", hw, 3);
    committed(fx, "env-group", off);
    for (int i = 0; i < 3; i++)
        assert_int_equal(off[i], hw[i]);
    committed(fx, "file-group", off);
    for (int i = 0; i < 3; i++)
        assert_int_equal(off[i], RD_KAFKA_OFFSET_INVALID);

    model_free(&m);
    h_record_list_free(&in);
    h_record_list_free(&out);
    h_record_list_free(&rej);
    free(g);
    free(conf);
    free(text);
}

int main(void)
{
    h_test_main("test_stage", "TEST_STAGE_FILTER", NULL, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_known_stream_text_lists, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_graceful_stop_and_restart,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_graceful_stop_and_restart_at_least_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_normalized_and_domain_keys,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_dedup_key_variants, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_refuses_missing_blocklist,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_damaged_filter, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_refuses_damaged_checkpoint,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_secrets_in_the_process, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_config_errors_found_at_setup,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_sigterm_in_the_join, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_config_overrides, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_known_stream_filter_files,
                                        setup, teardown),
    };
    /* TEST_STAGE_FILTER=test_config_* runs a subset. */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
