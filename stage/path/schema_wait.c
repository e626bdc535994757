/*
 * schema_wait.c -- see schema_wait.h.  A waiting partition is paused in
 * the consumer and in state SCHEMA_WAIT: records of it already fetched
 * are passed over (record_path.c processes ACTIVE partitions only), and
 * resuming seeks it back to the record that waited, so each is processed
 * once, in order.  Its records before that one are processed and are
 * checkpointed and committed as usual: a wait holds back one partition's
 * progress, never the stage's rounds.
 */
#include "path/schema_wait.h"
#include "base/log.h"
#include "base/timeouts.h"
#include "base/util.h"
#include "core/state.h"
#include "keys/framed.h"

#include <stdio.h>

/* Pauses (or resumes and seeks to `at`, when at >= 0) one partition. */
static void set_paused(bs_stage *s, const part *p, bool pause, int64_t at)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, p->topic, p->partition)->offset = at;
    if (pause) {
        rd_kafka_pause_partitions(s->consumer, l);
    } else {
        rd_kafka_resume_partitions(s->consumer, l);
        if (at >= 0) {
            rd_kafka_error_t *e = rd_kafka_seek_partitions(
                s->consumer, l, BS_TIMEOUT_BROKER_MS);
            if (e || l->elems[0].err) {
                /* The next restore (a rollback, a rebalance) seeks it. */
                bs_stage_fatal(s, "topic %s [%d]: cannot seek back to offset "
                               "%lld after waiting for a schema: %s",
                               p->topic, (int)p->partition, (long long)at,
                               e ? rd_kafka_error_string(e)
                                 : rd_kafka_err2str(l->elems[0].err));
                if (e)
                    rd_kafka_error_destroy(e);
            }
        }
    }
    rd_kafka_topic_partition_list_destroy(l);
}

static void publish_why(bs_stage *s, const char *why)
{
    pthread_mutex_lock(&s->pub_lock);
    if (why && s->nwaiting)
        snprintf(s->wait_why, sizeof(s->wait_why), "the schema registry "
                 "gives no answer about schema id %d (%zu partition%s "
                 "wait%s): %.280s", (int)s->wait_schema, s->nwaiting,
                 s->nwaiting == 1 ? "" : "s", s->nwaiting == 1 ? "s" : "",
                 why);
    else
        s->wait_why[0] = '\0';
    pthread_mutex_unlock(&s->pub_lock);
}

void bs_schema_wait(bs_stage *s, part *p, int64_t offset, int32_t schema_id,
                    const char *why)
{
    bs_part_set_state(s, p, BS_PART_SCHEMA_WAIT);
    p->wait_at = offset;
    set_paused(s, p, true, -1);
    if (s->nwaiting++ == 0) {
        s->wait_schema = schema_id;
        s->wait_backoff = BS_SCHEMA_WAIT_MIN_S;
        s->wait_retry_at = bs_now() + s->wait_backoff;
    }
    BS_SET(s->ctr.schema_waiting, s->nwaiting);
    char q[512];
    bs_log(BS_LOG_WARN, "partition waits for the schema registry", "topic=%s "
           "partition=%d offset=%lld schema_id=%d error=%s", p->topic,
           (int)p->partition, (long long)offset, (int)schema_id,
           bs_log_quote(why, q, sizeof(q)));
    publish_why(s, why);
}

/* Every waiting partition resumed at its record; those a restore took
 * out of the wait resumed where the restore put them.  Counts what
 * still waits. */
static void resume(bs_stage *s, bool answered)
{
    size_t n = 0;
    for (size_t i = 0; i < s->nparts; i++) {
        part *p = &s->parts[i];
        if (p->wait_at < 0)
            continue;
        if (p->state == BS_PART_SCHEMA_WAIT && !answered) {
            n++;
            continue;
        }
        int64_t at = -1;
        if (p->state == BS_PART_SCHEMA_WAIT) {
            /* In BACKOFF every partition is paused, and the round's
             * recovery resumes all but the waiting ones: they resume
             * here, after it. */
            if (!answered || s->state == BS_STAGE_BACKOFF) {
                n++;
                continue;
            }
            at = p->wait_at;
            bs_part_set_state(s, p, BS_PART_ACTIVE);
            bs_log(BS_LOG_INFO, "partition resumes: the schema registry "
                   "answers", "topic=%s partition=%d offset=%lld",
                   p->topic, (int)p->partition, (long long)at);
        }
        p->wait_at = -1;
        /* One a restore took out of the wait was seeked by it; in BACKOFF
         * the recovery resumes it with the others. */
        if (s->state != BS_STAGE_BACKOFF)
            set_paused(s, p, false, at);
    }
    s->nwaiting = n;
    BS_SET(s->ctr.schema_waiting, n);
}

void bs_schema_wait_check(bs_stage *s)
{
    if (!s->nwaiting)
        return;
    double now = bs_now();
    if (now < s->wait_retry_at) {
        resume(s, false); /* restores, revocations */
        if (!s->nwaiting)
            publish_why(s, NULL);
        return;
    }
    char why[512];
    bool answered = bs_framed_probe(s->framed, s->wait_schema, why,
                                    sizeof(why)) != BS_FRAMED_UNREACHABLE;
    resume(s, answered);
    if (!s->nwaiting) {
        publish_why(s, NULL);
        return;
    }
    s->wait_backoff *= 2;
    if (s->wait_backoff > BS_SCHEMA_WAIT_MAX_S)
        s->wait_backoff = BS_SCHEMA_WAIT_MAX_S;
    s->wait_retry_at = now + s->wait_backoff;
    publish_why(s, why);
}
