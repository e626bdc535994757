/*
 * test_settings.c -- unit tests of the typed settings (stage/base/settings.h):
 * BS_SETTINGS_FIELDS against the key table (every field's key exists, as a
 * plain key of the type its kind reads; every plain key has a field), and
 * bs_settings_from_config reading every field, the blocklists and
 * consumer.auto.offset.reset with its synonyms; librdkafka's refusal of a
 * property, which must not show a secret.
 *
 * Reaches into config_int.h for the table rows and their types.  No Kafka:
 * nothing here talks to a broker.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "config_int.h"
#include "base/settings.h"

#include <stdio.h>
#include <string.h>

/* -- the field list against the table ----------------------------------- */

/* The table type each kind of field is read from (settings.h). */
#define CT_TOPICS BS_CT_TOPICS
#define CT_STRING BS_CT_STRING
#define CT_OPT_STRING BS_CT_STRING
#define CT_KEYSPEC BS_CT_KEYSPEC
#define CT_DOUBLE BS_CT_DOUBLE
#define CT_BOOL BS_CT_BOOL
#define CT_COUNT BS_CT_INT
#define CT_MS BS_CT_INT
#define CT_SIZE BS_CT_SIZE
#define CT_GUARANTEE BS_CT_ENUM
#define CT_MISSING_KEY BS_CT_ENUM
#define CT_LATE BS_CT_ENUM
#define CT_NORMALIZE BS_CT_ENUM
#define CT_CKPT_STORE BS_CT_ENUM
#define CT_EOS_METHOD BS_CT_ENUM
#define CT_LOG_LEVEL BS_CT_ENUM

/* Enum kinds: the value list their C type is generated from (config.h);
 * NULL for the other kinds. */
#define TEXT(name, text) text,
static const char *const guarantee_texts[] = {BS_GUARANTEE_LIST(TEXT) NULL};
static const char *const missing_texts[] = {
    BS_MISSING_KEY_POLICY_LIST(TEXT) NULL};
static const char *const late_texts[] = {BS_LATE_POLICY_LIST(TEXT) NULL};
static const char *const normalize_texts[] = {BS_NORMALIZE_LIST(TEXT) NULL};
static const char *const store_texts[] = {BS_CKPT_STORE_KIND_LIST(TEXT) NULL};
static const char *const eos_method_texts[] = {BS_EOS_METHOD_LIST(TEXT) NULL};
static const char *const level_texts[] = {
    BS_CONFIG_LOG_LEVEL_LIST(TEXT) NULL};
#define VALUES_TOPICS NULL
#define VALUES_STRING NULL
#define VALUES_OPT_STRING NULL
#define VALUES_KEYSPEC NULL
#define VALUES_DOUBLE NULL
#define VALUES_BOOL NULL
#define VALUES_COUNT NULL
#define VALUES_MS NULL
#define VALUES_SIZE NULL
#define VALUES_GUARANTEE guarantee_texts
#define VALUES_MISSING_KEY missing_texts
#define VALUES_LATE late_texts
#define VALUES_NORMALIZE normalize_texts
#define VALUES_CKPT_STORE store_texts
#define VALUES_EOS_METHOD eos_method_texts
#define VALUES_LOG_LEVEL level_texts

typedef struct field_desc {
    const char *key, *field, *kind;
    bs_ctype type;
    const char *const *values;
    bool unsigned_int; /* COUNT, SIZE: read into uint64_t */
} field_desc;

#define DESC(key, field, kind)                                              \
    {key, #field, #kind, CT_##kind, VALUES_##kind,                          \
     strcmp(#kind, "COUNT") == 0 || strcmp(#kind, "SIZE") == 0},

static void test_fields_match_table(void **state)
{
    (void)state;
    const field_desc fields[] = {BS_SETTINGS_FIELDS(DESC)};
    size_t n = sizeof fields / sizeof fields[0];
    for (size_t i = 0; i < n; i++) {
        const field_desc *f = &fields[i];
        const bs_config_row *row = bs_config_row_by_name(f->key);
        if (!row)
            fail_msg("field %s: no key '%s' in the table", f->field, f->key);
        if (bs_config_row_is_pattern(row))
            fail_msg("field %s: '%s' is a pattern, not a plain key",
                     f->field, f->key);
        if (row->type != f->type)
            fail_msg("field %s (%s): key '%s' is of type %s, the kind reads "
                     "%s",
                     f->field, f->kind, f->key, bs_ctype_name(row->type),
                     bs_ctype_name(f->type));
        /* A uint64_t field needs a range that excludes negatives. */
        if (f->unsigned_int &&
            (!(row->flags & BS_CF_RANGE) || row->imin < 0))
            fail_msg("field %s: key '%s' may be negative", f->field, f->key);
        if (f->values) {
            size_t j = 0;
            for (; f->values[j] && row->values[j]; j++)
                assert_string_equal(f->values[j], row->values[j]);
            if (f->values[j] || row->values[j])
                fail_msg("field %s: key '%s' allows other values than its "
                         "enum type names",
                         f->field, f->key);
        }
        /* Listed once. */
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(fields[j].key, f->key);
    }
    /* Every plain key of the table is read into a field (a key nobody
     * reads would be a setting that does nothing). */
    for (size_t r = 0; r < bs_config_nrows; r++) {
        const bs_config_row *row = &bs_config_rows[r];
        if (bs_config_row_is_pattern(row))
            continue;
        bool found = false;
        for (size_t i = 0; i < n; i++)
            found |= strcmp(fields[i].key, row->name) == 0;
        if (!found)
            fail_msg("key '%s' has no field in BS_SETTINGS_FIELDS",
                     row->name);
    }
}

/* -- reading a configuration -------------------------------------------- */

static bs_config *config_of(const char *const *kv)
{
    char err[512];
    bs_config *cfg = bs_config_new();
    assert_non_null(cfg);
    for (size_t i = 0; kv[i]; i += 2)
        if (bs_config_set(cfg, kv[i], kv[i + 1], "test", err, sizeof err))
            fail_msg("%s=%s: %s", kv[i], kv[i + 1], err);
    if (bs_config_validate(cfg, err, sizeof err))
        fail_msg("validate: %s", err);
    return cfg;
}

static void test_defaults(void **state)
{
    (void)state;
    static const char *const kv[] = {"input.topics", "in", "output.topic",
                                     "out", NULL};
    bs_config *cfg = config_of(kv);
    bs_settings s;
    char err[512];
    memset(&s, 0xa5, sizeof s);
    assert_int_equal(bs_settings_from_config(cfg, &s, err, sizeof err), 0);
    assert_int_equal(s.input_topics.n, 1);
    assert_string_equal(s.input_topics.names[0], "in");
    assert_string_equal(s.output_topic, "out");
    assert_null(s.rejected_topic); /* "" by default: no routing */
    assert_int_equal(s.dedup_key->parts[0].kind, BS_CONFIG_KEYSPEC_KEY);
    assert_true(s.dedup_fpr == 1e-6);
    assert_int_equal(s.dedup_capacity, 100000);
    assert_true(s.dedup_growth == 2.0);
    assert_true(s.dedup_tightening == 0.85);
    assert_int_equal(s.dedup_max_bytes, 0);
    assert_int_equal(s.missing_key, BS_CONFIG_MISSING_FORWARD);
    assert_string_equal(s.checkpoint_dir, "checkpoints");
    assert_int_equal(s.checkpoint_store, BS_CONFIG_STORE_DIR);
    assert_string_equal(s.checkpoint_topic, "bloomstage-checkpoints");
    assert_int_equal(s.checkpoint_chunk_bytes, 512 * 1024);
    assert_int_equal(s.checkpoint_interval_ms, 1000);
    assert_int_equal(s.checkpoint_records, 1000000);
    assert_int_equal(s.guarantee, BS_CONFIG_EXACTLY_ONCE);
    assert_string_equal(s.group_id, "bloomstage");
    assert_null(s.metrics_listen);
    assert_int_equal(s.log_level, BS_LOG_INFO);
    assert_int_equal(s.stats_interval_ms, 30000);
    assert_int_equal(s.nblocklists, 0);
    assert_int_equal(s.start_at, BS_START_EARLIEST);
    bs_config_destroy(cfg);
}

static void test_every_field(void **state)
{
    (void)state;
    static const char *const kv[] = {
        "input.topics", "a, b,c",
        "output.topic", "out",
        "rejected.topic", "rej",
        "dedup.key", "json:/user/id",
        "dedup.fpr", "0.001",
        "dedup.capacity", "12345",
        "dedup.growth", "3.5",
        "dedup.tightening", "0.5",
        "dedup.max.bytes", "512M",
        "dedup.on.missing.key", "reject",
        "checkpoint.dir", "/var/lib/x",
        "checkpoint.store", "kafka",
        "checkpoint.topic", "ckpts",
        "checkpoint.chunk.bytes", "1M",
        "checkpoint.interval.ms", "250",
        "checkpoint.records", "0",
        "processing.guarantee", "at_least_once",
        "consumer.group.id", "g1",
        "metrics.listen", "127.0.0.1:9464",
        "log.level", "debug",
        "log.stats.interval.ms", "0",
        "consumer.auto.offset.reset", "latest",
        "blocklist.spam.path", "/tmp/spam.txt",
        "blocklist.spam.key", "header:from",
        "blocklist.ips.path", "/tmp/ips.bf",
        "blocklist.ips.fpr", "0.01",
        NULL};
    bs_config *cfg = config_of(kv);
    bs_settings s;
    char err[512];
    assert_int_equal(bs_settings_from_config(cfg, &s, err, sizeof err), 0);
    assert_int_equal(s.input_topics.n, 3);
    assert_string_equal(s.input_topics.names[0], "a");
    assert_string_equal(s.input_topics.names[1], "b");
    assert_string_equal(s.input_topics.names[2], "c");
    assert_string_equal(s.output_topic, "out");
    assert_string_equal(s.rejected_topic, "rej");
    assert_int_equal(s.dedup_key->parts[0].kind, BS_CONFIG_KEYSPEC_JSON);
    assert_int_equal(s.dedup_key->parts[0].ntokens, 2);
    assert_string_equal(s.dedup_key->parts[0].tokens[1], "id");
    assert_true(s.dedup_fpr == 0.001);
    assert_int_equal(s.dedup_capacity, 12345);
    assert_true(s.dedup_growth == 3.5);
    assert_true(s.dedup_tightening == 0.5);
    assert_int_equal(s.dedup_max_bytes, 536870912);
    assert_int_equal(s.missing_key, BS_CONFIG_MISSING_REJECT);
    assert_string_equal(s.checkpoint_dir, "/var/lib/x");
    assert_int_equal(s.checkpoint_store, BS_CONFIG_STORE_KAFKA);
    assert_string_equal(s.checkpoint_topic, "ckpts");
    assert_int_equal(s.checkpoint_chunk_bytes, 1048576);
    assert_int_equal(s.checkpoint_interval_ms, 250);
    assert_int_equal(s.checkpoint_records, 0);
    assert_int_equal(s.guarantee, BS_CONFIG_AT_LEAST_ONCE);
    assert_string_equal(s.group_id, "g1");
    assert_string_equal(s.metrics_listen, "127.0.0.1:9464");
    assert_int_equal(s.log_level, BS_LOG_DEBUG);
    assert_int_equal(s.stats_interval_ms, 0);
    assert_int_equal(s.start_at, BS_START_LATEST);
    assert_int_equal(s.nblocklists, 2);
    assert_string_equal(s.blocklists[0].name, "spam");
    assert_string_equal(s.blocklists[0].path, "/tmp/spam.txt");
    assert_int_equal(s.blocklists[0].key->parts[0].kind, BS_CONFIG_KEYSPEC_HEADER);
    assert_string_equal(s.blocklists[0].key->parts[0].arg, "from");
    assert_true(s.blocklists[0].fpr == 1e-6);
    assert_string_equal(s.blocklists[1].name, "ips");
    assert_ptr_equal(s.blocklists[1].key, s.dedup_key); /* inherited */
    assert_true(s.blocklists[1].fpr == 0.01);
    /* Borrowed, not copied: the very strings of the configuration. */
    assert_ptr_equal(s.output_topic, bs_config_get_str(cfg, "output.topic"));
    bs_config_destroy(cfg);
}

/* log.level maps to log.h's levels by name, whatever the order. */
static void test_log_levels(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        bs_log_level level;
    } cases[] = {{"error", BS_LOG_ERROR},
                 {"warn", BS_LOG_WARN},
                 {"info", BS_LOG_INFO},
                 {"debug", BS_LOG_DEBUG}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *kv[] = {"input.topics", "in", "output.topic", "out",
                            "log.level", cases[i].text, NULL};
        bs_config *cfg = config_of(kv);
        bs_settings s;
        char err[512];
        assert_int_equal(bs_settings_from_config(cfg, &s, err, sizeof err),
                         0);
        assert_int_equal(s.log_level, cases[i].level);
        bs_config_destroy(cfg);
    }
}

static void test_start_at(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        bs_start_at at;
    } cases[] = {
        {"smallest", BS_START_EARLIEST}, {"earliest", BS_START_EARLIEST},
        {"beginning", BS_START_EARLIEST}, {"largest", BS_START_LATEST},
        {"latest", BS_START_LATEST},     {"end", BS_START_LATEST},
        {"error", BS_START_ERROR},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *kv[] = {"input.topics", "in", "output.topic", "out",
                            "consumer.auto.offset.reset", cases[i].text,
                            NULL};
        bs_config *cfg = config_of(kv);
        bs_settings s;
        char err[512];
        assert_int_equal(bs_settings_from_config(cfg, &s, err, sizeof err),
                         0);
        if (s.start_at != cases[i].at)
            fail_msg("auto.offset.reset=%s: start_at %d, want %d",
                     cases[i].text, (int)s.start_at, (int)cases[i].at);
        bs_config_destroy(cfg);
    }
    /* Anything else is an error naming where it was set. */
    static const char *const bad[] = {"input.topics", "in", "output.topic",
                                      "out", "consumer.auto.offset.reset",
                                      "Latest", NULL};
    bs_config *cfg = config_of(bad);
    bs_settings s;
    char err[512];
    assert_int_equal(bs_settings_from_config(cfg, &s, err, sizeof err), -1);
    assert_string_equal(err, "test: key 'consumer.auto.offset.reset': value "
                             "'Latest' is not one of: smallest, earliest, "
                             "beginning, largest, latest, end, error");
    bs_config_destroy(cfg);
}

/* Case i's configuration kv is refused with exactly want_err, or (NULL)
 * accepted into *s, whose numbers and flags the caller may then check. */
static void expect_settings(const char *const *kv, const char *want_err,
                            size_t i, bs_settings *s)
{
    bs_config *cfg = config_of(kv);
    char err[512] = "";
    int rc = bs_settings_from_config(cfg, s, err, sizeof err);
    bs_config_destroy(cfg);
    if (want_err) {
        assert_int_equal(rc, -1);
        assert_string_equal(err, want_err);
    } else if (rc != 0) {
        fail_msg("case %zu: %s", i, err);
    }
}

/* The window's keys that only make sense together: reject needs a
 * rejected.topic, and a window holds at least one ms per generation. */
static void test_window_combinations(void **state)
{
    (void)state;
    static const struct {
        const char *kv[9];
        const char *err; /* NULL: accepted */
    } cases[] = {
        {{"dedup.window.ms", "86400000", "dedup.window.late", "reject", NULL},
         "dedup.window.late=reject needs rejected.topic (test)"},
        {{"dedup.window.ms", "86400000", "dedup.window.late", "reject",
          "rejected.topic", "rej", NULL},
         NULL},
        {{"dedup.window.late", "reject", NULL}, NULL}, /* no window: unused */
        {{"dedup.window.ms", "3", "dedup.window.generations", "4", NULL},
         "dedup.window.ms=3 is shorter than dedup.window.generations=4 "
         "slices of at least 1 ms (test)"},
        {{"dedup.window.ms", "4", "dedup.window.generations", "4", NULL},
         NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *kv[13] = {"input.topics", "in", "output.topic", "out"};
        for (size_t j = 0; cases[i].kv[j]; j++)
            kv[4 + j] = cases[i].kv[j];
        bs_settings s;
        expect_settings(kv, cases[i].err, i, &s);
    }
}

/* dedup.audit.*: the default rate is 1/1024 with rescue on; 0 turns the
 * audit off; a rate the 53-bit sampling word cannot take is refused
 * naming the key. */
static void test_audit_rate(void **state)
{
    (void)state;
    static const struct {
        const char *rate;
        const char *err; /* NULL: accepted */
    } cases[] = {
        {NULL, NULL},
        {"0", NULL},
        {"1", NULL},
        {"1.1102230246251565e-16", NULL}, /* 2^-53 */
        {"1e-17", "test: key 'dedup.audit.rate': value 1e-17 is below 2^-53 "
                  "(1.1e-16), the smallest sampling rate; 0 turns the audit "
                  "off"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *kv[9] = {"input.topics", "in", "output.topic", "out",
                             cases[i].rate ? "dedup.audit.rate" : NULL,
                             cases[i].rate, NULL};
        bs_settings s;
        expect_settings(kv, cases[i].err, i, &s);
        if (!cases[i].err && !cases[i].rate)
            assert_true(s.audit_rate == 1.0 / 1024 && s.audit_rescue);
    }
}

/* A configuration that skipped validation is refused, not half read. */
static void test_unvalidated(void **state)
{
    (void)state;
    bs_config *cfg = bs_config_new();
    assert_non_null(cfg);
    bs_settings s;
    char err[512];
    assert_int_equal(bs_settings_from_config(cfg, &s, err, sizeof err), -1);
    assert_string_equal(err, "key 'input.topics' has no value (was the "
                             "configuration validated?)");
    char e2[256];
    assert_int_equal(bs_config_set(cfg, "input.topics", "in", "test", e2,
                                   sizeof e2),
                     0);
    assert_int_equal(bs_settings_from_config(cfg, &s, err, sizeof err), -1);
    assert_string_equal(err, "key 'output.topic' has no value (was the "
                             "configuration validated?)");
    bs_config_destroy(cfg);
}

/* librdkafka's refusal of a property names its origin, which never holds
 * a secret: a misspelt secret, Java's JAAS config (librdkafka has none). */
static void test_kafka_refusal_hides_secret(void **state)
{
    (void)state;
    static const char *const args[] = {"kafka.sasl.pasword=hunter2-s3cr3t",
                                       "producer.sasl.jaas.config=x "
                                       "password=\"hunter2-s3cr3t\";"};
    static const char *const want[] = {
        "-X kafka.sasl.pasword: key 'kafka.sasl.pasword': librdkafka: ",
        "-X producer.sasl.jaas.config: key 'producer.sasl.jaas.config': "
        "librdkafka: "};
    for (size_t i = 0; i < 2; i++) {
        bs_config *cfg = bs_config_new();
        assert_non_null(cfg);
        char err[1024];
        assert_int_equal(bs_config_set_arg(cfg, args[i], err, sizeof err), 0);
        assert_int_equal(bs_settings_check_kafka(cfg, err, sizeof err), -1);
        if (strncmp(err, want[i], strlen(want[i])) != 0 ||
            strstr(err, "hunter2-s3cr3t"))
            fail_msg("%s: %s", args[i], err);
        bs_config_destroy(cfg);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fields_match_table),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_every_field),
        cmocka_unit_test(test_log_levels),
        cmocka_unit_test(test_start_at),
        cmocka_unit_test(test_unvalidated),
        cmocka_unit_test(test_window_combinations),
        cmocka_unit_test(test_audit_rate),
        cmocka_unit_test(test_kafka_refusal_hides_secret),
    };
    return cmocka_run_group_tests_name("settings", tests, NULL, NULL);
}
