/*
 * txn_id.c -- the host slots behind a default transactional id, and the
 * window of fencings that tells an instance its id is shared (txn_id.h
 * says why an id must be unique and may be stable).
 *
 * A slot file is never removed: a file unlinked while one process holds
 * its lock and made again by another would let both hold "the same" slot.
 * After a lock is taken the file's inode is compared with the path's, so
 * a file replaced by someone else is not trusted.
 */
#include "kafka/txn_id.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

/* Slots of one group on one host: instances past this many get an id
 * that is unique but not stable (txn.c). */
#define SLOTS_MAX 256

static bool usable_dir(const char *dir)
{
    if (mkdir(dir, 01777) == 0)
        return chmod(dir, 01777) == 0; /* the umask cleared bits */
    struct stat st;
    return errno == EEXIST && stat(dir, &st) == 0 && S_ISDIR(st.st_mode) &&
           access(dir, W_OK | X_OK) == 0;
}

const char *bs_txn_slot_dir(void)
{
    return access("/run/lock", W_OK | X_OK) == 0 &&
                   usable_dir("/run/lock/bloomstage")
               ? "/run/lock/bloomstage"
               : "/tmp/bloomstage-txn";
}

/* The group as a file name: [A-Za-z0-9._-], at most 64 of them, and a
 * hash of the whole group when anything was left out or replaced. */
static void file_stem(char *out, size_t size, const char *group)
{
    size_t n = 0;
    bool changed = false;
    for (const char *c = group; *c; c++) {
        bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                  (*c >= '0' && *c <= '9') || *c == '.' || *c == '_' ||
                  *c == '-';
        if (n == 64) {
            changed = true;
            break;
        }
        out[n++] = ok ? *c : '_';
        changed |= !ok;
    }
    out[n] = '\0';
    if (changed || n == 0 || out[0] == '.')
        snprintf(out + n, size - n, "-%08x",
                 (unsigned)XXH3_64bits(group, strlen(group)));
}

/* 1: slot's lock taken into sl; 0: another process holds it; -1: the
 * file cannot be used (errno). */
static int try_slot(bs_txn_slot *sl, const char *dir, const char *stem,
                    int slot)
{
    char path[sizeof(sl->path)];
    snprintf(path, sizeof(path), "%s/%s.%d.lock", dir, stem, slot);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd < 0 && errno == EACCES) /* another user's file: a lock needs no
                                      write access */
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    int rc = flock(fd, LOCK_EX | LOCK_NB);
    if (rc != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return e == EWOULDBLOCK ? 0 : -1;
    }
    struct stat held, now;
    if (fstat(fd, &held) != 0 || stat(path, &now) != 0 ||
        held.st_dev != now.st_dev || held.st_ino != now.st_ino) {
        close(fd);
        errno = ESTALE;
        return -1;
    }
    (void)fchmod(fd, 0666); /* others may lock it after this process */
    sl->held = true;
    sl->fd = fd;
    sl->slot = slot;
    snprintf(sl->path, sizeof(sl->path), "%s", path);
    return 1;
}

int bs_txn_slot_take(bs_txn_slot *sl, const char *dir, const char *group,
                     char *errstr, size_t errstr_size)
{
    if (!dir)
        dir = bs_txn_slot_dir();
    if (!usable_dir(dir)) {
        snprintf(errstr, errstr_size, "%s: not a writable directory: %s", dir,
                 strerror(errno ? errno : EACCES));
        return -1;
    }
    char stem[96];
    file_stem(stem, sizeof(stem), group);
    int last_errno = 0;
    for (int slot = 0; slot < SLOTS_MAX; slot++) {
        int rc = try_slot(sl, dir, stem, slot);
        if (rc == 1)
            return 0;
        if (rc < 0)
            last_errno = errno; /* that file only: the next may do */
    }
    snprintf(errstr, errstr_size, "%s: no free slot of %d for %s%s%s", dir,
             SLOTS_MAX, stem, last_errno ? ": " : "",
             last_errno ? strerror(last_errno) : "");
    return -1;
}

void bs_txn_slot_release(bs_txn_slot *sl)
{
    if (!sl->held)
        return;
    close(sl->fd); /* releases the lock; the file stays (above) */
    sl->held = false;
    sl->fd = sl->slot = -1;
}

bool bs_fence_window_add(bs_fence_window *w, double now_s)
{
    if (w->n == BS_TXN_FENCED_MAX) {
        memmove(w->at, w->at + 1, (BS_TXN_FENCED_MAX - 1) * sizeof(w->at[0]));
        w->n--;
    }
    w->at[w->n++] = now_s;
    return w->n == BS_TXN_FENCED_MAX &&
           now_s - w->at[0] <= BS_TXN_FENCED_WINDOW_S;
}
