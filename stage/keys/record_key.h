/*
 * record_key.h -- the key a dedup filter or blocklist looks at, taken from a
 * consumed record as a key-spec says: the record key, the whole value, a
 * header's value, or a JSON pointer (RFC 6901) into a JSON value.
 *
 * One bs_record_keys per record: it parses the JSON value at most once
 * however many specs ask for it, and owns the text of non-string JSON
 * results (serialized compactly), until bs_record_keys_reset.
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

typedef struct bs_record_keys {
    bs_record_view rec;
    void *doc; /* json_t *, parsed lazily */
    bool parsed, bad_json;
    /* Serialized non-string results, as many as the specs ask for: the
     * first few inline (no allocation on the record path beyond the text
     * itself), the rest in `more`, which grows. */
    char *owned[8];
    size_t nowned;
    char **more;
    size_t nmore, capmore;
} bs_record_keys;

/* A Kafka record; headers are looked up through rd_kafka_message_headers. */
void bs_record_keys_init(bs_record_keys *rk, const rd_kafka_message_t *msg);
/* Any record (the view is copied, what it points to borrowed). */
void bs_record_keys_init_view(bs_record_keys *rk, const bs_record_view *rec);
void bs_record_keys_reset(bs_record_keys *rk); /* frees what it owns */

/* true with key/len set (may be empty, never NULL), false when the record
 * has no such key: no record key, no such header, a value that is not JSON
 * or a pointer that leads nowhere.  A JSON string yields its UTF-8 text;
 * any other JSON value its compact serialization with sorted keys, so equal
 * values give equal keys.  false also when that serialization cannot be
 * allocated (out of memory), which the caller treats as a missing key. */
bool bs_record_key(bs_record_keys *rk, const bs_config_keyspec *spec,
                   const void **key, size_t *len);

/* Two specs that always yield the same key. */
bool bs_keyspec_equal(const bs_config_keyspec *a, const bs_config_keyspec *b);

#endif
