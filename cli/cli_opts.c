/*
 * cli_opts.c -- the option parsing commands share (cli_opts.h): -h and a
 * refused option for all of them; for run and blocklist, -c/-X and the
 * configuration they name.
 */
#include "cli_opts.h"
#include "commands.h"
#include "base/log.h"
#include "base/settings.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

const char *cli_arg_shown(const char *arg, char *buf, size_t size)
{
    const char *eq = strchr(arg, '=');
    if (!eq)
        return arg;
    snprintf(buf, size, "%.*s=...", (int)(eq - arg), arg);
    return buf;
}

void cli_secrets_scrub(const cli_config_opts *o)
{
    for (int i = 0; i < o->nx; i++) {
        char *eq = strchr(o->xs[i], '=');
        if (!eq || !eq[1] ||
            !strncmp(eq + 1, BS_CONFIG_FILE_PREFIX,
                     strlen(BS_CONFIG_FILE_PREFIX)))
            continue;
        *eq = '\0';
        bool secret = bs_config_key_is_secret(o->xs[i]);
        /* Overwritten in place (/proc/PID/cmdline reads the very bytes
         * argv points at), before the warning: whoever reads the line
         * and then the command line finds it blanked. */
        if (secret)
            memset(eq + 1, '*', strlen(eq + 1));
        char env[3 * BS_CONFIG_MAX_KEY + 1];
        if (secret && bs_config_env_encode(o->xs[i], env, sizeof(env)) != 0)
            snprintf(env, sizeof(env), "<KEY>");
        char q[BS_CONFIG_MAX_KEY * 4 + 3];
        if (secret)
            bs_log(BS_LOG_WARN, "a secret on the command line", "key=%s "
                   "hint=\"any user sees the command line (ps): give the "
                   "value as -X KEY=@file:PATH, or as %s%s_FILE=PATH; it is "
                   "blanked from this process's command line\"",
                   bs_log_quote(o->xs[i], q, sizeof(q)), BS_CONFIG_ENV_PREFIX,
                   env);
        *eq = '=';
    }
}

int cli_opts_help(int c, const char *cmd, const char *help)
{
    if (c == 'h') {
        fputs(help, stdout);
        return BS_EXIT_OK;
    }
    fprintf(stderr, "(see 'bloomstage %s --help')\n", cmd);
    return BS_EXIT_USAGE;
}

int cli_config_opts_parse(int argc, char **argv, const char *cmd,
                          const char *help, cli_config_opts *o)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {0, 0, 0, 0}};
    int c;
    o->file = NULL;
    o->nx = 0;
    optind = 0;
    opterr = 0; /* getopt would echo "--name=VALUE"; said below, cut */
    while ((c = getopt_long(argc, argv, "c:X:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            o->file = optarg;
            break;
        case 'X':
            if (o->nx == CLI_MAX_X) {
                fprintf(stderr, "bloomstage %s: too many -X options\n", cmd);
                return BS_EXIT_USAGE;
            }
            o->xs[o->nx++] = optarg;
            break;
        case '?': {
            char shown[256];
            if (optopt == 'c' || optopt == 'X')
                fprintf(stderr, "bloomstage %s: -%c needs a value\n", cmd,
                        optopt);
            else if (optopt)
                fprintf(stderr, "bloomstage %s: unknown option '-%c'\n", cmd,
                        optopt);
            else
                fprintf(stderr, "bloomstage %s: unknown option '%s'\n", cmd,
                        cli_arg_shown(argv[optind - 1], shown,
                                      sizeof(shown)));
            return cli_opts_help(c, cmd, help);
        }
        default:
            return cli_opts_help(c, cmd, help);
        }
    }
    return -1;
}

bs_config *cli_config_opts_load(const cli_config_opts *o, const char *cmd,
                                const char *need)
{
    if (!o->file) {
        fprintf(stderr, "bloomstage %s: -c FILE is required (%s)\n", cmd,
                need);
        return NULL;
    }
    char err[BS_ERRSTR_SIZE];
    bs_config *cfg = bs_settings_load(o->file, o->xs, o->nx, err,
                                      sizeof(err));
    cli_secrets_scrub(o);
    if (!cfg)
        fprintf(stderr, "bloomstage: %s\n", err);
    return cfg;
}
