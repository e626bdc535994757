/*
 * metrics_guard.c -- see metrics_guard.h.  Reading the PEM files and the
 * users file, checking each hash is a bcrypt hash libcrypt takes, and
 * checking a request's credentials.
 */
#include "ops/metrics_guard.h"

#include <crypt.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PEM_MAX (1u << 20)    /* a certificate chain or key larger is wrong */
#define USERS_MAX 1000        /* lines of the users file that name a user */
#define USER_LINE_MAX 1024    /* bytes of one line of it */
#define BCRYPT_LEN 60         /* "$2b$10$" + 22 salt + 31 hash characters */

typedef struct guard_user {
    char *name;
    char hash[BCRYPT_LEN + 1];
} guard_user;

struct bs_metrics_guard {
    char *cert, *key; /* PEM texts; NULL: plain HTTP */
    size_t key_len;
    guard_user *users;
    size_t nusers;
    bool probes_open;
};

/* "ORIGIN: key 'KEY': " then fmt, into errstr. */
static void fail(char *errstr, size_t n, const bs_config *cfg,
                 const char *key, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void fail(char *errstr, size_t n, const bs_config *cfg,
                 const char *key, const char *fmt, ...)
{
    const char *origin = bs_config_origin(cfg, key);
    int k = snprintf(errstr, n, "%s: key '%s': ", origin ? origin : "?",
                     key);
    if (k < 0 || (size_t)k >= n)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errstr + k, n - (size_t)k, fmt, ap);
    va_end(ap);
}

/* The path as messages show it: not when it came from a secret file. */
static const char *shown_path(const bs_config *cfg, const char *key,
                              const char *path)
{
    return bs_config_value_hidden(cfg, key) ? "(the file it names)" : path;
}

/* The whole of a regular file, NUL-terminated: 0, or -1 with why. */
static int read_whole(const char *path, size_t max, char **out, size_t *len,
                      char *why, size_t n)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(why, n, "cannot read it: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode) || (size_t)st.st_size > max) {
        snprintf(why, n, "%s", S_ISREG(st.st_mode) ? "larger than 1 MiB"
                                                   : "not a regular file");
        close(fd);
        return -1;
    }
    size_t cap = (size_t)st.st_size + 1, got = 0;
    char *buf = malloc(cap);
    while (buf && got < cap - 1) {
        ssize_t r = read(fd, buf + got, cap - 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (!buf) {
        snprintf(why, n, "out of memory");
        return -1;
    }
    buf[got] = '\0';
    *out = buf;
    *len = got;
    return 0;
}

/* The certificate and key: PEM, the key not encrypted (libmicrohttpd
 * would need its password), and TLS in this libmicrohttpd.  Whether the
 * two belong together GnuTLS says when the endpoint starts (metrics.c). */
static int load_tls(bs_metrics_guard *g, const bs_config *cfg,
                    const bs_settings *set, char *errstr, size_t n)
{
    static const char *const CERT_KEY = "metrics.tls.cert.path";
    static const char *const KEY_KEY = "metrics.tls.key.path";
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
        fail(errstr, n, cfg, CERT_KEY, "this libmicrohttpd has no TLS "
             "(built without GnuTLS): the endpoint cannot serve HTTPS");
        return -1;
    }
    char why[BS_ERRSTR_SIZE];
    size_t len;
    const char *cpath = shown_path(cfg, CERT_KEY, set->metrics_tls_cert);
    const char *kpath = shown_path(cfg, KEY_KEY, set->metrics_tls_key);
    if (read_whole(set->metrics_tls_cert, PEM_MAX, &g->cert, &len, why,
                   sizeof why) != 0) {
        fail(errstr, n, cfg, CERT_KEY, "'%s': %s", cpath, why);
        return -1;
    }
    if (!strstr(g->cert, "-----BEGIN CERTIFICATE-----")) {
        fail(errstr, n, cfg, CERT_KEY, "'%s' holds no PEM certificate "
             "(-----BEGIN CERTIFICATE-----)", cpath);
        return -1;
    }
    if (read_whole(set->metrics_tls_key, PEM_MAX, &g->key, &g->key_len, why,
                   sizeof why) != 0) {
        fail(errstr, n, cfg, KEY_KEY, "'%s': %s", kpath, why);
        return -1;
    }
    if (strstr(g->key, "ENCRYPTED")) {
        fail(errstr, n, cfg, KEY_KEY, "'%s' is an encrypted key: give it "
             "decrypted (`openssl pkey -in KEY -out PLAIN`, kept 0600)",
             kpath);
        return -1;
    }
    if (!strstr(g->key, "-----BEGIN ") || !strstr(g->key, "PRIVATE KEY-----")) {
        fail(errstr, n, cfg, KEY_KEY, "'%s' holds no PEM private key "
             "(-----BEGIN PRIVATE KEY-----)", kpath);
        return -1;
    }
    return 0;
}

/* A bcrypt hash libcrypt takes, of a cost in range: NULL, or why not. */
static const char *bcrypt_complaint(const char *h, size_t len)
{
    static const char b64[] =
        "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    if (len < 7 || h[0] != '$' || h[1] != '2' ||
        (h[2] != 'a' && h[2] != 'b' && h[2] != 'y') || h[3] != '$')
        return "the hash is not bcrypt (it starts $2b$, $2a$ or $2y$; "
               "`htpasswd -nbBC 10 USER PASSWORD` makes one)";
    if (len != BCRYPT_LEN || h[4] < '0' || h[4] > '9' || h[5] < '0' ||
        h[5] > '9' || h[6] != '$' || strspn(h + 7, b64) != BCRYPT_LEN - 7)
        return "the bcrypt hash is malformed (60 characters: "
               "$2b$CC$ and 53 of ./A-Za-z0-9)";
    int cost = (h[4] - '0') * 10 + (h[5] - '0');
    if (cost < BS_BCRYPT_COST_MIN || cost > BS_BCRYPT_COST_MAX)
        return cost < BS_BCRYPT_COST_MIN
                   ? "the bcrypt cost is below 4"
                   : "the bcrypt cost is above 14 (each request would "
                     "take seconds of the endpoint's one thread)";
    char setting[BCRYPT_LEN + 1];
    memcpy(setting, h, len);
    setting[len] = '\0';
    if (crypt_checksalt(setting) != CRYPT_SALT_OK)
        return "libcrypt does not take this bcrypt hash";
    return NULL;
}

/* The users file: USER:HASH lines. */
static int load_users(bs_metrics_guard *g, const bs_config *cfg,
                      const bs_settings *set, char *errstr, size_t n)
{
    static const char *const KEY = "metrics.auth.users.path";
    const char *path = shown_path(cfg, KEY, set->metrics_users);
    int fd = open(set->metrics_users, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    bs_lines *lr = fd >= 0 ? bs_lines_new(fd, USER_LINE_MAX) : NULL;
    if (!lr) {
        fail(errstr, n, cfg, KEY, "'%s': cannot read it: %s", path,
             strerror(fd >= 0 ? ENOMEM : errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    const char *line, *bad = NULL;
    size_t len;
    int rc = 0, r = 0;
    g->users = calloc(USERS_MAX, sizeof(*g->users));
    while (g->users && (r = bs_lines_next(lr, &line, &len)) == 1) {
        if (!bs_list_entry(&line, &len))
            continue;
        const char *colon = memchr(line, ':', len);
        const char *hash = colon ? colon + 1 : NULL;
        size_t ulen = colon ? (size_t)(colon - line) : 0;
        char user[USER_LINE_MAX + 1] = "";
        if (!colon || ulen == 0) {
            bad = "expected USER:HASH";
        } else if (g->nusers == USERS_MAX) {
            bad = "more than 1000 users";
        } else {
            memcpy(user, line, ulen);
            user[ulen] = '\0';
            bad = bcrypt_complaint(hash, len - ulen - 1);
            for (size_t i = 0; !bad && i < g->nusers; i++)
                if (!strcmp(g->users[i].name, user))
                    bad = "the user is named twice";
        }
        if (bad) {
            fail(errstr, n, cfg, KEY, "%s:%llu: %s%s%s%s", path,
                 (unsigned long long)bs_lines_number(lr),
                 user[0] ? "user '" : "", user, user[0] ? "': " : "", bad);
            rc = -1;
            break;
        }
        guard_user *u = &g->users[g->nusers];
        u->name = strdup(user);
        if (!u->name)
            break;
        memcpy(u->hash, hash, BCRYPT_LEN);
        u->hash[BCRYPT_LEN] = '\0';
        g->nusers++;
    }
    if (rc == 0 && (!g->users || (r < 0 && errno != E2BIG))) {
        fail(errstr, n, cfg, KEY, "'%s': cannot read it: %s", path,
             g->users ? strerror(errno) : "out of memory");
        rc = -1;
    } else if (rc == 0 && r < 0) {
        fail(errstr, n, cfg, KEY, "%s:%llu: line longer than %d bytes", path,
             (unsigned long long)bs_lines_number(lr) + 1, USER_LINE_MAX);
        rc = -1;
    } else if (rc == 0 && g->nusers == 0) {
        fail(errstr, n, cfg, KEY, "'%s' names no user (USER:HASH lines): "
             "nobody could scrape", path);
        rc = -1;
    }
    bs_lines_destroy(lr);
    close(fd);
    return rc;
}

int bs_metrics_guard_load(const bs_config *cfg, const bs_settings *set,
                          bs_metrics_guard **out, char *errstr,
                          size_t errstr_size)
{
    *out = NULL;
    if (!set->metrics_tls_cert && !set->metrics_users)
        return 0;
    bs_metrics_guard *g = calloc(1, sizeof(*g));
    if (!g) {
        snprintf(errstr, errstr_size, "out of memory");
        return -1;
    }
    g->probes_open = set->metrics_probes_open;
    if ((set->metrics_tls_cert &&
         load_tls(g, cfg, set, errstr, errstr_size) != 0) ||
        (set->metrics_users &&
         load_users(g, cfg, set, errstr, errstr_size) != 0)) {
        bs_metrics_guard_free(g);
        return -1;
    }
    *out = g;
    return 0;
}

void bs_metrics_guard_free(bs_metrics_guard *g)
{
    if (!g)
        return;
    if (g->key)
        explicit_bzero(g->key, g->key_len);
    free(g->key);
    free(g->cert);
    for (size_t i = 0; i < g->nusers; i++)
        free(g->users[i].name);
    if (g->users)
        explicit_bzero(g->users, g->nusers * sizeof(*g->users));
    free(g->users);
    free(g);
}

const char *bs_metrics_guard_cert(const bs_metrics_guard *g)
{
    return g ? g->cert : NULL;
}

const char *bs_metrics_guard_key(const bs_metrics_guard *g)
{
    return g ? g->key : NULL;
}

size_t bs_metrics_guard_users(const bs_metrics_guard *g)
{
    return g ? g->nusers : 0;
}

bool bs_metrics_guard_needs_auth(const bs_metrics_guard *g, const char *url)
{
    if (!g || g->nusers == 0)
        return false;
    return !(g->probes_open &&
             (!strcmp(url, "/healthz") || !strcmp(url, "/ready")));
}

/* a == b, in a time that depends on their lengths only. */
static bool same(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), n = la > lb ? la : lb;
    volatile unsigned char d = la != lb;
    for (size_t i = 0; i < n; i++)
        d |= (unsigned char)((i < la ? a[i] : 0) ^ (i < lb ? b[i] : 0));
    return d == 0;
}

bool bs_metrics_guard_allows(const bs_metrics_guard *g, const char *user,
                             const char *password)
{
    if (!g || g->nusers == 0 || !user || !password)
        return false;
    /* Every name compared; an unknown user's password is hashed against
     * the first user's hash, so both cost one bcrypt. */
    size_t match = 0;
    bool found = false;
    for (size_t i = 0; i < g->nusers; i++) {
        bool eq = same(g->users[i].name, user);
        match = eq ? i : match;
        found |= eq;
    }
    struct crypt_data *cd = calloc(1, sizeof(*cd));
    if (!cd)
        return false;
    const char *h = crypt_rn(password, g->users[match].hash, cd, sizeof(*cd));
    bool ok = h && same(h, g->users[match].hash) && found;
    explicit_bzero(cd, sizeof(*cd));
    free(cd);
    return ok;
}
