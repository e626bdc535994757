/*
 * store.c -- see store.h: bs_store_new makes the one handle the stage
 * holds, with the table (store_ops.h) of the store checkpoint.store names,
 * the directory store (store_dir.c) or the Kafka store (store_kafka.c).
 */
#include "store/store.h"
#include "store/store_dir.h"
#include "store/store_kafka.h"

#include <stdio.h>
#include <stdlib.h>

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
        st->ops = &bs_kafkastore_ops;
        st->impl = bs_kafkastore_new(set, reader, producer_conf, errstr,
                                     errstr_size);
        if (!st->impl) {
            free(st);
            return NULL;
        }
        return st;
    }
    if (producer_conf)
        rd_kafka_conf_destroy(producer_conf);
    st->ops = &bs_dirstore_ops;
    st->impl = bs_dirstore_new(set->checkpoint_dir,
                               (uint32_t)set->checkpoint_delta_max,
                               set->checkpoint_delta_ratio);
    if (!st->impl) {
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
    st->ops->destroy(st->impl);
    free(st);
}
