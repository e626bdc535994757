/*
 * test_state.c -- the engine's state machine (stage/core/state.c) on its own:
 * the moves the loop, rounds and rebalances make are legal; an illegal
 * move, and each checked invariant broken, aborts a build with
 * BLOOMSTAGE_CHECKS (tests/stage.cmake builds this binary's engine so),
 * naming what was violated.  Aborts are caught in a forked child.  The
 * lists of legal moves in DESIGN.md (States) are exactly what state.c
 * allows, both ways.
 *
 * The stage struct is built by hand (zeroed, as bs_stage_new leaves it
 * before its clients exist): state.c touches only states, partitions and
 * the published state.
 */
#include "core/stage_int.h"
#include "core/state.h"
#include "core/partitions.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#ifndef BLOOMSTAGE_CHECKS
#error "test_state needs an engine built with BLOOMSTAGE_CHECKS"
#endif
#ifndef BS_DESIGN_MD
#error "test_state needs BS_DESIGN_MD, the path of DESIGN.md"
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
            p->committed = p->txn_from = -1;
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

/* Runs fn(s) in a child; true if the child died of SIGABRT.  A child that
 * ends any other way than SIGABRT or exit 0 fails the test. */
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
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT)
        return true;
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    return false;
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
/* Transactions: records 5..8 processed, their output in the transaction,
 * which is then aborted without the partition rolled back. */
static void txn_aborted_kept(bs_stage *s)
{
    s->txn = s->txn_open = true;
    s->parts[0].txn_from = 5;
    bs_parts_txn_aborted(s);
}
static void running_past_aborted(bs_stage *s)
{
    txn_aborted_kept(s);
    s->parts[0].state = BS_PART_ACTIVE;
    bs_stage_set_state(s, BS_STAGE_RUNNING);
}
static void commit_past_aborted(bs_stage *s)
{
    txn_aborted_kept(s);
    bs_stage_check_commit(s);
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
    /* 9: the partition with output in the aborted transaction; none
     * processed since its last commit (txn_from at next) is left alone. */
    assert_true(aborts(running_past_aborted, s));
    assert_true(aborts(commit_past_aborted, s));
    s->parts[0].next_offset = 5;
    assert_false(aborts(running_past_aborted, s));
    assert_false(aborts(commit_past_aborted, s));
    s->parts[0].filter = NULL;
    stage_free(s);
}

/* -- DESIGN.md's lists of moves against state.c's tables ------------------
 *
 * DESIGN.md (States) lists every legal move in two fenced blocks,
 * ```stage-transitions and ```partition-transitions, one line each:
 * `FROM -> TO: function`, with `A|B` for several states on either side.
 * Each list must be exactly the set of moves state.c allows: a move listed
 * and refused, or allowed and not listed, fails the test by name.  Legality
 * is probed as the engine meets it: the move made in a child, which aborts
 * on an illegal one. */

#define MAX_STATES                                                            \
    ((int)BS_STAGE_NSTATES > (int)BS_PART_NSTATES ? (int)BS_STAGE_NSTATES     \
                                                  : (int)BS_PART_NSTATES)

typedef bool moves_t[MAX_STATES][MAX_STATES];

/* The names DESIGN.md writes: the enums' own, without their prefix. */
#define STAGE_NAME(x) [BS_STAGE_##x] = #x
static const char *const stage_enum_names[] = {
    STAGE_NAME(NEW),         STAGE_NAME(RUNNING), STAGE_NAME(CHECKPOINTING),
    STAGE_NAME(REBALANCING), STAGE_NAME(BACKOFF), STAGE_NAME(DRAINING),
    STAGE_NAME(STOPPED),     STAGE_NAME(FATAL),
};
#define PART_NAME(x) [BS_PART_##x] = #x
static const char *const part_enum_names[] = {
    PART_NAME(RESTORING), PART_NAME(WAITING_FIRST), PART_NAME(ACTIVE),
    PART_NAME(RESTORE_PENDING), PART_NAME(SCHEMA_WAIT),
};
_Static_assert(sizeof(stage_enum_names) / sizeof(stage_enum_names[0]) ==
                   BS_STAGE_NSTATES, "a name for every stage state");
_Static_assert(sizeof(part_enum_names) / sizeof(part_enum_names[0]) ==
                   BS_PART_NSTATES, "a name for every partition state");

/* One state machine: its block in DESIGN.md, its states' names, and the
 * probe of state.c's table. */
typedef struct machine {
    const char *block;
    const char *const *names;
    int n;
    bool (*legal)(int from, int to);
} machine;

static int probe_from, probe_to;
static bool quiet; /* the self-test's differences are expected */

static void report(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static void report(const char *fmt, ...)
{
    if (quiet)
        return;
    va_list ap;
    va_start(ap, fmt);
    vprint_message(fmt, ap);
    va_end(ap);
}

static void stage_move(bs_stage *s)
{
    s->state = (bs_stage_state)probe_from;
    bs_stage_set_state(s, (bs_stage_state)probe_to);
}

static bool stage_move_legal(int from, int to)
{
    bs_stage *s = stage_new(0);
    probe_from = from;
    probe_to = to;
    bool legal = !aborts(stage_move, s);
    stage_free(s);
    return legal;
}

static void part_move(bs_stage *s)
{
    s->parts[0].state = (bs_part_state)probe_from;
    bs_part_set_state(s, &s->parts[0], (bs_part_state)probe_to);
}

static bool part_move_legal(int from, int to)
{
    /* A partition that satisfies every invariant in every state. */
    bs_stage *s = stage_new(1);
    part *p = &s->parts[0];
    p->filter = (bf_filter *)1; /* never dereferenced by state.c */
    p->ckpt_offset = p->base_offset = p->next_offset = 10;
    probe_from = from;
    probe_to = to;
    bool legal = !aborts(part_move, s);
    p->filter = NULL;
    stage_free(s);
    return legal;
}

static const machine stage_machine = {
    "stage-transitions", stage_enum_names, BS_STAGE_NSTATES, stage_move_legal};
static const machine part_machine = {
    "partition-transitions", part_enum_names, BS_PART_NSTATES,
    part_move_legal};

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    char *text = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (cap - len < 4096) {
            cap = cap ? cap * 2 : 65536;
            text = realloc(text, cap);
            assert_non_null(text);
        }
        size_t n = fread(text + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0)
            break;
    }
    fclose(f);
    text[len] = '\0';
    return text;
}

/* Sets bits in `set` for the names in "A|B|C" (white space around each
 * trimmed); false if a name is not one of m's states. */
static bool parse_states(const machine *m, char *list, bool *set)
{
    for (char *save = NULL, *tok = strtok_r(list, "|", &save); tok;
         tok = strtok_r(NULL, "|", &save)) {
        while (*tok == ' ')
            tok++;
        size_t len = strlen(tok);
        while (len && tok[len - 1] == ' ')
            tok[--len] = '\0';
        int i = 0;
        while (i < m->n && strcmp(tok, m->names[i]) != 0)
            i++;
        if (i == m->n)
            return false;
        set[i] = true;
    }
    return true;
}

/* Fills moves from m's block in text; returns the number of lines that are
 * not `FROM -> TO: function` over m's states (each printed), or 1 if the
 * block is missing or has no moves. */
static int parse_moves(const char *text, const machine *m, moves_t moves)
{
    memset(moves, 0, sizeof(moves_t));
    char fence[64];
    snprintf(fence, sizeof(fence), "\n```%s\n", m->block);
    const char *at = strstr(text, fence);
    if (!at) {
        report("DESIGN.md has no ```%s block\n", m->block);
        return 1;
    }
    at += strlen(fence);
    int bad = 0, lines = 0;
    while (*at && strncmp(at, "```", 3) != 0) {
        const char *start = at, *eol = strchr(at, '\n');
        int len = (int)(eol ? eol - at : (ptrdiff_t)strlen(at));
        char line[512];
        snprintf(line, sizeof(line), "%.*s", len, start);
        at = eol ? eol + 1 : start + len;
        lines++;
        char *arrow = strstr(line, "->");
        char *colon = arrow ? strchr(arrow, ':') : NULL;
        bool from[MAX_STATES] = {0}, to[MAX_STATES] = {0};
        bool ok = arrow && colon && colon[strspn(colon + 1, " ") + 1];
        if (ok) {
            *arrow = *colon = '\0';
            ok = parse_states(m, line, from) &&
                 parse_states(m, arrow + 2, to);
        }
        for (int f = 0; ok && f < m->n; f++)
            for (int t = 0; t < m->n; t++)
                if (from[f] && to[t]) {
                    ok = ok && f != t; /* staying is not a move */
                    moves[f][t] = true;
                }
        if (!ok) {
            report("DESIGN.md ```%s: not FROM -> TO: function over its "
                   "states: '%.*s'\n", m->block, len, start);
            bad++;
        }
    }
    if (lines == 0) {
        report("DESIGN.md ```%s: no moves\n", m->block);
        return 1;
    }
    return bad;
}

/* The moves listed and not allowed, or allowed and not listed (each
 * printed). */
static int compare_moves(const machine *m, moves_t listed)
{
    int diff = 0;
    for (int f = 0; f < m->n; f++)
        for (int t = 0; t < m->n; t++) {
            if (f == t)
                continue;
            bool legal = m->legal(f, t);
            if (legal == listed[f][t])
                continue;
            report("DESIGN.md ```%s: %s -> %s %s\n", m->block, m->names[f],
                   m->names[t], legal ? "is legal in state.c but not listed"
                                      : "is listed but illegal in state.c");
            diff++;
        }
    return diff;
}

static void test_design_lists_the_legal_moves(void **state)
{
    (void)state;
    char *text = read_text(BS_DESIGN_MD);
    moves_t moves;
    int bad = 0;
    if (parse_moves(text, &stage_machine, moves) == 0)
        bad += compare_moves(&stage_machine, moves);
    else
        bad++;
    if (parse_moves(text, &part_machine, moves) == 0)
        bad += compare_moves(&part_machine, moves);
    else
        bad++;
    free(text);
    assert_int_equal(bad, 0);
}

/* The check itself can fail: both kinds of difference, and a bad line. */
static void test_a_wrong_list_is_found(void **state)
{
    (void)state;
    quiet = true;
    moves_t moves;
    for (int f = 0; f < BS_STAGE_NSTATES; f++)
        for (int t = 0; t < BS_STAGE_NSTATES; t++)
            moves[f][t] = f != t && stage_move_legal(f, t);
    assert_int_equal(compare_moves(&stage_machine, moves), 0);
    moves[BS_STAGE_REBALANCING][BS_STAGE_BACKOFF] = false;
    moves[BS_STAGE_STOPPED][BS_STAGE_FATAL] = true;
    assert_int_equal(compare_moves(&stage_machine, moves), 2);

    const char *const bad[] = {
        "x\n```stage-transitions\nRUNNING -> NOWHERE: f\n```\n",
        "x\n```stage-transitions\nRUNNING -> DRAINING\n```\n",
        "x\n```stage-transitions\nRUNNING -> RUNNING: f\n```\n",
        "x\n```stage-transitions\n```\n",
        "x\n```partition-transitions\nRESTORING -> ACTIVE: f\n```\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(parse_moves(bad[i], &stage_machine, moves), 1);
    quiet = false;
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
        cmocka_unit_test(test_design_lists_the_legal_moves),
        cmocka_unit_test(test_a_wrong_list_is_found),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
