/*
 * fuzz_blocklist_list.c -- libFuzzer target for blocklist files as the
 * stage loads them at start-up (stage/keys/blocklist.c, bs_blocklists_load): a
 * text list (stage/base/util.c's bs_lines_* reader and bs_list_entry) built into
 * a blocked filter, or, when the file starts with the filter magic, a filter
 * file memory-mapped in place.  Seeds: fuzz/corpus/blocklist_list/.
 *
 * The input is the file's bytes.  It is written to a memfd and named by
 * path in a configuration (blocklist.fuzz.path, the required topics set),
 * validated and loaded exactly as `bloomstage run` does.  A list that loads
 * must contain every entry of the list (no false negatives), counted as
 * bs_list_entry counts them; a failure must name the blocklist.  A broken
 * promise aborts.
 */
#include "fuzz_check.h"
#include "keys/blocklist.h"
#include <config.h>
#include "base/settings.h"
#include "base/util.h"

#include "fuzz_list_config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Every entry of the list is in the filter, and there are bl->entries of them. */
static void check_entries(const uint8_t *data, size_t size,
                          const bs_blocklist *bl)
{
    uint64_t n = 0;
    for (size_t pos = 0; pos < size;) {
        const uint8_t *nl = memchr(data + pos, '\n', size - pos);
        size_t len = nl ? (size_t)(nl - (data + pos)) : size - pos;
        const char *line = (const char *)data + pos;
        pos += len + (nl ? 1 : 0);
        if (!bs_list_entry(&line, &len))
            continue;
        n++;
        CHECK(bf_filter_contains(bl->filter, line, len));
    }
    CHECK(n == BS_GET(bl->entries));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64], err[1024];
    int fd = fuzz_memfd(data, size, path, sizeof path);
    const char *const kv[] = {"blocklist.fuzz.path", path, NULL};
    bs_config *cfg = fuzz_list_config(kv);

    bs_settings set;
    CHECK(bs_settings_from_config(cfg, &set, err, sizeof err) == 0);
    bs_blocklist *lists = NULL;
    size_t n = 0;
    err[0] = '\0';
    if (bs_blocklists_load(&set, &lists, &n, err, sizeof err) == 0) {
        CHECK(n == 1 && lists != NULL);
        const bs_blocklist *bl = &lists[0];
        CHECK(strcmp(bl->name, "fuzz") == 0 && bl->filter != NULL);
        CHECK(bl->seed == bf_filter_seed(bl->filter));
        if (bl->from_list) {
            CHECK(bf_filter_kind(bl->filter) == BF_KIND_BLOCKED);
            check_entries(data, size, bl);
        } else {
            CHECK(size >= BF_FORMAT_MAGIC_LEN &&
                  memcmp(data, BF_FORMAT_MAGIC, BF_FORMAT_MAGIC_LEN) == 0);
            (void)bf_filter_contains(bl->filter, data, size < 16 ? size : 16);
        }
        bs_blocklists_free(lists, n);
    } else {
        CHECK(lists == NULL && n == 0);
        CHECK(strncmp(err, "blocklist 'fuzz': ", 18) == 0);
    }
    bs_config_destroy(cfg);
    close(fd);
    return 0;
}
