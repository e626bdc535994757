/*
 * util.c -- see util.h.
 */
#include "base/util.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <dlfcn.h>

/* strtoull after the checks it lacks: no sign, no leading blank. */
static bool parse_digits(const char *s, unsigned long long *v, char **end)
{
    if (!s || *s < '0' || *s > '9')
        return false;
    errno = 0;
    *v = strtoull(s, end, 10);
    return errno == 0;
}

bool bs_parse_u64(const char *s, uint64_t *out)
{
    unsigned long long v;
    char *end;
    if (!parse_digits(s, &v, &end) || *end != '\0')
        return false;
    *out = v;
    return true;
}

bool bs_parse_count(const char *s, uint64_t *out)
{
    if (bs_parse_u64(s, out))
        return true;
    /* "1e6", "2.5M": go through a double, exact for the counts we take
     * (whole numbers below 2^53).  A leading digit only. */
    if (!s || *s < '0' || *s > '9')
        return false;
    char *end;
    double d = strtod(s, &end);
    if (end == s)
        return false;
    double mult = 1;
    if (*end && end[1] == '\0') {
        switch (*end) {
        case 'k': case 'K': mult = 1e3; end++; break;
        case 'M': mult = 1e6; end++; break;
        case 'G': mult = 1e9; end++; break;
        case 'T': mult = 1e12; end++; break;
        default: break;
        }
    }
    if (*end != '\0' || !isfinite(d) || d < 0 || d * mult > 1.8e19 ||
        d * mult != floor(d * mult))
        return false;
    *out = (uint64_t)(d * mult);
    return true;
}

bool bs_parse_double(const char *s, double *out)
{
    if (!s || !*s || isspace((unsigned char)*s))
        return false;
    errno = 0;
    char *end;
    double d = strtod(s, &end);
    if (errno || end == s || *end != '\0' || !isfinite(d))
        return false;
    *out = d;
    return true;
}

const char *bs_human_bytes(uint64_t bytes, char *buf, size_t size)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, size, "%llu B", (unsigned long long)bytes);
    else
        snprintf(buf, size, "%.1f %s", v, units[u]);
    return buf;
}

void bs_errf(char *errstr, size_t n, const char *fmt, ...)
{
    if (!errstr || n == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errstr, n, fmt, ap);
    va_end(ap);
}

double bs_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

double bs_unix_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* -- line reader ----------------------------------------------------------- */

struct bs_lines {
    int fd;
    size_t max_line;
    char *buf;
    size_t cap, start, end; /* unread bytes are buf[start..end) */
    size_t scanned;         /* of those, searched already: no '\n' */
    bool eof;
    uint64_t lineno, consumed;
};

#define LINES_CHUNK (256u << 10)

bs_lines *bs_lines_new(int fd, size_t max_line)
{
    bs_lines *lr = calloc(1, sizeof(*lr));
    if (!lr)
        return NULL;
    lr->fd = fd;
    lr->max_line = max_line;
    lr->cap = LINES_CHUNK + max_line;
    lr->buf = malloc(lr->cap);
    if (!lr->buf) {
        free(lr);
        return NULL;
    }
    return lr;
}

void bs_lines_destroy(bs_lines *lr)
{
    if (!lr)
        return;
    free(lr->buf);
    free(lr);
}

int bs_lines_next(bs_lines *lr, const char **line, size_t *len)
{
    for (;;) {
        /* Search only what is new since the last refill: a long line
         * arriving in many reads costs linear, not quadratic, time. */
        char *nl = memchr(lr->buf + lr->start + lr->scanned, '\n',
                          lr->end - lr->start - lr->scanned);
        lr->scanned = lr->end - lr->start;
        if (nl || (lr->eof && lr->end > lr->start)) {
            size_t n = nl ? (size_t)(nl - (lr->buf + lr->start))
                          : lr->end - lr->start;
            if (n > lr->max_line) {
                errno = E2BIG;
                return -1;
            }
            *line = lr->buf + lr->start;
            *len = n;
            lr->scanned = 0;
            lr->start += n + (nl ? 1 : 0);
            lr->consumed += n + (nl ? 1 : 0);
            lr->lineno++;
            return 1;
        }
        if (lr->eof)
            return 0;
        if (lr->end - lr->start > lr->max_line) {
            errno = E2BIG;
            return -1;
        }
        /* Keep the partial line, refill behind it. */
        memmove(lr->buf, lr->buf + lr->start, lr->end - lr->start);
        lr->end -= lr->start;
        lr->start = 0;
        /* At most a chunk a read: the buffer's room for one long line is
         * only touched (and resident) when such a line comes. */
        size_t room = lr->cap - lr->end;
        ssize_t r = read(lr->fd, lr->buf + lr->end,
                         room < LINES_CHUNK ? room : LINES_CHUNK);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == 0)
            lr->eof = true;
        lr->end += (size_t)r;
    }
}

uint64_t bs_lines_number(const bs_lines *lr) { return lr->lineno; }
uint64_t bs_lines_bytes(const bs_lines *lr) { return lr->consumed; }

bool bs_list_entry(const char **line, size_t *len)
{
    const char *s = *line;
    size_t n = *len;
    while (n && isspace((unsigned char)*s)) {
        s++;
        n--;
    }
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    if (n == 0 || *s == '#')
        return false;
    *line = s;
    *len = n;
    return true;
}

/* -- growing arrays -------------------------------------------------------- */

void *bs_grow(void *arr, size_t *cap, size_t need, size_t size, size_t first)
{
    if (need <= *cap)
        return arr;
    size_t c = *cap ? *cap : (first ? first : 1);
    while (c < need) {
        if (c > SIZE_MAX / 2)
            return NULL;
        c *= 2;
    }
    if (size && c > SIZE_MAX / size)
        return NULL;
    void *n = realloc(arr, c * size);
    if (!n)
        return NULL;
    *cap = c;
    return n;
}

/* -- progress bar ---------------------------------------------------------- */

void bs_progress_start(bs_progress *p, const char *what, uint64_t total)
{
    p->enabled = isatty(STDERR_FILENO) && !getenv("BLOOMSTAGE_NO_PROGRESS");
    p->total = total;
    p->what = what;
    p->last = 0;
}

void bs_progress_update(bs_progress *p, uint64_t done, uint64_t items)
{
    if (!p->enabled)
        return;
    double now = bs_now();
    if (now - p->last < 0.1)
        return;
    p->last = now;
    if (p->total) {
        double frac = (double)done / (double)p->total;
        if (frac > 1)
            frac = 1;
        int width = 30, full = (int)(frac * width);
        fprintf(stderr, "\r%s [%.*s%*s] %3d%% %llu", p->what, full,
                "##############################", width - full, "",
                (int)(frac * 100), (unsigned long long)items);
    } else {
        fprintf(stderr, "\r%s %llu", p->what, (unsigned long long)items);
    }
    fflush(stderr);
}

void bs_progress_end(bs_progress *p)
{
    if (p->enabled && p->last > 0)
        fprintf(stderr, "\r\033[K");
}

const char *bs_allocator(void)
{
    /* Asked at run time, not compiled in: this file is part of the engine
     * library, which the bloomstage binary links with jemalloc and the
     * tests link without.  A process on jemalloc has its mallctl. */
    typedef int (*mallctl_fn)(const char *, void *, size_t *, void *, size_t);
    mallctl_fn mallctl_p = (mallctl_fn)dlsym(RTLD_DEFAULT, "mallctl");
    if (!mallctl_p)
        return "glibc";
    static char name[96];
    const char *v = NULL;
    size_t sz = sizeof(v);
    if (mallctl_p("version", &v, &sz, NULL, 0) == 0 && v) {
        /* "5.3.0-0-g54eaed1d...": the release, without the git suffix */
        snprintf(name, sizeof(name), "jemalloc-%.*s", (int)strcspn(v, "-"),
                 v);
        return name;
    }
    return "jemalloc";
}
