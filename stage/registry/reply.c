/*
 * reply.c -- a registry's reply read without the network: an HTTP status
 * and body sorted into registry.h's four answers, a 200's body parsed
 * (jansson) into a schema reply within registry.h's bounds, and the names
 * of schema types and answers.  bs_registry_get reads every reply through
 * here and the fuzz target drives it on bytes of its own; nothing here
 * calls libcurl.
 */
#include "registry/registry.h"
#include "registry/registry_int.h"

#include <jansson.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *bs_registry_type_name(bs_registry_type type)
{
    switch (type) {
    case BS_REGISTRY_AVRO:
        return "AVRO";
    case BS_REGISTRY_PROTOBUF:
        return "PROTOBUF";
    case BS_REGISTRY_JSON:
        return "JSON";
    }
    return "?";
}

const char *bs_registry_result_name(bs_registry_result result)
{
    switch (result) {
    case BS_REGISTRY_FOUND:
        return "found";
    case BS_REGISTRY_NOT_FOUND:
        return "not found";
    case BS_REGISTRY_UNREACHABLE:
        return "unreachable";
    case BS_REGISTRY_BAD:
        return "bad";
    }
    return "?";
}

void bs_registry_reply_destroy(bs_registry_reply *reply)
{
    if (!reply)
        return;
    for (size_t i = 0; i < reply->nrefs; i++) {
        free(reply->refs[i].name);
        free(reply->refs[i].subject);
    }
    free(reply->refs);
    free(reply->text);
    free(reply);
}

/* A string member of a reference: present, non-empty, bounded. */
static int ref_string(json_t *ref, const char *key, size_t i, char **out,
                      char *errstr, size_t n)
{
    json_t *v = json_object_get(ref, key);
    if (!json_is_string(v)) {
        bs_errf(errstr, n, "reference %zu: \"%s\" is %s, not a string", i, key,
                v ? "of another type" : "missing");
        return -1;
    }
    size_t len = json_string_length(v);
    if (len == 0 || len > BS_REGISTRY_MAX_NAME) {
        bs_errf(errstr, n, "reference %zu: \"%s\" of %zu bytes (1 to %d)", i,
                key, len, BS_REGISTRY_MAX_NAME);
        return -1;
    }
    if (!(*out = strndup(json_string_value(v), len))) {
        bs_errf(errstr, n, "out of memory");
        return -1;
    }
    return 0;
}

/* A 200 reply's body as a schema reply, or -1 with errstr set. */
static int parse_schema(json_t *root, bs_registry_reply **out, char *errstr,
                        size_t n)
{
    char shown[SHOW_MAX + 4];
    bs_registry_reply *r = NULL;
    if (!json_is_object(root)) {
        bs_errf(errstr, n, "the reply is not a JSON object");
        goto err;
    }
    json_t *schema = json_object_get(root, "schema");
    if (!json_is_string(schema)) {
        bs_errf(errstr, n, "the reply's \"schema\" is %s, not a string",
                schema ? "of another type" : "missing");
        goto err;
    }
    size_t len = json_string_length(schema);
    if (len == 0 || len > BS_REGISTRY_MAX_TEXT) {
        bs_errf(errstr, n, "the reply's \"schema\" holds %zu bytes (1 to %u)",
                len, BS_REGISTRY_MAX_TEXT);
        goto err;
    }
    if (!(r = calloc(1, sizeof *r)))
        goto oom;
    json_t *type = json_object_get(root, "schemaType");
    if (!type || json_is_null(type)) {
        r->type = BS_REGISTRY_AVRO;
    } else if (!json_is_string(type)) {
        bs_errf(errstr, n, "the reply's \"schemaType\" is not a string");
        goto err;
    } else {
        const char *t = json_string_value(type);
        size_t tlen = json_string_length(type);
        if (tlen == 4 && memcmp(t, "AVRO", 4) == 0)
            r->type = BS_REGISTRY_AVRO;
        else if (tlen == 8 && memcmp(t, "PROTOBUF", 8) == 0)
            r->type = BS_REGISTRY_PROTOBUF;
        else if (tlen == 4 && memcmp(t, "JSON", 4) == 0)
            r->type = BS_REGISTRY_JSON;
        else {
            bs_errf(errstr, n,
                    "schema type '%s' is not supported (AVRO, PROTOBUF, JSON)",
                    show(shown, t, tlen));
            goto err;
        }
    }
    if (!(r->text = strndup(json_string_value(schema), len)))
        goto oom;
    r->text_len = len;
    json_t *refs = json_object_get(root, "references");
    if (refs && !json_is_null(refs)) {
        if (!json_is_array(refs)) {
            bs_errf(errstr, n, "the reply's \"references\" is not an array");
            goto err;
        }
        size_t count = json_array_size(refs);
        if (count > BS_REGISTRY_MAX_REFS) {
            bs_errf(errstr, n, "the reply has %zu references; at most %d",
                    count, BS_REGISTRY_MAX_REFS);
            goto err;
        }
        if (count > 0 && !(r->refs = calloc(count, sizeof *r->refs)))
            goto oom;
        for (size_t i = 0; i < count; i++) {
            json_t *ref = json_array_get(refs, i);
            if (!json_is_object(ref)) {
                bs_errf(errstr, n, "reference %zu is not an object", i);
                goto err;
            }
            bs_registry_reply_ref *rr = &r->refs[i];
            r->nrefs = i + 1;
            if (ref_string(ref, "name", i, &rr->name, errstr, n) != 0 ||
                ref_string(ref, "subject", i, &rr->subject, errstr, n) != 0)
                goto err;
            json_t *v = json_object_get(ref, "version");
            if (!json_is_integer(v) || json_integer_value(v) < 1 ||
                json_integer_value(v) > INT32_MAX) {
                bs_errf(errstr, n,
                        "reference %zu ('%s'): \"version\" is not an integer "
                        "from 1 to %" PRId32,
                        i, show(shown, rr->name, strlen(rr->name)), INT32_MAX);
                goto err;
            }
            rr->version = (int32_t)json_integer_value(v);
        }
    }
    *out = r;
    return 0;
oom:
    bs_errf(errstr, n, "out of memory");
err:
    bs_registry_reply_destroy(r);
    return -1;
}

bs_registry_result bs_registry_reply_parse(long status, const char *body,
                                           size_t len,
                                           bs_registry_reply **out,
                                           char *errstr, size_t errstr_size)
{
    char shown[SHOW_MAX + 4];
    *out = NULL;
    if (len > BS_REGISTRY_MAX_REPLY) {
        bs_errf(errstr, errstr_size,
                "HTTP %ld: a reply of %zu bytes (at most %u)", status, len,
                BS_REGISTRY_MAX_REPLY);
        return BS_REGISTRY_BAD;
    }
    json_error_t jerr;
    json_t *root = len ? json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr)
                       : NULL;
    if (status == 200) {
        bs_registry_result r = BS_REGISTRY_BAD;
        if (!root)
            bs_errf(errstr, errstr_size, "the reply is not JSON: %s",
                    len ? show(shown, jerr.text, strlen(jerr.text))
                    : "empty body");
        else if (parse_schema(root, out, errstr, errstr_size) == 0)
            r = BS_REGISTRY_FOUND;
        json_decref(root);
        return r;
    }
    /* An error reply: Confluent's {"error_code": N, "message": "..."}, if
     * the registry gave one. */
    long long code = 0;
    const char *msg = NULL;
    size_t msg_len = 0;
    if (json_is_object(root)) {
        json_t *c = json_object_get(root, "error_code");
        json_t *m = json_object_get(root, "message");
        if (json_is_integer(c))
            code = json_integer_value(c);
        if (json_is_string(m)) {
            msg = json_string_value(m);
            msg_len = json_string_length(m);
        }
    }
    char said[SHOW_MAX + 64] = "";
    if (msg || code)
        snprintf(said, sizeof said, ": %s",
                 msg ? show(shown, msg, msg_len) : "");
    if (code) {
        size_t used = strlen(said);
        snprintf(said + used, sizeof said - used, "%s(error_code %lld)",
                 msg ? " " : "", code);
    }
    json_decref(root);

    bs_registry_result r;
    const char *why;
    if (status == 404 && (code == 40401 || code == 40402 || code == 40403)) {
        r = BS_REGISTRY_NOT_FOUND;
        why = "";
    } else if (status == 404) {
        r = BS_REGISTRY_UNREACHABLE;
        why = " without Confluent's error_code 40401-40403: is the URL the "
              "registry's Confluent API root (Apicurio's ends in "
              "/apis/ccompat/v7)?";
    } else if (status == 401 || status == 403) {
        r = BS_REGISTRY_UNREACHABLE;
        why = status == 401 ? " (the credentials were refused or missing)"
                            : " (the credentials are not allowed to read)";
    } else if (status >= 300 && status < 400) {
        r = BS_REGISTRY_UNREACHABLE;
        why = " (a redirect, not followed)";
    } else if (status >= 400 && status < 500 && status != 408 &&
               status != 429) {
        r = BS_REGISTRY_BAD;
        why = "";
    } else {
        r = BS_REGISTRY_UNREACHABLE;
        why = "";
    }
    bs_errf(errstr, errstr_size, "HTTP %ld%s%s", status, why, said);
    return r;
}
