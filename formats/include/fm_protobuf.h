/*
 * fm_protobuf.h -- one value read out of a Protobuf message by a path of
 * field names, without generated code: the path is compiled once against a
 * message of an fm_proto schema, then each record's bytes are read for the
 * value at its end, which becomes an fm_key (fm_key.h says which bytes each
 * kind contributes).
 *
 * A path is `/a/b/c`: each segment names a field of the message the one
 * before it leads to ("" alone is the whole message).  A segment after a
 * map field is a key of that map (`/attrs/color`; an integer for an
 * integer-keyed map, true or false for a bool key); `~1` in a segment is
 * `/` and `~0` is `~`, as in a JSON pointer.  A path may end at a repeated
 * field (an array) or a map (a map), but may not go through a repeated
 * field other than a map.
 *
 * Reading follows the wire format's rules: fields in any order; a singular
 * scalar's last occurrence wins; occurrences of a singular message merge
 * (so every occurrence is read, the last value winning per leaf); a map's
 * entries with one key: the last wins; a oneof's last member set is the
 * one set; packed and unpacked repeated scalars both read; unknown fields
 * are skipped.
 *
 * FOUND, MISSING or BAD:
 *   FOUND    the leaf is in the key.  An absent scalar leaf with implicit
 *            presence (a proto3 field without a label) is FOUND with its
 *            default (0, false, "", the enum's first value): protobuf
 *            cannot tell it from a written default.  An absent repeated
 *            or map leaf is FOUND as an empty array or map, for the same
 *            reason.  A map value whose entry lacks it is its default.
 *   MISSING  a message on the path is absent; a map has no entry of the
 *            path's key; a leaf with explicit presence (proto2 optional or
 *            required, proto3 optional, a oneof member, a message) is
 *            absent; a oneof member on the path is not the member set.
 *   BAD      the payload does not decode where the read goes: a truncated
 *            varint or fixed value, a length past the end, a wire type
 *            that does not fit the field's type on the path or in a leaf
 *            message, a group wire type (3, 4) or 6, 7, field number 0,
 *            nesting past FM_PB_MAX_DEPTH, or more than FM_PB_MAX_STEPS
 *            fields read for one record.  errstr names the field, its
 *            message and the byte offset in the payload.
 *
 * A message leaf is FF 'r' then each of its fields in field-number order as
 * an element: its value, its default when absent with implicit presence,
 * null when absent with explicit presence (a oneof member not set, an
 * absent message); repeated fields as arrays, maps as sorted maps.
 * Within a oneof whose members occur more than once, each in turn, a
 * message member merges all its occurrences (protobuf would start over
 * when another member came between).
 *
 * Per record nothing is allocated beyond the fm_key's growth (and the
 * sort of a map leaf's entries).  A compiled path keeps pointers into its
 * schema: destroy it before the schema.
 */
#ifndef BLOOMSTAGE_FM_PROTOBUF_H
#define BLOOMSTAGE_FM_PROTOBUF_H

#include <stddef.h>
#include <stdint.h>

#include "fm_key.h"
#include "fm_proto.h"

#define FM_PB_MAX_PATH 32           /* segments of a path */
#define FM_PB_MAX_SEGMENT 4096      /* bytes of one segment */
#define FM_PB_MAX_DEPTH 64          /* messages nested in what is read */
#define FM_PB_MAX_STEPS (1 << 24)   /* fields read for one record */

typedef enum fm_pb_result {
    FM_PB_BAD = -1,
    FM_PB_FOUND = 0,
    FM_PB_MISSING = 1,
} fm_pb_result;

typedef struct fm_pb_path fm_pb_path;

/* Compiles path against message root; NULL with errstr naming the field
 * that does not exist and the message it was looked for in, or the
 * repeated field the path goes through. */
fm_pb_path *fm_pb_path_compile(const fm_proto_message *root, const char *path,
                               char *errstr, size_t errstr_size);
void fm_pb_path_destroy(fm_pb_path *p);

/* Reads the path's value from one message's bytes (the payload after
 * framing and message indexes) into key, which it resets first. */
fm_pb_result fm_pb_extract(const fm_pb_path *p, const uint8_t *msg,
                           size_t len, fm_key *key, char *errstr,
                           size_t errstr_size);

#endif
