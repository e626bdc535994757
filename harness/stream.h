/*
 * stream.h -- a generated input stream whose every record can be told from
 * its copy in the output, and the output read back and traced to it:
 * every key there, and how many times (test_stage_faults, test_eos).
 *
 * Record i has key "k<id>" (k%07u) and value "v<i>" (v%07zu), so an output
 * record names the input record it copies; a big record (h_stream_add_big)
 * has pad[i] bytes of '.' after that.  The partition is a function of
 * the key id (every copy of a key meets the same partition's filter: dedup
 * is per partition); offsets are what a fresh topic gives records produced
 * in this order.  Checking helpers (they fail the test, core.h).
 */
#ifndef BS_SUPPORT_STREAM_H
#define BS_SUPPORT_STREAM_H

#include "core.h"
#include "kafka.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define H_STREAM_MAXP 16 /* partitions of a stream, at most */

/* One output record, traced back to the input record it copies. */
typedef struct h_outrec {
    uint32_t id;      /* key id */
    size_t rec;       /* input record index */
    int32_t src_part; /* in the input topic */
    int64_t src_off;
    int32_t part; /* in the output topic */
    int64_t off;
    int run; /* free for the test (test_stage_faults: which run) */
} h_outrec;

typedef struct h_stream {
    size_t n, cap, nids;
    int nparts;
    uint64_t seed;
    uint32_t *id;  /* per record */
    int32_t *part; /* per record */
    int64_t *off;  /* per record: its offset in its partition */
    size_t *first; /* per key id: index of its first record */
    char (*key)[16];
    char (*val)[24]; /* "v" and a record index of up to 20 digits */
    int64_t *ts;     /* per record: its timestamp in ms, set by the test
                        (0: none, the producer's clock) */
    uint32_t *pad;   /* per record: '.' bytes after "v<i>" (0 for most) */
    int64_t next[H_STREAM_MAXP]; /* the partitions' end offsets */
    /* Owned here, so that a failed assertion leaks nothing: the output as
     * h_read_out last read it, and h_count_copies' last counts. */
    h_outrec *out;
    size_t nout;
    unsigned *copies;
} h_stream;

/* Room for cap records over nparts partitions; seed drives h_stream_add. */
h_stream *h_stream_new(size_t cap, int nparts, uint64_t seed);
void h_stream_free(h_stream *st);
/* Appends count records: each a copy of a key seen before (any record so
 * far, chosen at random) with probability dup_pct/100, else a new key. */
void h_stream_add(h_stream *st, size_t count, unsigned dup_pct);
/* Appends one big record: a new key, never copied by h_stream_add, whose
 * value is "v<i>" and pad bytes of '.' (a poison record, issue 37). */
void h_stream_add_big(h_stream *st, uint32_t pad);
/* Record i as a producer sends it; a big record's value is built in a
 * malloc'd *big (NULL for the others), which the caller frees. */
h_record h_stream_rec(const h_stream *st, size_t i, char **big);
/* Appends count records timed for windowed dedup: record i gets timestamp
 * t0 + i*step_ms; 40% are new keys, 30% copies of a record less than half
 * a window back, 15% of one 0.9 to 1.4 windows back (the window's edge),
 * 15% of one 1.5 to 3 windows back; a window is window_records records. */
void h_stream_add_timed(h_stream *st, size_t count, int64_t t0,
                        int64_t step_ms, size_t window_records);
/*
 * Synthetic days of traffic for windowed dedup, time compressed through
 * record timestamps (bench_window and bench_window_kafka's one stream):
 * `days` days of record time, per_day records a day at a diurnal rate (a
 * sine, 3x between night and peak); each record a new key (50%), a copy of
 * a record from the last 6 hours (30%), or of one 20-40 hours back (20%:
 * around a 24-hour window's edge and past it).  Fills id[] (new keys
 * numbered 0, 1, ... in order of appearance) and ts[] (ms from 1, non-
 * decreasing) for per_day * days records; returns the number of keys.  A
 * fixed seed: the same arguments give the same stream.
 */
uint32_t h_traffic_days(uint64_t per_day, int days, uint32_t *id,
                        int64_t *ts);
/* Appends h_traffic_days(per_day, days) to st, its timestamps shifted by
 * t0 and its key ids by the keys st holds already. */
void h_stream_add_days(h_stream *st, uint64_t per_day, int days, int64_t t0);
/* Appends a copy (same key, new value, a later offset) of records
 * [from, to). */
void h_stream_add_copies(h_stream *st, size_t from, size_t to);
/* The input's end offsets after records [0, upto). */
void h_stream_ends(const h_stream *st, size_t upto, int64_t *end);

/* Produces records [from, to) to topic in order (h_produce_conf with
 * conf_kv, in chunks of 100k), then checks that the topic's partitions
 * hold exactly records [0, to): low watermark 0, high the stream's. */
void h_stream_produce(const h_stream *st, const char *bootstraps,
                      const char *topic, size_t from, size_t to,
                      const char *const *conf_kv);

/*
 * Reads all of out_topic (H_CONSUME_MS) and traces every record back to
 * its input record: the value names it ("v<i>", i < st->n), the key must
 * be that record's key, and the bloomstage-src header must be
 * in_topic:partition:offset of that record (in_topic NULL: no header is
 * asked for, the output of another program than bloomstage).  Returns the records (owned by
 * st, valid until the next h_read_out) and their count.
 */
h_outrec *h_read_out(h_stream *st, const char *bootstraps,
                     const char *out_topic, const char *in_topic, size_t *n);
/* The same reading with extra consumer settings (h_consume_all_conf),
 * e.g. H_READ_COMMITTED. */
/* Which input record of st the record r (read from an output or rejected
 * topic) is a copy of, by its key and its whole value ("vN" and its
 * padding); st->n if none. */
size_t h_stream_which(const h_stream *st, const h_record *r);
h_outrec *h_read_out_conf(h_stream *st, const char *bootstraps,
                          const char *out_topic, const char *in_topic,
                          const char *const *conf_kv, size_t *n);
/*
 * Copies per key id in the output st->out (owned by st, valid until the
 * next call), checking that every key id whose first record is before upto
 * is there at least once (none lost) and that no output record copies an
 * input record at or past upto.  *extra (if not NULL) gets the copies
 * beyond the first, summed over keys.
 */
unsigned *h_count_copies(h_stream *st, const char *in_topic, size_t upto,
                         size_t *extra);
/* Every key id first seen before upto is in the output exactly once (c:
 * from h_count_copies); a failure names the copies.  why: said on failure. */
void h_expect_once(const h_stream *st, const unsigned *c, const char *in_topic,
                   const char *out_topic, size_t upto, const char *why);

/*
 * A run in which the instance owning the input partitions in `killed` (a
 * bit mask) was killed when the output topic ended at hw_kill[] (per
 * output partition), and the survivors resumed those partitions at
 * resume[]: checks, on the output o[0..n), that no key the killed instance
 * forwarded (from its partitions, below hw_kill) is forwarded again (fails
 * the test naming the record).  Returns in *n_killed how many records it
 * forwarded and in *seen_again how many input records the survivors read
 * (at or after resume, not a key's first copy) repeat one of those keys;
 * a test whose two counts are not both above 0 proved nothing, and fails.
 */
void h_check_killed_keys(const h_stream *st, const h_outrec *o, size_t n,
                         unsigned killed, const int64_t *hw_kill,
                         const int64_t *resume, const char *in_topic,
                         size_t *n_killed, size_t *seen_again);

/*
 * Windowed dedup (dedup.window.ms = window_ms, G generations) as the stage
 * runs it, without false positives: per partition, stream time is the
 * largest timestamp so far, slice floor(T*G/W); a record is dropped iff
 * its key was forwarded in one of the last G+1 slices; a record whose own
 * slice is older than those is late: rejected (reject_late) or deduplicated
 * like any other.  Every record in [0, upto) needs a timestamp.  The model
 * checks the contract on itself (a drop less than W(1+1/G) after the
 * forwarded copy, a forward not within W of it).  Returns a calloc'd flag
 * per record (forwarded), the caller frees it; *late (if not NULL) gets
 * the late records.
 */
bool *h_stream_window_model(const h_stream *st, size_t upto,
                            int64_t window_ms, unsigned G, bool reject_late,
                            size_t *late);
/* The output as h_read_out last read it holds exactly the records of
 * [0, upto) that fwd flags, each once; a failure names a record.  why: said
 * on failure. */
void h_expect_window_output(const h_stream *st, const bool *fwd, size_t upto,
                            const char *why);

#endif
