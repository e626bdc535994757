/*
 * kafka.c -- see kafka.h.
 */
#include "kafka.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- librdkafka's log, kept in a ring ---------------------------------- */

#define KAFKA_LOG_LINES 256

static pthread_mutex_t kafka_log_lock = PTHREAD_MUTEX_INITIALIZER;
static char *kafka_log[KAFKA_LOG_LINES];
static size_t kafka_log_next;  /* total lines ever added */
static size_t kafka_log_first; /* first line not yet dumped */

/* Called from librdkafka's threads. */
static void kafka_log_cb(const rd_kafka_t *rk, int level, const char *fac,
                         const char *buf)
{
    char *line = NULL;
    if (asprintf(&line, "%%%d|%s|%s|%s", level, rk ? rd_kafka_name(rk) : "-",
                 fac, buf) < 0)
        return;
    pthread_mutex_lock(&kafka_log_lock);
    size_t slot = kafka_log_next % KAFKA_LOG_LINES;
    free(kafka_log[slot]);
    kafka_log[slot] = line;
    kafka_log_next++;
    pthread_mutex_unlock(&kafka_log_lock);
}

void h_dump_kafka_log(void)
{
    pthread_mutex_lock(&kafka_log_lock);
    size_t first = kafka_log_first;
    if (kafka_log_next - first > KAFKA_LOG_LINES) {
        fprintf(stderr, "support: (%zu earlier librdkafka log lines "
                "dropped)\n", kafka_log_next - first - KAFKA_LOG_LINES);
        first = kafka_log_next - KAFKA_LOG_LINES;
    }
    if (first < kafka_log_next)
        fprintf(stderr, "support: librdkafka log since the last dump:\n");
    for (size_t i = first; i < kafka_log_next; i++)
        fprintf(stderr, "  %s\n", kafka_log[i % KAFKA_LOG_LINES]);
    kafka_log_first = kafka_log_next;
    pthread_mutex_unlock(&kafka_log_lock);
}

/* ---- configurations ---------------------------------------------------- */

static void conf_set(rd_kafka_conf_t *conf, const char *key, const char *val)
{
    char errstr[256];
    if (rd_kafka_conf_set(conf, key, val, errstr, sizeof(errstr)) !=
        RD_KAFKA_CONF_OK) {
        /* the caller's own settings: a bug there, not in what is tested */
        fprintf(stderr, "support: %s=%s: %s\n", key, val, errstr);
        abort();
    }
}

rd_kafka_conf_t *h_conf_pairs(rd_kafka_conf_t *conf, ...)
{
    if (!conf)
        conf = rd_kafka_conf_new();
    va_list ap;
    va_start(ap, conf);
    const char *k;
    while ((k = va_arg(ap, const char *)))
        conf_set(conf, k, va_arg(ap, const char *));
    va_end(ap);
    return conf;
}

int h_conf_kv(rd_kafka_conf_t *conf, const char *const *kv)
{
    char errstr[512];
    for (size_t i = 0; kv && kv[i]; i++) {
        const char *eq = strchr(kv[i], '=');
        if (!eq)
            return h_fail("setting '%s' is not key=value", kv[i]);
        char *key = h_strdupf("%.*s", (int)(eq - kv[i]), kv[i]);
        rd_kafka_conf_res_t r =
            rd_kafka_conf_set(conf, key, eq + 1, errstr, sizeof(errstr));
        free(key);
        if (r != RD_KAFKA_CONF_OK)
            return h_fail("setting '%s': %s", kv[i], errstr);
    }
    return 0;
}

/* Settings h_kafka_conf adds for a bootstrap list (h_kafka_conf_for). */
#define CLUSTER_CONFS 4
static struct {
    char *bootstraps;
    char **kv; /* NULL-terminated copies */
} cluster_conf[CLUSTER_CONFS];

static void cluster_conf_clear(size_t i)
{
    for (size_t k = 0; cluster_conf[i].kv && cluster_conf[i].kv[k]; k++)
        free(cluster_conf[i].kv[k]);
    free(cluster_conf[i].kv);
    free(cluster_conf[i].bootstraps);
    cluster_conf[i].kv = NULL;
    cluster_conf[i].bootstraps = NULL;
}

void h_kafka_conf_for(const char *bootstraps, const char *const *kv)
{
    size_t i = 0, n = 0;
    while (i < CLUSTER_CONFS && (!cluster_conf[i].bootstraps ||
                                 strcmp(cluster_conf[i].bootstraps,
                                        bootstraps)))
        i++;
    if (i < CLUSTER_CONFS)
        cluster_conf_clear(i);
    if (!kv)
        return;
    for (i = 0; i < CLUSTER_CONFS && cluster_conf[i].bootstraps; i++)
        ;
    if (i == CLUSTER_CONFS) {
        /* the caller's own bookkeeping: a bug there, not in what is tested */
        fprintf(stderr, "support: h_kafka_conf_for: more than %d clusters\n",
                CLUSTER_CONFS);
        abort();
    }
    while (kv[n])
        n++;
    cluster_conf[i].kv = h_xcalloc(n + 1, sizeof(char *));
    for (size_t k = 0; k < n; k++)
        cluster_conf[i].kv[k] = h_xstrdup(kv[k]);
    cluster_conf[i].bootstraps = h_xstrdup(bootstraps);
}

rd_kafka_conf_t *h_kafka_conf(const char *bootstraps)
{
    rd_kafka_conf_t *conf = h_conf_pairs(
        NULL, "bootstrap.servers", bootstraps, "client.id", "bloomstage-test",
        "log_level", "6", "socket.timeout.ms", "5000",
        "socket.connection.setup.timeout.ms", "5000", "reconnect.backoff.ms",
        "50", "reconnect.backoff.max.ms", "500",
        "topic.metadata.refresh.interval.ms", "5000",
        "topic.metadata.refresh.fast.interval.ms", "50", NULL);
    rd_kafka_conf_set_log_cb(conf, kafka_log_cb);
    for (size_t i = 0; i < CLUSTER_CONFS; i++)
        if (cluster_conf[i].bootstraps &&
            !strcmp(cluster_conf[i].bootstraps, bootstraps) &&
            h_conf_kv(conf, (const char *const *)cluster_conf[i].kv)) {
            fprintf(stderr, "support: %s\n", h_last_error());
            abort();
        }
    return conf;
}

/* A random-enough group id, never reused by this process. */
static char *random_group(void)
{
    static unsigned counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return h_strdupf("bloomstage-test-%d-%u-%ld", (int)getpid(), ++counter,
                     ts.tv_nsec);
}

/* rd_kafka_new, taking conf; NULL with h_last_error() on failure. */
static rd_kafka_t *new_client(rd_kafka_type_t type, rd_kafka_conf_t *conf,
                              const char *what)
{
    char errstr[512];
    rd_kafka_t *rk = rd_kafka_new(type, conf, errstr, sizeof(errstr));
    if (!rk) {
        rd_kafka_conf_destroy(conf);
        h_fail("rd_kafka_new(%s): %s", what, errstr);
    }
    return rk;
}

/* A consumer that never subscribes: it joins no group, commits nothing on
 * its own and reads only what it is assigned.  conf_kv: extra settings. */
static rd_kafka_t *new_consumer(const char *bootstraps, const char *group,
                                const char *const *conf_kv)
{
    rd_kafka_conf_t *conf = h_conf_pairs(
        h_kafka_conf(bootstraps), "group.id", group, "enable.auto.commit",
        "false", "enable.auto.offset.store", "false",
        "allow.auto.create.topics", "false", "auto.offset.reset", "earliest",
        "enable.partition.eof", "true", "fetch.wait.max.ms", "100", NULL);
    if (h_conf_kv(conf, conf_kv)) {
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    return new_client(RD_KAFKA_CONSUMER, conf, "consumer");
}

static void close_consumer(rd_kafka_t *rk)
{
    if (!rk)
        return;
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
}

/* ---- records ----------------------------------------------------------- */

h_record h_rec(const char *key, const char *value)
{
    return (h_record){.key = key,
                      .key_len = key ? strlen(key) : 0,
                      .value = value,
                      .value_len = value ? strlen(value) : 0,
                      .partition = RD_KAFKA_PARTITION_UA,
                      .offset = -1,
                      .timestamp = -1};
}

void h_record_list_free(h_record_list *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++)
        free(l->recs[i].owned);
    free(l->recs);
    *l = (h_record_list){0};
}

size_t h_record_list_count_partition(const h_record_list *l, int32_t p)
{
    size_t c = 0;
    for (size_t i = 0; i < l->n; i++)
        c += l->recs[i].partition == p;
    return c;
}

size_t h_record_list_count_header(const h_record_list *l, const char *name,
                                  const char *value)
{
    size_t c = 0;
    for (size_t i = 0; i < l->n; i++) {
        const h_header *h = h_header_last(&l->recs[i], name);
        c += h && h->value && !strcmp(h->value, value);
    }
    return c;
}

const h_header *h_header_last(const h_record *r, const char *name)
{
    const h_header *h = NULL;
    for (size_t i = 0; i < r->n_headers; i++)
        if (!strcmp(r->headers[i].name, name))
            h = &r->headers[i];
    return h;
}

const char *h_header_str(const h_record *r, const char *name, char *buf,
                         size_t size)
{
    const h_header *h = h_header_last(r, name);
    buf[0] = '\0';
    if (h && h->value)
        snprintf(buf, size, "%.*s", (int)h->value_len,
                 (const char *)h->value);
    return buf;
}

/* ---- producing --------------------------------------------------------- */

struct h_producer {
    rd_kafka_t *rk;
    int queue_full_ms;
    size_t sent, delivered, failed;
    char first_error[512];
};

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    h_producer *p = opaque;
    if (!m->err) {
        p->delivered++;
        return;
    }
    if (p->failed++ == 0)
        snprintf(p->first_error, sizeof(p->first_error),
                 "record %zu (partition %" PRId32 "): %s: %s",
                 (size_t)(uintptr_t)m->_private, m->partition,
                 rd_kafka_err2name(m->err), rd_kafka_err2str(m->err));
}

int h_producer_new(rd_kafka_conf_t *conf, int queue_full_ms,
                   h_producer **out)
{
    *out = NULL;
    h_producer *p = h_xcalloc(1, sizeof(*p));
    p->queue_full_ms = queue_full_ms;
    rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
    rd_kafka_conf_set_opaque(conf, p);
    p->rk = new_client(RD_KAFKA_PRODUCER, conf, "producer");
    if (!p->rk) {
        free(p);
        return -1;
    }
    *out = p;
    return 0;
}

rd_kafka_t *h_producer_rk(h_producer *p) { return p->rk; }

void h_producer_poll(h_producer *p)
{
    rd_kafka_poll(p->rk, 0);
}

int h_producer_send(h_producer *p, const char *topic, int32_t partition,
                    const h_record *r)
{
    int32_t part = partition == H_PARTITION_PER_RECORD ? r->partition
                                                       : partition;
    int64_t deadline = h_now_ms() + p->queue_full_ms;
    for (;;) {
        rd_kafka_headers_t *hdrs = NULL;
        if (r->n_headers) {
            hdrs = rd_kafka_headers_new(r->n_headers);
            for (size_t h = 0; h < r->n_headers; h++)
                rd_kafka_header_add(hdrs, r->headers[h].name, -1,
                                    r->headers[h].value,
                                    (ssize_t)r->headers[h].value_len);
        }
        rd_kafka_resp_err_t err = rd_kafka_producev(
            p->rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(part),
            RD_KAFKA_V_KEY(r->key, r->key ? r->key_len : 0),
            RD_KAFKA_V_VALUE((void *)r->value, r->value ? r->value_len : 0),
            RD_KAFKA_V_HEADERS(hdrs),
            RD_KAFKA_V_TIMESTAMP(r->timestamp > 0 ? r->timestamp : 0),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_OPAQUE((void *)(uintptr_t)p->sent), RD_KAFKA_V_END);
        if (!err) {
            p->sent++; /* the headers are librdkafka's now */
            return 0;
        }
        if (hdrs)
            rd_kafka_headers_destroy(hdrs);
        if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL &&
            (p->queue_full_ms <= 0 || h_now_ms() < deadline)) {
            rd_kafka_poll(p->rk, 10);
            continue;
        }
        /* A fatal error names the one that made it fatal. */
        char fatal[512] = "";
        if (err == RD_KAFKA_RESP_ERR__FATAL) {
            char why[480] = "";
            rd_kafka_resp_err_t fe =
                rd_kafka_fatal_error(p->rk, why, sizeof(why));
            snprintf(fatal, sizeof(fatal), " (%s: %s)", rd_kafka_err2name(fe),
                     why);
        }
        return h_fail("produce record %zu to %s [%" PRId32 "]: %s%s",
                      p->sent, topic, part, rd_kafka_err2str(err), fatal);
    }
}

int h_producer_close(h_producer *p, const char *what, int flush_ms)
{
    /* Every record gets its report within message.timeout.ms. */
    rd_kafka_flush(p->rk, flush_ms);
    int left = rd_kafka_outq_len(p->rk);
    char fatal[256];
    rd_kafka_resp_err_t ferr = rd_kafka_fatal_error(p->rk, fatal,
                                                    sizeof(fatal));
    rd_kafka_destroy(p->rk);
    size_t n = p->sent, delivered = p->delivered, failed = p->failed;
    char first[512];
    snprintf(first, sizeof(first), "%s", p->first_error);
    free(p);
    if (ferr)
        return h_fail("producer fatal error: %s: %s", rd_kafka_err2name(ferr),
                      fatal);
    if (failed)
        return h_fail("%zu of %zu records not delivered to %s; first: %s",
                      failed, n, what, first);
    if (left > 0 || delivered != n)
        return h_fail("%zu of %zu records delivered to %s, %d still queued "
                      "after flush", delivered, n, what, left);
    return 0;
}

void h_producer_abandon(h_producer *p)
{
    if (!p)
        return;
    rd_kafka_purge(p->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    rd_kafka_destroy(p->rk);
    free(p);
}

int h_produce(const char *bootstraps, const char *topic, int32_t partition,
              const h_record *recs, size_t n)
{
    return h_produce_conf(bootstraps, topic, partition, recs, n, NULL);
}

int h_produce_conf(const char *bootstraps, const char *topic,
                   int32_t partition, const h_record *recs, size_t n,
                   const char *const *conf_kv)
{
    char timeout_buf[32];
    snprintf(timeout_buf, sizeof(timeout_buf), "%d", H_MESSAGE_MS);
    rd_kafka_conf_t *conf = h_conf_pairs(
        h_kafka_conf(bootstraps), "message.timeout.ms", timeout_buf,
        "max.in.flight.requests.per.connection", "1", "retry.backoff.ms",
        "50", "linger.ms", "5", NULL);
    if (h_conf_kv(conf, conf_kv)) {
        char why[512];
        snprintf(why, sizeof(why), "%s", h_last_error());
        rd_kafka_conf_destroy(conf);
        return h_fail("producer %s", why);
    }
    size_t tsz = sizeof(timeout_buf);
    int message_timeout = H_MESSAGE_MS;
    if (rd_kafka_conf_get(conf, "message.timeout.ms", timeout_buf, &tsz) ==
        RD_KAFKA_CONF_OK)
        message_timeout = atoi(timeout_buf);

    h_producer *p = NULL;
    if (h_producer_new(conf, message_timeout + 5000, &p))
        return -1;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        rc = h_producer_send(p, topic, partition, &recs[i]);
        h_producer_poll(p);
    }
    if (rc) {
        char why[512];
        snprintf(why, sizeof(why), "%s", h_last_error());
        h_producer_close(p, topic, message_timeout + 5000);
        return h_fail("%s", why);
    }
    return h_producer_close(p, topic, message_timeout + 5000);
}

/* ---- reading ----------------------------------------------------------- */

static int topic_partition_count(rd_kafka_t *rk, const char *topic, int *cnt)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t err =
        rd_kafka_metadata(rk, 1, NULL, &md, H_REQUEST_MS);
    if (err)
        return h_fail("metadata: %s", rd_kafka_err2str(err));
    int rc = h_fail("topic '%s' does not exist", topic);
    for (int i = 0; i < md->topic_cnt; i++) {
        if (strcmp(md->topics[i].topic, topic))
            continue;
        if (md->topics[i].err) {
            rc = h_fail("topic '%s': %s", topic,
                        rd_kafka_err2name(md->topics[i].err));
        } else {
            *cnt = md->topics[i].partition_cnt;
            rc = 0;
        }
        break;
    }
    rd_kafka_metadata_destroy(md);
    return rc;
}

int h_topic_partitions(const char *bootstraps, const char *topic,
                       int *partitions)
{
    rd_kafka_t *rk = new_consumer(bootstraps, "bloomstage-test-metadata",
                                  NULL);
    if (!rk)
        return -1;
    int rc = topic_partition_count(rk, topic, partitions);
    close_consumer(rk);
    return rc;
}

int h_watermarks(const char *bootstraps, const char *topic, int32_t partition,
                 int64_t *low, int64_t *high)
{
    rd_kafka_t *rk = new_consumer(bootstraps, "bloomstage-test-metadata",
                                  NULL);
    if (!rk)
        return -1;
    rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(
        rk, topic, partition, low, high, H_REQUEST_MS);
    close_consumer(rk);
    if (err)
        return h_fail("watermarks of %s [%" PRId32 "]: %s", topic, partition,
                      rd_kafka_err2name(err));
    return 0;
}

int h_topic_total(const char *bootstraps, const char *topic, int64_t *total)
{
    int parts = 0;
    if (h_topic_partitions(bootstraps, topic, &parts))
        return -1;
    int64_t sum = 0;
    for (int32_t p = 0; p < parts; p++) {
        int64_t lo, hi;
        if (h_watermarks(bootstraps, topic, p, &lo, &hi))
            return -1;
        sum += hi;
    }
    *total = sum;
    return 0;
}

rd_kafka_t *h_query_client(rd_kafka_conf_t *conf)
{
    return new_client(RD_KAFKA_PRODUCER, conf, "query client");
}

int h_offsets(rd_kafka_t *rk, const char *topic, int nparts, int64_t which,
              int64_t *out, int timeout_ms)
{
    rd_kafka_topic_partition_list_t *l =
        rd_kafka_topic_partition_list_new(nparts);
    for (int32_t p = 0; p < nparts; p++)
        rd_kafka_topic_partition_list_add(l, topic, p)->offset = which;
    rd_kafka_resp_err_t err = rd_kafka_offsets_for_times(rk, l, timeout_ms);
    int rc = 0;
    if (err)
        rc = h_fail("%s watermarks of %s: %s",
                    which == RD_KAFKA_OFFSET_BEGINNING ? "low" : "high",
                    topic, rd_kafka_err2name(err));
    for (int i = 0; i < l->cnt && rc == 0; i++) {
        if (l->elems[i].err || l->elems[i].offset < 0) {
            rc = h_fail("%s watermark of %s [%" PRId32 "]: %s",
                        which == RD_KAFKA_OFFSET_BEGINNING ? "low" : "high",
                        topic, l->elems[i].partition,
                        l->elems[i].err ? rd_kafka_err2name(l->elems[i].err)
                                        : "no offset");
            break;
        }
        out[l->elems[i].partition] = l->elems[i].offset;
    }
    rd_kafka_topic_partition_list_destroy(l);
    return rc;
}

int h_check_nothing_dropped(rd_kafka_t *rk, const char *topic, int nparts)
{
    if (nparts <= 0)
        return 0;
    int64_t *lo = h_xcalloc((size_t)nparts, sizeof(*lo));
    int rc = h_offsets(rk, topic, nparts, RD_KAFKA_OFFSET_BEGINNING, lo,
                       5000);
    for (int p = 0; p < nparts && rc == 0; p++)
        if (lo[p] != 0)
            rc = h_fail("%s [%d] starts at offset %" PRId64 ": the mock "
                        "broker dropped its first records (it keeps 5 MiB or "
                        "100000 message sets a partition)", topic, p, lo[p]);
    free(lo);
    return rc;
}

/* Copies len bytes of src to *bytes with a NUL after them (only the NUL
 * when src is NULL), moves *bytes past them; returns the copy, or NULL for
 * a NULL src. */
static const void *copy_nul(char **bytes, const void *src, size_t len)
{
    char *dst = *bytes;
    if (src)
        memcpy(dst, src, len);
    dst[len] = '\0';
    *bytes += len + 1;
    return src ? dst : NULL;
}

/* Appends a copy of m to l: one allocation holds the header array and all
 * bytes (key and value NUL-terminated). */
static void list_append(h_record_list *l, const rd_kafka_message_t *m)
{
    rd_kafka_headers_t *hdrs = NULL;
    size_t nh = 0;
    if (rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR)
        nh = rd_kafka_header_cnt(hdrs);

    size_t size = nh * sizeof(h_header) + m->key_len + 1 + m->len + 1;
    for (size_t i = 0; i < nh; i++) {
        const char *name;
        const void *val;
        size_t vlen;
        rd_kafka_header_get_all(hdrs, i, &name, &val, &vlen);
        size += strlen(name) + 1 + (val ? vlen + 1 : 0);
    }
    char *block = h_xmalloc(size);
    h_header *hv = (h_header *)(void *)block;
    char *bytes = block + nh * sizeof(h_header);

    h_record r = {.partition = m->partition,
                  .offset = m->offset,
                  .owned = block,
                  .headers = nh ? hv : NULL,
                  .n_headers = nh};
    rd_kafka_timestamp_type_t tstype;
    r.timestamp = rd_kafka_message_timestamp(m, &tstype);
    r.key = copy_nul(&bytes, m->key, m->key_len);
    r.key_len = r.key ? m->key_len : 0;
    r.value = copy_nul(&bytes, m->payload, m->len);
    r.value_len = r.value ? m->len : 0;
    for (size_t i = 0; i < nh; i++) {
        const char *name;
        const void *val;
        size_t vlen;
        rd_kafka_header_get_all(hdrs, i, &name, &val, &vlen);
        hv[i].name = copy_nul(&bytes, name, strlen(name));
        hv[i].value = val ? copy_nul(&bytes, val, vlen) : NULL;
        hv[i].value_len = val ? vlen : 0;
    }

    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 256;
        l->recs = h_xrealloc(l->recs, l->cap * sizeof(*l->recs));
    }
    l->recs[l->n++] = r;
}

static int by_partition_offset(const void *a, const void *b)
{
    const h_record *x = a, *y = b;
    if (x->partition != y->partition)
        return x->partition < y->partition ? -1 : 1;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

const char *const H_READ_COMMITTED[] = {"isolation.level=read_committed",
                                        NULL};

int h_consume_all(const char *bootstraps, const char *topic, int timeout_ms,
                  h_record_list *out)
{
    return h_consume_all_conf(bootstraps, topic, timeout_ms, NULL, out);
}

/* read_committed: until every transaction on topic has ended (committed,
 * or aborted by its coordinator: a crashed writer's by its
 * transaction.timeout.ms): the last stable offsets (what rk, reading at
 * read_committed, is told) reach the high watermarks, so a read to them
 * is all of what was written so far.  0, or -1 (h_fail) at the deadline. */
static int wait_stable(const char *bootstraps, rd_kafka_t *rk,
                       const char *topic, int nparts, int64_t deadline)
{
    static const char *const uncommitted[] = {
        "isolation.level=read_uncommitted", NULL};
    char *group = random_group();
    rd_kafka_t *ru = new_consumer(bootstraps, group, uncommitted);
    free(group);
    if (!ru)
        return -1;
    int rc = -1;
    for (;;) {
        int p, busy = -1;
        int64_t lo, lso = 0, hw = 0;
        for (p = 0; p < nparts && busy < 0; p++) {
            if (rd_kafka_query_watermark_offsets(rk, topic, p, &lo, &lso,
                                                 H_REQUEST_MS) ||
                rd_kafka_query_watermark_offsets(ru, topic, p, &lo, &hw,
                                                 H_REQUEST_MS) ||
                lso < hw)
                busy = p;
        }
        if (busy < 0) {
            rc = 0;
            break;
        }
        if (h_now_ms() >= deadline) {
            h_fail("%s [%d]: its last stable offset %lld is still below its "
                   "high watermark %lld (a transaction stays open)", topic,
                   busy, (long long)lso, (long long)hw);
            break;
        }
        h_nap(200);
    }
    close_consumer(ru);
    return rc;
}

static bool reads_committed(const char *const *conf_kv)
{
    for (size_t i = 0; conf_kv && conf_kv[i]; i++)
        if (!strcmp(conf_kv[i], "isolation.level=read_committed"))
            return true;
    return false;
}

/* rk (a consumer that has not been assigned anything) reads partitions
 * 0..nparts-1 of topic from next[p] (start NULL: from the beginning) up to
 * high[p] (a partition with next[p] >= high[p] is not read), appending to
 * out; next[] is moved along.  0, or -1 (h_fail) on a topic error or when
 * the deadline passes; what was read stays in out, sorted by partition
 * and offset. */
static int consume_to(rd_kafka_t *rk, const char *topic, int nparts,
                      const int64_t *start, int64_t *next,
                      const int64_t *high, int64_t deadline, int timeout_ms,
                      h_record_list *out)
{
    int rc = -1, pending = 0;
    size_t first_new = out->n;
    char last_error[512] = "";
    rd_kafka_topic_partition_list_t *assign =
        rd_kafka_topic_partition_list_new(nparts);
    for (int p = 0; p < nparts; p++)
        if (high[p] > next[p]) {
            rd_kafka_topic_partition_list_add(assign, topic, p)->offset =
                start ? start[p] : RD_KAFKA_OFFSET_BEGINNING;
            pending++;
        }
    if (pending == 0) {
        rc = 0;
        goto done;
    }
    rd_kafka_resp_err_t aerr = rd_kafka_assign(rk, assign);
    if (aerr) {
        h_fail("assign %s: %s", topic, rd_kafka_err2str(aerr));
        goto done;
    }

    while (pending > 0) {
        if (h_now_ms() >= deadline) {
            int done_parts = 0;
            for (int p = 0; p < nparts; p++)
                done_parts += next[p] >= high[p];
            h_fail("consuming %s: end not reached within %d ms (%d of %d "
                   "partitions done, %zu records read%s%s)", topic,
                   timeout_ms, done_parts, nparts, out->n - first_new,
                   last_error[0] ? "; last error: " : "", last_error);
            goto done;
        }
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (!m)
            continue;
        int32_t p = m->partition;
        bool known = m->rkt && p >= 0 && p < nparts &&
                     !strcmp(rd_kafka_topic_name(m->rkt), topic);
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            /* offset = the end the fetcher saw: covers control records,
             * which take offsets but are never delivered */
            if (known && next[p] < high[p] && m->offset >= high[p]) {
                next[p] = m->offset;
                pending--;
            }
        } else if (m->err) {
            snprintf(last_error, sizeof(last_error), "%s: %s",
                     rd_kafka_err2name(m->err), rd_kafka_message_errstr(m));
            if (m->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
                m->err == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED ||
                m->err == RD_KAFKA_RESP_ERR__FATAL) {
                h_fail("consuming %s: %s", topic, last_error);
                rd_kafka_message_destroy(m);
                goto done;
            }
        } else if (known && m->offset < high[p]) {
            list_append(out, m);
            bool was_pending = next[p] < high[p];
            next[p] = m->offset + 1;
            if (was_pending && next[p] >= high[p])
                pending--;
        } else if (known && next[p] < high[p]) {
            /* A record past the end: everything before it was delivered,
             * markers included.  Where a writer never stops, the fetcher
             * may never see the partition's end, so no EOF comes. */
            next[p] = high[p];
            pending--;
        }
        rd_kafka_message_destroy(m);
    }
    rc = 0;

done:
    if (out->n > first_new)
        qsort(out->recs + first_new, out->n - first_new, sizeof(h_record),
              by_partition_offset);
    rd_kafka_topic_partition_list_destroy(assign);
    return rc;
}

int h_consume_all_conf(const char *bootstraps, const char *topic,
                       int timeout_ms, const char *const *conf_kv,
                       h_record_list *out)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    char *group = random_group();
    rd_kafka_t *rk = new_consumer(bootstraps, group, conf_kv);
    free(group);
    if (!rk)
        return -1;

    int rc = -1, nparts = 0;
    int64_t *high = NULL, *next = NULL;

    if (topic_partition_count(rk, topic, &nparts))
        goto done;
    if (reads_committed(conf_kv) &&
        wait_stable(bootstraps, rk, topic, nparts, deadline))
        goto done;
    high = h_xcalloc((size_t)nparts, sizeof(*high));
    next = h_xcalloc((size_t)nparts, sizeof(*next));
    for (int p = 0; p < nparts; p++) {
        /* With isolation.level=read_committed this is the last stable
         * offset (ListOffsets asks with the client's isolation level). */
        rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(
            rk, topic, p, &next[p], &high[p], H_REQUEST_MS);
        if (err) {
            h_fail("watermarks of %s [%d]: %s", topic, p,
                   rd_kafka_err2name(err));
            goto done;
        }
    }
    rc = consume_to(rk, topic, nparts, NULL, next, high, deadline,
                    timeout_ms, out);

done:
    free(high);
    free(next);
    close_consumer(rk);
    return rc;
}

int h_consume_range(const char *bootstraps, const char *topic, int nparts,
                    const int64_t *from, const int64_t *to, int timeout_ms,
                    h_record_list *out)
{
    char *group = random_group();
    rd_kafka_t *rk = new_consumer(bootstraps, group, NULL);
    free(group);
    if (!rk)
        return -1;
    int64_t *next = h_xcalloc((size_t)nparts, sizeof(*next));
    memcpy(next, from, (size_t)nparts * sizeof(*next));
    int rc = consume_to(rk, topic, nparts, from, next, to,
                        h_now_ms() + timeout_ms, timeout_ms, out);
    free(next);
    close_consumer(rk);
    return rc;
}

/* ---- consumer groups --------------------------------------------------- */

int h_committed(const char *bootstraps, const char *group_id,
                const char *topic, int partitions, int64_t *offsets)
{
    rd_kafka_t *rk = new_consumer(bootstraps, group_id, NULL);
    if (!rk)
        return -1;
    rd_kafka_topic_partition_list_t *l =
        rd_kafka_topic_partition_list_new(partitions);
    for (int p = 0; p < partitions; p++)
        rd_kafka_topic_partition_list_add(l, topic, p);
    int rc = 0;
    rd_kafka_resp_err_t err = rd_kafka_committed(rk, l, H_REQUEST_MS);
    if (err) {
        rc = h_fail("committed offsets of group %s on %s: %s", group_id, topic,
                    rd_kafka_err2str(err));
    } else {
        for (int i = 0; i < l->cnt; i++) {
            if (l->elems[i].err) {
                rc = h_fail("committed offset of group %s on %s [%" PRId32
                            "]: %s", group_id, topic, l->elems[i].partition,
                            rd_kafka_err2name(l->elems[i].err));
                break;
            }
            offsets[l->elems[i].partition] = l->elems[i].offset;
        }
    }
    rd_kafka_topic_partition_list_destroy(l);
    close_consumer(rk);
    return rc;
}

typedef struct commit_result {
    bool called;
    rd_kafka_resp_err_t err;
    char first_error[256];
} commit_result;

static void commit_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                      rd_kafka_topic_partition_list_t *offsets, void *opaque)
{
    (void)rk;
    commit_result *cr = opaque;
    cr->called = true;
    cr->err = err;
    for (int i = 0; offsets && i < offsets->cnt; i++)
        if (offsets->elems[i].err && !cr->first_error[0])
            snprintf(cr->first_error, sizeof(cr->first_error),
                     "partition %" PRId32 ": %s", offsets->elems[i].partition,
                     rd_kafka_err2name(offsets->elems[i].err));
}

int h_commit(const char *bootstraps, const char *group_id, const char *topic,
             int partitions, const int64_t *offsets)
{
    rd_kafka_t *rk = new_consumer(bootstraps, group_id, NULL);
    if (!rk)
        return -1;
    rd_kafka_topic_partition_list_t *l =
        rd_kafka_topic_partition_list_new(partitions);
    for (int p = 0; p < partitions; p++)
        if (offsets[p] >= 0)
            rd_kafka_topic_partition_list_add(l, topic, p)->offset =
                offsets[p];
    /* NULL queue: synchronous, and the callback sees each partition's
     * result (rd_kafka_commit() would only return the request's error). */
    commit_result cr = {0};
    rd_kafka_resp_err_t err = rd_kafka_commit_queue(rk, l, NULL, commit_cb,
                                                    &cr);
    int rc = 0;
    if (err || cr.err || cr.first_error[0])
        rc = h_fail("commit of group %s on %s: %s%s%s", group_id, topic,
                    rd_kafka_err2name(err ? err : cr.err),
                    cr.first_error[0] ? "; " : "", cr.first_error);
    else if (!cr.called)
        rc = h_fail("commit of group %s on %s: no result", group_id, topic);
    rd_kafka_topic_partition_list_destroy(l);
    close_consumer(rk);
    return rc;
}

int h_member_poll(rd_kafka_t *rk, int ms)
{
    double t0 = h_now_s();
    while ((h_now_s() - t0) * 1000 < ms) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 50);
        if (m)
            rd_kafka_message_destroy(m);
    }
    rd_kafka_topic_partition_list_t *a = NULL;
    int n = 0;
    if (rd_kafka_assignment(rk, &a) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        n = a->cnt;
        rd_kafka_topic_partition_list_destroy(a);
    }
    return n;
}
