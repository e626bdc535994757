/*
 * core.c -- see core.h.
 */
#include "core.h"
#include "kafka.h" /* h_dump_kafka_log, for H_MUST */

#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern char **environ;

/* ---- errors ------------------------------------------------------------ */

static char h_err[4096];

const char *h_last_error(void)
{
    return h_err;
}

int h_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h_err, sizeof(h_err), fmt, ap);
    va_end(ap);
    return -1;
}

static void (*fail_hook)(const char *msg);

void h_set_fail_hook(void (*hook)(const char *msg))
{
    fail_hook = hook;
}

void h_test_fail(const char *fmt, ...)
{
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (fail_hook)
        fail_hook(msg);
    fprintf(stderr, "FAILED: %s\n", msg);
    exit(1);
}

void h_must_failed(const char *expr)
{
    h_dump_kafka_log();
    h_test_fail("%s: %s", expr, h_last_error());
}

/* ---- memory and strings ------------------------------------------------ */

static void out_of_memory(size_t n)
{
    fprintf(stderr, "support: out of memory (%zu bytes)\n", n);
    abort();
}

void *h_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        out_of_memory(n);
    return p;
}

void *h_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        out_of_memory(n * size);
    return p;
}

void *h_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        out_of_memory(n);
    return q;
}

char *h_xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(h_xmalloc(n), s, n);
}

char *h_strdupf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int r = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (r < 0)
        out_of_memory(0);
    return s;
}

/* ---- the clock --------------------------------------------------------- */

double h_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int64_t h_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

double h_wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void h_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void (*idle_hook)(void *arg);
static void *idle_arg;

void h_set_idle_hook(void (*hook)(void *arg), void *arg)
{
    idle_hook = hook;
    idle_arg = arg;
}

void h_nap(int ms)
{
    if (!idle_hook) {
        h_sleep_ms(ms);
        return;
    }
    double until = h_now_s() + ms / 1000.0;
    do {
        idle_hook(idle_arg);
        double left = until - h_now_s();
        if (left > 0)
            h_sleep_ms(left > 0.002 ? 2 : (int)(left * 1000) + 1);
    } while (h_now_s() < until);
}

/* ---- the benches' statistics ------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double h_sort_median(double *v, size_t n)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- random numbers ---------------------------------------------------- */

uint64_t h_mix64(uint64_t x)
{
    uint64_t z = x + UINT64_C(0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

uint64_t h_splitmix64(uint64_t *state)
{
    uint64_t r = h_mix64(*state);
    *state += UINT64_C(0x9e3779b97f4a7c15);
    return r;
}

uint64_t h_poisson_upper(double mean, double alpha)
{
    double p = exp(-mean), cdf = p;
    uint64_t c = 0;
    while (1 - cdf > alpha && c < 1000000) {
        c++;
        p *= mean / (double)c;
        cdf += p;
    }
    return c;
}

uint32_t h_xorshift32(uint32_t *state)
{
    uint32_t x = *state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *state = x;
}

/* ---- the environment --------------------------------------------------- */

void h_env_scrub(const char *prefix)
{
    size_t pl = strlen(prefix);
    for (bool again = true; again;) {
        again = false;
        for (char **e = environ; *e; e++)
            if (!strncmp(*e, prefix, pl)) {
                char name[256];
                snprintf(name, sizeof(name), "%.*s", (int)strcspn(*e, "="),
                         *e);
                unsetenv(name);
                again = true;
                break;
            }
    }
}
