/*
 * files.c -- see files.h.
 */
#include "files.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int h_tmpdir_new(char **path)
{
    char *t = h_xstrdup("/tmp/bloomstage-test-XXXXXX");
    if (!mkdtemp(t)) {
        int e = errno;
        free(t);
        return h_fail("mkdtemp: %s", strerror(e));
    }
    *path = t;
    return 0;
}

static bool rm_failed;

static int rm_entry(const char *path, const struct stat *st, int type,
                    struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    if (remove(path)) {
        rm_failed = true;
        return h_fail("cannot remove %s: %s", path, strerror(errno));
    }
    return 0;
}

int h_tmpdir_remove(const char *path)
{
    if (!path)
        return 0;
    rm_failed = false; /* rm_entry's reason, if it fails */
    if (nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS) == 0)
        return 0;
    if (rm_failed) /* an entry could not be removed */
        return -1;
    if (errno == ENOENT) /* already gone */
        return 0;
    return h_fail("cannot remove %s: %s", path, strerror(errno));
}

int h_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int h_write_bytes(const char *path, const void *buf, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return h_fail("cannot create %s: %s", path, strerror(errno));
    if (h_write_all(fd, buf, len)) {
        int e = errno;
        close(fd);
        return h_fail("cannot write %s: %s", path, strerror(e));
    }
    if (close(fd))
        return h_fail("cannot write %s: %s", path, strerror(errno));
    return 0;
}

int h_write_file(const char *path, const char *contents)
{
    return h_write_bytes(path, contents, strlen(contents));
}

int h_read_file(const char *path, char **out, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return h_fail("cannot open %s: %s", path, strerror(errno));
    size_t cap = 4096, used = 0;
    char *buf = h_xmalloc(cap);
    for (;;) {
        if (cap - used < 2) {
            cap *= 2;
            buf = h_xrealloc(buf, cap);
        }
        ssize_t n = read(fd, buf + used, cap - used - 1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            free(buf);
            close(fd);
            return h_fail("cannot read %s: %s", path, strerror(e));
        }
        if (n == 0)
            break;
        used += (size_t)n;
    }
    close(fd);
    buf[used] = '\0';
    *out = buf;
    if (len)
        *len = used;
    return 0;
}
