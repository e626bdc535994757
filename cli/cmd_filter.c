/*
 * cmd_filter.c -- `bloomstage filter build|info|query|merge`: blocklist
 * filters from lists, and a look inside any filter file.
 *
 * Lists are text, one entry per line; leading/trailing white space (and so
 * CRLF line ends) is stripped, blank lines and '#' comments are skipped.
 * Entries are matched as exact bytes: the stage hashes the key it extracts
 * from a record the same way, so a list must be spelled as the keys are.
 */
#include "commands.h"
#include "base/util.h"

#include <bloomfilters.h>
#include <config.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_LINE (1u << 20)

static int usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "bloomstage filter %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see 'bloomstage filter %s --help')\n", cmd);
    return BS_EXIT_USAGE;
}

/* -- build ----------------------------------------------------------------- */

static const char BUILD_HELP[] =
    "usage: bloomstage filter build --fpr P [--capacity N] [--counting]\n"
    "                               [--seed S] -o OUT.bf [LIST | -]\n"
    "\n"
    "Builds a blocklist filter from a text list (one entry per line; blank\n"
    "lines and '#' comments skipped; surrounding white space and CRLF line\n"
    "ends stripped).  LIST '-' or none reads standard input.\n"
    "\n"
    "  --fpr P        target false-positive rate, 0 < P <= "
    BS_CONFIG_STR(BS_CONFIG_FPR_MAX) " (required)\n"
    "  --capacity N   keys to size for (default: the entries in the list,\n"
    "                 counted in a first pass); a count: suffixes k, M, G\n"
    "                 are powers of 1000 (100k = 100000), 1e6 works too\n"
    "  --counting     a counting filter (entries removable later) instead\n"
    "                 of a blocked one\n"
    "  --seed S       hash seed (default: bloomstage's)\n"
    "  -o, --output   the filter file to write (atomically)\n"
    "\n"
    "A progress bar is shown on a terminal.  Exit 0 on success, 1 on a\n"
    "failure (unreadable list, write error), 2 on a usage error.\n";

/* Opens the list; stdin is spooled to a temp file so it can be counted and
 * then read again, like a named file. */
static int open_list(const char *path, char *err, size_t errsz)
{
    if (path && strcmp(path, "-") != 0) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            snprintf(err, errsz, "%s: %s", path, strerror(errno));
        return fd;
    }
    FILE *tmp = tmpfile();
    if (!tmp) {
        snprintf(err, errsz, "cannot create a temp file: %s",
                 strerror(errno));
        return -1;
    }
    char buf[1 << 16];
    ssize_t n;
    while ((n = read(STDIN_FILENO, buf, sizeof(buf))) != 0) {
        if (n < 0) {
            if (errno == EINTR)
                continue;
            snprintf(err, errsz, "reading standard input: %s",
                     strerror(errno));
            fclose(tmp);
            return -1;
        }
        if (fwrite(buf, 1, (size_t)n, tmp) != (size_t)n) {
            snprintf(err, errsz, "spooling standard input: %s",
                     strerror(errno));
            fclose(tmp);
            return -1;
        }
    }
    if (fflush(tmp) != 0) {
        snprintf(err, errsz, "spooling standard input: %s", strerror(errno));
        fclose(tmp);
        return -1;
    }
    int fd = dup(fileno(tmp));
    fclose(tmp);
    if (fd < 0 || lseek(fd, 0, SEEK_SET) < 0) {
        snprintf(err, errsz, "spooling standard input: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* One pass over the list: counts entries, and adds them to f if given.
 * Returns -1 with err set on a read error or an over-long line. */
static int64_t list_pass(int fd, const char *name, bf_filter *f,
                         const char *what, char *err, size_t errsz)
{
    struct stat st;
    uint64_t total = fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
    if (lseek(fd, 0, SEEK_SET) < 0) {
        snprintf(err, errsz, "%s: %s", name, strerror(errno));
        return -1;
    }
    bs_lines *lr = bs_lines_new(fd, MAX_LINE);
    if (!lr) {
        snprintf(err, errsz, "out of memory");
        return -1;
    }
    bs_progress bar;
    bs_progress_start(&bar, what, total);
    int64_t entries = 0;
    const char *line;
    size_t len;
    int r;
    while ((r = bs_lines_next(lr, &line, &len)) > 0) {
        if (!bs_list_entry(&line, &len))
            continue;
        entries++;
        if (f) {
            int added = bf_filter_add(f, line, len);
            if (added < 0) {
                snprintf(err, errsz, "%s:%llu: cannot add: %s", name,
                         (unsigned long long)bs_lines_number(lr),
                         bf_err_str((bf_err)-added));
                entries = -1;
                break;
            }
        }
        if ((entries & 0xffff) == 0)
            bs_progress_update(&bar, bs_lines_bytes(lr), (uint64_t)entries);
    }
    if (r < 0) {
        snprintf(err, errsz, "%s:%llu: %s", name,
                 (unsigned long long)bs_lines_number(lr) + 1,
                 errno == E2BIG ? "line longer than 1 MiB (not a text list?)"
                                : strerror(errno));
        entries = -1;
    }
    bs_progress_end(&bar);
    bs_lines_destroy(lr);
    return entries;
}

/* filter build's options and operand. */
typedef struct build_opts {
    double fpr;        /* --fpr, required */
    uint64_t capacity; /* --capacity; 0: the entries in the list */
    uint64_t seed;
    bool counting;
    const char *out;  /* -o OUT.bf, required */
    const char *list; /* LIST, "-" for stdin */
    const char *name; /* the list in messages */
} build_opts;

/* Reads filter build's command line into o: -1 to go on, else the exit
 * status. */
static int build_parse(int argc, char **argv, build_opts *o)
{
    static const struct option opts[] = {
        {"fpr", required_argument, NULL, 'p'},
        {"capacity", required_argument, NULL, 'n'},
        {"counting", no_argument, NULL, 'C'},
        {"seed", required_argument, NULL, 's'},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {0, 0, 0, 0}};
    *o = (build_opts){.seed = BF_DEFAULT_SEED};
    int c;
    optind = 0;
    while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'p':
            if (!bs_parse_double(optarg, &o->fpr) ||
                !(o->fpr > 0 && o->fpr <= BS_CONFIG_FPR_MAX))
                return usage_error("build", "--fpr '%s' must be a number in "
                                   "(0, %g]", optarg, BS_CONFIG_FPR_MAX);
            break;
        case 'n':
            if (!bs_parse_count(optarg, &o->capacity) || o->capacity == 0)
                return usage_error("build", "--capacity '%s' must be a whole "
                                   "number >= 1", optarg);
            break;
        case 'C':
            o->counting = true;
            break;
        case 's':
            if (!bs_parse_u64(optarg, &o->seed))
                return usage_error("build", "--seed '%s' must be a whole "
                                   "number", optarg);
            break;
        case 'o':
            o->out = optarg;
            break;
        case 'h':
            fputs(BUILD_HELP, stdout);
            return BS_EXIT_OK;
        default:
            return usage_error("build", "%s", "unknown option");
        }
    }
    if (o->fpr == 0)
        return usage_error("build", "%s", "--fpr is required");
    if (!o->out)
        return usage_error("build", "%s", "-o OUT.bf is required");
    if (argc - optind > 1)
        return usage_error("build", "one LIST at most, got '%s' too",
                           argv[optind + 1]);
    o->list = optind < argc ? argv[optind] : "-";
    o->name = strcmp(o->list, "-") ? o->list : "<stdin>";
    return -1;
}

/* The filter of the list open at fd: sized by a first pass that counts
 * the entries when o has no capacity (o->capacity is then that count),
 * filled by a second; *entries is how many it took.  NULL with the
 * reason in err. */
static bf_filter *build_filter(int fd, build_opts *o, int64_t *entries,
                               char *err, size_t errsz)
{
    if (o->capacity == 0) {
        int64_t n = list_pass(fd, o->name, NULL, "counting", err, errsz);
        if (n < 0)
            return NULL;
        o->capacity = n > 0 ? (uint64_t)n : 1;
    }
    bf_filter *f =
        o->counting
            ? bf_filter_from_counting(bf_counting_new(o->capacity, o->fpr,
                                                      o->seed, err, errsz))
            : bf_filter_from_blocked(bf_blocked_new(o->capacity, o->fpr,
                                                    o->seed, err, errsz));
    if (!f)
        return NULL;
    *entries = list_pass(fd, o->name, f, "building", err, errsz);
    if (*entries < 0) {
        bf_filter_destroy(f);
        return NULL;
    }
    return f;
}

/* What was built, on stderr, and a warning when the list held more
 * entries than the filter's capacity. */
static void build_report(const build_opts *o, const bf_filter *f,
                         int64_t entries)
{
    bf_info info;
    bf_filter_info(f, &info);
    char hb[32];
    fprintf(stderr,
            "%s: %s filter, %lld entries (%.0f distinct estimated), "
            "capacity %llu, fpr %g, k=%u, %s\n",
            o->out, bf_kind_name(info.kind), (long long)entries,
            info.est_keys, (unsigned long long)info.capacity, o->fpr, info.k,
            bs_human_bytes(bf_filter_serialized_size(f), hb, sizeof(hb)));
    if ((uint64_t)entries > o->capacity)
        fprintf(stderr, "warning: %lld entries exceed --capacity %llu: the "
                "false-positive rate is above %g (estimated %.3g)\n",
                (long long)entries, (unsigned long long)o->capacity, o->fpr,
                info.est_fpr);
}

static int filter_build(int argc, char **argv)
{
    build_opts o;
    int rc = build_parse(argc, argv, &o);
    if (rc >= 0)
        return rc;
    char err[BS_ERRSTR_SIZE];
    int fd = open_list(o.list, err, sizeof(err));
    if (fd < 0) {
        fprintf(stderr, "bloomstage filter build: %s\n", err);
        return BS_EXIT_FAIL;
    }
    int64_t entries;
    bf_filter *f = build_filter(fd, &o, &entries, err, sizeof(err));
    if (!f || bf_filter_save_file(f, o.out, err, sizeof(err)) != BF_OK) {
        fprintf(stderr, "bloomstage filter build: %s\n", err);
        rc = BS_EXIT_FAIL;
    } else {
        build_report(&o, f, entries);
        rc = BS_EXIT_OK;
    }
    bf_filter_destroy(f);
    close(fd);
    return rc;
}

/* -- info ------------------------------------------------------------------ */

/* PATH loaded in place for reading, or NULL after saying why as
 * "bloomstage filter CMD: ..." (info and query read a file alike). */
static bf_filter *load_or_say(const char *cmd, const char *path)
{
    char err[BS_ERRSTR_SIZE];
    bf_filter *f;
    if (bf_filter_load_file(path, BF_LOAD_INPLACE, &f, err, sizeof(err))) {
        fprintf(stderr, "bloomstage filter %s: %s\n", cmd, err);
        return NULL;
    }
    return f;
}

static const char INFO_HELP[] =
    "usage: bloomstage filter info FILE\n"
    "\n"
    "Kind, parameters (k and the probe scheme among them), memory, keys\n"
    "inserted, estimated distinct keys, fill ratio and estimated\n"
    "false-positive rate of a filter file (and of each layer of a scalable\n"
    "one).  The file is verified (checksum, structure)\n"
    "first.  Exit 0, or 1 if the file cannot be read or is damaged.\n";

static void print_info(const char *path, const bf_info *in, uint64_t fsize)
{
    char hb[32];
    printf("file               %s\n", path);
    printf("kind               %s\n", bf_kind_name(in->kind));
    printf("hash               XXH3-128, seed 0x%016llx\n",
           (unsigned long long)in->seed);
    printf("capacity           %llu keys\n", (unsigned long long)in->capacity);
    printf("target fpr         %g\n", in->fpr_target);
    printf("probes (k)         %u%s\n", in->k,
           in->layers > 1 ? " (newest layer)" : "");
    printf("probe scheme       %s%s\n",
           in->k ? bf_scheme_name(in->scheme) : "- (no layer yet)",
           in->layers > 1 ? " (newest layer)" : "");
    printf("layers             %u\n", in->layers);
    printf("%-18s %llu\n", in->kind == BF_KIND_COUNTING ? "counters" : "bits",
           (unsigned long long)in->cells);
    printf("memory             %s (%llu bytes)\n",
           bs_human_bytes(in->bytes, hb, sizeof(hb)),
           (unsigned long long)in->bytes);
    printf("file size          %llu bytes\n", (unsigned long long)fsize);
    printf("keys inserted      %llu%s\n", (unsigned long long)in->inserts,
           in->kind == BF_KIND_COUNTING ? " (adds minus removes)"
                                        : " (adds that set a new bit)");
    printf("estimated keys     %.0f\n", in->est_keys);
    printf("fill ratio         %.4f\n", in->fill);
    printf("estimated fpr      %.3g\n", in->est_fpr);
    if (in->inserts)
        printf("bits per key       %.2f\n",
               (double)in->bytes * 8 / (double)in->inserts);
}

static int filter_info(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(INFO_HELP, stdout);
        return BS_EXIT_OK;
    }
    if (argc != 2)
        return usage_error("info", "%s", "expects exactly one FILE");
    if (argv[1][0] == '-')
        return usage_error("info", "unknown option '%s'", argv[1]);
    bf_filter *f = load_or_say("info", argv[1]);
    if (!f)
        return BS_EXIT_FAIL;
    bf_info in;
    bf_filter_info(f, &in);
    print_info(argv[1], &in, bf_filter_serialized_size(f));
    bf_scalable *sb = bf_filter_scalable(f);
    if (sb) {
        printf("\nlayer   capacity       target fpr  k   memory      "
               "inserted       fill    est. fpr\n");
        for (uint32_t i = 0; i < bf_scalable_layers(sb); i++) {
            bf_info li;
            char hb[32];
            if (!bf_scalable_layer_info(sb, i, &li))
                break;
            printf("%-7u %-14llu %-11.3g %-3u %-11s %-14llu %-7.4f %.3g\n", i,
                   (unsigned long long)li.capacity, li.fpr_target, li.k,
                   bs_human_bytes(li.bytes, hb, sizeof(hb)),
                   (unsigned long long)li.inserts, li.fill, li.est_fpr);
        }
    }
    if (bf_filter_kind(f) == BF_KIND_COUNTING)
        printf("saturated counters %llu\n",
               (unsigned long long)bf_counting_saturated(
                   bf_filter_counting(f)));
    bf_filter_destroy(f);
    return BS_EXIT_OK;
}

/* -- query ----------------------------------------------------------------- */

static const char QUERY_HELP[] =
    "usage: bloomstage filter query FILE KEY...\n"
    "       bloomstage filter query FILE -      (keys on stdin, one a line)\n"
    "\n"
    "Prints one line per key: 'present<TAB>KEY' (maybe present: a Bloom\n"
    "filter can answer present for a key never added, with the filter's\n"
    "false-positive rate) or 'absent<TAB>KEY' (certainly absent).  Keys on\n"
    "stdin are read as list entries: surrounding white space stripped, blank\n"
    "lines and '#' comments skipped.\n"
    "Exit 0 if every key is present, 1 if any is absent, 2 on a usage error\n"
    "or an unreadable or damaged FILE.\n";

static void answer(const bf_filter *f, const char *key, size_t len,
                   bool *all)
{
    bool present = bf_filter_contains(f, key, len);
    *all = *all && present;
    fputs(present ? "present\t" : "absent\t", stdout);
    fwrite(key, 1, len, stdout);
    putchar('\n');
}

static int filter_query(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(QUERY_HELP, stdout);
        return BS_EXIT_OK;
    }
    if (argc < 3)
        return usage_error("query", "%s", "expects FILE and KEY... (or -)");
    if (argv[1][0] == '-')
        return usage_error("query", "unknown option '%s'", argv[1]);
    bf_filter *f = load_or_say("query", argv[1]);
    if (!f)
        return BS_EXIT_USAGE;
    bool all = true;
    int rc = BS_EXIT_OK;
    if (argc == 3 && !strcmp(argv[2], "-")) {
        bs_lines *lr = bs_lines_new(STDIN_FILENO, MAX_LINE);
        const char *line;
        size_t len;
        int r = lr ? 0 : -1;
        while (lr && (r = bs_lines_next(lr, &line, &len)) > 0)
            if (bs_list_entry(&line, &len))
                answer(f, line, len, &all);
        if (r < 0) {
            fprintf(stderr, "bloomstage filter query: <stdin>:%llu: %s\n",
                    lr ? (unsigned long long)bs_lines_number(lr) + 1 : 0ull,
                    errno == E2BIG ? "line longer than 1 MiB"
                                   : strerror(errno));
            rc = BS_EXIT_USAGE;
        }
        bs_lines_destroy(lr);
    } else {
        for (int i = 2; i < argc; i++)
            answer(f, argv[i], strlen(argv[i]), &all);
    }
    bf_filter_destroy(f);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "bloomstage filter query: writing output: %s\n",
                strerror(errno));
        return BS_EXIT_USAGE;
    }
    if (rc != BS_EXIT_OK)
        return rc;
    return all ? BS_EXIT_OK : BS_EXIT_FAIL;
}

/* -- merge ----------------------------------------------------------------- */

static const char MERGE_HELP[] =
    "usage: bloomstage filter merge A B -o C\n"
    "\n"
    "Writes the union of filters A and B to C (atomically).  Both must be of\n"
    "the same kind, size, probe count and seed (build them with the same\n"
    "--capacity, --fpr and --seed); otherwise nothing is written and the\n"
    "reason is printed.  Exit 0, 1 on failure, 2 on a usage error.\n";

static int filter_merge(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {0, 0, 0, 0}};
    const char *out = NULL;
    int c;
    optind = 0;
    while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        if (c == 'o')
            out = optarg;
        else if (c == 'h') {
            fputs(MERGE_HELP, stdout);
            return BS_EXIT_OK;
        } else
            return usage_error("merge", "%s", "unknown option");
    }
    if (argc - optind != 2 || !out)
        return usage_error("merge", "%s", "expects A B -o C");
    char err[BS_ERRSTR_SIZE];
    bf_filter *a = NULL, *b = NULL;
    int rc = BS_EXIT_FAIL;
    if (bf_filter_load_file(argv[optind], BF_LOAD_COPY, &a, err,
                            sizeof(err)) ||
        bf_filter_load_file(argv[optind + 1], BF_LOAD_INPLACE, &b, err,
                            sizeof(err)))
        goto fail;
    if (bf_filter_merge(a, b, err, sizeof(err)) != BF_OK) {
        fprintf(stderr, "bloomstage filter merge: cannot merge %s and %s: %s\n",
                argv[optind], argv[optind + 1], err);
        goto done;
    }
    if (bf_filter_save_file(a, out, err, sizeof(err)) != BF_OK)
        goto fail;
    rc = BS_EXIT_OK;
    goto done;
fail:
    fprintf(stderr, "bloomstage filter merge: %s\n", err);
done:
    bf_filter_destroy(a);
    bf_filter_destroy(b);
    return rc;
}

/* -- dispatch -------------------------------------------------------------- */

static const char FILTER_HELP[] =
    "usage: bloomstage filter build|info|query|merge ...\n"
    "\n"
    "  build --fpr P [--capacity N] -o OUT.bf [LIST|-]   a filter from a list\n"
    "  info FILE                                         what a filter holds\n"
    "  query FILE KEY... | query FILE -                  present/absent\n"
    "  merge A B -o C                                    the union of two\n"
    "\n"
    "'bloomstage filter SUBCOMMAND --help' tells more.\n";

int cmd_filter(int argc, char **argv)
{
    if (argc < 2) {
        fputs(FILTER_HELP, stderr);
        return BS_EXIT_USAGE;
    }
    const char *sub = argv[1];
    if (!strcmp(sub, "--help") || !strcmp(sub, "-h")) {
        fputs(FILTER_HELP, stdout);
        return BS_EXIT_OK;
    }
    if (!strcmp(sub, "build"))
        return filter_build(argc - 1, argv + 1);
    if (!strcmp(sub, "info"))
        return filter_info(argc - 1, argv + 1);
    if (!strcmp(sub, "query"))
        return filter_query(argc - 1, argv + 1);
    if (!strcmp(sub, "merge"))
        return filter_merge(argc - 1, argv + 1);
    fprintf(stderr, "bloomstage filter: unknown subcommand '%s'\n\n%s", sub,
            FILTER_HELP);
    return BS_EXIT_USAGE;
}
