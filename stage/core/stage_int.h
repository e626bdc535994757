/*
 * stage_int.h -- what the engine's files share and stage.h hides: the
 * stage's struct, its partitions, its states and the result codes.  Each
 * module's functions are declared in its own header (core/state.h,
 * loop/round.h, ...).  Only stage/ includes it.
 *
 * Who owns what: the stage thread (the one in bs_stage_run; librdkafka
 * calls back into it from rd_kafka_consumer_poll, rd_kafka_poll and
 * rd_kafka_flush only) owns every field except those marked "any thread",
 * which other threads (metrics, demo) read through report.h's accessors.
 *
 * The engine's rooms and files, one concern each, are listed in DESIGN.md
 * (The engine), top layer first, with the state diagram (States).  Each
 * calls only files below it (scripts/check-layers --rooms; ctest
 * layers_engine).  This header is in core/, below every file that uses
 * the struct: it includes only headers of types of the rooms under it
 * (the store contract store_ops.h, replay, blocklists, settings), never
 * stage.h or a header of a room above.
 */
#ifndef BLOOMSTAGE_STAGE_INT_H
#define BLOOMSTAGE_STAGE_INT_H

#include "keys/blocklist.h"
#include "checkpoint/checkpoint.h"
#include "base/counters.h"
#include "keys/dedup_filter.h"
#include "kafka/fetch_wake.h"
#include "checkpoint/replay.h"
#include "base/settings.h"
#include "store/store_ops.h"
#include "base/timeouts.h"
#include "kafka/txn_id.h"

#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdatomic.h>

#define BS_HDR_REASON "bloomstage-reason"

/* stage.h's handle; the struct is below. */
typedef struct bs_stage bs_stage;

/* -- results ------------------------------------------------------------- */

/* One error convention inside the engine: a function that can fail returns
 * a bs_rc and writes what failed into the caller's errstr[errstr_size].
 * BS_RETRY: the state is intact, the same step may succeed later (a broker
 * that did not answer); BS_FATAL: going on could lose or duplicate records
 * (a damaged checkpoint, no memory). */
typedef enum bs_rc { BS_OK = 0, BS_RETRY = -1, BS_FATAL = -2 } bs_rc;

/* -- states (state.c) ----------------------------------------------------- */

typedef enum bs_stage_state {
    BS_STAGE_NEW = 0,      /* built, not run */
    BS_STAGE_RUNNING,      /* polling and processing */
    BS_STAGE_CHECKPOINTING, /* a round: flush, write, commit (round.c) */
    BS_STAGE_REBALANCING,  /* inside the rebalance callback */
    BS_STAGE_BACKOFF,      /* a round failed: consumption paused until
                              retry_at, then another round */
    BS_STAGE_DRAINING,     /* stop requested: final rounds, leave group */
    BS_STAGE_STOPPED,      /* run returned 0 */
    BS_STAGE_FATAL,        /* unrecoverable: commits nothing more, every
                              later bs_stage_run fails with s->err */
    BS_STAGE_NSTATES
} bs_stage_state;

typedef enum bs_part_state {
    BS_PART_RESTORING = 0, /* assigned or rolled back: its checkpoint is
                              being loaded; no filter to use yet */
    BS_PART_WAITING_FIRST, /* exactly_once: its first checkpoint could not
                              be written yet; paused, nothing processed */
    BS_PART_ACTIVE,        /* its records are processed */
    BS_PART_RESTORE_PENDING, /* a rollback could not read the output
                              tail: nothing processed until it can */
    BS_PART_SCHEMA_WAIT,   /* a record's schema could not be fetched (the
                              registry gave no answer): paused at that
                              record, nothing more processed until the
                              registry answers (schema_wait.c) */
    BS_PART_NSTATES
} bs_part_state;

/* Start-up's steps (startup.c), in their order; /ready names the step
 * until DONE. */
typedef enum bs_start_step {
    BS_START_CONNECTING = 0, /* clients made, no broker answered yet */
    BS_START_CLIENTS,        /* the checkpoint store, the producer */
    BS_START_TOPICS,         /* the topics produced to must exist */
    BS_START_LISTS,          /* live blocklists read to their end */
    BS_START_JOINING,        /* subscribed, no partitions yet */
    BS_START_DONE            /* partitions assigned: processing */
} bs_start_step;

/* An error text logged (startup.c's rate limit). */
#define BS_ERRORS_SEEN 16
typedef struct bs_error_seen {
    char key[240];   /* the message and the text, normalised */
    double last_log; /* bs_now() when last logged */
    uint64_t repeats; /* not logged since */
} bs_error_seen;

/* The consumer's rebalance callback, as rd_kafka_conf_set_rebalance_cb
 * takes it. */
typedef void bs_rebalance_fn(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                             rd_kafka_topic_partition_list_t *parts,
                             void *opaque);

/* -- one assigned input partition ---------------------------------------- */

typedef struct part {
    char *topic;
    int32_t partition;
    bs_part_state state; /* changed only by bs_part_set_state */
    bf_filter *filter;   /* the dedup filter, scalable or windowed
                            (dedup_filter.h); NULL while RESTORING */
    bf_audit *audit;     /* its audit sample (dedup.audit.rate), restored
                            and checkpointed with it; NULL: off */
    uint64_t rescued;    /* sampled false positives forwarded since the
                            partition was assigned (dedup.audit.rescue) */
    double audit_warned; /* bs_now() of its last "above dedup.fpr"
                            warning; 0: none */
    int64_t base_offset; /* where a rollback resumes: the last checkpoint's
                            offset, else the first offset consumed; -1 none */
    int64_t next_offset; /* after the last record processed; -1 none */
    int64_t ckpt_offset; /* in the newest durable checkpoint; -1 none */
    int64_t committed;   /* the last offset committed by this stage; -1 */
    int64_t txn_from;    /* transactions: next_offset when the last
                            transaction committed or the partition was
                            restored; the records from here to next_offset
                            have their output in the open transaction */
    bool txn_aborted;    /* transactions: that output was aborted; the
                            partition is rolled back before anything more
                            is processed or committed (invariant 9) */
    int64_t lag;         /* consumer lag from librdkafka's stats; -1 none */
    int64_t redo_to;     /* the furthest next_offset a restore took back
                            (a rollback): those records are owed again
                            until a checkpoint reaches them; -1 none */
    double committed_at; /* unix time of its last commit by this stage, or
                            of its assignment before the first */
    int64_t wait_at;     /* paused for a schema: the offset of the record
                            that waits (fetched again on resuming); -1 */
    /* exactly_once: the output watermarks of the newest checkpoint, and the
     * input offsets the output tail showed as forwarded already (sorted;
     * consumed as the partition catches up). */
    bs_ckpt_wm *wm;
    uint32_t nwm;
    int64_t *skip;
    bs_replay_key *skip_keys; /* windowed: each skip entry's key, added
                                 when consumption reaches it (replay.h) */
    size_t nskip, skip_i;
} part;

/* The copies of an input record the record path can produce, in the
 * order it tries them (poison.h): to output.topic; to rejected.topic
 * whole, without its value, bare (its coordinates and reason, no key,
 * value or headers of its own); NONE: no copy can be produced. */
typedef enum bs_copy {
    BS_COPY_OUTPUT = 0,
    BS_COPY_WHOLE,
    BS_COPY_NO_VALUE,
    BS_COPY_BARE,
    BS_COPY_NONE
} bs_copy;

/* An input record whose copy a delivery report refused for good
 * (poison.c): the copy to produce when it comes again, and the reason its
 * rejected copy carries. */
typedef struct bs_poison {
    char *topic;
    int32_t partition;
    int64_t offset;
    bs_copy next;
    bool alone;       /* its output copy was sent again alone (flushed
                         before and after): its own refusal, not its
                         batch's, decides from then on */
    int err;          /* the refusal (rd_kafka_resp_err_t) */
    char reason[128];
} bs_poison;

/* A record's keys, hashed, ahead of its processing: taken when the record
 * is polled, used one poll later (record_path.c). */
typedef struct prepared {
    bool have;         /* it has the dedup key: h is its hash */
    bf_hash h;
    /* A key part's schema could not be fetched: the record waits (its
     * partition paused) for the registry, wait_schema the id it names. */
    bool wait;
    int32_t wait_schema;
    /* A key read with a schema could not be read (bad) or had nothing at
     * its path: why says which, for the reason header; or the registry's
     * error when waiting.  "" otherwise. */
    bool bad;
    char why[200];
    /* Per blocklist i: the lookups its key takes (0: no such key), their
     * hashes at list_h[s->list_at[i]] on (one for an exact list, the
     * domain's and its parents' for a domain list). */
    unsigned *list_n;
    bf_hash *list_h;
} prepared;

struct bs_stage {
    const bs_config *cfg;
    bs_stage_state state; /* changed only by bs_stage_set_state */
    char err[BS_ERRSTR_SIZE];       /* FATAL: why (bs_stage_fatal) */
    atomic_bool stop;     /* any thread: a drain was requested */

    /* Clients (clients.c). */
    rd_kafka_t *consumer, *producer;
    bool consumer_closed; /* bs_consumer_close ran: the group was left */
    bool subscribed;      /* the consumer joins the group */
    bool rebalanced;      /* its rebalance callback has been called */
    /* The group's rebalance protocol is COOPERATIVE, as its last
     * rebalance said (rebalance.c: librdkafka stops saying it in a close). */
    bool rebalance_cooperative;
    /* exactly_once by transactions (txn.c): decided once at start-up
     * (exactly_once.method); the producer is transactional and a
     * transaction is open whenever txn_open. */
    bool txn;
    bool txn_ready; /* the producer's init_transactions succeeded */
    bool txn_open;
    char txn_id[300];
    bs_txn_slot txn_slot;          /* the host slot behind a default id */
    bs_fence_window txn_fencings; /* the producer's recent fencings */
    rd_kafka_topic_t *out_rkt, *rej_rkt; /* handles: no lookup per record */
    /* exactly_once.overlap (overlap.c): the second transactional producer,
     * which takes turns with the current one (bs_producers_swap
     * exchanges the two): idle, or committing the last round's
     * transaction on the committer's thread while the current one
     * produces the next.  Its fields mirror the current one's. */
    struct bs_spare {
        rd_kafka_t *rk;
        rd_kafka_topic_t *out_rkt, *rej_rkt;
        bool txn_ready, txn_open;
        bool broken; /* its commit failed: replaced by the next rollback */
        char txn_id[300];
    } spare;
    struct bs_committer *committer;
    struct bs_inflight *inflight; /* the round whose commit runs (overlap.c) */
    rd_kafka_t *tail;     /* reads the output tail and the Kafka store */
    bs_store *store;      /* where checkpoints go (store.h) */
    bs_fetch_wake *fwake; /* keeps the consumer fetching (fetch_wake.h) */

    bs_settings set;            /* read once from cfg (settings.h) */
    bf_scalable_params fparams; /* the dedup filters', from set */
    bs_dedup_params dedup;      /* the same, with the window */
    int out_parts;              /* output.topic's partitions */

    bs_blocklist *lists;
    size_t nlists;
    bs_counter *list_drops;     /* any thread */
    bool *list_shares_hash;     /* same key, normalization and seed as
                                   the dedup filter, exact match */
    size_t *list_at;            /* where list i's hashes start in a
                                   prepared's list_h */
    struct bs_list_feed *feed;  /* live lists' consumer (blocklist_feed.c) */

    /* avro: and protobuf: key parts' schemas (framed.h); NULL: no key
     * spec reads one. */
    struct bs_framed *framed;
    /* Partitions paused for a schema the registry gave no answer about
     * (schema_wait.c): how many, the schema id asked for again and when,
     * the back-off between asks. */
    size_t nwaiting;
    int32_t wait_schema;
    double wait_retry_at, wait_backoff;

    /* The record polled last, not processed yet (its filter blocks on their
     * way to the cache), and the two prepared slots (next and held). */
    rd_kafka_message_t *held;
    prepared prep[2];
    unsigned held_slot;

    part *parts;
    size_t nparts, capparts;
    size_t last_hit; /* cache for part lookup */

    /* Deliveries since the last checkpoint that failed (the producer's
     * reports, a record that could not be queued, a fatal producer): the
     * next round rolls back instead of checkpointing.  The first failure's
     * text says why. */
    uint64_t dr_failed;
    char dr_error[BS_ERRSTR_SIZE];

    /* Records a delivery report refused for good (poison.c), until a
     * commit passes them; the topics' max.message.bytes read at start-up
     * (0: unknown, librdkafka's message.max.bytes alone decides). */
    bs_poison *poison;
    size_t npoison, cappoison;
    int64_t out_max_bytes, rej_max_bytes;

    /* Round pacing (round.c). */
    uint64_t since_ckpt; /* records processed since the last checkpoint */
    double last_ckpt;
    /* The round in progress, timed by phase (bs_round_lap): seconds per
     * phase, and when the last lap ended. */
    double round_phase[BS_NPHASES], round_lap;
    double backoff, retry_at;
    bool filter_full_logged;
    bool late_logged;
    double undecodable_logged; /* bs_now() of the last such line */
    bool audit_full_logged;

    /* Reporting (report.c). */
    double last_stats, last_status, last_publish;
    uint64_t stats_in_before, status_in_before;

    /* What other threads may read: published by the stage thread. */
    pthread_mutex_t pub_lock;
    struct bs_part_metrics *pub; /* under pub_lock (report.h) */
    size_t npub, cappub;
    _Atomic int64_t last_poll_ms; /* any thread: loop liveness */
    _Atomic int pub_state;        /* any thread: s->state, published */
    bs_counter ckpt_hist[BS_CKPT_BUCKETS];
    bs_counter ckpt_rounds, ckpt_sum_us;
    bs_counter phase_us[BS_NPHASES]; /* those rounds' time by phase */
    /* Checkpoint health (round.c and outcome.c write, report.c reads for
     * /ready; any thread): the ms (bs_now) the first failed round since
     * the last good one began, 0 none; the ms the round in progress
     * began, 0 none; the last failure's text (under pub_lock). */
    _Atomic int64_t failing_since_ms;
    _Atomic int64_t round_since_ms;
    char ckpt_why[400];
    char round_err[400]; /* stage thread: this round's first failure */
    /* Partitions waiting for a schema (schema_wait.c; under pub_lock):
     * /ready is 503 saying this while it is not "". */
    char wait_why[400];
    bs_counters ctr; /* any thread: counters.h */

    /* Start-up (startup.c): the step (any thread) and the topic it checks
     * (borrowed from set), the error that holds it (under pub_lock), since
     * when nothing but a refused login or handshake; the error texts
     * logged (under err_lock: librdkafka logs from its threads). */
    _Atomic int start_step;
    const char *_Atomic start_topic;
    char start_why[400];
    bool start_why_refused;
    int start_bad_err;
    double start_bad_since;
    /* The last refusal by the brokers' authorizer (bs_refused; under
     * pub_lock): /ready is 503 saying it until a start-up step or a
     * round's commit goes through (bs_refusal_healed). */
    char refused_why[400];
    int refused_err; /* the last refusal's error (stage thread) */
    /* A refusal the group consumer met before start-up joined (librdkafka
     * says a FindCoordinator refusal once): said again when it does. */
    int early_refused_err;
    char early_refused_name[256], early_refused_detail[300];
    /* A topic a transaction could not add a partition of, refused by the
     * authorizer: librdkafka says which only in its log (log_cb, any
     * thread; under err_lock), bs_refusals_collect says it. */
    char txn_refused_topic[256];
    pthread_mutex_t err_lock;
    bs_error_seen seen[BS_ERRORS_SEEN];
};

static inline bool bs_exactly_once(const bs_stage *s)
{
    return s->set.guarantee == BS_CONFIG_EXACTLY_ONCE;
}

/* exactly_once by output-tail replay (replay.h): exactly_once without
 * transactions. */
static inline bool bs_replay_mode(const bs_stage *s)
{
    return bs_exactly_once(s) && !s->txn;
}

#endif
