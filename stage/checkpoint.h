/*
 * checkpoint.h -- one input partition's durable dedup state: its filter, the
 * next input offset the filter covers, and the output topic's high
 * watermarks when it was taken (for output-tail replay, DESIGN.md).
 *
 * File: CHECKPOINT_DIR/TOPIC-PARTITION.ckpt, written atomically (temp file,
 * fsync, rename, fsync of the directory).  Format, little-endian:
 *
 *   0   8  magic "BLMCKPT\0"
 *   8   2  format version (1)
 *   10  2  topic name length T (1..249)
 *   12  4  partition
 *   16  8  next input offset (int64): the first record NOT covered
 *   24  8  time written, ms since the epoch
 *   32  4  output watermark count W (0..65536)
 *   36  4  reserved (0)
 *   40  T  topic name
 *   ..  W*12  output watermarks: u32 partition, i64 high watermark
 *   ..  8  filter length F
 *   ..  F  the filter, in libbloomfilters' own format (its own checksum)
 *   end 8  XXH3-64 of every byte before it
 *
 * Loading checks magic, version, lengths against the file size (before
 * allocating) and the checksum, then loads the filter with its own checks;
 * each failure says what is wrong and names the file.
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
    bf_filter *filter; /* owned */
} bs_checkpoint;

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
