/*
 * bench_kafka.h -- what the real-broker benchmarks (bench_e2e --bootstrap,
 * bench_scale) need beyond harness/: creating topics explicitly (the
 * brokers scripts/kafka starts have auto.create.topics.enable=false) and
 * reading one counter from bloomstage's /metrics.  Header-only (static
 * inline): each benchmark is one translation unit.  Also the benchmarks'
 * count options, read by the engine's parser, and their usage answer; and
 * the settings every client of a benchmark adds for a secured broker
 * (bench_e2e --client-config).
 */
#ifndef BS_BENCH_KAFKA_H
#define BS_BENCH_KAFKA_H

#include "support.h"
#include "base/util.h" /* bs_parse_count, the engine's one count parser */

#include <librdkafka/rdkafka.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The librdkafka settings ("key=value", NULL-terminated) every client a
 * benchmark makes adds (bk_secured), e.g. security.protocol, SASL and TLS
 * for a secured broker; NULL: none.  bk_client_config_load sets it. */
static char **bk_client_kv;

/* Reads a client configuration file: key=value lines (spaces around '='
 * kept out; blank lines and # comments skipped) into bk_client_kv.  0, or
 * -1 with "PATH:LINE: ..." in err. */
static inline int bk_client_config_load(const char *path, char *err,
                                        size_t errsz)
{
    char *text = NULL;
    if (h_read_file(path, &text, NULL)) {
        snprintf(err, errsz, "%s", h_last_error());
        return -1;
    }
    size_t n = 0, cap = 8;
    char **kv = h_xcalloc(cap, sizeof(char *));
    int line = 0, rc = 0;
    for (char *p = text, *eol; p && *p; p = eol ? eol + 1 : NULL) {
        eol = strchr(p, '\n');
        if (eol)
            *eol = '\0';
        line++;
        p += strspn(p, " \t");
        size_t len = strlen(p);
        while (len && (p[len - 1] == ' ' || p[len - 1] == '\t' ||
                       p[len - 1] == '\r'))
            p[--len] = '\0';
        if (!*p || *p == '#')
            continue;
        char *eq = strchr(p, '=');
        if (!eq || eq == p) {
            snprintf(err, errsz, "%s:%d: expected key=value", path, line);
            rc = -1;
            break;
        }
        size_t kl = (size_t)(eq - p);
        while (kl && (p[kl - 1] == ' ' || p[kl - 1] == '\t'))
            kl--;
        const char *v = eq + 1 + strspn(eq + 1, " \t");
        if (n + 2 > cap)
            kv = h_xrealloc(kv, (cap *= 2) * sizeof(char *));
        kv[n++] = h_strdupf("%.*s=%s", (int)kl, p, v);
        kv[n] = NULL;
    }
    free(text);
    if (rc) {
        for (size_t i = 0; i < n; i++)
            free(kv[i]);
        free(kv);
        return -1;
    }
    bk_client_kv = kv;
    return 0;
}

/* conf with bk_client_kv added; a setting librdkafka refuses ends the
 * benchmark (exit 1, naming it: the configuration file is wrong). */
static inline rd_kafka_conf_t *bk_secured(rd_kafka_conf_t *conf)
{
    if (bk_client_kv && h_conf_kv(conf, (const char *const *)bk_client_kv)) {
        fprintf(stderr, "bench: client configuration: %s\n", h_last_error());
        exit(1);
    }
    return conf;
}

/* Creates the topics names[0..n-1], `parts` partitions each, replication 1,
 * extra topic configs `cfg` (key, value, ..., NULL; may be NULL); then
 * waits (up to 30 s) until every partition has a leader in the metadata.
 * 0, or -1 with a message in err. */
static inline int bk_create_topics(const char *bootstrap,
                                   const char *const *names, int n, int parts,
                                   const char *const *cfg, char *err,
                                   size_t errsz)
{
    char e[512];
    rd_kafka_conf_t *conf = bk_secured(rd_kafka_conf_new());
    if (rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, e,
                          sizeof(e)) != RD_KAFKA_CONF_OK) {
        rd_kafka_conf_destroy(conf);
        snprintf(err, errsz, "%.200s", e);
        return -1;
    }
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, e, sizeof(e));
    if (!rk) {
        rd_kafka_conf_destroy(conf);
        snprintf(err, errsz, "admin client: %.200s", e);
        return -1;
    }
    int rc = 0;
    rd_kafka_NewTopic_t **nt = calloc((size_t)n, sizeof(*nt));
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *opt =
        rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
    rd_kafka_AdminOptions_set_operation_timeout(opt, 30000, e, sizeof(e));
    rd_kafka_AdminOptions_set_request_timeout(opt, 60000, e, sizeof(e));
    for (int i = 0; i < n && nt; i++) {
        nt[i] = rd_kafka_NewTopic_new(names[i], parts, 1, e, sizeof(e));
        if (!nt[i]) {
            snprintf(err, errsz, "%.200s: %.200s", names[i], e);
            rc = -1;
            break;
        }
        for (int k = 0; cfg && cfg[k] && cfg[k + 1]; k += 2)
            rd_kafka_NewTopic_set_config(nt[i], cfg[k], cfg[k + 1]);
    }
    if (!nt) {
        snprintf(err, errsz, "out of memory");
        rc = -1;
    }
    if (rc == 0) {
        rd_kafka_CreateTopics(rk, nt, (size_t)n, opt, q);
        rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 90000);
        if (!ev) {
            snprintf(err, errsz, "CreateTopics: no answer in 90 s");
            rc = -1;
        } else if (rd_kafka_event_error(ev)) {
            snprintf(err, errsz, "CreateTopics: %s",
                     rd_kafka_event_error_string(ev));
            rc = -1;
        } else {
            size_t cnt = 0;
            const rd_kafka_topic_result_t **tr = rd_kafka_CreateTopics_result_topics(
                rd_kafka_event_CreateTopics_result(ev), &cnt);
            for (size_t i = 0; i < cnt; i++)
                if (rd_kafka_topic_result_error(tr[i])) {
                    snprintf(err, errsz, "creating %s: %s",
                             rd_kafka_topic_result_name(tr[i]),
                             rd_kafka_topic_result_error_string(tr[i]));
                    rc = -1;
                    break;
                }
        }
        if (ev)
            rd_kafka_event_destroy(ev);
    }
    for (int i = 0; i < n && nt; i++)
        if (nt[i])
            rd_kafka_NewTopic_destroy(nt[i]);
    free(nt);
    rd_kafka_AdminOptions_destroy(opt);
    rd_kafka_queue_destroy(q);
    /* Every partition led: the clients find the topics at once. */
    for (double t0 = h_now_s(); rc == 0;) {
        const struct rd_kafka_metadata *md = NULL;
        int ready = 0;
        if (rd_kafka_metadata(rk, 1, NULL, &md, 5000) ==
            RD_KAFKA_RESP_ERR_NO_ERROR) {
            for (int i = 0; i < n; i++)
                for (int t = 0; t < md->topic_cnt; t++) {
                    const struct rd_kafka_metadata_topic *mt = &md->topics[t];
                    if (strcmp(mt->topic, names[i]) || mt->err ||
                        mt->partition_cnt != parts)
                        continue;
                    int led = 0;
                    for (int p = 0; p < mt->partition_cnt; p++)
                        led += mt->partitions[p].leader >= 0;
                    ready += led == parts;
                }
            rd_kafka_metadata_destroy(md);
        }
        if (ready == n)
            break;
        if (h_now_s() - t0 > 30) {
            snprintf(err, errsz, "created topics without leaders after 30 s");
            rc = -1;
            break;
        }
        h_sleep_ms(100);
    }
    rd_kafka_destroy(rk);
    return rc;
}

/* The values of the unlabelled series names[0..n-1] on bloomstage's
 * /metrics at 127.0.0.1:port, from one request, into v (-1 for a series
 * not found).  0, or -1 when the page cannot be read. */
static inline int bk_metrics(unsigned port, const char *const *names,
                             double *v, int n)
{
    h_http_resp r;
    char e[256];
    memset(&r, 0, sizeof(r));
    for (int i = 0; i < n; i++)
        v[i] = -1;
    if (h_http_request(port, "GET", "/metrics", &r, e, sizeof(e)) ||
        r.status != 200 || !r.body) {
        h_http_resp_free(&r);
        return -1;
    }
    for (const char *p = r.body; p && *p;) {
        for (int i = 0; i < n; i++) {
            size_t nl = strlen(names[i]);
            if (!strncmp(p, names[i], nl) && p[nl] == ' ')
                v[i] = strtod(p + nl + 1, NULL);
        }
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    h_http_resp_free(&r);
    return 0;
}

/* One series (see bk_metrics), or -1. */
static inline double bk_metric(unsigned port, const char *name)
{
    double v;
    return bk_metrics(port, &name, &v, 1) ? -1 : v;
}

/* The port in bloomstage's "metrics listening" log line (log file at
 * path), or 0 while there is none. */
static inline unsigned bk_metrics_port(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[2048];
    unsigned port = 0;
    while (fgets(line, sizeof(line), f))
        if (strstr(line, "msg=\"metrics listening\"")) {
            long long v = h_log_int(line, "port");
            if (v > 0 && v < 65536)
                port = (unsigned)v;
        }
    fclose(f);
    return port;
}

/* Waits up to timeout_s for the port of bloomstage's /metrics in its log
 * (log_path) while the process c runs; 0 if it exits or never says. */
static inline unsigned bk_wait_metrics_port(h_proc *c, const char *log_path,
                                            double timeout_s)
{
    for (double t0 = h_now_s(); h_now_s() - t0 < timeout_s;) {
        unsigned port = bk_metrics_port(log_path);
        if (port)
            return port;
        if (h_process_wait(c, 0, NULL) != 1)
            return 0;
        h_sleep_ms(10);
    }
    return 0;
}

/* `bloomstage run -c conf [-X xs[i]]...` with stderr and stdout to
 * log_path; NULL with h_last_error() on failure. */
static inline h_proc *bk_stage_spawn(const char *bloomstage, const char *conf,
                                     char *const *xs, int nx,
                                     const char *log_path)
{
    char **argv = calloc((size_t)(5 + 2 * nx), sizeof(char *));
    if (!argv) {
        h_fail("out of memory");
        return NULL;
    }
    int i = 0;
    argv[i++] = (char *)bloomstage;
    argv[i++] = "run";
    argv[i++] = "-c";
    argv[i++] = (char *)conf;
    for (int x = 0; x < nx; x++) {
        argv[i++] = "-X";
        argv[i++] = xs[x];
    }
    argv[i] = NULL;
    h_proc *c = NULL;
    h_spawn_opts o = {.log_path = log_path};
    if (h_process_spawn_opts(argv, &o, &c))
        c = NULL;
    free(argv);
    return c;
}

/* The machine's load average and CPU pressure (PSI some avg10), one line:
 * what else ran on the cores during a benchmark. */
static inline void bk_machine_load(char *buf, size_t size)
{
    buf[0] = '\0';
    FILE *f = fopen("/proc/loadavg", "r");
    double a = 0, b = 0, c = 0, some = -1;
    if (f) {
        if (fscanf(f, "%lf %lf %lf", &a, &b, &c) != 3)
            a = b = c = 0;
        fclose(f);
    }
    f = fopen("/proc/pressure/cpu", "r");
    if (f) {
        if (fscanf(f, "some avg10=%lf", &some) != 1)
            some = -1;
        fclose(f);
    }
    if (some >= 0)
        snprintf(buf, size, "load average %.2f %.2f %.2f, CPU pressure "
                 "%.0f%% (some, 10 s)", a, b, c, some);
    else
        snprintf(buf, size, "load average %.2f %.2f %.2f", a, b, c);
}

static inline int bk_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n-1] (n > 0), which is left sorted. */
static inline double bk_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), bk_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* A count option ("1M", "20000000", "1e6": powers of 1000, as every
 * bloomstage count) within [min, max]. */
static inline bool bench_parse_count(const char *s, uint64_t min,
                                     uint64_t max, uint64_t *out)
{
    uint64_t v;
    if (!bs_parse_count(s, &v) || v < min || v > max)
        return false;
    *out = v;
    return true;
}

/* bench_parse_count for a command-line option: false after printing the
 * message (printf's format and arguments; a newline is added) on stderr. */
static inline bool bench_count_opt(const char *s, uint64_t min, uint64_t max,
                                   uint64_t *out, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static inline bool bench_count_opt(const char *s, uint64_t min, uint64_t max,
                                   uint64_t *out, const char *fmt, ...)
{
    if (bench_parse_count(s, min, max, out))
        return true;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return false;
}

/* getopt_long's answer c was --help ('h') or an unknown option: the usage
 * on stdout and exit status 0, or on stderr and 2. */
static inline int bench_usage(int c, const char *usage)
{
    fputs(usage, c == 'h' ? stdout : stderr);
    return c == 'h' ? 0 : 2;
}

#endif
