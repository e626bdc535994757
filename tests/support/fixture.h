/*
 * fixture.h -- what a test runs in: a broker with its topics, a temporary
 * directory, and the processes started meanwhile, torn down whatever the
 * test's outcome (a failed assertion longjmps out of the test: everything
 * it started is remembered here or in stage.c, so the teardown finds it).
 */
#ifndef BS_SUPPORT_FIXTURE_H
#define BS_SUPPORT_FIXTURE_H

#include "broker.h"
#include "core.h"

typedef struct h_fixture {
    h_broker *broker;
    const char *bs; /* its bootstrap list */
    char *dir;      /* a fresh temporary directory */
    double t0;      /* when it was made */
    /* The test's own state, and how to free it: called by h_fixture_free
     * after the processes are gone and before the directory is removed;
     * returning -1 fails the teardown. */
    void *ext;
    int (*ext_free)(void *ext);
} h_fixture;

/* A broker (h_broker_start: brokers, topics "name:partitions", NULL-
 * terminated) and a temporary directory. */
int h_fixture_new(int brokers, const char *const *topics,
                  h_fixture **out) H_WARN_UNUSED;
/* Kills and frees every process remembered (h_proc_release_all), frees the
 * test's state, removes the directory, stops the broker: 0 iff all went
 * well (the broker exited 0 on SIGTERM).  NULL: 0. */
int h_fixture_free(h_fixture *fx);

/* cmocka setup: h_fixture_new into *state (the reason printed on
 * failure). */
int h_fixture_setup(void **state, int brokers, const char *const *topics);
/* cmocka teardown: h_fixture_free of *state (NULL: none) and of any other
 * fixture still alive, after h_proc_release_all; prints how long the test
 * took since *state was made. */
int h_fixture_teardown(void **state);

#endif
