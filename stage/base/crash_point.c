/*
 * crash_point.c -- named points of a checkpoint round where a test can make
 * the stage die abruptly, to show that a crash between any two steps of a
 * round neither loses nor duplicates.  Test-only and not advertised: with
 * BLOOMSTAGE_CRASH_AT=NAME[:N] in the environment, the Nth time (1 if no N)
 * the stage passes point NAME it writes one line to stderr and calls
 * _exit(BS_CRASH_EXIT) -- no drain, no flush, no close, as kill -9 at that
 * moment.  Without the variable a point costs one branch.  This is the
 * engine's only exit; nothing else in bsengine ends the process.
 *
 * BLOOMSTAGE_FAIL_AT=NAME[:N] the same for a fail point: its Nth pass
 * reports a failure instead of doing its step (bs_fail_point), as a
 * broker's refusal would, and the stage handles it as it would that one.
 *
 * The names are crash_point.h's (round.c, outcome.c and txn.c pass
 * them); a name the table does not hold is reported once at the first
 * point and otherwise ignored.  No locking: each point is passed by one thread at a
 * time (the stage's, or the committer's for the points of a commit it
 * runs, which the stage thread then does not pass), and every point's
 * first pass is the stage thread's (after-flush precedes any commit).
 */
#include "base/crash_point.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* NULL-terminated. */
static const char *const crash_points[] = {
    BS_CRASH_POINTS(BS_CRASH_POINT_NAME_) NULL};
static const char *const fail_points[] = {
    BS_FAIL_POINTS(BS_CRASH_POINT_NAME_) NULL};

/* One variable's armed point. */
typedef struct armed {
    const char *var;             /* its environment variable */
    const char *const *names;    /* the points it may name */
    bool read;        /* the environment was looked at */
    char name[64];    /* empty: no point armed */
    unsigned long at; /* the pass that acts */
    unsigned long seen;
} armed;

static armed crash = {.var = "BLOOMSTAGE_CRASH_AT", .names = crash_points};
static armed fail = {.var = "BLOOMSTAGE_FAIL_AT", .names = fail_points};

static void arm(armed *a)
{
    a->read = true;
    const char *v = getenv(a->var);
    if (!v || !*v)
        return;
    const char *colon = strchr(v, ':');
    size_t len = colon ? (size_t)(colon - v) : strlen(v);
    a->at = 1;
    if (colon) {
        char *end = NULL;
        a->at = strtoul(colon + 1, &end, 10);
        if (!end || *end || a->at == 0)
            a->at = 0;
    }
    bool known = false;
    for (size_t i = 0; a->names[i]; i++)
        known |= strlen(a->names[i]) == len && !strncmp(a->names[i], v, len);
    if (!known || a->at == 0 || len >= sizeof(a->name)) {
        fprintf(stderr, "bloomstage: %s=%s: not NAME[:N] with a known NAME; "
                "ignored\n", a->var, v);
        return;
    }
    memcpy(a->name, v, len);
    a->name[len] = '\0';
}

/* Whether this pass of point `name` is the armed one. */
static bool due(armed *a, const char *name)
{
    if (!a->read)
        arm(a);
    if (!a->name[0] || strcmp(a->name, name) != 0 || ++a->seen != a->at)
        return false;
    char line[160];
    int n = snprintf(line, sizeof(line), "level=error msg=\"%s point\" "
                     "point=%s pass=%lu\n", a == &crash ? "crash" : "fail",
                     name, a->seen);
    if (n > 0)
        (void)!write(STDERR_FILENO, line, (size_t)n);
    return true;
}

void bs_crash_point(const char *name)
{
    if (due(&crash, name))
        _exit(BS_CRASH_EXIT);
}

bool bs_fail_point(const char *name)
{
    return due(&fail, name);
}
