/*
 * fm_key.h -- the bytes a decoded value contributes to a key: one encoding
 * for every record format (JSON, Avro, Protobuf) and for composite keys,
 * so that the same value gives the same key whatever carried it, and two
 * different values never give the same key except as said below.
 *
 * The encoding (what the filters hash):
 *
 *   string, bytes     the bytes themselves, nothing added: a key read from a
 *                     text or bytes field equals the same key given raw (the
 *                     record key, a line of a list file).
 *   null              FF 'n'
 *   boolean           FF 't' or FF 'f'
 *   integer           FF 'i' then its decimal text ("-7"); any width and
 *                     signedness: int32 7, uint64 7 and JSON 7 are one key.
 *   real              an integral value in int64's range is that integer
 *                     (7.0 is 7, -0.0 is 0); any other FF 'd' then "%.17g"
 *                     text (which round-trips a double), "nan" for NaN.
 *   enum              its symbol's name, as a string (the name is what a
 *                     schema keeps across versions; a number with no name
 *                     is its integer).
 *   record, message   FF 'r' then its fields in the schema's order, each an
 *                     element.
 *   array             FF 'a' then its items, each an element.
 *   map               FF 'm' then key, value, key, value... sorted by key
 *                     bytes, each an element.
 *   composite key     FF 'T' then each part as an element (a key of one part
 *                     is that part's bytes, unwrapped).
 *   element           its encoding's length as 4 bytes little-endian, then
 *                     the encoding: ("ab","c") and ("a","bc") differ.
 *
 * 0xFF never occurs in UTF-8 text, so no string equals a typed value (the
 * string "7" and the integer 7 are two keys, and so are "null" and null).
 * A bytes value that begins with 0xFF can equal a typed value of the same
 * encoding; nothing else collides.  Strings and bytes of the same content
 * are one key on purpose: a key is its bytes wherever it comes from.
 *
 * An fm_key is a growing buffer with a bound (FM_KEY_MAX bytes): a key past
 * it, or an allocation that fails, leaves the key marked failed and every
 * later append a no-op, so an encoder checks once, at the end.
 */
#ifndef BLOOMSTAGE_FM_KEY_H
#define BLOOMSTAGE_FM_KEY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The largest key: larger than any Kafka record a broker takes by default. */
#define FM_KEY_MAX ((size_t)16 << 20)

/* The byte that starts every typed value; never part of UTF-8 text. */
#define FM_KEY_TYPED 0xFF

typedef struct fm_key {
    uint8_t *p;      /* the key's bytes: inl, or a heap copy once larger */
    size_t len, cap;
    bool failed;     /* over FM_KEY_MAX or out of memory */
    uint8_t inl[128];
} fm_key;

/* A mark returned by fm_key_elem_begin, closed by fm_key_elem_end. */
typedef size_t fm_key_mark;

void fm_key_init(fm_key *k);
/* Empties the key (keeps its memory). */
void fm_key_reset(fm_key *k);
/* Frees what it holds; init again to reuse. */
void fm_key_free(fm_key *k);

void fm_key_bytes(fm_key *k, const void *b, size_t n); /* strings too */
void fm_key_null(fm_key *k);
void fm_key_bool(fm_key *k, bool v);
void fm_key_int(fm_key *k, int64_t v);
void fm_key_uint(fm_key *k, uint64_t v);
void fm_key_real(fm_key *k, double v);

/* A compound value: kind is one of 'r' (record), 'a' (array), 'm' (map),
 * 'T' (composite key); its elements follow, each between
 * fm_key_elem_begin and fm_key_elem_end. */
void fm_key_compound(fm_key *k, char kind);
fm_key_mark fm_key_elem_begin(fm_key *k);
void fm_key_elem_end(fm_key *k, fm_key_mark m);

/* Map entries are sorted by their key's bytes: fm_key_map_sort sorts the
 * elements written since `start` (the length fm_key_compound left, read
 * as k->len right after it) in pairs (key element, value element), by the
 * key element's bytes.  false on a failed key or an odd count. */
bool fm_key_map_sort(fm_key *k, size_t start);

/* true when the key is whole (not failed). */
static inline bool fm_key_ok(const fm_key *k)
{
    return !k->failed;
}

#endif
