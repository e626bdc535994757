/*
 * growth.c -- bench_growth: what the scalable filter's growth policy costs
 * in memory per key, against the measured false-positive rate and the
 * lookup time, for the stage's default policy and cheaper candidates.
 *
 *   bench_growth [--keys N] [--seeds S] [--fpr P]... [--absent A]
 *
 * The product's path: the stage's dedup filter is a scalable filter
 * (stage/keys/dedup_filter.c) from dedup.capacity keys, each layer growth times
 * the last at tightening times its error; the README's "about 5 bytes per
 * distinct key at one in a million" is a blocked filter sized in advance
 * for the keys it gets.  For each policy -- (initial capacity, growth,
 * tightening) -- and dedup.fpr P (default 1e-6, the stage's, and 1e-3),
 * and S seeds (default 3; a seed is the hash seed), it streams N distinct
 * keys (default 1e7) through add-if-absent, as the stage does, and
 * prints:
 *
 *   B/key    cell memory / N at N keys;
 *   B/key~   the same averaged over 33 key counts log-spaced from N/16
 *            to N: whole growth cycles of 2 and of 4 (a policy's memory
 *            is a sawtooth in the key count, and N alone could fall on a
 *            tooth's best or worst point);
 *   lost     unique keys the filter dropped on the way (the loss the
 *            audit sample measures; countable at 1e-3, not at 1e-6);
 *   fpr      false positives among A never-added keys (default 1e7) at N
 *            keys, measured; est, the filter's estimate from its fill;
 *   ns/add   CPU time per key of the whole stream; ns/miss, ns/hit: one
 *            lookup at a time (CPU time, 1M lookups) of never-added and of
 *            added keys;
 *   layers   at N keys;
 *
 * Policies trade memory for rate: each candidate runs twice per seed, at
 * P and at the target that gives the default's rate (P scaled by the
 * ratio of the default's estimated rate to its own: the estimate is a
 * function of the fill, free of the lookups' sampling noise, and tracks
 * the measured rate), so that bytes per key compare at the same rate.
 * Two summaries follow, one per way: for each policy the medians over the
 * seeds of its ratios to the default's figures of the same seed (x est is
 * the estimated rate's; the default runs first for each seed, the
 * candidates after it, so load changes hit them alike), and its measured
 * fpr and loss pooled over the seeds (the fpr with its Wilson 95%
 * interval).
 * The blocked filter sized in advance for N keys at P is the first line of
 * each P (the README's "5 bytes per key at one in a million"); the last
 * policy is the stage's filter sized in advance, dedup.capacity = N (one
 * layer, at error P (1 - r), the first layer's share of the bound).
 *
 * Keys: harness/keys.h's key_u64(i) for i < N; never-added keys from
 * KEYS_ABSENT_BASE on.
 */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bloomfilters.h"
#include "core.h" /* h_sort_median (harness/) */
#include "keys.h"

#define BASE_SEED UINT64_C(0x67726f7774683031) /* "growth01" */
#define MAX_SEEDS 20
#define MAX_FPRS 4
#define AHEAD 8
#define POINTS 33 /* key counts N/16 .. N, log-spaced */
#define TIMED 1000000

typedef struct policy {
    const char *name;
    uint64_t n0; /* 0: N, the keys the run streams */
    double growth, tightening;
} policy;

/* The default first: the ratios are against it. */
static const policy policies[] = {
    {"default: 100k, x2, r 0.85", 100000, 2, 0.85},
    {"x4, r 0.85", 100000, 4, 0.85},
    {"x2, r 0.9", 100000, 2, 0.9},
    {"x2, r 0.8", 100000, 2, 0.8},
    {"x2, r 0.5", 100000, 2, 0.5},
    {"x4, r 0.9", 100000, 4, 0.9},
    {"x1.5, r 0.9", 100000, 1.5, 0.9},
    {"1M, x2, r 0.85", 1000000, 2, 0.85},
    {"N ahead, x2, r 0.85", 0, 2, 0.85},
};
#define NPOL (sizeof policies / sizeof policies[0])

typedef struct fig {
    double bpk, bpk_avg, fpr, est, ns_add, ns_miss, ns_hit;
    uint64_t lost, fps, layers;
} fig;

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bf_hash hkey(uint64_t i, uint64_t seed)
{
    unsigned char k[8];
    key_u64(i, k);
    return bf_hash_key(k, 8, seed);
}

static void die(const char *what)
{
    fprintf(stderr, "bench_growth: %s\n", what);
    exit(1);
}

/* A lookup of each of keys first..first+n, one at a time, blocks not
 * prefetched: CPU ns per lookup, the best of 3 passes; *hits counts the
 * "maybe present". */
static double time_lookups(const bf_scalable *sb, uint64_t first, uint64_t n,
                           uint64_t stride, uint64_t seed, uint64_t *hits)
{
    static bf_hash h[TIMED];
    for (uint64_t i = 0; i < n; i++)
        h[i] = hkey(first + i * stride, seed);
    double best = INFINITY;
    for (int pass = 0; pass < 3; pass++) {
        uint64_t c = 0;
        double t0 = cpu_s();
        for (uint64_t i = 0; i < n; i++)
            c += bf_scalable_contains_h(sb, h[i]);
        double t = cpu_s() - t0;
        best = t < best ? t : best;
        *hits = c;
    }
    return best * 1e9 / (double)n;
}

/* False positives among `absent` never-added keys, their blocks
 * prefetched a few keys ahead. */
static uint64_t count_fps(const bf_scalable *sb, uint64_t absent,
                          uint64_t seed)
{
    bf_hash ring[AHEAD];
    uint64_t fps = 0;
    for (uint64_t i = 0; i < absent + AHEAD; i++) {
        if (i >= AHEAD)
            fps += bf_scalable_contains_h(sb, ring[i % AHEAD]);
        if (i < absent) {
            bf_hash h = hkey(KEYS_ABSENT_BASE + i, seed);
            bf_scalable_prefetch_h(sb, h);
            ring[i % AHEAD] = h;
        }
    }
    return fps;
}

static void run_policy(const policy *pol, double fpr, uint64_t n,
                       uint64_t absent, uint64_t seed, fig *out)
{
    bf_scalable_params sp;
    bf_scalable_params_default(&sp);
    sp.initial_capacity = pol->n0 ? pol->n0 : n;
    sp.growth = pol->growth;
    sp.tightening = pol->tightening;
    sp.fpr = fpr;
    sp.seed = seed;
    char err[256] = "";
    bf_scalable *sb = bf_scalable_new(&sp, err, sizeof err);
    if (!sb)
        die(err);
    memset(out, 0, sizeof(*out));
    /* The key counts where memory is read: N/16 * 16^(j/(POINTS-1)). */
    double bpk_sum = 0;
    unsigned point = 0;
    uint64_t next_at = n / 16;
    bf_hash ring[AHEAD];
    double t0 = cpu_s();
    for (uint64_t i = 0; i < n + AHEAD; i++) {
        if (i >= AHEAD) {
            uint64_t done = i - AHEAD + 1; /* keys streamed */
            int added = bf_scalable_add_if_absent_h(sb, ring[i % AHEAD]);
            if (added < 0)
                die("the filter could not grow");
            out->lost += added == 0;
            if (done == next_at) {
                bf_info info;
                bf_scalable_info(sb, &info);
                bpk_sum += (double)info.bytes / (double)done;
                point++;
                next_at = point < POINTS
                              ? (uint64_t)llround((double)n / 16 *
                                                  pow(16, (double)point /
                                                              (POINTS - 1)))
                              : 0;
            }
        }
        if (i < n) {
            bf_hash h = hkey(i, seed);
            bf_scalable_prefetch_h(sb, h);
            ring[i % AHEAD] = h;
        }
    }
    out->ns_add = (cpu_s() - t0) * 1e9 / (double)n;
    if (point != POINTS)
        die("missed a memory point");
    out->bpk_avg = bpk_sum / POINTS;
    bf_info info;
    bf_scalable_info(sb, &info);
    out->bpk = (double)info.bytes / (double)n;
    out->est = info.est_fpr;
    out->layers = info.layers;
    out->fps = count_fps(sb, absent, seed);
    out->fpr = (double)out->fps / (double)absent;
    uint64_t hits, t = n < TIMED ? n : TIMED;
    out->ns_miss = time_lookups(sb, KEYS_ABSENT_BASE + absent, t, 1, seed,
                                &hits);
    out->ns_hit = time_lookups(sb, 0, t, n / t, seed, &hits);
    if (hits != t)
        die("an added key was not found");
    bf_scalable_destroy(sb);
}

/* The blocked filter sized in advance for n keys at fpr: bytes per key. */
static double advance_bpk(double fpr, uint64_t n)
{
    char err[256] = "";
    bf_blocked *bf = bf_blocked_new(n, fpr, BASE_SEED, err, sizeof err);
    if (!bf)
        die(err);
    bf_info info;
    bf_blocked_info(bf, &info);
    bf_blocked_destroy(bf);
    return (double)info.bytes / (double)n;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_growth [--keys N] [--seeds S] [--fpr P]... "
            "[--absent A]\n");
    exit(2);
}

static double num(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (*end || !(v > 0))
        usage();
    return v;
}

static double ratio_median(fig (*f)[NPOL], uint64_t seeds, size_t p,
                           size_t off)
{
    double r[MAX_SEEDS];
    for (size_t s = 0; s < seeds; s++) {
        double a = *(double *)((char *)&f[s][p] + off);
        double b = *(double *)((char *)&f[s][0] + off);
        r[s] = a / b;
    }
    return h_sort_median(r, seeds);
}

static void print_fig(const policy *pol, uint64_t s, double fpr,
                      const fig *x)
{
    printf("%-26s %4" PRIu64 " %8.2e %6.3f %6.3f %8" PRIu64 " %5" PRIu64
           " %10.3e %10.3e %6.1f %7.1f %6.1f %3" PRIu64 "\n",
           pol->name, s, fpr, x->bpk, x->bpk_avg, x->lost, x->fps, x->fpr,
           x->est, x->ns_add, x->ns_miss, x->ns_hit, x->layers);
    fflush(stdout);
}

static void summary(fig (*f)[NPOL], uint64_t seeds, double fpr, uint64_t n,
                    uint64_t absent, const char *how)
{
    printf("-- dedup.fpr %g, %s: medians over %" PRIu64 " seeds of the "
           "ratios to the default (same seed); fpr and lost pooled\n", fpr,
           how, seeds);
    printf("%-26s %6s %7s %7s %7s %7s %7s %7s %23s %9s\n", "policy",
           "B/key", "x B/key", "x B/k~", "x est", "x add", "x miss", "x hit",
           "fpr (95% interval)", "lost");
    for (size_t p = 0; p < NPOL; p++) {
        uint64_t fps = 0, lost = 0;
        double bpk[MAX_SEEDS];
        for (size_t s = 0; s < seeds; s++) {
            fps += f[s][p].fps;
            lost += f[s][p].lost;
            bpk[s] = f[s][p].bpk;
        }
        double lo, hi, tot = (double)absent * (double)seeds;
        bf_wilson95(fps, (uint64_t)tot, &lo, &hi);
        printf("%-26s %6.3f %7.3f %7.3f %7.3f %7.3f %7.3f %7.3f "
               "%.2e [%.2e,%.2e] %9.2e\n",
               policies[p].name, h_sort_median(bpk, seeds),
               ratio_median(f, seeds, p, offsetof(fig, bpk)),
               ratio_median(f, seeds, p, offsetof(fig, bpk_avg)),
               ratio_median(f, seeds, p, offsetof(fig, est)),
               ratio_median(f, seeds, p, offsetof(fig, ns_add)),
               ratio_median(f, seeds, p, offsetof(fig, ns_miss)),
               ratio_median(f, seeds, p, offsetof(fig, ns_hit)),
               (double)fps / tot, lo, hi,
               (double)lost / ((double)n * (double)seeds));
    }
}

int main(int argc, char **argv)
{
    uint64_t n = 10000000, absent = 10000000, seeds = 3;
    double fprs[MAX_FPRS];
    unsigned nfprs = 0;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc)
            usage();
        const char *o = argv[i], *v = argv[++i];
        if (!strcmp(o, "--keys"))
            n = (uint64_t)num(v);
        else if (!strcmp(o, "--seeds"))
            seeds = (uint64_t)num(v);
        else if (!strcmp(o, "--absent"))
            absent = (uint64_t)num(v);
        else if (!strcmp(o, "--fpr") && nfprs < MAX_FPRS)
            fprs[nfprs++] = num(v);
        else
            usage();
    }
    if (!nfprs) {
        fprs[nfprs++] = 1e-6;
        fprs[nfprs++] = 1e-3;
    }
    if (seeds > MAX_SEEDS || n < 16 * AHEAD)
        usage();
    static fig f[MAX_SEEDS][NPOL], g[MAX_SEEDS][NPOL];
    printf("== %" PRIu64 " distinct keys, %" PRIu64 " never-added lookups, "
           "%" PRIu64 " seeds; %s\n", n, absent, seeds, bf_simd_name());
    for (unsigned fi = 0; fi < nfprs; fi++) {
        double fpr = fprs[fi];
        printf("\n== dedup.fpr %g; a blocked filter sized in advance for "
               "%" PRIu64 " keys: %.3f B/key\n", fpr, n,
               advance_bpk(fpr, n));
        printf("%-26s %4s %8s %6s %6s %8s %5s %10s %10s %6s %7s %6s %3s\n",
               "policy", "seed", "target", "B/key", "B/key~", "lost", "fps",
               "fpr", "est", "ns/add", "ns/miss", "ns/hit", "lay");
        for (uint64_t s = 0; s < seeds; s++)
            for (size_t p = 0; p < NPOL; p++) {
                fig *x = &f[s][p];
                run_policy(&policies[p], fpr, n, absent, BASE_SEED + s, x);
                print_fig(&policies[p], s, fpr, x);
                if (p == 0) {
                    g[s][p] = *x;
                    continue;
                }
                /* The same policy at the default's rate: its target scaled
                 * by the ratio of the estimates (the fill's, free of the
                 * lookups' sampling noise). */
                double at = fpr * f[s][0].est / x->est;
                run_policy(&policies[p], at, n, absent, BASE_SEED + s,
                           &g[s][p]);
                print_fig(&policies[p], s, at, &g[s][p]);
            }
        summary(f, seeds, fpr, n, absent, "at the same dedup.fpr");
        summary(g, seeds, fpr, n, absent,
                "each at the target that gives the default's rate");
    }
    return 0;
}
