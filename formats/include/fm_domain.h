/*
 * fm_domain.h -- domain lookups for blocklists (`blocklist.NAME.match=
 * domain`): a key's domain and every parent of it at a label boundary, so
 * a list holding `spam.example` blocks `u@MX3.Spam.Example` and never
 * `u@notspam.example` or `spam.example.org`.
 *
 * The domain of a key:
 *   - a URL, `scheme://[userinfo@]host[:port][/path][?query][#frag]`: its
 *     host; an IPv6 host in brackets is the address inside them;
 *   - else an address with `@`: what follows the last `@`;
 *   - else a host with no scheme, `spam.example/x` or `host:8080/x`;
 *   in both, up to the first `/`, `?` or `#` (no domain holds them),
 *   without a `:port` of digits, and an address literal in brackets
 *   (`u@[192.0.2.1]`) is what is inside them;
 *   - else the whole key.
 * It is lowercased (ASCII only: DNS compares names so; other bytes are
 * kept) and one trailing dot is removed.
 *
 * Lookups: the domain, then each parent, longest first: `mx3.spam.example`,
 * `spam.example`, `example`.  An IPv6 address or a dotted IPv4 address is
 * one lookup, never split.
 *
 * Malformed and over-long names are capped, not refused: the lookups are
 * the suffixes of the domain, from the right, made only of well-formed
 * labels (1 to 63 bytes) and at most 253 bytes long.  The first empty or
 * over-long label from the right, or the first label that would take the
 * suffix past 253 bytes, ends the list.  So `a..spam.example` and
 * `<70 bytes>.spam.example` are looked up as `spam.example` and `example`:
 * padding a listed domain with a bad label does not escape the list, and
 * nothing longer than a real DNS name is ever looked up.  A key with no
 * well-formed last label (``, `u@`, `spam.example..`, a last label of 64
 * bytes) has no lookups: fm_domain_parse says why.
 *
 * False positives: a key takes L = fm_domain_count() lookups, at most
 * FM_DOMAIN_MAX_LOOKUPS (127: 253 bytes hold at most 127 one-byte labels).
 * With a filter of false-positive rate p per lookup, a record whose domain
 * is on no list is blocked with probability at most 1-(1-p)^L <= L*p: a
 * list meant to wrongly block at most P of such records is sized for
 * p = P/L with L the most labels its keys carry (3 for `mx3.spam.example`;
 * 127 bounds every key).
 */
#ifndef BLOOMSTAGE_FM_DOMAIN_H
#define BLOOMSTAGE_FM_DOMAIN_H

#include <stddef.h>
#include <stdint.h>

#define FM_DOMAIN_MAX 253         /* bytes of a DNS name, dots included */
#define FM_DOMAIN_MAX_LABEL 63    /* bytes of one label */
#define FM_DOMAIN_MAX_LOOKUPS 127 /* (FM_DOMAIN_MAX + 1) / 2 */

/* The lookups of one key: name holds the longest, and lookup i is the
 * suffix of name starting at start[i]. */
typedef struct fm_domain {
    char name[FM_DOMAIN_MAX + 1]; /* NUL-terminated */
    size_t len;
    unsigned n;                   /* lookups: 0 to FM_DOMAIN_MAX_LOOKUPS */
    uint8_t start[FM_DOMAIN_MAX_LOOKUPS];
} fm_domain;

/* Fills d with the lookups of key[0..len).  0 when there is at least one;
 * -1 with errstr saying why there is none (no host, an empty or over-long
 * last label), d->n then 0. */
int fm_domain_parse(fm_domain *d, const void *key, size_t len, char *errstr,
                    size_t errstr_size);

/* The number of lookups, L above. */
static inline unsigned fm_domain_count(const fm_domain *d)
{
    return d->n;
}

/* Lookup i (0 is the longest): a pointer into d->name, its length in
 * *len. */
static inline const char *fm_domain_at(const fm_domain *d, unsigned i,
                                       size_t *len)
{
    *len = d->len - d->start[i];
    return d->name + d->start[i];
}

#endif
