/*
 * publish.h -- the stage thread's side of what the stage tells the
 * world (publish.c): the counters and partitions published for other
 * threads' readers (report.h), the stats log line, round durations and
 * their phases, and librdkafka's statistics callback.
 */
#ifndef BLOOMSTAGE_PUBLISH_H
#define BLOOMSTAGE_PUBLISH_H

#include "core/stage_int.h"

/* Recomputes the filter gauges and publishes the partition view. */
void bs_publish(bs_stage *s);
/* The periodic stats log line and the live status line on a terminal. */
void bs_report(bs_stage *s, double now);
/* A round begins at t0 (bs_now()): its phases' times start at 0. */
void bs_round_clock_start(bs_stage *s, double t0);
/* The time since the round's last lap (or its start) added to `phase`. */
void bs_round_lap(bs_stage *s, bs_round_phase phase);
/* A phase its caller timed itself (seconds), added to `phase`; the next
 * lap starts now. */
void bs_round_lap_timed(bs_stage *s, bs_round_phase phase, double seconds);
/* A completed round's duration into the histogram, and its phases' times
 * (phase[BS_NPHASES]) into their totals. */
void bs_report_round(bs_stage *s, const double *phase, double seconds);
int bs_stats_cb(rd_kafka_t *rk, char *json, size_t len, void *opaque);

#endif
