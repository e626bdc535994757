/*
 * stage.h -- the stage: consume input topics in a consumer group, drop
 * blocklisted and duplicate records, produce the rest to the output topic,
 * and commit offsets only after the filter state that covers them is
 * durable in the checkpoint store, a directory or a compacted Kafka topic
 * (DESIGN.md, "The engine" and "Checkpoint, then commit").
 *
 *   bs_stage_new    settings, blocklists' files: nothing waits on a broker
 *   bs_stage_run    start-up (clients, topics, live lists, the group),
 *                   then the poll loop, until bs_stage_stop or a fatal
 *                   error
 *   bs_stage_stop   async-signal-safe and thread-safe request to drain
 *   report.h        what it tells other threads while it runs: counters,
 *                   partitions, readiness, blocklists (included here)
 *
 * The stage borrows the configuration, which must outlive it.
 */
#ifndef BLOOMSTAGE_STAGE_H
#define BLOOMSTAGE_STAGE_H

#include "ops/report.h" /* what it tells other threads */

#include <config.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct bs_stage bs_stage;

/* NULL with errstr on a bad configuration or an unloadable blocklist.
 * Nothing is consumed, and no broker is asked, before run. */
bs_stage *bs_stage_new(const bs_config *cfg, char *errstr,
                       size_t errstr_size);

/* Starts (readiness says at what step, report.h), then runs until
 * stopped: drains (finishes the batch, flushes, checkpoints, commits),
 * leaves the group, returns 0; stopped while it waits for a broker to
 * answer, it returns 0 at once.  Returns -1 with errstr on a fatal error
 * (e.g. a damaged checkpoint, a client that cannot be created, credentials
 * the brokers refuse for BS_START_GIVE_UP_S), having committed nothing it
 * should not have. */
int bs_stage_run(bs_stage *s, char *errstr, size_t errstr_size);

void bs_stage_stop(bs_stage *s);
void bs_stage_destroy(bs_stage *s);

#endif
