/*
 * store.c -- see store.h: bs_store is the one handle the stage holds, and
 * passes each call to the store checkpoint.store names, the directory
 * store (store_dir.c) or the Kafka store (store_kafka.c).
 */
#include "store.h"
#include "store_dir.h"
#include "store_kafka.h"

#include <stdio.h>
#include <stdlib.h>

struct bs_store {
    bs_dirstore *ds;   /* checkpoint.store=dir, else NULL */
    bs_kafkastore *ks; /* checkpoint.store=kafka, else NULL */
    char desc[300];    /* the dir store's description */
};

bs_store *bs_store_new(const bs_settings *set, rd_kafka_t *reader,
                       rd_kafka_conf_t *producer_conf, char *errstr,
                       size_t errstr_size)
{
    bs_store *st = calloc(1, sizeof(*st));
    if (!st) {
        if (producer_conf)
            rd_kafka_conf_destroy(producer_conf);
        snprintf(errstr, errstr_size, "out of memory");
        return NULL;
    }
    if (set->checkpoint_store == BS_CONFIG_STORE_KAFKA) {
        st->ks = bs_kafkastore_new(set, reader, producer_conf, errstr,
                                   errstr_size);
        if (!st->ks) {
            free(st);
            return NULL;
        }
        return st;
    }
    if (producer_conf)
        rd_kafka_conf_destroy(producer_conf);
    snprintf(st->desc, sizeof(st->desc), "dir %s", set->checkpoint_dir);
    st->ds = bs_dirstore_new(set->checkpoint_dir,
                             (uint32_t)set->checkpoint_delta_max,
                             set->checkpoint_delta_ratio);
    if (!st->ds) {
        snprintf(errstr, errstr_size, "out of memory");
        free(st);
        return NULL;
    }
    return st;
}

void bs_store_destroy(bs_store *st)
{
    if (!st)
        return;
    bs_kafkastore_destroy(st->ks);
    bs_dirstore_destroy(st->ds);
    free(st);
}

int bs_store_check(bs_store *st, char *errstr, size_t errstr_size)
{
    return st->ks ? bs_kafkastore_check(st->ks, errstr, errstr_size)
                  : bs_dirstore_check(st->ds, errstr, errstr_size);
}

int bs_store_put(bs_store *st, const char *topic, int32_t partition,
                 int64_t next_offset, const bs_ckpt_wm *wm, uint32_t nwm,
                 bf_filter *filter, char *errstr, size_t errstr_size)
{
    if (st->ks)
        return bs_kafkastore_put(st->ks, topic, partition, next_offset, wm,
                                 nwm, filter, errstr, errstr_size);
    return bs_dirstore_put(st->ds, topic, partition, next_offset, wm, nwm,
                           filter, errstr, errstr_size);
}

int bs_store_sync(bs_store *st, char *errstr, size_t errstr_size)
{
    return st->ks ? bs_kafkastore_sync(st->ks, errstr, errstr_size)
                  : bs_dirstore_sync(st->ds, errstr, errstr_size);
}

int bs_store_get(bs_store *st, const char *topic, int32_t partition,
                 int64_t at_offset, bs_checkpoint *out, char *errstr,
                 size_t errstr_size)
{
    if (st->ks)
        return bs_kafkastore_get(st->ks, topic, partition, at_offset, out,
                                 errstr, errstr_size);
    return bs_dirstore_get(st->ds, topic, partition, at_offset, out, errstr,
                           errstr_size);
}

int bs_store_committed(bs_store *st, const char *topic, int32_t partition,
                       int64_t next_offset, char *errstr, size_t errstr_size)
{
    if (st->ks) {
        bs_kafkastore_committed(st->ks, topic, partition, next_offset);
        return 0;
    }
    return bs_dirstore_committed(st->ds, topic, partition, next_offset,
                                 errstr, errstr_size);
}

uint64_t bs_store_last_bytes(const bs_store *st, bool *delta)
{
    return st->ks ? bs_kafkastore_last_bytes(st->ks, delta)
                  : bs_dirstore_last_bytes(st->ds, delta);
}

const char *bs_store_describe(const bs_store *st)
{
    return st->ks ? bs_kafkastore_describe(st->ks) : st->desc;
}

void bs_store_use_producer(bs_store *st, rd_kafka_t *producer)
{
    if (st->ks)
        bs_kafkastore_use_producer(st->ks, producer);
}

bool bs_store_delivery(bs_store *st, const rd_kafka_message_t *m)
{
    return st->ks && bs_kafkastore_delivery(st->ks, m);
}
