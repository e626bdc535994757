/*
 * protobuf.c -- the wire reader of fm_protobuf.h: compiles a path of field
 * names against a schema's message, then reads a record's bytes for the
 * value at the path's end, straight from the buffer.
 *
 * A message is read as a "source": either one byte range, or every
 * occurrence of a field in a parent source (occurrences of a singular
 * message merge, which on the wire is their concatenation).  Sources chain
 * on the C stack, so nothing is allocated per record; a source with a
 * single occurrence collapses to its range, so the common case scans each
 * byte once per field it looks for.  The work is bounded (FM_PB_MAX_STEPS
 * fields read per record, FM_PB_MAX_DEPTH messages deep), so a hostile
 * payload costs a bounded time.
 */
#include "fm_protobuf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

/* One step of a compiled path: a field of message `in`; for a map field
 * with a key segment after it, that key (then the step leads to the
 * entry's value). */
typedef struct step {
    const fm_proto_message *in;
    const fm_proto_field *field;
    bool has_key;
    int64_t ikey;     /* signed integer keys */
    uint64_t ukey;    /* unsigned integer and bool keys */
    const char *skey; /* string keys */
    size_t skey_len;
} step;

struct fm_pb_path {
    const fm_proto_message *root;
    size_t n;
    step steps[FM_PB_MAX_PATH];
    char text[]; /* the segments, unescaped, NUL-separated */
};

/* A message's bytes: a range (parent NULL) or every LEN occurrence of
 * field `number` in parent. */
typedef struct src {
    const struct src *parent;
    const uint8_t *p;
    size_t n;
    uint32_t number;
    const fm_proto_message *m; /* what the bytes are, for errors */
} src;

/* One field as the wire has it. */
typedef struct wire {
    uint32_t number;
    int wt;
    const uint8_t *at; /* where its tag starts */
    const uint8_t *p;  /* LEN: the value */
    size_t n;
    uint64_t v;        /* VARINT, I64, I32: the value */
} wire;

typedef struct ctx {
    const uint8_t *base; /* the payload: offsets count from here */
    size_t steps;
    int depth;
    fm_key *key;
    char *errstr;
    size_t errstr_size;
} ctx;

/* A decoded scalar: kind 'i' (i), 'u' (u), 'd' (d), 'b' (u is 0 or 1),
 * 's' (p, n: string or bytes), 'e' (i: an enum's number). */
typedef struct scalar {
    char kind;
    int64_t i;
    uint64_t u;
    double d;
    const uint8_t *p;
    size_t n;
} scalar;

/* ------------------------------------------------------------- errors */

static int bad(ctx *c, const fm_proto_message *m, uint32_t number,
               const uint8_t *at, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int bad(ctx *c, const fm_proto_message *m, uint32_t number,
               const uint8_t *at, const char *fmt, ...)
{
    const fm_proto_field *f = number ? fm_proto_message_field_number(m, number)
                                     : NULL;
    int n;
    if (number)
        n = snprintf(c->errstr, c->errstr_size,
                     "protobuf: field %" PRIu32 "%s%s%s of message %s: ",
                     number, f ? " (" : "", f ? f->name : "", f ? ")" : "",
                     m->full_name);
    else
        n = snprintf(c->errstr, c->errstr_size, "protobuf: message %s: ",
                     m->full_name);
    if (n >= 0 && (size_t)n < c->errstr_size) {
        va_list ap;
        va_start(ap, fmt);
        n += vsnprintf(c->errstr + n, c->errstr_size - (size_t)n, fmt, ap);
        va_end(ap);
    }
    if (n >= 0 && (size_t)n < c->errstr_size)
        snprintf(c->errstr + n, c->errstr_size - (size_t)n, " at byte %zu",
                 at ? (size_t)(at - c->base) : (size_t)0);
    return -1;
}

/* ------------------------------------------------------------ scanning */

/* A varint past its first byte: 0, or -1 truncated, -2 longer than 10
 * bytes or past 64 bits. */
static int varint_long(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
    uint64_t v = 0;
    const uint8_t *q = *p;
    for (int shift = 0; shift < 70; shift += 7) {
        if (q >= end)
            return -1;
        uint8_t b = *q++;
        if (shift == 63 && b > 1)
            return -2;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *p = q;
            *out = v;
            return 0;
        }
    }
    return -2;
}

/* A varint: most are one or two bytes (tags of fields 16 to 2047, short
 * lengths), read here without a loop. */
static inline int varint(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
    const uint8_t *q = *p;
    if (end - q >= 2) {
        if (q[0] < 0x80) {
            *out = q[0];
            *p = q + 1;
            return 0;
        }
        if (q[1] < 0x80) {
            *out = (uint64_t)(q[0] & 0x7f) | (uint64_t)q[1] << 7;
            *p = q + 2;
            return 0;
        }
    }
    return varint_long(p, end, out);
}

static uint64_t le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

typedef int (*field_fn)(ctx *c, void *arg, const wire *w);

/* Calls fn for every field of the range numbered `only` (or every field
 * when only is 0); -1 on a payload that does not decode. */
static int scan(ctx *c, const fm_proto_message *m, const uint8_t *p, size_t n,
                uint32_t only, field_fn fn, void *arg)
{
    const uint8_t *end = p + n;
    while (p < end) {
        wire w;
        w.at = p;
        w.p = NULL;
        w.n = 0;
        w.v = 0;
        if (++c->steps > FM_PB_MAX_STEPS)
            return bad(c, m, 0, p, "more than %d fields read",
                       FM_PB_MAX_STEPS);
        uint64_t tag;
        int rc = varint(&p, end, &tag);
        if (rc < 0)
            return bad(c, m, 0, w.at, "%s field tag",
                       rc == -1 ? "truncated" : "overlong");
        if ((tag >> 3) == 0 || (tag >> 3) > 536870911)
            return bad(c, m, 0, w.at, "field number %" PRIu64 " out of range",
                       tag >> 3);
        w.number = (uint32_t)(tag >> 3);
        w.wt = (int)(tag & 7);
        switch (w.wt) {
        case WT_VARINT:
            rc = varint(&p, end, &w.v);
            if (rc < 0)
                return bad(c, m, w.number, w.at, "%s varint",
                           rc == -1 ? "truncated" : "overlong");
            break;
        case WT_I64:
        case WT_I32: {
            size_t k = w.wt == WT_I64 ? 8 : 4;
            if ((size_t)(end - p) < k)
                return bad(c, m, w.number, w.at, "%zu-byte value past the "
                           "end", k);
            w.v = le(p, (int)k);
            p += k;
            break;
        }
        case WT_LEN: {
            uint64_t len;
            rc = varint(&p, end, &len);
            if (rc < 0)
                return bad(c, m, w.number, w.at, "%s length",
                           rc == -1 ? "truncated" : "overlong");
            if (len > (uint64_t)(end - p))
                return bad(c, m, w.number, w.at, "length %" PRIu64
                           " past the end", len);
            w.p = p;
            w.n = (size_t)len;
            p += len;
            break;
        }
        case 3:
        case 4:
            return bad(c, m, w.number, w.at, "group wire type %d is not "
                       "supported", w.wt);
        default:
            return bad(c, m, w.number, w.at, "invalid wire type %d", w.wt);
        }
        if ((only == 0 || w.number == only) && fn(c, arg, &w) < 0)
            return -1;
    }
    return 0;
}

typedef int (*range_fn)(ctx *c, void *arg, const uint8_t *p, size_t n);

typedef struct occ_arg {
    const fm_proto_message *m; /* the parent's message */
    range_fn fn;
    void *arg;
} occ_arg;

static int occ_fn(ctx *c, void *arg, const wire *w)
{
    occ_arg *o = arg;
    if (w->wt != WT_LEN)
        return bad(c, o->m, w->number, w->at, "wire type %d for a message",
                   w->wt);
    return o->fn(c, o->arg, w->p, w->n);
}

static int each_range(ctx *c, const src *s, range_fn fn, void *arg);

typedef struct scan_arg {
    const fm_proto_message *m;
    uint32_t only;
    field_fn fn;
    void *arg;
} scan_arg;

static int scan_fn(ctx *c, void *arg, const uint8_t *p, size_t n)
{
    scan_arg *a = arg;
    return scan(c, a->m, p, n, a->only, a->fn, a->arg);
}

/* Calls fn for every field of source s numbered `only` (0: every field),
 * in wire order across the source's ranges. */
static int each_field(ctx *c, const src *s, uint32_t only, field_fn fn,
                      void *arg)
{
    scan_arg a = {s->m, only, fn, arg};
    return each_range(c, s, scan_fn, &a);
}

/* Calls fn for each byte range that makes up source s. */
static int each_range(ctx *c, const src *s, range_fn fn, void *arg)
{
    if (!s->parent)
        return s->n ? fn(c, arg, s->p, s->n) : 0;
    occ_arg o = {s->parent->m, fn, arg};
    return each_field(c, s->parent, s->number, occ_fn, &o);
}

/* ------------------------------------------------------------- sources */

typedef struct count_arg {
    size_t n;
    const uint8_t *p;
    size_t len;
} count_arg;

static int count_fn(ctx *c, void *arg, const uint8_t *p, size_t n)
{
    (void)c;
    count_arg *a = arg;
    a->n++;
    a->p = p;
    a->len = n;
    return 0;
}

/* Counts the occurrences that make up source s (a range counts one) and,
 * when there is at most one, turns s into that range (an empty one for
 * none).  -1 on a payload that does not decode. */
static int settle(ctx *c, src *s, size_t *count)
{
    if (!s->parent) {
        *count = 1;
        return 0;
    }
    count_arg a = {0};
    if (each_range(c, s, count_fn, &a) < 0)
        return -1;
    *count = a.n;
    if (a.n <= 1) {
        s->parent = NULL;
        s->p = a.n ? a.p : c->base;
        s->n = a.n ? a.len : 0;
    }
    return 0;
}

typedef struct last_arg {
    wire w;
    bool found;
} last_arg;

static int last_fn(ctx *c, void *arg, const wire *w)
{
    (void)c;
    last_arg *a = arg;
    a->w = *w;
    a->found = true;
    return 0;
}

typedef struct oneof_arg {
    const fm_proto_message *m;
    int oneof;
    uint32_t winner;
} oneof_arg;

static int oneof_fn(ctx *c, void *arg, const wire *w)
{
    (void)c;
    oneof_arg *a = arg;
    const fm_proto_field *f = fm_proto_message_field_number(a->m, w->number);
    if (f && f->oneof == a->oneof)
        a->winner = w->number;
    return 0;
}

/* 1 when f is its oneof's member set last in s (or is in no oneof), 0
 * when not, -1 on BAD. */
static int oneof_set(ctx *c, const src *s, const fm_proto_field *f)
{
    if (f->oneof < 0)
        return 1;
    oneof_arg a = {s->m, f->oneof, 0};
    if (each_field(c, s, 0, oneof_fn, &a) < 0)
        return -1;
    return a.winner == f->number;
}

/* ------------------------------------------------------------- scalars */

static int wt_of(fm_proto_type t)
{
    switch (t) {
    case FM_PROTO_DOUBLE:
    case FM_PROTO_FIXED64:
    case FM_PROTO_SFIXED64:
        return WT_I64;
    case FM_PROTO_FLOAT:
    case FM_PROTO_FIXED32:
    case FM_PROTO_SFIXED32:
        return WT_I32;
    case FM_PROTO_STRING:
    case FM_PROTO_BYTES:
    case FM_PROTO_MESSAGE:
        return WT_LEN;
    default:
        return WT_VARINT;
    }
}

static char kind_of(fm_proto_type t)
{
    switch (t) {
    case FM_PROTO_INT32:
    case FM_PROTO_INT64:
    case FM_PROTO_SINT32:
    case FM_PROTO_SINT64:
    case FM_PROTO_SFIXED32:
    case FM_PROTO_SFIXED64:
        return 'i';
    case FM_PROTO_UINT32:
    case FM_PROTO_UINT64:
    case FM_PROTO_FIXED32:
    case FM_PROTO_FIXED64:
        return 'u';
    case FM_PROTO_FLOAT:
    case FM_PROTO_DOUBLE:
        return 'd';
    case FM_PROTO_BOOL:
        return 'b';
    case FM_PROTO_ENUM:
        return 'e';
    default:
        return 's';
    }
}

/* A scalar of f's type from its wire value; -1 (BAD) on a wire type that
 * does not fit the type. */
static int decode(ctx *c, const fm_proto_message *m, const fm_proto_field *f,
                  const wire *w, scalar *s)
{
    if (w->wt != wt_of(f->type))
        return bad(c, m, f->number, w->at, "wire type %d does not fit its "
                   "type", w->wt);
    uint64_t v = w->v;
    memset(s, 0, sizeof(*s));
    s->kind = kind_of(f->type);
    switch (f->type) {
    case FM_PROTO_INT32:
    case FM_PROTO_SFIXED32:
    case FM_PROTO_ENUM:
        s->i = (int32_t)(uint32_t)v;
        break;
    case FM_PROTO_INT64:
    case FM_PROTO_SFIXED64:
        s->i = (int64_t)v;
        break;
    case FM_PROTO_UINT32:
    case FM_PROTO_FIXED32:
        s->u = (uint32_t)v;
        break;
    case FM_PROTO_SINT32: {
        uint32_t x = (uint32_t)v;
        s->i = (int32_t)((x >> 1) ^ (0u - (x & 1)));
        break;
    }
    case FM_PROTO_SINT64:
        s->i = (int64_t)((v >> 1) ^ (0 - (v & 1)));
        break;
    case FM_PROTO_BOOL:
        s->u = v != 0;
        break;
    case FM_PROTO_FLOAT: {
        uint32_t x = (uint32_t)v;
        float fl;
        memcpy(&fl, &x, sizeof(fl));
        s->d = fl;
        break;
    }
    case FM_PROTO_DOUBLE:
        memcpy(&s->d, &v, sizeof(s->d));
        break;
    case FM_PROTO_STRING:
    case FM_PROTO_BYTES:
        s->p = w->p;
        s->n = w->n;
        break;
    default:
        s->u = v;
        break;
    }
    return 0;
}

/* The value of an absent field with implicit presence. */
static void default_of(const fm_proto_field *f, scalar *s)
{
    memset(s, 0, sizeof(*s));
    s->kind = kind_of(f->type);
    s->p = (const uint8_t *)"";
    if (f->type == FM_PROTO_ENUM)
        s->i = f->enumeration->values[0].number;
}

static void emit(fm_key *k, const fm_proto_field *f, const scalar *s)
{
    switch (s->kind) {
    case 'i':
        fm_key_int(k, s->i);
        break;
    case 'u':
        fm_key_uint(k, s->u);
        break;
    case 'd':
        fm_key_real(k, s->d);
        break;
    case 'b':
        fm_key_bool(k, s->u != 0);
        break;
    case 'e': {
        /* The first name of the number (aliases share it). */
        const fm_proto_enum *e = f->enumeration;
        for (size_t i = 0; i < e->n_values; i++) {
            if (e->values[i].number == s->i) {
                fm_key_bytes(k, e->values[i].name, strlen(e->values[i].name));
                return;
            }
        }
        fm_key_int(k, s->i);
        break;
    }
    default:
        fm_key_bytes(k, s->p, s->n);
        break;
    }
}

static bool same_scalar(const scalar *a, const scalar *b)
{
    if (a->kind != b->kind)
        return false;
    switch (a->kind) {
    case 'i':
    case 'e':
        return a->i == b->i;
    case 's':
        return a->n == b->n && (a->n == 0 || memcmp(a->p, b->p, a->n) == 0);
    default:
        return a->u == b->u;
    }
}

/* -------------------------------------------------------------- values */

/* What an absent field gives: MISSING (a path's leaf), null (a field of a
 * message leaf), or its default whatever its presence (a map's value). */
typedef enum absent { A_MISSING, A_NULL, A_DEFAULT } absent;

static int value(ctx *c, const src *s, const fm_proto_field *f, absent how);

/* A message as a key: FF 'r' then every field, by number, an element. */
static int message(ctx *c, const src *s)
{
    if (c->depth >= FM_PB_MAX_DEPTH)
        return bad(c, s->m, 0, s->parent ? NULL : s->p, "messages nested "
                   "deeper than %d", FM_PB_MAX_DEPTH);
    c->depth++;
    fm_key_compound(c->key, 'r');
    for (size_t i = 0; i < s->m->n_fields; i++) {
        fm_key_mark mk = fm_key_elem_begin(c->key);
        if (value(c, s, &s->m->fields[i], A_NULL) < 0)
            return -1;
        fm_key_elem_end(c->key, mk);
    }
    c->depth--;
    return FM_PB_FOUND;
}

typedef struct item_arg {
    const fm_proto_message *m;
    const fm_proto_field *f;
} item_arg;

/* One value of a repeated scalar, as an element. */
static int item(ctx *c, const item_arg *a, const wire *w)
{
    scalar s;
    if (decode(c, a->m, a->f, w, &s) < 0)
        return -1;
    fm_key_mark mk = fm_key_elem_begin(c->key);
    emit(c->key, a->f, &s);
    fm_key_elem_end(c->key, mk);
    return 0;
}

static int array_fn(ctx *c, void *arg, const wire *w)
{
    item_arg *a = arg;
    const fm_proto_field *f = a->f;
    if (f->type == FM_PROTO_MESSAGE) {
        if (w->wt != WT_LEN)
            return bad(c, a->m, f->number, w->at, "wire type %d for a "
                       "message", w->wt);
        src one = {.p = w->p, .n = w->n, .m = f->message};
        fm_key_mark mk = fm_key_elem_begin(c->key);
        if (message(c, &one) < 0)
            return -1;
        fm_key_elem_end(c->key, mk);
        return 0;
    }
    int wt = wt_of(f->type);
    if (w->wt != WT_LEN || wt == WT_LEN)
        return item(c, a, w);
    /* Packed: the values back to back. */
    const uint8_t *p = w->p, *end = w->p + w->n;
    while (p < end) {
        wire one = {.number = w->number, .wt = wt, .at = p};
        if (++c->steps > FM_PB_MAX_STEPS)
            return bad(c, a->m, f->number, p, "more than %d fields read",
                       FM_PB_MAX_STEPS);
        if (wt == WT_VARINT) {
            if (varint(&p, end, &one.v) < 0)
                return bad(c, a->m, f->number, one.at, "bad varint in a "
                           "packed field");
        } else {
            size_t k = wt == WT_I64 ? 8 : 4;
            if ((size_t)(end - p) < k)
                return bad(c, a->m, f->number, p, "packed field's length "
                           "is not a multiple of %zu", k);
            one.v = le(p, (int)k);
            p += k;
        }
        if (item(c, a, &one) < 0)
            return -1;
    }
    return 0;
}

/* A map entry's key: its last key field, or the key type's default. */
static int entry_key(ctx *c, const fm_proto_field *mapf, const uint8_t *p,
                     size_t n, scalar *key)
{
    const fm_proto_message *e = mapf->message;
    src one = {.p = p, .n = n, .m = e};
    last_arg a = {.found = false};
    if (each_field(c, &one, 1, last_fn, &a) < 0)
        return -1;
    if (!a.found) {
        default_of(&e->fields[0], key);
        return 0;
    }
    return decode(c, e, &e->fields[0], &a.w, key);
}

typedef struct map_arg {
    const src *s;
    const fm_proto_field *f;
    size_t ordinal, at;   /* the entry written; the one a rescan is at */
    scalar key;
    bool later;           /* a later entry has the same key */
} map_arg;

static int later_fn(ctx *c, void *arg, const wire *w)
{
    map_arg *a = arg;
    scalar k;
    if (a->at++ <= a->ordinal || a->later)
        return 0;
    if (w->wt != WT_LEN)
        return bad(c, a->s->m, w->number, w->at, "wire type %d for a map "
                   "entry", w->wt);
    if (entry_key(c, a->f, w->p, w->n, &k) < 0)
        return -1;
    a->later = same_scalar(&k, &a->key);
    return 0;
}

static int map_fn(ctx *c, void *arg, const wire *w)
{
    map_arg *a = arg;
    const fm_proto_message *e = a->f->message;
    if (w->wt != WT_LEN)
        return bad(c, a->s->m, w->number, w->at, "wire type %d for a map "
                   "entry", w->wt);
    if (entry_key(c, a->f, w->p, w->n, &a->key) < 0)
        return -1;
    /* An entry whose key comes again later is replaced by that one. */
    map_arg later = *a;
    later.at = 0;
    later.later = false;
    if (each_field(c, a->s, a->f->number, later_fn, &later) < 0)
        return -1;
    a->ordinal++;
    if (later.later)
        return 0;
    fm_key_mark mk = fm_key_elem_begin(c->key);
    emit(c->key, &e->fields[0], &a->key);
    fm_key_elem_end(c->key, mk);
    src entry = {.p = w->p, .n = w->n, .m = e};
    mk = fm_key_elem_begin(c->key);
    if (value(c, &entry, &e->fields[1], A_DEFAULT) < 0)
        return -1;
    fm_key_elem_end(c->key, mk);
    return 0;
}

/* The value of field f of source s, appended to the key. */
static int value(ctx *c, const src *s, const fm_proto_field *f, absent how)
{
    if (f->label == FM_PROTO_REPEATED) {
        if (f->map) {
            fm_key_compound(c->key, 'm');
            size_t start = c->key->len;
            map_arg a = {.s = s, .f = f};
            if (each_field(c, s, f->number, map_fn, &a) < 0)
                return -1;
            fm_key_map_sort(c->key, start);
            return FM_PB_FOUND;
        }
        fm_key_compound(c->key, 'a');
        item_arg a = {s->m, f};
        return each_field(c, s, f->number, array_fn, &a) < 0 ? -1
                                                               : FM_PB_FOUND;
    }
    int set = oneof_set(c, s, f);
    if (set < 0)
        return -1;
    if (f->type == FM_PROTO_MESSAGE) {
        src sub = {.parent = s, .number = f->number, .m = f->message};
        size_t count = 0;
        if (set && settle(c, &sub, &count) < 0)
            return -1;
        if (count > 0 || how == A_DEFAULT) {
            if (count == 0) {
                sub.parent = NULL;
                sub.p = c->base;
                sub.n = 0;
            }
            return message(c, &sub);
        }
    } else if (set) {
        last_arg a = {.found = false};
        if (each_field(c, s, f->number, last_fn, &a) < 0)
            return -1;
        scalar v;
        if (a.found) {
            if (decode(c, s->m, f, &a.w, &v) < 0)
                return -1;
            emit(c->key, f, &v);
            return FM_PB_FOUND;
        }
        if (!fm_proto_field_has_presence(f) || how == A_DEFAULT) {
            default_of(f, &v);
            emit(c->key, f, &v);
            return FM_PB_FOUND;
        }
    }
    if (how == A_MISSING)
        return FM_PB_MISSING;
    fm_key_null(c->key);
    return FM_PB_FOUND;
}

/* --------------------------------------------------------------- paths */

typedef struct find_arg {
    const src *s;
    const step *st;
    const uint8_t *p;
    size_t n;
    bool found;
} find_arg;

static int find_fn(ctx *c, void *arg, const wire *w)
{
    find_arg *a = arg;
    const fm_proto_field *f = a->st->field;
    if (w->wt != WT_LEN)
        return bad(c, a->s->m, w->number, w->at, "wire type %d for a map "
                   "entry", w->wt);
    scalar k;
    if (entry_key(c, f, w->p, w->n, &k) < 0)
        return -1;
    bool match;
    switch (k.kind) {
    case 'i':
        match = k.i == a->st->ikey;
        break;
    case 's':
        match = k.n == a->st->skey_len &&
                (k.n == 0 || memcmp(k.p, a->st->skey, k.n) == 0);
        break;
    default:
        match = k.u == a->st->ukey;
        break;
    }
    if (match) {
        a->p = w->p;
        a->n = w->n;
        a->found = true;
    }
    return 0;
}

/* Follows the path from step i in source s. */
static int walk(ctx *c, const fm_pb_path *path, const src *s, size_t i)
{
    const step *st = &path->steps[i];
    const fm_proto_field *f = st->field;
    bool last = i + 1 == path->n;
    if (last && !st->has_key)
        return value(c, s, f, A_MISSING);
    if (!st->has_key) {
        int set = oneof_set(c, s, f);
        if (set <= 0)
            return set < 0 ? -1 : FM_PB_MISSING;
        src next = {.parent = s, .number = f->number, .m = f->message};
        size_t count;
        if (settle(c, &next, &count) < 0)
            return -1;
        return count ? walk(c, path, &next, i + 1) : FM_PB_MISSING;
    }
    find_arg a = {.s = s, .st = st};
    if (each_field(c, s, f->number, find_fn, &a) < 0)
        return -1;
    if (!a.found)
        return FM_PB_MISSING;
    src entry = {.p = a.p, .n = a.n, .m = f->message};
    const fm_proto_field *vf = &f->message->fields[1];
    if (last)
        return value(c, &entry, vf, A_DEFAULT);
    src next = {.parent = &entry, .number = 2, .m = vf->message};
    size_t count;
    if (settle(c, &next, &count) < 0)
        return -1;
    return walk(c, path, &next, i + 1);
}

fm_pb_result fm_pb_extract(const fm_pb_path *p, const uint8_t *msg,
                           size_t len, fm_key *key, char *errstr,
                           size_t errstr_size)
{
    ctx c = {.base = msg, .key = key, .errstr = errstr,
             .errstr_size = errstr_size};
    fm_key_reset(key);
    src root = {.p = msg, .n = len, .m = p->root};
    int rc = p->n ? walk(&c, p, &root, 0) : message(&c, &root);
    if (rc < 0)
        return FM_PB_BAD;
    if (!fm_key_ok(key)) {
        snprintf(errstr, errstr_size, "protobuf: message %s: the value is "
                 "larger than a key may be (%zu bytes) or memory ran out",
                 p->root->full_name, FM_KEY_MAX);
        return FM_PB_BAD;
    }
    return rc == FM_PB_FOUND ? FM_PB_FOUND : FM_PB_MISSING;
}

/* A map key segment as the key type reads it; -1 when it does not. */
static int parse_key(step *st, const fm_proto_field *kf, const char *seg,
                     size_t n)
{
    char *end;
    switch (kind_of(kf->type)) {
    case 's':
        st->skey = seg;
        st->skey_len = n;
        return 0;
    case 'b':
        if (strcmp(seg, "true") == 0 || strcmp(seg, "false") == 0) {
            st->ukey = seg[0] == 't';
            return 0;
        }
        return -1;
    case 'i': {
        errno = 0;
        long long v = strtoll(seg, &end, 10);
        bool narrow = kf->type == FM_PROTO_INT32 ||
                      kf->type == FM_PROTO_SINT32 ||
                      kf->type == FM_PROTO_SFIXED32;
        if (!n || *end || errno || (narrow && (v < INT32_MIN || v > INT32_MAX)))
            return -1;
        st->ikey = v;
        return 0;
    }
    default: {
        errno = 0;
        unsigned long long v = strtoull(seg, &end, 10);
        bool narrow = kf->type == FM_PROTO_UINT32 ||
                      kf->type == FM_PROTO_FIXED32;
        if (!n || seg[0] == '-' || *end || errno || (narrow && v > UINT32_MAX))
            return -1;
        st->ukey = v;
        return 0;
    }
    }
}

/* The segment of path at *at, unescaped (~1 is '/', ~0 is '~') into
 * seg (NUL-terminated, *n bytes); *at then past its '/' (or the end).  -1
 * with errstr for a bad escape or a segment over FM_PB_MAX_SEGMENT. */
static int next_segment(const char *path, size_t len, size_t *at, char *seg,
                        size_t *n, char *errstr, size_t errstr_size)
{
    size_t k = 0, i = *at;
    for (; i < len && path[i] != '/'; i++) {
        char ch = path[i];
        if (ch == '~') {
            char e = i + 1 < len ? path[i + 1] : '\0';
            if (e != '0' && e != '1') {
                snprintf(errstr, errstr_size, "protobuf path %.200s: '~' "
                         "must be followed by 0 or 1", path);
                return -1;
            }
            ch = e == '1' ? '/' : '~';
            i++;
        }
        seg[k++] = ch;
    }
    seg[k] = '\0';
    *at = i + 1;
    *n = k;
    if (k > FM_PB_MAX_SEGMENT) {
        snprintf(errstr, errstr_size, "protobuf path: a segment longer than "
                 "%d bytes", FM_PB_MAX_SEGMENT);
        return -1;
    }
    return 0;
}

fm_pb_path *fm_pb_path_compile(const fm_proto_message *root, const char *path,
                               char *errstr, size_t errstr_size)
{
    size_t len = strlen(path);
    fm_pb_path *p = NULL;
    if (len && path[0] != '/') {
        snprintf(errstr, errstr_size, "protobuf path \"%.64s\": it must "
                 "start with '/'", path);
        goto err;
    }
    if (len > (size_t)(FM_PB_MAX_SEGMENT + 1) * FM_PB_MAX_PATH) {
        snprintf(errstr, errstr_size, "protobuf path: longer than %d bytes",
                 (FM_PB_MAX_SEGMENT + 1) * FM_PB_MAX_PATH);
        goto err;
    }
    p = calloc(1, sizeof(*p) + len + 1);
    if (!p) {
        snprintf(errstr, errstr_size, "protobuf path: out of memory");
        goto err;
    }
    p->root = root;
    const fm_proto_message *m = root;
    const fm_proto_field *mapf = NULL, *prev = NULL;
    char *w = p->text;
    for (size_t at = 1; len && at <= len;) {
        char *seg = w;
        size_t n;
        if (next_segment(path, len, &at, seg, &n, errstr, errstr_size) != 0)
            goto err;
        w += n + 1;
        if (mapf) {
            step *st = &p->steps[p->n - 1];
            st->has_key = true;
            if (parse_key(st, &mapf->message->fields[0], seg, n) < 0) {
                snprintf(errstr, errstr_size, "protobuf path %.200s: \"%.64s\" "
                         "is not a key of map %s", path, seg, mapf->name);
                goto err;
            }
            const fm_proto_field *vf = &mapf->message->fields[1];
            m = vf->type == FM_PROTO_MESSAGE ? vf->message : NULL;
            prev = vf;
            mapf = NULL;
            continue;
        }
        if (!m && prev->label == FM_PROTO_REPEATED) {
            snprintf(errstr, errstr_size, "protobuf path %.200s: it goes "
                     "through repeated field %s of message %s (only a "
                     "map's key may follow a repeated field)", path,
                     prev->name, p->steps[p->n - 1].in->full_name);
            goto err;
        }
        if (!m) {
            snprintf(errstr, errstr_size, "protobuf path %.200s: %s%s is "
                     "not a message, so has no field %.64s", path,
                     prev->number == 2 && p->steps[p->n - 1].has_key
                         ? "the value of map "
                         : "field ",
                     prev->number == 2 && p->steps[p->n - 1].has_key
                         ? p->steps[p->n - 1].field->name
                         : prev->name,
                     seg);
            goto err;
        }
        if (p->n == FM_PB_MAX_PATH) {
            snprintf(errstr, errstr_size, "protobuf path %.200s: more than "
                     "%d fields", path, FM_PB_MAX_PATH);
            goto err;
        }
        const fm_proto_field *f = fm_proto_message_field(m, seg);
        if (!f) {
            snprintf(errstr, errstr_size, "protobuf path %.200s: message %s "
                     "has no field %.64s", path, m->full_name, seg);
            goto err;
        }
        p->steps[p->n++] = (step){.in = m, .field = f};
        prev = f;
        if (f->map)
            mapf = f;
        m = f->type == FM_PROTO_MESSAGE && f->label != FM_PROTO_REPEATED
                ? f->message
                : NULL;
    }
    return p;
err:
    fm_pb_path_destroy(p);
    return NULL;
}

void fm_pb_path_destroy(fm_pb_path *p)
{
    free(p);
}
