/*
 * registry.c -- see registry.h.
 */
#include "registry.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef H_REGISTRY_SCRIPT_DEFAULT
#define H_REGISTRY_SCRIPT_DEFAULT "scripts/registry"
#endif

extern char **environ;

static const char *script(void)
{
    const char *s = getenv("BS_REGISTRY_SCRIPT");
    return s && *s ? s : H_REGISTRY_SCRIPT_DEFAULT;
}

/* The first line of path into buf (its newline dropped), or -1. */
static int first_line(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int ok = fgets(buf, (int)n, f) != NULL;
    fclose(f);
    if (!ok)
        return -1;
    buf[strcspn(buf, "\r\n")] = '\0';
    return 0;
}

/* The last non-empty line of path into buf ("" if none). */
static void last_line(const char *path, char *buf, size_t n)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    char line[1024];
    while (f && fgets(line, sizeof line, f))
        if (line[0] != '\n')
            snprintf(buf, n, "%.*s", (int)strcspn(line, "\r\n"), line);
    if (f)
        fclose(f);
}

int h_registry_spawn(h_registry *r, const char *dir, char *const extra[],
                     const char *user_info)
{
    memset(r, 0, sizeof(*r));
    snprintf(r->dir, sizeof r->dir, "%s", dir);
    snprintf(r->ca, sizeof r->ca, "%s/tls/ca.pem", dir);
    r->user_info = user_info;
    char out[320], err[320], owner[32];
    snprintf(out, sizeof out, "%s.out", dir);
    snprintf(err, sizeof err, "%s.err", dir);
    snprintf(owner, sizeof owner, "%d", (int)getpid());
    char *argv[16] = {"bash", (char *)script(), "start", "--dir", r->dir,
                      "--owner", owner};
    size_t n = 7;
    for (size_t i = 0; extra && extra[i] && n < 15; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out,
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, 2, err,
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int rc = posix_spawnp(&r->starter, "bash", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        return h_fail("cannot run %s: %s", script(), strerror(rc));
    return 0;
}

int h_registry_wait(h_registry *r)
{
    int status = 0;
    if (r->starter <= 0 || waitpid(r->starter, &status, 0) != r->starter)
        return h_fail("%s start --dir %s: not running", script(), r->dir);
    r->starter = 0;
    char path[340], line[1024];
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        snprintf(path, sizeof path, "%s.err", r->dir);
        last_line(path, line, sizeof line);
        return h_fail("%s start --dir %s failed (Java and Maven are needed: "
                      "scripts/install-deps): %s", script(), r->dir, line);
    }
    snprintf(path, sizeof path, "%s/url", r->dir);
    if (first_line(path, r->url, sizeof r->url) != 0)
        return h_fail("%s: no url after a start", r->dir);
    return 0;
}

int h_registry_start(h_registry *r, const char *dir, char *const extra[],
                     const char *user_info)
{
    if (h_registry_spawn(r, dir, extra, user_info) != 0)
        return -1;
    return h_registry_wait(r);
}

/* How long a JVM the stop script saw go may take to finish exiting. */
#define STOP_EXIT_S 10.0

/* Whether process pid runs (a zombie, gone but not reaped by whoever
 * adopted it, does not). */
static bool running(long pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    FILE *f = fopen(path, "r");
    bool alive = false;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "State:", 6) == 0) {
            alive = !strchr(line, 'Z');
            break;
        }
    if (f)
        fclose(f);
    return alive;
}

int h_registry_stop(h_registry *r)
{
    if (r->starter > 0) { /* never waited for: its start is cut short */
        kill(r->starter, SIGTERM);
        waitpid(r->starter, NULL, 0);
        r->starter = 0;
    }
    char path[340], line[32];
    snprintf(path, sizeof path, "%s/pid", r->dir);
    long pid = first_line(path, line, sizeof line) == 0 ? atol(line) : 0;
    char *argv[] = {"bash", (char *)script(), "stop", "--dir", r->dir, NULL};
    pid_t sp;
    int status;
    if (posix_spawnp(&sp, "bash", NULL, NULL, argv, environ) == 0)
        waitpid(sp, &status, 0);
    /* The script counts the JVM gone once its command line is (the
     * kernel empties it as the process starts to exit); it is a zombie or
     * gone a moment later. */
    for (double t0 = h_now_s(); pid > 0 && running(pid) &&
                                h_now_s() - t0 < STOP_EXIT_S;)
        h_sleep_ms(20);
    if (pid > 0 && running(pid))
        return h_fail("%s: the registry (pid %ld) runs %.0f s after stop",
                      r->dir, pid, STOP_EXIT_S);
    return 0;
}

typedef struct reply {
    size_t used;
    char buf[4096];
} reply;

static size_t collect(char *data, size_t size, size_t nmemb, void *opaque)
{
    size_t len = size * nmemb;
    reply *rp = opaque;
    if (rp->used + len >= sizeof rp->buf)
        return 0;
    memcpy(rp->buf + rp->used, data, len);
    rp->used += len;
    rp->buf[rp->used] = '\0';
    return len;
}

int32_t h_registry_post(const h_registry *r, const char *subject,
                        const char *type, const char *text,
                        const char *refs_json)
{
    json_t *refs = refs_json ? json_loads(refs_json, 0, NULL) : json_array();
    if (!refs)
        return h_fail("references are not JSON: %s", refs_json);
    json_t *body = json_pack("{s:s, s:s, s:o}", "schema", text, "schemaType",
                             type, "references", refs);
    char *payload = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    char target[1024];
    snprintf(target, sizeof target, "%s/subjects/%s/versions", r->url,
             subject);
    reply rp = {0};
    CURL *c = curl_easy_init();
    struct curl_slist *h = curl_slist_append(
        NULL, "Content-Type: application/vnd.schemaregistry.v1+json");
    curl_easy_setopt(c, CURLOPT_URL, target);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, payload);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &rp);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)H_REQUEST_MS * 2);
    if (strncmp(r->url, "https:", 6) == 0)
        curl_easy_setopt(c, CURLOPT_CAINFO, r->ca);
    if (r->user_info)
        curl_easy_setopt(c, CURLOPT_USERPWD, r->user_info);
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    free(payload);
    if (rc != CURLE_OK || status != 200)
        return h_fail("POST %s: %s, HTTP %ld: %s", target,
                      curl_easy_strerror(rc), status, rp.buf);
    json_t *root = json_loads(rp.buf, 0, NULL);
    json_t *id = json_object_get(root, "id");
    int32_t got = json_is_integer(id) ? (int32_t)json_integer_value(id) : -1;
    json_decref(root);
    if (got < 0)
        return h_fail("POST %s: no id in %s", target, rp.buf);
    return got;
}

size_t h_frame(uint8_t *out, int32_t schema_id)
{
    uint32_t id = (uint32_t)schema_id;
    out[0] = 0;
    out[1] = (uint8_t)(id >> 24);
    out[2] = (uint8_t)(id >> 16);
    out[3] = (uint8_t)(id >> 8);
    out[4] = (uint8_t)id;
    return 5;
}

size_t h_pb_varint(uint8_t *out, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        out[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (uint8_t)v;
    return n;
}

size_t h_avro_long(uint8_t *out, int64_t v)
{
    return h_pb_varint(out, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

size_t h_avro_string(uint8_t *out, const char *s)
{
    size_t len = strlen(s), n = h_avro_long(out, (int64_t)len);
    memcpy(out + n, s, len);
    return n + len;
}

size_t h_pb_bytes(uint8_t *out, uint32_t field, const void *b, size_t len)
{
    size_t n = h_pb_varint(out, (uint64_t)field << 3 | 2);
    n += h_pb_varint(out + n, len);
    memcpy(out + n, b, len);
    return n + len;
}
