/*
 * window.c -- bench_window: windowed dedup (a 24-hour window) over
 * synthetic days of traffic, time compressed through record timestamps,
 * against the same stream deduplicated without a window (a scalable filter
 * that remembers everything) and against an exact hash set of the window's
 * keys (the baseline: the memory an exact answer needs).
 *
 * The stream: DAYS (7) days of record time, RECORDS_PER_DAY (2M) records a
 * day with a diurnal rate (a sine, 3x between night and peak), each a new
 * key (50%), a copy of a record from the last 6 hours (30%), or of one
 * 20-40 hours back (20%: around the window's edge and past it): the support
 * layer's h_traffic_days (harness/stream.c), which bench_window_kafka
 * also runs on a real broker.  Keys are 8-byte ids; everything is
 * generated before anything is timed.
 *
 * Per structure, ROUNDS rounds over the whole stream (a fresh structure
 * each round): ns per record (hash + lookup + insert, and for the exact set
 * its expiry), the largest memory over the last DAYS-1 days (once the
 * window is full), and at the end.  Printed with the median and the spread
 * of the rounds, and as ratios to the exact set measured in the same run.
 *
 * The windowed filter's answers are checked against the truth in a pass of
 * their own, before the timed rounds: a shadow table holds, per key, when the filter last forwarded it;
 * a drop less than a window after that is right, a forward less than a
 * window after it breaks the contract (counted, must be 0), a drop 1+1/G
 * windows or more after it is a false drop (counted, and compared with
 * dedup.fpr by a Poisson bound), in between either is allowed.
 *
 *   bench_window [--quick] [--records-per-day N] [--days D] [--rounds R]
 */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bloomfilters.h"
#include "core.h"   /* h_sort_median (harness/) */
#include "stream.h" /* h_traffic_days, h_mix64 (harness/) */

#define DAY_MS INT64_C(86400000)
#define WINDOW_MS DAY_MS
#define G 4u
#define FPR 1e-6

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (!p) {
        fprintf(stderr, "bench_window: out of memory (%zu x %zu)\n", n, size);
        exit(1);
    }
    return p;
}

/* -- the stream -------------------------------------------------------------- */

typedef struct stream {
    size_t n;
    uint64_t *id;
    int64_t *ts;
} stream;

/* The support layer's synthetic days (harness/stream.h), the same
 * stream bench_window_kafka runs through the stage and Kafka Streams. */
static stream make_stream(uint64_t per_day, int days)
{
    stream s = {(size_t)per_day * (size_t)days, NULL, NULL};
    uint32_t *id32 = xcalloc(s.n, sizeof(*id32));
    s.id = xcalloc(s.n, sizeof(*s.id));
    s.ts = xcalloc(s.n, sizeof(*s.ts));
    (void)h_traffic_days(per_day, days, id32, s.ts);
    for (size_t i = 0; i < s.n; i++)
        s.id[i] = id32[i];
    free(id32);
    return s;
}

/* -- the exact set: open addressing, expiry from a FIFO ---------------------- */

typedef struct exact {
    uint64_t *key; /* 0: empty; ids are stored + 1 */
    int64_t *ts;
    size_t cap, n;
    uint64_t *fifo_key; /* forwards in time order: what expires next */
    int64_t *fifo_ts;
    size_t fcap, fhead, fn;
} exact;

static void exact_init(exact *e, size_t cap)
{
    e->cap = cap;
    e->n = 0;
    e->key = xcalloc(cap, sizeof(*e->key));
    e->ts = xcalloc(cap, sizeof(*e->ts));
    e->fcap = cap;
    e->fhead = e->fn = 0;
    e->fifo_key = xcalloc(cap, sizeof(*e->fifo_key));
    e->fifo_ts = xcalloc(cap, sizeof(*e->fifo_ts));
}

static void exact_free(exact *e)
{
    free(e->key);
    free(e->ts);
    free(e->fifo_key);
    free(e->fifo_ts);
}

/* What the set needs, not what this run allocated: its live keys in a
 * table at 50% load (key and time, 16 bytes a slot) and its live FIFO
 * entries (16 bytes each). */
static uint64_t exact_bytes(const exact *e)
{
    return (uint64_t)e->n * 32 + (uint64_t)e->fn * 16;
}

static size_t exact_slot(const exact *e, uint64_t k)
{
    size_t i = (size_t)(h_mix64(k) & (e->cap - 1));
    while (e->key[i] && e->key[i] != k)
        i = (i + 1) & (e->cap - 1);
    return i;
}

/* Linear probing deletion by backward shift. */
static void exact_delete(exact *e, size_t i)
{
    size_t j = i;
    for (;;) {
        j = (j + 1) & (e->cap - 1);
        if (!e->key[j])
            break;
        size_t home = (size_t)(h_mix64(e->key[j]) & (e->cap - 1));
        if ((j > i && (home <= i || home > j)) ||
            (j < i && (home <= i && home > j))) {
            e->key[i] = e->key[j];
            e->ts[i] = e->ts[j];
            i = j;
        }
    }
    e->key[i] = 0;
    e->n--;
}

/* true: forwarded (new, or last forwarded a window or more ago). */
static bool exact_dedup(exact *e, uint64_t id, int64_t t)
{
    while (e->fn && e->fifo_ts[e->fhead] <= t - WINDOW_MS) {
        uint64_t k = e->fifo_key[e->fhead];
        size_t i = exact_slot(e, k);
        if (e->key[i] == k && e->ts[i] == e->fifo_ts[e->fhead])
            exact_delete(e, i);
        e->fhead = (e->fhead + 1) % e->fcap;
        e->fn--;
    }
    uint64_t k = id + 1;
    size_t i = exact_slot(e, k);
    if (e->key[i])
        return false;
    if (e->n * 2 >= e->cap || e->fn == e->fcap) {
        fprintf(stderr, "bench_window: exact set full\n");
        exit(1);
    }
    e->key[i] = k;
    e->ts[i] = t;
    e->n++;
    size_t tail = (e->fhead + e->fn++) % e->fcap;
    e->fifo_key[tail] = k;
    e->fifo_ts[tail] = t;
    return true;
}

/* -- rounds ------------------------------------------------------------------ */

typedef enum kind { K_EXACT, K_WINDOWED, K_UNWINDOWED, NKINDS } kind;
static const char *const kind_name[NKINDS] = {
    "exact hash set (baseline)", "windowed, 24 h, G=4", "unwindowed"};

typedef struct round_res {
    double ns;
    uint64_t peak, end;
    uint64_t forwarded;
} round_res;

typedef struct check {
    uint64_t fp, fp_queries, early, between;
} check;

static round_res run(kind k, const stream *s, uint64_t per_day, check *ck)
{
    round_res r = {0};
    exact ex = {0}, shadow = {0};
    bf_windowed *w = NULL;
    bf_scalable *sb = NULL;
    size_t cap = 1;
    while (cap < per_day * 2)
        cap <<= 1;
    if (k == K_EXACT) {
        exact_init(&ex, cap);
    } else if (k == K_WINDOWED) {
        bf_windowed_params p;
        bf_windowed_params_default(&p);
        p.window = WINDOW_MS;
        p.generations = G;
        p.fpr = FPR;
        p.initial_capacity = per_day / G;
        w = bf_windowed_new(&p, NULL, 0);
    } else {
        bf_scalable_params p;
        bf_scalable_params_default(&p);
        p.fpr = FPR;
        p.initial_capacity = per_day;
        sb = bf_scalable_new(&p, NULL, 0);
    }
    if (ck) {
        /* The truth about the windowed filter's own forwards. */
        shadow.cap = 1;
        while (shadow.cap < s->n)
            shadow.cap <<= 1;
        shadow.key = xcalloc(shadow.cap, sizeof(*shadow.key));
        shadow.ts = xcalloc(shadow.cap, sizeof(*shadow.ts));
    }
    const double forget = (double)WINDOW_MS * (G + 1) / G;
    double t0 = now_s();
    for (size_t i = 0; i < s->n; i++) {
        uint64_t id = s->id[i];
        int64_t t = s->ts[i];
        bool fwd;
        if (k == K_EXACT) {
            fwd = exact_dedup(&ex, id, t);
        } else {
            bf_hash h = bf_hash_key(&id, sizeof(id), BF_DEFAULT_SEED);
            int a;
            if (w) {
                (void)bf_windowed_advance(w, t);
                a = bf_windowed_add_if_absent_h(w, h);
            } else {
                a = bf_scalable_add_if_absent_h(sb, h);
            }
            fwd = a != 0;
        }
        r.forwarded += fwd;
        if (ck) {
            size_t j = exact_slot(&shadow, id + 1);
            bool seen = shadow.key[j] != 0;
            double gap = seen ? (double)(t - shadow.ts[j]) : INFINITY;
            if (gap >= forget) {
                ck->fp_queries++;
                ck->fp += !fwd;
            } else if (gap < (double)WINDOW_MS) {
                ck->early += fwd;
            } else {
                ck->between++;
            }
            if (fwd) {
                shadow.key[j] = id + 1;
                shadow.ts[j] = t;
            }
        }
        if ((i & 65535) == 0 && s->ts[i] >= DAY_MS) {
            bf_info in;
            uint64_t b = 0;
            if (k == K_EXACT)
                b = exact_bytes(&ex);
            else if (w)
                bf_windowed_info(w, &in), b = in.bytes;
            else
                bf_scalable_info(sb, &in), b = in.bytes;
            if (b > r.peak)
                r.peak = b;
        }
    }
    r.ns = (now_s() - t0) * 1e9 / (double)s->n;
    bf_info in;
    if (k == K_EXACT)
        r.end = exact_bytes(&ex);
    else if (w)
        bf_windowed_info(w, &in), r.end = in.bytes;
    else
        bf_scalable_info(sb, &in), r.end = in.bytes;
    if (r.end > r.peak)
        r.peak = r.end;
    exact_free(&ex);
    free(shadow.key);
    free(shadow.ts);
    bf_windowed_destroy(w);
    bf_scalable_destroy(sb);
    return r;
}

int main(int argc, char **argv)
{
    uint64_t per_day = 2000000;
    int days = 7, rounds = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            per_day = 300000;
            days = 3;
            rounds = 2;
        } else if (!strcmp(argv[i], "--records-per-day") && i + 1 < argc) {
            per_day = strtoull(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--days") && i + 1 < argc) {
            days = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
            rounds = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: bench_window [--quick] "
                    "[--records-per-day N] [--days D] [--rounds R]\n");
            return 2;
        }
    }
    if (per_day < 1000 || days < 2 || rounds < 1 || rounds > 15) {
        fprintf(stderr, "bench_window: need >= 1000 records a day, >= 2 "
                "days, 1..15 rounds\n");
        return 2;
    }
    printf("bench_window: %d days of record time, %llu records a day "
           "(diurnal), window 24 h, G=%u, fpr %g, %d rounds\n", days,
           (unsigned long long)per_day, G, FPR, rounds);
    stream s = make_stream(per_day, days);
    round_res res[NKINDS][15];
    check ck = {0};
    /* The contract check first, untimed (its shadow table would slow the
     * round down); then the rounds, interleaving the structures so that a
     * change of load hits all of them. */
    (void)run(K_WINDOWED, &s, per_day, &ck);
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < NKINDS; k++)
            res[k][r] = run((kind)k, &s, per_day, NULL);
    double base_ns = 0;
    uint64_t base_peak = 0;
    printf("\n%-28s %10s %17s %14s %14s %9s %9s\n", "structure",
           "ns/record", "(min..max)", "peak memory", "at the end",
           "x time", "x memory");
    for (int k = 0; k < NKINDS; k++) {
        double ns[15];
        for (int r = 0; r < rounds; r++)
            ns[r] = res[k][r].ns;
        double med = h_sort_median(ns, (size_t)rounds);
        if (k == K_EXACT) {
            base_ns = med;
            base_peak = res[k][0].peak;
        }
        char range[40];
        snprintf(range, sizeof(range), "(%.0f..%.0f)", ns[0],
                 ns[rounds - 1]);
        printf("%-28s %10.0f %17s %11.1f MiB %11.1f MiB %9.2f %9.3f\n",
               kind_name[k], med, range, res[k][0].peak / 1048576.0,
               res[k][0].end / 1048576.0, med / base_ns,
               (double)res[k][0].peak / (double)base_peak);
    }
    /* Keys in a window: what the exact set forwards a day, on average. */
    double fwd_per_day = (double)res[K_EXACT][0].forwarded / days;
    printf("\nforwarded per day (exact): %.0f; windowed peak %.1f bytes per "
           "key of a window\n", fwd_per_day,
           (double)res[K_WINDOWED][0].peak / fwd_per_day);
    uint64_t limit = h_poisson_upper(FPR * (double)ck.fp_queries, 1e-6);
    printf("windowed contract: %llu copies less than a window after the "
           "forwarded one let through (must be 0); %llu false drops of "
           "%llu records 1.25 windows or more after (rate %.3g, bound %g, "
           "limit %llu) %s; %llu in between (either allowed)\n",
           (unsigned long long)ck.early, (unsigned long long)ck.fp,
           (unsigned long long)ck.fp_queries,
           ck.fp_queries ? (double)ck.fp / (double)ck.fp_queries : 0.0, FPR,
           (unsigned long long)limit,
           ck.early == 0 && ck.fp <= limit ? "PASS" : "MISS",
           (unsigned long long)ck.between);
    free(s.id);
    free(s.ts);
    return ck.early == 0 && ck.fp <= limit ? 0 : 1;
}
