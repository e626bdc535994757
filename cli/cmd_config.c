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
#include "cli_opts.h"
#include "commands.h"
#include "ops/metrics_guard.h"
#include "base/settings.h"
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
    char errstr[BS_ERRSTR_SIZE];
    bs_config *cfg = bs_settings_load(path, xargs, nx, errstr, sizeof errstr);
    /* What the metrics endpoint's files hold, as `run` checks it. */
    bs_settings set;
    bs_metrics_guard *guard = NULL;
    if (cfg && (bs_settings_from_config(cfg, &set, errstr, sizeof errstr) ||
                bs_metrics_guard_load(cfg, &set, &guard, errstr,
                                      sizeof errstr))) {
        bs_config_destroy(cfg);
        cfg = NULL;
    }
    bs_metrics_guard_free(guard);
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

enum mode { NONE, LIST, SAMPLE, CHECK };

/* config's command line. */
typedef struct config_args {
    enum mode mode;
    const char *path;
    /* -X arguments, applied in order after the file and the environment. */
    char *xargs[256];
    int nx;
} config_args;

/* -c FILE, --config=FILE or -X key=value at argv[*i] into o (*i moves
 * past a value given as the next argument): -1 to go on, else the exit
 * status. */
static int config_file_or_x(int argc, char **argv, int *i, config_args *o)
{
    const char *a = argv[*i];
    if (strcmp(a, "-c") == 0 || strcmp(a, "--config") == 0) {
        if (*i + 1 >= argc)
            return usage_error("%s needs a FILE", a);
        if (o->path)
            return usage_error("%s: only one config file", a);
        o->path = argv[++*i];
    } else if (strncmp(a, "--config=", 9) == 0) {
        if (o->path)
            return usage_error("%s: only one config file", a);
        o->path = a + 9;
    } else if (strncmp(a, "-X", 2) == 0) {
        if (o->nx == (int)(sizeof(o->xargs) / sizeof(o->xargs[0])))
            return usage_error("%s: too many -X (at most 256)", a);
        if (a[2] != '\0') {
            o->xargs[o->nx++] = argv[*i] + 2; /* -Xkey=value, as kcat takes */
        } else if (*i + 1 < argc) {
            o->xargs[o->nx++] = argv[++*i];
        } else {
            return usage_error("%s needs key=value", a);
        }
    } else {
        char shown[256];
        return usage_error("unknown argument '%s'",
                           cli_arg_shown(a, shown, sizeof(shown)));
    }
    return -1;
}

/* Reads config's command line into o: -1 to go on, else the exit
 * status. */
static int config_parse(int argc, char **argv, config_args *o)
{
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
            if (o->mode != NONE && o->mode != m)
                return usage_error("%s: only one of --list, --sample, "
                                   "--check",
                                   a);
            o->mode = m;
            continue;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(usage_text, stdout);
            return fflush(stdout) == 0 ? BS_EXIT_OK : BS_EXIT_FAIL;
        }
        int rc = config_file_or_x(argc, argv, &i, o);
        if (rc >= 0)
            return rc;
    }
    if (o->mode == NONE)
        return usage_error("give --list, --sample or --check");
    if (o->mode != CHECK && (o->path || o->nx > 0))
        return usage_error("-c and -X go with --check only");
    if (o->path && o->path[0] == '\0')
        return usage_error("-c needs a non-empty FILE");
    return -1;
}

int cmd_config(int argc, char **argv)
{
    config_args o = {.mode = NONE};
    int rc = config_parse(argc, argv, &o);
    if (rc >= 0)
        return rc;
    if (o.mode == CHECK)
        return check(o.path, o.xargs, o.nx);
    rc = o.mode == LIST ? bs_config_print_list(stdout)
                        : bs_config_print_sample(stdout);
    if (rc != 0) {
        perror("bloomstage config: writing to stdout");
        return BS_EXIT_FAIL;
    }
    return BS_EXIT_OK;
}
