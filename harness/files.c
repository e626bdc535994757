/*
 * files.c -- see files.h.
 */
#include "files.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
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

/* ---- a file system of the test's own ----------------------------------- */

int h_private_mounts(void)
{
    if (unshare(CLONE_NEWNS) != 0)
        return h_fail("unshare(CLONE_NEWNS): %s (a tmpfs of the test's own "
                      "needs root, as CI runs)", strerror(errno));
    /* Mounts made here stay here. */
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        return h_fail("mount --make-rprivate /: %s", strerror(errno));
    return 0;
}

int h_tmpfs_mount(const char *dir, const char *size)
{
    char opts[96];
    snprintf(opts, sizeof(opts), "size=%s,mode=0755", size);
    if (mount("tmpfs", dir, "tmpfs", 0, opts) != 0)
        return h_fail("mount -t tmpfs -o %s tmpfs %s: %s (needs root, as CI "
                      "runs)", opts, dir, strerror(errno));
    return 0;
}

int h_tmpfs_remount(const char *dir, bool readonly, int timeout_ms)
{
    unsigned long flags = MS_REMOUNT | (readonly ? MS_RDONLY : 0);
    int64_t t0 = h_now_ms();
    while (mount(NULL, dir, NULL, flags, NULL) != 0) {
        if (errno != EBUSY || h_now_ms() - t0 > timeout_ms)
            return h_fail("mount -o remount,%s %s: %s", readonly ? "ro" : "rw",
                          dir, strerror(errno));
        h_sleep_ms(5); /* a file open for writing: wait for its close */
    }
    return 0;
}

int h_tmpfs_umount(const char *dir)
{
    if (dir && umount2(dir, MNT_DETACH) != 0)
        return h_fail("umount %s: %s", dir, strerror(errno));
    return 0;
}

int h_fill_fs(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return h_fail("%s: %s", path, strerror(errno));
    char buf[4096];
    memset(buf, 0xa5, sizeof(buf));
    size_t chunk = sizeof(buf);
    for (;;) {
        ssize_t w = write(fd, buf, chunk);
        if (w >= 0)
            continue;
        if (errno != ENOSPC) {
            int e = errno;
            close(fd);
            return h_fail("filling %s: %s", path, strerror(e));
        }
        if (chunk == 1)
            break;
        chunk = 1; /* the last partial block too */
    }
    if (close(fd) != 0)
        return h_fail("close %s: %s", path, strerror(errno));
    return 0;
}
