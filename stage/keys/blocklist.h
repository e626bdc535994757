/*
 * blocklist.h -- the stage's blocklists, one per `blocklist.NAME.*` group:
 *
 *   - static lists: a filter file made by `bloomstage filter build` (used
 *     in place, memory-mapped) or a text list built into a blocked filter
 *     at start-up;
 *   - live lists (blocklist.NAME.topic set): a counting filter holding the
 *     base text list (blocklist.NAME.path, optional) and then every change
 *     read from the list's compacted topic (bs_blocklist_apply; the Kafka
 *     side is stage/lists/blocklist_feed.c).
 *
 * A live list also keeps the exact set of its entries' 128-bit hashes
 * (16 bytes an entry, in an open-addressing table at most 3/4 full).  It
 * is what makes the counting filter safe to remove from: an add of an
 * entry already there and a remove of one not there change nothing (a
 * compacted topic holds many records for one key until it is compacted;
 * a blind remove of an absent entry would decrement other entries'
 * counters and could unblock them), and it is what the filter is rebuilt
 * from when the list outgrows its capacity or counters saturate.
 *
 * Counters (any thread reads them, the stage thread writes) are the
 * per-list metrics.  Who owns what: the stage owns the array; `name` is a
 * copy; key and topic are borrowed from the configuration.
 */
#ifndef BLOOMSTAGE_BLOCKLIST_H
#define BLOOMSTAGE_BLOCKLIST_H

#include "base/counters.h"
#include "base/settings.h"

#include <bloomfilters.h>
#include <config.h>
#include <stdatomic.h>

/* The longest entry a live list takes, in bytes: a longer record key in
 * the list topic is skipped and counted, a longer line in its base file is
 * a start-up error, `blocklist add` refuses it. */
#define BS_BLOCKLIST_MAX_ENTRY 16384

/* What one list-topic record is (bs_list_record_decode), and what applying
 * it did (bs_blocklist_apply).  The BAD_ kinds are skipped and counted,
 * never applied. */
typedef enum bs_list_change {
    BS_LIST_ADDED = 0,       /* a new entry */
    BS_LIST_REMOVED,         /* an entry removed */
    BS_LIST_UNCHANGED,       /* an add of an entry already there, or a
                                remove of one that is not */
    BS_LIST_BAD_EMPTY_KEY,   /* null or empty record key */
    BS_LIST_BAD_LONG_KEY,    /* key over BS_BLOCKLIST_MAX_ENTRY bytes */
    BS_LIST_BAD_EMPTY_VALUE, /* an empty (not null) value: neither an add
                                (non-empty value) nor a tombstone */
    BS_LIST_NOMEM,           /* the entry set could not grow: nothing
                                changed; the caller must stop */
    BS_LIST_NCHANGES
} bs_list_change;
#define BS_LIST_FIRST_BAD BS_LIST_BAD_EMPTY_KEY
#define BS_LIST_NBAD (BS_LIST_NOMEM - BS_LIST_FIRST_BAD)
_Static_assert(BS_LIST_NBAD == 3, "report.h's BS_LIST_METRICS_NBAD");

/* The Prometheus label of a BAD_ kind ("empty-key", "too-long",
 * "empty-value"); NULL for the others. */
const char *bs_list_bad_name(bs_list_change c);

/* Classifies a list-topic record: key[0..klen) (key may be NULL), value
 * NULL for a tombstone.  BS_LIST_ADDED means "an add", BS_LIST_REMOVED "a
 * remove" (whether anything changes is bs_blocklist_apply's business), or
 * a BAD_ kind.  Pure: the fuzz target and the CLI use it too. */
bs_list_change bs_list_record_decode(const void *key, size_t klen,
                                     const void *value, size_t vlen);

typedef struct bs_entry_set bs_entry_set;

typedef struct bs_blocklist {
    char *name;
    const bs_config_keyspec *key; /* owned by the config behind set */
    bs_normalize normalize;       /* blocklist.NAME.normalize */
    bool domain;                  /* blocklist.NAME.match=domain */
    bf_filter *filter;            /* live: wraps a bf_counting */
    uint64_t seed;
    bool from_list; /* built from a text list at start-up */
    uint8_t *scratch; /* an entry normalized (bs_blocklist_entry) */
    size_t scratch_cap;

    /* Live lists only (topic != NULL). */
    const char *topic;    /* blocklist.NAME.topic (borrowed) */
    bs_entry_set *set;    /* the exact entries, as hashes */
    uint64_t capacity;    /* what the filter is sized for now */
    double fpr;
    uint64_t base_entries;        /* entries the base file gave */
    uint64_t removes_since_build; /* removals since the filter was built */

    /* Any thread reads; the stage thread writes. */
    bs_counter entries;     /* list entries (text lists, live lists) or
                               inserts (filter files) */
    bs_counter updates;     /* list-topic records applied (changes and
                               no-ops alike) */
    bs_counter skipped[BS_LIST_NBAD]; /* by BAD_ kind */
    bs_counter saturated;   /* counters stuck at 15 in the filter now */
    bs_counter rebuilds;    /* filters rebuilt (grown or unsaturated) */
    bs_counter caught_up;   /* 1 once the topic was read to its end */
    _Atomic int64_t lag;            /* records behind the topic's end; -1 */
    _Atomic int64_t last_update_ms; /* wall clock of the last change
                                       applied (or of loading); 0 none */
} bs_blocklist;

/* Loads every blocklist of set->blocklists: static lists whole, live lists
 * with their base file only (their topic is read by blocklist_feed.c).
 * All or nothing: on any failure (missing, unreadable or damaged file, a
 * filter file given as a live list's base) returns -1 with errstr naming
 * the blocklist and the file, and *out is NULL. */
int bs_blocklists_load(const bs_settings *set, bs_blocklist **out,
                       size_t *n, char *errstr, size_t errstr_size)
    __attribute__((warn_unused_result));
void bs_blocklists_free(bs_blocklist *lists, size_t n);

/* Applies one list-topic record to live list bl (see
 * bs_list_record_decode for the arguments): what it did.  BAD_ kinds are
 * counted in bl->skipped.  The filter may be rebuilt (a new bl->filter):
 * when the entries pass the capacity (twice the capacity) or, with
 * counters saturated, once removals since the last build reach 1% of the
 * entries. */
bs_list_change bs_blocklist_apply(bs_blocklist *bl, const void *key,
                                  size_t klen, const void *value, size_t vlen);

/* The most lookups one record's key takes in a list: one, or for a
 * domain list its domain and every parent (fm_domain.h). */
#define BS_BLOCKLIST_MAX_LOOKUPS 127

/* What an entry of bl (a line of its file, a list topic's record key, an
 * entry `blocklist add` publishes) is stored as, and what a record's key
 * is looked up as: normalized as blocklist.NAME.normalize says, and for a
 * domain list the domain it names (fm_domain.h: after the last @, a URL's
 * host, else itself; lowercased, no trailing dot).  Points into bl's
 * scratch (valid until the next call) or at key; NULL when nothing is left
 * (white space only, no domain) or out of memory. */
const void *bs_blocklist_entry(bs_blocklist *bl, const void *key, size_t klen,
                               size_t *len);

/* The hashes a record's key (key[0..klen), from bl->key) is looked up by
 * in bl, into h[0..BS_BLOCKLIST_MAX_LOOKUPS): one for an exact list, the
 * domain's and each parent's for a domain list, the domain first.  Their
 * count; 0 when the key has nothing to look up. */
unsigned bs_blocklist_lookups(bs_blocklist *bl, const void *key, size_t klen,
                              bf_hash *h);

/* Whether the exact set holds the entry (tests, fuzzing). */
bool bs_blocklist_has(bs_blocklist *bl, const void *key, size_t klen);

#endif
