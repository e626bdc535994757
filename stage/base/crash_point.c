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
 * The names are crash_point.h's (round.c and txn.c pass them); a
 * name the table does not hold is reported once at the first point and
 * otherwise ignored.  Owned by the stage thread (no locking).
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

static struct {
    bool read;        /* the environment was looked at */
    char name[64];    /* empty: no crash point armed */
    unsigned long at; /* the pass that exits */
    unsigned long seen;
} armed;

static void arm(void)
{
    armed.read = true;
    const char *v = getenv("BLOOMSTAGE_CRASH_AT");
    if (!v || !*v)
        return;
    const char *colon = strchr(v, ':');
    size_t len = colon ? (size_t)(colon - v) : strlen(v);
    armed.at = 1;
    if (colon) {
        char *end = NULL;
        armed.at = strtoul(colon + 1, &end, 10);
        if (!end || *end || armed.at == 0)
            armed.at = 0;
    }
    bool known = false;
    for (size_t i = 0; crash_points[i]; i++)
        known |= strlen(crash_points[i]) == len &&
                 !strncmp(crash_points[i], v, len);
    if (!known || armed.at == 0 || len >= sizeof(armed.name)) {
        fprintf(stderr, "bloomstage: BLOOMSTAGE_CRASH_AT=%s: not NAME[:N] "
                "with a known NAME; ignored\n", v);
        return;
    }
    memcpy(armed.name, v, len);
    armed.name[len] = '\0';
}

void bs_crash_point(const char *name)
{
    if (!armed.read)
        arm();
    if (!armed.name[0] || strcmp(armed.name, name) != 0 ||
        ++armed.seen < armed.at)
        return;
    char line[160];
    int n = snprintf(line, sizeof(line), "level=error msg=\"crash point\" "
                     "point=%s pass=%lu\n", name, armed.seen);
    if (n > 0)
        (void)!write(STDERR_FILENO, line, (size_t)n);
    _exit(BS_CRASH_EXIT);
}
