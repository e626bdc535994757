/*
 * blocklist.c -- see blocklist.h.  A file that starts with the filter magic
 * is a filter; anything else is read as a text list (one entry per line,
 * blank lines and '#' comments skipped, surrounding white space stripped —
 * the rules of `bloomstage filter build`).
 */
#include "blocklist.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bool is_filter_file(const char *path, char *errstr, size_t errstr_size,
                           bool *ok)
{
    *ok = false;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(errstr, errstr_size, "%s: %s", path, strerror(errno));
        return false;
    }
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

/* Two passes over a text list: count, then add. */
static int build_from_list(const char *path, double fpr, bs_blocklist *bl,
                           char *errstr, size_t errstr_size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(errstr, errstr_size, "%s: %s", path, strerror(errno));
        return -1;
    }
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
            n++;
            if (bf)
                bf_blocked_add(bf, line, len);
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
        bl->entries = n;
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
    char why[1024];
    for (size_t i = 0; i < count; i++) {
        bs_blocklist *bl = &lists[i];
        bl->name = strdup(conf[i].name);
        bl->key = conf[i].key;
        bool readable;
        if (!bl->name) {
            snprintf(why, sizeof(why), "out of memory");
            goto fail;
        }
        if (is_filter_file(conf[i].path, why, sizeof(why), &readable)) {
            if (bf_filter_load_file(conf[i].path, BF_LOAD_INPLACE,
                                    &bl->filter, why, sizeof(why)) != BF_OK)
                goto fail;
            bf_info info;
            bf_filter_info(bl->filter, &info);
            bl->entries = info.inserts;
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
        bf_filter_destroy(lists[i].filter);
    }
    free(lists);
}
