/*
 * stage.c -- the consume -> filter -> produce loop and checkpoint-then-commit.
 *
 * States (one thread runs them all; librdkafka calls back into this thread
 * from rd_kafka_consumer_poll and rd_kafka_poll/flush only):
 *
 *            bs_stage_run
 *                 |
 *                 v        records / interval       checkpoint()
 *   +-------> RUNNING  ---------------------> CHECKPOINTING ---+
 *   |           |  ^  \                          |   |          |
 *   |  resume() |  |   \ rebalance_cb            |   | fails    | ok
 *   |           |  |    v                        |   v          |
 *   |           |  |  REBALANCING (assign: load  | PAUSED <-----+ (retry
 *   |           |  |  checkpoints; revoke:       |  (backoff,     with
 *   |           |  |  checkpoint() then give up) |   rollback()   backoff)
 *   |           |  +-----------------------------+   on delivery
 *   |           v                                    failure)
 *   +------ DRAINING (stop requested: checkpoint(), close the consumer,
 *                     which revokes, then return)
 *           FATAL (damaged checkpoint, unusable configuration): commit
 *                  nothing, return -1
 *
 * Invariants:
 *   1. An offset is committed only after a checkpoint file holding that
 *      offset and the filter covering every record before it is durable
 *      (written, fsynced, renamed, directory fsynced).
 *   2. A checkpoint is written only after the producer has flushed and
 *      every delivery report since the previous checkpoint succeeded; so
 *      every record before a checkpoint's offset that was not dropped is in
 *      the output topic.
 *   3. A failed delivery rolls every partition back to its last checkpoint
 *      (filter reloaded, consumer seeked): records after it are processed
 *      again, so nothing is lost; some may be produced twice (at-least-
 *      once, bounded by the records since the checkpoint).
 *   4. On assignment a partition's checkpoint is loaded before any of its
 *      records is processed, and consumption starts at its offset.
 */
#include "stage.h"
#include "blocklist.h"
#include "checkpoint.h"
#include "kafka_util.h"
#include "log.h"
#include "record_key.h"
#include "replay.h"
#include "store.h"
#include "util.h"

#include <errno.h>
#include <jansson.h>
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HDR_SRC BS_HDR_SRC
#define HDR_REASON "bloomstage-reason"
#define FLUSH_STEP_MS 500
#define BACKOFF_MIN 0.5
#define BACKOFF_MAX 30.0

typedef struct part {
    char *topic;
    int32_t partition;
    bf_filter *filter;   /* wraps a bf_scalable */
    int64_t base_offset; /* where a rollback resumes: the last checkpoint's
                            offset, else the first offset consumed; -1 none */
    int64_t next_offset; /* after the last record processed; -1 none */
    int64_t ckpt_offset; /* in the newest checkpoint file; -1 none */
    int64_t committed;   /* the last offset committed by this stage; -1 */
    bool need_initial;   /* exactly_once: its first checkpoint could not be
                            written yet: paused, nothing processed */
    int64_t lag;         /* consumer lag from librdkafka's stats; -1 none */
    /* exactly_once: the output watermarks of the newest checkpoint, and the
     * input offsets the output tail showed as forwarded already (sorted;
     * consumed as the partition catches up). */
    bs_ckpt_wm *wm;
    uint32_t nwm;
    int64_t *skip;
    size_t nskip, skip_i;
} part;

/* A record's keys, hashed, ahead of its processing: taken when the record
 * is polled, used one poll later (see bs_stage_run). */
typedef struct prepared {
    bool have;         /* it has the dedup key: h is its hash */
    bf_hash h;
    bool *list_have;   /* per blocklist: it has that list's key, hashed */
    bf_hash *list_h;
} prepared;

typedef _Atomic uint64_t counter;
/* Counters have one writer, the stage thread (librdkafka calls back into
 * it), and readers anywhere: a relaxed load and store is enough and costs
 * no locked instruction on the record path. */
#define INC(c)                                                                 \
    atomic_store_explicit(&(c),                                                \
                          atomic_load_explicit(&(c), memory_order_relaxed) + 1, \
                          memory_order_relaxed)
#define GET(c) atomic_load_explicit(&(c), memory_order_relaxed)
#define SET(c, v) atomic_store_explicit(&(c), (v), memory_order_relaxed)

struct bs_stage {
    const bs_config *cfg;
    rd_kafka_t *consumer, *producer;
    rd_kafka_topic_t *out_rkt, *rej_rkt; /* handles: no lookup per record */
    const char *output_topic;
    const char *rejected_topic; /* NULL: dropped records are only counted */
    const bs_config_keyspec *dedup_key;
    bool reject_missing;        /* dedup.on.missing.key=reject */
    bool exactly_once;          /* processing.guarantee=exactly_once */
    rd_kafka_t *tail;           /* exactly_once: reads the output tail */
    int out_parts;              /* exactly_once: output partitions */
    bf_scalable_params fparams;
    const char *ckpt_dir;
    bs_store *store;            /* where checkpoints go (store.h) */
    double ckpt_interval;       /* seconds */
    uint64_t ckpt_records;      /* 0: no record trigger */

    bs_blocklist *lists;
    size_t nlists;
    counter *list_drops;
    bool *list_shares_hash; /* same key and seed as the dedup filter */

    /* The record polled last, not processed yet (its filter blocks on their
     * way to the cache), and the two prepared slots (next and held). */
    rd_kafka_message_t *held;
    prepared prep[2];
    unsigned held_slot;

    part *parts;
    size_t nparts, capparts;
    size_t last_hit; /* cache for part lookup */

    /* Delivery reports since the last checkpoint (producer thread calls
     * back into ours, from rd_kafka_poll / rd_kafka_flush). */
    uint64_t dr_failed;
    char dr_error[256];

    double stats_interval; /* log.stats.interval.ms, seconds; 0 off */
    double last_stats, last_status;
    uint64_t stats_in_before, status_in_before;

    uint64_t since_ckpt; /* records processed since the last checkpoint */
    double last_ckpt;
    double backoff, retry_at;
    bool paused;         /* consumption paused until retry_at */
    bool failing;        /* the last checkpoint attempt failed */
    bool filter_full_logged;

    atomic_bool stop;
    bool fatal;
    char fatal_err[1024];
    bool rollback_pending; /* a rollback's tail read failed: retried */
    bool commit_behind;    /* a commit failed: the next round (every
                              checkpoint.interval.ms, records or not)
                              commits again */

    /* What other threads (metrics, demo) may read: published by the stage
     * thread under pub_lock. */
    pthread_mutex_t pub_lock;
    bs_part_metrics *pub;
    size_t npub, cappub;
    double last_publish;
    _Atomic int64_t last_poll_ms; /* loop liveness, for readiness */
    atomic_bool pub_failing, pub_paused;
    counter ckpt_hist[BS_CKPT_BUCKETS];
    counter ckpt_rounds, ckpt_sum_us;

    struct {
        counter records_in, records_out, dropped_duplicate,
            dropped_blocklist, missing_key, rejected_out, delivery_failures,
            rollbacks, replayed, checkpoints, checkpoint_failures, commits,
            checkpoint_bytes, checkpoint_us, filter_bytes, partitions,
            filter_layers;
    } st;
};

/* -- librdkafka callbacks -------------------------------------------------- */

static void error_cb(rd_kafka_t *rk, int err, const char *reason,
                     void *opaque)
{
    bs_stage *s = opaque;
    char q[512];
    if (err == RD_KAFKA_RESP_ERR__FATAL) {
        char fe[512];
        rd_kafka_resp_err_t orig = rd_kafka_fatal_error(rk, fe, sizeof(fe));
        bs_log(BS_LOG_ERROR, "kafka fatal error", "client=%s error=%s "
               "detail=%s", rd_kafka_name(rk), rd_kafka_err2name(orig),
               bs_log_quote(fe, q, sizeof(q)));
        if (rk == s->producer) {
            /* The idempotent producer cannot go on: everything since the
             * checkpoint is redone with a new producer (see rollback). */
            s->dr_failed++;
            snprintf(s->dr_error, sizeof(s->dr_error), "producer fatal "
                     "error: %s", fe);
        } else {
            s->fatal = true;
            snprintf(s->fatal_err, sizeof(s->fatal_err), "consumer fatal "
                     "error: %s", fe);
        }
        return;
    }
    bs_log(BS_LOG_WARN, "kafka error", "client=%s error=%s detail=%s",
           rd_kafka_name(rk), rd_kafka_err2name(err),
           bs_log_quote(reason, q, sizeof(q)));
}

static void dr_msg_cb(rd_kafka_t *rk, const rd_kafka_message_t *m,
                      void *opaque)
{
    (void)rk;
    bs_stage *s = opaque;
    if (m->err) {
        if (s->dr_failed++ == 0)
            snprintf(s->dr_error, sizeof(s->dr_error), "delivery to %s [%d] "
                     "failed: %s", rd_kafka_topic_name(m->rkt),
                     (int)m->partition, rd_kafka_err2str(m->err));
        INC(s->st.delivery_failures);
    }
}

/* -- partitions ------------------------------------------------------------ */

static part *part_find(bs_stage *s, const char *topic, int32_t partition)
{
    if (s->last_hit < s->nparts) {
        part *p = &s->parts[s->last_hit];
        if (p->partition == partition && !strcmp(p->topic, topic))
            return p;
    }
    for (size_t i = 0; i < s->nparts; i++) {
        part *p = &s->parts[i];
        if (p->partition == partition && !strcmp(p->topic, topic)) {
            s->last_hit = i;
            return p;
        }
    }
    return NULL;
}

/* librdkafka's statistics (consumer): the lag of each assigned partition,
 * topics.T.partitions.P.consumer_lag. */
static int stats_cb(rd_kafka_t *rk, char *json, size_t len, void *opaque)
{
    (void)rk;
    bs_stage *s = opaque;
    json_t *root = json_loadb(json, len, 0, NULL);
    json_t *topics = json_object_get(root, "topics");
    const char *tname;
    json_t *t;
    json_object_foreach(topics, tname, t) {
        const char *pname;
        json_t *pj;
        json_object_foreach(json_object_get(t, "partitions"), pname, pj) {
            json_t *lag = json_object_get(pj, "consumer_lag");
            if (!json_is_integer(lag) || json_integer_value(lag) < 0)
                continue;
            part *p = part_find(s, tname, (int32_t)atoi(pname));
            if (p)
                p->lag = json_integer_value(lag);
        }
    }
    json_decref(root);
    return 0; /* librdkafka frees json */
}

static void part_free(part *p)
{
    free(p->topic);
    bf_filter_destroy(p->filter);
    free(p->wm);
    free(p->skip);
}

static void part_remove(bs_stage *s, const char *topic, int32_t partition)
{
    part *p = part_find(s, topic, partition);
    if (!p)
        return;
    part_free(p);
    *p = s->parts[--s->nparts];
    s->last_hit = 0;
}

static bf_filter *new_filter(bs_stage *s, char *errstr, size_t errstr_size)
{
    bf_scalable *sb = bf_scalable_new(&s->fparams, errstr, errstr_size);
    bf_filter *f = bf_filter_from_scalable(sb);
    if (sb && !f) {
        bf_scalable_destroy(sb);
        snprintf(errstr, errstr_size, "out of memory");
    }
    return f;
}

/* Loads a partition's checkpoint into p (filter and offsets), or gives it a
 * fresh filter when there is none.  -1 with errstr if the checkpoint exists
 * but cannot be used: that is fatal, never silently replaced. */
static int part_load(bs_stage *s, part *p, char *errstr, size_t errstr_size)
{
    bs_checkpoint c;
    int r = bs_store_get(s->store, p->topic, p->partition, &c, errstr,
                         errstr_size);
    if (r < 0)
        return -1;
    bf_filter_destroy(p->filter);
    p->filter = NULL;
    free(p->wm);
    p->wm = NULL;
    p->nwm = 0;
    free(p->skip);
    p->skip = NULL;
    p->nskip = p->skip_i = 0;
    if (r == 0) {
        p->filter = new_filter(s, errstr, errstr_size);
        p->ckpt_offset = p->base_offset = p->next_offset = -1;
        return p->filter ? 0 : -1;
    }
    if (strcmp(c.topic, p->topic) != 0 || c.partition != p->partition) {
        snprintf(errstr, errstr_size, "the checkpoint of %s [%d] holds %s "
                 "[%d]", p->topic, (int)p->partition, c.topic,
                 (int)c.partition);
        bs_ckpt_free(&c);
        return -1;
    }
    p->filter = c.filter;
    c.filter = NULL;
    /* The memory cap is this process's setting; files do not carry it. */
    bf_scalable_set_max_bytes(bf_filter_scalable(p->filter),
                              s->fparams.max_bytes);
    p->wm = c.wm;
    p->nwm = c.nwm;
    c.wm = NULL;
    /* The dedup settings may have changed since: growth from here on
     * follows the current ones, the layers already there stay as built. */
    p->ckpt_offset = p->base_offset = p->next_offset = c.next_offset;
    bs_ckpt_free(&c);
    return 0;
}

static part *part_add(bs_stage *s, const char *topic, int32_t partition)
{
    if (s->nparts == s->capparts) {
        size_t cap = s->capparts ? s->capparts * 2 : 16;
        part *np = realloc(s->parts, cap * sizeof(*np));
        if (!np)
            return NULL;
        s->parts = np;
        s->capparts = cap;
    }
    part *p = &s->parts[s->nparts];
    memset(p, 0, sizeof(*p));
    p->topic = strdup(topic);
    if (!p->topic)
        return NULL;
    p->partition = partition;
    p->base_offset = p->next_offset = p->ckpt_offset = -1;
    p->committed = -1;
    p->lag = -1;
    s->nparts++;
    return p;
}

/* exactly_once: where a partition that has no checkpoint starts (its
 * committed offset, else where auto.offset.reset points), written down as
 * a first checkpoint with the output's watermarks before any of its
 * records is processed, so a crash before the first regular checkpoint can
 * still be replayed exactly. */
static int initial_checkpoint(bs_stage *s, part *p, char *errstr,
                              size_t errstr_size)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, p->topic, p->partition);
    int64_t start = RD_KAFKA_OFFSET_INVALID;
    if (rd_kafka_committed(s->consumer, l, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR &&
        !l->elems[0].err)
        start = l->elems[0].offset;
    rd_kafka_topic_partition_list_destroy(l);
    if (start < 0) {
        int64_t lo, hi;
        rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(
            s->consumer, p->topic, p->partition, &lo, &hi, 10000);
        if (err) {
            snprintf(errstr, errstr_size, "watermarks of %s [%d]: %s",
                     p->topic, (int)p->partition, rd_kafka_err2str(err));
            return -1;
        }
        const char *reset = bs_config_get_str(s->cfg,
                                              "consumer.auto.offset.reset");
        start = reset && (!strcmp(reset, "latest") || !strcmp(reset, "end") ||
                          !strcmp(reset, "largest"))
                    ? hi
                    : lo;
    }
    bs_ckpt_wm *wm = calloc((size_t)s->out_parts, sizeof(*wm));
    if (!wm) {
        snprintf(errstr, errstr_size, "out of memory");
        return -1;
    }
    if (bs_output_watermarks(s->producer, s->output_topic, s->out_parts, wm,
                             10000, errstr, errstr_size) != 0 ||
        bs_store_put(s->store, p->topic, p->partition, start, wm,
                     (uint32_t)s->out_parts, p->filter, errstr,
                     errstr_size) != 0 ||
        bs_store_sync(s->store, errstr, errstr_size) != 0) {
        free(wm);
        return -1;
    }
    free(p->wm);
    p->wm = wm;
    p->nwm = (uint32_t)s->out_parts;
    p->ckpt_offset = p->base_offset = p->next_offset = start;
    return 0;
}

/* Restores partitions parts[0..n) (pointers into s->parts) to their last
 * checkpoint: filter and offsets from disk and, with exactly_once, the
 * output tail since (replay.h).  -1 with errstr if a checkpoint cannot be
 * used (damaged), -2 if the output tail could not be read (the broker:
 * retry later).  Either way processing them now could lose or duplicate
 * records. */
static int restore(bs_stage *s, part **parts, size_t n, char *errstr,
                   size_t errstr_size)
{
    for (size_t i = 0; i < n; i++) {
        part *p = parts[i];
        if (part_load(s, p, errstr, errstr_size) != 0)
            return -1;
        p->need_initial = false;
        if (s->exactly_once && p->ckpt_offset < 0 &&
            initial_checkpoint(s, p, errstr, errstr_size) != 0) {
            /* Like any failed checkpoint write: the partition waits,
             * paused and unprocessed, and the write is retried. */
            char q[1100];
            bs_log(BS_LOG_ERROR, "checkpoint failed", "topic=%s "
                   "partition=%d error=%s", p->topic, (int)p->partition,
                   bs_log_quote(errstr, q, sizeof(q)));
            p->need_initial = true;
        }
    }
    if (!s->exactly_once)
        return 0;
    bs_replay_target *t = calloc(n ? n : 1, sizeof(*t));
    if (!t) {
        snprintf(errstr, errstr_size, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        t[i].topic = parts[i]->topic;
        t[i].partition = parts[i]->partition;
        t[i].from_offset = parts[i]->ckpt_offset;
        t[i].wm = parts[i]->wm;
        t[i].nwm = parts[i]->nwm;
        t[i].filter = bf_filter_scalable(parts[i]->filter);
    }
    double t0 = bs_now();
    int rc = bs_replay_tail(s->tail, s->output_topic, s->dedup_key,
                            s->fparams.seed, t, n, 120000, errstr,
                            errstr_size) == 0
                 ? 0
                 : -2; /* the broker, not the state: worth a retry */
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        parts[i]->skip = t[i].skip;
        parts[i]->nskip = t[i].nskip;
        parts[i]->skip_i = 0;
        total += t[i].records;
    }
    free(t);
    if (rc == 0 && total > 0)
        bs_log(BS_LOG_INFO, "output tail replayed", "partitions=%zu "
               "records=%llu seconds=%.3f", n, (unsigned long long)total,
               bs_now() - t0);
    return rc;
}

/* Recomputes the filter gauges and publishes the per-partition view for
 * other threads. */
static void update_filter_gauges(bs_stage *s)
{
    uint64_t bytes = 0, layers = 0;
    pthread_mutex_lock(&s->pub_lock);
    if (s->nparts > s->cappub) {
        bs_part_metrics *np = realloc(s->pub, s->nparts * sizeof(*np));
        if (np) {
            s->pub = np;
            s->cappub = s->nparts;
        }
    }
    s->npub = 0;
    for (size_t i = 0; i < s->nparts; i++) {
        part *p = &s->parts[i];
        if (!p->filter)
            continue; /* being restored */
        bf_info in;
        bf_scalable_info(bf_filter_scalable(p->filter), &in);
        bytes += in.bytes;
        layers += in.layers;
        if (s->npub < s->cappub) {
            bs_part_metrics *m = &s->pub[s->npub++];
            snprintf(m->topic, sizeof(m->topic), "%s", p->topic);
            m->partition = p->partition;
            m->layers = in.layers;
            m->bits = in.cells;
            m->fill = in.fill;
            m->est_keys = in.est_keys;
            m->est_fpr = in.est_fpr;
            m->lag = p->lag;
            m->ckpt_offset = p->ckpt_offset;
        }
    }
    pthread_mutex_unlock(&s->pub_lock);
    atomic_store(&s->pub_failing, s->failing);
    atomic_store(&s->pub_paused, s->paused);
    s->last_publish = bs_now();
    SET(s->st.filter_bytes, bytes);
    SET(s->st.filter_layers, layers);
    SET(s->st.partitions, s->nparts);
}

/* -- checkpoint, commit, rollback ----------------------------------------- */

static bool in_list(const rd_kafka_topic_partition_list_t *l, const part *p)
{
    if (!l)
        return true;
    for (int i = 0; i < l->cnt; i++)
        if (l->elems[i].partition == p->partition &&
            !strcmp(l->elems[i].topic, p->topic))
            return true;
    return false;
}

/* Waits for every produced record's delivery report.  false if some are
 * still undelivered after the producer's own message timeout. */
static bool flush_producer(bs_stage *s)
{
    double t0 = bs_now();
    for (;;) {
        rd_kafka_resp_err_t err = rd_kafka_flush(s->producer, FLUSH_STEP_MS);
        if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
            return true;
        /* librdkafka fails undeliverable records itself after
         * message.timeout.ms; until then keep waiting, but let a second
         * stop request (or a fatal error) cut it short. */
        if (s->fatal)
            return false;
        if (bs_now() - t0 >= 5.0)
            bs_log(BS_LOG_INFO, "waiting for deliveries", "in_flight=%d",
                   rd_kafka_outq_len(s->producer));
    }
}

/* Seeks the consumer to the offsets in `seek` (nothing if empty).  A seek
 * that cannot be made at all is fatal: where consumption goes on would be
 * unknown; a partition the broker refuses is logged. */
static void seek_to(bs_stage *s, rd_kafka_topic_partition_list_t *seek,
                    const char *why)
{
    if (seek->cnt == 0)
        return;
    rd_kafka_error_t *e = rd_kafka_seek_partitions(s->consumer, seek, 10000);
    if (e) {
        s->fatal = true;
        snprintf(s->fatal_err, sizeof(s->fatal_err), "%s: seek failed: %s",
                 why, rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
        return;
    }
    for (int i = 0; i < seek->cnt; i++)
        if (seek->elems[i].err)
            bs_log(BS_LOG_WARN, "seek failed", "reason=%s topic=%s "
                   "partition=%d error=%s", why, seek->elems[i].topic,
                   (int)seek->elems[i].partition,
                   rd_kafka_err2name(seek->elems[i].err));
}

/* Pauses or resumes every assigned partition.  A resume also seeks each
 * partition to where this stage's own state says it is (after the last
 * record processed, or its base after a rollback), so where fetching
 * restarts never depends on what librdkafka remembers across a pause and a
 * seek.  Records polled while paused are not processed (see the loop). */
static void pause_all(bs_stage *s, bool pause)
{
    rd_kafka_topic_partition_list_t *a = NULL;
    if (rd_kafka_assignment(s->consumer, &a) != RD_KAFKA_RESP_ERR_NO_ERROR)
        return;
    s->paused = pause;
    atomic_store(&s->pub_paused, pause);
    if (a->cnt == 0) {
        rd_kafka_topic_partition_list_destroy(a);
        return;
    }
    if (pause) {
        rd_kafka_pause_partitions(s->consumer, a);
        rd_kafka_topic_partition_list_destroy(a);
        return;
    }
    rd_kafka_resume_partitions(s->consumer, a);
    rd_kafka_topic_partition_list_t *seek =
        rd_kafka_topic_partition_list_new(a->cnt);
    for (int i = 0; i < a->cnt; i++) {
        part *p = part_find(s, a->elems[i].topic, a->elems[i].partition);
        int64_t pos = !p ? -1 : p->next_offset >= 0 ? p->next_offset
                                                     : p->base_offset;
        if (pos >= 0)
            rd_kafka_topic_partition_list_add(seek, p->topic, p->partition)
                ->offset = pos;
    }
    seek_to(s, seek, "resume");
    rd_kafka_topic_partition_list_destroy(seek);
    rd_kafka_topic_partition_list_destroy(a);
}

static int recreate_producer(bs_stage *s, char *errstr, size_t errstr_size);
static void release_held(bs_stage *s);

/* Invariant 3: back to the last checkpoint, for every partition in `only`
 * (NULL: all).  Filters are reloaded from disk and the consumer seeked. */
static void rollback(bs_stage *s, const rd_kafka_topic_partition_list_t *only)
{
    char q[512];
    if (s->rollback_pending) {
        bs_log(BS_LOG_INFO, "retrying the rollback", NULL);
    } else {
        INC(s->st.rollbacks);
        bs_log(BS_LOG_WARN, "delivery failed, rolling back to the last "
               "checkpoint", "failed=%llu error=%s",
               (unsigned long long)s->dr_failed,
               bs_log_quote(s->dr_error, q, sizeof(q)));
    }
    if (rd_kafka_fatal_error(s->producer, NULL, 0)) {
        char err[512];
        if (recreate_producer(s, err, sizeof(err)) != 0) {
            s->fatal = true;
            snprintf(s->fatal_err, sizeof(s->fatal_err), "%s", err);
            return;
        }
    }
    rd_kafka_topic_partition_list_t *seek =
        rd_kafka_topic_partition_list_new((int)s->nparts);
    part **chosen = calloc(s->nparts ? s->nparts : 1, sizeof(*chosen));
    int64_t *bases = calloc(s->nparts ? s->nparts : 1, sizeof(*bases));
    size_t n = 0;
    for (size_t i = 0; chosen && bases && i < s->nparts; i++)
        if (in_list(only, &s->parts[i])) {
            bases[n] = s->parts[i].base_offset;
            chosen[n++] = &s->parts[i];
        }
    char err[1024];
    int r = chosen && bases ? restore(s, chosen, n, err, sizeof(err)) : -1;
    if (!chosen || !bases) {
        s->fatal = true;
        snprintf(s->fatal_err, sizeof(s->fatal_err), "rollback: out of "
                 "memory");
    } else if (r == -1) {
        s->fatal = true;
        snprintf(s->fatal_err, sizeof(s->fatal_err), "rollback: %s", err);
    } else if (r == -2) {
        /* Nothing is processed until a retry reads the tail (checkpoint()
         * calls back here first; process() holds records meanwhile). */
        char rq[1100];
        bs_log(BS_LOG_WARN, "rollback incomplete, will retry", "error=%s",
               bs_log_quote(err, rq, sizeof(rq)));
        s->rollback_pending = true;
    } else {
        s->rollback_pending = false;
    }
    for (size_t i = 0; i < n && !s->fatal; i++) {
        part *p = chosen[i];
        /* No checkpoint yet: back to the first record consumed. */
        if (p->ckpt_offset < 0)
            p->base_offset = bases[i];
        if (p->base_offset >= 0)
            rd_kafka_topic_partition_list_add(seek, p->topic, p->partition)
                ->offset = p->base_offset;
        p->next_offset = -1;
    }
    free(chosen);
    free(bases);
    if (!s->fatal)
        seek_to(s, seek, "rollback");
    rd_kafka_topic_partition_list_destroy(seek);
    s->dr_failed = 0;
    s->dr_error[0] = '\0';
    s->since_ckpt = 0;
    update_filter_gauges(s);
}

/*
 * One checkpoint round for the partitions in `only` (NULL: all assigned):
 * flush and check deliveries, write each changed partition's checkpoint,
 * commit exactly the offsets written.  Returns 0, or -1 if anything failed
 * (nothing is committed for a partition whose checkpoint was not written).
 */
static int checkpoint(bs_stage *s, const rd_kafka_topic_partition_list_t *only,
                      const char *why)
{
    double t0 = bs_now();
    s->last_ckpt = t0;
    if (s->fatal)
        return -1;
    if (s->rollback_pending) {
        rollback(s, NULL);
        if (s->rollback_pending || s->fatal)
            return -1;
    }
    bool waiting = false;
    for (size_t i = 0; i < s->nparts; i++) {
        part *p = &s->parts[i];
        char err[1024];
        if (!p->need_initial || !in_list(only, p))
            continue;
        if (initial_checkpoint(s, p, err, sizeof(err)) == 0) {
            p->need_initial = false;
        } else {
            char q[1100];
            bs_log(BS_LOG_ERROR, "checkpoint failed", "topic=%s "
                   "partition=%d error=%s", p->topic, (int)p->partition,
                   bs_log_quote(err, q, sizeof(q)));
            INC(s->st.checkpoint_failures);
            waiting = true;
        }
    }
    if (!flush_producer(s) || s->dr_failed) {
        if (!s->dr_failed) {
            s->dr_failed = 1;
            snprintf(s->dr_error, sizeof(s->dr_error), "flush interrupted");
        }
        rollback(s, NULL);
        INC(s->st.checkpoint_failures);
        return -1;
    }
    /* exactly_once: the output's end now that everything is delivered: a
     * replay from this checkpoint starts there. */
    bs_ckpt_wm *wm = NULL;
    uint32_t nwm = 0;
    if (s->exactly_once) {
        char err[512];
        wm = calloc((size_t)s->out_parts, sizeof(*wm));
        if (!wm || bs_output_watermarks(s->producer, s->output_topic,
                                        s->out_parts, wm, 10000, err,
                                        sizeof(err)) != 0) {
            char eq[600];
            bs_log(BS_LOG_ERROR, "checkpoint failed", "error=%s",
                   bs_log_quote(wm ? err : "out of memory", eq, sizeof(eq)));
            free(wm);
            INC(s->st.checkpoint_failures);
            return -1;
        }
        nwm = (uint32_t)s->out_parts;
    }
    rd_kafka_topic_partition_list_t *commit =
        rd_kafka_topic_partition_list_new((int)s->nparts);
    int rc = 0;
    uint64_t bytes = 0;
    size_t *written = calloc(s->nparts ? s->nparts : 1, sizeof(*written));
    size_t nwritten = 0;
    char q[1100], err[1024];
    for (size_t i = 0; written && i < s->nparts; i++) {
        part *p = &s->parts[i];
        if (!in_list(only, p) || p->next_offset < 0 ||
            p->next_offset == p->ckpt_offset)
            continue;
        if (bs_store_put(s->store, p->topic, p->partition, p->next_offset,
                         wm, nwm, p->filter, err, sizeof(err)) != 0) {
            bs_log(BS_LOG_ERROR, "checkpoint failed", "topic=%s partition=%d"
                   " error=%s", p->topic, (int)p->partition,
                   bs_log_quote(err, q, sizeof(q)));
            INC(s->st.checkpoint_failures);
            rc = -1;
            continue;
        }
        written[nwritten++] = i;
    }
    /* Durable only now (the Kafka store's manifests): nothing of this
     * round is committed if that fails. */
    if (!written || bs_store_sync(s->store, err, sizeof(err)) != 0) {
        bs_log(BS_LOG_ERROR, "checkpoint failed", "error=%s",
               bs_log_quote(written ? err : "out of memory", q, sizeof(q)));
        INC(s->st.checkpoint_failures);
        rc = -1;
        nwritten = 0;
    }
    for (size_t w = 0; w < nwritten; w++) {
        part *p = &s->parts[written[w]];
        INC(s->st.checkpoints);
        bytes += bf_filter_serialized_size(p->filter);
        p->ckpt_offset = p->base_offset = p->next_offset;
        p->committed = -2; /* (marks it as in this round's commit list) */
        if (wm) {
            bs_ckpt_wm *copy = malloc(nwm * sizeof(*copy));
            if (copy) {
                memcpy(copy, wm, nwm * sizeof(*copy));
                free(p->wm);
                p->wm = copy;
                p->nwm = nwm;
            }
        }
        rd_kafka_topic_partition_list_add(commit, p->topic, p->partition)
            ->offset = p->next_offset;
    }
    /* A commit that failed earlier is made again even when nothing new was
     * checkpointed since (its checkpoint is durable already). */
    for (size_t i = 0; i < s->nparts; i++) {
        part *p = &s->parts[i];
        if (p->committed != -2 && in_list(only, p) && p->ckpt_offset >= 0 &&
            p->committed < p->ckpt_offset && !p->need_initial)
            rd_kafka_topic_partition_list_add(commit, p->topic, p->partition)
                ->offset = p->ckpt_offset;
    }
    if (commit->cnt > 0) {
        rd_kafka_resp_err_t cerr = rd_kafka_commit(s->consumer, commit, 0);
        if (cerr) {
            /* The checkpoints are durable and ahead of the committed
             * offsets: still safe (a restart resumes from the checkpoint);
             * the next round commits again. */
            bs_log(BS_LOG_WARN, "commit failed", "error=%s partitions=%d",
                   rd_kafka_err2name(cerr), commit->cnt);
        } else {
            for (int i = 0; i < commit->cnt; i++) {
                const rd_kafka_topic_partition_t *e = &commit->elems[i];
                if (e->err) {
                    bs_log(BS_LOG_WARN, "commit failed", "topic=%s "
                           "partition=%d error=%s", e->topic,
                           (int)e->partition, rd_kafka_err2name(e->err));
                    continue;
                }
                part *p = part_find(s, e->topic, e->partition);
                if (p)
                    p->committed = e->offset;
            }
            INC(s->st.commits);
        }
        double dt = bs_now() - t0;
        SET(s->st.checkpoint_bytes, bytes);
        SET(s->st.checkpoint_us, (uint64_t)(dt * 1e6));
        INC(s->ckpt_rounds);
        atomic_fetch_add_explicit(&s->ckpt_sum_us, (uint64_t)(dt * 1e6),
                                  memory_order_relaxed);
        for (int b = 0; b < BS_CKPT_BUCKETS; b++)
            if (dt <= bs_ckpt_bucket_bounds[b])
                INC(s->ckpt_hist[b]);
        bs_log(BS_LOG_DEBUG, "checkpoint", "reason=%s partitions=%d bytes=%llu"
               " seconds=%.3f", why, commit->cnt, (unsigned long long)bytes,
               dt);
    }
    s->commit_behind = false;
    for (size_t i = 0; i < s->nparts; i++)
        if (s->parts[i].committed == -2 ||
            (s->parts[i].ckpt_offset >= 0 &&
             s->parts[i].committed < s->parts[i].ckpt_offset &&
             !s->parts[i].need_initial)) {
            if (s->parts[i].committed == -2)
                s->parts[i].committed = -1; /* its commit failed */
            s->commit_behind = true;
        }
    rd_kafka_topic_partition_list_destroy(commit);
    free(written);
    free(wm);
    if (waiting)
        rc = -1; /* some partition still has no first checkpoint */
    if (rc == 0)
        s->since_ckpt = 0;
    update_filter_gauges(s);
    return rc;
}

/* After a failed round: pause consumption and retry with backoff; resume
 * when a round succeeds.  Nothing is lost meanwhile: the filters and
 * offsets stay in memory and the records stay in Kafka. */
static void checkpoint_round(bs_stage *s, const char *why)
{
    if (checkpoint(s, NULL, why) == 0) {
        if (s->failing) {
            bs_log(BS_LOG_INFO, "checkpoints recovered, resuming", NULL);
            s->failing = false;
            atomic_store(&s->pub_failing, false);
            s->backoff = 0;
            if (s->paused)
                pause_all(s, false);
        }
        return;
    }
    s->failing = true;
    atomic_store(&s->pub_failing, true);
    s->backoff = s->backoff == 0 ? BACKOFF_MIN : s->backoff * 2;
    if (s->backoff > BACKOFF_MAX)
        s->backoff = BACKOFF_MAX;
    s->retry_at = bs_now() + s->backoff;
    if (!s->paused) {
        bs_log(BS_LOG_WARN, "checkpoint round failed, pausing consumption",
               "retry_in_s=%.1f", s->backoff);
        pause_all(s, true);
    }
}

/* -- rebalancing ----------------------------------------------------------- */

static void on_assign(bs_stage *s, rd_kafka_topic_partition_list_t *parts)
{
    for (int i = 0; i < parts->cnt; i++) {
        rd_kafka_topic_partition_t *tp = &parts->elems[i];
        if (!part_find(s, tp->topic, tp->partition) &&
            !part_add(s, tp->topic, tp->partition)) {
            s->fatal = true;
            snprintf(s->fatal_err, sizeof(s->fatal_err), "out of memory");
            return;
        }
    }
    /* Pointers only now: part_add may move the array. */
    part **chosen = calloc((size_t)parts->cnt + 1, sizeof(*chosen));
    if (!chosen) {
        s->fatal = true;
        snprintf(s->fatal_err, sizeof(s->fatal_err), "out of memory");
        return;
    }
    for (int i = 0; i < parts->cnt; i++)
        chosen[i] = part_find(s, parts->elems[i].topic,
                            parts->elems[i].partition);
    char err[1024];
    if (restore(s, chosen, (size_t)parts->cnt, err, sizeof(err)) != 0) {
        s->fatal = true;
        snprintf(s->fatal_err, sizeof(s->fatal_err), "cannot restore the "
                 "assigned partitions: %s", err);
        free(chosen);
        /* None of them is taken: no half-restored state stays behind. */
        for (int i = 0; i < parts->cnt; i++)
            part_remove(s, parts->elems[i].topic, parts->elems[i].partition);
        update_filter_gauges(s);
        return;
    }
    for (int i = 0; i < parts->cnt; i++) {
        rd_kafka_topic_partition_t *tp = &parts->elems[i];
        part *p = chosen[i];
        /* Invariant 4: resume exactly where the checkpoint ends (the
         * committed offset may lag it, never lead it). */
        if (p->ckpt_offset >= 0)
            tp->offset = p->ckpt_offset;
        bs_log(BS_LOG_INFO, "partition assigned", "topic=%s partition=%d "
               "checkpoint_offset=%lld already_forwarded=%zu", tp->topic,
               (int)tp->partition, (long long)p->ckpt_offset, p->nskip);
    }
    free(chosen);
    update_filter_gauges(s);
}

static void rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    bs_stage *s = opaque;
    /* The held record belongs to the assignment before this one. */
    release_held(s);
    bool cooperative = !strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE");
    rd_kafka_error_t *e = NULL;
    rd_kafka_resp_err_t aerr = RD_KAFKA_RESP_ERR_NO_ERROR;
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        on_assign(s, parts);
        if (s->fatal) {
            /* Take nothing: no record of a partition whose state is
             * unusable may be processed. */
            bs_stage_stop(s);
            return;
        }
        if (cooperative)
            e = rd_kafka_incremental_assign(rk, parts);
        else
            aerr = rd_kafka_assign(rk, parts);
        /* librdkafka keeps a partition's pause flag across revocation and
         * re-assignment: set it to what this stage wants, explicitly. */
        rd_kafka_topic_partition_list_t *hold =
            rd_kafka_topic_partition_list_new(parts->cnt);
        bool waiting = false;
        for (int i = 0; i < parts->cnt; i++) {
            part *p = part_find(s, parts->elems[i].topic,
                                parts->elems[i].partition);
            if (s->paused || (p && p->need_initial))
                rd_kafka_topic_partition_list_add(hold, parts->elems[i].topic,
                                                  parts->elems[i].partition);
            waiting |= p && p->need_initial;
        }
        rd_kafka_resume_partitions(rk, parts);
        if (hold->cnt > 0)
            rd_kafka_pause_partitions(rk, hold);
        rd_kafka_topic_partition_list_destroy(hold);
        if (waiting && !s->failing) {
            /* Retry their first checkpoint as any failed round is. */
            s->failing = true;
            atomic_store(&s->pub_failing, true);
            s->backoff = BACKOFF_MIN;
            s->retry_at = bs_now() + s->backoff;
            pause_all(s, true);
        }
    } else if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS) {
        if (rd_kafka_assignment_lost(rk)) {
            bs_log(BS_LOG_WARN, "assignment lost, committing nothing",
                   "partitions=%d", parts->cnt);
        } else if (!s->fatal) {
            /* Checkpoint and commit before giving them up, so the next
             * owner starts from this state. */
            checkpoint(s, parts, "revoke");
        }
        for (int i = 0; i < parts->cnt; i++)
            part_remove(s, parts->elems[i].topic, parts->elems[i].partition);
        update_filter_gauges(s);
        /* Not paused when they come back (see the assignment above). */
        rd_kafka_resume_partitions(rk, parts);
        if (cooperative)
            e = rd_kafka_incremental_unassign(rk, parts);
        else
            aerr = rd_kafka_assign(rk, NULL);
    } else {
        bs_log(BS_LOG_ERROR, "rebalance failed", "error=%s",
               rd_kafka_err2name(err));
        aerr = rd_kafka_assign(rk, NULL);
    }
    if (e) {
        char eq[512];
        bs_log(BS_LOG_ERROR, "assignment failed", "error=%s",
               bs_log_quote(rd_kafka_error_string(e), eq, sizeof(eq)));
        rd_kafka_error_destroy(e);
    } else if (aerr) {
        bs_log(BS_LOG_ERROR, "assignment failed", "error=%s",
               rd_kafka_err2name(aerr));
    }
}

/* -- the record path ------------------------------------------------------- */

/* "TOPIC:PARTITION:OFFSET" without printf (once per record).  Topic names
 * are at most 249 bytes; buf must hold 249 + 1 + 11 + 1 + 20 + 1. */
static size_t format_src(char *buf, size_t size, const char *topic,
                         int32_t partition, int64_t offset)
{
    size_t tl = strlen(topic);
    if (tl + 34 > size)
        tl = size - 34;
    memcpy(buf, topic, tl);
    char *p = buf + tl;
    *p++ = ':';
    char tmp[24];
    int n = 0;
    uint64_t v = partition < 0 ? 0 : (uint64_t)partition;
    do
        tmp[n++] = (char)('0' + v % 10);
    while (v /= 10);
    while (n)
        *p++ = tmp[--n];
    *p++ = ':';
    v = offset < 0 ? 0 : (uint64_t)offset;
    do
        tmp[n++] = (char)('0' + v % 10);
    while (v /= 10);
    while (n)
        *p++ = tmp[--n];
    *p = '\0';
    return (size_t)(p - buf);
}

/* Produces a copy of m to `topic` with its key, value, timestamp and
 * headers, plus bloomstage-src (TOPIC:PARTITION:OFFSET of the input) and,
 * for rejected records, bloomstage-reason.  Waits while the producer queue
 * is full: a consumed record is never dropped for lack of room. */
static void produce(bs_stage *s, rd_kafka_message_t *m, rd_kafka_topic_t *rkt,
                    const char *reason)
{
    /* The record's own headers move to the copy (no copying); the caller
     * has taken every key it needed from them. */
    rd_kafka_headers_t *hdrs = NULL;
    if (rd_kafka_message_detach_headers(m, &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR ||
        !hdrs)
        hdrs = rd_kafka_headers_new(2);
    char src[320];
    size_t n = format_src(src, sizeof(src), rd_kafka_topic_name(m->rkt),
                          m->partition, m->offset);
    rd_kafka_header_add(hdrs, HDR_SRC, -1, src, (ssize_t)n);
    if (reason)
        rd_kafka_header_add(hdrs, HDR_REASON, -1, reason, -1);
    rd_kafka_timestamp_type_t tstype;
    int64_t ts = rd_kafka_message_timestamp(m, &tstype);
    for (;;) {
        rd_kafka_resp_err_t err = rd_kafka_producev(
            s->producer, RD_KAFKA_V_RKT(rkt),
            RD_KAFKA_V_KEY(m->key, m->key_len),
            RD_KAFKA_V_VALUE(m->payload, m->len),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_TIMESTAMP(ts > 0 ? ts : 0), RD_KAFKA_V_HEADERS(hdrs),
            RD_KAFKA_V_END);
        if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
            return; /* the producer owns hdrs now */
        if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            rd_kafka_poll(s->producer, 50);
            continue;
        }
        /* Not queued: count it as a failed delivery, so the next
         * checkpoint rolls back and the record is processed again. */
        rd_kafka_headers_destroy(hdrs);
        if (s->dr_failed++ == 0)
            snprintf(s->dr_error, sizeof(s->dr_error), "produce to %s "
                     "failed: %s", rd_kafka_topic_name(rkt),
                     rd_kafka_err2str(err));
        INC(s->st.delivery_failures);
        return;
    }
}

static void drop(bs_stage *s, rd_kafka_message_t *m, const char *reason)
{
    if (s->rej_rkt) {
        produce(s, m, s->rej_rkt, reason);
        INC(s->st.rejected_out);
    }
}

static void process(bs_stage *s, rd_kafka_message_t *m, const prepared *pp)
{
    const char *topic = rd_kafka_topic_name(m->rkt);
    part *p = part_find(s, topic, m->partition);
    if (!p) {
        /* Fetched before its partition was revoked, handed out after: not
         * ours any more (its next owner starts from the checkpoint). */
        bs_log(BS_LOG_DEBUG, "record from an unassigned partition skipped",
               "topic=%s partition=%d offset=%lld", topic, (int)m->partition,
               (long long)m->offset);
        return;
    }
    if (p->need_initial || s->rollback_pending)
        return; /* held: comes again after the resume's seek */
    INC(s->st.records_in);
    if (p->base_offset < 0)
        p->base_offset = m->offset;
    p->next_offset = m->offset + 1;
    s->since_ckpt++;

    /* exactly_once: forwarded before a crash or rollback (the output tail
     * shows it), its key is in the filter already: do not produce again. */
    while (p->skip_i < p->nskip && p->skip[p->skip_i] < m->offset)
        p->skip_i++;
    if (p->skip_i < p->nskip && p->skip[p->skip_i] == m->offset) {
        p->skip_i++;
        INC(s->st.replayed);
        if (p->skip_i == p->nskip) {
            free(p->skip);
            p->skip = NULL;
            p->nskip = p->skip_i = 0;
        }
        return;
    }

    for (size_t i = 0; i < s->nlists; i++) {
        if (!pp->list_have[i])
            continue; /* no such key: this list cannot match */
        bs_blocklist *bl = &s->lists[i];
        if (bf_filter_contains_h(bl->filter, pp->list_h[i])) {
            char reason[300];
            snprintf(reason, sizeof(reason), "blocklist:%s", bl->name);
            INC(s->st.dropped_blocklist);
            INC(s->list_drops[i]);
            drop(s, m, reason);
            return;
        }
    }

    if (!pp->have) {
        INC(s->st.missing_key);
        if (s->reject_missing) {
            drop(s, m, "missing-key");
            return;
        }
        produce(s, m, s->out_rkt, NULL);
        INC(s->st.records_out);
        return;
    }
    int added =
        bf_scalable_add_if_absent_h(bf_filter_scalable(p->filter), pp->h);
    if (added == 0) {
        INC(s->st.dropped_duplicate);
        drop(s, m, "duplicate");
        return;
    }
    if (added < 0 && !s->filter_full_logged) {
        /* dedup.max.bytes reached: forwarding without dedup loses nothing;
         * dropping would. */
        s->filter_full_logged = true;
        bs_log(BS_LOG_ERROR, "dedup filter at dedup.max.bytes, forwarding "
               "without dedup", "topic=%s partition=%d", topic,
               (int)m->partition);
    }
    produce(s, m, s->out_rkt, NULL);
    INC(s->st.records_out);
}

/* Takes a polled record's keys and hashes them, and starts bringing the
 * filter blocks they will touch into the cache: the lookups come one poll
 * later (hold), when the blocks are there instead of ~100 ns away.  The
 * filters and partitions may change before then (a new layer, a
 * rebalance): process() looks everything up again, only the hashes
 * carry over, and they depend on the record alone. */
static void prepare(bs_stage *s, rd_kafka_message_t *m, prepared *pp)
{
    bs_record_keys keys;
    bs_record_keys_init(&keys, m);
    const void *key;
    size_t len;
    pp->have = bs_record_key(&keys, s->dedup_key, &key, &len);
    if (pp->have)
        pp->h = bf_hash_key(key, len, s->fparams.seed);
    for (size_t i = 0; i < s->nlists; i++) {
        bs_blocklist *bl = &s->lists[i];
        if (s->list_shares_hash[i]) {
            pp->list_have[i] = pp->have; /* one hash serves both */
            pp->list_h[i] = pp->h;
        } else {
            const void *bk;
            size_t blen;
            pp->list_have[i] = bs_record_key(&keys, bl->key, &bk, &blen);
            if (pp->list_have[i])
                pp->list_h[i] = bf_hash_key(bk, blen, bl->seed);
        }
        if (pp->list_have[i])
            bf_filter_prefetch_h(bl->filter, pp->list_h[i]);
    }
    bs_record_keys_reset(&keys);
    if (pp->have) {
        part *p = part_find(s, rd_kafka_topic_name(m->rkt), m->partition);
        if (p && p->filter)
            bf_filter_prefetch_h(p->filter, pp->h);
    }
}

/* The held record, processed now (or left, if consumption is paused: the
 * resume seeks back to it), then destroyed.  Called before anything that
 * checkpoints, seeks or rebalances, so that all of that sees every polled
 * record either processed or not consumed at all. */
static void release_held(bs_stage *s)
{
    rd_kafka_message_t *m = s->held;
    if (!m)
        return;
    s->held = NULL;
    if (!s->paused && !s->fatal)
        process(s, m, &s->prep[s->held_slot]);
    rd_kafka_message_destroy(m);
}

/* Holds m (just polled, no error) and processes the record held before:
 * a lookahead of one record. */
static void hold(bs_stage *s, rd_kafka_message_t *m)
{
    unsigned slot = s->held ? s->held_slot ^ 1u : s->held_slot;
    prepare(s, m, &s->prep[slot]);
    release_held(s);
    s->held = m;
    s->held_slot = slot;
}

/* -- set-up ---------------------------------------------------------------- */

typedef struct conf_ctx {
    rd_kafka_conf_t *conf;
    char *errstr;
    size_t errstr_size;
    const char *prefix;
} conf_ctx;

static int conf_set_cb(const char *key, const char *value, void *opaque)
{
    conf_ctx *c = opaque;
    char err[512];
    if (rd_kafka_conf_set(c->conf, key, value, err, sizeof(err)) !=
        RD_KAFKA_CONF_OK) {
        snprintf(c->errstr, c->errstr_size, "%s%s: %s", c->prefix, key, err);
        return -1;
    }
    return 0;
}

/* A librdkafka configuration: our defaults, then kafka.* and role.* keys
 * from the configuration (which override them), then what the stage needs
 * and must not be overridden. */
static rd_kafka_conf_t *client_conf(bs_stage *s, const char *role,
                                    const char *const *defaults,
                                    const char *const *forced, char *errstr,
                                    size_t errstr_size)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    conf_ctx c = {conf, errstr, errstr_size, ""};
    char prefix[32];
    for (size_t i = 0; defaults[i]; i += 2)
        if (conf_set_cb(defaults[i], defaults[i + 1], &c))
            goto fail;
    c.prefix = "kafka.";
    if (bs_config_foreach(s->cfg, "kafka.", conf_set_cb, &c))
        goto fail;
    snprintf(prefix, sizeof(prefix), "%s.", role);
    c.prefix = prefix;
    if (bs_config_foreach(s->cfg, prefix, conf_set_cb, &c))
        goto fail;
    c.prefix = "";
    for (size_t i = 0; forced[i]; i += 2)
        if (conf_set_cb(forced[i], forced[i + 1], &c))
            goto fail;
    rd_kafka_conf_set_opaque(conf, s);
    rd_kafka_conf_set_log_cb(conf, bs_log_rdkafka);
    rd_kafka_conf_set_error_cb(conf, error_cb);
    return conf;
fail:
    rd_kafka_conf_destroy(conf);
    return NULL;
}

static void drop_topics(bs_stage *s)
{
    if (s->out_rkt)
        rd_kafka_topic_destroy(s->out_rkt);
    if (s->rej_rkt)
        rd_kafka_topic_destroy(s->rej_rkt);
    s->out_rkt = s->rej_rkt = NULL;
}

static int recreate_producer(bs_stage *s, char *errstr, size_t errstr_size)
{
    static const char *const defaults[] = {
        "client.id", "bloomstage", "linger.ms", "5",
        "compression.type", "lz4", NULL};
    static const char *const forced[] = {"enable.idempotence", "true", NULL};
    rd_kafka_conf_t *conf =
        client_conf(s, "producer", defaults, forced, errstr, errstr_size);
    if (!conf)
        return -1;
    rd_kafka_conf_set_dr_msg_cb(conf, dr_msg_cb);
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
    if (!rk) {
        rd_kafka_conf_destroy(conf);
        snprintf(errstr, errstr_size, "cannot create the producer: %s", err);
        return -1;
    }
    rd_kafka_topic_t *out = rd_kafka_topic_new(rk, s->output_topic, NULL);
    rd_kafka_topic_t *rej =
        s->rejected_topic ? rd_kafka_topic_new(rk, s->rejected_topic, NULL)
                          : NULL;
    if (!out || (s->rejected_topic && !rej)) {
        snprintf(errstr, errstr_size, "cannot use the output topics: %s",
                 rd_kafka_err2str(rd_kafka_last_error()));
        if (out)
            rd_kafka_topic_destroy(out);
        if (rej)
            rd_kafka_topic_destroy(rej);
        rd_kafka_destroy(rk);
        return -1;
    }
    if (s->producer) {
        /* A fatal producer: what it still holds is failed anyway. */
        rd_kafka_purge(s->producer, RD_KAFKA_PURGE_F_QUEUE |
                                        RD_KAFKA_PURGE_F_INFLIGHT);
        rd_kafka_flush(s->producer, 1000);
        drop_topics(s);
        rd_kafka_destroy(s->producer);
    }
    s->producer = rk;
    s->out_rkt = out;
    s->rej_rkt = rej;
    return 0;
}

bs_stage *bs_stage_new(const bs_config *cfg, char *errstr, size_t errstr_size)
{
    bs_stage *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(errstr, errstr_size, "out of memory");
        return NULL;
    }
    s->cfg = cfg;
    pthread_mutex_init(&s->pub_lock, NULL);
    s->output_topic = bs_config_get_str(cfg, "output.topic");
    const char *rej = bs_config_get_str(cfg, "rejected.topic");
    s->rejected_topic = rej && *rej ? rej : NULL;
    s->dedup_key = bs_config_get_keyspec(cfg, "dedup.key");
    s->reject_missing = bs_config_get_enum(cfg, "dedup.on.missing.key") ==
                        BS_CONFIG_MISSING_REJECT;
    s->exactly_once = bs_config_get_enum(cfg, "processing.guarantee") ==
                      BS_CONFIG_EXACTLY_ONCE;
    if (s->reject_missing && !s->rejected_topic) {
        snprintf(errstr, errstr_size, "dedup.on.missing.key=reject needs "
                 "rejected.topic (%s)",
                 bs_config_origin(cfg, "dedup.on.missing.key"));
        goto fail;
    }
    bf_scalable_params_default(&s->fparams);
    s->fparams.initial_capacity =
        (uint64_t)bs_config_get_int(cfg, "dedup.capacity");
    s->fparams.fpr = bs_config_get_double(cfg, "dedup.fpr");
    s->fparams.growth = bs_config_get_double(cfg, "dedup.growth");
    s->fparams.tightening = bs_config_get_double(cfg, "dedup.tightening");
    s->fparams.max_bytes = (uint64_t)bs_config_get_int(cfg, "dedup.max.bytes");
    s->ckpt_dir = bs_config_get_str(cfg, "checkpoint.dir");
    s->ckpt_interval =
        (double)bs_config_get_int(cfg, "checkpoint.interval.ms") / 1000.0;
    s->ckpt_records = (uint64_t)bs_config_get_int(cfg, "checkpoint.records");
    s->stats_interval =
        (double)bs_config_get_int(cfg, "log.stats.interval.ms") / 1000.0;

    if (mkdir(s->ckpt_dir, 0755) != 0 && errno != EEXIST) {
        snprintf(errstr, errstr_size, "checkpoint.dir %s: %s", s->ckpt_dir,
                 strerror(errno));
        goto fail;
    }
    struct stat st;
    if (stat(s->ckpt_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(errstr, errstr_size, "checkpoint.dir %s: not a directory",
                 s->ckpt_dir);
        goto fail;
    }


    /* Blocklists before joining the group: a broken one stops start-up
     * before anything is consumed. */
    if (bs_blocklists_load(cfg, &s->lists, &s->nlists, errstr,
                           errstr_size) != 0)
        goto fail;
    size_t nl = s->nlists ? s->nlists : 1;
    s->list_drops = calloc(nl, sizeof(counter));
    s->list_shares_hash = calloc(nl, sizeof(bool));
    for (int i = 0; i < 2; i++) {
        s->prep[i].list_have = calloc(nl, sizeof(bool));
        s->prep[i].list_h = calloc(nl, sizeof(bf_hash));
    }
    if (!s->list_drops || !s->list_shares_hash || !s->prep[0].list_have ||
        !s->prep[0].list_h || !s->prep[1].list_have || !s->prep[1].list_h) {
        snprintf(errstr, errstr_size, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < s->nlists; i++)
        s->list_shares_hash[i] =
            s->lists[i].seed == s->fparams.seed &&
            bs_keyspec_equal(s->lists[i].key, s->dedup_key);
    for (size_t i = 0; i < s->nlists; i++) {
        bf_info in;
        char hb[32];
        bf_filter_info(s->lists[i].filter, &in);
        bs_log(BS_LOG_INFO, "blocklist loaded", "name=%s entries=%llu "
               "kind=%s memory=\"%s\" source=%s", s->lists[i].name,
               (unsigned long long)s->lists[i].entries, bf_kind_name(in.kind),
               bs_human_bytes(in.bytes, hb, sizeof(hb)),
               s->lists[i].from_list ? "list" : "filter");
    }

    if (recreate_producer(s, errstr, errstr_size) != 0)
        goto fail;

    const char *group = bs_config_get_str(cfg, "consumer.group.id");
    static const char *const cdefaults[] = {
        "client.id", "bloomstage", "auto.offset.reset", "earliest",
        "partition.assignment.strategy", "cooperative-sticky",
        "statistics.interval.ms", "5000",
        /* librdkafka 2.0.2 stops fetching for a full second once this
         * many records are queued (the default, 100k, is about 0.2 s of
         * work here): keep fetching instead, memory is still bounded by
         * queued.max.messages.kbytes. */
        "queued.min.messages", "1000000", NULL};
    const char *cforced[] = {"enable.auto.commit", "false",
                             "enable.auto.offset.store", "false",
                             "group.id", group, NULL};
    rd_kafka_conf_t *cconf = client_conf(s, "consumer", cdefaults, cforced,
                                         errstr, errstr_size);
    if (!cconf)
        goto fail;
    rd_kafka_conf_set_rebalance_cb(cconf, rebalance_cb);
    rd_kafka_conf_set_stats_cb(cconf, stats_cb);
    char err[512];
    s->consumer = rd_kafka_new(RD_KAFKA_CONSUMER, cconf, err, sizeof(err));
    if (!s->consumer) {
        rd_kafka_conf_destroy(cconf);
        snprintf(errstr, errstr_size, "cannot create the consumer: %s", err);
        goto fail;
    }
    rd_kafka_poll_set_consumer(s->consumer);

    bool kafka_store = bs_config_get_enum(cfg, "checkpoint.store") ==
                       BS_CONFIG_STORE_KAFKA;
    if (s->exactly_once || kafka_store) {
        /* Reads the output tail: assigned, never subscribed, commits
         * nothing; its group id is never joined. */
        /* It reads to a known end: a fetch that waits for more data
         * only adds latency to a restore. */
        static const char *const tdefaults[] = {
            "client.id", "bloomstage-replay", "fetch.wait.max.ms", "10",
            NULL};
        char tgroup[300];
        snprintf(tgroup, sizeof(tgroup), "%s.replay", group);
        const char *tforced[] = {"enable.auto.commit", "false",
                                 "enable.auto.offset.store", "false",
                                 "enable.partition.eof", "true",
                                 "group.id", tgroup, NULL};
        rd_kafka_conf_t *tconf = client_conf(s, "consumer", tdefaults,
                                             tforced, errstr, errstr_size);
        if (!tconf)
            goto fail;
        s->tail = rd_kafka_new(RD_KAFKA_CONSUMER, tconf, err, sizeof(err));
        if (!s->tail) {
            rd_kafka_conf_destroy(tconf);
            snprintf(errstr, errstr_size, "cannot create the replay "
                     "consumer: %s", err);
            goto fail;
        }
        rd_kafka_poll_set_consumer(s->tail);
    }

    /* The checkpoint store, checked before the group is joined: a damaged
     * checkpoint stops start-up before anything is consumed. */
    rd_kafka_conf_t *sconf = NULL;
    if (kafka_store) {
        static const char *const sdefaults[] = {
            "client.id", "bloomstage-checkpoints", "linger.ms", "1",
            "message.max.bytes", "20000000", NULL};
        static const char *const sforced[] = {
            "enable.idempotence", "true", "acks", "all",
            "allow.auto.create.topics", "false", NULL};
        sconf = client_conf(s, "producer", sdefaults, sforced, errstr,
                            errstr_size);
        if (!sconf)
            goto fail;
    }
    s->store = bs_store_new(cfg, s->tail, sconf, errstr, errstr_size);
    if (!s->store || bs_store_check(s->store, errstr, errstr_size) != 0)
        goto fail;
    return s;
fail:
    bs_stage_destroy(s);
    return NULL;
}

/* -- reporting ------------------------------------------------------------- */

static int64_t total_lag(bs_stage *s)
{
    int64_t lag = 0;
    bool known = false;
    for (size_t i = 0; i < s->nparts; i++)
        if (s->parts[i].lag >= 0) {
            lag += s->parts[i].lag;
            known = true;
        }
    return known ? lag : -1;
}

/* The periodic stats log line, and the live status line on a terminal. */
static void report(bs_stage *s, double now)
{
    bool status = s->stats_interval > 0 && bs_log_is_tty() &&
                  now - s->last_status >= 1.0;
    bool stats = s->stats_interval > 0 &&
                 now - s->last_stats >= s->stats_interval;
    if (!status && !stats)
        return;
    bs_stage_stats st;
    bs_stage_stats_get(s, &st);
    int64_t lag = total_lag(s);
    if (stats) {
        double dt = s->last_stats > 0 ? now - s->last_stats : 0;
        double rate = dt > 0 ? (double)(st.records_in - s->stats_in_before) /
                                   dt
                             : 0;
        bs_log(BS_LOG_INFO, "stats", "records_in=%llu records_out=%llu "
               "duplicates=%llu blocked=%llu missing_key=%llu rate=%.0f "
               "lag=%lld partitions=%u filter_bytes=%llu checkpoints=%llu "
               "checkpoint_failures=%llu commits=%llu",
               (unsigned long long)st.records_in,
               (unsigned long long)st.records_out,
               (unsigned long long)st.dropped_duplicate,
               (unsigned long long)st.dropped_blocklist,
               (unsigned long long)st.missing_key, rate, (long long)lag,
               st.partitions, (unsigned long long)st.filter_bytes,
               (unsigned long long)st.checkpoints,
               (unsigned long long)st.checkpoint_failures,
               (unsigned long long)st.commits);
        s->last_stats = now;
        s->stats_in_before = st.records_in;
    }
    if (status) {
        double dt = s->last_status > 0 ? now - s->last_status : 0;
        double rate = dt > 0 ? (double)(st.records_in - s->status_in_before) /
                                   dt
                             : 0;
        char line[256], lagbuf[32];
        if (lag >= 0)
            snprintf(lagbuf, sizeof(lagbuf), "%lld", (long long)lag);
        else
            snprintf(lagbuf, sizeof(lagbuf), "?");
        snprintf(line, sizeof(line), "in %llu (%.0f/s)  out %llu  dup %llu  "
                 "blocked %llu  lag %s  partitions %u  %s",
                 (unsigned long long)st.records_in, rate,
                 (unsigned long long)st.records_out,
                 (unsigned long long)st.dropped_duplicate,
                 (unsigned long long)st.dropped_blocklist, lagbuf,
                 st.partitions,
                 s->failing ? "CHECKPOINTS FAILING" : "checkpoints ok");
        bs_log_status(line);
        s->last_status = now;
        s->status_in_before = st.records_in;
    }
}

/* -- the loop -------------------------------------------------------------- */

int bs_stage_run(bs_stage *s, char *errstr, size_t errstr_size)
{
    if (s->exactly_once) {
        s->out_parts = bs_topic_partitions(s->producer, s->output_topic,
                                           10000, errstr, errstr_size);
        if (s->out_parts <= 0) {
            size_t l = strlen(errstr);
            snprintf(errstr + l, errstr_size - l, " (processing.guarantee="
                     "exactly_once reads the output topic: it must exist)");
            return -1;
        }
    }
    const char *const *topics;
    size_t ntopics = bs_config_get_topics(s->cfg, "input.topics", &topics);
    rd_kafka_topic_partition_list_t *sub =
        rd_kafka_topic_partition_list_new((int)ntopics);
    for (size_t i = 0; i < ntopics; i++)
        rd_kafka_topic_partition_list_add(sub, topics[i],
                                          RD_KAFKA_PARTITION_UA);
    rd_kafka_resp_err_t err = rd_kafka_subscribe(s->consumer, sub);
    rd_kafka_topic_partition_list_destroy(sub);
    if (err) {
        snprintf(errstr, errstr_size, "cannot subscribe to input.topics: %s",
                 rd_kafka_err2str(err));
        return -1;
    }
    char q[400];
    bs_log(BS_LOG_INFO, "started", "input=%s output=%s group=%s "
           "checkpoints=%s guarantee=%s malloc=%s",
           bs_config_get_str(s->cfg, "input.topics"), s->output_topic,
           bs_config_get_str(s->cfg, "consumer.group.id"),
           bs_log_quote(bs_store_describe(s->store), q, sizeof(q)),
           s->exactly_once ? "exactly_once" : "at_least_once",
           bs_allocator());
    s->last_ckpt = s->last_stats = bs_now();
    /* One record per poll: librdkafka 2.0.2's batch consumption can skip
     * offsets around pause/resume (fixed in 2.1.0), and this stage pauses.
     * A record is processed one poll after it came (hold): its filter
     * blocks are fetched from memory meanwhile.  The bookkeeping below runs
     * every 64 records or when the poll comes back empty, with no record
     * held: per record it would cost as much as the work. */
    unsigned tick = 0;
    while (!atomic_load(&s->stop) && !s->fatal) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(s->consumer, 100);
        if (m) {
            if (!m->err) {
                hold(s, m);
            } else {
                if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                    char eq[512];
                    bs_log(BS_LOG_WARN, "consume error", "error=%s "
                           "detail=%s", rd_kafka_err2name(m->err),
                           bs_log_quote(rd_kafka_message_errstr(m), eq,
                                        sizeof(eq)));
                }
                rd_kafka_message_destroy(m);
            }
            if (++tick % 64 != 0)
                continue;
        }
        /* (Paused: a held record is left unprocessed; the resume seeks
         * back to the first record not processed, so it comes again.) */
        release_held(s);
        rd_kafka_poll(s->producer, 0);
        double now = bs_now();
        atomic_store(&s->last_poll_ms, (int64_t)(now * 1000));
        if (now - s->last_publish >= 1.0)
            update_filter_gauges(s);
        report(s, now);
        if (s->failing) {
            if (now >= s->retry_at)
                checkpoint_round(s, "retry");
        } else if (s->dr_failed ||
                   (s->ckpt_records && s->since_ckpt >= s->ckpt_records) ||
                   ((s->since_ckpt || s->commit_behind) &&
                    now - s->last_ckpt >= s->ckpt_interval)) {
            checkpoint_round(s, s->dr_failed ? "delivery-failure" : "trigger");
        }
    }
    release_held(s); /* processed unless fatal: then only destroyed */
    if (s->fatal) {
        snprintf(errstr, errstr_size, "%s", s->fatal_err);
        char fq[1100];
        bs_log(BS_LOG_ERROR, "stopping on a fatal error, committing nothing "
               "more", "error=%s", bs_log_quote(s->fatal_err, fq, sizeof(fq)));
        rd_kafka_consumer_close(s->consumer);
        return -1;
    }
    bs_log_status(NULL);
    /* Drain: a final checkpoint round (retried while it fails, as long as
     * nothing else is wrong), then leave the group; the revoke that follows
     * finds nothing new to write. */
    bs_log(BS_LOG_INFO, "draining", NULL);
    for (int attempt = 0; attempt < 5; attempt++) {
        if (checkpoint(s, NULL, "shutdown") == 0)
            break;
        if (s->fatal)
            break;
        /* A rollback rewound some partitions: those records are processed
         * again by whoever owns the partitions next. */
    }
    rd_kafka_consumer_close(s->consumer);
    rd_kafka_flush(s->producer, 10000);
    bs_stage_stats st;
    bs_stage_stats_get(s, &st);
    bs_log(BS_LOG_INFO, "stopped", "records_in=%llu records_out=%llu "
           "duplicates=%llu blocked=%llu missing_key=%llu commits=%llu",
           (unsigned long long)st.records_in,
           (unsigned long long)st.records_out,
           (unsigned long long)st.dropped_duplicate,
           (unsigned long long)st.dropped_blocklist,
           (unsigned long long)st.missing_key, (unsigned long long)st.commits);
    if (s->fatal) {
        snprintf(errstr, errstr_size, "%s", s->fatal_err);
        return -1;
    }
    return 0;
}

void bs_stage_stop(bs_stage *s) { atomic_store(&s->stop, true); }

void bs_stage_stats_get(bs_stage *s, bs_stage_stats *o)
{
    o->records_in = GET(s->st.records_in);
    o->records_out = GET(s->st.records_out);
    o->dropped_duplicate = GET(s->st.dropped_duplicate);
    o->dropped_blocklist = GET(s->st.dropped_blocklist);
    o->missing_key = GET(s->st.missing_key);
    o->rejected_out = GET(s->st.rejected_out);
    o->delivery_failures = GET(s->st.delivery_failures);
    o->rollbacks = GET(s->st.rollbacks);
    o->replayed = GET(s->st.replayed);
    o->checkpoints = GET(s->st.checkpoints);
    o->checkpoint_failures = GET(s->st.checkpoint_failures);
    o->commits = GET(s->st.commits);
    o->checkpoint_bytes = GET(s->st.checkpoint_bytes);
    o->checkpoint_seconds = (double)GET(s->st.checkpoint_us) / 1e6;
    o->filter_bytes = GET(s->st.filter_bytes);
    o->partitions = (uint32_t)GET(s->st.partitions);
    o->filter_layers = (uint32_t)GET(s->st.filter_layers);
}

const double bs_ckpt_bucket_bounds[BS_CKPT_BUCKETS] = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0};

void bs_stage_checkpoint_hist(bs_stage *s, bs_stage_hist *out)
{
    out->count = GET(s->ckpt_rounds);
    out->sum = (double)GET(s->ckpt_sum_us) / 1e6;
    for (int b = 0; b < BS_CKPT_BUCKETS; b++)
        out->buckets[b] = GET(s->ckpt_hist[b]);
}

size_t bs_stage_partitions(bs_stage *s, bs_part_metrics *out, size_t max)
{
    pthread_mutex_lock(&s->pub_lock);
    size_t n = s->npub;
    if (out)
        memcpy(out, s->pub, (n < max ? n : max) * sizeof(*out));
    pthread_mutex_unlock(&s->pub_lock);
    return n;
}

bool bs_stage_ready(bs_stage *s, char *why, size_t why_size)
{
    const char *no = NULL;
    int64_t last = atomic_load(&s->last_poll_ms);
    if (GET(s->st.partitions) == 0)
        no = "no partitions assigned";
    else if (last == 0 || bs_now() * 1000 - (double)last > 10000)
        no = "the poll loop has not turned for 10 s";
    else if (atomic_load(&s->pub_failing))
        no = "checkpoints are failing";
    else if (atomic_load(&s->pub_paused))
        no = "consumption is paused";
    if (why && why_size)
        snprintf(why, why_size, "%s", no ? no : "ready");
    return no == NULL;
}

size_t bs_stage_blocklists(bs_stage *s) { return s->nlists; }
const char *bs_stage_blocklist_name(bs_stage *s, size_t i)
{
    return i < s->nlists ? s->lists[i].name : NULL;
}
uint64_t bs_stage_blocklist_drops(bs_stage *s, size_t i)
{
    return i < s->nlists ? GET(s->list_drops[i]) : 0;
}

void bs_stage_destroy(bs_stage *s)
{
    if (!s)
        return;
    if (s->held)
        rd_kafka_message_destroy(s->held);
    if (s->consumer)
        rd_kafka_destroy(s->consumer);
    bs_store_destroy(s->store);
    if (s->tail) {
        rd_kafka_consumer_close(s->tail);
        rd_kafka_destroy(s->tail);
    }
    drop_topics(s);
    if (s->producer)
        rd_kafka_destroy(s->producer);
    for (size_t i = 0; i < s->nparts; i++)
        part_free(&s->parts[i]);
    free(s->parts);
    bs_blocklists_free(s->lists, s->nlists);
    free((void *)s->list_drops);
    free(s->list_shares_hash);
    for (int i = 0; i < 2; i++) {
        free(s->prep[i].list_have);
        free(s->prep[i].list_h);
    }
    free(s->pub);
    pthread_mutex_destroy(&s->pub_lock);
    free(s);
}
