/*
 * record_key.h -- the key a dedup filter or blocklist looks at, taken from a
 * consumed record as a key-spec says: the record key, the whole value, a
 * header's value, or a JSON pointer (RFC 6901) into a JSON value.
 *
 * One bs_record_keys per record: it parses the JSON value at most once
 * however many specs ask for it, and owns the text of non-string JSON
 * results (serialized compactly), until bs_record_keys_reset.
 */
#ifndef BLOOMSTAGE_RECORD_KEY_H
#define BLOOMSTAGE_RECORD_KEY_H

#include <config.h>
#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct bs_record_keys {
    const rd_kafka_message_t *msg;
    void *doc; /* json_t *, parsed lazily */
    bool parsed, bad_json;
    char *owned[8]; /* serialized non-string results */
    size_t nowned;
} bs_record_keys;

void bs_record_keys_init(bs_record_keys *rk, const rd_kafka_message_t *msg);
void bs_record_keys_reset(bs_record_keys *rk); /* frees what it owns */

/* true with key/len set (may be empty, never NULL), false when the record
 * has no such key: no record key, no such header, a value that is not JSON
 * or a pointer that leads nowhere.  A JSON string yields its UTF-8 text;
 * any other JSON value its compact serialization with sorted keys, so equal
 * values give equal keys. */
bool bs_record_key(bs_record_keys *rk, const bs_config_keyspec *spec,
                   const void **key, size_t *len);

/* Two specs that always yield the same key. */
bool bs_keyspec_equal(const bs_config_keyspec *a, const bs_config_keyspec *b);

#endif
