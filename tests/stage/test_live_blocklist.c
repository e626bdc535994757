/*
 * test_live_blocklist.c -- live blocklists (blocklist.NAME.topic) end to
 * end: the real `bloomstage run` and `bloomstage blocklist add|remove|load`
 * processes against a broker, the list changed while the stage runs and
 * while it is stopped, every input record's fate checked against what the
 * list was when the record was processed.
 *
 * Built twice (tests/blocklist.cmake), one source so the scenarios are
 * written once: test_live_blocklist against `bloomstage mock-broker`
 * (fast; fault injection for /ready), test_kafka_blocklist
 * (BS_REAL_KAFKA) against one Apache Kafka node (realkafka.h), where the
 * list topic is really compacted and the stage checks its cleanup.policy.
 *
 * What must hold:
 *   - add while running: records with the entry are dropped from a moment
 *     on, and forwarded again after a remove; along the input the fate
 *     switches exactly once per change, in order (a record is checked
 *     against the list as of the moment it is processed).  Each change
 *     must take effect (a record made after it has its fate in the output
 *     at read_committed) within H_OUTPUT_MS before the next one is made,
 *     one of them made while the stage is paused (SIGSTOP, as a loaded
 *     machine's scheduler may): a stage that stalls is slow, not wrong,
 *     and a change it reads together with the next one is one no record
 *     could see.  The update latency -- creation time of the first record
 *     dropped minus the creation time of the add record, and the same for
 *     removes -- is printed per round with its spread, a measurement
 *     (docs/configuration.md's figures), not a bound;
 *   - a base file plus the topic: file entries are blocked, a tombstone
 *     removes a file entry as it removes a topic entry, an entry re-added
 *     after its tombstone is blocked; malformed list records (null key --
 *     mock only, Kafka refuses one on a compacted topic --, empty key, a
 *     key over 16384 bytes, an empty value) are skipped and
 *     counted by reason in /metrics, and change nothing;
 *   - the list is read to its end before any input is processed: input
 *     written before the stage starts is routed by the final list, record
 *     by record (a record processed against a partial list would be
 *     blocked by an entry whose tombstone comes later); a restart after
 *     changes made while stopped routes by the new list;
 *   - a missing list topic (and on Kafka, a non-compacted one) stops
 *     start-up with exit 1 naming the list and the topic;
 *   - /ready answers 503 naming the list until its topic is read to its
 *     end (mock: the list consumer's fetches failed for a while);
 *   - a bulk load (`blocklist load`, BS_BL_ENTRIES entries, default
 *     100,000) is bootstrapped whole: entries in /metrics, records routed;
 *     load and bootstrap times printed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "support.h"

#ifdef BS_REAL_KAFKA
#define NAME "test_kafka_blocklist"
#define LAT_ROUNDS 4
#define g_cluster h_kgroup_cluster()
static const char *const *g_read_conf = H_READ_COMMITTED;
#else
#define NAME "test_live_blocklist"
#define g_cluster NULL
#define LAT_ROUNDS 6
static const char *const *g_read_conf = NULL;
#endif
#define LAT_WINDOW_MS 3000 /* records fed after each change, at least */
#define REFUSE_MS 30000
#define READY_WAIT_MS 60000

typedef struct env {
    h_fixture h;
    char in[64], out[64], rej[64], lst[64], group[64];
    char *conf;
    rd_kafka_t *q;
} env;

static int env_cleanup(h_fixture *fx)
{
    env *e = (env *)fx;
    if (e->q)
        rd_kafka_destroy(e->q);
    free(e->conf);
    return 0;
}

static void create_topic(env *e, const char *topic, int parts, bool compact)
{
    static const char *const compacted[] = {"cleanup.policy=compact", NULL};
    static const char *const deleting[] = {"cleanup.policy=delete", NULL};
    H_CHECK(h_fixture_topic(&e->h, g_cluster, topic, parts,
                            compact ? compacted : deleting));
}

/* A broker with NAME-in, -out, -rej (1 partition each: one order to check)
 * and the list topic NAME-lst (lparts partitions, compacted), and the
 * stage's configuration with blocklist x on it (base file `base` if not
 * NULL, keyed by the record key; dedup by value, so repeated keys are not
 * duplicates). */
static env *env_new(const char *name, int lparts, const char *base,
                    const char *extra)
{
    h_fixture *fx = NULL;
    H_CHECK(h_fixture_new_on(g_cluster, sizeof(env), env_cleanup, &fx));
    env *e = (env *)fx;
    snprintf(e->in, sizeof e->in, "%s-in", name);
    snprintf(e->out, sizeof e->out, "%s-out", name);
    snprintf(e->rej, sizeof e->rej, "%s-rej", name);
    snprintf(e->lst, sizeof e->lst, "%s-lst", name);
    snprintf(e->group, sizeof e->group, "%s", name);
    create_topic(e, e->in, 1, false);
    create_topic(e, e->out, 1, false);
    create_topic(e, e->rej, 1, false);
    create_topic(e, e->lst, lparts, true);
    char *basekv = base ? h_strdupf("blocklist.x.path=%s\n", base)
                        : h_xstrdup("");
    char *text = h_strdupf(
        "input.topics=%s\noutput.topic=%s\nrejected.topic=%s\n"
        "consumer.group.id=%s\nkafka.bootstrap.servers=%s\n"
        "checkpoint.dir=%s/ckpt\ncheckpoint.interval.ms=500\n"
        "consumer.fetch.wait.max.ms=50\n"
        "# After a member leaves, the mock (2.0.2) holds the next join for\n"
        "# the group's session timeout; 6 s is the broker's minimum.\n"
        "consumer.session.timeout.ms=6000\nconsumer.heartbeat.interval.ms=1000\n"
        "dedup.key=value\n"
        "blocklist.x.topic=%s\nblocklist.x.key=key\nblocklist.x.fpr=1e-9\n"
        "%smetrics.listen=127.0.0.1:0\nlog.stats.interval.ms=0\n%s",
        e->in, e->out, e->rej, e->group, e->h.bs, e->h.dir, e->lst, basekv,
        extra ? extra : "");
    e->conf = h_strdupf("%s/stage.conf", e->h.dir);
    H_CHECK(h_write_file(e->conf, text));
    free(text);
    free(basekv);
    e->q = h_query_client(h_kafka_conf(e->h.bs));
    assert_non_null(e->q);
    return e;
}

/* `bloomstage blocklist VERB x ARGS... -c conf`, which must exit 0. */
static void bl_cmd(env *e, const char *verb, const char *const *args,
                   size_t n)
{
    const char **argv = h_xcalloc(n + 7, sizeof(char *));
    size_t k = 0;
    argv[k++] = "blocklist";
    argv[k++] = verb;
    argv[k++] = "x";
    for (size_t i = 0; i < n; i++)
        argv[k++] = args[i];
    argv[k++] = "-c";
    argv[k++] = e->conf;
    h_bs_cmd(argv, 0);
    free(argv);
}

/* bl_cmd with entries PREFIX-from .. PREFIX-(to-1). */
static void bl_range(env *e, const char *verb, const char *prefix, int from,
                     int to)
{
    size_t n = (size_t)(to - from);
    char **names = h_xcalloc(n, sizeof(char *));
    for (size_t i = 0; i < n; i++)
        names[i] = h_strdupf("%s-%d", prefix, from + (int)i);
    bl_cmd(e, verb, (const char *const *)names, n);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

static void read_topic(env *e, const char *topic, h_record_list *l)
{
    h_record_list_free(l);
    H_CHECK(h_consume_all_conf(e->h.bs, topic, H_OUTPUT_MS, g_read_conf, l));
}

/* GET path; the status, and the body into *body (caller frees) if not
 * NULL.  -1 if nothing answered. */
static int http_get(unsigned port, const char *path, char **body)
{
    h_http_resp r;
    char err[256];
    if (h_http_request(port, "GET", path, &r, err, sizeof err) != 0)
        return -1;
    int st = r.status;
    if (body)
        *body = h_xstrdup(r.body ? r.body : "");
    h_http_resp_free(&r);
    return st;
}

/* Polls /ready until 200; the stage must stay up. */
static void wait_ready(h_proc *p, unsigned port)
{
    double t0 = h_now_s();
    while (http_get(port, "/ready", NULL) != 200) {
        h_stage_alive(p, "waiting for /ready");
        if ((h_now_s() - t0) * 1000 > READY_WAIT_MS)
            h_stage_fail(p, "/ready not 200 within %d s", READY_WAIT_MS / 1000);
        h_nap(50);
    }
}

/* The fate of input record i: 1 forwarded, 2 blocked by x, found by the
 * value (dedup.key=value; values are unique). */
typedef struct fates {
    char **val;
    int *fate;
    int64_t *ts;
    size_t n;
} fates;

static void fates_free(fates *f)
{
    for (size_t i = 0; i < f->n; i++)
        free(f->val[i]);
    free(f->val);
    free(f->fate);
    free(f->ts);
}

/* The index N of a value "v-N" (the order records were made in), or -1. */
static long seq_of(const void *v, size_t len)
{
    char buf[32];
    if (len == 0 || len >= sizeof buf)
        return -1;
    memcpy(buf, v, len);
    buf[len] = '\0';
    if (strncmp(buf, "v-", 2) != 0)
        return -1;
    return strtol(buf + 2, NULL, 10);
}

static int find_val(const fates *f, const void *v, size_t len)
{
    long i = seq_of(v, len);
    return i >= 0 && (size_t)i < f->n ? (int)i : -1;
}

/* Reads in, out and rej: every input record is in exactly one of out and
 * rej (rej: reason blocklist:x). */
static void read_fates(env *e, fates *f)
{
    h_record_list in = {0}, out = {0}, rej = {0};
    read_topic(e, e->in, &in);
    read_topic(e, e->out, &out);
    read_topic(e, e->rej, &rej);
    memset(f, 0, sizeof(*f));
    f->n = in.n;
    f->val = h_xcalloc(in.n, sizeof(char *));
    f->fate = h_xcalloc(in.n, sizeof(int));
    f->ts = h_xcalloc(in.n, sizeof(int64_t));
    for (size_t i = 0; i < in.n; i++) {
        int k = find_val(f, in.recs[i].value, in.recs[i].value_len);
        assert_int_equal(k, (int)i); /* produced in order, one partition */
        f->val[i] = h_xstrdup(in.recs[i].key ? in.recs[i].key : "");
        f->ts[i] = in.recs[i].timestamp;
    }
    for (size_t i = 0; i < out.n; i++) {
        int k = find_val(f, out.recs[i].value, out.recs[i].value_len);
        assert_true(k >= 0);
        assert_int_equal(f->fate[k], 0);
        f->fate[k] = 1;
    }
    for (size_t i = 0; i < rej.n; i++) {
        int k = find_val(f, rej.recs[i].value, rej.recs[i].value_len);
        assert_true(k >= 0);
        assert_int_equal(f->fate[k], 0);
        const h_header *r = h_header_last(&rej.recs[i], "bloomstage-reason");
        assert_non_null(r);
        assert_non_null(r->value);
        assert_int_equal(r->value_len, strlen("blocklist:x"));
        assert_memory_equal(r->value, "blocklist:x", r->value_len);
        f->fate[k] = 2;
    }
    for (size_t i = 0; i < in.n; i++)
        if (f->fate[i] == 0)
            fail_msg("input record %zu (key %s) is in neither %s nor %s", i,
                     f->val[i], e->out, e->rej);
    h_record_list_free(&in);
    h_record_list_free(&out);
    h_record_list_free(&rej);
}

/* Records key/"v-<seq>" produced from *seq on. */
static void produce_keys(env *e, const char *const *keys, size_t n,
                         size_t *seq)
{
    h_record *r = h_xcalloc(n, sizeof(*r));
    char **vals = h_xcalloc(n, sizeof(char *));
    for (size_t i = 0; i < n; i++) {
        vals[i] = h_strdupf("v-%zu", (*seq)++);
        r[i] = h_rec(keys[i], vals[i]);
    }
    H_CHECK(h_produce(e->h.bs, e->in, 0, r, n));
    for (size_t i = 0; i < n; i++)
        free(vals[i]);
    free(vals);
    free(r);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void print_spread(const char *what, int64_t *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_i64);
    printf("%s: update latency over %d rounds: min %" PRId64 " ms, median "
           "%" PRId64 " ms, max %" PRId64 " ms (",
           NAME, n, v[0], v[n / 2], v[n - 1]);
    for (int i = 0; i < n; i++)
        printf("%s%" PRId64, i ? " " : "", v[i]);
    printf(") [%s]\n", what);
}

/* ---- add and remove while running: the fate switches, and how soon ---- */

/* Whether topic holds, at read_committed, a record made at or after input
 * record `from`. */
static bool holds_from(env *e, const char *topic, size_t from)
{
    h_record_list l = {0};
    read_topic(e, topic, &l);
    bool found = false;
    for (size_t i = 0; i < l.n && !found; i++)
        found = seq_of(l.recs[i].value, l.recs[i].value_len) >= (long)from;
    h_record_list_free(&l);
    return found;
}

static void test_add_remove_latency(void **state)
{
    (void)state;
    env *e = env_new("lat", 1, NULL, NULL);
    h_proc *p = h_stage_start(e->conf, NULL, NULL);
    unsigned port = h_stage_metrics_port(p, 20000);
    wait_ready(p, port);

    /* Idempotent: the input's order is the order the records were made
     * in, even across retries (the analysis reads it back as such). */
    rd_kafka_conf_t *pc = h_conf_pairs(h_kafka_conf(e->h.bs), "linger.ms",
                                       "0", "enable.idempotence", "true",
                                       NULL);
    h_producer *pr = NULL;
    H_CHECK(h_producer_new(pc, 0, &pr));
    size_t seq = 0;
    char val[32];
    const char *verb[2] = {"add", "remove"};
    /* The last add is made while the stage is paused (until LAT_WINDOW_MS
     * after the command exits): it reads the change late, and must still
     * apply it, in order, to the records it processes from then on. */
    const int paused = 2 * LAT_ROUNDS - 2;
    for (int change = 0; change < 2 * LAT_ROUNDS; change++) {
        /* The change runs as its own process while records keep coming:
         * one every ~2 ms, each with its creation time.  Records go on
         * coming until LAT_WINDOW_MS after it exits and until it took
         * effect: a record made since the command started (seq `from` on)
         * has the change's fate at read_committed.  The previous change
         * had taken effect by a record made before `from`, so every record
         * from `from` on is processed after it: that record's fate is this
         * change's doing. */
        const char *args[] = {"blocklist", verb[change % 2], "x", "victim",
                              "-c", e->conf, NULL};
        const char *want = change % 2 == 0 ? e->rej : e->out;
        size_t from = seq;
        if (change == paused)
            H_CHECK(h_process_kill(p, SIGSTOP));
        h_proc *cli = h_bs_spawn(args, NULL);
        double t_end = -1, t_check = 0, t0 = h_now_s();
        for (;;) {
            snprintf(val, sizeof val, "v-%zu", seq++);
            h_record r = h_rec("victim", val);
            H_CHECK(h_producer_send(pr, e->in, 0, &r));
            h_producer_poll(pr);
            h_sleep_ms(2);
            int st;
            double now = h_now_s();
            if (t_end < 0 && h_process_peek(cli, &st) == 0) {
                if (st != 0)
                    h_stage_fail(cli, "blocklist %s exited %s",
                                 verb[change % 2], h_status_str(st));
                t_end = now + LAT_WINDOW_MS / 1000.0;
            }
            if (t_end < 0 || now < t_end || now < t_check)
                continue;
            if (change == paused && t_check == 0)
                H_CHECK(h_process_kill(p, SIGCONT));
            if (holds_from(e, want, from))
                break;
            if ((now - t0) * 1000 > H_OUTPUT_MS)
                h_stage_fail(p, "change %d (%s) did not take effect within "
                             "%d s: no record made since `blocklist %s` "
                             "started is in %s", change, verb[change % 2],
                             H_OUTPUT_MS / 1000, verb[change % 2], want);
            t_check = now + 0.2;
        }
        h_proc_release(cli);
        h_stage_alive(p, "feeding");
    }
    H_CHECK(h_producer_close(pr, "victim records", 30000));
    h_wait_out(e->q, e->rej, 1, (h_proc *const[]){p, NULL}, 1, H_OUTPUT_MS);
    /* Everything fed, routed somewhere. */
    int64_t total = 0, out = 0, rej = 0;
    double t0 = h_now_s();
    do {
        h_nap(200);
        out = h_count_committed(e->h.bs, e->out); /* not markers */
        rej = h_count_committed(e->h.bs, e->rej);
        total = out + rej;
        if ((h_now_s() - t0) * 1000 > H_OUTPUT_MS)
            h_stage_fail(p, "%" PRId64 " of %zu records routed", total, seq);
    } while (total < (int64_t)seq);
    h_stage_stop(p);

    /* The changes' creation times, in order. */
    h_record_list lst = {0};
    read_topic(e, e->lst, &lst);
    assert_int_equal(lst.n, 2 * LAT_ROUNDS);
    fates f;
    read_fates(e, &f);
    assert_int_equal(f.n, seq);
    int64_t lat_add[LAT_ROUNDS], lat_rm[LAT_ROUNDS];
    size_t i = 0;
    for (size_t c = 0; c < lst.n; c++) {
        bool adding = lst.recs[c].value != NULL;
        assert_int_equal(adding, c % 2 == 0);
        int want = adding ? 2 : 1;
        /* Exactly one switch per change: find it... */
        while (i < f.n && f.fate[i] != want)
            i++;
        if (i == f.n)
            fail_msg("change %zu (%s) never took effect", c,
                     adding ? "add" : "remove");
        int64_t lat = f.ts[i] - lst.recs[c].timestamp;
        if (c + 1 < lst.n && f.ts[i] >= lst.recs[c + 1].timestamp)
            fail_msg("change %zu took effect only after the next change",
                     c);
        (adding ? lat_add : lat_rm)[c / 2] = lat;
        /* ...and no flapping back before the next change. */
        size_t j = i;
        while (j < f.n && f.fate[j] == want)
            j++;
        if (c + 1 == lst.n)
            assert_int_equal(j, f.n);
        i = j;
    }
    print_spread("add -> first record dropped", lat_add, LAT_ROUNDS);
    print_spread("remove -> first record forwarded", lat_rm, LAT_ROUNDS);
    fates_free(&f);
    h_record_list_free(&lst);
}

/* ---- base file, tombstones, malformed records, restart ---------------- */

static void keys_range(char **keys, size_t *n, const char *prefix, int from,
                       int to)
{
    for (int i = from; i < to; i++)
        keys[(*n)++] = h_strdupf("%s-%d", prefix, i);
}

/* The model: is key on the list (base-50..199, t-0..9, t-50..299 after
 * the first part; the restart's changes on top when `later`). */
static bool listed(const char *key, bool later)
{
    int i;
    if (sscanf(key, "base-%d", &i) == 1)
        return i >= 50;
    if (sscanf(key, "t-%d", &i) == 1)
        return later && i >= 50 && i < 60 ? false : (i < 10 || i >= 50);
    if (sscanf(key, "other-%d", &i) == 1)
        return later && i < 10;
    return false;
}

static void check_fates(const fates *f, size_t from, bool later)
{
    for (size_t i = from; i < f->n; i++)
        if (f->fate[i] != (listed(f->val[i], later) ? 2 : 1))
            fail_msg("record %zu key %s: %s, but the list says %s", i,
                     f->val[i], f->fate[i] == 2 ? "blocked" : "forwarded",
                     listed(f->val[i], later) ? "blocked" : "forwarded");
}

static void test_base_tombstones_restart(void **state)
{
    (void)state;
    char *dir = NULL;
    H_CHECK(h_tmpdir_new(&dir));
    char *base = h_strdupf("%s/base.txt", dir);
    {
        size_t cap = 16 * 200 + 64, len = 0;
        char *text = h_xmalloc(cap);
        len += (size_t)snprintf(text, cap, "# the base list\n\n");
        for (int i = 0; i < 200; i++)
            len += (size_t)snprintf(text + len, cap - len, "base-%d\n", i);
        H_CHECK(h_write_file(base, text));
        free(text);
    }
    env *e = env_new("base", 2, base, NULL);
    /* The topic before the stage starts: a load, tombstones for topic and
     * file entries, re-adds, malformed records. */
    char *tfile = h_strdupf("%s/t.txt", e->h.dir);
    {
        size_t cap = 16 * 300, len = 0;
        char *text = h_xmalloc(cap);
        text[0] = '\0';
        for (int i = 0; i < 300; i++)
            len += (size_t)snprintf(text + len, cap - len, "t-%d\n", i);
        H_CHECK(h_write_file(tfile, text));
        free(text);
    }
    const char *largs[] = {tfile};
    bl_cmd(e, "load", largs, 1);
    bl_range(e, "remove", "t", 0, 50);
    bl_range(e, "remove", "base", 0, 50);
    bl_range(e, "add", "t", 0, 10);
    char *big = h_xmalloc(20001);
    memset(big, 'k', 20000);
    big[20000] = '\0';
    /* A null key only on the mock: Kafka refuses keyless records on a
     * compacted topic (INVALID_RECORD), so a list topic never holds one. */
    h_record bad[4] = {h_rec("", "1"), h_rec(big, "1"), h_rec("t-100", ""),
                       h_rec(NULL, "1")};
#ifdef BS_REAL_KAFKA
    const int nbad = 3;
#else
    const int nbad = 4;
#endif
    H_CHECK(h_produce(e->h.bs, e->lst, 0, bad, (size_t)nbad));
    free(big);

    /* Input written before the stage starts. */
    char *keys[700];
    size_t nk = 0, seq = 0;
    keys_range(keys, &nk, "base", 0, 200);
    keys_range(keys, &nk, "t", 0, 300);
    keys_range(keys, &nk, "other", 0, 100);
    produce_keys(e, (const char *const *)keys, nk, &seq);
    int64_t want_rej = 0;
    for (size_t i = 0; i < nk; i++)
        want_rej += listed(keys[i], false);

    h_proc *p = h_stage_start(e->conf, NULL, NULL);
    unsigned port = h_stage_metrics_port(p, 20000);
    h_wait_out_rej(p, e->h.bs, e->out, (int64_t)nk - want_rej, e->rej,
                   want_rej);
    wait_ready(p, port);
    h_expect_said(p, "source=list+topic");
    h_expect_said(p, "msg=\"blocklist entry skipped\"");
    assert_true(h_stage_metric(port, "bloomstage_blocklist_entries{list="
                               "\"x\"}") == 150 + 10 + 250);
    assert_true(h_stage_metric(port, "bloomstage_blocklist_skipped_total{list="
                               "\"x\",reason=\"empty-key\"}") == nbad - 2);
    assert_true(h_stage_metric(port, "bloomstage_blocklist_skipped_total{list="
                               "\"x\",reason=\"too-long\"}") == 1);
    assert_true(h_stage_metric(port, "bloomstage_blocklist_skipped_total{list="
                               "\"x\",reason=\"empty-value\"}") == 1);
    assert_true(h_stage_metric(port, "bloomstage_blocklist_loaded{list="
                               "\"x\"}") == 1);
    assert_true(h_stage_metric(port, "bloomstage_blocklist_lag{list="
                               "\"x\"}") == 0);
    assert_true(h_stage_metric(port, "bloomstage_blocklist_saturated_counters{"
                               "list=\"x\"}") == 0);
    assert_true(h_stage_metric(port, "bloomstage_records_dropped_total{"
                               "reason=\"blocklist\",list=\"x\"}") ==
                (double)want_rej);
    h_stage_stop(p);
    h_proc_release(p);
    fates f;
    read_fates(e, &f);
    check_fates(&f, 0, false);
    fates_free(&f);

    /* Changed while stopped; the restart must route by the new list. */
    bl_range(e, "add", "other", 0, 10);
    bl_range(e, "remove", "t", 50, 60);
    for (size_t i = 0; i < nk; i++)
        free(keys[i]);
    size_t first = seq;
    nk = 0;
    keys_range(keys, &nk, "other", 0, 20);
    keys_range(keys, &nk, "t", 50, 70);
    produce_keys(e, (const char *const *)keys, nk, &seq);
    int64_t rej_before = h_count_committed(e->h.bs, e->rej);
    int64_t out_before = h_count_committed(e->h.bs, e->out);
    p = h_stage_start(e->conf, NULL, NULL);
    h_wait_out_rej(p, e->h.bs, e->out, out_before + 10 + 10, e->rej,
                   rej_before + 10 + 10);
    h_stage_stop(p);
    read_fates(e, &f);
    check_fates(&f, first, true);
    fates_free(&f);
    for (size_t i = 0; i < nk; i++)
        free(keys[i]);
    free(tfile);
    free(base);
    (void)h_tmpdir_remove(dir);
    free(dir);
}

/* ---- start-up errors -------------------------------------------------- */

static void expect_refused(env *e, const char *const *xs,
                           const char *const *needles)
{
    h_proc *p = h_stage_start(e->conf, xs, NULL);
    int st = 0;
    if (h_process_wait(p, REFUSE_MS, &st) != 0)
        h_stage_fail(p, "the stage did not refuse to start");
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 1)
        h_stage_fail(p, "exit %s, want 1", h_status_str(st));
    for (size_t i = 0; needles[i]; i++)
        h_expect_said(p, needles[i]);
    assert_int_equal(h_topic_end(e->q, e->out, 1, NULL), 0);
    h_proc_release(p);
}

static void test_startup_errors(void **state)
{
    (void)state;
    env *e = env_new("err", 1, NULL, NULL);
    const char *missing[] = {"blocklist.x.topic=no-such-list", NULL};
    const char *want_missing[] = {"blocklist 'x'", "no-such-list",
                                  "must exist", NULL};
    expect_refused(e, missing, want_missing);
#ifdef BS_REAL_KAFKA
    create_topic(e, "err-deleting", 1, false);
    const char *del[] = {"blocklist.x.topic=err-deleting", NULL};
    const char *want_del[] = {"blocklist 'x'", "err-deleting",
                              "cleanup.policy=delete", NULL};
    expect_refused(e, del, want_del);
#endif
    /* The CLI refuses a missing topic too, and bad entries. */
    const char *cli[] = {"blocklist", "add", "x", "a", "-c", e->conf, "-X",
                         "blocklist.x.topic=no-such-list", NULL};
    h_proc *c = h_bs_cmd(cli, 1);
    assert_non_null(strstr(h_process_stderr(c), "no-such-list"));
    const char *empty[] = {"blocklist", "add", "x", "", "-c", e->conf, NULL};
    c = h_bs_cmd(empty, 2);
    assert_non_null(strstr(h_process_stderr(c), "an empty entry"));
    const char *nolist[] = {"blocklist", "add", "y", "a", "-c", e->conf, NULL};
    c = h_bs_cmd(nolist, 2);
    assert_non_null(strstr(h_process_stderr(c), "no such blocklist"));
}

/* ---- /ready waits for the list (mock: fetches failed a while) --------- */

#ifndef BS_REAL_KAFKA
static void test_ready_waits_for_list(void **state)
{
    (void)state;
    env *e = env_new("ready", 1, NULL, NULL);
    const char *entries[] = {"a", "b", "c"};
    bl_cmd(e, "add", entries, 3);
    /* The stage's first fetches are the list consumer's (the group
     * consumer subscribes after the list is read): each failed fetch
     * backs off fetch.error.backoff.ms. */
    H_CHECK(h_broker_control(e->h.broker,
                             "push-errors Fetch 6 NOT_LEADER_FOR_PARTITION"));
    h_proc *p = h_stage_start(e->conf, NULL, NULL);
    unsigned port = h_stage_metrics_port(p, 20000);
    int n503 = 0;
    bool named = false;
    double t0 = h_now_s();
    for (;;) {
        /* The stage marks the list caught up before it logs so: a line
         * read before the request means the answer must not name it. */
        bool said = h_said(p, "blocklist topic read to its end");
        char *body = NULL;
        int st = http_get(port, "/ready", &body);
        bool names = st == 503 && strstr(body, "blocklist x") != NULL;
        free(body);
        if (st == 200)
            break;
        if (st == 503)
            n503++;
        named |= names;
        assert_false(names && said);
        h_stage_alive(p, "waiting for /ready");
        if ((h_now_s() - t0) * 1000 > READY_WAIT_MS)
            h_stage_fail(p, "/ready not 200 within %d s", READY_WAIT_MS / 1000);
        h_nap(20);
    }
    /* 200 only once the list was read. */
    h_expect_said(p, "blocklist topic read to its end");
    printf("%s: /ready answered 503 %d times before 200\n", NAME, n503);
    assert_true(named);
    h_stage_stop(p);
}
#endif

/* ---- a bulk load, bootstrapped ---------------------------------------- */

static void test_bulk_load(void **state)
{
    (void)state;
    const char *env_n = getenv("BS_BL_ENTRIES");
    long n = env_n ? atol(env_n) : 100000;
    assert_true(n >= 1000);
    char cap[80];
    snprintf(cap, sizeof cap, "blocklist.x.capacity=%ld\n", n);
    env *e = env_new("bulk", 4, NULL, cap);
    char *file = h_strdupf("%s/bulk.txt", e->h.dir);
    {
        FILE *fp = fopen(file, "w");
        assert_non_null(fp);
        for (long i = 0; i < n; i++)
            fprintf(fp, "spammer-%ld@example.com\n", i);
        assert_int_equal(fclose(fp), 0);
    }
    const char *largs[] = {file};
    double t0 = h_now_s();
    bl_cmd(e, "load", largs, 1);
    double load_s = h_now_s() - t0;

    /* 1000 records: every 100th entry of the list, and 500 not on it. */
    char *keys[1000];
    size_t nk = 0, seq = 0;
    for (int i = 0; i < 500; i++)
        keys[nk++] = h_strdupf("spammer-%ld@example.com",
                               (long)i * (n / 500));
    keys_range(keys, &nk, "fine", 0, 500);
    produce_keys(e, (const char *const *)keys, nk, &seq);

    h_proc *p = h_stage_start(e->conf, NULL, NULL);
    unsigned port = h_stage_metrics_port(p, 20000);
    h_wait_out_rej(p, e->h.bs, e->out, 500, e->rej, 500);
    h_wait_said(p, "blocklist topic read to its end", 1, 1000);
    const char *line = strstr(h_process_stderr(p),
                              "blocklist topic read to its end");
    double boot_s = 0;
    const char *sec = strstr(line, " seconds=");
    assert_non_null(sec);
    boot_s = atof(sec + 9);
    assert_int_equal(h_log_int(line, "entries"), n);
    assert_true(h_stage_metric(port, "bloomstage_blocklist_entries{list="
                               "\"x\"}") == (double)n);
    h_stage_stop(p);
    fates f;
    read_fates(e, &f);
    for (size_t i = 0; i < f.n; i++)
        assert_int_equal(f.fate[i], i < 500 ? 2 : 1);
    fates_free(&f);
    printf("%s: %ld entries: blocklist load %.2f s (%.0f entries/s), "
           "bootstrap at start-up %.2f s (%.0f entries/s)\n", NAME, n,
           load_s, (double)n / load_s, boot_s,
           boot_s > 0 ? (double)n / boot_s : 0.0);
    for (size_t i = 0; i < nk; i++)
        free(keys[i]);
    free(file);
}

#ifdef BS_REAL_KAFKA
#define group_setup h_kgroup_setup1
#define group_teardown h_kgroup_teardown
#define TEARDOWN h_kfixture_teardown
#else
#define group_setup NULL
#define group_teardown NULL
#define TEARDOWN h_fixture_teardown
#endif

int main(void)
{
    h_test_main(NAME, "BS_BL_ONLY", "BS_BL_VERBOSE", "BS_BL_STAGE_X");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_add_remove_latency, TEARDOWN),
        cmocka_unit_test_teardown(test_base_tombstones_restart, TEARDOWN),
        cmocka_unit_test_teardown(test_startup_errors, TEARDOWN),
#ifndef BS_REAL_KAFKA
        cmocka_unit_test_teardown(test_ready_waits_for_list, TEARDOWN),
#endif
        cmocka_unit_test_teardown(test_bulk_load, TEARDOWN),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
