/*
 * kafka_util.h -- Kafka metadata/watermark helpers the engine shares (the
 * stage, the checkpoint store, replay).  Each call is one round trip through
 * a client the caller owns and keeps; nothing here keeps state.
 */
#ifndef BLOOMSTAGE_KAFKA_UTIL_H
#define BLOOMSTAGE_KAFKA_UTIL_H

#include "checkpoint.h"

#include <librdkafka/rdkafka.h>

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
