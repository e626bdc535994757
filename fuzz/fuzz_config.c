/*
 * fuzz_config.c -- libFuzzer target for the configuration's three readers
 * of outside input (config/): the properties file (bs_config_load_file),
 * the BLOOMSTAGE_* environment (bs_config_load_env) and -X arguments
 * (bs_config_set_arg); then bs_config_validate, every getter and the
 * effective-configuration printer.  Seeds: fuzz/corpus/config/.
 *
 * One input holds the three layers, split at marker lines:
 *
 *   <the properties file, bytes as they are, up to the first marker line>
 *   %%env
 *   NAME=VALUE      one environment entry a line (envp, as environ)
 *   %%-X
 *   key=value       one -X argument a line
 *
 * A marker line is exactly "%%env" or "%%-X" (LF-terminated or last);
 * either section may be missing, "%%env" counts only before "%%-X".  The
 * file is handed over as a file (a memfd, opened by path), environment
 * entries and arguments as C strings (a NUL ends one, as it would in a
 * real environment).  Every layer is applied even after another failed
 * (a failed layer leaves a usable configuration), then validate.  A failure
 * must say why; a value the configuration holds must read back.  Values
 * read from files (`@file:PATH`, BLOOMSTAGE_..._FILE) come from the files
 * of fuzz_config_files.h: the secret one's token must never show in a
 * message, an origin or the effective configuration (unless the input
 * itself holds it).  A broken promise aborts.
 */
#include "fuzz_check.h"
#include "fuzz_config_files.h"
#include <config.h>
#include <config_int.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Writes path whole, through a rename: another fuzz_config running at the
 * same time sees the old file or the new one, both the same. */
static void put_file(const char *path, const char *content)
{
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    CHECK(f != NULL);
    CHECK(fputs(content, f) >= 0);
    CHECK(fclose(f) == 0);
    CHECK(rename(tmp, path) == 0);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    CHECK(mkdir(FUZZ_CONFIG_DIR, 0700) == 0 || errno == EEXIST);
    put_file(FUZZ_CONFIG_SECRET, FUZZ_CONFIG_TOKEN "\n");
    put_file(FUZZ_CONFIG_NUMBER, "0.001\n");
    return 0;
}

/* Set when the input itself holds the token: then it may show. */
static bool token_typed;

/* Whether data holds tok in any case: an environment entry's name is
 * folded to lower case to make its key, so a name typed with
 * "FUZZ-S3CRET-7B1D" in it shows the token in the messages that name
 * the key. */
static bool typed_anycase(const uint8_t *data, size_t size, const char *tok)
{
    size_t n = strlen(tok);
    for (size_t i = 0; i + n <= size; i++)
        if (strncasecmp((const char *)data + i, tok, n) == 0)
            return true;
    return false;
}

/* text never shows the secret file's content. */
static void check_hidden(const char *text)
{
    CHECK(token_typed || !text || !strstr(text, FUZZ_CONFIG_TOKEN));
}

/* -- splitting the input --------------------------------------------------- */

typedef struct layers {
    size_t file_len; /* data[0..file_len) */
    char **env;      /* NULL-terminated; NULL when there is none */
    size_t nenv;
    char **args;
    size_t nargs;
} layers;

static bool is_marker(const uint8_t *line, size_t len, const char *marker)
{
    return len == strlen(marker) && memcmp(line, marker, len) == 0;
}

static void push(char ***list, size_t *n, const uint8_t *line, size_t len)
{
    char **grown = realloc(*list, (*n + 2) * sizeof **list);
    CHECK(grown != NULL);
    *list = grown;
    CHECK(((*list)[*n] = strndup((const char *)line, len)) != NULL);
    (*list)[++*n] = NULL;
}

static void split(const uint8_t *data, size_t size, layers *out)
{
    enum { FILE_PART, ENV_PART, ARG_PART } state = FILE_PART;
    memset(out, 0, sizeof *out);
    out->file_len = size;
    for (size_t pos = 0; pos < size;) {
        const uint8_t *nl = memchr(data + pos, '\n', size - pos);
        size_t len = nl ? (size_t)(nl - (data + pos)) : size - pos;
        const uint8_t *line = data + pos;
        if (state == FILE_PART && is_marker(line, len, "%%env")) {
            out->file_len = pos;
            state = ENV_PART;
        } else if (state != ARG_PART && is_marker(line, len, "%%-X")) {
            if (state == FILE_PART)
                out->file_len = pos;
            state = ARG_PART;
        } else if (state == ENV_PART) {
            push(&out->env, &out->nenv, line, len);
        } else if (state == ARG_PART) {
            push(&out->args, &out->nargs, line, len);
        }
        pos += len + (nl ? 1 : 0);
    }
}

static void free_list(char **list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(list[i]);
    free(list);
}

/* -- reading the result back ----------------------------------------------- */

static int read_back(const char *key, const char *value, void *opaque)
{
    const bs_config *cfg = opaque;
    const char *got = bs_config_get_str(cfg, key);
    CHECK(got != NULL && strcmp(got, value) == 0);
    CHECK(bs_config_origin(cfg, key) != NULL);
    check_hidden(bs_config_origin(cfg, key));
    return 0;
}

/* Every table key through the getter of its type (a wrong one aborts). */
static void get_all(const bs_config *cfg)
{
    for (size_t i = 0; i < bs_config_nrows; i++) {
        const bs_config_row *row = &bs_config_rows[i];
        if (bs_config_row_is_pattern(row))
            continue;
        const char *const *topics;
        switch (row->type) {
        case BS_CT_STRING:
            (void)bs_config_get_str(cfg, row->name);
            break;
        case BS_CT_INT:
        case BS_CT_SIZE:
            (void)bs_config_get_int(cfg, row->name);
            break;
        case BS_CT_DOUBLE:
            (void)bs_config_get_double(cfg, row->name);
            break;
        case BS_CT_BOOL:
            (void)bs_config_get_bool(cfg, row->name);
            break;
        case BS_CT_ENUM: {
            int e = bs_config_get_enum(cfg, row->name);
            CHECK(e >= 0 && row->values[e] != NULL);
            break;
        }
        case BS_CT_KEYSPEC: {
            const bs_config_keyspec *ks = bs_config_get_keyspec(cfg,
                                                                row->name);
            CHECK(!ks || (ks->nparts >= 1 &&
                          ks->nparts <= BS_CONFIG_KEY_PARTS_MAX));
            for (size_t p = 0; ks && p < ks->nparts; p++)
                for (size_t t = 0; t < ks->parts[p].ntokens; t++)
                    CHECK(ks->parts[p].tokens[t] != NULL);
            break;
        }
        case BS_CT_TOPICS: {
            size_t n = bs_config_get_topics(cfg, row->name, &topics);
            for (size_t t = 0; t < n; t++)
                CHECK(topics[t] != NULL && topics[t][0] != '\0');
            break;
        }
        }
    }
    CHECK(bs_config_foreach(cfg, "", read_back, (void *)cfg) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    layers in;
    split(data, size, &in);
    token_typed = typed_anycase(data, size, FUZZ_CONFIG_TOKEN);
    bs_config *cfg = bs_config_new();
    CHECK(cfg != NULL);
    char err[1024];

    /* The file layer, as a file. */
    int fd = memfd_create("fuzz-config", MFD_CLOEXEC);
    CHECK(fd >= 0);
    CHECK(in.file_len == 0 ||
          write(fd, data, in.file_len) == (ssize_t)in.file_len);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    err[0] = '\0';
    if (bs_config_load_file(cfg, path, err, sizeof err) != 0)
        CHECK(strncmp(err, path, strlen(path)) == 0);
    check_hidden(err);
    close(fd);

    err[0] = '\0';
    if (bs_config_load_env(cfg, in.env, err, sizeof err) != 0)
        CHECK(strncmp(err, "env ", 4) == 0);
    check_hidden(err);
    for (size_t i = 0; i < in.nargs; i++) {
        err[0] = '\0';
        if (bs_config_set_arg(cfg, in.args[i], err, sizeof err) != 0)
            CHECK(strncmp(err, "-X ", 3) == 0);
        check_hidden(err);
    }

    get_all(cfg);
    err[0] = '\0';
    if (bs_config_validate(cfg, err, sizeof err) == 0) {
        const bs_config_blocklist *bl;
        size_t n = bs_config_blocklists(cfg, &bl);
        for (size_t i = 0; i < n; i++)
            /* A list has a file, a topic (a live list), or both. */
            CHECK(bl[i].name[0] != '\0' &&
                  ((bl[i].path && bl[i].path[0]) ||
                   (bl[i].topic && bl[i].topic[0])) &&
                  bl[i].key != NULL && bl[i].fpr > 0);
        get_all(cfg);
    } else {
        CHECK(err[0] != '\0');
        check_hidden(err);
    }
    char *eff = NULL;
    size_t efflen = 0;
    FILE *mem = open_memstream(&eff, &efflen);
    CHECK(mem != NULL);
    CHECK(bs_config_print_effective(cfg, mem) == 0);
    CHECK(fclose(mem) == 0);
    check_hidden(eff);
    free(eff);

    bs_config_destroy(cfg);
    free_list(in.env, in.nenv);
    free_list(in.args, in.nargs);
    return 0;
}
