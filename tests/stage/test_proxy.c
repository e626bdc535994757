/*
 * test_proxy.c -- the nemesis's TCP proxy (harness/proxy.h) against
 * an echo server on loopback: bytes pass both ways in order; a delay holds
 * them at least that long; a blackhole drops them but keeps the connection
 * and later ones open; a reset resets every connection and refuses new
 * ones, even with a child process started since (the nemesis starts stage
 * processes while its proxies run); a trip wire blackholes the link at the
 * client bytes that hold it; each heals back to pass.  The delay's check is a lower bound only,
 * which load cannot break.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#include "core.h"
#include "proxy.h"

/* How long a test waits for bytes that must come, and for bytes that must
 * not (a blackhole's silence). */
#define WAIT_MS 10000
#define SILENCE_MS 500

/* An echo server on a free loopback port: one thread, each connection
 * echoed until it ends. */
typedef struct echo {
    int fd, port;
    pthread_t thread;
    atomic_bool stop;
} echo;

static void *echo_loop(void *arg)
{
    echo *e = arg;
    struct pollfd fds[64];
    int n = 1;
    fds[0] = (struct pollfd){.fd = e->fd, .events = POLLIN};
    while (!atomic_load(&e->stop)) {
        if (poll(fds, (nfds_t)n, 50) <= 0)
            continue;
        if ((fds[0].revents & POLLIN) && n < 64) {
            int c = accept(e->fd, NULL, NULL);
            if (c >= 0)
                fds[n++] = (struct pollfd){.fd = c, .events = POLLIN};
        }
        for (int i = n - 1; i >= 1; i--) {
            if (!fds[i].revents)
                continue;
            char b[4096];
            ssize_t r = read(fds[i].fd, b, sizeof(b));
            if (r <= 0 || send(fds[i].fd, b, (size_t)r, MSG_NOSIGNAL) != r) {
                close(fds[i].fd);
                fds[i] = fds[--n];
            }
        }
    }
    for (int i = 1; i < n; i++)
        close(fds[i].fd);
    return NULL;
}

static int listen_any(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 16), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

typedef struct fixture {
    echo e;
    h_proxy *p;
} fixture;

static int setup(void **state)
{
    fixture *f = h_xcalloc(1, sizeof(*f));
    f->e.fd = listen_any(&f->e.port);
    assert_int_equal(pthread_create(&f->e.thread, NULL, echo_loop, &f->e), 0);
    f->p = h_proxy_new(0, f->e.port);
    assert_non_null(f->p);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    h_proxy_free(f->p);
    atomic_store(&f->e.stop, true);
    pthread_join(f->e.thread, NULL);
    close(f->e.fd);
    free(f);
    return 0;
}

static int dial(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    return fd;
}

/* Reads exactly n bytes within ms: their count read (less on a timeout),
 * or -1 when the connection ended or was reset first. */
static ssize_t read_within(int fd, char *buf, size_t n, int ms)
{
    size_t got = 0;
    int64_t end = h_now_ms() + ms;
    while (got < n) {
        int64_t left = end - h_now_ms();
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&pfd, 1, (int)left) == 0)
            break;
        ssize_t r = read(fd, buf + got, n - got);
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

/* Sends msg and expects it back, whole and in order, within WAIT_MS. */
static void round_trip(int fd, const char *msg)
{
    size_t n = strlen(msg);
    char back[256];
    assert_true(n < sizeof(back));
    assert_int_equal(send(fd, msg, n, MSG_NOSIGNAL), (ssize_t)n);
    assert_int_equal(read_within(fd, back, n, WAIT_MS), (ssize_t)n);
    assert_memory_equal(back, msg, n);
}

static void test_pass(void **state)
{
    fixture *f = *state;
    int fd = dial(h_proxy_port(f->p));
    round_trip(fd, "hello");
    /* 1 MiB in order, past one read and the socket buffers. */
    enum { BIG = 1 << 20 };
    char *out = h_xmalloc(BIG), *in = h_xmalloc(BIG);
    for (size_t i = 0; i < BIG; i++)
        out[i] = (char)(i * 131 + (i >> 9));
    size_t sent = 0, got = 0;
    int64_t end = h_now_ms() + WAIT_MS;
    while (got < BIG && h_now_ms() < end) {
        struct pollfd pfd = {.fd = fd,
                             .events = POLLIN | (sent < BIG ? POLLOUT : 0)};
        poll(&pfd, 1, 100);
        if ((pfd.revents & POLLOUT) && sent < BIG) {
            ssize_t w = send(fd, out + sent, BIG - sent,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w > 0)
                sent += (size_t)w;
        }
        if (pfd.revents & POLLIN) {
            ssize_t r = read(fd, in + got, BIG - got);
            assert_true(r > 0);
            got += (size_t)r;
        }
    }
    assert_int_equal(got, BIG);
    assert_memory_equal(in, out, BIG);
    free(out);
    free(in);
    /* The proxy counts a chunk just after sending it, so the count may
     * trail what the client has read by a moment. */
    h_proxy_stats st = h_proxy_stats_get(f->p);
    for (int64_t until = h_now_ms() + WAIT_MS;
         st.forwarded < 2u * BIG && h_now_ms() < until;
         st = h_proxy_stats_get(f->p))
        h_sleep_ms(10);
    assert_int_equal(st.accepted, 1);
    assert_true(st.forwarded >= 2u * BIG);
    assert_int_equal(st.dropped, 0);
    close(fd);
}

static void test_delay(void **state)
{
    fixture *f = *state;
    int fd = dial(h_proxy_port(f->p));
    round_trip(fd, "before");
    h_proxy_set(f->p, H_LINK_DELAY, 300);
    int64_t t0 = h_now_ms();
    round_trip(fd, "slow");
    /* Out and back: each way held at least 300 ms. */
    assert_true(h_now_ms() - t0 >= 600);
    h_proxy_set(f->p, H_LINK_PASS, 0);
    round_trip(fd, "healed");
    close(fd);
}

static void test_blackhole(void **state)
{
    fixture *f = *state;
    int fd = dial(h_proxy_port(f->p));
    round_trip(fd, "before");
    h_proxy_set(f->p, H_LINK_BLACKHOLE, 0);
    char b[16];
    assert_int_equal(send(fd, "lost", 4, MSG_NOSIGNAL), 4);
    /* Nothing comes back, and the connection stays open. */
    assert_int_equal(read_within(fd, b, 4, SILENCE_MS), 0);
    /* A new connection is taken, and fed nothing either. */
    int fd2 = dial(h_proxy_port(f->p));
    assert_int_equal(send(fd2, "also", 4, MSG_NOSIGNAL), 4);
    assert_int_equal(read_within(fd2, b, 4, SILENCE_MS), 0);
    /* Both were taken and dropped before the heal (else a late read would
     * forward them after it). */
    int64_t until = h_now_ms() + WAIT_MS;
    while (h_proxy_stats_get(f->p).dropped < 8 && h_now_ms() < until)
        h_sleep_ms(10);
    assert_true(h_proxy_stats_get(f->p).dropped >= 8);
    h_proxy_set(f->p, H_LINK_PASS, 0);
    /* Healed: what is sent now passes; what the blackhole took is gone. */
    round_trip(fd, "after");
    round_trip(fd2, "after2");
    close(fd);
    close(fd2);
}

/* The wire trips on the client's bytes that hold it: they and what
 * follows are dropped, until a heal; other bytes before it pass. */
static void test_trip_wire(void **state)
{
    fixture *f = *state;
    int fd = dial(h_proxy_port(f->p));
    h_proxy_cut_on(f->p, "WIRE");
    round_trip(fd, "plain");
    assert_int_equal(h_proxy_stats_get(f->p).trips, 0);
    char b[16];
    assert_int_equal(send(fd, "a WIRE", 6, MSG_NOSIGNAL), 6);
    assert_int_equal(read_within(fd, b, 6, SILENCE_MS), 0);
    assert_int_equal(h_proxy_stats_get(f->p).trips, 1);
    assert_int_equal(send(fd, "after", 5, MSG_NOSIGNAL), 5);
    assert_int_equal(read_within(fd, b, 5, SILENCE_MS), 0);
    h_proxy_set(f->p, H_LINK_PASS, 0);
    /* Disarmed once tripped. */
    round_trip(fd, "WIRE again");
    assert_int_equal(h_proxy_stats_get(f->p).trips, 1);
    close(fd);
}

static void test_reset(void **state)
{
    fixture *f = *state;
    int fd = dial(h_proxy_port(f->p));
    round_trip(fd, "before");
    h_proxy_set(f->p, H_LINK_RESET, 0);
    char b[16];
    /* The open connection is reset... */
    assert_int_equal(read_within(fd, b, 1, WAIT_MS), -1);
    close(fd);
    /* ...and a new one too, at once. */
    fd = dial(h_proxy_port(f->p));
    assert_int_equal(read_within(fd, b, 1, WAIT_MS), -1);
    close(fd);
    h_proxy_set(f->p, H_LINK_PASS, 0);
    fd = dial(h_proxy_port(f->p));
    round_trip(fd, "healed");
    assert_true(h_proxy_stats_get(f->p).reset >= 2);
    close(fd);
}

/* A program started after the proxy took a connection inherits none of
 * its sockets: else closing the proxy's copy would not end the connection,
 * and a reset would leave it open and silent (a blackhole). */
static void test_reset_after_spawn(void **state)
{
    fixture *f = *state;
    int fd = dial(h_proxy_port(f->p));
    round_trip(fd, "before");
    char *const argv[] = {"sleep", "30", NULL};
    pid_t child;
    assert_int_equal(posix_spawnp(&child, "sleep", NULL, NULL, argv, environ),
                     0);
    h_proxy_set(f->p, H_LINK_RESET, 0);
    char b[16];
    ssize_t got = read_within(fd, b, 1, WAIT_MS);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    close(fd);
    assert_int_equal(got, -1);
}

static void test_target_down(void **state)
{
    fixture *f = *state;
    /* A proxy whose target nothing listens on: the client is reset, as a
     * refused connection would be. */
    int port;
    int lfd = listen_any(&port);
    close(lfd);
    h_proxy *p = h_proxy_new(0, port);
    assert_non_null(p);
    int fd = dial(h_proxy_port(p));
    char b[4];
    assert_int_equal(read_within(fd, b, 1, WAIT_MS), -1);
    close(fd);
    h_proxy_free(p);
    (void)f;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pass, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delay, setup, teardown),
        cmocka_unit_test_setup_teardown(test_blackhole, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trip_wire, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reset, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reset_after_spawn, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_target_down, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
