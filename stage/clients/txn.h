/*
 * txn.h -- exactly_once by Kafka transactions (txn.c): the
 * transactional producer's calls and the classes of their errors.
 */
#ifndef BLOOMSTAGE_TXN_H
#define BLOOMSTAGE_TXN_H

#include "core/stage_int.h"

/* After the producer is made (bs_producer_recreate): with s->txn, its
 * transactions initialised (this fences an earlier producer with the same
 * transactional.id and aborts what it left open) and one begun.  With
 * errstr: BS_RETRY if the broker did not answer (retried for a minute
 * first), BS_FATAL if it refused. */
bs_rc bs_txn_start(bs_stage *s, char *errstr, size_t errstr_size);
/* s->txn_id from exactly_once.transactional.id, else
 * bloomstage-GROUP-INSTANCE with consumer.group.instance.id, else
 * bloomstage-GROUP-HOST-slotN with a host slot taken in slot_dir (NULL:
 * bs_txn_slot_dir(); txn_id.h) and held in s->txn_slot until
 * bs_clients_destroy, else (no slot to be had) one unique to the process.
 * Logged. */
void bs_txn_id(bs_stage *s, const char *slot_dir);
/* Before a fatal producer is replaced: a fencing of its transactional id
 * is noted, and BS_FATAL (errstr, and an error logged naming the id) when
 * it makes BS_TXN_FENCED_MAX within BS_TXN_FENCED_WINDOW_S: another live
 * instance has the same id, and the two would fence each other for as
 * long as both run.  One fencing (a zombie's) is BS_OK. */
bs_rc bs_txn_fenced_check(bs_stage *s, char *errstr, size_t errstr_size);
/* Begins a transaction unless one is open.  false: the producer cannot
 * (it is fatal; the next round rolls back and replaces it). */
bool bs_txn_begin(bs_stage *s);
/* Sends `offsets` with the consumer group's metadata and commits the
 * open transaction.  BS_OK: committed.  Otherwise errstr says why and the
 * transaction is not committed: the caller rolls back (bs_rollback ends
 * it).  Crash points after-send-offsets and after-commit are here; each
 * call is timed as a phase of the round. */
bs_rc bs_txn_commit(bs_stage *s, rd_kafka_topic_partition_list_t *offsets,
                    char *errstr, size_t errstr_size);
/* send_offsets_to_transaction (offsets, with the group's metadata md)
 * and commit_transaction on rk, each retried while retriable; what each
 * took into *send_s and *commit_s.  Touches nothing but rk, so that the
 * committer's thread can run it (committer.h).  BS_OK: committed;
 * otherwise errstr says why (a fencing also logged) and the caller rolls
 * back. */
bs_rc bs_txn_commit_on(rd_kafka_t *rk,
                      const rd_kafka_topic_partition_list_t *offsets,
                      const rd_kafka_consumer_group_metadata_t *md,
                      char *errstr, size_t errstr_size, double *send_s,
                      double *commit_s);
/* Whether a librdkafka error means this instance was fenced: another one
 * owns its partitions now, or its transaction timed out. */
bool bs_txn_fenced_error(rd_kafka_resp_err_t err);

#endif
