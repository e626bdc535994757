/*
 * e2e.c -- bench_e2e: bloomstage end to end against the fastest thing that
 * could stand in its place, on one mock Kafka cluster in one run.  Run it
 * with bench/e2e, which builds it; bench/HISTORY.md explains the output.
 *
 *   bench_e2e [--records N] [--partitions P] [--blocklist N] [--rounds R]
 *             [-X key=value]... [--bloomstage PATH]
 *             [--keep] [--perf DIR] [--key-specs]
 *             [--bootstrap LIST [--broker-pid P] [--streams RUN | --no-streams]]
 *
 * With --bootstrap (bench/e2e --kafka) it runs on a real broker instead:
 * see "On a real broker" at the end of this comment.  With --key-specs
 * it compares bloomstage's key specs instead: see "Key specs" there.
 *
 * What it does, in order:
 *   1. starts ONE `bloomstage mock-broker` child (librdkafka 2.0.2's mock
 *      cluster) with the topics bench-in and, for each round R,
 *      bench-out-KIND-R for KIND pass, passje, stage, noaudit and alo (one per
 *      phase below), P partitions each;
 *   2. loads N records into bench-in: keys user-NNNNNNNNNN, (N+1)/2
 *      distinct ones, each twice (the last once when N is odd), the whole
 *      sequence shuffled, so about half the records are repeats that come
 *      later than their first copy; values are ~40-byte JSON.  A key goes to
 *      partition hash(key) % P (set explicitly), so both copies of a key are
 *      in the same partition, as dedup per partition needs.  Keys whose
 *      number is a multiple of 100 are blocklisted: 1% of the records;
 *   3. writes a 100,000-entry blocklist text file (those keys, then keys that
 *      never occur) that bloomstage builds into a filter at start-up
 *      (blocklist.spam.path pointing at the .txt list);
 *   then, R times (default once):
 *   4. pass-through: a minimal librdkafka consumer (group bench-pass-R,
 *      subscribe, one rd_kafka_consumer_poll per record) -> producer (key
 *      and value, producer settings as bloomstage's recreate_producer():
 *      enable.idempotence=true, linger.ms=5, compression.type=lz4), in this
 *      process (glibc's malloc), bench-in -> bench-out-pass-R;
 *   5. pass-through-je: the very same loop (pass_loop) in a child,
 *      `bench_e2e_je --pass-child ...`: this source linked with jemalloc,
 *      as bloomstage is; group bench-passje-R, bench-in ->
 *      bench-out-passje-R (see "The allocator" below).  Skipped, saying
 *      so, when the tree has no jemalloc (no bench_e2e_je target);
 *   6. bloomstage: `bloomstage run -c CONF [-X ...]` as a child, group
 *      bench-stage-R, dedup.key=key, the blocklist, checkpoint defaults in
 *      the work directory (its file system is printed: on tmpfs the fsyncs
 *      would be free), no rejected.topic, bench-in -> bench-out-stage-R;
 *      then SIGTERM (it must drain and exit 0), and its peak RSS (VmHWM
 *      just before, ru_maxrss after);
 *   7. the same with dedup.audit.rate=0 (the audit sample off; group
 *      bench-noaudit-R, bench-in -> bench-out-noaudit-R), right before or
 *      after 6 (the order alternates by round), for the audit's cost: each
 *      round's rate ratio, their mean and spread;
 *   8. the same with processing.guarantee=at_least_once (group
 *      bench-alo-R, bench-in -> bench-out-alo-R).
 *   The input is read by every phase through its own consumer group.
 *
 * The allocator.  bloomstage links jemalloc: librdkafka frees delivery
 * reports a batch at a time and frees on one thread what another allocated
 * (fetched records), and glibc's malloc spent about a fifth of the stage
 * thread's time on that.  The pass-through is librdkafka too, and pays the
 * same toll in this process on glibc's malloc, so the ratio against it
 * (the target's, as the issue defines it) also credits bloomstage with
 * the allocator.  pass-through-je puts the same loop on jemalloc so the
 * run shows both: bloomstage / pass-through (the target) and
 * bloomstage / pass-through-je (both on jemalloc: bloomstage's own
 * overhead), and pass-through-je / pass-through (the allocator alone).  It
 * runs in a child because a process cannot have both allocators; the
 * header says which malloc each client has (this process: glibc's unless
 * /proc/self/maps shows one preloaded; bench_e2e_je checks that jemalloc
 * really serves its malloc; bloomstage: its --version).  The child prints
 * its counts and its self-timed seconds on one line; this process times it
 * with the observer, as every phase.
 *
 * The first-record lag.  A librdkafka 2.0.2 producer learns the partitions
 * of a topic it has not produced to before only when its 1-second topic
 * scan timer next fires ("refresh unavailable topics"): the first records
 * wait up to 1 s while the consumer keeps consuming and the stage keeps
 * queueing, work a first-output clock would not count, and more of it for
 * the stage (which produces one record per two consumed) than for the
 * pass-through.  Both producers therefore get
 * topic.metadata.refresh.interval.ms=100 (bloomstage through
 * producer.topic.metadata.refresh.interval.ms in its configuration), which
 * makes the periodic refresh, which includes topics still unknown, find
 * the output topic within 0.1 s; the header says so.  (bloomstage could
 * look its output topic up at start-up instead; see the report.)
 *
 * The fetch backoff.  A librdkafka 2.0.2 consumer stops fetching when its
 * queue holds queued.min.messages (with the partition queues forwarded to
 * the consumer queue that is the total) and looks again only when its
 * broker thread wakes, else after a fixed 1000 ms (fetch.queue.backoff.ms
 * only came in 2.2).  bloomstage keeps a small read-ahead and wakes the
 * fetcher when it runs low (stage/kafka/fetch_wake.h); the pass-throughs use the
 * same settings (stage/kafka/client_defaults.h) and the same wake-ups, so the
 * limit they measure is one with the stage's memory bound.
 *
 * Timing.  Every phase is timed by the same observer: a thread that asks
 * the mock for the output topic's high watermarks every 10 ms (one
 * ListOffsets request for all partitions, via rd_kafka_offsets_for_times
 * with RD_KAFKA_OFFSET_END) and notes when the sum first leaves 0 and when
 * it last grew.  A phase's time is first to last output record, so the
 * consumer-group join (~3 s on the mock) and start-up are not counted.
 * The output topics are never consumed: the mock's Fetch returns one
 * message set per partition per request after a linear scan of the log,
 * and a reader would compete with the phase for the 2 cores.  The rate is
 * records in / that time.  The pass-throughs also time themselves (first
 * produce to last delivery report) as a cross-check.  CPU seconds of the
 * client (this process during the pass-through, observer thread and query
 * client included; the bench_e2e_je child, alone, during pass-through-je;
 * the bloomstage process during its phases) and of the mock broker are
 * sampled from /proc at the first and last output record: they show
 * whether the 2 cores were the limit.
 *
 * Counts are checked, not assumed: the input's watermarks must equal what
 * was produced; each pass-through must consume, have delivered and output
 * exactly N (pass-through-je: as its line says); bloomstage exactly
 * the distinct non-blocklisted keys, allowing at most 2 missing (a false
 * positive of the dedup filter or the blocklist, each at 1e-6) and never
 * more; its own "stopped" log line must agree; and every partition of
 * every topic must still start at offset 0 at the end.  That last check
 * matters: the mock keeps at most 5 MiB or 100,000 message sets per
 * partition and drops older data SILENTLY.  P is chosen (or --partitions
 * checked) so that each partition's records, counted uncompressed with an
 * upper bound on the v2 record overhead, stay under 4 MiB (auto: 3.5 MiB,
 * leaving room for batch headers) and under 90,000 records (so even
 * one-record batches cannot reach the message-set cap).  A count that does
 * not match fails the run (exit 1): it is not a number.
 *
 * Processes, the mock broker and the Kafka helpers are the integration
 * tests' support layer (harness/, the library bstestsupport): the
 * mock broker is `bloomstage mock-broker --control` as there, its control
 * channel unused.
 *
 * On a real broker (--bootstrap): no mock, no mock limits (8 partitions
 * unless --partitions); each round R creates bench-in-R and the phases'
 * output topics explicitly (CreateTopics; the broker does not auto-create)
 * and loads the same records into bench-in-R; then pass-through,
 * pass-through-je, bloomstage (exactly_once, at_least_once) and, with
 * --streams, Kafka Streams (bench/streams/run, exactly_once_v2 and
 * at_least_once, --distinct = the distinct keys) on it.  The interval is
 * the one bench/streams/run measures, for everyone: first input record
 * consumed (pass-throughs: their own first poll with a record, the child
 * printing it on the same monotonic clock; bloomstage: the first poll of
 * its /metrics, every POLL_MS, with records_in > 0) to the last output
 * record visible read_committed (no transactions in the pass-throughs'
 * or bloomstage's output, so the high watermark, polled as above;
 * Streams: its read_committed watcher).  real_run prints per contestant
 * best/median/worst and spread, ratios against pass-through-je and the
 * Streams targets.
 *
 * Key specs (--key-specs, bench/e2e --key-specs; mock only, 3 rounds
 * unless --rounds): what reading the key from a record's value costs
 * against taking the record key, bloomstage alone (no pass-through).  One
 * mock broker and one schema registry (scripts/registry, Apicurio, via
 * harness/registry.h; an Avro and a Protobuf schema of Event {id, email,
 * n} registered).  The data set is the one above (same ids, same repeats,
 * same 1% blocklisted), each record keyed user-NNNNNNNNNN and its value
 * that Event (id = the key, n = the record's index) in one form per input
 * topic: bench-in-key and bench-in-json as JSON, bench-in-avro as Avro
 * and bench-in-proto as Protobuf, both in Confluent's wire format.
 * Phases, each bloomstage exactly_once as in 6, into
 * bench-out-KIND-R: key (dedup.key=key), json (json:/id), avro
 * (avro:/id), proto (protobuf:/id), each with the key blocklist looked up
 * by the same spec; then on bench-in-json with dedup.key=json:/id and the
 * blocklist on json:/email: exact (blocklist.spam.match=exact, the
 * blocklisted ids' addresses listed) and domain (match=domain,
 * spam.example listed).  A blocklisted id's address is at spam.example or
 * one to three labels below it, any other's at a look-alike
 * (notspam.example, mx.spam.example.org) or elsewhere, 2 to 5 labels, so
 * both block exactly the blocklisted ids; both lists are padded to
 * --blocklist entries.  The phases rotate by one each round.  Printed per
 * spec and round: the rate, the stage's CPU time a record in its timed
 * window, key's CPU time a record over the spec's (what the rates' ratio
 * would be with the stage CPU-bound and alone: steadier than the rates on
 * a shared machine), the ratio to key's rate in the same round (target
 * >= 0.9), each with median and range; and domain against exact: the
 * difference in nanoseconds a record (wall, from the rates, and CPU), the
 * cost of the domain's parse and its lookups.  Every phase's output is
 * checked as in 6; the domain phase may miss up to 2 + 1e-5 x the
 * distinct ids (each of a record's names is a lookup that can be a false
 * positive).
 *
 * Exit: 0 when every phase ran and every count matched (a missed 0.9x
 * target included: this is a benchmark), 1 on a failure, 2 on usage.
 */
#include "support.h"
#include "bench_kafka.h"
#include "kafka/client_defaults.h"
#include "kafka/fetch_wake.h"

#include <librdkafka/rdkafka.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef BENCH_E2E_JE
#include <jemalloc/jemalloc.h> /* bench_e2e_je: mallctl, see this_malloc */
#endif

#ifndef BENCH_BLOOMSTAGE_PATH
#define BENCH_BLOOMSTAGE_PATH "" /* e2e.cmake sets $<TARGET_FILE:bloomstage> */
#endif
#ifndef BENCH_E2E_JE_PATH
/* e2e.cmake sets $<TARGET_FILE:bench_e2e_je> when the tree has jemalloc;
 * "" here: no pass-through-je phase. */
#define BENCH_E2E_JE_PATH ""
#endif

#define T_IN "bench-in" /* outputs and groups: bench-out-KIND-R and
                           bench-KIND-R for round R, KIND pass, passje,
                           stage, noaudit or alo */

#define TARGET_RATIO 0.9
#define MAX_MISSING 2 /* false positives allowed in bloomstage's output */
#define POLL_MS 10    /* watermark poll interval */
#define STALL_S 60.0  /* no progress for this long: the phase failed */
#define SETTLE_S 3.0  /* output short of expected and still: it is done */
/* Both producers: see "The first-record lag" above. */
#define METADATA_REFRESH_MS "100"

/* The mock's limits (librdkafka 2.0.2 rdkafka_mock.c): 5 MiB or 100,000
 * message sets per partition.  Ours, below them: */
#define PART_BYTES_MAX (4u << 20)             /* hard, with --partitions */
#define PART_BYTES_AUTO (7u << 19)            /* 3.5 MiB, choosing P */
#define PART_RECORDS_MAX 90000
/* Upper bound on a v2 record's bytes besides key, value and headers:
 * length (2), attributes (1), timestamp delta (5), offset delta (3), key
 * and value lengths (1 each), header count (1). */
#define REC_OVERHEAD 14
/* The bloomstage-src header: name length, "bloomstage-src", value length,
 * "bench-in:PPPP:OOOOOOO" (at most). */
#define SRC_HDR_BYTES (1 + 14 + 1 + 24)

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    interrupted = sig;
}

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("bench_e2e: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return -1;
}

/* -- child processes ------------------------------------------------------ */

/* Children are the support layer's h_proc: stdin from /dev/null, killed if
 * this process dies (so an interrupted benchmark leaves no broker or stage
 * behind), an exec failure reported by the spawn. */

/* argv with stderr, and stdout unless piped, to log_path (kept). */
static int child_start(char *const argv[], bool pipe_stdout,
                       const char *log_path, h_proc **c)
{
    h_spawn_opts o = {.log_path = log_path, .pipe_stdout = pipe_stdout};
    if (h_process_spawn_opts(argv, &o, c))
        return fail("%s: %s", argv[0], h_last_error());
    return 0;
}

/* SIGTERM, then up to timeout_s for it to exit (SIGKILL after that), then
 * frees it.  Returns the wait status (-1 if it had to be killed); ru gets
 * its resource usage. */
static int child_stop(h_proc *c, double timeout_s, struct rusage *ru)
{
    int status = -1;
    if (h_process_terminate(c, (int)(timeout_s * 1000), &status) != 0)
        status = -1;
    if (ru)
        *ru = *h_process_rusage(c);
    h_process_free(c);
    return status;
}

/* Waits up to timeout_s for a child to exit by itself, then frees it;
 * returns its wait status, or -1 if it had to be stopped (child_stop). */
static int child_wait(h_proc *c, double timeout_s)
{
    int status = -1;
    if (h_process_wait(c, (int)(timeout_s * 1000), &status) != 0) {
        child_stop(c, 5, NULL);
        return -1;
    }
    h_process_free(c);
    return status;
}

/* Runs argv to its end and returns the first line of its stdout in line
 * ("" if none); its stderr goes to log_path.  -1 unless it printed a line
 * and exited 0. */
static int child_first_line(char *const argv[], const char *log_path,
                            char *line, size_t size)
{
    h_proc *c = NULL;
    line[0] = '\0';
    if (child_start(argv, true, log_path, &c))
        return -1;
    int rc = h_process_read_line(c, 10000, line, size);
    if (rc)
        line[0] = '\0';
    int status = child_wait(c, 10);
    if (status < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        rc = -1;
    return rc;
}

/* Prints the tail of a log file to stderr, to say why something failed. */
static void print_tail(const char *path, long bytes)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (fseek(f, -bytes, SEEK_END) != 0)
        rewind(f);
    char buf[4096];
    size_t n;
    fprintf(stderr, "--- end of %s ---\n", path);
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        fwrite(buf, 1, n, stderr);
    fprintf(stderr, "---\n");
    fclose(f);
}

/* -- the data set --------------------------------------------------------- */

typedef struct dataset {
    uint64_t n;          /* records */
    uint32_t distinct;   /* keys */
    uint32_t *order;     /* key number of each record, n of them */
    int32_t nparts;
    uint64_t *part_records;
    uint64_t blocked_keys, blocked_records;
    uint64_t expect_out, expect_dups; /* bloomstage */
    uint64_t blocklist_entries;
    uint64_t input_bytes;             /* uncompressed, key + value */
    uint64_t max_part_bytes;          /* the estimate, largest partition */
    uint64_t max_part_records;
    uint32_t value_extra;             /* --key-specs: bytes a value holds
                                         past VALUE_FMT's, at most */
} dataset;

#define KEY_FMT "user-%010" PRIu32
#define VALUE_FMT "{\"seq\":%010" PRIu64 ",\"type\":\"signup\",\"r\":%d}"

static bool is_blocked(uint32_t key) { return key % 100 == 0; }

static int32_t partition_of(uint32_t key, int32_t nparts)
{
    return (int32_t)(h_mix64(key ^ UINT64_C(0xb100b100)) %
                     (uint64_t)nparts);
}

static int format_key(uint32_t key, char *buf, size_t size)
{
    return snprintf(buf, size, KEY_FMT, key);
}

static int format_value(uint64_t i, int copy, char *buf, size_t size)
{
    return snprintf(buf, size, VALUE_FMT, i, copy);
}

/* -- --key-specs: the same records in four forms -------------------------- */

/* The form of an input topic's values: FORM_PLAIN is VALUE_FMT (the
 * default run); the others carry one Event {id, email, n}, n the record's
 * index, as JSON, Avro or Protobuf in Confluent's wire format (the schemas
 * below, registered at start).  Every form keeps the record key
 * user-NNNNNNNNNN: producers key by id, so the copies of an id share a
 * partition. */
enum { FORM_PLAIN, FORM_JSON, FORM_AVRO, FORM_PROTO };

static const char KS_AVRO_SCHEMA[] =
    "{\"type\":\"record\",\"name\":\"Event\",\"namespace\":\"bench\","
    "\"fields\":[{\"name\":\"id\",\"type\":\"string\"},"
    "{\"name\":\"email\",\"type\":[\"null\",\"string\"]},"
    "{\"name\":\"n\",\"type\":\"long\"}]}";
/* One message: records name it by the message-index list [0], written
 * as the single byte 0, as Confluent's serializer does. */
static const char KS_PROTO_SCHEMA[] =
    "syntax = \"proto3\";\npackage bench;\n"
    "message Event { string id = 1; string email = 2; int64 n = 3; }\n";

/* An id's address: a blocklisted id's at spam.example or one to three
 * labels below it (by id / 100 % 4), any other's at a look-alike or an
 * unrelated domain of 2 to 5 labels (by id % 4), so a domain match looks
 * up 2 to 5 names a record, 3.5 on average. */
static const char *const ks_blocked_hosts[4] = {
    "spam.example", "mx.spam.example", "a.mx.spam.example",
    "b.a.mx.spam.example"};
static const char *const ks_other_hosts[4] = {
    "notspam.example", "mx.spam.example.org", "a.mx.mail.example",
    "b.a.mx.mail.example"};
#define KS_LISTED_DOMAIN "spam.example"
#define KS_MAX_LABELS 5

static int format_email(uint32_t key, char *buf, size_t size)
{
    const char *host = is_blocked(key) ? ks_blocked_hosts[key / 100 % 4]
                                       : ks_other_hosts[key % 4];
    return snprintf(buf, size, KEY_FMT "@%s", key, host);
}

/* Record i's value (key number key) in form f, schema id `schema` for the
 * framed forms, at out (room for 160 bytes); its length. */
static size_t encode_value(int f, int32_t schema, uint32_t key, uint64_t i,
                           int copy, uint8_t *out)
{
    if (f == FORM_PLAIN)
        return (size_t)format_value(i, copy, (char *)out, 160);
    char id[32], email[64];
    int il = format_key(key, id, sizeof(id));
    int el = format_email(key, email, sizeof(email));
    if (f == FORM_JSON)
        return (size_t)snprintf((char *)out, 160,
                                "{\"id\":\"%s\",\"email\":\"%s\",\"n\":%"
                                PRIu64 "}", id, email, i);
    size_t o = h_frame(out, schema);
    if (f == FORM_AVRO) {
        o += h_avro_string(out + o, id);
        o += h_avro_long(out + o, 1); /* the union's string branch */
        o += h_avro_string(out + o, email);
        return o + h_avro_long(out + o, (int64_t)i);
    }
    out[o++] = 0x00; /* message indexes [0] */
    o += h_pb_bytes(out + o, 1, id, (size_t)il);
    o += h_pb_bytes(out + o, 2, email, (size_t)el);
    out[o++] = 3 << 3; /* field 3, varint */
    return o + h_pb_varint(out + o, i);
}

/* The JSON form's bytes past VALUE_FMT's, the largest of the forms. */
#define KS_VALUE_EXTRA 64

/* Per-partition record counts and the bytes estimate for P partitions.  The
 * estimate is the larger of the input / pass-through output (every record)
 * and bloomstage's output (the first copies of unblocked keys, each with
 * the bloomstage-src header). */
static void dataset_layout(dataset *d, int32_t nparts)
{
    free(d->part_records);
    d->nparts = nparts;
    d->part_records = calloc((size_t)nparts, sizeof(uint64_t));
    uint64_t *bytes = calloc((size_t)nparts, sizeof(uint64_t));
    uint64_t *out_bytes = calloc((size_t)nparts, sizeof(uint64_t));
    uint8_t *seen = calloc(d->distinct, 1);
    if (!d->part_records || !bytes || !out_bytes || !seen) {
        fprintf(stderr, "bench_e2e: out of memory\n");
        exit(1);
    }
    char k[64], v[128];
    d->input_bytes = 0;
    for (uint64_t i = 0; i < d->n; i++) {
        uint32_t key = d->order[i];
        int32_t p = partition_of(key, nparts);
        uint64_t rec = (uint64_t)format_key(key, k, sizeof(k)) +
                       (uint64_t)format_value(i, 2, v, sizeof(v)) +
                       d->value_extra + REC_OVERHEAD;
        d->part_records[p]++;
        bytes[p] += rec;
        d->input_bytes += rec - REC_OVERHEAD;
        if (!seen[key]++ && !is_blocked(key))
            out_bytes[p] += rec + SRC_HDR_BYTES;
    }
    d->max_part_bytes = d->max_part_records = 0;
    for (int32_t p = 0; p < nparts; p++) {
        uint64_t b = bytes[p] > out_bytes[p] ? bytes[p] : out_bytes[p];
        if (b > d->max_part_bytes)
            d->max_part_bytes = b;
        if (d->part_records[p] > d->max_part_records)
            d->max_part_records = d->part_records[p];
    }
    free(bytes);
    free(out_bytes);
    free(seen);
}

static int dataset_new(dataset *d, uint64_t n, int32_t want_parts,
                       uint64_t blocklist_entries, bool real,
                       uint32_t value_extra)
{
    memset(d, 0, sizeof(*d));
    d->value_extra = value_extra;
    d->n = n;
    d->distinct = (uint32_t)((n + 1) / 2);
    d->blocklist_entries = blocklist_entries;
    d->order = malloc(n * sizeof(uint32_t));
    if (!d->order)
        return fail("out of memory");
    for (uint64_t i = 0; i < n; i++)
        d->order[i] = (uint32_t)(i < d->distinct ? i : i - d->distinct);
    uint64_t s = 42;
    for (uint64_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
        s = h_mix64(s);
        uint64_t j = s % (i + 1);
        uint32_t t = d->order[i];
        d->order[i] = d->order[j];
        d->order[j] = t;
    }
    for (uint32_t key = 0; key < d->distinct; key++)
        d->blocked_keys += is_blocked(key);
    for (uint64_t i = 0; i < n; i++)
        d->blocked_records += is_blocked(d->order[i]);
    d->expect_out = d->distinct - d->blocked_keys;
    d->expect_dups = n - d->expect_out - d->blocked_records;
    if (d->blocked_keys > blocklist_entries)
        return fail("%" PRIu64 " blocklisted keys occur in the input, more "
                    "than --blocklist %" PRIu64, d->blocked_keys,
                    blocklist_entries);

    if (want_parts > 0) {
        dataset_layout(d, want_parts);
        if (!real && (d->max_part_bytes > PART_BYTES_MAX ||
                      d->max_part_records > PART_RECORDS_MAX))
            return fail("--partitions %d: a partition would hold %" PRIu64
                        " records, %.2f MiB uncompressed; the mock drops "
                        "data past 5 MiB or 100000 message sets a partition "
                        "(keep under %.1f MiB and %d records: more "
                        "partitions)", (int)want_parts, d->max_part_records,
                        (double)d->max_part_bytes / 1048576.0,
                        (double)PART_BYTES_MAX / 1048576.0, PART_RECORDS_MAX);
        return 0;
    }
    for (int32_t p = 16; p <= 4096; p += 8) {
        dataset_layout(d, p);
        if (d->max_part_bytes <= PART_BYTES_AUTO &&
            d->max_part_records <= PART_RECORDS_MAX)
            return 0;
    }
    return fail("%" PRIu64 " records do not fit the mock broker in 4096 "
                "partitions", n);
}

static void dataset_free(dataset *d)
{
    free(d->order);
    free(d->part_records);
}

/* The blocklist: the blocked keys that occur, then keys past the input's
 * (user-NNN numbers >= distinct) up to the requested size. */
static int write_blocklist(const dataset *d, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return fail("%s: %s", path, strerror(errno));
    fprintf(f, "# bench_e2e blocklist: %" PRIu64 " entries\n",
            d->blocklist_entries);
    uint64_t written = 0;
    char k[64];
    for (uint32_t key = 0; key < d->distinct; key++)
        if (is_blocked(key)) {
            format_key(key, k, sizeof(k));
            fprintf(f, "%s\n", k);
            written++;
        }
    for (uint32_t key = d->distinct; written < d->blocklist_entries; key++) {
        format_key(key, k, sizeof(k));
        fprintf(f, "%s\n", k);
        written++;
    }
    if (fclose(f) != 0)
        return fail("%s: %s", path, strerror(errno));
    return 0;
}

/* --key-specs: the lists of the address runs, as large as the key list,
 * filled with names that never occur.  by_domain: the listed domain;
 * else the blocklisted ids' addresses themselves.  Both block the same
 * records. */
static int write_address_list(const dataset *d, const char *path,
                              bool by_domain)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return fail("%s: %s", path, strerror(errno));
    fprintf(f, "# bench_e2e --key-specs: %s, %" PRIu64 " entries\n",
            by_domain ? "domains" : "addresses", d->blocklist_entries);
    uint64_t written = 0;
    char e[96];
    if (by_domain) {
        fprintf(f, "%s\n", KS_LISTED_DOMAIN);
        written++;
    }
    for (uint32_t key = 0; !by_domain && key < d->distinct; key++)
        if (is_blocked(key)) {
            format_email(key, e, sizeof(e));
            fprintf(f, "%s\n", e);
            written++;
        }
    for (uint64_t j = 0; written < d->blocklist_entries; j++, written++)
        fprintf(f, by_domain ? "f%08" PRIu64 ".invalid\n"
                             : "user-%08" PRIu64 "@f.invalid\n", j);
    if (fclose(f) != 0)
        return fail("%s: %s", path, strerror(errno));
    return 0;
}

/* -- Kafka helpers -------------------------------------------------------- */

/* The sum of the high watermarks of partitions 0..nparts-1 of topic (one
 * ListOffsets request, h_offsets). */
static int sum_high(rd_kafka_t *rk, const char *topic, int32_t nparts,
                    uint64_t *sum)
{
    int64_t hw[nparts];
    if (h_offsets(rk, topic, nparts, RD_KAFKA_OFFSET_END, hw, 2000))
        return -1;
    *sum = 0;
    for (int32_t p = 0; p < nparts; p++)
        *sum += (uint64_t)hw[p];
    return 0;
}

/* Every partition of topic still starts at 0: the mock dropped nothing. */
static int check_nothing_dropped(rd_kafka_t *rk, const char *topic,
                                 int32_t nparts)
{
    if (h_check_nothing_dropped(rk, topic, nparts))
        return fail("%s; run with more --partitions", h_last_error());
    return 0;
}

/* A client for metadata and offset queries only. */
static rd_kafka_t *query_client(const char *bootstrap)
{
    rd_kafka_t *rk = h_query_client(bk_secured(h_conf_pairs(
        NULL, "bootstrap.servers", bootstrap, "client.id", "bench-e2e-query",
        NULL)));
    if (!rk)
        fail("cannot create a client: %s", h_last_error());
    return rk;
}

/* -- the observer --------------------------------------------------------- */

/* Polls the sum of an output topic's high watermarks every POLL_MS until it
 * reaches `target` or `stop` is set; notes the first and the last time it
 * changed, with CPU samples of the client and the mock at those moments. */
typedef struct observer {
    rd_kafka_t *rk;
    const char *topic;
    int32_t nparts;
    uint64_t target;
    pid_t client, mock;
    atomic_bool stop;
    pthread_t thread;
    /* Real broker, bloomstage's phases: its log, for the /metrics port;
     * the observer polls bloomstage_records_in_total until it leaves 0
     * (t_start).  NULL otherwise. */
    const char *stage_log;
    unsigned port;

    pthread_mutex_t lock; /* guards what follows */
    uint64_t count, polls, errors;
    double t_first, t_last; /* 0 until seen */
    double t_start;         /* stage_log: first record consumed; 0 until */
    double cpu_client_first, cpu_client_last, cpu_mock_first, cpu_mock_last;
    bool done;
} observer;

static void *observer_main(void *arg)
{
    observer *o = arg;
    uint64_t last = 0;
    bool started = o->stage_log == NULL;
    while (!atomic_load(&o->stop)) {
        if (!started) {
            if (!o->port)
                o->port = bk_metrics_port(o->stage_log);
            /* The request's start: the count left 0 between the previous
             * poll (<= POLL_MS earlier) and the answer. */
            double t = h_now_s();
            double in = o->port ? bk_metric(o->port,
                                            "bloomstage_records_in_total")
                                : -1;
            if (in > 0) {
                started = true;
                pthread_mutex_lock(&o->lock);
                o->t_start = t;
                pthread_mutex_unlock(&o->lock);
            }
        }
        uint64_t sum;
        int rc = sum_high(o->rk, o->topic, o->nparts, &sum);
        double t = h_now_s();
        pthread_mutex_lock(&o->lock);
        o->polls++;
        if (rc) {
            o->errors++;
        } else if (sum != last) {
            double cc = h_proc_cpu_s(o->client), cm = h_proc_cpu_s(o->mock);
            if (last == 0) {
                o->t_first = t;
                o->cpu_client_first = cc;
                o->cpu_mock_first = cm;
            }
            o->t_last = t;
            o->cpu_client_last = cc;
            o->cpu_mock_last = cm;
            o->count = last = sum;
        }
        bool done = o->done = last >= o->target;
        pthread_mutex_unlock(&o->lock);
        if (done)
            break;
        h_sleep_ms(POLL_MS);
    }
    return NULL;
}

static int observer_start(observer *o, rd_kafka_t *rk, const char *topic,
                          int32_t nparts, uint64_t target, pid_t client,
                          pid_t mock, const char *stage_log)
{
    memset(o, 0, sizeof(*o));
    o->rk = rk;
    o->topic = topic;
    o->nparts = nparts;
    o->target = target;
    o->client = client;
    o->mock = mock;
    o->stage_log = stage_log;
    atomic_init(&o->stop, false);
    pthread_mutex_init(&o->lock, NULL);
    if (pthread_create(&o->thread, NULL, observer_main, o) != 0)
        return fail("cannot start a thread");
    return 0;
}

static void observer_get(observer *o, uint64_t *count, double *t_last,
                         bool *done)
{
    pthread_mutex_lock(&o->lock);
    *count = o->count;
    *t_last = o->t_last;
    *done = o->done;
    pthread_mutex_unlock(&o->lock);
}

static void observer_stop(observer *o)
{
    atomic_store(&o->stop, true);
    pthread_join(o->thread, NULL);
    pthread_mutex_destroy(&o->lock);
}

/* Waits until the observer has seen `target` records, or (when `settle`) the
 * count has stayed put for SETTLE_S within MAX_MISSING of it; fails when
 * nothing moves for STALL_S or `alive` says the client died.  on_first, if
 * not NULL, is called once when the first output record is seen. */
static int observer_wait(observer *o, bool settle, bool (*alive)(void *),
                         void *arg, void (*on_first)(void *), void *first_arg,
                         const char *what)
{
    uint64_t last = UINT64_MAX;
    double moved = h_now_s();
    for (;;) {
        uint64_t count;
        double t_last;
        bool done;
        observer_get(o, &count, &t_last, &done);
        double t = h_now_s();
        if (done)
            return 0;
        if (count != last) {
            if (count > 0 && on_first) {
                on_first(first_arg);
                on_first = NULL;
            }
            last = count;
            moved = t;
        }
        if (settle && count > 0 && count + MAX_MISSING >= o->target &&
            t - moved >= SETTLE_S)
            return 0;
        if (t - moved >= STALL_S)
            return fail("%s: output stuck at %" PRIu64 " of %" PRIu64
                        " records for %.0f s", what, count, o->target,
                        STALL_S);
        if (alive && !alive(arg))
            return fail("%s: exited early with %" PRIu64 " of %" PRIu64
                        " records out", what, count, o->target);
        if (interrupted)
            return fail("interrupted");
        h_sleep_ms(50);
    }
}

/* -- loading the input ---------------------------------------------------- */

/* Loads the data set into topic `in`, values in form `form` (schema id
 * `schema` for the framed ones). */
static int load_input(const dataset *d, const char *bootstrap,
                      const char *in, int form, int32_t schema,
                      rd_kafka_t *q, double *seconds)
{
    /* Big lz4 batches: the input is read fast (the mock serves one batch
     * per partition per fetch) and takes little of the mock's 5 MiB. */
    rd_kafka_conf_t *conf = bk_secured(h_conf_pairs(
        NULL, "bootstrap.servers", bootstrap, "client.id", "bench-e2e-load",
        "enable.idempotence", "true", "compression.type", "lz4", "linger.ms",
        "100", "batch.num.messages", "10000",
        "queue.buffering.max.messages", "1000000", NULL));
    h_producer *lp = NULL;
    if (h_producer_new(conf, 0, &lp))
        return fail("cannot create the loader: %s", h_last_error());
    uint8_t *seen = calloc(d->distinct, 1);
    if (!seen) {
        h_producer_abandon(lp);
        return fail("out of memory");
    }
    double t0 = h_now_s();
    char k[64];
    uint8_t v[160];
    int rc = 0;
    for (uint64_t i = 0; i < d->n && !interrupted; i++) {
        uint32_t key = d->order[i];
        int kl = format_key(key, k, sizeof(k));
        /* r: 1 for a key's first copy, 2 for its repeat. */
        size_t vl = encode_value(form, schema, key, i, ++seen[key], v);
        h_record r = {.key = k, .key_len = (size_t)kl, .value = v,
                      .value_len = vl};
        if (h_producer_send(lp, in, partition_of(key, d->nparts), &r)) {
            rc = fail("loading %s: %s", in, h_last_error());
            break;
        }
        h_producer_poll(lp);
    }
    if (rc || interrupted)
        h_producer_abandon(lp);
    else if (h_producer_close(lp, in, 120000))
        rc = fail("loading %s: %s", in, h_last_error());
    *seconds = h_now_s() - t0;
    free(seen);
    if (rc || interrupted)
        return -1;
    /* What is there is what was produced, partition by partition. */
    int64_t hw[d->nparts];
    if (h_offsets(q, in, d->nparts, RD_KAFKA_OFFSET_END, hw, 5000))
        return fail("%s: cannot read the high watermarks", in);
    for (int32_t p = 0; p < d->nparts; p++)
        if ((uint64_t)hw[p] != d->part_records[p])
            return fail("%s [%d] holds %" PRId64 " records, %" PRIu64
                        " were produced", in, (int)p, hw[p],
                        d->part_records[p]);
    return check_nothing_dropped(q, in, d->nparts);
}

/* -- bloomstage's log ----------------------------------------------------- */

typedef struct stage_stats {
    bool found;
    unsigned long long in, out, dups, blocked, missing;
    /* wall-clock times from the log's ts= fields; 0 when not found */
    double t_started, t_first_assigned, t_last_assigned;
    int assigned;
} stage_stats;

/* -- the run's context ---------------------------------------------------- */

typedef struct bench {
    dataset d;
    const char *bloomstage;
    char dir[512];
    char bootstrap[512];
    pid_t mock;
    rd_kafka_t *q;          /* offset queries */
    const char *perf_dir;   /* NULL: no profiles */
    char **xs;              /* -X settings passed on to bloomstage run */
    int nx;
    const char *je;         /* bench_e2e_je; NULL: no pass-through-je */
    /* --bootstrap: a real broker (see "On a real broker" above) */
    bool real;
    char in_topic[128];     /* this round's input: bench-in (mock), or
                               bench-in-R (real broker) */
    const char *streams;    /* bench/streams/run; NULL: no Streams phases */
    /* --client-config: every client's extra settings (bk_client_kv), the
     * file passed on to the pass-through-je child; NULL: none */
    const char *client_config;
    /* --key-specs: the registry's base URL for schema.registry.url; ""
     * when there is none */
    char registry_url[512];
} bench;

/* Output topic and group names of a phase in a round. */
static void round_names(const char *kind, int round, char *topic,
                        size_t tsize, char *group, size_t gsize)
{
    snprintf(topic, tsize, "bench-out-%s-%d", kind, round);
    snprintf(group, gsize, "bench-%s-%d", kind, round);
}

/* --perf: `perf record -g -p PID` for the length of a phase (*pc: NULL
 * while there is none). */
static int perf_start(const bench *b, pid_t pid, const char *name,
                      h_proc **pc)
{
    *pc = NULL;
    if (!b->perf_dir)
        return 0;
    char pidstr[32], out[700], log[700];
    snprintf(pidstr, sizeof(pidstr), "%d", (int)pid);
    snprintf(out, sizeof(out), "%s/%s.perf.data", b->perf_dir, name);
    snprintf(log, sizeof(log), "%s/%s.perf.log", b->perf_dir, name);
    /* DWARF stacks: librdkafka and libc have no frame pointers. */
    char *argv[] = {"perf", "record", "-F", "499", "--call-graph",
                    "dwarf,16384", "-p", pidstr, "-o", out, NULL};
    return child_start(argv, false, log, pc);
}

/* Profiles cover the timed window only: perf attaches when the phase's
 * first output record is seen (it takes a few ms to attach). */
typedef struct perf_hook {
    const bench *b;
    pid_t pid;
    const char *name;
    h_proc **pc;
} perf_hook;

static void perf_hook_fire(void *arg)
{
    perf_hook *h = arg;
    if (perf_start(h->b, h->pid, h->name, h->pc))
        fprintf(stderr, "bench_e2e: perf did not start\n");
}

static void perf_stop(h_proc **pc)
{
    if (!*pc)
        return;
    h_process_kill(*pc, SIGINT); /* perf writes its file on SIGINT */
    int st;
    if (h_process_wait(*pc, 60000, &st) == 0)
        h_process_free(*pc);
    else
        child_stop(*pc, 5, NULL); /* or kills it if still there */
    *pc = NULL;
}

/* -- phase 1: the pass-through -------------------------------------------- */

typedef struct pass_state {
    uint64_t expect, delivered, failed;
    double t_last_dr;
    char first_error[256];
} pass_state;

static void pass_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *op)
{
    (void)rk;
    pass_state *ps = op;
    if (m->err) {
        if (ps->failed++ == 0)
            snprintf(ps->first_error, sizeof(ps->first_error), "%s",
                     rd_kafka_err2str(m->err));
        return;
    }
    if (++ps->delivered == ps->expect) /* the clock once, not per record */
        ps->t_last_dr = h_now_s();
}

typedef struct result {
    const char *name;         /* NULL: the phase did not run */
    uint64_t in, out;
    double t_first, t_last;   /* first and last output record */
    double t_start;           /* real broker: first record consumed (the
                                 interval's start); 0: t_first is */
    double cpu_client, cpu_mock;
    double self_timed;        /* pass-throughs: first produce to last DR */
    long hwm_kib, maxrss_kib; /* bloomstage */
    double startup_s;         /* bloomstage: spawn to first output */
    double cpu_total;         /* bloomstage: whole life */
    stage_stats st;           /* bloomstage: its "stopped" line */
    double wall_spawn, wall_first_out;
} result;

static void result_from(result *r, observer *o)
{
    r->out = o->count;
    r->t_first = o->t_first;
    r->t_last = o->t_last;
    if (o->t_start > 0)
        r->t_start = o->t_start;
    r->cpu_client = o->cpu_client_last - o->cpu_client_first;
    r->cpu_mock = o->cpu_mock_last - o->cpu_mock_first;
}

static double secs(const result *r)
{
    return r->t_last - (r->t_start > 0 ? r->t_start : r->t_first);
}
static double rate(const result *r)
{
    return secs(r) > 0 ? (double)r->in / secs(r) : 0;
}

/* The pass-through itself, one function for both of its phases: in this
 * process (run_passthrough) and in a bench_e2e_je child (--pass-child, for
 * run_passthrough_je).  Creates the producer and the consumer (group
 * `group`, subscribed to `input`), moves n records to `topic`, flushes, and
 * counts what was consumed and delivered; the clients are closed before it
 * returns.  Hooks, each NULL for none: every_1k is called every 1024
 * records consumed (the in-process phase attaches perf from there);
 * flushed after a clean flush, before the clients close, and its return
 * is the loop's (the in-process phase waits for its observer there). */
typedef struct pass_run {
    const char *what; /* the phase, for messages */
    const char *bootstrap, *input, *topic, *group;
    uint64_t n;
    void (*every_1k)(void *arg);
    int (*flushed)(void *arg);
    void *arg;
    /* out */
    uint64_t consumed, delivered, failed;
    double self_timed; /* first produce to last delivery report */
    double t_first_in; /* h_now_s() at the first record consumed */
} pass_run;

/* The pass-through's two clients and its consumer's wake-ups. */
typedef struct pass_clients {
    rd_kafka_t *prod, *cons;
    bs_fetch_wake *wake;
} pass_clients;

/* Both clients closed, the consumer leaving its group first; what
 * pass_open did not make is NULL. */
static void pass_close(pass_clients *pc)
{
    bs_fetch_wake_destroy(pc->wake);
    if (pc->cons) {
        rd_kafka_consumer_close(pc->cons);
        rd_kafka_destroy(pc->cons);
    }
    if (pc->prod)
        rd_kafka_destroy(pc->prod);
}

/* The producer, its delivery reports counted in ps, and the consumer,
 * subscribed to the input: 0, or -1 with the message and nothing left
 * open. */
static int pass_open(const pass_run *pr, pass_state *ps, pass_clients *pc)
{
    char err[512];
    memset(pc, 0, sizeof(*pc));
    /* As bloomstage's producer (clients.c): idempotent, its tuning; the
     * refresh interval as in the stage's config. */
    rd_kafka_conf_t *pconf = bk_secured(h_conf_pairs(
        NULL, "bootstrap.servers", pr->bootstrap, "client.id", "bench-pass",
        "enable.idempotence", "true", BS_PRODUCER_TUNING,
        "topic.metadata.refresh.interval.ms", METADATA_REFRESH_MS, NULL));
    rd_kafka_conf_set_dr_msg_cb(pconf, pass_dr);
    rd_kafka_conf_set_opaque(pconf, ps);
    pc->prod = rd_kafka_new(RD_KAFKA_PRODUCER, pconf, err, sizeof(err));
    if (!pc->prod) {
        rd_kafka_conf_destroy(pconf);
        return fail("%s producer: %s", pr->what, err);
    }
    rd_kafka_conf_t *cconf = bk_secured(h_conf_pairs(
        NULL, "bootstrap.servers", pr->bootstrap, "client.id", "bench-pass",
        "group.id", pr->group,
        "auto.offset.reset", "earliest", "enable.auto.commit", "false",
        BS_CONSUMER_TUNING, NULL));
    pc->cons = rd_kafka_new(RD_KAFKA_CONSUMER, cconf, err, sizeof(err));
    if (!pc->cons) {
        rd_kafka_conf_destroy(cconf);
        pass_close(pc);
        return fail("%s consumer: %s", pr->what, err);
    }
    rd_kafka_poll_set_consumer(pc->cons);
    /* As the stage's consumer (stage.c): woken when its read-ahead runs
     * low. */
    pc->wake = bs_fetch_wake_new(pc->cons, NULL, err, sizeof(err));
    rd_kafka_topic_partition_list_t *sub =
        rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(sub, pr->input, RD_KAFKA_PARTITION_UA);
    rd_kafka_resp_err_t e = rd_kafka_subscribe(pc->cons, sub);
    rd_kafka_topic_partition_list_destroy(sub);
    int rc = 0;
    if (!pc->wake)
        rc = fail("%s: %s", pr->what, err);
    else if (e)
        rc = fail("%s: subscribe: %s", pr->what, rd_kafka_err2str(e));
    if (rc)
        pass_close(pc);
    return rc;
}

/* Where the loop is: records consumed, and when it first produced. */
typedef struct pass_progress {
    uint64_t consumed;
    double t_first_produce;
} pass_progress;

/* One polled message: a record is produced to the output (retried while
 * the producer's queue is full) and counted; 0, or -1 with the message. */
static int pass_record(const pass_run *pr, const pass_clients *pc,
                       const rd_kafka_message_t *m, pass_progress *pg)
{
    if (m->err) {
        if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
            fprintf(stderr, "bench_e2e: %s: consume: %s\n", pr->what,
                    rd_kafka_message_errstr(m));
        return 0;
    }
    if (!pg->t_first_produce)
        pg->t_first_produce = h_now_s();
    rd_kafka_resp_err_t e;
    for (;;) {
        e = rd_kafka_producev(pc->prod, RD_KAFKA_V_TOPIC(pr->topic),
                              RD_KAFKA_V_KEY(m->key, m->key_len),
                              RD_KAFKA_V_VALUE(m->payload, m->len),
                              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                              RD_KAFKA_V_END);
        if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL)
            break;
        rd_kafka_poll(pc->prod, 50);
    }
    if (e)
        return fail("%s: produce: %s", pr->what, rd_kafka_err2str(e));
    pg->consumed++;
    bs_fetch_wake_note(pc->wake, m->key_len + m->len);
    if ((pg->consumed & 63) == 0) /* as BS_BOOKKEEPING_EVERY */
        bs_fetch_wake_check(pc->wake);
    if (pr->every_1k && (pg->consumed & 1023) == 0)
        pr->every_1k(pr->arg);
    return 0;
}

/* The loop: what a minimal consume -> produce program does, until n
 * records are consumed (or a signal); 0, or -1 with the message. */
static int pass_move(const pass_run *pr, const pass_clients *pc,
                     pass_progress *pg)
{
    uint64_t consumed_then = 0;
    double moved = h_now_s();
    while (pg->consumed < pr->n && !interrupted) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(pc->cons, 100);
        bool got = m != NULL;
        if (m) {
            int rc = pass_record(pr, pc, m, pg);
            rd_kafka_message_destroy(m);
            if (rc)
                return rc;
        }
        rd_kafka_poll(pc->prod, 0);
        /* The clock is read only on an empty poll, never per record: the
         * baseline pays only for what a pass-through needs. */
        if (!got) {
            bs_fetch_wake_check(pc->wake);
            double t = h_now_s();
            if (pg->consumed != consumed_then) {
                consumed_then = pg->consumed;
                moved = t;
            }
            if (t - moved > STALL_S)
                return fail("%s: nothing consumed for %.0f s (%" PRIu64
                            " of %" PRIu64 ")", pr->what, STALL_S,
                            pg->consumed, pr->n);
        }
    }
    return 0;
}

/* The pass-through itself, as pass_run says: open, move, flush, close. */
static int pass_loop(pass_run *pr)
{
    pass_state ps;
    memset(&ps, 0, sizeof(ps));
    ps.expect = pr->n;
    pr->consumed = pr->delivered = pr->failed = 0;
    pr->self_timed = 0;
    pass_clients pc;
    if (pass_open(pr, &ps, &pc))
        return -1;
    pass_progress pg = {0, 0};
    int rc = pass_move(pr, &pc, &pg);
    if (rc == 0 && !interrupted &&
        rd_kafka_flush(pc.prod, 120000) != RD_KAFKA_RESP_ERR_NO_ERROR)
        rc = fail("%s: %d records undelivered after 120 s", pr->what,
                  rd_kafka_outq_len(pc.prod));
    if (rc == 0 && ps.failed)
        rc = fail("%s: %" PRIu64 " deliveries failed: %s", pr->what,
                  ps.failed, ps.first_error);
    if (rc == 0 && interrupted)
        rc = fail("interrupted");
    if (rc == 0 && pr->flushed)
        rc = pr->flushed(pr->arg);
    pr->consumed = pg.consumed;
    pr->self_timed = ps.t_last_dr - pg.t_first_produce;
    pr->t_first_in = pg.t_first_produce;
    pass_close(&pc);
    /* After the producer is gone: no delivery report can come later. */
    pr->delivered = ps.delivered;
    pr->failed = ps.failed;
    return rc;
}

/* The in-process phase's hooks. */
typedef struct pass_hooks {
    const bench *b;
    observer *o;
    h_proc **perf;
    perf_hook hook;
    const char *what;
} pass_hooks;

/* --perf: attach once the first output record is seen. */
static void pass_every_1k(void *arg)
{
    pass_hooks *h = arg;
    if (*h->perf)
        return;
    uint64_t seen;
    double tl;
    bool done;
    observer_get(h->o, &seen, &tl, &done);
    if (seen > 0)
        perf_hook_fire(&h->hook);
}

/* The timed window ends with the last output record: the profile, too,
 * before the clients close. */
static int pass_flushed(void *arg)
{
    pass_hooks *h = arg;
    int rc = observer_wait(h->o, false, NULL, NULL, NULL, NULL, h->what);
    perf_stop(h->perf);
    return rc;
}

/* The phase's counts, checked: n consumed, n delivered, n in the output
 * topic. */
static int pass_check(const bench *b, const char *what, const char *topic,
                      uint64_t consumed, uint64_t delivered)
{
    const dataset *d = &b->d;
    if (consumed != d->n || delivered != d->n)
        return fail("%s: consumed %" PRIu64 ", delivered %" PRIu64
                    ", expected %" PRIu64, what, consumed, delivered, d->n);
    uint64_t out = 0;
    if (sum_high(b->q, topic, d->nparts, &out))
        return fail("%s: cannot read the high watermarks", topic);
    if (out != d->n)
        return fail("%s holds %" PRIu64 " records, expected %" PRIu64,
                    topic, out, d->n);
    return 0;
}

static int run_passthrough(const bench *b, int round, result *r)
{
    const dataset *d = &b->d;
    char topic[128], group[128];
    round_names("pass", round, topic, sizeof(topic), group, sizeof(group));
    memset(r, 0, sizeof(*r));
    r->name = "pass-through";

    observer o;
    h_proc *perf = NULL;
    char pname[64];
    snprintf(pname, sizeof(pname), "pass-%d", round);
    pass_hooks h = {b, &o, &perf, {b, getpid(), pname, &perf}, r->name};
    /* Started before the clients exist: nothing reaches the output before
     * the group join, and the observer notes only changes. */
    if (observer_start(&o, b->q, topic, d->nparts, d->n, getpid(), b->mock,
                       NULL))
        return -1;
    pass_run pr = {
        .what = r->name, .bootstrap = b->bootstrap, .input = b->in_topic,
        .topic = topic, .group = group, .n = d->n,
        .every_1k = b->perf_dir ? pass_every_1k : NULL,
        .flushed = pass_flushed, .arg = &h};
    int rc = pass_loop(&pr);
    observer_stop(&o);
    perf_stop(&perf);
    r->in = pr.consumed;
    result_from(r, &o);
    r->self_timed = pr.self_timed;
    if (b->real)
        r->t_start = pr.t_first_in;
    if (rc == 0)
        rc = pass_check(b, r->name, topic, pr.consumed, pr.delivered);
    return rc;
}

/* -- phase 2: the pass-through on jemalloc -------------------------------- */

/* The same loop in a bench_e2e_je child: `bench_e2e_je --pass-child
 * BOOTSTRAP INPUT TOPIC GROUP N` prints one line,
 *   consumed=N delivered=N failed=N seconds=S t_first=T hwm_kib=K
 *   malloc=NAME
 * (seconds: its own first produce to last delivery report; t_first: the
 * monotonic clock, h_now_s, at its first record consumed -- the same clock
 * as this process's; hwm_kib: its VmHWM; malloc: what serves its malloc,
 * see this_malloc) and exits 0, or 1 on a failure. */
#define PASS_CHILD_LINE "consumed=%" SCNu64 " delivered=%" SCNu64 \
                        " failed=%" SCNu64 " seconds=%lf t_first=%lf " \
                        "hwm_kib=%ld malloc=%63s"

/* Alive, or finished cleanly (exit 0): the child exits by itself once its
 * records are delivered, maybe before the observer's next poll.  Not
 * reaped (WNOWAIT): /proc/PID/stat stays readable for the observer's CPU
 * samples, and the exit status for child_wait. */
static bool pass_child_alive(void *arg)
{
    int status = 0;
    int r = h_process_peek(arg, &status);
    if (r != 0)
        return r == 1; /* 1: still running */
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static int run_passthrough_je(const bench *b, int round, result *r)
{
    const dataset *d = &b->d;
    char topic[128], group[128], nstr[32], log_path[700];
    round_names("passje", round, topic, sizeof(topic), group, sizeof(group));
    memset(r, 0, sizeof(*r));
    r->name = "pass-through-je";
    snprintf(nstr, sizeof(nstr), "%" PRIu64, d->n);
    snprintf(log_path, sizeof(log_path), "%s/pass-je-%d.log", b->dir, round);
    char *argv[] = {(char *)b->je, "--pass-child", (char *)b->bootstrap,
                    (char *)b->in_topic, topic, group, nstr,
                    (char *)b->client_config, NULL};
    h_proc *c = NULL, *perf = NULL;
    observer o;
    if (child_start(argv, true, log_path, &c))
        return -1;
    char pname[64];
    snprintf(pname, sizeof(pname), "passje-%d", round);
    perf_hook hook = {b, h_process_pid(c), pname, &perf};
    /* On the child's pid, for its CPU time: the group join takes ~3 s, so
     * the observer is there long before the first output record. */
    if (observer_start(&o, b->q, topic, d->nparts, d->n, h_process_pid(c),
                       b->mock, NULL)) {
        child_stop(c, 10, NULL);
        return -1;
    }
    int rc = observer_wait(&o, false, pass_child_alive, c,
                           b->perf_dir ? perf_hook_fire : NULL, &hook,
                           r->name);
    observer_stop(&o);
    perf_stop(&perf);
    result_from(r, &o);
    /* Its line comes after it closed its clients (leaving the group). */
    char line[512] = "";
    if (rc == 0 && h_process_read_line(c, 60000, line, sizeof(line)))
        rc = fail("%s: no result line from the child (%s)", r->name,
                  h_last_error());
    int status = -1;
    if (rc == 0)
        status = child_wait(c, 30);
    else
        child_stop(c, 10, NULL);
    uint64_t consumed = 0, delivered = 0, failed = 0;
    char malloc_name[64] = "";
    if (rc == 0 && (status < 0 || !WIFEXITED(status) ||
                    WEXITSTATUS(status) != 0))
        rc = fail("%s: the child did not exit 0 (wait status %d)", r->name,
                  status);
    double t_first_in = 0;
    if (rc == 0 && sscanf(line, PASS_CHILD_LINE, &consumed, &delivered,
                          &failed, &r->self_timed, &t_first_in, &r->hwm_kib,
                          malloc_name) != 7)
        rc = fail("%s: cannot parse the child's line '%s'", r->name, line);
    if (rc == 0 && strncmp(malloc_name, "jemalloc", 8) != 0)
        rc = fail("%s: the child's malloc is %s, not jemalloc", r->name,
                  malloc_name);
    r->in = consumed;
    if (b->real)
        r->t_start = t_first_in;
    if (rc == 0 && failed)
        rc = fail("%s: %" PRIu64 " deliveries failed", r->name, failed);
    if (rc == 0)
        rc = pass_check(b, r->name, topic, consumed, delivered);
    if (rc)
        print_tail(log_path, 3000);
    return rc;
}

/* -- phases 3 and 4: bloomstage ------------------------------------------ */

/* The counters of bloomstage's last "stopped" log line, and when it said
 * "started" and assigned partitions. */
static stage_stats read_stage_log(const char *path)
{
    stage_stats s;
    memset(&s, 0, sizeof(s));
    FILE *f = fopen(path, "r");
    if (!f)
        return s;
    char line[4096];
    while (fgets(line, sizeof(line), f)) {
        if (strstr(line, " msg=started ") && !s.t_started)
            s.t_started = h_log_time(line);
        if (strstr(line, " msg=\"partition assigned\" ")) {
            double t = h_log_time(line);
            if (!s.assigned++)
                s.t_first_assigned = t;
            s.t_last_assigned = t;
        }
        if (!strstr(line, " msg=stopped "))
            continue;
        long long in = h_log_int(line, "records_in"),
                  out = h_log_int(line, "records_out"),
                  dups = h_log_int(line, "duplicates"),
                  blocked = h_log_int(line, "blocked"),
                  missing = h_log_int(line, "missing_key");
        if (in >= 0 && out >= 0 && dups >= 0 && blocked >= 0 &&
            missing >= 0) {
            s.found = true;
            s.in = (unsigned long long)in;
            s.out = (unsigned long long)out;
            s.dups = (unsigned long long)dups;
            s.blocked = (unsigned long long)blocked;
            s.missing = (unsigned long long)missing;
        }
    }
    fclose(f);
    return s;
}

static bool child_alive(void *arg)
{
    return h_process_wait(arg, 0, NULL) == 1;
}

/* What one bloomstage phase runs: its names (output bench-out-KIND-R,
 * group bench-KIND-R, its files), input, keys and list.  kind "alo"
 * runs at_least_once, "noaudit" with dedup.audit.rate=0. */
typedef struct stage_spec {
    const char *kind, *name; /* name: the phase in the table */
    const char *input;       /* NULL: b->in_topic */
    const char *dedup_key;
    const char *list;        /* the blocklist file in the work directory */
    const char *list_key;    /* NULL: the dedup key (the config default) */
    const char *match;       /* NULL: exact (the default) */
    int max_missing;         /* false positives allowed: dedup and list */
} stage_spec;

/* The stage's configuration for one phase at conf_path: dedup on the
 * spec's key, its blocklist, checkpoints in the work directory. */
static int write_stage_conf(const bench *b, const stage_spec *sp, int round,
                            const char *topic, const char *group,
                            const char *conf_path)
{
    char list_path[700], ckpt[700], list_key[160] = "", match[80] = "",
         reg[600] = "";
    snprintf(list_path, sizeof(list_path), "%s/%s", b->dir, sp->list);
    snprintf(ckpt, sizeof(ckpt), "%s/checkpoints-%s-%d", b->dir, sp->kind,
             round);
    if (sp->list_key)
        snprintf(list_key, sizeof(list_key), "blocklist.spam.key=%s\n",
                 sp->list_key);
    if (sp->match)
        snprintf(match, sizeof(match), "blocklist.spam.match=%s\n",
                 sp->match);
    if (*b->registry_url)
        snprintf(reg, sizeof(reg), "schema.registry.url=%s\n",
                 b->registry_url);
    FILE *f = fopen(conf_path, "w");
    if (!f)
        return fail("%s: %s", conf_path, strerror(errno));
    fprintf(f,
            "# bench_e2e: dedup on %s, one blocklist built from a text list"
            "\n# at start-up, checkpoint defaults.\n"
            "processing.guarantee=%s\n"
            "# The output-tail replay: its output is visible as produced,\n"
            "# which the observer's high watermarks need (bench/txn measures\n"
            "# the transactions).\n"
            "exactly_once.method=replay\n"
            "kafka.bootstrap.servers=%s\n"
            "input.topics=%s\n"
            "output.topic=%s\n"
            "consumer.group.id=%s\n"
            "dedup.key=%s\n"
            "%s"
            "blocklist.spam.path=%s\n"
            "%s%s%s"
            "checkpoint.dir=%s\n"
            "log.level=info\n"
            "# The first-record lag: see bench/e2e.c.\n"
            "producer.topic.metadata.refresh.interval.ms="
            METADATA_REFRESH_MS "\n"
            "%s",
            sp->dedup_key,
            !strcmp(sp->kind, "alo") ? "at_least_once" : "exactly_once",
            b->bootstrap, sp->input ? sp->input : b->in_topic, topic, group,
            sp->dedup_key,
            /* The audit sample off, against the default rate's run. */
            !strcmp(sp->kind, "noaudit") ? "dedup.audit.rate=0\n" : "",
            list_path, list_key, match, reg, ckpt,
            /* Real broker: the observer reads records_in from /metrics
             * for the first record consumed (the port is in the log). */
            b->real ? "metrics.listen=127.0.0.1:0\n" : "");
    /* --client-config: the same settings as every other client's. */
    for (size_t i = 0; bk_client_kv && bk_client_kv[i]; i++)
        fprintf(f, "kafka.%s\n", bk_client_kv[i]);
    if (fclose(f) != 0)
        return fail("%s: %s", conf_path, strerror(errno));
    return 0;
}

/* `bloomstage run -c CONF` and the -X settings: started, its output
 * going to log_path. */
static int stage_start(const bench *b, const char *conf_path,
                       const char *log_path, h_proc **c)
{
    char **argv = calloc((size_t)(5 + 2 * b->nx), sizeof(char *));
    if (!argv)
        return fail("out of memory");
    int k = 0;
    argv[k++] = (char *)b->bloomstage;
    argv[k++] = "run";
    argv[k++] = "-c";
    argv[k++] = (char *)conf_path;
    for (int i = 0; i < b->nx; i++) {
        argv[k++] = "-X";
        argv[k++] = b->xs[i];
    }
    argv[k] = NULL;
    int rc = child_start(argv, false, log_path, c);
    free(argv);
    return rc ? -1 : 0;
}

/* A stopped stage's output and its "stopped" line against the data set:
 * the distinct non-blocklisted keys, at most max_missing fewer, and its
 * counters adding up; sets r->out. */
static int check_stage(const bench *b, result *r, const char *topic,
                       int max_missing)
{
    const dataset *d = &b->d;
    const stage_stats *s = &r->st;
    uint64_t out = 0;
    int rc = 0;
    if (sum_high(b->q, topic, d->nparts, &out))
        rc = fail("%s: cannot read the high watermarks", topic);
    else if (out > d->expect_out || out + (uint64_t)max_missing < d->expect_out)
        rc = fail("%s holds %" PRIu64 " records, expected %" PRIu64
                  " (at most %d fewer: false positives)", topic, out,
                  d->expect_out, max_missing);
    else if (s->in != d->n || s->out != out || s->missing != 0 ||
             s->in != s->out + s->dups + s->blocked ||
             s->blocked < d->blocked_records ||
             s->blocked > d->blocked_records + 2 * (uint64_t)max_missing)
        rc = fail("bloomstage's counters do not add up: records_in=%llu "
                  "(expected %" PRIu64 ") records_out=%llu (topic holds "
                  "%" PRIu64 ") duplicates=%llu (expected %" PRIu64
                  ") blocked=%llu (expected %" PRIu64 ") missing_key=%llu",
                  s->in, d->n, s->out, out, s->dups, d->expect_dups,
                  s->blocked, d->blocked_records, s->missing);
    r->out = out;
    return rc;
}

/* Runs bloomstage as sp says, from its start to its drained exit; the
 * phase's output and counters checked (check_stage). */
static int run_stage_spec(const bench *b, int round, result *r,
                          const stage_spec *sp)
{
    const dataset *d = &b->d;
    const char *kind = sp->kind;
    char topic[128], group[128];
    round_names(kind, round, topic, sizeof(topic), group, sizeof(group));
    memset(r, 0, sizeof(*r));
    r->name = sp->name;
    char conf_path[700], log_path[700];
    snprintf(conf_path, sizeof(conf_path), "%s/bloomstage-%s-%d.conf", b->dir,
             kind, round);
    snprintf(log_path, sizeof(log_path), "%s/bloomstage-%s-%d.log", b->dir,
             kind, round);
    if (write_stage_conf(b, sp, round, topic, group, conf_path))
        return -1;
    h_proc *c = NULL, *perf = NULL;
    observer o;
    /* The observer samples the stage's CPU time, so it starts after the
     * spawn (nothing reaches the output before the group join anyway). */
    double t_spawn = h_now_s();
    r->wall_spawn = h_wall_s();
    if (stage_start(b, conf_path, log_path, &c))
        return -1;
    char pname[64];
    snprintf(pname, sizeof(pname), "%s-%d", kind, round);
    perf_hook hook = {b, h_process_pid(c), pname, &perf};
    if (observer_start(&o, b->q, topic, d->nparts, d->expect_out,
                       h_process_pid(c), b->mock,
                       b->real ? log_path : NULL)) {
        child_stop(c, 10, NULL);
        return -1;
    }
    int rc = observer_wait(&o, true, child_alive, c,
                           b->perf_dir ? perf_hook_fire : NULL, &hook,
                           "bloomstage");
    observer_stop(&o);
    perf_stop(&perf);
    r->hwm_kib = h_proc_status_kib(h_process_pid(c), "VmHWM");
    struct rusage ru;
    int status = child_stop(c, 60, &ru);
    r->maxrss_kib = ru.ru_maxrss;
    r->cpu_total = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
                   (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
    result_from(r, &o);
    r->startup_s = r->t_start > 0  ? r->t_start - t_spawn
                   : o.t_first > 0 ? o.t_first - t_spawn
                                   : 0;
    r->wall_first_out = r->wall_spawn + r->startup_s;
    r->st = read_stage_log(log_path);
    r->in = r->st.in;
    if (rc == 0 && (status < 0 || !WIFEXITED(status) ||
                    WEXITSTATUS(status) != 0))
        rc = fail("bloomstage did not drain and exit 0 on SIGTERM (wait "
                  "status %d)", status);
    if (rc == 0 && !r->st.found)
        rc = fail("bloomstage logged no \"stopped\" line");
    if (rc == 0)
        rc = check_stage(b, r, topic, sp->max_missing);
    if (rc)
        print_tail(log_path, 3000);
    return rc;
}

/* kind "stage" runs bloomstage with processing.guarantee=exactly_once (its
 * default), "noaudit" the same with dedup.audit.rate=0, "alo" with
 * at_least_once: same input, own output and group; dedup on the record
 * key, the key blocklist. */
static int run_stage(const bench *b, int round, result *r, const char *kind)
{
    stage_spec sp = {
        .kind = kind,
        .name = !strcmp(kind, "alo")       ? "bloomstage-alo"
                : !strcmp(kind, "noaudit") ? "bloomstage-noaudit"
                                           : "bloomstage",
        .dedup_key = "key",
        .list = "blocklist.txt",
        .max_missing = MAX_MISSING};
    return run_stage_spec(b, round, r, &sp);
}

/* -- real broker: Kafka Streams ------------------------------------------ */

/* kind "seos" runs bench/streams/run with exactly_once_v2, "salo" with
 * at_least_once, on this round's input, into its own output topic; its one
 * line gives the interval (first input record at the dedup processor to
 * the K-th output record seen by a read_committed consumer), the output
 * count (read_committed; run itself fails unless it is K, the distinct
 * keys) and the application JVM's VmHWM. */
#define STREAMS_LINE "streams guarantee=%63s records=%" SCNu64 \
                     " seconds=%lf rate=%lf peak_rss_kib=%ld out=%" SCNu64 \
                     " startup_s=%lf"

static int run_streams(const bench *b, int round, result *r, const char *kind)
{
    const dataset *d = &b->d;
    bool alo = !strcmp(kind, "salo");
    const char *g = alo ? "at_least_once" : "exactly_once_v2";
    char topic[128], group[128], nstr[32], kstr[32], log_path[700];
    round_names(kind, round, topic, sizeof(topic), group, sizeof(group));
    memset(r, 0, sizeof(*r));
    r->name = alo ? "streams-alo" : "streams-eos-v2";
    snprintf(nstr, sizeof(nstr), "%" PRIu64, d->n);
    snprintf(kstr, sizeof(kstr), "%" PRIu32, d->distinct);
    snprintf(log_path, sizeof(log_path), "%s/streams-%s-%d.log", b->dir,
             kind, round);
    char *argv[] = {(char *)b->streams, "--bootstrap", (char *)b->bootstrap,
                    "--input", (char *)b->in_topic, "--output", topic,
                    "--records", nstr, "--distinct", kstr, "--guarantee",
                    (char *)g, "--timeout", "900", NULL};
    h_proc *c = NULL;
    if (child_start(argv, true, log_path, &c))
        return -1;
    char line[512] = "";
    int rc = 0;
    /* Nothing on stdout until its result line (or its end). */
    if (h_process_read_line(c, 1000 * 1000, line, sizeof(line)))
        rc = fail("%s: no result line from bench/streams/run (%s)", r->name,
                  h_last_error());
    int status = rc == 0 ? child_wait(c, 120) : (child_stop(c, 30, NULL), -1);
    char gg[64] = "";
    uint64_t recs = 0, out = 0;
    double seconds = 0, rt = 0;
    if (rc == 0 && (status < 0 || !WIFEXITED(status) ||
                    WEXITSTATUS(status) != 0))
        rc = fail("%s: bench/streams/run did not exit 0 (wait status %d)",
                  r->name, status);
    if (rc == 0 && sscanf(line, STREAMS_LINE, gg, &recs, &seconds, &rt,
                          &r->hwm_kib, &out, &r->startup_s) != 7)
        rc = fail("%s: cannot parse '%s'", r->name, line);
    if (rc == 0 && (recs != d->n || out != d->distinct || strcmp(gg, g)))
        rc = fail("%s: records=%" PRIu64 " out=%" PRIu64 " guarantee=%s, "
                  "expected %" PRIu64 ", %" PRIu32 " and %s", r->name, recs,
                  out, gg, d->n, d->distinct, g);
    r->in = recs;
    r->out = out;
    /* secs() = t_last - t_start: the run's own interval. */
    r->t_start = 1;
    r->t_last = 1 + seconds;
    r->cpu_client = -1; /* not sampled: see the log */
    r->cpu_mock = -1;
    if (rc)
        print_tail(log_path, 3000);
    return rc;
}

/* -- main ----------------------------------------------------------------- */

static const char USAGE[] =
    "usage: bench_e2e [--records N] [--partitions P] [--blocklist N]\n"
    "                 [--rounds R] [-X key=value]...\n"
    "                 [--bloomstage PATH] [--keep] [--perf DIR]\n"
    "\n"
    "End-to-end benchmark on one mock Kafka cluster: a minimal librdkafka\n"
    "consume->produce pass-through in this process (glibc's malloc), the\n"
    "same loop in a child linked with jemalloc (pass-through-je, as\n"
    "bloomstage is linked), then `bloomstage run` with dedup on the key and\n"
    "a blocklist (exactly_once, then at_least_once), on the same N records\n"
    "(about half of them repeats, 1% blocklisted).  Each is timed from its\n"
    "first to its last output record; prints the rates, bloomstage's ratio\n"
    "to the pass-through (target >= 0.9), its ratio to pass-through-je\n"
    "(both on jemalloc: the allocator's share left out) and its peak RSS.\n"
    "\n"
    "  --records N      input records (default 1000000; suffixes k, M)\n"
    "  --partitions P   partitions per topic (default: the fewest from 16 in\n"
    "                   steps of 8 that keep each under the mock's limits)\n"
    "  --blocklist N    blocklist entries (default 100000)\n"
    "  --rounds R       run every phase R times (default 1); the verdict\n"
    "                   compares the best rate of each (for a busy machine)\n"
    "  -X key=value     passed to `bloomstage run` (e.g. -X\n"
    "                   checkpoint.records=0 to see what checkpoints cost)\n"
    "  --bloomstage P   the bloomstage binary (default: $BLOOMSTAGE_BIN,\n"
    "                   else the one this program was built with)\n"
    "  --keep           keep the work directory (configs, logs, checkpoints)\n"
    "  --key-specs      instead: bloomstage alone with dedup.key key,\n"
    "                   json:/id, avro:/id and protobuf:/id, each on its own\n"
    "                   input of the same records (Avro and Protobuf in\n"
    "                   Confluent's wire format, a schema registry started by\n"
    "                   scripts/registry), and a blocklist on json:/email by\n"
    "                   domain and exactly; each spec's ratio to key in the\n"
    "                   same round; 3 rounds unless given\n"
    "  --bootstrap LIST on a real broker at LIST (loopback) instead of the\n"
    "                   mock: per round its own input bench-in-R and output\n"
    "                   topics, created explicitly; every contestant timed\n"
    "                   from its first input record consumed to its last\n"
    "                   output record visible read_committed; 8 partitions\n"
    "                   and 3 rounds unless given (bench/e2e --kafka starts\n"
    "                   a broker and passes the next two)\n"
    "  --broker-pid P   the real broker's pid, for its CPU seconds\n"
    "  --streams PATH   with --bootstrap: bench/streams/run, for the Kafka\n"
    "                   Streams contestants (exactly_once_v2, at_least_once)\n"
    "  --no-streams     with --bootstrap: without them\n"
    "  --client-config FILE  with --bootstrap: librdkafka settings\n"
    "                   (key=value lines: security.protocol, sasl.*, ssl.*)\n"
    "                   every client adds, bloomstage's as kafka.* keys: a\n"
    "                   secured broker's listener (bench/e2e --kafka\n"
    "                   --secure writes one); not with --streams\n"
    "  --perf DIR       profile each phase's client with `perf record -p`\n"
    "                   from its first output record on, into\n"
    "                   DIR/{pass,passje,stage,alo}-R.perf.data (perturbs\n"
    "                   the numbers: use it for where the time goes, not\n"
    "                   for rates; passje profiles the bench_e2e_je child)\n"
    "\n"
    "pass-through-je needs bench_e2e_je (built beside this program when the\n"
    "tree links jemalloc, as bench/e2e does); without it that phase is\n"
    "skipped and the header says why.\n"
    "\n"
    "Exit 0 when every phase ran and every count matched (whether or not\n"
    "the target was met), 1 on a failure, 2 on a usage error.\n";


/* What serves this process's malloc, as one word: "jemalloc-VERSION" in
 * bench_e2e_je (linked, and checked: jemalloc's count of this thread's
 * allocations must move across a malloc); in bench_e2e "glibc", unless
 * /proc/self/maps shows a malloc library (LD_PRELOAD): "preloaded:NAME". */
static const char *this_malloc(char *buf, size_t size)
{
#ifdef BENCH_E2E_JE
    const char *v = NULL;
    size_t sz = sizeof(v);
    if (mallctl("version", (void *)&v, &sz, NULL, 0) != 0 || !v)
        v = "?";
    uint64_t before = 0, after = 0;
    sz = sizeof(before);
    bool counted = mallctl("thread.allocated", &before, &sz, NULL, 0) == 0;
    void *volatile p = malloc(1 << 16);
    sz = sizeof(after);
    counted = counted &&
              mallctl("thread.allocated", &after, &sz, NULL, 0) == 0;
    free(p);
    snprintf(buf, size, "%sjemalloc-%.*s",
             counted && after == before ? "unused:" : "",
             (int)strcspn(v, "-"), v);
    return buf;
#else
    snprintf(buf, size, "glibc");
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return buf;
    char line[1024];
    while (fgets(line, sizeof(line), f)) {
        const char *path = strchr(line, '/');
        if (!path)
            continue;
        const char *name = strrchr(path, '/') + 1;
        if (strstr(name, "malloc")) {
            snprintf(buf, size, "preloaded:%.*s", (int)strcspn(name, "\n"),
                     name);
            break;
        }
    }
    fclose(f);
    return buf;
#endif
}

static void catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* The hidden modes, for bench_e2e's own use:
 *   --pass-child BOOTSTRAP INPUT TOPIC GROUP N [CLIENT_CONFIG]
 *       the pass-through loop alone (pass_loop), then its line (see
 *       PASS_CHILD_LINE); the pass-through-je phase runs bench_e2e_je so
 *   --malloc
 *       this_malloc's word */
static int hidden_main(int argc, char **argv)
{
    char m[96];
    this_malloc(m, sizeof(m));
    if (!strcmp(argv[1], "--malloc")) {
        printf("%s\n", m);
        return 0;
    }
    uint64_t n;
    char err[512];
    if ((argc != 7 && argc != 8) ||
        !bench_parse_count(argv[6], 1, 100000000, &n)) {
        fprintf(stderr, "usage: %s --pass-child BOOTSTRAP INPUT TOPIC GROUP "
                "N [CLIENT_CONFIG]\n", argv[0]);
        return 2;
    }
    if (argc == 8 && bk_client_config_load(argv[7], err, sizeof(err))) {
        fprintf(stderr, "%s --pass-child: %s\n", argv[0], err);
        return 1;
    }
    catch_signals();
    pass_run pr = {.what = "pass-child", .bootstrap = argv[2],
                   .input = argv[3], .topic = argv[4], .group = argv[5],
                   .n = n};
    int rc = pass_loop(&pr);
    printf("consumed=%" PRIu64 " delivered=%" PRIu64 " failed=%" PRIu64
           " seconds=%.6f t_first=%.6f hwm_kib=%ld malloc=%s\n",
           pr.consumed, pr.delivered, pr.failed, pr.self_timed,
           pr.t_first_in, h_proc_status_kib(getpid(), "VmHWM"), m);
    return rc || fflush(stdout) != 0 ? 1 : 0;
}

/* "1.23 0.98 0.50" from /proc/loadavg and, where the kernel has PSI, the
 * share of the last 10 s in which some task waited for a CPU. */
/* The file system the checkpoints go to: on tmpfs fsync costs nothing. */
static const char *fs_type(const char *path)
{
    struct statfs sf;
    if (statfs(path, &sf) != 0)
        return "?";
    switch ((unsigned long)sf.f_type) {
    case 0xEF53UL:
        return "ext2/3/4";
    case 0x01021994UL:
        return "tmpfs: fsync is free, checkpoints look cheap";
    case 0x58465342UL:
        return "xfs";
    case 0x9123683EUL:
        return "btrfs";
    case 0x794C7630UL:
        return "overlayfs";
    default:
        return "other";
    }
}

static const char *mib(long kib, char *buf, size_t size)
{
    if (kib <= 0)
        snprintf(buf, size, "-");
    else
        snprintf(buf, size, "%.1f MiB", (double)kib / 1024.0);
    return buf;
}

static void print_row(int round, const result *r)
{
    char m[32];
    printf("%5d  %-15s %11" PRIu64 " %12" PRIu64 " %8.3f %12.0f %10.2fs "
           "%8.2fs %10s\n", round, r->name, r->in, r->out, secs(r), rate(r),
           r->cpu_client, r->cpu_mock, mib(r->hwm_kib, m, sizeof(m)));
}

static void print_startup(int round, const result *r)
{
    const stage_stats *s = &r->st;
    printf("  round %d: %.2f s from spawn to its first output record (not "
           "timed):", round, r->startup_s);
    if (s->t_started && s->t_last_assigned && s->assigned > 1)
        printf(" %.2f s to \"started\" (blocklist built), %.2f s to the "
               "first \"partition assigned\" (group join),\n"
               "           %.2f s assigning %d partitions (%.0f ms each), "
               "%.2f s on to the first output\n",
               s->t_started - r->wall_spawn,
               s->t_first_assigned - s->t_started,
               s->t_last_assigned - s->t_first_assigned, s->assigned,
               1e3 * (s->t_last_assigned - s->t_first_assigned) /
                   (s->assigned - 1),
               r->wall_first_out - s->t_last_assigned);
    else
        printf("\n");
}

/* -- real broker: the rounds and the summary ------------------------------ */

enum { R_PASS, R_PASSJE, R_STAGE, R_ALO, R_SEOS, R_SALO, R_PHASES };
static const char *const r_kinds[R_PHASES] = {"pass", "passje", "stage",
                                              "alo",  "seos",   "salo"};

static void print_row_real(int round, const result *r)
{
    char m[32], c1[32] = "-", c2[32] = "-";
    if (r->cpu_client >= 0)
        snprintf(c1, sizeof(c1), "%.2fs", r->cpu_client);
    if (r->cpu_mock >= 0)
        snprintf(c2, sizeof(c2), "%.2fs", r->cpu_mock);
    printf("%5d  %-15s %11" PRIu64 " %12" PRIu64 " %8.3f %12.0f %11s "
           "%10s %10s\n", round, r->name, r->in, r->out, secs(r), rate(r),
           c1, c2, mib(r->hwm_kib, m, sizeof(m)));
}

/* One round: its own input topic bench-in-R, created and loaded with the
 * same records every round, and one output topic per phase, all created
 * explicitly (the broker does not auto-create); then the phases in order. */
static int real_round(bench *b, int round, result *res)
{
    const dataset *d = &b->d;
    char names[1 + R_PHASES][128], group[128], err[512];
    const char *list[1 + R_PHASES];
    int n = 0;
    snprintf(b->in_topic, sizeof(b->in_topic), "bench-in-%d", round);
    snprintf(names[n], sizeof(names[n]), "%s", b->in_topic);
    list[n] = names[n];
    n++;
    for (int ph = 0; ph < R_PHASES; ph++) {
        if ((ph == R_PASSJE && !b->je) ||
            ((ph == R_SEOS || ph == R_SALO) && !b->streams))
            continue;
        round_names(r_kinds[ph], round, names[n], sizeof(names[n]), group,
                    sizeof(group));
        list[n] = names[n];
        n++;
    }
    if (bk_create_topics(b->bootstrap, list, n, d->nparts, NULL, err,
                         sizeof(err)))
        return fail("round %d: %s", round, err);
    double load_s = 0;
    printf("round %d: loading %s...", round, b->in_topic);
    fflush(stdout);
    if (load_input(d, b->bootstrap, b->in_topic, FORM_PLAIN, 0, b->q,
                   &load_s))
        return -1;
    printf(" %.1f s; pass-through...", load_s);
    fflush(stdout);
    if (run_passthrough(b, round, &res[R_PASS]))
        return -1;
    printf(" %.2f s;", secs(&res[R_PASS]));
    if (b->je) {
        printf(" pass-through-je...");
        fflush(stdout);
        if (run_passthrough_je(b, round, &res[R_PASSJE]))
            return -1;
        printf(" %.2f s;", secs(&res[R_PASSJE]));
    }
    printf("\n         bloomstage...");
    fflush(stdout);
    if (run_stage(b, round, &res[R_STAGE], "stage"))
        return -1;
    printf(" %.2f s; at_least_once...", secs(&res[R_STAGE]));
    fflush(stdout);
    if (run_stage(b, round, &res[R_ALO], "alo"))
        return -1;
    printf(" %.2f s\n", secs(&res[R_ALO]));
    if (b->streams) {
        printf("         streams exactly_once_v2...");
        fflush(stdout);
        if (run_streams(b, round, &res[R_SEOS], "seos"))
            return -1;
        printf(" %.2f s; at_least_once...", secs(&res[R_SEOS]));
        fflush(stdout);
        if (run_streams(b, round, &res[R_SALO], "salo"))
            return -1;
        printf(" %.2f s\n", secs(&res[R_SALO]));
    }
    for (int i = 0; i < n; i++)
        if (check_nothing_dropped(b->q, list[i], d->nparts))
            return -1;
    return 0;
}

typedef struct rstats {
    bool ran;
    double best, median, worst, spread; /* spread: (best-worst)/median */
    long rss_max, rss_median;           /* KiB */
} rstats;

static double median_of(double *v, int n) { return bk_median(v, n); }

static rstats stats_of(const result *res, int rounds, int ph)
{
    rstats s;
    memset(&s, 0, sizeof(s));
    double v[64], m[64];
    int n = 0;
    for (int r = 0; r < rounds && n < 64; r++) {
        const result *x = &res[R_PHASES * r + ph];
        if (!x->name)
            continue;
        v[n] = rate(x);
        m[n] = (double)x->hwm_kib;
        if (x->hwm_kib > s.rss_max)
            s.rss_max = x->hwm_kib;
        n++;
    }
    if (!n)
        return s;
    s.ran = true;
    s.median = median_of(v, n);
    s.best = v[n - 1];
    s.worst = v[0];
    s.spread = s.median > 0 ? (s.best - s.worst) / s.median : 0;
    s.rss_median = (long)median_of(m, n);
    return s;
}

static const char *verdict(bool ok) { return ok ? "PASS" : "MISS"; }

#define TARGET_PASS_REAL 0.95  /* bloomstage eos / pass-through-je */
#define TARGET_STREAMS_RATE 3.0
#define TARGET_STREAMS_RSS 0.1

/* The rows: one per round and contestant that ran. */
static void print_real_rows(const result *res, int rounds)
{
    printf("\n%5s  %-15s %11s %12s %8s %12s %11s %10s %10s\n", "round",
           "phase", "records in", "records out", "seconds", "rate (in/s)",
           "client cpu", "broker cpu", "peak RSS");
    for (int r = 1; r <= rounds; r++)
        for (int ph = 0; ph < R_PHASES; ph++)
            if (res[R_PHASES * (r - 1) + ph].name)
                print_row_real(r, &res[R_PHASES * (r - 1) + ph]);
}

/* Per contestant over the rounds: best, median, worst, spread, the
 * median's ratio to the limit's (the jemalloc pass-through's, else the
 * pass-through's), peak RSS. */
static void print_real_stats(const rstats *st, int rounds)
{
    static const char *const label[R_PHASES] = {
        "pass-through", "pass-through-je", "bloomstage", "bloomstage-alo",
        "streams-eos-v2", "streams-alo"};
    const rstats *lim = st[R_PASSJE].ran ? &st[R_PASSJE] : &st[R_PASS];
    printf("\nover %d rounds (rate in input records/s; ratio: median rate / "
           "the %s's median)\n", rounds,
           st[R_PASSJE].ran ? "pass-through-je" : "pass-through");
    printf("%-16s %10s %10s %10s %8s %8s %12s\n", "phase", "best",
           "median", "worst", "spread", "ratio", "peak RSS");
    for (int ph = 0; ph < R_PHASES; ph++) {
        if (!st[ph].ran)
            continue;
        char m[32];
        printf("%-16s %10.0f %10.0f %10.0f %7.1f%% %8.3f %12s\n", label[ph],
               st[ph].best, st[ph].median, st[ph].worst,
               100 * st[ph].spread, st[ph].median / lim->median,
               mib(st[ph].rss_max, m, sizeof(m)));
    }
    printf("\n");
}

/* bloomstage against the pass-through: the target, on medians. */
static void print_real_pass(const result *res, int rounds, const rstats *st)
{
    const rstats *bs = &st[R_STAGE];
    const rstats *lim = st[R_PASSJE].ran ? &st[R_PASSJE] : &st[R_PASS];
    printf("bloomstage exactly_once / pass-through%s  median %.3f, best "
           "%.3f, per round",
           st[R_PASSJE].ran ? "-je" : "   ", bs->median / lim->median,
           bs->best / lim->best);
    for (int r = 0; r < rounds; r++)
        printf(" %.3f",
               rate(&res[R_PHASES * r + R_STAGE]) /
                   rate(&res[R_PHASES * r +
                             (st[R_PASSJE].ran ? R_PASSJE : R_PASS)]));
    printf("   target >= %.2f: %s (median)\n", TARGET_PASS_REAL,
           verdict(bs->median / lim->median >= TARGET_PASS_REAL));
    if (st[R_PASSJE].ran)
        printf("bloomstage exactly_once / pass-through (glibc) median %.3f, "
               "best %.3f\n", bs->median / st[R_PASS].median,
               bs->best / st[R_PASS].best);
    printf("bloomstage exactly_once / at_least_once       median %.3f\n",
           bs->median / st[R_ALO].median);
}

/* bloomstage against Kafka Streams: the rate and memory targets. */
static void print_real_streams(const bench *b, const result *res,
                               int rounds, const rstats *st)
{
    const dataset *d = &b->d;
    if (!st[R_SEOS].ran) {
        printf("streams: not run (--no-streams, or no bench/streams/run)\n");
        return;
    }
    const rstats *bs = &st[R_STAGE], *se = &st[R_SEOS];
    double rr = bs->median / se->median;
    double mr = (double)bs->rss_max / (double)se->rss_max;
    printf("bloomstage exactly_once / streams eos-v2 rate median %.2fx, "
           "best %.2fx, per round",
           rr, bs->best / se->best);
    for (int r = 0; r < rounds; r++)
        printf(" %.2f", rate(&res[R_PHASES * r + R_STAGE]) /
                            rate(&res[R_PHASES * r + R_SEOS]));
    printf("   target >= %.0fx: %s\n", TARGET_STREAMS_RATE,
           verdict(rr >= TARGET_STREAMS_RATE));
    printf("bloomstage / streams eos-v2 peak RSS          %.3f (%.1f / "
           "%.1f MiB, the largest of each)   target <= %.2f: %s\n", mr,
           (double)bs->rss_max / 1024, (double)se->rss_max / 1024,
           TARGET_STREAMS_RSS, verdict(mr <= TARGET_STREAMS_RSS));
    printf("streams exactly_once_v2 / at_least_once       median %.3f\n",
           se->median / st[R_SALO].median);
    printf("blocklist: Streams has none; bloomstage checks every record "
           "against its %" PRIu64 "-entry blocklist too\n"
           "           and outputs %" PRIu64 " records to Streams' %"
           PRIu32 ": bloomstage does more, the ratio is not in its "
           "favour\n", d->blocklist_entries, d->expect_out, d->distinct);
}

/* The median start-up of phase ph over the rounds. */
static double startup_median(const result *res, int rounds, int ph)
{
    double v[64];
    int n = 0;
    for (int r = 0; r < rounds && n < 64; r++)
        v[n++] = res[R_PHASES * r + ph].startup_s;
    return median_of(v, n);
}

/* The closing notes: start-up, what the interval is, the machine. */
static void print_real_notes(const result *res, int rounds,
                             const rstats *st, const char *load0,
                             const char *load1)
{
    printf("startup (not timed): spawn to first record consumed, medians: "
           "bloomstage");
    printf(" %.2f s", startup_median(res, rounds, R_STAGE));
    if (st[R_SEOS].ran)
        printf(", streams %.2f s (JVM, join, stores)",
               startup_median(res, rounds, R_SEOS));
    printf("\n");
    printf("interval: first input record consumed (pass-throughs: their "
           "own clock at the first poll that\n"
           "  returned a record; bloomstage: first poll of its /metrics, "
           "every %d ms, with records_in > 0;\n"
           "  Streams: the first record at its dedup processor) to the last "
           "output record visible to\n"
           "  read_committed (pass-throughs and bloomstage write no "
           "transactions: their high watermark,\n"
           "  polled every %d ms; Streams: its read_committed watcher "
           "receiving the K-th record)\n", POLL_MS, POLL_MS);
    printf("machine: at start %s\n         at end   %s\n"
           "         (shared: other jobs on the 2 cores move every number "
           "here)\n", load0, load1);
}

/* On a real broker: the rounds (real_round), then the rows, the
 * statistics over the rounds and the targets. */
static int real_run(bench *b, int rounds, const char *load0)
{
    result *res = calloc((size_t)(R_PHASES * rounds), sizeof(result));
    if (!res)
        return fail("out of memory");
    int rc = 0;
    for (int r = 1; r <= rounds && rc == 0; r++)
        rc = real_round(b, r, &res[R_PHASES * (r - 1)]);
    if (rc) {
        free(res);
        return rc;
    }
    char load1[160];
    bk_machine_load(load1, sizeof(load1));
    print_real_rows(res, rounds);
    rstats st[R_PHASES];
    for (int ph = 0; ph < R_PHASES; ph++)
        st[ph] = stats_of(res, rounds, ph);
    print_real_stats(st, rounds);
    print_real_pass(res, rounds, st);
    print_real_streams(b, res, rounds, st);
    print_real_notes(res, rounds, st, load0, load1);
    free(res);
    return 0;
}
/* -- main: the steps of a run -------------------------------------------- */

/* Per round on the mock: the pass-through, the same on jemalloc,
 * bloomstage exactly_once, bloomstage at_least_once. */
enum { PH_PASS, PH_PASSJE, PH_STAGE, PH_NOAUDIT, PH_ALO, PHASES };
static const char *const kinds[PHASES] = {"pass", "passje", "stage",
                                          "noaudit", "alo"};

/* One run of main: the options bench does not hold, and what main sets
 * up, prints from and frees at the end. */
typedef struct e2e_run {
    uint64_t n, parts, blocklist, rounds, broker_pid;
    bool no_streams, keep;
    char load0[160];
    long ncpu;
    char list_path[700], mock_log[700];
    /* which malloc each client runs on: the reason for pass-through-je */
    char self_malloc[96], je_malloc[96], bs_malloc[300];
    h_broker *mock;
    result *res; /* PHASES per round, round 1 first (--key-specs:
                    KS_PHASES) */
    bool key_specs;
    h_registry reg; /* --key-specs; reg_up while it runs */
    bool reg_up;
} e2e_run;

/* The best rate of each phase over the rounds, and bloomstage's peaks. */
typedef struct bests {
    const result *pass, *passje, *stage, *alo, *noaudit;
    long hwm, maxrss;
} bests;

/* One option from getopt_long: -1 to go on, else main's exit status. */
static int parse_option(int c, char *arg, bench *b, e2e_run *run)
{
    /* The options that name a program or a directory, kept as given. */
    const char **path = c == 's'   ? &b->bloomstage
                        : c == 'f' ? &b->perf_dir
                        : c == 'S' ? &b->streams
                                   : NULL;
    if (path) {
        *path = arg;
        return -1;
    }
    switch (c) {
    case 'n':
        return bench_count_opt(arg, 1000, 100000000, &run->n,
                               "bench_e2e: --records '%s': a count from "
                               "1000 to 100M", arg) ? -1 : 2;
    case 'p':
        return bench_count_opt(arg, 1, 10000, &run->parts, "bench_e2e: "
                               "--partitions '%s': 1 to 10000", arg) ? -1 : 2;
    case 'b':
        return bench_count_opt(arg, 1, 100000000, &run->blocklist,
                               "bench_e2e: --blocklist '%s': 1 to 100M", arg)
                   ? -1 : 2;
    case 'r':
        return bench_count_opt(arg, 1, 20, &run->rounds, "bench_e2e: "
                               "--rounds '%s': 1 to 20", arg) ? -1 : 2;
    case 'P':
        return bench_count_opt(arg, 1, 1 << 30, &run->broker_pid,
                               "bench_e2e: --broker-pid '%s'", arg) ? -1 : 2;
    case 'X':
        if (!strchr(arg, '=') || arg[0] == '=') {
            fprintf(stderr, "bench_e2e: -X '%s': key=value\n", arg);
            return 2;
        }
        b->xs[b->nx++] = arg;
        return -1;
    case 'B':
        if (strncmp(arg, "127.", 4) && strncmp(arg, "localhost:", 10)) {
            fprintf(stderr, "bench_e2e: --bootstrap '%s': a broker on "
                    "loopback only\n", arg);
            return 2;
        }
        b->real = true;
        snprintf(b->bootstrap, sizeof(b->bootstrap), "%s", arg);
        return -1;
    case 'k':
        run->keep = true;
        return -1;
    case 'K':
        run->key_specs = true;
        return -1;
    case 'N':
        run->no_streams = true;
        return -1;
    case 'C':
        b->client_config = arg;
        return -1;
    default:
        return bench_usage(c, USAGE);
    }
}

/* The command line into b and run: -1 to go on, else main's exit status. */
static int parse_args(int argc, char **argv, bench *b, e2e_run *run)
{
    static const struct option opts[] = {
        {"records", required_argument, NULL, 'n'},
        {"partitions", required_argument, NULL, 'p'},
        {"blocklist", required_argument, NULL, 'b'},
        {"rounds", required_argument, NULL, 'r'},
        {"bloomstage", required_argument, NULL, 's'},
        {"keep", no_argument, NULL, 'k'},
        {"key-specs", no_argument, NULL, 'K'},
        {"perf", required_argument, NULL, 'f'},
        {"bootstrap", required_argument, NULL, 'B'},
        {"broker-pid", required_argument, NULL, 'P'},
        {"streams", required_argument, NULL, 'S'},
        {"no-streams", no_argument, NULL, 'N'},
        {"client-config", required_argument, NULL, 'C'},
        {"help", no_argument, NULL, 'h'},
        {0, 0, 0, 0}};
    run->n = 1000000;
    run->blocklist = 100000;
    b->bloomstage = getenv("BLOOMSTAGE_BIN");
    b->xs = calloc((size_t)argc, sizeof(char *));
    int c, rc;
    while ((c = getopt_long(argc, argv, "hX:", opts, NULL)) != -1)
        if ((rc = parse_option(c, optarg, b, run)) >= 0)
            return rc;
    if (optind < argc) {
        fprintf(stderr, "bench_e2e: unexpected argument '%s'\n%s",
                argv[optind], USAGE);
        return 2;
    }
    return -1;
}

/* The options together, their defaults, and the programs and directory
 * they name: -1 to go on, else main's exit status. */
static int check_args(bench *b, e2e_run *run)
{
    if (!run->rounds)
        run->rounds = b->real || run->key_specs ? 3 : 1;
    if (run->key_specs && b->real) {
        fprintf(stderr, "bench_e2e: --key-specs runs on the mock (not with "
                "--bootstrap)\n");
        return 2;
    }
    if (!b->real && (b->streams || run->broker_pid || run->no_streams)) {
        fprintf(stderr, "bench_e2e: --streams, --no-streams and "
                "--broker-pid go with --bootstrap\n");
        return 2;
    }
    if (run->no_streams)
        b->streams = NULL;
    if (b->client_config && (!b->real || b->streams)) {
        fprintf(stderr, "bench_e2e: --client-config goes with --bootstrap "
                "and --no-streams\n");
        return 2;
    }
    char err[512];
    if (b->client_config &&
        bk_client_config_load(b->client_config, err, sizeof(err))) {
        fprintf(stderr, "bench_e2e: --client-config %s\n", err);
        return 2;
    }
    if (b->streams && access(b->streams, X_OK) != 0) {
        fprintf(stderr, "bench_e2e: --streams %s: %s\n", b->streams,
                strerror(errno));
        return 2;
    }
    if (b->real && !run->parts)
        run->parts = 8;
    /* A real broker: its pid, for its CPU seconds; 0: none. */
    b->mock = (pid_t)run->broker_pid;
    snprintf(b->in_topic, sizeof(b->in_topic), "%s", T_IN);
    if (!b->bloomstage || !*b->bloomstage)
        b->bloomstage = BENCH_BLOOMSTAGE_PATH;
    if (!*b->bloomstage || access(b->bloomstage, X_OK) != 0) {
        fprintf(stderr, "bench_e2e: no bloomstage binary (%s): pass "
                "--bloomstage PATH or set BLOOMSTAGE_BIN\n",
                *b->bloomstage ? b->bloomstage : "none built in");
        return 2;
    }
    if (*BENCH_E2E_JE_PATH) {
        b->je = BENCH_E2E_JE_PATH;
        if (access(b->je, X_OK) != 0) {
            fprintf(stderr, "bench_e2e: %s: %s (build the bench_e2e_je "
                    "target: bench/e2e does)\n", b->je, strerror(errno));
            return 2;
        }
    }
    if (b->perf_dir && mkdir(b->perf_dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "bench_e2e: --perf %s: %s\n", b->perf_dir,
                strerror(errno));
        return 2;
    }
    return -1;
}

/* The work directory under $TMPDIR (or /tmp) and the paths in it. */
static int make_workdir(bench *b, e2e_run *run)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(b->dir, sizeof(b->dir), "%s/bench-e2e.XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(b->dir))
        return fail("mkdtemp %s: %s", b->dir, strerror(errno));
    snprintf(run->list_path, sizeof(run->list_path), "%s/blocklist.txt",
             b->dir);
    snprintf(run->mock_log, sizeof(run->mock_log), "%s/mock-broker.log",
             b->dir);
    return 0;
}

/* Which malloc each client runs on: this process's, bloomstage's (its
 * --version) and bench_e2e_je's, which must be jemalloc. */
static int probe_mallocs(const bench *b, e2e_run *run)
{
    char line[256], log[700];
    const char *mp;
    char *vargv[] = {(char *)b->bloomstage, "--version", NULL};
    this_malloc(run->self_malloc, sizeof(run->self_malloc));
    snprintf(log, sizeof(log), "%s/bloomstage-version.log", b->dir);
    if (child_first_line(vargv, log, line, sizeof(line)) == 0 &&
        (mp = strstr(line, "malloc ")))
        snprintf(run->bs_malloc, sizeof(run->bs_malloc), "%.*s",
                 (int)strcspn(mp + 7, ")"), mp + 7);
    else
        snprintf(run->bs_malloc, sizeof(run->bs_malloc), "unknown "
                 "(--version printed '%s')", line);
    char *jargv[] = {(char *)b->je, "--malloc", NULL};
    snprintf(log, sizeof(log), "%s/bench_e2e_je-malloc.log", b->dir);
    if (b->je && (child_first_line(jargv, log, run->je_malloc,
                                   sizeof(run->je_malloc)) ||
                  strncmp(run->je_malloc, "jemalloc", 8) != 0))
        return fail("%s --malloc: '%s', not jemalloc (log: %s)", b->je,
                    run->je_malloc, log);
    return 0;
}

/* The header's first part: where it runs, the input and its topics. */
static void print_header_input(const bench *b, const e2e_run *run)
{
    const dataset *d = &b->d;
    if (b->real)
        printf("bench_e2e: end to end on a real Kafka broker at %s "
               "(librdkafka %s), %d rounds\n", b->bootstrap,
               rd_kafka_version_str(), (int)run->rounds);
    else
        printf("bench_e2e: end to end on one mock Kafka cluster "
               "(librdkafka %s)\n", rd_kafka_version_str());
    printf("  machine      %ld cores; at start: %s\n"
           "               (other jobs on the machine move these numbers)\n",
           run->ncpu, run->load0);
    printf("  input        %" PRIu64 " records, %" PRIu32 " distinct keys "
           "(%.1f%% repeats), %" PRIu64 " records (%.2f%%) with a "
           "blocklisted key\n", d->n, d->distinct,
           100.0 * (double)(d->n - d->distinct) / (double)d->n,
           d->blocked_records,
           100.0 * (double)d->blocked_records / (double)d->n);
    if (d->value_extra)
        printf("               key user-NNNNNNNNNN (15 B), value Event {id, "
               "email, n}: JSON ~80 B, Avro and Protobuf ~60 B\n");
    else
        printf("               key user-NNNNNNNNNN (15 B), JSON value (~40 "
               "B); %.1f MB of keys and values\n",
               (double)d->input_bytes / 1e6);
    if (b->real)
        printf("  partitions   %d per topic; topics created explicitly, the "
               "input reloaded each round\n", (int)d->nparts);
    else
        printf("  partitions   %d per topic; largest %" PRIu64 " records, "
               "%.2f MiB uncompressed (mock limit 5 MiB / 100000 message "
               "sets)\n", (int)d->nparts, d->max_part_records,
               (double)d->max_part_bytes / 1048576.0);
    printf("  blocklist    %" PRIu64 " entries, a text list bloomstage builds "
           "into a filter at start-up (blocklist.spam.path)\n",
           d->blocklist_entries);
}

/* The header's second part: the clients' settings and allocators, the
 * work directory. */
static void print_header_clients(const bench *b, const e2e_run *run)
{
    printf("  producers    all: enable.idempotence=true, the stage's tuning "
           "(stage/kafka/client_defaults.h),\n"
           "               topic.metadata.refresh.interval.ms="
           METADATA_REFRESH_MS " (the first-record lag: see bench/e2e.c)\n");
    static const char *const ctuning[] = {BS_CONSUMER_TUNING, NULL};
    printf("  consumers    all: the stage's tuning (stage/kafka/client_defaults.h:");
    for (size_t i = 0; ctuning[i]; i += 2)
        printf(" %s=%s", ctuning[i], ctuning[i + 1]);
    printf(")\n               and its fetch wake-ups (stage/kafka/fetch_wake.h)\n");
    if (run->key_specs)
        printf("  key specs    the same records, key user-NNNNNNNNNN, value "
               "{id, email, n} as JSON, Avro and\n"
               "               Protobuf (Confluent's wire format), each its "
               "own topic; dedup.key=key,\n"
               "               json:/id, avro:/id, protobuf:/id (blocklist "
               "on the same); then json:/id with\n"
               "               the blocklist on json:/email, match=exact "
               "(the listed addresses) and\n"
               "               match=domain (" KS_LISTED_DOMAIN " listed; "
               "addresses at it and 1 to 3 labels below)\n");
    printf("  bloomstage   %s run: dedup.key=%s, checkpoint defaults",
           b->bloomstage, run->key_specs ? "(by phase)" : "key");
    for (int i = 0; i < b->nx; i++)
        printf("%s-X %s", i ? " " : ", ", b->xs[i]);
    printf("\n");
    if (!strcmp(run->self_malloc, "glibc"))
        printf("  malloc       pass-through: glibc malloc (this process); ");
    else
        printf("  malloc       pass-through: %s (this process); ",
               run->self_malloc);
    if (b->je)
        printf("pass-through-je: %s (linked);\n", run->je_malloc);
    else
        printf("pass-through-je: skipped,\n"
               "               bench_e2e_je not built (the tree has no "
               "jemalloc: BLOOMSTAGE_JEMALLOC=OFF, or\n"
               "               the sanitizers);\n");
    printf("               bloomstage: %s (its --version)\n", run->bs_malloc);
    if (b->client_config) {
        /* The protocol and mechanism shown; other values (passwords,
         * paths) not. */
        printf("  security     every client (--client-config %s):",
               b->client_config);
        for (size_t i = 0; bk_client_kv[i]; i++) {
            const char *kv = bk_client_kv[i];
            bool shown = !strncmp(kv, "security.protocol=", 18) ||
                         !strncmp(kv, "sasl.mechanism", 14);
            printf(" %.*s=%s", (int)strcspn(kv, "="), kv,
                   shown ? strchr(kv, '=') + 1 : "...");
        }
        printf("\n");
    }
    printf("  work dir     %s (%s)%s\n", b->dir, fs_type(b->dir),
           run->keep ? ", kept" : "");
    if (b->perf_dir)
        printf("  profiling    perf record into %s: these rates are "
               "perturbed\n", b->perf_dir);
}

/* On a real broker: the rest of the header, then real_run. */
static int run_real(bench *b, e2e_run *run)
{
    if (b->streams)
        printf("  streams      %s: Kafka Streams, RocksDB window-store "
               "dedup, exactly_once_v2 and at_least_once\n", b->streams);
    printf("  broker       pid %d%s\n\n", (int)b->mock,
           b->mock ? "" : " (unknown: no broker cpu; --broker-pid)");
    b->q = query_client(b->bootstrap);
    if (!b->q)
        return 1;
    return real_run(b, (int)run->rounds, run->load0);
}

/* The mock broker with the input topics and, for every round R and
 * KIND of kinds, bench-out-KIND-R. */
static int start_mock_topics(bench *b, e2e_run *run,
                             const char *const *inputs, int nin,
                             const char *const *kinds_, int nk)
{
    int nt = nin + nk * (int)run->rounds, t = 0;
    const char **specs = calloc((size_t)nt + 1, sizeof(char *));
    char (*tspecs)[160] = calloc((size_t)nt, sizeof(*tspecs));
    int rc = 0;
    if (!specs || !tspecs) {
        rc = fail("out of memory");
        goto out;
    }
    for (int i = 0; i < nin; i++, t++) {
        snprintf(tspecs[t], sizeof(tspecs[t]), "%s:%d", inputs[i],
                 (int)b->d.nparts);
        specs[t] = tspecs[t];
    }
    for (int r = 1; r <= (int)run->rounds; r++)
        for (int ph = 0; ph < nk; ph++, t++) {
            char topic[128], group[128];
            round_names(kinds_[ph], r, topic, sizeof(topic), group,
                        sizeof(group));
            snprintf(tspecs[t], sizeof(tspecs[t]), "%s:%d", topic,
                     (int)b->d.nparts);
            specs[t] = tspecs[t];
        }
    h_broker_opts mo = {.topic_specs = specs, .log_path = run->mock_log};
    if (h_broker_start_opts(b->bloomstage, &mo, &run->mock)) {
        rc = fail("%s", h_last_error());
        print_tail(run->mock_log, 2000);
        goto out;
    }
    b->mock = h_broker_pid(run->mock);
    snprintf(b->bootstrap, sizeof(b->bootstrap), "%s",
             h_broker_bootstraps(run->mock));
    printf("  mock broker  pid %d, %s\n\n", (int)b->mock, b->bootstrap);
out:
    free(specs);
    free(tspecs);
    return rc;
}

/* The mock broker with bench-in and every round's output topics. */
static int start_mock(bench *b, e2e_run *run)
{
    const char *in[] = {T_IN};
    return start_mock_topics(b, run, in, 1, kinds, PHASES);
}

/* The rounds on the mock, each phase in turn, one progress line each. */
static int mock_rounds(bench *b, const e2e_run *run)
{
    for (int r = 1; r <= (int)run->rounds; r++) {
        result *res = &run->res[PHASES * (r - 1)];
        printf("round %d: pass-through (group join, then timed)...", r);
        fflush(stdout);
        if (run_passthrough(b, r, &res[PH_PASS]))
            return -1;
        printf(" %.2f s;", secs(&res[PH_PASS]));
        if (b->je) {
            printf(" pass-through-je...");
            fflush(stdout);
            if (run_passthrough_je(b, r, &res[PH_PASSJE]))
                return -1;
            printf(" %.2f s;", secs(&res[PH_PASSJE]));
        }
        /* The audit on (the default) and off, next to each other, the
         * first of the two alternating by round. */
        int first = r % 2 ? PH_STAGE : PH_NOAUDIT;
        int second = first == PH_STAGE ? PH_NOAUDIT : PH_STAGE;
        printf("\n         bloomstage%s (start-up, join, then timed)...",
               first == PH_STAGE ? "" : " audit off");
        fflush(stdout);
        if (run_stage(b, r, &res[first], kinds[first]))
            return -1;
        printf(" %.2f s; %s...", secs(&res[first]),
               second == PH_STAGE ? "audit on" : "audit off");
        fflush(stdout);
        if (run_stage(b, r, &res[second], kinds[second]))
            return -1;
        printf(" %.2f s; at_least_once...", secs(&res[second]));
        fflush(stdout);
        if (run_stage(b, r, &res[PH_ALO], "alo"))
            return -1;
        printf(" %.2f s\n", secs(&res[PH_ALO]));
    }
    return 0;
}

/* Every topic still starts at offset 0: the mock dropped nothing. */
static int check_mock_topics(const bench *b, const e2e_run *run)
{
    if (check_nothing_dropped(b->q, T_IN, b->d.nparts))
        return -1;
    for (int r = 1; r <= (int)run->rounds; r++)
        for (int ph = 0; ph < PHASES; ph++) {
            char topic[128], group[128];
            if (ph == PH_PASSJE && !b->je)
                continue;
            round_names(kinds[ph], r, topic, sizeof(topic), group,
                        sizeof(group));
            if (check_nothing_dropped(b->q, topic, b->d.nparts))
                return -1;
        }
    return 0;
}

/* The table, a row per phase and round, and the best of each phase. */
static bests print_mock_table(const e2e_run *run)
{
    bests best;
    memset(&best, 0, sizeof(best));
    printf("\n%5s  %-15s %11s %12s %8s %12s %11s %9s %10s\n", "round",
           "phase", "records in", "records out", "seconds", "rate (in/s)",
           "client cpu", "mock cpu", "peak RSS");
    for (int r = 1; r <= (int)run->rounds; r++) {
        const result *res = &run->res[PHASES * (r - 1)];
        const result *pass = &res[PH_PASS], *passje = &res[PH_PASSJE],
                     *stage = &res[PH_STAGE], *alo = &res[PH_ALO],
                     *noaudit = &res[PH_NOAUDIT];
        print_row(r, pass);
        if (passje->name)
            print_row(r, passje);
        print_row(r, stage);
        print_row(r, noaudit);
        print_row(r, alo);
        if (!best.pass || rate(pass) > rate(best.pass))
            best.pass = pass;
        if (passje->name &&
            (!best.passje || rate(passje) > rate(best.passje)))
            best.passje = passje;
        if (!best.stage || rate(stage) > rate(best.stage))
            best.stage = stage;
        if (!best.alo || rate(alo) > rate(best.alo))
            best.alo = alo;
        if (!best.noaudit || rate(noaudit) > rate(best.noaudit))
            best.noaudit = noaudit;
        if (stage->hwm_kib > best.hwm)
            best.hwm = stage->hwm_kib;
        if (stage->maxrss_kib > best.maxrss)
            best.maxrss = stage->maxrss_kib;
    }
    printf("\n");
    return best;
}

/* The audit sample's cost: the rate (and the stage's CPU time over its
 * timed window) with dedup.audit.rate at its default against 0, each
 * round's ratio (the two ran back to back), their mean, standard
 * deviation and range, and the best rates' ratio. */
static void print_audit_ratios(const e2e_run *run, bool cpu)
{
    int n = (int)run->rounds;
    double sum = 0, sq = 0, lo = 1e9, hi = 0;
    printf("audit on / off, %s   ", cpu ? "CPU, per round " : "rate, per round");
    for (int r = 1; r <= n; r++) {
        const result *on = &run->res[PHASES * (r - 1) + PH_STAGE],
                     *off = &run->res[PHASES * (r - 1) + PH_NOAUDIT];
        double x = cpu ? on->cpu_client / off->cpu_client
                       : rate(on) / rate(off);
        printf(" %.3f", x);
        sum += x;
        sq += x * x;
        lo = x < lo ? x : lo;
        hi = x > hi ? x : hi;
    }
    double mean = sum / n;
    double sd = n > 1 ? sqrt(fmax(0, (sq - n * mean * mean) / (n - 1))) : 0;
    printf("\naudit on / off, %s   mean %.3f, sd %.3f, range %.3f..%.3f "
           "over %d rounds\n", cpu ? "CPU            " : "rate           ",
           mean, sd, lo, hi, n);
}

static void print_audit_cost(const e2e_run *run, const bests *best)
{
    print_audit_ratios(run, false);
    print_audit_ratios(run, true);
    double ratio = rate(best->stage) / rate(best->noaudit);
    printf("audit on / off, best rates       %.3f   target >= 0.97: %s "
           "(bench/e2e-instructions counts what the sample adds)\n", ratio,
           ratio >= 0.97 ? "PASS" : "MISS");
}

/* The ratios: bloomstage against the pass-through (the target), and what
 * of it is the allocator. */
static void print_mock_ratios(const e2e_run *run, const bests *best)
{
    double ratio = rate(best->stage) / rate(best->pass);
    if (run->rounds > 1) {
        printf("ratio per round                 ");
        for (int r = 1; r <= (int)run->rounds; r++)
            printf(" %.3f",
                   rate(&run->res[PHASES * (r - 1) + PH_STAGE]) /
                       rate(&run->res[PHASES * (r - 1) + PH_PASS]));
        printf("\n");
        printf("ratio of the best rates          %.3f   target >= %.1f: %s\n",
               ratio, TARGET_RATIO, ratio >= TARGET_RATIO ? "PASS" : "MISS");
    } else {
        printf("ratio bloomstage / pass-through  %.3f   target >= %.1f: %s\n",
               ratio, TARGET_RATIO, ratio >= TARGET_RATIO ? "PASS" : "MISS");
    }
    /* The target is against the glibc pass-through (the issue's
     * definition); these two show what of it is the allocator. */
    if (best->passje) {
        printf("bloomstage / pass-through-je     %.3f   (both on jemalloc: "
               "bloomstage's own overhead)\n",
               rate(best->stage) / rate(best->passje));
        printf("pass-through-je / pass-through   %.3f   (the minimal client "
               "on jemalloc against glibc malloc)\n",
               rate(best->passje) / rate(best->pass));
    } else {
        printf("bloomstage / pass-through-je     -       (skipped: "
               "bench_e2e_je not built, no jemalloc in this tree)\n");
    }
    printf("exactly_once / at_least_once    %.3f   (bloomstage's two "
           "guarantees, best rates, same run)\n",
           rate(best->stage) / rate(best->alo));
    print_audit_cost(run, best);
}

/* The rest of the summary: bloomstage's memory, counts and start-up, the
 * self-timed pass-throughs, the machine's load. */
static void print_mock_details(const bench *b, const e2e_run *run,
                               const bests *best, const char *load1)
{
    const dataset *d = &b->d;
    char m1[32], m2[32];
    printf("bloomstage peak RSS              %s (VmHWM just before SIGTERM); "
           "%s (ru_maxrss, including the drain)\n",
           mib(best->hwm, m1, sizeof(m1)), mib(best->maxrss, m2, sizeof(m2)));
    printf("bloomstage output                %" PRIu64 " of %" PRIu64
           " expected (distinct non-blocklisted keys; at most %d fewer "
           "allowed, for false positives)\n", best->stage->out,
           d->expect_out, MAX_MISSING);
    printf("bloomstage counters              duplicates=%llu blocked=%llu "
           "(expected %" PRIu64 " and %" PRIu64 ")\n", best->stage->st.dups,
           best->stage->st.blocked, d->expect_dups, d->blocked_records);
    printf("pass-through self-timed          %.3f s from first produce to "
           "last delivery report (%.0f records/s)\n", best->pass->self_timed,
           best->pass->self_timed > 0
               ? (double)best->pass->in / best->pass->self_timed
               : 0);
    if (best->passje)
        printf("pass-through-je self-timed       %.3f s, the same in the "
               "child (%.0f records/s)\n", best->passje->self_timed,
               best->passje->self_timed > 0
                   ? (double)best->passje->in / best->passje->self_timed
                   : 0);
    printf("bloomstage start-up              CPU %.2f s over its whole life "
           "(timed window: %.2f s)\n", best->stage->cpu_total,
           best->stage->cpu_client);
    for (int r = 1; r <= (int)run->rounds; r++)
        print_startup(r, &run->res[PHASES * (r - 1) + PH_STAGE]);
    printf("machine                          at start: %s\n"
           "                                 at end:   %s (%ld cores)\n",
           run->load0, load1, run->ncpu);
    printf("timing: first to last output record of each phase, seen by the "
           "same observer (output high watermarks every %d ms)\n", POLL_MS);
}

/* -- --key-specs ----------------------------------------------------------- */

/* The key-spec comparison's phases: dedup on the record key, then on the
 * id read from the value as JSON, Avro and Protobuf, each from its own
 * input topic holding the same records (the key blocklist looked up by
 * the same spec); then the JSON topic with the blocklist on the address
 * (json:/email), listed addresses matched exactly against the listed
 * domain matched by domain: the same records blocked, the lookups'
 * cost apart. */
enum { KS_KEY, KS_JSON, KS_AVRO, KS_PROTO, KS_EXACT, KS_DOMAIN, KS_PHASES };
#define KS_INPUTS 4 /* the first four phases' topics; the last two read
                       KS_JSON's */
static const char *const ks_inputs[KS_INPUTS] = {
    T_IN "-key", T_IN "-json", T_IN "-avro", T_IN "-proto"};
static const int ks_forms[KS_INPUTS] = {FORM_JSON, FORM_JSON, FORM_AVRO,
                                        FORM_PROTO};
static const char *const ks_kinds[KS_PHASES] = {"key",   "json",  "avro",
                                                "proto", "exact", "domain"};
static const stage_spec ks_specs[KS_PHASES] = {
    {"key", "key", T_IN "-key", "key", "blocklist.txt", NULL, NULL, 0},
    {"json", "json:/id", T_IN "-json", "json:/id", "blocklist.txt", NULL,
     NULL, 0},
    {"avro", "avro:/id", T_IN "-avro", "avro:/id", "blocklist.txt", NULL,
     NULL, 0},
    {"proto", "protobuf:/id", T_IN "-proto", "protobuf:/id",
     "blocklist.txt", NULL, NULL, 0},
    {"exact", "email exact", T_IN "-json", "json:/id", "addresses.txt",
     "json:/email", "exact", 0},
    {"domain", "email domain", T_IN "-json", "json:/id", "domains.txt",
     "json:/email", "domain", 0},
};

/* The registry (scripts/registry) in the work directory, the two schemas
 * registered; schema ids into ids (Avro, Protobuf). */
static int ks_registry(bench *b, e2e_run *run, int32_t ids[2])
{
    char dir[600];
    snprintf(dir, sizeof(dir), "%s/registry", b->dir);
    printf("starting the schema registry (scripts/registry)...");
    fflush(stdout);
    double t0 = h_now_s();
    if (h_registry_start(&run->reg, dir, NULL, NULL))
        return fail("schema registry: %s", h_last_error());
    run->reg_up = true;
    if ((ids[0] = h_registry_post(&run->reg, "bench-in-avro-value", "AVRO",
                                  KS_AVRO_SCHEMA, NULL)) < 0 ||
        (ids[1] = h_registry_post(&run->reg, "bench-in-proto-value",
                                  "PROTOBUF", KS_PROTO_SCHEMA, NULL)) < 0)
        return fail("schema registry: %s", h_last_error());
    snprintf(b->registry_url, sizeof(b->registry_url), "%s", run->reg.url);
    printf(" %.1f s; %s, schema ids %d (Avro), %d (Protobuf)\n",
           h_now_s() - t0, b->registry_url, (int)ids[0], (int)ids[1]);
    return 0;
}

/* The lists, the registry, the mock and its four input topics loaded. */
static int ks_setup(bench *b, e2e_run *run)
{
    char path[700];
    int32_t ids[2] = {0, 0};
    snprintf(path, sizeof(path), "%s/addresses.txt", b->dir);
    if (write_address_list(&b->d, path, false))
        return -1;
    snprintf(path, sizeof(path), "%s/domains.txt", b->dir);
    if (write_address_list(&b->d, path, true) || ks_registry(b, run, ids) ||
        start_mock_topics(b, run, ks_inputs, KS_INPUTS, ks_kinds,
                          KS_PHASES))
        return -1;
    b->q = query_client(b->bootstrap);
    if (!b->q)
        return -1;
    for (int i = 0; i < KS_INPUTS; i++) {
        double load_s = 0;
        int f = ks_forms[i];
        printf("loading %s...", ks_inputs[i]);
        fflush(stdout);
        if (load_input(&b->d, b->bootstrap, ks_inputs[i], f,
                       f == FORM_AVRO ? ids[0] : ids[1], b->q, &load_s))
            return -1;
        printf(" %.1f s\n", load_s);
    }
    return 0;
}

/* The domain phase's allowance for false positives: a domain match looks
 * up to KS_MAX_LABELS names a record, each of which may be a false
 * positive of the list's filter (1e-6); twice the expected count over
 * the distinct ids, on top of MAX_MISSING. */
static int ks_domain_missing(const dataset *d)
{
    return MAX_MISSING + (int)ceil(2e-6 * KS_MAX_LABELS * d->distinct);
}

/* The rounds, the phases rotating by one each round (round r starts with
 * phase r - 1), so no phase always runs first or right after another. */
static int ks_rounds(bench *b, const e2e_run *run)
{
    int dom_missing = ks_domain_missing(&b->d);
    for (int r = 1; r <= (int)run->rounds; r++) {
        printf("round %d:", r);
        for (int j = 0; j < KS_PHASES; j++) {
            int ph = (j + r - 1) % KS_PHASES;
            stage_spec sp = ks_specs[ph];
            sp.max_missing = ph == KS_DOMAIN ? dom_missing : MAX_MISSING;
            printf("%s %s...", j == 3 ? "\n        " : "", sp.name);
            fflush(stdout);
            if (run_stage_spec(b, r, &run->res[KS_PHASES * (r - 1) + ph],
                               &sp))
                return -1;
            printf(" %.2f s;", secs(&run->res[KS_PHASES * (r - 1) + ph]));
        }
        printf("\n");
    }
    for (int i = 0; i < KS_INPUTS; i++)
        if (check_nothing_dropped(b->q, ks_inputs[i], b->d.nparts))
            return -1;
    for (int r = 1; r <= (int)run->rounds; r++)
        for (int ph = 0; ph < KS_PHASES; ph++) {
            char topic[128], group[128];
            round_names(ks_kinds[ph], r, topic, sizeof(topic), group,
                        sizeof(group));
            if (check_nothing_dropped(b->q, topic, b->d.nparts))
                return -1;
        }
    return 0;
}

/* Prints v[0..n) as given (dec decimals), then their median and range
 * (v unchanged); the median into *median. */
static void print_spread(const char *label, const double *v, int n, int dec,
                         double *median)
{
    double sorted[64];
    printf("  %-26s", label);
    for (int i = 0; i < n && i < 64; i++) {
        printf(" %.*f", dec, v[i]);
        sorted[i] = v[i];
    }
    *median = bk_median(sorted, n);
    printf("   median %.*f, range %.*f..%.*f\n", dec, *median, dec,
           sorted[0], dec, sorted[n - 1]);
}

/* Each spec's rate and its ratio to key's in the same round; the stage's
 * CPU time a record in its timed window beside it. */
static void ks_print_specs(const e2e_run *run)
{
    int n = (int)run->rounds;
    printf("by key spec, per round (round 1 first); ratio: to key in the "
           "same round\n");
    for (int ph = KS_KEY; ph <= KS_PROTO; ph++) {
        double rt[64], ratio[64], cpu[64], cratio[64], m;
        for (int r = 0; r < n; r++) {
            const result *x = &run->res[KS_PHASES * r + ph],
                         *k = &run->res[KS_PHASES * r + KS_KEY];
            rt[r] = rate(x);
            ratio[r] = rate(x) / rate(k);
            cpu[r] = 1e9 * x->cpu_client / (double)x->in;
            cratio[r] = (k->cpu_client / (double)k->in) /
                        (x->cpu_client / (double)x->in);
        }
        printf("%s\n", ks_specs[ph].name);
        print_spread("rate (records/s)", rt, n, 0, &m);
        print_spread("stage CPU (ns/record)", cpu, n, 0, &m);
        if (ph == KS_KEY)
            continue;
        /* Records a CPU second against key's: the ratio the rates would
         * show with the stage CPU-bound and alone on its cores. */
        print_spread("CPU ratio (key's / its)", cratio, n, 3, &m);
        print_spread("ratio to key", ratio, n, 3, &m);
        printf("  %-26s median %.3f: %s\n", "target >= 0.9x key", m,
               m >= TARGET_RATIO ? "PASS" : "MISS");
    }
}

/* The domain match's cost: the address runs' time a record apart (wall,
 * from the rates; and the stage's CPU in the timed window), per round. */
static void ks_print_domain(const bench *b, const e2e_run *run)
{
    int n = (int)run->rounds;
    double wall[64], cpu[64], ratio[64], m;
    for (int r = 0; r < n; r++) {
        const result *ex = &run->res[KS_PHASES * r + KS_EXACT],
                     *dm = &run->res[KS_PHASES * r + KS_DOMAIN];
        wall[r] = 1e9 / rate(dm) - 1e9 / rate(ex);
        cpu[r] = 1e9 * (dm->cpu_client / (double)dm->in -
                        ex->cpu_client / (double)ex->in);
        ratio[r] = rate(dm) / rate(ex);
    }
    double labels = 0;
    for (uint32_t key = 0; key < b->d.distinct; key++) {
        char e[96];
        format_email(key, e, sizeof(e));
        for (const char *p = strchr(e, '@'); p && *p; p++)
            labels += *p == '@' || *p == '.';
    }
    printf("blocklist on json:/email, match=domain (%.2f names looked up a "
           "record on average) against match=exact (one)\n",
           labels / b->d.distinct);
    print_spread("rate domain / exact", ratio, n, 3, &m);
    print_spread("domain - exact, wall ns", wall, n, 0, &m);
    print_spread("domain - exact, CPU ns", cpu, n, 0, &m);
    printf("  (a record's cost of the domain lookups: its domain parsed, "
           "each name hashed and looked up)\n");
}

/* --key-specs: set up, run the rounds, print the table and the ratios. */
static int run_key_specs(bench *b, e2e_run *run)
{
    run->res = calloc(KS_PHASES * run->rounds, sizeof(result));
    if (!run->res)
        return fail("out of memory");
    if (ks_setup(b, run) || ks_rounds(b, run))
        return -1;
    char load1[160];
    bk_machine_load(load1, sizeof(load1));
    printf("\n%5s  %-15s %11s %12s %8s %12s %11s %9s %10s\n", "round",
           "phase", "records in", "records out", "seconds", "rate (in/s)",
           "stage cpu", "mock cpu", "peak RSS");
    for (int r = 1; r <= (int)run->rounds; r++)
        for (int ph = 0; ph < KS_PHASES; ph++)
            print_row(r, &run->res[KS_PHASES * (r - 1) + ph]);
    printf("\n");
    ks_print_specs(run);
    ks_print_domain(b, run);
    printf("counts: every phase's output holds the %" PRIu64 " distinct "
           "non-blocklisted ids (at most %d fewer, the domain phase %d: "
           "false positives), its counters add up\n", b->d.expect_out,
           MAX_MISSING, ks_domain_missing(&b->d));
    printf("machine                          at start: %s\n"
           "                                 at end:   %s (%ld cores)\n",
           run->load0, load1, run->ncpu);
    printf("timing: first to last output record of each phase, seen by the "
           "same observer (output high watermarks every %d ms)\n", POLL_MS);
    return 0;
}

/* On the mock: start it, load the input, run the rounds, check that
 * nothing was dropped, print the results. */
static int run_mock(bench *b, e2e_run *run)
{
    double load_s = 0;
    run->res = calloc(PHASES * run->rounds, sizeof(result));
    if (!run->res)
        return fail("out of memory");
    if (start_mock(b, run))
        return -1;
    b->q = query_client(b->bootstrap);
    if (!b->q)
        return -1;
    printf("loading %s...", T_IN);
    fflush(stdout);
    if (load_input(&b->d, b->bootstrap, b->in_topic, FORM_PLAIN, 0, b->q,
                   &load_s))
        return -1;
    printf(" %.1f s\n", load_s);
    if (mock_rounds(b, run) || check_mock_topics(b, run))
        return -1;
    char load1[160];
    bk_machine_load(load1, sizeof(load1));
    bests best = print_mock_table(run);
    print_mock_ratios(run, &best);
    print_mock_details(b, run, &best, load1);
    return 0;
}

/* What the run leaves: the clients and the mock stopped, the work
 * directory removed after a success unless --keep, the memory freed. */
static void finish(bench *b, e2e_run *run, int rc)
{
    if (rc && interrupted)
        fprintf(stderr, "bench_e2e: interrupted\n");
    if (b->q)
        rd_kafka_destroy(b->q);
    if (run->mock && h_broker_stop(run->mock))
        fprintf(stderr, "bench_e2e: %s\n", h_last_error());
    if (run->reg_up && h_registry_stop(&run->reg))
        fprintf(stderr, "bench_e2e: schema registry: %s\n", h_last_error());
    if (!run->keep && rc == 0 && h_tmpdir_remove(b->dir))
        fprintf(stderr, "bench_e2e: could not remove %s: %s\n", b->dir,
                h_last_error());
    else if (rc)
        fprintf(stderr, "bench_e2e: work directory kept (configs, logs): "
                "%s\n", b->dir);
    free(run->res);
    free(b->xs);
    dataset_free(&b->d);
}

int main(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--pass-child") ||
                      !strcmp(argv[1], "--malloc")))
        return hidden_main(argc, argv);
#ifdef BENCH_E2E_JE
    fprintf(stderr, "bench_e2e_je: the pass-through-je phase's child "
            "(--pass-child); run bench_e2e\n");
    return 2;
#endif
    bench b;
    e2e_run run;
    memset(&b, 0, sizeof(b));
    memset(&run, 0, sizeof(run));
    int rc = parse_args(argc, argv, &b, &run);
    if (rc < 0)
        rc = check_args(&b, &run);
    if (rc >= 0)
        return rc;

    catch_signals();
    setvbuf(stdout, NULL, _IOLBF, 0);
    bk_machine_load(run.load0, sizeof(run.load0));
    run.ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (dataset_new(&b.d, run.n, (int32_t)run.parts, run.blocklist,
                    b.real, run.key_specs ? KS_VALUE_EXTRA : 0)) {
        dataset_free(&b.d);
        return 1;
    }
    if (make_workdir(&b, &run) || probe_mallocs(&b, &run)) {
        dataset_free(&b.d);
        return 1;
    }
    print_header_input(&b, &run);
    print_header_clients(&b, &run);
    if (write_blocklist(&b.d, run.list_path))
        rc = 1;
    else if (run.key_specs)
        rc = run_key_specs(&b, &run) ? 1 : 0;
    else if (b.real)
        rc = run_real(&b, &run) ? 1 : 0;
    else
        rc = run_mock(&b, &run) ? 1 : 0;
    finish(&b, &run, rc);
    return rc;
}
