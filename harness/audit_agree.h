/*
 * audit_agree.h -- one seeded stream through the stage's kind of dedup
 * filter (a scalable filter, add-if-absent per record, as
 * stage/keys/dedup_filter.c's bs_dedup_add does it) with audit samples
 * (bf_audit) at one or more rates checking every answer, and the ground
 * truth counted from the stream itself: shared by the agreement test
 * (tests/unit/test_audit.c) and benchmark (bench/agreement.c).
 *
 * The stream: key number i (harness/keys.h's key_u64, distinct for distinct
 * i) for i = 0, 1, ... `keys` - 1, and after every `repeat_every` new keys
 * (0: none) a repeat of an earlier key drawn by a seeded PRNG.  Which
 * records are first-time keys is known by construction, so the truth
 * needs no exact set: a first-time key the filter calls seen is a unique
 * key dropped.  The hash seed (the filter's and the audits') is the run's
 * seed, so each seed is an independent filter and sample.  Rescue is off:
 * the filter decides every record.
 *
 * Two truths are counted.  Over every first-time key: the rate the audit
 * estimates (the data-loss rate of the stream).  Over the first-time keys
 * each audit samples: what that audit counts exactly, so it must equal the
 * audit's own false positives -- a check of the counting, not of the
 * estimate (it is the interval's own point).
 *
 * Lookups run a few records behind the hashing, each record's blocks in
 * every layer prefetched (the dedup command's read-ahead): the answers are
 * those of one record at a time, in order.
 *
 * Header-only (static functions); include harness/keys.h first.
 */
#ifndef BS_TESTS_AUDIT_AGREE_H
#define BS_TESTS_AUDIT_AGREE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bloomfilters.h"

#define AGREE_MAX_RATES 4
#define AGREE_AHEAD 8 /* records between a prefetch and the lookup */

typedef struct agree_params {
    bf_scalable_params sp; /* the filter; its seed is the run's */
    uint64_t keys;         /* distinct keys */
    uint64_t repeat_every; /* a repeat after every this many keys; 0 none */
    double rates[AGREE_MAX_RATES]; /* audit rates, side by side */
    unsigned nrates;
} agree_params;

typedef struct agree_audit {
    bf_audit_stats st;         /* the audit's own counts and interval */
    uint64_t sampled_unique;   /* truth: first-time keys it samples */
    uint64_t sampled_dropped;  /* truth: of those, the ones dropped */
    bool covers;               /* st.lo <= true rate <= st.hi */
} agree_audit;

typedef struct agree_result {
    uint64_t records;  /* keys + repeats */
    uint64_t unique;   /* first-time keys (= keys) */
    uint64_t dropped;  /* of those, the ones the filter called seen */
    double truth;      /* dropped / unique */
    bf_info info;      /* the filter at the end */
    agree_audit audit[AGREE_MAX_RATES];
} agree_result;

static inline bf_hash agree_hash(uint64_t i, uint64_t seed)
{
    unsigned char k[8];
    key_u64(i, k);
    return bf_hash_key(k, 8, seed);
}

/* Runs the stream of `p` with hash seed `seed` into *r.  Returns 0, or -1
 * with the reason in errstr (the filter or an audit could not be made or
 * ran out of memory). */
static inline int agree_run(const agree_params *p, uint64_t seed,
                            agree_result *r, char *errstr, size_t errsz)
{
    memset(r, 0, sizeof(*r));
    bf_scalable_params sp = p->sp;
    sp.seed = seed;
    bf_scalable *sb = bf_scalable_new(&sp, errstr, errsz);
    if (!sb)
        return -1;
    bf_audit *a[AGREE_MAX_RATES] = {0};
    int rc = 0;
    for (unsigned j = 0; j < p->nrates && rc == 0; j++)
        if (!(a[j] = bf_audit_new(p->rates[j], seed, errstr, errsz)))
            rc = -1;
    /* A ring of the next records: their hashes, and whether each is a
     * first-time key. */
    bf_hash ring[AGREE_AHEAD];
    bool fresh[AGREE_AHEAD];
    keys_rng rng = {seed ^ UINT64_C(0x7265706561747321)};
    uint64_t next_key = 0, since_repeat = 0, queued = 0, done = 0;
    uint64_t total = p->keys + (p->repeat_every ? p->keys / p->repeat_every
                                                : 0);
    while (rc == 0 && done < total) {
        /* Queue the next record, its blocks prefetched. */
        while (queued < total && queued - done < AGREE_AHEAD) {
            bool repeat = p->repeat_every && since_repeat == p->repeat_every;
            uint64_t i;
            if (repeat) {
                i = keys_rng_next(&rng) % next_key;
                since_repeat = 0;
            } else {
                i = next_key++;
                since_repeat++;
            }
            bf_hash h = agree_hash(i, seed);
            bf_scalable_prefetch_h(sb, h);
            ring[queued % AGREE_AHEAD] = h;
            fresh[queued % AGREE_AHEAD] = !repeat;
            queued++;
        }
        bf_hash h = ring[done % AGREE_AHEAD];
        bool first = fresh[done % AGREE_AHEAD];
        done++;
        int added = bf_scalable_add_if_absent_h(sb, h);
        if (added < 0) {
            snprintf(errstr, errsz, "the filter could not grow at record "
                     "%llu", (unsigned long long)done);
            rc = -1;
            break;
        }
        bool seen = added == 0;
        r->unique += first;
        r->dropped += first && seen;
        for (unsigned j = 0; j < p->nrates; j++) {
            int fp = bf_audit_check(a[j], h, seen);
            if (fp < 0) {
                snprintf(errstr, errsz, "the audit at rate %g ran out of "
                         "memory", p->rates[j]);
                rc = -1;
                break;
            }
            if (first && bf_audit_sampled(a[j], h)) {
                r->audit[j].sampled_unique++;
                r->audit[j].sampled_dropped += seen;
            }
        }
    }
    r->records = done;
    r->truth = r->unique ? (double)r->dropped / (double)r->unique : 0;
    bf_scalable_info(sb, &r->info);
    for (unsigned j = 0; j < p->nrates && a[j]; j++) {
        agree_audit *x = &r->audit[j];
        bf_audit_stats_get(a[j], &x->st);
        x->covers = x->st.lo <= r->truth && r->truth <= x->st.hi;
    }
    for (unsigned j = 0; j < p->nrates; j++)
        bf_audit_destroy(a[j]);
    bf_scalable_destroy(sb);
    return rc;
}

#endif
