/*
 * http.h -- the stage's HTTP endpoints seen from outside: a small HTTP/1.0
 * client over loopback TCP (no libcurl); HTTPS with basic auth through the
 * curl command (Debian's curl); a self-signed certificate made with the
 * openssl command; and a Prometheus text-format parser strict enough to
 * find format mistakes (test_metrics).
 */
#ifndef BS_SUPPORT_HTTP_H
#define BS_SUPPORT_HTTP_H

#include "core.h"

#include <stdbool.h>
#include <stddef.h>

/* Send and receive timeout of every HTTP request, seconds. */
#define H_HTTP_TIMEOUT_S 5
/* The largest response read. */
#define H_HTTP_MAX (32u << 20)

/* ---- a tiny HTTP/1.0 client -------------------------------------------- */

typedef struct h_http_resp {
    int status;
    char *raw;        /* the whole response, NUL-terminated */
    const char *head; /* into raw: status line and headers */
    char *body;       /* into raw */
    size_t body_len;
    char content_type[128];
} h_http_resp;

void h_http_resp_free(h_http_resp *r);
/* A TCP connection to 127.0.0.1:port with send/receive timeouts; -1 with
 * errno on failure. */
int h_loopback_connect(unsigned port);
/* `METHOD path HTTP/1.0`, read to EOF (the server closes an HTTP/1.0
 * connection): 0 with *r filled, or -1 with err.  A Content-Length that
 * does not match the body is an error. */
int h_http_request(unsigned port, const char *method, const char *path,
                   h_http_resp *r, char *err, size_t err_size);

/* in[0..n) in base64 (RFC 4648, padded) into out, NUL-terminated; out is
 * cut short when too small. */
void h_base64(const void *in, size_t n, char *out, size_t out_size);

/* Header `name` of r (case-insensitive) into out ("" if absent); true if
 * present. */
bool h_http_header(const h_http_resp *r, const char *name, char *out,
                   size_t out_size);

/* `curl` GETs https://127.0.0.1:port/path (HTTP/1.1), the server's
 * certificate checked against ca_pem, with basic auth as user:password
 * when user is not NULL: 0 with *r filled as h_http_request does, or -1
 * with err (curl's exit and its message: no TLS answer, a refused
 * certificate).  ca_pem NULL: plain http:// instead.  The password is on
 * curl's command line: test passwords only. */
int h_curl_request(unsigned port, const char *ca_pem, const char *path,
                   const char *user, const char *password, h_http_resp *r,
                   char *err, size_t err_size) H_WARN_UNUSED;

/* A self-signed certificate (RSA 2048, one day) for CN 127.0.0.1 with
 * subjectAltName IP:127.0.0.1, DNS:localhost, and its unencrypted key:
 * dir/NAME.pem and dir/NAME.key (openssl req): 0, 1 when there is no
 * openssl command (the caller skips), -1 with h_last_error(). */
int h_tls_self_signed(const char *dir, const char *name) H_WARN_UNUSED;

/* ---- a Prometheus text-format parser ----------------------------------- */

typedef struct h_prom_sample {
    char *series; /* name{labels} exactly as written */
    char *name;
    char *labels; /* between the braces, "" if none */
    double value;
    size_t family;
} h_prom_sample;

typedef struct h_prom_family {
    char name[128];
    char type[16];
    int helps, types;
    bool has_samples;
} h_prom_family;

typedef struct h_prom {
    h_prom_sample *s;
    size_t n, cap;
    h_prom_family *f;
    size_t nf, capf;
} h_prom;

void h_prom_free(h_prom *pm);
/*
 * Parses a /metrics body strictly: 0, or -1 with err naming the line.
 * Sample lines must match
 *   ^[a-z_]+(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? VALUE$
 * with VALUE a number strtod reads whole (or +Inf, -Inf, NaN); label names
 * unique within a series; every family exactly one HELP and one TYPE, the
 * TYPE before its samples, its samples grouped; no series twice.
 */
int h_prom_parse(const char *text, h_prom *pm, char *err, size_t err_size);
const h_prom_sample *h_prom_find(const h_prom *pm, const char *series);
const h_prom_family *h_prom_family_named(const h_prom *pm, const char *name);
/* The value of a series, or fails the test (the scrape, body, is
 * printed). */
double h_prom_get(const h_prom *pm, const char *body, const char *fmt, ...)
    H_PRINTF(3, 4);
bool h_prom_has(const h_prom *pm, const char *fmt, ...) H_PRINTF(2, 3);
/*
 * A histogram family's samples: _bucket series with only an `le` label, le
 * strictly increasing and ending at +Inf, counts non-decreasing
 * (cumulative), +Inf = _count, _sum present and >= 0.  0 with *count, or -1
 * with err.
 */
int h_prom_check_histogram(const h_prom *pm, const char *name, double *count,
                           char *err, size_t err_size);

#endif
