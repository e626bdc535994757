/*
 * broker.h -- the Kafka cluster a test or benchmark runs against.
 *
 * Today that is `bloomstage mock-broker --control` (librdkafka's mock
 * cluster in a process of its own, with a control channel for fault
 * injection).  The handle is a bootstrap string plus, for the mock, its
 * process: h_broker_attach makes one for a cluster already running (a real
 * Kafka), so that a later change can point the tests at one with nothing
 * else changed but how topics are created (the mock creates them from -t
 * and `create-topic`; a real cluster would need the Admin API, which the
 * mock does not implement) and the fault-injection tests, which need the
 * control channel (h_broker_control fails on an attached cluster).
 */
#ifndef BS_SUPPORT_BROKER_H
#define BS_SUPPORT_BROKER_H

#include "core.h"

#include <sys/types.h>

typedef struct h_broker h_broker;

typedef struct h_broker_opts {
    int brokers;                    /* brokers in the cluster (0: 1) */
    const char *const *topic_specs; /* "topic:partitions", NULL-terminated */
    const char *log_path;           /* its stderr to this file, kept (NULL:
                                       an anonymous capture) */
} h_broker_opts;

/*
 * Starts `bloomstage mock-broker --control -b BROKERS -t SPEC...` and reads
 * its bootstrap line (H_BROKER_MS).  topic_specs: NULL-terminated list of
 * "topic:partitions", or NULL.
 */
int h_broker_start(const char *bloomstage_path, int brokers,
                   const char *const *topic_specs,
                   h_broker **out) H_WARN_UNUSED;
int h_broker_start_opts(const char *bloomstage_path, const h_broker_opts *o,
                        h_broker **out) H_WARN_UNUSED;
/* A handle on a cluster that is already running: no process, no control
 * channel. */
int h_broker_attach(const char *bootstraps, h_broker **out) H_WARN_UNUSED;
/* "127.0.0.1:port,..." for bootstrap.servers; owned by b. */
const char *h_broker_bootstraps(const h_broker *b);
/* Whether b is a mock-broker process of ours (false: attached). */
bool h_broker_is_mock(const h_broker *b);
/* The mock-broker's pid (-1 if attached). */
pid_t h_broker_pid(const h_broker *b);
/* Sends one control command (see `bloomstage mock-broker --help`), e.g.
 * "push-errors Produce 5 NOT_LEADER_FOR_PARTITION", and waits
 * (H_BROKER_MS) for its answer: 0 on "ok", -1 on "error: ..." (then in
 * h_last_error()). */
int h_broker_control(h_broker *b, const char *command) H_WARN_UNUSED;
/* SIGTERM, wait up to H_BROKER_MS, then SIGKILL; frees b.  0 iff the
 * broker exited with status 0 (an attached one: 0).  NULL is a no-op
 * returning 0. */
int h_broker_stop(h_broker *b);
/* The broker's stderr so far (owned by b; "" if attached). */
const char *h_broker_stderr(h_broker *b);

#endif
