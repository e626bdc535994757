/*
 * cli_audit.c -- see cli_audit.h.
 */
#include "cli_audit.h"
#include "base/util.h"

#include <math.h>

void cli_audit_line(FILE *f, const bf_audit *a, const bf_info *in,
                    const uint64_t *rescued)
{
    bf_audit_stats st;
    char hb[32];
    bf_audit_stats_get(a, &st);
    double inv = 1 / st.rate; /* 1/1024 reads better as such */
    if (inv == floor(inv) && inv < 1e15)
        fprintf(f, "audit: rate 1/%.0f", inv);
    else
        fprintf(f, "audit: rate %.6g", st.rate);
    fprintf(f,
            ", sampled lookups %llu, false positives %llu, "
            "measured fpr %.3g (95%% %.3g..%.3g), estimated fpr %.3g "
            "(bound %g), ",
            (unsigned long long)st.lookups,
            (unsigned long long)st.false_positives, st.measured, st.lo,
            st.hi, in->est_fpr, in->fpr_target);
    if (rescued)
        fprintf(f, "rescued %llu, ", (unsigned long long)*rescued);
    fprintf(f, "memory %s (%.2f%% of the filter's)\n",
            bs_human_bytes(st.bytes, hb, sizeof(hb)),
            in->bytes ? 100.0 * (double)st.bytes / (double)in->bytes : 0.0);
}
