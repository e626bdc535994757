/*
 * domain.c -- a key's domain and its parents (fm_domain.h): find the host
 * in an address, a URL or a bare host, then take its well-formed suffixes
 * from the right.
 */
#include "fm_domain.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* The first of "/?#" in [p, e), or e. */
static const char *path_start(const char *p, const char *e)
{
    while (p < e && *p != '/' && *p != '?' && *p != '#')
        p++;
    return p;
}

/* A URL scheme, RFC 3986: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ). */
static bool is_scheme(const char *p, const char *e)
{
    if (p == e || !((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
        return false;
    for (; p < e; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              (*p >= '0' && *p <= '9') || *p == '+' || *p == '-' ||
              *p == '.'))
            return false;
    return true;
}

/* The host of an authority [userinfo@]host[:port] in [*hp, *he): strips
 * the user info and, when port_any, anything after a ':'; else only a
 * ':' followed by digits alone.  *bracket is set for an [IPv6] host. */
static void authority_host(const char **hp, const char **he, bool port_any,
                           bool *bracket)
{
    const char *p = *hp, *e = *he;
    for (const char *q = e; q > p; q--)
        if (q[-1] == '@') {
            p = q;
            break;
        }
    *bracket = false;
    if (p < e && *p == '[') {
        const char *c = memchr(p, ']', (size_t)(e - p));
        if (c) {
            *hp = p + 1;
            *he = c;
            *bracket = true;
            return;
        }
    }
    const char *c = memchr(p, ':', (size_t)(e - p));
    if (c) {
        bool digits = c + 1 < e;
        for (const char *q = c + 1; q < e; q++)
            if (*q < '0' || *q > '9')
                digits = false;
        if (port_any || digits)
            e = c;
    }
    *hp = p;
    *he = e;
}

static bool is_ipv4(const char *p, size_t n)
{
    if (!n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((p[i] >= '0' && p[i] <= '9') || p[i] == '.'))
            return false;
    return true;
}

int fm_domain_parse(fm_domain *d, const void *key, size_t len, char *errstr,
                    size_t errstr_size)
{
    const char *k = key, *end = k + len;
    const char *hp = k, *he = end;
    bool bracket = false;
    d->n = 0;
    d->len = 0;
    d->name[0] = 0;

    const char *sep = NULL;
    for (const char *q = k; q + 3 <= end; q++)
        if (q[0] == ':' && q[1] == '/' && q[2] == '/') {
            sep = q;
            break;
        }
    if (sep && is_scheme(k, sep)) { /* a URL */
        hp = sep + 3;
        he = path_start(hp, end);
        authority_host(&hp, &he, true, &bracket);
    } else {
        const char *at = NULL;
        for (const char *q = end; q > k; q--)
            if (q[-1] == '@') {
                at = q - 1;
                break;
            }
        hp = at ? at + 1 : k; /* an address; else a bare host, or the key */
        he = path_start(hp, end);
        authority_host(&hp, &he, false, &bracket);
    }
    if (!bracket && he > hp && he[-1] == '.')
        he--;
    if (hp == he) {
        snprintf(errstr, errstr_size, "domain: no host in a key of %zu bytes",
                 len);
        return -1;
    }

    /* The suffixes of [hp, he), from the right, made of good labels. */
    size_t n = (size_t)(he - hp);
    size_t starts[FM_DOMAIN_MAX_LOOKUPS]; /* from hp */
    unsigned ns = 0;
    size_t from; /* where the longest good suffix starts, in [hp, he) */
    if (bracket || is_ipv4(hp, n)) {
        if (n > FM_DOMAIN_MAX) {
            snprintf(errstr, errstr_size,
                     "domain: address of %zu bytes, longer than %d", n,
                     FM_DOMAIN_MAX);
            return -1;
        }
        from = 0;
        starts[ns++] = 0;
    } else {
        size_t label_end = n;
        from = n;
        for (;;) {
            size_t s = label_end;
            while (s > 0 && hp[s - 1] != '.')
                s--;
            size_t label = label_end - s;
            if (label == 0 || label > FM_DOMAIN_MAX_LABEL || n - s > FM_DOMAIN_MAX)
                break;
            from = s;
            starts[ns++] = s;
            if (s == 0)
                break;
            label_end = s - 1;
        }
        if (!ns) {
            size_t label_start = n;
            while (label_start > 0 && hp[label_start - 1] != '.')
                label_start--;
            snprintf(errstr, errstr_size,
                     "domain: last label of %zu bytes (want 1 to %d) in a "
                     "host of %zu bytes",
                     n - label_start, FM_DOMAIN_MAX_LABEL, n);
            return -1;
        }
    }
    d->len = n - from;
    for (size_t i = 0; i < d->len; i++) {
        char c = hp[from + i];
        d->name[i] = c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
    }
    d->name[d->len] = 0;
    /* starts[] run from the shortest suffix to the longest. */
    d->n = ns;
    for (unsigned i = 0; i < ns; i++)
        d->start[i] = (uint8_t)(starts[ns - 1 - i] - from); /* <= 253 */
    return 0;
}
