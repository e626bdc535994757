/*
 * timeouts.h -- every wait the engine makes on a broker, and the loop's
 * pacing, named once.  Nothing waits on Kafka without one of these bounds
 * (librdkafka's own message.timeout.ms bounds deliveries).
 */
#ifndef BLOOMSTAGE_TIMEOUTS_H
#define BLOOMSTAGE_TIMEOUTS_H

#define BS_TIMEOUT_BROKER_MS 10000  /* one metadata, watermark, committed
                                       or seek request */
#define BS_REPLY_GRACE_MS 2000      /* an admin reply, past its request's
                                       own timeout: the answer's way back */
#define BS_TIMEOUT_REPLAY_MS 120000 /* reading an output tail to its end */
#define BS_TIMEOUT_TXN_STABLE_MS 90000 /* transactions: committed offsets a
                                          previous owner's open transaction
                                          holds back (its
                                          transaction.timeout.ms ends it) */
#define BS_TIMEOUT_FINAL_FLUSH_MS 10000 /* the producer, after the drain */
#define BS_TIMEOUT_FIRST_REBALANCE_MS 3000 /* a consumer stopped between
                                        its group's JoinGroup and SyncGroup
                                        answers: its first rebalance,
                                        before it is closed (clients.c) */
#define BS_TIMEOUT_PURGE_FLUSH_MS 1000  /* a fatal producer's leftovers */
#define BS_FLUSH_STEP_MS 500        /* a flush is waited for in steps */
#define BS_POLL_MS 100              /* one consumer poll */
#define BS_QUEUE_FULL_POLL_MS 50    /* producer queue full: serve reports */
#define BS_READY_STALL_S 10.0       /* /ready: the loop must have turned */
#define BS_READY_CKPT_GRACE_S 10.0  /* /ready: checkpoints may fail for
                                       max(2 intervals, an interval + this)
                                       from the first failed round's start
                                       (bs_ready_bound_s, report.h) */
#define BS_BACKOFF_MIN_S 0.5        /* failed rounds: retry after ... */
#define BS_BACKOFF_MAX_S 30.0       /* ... doubling up to this */
#define BS_SCHEMA_WAIT_MIN_S 0.5    /* a registry that gave no answer: asked
                                       again after ... */
#define BS_SCHEMA_WAIT_MAX_S 10.0   /* ... doubling up to this */
#define BS_REGISTRY_NEGATIVE_TTL_MS 10000 /* a registry's "no such schema
                                             id" believed this long */
#define BS_BOOKKEEPING_EVERY 64     /* records between bookkeeping turns */
#define BS_BOOKKEEPING_MAX_MS 50    /* ... or this long, whichever first */
#define BS_DRAIN_ATTEMPTS 5         /* final checkpoint rounds at most */
#define BS_SEEK_ATTEMPTS 5          /* a failed seek is made again */
#define BS_SEEK_RETRY_MS 20         /* ... after this, doubling: a spurious
                                       seek timeout passes in milliseconds */
#define BS_COMMITTED_RETRY_MIN_MS 50   /* offsets an open transaction holds
                                          back: asked again after this ... */
#define BS_COMMITTED_RETRY_MAX_MS 1000 /* ... doubling up to this: its abort
                                          takes seconds */
#define BS_COMMITTED_CKPT_RETRY_MS 500 /* the same for a committed checkpoint
                                          (a restore from the topic each) */
#define BS_TXN_TIMEOUT_INTERVALS 4  /* transaction.timeout.ms: intervals a
                                       live instance's transaction outlasts */
#define BS_TXN_TIMEOUT_MIN_MS 15000 /* ... at least this: with a short
                                       interval a round still takes seconds */
#define BS_TXN_TIMEOUT_MAX_MS 900000 /* ... at most: brokers' default
                                        transaction.max.timeout.ms */
#define BS_TXN_FENCED_MAX 5         /* fencings of the producer within ...*/
#define BS_TXN_FENCED_WINDOW_S 300.0 /* ... this long: its transactional id
                                        is shared by another live instance,
                                        and the stage stops (txn.c) */
#define BS_TIMEOUT_WAKE_MS 1000     /* fetch_wake.c's ListOffsets: only so
                                       that wake-ups do not pile up */
#define BS_START_PROBE_MS 500       /* start-up: one wait for a broker to
                                       answer, the callbacks served after */
#define BS_START_GIVE_UP_S 45.0     /* start-up ends after this long of
                                       nothing but refused logins, SSL
                                       handshakes or ACLs (startup.c): an
                                       exit within a minute of the start */
#define BS_ERROR_LOG_REPEAT_S 60.0  /* one error text logged again at most
                                       this often, with its repeats */
#define BS_AUDIT_WARN_REPEAT_S 60.0 /* a partition's "measured fpr above
                                       dedup.fpr" warning, at most this
                                       often while it holds (report.c) */

#define BS_TIMEOUT_STORE_ADMIN_MS 5000 /* the Kafka store's topic checks */
#define BS_TIMEOUT_TOPIC_KNOWN_MS 30000 /* a topic just created, until the
                                           broker asked knows it */
#define BS_TOPIC_KNOWN_RETRY_MS 500 /* ... asked again after this: brokers
                                       learn of it by their metadata */
#define BS_TOPIC_CREATED_ATTEMPTS 100 /* a topic this store created: its
                                         partitions asked for this often
                                         (a broker just started takes
                                         seconds to lead them) ... */
#define BS_TOPIC_CREATED_RETRY_MS 300 /* ... this far apart */
#define BS_TIMEOUT_STORE_READ_MS 60000 /* one range of the checkpoint topic */
#define BS_STORE_FLUSH_LOG_S 5.0    /* a checkpoint flush this slow is logged,
                                       each step, until it ends */
#define BS_TIMEOUT_LISTS_MS 120000 /* blocklist topics read to their end:
                                      the longest wait for the next record */
#define BS_LISTS_FOLLOW_MAX 1000 /* list updates applied in one turn */

#endif
