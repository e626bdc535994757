/*
 * test_kafka_secure_features.c -- the stage's features other than
 * transactions on a secured Apache Kafka (one KRaft node from `scripts/
 * kafka start --secure`, shared by the cases: KRaft's StandardAuthorizer,
 * nothing allowed without an ACL), as the user `stage` with exactly the
 * ACLs docs/security.md's table lists for what each case runs
 * (h_stage_acls_for, secure.h) and no more, over SASL_SSL with
 * SCRAM-SHA-512 and over SSL with stage's client certificate (mTLS):
 *
 *   1. exactly_once.method=replay with the Kafka store, once by each
 *      means: a run stops at the crash point after-flush of its third
 *      round (output written past the checkpoint), the next one reads
 *      the output's tail back (it must log "output tail replayed" with
 *      records) and drains the input; then `bloomstage checkpoint info
 *      -c` with only its own rows granted lists every partition at the
 *      input's end;
 *   2. scale-out: two instances in one group at once, one over SCRAM, one
 *      over mTLS, transactions and the Kafka store, the input fed while
 *      the second joins;
 *   3. live blocklists, once by each means: `bloomstage blocklist load`,
 *      `add` and `remove` as `stage`, with only their row granted, fill
 *      the compacted list topic before the stage starts; the stage reads
 *      it whole before any input, then an `add` while it runs blocks
 *      records from then on.
 *
 * Every case checks the outcome as admin at read_committed (every unique
 * key once in the output, the duplicates or blocked records in the
 * rejected topic, the group's offsets at the input's end) and that the
 * broker's authorizer denied User:stage nothing while the case's ACLs were
 * granted (up to each revoke: replay_case says why): so no client
 * the stage or the CLI makes lacks the kafka.* security settings (it
 * would not get through the listener) or needs an ACL the table does not
 * list.  The ACLs are revoked at the end of each case.
 *
 * Needs BLOOMSTAGE_BIN (ctest sets it), Java, Maven and openssl
 * (scripts/install-deps).  BS_KSF_ONLY=PATTERN runs only the matching
 * tests; BS_KSF_VERBOSE=1 prints every stage's stderr; BS_KSF_STAGE_X="k=v
 * ..." adds -X settings.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

#define NPARTS 3
#define NRECS 12000
#define FEED_RATE 2000

static const char *const REPLAY_X[] = {"exactly_once.method=replay", NULL};
static const char *const TXN_X[] = {"exactly_once.method=transactions",
                                    NULL};

/* The authorizer log's size now: where a case's denials start. */
static size_t denials_from(void)
{
    size_t end = 0;
    (void)h_sec_denied(h_kgroup_cluster(), 0, &end, NULL, 0);
    return end;
}

/* Grants (or revokes) User:stage the ACLs docs/security.md lists for meets. */
static void acls(h_kenv *e, const char *const *meets, bool grant)
{
    h_acl a[32];
    size_t n = h_stage_acls_for(meets, a, 32);
    if (grant)
        H_CHECK(h_acls_grant(h_kgroup_cluster(), e, H_SEC_STAGE_PRINCIPAL, a,
                             n));
    else
        H_CHECK(h_acls_revoke(h_kgroup_cluster(), e, H_SEC_STAGE_PRINCIPAL, a,
                              n));
}

/* The broker denied User:stage nothing since `from`. */
static void expect_nothing_denied(size_t from, const char *how)
{
    char lines[2048];
    size_t denied = h_sec_denied(h_kgroup_cluster(), from, NULL, lines,
                                 sizeof(lines));
    if (denied)
        fail_msg("%s: the broker denied User:stage %zu times:\n%s", how,
                 denied, lines);
}

/* Every unique key once in the output, the duplicates in the rejected
 * topic (extra copies allowed where max_extra is), the offsets at the
 * input's end. */
static void expect_once(h_kenv *e, bool exact_rejected, const char *how)
{
    h_kenv_committed_end(e);
    size_t n = 0, extra = 0;
    h_kenv_expect_once(e, &n, how);
    size_t nrej = h_kenv_expect_rejected(e, &extra);
    if (exact_rejected && extra)
        fail_msg("%s: %zu records are in %s more than once", how, extra,
                 e->rej);
    print_message("%s: %zu records, %zu keys once in %s, %zu duplicates in "
                  "%s (%zu again), the broker denied User:stage nothing\n",
                  how, e->st->n, n, e->out, nrej, e->rej, extra);
}

/* A keyed stream with duplicates: the first quarter produced, the rest
 * for the feeder. */
static void stream_start(h_kenv *e, uint64_t seed)
{
    e->st = h_stream_new(NRECS, NPARTS, seed);
    h_stream_add(e->st, NRECS, 40);
    h_stream_produce(e->st, e->h.bs, e->in, 0, NRECS / 4, NULL);
    h_feed_start(e->h.bs, e->in, e->st, NRECS / 4);
}

/* ---- 1. the output-tail replay ----------------------------------------- */

/* `bloomstage checkpoint info -c conf` on e's Kafka store: exit 0, one
 * verified line per input partition, at the input's end. */
static void expect_info(h_kenv *e, const char *how)
{
    const char *const argv[] = {"checkpoint", "info", "-c", e->conf, NULL};
    h_proc *p = h_bs_cmd(argv, 0);
    h_expect_ckpt_info(p, e->in, e->st->next, NPARTS);
    h_proc_release(p);
    print_message("%s: checkpoint info lists the %d partitions of %s from "
                  "%s, each at the input's end\n", how, NPARTS, e->in,
                  e->ckt);
}

static void replay_case(const char *name, h_sec_auth auth, const char *how)
{
    h_kenv_opts o = {.nparts = NPARTS, .rejected = true, .kafka_store = true,
                     .checkpoint_ms = 500, .capacity = 30000};
    h_kenv *e = h_sec_kenv_new(h_kgroup_cluster(), name, auth, &o,
                               H_MEETS_REPLAY);
    size_t from = denials_from();
    stream_start(e, 0x7e91a7);
    h_proc *p = h_stage_start(e->conf, REPLAY_X,
                              h_crash_env("after-flush", 3));
    /* Fed from the assignment on, the input spans rounds. */
    h_wait_said(p, H_SAID_ASSIGNED, 1, 120000);
    h_feed_rate(FEED_RATE);
    h_wait_crashed(p, "after-flush", 120000);
    h_feed_rate(0);
    h_proc_release(p);
    p = h_stage_start(e->conf, REPLAY_X, NULL);
    h_wait_said(p, H_SAID_ASSIGNED, 1, 120000);
    h_feed_finish(120000);
    h_proc *const procs[] = {p, NULL};
    h_kenv_wait_committed_end(e, procs, 180000);
    h_stage_stop(p);
    const char *replayed = strstr(h_process_stderr(p), H_SAID_REPLAYED);
    if (!replayed || h_log_int(replayed, "records") <= 0)
        h_stage_fail(p, "%s: the restart did not log '%s' with records",
                     how, H_SAID_REPLAYED);
    print_message("%s: the restart replayed %lld records of the output's "
                  "tail\n", how, h_log_int(replayed, "records"));
    if (h_count_restored(p, e->in) == 0)
        h_stage_fail(p, "%s: the restart restored nothing from %s", how,
                     e->ckt);
    h_proc_release(p);
    expect_once(e, false, how);
    /* Denials are counted up to each revoke: a process's last request
     * can reach the authorizer after the process exits (librdkafka
     * 2.0.2's destroy can send, and not wait for, a metadata request for
     * the topics it knows as its coordinator's connection goes down: for
     * the CLI, the checkpoint topic alone), and after a revoke that is a
     * denial no missing row caused. */
    expect_nothing_denied(from, how);
    acls(e, H_MEETS_REPLAY, false);
    acls(e, H_MEETS_INFO_CLI, true);
    from = denials_from();
    expect_info(e, how);
    expect_nothing_denied(from, how);
    acls(e, H_MEETS_INFO_CLI, false);
    h_kenv_free(e);
}

static void test_replay_scram(void **state)
{
    (void)state;
    replay_case("ksf-replay-scram", H_SEC_SCRAM,
                "SASL_SSL, SCRAM-SHA-512, the output-tail replay");
}

static void test_replay_mtls(void **state)
{
    (void)state;
    replay_case("ksf-replay-mtls", H_SEC_MTLS,
                "mTLS, the output-tail replay");
}

/* ---- 2. two instances in one group ------------------------------------- */

static void test_scale_out(void **state)
{
    (void)state;
    const char *how = "two instances (SCRAM and mTLS), transactions";
    h_kcluster *c = h_kgroup_cluster();
    h_kenv_opts o = {.nparts = NPARTS, .rejected = true, .kafka_store = true,
                     .checkpoint_ms = 500, .capacity = 30000};
    h_kenv *e = h_sec_kenv_new(c, "ksf-scale", H_SEC_SCRAM, &o, H_MEETS_TXN);
    char *mtls = h_sec_kenv_conf(c, e, H_SEC_MTLS, H_SEC_SOUND, "mtls");
    size_t from = denials_from();
    stream_start(e, 0x5ca1e);
    h_proc *a = h_stage_start(e->conf, TXN_X, NULL);
    h_wait_said(a, H_SAID_ASSIGNED, 1, 120000);
    h_feed_rate(FEED_RATE);
    /* B joins while A may still be in its first transaction: the rebalance
     * can abort it, and A rolls back (test_first_txn_aborted's case). */
    h_proc *b = h_stage_start(mtls, TXN_X, NULL);
    free(mtls);
    h_wait_said(b, H_SAID_ASSIGNED, 1, 120000);
    h_feed_finish(120000);
    h_proc *const procs[] = {a, b, NULL};
    h_kenv_wait_committed_end(e, procs, 180000);
    h_stage_stop(a);
    h_stage_stop(b);
    h_proc *const both[] = {a, b};
    for (int i = 0; i < 2; i++)
        if (!h_said(both[i], H_SAID_TXN))
            h_stage_fail(both[i], "%s: no '%s'", how, H_SAID_TXN);
    print_message("%s: the SCRAM instance was assigned %zu times, the mTLS "
                  "one %zu\n", how, h_count_said(a, H_SAID_ASSIGNED),
                  h_count_said(b, H_SAID_ASSIGNED));
    h_proc_release(a);
    h_proc_release(b);
    expect_once(e, true, how);
    expect_nothing_denied(from, how);
    acls(e, H_MEETS_TXN, false);
    h_kenv_free(e);
}

/* ---- 3. live blocklists and `bloomstage blocklist` ---------------------- */

/* `bloomstage blocklist VERB x ARGS... -c conf` (n args), which must exit
 * 0. */
static void bl_cmd(const char *conf, const char *verb,
                   const char *const *args, size_t n)
{
    const char *argv[12];
    size_t k = 0;
    argv[k++] = "blocklist";
    argv[k++] = verb;
    argv[k++] = "x";
    for (size_t i = 0; i < n && k < 9; i++)
        argv[k++] = args[i];
    argv[k++] = "-c";
    argv[k++] = conf;
    argv[k] = NULL;
    h_proc_release(h_bs_cmd(argv, 0));
}

/* Record key keys[i] with value "v-i" for i in [from, to), to e->in. */
static void produce(h_kenv *e, const char *const *keys, size_t from,
                    size_t to)
{
    h_record r[8];
    char vals[8][16];
    for (size_t i = from; i < to; i++) {
        snprintf(vals[i - from], sizeof(vals[0]), "v-%zu", i);
        r[i - from] = h_rec(keys[i], vals[i - from]);
    }
    H_CHECK(h_produce(e->h.bs, e->in, 0, r, to - from));
}

/* The keys of topic's records at read_committed, in order, each followed
 * by a space (a blocked one's bloomstage-reason must be blocklist:x). */
static void keys_of(h_kenv *e, const char *topic, bool blocked, char *buf,
                    size_t size)
{
    h_record_list l = {0};
    H_CHECK(h_consume_all_conf(e->h.bs, topic, H_OUTPUT_MS, H_READ_COMMITTED,
                               &l));
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < l.n; i++) {
        const h_record *r = &l.recs[i];
        used += (size_t)snprintf(buf + used, size - used, "%.*s ",
                                 (int)r->key_len, (const char *)r->key);
        const h_header *h = h_header_last(r, "bloomstage-reason");
        if (blocked && (!h || !h->value ||
                        h->value_len != strlen("blocklist:x") ||
                        memcmp(h->value, "blocklist:x", h->value_len)))
            fail_msg("%s: record %zu (key %.*s) is not blocked by x", topic,
                     i, (int)r->key_len, (const char *)r->key);
    }
    h_record_list_free(&l);
}

static void blocklist_case(const char *name, h_sec_auth auth,
                           const char *how)
{
    h_kenv_opts o = {.nparts = 1, .rejected = true, .blocklist = true,
                     .ckdir = true, .checkpoint_ms = 500, .capacity = 1000};
    h_kenv *e = h_sec_kenv_new(h_kgroup_cluster(), name, auth, &o,
                               H_MEETS_BLOCKLIST_CLI);
    size_t from = denials_from();
    /* x = {a, c, d}: loaded a b c, added d, removed b; then g, live. */
    char *list = h_strdupf("%s/list.txt", e->h.dir);
    H_CHECK(h_write_file(list, "# the first entries\na\nb\n\nc\n"));
    const char *const load[] = {list}, *const d[] = {"d"}, *const b[] = {"b"};
    bl_cmd(e->conf, "load", load, 1);
    bl_cmd(e->conf, "add", d, 1);
    bl_cmd(e->conf, "remove", b, 1);
    free(list);
    acls(e, H_MEETS_LISTS, true);
    static const char *const keys[] = {"a", "b", "c", "d", "e", "g", "f"};
    produce(e, keys, 0, 5);
    h_proc *p = h_stage_start(e->conf, TXN_X, NULL);
    unsigned port = h_stage_metrics_port(p, 60000);
    h_wait_out_rej(p, e->h.bs, e->out, 2, e->rej, 3);
    const char *const g[] = {"g"};
    bl_cmd(e->conf, "add", g, 1);
    static const char entries[] = "bloomstage_blocklist_entries{list=\"x\"}";
    for (double t0 = h_now_s(); h_stage_metric(port, entries) != 4;
         h_nap(100)) {
        h_stage_alive(p, "waiting for the live add");
        if (h_now_s() - t0 > 30)
            h_stage_fail(p, "%s: %s is %g, not 4, 30 s after the add", how,
                         entries, h_stage_metric(port, entries));
    }
    produce(e, keys, 5, 7);
    h_wait_out_rej(p, e->h.bs, e->out, 3, e->rej, 4);
    h_stage_stop(p);
    h_proc_release(p);
    char out[256], rej[256];
    keys_of(e, e->out, false, out, sizeof(out));
    keys_of(e, e->rej, true, rej, sizeof(rej));
    if (strcmp(out, "b e f ") || strcmp(rej, "a c d g "))
        fail_msg("%s: %s holds '%s' (want 'b e f '), %s holds '%s' (want "
                 "'a c d g ')", how, e->out, out, e->rej, rej);
    int64_t off[1];
    H_CHECK(h_committed_retry(e->h.bs, e->group, e->in, 1, off, 30000));
    if (off[0] != 7)
        fail_msg("%s: the group committed %lld, want 7", how,
                 (long long)off[0]);
    print_message("%s: load, add, remove as stage; %s holds %s; %s holds %s"
                  "(blocked); the broker denied User:stage nothing\n", how,
                  e->out, out, e->rej, rej);
    expect_nothing_denied(from, how);
    acls(e, H_MEETS_LISTS, false);
    acls(e, H_MEETS_BLOCKLIST_CLI, false);
    h_kenv_free(e);
}

static void test_blocklist_scram(void **state)
{
    (void)state;
    blocklist_case("ksf-lists-scram", H_SEC_SCRAM,
                   "SASL_SSL, SCRAM-SHA-512, a live blocklist");
}

static void test_blocklist_mtls(void **state)
{
    (void)state;
    blocklist_case("ksf-lists-mtls", H_SEC_MTLS, "mTLS, a live blocklist");
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_teardown(test_replay_scram, h_kfixture_teardown),
    cmocka_unit_test_teardown(test_replay_mtls, h_kfixture_teardown),
    cmocka_unit_test_teardown(test_scale_out, h_kfixture_teardown),
    cmocka_unit_test_teardown(test_blocklist_scram, h_kfixture_teardown),
    cmocka_unit_test_teardown(test_blocklist_mtls, h_kfixture_teardown),
};

int main(void)
{
    h_test_main("test_kafka_secure_features", "BS_KSF_ONLY",
                "BS_KSF_VERBOSE", "BS_KSF_STAGE_X");
    return cmocka_run_group_tests(tests, h_sec_group_setup,
                                  h_kgroup_teardown);
}
