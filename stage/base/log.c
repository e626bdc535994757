/*
 * log.c -- see log.h.
 */
#include "base/log.h"

#include <config.h>
#include <librdkafka/rdkafka.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile bs_log_level current = BS_LOG_INFO;
static volatile bool status_shown;

bool bs_log_is_tty(void)
{
    /* Asked often (the status line): once is enough. */
    static volatile int tty = -1;
    if (tty < 0)
        tty = isatty(STDERR_FILENO) == 1;
    return tty == 1;
}

void bs_log_status(const char *line)
{
    if (!bs_log_is_tty())
        return;
    char buf[512];
    int n = snprintf(buf, sizeof(buf), "\r\033[K%s", line ? line : "");
    if (n > (int)sizeof(buf) - 1)
        n = (int)sizeof(buf) - 1;
    ssize_t w = write(STDERR_FILENO, buf, (size_t)n);
    (void)w;
    status_shown = line != NULL;
}
static const char *const NAMES[] = {"error", "warn", "info", "debug"};

void bs_log_set_level(bs_log_level level) { current = level; }

const char *bs_log_quote(const char *s, char *buf, size_t size)
{
    bool plain = *s != '\0';
    for (const char *p = s; *p; p++)
        if (*p <= ' ' || *p == '"' || *p == '=' || *p == '\\')
            plain = false;
    if (plain) {
        snprintf(buf, size, "%s", s);
        return buf;
    }
    size_t o = 0;
    if (size < 3) {
        if (size)
            buf[0] = '\0';
        return buf;
    }
    buf[o++] = '"';
    for (const char *p = s; *p && o + 3 < size; p++) {
        if (*p == '"' || *p == '\\') {
            buf[o++] = '\\';
            buf[o++] = *p;
        } else if (*p == '\n') {
            buf[o++] = '\\';
            buf[o++] = 'n';
        } else if ((unsigned char)*p < ' ') {
            buf[o++] = ' ';
        } else {
            buf[o++] = *p;
        }
    }
    buf[o++] = '"';
    buf[o] = '\0';
    return buf;
}

void bs_log(bs_log_level level, const char *msg, const char *fmt, ...)
{
    if (level > current)
        return;
    char line[2048], q[512];
    if (status_shown) {
        ssize_t w = write(STDERR_FILENO, "\r\033[K", 4);
        (void)w;
    }
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    int n = snprintf(line, sizeof(line),
                     "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03dZ level=%s msg=%s",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                     tm.tm_min, tm.tm_sec, (int)(tv.tv_usec / 1000),
                     NAMES[level], bs_log_quote(msg, q, sizeof(q)));
    if (fmt && n > 0 && (size_t)n < sizeof(line) - 2) {
        line[n++] = ' ';
        va_list ap;
        va_start(ap, fmt);
        int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
        va_end(ap);
        if (m > 0)
            n += m < (int)(sizeof(line) - (size_t)n - 1)
                     ? m
                     : (int)(sizeof(line) - (size_t)n - 2);
    }
    if (n < 0)
        return;
    if ((size_t)n > sizeof(line) - 2)
        n = (int)sizeof(line) - 2;
    line[n] = '\0';
    /* Names from outside (a topic from the configuration, librdkafka's
     * texts) may hold bytes that are not UTF-8, or control characters:
     * written as \xNN, so every line is one line of valid UTF-8. */
    char esc[4 * sizeof(line)];
    char *text = line;
    if (bs_config_needs_escape(line)) {
        text = esc;
        n = (int)strlen(bs_config_escape(line, esc, sizeof(esc) - 1));
    }
    text[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, text, (size_t)n);
    (void)w;
}

void bs_log_rdkafka(const rd_kafka_t *rk, int level, const char *fac,
                    const char *buf)
{
    /* syslog levels: 0-3 error, 4 warning, 5-6 notice/info, 7 debug */
    bs_log_level l = level <= 3   ? BS_LOG_ERROR
                     : level == 4 ? BS_LOG_WARN
                     : level <= 6 ? BS_LOG_INFO
                                  : BS_LOG_DEBUG;
    char q[1024];
    bs_log(l, "librdkafka", "client=%s facility=%s detail=%s",
           rk ? rd_kafka_name(rk) : "?", fac, bs_log_quote(buf, q, sizeof(q)));
}

void bs_log_ckpt_failed(const char *topic, int32_t partition, const char *err)
{
    char q[1100];
    if (topic)
        bs_log(BS_LOG_ERROR, "checkpoint failed", "topic=%s partition=%d "
               "error=%s", topic, (int)partition,
               bs_log_quote(err, q, sizeof(q)));
    else
        bs_log(BS_LOG_ERROR, "checkpoint failed", "error=%s",
               bs_log_quote(err, q, sizeof(q)));
}
