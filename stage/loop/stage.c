/*
 * stage.c -- the stage's loop: consume -> filter -> produce, with
 * checkpoint-then-commit, as a state machine.  One thread runs it all;
 * librdkafka calls back into this thread from rd_kafka_consumer_poll,
 * rd_kafka_poll, rd_kafka_flush and rd_kafka_consumer_close only.
 *
 * The states, their diagram, the function that makes each move and the
 * numbered invariants are in DESIGN.md (States, Invariants); state.c holds
 * the table of legal moves and the checks.  A partition's records are
 * processed only while it is ACTIVE.
 */
#include "loop/stage.h"
#include "core/stage_int.h"
#include "kafka/kafka_util.h"
#include "base/log.h"
#include "keys/record_key.h"
#include "base/util.h"
#include "core/state.h"
#include "core/startup.h"
#include "clients/clients.h"
#include "lists/blocklist_feed.h"
#include "core/partitions.h"
#include "core/poison.h"
#include "loop/rebalance.h"
#include "loop/round.h"
#include "loop/overlap.h"
#include "loop/rollback.h"
#include "path/record_path.h"
#include "path/schema_wait.h"
#include "keys/framed.h"
#include "ops/publish.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Key parts read with a schema (avro:, protobuf:) in spec. */
static size_t framed_parts(const bs_config_keyspec *spec)
{
    size_t n = 0;
    for (size_t i = 0; i < spec->nparts; i++)
        n += bs_config_keypart_framed(spec->parts[i].kind);
    return n;
}

/* The Schema Registry's client, when some key spec reads a schema: its
 * cache holds cache.max.schemas compiled schemas for each such part. */
static int framed_new(bs_stage *s, char *errstr, size_t errstr_size)
{
    size_t n = framed_parts(s->set.dedup_key);
    for (size_t i = 0; i < s->nlists; i++)
        n += framed_parts(s->lists[i].key);
    if (!n)
        return 0;
    bs_registry_conf rc = {
        .urls = s->set.registry_urls,
        .user_info = s->set.registry_user_info,
        .ca_location = s->set.registry_ca,
        .cert_location = s->set.registry_cert,
        .key_location = s->set.registry_key,
        .timeout_ms = (long)s->set.registry_timeout_ms,
        .max_schemas = (size_t)s->set.registry_max_schemas,
        .negative_ttl_ms = BS_REGISTRY_NEGATIVE_TTL_MS,
    };
    char err[BS_ERRSTR_SIZE];
    s->framed = bs_framed_new(&rc, n * rc.max_schemas, err, sizeof(err));
    if (!s->framed) {
        snprintf(errstr, errstr_size, "schema.registry: %s", err);
        return -1;
    }
    return 0;
}

bs_stage *bs_stage_new(const bs_config *cfg, char *errstr, size_t errstr_size)
{
    bs_stage *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(errstr, errstr_size, "out of memory");
        return NULL;
    }
    s->cfg = cfg;
    pthread_mutex_init(&s->pub_lock, NULL);
    pthread_mutex_init(&s->err_lock, NULL);
    if (bs_settings_from_config(cfg, &s->set, errstr, errstr_size) != 0)
        goto fail;
    bf_scalable_params_default(&s->fparams);
    s->fparams.initial_capacity = s->set.dedup_capacity;
    s->fparams.fpr = s->set.dedup_fpr;
    s->fparams.growth = s->set.dedup_growth;
    s->fparams.tightening = s->set.dedup_tightening;
    s->fparams.max_bytes = s->set.dedup_max_bytes;
    s->dedup.sp = s->fparams;
    s->dedup.window_ms = s->set.window_ms;
    s->dedup.generations = (uint32_t)s->set.window_generations;

    /* Blocklists before joining the group: a broken one stops start-up
     * before anything is consumed. */
    if (bs_blocklists_load(&s->set, &s->lists, &s->nlists, errstr,
                           errstr_size) != 0)
        goto fail;
    size_t nl = s->nlists ? s->nlists : 1;
    s->list_drops = calloc(nl, sizeof(bs_counter));
    s->list_shares_hash = calloc(nl, sizeof(bool));
    s->list_at = calloc(nl, sizeof(size_t));
    size_t nh = 0; /* hashes a prepared record holds for every list */
    for (size_t i = 0; s->list_at && i < s->nlists; i++) {
        s->list_at[i] = nh;
        nh += s->lists[i].domain ? BS_BLOCKLIST_MAX_LOOKUPS : 1;
    }
    for (int i = 0; i < 2; i++) {
        s->prep[i].list_n = calloc(nl, sizeof(unsigned));
        s->prep[i].list_h = calloc(nh ? nh : 1, sizeof(bf_hash));
    }
    if (!s->list_drops || !s->list_shares_hash || !s->list_at ||
        !s->prep[0].list_n || !s->prep[0].list_h || !s->prep[1].list_n ||
        !s->prep[1].list_h) {
        snprintf(errstr, errstr_size, "out of memory");
        goto fail;
    }
    if (framed_new(s, errstr, errstr_size) != 0)
        goto fail;
    for (size_t i = 0; i < s->nlists; i++)
        s->list_shares_hash[i] =
            s->lists[i].seed == s->fparams.seed && !s->lists[i].domain &&
            s->lists[i].normalize == s->set.dedup_normalize &&
            bs_keyspec_equal(s->lists[i].key, s->set.dedup_key);
    for (size_t i = 0; i < s->nlists; i++) {
        bf_info in;
        char hb[32];
        bf_filter_info(s->lists[i].filter, &in);
        bs_log(BS_LOG_INFO, "blocklist loaded", "name=%s entries=%llu "
               "kind=%s memory=\"%s\" source=%s", s->lists[i].name,
               (unsigned long long)BS_GET(s->lists[i].entries), bf_kind_name(in.kind),
               bs_human_bytes(in.bytes, hb, sizeof(hb)),
               s->lists[i].topic ? (s->lists[i].from_list ? "list+topic"
                                                          : "topic")
               : s->lists[i].from_list ? "list" : "filter");
    }
    return s;
fail:
    bs_stage_destroy(s);
    return NULL;
}

/* A topic the stage produces to must exist before anything is consumed
 * (a production cluster does not create topics on demand): said now, with
 * its key, rather than as deliveries that fail and roll back for ever.
 * The brokers refusing it (no Write ACL, which brings Describe) is retried
 * as start-up holds refusals (bs_startup_refusal_wait).  Its partition
 * count; 0 when a stop was requested meanwhile; -1 with errstr. */
static int produced_topic(bs_stage *s, const char *key, const char *topic,
                          char *errstr, size_t errstr_size)
{
    for (;;) {
        int err = 0;
        int n = bs_topic_partitions(s->producer, topic, BS_TIMEOUT_BROKER_MS,
                                    &err, errstr, errstr_size);
        if (n > 0)
            return n;
        if (bs_refused(s, err, "Write", topic, errstr)) {
            bs_rc rc = bs_startup_refusal_wait(s, errstr, errstr_size);
            if (rc == BS_OK)
                continue;
            return rc == BS_RETRY ? 0 : -1;
        }
        size_t l = strlen(errstr);
        snprintf(errstr + l, errstr_size - l, " (%s=%s must exist before "
                 "the stage starts)", key, topic);
        return -1;
    }
}

/* Waits for a broker to answer, the clients' errors served meanwhile
 * (what /ready says).  BS_OK; BS_RETRY when a stop was requested first;
 * BS_FATAL with errstr when the brokers refused the stage's credentials
 * or certificate for BS_START_GIVE_UP_S (startup.c). */
static bs_rc connect_wait(bs_stage *s, char *errstr, size_t errstr_size)
{
    for (;;) {
        double t0 = bs_now();
        if (bs_clients_probe(s, BS_START_PROBE_MS) == BS_OK)
            return BS_OK;
        if (atomic_load(&s->stop))
            return BS_RETRY;
        if (bs_startup_give_up(s, errstr, errstr_size))
            return BS_FATAL;
        double left = BS_START_PROBE_MS / 1000.0 - (bs_now() - t0);
        if (left > 0)
            usleep((useconds_t)(left * 1e6));
    }
}

/* Set-up that needs the broker, each step published for /ready
 * (startup.c): the clients, the first connection (waited for), the store
 * and the producer, the topics produced to (exactly_once also replays
 * the output's partitions), the live lists, the subscription.  BS_FATAL
 * with errstr; BS_RETRY: a stop was requested before a broker answered. */
static bs_rc start(bs_stage *s, char *errstr, size_t errstr_size)
{
    /* The consumer's rebalance callback is rebalance.c's, which sits
     * above the clients: wired from here, the top. */
    if (bs_clients_new(s, bs_rebalance_cb, errstr, errstr_size) != BS_OK)
        return BS_FATAL;
    bs_rc rc = connect_wait(s, errstr, errstr_size);
    if (rc != BS_OK)
        return rc;
    bs_startup_step(s, BS_START_CLIENTS, NULL);
    rc = bs_clients_start(s, errstr, errstr_size);
    if (rc != BS_OK)
        return atomic_load(&s->stop) ? BS_RETRY : BS_FATAL;
    bs_startup_step(s, BS_START_TOPICS, s->set.output_topic);
    s->out_parts = produced_topic(s, "output.topic", s->set.output_topic,
                                  errstr, errstr_size);
    if (s->out_parts <= 0)
        return s->out_parts == 0 ? BS_RETRY : BS_FATAL;
    if (s->set.rejected_topic) {
        bs_startup_step(s, BS_START_TOPICS, s->set.rejected_topic);
        int n = produced_topic(s, "rejected.topic", s->set.rejected_topic,
                               errstr, errstr_size);
        if (n <= 0)
            return n == 0 ? BS_RETRY : BS_FATAL;
    }
    /* Live blocklists read to their end before any input is consumed. */
    bs_startup_step(s, BS_START_LISTS, NULL);
    rc = bs_lists_start(s, errstr, errstr_size);
    if (rc != BS_OK)
        return rc;
    const bs_topic_list *in = &s->set.input_topics;
    rd_kafka_topic_partition_list_t *sub =
        rd_kafka_topic_partition_list_new((int)in->n);
    char names[1024] = "";
    size_t len = 0;
    for (size_t i = 0; i < in->n; i++) {
        rd_kafka_topic_partition_list_add(sub, in->names[i],
                                          RD_KAFKA_PARTITION_UA);
        if (len < sizeof(names))
            len += (size_t)snprintf(names + len, sizeof(names) - len, "%s%s",
                                    i ? "," : "", in->names[i]);
    }
    rd_kafka_resp_err_t err = rd_kafka_subscribe(s->consumer, sub);
    rd_kafka_topic_partition_list_destroy(sub);
    s->subscribed = err == RD_KAFKA_RESP_ERR_NO_ERROR;
    if (err) {
        snprintf(errstr, errstr_size, "cannot subscribe to input.topics: %s",
                 rd_kafka_err2str(err));
        return BS_FATAL;
    }
    bs_startup_step(s, BS_START_JOINING, NULL);
    char q[400];
    bs_log(BS_LOG_INFO, "started", "input=%s output=%s group=%s "
           "checkpoints=%s guarantee=%s malloc=%s",
           names, s->set.output_topic, s->set.group_id,
           bs_log_quote(bs_store_describe(s->store), q, sizeof(q)),
           bs_exactly_once(s) ? "exactly_once" : "at_least_once",
           bs_allocator());
    return BS_OK;
}

/* Bookkeeping between records: deliveries served, liveness and gauges
 * published, the stats line, and the round a trigger or a retry asks
 * for.  In RUNNING or BACKOFF, with no record held. */
static void tick(bs_stage *s)
{
    rd_kafka_poll(s->producer, 0);
    if (s->inflight)
        (void)bs_round_settle(s, false);
    else if (s->spare.rk)
        rd_kafka_poll(s->spare.rk, 0); /* idle: its events are served here */
    bs_fetch_wake_check(s->fwake);
    bs_lists_follow(s);
    bs_schema_wait_check(s);
    if (atomic_load(&s->start_step) != BS_START_DONE) {
        char e[1024];
        if (s->nparts)
            bs_startup_step(s, BS_START_DONE, NULL);
        else if (bs_startup_give_up(s, e, sizeof(e)))
            bs_stage_fatal(s, "%s", e);
    }
    double now = bs_now();
    atomic_store(&s->last_poll_ms, (int64_t)(now * 1000));
    if (now - s->last_publish >= 1.0)
        bs_publish(s);
    bs_report(s, now);
    if (s->state == BS_STAGE_BACKOFF) {
        if (now >= s->retry_at)
            bs_round_from_loop(s, "retry");
    } else if (s->dr_failed ||
               (s->set.checkpoint_records && s->since_ckpt >= s->set.checkpoint_records) ||
               ((now - s->last_ckpt) * 1000 >=
                    (double)s->set.checkpoint_interval_ms &&
                (s->since_ckpt || bs_parts_commit_behind(s)))) {
        bs_round_from_loop(s, s->dr_failed ? "delivery-failure" : "trigger");
    }
}

/* DRAINING: final rounds (retried while they fail, as long as nothing
 * else is wrong), then leave the group; the revoke that follows finds
 * nothing new to write.  A rollback in a failed round rewinds partitions:
 * their next owner processes those records again. */
static void drain(bs_stage *s)
{
    bs_log_status(NULL);
    bs_log(BS_LOG_INFO, "draining", NULL);
    for (int attempt = 0; attempt < BS_DRAIN_ATTEMPTS; attempt++)
        if (bs_round(s, NULL, "shutdown") == BS_OK ||
            s->state == BS_STAGE_FATAL)
            break;
    bs_consumer_close(s);
    rd_kafka_flush(s->producer, BS_TIMEOUT_FINAL_FLUSH_MS);
    bs_stage_stats st;
    bs_stage_stats_get(s, &st);
    bs_log(BS_LOG_INFO, "stopped", "records_in=%llu records_out=%llu "
           "duplicates=%llu blocked=%llu missing_key=%llu commits=%llu",
           (unsigned long long)st.records_in,
           (unsigned long long)st.records_out,
           (unsigned long long)st.dropped_duplicate,
           (unsigned long long)st.dropped_blocklist,
           (unsigned long long)st.missing_key, (unsigned long long)st.commits);
}

int bs_stage_run(bs_stage *s, char *errstr, size_t errstr_size)
{
    if (s->state != BS_STAGE_NEW) {
        snprintf(errstr, errstr_size, "%s", s->state == BS_STAGE_FATAL
                                                ? s->err
                                                : "the stage has run already");
        return -1;
    }
    bs_rc rc = start(s, errstr, errstr_size);
    if (rc == BS_RETRY) { /* stopped before a broker answered */
        bs_log(BS_LOG_INFO, "stopped before a broker answered", NULL);
        bs_stage_set_state(s, BS_STAGE_STOPPED);
        return 0;
    }
    if (rc != BS_OK) {
        char q[1100];
        bs_log(BS_LOG_ERROR, "cannot start", "error=%s",
               bs_log_quote(errstr, q, sizeof(q)));
        bs_stage_fatal(s, "%s", errstr);
        return -1;
    }
    bs_stage_set_state(s, BS_STAGE_RUNNING);
    s->last_ckpt = s->last_stats = bs_now();
    /* One record per poll: librdkafka 2.0.2's batch consumption can skip
     * offsets around pause/resume (fixed in 2.1.0), and this stage pauses.
     * A record is processed one poll after it came (record_path.c): its
     * filter blocks are fetched from memory meanwhile.  The bookkeeping
     * runs every BS_BOOKKEEPING_EVERY records, when the poll comes back
     * empty, and at least every BS_BOOKKEEPING_MAX_MS while records trickle
     * in (one clock read a record: a slow steady input would otherwise
     * wait 64 records for its liveness, its checkpoint timer and the live
     * blocklists' updates), with no record held: per record it would cost
     * as much as the work. */
    unsigned n = 0;
    double next_tick = 0;
    while (!atomic_load(&s->stop) && s->state != BS_STAGE_FATAL) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(s->consumer,
                                                       BS_POLL_MS);
        if (m) {
            if (!m->err) {
                bs_fetch_wake_note(s->fwake, m->key_len + m->len);
                bs_record_hold(s, m);
            } else if (m->err == RD_KAFKA_RESP_ERR__FATAL) {
                /* With the main queue forwarded to the consumer's, a
                 * fatal error comes here rather than to error_cb: e.g. a
                 * static member fenced by another with its
                 * group.instance.id.  Going on would process records the
                 * group has given to someone else. */
                char fe[512];
                rd_kafka_resp_err_t orig =
                    rd_kafka_fatal_error(s->consumer, fe, sizeof(fe));
                bs_stage_fatal(s, "consumer fatal error: %s: %s",
                               rd_kafka_err2name(orig), fe);
                rd_kafka_message_destroy(m);
            } else {
                /* The group's or an input topic's Read refused: the
                 * refusal line, and what /ready names while no partition
                 * came (start-up holds it: bs_refused). */
                if (!bs_consumer_refused(s, m->err,
                                         m->rkt ? rd_kafka_topic_name(m->rkt)
                                                : NULL,
                                         rd_kafka_message_errstr(m)) &&
                    m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                    bs_startup_kafka_error(s, m->err,
                                           rd_kafka_message_errstr(m));
                    char eq[512];
                    bs_log(BS_LOG_WARN, "consume error", "error=%s "
                           "detail=%s", rd_kafka_err2name(m->err),
                           bs_log_quote(rd_kafka_message_errstr(m), eq,
                                        sizeof(eq)));
                }
                rd_kafka_message_destroy(m);
            }
            if (++n % BS_BOOKKEEPING_EVERY != 0 && bs_now() < next_tick)
                continue;
        }
        /* (In BACKOFF a held record is left unprocessed; the resume seeks
         * back to the first record not processed, so it comes again.) */
        bs_record_release(s);
        tick(s);
        next_tick = bs_now() + BS_BOOKKEEPING_MAX_MS / 1000.0;
    }
    bs_record_release(s); /* processed unless FATAL: then only destroyed */
    if (s->state != BS_STAGE_FATAL) {
        bs_stage_set_state(s, BS_STAGE_DRAINING);
        drain(s);
    }
    if (s->state == BS_STAGE_FATAL) {
        snprintf(errstr, errstr_size, "%s", s->err);
        char fq[1100];
        bs_log(BS_LOG_ERROR, "stopping on a fatal error, committing nothing "
               "more", "error=%s", bs_log_quote(s->err, fq, sizeof(fq)));
        bs_consumer_close(s);
        return -1;
    }
    bs_stage_set_state(s, BS_STAGE_STOPPED);
    return 0;
}

void bs_stage_stop(bs_stage *s) { atomic_store(&s->stop, true); }

void bs_stage_destroy(bs_stage *s)
{
    if (!s)
        return;
    if (s->held)
        rd_kafka_message_destroy(s->held);
    bs_lists_destroy(s);
    bs_clients_destroy(s);
    for (size_t i = 0; i < s->nparts; i++)
        bs_part_free(&s->parts[i]);
    free(s->parts);
    bs_poison_free(s);
    bs_blocklists_free(s->lists, s->nlists);
    bs_framed_destroy(s->framed);
    free((void *)s->list_drops);
    free(s->list_shares_hash);
    free(s->list_at);
    for (int i = 0; i < 2; i++) {
        free(s->prep[i].list_n);
        free(s->prep[i].list_h);
    }
    free(s->pub);
    pthread_mutex_destroy(&s->pub_lock);
    pthread_mutex_destroy(&s->err_lock);
    free(s);
}
