/*
 * inproc_mock.h -- librdkafka's mock cluster (rdkafka_mock.h) inside the test
 * process, for unit tests of engine modules that talk Kafka (the checkpoint
 * store, replay, record keys of real messages).  In process, a test can
 * inject faults and delays directly on the cluster handle
 * (rd_kafka_mock_push_request_errors, rd_kafka_mock_broker_set_rtt, ...).
 * Clients use tests/harness.h's h_kafka_conf and h_produce as the
 * integration tests do; failures abort the test through cmocka.
 */
#ifndef BLOOMSTAGE_TEST_INPROC_MOCK_H
#define BLOOMSTAGE_TEST_INPROC_MOCK_H

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdint.h>

typedef struct im_cluster {
    rd_kafka_t *rk; /* the handle the cluster lives in */
    rd_kafka_mock_cluster_t *mc;
    const char *bootstraps; /* owned by mc */
} im_cluster;

/* A cluster of `brokers` brokers (ids 1..brokers). */
void im_start(im_cluster *c, int brokers);
void im_stop(im_cluster *c);

/* Creates topic with `partitions` partitions (replication 1). */
void im_topic(im_cluster *c, const char *topic, int partitions);

/* A consumer that is assigned, never subscribed (partition EOF events on),
 * as the stage's replay and checkpoint readers are.  extra: NULL or a
 * NULL-terminated list of name, value pairs applied last. */
rd_kafka_t *im_consumer(const im_cluster *c, const char *const *extra);

/* The record at `offset` of topic/partition, read with consumer (assigned
 * for the call, unassigned after): a real message, the caller destroys it. */
rd_kafka_message_t *im_fetch(rd_kafka_t *consumer, const char *topic,
                             int32_t partition, int64_t offset);

#endif
