/*
 * eio_preload.c -- a disk that fails writes, for test_disk_faults: an
 * LD_PRELOAD library that makes fsync(2) and fdatasync(2) fail with EIO
 * on a file or directory under $BS_EIO_DIR while the file $BS_EIO_TRIGGER
 * exists.  That is how Linux reports a write the disk could not make: the
 * page cache took the bytes, the writeback failed, and the next fsync says
 * so.  A tmpfs cannot fail that way, and the stage's own write path is
 * left as it is: the error comes from where a real one would.  Every
 * other call, and every call while the trigger is absent, is libc's.
 * Built without the sanitizers (harness/CMakeLists.txt): it is loaded
 * before their runtime.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int fsync(int fd);
int fdatasync(int fd);

/* Whether fd is under $BS_EIO_DIR and the trigger is there. */
static bool failing(int fd)
{
    const char *dir = getenv("BS_EIO_DIR");
    const char *trigger = getenv("BS_EIO_TRIGGER");
    if (!dir || !*dir || !trigger || access(trigger, F_OK) != 0)
        return false;
    char link[64], path[4096];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof(path) - 1);
    if (n <= 0)
        return false;
    path[n] = '\0';
    size_t len = strlen(dir);
    return strncmp(path, dir, len) == 0 &&
           (path[len] == '/' || path[len] == '\0');
}

typedef int (*sync_fn)(int);

static int pass(const char *name, int fd)
{
    sync_fn real = (sync_fn)dlsym(RTLD_NEXT, name);
    if (!real) {
        errno = ENOSYS;
        return -1;
    }
    return real(fd);
}

int fsync(int fd)
{
    if (failing(fd)) {
        errno = EIO;
        return -1;
    }
    return pass("fsync", fd);
}

int fdatasync(int fd)
{
    if (failing(fd)) {
        errno = EIO;
        return -1;
    }
    return pass("fdatasync", fd);
}
