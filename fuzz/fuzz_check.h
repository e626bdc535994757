/*
 * fuzz_check.h -- CHECK(cond), the fuzz targets' one assertion: a property
 * every input must keep (a load that succeeded must serialize, a refused
 * input must leave the state as it was ...).  A failure names the target's
 * file and line and aborts, which libFuzzer reports as a crash with the
 * input saved.  Each target includes it once.
 */
#ifndef BLOOMSTAGE_FUZZ_CHECK_H
#define BLOOMSTAGE_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__,   \
                    #cond);                                                    \
            abort();                                                           \
        }                                                                      \
    } while (0)

#endif
