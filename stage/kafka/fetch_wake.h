/*
 * fetch_wake.h -- keeps a librdkafka 2.0.2 consumer fetching while its
 * read-ahead is small, so the read-ahead can be small.
 *
 * A consumer stops fetching once its queue holds queued.min.messages
 * records or queued.max.messages.kbytes (with the partition queues
 * forwarded to the consumer queue, as the high-level consumer does, the
 * queue's total).  librdkafka 2.0.2 decides again only when the broker
 * thread wakes up: for network traffic or an op queued for it, otherwise
 * after a fixed second (librdkafka issue #2879; 2.2 made it
 * fetch.queue.backoff.ms).  A read-ahead small enough to bound memory is
 * drained long before that, and the consumer idles most of every second;
 * the usual way out, a read-ahead of more than a second of records, costs
 * hundreds of MiB.  This module is the other way: once the poller has
 * consumed half the read-ahead since the last wake-up (counted in records
 * or in bytes) and its queue is down to a quarter of queued.min.messages,
 * a helper thread sends one ListOffsets request to each broker leading an
 * assigned partition (rd_kafka_offsets_for_times on the assignment; the
 * answer is thrown away).  Queuing that request wakes the broker thread,
 * which looks at its partitions again and fetches.  A stream that is idle
 * consumes nothing and wakes nothing.
 *
 * Ownership: bs_fetch_wake_new borrows the consumer, which must outlive
 * the waker: call bs_fetch_wake_destroy before the consumer is closed.
 * bs_fetch_wake_note and bs_fetch_wake_check are called by the thread that
 * polls the consumer, and only by it; the helper thread touches nothing
 * but librdkafka's thread-safe calls and its own fields.  The engine
 * (stage.c) and bench/e2e's pass-through use it the same way.
 */
#ifndef BLOOMSTAGE_FETCH_WAKE_H
#define BLOOMSTAGE_FETCH_WAKE_H

#include <librdkafka/rdkafka.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct bs_fetch_wake bs_fetch_wake;

/* Reads queued.min.messages and queued.max.messages.kbytes from the
 * consumer's configuration and starts the helper thread.  wakes: a
 * counter the helper adds one to per wake-up sent (its only writer), or
 * NULL.  NULL on failure, with errstr. */
bs_fetch_wake *bs_fetch_wake_new(rd_kafka_t *consumer, _Atomic uint64_t *wakes,
                                 char *errstr, size_t errstr_size);

/* Poller: a record of len bytes (key and value) was consumed.  Cheap: two
 * additions. */
void bs_fetch_wake_note(bs_fetch_wake *w, size_t len);

/* Poller, every few dozen records and on an empty poll: wakes the broker
 * threads when enough was consumed since the last wake-up and the queue
 * is short (a non-blocking signal to the helper). */
void bs_fetch_wake_check(bs_fetch_wake *w);

/* Stops and joins the helper.  NULL is accepted. */
void bs_fetch_wake_destroy(bs_fetch_wake *w);

#endif
