/*
 * cmd_config.c -- `bloomstage config`: the configuration, documented and
 * checked, without touching Kafka.
 *
 *   bloomstage config --list                       every key: type, default,
 *                                                  range, help
 *   bloomstage config --sample                     the documented sample file
 *   bloomstage config --check [-c FILE] [-X k=v]...
 *                                                  load file + environment
 *                                                  + -X as `run` does,
 *                                                  validate, print the result
 *
 * Exit status: 0 done (--check: the configuration is valid), 1 a failure
 * (--check: the error, on stderr; or stdout could not be written), 2 a usage
 * error.  Everything is the config module's; this file only parses argv.
 */
#include "commands.h"
#include "settings.h"
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>


#define USAGE_LINES                                                         \
    "usage: bloomstage config --list\n"                                      \
    "       bloomstage config --sample\n"                                    \
    "       bloomstage config --check [-c FILE] [-X key=value]...\n"

static const char usage_text[] =
    USAGE_LINES
    "\n"
    "  --list     every configuration key with its type, default, range and "
    "help\n"
    "  --sample   the documented sample configuration "
    "(config/bloomstage.conf)\n"
    "  --check    load FILE, the BLOOMSTAGE_* environment and the -X settings\n"
    "             (in that order of precedence, lowest first), validate, and\n"
    "             print the effective configuration with each value's origin\n"
    "  -c, --config FILE    the properties file to check\n"
    "  -X key=value         set a key, overriding file and environment\n";

static int usage_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("bloomstage config: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\n" USAGE_LINES, stderr);
    return BS_EXIT_USAGE;
}

static int check(const char *path, char **xargs, int nx)
{
    char errstr[1024];
    bs_config *cfg = bs_settings_load(path, xargs, nx, errstr, sizeof errstr);
    if (!cfg) {
        fprintf(stderr, "bloomstage config: %s\n", errstr);
        return BS_EXIT_FAIL;
    }
    int rc = BS_EXIT_OK;
    if (bs_config_print_effective(cfg, stdout) != 0) {
        perror("bloomstage config: writing to stdout");
        rc = BS_EXIT_FAIL;
    }
    bs_config_destroy(cfg);
    return rc;
}

int cmd_config(int argc, char **argv)
{
    enum mode { NONE, LIST, SAMPLE, CHECK } mode = NONE;
    const char *path = NULL;
    /* -X arguments, applied in order after the file and the environment. */
    enum { MAX_X = 256 };
    char *xargs[MAX_X];
    int nx = 0;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        enum mode m = NONE;
        if (strcmp(a, "--list") == 0)
            m = LIST;
        else if (strcmp(a, "--sample") == 0)
            m = SAMPLE;
        else if (strcmp(a, "--check") == 0)
            m = CHECK;
        if (m != NONE) {
            if (mode != NONE && mode != m)
                return usage_error("%s: only one of --list, --sample, "
                                   "--check",
                                   a);
            mode = m;
            continue;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(usage_text, stdout);
            return fflush(stdout) == 0 ? BS_EXIT_OK : BS_EXIT_FAIL;
        }
        if (strcmp(a, "-c") == 0 || strcmp(a, "--config") == 0) {
            if (i + 1 >= argc)
                return usage_error("%s needs a FILE", a);
            if (path)
                return usage_error("%s: only one config file", a);
            path = argv[++i];
        } else if (strncmp(a, "--config=", 9) == 0) {
            if (path)
                return usage_error("%s: only one config file", a);
            path = a + 9;
        } else if (strncmp(a, "-X", 2) == 0) {
            if (nx == MAX_X)
                return usage_error("%s: too many -X (at most 256)", a);
            if (a[2] != '\0') {
                xargs[nx++] = argv[i] + 2; /* -Xkey=value, as kcat takes */
            } else if (i + 1 < argc) {
                xargs[nx++] = argv[++i];
            } else {
                return usage_error("%s needs key=value", a);
            }
        } else {
            return usage_error("unknown argument '%s'", a);
        }
    }

    if (mode == NONE)
        return usage_error("give --list, --sample or --check");
    if (mode != CHECK && (path || nx > 0))
        return usage_error("-c and -X go with --check only");
    if (path && path[0] == '\0')
        return usage_error("-c needs a non-empty FILE");

    int rc = 0;
    switch (mode) {
    case LIST:
        rc = bs_config_print_list(stdout);
        break;
    case SAMPLE:
        rc = bs_config_print_sample(stdout);
        break;
    case CHECK:
        return check(path, xargs, nx);
    case NONE:
        break;
    }
    if (rc != 0) {
        perror("bloomstage config: writing to stdout");
        return BS_EXIT_FAIL;
    }
    return BS_EXIT_OK;
}
