/*
 * startup.c -- how the stage tells its start-up: the step it is at and
 * the error librdkafka reported that holds it, published for /ready until
 * the first partitions are assigned.
 *
 * A broker that is down, a transport error, ALL_BROKERS_DOWN: waited out,
 * /ready saying why.  Credentials or a certificate the brokers refuse
 * (authentication, SSL handshake) are what /ready shows until a step is
 * made, over the transport errors that follow them.  The step and the
 * held error are read by the metrics thread (the step atomic, the text
 * under pub_lock).
 */
#include "stage_int.h"
#include "log.h"

#include <stdio.h>
#include <string.h>

bool bs_kafka_error_needs_operator(int err)
{
    return err == RD_KAFKA_RESP_ERR__AUTHENTICATION ||
           err == RD_KAFKA_RESP_ERR_SASL_AUTHENTICATION_FAILED ||
           err == RD_KAFKA_RESP_ERR__SSL;
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

void bs_startup_step(bs_stage *s, bs_start_step step, const char *topic)
{
    atomic_store(&s->start_topic, topic);
    atomic_store(&s->start_step, (int)step);
    pthread_mutex_lock(&s->pub_lock);
    s->start_why[0] = '\0';
    s->start_why_refused = false;
    pthread_mutex_unlock(&s->pub_lock);
}

void bs_startup_kafka_error(bs_stage *s, int err, const char *text)
{
    if (atomic_load(&s->start_step) == BS_START_DONE)
        return;
    bool refused = bs_kafka_error_needs_operator(err);
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
