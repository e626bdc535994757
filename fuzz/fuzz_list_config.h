/*
 * fuzz_list_config.h -- what the blocklist fuzz targets (fuzz_blocklist_list,
 * fuzz_blocklist_topic) share: a file made of bytes (a memfd named by its
 * /proc path) and a validated configuration with one blocklist, set as
 * `bloomstage run` sets it.  Header-only: every fuzz_*.c is a target of its
 * own (fuzz/CMakeLists.txt).  Failures abort, as the targets' checks do.
 */
#ifndef BS_FUZZ_LIST_CONFIG_H
#define BS_FUZZ_LIST_CONFIG_H

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* A memfd holding data[0..size); its path into path. */
static inline int fuzz_memfd(const void *data, size_t size, char *path,
                             size_t path_size)
{
    int fd = memfd_create("fuzz-list", MFD_CLOEXEC);
    if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size)) {
        fprintf(stderr, "fuzz: memfd: cannot write %zu bytes\n", size);
        abort();
    }
    snprintf(path, path_size, "/proc/self/fd/%d", fd);
    return fd;
}

/* input.topics=in, output.topic=out, then the key, value pairs of kv
 * (NULL-terminated), validated. */
static inline bs_config *fuzz_list_config(const char *const *kv)
{
    char err[1024];
    bs_config *cfg = bs_config_new();
    if (!cfg)
        abort();
    const char *const base[] = {"input.topics", "in", "output.topic", "out",
                                NULL};
    for (const char *const *l = base; l; l = l == base ? kv : NULL)
        for (size_t i = 0; l[i]; i += 2)
            if (bs_config_set(cfg, l[i], l[i + 1], NULL, err, sizeof err)) {
                fprintf(stderr, "fuzz: %s\n", err);
                abort();
            }
    if (bs_config_validate(cfg, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz: %s\n", err);
        abort();
    }
    return cfg;
}

#endif
