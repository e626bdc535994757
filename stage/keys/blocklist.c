/*
 * blocklist.c -- see blocklist.h.  A file that starts with the filter magic
 * is a filter; anything else is read as a text list (one entry per line,
 * blank lines and '#' comments skipped, surrounding white space stripped —
 * the rules of `bloomstage filter build`).  Live lists: the entry set (an
 * open-addressing table of 128-bit hashes, linear probing, deletion by
 * backward shift so no tombstones accumulate), the counting filter beside
 * it, and what one list-topic record does to both.
 */
#include "keys/blocklist.h"
#include "base/log.h"
#include "base/util.h"
#include "keys/record_key.h" /* bs_normalize_flags */

#include <fm_domain.h>
#include <fm_normalize.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static bool is_filter_file(const char *path, char *errstr, size_t errstr_size,
                           bool *ok)
{
    *ok = false;
    int fd = bf_open_regular(path, NULL, errstr, errstr_size);
    if (fd < 0)
        return false;
    char magic[BF_FORMAT_MAGIC_LEN] = {0};
    ssize_t n = read(fd, magic, sizeof(magic));
    close(fd);
    if (n < 0) {
        snprintf(errstr, errstr_size, "%s: %s", path, strerror(errno));
        return false;
    }
    *ok = true;
    /* A file shorter than the magic but starting like it is a truncated
     * filter: say so rather than read it as a one-line list. */
    if (n < BF_FORMAT_MAGIC_LEN && n > 0 &&
        memcmp(magic, BF_FORMAT_MAGIC, (size_t)n) == 0) {
        snprintf(errstr, errstr_size, "%s: a filter file cut short (%zd "
                 "bytes)", path, n);
        *ok = false;
        return false;
    }
    return n == BF_FORMAT_MAGIC_LEN &&
           memcmp(magic, BF_FORMAT_MAGIC, BF_FORMAT_MAGIC_LEN) == 0;
}

/* key normalized as bl->normalize says, in bl's scratch (room kept for a
 * domain too), or key itself; NULL when out of memory or nothing is left. */
static const uint8_t *normalized(bs_blocklist *bl, const void *key,
                                 size_t klen, size_t *n)
{
    *n = klen;
    if (bl->normalize == BS_CONFIG_NORM_NONE && !bl->domain)
        return key;
    /* Normalizing never lengthens; a domain is at most FM_DOMAIN_MAX. */
    size_t need = (klen > FM_DOMAIN_MAX ? klen : FM_DOMAIN_MAX) + 1;
    if (need > bl->scratch_cap) {
        uint8_t *b = realloc(bl->scratch, need);
        if (!b)
            return NULL;
        bl->scratch = b;
        bl->scratch_cap = need;
    }
    if (bl->normalize == BS_CONFIG_NORM_NONE)
        return key;
    char err[64];
    if (fm_norm_apply(bs_normalize_flags(bl->normalize), key, klen,
                      bl->scratch, bl->scratch_cap, n, err, sizeof(err)) != 0)
        return NULL;
    return *n ? bl->scratch : NULL;
}

const void *bs_blocklist_entry(bs_blocklist *bl, const void *key, size_t klen,
                               size_t *len)
{
    size_t n;
    const uint8_t *text = normalized(bl, key, klen, &n);
    if (!text || !bl->domain) {
        *len = n;
        return text && n ? text : NULL;
    }
    fm_domain d;
    char err[64];
    if (fm_domain_parse(&d, text, n, err, sizeof(err)) != 0 ||
        fm_domain_count(&d) == 0)
        return NULL;
    const char *dom = fm_domain_at(&d, 0, &n);
    memcpy(bl->scratch, dom, n);
    *len = n;
    return bl->scratch;
}

unsigned bs_blocklist_lookups(bs_blocklist *bl, const void *key, size_t klen,
                              bf_hash *h)
{
    size_t n;
    const uint8_t *text = normalized(bl, key, klen, &n);
    if (!text)
        return 0;
    if (!bl->domain) {
        h[0] = bf_hash_key(text, n, bl->seed);
        return 1;
    }
    fm_domain d;
    char err[64];
    if (fm_domain_parse(&d, text, n, err, sizeof(err)) != 0)
        return 0;
    unsigned count = fm_domain_count(&d);
    if (count > BS_BLOCKLIST_MAX_LOOKUPS)
        count = BS_BLOCKLIST_MAX_LOOKUPS;
    for (unsigned i = 0; i < count; i++) {
        size_t dl;
        const char *dom = fm_domain_at(&d, i, &dl);
        h[i] = bf_hash_key(dom, dl, bl->seed);
    }
    return count;
}

/* Two passes over a text list: count, then add. */
static int build_from_list(const char *path, double fpr, bs_blocklist *bl,
                           char *errstr, size_t errstr_size)
{
    int fd = bf_open_regular(path, NULL, errstr, errstr_size);
    if (fd < 0)
        return -1;
    int rc = -1;
    bf_blocked *bf = NULL;
    for (int pass = 0; pass < 2; pass++) {
        if (lseek(fd, 0, SEEK_SET) < 0) {
            snprintf(errstr, errstr_size, "%s: %s", path, strerror(errno));
            goto out;
        }
        bs_lines *lr = bs_lines_new(fd, 1u << 20);
        if (!lr) {
            snprintf(errstr, errstr_size, "%s: out of memory", path);
            goto out;
        }
        const char *line;
        size_t len;
        int r;
        uint64_t n = 0;
        while ((r = bs_lines_next(lr, &line, &len)) > 0) {
            /* Text lists hold no NUL; filter files always do: this is a
             * filter whose magic is damaged, not a list. */
            if (memchr(line, '\0', len)) {
                snprintf(errstr, errstr_size, "%s:%llu: a NUL byte: not a "
                         "text list (a damaged filter file?)", path,
                         (unsigned long long)bs_lines_number(lr));
                bs_lines_destroy(lr);
                goto out;
            }
            if (!bs_list_entry(&line, &len))
                continue;
            const void *e = bs_blocklist_entry(bl, line, len, &len);
            if (!e)
                continue; /* nothing left to look up (no domain) */
            n++;
            if (bf)
                bf_blocked_add(bf, e, len);
        }
        if (r < 0) {
            snprintf(errstr, errstr_size, "%s:%llu: %s", path,
                     (unsigned long long)bs_lines_number(lr) + 1,
                     errno == E2BIG ? "line longer than 1 MiB (not a text "
                                      "list?)"
                                    : strerror(errno));
            bs_lines_destroy(lr);
            goto out;
        }
        bs_lines_destroy(lr);
        if (pass == 0) {
            bf = bf_blocked_new(n ? n : 1, fpr, BF_DEFAULT_SEED, errstr,
                                errstr_size);
            if (!bf)
                goto out;
        }
        BS_SET(bl->entries, n);
    }
    bl->filter = bf_filter_from_blocked(bf);
    if (!bl->filter) {
        snprintf(errstr, errstr_size, "%s: out of memory", path);
        goto out;
    }
    bf = NULL;
    bl->from_list = true;
    rc = 0;
out:
    bf_blocked_destroy(bf);
    close(fd);
    return rc;
}

/* -- the entry set -------------------------------------------------------- */

struct bs_entry_set {
    bf_hash *slots;  /* {0, 0} marks an empty slot */
    size_t mask;     /* slots - 1, a power of two minus one */
    size_t n;        /* entries, the all-zero hash included */
    bool has_zero;   /* the (2^-128 likely) all-zero hash is an entry */
};

static bs_entry_set *set_new(void)
{
    bs_entry_set *st = calloc(1, sizeof(*st));
    if (!st)
        return NULL;
    st->slots = calloc(1024, sizeof(bf_hash));
    if (!st->slots) {
        free(st);
        return NULL;
    }
    st->mask = 1023;
    return st;
}

static void set_free(bs_entry_set *st)
{
    if (!st)
        return;
    free(st->slots);
    free(st);
}

static bool h_zero(bf_hash h) { return h.lo == 0 && h.hi == 0; }
static bool h_eq(bf_hash a, bf_hash b) { return a.lo == b.lo && a.hi == b.hi; }
/* The filter picks blocks from lo; the table takes its slot from hi. */
static size_t h_slot(const bs_entry_set *st, bf_hash h)
{
    return (size_t)(h.hi * UINT64_C(0x9e3779b97f4a7c15) >> 20) & st->mask;
}

static size_t set_find(const bs_entry_set *st, bf_hash h, bool *found)
{
    size_t i = h_slot(st, h);
    while (!h_zero(st->slots[i])) {
        if (h_eq(st->slots[i], h)) {
            *found = true;
            return i;
        }
        i = (i + 1) & st->mask;
    }
    *found = false;
    return i;
}

static bool set_has(const bs_entry_set *st, bf_hash h)
{
    if (h_zero(h))
        return st->has_zero;
    bool found;
    set_find(st, h, &found);
    return found;
}

/* 1 inserted, 0 there already, -1 no memory (nothing changed). */
static int set_insert(bs_entry_set *st, bf_hash h)
{
    if (h_zero(h)) {
        if (st->has_zero)
            return 0;
        st->has_zero = true;
        st->n++;
        return 1;
    }
    bool found;
    size_t i = set_find(st, h, &found);
    if (found)
        return 0;
    if ((st->n + 1) * 4 > (st->mask + 1) * 3) { /* keep it 3/4 full at most */
        size_t cap = (st->mask + 1) * 2;
        bf_hash *ns = calloc(cap, sizeof(bf_hash));
        if (!ns)
            return -1;
        bf_hash *old = st->slots;
        size_t oldcap = st->mask + 1;
        st->slots = ns;
        st->mask = cap - 1;
        for (size_t j = 0; j < oldcap; j++)
            if (!h_zero(old[j])) {
                bool f;
                st->slots[set_find(st, old[j], &f)] = old[j];
            }
        free(old);
        i = set_find(st, h, &found);
    }
    st->slots[i] = h;
    st->n++;
    return 1;
}

/* true if h was there (and is gone now). */
static bool set_remove(bs_entry_set *st, bf_hash h)
{
    if (h_zero(h)) {
        if (!st->has_zero)
            return false;
        st->has_zero = false;
        st->n--;
        return true;
    }
    bool found;
    size_t i = set_find(st, h, &found);
    if (!found)
        return false;
    /* Backward shift: move later members of the probe run into the hole
     * when their home slot is not between the hole and them. */
    size_t j = i;
    for (;;) {
        st->slots[i] = (bf_hash){0, 0};
        for (;;) {
            j = (j + 1) & st->mask;
            if (h_zero(st->slots[j])) {
                st->n--;
                return true;
            }
            size_t k = h_slot(st, st->slots[j]);
            if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
                continue; /* stays: its home is after the hole */
            break;
        }
        st->slots[i] = st->slots[j];
        i = j;
    }
}

/* -- live lists ----------------------------------------------------------- */

static int64_t wall_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static const char *const BAD_NAMES[BS_LIST_NBAD] = {
    "empty-key", "too-long", "empty-value"};

const char *bs_list_bad_name(bs_list_change c)
{
    return c >= BS_LIST_FIRST_BAD && c < BS_LIST_NOMEM
               ? BAD_NAMES[c - BS_LIST_FIRST_BAD]
               : NULL;
}

bs_list_change bs_list_record_decode(const void *key, size_t klen,
                                     const void *value, size_t vlen)
{
    if (!key || klen == 0)
        return BS_LIST_BAD_EMPTY_KEY;
    if (klen > BS_BLOCKLIST_MAX_ENTRY)
        return BS_LIST_BAD_LONG_KEY;
    if (!value)
        return BS_LIST_REMOVED;
    return vlen ? BS_LIST_ADDED : BS_LIST_BAD_EMPTY_VALUE;
}

/* A counting filter for `capacity` entries holding every entry of the
 * set, in place of bl's filter.  -1 with why (the old filter stays). */
static int rebuild(bs_blocklist *bl, uint64_t capacity, char *why,
                   size_t why_size)
{
    bf_counting *cf = bf_counting_new(capacity, bl->fpr, bl->seed, why,
                                      why_size);
    if (!cf)
        return -1;
    const bs_entry_set *st = bl->set;
    for (size_t i = 0; i <= st->mask; i++)
        if (!h_zero(st->slots[i]))
            (void)bf_counting_add_h(cf, st->slots[i]);
    if (st->has_zero)
        (void)bf_counting_add_h(cf, (bf_hash){0, 0});
    bf_filter *f = bf_filter_from_counting(cf);
    if (!f) {
        bf_counting_destroy(cf);
        snprintf(why, why_size, "out of memory");
        return -1;
    }
    bf_filter_destroy(bl->filter);
    bl->filter = f;
    bl->capacity = capacity;
    bl->removes_since_build = 0;
    BS_SET(bl->saturated, bf_counting_saturated(cf));
    return 0;
}

/* After a change: grown past capacity -> twice as large; counters
 * saturated and 1% of the entries removed since the build -> rebuilt.  A
 * failed rebuild keeps the filter it has (still without false negatives:
 * only its rate suffers) and is tried again at the next change. */
static void maybe_rebuild(bs_blocklist *bl)
{
    uint64_t n = bl->set->n;
    bf_counting *cf = bf_filter_counting(bl->filter);
    uint64_t sat = bf_counting_saturated(cf);
    BS_SET(bl->saturated, sat);
    uint64_t cap = bl->capacity;
    const char *why_rebuild;
    if (n > cap) {
        cap = cap * 2 > n ? cap * 2 : n;
        why_rebuild = "over capacity";
    } else if (sat && bl->removes_since_build > n / 100) {
        why_rebuild = "saturated counters";
    } else {
        return;
    }
    char why[BS_ERRSTR_SIZE];
    double t0 = bs_now();
    if (rebuild(bl, cap, why, sizeof(why)) != 0) {
        bs_log(BS_LOG_WARN, "blocklist filter rebuild failed", "name=%s "
               "entries=%llu reason=\"%s\" error=\"%s\"", bl->name,
               (unsigned long long)n, why_rebuild, why);
        return;
    }
    BS_INC(bl->rebuilds);
    bs_log(BS_LOG_INFO, "blocklist filter rebuilt", "name=%s entries=%llu "
           "capacity=%llu reason=\"%s\" saturated_before=%llu "
           "saturated_after=%llu seconds=%.3f", bl->name,
           (unsigned long long)n, (unsigned long long)cap, why_rebuild,
           (unsigned long long)sat,
           (unsigned long long)BS_GET(bl->saturated), bs_now() - t0);
}

bs_list_change bs_blocklist_apply(bs_blocklist *bl, const void *key,
                                  size_t klen, const void *value, size_t vlen)
{
    bs_list_change c = bs_list_record_decode(key, klen, value, vlen);
    if (c >= BS_LIST_FIRST_BAD) {
        BS_INC(bl->skipped[c - BS_LIST_FIRST_BAD]);
        return c;
    }
    size_t elen;
    const void *e = bs_blocklist_entry(bl, key, klen, &elen);
    if (!e) { /* white space only, or no domain: nothing to hold */
        BS_INC(bl->skipped[BS_LIST_BAD_EMPTY_KEY - BS_LIST_FIRST_BAD]);
        return BS_LIST_BAD_EMPTY_KEY;
    }
    bf_hash h = bf_hash_key(e, elen, bl->seed);
    bf_counting *cf = bf_filter_counting(bl->filter);
    if (c == BS_LIST_ADDED) {
        int r = set_insert(bl->set, h);
        if (r < 0)
            return BS_LIST_NOMEM;
        if (r == 0)
            c = BS_LIST_UNCHANGED;
        else
            (void)bf_counting_add_h(cf, h);
    } else if (set_remove(bl->set, h)) {
        /* Only entries that were added are removed: no counter of another
         * entry is ever decremented by a stray remove. */
        (void)bf_counting_remove_h(cf, h);
        bl->removes_since_build++;
    } else {
        c = BS_LIST_UNCHANGED;
    }
    BS_INC(bl->updates);
    if (c != BS_LIST_UNCHANGED) {
        BS_SET(bl->entries, bl->set->n);
        atomic_store(&bl->last_update_ms, wall_ms());
        maybe_rebuild(bl);
    }
    return c;
}

bool bs_blocklist_has(bs_blocklist *bl, const void *key, size_t klen)
{
    size_t elen;
    const void *e = bs_blocklist_entry(bl, key, klen, &elen);
    return bl->set && e && set_has(bl->set, bf_hash_key(e, elen, bl->seed));
}

/* A live list: the counting filter and the set, seeded from the base text
 * list when there is one. */
static int live_load(const bs_config_blocklist *c, bs_blocklist *bl,
                     char *why, size_t why_size)
{
    bl->topic = c->topic;
    bl->capacity = c->capacity;
    bl->fpr = c->fpr;
    bl->seed = BF_DEFAULT_SEED;
    atomic_store(&bl->lag, -1);
    bl->set = set_new();
    if (!bl->set) {
        snprintf(why, why_size, "out of memory");
        return -1;
    }
    bf_counting *cf = bf_counting_new(c->capacity, c->fpr, bl->seed, why,
                                      why_size);
    if (!cf)
        return -1;
    bl->filter = bf_filter_from_counting(cf);
    if (!bl->filter) {
        bf_counting_destroy(cf);
        snprintf(why, why_size, "out of memory");
        return -1;
    }
    if (!c->path)
        goto done;
    bool readable;
    if (is_filter_file(c->path, why, why_size, &readable)) {
        snprintf(why, why_size, "%s: a filter file cannot be the base of a "
                 "list with blocklist.%s.topic (entries could not be removed "
                 "from it): give the text list it was built from", c->path,
                 c->name);
        return -1;
    }
    if (!readable)
        return -1;
    int fd = bf_open_regular(c->path, NULL, why, why_size);
    if (fd < 0)
        return -1;
    bs_lines *lr = bs_lines_new(fd, 1u << 20);
    int rc = -1;
    if (!lr) {
        snprintf(why, why_size, "%s: out of memory", c->path);
        goto out;
    }
    const char *line;
    size_t len;
    int r;
    while ((r = bs_lines_next(lr, &line, &len)) > 0) {
        unsigned long long no = (unsigned long long)bs_lines_number(lr);
        if (memchr(line, '\0', len)) {
            snprintf(why, why_size, "%s:%llu: a NUL byte: not a text list",
                     c->path, no);
            goto out;
        }
        if (!bs_list_entry(&line, &len))
            continue;
        if (len > BS_BLOCKLIST_MAX_ENTRY) {
            snprintf(why, why_size, "%s:%llu: an entry of %zu bytes (a live "
                     "list takes at most %d)", c->path, no, len,
                     BS_BLOCKLIST_MAX_ENTRY);
            goto out;
        }
        if (bs_blocklist_apply(bl, line, len, "1", 1) == BS_LIST_NOMEM) {
            snprintf(why, why_size, "%s:%llu: out of memory", c->path, no);
            goto out;
        }
    }
    if (r < 0) {
        snprintf(why, why_size, "%s:%llu: %s", c->path,
                 (unsigned long long)bs_lines_number(lr) + 1,
                 errno == E2BIG ? "line longer than 1 MiB (not a text list?)"
                                : strerror(errno));
        goto out;
    }
    rc = 0;
    bl->from_list = true;
out:
    bs_lines_destroy(lr);
    close(fd);
    if (rc != 0)
        return rc;
done:
    /* The base list is not "updates from the topic". */
    bl->base_entries = bl->set->n;
    BS_SET(bl->updates, 0);
    BS_SET(bl->entries, bl->set->n);
    atomic_store(&bl->last_update_ms, wall_ms());
    return 0;
}

int bs_blocklists_load(const bs_settings *set, bs_blocklist **out,
                       size_t *n, char *errstr, size_t errstr_size)
{
    const bs_config_blocklist *conf = set->blocklists;
    size_t count = set->nblocklists;
    *out = NULL;
    *n = 0;
    if (count == 0)
        return 0;
    bs_blocklist *lists = calloc(count, sizeof(*lists));
    if (!lists) {
        snprintf(errstr, errstr_size, "out of memory");
        return -1;
    }
    char why[BS_ERRSTR_SIZE];
    for (size_t i = 0; i < count; i++) {
        bs_blocklist *bl = &lists[i];
        bl->name = strdup(conf[i].name);
        bl->key = conf[i].key;
        bl->normalize = conf[i].normalize;
        bl->domain = conf[i].match == BS_CONFIG_MATCH_DOMAIN;
        bool readable;
        if (!bl->name) {
            snprintf(why, sizeof(why), "out of memory");
            goto fail;
        }
        if (conf[i].topic) {
            if (live_load(&conf[i], bl, why, sizeof(why)) != 0)
                goto fail;
        } else if (is_filter_file(conf[i].path, why, sizeof(why),
                                  &readable)) {
            if (bf_filter_load_file(conf[i].path, BF_LOAD_INPLACE,
                                    &bl->filter, why, sizeof(why)) != BF_OK)
                goto fail;
            bf_info info;
            bf_filter_info(bl->filter, &info);
            BS_SET(bl->entries, info.inserts);
        } else if (!readable ||
                   build_from_list(conf[i].path, conf[i].fpr, bl, why,
                                   sizeof(why)) != 0) {
            goto fail;
        }
        bl->seed = bf_filter_seed(bl->filter);
        continue;
    fail:
        snprintf(errstr, errstr_size, "blocklist '%s': %s", conf[i].name, why);
        bs_blocklists_free(lists, count);
        return -1;
    }
    *out = lists;
    *n = count;
    return 0;
}

void bs_blocklists_free(bs_blocklist *lists, size_t n)
{
    if (!lists)
        return;
    for (size_t i = 0; i < n; i++) {
        free(lists[i].name);
        free(lists[i].scratch);
        bf_filter_destroy(lists[i].filter);
        set_free(lists[i].set);
    }
    free(lists);
}
