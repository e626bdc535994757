/*
 * store_kafka.h -- the Kafka store behind bs_store (store.c) for
 * checkpoint.store=kafka (store.h says what it keeps; store_kafka.c how):
 * its table of the contract's operations (store_ops.h).  The decoders of
 * its records are store_kafka_records.h's.
 */
#ifndef BLOOMSTAGE_STORE_KAFKA_H
#define BLOOMSTAGE_STORE_KAFKA_H

#include "base/settings.h"
#include "store/store_ops.h" /* the contract it implements, BS_STORE_* */

typedef struct bs_kafkastore bs_kafkastore;

/* As bs_store_new (store.h) for the kafka store: set's strings are kept,
 * reader is borrowed, producer_conf is taken over (destroyed on failure
 * too).  Destroyed by its table's destroy. */
bs_kafkastore *bs_kafkastore_new(const bs_settings *set, rd_kafka_t *reader,
                                 rd_kafka_conf_t *producer_conf, char *errstr,
                                 size_t errstr_size);

/* A store that only reads, for `bloomstage checkpoint info`: no producer
 * (put and sync fail), the topic's partitions learnt through reader, the
 * topic never created.  NULL with errstr when it cannot be read.
 * Destroyed by its table's destroy. */
bs_kafkastore *bs_kafkastore_open_read(const bs_settings *set,
                                       rd_kafka_t *reader, char *errstr,
                                       size_t errstr_size);

/* Whether the store may read its topic (a fetch at the end of partition
 * 0): 0, or BS_STORE_REFUSED with errstr when the brokers' authorizer
 * refuses it (no Read ACL). */
int bs_kafkastore_read_check(bs_kafkastore *ks, char *errstr,
                             size_t errstr_size);

/* An input partition a manifest names. */
typedef struct bs_store_part {
    char topic[250];
    int32_t partition;
} bs_store_part;

/* The input partitions whose newest manifest of the store's group (its
 * key's, not a tombstone) is in the topic, every partition of which is
 * read whole at the reader's isolation level: a malloc'd array in *parts
 * (sorted by topic, then partition; NULL when *n is 0).  -1 with
 * errstr. */
int bs_kafkastore_list(bs_kafkastore *ks, bs_store_part **parts, size_t *n,
                       char *errstr, size_t errstr_size);

/* The contract's operations (store_ops.h) on a bs_kafkastore. */
extern const bs_store_ops bs_kafkastore_ops;

#endif
