/*
 * secrets.c -- what the configuration never shows, and values read from
 * files (the way containers hand secrets over: a file under /run/secrets).
 *
 * A key is secret when its name carries one of the marks below (any case):
 * every property librdkafka flags as sensitive, with the name patterns the
 * Java clients use for theirs.  librdkafka also flags ssl.key.location, but
 * that value is a path, not the key: it is shown, and start-up checks name
 * it when the file is missing (validate.c).  The store never shows the
 * value of a secret key, nor any value read from a file, in an origin, a
 * message or the effective configuration (store.c, print.c).
 *
 * Opening and reading files is here too, so the values read with @file: or
 * BLOOMSTAGE_..._FILE and the paths start-up checks (validate.c) fail with
 * the same words.  Nothing here calls back into the store: complaints are
 * written into the caller's buffer, which puts the origin and key in front.
 */
#include "config_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const secret_marks[] = {
    "password",           /* sasl.password, ssl.key.password,
                             ssl.keystore.password, Java's truststore */
    "passwd",             /* the same, abbreviated */
    "passphrase",         /* sasl.oauthbearer.assertion.private.key.passphrase */
    "secret",             /* sasl.oauthbearer.client.secret and its alias */
    "jaas",               /* sasl.jaas.config (Java's; it embeds a password) */
    "oauthbearer.config", /* sasl.oauthbearer.config */
    "sasl.username",      /* flagged sensitive by librdkafka */
    "key.pem",            /* ssl.key.pem, ...assertion.private.key.pem */
    "ca.pem",             /* ssl.ca.pem, flagged by librdkafka */
    "ssl_key",            /* librdkafka's internal name of the key */
    "basic.auth.user.info", /* USER:PASSWORD, Confluent's name
                               (schema.registry.basic.auth.user.info) */
    NULL,
};

const char *bs_config_secret_mark_end(const char *s, size_t len)
{
    const char *first = NULL;
    for (size_t m = 0; secret_marks[m]; m++) {
        size_t mlen = strlen(secret_marks[m]);
        for (size_t i = 0; i + mlen <= len; i++) {
            if (strncasecmp(s + i, secret_marks[m], mlen) == 0) {
                if (!first || s + i + mlen < first)
                    first = s + i + mlen;
                break;
            }
        }
    }
    return first;
}

bool bs_config_key_is_secret(const char *key)
{
    return key && bs_config_secret_mark_end(key, strlen(key)) != NULL;
}

void bs_config_show(char *buf, size_t n, const char *s, size_t len,
                    bool guard)
{
    const char *mark = guard ? bs_config_secret_mark_end(s, len) : NULL;
    size_t keep = mark ? (size_t)(mark - s) : len;
    bool cut = keep < len || keep > BS_CONFIG_SHOW_MAX;
    if (keep > BS_CONFIG_SHOW_MAX)
        keep = BS_CONFIG_SHOW_MAX - 3;
    snprintf(buf, n, "%.*s%s", (int)keep, s, cut ? "..." : "");
}

/* Why a file of this type cannot be read as asked, or NULL. */
static const char *file_type_complaint(const struct stat *st, bool dir_ok)
{
    if (S_ISDIR(st->st_mode))
        return dir_ok ? NULL : "is a directory, not a file";
    return S_ISREG(st->st_mode) ? NULL : "is not a regular file";
}

size_t bs_config_utf8_len(const unsigned char *s)
{
    unsigned char c = s[0];
    if (c >= 0x20 && c < 0x7f)
        return 1;
    size_t n;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        lo = c == 0xe0 ? 0xa0 : 0x80;
        hi = c == 0xed ? 0x9f : 0xbf;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        lo = c == 0xf0 ? 0x90 : 0x80;
        hi = c == 0xf4 ? 0x8f : 0xbf;
    } else {
        return 0;
    }
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return n;
}

bool bs_config_needs_escape(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t l = bs_config_utf8_len(p);
        if (!l)
            return true;
        p += l;
    }
    return false;
}

const char *bs_config_escape(const char *s, char *buf, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    if (!n)
        return buf;
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t l = bs_config_utf8_len(p);
        if (l) {
            if (o + l >= n)
                break;
            memcpy(buf + o, p, l);
            o += l;
            p += l;
        } else {
            if (o + 4 >= n)
                break;
            buf[o++] = '\\';
            buf[o++] = 'x';
            buf[o++] = hex[*p >> 4];
            buf[o++] = hex[*p & 15];
            p++;
        }
    }
    buf[o] = '\0';
    return buf;
}

int bs_config_open_path(const char *path, bool dir_ok, char *why, size_t n)
{
    if (!path[0]) {
        snprintf(why, n, "empty file name");
        return -1;
    }
    /* The type is checked before opening too: opening a device can do
     * something, opening a FIFO waits for a writer (O_NONBLOCK covers one
     * swapped in between). */
    struct stat st;
    const char *bad = NULL;
    int fd = -1;
    if (stat(path, &st) != 0) {
        bad = strerror(errno);
    } else if (!(bad = file_type_complaint(&st, dir_ok))) {
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
            bad = strerror(errno);
        else if (fstat(fd, &st) != 0)
            bad = strerror(errno);
        else
            bad = file_type_complaint(&st, dir_ok);
    }
    if (bad) {
        snprintf(why, n, "cannot read '%s': %s", path, bad);
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

int bs_config_read_value_file(const char *path, char **out, char *why,
                              size_t n)
{
    *out = NULL;
    int fd = bs_config_open_path(path, false, why, n);
    if (fd < 0)
        return -1;
    /* Room for the largest value and the newline after it (CR LF). */
    const size_t cap = BS_CONFIG_MAX_LINE + 2;
    char *buf = malloc(cap + 1);
    size_t len = 0;
    int rc = -1;
    if (!buf) {
        snprintf(why, n, "cannot read '%s': out of memory", path);
        goto out;
    }
    for (;;) {
        ssize_t got = read(fd, buf + len, cap + 1 - len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            snprintf(why, n, "cannot read '%s': %s", path, strerror(errno));
            goto out;
        }
        if (got == 0)
            break;
        len += (size_t)got;
        if (len > cap)
            break;
    }
    if (len > 0 && buf[len - 1] == '\n') {
        len--;
        if (len > 0 && buf[len - 1] == '\r')
            len--;
    }
    if (len > BS_CONFIG_MAX_LINE) {
        snprintf(why, n, "'%s' holds more than %d bytes", path,
                 BS_CONFIG_MAX_LINE);
        goto out;
    }
    if (memchr(buf, '\0', len)) {
        snprintf(why, n, "'%s' holds a NUL byte (a value is text)", path);
        goto out;
    }
    buf[len] = '\0';
    *out = buf;
    buf = NULL;
    rc = 0;
out:
    free(buf);
    close(fd);
    return rc;
}
