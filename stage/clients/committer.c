/*
 * committer.c -- see committer.h.  A mutex and a condition variable hand
 * one job at a time between the stage thread and the committer's: IDLE,
 * QUEUED (handed over), RUNNING, DONE (outcome waiting to be taken).
 * Callbacks of the producer that librdkafka serves inside
 * commit_transaction (its flush polls the producer's queue) run on this
 * thread: the producer has no record in flight by then, so only error
 * events can come, and clients.c's error_cb only logs those of a
 * producer that is not the stage's current one.
 */
#include "clients/committer.h"
#include "clients/txn.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum job_state { IDLE, QUEUED, RUNNING, DONE } job_state;

struct bs_committer {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* any change of state or quit */
    job_state state;
    bool quit;
    rd_kafka_t *rk;
    const rd_kafka_topic_partition_list_t *offsets; /* borrowed */
    rd_kafka_consumer_group_metadata_t *md;
    bs_commit_outcome out;
};

static void *run(void *arg)
{
    bs_committer *c = arg;
    pthread_mutex_lock(&c->lock);
    for (;;) {
        while (c->state != QUEUED && !c->quit)
            pthread_cond_wait(&c->cond, &c->lock);
        if (c->state != QUEUED)
            break; /* quit with nothing handed over */
        c->state = RUNNING;
        pthread_mutex_unlock(&c->lock);
        bs_commit_outcome o = {0};
        o.rc = bs_txn_commit_on(c->rk, c->offsets, c->md, o.err,
                                sizeof(o.err), &o.send_s, &o.commit_s);
        pthread_mutex_lock(&c->lock);
        rd_kafka_consumer_group_metadata_destroy(c->md);
        c->offsets = NULL;
        c->md = NULL;
        c->rk = NULL;
        c->out = o;
        c->state = DONE;
        pthread_cond_broadcast(&c->cond);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

bs_committer *bs_committer_new(char *errstr, size_t errstr_size)
{
    bs_committer *c = calloc(1, sizeof(*c));
    if (!c) {
        snprintf(errstr, errstr_size, "the committer: out of memory");
        return NULL;
    }
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    int e = pthread_create(&c->thread, NULL, run, c);
    if (e) {
        snprintf(errstr, errstr_size, "the committer's thread: %s",
                 strerror(e));
        pthread_cond_destroy(&c->cond);
        pthread_mutex_destroy(&c->lock);
        free(c);
        return NULL;
    }
    return c;
}

void bs_committer_start(bs_committer *c, rd_kafka_t *rk,
                        const rd_kafka_topic_partition_list_t *offsets,
                        rd_kafka_consumer_group_metadata_t *md)
{
    pthread_mutex_lock(&c->lock);
    c->rk = rk;
    c->offsets = offsets;
    c->md = md;
    c->state = QUEUED;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

bool bs_committer_take(bs_committer *c, bool wait, bs_commit_outcome *out)
{
    pthread_mutex_lock(&c->lock);
    while (wait && (c->state == QUEUED || c->state == RUNNING))
        pthread_cond_wait(&c->cond, &c->lock);
    bool done = c->state == DONE;
    if (done) {
        *out = c->out;
        c->state = IDLE;
    }
    pthread_mutex_unlock(&c->lock);
    return done;
}

void bs_committer_destroy(bs_committer *c)
{
    if (!c)
        return;
    bs_commit_outcome o;
    (void)bs_committer_take(c, true, &o);
    pthread_mutex_lock(&c->lock);
    c->quit = true;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    pthread_join(c->thread, NULL);
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->lock);
    free(c);
}
