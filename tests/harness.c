/*
 * harness.c -- see harness.h.  The integration tests' processes, files and
 * Kafka clients.
 *
 * Every Kafka helper makes its own short-lived client and destroys it before
 * returning, so no librdkafka thread outlives a call and tests cannot leak
 * state into each other through a shared client.  librdkafka's log goes to a
 * bounded in-memory ring (kafka_log_*) instead of stderr; H_CHECK and
 * h_dump_kafka_log() print it when something failed.
 *
 * Children are spawned with every descriptor of ours close-on-exec, so a
 * broker's stdin pipe is held by this process only: when the test binary
 * dies the broker sees EOF and quits (and PR_SET_PDEATHSIG kills any child
 * that would not).
 */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define H_BROKER_TIMEOUT_MS 10000
#define H_MESSAGE_TIMEOUT_MS "10000"
#define H_REQUEST_TIMEOUT_MS 10000

/* ---- errors --------------------------------------------------------- */

static char h_err[4096];

const char *h_last_error(void)
{
    return h_err;
}

static int h_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Records the reason for a failure; returns -1 for `return h_fail(...)`. */
static int h_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h_err, sizeof(h_err), fmt, ap);
    va_end(ap);
    return -1;
}

static void *h_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "harness: out of memory (%zu bytes)\n", n);
        abort();
    }
    return p;
}

static char *h_xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(h_xmalloc(n), s, n);
}

char *h_strdupf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int r = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (r < 0) {
        fprintf(stderr, "harness: out of memory\n");
        abort();
    }
    return s;
}

static int64_t h_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void h_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) && errno == EINTR)
        ;
}

/* ---- librdkafka's log, kept in a ring ------------------------------- */

#define KAFKA_LOG_LINES 256

static pthread_mutex_t kafka_log_lock = PTHREAD_MUTEX_INITIALIZER;
static char *kafka_log[KAFKA_LOG_LINES];
static size_t kafka_log_next; /* total lines ever added */
static size_t kafka_log_first; /* first line not yet dumped */

/* Called from librdkafka's threads. */
static void kafka_log_cb(const rd_kafka_t *rk, int level, const char *fac,
                         const char *buf)
{
    char *line = NULL;
    if (asprintf(&line, "%%%d|%s|%s|%s", level, rk ? rd_kafka_name(rk) : "-",
                 fac, buf) < 0)
        return;
    pthread_mutex_lock(&kafka_log_lock);
    size_t slot = kafka_log_next % KAFKA_LOG_LINES;
    free(kafka_log[slot]);
    kafka_log[slot] = line;
    kafka_log_next++;
    pthread_mutex_unlock(&kafka_log_lock);
}

void h_dump_kafka_log(void)
{
    pthread_mutex_lock(&kafka_log_lock);
    size_t first = kafka_log_first;
    if (kafka_log_next - first > KAFKA_LOG_LINES) {
        fprintf(stderr, "harness: (%zu earlier librdkafka log lines dropped)\n",
                kafka_log_next - first - KAFKA_LOG_LINES);
        first = kafka_log_next - KAFKA_LOG_LINES;
    }
    if (first < kafka_log_next)
        fprintf(stderr, "harness: librdkafka log since the last dump:\n");
    for (size_t i = first; i < kafka_log_next; i++)
        fprintf(stderr, "  %s\n", kafka_log[i % KAFKA_LOG_LINES]);
    kafka_log_first = kafka_log_next;
    pthread_mutex_unlock(&kafka_log_lock);
}

/* ---- files and directories ----------------------------------------- */

const char *h_bloomstage_path(void)
{
    const char *p = getenv("BLOOMSTAGE_BIN");
    if (!p || !*p) {
        h_fail("BLOOMSTAGE_BIN is not set (ctest sets it to the bloomstage "
               "binary; set it by hand to run this test alone)");
        return NULL;
    }
    if (access(p, X_OK)) {
        h_fail("BLOOMSTAGE_BIN=%s: %s", p, strerror(errno));
        return NULL;
    }
    return p;
}

int h_tmpdir_new(char **path)
{
    char *t = h_xstrdup("/tmp/bloomstage-test-XXXXXX");
    if (!mkdtemp(t)) {
        int e = errno;
        free(t);
        return h_fail("mkdtemp: %s", strerror(e));
    }
    *path = t;
    return 0;
}

static int rm_entry(const char *path, const struct stat *st, int type,
                    struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    if (remove(path))
        return h_fail("cannot remove %s: %s", path, strerror(errno));
    return 0;
}

int h_tmpdir_remove(const char *path)
{
    if (!path)
        return 0;
    h_err[0] = '\0'; /* rm_entry's reason, if it fails */
    if (nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS) == 0)
        return 0;
    if (h_err[0]) /* an entry could not be removed */
        return -1;
    if (errno == ENOENT) /* already gone */
        return 0;
    return h_fail("cannot remove %s: %s", path, strerror(errno));
}

static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int h_write_file(const char *path, const char *contents)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return h_fail("cannot create %s: %s", path, strerror(errno));
    if (write_all(fd, contents, strlen(contents))) {
        int e = errno;
        close(fd);
        return h_fail("cannot write %s: %s", path, strerror(e));
    }
    if (close(fd))
        return h_fail("cannot write %s: %s", path, strerror(errno));
    return 0;
}

int h_read_file(const char *path, char **out, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return h_fail("cannot open %s: %s", path, strerror(errno));
    size_t cap = 4096, used = 0;
    char *buf = h_xmalloc(cap);
    for (;;) {
        if (cap - used < 2) {
            cap *= 2;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                close(fd);
                return h_fail("out of memory reading %s", path);
            }
            buf = nb;
        }
        ssize_t n = read(fd, buf + used, cap - used - 1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            free(buf);
            close(fd);
            return h_fail("cannot read %s: %s", path, strerror(e));
        }
        if (n == 0)
            break;
        used += (size_t)n;
    }
    close(fd);
    buf[used] = '\0';
    *out = buf;
    if (len)
        *len = used;
    return 0;
}

/* ---- processes ------------------------------------------------------ */

struct h_proc {
    pid_t pid;
    bool reaped;
    int status;
    int out_file; /* capture files, already unlinked; -1 if none */
    int err_file;
    char *out_text;
    char *err_text;
    int stdin_fd;  /* write end of the child's stdin, or -1 */
    int stdout_fd; /* read end of the child's stdout, or -1 */
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

/* environ with envp_extra's keys replaced or added; the array is malloc'd,
 * the strings are borrowed. */
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
        /* The harness's own variable names the binary under test; left in,
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

/*
 * The one spawn: with `pipes`, the child's stdin and stdout are pipes kept
 * in p->stdin_fd / p->stdout_fd; without, stdin is /dev/null and stdout a
 * capture file.  stderr is always a capture file.
 */
static int spawn(char *const argv[], char *const envp_extra[], bool pipes,
                 h_proc **out)
{
    *out = NULL;
    if (!argv || !argv[0])
        return h_fail("spawn: empty argv");

    h_proc *p = h_xmalloc(sizeof(*p));
    *p = (h_proc){.pid = -1,
                  .out_file = -1,
                  .err_file = -1,
                  .stdin_fd = -1,
                  .stdout_fd = -1};
    int child_in = -1, child_out = -1, child_err = -1;
    int in_pipe[2] = {-1, -1}, out_pipe[2] = {-1, -1}, exec_pipe[2] = {-1, -1};
    char **env = NULL;
    int rc = -1;

    if (capture_file("stderr", &p->err_file, &child_err))
        goto done;
    if (pipes) {
        if (pipe2(in_pipe, O_CLOEXEC) || pipe2(out_pipe, O_CLOEXEC)) {
            h_fail("pipe2: %s", strerror(errno));
            goto done;
        }
        child_in = in_pipe[0];
        child_out = out_pipe[1];
    } else {
        if ((child_in = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
            h_fail("/dev/null: %s", strerror(errno));
            goto done;
        }
        if (capture_file("stdout", &p->out_file, &child_out))
            goto done;
    }
    if (pipe2(exec_pipe, O_CLOEXEC)) {
        h_fail("pipe2: %s", strerror(errno));
        goto done;
    }
    env = merged_env(envp_extra);
    bool by_path = strchr(argv[0], '/') != NULL;
    pid_t parent = getpid();

    pid_t pid = fork();
    if (pid < 0) {
        h_fail("fork: %s", strerror(errno));
        goto done;
    }
    if (pid == 0) {
        /* The child: async-signal-safe calls only, until exec. */
        int e;
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL); /* the harness ignores it; exec keeps that */
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
        while (waitpid(pid, &p->status, 0) < 0 && errno == EINTR)
            ;
        p->reaped = true;
        h_fail("cannot run %s: %s", argv[0], strerror(child_errno));
        goto done;
    }
    if (pipes) {
        p->stdin_fd = in_pipe[1];
        p->stdout_fd = out_pipe[0];
        in_pipe[1] = out_pipe[0] = -1;
    }
    *out = p;
    p = NULL;
    rc = 0;

done:
    free(env);
    int fds[] = {child_err, pipes ? -1 : child_in, pipes ? -1 : child_out,
                 in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1],
                 exec_pipe[0], exec_pipe[1]};
    for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
        if (fds[i] >= 0)
            close(fds[i]);
    h_process_free(p);
    return rc;
}

int h_process_spawn(char *const argv[], char *const envp_extra[],
                    h_proc **out)
{
    return spawn(argv, envp_extra, false, out);
}

pid_t h_process_pid(const h_proc *p)
{
    return p->pid;
}

int h_process_wait(h_proc *p, int timeout_ms, int *status)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    while (!p->reaped) {
        pid_t r = waitpid(p->pid, &p->status, WNOHANG);
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

void h_process_free(h_proc *p)
{
    if (!p)
        return;
    if (p->pid > 0 && !p->reaped) {
        kill(p->pid, SIGKILL);
        while (waitpid(p->pid, &p->status, 0) < 0 && errno == EINTR)
            ;
    }
    if (p->stdin_fd >= 0)
        close(p->stdin_fd);
    if (p->stdout_fd >= 0)
        close(p->stdout_fd);
    if (p->out_file >= 0)
        close(p->out_file);
    if (p->err_file >= 0)
        close(p->err_file);
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
                 sigabbrev_np(WTERMSIG(status)) ? sigabbrev_np(WTERMSIG(status))
                                                : "?");
    else
        snprintf(buf, sizeof(buf), "wait status 0x%x", (unsigned)status);
    return buf;
}

/* ---- the mock broker ------------------------------------------------ */

struct h_broker {
    h_proc *p;
    char *bootstraps;
    char buf[4096]; /* stdout bytes read but not yet consumed as lines */
    size_t used;
};

/* The last `max` bytes of the broker's stderr, for error messages. */
static const char *broker_stderr_tail(h_broker *b, size_t max)
{
    const char *e = h_process_stderr(b->p);
    size_t n = strlen(e);
    return n > max ? e + n - max : e;
}

/* Reads one line of the broker's stdout (without '\n') into line. */
static int broker_read_line(h_broker *b, int timeout_ms, char *line,
                            size_t size)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    for (;;) {
        char *nl = memchr(b->buf, '\n', b->used);
        if (nl) {
            size_t len = (size_t)(nl - b->buf);
            snprintf(line, size, "%.*s", (int)len, b->buf);
            b->used -= len + 1;
            memmove(b->buf, nl + 1, b->used);
            return 0;
        }
        if (b->used == sizeof(b->buf))
            return h_fail("mock-broker: line longer than %zu bytes",
                          sizeof(b->buf));
        int64_t left = deadline - h_now_ms();
        if (left <= 0)
            return h_fail("mock-broker: no answer within %d ms; its stderr: "
                          "%s", timeout_ms, broker_stderr_tail(b, 2000));
        struct pollfd pfd = {.fd = b->p->stdout_fd, .events = POLLIN};
        int r = poll(&pfd, 1, (int)left);
        if (r < 0 && errno != EINTR)
            return h_fail("poll: %s", strerror(errno));
        if (r <= 0)
            continue;
        ssize_t n = read(b->p->stdout_fd, b->buf + b->used,
                         sizeof(b->buf) - b->used);
        if (n < 0 && errno != EINTR && errno != EAGAIN)
            return h_fail("reading mock-broker: %s", strerror(errno));
        if (n == 0) {
            int st = 0;
            const char *how = h_process_wait(b->p, 2000, &st) == 0
                                  ? h_status_str(st)
                                  : "closed its stdout";
            return h_fail("mock-broker ended (%s); its stderr: %s", how,
                          broker_stderr_tail(b, 2000));
        }
        if (n > 0)
            b->used += (size_t)n;
    }
}

int h_broker_start(const char *bloomstage_path, int brokers,
                   const char **topic_specs, h_broker **out)
{
    *out = NULL;
    if (!bloomstage_path)
        return h_fail("h_broker_start: no bloomstage binary (BLOOMSTAGE_BIN "
                      "unset?)");
    /* A write to a broker that died must be an error, not our death. */
    signal(SIGPIPE, SIG_IGN);

    size_t nt = 0;
    while (topic_specs && topic_specs[nt])
        nt++;
    char **argv = h_xmalloc((6 + 2 * nt + 1) * sizeof(*argv));
    char nbuf[16];
    snprintf(nbuf, sizeof(nbuf), "%d", brokers);
    size_t k = 0;
    argv[k++] = (char *)bloomstage_path;
    argv[k++] = "mock-broker";
    argv[k++] = "--control";
    argv[k++] = "-b";
    argv[k++] = nbuf;
    for (size_t i = 0; i < nt; i++) {
        argv[k++] = "-t";
        argv[k++] = (char *)topic_specs[i];
    }
    argv[k] = NULL;

    h_broker *b = h_xmalloc(sizeof(*b));
    memset(b, 0, sizeof(*b));
    int rc = spawn(argv, NULL, true, &b->p);
    free(argv);
    if (rc) {
        free(b);
        return -1;
    }
    char line[sizeof(b->buf)];
    if (broker_read_line(b, H_BROKER_TIMEOUT_MS, line, sizeof(line))) {
        h_process_free(b->p);
        free(b);
        return -1;
    }
    if (!strchr(line, ':')) {
        h_fail("mock-broker printed '%s', not a bootstrap list; stderr: %s",
               line, broker_stderr_tail(b, 2000));
        h_process_free(b->p);
        free(b);
        return -1;
    }
    b->bootstraps = h_xstrdup(line);
    *out = b;
    return 0;
}

const char *h_broker_bootstraps(const h_broker *b)
{
    return b->bootstraps;
}

const char *h_broker_stderr(h_broker *b)
{
    return h_process_stderr(b->p);
}

int h_broker_control(h_broker *b, const char *command)
{
    if (strchr(command, '\n'))
        return h_fail("control command '%s' has a newline", command);
    char *line = h_strdupf("%s\n", command);
    int w = write_all(b->p->stdin_fd, line, strlen(line));
    int e = errno;
    free(line);
    if (w)
        return h_fail("cannot send '%s' to mock-broker: %s; its stderr: %s",
                      command, strerror(e), broker_stderr_tail(b, 2000));
    char answer[1024];
    if (broker_read_line(b, H_BROKER_TIMEOUT_MS, answer, sizeof(answer)))
        return -1;
    if (strcmp(answer, "ok"))
        return h_fail("mock-broker '%s': %s", command, answer);
    return 0;
}

int h_broker_stop(h_broker *b)
{
    if (!b)
        return 0;
    int rc = 0, st = 0;
    h_process_kill(b->p, SIGTERM);
    int w = h_process_wait(b->p, H_BROKER_TIMEOUT_MS, &st);
    if (w == 1) {
        h_process_kill(b->p, SIGKILL);
        rc = h_fail("mock-broker ignored SIGTERM for %d ms (killed); its "
                    "stderr: %s", H_BROKER_TIMEOUT_MS,
                    broker_stderr_tail(b, 2000));
    } else if (w < 0) {
        rc = -1;
    } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        rc = h_fail("mock-broker: %s on SIGTERM; its stderr: %s",
                    h_status_str(st), broker_stderr_tail(b, 2000));
    }
    h_process_free(b->p);
    free(b->bootstraps);
    free(b);
    return rc;
}

/* ---- Kafka ---------------------------------------------------------- */

static void conf_set(rd_kafka_conf_t *conf, const char *key, const char *val)
{
    char errstr[256];
    if (rd_kafka_conf_set(conf, key, val, errstr, sizeof(errstr)) !=
        RD_KAFKA_CONF_OK) {
        /* the harness's own settings: a bug here, not in the test */
        fprintf(stderr, "harness: %s=%s: %s\n", key, val, errstr);
        abort();
    }
}

rd_kafka_conf_t *h_kafka_conf(const char *bootstraps)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    conf_set(conf, "bootstrap.servers", bootstraps);
    conf_set(conf, "client.id", "bloomstage-test");
    conf_set(conf, "log_level", "6");
    conf_set(conf, "socket.timeout.ms", "5000");
    conf_set(conf, "socket.connection.setup.timeout.ms", "5000");
    conf_set(conf, "reconnect.backoff.ms", "50");
    conf_set(conf, "reconnect.backoff.max.ms", "500");
    conf_set(conf, "topic.metadata.refresh.interval.ms", "5000");
    conf_set(conf, "topic.metadata.refresh.fast.interval.ms", "50");
    rd_kafka_conf_set_log_cb(conf, kafka_log_cb);
    return conf;
}

/* A random-enough group id, never reused by this process. */
static char *random_group(void)
{
    static unsigned counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return h_strdupf("bloomstage-test-%d-%u-%ld", (int)getpid(), ++counter,
                     ts.tv_nsec);
}

/* A consumer that never subscribes: it joins no group, commits nothing on
 * its own and reads only what it is assigned. */
static rd_kafka_t *new_consumer(const char *bootstraps, const char *group)
{
    rd_kafka_conf_t *conf = h_kafka_conf(bootstraps);
    conf_set(conf, "group.id", group);
    conf_set(conf, "enable.auto.commit", "false");
    conf_set(conf, "enable.auto.offset.store", "false");
    conf_set(conf, "allow.auto.create.topics", "false");
    conf_set(conf, "auto.offset.reset", "earliest");
    conf_set(conf, "enable.partition.eof", "true");
    conf_set(conf, "fetch.wait.max.ms", "100");
    char errstr[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr,
                                  sizeof(errstr));
    if (!rk) {
        rd_kafka_conf_destroy(conf);
        h_fail("rd_kafka_new(consumer): %s", errstr);
    }
    return rk;
}

static void close_consumer(rd_kafka_t *rk)
{
    if (!rk)
        return;
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
}

h_record h_rec(const char *key, const char *value)
{
    return (h_record){.key = key,
                      .key_len = key ? strlen(key) : 0,
                      .value = value,
                      .value_len = value ? strlen(value) : 0,
                      .partition = RD_KAFKA_PARTITION_UA,
                      .offset = -1,
                      .timestamp = -1};
}

void h_record_list_free(h_record_list *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++)
        free(l->recs[i].owned);
    free(l->recs);
    *l = (h_record_list){0};
}

size_t h_record_list_count_partition(const h_record_list *l, int32_t p)
{
    size_t c = 0;
    for (size_t i = 0; i < l->n; i++)
        c += l->recs[i].partition == p;
    return c;
}

/* ---- producing ------------------------------------------------------ */

typedef struct produce_state {
    size_t delivered;
    size_t failed;
    char first_error[512];
} produce_state;

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    produce_state *st = opaque;
    if (!m->err) {
        st->delivered++;
        return;
    }
    if (st->failed++ == 0)
        snprintf(st->first_error, sizeof(st->first_error),
                 "record %zu (partition %" PRId32 "): %s: %s",
                 (size_t)(uintptr_t)m->_private, m->partition,
                 rd_kafka_err2name(m->err), rd_kafka_err2str(m->err));
}

int h_produce(const char *bootstraps, const char *topic, int32_t partition,
              const h_record *recs, size_t n)
{
    return h_produce_conf(bootstraps, topic, partition, recs, n, NULL);
}

int h_produce_conf(const char *bootstraps, const char *topic,
                   int32_t partition, const h_record *recs, size_t n,
                   const char *const *conf_kv)
{
    produce_state st = {0};
    char errstr[512];
    rd_kafka_conf_t *conf = h_kafka_conf(bootstraps);
    conf_set(conf, "message.timeout.ms", H_MESSAGE_TIMEOUT_MS);
    conf_set(conf, "max.in.flight.requests.per.connection", "1");
    conf_set(conf, "retry.backoff.ms", "50");
    conf_set(conf, "linger.ms", "5");
    for (size_t i = 0; conf_kv && conf_kv[i]; i++) {
        const char *eq = strchr(conf_kv[i], '=');
        if (!eq) {
            rd_kafka_conf_destroy(conf);
            return h_fail("producer setting '%s' is not key=value",
                          conf_kv[i]);
        }
        char *key = h_strdupf("%.*s", (int)(eq - conf_kv[i]), conf_kv[i]);
        rd_kafka_conf_res_t r =
            rd_kafka_conf_set(conf, key, eq + 1, errstr, sizeof(errstr));
        free(key);
        if (r != RD_KAFKA_CONF_OK) {
            rd_kafka_conf_destroy(conf);
            return h_fail("producer setting '%s': %s", conf_kv[i], errstr);
        }
    }
    char timeout_buf[32];
    size_t tsz = sizeof(timeout_buf);
    int message_timeout = 10000;
    if (rd_kafka_conf_get(conf, "message.timeout.ms", timeout_buf, &tsz) ==
        RD_KAFKA_CONF_OK)
        message_timeout = atoi(timeout_buf);
    rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
    rd_kafka_conf_set_opaque(conf, &st);

    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr,
                                  sizeof(errstr));
    if (!rk) {
        rd_kafka_conf_destroy(conf);
        return h_fail("rd_kafka_new(producer): %s", errstr);
    }

    int rc = 0;
    int64_t deadline = h_now_ms() + message_timeout + 5000;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const h_record *r = &recs[i];
        int32_t part = partition == H_PARTITION_PER_RECORD ? r->partition
                                                           : partition;
        for (;;) {
            rd_kafka_headers_t *hdrs = NULL;
            if (r->n_headers) {
                hdrs = rd_kafka_headers_new(r->n_headers);
                for (size_t h = 0; h < r->n_headers; h++)
                    rd_kafka_header_add(hdrs, r->headers[h].name, -1,
                                        r->headers[h].value,
                                        (ssize_t)r->headers[h].value_len);
            }
            rd_kafka_resp_err_t err = rd_kafka_producev(
                rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(part),
                RD_KAFKA_V_KEY(r->key, r->key ? r->key_len : 0),
                RD_KAFKA_V_VALUE((void *)r->value,
                                 r->value ? r->value_len : 0),
                RD_KAFKA_V_HEADERS(hdrs),
                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                RD_KAFKA_V_OPAQUE((void *)(uintptr_t)i), RD_KAFKA_V_END);
            if (!err)
                break; /* the headers are librdkafka's now */
            if (hdrs)
                rd_kafka_headers_destroy(hdrs);
            if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL &&
                h_now_ms() < deadline) {
                rd_kafka_poll(rk, 50);
                continue;
            }
            rc = h_fail("produce record %zu to %s [%" PRId32 "]: %s", i,
                        topic, part, rd_kafka_err2str(err));
            break;
        }
        rd_kafka_poll(rk, 0);
    }

    /* Every record gets its report within message.timeout.ms. */
    rd_kafka_flush(rk, message_timeout + 5000);
    int left = rd_kafka_outq_len(rk);
    char fatal[256];
    rd_kafka_resp_err_t ferr = rd_kafka_fatal_error(rk, fatal, sizeof(fatal));
    rd_kafka_destroy(rk);

    if (rc)
        return rc;
    if (ferr)
        return h_fail("producer fatal error: %s: %s", rd_kafka_err2name(ferr),
                      fatal);
    if (st.failed)
        return h_fail("%zu of %zu records not delivered to %s; first: %s",
                      st.failed, n, topic, st.first_error);
    if (left > 0 || st.delivered != n)
        return h_fail("%zu of %zu records delivered to %s, %d still queued "
                      "after flush", st.delivered, n, topic, left);
    return 0;
}

/* ---- reading -------------------------------------------------------- */

static int topic_partition_count(rd_kafka_t *rk, const char *topic, int *cnt)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t err =
        rd_kafka_metadata(rk, 1, NULL, &md, H_REQUEST_TIMEOUT_MS);
    if (err)
        return h_fail("metadata: %s", rd_kafka_err2str(err));
    int rc = h_fail("topic '%s' does not exist", topic);
    for (int i = 0; i < md->topic_cnt; i++) {
        if (strcmp(md->topics[i].topic, topic))
            continue;
        if (md->topics[i].err) {
            rc = h_fail("topic '%s': %s", topic,
                        rd_kafka_err2name(md->topics[i].err));
        } else {
            *cnt = md->topics[i].partition_cnt;
            rc = 0;
        }
        break;
    }
    rd_kafka_metadata_destroy(md);
    return rc;
}

int h_topic_partitions(const char *bootstraps, const char *topic,
                       int *partitions)
{
    rd_kafka_t *rk = new_consumer(bootstraps, "bloomstage-test-metadata");
    if (!rk)
        return -1;
    int rc = topic_partition_count(rk, topic, partitions);
    close_consumer(rk);
    return rc;
}

int h_watermarks(const char *bootstraps, const char *topic, int32_t partition,
                 int64_t *low, int64_t *high)
{
    rd_kafka_t *rk = new_consumer(bootstraps, "bloomstage-test-metadata");
    if (!rk)
        return -1;
    rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(
        rk, topic, partition, low, high, H_REQUEST_TIMEOUT_MS);
    close_consumer(rk);
    if (err)
        return h_fail("watermarks of %s [%" PRId32 "]: %s", topic, partition,
                      rd_kafka_err2name(err));
    return 0;
}

/* Appends a copy of m to l: one allocation holds the header array and all
 * bytes (key and value NUL-terminated). */
static void list_append(h_record_list *l, const rd_kafka_message_t *m)
{
    rd_kafka_headers_t *hdrs = NULL;
    size_t nh = 0;
    if (rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR)
        nh = rd_kafka_header_cnt(hdrs);

    size_t size = nh * sizeof(h_header) + m->key_len + 1 + m->len + 1;
    for (size_t i = 0; i < nh; i++) {
        const char *name;
        const void *val;
        size_t vlen;
        rd_kafka_header_get_all(hdrs, i, &name, &val, &vlen);
        size += strlen(name) + 1 + (val ? vlen + 1 : 0);
    }
    char *block = h_xmalloc(size);
    h_header *hv = (h_header *)(void *)block;
    char *bytes = block + nh * sizeof(h_header);

    h_record r = {.partition = m->partition,
                  .offset = m->offset,
                  .owned = block,
                  .headers = nh ? hv : NULL,
                  .n_headers = nh};
    rd_kafka_timestamp_type_t tstype;
    r.timestamp = rd_kafka_message_timestamp(m, &tstype);
    if (m->key) {
        memcpy(bytes, m->key, m->key_len);
        r.key = bytes;
        r.key_len = m->key_len;
    }
    bytes[m->key_len] = '\0';
    bytes += m->key_len + 1;
    if (m->payload) {
        memcpy(bytes, m->payload, m->len);
        r.value = bytes;
        r.value_len = m->len;
    }
    bytes[m->len] = '\0';
    bytes += m->len + 1;
    for (size_t i = 0; i < nh; i++) {
        const char *name;
        const void *val;
        size_t vlen;
        rd_kafka_header_get_all(hdrs, i, &name, &val, &vlen);
        size_t nlen = strlen(name) + 1;
        memcpy(bytes, name, nlen);
        hv[i].name = bytes;
        bytes += nlen;
        if (val) {
            memcpy(bytes, val, vlen);
            bytes[vlen] = '\0';
            hv[i].value = bytes;
            hv[i].value_len = vlen;
            bytes += vlen + 1;
        } else {
            hv[i].value = NULL;
            hv[i].value_len = 0;
        }
    }

    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        h_record *nr = realloc(l->recs, cap * sizeof(*nr));
        if (!nr) {
            fprintf(stderr, "harness: out of memory\n");
            abort();
        }
        l->recs = nr;
        l->cap = cap;
    }
    l->recs[l->n++] = r;
}

static int by_partition_offset(const void *a, const void *b)
{
    const h_record *x = a, *y = b;
    if (x->partition != y->partition)
        return x->partition < y->partition ? -1 : 1;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

int h_consume_all(const char *bootstraps, const char *topic, int timeout_ms,
                  h_record_list *out)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    char *group = random_group();
    rd_kafka_t *rk = new_consumer(bootstraps, group);
    free(group);
    if (!rk)
        return -1;

    int rc = -1, nparts = 0;
    int64_t *high = NULL, *next = NULL;
    rd_kafka_topic_partition_list_t *assign = NULL;
    size_t first_new = out->n;
    char last_error[512] = "";

    if (topic_partition_count(rk, topic, &nparts))
        goto done;
    high = h_xmalloc((size_t)nparts * sizeof(*high));
    next = h_xmalloc((size_t)nparts * sizeof(*next));
    assign = rd_kafka_topic_partition_list_new(nparts);
    int pending = 0;
    for (int p = 0; p < nparts; p++) {
        int64_t lo;
        rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(
            rk, topic, p, &lo, &high[p], H_REQUEST_TIMEOUT_MS);
        if (err) {
            h_fail("watermarks of %s [%d]: %s", topic, p,
                   rd_kafka_err2name(err));
            goto done;
        }
        next[p] = lo;
        if (high[p] > lo) {
            rd_kafka_topic_partition_list_add(assign, topic, p)->offset =
                RD_KAFKA_OFFSET_BEGINNING;
            pending++;
        }
    }
    if (pending == 0) {
        rc = 0;
        goto done;
    }
    rd_kafka_resp_err_t aerr = rd_kafka_assign(rk, assign);
    if (aerr) {
        h_fail("assign %s: %s", topic, rd_kafka_err2str(aerr));
        goto done;
    }

    while (pending > 0) {
        if (h_now_ms() >= deadline) {
            int done_parts = 0;
            for (int p = 0; p < nparts; p++)
                done_parts += next[p] >= high[p];
            h_fail("consuming %s: end not reached within %d ms (%d of %d "
                   "partitions done, %zu records read%s%s)", topic,
                   timeout_ms, done_parts, nparts, out->n - first_new,
                   last_error[0] ? "; last error: " : "", last_error);
            goto done;
        }
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (!m)
            continue;
        int32_t p = m->partition;
        bool known = m->rkt && p >= 0 && p < nparts &&
                     !strcmp(rd_kafka_topic_name(m->rkt), topic);
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            /* offset = the end the fetcher saw: covers control records,
             * which take offsets but are never delivered */
            if (known && next[p] < high[p] && m->offset >= high[p]) {
                next[p] = m->offset;
                pending--;
            }
        } else if (m->err) {
            snprintf(last_error, sizeof(last_error), "%s: %s",
                     rd_kafka_err2name(m->err), rd_kafka_message_errstr(m));
            if (m->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
                m->err == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED ||
                m->err == RD_KAFKA_RESP_ERR__FATAL) {
                h_fail("consuming %s: %s", topic, last_error);
                rd_kafka_message_destroy(m);
                goto done;
            }
        } else if (known && m->offset < high[p]) {
            list_append(out, m);
            bool was_pending = next[p] < high[p];
            next[p] = m->offset + 1;
            if (was_pending && next[p] >= high[p])
                pending--;
        }
        rd_kafka_message_destroy(m);
    }
    rc = 0;

done:
    if (out->n > first_new)
        qsort(out->recs + first_new, out->n - first_new, sizeof(h_record),
              by_partition_offset);
    if (assign)
        rd_kafka_topic_partition_list_destroy(assign);
    free(high);
    free(next);
    close_consumer(rk);
    return rc;
}

/* ---- offsets -------------------------------------------------------- */

int h_committed(const char *bootstraps, const char *group_id,
                const char *topic, int partitions, int64_t *offsets)
{
    rd_kafka_t *rk = new_consumer(bootstraps, group_id);
    if (!rk)
        return -1;
    rd_kafka_topic_partition_list_t *l =
        rd_kafka_topic_partition_list_new(partitions);
    for (int p = 0; p < partitions; p++)
        rd_kafka_topic_partition_list_add(l, topic, p);
    int rc = 0;
    rd_kafka_resp_err_t err = rd_kafka_committed(rk, l, H_REQUEST_TIMEOUT_MS);
    if (err) {
        rc = h_fail("committed offsets of group %s on %s: %s", group_id, topic,
                    rd_kafka_err2str(err));
    } else {
        for (int i = 0; i < l->cnt; i++) {
            if (l->elems[i].err) {
                rc = h_fail("committed offset of group %s on %s [%" PRId32
                            "]: %s", group_id, topic, l->elems[i].partition,
                            rd_kafka_err2name(l->elems[i].err));
                break;
            }
            offsets[l->elems[i].partition] = l->elems[i].offset;
        }
    }
    rd_kafka_topic_partition_list_destroy(l);
    close_consumer(rk);
    return rc;
}

typedef struct commit_result {
    bool called;
    rd_kafka_resp_err_t err;
    char first_error[256];
} commit_result;

static void commit_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                      rd_kafka_topic_partition_list_t *offsets, void *opaque)
{
    (void)rk;
    commit_result *cr = opaque;
    cr->called = true;
    cr->err = err;
    for (int i = 0; offsets && i < offsets->cnt; i++)
        if (offsets->elems[i].err && !cr->first_error[0])
            snprintf(cr->first_error, sizeof(cr->first_error),
                     "partition %" PRId32 ": %s", offsets->elems[i].partition,
                     rd_kafka_err2name(offsets->elems[i].err));
}

int h_commit(const char *bootstraps, const char *group_id, const char *topic,
             int partitions, const int64_t *offsets)
{
    rd_kafka_t *rk = new_consumer(bootstraps, group_id);
    if (!rk)
        return -1;
    rd_kafka_topic_partition_list_t *l =
        rd_kafka_topic_partition_list_new(partitions);
    for (int p = 0; p < partitions; p++)
        if (offsets[p] >= 0)
            rd_kafka_topic_partition_list_add(l, topic, p)->offset =
                offsets[p];
    /* NULL queue: synchronous, and the callback sees each partition's
     * result (rd_kafka_commit() would only return the request's error). */
    commit_result cr = {0};
    rd_kafka_resp_err_t err = rd_kafka_commit_queue(rk, l, NULL, commit_cb,
                                                    &cr);
    int rc = 0;
    if (err || cr.err || cr.first_error[0])
        rc = h_fail("commit of group %s on %s: %s%s%s", group_id, topic,
                    rd_kafka_err2name(err ? err : cr.err),
                    cr.first_error[0] ? "; " : "", cr.first_error);
    else if (!cr.called)
        rc = h_fail("commit of group %s on %s: no result", group_id, topic);
    rd_kafka_topic_partition_list_destroy(l);
    close_consumer(rk);
    return rc;
}
