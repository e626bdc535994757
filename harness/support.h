/*
 * support.h -- the integration tests' and bench/e2e.c's shared support
 * layer (harness/, the static library bstestsupport): run the
 * bloomstage binary as a user would (a `bloomstage mock-broker` process as
 * the Kafka cluster, `bloomstage run` as another), talk Kafka to it with
 * librdkafka to feed input and read output, and check what came out.
 *
 *   core.h     errors, memory, the clock, random numbers, the environment,
 *              how a check fails the test; every timeout (H_*_MS)
 *   files.h    temporary directories, whole files
 *   proc.h     child processes
 *   proxy.h    a TCP proxy whose link can be cut, slowed and healed (the
 *              nemesis's network faults)
 *   broker.h   the cluster: mock-broker with its control channel (or one
 *              already running, by its bootstrap list)
 *   kafka.h    client configurations, produce, read a topic to its end
 *              (read_committed too), watermarks, committed offsets
 *   stage.h    the binary under test: start a stage with a configuration,
 *              stop it, kill -9, wait for a log line, wait for output and
 *              commits; its checkpoint files and log lines
 *   stream.h   generated input whose output can be traced back to it:
 *              every key there, how many times
 *   crash.h    kill -9 at a chosen moment
 *   http.h     HTTP/1.0 client, Prometheus text-format parser
 *   fixture.h  a broker, a directory and the processes of one test, torn
 *              down whatever the outcome
 *   realkafka.h  a real Apache Kafka cluster (scripts/kafka): start, stop
 *              and restart nodes, topics by the Admin API, a fixture on
 *              it, read_committed output reads, a rate-limited feeder
 *   registry.h  a real Schema Registry (scripts/registry): start, stop,
 *              register schemas; the Confluent wire format's prefix and
 *              the Avro and Protobuf encodings test records need
 *   secure.h   a secured one (scripts/kafka start --secure): the layer's
 *              clients as its super user, a stage's settings by each
 *              means of authentication, the ACLs a stage needs (a table)
 *
 * Conventions: core.h.  Include cmocka.h first in a test, then this: it
 * adds H_CHECK and h_test_main.
 */
#ifndef BS_SUPPORT_H
#define BS_SUPPORT_H

#include "broker.h"
#include "core.h"
#include "crash.h"
#include "files.h"
#include "fixture.h"
#include "http.h"
#include "kafka.h"
#include "proc.h"
#include "proxy.h"
#include "realkafka.h"
#include "registry.h"
#include "secure.h"
#include "stage.h"
#include "stream.h"

#include <stdio.h>
#include <stdlib.h>

#ifdef fail_msg /* cmocka.h was included */

/* Fails the test, with the layer's reason and librdkafka's recent log,
 * unless expr is 0 (reported at the test's own line, unlike H_MUST). */
#define H_CHECK(expr)                                                        \
    do {                                                                     \
        if ((expr) != 0) {                                                   \
            h_dump_kafka_log();                                              \
            fail_msg("%s: %s", #expr, h_last_error());                       \
        }                                                                    \
    } while (0)

/* The checking helpers fail a cmocka test through this. */
static inline void h_cmocka_fail_(const char *msg)
{
    fail_msg("%s", msg);
}

/*
 * The first thing an integration test's main() does: h_test_init (the
 * binary's path, the environment scrubbed: exit 1 naming `name` without a
 * binary), checks failing through cmocka, the debugging variables
 * (h_stage_debug_env; NULL: none), filter_env=PATTERN (NULL: none)
 * running only the matching tests (cmocka's filter), and
 * BS_TEST_SKIP=PATTERN skipping the matching ones (cmocka's skip filter:
 * how ctest splits one program's tests between two entries).
 */
static inline void h_test_main(const char *name, const char *filter_env,
                               const char *verbose_env,
                               const char *stage_x_env)
{
    if (h_test_init()) {
        fprintf(stderr, "%s: %s\n", name, h_last_error());
        exit(1);
    }
    h_set_fail_hook(h_cmocka_fail_);
    h_stage_debug_env(verbose_env, stage_x_env);
    const char *filter = filter_env ? getenv(filter_env) : NULL;
    if (filter && *filter)
        cmocka_set_test_filter(filter);
    const char *skip = getenv("BS_TEST_SKIP");
    if (skip && *skip)
        cmocka_set_skip_filter(skip);
}

#endif /* fail_msg */

#endif
