/*
 * fixture.c -- see fixture.h.
 */
#include "fixture.h"
#include "files.h"
#include "stage.h"

#include <stdio.h>
#include <stdlib.h>

/* Every fixture made and not yet freed. */
static h_fixture *g_live[8];

int h_fixture_new_sized(int brokers, const char *const *topics, size_t size,
                        int (*cleanup)(h_fixture *fx), h_fixture **out)
{
    *out = NULL;
    if (size < sizeof(h_fixture))
        return h_fail("h_fixture_new_sized: %zu bytes", size);
    size_t slot = 0;
    while (slot < sizeof(g_live) / sizeof(g_live[0]) && g_live[slot])
        slot++;
    if (slot == sizeof(g_live) / sizeof(g_live[0]))
        return h_fail("more than %zu fixtures at once", slot);
    h_fixture *fx = h_xcalloc(1, size);
    fx->t0 = h_now_s();
    fx->cleanup = cleanup;
    if (h_broker_start(h_bloomstage_path(), brokers, topics, &fx->broker) ||
        h_tmpdir_new(&fx->dir)) {
        char why[512];
        snprintf(why, sizeof(why), "%s", h_last_error());
        h_broker_stop(fx->broker);
        free(fx);
        return h_fail("%s", why);
    }
    fx->bs = h_broker_bootstraps(fx->broker);
    g_live[slot] = fx;
    *out = fx;
    return 0;
}

int h_fixture_free(h_fixture *fx)
{
    if (!fx)
        return 0;
    for (size_t i = 0; i < sizeof(g_live) / sizeof(g_live[0]); i++)
        if (g_live[i] == fx)
            g_live[i] = NULL;
    int rc = 0;
    h_proc_release_all();
    if (fx->cleanup && fx->cleanup(fx))
        rc = -1;
    h_tmpdir_remove(fx->dir);
    if (h_broker_stop(fx->broker)) {
        fprintf(stderr, "teardown: %s\n", h_last_error());
        rc = -1;
    }
    free(fx->dir);
    free(fx);
    return rc;
}

int h_fixture_setup_sized(void **state, int brokers,
                          const char *const *topics, size_t size,
                          int (*cleanup)(h_fixture *fx))
{
    h_fixture *fx = NULL;
    if (h_fixture_new_sized(brokers, topics, size, cleanup, &fx)) {
        fprintf(stderr, "setup: %s\n", h_last_error());
        return -1;
    }
    *state = fx;
    return 0;
}

int h_fixture_setup(void **state, int brokers, const char *const *topics)
{
    return h_fixture_setup_sized(state, brokers, topics, sizeof(h_fixture),
                                 NULL);
}

int h_fixture_teardown(void **state)
{
    h_fixture *fx = state ? *state : NULL;
    double t0 = fx ? fx->t0 : 0;
    int rc = h_fixture_free(fx);
    if (state)
        *state = NULL;
    h_proc_release_all();
    for (size_t i = 0; i < sizeof(g_live) / sizeof(g_live[0]); i++)
        if (g_live[i] && h_fixture_free(g_live[i]))
            rc = -1;
    if (fx)
        fprintf(stderr, "    (%.1f s)\n", h_now_s() - t0);
    return rc;
}
