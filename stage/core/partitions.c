/*
 * partitions.c -- the stage's assigned input partitions: lookup, adding and
 * removing them, and restoring one to its last checkpoint (the filter and
 * offsets from the store, then, with exactly_once, the output tail since).
 *
 * Owns each part's filter, watermarks and skip list; s->parts is an array
 * that moves when it grows, so a part pointer is valid only until the next
 * bs_part_add or bs_part_remove.
 */
#include "core/partitions.h"
#include "core/stage_int.h"
#include "kafka/kafka_util.h"
#include "base/log.h"
#include "checkpoint/replay.h"
#include "base/util.h"
#include "core/state.h"
#include "core/startup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

part *bs_part_find(bs_stage *s, const char *topic, int32_t partition)
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

void bs_part_free(part *p)
{
    free(p->topic);
    bf_filter_destroy(p->filter);
    bf_audit_destroy(p->audit);
    free(p->wm);
    free(p->skip);
    free(p->skip_keys);
}

void bs_part_remove(bs_stage *s, const char *topic, int32_t partition)
{
    part *p = bs_part_find(s, topic, partition);
    if (!p)
        return;
    bs_part_free(p);
    *p = s->parts[--s->nparts];
    s->last_hit = 0;
}

part *bs_part_add(bs_stage *s, const char *topic, int32_t partition)
{
    part *np = bs_grow(s->parts, &s->capparts, s->nparts + 1, sizeof(*np), 16);
    if (!np)
        return NULL;
    s->parts = np;
    part *p = &s->parts[s->nparts];
    memset(p, 0, sizeof(*p));
    p->topic = strdup(topic);
    if (!p->topic)
        return NULL;
    p->partition = partition;
    p->state = BS_PART_RESTORING;
    p->base_offset = p->next_offset = p->ckpt_offset = -1;
    p->committed = -1;
    p->txn_from = -1;
    p->lag = -1;
    p->redo_to = -1;
    p->wait_at = -1;
    p->committed_at = bs_unix_now();
    s->nparts++;
    return p;
}

bool bs_part_in_txn(const part *p)
{
    return p->next_offset >= 0 && p->next_offset != p->txn_from;
}

void bs_parts_txn_aborted(bs_stage *s)
{
    for (size_t i = 0; i < s->nparts; i++)
        if (bs_part_in_txn(&s->parts[i]))
            s->parts[i].txn_aborted = true;
}

void bs_parts_txn_committed(bs_stage *s)
{
    for (size_t i = 0; i < s->nparts; i++)
        s->parts[i].txn_from = s->parts[i].next_offset;
}

bool bs_parts_owe(const bs_stage *s)
{
    for (size_t i = 0; i < s->nparts; i++) {
        const part *p = &s->parts[i];
        if (p->next_offset > p->ckpt_offset || p->redo_to > p->ckpt_offset)
            return true;
    }
    return false;
}

bool bs_parts_commit_behind(const bs_stage *s)
{
    for (size_t i = 0; i < s->nparts; i++) {
        const part *p = &s->parts[i];
        if (p->ckpt_offset >= 0 && p->committed < p->ckpt_offset &&
            p->state != BS_PART_WAITING_FIRST)
            return true;
    }
    return false;
}

/* A checkpoint keeps the filter it was written with, as a scalable one
 * keeps its layers: a window set or changed since applies to partitions
 * that start without state.  Said once per partition restored. */
static void warn_window_changed(bs_stage *s, const part *p)
{
    bf_windowed *w = bf_filter_windowed(p->filter);
    bf_windowed_params wp;
    if (w)
        bf_windowed_params_get(w, &wp);
    int64_t have = w ? wp.window : 0;
    uint32_t have_g = w ? wp.generations : 0;
    int64_t want = s->dedup.window_ms;
    uint32_t want_g = want ? s->dedup.generations : 0;
    if (have == want && have_g == want_g)
        return;
    bs_log(BS_LOG_WARN, "checkpoint keeps its own dedup window; "
           "dedup.window.* apply to partitions without a checkpoint",
           "topic=%s partition=%d checkpoint_window_ms=%lld "
           "checkpoint_generations=%u window_ms=%lld generations=%u",
           p->topic, (int)p->partition, (long long)have, have_g,
           (long long)want, want_g);
}

/* p's audit sample, once its filter is in place: the checkpoint's
 * (`from`, taken; NULL: it had none) with the rate it was written with,
 * else a fresh one at dedup.audit.rate; none when that is 0.  BS_FATAL
 * with errstr without memory. */
static bs_rc part_audit(bs_stage *s, part *p, bf_audit *from, bool had_ckpt,
                        char *errstr, size_t errstr_size)
{
    double rate = s->set.audit_rate;
    bf_audit_destroy(p->audit);
    p->audit = NULL;
    if (rate <= 0) {
        if (from)
            bs_log(BS_LOG_INFO, "audit off (dedup.audit.rate=0): the "
                   "checkpoint's audit sample is dropped", "topic=%s "
                   "partition=%d", p->topic, (int)p->partition);
        bf_audit_destroy(from);
        return BS_OK;
    }
    if (from) {
        bf_audit_stats st;
        bf_audit_stats_get(from, &st);
        if (st.rate != rate)
            bs_log(BS_LOG_WARN, "checkpoint keeps its own audit rate; "
                   "dedup.audit.rate applies to partitions without a "
                   "sample", "topic=%s partition=%d checkpoint_rate=%.17g "
                   "rate=%.17g", p->topic, (int)p->partition, st.rate, rate);
        p->audit = from;
        return BS_OK;
    }
    if (!(p->audit = bf_audit_new(rate, s->fparams.seed, errstr,
                                  errstr_size)))
        return BS_FATAL;
    if (had_ckpt)
        bs_log(BS_LOG_INFO, "checkpoint without an audit sample (written "
               "before the audit or with it off): a fresh sample starts",
               "topic=%s partition=%d", p->topic, (int)p->partition);
    return BS_OK;
}

/* Whether p's restore asks the store at all: transactions with nothing
 * committed want no state (any state there is belongs to a transaction
 * that never committed). */
static bool part_asks_store(const bs_stage *s, int64_t at)
{
    return !(s->txn && at < 0);
}

/* What p's restore asks the store for: the newest state, or with
 * transactions the state the committed offset was committed with. */
static int64_t part_store_at(const bs_stage *s, int64_t at)
{
    return s->txn ? at : BS_STORE_NEWEST;
}

/* Puts the store's answer r for p (bs_store_get's; *cp, taken, when 1) in
 * place: the checkpoint's filter, audit sample and offsets, or a fresh
 * filter and sample when there is none.  A checkpoint that exists but
 * cannot be used is fatal, never silently replaced. */
static bs_rc part_apply(bs_stage *s, part *p, int64_t at, int r,
                        bs_checkpoint *cp, char *errstr, size_t errstr_size)
{
    bs_checkpoint c = {0};
    if (r == 1)
        c = *cp;
    if (r == BS_STORE_AHEAD || r == BS_STORE_UNREACHABLE)
        return BS_RETRY;
    if (r < 0)
        return BS_FATAL;
    bf_filter_destroy(p->filter);
    p->filter = NULL;
    /* What it processed since its checkpoint is taken back: owed again
     * until a checkpoint reaches it (bs_parts_owe). */
    if (p->next_offset > p->redo_to)
        p->redo_to = p->next_offset;
    free(p->wm);
    p->wm = NULL;
    p->nwm = 0;
    free(p->skip);
    free(p->skip_keys);
    p->skip = NULL;
    p->skip_keys = NULL;
    p->nskip = p->skip_i = 0;
    p->ckpt_offset = p->base_offset = p->next_offset = -1;
    p->txn_from = -1;
    p->txn_aborted = false;
    /* Transactions: what is committed is said by the state loaded (set
     * below when it is the committed one).  A committed offset with no
     * state, the first checkpoint having been in a transaction that was
     * aborted, stays behind: the first checkpoint written again takes it
     * as its start. */
    if (s->txn)
        p->committed = -1;
    if (r == 0) {
        p->filter = bs_dedup_filter_new(&s->dedup, errstr, errstr_size);
        return p->filter ? part_audit(s, p, NULL, false, errstr, errstr_size)
                         : BS_FATAL;
    }
    if (strcmp(c.topic, p->topic) != 0 || c.partition != p->partition) {
        snprintf(errstr, errstr_size, "the checkpoint of %s [%d] holds %s "
                 "[%d]", p->topic, (int)p->partition, c.topic,
                 (int)c.partition);
        bs_ckpt_free(&c);
        return BS_FATAL;
    }
    char why[BS_ERRSTR_SIZE];
    if (!bs_dedup_filter_usable(c.filter, &s->dedup, why, sizeof(why))) {
        snprintf(errstr, errstr_size, "the checkpoint of %s [%d] %s",
                 p->topic, (int)p->partition, why);
        bs_ckpt_free(&c);
        return BS_FATAL;
    }
    p->filter = c.filter;
    c.filter = NULL;
    bf_audit *audit = c.audit;
    c.audit = NULL;
    if (part_audit(s, p, audit, true, errstr, errstr_size) != BS_OK) {
        bs_ckpt_free(&c);
        return BS_FATAL;
    }
    /* The memory cap is this process's setting; files do not carry it. */
    bs_dedup_filter_set_max_bytes(p->filter, s->fparams.max_bytes);
    warn_window_changed(s, p);
    p->wm = c.wm;
    p->nwm = c.nwm;
    c.wm = NULL;
    /* The dedup settings may have changed since: growth from here on
     * follows the current ones, the layers already there stay as built. */
    p->ckpt_offset = p->base_offset = p->next_offset = c.next_offset;
    p->txn_from = p->next_offset;
    bs_ckpt_free(&c);
    if (s->txn && p->ckpt_offset == at) {
        /* What the broker has committed is this state: the store may let
         * the ones before it go, and nothing needs committing again. */
        p->committed = at;
        if (bs_store_committed(s->store, p->topic, p->partition, at, errstr,
                               errstr_size) != 0)
            bs_log_ckpt_failed(p->topic, p->partition, errstr);
    }
    return BS_OK;
}

/* Loads p's checkpoint from the store (part_apply). */
static bs_rc part_load(bs_stage *s, part *p, int64_t at, char *errstr,
                       size_t errstr_size)
{
    bs_checkpoint c;
    int r = part_asks_store(s, at)
                ? bs_store_get(s->store, p->topic, p->partition,
                               part_store_at(s, at), &c, errstr, errstr_size)
                : 0;
    return part_apply(s, p, at, r, &c, errstr, errstr_size);
}

/* Transactions: the group's committed offsets of parts[0..n) into at[]
 * (-1 none).  Asked as stable offsets (read_committed: KIP-447), which a
 * transaction still open with offsets for them holds back until it ends;
 * asked again after a pause doubling from BS_COMMITTED_RETRY_MIN_MS to
 * BS_COMMITTED_RETRY_MAX_MS, up to
 * BS_TIMEOUT_TXN_STABLE_MS.  Not asked again once the consumer is being
 * closed (_DESTROY: a rebalance delivered by rd_kafka_consumer_close
 * cannot be served, and asking again would spin) or a stop is requested.
 * BS_RETRY with errstr if they cannot be had. */
static bs_rc committed_offsets(bs_stage *s, part **parts, size_t n,
                               int64_t *at, char *errstr, size_t errstr_size)
{
    rd_kafka_topic_partition_list_t *l =
        rd_kafka_topic_partition_list_new((int)n);
    for (size_t i = 0; i < n; i++)
        rd_kafka_topic_partition_list_add(l, parts[i]->topic,
                                          parts[i]->partition);
    double t0 = bs_now();
    unsigned pause_ms = BS_COMMITTED_RETRY_MIN_MS;
    rd_kafka_resp_err_t err;
    for (int attempt = 1;; attempt++) {
        err = rd_kafka_committed(s->consumer, l, BS_TIMEOUT_BROKER_MS);
        for (int i = 0; !err && i < l->cnt; i++)
            err = l->elems[i].err;
        if (!err || err == RD_KAFKA_RESP_ERR__DESTROY ||
            atomic_load(&s->stop) ||
            (bs_now() - t0) * 1000 >= BS_TIMEOUT_TXN_STABLE_MS)
            break;
        if (attempt == 1 || attempt % 10 == 0)
            bs_log(BS_LOG_INFO, "waiting for the committed offsets (a "
                   "previous owner's transaction may still be open)",
                   "attempt=%d error=%s", attempt, rd_kafka_err2name(err));
        usleep(pause_ms * 1000u);
        pause_ms = pause_ms * 2 < BS_COMMITTED_RETRY_MAX_MS
                       ? pause_ms * 2
                       : BS_COMMITTED_RETRY_MAX_MS;
    }
    if (err) {
        snprintf(errstr, errstr_size, "committed offsets: %s",
                 rd_kafka_err2str(err));
        rd_kafka_topic_partition_list_destroy(l);
        return BS_RETRY;
    }
    for (size_t i = 0; i < n; i++)
        at[i] = l->elems[i].offset >= 0 ? l->elems[i].offset : -1;
    rd_kafka_topic_partition_list_destroy(l);
    return BS_OK;
}

int bs_ckpt_sync(bs_stage *s, char *errstr, size_t errstr_size)
{
    int rc = bs_store_sync(s->store, errstr, errstr_size);
    /* The Kafka store's own producer (no transactions) was refused its
     * Write: said as the stage's clients' refusals are. */
    if (rc == BS_STORE_REFUSED)
        (void)bs_refused(s, RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED,
                         "Write", s->set.checkpoint_topic, errstr);
    return rc;
}

/* exactly_once: where a partition that has no checkpoint starts (its
 * committed offset, else where auto.offset.reset points), written down as
 * a first checkpoint with the output's watermarks before any of its
 * records is processed, so a crash before the first regular checkpoint can
 * still be replayed exactly. */
bs_rc bs_part_initial_checkpoint(bs_stage *s, part *p, char *errstr,
                                 size_t errstr_size)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, p->topic, p->partition);
    int64_t start = RD_KAFKA_OFFSET_INVALID;
    if (rd_kafka_committed(s->consumer, l, BS_TIMEOUT_BROKER_MS) ==
            RD_KAFKA_RESP_ERR_NO_ERROR &&
        !l->elems[0].err)
        start = l->elems[0].offset;
    rd_kafka_topic_partition_list_destroy(l);
    bool committed = start >= 0;
    if (start < 0) {
        int64_t lo, hi;
        rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(
            s->consumer, p->topic, p->partition, &lo, &hi,
            BS_TIMEOUT_BROKER_MS);
        if (err) {
            snprintf(errstr, errstr_size, "watermarks of %s [%d]: %s",
                     p->topic, (int)p->partition, rd_kafka_err2str(err));
            return BS_RETRY;
        }
        start = s->set.start_at == BS_START_LATEST ? hi : lo;
    }
    bs_ckpt_wm *wm = calloc((size_t)s->out_parts, sizeof(*wm));
    if (!wm) {
        snprintf(errstr, errstr_size, "out of memory");
        return BS_RETRY;
    }
    if (bs_output_watermarks(s->producer, s->set.output_topic, s->out_parts, wm,
                             BS_TIMEOUT_BROKER_MS, errstr, errstr_size) != 0 ||
        bs_store_put(s->store, p->topic, p->partition, start, wm,
                     (uint32_t)s->out_parts, p->filter, p->audit, errstr,
                     errstr_size) != 0 ||
        bs_ckpt_sync(s, errstr, errstr_size) != 0) {
        free(wm);
        return BS_RETRY;
    }
    /* Transactions: the start is committed too (outside any transaction:
     * nothing of the partition is produced yet), so a restore finds a
     * committed offset and the state that matches it. */
    if (s->txn && !committed) {
        l = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(l, p->topic, p->partition)->offset =
            start;
        rd_kafka_resp_err_t err = rd_kafka_commit(s->consumer, l, 0);
        if (!err)
            err = l->elems[0].err;
        rd_kafka_topic_partition_list_destroy(l);
        if (err) {
            snprintf(errstr, errstr_size, "committing the start of %s [%d]: "
                     "%s", p->topic, (int)p->partition, rd_kafka_err2str(err));
            free(wm);
            return BS_RETRY;
        }
    }
    if (s->txn) {
        p->committed = start;
        p->committed_at = bs_unix_now();
        if (bs_store_committed(s->store, p->topic, p->partition, start,
                               errstr, errstr_size) != 0)
            bs_log_ckpt_failed(p->topic, p->partition, errstr);
    }
    free(p->wm);
    p->wm = wm;
    p->nwm = (uint32_t)s->out_parts;
    p->ckpt_offset = p->base_offset = p->next_offset = start;
    p->txn_from = start;
    return BS_OK;
}

/* Transactions with the Kafka store: the checkpoint is committed with the
 * offsets, so a state older than the committed offset means the newer one
 * is there but not readable yet: a transaction still open (another
 * instance's, crashed: its timeout ends it) holds the checkpoint topic's
 * last stable offset below it, and a read_committed read ends there.  The
 * read is made again until it shows, within BS_TIMEOUT_TXN_STABLE_MS;
 * after that the state is taken as it is (the output tail since is
 * replayed, as for any older state). */
static bs_rc await_committed_checkpoint(bs_stage *s, part *p, int64_t at,
                                        char *errstr, size_t errstr_size)
{
    if (!s->txn || s->set.checkpoint_store != BS_CONFIG_STORE_KAFKA ||
        p->ckpt_offset < 0 || at <= p->ckpt_offset)
        return BS_OK;
    bs_log(BS_LOG_INFO, "waiting for the committed checkpoint (an open "
           "transaction holds it back)", "topic=%s partition=%d "
           "committed=%lld readable=%lld", p->topic, (int)p->partition,
           (long long)at, (long long)p->ckpt_offset);
    double t0 = bs_now();
    while (at > p->ckpt_offset && !atomic_load(&s->stop) &&
           (bs_now() - t0) * 1000 < BS_TIMEOUT_TXN_STABLE_MS) {
        usleep(BS_COMMITTED_CKPT_RETRY_MS * 1000u);
        bs_rc r = part_load(s, p, at, errstr, errstr_size);
        if (r != BS_OK)
            return r;
    }
    if (at > p->ckpt_offset)
        bs_log(BS_LOG_WARN, "the committed checkpoint did not become "
               "readable; restoring the older one and the output since",
               "topic=%s partition=%d committed=%lld readable=%lld",
               p->topic, (int)p->partition, (long long)at,
               (long long)p->ckpt_offset);
    return BS_OK;
}

void bs_part_log_restored(const part *p, const char *msg)
{
    if (p->state == BS_PART_RESTORE_PENDING)
        bs_log(BS_LOG_INFO, msg, "topic=%s partition=%d restore=pending",
               p->topic, (int)p->partition);
    else if (!p->audit)
        bs_log(BS_LOG_INFO, msg, "topic=%s partition=%d "
               "checkpoint_offset=%lld already_forwarded=%zu", p->topic,
               (int)p->partition, (long long)p->ckpt_offset, p->nskip);
    else {
        /* The sample's counts as the checkpoint left them. */
        bf_audit_stats st;
        bf_audit_stats_get(p->audit, &st);
        bs_log(BS_LOG_INFO, msg, "topic=%s partition=%d "
               "checkpoint_offset=%lld already_forwarded=%zu "
               "audit_lookups=%llu audit_false_positives=%llu", p->topic,
               (int)p->partition, (long long)p->ckpt_offset, p->nskip,
               (unsigned long long)st.lookups,
               (unsigned long long)st.false_positives);
    }
}

/* Whether the restore of parts[0..n) waits for a retry, loading nothing
 * (each then RESTORE_PENDING): a stop requested (a restore the drain would
 * give up at once, as a rollback's retry in the final rounds; assignments
 * that come meanwhile are declined before they get here, rebalance.c), or
 * with transactions the committed offsets not to be had (at[] holds them
 * otherwise). */
static bool restore_deferred(bs_stage *s, part **parts, size_t n,
                             int64_t *at, char *errstr, size_t errstr_size)
{
    bool defer = atomic_load(&s->stop);
    if (defer)
        snprintf(errstr, errstr_size, "the stage is stopping");
    else if (s->txn)
        defer = committed_offsets(s, parts, n, at, errstr, errstr_size) !=
                BS_OK;
    if (defer)
        for (size_t i = 0; i < n; i++) {
            bs_part_set_state(s, parts[i], BS_PART_RESTORING);
            bs_part_set_state(s, parts[i], BS_PART_RESTORE_PENDING);
        }
    return defer;
}

/* Every partition's state from the store, asked for at once (the Kafka
 * store reads each partition of its topic once for all of them, side by
 * side; q[0..*nq) are the questions), applied, and its first checkpoint
 * written where exactly_once has none.  replay[i]: parts[i] needs the
 * output tail since its state.  BS_FATAL stops at the first unusable
 * state; BS_RETRY leaves the partitions that wait RESTORE_PENDING. */
static bs_rc restore_states(bs_stage *s, part **parts, size_t n,
                            const int64_t *at, bs_store_query *q, size_t *nq,
                            bool *replay, char *errstr, size_t errstr_size)
{
    bs_rc rc = BS_OK;
    for (size_t i = 0; i < n; i++)
        if (part_asks_store(s, at[i]))
            q[(*nq)++] = (bs_store_query){.topic = parts[i]->topic,
                                          .partition = parts[i]->partition,
                                          .at_offset = part_store_at(s, at[i])};
    bs_store_get_many(s->store, q, *nq);
    for (size_t i = 0, k = 0; i < n; i++) {
        part *p = parts[i];
        bs_part_set_state(s, p, BS_PART_RESTORING);
        bs_store_query *a = part_asks_store(s, at[i]) ? &q[k++] : NULL;
        int r = a ? a->rc : 0;
        if (r < 0)
            snprintf(errstr, errstr_size, "%s", a->err);
        if (a)
            a->rc = 0; /* its state is part_apply's now */
        bs_rc lr = part_apply(s, p, at[i], r, a ? &a->out : NULL, errstr,
                              errstr_size);
        if (lr == BS_OK)
            lr = await_committed_checkpoint(s, p, at[i], errstr,
                                            errstr_size);
        if (lr == BS_RETRY) {
            /* Its state is ahead of the commit (another owner went on), or
             * the store cannot be read now (a broker away): it waits,
             * unprocessed, for a retry or its revocation. */
            char quoted[1100];
            bs_log(BS_LOG_WARN, "restore deferred", "topic=%s partition=%d "
                   "error=%s", p->topic, (int)p->partition,
                   bs_log_quote(errstr, quoted, sizeof(quoted)));
            bs_part_set_state(s, p, BS_PART_RESTORE_PENDING);
            rc = BS_RETRY;
            continue;
        }
        if (lr != BS_OK)
            return BS_FATAL;
        if (bs_exactly_once(s) && p->ckpt_offset < 0 &&
            bs_part_initial_checkpoint(s, p, errstr, errstr_size) != BS_OK) {
            /* Like any failed checkpoint write: the partition waits,
             * paused and unprocessed, and the write is retried. */
            bs_log_ckpt_failed(p->topic, p->partition, errstr);
            bs_part_set_state(s, p, BS_PART_WAITING_FIRST);
        }
        /* Replay mode: every restore reads the output tail.  Transactions:
         * only a state older than the committed offset (written by this
         * instance before another one had the partition, with the
         * directory store) needs the output written since. */
        replay[i] = bs_replay_mode(s) ||
                    (s->txn && p->ckpt_offset >= 0 && at[i] > p->ckpt_offset);
    }
    return rc;
}

/* The output tail since their states read for the partitions marked in
 * replay[] (t[] their targets), and every partition restored made ACTIVE.
 * A tail that cannot be read is the broker, not the state: BS_RETRY, its
 * partitions RESTORE_PENDING.  Refused (no Read on the output), it is
 * said, and retried too: an ACL granted later heals it. */
static bs_rc restore_tails(bs_stage *s, part **parts, size_t n,
                           const bool *replay, bs_replay_target *t,
                           char *errstr, size_t errstr_size)
{
    size_t nt = 0;
    for (size_t i = 0; i < n; i++) {
        if (!replay[i])
            continue;
        t[nt].topic = parts[i]->topic;
        t[nt].partition = parts[i]->partition;
        t[nt].from_offset = parts[i]->ckpt_offset;
        t[nt].wm = parts[i]->wm;
        t[nt].nwm = parts[i]->nwm;
        t[nt].filter = parts[i]->filter;
        t[nt].audit = parts[i]->audit;
        nt++;
    }
    double t0 = bs_now();
    int tr = nt > 0 ? bs_replay_tail(s->tail, s->set.output_topic,
                                     s->set.dedup_key, s->set.dedup_normalize,
                                     s->fparams.seed, t, nt,
                                     BS_TIMEOUT_REPLAY_MS, errstr, errstr_size)
                    : 0;
    bool tail_failed = tr != 0;
    if (tr == BS_REPLAY_REFUSED)
        (void)bs_refused(s, RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED,
                         "Read", s->set.output_topic, errstr);
    uint64_t total = 0;
    for (size_t i = 0, k = 0; i < n; i++) {
        part *p = parts[i];
        if (replay[i]) {
            p->skip = t[k].skip;
            p->skip_keys = t[k].skip_keys;
            p->nskip = t[k].nskip;
            p->skip_i = 0;
            total += t[k].records;
            k++;
            if (s->txn)
                p->committed = p->ckpt_offset; /* not moved back */
        }
        if (tail_failed && replay[i])
            bs_part_set_state(s, p, BS_PART_RESTORE_PENDING);
        else if (p->state == BS_PART_RESTORING)
            bs_part_set_state(s, p, BS_PART_ACTIVE);
    }
    if (!tail_failed && total > 0)
        bs_log(BS_LOG_INFO, "output tail replayed", "partitions=%zu "
               "records=%llu seconds=%.3f", nt, (unsigned long long)total,
               bs_now() - t0);
    return tail_failed ? BS_RETRY : BS_OK;
}

bs_rc bs_parts_restore(bs_stage *s, part **parts, size_t n, char *errstr,
                       size_t errstr_size)
{
    int64_t *at = calloc(n ? n : 1, sizeof(*at));
    bool *replay = calloc(n ? n : 1, sizeof(*replay));
    bs_replay_target *t = calloc(n ? n : 1, sizeof(*t));
    bs_store_query *q = calloc(n ? n : 1, sizeof(*q));
    size_t nq = 0; /* q[0..nq): the states asked for */
    bs_rc rc;
    if (!at || !replay || !t || !q) {
        snprintf(errstr, errstr_size, "out of memory");
        rc = BS_FATAL;
    } else if (restore_deferred(s, parts, n, at, errstr, errstr_size)) {
        rc = BS_RETRY; /* nothing loaded: they wait for a retry */
    } else {
        rc = restore_states(s, parts, n, at, q, &nq, replay, errstr,
                            errstr_size);
        if (rc != BS_FATAL &&
            restore_tails(s, parts, n, replay, t, errstr, errstr_size) !=
                BS_OK)
            rc = BS_RETRY;
    }
    for (size_t k = 0; k < nq; k++)
        if (q[k].rc == 1) /* not taken: a fatal error came first */
            bs_ckpt_free(&q[k].out);
    free(at);
    free(replay);
    free(t);
    free(q);
    return rc;
}
