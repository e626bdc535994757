/*
 * test_stage_audit.c -- the audit sample in `bloomstage run`
 * (dedup.audit.rate, dedup.audit.rescue), end to end: the real binary
 * against `bloomstage mock-broker`, checked from the outside (the topics,
 * the stage's log, /metrics, `bloomstage checkpoint info`).
 *
 * What must hold (docs/configuration.md, "Measured false
 * positives"):
 *   1. a filter undersized for dedup.fpr -- checkpointed at dedup.fpr=0.1
 *      with the audit off, restarted at 1e-6 with dedup.max.bytes=1 so
 *      that it cannot grow, and a fresh sample (the checkpoint had none:
 *      logged) -- makes the "above dedup.fpr" warning fire on the new
 *      run's evidence, the stats line shows the rate, and with rescue on every
 *      sampled new key reaches the output (some unsampled ones do not: the
 *      filter does drop new keys); the sampled lookups of the run are
 *      exactly its sampled new keys, the rescued exactly its false
 *      positives, and /metrics shows them per partition and in total;
 *   2. the same with rescue off (the control): sampled new keys are
 *      dropped like any other, nothing is rescued;
 *   3. exactly_once (output-tail replay), every key sampled, killed at a
 *      crash point after a round's flush and restarted: the counts the
 *      restore logs are those `checkpoint info` shows of the last
 *      checkpoint, and the keys forwarded before the crash, which come
 *      again after the restart, count no false positive and are not
 *      forwarded twice (the replay notes them in the sample);
 *   4. deliveries failing (Produce errors in the broker), exactly_once:
 *      the rollback takes the sample back with the filter, so at the end
 *      every key counted one lookup but those the rollback's replay found
 *      delivered (noted);
 *   5. dedup.window.ms: the sample forgets with the window.  Keys at a
 *      time, all again ten windows later (the window forgot them: each
 *      forwarded again, and a sampled lookup again, no false positive),
 *      then half of them again inside the window (dropped, no lookup).
 *
 * Which keys are sampled is computed here with the library's own
 * bf_audit_sampled (the stage's hash seed is the filters' default).
 * Needs BLOOMSTAGE_BIN (ctest sets it); TEST_STAGE_AUDIT_FILTER=PATTERN
 * runs some, TEST_STAGE_AUDIT_VERBOSE=1 prints every stage's stderr.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

#include <bloomfilters.h>

#define GROUP "bs-audit"
#define RATE "0.125"
#define WARNED "msg=\"audit: the filter's measured false-positive rate is " \
               "above dedup.fpr\""

static int setup(void **state)
{
    static const char *const topics[] = {"in:1", "out:1", NULL};
    return h_fixture_setup(state, 1, topics);
}

#define teardown h_fixture_teardown

/* The stage's configuration in the fixture's directory, with extra lines
 * (NULL-terminated "key=value"). */
static char *write_conf(h_fixture *fx, const char *const *extra)
{
    char *text = h_strdupf(
        "input.topics=in\n"
        "output.topic=out\n"
        "consumer.group.id=" GROUP "\n"
        "kafka.bootstrap.servers=%s\n"
        "checkpoint.dir=%s/ck\n"
        "checkpoint.interval.ms=300\n"
        "consumer.session.timeout.ms=3000\n"
        "consumer.heartbeat.interval.ms=500\n"
        "metrics.listen=127.0.0.1:0\n"
        "log.stats.interval.ms=0\n",
        fx->bs, fx->dir);
    for (size_t i = 0; extra && extra[i]; i++) {
        char *more = h_strdupf("%s%s\n", text, extra[i]);
        free(text);
        text = more;
    }
    char *path = h_strdupf("%s/stage.conf", fx->dir);
    H_CHECK(h_write_file(path, text));
    free(text);
    return path;
}

/* Keys PREFIX-from .. PREFIX-(to-1), one record each at timestamp ts
 * (ms; 0: the producer's clock), produced to in [0]. */
static void produce_at(h_fixture *fx, const char *prefix, int from, int to,
                       int64_t ts)
{
    size_t n = (size_t)(to - from);
    h_record *r = calloc(n, sizeof(*r));
    char **keys = calloc(n, sizeof(*keys));
    assert_true(r && keys);
    for (size_t i = 0; i < n; i++) {
        keys[i] = h_strdupf("%s-%d", prefix, from + (int)i);
        r[i] = h_rec(keys[i], "v");
        r[i].timestamp = ts;
    }
    H_CHECK(h_produce(fx->bs, "in", 0, r, n));
    for (size_t i = 0; i < n; i++)
        free(keys[i]);
    free(keys);
    free(r);
}

/* Keys PREFIX-0 .. PREFIX-(n-1), one record each, then copies of keys
 * PREFIX-from .. PREFIX-(to-1), produced to in [0]. */
static void produce_keys(h_fixture *fx, const char *prefix, int n, int from,
                         int to)
{
    produce_at(fx, prefix, 0, n, 0);
    if (to > from)
        produce_at(fx, prefix, from, to, 0);
}

/* Runs the stage until the group committed the input's end `end`, then
 * stops it (SIGTERM, exit 0).  Returns the process (its log stays
 * readable). */
static h_proc *run_to(h_fixture *fx, const char *conf, int64_t end,
                      char *const *env)
{
    h_proc *p = h_stage_start(conf, NULL, env);
    h_proc *procs[] = {p, NULL};
    h_wait_committed(fx->bs, GROUP, "in", 1, &end, procs, 60000, NULL, NULL);
    return p;
}

/* The audit's sampler at `rate` for the stage's hashes. */
static bf_audit *sampler(double rate)
{
    bf_scalable_params sp;
    bf_scalable_params_default(&sp);
    bf_audit *a = bf_audit_new(rate, sp.seed, NULL, 0);
    assert_non_null(a);
    return a;
}

static bool sampled(const bf_audit *a, const char *key)
{
    return bf_audit_sampled(a, bf_hash_key(key, strlen(key),
                                           bf_audit_seed(a)));
}

/* Whether key is in the output read (linear: the lists here are small). */
static size_t copies_in(const h_record_list *l, const char *key)
{
    size_t n = 0, len = strlen(key);
    for (size_t i = 0; i < l->n; i++)
        n += l->recs[i].key_len == len && !memcmp(l->recs[i].key, key, len);
    return n;
}

/* Every key PREFIX-0 .. PREFIX-(n-1) is in the output `want` times. */
static void expect_copies(const h_record_list *out, const char *prefix,
                          int n, size_t want)
{
    for (int i = 0; i < n; i++) {
        char key[32];
        snprintf(key, sizeof(key), "%s-%d", prefix, i);
        size_t c = copies_in(out, key);
        if (c != want)
            fail_msg("%s is in the output %zu times, not %zu", key, c,
                     want);
    }
}

/* key=N of the first line of p's log holding `msg` (fails if none). */
static long long logged(h_proc *p, const char *msg, const char *key)
{
    const char *line = strstr(h_process_stderr(p), msg);
    if (!line)
        h_stage_fail(p, "no %s line", msg);
    const char *eol = strchr(line, '\n');
    char buf[2048];
    size_t len = eol ? (size_t)(eol - line) : strlen(line);
    snprintf(buf, sizeof(buf), "%.*s", (int)len, line);
    long long v = h_log_int(buf, key);
    if (v < 0)
        h_stage_fail(p, "no %s= in: %s", key, buf);
    return v;
}

/* A /metrics scrape of p, parsed. */
static char *scrape(h_proc *p, h_prom *pm)
{
    unsigned port = h_stage_metrics_port(p, 20000);
    h_http_resp r;
    char err[256];
    if (h_http_request(port, "GET", "/metrics", &r, err, sizeof(err)) != 0)
        h_stage_fail(p, "GET /metrics: %s", err);
    char *body = strdup(r.body);
    h_http_resp_free(&r);
    memset(pm, 0, sizeof(*pm));
    if (h_prom_parse(body, pm, err, sizeof(err)) != 0)
        fail_msg("/metrics does not parse: %s\n%s", err, body);
    return body;
}

#define PART "{topic=\"in\",partition=\"0\"}"

/* Tests 1 and 2: an undersized filter, rescue on or off. */
static void undersized(h_fixture *fx, bool rescue)
{
    enum { OLD = 20000, NEW = 8000 };
    /* A filter built for dedup.fpr=0.1 from 100 keys up, holding OLD,
     * checkpointed without an audit sample. */
    const char *loose[] = {"dedup.fpr=0.1", "dedup.capacity=100",
                           "dedup.audit.rate=0", NULL};
    char *conf = write_conf(fx, loose);
    produce_keys(fx, "old", OLD, 0, 0);
    h_proc *p = run_to(fx, conf, OLD, NULL);
    if (h_said(p, "audit_lookups="))
        h_stage_fail(p, "dedup.audit.rate=0, yet a sample's counts");
    h_stage_stop(p);
    free(conf);

    /* The same filter read against dedup.fpr=1e-6 (the default), unable
     * to grow: about 5% of new keys look seen. */
    const char *tight[] = {"dedup.max.bytes=1", "dedup.audit.rate=" RATE,
                           rescue ? "dedup.audit.rescue=true"
                                  : "dedup.audit.rescue=false",
                           "log.stats.interval.ms=500", NULL};
    conf = write_conf(fx, tight);
    produce_keys(fx, "new", NEW, 0, 0);
    p = h_stage_start(conf, NULL, NULL);
    h_wait_said(p, H_SAID_ASSIGNED, 1, 20000);
    h_expect_said(p, "msg=\"checkpoint without an audit sample");
    long long l0 = logged(p, H_SAID_ASSIGNED, "audit_lookups");
    long long f0 = logged(p, H_SAID_ASSIGNED, "audit_false_positives");
    assert_true(l0 == 0 && f0 == 0);
    h_proc *procs[] = {p, NULL};
    int64_t end = OLD + NEW;
    h_wait_committed(fx->bs, GROUP, "in", 1, &end, procs, 60000, NULL,
                     NULL);
    h_wait_said(p, WARNED, 1, 10000);
    /* The stats line shows the measured rate beside the bound. */
    h_wait_said(p, "msg=stats", 1, 10000);
    if (logged(p, "msg=stats", "audit_lookups") < 0 ||
        !strstr(strstr(h_process_stderr(p), "msg=stats"), "audit_fpr_low="))
        h_stage_fail(p, "the stats line lacks the audit");

    /* The output: which new keys are there. */
    bf_audit *a = sampler(0.125);
    h_record_list out = {0};
    H_CHECK(h_consume_all(fx->bs, "out", H_CONSUME_MS, &out));
    size_t nsampled = 0, sampled_lost = 0, other_lost = 0;
    for (int i = 0; i < NEW; i++) {
        char key[32];
        snprintf(key, sizeof(key), "new-%d", i);
        size_t c = copies_in(&out, key);
        if (c > 1)
            h_stage_fail(p, "%s forwarded %zu times", key, c);
        bool s = sampled(a, key);
        nsampled += s;
        sampled_lost += s && !c;
        other_lost += !s && !c;
    }
    h_record_list_free(&out);
    bf_audit_destroy(a);
    /* The filter drops new keys (else this test shows nothing). */
    if (other_lost < NEW / 100)
        h_stage_fail(p, "only %zu of the unsampled new keys were dropped: "
                     "the filter is not undersized", other_lost);

    /* /metrics, once the last round published: every sampled new key was
     * a lookup; the false positives since the restore are what the
     * output lacks (rescue off) or what was rescued (on). */
    h_prom pm;
    char *body = NULL;
    double lookups = 0;
    for (double t0 = h_now_s(); h_now_s() - t0 < 10;) {
        if (body) {
            h_prom_free(&pm);
            free(body);
        }
        body = scrape(p, &pm);
        lookups = h_prom_get(&pm, body, "bloomstage_audit_lookups" PART);
        if (lookups >= (double)l0 + (double)nsampled)
            break;
        h_nap(200);
    }
    if (lookups != (double)l0 + (double)nsampled)
        h_stage_fail(p, "bloomstage_audit_lookups %.0f, want %lld restored "
                     "+ %zu sampled new keys\n%s", lookups, l0, nsampled,
                     body);
    double fps = h_prom_get(&pm, body, "bloomstage_audit_false_positives"
                            PART) - (double)f0;
    double rescued = h_prom_get(&pm, body, "bloomstage_audit_rescued" PART);
    double rescued_total = h_prom_get(&pm, body,
                                      "bloomstage_audit_rescued_total");
    if (rescue) {
        if (sampled_lost)
            h_stage_fail(p, "rescue on: %zu of %zu sampled new keys are not "
                         "in the output", sampled_lost, nsampled);
        assert_true(fps > 0);
        assert_true(rescued == fps && rescued_total == fps);
    } else {
        if ((double)sampled_lost != fps)
            h_stage_fail(p, "rescue off: %zu sampled new keys missing, %.0f "
                         "false positives counted", sampled_lost, fps);
        assert_true(fps > 0 && rescued == 0 && rescued_total == 0);
    }
    /* The measured rate, its interval above dedup.fpr, all of it in the
     * totals too (one partition), and the memory figures. */
    double lo = h_prom_get(&pm, body, "bloomstage_audit_fpr_low" PART);
    double hi = h_prom_get(&pm, body, "bloomstage_audit_fpr_high" PART);
    double fpr = h_prom_get(&pm, body, "bloomstage_audit_fpr" PART);
    assert_true(lo > 1e-6 && lo <= fpr && fpr <= hi);
    assert_true(h_prom_get(&pm, body, "bloomstage_dedup_fpr") == 1e-6);
    assert_true(h_prom_get(&pm, body, "bloomstage_audit_all_lookups") ==
                lookups);
    assert_true(h_prom_get(&pm, body, "bloomstage_audit_all_fpr_low") == lo);
    assert_true(h_prom_get(&pm, body, "bloomstage_audit_memory_bytes" PART) >
                0);
    assert_true(h_prom_get(&pm, body, "bloomstage_filter_bytes_per_key"
                           PART) > 0);
    h_prom_free(&pm);
    free(body);
    h_stage_stop(p);
    free(conf);
}

static void test_undersized_warns_and_rescues(void **state)
{
    undersized(*state, true);
}

static void test_undersized_rescue_off(void **state)
{
    undersized(*state, false);
}

/* "sampled lookups N, false positives F" of `checkpoint info`'s audit line
 * for in [0] in dir. */
static void info_counts(const char *dir, long long *lookups, long long *fps)
{
    const char *args[] = {"checkpoint", "info", dir, NULL};
    h_proc *c = h_bs_cmd(args, 0);
    const char *a = strstr(h_process_stdout(c), "  audit: rate ");
    if (!a || sscanf(strstr(a, "sampled lookups"),
                     "sampled lookups %lld, false positives %lld", lookups,
                     fps) != 2)
        fail_msg("checkpoint info: no audit line:\n%s", h_process_stdout(c));
    h_proc_release(c);
}

/* Test 3: kill at a crash point, restart, replay. */
static void test_crash_restart_counts(void **state)
{
    h_fixture *fx = *state;
    enum { KEYS = 4000, AGAIN_FROM = 2000 };
    const char *eos[] = {"processing.guarantee=exactly_once",
                         "dedup.fpr=1e-9", "dedup.audit.rate=1",
                         "checkpoint.interval.ms=600000",
                         "checkpoint.records=1500", NULL};
    char *conf = write_conf(fx, eos);
    /* Every key once, then again the keys from AGAIN_FROM on: those the
     * crashed run forwarded after its last checkpoint. */
    produce_keys(fx, "k", KEYS, AGAIN_FROM, KEYS);
    h_proc *p = h_stage_start(conf, NULL, h_crash_env("after-flush", 2));
    h_wait_crashed(p, "after-flush", 60000);
    char *ck = h_strdupf("%s/ck", fx->dir);
    long long l0, f0;
    info_counts(ck, &l0, &f0);
    int64_t c0 = -1;
    assert_int_equal(h_ckpt_next(ck, "in", 0, &c0), 0);
    /* Every key sampled and unique so far: a lookup each. */
    assert_int_equal(l0, c0);
    assert_int_equal(f0, 0);

    /* Rounds by time now: the end is committed. */
    const char *timed[] = {"checkpoint.interval.ms=300", NULL};
    p = h_stage_start(conf, timed, NULL);
    h_wait_said(p, H_SAID_ASSIGNED, 1, 20000);
    assert_int_equal(logged(p, H_SAID_ASSIGNED, "audit_lookups"), l0);
    assert_int_equal(logged(p, H_SAID_ASSIGNED, "audit_false_positives"),
                     f0);
    long long fwd = logged(p, H_SAID_ASSIGNED, "already_forwarded");
    if (fwd <= 0)
        h_stage_fail(p, "the crash left no forwarded record to replay");
    h_proc *procs[] = {p, NULL};
    int64_t end = KEYS + (KEYS - AGAIN_FROM);
    h_wait_committed(fx->bs, GROUP, "in", 1, &end, procs, 60000, NULL,
                     NULL);
    h_stage_stop(p);

    /* No key twice in the output, every key there. */
    h_record_list out = {0};
    H_CHECK(h_consume_all(fx->bs, "out", H_CONSUME_MS, &out));
    expect_copies(&out, "k", KEYS, 1);
    h_record_list_free(&out);
    /* The replayed keys were noted, not looked up: no false positive when
     * they came again, and a lookup for every other key. */
    long long l1, f1;
    info_counts(ck, &l1, &f1);
    if (f1 != 0 || l1 != KEYS - fwd)
        fail_msg("after the restart: %lld lookups, %lld false positives; "
                 "want %lld (every key but the %lld replayed) and 0", l1, f1,
                 KEYS - fwd, fwd);
    free(ck);
    free(conf);
}

/* Test 4: a rollback (deliveries failing, exactly_once by replay) takes
 * the sample back to the checkpoint with the filter: the records the
 * rollback's replay finds delivered are noted, not looked up again, so
 * each of them is one lookup fewer than its key would count had the
 * sample kept what the failed stretch counted. */
static void test_rollback_counts(void **state)
{
    h_fixture *fx = *state;
    enum { CHUNK = 10000 };
    const char *eos[] = {"processing.guarantee=exactly_once",
                         "dedup.fpr=1e-9", "dedup.audit.rate=1",
                         "producer.message.timeout.ms=3000",
                         "producer.retries=2", NULL};
    char *conf = write_conf(fx, eos);
    produce_keys(fx, "a", CHUNK, 0, 0);
    h_proc *p = run_to(fx, conf, CHUNK, NULL);
    /* Paused, a second chunk arrives; once part of it is out, every
     * Produce fails. */
    rd_kafka_t *q = h_query_client(h_kafka_conf(fx->bs));
    assert_non_null(q);
    H_CHECK(h_process_kill(p, SIGSTOP));
    produce_keys(fx, "b", 5 * CHUNK, 0, 0);
    H_CHECK(h_process_kill(p, SIGCONT));
    h_proc *procs[] = {p, NULL};
    h_wait_out(q, "out", 1, procs, CHUNK + 2000, 60000);
    H_CHECK(h_broker_control(fx->broker,
                             "push-errors Produce 30 NOT_ENOUGH_REPLICAS"));
    h_wait_said(p, H_SAID_ROLLBACK, 1, 60000);
    H_CHECK(h_broker_control(fx->broker, "clear-errors Produce"));
    int64_t end = 6 * CHUNK;
    h_wait_committed(fx->bs, GROUP, "in", 1, &end, procs, 60000, NULL,
                     NULL);
    h_stage_stop(p);
    rd_kafka_destroy(q);
    uint64_t replayed = 0;
    for (const char *l = h_process_stderr(p);
         (l = strstr(l, H_SAID_REPLAYED)); l++)
        replayed += (uint64_t)h_log_int(l, "records");
    if (replayed == 0)
        h_stage_fail(p, "the rollback found nothing delivered to replay");
    char *ck = h_strdupf("%s/ck", fx->dir);
    long long lookups, fps;
    info_counts(ck, &lookups, &fps);
    if (lookups != 6 * CHUNK - (long long)replayed || fps != 0)
        fail_msg("after a rollback: %lld lookups, %lld false positives; "
                 "want %lld (a key each but the %llu replayed) and none",
                 lookups, fps, 6LL * CHUNK - (long long)replayed,
                 (unsigned long long)replayed);
    free(ck);
    free(conf);
}

/* Test 5: a windowed filter's sample forgets what the window forgets.  A
 * sample that forgot nothing would count KEYS lookups, not 2 KEYS: the
 * second copies would be keys it holds. */
static void test_window_forgets(void **state)
{
    h_fixture *fx = *state;
    enum { KEYS = 2000, WINDOW_MS = 1000 };
    const int64_t t0 = INT64_C(1700000000000);
    const char *windowed[] = {"dedup.window.ms=1000",
                              "dedup.window.generations=4",
                              "dedup.fpr=1e-9", "dedup.audit.rate=1", NULL};
    char *conf = write_conf(fx, windowed);
    produce_at(fx, "w", 0, KEYS, t0);
    produce_at(fx, "w", 0, KEYS, t0 + 10 * WINDOW_MS);
    produce_at(fx, "w", 0, KEYS / 2, t0 + 10 * WINDOW_MS + 100);
    h_proc *p = run_to(fx, conf, 2 * KEYS + KEYS / 2, NULL);
    h_stage_stop(p);
    h_record_list out = {0};
    H_CHECK(h_consume_all(fx->bs, "out", H_CONSUME_MS, &out));
    expect_copies(&out, "w", KEYS, 2); /* once a window */
    h_record_list_free(&out);
    char *ck = h_strdupf("%s/ck", fx->dir);
    long long lookups, fps;
    info_counts(ck, &lookups, &fps);
    if (lookups != 2 * KEYS || fps != 0)
        fail_msg("windowed: %lld lookups, %lld false positives; want %d (a "
                 "key each window) and none", lookups, fps, 2 * KEYS);
    free(ck);
    free(conf);
}

int main(void)
{
    h_test_main("test_stage_audit", "TEST_STAGE_AUDIT_FILTER",
                "TEST_STAGE_AUDIT_VERBOSE", NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_undersized_warns_and_rescues,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_undersized_rescue_off, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_crash_restart_counts, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_rollback_counts, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_window_forgets, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
