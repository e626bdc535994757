/*
 * test_kafka_secure.c -- the stage on a secured Apache Kafka (one KRaft
 * node from `scripts/kafka start --secure`: KRaft's StandardAuthorizer,
 * nothing allowed without an ACL), as the user `stage` with exactly the
 * ACLs docs/security.md's table lists (h_stage_acls, secure.h) and no more,
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
 *      BS_START_GIVE_UP_S, nothing committed (run beside 5, whose waits
 *      are as long);
 *   5. each row of docs/security.md's ACL table this stage needs left out in
 *      turn, each case on its own topics and group, side by side: the
 *      refusal named in an error line and by /ready within 60 s, exit 1
 *      or retries as the table's last column says, nothing committed
 *      past what was forwarded (or, "goes on", everything forwarded
 *      without it); then granted, every key once;
 *   6. a debug-level run searched for the stage's password: found 0 times
 *      in every output, and found in its configuration file.
 *
 * 1 and 2 each run twice on keyed input with duplicates (the second run
 * restores the first one's checkpoints from the Kafka store and reads the
 * rest), then read everything back as admin at read_committed: every unique key
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
#include "base/timeouts.h" /* BS_START_GIVE_UP_S */

#define NPARTS 3
#define NRECS 20000

/* A fresh environment named name on the secured node: every topic made
 * by admin, the stage reaching the cluster as `stage` by auth
 * (h_sec_kenv_new), the ACLs h_stage_acls_for(meets) granted (meets
 * NULL: the stage's; {NULL}: none). */
static h_kenv *env_make(const char *name, h_sec_auth auth,
                        const char *const *meets)
{
    h_kenv_opts o = {.nparts = NPARTS, .rejected = true, .kafka_store = true,
                     .checkpoint_ms = 500, .capacity = 30000};
    return h_sec_kenv_new(h_kgroup_cluster(), name, auth, &o, meets);
}

/* env_make with the stage's ACLs granted. */
static h_kenv *env_new(const char *name, h_sec_auth auth)
{
    return env_make(name, auth, NULL);
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
    h_acl acls[32];
    size_t nacls = h_stage_acls(acls, 32);
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
        {H_ACL_IN, RD_KAFKA_ACL_OPERATION_READ, "the test's",
         H_WITHOUT_EXITS}};
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
 * and one from another CA, all four at once, every ACL granted (run
 * beside test_acl_missing's second run, whose waits are as long). */
typedef struct refused_run {
    h_kenv *e;
    h_proc *p[N_REFUSED];
    double t0;
} refused_run;

/* librdkafka's words for the refusals. */
static const char *const refusals[] = {"_AUTHENTICATION",
                                       "SASL_AUTHENTICATION_FAILED", "_SSL",
                                       "SSL alert number", NULL};

static void refused_start(refused_run *r)
{
    /* One environment (topics, group, ACLs) as a sound SCRAM stage would
     * have it; each case's configuration is that one with its own
     * listener and credentials after it (a later line wins). */
    h_kcluster *c = h_kgroup_cluster();
    r->e = env_new("ks-bad", H_SEC_SCRAM);
    for (size_t i = 0; i < N_REFUSED; i++) {
        char *conf = h_sec_kenv_conf(c, r->e, refused[i].auth,
                                     refused[i].flaw, refused[i].name);
        const char *const xs[] = {"exactly_once.method=transactions", NULL};
        r->p[i] = h_stage_start(conf, xs, NULL);
        free(conf);
    }
    r->t0 = h_now_s();
}

/* From the first seconds /healthz 200 and /ready 503 naming the refusal. */
static void refused_ready(refused_run *r)
{
    for (size_t i = 0; i < N_REFUSED; i++) {
        char why[600];
        unsigned port = h_stage_metrics_port(r->p[i], 30000);
        double named = h_stage_start_reason(r->p[i], port, refusals, 30000,
                                            why, sizeof(why));
        print_message("%s: /ready 503 '%.100s' (%.1f s)\n", refused[i].what,
                      why, named);
    }
}

/* Then, the refusal lasting BS_START_GIVE_UP_S, exit 1 with a last line
 * naming it; nothing committed for the group. */
static void refused_ended(refused_run *r)
{
    for (size_t i = 0; i < N_REFUSED; i++) {
        int st = 0;
        int left = (int)((BS_START_GIVE_UP_S + 60 - (h_now_s() - r->t0)) *
                         1000);
        if (h_process_wait(r->p[i], left > 0 ? left : 1, &st) != 0)
            h_stage_fail(r->p[i], "%s: still running %.0f s after it "
                         "started", refused[i].what, h_now_s() - r->t0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 1)
            h_stage_fail(r->p[i], "%s: %s, want exit 1", refused[i].what,
                         h_status_str(st));
        const char *last = strstr(h_process_stderr(r->p[i]),
                                  "\nbloomstage run: ");
        bool named = false;
        for (size_t k = 0; last && refusals[k]; k++)
            named |= strstr(last, refusals[k]) != NULL;
        if (!named)
            h_stage_fail(r->p[i], "%s: no last 'bloomstage run: ...' line "
                         "naming the refusal", refused[i].what);
        print_message("%s: exit 1 after %.0f s: %.*s\n", refused[i].what,
                      h_now_s() - r->t0, (int)strcspn(last + 1, "\n"),
                      last + 1);
        h_proc_release(r->p[i]);
    }
    int64_t off[NPARTS];
    H_CHECK(h_committed_retry(r->e->h.bs, r->e->group, r->e->in, NPARTS, off,
                              30000));
    for (int k = 0; k < NPARTS; k++)
        if (off[k] != RD_KAFKA_OFFSET_INVALID)
            fail_msg("offset %" PRId64 " committed for partition %d by "
                     "stages the cluster refused", off[k], k);
    h_acl acls[32];
    size_t nacls = h_stage_acls(acls, 32);
    H_CHECK(h_acls_revoke(h_kgroup_cluster(), r->e, H_SEC_STAGE_PRINCIPAL,
                          acls, nacls));
}

/* ---- 5. each ACL of the table left out ------------------------------- */

#define ACL_NRECS 3000
#define ACL_MAX 24 /* cases: the table's stage rows, and one row again */

/* A stage whose rows test_acl_missing leaves out: what it runs, the
 * docs/security.md's conditions it meets, its -X settings, its store. */
typedef struct acl_kind {
    const char *what;
    const char *const *meets;
    const char *const *xs;
    bool kafka_store; /* else the directory store */
    bool blocklist;   /* live blocklist x on NAME-lst */
} acl_kind;

static const char *const TXN_X[] = {"exactly_once.method=transactions",
                                    NULL};
static const char *const REPLAY_X[] = {"exactly_once.method=replay", NULL};

/* Each row is left out on the first of these that needs it. */
static const acl_kind kinds[] = {
    {"transactions", H_MEETS_TXN, TXN_X, true, false},
    {"the output-tail replay", H_MEETS_REPLAY, REPLAY_X, true, false},
    {"a live blocklist", H_MEETS_LISTS, TXN_X, false, true},
};
#define N_KINDS (sizeof(kinds) / sizeof(kinds[0]))

/* One row of the table left out of one stage: its kind, its environment,
 * the stage's process, and the refusal's words ("Write on Topic:NAME", as
 * the stage says it).  crash: the second run is preceded by one that
 * stops at crash point after-checkpoint-write of its first round with
 * records (output written, the checkpoint not valid yet: the round before
 * wrote none), so the next one must read the output's tail back. */
typedef struct acl_case {
    const acl_kind *kind;
    h_kenv *e;
    h_acl left;
    bool crash;
    h_proc *p;
    unsigned port;
    double t0, ready_s, log_s;
    char refusal[256], ready[600], line[1024];
    int64_t half[NPARTS];
} acl_case;

static h_proc *acl_stage_start(acl_case *k)
{
    k->p = h_stage_start(k->e->conf, k->kind->xs, NULL);
    k->t0 = h_now_s();
    k->port = 0;
    return k->p;
}

/* The first line of p's log holding every one of needles, into buf; false
 * if none does. */
static bool log_line(h_proc *p, const char *const *needles, char *buf,
                     size_t size)
{
    for (const char *l = h_process_stderr(p); l && *l;) {
        size_t n = strcspn(l, "\n");
        bool all = true;
        for (size_t i = 0; needles[i] && all; i++) {
            const char *f = strstr(l, needles[i]);
            all = f && f < l + n;
        }
        if (all) {
            snprintf(buf, size, "%.*s", (int)n, l);
            return true;
        }
        l += n + (l[n] == '\n');
    }
    return false;
}

/* Every case's stage, refused, must within 60 s of its start log an error
 * line naming the refusal (operation, resource, principal) and answer
 * /ready 503 naming it. */
static void acl_wait_refused(acl_case *k, size_t n)
{
    for (size_t left = n; left;) {
        left = 0;
        for (size_t i = 0; i < n; i++) {
            acl_case *c = &k[i];
            if ((c->log_s && c->ready_s) ||
                c->left.without == H_WITHOUT_GOES_ON)
                continue;
            double t = h_now_s() - c->t0;
            if (t > 60)
                h_stage_fail(c->p, "%s left out: after 60 s, %s", c->refusal,
                             !c->log_s ? "no error line naming it"
                                       : "/ready has not named it");
            char res[300];
            snprintf(res, sizeof(res), "refused=\"%s", c->refusal);
            const char *const needles[] = {"level=error", res,
                                           "principal=" H_SEC_STAGE_PRINCIPAL,
                                           NULL};
            if (!c->log_s && log_line(c->p, needles, c->line, sizeof(c->line)))
                c->log_s = t;
            int st = 0;
            if (!c->port)
                c->port = h_stage_metrics_port(c->p, 30000);
            if (!c->ready_s && h_process_peek(c->p, &st) == 1) {
                h_http_resp r;
                char err[200];
                if (h_http_request(c->port, "GET", "/ready", &r, err,
                                   sizeof(err)) == 0) {
                    if (r.status == 503 && strstr(r.body, c->refusal)) {
                        snprintf(c->ready, sizeof(c->ready), "%.*s",
                                 (int)strcspn(r.body, "\n"), r.body);
                        c->ready_s = t;
                    }
                    h_http_resp_free(&r);
                }
            } else if (!c->ready_s)
                h_stage_fail(c->p, "%s left out: the stage ended (%s) before "
                             "/ready named it", c->refusal, h_status_str(st));
            left += !(c->log_s && c->ready_s);
        }
        if (left)
            h_nap(250);
    }
}

/* Nothing committed past what was forwarded: the group's offsets are
 * still the first run's, and, with transactions, the output at
 * read_committed holds the first half's keys once and nothing of the
 * second half (the replay's output also holds what was delivered past
 * the last checkpoint, which the restart after the grant must recognise:
 * the check after it counts every key). */
static void acl_expect_held(acl_case *k, size_t half)
{
    int64_t off[NPARTS];
    H_CHECK(h_committed_retry(k->e->h.bs, k->e->group, k->e->in, NPARTS, off,
                              30000));
    for (int p = 0; p < NPARTS; p++)
        if (off[p] != k->half[p])
            fail_msg("%s left out: partition %d committed at %" PRId64
                     ", want %" PRId64 " (the first run's)", k->refusal, p,
                     off[p], k->half[p]);
    if (k->kind->xs != TXN_X)
        return;
    size_t nout = 0;
    h_read_out_committed(k->e->st, k->e->h.bs, k->e->out, k->e->in, &nout);
    unsigned *c = h_count_copies(k->e->st, k->e->in, half, NULL);
    h_expect_once(k->e->st, c, k->e->in, k->e->out, half, k->refusal);
}

/* The cases: every row of kinds[k]'s for each k, on the first kind that
 * needs it, and the checkpoint topic's Write again on the replay's (the
 * Kafka store's own producer without transactions; the transactional one
 * writes checkpoints in the transaction); each with its environment, the
 * first half of its input produced, and the ACLs of its kind into all[]
 * (the row left out also into left[]).  Returns how many. */
static size_t acl_cases(acl_case *k, h_acl_for *all, size_t *nall,
                        h_acl_for *left)
{
    size_t n = 0, half = ACL_NRECS / 2;
    *nall = 0;
    for (size_t ki = 0; ki < N_KINDS; ki++) {
        h_acl rows[32];
        size_t nrows = h_stage_acls_for(kinds[ki].meets, rows, 32);
        for (size_t r = 0; r < nrows; r++) {
            bool again = kinds[ki].xs == REPLAY_X &&
                         rows[r].on == H_ACL_CKPT &&
                         rows[r].op == RD_KAFKA_ACL_OPERATION_WRITE;
            bool seen = false;
            for (size_t i = 0; i < n && !seen; i++)
                seen = h_acl_same(&k[i].left, &rows[r]);
            if (rows[r].without == H_WITHOUT_UNTRIED)
                fail_msg("docs/security.md's ACL table: the row '%s' "
                         "applies to the stage with %s, so its 'without "
                         "it' cell must say what the stage does, not '-'",
                         rows[r].why, kinds[ki].what);
            if (seen && !again)
                continue;
            if (n == ACL_MAX)
                fail_msg("more than %d cases", ACL_MAX);
            char name[32];
            snprintf(name, sizeof(name), "ks-noacl%zu", n);
            static const char *const none[] = {NULL};
            h_kenv_opts o = {.nparts = NPARTS, .rejected = true,
                             .kafka_store = kinds[ki].kafka_store,
                             .ckdir = !kinds[ki].kafka_store,
                             .blocklist = kinds[ki].blocklist,
                             .checkpoint_ms = 500, .capacity = 30000};
            acl_case *c = &k[n];
            c->kind = &kinds[ki];
            c->e = h_sec_kenv_new(h_kgroup_cluster(), name, H_SEC_SCRAM, &o,
                                  none);
            c->left = rows[r];
            c->crash = rows[r].on == H_ACL_OUT &&
                       rows[r].op == RD_KAFKA_ACL_OPERATION_READ;
            h_acl_refusal(c->e, &rows[r], c->refusal, sizeof(c->refusal));
            for (size_t j = 0; j < nrows; j++)
                all[(*nall)++] = (h_acl_for){c->e, rows[j]};
            left[n] = (h_acl_for){c->e, rows[r]};
            c->e->st = h_stream_new(ACL_NRECS, NPARTS, 0xac1 + n);
            h_stream_add(c->e->st, ACL_NRECS, 40);
            h_stream_produce(c->e->st, c->e->h.bs, c->e->in, 0, half, NULL);
            h_stream_ends(c->e->st, half, c->half);
            n++;
        }
    }
    return n;
}

/* `bloomstage ARGV... -c e->conf` (argv without -c) run without the ACL
 * a, which docs/security.md says the command needs: "exits 1" must exit 1
 * with a line `bloomstage CMD: not authorized: <refusal> refused to User:stage
 * (...)`, "goes on" exit 0; both within 15 s.  The process, for more
 * checks (the caller releases it). */
static h_proc *cli_without(const h_kenv *e, const h_acl *a,
                           const char *const *argv, const char *what)
{
    const char *args[12];
    size_t n = 0;
    for (; argv[n] && n < 9; n++)
        args[n] = argv[n];
    args[n++] = "-c";
    args[n++] = e->conf;
    args[n] = NULL;
    if (a->without != H_WITHOUT_EXITS && a->without != H_WITHOUT_GOES_ON)
        fail_msg("docs/security.md's ACL table: the row '%s' (%s) must say "
                 "'exits 1' or 'goes on'", a->why, what);
    double t0 = h_now_s();
    h_proc *p = h_bs_cmd(args, a->without == H_WITHOUT_EXITS ? 1 : 0);
    double t = h_now_s() - t0;
    char refusal[256], want[400], line[1024] = "";
    h_acl_refusal(e, a, refusal, sizeof(refusal));
    snprintf(want, sizeof(want), "not authorized: %s refused to "
             H_SEC_STAGE_PRINCIPAL " (", refusal);
    const char *const needles[] = {"bloomstage ", want, NULL};
    if (a->without == H_WITHOUT_EXITS &&
        !log_line(p, needles, line, sizeof(line)))
        h_stage_fail(p, "%s without %s: no line '%s...'", what, refusal,
                     want);
    if (t > 15)
        h_stage_fail(p, "%s without %s: %.1f s, want 15 s at most", what,
                     refusal, t);
    print_message("%s without %s: exit %d after %.1f s%s%s\n", what, refusal,
                  a->without == H_WITHOUT_EXITS ? 1 : 0, t,
                  line[0] ? ": " : "", line);
    return p;
}

/* The row of docs/security.md's table for a command (meets) on resource `on`
 * with operation op; fails the test if there is none. */
static h_acl cli_row(const char *const *meets, h_acl_on on,
                     rd_kafka_AclOperation_t op, h_acl *done, size_t *ndone)
{
    h_acl rows[8];
    size_t n = h_stage_acls_for(meets, rows, 8);
    for (size_t i = 0; i < n; i++)
        if (rows[i].on == on && rows[i].op == op) {
            done[(*ndone)++] = rows[i];
            return rows[i];
        }
    h_test_fail("docs/security.md's ACL table: no row for %s on %s", meets[0],
                on == H_ACL_LIST ? "the list topic" : "the checkpoint store");
}

/*
 * Each row of docs/security.md's table left out, all side by side over SASL_SSL
 * on one broker.  The stage's rows (kinds[]), each case on its own topics
 * and group: a first run with every ACL of its kind forwards half the
 * input and commits; the row's ACL revoked (and, for the output's Read
 * that the replay needs, a run that stops after its first round's output
 * and before its checkpoint is valid), the second run must within 60 s log an
 * error naming the refusal and answer /ready 503 naming it; a row marked
 * "exits 1" ends the stage with exit 1 naming it (after
 * BS_START_GIVE_UP_S, within 60 s of its start), one marked "retries"
 * keeps it running; nothing is committed past the first run.  A row
 * marked "goes on" is not refused in a way the stage can see: its run
 * must forward the input to its end without the row.  The ACL granted
 * again (while it runs, or before a restart), the input is forwarded to
 * its end, every key once at read_committed.  Beside the second run, the
 * four refused credentials of section 4 run their course (refused_run).
 * The commands' rows: `bloomstage blocklist add` and `checkpoint info`
 * with only their other rows granted (their topics unseen), and beside
 * the stage's ACLs (their topics seen: the refusal met by the write or
 * the read itself), each as its cell says (cli_without).  Every row of
 * the table is left out by one of these.
 */
static void test_acl_missing(void **state)
{
    (void)state;
    h_kcluster *cl = h_kgroup_cluster();
    size_t half = ACL_NRECS / 2, nall = 0;
    static acl_case k[ACL_MAX];
    static h_acl_for all[ACL_MAX * 16 + 4], left[ACL_MAX + 2];
    memset(k, 0, sizeof(k));
    size_t n = acl_cases(k, all, &nall, left);
    /* The commands' environment: no stage, only the rows of theirs not
     * left out granted (blocklist: none; checkpoint info: the reader's
     * group). */
    h_kenv_opts co = {.nparts = 1, .kafka_store = true, .blocklist = true,
                      .checkpoint_ms = 500, .capacity = 1000};
    static const char *const none[] = {NULL};
    h_kenv *ce = h_sec_kenv_new(cl, "ks-noacl-cli", H_SEC_SCRAM, &co, none);
    h_acl done[8];
    size_t ndone = 0;
    h_acl bl_write = cli_row(H_MEETS_BLOCKLIST_CLI, H_ACL_LIST,
                             RD_KAFKA_ACL_OPERATION_WRITE, done, &ndone);
    h_acl info_read = cli_row(H_MEETS_INFO_CLI, H_ACL_CKPT,
                              RD_KAFKA_ACL_OPERATION_READ, done, &ndone);
    h_acl info_group = cli_row(H_MEETS_INFO_CLI, H_ACL_GROUP_REPLAY,
                               RD_KAFKA_ACL_OPERATION_DESCRIBE, done, &ndone);
    all[nall++] = (h_acl_for){ce, info_group};
    /* Every row of the table, left out by a case or a command. */
    h_acl table[32];
    size_t ntable = h_stage_acls_for(H_MEETS_ALL, table, 32);
    for (size_t r = 0; r < ntable; r++) {
        bool covered = false;
        for (size_t i = 0; i < n && !covered; i++)
            covered = h_acl_same(&k[i].left, &table[r]);
        for (size_t i = 0; i < ndone && !covered; i++)
            covered = h_acl_same(&done[i], &table[r]);
        if (!covered)
            fail_msg("docs/security.md's ACL table: no test leaves out the row "
                     "'%s'", table[r].why);
    }
    H_CHECK(h_acls_apply(cl, H_SEC_STAGE_PRINCIPAL, all, nall, true));
    /* 1. every ACL: the first half forwarded and committed */
    for (size_t i = 0; i < n; i++)
        acl_stage_start(&k[i]);
    for (size_t i = 0; i < n; i++) {
        h_proc *const procs[] = {k[i].p, NULL};
        h_wait_committed_tolerant(k[i].e->h.bs, k[i].e->group, k[i].e->in,
                                  NPARTS, k[i].half, procs, 120000);
    }
    for (size_t i = 0; i < n; i++) {
        h_stage_stop(k[i].p);
        h_proc_release(k[i].p);
    }
    /* 2. each case without its row (the removal reaches the broker's
     * authorizer a moment after DeleteAcls answers: the second half's
     * records are produced meanwhile, seconds) */
    H_CHECK(h_acls_apply(cl, H_SEC_STAGE_PRINCIPAL, left, n, false));
    for (size_t i = 0; i < n; i++)
        h_stream_produce(k[i].e->st, k[i].e->h.bs, k[i].e->in, half,
                         ACL_NRECS, NULL);
    for (size_t i = 0; i < n; i++)
        if (k[i].crash)
            k[i].p = h_stage_start(k[i].e->conf, k[i].kind->xs,
                                   h_crash_env("after-checkpoint-write", 1));
    refused_run bad;
    refused_start(&bad);
    for (size_t i = 0; i < n; i++)
        if (!k[i].crash)
            acl_stage_start(&k[i]);
    for (size_t i = 0; i < n; i++)
        if (k[i].crash) {
            h_wait_crashed(k[i].p, "after-checkpoint-write", 60000);
            h_proc_release(k[i].p);
            acl_stage_start(&k[i]);
        }
    const char *const add[] = {"blocklist", "add", "x", "k-none", NULL};
    const char *const info[] = {"checkpoint", "info", NULL};
    h_proc_release(cli_without(ce, &bl_write, add, "bloomstage blocklist"));
    h_proc_release(cli_without(ce, &info_read, info,
                               "bloomstage checkpoint info"));
    refused_ready(&bad);
    acl_wait_refused(k, n);
    for (size_t i = 0; i < n; i++) {
        acl_case *c = &k[i];
        int st = 0;
        if (c->left.without == H_WITHOUT_RETRIES) {
            h_stage_alive(c->p, c->refusal);
            continue;
        }
        if (c->left.without == H_WITHOUT_GOES_ON) {
            int64_t end[NPARTS];
            h_stream_ends(c->e->st, ACL_NRECS, end);
            h_proc *const procs[] = {c->p, NULL};
            h_wait_committed_tolerant(c->e->h.bs, c->e->group, c->e->in,
                                      NPARTS, end, procs, 60000);
            print_message("%s left out: the input's end committed (seen "
                          "%.0f s after the start)\n", c->refusal,
                          h_now_s() - c->t0);
            continue;
        }
        int ms = (int)((60 - (h_now_s() - c->t0)) * 1000);
        if (h_process_wait(c->p, ms > 0 ? ms : 1, &st) != 0)
            h_stage_fail(c->p, "%s left out: still running %.0f s after it "
                         "started; docs/security.md says it exits 1 "
                         "(within 60 s)",
                         c->refusal, h_now_s() - c->t0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 1)
            h_stage_fail(c->p, "%s left out: %s, want exit 1", c->refusal,
                         h_status_str(st));
        const char *last = strstr(h_process_stderr(c->p), "\nbloomstage run: ");
        if (!last || !strstr(last, c->refusal))
            h_stage_fail(c->p, "%s left out: no last 'bloomstage run: ...' "
                         "line naming it", c->refusal);
        print_message("%s left out: exit 1 after %.0f s: %.*s\n",
                      c->refusal, h_now_s() - c->t0,
                      (int)strcspn(last + 1, "\n"), last + 1);
    }
    refused_ended(&bad);
    for (size_t i = 0; i < n; i++) {
        if (k[i].left.without == H_WITHOUT_GOES_ON)
            continue;
        acl_expect_held(&k[i], half);
        print_message("%s left out: /ready 503 '%s' (%.1f s); log (%.1f s): "
                      "%s\n", k[i].refusal, k[i].ready, k[i].ready_s,
                      k[i].log_s, k[i].line);
    }
    /* 3. granted again: the rest forwarded, every key once */
    H_CHECK(h_acls_apply(cl, H_SEC_STAGE_PRINCIPAL, left, n, true));
    for (size_t i = 0; i < n; i++)
        if (k[i].left.without == H_WITHOUT_EXITS) {
            h_proc_release(k[i].p);
            acl_stage_start(&k[i]);
        }
    for (size_t i = 0; i < n; i++) {
        int64_t end[NPARTS];
        h_stream_ends(k[i].e->st, ACL_NRECS, end);
        h_proc *const procs[] = {k[i].p, NULL};
        h_wait_committed_tolerant(k[i].e->h.bs, k[i].e->group, k[i].e->in,
                                  NPARTS, end, procs, 120000);
        h_stage_stop(k[i].p);
        h_proc_release(k[i].p);
    }
    for (size_t i = 0; i < n; i++) {
        size_t nk = 0;
        h_kenv_expect_once(k[i].e, &nk, k[i].refusal);
        h_kenv_expect_rejected(k[i].e, NULL);
        print_message("%s left out, then granted: %zu keys once\n",
                      k[i].refusal, nk);
    }
    /* 4. the commands beside the stage's ACLs: `blocklist add` on a live
     * list's environment (the topic seen by its Read, the write refused),
     * `checkpoint info` on two of the transactions' at the input's end,
     * each without one of its rows */
    acl_case *lists = NULL, *txn[2] = {NULL, NULL};
    for (size_t i = 0; i < n; i++)
        if (k[i].kind->blocklist)
            lists = &k[i];
        else if (k[i].kind->xs == TXN_X && k[i].kind->kafka_store)
            txn[txn[0] != NULL] = &k[i];
    h_proc_release(cli_without(lists->e, &bl_write, add,
                               "bloomstage blocklist, the stage's ACLs "
                               "granted"));
    const h_acl_for cli_left[] = {{txn[0]->e, info_read},
                                  {txn[1]->e, info_group}};
    H_CHECK(h_acls_apply(cl, H_SEC_STAGE_PRINCIPAL, cli_left, 2, false));
    h_proc_release(cli_without(txn[0]->e, &info_read, info,
                               "bloomstage checkpoint info, the stage's ACLs "
                               "granted"));
    h_proc *p = cli_without(txn[1]->e, &info_group, info,
                            "bloomstage checkpoint info, the stage's ACLs "
                            "granted");
    if (info_group.without == H_WITHOUT_GOES_ON)
        h_expect_ckpt_info(p, txn[1]->e->in, txn[1]->e->st->next, NPARTS);
    h_proc_release(p);
    H_CHECK(h_acls_apply(cl, H_SEC_STAGE_PRINCIPAL, all, nall, false));
    h_kenv_free(k[0].e);
}

/* ---- 6. the password in no output of a debug-level run --------------- */

/* How many times needle is in buf[0..len) (bytes, NULs included). */
static size_t count_in(const void *buf, size_t len, const char *needle)
{
    size_t n = 0, nl = strlen(needle);
    for (const char *p = buf, *end = p + len; p + nl <= end;) {
        const char *f = memmem(p, (size_t)(end - p), needle, nl);
        if (!f)
            break;
        n++;
        p = f + 1;
    }
    return n;
}

/* The records of topic (every one, read_uncommitted too: aborted
 * transactions' records are on disk as well): how many times the secret
 * is in their keys, values and headers; their count into *nrec. */
static size_t count_in_topic(const h_kenv *e, const char *topic,
                             const char *secret, size_t *nrec)
{
    h_record_list l = {0};
    H_CHECK(h_consume_all(e->h.bs, topic, H_CONSUME_MS, &l));
    size_t n = 0;
    for (size_t i = 0; i < l.n; i++) {
        const h_record *r = &l.recs[i];
        n += count_in(r->key, r->key ? r->key_len : 0, secret) +
             count_in(r->value, r->value ? r->value_len : 0, secret);
        for (size_t k = 0; k < r->n_headers; k++)
            n += count_in(r->headers[k].name, strlen(r->headers[k].name),
                          secret) +
                 count_in(r->headers[k].value,
                          r->headers[k].value ? r->headers[k].value_len : 0,
                          secret);
    }
    *nrec = l.n;
    h_record_list_free(&l);
    return n;
}

/* The stage's endpoint pages, one after the other, into a malloc'd
 * string. */
static char *endpoint_pages(h_proc *p, unsigned port)
{
    static const char *const paths[] = {"/metrics", "/ready", "/healthz"};
    char *all = h_xstrdup("");
    for (size_t i = 0; i < 3; i++) {
        h_http_resp r;
        char err[200];
        if (h_http_request(port, "GET", paths[i], &r, err, sizeof(err)))
            h_stage_fail(p, "GET %s: %s", paths[i], err);
        char *more = h_strdupf("%s%s", all, r.raw);
        h_http_resp_free(&r);
        free(all);
        all = more;
    }
    return all;
}

/*
 * A full run over SASL_SSL with log.level=debug and librdkafka's security,
 * broker and protocol debug contexts, stats lines every second,
 * transactions and the Kafka store: the stage's password is found 0 times
 * in its stderr and stdout, its endpoint's pages (/metrics, /ready,
 * /healthz), `config --check` of its configuration, and the checkpoint,
 * output and rejected topics' records -- and found in the configuration
 * file itself, so the search would see it were it printed.
 */
static void test_secret_unseen(void **state)
{
    (void)state;
    h_kenv *e = env_new("ks-secret", H_SEC_SCRAM);
    char *secret = h_sec_password(h_kgroup_cluster(), "stage"), *conf = NULL;
    size_t conf_len = 0;
    H_CHECK(h_read_file(e->conf, &conf, &conf_len));
    size_t control = count_in(conf, conf_len, secret);
    free(conf);
    if (control == 0)
        fail_msg("the password is not in %s: the search proves nothing",
                 e->conf);
    e->st = h_stream_new(NRECS / 4, NPARTS, 0x5ec2);
    h_stream_add(e->st, NRECS / 4, 40);
    h_stream_produce(e->st, e->h.bs, e->in, 0, NRECS / 4, NULL);
    int64_t end[NPARTS];
    h_stream_ends(e->st, NRECS / 4, end);
    const char *const xs[] = {"exactly_once.method=transactions",
                              "kafka.debug=security,broker,protocol",
                              "log.stats.interval.ms=1000", NULL};
    h_proc *p = h_stage_start(e->conf, xs, NULL);
    unsigned port = h_stage_metrics_port(p, 30000);
    h_proc *const procs[] = {p, NULL};
    h_wait_committed_tolerant(e->h.bs, e->group, e->in, NPARTS, end, procs,
                              120000);
    h_nap(1500); /* a stats line after the last round */
    char *pages = endpoint_pages(p, port);
    h_stage_stop(p);
    const char *const check[] = {"config", "--check", "-c", e->conf, NULL};
    h_proc *cc = h_bs_cmd(check, 0);
    struct {
        const char *what;
        const char *text;
    } outs[] = {
        {"the stage's stderr", h_process_stderr(p)},
        {"the stage's stdout", h_process_stdout(p)},
        {"its endpoint's pages", pages},
        {"config --check's stdout", h_process_stdout(cc)},
        {"config --check's stderr", h_process_stderr(cc)},
    };
    if (!strstr(outs[0].text, "level=debug") ||
        !strstr(outs[0].text, "msg=stats") ||
        !strstr(outs[0].text, "SASL"))
        h_stage_fail(p, "no debug, stats or SASL lines in the stage's "
                     "stderr: the run did not print what it was to");
    for (size_t i = 0; i < sizeof(outs) / sizeof(*outs); i++) {
        size_t len = outs[i].text ? strlen(outs[i].text) : 0;
        size_t n = count_in(outs[i].text, len, secret);
        if (n)
            h_stage_fail(p, "the password is in %s %zu times", outs[i].what,
                         n);
        print_message("%s: %zu bytes, the password 0 times\n", outs[i].what,
                      len);
    }
    const char *const topics[] = {e->ckt, e->out, e->rej};
    for (size_t i = 0; i < 3; i++) {
        size_t nrec = 0, n = count_in_topic(e, topics[i], secret, &nrec);
        if (n)
            fail_msg("the password is in topic %s's records %zu times",
                     topics[i], n);
        print_message("topic %s: %zu records, the password 0 times\n",
                      topics[i], nrec);
    }
    print_message("(and %zu times in %s, the configuration)\n", control,
                  e->conf);
    free(pages);
    free(secret);
    h_acl acls[32];
    size_t nacls = h_stage_acls(acls, 32);
    H_CHECK(h_acls_revoke(h_kgroup_cluster(), e, H_SEC_STAGE_PRINCIPAL, acls,
                          nacls));
    h_kenv_free(e);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_teardown(test_scram, h_kfixture_teardown),
    cmocka_unit_test_teardown(test_mtls, h_kfixture_teardown),
    cmocka_unit_test_teardown(test_refused, h_kfixture_teardown),
    cmocka_unit_test_teardown(test_acl_missing, h_kfixture_teardown),
    cmocka_unit_test_teardown(test_secret_unseen, h_kfixture_teardown),
};

int main(void)
{
    h_test_main("test_kafka_secure", "BS_KS_ONLY", "BS_KS_VERBOSE",
                "BS_KS_STAGE_X");
    return cmocka_run_group_tests(tests, h_sec_group_setup,
                                  h_kgroup_teardown);
}
