/*
 * frame.c -- Confluent's 5-byte wire-format prefix (fm_frame.h): checked
 * and split off before a payload reaches its decoder.
 */
#include "fm_frame.h"

#include <stdio.h>

int fm_frame_parse(const void *buf, size_t len, uint32_t *schema_id,
                   const uint8_t **rest, size_t *rest_len, char *errstr,
                   size_t errstr_size)
{
    const uint8_t *b = buf;
    if (len < FM_FRAME_PREFIX) {
        snprintf(errstr, errstr_size,
                 "not Confluent-framed: %zu bytes, shorter than the %d-byte "
                 "prefix (magic byte 0x00, 4-byte schema id)",
                 len, FM_FRAME_PREFIX);
        return -1;
    }
    if (b[0] != FM_FRAME_MAGIC) {
        snprintf(errstr, errstr_size,
                 "not Confluent-framed: magic byte 0x%02x, want 0x00", b[0]);
        return -1;
    }
    *schema_id = (uint32_t)b[1] << 24 | (uint32_t)b[2] << 16 |
                 (uint32_t)b[3] << 8 | (uint32_t)b[4];
    *rest = b + FM_FRAME_PREFIX;
    *rest_len = len - FM_FRAME_PREFIX;
    return 0;
}

int fm_frame_json(const void *buf, size_t len, const uint8_t **json,
                  size_t *json_len, uint32_t *schema_id, int *framed,
                  char *errstr, size_t errstr_size)
{
    const uint8_t *b = buf;
    if (len == 0 || b[0] != FM_FRAME_MAGIC) {
        *json = b;
        *json_len = len;
        *schema_id = 0;
        *framed = 0;
        return 0;
    }
    *framed = 1;
    return fm_frame_parse(buf, len, schema_id, json, json_len, errstr,
                          errstr_size);
}
