/*
 * dedup_filter.c -- see dedup_filter.h.
 */
#include "keys/dedup_filter.h"

#include <stdio.h>

bf_filter *bs_dedup_filter_new(const bs_dedup_params *dp, char *errstr,
                               size_t errstr_size)
{
    bf_filter *f = NULL;
    if (dp->window_ms > 0) {
        bf_windowed_params wp = {
            .window = dp->window_ms,
            .generations = dp->generations,
            .fpr = dp->sp.fpr,
            .initial_capacity = dp->sp.initial_capacity,
            .growth = dp->sp.growth,
            .tightening = dp->sp.tightening,
            .seed = dp->sp.seed,
            .max_bytes = dp->sp.max_bytes,
        };
        bf_windowed *w = bf_windowed_new(&wp, errstr, errstr_size);
        if (w && !(f = bf_filter_from_windowed(w)))
            bf_windowed_destroy(w);
        else if (!w)
            return NULL;
    } else {
        bf_scalable *sb = bf_scalable_new(&dp->sp, errstr, errstr_size);
        if (sb && !(f = bf_filter_from_scalable(sb)))
            bf_scalable_destroy(sb);
        else if (!sb)
            return NULL;
    }
    if (!f)
        snprintf(errstr, errstr_size, "out of memory");
    return f;
}

bool bs_dedup_filter_usable(const bf_filter *f, const bs_dedup_params *dp,
                            char *errstr, size_t errstr_size)
{
    bf_kind k = bf_filter_kind(f);
    if (k != BF_KIND_SCALABLE && k != BF_KIND_WINDOWED) {
        snprintf(errstr, errstr_size, "holds a %s filter, not a dedup "
                 "(scalable or windowed) one", bf_kind_name(k));
        return false;
    }
    if (bf_filter_seed(f) != dp->sp.seed) {
        snprintf(errstr, errstr_size, "its filter's hash seed %#llx is not "
                 "the stage's %#llx", (unsigned long long)bf_filter_seed(f),
                 (unsigned long long)dp->sp.seed);
        return false;
    }
    return true;
}

void bs_dedup_filter_set_max_bytes(bf_filter *f, uint64_t max_bytes)
{
    if (bf_filter_kind(f) == BF_KIND_WINDOWED)
        bf_windowed_set_max_bytes(bf_filter_windowed(f), max_bytes);
    else if (bf_filter_kind(f) == BF_KIND_SCALABLE)
        bf_scalable_set_max_bytes(bf_filter_scalable(f), max_bytes);
}

bool bs_dedup_advance(bf_filter *f, bf_audit *audit, int64_t timestamp_ms)
{
    bf_windowed *w = bf_filter_windowed(f);
    if (!w)
        return false;
    bool late = bf_windowed_advance(w, timestamp_ms);
    if (audit)
        bf_audit_follow_window(audit, w);
    return late;
}

int bs_dedup_add(bf_filter *f, bf_hash h)
{
    bf_windowed *w = bf_filter_windowed(f);
    if (w)
        return bf_windowed_add_if_absent_h(w, h);
    return bf_scalable_add_if_absent_h(bf_filter_scalable(f), h);
}
