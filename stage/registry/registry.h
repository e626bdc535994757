/*
 * registry.h -- a client of a Confluent-compatible Schema Registry: a
 * schema fetched by id once, with its references, and cached.
 *
 * Records in Confluent's wire format carry a 4-byte schema id; the schema
 * itself (Avro, Protobuf or JSON Schema text) lives in a registry and is
 * fetched with GET {base}/schemas/ids/{id}.  A schema may reference others
 * (a .proto importing another, an Avro record using a named type of
 * another subject): each reference names a subject and a version, fetched
 * with GET {base}/subjects/{subject}/versions/{version}, and may reference
 * more.  This module speaks HTTP (libcurl) and JSON (jansson) and knows
 * nothing of Kafka, of record formats or of the stage.
 *
 * Answers.  bs_registry_get sorts every outcome into four:
 *   FOUND        the schema and its references, resolved.
 *   NOT_FOUND    the registry says the id does not exist (404 with the
 *                Confluent error_code 40403): an answer about the record
 *                that carries the id, not about the registry.
 *   UNREACHABLE  no registry gave an answer: connection refused, timeout,
 *                TLS failure, 5xx, 401/403, 429, a redirect, a 404 that is
 *                not Confluent's 40403 (a base URL without
 *                /apis/ccompat/v7 answers so).  Retriable: the caller holds
 *                and asks again; errstr names each URL tried (without
 *                credentials) and its cause.
 *   BAD          a registry answered, but with a reply that does not parse,
 *                a schema type this client does not know, a reference that
 *                cannot be resolved (missing, a cycle, past the bounds
 *                below), or another 4xx: errstr names what and where.
 * Several base URLs are tried in turn for UNREACHABLE; the one that last
 * gave an answer is tried first next time.
 *
 * Caching.  A schema id names one schema forever, so a FOUND schema is kept
 * (its references with it) until the cache holds conf->max_schemas schemas
 * and a new one must be added: then the least recently used one is freed.
 * A NOT_FOUND or BAD answer is kept for conf->negative_ttl_ms only (0: not
 * kept): a registry with replicas can answer 404 for an id a moment before
 * it learns of it, so the answer must expire, but a burst of records with
 * one unknown id must not make a request each.  Negative entries count
 * against max_schemas too.  UNREACHABLE is never kept.  Memory is bounded
 * by max_schemas * BS_REGISTRY_MAX_TEXT at worst (schemas seen in practice
 * are a few KiB).
 *
 * Borrowing.  The schema bs_registry_get returns belongs to the handle.  It
 * stays valid until the next bs_registry_get of an id that is not in the
 * cache (only such a call adds an entry, and adding is the only time the
 * cache evicts) or bs_registry_destroy.  A get answered from the cache
 * changes nothing but the order of use, so callers may keep one schema
 * across gets of cached ids, never across a get of a new id: a caller that
 * needs a schema longer (a compiled Avro schema, a parsed .proto) builds its
 * own form from it before the next get.
 *
 * Secrets.  conf->user_info ("USER:PASSWORD") and any user:password in a
 * URL are sent as HTTP basic auth and never written into errstr: URLs in
 * messages have their userinfo removed, and a message is searched for the
 * password before it is returned.  The handle sends credentials only to the
 * configured hosts: redirects are not followed.  Like curl, the handle
 * goes through the proxy that http_proxy / https_proxy / no_proxy name.
 *
 * Threads: a handle is used by one thread at a time (the stage's).  Nothing
 * here prints or exits.  Functions that can fail write a message into
 * errstr[errstr_size] (may be NULL/0).
 */
#ifndef BLOOMSTAGE_REGISTRY_H
#define BLOOMSTAGE_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bounds on what a registry can make the handle hold. */
#define BS_REGISTRY_MAX_URLS 16          /* base URLs in conf->urls */
#define BS_REGISTRY_MAX_URL_LEN 2048     /* bytes of one base URL */
#define BS_REGISTRY_MAX_REPLY (4u << 20) /* bytes of one HTTP reply body */
#define BS_REGISTRY_MAX_REFS 64          /* references of one schema, all
                                            depths together */
#define BS_REGISTRY_MAX_REF_DEPTH 16     /* a reference of a reference ... */
#define BS_REGISTRY_MAX_TEXT (4u << 20)  /* bytes of a schema's text and
                                            its references' together */
#define BS_REGISTRY_MAX_NAME 1024        /* bytes of a reference's name or
                                            subject */

/* Defaults for the zero values of bs_registry_conf. */
#define BS_REGISTRY_DEFAULT_TIMEOUT_MS 10000
#define BS_REGISTRY_DEFAULT_CONNECT_TIMEOUT_MS 5000
#define BS_REGISTRY_DEFAULT_MAX_SCHEMAS 1000

typedef struct bs_registry bs_registry;

typedef struct bs_registry_conf {
    /* Base URLs, comma-separated, blanks around each ignored: the
     * Confluent API's root, http:// or https://
     * (http://registry:8081, https://host/apis/ccompat/v7).  At least one. */
    const char *urls;
    /* "USER:PASSWORD" for HTTP basic auth, or NULL/"" for none. */
    const char *user_info;
    /* PEM files for HTTPS, each NULL/"" for none: the CA to verify the
     * registry with (none: the system's), and a client certificate and
     * its (unencrypted) key for registries that ask for one. */
    const char *ca_location;
    const char *cert_location;
    const char *key_location;
    /* Bounds of one HTTP request, ms: connecting, and the whole request.
     * 0: the defaults above (the connect bound never exceeds the whole). */
    long connect_timeout_ms;
    long timeout_ms;
    /* Entries the cache holds at most (0: the default above). */
    size_t max_schemas;
    /* How long a NOT_FOUND or BAD answer is kept, ms (0: not kept). */
    long negative_ttl_ms;
} bs_registry_conf;

typedef enum bs_registry_type {
    BS_REGISTRY_AVRO = 0, /* Confluent omits schemaType for Avro */
    BS_REGISTRY_PROTOBUF,
    BS_REGISTRY_JSON,
} bs_registry_type;

/* "AVRO", "PROTOBUF", "JSON" (the registry's words). */
const char *bs_registry_type_name(bs_registry_type type);

/* One reference, resolved: the name the referring schema uses for it (for
 * Protobuf the import path, "other.proto"; for Avro a type name), where it
 * is registered, and its text. */
typedef struct bs_registry_ref {
    const char *name;
    const char *subject;
    int32_t version;
    bs_registry_type type;
    const char *text; /* NUL-terminated; text_len bytes before the NUL */
    size_t text_len;
} bs_registry_ref;

typedef struct bs_registry_schema {
    int32_t id;
    bs_registry_type type;
    const char *text; /* NUL-terminated; text_len bytes before the NUL */
    size_t text_len;
    /* Every reference, at every depth, once per name, each after the ones
     * it references itself (so a reader can define them in this order). */
    size_t nrefs;
    const bs_registry_ref *refs;
} bs_registry_schema;

typedef enum bs_registry_result {
    BS_REGISTRY_FOUND = 0,
    BS_REGISTRY_NOT_FOUND,
    BS_REGISTRY_UNREACHABLE,
    BS_REGISTRY_BAD,
} bs_registry_result;

/* "found", "not found", "unreachable", "bad". */
const char *bs_registry_result_name(bs_registry_result result);

/* A handle for conf (copied: conf and its strings may go after the call).
 * Checks the URLs (syntax, scheme, count), user_info (a ':' between user
 * and password) and that the PEM files can be read; connects to nothing.
 * NULL with errstr set on error. */
bs_registry *bs_registry_new(const bs_registry_conf *conf, char *errstr,
                             size_t errstr_size);
/* Frees the handle, its cache and every schema it returned.  NULL is
 * fine. */
void bs_registry_destroy(bs_registry *reg);

/* The schema with this id: from the cache, else from the registry (see
 * Answers, Caching and Borrowing above).  *out is set for FOUND only. */
bs_registry_result bs_registry_get(bs_registry *reg, int32_t id,
                                   const bs_registry_schema **out,
                                   char *errstr, size_t errstr_size);

/* HTTP requests made so far (every attempt at every URL), and entries the
 * cache holds now (FOUND and negative ones): for tests and metrics. */
uint64_t bs_registry_requests(const bs_registry *reg);
size_t bs_registry_cached(const bs_registry *reg);

/* ------------------------------------------------------------------------ */
/* Replies, without the network (bs_registry_get uses these; tests and the
 * fuzz target call them on bytes of their own).                             */

/* A schema reply parsed: the body of GET /schemas/ids/{id} or
 * /subjects/{subject}/versions/{version} ({"schema": TEXT, "schemaType":
 * "AVRO"|"PROTOBUF"|"JSON" (absent: AVRO), "references": [{"name",
 * "subject", "version"}...], other members ignored}).  Owned by the
 * caller: bs_registry_reply_destroy. */
typedef struct bs_registry_reply_ref {
    char *name;
    char *subject;
    int32_t version;
} bs_registry_reply_ref;

typedef struct bs_registry_reply {
    bs_registry_type type;
    char *text;
    size_t text_len;
    size_t nrefs;
    bs_registry_reply_ref *refs;
} bs_registry_reply;

/* What an HTTP status and body from a registry mean.  200: the body parsed
 * as a schema reply (FOUND with *out set, or BAD).  404 with the Confluent
 * error_code 40401, 40402 or 40403 (no such subject, version, schema):
 * NOT_FOUND (bs_registry_get makes that BAD for a reference).  Any other
 * status as Answers above says.  errstr gets what is wrong; for a status
 * other than 200 it begins "HTTP STATUS" and holds the registry's own
 * message and error_code when it gave them (control characters replaced,
 * at most 200 bytes).  body need not be NUL-terminated; a len above
 * BS_REGISTRY_MAX_REPLY is BAD. */
bs_registry_result bs_registry_reply_parse(long status, const char *body,
                                           size_t len,
                                           bs_registry_reply **out,
                                           char *errstr, size_t errstr_size);
void bs_registry_reply_destroy(bs_registry_reply *reply);

#ifdef __cplusplus
}
#endif

#endif
