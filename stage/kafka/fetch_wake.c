/*
 * fetch_wake.c -- wakes a librdkafka 2.0.2 consumer's broker threads when
 * its small read-ahead runs low (why: fetch_wake.h).
 *
 * The poller counts what it consumed and, at a check, signals the helper
 * thread when it has consumed half the read-ahead since the last wake-up
 * and the consumer queue is down to a quarter of queued.min.messages.  The
 * helper sends the wake-up: one ListOffsets request per leader of the
 * assigned partitions, which it waits for, so there is never more than one
 * wake-up in flight.  The helper owns nothing but its mutex, condition and
 * flags; the poller owns the counts.
 */
#include "kafka/fetch_wake.h"
#include "base/timeouts.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

struct bs_fetch_wake {
    rd_kafka_t *consumer;       /* borrowed */
    rd_kafka_queue_t *queue;    /* the consumer queue, for its length */
    _Atomic uint64_t *wakes;    /* borrowed, may be NULL */
    uint64_t half_records;      /* queued.min.messages / 2 */
    uint64_t half_bytes;        /* queued.max.messages.kbytes * 512 */
    uint64_t low_records;       /* queued.min.messages / 4 */
    /* The poller's: consumed since the last wake-up. */
    uint64_t records, bytes;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool pending, stop;         /* under lock */
};

static void *helper(void *arg)
{
    bs_fetch_wake *w = arg;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (!w->pending && !w->stop)
            pthread_cond_wait(&w->cond, &w->lock);
        if (w->stop)
            break;
        w->pending = false;
        pthread_mutex_unlock(&w->lock);
        rd_kafka_topic_partition_list_t *parts = NULL;
        if (rd_kafka_assignment(w->consumer, &parts) == 0 && parts) {
            for (int i = 0; i < parts->cnt; i++)
                parts->elems[i].offset = RD_KAFKA_OFFSET_END; /* latest */
            /* Errors do not matter: the request was queued, and that is
             * what woke the broker thread. */
            if (parts->cnt > 0) {
                (void)rd_kafka_offsets_for_times(w->consumer, parts,
                                                 BS_TIMEOUT_WAKE_MS);
                if (w->wakes)
                    atomic_fetch_add_explicit(w->wakes, 1,
                                              memory_order_relaxed);
            }
            rd_kafka_topic_partition_list_destroy(parts);
        }
        pthread_mutex_lock(&w->lock);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

static bool conf_u64(const rd_kafka_conf_t *conf, const char *name,
                     uint64_t *out)
{
    char buf[64];
    size_t size = sizeof(buf);
    if (rd_kafka_conf_get(conf, name, buf, &size) != RD_KAFKA_CONF_OK)
        return false;
    char *end;
    unsigned long long v = strtoull(buf, &end, 10);
    if (end == buf || *end)
        return false;
    *out = v;
    return true;
}

bs_fetch_wake *bs_fetch_wake_new(rd_kafka_t *consumer, _Atomic uint64_t *wakes,
                                 char *errstr, size_t errstr_size)
{
    uint64_t min_msgs, max_kbytes;
    const rd_kafka_conf_t *conf = rd_kafka_conf(consumer);
    if (!conf_u64(conf, "queued.min.messages", &min_msgs) ||
        !conf_u64(conf, "queued.max.messages.kbytes", &max_kbytes)) {
        snprintf(errstr, errstr_size, "cannot read the consumer's "
                 "queued.min.messages and queued.max.messages.kbytes");
        return NULL;
    }
    bs_fetch_wake *w = calloc(1, sizeof(*w));
    if (!w) {
        snprintf(errstr, errstr_size, "out of memory");
        return NULL;
    }
    w->consumer = consumer;
    w->wakes = wakes;
    w->half_records = min_msgs / 2 ? min_msgs / 2 : 1;
    w->half_bytes = max_kbytes ? max_kbytes * 512 : 1;
    w->low_records = min_msgs / 4;
    w->queue = rd_kafka_queue_get_consumer(consumer);
    if (!w->queue) {
        snprintf(errstr, errstr_size, "the client has no consumer queue");
        free(w);
        return NULL;
    }
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    int e = pthread_create(&w->thread, NULL, helper, w);
    if (e) {
        snprintf(errstr, errstr_size, "cannot start the fetch wake-up "
                 "thread (error %d)", e);
        pthread_cond_destroy(&w->cond);
        pthread_mutex_destroy(&w->lock);
        rd_kafka_queue_destroy(w->queue);
        free(w);
        return NULL;
    }
    return w;
}

void bs_fetch_wake_note(bs_fetch_wake *w, size_t len)
{
    w->records++;
    w->bytes += len;
}

void bs_fetch_wake_check(bs_fetch_wake *w)
{
    if (w->records < w->half_records && w->bytes < w->half_bytes)
        return;
    if ((uint64_t)rd_kafka_queue_length(w->queue) > w->low_records)
        return;
    w->records = w->bytes = 0;
    pthread_mutex_lock(&w->lock);
    w->pending = true; /* one wake-up in flight at most: merged if busy */
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

void bs_fetch_wake_destroy(bs_fetch_wake *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->stop = true;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    rd_kafka_queue_destroy(w->queue);
    free(w);
}
