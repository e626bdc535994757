/*
 * files.h -- temporary directories and whole files; a small tmpfs of a
 * test's own (full, read-only) for the disk-fault tests.
 */
#ifndef BS_SUPPORT_FILES_H
#define BS_SUPPORT_FILES_H

#include "core.h"

#include <stdbool.h>
#include <stddef.h>

/* A fresh directory /tmp/bloomstage-test-XXXXXX; *path is the caller's to
 * free (after h_tmpdir_remove). */
int h_tmpdir_new(char **path) H_WARN_UNUSED;
/* Removes the directory and everything under it (no symlinks followed).
 * NULL, or a directory already gone, is a no-op. */
int h_tmpdir_remove(const char *path);

/* Writes `contents` (a string) to path, replacing it. */
int h_write_file(const char *path, const char *contents) H_WARN_UNUSED;
/* Writes len bytes to path, replacing it. */
int h_write_bytes(const char *path, const void *buf,
                  size_t len) H_WARN_UNUSED;
/* Reads a whole file; *out is a NUL-terminated malloc'd string (the file
 * may hold NULs: *len, if not NULL, gets its length). */
int h_read_file(const char *path, char **out, size_t *len) H_WARN_UNUSED;

/* write(2) until all of buf is written; -1 with errno (not h_last_error). */
int h_write_all(int fd, const void *buf, size_t len);

/* ---- a file system of the test's own (root) ---------------------------- */

/* Puts this process, and every process it starts from now on, in a mount
 * namespace of its own whose mounts do not propagate out: a tmpfs the test
 * mounts goes away with its processes, even if the test is killed before
 * its teardown.  Call while the process has one thread (main, before any
 * librdkafka client): unshare(2) refuses a threaded process.  -1 with the
 * reason (not root: EPERM). */
int h_private_mounts(void) H_WARN_UNUSED;
/* mount -t tmpfs -o size=SIZE,mode=0755 tmpfs DIR. */
int h_tmpfs_mount(const char *dir, const char *size) H_WARN_UNUSED;
/* mount -o remount,ro (or rw) DIR.  Going read-only is refused (EBUSY)
 * while a file on it is open for writing: tried again until none is, for
 * up to timeout_ms. */
int h_tmpfs_remount(const char *dir, bool readonly,
                    int timeout_ms) H_WARN_UNUSED;
/* umount DIR (lazily, MNT_DETACH: a process still in it does not keep it
 * mounted).  NULL: a no-op. */
int h_tmpfs_umount(const char *dir);
/* Creates path and writes to it until its file system is full (ENOSPC),
 * to the last byte. */
int h_fill_fs(const char *path) H_WARN_UNUSED;

#endif
