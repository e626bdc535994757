/*
 * kafka_util.h -- Kafka helpers the engine and the CLI share: the one way
 * a client's configuration is built from the stage's (so every client
 * gets the kafka.* settings: TLS, SASL), and metadata/watermark queries
 * (the stage, the checkpoint store, replay), each one round trip through
 * a client the caller owns and keeps.  Nothing here keeps state.
 */
#ifndef BLOOMSTAGE_KAFKA_UTIL_H
#define BLOOMSTAGE_KAFKA_UTIL_H

#include "checkpoint.h"
#include "config.h"

#include <librdkafka/rdkafka.h>

/* A librdkafka configuration for a client of cfg's stage: defaults, then
 * every kafka.* key, then every ROLE.* key (role "consumer" or
 * "producer"), then forced (defaults and forced: NULL-terminated key,
 * value pairs; a pair whose key is NULL ends them).  NULL with errstr
 * naming the key (with its prefix) when librdkafka refuses a value. */
rd_kafka_conf_t *bs_kafka_conf_new(const bs_config *cfg, const char *role,
                                   const char *const *defaults,
                                   const char *const *forced, char *errstr,
                                   size_t errstr_size);

/* bs_kafka_conf_new for an assign-only consumer that reads topics to a
 * known end at read_committed and commits nothing (the output tail, the
 * Kafka checkpoint store): its group.id is group_id + ".replay", never
 * joined (librdkafka's assign needs one; it looks its coordinator up). */
rd_kafka_conf_t *bs_kafka_reader_conf(const bs_config *cfg,
                                      const char *group_id,
                                      const char *client_id, char *errstr,
                                      size_t errstr_size);

/* Partitions of `topic` (metadata through rk), or -1 with errstr (which may
 * be NULL when the caller only wants the count). */
int bs_topic_partitions(rd_kafka_t *rk, const char *topic, int timeout_ms,
                        char *errstr, size_t errstr_size);

/* The same from the metadata of every topic, so that asking creates
 * nothing (a Metadata request naming a topic makes librdkafka's mock, and
 * a broker with auto.create.topics.enable when the client allows it,
 * create it); *leader0 (if not NULL) is partition 0's leader.  -1 with
 * errstr "topic T does not exist" when it is not there. */
int bs_topic_lookup(rd_kafka_t *rk, const char *topic, int timeout_ms,
                    int32_t *leader0, char *errstr, size_t errstr_size);

/* High watermarks of partitions 0..n-1 of `topic` into wm[0..n): 0, or -1
 * with errstr. */
int bs_output_watermarks(rd_kafka_t *rk, const char *topic, int n,
                         bs_ckpt_wm *wm, int timeout_ms, char *errstr,
                         size_t errstr_size)
    __attribute__((warn_unused_result));

#endif
