/*
 * test_startup.c -- start-up's errors on their own (stage/core/startup.c): the
 * verdict (a refused login or TLS handshake, or a refusal by the brokers'
 * authorizer, ends start-up after BS_START_GIVE_UP_S of nothing else; a
 * broker away never does), the refusals' words, what
 * /ready says at each step and which error it names, and the rate limit
 * of the error lines (each distinct text once, its repeats counted).
 *
 * The real-broker end of the verdict (a wrong SASL password) needs a
 * secured broker, which librdkafka 2.0.2's mock cluster cannot be (it
 * answers no SaslHandshake); test_metrics covers a refused certificate
 * end to end, this file the decision for every error code.
 *
 * The stage struct is built by hand (zeroed, as bs_stage_new leaves it
 * before run), with its locks.
 */
#include "kafka/kafka_util.h"
#include "ops/report.h"
#include "core/stage_int.h"
#include "core/startup.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* librdkafka's text of a refused login, as error_cb gets it. */
#define SASL_TEXT                                                            \
    "sasl_ssl://b1:9093/1: SASL authentication error: Authentication "     \
    "failed during authentication due to invalid credentials with SASL "   \
    "mechanism SCRAM-SHA-512 (after 5ms in state AUTH_REQ)"
#define REFUSED_TEXT                                                         \
    "127.0.0.1:9/bootstrap: Connect to ipv4#127.0.0.1:9 failed: "          \
    "Connection refused (after 0ms in state CONNECT)"

static bs_stage *stage_new(void)
{
    bs_stage *s = calloc(1, sizeof(*s));
    assert_non_null(s);
    pthread_mutex_init(&s->pub_lock, NULL);
    pthread_mutex_init(&s->err_lock, NULL);
    s->set.group_id = "g";
    return s;
}

static void stage_free(bs_stage *s)
{
    pthread_mutex_destroy(&s->pub_lock);
    pthread_mutex_destroy(&s->err_lock);
    free(s);
}

static void test_verdict(void **state)
{
    (void)state;
    static const int refused[] = {
        RD_KAFKA_RESP_ERR__AUTHENTICATION,
        RD_KAFKA_RESP_ERR_SASL_AUTHENTICATION_FAILED, RD_KAFKA_RESP_ERR__SSL};
    static const int transient[] = {
        RD_KAFKA_RESP_ERR_NO_ERROR, RD_KAFKA_RESP_ERR__TRANSPORT,
        RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN, RD_KAFKA_RESP_ERR__TIMED_OUT,
        RD_KAFKA_RESP_ERR__RESOLVE};
    /* An ACL missing: no operator's credentials at fault, but start-up
     * given up on after BS_START_GIVE_UP_S all the same. */
    static const int acl[] = {
        RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED,
        RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED,
        RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED};
    const char *text = "Connection refused";
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        assert_true(bs_kafka_error_needs_operator(refused[i], text));
        assert_false(bs_startup_gives_up(refused[i], text, 0));
        assert_false(bs_startup_gives_up(refused[i], text,
                                         BS_START_GIVE_UP_S - 1));
        assert_true(bs_startup_gives_up(refused[i], text, BS_START_GIVE_UP_S));
        assert_true(bs_startup_gives_up(refused[i], text, 1e6));
    }
    for (size_t i = 0; i < sizeof(transient) / sizeof(transient[0]); i++) {
        assert_false(bs_kafka_error_needs_operator(transient[i], text));
        assert_false(bs_startup_gives_up(transient[i], text,
                                         BS_START_GIVE_UP_S));
        assert_false(bs_startup_gives_up(transient[i], text, 1e6));
    }
    for (size_t i = 0; i < sizeof(acl) / sizeof(acl[0]); i++) {
        assert_false(bs_kafka_error_needs_operator(acl[i], text));
        assert_false(bs_startup_gives_up(acl[i], text,
                                         BS_START_GIVE_UP_S - 1));
        assert_true(bs_startup_gives_up(acl[i], text, BS_START_GIVE_UP_S));
    }
    /* The broker refusing the stage's certificate: a TLS alert, which
     * librdkafka 2.0.2 reports as a transport error (seen with an expired
     * client certificate and one from another CA). */
    const char *alert = "ssl://127.0.0.1:9093/bootstrap: Receive failed: "
                        "error:0A000416:SSL routines::sslv3 alert "
                        "certificate unknown: SSL alert number 46";
    assert_true(bs_kafka_error_needs_operator(RD_KAFKA_RESP_ERR__TRANSPORT,
                                              alert));
    assert_true(bs_startup_gives_up(RD_KAFKA_RESP_ERR__TRANSPORT, alert,
                                    BS_START_GIVE_UP_S));
    assert_false(bs_kafka_error_needs_operator(RD_KAFKA_RESP_ERR__TRANSPORT,
                                               NULL));
}

/* /ready's reason at a step: not ready, and why. */
static void expect_why(bs_stage *s, const char *want)
{
    char why[512];
    assert_true(bs_startup_why(s, why, sizeof(why)));
    assert_string_equal(why, want);
    assert_false(bs_stage_ready(s, why, sizeof(why)));
    assert_string_equal(why, want);
}

static void test_why_and_give_up(void **state)
{
    (void)state;
    bs_stage *s = stage_new();
    char err[1024];
    expect_why(s, "starting: connecting to brokers");

    /* A broker away: named, ALL_BROKERS_DOWN saying less; never given up
     * on. */
    bs_startup_kafka_error(s, RD_KAFKA_RESP_ERR__TRANSPORT, REFUSED_TEXT);
    bs_startup_kafka_error(s, RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN,
                           "1/1 brokers are down");
    expect_why(s, "starting: connecting to brokers: _TRANSPORT: "
                  "127.0.0.1:9/bootstrap: Connect to ipv4#127.0.0.1:9 "
                  "failed: Connection refused");
    s->start_bad_since -= 10 * BS_START_GIVE_UP_S;
    assert_false(bs_startup_give_up(s, err, sizeof(err)));

    /* A refused login: shown, and not hidden by the errors that follow it;
     * given up on only after BS_START_GIVE_UP_S. */
    bs_startup_kafka_error(s, RD_KAFKA_RESP_ERR__AUTHENTICATION, SASL_TEXT);
    bs_startup_kafka_error(s, RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN,
                           "1/1 brokers are down");
    bs_startup_kafka_error(s, RD_KAFKA_RESP_ERR__TRANSPORT, REFUSED_TEXT);
    char why[512];
    assert_true(bs_startup_why(s, why, sizeof(why)));
    assert_non_null(strstr(why, "starting: connecting to brokers: "
                                "_AUTHENTICATION: sasl_ssl://b1:9093/1: "
                                "SASL authentication error"));
    assert_null(strstr(why, "(after "));
    assert_false(bs_startup_give_up(s, err, sizeof(err)));
    s->start_bad_since -= BS_START_GIVE_UP_S;
    assert_true(bs_startup_give_up(s, err, sizeof(err)));
    assert_non_null(strstr(err, "_AUTHENTICATION"));
    assert_non_null(strstr(err, "invalid credentials"));
    assert_null(strchr(err, '\n'));

    /* A step made: the clock and the error start again. */
    bs_startup_step(s, BS_START_TOPICS, "out");
    expect_why(s, "starting: checking topic out");
    assert_false(bs_startup_give_up(s, err, sizeof(err)));
    bs_startup_step(s, BS_START_JOINING, NULL);
    assert_true(bs_refused(s, RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED,
                           "Read", "g", "Broker: Group authorization failed"));
    expect_why(s, "starting: waiting for partitions (group g): "
                  "GROUP_AUTHORIZATION_FAILED: Read on Group:g refused");
    assert_false(bs_startup_give_up(s, err, sizeof(err)));
    s->start_bad_since -= BS_START_GIVE_UP_S;
    assert_true(bs_startup_give_up(s, err, sizeof(err)));
    assert_non_null(strstr(err, "authorizer"));
    assert_non_null(strstr(err, "Read on Group:g refused"));

    /* Processing: /ready's own checks; errors no longer held. */
    bs_startup_step(s, BS_START_DONE, NULL);
    assert_false(bs_startup_why(s, why, sizeof(why)));
    bs_startup_kafka_error(s, RD_KAFKA_RESP_ERR__AUTHENTICATION, SASL_TEXT);
    assert_false(bs_startup_give_up(s, err, sizeof(err)));
    assert_false(bs_stage_ready(s, why, sizeof(why)));
    assert_string_equal(why, "no partitions assigned");

    /* A reason longer than the buffer is cut, still a string. */
    bs_startup_step(s, BS_START_CONNECTING, NULL);
    bs_startup_kafka_error(s, RD_KAFKA_RESP_ERR__SSL, SASL_TEXT);
    char small[40];
    assert_true(bs_startup_why(s, small, sizeof(small)));
    assert_int_equal(strlen(small), sizeof(small) - 1);
    stage_free(s);
}

/* The authorizer's refusals in the ACL table's words, kept for /ready
 * while checkpoints fail; other errors are no refusal. */
static void test_refusals(void **state)
{
    (void)state;
    static const struct {
        int err;
        const char *op, *name, *want;
    } cases[] = {
        {RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED, "Write", "out",
         "Write on Topic:out"},
        {RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED, "Read", "g",
         "Read on Group:g"},
        {RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "Write",
         "bloomstage-g-h-slot0", "Write on TransactionalId:bloomstage-g-h-slot0"},
        {RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED, "Write", "out",
         "IdempotentWrite on Cluster:kafka-cluster"},
    };
    char buf[128];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_true(bs_kafka_refused(cases[i].err));
        assert_true(bs_refusal_text(cases[i].err, cases[i].op, cases[i].name,
                                    buf, sizeof(buf)));
        assert_string_equal(buf, cases[i].want);
    }
    strcpy(buf, "untouched");
    assert_false(bs_kafka_refused(RD_KAFKA_RESP_ERR__TRANSPORT));
    assert_false(bs_refusal_text(RD_KAFKA_RESP_ERR__TRANSPORT, "Read", "in",
                                 buf, sizeof(buf)));
    assert_string_equal(buf, "untouched");

    bs_stage *s = stage_new();
    /* The group's Read refused while connecting (librdkafka says it once):
     * it holds the join too. */
    assert_true(bs_consumer_refused(
        s, RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED, NULL,
        "FindCoordinator response error: Group authorization failed."));
    bs_startup_step(s, BS_START_TOPICS, "out");
    expect_why(s, "starting: checking topic out");
    bs_startup_step(s, BS_START_JOINING, NULL);
    expect_why(s, "starting: waiting for partitions (group g): "
                  "GROUP_AUTHORIZATION_FAILED: Read on Group:g refused");
    assert_true(bs_consumer_refused(
        s, RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED, "in", "Broker: "
        "Topic authorization failed"));
    expect_why(s, "starting: waiting for partitions (group g): "
                  "TOPIC_AUTHORIZATION_FAILED: Read on Topic:in refused");
    assert_false(bs_refused(s, RD_KAFKA_RESP_ERR__TRANSPORT, "Read", "in",
                            REFUSED_TEXT));
    /* Running: a refusal (a checkpoint round's) is kept for /ready until
     * a round commits. */
    bs_startup_step(s, BS_START_DONE, NULL);
    assert_string_equal(s->refused_why, "");
    assert_true(bs_refused(s, RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED,
                           "Write", "ckpt", "Broker: Topic authorization "
                           "failed"));
    assert_string_equal(s->refused_why, "TOPIC_AUTHORIZATION_FAILED: Write "
                                        "on Topic:ckpt refused");
    bs_refusal_healed(s);
    assert_string_equal(s->refused_why, "");
    stage_free(s);
}

static void test_log_limit(void **state)
{
    (void)state;
    bs_stage *s = stage_new();
    uint64_t rep = 99;
    /* The same failure from another client, a later attempt: one key. */
    assert_true(bs_error_log_due(s, "librdkafka",
                                 "[thrd:127.0.0.1:9/bootstrap]: "
                                 REFUSED_TEXT, &rep));
    assert_int_equal(rep, 0);
    assert_false(bs_error_log_due(s, "librdkafka",
                                  "[thrd:127.0.0.1:9/bootstrap]: "
                                  "127.0.0.1:9/bootstrap: Connect to "
                                  "ipv4#127.0.0.1:9 failed: Connection "
                                  "refused (after 3ms in state CONNECT, 1 "
                                  "identical error(s) suppressed)", &rep));
    assert_false(bs_error_log_due(s, "librdkafka", REFUSED_TEXT, &rep));
    /* Another text, or the same under another message: logged. */
    assert_true(bs_error_log_due(s, "librdkafka", SASL_TEXT, &rep));
    assert_true(bs_error_log_due(s, "kafka error", REFUSED_TEXT, &rep));
    /* A minute later: again, with the repeats not logged. */
    for (size_t i = 0; i < BS_ERRORS_SEEN; i++)
        s->seen[i].last_log -= BS_ERROR_LOG_REPEAT_S;
    assert_true(bs_error_log_due(s, "librdkafka", REFUSED_TEXT, &rep));
    assert_int_equal(rep, 2);
    assert_false(bs_error_log_due(s, "librdkafka", REFUSED_TEXT, &rep));
    /* More distinct texts than the table holds: each new one is logged. */
    for (int i = 0; i < 3 * BS_ERRORS_SEEN; i++) {
        char t[64];
        snprintf(t, sizeof(t), "b%d/bootstrap: Connection refused", i);
        assert_true(bs_error_log_due(s, "librdkafka", t, &rep));
    }
    stage_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verdict),
        cmocka_unit_test(test_why_and_give_up),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_log_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
