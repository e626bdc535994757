/*
 * poison.h -- records that cannot be produced for a reason retrying will
 * not heal (poison.c): which errors those are, what a copy of one would
 * weigh on the wire, and the notes the stage keeps of the ones a delivery
 * report named.  Such a delivery rolls the round back like any other
 * (with transactions it leaves the transaction to be aborted); the note
 * outlives the rollback, so that when the record comes again the record
 * path (record_path.c) sends it to the copy that can still be produced.
 * librdkafka reports a batch's refusal on every record of the batch, so an
 * output copy refused is first sent again alone (the producer flushed
 * before and after it): delivered, the note is forgotten; refused again,
 * the record goes to rejected.topic whole, then without its value, then
 * bare (its coordinates and reason only), else a stop naming it.  Each
 * refusal costs a rollback.  A record refused
 * at produce time (librdkafka's message.max.bytes, or the topic's
 * max.message.bytes as the stage read it at start-up) needs no note: the
 * record path routes it there and then, with no rollback.
 */
#ifndef BLOOMSTAGE_POISON_H
#define BLOOMSTAGE_POISON_H

#include "core/stage_int.h"

/* Headers of a copy routed to rejected.topic that lost parts of the
 * record: what it lost ("value", or "value,key,headers"), and the bytes of
 * the value dropped. */
#define BS_HDR_DROPPED "bloomstage-dropped"
#define BS_HDR_VALUE_BYTES "bloomstage-value-bytes"

/* The bytes a record batch of one record with these parts takes at most
 * (what a broker measures against max.message.bytes): the batch's header
 * and the record's framing, with each header's varints counted at their
 * widest. */
int64_t bs_copy_wire_bytes(size_t key_len, size_t value_len,
                           const rd_kafka_headers_t *hdrs);

/* Whether err, for one record, will not heal by producing it again: too
 * large (MSG_SIZE_TOO_LARGE, RECORD_LIST_TOO_LARGE), INVALID_RECORD (a
 * compacted topic's record without a key), INVALID_TIMESTAMP. */
bool bs_unproducible(rd_kafka_resp_err_t err);
/* The bloomstage-reason such a record gets in rejected.topic: "too-large",
 * else "unproducible:ERR_NAME" (into buf, returned). */
const char *bs_unproducible_reason(rd_kafka_resp_err_t err, char *buf,
                                   size_t size);

/* The note of the input record topic/partition/offset, NULL if none. */
bs_poison *bs_poison_find(const bs_stage *s, const char *topic,
                          int32_t partition, int64_t offset);
/* A delivery report of m (a copy of an input record: its bloomstage-src
 * says which) with an error bs_unproducible accepts: the record noted, its
 * next copy one step further (BS_COPY_*) than the one that failed, and
 * logged naming it.  false when m names no input record (then nothing is
 * noted) or the note cannot be kept (out of memory: the rollback repeats,
 * with backoff, as for any failed delivery). */
bool bs_poison_from_report(bs_stage *s, const rd_kafka_message_t *m);
/* A delivery report of m without an error: a note of its record whose
 * output copy, sent alone, was delivered is forgotten (it was its batch,
 * not the record, that the broker refused). */
void bs_poison_delivered(bs_stage *s, const rd_kafka_message_t *m);
/* Forgets the notes of records a commit has passed and of partitions no
 * longer assigned: they will not come again. */
void bs_poison_prune(bs_stage *s);
void bs_poison_free(bs_stage *s);

#endif
