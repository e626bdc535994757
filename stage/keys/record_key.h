/*
 * record_key.h -- the key a dedup filter or blocklist looks at, taken from a
 * consumed record as a key-spec says: the record key, the whole value, a
 * header's value, or a JSON pointer (RFC 6901) into the JSON value or the
 * JSON record key (either may carry Confluent's 5-byte prefix, as a JSON
 * Schema serializer writes it: the JSON after it is read); a path into an
 * Avro or Protobuf value or record key in Confluent's wire format, read
 * with its schema from the Schema Registry (framed.h); or a tuple of
 * several of those (a composite key).
 *
 * The bytes are formats/include/fm_key.h's: a part that is bytes or a JSON
 * string is those bytes; any other JSON value is typed (so {"id":7} and
 * {"id":"7"} are two keys, as are null and "null"); a composite key is
 * the tuple of its parts' bytes, so ("ab","c") and ("a","bc") differ.
 *
 * One bs_record_keys per record: it parses the JSON value (and the JSON
 * key) at most once however many specs ask for it, and owns the keys it
 * had to encode, until bs_record_keys_reset.
 *
 * The extraction itself works on a bs_record_view (key, value and a header
 * lookup), so tests and fuzz targets can feed it plain bytes; the record
 * path fills the view from an rd_kafka_message_t with bs_record_keys_init,
 * which only copies pointers (the message must outlive the keys).
 */
#ifndef BLOOMSTAGE_RECORD_KEY_H
#define BLOOMSTAGE_RECORD_KEY_H

#include <config.h>
#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stddef.h>

/* The value of the LAST header called `name` (Kafka's lastHeader()): true
 * with v and len set, false when there is none or its value is null. */
typedef bool (*bs_header_fn)(const void *opaque, const char *name,
                             const void **v, size_t *len);

/* What a key-spec can look at; every pointer is borrowed.  key NULL: the
 * record has no key; value NULL: no value (a tombstone).  header NULL: no
 * headers. */
typedef struct bs_record_view {
    const void *key;
    size_t key_len;
    const void *value;
    size_t value_len;
    bs_header_fn header;
    const void *header_opaque;
} bs_record_view;

struct bs_framed;

/* Bytes of small keys a bs_record_keys holds without allocating. */
#define BS_RECORD_KEYS_ARENA 512

typedef struct bs_record_keys {
    bs_record_view rec;
    /* avro: and protobuf: parts read through it; NULL: such parts are
     * missing (set after init: the record path's is the stage's). */
    struct bs_framed *framed;
    /* Set when a framed part's schema could not be fetched (the registry
     * gave no answer): the record cannot be decided yet; hold_id is the
     * schema id it names, why the registry's error. */
    bool hold;
    int32_t hold_id;
    /* Set when a framed part could not be read at all (framed.h's BAD:
     * not framed, an unknown schema id, a payload that does not decode). */
    bool bad;
    void *doc;  /* json_t *, the value parsed lazily */
    bool parsed, bad_json;
    void *kdoc; /* json_t *, the record key parsed lazily (key.json:) */
    bool kparsed, kbad_json;
    /* Encoded results (typed JSON values, composite keys), as many as the
     * specs ask for: the first few inline (no allocation on the record
     * path beyond the key itself), the rest in `more`, which grows. */
    char *owned[8];
    size_t nowned;
    char **more;
    size_t nmore, capmore;
    size_t arena_used;
    /* Set by a key that is missing for a reason worth telling (a framed
     * part that is not framed, not decodable, of an unknown schema): the
     * first such reason, for the rejected record's reason header.  Init
     * clears only its first byte: most records never write it. */
    char why[200];
    /* Small keys are kept here instead of a malloc (not cleared). */
    char arena[BS_RECORD_KEYS_ARENA];
} bs_record_keys;

/* A Kafka record; headers are looked up through rd_kafka_message_headers. */
void bs_record_keys_init(bs_record_keys *rk, const rd_kafka_message_t *msg);
/* Any record (the view is copied, what it points to borrowed). */
void bs_record_keys_init_view(bs_record_keys *rk, const bs_record_view *rec);
void bs_record_keys_reset(bs_record_keys *rk); /* frees what it owns */

/* true with key/len set (may be empty, never NULL), false when the record
 * has no such key: no record key, no such header, a value (or key) that is
 * not JSON, a pointer that leads nowhere, a framed part that cannot be
 * read (rk->why says why) or whose schema cannot be fetched now (rk->hold),
 * or any part of a composite key missing.  A JSON string yields its UTF-8 text; any other JSON value its
 * typed encoding (fm_key.h: numbers by value, objects as maps sorted by
 * key), so equal values give equal keys.  false also when an encoding
 * cannot be allocated (out of memory), which the caller treats as a
 * missing key. */
bool bs_record_key(bs_record_keys *rk, const bs_config_keyspec *spec,
                   const void **key, size_t *len);

/* bs_record_key, the key then normalized as norm says (config.h's
 * bs_normalize; fm_normalize.h says how): BS_CONFIG_NORM_NONE is
 * bs_record_key itself, anything else an owned copy. */
bool bs_record_key_norm(bs_record_keys *rk, const bs_config_keyspec *spec,
                        bs_normalize norm, const void **key, size_t *len);

/* fm_normalize.h's flags for a bs_normalize. */
unsigned bs_normalize_flags(bs_normalize norm);

/* Two specs that always yield the same key: the same parts, in order. */
bool bs_keyspec_equal(const bs_config_keyspec *a, const bs_config_keyspec *b);

#endif
