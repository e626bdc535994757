/*
 * outcome.h -- what the end of a round does to the stage (outcome.c): its
 * first failure noted for /ready, its commit taken into the partitions'
 * state, its figures reported, its verdict.  Used by the round itself and
 * by the overlap's settle, which ends a round after its commit is done.
 */
#ifndef BLOOMSTAGE_OUTCOME_H
#define BLOOMSTAGE_OUTCOME_H

#include "core/stage_int.h"

/* The round's first failure, kept for /ready (bs_round hands it on when
 * the round ends); later ones are only logged by their callers. */
__attribute__((format(printf, 2, 3))) void bs_round_note(bs_stage *s,
                                                          const char *fmt,
                                                          ...);
/* A failed step of the round: logged, and noted (topic NULL: not one
 * partition's). */
void bs_round_note_failure(bs_stage *s, const char *topic, int32_t partition,
                           const char *err);

/* What a completed round reports: its size, its duration (with the
 * overlap, until its commit was handed over: the time the stage took no
 * records), the time each phase took (BS_ROUND_PHASES; with the overlap
 * send_offsets and commit ran on the committer's thread) and the time
 * since the round before ended (`between_seconds`, records processed). */
typedef struct bs_round_report {
    const char *why;
    int partitions;
    uint64_t bytes, records;
    double t0, seconds, between; /* t0: when the round began */
    double phase[BS_NPHASES];
    bool overlapped;
} bs_round_report;

/* A round's report as it stands now (its phases so far). */
bs_round_report bs_round_report_now(const bs_stage *s, const char *why,
                                    int partitions, uint64_t bytes,
                                    double t0);
/* A completed round's figures into the metrics and its debug line. */
void bs_round_report_log(bs_stage *s, const bs_round_report *r);

/* After a commit of `commit` (the entries without an error) that made
 * the round's output visible: each partition's committed offset, and the
 * store and the poison notes told. */
void bs_round_committed(bs_stage *s, rd_kafka_topic_partition_list_t *commit);

/* A failed round (one that started at t0): counted, and the start of a
 * failing spell if none runs; why for /ready. */
void bs_verdict_failed(bs_stage *s, double t0, const char *why);
/* A good round: the failing spell, if one runs, ends, and so does the
 * backoff's doubling. */
void bs_verdict_good(bs_stage *s);

#endif
