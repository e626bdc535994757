/*
 * client.c -- the Schema Registry client of registry.h: the handle; its
 * base URLs and secrets (the configuration parsed, a URL shown without its
 * credentials, messages scrubbed); HTTP over libcurl (one easy handle,
 * reused so connections stay open; a body bounded by
 * BS_REGISTRY_MAX_REPLY); and get: a schema fetched from the URLs in turn,
 * its references resolved depth first, the answer kept in the cache
 * (cache.c).  Replies are read by reply.c.
 */
#include "registry/registry.h"
#include "registry/registry_int.h"
#include "base/util.h"

#include <config.h> /* BS_ERRSTR_SIZE */
#include <curl/curl.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The most entries a cache may be configured for. */
#define MAX_SCHEMAS_LIMIT 1000000u

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
        bs_errf(errstr, n, "schema registry: an empty URL in the list");
        goto out;
    }
    if (len > BS_REGISTRY_MAX_URL_LEN) {
        bs_errf(errstr, n, "schema registry: a URL longer than %d bytes",
                BS_REGISTRY_MAX_URL_LEN);
        goto out;
    }
    if (!(copy = strndup(text, len)) || !(u = curl_url())) {
        bs_errf(errstr, n, "schema registry: out of memory");
        goto out;
    }
    /* Whatever is wrong, the URL itself is not repeated: it may hold a
     * password. */
    if (curl_url_set(u, CURLUPART_URL, copy, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
        bs_errf(errstr, n,
                "schema registry: URL %zu of the list is not a URL "
                "(http://HOST:PORT or https://...)",
                reg->nurls + 1);
        goto out;
    }
    if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0) {
        bs_errf(errstr, n,
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
        bs_errf(errstr, n, "schema registry: out of memory");
        goto out;
    }
    if (curl_url_set(u, CURLUPART_USER, NULL, 0) != CURLUE_OK ||
        curl_url_set(u, CURLUPART_PASSWORD, NULL, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_URL, &display, 0) != CURLUE_OK) {
        bs_errf(errstr, n,
                "schema registry: URL %zu of the list: cannot show it",
                reg->nurls + 1);
        goto out;
    }
    size_t dlen = strlen(display);
    while (dlen > 0 && display[dlen - 1] == '/')
        dlen--;
    if (!(out->display = strndup(display, dlen))) {
        bs_errf(errstr, n, "schema registry: out of memory");
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
        bs_errf(errstr, n, "schema registry: no URL");
        return -1;
    }
    size_t count = 1;
    for (const char *p = list; *p; p++)
        count += *p == ',';
    if (count > BS_REGISTRY_MAX_URLS) {
        bs_errf(errstr, n, "schema registry: %zu URLs; at most %d", count,
                BS_REGISTRY_MAX_URLS);
        return -1;
    }
    if (!(reg->urls = calloc(count, sizeof *reg->urls))) {
        bs_errf(errstr, n, "schema registry: out of memory");
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
        bs_errf(errstr, n, "schema registry: %s '%s': %s", what,
                show(shown, path, strlen(path)), why);
        return -1;
    }
    return 0;
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
        bs_errf(errstr, n, "out of memory");
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
            bs_errf(errstr, n, "a reply of more than %u bytes",
                    BS_REGISTRY_MAX_REPLY);
        else
            bs_errf(errstr, n, "%s",
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
        bs_errf(errstr, n, "schema registry: out of memory");
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
        bs_errf(errstr, n, "schema registry: libcurl refused an option: %s",
                curl_easy_strerror(rc));
        return -1;
    }
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
        bs_errf(e, n, "schema registry: libcurl did not initialise: %s",
                curl_easy_strerror(curl_init_rc));
        return NULL;
    }
    bs_registry *reg = calloc(1, sizeof *reg);
    if (!reg) {
        bs_errf(e, n, "schema registry: out of memory");
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
        bs_errf(e, n, "schema registry: a cache of %zu schemas; at most %u",
                max, MAX_SCHEMAS_LIMIT);
        goto err;
    }
    if (conf->user_info && conf->user_info[0]) {
        const char *colon = strchr(conf->user_info, ':');
        if (!colon || colon == conf->user_info) {
            bs_errf(e, n,
                    "schema registry: basic auth user info is not "
                    "USER:PASSWORD (no user before a ':')");
            goto err;
        }
        for (const char *p = conf->user_info; *p; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7f) {
                bs_errf(e, n,
                        "schema registry: basic auth user info holds a control "
                        "character");
                goto err;
            }
        reg->user = strndup(conf->user_info,
                            (size_t)(colon - conf->user_info));
        reg->password = strdup(colon + 1);
        if (!reg->user || !reg->password ||
            add_secret(reg, reg->password) != 0) {
            bs_errf(e, n, "schema registry: out of memory");
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
        bs_errf(e, n,
                "schema registry: a client certificate needs its key and a key "
                "its certificate");
        goto err;
    }
    if (bs_registry_cache_init(reg, max) != 0) {
        bs_errf(e, n, "schema registry: out of memory for a cache of %zu", max);
        goto err;
    }
    if (!(reg->curl = curl_easy_init())) {
        bs_errf(e, n, "schema registry: libcurl: no easy handle");
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
    bs_registry_cache_free(reg);
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
                bs_errf(errstr, n, "%s: GET %s: %s", u->display, path, why);
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
        bs_errf(errstr, n,
                "reference '%s' names subject '%s' version %" PRId32
                " here and another schema elsewhere",
                name, subject, ref->version);
        return BS_REGISTRY_BAD;
    }
    for (size_t i = 0; i < st->depth; i++)
        if (strcmp(st->path[i], ref->name) == 0) {
            bs_errf(errstr, n, "reference '%s' refers back to itself", name);
            return BS_REGISTRY_BAD;
        }
    if (st->depth == BS_REGISTRY_MAX_REF_DEPTH) {
        bs_errf(errstr, n, "reference '%s' is deeper than %d references", name,
                BS_REGISTRY_MAX_REF_DEPTH);
        return BS_REGISTRY_BAD;
    }
    if (st->nrefs == BS_REGISTRY_MAX_REFS) {
        bs_errf(errstr, n, "more than %d references (at '%s')",
                BS_REGISTRY_MAX_REFS, name);
        return BS_REGISTRY_BAD;
    }
    char *esc = curl_easy_escape(reg->curl, ref->subject,
                                 (int)strlen(ref->subject));
    size_t plen = esc ? strlen(esc) + 40 : 0;
    char *path = esc ? malloc(plen) : NULL;
    if (!path) {
        curl_free(esc);
        bs_errf(errstr, n, "out of memory");
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
            bs_errf(errstr, n, "reference '%s': %s", name, why);
            return r;
        }
    } else {
        bs_errf(errstr, n,
                "reference '%s' (subject '%s' version %" PRId32 "): %s",
                name, subject, ref->version, why);
        /* The schema is there but what it needs is not: a bad schema. */
        return r == BS_REGISTRY_NOT_FOUND ? BS_REGISTRY_BAD : r;
    }
    /* Its own references may have filled the list meanwhile. */
    if (st->nrefs == BS_REGISTRY_MAX_REFS) {
        bs_registry_reply_destroy(got);
        bs_errf(errstr, n, "more than %d references (at '%s')",
                BS_REGISTRY_MAX_REFS, name);
        return BS_REGISTRY_BAD;
    }
    if (got->text_len > BS_REGISTRY_MAX_TEXT - st->text_bytes) {
        bs_registry_reply_destroy(got);
        bs_errf(errstr, n, "reference '%s': the texts pass %u bytes", name,
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
        bs_errf(errstr, n, "out of memory");
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
        bs_errf(errstr, n, "schema %" PRId32 ": out of memory", id);
        r = BS_REGISTRY_BAD;
        goto out;
    }
    st.text_bytes = got->text_len;
    r = resolve(reg, got, &st, why, sizeof why);
    if (r != BS_REGISTRY_FOUND) {
        bs_errf(errstr, n, "schema %" PRId32 ": %s", id, why);
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
out:;
    bs_registry_schema unused = {.refs = st.refs, .nrefs = st.nrefs};
    bs_registry_schema_free(&unused);
    bs_registry_reply_destroy(got);
    return r;
}

bs_registry_result bs_registry_get(bs_registry *reg, int32_t id,
                                   const bs_registry_schema **out,
                                   char *errstr, size_t errstr_size)
{
    *out = NULL;
    uint32_t e = bs_registry_cache_find(reg, id);
    if (e != NIL) {
        entry *x = &reg->entries[e];
        if (x->result == BS_REGISTRY_FOUND || bs_now() < x->expires) {
            bs_registry_cache_touch(reg, e);
            if (x->result == BS_REGISTRY_FOUND)
                *out = &x->schema;
            else
                bs_errf(errstr, errstr_size, "%s", x->message);
            return x->result;
        }
        bs_registry_cache_remove(reg, e);
    }
    char msg[BS_ERRSTR_SIZE];
    int len = snprintf(msg, sizeof msg, "schema registry: ");
    bs_registry_schema schema = {0};
    bs_registry_result r = fetch(reg, id, &schema, msg + len,
                                 sizeof msg - (size_t)len);
    scrub(reg, msg, sizeof msg);
    if (r == BS_REGISTRY_FOUND) {
        entry *x = bs_registry_cache_add(reg, id);
        x->result = r;
        x->schema = schema;
        *out = &x->schema;
        return r;
    }
    bs_errf(errstr, errstr_size, "%s", msg);
    if (r != BS_REGISTRY_UNREACHABLE && reg->negative_ttl_ms > 0) {
        char *copy = strdup(msg);
        if (copy) {
            entry *x = bs_registry_cache_add(reg, id);
            x->result = r;
            x->message = copy;
            x->expires = bs_now() + (double)reg->negative_ttl_ms / 1000;
        }
    }
    return r;
}
