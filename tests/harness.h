/* Transitional: the harness now lives in the support layer, tests/support/
 * (support.h); this name goes once every test includes support.h. */
#include "support.h"
