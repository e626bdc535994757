/*
 * record_path.h -- what happens to each consumed record (record_path.c): its
 * keys taken, its blocklists and dedup filter asked, the record produced
 * or dropped.
 */
#ifndef BLOOMSTAGE_RECORD_PATH_H
#define BLOOMSTAGE_RECORD_PATH_H

#include "core/stage_int.h"

/* Holds m (just polled, no error) and processes the record held before. */
void bs_record_hold(bs_stage *s, rd_kafka_message_t *m);
/* The held record, processed now (unless consumption is paused or the
 * stage is FATAL: the resume's seek brings it back), then destroyed. */
void bs_record_release(bs_stage *s);

#endif
