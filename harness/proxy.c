/*
 * proxy.c -- the nemesis's TCP proxy (proxy.h): one poll() loop on a
 * thread of its own over the listening socket, a wake-up pipe and each
 * connection's two sockets.  Each direction of a connection keeps a queue
 * of chunks stamped with the time they may leave (now in pass mode, now +
 * delay in delay mode), bounded by H_PROXY_QUEUE_MAX bytes: past it the
 * proxy stops reading that side, so a slow link pushes back as TCP would.
 */
#include "proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Connections at once: a stage's clients open one or two per broker. */
#define H_PROXY_CONNS 128
/* Bytes queued in one direction of one connection before reading stops. */
#define H_PROXY_QUEUE_MAX (8u << 20)
/* One read. */
#define H_PROXY_READ 65536

typedef struct chunk {
    struct chunk *next;
    int64_t due_ms;
    size_t len, off;
    char data[];
} chunk;

/* One direction: bytes read from `from`, queued, written to `to`. */
typedef struct flow {
    int from, to;
    chunk *head, *tail;
    size_t queued;
    bool eof; /* `from` ended: shut `to` down once the queue is empty */
} flow;

typedef struct conn {
    int client, server;
    flow up, down; /* client -> server, server -> client */
} conn;

struct h_proxy {
    int listen_fd, port, target;
    int wake[2];
    pthread_t thread;
    atomic_bool stop;
    atomic_int mode, delay_ms;
    h_link applied; /* the mode the loop last acted on */
    char wire[128];     /* h_proxy_cut_on's bytes, */
    atomic_bool armed;  /* set after them */
    atomic_uint_fast64_t trips;
    conn conns[H_PROXY_CONNS];
    int nconns;
    atomic_uint_fast64_t accepted, forwarded, dropped, reset;
};

static void flow_clear(flow *f)
{
    while (f->head) {
        chunk *c = f->head;
        f->head = c->next;
        free(c);
    }
    f->tail = NULL;
    f->queued = 0;
}

/* Closes a socket so that the peer sees a reset, not an orderly end. */
static void close_reset(int fd)
{
    struct linger l = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    close(fd);
}

static void conn_close(h_proxy *p, int i, bool reset)
{
    conn *c = &p->conns[i];
    flow_clear(&c->up);
    flow_clear(&c->down);
    if (reset) {
        close_reset(c->client);
        close_reset(c->server);
        atomic_fetch_add(&p->reset, 1);
    } else {
        close(c->client);
        close(c->server);
    }
    p->conns[i] = p->conns[--p->nconns];
}

static int nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void take_connection(h_proxy *p, h_link mode)
{
    /* CLOEXEC, as every socket here: a process the caller starts later
     * must not hold a copy, or closing ours would not end the connection
     * (a reset would leave it open and silent). */
    int client = accept4(p->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (client < 0)
        return;
    atomic_fetch_add(&p->accepted, 1);
    if (mode == H_LINK_RESET || p->nconns == H_PROXY_CONNS) {
        close_reset(client);
        atomic_fetch_add(&p->reset, 1);
        return;
    }
    int server = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)p->target),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    /* Loopback: the connect is answered at once (refused if the target is
     * down, which the client then sees as a reset). */
    if (server < 0 || connect(server, (struct sockaddr *)&a, sizeof(a)) != 0) {
        if (server >= 0)
            close(server);
        close_reset(client);
        atomic_fetch_add(&p->reset, 1);
        return;
    }
    int one = 1;
    setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    nonblock(client);
    nonblock(server);
    conn *c = &p->conns[p->nconns++];
    memset(c, 0, sizeof(*c));
    c->client = client;
    c->server = server;
    c->up.from = c->down.to = client;
    c->up.to = c->down.from = server;
}

/* A client's bytes holding the armed wire: the link becomes a blackhole
 * before they pass, and the wire is disarmed. */
static bool tripped(h_proxy *p, const char *data, size_t n)
{
    if (!atomic_load(&p->armed) ||
        !memmem(data, n, p->wire, strlen(p->wire)))
        return false;
    atomic_store(&p->armed, false);
    atomic_store(&p->mode, (int)H_LINK_BLACKHOLE);
    atomic_fetch_add(&p->trips, 1);
    return true;
}

/* Reads what `from` has into the queue (or drops it in a blackhole; up:
 * the client's side, which the wire watches).  false when the connection
 * must close. */
static bool flow_read(h_proxy *p, flow *f, bool up, h_link mode,
                      int delay_ms)
{
    chunk *c = malloc(sizeof(chunk) + H_PROXY_READ);
    if (!c)
        return false;
    ssize_t n = read(f->from, c->data, H_PROXY_READ);
    if (n <= 0) {
        free(c);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return true;
        if (n < 0)
            return false;
        f->eof = true;
        return true;
    }
    if (up && tripped(p, c->data, (size_t)n))
        mode = H_LINK_BLACKHOLE; /* the loop drops what is queued next */
    if (mode == H_LINK_BLACKHOLE) {
        free(c);
        atomic_fetch_add(&p->dropped, (uint64_t)n);
        return true;
    }
    c->next = NULL;
    c->len = (size_t)n;
    c->off = 0;
    c->due_ms = h_now_ms() + (mode == H_LINK_DELAY ? delay_ms : 0);
    if (f->tail)
        f->tail->next = c;
    else
        f->head = c;
    f->tail = c;
    f->queued += (size_t)n;
    return true;
}

/* Writes the chunks that are due.  false when the connection must close. */
static bool flow_write(h_proxy *p, flow *f)
{
    int64_t now = h_now_ms();
    while (f->head && f->head->due_ms <= now) {
        chunk *c = f->head;
        /* send, not write: a peer gone must not raise SIGPIPE in the
         * test's process. */
        ssize_t n = send(f->to, c->data + c->off, c->len - c->off,
                         MSG_NOSIGNAL);
        if (n < 0)
            return errno == EAGAIN || errno == EINTR;
        c->off += (size_t)n;
        f->queued -= (size_t)n;
        atomic_fetch_add(&p->forwarded, (uint64_t)n);
        if (c->off < c->len)
            return true;
        f->head = c->next;
        if (!f->head)
            f->tail = NULL;
        free(c);
    }
    if (f->eof && !f->head)
        shutdown(f->to, SHUT_WR);
    return true;
}

/* Milliseconds until the first queued chunk of any flow is due (-1: none
 * queued, 0: one is due now). */
static int next_due(const h_proxy *p)
{
    int64_t first = -1, now = h_now_ms();
    for (int i = 0; i < p->nconns; i++) {
        const flow *fs[2] = {&p->conns[i].up, &p->conns[i].down};
        for (int k = 0; k < 2; k++)
            if (fs[k]->head && (first < 0 || fs[k]->head->due_ms < first))
                first = fs[k]->head->due_ms;
    }
    if (first < 0)
        return -1;
    return first <= now ? 0 : (int)(first - now);
}

/* What a change of mode does to what is there: a blackhole drops the
 * queues, a reset closes every connection. */
static void apply_mode(h_proxy *p, h_link mode)
{
    if (mode == p->applied)
        return;
    p->applied = mode;
    for (int i = p->nconns - 1; i >= 0; i--) {
        conn *c = &p->conns[i];
        if (mode == H_LINK_RESET) {
            conn_close(p, i, true);
        } else if (mode == H_LINK_BLACKHOLE) {
            atomic_fetch_add(&p->dropped, c->up.queued + c->down.queued);
            flow_clear(&c->up);
            flow_clear(&c->down);
        }
    }
}

static void *proxy_loop(void *arg)
{
    h_proxy *p = arg;
    struct pollfd fds[2 + 2 * H_PROXY_CONNS];
    while (!atomic_load(&p->stop)) {
        h_link mode = (h_link)atomic_load(&p->mode);
        int delay_ms = atomic_load(&p->delay_ms);
        apply_mode(p, mode);
        int n = 0;
        fds[n++] = (struct pollfd){.fd = p->wake[0], .events = POLLIN};
        fds[n++] = (struct pollfd){.fd = p->listen_fd, .events = POLLIN};
        int64_t now = h_now_ms();
        for (int i = 0; i < p->nconns; i++) {
            conn *c = &p->conns[i];
            flow *fs[2] = {&c->up, &c->down};
            for (int k = 0; k < 2; k++) {
                flow *f = fs[k];
                short ev = 0;
                if (!f->eof && f->queued < H_PROXY_QUEUE_MAX)
                    ev |= POLLIN;
                fds[n++] = (struct pollfd){.fd = f->from, .events = ev};
                /* The writable side is watched through the other flow's
                 * entry: POLLOUT is added there when a chunk is due. */
            }
            if (c->up.head && c->up.head->due_ms <= now)
                fds[n - 1].events |= POLLOUT; /* server: entry of down */
            if (c->down.head && c->down.head->due_ms <= now)
                fds[n - 2].events |= POLLOUT; /* client: entry of up */
            /* Nothing asked of a socket: poll skips it (an ended side
             * would otherwise report POLLHUP at every turn). */
            for (int k = n - 2; k < n; k++)
                if (fds[k].events == 0)
                    fds[k].fd = -1;
        }
        int timeout = next_due(p);
        if (timeout < 0 || timeout > 100)
            timeout = 100;
        if (poll(fds, (nfds_t)n, timeout) < 0 && errno != EINTR)
            break;
        if (fds[0].revents & POLLIN) {
            char b[64];
            while (read(p->wake[0], b, sizeof(b)) > 0)
                ;
            continue; /* the mode changed: apply it before anything else */
        }
        if (fds[1].revents & POLLIN)
            take_connection(p, mode);
        /* Connections, last first: closing one moves the last into its
         * slot, whose poll entries were already handled. */
        for (int i = p->nconns - 1; i >= 0; i--) {
            conn *c = &p->conns[i];
            short rc = fds[2 + 2 * i].revents, rs = fds[3 + 2 * i].revents;
            bool ok = true;
            if (rc & (POLLIN | POLLHUP | POLLERR))
                ok = flow_read(p, &c->up, true, mode, delay_ms);
            if (ok && (rs & (POLLIN | POLLHUP | POLLERR)))
                ok = flow_read(p, &c->down, false, mode, delay_ms);
            if (ok)
                ok = flow_write(p, &c->up) && flow_write(p, &c->down);
            if (ok && c->up.eof && c->down.eof && !c->up.head && !c->down.head)
                ok = false;
            if (!ok)
                conn_close(p, i, false);
        }
    }
    while (p->nconns > 0)
        conn_close(p, p->nconns - 1, false);
    return NULL;
}

h_proxy *h_proxy_new(int listen_port, int target_port)
{
    h_proxy *p = h_xcalloc(1, sizeof(*p));
    p->listen_fd = -1;
    p->wake[0] = p->wake[1] = -1;
    p->target = target_port;
    p->applied = H_LINK_PASS;
    atomic_init(&p->mode, H_LINK_PASS);
    p->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)listen_port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    if (p->listen_fd < 0 ||
        setsockopt(p->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one,
                   sizeof(one)) != 0 ||
        bind(p->listen_fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        listen(p->listen_fd, 64) != 0 ||
        getsockname(p->listen_fd, (struct sockaddr *)&a, &alen) != 0) {
        h_fail("proxy: listening on 127.0.0.1:%d: %s", listen_port,
               strerror(errno));
        goto err;
    }
    p->port = ntohs(a.sin_port);
    if (pipe2(p->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        h_fail("proxy: pipe: %s", strerror(errno));
        goto err;
    }
    nonblock(p->listen_fd);
    int e = pthread_create(&p->thread, NULL, proxy_loop, p);
    if (e != 0) {
        h_fail("proxy: thread: %s", strerror(e));
        goto err;
    }
    return p;
err:
    if (p->listen_fd >= 0)
        close(p->listen_fd);
    if (p->wake[0] >= 0) {
        close(p->wake[0]);
        close(p->wake[1]);
    }
    free(p);
    return NULL;
}

int h_proxy_port(const h_proxy *p)
{
    return p->port;
}

void h_proxy_set(h_proxy *p, h_link mode, int delay_ms)
{
    atomic_store(&p->delay_ms, delay_ms);
    atomic_store(&p->mode, (int)mode);
    (void)!write(p->wake[1], "m", 1);
}

void h_proxy_cut_on(h_proxy *p, const char *wire)
{
    atomic_store(&p->armed, false);
    snprintf(p->wire, sizeof(p->wire), "%s", wire);
    atomic_store(&p->armed, *p->wire != '\0');
}

h_proxy_stats h_proxy_stats_get(h_proxy *p)
{
    return (h_proxy_stats){.accepted = atomic_load(&p->accepted),
                           .forwarded = atomic_load(&p->forwarded),
                           .dropped = atomic_load(&p->dropped),
                           .reset = atomic_load(&p->reset),
                           .trips = atomic_load(&p->trips)};
}

void h_proxy_free(h_proxy *p)
{
    if (!p)
        return;
    atomic_store(&p->stop, true);
    (void)!write(p->wake[1], "s", 1);
    pthread_join(p->thread, NULL);
    close(p->listen_fd);
    close(p->wake[0]);
    close(p->wake[1]);
    free(p);
}
