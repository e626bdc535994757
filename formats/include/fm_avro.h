/*
 * fm_avro.h -- a key from an Avro value: a writer schema (as a Schema
 * Registry returns it) parsed once, a path of record field names compiled
 * against it once, then each record's payload (the bytes after the
 * Confluent prefix, fm_frame.h) read for the value at the path and
 * appended to an fm_key in the encoding of fm_key.h.
 *
 * Paths: "/a/b" names field a of the top-level record, then field b of
 * a's record.  "" (or "/") is the whole value.  Where the path meets a
 * union, it goes on through every record branch that has the next field;
 * a branch that is null, or not a record with that field, makes the key
 * missing when a record takes it.  Avro names hold neither '/' nor '~',
 * so a path needs no escapes.
 *
 * Values at the leaf (fm_key.h): string, bytes and fixed their bytes; int
 * and long their value; float and double by fm_key_real (so 7.0f and 7L
 * are one key); boolean; enum its symbol's name; a union its branch's
 * value (a null branch at the leaf is a missing key, inside a record or
 * array it is FF 'n'); record FF 'r' and its fields in schema order;
 * array FF 'a' and its items; map FF 'm' and its entries sorted by key.
 * Logical types are their underlying types (a uuid its string, a date its
 * int, a decimal its bytes).
 *
 * A payload is read as a whole, as Avro's own readers do: every byte of
 * the value is checked, also past the path's leaf, so a truncated or
 * damaged record never gives a key (bytes after the value are ignored, as
 * Java's DatumReader ignores them).  Bounds, checked before anything is
 * read or kept: a length or a block count past the bytes left is damage
 * (no allocation follows from a length); values nested deeper than
 * FM_AVRO_MAX_DEPTH and more than FM_AVRO_MAX_EMPTY_ITEMS items of a type
 * that takes no bytes (null, an empty record) in one payload are refused.
 *
 * Threads: a schema and its paths are read-only once built; any number of
 * threads may extract with one path at once.
 */
#ifndef BLOOMSTAGE_FM_AVRO_H
#define BLOOMSTAGE_FM_AVRO_H

#include "fm_key.h"

#include <stddef.h>
#include <stdint.h>

#define FM_AVRO_SCHEMA_MAX ((size_t)4 << 20) /* bytes of schema JSON */
#define FM_AVRO_PATH_MAX 1024                 /* bytes of a path */
#define FM_AVRO_MAX_DEPTH 256                 /* nesting of one value */
#define FM_AVRO_MAX_EMPTY_ITEMS 4096          /* zero-byte items per payload */

typedef struct fm_avro_schema fm_avro_schema;
typedef struct fm_avro_path fm_avro_path;

typedef enum fm_avro_result {
    FM_AVRO_FOUND = 0, /* the key is appended to out */
    FM_AVRO_MISSING,   /* a null (or a branch without the field) on the path */
    FM_AVRO_BAD,       /* the payload does not decode with this schema */
} fm_avro_result;

/* Parses a writer schema, json[0..len) (avro-c's parser).  NULL with
 * errstr on a schema that does not parse (avro_strerror()'s reason), is
 * longer than FM_AVRO_SCHEMA_MAX, or cannot be held in memory. */
fm_avro_schema *fm_avro_schema_new(const char *json, size_t len, char *errstr,
                                   size_t errstr_size);
/* Drops the caller's reference: the schema lives on while a path compiled
 * from it does.  Accepts NULL. */
void fm_avro_schema_destroy(fm_avro_schema *s);

/* Compiles a path (NUL-terminated) against a schema.  NULL with errstr
 * naming the segment, the field and the record when a field is not there,
 * or the type met where a record was wanted.  The path holds a reference
 * to the schema. */
fm_avro_path *fm_avro_path_compile(fm_avro_schema *s, const char *path,
                                   char *errstr, size_t errstr_size);
void fm_avro_path_destroy(fm_avro_path *p); /* accepts NULL */

/* Reads payload[0..len) (one Avro binary value of the schema) and appends
 * the value at the path to out.  FM_AVRO_MISSING and FM_AVRO_BAD leave out
 * as it was and write the reason into errstr ("avro: /email is null",
 * "avro: field name of record User: string length 900 past the end at
 * byte 12 (4 left)"); FM_AVRO_FOUND writes nothing there.  A key past
 * FM_KEY_MAX is FM_AVRO_BAD. */
fm_avro_result fm_avro_extract(const fm_avro_path *p, const uint8_t *payload,
                               size_t len, fm_key *out, char *errstr,
                               size_t errstr_size);

#endif
