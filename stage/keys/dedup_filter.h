/*
 * dedup_filter.h -- a partition's dedup filter as the engine uses it: a
 * scalable filter that remembers every key (dedup.window.ms = 0), or a
 * windowed one that forgets a key a window of record time after it was
 * forwarded (bloomfilters.h has the contract).  One place decides which,
 * so the record path, the replay and the restore treat both alike.
 *
 * The filters are bf_filter handles, owned by whoever made them (the
 * partition, partitions.c).  Time is the record timestamp in ms; a record
 * without one (-1) takes the partition's stream time.
 */
#ifndef BLOOMSTAGE_DEDUP_FILTER_H
#define BLOOMSTAGE_DEDUP_FILTER_H

#include <bloomfilters.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct bs_dedup_params {
    bf_scalable_params sp; /* fpr, capacity, growth, tightening, seed, cap */
    int64_t window_ms;     /* 0: no window */
    uint32_t generations;  /* G, with a window */
} bs_dedup_params;

/* A fresh filter, or NULL with errstr. */
bf_filter *bs_dedup_filter_new(const bs_dedup_params *dp, char *errstr,
                               size_t errstr_size);

/* Whether a filter loaded from a checkpoint can serve these settings: a
 * dedup filter of either kind with the same seed.  A windowed filter keeps
 * the window it was built with (logged by the caller when it differs). */
bool bs_dedup_filter_usable(const bf_filter *f, const bs_dedup_params *dp,
                            char *errstr, size_t errstr_size);

/* The memory cap is the process's setting, not stored in files. */
void bs_dedup_filter_set_max_bytes(bf_filter *f, uint64_t max_bytes);

/* Moves the filter's stream time to the record's timestamp (windowed
 * filters; a no-op otherwise), and the partition's audit sample (NULL:
 * none) to the window's slice, so that it forgets what the window
 * forgets.  True if the record is late: older than the oldest generation
 * the window keeps. */
bool bs_dedup_advance(bf_filter *f, bf_audit *audit, int64_t timestamp_ms);

/* Lookup and insert at the filter's stream time: 1 new (added), 0 maybe
 * seen, negative -bf_err when the filter cannot grow (dedup.max.bytes):
 * the key is then not added. */
int bs_dedup_add(bf_filter *f, bf_hash h);

#endif
