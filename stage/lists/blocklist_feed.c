/*
 * blocklist_feed.c -- the Kafka side of live blocklists
 * (blocklist.NAME.topic): one assign-only consumer reads every list topic.
 *
 * Start-up (bs_lists_start, before the stage subscribes to its input):
 * each topic must exist and, where the broker answers DescribeConfigs,
 * have cleanup.policy=compact (a deleting topic would lose entries after
 * retention.ms; librdkafka's mock cluster does not implement
 * DescribeConfigs, so there the check is skipped with a warning).  Every
 * partition is then read from its beginning to the end it had when the
 * read began, each record applied to the lists of its topic
 * (bs_blocklist_apply), like a Kafka Streams global table.  Then
 * (bs_lists_follow, called by the loop between records, with no record
 * held) the consumer is polled without waiting and what arrived is applied
 * in order: a record processed after that sees the change.
 *
 * What a record is checked against is the list as it is when the record is
 * processed (docs/configuration.md, "Live blocklists").  Bad list records
 * are skipped, counted per list and reason, and logged (at most one line a
 * second a list); a list that cannot grow (no memory) stops the stage (FATAL):
 * going on would silently not block what the topic says to block.
 *
 * Who owns what: the stage owns the feed (s->feed) and destroys it with
 * bs_lists_destroy; the feed borrows s->lists.
 */
#include "lists/blocklist_feed.h"
#include "core/stage_int.h"
#include "kafka/client_defaults.h"
#include "kafka/fetch_wake.h"
#include "kafka/kafka_util.h"
#include "base/log.h"
#include "base/util.h"
#include "core/state.h"
#include "core/startup.h"
#include "clients/clients.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct feed_part {
    const char *topic; /* a list's topic (borrowed from the configuration) */
    int32_t partition;
    int64_t next; /* the next offset to apply */
    int64_t end;  /* the end when the start-up read began */
    bool done;    /* read to `end` */
} feed_part;

struct bs_list_feed {
    rd_kafka_t *rk;
    bs_fetch_wake *wake; /* keeps the small read-ahead fetching */
    feed_part *parts;
    size_t nparts;
    double last_lag;
    double *last_skip_log; /* per list: when a skip was last logged */
};

/* 1: cleanup.policy is compact; 0: it is not (policy says what it is);
 * 2: the broker does not answer DescribeConfigs (librdkafka's mock);
 * -1: no answer, errstr says why and *refused is the brokers' refusal
 * (TOPIC_AUTHORIZATION_FAILED: no DescribeConfigs ACL) or 0. */
static int topic_policy(rd_kafka_t *rk, const char *topic, int32_t broker,
                        char *policy, size_t psize, int *refused,
                        char *errstr, size_t errstr_size)
{
    int rc = bs_topic_config(rk, topic, broker, "cleanup.policy", policy,
                             psize, BS_TIMEOUT_BROKER_MS, refused, errstr,
                             errstr_size);
    /* "compact" only: "compact,delete" also deletes whole segments after
     * retention.ms, entries included. */
    return rc == 1 ? !strcmp(policy, "compact") : rc;
}

static bool first_with_topic(const bs_stage *s, size_t i)
{
    for (size_t j = 0; j < i; j++)
        if (s->lists[j].topic && !strcmp(s->lists[j].topic, s->lists[i].topic))
            return false;
    return true;
}

/* Whether a refusal by the brokers' authorizer (err; 0: none) of op on
 * the list topic holds start-up: said (bs_refused), and waited on as
 * start-up holds refusals (bs_startup_refusal_wait).  BS_OK: ask again;
 * BS_RETRY: no refusal, or a stop requested (*stop); BS_FATAL with errstr
 * once it lasted BS_START_GIVE_UP_S. */
static bs_rc list_refused(bs_stage *s, int err, const char *op,
                          const char *topic, const char *why, bool *stop,
                          char *errstr, size_t errstr_size)
{
    *stop = false;
    if (!err || !bs_refused(s, err, op, topic, why))
        return BS_RETRY;
    bs_rc w = bs_startup_refusal_wait(s, errstr, errstr_size);
    *stop = w == BS_RETRY;
    return w;
}

/* Every partition of the list topic of s->lists[li]: exists, compacted,
 * its ends, into f->parts.  A Read or DescribeConfigs the brokers refuse
 * holds start-up as other refusals do (list_refused).  BS_FATAL with
 * errstr; BS_RETRY: a stop was requested meanwhile. */
static bs_rc add_topic(bs_stage *s, size_t li, char *errstr,
                       size_t errstr_size)
{
    bs_list_feed *f = s->feed;
    const bs_blocklist *bl = &s->lists[li];
    char why[BS_ERRSTR_SIZE], policy[128];
    int32_t leader = -1;
    int n, pol, refused;
    bool stop;
    bs_rc w;
    do {
        why[0] = '\0';
        n = bs_topic_lookup(f->rk, bl->topic, BS_TIMEOUT_BROKER_MS, &leader,
                            why, sizeof(why));
        /* The metadata of every topic leaves out those the stage may not
         * Describe (Read brings Describe): asked by name, the brokers say
         * which. */
        refused = n <= 0 ? bs_topic_refused(s->cfg, f->rk, bl->topic,
                                            BS_TIMEOUT_BROKER_MS)
                         : 0;
        if (refused)
            snprintf(why, sizeof(why), "topic %s: %s", bl->topic,
                     rd_kafka_err2str((rd_kafka_resp_err_t)refused));
    } while ((w = list_refused(s, refused, "Read", bl->topic, why, &stop,
                               errstr, errstr_size)) == BS_OK);
    if (w == BS_FATAL || stop)
        return stop ? BS_RETRY : BS_FATAL;
    if (n <= 0) {
        snprintf(errstr, errstr_size, "blocklist '%s': %s (blocklist.%s."
                 "topic=%s must exist, with cleanup.policy=compact, before "
                 "the stage starts)", bl->name, why, bl->name, bl->topic);
        return BS_FATAL;
    }
    while ((pol = topic_policy(f->rk, bl->topic, leader, policy,
                               sizeof(policy), &refused, why,
                               sizeof(why))) < 0 &&
           (w = list_refused(s, refused, "DescribeConfigs", bl->topic, why,
                             &stop, errstr, errstr_size)) == BS_OK)
        ;
    if (pol < 0 && (w == BS_FATAL || stop))
        return stop ? BS_RETRY : BS_FATAL;
    if (pol < 0) {
        snprintf(errstr, errstr_size, "blocklist '%s': %s", bl->name, why);
        return BS_FATAL;
    }
    if (pol == 0) {
        snprintf(errstr, errstr_size, "blocklist '%s': topic %s has "
                 "cleanup.policy=%s: a list topic must be compacted "
                 "(cleanup.policy=compact), or entries vanish with old "
                 "segments", bl->name, bl->topic, policy);
        return BS_FATAL;
    }
    if (pol == 2)
        bs_log(BS_LOG_WARN, "blocklist topic's cleanup.policy not checked: "
               "the broker does not answer DescribeConfigs", "name=%s "
               "topic=%s", bl->name, bl->topic);
    feed_part *np = realloc(f->parts, (f->nparts + (size_t)n) * sizeof(*np));
    if (!np) {
        snprintf(errstr, errstr_size, "out of memory");
        return BS_FATAL;
    }
    f->parts = np;
    for (int p = 0; p < n; p++) {
        int64_t lo = -1, hi = -1;
        rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(
            f->rk, bl->topic, p, &lo, &hi, BS_TIMEOUT_BROKER_MS);
        if (err) {
            snprintf(errstr, errstr_size, "blocklist '%s': end offsets of %s "
                     "[%d]: %s", bl->name, bl->topic, p,
                     rd_kafka_err2str(err));
            return BS_FATAL;
        }
        feed_part *fp = &f->parts[f->nparts++];
        fp->topic = bl->topic;
        fp->partition = p;
        fp->next = lo;
        fp->end = hi;
        fp->done = hi <= lo;
    }
    return BS_OK;
}

static feed_part *part_of(bs_list_feed *f, const char *topic, int32_t p)
{
    for (size_t i = 0; i < f->nparts; i++)
        if (f->parts[i].partition == p && !strcmp(f->parts[i].topic, topic))
            return &f->parts[i];
    return NULL;
}

/* One list record, applied to every list of its topic. */
static void apply(bs_stage *s, const rd_kafka_message_t *m)
{
    bs_list_feed *f = s->feed;
    const char *topic = rd_kafka_topic_name(m->rkt);
    feed_part *fp = part_of(f, topic, m->partition);
    if (fp) {
        if (m->offset < fp->next)
            return; /* seen already (a fetch retried after a seek) */
        fp->next = m->offset + 1;
        if (fp->next >= fp->end)
            fp->done = true;
    }
    for (size_t i = 0; i < s->nlists; i++) {
        bs_blocklist *bl = &s->lists[i];
        if (!bl->topic || strcmp(bl->topic, topic) != 0)
            continue;
        bs_list_change c = bs_blocklist_apply(bl, m->key, m->key_len,
                                              m->payload, m->len);
        if (c == BS_LIST_NOMEM) {
            bs_stage_fatal(s, "blocklist '%s': out of memory applying %s "
                           "[%d] offset %lld", bl->name, topic,
                           (int)m->partition, (long long)m->offset);
            return;
        }
        const char *bad = bs_list_bad_name(c);
        double now = bs_now();
        if (bad && now - f->last_skip_log[i] >= 1.0) {
            f->last_skip_log[i] = now;
            uint64_t total = 0;
            for (int k = 0; k < BS_LIST_NBAD; k++)
                total += BS_GET(bl->skipped[k]);
            bs_log(BS_LOG_WARN, "blocklist entry skipped", "name=%s "
                   "topic=%s partition=%d offset=%lld reason=%s "
                   "key_bytes=%zu skipped_total=%llu", bl->name, topic,
                   (int)m->partition, (long long)m->offset, bad, m->key_len,
                   (unsigned long long)total);
        }
    }
}

/* The lag of each list: its topic's cached ends (from the fetches, no
 * request) minus what was applied. */
static void update_lag(bs_stage *s)
{
    bs_list_feed *f = s->feed;
    for (size_t i = 0; i < s->nlists; i++) {
        bs_blocklist *bl = &s->lists[i];
        if (!bl->topic)
            continue;
        int64_t lag = 0;
        bool known = true;
        for (size_t j = 0; j < f->nparts; j++) {
            feed_part *fp = &f->parts[j];
            if (strcmp(fp->topic, bl->topic) != 0)
                continue;
            int64_t lo = -1, hi = -1;
            if (rd_kafka_get_watermark_offsets(f->rk, fp->topic,
                                               fp->partition, &lo, &hi) ||
                hi < 0) {
                hi = fp->end; /* nothing fetched yet: the start-up end */
            }
            if (hi < 0) {
                known = false;
                continue;
            }
            if (hi > fp->next)
                lag += hi - fp->next;
        }
        atomic_store(&bl->lag, known ? lag : -1);
    }
}

static bool all_done(const bs_list_feed *f)
{
    for (size_t i = 0; i < f->nparts; i++)
        if (!f->parts[i].done)
            return false;
    return true;
}

/* The feed's consumer: assigned, never subscribed, commits nothing (its
 * group id is never joined).  A fetch that waits for data bounds how late
 * an update is seen when the topic is quiet. */
static bs_rc feed_consumer_new(bs_stage *s, bs_list_feed *f, char *errstr,
                               size_t errstr_size)
{
    static const char *const defaults[] = {
        "client.id", "bloomstage-lists", "fetch.wait.max.ms", "100",
        /* The group consumer's small read-ahead (client_defaults.h), kept
         * fetching by a waker of its own (fetch_wake.h): a list of
         * millions is read at full speed without queuing it all. */
        BS_CONSUMER_TUNING, NULL};
    char group[300];
    snprintf(group, sizeof(group), "%s.lists", s->set.group_id);
    const char *forced[] = {"enable.auto.commit", "false",
                            "enable.auto.offset.store", "false",
                            "enable.partition.eof", "true",
                            "auto.offset.reset", "earliest",
                            "group.id", group, NULL};
    rd_kafka_conf_t *conf = bs_client_conf(s, "consumer", defaults, forced,
                                           errstr, errstr_size);
    if (!conf)
        return BS_FATAL;
    bs_kafka_conf_no_auto_create(conf);
    char err[BS_ERRSTR_SIZE];
    f->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
    if (!f->rk) {
        rd_kafka_conf_destroy(conf);
        snprintf(errstr, errstr_size, "cannot create the blocklist consumer:"
                 " %s", err);
        return BS_FATAL;
    }
    rd_kafka_poll_set_consumer(f->rk);
    return BS_OK;
}

/* Every partition of the lists' topics (add_topic found them) assigned
 * from its beginning, and the waker started. */
static bs_rc feed_assign(bs_list_feed *f, char *errstr, size_t errstr_size)
{
    rd_kafka_topic_partition_list_t *a =
        rd_kafka_topic_partition_list_new((int)f->nparts);
    for (size_t i = 0; i < f->nparts; i++)
        rd_kafka_topic_partition_list_add(a, f->parts[i].topic,
                                          f->parts[i].partition)
            ->offset = RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_resp_err_t e = rd_kafka_assign(f->rk, a);
    rd_kafka_topic_partition_list_destroy(a);
    if (e) {
        snprintf(errstr, errstr_size, "cannot assign the blocklist topics: "
                 "%s", rd_kafka_err2str(e));
        return BS_FATAL;
    }
    f->wake = bs_fetch_wake_new(f->rk, NULL, errstr, errstr_size);
    return f->wake ? BS_OK : BS_FATAL;
}

/* Each partition read to the end it had when this began (*applied: the
 * records applied).  BS_FATAL when nothing came for BS_TIMEOUT_LISTS_MS;
 * BS_OK also when a stop or FATAL ended it early (the caller looks). */
static bs_rc feed_catch_up(bs_stage *s, bs_list_feed *f, uint64_t *applied,
                           char *errstr, size_t errstr_size)
{
    double progress = bs_now();
    uint64_t records = 0; /* polled, events too */
    while (!all_done(f) && !atomic_load(&s->stop) &&
           s->state != BS_STAGE_FATAL) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(f->rk, BS_POLL_MS);
        double now = bs_now();
        if (!m || ++records % BS_BOOKKEEPING_EVERY == 0)
            bs_fetch_wake_check(f->wake);
        if (!m) {
            if ((now - progress) * 1000 > BS_TIMEOUT_LISTS_MS) {
                snprintf(errstr, errstr_size, "blocklist topics: no progress "
                         "reading them to their end for %d s",
                         BS_TIMEOUT_LISTS_MS / 1000);
                return BS_FATAL;
            }
            continue;
        }
        progress = now;
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            /* The end of what may be read: the high watermark, or the
             * last stable offset below an open transaction (the consumer
             * reads committed records only). */
            feed_part *fp = part_of(f, rd_kafka_topic_name(m->rkt),
                                    m->partition);
            if (fp)
                fp->done = true;
        } else if (m->err) {
            char q[512];
            bs_log(BS_LOG_WARN, "blocklist consume error", "error=%s "
                   "detail=%s", rd_kafka_err2name(m->err),
                   bs_log_quote(rd_kafka_message_errstr(m), q, sizeof(q)));
        } else {
            (*applied)++;
            bs_fetch_wake_note(f->wake, m->key_len + m->len);
            apply(s, m);
        }
        rd_kafka_message_destroy(m);
    }
    return BS_OK;
}

/* Each live list marked caught up, with a line saying what it holds. */
static void feed_caught_up(bs_stage *s, uint64_t applied, double seconds)
{
    for (size_t i = 0; i < s->nlists; i++) {
        bs_blocklist *bl = &s->lists[i];
        if (!bl->topic)
            continue;
        BS_SET(bl->caught_up, 1);
        uint64_t skipped = 0;
        for (int k = 0; k < BS_LIST_NBAD; k++)
            skipped += BS_GET(bl->skipped[k]);
        bs_log(BS_LOG_INFO, "blocklist topic read to its end", "name=%s "
               "topic=%s entries=%llu base_entries=%llu records=%llu "
               "skipped=%llu seconds=%.3f", bl->name, bl->topic,
               (unsigned long long)BS_GET(bl->entries),
               (unsigned long long)bl->base_entries,
               (unsigned long long)applied, (unsigned long long)skipped,
               seconds);
    }
}

bs_rc bs_lists_start(bs_stage *s, char *errstr, size_t errstr_size)
{
    bool any = false;
    for (size_t i = 0; i < s->nlists; i++)
        any |= s->lists[i].topic != NULL;
    if (!any)
        return BS_OK;
    s->feed = calloc(1, sizeof(*s->feed));
    if (!s->feed ||
        !(s->feed->last_skip_log = calloc(s->nlists, sizeof(double)))) {
        snprintf(errstr, errstr_size, "out of memory");
        return BS_FATAL;
    }
    bs_list_feed *f = s->feed;
    bs_rc r = feed_consumer_new(s, f, errstr, errstr_size);
    for (size_t i = 0; r == BS_OK && i < s->nlists; i++)
        if (s->lists[i].topic && first_with_topic(s, i))
            r = add_topic(s, i, errstr, errstr_size);
    if (r == BS_OK)
        r = feed_assign(f, errstr, errstr_size);
    double t0 = bs_now();
    uint64_t applied = 0;
    if (r == BS_OK)
        r = feed_catch_up(s, f, &applied, errstr, errstr_size);
    if (r != BS_OK)
        return r;
    if (s->state == BS_STAGE_FATAL) {
        snprintf(errstr, errstr_size, "%s", s->err);
        return BS_FATAL;
    }
    if (atomic_load(&s->stop))
        return BS_OK; /* nothing will be consumed: the loop sees stop */
    update_lag(s);
    feed_caught_up(s, applied, bs_now() - t0);
    return BS_OK;
}

void bs_lists_follow(bs_stage *s)
{
    bs_list_feed *f = s->feed;
    if (!f)
        return;
    for (int i = 0; i < BS_LISTS_FOLLOW_MAX && s->state != BS_STAGE_FATAL;
         i++) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(f->rk, 0);
        if (!m)
            break;
        if (!m->err) {
            bs_fetch_wake_note(f->wake, m->key_len + m->len);
            apply(s, m);
        } else if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            char q[512];
            bs_log(BS_LOG_WARN, "blocklist consume error", "error=%s "
                   "detail=%s", rd_kafka_err2name(m->err),
                   bs_log_quote(rd_kafka_message_errstr(m), q, sizeof(q)));
        }
        rd_kafka_message_destroy(m);
    }
    bs_fetch_wake_check(f->wake);
    double now = bs_now();
    if (now - f->last_lag >= 1.0) {
        f->last_lag = now;
        update_lag(s);
    }
}

void bs_lists_destroy(bs_stage *s)
{
    bs_list_feed *f = s->feed;
    if (!f)
        return;
    bs_fetch_wake_destroy(f->wake); /* it uses the consumer */
    if (f->rk) {
        rd_kafka_consumer_close(f->rk);
        rd_kafka_destroy(f->rk);
    }
    free(f->parts);
    free(f->last_skip_log);
    free(f);
    s->feed = NULL;
}
