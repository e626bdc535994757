/*
 * cli_opts.h -- option parsing that more than one command shares.
 *
 * Every command answers -h and a refused option alike.  The commands that
 * read the stage's configuration (run, blocklist) take
 * the same options: -c FILE, -X key=value (repeatable), -h.  They parse
 * them here and load the configuration here, so that each command file
 * depends on the engine and on this file only, never on another command.
 */
#ifndef BLOOMSTAGE_CLI_OPTS_H
#define BLOOMSTAGE_CLI_OPTS_H

#include <config.h>
#include <stddef.h>

#define CLI_MAX_X 256

/* What every command's getopt loop does with -h and with an option it
 * refused: c 'h' prints help on stdout and is BS_EXIT_OK; any other c
 * (getopt has said what was wrong) points to cmd's --help on stderr and
 * is BS_EXIT_USAGE. */
int cli_opts_help(int c, const char *cmd, const char *help);

/* An argument as a message shows it: cut after its first '=' ("key=..."),
 * since a mistyped -X or option can carry a secret's value.  Returns arg
 * itself when it has no '=', else buf. */
const char *cli_arg_shown(const char *arg, char *buf, size_t size);

/* -c and -X as given; xs point into argv. */
typedef struct cli_config_opts {
    const char *file; /* NULL when -c is missing */
    char *xs[CLI_MAX_X];
    int nx;
} cli_config_opts;

/* Parses -c FILE, -X key=value, -h (prints help on stdout) into o; cmd
 * names the command in messages.  GNU getopt permutes, so options may
 * follow the operands, which are left at argv[optind..].  -1 to go on,
 * else the exit status to return at once (BS_EXIT_OK after -h,
 * BS_EXIT_USAGE after a message on stderr). */
int cli_config_opts_parse(int argc, char **argv, const char *cmd,
                          const char *help, cli_config_opts *o);

/* Every -X value of a secret key (bs_config_key_is_secret) that is not
 * @file:PATH is overwritten in argv with '*' (so `ps` and /proc/PID/cmdline
 * no longer show it), with a warning line naming the key and the ways to
 * keep it off the command line; never the value.  Called once the
 * configuration has copied the values (cli_config_opts_load does). */
void cli_secrets_scrub(const cli_config_opts *o);

/* The configuration o names: the key table's defaults, FILE, the
 * BLOOMSTAGE_* environment, -X, validated (bs_settings_load).  NULL after
 * a message on stderr when it cannot be loaded or -c is missing (need
 * says, in that message, what FILE is for); the caller exits
 * BS_EXIT_USAGE then.  The caller destroys what it returns. */
bs_config *cli_config_opts_load(const cli_config_opts *o, const char *cmd,
                                const char *need);

#endif
