/*
 * metrics.h -- the stage's HTTP endpoint (libmicrohttpd, its own thread):
 *
 *   /metrics   Prometheus text format (names in docs/operations.md, "Metrics")
 *   /healthz   200 while the process runs
 *   /ready     200 while partitions are assigned, records flow and
 *              checkpoints are not failing; 503 with the reason otherwise
 *              (while starting: the step, and the error that holds it)
 *
 * Started between bs_stage_new and bs_stage_run, it answers before the
 * stage waits on any broker.  It can serve HTTPS only and require HTTP
 * basic auth (metrics_guard.h: metrics.tls.*, metrics.auth.*).
 *
 * The server borrows the stage, which must outlive bs_metrics_stop.
 */
#ifndef BLOOMSTAGE_METRICS_H
#define BLOOMSTAGE_METRICS_H

#include "ops/metrics_guard.h"
#include "ops/report.h"

#include <stddef.h>

typedef struct bs_metrics bs_metrics;

/* listen: "HOST:PORT", ":PORT" (all addresses) or "[V6]:PORT"; port 0
 * picks a free one (the log line "metrics listening" says which, and
 * whether it serves TLS and how many users it has).  guard (NULL: plain
 * HTTP, no auth; taken, freed by bs_metrics_stop or on failure): HTTPS
 * only, and with users every request but the probes it leaves open needs
 * basic auth, else 401 with WWW-Authenticate: Basic realm="bloomstage".
 * NULL with errstr if the address is bad or cannot be bound, or GnuTLS
 * refuses the certificate and key (libmicrohttpd's message). */
bs_metrics *bs_metrics_start(const char *listen, bs_metrics_guard *guard,
                             bs_stage *stage, char *errstr,
                             size_t errstr_size);
void bs_metrics_stop(bs_metrics *m);

/* The /metrics text, for tests and the demo: a malloc'd string. */
char *bs_metrics_render(bs_stage *stage);

#endif
