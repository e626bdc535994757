/*
 * agreement.c -- bench_agreement: does the audit sample's 95% interval
 * hold the true rate of unique keys the dedup filter drops?
 *
 *   bench_agreement [--keys N] [--capacity N0] [--seeds S] [--fpr P]...
 *                   [--rate R]... [--repeat-every K] [--jobs J]
 *
 * Each seeded run streams N distinct keys (default 1e8) through the
 * stage's kind of filter -- a scalable filter with the stage's defaults:
 * dedup.capacity 100k, growth 2, tightening 0.85 (config/keys.c), so 1e8
 * keys grow it 1000x -- at each dedup.fpr P (default 1e-2 and 1e-3),
 * rescue off, with audits at each rate R side by side on the same stream
 * (default 1/1024, the stage's default, and 1/128); the stream and its
 * truth are harness/audit_agree.h's (with --repeat-every K, a repeat of an
 * earlier key after every K keys; default 8).  S seeds (default 20) per P,
 * each seed its own hash seed, so its own filter and sample.
 *
 * What is compared: the true rate over every unique key of the stream
 * (first-time keys the filter called seen / first-time keys) against the
 * audit's Wilson 95% interval.  That is the rate the audit claims to
 * measure: the share of unique records the stage drops.  The audit's
 * lookups are a sample of those same first-time keys (chosen by a mix of
 * the hash that the filter's probes do not compute), so the interval is a
 * binomial interval for that population's rate.  The truth over the
 * sampled keys alone is not a test of the interval: it is exactly what the
 * audit counts (its own estimate, the interval's centre), and is checked
 * for equality instead (a counting check; exit status 1 if it fails).
 *
 * Per seed: the true rate, the filter's layers and memory, and per audit
 * its lookups, false positives, measured rate and interval, and whether
 * the interval holds the truth.  Summary per P and rate: runs covered,
 * the coverage with its own Wilson interval (at nominal coverage 0.95, 20
 * runs cover 19 or more with probability 0.74 only: a coverage interval
 * holding 0.95 is what a calibrated interval shows), the spread of the
 * truth and of the interval's relative half-width, and the audit rate
 * that would give a +-50% and a +-25% interval at the median truth.
 * Target: coverage >= 95% of the runs at each P (PASS / MISS).
 *
 * Runs go to J threads (default 1); a run at 1e8 keys holds its filter
 * (~190 MiB at 1e-2, ~300 MiB at 1e-3).
 */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bloomfilters.h"
#include "core.h" /* h_sort_median, h_now_s (harness/) */
#include "keys.h"
#include "audit_agree.h"

#define MAX_FPRS 4
#define MAX_SEEDS 1000
#define BASE_SEED UINT64_C(0x6167726565303031) /* "agree001" */

typedef struct run {
    double fpr;
    uint64_t seed;
    agree_result r;
    double secs;
    bool ok;
} run;

static agree_params g_p;
static run *g_runs;
static size_t g_nruns;
static atomic_size_t g_next;
static pthread_mutex_t g_print = PTHREAD_MUTEX_INITIALIZER;

static void print_row(const run *x)
{
    const agree_result *r = &x->r;
    printf("%-6g %4" PRIu64 " %11.4e %10" PRIu64 " %3u %8.1f",
           x->fpr, x->seed - BASE_SEED, r->truth, r->dropped, r->info.layers,
           (double)r->info.bytes / 1048576.0);
    for (unsigned j = 0; j < g_p.nrates; j++) {
        const agree_audit *a = &r->audit[j];
        printf(" | %7" PRIu64 " %5" PRIu64 " %10.4e [%10.4e, %10.4e] %-3s",
               a->st.lookups, a->st.false_positives, a->st.measured, a->st.lo,
               a->st.hi, a->covers ? "in" : "OUT");
    }
    printf(" %6.1f\n", x->secs);
    fflush(stdout);
}

static void *worker(void *arg)
{
    (void)arg;
    for (;;) {
        size_t i = atomic_fetch_add(&g_next, 1);
        if (i >= g_nruns)
            return NULL;
        run *x = &g_runs[i];
        agree_params p = g_p;
        p.sp.fpr = x->fpr;
        char err[256] = "";
        double t0 = h_now_s();
        x->ok = agree_run(&p, x->seed, &x->r, err, sizeof err) == 0;
        x->secs = h_now_s() - t0;
        pthread_mutex_lock(&g_print);
        if (!x->ok)
            fprintf(stderr, "bench_agreement: fpr %g seed %" PRIu64 ": %s\n",
                    x->fpr, x->seed - BASE_SEED, err);
        else
            print_row(x);
        pthread_mutex_unlock(&g_print);
    }
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_agreement [--keys N] [--capacity N0] "
            "[--seeds S] [--fpr P]... [--rate R]... [--repeat-every K] "
            "[--jobs J]\n");
    exit(2);
}

static double num(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (*end == '/') /* a fraction: 1/1024 */
        v /= strtod(end + 1, &end);
    if (*end || !(v > 0))
        usage();
    return v;
}

/* Summary of the runs at one fpr, for audit j.  Returns whether the
 * coverage target is met. */
static bool summarize(double fpr, unsigned j)
{
    double truth[MAX_SEEDS], relhalf[MAX_SEEDS], err[MAX_SEEDS];
    size_t n = 0, covered = 0;
    double lookups = 0, fps = 0;
    for (size_t i = 0; i < g_nruns; i++) {
        const run *x = &g_runs[i];
        if (x->fpr != fpr || !x->ok)
            continue;
        const agree_audit *a = &x->r.audit[j];
        truth[n] = x->r.truth;
        relhalf[n] = x->r.truth > 0 ? (a->st.hi - a->st.lo) / 2 / x->r.truth
                                    : INFINITY;
        err[n] = x->r.truth > 0 ? (a->st.measured - x->r.truth) / x->r.truth
                                : 0;
        covered += a->covers;
        lookups += (double)a->st.lookups;
        fps += (double)a->st.false_positives;
        n++;
    }
    if (!n)
        return false;
    double clo, chi;
    bf_wilson95(covered, n, &clo, &chi);
    double cov = (double)covered / (double)n;
    double mt = h_sort_median(truth, n), tmin = truth[0], tmax = truth[n - 1];
    double mh = h_sort_median(relhalf, n);
    double hmin = relhalf[0], hmax = relhalf[n - 1];
    double me = h_sort_median(err, n), emin = err[0], emax = err[n - 1];
    bool ok = cov >= 0.95;
    printf("fpr %g, audit 1/%.0f: covered %zu of %zu runs, coverage %.3f "
           "(95%% %.3f..%.3f) %s\n", fpr, 1.0 / g_p.rates[j], covered, n, cov,
           clo, chi, ok ? "PASS" : "MISS");
    printf("   true rate: median %.4e, min %.4e, max %.4e (%.3f of fpr)\n",
           mt, tmin, tmax, mt / fpr);
    printf("   a run's audit: %.0f lookups, %.1f false positives (means); "
           "measured - true: median %+.1f%%, min %+.1f%%, max %+.1f%%\n",
           lookups / (double)n, fps / (double)n, me * 100, emin * 100,
           emax * 100);
    printf("   interval half-width / true rate: median %.2f, min %.2f, "
           "max %.2f\n", mh, hmin, hmax);
    /* Lookups for a relative half-width e at rate t: z^2 (1 - t) / (t e^2);
     * the rate that samples them from N unique keys. */
    for (double e = 0.5; e >= 0.25; e /= 2) {
        double need = 1.959964 * 1.959964 * (1 - mt) / (mt * e * e);
        double rate = need / (double)g_p.keys;
        printf("   +-%.0f%% at the median rate needs ~%.0f lookups: an audit "
               "rate of 1/%.0f or more at %" PRIu64 " keys\n", e * 100, need,
               rate < 1 ? pow(2, floor(log2(1 / rate))) : 1, g_p.keys);
    }
    return ok;
}

int main(int argc, char **argv)
{
    bf_scalable_params_default(&g_p.sp);
    g_p.sp.initial_capacity = 100000; /* dedup.capacity's default */
    g_p.keys = 100000000;
    g_p.repeat_every = 8;
    double fprs[MAX_FPRS];
    unsigned nfprs = 0, jobs = 1;
    uint64_t seeds = 20;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (i + 1 >= argc)
            usage();
        const char *v = argv[++i];
        if (!strcmp(o, "--keys"))
            g_p.keys = (uint64_t)num(v);
        else if (!strcmp(o, "--capacity"))
            g_p.sp.initial_capacity = (uint64_t)num(v);
        else if (!strcmp(o, "--seeds"))
            seeds = (uint64_t)num(v);
        else if (!strcmp(o, "--fpr") && nfprs < MAX_FPRS)
            fprs[nfprs++] = num(v);
        else if (!strcmp(o, "--rate") && g_p.nrates < AGREE_MAX_RATES)
            g_p.rates[g_p.nrates++] = num(v);
        else if (!strcmp(o, "--repeat-every"))
            g_p.repeat_every = strcmp(v, "0") ? (uint64_t)num(v) : 0;
        else if (!strcmp(o, "--jobs"))
            jobs = (unsigned)num(v);
        else
            usage();
    }
    if (!nfprs) {
        fprs[nfprs++] = 1e-2;
        fprs[nfprs++] = 1e-3;
    }
    if (!g_p.nrates) {
        g_p.rates[g_p.nrates++] = BF_AUDIT_DEFAULT_RATE;
        g_p.rates[g_p.nrates++] = 1.0 / 128;
    }
    if (seeds > MAX_SEEDS || !g_p.keys || !g_p.sp.initial_capacity)
        usage();
    g_nruns = nfprs * seeds;
    g_runs = calloc(g_nruns, sizeof(*g_runs));
    if (!g_runs)
        return 1;
    for (size_t i = 0; i < g_nruns; i++) {
        g_runs[i].fpr = fprs[i / seeds];
        g_runs[i].seed = BASE_SEED + i % seeds;
    }
    printf("== %" PRIu64 " distinct keys (a repeat after every %" PRIu64
           "), scalable filter from %" PRIu64 " keys (%.0fx), growth %g, "
           "tightening %g; %" PRIu64 " seeds; %u jobs; %s\n",
           g_p.keys, g_p.repeat_every, g_p.sp.initial_capacity,
           (double)g_p.keys / (double)g_p.sp.initial_capacity, g_p.sp.growth,
           g_p.sp.tightening, seeds, jobs, bf_simd_name());
    printf("%-6s %4s %11s %10s %3s %8s", "fpr", "seed", "true_rate",
           "dropped", "lay", "MiB");
    for (unsigned j = 0; j < g_p.nrates; j++)
        printf(" | audit 1/%-5.0f %5s %10s %-24s %-3s", 1.0 / g_p.rates[j],
               "fps", "measured", "95% interval", "");
    printf(" %6s\n", "secs");
    double t0 = h_now_s();
    pthread_t th[64];
    if (jobs < 1 || jobs > 64)
        usage();
    for (unsigned t = 0; t < jobs; t++)
        if (pthread_create(&th[t], NULL, worker, NULL))
            return 1;
    for (unsigned t = 0; t < jobs; t++)
        pthread_join(th[t], NULL);
    double secs = h_now_s() - t0;

    int rc = 0;
    for (size_t i = 0; i < g_nruns; i++) {
        const run *x = &g_runs[i];
        if (!x->ok) {
            rc = 1;
            continue;
        }
        for (unsigned j = 0; j < g_p.nrates; j++) {
            const agree_audit *a = &x->r.audit[j];
            if (a->st.lookups != a->sampled_unique ||
                a->st.false_positives != a->sampled_dropped) {
                printf("COUNTING MISMATCH: fpr %g seed %" PRIu64
                       " audit 1/%.0f: %" PRIu64 " of %" PRIu64
                       " counted, %" PRIu64 " of %" PRIu64 " true\n",
                       x->fpr, x->seed - BASE_SEED, 1 / g_p.rates[j],
                       a->st.false_positives, a->st.lookups,
                       a->sampled_dropped, a->sampled_unique);
                rc = 1;
            }
        }
    }
    printf("== summary (%.0f s)\n", secs);
    if (rc == 0)
        printf("every audit's count equals the truth over the keys it "
               "samples (lookups and false positives)\n");
    bool all = true;
    for (unsigned f = 0; f < nfprs; f++)
        for (unsigned j = 0; j < g_p.nrates; j++) {
            bool ok = summarize(fprs[f], j);
            if (g_p.rates[j] == BF_AUDIT_DEFAULT_RATE)
                all = all && ok;
        }
    printf("target (coverage >= 95%% at each fpr, default rate 1/1024): %s\n",
           all ? "PASS" : "MISS");
    free(g_runs);
    return rc;
}
