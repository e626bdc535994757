/*
 * proto_schema.c -- the `.proto` parser of fm_proto.h: a tokenizer, a
 * recursive-descent parser that builds the model in an arena, then a pass
 * that resolves imports and named types with protoc's scoping rules, and
 * Confluent's message-index walk.
 *
 * Everything the schema holds lives in one arena freed at once; the arena
 * has a ceiling, and every count input can grow (files, definitions,
 * fields, depth, identifier length) is checked before its memory is taken.
 * Lists grow by doubling inside the arena while a message is parsed; the
 * waste is bounded by the list's final size.
 */
#include "fm_proto.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- arena */

/* The arena's ceiling: far above what FM_PROTO_MAX_INPUT of text builds. */
#define ARENA_MAX ((size_t)256 << 20)
#define CHUNK_SIZE ((size_t)64 << 10)

typedef struct chunk {
    struct chunk *next;
    size_t used, cap;
    max_align_t data[];
} chunk;

typedef struct arena {
    chunk *head;
    size_t total;
} arena;

static void *arena_alloc(arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n == 0)
        n = 16;
    chunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > CHUNK_SIZE ? n : CHUNK_SIZE;
        if (cap > ARENA_MAX - a->total)
            return NULL;
        c = malloc(sizeof(*c) + cap);
        if (!c)
            return NULL;
        c->used = 0;
        c->cap = cap;
        c->next = a->head;
        a->head = c;
        a->total += cap;
    }
    void *p = (char *)c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

static void arena_free(arena *a)
{
    chunk *c = a->head;
    while (c) {
        chunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
    a->total = 0;
}

/* Room for one more item in an arena list of *n items of size sz. */
static bool list_room(arena *a, void **items, size_t n, size_t *cap,
                      size_t sz)
{
    if (n < *cap)
        return true;
    size_t ncap = *cap ? *cap * 2 : 4;
    void *p = arena_alloc(a, ncap * sz);
    if (!p)
        return false;
    if (n)
        memcpy(p, *items, n * sz);
    *items = p;
    *cap = ncap;
    return true;
}

/* ------------------------------------------------------------- the model */

typedef enum sym_kind { SYM_MESSAGE, SYM_ENUM, SYM_PACKAGE } sym_kind;

typedef struct symbol {
    const char *name; /* full name, no leading dot; NULL: empty slot */
    sym_kind kind;
    void *def;        /* fm_proto_message or fm_proto_enum */
    int file;         /* index of the defining file; -1 for packages */
} symbol;

/* A named type to resolve once every file is parsed. */
typedef struct pending {
    fm_proto_message *scope;
    int field;        /* index in scope's fields, after sorting: by number */
    uint32_t number;
    int file;
    int line, col;
} pending;

typedef struct import {
    const char *path;
    bool public_;
    int line, col;
    int file;         /* resolved: the imported file's index */
} import;

typedef struct file_state {
    fm_proto_file f;
    import *imports;
    size_t n_imports, cap_imports;
    size_t cap_messages, cap_enums;
} file_state;

struct fm_proto_schema {
    arena a;
    file_state *files;
    size_t n_files, main;
    symbol *syms;      /* open addressing, cap_syms a power of two */
    size_t n_syms, cap_syms;
    size_t n_defs, n_fields;
};

/* ------------------------------------------------------------- tokenizer */

typedef enum tok_kind { T_END, T_IDENT, T_NUM, T_STR, T_SYM } tok_kind;

typedef struct token {
    tok_kind kind;
    const char *p;
    size_t n;
    int line, col;
} token;

typedef struct parser {
    fm_proto_schema *s;
    int file;
    const char *name;
    const char *text;
    size_t len, pos;
    int line, col;
    token t;
    char *errstr;
    size_t errstr_size;
    bool failed;
    pending *pend;     /* the schema's pending list, shared by files */
    size_t n_pend, cap_pend;
} parser;

static int perr_at(parser *P, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int perr_at(parser *P, int line, int col, const char *fmt, ...)
{
    if (P->failed)
        return -1;
    P->failed = true;
    int n = snprintf(P->errstr, P->errstr_size, "protobuf schema: %s:%d:%d: ",
                     P->name, line, col);
    if (n >= 0 && (size_t)n < P->errstr_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(P->errstr + n, P->errstr_size - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* What the current token is, for "found ..." in messages. */
static const char *tok_desc(const token *t, char *buf, size_t size)
{
    if (t->kind == T_END)
        return "end of file";
    int n = t->n > 40 ? 40 : (int)t->n;
    snprintf(buf, size, "\"%.*s%s\"", n, t->p, t->n > 40 ? "..." : "");
    return buf;
}

static int expected(parser *P, const char *what)
{
    char b[64];
    return perr_at(P, P->t.line, P->t.col, "expected %s, found %s", what,
                   tok_desc(&P->t, b, sizeof(b)));
}

static int nomem(parser *P)
{
    return perr_at(P, P->t.line, P->t.col, "out of memory (or the schema "
                   "is past its size bound)");
}

static void adv(parser *P, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (P->text[P->pos] == '\n') {
            P->line++;
            P->col = 1;
        } else {
            P->col++;
        }
        P->pos++;
    }
}

static bool is_alpha(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_digit(int c)
{
    return c >= '0' && c <= '9';
}

/* Reads the next token into P->t; -1 on a lexical error. */
static int next(parser *P)
{
    const char *s = P->text;
    for (;;) {
        if (P->pos >= P->len) {
            P->t = (token){T_END, s + P->len, 0, P->line, P->col};
            return 0;
        }
        char c = s[P->pos];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
            c == '\f') {
            adv(P, 1);
        } else if (c == '/' && P->pos + 1 < P->len && s[P->pos + 1] == '/') {
            while (P->pos < P->len && s[P->pos] != '\n')
                adv(P, 1);
        } else if (c == '/' && P->pos + 1 < P->len && s[P->pos + 1] == '*') {
            int line = P->line, col = P->col;
            adv(P, 2);
            for (;;) {
                if (P->pos + 1 >= P->len)
                    return perr_at(P, line, col, "unterminated /* comment");
                if (s[P->pos] == '*' && s[P->pos + 1] == '/')
                    break;
                adv(P, 1);
            }
            adv(P, 2);
        } else {
            break;
        }
    }
    size_t start = P->pos;
    token t = {T_SYM, s + start, 1, P->line, P->col};
    unsigned char c = (unsigned char)s[start];
    if (is_alpha(c)) {
        size_t e = start;
        while (e < P->len && (is_alpha(s[e]) || is_digit(s[e])))
            e++;
        if (e - start > FM_PROTO_MAX_IDENT)
            return perr_at(P, t.line, t.col, "identifier longer than %d "
                           "bytes", FM_PROTO_MAX_IDENT);
        t.kind = T_IDENT;
        t.n = e - start;
    } else if (is_digit(c) ||
               (c == '.' && start + 1 < P->len && is_digit(s[start + 1]))) {
        size_t e = start;
        bool hex = c == '0' && e + 1 < P->len &&
                   (s[e + 1] == 'x' || s[e + 1] == 'X');
        while (e < P->len) {
            char d = s[e];
            if (is_alpha(d) || is_digit(d) || d == '.') {
                e++;
            } else if ((d == '+' || d == '-') && !hex &&
                       (s[e - 1] == 'e' || s[e - 1] == 'E')) {
                e++;
            } else {
                break;
            }
        }
        t.kind = T_NUM;
        t.n = e - start;
    } else if (c == '"' || c == '\'') {
        size_t e = start + 1;
        for (;;) {
            if (e >= P->len || s[e] == '\n' || s[e] == '\0')
                return perr_at(P, t.line, t.col, "unterminated string");
            if (s[e] == '\\') {
                e += 2;
                continue;
            }
            if (s[e] == (char)c)
                break;
            e++;
        }
        t.kind = T_STR;
        t.n = e + 1 - start;
    } else if (!strchr("{}[]()<>=;,.:-+/", c) || c == '\0') {
        return perr_at(P, t.line, t.col, "unexpected character 0x%02x", c);
    }
    adv(P, t.n);
    P->t = t;
    return 0;
}

static bool is_sym(const parser *P, char c)
{
    return P->t.kind == T_SYM && P->t.p[0] == c;
}

static bool is_word(const parser *P, const char *w)
{
    size_t n = strlen(w);
    return P->t.kind == T_IDENT && P->t.n == n && memcmp(P->t.p, w, n) == 0;
}

static int expect_sym(parser *P, char c)
{
    if (!is_sym(P, c)) {
        char what[8];
        snprintf(what, sizeof(what), "'%c'", c);
        return expected(P, what);
    }
    return next(P);
}

/* Whether the token after the current one is symbol c (a look ahead:
 * the tokenizer's place is put back). */
static bool next_is_sym(parser *P, char c)
{
    size_t pos = P->pos;
    int line = P->line, col = P->col;
    token t = P->t;
    bool failed = P->failed;
    bool yes = next(P) == 0 && is_sym(P, c);
    P->pos = pos;
    P->line = line;
    P->col = col;
    P->t = t;
    P->failed = failed;
    if (!failed && P->errstr_size)
        P->errstr[0] = '\0';
    return yes;
}

static char *copy_tok(parser *P, const char *p, size_t n)
{
    char *c = arena_alloc(&P->s->a, n + 1);
    if (!c) {
        nomem(P);
        return NULL;
    }
    memcpy(c, p, n);
    c[n] = '\0';
    return c;
}

/* An identifier, copied; NULL on error. */
static char *ident(parser *P, const char *what)
{
    if (P->t.kind != T_IDENT) {
        expected(P, what);
        return NULL;
    }
    char *c = copy_tok(P, P->t.p, P->t.n);
    if (!c || next(P) < 0)
        return NULL;
    return c;
}

/* A dotted name (a.b.c), or with lead_dot a type name (.a.b too), copied
 * as written; NULL on error. */
static char *dotted(parser *P, const char *what, bool lead_dot)
{
    const char *start = P->t.p;
    int line = P->t.line, col = P->t.col;
    if (lead_dot && is_sym(P, '.') && next(P) < 0)
        return NULL;
    for (;;) {
        if (P->t.kind != T_IDENT) {
            expected(P, what);
            return NULL;
        }
        const char *end = P->t.p + P->t.n;
        if (next(P) < 0)
            return NULL;
        if (!is_sym(P, '.') || P->t.p != end) {
            size_t n = (size_t)(end - start);
            if (n > 4 * FM_PROTO_MAX_IDENT) {
                perr_at(P, line, col, "name longer than %d bytes",
                        4 * FM_PROTO_MAX_IDENT);
                return NULL;
            }
            return copy_tok(P, start, n);
        }
        if (next(P) < 0)
            return NULL;
    }
}

/* A string literal's value (adjacent literals joined), unescaped, copied;
 * NULL on error. */
static char *string_lit(parser *P, const char *what)
{
    if (P->t.kind != T_STR) {
        expected(P, what);
        return NULL;
    }
    /* Each literal's value is no longer than its text: the buffer grows
     * by that much per literal. */
    size_t total = 0, n = 0;
    char *out = NULL;
    while (P->t.kind == T_STR) {
        const char *q = P->t.p + 1, *end = P->t.p + P->t.n - 1;
        total += (size_t)(end - q);
        char *nout = arena_alloc(&P->s->a, total + 1);
        if (!nout) {
            nomem(P);
            return NULL;
        }
        if (n)
            memcpy(nout, out, n);
        out = nout;
        while (q < end) {
            char c = *q++;
            if (c != '\\') {
                out[n++] = c;
                continue;
            }
            c = *q++;
            switch (c) {
            case 'n': out[n++] = '\n'; break;
            case 't': out[n++] = '\t'; break;
            case 'r': out[n++] = '\r'; break;
            case 'a': out[n++] = '\a'; break;
            case 'b': out[n++] = '\b'; break;
            case 'f': out[n++] = '\f'; break;
            case 'v': out[n++] = '\v'; break;
            case 'x': case 'X': {
                unsigned v = 0;
                for (int k = 0; k < 2 && q < end; k++, q++) {
                    char h = *q;
                    int d = is_digit(h) ? h - '0'
                            : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                            : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
                    if (d < 0)
                        break;
                    v = v * 16 + (unsigned)d;
                }
                out[n++] = (char)v;
                break;
            }
            default:
                if (c >= '0' && c <= '7') {
                    unsigned v = (unsigned)(c - '0');
                    for (int k = 0; k < 2 && q < end && *q >= '0' && *q <= '7';
                         k++)
                        v = v * 8 + (unsigned)(*q++ - '0');
                    out[n++] = (char)v;
                } else {
                    out[n++] = c;
                }
            }
        }
        if (next(P) < 0)
            return NULL;
    }
    out[n] = '\0';
    if (strlen(out) != n) {
        perr_at(P, P->t.line, P->t.col, "NUL byte in %s", what);
        return NULL;
    }
    return out;
}

/* An integer literal (decimal, 0x hex, 0 octal) of at most max, with an
 * optional '-' when neg_ok; -1 on error. */
static int int_lit(parser *P, const char *what, bool neg_ok, uint64_t max,
                   int64_t *out)
{
    bool neg = false;
    int line = P->t.line, col = P->t.col;
    if (neg_ok && is_sym(P, '-')) {
        neg = true;
        if (next(P) < 0)
            return -1;
    }
    if (P->t.kind != T_NUM)
        return expected(P, what);
    const char *p = P->t.p, *e = P->t.p + P->t.n;
    unsigned base = 10;
    if (e - p > 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        base = 16;
        p += 2;
    } else if (e - p > 1 && p[0] == '0') {
        base = 8;
        p++;
    }
    uint64_t v = 0;
    for (; p < e; p++) {
        char c = *p;
        unsigned d = is_digit(c) ? (unsigned)(c - '0')
                     : (c >= 'a' && c <= 'f') ? (unsigned)(c - 'a' + 10)
                     : (c >= 'A' && c <= 'F') ? (unsigned)(c - 'A' + 10) : 99;
        if (d >= base)
            return expected(P, what);
        if (v > (UINT64_MAX - d) / base)
            return perr_at(P, line, col, "%s out of range", what);
        v = v * base + d;
    }
    uint64_t lim = neg ? max + 1 : max;
    if (v > lim)
        return perr_at(P, line, col, "%s out of range", what);
    *out = neg ? -(int64_t)(v - 1) - 1 : (int64_t)v;
    return next(P);
}

/* Skips tokens to the ';' that ends a statement (consumed), over balanced
 * brackets: options' aggregate values, reserved ranges, extensions. */
static int skip_statement(parser *P)
{
    size_t depth = 0;
    for (;;) {
        if (P->t.kind == T_END)
            return expected(P, "';'");
        if (P->t.kind == T_SYM) {
            char c = P->t.p[0];
            if (c == ';' && depth == 0)
                return next(P);
            if (c == '{' || c == '[' || c == '(')
                depth++;
            if (c == '}' || c == ']' || c == ')') {
                if (depth == 0)
                    return expected(P, "';'");
                depth--;
            }
        }
        if (next(P) < 0)
            return -1;
    }
}

/* Skips a balanced group that starts at the current open bracket. */
static int skip_balanced(parser *P, char open, char close)
{
    if (!is_sym(P, open)) {
        char what[8];
        snprintf(what, sizeof(what), "'%c'", open);
        return expected(P, what);
    }
    size_t depth = 0;
    for (;;) {
        if (P->t.kind == T_END) {
            char what[8];
            snprintf(what, sizeof(what), "'%c'", close);
            return expected(P, what);
        }
        if (P->t.kind == T_SYM) {
            char c = P->t.p[0];
            if (c == '{' || c == '[' || c == '(')
                depth++;
            else if (c == '}' || c == ']' || c == ')')
                depth--;
            if (depth == 0) {
                if (c != close) {
                    char what[8];
                    snprintf(what, sizeof(what), "'%c'", close);
                    return expected(P, what);
                }
                return next(P);
            }
        }
        if (next(P) < 0)
            return -1;
    }
}

/* In a { } block: 1 at an item to parse, 0 at the closing '}' (not
 * consumed), -1 at the end of the file; empty statements are skipped. */
static int block_item(parser *P)
{
    for (;;) {
        if (is_sym(P, '}'))
            return 0;
        if (P->t.kind == T_END)
            return expected(P, "'}'");
        if (!is_sym(P, ';'))
            return 1;
        if (next(P) < 0)
            return -1;
    }
}

/* -------------------------------------------------------------- parsing */

static const struct {
    const char *name;
    fm_proto_type type;
} scalars[] = {
    {"double", FM_PROTO_DOUBLE},     {"float", FM_PROTO_FLOAT},
    {"int64", FM_PROTO_INT64},       {"uint64", FM_PROTO_UINT64},
    {"int32", FM_PROTO_INT32},       {"fixed64", FM_PROTO_FIXED64},
    {"fixed32", FM_PROTO_FIXED32},   {"bool", FM_PROTO_BOOL},
    {"string", FM_PROTO_STRING},     {"bytes", FM_PROTO_BYTES},
    {"uint32", FM_PROTO_UINT32},     {"sfixed32", FM_PROTO_SFIXED32},
    {"sfixed64", FM_PROTO_SFIXED64}, {"sint32", FM_PROTO_SINT32},
    {"sint64", FM_PROTO_SINT64},
};

static fm_proto_type scalar_type(const char *name)
{
    for (size_t i = 0; i < sizeof(scalars) / sizeof(scalars[0]); i++)
        if (strcmp(scalars[i].name, name) == 0)
            return scalars[i].type;
    return 0;
}

/* A message while it is parsed: its lists grow in the arena. */
typedef struct msg_build {
    fm_proto_message *m;
    size_t cap_fields, cap_messages, cap_enums, cap_oneofs;
} msg_build;

static int parse_message(parser *P, fm_proto_message *parent,
                         const char *scope, int depth, fm_proto_message **out);
static int parse_enum(parser *P, const char *scope, int depth,
                      fm_proto_enum **out);

static char *join(parser *P, const char *scope, const char *name)
{
    size_t a = strlen(scope), b = strlen(name);
    char *c = arena_alloc(&P->s->a, a + b + 2);
    if (!c) {
        nomem(P);
        return NULL;
    }
    if (a) {
        memcpy(c, scope, a);
        c[a++] = '.';
    }
    memcpy(c + a, name, b + 1);
    return c;
}

/* Counts one more definition (message, enum) or field (field, enum
 * value) against its bound, before anything is allocated for it. */
static int count_def(parser *P, bool field)
{
    size_t *n = field ? &P->s->n_fields : &P->s->n_defs;
    size_t max = field ? FM_PROTO_MAX_FIELDS : FM_PROTO_MAX_DEFS;
    if (*n >= max)
        return perr_at(P, P->t.line, P->t.col, "more than %zu %s", max,
                       field ? "fields and enum values"
                             : "messages and enums");
    (*n)++;
    return 0;
}

/* A new field in b, at the current token's place. */
static fm_proto_field *add_field(parser *P, msg_build *b)
{
    fm_proto_message *m = b->m;
    if (count_def(P, true) < 0)
        return NULL;
    if (!list_room(&P->s->a, (void **)&m->fields, m->n_fields, &b->cap_fields,
                   sizeof(*m->fields))) {
        nomem(P);
        return NULL;
    }
    fm_proto_field *f = &m->fields[m->n_fields++];
    memset(f, 0, sizeof(*f));
    f->oneof = -1;
    f->line = P->t.line;
    f->col = P->t.col;
    return f;
}

/* A field's number: 1 to 2^29-1, not 19000-19999 (protobuf's own). */
static int field_number(parser *P, uint32_t *out)
{
    int line = P->t.line, col = P->t.col;
    int64_t v;
    if (int_lit(P, "field number", false, 536870911, &v) < 0)
        return -1;
    if (v < 1 || (v >= 19000 && v <= 19999))
        return perr_at(P, line, col, "field number %lld is reserved or "
                       "out of range", (long long)v);
    *out = (uint32_t)v;
    return 0;
}

/* '=' number [options] ';' after a field's name. */
static int field_tail(parser *P, fm_proto_field *f)
{
    if (expect_sym(P, '=') < 0 || field_number(P, &f->number) < 0)
        return -1;
    if (is_sym(P, '[') && skip_balanced(P, '[', ']') < 0)
        return -1;
    return expect_sym(P, ';');
}

/* The type of a field: a scalar, or a name resolved later. */
static int field_type(parser *P, fm_proto_field *f)
{
    char *t = dotted(P, "field type", true);
    if (!t)
        return -1;
    f->type = scalar_type(t);
    if (!f->type) {
        f->type = FM_PROTO_MESSAGE; /* or ENUM, once resolved */
        f->type_name = t;
    }
    return 0;
}

/* protoc's entry name: "my_map" -> "MyMapEntry". */
static char *entry_name(parser *P, const char *field)
{
    size_t n = strlen(field);
    char *c = arena_alloc(&P->s->a, n + 6);
    if (!c) {
        nomem(P);
        return NULL;
    }
    size_t w = 0;
    bool up = true;
    for (size_t i = 0; i < n; i++) {
        char ch = field[i];
        if (ch == '_') {
            up = true;
            continue;
        }
        c[w++] = up && ch >= 'a' && ch <= 'z' ? (char)(ch - 'a' + 'A') : ch;
        up = false;
    }
    memcpy(c + w, "Entry", 6);
    return c;
}

static int add_nested_message(parser *P, msg_build *b, fm_proto_message *n)
{
    fm_proto_message *m = b->m;
    if (!list_room(&P->s->a, (void **)&m->messages, m->n_messages,
                   &b->cap_messages, sizeof(*m->messages)))
        return nomem(P);
    m->messages[m->n_messages++] = n;
    return 0;
}

/* map<K, V> name = N [opts]; -- the field and its entry message. */
static int parse_map(parser *P, msg_build *b, int depth)
{
    int line = P->t.line, col = P->t.col;
    if (next(P) < 0 || expect_sym(P, '<') < 0)
        return -1;
    int kline = P->t.line, kcol = P->t.col;
    char *k = dotted(P, "map key type", true);
    if (!k)
        return -1;
    fm_proto_type kt = scalar_type(k);
    if (!kt || kt == FM_PROTO_DOUBLE || kt == FM_PROTO_FLOAT ||
        kt == FM_PROTO_BYTES)
        return perr_at(P, kline, kcol, "map key type %s is not an integer, "
                       "bool or string type", k);
    if (expect_sym(P, ',') < 0)
        return -1;
    if (depth + 1 > FM_PROTO_MAX_DEPTH)
        return perr_at(P, line, col, "messages nested deeper than %d",
                       FM_PROTO_MAX_DEPTH);
    if (count_def(P, false) < 0)
        return -1;
    fm_proto_message *e = arena_alloc(&P->s->a, sizeof(*e));
    fm_proto_field *ef = arena_alloc(&P->s->a, 2 * sizeof(*ef));
    if (!e || !ef)
        return nomem(P);
    ef[0] = (fm_proto_field){.name = "key", .number = 1,
                             .label = FM_PROTO_OPTIONAL, .type = kt,
                             .oneof = -1, .line = kline, .col = kcol};
    ef[1] = (fm_proto_field){.name = "value", .number = 2,
                             .label = FM_PROTO_OPTIONAL, .oneof = -1,
                             .line = P->t.line, .col = P->t.col};
    int vline = P->t.line, vcol = P->t.col;
    if (is_word(P, "map"))
        return perr_at(P, vline, vcol, "a map's value cannot be a map");
    if (field_type(P, &ef[1]) < 0 || expect_sym(P, '>') < 0)
        return -1;
    fm_proto_field *f = add_field(P, b);
    if (!f)
        return -1;
    f->line = line;
    f->col = col;
    f->name = ident(P, "field name");
    if (!f->name || field_tail(P, f) < 0)
        return -1;
    f->label = FM_PROTO_REPEATED;
    f->type = FM_PROTO_MESSAGE;
    f->map = true;
    f->message = e;
    e->name = entry_name(P, f->name);
    if (!e->name)
        return -1;
    e->full_name = join(P, b->m->full_name, e->name);
    if (!e->full_name)
        return -1;
    e->fields = ef;
    e->n_fields = 2;
    e->map_entry = true;
    e->line = line;
    e->col = col;
    e->parent = b->m;
    e->file = &P->s->files[P->file].f;
    if (count_def(P, true) < 0 || count_def(P, true) < 0)
        return -1;
    /* The value's named type resolves from the entry, as protoc does. */
    if (ef[1].type_name) {
        if (!list_room(&P->s->a, (void **)&P->pend, P->n_pend, &P->cap_pend,
                       sizeof(*P->pend)))
            return nomem(P);
        P->pend[P->n_pend++] = (pending){e, 1, 2, P->file, vline, vcol};
    }
    return add_nested_message(P, b, e);
}

/* [label] type name = N [opts]; or a group (an error). */
static int parse_field(parser *P, msg_build *b, int oneof)
{
    const fm_proto_file *file = &P->s->files[P->file].f;
    int line = P->t.line, col = P->t.col;
    fm_proto_label label;
    if (oneof >= 0) {
        label = FM_PROTO_OPTIONAL;
    } else if (is_word(P, "optional")) {
        label = FM_PROTO_OPTIONAL;
    } else if (is_word(P, "required")) {
        label = FM_PROTO_REQUIRED;
    } else if (is_word(P, "repeated")) {
        label = FM_PROTO_REPEATED;
    } else {
        label = file->syntax == 3 ? FM_PROTO_IMPLICIT : FM_PROTO_OPTIONAL;
        goto typed;
    }
    if (oneof < 0 && next(P) < 0)
        return -1;
    if (oneof >= 0 && (is_word(P, "optional") || is_word(P, "required") ||
                       is_word(P, "repeated")))
        return expected(P, "a oneof field without a label");
typed:
    if (is_word(P, "group"))
        return perr_at(P, P->t.line, P->t.col, "proto2 groups are not "
                       "supported (message %s)", b->m->full_name);
    fm_proto_field *f = add_field(P, b);
    if (!f)
        return -1;
    f->line = line;
    f->col = col;
    f->label = label;
    f->oneof = oneof;
    int tline = P->t.line, tcol = P->t.col;
    if (field_type(P, f) < 0)
        return -1;
    f->name = ident(P, "field name");
    if (!f->name || field_tail(P, f) < 0)
        return -1;
    if (f->type_name) {
        if (!list_room(&P->s->a, (void **)&P->pend, P->n_pend, &P->cap_pend,
                       sizeof(*P->pend)))
            return nomem(P);
        P->pend[P->n_pend++] =
            (pending){b->m, -1, f->number, P->file, tline, tcol};
    }
    return 0;
}

static int parse_oneof(parser *P, msg_build *b)
{
    fm_proto_message *m = b->m;
    if (next(P) < 0)
        return -1;
    const char *name = ident(P, "oneof name");
    if (!name)
        return -1;
    if (!list_room(&P->s->a, (void **)&m->oneofs, m->n_oneofs,
                   &b->cap_oneofs, sizeof(*m->oneofs)))
        return nomem(P);
    int idx = (int)m->n_oneofs;
    m->oneofs[m->n_oneofs++] = name;
    if (expect_sym(P, '{') < 0)
        return -1;
    int more;
    while ((more = block_item(P)) > 0) {
        if (is_word(P, "option")) {
            if (skip_statement(P) < 0)
                return -1;
        } else if (parse_field(P, b, idx) < 0) {
            return -1;
        }
    }
    if (more < 0)
        return -1;
    return next(P);
}

/* Whether field x is declared after field y. */
static bool later(const fm_proto_field *x, const fm_proto_field *y)
{
    return x->line > y->line || (x->line == y->line && x->col > y->col);
}

static int by_number(const void *a, const void *b)
{
    const fm_proto_field *x = a, *y = b;
    return (x->number > y->number) - (x->number < y->number);
}

static int by_name(const void *a, const void *b)
{
    const fm_proto_field *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

/* Sorts the fields by number, refusing duplicate numbers and names
 * (named at the later field). */
static int finish_message(parser *P, msg_build *b)
{
    fm_proto_message *m = b->m;
    if (m->n_fields == 0)
        return 0;
    qsort(m->fields, m->n_fields, sizeof(*m->fields), by_number);
    for (size_t i = 1; i < m->n_fields; i++) {
        const fm_proto_field *x = &m->fields[i - 1], *y = &m->fields[i];
        if (x->number != y->number)
            continue;
        if (later(x, y))
            x = y, y = &m->fields[i - 1];
        return perr_at(P, y->line, y->col, "message %s: fields %s and %s "
                       "share number %u", m->full_name, x->name, y->name,
                       y->number);
    }
    const fm_proto_field **byn =
        arena_alloc(&P->s->a, m->n_fields * sizeof(*byn));
    if (!byn)
        return nomem(P);
    for (size_t i = 0; i < m->n_fields; i++)
        byn[i] = &m->fields[i];
    qsort(byn, m->n_fields, sizeof(*byn), by_name);
    for (size_t i = 1; i < m->n_fields; i++) {
        const fm_proto_field *y = later(byn[i - 1], byn[i]) ? byn[i - 1]
                                                           : byn[i];
        if (strcmp(byn[i]->name, byn[i - 1]->name) == 0)
            return perr_at(P, y->line, y->col, "message %s: two fields "
                           "named %s", m->full_name, y->name);
    }
    return 0;
}

static int parse_message(parser *P, fm_proto_message *parent,
                         const char *scope, int depth, fm_proto_message **out)
{
    int line = P->t.line, col = P->t.col;
    if (depth > FM_PROTO_MAX_DEPTH)
        return perr_at(P, line, col, "messages nested deeper than %d",
                       FM_PROTO_MAX_DEPTH);
    if (count_def(P, false) < 0 || next(P) < 0)
        return -1;
    msg_build b = {0};
    b.m = arena_alloc(&P->s->a, sizeof(*b.m));
    if (!b.m)
        return nomem(P);
    fm_proto_message *m = b.m;
    m->line = line;
    m->col = col;
    m->parent = parent;
    m->file = &P->s->files[P->file].f;
    m->name = ident(P, "message name");
    if (!m->name)
        return -1;
    m->full_name = join(P, scope, m->name);
    if (!m->full_name || expect_sym(P, '{') < 0)
        return -1;
    size_t first_pend = P->n_pend;
    int more;
    while ((more = block_item(P)) > 0) {
        int rc = 0;
        if (is_word(P, "message")) {
            fm_proto_message *n;
            rc = parse_message(P, m, m->full_name, depth + 1, &n);
            if (rc == 0)
                rc = add_nested_message(P, &b, n);
        } else if (is_word(P, "enum")) {
            fm_proto_enum *e;
            rc = parse_enum(P, m->full_name, depth + 1, &e);
            if (rc == 0 && !list_room(&P->s->a, (void **)&m->enums, m->n_enums,
                                      &b.cap_enums, sizeof(*m->enums)))
                rc = nomem(P);
            if (rc == 0)
                m->enums[m->n_enums++] = e;
        } else if (is_word(P, "option") || is_word(P, "reserved") ||
                   is_word(P, "extensions")) {
            rc = skip_statement(P);
        } else if (is_word(P, "extend")) {
            rc = next(P);
            if (rc == 0 && !dotted(P, "extended type", true))
                rc = -1;
            if (rc == 0)
                rc = skip_balanced(P, '{', '}');
        } else if (is_word(P, "oneof")) {
            rc = parse_oneof(P, &b);
        } else if (is_word(P, "map") && next_is_sym(P, '<')) {
            rc = parse_map(P, &b, depth);
        } else {
            rc = parse_field(P, &b, -1);
        }
        if (rc < 0)
            return -1;
    }
    if (more < 0 || next(P) < 0 || finish_message(P, &b) < 0)
        return -1;
    /* The pending types of this message's own fields point at their
     * numbers; now that the fields are sorted, find their places. */
    for (size_t i = first_pend; i < P->n_pend; i++) {
        pending *pd = &P->pend[i];
        if (pd->scope != m || pd->field >= 0)
            continue;
        const fm_proto_field *f = fm_proto_message_field_number(m, pd->number);
        pd->field = (int)(f - m->fields);
    }
    *out = m;
    return 0;
}

/* Orders indexes into an enum's values by number, then by index. */
static int by_value(const void *a, const void *b, void *values)
{
    const fm_proto_enum_value *v = values;
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    if (v[i].number != v[j].number)
        return (v[i].number > v[j].number) - (v[i].number < v[j].number);
    return (i > j) - (i < j);
}

static int parse_enum(parser *P, const char *scope, int depth,
                      fm_proto_enum **out)
{
    int line = P->t.line, col = P->t.col;
    if (depth > FM_PROTO_MAX_DEPTH)
        return perr_at(P, line, col, "enums nested deeper than %d",
                       FM_PROTO_MAX_DEPTH);
    if (count_def(P, false) < 0 || next(P) < 0)
        return -1;
    fm_proto_enum *e = arena_alloc(&P->s->a, sizeof(*e));
    if (!e)
        return nomem(P);
    e->file = &P->s->files[P->file].f;
    e->line = line;
    e->col = col;
    e->name = ident(P, "enum name");
    if (!e->name)
        return -1;
    e->full_name = join(P, scope, e->name);
    if (!e->full_name || expect_sym(P, '{') < 0)
        return -1;
    size_t cap = 0;
    int more;
    while ((more = block_item(P)) > 0) {
        if (is_word(P, "option")) {
            /* allow_alias is the one enum option that matters. */
            if (next(P) < 0)
                return -1;
            if (is_word(P, "allow_alias")) {
                if (next(P) < 0 || expect_sym(P, '=') < 0)
                    return -1;
                if (is_word(P, "true"))
                    e->allow_alias = true;
                else if (!is_word(P, "false"))
                    return expected(P, "true or false");
                if (next(P) < 0 || expect_sym(P, ';') < 0)
                    return -1;
            } else if (skip_statement(P) < 0) {
                return -1;
            }
            continue;
        }
        if (is_word(P, "reserved")) {
            if (skip_statement(P) < 0)
                return -1;
            continue;
        }
        if (count_def(P, true) < 0)
            return -1;
        if (!list_room(&P->s->a, (void **)&e->values, e->n_values, &cap,
                       sizeof(*e->values)))
            return nomem(P);
        fm_proto_enum_value *v = &e->values[e->n_values];
        int64_t num;
        v->name = ident(P, "enum value name");
        if (!v->name || expect_sym(P, '=') < 0 ||
            int_lit(P, "enum value", true, INT32_MAX, &num) < 0)
            return -1;
        v->number = (int32_t)num;
        e->n_values++;
        if (is_sym(P, '[') && skip_balanced(P, '[', ']') < 0)
            return -1;
        if (expect_sym(P, ';') < 0)
            return -1;
    }
    if (more < 0)
        return -1;
    if (e->n_values == 0)
        return perr_at(P, line, col, "enum %s has no values", e->full_name);
    if (!e->allow_alias) {
        /* Duplicates show as neighbours once sorted by number. */
        size_t *ix = arena_alloc(&P->s->a, e->n_values * sizeof(*ix));
        if (!ix)
            return nomem(P);
        for (size_t i = 0; i < e->n_values; i++)
            ix[i] = i;
        qsort_r(ix, e->n_values, sizeof(*ix), by_value, e->values);
        for (size_t i = 1; i < e->n_values; i++) {
            const fm_proto_enum_value *x = &e->values[ix[i - 1]],
                                      *y = &e->values[ix[i]];
            if (x->number == y->number)
                return perr_at(P, line, col, "enum %s: %s and %s share "
                               "value %d without allow_alias", e->full_name,
                               x->name, y->name, y->number);
        }
    }
    *out = e;
    return next(P);
}

static int parse_file(parser *P)
{
    file_state *fs = &P->s->files[P->file];
    fm_proto_file *f = &fs->f;
    f->package = "";
    f->syntax = 2;
    if (next(P) < 0)
        return -1;
    bool first = true;
    while (P->t.kind != T_END) {
        int rc = 0;
        if (is_sym(P, ';')) {
            rc = next(P);
        } else if (is_word(P, "syntax") || is_word(P, "edition")) {
            bool edition = is_word(P, "edition");
            int line = P->t.line, col = P->t.col;
            if (!first)
                return perr_at(P, line, col, "%s must come first",
                               edition ? "edition" : "syntax");
            if (next(P) < 0 || expect_sym(P, '=') < 0)
                return -1;
            int vline = P->t.line, vcol = P->t.col;
            const char *v = string_lit(P, edition ? "edition" : "syntax");
            if (!v)
                return -1;
            if (edition)
                f->syntax = 0;
            else if (strcmp(v, "proto2") == 0)
                f->syntax = 2;
            else if (strcmp(v, "proto3") == 0)
                f->syntax = 3;
            else
                return perr_at(P, vline, vcol, "unknown syntax \"%s\" "
                               "(proto2 or proto3)", v);
            rc = expect_sym(P, ';');
        } else if (is_word(P, "package")) {
            if (f->package[0])
                return perr_at(P, P->t.line, P->t.col, "a second package");
            if (next(P) < 0)
                return -1;
            f->package = dotted(P, "package name", false);
            if (!f->package)
                return -1;
            rc = expect_sym(P, ';');
        } else if (is_word(P, "import")) {
            import im = {.line = P->t.line, .col = P->t.col, .file = -1};
            if (next(P) < 0)
                return -1;
            if (is_word(P, "public") || is_word(P, "weak")) {
                im.public_ = is_word(P, "public");
                if (next(P) < 0)
                    return -1;
            }
            im.path = string_lit(P, "import path");
            if (!im.path)
                return -1;
            if (!list_room(&P->s->a, (void **)&fs->imports, fs->n_imports,
                           &fs->cap_imports, sizeof(*fs->imports)))
                return nomem(P);
            fs->imports[fs->n_imports++] = im;
            rc = expect_sym(P, ';');
        } else if (is_word(P, "option")) {
            rc = skip_statement(P);
        } else if (is_word(P, "message")) {
            fm_proto_message *m;
            rc = parse_message(P, NULL, f->package, 1, &m);
            if (rc == 0 && !list_room(&P->s->a, (void **)&f->messages,
                                      f->n_messages, &fs->cap_messages,
                                      sizeof(*f->messages)))
                rc = nomem(P);
            if (rc == 0)
                f->messages[f->n_messages++] = m;
        } else if (is_word(P, "enum")) {
            fm_proto_enum *e;
            rc = parse_enum(P, f->package, 1, &e);
            if (rc == 0 && !list_room(&P->s->a, (void **)&f->enums,
                                      f->n_enums, &fs->cap_enums,
                                      sizeof(*f->enums)))
                rc = nomem(P);
            if (rc == 0)
                f->enums[f->n_enums++] = e;
        } else if (is_word(P, "service") || is_word(P, "extend")) {
            if (next(P) < 0 || !dotted(P, "name", true))
                return -1;
            rc = skip_balanced(P, '{', '}');
        } else {
            rc = expected(P, "message, enum, import, package, option, "
                          "service, extend or syntax");
        }
        if (rc < 0)
            return -1;
        first = false;
    }
    return 0;
}

/* ------------------------------------------------------- symbols, names */

static uint64_t name_hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static symbol *sym_find(const fm_proto_schema *s, const char *name, size_t n)
{
    if (!s->cap_syms)
        return NULL;
    size_t mask = s->cap_syms - 1;
    for (size_t i = name_hash(name, n) & mask;; i = (i + 1) & mask) {
        symbol *y = &s->syms[i];
        if (!y->name)
            return NULL;
        if (strlen(y->name) == n && memcmp(y->name, name, n) == 0)
            return y;
    }
}

/* Adds a symbol; an existing one of the same name is returned instead. */
static symbol *sym_add(fm_proto_schema *s, const char *name, sym_kind kind,
                       void *def, int file)
{
    size_t n = strlen(name);
    size_t mask = s->cap_syms - 1;
    for (size_t i = name_hash(name, n) & mask;; i = (i + 1) & mask) {
        symbol *y = &s->syms[i];
        if (!y->name) {
            *y = (symbol){name, kind, def, file};
            s->n_syms++;
            return NULL;
        }
        if (strcmp(y->name, name) == 0)
            return y;
    }
}

static int sym_clash(parser *P, const symbol *old, const char *name,
                     int line, int col)
{
    const fm_proto_message *m = old->def;
    const fm_proto_enum *e = old->def;
    int ol = old->kind == SYM_MESSAGE ? m->line : e->line;
    return perr_at(P, line, col, "%s is already defined (%s:%d)", name,
                   P->s->files[old->file].f.name, ol);
}

static int add_enum_syms(parser *P, fm_proto_enum *e, int file)
{
    symbol *old = sym_add(P->s, e->full_name, SYM_ENUM, e, file);
    return old ? sym_clash(P, old, e->full_name, e->line, e->col) : 0;
}

static int add_message_syms(parser *P, fm_proto_message *m, int file)
{
    symbol *old = sym_add(P->s, m->full_name, SYM_MESSAGE, m, file);
    if (old)
        return sym_clash(P, old, m->full_name, m->line, m->col);
    for (size_t i = 0; i < m->n_messages; i++)
        if (add_message_syms(P, m->messages[i], file) < 0)
            return -1;
    for (size_t i = 0; i < m->n_enums; i++)
        if (add_enum_syms(P, m->enums[i], file) < 0)
            return -1;
    return 0;
}

/* Every message, enum and package prefix of every file, in one table. */
static int build_symbols(parser *P)
{
    fm_proto_schema *s = P->s;
    size_t want = s->n_defs;
    for (size_t i = 0; i < s->n_files; i++) {
        want++;
        for (const char *q = s->files[i].f.package; *q; q++)
            want += *q == '.';
    }
    size_t cap = 16;
    while (cap < 2 * want)
        cap *= 2;
    s->syms = arena_alloc(&s->a, cap * sizeof(*s->syms));
    if (!s->syms)
        return nomem(P);
    s->cap_syms = cap;
    for (size_t i = 0; i < s->n_files; i++) {
        fm_proto_file *f = &s->files[i].f;
        P->name = f->name;
        for (size_t j = 0; j < f->n_messages; j++)
            if (add_message_syms(P, f->messages[j], (int)i) < 0)
                return -1;
        for (size_t j = 0; j < f->n_enums; j++)
            if (add_enum_syms(P, f->enums[j], (int)i) < 0)
                return -1;
    }
    /* Packages after types: a package part named like a type is the type
     * in lookups (protoc refuses the clash; nothing here needs to). */
    for (size_t i = 0; i < s->n_files; i++) {
        const char *pkg = s->files[i].f.package;
        size_t n = strlen(pkg);
        for (size_t e = 1; e <= n; e++) {
            if (e < n && pkg[e] != '.')
                continue;
            if (sym_find(s, pkg, e))
                continue;
            char *name = copy_tok(P, pkg, e);
            if (!name)
                return -1;
            sym_add(s, name, SYM_PACKAGE, NULL, -1);
        }
    }
    return 0;
}

/* Imports by name, then which files each file sees: itself, what it
 * imports, and what those import publicly, transitively. */
static int resolve_imports(parser *P, bool *vis)
{
    fm_proto_schema *s = P->s;
    size_t nf = s->n_files;
    for (size_t i = 0; i < nf; i++) {
        file_state *fs = &s->files[i];
        P->name = fs->f.name;
        for (size_t j = 0; j < fs->n_imports; j++) {
            import *im = &fs->imports[j];
            for (size_t k = 0; k < nf && im->file < 0; k++)
                if (strcmp(s->files[k].f.name, im->path) == 0)
                    im->file = (int)k;
            if (im->file < 0)
                return perr_at(P, im->line, im->col, "import \"%s\" is not "
                               "among the schema's files", im->path);
        }
    }
    /* A work list per file: direct imports, then public imports of every
     * file added, until nothing is added. */
    int *stack = arena_alloc(&s->a, nf * sizeof(*stack));
    if (!stack)
        return nomem(P);
    for (size_t i = 0; i < nf; i++) {
        bool *v = vis + i * nf;
        size_t top = 0;
        v[i] = true;
        const file_state *fs = &s->files[i];
        for (size_t j = 0; j < fs->n_imports; j++) {
            int k = fs->imports[j].file;
            if (!v[k]) {
                v[k] = true;
                stack[top++] = k;
            }
        }
        while (top) {
            const file_state *g = &s->files[stack[--top]];
            for (size_t j = 0; j < g->n_imports; j++) {
                int k = g->imports[j].file;
                if (g->imports[j].public_ && !v[k]) {
                    v[k] = true;
                    stack[top++] = k;
                }
            }
        }
    }
    return 0;
}

/* protoc's lookup of a type name written in scope `scope` (the full name
 * of the message holding the field). */
static const symbol *lookup(const fm_proto_schema *s, const char *scope,
                            const char *name)
{
    if (name[0] == '.')
        return sym_find(s, name + 1, strlen(name + 1));
    const char *dot = strchr(name, '.');
    size_t first = dot ? (size_t)(dot - name) : strlen(name);
    size_t sl = strlen(scope), nl = strlen(name);
    char buf[(FM_PROTO_MAX_IDENT + 1) * (FM_PROTO_MAX_DEPTH + 8) + 8];
    if (sl + 1 + nl >= sizeof(buf))
        return NULL;
    for (;;) {
        size_t at = sl;
        memcpy(buf, scope, sl);
        if (sl)
            buf[at++] = '.';
        memcpy(buf + at, name, first);
        const symbol *y = sym_find(s, buf, at + first);
        if (y && dot) {
            /* A compound name resolves in the first part's scope or not
             * at all (protoc); an enum has no nested types. */
            if (y->kind == SYM_ENUM)
                return NULL;
            memcpy(buf + at, name, nl);
            return sym_find(s, buf, at + nl);
        }
        if (y && y->kind != SYM_PACKAGE)
            return y;
        if (sl == 0)
            return NULL;
        while (sl > 0 && scope[sl - 1] != '.')
            sl--;
        if (sl > 0)
            sl--;
    }
}

static int resolve_types(parser *P, const bool *vis)
{
    fm_proto_schema *s = P->s;
    for (size_t i = 0; i < P->n_pend; i++) {
        const pending *pd = &P->pend[i];
        fm_proto_message *m = pd->scope;
        fm_proto_field *f = &m->fields[pd->field];
        P->name = s->files[pd->file].f.name;
        const symbol *y = lookup(s, m->full_name, f->type_name);
        if (!y || y->kind == SYM_PACKAGE)
            return perr_at(P, pd->line, pd->col, "type %s of field %s in "
                           "message %s is not defined", f->type_name, f->name,
                           m->full_name);
        if (!vis[(size_t)pd->file * s->n_files + (size_t)y->file])
            return perr_at(P, pd->line, pd->col, "type %s of field %s is "
                           "defined in %s, which %s does not import",
                           f->type_name, f->name, s->files[y->file].f.name,
                           P->name);
        if (y->kind == SYM_ENUM) {
            f->type = FM_PROTO_ENUM;
            f->enumeration = y->def;
        } else {
            if (((fm_proto_message *)y->def)->map_entry)
                return perr_at(P, pd->line, pd->col, "type %s of field %s "
                               "is a map entry", f->type_name, f->name);
            f->message = y->def;
        }
    }
    return 0;
}

fm_proto_schema *fm_proto_schema_new(const fm_proto_source *files,
                                     size_t n_files, size_t main,
                                     char *errstr, size_t errstr_size)
{
    fm_proto_schema *s = NULL;
    parser P = {.errstr = errstr, .errstr_size = errstr_size,
                .name = "(schema)", .line = 1, .col = 1};
    if (errstr_size)
        errstr[0] = '\0';
    if (n_files == 0 || main >= n_files) {
        snprintf(errstr, errstr_size, "protobuf schema: no main file");
        return NULL;
    }
    if (n_files > FM_PROTO_MAX_FILES) {
        snprintf(errstr, errstr_size, "protobuf schema: more than %d files",
                 FM_PROTO_MAX_FILES);
        return NULL;
    }
    size_t total = 0;
    for (size_t i = 0; i < n_files; i++) {
        if (!files[i].name || (!files[i].text && files[i].len)) {
            snprintf(errstr, errstr_size, "protobuf schema: file %zu has no "
                     "name or no text", i);
            return NULL;
        }
        if (files[i].len > FM_PROTO_MAX_INPUT - total) {
            snprintf(errstr, errstr_size, "protobuf schema: files larger "
                     "than %zu bytes together", FM_PROTO_MAX_INPUT);
            return NULL;
        }
        total += files[i].len;
    }
    s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(errstr, errstr_size, "protobuf schema: out of memory");
        return NULL;
    }
    P.s = s;
    s->n_files = n_files;
    s->main = main;
    s->files = arena_alloc(&s->a, n_files * sizeof(*s->files));
    bool *vis = arena_alloc(&s->a, n_files * n_files);
    if (!s->files || !vis) {
        nomem(&P);
        goto err;
    }
    for (size_t i = 0; i < n_files; i++) {
        s->files[i].f.name = copy_tok(&P, files[i].name, strlen(files[i].name));
        if (!s->files[i].f.name)
            goto err;
    }
    for (size_t i = 0; i < n_files; i++) {
        P.file = (int)i;
        P.name = s->files[i].f.name;
        P.text = files[i].text ? files[i].text : "";
        P.len = files[i].len;
        P.pos = 0;
        P.line = P.col = 1;
        if (parse_file(&P) < 0)
            goto err;
    }
    P.line = P.col = 1;
    P.t = (token){T_END, "", 0, 1, 1};
    if (build_symbols(&P) < 0 || resolve_imports(&P, vis) < 0 ||
        resolve_types(&P, vis) < 0)
        goto err;
    return s;
err:
    fm_proto_schema_destroy(s);
    return NULL;
}

void fm_proto_schema_destroy(fm_proto_schema *s)
{
    if (!s)
        return;
    arena_free(&s->a);
    free(s);
}

const fm_proto_file *fm_proto_schema_main(const fm_proto_schema *s)
{
    return &s->files[s->main].f;
}

const fm_proto_message *fm_proto_schema_message(const fm_proto_schema *s,
                                                const char *full_name)
{
    if (full_name[0] == '.')
        full_name++;
    const symbol *y = sym_find(s, full_name, strlen(full_name));
    return y && y->kind == SYM_MESSAGE ? y->def : NULL;
}

const fm_proto_field *fm_proto_message_field(const fm_proto_message *m,
                                             const char *name)
{
    for (size_t i = 0; i < m->n_fields; i++)
        if (strcmp(m->fields[i].name, name) == 0)
            return &m->fields[i];
    return NULL;
}

const fm_proto_field *fm_proto_message_field_number(const fm_proto_message *m,
                                                    uint32_t number)
{
    size_t lo = 0, hi = m->n_fields;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint32_t n = m->fields[mid].number;
        if (n == number)
            return &m->fields[mid];
        if (n < number)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

bool fm_proto_field_has_presence(const fm_proto_field *f)
{
    if (f->label == FM_PROTO_REPEATED)
        return false;
    return f->label != FM_PROTO_IMPLICIT || f->type == FM_PROTO_MESSAGE;
}

/* ------------------------------------------------------ message indexes */

/* A zigzag varint of at most 32 bits' value; -1 when truncated or long. */
static int zigzag32(const uint8_t *p, size_t n, size_t *at, int64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 35; shift += 7) {
        if (*at >= n)
            return -1;
        uint8_t b = p[(*at)++];
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            if (v > UINT32_MAX)
                return -1;
            *out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
            return 0;
        }
    }
    return -1;
}

int fm_proto_message_by_index(const fm_proto_schema *s, const uint8_t *p,
                              size_t n, const fm_proto_message **msg,
                              const uint8_t **payload, size_t *payload_len,
                              char *errstr, size_t errstr_size)
{
    size_t at = 0;
    int64_t count;
    if (zigzag32(p, n, &at, &count) < 0) {
        snprintf(errstr, errstr_size, "protobuf: message-index count "
                 "truncated or too long at byte 0");
        return -1;
    }
    if (count < 0 || count > FM_PROTO_MAX_INDEXES) {
        snprintf(errstr, errstr_size, "protobuf: message-index count %lld "
                 "is negative or above %d", (long long)count,
                 FM_PROTO_MAX_INDEXES);
        return -1;
    }
    const fm_proto_file *f = fm_proto_schema_main(s);
    fm_proto_message *const *list = f->messages;
    size_t n_list = f->n_messages;
    const fm_proto_message *m = NULL;
    for (int64_t i = 0; i < (count ? count : 1); i++) {
        int64_t idx = 0;
        size_t where = at;
        if (count && zigzag32(p, n, &at, &idx) < 0) {
            snprintf(errstr, errstr_size, "protobuf: message index %lld "
                     "truncated or too long at byte %zu", (long long)i, where);
            return -1;
        }
        /* Declared messages only: map entries are not in the list. */
        const fm_proto_message *pick = NULL;
        int64_t k = 0;
        for (size_t j = 0; j < n_list && !pick && idx >= 0; j++) {
            if (list[j]->map_entry)
                continue;
            if (k++ == idx)
                pick = list[j];
        }
        if (!pick) {
            snprintf(errstr, errstr_size, "protobuf: message index %lld "
                     "(at byte %zu) is not a message %s%s", (long long)idx,
                     where, m ? "nested in " : "of the main file ",
                     m ? m->full_name : f->name);
            return -1;
        }
        m = pick;
        list = m->messages;
        n_list = m->n_messages;
    }
    *msg = m;
    *payload = p + at;
    *payload_len = n - at;
    return 0;
}
