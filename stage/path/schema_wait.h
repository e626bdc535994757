/*
 * schema_wait.h -- partitions that wait for a schema (schema_wait.c): a
 * record whose key part is read with a schema the Schema Registry gives no
 * answer about cannot be decided (neither forwarded nor rejected), so its
 * partition is paused at it; the registry is asked again after a back-off
 * that doubles; when it answers, the partitions resume from the records
 * that waited.  The other partitions go on meanwhile, and /ready answers
 * 503 naming the registry's error.
 */
#ifndef BLOOMSTAGE_SCHEMA_WAIT_H
#define BLOOMSTAGE_SCHEMA_WAIT_H

#include "core/stage_int.h"

/* p (ACTIVE) waits from the record at offset on, which names schema_id;
 * why is the registry's error. */
void bs_schema_wait(bs_stage *s, part *p, int64_t offset, int32_t schema_id,
                    const char *why);

/* Between records: when a wait's back-off is due, asks the registry
 * again; resumes the partitions when it answers.  Also resumes a
 * partition a restore took out of the wait (a rollback or a rebalance:
 * its seek decides where it goes on).  Cheap when nothing waits. */
void bs_schema_wait_check(bs_stage *s);

#endif
