/*
 * fuzz_blocklist_topic.c -- libFuzzer target for the records of a live
 * blocklist's topic (blocklist.NAME.topic) as the stage applies them
 * (stage/keys/blocklist.c: bs_list_record_decode, bs_blocklist_apply): keys and
 * values from anyone who can write to the topic.  Seeds:
 * fuzz/corpus/blocklist_topic/.
 *
 * The input is a sequence of records, each
 *     flags (1 byte: bit 0 null key, bit 1 null value = tombstone)
 *     key length (2 bytes, little-endian), key bytes
 *     value length (1 byte), value bytes
 * (lengths cut to what is left), applied in order to a live list of
 * capacity 8 (so it is rebuilt larger as it grows) seeded from a base list
 * of two entries.  Against an exact model: every record is classified as
 * bs_list_record_decode says; an add makes the entry present, a remove
 * absent, a bad record changes nothing; the entry count matches; at the
 * end every model entry is in the set and in the filter (never a false
 * negative).  A broken promise aborts.
 */
#include "fuzz_check.h"
#include "keys/blocklist.h"
#include <config.h>
#include "base/settings.h"

#include "fuzz_list_config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct entry {
    const uint8_t *key;
    size_t len;
} entry;

static size_t model_find(const entry *m, size_t n, const void *k, size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (m[i].len == len && memcmp(m[i].key, k, len) == 0)
            return i;
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char base[] = "base-one\nbase-two\n";
    char path[64], err[1024];
    int fd = fuzz_memfd(base, sizeof base - 1, path, sizeof path);
    const char *const kv[] = {"blocklist.f.topic", "lst",
                              "blocklist.f.path", path,
                              "blocklist.f.capacity", "8",
                              "blocklist.f.fpr", "0.01", NULL};
    bs_config *cfg = fuzz_list_config(kv);
    bs_settings set;
    CHECK(bs_settings_from_config(cfg, &set, err, sizeof err) == 0);
    bs_blocklist *lists = NULL;
    size_t nl = 0;
    CHECK(bs_blocklists_load(&set, &lists, &nl, err, sizeof err) == 0);
    CHECK(nl == 1);
    bs_blocklist *bl = &lists[0];
    CHECK(BS_GET(bl->entries) == 2);

    /* The model: the base entries, then what the records leave. */
    size_t cap = 2 + size / 4 + 1, n = 0;
    entry *m = calloc(cap, sizeof(*m));
    CHECK(m != NULL);
    m[n++] = (entry){(const uint8_t *)"base-one", 8};
    m[n++] = (entry){(const uint8_t *)"base-two", 8};

    size_t pos = 0;
    while (pos < size) {
        uint8_t flags = data[pos++];
        size_t klen = 0, vlen = 0;
        if (pos + 2 <= size)
            klen = (size_t)data[pos] | (size_t)data[pos + 1] << 8;
        pos += pos + 2 <= size ? 2 : size - pos;
        if (klen > size - pos)
            klen = size - pos;
        const uint8_t *key = flags & 1 ? NULL : data + pos;
        pos += klen;
        if (pos < size)
            vlen = data[pos++];
        if (vlen > size - pos)
            vlen = size - pos;
        const uint8_t *val = flags & 2 ? NULL : data + pos;
        pos += vlen;
        if (!key)
            klen = 0;
        if (!val)
            vlen = 0;

        uint64_t before = BS_GET(bl->entries);
        bs_list_change want = bs_list_record_decode(key, klen, val, vlen);
        bs_list_change got = bs_blocklist_apply(bl, key, klen, val, vlen);
        size_t i = key ? model_find(m, n, key, klen) : n;
        switch (want) {
        case BS_LIST_ADDED:
            CHECK(got == (i < n ? BS_LIST_UNCHANGED : BS_LIST_ADDED));
            if (i == n) {
                CHECK(n < cap);
                m[n++] = (entry){key, klen};
            }
            CHECK(bs_blocklist_has(bl, key, klen));
            CHECK(bf_filter_contains(bl->filter, key, klen));
            break;
        case BS_LIST_REMOVED:
            CHECK(got == (i < n ? BS_LIST_REMOVED : BS_LIST_UNCHANGED));
            if (i < n)
                m[i] = m[--n];
            CHECK(!bs_blocklist_has(bl, key, klen));
            break;
        default:
            CHECK(got == want && bs_list_bad_name(got) != NULL);
            CHECK(BS_GET(bl->entries) == before);
        }
        CHECK(BS_GET(bl->entries) == n);
    }
    for (size_t i = 0; i < n; i++) {
        CHECK(bs_blocklist_has(bl, m[i].key, m[i].len));
        CHECK(bf_filter_contains(bl->filter, m[i].key, m[i].len));
    }
    CHECK(bl->capacity >= n);
    free(m);
    bs_blocklists_free(lists, nl);
    bs_config_destroy(cfg);
    close(fd);
    return 0;
}
