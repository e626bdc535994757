/*
 * client_defaults.h -- the tuning bloomstage gives its librdkafka clients
 * before the configuration's own keys (kafka.*, consumer.*, producer.*,
 * which override it), declared once: clients.c applies it, and bench/e2e's
 * pass-through uses the same, so that the limit it measures is the
 * stage's limit with the stage's settings.  Each is a list of key, value
 * pairs to splice into a NULL-terminated array or argument list.
 *
 * Memory is bounded by a small read-ahead on both sides: what the consumer
 * prefetches (records queued, bytes queued, bytes per partition and fetch)
 * and what the producer holds before delivery.  The consumer's small
 * read-ahead needs fetch_wake.c with librdkafka 2.0.2 (why: fetch_wake.h).
 */
#ifndef BLOOMSTAGE_CLIENT_DEFAULTS_H
#define BLOOMSTAGE_CLIENT_DEFAULTS_H

#define BS_CONSUMER_TUNING                                                    \
    "queued.min.messages", "10000", "queued.max.messages.kbytes", "2048",     \
        "fetch.message.max.bytes", "131072"

#define BS_PRODUCER_TUNING                                                    \
    "linger.ms", "5", "compression.type", "lz4",                              \
        "queue.buffering.max.messages", "10000",                              \
        "queue.buffering.max.kbytes", "4096"

#endif
