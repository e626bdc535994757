/*
 * registry.c -- the Schema Registry client of registry.h: base URLs tried
 * in turn over libcurl, replies parsed with jansson, references resolved
 * depth first, and a bounded cache of answers by schema id.
 *
 * Layout: URLs and secrets (parsing the configuration, showing a URL
 * without its credentials, scrubbing messages); replies (the parser the
 * fuzz target drives); HTTP (one easy handle, reused so connections stay
 * open; a body bounded by BS_REGISTRY_MAX_REPLY); the cache (a hash index
 * by id over a fixed array of entries, threaded on a least-recently-used
 * list); get (a fetch and its references).
 */
#include "registry/registry.h"

#include <config.h> /* BS_ERRSTR_SIZE */
#include <curl/curl.h>
#include <jansson.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The most entries a cache may be configured for. */
#define MAX_SCHEMAS_LIMIT 1000000u
/* Bytes of a registry's own message or a name shown in errstr. */
#define SHOW_MAX 200

typedef struct reg_url {
    char *base;    /* as configured (userinfo included), no trailing '/' */
    char *display; /* the same without userinfo: what messages show */
} reg_url;

/* A cache entry: a FOUND schema, or a negative answer until it expires. */
typedef struct entry {
    int32_t id;
    bool used;
    bs_registry_result result; /* FOUND, NOT_FOUND or BAD */
    bs_registry_schema schema; /* FOUND: owned strings and refs */
    char *message;             /* negative: the answer's errstr */
    int64_t expires_ms;        /* negative: monotonic ms */
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

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */

static void err(char *errstr, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void err(char *errstr, size_t n, const char *fmt, ...)
{
    if (!errstr || n == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errstr, n, fmt, ap);
    va_end(ap);
}

/* Outside text made printable: control characters and non-ASCII bytes as
 * '?', at most SHOW_MAX bytes ("..." when cut).  buf has SHOW_MAX + 4. */
static const char *show(char *buf, const char *s, size_t len)
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

static char *dup_n(const char *s, size_t len)
{
    char *d = malloc(len + 1);
    if (d) {
        memcpy(d, s, len);
        d[len] = '\0';
    }
    return d;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

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

/* ------------------------------------------------------------------------ */
/* URLs and secrets                                                          */

static int add_secret(bs_registry *reg, const char *s)
{
    if (!s || !s[0])
        return 0;
    char **grown = realloc(reg->secrets, (reg->nsecrets + 1) * sizeof *grown);
    if (!grown)
        return -1;
    reg->secrets = grown;
    if (!(reg->secrets[reg->nsecrets] = strdup(s)))
        return -1;
    reg->nsecrets++;
    return 0;
}

/* Replaces every secret in msg by "[redacted]", in place, within n bytes.
 * Messages are built from URLs without userinfo and never from the
 * password; this is the guard behind that rule. */
static void scrub(const bs_registry *reg, char *msg, size_t n)
{
    static const char red[] = "[redacted]";
    if (!msg || n == 0)
        return;
    for (size_t i = 0; i < reg->nsecrets; i++) {
        const char *s = reg->secrets[i];
        size_t slen = strlen(s);
        char *at = msg;
        while ((at = strstr(at, s))) {
            size_t head = (size_t)(at - msg), rlen = sizeof red - 1;
            if (head + rlen >= n) {
                at[0] = '\0'; /* no room for the mark: cut the message */
                break;
            }
            size_t tail = strlen(at + slen);
            if (head + rlen + tail >= n)
                tail = n - 1 - head - rlen;
            memmove(at + rlen, at + slen, tail);
            memcpy(at, red, rlen);
            at[rlen + tail] = '\0';
            at += rlen;
        }
    }
}

/* One base URL (len bytes of text): checked with curl's parser, its
 * display form made without userinfo, its password noted as a secret. */
static int parse_url(bs_registry *reg, const char *text, size_t len,
                     reg_url *out, char *errstr, size_t n)
{
    char shown[SHOW_MAX + 4];
    char *copy = NULL, *scheme = NULL, *host = NULL, *pass = NULL,
         *pass_raw = NULL, *display = NULL;
    CURLU *u = NULL;
    int rc = -1;
    while (len > 0 && text[len - 1] == '/')
        len--;
    if (len == 0) {
        err(errstr, n, "schema registry: an empty URL in the list");
        goto out;
    }
    if (len > BS_REGISTRY_MAX_URL_LEN) {
        err(errstr, n, "schema registry: a URL longer than %d bytes",
            BS_REGISTRY_MAX_URL_LEN);
        goto out;
    }
    if (!(copy = dup_n(text, len)) || !(u = curl_url())) {
        err(errstr, n, "schema registry: out of memory");
        goto out;
    }
    /* Whatever is wrong, the URL itself is not repeated: it may hold a
     * password. */
    if (curl_url_set(u, CURLUPART_URL, copy, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
        err(errstr, n,
            "schema registry: URL %zu of the list is not a URL "
            "(http://HOST:PORT or https://...)",
            reg->nurls + 1);
        goto out;
    }
    if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0) {
        err(errstr, n,
            "schema registry: URL %zu of the list: scheme '%s' (http or "
            "https)",
            reg->nurls + 1, show(shown, scheme, strlen(scheme)));
        goto out;
    }
    if (curl_url_get(u, CURLUPART_PASSWORD, &pass_raw, 0) == CURLUE_OK &&
        (add_secret(reg, pass_raw) != 0 ||
         (curl_url_get(u, CURLUPART_PASSWORD, &pass, CURLU_URLDECODE) ==
              CURLUE_OK &&
          add_secret(reg, pass) != 0))) {
        err(errstr, n, "schema registry: out of memory");
        goto out;
    }
    if (curl_url_set(u, CURLUPART_USER, NULL, 0) != CURLUE_OK ||
        curl_url_set(u, CURLUPART_PASSWORD, NULL, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_URL, &display, 0) != CURLUE_OK) {
        err(errstr, n, "schema registry: URL %zu of the list: cannot show it",
            reg->nurls + 1);
        goto out;
    }
    size_t dlen = strlen(display);
    while (dlen > 0 && display[dlen - 1] == '/')
        dlen--;
    if (!(out->display = dup_n(display, dlen))) {
        err(errstr, n, "schema registry: out of memory");
        goto out;
    }
    out->base = copy;
    copy = NULL;
    rc = 0;
out:
    free(copy);
    curl_free(scheme);
    curl_free(host);
    curl_free(pass);
    curl_free(pass_raw);
    curl_free(display);
    curl_url_cleanup(u);
    return rc;
}

static int parse_urls(bs_registry *reg, const char *list, char *errstr,
                      size_t n)
{
    if (!list) {
        err(errstr, n, "schema registry: no URL");
        return -1;
    }
    size_t count = 1;
    for (const char *p = list; *p; p++)
        count += *p == ',';
    if (count > BS_REGISTRY_MAX_URLS) {
        err(errstr, n, "schema registry: %zu URLs; at most %d", count,
            BS_REGISTRY_MAX_URLS);
        return -1;
    }
    if (!(reg->urls = calloc(count, sizeof *reg->urls))) {
        err(errstr, n, "schema registry: out of memory");
        return -1;
    }
    const char *p = list;
    for (;;) {
        const char *end = strchr(p, ',');
        if (!end)
            end = p + strlen(p);
        while (p < end && isspace((unsigned char)*p))
            p++;
        const char *e = end;
        while (e > p && isspace((unsigned char)e[-1]))
            e--;
        if (parse_url(reg, p, (size_t)(e - p), &reg->urls[reg->nurls],
                      errstr, n) != 0)
            return -1;
        reg->nurls++;
        if (!*end)
            break;
        p = end + 1;
    }
    return 0;
}

/* A PEM file named in the configuration must be readable now, not at the
 * first HTTPS request. */
static int check_file(const char *what, const char *path, char *errstr,
                      size_t n)
{
    if (!path || !path[0])
        return 0;
    struct stat st;
    const char *why = NULL;
    int fd = -1;
    if (stat(path, &st) != 0)
        why = strerror(errno);
    else if (!S_ISREG(st.st_mode))
        why = "not a regular file";
    else if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)) < 0)
        why = strerror(errno);
    if (fd >= 0)
        close(fd);
    if (why) {
        char shown[SHOW_MAX + 4];
        err(errstr, n, "schema registry: %s '%s': %s", what,
            show(shown, path, strlen(path)), why);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Replies                                                                   */

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
        err(errstr, n, "reference %zu: \"%s\" is %s, not a string", i, key,
            v ? "of another type" : "missing");
        return -1;
    }
    size_t len = json_string_length(v);
    if (len == 0 || len > BS_REGISTRY_MAX_NAME) {
        err(errstr, n, "reference %zu: \"%s\" of %zu bytes (1 to %d)", i, key,
            len, BS_REGISTRY_MAX_NAME);
        return -1;
    }
    if (!(*out = dup_n(json_string_value(v), len))) {
        err(errstr, n, "out of memory");
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
        err(errstr, n, "the reply is not a JSON object");
        goto err;
    }
    json_t *schema = json_object_get(root, "schema");
    if (!json_is_string(schema)) {
        err(errstr, n, "the reply's \"schema\" is %s, not a string",
            schema ? "of another type" : "missing");
        goto err;
    }
    size_t len = json_string_length(schema);
    if (len == 0 || len > BS_REGISTRY_MAX_TEXT) {
        err(errstr, n, "the reply's \"schema\" holds %zu bytes (1 to %u)",
            len, BS_REGISTRY_MAX_TEXT);
        goto err;
    }
    if (!(r = calloc(1, sizeof *r)))
        goto oom;
    json_t *type = json_object_get(root, "schemaType");
    if (!type || json_is_null(type)) {
        r->type = BS_REGISTRY_AVRO;
    } else if (!json_is_string(type)) {
        err(errstr, n, "the reply's \"schemaType\" is not a string");
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
            err(errstr, n,
                "schema type '%s' is not supported (AVRO, PROTOBUF, JSON)",
                show(shown, t, tlen));
            goto err;
        }
    }
    if (!(r->text = dup_n(json_string_value(schema), len)))
        goto oom;
    r->text_len = len;
    json_t *refs = json_object_get(root, "references");
    if (refs && !json_is_null(refs)) {
        if (!json_is_array(refs)) {
            err(errstr, n, "the reply's \"references\" is not an array");
            goto err;
        }
        size_t count = json_array_size(refs);
        if (count > BS_REGISTRY_MAX_REFS) {
            err(errstr, n, "the reply has %zu references; at most %d", count,
                BS_REGISTRY_MAX_REFS);
            goto err;
        }
        if (count > 0 && !(r->refs = calloc(count, sizeof *r->refs)))
            goto oom;
        for (size_t i = 0; i < count; i++) {
            json_t *ref = json_array_get(refs, i);
            if (!json_is_object(ref)) {
                err(errstr, n, "reference %zu is not an object", i);
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
                err(errstr, n,
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
    err(errstr, n, "out of memory");
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
        err(errstr, errstr_size, "HTTP %ld: a reply of %zu bytes (at most %u)",
            status, len, BS_REGISTRY_MAX_REPLY);
        return BS_REGISTRY_BAD;
    }
    json_error_t jerr;
    json_t *root = len ? json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr)
                       : NULL;
    if (status == 200) {
        bs_registry_result r = BS_REGISTRY_BAD;
        if (!root)
            err(errstr, errstr_size, "the reply is not JSON: %s",
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
    err(errstr, errstr_size, "HTTP %ld%s%s", status, why, said);
    return r;
}

/* ------------------------------------------------------------------------ */
/* HTTP                                                                      */

static size_t on_body(char *data, size_t size, size_t nmemb, void *opaque)
{
    bs_registry *reg = opaque;
    size_t len = size * nmemb;
    if (len > BS_REGISTRY_MAX_REPLY - reg->body_len) {
        reg->body_too_big = true;
        return 0;
    }
    if (reg->body_len + len > reg->body_cap) {
        size_t cap = reg->body_cap ? reg->body_cap : 16384;
        while (cap < reg->body_len + len)
            cap *= 2;
        if (cap > BS_REGISTRY_MAX_REPLY)
            cap = BS_REGISTRY_MAX_REPLY;
        char *grown = realloc(reg->body, cap);
        if (!grown)
            return 0;
        reg->body = grown;
        reg->body_cap = cap;
    }
    memcpy(reg->body + reg->body_len, data, len);
    reg->body_len += len;
    return len;
}

/* GET base + path on URL u.  0 with *status set and the body in reg->body;
 * -1 with errstr naming the cause when no HTTP answer came. */
static int http_get(bs_registry *reg, const reg_url *u, const char *path,
                    long *status, char *errstr, size_t n)
{
    size_t blen = strlen(u->base), plen = strlen(path);
    char *url = malloc(blen + plen + 1);
    if (!url) {
        err(errstr, n, "out of memory");
        return -1;
    }
    memcpy(url, u->base, blen);
    memcpy(url + blen, path, plen + 1);
    reg->body_len = 0;
    reg->body_too_big = false;
    reg->curl_err[0] = '\0';
    reg->requests++;
    CURLcode rc = curl_easy_setopt(reg->curl, CURLOPT_URL, url);
    if (rc == CURLE_OK)
        rc = curl_easy_perform(reg->curl);
    free(url);
    if (rc != CURLE_OK) {
        if (reg->body_too_big)
            err(errstr, n, "a reply of more than %u bytes",
                BS_REGISTRY_MAX_REPLY);
        else
            err(errstr, n, "%s",
                reg->curl_err[0] ? reg->curl_err : curl_easy_strerror(rc));
        return reg->body_too_big ? 1 : -1;
    }
    curl_easy_getinfo(reg->curl, CURLINFO_RESPONSE_CODE, status);
    return 0;
}

static int set_curl_options(bs_registry *reg, const bs_registry_conf *conf,
                            char *errstr, size_t n)
{
    CURL *c = reg->curl;
    reg->headers = curl_slist_append(
        NULL, "Accept: application/vnd.schemaregistry.v1+json, "
              "application/json");
    if (!reg->headers) {
        err(errstr, n, "schema registry: out of memory");
        return -1;
    }
    CURLcode rc = CURLE_OK;
#define SET(opt, val)                                                        \
    do {                                                                     \
        if (rc == CURLE_OK)                                                  \
            rc = curl_easy_setopt(c, opt, val);                              \
    } while (0)
    SET(CURLOPT_NOSIGNAL, 1L);
    SET(CURLOPT_PROTOCOLS_STR, "http,https");
    SET(CURLOPT_FOLLOWLOCATION, 0L);
    SET(CURLOPT_HTTPGET, 1L);
    SET(CURLOPT_HTTPHEADER, reg->headers);
    SET(CURLOPT_USERAGENT, "bloomstage");
    SET(CURLOPT_ERRORBUFFER, reg->curl_err);
    SET(CURLOPT_WRITEFUNCTION, on_body);
    SET(CURLOPT_WRITEDATA, reg);
    SET(CURLOPT_CONNECTTIMEOUT_MS, reg->connect_timeout_ms);
    SET(CURLOPT_TIMEOUT_MS, reg->timeout_ms);
    if (reg->user) {
        SET(CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        SET(CURLOPT_USERNAME, reg->user);
        SET(CURLOPT_PASSWORD, reg->password);
    }
    if (conf->ca_location && conf->ca_location[0])
        SET(CURLOPT_CAINFO, conf->ca_location);
    if (conf->cert_location && conf->cert_location[0]) {
        SET(CURLOPT_SSLCERT, conf->cert_location);
        SET(CURLOPT_SSLCERTTYPE, "PEM");
    }
    if (conf->key_location && conf->key_location[0]) {
        SET(CURLOPT_SSLKEY, conf->key_location);
        SET(CURLOPT_SSLKEYTYPE, "PEM");
    }
#undef SET
    if (rc != CURLE_OK) {
        err(errstr, n, "schema registry: libcurl refused an option: %s",
            curl_easy_strerror(rc));
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The cache                                                                 */

static uint32_t slot_of(const bs_registry *reg, int32_t id)
{
    return ((uint32_t)id * UINT32_C(0x9E3779B1)) & reg->index_mask;
}

/* The entry holding id, or NIL. */
static uint32_t cache_find(const bs_registry *reg, int32_t id)
{
    for (uint32_t s = slot_of(reg, id);; s = (s + 1) & reg->index_mask) {
        uint32_t e = reg->index[s];
        if (e == 0)
            return NIL;
        if (reg->entries[e - 1].id == id)
            return e - 1;
    }
}

static void lru_unlink(bs_registry *reg, uint32_t e)
{
    entry *x = &reg->entries[e];
    if (x->prev != NIL)
        reg->entries[x->prev].next = x->next;
    else
        reg->lru_head = x->next;
    if (x->next != NIL)
        reg->entries[x->next].prev = x->prev;
    else
        reg->lru_tail = x->prev;
}

static void lru_push_front(bs_registry *reg, uint32_t e)
{
    entry *x = &reg->entries[e];
    x->prev = NIL;
    x->next = reg->lru_head;
    if (reg->lru_head != NIL)
        reg->entries[reg->lru_head].prev = e;
    reg->lru_head = e;
    if (reg->lru_tail == NIL)
        reg->lru_tail = e;
}

static void schema_free(bs_registry_schema *s)
{
    for (size_t i = 0; i < s->nrefs; i++) {
        free((char *)s->refs[i].name);
        free((char *)s->refs[i].subject);
        free((char *)s->refs[i].text);
    }
    free((bs_registry_ref *)s->refs);
    free((char *)s->text);
    memset(s, 0, sizeof *s);
}

/* Takes entry e out of the cache and frees what it holds. */
static void cache_remove(bs_registry *reg, uint32_t e)
{
    entry *x = &reg->entries[e];
    /* Backward-shift deletion keeps every probe chain unbroken. */
    uint32_t s = slot_of(reg, x->id);
    while (reg->index[s] != e + 1)
        s = (s + 1) & reg->index_mask;
    uint32_t hole = s;
    for (uint32_t t = (hole + 1) & reg->index_mask; reg->index[t];
         t = (t + 1) & reg->index_mask) {
        uint32_t home = slot_of(reg, reg->entries[reg->index[t] - 1].id);
        /* Move t into the hole unless its home lies in (hole, t]. */
        if (((t - home) & reg->index_mask) >= ((t - hole) & reg->index_mask)) {
            reg->index[hole] = reg->index[t];
            hole = t;
        }
    }
    reg->index[hole] = 0;
    lru_unlink(reg, e);
    schema_free(&x->schema);
    free(x->message);
    x->message = NULL;
    x->used = false;
    x->next = reg->free_head;
    reg->free_head = e;
    reg->nentries--;
}

/* A free entry for id, made the most recently used; the least recently
 * used one is evicted when the cache is full. */
static entry *cache_add(bs_registry *reg, int32_t id)
{
    if (reg->nentries == reg->max_entries)
        cache_remove(reg, reg->lru_tail);
    uint32_t e = reg->free_head;
    entry *x = &reg->entries[e];
    reg->free_head = x->next;
    x->id = id;
    x->used = true;
    uint32_t s = slot_of(reg, id);
    while (reg->index[s])
        s = (s + 1) & reg->index_mask;
    reg->index[s] = e + 1;
    lru_push_front(reg, e);
    reg->nentries++;
    return x;
}

static int cache_init(bs_registry *reg, size_t max)
{
    reg->max_entries = (uint32_t)max;
    uint32_t cap = 4;
    while (cap < 2 * reg->max_entries)
        cap *= 2;
    reg->index_mask = cap - 1;
    reg->index = calloc(cap, sizeof *reg->index);
    reg->entries = calloc(max, sizeof *reg->entries);
    if (!reg->index || !reg->entries)
        return -1;
    for (uint32_t i = 0; i < reg->max_entries; i++)
        reg->entries[i].next = i + 1 < reg->max_entries ? i + 1 : NIL;
    reg->free_head = 0;
    reg->lru_head = reg->lru_tail = NIL;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Handle                                                                    */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void init_curl(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

bs_registry *bs_registry_new(const bs_registry_conf *conf, char *errstr,
                             size_t errstr_size)
{
    char *const e = errstr;
    const size_t n = errstr_size;
    pthread_once(&curl_once, init_curl);
    if (curl_init_rc != CURLE_OK) {
        err(e, n, "schema registry: libcurl did not initialise: %s",
            curl_easy_strerror(curl_init_rc));
        return NULL;
    }
    bs_registry *reg = calloc(1, sizeof *reg);
    if (!reg) {
        err(e, n, "schema registry: out of memory");
        return NULL;
    }
    reg->timeout_ms = conf->timeout_ms > 0 ? conf->timeout_ms
                                           : BS_REGISTRY_DEFAULT_TIMEOUT_MS;
    reg->connect_timeout_ms = conf->connect_timeout_ms > 0
                                  ? conf->connect_timeout_ms
                                  : BS_REGISTRY_DEFAULT_CONNECT_TIMEOUT_MS;
    if (reg->connect_timeout_ms > reg->timeout_ms)
        reg->connect_timeout_ms = reg->timeout_ms;
    reg->negative_ttl_ms = conf->negative_ttl_ms > 0 ? conf->negative_ttl_ms
                                                     : 0;
    size_t max = conf->max_schemas ? conf->max_schemas
                                   : BS_REGISTRY_DEFAULT_MAX_SCHEMAS;
    if (max > MAX_SCHEMAS_LIMIT) {
        err(e, n, "schema registry: a cache of %zu schemas; at most %u", max,
            MAX_SCHEMAS_LIMIT);
        goto err;
    }
    if (conf->user_info && conf->user_info[0]) {
        const char *colon = strchr(conf->user_info, ':');
        if (!colon || colon == conf->user_info) {
            err(e, n,
                "schema registry: basic auth user info is not USER:PASSWORD "
                "(no user before a ':')");
            goto err;
        }
        for (const char *p = conf->user_info; *p; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7f) {
                err(e, n,
                    "schema registry: basic auth user info holds a control "
                    "character");
                goto err;
            }
        reg->user = dup_n(conf->user_info,
                          (size_t)(colon - conf->user_info));
        reg->password = strdup(colon + 1);
        if (!reg->user || !reg->password ||
            add_secret(reg, reg->password) != 0) {
            err(e, n, "schema registry: out of memory");
            goto err;
        }
    }
    if (parse_urls(reg, conf->urls, e, n) != 0 ||
        check_file("CA file", conf->ca_location, e, n) != 0 ||
        check_file("client certificate", conf->cert_location, e, n) != 0 ||
        check_file("client key", conf->key_location, e, n) != 0)
        goto err;
    if ((conf->cert_location && conf->cert_location[0]) !=
        (conf->key_location && conf->key_location[0])) {
        err(e, n,
            "schema registry: a client certificate needs its key and a key "
            "its certificate");
        goto err;
    }
    if (cache_init(reg, max) != 0) {
        err(e, n, "schema registry: out of memory for a cache of %zu", max);
        goto err;
    }
    if (!(reg->curl = curl_easy_init())) {
        err(e, n, "schema registry: libcurl: no easy handle");
        goto err;
    }
    if (set_curl_options(reg, conf, e, n) != 0)
        goto err;
    return reg;
err:
    scrub(reg, e, n);
    bs_registry_destroy(reg);
    return NULL;
}

void bs_registry_destroy(bs_registry *reg)
{
    if (!reg)
        return;
    if (reg->entries)
        for (uint32_t i = 0; i < reg->max_entries; i++) {
            schema_free(&reg->entries[i].schema);
            free(reg->entries[i].message);
        }
    free(reg->entries);
    free(reg->index);
    if (reg->curl)
        curl_easy_cleanup(reg->curl);
    curl_slist_free_all(reg->headers);
    free(reg->body);
    for (size_t i = 0; i < reg->nurls; i++) {
        free(reg->urls[i].base);
        free(reg->urls[i].display);
    }
    free(reg->urls);
    for (size_t i = 0; i < reg->nsecrets; i++) {
        /* Passwords do not outlive the handle in freed memory. */
        explicit_bzero(reg->secrets[i], strlen(reg->secrets[i]));
        free(reg->secrets[i]);
    }
    free(reg->secrets);
    if (reg->password)
        explicit_bzero(reg->password, strlen(reg->password));
    free(reg->password);
    free(reg->user);
    free(reg);
}

uint64_t bs_registry_requests(const bs_registry *reg)
{
    return reg->requests;
}

size_t bs_registry_cached(const bs_registry *reg)
{
    return reg->nentries;
}

/* ------------------------------------------------------------------------ */
/* Get                                                                       */

/* GET path from the URLs in turn, the preferred one first, until one
 * answers.  FOUND, NOT_FOUND or BAD: that URL answered (it becomes the
 * preferred one; errstr "URL: GET path: why").  UNREACHABLE: none did
 * (errstr "GET path: URL1: why; URL2: why"). */
static bs_registry_result ask(bs_registry *reg, const char *path,
                              bs_registry_reply **out, char *errstr,
                              size_t n)
{
    char why[BS_ERRSTR_SIZE] = "";
    size_t used = 0;
    *out = NULL;
    if (errstr && n)
        used = (size_t)snprintf(errstr, n, "GET %s:", path);
    for (size_t k = 0; k < reg->nurls; k++) {
        size_t i = (reg->preferred + k) % reg->nurls;
        const reg_url *u = &reg->urls[i];
        long status = 0;
        bs_registry_result r;
        int got = http_get(reg, u, path, &status, why, sizeof why);
        if (got < 0)
            r = BS_REGISTRY_UNREACHABLE;
        else if (got > 0)
            r = BS_REGISTRY_BAD; /* it answered, too much */
        else
            r = bs_registry_reply_parse(status, reg->body, reg->body_len, out,
                                        why, sizeof why);
        if (r != BS_REGISTRY_UNREACHABLE) {
            reg->preferred = i;
            if (r != BS_REGISTRY_FOUND)
                err(errstr, n, "%s: GET %s: %s", u->display, path, why);
            return r;
        }
        if (errstr && used < n)
            used += (size_t)snprintf(errstr + used, n - used, "%s %s: %s",
                                     k ? ";" : "", u->display, why);
    }
    return BS_REGISTRY_UNREACHABLE;
}

/* What a get is building: the references found so far (post-order), the
 * names on the path from the schema to the reference being resolved. */
typedef struct resolving {
    bs_registry_ref *refs;
    size_t nrefs;
    size_t text_bytes;
    const char *path[BS_REGISTRY_MAX_REF_DEPTH];
    size_t depth;
} resolving;

static bs_registry_result resolve(bs_registry *reg, const bs_registry_reply *r,
                                  resolving *st, char *errstr, size_t n);

/* One reference: fetched, its own references resolved, then added. */
static bs_registry_result resolve_one(bs_registry *reg,
                                      const bs_registry_reply_ref *ref,
                                      resolving *st, char *errstr, size_t n)
{
    char s1[SHOW_MAX + 4], s2[SHOW_MAX + 4], why[BS_ERRSTR_SIZE] = "";
    const char *name = show(s1, ref->name, strlen(ref->name));
    const char *subject = show(s2, ref->subject, strlen(ref->subject));
    for (size_t i = 0; i < st->nrefs; i++) {
        const bs_registry_ref *have = &st->refs[i];
        if (strcmp(have->name, ref->name) != 0)
            continue;
        if (strcmp(have->subject, ref->subject) == 0 &&
            have->version == ref->version)
            return BS_REGISTRY_FOUND;
        err(errstr, n,
            "reference '%s' names subject '%s' version %" PRId32
            " here and another schema elsewhere",
            name, subject, ref->version);
        return BS_REGISTRY_BAD;
    }
    for (size_t i = 0; i < st->depth; i++)
        if (strcmp(st->path[i], ref->name) == 0) {
            err(errstr, n, "reference '%s' refers back to itself", name);
            return BS_REGISTRY_BAD;
        }
    if (st->depth == BS_REGISTRY_MAX_REF_DEPTH) {
        err(errstr, n, "reference '%s' is deeper than %d references", name,
            BS_REGISTRY_MAX_REF_DEPTH);
        return BS_REGISTRY_BAD;
    }
    if (st->nrefs == BS_REGISTRY_MAX_REFS) {
        err(errstr, n, "more than %d references (at '%s')",
            BS_REGISTRY_MAX_REFS, name);
        return BS_REGISTRY_BAD;
    }
    char *esc = curl_easy_escape(reg->curl, ref->subject,
                                 (int)strlen(ref->subject));
    size_t plen = esc ? strlen(esc) + 40 : 0;
    char *path = esc ? malloc(plen) : NULL;
    if (!path) {
        curl_free(esc);
        err(errstr, n, "out of memory");
        return BS_REGISTRY_BAD;
    }
    snprintf(path, plen, "/subjects/%s/versions/%" PRId32, esc, ref->version);
    curl_free(esc);
    bs_registry_reply *got = NULL;
    bs_registry_result r = ask(reg, path, &got, why, sizeof why);
    free(path);
    if (r == BS_REGISTRY_FOUND) {
        st->path[st->depth++] = ref->name;
        r = resolve(reg, got, st, why, sizeof why);
        st->depth--;
        if (r != BS_REGISTRY_FOUND) {
            bs_registry_reply_destroy(got);
            err(errstr, n, "reference '%s': %s", name, why);
            return r;
        }
    } else {
        err(errstr, n, "reference '%s' (subject '%s' version %" PRId32 "): %s",
            name, subject, ref->version, why);
        /* The schema is there but what it needs is not: a bad schema. */
        return r == BS_REGISTRY_NOT_FOUND ? BS_REGISTRY_BAD : r;
    }
    /* Its own references may have filled the list meanwhile. */
    if (st->nrefs == BS_REGISTRY_MAX_REFS) {
        bs_registry_reply_destroy(got);
        err(errstr, n, "more than %d references (at '%s')",
            BS_REGISTRY_MAX_REFS, name);
        return BS_REGISTRY_BAD;
    }
    if (got->text_len > BS_REGISTRY_MAX_TEXT - st->text_bytes) {
        bs_registry_reply_destroy(got);
        err(errstr, n, "reference '%s': the texts pass %u bytes", name,
            BS_REGISTRY_MAX_TEXT);
        return BS_REGISTRY_BAD;
    }
    bs_registry_ref *out = &st->refs[st->nrefs];
    out->name = strdup(ref->name);
    out->subject = strdup(ref->subject);
    out->version = ref->version;
    out->type = got->type;
    out->text = got->text;
    out->text_len = got->text_len;
    st->text_bytes += got->text_len;
    got->text = NULL;
    bs_registry_reply_destroy(got);
    st->nrefs++; /* freed with the rest whatever happens next */
    if (!out->name || !out->subject) {
        err(errstr, n, "out of memory");
        return BS_REGISTRY_BAD;
    }
    return BS_REGISTRY_FOUND;
}

static bs_registry_result resolve(bs_registry *reg, const bs_registry_reply *r,
                                  resolving *st, char *errstr, size_t n)
{
    for (size_t i = 0; i < r->nrefs; i++) {
        bs_registry_result got = resolve_one(reg, &r->refs[i], st, errstr, n);
        if (got != BS_REGISTRY_FOUND)
            return got;
    }
    return BS_REGISTRY_FOUND;
}

/* Fetches schema id and its references into *schema (owned strings). */
static bs_registry_result fetch(bs_registry *reg, int32_t id,
                                bs_registry_schema *schema, char *errstr,
                                size_t n)
{
    char path[64], why[BS_ERRSTR_SIZE] = "";
    snprintf(path, sizeof path, "/schemas/ids/%" PRId32, id);
    bs_registry_reply *got = NULL;
    resolving st = {0};
    bs_registry_result r = ask(reg, path, &got, errstr, n);
    if (r != BS_REGISTRY_FOUND)
        return r;
    if (got->nrefs > 0 &&
        !(st.refs = calloc(BS_REGISTRY_MAX_REFS, sizeof *st.refs))) {
        err(errstr, n, "schema %" PRId32 ": out of memory", id);
        r = BS_REGISTRY_BAD;
        goto out;
    }
    st.text_bytes = got->text_len;
    r = resolve(reg, got, &st, why, sizeof why);
    if (r != BS_REGISTRY_FOUND) {
        err(errstr, n, "schema %" PRId32 ": %s", id, why);
        goto out;
    }
    schema->id = id;
    schema->type = got->type;
    schema->text = got->text;
    schema->text_len = got->text_len;
    got->text = NULL;
    schema->refs = st.refs;
    schema->nrefs = st.nrefs;
    st.refs = NULL;
    st.nrefs = 0;
out:
    for (size_t i = 0; i < st.nrefs; i++) {
        free((char *)st.refs[i].name);
        free((char *)st.refs[i].subject);
        free((char *)st.refs[i].text);
    }
    free(st.refs);
    bs_registry_reply_destroy(got);
    return r;
}

bs_registry_result bs_registry_get(bs_registry *reg, int32_t id,
                                   const bs_registry_schema **out,
                                   char *errstr, size_t errstr_size)
{
    *out = NULL;
    uint32_t e = cache_find(reg, id);
    if (e != NIL) {
        entry *x = &reg->entries[e];
        if (x->result == BS_REGISTRY_FOUND || now_ms() < x->expires_ms) {
            lru_unlink(reg, e);
            lru_push_front(reg, e);
            if (x->result == BS_REGISTRY_FOUND)
                *out = &x->schema;
            else
                err(errstr, errstr_size, "%s", x->message);
            return x->result;
        }
        cache_remove(reg, e);
    }
    char msg[BS_ERRSTR_SIZE];
    int len = snprintf(msg, sizeof msg, "schema registry: ");
    bs_registry_schema schema = {0};
    bs_registry_result r = fetch(reg, id, &schema, msg + len,
                                 sizeof msg - (size_t)len);
    scrub(reg, msg, sizeof msg);
    if (r == BS_REGISTRY_FOUND) {
        entry *x = cache_add(reg, id);
        x->result = r;
        x->schema = schema;
        *out = &x->schema;
        return r;
    }
    err(errstr, errstr_size, "%s", msg);
    if (r != BS_REGISTRY_UNREACHABLE && reg->negative_ttl_ms > 0) {
        char *copy = strdup(msg);
        if (copy) {
            entry *x = cache_add(reg, id);
            x->result = r;
            x->message = copy;
            x->expires_ms = now_ms() + reg->negative_ttl_ms;
        }
    }
    return r;
}
