/*
 * cmd_run.c -- `bloomstage run -c FILE [-X key=value]...`: the stage.
 *
 * Configuration layers, lowest first: the key table's defaults, FILE, the
 * BLOOMSTAGE_* environment, -X.  SIGTERM or SIGINT drains: the current
 * batch is finished, the producer flushed, checkpoints written, offsets
 * committed, the group left; then exit 0.
 */
#include "cli_opts.h"
#include "commands.h"
#include "base/log.h"
#include "ops/metrics.h"
#include "base/settings.h"
#include "loop/stage.h"

#include <config.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

static const char RUN_HELP[] =
    "usage: bloomstage run -c FILE [-X key=value]...\n"
    "\n"
    "Consumes input.topics in consumer group consumer.group.id, drops\n"
    "blocklisted and duplicate records, produces the rest to output.topic,\n"
    "and commits offsets only after the dedup filters covering them are\n"
    "durable in the checkpoint store: checkpoint.dir, or checkpoint.topic\n"
    "with checkpoint.store=kafka.\n"
    "\n"
    "  -c, --config FILE   properties file (see config/bloomstage.conf and\n"
    "                      'bloomstage config --list')\n"
    "  -X key=value        set a key, overriding FILE and BLOOMSTAGE_* env\n"
    "\n"
    "SIGTERM/SIGINT drain and exit 0.  Exit 1 on a fatal error (e.g. a\n"
    "damaged checkpoint or blocklist: nothing is consumed or committed;\n"
    "brokers that go on refusing the credentials or the certificate at\n"
    "start-up), 2 on a usage or configuration error.\n"
    "\n"
    "Secrets stay in the process: it writes no core dump and other users'\n"
    "debuggers cannot attach (not dumpable); BLOOMSTAGE_CORE_DUMPS=1 in the\n"
    "environment allows both, for debugging.  A secret key's -X value (a\n"
    "password, a private key's passphrase) is blanked from the command\n"
    "line with a warning: give it as KEY=@file:PATH or in\n"
    "BLOOMSTAGE_<KEY>_FILE=PATH instead.\n";

/* SIGTERM and SIGINT are handled from the start of `run`: one that comes
 * before the stage exists (while the configuration and the blocklists
 * load) is kept in stop_early and stops the stage as soon as it is made,
 * so a stop at any moment drains and exits 0 instead of killing. */
static bs_stage *volatile running;
static volatile sig_atomic_t stop_early;

static void on_signal(int sig)
{
    (void)sig;
    stop_early = 1;
    if (running)
        bs_stage_stop(running);
}

static void handle_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* Starts the stage on cfg (with its metrics endpoint when set asks for
 * one, before the stage waits on any broker: /ready says why it is not
 * ready yet; guard protects it and is taken) and runs it until a signal
 * drains it or it fails: the exit status. */
static int run_stage(const bs_config *cfg, const bs_settings *set,
                     bs_metrics_guard *guard)
{
    char err[BS_ERRSTR_SIZE];
    bs_stage *s = bs_stage_new(cfg, err, sizeof(err));
    if (!s) {
        bs_metrics_guard_free(guard);
        char q[1100];
        bs_log(BS_LOG_ERROR, "cannot start", "error=%s",
               bs_log_quote(err, q, sizeof(q)));
        fprintf(stderr, "bloomstage run: %s\n", err);
        return BS_EXIT_FAIL;
    }
    bs_metrics *metrics = NULL;
    if (set->metrics_listen) {
        metrics = bs_metrics_start(set->metrics_listen, guard, s, err,
                                   sizeof(err));
        if (!metrics) {
            fprintf(stderr, "bloomstage run: %s\n", err);
            bs_stage_destroy(s);
            return BS_EXIT_FAIL;
        }
    }
    running = s;
    if (stop_early)
        bs_stage_stop(s); /* a signal came before the stage was made */

    int rc = bs_stage_run(s, err, sizeof(err));
    running = NULL;
    bs_metrics_stop(metrics);
    /* The clients are gone before the verdict, so it is the last line:
     * a client destroyed after it could still log (librdkafka's threads). */
    bs_stage_destroy(s);
    if (rc != 0)
        fprintf(stderr, "bloomstage run: %s\n", err);
    return rc == 0 ? BS_EXIT_OK : BS_EXIT_FAIL;
}

/* No core dump (it would hold every secret the process read, written
 * where it runs: in the image, the checkpoint volume) and no ptrace by
 * other processes of the user, unless BLOOMSTAGE_CORE_DUMPS=1 asks for
 * them; set before anything is read. */
static void core_dumps(void)
{
    const char *allow = getenv("BLOOMSTAGE_CORE_DUMPS");
    if (allow && !strcmp(allow, "1"))
        return;
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
        bs_log(BS_LOG_WARN, "core dumps stay allowed", "hint=\"prctl("
               "PR_SET_DUMPABLE) failed\"");
}

int cmd_run(int argc, char **argv)
{
    core_dumps();
    handle_signals();
    cli_config_opts o;
    int rc = cli_config_opts_parse(argc, argv, "run", RUN_HELP, &o);
    if (rc >= 0)
        return rc;
    if (optind < argc) {
        char shown[256];
        fprintf(stderr, "bloomstage run: unexpected argument '%s'\n",
                cli_arg_shown(argv[optind], shown, sizeof(shown)));
        return BS_EXIT_USAGE;
    }
    bs_config *cfg = cli_config_opts_load(
        &o, "run", "an empty file will do when everything is set by "
                   "BLOOMSTAGE_* or -X");
    if (!cfg)
        return BS_EXIT_USAGE;
    char err[BS_ERRSTR_SIZE];
    bs_settings set;
    bs_metrics_guard *guard = NULL;
    /* The metrics endpoint's certificate and users are configuration:
     * checked before anything else starts. */
    if (bs_settings_from_config(cfg, &set, err, sizeof(err)) != 0 ||
        bs_metrics_guard_load(cfg, &set, &guard, err, sizeof(err)) != 0) {
        fprintf(stderr, "bloomstage: %s\n", err);
        rc = BS_EXIT_USAGE;
    } else {
        bs_log_set_level(set.log_level);
        rc = run_stage(cfg, &set, guard);
    }
    bs_config_destroy(cfg);
    return rc;
}
