/*
 * rebalance.h -- the consumer's rebalance callback (rebalance.c): restore on
 * assign, checkpoint on revoke.
 */
#ifndef BLOOMSTAGE_REBALANCE_H
#define BLOOMSTAGE_REBALANCE_H

#include "core/stage_int.h"

void bs_rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                     rd_kafka_topic_partition_list_t *parts, void *opaque);

#endif
