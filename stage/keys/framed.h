/*
 * framed.h -- key parts read from records in Confluent's wire format:
 * `avro:/path` and `protobuf:/path` (and their `key.` forms).  A record
 * carries its schema's id (fm_frame.h); the schema comes from the Schema
 * Registry (registry.h) the first time an id is seen, and is compiled with
 * the part's path once (fm_avro.h, fm_proto.h, fm_protobuf.h).  After
 * that a record costs the frame's five bytes, one hash lookup and the
 * walk of its payload: the registry is asked once per new schema id, not
 * per record.
 *
 * Every record gets one of four answers, and the reason when it has no
 * key, which the record path puts in the rejected record's reason header:
 *   FOUND        the value at the path, as fm_key.h's bytes.
 *   MISSING      the record is read, and the path leads to nothing: a null
 *                union branch, an absent field with explicit presence, a
 *                schema version without the field.
 *   BAD          the record cannot be read: its first byte is not the
 *                magic byte 0, the registry does not know its schema id,
 *                the schema is of another type than the part reads, does
 *                not parse, or the payload does not decode with it.  Said
 *                of the record; the registry is fine.
 *   UNREACHABLE  the registry gave no answer (registry.h's UNREACHABLE):
 *                nothing is known of the record.  The caller holds it
 *                and asks again later (bs_framed_probe); nothing is
 *                cached, and until the registry answers a probe, every
 *                schema id not compiled yet is UNREACHABLE at once.
 * The compiled form of a schema and path is kept per (part, schema id);
 * an answer that depends only on the schema (it does not parse, it lacks
 * the field) is kept the same way, since an id never changes meaning.
 * A registry 404 is kept only as long as the registry's negative cache
 * keeps it.  At most max_entries compiled entries are kept; past it, the
 * least recently used is dropped.
 *
 * Threads: one handle is used by one thread (the stage's).  Nothing here
 * prints or exits.
 */
#ifndef BLOOMSTAGE_FRAMED_H
#define BLOOMSTAGE_FRAMED_H

#include "registry/registry.h"

#include <config.h>
#include <fm_key.h>
#include <stddef.h>
#include <stdint.h>

typedef struct bs_framed bs_framed;

typedef enum bs_framed_result {
    BS_FRAMED_FOUND = 0,
    BS_FRAMED_MISSING,
    BS_FRAMED_BAD,
    BS_FRAMED_UNREACHABLE,
} bs_framed_result;

/* A handle asking the registry conf names (registry.h checks it), keeping
 * at most max_entries compiled (part, schema id) entries (0: 1).  NULL
 * with errstr on error. */
bs_framed *bs_framed_new(const bs_registry_conf *conf, size_t max_entries,
                         char *errstr, size_t errstr_size);
void bs_framed_destroy(bs_framed *f); /* accepts NULL */

/* The key part's value in bytes[0..len) (a record's value or key, part
 * says which it is) into out, an empty fm_key (the Protobuf reader
 * resets it).  *schema_id is the id the record
 * names (-1 when it is not framed).  why[why_size] gets the reason for
 * every answer but FOUND ("avro: /email is null", "schema id 7: not
 * found in the registry", the registry's error for UNREACHABLE). */
bs_framed_result bs_framed_key(bs_framed *f, const bs_config_keypart *part,
                               const void *bytes, size_t len, fm_key *out,
                               int32_t *schema_id, char *why,
                               size_t why_size);

/* Asks the registry for the schema id again (a held record's), without
 * compiling anything: UNREACHABLE while it still gives no answer, else
 * FOUND (any answer: the record can be decided now).  why as above. */
bs_framed_result bs_framed_probe(bs_framed *f, int32_t schema_id, char *why,
                                 size_t why_size);

/* HTTP requests made to the registry so far, and entries compiled now. */
uint64_t bs_framed_requests(const bs_framed *f);
size_t bs_framed_entries(const bs_framed *f);

#endif
