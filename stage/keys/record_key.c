/*
 * record_key.c -- see record_key.h.
 */
#include "keys/record_key.h"

#include <jansson.h>
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

void bs_record_keys_init(bs_record_keys *rk, const rd_kafka_message_t *msg)
{
    memset(rk, 0, sizeof(*rk));
    rk->rec.key = msg->key;
    rk->rec.key_len = msg->key_len;
    rk->rec.value = msg->payload;
    rk->rec.value_len = msg->len;
    rk->rec.header = message_header;
    rk->rec.header_opaque = msg;
}

void bs_record_keys_init_view(bs_record_keys *rk, const bs_record_view *rec)
{
    memset(rk, 0, sizeof(*rk));
    rk->rec = *rec;
}

void bs_record_keys_reset(bs_record_keys *rk)
{
    if (rk->doc)
        json_decref(rk->doc);
    for (size_t i = 0; i < rk->nowned; i++)
        free(rk->owned[i]);
    for (size_t i = 0; i < rk->nmore; i++)
        free(rk->more[i]);
    free(rk->more);
    memset(rk, 0, sizeof(*rk));
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

static bool json_key(bs_record_keys *rk, const bs_config_keyspec *spec,
                     const void **key, size_t *len)
{
    if (!rk->parsed) {
        rk->parsed = true;
        if (rk->rec.value && rk->rec.value_len)
            rk->doc = json_loadb(rk->rec.value, rk->rec.value_len,
                                 JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
        rk->bad_json = rk->doc == NULL;
    }
    if (rk->bad_json)
        return false;
    json_t *node = rk->doc;
    for (size_t i = 0; i < spec->ntokens && node; i++) {
        const char *tok = spec->tokens[i];
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
    char *text = json_dumps(node, JSON_COMPACT | JSON_SORT_KEYS |
                                      JSON_ENCODE_ANY);
    if (!text || !keep(rk, text))
        return false;
    *key = text;
    *len = strlen(text);
    return true;
}

bool bs_record_key(bs_record_keys *rk, const bs_config_keyspec *spec,
                   const void **key, size_t *len)
{
    const bs_record_view *r = &rk->rec;
    switch (spec->kind) {
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
        return r->header && r->header(r->header_opaque, spec->arg, key, len);
    case BS_CONFIG_KEYSPEC_JSON:
        return json_key(rk, spec, key, len);
    }
    return false;
}

bool bs_keyspec_equal(const bs_config_keyspec *a, const bs_config_keyspec *b)
{
    return a->kind == b->kind && strcmp(a->arg, b->arg) == 0;
}
