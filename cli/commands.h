/*
 * commands.h -- the bloomstage binary's subcommands.
 *
 * main.c only dispatches: each command lives in its own cmd_*.c, takes the
 * argv that follows its name (argv[0] is the command name itself) and returns
 * the process exit status: 0 success, 1 a failure or a negative answer (as
 * documented per command), 2 a usage error (message on stderr).
 */
#ifndef BLOOMSTAGE_COMMANDS_H
#define BLOOMSTAGE_COMMANDS_H

#define BS_EXIT_OK 0
#define BS_EXIT_FAIL 1
#define BS_EXIT_USAGE 2

int cmd_filter(int argc, char **argv);      /* filter build|info|query|merge */
int cmd_dedup(int argc, char **argv);       /* dedup < in > out */
int cmd_run(int argc, char **argv);         /* run -c FILE [-X k=v]... */
int cmd_demo(int argc, char **argv);        /* demo */
int cmd_checkpoint(int argc, char **argv);  /* checkpoint info DIR */
int cmd_mock_broker(int argc, char **argv); /* mock-broker [-b N] [-t T:P]... */
int cmd_config(int argc, char **argv);      /* config --list | --sample */
int cmd_blocklist(int argc, char **argv);   /* blocklist add|remove|load */

#endif
