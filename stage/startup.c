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
 * step made, start-up ends with the error (bs_startup_give_up).
 *
 * Each distinct error text is logged once, its repeats counted and said
 * again at most every BS_ERROR_LOG_REPEAT_S: librdkafka reports a refused
 * connection per client and per reconnect.  librdkafka logs from its own
 * threads, so the table of texts seen has its own lock; the step and the
 * held error are read by the metrics thread (the step atomic, the text
 * under pub_lock).
 */
#include "stage_int.h"
#include "log.h"
#include "util.h"

#include <stdio.h>
#include <string.h>

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

bool bs_startup_gives_up(int err, const char *text, double bad_for_s)
{
    return bs_kafka_error_needs_operator(err, text) &&
           bad_for_s >= BS_START_GIVE_UP_S;
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
    s->start_why_refused = false;
    pthread_mutex_unlock(&s->pub_lock);
}

void bs_startup_kafka_error(bs_stage *s, int err, const char *text)
{
    if (atomic_load(&s->start_step) == BS_START_DONE)
        return;
    bool refused = bs_kafka_error_needs_operator(err, text);
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
    snprintf(errstr, errstr_size, "the brokers refused the stage's login "
             "or TLS handshake for %.0f s (%s); a wrong password or "
             "certificate does not heal by itself: check kafka.sasl.* and "
             "kafka.ssl.*", BS_START_GIVE_UP_S, held);
    return true;
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
