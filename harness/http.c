/*
 * http.c -- see http.h.
 */
#include "http.h"
#include "proc.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- a tiny HTTP/1.0 client -------------------------------------------- */

void h_http_resp_free(h_http_resp *r)
{
    free(r->raw);
    memset(r, 0, sizeof(*r));
}

int h_loopback_connect(unsigned port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct timeval tv = {H_HTTP_TIMEOUT_S, 0};
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) ||
        connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

void h_base64(const void *in, size_t n, char *out, size_t out_size)
{
    static const char abc[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *p = in;
    size_t o = 0;
    for (size_t i = 0; i < n && o + 4 < out_size; i += 3) {
        unsigned v = (unsigned)p[i] << 16 |
                     (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        out[o++] = abc[v >> 18 & 63];
        out[o++] = abc[v >> 12 & 63];
        out[o++] = i + 1 < n ? abc[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? abc[v & 63] : '=';
    }
    if (out_size)
        out[o < out_size ? o : out_size - 1] = '\0';
}

/* Header `name` (case-insensitive) of a response head into out ("" if
 * absent); true if present. */
static bool head_header(const char *head, size_t head_len, const char *name,
                        char *out, size_t out_size)
{
    size_t nl = strlen(name);
    out[0] = '\0';
    const char *p = head, *end = head + head_len;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            eol = end;
        if ((size_t)(eol - p) > nl && !strncasecmp(p, name, nl) &&
            p[nl] == ':') {
            const char *v = p + nl + 1;
            while (v < eol && (*v == ' ' || *v == '\t'))
                v++;
            const char *ve = eol;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' '))
                ve--;
            snprintf(out, out_size, "%.*s", (int)(ve - v), v);
            return true;
        }
        p = eol + 1;
    }
    return false;
}

static int http_parse(char *buf, size_t len, const char *method,
                      const char *path, h_http_resp *r, char *err,
                      size_t err_size);

int h_http_request(unsigned port, const char *method, const char *path,
                        h_http_resp *r, char *err, size_t err_size)
{
    memset(r, 0, sizeof(*r));
    int fd = h_loopback_connect(port);
    if (fd < 0) {
        snprintf(err, err_size, "connect 127.0.0.1:%u: %s", port,
                 strerror(errno));
        return -1;
    }
    char req[512];
    int n = snprintf(req, sizeof(req), "%s %s HTTP/1.0\r\n"
                     "User-Agent: bloomstage-test_metrics\r\n\r\n",
                     method, path);
    for (int o = 0; o < n;) {
        ssize_t w = send(fd, req + o, (size_t)(n - o), MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            snprintf(err, err_size, "send: %s", strerror(errno));
            close(fd);
            return -1;
        }
        o += (int)w;
    }
    size_t cap = 8192, len = 0;
    char *buf = h_xmalloc(cap);
    for (;;) {
        if (cap - len < 4096) {
            if (cap >= H_HTTP_MAX) {
                snprintf(err, err_size, "%s %s: response over %u bytes",
                         method, path, H_HTTP_MAX);
                goto fail;
            }
            cap *= 2;
            buf = h_xrealloc(buf, cap);
        }
        ssize_t got = recv(fd, buf + len, cap - len - 1, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            snprintf(err, err_size, "%s %s: recv: %s%s", method, path,
                     strerror(errno),
                     errno == EAGAIN || errno == EWOULDBLOCK
                         ? " (no complete answer within the timeout)"
                         : "");
            goto fail;
        }
        if (got == 0)
            break;
        len += (size_t)got;
    }
    close(fd);
    buf[len] = '\0';
    return http_parse(buf, len, method, path, r, err, err_size);
fail:
    close(fd);
    free(buf);
    memset(r, 0, sizeof(*r));
    return -1;
}

/* A whole response (buf, len bytes, malloc'd; r takes it) into r: 0, or
 * -1 with err and buf freed. */
static int http_parse(char *buf, size_t len, const char *method,
                      const char *path, h_http_resp *r, char *err,
                      size_t err_size)
{
    r->raw = buf;
    int st = 0;
    if (len < 12 || strncmp(buf, "HTTP/1.", 7) != 0 ||
        !isdigit((unsigned char)buf[7]) || buf[8] != ' ' ||
        sscanf(buf + 9, "%3d", &st) != 1 || st < 100 || st > 599 ||
        (buf[12] != ' ' && buf[12] != '\r')) {
        snprintf(err, err_size, "%s %s: not an HTTP response: '%.40s'",
                 method, path, buf);
        goto fail;
    }
    char *sep = strstr(buf, "\r\n\r\n");
    if (!sep) {
        snprintf(err, err_size, "%s %s: no end of headers", method, path);
        goto fail;
    }
    r->status = st;
    r->head = buf;
    r->body = sep + 4;
    r->body_len = len - (size_t)(r->body - buf);
    char cl[32];
    if (head_header(buf, (size_t)(sep - buf), "Content-Length", cl,
                    sizeof(cl)) &&
        strcmp(method, "HEAD") != 0 &&
        strtoull(cl, NULL, 10) != r->body_len) {
        snprintf(err, err_size, "%s %s: Content-Length %s but %zu bytes of "
                 "body", method, path, cl, r->body_len);
        goto fail;
    }
    head_header(buf, (size_t)(sep - buf), "Content-Type", r->content_type,
                sizeof(r->content_type));
    return 0;
fail:
    free(buf);
    memset(r, 0, sizeof(*r));
    return -1;
}

bool h_http_header(const h_http_resp *r, const char *name, char *out,
                   size_t out_size)
{
    if (!r->head || !r->body) {
        out[0] = '\0';
        return false;
    }
    return head_header(r->head, (size_t)(r->body - r->head), name, out,
                       out_size);
}

int h_curl_request(unsigned port, const char *ca_pem, const char *path,
                   const char *user, const char *password, h_http_resp *r,
                   char *err, size_t err_size)
{
    memset(r, 0, sizeof(*r));
    char timeout[16], *url = h_strdupf("%s://127.0.0.1:%u%s",
                                       ca_pem ? "https" : "http", port, path);
    char *cred = user ? h_strdupf("%s:%s", user, password) : NULL;
    snprintf(timeout, sizeof(timeout), "%d", H_HTTP_TIMEOUT_S);
    char *argv[16];
    int k = 0;
    argv[k++] = "curl";
    argv[k++] = "--silent";
    argv[k++] = "--show-error";
    argv[k++] = "--include"; /* the head too */
    argv[k++] = "--http1.1";
    argv[k++] = "--max-time";
    argv[k++] = timeout;
    if (ca_pem) {
        argv[k++] = "--cacert";
        argv[k++] = (char *)ca_pem;
    }
    if (cred) {
        argv[k++] = "--user";
        argv[k++] = cred;
    }
    argv[k++] = url;
    argv[k] = NULL;
    h_proc *c = NULL;
    int st = 0, rc = -1;
    if (h_process_spawn(argv, NULL, &c) != 0) {
        snprintf(err, err_size, "curl: %s", h_last_error());
    } else if (h_process_wait(c, (H_HTTP_TIMEOUT_S + 10) * 1000, &st) != 0) {
        snprintf(err, err_size, "curl %s: no exit in %d s", url,
                 H_HTTP_TIMEOUT_S + 10);
    } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        const char *e = h_process_stderr(c);
        snprintf(err, err_size, "curl %s: %s: %.*s", url, h_status_str(st),
                 (int)strcspn(e, "\n"), e);
    } else {
        const char *out = h_process_stdout(c);
        size_t len = strlen(out);
        char *buf = h_xmalloc(len + 1);
        memcpy(buf, out, len + 1);
        rc = http_parse(buf, len, "GET", path, r, err, err_size);
    }
    h_process_free(c);
    free(url);
    free(cred);
    return rc;
}

int h_tls_self_signed(const char *dir, const char *name)
{
    char *key = h_strdupf("%s/%s.key", dir, name);
    char *cert = h_strdupf("%s/%s.pem", dir, name);
    char *const argv[] = {"openssl", "req", "-x509", "-newkey", "rsa:2048",
                          "-nodes", "-keyout", key, "-out", cert, "-days",
                          "1", "-subj", "/CN=127.0.0.1", "-addext",
                          "subjectAltName=IP:127.0.0.1,DNS:localhost", NULL};
    h_proc *p = NULL;
    int st = 0, rc = 0;
    if (h_process_spawn(argv, NULL, &p) != 0)
        rc = 1; /* no openssl command */
    else if (h_process_wait(p, 30000, &st) != 0 || !WIFEXITED(st) ||
             WEXITSTATUS(st) != 0)
        rc = h_fail("openssl req: %s: %s", h_status_str(st),
                    h_process_stderr(p));
    h_process_free(p);
    free(key);
    free(cert);
    return rc;
}

/* ---- a Prometheus text-format parser ----------------------------------- */

void h_prom_free(h_prom *pm)
{
    for (size_t i = 0; i < pm->n; i++) {
        free(pm->s[i].series);
        free(pm->s[i].name);
        free(pm->s[i].labels);
    }
    free(pm->s);
    free(pm->f);
    memset(pm, 0, sizeof(*pm));
}

static long prom_family_find(const h_prom *pm, const char *name, size_t len)
{
    for (size_t i = 0; i < pm->nf; i++)
        if (strlen(pm->f[i].name) == len && !memcmp(pm->f[i].name, name, len))
            return (long)i;
    return -1;
}

static size_t prom_family_get(h_prom *pm, const char *name, size_t len)
{
    long i = prom_family_find(pm, name, len);
    if (i >= 0)
        return (size_t)i;
    if (pm->nf == pm->capf) {
        pm->capf = pm->capf ? pm->capf * 2 : 32;
        pm->f = h_xrealloc(pm->f, pm->capf * sizeof(*pm->f));
    }
    h_prom_family *f = &pm->f[pm->nf];
    memset(f, 0, sizeof(*f));
    snprintf(f->name, sizeof(f->name), "%.*s", (int)len, name);
    return pm->nf++;
}

static bool valid_name(const char *s, size_t len)
{
    if (len == 0 || len >= 128)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!(islower((unsigned char)s[i]) || s[i] == '_'))
            return false;
    return true;
}

/* The family a sample name belongs to: itself, or for _bucket/_sum/_count
 * a histogram (or summary) family of the base name.  -1 if none typed. */
static long prom_family_of(const h_prom *pm, const char *name, size_t len)
{
    long i = prom_family_find(pm, name, len);
    if (i >= 0 && pm->f[i].types)
        return i;
    static const char *const suffixes[] = {"_bucket", "_sum", "_count"};
    for (size_t k = 0; k < 3; k++) {
        size_t sl = strlen(suffixes[k]);
        if (len > sl && !memcmp(name + len - sl, suffixes[k], sl)) {
            long b = prom_family_find(pm, name, len - sl);
            if (b >= 0 && (!strcmp(pm->f[b].type, "histogram") ||
                           (!strcmp(pm->f[b].type, "summary") && k > 0)))
                return b;
        }
    }
    return -1;
}

int h_prom_parse(const char *text, h_prom *pm, char *err, size_t err_size)
{
    memset(pm, 0, sizeof(*pm));
    regex_t re;
    int rc = regcomp(&re,
                     "^([a-z_]+)(\\{([a-z_]+=\"[^\"]*\"(,[a-z_]+=\"[^\"]*\")*)"
                     "\\})? (-?[0-9.e+-]+|\\+Inf|-Inf|NaN)$",
                     REG_EXTENDED);
    if (rc != 0)
        h_test_fail("regcomp: %d", rc);
    size_t tlen = strlen(text);
    long current = -1;
    int lineno = 0;
    rc = -1;
    if (tlen == 0 || text[tlen - 1] != '\n') {
        snprintf(err, err_size, "the body is empty or does not end with a "
                 "newline");
        goto done;
    }
    for (const char *p = text; *p;) {
        const char *eol = strchr(p, '\n');
        size_t len = (size_t)(eol - p);
        char line[4096];
        lineno++;
        if (len >= sizeof(line)) {
            snprintf(err, err_size, "line %d: longer than %zu bytes", lineno,
                     sizeof(line));
            goto done;
        }
        memcpy(line, p, len);
        line[len] = '\0';
        p = eol + 1;
        if (line[0] == '#') {
            bool help = !strncmp(line, "# HELP ", 7);
            bool type = !strncmp(line, "# TYPE ", 7);
            if (!help && !type)
                continue; /* a plain comment */
            const char *name = line + 7;
            size_t nl = strcspn(name, " ");
            if (!valid_name(name, nl) || name[nl] != ' ' || !name[nl + 1]) {
                snprintf(err, err_size, "line %d: malformed: '%s'", lineno,
                         line);
                goto done;
            }
            const char *rest = name + nl + 1;
            size_t fi = prom_family_get(pm, name, nl); /* may move f */
            h_prom_family *f = &pm->f[fi];
            if (help) {
                for (const char *c = rest; *c; c++)
                    if (*c == '\\' && c[1] != '\\' && c[1] != 'n') {
                        snprintf(err, err_size, "line %d: bad escape in "
                                 "HELP: '%s'", lineno, line);
                        goto done;
                    } else if (*c == '\\') {
                        c++;
                    }
                if (++f->helps > 1) {
                    snprintf(err, err_size, "line %d: a second HELP for %s",
                             lineno, f->name);
                    goto done;
                }
            } else {
                if (strcmp(rest, "counter") && strcmp(rest, "gauge") &&
                    strcmp(rest, "histogram") && strcmp(rest, "summary") &&
                    strcmp(rest, "untyped")) {
                    snprintf(err, err_size, "line %d: unknown type '%s'",
                             lineno, rest);
                    goto done;
                }
                if (++f->types > 1) {
                    snprintf(err, err_size, "line %d: a second TYPE for %s",
                             lineno, f->name);
                    goto done;
                }
                if (f->has_samples) {
                    snprintf(err, err_size, "line %d: TYPE of %s after its "
                             "samples", lineno, f->name);
                    goto done;
                }
                snprintf(f->type, sizeof(f->type), "%s", rest);
            }
            continue;
        }
        regmatch_t m[6];
        if (regexec(&re, line, 6, m, 0) != 0) {
            snprintf(err, err_size, "line %d does not match the sample "
                     "grammar: '%s'", lineno, line);
            goto done;
        }
        const char *vtext = line + m[5].rm_so;
        char *vend = NULL;
        errno = 0;
        double v = strtod(vtext, &vend);
        if (vend == vtext || *vend != '\0' || errno == ERANGE) {
            snprintf(err, err_size, "line %d: value '%s' is not a number",
                     lineno, vtext);
            goto done;
        }
        size_t name_len = (size_t)m[1].rm_eo;
        long fam = prom_family_of(pm, line, name_len);
        if (fam < 0) {
            snprintf(err, err_size, "line %d: sample of %.*s before (or "
                     "without) its TYPE", lineno, (int)name_len, line);
            goto done;
        }
        if (fam != current) {
            if (pm->f[fam].has_samples) {
                snprintf(err, err_size, "line %d: samples of %s are not "
                         "grouped together", lineno, pm->f[fam].name);
                goto done;
            }
            current = fam;
        }
        pm->f[fam].has_samples = true;
        /* label names unique within the series */
        char labels[4096] = "";
        if (m[3].rm_so >= 0) {
            snprintf(labels, sizeof(labels), "%.*s",
                     (int)(m[3].rm_eo - m[3].rm_so), line + m[3].rm_so);
            char seen[16][64];
            int nseen = 0;
            for (const char *q = labels; *q;) {
                size_t kl = strcspn(q, "=");
                for (int i = 0; i < nseen; i++)
                    if (strlen(seen[i]) == kl && !memcmp(seen[i], q, kl)) {
                        snprintf(err, err_size, "line %d: label %.*s twice",
                                 lineno, (int)kl, q);
                        goto done;
                    }
                if (nseen < 16 && kl < 64)
                    snprintf(seen[nseen++], 64, "%.*s", (int)kl, q);
                q = strchr(q + kl + 2, '"') + 1; /* past the value */
                if (*q == ',')
                    q++;
            }
        }
        size_t series_len = (size_t)(m[5].rm_so - 1);
        for (size_t i = 0; i < pm->n; i++)
            if (strlen(pm->s[i].series) == series_len &&
                !memcmp(pm->s[i].series, line, series_len)) {
                snprintf(err, err_size, "line %d: series %.*s twice", lineno,
                         (int)series_len, line);
                goto done;
            }
        if (pm->n == pm->cap) {
            pm->cap = pm->cap ? pm->cap * 2 : 128;
            pm->s = h_xrealloc(pm->s, pm->cap * sizeof(*pm->s));
        }
        h_prom_sample *s = &pm->s[pm->n++];
        s->series = h_strdupf("%.*s", (int)series_len, line);
        s->name = h_strdupf("%.*s", (int)name_len, line);
        s->labels = h_xstrdup(labels);
        s->value = v;
        s->family = (size_t)fam;
    }
    for (size_t i = 0; i < pm->nf; i++)
        if (pm->f[i].helps != 1 || pm->f[i].types != 1) {
            snprintf(err, err_size, "family %s has %d HELP and %d TYPE lines, "
                     "want one each", pm->f[i].name, pm->f[i].helps,
                     pm->f[i].types);
            goto done;
        }
    rc = 0;
done:
    regfree(&re);
    if (rc != 0)
        h_prom_free(pm);
    return rc;
}

const h_prom_sample *h_prom_find(const h_prom *pm, const char *series)
{
    for (size_t i = 0; i < pm->n; i++)
        if (!strcmp(pm->s[i].series, series))
            return &pm->s[i];
    return NULL;
}

const h_prom_family *h_prom_family_named(const h_prom *pm, const char *name)
{
    long i = prom_family_find(pm, name, strlen(name));
    return i >= 0 ? &pm->f[i] : NULL;
}

double h_prom_get(const h_prom *pm, const char *body, const char *fmt, ...)
{
    char series[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(series, sizeof(series), fmt, ap);
    va_end(ap);
    const h_prom_sample *s = h_prom_find(pm, series);
    if (!s) {
        fprintf(stderr, "---- the scrape ----\n%s----\n", body ? body : "");
        h_test_fail("/metrics has no series %s", series);
    }
    return s->value;
}

bool h_prom_has(const h_prom *pm, const char *fmt, ...)
{
    char series[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(series, sizeof(series), fmt, ap);
    va_end(ap);
    return h_prom_find(pm, series) != NULL;
}

int h_prom_check_histogram(const h_prom *pm, const char *name,
                                double *count, char *err, size_t err_size)
{
    char bucket[160], csum[160], ccount[160];
    snprintf(bucket, sizeof(bucket), "%s_bucket", name);
    snprintf(csum, sizeof(csum), "%s_sum", name);
    snprintf(ccount, sizeof(ccount), "%s_count", name);
    const h_prom_family *f = h_prom_family_named(pm, name);
    if (!f || strcmp(f->type, "histogram")) {
        snprintf(err, err_size, "%s is not a histogram family", name);
        return -1;
    }
    double last_le = -INFINITY, last_v = -1;
    int nb = 0;
    for (size_t i = 0; i < pm->n; i++) {
        const h_prom_sample *s = &pm->s[i];
        if (strcmp(s->name, bucket))
            continue;
        if (strncmp(s->labels, "le=\"", 4) || strchr(s->labels, ',')) {
            snprintf(err, err_size, "%s: labels other than le", s->series);
            return -1;
        }
        char *end;
        double le = strtod(s->labels + 4, &end);
        if (end == s->labels + 4 || strcmp(end, "\"")) {
            snprintf(err, err_size, "%s: le is not a number", s->series);
            return -1;
        }
        if (!(le > last_le)) {
            snprintf(err, err_size, "%s: le not increasing", s->series);
            return -1;
        }
        if (s->value < last_v || s->value != floor(s->value) ||
            s->value < 0) {
            snprintf(err, err_size, "%s = %.17g: buckets not cumulative "
                     "(previous %.17g)", s->series, s->value, last_v);
            return -1;
        }
        last_le = le;
        last_v = s->value;
        nb++;
    }
    if (nb < 2 || !isinf(last_le)) {
        snprintf(err, err_size, "%s: %d buckets, the last le=%g (want "
                 "+Inf last)", name, nb, last_le);
        return -1;
    }
    const h_prom_sample *c = h_prom_find(pm, ccount);
    const h_prom_sample *su = h_prom_find(pm, csum);
    if (!c || !su) {
        snprintf(err, err_size, "%s: no _count or _sum", name);
        return -1;
    }
    if (c->value != last_v) {
        snprintf(err, err_size, "%s: +Inf bucket %.17g != _count %.17g",
                 name, last_v, c->value);
        return -1;
    }
    if (!(su->value >= 0)) {
        snprintf(err, err_size, "%s: _sum %.17g", name, su->value);
        return -1;
    }
    *count = c->value;
    return 0;
}
