/*
 * values.c -- parsing one value text into its typed form, strictly.
 *
 * Numbers: the whole text must be the number (no blanks, no trailing junk),
 * integers in decimal within int64, doubles in plain decimal notation and
 * finite (no hex, inf or nan); sizes as bs_config_parse_size reads them
 * (defined here, exported in config.h: the one byte-size parser of
 * bloomstage, k/M/G/T as powers of 1024).  Then the row's range.  Key
 * specs and topic lists are parsed here once, so the stage never reparses
 * them.
 *
 * bs_value_parse fills a bs_value whose buffers the caller owns
 * (bs_value_free) and whose key-spec arg points into the parsed text, so the
 * text must outlive the value (store.c parses its own stored copy).  On
 * failure it writes the complaint that follows "value 'TEXT' " in the
 * caller's message.
 */
#include "config_int.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void bs_value_free(bs_value *v)
{
    if (!v)
        return;
    free(v->ks_mem);
    free(v->topics_buf);
    free(v->topics);
    memset(v, 0, sizeof *v);
}

const char *bs_ctype_name(bs_ctype type)
{
    switch (type) {
    case BS_CT_STRING: return "string";
    case BS_CT_INT: return "int";
    case BS_CT_SIZE: return "size";
    case BS_CT_DOUBLE: return "double";
    case BS_CT_BOOL: return "bool";
    case BS_CT_ENUM: return "enum";
    case BS_CT_KEYSPEC: return "key-spec";
    case BS_CT_TOPICS: return "topic list";
    }
    return "?";
}

/* 1024^k as a suffix when it divides v exactly (sizes read as written). */
static void format_size(int64_t v, char *buf, size_t n)
{
    static const char suffixes[] = "kMGT";
    int k = -1;
    while (v != 0 && k < 3 && v % 1024 == 0) {
        v /= 1024;
        k++;
    }
    if (k < 0)
        snprintf(buf, n, "%" PRId64, v);
    else
        snprintf(buf, n, "%" PRId64 "%c", v, suffixes[k]);
}

void bs_config_format_range(const bs_config_row *row, char *buf, size_t n)
{
    if (n == 0)
        return;
    buf[0] = '\0';
    if (row->type == BS_CT_ENUM) {
        size_t o = 0;
        for (size_t i = 0; row->values[i]; i++) {
            int w = snprintf(buf + o, n - o, "%s%s", i ? "|" : "",
                             row->values[i]);
            if (w < 0 || (size_t)w >= n - o)
                return;
            o += (size_t)w;
        }
        return;
    }
    if (!(row->flags & BS_CF_RANGE))
        return;
    char lo = (row->flags & BS_CF_MIN_OPEN) ? '(' : '[';
    char hi = (row->flags & BS_CF_MAX_OPEN) ? ')' : ']';
    if (row->type == BS_CT_DOUBLE) {
        snprintf(buf, n, "%c%g, %g%c", lo, row->dmin, row->dmax, hi);
    } else if (row->type == BS_CT_SIZE) {
        char a[32], b[32];
        format_size(row->imin, a, sizeof a);
        format_size(row->imax, b, sizeof b);
        snprintf(buf, n, "%c%s, %s%c", lo, a, b, hi);
    } else {
        snprintf(buf, n, "%c%" PRId64 ", %" PRId64 "%c", lo, row->imin,
                 row->imax, hi);
    }
}

static int out_of_range(const bs_config_row *row, char *why, size_t n)
{
    char range[64];
    bs_config_format_range(row, range, sizeof range);
    snprintf(why, n, "out of range %s", range);
    return -1;
}

static int check_int_range(const bs_config_row *row, int64_t v, char *why,
                           size_t n)
{
    if (!(row->flags & BS_CF_RANGE))
        return 0;
    bool low = (row->flags & BS_CF_MIN_OPEN) ? v <= row->imin : v < row->imin;
    bool high = (row->flags & BS_CF_MAX_OPEN) ? v >= row->imax : v > row->imax;
    return low || high ? out_of_range(row, why, n) : 0;
}

/* The size in text, or a complaint (NULL on success). */
static const char *size_of(const char *text, uint64_t *out)
{
    static const char too_large[] = "is too large for a 64-bit integer";
    if (!text || *text < '0' || *text > '9')
        return BS_CONFIG_SIZE_SYNTAX;
    uint64_t v = 0;
    const char *p = text;
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > ((uint64_t)INT64_MAX - d) / 10)
            return too_large;
        v = v * 10 + d;
    }
    int shift = 0;
    if (*p != '\0') {
        switch (*p) {
        case 'k': case 'K': shift = 10; break;
        case 'm': case 'M': shift = 20; break;
        case 'g': case 'G': shift = 30; break;
        case 't': case 'T': shift = 40; break;
        default: return BS_CONFIG_SIZE_SYNTAX;
        }
        if (p[1] != '\0')
            return BS_CONFIG_SIZE_SYNTAX;
        if (v > ((uint64_t)INT64_MAX >> shift))
            return too_large;
    }
    *out = v << shift;
    return NULL;
}

int bs_config_parse_size(const char *text, uint64_t *out, const char **why)
{
    const char *complaint = size_of(text, out);
    if (complaint && why)
        *why = complaint;
    return complaint ? -1 : 0;
}

/* Decimal int64 with an optional sign, or (sizes) bs_config_parse_size. */
static int parse_int(const bs_config_row *row, const char *s, int64_t *out,
                     char *why, size_t n)
{
    if (row->type == BS_CT_SIZE) {
        uint64_t u;
        const char *complaint;
        if (bs_config_parse_size(s, &u, &complaint) != 0) {
            snprintf(why, n, "%s", complaint);
            return -1;
        }
        *out = (int64_t)u; /* <= INT64_MAX */
        return check_int_range(row, *out, why, n);
    }
    const char *digits = (*s == '-' || *s == '+') ? s + 1 : s;
    if (*digits < '0' || *digits > '9') {
        snprintf(why, n, "is not an integer");
        return -1;
    }
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno == ERANGE) {
        snprintf(why, n, "is too large for a 64-bit integer");
        return -1;
    }
    if (*end != '\0') {
        snprintf(why, n, "is not an integer");
        return -1;
    }
    *out = (int64_t)v;
    return check_int_range(row, *out, why, n);
}

static int parse_double(const bs_config_row *row, const char *s, double *out,
                        char *why, size_t n)
{
    /* Plain decimal only: strtod alone would also take " 1", "0x1p3",
     * "inf" and "nan". */
    if (*s == '\0' || strspn(s, "0123456789+-.eE") != strlen(s)) {
        snprintf(why, n, "is not a number");
        return -1;
    }
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end != '\0') {
        snprintf(why, n, "is not a number");
        return -1;
    }
    if (errno == ERANGE || !isfinite(v)) {
        snprintf(why, n, "is beyond the range of a double");
        return -1;
    }
    *out = v;
    if (!(row->flags & BS_CF_RANGE))
        return 0;
    bool low = (row->flags & BS_CF_MIN_OPEN) ? v <= row->dmin : v < row->dmin;
    bool high = (row->flags & BS_CF_MAX_OPEN) ? v >= row->dmax : v > row->dmax;
    return low || high ? out_of_range(row, why, n) : 0;
}

static int parse_enum(const bs_config_row *row, const char *s, int *out,
                      char *why, size_t n)
{
    for (int i = 0; row->values[i]; i++) {
        if (strcmp(row->values[i], s) == 0) {
            *out = i;
            return 0;
        }
    }
    char list[256];
    bs_config_format_range(row, list, sizeof list);
    for (char *p = list; *p; p++)
        if (*p == '|')
            *p = ',';
    /* "forward,reject" reads better as "forward, reject". */
    char pretty[384];
    size_t o = 0;
    for (const char *p = list; *p && o + 3 < sizeof pretty; p++) {
        pretty[o++] = *p;
        if (*p == ',')
            pretty[o++] = ' ';
    }
    pretty[o] = '\0';
    snprintf(why, n, "is not one of: %s", pretty);
    return -1;
}

/* RFC 6901: "" or "/tok/tok..." where '~' is only in ~0 and ~1. */
static int check_json_pointer(const char *ptr, char *why, size_t n)
{
    if (*ptr != '\0' && *ptr != '/') {
        snprintf(why, n, "has a JSON pointer not starting with '/' (RFC "
                         "6901: json:/a/b, or json: for the whole value)");
        return -1;
    }
    for (const char *p = ptr; *p; p++) {
        if (*p == '~' && p[1] != '0' && p[1] != '1') {
            snprintf(why, n, "has '~' not followed by 0 or 1 in its JSON "
                             "pointer (~0 is '~', ~1 is '/')");
            return -1;
        }
    }
    return 0;
}

/* The pointer's reference tokens, unescaped, written at *text (which
 * passes them) and pointed to from toks[]; returns their count. */
static size_t split_json_pointer(const char *ptr, const char **toks,
                                 char **text)
{
    if (*ptr == '\0')
        return 0;
    size_t t = 0;
    char *w = *text, *start = w;
    for (const char *r = ptr + 1;; r++) {
        if (*r == '/' || *r == '\0') {
            *w++ = '\0';
            toks[t++] = start;
            if (*r == '\0')
                break;
            start = w;
        } else if (*r == '~') {
            *w++ = r[1] == '0' ? '~' : '/';
            r++;
        } else {
            *w++ = *r;
        }
    }
    *text = w;
    return t;
}

/* The part names a key spec is written with, each followed by its
 * argument ("" for key and value). */
static const struct part_name {
    const char *prefix;
    bs_config_keyspec_kind kind;
    bool on_key, exact;
} part_names[] = {
    {"key.json:", BS_CONFIG_KEYSPEC_JSON, true, false},
    {"key.avro:", BS_CONFIG_KEYSPEC_AVRO, true, false},
    {"key.protobuf:", BS_CONFIG_KEYSPEC_PROTOBUF, true, false},
    {"key", BS_CONFIG_KEYSPEC_KEY, false, true},
    {"value", BS_CONFIG_KEYSPEC_VALUE, false, true},
    {"header:", BS_CONFIG_KEYSPEC_HEADER, false, false},
    {"json:", BS_CONFIG_KEYSPEC_JSON, false, false},
    {"avro:", BS_CONFIG_KEYSPEC_AVRO, false, false},
    {"protobuf:", BS_CONFIG_KEYSPEC_PROTOBUF, false, false},
};

/* The part names as a message lists them. */
#define PART_NAMES "key, value, header:NAME, json:/pointer, avro:/path, " \
                   "protobuf:/path, or key.json:, key.avro:, key.protobuf: " \
                   "with a path into the record key"

/* The part name s starts with, if the part ends at `end` (for the names
 * that take no argument); NULL if none. */
static const struct part_name *part_name_at(const char *s, const char *end)
{
    for (size_t i = 0; i < sizeof(part_names) / sizeof(part_names[0]); i++) {
        size_t n = strlen(part_names[i].prefix);
        if (strncmp(s, part_names[i].prefix, n) == 0 &&
            (!part_names[i].exact || s + n == end))
            return &part_names[i];
    }
    return NULL;
}

/* Where the part starting at s ends: at the first comma followed by a part
 * name (up to the next comma or the end), else at the end. */
static const char *part_end(const char *s)
{
    for (const char *c = strchr(s, ','); c; c = strchr(c + 1, ',')) {
        const char *next_end = strchr(c + 1, ',');
        if (!next_end)
            next_end = c + 1 + strlen(c + 1);
        if (part_name_at(c + 1, next_end))
            return c;
    }
    return s + strlen(s);
}

/* One part, s .. end, into *part; its header name or pointer text copied
 * to *text (which passes it), its tokens to *toks (likewise). */
static int parse_part(const char *s, const char *end, size_t idx,
                      bs_config_keypart *part, const char ***toks,
                      char **text, char *why, size_t n)
{
    const struct part_name *pn = part_name_at(s, end);
    if (!pn) {
        if (*end == '\0' && idx == 0)
            snprintf(why, n, "is not a key spec (" PART_NAMES "; or "
                     "several separated by commas)");
        else
            snprintf(why, n, "has a part '%.*s' that is not one of "
                     PART_NAMES, (int)(end - s), s);
        return -1;
    }
    size_t plen = strlen(pn->prefix);
    part->kind = pn->kind;
    part->on_key = pn->on_key;
    size_t alen = (size_t)(end - s) - plen;
    memcpy(*text, s + plen, alen);
    (*text)[alen] = '\0';
    part->arg = *text;
    *text += alen + 1;
    if (pn->kind == BS_CONFIG_KEYSPEC_HEADER && alen == 0) {
        snprintf(why, n, "has an empty header name (header:NAME)");
        return -1;
    }
    if (bs_config_keypart_framed(pn->kind)) {
        if (alen && part->arg[0] != '/') {
            snprintf(why, n, "has a path not starting with '/' (%s/a/b, or "
                     "%s alone for the whole value)", pn->prefix, pn->prefix);
            return -1;
        }
        return 0;
    }
    if (pn->kind != BS_CONFIG_KEYSPEC_JSON)
        return 0;
    if (check_json_pointer(part->arg, why, n) != 0)
        return -1;
    part->tokens = *toks;
    part->ntokens = split_json_pointer(part->arg, *toks, text);
    *toks += part->ntokens;
    return 0;
}

/* A key spec: its parts, in one block of memory (v->ks_mem) holding the
 * parts, their tokens and the text both point into. */
static int parse_keyspec(const char *s, bs_value *v, char *why, size_t n)
{
    memset(&v->ks, 0, sizeof v->ks);
    size_t nparts = 0, len = strlen(s);
    for (const char *p = s;; p = part_end(p) + 1) {
        nparts++;
        if (!*part_end(p))
            break;
    }
    if (nparts > BS_CONFIG_KEY_PARTS_MAX) {
        snprintf(why, n, "has %zu parts, more than %d", nparts,
                 BS_CONFIG_KEY_PARTS_MAX);
        return -1;
    }
    /* Tokens: at most one a '/'; text: each part's argument and its
     * unescaped tokens, each no longer than the spec. */
    size_t ntok = 0;
    for (const char *p = s; *p; p++)
        ntok += *p == '/';
    size_t bytes = nparts * sizeof(bs_config_keypart) +
                   ntok * sizeof(const char *) + 2 * (len + nparts + ntok);
    char *mem = calloc(1, bytes);
    if (!mem) {
        snprintf(why, n, "could not be stored: out of memory");
        return -1;
    }
    v->ks_mem = mem;
    bs_config_keypart *parts = (bs_config_keypart *)mem;
    const char **toks = (const char **)(parts + nparts);
    char *text = (char *)(toks + ntok);
    const char *p = s;
    for (size_t i = 0; i < nparts; i++) {
        const char *end = part_end(p);
        if (parse_part(p, end, i, &parts[i], &toks, &text, why, n) != 0)
            return -1;
        p = end + 1;
    }
    v->ks.nparts = nparts;
    v->ks.parts = parts;
    return 0;
}

static bool topic_char_ok(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

static int parse_topics(const char *s, bs_value *v, char *why, size_t n)
{
    size_t count = 1;
    for (const char *p = s; *p; p++)
        count += *p == ',';
    size_t len = strlen(s);
    v->topics_buf = malloc(len + 1);
    v->topics = calloc(count, sizeof *v->topics);
    if (!v->topics_buf || !v->topics) {
        snprintf(why, n, "could not be stored: out of memory");
        return -1;
    }
    memcpy(v->topics_buf, s, len + 1);
    char *item = v->topics_buf;
    for (size_t i = 0; i < count; i++) {
        char *comma = strchr(item, ',');
        char *next = comma ? comma + 1 : NULL;
        if (comma)
            *comma = '\0';
        while (*item == ' ' || *item == '\t')
            item++;
        size_t ilen = strlen(item);
        while (ilen > 0 && (item[ilen - 1] == ' ' || item[ilen - 1] == '\t'))
            item[--ilen] = '\0';
        if (ilen == 0) {
            snprintf(why, n, "has an empty topic name (item %zu)", i + 1);
            return -1;
        }
        if (ilen > 249) {
            snprintf(why, n, "has a topic name longer than 249 characters "
                             "(item %zu)", i + 1);
            return -1;
        }
        for (const char *p = item; *p; p++) {
            if (!topic_char_ok(*p)) {
                snprintf(why, n, "has '%c' in topic '%s' (topic names are "
                                 "letters, digits, '.', '_' and '-')",
                         *p, item);
                return -1;
            }
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(v->topics[j], item) == 0) {
                snprintf(why, n, "names topic '%s' twice", item);
                return -1;
            }
        }
        v->topics[i] = item;
        item = next;
    }
    v->ntopics = count;
    return 0;
}

int bs_value_parse(const bs_config_row *row, const char *text, bs_value *out,
                   char *why, size_t why_size)
{
    memset(out, 0, sizeof *out);
    switch (row->type) {
    case BS_CT_STRING:
        return 0;
    case BS_CT_INT:
    case BS_CT_SIZE:
        return parse_int(row, text, &out->i, why, why_size);
    case BS_CT_DOUBLE:
        return parse_double(row, text, &out->d, why, why_size);
    case BS_CT_BOOL:
        if (strcmp(text, "true") == 0 || strcmp(text, "false") == 0) {
            out->b = text[0] == 't';
            return 0;
        }
        snprintf(why, why_size, "is not true or false");
        return -1;
    case BS_CT_ENUM:
        return parse_enum(row, text, &out->e, why, why_size);
    case BS_CT_KEYSPEC:
        return parse_keyspec(text, out, why, why_size);
    case BS_CT_TOPICS:
        return parse_topics(text, out, why, why_size);
    }
    snprintf(why, why_size, "has a type this build does not know");
    return -1;
}
