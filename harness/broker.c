/*
 * broker.c -- see broker.h.
 */
#include "broker.h"
#include "proc.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

struct h_broker {
    h_proc *p; /* NULL: attached */
    char *bootstraps;
};

/* The tail of the broker's stderr, for error messages. */
static const char *tail(h_broker *b)
{
    return b->p ? h_process_stderr_tail(b->p, 2000) : "";
}

/* Reads one line of the broker's stdout; on failure says so as the
 * broker's, with its stderr. */
static int read_line(h_broker *b, char *line, size_t size)
{
    if (h_process_read_line(b->p, H_BROKER_MS, line, size) == 0)
        return 0;
    char why[512];
    snprintf(why, sizeof(why), "%s", h_last_error());
    return h_fail("mock-broker: %s; its stderr: %s", why, tail(b));
}

int h_broker_start_opts(const char *bloomstage_path, const h_broker_opts *o,
                        h_broker **out)
{
    *out = NULL;
    if (!bloomstage_path)
        return h_fail("h_broker_start: no bloomstage binary (BLOOMSTAGE_BIN "
                      "unset?)");
    /* A write to a broker that died must be an error, not our death. */
    signal(SIGPIPE, SIG_IGN);

    size_t nt = 0;
    while (o->topic_specs && o->topic_specs[nt])
        nt++;
    char **argv = h_xmalloc((6 + 2 * nt + 1) * sizeof(*argv));
    char nbuf[16];
    snprintf(nbuf, sizeof(nbuf), "%d", o->brokers > 0 ? o->brokers : 1);
    size_t k = 0;
    argv[k++] = (char *)bloomstage_path;
    argv[k++] = "mock-broker";
    argv[k++] = "--control";
    argv[k++] = "-b";
    argv[k++] = nbuf;
    for (size_t i = 0; i < nt; i++) {
        argv[k++] = "-t";
        argv[k++] = (char *)o->topic_specs[i];
    }
    argv[k] = NULL;

    h_broker *b = h_xcalloc(1, sizeof(*b));
    h_spawn_opts so = {.log_path = o->log_path,
                       .pipe_stdin = true,
                       .pipe_stdout = true};
    int rc = h_process_spawn_opts(argv, &so, &b->p);
    free(argv);
    if (rc) {
        free(b);
        return -1;
    }
    char line[4096];
    if (read_line(b, line, sizeof(line))) {
        h_process_free(b->p);
        free(b);
        return -1;
    }
    if (!strchr(line, ':')) {
        h_fail("mock-broker printed '%s', not a bootstrap list; stderr: %s",
               line, tail(b));
        h_process_free(b->p);
        free(b);
        return -1;
    }
    b->bootstraps = h_xstrdup(line);
    *out = b;
    return 0;
}

int h_broker_start(const char *bloomstage_path, int brokers,
                   const char *const *topic_specs, h_broker **out)
{
    h_broker_opts o = {.brokers = brokers, .topic_specs = topic_specs};
    return h_broker_start_opts(bloomstage_path, &o, out);
}

int h_broker_attach(const char *bootstraps, h_broker **out)
{
    *out = NULL;
    if (!bootstraps || !strchr(bootstraps, ':'))
        return h_fail("'%s' is not a bootstrap list (host:port,...)",
                      bootstraps ? bootstraps : "(null)");
    h_broker *b = h_xcalloc(1, sizeof(*b));
    b->bootstraps = h_xstrdup(bootstraps);
    *out = b;
    return 0;
}

const char *h_broker_bootstraps(const h_broker *b)
{
    return b->bootstraps;
}

bool h_broker_is_mock(const h_broker *b)
{
    return b->p != NULL;
}

pid_t h_broker_pid(const h_broker *b)
{
    return b->p ? h_process_pid(b->p) : -1;
}

const char *h_broker_stderr(h_broker *b)
{
    return b->p ? h_process_stderr(b->p) : "";
}

int h_broker_control(h_broker *b, const char *command)
{
    if (!b->p)
        return h_fail("control command '%s': %s is not a mock broker of "
                      "ours", command, b->bootstraps);
    if (strchr(command, '\n'))
        return h_fail("control command '%s' has a newline", command);
    char *line = h_strdupf("%s\n", command);
    int w = h_process_write(b->p, line);
    free(line);
    if (w) {
        char why[512];
        snprintf(why, sizeof(why), "%s", h_last_error());
        return h_fail("cannot send '%s' to mock-broker: %s; its stderr: %s",
                      command, why, tail(b));
    }
    char answer[1024];
    if (read_line(b, answer, sizeof(answer)))
        return -1;
    if (strcmp(answer, "ok"))
        return h_fail("mock-broker '%s': %s", command, answer);
    return 0;
}

int h_broker_stop(h_broker *b)
{
    if (!b)
        return 0;
    int rc = 0;
    if (b->p) {
        int st = 0;
        int w = h_process_terminate(b->p, H_BROKER_MS, &st);
        if (w == 1)
            rc = h_fail("mock-broker ignored SIGTERM for %d ms (killed); "
                        "its stderr: %s", H_BROKER_MS, tail(b));
        else if (w < 0)
            rc = -1;
        else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            rc = h_fail("mock-broker: %s on SIGTERM; its stderr: %s",
                        h_status_str(st), tail(b));
        h_process_free(b->p);
    }
    free(b->bootstraps);
    free(b);
    return rc;
}
