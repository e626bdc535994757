/*
 * registry_int.h -- what the Schema Registry client's files share and
 * registry.h hides: the handle's struct (its URLs and secrets, its libcurl
 * handle and the reply being read, its cache), the cache's entries and the
 * calls cache.c offers client.c, and show(), which every message quoting
 * outside text goes through.  Only registry/ includes it.
 */
#ifndef BLOOMSTAGE_REGISTRY_INT_H
#define BLOOMSTAGE_REGISTRY_INT_H

#include "registry/registry.h"
#include "base/util.h" /* bs_errf, every message of the room */

#include <curl/curl.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Bytes of a registry's own message or a name shown in errstr. */
#define SHOW_MAX 200

typedef struct reg_url {
    char *base;    /* as configured (userinfo included), no trailing '/' */
    char *display; /* the same without userinfo: what messages show */
} reg_url;

/* A cache entry: a FOUND schema, or a negative answer until it expires. */
typedef struct entry {
    int32_t id;
    bs_registry_result result; /* FOUND, NOT_FOUND or BAD */
    bs_registry_schema schema; /* FOUND: owned strings and refs */
    char *message;             /* negative: the answer's errstr */
    double expires;            /* negative: bs_now() seconds */
    uint32_t prev, next;       /* LRU list; NIL at the ends */
} entry;

#define NIL UINT32_MAX

struct bs_registry {
    reg_url *urls;
    size_t nurls;
    size_t preferred; /* the URL that last answered */
    char *user;       /* basic auth, or NULL */
    char *password;
    /* Texts never shown: the password, and each URL's password raw and
     * decoded. */
    char **secrets;
    size_t nsecrets;
    long timeout_ms, connect_timeout_ms, negative_ttl_ms;
    CURL *curl;
    struct curl_slist *headers;
    char curl_err[CURL_ERROR_SIZE];
    /* the reply being read */
    char *body;
    size_t body_len, body_cap;
    bool body_too_big;
    uint64_t requests;
    /* the cache */
    entry *entries;
    uint32_t max_entries, nentries;
    uint32_t free_head; /* unused entries, chained through next */
    uint32_t lru_head, lru_tail;
    uint32_t *index; /* entry + 1, 0 empty; linear probing */
    uint32_t index_mask;
};

/* The cache (cache.c).  An entry is named by its index in reg->entries. */

/* An empty cache of max entries: 0, or -1 when out of memory. */
int bs_registry_cache_init(bs_registry *reg, size_t max);
/* Frees every entry, what each holds, and the index. */
void bs_registry_cache_free(bs_registry *reg);
/* The entry holding id, or NIL. */
uint32_t bs_registry_cache_find(const bs_registry *reg, int32_t id);
/* Makes entry e the most recently used. */
void bs_registry_cache_touch(bs_registry *reg, uint32_t e);
/* Takes entry e out of the cache and frees what it holds. */
void bs_registry_cache_remove(bs_registry *reg, uint32_t e);
/* A free entry for id, made the most recently used; the least recently
 * used one is evicted when the cache is full. */
entry *bs_registry_cache_add(bs_registry *reg, int32_t id);
/* Frees what a schema owns (its text, its references' strings) and
 * zeroes it. */
void bs_registry_schema_free(bs_registry_schema *s);

/* Outside text in a message, made printable: control characters and non-ASCII bytes as
 * '?', at most SHOW_MAX bytes ("..." when cut).  buf has SHOW_MAX + 4. */
static inline const char *show(char *buf, const char *s, size_t len)
{
    size_t keep = len > SHOW_MAX ? SHOW_MAX - 3 : len, o = 0;
    for (size_t i = 0; i < keep; i++) {
        unsigned char c = (unsigned char)s[i];
        buf[o++] = (c < 0x20 || c >= 0x7f) ? '?' : (char)c;
    }
    if (keep < len) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
    return buf;
}

#endif
