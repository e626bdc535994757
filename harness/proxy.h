/*
 * proxy.h -- a TCP proxy on loopback whose link a test can cut, slow down
 * and heal: the nemesis's network faults.  It listens on one port and
 * forwards every connection to one target port (a broker's listener whose
 * advertised address is the proxy's, so a client reaches that broker only
 * through it), on a thread of its own.
 *
 * The link is in one of four modes, changed at any moment:
 *   pass       bytes flow both ways as they come;
 *   delay MS   each byte is forwarded MS milliseconds after it arrived (a
 *              slow link; order kept);
 *   blackhole  connections stay open, every byte either way is dropped,
 *              including what was queued (a partition: requests time out,
 *              nothing is refused); new connections are taken and fed
 *              nothing;
 *   reset      every connection is reset (RST) and new ones are reset at
 *              once (a peer that restarts or refuses).
 * Healing (pass) affects what arrives from then on: bytes dropped by a
 * blackhole are gone, as on a real network, so a client must time out and
 * retry.
 *
 * Conventions: core.h.  The control calls (h_proxy_set, h_proxy_cut_on,
 * h_proxy_stats) may be made from the test's thread while the proxy's
 * thread runs.
 */
#ifndef BS_SUPPORT_PROXY_H
#define BS_SUPPORT_PROXY_H

#include "core.h"

#include <stdint.h>

typedef struct h_proxy h_proxy;

typedef enum h_link {
    H_LINK_PASS,
    H_LINK_DELAY,
    H_LINK_BLACKHOLE,
    H_LINK_RESET,
} h_link;

/* A proxy on 127.0.0.1:listen_port (0: a free port, see h_proxy_port)
 * forwarding to 127.0.0.1:target_port, in pass mode.  NULL on failure,
 * with the reason in h_last_error(). */
h_proxy *h_proxy_new(int listen_port, int target_port) H_WARN_UNUSED;

/* The port it listens on. */
int h_proxy_port(const h_proxy *p);

/* Puts the link in `mode`; delay_ms is read for H_LINK_DELAY only. */
void h_proxy_set(h_proxy *p, h_link mode, int delay_ms);

/* A trip wire: the first bytes from a client that hold `wire` (within one
 * read) put the link in blackhole mode before they pass, as h_proxy_set
 * would; then it is disarmed.  "" disarms it.  A cut at the moment a
 * client sends a given request (a topic's name), whatever the caller's
 * thread is doing. */
void h_proxy_cut_on(h_proxy *p, const char *wire);

/* What it has done so far: connections taken, bytes forwarded (both
 * directions), bytes dropped by a blackhole, connections reset, wires
 * tripped. */
typedef struct h_proxy_stats {
    uint64_t accepted, forwarded, dropped, reset, trips;
} h_proxy_stats;
h_proxy_stats h_proxy_stats_get(h_proxy *p);

/* Stops the thread and closes every connection.  NULL is fine. */
void h_proxy_free(h_proxy *p);

#endif
