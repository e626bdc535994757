/*
 * settings.c -- see settings.h.  Loading a configuration (layers, then the
 * librdkafka check), and reading a validated one into a bs_settings.
 */
#include "base/settings.h"

#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <string.h>

extern char **environ;

typedef struct try_ctx {
    const bs_config *cfg;
    rd_kafka_conf_t *conf;
    const char *prefix;
    char *errstr;
    size_t errstr_size;
} try_ctx;

static int try_key(const char *key, const char *value, void *opaque)
{
    try_ctx *t = opaque;
    char why[BS_ERRSTR_SIZE], full[600];
    if (rd_kafka_conf_set(t->conf, key, value, why, sizeof(why)) ==
        RD_KAFKA_CONF_OK)
        return 0;
    snprintf(full, sizeof(full), "%s%s", t->prefix, key);
    const char *origin = bs_config_origin(t->cfg, full);
    snprintf(t->errstr, t->errstr_size, "%s: key '%s': librdkafka: %s",
             origin ? origin : "?", full, why);
    return -1;
}

int bs_settings_check_kafka(const bs_config *cfg, char *errstr,
                            size_t errstr_size)
{
    static const char *const prefixes[] = {"kafka.", "consumer.",
                                           "producer."};
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
        try_ctx t = {cfg, rd_kafka_conf_new(), prefixes[i], errstr,
                     errstr_size};
        int rc = bs_config_foreach(cfg, prefixes[i], try_key, &t);
        rd_kafka_conf_destroy(t.conf);
        if (rc)
            return -1;
    }
    return 0;
}

bs_config *bs_settings_load(const char *file, char *const *xs, int nx,
                            char *errstr, size_t errstr_size)
{
    bs_config *cfg = bs_config_new();
    if (!cfg) {
        snprintf(errstr, errstr_size, "out of memory");
        return NULL;
    }
    if ((file && bs_config_load_file(cfg, file, errstr, errstr_size)) ||
        bs_config_load_env(cfg, environ, errstr, errstr_size))
        goto fail;
    for (int i = 0; i < nx; i++)
        if (bs_config_set_arg(cfg, xs[i], errstr, errstr_size))
            goto fail;
    /* The typed reading too, so `config --check` fails where `run`
     * would. */
    bs_settings typed;
    if (bs_config_validate(cfg, errstr, errstr_size) ||
        bs_settings_check_kafka(cfg, errstr, errstr_size) ||
        bs_settings_from_config(cfg, &typed, errstr, errstr_size))
        goto fail;
    return cfg;
fail:
    bs_config_destroy(cfg);
    return NULL;
}

/* -- typed settings ------------------------------------------------------- */

/* One reader per kind of field (settings.h), named get_KIND, so that
 * BS_SETTINGS_FIELDS expands to one call each. */
static void get_TOPICS(const bs_config *cfg, const char *key,
                       bs_topic_list *out)
{
    out->n = bs_config_get_topics(cfg, key, &out->names);
}

static void get_STRING(const bs_config *cfg, const char *key,
                       const char **out)
{
    *out = bs_config_get_str(cfg, key);
}

static void get_OPT_STRING(const bs_config *cfg, const char *key,
                           const char **out)
{
    const char *s = bs_config_get_str(cfg, key);
    *out = s && *s ? s : NULL;
}

static void get_KEYSPEC(const bs_config *cfg, const char *key,
                        const bs_config_keyspec **out)
{
    *out = bs_config_get_keyspec(cfg, key);
}

static void get_DOUBLE(const bs_config *cfg, const char *key, double *out)
{
    *out = bs_config_get_double(cfg, key);
}

static void get_BOOL(const bs_config *cfg, const char *key, bool *out)
{
    *out = bs_config_get_bool(cfg, key);
}

/* The table's ranges keep COUNT keys at 0 or more (tests/unit/test_settings.c
 * checks): the conversion loses nothing. */
static void get_COUNT(const bs_config *cfg, const char *key, uint64_t *out)
{
    int64_t v = bs_config_get_int(cfg, key);
    *out = v > 0 ? (uint64_t)v : 0;
}

static void get_MS(const bs_config *cfg, const char *key, int64_t *out)
{
    *out = bs_config_get_int(cfg, key);
}

static void get_SIZE(const bs_config *cfg, const char *key, uint64_t *out)
{
    int64_t v = bs_config_get_int(cfg, key); /* sizes are never negative */
    *out = v > 0 ? (uint64_t)v : 0;
}

/* Enum keys: bs_config_get_enum returns the index in the key's value list,
 * which config.h generates together with the constants. */
static void get_GUARANTEE(const bs_config *cfg, const char *key,
                          bs_guarantee *out)
{
    *out = (bs_guarantee)bs_config_get_enum(cfg, key);
}

static void get_MISSING_KEY(const bs_config *cfg, const char *key,
                            bs_missing_key_policy *out)
{
    *out = (bs_missing_key_policy)bs_config_get_enum(cfg, key);
}

static void get_LATE(const bs_config *cfg, const char *key,
                     bs_late_policy *out)
{
    *out = (bs_late_policy)bs_config_get_enum(cfg, key);
}

static void get_NORMALIZE(const bs_config *cfg, const char *key,
                          bs_normalize *out)
{
    *out = (bs_normalize)bs_config_get_enum(cfg, key);
}

static void get_CKPT_STORE(const bs_config *cfg, const char *key,
                           bs_ckpt_store_kind *out)
{
    *out = (bs_ckpt_store_kind)bs_config_get_enum(cfg, key);
}

static void get_EOS_METHOD(const bs_config *cfg, const char *key,
                           bs_eos_method *out)
{
    *out = (bs_eos_method)bs_config_get_enum(cfg, key);
}

/* log.level's constants to log.h's levels, by name. */
static void get_LOG_LEVEL(const bs_config *cfg, const char *key,
                          bs_log_level *out)
{
    switch ((bs_config_log_level)bs_config_get_enum(cfg, key)) {
    case BS_CONFIG_LOG_ERROR: *out = BS_LOG_ERROR; return;
    case BS_CONFIG_LOG_WARN: *out = BS_LOG_WARN; return;
    case BS_CONFIG_LOG_INFO: *out = BS_LOG_INFO; return;
    case BS_CONFIG_LOG_DEBUG: *out = BS_LOG_DEBUG; return;
    }
    *out = BS_LOG_INFO;
}

/* Whether a field of each kind has a value: a required key without one
 * means the configuration was not validated. */
static bool set_TOPICS(const bs_topic_list *v) { return v->n > 0; }
static bool set_STRING(const char *const *v) { return *v != NULL; }
static bool set_KEYSPEC(const bs_config_keyspec *const *v)
{
    return *v != NULL;
}
#define set_OPT_STRING(v) true
#define set_DOUBLE(v) true
#define set_BOOL(v) true
#define set_COUNT(v) true
#define set_MS(v) true
#define set_SIZE(v) true
#define set_GUARANTEE(v) true
#define set_MISSING_KEY(v) true
#define set_LATE(v) true
#define set_NORMALIZE(v) true
#define set_CKPT_STORE(v) true
#define set_EOS_METHOD(v) true
#define set_LOG_LEVEL(v) true

static int get_start_at(const bs_config *cfg, bs_start_at *out, char *errstr,
                        size_t errstr_size)
{
    static const struct {
        const char *name;
        bs_start_at at;
    } names[] = {
        {"smallest", BS_START_EARLIEST}, {"earliest", BS_START_EARLIEST},
        {"beginning", BS_START_EARLIEST}, {"largest", BS_START_LATEST},
        {"latest", BS_START_LATEST},     {"end", BS_START_LATEST},
        {"error", BS_START_ERROR},
    };
    static const char key[] = "consumer.auto.offset.reset";
    const char *v = bs_config_get_str(cfg, key);
    *out = BS_START_EARLIEST;
    if (!v)
        return 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcmp(v, names[i].name) == 0) {
            *out = names[i].at;
            return 0;
        }
    }
    const char *origin = bs_config_origin(cfg, key);
    snprintf(errstr, errstr_size,
             "%s: key '%s': value '%.100s' is not one of: smallest, "
             "earliest, beginning, largest, latest, end, error",
             origin ? origin : "?", key, v);
    return -1;
}

int bs_settings_from_config(const bs_config *cfg, bs_settings *out,
                            char *errstr, size_t errstr_size)
{
    memset(out, 0, sizeof(*out));
#define BS_SETTINGS_GET(key, field, kind)                                   \
    get_##kind(cfg, key, &out->field);                                      \
    if (!set_##kind(&out->field)) {                                         \
        snprintf(errstr, errstr_size,                                       \
                 "key '%s' has no value (was the configuration "            \
                 "validated?)", key);                                       \
        return -1;                                                          \
    }
    BS_SETTINGS_FIELDS(BS_SETTINGS_GET)
#undef BS_SETTINGS_GET
    out->nblocklists = bs_config_blocklists(cfg, &out->blocklists);
    if (out->missing_key == BS_CONFIG_MISSING_REJECT && !out->rejected_topic) {
        snprintf(errstr, errstr_size, "dedup.on.missing.key=reject needs "
                 "rejected.topic (%s)",
                 bs_config_origin(cfg, "dedup.on.missing.key"));
        return -1;
    }
    if (out->window_ms > 0 && out->window_late == BS_CONFIG_LATE_REJECT &&
        !out->rejected_topic) {
        snprintf(errstr, errstr_size, "dedup.window.late=reject needs "
                 "rejected.topic (%s)",
                 bs_config_origin(cfg, "dedup.window.late"));
        return -1;
    }
    if (out->window_ms > 0 &&
        (uint64_t)out->window_ms < out->window_generations) {
        snprintf(errstr, errstr_size, "dedup.window.ms=%lld is shorter than "
                 "dedup.window.generations=%llu slices of at least 1 ms (%s)",
                 (long long)out->window_ms,
                 (unsigned long long)out->window_generations,
                 bs_config_origin(cfg, "dedup.window.ms"));
        return -1;
    }
    /* The audit samples by a 53-bit word (bloomfilters.h): a rate is a
     * multiple of 2^-53, and one below it would sample nothing. */
    if (out->audit_rate > 0 && out->audit_rate < 0x1p-53) {
        const char *origin = bs_config_origin(cfg, "dedup.audit.rate");
        snprintf(errstr, errstr_size, "%s: key 'dedup.audit.rate': value %g "
                 "is below 2^-53 (1.1e-16), the smallest sampling rate; 0 "
                 "turns the audit off", origin ? origin : "?",
                 out->audit_rate);
        return -1;
    }
    return get_start_at(cfg, &out->start_at, errstr, errstr_size);
}
