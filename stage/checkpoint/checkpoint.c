/*
 * checkpoint.c -- see checkpoint.h.
 */
#include "checkpoint/checkpoint.h"

#include <config.h>
#include <bf_endian.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

static const char MAGIC[8] = {'B', 'L', 'M', 'C', 'K', 'P', 'T', 0};
static const char DMAGIC[8] = {'B', 'L', 'M', 'C', 'K', 'P', 'D', 0};
#define VERSION 3u  /* snapshots; 2 (no audit), 1 (no ids) still read */
#define DVERSION 2u /* deltas; 1 (no audit) still read */
#define FIXED 40u

void bs_ckpt_track_from(bf_filter *f, uint64_t id)
{
    if (bf_filter_track(f, id, NULL, 0) != BF_OK)
        return;
}

uint64_t bs_ckpt_new_id(void)
{
    static uint64_t counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t in[4] = {(uint64_t)ts.tv_sec, (uint64_t)ts.tv_nsec,
                      (uint64_t)getpid(), ++counter};
    uint64_t id = XXH3_64bits(in, sizeof(in));
    return id ? id : 1; /* 0 is never a state's name */
}

bool bs_ckpt_is_file_name(const char *name)
{
    size_t len = strlen(name), slen = sizeof(BS_CKPT_SUFFIX) - 1;
    return len > slen && strcmp(name + len - slen, BS_CKPT_SUFFIX) == 0;
}

bool bs_ckpt_is_temp_name(const char *name)
{
    return bf_is_atomic_temp_name(name, BS_CKPT_SUFFIX);
}

int bs_ckpt_path(const char *dir, const char *topic, int32_t partition,
                 char *buf, size_t size)
{
    int n = snprintf(buf, size, "%s/%s-%d" BS_CKPT_SUFFIX, dir, topic,
                     (int)partition);
    return n > 0 && (size_t)n < size ? 0 : -1;
}

typedef struct ckpt_writer {
    const char *topic;
    int32_t partition;
    int64_t next_offset;
    const bs_ckpt_wm *wm;
    uint32_t nwm;
    const bf_filter *filter;
    uint64_t seq, id, prev_id;
    bool delta;
    const bf_audit *audit;
    XXH3_state_t *state;
    bf_write_fn write;
    void *wopaque;
} ckpt_writer;

static int hashed_write(void *opaque, const void *buf, size_t len)
{
    ckpt_writer *w = opaque;
    XXH3_64bits_update(w->state, buf, len);
    return w->write(w->wopaque, buf, len);
}

static bf_err produce(void *opaque, bf_write_fn write, void *wopaque)
{
    ckpt_writer *w = opaque;
    w->write = write;
    w->wopaque = wopaque;
    XXH3_64bits_reset(w->state);
    size_t tlen = strlen(w->topic);
    uint8_t fixed[FIXED];
    struct timeval tv;
    gettimeofday(&tv, NULL);
    memset(fixed, 0, sizeof(fixed));
    memcpy(fixed, w->delta ? DMAGIC : MAGIC, 8);
    bf_put16(fixed + 8, w->delta ? DVERSION : VERSION);
    bf_put16(fixed + 10, (uint16_t)tlen);
    bf_put32(fixed + 12, (uint32_t)w->partition);
    bf_put64(fixed + 16, (uint64_t)w->next_offset);
    bf_put64(fixed + 24, (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000);
    bf_put32(fixed + 32, w->nwm);
    if (hashed_write(w, fixed, sizeof(fixed)) ||
        hashed_write(w, w->topic, tlen))
        return BF_ERR_IO;
    for (uint32_t i = 0; i < w->nwm; i++) {
        uint8_t e[12];
        bf_put32(e, (uint32_t)w->wm[i].partition);
        bf_put64(e + 4, (uint64_t)w->wm[i].high);
        if (hashed_write(w, e, sizeof(e)))
            return BF_ERR_IO;
    }
    uint8_t ids[24];
    bf_put64(ids, w->seq);
    bf_put64(ids + 8, w->id);
    bf_put64(ids + 16, w->prev_id);
    uint8_t flen[8];
    bf_put64(flen, w->delta ? bf_filter_delta_size(w->filter)
                            : bf_filter_serialized_size(w->filter));
    if (hashed_write(w, ids, w->delta ? 24 : 16) || hashed_write(w, flen, 8))
        return BF_ERR_IO;
    bf_err err = w->delta ? bf_filter_delta_serialize(w->filter, w->id,
                                                      hashed_write, w)
                          : bf_filter_serialize(w->filter, hashed_write, w);
    if (err)
        return err;
    uint8_t alen[8];
    bf_put64(alen, w->audit ? bf_audit_serialized_size(w->audit) : 0);
    if (hashed_write(w, alen, 8))
        return BF_ERR_IO;
    if (w->audit && (err = bf_audit_serialize(w->audit, hashed_write, w)))
        return err;
    uint8_t sum[8];
    bf_put64(sum, XXH3_64bits_digest(w->state));
    return write(wopaque, sum, 8) ? BF_ERR_IO : BF_OK;
}

int bs_ckpt_write(const char *dir, const char *topic, int32_t partition,
                  int64_t next_offset, const bs_ckpt_wm *wm, uint32_t nwm,
                  const bf_filter *filter, char *errstr, size_t errstr_size)
{
    return bs_ckpt_write_flags(dir, topic, partition, next_offset, wm, nwm,
                               filter, 0, errstr, errstr_size);
}

static bool meta_ok(const bs_ckpt_meta *m)
{
    size_t tlen = strlen(m->topic);
    return tlen > 0 && tlen <= 249 && m->nwm <= BS_CKPT_MAX_WATERMARKS;
}

uint64_t bs_ckpt_size(const bs_ckpt_meta *m, const bf_filter *filter,
                      bool delta)
{
    return FIXED + strlen(m->topic) + (uint64_t)m->nwm * 12 +
           (delta ? 24 : 16) + 8 +
           (delta ? bf_filter_delta_size(filter)
                  : bf_filter_serialized_size(filter)) +
           8 + (m->audit ? bf_audit_serialized_size(m->audit) : 0) + 8;
}

int bs_ckpt_write_path(const char *path, const bs_ckpt_meta *m,
                       const bf_filter *filter, bool delta, unsigned flags,
                       char *errstr, size_t errstr_size)
{
    uint64_t mark;
    if (!meta_ok(m)) {
        snprintf(errstr, errstr_size, "%s: bad topic name or too many "
                 "watermarks", path);
        return -1;
    }
    if (delta && (!bf_filter_tracked(filter, &mark) || mark != m->prev_id)) {
        snprintf(errstr, errstr_size, "%s: the filter's changes are not "
                 "tracked from state %016llx", path,
                 (unsigned long long)m->prev_id);
        return -1;
    }
    ckpt_writer w = {m->topic, m->partition, m->next_offset, m->wm, m->nwm,
                     filter, m->seq, m->id, m->prev_id, delta, m->audit,
                     XXH3_createState(), NULL, NULL};
    if (!w.state) {
        snprintf(errstr, errstr_size, "%s: out of memory", path);
        return -1;
    }
    bf_err err = bf_write_file_atomic_flags(path, flags, produce, &w, errstr,
                                            errstr_size);
    XXH3_freeState(w.state);
    return err == BF_OK ? 0 : -1;
}

int bs_ckpt_write_flags(const char *dir, const char *topic, int32_t partition,
                        int64_t next_offset, const bs_ckpt_wm *wm,
                        uint32_t nwm, const bf_filter *filter, unsigned flags,
                        char *errstr, size_t errstr_size)
{
    char path[4096];
    bs_ckpt_meta m = {topic, partition, next_offset, wm, nwm, 0,
                      bs_ckpt_new_id(), 0, NULL};
    if (!meta_ok(&m) ||
        bs_ckpt_path(dir, topic, partition, path, sizeof(path))) {
        snprintf(errstr, errstr_size, "checkpoint for %s-%d: bad topic name "
                 "or path too long", topic, (int)partition);
        return -1;
    }
    return bs_ckpt_write_path(path, &m, filter, false, flags, errstr,
                              errstr_size);
}

int bs_ckpt_encode_record(const bs_ckpt_meta *m, const bf_filter *filter,
                          bool delta, uint8_t **out, size_t *out_len,
                          char *errstr, size_t errstr_size)
{
    uint64_t mark;
    if (!meta_ok(m) ||
        (delta && (!bf_filter_tracked(filter, &mark) || mark != m->prev_id))) {
        snprintf(errstr, errstr_size, "checkpoint for %s-%d: bad topic name, "
                 "too many watermarks or an untracked filter", m->topic,
                 (int)m->partition);
        return -1;
    }
    ckpt_writer w = {m->topic, m->partition, m->next_offset, m->wm, m->nwm,
                     filter, m->seq, m->id, m->prev_id, delta, m->audit,
                     XXH3_createState(), NULL, NULL};
    bf_membuf mb = {NULL, 0, 0};
    uint64_t want = bs_ckpt_size(m, filter, delta);
    if (want < SIZE_MAX)
        mb.buf = malloc((size_t)want), mb.cap = mb.buf ? (size_t)want : 0;
    bf_err err = w.state ? produce(&w, bf_membuf_write, &mb) : BF_ERR_NOMEM;
    XXH3_freeState(w.state);
    if (err) {
        free(mb.buf);
        snprintf(errstr, errstr_size, "checkpoint for %s-%d: %s", m->topic,
                 (int)m->partition, bf_err_str(err));
        return -1;
    }
    *out = mb.buf;
    *out_len = mb.len;
    return 0;
}

int bs_ckpt_encode(const char *topic, int32_t partition, int64_t next_offset,
                   const bs_ckpt_wm *wm, uint32_t nwm, const bf_filter *filter,
                   uint8_t **out, size_t *out_len, char *errstr,
                   size_t errstr_size)
{
    bs_ckpt_meta m = {topic, partition, next_offset, wm, nwm, 0,
                      bs_ckpt_new_id(), 0, NULL};
    return bs_ckpt_encode_record(&m, filter, false, out, out_len, errstr,
                                 errstr_size);
}

#define FAIL(...)                                                              \
    do {                                                                       \
        snprintf(errstr, errstr_size, __VA_ARGS__);                            \
        goto fail;                                                             \
    } while (0)

/* Magic, version and lengths: what the decoder and bs_ckpt_peek share.
 * `avail` bytes of the record are at buf (the header's part, for peek);
 * len is the record's size.  Fills the header fields of *h and the offset
 * of the payload length (*payload_at). */
static int parse_head(const uint8_t *buf, size_t avail, size_t len,
                      const char *path, bs_ckpt_head *h, size_t *tlen_out,
                      size_t *payload_at, char *errstr, size_t errstr_size)
{
    memset(h, 0, sizeof(*h));
    if (len < FIXED + 1 + 16 + 8 + 8 || avail < FIXED)
        FAIL("%s: truncated checkpoint (%zu bytes)", path, len);
    bool delta = memcmp(buf, DMAGIC, 8) == 0;
    if (!delta && memcmp(buf, MAGIC, 8) != 0)
        FAIL("%s: not a bloomstage checkpoint (bad magic)", path);
    unsigned version = (unsigned)bf_getn(buf + 8, 2);
    if (delta ? version < 1 || version > DVERSION
              : version < 1 || version > VERSION)
        FAIL("%s: checkpoint%s format version %u is not supported (this "
             "build reads version %u)", path, delta ? " delta" : "", version,
             delta ? DVERSION : VERSION);
    size_t tlen = (size_t)bf_getn(buf + 10, 2);
    uint32_t nwm = (uint32_t)bf_getn(buf + 32, 4);
    if (tlen == 0 || tlen > 249 || nwm > BS_CKPT_MAX_WATERMARKS)
        FAIL("%s: bad header (topic length %zu, %u watermarks)", path, tlen,
             nwm);
    size_t nids = delta ? 24 : version == 1 ? 0 : 16;
    size_t off = FIXED + tlen + (size_t)nwm * 12;
    if (off + nids + 8 + 8 > len)
        FAIL("%s: truncated checkpoint (header claims %zu bytes, file has "
             "%zu)", path, off + nids + 16, len);
    if (off + nids + 8 > avail)
        FAIL("%s: truncated checkpoint header", path);
    h->delta = delta;
    h->partition = (int32_t)bf_getn(buf + 12, 4);
    h->next_offset = (int64_t)bf_getn(buf + 16, 8);
    h->bytes = len;
    if (nids) {
        h->seq = bf_getn(buf + off, 8);
        h->id = bf_getn(buf + off + 8, 8);
        if (delta)
            h->prev_id = bf_getn(buf + off + 16, 8);
    }
    *tlen_out = tlen;
    *payload_at = off + nids;
    return 0;
fail:
    return -1;
}

/* Where a checkpoint's sections lie, once their lengths and the checksum
 * agree with the file. */
typedef struct sections {
    size_t off;     /* the filter (or filter delta) */
    uint64_t flen;
    size_t aoff;    /* the audit sample */
    uint64_t alen;  /* 0: none */
    uint64_t sum;   /* the checksum stored (and computed) */
} sections;

/* The sections after the header h (parse_head's, payload at off): the
 * filter's length, the audit section's (snapshots from version 3 and
 * deltas from version 2 end with it: its length, 0 for none, then the
 * sample), and the checksum over everything before it. */
static int check_sections(const uint8_t *buf, size_t len, const char *path,
                          const bs_ckpt_head *h, size_t off, sections *sec,
                          char *errstr, size_t errstr_size)
{
    unsigned version = (unsigned)bf_getn(buf + 8, 2);
    bool audited = h->delta ? version >= 2 : version >= 3;
    uint64_t flen = bf_getn(buf + off, 8);
    off += 8;
    size_t room = len - 8 - off; /* parse_head saw to it */
    if (audited && room < 8)
        FAIL("%s: truncated checkpoint (no room for its audit section)",
             path);
    room -= audited ? 8 : 0;
    if (audited ? flen > room : flen != room)
        FAIL("%s: truncated or damaged: the header says the %s is %llu "
             "bytes, the file has %zu for it", path,
             h->delta ? "filter delta" : "filter", (unsigned long long)flen,
             room);
    size_t aoff = off + (size_t)flen + 8;
    uint64_t alen = audited ? bf_getn(buf + aoff - 8, 8) : 0;
    if (audited && alen != len - 8 - aoff)
        FAIL("%s: truncated or damaged: the header says the audit sample is "
             "%llu bytes, the file has %zu for it", path,
             (unsigned long long)alen, len - 8 - aoff);
    uint64_t want = bf_getn(buf + len - 8, 8);
    uint64_t have = XXH3_64bits(buf, len - 8);
    if (want != have)
        FAIL("%s: checksum mismatch (the checkpoint is damaged: stored "
             "%016llx, computed %016llx)", path, (unsigned long long)want,
             (unsigned long long)have);
    *sec = (sections){off, flen, aoff, alen, want};
    return 0;
fail:
    return -1;
}

/* The record's fields from its header: topic, partition, offsets, ids and
 * the output watermarks.  out->wm is allocated (bs_ckpt_free frees it). */
static int fill_header(const uint8_t *buf, const char *path,
                       const bs_ckpt_head *h, size_t tlen, uint64_t sum,
                       bs_checkpoint *out, char *errstr, size_t errstr_size)
{
    /* A NUL would cut the name short: another partition's name, or
     * none. */
    if (memchr(buf + FIXED, '\0', tlen))
        FAIL("%s: bad topic name (a NUL byte in its %zu bytes)", path, tlen);
    memcpy(out->topic, buf + FIXED, tlen);
    out->topic[tlen] = '\0';
    out->partition = h->partition;
    out->next_offset = h->next_offset;
    out->written_ms = (int64_t)bf_getn(buf + 24, 8);
    out->delta = h->delta;
    out->seq = h->seq;
    /* A version-1 snapshot has no ids: it is seq 0, named by its sum. */
    out->id = bf_getn(buf + 8, 2) == 1 && !h->delta ? sum : h->id;
    out->prev_id = h->prev_id;
    if (out->next_offset < 0)
        FAIL("%s: negative offset %lld", path, (long long)out->next_offset);
    uint32_t nwm = (uint32_t)bf_getn(buf + 32, 4);
    out->nwm = nwm;
    if (nwm) {
        out->wm = calloc(nwm, sizeof(*out->wm));
        if (!out->wm)
            FAIL("%s: out of memory", path);
        for (uint32_t i = 0; i < nwm; i++) {
            const uint8_t *e = buf + FIXED + tlen + (size_t)i * 12;
            out->wm[i].partition = (int32_t)bf_getn(e, 4);
            out->wm[i].high = (int64_t)bf_getn(e + 4, 8);
        }
    }
    return 0;
fail:
    return -1;
}

/* A delta's filter delta checked against the record's ids, then kept:
 * the caller's buffer itself when taken is not NULL (*taken set), else a
 * copy. */
static int keep_delta(const uint8_t *buf, const char *path,
                      const sections *sec, bs_checkpoint *out, bool *taken,
                      char *errstr, size_t errstr_size)
{
    char why[BS_ERRSTR_SIZE];
    bf_delta_info di;
    if (bf_delta_check(buf + sec->off, (size_t)sec->flen, &di, why,
                       sizeof(why)) != BF_OK)
        FAIL("%s: the filter delta inside is damaged: %s", path, why);
    if (di.base_mark != out->prev_id || di.new_mark != out->id)
        FAIL("%s: the filter delta inside goes from state %016llx to "
             "%016llx, the record from %016llx to %016llx", path,
             (unsigned long long)di.base_mark,
             (unsigned long long)di.new_mark,
             (unsigned long long)out->prev_id, (unsigned long long)out->id);
    if (out->seq == 0)
        FAIL("%s: a delta with seq 0 (deltas follow a state)", path);
    if (taken) { /* the caller's buffer becomes the record's */
        out->dmem = (void *)buf;
        out->dbytes = buf + sec->off;
        *taken = true;
    } else {
        uint8_t *copy = malloc((size_t)sec->flen);
        if (!copy)
            FAIL("%s: out of memory", path);
        memcpy(copy, buf + sec->off, (size_t)sec->flen);
        out->dmem = copy;
        out->dbytes = copy;
    }
    out->dlen = (size_t)sec->flen;
    return 0;
fail:
    return -1;
}

/* A snapshot's filter, loaded: a dedup filter (scalable, or windowed for
 * dedup.window.ms, which carries its generations and stream time inside)
 * whose seed is its audit sample's. */
static int load_filter(const uint8_t *buf, const char *path,
                       const sections *sec, bs_checkpoint *out, char *errstr,
                       size_t errstr_size)
{
    char why[BS_ERRSTR_SIZE];
    if (bf_filter_load_mem(buf + sec->off, (size_t)sec->flen, BF_LOAD_COPY,
                           &out->filter, why, sizeof(why)) != BF_OK)
        FAIL("%s: the filter inside is damaged: %s", path, why);
    if (bf_filter_kind(out->filter) != BF_KIND_SCALABLE &&
        bf_filter_kind(out->filter) != BF_KIND_WINDOWED)
        FAIL("%s: holds a %s filter, not a scalable one", path,
             bf_kind_name(bf_filter_kind(out->filter)));
    if (out->audit && bf_audit_seed(out->audit) != bf_filter_seed(out->filter))
        FAIL("%s: the audit sample's hash seed %#llx is not the filter's "
             "%#llx", path, (unsigned long long)bf_audit_seed(out->audit),
             (unsigned long long)bf_filter_seed(out->filter));
    return 0;
fail:
    return -1;
}

/* take: buf is malloc'd and a delta's record keeps it (set to true only
 * when it did: the caller frees it otherwise). */
static int decode(const uint8_t *buf, size_t len, const char *path,
                  bs_checkpoint *out, bool *taken, char *errstr,
                  size_t errstr_size)
{
    memset(out, 0, sizeof(*out));
    bs_ckpt_head h;
    size_t tlen, off;
    sections sec;
    if (parse_head(buf, len, len, path, &h, &tlen, &off, errstr,
                   errstr_size) != 0 ||
        check_sections(buf, len, path, &h, off, &sec, errstr,
                       errstr_size) != 0 ||
        fill_header(buf, path, &h, tlen, sec.sum, out, errstr,
                    errstr_size) != 0)
        goto fail;
    char why[BS_ERRSTR_SIZE];
    if (sec.alen && bf_audit_load_mem(buf + sec.aoff, (size_t)sec.alen, 0,
                                      &out->audit, why, sizeof(why)) != BF_OK)
        FAIL("%s: the audit sample inside is damaged: %s", path, why);
    if (h.delta ? keep_delta(buf, path, &sec, out, taken, errstr,
                             errstr_size) != 0
                : load_filter(buf, path, &sec, out, errstr, errstr_size) != 0)
        goto fail;
    return 1;
fail:
    if (taken && *taken) { /* not kept after all: the caller frees it */
        out->dmem = NULL;
        *taken = false;
    }
    bs_ckpt_free(out);
    return -1;
}

int bs_ckpt_decode(const uint8_t *buf, size_t len, const char *path,
                   bs_checkpoint *out, char *errstr, size_t errstr_size)
{
    return decode(buf, len, path, out, NULL, errstr, errstr_size);
}

int bs_ckpt_apply(bs_checkpoint *c, bs_checkpoint *d, const char *name,
                  char *errstr, size_t errstr_size)
{
    char why[BS_ERRSTR_SIZE];
    if (!d->delta || c->delta || !c->filter) {
        snprintf(errstr, errstr_size, "%s: not a delta on a whole state",
                 name);
        return -1;
    }
    if (strcmp(c->topic, d->topic) != 0 || c->partition != d->partition) {
        snprintf(errstr, errstr_size, "%s: a delta of %s [%d], not of %s "
                 "[%d]", name, d->topic, (int)d->partition, c->topic,
                 (int)c->partition);
        return -1;
    }
    if (d->prev_id != c->id || d->seq != c->seq + 1) {
        snprintf(errstr, errstr_size, "%s: base mismatch: the delta (seq "
                 "%llu) applies to state %016llx, the state before it is "
                 "%016llx (seq %llu)", name, (unsigned long long)d->seq,
                 (unsigned long long)d->prev_id, (unsigned long long)c->id,
                 (unsigned long long)c->seq);
        return -1;
    }
    if (d->audit && bf_audit_seed(d->audit) != bf_filter_seed(c->filter)) {
        snprintf(errstr, errstr_size, "%s: the audit sample's hash seed "
                 "%#llx is not the filter's %#llx", name,
                 (unsigned long long)bf_audit_seed(d->audit),
                 (unsigned long long)bf_filter_seed(c->filter));
        return -1;
    }
    uint64_t mark;
    if (!bf_filter_tracked(c->filter, &mark) || mark != c->id) {
        if (bf_filter_track(c->filter, c->id, why, sizeof(why)) != BF_OK) {
            snprintf(errstr, errstr_size, "%s: %s", name, why);
            return -1;
        }
    }
    if (bf_filter_delta_apply(c->filter, d->dbytes, d->dlen, why,
                              sizeof(why)) != BF_OK) {
        snprintf(errstr, errstr_size, "%s: the filter delta does not apply: "
                 "%s", name, why);
        return -1;
    }
    bs_ckpt_wm *wm = NULL;
    if (d->nwm) {
        if (!(wm = malloc(d->nwm * sizeof(*wm)))) {
            /* the filter moved on already: the state is unusable */
            snprintf(errstr, errstr_size, "%s: out of memory", name);
            return -1;
        }
        memcpy(wm, d->wm, d->nwm * sizeof(*wm));
    }
    free(c->wm);
    c->wm = wm;
    c->nwm = d->nwm;
    /* The sample is written whole in every record: the delta's is the
     * state's (none in a version-1 delta, or with the audit off). */
    bf_audit_destroy(c->audit);
    c->audit = d->audit;
    d->audit = NULL;
    c->next_offset = d->next_offset;
    c->written_ms = d->written_ms;
    c->seq = d->seq;
    c->id = d->id;
    return 0;
}

/* Opens path and reads its size: 1, 0 no such file, -1 with errstr. */
static int open_sized(const char *path, int *fd, size_t *len, char *errstr,
                      size_t errstr_size)
{
    /* A FIFO, socket, device or directory under a checkpoint's name is
     * refused, without waiting on it. */
    uint64_t size;
    *fd = bf_open_regular(path, &size, errstr, errstr_size);
    if (*fd < 0)
        return errno == ENOENT ? 0 : -1;
    *len = (size_t)size;
    return 1;
}

int bs_ckpt_peek(const char *path, bs_ckpt_head *out, char *errstr,
                 size_t errstr_size)
{
    int fd;
    size_t len;
    int rc = open_sized(path, &fd, &len, errstr, errstr_size);
    if (rc <= 0)
        return rc;
    rc = -1;
    uint8_t *buf = NULL;
    size_t want = FIXED + 249 + 24 + 8;
    uint8_t fixed[FIXED];
    if (len < FIXED || pread(fd, fixed, FIXED, 0) != (ssize_t)FIXED)
        FAIL("%s: truncated checkpoint (%zu bytes)", path, len);
    uint32_t nwm = (uint32_t)bf_getn(fixed + 32, 4);
    if (nwm <= BS_CKPT_MAX_WATERMARKS)
        want += (size_t)nwm * 12;
    if (want > len)
        want = len;
    if (!(buf = malloc(want)))
        FAIL("%s: out of memory", path);
    if (pread(fd, buf, want, 0) != (ssize_t)want)
        FAIL("%s: read failed: %s", path, strerror(errno));
    size_t tlen, off;
    if (parse_head(buf, want, len, path, out, &tlen, &off, errstr,
                   errstr_size) != 0)
        goto fail;
    if (!out->delta && bf_getn(buf + 8, 2) == 1) { /* named by its sum */
        uint8_t sum[8];
        if (pread(fd, sum, 8, (off_t)(len - 8)) != 8)
            FAIL("%s: read failed: %s", path, strerror(errno));
        out->id = bf_getn(sum, 8);
    }
    rc = 1;
fail:
    free(buf);
    close(fd);
    return rc;
}

int bs_ckpt_load(const char *path, bs_checkpoint *out, char *errstr,
                 size_t errstr_size)
{
    memset(out, 0, sizeof(*out));
    uint8_t *buf = NULL;
    int fd;
    size_t len;
    int rc = open_sized(path, &fd, &len, errstr, errstr_size);
    if (rc <= 0)
        return rc;
    rc = -1;
    if (len < FIXED + 1 + 8 + 8)
        FAIL("%s: truncated checkpoint (%zu bytes)", path, len);
    buf = malloc(len);
    if (!buf)
        FAIL("%s: cannot allocate %zu bytes to read it", path, len);
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, buf + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            FAIL("%s: read failed: %s", path, n ? strerror(errno)
                                                : "file shrank while read");
        got += (size_t)n;
    }
    bool taken = false;
    rc = decode(buf, len, path, out, &taken, errstr, errstr_size);
    if (taken)
        buf = NULL;
fail:
    free(buf);
    close(fd);
    return rc;
}

void bs_ckpt_free(bs_checkpoint *c)
{
    free(c->wm);
    bf_filter_destroy(c->filter);
    bf_audit_destroy(c->audit);
    free(c->dmem);
    c->wm = NULL;
    c->filter = NULL;
    c->audit = NULL;
    c->dmem = NULL;
    c->dbytes = NULL;
}
