/*
 * fm_frame.h -- Confluent's wire format: the 5-byte prefix a Schema
 * Registry serializer puts before a record's Avro, Protobuf or JSON
 * payload.  Byte 0 is the magic byte 0x00, bytes 1-4 the schema id
 * (big-endian, unsigned); the payload follows (for Protobuf, after the
 * message-index list, which the Protobuf reader parses).
 *
 * JSON text never begins with a 0x00 byte, so a JSON value is framed
 * exactly when its first byte is 0x00: fm_frame_json tells the two apart
 * and gives the JSON that follows the prefix.
 */
#ifndef BLOOMSTAGE_FM_FRAME_H
#define BLOOMSTAGE_FM_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define FM_FRAME_MAGIC 0  /* the first byte of a framed value */
#define FM_FRAME_PREFIX 5 /* bytes of the prefix: magic byte, schema id */

/* Splits a framed value: sets *schema_id and the payload after the prefix
 * (*rest points into buf).  0, or -1 with errstr naming why: a buffer
 * shorter than the prefix, or a magic byte other than 0x00. */
int fm_frame_parse(const void *buf, size_t len, uint32_t *schema_id,
                   const uint8_t **rest, size_t *rest_len, char *errstr,
                   size_t errstr_size);

/* A JSON value, framed or not: *json is the JSON after the prefix when
 * buf begins with 0x00 (and *schema_id its id), else buf itself (and
 * *schema_id 0; *framed says which).  -1 with errstr for a 0x00 first byte
 * with fewer than 5 bytes: neither JSON nor a frame. */
int fm_frame_json(const void *buf, size_t len, const uint8_t **json,
                  size_t *json_len, uint32_t *schema_id, int *framed,
                  char *errstr, size_t errstr_size);

#endif
