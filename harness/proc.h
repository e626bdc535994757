/*
 * proc.h -- child processes: the mock broker, stages, short commands, and
 * bench/e2e.c's children (its pass-through child, perf).
 *
 * A child gets stdin from /dev/null (or a pipe of ours), stdout and stderr
 * captured to temporary files (so a chatty child can never block on a full
 * pipe; unlinked at once, so a failed test leaves nothing in /tmp), or
 * written to a log file that is kept, or stdout to a pipe read line by
 * line.  Every descriptor of ours is close-on-exec, so a child's stdin pipe
 * is held by this process only: when it dies the child sees EOF; and
 * PR_SET_PDEATHSIG kills (SIGKILL) any child that would not quit.
 * h_process_free kills a child still running.
 */
#ifndef BS_SUPPORT_PROC_H
#define BS_SUPPORT_PROC_H

#include "core.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/types.h>

typedef struct h_proc h_proc;

typedef struct h_spawn_opts {
    /* "KEY=VALUE" entries added to this process's environment (NULL-
     * terminated; may be NULL), overriding keys already there.
     * BLOOMSTAGE_BIN is never passed on: the stage would read it as the
     * configuration key "bin". */
    char *const *env;
    /* stderr, and stdout unless piped, to this file (created afresh, kept
     * after the child ends); NULL: anonymous capture files. */
    const char *log_path;
    bool pipe_stdin;  /* stdin a pipe (h_process_write), not /dev/null */
    bool pipe_stdout; /* stdout a pipe (h_process_read_line) */
} h_spawn_opts;

/* argv[0] is a path or a name looked up in PATH; argv is NULL-terminated;
 * opts may be NULL (the defaults above).  An exec failure is reported here,
 * not as an exit status 127. */
int h_process_spawn_opts(char *const argv[], const h_spawn_opts *opts,
                         h_proc **out) H_WARN_UNUSED;
/* h_process_spawn_opts with just an environment (envp_extra may be NULL). */
int h_process_spawn(char *const argv[], char *const envp_extra[],
                    h_proc **out) H_WARN_UNUSED;
/* Waits up to timeout_ms for the child to exit: 0 with *status the raw wait
 * status (WIFEXITED...), 1 if still running (h_last_error() says so; the
 * child is left running), -1 on error.  Once reaped, returns 0 and the same
 * status again. */
int h_process_wait(h_proc *p, int timeout_ms, int *status) H_WARN_UNUSED;
/* Like h_process_wait(p, 0, status) but leaves an exited child unreaped
 * (its /proc entry stays readable): 1 running, 0 exited (*status a wait
 * status), -1 on error. */
int h_process_peek(h_proc *p, int *status) H_WARN_UNUSED;
/* SIGTERM, then up to timeout_ms for the child to exit (*status, may be
 * NULL): 0 if it did, 1 if it had to be killed with SIGKILL (reaped too),
 * -1 on error. */
int h_process_terminate(h_proc *p, int timeout_ms, int *status);
/* Sends a signal; a no-op on a child already reaped. */
int h_process_kill(h_proc *p, int sig);
pid_t h_process_pid(const h_proc *p);
/* A memory field of /proc/PID/status in KiB ("VmRSS", "VmHWM"), or -1. */
long h_proc_status_kib(pid_t pid, const char *field);
/* Whether process pid has a handler for signal sig (its SigCgt in
 * /proc/PID/status): a process that does not yet dies of SIGTERM. */
bool h_proc_catches(pid_t pid, int sig);
/* CPU seconds (user + system) of a running process so far, from
 * /proc/PID/stat; -1 if it cannot be read. */
double h_proc_cpu_s(pid_t pid);
/* The child's resource usage, once reaped (zeros before). */
const struct rusage *h_process_rusage(const h_proc *p);
/* Everything the child wrote so far, as a string owned by p (valid until
 * the next call on p of the same function or h_process_free).  With a
 * log_path both are the log; a piped stdout reads as "". */
const char *h_process_stdout(h_proc *p);
const char *h_process_stderr(h_proc *p);
/* The last `max` bytes of h_process_stderr. */
const char *h_process_stderr_tail(h_proc *p, size_t max);
/* pipe_stdout: reads one line (without '\n') into line, waiting up to
 * timeout_ms; -1 on a timeout, EOF or a line longer than 4096 bytes. */
int h_process_read_line(h_proc *p, int timeout_ms, char *line,
                        size_t size) H_WARN_UNUSED;
/* pipe_stdin: writes text to the child's stdin. */
int h_process_write(h_proc *p, const char *text) H_WARN_UNUSED;
/* SIGKILL if still running, reap, close everything, free.  NULL: no-op. */
void h_process_free(h_proc *p);
/* "exit 0", "exit 3", "killed by SIGKILL" (static buffer). */
const char *h_status_str(int status);

#endif
