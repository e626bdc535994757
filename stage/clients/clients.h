/*
 * clients.h -- the stage's librdkafka clients (clients.c): made, probed,
 * started, replaced and destroyed, and the configuration each gets.
 */
#ifndef BLOOMSTAGE_CLIENTS_H
#define BLOOMSTAGE_CLIENTS_H

#include "core/stage_int.h"

/* The consumers and the store, made without waiting on a broker.
 * rebalance_cb: the consumer's rebalance callback, passed down by stage.c
 * (rebalance.c sits above the clients: its rounds use them). */
bs_rc bs_clients_new(bs_stage *s, bs_rebalance_fn *rebalance_cb,
                     char *errstr, size_t errstr_size);
/* The first connection: the clients' callbacks served (their errors go to
 * the log and to /ready), then the cluster's metadata asked for, waiting
 * up to timeout_ms.  BS_OK once a broker answered, else BS_RETRY. */
bs_rc bs_clients_probe(bs_stage *s, int timeout_ms);
/* What needs a broker: the store checked (a damaged checkpoint stops
 * start-up before anything is consumed), the exactly_once method chosen
 * and the producer made.  BS_FATAL with errstr. */
bs_rc bs_clients_start(bs_stage *s, char *errstr, size_t errstr_size);
void bs_clients_destroy(bs_stage *s);
/* Stops the fetch wake-ups, then rd_kafka_consumer_close; once: a drain
 * that ends in FATAL has closed it already. */
void bs_consumer_close(bs_stage *s);
/* A new idempotent producer (and topic handles) in place of the current
 * one, whose leftovers are purged; with s->txn a transactional one, whose
 * transactions are initialised and one begun (bs_txn_start's outcome: the
 * producer is in place even then). */
bs_rc bs_producer_recreate(bs_stage *s, char *errstr, size_t errstr_size);
/* exactly_once.overlap: the current producer and the spare one (s->spare)
 * exchanged, with everything that belongs to each (topic handles,
 * transaction state, transactional id), and the Kafka store pointed at
 * the new current one. */
void bs_producers_swap(bs_stage *s);
/* The spare producer replaced as bs_producer_recreate replaces the
 * current one (its init_transactions fences the old one and aborts what
 * it left open); s->spare.broken is cleared on success. */
bs_rc bs_spare_recreate(bs_stage *s, char *errstr, size_t errstr_size);

/* A librdkafka configuration for one of the stage's clients: defaults, then
 * the kafka.* and ROLE.* keys, then forced (both NULL-terminated pairs). */
rd_kafka_conf_t *bs_client_conf(bs_stage *s, const char *role,
                                const char *const *defaults,
                                const char *const *forced, char *errstr,
                                size_t errstr_size);

#endif
