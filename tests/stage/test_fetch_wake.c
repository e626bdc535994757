/*
 * test_fetch_wake.c -- stage/kafka/fetch_wake.c on librdkafka's mock cluster in
 * process: a group consumer with a read-ahead of 500 records reads 20,000
 * of them.  Without wake-ups librdkafka 2.0.2 parks the fetcher each time
 * the queue is full and looks again only a second later, so the consumer
 * sees a gap of about a second every few hundred records; with them it
 * does not.  The measure is the number of such gaps (a behaviour of the
 * consumer, counted, with a margin for a loaded machine), not a rate.
 * Idle, the waker sends nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "support.h"
#include "inproc_mock.h"
#include "kafka/fetch_wake.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOPIC "wake-in"
#define PARTS 4
#define RECORDS 20000
#define READ_AHEAD "500"  /* queued.min.messages: RECORDS / 500 refills */
#define GAP_S 0.8         /* a parked fetcher's gap is ~1 s */

static void load(const im_cluster *c)
{
    rd_kafka_conf_t *conf = h_conf_pairs(h_kafka_conf(c->bootstraps),
                                         "linger.ms", "20",
                                         "batch.num.messages", "100", NULL);
    h_producer *p = NULL;
    assert_int_equal(h_producer_new(conf, 0, &p), 0);
    char key[32], val[64];
    for (int i = 0; i < RECORDS; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        snprintf(val, sizeof(val), "{\"i\":%d}", i);
        h_record r = h_rec(key, val);
        assert_int_equal(h_producer_send(p, TOPIC, i % PARTS, &r), 0);
    }
    assert_int_equal(h_producer_close(p, "load", 60000), 0);
}

typedef struct reading {
    int records, gaps;
    uint64_t wakes;
} reading;

/* Reads every record with a group consumer whose read-ahead is small,
 * with or without the waker; counts the gaps of >= GAP_S between records. */
static void read_all(const im_cluster *c, const char *group, bool wake,
                     reading *out)
{
    rd_kafka_conf_t *conf = h_conf_pairs(
        h_kafka_conf(c->bootstraps), "group.id", group,
        "auto.offset.reset", "earliest", "enable.auto.commit", "false",
        "queued.min.messages", READ_AHEAD,
        "queued.max.messages.kbytes", "1024",
        /* A fetch brings a few batches of 100, not the whole partition. */
        "fetch.message.max.bytes", "8192", NULL);
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
    assert_non_null(rk);
    rd_kafka_poll_set_consumer(rk);
    _Atomic uint64_t wakes = 0;
    bs_fetch_wake *w = NULL;
    if (wake) {
        w = bs_fetch_wake_new(rk, &wakes, err, sizeof(err));
        assert_non_null(w);
    }
    rd_kafka_topic_partition_list_t *sub =
        rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(sub, TOPIC, RD_KAFKA_PARTITION_UA);
    assert_int_equal(rd_kafka_subscribe(rk, sub), 0);
    rd_kafka_topic_partition_list_destroy(sub);

    memset(out, 0, sizeof(*out));
    double last = 0, deadline = h_now_s() + 120;
    while (out->records < RECORDS && h_now_s() < deadline) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (m && !m->err) {
            double now = h_now_s();
            if (last && now - last >= GAP_S)
                out->gaps++;
            last = now;
            out->records++;
            if (w) {
                bs_fetch_wake_note(w, m->key_len + m->len);
                if (out->records % 64 == 0)
                    bs_fetch_wake_check(w);
            }
        } else if (w) {
            bs_fetch_wake_check(w);
        }
        if (m)
            rd_kafka_message_destroy(m);
    }
    assert_int_equal(out->records, RECORDS);
    if (w) {
        /* Idle: everything read, nothing new comes; polled and checked
         * as the stage does, the waker sends nothing more.  The last
         * records may have asked for one wake-up, and the first idle
         * check may send it: it is counted when its request returns,
         * within fetch_wake.c's 1 s timeout, so the count is taken after
         * 2.5 s (at 1 s, a CI run under load saw it land one poll late,
         * in both builds), then must not move for 1 s more. */
        uint64_t before = 0;
        for (int i = 0; i < 35; i++) {
            if (i == 25)
                before = atomic_load(&wakes);
            rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
            if (m)
                rd_kafka_message_destroy(m);
            bs_fetch_wake_check(w);
        }
        assert_int_equal(atomic_load(&wakes), before);
    }
    out->wakes = atomic_load(&wakes);
    bs_fetch_wake_destroy(w);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
}

static void test_wakes_keep_a_small_read_ahead_fetching(void **state)
{
    (void)state;
    im_cluster c;
    im_start(&c, 1);
    im_topic(&c, TOPIC, PARTS);
    load(&c);

    reading with, without;
    read_all(&c, "with-wakes", true, &with);
    /* The parking is librdkafka's timing: a run in which other traffic
     * happened to wake its broker thread shows fewer gaps (seen under
     * ASan, and once in the normal build: 1 and 2 gaps in three readings,
     * twice, in one CI run).  Up to five readings, each by a group of its
     * own; the most gaps count. */
    int most = 0;
    for (int attempt = 0; attempt < 5 && most < 5; attempt++) {
        char group[32];
        snprintf(group, sizeof(group), "without-%d", attempt);
        read_all(&c, group, false, &without);
        if (without.gaps > most)
            most = without.gaps;
    }
    without.gaps = most;
    printf("    %d records, read-ahead %s: with wake-ups %d gaps >= %.1f s "
           "(%llu wake-ups), without %d gaps\n", RECORDS, READ_AHEAD,
           with.gaps, GAP_S, (unsigned long long)with.wakes, without.gaps);
    /* Without: the fetcher parks about every READ_AHEAD records (the
     * condition this module exists for), 12-16 gaps in most runs of the
     * normal build.  Under ASan no reading has shown it (0 gaps, three
     * times in a row), and one normal-build CI run saw at most 2 in six
     * readings: the control is librdkafka's timing, not ours.  Where it
     * does not show, the comparison proves nothing and is said so; the
     * wake-ups' own checks below hold either way. */
    if (without.gaps < 5)
        print_message("    librdkafka parked its fetcher only %d times in "
                      "the readings without wake-ups (12-16 in most "
                      "runs): no comparison this time\n", without.gaps);
    /* With: the waker acts while the read runs, and the fetcher
     * (nearly) never parks; a few gaps are allowed for a machine busy
     * with other work.  How many wake-ups it takes is librdkafka's
     * timing, not a property of the waker: a wake-up goes out only when
     * the queue runs low, and a fetcher that refills on its own (a slow
     * reader on a loaded machine) leaves fewer to send (18 in one CI run,
     * with no gap, against 34-38 in other runs). */
    assert_true(with.wakes > 0);
    assert_true(with.gaps <= 3);
    im_stop(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wakes_keep_a_small_read_ahead_fetching),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
