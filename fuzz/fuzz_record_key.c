/*
 * fuzz_record_key.c -- libFuzzer target for the key extraction of
 * stage/keys/record_key.c: key specs as the configuration parses them, applied
 * to a record built from the input (bs_record_keys_init_view: no broker).
 *
 * Input, '\n'-separated:
 *   line 1  key specs, separated by '|' (at most 16): "key", "value",
 *           "header:NAME", "json:/pointer", "key.json:/pointer", or
 *           several of those separated by commas (a composite key);
 *           each becomes a blocklist.bN.key, so a record sees many
 *           specs at once
 *   line 2  flags: byte 0 bit 0 the record has a key, bit 1 a value
 *   line 3  the record key
 *   line 4  headers, NAME=VALUE separated by '&' (a NAME without '='
 *           has a null value)
 *   rest    the record value (JSON or not)
 * Everything is freed on every call.  Checks, beyond the sanitizers: a
 * key found is never NULL, and every key of the record is still readable
 * (same bytes) after the last spec ran.
 */
#include "keys/record_key.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SPECS 16

typedef struct hdr {
    const char *name;
    size_t name_len;
    const char *value; /* NULL: null value */
    size_t value_len;
} hdr;

typedef struct hdrs {
    hdr h[32];
    size_t n;
} hdrs;

static bool header(const void *opaque, const char *name, const void **v,
                   size_t *len)
{
    const hdrs *t = opaque;
    size_t nl = strlen(name);
    for (size_t i = t->n; i-- > 0;)
        if (t->h[i].name_len == nl && !memcmp(t->h[i].name, name, nl)) {
            if (!t->h[i].value)
                return false;
            *v = t->h[i].value;
            *len = t->h[i].value_len;
            return true;
        }
    return false;
}

/* The next '\n'-terminated field of [*p, end): returns its start, sets
 * its length, advances *p past the '\n' (or to end). */
static const char *field(const char **p, const char *end, size_t *len)
{
    const char *s = *p;
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    *len = (size_t)((nl ? nl : end) - s);
    *p = nl ? nl + 1 : end;
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data, *end = p + size;
    size_t speclen, flaglen, keylen, hdrlen;
    const char *spec = field(&p, end, &speclen);
    const char *flags = field(&p, end, &flaglen);
    const char *key = field(&p, end, &keylen);
    const char *hdrtext = field(&p, end, &hdrlen);
    const char *value = p;
    size_t value_len = (size_t)(end - p);
    unsigned f = flaglen ? (unsigned char)flags[0] : 3u;

    bs_config *cfg = bs_config_new();
    if (!cfg)
        return 0;
    char *specs = strndup(spec, speclen); /* (stops at a NUL: fine) */
    /* Set them all first: a later bs_config_set may move the values the
     * keyspec pointers point into. */
    const bs_config_keyspec *ks[MAX_SPECS];
    size_t nset = 0, nks = 0;
    char *save = NULL;
    for (char *tok = specs ? strtok_r(specs, "|", &save) : NULL;
         tok && nset < MAX_SPECS; tok = strtok_r(NULL, "|", &save)) {
        char name[32], err[256];
        snprintf(name, sizeof(name), "blocklist.b%zu.key", nset);
        if (bs_config_set(cfg, name, tok, "fuzz", err, sizeof(err)) == 0)
            nset++;
    }
    for (size_t i = 0; i < nset; i++) {
        char name[32];
        snprintf(name, sizeof(name), "blocklist.b%zu.key", i);
        const bs_config_keyspec *k = bs_config_get_keyspec(cfg, name);
        if (k)
            ks[nks++] = k;
    }

    hdrs h;
    h.n = 0;
    for (const char *q = hdrtext, *hend = hdrtext + hdrlen;
         q < hend && h.n < 32;) {
        const char *amp = memchr(q, '&', (size_t)(hend - q));
        const char *e = amp ? amp : hend;
        const char *eq = memchr(q, '=', (size_t)(e - q));
        hdr *x = &h.h[h.n++];
        x->name = q;
        x->name_len = (size_t)((eq ? eq : e) - q);
        x->value = eq ? eq + 1 : NULL;
        x->value_len = eq ? (size_t)(e - eq - 1) : 0;
        q = amp ? amp + 1 : hend;
    }

    bs_record_view rec = {(f & 1) ? key : NULL, keylen,
                          (f & 2) ? value : NULL, value_len, header, &h};
    bs_record_keys rk;
    bs_record_keys_init_view(&rk, &rec);
    const void *got[MAX_SPECS];
    size_t glen[MAX_SPECS];
    uint64_t sum[MAX_SPECS];
    bool have[MAX_SPECS];
    for (size_t i = 0; i < nks; i++) {
        have[i] = bs_record_key(&rk, ks[i], &got[i], &glen[i]);
        if (have[i]) {
            if (!got[i])
                __builtin_trap();
            uint64_t s = 1469598103934665603ULL; /* FNV-1a */
            for (size_t b = 0; b < glen[i]; b++)
                s = (s ^ ((const uint8_t *)got[i])[b]) * 1099511628211ULL;
            sum[i] = s;
        }
    }
    for (size_t i = 0; i < nks; i++) { /* all still valid and unchanged */
        if (!have[i])
            continue;
        uint64_t s = 1469598103934665603ULL;
        for (size_t b = 0; b < glen[i]; b++)
            s = (s ^ ((const uint8_t *)got[i])[b]) * 1099511628211ULL;
        if (s != sum[i])
            __builtin_trap();
    }
    bs_record_keys_reset(&rk);
    free(specs);
    bs_config_destroy(cfg);
    return 0;
}
