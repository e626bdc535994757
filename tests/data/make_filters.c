/*
 * make_filters.c -- the one-off program that wrote the filter files in
 * this directory, each set with the library of its time, and the answers
 * they gave then (<version>_answers.txt).  tests/unit/test_legacy_files.c loads
 * them with the current library and checks it still gives exactly those
 * answers.
 *
 * Not part of the build: compiled by hand against the library of a given
 * commit and run once from tests/data/ with that version's label:
 *
 *   cc -O2 -Ifilters/include tests/data/make_filters.c \
 *      build/filters/libbloomfilters.a -lxxhash -lm -lpthread
 *   ./a.out v1
 *
 *   v1  main at 029bf5a: format version 1, probe scheme 0 (k distinct
 *       9-bit probes), bloomstage before issue 14.  Written by this
 *       program's first form, which had only the 1e-2 filters.
 *   v2  main at 64ef47d: format version 2, probe scheme 1 (one bit a
 *       64-bit lane) at k = 8 (1e-2) and k = 16 (1e-6), before the 32-bit
 *       lanes of k = 16.  The counting filter's format had not changed, so
 *       it was not written again.
 *
 * Built against today's library it would write today's format, which is
 * not what the files are for: keep them as they are.
 *
 * Keys are the strings "key-<i>"; the first NKEYS are inserted, queries
 * run over i < NQUERY.  The answers file lists, per file, every queried i
 * answering "maybe present".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bloomfilters.h"

#define NKEYS 2000
#define NQUERY 20000

static size_t key(unsigned i, char *buf)
{
    return (size_t)snprintf(buf, 32, "key-%u", i);
}

static void answers(FILE *out, const char *name, bf_filter *f)
{
    char buf[32];
    fprintf(out, "%s", name);
    for (unsigned i = 0; i < NQUERY; i++) {
        size_t n = key(i, buf);
        if (bf_filter_contains(f, buf, n))
            fprintf(out, " %u", i);
    }
    fprintf(out, "\n");
}

static void save(const char *name, bf_filter *f, FILE *out)
{
    char err[256];
    if (bf_filter_save_file(f, name, err, sizeof err) != BF_OK) {
        fprintf(stderr, "%s: %s\n", name, err);
        exit(1);
    }
    answers(out, name, f);
    bf_filter_destroy(f);
}

static void blocked(const char *v, const char *kind, double p, FILE *out)
{
    char buf[32], name[64], err[256];
    bf_blocked *b = bf_blocked_new(NKEYS, p, BF_DEFAULT_SEED, err, sizeof err);
    if (!b)
        exit(1);
    for (unsigned i = 0; i < NKEYS; i++)
        (void)bf_blocked_add(b, buf, key(i, buf));
    snprintf(name, sizeof name, "%s_%s.bf", kind, v);
    save(name, bf_filter_from_blocked(b), out);
}

static void scalable(const char *v, const char *kind, double p, FILE *out)
{
    char buf[32], name[64], err[256];
    bf_scalable_params sp;
    bf_scalable_params_default(&sp);
    sp.initial_capacity = 200;
    sp.fpr = p;
    sp.seed = 12345;
    bf_scalable *s = bf_scalable_new(&sp, err, sizeof err);
    if (!s)
        exit(1);
    for (unsigned i = 0; i < NKEYS; i++)
        if (bf_scalable_add_if_absent(s, buf, key(i, buf)) < 0)
            exit(1);
    snprintf(name, sizeof name, "%s_%s.bf", kind, v);
    save(name, bf_filter_from_scalable(s), out);
}

int main(int argc, char **argv)
{
    char buf[32], name[64], err[256];
    if (argc != 2 || (strcmp(argv[1], "v1") && strcmp(argv[1], "v2"))) {
        fprintf(stderr, "usage: %s v1|v2\n", argv[0]);
        return 2;
    }
    const char *v = argv[1];
    snprintf(name, sizeof name, "%s_answers.txt", v);
    FILE *out = fopen(name, "w");
    if (!out)
        return 1;

    blocked(v, "blocked", 1e-2, out);
    scalable(v, "scalable", 1e-2, out);
    if (!strcmp(v, "v2")) {
        blocked(v, "blocked16", 1e-6, out);
        scalable(v, "scalable16", 1e-6, out);
        return fclose(out) == 0 ? 0 : 1;
    }

    bf_counting *c = bf_counting_new(NKEYS, 1e-2, BF_DEFAULT_SEED, err,
                                     sizeof err);
    if (!c)
        return 1;
    for (unsigned i = 0; i < NKEYS; i++)
        (void)bf_counting_add(c, buf, key(i, buf));
    for (unsigned i = 0; i < NKEYS; i += 4) /* a quarter removed */
        (void)bf_counting_remove(c, buf, key(i, buf));
    snprintf(name, sizeof name, "counting_%s.bf", v);
    save(name, bf_filter_from_counting(c), out);

    return fclose(out) == 0 ? 0 : 1;
}
