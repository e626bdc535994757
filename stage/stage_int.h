/*
 * stage_int.h -- what the engine's files share and stage.h hides: the
 * stage's struct, its partitions, its states and counters, and the
 * functions one engine file calls in another.  Only stage/ includes it.
 *
 * Who owns what: the stage thread (the one in bs_stage_run; librdkafka
 * calls back into it from rd_kafka_consumer_poll, rd_kafka_poll and
 * rd_kafka_flush only) owns every field except those marked "any thread",
 * which other threads (metrics, demo) read through report.h's accessors.
 *
 * The engine's files, one concern each, are listed in DESIGN.md (The
 * engine), top layer first, with the state diagram (States).  Each calls
 * only files below it (scripts/check-layers; ctest layers_engine).  This
 * header is below them all: it includes only headers of types and of the
 * modules under the stage (the store contract store_ops.h, replay,
 * blocklists, settings), never stage.h or one of the engine files' own.
 */
#ifndef BLOOMSTAGE_STAGE_INT_H
#define BLOOMSTAGE_STAGE_INT_H

#include "blocklist.h"
#include "checkpoint.h"
#include "counters.h"
#include "dedup_filter.h"
#include "fetch_wake.h"
#include "replay.h"
#include "settings.h"
#include "store_ops.h"
#include "timeouts.h"
#include "txn_id.h"

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

/* A record's keys, hashed, ahead of its processing: taken when the record
 * is polled, used one poll later (record_path.c). */
typedef struct prepared {
    bool have;         /* it has the dedup key: h is its hash */
    bf_hash h;
    bool *list_have;   /* per blocklist: it has that list's key, hashed */
    bf_hash *list_h;
} prepared;

struct bs_stage {
    const bs_config *cfg;
    bs_stage_state state; /* changed only by bs_stage_set_state */
    char err[1024];       /* FATAL: why (bs_stage_fatal) */
    atomic_bool stop;     /* any thread: a drain was requested */

    /* Clients (clients.c). */
    rd_kafka_t *consumer, *producer;
    bool consumer_closed; /* bs_consumer_close ran: the group was left */
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
    bool *list_shares_hash;     /* same key and seed as the dedup filter */
    struct bs_list_feed *feed;  /* live lists' consumer (blocklist_feed.c) */

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
    char dr_error[512];

    /* Round pacing (round.c). */
    uint64_t since_ckpt; /* records processed since the last checkpoint */
    double last_ckpt;
    double backoff, retry_at;
    bool filter_full_logged;
    bool late_logged;
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

/* -- state.c -------------------------------------------------------------- */

const char *bs_stage_state_name(bs_stage_state st);
const char *bs_part_state_name(bs_part_state st);
/* The only ways a state changes: the transition must be legal (checked in
 * builds with BLOOMSTAGE_CHECKS), and the invariants hold after it.
 * Returns the state left. */
bs_stage_state bs_stage_set_state(bs_stage *s, bs_stage_state to);
void bs_part_set_state(bs_stage *s, part *p, bs_part_state to);
/* To FATAL with the reason (the first reason is kept). */
void bs_stage_fatal(bs_stage *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Checks every invariant (state.c lists them); a no-op without
 * BLOOMSTAGE_CHECKS. */
void bs_stage_check_invariants(const bs_stage *s);
/* Transactions, before a commit: every invariant, and 9 as a commit
 * reads it, that no partition's output since its last commit was aborted
 * without the partition rolled back (the commit would pass records whose
 * output is gone).  A no-op without BLOOMSTAGE_CHECKS. */
void bs_stage_check_commit(const bs_stage *s);
/* The round since the last checkpoint cannot be trusted: the next one
 * rolls back (round.c).  The first reason's text is kept for the log.
 * bs_delivery_failed also counts a failed delivery (a report with an error,
 * a record that could not be queued); bs_deliveries_unconfirmed does not
 * (a flush cut short, a producer that failed fatally). */
void bs_delivery_failed(bs_stage *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void bs_deliveries_unconfirmed(bs_stage *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* -- startup.c ------------------------------------------------------------ */

/* Whether a librdkafka error (its code and text) means the brokers refuse
 * the stage's credentials or certificate (authentication, SSL, a TLS alert
 * from the broker): it does not heal by itself. */
bool bs_kafka_error_needs_operator(int err, const char *text);
/* The verdict: give up start-up after bad_for_s seconds of nothing but
 * err (BS_START_GIVE_UP_S, for the errors above and the authorizer's
 * refusals, bs_kafka_refused, only). */
bool bs_startup_gives_up(int err, const char *text, double bad_for_s);
/* Start-up made a step: /ready names it; the error held and the clock of
 * refused logins are reset. */
void bs_startup_step(bs_stage *s, bs_start_step step, const char *topic);
/* An error librdkafka reported (error_cb, a consumer error): shown by
 * /ready while starting; a refused login or a refusal by the authorizer
 * starts the clock. */
void bs_startup_kafka_error(bs_stage *s, int err, const char *text);
/* true, with errstr (one line naming the cause), once the verdict is to
 * give up. */
bool bs_startup_give_up(bs_stage *s, char *errstr, size_t errstr_size);
/* Any thread: true while starting, why (may be NULL) saying at what step
 * and, if one holds it, the error. */
bool bs_startup_why(bs_stage *s, char *why, size_t why_size);
/* Any thread: whether text (under msg) is to be logged now: the first
 * time, then at most every BS_ERROR_LOG_REPEAT_S with the repeats not
 * logged in between. */
bool bs_error_log_due(bs_stage *s, const char *msg, const char *text,
                      uint64_t *repeats);
/* error_cb's line: at most once a BS_ERROR_LOG_REPEAT_S per text; an
 * error for refused logins or handshakes, a warning otherwise. */
void bs_log_kafka_error(bs_stage *s, const char *client, int err,
                        const char *text);
/* The brokers' authorizer refused op (Read, Write) on name (a topic, the
 * group, the transactional id: err says which; bs_refusal_text) to the
 * stage: one error line `msg="not authorized" refused="Write on
 * Topic:NAME" principal=User:USER error=... detail=...` per
 * BS_ERROR_LOG_REPEAT_S (the principal when kafka.sasl.username names it),
 * the refusal kept for /ready, and while starting it holds start-up as a
 * refused login does (bs_startup_kafka_error).  false if err is no
 * refusal. */
bool bs_refused(bs_stage *s, int err, const char *op, const char *name,
                const char *detail);
/* bs_refused for an error of the group consumer: Read on the group, or on
 * topic (an input topic; NULL if the error names none).  One met before
 * start-up subscribes is said again when it does (librdkafka says a
 * FindCoordinator refusal once).  false if err is no refusal. */
bool bs_consumer_refused(bs_stage *s, int err, const char *topic,
                         const char *detail);
/* Any thread: a librdkafka log line (facility ADDPARTS) that may say a
 * transaction could not add a topic's partition, refused by the
 * authorizer: the topic kept for bs_refusals_collect. */
void bs_refusal_from_log(bs_stage *s, const char *fac, const char *text);
/* Stage thread, after a round failed: the refusal kept by
 * bs_refusal_from_log, said (bs_refused: Write on that topic). */
void bs_refusals_collect(bs_stage *s);
/* A round committed: the refusal kept for /ready is forgotten. */
void bs_refusal_healed(bs_stage *s);
/* After a start-up step the brokers refused (bs_refused): BS_OK after a
 * back-off of BS_START_PROBE_MS, to try the step again; BS_RETRY when a
 * stop was requested; BS_FATAL with errstr once nothing but refusals came
 * for BS_START_GIVE_UP_S (bs_startup_give_up). */
bs_rc bs_startup_refusal_wait(bs_stage *s, char *errstr, size_t errstr_size);

/* -- clients.c ------------------------------------------------------------ */

/* The consumers and the store, made without waiting on a broker.
 * rebalance_cb: the consumer's rebalance callback, passed down by stage.c
 * (rebalance.c sits above the clients: its rounds use them). */
bs_rc bs_clients_new(bs_stage *s, bs_rebalance_fn *rebalance_cb,
                     char *errstr, size_t errstr_size);
/* The first connection: the clients' callbacks served (their errors go to
 * the log and to /ready), then the cluster's metadata asked for, waiting
 * up to timeout_ms.  BS_OK once a broker answered, else BS_RETRY. */
bs_rc bs_clients_probe(bs_stage *s, int timeout_ms);
/* What needs a broker: the store checked (a damaged checkpoint stops
 * start-up before anything is consumed), the exactly_once method chosen
 * and the producer made.  BS_FATAL with errstr. */
bs_rc bs_clients_start(bs_stage *s, char *errstr, size_t errstr_size);
void bs_clients_destroy(bs_stage *s);
/* Stops the fetch wake-ups, then rd_kafka_consumer_close; once: a drain
 * that ends in FATAL has closed it already. */
void bs_consumer_close(bs_stage *s);
/* A new idempotent producer (and topic handles) in place of the current
 * one, whose leftovers are purged; with s->txn a transactional one, whose
 * transactions are initialised and one begun (bs_txn_start's outcome: the
 * producer is in place even then). */
bs_rc bs_producer_recreate(bs_stage *s, char *errstr, size_t errstr_size);

/* A librdkafka configuration for one of the stage's clients: defaults, then
 * the kafka.* and ROLE.* keys, then forced (both NULL-terminated pairs). */
rd_kafka_conf_t *bs_client_conf(bs_stage *s, const char *role,
                                const char *const *defaults,
                                const char *const *forced, char *errstr,
                                size_t errstr_size);

/* -- blocklist_feed.c ----------------------------------------------------- */

typedef struct bs_list_feed bs_list_feed;
/* Live lists' topics checked (exist, compacted) and read to their end,
 * before the input is subscribed; the brokers refusing a topic's Read or
 * DescribeConfigs hold it as start-up holds refusals.  BS_FATAL with
 * errstr; BS_RETRY when a stop was requested while refused. */
bs_rc bs_lists_start(bs_stage *s, char *errstr, size_t errstr_size);
/* Updates that arrived since, applied in order (no record held). */
void bs_lists_follow(bs_stage *s);
void bs_lists_destroy(bs_stage *s);

/* -- partitions.c --------------------------------------------------------- */

part *bs_part_find(bs_stage *s, const char *topic, int32_t partition);
part *bs_part_add(bs_stage *s, const char *topic, int32_t partition);
void bs_part_remove(bs_stage *s, const char *topic, int32_t partition);
void bs_part_free(part *p);
/* Restores parts[0..n) (pointers into s->parts) to their last checkpoint:
 * filter and offsets from the store and, with exactly_once, the output
 * tail since (replay.h).  BS_FATAL: a checkpoint that cannot be used;
 * BS_RETRY: the output tail could not be read (the partitions are left
 * RESTORE_PENDING).  Either way their records must not be processed. */
bs_rc bs_parts_restore(bs_stage *s, part **parts, size_t n, char *errstr,
                       size_t errstr_size);
/* Logs where p's state came from: `msg` with checkpoint_offset and
 * already_forwarded, or restore=pending while its restore waits (a
 * "partition restored" line follows the retry, round.c). */
void bs_part_log_restored(const part *p, const char *msg);
/* exactly_once: a first checkpoint for a partition that has none. */
bs_rc bs_part_initial_checkpoint(bs_stage *s, part *p, char *errstr,
                                 size_t errstr_size);
/* True when some partition's durable checkpoint is not committed yet. */
bool bs_parts_commit_behind(const bs_stage *s);
/* Transactions: whether p has output in the open transaction (records
 * processed since its last commit or restore). */
bool bs_part_in_txn(const part *p);
/* Transactions: the open transaction was aborted (or its producer
 * replaced): every partition with output in it is marked txn_aborted. */
void bs_parts_txn_aborted(bs_stage *s);
/* Transactions: a transaction committed; every partition's output so far
 * is in it. */
void bs_parts_txn_committed(bs_stage *s);

/* bs_store_sync of s's store; a write the brokers refused (the Kafka
 * store's own producer: BS_STORE_REFUSED) said by bs_refused. */
int bs_ckpt_sync(bs_stage *s, char *errstr, size_t errstr_size);

/* -- round.c -------------------------------------------------------------- */

/* One checkpoint round for the partitions in `only` (NULL: all): flush and
 * check deliveries, write each changed partition, commit exactly what was
 * written.  BS_OK, or BS_RETRY if anything failed (nothing is committed for
 * a partition whose checkpoint was not written); FATAL is entered, not
 * returned, when going on is unsafe. */
bs_rc bs_round(bs_stage *s, const rd_kafka_topic_partition_list_t *only,
                    const char *why);
/* A round from the loop: on failure to BACKOFF (paused, retried with
 * exponential backoff), on success back to RUNNING. */
void bs_round_from_loop(bs_stage *s, const char *why);
/* From RUNNING (or a rebalance) to BACKOFF: pause and schedule a retry. */
void bs_backoff_start(bs_stage *s);
/* Pauses or resumes every assigned partition (a resume seeks each to where
 * this stage's own state says it is). */
void bs_pause_all(bs_stage *s, bool pause);

/* Every partition back to the last state it committed (invariant 3):
 * with transactions the open one is aborted first.  pending: only the
 * partitions RESTORE_PENDING are restored, and the open transaction and
 * the failures noted for the round are kept (round.c). */
void bs_rollback(bs_stage *s, bool pending);

/* -- txn.c ------------------------------------------------------------------ */

/* After the producer is made (bs_producer_recreate): with s->txn, its
 * transactions initialised (this fences an earlier producer with the same
 * transactional.id and aborts what it left open) and one begun.  With
 * errstr: BS_RETRY if the broker did not answer (retried for a minute
 * first), BS_FATAL if it refused. */
bs_rc bs_txn_start(bs_stage *s, char *errstr, size_t errstr_size);
/* s->txn_id from exactly_once.transactional.id, else
 * bloomstage-GROUP-INSTANCE with consumer.group.instance.id, else
 * bloomstage-GROUP-HOST-slotN with a host slot taken in slot_dir (NULL:
 * bs_txn_slot_dir(); txn_id.h) and held in s->txn_slot until
 * bs_clients_destroy, else (no slot to be had) one unique to the process.
 * Logged. */
void bs_txn_id(bs_stage *s, const char *slot_dir);
/* Before a fatal producer is replaced: a fencing of its transactional id
 * is noted, and BS_FATAL (errstr, and an error logged naming the id) when
 * it makes BS_TXN_FENCED_MAX within BS_TXN_FENCED_WINDOW_S: another live
 * instance has the same id, and the two would fence each other for as
 * long as both run.  One fencing (a zombie's) is BS_OK. */
bs_rc bs_txn_fenced_check(bs_stage *s, char *errstr, size_t errstr_size);
/* Begins a transaction unless one is open.  false: the producer cannot
 * (it is fatal; the next round rolls back and replaces it). */
bool bs_txn_begin(bs_stage *s);
/* Sends `offsets` with the consumer group's metadata and commits the
 * open transaction.  BS_OK: committed.  Otherwise errstr says why and the
 * transaction is not committed: the caller rolls back (bs_rollback ends
 * it).  Crash points after-send-offsets and after-commit are here. */
bs_rc bs_txn_commit(bs_stage *s, rd_kafka_topic_partition_list_t *offsets,
                    char *errstr, size_t errstr_size);
/* Whether a librdkafka error means this instance was fenced: another one
 * owns its partitions now, or its transaction timed out. */
bool bs_txn_fenced_error(rd_kafka_resp_err_t err);

/* -- rebalance.c ---------------------------------------------------------- */

void bs_rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                     rd_kafka_topic_partition_list_t *parts, void *opaque);

/* -- record_path.c -------------------------------------------------------- */

/* Holds m (just polled, no error) and processes the record held before. */
void bs_record_hold(bs_stage *s, rd_kafka_message_t *m);
/* The held record, processed now (unless consumption is paused or the
 * stage is FATAL: the resume's seek brings it back), then destroyed. */
void bs_record_release(bs_stage *s);

/* -- report.c ------------------------------------------------------------- */

/* Recomputes the filter gauges and publishes the partition view. */
void bs_publish(bs_stage *s);
/* The periodic stats log line and the live status line on a terminal. */
void bs_report(bs_stage *s, double now);
/* A round's duration into the histogram. */
void bs_report_round(bs_stage *s, double seconds);
int bs_stats_cb(rd_kafka_t *rk, char *json, size_t len, void *opaque);

#endif
