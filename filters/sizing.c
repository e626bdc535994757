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
 *     noticeably, and the rate is E[C(X,k)/C(B,k)], not (E[X]/B)^k (Bose
 *     et al., "On the false-positive rate of Bloom filters", 2008).
 *     Ignoring this undersizes the filter.
 *
 *   fpr = sum_i Poisson(i; lambda) * E[C(X_i, k) / C(B, k)]
 *
 * where X_i is the number of set cells after i keys each set k distinct
 * random cells, computed exactly by dynamic programming over i.  bf_size_for
 * searches, for each k, the fewest blocks meeting the target and keeps the
 * smallest filter (the smaller k on a tie, as it is faster).
 *
 * The lane schemes (bf_internal.h) have their own exact in-block rate:
 * the L lanes of W bits (eight of 64, or sixteen of 32) fill
 * independently, lane l taking c_l probes per key (c_l = k/L, one more for
 * l < k mod L) at independent uniform positions (repeats allowed), so
 * after i keys lane l holds X_l set bits, X_l the occupancy of c_l*i
 * throws into W cells, and
 *
 *   f[i] = prod_l E[ (X_l / W)^c_l ].
 *
 * Their sizing tries k = 8, 16, 24, ... (bf_size_for: 32-bit lanes for the
 * multiples of 16, bf_scheme_for): with one probe more in some lanes than
 * others the rate at equal size is worse than at the multiple of 8 below
 * or above it, and whole rounds are what SIMD does.  Lanes need a little
 * more memory than free positions, and much less than the split-block
 * filter's 256-bit blocks with fixed k = 8 (bench/README.md compares
 * them).
 */
#include "bf_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* f[i] = the rate of one block holding i keys, for i = 0..imax: the
 * chance that k distinct random cells of B are all among the X set, where
 * each key set k distinct random cells (bf_probe_next):
 *
 *   X grows by j with P = C(B-X, j) C(X, k-j) / C(B, k)   (hypergeometric)
 *   f[i] = E[ C(X_i, k) / C(B, k) ]
 *
 * The distribution of X is carried exactly from key to key, on the span
 * where it is above 1e-250 (the rest cannot matter at any rate a filter is
 * sized for).  Returns false on allocation failure. */
static bool block_rate_table(uint32_t B, uint32_t k, long imax, double *f)
{
    double *dist = calloc((size_t)B + 1, sizeof(double));
    double *next = calloc((size_t)B + 1, sizeof(double));
    double *lf = malloc(((size_t)B + 1) * sizeof(double));
    double *q = malloc(((size_t)B + 1) * sizeof(double));
    if (!dist || !next || !lf || !q || k > B) {
        free(dist);
        free(next);
        free(lf);
        free(q);
        return false;
    }
    for (uint32_t x = 0; x <= B; x++)
        lf[x] = lgamma((double)x + 1);
    double lc_bk = lf[B] - lf[k] - lf[B - k];
    for (uint32_t x = 0; x <= B; x++)
        q[x] = x < k ? 0.0 : exp(lf[x] - lf[k] - lf[x - k] - lc_bk);
    dist[0] = 1.0;
    uint32_t bot = 0, top = 0;
    f[0] = 0.0;
    for (long i = 1; i <= imax; i++) {
        uint32_t nbot = B, ntop = 0;
        for (uint32_t x = bot; x <= top; x++) {
            if (dist[x] == 0.0)
                continue;
            /* j new cells: from jmin (all k fit in the X set cells if
             * x >= k) to jmax (no more than B - x are free). */
            uint32_t jmin = x >= k ? 0 : k - x;
            uint32_t jmax = B - x < k ? B - x : k;
            if (jmin > jmax)
                continue;
            double p = exp(lf[B - x] - lf[jmin] - lf[B - x - jmin] + lf[x] -
                           lf[k - jmin] - lf[x - (k - jmin)] - lc_bk);
            for (uint32_t j = jmin;; j++) {
                next[x + j] += dist[x] * p;
                if (j == jmax)
                    break;
                p *= (double)(B - x - j) * (double)(k - j) /
                     ((double)(j + 1) * (double)(x - k + j + 1));
            }
            if (x + jmin < nbot)
                nbot = x + jmin;
            if (x + jmax > ntop)
                ntop = x + jmax;
        }
        for (uint32_t x = bot; x <= top; x++)
            dist[x] = 0.0;
        double *t = dist;
        dist = next;
        next = t;
        bot = nbot;
        top = ntop;
        while (bot < top && dist[bot] < 1e-250)
            dist[bot++] = 0.0;
        while (top > bot && dist[top] < 1e-250)
            dist[top--] = 0.0;
        double e = 0.0;
        for (uint32_t x = bot; x <= top; x++)
            e += dist[x] * q[x];
        f[i] = e;
    }
    free(dist);
    free(next);
    free(lf);
    free(q);
    return true;
}

/* One more uniform throw into a lane of W cells: occ[x] = P(x set). */
static void lane_throw(double *occ, uint32_t W)
{
    for (uint32_t x = W + 1; x-- > 0;) {
        double stay = occ[x] * (double)x / W;
        double from = x > 0 ? occ[x - 1] * (double)(W - x + 1) / W : 0.0;
        occ[x] = stay + from;
    }
}

/* A lane scheme's f[i] for i = 0..imax, L lanes of W bits (see the top
 * of the file): the occupancy of a lane taking c probes a key and of one
 * taking c + 1 are carried from key to key. */
static bool lanes_rate_table(uint32_t L, uint32_t W, uint32_t k, long imax,
                             double *f)
{
    uint32_t c = k / L, d = k % L; /* lanes l < d take c + 1 probes */
    double *occ = calloc(2 * (W + 1), sizeof(double));
    if (!occ)
        return false;
    double *o[2] = {occ, occ + W + 1};
    o[0][0] = o[1][0] = 1.0;
    for (long i = 0; i <= imax; i++) {
        double e[2];
        for (uint32_t h = 0; h < 2; h++) {
            uint32_t cc = c + h;
            if (i > 0)
                for (uint32_t t = 0; t < cc; t++)
                    lane_throw(o[h], W);
            double sum = 0.0;
            for (uint32_t x = 0; x <= W; x++)
                sum += o[h][x] * pow((double)x / W, cc);
            e[h] = sum;
        }
        f[i] = pow(e[0], (double)(L - d)) * pow(e[1], (double)d);
    }
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

/* Rate tables cost O(imax * k * B) to build and depend only on (B, k):
 * the ones asked for by bf_blocked_fpr_expected, which metrics and `info`
 * call often, are kept (process-wide, under a lock; tables are never
 * freed while in use: a caller gets a copy of the rate it asked for,
 * computed under the lock).  A table is rebuilt larger when a bigger imax
 * is needed. */
#define CACHE_SLOTS 256 /* two block sizes and three schemes, every k */
typedef struct rate_cache {
    uint32_t scheme, block_cells, k;
    long imax;
    double *f;
} rate_cache;
static rate_cache cache[CACHE_SLOTS];
static unsigned cache_next;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static const double *cached_table(uint32_t scheme, uint32_t B, uint32_t k,
                                  long imax)
{
    for (unsigned i = 0; i < CACHE_SLOTS; i++)
        if (cache[i].f && cache[i].scheme == scheme &&
            cache[i].block_cells == B && cache[i].k == k &&
            cache[i].imax >= imax)
            return cache[i].f;
    rate_cache *c = NULL;
    for (unsigned i = 0; i < CACHE_SLOTS && !c; i++)
        if (cache[i].f && cache[i].scheme == scheme &&
            cache[i].block_cells == B && cache[i].k == k)
            c = &cache[i];
    if (!c)
        c = &cache[cache_next++ % CACHE_SLOTS];
    free(c->f);
    c->f = NULL;
    long want = imax + imax / 4 + 16; /* room to grow without a rebuild */
    double *f = malloc(((size_t)want + 1) * sizeof(double));
    uint32_t L = bf_scheme_lanes(scheme);
    bool ok = f && (L ? lanes_rate_table(L, B / L, k, want, f)
                      : block_rate_table(B, k, want, f));
    if (!ok) {
        free(f);
        return NULL;
    }
    c->scheme = scheme;
    c->block_cells = B;
    c->k = k;
    c->imax = want;
    c->f = f;
    return f;
}

uint32_t bf_scheme_for(uint32_t block_cells, uint32_t k)
{
    if (block_cells != BF_BLOCK_BITS)
        return BF_SCHEME_DISTINCT;
    return k % 16 == 0 ? BF_SCHEME_LANES32 : BF_SCHEME_LANES;
}

bool bf_scheme_ok(uint32_t scheme, uint32_t block_cells, uint32_t k)
{
    if (scheme == BF_SCHEME_LANES)
        return block_cells == BF_BLOCK_BITS && k <= BF_MAX_K;
    if (scheme == BF_SCHEME_LANES32)
        return block_cells == BF_BLOCK_BITS && k % 16 == 0 && k <= BF_MAX_K;
    return scheme == BF_SCHEME_DISTINCT && k <= block_cells;
}

double bf_blocked_fpr_expected(uint64_t nblocks, uint32_t block_cells,
                               uint32_t k, double n)
{
    return bf_fpr_expected_scheme(bf_scheme_for(block_cells, k), nblocks,
                                  block_cells, k, n);
}

double bf_fpr_expected_scheme(uint32_t scheme, uint64_t nblocks,
                              uint32_t block_cells, uint32_t k, double n)
{
    if (nblocks == 0 || block_cells == 0 || k == 0 ||
        !bf_scheme_ok(scheme, block_cells, k))
        return 1.0;
    if (n <= 0)
        return 0.0;
    double lambda = n / (double)nblocks;
    long imax = imax_for(lambda);
    pthread_mutex_lock(&cache_lock);
    const double *f = cached_table(scheme, block_cells, k, imax);
    double r = f ? poisson_mix(f, imax, lambda) : 1.0;
    pthread_mutex_unlock(&cache_lock);
    return r;
}

/* bf_size_for_scheme's search; scheme BY_K: each k in bf_scheme_for's
 * scheme (bf_size_for). */
#define BY_K UINT32_MAX
static bf_err size_search(uint32_t scheme, uint64_t capacity, double fpr,
                          uint32_t block_cells, uint64_t *nblocks,
                          uint32_t *k)
{
    uint32_t step = scheme == BF_SCHEME_LANES32 ? 16
                    : scheme == BF_SCHEME_DISTINCT ||
                            (scheme == BY_K && block_cells != BF_BLOCK_BITS)
                        ? 1
                        : 8;
    if (capacity == 0 || !(fpr > 0.0 && fpr <= BF_FPR_MAX) ||
        block_cells < 8 ||
        (scheme != BY_K && !bf_scheme_ok(scheme, block_cells, step)))
        return BF_ERR_INVALID;
    uint64_t best_blocks = 0;
    uint32_t best_k = 0;
    /* Below half the classic optimum log2(1/p) no k is ever best (and the
     * small k's tables are the costly ones: many keys per block). */
    double half = 0.5 * -log2(fpr); /* finite: fpr > 0 */
    uint32_t k_lo = half < 1 ? 1 : half > BF_MAX_K ? BF_MAX_K : (uint32_t)half;
    k_lo = (k_lo + step - 1) / step * step; /* lanes: k = 8, 16, ... */
    for (uint32_t kk = k_lo; kk <= BF_MAX_K; kk += step) {
        /* The classic size for this k is smaller than any blocked size that
         * meets the target: search upwards from it. */
        double classic = -(double)kk * (double)capacity /
                         log1p(-pow(fpr, 1.0 / kk)) / block_cells;
        if (!(classic <= (double)BF_MAX_BLOCKS))
            continue; /* too big for any filter (or not a number) */
        uint64_t lo = classic < 1 ? 1 : (uint64_t)classic;
        double n = (double)capacity;
        long imax = imax_for(2.0 * n / (double)lo);
        pthread_mutex_lock(&cache_lock);
        const double *f = cached_table(
            scheme == BY_K ? bf_scheme_for(block_cells, kk) : scheme,
            block_cells, kk, imax);
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
        if (best_k && best_k + 4 * step < kk)
            break;
    }
    if (best_k == 0)
        return BF_ERR_INVALID;
    *nblocks = best_blocks;
    *k = best_k;
    return BF_OK;
}

bf_err bf_size_for(uint64_t capacity, double fpr, uint32_t block_cells,
                   uint64_t *nblocks, uint32_t *k)
{
    return size_search(BY_K, capacity, fpr, block_cells, nblocks, k);
}

bf_err bf_size_for_scheme(uint32_t scheme, uint64_t capacity, double fpr,
                          uint32_t block_cells, uint64_t *nblocks,
                          uint32_t *k)
{
    if (scheme == BY_K)
        return BF_ERR_INVALID;
    return size_search(scheme, capacity, fpr, block_cells, nblocks, k);
}
