/*
 * config.h -- bloomstage's configuration: one table of keys, three layers.
 *
 * A configuration is a set of `key=value` strings, each parsed and checked
 * against the key table (config/keys.c) the moment it is set, so an error
 * always names where the bad value came from:
 *
 *   FILE:LINE: key 'dedup.fpr': value '2' out of range (0, 0.1]
 *   env BLOOMSTAGE_DEDUP_FPR: key 'dedup.fpr': value '2' out of range ...
 *   -X dedup.fpr=2: key 'dedup.fpr': value '2' out of range (0, 0.1]
 *
 * Layers, lowest first: the table's defaults, a properties file
 * (bs_config_load_file), the environment (bs_config_load_env) and explicit
 * settings (bs_config_set_arg for `-X key=value`, bs_config_set).  A value
 * never replaces one from a higher layer, whatever order the loaders are
 * called in; within one layer the later value wins (as in Kafka).  After the
 * last layer, bs_config_validate checks what no single value can: required
 * keys, a path for every blocklist, topics that would loop.
 *
 * Keys `kafka.*`, `consumer.*` and `producer.*` are stored, not understood:
 * the stage hands them to librdkafka with bs_config_foreach.  Validation
 * reads only the few whose mistakes would otherwise surface at the first
 * connection (see bs_config_validate).  `consumer.group.id` is also a table
 * key with a default, so it shows up in a "consumer." walk even when nobody
 * set it.
 *
 * Secrets.  A key whose name marks it secret (bs_config_key_is_secret:
 * password, secret, jaas, a private key, ...) and any value read from a
 * file are never shown: not in an origin, a message or the effective
 * configuration, which prints "[redacted]".  A value is read from a file
 * wherever it is written as `@file:PATH` (properties file, environment,
 * -X), and from the environment as `BLOOMSTAGE_<KEY>_FILE=PATH` (the
 * container convention: PATH is a file under /run/secrets).  The file's
 * content is the value, taken as it is but for one trailing newline; a file
 * that cannot be read is an error naming origin, key and path, when the
 * value is set.
 *
 * Ownership: every string and struct a getter returns belongs to the
 * bs_config and stays valid until the next call that modifies it (a load, a
 * set, validate) or bs_config_destroy.  Strings passed in are copied.
 * Reading a configuration nobody modifies from several threads is fine.
 *
 * Conventions (librdkafka's): functions that can fail return 0 or -1 and
 * write a message into errstr[errstr_size] (may be NULL/0).  Nothing here
 * prints except the bs_config_print_* functions, nothing exits.  The typed
 * getters take a table key name; asking for a key the table does not have,
 * or with the wrong type, is a programming error and aborts with a message.
 */
#ifndef BLOOMSTAGE_CONFIG_H
#define BLOOMSTAGE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define BS_CONFIG_WUR __attribute__((warn_unused_result))
#else
#define BS_CONFIG_WUR
#endif

/* Input bounds: a file line (key, '=', value) and a value set by any layer
 * are at most this many bytes; a key at most BS_CONFIG_MAX_KEY bytes; a
 * configuration holds at most BS_CONFIG_MAX_KEYS distinct keys. */
/* The size of every error buffer of bloomstage's libraries and program
 * (the caller's `char errstr[BS_ERRSTR_SIZE]`), as librdkafka's 512: a
 * message names what failed and where in one line; longer is cut. */
#define BS_ERRSTR_SIZE 512

#define BS_CONFIG_MAX_LINE 65536
#define BS_CONFIG_MAX_KEY 255
#define BS_CONFIG_MAX_KEYS 4096

/* The prefix of environment variables that set keys. */
#define BS_CONFIG_ENV_PREFIX "BLOOMSTAGE_"
/* A value starting with this is the content of the file it names. */
#define BS_CONFIG_FILE_PREFIX "@file:"
/* What is shown in place of a secret value. */
#define BS_CONFIG_REDACTED "[redacted]"

/* A target false-positive rate (dedup.fpr, blocklist.NAME.fpr, the CLI's
 * --fpr) is in (0, BS_CONFIG_FPR_MAX]; BS_CONFIG_STR makes it text for a
 * help string. */
#define BS_CONFIG_FPR_MAX 0.1
#define BS_CONFIG_STR(x) BS_CONFIG_STR_(x)
#define BS_CONFIG_STR_(x) #x

typedef struct bs_config bs_config;

/* ------------------------------------------------------------------------ */
/* Parsed values of the structured types                                     */

/* Where one part of a record's dedup or blocklist key comes from. */
typedef enum bs_config_keyspec_kind {
    BS_CONFIG_KEYSPEC_KEY = 0, /* "key": the record key */
    BS_CONFIG_KEYSPEC_VALUE,   /* "value": the whole record value */
    BS_CONFIG_KEYSPEC_HEADER,  /* "header:NAME": the value of header NAME */
    BS_CONFIG_KEYSPEC_JSON,    /* "json:/ptr": a JSON pointer into the value
                                  ("key.json:/ptr": into the record key) */
    BS_CONFIG_KEYSPEC_AVRO,    /* "avro:/a/b": record fields of an Avro
                                  value in Confluent framing, its schema
                                  from the Schema Registry ("key.avro:") */
    BS_CONFIG_KEYSPEC_PROTOBUF, /* "protobuf:/a/b": fields of a Protobuf
                                  message likewise ("key.protobuf:") */
} bs_config_keyspec_kind;

/* True for the kinds whose schema comes from a Schema Registry. */
static inline bool bs_config_keypart_framed(bs_config_keyspec_kind kind)
{
    return kind == BS_CONFIG_KEYSPEC_AVRO ||
           kind == BS_CONFIG_KEYSPEC_PROTOBUF;
}

/* The most parts a composite key has. */
#define BS_CONFIG_KEY_PARTS_MAX 8

typedef struct bs_config_keypart {
    bs_config_keyspec_kind kind;
    /* JSON, AVRO, PROTOBUF: the record key is read ("key.json:",
     * "key.avro:", "key.protobuf:"), not the value. */
    bool on_key;
    /* HEADER: the header name (non-empty).  JSON: the pointer as written
     * ("" = the whole document, else starts with '/').  AVRO, PROTOBUF:
     * the path of field names ("" = the whole value, else starts with
     * '/'; fm_avro.h and fm_protobuf.h read it).  KEY, VALUE: "". */
    const char *arg;
    /* JSON only: the pointer's reference tokens, unescaped (~1 -> '/',
     * ~0 -> '~'), so "/a~1b/0" gives {"a/b", "0"}.  0 tokens for "". */
    size_t ntokens;
    const char *const *tokens;
} bs_config_keypart;

/* A key spec: one part, or several separated by commas (a composite key,
 * "json:/user,json:/event"; a comma starts a part only where a part's
 * name follows it, so a header name or a pointer may hold one). */
typedef struct bs_config_keyspec {
    size_t nparts; /* 1 .. BS_CONFIG_KEY_PARTS_MAX */
    const bs_config_keypart *parts;
} bs_config_keyspec;

/* Enum keys.  Each key's allowed values and the C constants naming them
 * come from one list, X(CONSTANT, "value") per value in order: the enum
 * type below and the value list of the key's row in config/keys.c are both
 * generated from it, so a constant is always the index of its value (what
 * bs_config_get_enum returns).  Adding a value is adding one line here. */
#define BS_CONFIG_ENUM_CONSTANT(name, text) name,
#define BS_CONFIG_ENUM_TEXT(name, text) text,

/* dedup.key.normalize, blocklist.NAME.normalize: what a key is made into
 * before it is hashed (formats/include/fm_normalize.h says how). */
#define BS_NORMALIZE_LIST(X)                                                 \
    X(BS_CONFIG_NORM_NONE, "none")                                           \
    X(BS_CONFIG_NORM_LOWER, "lower")                                         \
    X(BS_CONFIG_NORM_TRIM, "trim")                                           \
    X(BS_CONFIG_NORM_LOWER_TRIM, "lower,trim")
typedef enum bs_normalize {
    BS_NORMALIZE_LIST(BS_CONFIG_ENUM_CONSTANT)
} bs_normalize;

/* blocklist.NAME.match */
#define BS_MATCH_LIST(X)                                                     \
    X(BS_CONFIG_MATCH_EXACT, "exact")                                        \
    X(BS_CONFIG_MATCH_DOMAIN, "domain")
typedef enum bs_match {
    BS_MATCH_LIST(BS_CONFIG_ENUM_CONSTANT)
} bs_match;

/* One `blocklist.NAME.*` group, after bs_config_validate. */
typedef struct bs_config_blocklist {
    const char *name;             /* NAME: [A-Za-z0-9_-]+ */
    const char *path;             /* blocklist.NAME.path, NULL if unset */
    const char *topic;            /* blocklist.NAME.topic, NULL if unset;
                                     at least one of path and topic is set */
    const bs_config_keyspec *key; /* blocklist.NAME.key, else dedup.key */
    double fpr;                   /* blocklist.NAME.fpr */
    uint64_t capacity;            /* blocklist.NAME.capacity (live lists) */
    bs_normalize normalize;       /* blocklist.NAME.normalize */
    bs_match match;               /* blocklist.NAME.match */
} bs_config_blocklist;


/* dedup.on.missing.key */
#define BS_MISSING_KEY_POLICY_LIST(X)                                        \
    X(BS_CONFIG_MISSING_FORWARD, "forward")                                  \
    X(BS_CONFIG_MISSING_REJECT, "reject")
typedef enum bs_missing_key_policy {
    BS_MISSING_KEY_POLICY_LIST(BS_CONFIG_ENUM_CONSTANT)
} bs_missing_key_policy;

/* dedup.window.late */
#define BS_LATE_POLICY_LIST(X)                                               \
    X(BS_CONFIG_LATE_FORWARD, "forward")                                     \
    X(BS_CONFIG_LATE_REJECT, "reject")
typedef enum bs_late_policy {
    BS_LATE_POLICY_LIST(BS_CONFIG_ENUM_CONSTANT)
} bs_late_policy;

/* processing.guarantee */
#define BS_GUARANTEE_LIST(X)                                                 \
    X(BS_CONFIG_AT_LEAST_ONCE, "at_least_once")                              \
    X(BS_CONFIG_EXACTLY_ONCE, "exactly_once")
typedef enum bs_guarantee {
    BS_GUARANTEE_LIST(BS_CONFIG_ENUM_CONSTANT)
} bs_guarantee;

/* exactly_once.method */
#define BS_EOS_METHOD_LIST(X)                                                \
    X(BS_CONFIG_EOS_AUTO, "auto")                                            \
    X(BS_CONFIG_EOS_TRANSACTIONS, "transactions")                            \
    X(BS_CONFIG_EOS_REPLAY, "replay")
typedef enum bs_eos_method {
    BS_EOS_METHOD_LIST(BS_CONFIG_ENUM_CONSTANT)
} bs_eos_method;

/* checkpoint.store */
#define BS_CKPT_STORE_KIND_LIST(X)                                           \
    X(BS_CONFIG_STORE_DIR, "dir")                                            \
    X(BS_CONFIG_STORE_KAFKA, "kafka")
typedef enum bs_ckpt_store_kind {
    BS_CKPT_STORE_KIND_LIST(BS_CONFIG_ENUM_CONSTANT)
} bs_ckpt_store_kind;

/* log.level (the stage maps it to its own bs_log_level by name, not by
 * position: stage/base/settings.c) */
#define BS_CONFIG_LOG_LEVEL_LIST(X)                                          \
    X(BS_CONFIG_LOG_ERROR, "error")                                          \
    X(BS_CONFIG_LOG_WARN, "warn")                                            \
    X(BS_CONFIG_LOG_INFO, "info")                                            \
    X(BS_CONFIG_LOG_DEBUG, "debug")
typedef enum bs_config_log_level {
    BS_CONFIG_LOG_LEVEL_LIST(BS_CONFIG_ENUM_CONSTANT)
} bs_config_log_level;

/* ------------------------------------------------------------------------ */
/* Byte sizes                                                                */

/* The one parser of byte sizes in bloomstage: SIZE keys of the table
 * (dedup.max.bytes, checkpoint.chunk.bytes), byte-size options of the CLI
 * (`bloomstage dedup --max-memory`) and the benchmarks all call it, so
 * "512M" means the same everywhere.  A size is decimal digits, optionally
 * followed by one suffix that multiplies by a power of 1024:
 *   k or K  KiB (2^10)    M or m  MiB (2^20)
 *   G or g  GiB (2^30)    T or t  TiB (2^40)
 * so "512M" is 536870912 and "1k" is 1024.  No sign, blanks, fraction,
 * exponent or "B"; at most INT64_MAX (it fits int64_t and uint64_t).
 * Counts (capacities, numbers of lines) are not sizes: they have their own
 * parsers, where suffixes are powers of 1000.
 * Returns 0 with *out set (*why untouched), or -1 with *out untouched and
 * *why (when why is non-NULL) pointing at a static complaint that reads
 * after "value 'TEXT' ": BS_CONFIG_SIZE_SYNTAX or "is too large for a
 * 64-bit integer". */
#define BS_CONFIG_SIZE_SYNTAX                                                \
    "is not a size (digits, optionally followed by k, M, G or T: KiB, "     \
    "MiB, GiB, TiB)"
int bs_config_parse_size(const char *text, uint64_t *out,
                         const char **why) BS_CONFIG_WUR;

/* ------------------------------------------------------------------------ */
/* Building a configuration                                                  */

/* A configuration holding the defaults.  NULL on allocation failure. */
bs_config *bs_config_new(void);
void bs_config_destroy(bs_config *cfg);

/* Reads a properties file: `key=value` lines (also `key = value`; the value
 * is everything after the first '=', may contain '=', surrounding blanks
 * removed), `#` or `!` comment lines, blank lines, CRLF or LF.  No line
 * continuations, no escapes, no trailing comments: `a=b # c` sets a to
 * "b # c".  Errors: "PATH: cannot open ...: strerror", "PATH:LINE: ...". */
int bs_config_load_file(bs_config *cfg, const char *path, char *errstr,
                        size_t errstr_size) BS_CONFIG_WUR;

/* Applies every `BLOOMSTAGE_*` entry of envp (NULL-terminated, as environ).
 * The name after the prefix decodes as the apache/kafka image does: `___`
 * -> '-', `__` -> '_', `_` -> '.', then lower case, so BLOOMSTAGE_DEDUP_FPR
 * sets dedup.fpr and BLOOMSTAGE_KAFKA_SASL_MECHANISMS kafka.sasl.mechanisms.
 * A variable that decodes to no key is an error (a typo in a compose file
 * must not pass silently).  A name ending in `_FILE` sets the key named by
 * the rest to the content of the file its value names
 * (BLOOMSTAGE_KAFKA_SASL_PASSWORD_FILE=/run/secrets/pw); with the variable
 * without `_FILE` set too, it is an error naming both.  So a key whose own
 * name ends in ".file" (librdkafka's sasl.oauthbearer.assertion.file) is
 * set in the file or with -X, not by its plain variable.
 * Errors: "env NAME: ...", "env NAME_FILE=PATH: ...". */
int bs_config_load_env(bs_config *cfg, char *const *envp, char *errstr,
                       size_t errstr_size) BS_CONFIG_WUR;

/* s as messages show text that came from outside (a value, a topic's
 * name): valid UTF-8 kept as it is, every other byte, and every ASCII
 * control character, written as \xNN, so a message is one line of valid
 * UTF-8 whatever it quotes.  Into buf (n bytes, cut to fit); returns
 * buf. */
const char *bs_config_escape(const char *s, char *buf, size_t n);
/* Whether bs_config_escape would change s. */
bool bs_config_needs_escape(const char *s);

/* The variable name, without BS_CONFIG_ENV_PREFIX, that sets key: '-' ->
 * `___`, '_' -> `__`, '.' -> `_`, upper case (dedup.fpr: DEDUP_FPR).  -1
 * if it does not fit in n bytes. */
int bs_config_env_encode(const char *key, char *name, size_t n);

/* `-X key=value` from the command line: highest layer, origin "-X key=..."
 * (see bs_config_origin). */
int bs_config_set_arg(bs_config *cfg, const char *arg, char *errstr,
                      size_t errstr_size) BS_CONFIG_WUR;

/* Sets one key (key and value non-NULL) in the highest layer (as -X).
 * `origin` says where the value came from, for messages and
 * bs_config_origin; NULL means as -X would say it. */
int bs_config_set(bs_config *cfg, const char *key, const char *value,
                  const char *origin, char *errstr,
                  size_t errstr_size) BS_CONFIG_WUR;

/* Checks the whole: required keys set and non-empty, every blocklist has a
 * path, output.topic and rejected.topic not among input.topics (the stage
 * would consume its own output).  Of the librdkafka properties (with
 * prefix kafka., consumer. or producer.): security.protocol SASL_SSL or
 * SASL_PLAINTEXT needs sasl.mechanism (or sasl.mechanisms) set for that
 * client, and the files ssl.ca.location (a file, a directory or "probe"),
 * ssl.certificate.location and ssl.key.location name must be readable.
 * Builds the blocklist array.  Call after the last layer, before the typed
 * accessors below that say so. */
int bs_config_validate(bs_config *cfg, char *errstr,
                       size_t errstr_size) BS_CONFIG_WUR;

/* ------------------------------------------------------------------------ */
/* Reading it                                                                */

/* The value as text (after trimming), or the default, or NULL when the key
 * has neither.  Works for any key, pattern keys included
 * ("kafka.bootstrap.servers"); never aborts. */
const char *bs_config_get_str(const bs_config *cfg, const char *key);

/* Where the value came from: "default", "FILE:LINE", "env NAME",
 * "env NAME_FILE=PATH", "-X key=value" (bloomstage's own keys), "-X key"
 * (librdkafka's, unknown and secret keys: the value is not repeated),
 * "-X key=@file:PATH", or the origin given to bs_config_set.  NULL when
 * the key has no value. */
const char *bs_config_origin(const bs_config *cfg, const char *key);

/* Whether key's value must not be shown: a secret key's, or one read from
 * a file (@file:, BLOOMSTAGE_..._FILE).  For messages the stage writes
 * about a value it got from here. */
bool bs_config_value_hidden(const bs_config *cfg, const char *key);

/* Typed values of int/size, double, bool and enum keys (the enum as its
 * index in the allowed list: cast it to the key's enum type above).  A
 * pattern key that is unset yields its default (blocklist.NAME.fpr: 1e-6).
 */
int64_t bs_config_get_int(const bs_config *cfg, const char *key);
double bs_config_get_double(const bs_config *cfg, const char *key);
bool bs_config_get_bool(const bs_config *cfg, const char *key);
int bs_config_get_enum(const bs_config *cfg, const char *key);

/* The text of value `index` of enum key `key` ("processing.guarantee", 1
 * gives "exactly_once"); NULL if the index is out of range.  Aborts, as the
 * typed getters do, if the key is no enum key of the table. */
const char *bs_config_enum_text(const char *key, int index);

/* A key-spec key ("dedup.key", "blocklist.NAME.key" which defaults to
 * dedup.key).  Never NULL for a table key-spec key. */
const bs_config_keyspec *bs_config_get_keyspec(const bs_config *cfg,
                                               const char *key);

/* A topic-list key ("input.topics"): sets *topics to the names (trimmed,
 * non-empty, no duplicates) and returns how many; 0 and NULL when unset. */
size_t bs_config_get_topics(const bs_config *cfg, const char *key,
                            const char *const **topics);

/* The blocklists in the order their NAMEs first appeared.  Valid only after
 * bs_config_validate returned 0 (before that: 0). */
size_t bs_config_blocklists(const bs_config *cfg,
                            const bs_config_blocklist **blocklists);

/* Whether `key`'s value is a secret, by its name (any case): it contains
 * password, passwd, passphrase, secret, jaas, oauthbearer.config,
 * sasl.username, key.pem, ca.pem, ssl_key or basic.auth.user.info.  That
 * covers every property librdkafka flags as sensitive but
 * ssl.key.location, a path, which is shown, and the Schema Registry's
 * USER:PASSWORD (schema.registry.basic.auth.user.info).  For code that prints keys it did not get from the
 * bs_config_print_* functions. */
bool bs_config_key_is_secret(const char *key);

/* Calls cb(key_without_prefix, value, opaque) for every key that has a value
 * and starts with `prefix` ("kafka.", "consumer.", "producer."), in the
 * order the keys were first set (table keys with defaults first).  Stops at
 * the first non-zero return of cb and returns it; 0 otherwise. */
int bs_config_foreach(const bs_config *cfg, const char *prefix,
                      int (*cb)(const char *key, const char *value,
                                void *opaque),
                      void *opaque);

/* ------------------------------------------------------------------------ */
/* Documents the table drives                                                */

/* `bloomstage config --list`: every key with type, default, range and help.
 * `bloomstage config --sample`: the documented sample file, which
 * config/bloomstage.conf must equal (a test diffs them).
 * The effective configuration: every key with a value, its value and
 * origin, one `key = value  # origin` line each, for people (not for
 * loading back): control characters escaped (\n, \x01), the values of
 * secret keys and values read from files replaced by "[redacted]".
 * Each returns 0, or -1 if writing to `out` failed. */
int bs_config_print_list(FILE *out) BS_CONFIG_WUR;
int bs_config_print_sample(FILE *out) BS_CONFIG_WUR;
int bs_config_print_effective(const bs_config *cfg, FILE *out) BS_CONFIG_WUR;

#ifdef __cplusplus
}
#endif

#endif
