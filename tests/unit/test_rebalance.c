/*
 * test_rebalance.c -- the consumer's rebalance callback (stage/loop/rebalance.c)
 * at the edges of the stage's life, where librdkafka still calls it:
 *
 *   1. after the consumer's close, when librdkafka no longer says the
 *      group's rebalance protocol (rd_kafka_rebalance_protocol is NULL):
 *      a revocation is handled, not a NULL dereference (the stage died
 *      with SIGSEGV at shutdown in test_kafka_cluster's scale-in);
 *   2. an assignment once a stop is requested (in the loop, and while
 *      draining) or after FATAL: declined -- librdkafka is answered, and
 *      no partition is added or restored.
 *
 * No broker: the consumer points at a closed port and never joins.  The
 * stage struct is built by hand (zeroed, as bs_stage_new leaves it before
 * its clients exist, at_least_once, with the consumer): the callback
 * touches only states, partitions, the published view and the consumer
 * here.
 */
#include "core/stage_int.h"
#include "core/state.h"
#include "core/partitions.h"
#include "loop/rebalance.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static bs_stage *stage_new(rd_kafka_t *consumer, bs_stage_state st, bool stop)
{
    bs_stage *s = calloc(1, sizeof(*s));
    assert_non_null(s);
    s->consumer = consumer;
    pthread_mutex_init(&s->pub_lock, NULL);
    pthread_mutex_init(&s->err_lock, NULL);
    s->set.guarantee = BS_CONFIG_AT_LEAST_ONCE;
    s->state = st;
    atomic_store(&s->stop, stop);
    return s;
}

static void stage_free(bs_stage *s)
{
    for (size_t i = 0; i < s->nparts; i++)
        bs_part_free(&s->parts[i]);
    free(s->parts);
    free(s->pub);
    pthread_mutex_destroy(&s->pub_lock);
    pthread_mutex_destroy(&s->err_lock);
    free(s);
}

/* A consumer of group g (cooperative-sticky, as the stage's) that reaches
 * no broker. */
static rd_kafka_t *consumer_new(void)
{
    char err[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    static const char *const kv[] = {
        "bootstrap.servers", "127.0.0.1:1", "group.id", "g",
        "partition.assignment.strategy", "cooperative-sticky",
        "log_level", "0", NULL};
    for (size_t i = 0; kv[i]; i += 2)
        assert_int_equal(rd_kafka_conf_set(conf, kv[i], kv[i + 1], err,
                                           sizeof(err)),
                         RD_KAFKA_CONF_OK);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
    assert_non_null(rk);
    return rk;
}

static rd_kafka_topic_partition_list_t *parts_new(void)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(2);
    rd_kafka_topic_partition_list_add(l, "in", 0);
    rd_kafka_topic_partition_list_add(l, "in", 1);
    return l;
}

/* 1. */
static void test_revoke_after_close(void **state)
{
    (void)state;
    rd_kafka_t *rk = consumer_new();
    rd_kafka_consumer_close(rk);
    /* What the callback is up against. */
    assert_null(rd_kafka_rebalance_protocol(rk));
    rd_kafka_topic_partition_list_t *l = parts_new();
    bs_stage *s = stage_new(rk, BS_STAGE_FATAL, true);
    bs_rebalance_cb(rk, RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS, l, s);
    assert_int_equal(s->state, BS_STAGE_FATAL);
    assert_int_equal(s->nparts, 0);
    stage_free(s);
    rd_kafka_topic_partition_list_destroy(l);
    rd_kafka_destroy(rk);
}

/* 2. */
static void assign_declined(bs_stage_state st, bool stop)
{
    rd_kafka_t *rk = consumer_new();
    rd_kafka_topic_partition_list_t *l = parts_new();
    bs_stage *s = stage_new(rk, st, stop);
    bs_rebalance_cb(rk, RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS, l, s);
    if (s->nparts)
        fail_msg("state %s, stop %s: %zu partition(s) taken (the first "
                 "%s), want the assignment declined",
                 bs_stage_state_name(st), stop ? "requested" : "not",
                 s->nparts, bs_part_state_name(s->parts[0].state));
    assert_int_equal(s->state, st);
    /* librdkafka was answered: the partitions are its assignment. */
    rd_kafka_topic_partition_list_t *a = NULL;
    assert_int_equal(rd_kafka_assignment(rk, &a), RD_KAFKA_RESP_ERR_NO_ERROR);
    assert_int_equal(a->cnt, 2);
    rd_kafka_topic_partition_list_destroy(a);
    stage_free(s);
    rd_kafka_topic_partition_list_destroy(l);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
}

static void test_assign_stop_requested(void **state)
{
    (void)state;
    assign_declined(BS_STAGE_RUNNING, true);
}

static void test_assign_draining(void **state)
{
    (void)state;
    assign_declined(BS_STAGE_DRAINING, true);
}

static void test_assign_fatal(void **state)
{
    (void)state;
    assign_declined(BS_STAGE_FATAL, false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_revoke_after_close),
        cmocka_unit_test(test_assign_stop_requested),
        cmocka_unit_test(test_assign_draining),
        cmocka_unit_test(test_assign_fatal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
