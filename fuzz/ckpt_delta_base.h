/*
 * ckpt_delta_base.h -- the partition state the delta seeds are made from
 * (make_seeds.c) and the fuzz target applies every decoded delta to
 * (fuzz_ckpt_delta.c): one deterministic small scalable filter, its seq and
 * id, so a mutated delta that still names this base reaches the apply.
 * Header-only; each program includes it once.
 */
#ifndef BS_FUZZ_CKPT_DELTA_BASE_H
#define BS_FUZZ_CKPT_DELTA_BASE_H

#include <bloomfilters.h>
#include "checkpoint/checkpoint.h"

#include <stdlib.h>
#include <string.h>

#define DELTA_BASE_TOPIC "events"
#define DELTA_BASE_PARTITION 3
#define DELTA_BASE_SEQ 4
#define DELTA_BASE_ID UINT64_C(0x0123456789abcdef)

/* Keys from..from+n-1 (8-byte integers) into a scalable filter. */
static inline void delta_base_add(bf_filter *f, uint64_t from, uint64_t n)
{
    for (uint64_t k = from; k < from + n; k++)
        if (bf_scalable_add_if_absent(bf_filter_scalable(f), &k,
                                      sizeof(k)) < 0)
            abort();
}

/* The base: layers of 64, 128, ... keys at 1e-3, 50 keys in it, tracked
 * at DELTA_BASE_ID.  NULL when out of memory. */
static inline bf_filter *delta_base(void)
{
    bf_scalable_params p;
    bf_scalable_params_default(&p);
    p.initial_capacity = 64;
    p.fpr = 1e-3;
    bf_filter *f = bf_filter_from_scalable(bf_scalable_new(&p, NULL, 0));
    if (!f)
        return NULL;
    delta_base_add(f, 0, 50);
    if (bf_filter_track(f, DELTA_BASE_ID, NULL, 0) != BF_OK) {
        bf_filter_destroy(f);
        return NULL;
    }
    return f;
}

/* The base as a decoded checkpoint state (what bs_ckpt_apply takes). */
static inline int delta_base_state(bs_checkpoint *c)
{
    memset(c, 0, sizeof(*c));
    strcpy(c->topic, DELTA_BASE_TOPIC);
    c->partition = DELTA_BASE_PARTITION;
    c->next_offset = 100;
    c->seq = DELTA_BASE_SEQ;
    c->id = DELTA_BASE_ID;
    c->filter = delta_base();
    return c->filter ? 0 : -1;
}

#endif
