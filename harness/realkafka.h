/*
 * realkafka.h -- a real Apache Kafka cluster for the `kafka`-labelled C
 * tests: started through scripts/kafka (KRaft nodes from Maven Central's
 * jars on free loopback ports) in a directory of its own, with this
 * process as its --owner (a test killed by ctest's timeout leaves no JVM),
 * nodes stopped and started again (on the same ports: each node's
 * configuration is written once), topics created with the Admin API,
 * output read as downstream consumers read it (read_committed), and a
 * rate-limited input feeder driven from the layer's wait loops.
 *
 * Where scripts/kafka is: $BS_KAFKA_SCRIPT, else the source tree's (the
 * path compiled in by support.cmake).  Conventions: core.h (0 / -1 with
 * h_last_error(); the checking helpers fail the running test).
 */
#ifndef BS_SUPPORT_REALKAFKA_H
#define BS_SUPPORT_REALKAFKA_H

#include "core.h"
#include "fixture.h"
#include "kafka.h"
#include "proc.h"
#include "stream.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* scripts/kafka start and start-node: a node answers (a JVM starting on a
 * busy 2-core machine takes 15-40 s). */
#define H_KAFKA_START_MS 240000
/* scripts/kafka stop / stop-node: SIGTERM, SIGKILL after 30 s. */
#define H_KAFKA_STOP_MS 90000

typedef struct h_kcluster h_kcluster;

/* `scripts/kafka start --nodes N --dir DIR --owner <this pid>` in a fresh
 * temporary DIR; *out holds its bootstrap list. */
int h_kcluster_start(int nodes, h_kcluster **out) H_WARN_UNUSED;
/* The same with more arguments for `scripts/kafka start` (NULL-terminated,
 * at most two; may be NULL), e.g. "--secure". */
int h_kcluster_start_args(int nodes, const char *const *more,
                          h_kcluster **out) H_WARN_UNUSED;
const char *h_kcluster_bootstraps(const h_kcluster *c);
/* The cluster's directory (scripts/kafka --dir). */
const char *h_kcluster_dir(const h_kcluster *c);
int h_kcluster_nodes(const h_kcluster *c);
/* The replication factor topics get here: min(nodes, 3). */
int h_kcluster_rf(const h_kcluster *c);
/* Node i (1-based) stopped (SIGTERM, scripts/kafka stop-node) or killed
 * (SIGKILL of its JVM: no controlled shutdown); started again and
 * answering (scripts/kafka start-node). */
int h_kcluster_stop_node(h_kcluster *c, int i) H_WARN_UNUSED;
int h_kcluster_kill_node(h_kcluster *c, int i) H_WARN_UNUSED;
int h_kcluster_start_node(h_kcluster *c, int i) H_WARN_UNUSED;
/* `scripts/kafka ARGS... --dir DIR` (at most 26 arguments) run to its
 * end within timeout_ms: 0 iff it exited 0, its stdout in *out (if not
 * NULL; the caller frees it); a failure names the script's last line of
 * stderr. */
int h_kcluster_run(const h_kcluster *c, const char *const *args,
                   int timeout_ms, char **out) H_WARN_UNUSED;
/* The broker port of node i (from DIR/ports); -1 if unknown. */
int h_kcluster_port(const h_kcluster *c, int i);
/* A cluster started with "--proxied": node i's proxied listener (the
 * port a proxy forwards to) and the port it is advertised as (where the
 * caller runs that proxy, h_proxy_new); -1 if unknown. */
int h_kcluster_proxied_port(const h_kcluster *c, int i);
int h_kcluster_proxy_port(const h_kcluster *c, int i);
/* The last max bytes of node i's server.log (a static buffer). */
const char *h_kcluster_log_tail(const h_kcluster *c, int i, size_t max);
/* scripts/kafka stop, the directory removed, the settings given for its
 * bootstrap list (h_kafka_conf_for) forgotten, c freed; 0 iff the script
 * said so.  NULL: 0. */
int h_kcluster_stop(h_kcluster *c);

/* ---- topics (Admin API) ------------------------------------------------ */

/*
 * CreateTopics: topic with partitions and replication factor rf, and the
 * topic configs "key=value" (NULL-terminated, may be NULL), e.g.
 * "cleanup.policy=compact"; then waits until every partition has a leader
 * in the metadata (H_REQUEST_MS each try, 60 s in all).
 */
int h_create_topic(const char *bootstraps, const char *topic, int partitions,
                   int rf, const char *const *configs) H_WARN_UNUSED;
/* A topic's config value as the broker describes it (DescribeConfigs)
 * into buf; -1 if the topic or the key is not there (after 30 s of
 * retries: a topic just created may be unknown to some broker a moment). */
int h_topic_config(const char *bootstraps, const char *topic,
                   const char *key, char *buf, size_t size) H_WARN_UNUSED;

/* ---- a fixture on a running cluster ------------------------------------ */

/* As h_fixture_new_sized, on cluster c (h_broker_attach: no process) with
 * a fresh temporary directory.  Freed by h_fixture_free; remembered here
 * too, so h_kfixture_teardown frees what a failed test left.  Up to
 * H_KFIXTURES_MAX are alive at once (a test that runs its cases side by
 * side, each on its own topics and group). */
#define H_KFIXTURES_MAX 32
int h_kfixture_new_sized(h_kcluster *c, size_t size,
                         int (*cleanup)(h_fixture *fx),
                         h_fixture **out) H_WARN_UNUSED;
/* cmocka teardown: the feeder abandoned, every process released, the
 * fixtures made by h_kfixture_new_sized still alive freed; prints how
 * long the test took. */
int h_kfixture_teardown(void **state);

/* For a test built for either broker: c NULL, a fixture on a mock
 * cluster of one broker of its own (h_fixture_new_sized); else one on
 * cluster c (h_kfixture_new_sized). */
int h_fixture_new_on(h_kcluster *c, size_t size,
                     int (*cleanup)(h_fixture *fx),
                     h_fixture **out) H_WARN_UNUSED;

/* A topic of `parts` partitions on fx's broker, for a test built for
 * either: c NULL, the mock cluster's control channel (which keeps no
 * topic configs); else the Admin API on cluster c, at its replication
 * factor, with configs ("k=v", NULL-terminated; NULL: none). */
int h_fixture_topic(h_fixture *fx, h_kcluster *c, const char *topic,
                    int parts, const char *const *configs) H_WARN_UNUSED;

/* ---- a test's environment: topics, a group, a stage configuration ------ */

/* Which topics and settings h_kenv_new makes. */
typedef struct h_kenv_opts {
    int nparts;        /* partitions of NAME-in, NAME-out, NAME-rej */
    bool no_out;       /* NAME-out not created (a test of that error) */
    bool rejected;     /* NAME-rej created and set as rejected.topic */
    const char *const *in_conf;  /* NAME-in's topic configs ("k=v", NULL-
                                  * terminated), NULL: the broker's */
    const char *const *rej_conf; /* NAME-rej's, the same */
    bool ckdir;        /* checkpoint.dir=DIR/ckpt in the configuration
                        * (else each instance is given its own: -X) */
    bool kafka_store;  /* NAME-ckpt (3 partitions, compacted, checked) and
                        * checkpoint.store=kafka with 16k chunks */
    bool ckpt_topic;   /* NAME-ckpt created and named by checkpoint.topic,
                        * without checkpoint.store=kafka: each instance
                        * chooses its store (-X checkpoint.store=kafka) */
    int checkpoint_ms; /* checkpoint.interval.ms */
    int capacity;      /* dedup.capacity */
    const char *extra; /* more configuration lines ("key=value\n"...),
                        * appended as they are; may be NULL */
    const char *bootstraps; /* the stage's kafka.bootstrap.servers; NULL:
                             * the cluster's (the layer's clients') */
    bool blocklist;    /* NAME-lst (1 partition, compacted) as the topic
                        * of live blocklist x, matched against the record
                        * key (blocklist.x.topic, blocklist.x.key=key) */
} h_kenv_opts;

/* A real-broker test's state; tests embed nothing else in it (st and
 * scratch are theirs to fill, freed here). */
typedef struct h_kenv {
    h_fixture h;
    char in[64], out[64], rej[64], ckt[64], lst[64], group[64];
    char *conf;       /* DIR/stage.conf */
    char *ckdir;      /* DIR/ckpt */
    rd_kafka_t *q;    /* a query client on the cluster */
    h_stream *st;
    uint8_t *scratch;
} h_kenv;

/*
 * A fixture on cluster c (h_kfixture_new_sized) with the topics o asks
 * for, group NAME, and DIR/stage.conf: those topics, a session timeout at
 * the broker's minimum (group.min.session.timeout.ms, 6 s) with 1 s
 * heartbeats, fast reconnects, fetch.wait.max.ms=100, debug logs (a
 * `msg=checkpoint` line per round), no stats lines, then o->extra's
 * lines.  Fails the test on any error.
 */
h_kenv *h_kenv_new(h_kcluster *c, const char *name, const h_kenv_opts *o);
/* Ends a test that went well: h_kfixture_teardown (every environment
 * alive freed, every process released). */
void h_kenv_free(h_kenv *e);

/* Checks of a test's outcome on e->st (they fail the test): the group's
 * committed offsets are the input's end (now; or polled for, procs alive);
 * every unique key exactly once in NAME-out read at read_committed (the
 * records returned, owned by e->st; why is said on failure); NAME-rej
 * (read_committed) holds only copies of input records with
 * bloomstage-reason duplicate, every record that is not its key's first at
 * least once and no first one -- returns its size, *extra the copies
 * beyond one per record (may be NULL). */
void h_kenv_committed_end(h_kenv *e);
void h_kenv_wait_committed_end(h_kenv *e, h_proc *const *procs,
                               int timeout_ms);
h_outrec *h_kenv_expect_once(h_kenv *e, size_t *n, const char *why);
size_t h_kenv_expect_rejected(h_kenv *e, size_t *extra);

/* The Kafka store's manifests in NAME-ckpt, read at read_committed (fails
 * the test on one that is not JSON or names no state): how many there are,
 * how many name a chain (a snapshot and deltas after it), and the longest
 * chain's states. */
typedef struct h_ckpt_chains {
    size_t manifests, chains, longest;
} h_ckpt_chains;
h_ckpt_chains h_kenv_ckpt_chains(h_kenv *e);

/* cmocka group setup and teardown of a test file that runs on one
 * cluster: 1 or 3 nodes started, then stopped; h_kgroup_cluster() is it. */
int h_kgroup_setup1(void **state);
/* The same for a cluster of `nodes` started with more arguments
 * (h_kcluster_start_args); 0 or -1, said on stderr. */
int h_kgroup_setup_args(int nodes, const char *const *more);
int h_kgroup_setup3(void **state);
int h_kgroup_teardown(void **state);
h_kcluster *h_kgroup_cluster(void);

/* ---- committed offsets ------------------------------------------------- */

/* h_committed, retried for up to timeout_ms while it fails: a real
 * broker answers NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS until the
 * offsets topic exists and is loaded (a fresh cluster, a node restarted),
 * where the mock never does. */
int h_committed_retry(const char *bootstraps, const char *group,
                      const char *topic, int nparts, int64_t *offsets,
                      int timeout_ms) H_WARN_UNUSED;
/* h_wait_committed (stage.h) with h_committed's failures tolerated until
 * the deadline: polls until group's committed offsets on partitions
 * 0..nparts-1 of topic are want[]; procs (NULL-terminated) must stay
 * alive meanwhile. */
void h_wait_committed_tolerant(const char *bootstraps, const char *group,
                               const char *topic, int nparts,
                               const int64_t *want, h_proc *const *procs,
                               int timeout_ms);
/* The same until they are at least want[] (a checkpoint covers that far). */
void h_wait_committed_past(const char *bootstraps, const char *group,
                           const char *topic, int nparts, const int64_t *want,
                           h_proc *const *procs, int timeout_ms);

/* ---- watermarks with a broker away ------------------------------------- */

/* h_topic_end (stage.h) retrying a failing query for up to timeout_ms: with
 * a broker killed, ListOffsets to the partitions it led time out until the
 * controller has moved their leaders (broker.session.timeout.ms, 9 s) and
 * the client has refreshed its metadata; on a loaded machine that takes
 * longer than h_topic_end's 15 s. */
int64_t h_topic_end_tolerant(rd_kafka_t *q, const char *topic, int nparts,
                             int64_t *hw, int timeout_ms);
/* h_wait_out (stage.h) on h_topic_end_tolerant: polls until topic holds at
 * least want records; procs (NULL-terminated) must stay alive. */
void h_wait_out_tolerant(rd_kafka_t *q, const char *topic, int nparts,
                         h_proc *const *procs, int64_t want, int timeout_ms);

/* ---- leaders and coordinators ---------------------------------------- */

/* The node id leading partition `part` of topic, by a metadata request on
 * q; with id (part ignored): the partition Kafka's coordinator lookup
 * hashes id to -- abs(String.hashCode) % partitions, a group's on
 * __consumer_offsets, a transactional id's on __transaction_state -- so
 * its leader is that coordinator.  -1 if unknown. */
int h_kleader_of(rd_kafka_t *q, const char *topic, int32_t part,
                 const char *id);

/* ---- reading the output as consumers do ------------------------------- */

/* h_read_out (stream.h), reading out_topic with
 * isolation.level=read_committed. */
h_outrec *h_read_out_committed(h_stream *st, const char *bootstraps,
                               const char *out_topic, const char *in_topic,
                               size_t *n);

/* ---- feeding the input at a rate --------------------------------------- */

/*
 * Records [from, st->n) of st are produced to topic, each to its own
 * partition, in order, at `rate` records/s from the layer's wait loops
 * (the idle hook of h_nap, set here), by one idempotent producer (so the
 * offsets are the stream's).  If that producer fails fatally, a new one
 * resends the records it sent that are not in the topic once the topic's
 * ends stand still (realkafka.c says how; the offsets stay the stream's),
 * and one line on stdout says so.  One feeder at a time.
 */
void h_feed_start(const char *bootstraps, const char *topic,
                  const h_stream *st, size_t from);
void h_feed_rate(double rate);
/* The next record to be produced. */
size_t h_feed_next(void);
/* How many times a feeder of this process has recovered from its
 * producer's fatal error. */
unsigned h_feed_recoveries(void);
/* Produces the rest, waits (up to flush_ms, a recovery's producer each
 * again) for every delivery, checks the topic's ends against the
 * stream's, ends the feeder. */
void h_feed_finish(int flush_ms);
/* Purges and ends the feeder, if any. */
void h_feed_abandon(void);
/* For tests of the feeder itself: raises a fatal error
 * (OUT_OF_ORDER_SEQUENCE_NUMBER with reason, rd_kafka_test_fatal_error)
 * on the feeder's producer, as librdkafka 2.0.2 does under a broker
 * pause; fails the test if no producer is feeding. */
void h_feed_test_fatal(const char *reason);

#endif
