/*
 * kafka.h -- talking Kafka with librdkafka: client configurations, records
 * produced and read back, watermarks and committed offsets.
 *
 * The one-call helpers (h_produce, h_consume_all, h_committed, ...) make
 * their own short-lived client and destroy it before returning, so no
 * librdkafka thread outlives a call and tests cannot leak state into each
 * other through a shared client.  librdkafka's log of the clients made
 * with h_kafka_conf goes to a bounded in-memory ring, not stderr; H_CHECK
 * (or h_dump_kafka_log) prints it when something failed.
 */
#ifndef BS_SUPPORT_KAFKA_H
#define BS_SUPPORT_KAFKA_H

#include "core.h"

#include <librdkafka/rdkafka.h>

#include <stddef.h>
#include <stdint.h>

/* Writes librdkafka's log lines gathered since the last dump to stderr (at
 * most the last 256) and forgets them. */
void h_dump_kafka_log(void);

/* ---- configurations ---------------------------------------------------- */

/*
 * A configuration with the layer's settings for tests against loopback:
 * bootstrap.servers, quiet buffered logging (the ring above), short
 * socket/metadata timeouts.  For clients a test builds itself; the caller
 * owns it.
 */
rd_kafka_conf_t *h_kafka_conf(const char *bootstraps);
/* From now on h_kafka_conf(bootstraps) also applies kv ("key=value",
 * NULL-terminated; copied): how every helper of the layer reaches a
 * secured cluster, e.g. as its super user.  kv NULL forgets them. */
void h_kafka_conf_for(const char *bootstraps, const char *const *kv);
/* Sets key, value, key, value, ..., NULL on conf (NULL: a new, plain
 * configuration) and returns it.  These are the caller's own settings: an
 * invalid one is a bug, printed, and aborts. */
rd_kafka_conf_t *h_conf_pairs(rd_kafka_conf_t *conf, ...)
    __attribute__((sentinel));
/* Applies "key=value" entries (NULL-terminated; NULL is none). */
int h_conf_kv(rd_kafka_conf_t *conf, const char *const *kv) H_WARN_UNUSED;

/* ---- records ----------------------------------------------------------- */

/*
 * A Kafka record.  For producing the pointers are the caller's and only
 * read (key NULL = null key, value NULL = null value/tombstone).  Records
 * from h_consume_all own their bytes (see `owned`); key and value are then
 * also NUL-terminated, beyond *_len, so string keys can be compared
 * directly.
 */
typedef struct h_header {
    const char *name;
    const void *value; /* NULL = null header value */
    size_t value_len;
} h_header;

typedef struct h_record {
    const void *key;
    size_t key_len;
    const void *value;
    size_t value_len;
    const h_header *headers;
    size_t n_headers;
    int32_t partition; /* h_produce with H_PARTITION_PER_RECORD: where to */
    int64_t offset;    /* consumed records only */
    int64_t timestamp; /* consumed: ms, -1 if none; produced: ms if > 0,
                          else the producer's clock */
    void *owned;       /* h_record_list's allocation; NULL for yours */
} h_record;

/* A record from C strings (NULL key/value stay NULL); partition -1 lets the
 * producer's partitioner pick by key. */
h_record h_rec(const char *key, const char *value);

typedef struct h_record_list {
    h_record *recs;
    size_t n;
    size_t cap;
} h_record_list;

/* Frees the records' bytes and the array; the list is left empty and
 * reusable.  NULL is a no-op. */
void h_record_list_free(h_record_list *l);
/* The count of records in l on partition p. */
size_t h_record_list_count_partition(const h_record_list *l, int32_t p);
/* The count of records in l whose last header `name` is the string value
 * (e.g. bloomstage-reason: late). */
size_t h_record_list_count_header(const h_record_list *l, const char *name,
                                  const char *value);
/* The last header named `name` of r (NULL if none; its value may be
 * NULL). */
const h_header *h_header_last(const h_record *r, const char *name);
/* The last header `name` of r as a string into buf[size] ("" when there
 * is none or its value is null); returns buf. */
const char *h_header_str(const h_record *r, const char *name, char *buf,
                         size_t size);

/* ---- producing --------------------------------------------------------- */

/* h_produce's partition argument: >= 0 all records go there;
 * RD_KAFKA_PARTITION_UA (-1) the partitioner picks (by key);
 * H_PARTITION_PER_RECORD each record's own .partition (which may be -1). */
#define H_PARTITION_PER_RECORD (-2)

/*
 * Produces n records to topic and waits (flush) for every delivery report;
 * -1 if any record failed (h_last_error() names the first failure and how
 * many failed).  One producer per call, retrying in order
 * (max.in.flight=1), message.timeout.ms H_MESSAGE_MS.
 */
int h_produce(const char *bootstraps, const char *topic, int32_t partition,
              const h_record *recs, size_t n) H_WARN_UNUSED;
/* The same with extra producer settings: a NULL-terminated list of
 * "key=value" applied after the layer's defaults (e.g. "retries=0"). */
int h_produce_conf(const char *bootstraps, const char *topic,
                   int32_t partition, const h_record *recs, size_t n,
                   const char *const *conf_kv) H_WARN_UNUSED;

/*
 * A producer for a stream of records, kept open: test_eos' feeder and
 * bench/e2e.c's loader.  It counts delivery reports; h_producer_close
 * flushes and says whether everything was delivered.
 */
typedef struct h_producer h_producer;
/* Takes conf (its delivery callback and opaque are set here).
 * queue_full_ms: how long h_producer_send waits for room in a full queue
 * (<= 0: as long as it takes). */
int h_producer_new(rd_kafka_conf_t *conf, int queue_full_ms,
                   h_producer **out) H_WARN_UNUSED;
/* Queues a copy of r for topic, partition (H_PARTITION_PER_RECORD: r's
 * own). */
int h_producer_send(h_producer *p, const char *topic, int32_t partition,
                    const h_record *r) H_WARN_UNUSED;
/* The producer's client, still p's (rd_kafka_fatal_error; a test's
 * rd_kafka_test_fatal_error). */
rd_kafka_t *h_producer_rk(h_producer *p);
/* Serves delivery reports (rd_kafka_poll with timeout 0). */
void h_producer_poll(h_producer *p);
/* Flushes (up to flush_ms), destroys, frees: 0 iff every record sent was
 * delivered (else h_last_error() says how many failed, the first failure,
 * or how many were still queued). */
int h_producer_close(h_producer *p, const char *what, int flush_ms);
/* Purges what is queued and in flight, destroys, frees.  NULL: no-op. */
void h_producer_abandon(h_producer *p);

/* ---- reading ----------------------------------------------------------- */

/*
 * Reads every partition of topic from its low watermark to the high
 * watermark it has when the call starts (a snapshot: records produced later
 * are not waited for), appending to *out in partition order, offset order
 * within a partition.  No group join: assign() with a random group.id,
 * nothing committed.  -1 if the topic does not exist, or if the end is not
 * reached within timeout_ms (the records read so far stay in *out).
 */
int h_consume_all(const char *bootstraps, const char *topic, int timeout_ms,
                  h_record_list *out) H_WARN_UNUSED;
/* The same with extra consumer settings ("key=value", NULL-terminated),
 * e.g. H_READ_COMMITTED: then only committed transactional records are
 * read, and the read first waits (within timeout_ms) for every transaction
 * on the topic to end (the last stable offsets reach the high watermarks:
 * a crashed writer's open transaction is aborted by its timeout), so it
 * reads all that was written. */
int h_consume_all_conf(const char *bootstraps, const char *topic,
                       int timeout_ms, const char *const *conf_kv,
                       h_record_list *out) H_WARN_UNUSED;
extern const char *const H_READ_COMMITTED[];
/* Reads offsets [from[p], to[p]) of partitions 0..nparts-1 of topic (none
 * of a partition whose from[p] >= to[p]; read_uncommitted, no group join),
 * appending to *out in partition order, offset order within a partition.
 * -1 if they are not all read within timeout_ms (the records read so far
 * stay in *out). */
int h_consume_range(const char *bootstraps, const char *topic, int nparts,
                    const int64_t *from, const int64_t *to, int timeout_ms,
                    h_record_list *out) H_WARN_UNUSED;

/* The partition count of an existing topic (-1 if it does not exist). */
int h_topic_partitions(const char *bootstraps, const char *topic,
                       int *partitions) H_WARN_UNUSED;
/* Low and high watermarks of one partition. */
int h_watermarks(const char *bootstraps, const char *topic, int32_t partition,
                 int64_t *low, int64_t *high) H_WARN_UNUSED;
/* The sum of the high watermarks of every partition of topic. */
int h_topic_total(const char *bootstraps, const char *topic,
                  int64_t *total) H_WARN_UNUSED;

/* A client for metadata and offset queries, kept for many calls (a
 * producer handle that produces nothing); takes conf.  NULL, with
 * h_last_error(), if it cannot be made. */
rd_kafka_t *h_query_client(rd_kafka_conf_t *conf);
/* With a client of the caller's (a query client, kept for many calls): the
 * low (which = RD_KAFKA_OFFSET_BEGINNING) or high (RD_KAFKA_OFFSET_END)
 * watermarks of partitions 0..nparts-1 of topic into out[], in one
 * ListOffsets request. */
int h_offsets(rd_kafka_t *rk, const char *topic, int nparts, int64_t which,
              int64_t *out, int timeout_ms) H_WARN_UNUSED;
/* Every partition of topic still starts at offset 0: the mock keeps at
 * most 5 MiB or 100,000 message sets a partition and drops older data
 * without a word, so a test or benchmark that outgrew it would count the
 * wrong thing.  -1 names the first partition that lost data. */
int h_check_nothing_dropped(rd_kafka_t *rk, const char *topic,
                            int nparts) H_WARN_UNUSED;

/* ---- consumer groups --------------------------------------------------- */

/*
 * The committed offsets of group_id for partitions 0..partitions-1 of
 * topic, into offsets[] (RD_KAFKA_OFFSET_INVALID, -1001, where the group has
 * none).  Asked with rd_kafka_committed() by a consumer that never
 * subscribes, so it does not join (or disturb) the group.
 */
int h_committed(const char *bootstraps, const char *group_id,
                const char *topic, int partitions,
                int64_t *offsets) H_WARN_UNUSED;
/*
 * Commits offsets[i] for partition i (0..partitions-1; entries < 0 are
 * skipped) for group_id, synchronously, as a standalone consumer (no join).
 * Seed a group with it before anything joins the group: once any member has
 * joined, the mock (2.0.2) keeps the group forever, even empty, and refuses
 * every standalone commit with UNKNOWN_MEMBER_ID (a real broker accepts
 * them again once the group is empty).
 */
int h_commit(const char *bootstraps, const char *group_id, const char *topic,
             int partitions, const int64_t *offsets) H_WARN_UNUSED;
/* Polls rk, a subscribed group member, for ms milliseconds (a member
 * must keep polling to take part in rebalances; what it is given is
 * dropped) and returns how many partitions it has then. */
int h_member_poll(rd_kafka_t *rk, int ms);

#endif
