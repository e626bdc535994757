/*
 * metrics_gate.h -- who the metrics endpoint (metrics.c) lets in, how long
 * it waits for them, and where their passwords are checked, so that slow
 * or guessing clients cannot starve the probes (/healthz, /ready) that
 * Docker and Kubernetes restart a stage by.
 *
 *   a client      at most BS_GATE_PER_CLIENT connections from one address,
 *                 loopback excepted (a container's own HEALTHCHECK and the
 *                 tests share it); the daemon's limit, BS_GATE_CONNECTIONS,
 *                 keeps room for probes above any one client.
 *   a request     BS_GATE_REQUEST_S from a connection's start (or the end
 *                 of its last exchange) to the end of the next, whatever
 *                 it trickles meanwhile (nginx's client_header_timeout,
 *                 for the whole exchange): past it, a watchdog shuts the
 *                 socket down and libmicrohttpd closes the connection.
 *   a password    checked by BS_GATE_WORKERS threads of its own, never on
 *                 the endpoint's thread: the request waits, suspended, and
 *                 every other connection is served meanwhile.  A user and
 *                 password that passed are remembered (a keyed hash, for
 *                 BS_GATE_CACHE_S) and pass again at no cost, as Prometheus'
 *                 exporter-toolkit does; failures spend a client's tokens
 *                 (BS_GATE_FAIL_BURST, refilled one a BS_GATE_FAIL_REFILL_S)
 *                 and a client without one is answered 429 at once; at most
 *                 BS_GATE_QUEUE checks wait, the rest are answered 429.
 *
 * It knows sockets and threads, not HTTP: metrics.c calls it from
 * libmicrohttpd's callbacks and suspends and resumes connections.
 * Thread-safe: one lock around its tables.
 */
#ifndef BLOOMSTAGE_METRICS_GATE_H
#define BLOOMSTAGE_METRICS_GATE_H

#include "ops/metrics_guard.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#define BS_GATE_CONNECTIONS 512  /* the daemon's connection limit */
#define BS_GATE_PER_CLIENT 16    /* connections from one address */
#define BS_GATE_REQUEST_S 5.0    /* a whole exchange */
#define BS_GATE_WORKERS 2        /* password checks at once */
#define BS_GATE_QUEUE 16         /* password checks waiting */
#define BS_GATE_CACHE_S 300.0    /* a good password remembered */
#define BS_GATE_FAIL_BURST 5.0   /* failed checks a client may make at once */
#define BS_GATE_FAIL_REFILL_S 2.0 /* then one a this many seconds */

typedef struct bs_metrics_gate bs_metrics_gate;
/* One connection's state, the gate's (metrics.c keeps the pointer as
 * libmicrohttpd's socket context). */
typedef struct bs_gate_conn bs_gate_conn;
/* One password check, waiting or done. */
typedef struct bs_gate_check bs_gate_check;

typedef enum bs_gate_verdict {
    BS_GATE_ALLOW = 0, /* the credentials are a user's */
    BS_GATE_DENY,      /* they are not */
    BS_GATE_LIMITED,   /* not checked: the client failed too often, or too
                          many checks wait; 429 */
    BS_GATE_WAIT,      /* checked by a worker: wake(arg) is called when done,
                          then bs_gate_check_result */
} bs_gate_verdict;

/* guard (borrowed, must outlive the gate) checks the passwords; NULL with
 * errstr when a thread cannot be started. */
bs_metrics_gate *bs_metrics_gate_new(const bs_metrics_guard *guard,
                                     char *errstr, size_t errstr_size);
/* Stops the watchdog and the workers; every check waiting is finished
 * first (its wake called), and later checks are LIMITED.  Before the
 * daemon stops: it may resume the connections.  Accepts NULL. */
void bs_metrics_gate_stop(bs_metrics_gate *g);
/* Frees it, once the daemon (whose callbacks call it) has stopped.
 * Accepts NULL. */
void bs_metrics_gate_destroy(bs_metrics_gate *g);

/* Whether a new connection from sa may be accepted. */
bool bs_metrics_gate_admit(bs_metrics_gate *g, const struct sockaddr *sa);
/* A connection accepted on socket fd from sa, watched from now on; NULL
 * when out of memory (the connection is not watched). */
bs_gate_conn *bs_metrics_gate_opened(bs_metrics_gate *g, int fd,
                                     const struct sockaddr *sa);
/* An exchange on c ended: the next one has BS_GATE_REQUEST_S again. */
void bs_metrics_gate_served(bs_metrics_gate *g, bs_gate_conn *c);
/* c closed: forgotten.  Accepts NULL. */
void bs_metrics_gate_closed(bs_metrics_gate *g, bs_gate_conn *c);

/* Checks user and password (either may be NULL) for a request on c.
 * WAIT: *check is set and wake(arg) is called from a worker once it is
 * done; the caller then reads bs_gate_check_result and frees it. */
bs_gate_verdict bs_metrics_gate_check(bs_metrics_gate *g, bs_gate_conn *c,
                                      const char *user, const char *password,
                                      void (*wake)(void *arg), void *arg,
                                      bs_gate_check **check);
/* A finished check's verdict (ALLOW or DENY); BS_GATE_WAIT while a worker
 * still has it. */
bs_gate_verdict bs_gate_check_result(bs_metrics_gate *g,
                                     const bs_gate_check *check);
/* Frees a finished check (its password was wiped when it was checked).
 * Accepts NULL. */
void bs_gate_check_free(bs_gate_check *check);

#endif
