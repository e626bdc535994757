/*
 * proc.c -- see proc.h.
 */
#include "proc.h"
#include "files.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

struct h_proc {
    pid_t pid;
    bool reaped;
    int status;
    struct rusage ru;
    int out_file; /* capture files (or the log), ours to read; -1 if none */
    int err_file;
    char *out_text;
    char *err_text;
    int stdin_fd;  /* write end of the child's stdin, or -1 */
    int stdout_fd; /* read end of the child's stdout, or -1 */
    char buf[4096]; /* stdout bytes read but not yet returned as lines */
    size_t used;
};

/*
 * An anonymous capture file: created and unlinked at once, so nothing is
 * left in /tmp even when a failed assertion skips h_process_free.  *mine is
 * ours (close-on-exec), *child a second descriptor for the child's dup2.
 * Both share one file offset, so ours is only ever read with pread().
 */
static int capture_file(const char *what, int *mine, int *child)
{
    char path[64];
    snprintf(path, sizeof(path), "/tmp/bloomstage-test-%s-XXXXXX", what);
    int f = mkostemp(path, O_CLOEXEC);
    if (f < 0)
        return h_fail("mkostemp: %s", strerror(errno));
    unlink(path);
    int d = fcntl(f, F_DUPFD_CLOEXEC, 0);
    if (d < 0) {
        int e = errno;
        close(f);
        return h_fail("dup: %s", strerror(e));
    }
    *mine = f;
    *child = d;
    return 0;
}

/* A close-on-exec pipe; with child, its end `end` (0 read, 1 write) moves
 * to *child (for the child's dup2). */
static int make_pipe(int fds[2], int *child, int end)
{
    if (pipe2(fds, O_CLOEXEC))
        return h_fail("pipe2: %s", strerror(errno));
    if (child) {
        *child = fds[end];
        fds[end] = -1;
    }
    return 0;
}

/* environ with envp_extra's keys replaced or added, BLOOMSTAGE_BIN left
 * out; the array is malloc'd, the strings are borrowed. */
static char **merged_env(char *const envp_extra[])
{
    size_t n = 0, m = 0;
    while (environ[n])
        n++;
    while (envp_extra && envp_extra[m])
        m++;
    char **env = h_xmalloc((n + m + 1) * sizeof(*env));
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(environ[i], '=');
        size_t klen = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
        /* The layer's own variable names the binary under test; left in,
         * a spawned stage would read it as the config key "bin". */
        bool overridden = !strncmp(environ[i], "BLOOMSTAGE_BIN=", 15);
        for (size_t j = 0; j < m && !overridden; j++)
            overridden = !strncmp(envp_extra[j], environ[i], klen) &&
                         envp_extra[j][klen] == '=';
        if (!overridden)
            env[k++] = environ[i];
    }
    for (size_t j = 0; j < m; j++)
        env[k++] = envp_extra[j];
    env[k] = NULL;
    return env;
}

int h_process_spawn_opts(char *const argv[], const h_spawn_opts *opts,
                         h_proc **out)
{
    static const h_spawn_opts defaults = {0};
    const h_spawn_opts *o = opts ? opts : &defaults;
    *out = NULL;
    if (!argv || !argv[0])
        return h_fail("spawn: empty argv");

    h_proc *p = h_xcalloc(1, sizeof(*p));
    p->pid = -1;
    p->out_file = p->err_file = p->stdin_fd = p->stdout_fd = -1;
    /* the child's ends */
    int child_in = -1, child_out = -1, child_err = -1;
    int in_pipe[2] = {-1, -1}, out_pipe[2] = {-1, -1}, exec_pipe[2] = {-1, -1};
    char **env = NULL;
    int rc = -1;

    if (o->log_path) {
        child_err = open(o->log_path,
                         O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (child_err < 0) {
            h_fail("%s: %s", o->log_path, strerror(errno));
            goto done;
        }
        p->err_file = open(o->log_path, O_RDONLY | O_CLOEXEC);
        if (p->err_file < 0) {
            h_fail("%s: %s", o->log_path, strerror(errno));
            goto done;
        }
        if (!o->pipe_stdout) {
            child_out = fcntl(child_err, F_DUPFD_CLOEXEC, 0);
            p->out_file = fcntl(p->err_file, F_DUPFD_CLOEXEC, 0);
            if (child_out < 0 || p->out_file < 0) {
                h_fail("dup: %s", strerror(errno));
                goto done;
            }
        }
    } else {
        if (capture_file("stderr", &p->err_file, &child_err))
            goto done;
        if (!o->pipe_stdout && capture_file("stdout", &p->out_file,
                                            &child_out))
            goto done;
    }
    if ((o->pipe_stdout && make_pipe(out_pipe, &child_out, 1)) ||
        (o->pipe_stdin && make_pipe(in_pipe, &child_in, 0)) ||
        make_pipe(exec_pipe, NULL, 0))
        goto done;
    if (!o->pipe_stdin &&
        (child_in = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
        h_fail("/dev/null: %s", strerror(errno));
        goto done;
    }
    env = merged_env(o->env);
    bool by_path = strchr(argv[0], '/') != NULL;
    pid_t parent = getpid();

    pid_t pid = fork();
    if (pid < 0) {
        h_fail("fork: %s", strerror(errno));
        goto done;
    }
    if (pid == 0) {
        /* The child: async-signal-safe calls only, until exec (librdkafka
         * threads may be running in the parent). */
        int e;
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL); /* ignored here; exec keeps that */
        if (dup2(child_in, STDIN_FILENO) < 0 ||
            dup2(child_out, STDOUT_FILENO) < 0 ||
            dup2(child_err, STDERR_FILENO) < 0) {
            e = errno;
        } else {
            if (by_path)
                execve(argv[0], argv, env);
            else
                execvpe(argv[0], argv, env);
            e = errno;
        }
        ssize_t w = write(exec_pipe[1], &e, sizeof(e));
        (void)w;
        _exit(127);
    }

    p->pid = pid;
    close(exec_pipe[1]);
    exec_pipe[1] = -1;
    int child_errno = 0;
    ssize_t n;
    while ((n = read(exec_pipe[0], &child_errno, sizeof(child_errno))) < 0 &&
           errno == EINTR)
        ;
    if (n > 0) { /* exec failed: the child has exited with 127 */
        while (wait4(pid, &p->status, 0, &p->ru) < 0 && errno == EINTR)
            ;
        p->reaped = true;
        h_fail("cannot run %s: %s", argv[0], strerror(child_errno));
        goto done;
    }
    p->stdin_fd = in_pipe[1];
    p->stdout_fd = out_pipe[0];
    in_pipe[1] = out_pipe[0] = -1;
    *out = p;
    p = NULL;
    rc = 0;

done:
    free(env);
    int fds[] = {child_in, child_out, child_err, in_pipe[0], in_pipe[1],
                 out_pipe[0], out_pipe[1], exec_pipe[0], exec_pipe[1]};
    for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
        if (fds[i] >= 0)
            close(fds[i]);
    h_process_free(p);
    return rc;
}

int h_process_spawn(char *const argv[], char *const envp_extra[],
                    h_proc **out)
{
    h_spawn_opts o = {.env = envp_extra};
    return h_process_spawn_opts(argv, &o, out);
}

pid_t h_process_pid(const h_proc *p)
{
    return p->pid;
}

const struct rusage *h_process_rusage(const h_proc *p)
{
    return &p->ru;
}

int h_process_wait(h_proc *p, int timeout_ms, int *status)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    while (!p->reaped) {
        pid_t r = wait4(p->pid, &p->status, WNOHANG, &p->ru);
        if (r == p->pid) {
            p->reaped = true;
            break;
        }
        if (r < 0 && errno != EINTR)
            return h_fail("waitpid(%d): %s", (int)p->pid, strerror(errno));
        if (h_now_ms() >= deadline) {
            h_fail("process %d still running after %d ms", (int)p->pid,
                   timeout_ms);
            return 1;
        }
        h_sleep_ms(5);
    }
    if (status)
        *status = p->status;
    return 0;
}

int h_process_peek(h_proc *p, int *status)
{
    if (p->reaped) {
        if (status)
            *status = p->status;
        return 0;
    }
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    if (waitid(P_PID, (id_t)p->pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0)
        return h_fail("waitid(%d): %s", (int)p->pid, strerror(errno));
    if (si.si_pid != p->pid)
        return 1; /* still running */
    if (status)
        *status = si.si_code == CLD_EXITED
                      ? (si.si_status & 0xff) << 8
                      : (si.si_status & 0x7f) |
                            (si.si_code == CLD_DUMPED ? 0x80 : 0);
    return 0;
}

int h_process_terminate(h_proc *p, int timeout_ms, int *status)
{
    h_process_kill(p, SIGTERM);
    int st = 0;
    int w = h_process_wait(p, timeout_ms, &st);
    if (w == 1) {
        h_process_kill(p, SIGKILL);
        w = h_process_wait(p, H_REAP_MS, &st) == 0 ? 1 : -1;
    }
    if (status)
        *status = st;
    return w;
}

int h_process_kill(h_proc *p, int sig)
{
    if (p->reaped)
        return 0;
    if (kill(p->pid, sig))
        return h_fail("kill(%d, %d): %s", (int)p->pid, sig, strerror(errno));
    return 0;
}

/* The capture file's contents so far, as a string in *slot. */
static const char *capture_text(int fd, char **slot)
{
    free(*slot);
    struct stat st;
    size_t size = fd >= 0 && !fstat(fd, &st) ? (size_t)st.st_size : 0;
    char *buf = h_xmalloc(size + 1);
    size_t used = 0;
    while (used < size) {
        ssize_t n = pread(fd, buf + used, size - used, (off_t)used);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        used += (size_t)n;
    }
    buf[used] = '\0';
    *slot = buf;
    return buf;
}

const char *h_process_stdout(h_proc *p)
{
    return capture_text(p->out_file, &p->out_text);
}

const char *h_process_stderr(h_proc *p)
{
    return capture_text(p->err_file, &p->err_text);
}

const char *h_process_stderr_tail(h_proc *p, size_t max)
{
    const char *e = h_process_stderr(p);
    size_t n = strlen(e);
    return n > max ? e + n - max : e;
}

int h_process_read_line(h_proc *p, int timeout_ms, char *line, size_t size)
{
    if (p->stdout_fd < 0)
        return h_fail("process %d: stdout is not a pipe", (int)p->pid);
    int64_t deadline = h_now_ms() + timeout_ms;
    for (;;) {
        char *nl = memchr(p->buf, '\n', p->used);
        if (nl) {
            size_t len = (size_t)(nl - p->buf);
            snprintf(line, size, "%.*s", (int)len, p->buf);
            p->used -= len + 1;
            memmove(p->buf, nl + 1, p->used);
            return 0;
        }
        if (p->used == sizeof(p->buf))
            return h_fail("a line longer than %zu bytes", sizeof(p->buf));
        int64_t left = deadline - h_now_ms();
        if (left <= 0)
            return h_fail("no line within %d ms", timeout_ms);
        struct pollfd pfd = {.fd = p->stdout_fd, .events = POLLIN};
        int r = poll(&pfd, 1, (int)left);
        if (r < 0 && errno != EINTR)
            return h_fail("poll: %s", strerror(errno));
        if (r <= 0)
            continue;
        ssize_t n = read(p->stdout_fd, p->buf + p->used,
                         sizeof(p->buf) - p->used);
        if (n < 0 && errno != EINTR && errno != EAGAIN)
            return h_fail("reading its stdout: %s", strerror(errno));
        if (n == 0) {
            int st = 0;
            const char *how = h_process_wait(p, 2000, &st) == 0
                                  ? h_status_str(st)
                                  : "closed its stdout";
            return h_fail("it ended (%s)", how);
        }
        if (n > 0)
            p->used += (size_t)n;
    }
}

int h_process_write(h_proc *p, const char *text)
{
    if (p->stdin_fd < 0)
        return h_fail("process %d: stdin is not a pipe", (int)p->pid);
    if (h_write_all(p->stdin_fd, text, strlen(text)))
        return h_fail("writing to process %d: %s", (int)p->pid,
                      strerror(errno));
    return 0;
}

void h_process_free(h_proc *p)
{
    if (!p)
        return;
    if (p->pid > 0 && !p->reaped) {
        kill(p->pid, SIGKILL);
        while (wait4(p->pid, &p->status, 0, &p->ru) < 0 && errno == EINTR)
            ;
    }
    int fds[] = {p->stdin_fd, p->stdout_fd, p->out_file, p->err_file};
    for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(p->out_text);
    free(p->err_text);
    free(p);
}

const char *h_status_str(int status)
{
    static char buf[64];
    if (WIFEXITED(status))
        snprintf(buf, sizeof(buf), "exit %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, sizeof(buf), "killed by SIG%s",
                 sigabbrev_np(WTERMSIG(status))
                     ? sigabbrev_np(WTERMSIG(status))
                     : "?");
    else
        snprintf(buf, sizeof(buf), "wait status 0x%x", (unsigned)status);
    return buf;
}

double h_proc_cpu_s(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    unsigned long long ut = 0, st = 0;
    /* after ")": state(3) ppid pgrp session tty tpgid flags minflt cminflt
     * majflt cmajflt utime(14) stime(15) */
    if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
                     "%llu %llu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

bool h_proc_catches(pid_t pid, int sig)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    unsigned long long mask = 0;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "SigCgt: %llx", &mask) == 1)
            break;
    if (f)
        fclose(f);
    return sig > 0 && sig <= 64 && (mask >> (sig - 1) & 1);
}

long h_proc_status_kib(pid_t pid, const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = strlen(field);
    long kib = -1;
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, field, n) && line[n] == ':' &&
            sscanf(line + n + 1, " %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}
