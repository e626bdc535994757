/*
 * config_int.h -- what the config/ files share and config.h hides: the key
 * table's row type, parsed values, the helpers the tests reach into, and
 * the store's insides its own files share.
 * Not part of the API; only the config/ sources and the tests that check
 * the table (tests/unit/test_config.c, tests/unit/test_settings.c) include it.
 *
 * A row's name is either a plain key ("dedup.fpr") or a pattern with one
 * '*':  in the middle ("blocklist.*.path") it stands for a NAME of
 * [A-Za-z0-9_-]+, at the end ("kafka.*") for any non-empty suffix.  Plain
 * rows are looked up first, so "consumer.group.id" is its own row even though
 * "consumer.*" would match it too.  Documents print a middle '*' as NAME.
 */
#ifndef BLOOMSTAGE_CONFIG_INT_H
#define BLOOMSTAGE_CONFIG_INT_H

#include "config.h"

typedef enum bs_ctype {
    BS_CT_STRING = 0,
    BS_CT_INT,     /* decimal int64 */
    BS_CT_SIZE,    /* int64 bytes as bs_config_parse_size reads them:
                      optional suffix k, M, G, T (1024^n) */
    BS_CT_DOUBLE,  /* finite decimal */
    BS_CT_BOOL,    /* true | false */
    BS_CT_ENUM,    /* one of row->values */
    BS_CT_KEYSPEC, /* key | value | header:NAME | json:/pointer */
    BS_CT_TOPICS,  /* comma-separated Kafka topic names */
} bs_ctype;

#define BS_CF_REQUIRED 0x01u /* validate: must be set and non-empty */
#define BS_CF_RANGE 0x02u    /* imin..imax (int, size) or dmin..dmax apply */
#define BS_CF_MIN_OPEN 0x04u /* the lower bound is excluded */
#define BS_CF_MAX_OPEN 0x08u /* the upper bound is excluded */
#define BS_CF_ANY_OF 0x10u   /* in a NAME group: at least one of the rows
                                with this flag must be set, and none of
                                them set empty */

typedef struct bs_config_row {
    const char *name;     /* key or pattern, see above */
    bs_ctype type;
    const char *section;  /* title of the group in the sample */
    const char *def;      /* default as text (parsed like any value); NULL:
                             none */
    const char *def_from; /* when unset, take this key's value instead */
    unsigned flags;       /* BS_CF_* */
    int64_t imin, imax;
    double dmin, dmax;
    const char *const *values; /* enum: allowed values, NULL-terminated */
    const char *help;          /* one paragraph; documents wrap it */
    const char *example;       /* `key=value` shown in the sample when the
                                  row has no plain default to show */
} bs_config_row;

typedef struct bs_config_section {
    const char *title;
    const char *intro; /* printed under the title in the sample; may be NULL */
} bs_config_section;

extern const bs_config_row bs_config_rows[];
extern const size_t bs_config_nrows;
extern const bs_config_section bs_config_sections[];
extern const size_t bs_config_nsections;

/* A parsed value; which fields mean something depends on the row type. */
typedef struct bs_value {
    int64_t i;  /* INT, SIZE */
    double d;   /* DOUBLE */
    bool b;     /* BOOL */
    int e;      /* ENUM: index into row->values */
    bs_config_keyspec ks; /* KEYSPEC; its parts and their strings are
                             ks_mem's */
    void *ks_mem;
    const char **topics; /* TOPICS; strings point into topics_buf */
    size_t ntopics;
    char *topics_buf;
} bs_value;

/* Parses `text` as a value of `row`; out->ks.arg points into `text`, which
 * must outlive *out.  On failure returns -1 and writes the
 * complaint as it follows "value 'TEXT' " in a message ("out of range (0,
 * 0.1]", "is not an integer", ...).  *out is owned by the caller, freed with
 * bs_value_free (also after a failure). */
int bs_value_parse(const bs_config_row *row, const char *text, bs_value *out,
                   char *why, size_t why_size);
void bs_value_free(bs_value *v);

/* The row for `key`.  NULL if none matches; then, if the key has the shape
 * of a pattern row but a bad NAME or an empty suffix, *why says so. */
const bs_config_row *bs_config_row_find(const char *key, char *why,
                                        size_t why_size);
/* The row named exactly `name` (a plain key or a pattern as in the table). */
const bs_config_row *bs_config_row_by_name(const char *name);
bool bs_config_row_is_pattern(const bs_config_row *row);
/* Middle-'*' rows: the NAME a matching key carries ("spam"), copied into
 * buf; false if the key does not match the row. */
bool bs_config_row_name_of(const bs_config_row *row, const char *key,
                           char *buf, size_t n);

/* Optimal-string-alignment (restricted Damerau-Levenshtein) distance. */
size_t bs_config_distance(const char *a, const char *b);
/* The table key nearest to an unknown `key` within distance 2 (a pattern
 * row suggests itself instantiated with the key's own NAME or suffix), into
 * buf.  False when nothing is that near. */
bool bs_config_suggest(const char *key, char *buf, size_t n);

/* A middle-less pattern ("kafka.*"): keys handed to librdkafka unread. */
bool bs_config_row_is_passthrough(const bs_config_row *row);

/* -- secrets and values from files (secrets.c) ---------------------------- */

/* Values longer than this are cut in messages. */
#define BS_CONFIG_SHOW_MAX 64

/* Where the first secret mark in s[0..len) ends (case-insensitive), or
 * NULL: bs_config_key_is_secret is this on a whole key. */
const char *bs_config_secret_mark_end(const char *s, size_t len);
/* s[0..len) as a message shows it: at most BS_CONFIG_SHOW_MAX bytes
 * ("..." when cut).  With `guard` (text that may not be a well-formed
 * key=value) also cut right after a secret mark
 * ("kafka.sasl.password..."), so a line or argument missing its '=' never
 * shows what follows a secret's name. */
void bs_config_show(char *buf, size_t n, const char *s, size_t len,
                    bool guard);
/* The length of the valid UTF-8 sequence of a printable character (no
 * ASCII control) at s, or 0 (RFC 3629: no overlong forms, no surrogates,
 * nothing past U+10FFFF): what bs_config_escape keeps. */
size_t bs_config_utf8_len(const unsigned char *s);
/* Opens path read-only: a regular file, or with dir_ok a directory too.
 * Returns the descriptor, or -1 with why = "cannot read 'PATH': reason"
 * (reason: strerror, "is a directory, not a file", "is not a regular
 * file"). */
int bs_config_open_path(const char *path, bool dir_ok, char *why, size_t n);
/* The content of path as a value: one trailing newline (LF or CR LF)
 * removed, at most BS_CONFIG_MAX_LINE bytes, no NUL.  *out is the caller's
 * (free); on failure NULL, and why says so without the content. */
int bs_config_read_value_file(const char *path, char **out, char *why,
                              size_t n);

/* BLOOMSTAGE_ variable names, without the prefix, to keys (the way back,
 * bs_config_env_encode, is config.h's).  `___` -> '-', `__` -> '_', `_` ->
 * '.', lower case (greedy from the left, like the apache/kafka image's
 * sed).  -1 if the result does not fit in n bytes. */
int bs_config_env_decode(const char *name, char *key, size_t n);

const char *bs_ctype_name(bs_ctype type);
/* "(0, 0.1]", "[1, 1000000000000]", "forward|reject"; "" if unbounded. */
void bs_config_format_range(const bs_config_row *row, char *buf, size_t n);
/* A row's name for documents: a middle '*' shown as NAME. */
void bs_config_display_name(const bs_config_row *row, char *buf, size_t n);

/* -- the store's insides, shared by store.c (layers, loaders, getters),
 * validate.c and print.c (the effective configuration) ------------------ */

/* One key set: copies of its key, value text and origin (see
 * bs_config_origin), the value parsed from the text and the layer that set
 * it. */
typedef struct bs_config_entry {
    char *key;
    const bs_config_row *row;
    char *value; /* NULL: no value (a required key nobody set) */
    char *origin;
    int layer;
    bool secret; /* never shown: a secret key, or a value read from a
                    file */
    bs_value v; /* parsed from value */
} bs_config_entry;

struct bs_config {
    bs_config_entry *entries; /* in the order their keys were first set */
    size_t n, cap;
    bs_config_blocklist *bl; /* after a successful validate */
    char **bl_names;
    size_t nbl;
};

/* printf into errstr, if there is one. */
void bs_config_fail(char *errstr, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
bs_config_entry *bs_config_find_entry(const bs_config *cfg, const char *key);
/* Drops the blocklist array validate built (any change makes it stale). */
void bs_config_drop_blocklists(bs_config *cfg);

/* Middle-'*' rows sharing the text up to and including the '*'
 * ("blocklist.*") form a group: one NAME, several keys (validate.c). */
bool bs_config_same_group(const bs_config_row *a, const bs_config_row *b);
/* The first row of its group in the table: where groups are handled. */
bool bs_config_group_leader(const bs_config_row *row);
/* The NAMEs set in `row`'s group, in order of first appearance: fn for
 * each distinct one, with the first entry that named it.  Returns fn's
 * first non-zero result. */
typedef int (*bs_config_name_fn)(const bs_config *cfg,
                                 const bs_config_row *row, const char *name,
                                 const bs_config_entry *first, void *opaque);
int bs_config_foreach_name(const bs_config *cfg, const bs_config_row *row,
                           bs_config_name_fn fn, void *opaque);
/* The key of pattern `row` for NAME. */
void bs_config_instantiate(const bs_config_row *row, const char *name,
                           char *buf, size_t n);

#endif
