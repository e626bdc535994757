/*
 * blocklist.h -- the stage's blocklists: filter files made by
 * `bloomstage filter build` (used in place, memory-mapped) or text lists
 * built into a blocked filter at start-up, one per `blocklist.NAME.*` group.
 */
#ifndef BLOOMSTAGE_BLOCKLIST_H
#define BLOOMSTAGE_BLOCKLIST_H

#include "settings.h"

#include <bloomfilters.h>
#include <config.h>

typedef struct bs_blocklist {
    char *name;
    const bs_config_keyspec *key; /* owned by the config behind set */
    bf_filter *filter;
    uint64_t seed;
    uint64_t entries; /* list entries (text lists) or inserts (files) */
    bool from_list;   /* built from a text list at start-up */
} bs_blocklist;

/* Loads every blocklist of set->blocklists.  All or nothing: on any failure
 * (missing, unreadable or damaged file) returns -1 with errstr naming the
 * blocklist and the file, and *out is NULL. */
int bs_blocklists_load(const bs_settings *set, bs_blocklist **out,
                       size_t *n, char *errstr, size_t errstr_size)
    __attribute__((warn_unused_result));
void bs_blocklists_free(bs_blocklist *lists, size_t n);

#endif
