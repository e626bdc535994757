/*
 * fixture.h -- what a test runs in: a broker with its topics, a temporary
 * directory, and the processes started meanwhile, torn down whatever the
 * test's outcome (a failed assertion longjmps out of the test: everything
 * it started is remembered here or in stage.c, so the teardown finds it).
 *
 * A test with state of its own embeds h_fixture as the first member of its
 * fixture and asks for that size (h_fixture_setup_sized): the rest is
 * zeroed, cleanup (if not NULL) undoes what the test did and frees what it
 * allocated, and the whole block is freed with the fixture.
 */
#ifndef BS_SUPPORT_FIXTURE_H
#define BS_SUPPORT_FIXTURE_H

#include "broker.h"
#include "core.h"

#include <stddef.h>

typedef struct h_fixture h_fixture;

struct h_fixture {
    h_broker *broker;
    const char *bs; /* its bootstrap list */
    char *dir;      /* a fresh temporary directory */
    double t0;      /* when it was made */
    /* Called by h_fixture_free after the processes are gone and before
     * the directory is removed; returning -1 fails the teardown. */
    int (*cleanup)(h_fixture *fx);
};

/* A broker (h_broker_start: brokers, topics "name:partitions", NULL-
 * terminated) and a temporary directory, in a block of `size` bytes
 * (>= sizeof(h_fixture); the rest zeroed). */
int h_fixture_new_sized(int brokers, const char *const *topics, size_t size,
                        int (*cleanup)(h_fixture *fx),
                        h_fixture **out) H_WARN_UNUSED;
/* Kills and frees every process remembered (h_proc_release_all), runs the
 * cleanup, removes the directory, stops the broker, frees the block: 0 iff
 * all went well (the broker exited 0 on SIGTERM).  NULL: 0. */
int h_fixture_free(h_fixture *fx);

/* cmocka setup: h_fixture_new_sized into *state (the reason printed on
 * failure). */
int h_fixture_setup(void **state, int brokers, const char *const *topics);
int h_fixture_setup_sized(void **state, int brokers,
                          const char *const *topics, size_t size,
                          int (*cleanup)(h_fixture *fx));
/* cmocka teardown: h_fixture_free of *state (NULL: none) and of any other
 * fixture still alive, after h_proc_release_all; prints how long the test
 * took since *state was made. */
int h_fixture_teardown(void **state);

#endif
