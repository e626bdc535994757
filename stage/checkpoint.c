/*
 * checkpoint.c -- see checkpoint.h.
 */
#include "checkpoint.h"

#include <bf_endian.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>
#include <xxhash.h>

static const char MAGIC[8] = {'B', 'L', 'M', 'C', 'K', 'P', 'T', 0};
#define VERSION 1u
#define FIXED 40u

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
    memcpy(fixed, MAGIC, 8);
    bf_put16(fixed + 8, VERSION);
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
    uint8_t flen[8];
    bf_put64(flen, bf_filter_serialized_size(w->filter));
    if (hashed_write(w, flen, 8))
        return BF_ERR_IO;
    bf_err err = bf_filter_serialize(w->filter, hashed_write, w);
    if (err)
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

int bs_ckpt_write_flags(const char *dir, const char *topic, int32_t partition,
                        int64_t next_offset, const bs_ckpt_wm *wm,
                        uint32_t nwm, const bf_filter *filter, unsigned flags,
                        char *errstr, size_t errstr_size)
{
    char path[4096];
    size_t tlen = strlen(topic);
    if (tlen == 0 || tlen > 249 || nwm > BS_CKPT_MAX_WATERMARKS ||
        bs_ckpt_path(dir, topic, partition, path, sizeof(path))) {
        snprintf(errstr, errstr_size, "checkpoint for %s-%d: bad topic name "
                 "or path too long", topic, (int)partition);
        return -1;
    }
    ckpt_writer w = {topic, partition, next_offset, wm, nwm, filter,
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

int bs_ckpt_encode(const char *topic, int32_t partition, int64_t next_offset,
                   const bs_ckpt_wm *wm, uint32_t nwm, const bf_filter *filter,
                   uint8_t **out, size_t *out_len, char *errstr,
                   size_t errstr_size)
{
    size_t tlen = strlen(topic);
    if (tlen == 0 || tlen > 249 || nwm > BS_CKPT_MAX_WATERMARKS) {
        snprintf(errstr, errstr_size, "checkpoint for %s-%d: bad topic name",
                 topic, (int)partition);
        return -1;
    }
    ckpt_writer w = {topic, partition, next_offset, wm, nwm, filter,
                     XXH3_createState(), NULL, NULL};
    bf_membuf m = {NULL, 0, 0};
    uint64_t want = bf_filter_serialized_size(filter) + 64 + tlen +
                    (uint64_t)nwm * 12;
    if (want < SIZE_MAX)
        m.buf = malloc((size_t)want), m.cap = m.buf ? (size_t)want : 0;
    bf_err err = w.state ? produce(&w, bf_membuf_write, &m) : BF_ERR_NOMEM;
    XXH3_freeState(w.state);
    if (err) {
        free(m.buf);
        snprintf(errstr, errstr_size, "checkpoint for %s-%d: %s", topic,
                 (int)partition, bf_err_str(err));
        return -1;
    }
    *out = m.buf;
    *out_len = m.len;
    return 0;
}

#define FAIL(...)                                                              \
    do {                                                                       \
        snprintf(errstr, errstr_size, __VA_ARGS__);                            \
        goto fail;                                                             \
    } while (0)

int bs_ckpt_decode(const uint8_t *buf, size_t len, const char *path,
                   bs_checkpoint *out, char *errstr, size_t errstr_size)
{
    memset(out, 0, sizeof(*out));
    if (len < FIXED + 1 + 8 + 8)
        FAIL("%s: truncated checkpoint (%zu bytes)", path, len);
    if (memcmp(buf, MAGIC, 8) != 0)
        FAIL("%s: not a bloomstage checkpoint (bad magic)", path);
    if (bf_getn(buf + 8, 2) != VERSION)
        FAIL("%s: checkpoint format version %u is not supported (this build "
             "reads version %u)", path, (unsigned)bf_getn(buf + 8, 2), VERSION);
    size_t tlen = (size_t)bf_getn(buf + 10, 2);
    uint32_t nwm = (uint32_t)bf_getn(buf + 32, 4);
    if (tlen == 0 || tlen > 249 || nwm > BS_CKPT_MAX_WATERMARKS)
        FAIL("%s: bad header (topic length %zu, %u watermarks)", path, tlen,
             nwm);
    size_t off = FIXED + tlen + (size_t)nwm * 12;
    if (off + 8 + 8 > len)
        FAIL("%s: truncated checkpoint (header claims %zu bytes, file has "
             "%zu)", path, off + 16, len);
    uint64_t flen = bf_getn(buf + off, 8);
    off += 8;
    if (flen != len - 8 - off)
        FAIL("%s: truncated or damaged: the header says the filter is %llu "
             "bytes, the file has %zu for it", path, (unsigned long long)flen,
             len - 8 - off);
    uint64_t want = bf_getn(buf + len - 8, 8);
    uint64_t have = XXH3_64bits(buf, len - 8);
    if (want != have)
        FAIL("%s: checksum mismatch (the checkpoint is damaged: stored "
             "%016llx, computed %016llx)", path, (unsigned long long)want,
             (unsigned long long)have);
    /* A NUL would cut the name short: another partition's name, or
     * none. */
    if (memchr(buf + FIXED, '\0', tlen))
        FAIL("%s: bad topic name (a NUL byte in its %zu bytes)", path, tlen);
    memcpy(out->topic, buf + FIXED, tlen);
    out->topic[tlen] = '\0';
    out->partition = (int32_t)bf_getn(buf + 12, 4);
    out->next_offset = (int64_t)bf_getn(buf + 16, 8);
    out->written_ms = (int64_t)bf_getn(buf + 24, 8);
    if (out->next_offset < 0)
        FAIL("%s: negative offset %lld", path, (long long)out->next_offset);
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
    char why[512];
    if (bf_filter_load_mem(buf + off, (size_t)flen, BF_LOAD_COPY,
                           &out->filter, why, sizeof(why)) != BF_OK)
        FAIL("%s: the filter inside is damaged: %s", path, why);
    /* A dedup filter: scalable, or windowed (dedup.window.ms), which
     * carries its generations and stream time inside. */
    if (bf_filter_kind(out->filter) != BF_KIND_SCALABLE &&
        bf_filter_kind(out->filter) != BF_KIND_WINDOWED)
        FAIL("%s: holds a %s filter, not a scalable one", path,
             bf_kind_name(bf_filter_kind(out->filter)));
    return 1;
fail:
    bs_ckpt_free(out);
    return -1;
}

int bs_ckpt_load(const char *path, bs_checkpoint *out, char *errstr,
                 size_t errstr_size)
{
    memset(out, 0, sizeof(*out));
    uint8_t *buf = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        snprintf(errstr, errstr_size, "%s: cannot open: %s", path,
                 strerror(errno));
        return -1;
    }
    int rc = -1;
    struct stat st;
    if (fstat(fd, &st) != 0)
        FAIL("%s: cannot stat: %s", path, strerror(errno));
    size_t len = (size_t)st.st_size;
    if (st.st_size < (off_t)(FIXED + 1 + 8 + 8))
        FAIL("%s: truncated checkpoint (%lld bytes)", path,
             (long long)st.st_size);
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
    rc = bs_ckpt_decode(buf, len, path, out, errstr, errstr_size);
fail:
    free(buf);
    close(fd);
    return rc;
}

void bs_ckpt_free(bs_checkpoint *c)
{
    free(c->wm);
    bf_filter_destroy(c->filter);
    c->wm = NULL;
    c->filter = NULL;
}
