/*
 * test_kafka_secure.c -- the stage on a secured Apache Kafka (one KRaft
 * node from `scripts/kafka start --secure`: KRaft's StandardAuthorizer,
 * nothing allowed without an ACL), as the user `stage` with exactly the
 * ACLs README.md's table lists (h_stage_acls, secure.h) and no more,
 * exactly_once.method=transactions and checkpoint.store=kafka, the topics
 * made by the harness as the super user admin:
 *
 *   1. over SASL_SSL with SCRAM-SHA-512;
 *   2. over SSL with stage's client certificate (mTLS, User:stage by the
 *      certificate's CN);
 *   3. the cluster refuses what it must: a wrong password (SCRAM and
 *      PLAIN), stage's expired certificate, stage's certificate from
 *      another CA; and with sound credentials but no ACL, the topic; one
 *      ACL granted lets stage see it by each means, revoked it does not;
 *   4. the stage with each of those refused credentials: /ready 503
 *      naming the refusal from its first seconds, exit 1 naming it after
 *      BS_START_GIVE_UP_S, nothing committed.
 *
 * Each runs twice on keyed input with duplicates (the second run restores
 * the first one's checkpoints from the Kafka store and reads the rest),
 * then reads everything back as admin at read_committed: every unique key
 * exactly once in the output, every other record in the rejected topic,
 * the group's offsets at the input's end, and the broker denied the stage
 * nothing (its authorizer log).  The ACLs are revoked at the end.
 *
 * Needs BLOOMSTAGE_BIN (ctest sets it), Java, Maven and openssl
 * (scripts/install-deps).  BS_KS_ONLY=PATTERN runs only the matching
 * tests; BS_KS_VERBOSE=1 prints every stage's stderr; BS_KS_STAGE_X="k=v
 * ..." adds -X settings.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "support.h"
#include "timeouts.h" /* BS_START_GIVE_UP_S */

#define NPARTS 3
#define NRECS 20000

/* A fresh environment named name on the secured node: every topic made
 * by admin, the stage reaching the cluster as `stage` by auth, the
 * stage's ACLs granted (h_sec_kenv_new). */
static h_kenv *env_new(const char *name, h_sec_auth auth)
{
    h_kenv_opts o = {.nparts = NPARTS, .rejected = true, .kafka_store = true,
                     .checkpoint_ms = 500, .capacity = 30000};
    return h_sec_kenv_new(h_kgroup_cluster(), name, auth, &o, NULL);
}

/* One run of the stage on transactions until the group has committed the
 * input's first upto records, then SIGTERM; returns how many partitions
 * it restored from the Kafka store. */
static size_t run_until(h_kenv *e, size_t upto)
{
    int64_t end[NPARTS];
    h_stream_ends(e->st, upto, end);
    const char *const xs[] = {"exactly_once.method=transactions", NULL};
    h_proc *p = h_stage_start(e->conf, xs, NULL);
    h_wait_said(p, H_SAID_ASSIGNED, 1, 120000);
    if (!h_said(p, H_SAID_TXN))
        h_stage_fail(p, "the stage did not log '%s'", H_SAID_TXN);
    h_proc *const procs[] = {p, NULL};
    h_wait_committed_tolerant(e->h.bs, e->group, e->in, NPARTS, end, procs,
                              180000);
    h_stage_stop(p);
    size_t restored = h_count_restored(p, e->in);
    h_proc_release(p);
    return restored;
}

static void secured_exactly_once(const char *name, h_sec_auth auth,
                                 const char *how)
{
    char lines[2048];
    h_kenv *e = env_new(name, auth);
    size_t log0 = 0;
    (void)h_sec_denied(h_kgroup_cluster(), 0, &log0, NULL, 0);
    e->st = h_stream_new(NRECS, NPARTS, 0x5ec);
    h_stream_add(e->st, NRECS, 40);
    h_stream_produce(e->st, e->h.bs, e->in, 0, NRECS / 2, NULL);
    run_until(e, NRECS / 2);
    h_stream_produce(e->st, e->h.bs, e->in, NRECS / 2, NRECS, NULL);
    size_t restored = run_until(e, NRECS);
    if (restored != NPARTS)
        fail_msg("%s: the second run restored %zu of %d partitions from %s",
                 how, restored, NPARTS, e->ckt);
    h_kenv_committed_end(e);
    size_t n = 0;
    h_kenv_expect_once(e, &n, how);
    size_t nrej = h_kenv_expect_rejected(e, NULL);
    size_t denied = h_sec_denied(h_kgroup_cluster(), log0, NULL, lines,
                                 sizeof(lines));
    if (denied)
        fail_msg("%s: the broker denied User:stage %zu times:\n%s", how,
                 denied, lines);
    print_message("%s: %zu records, %zu keys once in %s, %zu duplicates in "
                  "%s; the broker denied User:stage nothing\n", how,
                  e->st->n, n, e->out, nrej, e->rej);
    h_acl acls[16];
    size_t nacls = h_stage_acls(acls, 16);
    H_CHECK(h_acls_revoke(h_kgroup_cluster(), e, H_SEC_STAGE_PRINCIPAL, acls,
                          nacls));
    h_kenv_free(e);
}

static void test_scram(void **state)
{
    (void)state;
    secured_exactly_once("ks-scram", H_SEC_SCRAM,
                         "SASL_SSL, SCRAM-SHA-512, transactions");
}

static void test_mtls(void **state)
{
    (void)state;
    secured_exactly_once("ks-mtls", H_SEC_MTLS,
                         "SSL with a client certificate, transactions");
}

/* ---- 3. what the cluster refuses -------------------------------------- */

/* The credentials the cluster must refuse: how the stage authenticates,
 * what is wrong, what the broker's refusal says (h_sec_try_metadata), a
 * name for a configuration file, and what the case is. */
static const struct refused_case {
    h_sec_auth auth;
    h_sec_flaw flaw;
    const char *why, *name, *what;
} refused[] = {
    {H_SEC_SCRAM, H_SEC_WRONG_PASSWORD, "Authentication failed", "bad-scram",
     "SCRAM-SHA-512, a wrong password"},
    {H_SEC_PLAIN, H_SEC_WRONG_PASSWORD, "Authentication failed", "bad-plain",
     "PLAIN, a wrong password"},
    {H_SEC_MTLS, H_SEC_EXPIRED_CERT, "certificate unknown", "bad-expired",
     "mTLS, an expired certificate"},
    {H_SEC_MTLS, H_SEC_OTHER_CA, "certificate unknown", "bad-ca",
     "mTLS, a certificate from another CA"},
};
#define N_REFUSED (sizeof(refused) / sizeof(refused[0]))

/* h_sec_try_metadata must answer want (0: the topic seen, 1: refused with
 * a reason holding `why`); tried for up to 20 s while it answers
 * otherwise (an ACL reaches the broker's authorizer a moment after
 * kafka-acls returns). */
static void expect_metadata(h_sec_auth auth, h_sec_flaw flaw,
                            const char *topic, int want, const char *why,
                            const char *what)
{
    char got[1024] = "";
    int rc = -1;
    for (int64_t end = h_now_ms() + 20000;;) {
        rc = h_sec_try_metadata(h_kgroup_cluster(), auth, flaw, topic, got,
                                sizeof(got));
        if (rc == want && (want == 0 || strstr(got, why)))
            break;
        if (rc < 0 || h_now_ms() > end)
            fail_msg("%s: %s; want %s%s", what,
                     rc < 0    ? h_last_error()
                     : rc == 0 ? "the topic's metadata came"
                               : got,
                     want ? "a refusal saying " : "the topic's metadata",
                     want ? why : "");
        h_nap(500);
    }
    print_message("%s: %s\n", what, rc ? got : "metadata");
}

static void test_refused(void **state)
{
    (void)state;
    h_kenv_opts o = {.nparts = 1, .checkpoint_ms = 1000, .capacity = 1000};
    h_kenv *e = h_kenv_new(h_kgroup_cluster(), "ks-refused", &o);
    for (size_t i = 0; i < N_REFUSED; i++)
        expect_metadata(refused[i].auth, refused[i].flaw, e->in, 1,
                        refused[i].why, refused[i].what);
    static const h_sec_auth sound[] = {H_SEC_SCRAM, H_SEC_PLAIN, H_SEC_MTLS};
    static const char *const name[] = {"SCRAM-SHA-512", "PLAIN", "mTLS"};
    static const h_acl read_in[] = {
        {H_ACL_IN, RD_KAFKA_ACL_OPERATION_READ, "the test's"}};
    for (size_t i = 0; i < 3; i++)
        expect_metadata(sound[i], H_SEC_SOUND, e->in, 1,
                        "TOPIC_AUTHORIZATION_FAILED", name[i]);
    H_CHECK(h_acls_grant(h_kgroup_cluster(), e, H_SEC_STAGE_PRINCIPAL,
                         read_in, 1));
    for (size_t i = 0; i < 3; i++)
        expect_metadata(sound[i], H_SEC_SOUND, e->in, 0, NULL, name[i]);
    H_CHECK(h_acls_revoke(h_kgroup_cluster(), e, H_SEC_STAGE_PRINCIPAL,
                          read_in, 1));
    expect_metadata(H_SEC_SCRAM, H_SEC_SOUND, e->in, 1,
                    "TOPIC_AUTHORIZATION_FAILED", "SCRAM-SHA-512, revoked");
    h_kenv_free(e);
}

/* ---- 4. the stage with credentials the cluster refuses ---------------- */

/* The stage with a wrong password (SCRAM, PLAIN), an expired certificate
 * and one from another CA, all four at once, every ACL granted: from the
 * first seconds /healthz 200 and /ready 503 naming the refusal; then, the
 * refusal lasting BS_START_GIVE_UP_S, exit 1 with a last line naming it;
 * nothing committed for the group. */
static void test_refused_stage(void **state)
{
    (void)state;
    enum { N = N_REFUSED };
    const struct refused_case *cases = refused;
    static const char *const refusals[] = {
        "_AUTHENTICATION", "SASL_AUTHENTICATION_FAILED", "_SSL",
        "SSL alert number", NULL};
    /* One environment (topics, group, ACLs) as a sound SCRAM stage would
     * have it; each case's configuration is that one with its own
     * listener and credentials after it (a later line wins). */
    h_kcluster *c = h_kgroup_cluster();
    h_kenv *e = env_new("ks-bad", H_SEC_SCRAM);
    h_proc *p[N];
    for (size_t i = 0; i < N; i++) {
        char *conf = h_sec_kenv_conf(c, e, cases[i].auth, cases[i].flaw,
                                     cases[i].name);
        const char *const xs[] = {"exactly_once.method=transactions", NULL};
        p[i] = h_stage_start(conf, xs, NULL);
        free(conf);
    }
    double t0 = h_now_s();
    for (size_t i = 0; i < N; i++) {
        char why[600];
        unsigned port = h_stage_metrics_port(p[i], 30000);
        double named = h_stage_start_reason(p[i], port, refusals, 30000, why,
                                            sizeof(why));
        print_message("%s: /ready 503 '%.100s' (%.1f s)\n", cases[i].what,
                      why, named);
    }
    for (size_t i = 0; i < N; i++) {
        int st = 0;
        int left = (int)((BS_START_GIVE_UP_S + 60 - (h_now_s() - t0)) * 1000);
        if (h_process_wait(p[i], left > 0 ? left : 1, &st) != 0)
            h_stage_fail(p[i], "%s: still running %.0f s after it started",
                         cases[i].what, h_now_s() - t0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 1)
            h_stage_fail(p[i], "%s: %s, want exit 1", cases[i].what,
                         h_status_str(st));
        const char *last = strstr(h_process_stderr(p[i]),
                                  "\nbloomstage run: ");
        bool named = false;
        for (size_t k = 0; last && refusals[k]; k++)
            named |= strstr(last, refusals[k]) != NULL;
        if (!named)
            h_stage_fail(p[i], "%s: no last 'bloomstage run: ...' line "
                         "naming the refusal", cases[i].what);
        print_message("%s: exit 1 after %.0f s: %.*s\n", cases[i].what,
                      h_now_s() - t0, (int)strcspn(last + 1, "\n"),
                      last + 1);
        h_proc_release(p[i]);
    }
    int64_t off[NPARTS];
    H_CHECK(h_committed_retry(e->h.bs, e->group, e->in, NPARTS, off, 30000));
    for (int k = 0; k < NPARTS; k++)
        if (off[k] != RD_KAFKA_OFFSET_INVALID)
            fail_msg("offset %" PRId64 " committed for partition %d by "
                     "stages the cluster refused", off[k], k);
    h_acl acls[16];
    size_t nacls = h_stage_acls(acls, 16);
    H_CHECK(h_acls_revoke(c, e, H_SEC_STAGE_PRINCIPAL, acls, nacls));
    h_kenv_free(e);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_teardown(test_scram, h_kfixture_teardown),
    cmocka_unit_test_teardown(test_mtls, h_kfixture_teardown),
    cmocka_unit_test_teardown(test_refused, h_kfixture_teardown),
    cmocka_unit_test_teardown(test_refused_stage, h_kfixture_teardown),
};

int main(void)
{
    h_test_main("test_kafka_secure", "BS_KS_ONLY", "BS_KS_VERBOSE",
                "BS_KS_STAGE_X");
    return cmocka_run_group_tests(tests, h_sec_group_setup,
                                  h_kgroup_teardown);
}
