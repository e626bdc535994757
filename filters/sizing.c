/*
 * sizing.c -- how big a blocked filter must be for a target false-positive
 * rate.
 *
 * The classic formula (m = -n ln p / ln^2 2) undersizes a blocked filter,
 * twice over:
 *   - keys do not spread evenly over blocks: the count per block is Poisson
 *     with mean lambda = n / nblocks, and overloaded blocks answer "maybe"
 *     far more often than underloaded ones answer "no" (Putze, Sanders,
 *     Singler, "Cache-, Hash- and Space-Efficient Bloom Filters", 2007);
 *   - inside a block of only B = 512 cells the number of set bits X varies
 *     noticeably, and the rate is E[(X/B)^k], not (E[X]/B)^k (Bose et al.,
 *     "On the false-positive rate of Bloom filters", 2008).  Ignoring this
 *     was measured to undershoot by 3-4% at p = 1e-3.
 *
 *   fpr = sum_i Poisson(i; lambda) * E[(X_{ik} / B)^k]
 *
 * where X_t is the number of occupied cells after t uniform throws into B
 * cells, computed exactly by dynamic programming over t.  bf_size_for
 * searches, for each k, the fewest blocks meeting the target and keeps the
 * smallest filter (the smaller k on a tie, as it is faster).
 */
#include "bf_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* f[i] = E[(X_{ik}/B)^k] for i = 0..imax: the rate of one block holding i
 * keys.  Returns false on allocation failure. */
static bool block_rate_table(uint32_t B, uint32_t k, long imax, double *f)
{
    double *dist = calloc((size_t)B + 1, sizeof(double));
    double *powk = malloc(((size_t)B + 1) * sizeof(double));
    double *occ = malloc(((size_t)B + 1) * sizeof(double));
    if (!dist || !powk || !occ) {
        free(dist);
        free(powk);
        free(occ);
        return false;
    }
    for (uint32_t x = 0; x <= B; x++) {
        occ[x] = (double)x / B; /* a throw lands on an occupied cell */
        powk[x] = pow(occ[x], k);
    }
    dist[0] = 1.0;
    /* The distribution lives in [bot, top]; outside it every probability is
     * below 1e-250 (dropped: far below any rate a filter is sized for), so
     * the work per throw is the width of the peak, not B. */
    uint32_t bot = 0, top = 0;
    f[0] = 0.0;
    for (long i = 1; i <= imax; i++) {
        for (uint32_t t = 0; t < k; t++) {
            /* One more throw: it lands on an occupied cell with p = x/B. */
            if (top < B)
                top++;
            for (uint32_t x = top; x > bot; x--)
                dist[x] = dist[x] * occ[x] + dist[x - 1] * (1.0 - occ[x - 1]);
            dist[bot] *= occ[bot];
            while (bot < top && dist[bot] < 1e-250)
                dist[bot++] = 0.0;
            while (top > bot && dist[top] < 1e-250)
                dist[top--] = 0.0;
        }
        double e = 0.0;
        for (uint32_t x = bot; x <= top; x++)
            e += dist[x] * powk[x];
        f[i] = e;
    }
    free(dist);
    free(powk);
    free(occ);
    return true;
}

/* sum_i Poisson(i; lambda) f[i], with f = 1 past imax (an overestimate). */
static double poisson_mix(const double *f, long imax, double lambda)
{
    if (lambda <= 0)
        return 0.0;
    double sum = 0.0, mass = 0.0;
    double logp = -lambda; /* log Poisson(0) */
    for (long i = 0; i <= imax; i++) {
        double p = exp(logp);
        sum += p * f[i];
        mass += p;
        logp += log(lambda) - log((double)i + 1);
        if (i > lambda && p < 1e-300)
            break;
    }
    if (mass < 1.0)
        sum += 1.0 - mass;
    return sum > 1.0 ? 1.0 : sum;
}

static long imax_for(double lambda)
{
    double m = lambda + 12.0 * sqrt(lambda) + 40.0;
    return m > 100000 ? 100000 : (long)m;
}

/* Rate tables cost O(imax * k * B) to build (about half a millisecond) and
 * depend only on (B, k): the ones asked for by bf_blocked_fpr_expected,
 * which metrics and `info` call often, are kept (process-wide, under a
 * lock; tables are never freed while in use: a caller gets a copy of the
 * rate it asked for, computed under the lock).  A table is rebuilt larger
 * when a bigger imax is needed. */
#define CACHE_SLOTS 128 /* two block sizes, every k */
typedef struct rate_cache {
    uint32_t block_cells, k;
    long imax;
    double *f;
} rate_cache;
static rate_cache cache[CACHE_SLOTS];
static unsigned cache_next;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static const double *cached_table(uint32_t B, uint32_t k, long imax)
{
    for (unsigned i = 0; i < CACHE_SLOTS; i++)
        if (cache[i].f && cache[i].block_cells == B && cache[i].k == k &&
            cache[i].imax >= imax)
            return cache[i].f;
    rate_cache *c = NULL;
    for (unsigned i = 0; i < CACHE_SLOTS && !c; i++)
        if (cache[i].f && cache[i].block_cells == B && cache[i].k == k)
            c = &cache[i];
    if (!c)
        c = &cache[cache_next++ % CACHE_SLOTS];
    free(c->f);
    c->f = NULL;
    long want = imax + imax / 4 + 16; /* room to grow without a rebuild */
    double *f = malloc(((size_t)want + 1) * sizeof(double));
    if (!f || !block_rate_table(B, k, want, f)) {
        free(f);
        return NULL;
    }
    c->block_cells = B;
    c->k = k;
    c->imax = want;
    c->f = f;
    return f;
}

double bf_blocked_fpr_expected(uint64_t nblocks, uint32_t block_cells,
                               uint32_t k, double n)
{
    if (nblocks == 0 || block_cells == 0 || k == 0)
        return 1.0;
    if (n <= 0)
        return 0.0;
    double lambda = n / (double)nblocks;
    long imax = imax_for(lambda);
    pthread_mutex_lock(&cache_lock);
    const double *f = cached_table(block_cells, k, imax);
    double r = f ? poisson_mix(f, imax, lambda) : 1.0;
    pthread_mutex_unlock(&cache_lock);
    return r;
}

bf_err bf_size_for(uint64_t capacity, double fpr, uint32_t block_cells,
                   uint64_t *nblocks, uint32_t *k)
{
    if (capacity == 0 || !(fpr > 0.0 && fpr <= 0.5) || block_cells < 8)
        return BF_ERR_INVALID;
    uint64_t best_blocks = 0;
    uint32_t best_k = 0;
    /* Below half the classic optimum log2(1/p) no k is ever best (and the
     * small k's tables are the costly ones: many keys per block). */
    uint32_t k_lo = (uint32_t)floor(0.5 * log2(1.0 / fpr));
    for (uint32_t kk = k_lo > 1 ? k_lo : 1; kk <= BF_MAX_K; kk++) {
        /* The classic size for this k is smaller than any blocked size that
         * meets the target: search upwards from it. */
        double classic = -(double)kk * (double)capacity /
                         log1p(-pow(fpr, 1.0 / kk)) / block_cells;
        uint64_t lo = classic < 1 ? 1 : (uint64_t)classic;
        if (lo > BF_MAX_BLOCKS)
            continue;
        double n = (double)capacity;
        long imax = imax_for(2.0 * n / (double)lo);
        pthread_mutex_lock(&cache_lock);
        const double *f = cached_table(block_cells, kk, imax);
        if (!f) {
            pthread_mutex_unlock(&cache_lock);
            return BF_ERR_NOMEM;
        }
#define RATE(b) poisson_mix(f, imax, n / (double)(b))
        uint64_t hi = lo;
        while (RATE(hi) > fpr && hi < BF_MAX_BLOCKS) {
            lo = hi;
            hi = hi + hi / 8 + 1;
        }
        if (RATE(hi) <= fpr) {
            while (lo < hi) {
                uint64_t mid = lo + (hi - lo) / 2;
                if (RATE(mid) <= fpr)
                    hi = mid;
                else
                    lo = mid + 1;
            }
            if (best_k == 0 || lo < best_blocks) {
                best_blocks = lo;
                best_k = kk;
            }
        }
#undef RATE
        pthread_mutex_unlock(&cache_lock);
        /* Past the optimum the size only grows again. */
        if (best_k && best_k + 4 < kk)
            break;
    }
    if (best_k == 0)
        return BF_ERR_INVALID;
    *nblocks = best_blocks;
    *k = best_k;
    return BF_OK;
}
