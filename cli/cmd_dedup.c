/*
 * cmd_dedup.c -- `bloomstage dedup`: the stage's dedup filter as a Unix line
 * filter.  Each line is written the first time it is seen; like
 * awk '!seen[$0]++' but in memory bounded by the scalable filter (about 5
 * bytes a distinct line at the default rate), not by the lines themselves.
 *
 * The price is the filter's: a line never seen before is dropped as a
 * "duplicate" with probability <= --fpr over the whole run (1e-6 default).
 *
 * --window-lines N forgets: the windowed filter (bloomfilters.h) with time
 * measured in input lines, so a line repeating one of the N lines before it
 * is dropped, one written more than (N+1)(1+1/G) lines before is written
 * again, and memory follows the distinct lines of one window however long
 * the input is.
 *
 * --audit RATE runs an audit sample (bf_audit) beside the filter: a
 * fraction RATE of lines is also kept exactly, so the lines the filter
 * wrongly drops among them are counted, and the run ends with the
 * measured rate, its 95% interval, the filter's own estimate and --fpr.
 * Rescue (on unless --no-audit-rescue) writes such a line anyway: it is
 * known to be new.
 */
#include "cli_audit.h"
#include "cli_opts.h"
#include "commands.h"
#include "base/util.h"

#include <bloomfilters.h>
#include <config.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char DEDUP_HELP[] =
    "usage: bloomstage dedup [--fpr P] [--capacity N] [--max-memory BYTES]\n"
    "                        [--window-lines N [--generations G]]\n"
    "                        [--audit RATE [--no-audit-rescue]]\n"
    "                        [--stats] < in > out\n"
    "\n"
    "Writes each line of standard input the first time it is seen (lines\n"
    "compared without their '\\n'; a last line without one gets one).\n"
    "\n"
    "  --fpr P            probability bound that a new line is wrongly\n"
    "                     dropped, over the whole stream (default 1e-6)\n"
    "  --capacity N       lines the first filter layer holds (default 1M);\n"
    "                     a count: k, M, G are powers of 1000 (1M = 10^6)\n"
    "                     layers double as the stream grows\n"
    "  --max-memory B     fail rather than grow the filter past B bytes;\n"
    "                     a size: k, M, G, T are powers of 1024, as in the\n"
    "                     config (512M = 536870912); default no cap\n"
    "  --window-lines N   forget after N lines: a line that repeats one of\n"
    "                     the N lines before it (and that one was written)\n"
    "                     is dropped; a line last written more than\n"
    "                     (N+1)*(1+1/G) lines before is written again\n"
    "                     (except with probability --fpr); in between\n"
    "                     either.  Memory: the distinct lines of N*(1+1/G)\n"
    "                     lines.  A count, as --capacity\n"
    "  --generations G    slices of the window (1..64, default 4, at most\n"
    "                     N+1), with --window-lines: more is tighter, and\n"
    "                     slower\n"
    "  --audit RATE       keep a fraction RATE of lines exactly (in (0, 1];\n"
    "                     0 = off; 0.0009765625 = 1/1024 is the stage's\n"
    "                     default) to measure how many new lines the filter\n"
    "                     drops: at the end, on stderr, the sampled lookups\n"
    "                     of new lines, the false positives among them, the\n"
    "                     measured rate with its 95% interval, the filter's\n"
    "                     estimate and --fpr\n"
    "  --no-audit-rescue  with --audit, drop a sampled new line the filter\n"
    "                     calls seen, as without the audit; by default it\n"
    "                     is written (rescued): sampled lines are exact\n"
    "  --stats            print lines read, written, dropped, filter layers\n"
    "                     and memory on stderr at the end\n"
    "\n"
    "Exit 0, 1 on a read/write error or when --max-memory is reached (the\n"
    "output then holds every line up to the one reported), 2 on a usage\n"
    "error.\n";

#define MAX_LINE (64u << 20)
#define OUT_BUF (256u << 10)

typedef struct out_buf {
    char *buf;
    size_t used;
} out_buf;

static int out_flush(out_buf *o)
{
    size_t off = 0;
    while (off < o->used) {
        ssize_t n = write(STDOUT_FILENO, o->buf + off, o->used - off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        off += (size_t)n;
    }
    o->used = 0;
    return 0;
}

static int out_line(out_buf *o, const char *line, size_t len)
{
    if (len + 1 > OUT_BUF - o->used) {
        if (out_flush(o))
            return -1;
        if (len + 1 > OUT_BUF) { /* a line bigger than the buffer */
            o->used = 0;
            ssize_t n;
            size_t off = 0;
            while (off < len) {
                n = write(STDOUT_FILENO, line + off, len - off);
                if (n < 0 && errno != EINTR)
                    return -1;
                off += n > 0 ? (size_t)n : 0;
            }
            o->buf[o->used++] = '\n';
            return 0;
        }
    }
    memcpy(o->buf + o->used, line, len);
    o->used += len;
    o->buf[o->used++] = '\n';
    return 0;
}

/* Lines read ahead of the one being looked up (see dedup_stream). */
#define DEDUP_AHEAD 8

/* A line read ahead: its own copy (the reader's buffer moves on), its hash,
 * whether the audit samples it, and its number for messages. */
typedef struct pending {
    char *buf;
    size_t len, cap;
    bf_hash h;
    bool sampled;
    uint64_t lineno;
} pending;

static bool pending_set(pending *p, const char *line, size_t len)
{
    /* A buffer even for an empty line (no buffer: cap is 0). */
    char *nb = bs_grow(p->buf, &p->cap, len ? len : 1, 1, 64);
    if (!nb)
        return false;
    p->buf = nb;
    memcpy(p->buf, line, len);
    p->len = len;
    return true;
}

/* The options, as read and checked. */
typedef struct dedup_opts {
    bf_scalable_params params; /* --fpr, --capacity, --max-memory */
    bool stats, capacity_given;
    uint64_t window, generations; /* 0: not given */
    double audit;                 /* --audit's rate; 0: no audit */
    bool no_rescue;               /* --no-audit-rescue */
} dedup_opts;

/* --max-memory's byte size, read as the config reads dedup.max.bytes:
 * false after a message. */
static bool parse_max_memory(const char *arg, uint64_t *max_bytes)
{
    const char *why;
    if (bs_config_parse_size(arg, max_bytes, &why) != 0) {
        fprintf(stderr, "bloomstage dedup: --max-memory '%s' %s\n", arg, why);
        return false;
    }
    if (*max_bytes == 0) {
        fprintf(stderr, "bloomstage dedup: --max-memory '%s' must be at "
                "least 1 byte\n", arg);
        return false;
    }
    return true;
}

/* One option c with its argument arg into o: -1 to go on, else the exit
 * status. */
static int dedup_option(int c, const char *arg, dedup_opts *o)
{
    switch (c) {
    case 'p':
        if (!bs_parse_double(arg, &o->params.fpr) ||
            !(o->params.fpr > 0 && o->params.fpr <= BS_CONFIG_FPR_MAX)) {
            fprintf(stderr, "bloomstage dedup: --fpr '%s' must be a number "
                    "in (0, %g]\n", arg, BS_CONFIG_FPR_MAX);
            return BS_EXIT_USAGE;
        }
        return -1;
    case 'n':
        if (!bs_parse_count(arg, &o->params.initial_capacity) ||
            o->params.initial_capacity == 0) {
            fprintf(stderr, "bloomstage dedup: --capacity '%s' must be a "
                    "whole number >= 1\n", arg);
            return BS_EXIT_USAGE;
        }
        o->capacity_given = true;
        return -1;
    case 'w':
        if (!bs_parse_count(arg, &o->window) || o->window == 0 ||
            o->window > (UINT64_C(1) << 62)) {
            fprintf(stderr, "bloomstage dedup: --window-lines '%s' must be a "
                    "whole number in 1..2^62\n", arg);
            return BS_EXIT_USAGE;
        }
        return -1;
    case 'g':
        if (!bs_parse_count(arg, &o->generations) || o->generations == 0 ||
            o->generations > BF_WINDOWED_MAX_GENERATIONS) {
            fprintf(stderr, "bloomstage dedup: --generations '%s' must be a "
                    "whole number in 1..%u\n", arg,
                    BF_WINDOWED_MAX_GENERATIONS);
            return BS_EXIT_USAGE;
        }
        return -1;
    case 'm':
        return parse_max_memory(arg, &o->params.max_bytes) ? -1
                                                           : BS_EXIT_USAGE;
    case 's':
        o->stats = true;
        return -1;
    case 'a':
        if (!bs_parse_double(arg, &o->audit) ||
            !(o->audit >= 0 && o->audit <= 1)) {
            fprintf(stderr, "bloomstage dedup: --audit '%s' must be a "
                    "fraction in [0, 1] (0: off)\n", arg);
            return BS_EXIT_USAGE;
        }
        return -1;
    case 'r':
        o->no_rescue = true;
        return -1;
    default:
        return cli_opts_help(c, "dedup", DEDUP_HELP);
    }
}

/* Reads the command line into o: -1 to go on, else the exit status. */
static int dedup_parse(int argc, char **argv, dedup_opts *o)
{
    static const struct option opts[] = {
        {"fpr", required_argument, NULL, 'p'},
        {"capacity", required_argument, NULL, 'n'},
        {"max-memory", required_argument, NULL, 'm'},
        {"stats", no_argument, NULL, 's'},
        {"window-lines", required_argument, NULL, 'w'},
        {"generations", required_argument, NULL, 'g'},
        {"audit", required_argument, NULL, 'a'},
        {"no-audit-rescue", no_argument, NULL, 'r'},
        {"help", no_argument, NULL, 'h'},
        {0, 0, 0, 0}};
    memset(o, 0, sizeof(*o));
    bf_scalable_params_default(&o->params);
    o->params.initial_capacity = 1000000;
    int c, rc;
    optind = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1)
        if ((rc = dedup_option(c, optarg, o)) >= 0)
            return rc;
    if (optind < argc) {
        fprintf(stderr, "bloomstage dedup: unexpected argument '%s': input "
                "is standard input\n", argv[optind]);
        return BS_EXIT_USAGE;
    }
    if (o->no_rescue && !o->audit) {
        fprintf(stderr, "bloomstage dedup: --no-audit-rescue needs "
                "--audit\n");
        return BS_EXIT_USAGE;
    }
    if (o->generations && !o->window) {
        fprintf(stderr, "bloomstage dedup: --generations needs "
                "--window-lines\n");
        return BS_EXIT_USAGE;
    }
    return -1;
}

/* One run: the filter (scalable, or windowed with --window-lines), the
 * audit sample beside it (--audit), the ring of lines read ahead, the
 * input and the output. */
typedef struct dedup {
    const dedup_opts *o;
    bf_scalable *sb;
    bf_windowed *wf;
    bf_audit *audit;
    uint64_t rescued;
    pending ring[DEDUP_AHEAD];
    size_t head, queued;
    bs_lines *lr;
    out_buf out;
    uint64_t written;
} dedup;

/* Creates the filter the options ask for: -1 after a message. */
static int dedup_filter_new(dedup *d)
{
    const dedup_opts *o = d->o;
    char err[BS_ERRSTR_SIZE];
    if (o->window) {
        bf_windowed_params wp;
        bf_windowed_params_default(&wp);
        /* Time = line number: lines b - a <= N apart share a window of
         * N + 1. */
        wp.window = (int64_t)o->window + 1;
        wp.generations = o->generations ? (uint32_t)o->generations : 4;
        if (wp.window < (int64_t)wp.generations) /* tiny N: 1-line slices */
            wp.generations = (uint32_t)wp.window;
        wp.fpr = o->params.fpr;
        wp.seed = o->params.seed;
        wp.max_bytes = o->params.max_bytes;
        /* A slice holds at most its width of lines. */
        uint64_t width = ((uint64_t)wp.window + wp.generations - 1) /
                         wp.generations;
        wp.initial_capacity =
            o->capacity_given || o->params.initial_capacity < width
                ? o->params.initial_capacity
                : width;
        d->wf = bf_windowed_new(&wp, err, sizeof(err));
    } else {
        d->sb = bf_scalable_new(&o->params, err, sizeof(err));
    }
    if ((!d->sb && !d->wf) ||
        (o->audit &&
         !(d->audit = bf_audit_new(o->audit, o->params.seed, err,
                                   sizeof(err))))) {
        fprintf(stderr, "bloomstage dedup: %s\n", err);
        return -1;
    }
    return 0;
}

/* Queues a line just read at the ring's end: copied, hashed and its
 * blocks in every layer prefetched.  -1 without memory. */
static int dedup_queue(dedup *d, const char *line, size_t len)
{
    pending *p = &d->ring[(d->head + d->queued) % DEDUP_AHEAD];
    if (!pending_set(p, line, len))
        return -1;
    p->lineno = bs_lines_number(d->lr);
    p->h = bf_hash_key(line, len, d->o->params.seed);
    /* Asked here, a turn ahead, so the turn of the lines not sampled
     * (all but RATE of them) has nothing of the audit's to wait for. */
    p->sampled = d->audit && bf_audit_sampled(d->audit, p->h);
    if (d->wf)
        bf_windowed_prefetch_h(d->wf, p->h);
    else
        bf_scalable_prefetch_h(d->sb, p->h);
    d->queued++;
    return 0;
}

/* The oldest queued line's turn: looked up and added, written if it is
 * new.  0; -1 when the filter cannot grow (after a message, the output
 * flushed); -2 when writing fails. */
static int dedup_turn(dedup *d)
{
    pending *p = &d->ring[d->head];
    d->head = (d->head + 1) % DEDUP_AHEAD;
    d->queued--;
    int added;
    if (d->wf) {
        /* Line numbers only grow: never late.  A line's own number, not
         * the read-ahead's: the window is counted in lines. */
        (void)bf_windowed_advance(d->wf, (int64_t)p->lineno);
        if (d->audit) /* it forgets what the window forgets */
            bf_audit_follow_window(d->audit, d->wf);
        added = bf_windowed_add_if_absent_h(d->wf, p->h);
    } else {
        added = bf_scalable_add_if_absent_h(d->sb, p->h);
    }
    if (added < 0) {
        char hb[32];
        out_flush(&d->out);
        fprintf(stderr, "bloomstage dedup: line %llu: the filter cannot grow "
                "past %s (--max-memory); output is complete up to the line "
                "before\n", (unsigned long long)p->lineno,
                bs_human_bytes(d->o->params.max_bytes, hb, sizeof(hb)));
        return -1;
    }
    /* The audit's verdict on the filter's: 1 for a sampled line known
     * new that the filter drops, which rescue writes anyway. */
    int fp = p->sampled ? bf_audit_check(d->audit, p->h, added == 0) : 0;
    if (fp < 0) {
        out_flush(&d->out);
        fprintf(stderr, "bloomstage dedup: line %llu: out of memory for the "
                "audit sample\n", (unsigned long long)p->lineno);
        return -1;
    }
    bool rescue = fp == 1 && !d->o->no_rescue;
    d->rescued += rescue;
    if (added || rescue) {
        d->written++;
        if (out_line(&d->out, p->buf, p->len))
            return -2;
    }
    return 0;
}

/* Standard input to standard output, each line the first time it is
 * seen: the exit status, after a message on a failure.
 *
 * Lines go through a ring of DEDUP_AHEAD: a line is read, copied, hashed
 * and its blocks in every layer prefetched (bf_scalable_prefetch_h)
 * DEDUP_AHEAD lines before it is looked up and added, so the cache misses
 * of several lines overlap instead of one line's stalling the loop.
 * Output order is input order. */
static int dedup_stream(dedup *d)
{
    const char *line;
    size_t len;
    int r = 1, rerr = 0, t = 0;
    while (r > 0 || d->queued > 0) {
        if (r > 0 && (r = bs_lines_next(d->lr, &line, &len)) < 0)
            rerr = errno; /* reported once the lines before are out */
        if (r > 0 && dedup_queue(d, line, len) != 0) {
            fprintf(stderr, "bloomstage dedup: out of memory\n");
            out_flush(&d->out);
            return BS_EXIT_FAIL;
        }
        /* Full, or no more input (end or error): the oldest line's turn. */
        if (d->queued == 0 || (r > 0 && d->queued < DEDUP_AHEAD))
            continue;
        if ((t = dedup_turn(d)) == -1)
            return BS_EXIT_FAIL;
        if (t == -2)
            break;
    }
    if (t != -2 && r < 0) {
        fprintf(stderr, "bloomstage dedup: reading line %llu: %s\n",
                (unsigned long long)bs_lines_number(d->lr) + 1,
                rerr == E2BIG ? "line longer than 64 MiB" : strerror(rerr));
        out_flush(&d->out);
        return BS_EXIT_FAIL;
    }
    if (t == -2 || out_flush(&d->out)) {
        fprintf(stderr, "bloomstage dedup: writing output: %s\n",
                strerror(errno));
        return BS_EXIT_FAIL;
    }
    return BS_EXIT_OK;
}

static void dedup_filter_info(const dedup *d, bf_info *in)
{
    if (d->wf)
        bf_windowed_info(d->wf, in);
    else
        bf_scalable_info(d->sb, in);
}

/* --audit: what the sample measured, beside what the filter estimates,
 * on stderr. */
static void dedup_print_audit(const dedup *d)
{
    bf_info in;
    dedup_filter_info(d, &in);
    cli_audit_line(stderr, d->audit, &in, &d->rescued);
}

/* --stats: lines read, written, dropped, and the filter, on stderr. */
static void dedup_print_stats(const dedup *d)
{
    bf_info in;
    char hb[32];
    dedup_filter_info(d, &in);
    uint64_t lines = bs_lines_number(d->lr);
    fprintf(stderr,
            "lines %llu, written %llu, dropped %llu, layers %u, memory %s,"
            " estimated fpr %.3g (bound %g)",
            (unsigned long long)lines, (unsigned long long)d->written,
            (unsigned long long)(lines - d->written), in.layers,
            bs_human_bytes(in.bytes, hb, sizeof(hb)), in.est_fpr,
            d->o->params.fpr);
    if (d->wf)
        fprintf(stderr, ", generations %u, estimated lines in the window "
                "%.0f", bf_windowed_generations(d->wf), in.est_keys);
    fputc('\n', stderr);
}

int cmd_dedup(int argc, char **argv)
{
    dedup_opts o;
    int rc = dedup_parse(argc, argv, &o);
    if (rc >= 0)
        return rc;
    dedup d = {.o = &o};
    if (dedup_filter_new(&d) != 0)
        return BS_EXIT_FAIL;
    d.lr = bs_lines_new(STDIN_FILENO, MAX_LINE);
    d.out.buf = malloc(OUT_BUF);
    if (!d.lr || !d.out.buf) {
        fprintf(stderr, "bloomstage dedup: out of memory\n");
        rc = BS_EXIT_FAIL;
    } else {
        rc = dedup_stream(&d);
        if (rc == BS_EXIT_OK && o.stats)
            dedup_print_stats(&d);
        if (rc == BS_EXIT_OK && d.audit)
            dedup_print_audit(&d);
    }
    for (size_t i = 0; i < DEDUP_AHEAD; i++)
        free(d.ring[i].buf);
    free(d.out.buf);
    bs_lines_destroy(d.lr);
    bf_scalable_destroy(d.sb);
    bf_windowed_destroy(d.wf);
    bf_audit_destroy(d.audit);
    return rc;
}
