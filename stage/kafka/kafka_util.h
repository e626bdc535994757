/*
 * kafka_util.h -- Kafka helpers the engine and the CLI share: the one way
 * a client's configuration is built from the stage's (so every client
 * gets the kafka.* settings: TLS, SASL), and metadata/watermark queries
 * (the stage, the checkpoint store, replay), each one round trip through
 * a client the caller owns and keeps.  Nothing here keeps state.
 */
#ifndef BLOOMSTAGE_KAFKA_UTIL_H
#define BLOOMSTAGE_KAFKA_UTIL_H

#include "config.h"

#include <librdkafka/rdkafka.h>

#include <stdbool.h>

/* A librdkafka configuration for a client of cfg's stage: defaults, then
 * every kafka.* key, then every ROLE.* key (role "consumer" or
 * "producer"), then forced (defaults and forced: NULL-terminated key,
 * value pairs; a pair whose key is NULL ends them).  NULL with errstr
 * naming the key (with its prefix) when librdkafka refuses a value. */
rd_kafka_conf_t *bs_kafka_conf_new(const bs_config *cfg, const char *role,
                                   const char *const *defaults,
                                   const char *const *forced, char *errstr,
                                   size_t errstr_size);

/* A consumer's allow.auto.create.topics made false without marking it set
 * when it is false already (librdkafka's default for consumers): 2.0.2
 * warns of an explicitly set false on every Metadata request below
 * version 4, which a bootstrap connection and the mock cluster make, though
 * the request creates nothing.  Set only when the kafka.* or consumer.*
 * keys made it true. */
void bs_kafka_conf_no_auto_create(rd_kafka_conf_t *conf);

/* bs_kafka_conf_new for an assign-only consumer that reads topics to a
 * known end at read_committed and commits nothing (the output tail, the
 * Kafka checkpoint store) and creates no topic: its group.id is
 * group_id + ".replay", never joined (librdkafka's assign needs one; it
 * looks its coordinator up). */
rd_kafka_conf_t *bs_kafka_reader_conf(const bs_config *cfg,
                                      const char *group_id,
                                      const char *client_id, char *errstr,
                                      size_t errstr_size);

/* Partitions of `topic` (metadata through rk), or -1 with errstr (which may
 * be NULL when the caller only wants the count) and *err (if not NULL) the
 * error (the request's or the topic's; RD_KAFKA_RESP_ERR_NO_ERROR when
 * the topic has no partitions). */
int bs_topic_partitions(rd_kafka_t *rk, const char *topic, int timeout_ms,
                        int *err, char *errstr, size_t errstr_size);

/* Whether err is a refusal by the brokers' authorizer: an ACL missing
 * (TOPIC_, GROUP_, TRANSACTIONAL_ID_ or CLUSTER_AUTHORIZATION_FAILED). */
bool bs_kafka_refused(int err);
/* What such a refusal refuses, in the words of docs/security.md's ACL table:
 * "<op> on <resource type>:<name>" into buf ("Write on Topic:out"; op is
 * what the request needed: Read, Write, Describe; the cluster's is
 * IdempotentWrite whatever op says).  false, buf untouched, if err is no
 * refusal. */
bool bs_refusal_text(int err, const char *op, const char *name, char *buf,
                     size_t size);
/* The principal the brokers see, when cfg says it: SASL's User:USERNAME
 * into buf; NULL otherwise (under mTLS the broker maps it from the
 * certificate). */
const char *bs_kafka_principal(const bs_config *cfg, char *buf, size_t size);
/* A command's one line for such a refusal, into buf: "not authorized:
 * Write on Topic:t refused to User:u (TOPIC_AUTHORIZATION_FAILED): grant
 * that ACL (docs/security.md, ...)" (the principal when cfg says it).
 * false if err is no refusal. */
bool bs_refusal_message(const bs_config *cfg, int err, const char *op,
                        const char *name, char *buf, size_t size);
/* Why `topic`, missing from the metadata of every topic (which leaves out
 * the topics the client may not Describe), is missing: the brokers'
 * refusal of a Metadata request naming it (TOPIC_AUTHORIZATION_FAILED),
 * or 0 (it does not exist, or no answer).  Asked only when cfg's
 * kafka.security.protocol authenticates the client (SASL_*, SSL: an
 * authorizer's principals), and rk must have allow.auto.create.topics=
 * false: librdkafka's mock creates a topic such a request names. */
int bs_topic_refused(const bs_config *cfg, rd_kafka_t *rk, const char *topic,
                     int timeout_ms);

/* The same from the metadata of every topic, so that asking creates
 * nothing (a Metadata request naming a topic makes librdkafka's mock, and
 * a broker with auto.create.topics.enable when the client allows it,
 * create it); *leader0 (if not NULL) is partition 0's leader.  -1 with
 * errstr "topic T does not exist" when it is not there. */
int bs_topic_lookup(rd_kafka_t *rk, const char *topic, int timeout_ms,
                    int32_t *leader0, char *errstr, size_t errstr_size);

/* One configuration value of `topic` (DescribeConfigs through rk, sent to
 * `broker` when >= 0: any broker answers for a topic, and librdkafka's
 * mock names no controller to wait for).  1 with value[0..vsize); 2 when
 * the broker does not answer DescribeConfigs (librdkafka's mock); -1 when
 * there is no answer or a refusal, errstr saying why and *refused the
 * brokers' refusal (TOPIC_AUTHORIZATION_FAILED: no DescribeConfigs ACL)
 * or 0.  A key the broker does not name leaves value "(not described)". */
int bs_topic_config(rd_kafka_t *rk, const char *topic, int32_t broker,
                    const char *name, char *value, size_t vsize,
                    int timeout_ms, int *refused, char *errstr,
                    size_t errstr_size);

#endif
