/*
 * fm_proto.h -- a `.proto` schema as a reader of the Protobuf wire format
 * needs it, parsed from source text without protoc or generated code: the
 * messages (nested), their fields (number, label, type, oneof, map), the
 * enums and their values, with every named type resolved to its
 * definition.  A schema is a set of files, as a Schema Registry returns a
 * schema and its references: each a name (the path `import` statements
 * use) and its text, one of them the main file.
 *
 * What the parser reads: proto2, proto3 and editions files; `package`;
 * `import` (plain, public, weak) resolved against the other files by name
 * (google/protobuf well-known types only when given as files); messages and
 * enums nested to FM_PROTO_MAX_DEPTH; fields with labels optional,
 * required, repeated or none; `oneof`; `map<K, V>`, modelled as protobuf
 * does: a repeated field of a nested entry message (NameEntry) with key = 1
 * and value = 2; `allow_alias` (a duplicate enum number without it is an
 * error).  What it skips, because reading a record does not need it:
 * options everywhere (aggregate `{...}` values too), `reserved`,
 * `extensions`, `extend`, `service` and `rpc`.  A proto2 `group` is a named
 * error.  Editions' `features` options are skipped: a field of an editions
 * file without a label has explicit presence (the editions default).
 *
 * Names resolve as protoc resolves them: a name with a leading `.` is fully
 * qualified; any other is looked up from the innermost scope outwards (the
 * message, its parents, the package's parts, the root), and a name is
 * visible in a file when that file, a file it imports, or a file those
 * import publicly defines it.
 *
 * Errors name the file, line and column and what was expected:
 *   "protobuf schema: a.proto:12:5: expected field number, found \"x\"".
 * Bounds (checked before anything is allocated for them): the total input,
 * the number of files, nesting depth, definitions, fields, identifier
 * length.
 *
 * The model is read-only for users, owned by the schema, and lives until
 * fm_proto_schema_destroy; the source texts may be freed once
 * fm_proto_schema_new returns.
 */
#ifndef BLOOMSTAGE_FM_PROTO_H
#define BLOOMSTAGE_FM_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FM_PROTO_MAX_INPUT ((size_t)4 << 20) /* all files' text together */
#define FM_PROTO_MAX_FILES 256
#define FM_PROTO_MAX_DEPTH 32       /* messages and enums nested */
#define FM_PROTO_MAX_DEFS 20000     /* messages and enums, all files */
#define FM_PROTO_MAX_FIELDS 200000  /* fields and enum values, all files */
#define FM_PROTO_MAX_IDENT 256      /* bytes of one identifier */

/* A field's type: the numbering of descriptor.proto (10, group, is never
 * produced). */
typedef enum fm_proto_type {
    FM_PROTO_DOUBLE = 1,
    FM_PROTO_FLOAT = 2,
    FM_PROTO_INT64 = 3,
    FM_PROTO_UINT64 = 4,
    FM_PROTO_INT32 = 5,
    FM_PROTO_FIXED64 = 6,
    FM_PROTO_FIXED32 = 7,
    FM_PROTO_BOOL = 8,
    FM_PROTO_STRING = 9,
    FM_PROTO_MESSAGE = 11,
    FM_PROTO_BYTES = 12,
    FM_PROTO_UINT32 = 13,
    FM_PROTO_ENUM = 14,
    FM_PROTO_SFIXED32 = 15,
    FM_PROTO_SFIXED64 = 16,
    FM_PROTO_SINT32 = 17,
    FM_PROTO_SINT64 = 18,
} fm_proto_type;

/* IMPLICIT: a proto3 field without a label (absent means its default);
 * OPTIONAL: explicit presence (proto2 optional, proto3 optional, a oneof
 * member, an editions field without a label). */
typedef enum fm_proto_label {
    FM_PROTO_IMPLICIT,
    FM_PROTO_OPTIONAL,
    FM_PROTO_REQUIRED,
    FM_PROTO_REPEATED,
} fm_proto_label;

typedef struct fm_proto_file fm_proto_file;
typedef struct fm_proto_message fm_proto_message;

typedef struct fm_proto_enum_value {
    const char *name;
    int32_t number;
} fm_proto_enum_value;

typedef struct fm_proto_enum {
    const char *name, *full_name; /* "Color", "pkg.Msg.Color" */
    fm_proto_enum_value *values;  /* declaration order; values[0] is the
                                     default of a field of this type */
    size_t n_values;
    bool allow_alias;
    const fm_proto_file *file;
    int line, col;                /* where it is declared */
} fm_proto_enum;

typedef struct fm_proto_field {
    const char *name;
    uint32_t number;
    fm_proto_label label;
    fm_proto_type type;
    const char *type_name;          /* as written, for MESSAGE and ENUM */
    const fm_proto_message *message; /* MESSAGE: its definition */
    const fm_proto_enum *enumeration; /* ENUM: its definition */
    int oneof;                      /* index in the message's oneofs, or -1 */
    bool map;                       /* map<K,V>: message is the entry */
    int line, col;                  /* where it is declared */
} fm_proto_field;

struct fm_proto_message {
    const char *name, *full_name;  /* "Inner", "pkg.Outer.Inner" */
    fm_proto_field *fields;        /* sorted by number */
    size_t n_fields;
    fm_proto_message **messages;   /* nested, in declaration order; map
                                      entries among them */
    size_t n_messages;
    fm_proto_enum **enums;         /* nested, declaration order */
    size_t n_enums;
    const char **oneofs;           /* oneof names, declaration order */
    size_t n_oneofs;
    bool map_entry;                /* a map's entry (key = 1, value = 2) */
    const fm_proto_message *parent; /* NULL at top level */
    const fm_proto_file *file;
    int line, col;                 /* where it is declared */
};

struct fm_proto_file {
    const char *name;
    const char *package;           /* "" when none */
    int syntax;                    /* 2, 3, or 0 for an editions file */
    fm_proto_message **messages;   /* top level, declaration order */
    size_t n_messages;
    fm_proto_enum **enums;
    size_t n_enums;
};

/* One file of a schema: the name imports use, and its text (len bytes,
 * not necessarily NUL-terminated). */
typedef struct fm_proto_source {
    const char *name;
    const char *text;
    size_t len;
} fm_proto_source;

typedef struct fm_proto_schema fm_proto_schema;

/* Parses files[0..n_files) into one schema whose main file is
 * files[main].  NULL on error, with errstr naming the file, line, column
 * and what was expected. */
fm_proto_schema *fm_proto_schema_new(const fm_proto_source *files,
                                     size_t n_files, size_t main,
                                     char *errstr, size_t errstr_size);
void fm_proto_schema_destroy(fm_proto_schema *s);

const fm_proto_file *fm_proto_schema_main(const fm_proto_schema *s);

/* The message of that fully qualified name ("pkg.Msg" or ".pkg.Msg"), in
 * any file of the schema; NULL if none. */
const fm_proto_message *fm_proto_schema_message(const fm_proto_schema *s,
                                                const char *full_name);

/* A field by name (NULL if none) or by number (binary search; NULL). */
const fm_proto_field *fm_proto_message_field(const fm_proto_message *m,
                                             const char *name);
const fm_proto_field *fm_proto_message_field_number(const fm_proto_message *m,
                                                    uint32_t number);

/* true when an absent field is absent (explicit presence: a label other
 * than IMPLICIT, or a message type); false when an absent field reads as
 * its default (proto3 implicit presence).  Repeated fields: false. */
bool fm_proto_field_has_presence(const fm_proto_field *f);

/* Confluent's message indexes: p[0..n) is what follows the schema id in a
 * framed record: a zigzag varint count, that many zigzag varint indexes
 * (a count of 0 alone means [0]), then the message.  The first index picks
 * a top-level message of the main file, each next one a message nested in
 * the last (counting declared messages only: not enums, not map entries).
 * 0 with *msg and the payload set; -1 with errstr naming what is wrong
 * (truncated, negative or out-of-range index, too many). */
#define FM_PROTO_MAX_INDEXES FM_PROTO_MAX_DEPTH
int fm_proto_message_by_index(const fm_proto_schema *s, const uint8_t *p,
                              size_t n, const fm_proto_message **msg,
                              const uint8_t **payload, size_t *payload_len,
                              char *errstr, size_t errstr_size);

#endif
