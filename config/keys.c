/*
 * keys.c -- the key table: every configuration key bloomstage knows, once.
 *
 * A row gives name, type, section, default, range and help; parsing
 * (values.c), validation (store.c), `config --list` and `config --sample`
 * (print.c) all read it, so adding a key is adding a row here (and, for a
 * key the stage reads, a line in BS_SETTINGS_FIELDS, stage/base/settings.h).
 * An enum key's values come from its list in config.h.  The sample
 * config/bloomstage.conf is generated from this file: after editing a row,
 * regenerate it with
 * `bloomstage config --sample > config/bloomstage.conf` (a test diffs them).
 *
 * Below the table: finding a key's row (plain keys, then patterns), the
 * did-you-mean for unknown keys, and the environment-variable name codec.
 * Nothing here allocates.
 */
#include "config_int.h"

#include <ctype.h>
#include <string.h>

#define SEC_TOPICS "Topics"
#define SEC_DEDUP "Deduplication"
#define SEC_BLOCK "Blocklists"
#define SEC_CKPT "Checkpoints"
#define SEC_PROC "Processing"
#define SEC_KAFKA "Kafka clients"
#define SEC_REGISTRY "Schema Registry"
#define SEC_OPS "Operations"

const bs_config_section bs_config_sections[] = {
    {SEC_TOPICS, NULL},
    {SEC_DEDUP,
     "Each input partition has its own scalable Bloom filter: a record "
     "whose key the filter has seen is dropped (or routed to "
     "rejected.topic), any other record is forwarded and its key added."},
    {SEC_BLOCK,
     "Any number of blocklists, each named by a NAME of letters, digits, "
     "'_' and '-' (blocklist.spam.path, blocklist.bad-ips.path, ...).  A "
     "record whose key any blocklist may contain is dropped (or routed to "
     "rejected.topic).  Build the filter files with `bloomstage filter "
     "build`; lists that change while the stage runs come from a compacted "
     "topic (blocklist.NAME.topic)."},
    {SEC_CKPT,
     "Offsets are committed only after the filter state covering them is on "
     "disk.  A checkpoint is taken every checkpoint.interval.ms, every "
     "checkpoint.records records, before partitions are revoked and on "
     "shutdown."},
    {SEC_PROC, NULL},
    {SEC_KAFKA,
     "Keys starting with kafka. go to both librdkafka clients, consumer. to "
     "the consumer only, producer. to the producer only, with the prefix "
     "removed (kafka.bootstrap.servers sets bootstrap.servers).  See "
     "librdkafka's CONFIGURATION.md for what they accept."},
    {SEC_REGISTRY,
     "Records in Confluent's wire format name their schema by an id; the "
     "schema comes from a Confluent-compatible Schema Registry (Confluent's, "
     "Apicurio's /apis/ccompat/v7, Karapace, Redpanda's), fetched once per "
     "id and cached.  A registry that cannot be reached holds the stage; it "
     "never decides without the schema."},
    {SEC_OPS, NULL},
};
const size_t bs_config_nsections =
    sizeof bs_config_sections / sizeof bs_config_sections[0];

/* Enum value lists, generated from config.h's lists so that each value's
 * index is its C constant. */
static const char *const on_missing_values[] = {
    BS_MISSING_KEY_POLICY_LIST(BS_CONFIG_ENUM_TEXT) NULL};
static const char *const late_values[] = {
    BS_LATE_POLICY_LIST(BS_CONFIG_ENUM_TEXT) NULL};
static const char *const normalize_values[] = {
    BS_NORMALIZE_LIST(BS_CONFIG_ENUM_TEXT) NULL};
static const char *const match_values[] = {
    BS_MATCH_LIST(BS_CONFIG_ENUM_TEXT) NULL};
static const char *const guarantee_values[] = {
    BS_GUARANTEE_LIST(BS_CONFIG_ENUM_TEXT) NULL};
static const char *const eos_method_values[] = {
    BS_EOS_METHOD_LIST(BS_CONFIG_ENUM_TEXT) NULL};
static const char *const store_values[] = {
    BS_CKPT_STORE_KIND_LIST(BS_CONFIG_ENUM_TEXT) NULL};
static const char *const log_level_values[] = {
    BS_CONFIG_LOG_LEVEL_LIST(BS_CONFIG_ENUM_TEXT) NULL};

/* Range shorthands: closed [lo, hi], or with the ends open as named. */
#define IRANGE(lo, hi) .flags = BS_CF_RANGE, .imin = (lo), .imax = (hi)
#define DRANGE(lo, hi, open) \
    .flags = BS_CF_RANGE | (open), .dmin = (lo), .dmax = (hi)

#define TERA INT64_C(1000000000000)
#define TIB (INT64_C(1) << 40)

const bs_config_row bs_config_rows[] = {
    /* Topics ----------------------------------------------------------- */
    {.name = "input.topics", .type = BS_CT_TOPICS, .section = SEC_TOPICS,
     .flags = BS_CF_REQUIRED, .example = "input.topics=events",
     .help = "Topics to consume, comma-separated (events,clicks).  Kafka "
             "topic names: letters, digits, '.', '_' and '-', at most 249 "
             "characters."},
    {.name = "output.topic", .type = BS_CT_STRING, .section = SEC_TOPICS,
     .flags = BS_CF_REQUIRED, .example = "output.topic=events-unique",
     .help = "Topic every forwarded record is produced to.  Must not be one "
             "of input.topics."},
    {.name = "rejected.topic", .type = BS_CT_STRING, .section = SEC_TOPICS,
     .def = "",
     .help = "Topic the dropped records (duplicates, blocklisted keys, "
             "missing keys under dedup.on.missing.key=reject) are produced "
             "to.  Empty: dropped records are counted, not routed."},

    /* Deduplication ---------------------------------------------------- */
    {.name = "dedup.key", .type = BS_CT_KEYSPEC, .section = SEC_DEDUP,
     .def = "key",
     .help = "What identifies a record: `key` (the record key), `value` "
             "(the whole value), `header:NAME` (the value of header NAME), "
             "`json:/pointer` (the value parsed as JSON and an RFC 6901 "
             "pointer into it, e.g. json:/user/id; `json:` alone is the "
             "whole document; a value framed for JSON Schema is read after "
             "its 5-byte prefix), `avro:/path` (record fields of an Avro "
             "value in Confluent framing, e.g. avro:/user/email; its schema "
             "fetched from schema.registry.url by the id the record "
             "carries), `protobuf:/path` (fields of a Protobuf message "
             "likewise, by name), or `key.json:`, `key.avro:`, "
             "`key.protobuf:` (the same into the record key).  A string is "
             "its text; any other value is typed, so 7 and \"7\" are two "
             "keys.  Several parts "
             "separated by commas make a composite key, e.g. "
             "json:/user,json:/event: a tuple, missing if any part is."},
    {.name = "dedup.key.normalize", .type = BS_CT_ENUM, .section = SEC_DEDUP,
     .def = "none", .values = normalize_values,
     .help = "What the dedup key is made into before it is hashed: none "
             "(its bytes), lower (letters lowercased, UTF-8 aware: Latin, "
             "Greek, Cyrillic), trim (surrounding white space removed, "
             "Unicode's included) or lower,trim.  Bytes that are not UTF-8 "
             "are kept as they are."},
    {.name = "dedup.fpr", .type = BS_CT_DOUBLE, .section = SEC_DEDUP,
     .def = "1e-6", DRANGE(0, BS_CONFIG_FPR_MAX, BS_CF_MIN_OPEN),
     .help = "Target false-positive rate of each partition's filter: the "
             "probability that a record whose key was never seen is dropped "
             "as a duplicate.  It holds however many keys arrive; the filter "
             "grows a layer at a time."},
    {.name = "dedup.capacity", .type = BS_CT_INT, .section = SEC_DEDUP,
     .def = "100000", IRANGE(1, TERA),
     .example = "blocklist.spam.capacity=100000",
     .help = "Keys the first layer of each partition's filter is sized for. "
             " Later layers grow by dedup.growth; a capacity near the "
             "distinct keys a partition sees keeps lookups to one layer."},
    {.name = "dedup.growth", .type = BS_CT_DOUBLE, .section = SEC_DEDUP,
     .def = "2", DRANGE(1.1, 16, 0),
     .help = "Capacity of each new filter layer relative to the previous "
             "one."},
    {.name = "dedup.tightening", .type = BS_CT_DOUBLE, .section = SEC_DEDUP,
     .def = "0.85", DRANGE(0, 1, BS_CF_MIN_OPEN | BS_CF_MAX_OPEN),
     .help = "Error rate of each new filter layer relative to the previous "
             "one; layer i gets dedup.fpr*(1-r)*r^i, so the rate of all "
             "layers together stays below dedup.fpr."},
    {.name = "dedup.max.bytes", .type = BS_CT_SIZE, .section = SEC_DEDUP,
     .def = "0", IRANGE(0, TIB),
     .help = "Upper bound on the memory of each partition's filter, in "
             "bytes; suffixes k, M, G, T multiply by powers of 1024 (512M "
             "is 512 MiB, 536870912 bytes).  0: no bound."},
    {.name = "dedup.on.missing.key", .type = BS_CT_ENUM, .section = SEC_DEDUP,
     .def = "forward", .values = on_missing_values,
     .help = "What to do with a record that has no key where dedup.key "
             "looks (no record key, no such header, no such JSON member, "
             "value not JSON): forward it unfiltered, or reject it (route it "
             "to rejected.topic, which reject requires: no record is ever "
             "dropped silently).  Either way it is counted."},
    {.name = "dedup.window.ms", .type = BS_CT_INT, .section = SEC_DEDUP,
     .def = "0", IRANGE(0, INT64_C(3153600000000)),
     .help = "Forget a key this long after it was forwarded, in "
             "milliseconds of record timestamp (stream time: the largest "
             "timestamp seen in the partition).  A copy less than the window "
             "after the forwarded one is dropped, always; one more than "
             "window*(1+1/G) after is forwarded again (except with "
             "probability dedup.fpr); in between either.  Memory follows the "
             "keys of one window.  0: remember every key for ever."},
    {.name = "dedup.window.generations", .type = BS_CT_INT,
     .section = SEC_DEDUP, .def = "4", IRANGE(1, 64),
     .help = "G: the window is kept as G+1 filters of window/G each, the "
             "oldest dropped whole as stream time passes it.  Larger G "
             "forgets closer to the window (window*(1+1/G)) and makes "
             "lookups check more filters."},
    {.name = "dedup.window.late", .type = BS_CT_ENUM, .section = SEC_DEDUP,
     .def = "forward", .values = late_values,
     .help = "A record whose timestamp is older than the oldest filter the "
             "window still keeps (late by more than the window): forward it "
             "(deduplicated against what is still kept, and counted), or "
             "reject it to rejected.topic with reason late (which reject "
             "requires).  Never dropped silently."},
    {.name = "dedup.audit.rate", .type = BS_CT_DOUBLE, .section = SEC_DEDUP,
     .def = "0.0009765625", DRANGE(0, 1, 0),
     .help = "Fraction of keys also kept exactly (as 64-bit fingerprints), "
             "so that the filter's false positives among them are counted: "
             "the measured rate, with its 95% interval, beside the filter's "
             "estimate in the metrics and the stats line.  Chosen by the "
             "key's hash apart from where it lands in the filter.  The "
             "default is 1/1024; 0 turns the audit off; the smallest rate "
             "above 0 is 2^-53.  A partition restored from a checkpoint "
             "keeps the sample (and its rate) it was written with."},
    {.name = "dedup.audit.rescue", .type = BS_CT_BOOL, .section = SEC_DEDUP,
     .def = "true",
     .help = "Forward a sampled record the filter calls seen but the audit "
             "knows is new (a false positive), counting it as rescued: "
             "sampled keys become exact, and nothing else changes.  false: "
             "drop it as a duplicate, as without the audit."},

    /* Blocklists ------------------------------------------------------- */
    {.name = "blocklist.*.path", .type = BS_CT_STRING, .section = SEC_BLOCK,
     .flags = BS_CF_ANY_OF,
     .example = "blocklist.spam.path=/var/lib/bloomstage/spam.bf",
     .help = "Filter file of blocklist NAME, as written by `bloomstage "
             "filter build`, or a text list (one entry per line, '#' "
             "comments).  With blocklist.NAME.topic it must be a text list: "
             "its entries are the base the topic's changes apply to.  This "
             "or blocklist.NAME.topic is required for each NAME."},
    {.name = "blocklist.*.topic", .type = BS_CT_STRING, .section = SEC_BLOCK,
     .flags = BS_CF_ANY_OF, .example = "blocklist.spam.topic=spam-list",
     .help = "Compacted topic (cleanup.policy=compact) of live changes to "
             "blocklist NAME: the record key is the entry, a non-empty value "
             "adds it, a tombstone (null value) removes it, whether it came "
             "from the topic or from blocklist.NAME.path.  Read to its end "
             "before any input is consumed, then followed; an update applies "
             "to every record processed after it.  `bloomstage blocklist "
             "add|remove|load` writes to it."},
    {.name = "blocklist.*.capacity", .type = BS_CT_INT, .section = SEC_BLOCK,
     .def = "100000", IRANGE(1, TERA),
     .example = "blocklist.spam.capacity=100000",
     .help = "With blocklist.NAME.topic: the entries the list's counting "
             "filter is sized for at blocklist.NAME.fpr (4-bit counters: "
             "about 35 bytes an entry at 1e-6, 4x a plain filter; the exact "
             "entry set beside it takes 21-43 bytes an entry more).  A list that grows past it "
             "is rebuilt twice as large, from the entries it holds."},
    {.name = "blocklist.*.key", .type = BS_CT_KEYSPEC, .section = SEC_BLOCK,
     .def_from = "dedup.key", .example = "blocklist.spam.key=header:from",
     .help = "What a record is looked up by in blocklist NAME, written as "
             "dedup.key is."},
    {.name = "blocklist.*.normalize", .type = BS_CT_ENUM,
     .section = SEC_BLOCK, .def = "none", .values = normalize_values,
     .example = "blocklist.spam.normalize=lower,trim",
     .help = "What a record's key and every entry of blocklist NAME (its "
             "file, its topic's records, `bloomstage blocklist add`) are "
             "made into before they are hashed, as dedup.key.normalize, so "
             "a list and a stream agree.  A filter file (bloomstage filter "
             "build) holds what it was built from: build it from a "
             "normalized list."},
    {.name = "blocklist.*.match", .type = BS_CT_ENUM, .section = SEC_BLOCK,
     .def = "exact", .values = match_values,
     .example = "blocklist.spam.match=domain",
     .help = "exact: the key itself is looked up.  domain: the key's "
             "domain (after the last @ of an address, the host of a URL, "
             "else the whole key; lowercased, a trailing dot dropped) and "
             "each parent at a label boundary are looked up, so "
             "u@mx3.spam.example is blocked by spam.example and "
             "u@notspam.example is not; entries are domains.  A key of L "
             "labels takes L lookups, so its chance of a false block is at "
             "most L times blocklist.NAME.fpr."},
    {.name = "blocklist.*.fpr", .type = BS_CT_DOUBLE, .section = SEC_BLOCK,
     .def = "1e-6", DRANGE(0, BS_CONFIG_FPR_MAX, BS_CF_MIN_OPEN),
     .example = "blocklist.spam.fpr=1e-6",
     .help = "False-positive rate blocklist NAME was built for: a record "
             "whose key is not on the list is dropped with this "
             "probability."},

    /* Checkpoints ------------------------------------------------------ */
    {.name = "checkpoint.dir", .type = BS_CT_STRING, .section = SEC_CKPT,
     .def = "checkpoints",
     .help = "Directory of the per-partition checkpoint files (created if "
             "missing; not empty with checkpoint.store=dir).  Relative "
             "paths are relative to the working directory."},
    {.name = "checkpoint.store", .type = BS_CT_ENUM, .section = SEC_CKPT,
     .def = "dir", .values = store_values,
     .help = "Where checkpoints go.  dir: files in checkpoint.dir (one "
             "instance, or a shared volume).  kafka: the compacted topic "
             "checkpoint.topic, so a partition's filter follows it to "
             "whichever instance of the group is assigned it (scale-out)."},
    {.name = "checkpoint.topic", .type = BS_CT_STRING, .section = SEC_CKPT,
     .def = "bloomstage-checkpoints",
     .help = "With checkpoint.store=kafka: the compacted topic checkpoints "
             "are written to, in chunks of checkpoint.chunk.bytes; created "
             "(cleanup.policy=compact) if missing.  One topic can serve "
             "many groups."},
    {.name = "checkpoint.chunk.bytes", .type = BS_CT_SIZE, .section = SEC_CKPT,
     .def = "512k", IRANGE(1024, INT64_C(16) << 20),
     .help = "With checkpoint.store=kafka: the largest chunk of a "
             "checkpoint in one record, in bytes (512k is 524288); keep it "
             "under the broker's message.max.bytes."},
    {.name = "checkpoint.interval.ms", .type = BS_CT_INT,
     .section = SEC_CKPT, .def = "1000", IRANGE(10, 86400000),
     .help = "Time between checkpoints, in milliseconds, from the end of "
             "one checkpoint to the start of the next: a checkpoint slower "
             "than this (a loaded cluster) still leaves this long for "
             "records.  With transactions it is the latency downstream "
             "sees: at 1000 a record is visible to read_committed readers "
             "about 0.56 s after it was appended (p99 1.06 s) and rounds "
             "take a few percent of the time; at 100 (Kafka Streams' "
             "commit.interval.ms under exactly_once_v2) 0.09 s (p99 0.16 - "
             "0.25 s) for about a tenth of the rate, and ten times the "
             "checkpoint writes (bench/README.md)."},
    {.name = "checkpoint.records", .type = BS_CT_INT, .section = SEC_CKPT,
     .def = "1000000", IRANGE(0, TERA),
     .help = "Records processed between checkpoints, whichever of this and "
             "checkpoint.interval.ms comes first.  0: time only.  It bounds "
             "the work redone after a crash (a replay of the output tail, "
             "or duplicates with at_least_once); every round costs an "
             "fsync per partition."},
    {.name = "checkpoint.delta.max", .type = BS_CT_INT, .section = SEC_CKPT,
     .def = "32", IRANGE(0, 100000),
     .help = "A checkpoint writes only the filter blocks changed since the "
             "previous one (a delta: files in checkpoint.dir, or records "
             "in checkpoint.topic), until this many deltas follow the last "
             "full snapshot; then it writes a snapshot again (the Kafka "
             "store after 1000 at most: its manifest names every delta).  "
             "A restore reads the snapshot and its deltas.  0: every "
             "checkpoint is a full snapshot.  A windowed filter is always "
             "written whole."},
    {.name = "checkpoint.delta.ratio", .type = BS_CT_DOUBLE,
     .section = SEC_CKPT, .def = "0.15", DRANGE(0, 100, BS_CF_MIN_OPEN),
     .help = "A full snapshot is written instead of a delta once the "
             "deltas since the last snapshot would pass this fraction of "
             "its size, so a restore reads at most (1 + this) snapshots' "
             "worth of bytes (a delta's byte costs three to four times a "
             "snapshot's to restore: its blocks are scattered)."},

    /* Processing ------------------------------------------------------- */
    {.name = "processing.guarantee", .type = BS_CT_ENUM, .section = SEC_PROC,
     .def = "exactly_once", .values = guarantee_values,
     .help = "exactly_once: every unique record is in the output exactly "
             "once, by the method exactly_once.method chooses.  Needs the "
             "output topic to exist.  at_least_once: no transactions, no "
             "output reads; after a crash, records processed since the "
             "last checkpoint may be produced again.  rejected.topic is "
             "exactly once with transactions, else at least once."},
    {.name = "exactly_once.method", .type = BS_CT_ENUM, .section = SEC_PROC,
     .def = "auto", .values = eos_method_values,
     .help = "How exactly_once is kept.  transactions: each checkpoint "
             "round is one Kafka transaction holding the output, the "
             "rejected records, the input offsets (bound to the consumer "
             "group's generation, so an instance that lost its partitions "
             "is fenced) and, with checkpoint.store=kafka, the checkpoint; "
             "downstream consumers must read with "
             "isolation.level=read_committed and see the output once per "
             "round.  replay: each checkpoint records the output topic's "
             "end, and after a crash the stage reads the output written "
             "since (every record carries a bloomstage-src header); it "
             "does not fence an instance paused past its session timeout "
             "that then resumes.  auto: transactions when the broker "
             "accepts them, else (and on librdkafka's mock cluster) replay; "
             "start-up logs which."},
    {.name = "exactly_once.transactional.id", .type = BS_CT_STRING,
     .section = SEC_PROC, .def = "",
     .help = "The producer's transactional.id with exactly_once.method "
             "transactions.  Two live instances must never share one: "
             "they fence each other, and an instance fenced 5 times "
             "within 5 minutes stops with an error naming its id.  "
             "Empty: bloomstage-GROUP-INSTANCE when "
             "consumer.group.instance.id is set, else "
             "bloomstage-GROUP-HOST-slotN, N the lowest slot of the group "
             "free on the host, locked for the instance's life in "
             "/run/lock/bloomstage (else /tmp/bloomstage-txn).  Either way "
             "a restart takes its predecessor's id back and aborts the "
             "transaction that one left open at once, rather than after "
             "producer.transaction.timeout.ms.  Set one per instance where "
             "instances on one host cannot see one another's "
             "/run/lock (containers sharing a host name)."},
    {.name = "exactly_once.overlap", .type = BS_CT_BOOL, .section = SEC_PROC,
     .def = "true",
     .help = "With exactly_once.method transactions: two transactional "
             "producers take turns, so that the next round's transaction "
             "takes records while the last one commits (its "
             "send_offsets_to_transaction and commit_transaction run on a "
             "thread of their own); a round waits for a commit only if the "
             "one before is still running, and a commit that fails aborts "
             "both transactions.  The second producer's transactional.id "
             "is the first's followed by /2 (the ACL prefix bloomstage-"
             "GROUP- covers both).  false: one producer, and each round "
             "waits for its own commit before records flow again."},

    /* Kafka clients ---------------------------------------------------- */
    {.name = "consumer.group.id", .type = BS_CT_STRING, .section = SEC_KAFKA,
     .def = "bloomstage",
     .help = "Consumer group of the stage: instances sharing it share the "
             "input partitions.  Passed to the consumer as group.id."},
    {.name = "kafka.*", .type = BS_CT_STRING, .section = SEC_KAFKA,
     .example = "kafka.bootstrap.servers=localhost:9092",
     .help = "Any librdkafka property, for both the consumer and the "
             "producer."},
    {.name = "consumer.*", .type = BS_CT_STRING, .section = SEC_KAFKA,
     .example = "consumer.session.timeout.ms=45000",
     .help = "Any librdkafka property, for the consumer only (overrides the "
             "same kafka. key)."},
    {.name = "producer.*", .type = BS_CT_STRING, .section = SEC_KAFKA,
     .example = "producer.compression.type=lz4",
     .help = "Any librdkafka property, for the producer only (overrides the "
             "same kafka. key)."},

    /* Schema Registry -------------------------------------------------- */
    {.name = "schema.registry.url", .type = BS_CT_STRING,
     .section = SEC_REGISTRY, .def = "",
     .example = "schema.registry.url=http://registry:8081",
     .help = "Base URLs of the registry's Confluent API, comma-separated, "
             "http:// or https:// (for Apicurio, ending in "
             "/apis/ccompat/v7).  They are tried in turn; the one that "
             "answered last is asked first.  Empty: no registry."},
    {.name = "schema.registry.basic.auth.user.info", .type = BS_CT_STRING,
     .section = SEC_REGISTRY, .def = "",
     .help = "USER:PASSWORD for HTTP basic auth with the registry.  A "
             "secret: never shown; set it with @file:PATH or "
             "BLOOMSTAGE_SCHEMA_REGISTRY_BASIC_AUTH_USER_INFO_FILE.  Use "
             "with https://: basic auth sends it in clear.  Empty: none."},
    {.name = "schema.registry.ssl.ca.location", .type = BS_CT_STRING,
     .section = SEC_REGISTRY, .def = "",
     .help = "PEM file of the CA that signed the registry's certificate.  "
             "Empty: the system's CAs."},
    {.name = "schema.registry.ssl.certificate.location", .type = BS_CT_STRING,
     .section = SEC_REGISTRY, .def = "",
     .help = "PEM client certificate for a registry that asks for one, with "
             "schema.registry.ssl.key.location.  Empty: none."},
    {.name = "schema.registry.ssl.key.location", .type = BS_CT_STRING,
     .section = SEC_REGISTRY, .def = "",
     .help = "PEM private key (not encrypted) of "
             "schema.registry.ssl.certificate.location."},
    {.name = "schema.registry.cache.max.schemas", .type = BS_CT_INT,
     .section = SEC_REGISTRY, .def = "1000", IRANGE(1, 1000000),
     .help = "Schemas kept in memory, each with its references; beyond it "
             "the least recently used one is dropped (and fetched again if "
             "a record names it).  Schema ids never change meaning, so a "
             "kept schema is never fetched again."},
    {.name = "schema.registry.timeout.ms", .type = BS_CT_INT,
     .section = SEC_REGISTRY, .def = "10000", IRANGE(100, 600000),
     .help = "Bound on one request to the registry (connecting takes at most "
             "5000 ms of it); then the next URL is tried."},

    /* Operations ------------------------------------------------------- */
    {.name = "metrics.listen", .type = BS_CT_STRING, .section = SEC_OPS,
     .def = "",
     .help = "Address of the Prometheus metrics endpoint, HOST:PORT "
             "(0.0.0.0:9464), :PORT or [V6]:PORT, PORT 1 to 65535 (0: any "
             "free port, logged).  Empty: no endpoint."},
    {.name = "metrics.tls.cert.path", .type = BS_CT_STRING,
     .section = SEC_OPS, .def = "",
     .example = "metrics.tls.cert.path=/etc/bloomstage/metrics.crt",
     .help = "PEM certificate (chain) of the metrics endpoint: when set, "
             "with metrics.tls.key.path, it answers HTTPS only (plain HTTP "
             "is refused).  Empty: plain HTTP."},
    {.name = "metrics.tls.key.path", .type = BS_CT_STRING,
     .section = SEC_OPS, .def = "",
     .example = "metrics.tls.key.path=/run/secrets/metrics.key",
     .help = "PEM private key of metrics.tls.cert.path, not encrypted.  "
             "Read once at start-up; never shown."},
    {.name = "metrics.auth.users.path", .type = BS_CT_STRING,
     .section = SEC_OPS, .def = "",
     .example = "metrics.auth.users.path=/run/secrets/metrics-users",
     .help = "File of USER:HASH lines (# comments and blank lines skipped), "
             "HASH a bcrypt hash ($2b$, $2a$ or $2y$, cost 4 to 14: "
             "`htpasswd -nbBC 10 USER PASSWORD`): when set, every request "
             "needs HTTP basic auth as one of them, else 401.  Use with "
             "TLS: basic auth sends the password in clear.  Empty: no "
             "auth."},
    {.name = "metrics.auth.probes.open", .type = BS_CT_BOOL,
     .section = SEC_OPS, .def = "false",
     .help = "With metrics.auth.users.path: /healthz and /ready answer "
             "without credentials (for a Kubernetes probe); /metrics "
             "still needs them."},
    {.name = "log.level", .type = BS_CT_ENUM, .section = SEC_OPS,
     .def = "info", .values = log_level_values,
     .help = "Least severe messages logged (to stderr)."},
    {.name = "log.stats.interval.ms", .type = BS_CT_INT, .section = SEC_OPS,
     .def = "30000", IRANGE(0, 86400000),
     .help = "Every so often, one log line with the counters (records in, "
             "out, dropped, rate, lag, checkpoints).  0: none.  When not 0 and stderr is a "
             "terminal, `bloomstage run` also keeps a live status line."},
};
const size_t bs_config_nrows = sizeof bs_config_rows / sizeof bs_config_rows[0];

/* ------------------------------------------------------------------------ */
/* Finding rows                                                              */

bool bs_config_row_is_pattern(const bs_config_row *row)
{
    return strchr(row->name, '*') != NULL;
}

bool bs_config_row_is_passthrough(const bs_config_row *row)
{
    const char *star = strchr(row->name, '*');
    return star && star[1] == '\0';
}

static bool name_char_ok(unsigned char c)
{
    return isalnum(c) || c == '_' || c == '-';
}

/* Splits a pattern at its '*': prefix length, suffix (after the '*'). */
static size_t pattern_split(const bs_config_row *row, const char **suffix)
{
    const char *star = strchr(row->name, '*');
    *suffix = star + 1;
    return (size_t)(star - row->name);
}

bool bs_config_row_name_of(const bs_config_row *row, const char *key,
                           char *buf, size_t n)
{
    const char *suffix;
    size_t plen = pattern_split(row, &suffix);
    size_t slen = strlen(suffix), klen = strlen(key);
    if (slen == 0 || klen < plen + slen ||
        strncmp(key, row->name, plen) != 0 ||
        strcmp(key + klen - slen, suffix) != 0)
        return false;
    size_t nlen = klen - plen - slen;
    if (nlen + 1 > n)
        return false;
    memcpy(buf, key + plen, nlen);
    buf[nlen] = '\0';
    return true;
}

const bs_config_row *bs_config_row_by_name(const char *name)
{
    for (size_t i = 0; i < bs_config_nrows; i++)
        if (strcmp(bs_config_rows[i].name, name) == 0)
            return &bs_config_rows[i];
    return NULL;
}

const bs_config_row *bs_config_row_find(const char *key, char *why,
                                        size_t why_size)
{
    if (why_size > 0)
        why[0] = '\0';
    for (size_t i = 0; i < bs_config_nrows; i++) {
        const bs_config_row *row = &bs_config_rows[i];
        if (!bs_config_row_is_pattern(row) && strcmp(row->name, key) == 0)
            return row;
    }
    for (size_t i = 0; i < bs_config_nrows; i++) {
        const bs_config_row *row = &bs_config_rows[i];
        if (!bs_config_row_is_pattern(row))
            continue;
        const char *suffix;
        size_t plen = pattern_split(row, &suffix);
        if (strncmp(key, row->name, plen) != 0)
            continue;
        if (*suffix == '\0') { /* "kafka.*": any non-empty suffix */
            if (key[plen] != '\0')
                return row;
            snprintf(why, why_size, "nothing after '%.*s'", (int)plen,
                     row->name);
            return NULL;
        }
        char name[BS_CONFIG_MAX_KEY + 1];
        if (!bs_config_row_name_of(row, key, name, sizeof name))
            continue;
        if (name[0] == '\0') {
            snprintf(why, why_size, "empty NAME in '%.*sNAME%s'", (int)plen,
                     row->name, suffix);
            return NULL;
        }
        for (const char *p = name; *p; p++) {
            if (!name_char_ok((unsigned char)*p)) {
                snprintf(why, why_size,
                         "NAME '%s' has '%c': a NAME is letters, digits, "
                         "'_' and '-'",
                         name, *p);
                return NULL;
            }
        }
        return row;
    }
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Did you mean                                                              */

size_t bs_config_distance(const char *a, const char *b)
{
    /* Keys are capped at BS_CONFIG_MAX_KEY; longer inputs are compared on
     * that prefix, which is plenty for a suggestion. */
    enum { W = BS_CONFIG_MAX_KEY + 1 };
    size_t la = strnlen(a, BS_CONFIG_MAX_KEY), lb = strnlen(b,
                                                            BS_CONFIG_MAX_KEY);
    /* Three rows of the dynamic-programming table: i-2, i-1, i. */
    size_t rows[3][W];
    for (size_t j = 0; j <= lb; j++)
        rows[0][j] = j;
    size_t *pp = NULL, *p = rows[0], *c = rows[1];
    for (size_t i = 1; i <= la; i++) {
        c[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            size_t best = p[j] + 1;            /* deletion */
            if (c[j - 1] + 1 < best)
                best = c[j - 1] + 1;           /* insertion */
            if (p[j - 1] + cost < best)
                best = p[j - 1] + cost;        /* substitution */
            if (pp && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                pp[j - 2] + 1 < best)
                best = pp[j - 2] + 1;          /* transposition */
            c[j] = best;
        }
        size_t *spare = pp ? pp : rows[2];
        pp = p;
        p = c;
        c = spare;
    }
    return p[lb];
}

/* The candidate a row offers for `key`: the row's name, or for a pattern
 * the pattern filled with the key's own NAME/suffix.  False if none. */
static bool candidate(const bs_config_row *row, const char *key, char *buf,
                      size_t n)
{
    if (!bs_config_row_is_pattern(row))
        return (size_t)snprintf(buf, n, "%s", row->name) < n;
    const char *suffix;
    size_t plen = pattern_split(row, &suffix);
    const char *first = strchr(key, '.');
    if (!first || first[1] == '\0')
        return false;
    if (*suffix == '\0') /* "kafka.*" offers "kafka." + what follows the
                            key's first dot */
        return (size_t)snprintf(buf, n, "%.*s%s", (int)plen, row->name,
                                first + 1) < n;
    /* "blocklist.*.path": the key's NAME guessed as what lies between its
     * first and last dots. */
    const char *last = strrchr(key, '.');
    if (last == first)
        return false;
    return (size_t)snprintf(buf, n, "%.*s%.*s%s", (int)plen, row->name,
                            (int)(last - first - 1), first + 1, suffix) < n;
}

bool bs_config_suggest(const char *key, char *buf, size_t n)
{
    size_t best = 3; /* suggest at distance 1 or 2 only */
    char cand[2 * BS_CONFIG_MAX_KEY + 2];
    for (size_t i = 0; i < bs_config_nrows; i++) {
        if (!candidate(&bs_config_rows[i], key, cand, sizeof cand))
            continue;
        size_t d = bs_config_distance(key, cand);
        if (d == 0 || d >= best || strlen(cand) > BS_CONFIG_MAX_KEY)
            continue;
        /* A candidate must itself be a valid key (not, say, a pattern
         * filled with a NAME that has a dot in it). */
        char why[8];
        if (!bs_config_row_find(cand, why, sizeof why))
            continue;
        if ((size_t)snprintf(buf, n, "%s", cand) >= n)
            continue;
        best = d;
    }
    return best < 3;
}

/* ------------------------------------------------------------------------ */
/* Environment names                                                         */

int bs_config_env_decode(const char *name, char *key, size_t n)
{
    size_t o = 0;
    for (const char *p = name; *p;) {
        char out;
        if (*p == '_') {
            size_t run = strspn(p, "_");
            size_t take = run >= 3 ? 3 : run;
            out = take == 3 ? '-' : take == 2 ? '_' : '.';
            p += take;
        } else {
            out = (char)tolower((unsigned char)*p);
            p++;
        }
        if (o + 1 >= n)
            return -1;
        key[o++] = out;
    }
    if (n == 0)
        return -1;
    key[o] = '\0';
    return 0;
}

int bs_config_env_encode(const char *key, char *name, size_t n)
{
    size_t o = 0;
    for (const char *p = key; *p; p++) {
        const char *rep;
        char one[2] = {(char)toupper((unsigned char)*p), '\0'};
        rep = *p == '.' ? "_" : *p == '_' ? "__" : *p == '-' ? "___" : one;
        size_t len = strlen(rep);
        if (o + len >= n)
            return -1;
        memcpy(name + o, rep, len);
        o += len;
    }
    if (n == 0)
        return -1;
    name[o] = '\0';
    return 0;
}
