/*
 * metrics_guard.h -- what protects the metrics endpoint (metrics.c), as
 * the web-config of Prometheus' exporters does: TLS with a PEM certificate
 * and key, and HTTP basic auth against USER:HASH lines of bcrypt hashes.
 *
 * bs_metrics_guard_load reads the files the metrics.tls.* and
 * metrics.auth.* keys name (config/validate.c already found them
 * readable) and checks what is in them, at start-up, before any client is
 * made: `bloomstage run` and `config --check` refuse the same files.  A
 * message names the key's origin, the key and the file (and the line of
 * the users file), never a password, a hash or the key's text.
 *
 * A password is checked with libcrypt's crypt_rn (libxcrypt's bcrypt)
 * against the user's hash and the result compared in constant time; an
 * unknown user costs the same bcrypt, so the time does not tell which
 * users exist.  Each check costs one bcrypt at the hash's cost, on the
 * endpoint's one thread: hence a cost of at most BS_BCRYPT_COST_MAX.
 *
 * Thread-safe after loading (nothing in it changes); freed by its owner
 * (bs_metrics_start takes it).
 */
#ifndef BLOOMSTAGE_METRICS_GUARD_H
#define BLOOMSTAGE_METRICS_GUARD_H

#include "base/settings.h"
#include "base/util.h" /* BS_WARN_UNUSED */

#include <config.h>
#include <stdbool.h>
#include <stddef.h>

/* bcrypt's cost range: 2^cost rounds.  10 takes about 60 ms of a core. */
#define BS_BCRYPT_COST_MIN 4
#define BS_BCRYPT_COST_MAX 14

typedef struct bs_metrics_guard bs_metrics_guard;

/* What set's metrics_tls_cert, metrics_tls_key and metrics_users name,
 * read and checked (cfg for the keys' origins): 0 with *out (NULL when
 * none is set: plain HTTP, no auth), or -1 with errstr, e.g.
 * "FILE:3: key 'metrics.auth.users.path': /run/secrets/users:2: user
 * 'prom': the hash is not bcrypt ...". */
int bs_metrics_guard_load(const bs_config *cfg, const bs_settings *set,
                          bs_metrics_guard **out, char *errstr,
                          size_t errstr_size) BS_WARN_UNUSED;
/* The key's text is wiped before it is freed. */
void bs_metrics_guard_free(bs_metrics_guard *g);

/* The PEM texts for TLS, NUL-terminated; NULL when it serves plain HTTP. */
const char *bs_metrics_guard_cert(const bs_metrics_guard *g);
const char *bs_metrics_guard_key(const bs_metrics_guard *g);
/* Whether it has users (basic auth), and how many. */
size_t bs_metrics_guard_users(const bs_metrics_guard *g);
/* Whether a request for url needs credentials: with users, every path
 * but /healthz and /ready when metrics.auth.probes.open. */
bool bs_metrics_guard_needs_auth(const bs_metrics_guard *g, const char *url);
/* Whether user and password (either may be NULL: refused) are one of its
 * users'. */
bool bs_metrics_guard_allows(const bs_metrics_guard *g, const char *user,
                             const char *password);

#endif
