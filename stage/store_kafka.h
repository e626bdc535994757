/*
 * store_kafka.h -- the Kafka store behind bs_store (store.c) for
 * checkpoint.store=kafka (store.h says what it keeps; store_kafka.c how):
 * its table of the contract's operations (store_ops.h).  The decoders of
 * its records are store_kafka_records.h's.
 */
#ifndef BLOOMSTAGE_STORE_KAFKA_H
#define BLOOMSTAGE_STORE_KAFKA_H

#include "settings.h"
#include "store_ops.h" /* the contract it implements, BS_STORE_* */

typedef struct bs_kafkastore bs_kafkastore;

/* As bs_store_new (store.h) for the kafka store: set's strings are kept,
 * reader is borrowed, producer_conf is taken over (destroyed on failure
 * too).  Destroyed by its table's destroy. */
bs_kafkastore *bs_kafkastore_new(const bs_settings *set, rd_kafka_t *reader,
                                 rd_kafka_conf_t *producer_conf, char *errstr,
                                 size_t errstr_size);

/* The contract's operations (store_ops.h) on a bs_kafkastore. */
extern const bs_store_ops bs_kafkastore_ops;

#endif
