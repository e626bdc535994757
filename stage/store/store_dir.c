/*
 * store_dir.c -- the directory store (checkpoint.store=dir): per partition a
 * snapshot and a bounded chain of deltas, each a file written atomically
 * (checkpoint.c), made durable by one directory fsync per round.
 *
 * A partition's files in checkpoint.dir, every one a state with a seq (its
 * number in the partition's series, inside the file) and an id:
 *
 *   TOPIC-P.ckpt        the newest snapshot (a version-1 file is seq 0)
 *   TOPIC-P.SEQ.ckpd    the delta that makes state SEQ from state SEQ-1
 *   TOPIC-P.SEQ.ckps    an older snapshot, set aside when a newer one was
 *                       written, kept while a restore may still need it
 *
 * A checkpoint writes a delta (the filter's blocks changed since the state
 * the store wrote or restored last: bloomfilters.h, "Deltas") unless the
 * chain since the newest snapshot holds checkpoint.delta.max deltas, or its
 * bytes with this one would pass checkpoint.delta.ratio of the snapshot's,
 * or the filter is not the one whose changes the store knows (a fresh
 * filter, a windowed one, a round whose directory fsync failed): then it
 * writes a snapshot, setting the old one aside first.  The ratio bounds a
 * restore to (1 + ratio) snapshots' bytes.
 *
 * A restore (bs_store_get) reads the newest snapshot at or below the state
 * asked for and applies the deltas after it in order; every link is checked
 * (seq without a gap, each delta naming the id of the state before it), and
 * a break fails loudly, naming the file: a restore that cannot reach the
 * state the offsets cover must not start from less.  States newer than the
 * one restored (written but never committed) are removed then, so the next
 * delta cannot land in a dead branch; a disk that refuses their removal
 * (read-only, failing) makes the restore one to retry
 * (BS_STORE_UNREACHABLE), not damage.  bs_store_committed removes what a
 * restore can no longer be asked for: everything before the snapshot under
 * the newest committed state.  A crash at any point leaves either the old
 * files or the new ones (temp files are removed at start-up by dir_check).
 *
 * The store owns its per-partition lists; it marks the filters it is given
 * (bf_filter_mark) once their state is written.
 */
#include "store/store_dir.h"
#include "base/log.h"
#include "base/util.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DELTA_SUFFIX ".ckpd"
#define ASIDE_SUFFIX ".ckps"

typedef struct dstate {
    bs_ckpt_head h;
    char name[300]; /* file name in the directory */
} dstate;

typedef struct dpart {
    char topic[250];
    int32_t partition;
    bool known;      /* states read from the directory (or written) */
    bool force_full; /* the next checkpoint is a snapshot */
    bool unsynced;   /* written this round, directory not yet fsynced */
    dstate *st;      /* by seq */
    size_t n, cap;
} dpart;

struct bs_dirstore {
    char *dir;
    char desc[300]; /* "dir DIR", for logs */
    uint32_t max_chain;
    double max_ratio;
    bool dirty; /* renames not yet made durable */
    dpart *parts;
    size_t nparts, capparts;
    uint64_t last_bytes; /* what the last put wrote */
    bool last_delta;
};

bs_dirstore *bs_dirstore_new(const char *dir, uint32_t max_chain,
                             double max_ratio)
{
    bs_dirstore *ds = calloc(1, sizeof(*ds));
    if (!ds || !(ds->dir = strdup(dir))) {
        free(ds);
        return NULL;
    }
    ds->max_chain = max_chain;
    ds->max_ratio = max_ratio;
    snprintf(ds->desc, sizeof(ds->desc), "dir %s", dir);
    return ds;
}

void bs_dirstore_destroy(bs_dirstore *ds)
{
    if (!ds)
        return;
    for (size_t i = 0; i < ds->nparts; i++)
        free(ds->parts[i].st);
    free(ds->parts);
    free(ds->dir);
    free(ds);
}

static dpart *part_of(bs_dirstore *ds, const char *topic, int32_t partition)
{
    for (size_t i = 0; i < ds->nparts; i++)
        if (ds->parts[i].partition == partition &&
            !strcmp(ds->parts[i].topic, topic))
            return &ds->parts[i];
    dpart *np = bs_grow(ds->parts, &ds->capparts, ds->nparts + 1,
                        sizeof(*np), 16);
    if (!np)
        return NULL;
    ds->parts = np;
    dpart *p = &ds->parts[ds->nparts++];
    memset(p, 0, sizeof(*p));
    snprintf(p->topic, sizeof(p->topic), "%s", topic);
    p->partition = partition;
    return p;
}

/* -- names -------------------------------------------------------------- */

/* Whether `name` is one of TOPIC-P's state files. */
static bool names_part(const char *name, const char *topic, int32_t part)
{
    char prefix[300];
    int n = snprintf(prefix, sizeof(prefix), "%s-%d.", topic, (int)part);
    if (n <= 0 || (size_t)n >= sizeof(prefix) || strncmp(name, prefix,
                                                         (size_t)n) != 0)
        return false;
    const char *rest = name + n;
    if (!strcmp(rest, "ckpt"))
        return true;
    size_t digits = strspn(rest, "0123456789");
    return digits > 0 && digits <= 20 &&
           (!strcmp(rest + digits, DELTA_SUFFIX) ||
            !strcmp(rest + digits, ASIDE_SUFFIX));
}

bool bs_dirstore_is_state_name(const char *name)
{
    if (bs_ckpt_is_file_name(name))
        return true;
    size_t len = strlen(name);
    if (len < 7 || (strcmp(name + len - 5, DELTA_SUFFIX) != 0 &&
                    strcmp(name + len - 5, ASIDE_SUFFIX) != 0))
        return false;
    size_t i = len - 5;
    while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9')
        i--;
    return i < len - 5 && i > 0 && name[i - 1] == '.';
}

bool bs_dirstore_is_temp_name(const char *name)
{
    return bf_is_atomic_temp_name(name, BS_CKPT_SUFFIX) ||
           bf_is_atomic_temp_name(name, DELTA_SUFFIX) ||
           bf_is_atomic_temp_name(name, ASIDE_SUFFIX);
}

static void path_of(const bs_dirstore *ds, const char *name, char *buf,
                    size_t size)
{
    snprintf(buf, size, "%s/%s", ds->dir, name);
}

/* -- the partition's states, read from the directory --------------------- */

static int by_seq(const void *a, const void *b)
{
    uint64_t x = ((const dstate *)a)->h.seq, y = ((const dstate *)b)->h.seq;
    return x < y ? -1 : x > y;
}

static int push(dpart *p, const dstate *s)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 8;
        dstate *ns = realloc(p->st, cap * sizeof(*ns));
        if (!ns)
            return -1;
        p->st = ns;
        p->cap = cap;
    }
    p->st[p->n++] = *s;
    return 0;
}

/* Reads the headers of p's files into p->st, sorted by seq. */
static int scan(bs_dirstore *ds, dpart *p, char *errstr, size_t errstr_size)
{
    p->n = 0;
    DIR *d = opendir(ds->dir);
    if (!d) {
        if (errno == ENOENT) {
            p->known = true;
            return 0;
        }
        snprintf(errstr, errstr_size, "checkpoint.dir %s: %s", ds->dir,
                 strerror(errno));
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        if (!names_part(e->d_name, p->topic, p->partition))
            continue;
        dstate s;
        memset(&s, 0, sizeof(s));
        snprintf(s.name, sizeof(s.name), "%s", e->d_name);
        char path[4096];
        path_of(ds, s.name, path, sizeof(path));
        int r = bs_ckpt_peek(path, &s.h, errstr, errstr_size);
        if (r == 0)
            continue; /* gone meanwhile */
        if (r < 0 || (rc = push(p, &s)) != 0) {
            if (r > 0)
                snprintf(errstr, errstr_size, "out of memory");
            rc = -1;
        }
        if (r > 0 && s.h.partition != p->partition) {
            snprintf(errstr, errstr_size, "%s: holds partition %d, not %d",
                     path, (int)s.h.partition, (int)p->partition);
            rc = -1;
        }
    }
    closedir(d);
    if (rc != 0)
        return -1;
    if (p->n > 1)
        qsort(p->st, p->n, sizeof(*p->st), by_seq);
    for (size_t i = 1; i < p->n; i++)
        if (p->st[i].h.seq == p->st[i - 1].h.seq) {
            snprintf(errstr, errstr_size, "%s/%s and %s are both state %"
                     PRIu64 " of %s [%d]", ds->dir, p->st[i - 1].name,
                     p->st[i].name, p->st[i].h.seq, p->topic,
                     (int)p->partition);
            return -1;
        }
    p->known = true;
    return 0;
}

/* Index of the newest snapshot at or below state i, or -1. */
static ssize_t snapshot_under(const dpart *p, size_t i)
{
    for (size_t j = i + 1; j-- > 0;)
        if (!p->st[j].h.delta)
            return (ssize_t)j;
    return -1;
}

/* Removes states [from, to) of p (files and entries).  Returns how many
 * files could not be removed (logged; the first one's path and error in
 * errstr): their entries go all the same, and the next scan finds them. */
static size_t drop(bs_dirstore *ds, dpart *p, size_t from, size_t to,
                   const char *why, char *errstr, size_t errstr_size)
{
    size_t kept = 0;
    for (size_t i = from; i < to; i++) {
        char path[4096];
        path_of(ds, p->st[i].name, path, sizeof(path));
        if (unlink(path) != 0 && errno != ENOENT) {
            int e = errno;
            bs_log(BS_LOG_WARN, "cannot remove a checkpoint file", "file=%s "
                   "error=%s", path, strerror(e));
            if (kept++ == 0)
                snprintf(errstr, errstr_size, "%s: cannot remove it: %s",
                         path, strerror(e));
        } else {
            bs_log(BS_LOG_DEBUG, "checkpoint file removed", "file=%s reason=%s",
                   path, why);
        }
    }
    memmove(p->st + from, p->st + to, (p->n - to) * sizeof(*p->st));
    p->n -= to - from;
    return kept;
}

/* -- check --------------------------------------------------------------- */

static int dir_check(void *impl, char *errstr, size_t errstr_size)
{
    bs_dirstore *ds = impl;
    /* The directory store makes its directory (one level, as mkdir(1)
     * without -p). */
    if (mkdir(ds->dir, 0755) != 0 && errno != EEXIST) {
        snprintf(errstr, errstr_size, "checkpoint.dir %s: %s", ds->dir,
                 strerror(errno));
        return -1;
    }
    DIR *d = opendir(ds->dir);
    if (!d) {
        snprintf(errstr, errstr_size, "checkpoint.dir %s: %s", ds->dir,
                 strerror(errno));
        return -1;
    }
    int rc = 0, n = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        char path[4096];
        path_of(ds, e->d_name, path, sizeof(path));
        /* A crash in the middle of a write leaves its temp file; the
         * rename never happened, so the previous state stands. */
        if (bs_dirstore_is_temp_name(e->d_name)) {
            bs_log(BS_LOG_INFO, "removing an unfinished checkpoint write",
                   "file=%s", path);
            unlink(path);
            continue;
        }
        if (!bs_dirstore_is_state_name(e->d_name))
            continue;
        bs_checkpoint c;
        if (bs_ckpt_load(path, &c, errstr, errstr_size) < 0)
            rc = -1;
        else
            bs_ckpt_free(&c);
        n++;
    }
    closedir(d);
    if (rc == 0 && n > 0)
        bs_log(BS_LOG_INFO, "checkpoints verified", "dir=%s files=%d",
               ds->dir, n);
    return rc;
}

/* -- put and sync -------------------------------------------------------- */

static int dir_put(void *impl, const char *topic, int32_t partition,
                   int64_t next_offset, const bs_ckpt_wm *wm, uint32_t nwm,
                   bf_filter *filter, const bf_audit *audit, char *errstr,
                   size_t errstr_size)
{
    bs_dirstore *ds = impl;
    dpart *p = part_of(ds, topic, partition);
    if (!p) {
        snprintf(errstr, errstr_size, "out of memory");
        return -1;
    }
    if (!p->known && scan(ds, p, errstr, errstr_size) != 0)
        return -1;
    const dstate *tip = p->n ? &p->st[p->n - 1] : NULL;
    bs_ckpt_meta m = {topic, partition, next_offset, wm, nwm,
                      tip ? tip->h.seq + 1 : 1, bs_ckpt_new_id(),
                      tip ? tip->h.id : 0, audit};
    uint64_t mark;
    bool delta = tip && ds->max_chain > 0 && !p->force_full &&
                 bf_filter_tracked(filter, &mark) && mark == tip->h.id;
    ssize_t snap = tip ? snapshot_under(p, p->n - 1) : -1;
    if (delta && snap >= 0) {
        size_t chain = p->n - 1 - (size_t)snap;
        uint64_t bytes = bs_ckpt_size(&m, filter, true);
        for (size_t i = (size_t)snap + 1; i < p->n; i++)
            bytes += p->st[i].h.bytes;
        if (chain >= ds->max_chain ||
            (double)bytes > ds->max_ratio * (double)p->st[snap].h.bytes)
            delta = false;
    } else {
        delta = false; /* nothing to chain from */
    }
    dstate s;
    memset(&s, 0, sizeof(s));
    if (delta)
        snprintf(s.name, sizeof(s.name), "%s-%d.%" PRIu64 DELTA_SUFFIX, topic,
                 (int)partition, m.seq);
    else
        snprintf(s.name, sizeof(s.name), "%s-%d" BS_CKPT_SUFFIX, topic,
                 (int)partition);
    char path[4096];
    path_of(ds, s.name, path, sizeof(path));
    if (!delta) {
        /* The snapshot there now is set aside, not replaced: the states
         * it anchors stay restorable until a commit passes them. */
        for (size_t i = 0; i < p->n; i++) {
            if (strcmp(p->st[i].name, s.name) != 0)
                continue;
            char aside[300], apath[4096];
            snprintf(aside, sizeof(aside), "%s-%d.%" PRIu64 ASIDE_SUFFIX,
                     topic, (int)partition, p->st[i].h.seq);
            path_of(ds, aside, apath, sizeof(apath));
            if (rename(path, apath) != 0) {
                snprintf(errstr, errstr_size, "%s: cannot set it aside as "
                         "%s: %s", path, aside, strerror(errno));
                return -1;
            }
            snprintf(p->st[i].name, sizeof(p->st[i].name), "%s", aside);
            ds->dirty = true;
        }
    }
    if (bs_ckpt_write_path(path, &m, filter, delta, BF_WRITE_NO_DIRSYNC,
                           errstr, errstr_size) != 0)
        return -1;
    struct stat sb;
    s.h.delta = delta;
    s.h.partition = partition;
    s.h.next_offset = next_offset;
    s.h.seq = m.seq;
    s.h.id = m.id;
    s.h.prev_id = delta ? m.prev_id : 0;
    s.h.bytes = stat(path, &sb) == 0 ? (uint64_t)sb.st_size
                                     : bs_ckpt_size(&m, filter, delta);
    ds->last_bytes = s.h.bytes;
    ds->last_delta = delta;
    if (push(p, &s) != 0) {
        p->known = false; /* read again from the directory next time */
    }
    /* The filter's changes count from this state on.  A filter that
     * cannot be tracked (windowed) stays whole. */
    bs_ckpt_track_from(filter, m.id);
    p->force_full = false;
    p->unsynced = true;
    ds->dirty = true;
    return 0;
}

static int dir_sync(void *impl, char *errstr, size_t errstr_size)
{
    bs_dirstore *ds = impl;
    if (!ds->dirty)
        return 0;
    /* The renames of this round become durable here, before any commit. */
    char probe[4096];
    snprintf(probe, sizeof(probe), "%s/.", ds->dir);
    bool ok = bf_fsync_dir(probe, errstr, errstr_size) == BF_OK;
    for (size_t i = 0; i < ds->nparts; i++) {
        /* Whether this round's files survive is unknown: the next
         * checkpoint of their partitions starts a new snapshot. */
        if (!ok && ds->parts[i].unsynced)
            ds->parts[i].force_full = true;
        ds->parts[i].unsynced = false;
    }
    if (!ok)
        return -1;
    ds->dirty = false;
    return 0;
}

static uint64_t dir_last_bytes(const void *impl, bool *delta)
{
    const bs_dirstore *ds = impl;
    if (delta)
        *delta = ds->last_delta;
    return ds->last_bytes;
}

/* -- get and committed --------------------------------------------------- */

/* The newest state with next_offset <= at (all of them for
 * BS_STORE_NEWEST), or -1. */
static ssize_t state_at(const dpart *p, int64_t at)
{
    for (size_t i = p->n; i-- > 0;)
        if (at == BS_STORE_NEWEST || p->st[i].h.next_offset <= at)
            return (ssize_t)i;
    return -1;
}

int bs_dirstore_get(bs_dirstore *ds, const char *topic, int32_t partition,
                    int64_t at_offset, bs_checkpoint *out, char *errstr,
                    size_t errstr_size)
{
    memset(out, 0, sizeof(*out));
    dpart *p = part_of(ds, topic, partition);
    if (!p) {
        snprintf(errstr, errstr_size, "out of memory");
        return -1;
    }
    if (scan(ds, p, errstr, errstr_size) != 0)
        return -1;
    if (p->n == 0)
        return 0;
    ssize_t t = state_at(p, at_offset);
    if (t < 0) {
        snprintf(errstr, errstr_size, "%s/%s: no checkpoint of %s [%d] at or "
                 "before offset %lld (the oldest kept covers up to %lld)",
                 ds->dir, p->st[0].name, topic, (int)partition,
                 (long long)at_offset, (long long)p->st[0].h.next_offset);
        return -1;
    }
    ssize_t b = snapshot_under(p, (size_t)t);
    if (b < 0) {
        snprintf(errstr, errstr_size, "%s/%s: a delta with no snapshot under "
                 "it (the chain of %s [%d] has lost its base)", ds->dir,
                 p->st[0].name, topic, (int)partition);
        return -1;
    }
    char path[4096];
    path_of(ds, p->st[b].name, path, sizeof(path));
    int r = bs_ckpt_load(path, out, errstr, errstr_size);
    if (r != 1) {
        if (r == 0)
            snprintf(errstr, errstr_size, "%s: vanished while read", path);
        p->known = false;
        return -1;
    }
    if (out->seq != p->st[b].h.seq || out->delta) {
        snprintf(errstr, errstr_size, "%s: changed while read", path);
        goto fail;
    }
    for (ssize_t i = b + 1; i <= t; i++) {
        const dstate *s = &p->st[i];
        path_of(ds, s->name, path, sizeof(path));
        if (s->h.seq != out->seq + 1) {
            snprintf(errstr, errstr_size, "%s: state %" PRIu64 " follows "
                     "state %" PRIu64 ": the deltas between are missing, the "
                     "chain of %s [%d] is broken", path, s->h.seq, out->seq,
                     topic, (int)partition);
            goto fail;
        }
        bs_checkpoint d;
        if (bs_ckpt_load(path, &d, errstr, errstr_size) != 1)
            goto fail;
        int applied = bs_ckpt_apply(out, &d, path, errstr, errstr_size);
        bs_ckpt_free(&d);
        if (applied != 0)
            goto fail;
    }
    /* Restored: its changes count from here (a windowed filter is not
     * tracked, and its checkpoints stay whole). */
    bs_ckpt_track_from(out->filter, out->id);
    if ((size_t)t + 1 < p->n) {
        /* Newer states were written but never committed: a dead branch
         * now, which the next checkpoint must not chain onto.  Not gone,
         * or not durably (a read-only or failing disk): the restore is one
         * to retry, not damage.  Restored regardless, the next checkpoint
         * would take a seq a dead state still holds on disk, and a later
         * restore would meet two states of one seq or a delta naming the
         * wrong base. */
        size_t dead = p->n - (size_t)t - 1;
        char probe[4096];
        snprintf(probe, sizeof(probe), "%s/.", ds->dir);
        if (drop(ds, p, (size_t)t + 1, p->n, "uncommitted", errstr,
                 errstr_size) > 0 ||
            bf_fsync_dir(probe, errstr, errstr_size) != BF_OK) {
            ds->dirty = true; /* the next sync makes the removals durable */
            bs_ckpt_free(out);
            p->known = false;
            return BS_STORE_UNREACHABLE;
        }
        bs_log(BS_LOG_INFO, "checkpoint states past the restored one "
               "removed", "topic=%s partition=%d restored_seq=%llu "
               "removed=%zu", topic, (int)partition,
               (unsigned long long)out->seq, dead);
    }
    p->force_full = false;
    return 1;
fail:
    bs_ckpt_free(out);
    p->known = false;
    return -1;
}

static int dir_committed(void *impl, const char *topic, int32_t partition,
                         int64_t next_offset, char *errstr,
                         size_t errstr_size)
{
    bs_dirstore *ds = impl;
    (void)errstr;
    (void)errstr_size;
    dpart *p = part_of(ds, topic, partition);
    if (!p || !p->known)
        return 0;
    ssize_t c = state_at(p, next_offset);
    ssize_t b = c >= 0 ? snapshot_under(p, (size_t)c) : -1;
    /* A file left here is an old state only: the next commit removes
     * it. */
    char left[600];
    if (b > 0)
        (void)drop(ds, p, 0, (size_t)b, "superseded", left, sizeof(left));
    return 0;
}

static int dir_get(void *impl, const char *topic, int32_t partition,
                   int64_t at_offset, bs_checkpoint *out, char *errstr,
                   size_t errstr_size)
{
    return bs_dirstore_get(impl, topic, partition, at_offset, out, errstr,
                           errstr_size);
}

static const char *dir_describe(const void *impl)
{
    return ((const bs_dirstore *)impl)->desc;
}

static void dir_destroy(void *impl) { bs_dirstore_destroy(impl); }

/* No producer of its own: use_producer and delivery are NULL. */
const bs_store_ops bs_dirstore_ops = {
    .check = dir_check, .put = dir_put, .sync = dir_sync, .get = dir_get,
    .committed = dir_committed, .last_bytes = dir_last_bytes,
    .describe = dir_describe, .destroy = dir_destroy};

int bs_dirstore_newest(const char *dir, const char *topic, int32_t partition,
                       bs_ckpt_head *out, char *errstr, size_t errstr_size)
{
    bs_dirstore *ds = bs_dirstore_new(dir, 0, 0);
    if (!ds) {
        snprintf(errstr, errstr_size, "out of memory");
        return -1;
    }
    dpart *p = part_of(ds, topic, partition);
    int rc = !p ? -1 : scan(ds, p, errstr, errstr_size);
    if (rc == 0 && p->n > 0) {
        *out = p->st[p->n - 1].h;
        rc = 1;
    }
    bs_dirstore_destroy(ds);
    return rc;
}
