/*
 * cli_audit.h -- the one line that shows an audit sample (bf_audit) beside
 * the filter it audits, as `bloomstage dedup --audit` prints it at the end
 * of a run and `bloomstage checkpoint info` under each partition's state.
 */
#ifndef BLOOMSTAGE_CLI_AUDIT_H
#define BLOOMSTAGE_CLI_AUDIT_H

#include <bloomfilters.h>
#include <stdint.h>
#include <stdio.h>

/* "audit: rate 1/1024, sampled lookups N, false positives F, measured fpr
 * X (95% LO..HI), estimated fpr E (bound B), [rescued R, ]memory M (P% of
 * the filter's)" and a newline, on f: `in` is the audited filter's info
 * (its estimate and bound); rescued NULL leaves the rescued count out. */
void cli_audit_line(FILE *f, const bf_audit *a, const bf_info *in,
                    const uint64_t *rescued);

#endif
