/*
 * settings.h -- a configuration as `bloomstage run` and `config --check`
 * see it, and the typed settings the engine reads from it.
 *
 * bs_settings_load: the properties file, then the BLOOMSTAGE_* environment,
 * then -X settings, validated, and every kafka.*, consumer.* and producer.*
 * key tried on librdkafka (so a misspelt librdkafka property is a
 * configuration error naming where it was set, not a start-up failure).
 *
 * bs_settings: every table key the engine and the CLI use at run time, as
 * a typed field, filled once by bs_settings_from_config after validation,
 * so nothing looks a key up by its name at run time.  The field list is
 * declared once, in BS_SETTINGS_FIELDS below (key, field, kind): adding a
 * key the engine reads is one line there (and its row in config/keys.c);
 * tests/unit/test_settings.c checks every line's key is in the table with the
 * type its kind needs, and every plain key of the table has a line.  The
 * kafka.*, consumer.* and producer.* keys stay strings for librdkafka
 * (bs_config_foreach); of those only consumer.auto.offset.reset, which the
 * stage itself acts on, is typed (start_at).
 *
 * Ownership: a bs_settings borrows every string, key spec, topic array
 * and blocklist array from the bs_config it was filled from; they stay
 * valid as long as that configuration is neither modified nor destroyed.
 * The struct itself is a plain value (copy it freely); nothing in it is
 * freed.
 */
#ifndef BLOOMSTAGE_SETTINGS_H
#define BLOOMSTAGE_SETTINGS_H

#include "base/log.h"

#include <config.h>
#include <stdbool.h>
#include <stdint.h>

/* NULL with errstr ("FILE:LINE: key 'x': ...") on any error.  file may be
 * NULL (environment and -X only).  The caller owns the result.  The result
 * also passed bs_settings_from_config, so `config --check` and `run`
 * refuse the same configurations. */
bs_config *bs_settings_load(const char *file, char *const *xs, int nx,
                            char *errstr, size_t errstr_size);

/* The librdkafka part alone. */
int bs_settings_check_kafka(const bs_config *cfg, char *errstr,
                            size_t errstr_size);

/* ------------------------------------------------------------------------ */
/* Typed settings                                                            */

/* A topic-list key: n names (trimmed, non-empty, distinct). */
typedef struct bs_topic_list {
    const char *const *names;
    size_t n;
} bs_topic_list;

/* Where a partition with neither a checkpoint nor a committed offset
 * starts: consumer.auto.offset.reset, with librdkafka's synonyms. */
typedef enum bs_start_at {
    BS_START_EARLIEST = 0, /* smallest, earliest, beginning; also unset (the
                              stage sets auto.offset.reset=earliest) */
    BS_START_LATEST,       /* largest, latest, end */
    BS_START_ERROR,        /* error: librdkafka reports an error rather than
                              choosing an end */
} bs_start_at;

/* The kinds of field, each a C type read from a table type:
 *   TOPICS      bs_topic_list                  topic list
 *   STRING      const char *, never NULL       string (required or with a
 *                                              default)
 *   OPT_STRING  const char *, NULL when empty  string
 *   KEYSPEC     const bs_config_keyspec *      key spec
 *   DOUBLE      double                         double
 *   BOOL        bool                           bool
 *   COUNT       uint64_t                       int, range starting >= 0
 *   MS          int64_t milliseconds           int
 *   SIZE        uint64_t bytes                 size
 *   GUARANTEE, MISSING_KEY, LATE, NORMALIZE, CKPT_STORE, EOS_METHOD
 *                                          enum, config.h's lists
 *   LOG_LEVEL   bs_log_level (log.h), mapped by name from log.level */
#define BS_SETTINGS_CTYPE_TOPICS bs_topic_list
#define BS_SETTINGS_CTYPE_STRING const char *
#define BS_SETTINGS_CTYPE_OPT_STRING const char *
#define BS_SETTINGS_CTYPE_KEYSPEC const bs_config_keyspec *
#define BS_SETTINGS_CTYPE_DOUBLE double
#define BS_SETTINGS_CTYPE_BOOL bool
#define BS_SETTINGS_CTYPE_COUNT uint64_t
#define BS_SETTINGS_CTYPE_MS int64_t
#define BS_SETTINGS_CTYPE_SIZE uint64_t
#define BS_SETTINGS_CTYPE_GUARANTEE bs_guarantee
#define BS_SETTINGS_CTYPE_MISSING_KEY bs_missing_key_policy
#define BS_SETTINGS_CTYPE_LATE bs_late_policy
#define BS_SETTINGS_CTYPE_NORMALIZE bs_normalize
#define BS_SETTINGS_CTYPE_CKPT_STORE bs_ckpt_store_kind
#define BS_SETTINGS_CTYPE_EOS_METHOD bs_eos_method
#define BS_SETTINGS_CTYPE_LOG_LEVEL bs_log_level

/* X(key, field, kind): one line per table key the engine or CLI reads. */
#define BS_SETTINGS_FIELDS(X)                                               \
    X("input.topics", input_topics, TOPICS)                                 \
    X("output.topic", output_topic, STRING)                                 \
    X("rejected.topic", rejected_topic, OPT_STRING)                         \
    X("dedup.key", dedup_key, KEYSPEC)                                      \
    X("dedup.key.normalize", dedup_normalize, NORMALIZE)                    \
    X("dedup.fpr", dedup_fpr, DOUBLE)                                       \
    X("dedup.capacity", dedup_capacity, COUNT)                              \
    X("dedup.growth", dedup_growth, DOUBLE)                                 \
    X("dedup.tightening", dedup_tightening, DOUBLE)                         \
    X("dedup.max.bytes", dedup_max_bytes, SIZE)                             \
    X("dedup.on.missing.key", missing_key, MISSING_KEY)                     \
    X("dedup.window.ms", window_ms, MS)                                     \
    X("dedup.window.generations", window_generations, COUNT)                \
    X("dedup.window.late", window_late, LATE)                               \
    X("dedup.audit.rate", audit_rate, DOUBLE)                               \
    X("dedup.audit.rescue", audit_rescue, BOOL)                             \
    X("checkpoint.dir", checkpoint_dir, STRING)                             \
    X("checkpoint.store", checkpoint_store, CKPT_STORE)                     \
    X("checkpoint.topic", checkpoint_topic, STRING)                         \
    X("checkpoint.chunk.bytes", checkpoint_chunk_bytes, SIZE)               \
    X("checkpoint.interval.ms", checkpoint_interval_ms, MS)                 \
    X("checkpoint.records", checkpoint_records, COUNT)                      \
    X("checkpoint.delta.max", checkpoint_delta_max, COUNT)                  \
    X("checkpoint.delta.ratio", checkpoint_delta_ratio, DOUBLE)             \
    X("processing.guarantee", guarantee, GUARANTEE)                         \
    X("exactly_once.method", eos_method, EOS_METHOD)                        \
    X("exactly_once.transactional.id", transactional_id, OPT_STRING)        \
    X("exactly_once.overlap", eos_overlap, BOOL)                            \
    X("consumer.group.id", group_id, STRING)                                \
    X("schema.registry.url", registry_urls, OPT_STRING)                     \
    X("schema.registry.basic.auth.user.info", registry_user_info,          \
      OPT_STRING)                                                           \
    X("schema.registry.ssl.ca.location", registry_ca, OPT_STRING)           \
    X("schema.registry.ssl.certificate.location", registry_cert,           \
      OPT_STRING)                                                           \
    X("schema.registry.ssl.key.location", registry_key, OPT_STRING)         \
    X("schema.registry.cache.max.schemas", registry_max_schemas, COUNT)     \
    X("schema.registry.timeout.ms", registry_timeout_ms, MS)                \
    X("metrics.listen", metrics_listen, OPT_STRING)                         \
    X("metrics.tls.cert.path", metrics_tls_cert, OPT_STRING)                \
    X("metrics.tls.key.path", metrics_tls_key, OPT_STRING)                  \
    X("metrics.auth.users.path", metrics_users, OPT_STRING)                 \
    X("metrics.auth.probes.open", metrics_probes_open, BOOL)                \
    X("log.level", log_level, LOG_LEVEL)                                    \
    X("log.stats.interval.ms", stats_interval_ms, MS)

#define BS_SETTINGS_DECLARE_FIELD(key, field, kind)                         \
    BS_SETTINGS_CTYPE_##kind field;

typedef struct bs_settings {
    /* input_topics, output_topic, ... as BS_SETTINGS_FIELDS lists them */
    BS_SETTINGS_FIELDS(BS_SETTINGS_DECLARE_FIELD)

    /* Not plain keys: */
    /* The blocklist.NAME.* groups, in the order their NAMEs first
     * appeared (bs_config_blocklists). */
    const bs_config_blocklist *blocklists;
    size_t nblocklists;
    /* consumer.auto.offset.reset (a librdkafka key the stage reads too) */
    bs_start_at start_at;
} bs_settings;

/* Fills *out from cfg, which must have passed bs_config_validate (the
 * blocklists exist only then).  Fails, with errstr, if a required key has
 * no value ("key 'output.topic' has no value (was the configuration
 * validated?)") or if consumer.auto.offset.reset is none of smallest,
 * earliest, beginning, largest, latest, end, error ("ORIGIN: key
 * 'consumer.auto.offset.reset': value 'x' is not one of: ...").  *out
 * borrows from cfg (see the top). */
int bs_settings_from_config(const bs_config *cfg, bs_settings *out,
                            char *errstr, size_t errstr_size)
    __attribute__((warn_unused_result));

#endif
