/*
 * make_v1_filters.c -- the one-off program that wrote the filter files in
 * this directory with format version 1 (probe scheme 0: k distinct 9-bit
 * probes, bloomstage before issue 14), and the answers they gave then
 * (v1_answers.txt).  tests/test_legacy_files.c loads the files with the
 * current library and checks it still gives exactly those answers.
 *
 * Not part of the build: compiled by hand against the library of main at
 * 029bf5a, where it was run once from tests/data/:
 *
 *   cc -O2 -Ifilters/include tests/data/make_v1_filters.c \
 *      build/filters/libbloomfilters.a -lxxhash -lm -lpthread
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

int main(void)
{
    char buf[32], err[256];
    FILE *out = fopen("v1_answers.txt", "w");
    if (!out)
        return 1;

    bf_blocked *b = bf_blocked_new(NKEYS, 1e-2, BF_DEFAULT_SEED, err,
                                   sizeof err);
    if (!b)
        return 1;
    for (unsigned i = 0; i < NKEYS; i++)
        (void)bf_blocked_add(b, buf, key(i, buf));
    save("blocked_v1.bf", bf_filter_from_blocked(b), out);

    bf_scalable_params p;
    bf_scalable_params_default(&p);
    p.initial_capacity = 200;
    p.fpr = 1e-2;
    p.seed = 12345;
    bf_scalable *s = bf_scalable_new(&p, err, sizeof err);
    if (!s)
        return 1;
    for (unsigned i = 0; i < NKEYS; i++)
        if (bf_scalable_add_if_absent(s, buf, key(i, buf)) < 0)
            return 1;
    save("scalable_v1.bf", bf_filter_from_scalable(s), out);

    bf_counting *c = bf_counting_new(NKEYS, 1e-2, BF_DEFAULT_SEED, err,
                                     sizeof err);
    if (!c)
        return 1;
    for (unsigned i = 0; i < NKEYS; i++)
        (void)bf_counting_add(c, buf, key(i, buf));
    for (unsigned i = 0; i < NKEYS; i += 4) /* a quarter removed */
        (void)bf_counting_remove(c, buf, key(i, buf));
    save("counting_v1.bf", bf_filter_from_counting(c), out);

    return fclose(out) == 0 ? 0 : 1;
}
