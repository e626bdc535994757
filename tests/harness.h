/*
 * harness.h -- the integration tests' toolbox: run the bloomstage binary as
 * a user would (a `bloomstage mock-broker` process as the Kafka cluster,
 * `bloomstage run` as another), and talk Kafka to it with librdkafka to feed
 * input and read output.
 *
 * Conventions, for every h_ function:
 *   - the result is 0 on success and -1 on failure (h_process_wait also
 *     returns 1 on a timeout); a failure leaves a one-line reason in
 *     h_last_error() and prints nothing, since tests also provoke failures
 *     on purpose.  librdkafka's log goes to a bounded in-memory ring, not
 *     stderr; H_CHECK (or h_dump_kafka_log) prints it when a test fails;
 *   - every wait has a timeout: a broken broker or stage fails the test, it
 *     never hangs it;
 *   - objects come in _new/_free pairs (or start/stop); free accepts NULL.
 *
 * The H_CHECK(expr) macro, defined when cmocka.h is included first, fails
 * the current test with the harness's reason when expr is not 0.
 *
 * Not thread-safe: one test thread uses the harness (librdkafka's own
 * threads are fine).
 */
#ifndef BLOOMSTAGE_TEST_HARNESS_H
#define BLOOMSTAGE_TEST_HARNESS_H

#include <librdkafka/rdkafka.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define H_WARN_UNUSED __attribute__((warn_unused_result))

/* ---- errors --------------------------------------------------------- */

/* The reason for the last failure ("" if none yet); valid until the next
 * h_ call. */
const char *h_last_error(void);

/* Writes librdkafka's log lines gathered since the last dump to stderr (at
 * most the last 256) and forgets them. */
void h_dump_kafka_log(void);

#ifdef fail_msg /* cmocka.h was included */
/* Fails the test, with the harness's reason and librdkafka's recent log,
 * unless expr is 0. */
#define H_CHECK(expr)                                                        \
    do {                                                                     \
        if ((expr) != 0) {                                                   \
            h_dump_kafka_log();                                              \
            fail_msg("%s: %s", #expr, h_last_error());                       \
        }                                                                    \
    } while (0)
#endif

/* ---- files and directories ----------------------------------------- */

/* The binary under test: $BLOOMSTAGE_BIN (ctest passes
 * $<TARGET_FILE:bloomstage>).  NULL, with h_last_error() set, when unset. */
const char *h_bloomstage_path(void);

/* A fresh directory /tmp/bloomstage-test-XXXXXX; *path is the caller's to
 * free (after h_tmpdir_remove). */
int h_tmpdir_new(char **path) H_WARN_UNUSED;
/* Removes the directory and everything under it (no symlinks followed).
 * NULL is a no-op. */
int h_tmpdir_remove(const char *path);

/* Writes `contents` (a string) to path, replacing it. */
int h_write_file(const char *path, const char *contents) H_WARN_UNUSED;
/* Reads a whole file; *out is a NUL-terminated malloc'd string (the file
 * may hold NULs: *len, if not NULL, gets its length). */
int h_read_file(const char *path, char **out, size_t *len) H_WARN_UNUSED;

/* asprintf that aborts the test binary on out-of-memory; free() the result. */
char *h_strdupf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- processes ------------------------------------------------------ */

/*
 * A child process with stdin from /dev/null and stdout and stderr captured
 * to temporary files (so a chatty child can never block on a full pipe;
 * unlinked at once, so a failed test leaves nothing in /tmp).
 * The child is killed (SIGKILL) if the test binary dies, and by
 * h_process_free if it is still running.
 */
typedef struct h_proc h_proc;

/* argv[0] is a path or a name looked up in PATH; argv and envp_extra are
 * NULL-terminated, envp_extra ("KEY=VALUE" entries, may be NULL) is added
 * to this process's environment, overriding keys already there.  An exec
 * failure is reported here, not as an exit status 127. */
int h_process_spawn(char *const argv[], char *const envp_extra[],
                    h_proc **out) H_WARN_UNUSED;
/* Waits up to timeout_ms for the child to exit: 0 with *status the raw wait
 * status (WIFEXITED...), 1 if still running (an h_last_error() is set; the
 * child is left running), -1 on error.  Once reaped, returns 0 and the same
 * status again. */
int h_process_wait(h_proc *p, int timeout_ms, int *status) H_WARN_UNUSED;
/* Sends a signal; a no-op on a child already reaped. */
int h_process_kill(h_proc *p, int sig);
pid_t h_process_pid(const h_proc *p);
/* Everything the child wrote so far, as a string owned by p (valid until the
 * next call on p of the same function or h_process_free). */
const char *h_process_stdout(h_proc *p);
const char *h_process_stderr(h_proc *p);
/* SIGKILL if still running, reap, close the capture files, free. */
void h_process_free(h_proc *p);
/* "exit 0", "exit 3", "killed by SIGKILL" (static buffer). */
const char *h_status_str(int status);

/* ---- the mock broker ------------------------------------------------ */

typedef struct h_broker h_broker;

/*
 * Starts `bloomstage mock-broker --control -b BROKERS -t SPEC...` and reads
 * its bootstrap line (10 s timeout).  topic_specs: NULL-terminated list of
 * "topic:partitions", or NULL.
 */
int h_broker_start(const char *bloomstage_path, int brokers,
                   const char **topic_specs, h_broker **out) H_WARN_UNUSED;
/* "127.0.0.1:port,..." for bootstrap.servers; owned by b. */
const char *h_broker_bootstraps(const h_broker *b);
/* Sends one control command (see `bloomstage mock-broker --help`), e.g.
 * "push-errors Produce 5 NOT_LEADER_FOR_PARTITION", and waits (10 s) for its
 * answer: 0 on "ok", -1 on "error: ..." (then in h_last_error()). */
int h_broker_control(h_broker *b, const char *command) H_WARN_UNUSED;
/* SIGTERM, wait up to 10 s, then SIGKILL; frees b.  0 iff the broker exited
 * with status 0.  NULL is a no-op returning 0. */
int h_broker_stop(h_broker *b);
/* The broker's stderr so far (owned by b). */
const char *h_broker_stderr(h_broker *b);

/* ---- Kafka ---------------------------------------------------------- */

/*
 * A Kafka record.  For h_produce the pointers are the caller's and only read
 * (key NULL = null key, value NULL = null value/tombstone).  Records from
 * h_consume_all own their bytes (see `owned`); key and value are then also
 * NUL-terminated, beyond *_len, so string keys can be compared directly.
 */
typedef struct h_header {
    const char *name;
    const void *value; /* NULL = null header value */
    size_t value_len;
} h_header;

typedef struct h_record {
    const void *key;
    size_t key_len;
    const void *value;
    size_t value_len;
    const h_header *headers;
    size_t n_headers;
    int32_t partition; /* h_produce with H_PARTITION_PER_RECORD: where to */
    int64_t offset;    /* consumed records only */
    int64_t timestamp; /* consumed records only: ms, -1 if none */
    void *owned;       /* h_record_list's allocation; NULL for yours */
} h_record;

/* A record from C strings (NULL key/value stay NULL); partition -1 lets the
 * producer's partitioner pick by key. */
h_record h_rec(const char *key, const char *value);

typedef struct h_record_list {
    h_record *recs;
    size_t n;
    size_t cap;
} h_record_list;

/* Frees the records' bytes and the array; the list is left empty and
 * reusable.  NULL is a no-op. */
void h_record_list_free(h_record_list *l);

/* The count of records in l on partition p. */
size_t h_record_list_count_partition(const h_record_list *l, int32_t p);

/* h_produce's partition argument: >= 0 all records go there;
 * RD_KAFKA_PARTITION_UA (-1) the partitioner picks (by key);
 * H_PARTITION_PER_RECORD each record's own .partition (which may be -1). */
#define H_PARTITION_PER_RECORD (-2)

/*
 * Produces n records to topic and waits (flush) for every delivery report;
 * -1 if any record failed (h_last_error() names the first failure and how
 * many failed).  One producer per call, retrying in order
 * (max.in.flight=1), message.timeout.ms 10 s.
 */
int h_produce(const char *bootstraps, const char *topic, int32_t partition,
              const h_record *recs, size_t n) H_WARN_UNUSED;
/* The same with extra producer settings: a NULL-terminated list of
 * "key=value" applied after the harness's defaults (e.g. "retries=0"). */
int h_produce_conf(const char *bootstraps, const char *topic,
                   int32_t partition, const h_record *recs, size_t n,
                   const char *const *conf_kv) H_WARN_UNUSED;

/*
 * Reads every partition of topic from its low watermark to the high
 * watermark it has when the call starts (a snapshot: records produced later
 * are not waited for), appending to *out in partition order, offset order
 * within a partition.  No group join: assign() with a random group.id,
 * nothing committed.  -1 if the topic does not exist, or if the end is not
 * reached within timeout_ms (the records read so far stay in *out).
 */
int h_consume_all(const char *bootstraps, const char *topic, int timeout_ms,
                  h_record_list *out) H_WARN_UNUSED;

/* The partition count of an existing topic (-1 if it does not exist). */
int h_topic_partitions(const char *bootstraps, const char *topic,
                       int *partitions) H_WARN_UNUSED;

/* Low and high watermarks of one partition. */
int h_watermarks(const char *bootstraps, const char *topic, int32_t partition,
                 int64_t *low, int64_t *high) H_WARN_UNUSED;

/*
 * The committed offsets of group_id for partitions 0..partitions-1 of
 * topic, into offsets[] (RD_KAFKA_OFFSET_INVALID, -1001, where the group has
 * none).  Asked with rd_kafka_committed() by a consumer that never
 * subscribes, so it does not join (or disturb) the group.
 */
int h_committed(const char *bootstraps, const char *group_id,
                const char *topic, int partitions,
                int64_t *offsets) H_WARN_UNUSED;

/*
 * Commits offsets[i] for partition i (0..partitions-1; entries < 0 are
 * skipped) for group_id, synchronously, as a standalone consumer (no join).
 * Seed a group with it before anything joins the group: once any member has
 * joined, the mock (2.0.2) keeps the group forever, even empty, and refuses
 * every standalone commit with UNKNOWN_MEMBER_ID (a real broker accepts
 * them again once the group is empty).
 */
int h_commit(const char *bootstraps, const char *group_id, const char *topic,
             int partitions, const int64_t *offsets) H_WARN_UNUSED;

/*
 * A configuration with the harness's settings for tests against loopback:
 * bootstrap.servers, quiet buffered logging, short socket/metadata
 * timeouts.  For clients a test builds itself; the caller owns it.
 */
rd_kafka_conf_t *h_kafka_conf(const char *bootstraps);

#endif
