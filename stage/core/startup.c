/*
 * startup.c -- how the stage tells its start-up, and what it does with
 * the errors librdkafka reports: the step start-up is at (published for
 * /ready, with the error that holds it, until the first partitions are
 * assigned), the verdict on those errors, and their rate-limited log.
 *
 * A broker that is down, a transport error, ALL_BROKERS_DOWN: waited out,
 * /ready saying why.  Credentials or a certificate the brokers refuse
 * (authentication, SSL handshake): a wrong password does not heal by
 * itself, so after BS_START_GIVE_UP_S of nothing but such errors and no
 * step made, start-up ends with the error (bs_startup_give_up).  An ACL
 * the stage lacks (the brokers' authorizer refusing a request: bs_refused)
 * is held the same way while starting: retried, /ready naming it, a grant
 * within BS_START_GIVE_UP_S lets start-up go on, then it ends; once
 * running, a refused checkpoint round is retried with the rounds'
 * back-off for as long as it lasts (docs/security.md's ACL table says which
 * ACL does which).
 *
 * Each distinct error text is logged once, its repeats counted and said
 * again at most every BS_ERROR_LOG_REPEAT_S: librdkafka reports a refused
 * connection per client and per reconnect.  librdkafka logs from its own
 * threads, so the table of texts seen has its own lock; the step and the
 * held error are read by the metrics thread (the step atomic, the text
 * under pub_lock).
 */
#include "core/startup.h"
#include "core/stage_int.h"
#include "kafka/kafka_util.h"
#include "base/log.h"
#include "base/util.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

bool bs_kafka_error_needs_operator(int err, const char *text)
{
    /* A TLS alert the broker sent during the handshake refuses the
     * stage's certificate (unknown CA, expired, revoked); librdkafka
     * reports it as a transport error ("Receive failed: ... SSL alert
     * number 46"), not as _SSL. */
    bool alert = err == RD_KAFKA_RESP_ERR__TRANSPORT && text &&
                 strstr(text, "SSL alert number");
    return alert || err == RD_KAFKA_RESP_ERR__AUTHENTICATION ||
           err == RD_KAFKA_RESP_ERR_SASL_AUTHENTICATION_FAILED ||
           err == RD_KAFKA_RESP_ERR__SSL;
}

/* What holds start-up until it gives up: a refused login or handshake, or
 * a refusal by the authorizer that bs_refused said. */
static bool holds_startup(int err, const char *text)
{
    return bs_kafka_error_needs_operator(err, text) || bs_kafka_refused(err);
}

bool bs_startup_gives_up(int err, const char *text, double bad_for_s)
{
    return holds_startup(err, text) && bad_for_s >= BS_START_GIVE_UP_S;
}

/* What in librdkafka's text names the failure: the text without its
 * "[thrd:...]: " prefix and its variable " (after Nms in state S...)"
 * suffix; its length into *len. */
static const char *error_core(const char *text, int *len)
{
    if (!strncmp(text, "[thrd:", 6)) {
        const char *e = strstr(text, "]: ");
        if (e)
            text = e + 3;
    }
    const char *after = strstr(text, " (after ");
    *len = after ? (int)(after - text) : (int)strlen(text);
    return text;
}

bool bs_error_log_due(bs_stage *s, const char *msg, const char *text,
                      uint64_t *repeats)
{
    char key[sizeof(s->seen[0].key)];
    int len;
    const char *core = error_core(text, &len);
    snprintf(key, sizeof(key), "%s|%.*s", msg, len, core);
    double now = bs_now();
    bool due = true;
    *repeats = 0;
    pthread_mutex_lock(&s->err_lock);
    bs_error_seen *e = NULL, *oldest = &s->seen[0];
    for (size_t i = 0; i < BS_ERRORS_SEEN && !e; i++) {
        if (!strcmp(s->seen[i].key, key))
            e = &s->seen[i];
        else if (s->seen[i].last_log < oldest->last_log)
            oldest = &s->seen[i];
    }
    if (!e) {
        e = oldest;
        snprintf(e->key, sizeof(e->key), "%s", key);
        e->repeats = 0;
    } else if (now - e->last_log < BS_ERROR_LOG_REPEAT_S) {
        e->repeats++;
        due = false;
    } else {
        *repeats = e->repeats;
        e->repeats = 0;
    }
    if (due)
        e->last_log = now;
    pthread_mutex_unlock(&s->err_lock);
    return due;
}

void bs_log_kafka_error(bs_stage *s, const char *client, int err,
                        const char *text)
{
    uint64_t repeats;
    if (!bs_error_log_due(s, "kafka error", text, &repeats))
        return;
    char q[512];
    bs_log(bs_kafka_error_needs_operator(err, text) ? BS_LOG_ERROR
                                                    : BS_LOG_WARN,
           "kafka error", "client=%s error=%s detail=%s repeats=%llu", client,
           rd_kafka_err2name((rd_kafka_resp_err_t)err),
           bs_log_quote(text, q, sizeof(q)), (unsigned long long)repeats);
}

void bs_startup_step(bs_stage *s, bs_start_step step, const char *topic)
{
    atomic_store(&s->start_topic, topic);
    atomic_store(&s->start_step, (int)step);
    s->start_bad_err = 0;
    pthread_mutex_lock(&s->pub_lock);
    s->start_why[0] = '\0';
    s->refused_why[0] = '\0'; /* a refusal held the step before */
    s->start_why_refused = false;
    pthread_mutex_unlock(&s->pub_lock);
    /* What the consumer was refused before, its group's coordinator
     * looked up as soon as it was made, holds the join. */
    if (step == BS_START_JOINING && s->early_refused_err)
        (void)bs_refused(s, s->early_refused_err, "Read",
                         s->early_refused_name, s->early_refused_detail);
}

void bs_startup_kafka_error(bs_stage *s, int err, const char *text)
{
    if (atomic_load(&s->start_step) == BS_START_DONE)
        return;
    bool refused = holds_startup(err, text);
    if (refused && !s->start_bad_err) {
        s->start_bad_err = err;
        s->start_bad_since = bs_now();
    }
    pthread_mutex_lock(&s->pub_lock);
    /* ALL_BROKERS_DOWN follows the error of each broker, which says
     * more; a refused login or handshake is the reason to show until a
     * step is made. */
    if (refused ||
        (!s->start_why_refused &&
         (err != RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN || !s->start_why[0]))) {
        int len;
        const char *core = error_core(text, &len);
        snprintf(s->start_why, sizeof(s->start_why), "%s: %.*s",
                 rd_kafka_err2name((rd_kafka_resp_err_t)err), len, core);
        s->start_why_refused = refused;
    }
    pthread_mutex_unlock(&s->pub_lock);
}

bool bs_startup_give_up(bs_stage *s, char *errstr, size_t errstr_size)
{
    if (!s->start_bad_err)
        return false;
    char held[sizeof(s->start_why)];
    pthread_mutex_lock(&s->pub_lock);
    snprintf(held, sizeof(held), "%s", s->start_why);
    pthread_mutex_unlock(&s->pub_lock);
    if (!bs_startup_gives_up(s->start_bad_err, held,
                             bs_now() - s->start_bad_since))
        return false;
    if (bs_kafka_refused(s->start_bad_err))
        snprintf(errstr, errstr_size, "the brokers' authorizer refused the "
                 "stage for %.0f s (%s): grant that ACL (docs/security.md, "
                 "\"ACLs the stage's principal needs\") and start it again",
                 BS_START_GIVE_UP_S, held);
    else
        snprintf(errstr, errstr_size, "the brokers refused the stage's "
                 "login or TLS handshake for %.0f s (%s); a wrong password "
                 "or certificate does not heal by itself: check kafka.sasl.* "
                 "and kafka.ssl.*", BS_START_GIVE_UP_S, held);
    return true;
}

bool bs_refused(bs_stage *s, int err, const char *op, const char *name,
                const char *detail)
{
    char what[300], who[200], text[600];
    if (!bs_refusal_text(err, op, name, what, sizeof(what)))
        return false;
    const char *p = bs_kafka_principal(s->cfg, who, sizeof(who));
    snprintf(text, sizeof(text), "%s refused%s%s", what, p ? " to " : "",
             p ? p : "");
    s->refused_err = err;
    pthread_mutex_lock(&s->pub_lock);
    snprintf(s->refused_why, sizeof(s->refused_why), "%s: %.340s",
             rd_kafka_err2name((rd_kafka_resp_err_t)err), text);
    pthread_mutex_unlock(&s->pub_lock);
    bs_startup_kafka_error(s, err, text);
    uint64_t repeats;
    if (bs_error_log_due(s, "not authorized", text, &repeats)) {
        char q1[400], q2[600];
        bs_log(BS_LOG_ERROR, "not authorized", "refused=%s principal=%s "
               "error=%s detail=%s repeats=%llu",
               bs_log_quote(what, q1, sizeof(q1)), p ? p : "unknown",
               rd_kafka_err2name((rd_kafka_resp_err_t)err),
               bs_log_quote(detail ? detail : "", q2, sizeof(q2)),
               (unsigned long long)repeats);
    }
    return true;
}

bool bs_consumer_refused(bs_stage *s, int err, const char *topic,
                         const char *detail)
{
    const char *name = err == RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED
                           ? s->set.group_id
                       : topic ? topic
                               : "one of input.topics";
    if (!bs_refused(s, err, "Read", name, detail))
        return false;
    if (atomic_load(&s->start_step) < BS_START_JOINING) {
        s->early_refused_err = err;
        snprintf(s->early_refused_name, sizeof(s->early_refused_name), "%s",
                 name);
        snprintf(s->early_refused_detail, sizeof(s->early_refused_detail),
                 "%s", detail ? detail : "");
    }
    return true;
}

void bs_refusal_from_log(bs_stage *s, const char *fac, const char *text)
{
    static const char head[] = "Failed to add partition \"";
    const char *t = strstr(text, head);
    if (strcmp(fac, "ADDPARTS") != 0 || !t ||
        !strstr(text, "Topic authorization failed"))
        return;
    t += sizeof(head) - 1;
    pthread_mutex_lock(&s->err_lock);
    snprintf(s->txn_refused_topic, sizeof(s->txn_refused_topic), "%.*s",
             (int)strcspn(t, "\""), t);
    pthread_mutex_unlock(&s->err_lock);
}

void bs_refusals_collect(bs_stage *s)
{
    char topic[sizeof(s->txn_refused_topic)];
    pthread_mutex_lock(&s->err_lock);
    snprintf(topic, sizeof(topic), "%s", s->txn_refused_topic);
    s->txn_refused_topic[0] = '\0';
    pthread_mutex_unlock(&s->err_lock);
    if (topic[0])
        (void)bs_refused(s, RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED,
                         "Write", topic, "the transaction could not add the "
                         "topic's partitions (AddPartitionsToTxn)");
}

void bs_refusal_healed(bs_stage *s)
{
    pthread_mutex_lock(&s->pub_lock);
    s->refused_why[0] = '\0';
    pthread_mutex_unlock(&s->pub_lock);
}

bs_rc bs_startup_refusal_wait(bs_stage *s, char *errstr, size_t errstr_size)
{
    if (bs_startup_give_up(s, errstr, errstr_size))
        return BS_FATAL;
    for (int ms = 0; ms < BS_START_PROBE_MS; ms += 50) {
        if (atomic_load(&s->stop))
            return BS_RETRY;
        usleep(50 * 1000);
    }
    return BS_OK;
}

bool bs_startup_why(bs_stage *s, char *why, size_t why_size)
{
    bs_start_step step = (bs_start_step)atomic_load(&s->start_step);
    if (step == BS_START_DONE)
        return false;
    if (!why || !why_size)
        return true;
    const char *topic = atomic_load(&s->start_topic);
    int n = 0;
    switch (step) {
    case BS_START_CONNECTING:
        n = snprintf(why, why_size, "starting: connecting to brokers");
        break;
    case BS_START_CLIENTS:
        n = snprintf(why, why_size, "starting: checking the checkpoint "
                     "store, setting up the producer");
        break;
    case BS_START_TOPICS:
        n = snprintf(why, why_size, "starting: checking topic %s",
                     topic ? topic : "?");
        break;
    case BS_START_LISTS:
        n = snprintf(why, why_size, "starting: reading live blocklists");
        for (size_t i = 0; i < s->nlists; i++)
            if (s->lists[i].topic && !BS_GET(s->lists[i].caught_up)) {
                n = snprintf(why, why_size, "starting: blocklist %s: reading "
                             "its topic %s to its end", s->lists[i].name,
                             s->lists[i].topic);
                break;
            }
        break;
    default:
        n = snprintf(why, why_size, "starting: waiting for partitions "
                     "(group %s)", s->set.group_id);
        break;
    }
    if (n < 0 || (size_t)n >= why_size)
        return true;
    pthread_mutex_lock(&s->pub_lock);
    if (s->start_why[0])
        snprintf(why + n, why_size - (size_t)n, ": %s", s->start_why);
    pthread_mutex_unlock(&s->pub_lock);
    return true;
}
