/*
 * test_kafka_poison.c -- poison records on Apache Kafka itself (one KRaft
 * node from scripts/kafka), with exactly_once by transactions, every
 * topic read at read_committed.
 *
 * An input topic that takes records up to 4 MB (max.message.bytes) holds
 * a stream of 20,000 records (20% copies of earlier keys) with four big
 * records mixed in: one of 999,970 bytes of key and value (under
 * librdkafka's default message.max.bytes of 1,000,000, over it once the
 * stage's copy carries bloomstage-src: the record of issue 37) and three
 * poison records of 1.5 MB values, one per partition.  Two stages read it
 * at once, each in its own group:
 *
 *   1. output and rejected topics at the broker's default max.message.bytes
 *      (1,048,588): the stage reads it at start-up and sizes its producer
 *      to it, so the 999,970-byte record is forwarded; each poison record,
 *      too large for both topics, is in the rejected topic once, without
 *      its value (reason too-large, bloomstage-dropped: value, its
 *      bloomstage-src naming it), and named in the log;
 *   2. an output topic with max.message.bytes raised to 4 MB: every big
 *      record is forwarded, whole.
 *
 * Each: every partition committed to the input's end within the deadline
 * (no stall; the time is printed), every key's first record once in the
 * output, every later copy of a key once in the rejected topic (reason
 * duplicate), nothing else in either.
 *
 * Needs BLOOMSTAGE_BIN (ctest sets it), Java and Maven (scripts/install-
 * deps).  BS_KP_VERBOSE=1 prints every stage's stderr; BS_KP_STAGE_X="k=v
 * ..." adds -X settings.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

#define NPARTS 3
#define N 20000
#define BIG_TOPIC_BYTES "max.message.bytes=4000000"
#define NSPECIAL 4

/* The big records, in the order they are produced: before stream record
 * `at`, to partition `part`; `offset` is where they landed. */
typedef struct special {
    const char *key;
    size_t vlen;
    bool poison; /* too large for a topic at the broker's default */
    int32_t part;
    size_t at;
    int64_t offset;
} special;

static special SPECIALS[NSPECIAL] = {
    {"sized-0", 999970 - 7, false, 0, N / 8, -1},
    {"poison-0", 1500000, true, 0, N / 4, -1},
    {"poison-1", 1500000, true, 1, N / 2, -1},
    {"poison-2", 1500000, true, 2, 3 * N / 4, -1},
};

/* Produces special sp to in, and moves the stream's later records of its
 * partition one offset on (the stream's offsets are what the topic holds). */
static void produce_special(h_stream *st, const char *bs, const char *in,
                            special *sp)
{
    static const char *const big_conf[] = {"message.max.bytes=4000000",
                                           NULL};
    char *v = h_xmalloc(sp->vlen);
    memset(v, 'p', sp->vlen);
    h_record r = {.key = sp->key, .key_len = strlen(sp->key), .value = v,
                  .value_len = sp->vlen, .partition = sp->part};
    H_CHECK(h_produce_conf(bs, in, H_PARTITION_PER_RECORD, &r, 1, big_conf));
    free(v);
    int64_t lo, hi;
    H_CHECK(h_watermarks(bs, in, sp->part, &lo, &hi));
    sp->offset = hi - 1;
    for (size_t i = sp->at; i < st->n; i++)
        if (st->part[i] == sp->part)
            st->off[i]++;
    st->next[sp->part]++;
}

/* The special record r's key names, or NULL. */
static const special *special_of(const h_record *r)
{
    for (int j = 0; j < NSPECIAL; j++)
        if (r->key && r->key_len == strlen(SPECIALS[j].key) &&
            !memcmp(r->key, SPECIALS[j].key, r->key_len))
            return &SPECIALS[j];
    return NULL;
}

/* r's bloomstage-src must name in:part:off. */
static void expect_src(const h_record *r, const char *in, int32_t part,
                       int64_t off)
{
    char b[300], want[300];
    snprintf(want, sizeof(want), "%s:%d:%lld", in, (int)part,
             (long long)off);
    if (strcmp(h_header_str(r, "bloomstage-src", b, sizeof(b)), want))
        fail_msg("%.*s: bloomstage-src '%s', not %s", (int)r->key_len,
                 (const char *)r->key, b, want);
}

/* One record of the output (rej false) or the rejected topic, counted
 * into seen[] (stream records) or sseen[] (the specials), checked on the
 * way: a stream record goes to the output if it is its key's first, else
 * to the rejected topic as a duplicate; a special to the output whole
 * unless it is poison and !poison_fits, then rejected without its value. */
static void one_record(const h_stream *st, const char *in, const h_record *r,
                       bool rej, bool poison_fits, unsigned *seen,
                       unsigned *sseen)
{
    char b[300];
    const special *sp = special_of(r);
    if (!sp) {
        size_t i = h_stream_which(st, r);
        if (i >= st->n)
            fail_msg("%s holds %.*s, not an input record",
                     rej ? "the rejected topic" : "the output",
                     (int)r->key_len, (const char *)r->key);
        bool first = st->first[st->id[i]] == i;
        if (first == rej || (rej && strcmp(h_header_str(r, "bloomstage-reason", b,
                                                sizeof(b)), "duplicate")))
            fail_msg("%s (record %zu, %s) in %s, reason '%s'", st->key[i], i,
                     first ? "its key's first" : "a copy",
                     rej ? "the rejected topic" : "the output", b);
        expect_src(r, in, st->part[i], st->off[i]);
        seen[i]++;
        return;
    }
    bool to_rej = sp->poison && !poison_fits;
    if (to_rej != rej)
        fail_msg("%s in %s", sp->key, rej ? "the rejected topic"
                                          : "the output");
    expect_src(r, in, sp->part, sp->offset);
    if (!rej && r->value_len != sp->vlen)
        fail_msg("%s forwarded with %zu bytes of %zu", sp->key, r->value_len,
                 sp->vlen);
    if (rej && (strcmp(h_header_str(r, "bloomstage-reason", b, sizeof(b)),
                       "too-large") ||
                r->value_len != 0 ||
                strcmp(h_header_str(r, "bloomstage-dropped", b, sizeof(b)), "value")))
        fail_msg("%s rejected with %zu value bytes, reason '%s'", sp->key,
                 r->value_len, h_header_str(r, "bloomstage-reason", b, sizeof(b)));
    sseen[sp - SPECIALS]++;
}

/* Reads out and rej at read_committed: each stream record once where it
 * belongs, each special once (one_record). */
static void check_topics(const h_stream *st, const char *bs, const char *in,
                         const char *out, const char *rej, bool poison_fits)
{
    h_record_list lo = {0}, lr = {0};
    H_CHECK(h_consume_all_conf(bs, out, 120000, H_READ_COMMITTED, &lo));
    H_CHECK(h_consume_all_conf(bs, rej, 120000, H_READ_COMMITTED, &lr));
    unsigned *seen = h_xcalloc(st->n, sizeof(*seen));
    unsigned sseen[NSPECIAL] = {0};
    for (size_t i = 0; i < lo.n; i++)
        one_record(st, in, &lo.recs[i], false, poison_fits, seen, sseen);
    for (size_t i = 0; i < lr.n; i++)
        one_record(st, in, &lr.recs[i], true, poison_fits, seen, sseen);
    for (size_t i = 0; i < st->n; i++)
        if (seen[i] != 1)
            fail_msg("%s (record %zu) is there %u times", st->key[i], i,
                     seen[i]);
    for (int j = 0; j < NSPECIAL; j++)
        if (sseen[j] != 1)
            fail_msg("%s is there %u times", SPECIALS[j].key, sseen[j]);
    print_message("%s: %zu output records, %s: %zu rejected\n", out, lo.n,
                  rej, lr.n);
    free(seen);
    h_record_list_free(&lo);
    h_record_list_free(&lr);
}

static void test_poison_stream(void **state)
{
    (void)state;
    h_kenv_opts o = {.nparts = NPARTS, .rejected = true, .ckdir = true,
                     .checkpoint_ms = 1000, .capacity = 30000};
    h_kenv *e = h_kenv_new(h_kgroup_cluster(), "poison", &o);
    const char *bs = e->h.bs;
    static const char *const big[] = {BIG_TOPIC_BYTES, NULL};
    char in[80], out2[80], rej2[80], group2[80];
    snprintf(in, sizeof(in), "%s-bigin", e->in);
    snprintf(out2, sizeof(out2), "%s-bigout", e->out);
    snprintf(rej2, sizeof(rej2), "%s-2", e->rej);
    snprintf(group2, sizeof(group2), "%s-2", e->group);
    H_CHECK(h_create_topic(bs, in, NPARTS, 1, big));
    H_CHECK(h_create_topic(bs, out2, NPARTS, 1, big));
    H_CHECK(h_create_topic(bs, rej2, NPARTS, 1, NULL));

    e->st = h_stream_new(N, NPARTS, 37);
    h_stream_add(e->st, N, 20);
    size_t prev = 0;
    for (int j = 0; j < NSPECIAL; j++) {
        h_stream_produce(e->st, bs, in, prev, SPECIALS[j].at, NULL);
        produce_special(e->st, bs, in, &SPECIALS[j]);
        prev = SPECIALS[j].at;
    }
    h_stream_produce(e->st, bs, in, prev, N, NULL);
    int64_t end[NPARTS];
    h_stream_ends(e->st, N, end);

    char *xin = h_strdupf("input.topics=%s", in);
    char *xout2 = h_strdupf("output.topic=%s", out2);
    char *xrej2 = h_strdupf("rejected.topic=%s", rej2);
    char *xgroup2 = h_strdupf("consumer.group.id=%s", group2);
    char *xck2 = h_strdupf("checkpoint.dir=%s/ckpt2", e->h.dir);
    const char *const x1[] = {"exactly_once.method=transactions", xin, NULL};
    const char *const x2[] = {"exactly_once.method=transactions", xin, xout2,
                              xrej2, xgroup2, xck2, NULL};
    double t0 = h_now_s();
    h_proc *p1 = h_stage_start(e->conf, x1, NULL);
    h_proc *p2 = h_stage_start(e->conf, x2, NULL);
    h_proc *const both[] = {p1, p2, NULL};
    h_wait_committed_tolerant(bs, e->group, in, NPARTS, end, both, 100000);
    double t1 = h_now_s() - t0;
    h_wait_committed_tolerant(bs, group2, in, NPARTS, end, both, 100000);
    double t2 = h_now_s() - t0;
    h_stage_stop(p1);
    h_stage_stop(p2);
    print_message("committed to the end in %.1f s (default-sized topics) and "
                  "%.1f s (output at 4 MB); %zu and %zu rollbacks\n", t1, t2,
                  h_count_said(p1, "rolling back"),
                  h_count_said(p2, "rolling back"));
    if (!h_said(p1, H_SAID_TXN) || !h_said(p2, H_SAID_TXN))
        h_stage_fail(p1, "a stage did not use transactions");
    h_expect_said(p1, "msg=\"topic size limit\" key=output.topic");
    h_expect_said(p2, "max_message_bytes=4000000");
    for (int j = 0; j < NSPECIAL; j++) {
        if (!SPECIALS[j].poison)
            continue;
        char *needle = h_strdupf("routed to rejected.topic\" topic=%s "
                                 "partition=%d offset=%lld reason=too-large",
                                 in, (int)SPECIALS[j].part,
                                 (long long)SPECIALS[j].offset);
        h_expect_said(p1, needle);
        free(needle);
    }
    check_topics(e->st, bs, in, e->out, e->rej, false);
    check_topics(e->st, bs, in, out2, rej2, true);
    free(xin);
    free(xout2);
    free(xrej2);
    free(xgroup2);
    free(xck2);
    h_kenv_free(e);
}

int main(void)
{
    h_test_main("test_kafka_poison", NULL, "BS_KP_VERBOSE", "BS_KP_STAGE_X");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_poison_stream, h_kfixture_teardown),
    };
    return cmocka_run_group_tests(tests, h_kgroup_setup1, h_kgroup_teardown);
}
