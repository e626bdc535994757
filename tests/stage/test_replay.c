/*
 * test_replay.c -- replay.c and kafka_util.c: the bloomstage-src header
 * parser (bs_parse_src), the metadata/watermark helpers, and the output-tail
 * replay (bs_replay_tail) against librdkafka's mock cluster in process:
 * which tail records count (header present and well-formed, naming the
 * target partition at or after its checkpoint offset, at or after the
 * recorded watermark), the skip list sorted, the keys back in the filter
 * (or, for a windowed filter, kept with their skip entries).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "support.h"
#include "inproc_mock.h"
#include "kafka/kafka_util.h"
#include "checkpoint/replay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -- bs_parse_src --------------------------------------------------------- */

/* The spec `key`: the record key, as the stage's default. */
static const bs_config_keypart record_key_part = {BS_CONFIG_KEYSPEC_KEY, false,
                                                  "", 0, NULL};

static bool parse(const char *s, char *topic, int32_t *p, int64_t *o)
{
    return bs_parse_src(s, strlen(s), topic, 256, p, o);
}

static void assert_src(const char *s, const char *topic, int32_t part,
                       int64_t off)
{
    char t[256];
    int32_t p = -9;
    int64_t o = -9;
    if (!parse(s, t, &p, &o))
        fail_msg("\"%s\" rejected", s);
    assert_string_equal(t, topic);
    assert_int_equal(p, part);
    assert_int_equal(o, off);
}

static int accepted; /* invalid headers bs_parse_src accepted */

/* Counts (and prints) an accepted invalid header, so one run lists every
 * one; the test fails at its end if any was. */
static void assert_bad_src(const void *s, size_t len)
{
    char t[256];
    int32_t p;
    int64_t o;
    if (bs_parse_src(s, len, t, sizeof(t), &p, &o)) {
        print_error("\"%.*s\" (%zu bytes) accepted as %s [%d] @%lld\n",
                    (int)len, (const char *)s, len, t, (int)p, (long long)o);
        accepted++;
    }
}

#define BAD(s) assert_bad_src((s), strlen(s))

static void test_parse_src_valid(void **state)
{
    (void)state;
    assert_src("in:0:0", "in", 0, 0);
    assert_src("in:3:42", "in", 3, 42);
    assert_src("my.topic_name-1:12:123456789", "my.topic_name-1", 12,
               123456789);
    assert_src("x:2147483647:9223372036854775807", "x", INT32_MAX,
               INT64_MAX);
    /* the longest topic Kafka allows */
    char longest[300];
    memset(longest, 'T', 249);
    snprintf(longest + 249, sizeof(longest) - 249, ":7:8");
    char t[256];
    int32_t p;
    int64_t o;
    assert_true(bs_parse_src(longest, strlen(longest), t, sizeof(t), &p, &o));
    assert_int_equal(strlen(t), 249);
    assert_int_equal(p, 7);
    assert_int_equal(o, 8);
    /* ... which does not fit a smaller buffer: refused, not truncated */
    assert_false(bs_parse_src(longest, strlen(longest), t, 249, &p, &o));
    assert_false(bs_parse_src("abc:1:2", 7, t, 3, &p, &o));
    assert_true(bs_parse_src("abc:1:2", 7, t, 4, &p, &o));
    assert_string_equal(t, "abc");
    /* not NUL-terminated: only len bytes count */
    assert_true(bs_parse_src("in:1:23456", 7, t, sizeof(t), &p, &o));
    assert_int_equal(o, 23);
}

static void test_parse_src_invalid(void **state)
{
    (void)state;
    accepted = 0;
    BAD("");
    /* missing parts */
    BAD("in");
    BAD("in:3");
    BAD(":3:4");
    BAD("in::4");
    BAD("in:3:");
    BAD("::");
    BAD(":");
    /* negative, signed, blank */
    BAD("in:-1:4");
    BAD("in:3:-4");
    BAD("in:+3:4");
    BAD("in:3:+4");
    BAD("in: 3:4");
    BAD("in:3: 4");
    /* overflow */
    BAD("in:2147483648:0");
    BAD("in:99999999999999999999:0");
    BAD("in:0:9223372036854775808");
    BAD("in:0:99999999999999999999999");
    /* trailing garbage */
    BAD("in:3:4x");
    BAD("in:3:4 ");
    BAD("in:3x:4");
    BAD("in:3:4\n");
    BAD("in:0x10:4");
    assert_bad_src(NULL, 5);
    assert_bad_src("in:3:4\0junk", 11); /* a NUL inside */
    assert_bad_src("in\0:3:4", 7);
    /* longer than any valid header */
    char big[400];
    memset(big, 'a', sizeof(big));
    memcpy(big + sizeof(big) - 4, ":1:2", 4);
    assert_bad_src(big, sizeof(big));
    assert_int_equal(accepted, 0);
}

/* -- kafka_util ----------------------------------------------------------- */

static void test_topic_partitions(void **state)
{
    (void)state;
    im_cluster c;
    im_start(&c, 1);
    im_topic(&c, "three", 3);
    /* The mock auto-creates a topic a Metadata request names, unless told
     * to answer an error for it. */
    rd_kafka_mock_topic_set_error(c.mc, "absent",
                                  RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART);
    rd_kafka_t *rk = im_consumer(&c, NULL);
    char err[512] = "";
    assert_int_equal(bs_topic_partitions(rk, "three", 10000, NULL, err,
                                         sizeof(err)), 3);
    assert_int_equal(bs_topic_partitions(rk, "absent", 10000, NULL, err,
                                         sizeof(err)), -1);
    assert_non_null(strstr(err, "absent"));
    assert_int_equal(bs_topic_partitions(rk, "absent", 10000, NULL, NULL, 0),
                     -1);
    rd_kafka_destroy(rk);
    im_stop(&c);
}

static void test_output_watermarks(void **state)
{
    (void)state;
    im_cluster c;
    im_start(&c, 1);
    im_topic(&c, "wm", 3);
    h_record recs[3] = {h_rec("a", "1"), h_rec("b", "2"), h_rec("c", "3")};
    H_CHECK(h_produce(c.bootstraps, "wm", 0, recs, 3));
    H_CHECK(h_produce(c.bootstraps, "wm", 2, recs, 1));
    rd_kafka_mock_topic_set_error(c.mc, "absent",
                                  RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART);
    rd_kafka_t *rk = im_consumer(&c, NULL);
    bs_ckpt_wm wm[3];
    memset(wm, 0xff, sizeof(wm));
    char err[512] = "";
    if (bs_output_watermarks(rk, "wm", 3, wm, 10000, err, sizeof(err)))
        fail_msg("%s", err);
    for (int i = 0; i < 3; i++)
        assert_int_equal(wm[i].partition, i);
    assert_int_equal(wm[0].high, 3);
    assert_int_equal(wm[1].high, 0);
    assert_int_equal(wm[2].high, 1);
    assert_int_equal(bs_output_watermarks(rk, "absent", 2, wm, 5000, err,
                                          sizeof(err)), -1);
    assert_non_null(strstr(err, "absent"));
    rd_kafka_destroy(rk);
    im_stop(&c);
}

/* -- bs_replay_tail ------------------------------------------------------- */

#define SEED 0x5eedULL

static bf_filter *new_filter(void)
{
    bf_scalable_params p;
    bf_scalable_params_default(&p);
    p.initial_capacity = 1000;
    bf_filter *f = bf_filter_from_scalable(bf_scalable_new(&p, NULL, 0));
    assert_non_null(f);
    return f;
}

static bool has(const bf_filter *f, const char *key)
{
    return bf_filter_contains_h(f, bf_hash_key(key, strlen(key), SEED));
}

/* One output record: key (may be NULL) and its bloomstage-src header
 * (NULL: none). */
static void out_rec(const char *bootstraps, int32_t part, const char *key,
                    const char *src)
{
    h_header h = {BS_HDR_SRC, src, src ? strlen(src) : 0};
    h_record r = h_rec(key, "v");
    if (src) {
        r.headers = &h;
        r.n_headers = 1;
    }
    H_CHECK(h_produce(bootstraps, "out", part, &r, 1));
}

static void assert_skip(const bs_replay_target *t, const int64_t *want,
                        size_t n)
{
    if (t->nskip != n)
        fail_msg("%s [%d]: %zu skip entries, expected %zu", t->topic,
                 (int)t->partition, t->nskip, n);
    for (size_t i = 0; i < n; i++)
        if (t->skip[i] != want[i])
            fail_msg("%s [%d]: skip[%zu] = %lld, expected %lld", t->topic,
                     (int)t->partition, i, (long long)t->skip[i],
                     (long long)want[i]);
}

static void test_replay_tail(void **state)
{
    (void)state;
    im_cluster c;
    im_start(&c, 1);
    im_topic(&c, "out", 2);
    const char *b = c.bootstraps;
    /* out [0]: two records before the watermark the checkpoints recorded
     * (2), then the tail */
    out_rec(b, 0, "before-wm", "in:0:50");  /* 0: before the watermark */
    out_rec(b, 0, "before-wm2", "in:1:60"); /* 1: before the watermark */
    out_rec(b, 0, "a", "in:0:12");          /* 2 */
    out_rec(b, 0, "nohdr", NULL);           /* 3: not forwarded by us */
    out_rec(b, 0, "old", "in:0:9");         /* 4: before C of in [0] */
    out_rec(b, 0, "b", "in:1:7");           /* 5 */
    out_rec(b, 0, "c", "in:0:11");          /* 6 */
    out_rec(b, 0, "garbage", "in:0");       /* 7: malformed header */
    out_rec(b, 0, "other-part", "in:2:100"); /* 8: no such target */
    out_rec(b, 0, "other-topic", "other:0:20"); /* 9 */
    out_rec(b, 0, NULL, "in:1:6");          /* 10: forwarded, no key */
    /* out [1]: watermark 1 */
    out_rec(b, 1, "before-wm3", "in:0:99"); /* 0 */
    out_rec(b, 1, "d", "in:0:10");          /* 1: exactly C counts */
    out_rec(b, 1, "e", "in:1:5");           /* 2 */

    bs_ckpt_wm wm0[2] = {{0, 2}, {1, 1}};
    bs_ckpt_wm wm1[2] = {{0, 3}, {1, 1}}; /* a later checkpoint of in [1] */
    bs_replay_target t[2];
    memset(t, 0, sizeof(t));
    t[0].topic = "in";
    t[0].partition = 0;
    t[0].from_offset = 10;
    t[0].wm = wm0;
    t[0].nwm = 2;
    t[0].filter = new_filter();
    t[1].topic = "in";
    t[1].partition = 1;
    t[1].from_offset = 5;
    t[1].wm = wm1;
    t[1].nwm = 2;
    t[1].filter = new_filter();

    rd_kafka_t *tail = im_consumer(&c, NULL);
    const bs_config_keyspec key = {1, &record_key_part};
    char err[512] = "";
    if (bs_replay_tail(tail, "out", &key, BS_CONFIG_NORM_NONE, SEED, t, 2, 20000, err,
                       sizeof(err)) != 0)
        fail_msg("bs_replay_tail: %s", err);

    const int64_t skip0[] = {10, 11, 12};
    assert_skip(&t[0], skip0, 3);
    assert_int_equal(t[0].records, 3);
    const int64_t skip1[] = {5, 6, 7};
    assert_skip(&t[1], skip1, 3);
    assert_int_equal(t[1].records, 3);

    assert_true(has(t[0].filter, "a"));
    assert_true(has(t[0].filter, "c"));
    assert_true(has(t[0].filter, "d"));
    assert_true(has(t[1].filter, "b"));
    assert_true(has(t[1].filter, "e"));
    const char *absent[] = {"before-wm", "before-wm2", "before-wm3", "nohdr",
                            "old",       "garbage",    "other-part",
                            "other-topic"};
    for (size_t i = 0; i < sizeof(absent) / sizeof(absent[0]); i++)
        for (int j = 0; j < 2; j++)
            if (has(t[j].filter, absent[i]))
                fail_msg("\"%s\" was added to the filter of in [%d]",
                         absent[i], j);
    assert_false(has(t[0].filter, "b")); /* each key to its own target */
    assert_false(has(t[1].filter, "a"));

    for (int j = 0; j < 2; j++) {
        free(t[j].skip);
        bf_filter_destroy(t[j].filter);
    }
    rd_kafka_destroy(tail);
    im_stop(&c);
}

/* A windowed filter (dedup.window.ms): the tail's keys stay with their
 * skip entries, sorted by offset with them, and the filter is untouched --
 * its stream time does not jump ahead of the records consumption resumes
 * with (adding them at once made a restart forget keys early: found by
 * test_window's kill -9 test). */
static void test_replay_tail_windowed(void **state)
{
    (void)state;
    im_cluster c;
    im_start(&c, 1);
    im_topic(&c, "out", 2);
    const char *b = c.bootstraps;
    out_rec(b, 1, "late-key", "in:0:13"); /* read first, later offset */
    out_rec(b, 0, "x", "in:0:11");
    out_rec(b, 0, NULL, "in:0:12"); /* forwarded without a key */
    out_rec(b, 0, "y", "in:0:10");
    bs_ckpt_wm wm[2] = {{0, 0}, {1, 0}};
    bf_windowed_params wp;
    bf_windowed_params_default(&wp);
    wp.window = 60000;
    wp.seed = SEED;
    bs_replay_target t;
    memset(&t, 0, sizeof(t));
    t.topic = "in";
    t.partition = 0;
    t.from_offset = 10;
    t.wm = wm;
    t.nwm = 2;
    t.filter = bf_filter_from_windowed(bf_windowed_new(&wp, NULL, 0));
    assert_non_null(t.filter);
    rd_kafka_t *tail = im_consumer(&c, NULL);
    const bs_config_keyspec key = {1, &record_key_part};
    char err[512] = "";
    if (bs_replay_tail(tail, "out", &key, BS_CONFIG_NORM_NONE, SEED, &t, 1, 20000, err,
                       sizeof(err)) != 0)
        fail_msg("bs_replay_tail: %s", err);
    const int64_t skip[] = {10, 11, 12, 13};
    assert_skip(&t, skip, 4);
    assert_non_null(t.skip_keys);
    static const char *const keys[] = {"y", "x", NULL, "late-key"};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(t.skip_keys[i].have, keys[i] != NULL);
        if (keys[i]) {
            bf_hash h = bf_hash_key(keys[i], strlen(keys[i]), SEED);
            assert_memory_equal(&t.skip_keys[i].h, &h, sizeof(h));
            assert_false(has(t.filter, keys[i]));
        }
    }
    /* Nothing went in: no generation, no stream time yet. */
    assert_int_equal(bf_windowed_stream_time(bf_filter_windowed(t.filter)),
                     -1);
    free(t.skip);
    free(t.skip_keys);
    bf_filter_destroy(t.filter);
    rd_kafka_destroy(tail);
    im_stop(&c);
}

/* Nothing to read: no targets, no watermarks, watermarks at the end. */
static void test_replay_tail_nothing(void **state)
{
    (void)state;
    im_cluster c;
    im_start(&c, 1);
    im_topic(&c, "out", 1);
    out_rec(c.bootstraps, 0, "a", "in:0:1");
    rd_kafka_mock_topic_set_error(c.mc, "absent",
                                  RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART);
    rd_kafka_t *tail = im_consumer(&c, NULL);
    const bs_config_keyspec key = {1, &record_key_part};
    char err[512] = "";
    assert_int_equal(bs_replay_tail(tail, "out", &key, BS_CONFIG_NORM_NONE, SEED, NULL, 0, 5000,
                                    err, sizeof(err)), 0);
    bs_replay_target t;
    memset(&t, 0, sizeof(t));
    t.topic = "in";
    t.partition = 0;
    t.filter = new_filter();
    assert_int_equal(bs_replay_tail(tail, "out", &key, BS_CONFIG_NORM_NONE, SEED, &t, 1, 5000,
                                    err, sizeof(err)), 0);
    assert_int_equal(t.nskip, 0);
    bs_ckpt_wm at_end = {0, 1};
    t.wm = &at_end;
    t.nwm = 1;
    assert_int_equal(bs_replay_tail(tail, "out", &key, BS_CONFIG_NORM_NONE, SEED, &t, 1, 5000,
                                    err, sizeof(err)), 0);
    assert_int_equal(t.nskip, 0);
    assert_int_equal(t.records, 0);
    assert_false(has(t.filter, "a"));
    /* An output topic that is not there: an error naming it. */
    bs_ckpt_wm zero = {0, 0};
    t.wm = &zero;
    assert_int_equal(bs_replay_tail(tail, "absent", &key, BS_CONFIG_NORM_NONE, SEED, &t, 1, 3000,
                                    err, sizeof(err)), -1);
    assert_non_null(strstr(err, "absent"));
    free(t.skip);
    bf_filter_destroy(t.filter);
    rd_kafka_destroy(tail);
    im_stop(&c);
}

/* A tail of many batches (the reader takes what is queued, up to
 * hundreds of messages a call) behind a read-ahead far smaller than it:
 * every record replayed once, to its own target, in offset order, the
 * partitions ending where their ends were. */
static void test_replay_tail_batches(void **state)
{
    (void)state;
    enum { PER = 1500 }; /* records per output partition */
    im_cluster c;
    im_start(&c, 1);
    im_topic(&c, "out", 3);
    static char keys[3][PER][16], srcs[3][PER][24];
    static h_header hs[3][PER];
    static h_record rs[3][PER];
    for (int p = 0; p < 3; p++) {
        for (int i = 0; i < PER; i++) {
            /* input offset o of in [o % 2], spread over the partitions */
            int o = i * 3 + p;
            snprintf(keys[p][i], sizeof(keys[p][i]), "k%d", o);
            snprintf(srcs[p][i], sizeof(srcs[p][i]), "in:%d:%d", o % 2, o);
            hs[p][i] = (h_header){BS_HDR_SRC, srcs[p][i],
                                  strlen(srcs[p][i])};
            rs[p][i] = h_rec(keys[p][i], "v");
            rs[p][i].headers = &hs[p][i];
            rs[p][i].n_headers = 1;
        }
        H_CHECK(h_produce(c.bootstraps, "out", p, rs[p], PER));
    }
    bs_ckpt_wm wm[3] = {{0, 0}, {1, 0}, {2, 0}};
    bs_replay_target t[2];
    memset(t, 0, sizeof(t));
    for (int j = 0; j < 2; j++) {
        t[j].topic = "in";
        t[j].partition = j;
        t[j].wm = wm;
        t[j].nwm = 3;
        t[j].filter = new_filter();
    }
    const char *small[] = {"queued.min.messages", "100", NULL};
    rd_kafka_t *tail = im_consumer(&c, small);
    const bs_config_keyspec key = {1, &record_key_part};
    char err[512] = "";
    if (bs_replay_tail(tail, "out", &key, BS_CONFIG_NORM_NONE, SEED, t, 2, 60000, err,
                       sizeof(err)) != 0)
        fail_msg("bs_replay_tail: %s", err);
    for (int j = 0; j < 2; j++) {
        assert_int_equal(t[j].records, 3 * PER / 2);
        assert_int_equal(t[j].nskip, 3 * PER / 2);
        for (size_t i = 0; i < t[j].nskip; i++)
            if (t[j].skip[i] != (int64_t)(2 * i + (size_t)j))
                fail_msg("in [%d]: skip[%zu] = %lld", j, i,
                         (long long)t[j].skip[i]);
        for (int o = j; o < 3 * PER; o += 2) {
            char k[16];
            snprintf(k, sizeof(k), "k%d", o);
            if (!has(t[j].filter, k))
                fail_msg("in [%d] lacks %s", j, k);
        }
        free(t[j].skip);
        bf_filter_destroy(t[j].filter);
    }
    rd_kafka_destroy(tail);
    im_stop(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_src_valid),
        cmocka_unit_test(test_parse_src_invalid),
        cmocka_unit_test(test_topic_partitions),
        cmocka_unit_test(test_output_watermarks),
        cmocka_unit_test(test_replay_tail),
        cmocka_unit_test(test_replay_tail_nothing),
        cmocka_unit_test(test_replay_tail_windowed),
        cmocka_unit_test(test_replay_tail_batches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
