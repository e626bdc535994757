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
 */
#include "commands.h"
#include "util.h"

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

/* Lines read ahead of the one being looked up (see cmd_dedup). */
#define DEDUP_AHEAD 8

/* A line read ahead: its own copy (the reader's buffer moves on), its hash
 * and its number for messages. */
typedef struct pending {
    char *buf;
    size_t len, cap;
    bf_hash h;
    uint64_t lineno;
} pending;

static bool pending_set(pending *p, const char *line, size_t len)
{
    if (len > p->cap || !p->buf) { /* a buffer even for an empty line */
        size_t cap = p->cap ? p->cap : 64;
        while (cap < len)
            cap *= 2;
        char *nb = realloc(p->buf, cap);
        if (!nb)
            return false;
        p->buf = nb;
        p->cap = cap;
    }
    memcpy(p->buf, line, len);
    p->len = len;
    return true;
}

int cmd_dedup(int argc, char **argv)
{
    static const struct option opts[] = {
        {"fpr", required_argument, NULL, 'p'},
        {"capacity", required_argument, NULL, 'n'},
        {"max-memory", required_argument, NULL, 'm'},
        {"stats", no_argument, NULL, 's'},
        {"window-lines", required_argument, NULL, 'w'},
        {"generations", required_argument, NULL, 'g'},
        {"help", no_argument, NULL, 'h'},
        {0, 0, 0, 0}};
    bf_scalable_params params;
    bf_scalable_params_default(&params);
    params.initial_capacity = 1000000;
    bool stats = false, capacity_given = false;
    uint64_t window = 0, generations = 0;
    int c;
    optind = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'p':
            if (!bs_parse_double(optarg, &params.fpr) ||
                !(params.fpr > 0 && params.fpr <= BS_CONFIG_FPR_MAX)) {
                fprintf(stderr, "bloomstage dedup: --fpr '%s' must be a "
                        "number in (0, %g]\n", optarg, BS_CONFIG_FPR_MAX);
                return BS_EXIT_USAGE;
            }
            break;
        case 'n':
            if (!bs_parse_count(optarg, &params.initial_capacity) ||
                params.initial_capacity == 0) {
                fprintf(stderr, "bloomstage dedup: --capacity '%s' must be a "
                        "whole number >= 1\n", optarg);
                return BS_EXIT_USAGE;
            }
            capacity_given = true;
            break;
        case 'w':
            if (!bs_parse_count(optarg, &window) || window == 0 ||
                window > (UINT64_C(1) << 62)) {
                fprintf(stderr, "bloomstage dedup: --window-lines '%s' must "
                        "be a whole number in 1..2^62\n", optarg);
                return BS_EXIT_USAGE;
            }
            break;
        case 'g':
            if (!bs_parse_count(optarg, &generations) || generations == 0 ||
                generations > BF_WINDOWED_MAX_GENERATIONS) {
                fprintf(stderr, "bloomstage dedup: --generations '%s' must "
                        "be a whole number in 1..%u\n", optarg,
                        BF_WINDOWED_MAX_GENERATIONS);
                return BS_EXIT_USAGE;
            }
            break;
        case 'm': {
            /* A byte size, read as the config reads dedup.max.bytes. */
            const char *why;
            if (bs_config_parse_size(optarg, &params.max_bytes, &why) != 0) {
                fprintf(stderr, "bloomstage dedup: --max-memory '%s' %s\n",
                        optarg, why);
                return BS_EXIT_USAGE;
            }
            if (params.max_bytes == 0) {
                fprintf(stderr, "bloomstage dedup: --max-memory '%s' must be "
                        "at least 1 byte\n", optarg);
                return BS_EXIT_USAGE;
            }
            break;
        }
        case 's':
            stats = true;
            break;
        case 'h':
            fputs(DEDUP_HELP, stdout);
            return BS_EXIT_OK;
        default:
            fprintf(stderr, "(see 'bloomstage dedup --help')\n");
            return BS_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "bloomstage dedup: unexpected argument '%s': input "
                "is standard input\n", argv[optind]);
        return BS_EXIT_USAGE;
    }

    if (generations && !window) {
        fprintf(stderr, "bloomstage dedup: --generations needs "
                "--window-lines\n");
        return BS_EXIT_USAGE;
    }

    char err[256];
    bf_scalable *sb = NULL;
    bf_windowed *wf = NULL;
    if (window) {
        bf_windowed_params wp;
        bf_windowed_params_default(&wp);
        /* Time = line number: lines b - a <= N apart share a window of
         * N + 1. */
        wp.window = (int64_t)window + 1;
        wp.generations = generations ? (uint32_t)generations : 4;
        if (wp.window < (int64_t)wp.generations) /* tiny N: 1-line slices */
            wp.generations = (uint32_t)wp.window;
        wp.fpr = params.fpr;
        wp.seed = params.seed;
        wp.max_bytes = params.max_bytes;
        /* A slice holds at most its width of lines. */
        uint64_t width = ((uint64_t)wp.window + wp.generations - 1) /
                         wp.generations;
        wp.initial_capacity = capacity_given || params.initial_capacity <
                                                    width
                                  ? params.initial_capacity
                                  : width;
        wf = bf_windowed_new(&wp, err, sizeof(err));
    } else {
        sb = bf_scalable_new(&params, err, sizeof(err));
    }
    if (!sb && !wf) {
        fprintf(stderr, "bloomstage dedup: %s\n", err);
        return BS_EXIT_FAIL;
    }
    pending ring[DEDUP_AHEAD];
    memset(ring, 0, sizeof(ring));
    bs_lines *lr = bs_lines_new(STDIN_FILENO, MAX_LINE);
    out_buf out = {malloc(OUT_BUF), 0};
    int rc = BS_EXIT_FAIL;
    if (!lr || !out.buf) {
        fprintf(stderr, "bloomstage dedup: out of memory\n");
        goto done;
    }
    /* Lines go through a ring of DEDUP_AHEAD: a line is read, copied,
     * hashed and its blocks in every layer prefetched (bf_scalable_prefetch_h)
     * DEDUP_AHEAD lines before it is looked up and added, so the cache
     * misses of several lines overlap instead of one line's stalling the
     * loop.  Output order is input order. */
    size_t head = 0, queued = 0;
    uint64_t written = 0;
    const char *line;
    size_t len;
    int r = 1, rerr = 0;
    bool werr = false;
    while (r > 0 || queued > 0) {
        if (r > 0 && (r = bs_lines_next(lr, &line, &len)) < 0)
            rerr = errno; /* reported once the lines before are out */
        if (r > 0) {
            pending *p = &ring[(head + queued) % DEDUP_AHEAD];
            if (!pending_set(p, line, len)) {
                fprintf(stderr, "bloomstage dedup: out of memory\n");
                out_flush(&out);
                goto done;
            }
            p->lineno = bs_lines_number(lr);
            p->h = bf_hash_key(line, len, params.seed);
            if (wf)
                bf_windowed_prefetch_h(wf, p->h);
            else
                bf_scalable_prefetch_h(sb, p->h);
            queued++;
        }
        /* Full, or no more input (end or error): the oldest line's turn. */
        if (queued == 0 || (r > 0 && queued < DEDUP_AHEAD))
            continue;
        pending *p = &ring[head];
        head = (head + 1) % DEDUP_AHEAD;
        queued--;
        int added;
        if (wf) {
            /* Line numbers only grow: never late.  A line's own number,
             * not the read-ahead's: the window is counted in lines. */
            (void)bf_windowed_advance(wf, (int64_t)p->lineno);
            added = bf_windowed_add_if_absent_h(wf, p->h);
        } else {
            added = bf_scalable_add_if_absent_h(sb, p->h);
        }
        if (added < 0) {
            out_flush(&out);
            fprintf(stderr, "bloomstage dedup: line %llu: the filter cannot "
                    "grow past %s (--max-memory); output is complete up to "
                    "the line before\n",
                    (unsigned long long)p->lineno,
                    bs_human_bytes(params.max_bytes, err, sizeof(err)));
            goto done;
        }
        if (added) {
            written++;
            if (out_line(&out, p->buf, p->len)) {
                werr = true;
                break;
            }
        }
    }
    if (!werr && r < 0) {
        fprintf(stderr, "bloomstage dedup: reading line %llu: %s\n",
                (unsigned long long)bs_lines_number(lr) + 1,
                rerr == E2BIG ? "line longer than 64 MiB" : strerror(rerr));
        out_flush(&out);
        goto done;
    }
    if (werr || out_flush(&out)) {
        fprintf(stderr, "bloomstage dedup: writing output: %s\n",
                strerror(errno));
        goto done;
    }
    rc = BS_EXIT_OK;
    if (stats) {
        bf_info in;
        char hb[32];
        if (wf)
            bf_windowed_info(wf, &in);
        else
            bf_scalable_info(sb, &in);
        uint64_t lines = bs_lines_number(lr);
        fprintf(stderr,
                "lines %llu, written %llu, dropped %llu, layers %u, memory %s,"
                " estimated fpr %.3g (bound %g)",
                (unsigned long long)lines, (unsigned long long)written,
                (unsigned long long)(lines - written), in.layers,
                bs_human_bytes(in.bytes, hb, sizeof(hb)), in.est_fpr,
                params.fpr);
        if (wf)
            fprintf(stderr, ", generations %u, estimated lines in the "
                    "window %.0f", bf_windowed_generations(wf), in.est_keys);
        fputc('\n', stderr);
    }
done:
    for (size_t i = 0; i < DEDUP_AHEAD; i++)
        free(ring[i].buf);
    free(out.buf);
    bs_lines_destroy(lr);
    bf_scalable_destroy(sb);
    bf_windowed_destroy(wf);
    return rc;
}
