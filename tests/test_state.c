/*
 * test_state.c -- the engine's state machine (stage/state.c) on its own:
 * the moves the loop, rounds and rebalances make are legal; an illegal
 * move, and each checked invariant broken, aborts a build with
 * BLOOMSTAGE_CHECKS (tests/stage.cmake builds this binary's engine so),
 * naming what was violated.  Aborts are caught in a forked child.
 *
 * The stage struct is built by hand (zeroed, as bs_stage_new leaves it
 * before its clients exist): state.c touches only states, partitions and
 * the published state.
 */
#include "stage_int.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#ifndef BLOOMSTAGE_CHECKS
#error "test_state needs an engine built with BLOOMSTAGE_CHECKS"
#endif

static bs_stage *stage_new(size_t nparts)
{
    bs_stage *s = calloc(1, sizeof(*s));
    assert_non_null(s);
    if (nparts) {
        s->parts = calloc(nparts, sizeof(*s->parts));
        assert_non_null(s->parts);
        s->nparts = s->capparts = nparts;
        for (size_t i = 0; i < nparts; i++) {
            part *p = &s->parts[i];
            p->topic = strdup("in");
            p->partition = (int32_t)i;
            p->state = BS_PART_RESTORING;
            p->base_offset = p->next_offset = p->ckpt_offset = -1;
            p->committed = -1;
        }
    }
    return s;
}

static void stage_free(bs_stage *s)
{
    for (size_t i = 0; i < s->nparts; i++)
        free(s->parts[i].topic);
    free(s->parts);
    free(s);
}

/* Runs fn(s) in a child; true if the child died of SIGABRT. */
static bool aborts(void (*fn)(bs_stage *), bs_stage *s)
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* The violation's log line is expected: keep the output clean. */
        if (!freopen("/dev/null", "w", stderr))
            _exit(2);
        fn(s);
        _exit(0);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT;
}

/* The moves the engine makes, in an order it can make them. */
static void walk_legal_path(bs_stage *s)
{
    static const bs_stage_state path[] = {
        BS_STAGE_RUNNING,       BS_STAGE_CHECKPOINTING, BS_STAGE_RUNNING,
        BS_STAGE_CHECKPOINTING, BS_STAGE_BACKOFF,       BS_STAGE_CHECKPOINTING,
        BS_STAGE_BACKOFF,       BS_STAGE_REBALANCING,   BS_STAGE_BACKOFF,
        BS_STAGE_CHECKPOINTING, BS_STAGE_RUNNING,       BS_STAGE_REBALANCING,
        BS_STAGE_CHECKPOINTING, BS_STAGE_REBALANCING,   BS_STAGE_RUNNING,
        BS_STAGE_DRAINING,      BS_STAGE_CHECKPOINTING, BS_STAGE_DRAINING,
        BS_STAGE_REBALANCING,   BS_STAGE_DRAINING,      BS_STAGE_STOPPED,
    };
    bs_stage_state prev = s->state;
    for (size_t i = 0; i < sizeof(path) / sizeof(path[0]); i++) {
        assert_int_equal(bs_stage_set_state(s, path[i]), prev);
        assert_int_equal(s->state, path[i]);
        assert_int_equal(atomic_load(&s->pub_state), (int)path[i]);
        prev = path[i];
    }
}

static void test_the_loops_moves_are_legal(void **state)
{
    (void)state;
    bs_stage *s = stage_new(0);
    walk_legal_path(s);
    stage_free(s);
}

static void test_fatal_keeps_the_first_reason(void **state)
{
    (void)state;
    bs_stage *s = stage_new(0);
    bs_stage_set_state(s, BS_STAGE_RUNNING);
    bs_stage_fatal(s, "first: %d", 1);
    bs_stage_fatal(s, "second");
    assert_int_equal(s->state, BS_STAGE_FATAL);
    assert_string_equal(s->err, "first: 1");
    stage_free(s);
}

static void new_to_checkpointing(bs_stage *s)
{
    bs_stage_set_state(s, BS_STAGE_CHECKPOINTING);
}
static void running_to_stopped(bs_stage *s)
{
    bs_stage_set_state(s, BS_STAGE_RUNNING);
    bs_stage_set_state(s, BS_STAGE_STOPPED);
}
static void fatal_to_running(bs_stage *s)
{
    bs_stage_fatal(s, "x");
    bs_stage_set_state(s, BS_STAGE_RUNNING);
}
static void stopped_to_running(bs_stage *s)
{
    bs_stage_set_state(s, BS_STAGE_RUNNING);
    bs_stage_set_state(s, BS_STAGE_DRAINING);
    bs_stage_set_state(s, BS_STAGE_STOPPED);
    bs_stage_set_state(s, BS_STAGE_RUNNING);
}

static void test_illegal_stage_moves_abort(void **state)
{
    (void)state;
    bs_stage *s = stage_new(0);
    assert_true(aborts(new_to_checkpointing, s));
    assert_true(aborts(running_to_stopped, s));
    assert_true(aborts(fatal_to_running, s));
    assert_true(aborts(stopped_to_running, s));
    /* The same moves in legal order do not abort (the helper itself can
     * tell the difference). */
    assert_false(aborts(walk_legal_path, s));
    stage_free(s);
}

static void active_to_waiting(bs_stage *s)
{
    part *p = &s->parts[0];
    p->filter = (bf_filter *)1; /* never dereferenced by state.c */
    bs_part_set_state(s, p, BS_PART_ACTIVE);
    bs_part_set_state(s, p, BS_PART_WAITING_FIRST);
}
static void pending_to_active(bs_stage *s)
{
    part *p = &s->parts[0];
    bs_part_set_state(s, p, BS_PART_RESTORE_PENDING);
    bs_part_set_state(s, p, BS_PART_ACTIVE);
}

static void test_partition_moves(void **state)
{
    (void)state;
    bs_stage *s = stage_new(1);
    part *p = &s->parts[0];
    p->filter = (bf_filter *)1;
    p->ckpt_offset = p->base_offset = p->next_offset = 10;
    bs_part_set_state(s, p, BS_PART_WAITING_FIRST);
    bs_part_set_state(s, p, BS_PART_ACTIVE);
    bs_part_set_state(s, p, BS_PART_RESTORING);
    bs_part_set_state(s, p, BS_PART_RESTORE_PENDING);
    bs_part_set_state(s, p, BS_PART_RESTORING);
    bs_part_set_state(s, p, BS_PART_ACTIVE);
    assert_int_equal(p->state, BS_PART_ACTIVE);
    p->filter = NULL;
    stage_free(s);

    s = stage_new(1);
    assert_true(aborts(active_to_waiting, s));
    assert_true(aborts(pending_to_active, s));
    stage_free(s);
}

/* Each invariant broken on purpose, found at the next transition. */
static void committed_past_checkpoint(bs_stage *s)
{
    s->parts[0].ckpt_offset = 5;
    s->parts[0].next_offset = 9;
    s->parts[0].committed = 7;
    bs_stage_set_state(s, BS_STAGE_RUNNING);
}
static void active_without_filter(bs_stage *s)
{
    bs_part_set_state(s, &s->parts[0], BS_PART_ACTIVE);
}
static void exactly_once_active_without_checkpoint(bs_stage *s)
{
    s->set.guarantee = BS_CONFIG_EXACTLY_ONCE;
    s->parts[0].filter = (bf_filter *)1;
    bs_part_set_state(s, &s->parts[0], BS_PART_ACTIVE);
}
static void checkpoint_past_next(bs_stage *s)
{
    s->parts[0].ckpt_offset = 12;
    s->parts[0].next_offset = 11;
    bs_stage_set_state(s, BS_STAGE_RUNNING);
}

static void test_broken_invariants_abort(void **state)
{
    (void)state;
    bs_stage *s = stage_new(1);
    assert_true(aborts(committed_past_checkpoint, s));
    assert_true(aborts(active_without_filter, s));
    assert_true(aborts(exactly_once_active_without_checkpoint, s));
    assert_true(aborts(checkpoint_past_next, s));
    /* And a partition that satisfies them all does not. */
    s->parts[0].filter = (bf_filter *)1;
    s->parts[0].ckpt_offset = s->parts[0].committed = 5;
    s->parts[0].base_offset = 5;
    s->parts[0].next_offset = 9;
    assert_false(aborts(active_without_filter, s));
    s->parts[0].filter = NULL;
    stage_free(s);
}

static void test_names(void **state)
{
    (void)state;
    assert_string_equal(bs_stage_state_name(BS_STAGE_BACKOFF), "backoff");
    assert_string_equal(bs_stage_state_name(BS_STAGE_NSTATES), "?");
    assert_string_equal(bs_part_state_name(BS_PART_ACTIVE), "active");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_loops_moves_are_legal),
        cmocka_unit_test(test_fatal_keeps_the_first_reason),
        cmocka_unit_test(test_illegal_stage_moves_abort),
        cmocka_unit_test(test_partition_moves),
        cmocka_unit_test(test_broken_invariants_abort),
        cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
