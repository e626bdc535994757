/*
 * record_key.c -- see record_key.h.
 */
#include "keys/record_key.h"
#include "keys/framed.h"

#include <fm_frame.h>
#include <fm_key.h>
#include <fm_normalize.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The header lookup of a Kafka record (opaque: the rd_kafka_message_t). */
static bool message_header(const void *opaque, const char *name,
                           const void **v, size_t *len)
{
    rd_kafka_headers_t *hdrs;
    const void *hv;
    size_t hlen;
    if (rd_kafka_message_headers(opaque, &hdrs) !=
            RD_KAFKA_RESP_ERR_NO_ERROR ||
        rd_kafka_header_get_last(hdrs, name, &hv, &hlen) !=
            RD_KAFKA_RESP_ERR_NO_ERROR ||
        !hv)
        return false;
    *v = hv;
    *len = hlen;
    return true;
}

/* Everything but the reason's and the arena's bytes (a record's hot path:
 * about a third of the struct). */
static void keys_clear(bs_record_keys *rk)
{
    memset(rk, 0, offsetof(bs_record_keys, why));
    rk->why[0] = '\0';
}

void bs_record_keys_init(bs_record_keys *rk, const rd_kafka_message_t *msg)
{
    keys_clear(rk);
    rk->rec.key = msg->key;
    rk->rec.key_len = msg->key_len;
    rk->rec.value = msg->payload;
    rk->rec.value_len = msg->len;
    rk->rec.header = message_header;
    rk->rec.header_opaque = msg;
}

void bs_record_keys_init_view(bs_record_keys *rk, const bs_record_view *rec)
{
    keys_clear(rk);
    rk->rec = *rec;
}

void bs_record_keys_reset(bs_record_keys *rk)
{
    if (rk->doc)
        json_decref(rk->doc);
    if (rk->kdoc)
        json_decref(rk->kdoc);
    for (size_t i = 0; i < rk->nowned; i++)
        free(rk->owned[i]);
    for (size_t i = 0; i < rk->nmore; i++)
        free(rk->more[i]);
    free(rk->more);
    keys_clear(rk);
}

/* n bytes of the arena, or NULL when it is full. */
static char *arena_take(bs_record_keys *rk, size_t n)
{
    n = (n + 7) & ~(size_t)7;
    if (n > sizeof(rk->arena) - rk->arena_used)
        return NULL;
    char *p = rk->arena + rk->arena_used;
    rk->arena_used += n;
    return p;
}

/* Takes ownership of text until the reset; false (text freed) when out of
 * memory. */
static bool keep(bs_record_keys *rk, char *text)
{
    if (rk->nowned < sizeof(rk->owned) / sizeof(rk->owned[0])) {
        rk->owned[rk->nowned++] = text;
        return true;
    }
    if (rk->nmore == rk->capmore) {
        size_t cap = rk->capmore ? rk->capmore * 2 : 8;
        char **nm = realloc(rk->more, cap * sizeof(*nm));
        if (!nm) {
            free(text);
            return false;
        }
        rk->more = nm;
        rk->capmore = cap;
    }
    rk->more[rk->nmore++] = text;
    return true;
}

/* RFC 6901: an array index is "0" or digits without a leading zero. */
static bool array_index(const char *tok, size_t n, size_t *idx)
{
    if (!*tok || (tok[0] == '0' && tok[1]))
        return false;
    size_t v = 0;
    for (const char *p = tok; *p; p++) {
        if (*p < '0' || *p > '9' || v > (SIZE_MAX - 9) / 10)
            return false;
        v = v * 10 + (size_t)(*p - '0');
    }
    if (v >= n)
        return false;
    *idx = v;
    return true;
}

/* The JSON document of the value (or, on_key, of the record key), parsed
 * once; NULL when it is absent or not JSON. */
static json_t *json_doc(bs_record_keys *rk, bool on_key)
{
    bool *parsed = on_key ? &rk->kparsed : &rk->parsed;
    bool *bad = on_key ? &rk->kbad_json : &rk->bad_json;
    void **doc = on_key ? &rk->kdoc : &rk->doc;
    if (!*parsed) {
        const void *b = on_key ? rk->rec.key : rk->rec.value;
        size_t n = on_key ? rk->rec.key_len : rk->rec.value_len;
        *parsed = true;
        /* A value a JSON Schema serializer framed (Confluent's 5-byte
         * prefix, which JSON text never starts with) is read after it. */
        const uint8_t *json;
        size_t jlen;
        uint32_t id;
        int framed;
        char err[64];
        if (b && n &&
            fm_frame_json(b, n, &json, &jlen, &id, &framed, err,
                          sizeof(err)) == 0 &&
            jlen)
            *doc = json_loadb((const char *)json, jlen,
                              JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
        *bad = *doc == NULL;
    }
    return *bad ? NULL : *doc;
}

/* A JSON value's typed bytes (fm_key.h), nested values as elements. */
static void json_encode(fm_key *k, const json_t *node)
{
    switch (json_typeof(node)) {
    case JSON_STRING:
        fm_key_bytes(k, json_string_value(node), json_string_length(node));
        return;
    case JSON_INTEGER:
        fm_key_int(k, (int64_t)json_integer_value(node));
        return;
    case JSON_REAL:
        fm_key_real(k, json_real_value(node));
        return;
    case JSON_TRUE:
    case JSON_FALSE:
        fm_key_bool(k, json_is_true(node));
        return;
    case JSON_NULL:
        fm_key_null(k);
        return;
    case JSON_ARRAY: {
        fm_key_compound(k, 'a');
        for (size_t i = 0; i < json_array_size(node); i++) {
            fm_key_mark m = fm_key_elem_begin(k);
            json_encode(k, json_array_get(node, i));
            fm_key_elem_end(k, m);
        }
        return;
    }
    case JSON_OBJECT: {
        fm_key_compound(k, 'm');
        size_t start = k->len;
        const char *name;
        size_t nlen;
        json_t *v;
        json_object_keylen_foreach((json_t *)node, name, nlen, v) {
            fm_key_mark m = fm_key_elem_begin(k);
            fm_key_bytes(k, name, nlen);
            fm_key_elem_end(k, m);
            m = fm_key_elem_begin(k);
            json_encode(k, v);
            fm_key_elem_end(k, m);
        }
        (void)fm_key_map_sort(k, start);
        return;
    }
    }
}

/* Keeps a copy of the key's bytes until the reset; false when out of
 * memory or the key failed. */
static bool keep_key(bs_record_keys *rk, const fm_key *k, const void **key,
                     size_t *len)
{
    if (!fm_key_ok(k))
        return false;
    char *copy = arena_take(rk, k->len ? k->len : 1);
    if (!copy) {
        copy = malloc(k->len ? k->len : 1);
        if (!copy || !keep(rk, copy))
            return false;
    }
    memcpy(copy, k->p, k->len);
    *key = copy;
    *len = k->len;
    return true;
}

static bool json_key(bs_record_keys *rk, const bs_config_keypart *part,
                     const void **key, size_t *len)
{
    json_t *node = json_doc(rk, part->on_key);
    for (size_t i = 0; i < part->ntokens && node; i++) {
        const char *tok = part->tokens[i];
        size_t idx;
        if (json_is_object(node))
            node = json_object_get(node, tok);
        else if (json_is_array(node) &&
                 array_index(tok, json_array_size(node), &idx))
            node = json_array_get(node, idx);
        else
            node = NULL;
    }
    if (!node)
        return false;
    if (json_is_string(node)) {
        *key = json_string_value(node);
        *len = json_string_length(node);
        return true;
    }
    fm_key k;
    fm_key_init(&k);
    json_encode(&k, node);
    bool ok = keep_key(rk, &k, key, len);
    fm_key_free(&k);
    return ok;
}

/* avro:, protobuf: (framed.h); a reason kept for a key that is missing
 * for one, hold set for a schema that cannot be fetched now. */
static bool framed_key(bs_record_keys *rk, const bs_config_keypart *part,
                       const void **key, size_t *len)
{
    const void *b = part->on_key ? rk->rec.key : rk->rec.value;
    size_t n = part->on_key ? rk->rec.key_len : rk->rec.value_len;
    char why[sizeof(rk->why)];
    bs_framed_result rc;
    int32_t id = -1;
    fm_key k;
    fm_key_init(&k);
    const char *kind =
        part->kind == BS_CONFIG_KEYSPEC_AVRO ? "avro" : "protobuf";
    if (!b) {
        rc = BS_FRAMED_MISSING;
        snprintf(why, sizeof(why), "%s: %s", kind,
                 part->on_key ? "no record key" : "no value");
    } else if (!rk->framed) {
        rc = BS_FRAMED_BAD;
        snprintf(why, sizeof(why), "%s: no schema registry", kind);
    } else {
        rc = bs_framed_key(rk->framed, part, b, n, &k, &id, why, sizeof(why));
    }
    bool ok = rc == BS_FRAMED_FOUND && keep_key(rk, &k, key, len);
    fm_key_free(&k);
    if (rc == BS_FRAMED_UNREACHABLE && !rk->hold) {
        rk->hold = true;
        rk->hold_id = id;
        memcpy(rk->why, why, sizeof(why));
    } else if (rc != BS_FRAMED_FOUND && !rk->why[0] && !rk->hold) {
        memcpy(rk->why, why, sizeof(why));
        rk->bad = rc == BS_FRAMED_BAD;
    }
    return ok;
}

static bool part_key(bs_record_keys *rk, const bs_config_keypart *part,
                     const void **key, size_t *len)
{
    const bs_record_view *r = &rk->rec;
    switch (part->kind) {
    case BS_CONFIG_KEYSPEC_KEY:
        if (!r->key)
            return false;
        *key = r->key;
        *len = r->key_len;
        return true;
    case BS_CONFIG_KEYSPEC_VALUE:
        if (!r->value)
            return false;
        *key = r->value;
        *len = r->value_len;
        return true;
    case BS_CONFIG_KEYSPEC_HEADER:
        return r->header && r->header(r->header_opaque, part->arg, key, len);
    case BS_CONFIG_KEYSPEC_JSON:
        return json_key(rk, part, key, len);
    case BS_CONFIG_KEYSPEC_AVRO:
    case BS_CONFIG_KEYSPEC_PROTOBUF:
        return framed_key(rk, part, key, len);
    }
    return false;
}

bool bs_record_key(bs_record_keys *rk, const bs_config_keyspec *spec,
                   const void **key, size_t *len)
{
    if (spec->nparts == 1)
        return part_key(rk, &spec->parts[0], key, len);
    /* A composite key: the tuple of its parts, none missing. */
    fm_key k;
    fm_key_init(&k);
    fm_key_compound(&k, 'T');
    bool ok = true;
    for (size_t i = 0; ok && i < spec->nparts; i++) {
        const void *b;
        size_t n;
        ok = part_key(rk, &spec->parts[i], &b, &n);
        if (ok) {
            fm_key_mark m = fm_key_elem_begin(&k);
            fm_key_bytes(&k, b, n);
            fm_key_elem_end(&k, m);
        }
    }
    ok = ok && keep_key(rk, &k, key, len);
    fm_key_free(&k);
    return ok;
}

unsigned bs_normalize_flags(bs_normalize norm)
{
    switch (norm) {
    case BS_CONFIG_NORM_NONE: return 0;
    case BS_CONFIG_NORM_LOWER: return FM_NORM_LOWER;
    case BS_CONFIG_NORM_TRIM: return FM_NORM_TRIM;
    case BS_CONFIG_NORM_LOWER_TRIM: return FM_NORM_LOWER | FM_NORM_TRIM;
    }
    return 0;
}

bool bs_record_key_norm(bs_record_keys *rk, const bs_config_keyspec *spec,
                        bs_normalize norm, const void **key, size_t *len)
{
    if (!bs_record_key(rk, spec, key, len))
        return false;
    if (norm == BS_CONFIG_NORM_NONE)
        return true;
    /* The normalized text is never longer than the key. */
    size_t cap = *len ? *len : 1;
    char *out = arena_take(rk, cap);
    if (!out && (!(out = malloc(cap)) || !keep(rk, out)))
        return false;
    size_t olen;
    char err[64];
    if (fm_norm_apply(bs_normalize_flags(norm), *key, *len, (uint8_t *)out,
                      cap, &olen, err, sizeof(err)) != 0)
        return false;
    *key = out;
    *len = olen;
    return true;
}

bool bs_keyspec_equal(const bs_config_keyspec *a, const bs_config_keyspec *b)
{
    if (a->nparts != b->nparts)
        return false;
    for (size_t i = 0; i < a->nparts; i++) {
        const bs_config_keypart *x = &a->parts[i], *y = &b->parts[i];
        if (x->kind != y->kind || x->on_key != y->on_key ||
            strcmp(x->arg, y->arg) != 0)
            return false;
    }
    return true;
}
