/*
 * metrics_gate.c -- see metrics_gate.h: the endpoint's clients counted by
 * address, its connections watched for their deadline, and its password
 * checks done by workers with a cache of good credentials and a token
 * bucket of failures per client.
 */
#include "ops/metrics_gate.h"
#include "base/util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include <xxhash.h>

/* Clients by address: an open-addressed table, twice the connections. */
#define NCLIENTS (2 * BS_GATE_CONNECTIONS)
/* Good credentials remembered. */
#define NCACHE 64
/* How often the watchdog looks. */
#define WATCH_US 100000

typedef struct client {
    bool used;
    bool loopback;
    uint8_t addr[16]; /* IPv4 in the first 4 bytes */
    unsigned conns;   /* open connections */
    double tokens;    /* failed checks it may make now */
    double at;        /* when tokens was last refilled */
} client;

struct bs_gate_conn {
    int fd;
    double start; /* of the exchange under way */
    bool cut;     /* shut down by the watchdog */
    client *cl;
    bs_gate_conn *prev, *next;
};

struct bs_gate_check {
    char *user, *password;
    client *cl;
    bs_gate_verdict verdict;
    void (*wake)(void *arg);
    void *arg;
    XXH128_hash_t key; /* of user and password, for the cache */
    bs_gate_check *next;
};

typedef struct cached {
    XXH128_hash_t key;
    double at; /* 0: empty */
} cached;

struct bs_metrics_gate {
    const bs_metrics_guard *guard;
    pthread_mutex_t lock;
    pthread_cond_t work;
    bool stopping, started_watch;
    size_t nworkers;
    pthread_t watchdog, workers[BS_GATE_WORKERS];
    client clients[NCLIENTS];
    bs_gate_conn *conns;
    bs_gate_check *qhead, *qtail;
    size_t queued; /* waiting or being checked */
    uint64_t secret; /* keys the cache's hashes */
    cached cache[NCACHE];
    size_t cache_next;
};

/* The address of sa as 16 bytes; false for a family it does not know. */
static bool address(const struct sockaddr *sa, uint8_t out[16], bool *lo)
{
    memset(out, 0, 16);
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        memcpy(out, &in->sin_addr, 4);
        *lo = (ntohl(in->sin_addr.s_addr) >> 24) == 127;
        return true;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        memcpy(out, &in6->sin6_addr, 16);
        *lo = IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) ||
              (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && out[12] == 127);
        return true;
    }
    return false;
}

/* Refills c's tokens to now. */
static void refill(client *c, double now)
{
    c->tokens += (now - c->at) / BS_GATE_FAIL_REFILL_S;
    if (c->tokens > BS_GATE_FAIL_BURST)
        c->tokens = BS_GATE_FAIL_BURST;
    c->at = now;
}

/* The client of address a (found, or a new entry: a free one, else one
 * with no connection, whose failures are then forgotten); NULL when every
 * entry has connections.  Under the lock. */
static client *client_of(bs_metrics_gate *g, const uint8_t a[16], bool lo)
{
    uint64_t h = XXH3_64bits(a, 16);
    client *reuse = NULL;
    for (size_t i = 0; i < NCLIENTS; i++) {
        client *c = &g->clients[(h + i) % NCLIENTS];
        if (c->used && memcmp(c->addr, a, 16) == 0)
            return c;
        if (!c->used) {
            if (!reuse)
                reuse = c;
            break; /* a probe sequence ends at a free entry */
        }
        if (!reuse && c->conns == 0)
            reuse = c;
    }
    if (!reuse)
        return NULL;
    /* A reused entry may sit inside another address's probe sequence:
     * that address is then found as new, with full tokens; the table has
     * room for twice the connections, so this is rare. */
    memcpy(reuse->addr, a, 16);
    reuse->used = true;
    reuse->loopback = lo;
    reuse->conns = 0;
    reuse->tokens = BS_GATE_FAIL_BURST;
    reuse->at = bs_now();
    return reuse;
}

bool bs_metrics_gate_admit(bs_metrics_gate *g, const struct sockaddr *sa)
{
    uint8_t a[16];
    bool lo;
    if (!address(sa, a, &lo))
        return true; /* a Unix socket: the daemon's limit holds */
    pthread_mutex_lock(&g->lock);
    client *c = client_of(g, a, lo);
    bool ok = c && (lo || c->conns < BS_GATE_PER_CLIENT);
    pthread_mutex_unlock(&g->lock);
    return ok;
}

bs_gate_conn *bs_metrics_gate_opened(bs_metrics_gate *g, int fd,
                                     const struct sockaddr *sa)
{
    bs_gate_conn *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->fd = fd;
    c->start = bs_now();
    uint8_t a[16];
    bool lo;
    pthread_mutex_lock(&g->lock);
    c->cl = sa && address(sa, a, &lo) ? client_of(g, a, lo) : NULL;
    if (c->cl)
        c->cl->conns++;
    c->next = g->conns;
    if (g->conns)
        g->conns->prev = c;
    g->conns = c;
    pthread_mutex_unlock(&g->lock);
    return c;
}

void bs_metrics_gate_served(bs_metrics_gate *g, bs_gate_conn *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&g->lock);
    c->start = bs_now();
    pthread_mutex_unlock(&g->lock);
}

void bs_metrics_gate_closed(bs_metrics_gate *g, bs_gate_conn *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&g->lock);
    if (c->cl && c->cl->conns)
        c->cl->conns--;
    if (c->prev)
        c->prev->next = c->next;
    else
        g->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&g->lock);
    free(c);
}

/* Every BS_GATE_REQUEST_S-old exchange cut: its socket shut down, so
 * libmicrohttpd reads its end and closes the connection. */
static void *watch(void *arg)
{
    bs_metrics_gate *g = arg;
    pthread_mutex_lock(&g->lock);
    while (!g->stopping) {
        double now = bs_now();
        for (bs_gate_conn *c = g->conns; c; c = c->next)
            if (!c->cut && now - c->start > BS_GATE_REQUEST_S) {
                (void)shutdown(c->fd, SHUT_RDWR);
                c->cut = true;
            }
        pthread_mutex_unlock(&g->lock);
        usleep(WATCH_US);
        pthread_mutex_lock(&g->lock);
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

static bool cache_has(const bs_metrics_gate *g, XXH128_hash_t key,
                      double now)
{
    for (size_t i = 0; i < NCACHE; i++)
        if (g->cache[i].at > 0 && now - g->cache[i].at < BS_GATE_CACHE_S &&
            XXH128_isEqual(g->cache[i].key, key))
            return true;
    return false;
}

/* Takes checks off the queue until the gate stops and the queue is
 * empty. */
static void *work(void *arg)
{
    bs_metrics_gate *g = arg;
    pthread_mutex_lock(&g->lock);
    for (;;) {
        while (!g->qhead && !g->stopping)
            pthread_cond_wait(&g->work, &g->lock);
        bs_gate_check *k = g->qhead;
        if (!k)
            break; /* stopping, nothing left */
        g->qhead = k->next;
        if (!g->qhead)
            g->qtail = NULL;
        pthread_mutex_unlock(&g->lock);
        bool ok = bs_metrics_guard_allows(g->guard, k->user, k->password);
        explicit_bzero(k->password, strlen(k->password));
        pthread_mutex_lock(&g->lock);
        double now = bs_now();
        if (ok) {
            g->cache[g->cache_next] = (cached){k->key, now};
            g->cache_next = (g->cache_next + 1) % NCACHE;
        } else if (k->cl) {
            refill(k->cl, now);
            k->cl->tokens -= 1;
        }
        k->verdict = ok ? BS_GATE_ALLOW : BS_GATE_DENY;
        g->queued--;
        void (*wake)(void *) = k->wake;
        void *warg = k->arg;
        pthread_mutex_unlock(&g->lock);
        wake(warg); /* k may be freed from here on */
        pthread_mutex_lock(&g->lock);
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

bs_gate_verdict bs_metrics_gate_check(bs_metrics_gate *g, bs_gate_conn *c,
                                      const char *user, const char *password,
                                      void (*wake)(void *arg), void *arg,
                                      bs_gate_check **check)
{
    *check = NULL;
    if (!user || !password)
        return BS_GATE_DENY;
    size_t ul = strlen(user), pl = strlen(password);
    char *both = malloc(ul + pl + 2);
    if (!both)
        return BS_GATE_LIMITED;
    memcpy(both, user, ul + 1);
    memcpy(both + ul + 1, password, pl + 1);
    XXH128_hash_t key = XXH3_128bits_withSeed(both, ul + pl + 2, g->secret);
    pthread_mutex_lock(&g->lock);
    double now = bs_now();
    client *cl = c ? c->cl : NULL;
    bs_gate_verdict v = BS_GATE_WAIT;
    if (cache_has(g, key, now)) {
        v = BS_GATE_ALLOW;
    } else if (g->stopping || g->queued >= BS_GATE_QUEUE) {
        v = BS_GATE_LIMITED;
    } else if (cl) {
        refill(cl, now);
        if (cl->tokens < 1)
            v = BS_GATE_LIMITED;
    }
    bs_gate_check *k = NULL;
    if (v == BS_GATE_WAIT && !(k = calloc(1, sizeof(*k))))
        v = BS_GATE_LIMITED;
    if (v == BS_GATE_WAIT) {
        k->user = both;
        k->password = both + ul + 1;
        k->cl = cl;
        k->verdict = BS_GATE_WAIT;
        k->wake = wake;
        k->arg = arg;
        k->key = key;
        if (g->qtail)
            g->qtail->next = k;
        else
            g->qhead = k;
        g->qtail = k;
        g->queued++;
        *check = k;
        pthread_cond_signal(&g->work);
    }
    pthread_mutex_unlock(&g->lock);
    if (v != BS_GATE_WAIT) {
        explicit_bzero(both, ul + pl + 2);
        free(both);
    }
    return v;
}

bs_gate_verdict bs_gate_check_result(bs_metrics_gate *g,
                                     const bs_gate_check *check)
{
    pthread_mutex_lock(&g->lock);
    bs_gate_verdict v = check->verdict;
    pthread_mutex_unlock(&g->lock);
    return v;
}

void bs_gate_check_free(bs_gate_check *check)
{
    if (!check)
        return;
    explicit_bzero(check->user, strlen(check->user));
    free(check->user); /* the password follows it in the same block */
    free(check);
}

bs_metrics_gate *bs_metrics_gate_new(const bs_metrics_guard *guard,
                                     char *errstr, size_t errstr_size)
{
    bs_metrics_gate *g = calloc(1, sizeof(*g));
    if (!g) {
        snprintf(errstr, errstr_size, "out of memory");
        return NULL;
    }
    g->guard = guard;
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->work, NULL);
    if (getrandom(&g->secret, sizeof(g->secret), 0) !=
        (ssize_t)sizeof(g->secret))
        g->secret = (uint64_t)bs_now() ^ (uint64_t)getpid() << 32;
    int e = pthread_create(&g->watchdog, NULL, watch, g);
    g->started_watch = e == 0;
    for (size_t i = 0; !e && bs_metrics_guard_users(guard) &&
                       i < BS_GATE_WORKERS;
         i++)
        if (!(e = pthread_create(&g->workers[i], NULL, work, g)))
            g->nworkers++;
    if (e) {
        snprintf(errstr, errstr_size, "metrics endpoint: cannot start a "
                 "thread: %s", strerror(e));
        bs_metrics_gate_stop(g);
        bs_metrics_gate_destroy(g);
        return NULL;
    }
    return g;
}

void bs_metrics_gate_stop(bs_metrics_gate *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->lock);
    bool was = g->stopping;
    g->stopping = true;
    pthread_cond_broadcast(&g->work);
    pthread_mutex_unlock(&g->lock);
    if (was)
        return;
    if (g->started_watch)
        pthread_join(g->watchdog, NULL);
    for (size_t i = 0; i < g->nworkers; i++)
        pthread_join(g->workers[i], NULL);
}

void bs_metrics_gate_destroy(bs_metrics_gate *g)
{
    if (!g)
        return;
    bs_metrics_gate_stop(g);
    while (g->conns) {
        bs_gate_conn *c = g->conns;
        g->conns = c->next;
        free(c);
    }
    explicit_bzero(g->cache, sizeof(g->cache));
    pthread_cond_destroy(&g->work);
    pthread_mutex_destroy(&g->lock);
    free(g);
}
