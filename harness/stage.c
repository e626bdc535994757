/*
 * stage.c -- see stage.h.
 */
#include "stage.h"
#include "http.h"
#include "kafka.h"
#include "store/store_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- the binary -------------------------------------------------------- */

/* The binary, copied before BLOOMSTAGE_BIN is removed from the
 * environment. */
static char g_bin[4096];
static const char *g_verbose_env, *g_stage_x_env;

const char *h_bloomstage_path(void)
{
    if (g_bin[0])
        return g_bin;
    const char *p = getenv("BLOOMSTAGE_BIN");
    if (!p || !*p) {
        h_fail("BLOOMSTAGE_BIN is not set (ctest sets it to the bloomstage "
               "binary; set it by hand to run this test alone)");
        return NULL;
    }
    if (access(p, X_OK)) {
        h_fail("BLOOMSTAGE_BIN=%s: %s", p, strerror(errno));
        return NULL;
    }
    return p;
}

int h_test_init(void)
{
    const char *bin = h_bloomstage_path();
    if (!bin)
        return -1;
    snprintf(g_bin, sizeof(g_bin), "%s", bin);
    h_env_scrub("BLOOMSTAGE_");
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

void h_stage_debug_env(const char *verbose_env, const char *stage_x_env)
{
    g_verbose_env = verbose_env;
    g_stage_x_env = stage_x_env;
}

static bool verbose(void)
{
    return g_verbose_env && getenv(g_verbose_env);
}

/* ---- processes --------------------------------------------------------- */

/* Every process started here and not yet released. */
static h_proc *g_procs[32];

static void remember(h_proc *p)
{
    for (size_t i = 0; i < sizeof(g_procs) / sizeof(g_procs[0]); i++)
        if (!g_procs[i]) {
            g_procs[i] = p;
            return;
        }
    h_process_free(p);
    h_test_fail("more than %zu processes at once",
                sizeof(g_procs) / sizeof(g_procs[0]));
}

void h_proc_release(h_proc *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < sizeof(g_procs) / sizeof(g_procs[0]); i++)
        if (g_procs[i] == p)
            g_procs[i] = NULL;
    h_process_free(p);
}

void h_proc_release_all(void)
{
    for (size_t i = 0; i < sizeof(g_procs) / sizeof(g_procs[0]); i++) {
        h_process_free(g_procs[i]);
        g_procs[i] = NULL;
    }
}

h_proc *h_bs_spawn(const char *const *args, char *const *env)
{
    const char *bin = h_bloomstage_path();
    if (!bin)
        h_test_fail("%s", h_last_error());
    size_t n = 0;
    while (args[n])
        n++;
    char **argv = h_xcalloc(n + 2, sizeof(*argv));
    argv[0] = (char *)bin;
    for (size_t i = 0; i < n; i++)
        argv[i + 1] = (char *)args[i];
    h_proc *p = NULL;
    int rc = h_process_spawn(argv, env, &p);
    free(argv);
    H_MUST(rc);
    remember(p);
    return p;
}

h_proc *h_stage_start(const char *conf, const char *const *xs,
                      char *const *env)
{
    size_t nx = 0;
    while (xs && xs[nx])
        nx++;
    /* stage_x_env="k=v k=v": more -X settings, for debugging (e.g.
     * log.level=debug consumer.debug=topic,fetch). */
    const char *x = g_stage_x_env ? getenv(g_stage_x_env) : NULL;
    char *dbg = x ? h_xstrdup(x) : NULL;
    size_t nd = 0;
    for (const char *c = dbg; c && *c; c++)
        nd += *c == ' ';
    const char **args = h_xcalloc(3 + 2 * (nx + nd + 1) + 1, sizeof(*args));
    size_t n = 0;
    args[n++] = "run";
    args[n++] = "-c";
    args[n++] = conf;
    for (size_t i = 0; i < nx; i++) {
        args[n++] = "-X";
        args[n++] = xs[i];
    }
    char *save = NULL;
    for (char *t = dbg ? strtok_r(dbg, " ", &save) : NULL; t;
         t = strtok_r(NULL, " ", &save)) {
        args[n++] = "-X";
        args[n++] = t;
    }
    args[n] = NULL;
    h_proc *p = h_bs_spawn(args, env);
    free(args);
    free(dbg);
    return p;
}

h_proc *h_bs_cmd(const char *const *args, int want)
{
    h_proc *p = h_bs_spawn(args, NULL);
    int st = 0;
    if (h_process_wait(p, H_CMD_MS, &st) != 0)
        h_stage_fail(p, "bloomstage %s %s: %s", args[0],
                     args[0] && args[1] ? args[1] : "", h_last_error());
    if (!WIFEXITED(st) || WEXITSTATUS(st) != want)
        h_stage_fail(p, "bloomstage %s %s: %s, want exit %d", args[0],
                     args[0] && args[1] ? args[1] : "", h_status_str(st),
                     want);
    return p;
}

void h_stage_fail(h_proc *p, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (p) {
        const char *err = h_process_stderr(p);
        size_t len = strlen(err);
        bool cut = len > 12000 && !verbose();
        fprintf(stderr, "--- stage %d stderr%s ---\n%s--- end ---\n",
                (int)h_process_pid(p), cut ? " (last 12000 bytes)" : "",
                cut ? err + len - 12000 : err);
    }
    h_test_fail("%s", msg);
}

void h_stage_alive(h_proc *p, const char *when)
{
    int st = 0;
    int r = h_process_wait(p, 0, &st);
    if (r == 0)
        h_stage_fail(p, "the stage exited (%s) %s", h_status_str(st), when);
    if (r < 0)
        h_stage_fail(p, "waiting for the stage: %s", h_last_error());
}

void h_stages_alive(h_proc *const *procs, const char *when)
{
    for (size_t i = 0; procs && procs[i]; i++)
        h_stage_alive(procs[i], when);
}

static void dump_if_verbose(h_proc *p, const char *what)
{
    if (verbose())
        fprintf(stderr, "--- stage %d stderr (%s) ---\n%s--- end ---\n",
                (int)h_process_pid(p), what, h_process_stderr(p));
}

void h_stage_stop(h_proc *p)
{
    H_MUST(h_process_kill(p, SIGTERM));
    int st = 0;
    if (h_process_wait(p, H_EXIT_MS, &st) != 0)
        h_stage_fail(p, "no exit within %d ms of SIGTERM: %s", H_EXIT_MS,
                     h_last_error());
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        h_stage_fail(p, "after SIGTERM: %s, want exit 0", h_status_str(st));
    dump_if_verbose(p, "stopped");
}

void h_stage_kill9(h_proc *p, const char *when)
{
    h_stage_alive(p, when);
    H_MUST(h_process_kill(p, SIGKILL));
    int st = 0;
    if (h_process_wait(p, H_REAP_MS, &st) != 0)
        h_stage_fail(p, "not reaped after SIGKILL: %s", h_last_error());
    if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL)
        h_stage_fail(p, "%s: %s before the SIGKILL", when, h_status_str(st));
    dump_if_verbose(p, "killed");
}

/* ---- its log ----------------------------------------------------------- */

bool h_said(h_proc *p, const char *needle)
{
    return strstr(h_process_stderr(p), needle) != NULL;
}

size_t h_count_said(h_proc *p, const char *needle)
{
    size_t n = 0;
    for (const char *s = h_process_stderr(p); (s = strstr(s, needle));
         s += strlen(needle))
        n++;
    return n;
}

void h_expect_said(h_proc *p, const char *needle)
{
    if (!h_said(p, needle))
        h_stage_fail(p, "the stage's stderr lacks \"%s\"", needle);
}

void h_wait_said(h_proc *p, const char *needle, size_t n, int timeout_ms)
{
    double t0 = h_now_s();
    while (h_count_said(p, needle) < n) {
        h_stage_alive(p, "while waiting for its log");
        if ((h_now_s() - t0) * 1000 > timeout_ms)
            h_stage_fail(p, "the stage did not log '%s'%s within %d ms",
                         needle, n > 1 ? " often enough" : "", timeout_ms);
        h_nap(5);
    }
}

double h_stage_metric(unsigned port, const char *series)
{
    h_http_resp r;
    char err[256];
    if (h_http_request(port, "GET", "/metrics", &r, err, sizeof(err)) != 0)
        return NAN;
    double v = NAN;
    if (r.status == 200) {
        h_prom pm;
        if (h_prom_parse(r.body ? r.body : "", &pm, err, sizeof(err)) != 0)
            h_test_fail("/metrics on port %u does not parse: %s", port, err);
        const h_prom_sample *smp = h_prom_find(&pm, series);
        if (smp)
            v = smp->value;
        h_prom_free(&pm);
    }
    h_http_resp_free(&r);
    return v;
}

void h_expect_ckpt_info(h_proc *p, const char *topic,
                        const int64_t *want, int parts)
{
    const char *text = h_process_stdout(p);
    int found = 0;
    for (const char *line = text; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        char t[256];
        int part;
        long long next;
        if (sscanf(line, "%255s %d %lld", t, &part, &next) == 3 &&
            !strcmp(t, topic)) {
            if (part < 0 || part >= parts || next != want[part])
                h_stage_fail(p, "checkpoint info: %s [%d] next_offset %lld, "
                             "want %" PRId64, t, part, next,
                             part >= 0 && part < parts ? want[part] : -1);
            if (len < 3 || strncmp(line + len - 3, "yes", 3))
                h_stage_fail(p, "checkpoint info: %s [%d] does not verify",
                             t, part);
            found++;
        }
        line = nl ? nl + 1 : NULL;
    }
    if (found != parts)
        h_stage_fail(p, "checkpoint info lists %d partitions of %s, want "
                     "%d:\n%s", found, topic, parts, text);
}

long long h_log_int(const char *line, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof(pat), " %s=", key);
    const char *k = strstr(line, pat);
    if (!k)
        return -1;
    char *end;
    long long v = strtoll(k + strlen(pat), &end, 10);
    return *end == ' ' || *end == '\0' || *end == '\n' ? v : -1;
}

double h_log_double(const char *line, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof(pat), " %s=", key);
    const char *k = strstr(line, pat);
    if (!k)
        return NAN;
    char *end;
    double v = strtod(k + strlen(pat), &end);
    return end != k + strlen(pat) &&
                   (*end == ' ' || *end == '\0' || *end == '\n')
               ? v
               : NAN;
}

double h_log_time(const char *line)
{
    struct tm tm;
    int ms = 0;
    memset(&tm, 0, sizeof(tm));
    if (sscanf(line, "ts=%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon,
               &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) != 7)
        return 0;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (double)timegm(&tm) + ms / 1000.0;
}

/* ---- its files --------------------------------------------------------- */

int h_ckpt_next(const char *dir, const char *topic, int partition,
                int64_t *next)
{
    bs_ckpt_head h;
    char err[1024];
    int r = bs_dirstore_newest(dir, topic, partition, &h, err, sizeof(err));
    if (r < 0)
        return h_fail("%s", err);
    if (r == 0)
        return 1;
    *next = h.next_offset;
    return 0;
}

/* ---- what it produces and commits -------------------------------------- */

int64_t h_count_committed(const char *bootstraps, const char *topic)
{
    h_record_list l = {0};
    H_MUST(h_consume_all_conf(bootstraps, topic, H_OUTPUT_MS,
                              H_READ_COMMITTED, &l));
    int64_t n = (int64_t)l.n;
    h_record_list_free(&l);
    return n;
}

void h_wait_totals(h_proc *p, const char *bootstraps,
                   const char *const *topics, const int64_t *want, int n)
{
    double t0 = h_now_s();
    for (;;) {
        int i, short_one = -1;
        int64_t got = 0, short_got = 0;
        for (i = 0; i < n; i++) {
            H_MUST(h_topic_total(bootstraps, topics[i], &got));
            /* Offsets count transaction markers too (exactly_once by
             * transactions): once they reach the target, the records a
             * read_committed consumer sees are what counts.  Records never
             * outnumber offsets, so below the target there is no need. */
            if (got >= want[i])
                got = h_count_committed(bootstraps, topics[i]);
            if (got > want[i])
                h_stage_fail(p, "%s holds %" PRId64 " records, more than the "
                             "%" PRId64 " expected", topics[i], got, want[i]);
            if (got < want[i] && short_one < 0) {
                short_one = i;
                short_got = got;
            }
        }
        if (short_one < 0)
            return;
        i = short_one;
        got = short_got;
        int st = 0;
        int r = h_process_wait(p, 150, &st);
        if (r == 0)
            h_stage_fail(p, "the stage exited (%s) while %s held %" PRId64
                         " of %" PRId64 " records", h_status_str(st),
                         topics[i], got, want[i]);
        if ((h_now_s() - t0) * 1000 > H_OUTPUT_MS)
            h_stage_fail(p, "after %d s %s holds %" PRId64 " records, want "
                         "%" PRId64, H_OUTPUT_MS / 1000, topics[i], got,
                         want[i]);
    }
}

void h_wait_out_rej(h_proc *p, const char *bootstraps, const char *out,
                    int64_t n_out, const char *rej, int64_t n_rej)
{
    const char *const topics[] = {out, rej};
    const int64_t want[] = {n_out, n_rej};
    h_wait_totals(p, bootstraps, topics, want, 2);
}

int64_t h_topic_end(rd_kafka_t *q, const char *topic, int nparts,
                    int64_t *hw)
{
    int64_t *v = h_xcalloc((size_t)nparts, sizeof(*v));
    double t0 = h_now_s();
    while (h_offsets(q, topic, nparts, RD_KAFKA_OFFSET_END, v, H_REQUEST_MS)) {
        if ((h_now_s() - t0) * 1000 > H_QUERY_RETRY_MS) {
            free(v);
            h_test_fail("%s", h_last_error());
        }
        h_sleep_ms(100);
    }
    int64_t sum = 0;
    for (int p = 0; p < nparts; p++) {
        if (hw)
            hw[p] = v[p];
        sum += v[p];
    }
    free(v);
    return sum;
}

void h_wait_out(rd_kafka_t *q, const char *topic, int nparts,
                h_proc *const *procs, int64_t want, int timeout_ms)
{
    double t0 = h_now_s();
    int64_t have;
    while ((have = h_topic_end(q, topic, nparts, NULL)) < want) {
        h_stages_alive(procs, "while waiting for output");
        if ((h_now_s() - t0) * 1000 > timeout_ms)
            h_stage_fail(procs ? procs[0] : NULL, "%s holds %" PRId64
                         " records, not %" PRId64 ", after %d ms", topic,
                         have, want, timeout_ms);
        h_nap(2);
    }
}

void h_wait_out_settled(rd_kafka_t *q, const char *topic, int nparts,
                        h_proc *const *procs, int64_t want, int quiet_ms,
                        int timeout_ms)
{
    h_wait_out(q, topic, nparts, procs, want, timeout_ms);
    int64_t last = h_topic_end(q, topic, nparts, NULL);
    double since = h_now_s(), t0 = h_now_s();
    while ((h_now_s() - since) * 1000 < quiet_ms) {
        h_nap(50);
        int64_t have = h_topic_end(q, topic, nparts, NULL);
        if (have != last) {
            last = have;
            since = h_now_s();
        }
        h_stages_alive(procs, "while the output settles");
        if ((h_now_s() - t0) * 1000 > timeout_ms)
            h_stage_fail(procs ? procs[0] : NULL, "%s did not settle",
                         topic);
    }
}

void h_wait_committed(const char *bootstraps, const char *group,
                      const char *topic, int nparts, const int64_t *want,
                      h_proc *const *procs, int timeout_ms,
                      void (*check)(void *arg, const int64_t *committed),
                      void *arg)
{
    int64_t c[256];
    if (nparts < 1 || nparts > 256)
        h_test_fail("h_wait_committed: %d partitions", nparts);
    double t0 = h_now_s();
    for (;;) {
        H_MUST(h_committed(bootstraps, group, topic, nparts, c));
        if (check)
            check(arg, c);
        int p = 0;
        while (p < nparts && c[p] == want[p])
            p++;
        if (p == nparts)
            return;
        h_stages_alive(procs, "before committing the end of the input");
        if ((h_now_s() - t0) * 1000 > timeout_ms)
            h_stage_fail(procs ? procs[0] : NULL, "%s [%d] committed at %"
                         PRId64 ", want %" PRId64 ", within %d ms", topic, p,
                         c[p], want[p], timeout_ms);
        h_nap(200);
    }
}

h_line_kind h_partition_line(const char *text, const char *topic,
                             h_assigned *out)
{
    static const char said[] = "msg=\"partition ";
    static const char *const verbs[] = {"revoked\"", "assigned\"",
                                        "restored\""};
    const char *w = strstr(text, said);
    if (!w)
        return H_LINE_OTHER;
    w += sizeof(said) - 1;
    size_t v = 0;
    while (v < 3 && strncmp(w, verbs[v], strlen(verbs[v])) != 0)
        v++;
    if (v == 3)
        return H_LINE_OTHER;
    w += strlen(verbs[v]);
    char tp[300];
    snprintf(tp, sizeof(tp), " topic=%s partition=", topic);
    if (strncmp(w, tp, strlen(tp)) != 0)
        return H_LINE_OTHER; /* another topic's */
    w += strlen(tp);
    bool revoked = v == 0;
    *out = (h_assigned){.revoked = revoked, .ckpt = -1};
    int part, end = 0;
    bool ok = revoked ? sscanf(w, "%d", &part) == 1
                      : sscanf(w, "%d checkpoint_offset=%lld "
                                  "already_forwarded=%zu",
                               &part, &out->ckpt, &out->fwd) == 3;
    if (!ok && v == 1 &&
        sscanf(w, "%d restore=pending%n", &part, &end) == 1 && end > 0)
        return H_LINE_PENDING;
    if (!ok || part < 0)
        return H_LINE_BAD;
    out->partition = part;
    return H_LINE_PARTITION;
}

size_t h_parse_assigned(h_proc *p, const char *topic, h_assigned *out,
                        size_t max)
{
    size_t n = 0;
    /* From each partition message on: h_partition_line reads that one. */
    for (const char *s = h_process_stderr(p);
         (s = strstr(s, "msg=\"partition ")); s++) {
        h_assigned a;
        switch (h_partition_line(s, topic, &a)) {
        case H_LINE_OTHER:
        case H_LINE_PENDING: /* its "partition restored" line says where */
            continue;
        case H_LINE_BAD:
            h_stage_fail(p, "a 'partition' line of %s does not parse: "
                         "%.120s", topic, s);
        case H_LINE_PARTITION:
            break;
        }
        if (n < max)
            out[n] = a;
        n++;
    }
    return n;
}

unsigned h_assigned_mask(h_proc *p, const char *topic, bool ever)
{
    h_assigned a[1024];
    size_t n = h_parse_assigned(p, topic, a, 1024);
    if (n > 1024)
        h_stage_fail(p, "more than 1024 assignment lines");
    unsigned m = 0;
    for (size_t i = 0; i < n; i++) {
        if (a[i].partition >= 32)
            h_stage_fail(p, "partition %d: masks hold 32", a[i].partition);
        unsigned bit = 1u << a[i].partition;
        m = a[i].revoked && !ever ? m & ~bit : m | bit;
    }
    return m;
}

void h_wait_holds(h_proc *p, const char *topic, unsigned want,
                  int timeout_ms, const char *who)
{
    double t0 = h_now_s();
    for (unsigned m; ((m = h_assigned_mask(p, topic, false)) & want) != want;) {
        char while_[160];
        snprintf(while_, sizeof(while_), "while %s took partitions 0x%x of "
                 "%s over", who, want, topic);
        h_stage_alive(p, while_);
        if ((h_now_s() - t0) * 1000 > timeout_ms)
            h_stage_fail(p, "%s did not get partitions 0x%x of %s within %d "
                         "ms (holds 0x%x)", who, want, topic, timeout_ms, m);
        h_nap(20);
    }
}

size_t h_count_restored(h_proc *p, const char *topic)
{
    h_assigned a[1024];
    size_t n = h_parse_assigned(p, topic, a, 1024), restored = 0;
    for (size_t i = 0; i < n && i < 1024; i++)
        restored += !a[i].revoked && a[i].ckpt > 0;
    return restored;
}

/* ---- its endpoint ------------------------------------------------------ */

unsigned h_stage_metrics_port(h_proc *p, int timeout_ms)
{
    static const char line[] = "msg=\"metrics listening\"";
    h_wait_said(p, line, 1, timeout_ms);
    long long port = h_log_int(strstr(h_process_stderr(p), line), "port");
    if (port <= 0 || port > 65535)
        h_stage_fail(p, "no port in the \"metrics listening\" line");
    return (unsigned)port;
}

/* GET path into r; fails the test, with p's stderr, when nothing answers. */
static void get_must(h_proc *p, unsigned port, const char *path,
                     h_http_resp *r)
{
    char err[512];
    if (h_http_request(port, "GET", path, r, err, sizeof(err)) != 0)
        h_stage_fail(p, "GET %s: %s", path, err);
}

double h_stage_start_reason(h_proc *p, unsigned port,
                            const char *const *errors, int timeout_ms,
                            char *why, size_t why_size)
{
    double t0 = h_now_s();
    h_http_resp r;
    get_must(p, port, "/healthz", &r);
    if (r.status != 200 || strcmp(r.body, "ok\n") != 0)
        h_stage_fail(p, "/healthz while starting: %d '%s', want 200 'ok'",
                     r.status, r.body);
    h_http_resp_free(&r);
    static const char starting[] = "starting: connecting to brokers";
    for (;;) {
        get_must(p, port, "/ready", &r);
        if (r.status != 503 || strncmp(r.body, starting, strlen(starting)))
            h_stage_fail(p, "/ready while no broker lets it start: %d '%s', "
                         "want 503 '%s...'", r.status, r.body, starting);
        snprintf(why, why_size, "%.*s", (int)strcspn(r.body, "\n"), r.body);
        h_http_resp_free(&r);
        for (size_t i = 0; errors[i]; i++)
            if (strstr(why, errors[i]))
                return h_now_s() - t0;
        if ((h_now_s() - t0) * 1000 > timeout_ms)
            h_stage_fail(p, "/ready names no error of librdkafka %d ms "
                         "after the port was known: '%s'", timeout_ms, why);
        h_nap(50);
    }
}
