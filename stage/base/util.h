/*
 * util.h -- small helpers the bloomstage commands share: strict number
 * parsing for command-line counts (byte sizes: bs_config_parse_size in
 * config.h), human-readable sizes, a line reader for lists and streams,
 * a growing array's room, a progress bar for long jobs on a terminal, and
 * a message into a caller's errstr.
 */
#ifndef BLOOMSTAGE_UTIL_H
#define BLOOMSTAGE_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define BS_WARN_UNUSED __attribute__((warn_unused_result))

/* Strict parses of command-line numbers: the whole string, no sign, no
 * blanks, no overflow.
 *   bs_parse_u64    plain decimal digits ("12345": seeds, ids).
 *   bs_parse_count  a count of things (keys, lines, events): digits, or a
 *                   decimal number with one suffix k/K, M, G, T meaning
 *                   powers of 1000, or an exponent: "100k" = 100000,
 *                   "2.5M" = 2500000, "1e6" = 1000000; the result must be
 *                   whole.
 * Byte sizes are not counts: they are read by bs_config_parse_size
 * (config.h), where the suffixes are powers of 1024 ("512M" = 536870912). */
bool bs_parse_u64(const char *s, uint64_t *out) BS_WARN_UNUSED;
bool bs_parse_count(const char *s, uint64_t *out) BS_WARN_UNUSED;
bool bs_parse_double(const char *s, double *out) BS_WARN_UNUSED;

/* "1.5 MiB" */
const char *bs_human_bytes(uint64_t bytes, char *buf, size_t size);

/*
 * A line reader over a file descriptor, with its own large buffer: faster
 * than stdio for the multi-gigabyte streams `dedup` sees.  A line is handed
 * out without its '\n'; the last line need not end in one.  Lines longer
 * than `max_line` are an error (bs_lines_next returns -1, errno E2BIG), so a
 * binary file cannot make the reader swallow all memory.
 */
typedef struct bs_lines bs_lines;

bs_lines *bs_lines_new(int fd, size_t max_line);
void bs_lines_destroy(bs_lines *lr);
/* 1 with *line and *len set (valid until the next call), 0 at end of input,
 * -1 on a read error or an over-long line (errno says which). */
int bs_lines_next(bs_lines *lr, const char **line, size_t *len);
uint64_t bs_lines_number(const bs_lines *lr); /* 1-based, of the last line */
uint64_t bs_lines_bytes(const bs_lines *lr);  /* consumed so far */

/* A list entry from a raw line: leading and trailing white space (and so a
 * CRLF's '\r') stripped; false for a blank line or a '#' comment. */
bool bs_list_entry(const char **line, size_t *len);

/* Room for `need` (>= 1) elements of `size` bytes in a growing array:
 * arr itself when *cap already holds them, else arr reallocated to the
 * capacity doubled from *cap (from `first` when *cap is 0) until it
 * does, with *cap set.  NULL when out of memory or when the size would
 * overflow; arr is then still valid and *cap unchanged. */
void *bs_grow(void *arr, size_t *cap, size_t need, size_t size,
              size_t first) BS_WARN_UNUSED;

/* A progress bar on stderr, drawn only when stderr is a terminal, at most
 * ten times a second.  total 0 = unknown (a counter is shown instead). */
typedef struct bs_progress {
    bool enabled;
    uint64_t total;
    const char *what;
    double last;
} bs_progress;

void bs_progress_start(bs_progress *p, const char *what, uint64_t total);
void bs_progress_update(bs_progress *p, uint64_t done, uint64_t items);
void bs_progress_end(bs_progress *p);

/* fmt's text into errstr[n] (nothing if errstr is NULL or n 0): the
 * errstr most calls of the engine fill when they fail. */
void bs_errf(char *errstr, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

double bs_now(void); /* monotonic seconds */
double bs_unix_now(void); /* seconds since the epoch (wall clock) */

/* The malloc the process runs on: "jemalloc-5.3.0" when the
 * binary links jemalloc (see CMakeLists.txt), else "glibc". */
const char *bs_allocator(void);

#endif
