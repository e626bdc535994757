/*
 * checkpoint.h -- one input partition's durable dedup state: its filter and
 * audit sample, the next input offset they cover, and the output topic's
 * high watermarks when it was taken (for output-tail replay, DESIGN.md).
 *
 * Two kinds of record, both little-endian, both written atomically (temp
 * file, fsync, rename; the directory store fsyncs the directory once per
 * round) and read by the same decoder:
 *
 * A snapshot (format version 3; version 2, without the audit section,
 * and version 1, without the ids either, still load, version 1 as seq 0
 * named by its own checksum) holds the whole filter:
 *
 *   0   8  magic "BLMCKPT\0"
 *   8   2  format version (3)
 *   10  2  topic name length T (1..249)
 *   12  4  partition
 *   16  8  next input offset (int64): the first record NOT covered
 *   24  8  time written, ms since the epoch
 *   32  4  output watermark count W (0..65536)
 *   36  4  reserved (0)
 *   40  T  topic name
 *   ..  W*12  output watermarks: u32 partition, i64 high watermark
 *   ..  8  seq: the state's number in its partition's series (version 2)
 *   ..  8  id: the state's name, which the next delta must give as its base
 *          and the filter's mark (version 2)
 *   ..  8  filter length F
 *   ..  F  the filter, in libbloomfilters' own format (its own checksum)
 *   ..  8  audit length A, 0 when the partition has no audit sample
 *          (version 3)
 *   ..  A  the audit sample (bf_audit, kind 5 of the filter format, its own
 *          checksum; version 3)
 *   end 8  XXH3-64 of every byte before it
 *
 * A delta (magic "BLMCKPD\0", version 2; version 1, without the audit
 * section, still loads) has the same layout with three ids (seq, id, prev:
 * the id of the state it applies to, seq - 1) and, instead of the filter,
 * the filter's delta from state prev (bloomfilters.h, "Deltas") whose base
 * mark is prev and new mark is id.  Its audit sample is whole, not a delta
 * (one format for both records): at the default rate 1/1024 the sample is
 * about 0.016 bytes a key the filter holds, where a delta holds a 72-byte
 * block for each key added since, so it adds 0.02% x (keys held / keys
 * added) to a delta (DESIGN.md has figures).  A restore takes the newest
 * delta's sample as the state's.
 *
 * Loading checks magic, version, lengths against the file size (before
 * allocating) and the checksum, then the filter (or delta) with its own
 * checks; each failure says what is wrong and names the file.  A delta is
 * applied to the state it names with bs_ckpt_apply, which refuses any other
 * (wrong id, a gap in seq, another partition's) by name.
 */
#ifndef BLOOMSTAGE_CHECKPOINT_H
#define BLOOMSTAGE_CHECKPOINT_H

#include <bloomfilters.h>
#include <stdbool.h>
#include <stdint.h>

#define BS_CKPT_MAX_WATERMARKS 65536u

typedef struct bs_ckpt_wm {
    int32_t partition;
    int64_t high;
} bs_ckpt_wm;

typedef struct bs_checkpoint {
    char topic[250];
    int32_t partition;
    int64_t next_offset;
    int64_t written_ms;
    uint32_t nwm;
    bs_ckpt_wm *wm; /* owned */
    bf_filter *filter; /* owned; NULL in a delta */
    bf_audit *audit;   /* owned; NULL: the record has none (audit off, or
                          written before the audit section existed) */
    uint64_t seq, id;  /* the state's number and name */
    bool delta;        /* a delta record: */
    uint64_t prev_id;  /* the state it applies to */
    const uint8_t *dbytes; /* the filter delta, inside dmem */
    size_t dlen;
    void *dmem;            /* owned */
} bs_checkpoint;

/* What a checkpoint write records besides the filter. */
typedef struct bs_ckpt_meta {
    const char *topic;
    int32_t partition;
    int64_t next_offset;
    const bs_ckpt_wm *wm;
    uint32_t nwm;
    uint64_t seq, id;
    uint64_t prev_id; /* deltas only */
    const bf_audit *audit; /* the partition's audit sample, or NULL */
} bs_ckpt_meta;

/* A fresh state id (random enough never to repeat: time, pid, counter). */
uint64_t bs_ckpt_new_id(void);

/* The filter's changes count from state `id` on, so its next checkpoint
 * can be a delta on that state.  A filter that cannot be tracked
 * (windowed), or whose bitmaps cannot be allocated, is not: its next
 * checkpoint is whole. */
void bs_ckpt_track_from(bf_filter *f, uint64_t id);

/* Writes a snapshot (delta false) or a delta (true: the filter's changes
 * since its mark, which must be m->prev_id) to `path` atomically, with
 * bf_write_file_atomic_flags's flags.  0, or -1 with errstr. */
int bs_ckpt_write_path(const char *path, const bs_ckpt_meta *m,
                       const bf_filter *filter, bool delta, unsigned flags,
                       char *errstr, size_t errstr_size)
    __attribute__((warn_unused_result));

/* The same record in memory (a malloc'd *out). */
int bs_ckpt_encode_record(const bs_ckpt_meta *m, const bf_filter *filter,
                          bool delta, uint8_t **out, size_t *out_len,
                          char *errstr, size_t errstr_size)
    __attribute__((warn_unused_result));

/* Bytes bs_ckpt_write_path writes. */
uint64_t bs_ckpt_size(const bs_ckpt_meta *m, const bf_filter *filter,
                      bool delta);

/* Applies delta d (read from `name`) to state *c: c becomes the state d
 * makes (filter, offsets, watermarks, seq, id, and d's audit sample, which
 * moves from d to c).  Refused, c unchanged, when
 * d is of another partition, does not follow c's seq, or names another
 * base than c's id ("base mismatch"), or its filter delta does not apply.
 * c's filter is tracked from then on (bf_filter_track). */
int bs_ckpt_apply(bs_checkpoint *c, bs_checkpoint *d, const char *name,
                  char *errstr, size_t errstr_size)
    __attribute__((warn_unused_result));

/* A record's header, read without the rest (the directory store's scan;
 * the checksum is not verified: bs_ckpt_load does that). */
typedef struct bs_ckpt_head {
    bool delta;
    int32_t partition;
    int64_t next_offset;
    uint64_t seq, id, prev_id;
    uint64_t bytes; /* the file's size */
} bs_ckpt_head;
/* 1 read, 0 no such file, -1 not a checkpoint record (errstr names it). */
int bs_ckpt_peek(const char *path, bs_ckpt_head *out, char *errstr,
                 size_t errstr_size) __attribute__((warn_unused_result));

/* Checkpoint files are named TOPIC-PARTITION BS_CKPT_SUFFIX; this is the
 * one place that spelling is defined. */
#define BS_CKPT_SUFFIX ".ckpt"

/* Whether a directory entry is a checkpoint file (by its name). */
bool bs_ckpt_is_file_name(const char *name);

/* Whether a directory entry is the temp file of a checkpoint write that
 * never reached its rename (a crash): the previous checkpoint stands, and
 * the temp file can go.  The temp naming is libbloomfilters' (its atomic
 * write); this only narrows it to checkpoint files. */
bool bs_ckpt_is_temp_name(const char *name);

/* The file a partition's checkpoint lives in. */
int bs_ckpt_path(const char *dir, const char *topic, int32_t partition,
                 char *buf, size_t size);

/* Writes atomically.  The filter must be serializable (not changed
 * concurrently).  Returns 0 or -1 with errstr (e.g. "PATH: write failed: No
 * space left on device"). */
int bs_ckpt_write(const char *dir, const char *topic, int32_t partition,
                  int64_t next_offset, const bs_ckpt_wm *wm, uint32_t nwm,
                  const bf_filter *filter, char *errstr,
                  size_t errstr_size) __attribute__((warn_unused_result));

/* The same, with bf_write_file_atomic_flags's flags: BF_WRITE_NO_DIRSYNC
 * for a round of many files, made durable by one bf_fsync_dir after. */
int bs_ckpt_write_flags(const char *dir, const char *topic, int32_t partition,
                        int64_t next_offset, const bs_ckpt_wm *wm,
                        uint32_t nwm, const bf_filter *filter, unsigned flags,
                        char *errstr, size_t errstr_size)
    __attribute__((warn_unused_result));

/* Loads PATH.  Returns 1 loaded, 0 no such file (not an error: a partition
 * never checkpointed), -1 unreadable or damaged (errstr says why). */
int bs_ckpt_load(const char *path, bs_checkpoint *out, char *errstr,
                 size_t errstr_size) __attribute__((warn_unused_result));

/* The same format in memory: encode into a malloc'd buffer (*out), decode
 * from one (name is used in messages).  decode returns 1 or -1 like load. */
int bs_ckpt_encode(const char *topic, int32_t partition, int64_t next_offset,
                   const bs_ckpt_wm *wm, uint32_t nwm, const bf_filter *filter,
                   uint8_t **out, size_t *out_len, char *errstr,
                   size_t errstr_size) __attribute__((warn_unused_result));
int bs_ckpt_decode(const uint8_t *buf, size_t len, const char *name,
                   bs_checkpoint *out, char *errstr, size_t errstr_size)
    __attribute__((warn_unused_result));

void bs_ckpt_free(bs_checkpoint *c);

#endif
