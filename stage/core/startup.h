/*
 * startup.h -- start-up's steps and the errors that hold them (startup.c):
 * what /ready says while starting, the verdict on refused logins and the
 * authorizer's refusals, and error lines logged once per text.
 */
#ifndef BLOOMSTAGE_STARTUP_H
#define BLOOMSTAGE_STARTUP_H

#include "core/stage_int.h"

/* Whether a librdkafka error (its code and text) means the brokers refuse
 * the stage's credentials or certificate (authentication, SSL, a TLS alert
 * from the broker): it does not heal by itself. */
bool bs_kafka_error_needs_operator(int err, const char *text);
/* The verdict: give up start-up after bad_for_s seconds of nothing but
 * err (BS_START_GIVE_UP_S, for the errors above and the authorizer's
 * refusals, bs_kafka_refused, only). */
bool bs_startup_gives_up(int err, const char *text, double bad_for_s);
/* Start-up made a step: /ready names it; the error held and the clock of
 * refused logins are reset. */
void bs_startup_step(bs_stage *s, bs_start_step step, const char *topic);
/* An error librdkafka reported (error_cb, a consumer error): shown by
 * /ready while starting; a refused login or a refusal by the authorizer
 * starts the clock. */
void bs_startup_kafka_error(bs_stage *s, int err, const char *text);
/* true, with errstr (one line naming the cause), once the verdict is to
 * give up. */
bool bs_startup_give_up(bs_stage *s, char *errstr, size_t errstr_size);
/* Any thread: true while starting, why (may be NULL) saying at what step
 * and, if one holds it, the error. */
bool bs_startup_why(bs_stage *s, char *why, size_t why_size);
/* Any thread: whether text (under msg) is to be logged now: the first
 * time, then at most every BS_ERROR_LOG_REPEAT_S with the repeats not
 * logged in between. */
bool bs_error_log_due(bs_stage *s, const char *msg, const char *text,
                      uint64_t *repeats);
/* error_cb's line: at most once a BS_ERROR_LOG_REPEAT_S per text; an
 * error for refused logins or handshakes, a warning otherwise. */
void bs_log_kafka_error(bs_stage *s, const char *client, int err,
                        const char *text);
/* The brokers' authorizer refused op (Read, Write) on name (a topic, the
 * group, the transactional id: err says which; bs_refusal_text) to the
 * stage: one error line `msg="not authorized" refused="Write on
 * Topic:NAME" principal=User:USER error=... detail=...` per
 * BS_ERROR_LOG_REPEAT_S (the principal when kafka.sasl.username names it),
 * the refusal kept for /ready, and while starting it holds start-up as a
 * refused login does (bs_startup_kafka_error).  false if err is no
 * refusal. */
bool bs_refused(bs_stage *s, int err, const char *op, const char *name,
                const char *detail);
/* bs_refused for an error of the group consumer: Read on the group, or on
 * topic (an input topic; NULL if the error names none).  One met before
 * start-up subscribes is said again when it does (librdkafka says a
 * FindCoordinator refusal once).  false if err is no refusal. */
bool bs_consumer_refused(bs_stage *s, int err, const char *topic,
                         const char *detail);
/* Any thread: a librdkafka log line (facility ADDPARTS) that may say a
 * transaction could not add a topic's partition, refused by the
 * authorizer: the topic kept for bs_refusals_collect. */
void bs_refusal_from_log(bs_stage *s, const char *fac, const char *text);
/* Stage thread, after a round failed: the refusal kept by
 * bs_refusal_from_log, said (bs_refused: Write on that topic). */
void bs_refusals_collect(bs_stage *s);
/* A round committed: the refusal kept for /ready is forgotten. */
void bs_refusal_healed(bs_stage *s);
/* After a start-up step the brokers refused (bs_refused): BS_OK after a
 * back-off of BS_START_PROBE_MS, to try the step again; BS_RETRY when a
 * stop was requested; BS_FATAL with errstr once nothing but refusals came
 * for BS_START_GIVE_UP_S (bs_startup_give_up). */
bs_rc bs_startup_refusal_wait(bs_stage *s, char *errstr, size_t errstr_size);

#endif
