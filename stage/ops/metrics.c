/*
 * metrics.c -- see metrics.h.  Rendering reads only what the stage
 * publishes for other threads (atomic counters and a locked per-partition
 * snapshot), so a scrape never blocks the record path.
 */
#include "ops/metrics.h"
#include "base/log.h"
#include "ops/metrics_gate.h"
#include "ops/metrics_guard.h"

#include <bloomfilters.h>

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct bs_metrics {
    struct MHD_Daemon *daemon;
    bs_stage *stage;
    bs_metrics_guard *guard; /* NULL: plain HTTP, no auth */
    bs_metrics_gate *gate;   /* who is let in, for how long (metrics_gate.h) */
    unsigned port;
    /* libmicrohttpd's messages: the first one while it starts (why it
     * could not), logged at debug level once it runs (handshakes that
     * failed: a plain-HTTP client on the TLS port, a scanner). */
    atomic_bool running;
    char start_err[BS_ERRSTR_SIZE];
};

/* -- a bounded growable text buffer ---------------------------------------- */

#define OUT_CAP (16u << 20) /* a scrape larger than this is cut */

typedef struct out {
    char *buf;
    size_t len, cap;
    bool full;
} out;

static void outf(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void outf(out *o, const char *fmt, ...)
{
    if (o->full)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            o->full = true;
            return;
        }
        if ((size_t)n < o->cap - o->len) {
            o->len += (size_t)n;
            return;
        }
        size_t cap = o->cap * 2;
        char *nb = cap <= OUT_CAP ? realloc(o->buf, cap) : NULL;
        if (!nb) {
            o->full = true;
            o->buf[o->len] = '\0';
            return;
        }
        o->buf = nb;
        o->cap = cap;
    }
}

static void head(out *o, const char *name, const char *type, const char *help)
{
    outf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void counter(out *o, const char *name, const char *help, uint64_t v)
{
    head(o, name, "counter", help);
    outf(o, "%s %llu\n", name, (unsigned long long)v);
}

static void gauge(out *o, const char *name, const char *help, double v)
{
    head(o, name, "gauge", help);
    outf(o, "%s %.17g\n", name, v);
}

/* Per blocklist: entries for every list; the live lists' updates, bad
 * records, saturation, rebuilds, age of the last change and lag. */
static void render_lists(out *o, bs_stage *s)
{
    size_t n = bs_stage_blocklists(s);
    bs_list_metrics lm;
    if (n == 0)
        return;
    head(o, "bloomstage_blocklist_entries", "gauge",
         "Entries of the blocklist (inserts, for a filter file).");
    for (size_t i = 0; i < n; i++)
        if (bs_stage_blocklist_metrics(s, i, &lm))
            outf(o, "bloomstage_blocklist_entries{list=\"%s\"} %llu\n",
                 bs_stage_blocklist_name(s, i),
                 (unsigned long long)lm.entries);
    static const struct {
        const char *name, *type, *help;
    } fam[] = {
        {"bloomstage_blocklist_updates_total", "counter",
         "List-topic records applied to the live blocklist."},
        {"bloomstage_blocklist_skipped_total", "counter",
         "Bad list-topic records skipped, by reason."},
        {"bloomstage_blocklist_saturated_counters", "gauge",
         "Counters of the live blocklist's counting filter stuck at 15."},
        {"bloomstage_blocklist_rebuilds_total", "counter",
         "Rebuilds of the live blocklist's filter (grown, unsaturated)."},
        {"bloomstage_blocklist_seconds_since_update", "gauge",
         "Seconds since the live blocklist last changed (or was loaded)."},
        {"bloomstage_blocklist_lag", "gauge",
         "List-topic records not applied yet (-1 unknown)."},
        {"bloomstage_blocklist_loaded", "gauge",
         "1 once the list topic was read to its end at start-up."},
    };
    for (size_t f = 0; f < sizeof(fam) / sizeof(fam[0]); f++) {
        bool any = false;
        for (size_t i = 0; i < n; i++) {
            if (!bs_stage_blocklist_metrics(s, i, &lm) || !lm.live)
                continue;
            if (!any)
                head(o, fam[f].name, fam[f].type, fam[f].help);
            any = true;
            const char *name = bs_stage_blocklist_name(s, i);
            switch (f) {
            case 0:
                outf(o, "%s{list=\"%s\"} %llu\n", fam[f].name, name,
                     (unsigned long long)lm.updates);
                break;
            case 1:
                for (int k = 0; k < BS_LIST_METRICS_NBAD; k++)
                    outf(o, "%s{list=\"%s\",reason=\"%s\"} %llu\n",
                         fam[f].name, name, lm.skipped_reason[k],
                         (unsigned long long)lm.skipped[k]);
                break;
            case 2:
                outf(o, "%s{list=\"%s\"} %llu\n", fam[f].name, name,
                     (unsigned long long)lm.saturated);
                break;
            case 3:
                outf(o, "%s{list=\"%s\"} %llu\n", fam[f].name, name,
                     (unsigned long long)lm.rebuilds);
                break;
            case 4:
                outf(o, "%s{list=\"%s\"} %.3f\n", fam[f].name, name,
                     lm.since_update);
                break;
            case 5:
                outf(o, "%s{list=\"%s\"} %lld\n", fam[f].name, name,
                     (long long)lm.lag);
                break;
            default:
                outf(o, "%s{list=\"%s\"} %d\n", fam[f].name, name,
                     lm.caught_up ? 1 : 0);
            }
        }
    }
}

/* The audit of all assigned partitions together: the measured rate and
 * its Wilson 95% interval from the summed counts, beside dedup.fpr, and
 * the filters' bytes per key. */
static void render_audit_totals(out *o, bs_stage *s, const bs_stage_stats *st)
{
    double lo, hi;
    bf_wilson95(st->audit_false_positives, st->audit_lookups, &lo, &hi);
    gauge(o, "bloomstage_audit_all_fpr", "False positives per sampled "
          "lookup of an unseen key, all partitions: the filters' measured "
          "rate (0 before any lookup).",
          st->audit_lookups ? (double)st->audit_false_positives /
                                  (double)st->audit_lookups
                            : 0);
    gauge(o, "bloomstage_audit_all_fpr_low", "Low end of its Wilson 95% "
          "interval (0 before any lookup).", lo);
    gauge(o, "bloomstage_audit_all_fpr_high", "High end of its Wilson 95% "
          "interval (1 before any lookup).", hi);
    gauge(o, "bloomstage_dedup_fpr", "dedup.fpr: the false-positive rate "
          "the filters are built to stay under.", bs_stage_fpr_bound(s));
    gauge(o, "bloomstage_dedup_bytes_per_key", "Memory of the "
          "dedup filters per key they hold, all partitions (0 before any "
          "key).", st->filter_inserts ? (double)st->filter_bytes /
                                            (double)st->filter_inserts
                                      : 0);
}

/* The audit's figures of each partition (those with a sample). */
static void render_audit_parts(out *o, const bs_part_metrics *pm, size_t n)
{
    static const struct {
        const char *name, *help;
    } fam[] = {
        {"bloomstage_audit_lookups",
         "Sampled lookups of keys the partition's audit sample had not seen "
         "(restored with its checkpoint)."},
        {"bloomstage_audit_false_positives",
         "Of those, the ones the filter called seen: false positives."},
        {"bloomstage_audit_rescued",
         "Sampled false positives forwarded since the partition was "
         "assigned (dedup.audit.rescue)."},
        {"bloomstage_audit_fpr",
         "False positives per sampled lookup: the filter's measured rate "
         "(0 before any lookup)."},
        {"bloomstage_audit_fpr_low",
         "Low end of the measured rate's Wilson 95% interval."},
        {"bloomstage_audit_fpr_high",
         "High end of the measured rate's Wilson 95% interval."},
        {"bloomstage_audit_memory_bytes",
         "Memory of the partition's audit sample."},
    };
    for (size_t f = 0; f < sizeof(fam) / sizeof(fam[0]); f++) {
        head(o, fam[f].name, "gauge", fam[f].help);
        for (size_t i = 0; i < n; i++) {
            const bs_part_metrics *p = &pm[i];
            if (!p->audit)
                continue;
            double v;
            switch (f) {
            case 0: v = (double)p->audit_lookups; break;
            case 1: v = (double)p->audit_false_positives; break;
            case 2: v = (double)p->audit_rescued; break;
            case 3: v = p->audit_fpr; break;
            case 4: v = p->audit_fpr_low; break;
            case 5: v = p->audit_fpr_high; break;
            default: v = (double)p->audit_bytes; break;
            }
            outf(o, "%s{topic=\"%s\",partition=\"%d\"} %.17g\n", fam[f].name,
                 p->topic, (int)p->partition, v);
        }
    }
}

/* The stage-wide families: the counters' table, drops by reason, the
 * lists', the round histogram, the gauges' table, readiness and the audit
 * totals. */
static void render_totals(out *o, bs_stage *s)
{
    bs_stage_stats st;
    bs_stage_stats_get(s, &st);
    for (size_t i = 0; i < bs_ncounters; i++)
        if (bs_counter_infos[i].kind == BS_COUNTER && bs_counter_infos[i].prom)
            counter(o, bs_counter_infos[i].prom, bs_counter_infos[i].help,
                    bs_stats_value(&st, i));
    head(o, "bloomstage_records_dropped_total", "counter",
         "Records dropped, by reason (and blocklist).");
    outf(o, "bloomstage_records_dropped_total{reason=\"duplicate\"} %llu\n",
         (unsigned long long)st.dropped_duplicate);
    outf(o, "bloomstage_records_dropped_total{reason=\"unproducible\"} "
         "%llu\n", (unsigned long long)st.dropped_unproducible);
    for (size_t i = 0; i < bs_stage_blocklists(s); i++)
        outf(o, "bloomstage_records_dropped_total{reason=\"blocklist\","
             "list=\"%s\"} %llu\n", bs_stage_blocklist_name(s, i),
             (unsigned long long)bs_stage_blocklist_drops(s, i));
    render_lists(o, s);
    bs_stage_hist h;
    bs_stage_checkpoint_hist(s, &h);
    head(o, "bloomstage_checkpoint_duration_seconds", "histogram",
         "Duration of checkpoint rounds (flush, write, fsync, commit).");
    for (int b = 0; b < BS_CKPT_BUCKETS; b++)
        outf(o, "bloomstage_checkpoint_duration_seconds_bucket{le=\"%g\"} "
             "%llu\n", bs_ckpt_bucket_bounds[b],
             (unsigned long long)h.buckets[b]);
    outf(o, "bloomstage_checkpoint_duration_seconds_bucket{le=\"+Inf\"} "
         "%llu\n", (unsigned long long)h.count);
    outf(o, "bloomstage_checkpoint_duration_seconds_sum %.6f\n", h.sum);
    outf(o, "bloomstage_checkpoint_duration_seconds_count %llu\n",
         (unsigned long long)h.count);
    double ph[BS_NPHASES];
    bs_stage_round_phases(s, ph);
    head(o, "bloomstage_checkpoint_phase_seconds_total", "counter",
         "Time the checkpoint rounds of bloomstage_checkpoint_duration_"
         "seconds spent in each phase: flush, watermarks, write, sync, "
         "send_offsets, commit, other.");
    for (int k = 0; k < BS_NPHASES; k++)
        outf(o, "bloomstage_checkpoint_phase_seconds_total{phase=\"%s\"} "
             "%.6f\n", bs_round_phase_names[k], ph[k]);
    for (size_t i = 0; i < bs_ncounters; i++)
        if (bs_counter_infos[i].kind == BS_GAUGE && bs_counter_infos[i].prom)
            gauge(o, bs_counter_infos[i].prom, bs_counter_infos[i].help,
                  (double)bs_stats_value(&st, i));
    gauge(o, "bloomstage_ready", "1 when /ready answers 200.",
          bs_stage_ready(s, NULL, 0) ? 1 : 0);
    gauge(o, "bloomstage_checkpoint_interval_seconds",
          "checkpoint.interval.ms, in seconds: what the alert rules "
          "measure a commit's age against.", bs_stage_checkpoint_interval_s(s));
    render_audit_totals(o, s, &st);
}

/* The per-partition gauges, in their order. */
static const struct {
    const char *name, *help;
} part_gauges[] = {
    {"bloomstage_filter_layers", "Layers of the partition's dedup filter."},
    {"bloomstage_filter_bits", "Bits of the partition's dedup filter."},
    {"bloomstage_filter_fill_ratio", "Fraction of the filter's bits set."},
    {"bloomstage_filter_estimated_keys",
     "Distinct keys estimated from the filter's bits."},
    {"bloomstage_filter_estimated_fpr",
     "False-positive rate estimated from the filter's fill."},
    {"bloomstage_consumer_lag",
     "Records behind the partition's end (librdkafka statistics)."},
    {"bloomstage_filter_bytes", "Memory of the partition's dedup filter."},
    {"bloomstage_window_generations",
     "dedup.window.ms: generations (filters of window/G each) live."},
    {"bloomstage_window_stream_time_seconds",
     "dedup.window.ms: the partition's stream time (largest record "
     "timestamp seen), seconds since the epoch."},
    {"bloomstage_window_oldest_seconds",
     "dedup.window.ms: where the oldest live generation starts, seconds "
     "since the epoch: keys from before it are forgotten."},
    {"bloomstage_filter_bytes_per_key",
     "Memory of the partition's dedup filter per key it holds."},
    {"bloomstage_last_commit_timestamp_seconds",
     "Unix time of the partition's last offset commit by this stage "
     "(of its assignment before the first)."},
};

/* Gauge g of part_gauges for p into *v; false when it is not known yet,
 * there is no window, or no key. */
static bool part_gauge(size_t g, const bs_part_metrics *p, double *v)
{
    switch (g) {
    case 0: *v = p->layers; return true;
    case 1: *v = (double)p->bits; return true;
    case 2: *v = p->fill; return true;
    case 3: *v = p->est_keys; return true;
    case 4: *v = p->est_fpr; return true;
    case 5: *v = (double)p->lag; return p->lag >= 0;
    case 6: *v = (double)p->bytes; return true;
    case 7: *v = p->generations; return p->stream_time_ms >= 0;
    case 8: *v = (double)p->stream_time_ms / 1000.0;
        return p->stream_time_ms >= 0;
    case 9: *v = (double)p->oldest_ms / 1000.0; return p->oldest_ms >= 0;
    case 10:
        *v = p->inserts ? (double)p->bytes / (double)p->inserts : 0;
        return p->inserts > 0;
    default: *v = p->committed_at; return true;
    }
}

/* The partitions' gauges and audit figures, from the published view. */
static void render_parts(out *o, bs_stage *s)
{
    size_t n = bs_stage_partitions(s, NULL, 0);
    bs_part_metrics *pm = n ? calloc(n, sizeof(*pm)) : NULL;
    if (pm) {
        /* A rebalance may add partitions between the two calls: only as
         * many as the buffer holds were copied. */
        size_t got = bs_stage_partitions(s, pm, n);
        n = got < n ? got : n;
    } else {
        n = 0;
    }
    for (size_t g = 0; g < sizeof(part_gauges) / sizeof(part_gauges[0]);
         g++) {
        head(o, part_gauges[g].name, "gauge", part_gauges[g].help);
        for (size_t i = 0; i < n; i++) {
            double v;
            if (part_gauge(g, &pm[i], &v))
                outf(o, "%s{topic=\"%s\",partition=\"%d\"} %.17g\n",
                     part_gauges[g].name, pm[i].topic, (int)pm[i].partition,
                     v);
        }
    }
    render_audit_parts(o, pm, n);
    free(pm);
}

char *bs_metrics_render(bs_stage *s)
{
    out o = {malloc(65536), 0, 65536, false};
    if (!o.buf)
        return NULL;
    o.buf[0] = '\0';
    render_totals(&o, s);
    render_parts(&o, s);
    return o.buf;
}

/* -- HTTP ------------------------------------------------------------------ */

#define IDLE_S 10u /* an idle scraper's connection is closed: it holds a slot */

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code,
                             const char *type, char *body, bool owned)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        strlen(body), body, owned ? MHD_RESPMEM_MUST_FREE
                                  : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        if (owned)
            free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

/* 401 with WWW-Authenticate: Basic (no credentials, or wrong ones: the
 * answer does not say which). */
static enum MHD_Result refuse(struct MHD_Connection *c)
{
    static char body[] = "unauthorized\n";
    struct MHD_Response *r = MHD_create_response_from_buffer(
        strlen(body), body, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "text/plain");
    enum MHD_Result ret =
        MHD_queue_basic_auth_fail_response(c, "bloomstage", r);
    MHD_destroy_response(r);
    return ret;
}

/* libmicrohttpd hands its own format strings here. */
__attribute__((format(printf, 2, 0))) static void
mhd_log(void *cls, const char *fmt, va_list ap)
{
    bs_metrics *m = cls;
    char msg[256];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    msg[strcspn(msg, "\n")] = '\0';
    if (!atomic_load(&m->running)) {
        if (!m->start_err[0])
            snprintf(m->start_err, sizeof(m->start_err), "%s", msg);
        return;
    }
    char q[300];
    bs_log(BS_LOG_DEBUG, "metrics endpoint", "message=%s",
           bs_log_quote(msg, q, sizeof(q)));
}

/* An IPv4 or IPv6 loopback address. */
static bool loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >>
                24) == 127;
    return sa->sa_family == AF_INET6 &&
           IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
}

/* 429: the client failed too often, or too many checks wait. */
static enum MHD_Result too_many(struct MHD_Connection *c)
{
    static char body[] = "too many failed logins from this address, or too "
                         "many at once: retry later\n";
    struct MHD_Response *r = MHD_create_response_from_buffer(
        strlen(body), body, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "text/plain");
    MHD_add_response_header(r, "Retry-After", "2");
    enum MHD_Result ret = MHD_queue_response(c, 429, r);
    MHD_destroy_response(r);
    return ret;
}

/* A request that needs credentials: its check, done by the gate's workers
 * while the connection is suspended (libmicrohttpd serves the others). */
typedef struct request {
    bs_gate_check *check; /* the worker's, until read */
    bs_gate_verdict verdict;
} request;

static void resume(void *arg)
{
    MHD_resume_connection(arg);
}

static bs_gate_conn *gate_conn(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* The credentials' verdict for c: on the first call the connection is
 * suspended and the check handed to the gate (WAIT: the handler returns
 * and is called again once it is resumed); on that call, the verdict. */
static bs_gate_verdict authorize(bs_metrics *m, struct MHD_Connection *c,
                                 void **con_cls)
{
    request *rq = *con_cls;
    if (rq) {
        bs_gate_verdict v = rq->verdict;
        if (rq->check) {
            v = bs_gate_check_result(m->gate, rq->check);
            bs_gate_check_free(rq->check);
            rq->check = NULL;
        }
        return v;
    }
    if (!(rq = calloc(1, sizeof(*rq))))
        return BS_GATE_LIMITED;
    *con_cls = rq;
    char *pass = NULL, *user = MHD_basic_auth_get_username_password(c, &pass);
    /* Suspended before the check is queued: the worker's resume never
     * comes first. */
    MHD_suspend_connection(c);
    rq->verdict = bs_metrics_gate_check(m->gate, gate_conn(c), user, pass,
                                        resume, c, &rq->check);
    if (pass)
        explicit_bzero(pass, strlen(pass));
    MHD_free(user);
    MHD_free(pass);
    if (rq->verdict != BS_GATE_WAIT)
        MHD_resume_connection(c);
    return BS_GATE_WAIT;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c,
                              const char *url, const char *method,
                              const char *version, const char *upload,
                              size_t *upload_size, void **con_cls)
{
    (void)version;
    (void)upload;
    (void)upload_size;
    bs_metrics *m = cls;
    if (bs_metrics_guard_needs_auth(m->guard, url)) {
        switch (authorize(m, c, con_cls)) {
        case BS_GATE_WAIT:
            return MHD_YES; /* called again once resumed */
        case BS_GATE_LIMITED:
            return too_many(c);
        case BS_GATE_DENY:
            return refuse(c);
        case BS_GATE_ALLOW:
            break;
        }
    }
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return reply(c, 405, "text/plain", "method not allowed\n", false);
    if (!strcmp(url, "/metrics")) {
        char *body = bs_metrics_render(m->stage);
        if (!body)
            return reply(c, 500, "text/plain", "out of memory\n", false);
        return reply(c, 200, "text/plain; version=0.0.4; charset=utf-8", body,
                     true);
    }
    if (!strcmp(url, "/healthz"))
        return reply(c, 200, "text/plain", "ok\n", false);
    if (!strcmp(url, "/ready")) {
        /* Room for a start-up step and librdkafka's error text. */
        char why[BS_ERRSTR_SIZE], *body = malloc(sizeof(why) + 1);
        if (!body)
            return MHD_NO;
        bool ok = bs_stage_ready(m->stage, why, sizeof(why));
        snprintf(body, sizeof(why) + 1, "%s\n", why);
        return reply(c, ok ? 200 : 503, "text/plain", body, true);
    }
    return reply(c, 404, "text/plain",
                 "not found: try /metrics, /healthz, /ready\n", false);
}

static enum MHD_Result admit(void *cls, const struct sockaddr *addr,
                             socklen_t addrlen)
{
    (void)addrlen;
    bs_metrics *m = cls;
    return bs_metrics_gate_admit(m->gate, addr) ? MHD_YES : MHD_NO;
}

static void connection_event(void *cls, struct MHD_Connection *c,
                             void **socket_context,
                             enum MHD_ConnectionNotificationCode toe)
{
    bs_metrics *m = cls;
    if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        bs_metrics_gate_closed(m->gate, *socket_context);
        *socket_context = NULL;
        return;
    }
    const union MHD_ConnectionInfo *fd =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *addr =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    *socket_context = fd ? bs_metrics_gate_opened(m->gate, fd->connect_fd,
                                                  addr ? addr->client_addr
                                                       : NULL)
                         : NULL;
}

/* An exchange ended: the request's state freed, the next one's deadline
 * started. */
static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    (void)toe;
    bs_metrics *m = cls;
    request *rq = *con_cls;
    if (rq) {
        bs_gate_check_free(rq->check);
        free(rq);
        *con_cls = NULL;
    }
    bs_metrics_gate_served(m->gate, gate_conn(c));
}

bs_metrics *bs_metrics_start(const char *listen, bs_metrics_guard *guard,
                             bs_stage *stage, char *errstr,
                             size_t errstr_size)
{
    char host[256] = "", port[16] = "";
    const char *colon = strrchr(listen, ':');
    if (!colon || !colon[1] || strlen(colon + 1) >= sizeof(port) ||
        (size_t)(colon - listen) >= sizeof(host)) {
        snprintf(errstr, errstr_size, "metrics.listen '%s': expected "
                 "HOST:PORT, :PORT or [V6]:PORT", listen);
        bs_metrics_guard_free(guard);
        return NULL;
    }
    memcpy(host, listen, (size_t)(colon - listen));
    snprintf(port, sizeof(port), "%s", colon + 1);
    if (host[0] == '[' && host[strlen(host) - 1] == ']') {
        memmove(host, host + 1, strlen(host));
        host[strlen(host) - 1] = '\0';
    }
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    int gerr = getaddrinfo(host[0] ? host : NULL, port, &hints, &ai);
    if (gerr) {
        snprintf(errstr, errstr_size, "metrics.listen '%s': %s", listen,
                 gai_strerror(gerr));
        bs_metrics_guard_free(guard);
        return NULL;
    }
    bs_metrics *m = calloc(1, sizeof(*m));
    if (!m) {
        freeaddrinfo(ai);
        snprintf(errstr, errstr_size, "out of memory");
        bs_metrics_guard_free(guard);
        return NULL;
    }
    m->stage = stage;
    m->guard = guard;
    if (!(m->gate = bs_metrics_gate_new(guard, errstr, errstr_size))) {
        freeaddrinfo(ai);
        bs_metrics_guard_free(guard);
        free(m);
        return NULL;
    }
    const char *cert = bs_metrics_guard_cert(guard);
    bool clear_auth = bs_metrics_guard_users(guard) && !cert &&
                      !loopback(ai->ai_addr);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG |
                     MHD_ALLOW_SUSPEND_RESUME | (cert ? MHD_USE_TLS : 0) |
                     (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    /* The logger first (libmicrohttpd wants it so); without TLS the two
     * PEM options end the list early (as END). */
    m->daemon = MHD_start_daemon(
        flags, 0, admit, m, handle, m, MHD_OPTION_EXTERNAL_LOGGER, mhd_log,
        m, MHD_OPTION_SOCK_ADDR, ai->ai_addr, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)BS_GATE_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT, IDLE_S,
        MHD_OPTION_NOTIFY_CONNECTION, connection_event, m,
        MHD_OPTION_NOTIFY_COMPLETED, completed, m,
        cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, cert,
        MHD_OPTION_HTTPS_MEM_KEY, bs_metrics_guard_key(guard),
        MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!m->daemon) {
        if (cert && m->start_err[0])
            snprintf(errstr, errstr_size, "metrics.listen '%s': cannot "
                     "serve TLS with metrics.tls.cert.path and "
                     "metrics.tls.key.path (do they belong together?): "
                     "libmicrohttpd: %s", listen, m->start_err);
        else
            snprintf(errstr, errstr_size, "metrics.listen '%s': cannot "
                     "listen (address in use or not local?)%s%s", listen,
                     m->start_err[0] ? ": libmicrohttpd: " : "",
                     m->start_err);
        bs_metrics_gate_destroy(m->gate);
        bs_metrics_guard_free(guard);
        free(m);
        return NULL;
    }
    atomic_store(&m->running, true);
    const union MHD_DaemonInfo *info =
        MHD_get_daemon_info(m->daemon, MHD_DAEMON_INFO_BIND_PORT);
    m->port = info ? info->port : 0;
    bs_log(BS_LOG_INFO, "metrics listening", "address=%s port=%u tls=%s "
           "users=%zu", host[0] ? host : "*", m->port, cert ? "on" : "off",
           bs_metrics_guard_users(guard));
    if (clear_auth)
        bs_log(BS_LOG_WARN, "metrics basic auth over plain HTTP",
               "address=%s hint=\"passwords cross the network in clear: "
               "set metrics.tls.cert.path and metrics.tls.key.path\"",
               host[0] ? host : "*");
    return m;
}


void bs_metrics_stop(bs_metrics *m)
{
    if (!m)
        return;
    /* The gate's waiting checks resume their connections first: the
     * daemon then stops with none suspended. */
    bs_metrics_gate_stop(m->gate);
    MHD_stop_daemon(m->daemon);
    bs_metrics_gate_destroy(m->gate);
    bs_metrics_guard_free(m->guard);
    free(m);
}
