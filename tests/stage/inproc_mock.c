/*
 * inproc_mock.c -- see inproc_mock.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "support.h"
#include "inproc_mock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void set(rd_kafka_conf_t *conf, const char *name, const char *value)
{
    char err[256];
    if (rd_kafka_conf_set(conf, name, value, err, sizeof(err)) !=
        RD_KAFKA_CONF_OK)
        fail_msg("%s=%s: %s", name, value, err);
}

void im_start(im_cluster *c, int brokers)
{
    memset(c, 0, sizeof(*c));
    char err[256];
    /* The handle only hosts the cluster; it talks to no broker itself. */
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    set(conf, "client.id", "bloomstage-unit-mock");
    set(conf, "log_level", "3");
    c->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
    if (!c->rk)
        fail_msg("mock cluster handle: %s", err);
    c->mc = rd_kafka_mock_cluster_new(c->rk, brokers);
    if (!c->mc)
        fail_msg("rd_kafka_mock_cluster_new(%d brokers) failed", brokers);
    c->bootstraps = rd_kafka_mock_cluster_bootstraps(c->mc);
}

void im_stop(im_cluster *c)
{
    if (c->mc)
        rd_kafka_mock_cluster_destroy(c->mc);
    if (c->rk)
        rd_kafka_destroy(c->rk);
    memset(c, 0, sizeof(*c));
}

void im_topic(im_cluster *c, const char *topic, int partitions)
{
    rd_kafka_resp_err_t err =
        rd_kafka_mock_topic_create(c->mc, topic, partitions, 1);
    if (err)
        fail_msg("create topic %s: %s", topic, rd_kafka_err2str(err));
}

rd_kafka_t *im_consumer(const im_cluster *c, const char *const *extra)
{
    static unsigned n;
    char group[64], err[256];
    snprintf(group, sizeof(group), "bs-unit-%d-%u", (int)getpid(), ++n);
    rd_kafka_conf_t *conf = h_kafka_conf(c->bootstraps);
    set(conf, "group.id", group);
    set(conf, "enable.auto.commit", "false");
    set(conf, "enable.auto.offset.store", "false");
    set(conf, "enable.partition.eof", "true");
    set(conf, "fetch.wait.max.ms", "10");
    set(conf, "allow.auto.create.topics", "false");
    for (size_t i = 0; extra && extra[i]; i += 2)
        set(conf, extra[i], extra[i + 1]);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
    if (!rk)
        fail_msg("consumer: %s", err);
    rd_kafka_poll_set_consumer(rk);
    return rk;
}

rd_kafka_message_t *im_fetch(rd_kafka_t *consumer, const char *topic,
                             int32_t partition, int64_t offset)
{
    rd_kafka_topic_partition_list_t *a = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(a, topic, partition)->offset = offset;
    rd_kafka_resp_err_t err = rd_kafka_assign(consumer, a);
    rd_kafka_topic_partition_list_destroy(a);
    if (err)
        fail_msg("assign %s [%d]: %s", topic, (int)partition,
                 rd_kafka_err2str(err));
    rd_kafka_message_t *got = NULL;
    time_t deadline = time(NULL) + 20;
    while (!got && time(NULL) < deadline) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(consumer, 100);
        if (!m)
            continue;
        if (!m->err && m->offset == offset)
            got = m;
        else
            rd_kafka_message_destroy(m);
    }
    rd_kafka_assign(consumer, NULL);
    if (!got)
        fail_msg("no record at %s [%d] offset %lld within 20 s", topic,
                 (int)partition, (long long)offset);
    return got;
}
