/*
 * files.h -- temporary directories and whole files.
 */
#ifndef BS_SUPPORT_FILES_H
#define BS_SUPPORT_FILES_H

#include "core.h"

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

#endif
