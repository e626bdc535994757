/* bf_filter_internal.h -- the bf_filter struct, shared by filter.c and the
 * loader in format.c. */
#ifndef BF_FILTER_INTERNAL_H
#define BF_FILTER_INTERNAL_H

#include "bf_internal.h"

struct bf_filter {
    bf_kind kind;
    union {
        bf_blocked *b;
        bf_scalable *s;
        bf_counting *c;
        bf_windowed *w;
    } u;
    bool readonly; /* cells used in place from a file or caller's buffer */
    void *map;     /* mapping to unmap on destroy, or NULL */
    size_t maplen;
    /* change tracking (delta.c) */
    bool tracking;
    uint64_t mark;        /* the state the dirty bits are relative to */
    uint32_t mark_layers; /* layers the filter had at the mark */
};

#endif
