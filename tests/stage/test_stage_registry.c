/*
 * test_stage_registry.c -- records as Schema Registry serializers write
 * them, through `bloomstage run`: Avro and Protobuf values in Confluent's
 * wire format, their schemas in a real registry (Apicurio, started by
 * scripts/registry through harness/registry.h), keyed with avro:/id,
 * protobuf:/id and key.avro:/id, and a domain blocklist on the address
 * field (blocklist.spam.match=domain, lower-cased).
 *
 * Shows, reading the output and rejected topics as downstream consumers
 * do (read_committed on Apache Kafka):
 *   - every unique id forwarded once, its repeats rejected as duplicates;
 *   - every address at a listed domain or below it (any case) blocked, and
 *     no look-alike (spam.example.org, notspam.example, the bare
 *     "example");
 *   - each record that cannot be read rejected once, its reason saying why
 *     (wrong magic byte, a schema id the registry does not know, a
 *     payload cut short, a schema of another type, no value), none
 *     forwarded;
 *   - the registry away at start-up (a proxy resetting every connection
 *     for 15 s): nothing forwarded or rejected meanwhile, /ready 503
 *     naming the registry, the waiting partitions counted; then, the
 *     registry back, the exact output with nothing lost or repeated.
 * The test records are encoded here (harness/registry.h); fm_avro and
 * fm_protobuf, which the stage reads them with, are checked against
 * avro-c and protoc's encodings in tests/unit, so a wrong encoding here
 * fails this test rather than passing it.
 *
 * Built twice: test_stage_registry on the mock cluster (label registry),
 * test_kafka_registry on one Apache Kafka node with exactly_once
 * (BS_REAL_KAFKA; label kafka).
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

#ifdef BS_REAL_KAFKA
#define NAME "test_kafka_registry"
#define g_cluster h_kgroup_cluster()
static const char *const *g_read_conf = H_READ_COMMITTED;
#define GUARANTEE "exactly_once"
#else
#define NAME "test_stage_registry"
#define g_cluster NULL
static const char *const *g_read_conf = NULL;
#define GUARANTEE "at_least_once"
#endif

#define NPARTS 3
#define AWAY_S 15
#define READY_WAIT_MS 60000

/* ---- the registry and its schemas ------------------------------------ */

static const char avro_event[] =
    "{\"type\":\"record\",\"name\":\"Event\",\"namespace\":\"bs.t\","
    "\"fields\":[{\"name\":\"id\",\"type\":\"string\"},"
    "{\"name\":\"email\",\"type\":[\"null\",\"string\"]},"
    "{\"name\":\"n\",\"type\":\"long\"}]}";
/* Event is the second message: records name it by message index [1]. */
static const char proto_event[] =
    "syntax = \"proto3\";\npackage bs.t;\n"
    "message Other { int32 x = 1; }\n"
    "message Event { string id = 1; string email = 2; int64 n = 3; }\n";
static const char json_event[] =
    "{\"$schema\":\"http://json-schema.org/draft-07/schema#\","
    "\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\"}}}";

static char g_dir[64];
static h_registry g_reg;
static int32_t id_avro, id_proto, id_json;

static int group_setup(void **state)
{
#ifdef BS_REAL_KAFKA
    if (h_kgroup_setup1(state) != 0)
        return -1;
#else
    (void)state;
#endif
    snprintf(g_dir, sizeof g_dir, "/tmp/bs-sreg-XXXXXX");
    char reg_dir[128];
    if (!mkdtemp(g_dir))
        return -1;
    snprintf(reg_dir, sizeof reg_dir, "%s/registry", g_dir);
    if (h_registry_start(&g_reg, reg_dir, NULL, NULL) != 0 ||
        (id_avro = h_registry_post(&g_reg, "events-avro-value", "AVRO",
                                   avro_event, NULL)) < 0 ||
        (id_proto = h_registry_post(&g_reg, "events-proto-value", "PROTOBUF",
                                    proto_event, NULL)) < 0 ||
        (id_json = h_registry_post(&g_reg, "events-json-value", "JSON",
                                   json_event, NULL)) < 0) {
        fprintf(stderr, "%s: %s\n", NAME, h_last_error());
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    int rc = h_registry_stop(&g_reg);
    if (rc != 0)
        fprintf(stderr, "%s: %s\n", NAME, h_last_error());
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd) != 0)
        rc = -1;
#ifdef BS_REAL_KAFKA
    if (h_kgroup_teardown(state) != 0)
        rc = -1;
#else
    (void)state;
#endif
    return rc;
}

/* ---- records ----------------------------------------------------------- */

typedef enum fmt { AVRO, PROTOBUF } fmt;

/* An Event in `f`'s wire format under schema id `schema` (email NULL: a
 * null union branch for Avro, the field left out for Protobuf). */
static size_t encode(fmt f, int32_t schema, const char *id, const char *email,
                     int64_t n, uint8_t *out)
{
    size_t o = h_frame(out, schema);
    if (f == AVRO) {
        o += h_avro_string(out + o, id);
        if (email) {
            o += h_avro_long(out + o, 1);
            o += h_avro_string(out + o, email);
        } else {
            o += h_avro_long(out + o, 0);
        }
        return o + h_avro_long(out + o, n);
    }
    out[o++] = 0x02; /* message indexes: one (zigzag 1) ... */
    out[o++] = 0x02; /* ... index 1 (zigzag): Event */
    o += h_pb_bytes(out + o, 1, id, strlen(id));
    if (email)
        o += h_pb_bytes(out + o, 2, email, strlen(email));
    out[o++] = 3 << 3; /* field 3, varint */
    return o + h_pb_varint(out + o, (uint64_t)n);
}

/* The stream: U ids, id i sent 1 + i % 3 times (its repeats after every
 * first copy), at an address that depends on i % 6. */
#define U 240
static const char *const domains[6] = {
    "MX3.Spam.Example",   /* a subdomain of a listed domain: blocked */
    "spam.example",       /* listed: blocked */
    "notspam.example",    /* a look-alike: forwarded */
    "spam.example.org",   /* a look-alike: forwarded */
    "example",            /* the bare parent: forwarded */
    NULL,                 /* no address: forwarded (nothing to look up) */
};
static bool blocked(int i) { return i % 6 < 2; }

typedef struct stream {
    h_record recs[U * 3];
    h_header hdr[U * 3];
    uint8_t bytes[U * 3][128];
    char keys[U * 3][16];
    size_t n;
} stream;

/* The records of the stream, keyed by id (so an id's copies share a
 * partition); on_key: the record key is the id as Avro in Confluent
 * framing (key.avro:/id) and the value plain text.  Header tid names the
 * id on every copy. */
static stream *stream_new(fmt f, bool on_key)
{
    stream *st = h_xcalloc(1, sizeof(*st));
    for (int copy = 0; copy < 3; copy++)
        for (int i = 0; i < U; i++) {
            if (copy > i % 3)
                continue;
            size_t k = st->n++;
            snprintf(st->keys[k], sizeof st->keys[k], "u%d", i);
            char email[64] = "";
            if (domains[i % 6])
                snprintf(email, sizeof email, "u%d@%s", i, domains[i % 6]);
            size_t len = encode(f, f == AVRO ? id_avro : id_proto,
                                st->keys[k], domains[i % 6] ? email : NULL,
                                copy, st->bytes[k]);
            h_record *r = &st->recs[k];
            *r = h_rec(st->keys[k], NULL);
            r->value = st->bytes[k];
            r->value_len = len;
            if (on_key) {
                uint8_t *kb = st->bytes[k] + 64;
                r->key = kb;
                r->key_len = encode(AVRO, id_avro, st->keys[k], NULL, 0, kb);
                r->value = st->keys[k];
                r->value_len = strlen(st->keys[k]);
            }
            st->hdr[k] = (h_header){"tid", st->keys[k], strlen(st->keys[k])};
            r->headers = &st->hdr[k];
            r->n_headers = 1;
        }
    return st;
}

static size_t expect_out(void)
{
    size_t n = 0;
    for (int i = 0; i < U; i++)
        n += !blocked(i);
    return n;
}

/* ---- the environment --------------------------------------------------- */

typedef struct env {
    h_fixture h;
    char in[64], out[64], rej[64];
    char *conf;
    h_proxy *proxy;
    stream *st; /* the test's records (freed with the fixture) */
} env;

static int env_cleanup(h_fixture *fx)
{
    env *e = (env *)fx;
    h_proxy_free(e->proxy);
    free(e->st);
    free(e->conf);
    return 0;
}

static void create_topic(env *e, const char *topic, int parts)
{
    H_CHECK(h_fixture_topic(&e->h, g_cluster, topic, parts, NULL));
}

/* Topics NAME-in (NPARTS), -out, -rej; the stage's configuration with
 * dedup.key `key`, blocklist spam (spam.example, by domain) on `list_key`
 * (NULL: none), the registry at `url`, and `extra` lines. */
static env *env_new(const char *name, const char *key, const char *list_key,
                    const char *url, const char *extra)
{
    h_fixture *fx = NULL;
    H_CHECK(h_fixture_new_on(g_cluster, sizeof(env), env_cleanup, &fx));
    env *e = (env *)fx;
    snprintf(e->in, sizeof e->in, "%s-in", name);
    snprintf(e->out, sizeof e->out, "%s-out", name);
    snprintf(e->rej, sizeof e->rej, "%s-rej", name);
    create_topic(e, e->in, NPARTS);
    create_topic(e, e->out, 1);
    create_topic(e, e->rej, 1);
    char *list = h_strdupf("%s/spam.txt", e->h.dir);
    H_CHECK(h_write_file(list, "# listed domains\nSpam.Example\n"));
    char *lines = list_key
                      ? h_strdupf("blocklist.spam.path=%s\n"
                                  "blocklist.spam.key=%s\n"
                                  "blocklist.spam.match=domain\n"
                                  "blocklist.spam.normalize=lower\n",
                                  list, list_key)
                      : h_xstrdup("");
    char *text = h_strdupf(
        "input.topics=%s\noutput.topic=%s\nrejected.topic=%s\n"
        "consumer.group.id=%s\nkafka.bootstrap.servers=%s\n"
        "checkpoint.dir=%s/ckpt\ncheckpoint.interval.ms=500\n"
        "processing.guarantee=" GUARANTEE "\n"
        "consumer.session.timeout.ms=6000\n"
        "consumer.heartbeat.interval.ms=1000\n"
        "dedup.key=%s\ndedup.on.missing.key=reject\n%s"
        "schema.registry.url=%s\nschema.registry.timeout.ms=3000\n"
        "metrics.listen=127.0.0.1:0\nlog.stats.interval.ms=0\n%s",
        e->in, e->out, e->rej, name, e->h.bs, e->h.dir, key, lines, url,
        extra ? extra : "");
    e->conf = h_strdupf("%s/stage.conf", e->h.dir);
    H_CHECK(h_write_file(e->conf, text));
    free(text);
    free(lines);
    free(list);
    return e;
}

static void produce(env *e, const h_record *recs, size_t n)
{
    H_CHECK(h_produce(e->h.bs, e->in, RD_KAFKA_PARTITION_UA, recs, n));
}

static void read_topic(env *e, const char *topic, h_record_list *l)
{
    h_record_list_free(l);
    H_CHECK(h_consume_all_conf(e->h.bs, topic, H_OUTPUT_MS, g_read_conf, l));
}

/* tid of r as a string (its header), "" if none. */
static const char *tid(const h_record *r, char *buf, size_t n)
{
    return h_header_str(r, "tid", buf, n);
}

/* The stream's verdicts in out and rej: each id not blocked once in out;
 * its other copies in rej as duplicates; each copy of a blocked id in rej
 * as blocklist:spam; `bad` more records in rej with a missing-key
 * reason, none of them in out. */
static void check_stream(env *e, const stream *st, size_t bad)
{
    static int seen_out[U], seen_dup[U], seen_block[U];
    memset(seen_out, 0, sizeof seen_out);
    memset(seen_dup, 0, sizeof seen_dup);
    memset(seen_block, 0, sizeof seen_block);
    h_record_list out = {0}, rej = {0};
    read_topic(e, e->out, &out);
    read_topic(e, e->rej, &rej);
    char b[32];
    for (size_t i = 0; i < out.n; i++) {
        int id = -1;
        if (sscanf(tid(&out.recs[i], b, sizeof b), "u%d", &id) != 1 ||
            id < 0 || id >= U)
            fail_msg("output record %zu has tid '%s'", i, b);
        seen_out[id]++;
    }
    size_t missing = 0;
    for (size_t i = 0; i < rej.n; i++) {
        assert_non_null(h_header_last(&rej.recs[i], "bloomstage-reason"));
        char reason[256];
        h_header_str(&rej.recs[i], "bloomstage-reason", reason, sizeof reason);
        int id = -1;
        if (strncmp(reason, "missing-key", 11) == 0) {
            missing++;
            continue;
        }
        if (sscanf(tid(&rej.recs[i], b, sizeof b), "u%d", &id) != 1 ||
            id < 0 || id >= U)
            fail_msg("rejected record %zu (%s) has tid '%s'", i, reason, b);
        if (strcmp(reason, "duplicate") == 0)
            seen_dup[id]++;
        else if (strcmp(reason, "blocklist:spam") == 0)
            seen_block[id]++;
        else
            fail_msg("u%d rejected for '%s'", id, reason);
    }
    for (int i = 0; i < U; i++) {
        int copies = 1 + i % 3;
        if (blocked(i) && st) {
            if (seen_out[i] || seen_block[i] != copies || seen_dup[i])
                fail_msg("u%d (at %s): %d out, %d blocked, %d duplicates; "
                         "want all %d blocked", i, domains[i % 6],
                         seen_out[i], seen_block[i], seen_dup[i], copies);
        } else if (seen_out[i] != 1 || seen_dup[i] != copies - 1 ||
                   seen_block[i]) {
            fail_msg("u%d (at %s): %d out, %d duplicates, %d blocked; want 1 "
                     "out, %d duplicates", i,
                     domains[i % 6] ? domains[i % 6] : "no address",
                     seen_out[i], seen_dup[i], seen_block[i], copies - 1);
        }
    }
    assert_int_equal(missing, bad);
    printf("%s: %zu out, %zu rejected (%zu unreadable)\n", NAME, out.n,
           rej.n, bad);
    h_record_list_free(&out);
    h_record_list_free(&rej);
}

/* ---- Avro: dedup, domains, undecodable records ------------------------- */

/* The records that cannot be read, each with the words its reason must
 * hold. */
typedef struct bad_rec {
    const char *what, *want;
    uint8_t bytes[64];
    size_t len;
    bool tombstone;
} bad_rec;

static size_t bad_records(fmt f, bad_rec *b)
{
    size_t n = 0;
    int32_t good = f == AVRO ? id_avro : id_proto;
    b[n] = (bad_rec){.what = "wrong magic byte", .want = "magic byte 0x01"};
    b[n].len = encode(f, good, "bad-0", NULL, 0, b[n].bytes);
    b[n++].bytes[0] = 0x01;
    b[n] = (bad_rec){.what = "an unknown schema id",
                     .want = "schema id 99999: not found in the registry"};
    b[n].len = encode(f, 99999, "bad-1", NULL, 0, b[n].bytes);
    n++;
    b[n] = (bad_rec){.what = "a payload cut short", .want = "past the end"};
    b[n].len = encode(f, good, "bad-2-long-enough", NULL, 0, b[n].bytes) - 9;
    n++;
    b[n] = (bad_rec){.what = "a schema of another type", .want = "is JSON"};
    b[n].len = encode(f, id_json, "bad-3", NULL, 0, b[n].bytes);
    n++;
    b[n++] = (bad_rec){.what = "no value (a tombstone)", .want = "no value",
                       .tombstone = true};
    return n;
}

/* Each bad record once in rej with its reason. */
static void check_bad(env *e, const bad_rec *b, size_t n, const char *kind)
{
    h_record_list rej = {0};
    read_topic(e, e->rej, &rej);
    for (size_t i = 0; i < n; i++) {
        char key[16];
        snprintf(key, sizeof key, "bad-%zu", i);
        size_t found = 0;
        for (size_t r = 0; r < rej.n; r++) {
            const h_record *rec = &rej.recs[r];
            if (rec->key_len != strlen(key) || memcmp(rec->key, key, rec->key_len))
                continue;
            char reason[300];
            h_header_str(rec, "bloomstage-reason", reason, sizeof reason);
            printf("%s: %s: %s\n", NAME, b[i].what, reason);
            if (strncmp(reason, "missing-key: ", 13) != 0 ||
                !strstr(reason, kind) || !strstr(reason, b[i].want))
                fail_msg("%s: reason '%s', want 'missing-key: %s...%s'",
                         b[i].what, reason, kind, b[i].want);
            found++;
        }
        if (found != 1)
            fail_msg("%s: %zu copies in %s, want 1", b[i].what, found, e->rej);
    }
    h_record_list_free(&rej);
}

static void run_format(fmt f)
{
    const char *kind = f == AVRO ? "avro" : "protobuf";
    char key[32], lkey[32], name[32];
    snprintf(key, sizeof key, "%s:/id", kind);
    snprintf(lkey, sizeof lkey, "%s:/email", kind);
    snprintf(name, sizeof name, "sreg-%s", kind);
    env *e = env_new(name, key, lkey, g_reg.url, NULL);
    stream *st = e->st = stream_new(f, false);
    bad_rec bad[8];
    size_t nbad = bad_records(f, bad);
    h_record brecs[8];
    for (size_t i = 0; i < nbad; i++) {
        char *k = h_strdupf("bad-%zu", i);
        brecs[i] = h_rec(k, NULL);
        if (!bad[i].tombstone) {
            brecs[i].value = bad[i].bytes;
            brecs[i].value_len = bad[i].len;
        }
    }
    h_proc *p = h_stage_start(e->conf, NULL, NULL);
    produce(e, st->recs, st->n);
    produce(e, brecs, nbad);
    size_t out = expect_out();
    h_wait_out_rej(p, e->h.bs, e->out, (int64_t)out, e->rej,
                   (int64_t)(st->n - out + nbad));
    check_stream(e, st, nbad);
    check_bad(e, bad, nbad, kind);
    unsigned port = h_stage_metrics_port(p, 20000);
    assert_int_equal((int)h_stage_metric(port,
                                         "bloomstage_records_undecodable_total"),
                     (int)nbad - 1); /* the tombstone is a missing key */
    h_stage_stop(p);
    for (size_t i = 0; i < nbad; i++)
        free((void *)brecs[i].key);
}

static void test_avro(void **state)
{
    (void)state;
    run_format(AVRO);
}

static void test_protobuf(void **state)
{
    (void)state;
    run_format(PROTOBUF);
}

/* key.avro:/id: the record key in Confluent framing. */
static void test_key_avro(void **state)
{
    (void)state;
    env *e = env_new("sreg-key", "key.avro:/id", NULL, g_reg.url, NULL);
    stream *st = e->st = stream_new(AVRO, true);
    h_proc *p = h_stage_start(e->conf, NULL, NULL);
    produce(e, st->recs, st->n);
    h_wait_out_rej(p, e->h.bs, e->out, U, e->rej, (int64_t)st->n - U);
    check_stream(e, NULL, 0);
    h_stage_stop(p);
}

/* ---- the registry away at start-up -------------------------------------- */

/* GET /ready: the status, the body into buf. */
static int ready(unsigned port, char *buf, size_t n)
{
    h_http_resp r;
    char err[256];
    buf[0] = '\0';
    if (h_http_request(port, "GET", "/ready", &r, err, sizeof err) != 0)
        return -1;
    int st = r.status;
    snprintf(buf, n, "%s", r.body ? r.body : "");
    h_http_resp_free(&r);
    return st;
}

static void test_registry_away_at_start(void **state)
{
    (void)state;
    int reg_port = 0;
    assert_int_equal(sscanf(g_reg.url, "http://127.0.0.1:%d/", &reg_port), 1);
    h_proxy *proxy = h_proxy_new(0, reg_port);
    H_CHECK(proxy ? 0 : -1);
    h_proxy_set(proxy, H_LINK_RESET, 0);
    char *url = h_strdupf("http://127.0.0.1:%d/apis/ccompat/v7",
                          h_proxy_port(proxy));
    env *e = env_new("sreg-away", "avro:/id", "avro:/email", url, NULL);
    e->proxy = proxy;
    free(url);
    stream *st = e->st = stream_new(AVRO, false);
    h_proc *p = h_stage_start(e->conf, NULL, NULL);
    unsigned port = h_stage_metrics_port(p, 20000);
    produce(e, st->recs, st->n);

    /* Away: once the first records wait (/ready may say 200 until the
     * stage has read one), nothing decided, not ready, saying why. */
    double t0 = h_now_s();
    double waiting = 0;
    char body[1024];
    while ((waiting = h_stage_metric(
                port, "bloomstage_partitions_waiting_for_schema")) < 1) {
        h_stage_alive(p, "waiting for the first record to wait");
        if (h_now_s() - t0 > 60)
            h_stage_fail(p, "no partition waits for the schema 60 s after "
                         "the records were produced");
        h_nap(100);
    }
    bool named = false;
    t0 = h_now_s();
    while (h_now_s() - t0 < AWAY_S) {
        h_stage_alive(p, "the registry away");
        int code = ready(port, body, sizeof body);
        if (code == 200)
            h_stage_fail(p, "/ready 200 while the registry is away");
        named |= strstr(body, "schema registry gives no answer") != NULL;
        double w = h_stage_metric(port,
                                  "bloomstage_partitions_waiting_for_schema");
        waiting = w > waiting ? w : waiting;
        h_nap(500);
    }
    assert_int_equal(h_count_committed(e->h.bs, e->out), 0);
    assert_int_equal(h_count_committed(e->h.bs, e->rej), 0);
    printf("%s: while away, /ready said: %s\n", NAME, body);
    assert_true(named);
    assert_true(waiting >= 1);
    h_expect_said(p, "partition waits for the schema registry");

    /* Back: the exact output, ready again. */
    h_proxy_set(proxy, H_LINK_PASS, 0);
    size_t out = expect_out();
    h_wait_out_rej(p, e->h.bs, e->out, (int64_t)out, e->rej,
                   (int64_t)(st->n - out));
    check_stream(e, st, 0);
    t0 = h_now_s();
    while (ready(port, body, sizeof body) != 200) {
        h_stage_alive(p, "waiting for /ready");
        if ((h_now_s() - t0) * 1000 > READY_WAIT_MS)
            h_stage_fail(p, "/ready not 200 after the registry came back: %s",
                         body);
        h_nap(100);
    }
    assert_int_equal((int)h_stage_metric(
                         port, "bloomstage_partitions_waiting_for_schema"),
                     0);
    h_expect_said(p, "partition resumes: the schema registry answers");
    h_stage_stop(p);
}

#ifdef BS_REAL_KAFKA
#define TEARDOWN h_kfixture_teardown
#else
#define TEARDOWN h_fixture_teardown
#endif

int main(void)
{
    h_test_main(NAME, "BS_SREG_ONLY", "BS_SREG_VERBOSE", "BS_SREG_STAGE_X");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_avro, TEARDOWN),
        cmocka_unit_test_teardown(test_protobuf, TEARDOWN),
        cmocka_unit_test_teardown(test_key_avro, TEARDOWN),
        cmocka_unit_test_teardown(test_registry_away_at_start, TEARDOWN),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
