/*
 * avro.c -- keys from Avro values (fm_avro.h).  avro-c parses the writer
 * schema; the schema is then copied into a graph of our own (one node per
 * type, links resolved, so a recursive schema is a cycle), and payloads are
 * read by a walker of the binary encoding guided by that graph, not by
 * avro-c's generic value interface (avro_generic_class_from_schema +
 * avro_value_read).  Why:
 *
 *   - safety: avro-c trusts the lengths and block counts it reads; a string
 *     claiming 2 GB is a 2 GB allocation, an array of nulls claiming 2^62
 *     items a loop that never ends.  The walker checks every length and
 *     count against the bytes left before it uses it, and allocates nothing
 *     but the key's bytes.
 *   - speed: the walker checks what the path does not need without copying
 *     or allocating it, and never looks a field up by name; avro-c copies
 *     every string into a value tree.  bench/avro.c measures both on a
 *     10-field, 205-byte record: the walker takes 105 to 120 ns of CPU for
 *     a string field (135 to 150 ns for the last field, a union),
 *     avro_value_read plus avro_value_get_by_name 5 to 9 times as long.
 *
 * The walker reads the whole value even when the path's leaf comes early
 * (a truncated record is BAD, as it is to Avro's own readers): stopping at
 * the leaf would take the third field of that record in about 40 ns, and
 * would give keys from damaged records.
 *
 * Schema nodes hold pointers to names inside the avro-c schema, which the
 * fm_avro_schema keeps alive.
 */
#include "fm_avro.h"

#include <avro.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The fewest bytes of a type with no finite value (a record holding itself
 * outside a union): more than any payload. */
#define MIN_INF ((uint64_t)1 << 62)
/* Nodes of one schema, and nesting of the schema's JSON while copying. */
#define MAX_NODES ((uint32_t)1 << 20)
#define MAX_SCHEMA_DEPTH 512
/* Steps of one compiled path (it forks at each union of records). */
#define MAX_PLAN 4096

/* One field, symbol, branch or item type of a node. */
typedef struct kid {
    uint32_t node;    /* records, unions, arrays, maps: the type */
    uint32_t len;     /* records, enums: strlen(name) */
    const char *name; /* records: the field's name; enums: the symbol */
} kid;

typedef struct node {
    avro_type_t type; /* never AVRO_LINK */
    uint32_t n;       /* fields, symbols or branches; 1 for array, map */
    uint32_t first;   /* its kids: kids[first .. first + n) */
    uint64_t size;    /* fixed: bytes */
    uint64_t min;     /* the fewest bytes a value takes (MIN_INF: none) */
    const char *name; /* named types: the name; else the type's */
} node;

/* A table of pointers (each with a number), open addressing with linear
 * probing: avro-c's types while the schema is copied, and the blocks
 * avro-c allocates while it parses (below). */
typedef struct ptab {
    const void **key; /* NULL: an empty slot */
    uint32_t *val;
    size_t cap, n;
} ptab;

static size_t ptab_slot(const ptab *t, const void *p)
{
    uint64_t h = (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 20) & (t->cap - 1);
}

static bool ptab_get(const ptab *t, const void *p, uint32_t *v)
{
    if (!t->cap)
        return false;
    for (size_t i = ptab_slot(t, p);; i = (i + 1) & (t->cap - 1)) {
        if (!t->key[i])
            return false;
        if (t->key[i] == p) {
            *v = t->val[i];
            return true;
        }
    }
}

/* Adds p (not in the table); false when memory runs out. */
static bool ptab_put(ptab *t, const void *p, uint32_t v)
{
    if (2 * (t->n + 1) > t->cap) {
        ptab g = {.cap = t->cap ? 2 * t->cap : 256};
        g.key = calloc(g.cap, sizeof(*g.key));
        g.val = calloc(g.cap, sizeof(*g.val));
        if (!g.key || !g.val) {
            free(g.key);
            free(g.val);
            return false;
        }
        for (size_t i = 0; i < t->cap; i++)
            if (t->key[i])
                (void)ptab_put(&g, t->key[i], t->val[i]); /* has room */
        free(t->key);
        free(t->val);
        *t = g;
    }
    size_t j = ptab_slot(t, p);
    while (t->key[j])
        j = (j + 1) & (t->cap - 1);
    t->key[j] = p;
    t->val[j] = v;
    t->n++;
    return true;
}

/* Removes p if there, by backward shifting, which keeps every probe chain
 * unbroken. */
static void ptab_del(ptab *t, const void *p)
{
    if (!t->cap)
        return;
    size_t i = ptab_slot(t, p);
    while (t->key[i] != p) {
        if (!t->key[i])
            return;
        i = (i + 1) & (t->cap - 1);
    }
    for (size_t j = i;;) {
        t->key[i] = NULL;
        for (;;) {
            j = (j + 1) & (t->cap - 1);
            if (!t->key[j]) {
                t->n--;
                return;
            }
            size_t home = ptab_slot(t, t->key[j]);
            if ((j > i && (home <= i || home > j)) ||
                (j < i && home <= i && home > j))
                break;
        }
        t->key[i] = t->key[j];
        t->val[i] = t->val[j];
        i = j;
    }
}

static void ptab_free(ptab *t)
{
    free(t->key);
    free(t->val);
    t->key = NULL;
    t->val = NULL;
    t->cap = t->n = 0;
}

struct fm_avro_schema {
    avro_schema_t avro;
    node *nodes;
    kid *kids;
    uint32_t nnodes, cap_nodes, nkids, cap_kids;
    ptab memo; /* while copying: avro-c schema -> node */
    int refs;
};

/* -- the schema graph ---------------------------------------------------- */

static bool grow(void **p, uint32_t *cap, uint32_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    uint32_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q)
        return false;
    *p = q;
    *cap = c;
    return true;
}

static const char *type_word(avro_type_t t)
{
    switch (t) {
    case AVRO_STRING: return "string";
    case AVRO_BYTES: return "bytes";
    case AVRO_INT32: return "int";
    case AVRO_INT64: return "long";
    case AVRO_FLOAT: return "float";
    case AVRO_DOUBLE: return "double";
    case AVRO_BOOLEAN: return "boolean";
    case AVRO_NULL: return "null";
    case AVRO_RECORD: return "record";
    case AVRO_ENUM: return "enum";
    case AVRO_FIXED: return "fixed";
    case AVRO_MAP: return "map";
    case AVRO_ARRAY: return "array";
    case AVRO_UNION: return "union";
    default: return "link";
    }
}

/* How many members a's node nd has (a record's fields, an enum's
 * symbols, a union's branches, the one item or value type of an array or
 * a map; 0 for the others), and a fixed's size into nd->size.  -2: a
 * fixed of negative size. */
static int64_t members(avro_schema_t a, node *nd)
{
    switch (nd->type) {
    case AVRO_RECORD: return (int64_t)avro_schema_record_size(a);
    case AVRO_ENUM: return avro_schema_enum_number_of_symbols(a);
    case AVRO_UNION: return (int64_t)avro_schema_union_size(a);
    case AVRO_ARRAY:
    case AVRO_MAP: return 1;
    case AVRO_FIXED:
        if (avro_schema_fixed_size(a) < 0)
            return -2;
        nd->size = (uint64_t)avro_schema_fixed_size(a);
        return 0;
    default: return 0;
    }
}

/* Copies avro-c's type a (and what it holds) into s; its node in *out. */
static int copy_type(fm_avro_schema *s, avro_schema_t a, unsigned depth,
                     uint32_t *out, char *errstr, size_t errstr_size)
{
    for (int hops = 0; a && is_avro_link(a); hops++) {
        if (hops > 64) /* a link to a link ...: avro-c never makes one */
            goto bad_link;
        a = avro_schema_link_target(a);
    }
    if (!a)
        goto bad_link;
    if (ptab_get(&s->memo, a, out))
        return 0;
    if (depth > MAX_SCHEMA_DEPTH) {
        snprintf(errstr, errstr_size, "avro: schema nested deeper than %d",
                 MAX_SCHEMA_DEPTH);
        return -1;
    }
    if (s->nnodes >= MAX_NODES) {
        snprintf(errstr, errstr_size, "avro: schema of more than %u types",
                 (unsigned)MAX_NODES);
        return -1;
    }
    if (!grow((void **)&s->nodes, &s->cap_nodes, s->nnodes + 1,
              sizeof(node)))
        goto nomem;
    uint32_t me = s->nnodes++;
    if (!ptab_put(&s->memo, a, me))
        goto nomem;
    *out = me;
    node nd = {.type = avro_typeof(a), .name = avro_schema_type_name(a)};
    if (!nd.name)
        nd.name = type_word(nd.type);
    int64_t n = members(a, &nd);
    if (n == -2) {
        snprintf(errstr, errstr_size, "avro: fixed %s has size %lld",
                 nd.name, (long long)avro_schema_fixed_size(a));
        return -1;
    }
    if (n < 0 || n > (int64_t)(MAX_NODES - s->nkids)) {
        snprintf(errstr, errstr_size, "avro: %s %s has %lld members",
                 type_word(nd.type), nd.name, (long long)n);
        return -1;
    }
    nd.n = (uint32_t)n;
    nd.first = s->nkids;
    if (!grow((void **)&s->kids, &s->cap_kids, s->nkids + nd.n, sizeof(kid)))
        goto nomem;
    s->nkids += nd.n;
    s->nodes[me] = nd;
    for (uint32_t i = 0; i < nd.n; i++) {
        kid k = {0};
        avro_schema_t sub = NULL;
        switch (nd.type) {
        case AVRO_RECORD:
            k.name = avro_schema_record_field_name(a, (int)i);
            sub = avro_schema_record_field_get_by_index(a, (int)i);
            break;
        case AVRO_ENUM: k.name = avro_schema_enum_get(a, (int)i); break;
        case AVRO_UNION: sub = avro_schema_union_branch(a, (int)i); break;
        case AVRO_ARRAY: sub = avro_schema_array_items(a); break;
        case AVRO_MAP: sub = avro_schema_map_values(a); break;
        default: break;
        }
        if (nd.type == AVRO_RECORD || nd.type == AVRO_ENUM) {
            if (!k.name) {
                snprintf(errstr, errstr_size,
                         "avro: %s %s: member %u has no name",
                         type_word(nd.type), nd.name, (unsigned)i);
                return -1;
            }
            size_t len = strlen(k.name);
            k.len = len > UINT32_MAX ? UINT32_MAX : (uint32_t)len;
        }
        if (nd.type != AVRO_ENUM) {
            if (!sub) {
                snprintf(errstr, errstr_size,
                         "avro: %s %s: member %u has no type",
                         type_word(nd.type), nd.name, (unsigned)i);
                return -1;
            }
            if (copy_type(s, sub, depth + 1, &k.node, errstr, errstr_size))
                return -1;
        }
        s->kids[nd.first + i] = k;
    }
    return 0;
bad_link:
    snprintf(errstr, errstr_size, "avro: schema holds an unresolved link");
    return -1;
nomem:
    snprintf(errstr, errstr_size, "avro: out of memory copying the schema");
    return -1;
}

/* -- avro-c's parser, without its leaks --------------------------------- *
 *
 * avro-c's schema parser leaks what it allocated on some error paths (a
 * named type defined twice in one schema, found by fuzz_avro_schema), and
 * the stage may parse the same broken schema again and again.  So while
 * fm_avro_schema_new parses, an allocator of avro-c's (avro_set_allocator,
 * installed once; outside a parse it is realloc and free, like avro-c's
 * own) keeps the blocks allocated on this thread in a set: a parse that
 * fails frees what is left in it, one that succeeds forgets them (the
 * schema owns them). */

typedef struct blocks {
    ptab live;
    bool lost; /* the table could not grow: leak rather than guess */
} blocks;

static _Thread_local blocks *tracked;

static void *avro_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    (void)ud;
    (void)osize;
    blocks *b = tracked;
    if (b && ptr)
        ptab_del(&b->live, ptr);
    if (!nsize) {
        free(ptr);
        return NULL;
    }
    void *q = realloc(ptr, nsize);
    void *now = q ? q : ptr; /* a failed realloc leaves ptr the block */
    if (b && now && !ptab_put(&b->live, now, 0))
        b->lost = true;
    return q;
}

static void install_allocator(void)
{
    avro_set_allocator(avro_alloc, NULL);
}

/* avro_schema_from_json_length, freeing what it leaves when it fails and
 * writing avro_strerror()'s reason into errstr.  One parse at a time: the
 * reason is in a buffer avro-c shares between threads (Debian's build has
 * no thread-local one), and a schema is parsed once per schema id. */
static int parse_schema(const char *json, size_t len, avro_schema_t *out,
                        char *errstr, size_t errstr_size)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_once(&once, install_allocator);
    pthread_mutex_lock(&lock);
    blocks b = {0};
    tracked = &b;
    int rc = avro_schema_from_json_length(json, len, out);
    tracked = NULL;
    if (rc) {
        *out = NULL;
        snprintf(errstr, errstr_size, "avro: schema does not parse: %s",
                 avro_strerror());
        if (!b.lost)
            for (size_t i = 0; i < b.live.cap; i++)
                free((void *)b.live.key[i]);
    }
    pthread_mutex_unlock(&lock);
    ptab_free(&b.live);
    return rc;
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
    return a + b >= MIN_INF ? MIN_INF : a + b;
}

/* The fewest bytes of each type, from "none" down to the least fixed
 * point: a smallest value's tree never repeats a type on a path down it,
 * so nnodes + 1 rounds settle every node (most schemas take two). */
static void min_sizes(fm_avro_schema *s)
{
    for (uint32_t i = 0; i < s->nnodes; i++)
        s->nodes[i].min = MIN_INF;
    for (uint32_t round = 0; round <= s->nnodes; round++) {
        bool changed = false;
        for (uint32_t i = s->nnodes; i-- > 0;) {
            node *nd = &s->nodes[i];
            const kid *k = s->kids + nd->first;
            uint64_t m;
            switch (nd->type) {
            case AVRO_NULL: m = 0; break;
            case AVRO_FLOAT: m = 4; break;
            case AVRO_DOUBLE: m = 8; break;
            case AVRO_FIXED: m = nd->size < MIN_INF ? nd->size : MIN_INF; break;
            case AVRO_RECORD:
                m = 0;
                for (uint32_t j = 0; j < nd->n; j++)
                    m = add_sat(m, s->nodes[k[j].node].min);
                break;
            case AVRO_UNION:
                m = MIN_INF;
                for (uint32_t j = 0; j < nd->n; j++)
                    if (s->nodes[k[j].node].min < m)
                        m = s->nodes[k[j].node].min;
                m = add_sat(m, 1);
                break;
            default: m = 1; break; /* a varint, a length or a count */
            }
            if (m < nd->min) {
                nd->min = m;
                changed = true;
            }
        }
        if (!changed)
            break;
    }
}

fm_avro_schema *fm_avro_schema_new(const char *json, size_t len, char *errstr,
                                   size_t errstr_size)
{
    fm_avro_schema *s = NULL;
    if (len > FM_AVRO_SCHEMA_MAX) {
        snprintf(errstr, errstr_size,
                 "avro: schema of %zu bytes, more than %zu", len,
                 FM_AVRO_SCHEMA_MAX);
        return NULL;
    }
    s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(errstr, errstr_size, "avro: out of memory");
        return NULL;
    }
    s->refs = 1;
    if (parse_schema(json, len, &s->avro, errstr, errstr_size))
        goto err;
    uint32_t root;
    /* kids is never NULL, so kids + first is defined for any node */
    if (!grow((void **)&s->kids, &s->cap_kids, 1, sizeof(kid))) {
        snprintf(errstr, errstr_size, "avro: out of memory");
        goto err;
    }
    if (copy_type(s, s->avro, 0, &root, errstr, errstr_size))
        goto err;
    ptab_free(&s->memo);
    min_sizes(s);
    return s; /* root is node 0 */
err:
    fm_avro_schema_destroy(s);
    return NULL;
}

void fm_avro_schema_destroy(fm_avro_schema *s)
{
    if (!s || __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) > 0)
        return;
    if (s->avro)
        avro_schema_decref(s->avro);
    free(s->nodes);
    free(s->kids);
    ptab_free(&s->memo);
    free(s);
}

/* -- paths --------------------------------------------------------------- */

typedef enum plan_kind {
    P_FIELD,  /* a record: skip to field `field`, follow `next`, skip on */
    P_UNION,  /* a union: follow the plan of the branch the value takes */
    P_LEAF,   /* the value is the key (a null one, or null branch: missing) */
    P_ABSENT, /* a value without the path's next field: missing */
} plan_kind;

typedef struct plan {
    plan_kind kind;
    uint32_t node;
    uint32_t field;       /* P_FIELD */
    uint32_t seg;         /* path segments resolved before this step */
    struct plan *next;    /* P_FIELD */
    struct plan **branch; /* P_UNION: one per branch */
} plan;

struct fm_avro_path {
    fm_avro_schema *s;
    plan *root;
    char *text;               /* the path as given */
    uint32_t nseg;
    uint32_t seg_end[FM_AVRO_PATH_MAX / 2 + 1]; /* end of segment i in text */
    uint32_t seg_start[FM_AVRO_PATH_MAX / 2 + 1];
    uint32_t nplans;
};

static void plan_free(plan *pl, const fm_avro_schema *s)
{
    if (!pl)
        return;
    if (pl->kind == P_FIELD)
        plan_free(pl->next, s);
    if (pl->kind == P_UNION && pl->branch) {
        for (uint32_t i = 0; i < s->nodes[pl->node].n; i++)
            plan_free(pl->branch[i], s);
        free(pl->branch);
    }
    free(pl);
}

/* The field of record t named by segment i, or -1. */
static int64_t field_of(const fm_avro_path *p, uint32_t t, uint32_t i)
{
    const node *nd = &p->s->nodes[t];
    const kid *k = p->s->kids + nd->first;
    size_t n = p->seg_end[i] - p->seg_start[i];
    const char *name = p->text + p->seg_start[i];
    for (uint32_t j = 0; j < nd->n; j++)
        if (k[j].len == n && !memcmp(k[j].name, name, n))
            return j;
    return -1;
}

/* The plan for a value of type t with segments i.. still to resolve. */
static plan *compile(fm_avro_path *p, uint32_t t, uint32_t i, char *errstr,
                     size_t errstr_size)
{
    const fm_avro_schema *s = p->s;
    const node *nd = &s->nodes[t];
    if (++p->nplans > MAX_PLAN) {
        snprintf(errstr, errstr_size,
                 "avro: path %s: more than %d steps through its unions",
                 p->text, MAX_PLAN);
        return NULL;
    }
    plan *pl = calloc(1, sizeof(*pl));
    if (!pl)
        goto nomem;
    pl->node = t;
    pl->seg = i;
    int sl = i ? (int)p->seg_end[i - 1] : 0; /* the path so far */
    if (i == p->nseg) {
        pl->kind = P_LEAF;
        return pl;
    }
    int fl = (int)(p->seg_end[i] - p->seg_start[i]);
    const char *fname = p->text + p->seg_start[i];
    if (nd->type == AVRO_RECORD) {
        int64_t f = field_of(p, t, i);
        if (f < 0) {
            snprintf(errstr, errstr_size,
                     "avro: path %s: record %s (at %.*s) has no field %.*s",
                     p->text, nd->name, sl ? sl : 1, sl ? p->text : "/", fl,
                     fname);
            goto err;
        }
        pl->kind = P_FIELD;
        pl->field = (uint32_t)f;
        pl->next = compile(p, s->kids[nd->first + (uint32_t)f].node, i + 1,
                           errstr, errstr_size);
        if (!pl->next)
            goto err;
        return pl;
    }
    if (nd->type == AVRO_UNION) {
        pl->kind = P_UNION;
        pl->branch = calloc(nd->n ? nd->n : 1, sizeof(*pl->branch));
        if (!pl->branch)
            goto nomem;
        bool any = false;
        for (uint32_t b = 0; b < nd->n; b++) {
            uint32_t bt = s->kids[nd->first + b].node;
            if (s->nodes[bt].type == AVRO_RECORD && field_of(p, bt, i) >= 0) {
                pl->branch[b] = compile(p, bt, i, errstr, errstr_size);
                if (!pl->branch[b])
                    goto err;
                any = true;
            } else {
                if (++p->nplans > MAX_PLAN) {
                    snprintf(errstr, errstr_size,
                             "avro: path %s: more than %d steps through its "
                             "unions",
                             p->text, MAX_PLAN);
                    goto err;
                }
                pl->branch[b] = calloc(1, sizeof(plan));
                if (!pl->branch[b])
                    goto nomem;
                pl->branch[b]->kind = P_ABSENT;
                pl->branch[b]->node = bt;
                pl->branch[b]->seg = i;
            }
        }
        if (!any) {
            snprintf(errstr, errstr_size,
                     "avro: path %s: no record branch of the union at %.*s "
                     "has a field %.*s",
                     p->text, sl ? sl : 1, sl ? p->text : "/", fl, fname);
            goto err;
        }
        return pl;
    }
    snprintf(errstr, errstr_size,
             "avro: path %s: %.*s is %s %s, not a record with field %.*s",
             p->text, sl ? sl : 1, sl ? p->text : "/",
             nd->type == AVRO_INT32 ||
                     nd->type == AVRO_ARRAY || nd->type == AVRO_ENUM
                 ? "an"
                 : "a",
             nd->name, fl, fname);
    goto err;
nomem:
    snprintf(errstr, errstr_size, "avro: out of memory compiling a path");
err:
    plan_free(pl, s);
    return NULL;
}

fm_avro_path *fm_avro_path_compile(fm_avro_schema *s, const char *path,
                                   char *errstr, size_t errstr_size)
{
    size_t len = strlen(path);
    if (len > FM_AVRO_PATH_MAX) {
        snprintf(errstr, errstr_size, "avro: path of %zu bytes, more than %d",
                 len, FM_AVRO_PATH_MAX);
        return NULL;
    }
    if (len && path[0] != '/') {
        snprintf(errstr, errstr_size,
                 "avro: path %s does not begin with '/'", path);
        return NULL;
    }
    fm_avro_path *p = calloc(1, sizeof(*p));
    if (!p || !(p->text = strdup(path))) {
        free(p);
        snprintf(errstr, errstr_size, "avro: out of memory");
        return NULL;
    }
    p->s = s;
    __atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
    if (len > 1) { /* "" and "/" are the whole value */
        for (size_t at = 1;;) {
            size_t e = at;
            while (e < len && path[e] != '/')
                e++;
            if (e == at) {
                snprintf(errstr, errstr_size,
                         "avro: path %s: empty field name at byte %zu", path,
                         at);
                goto err;
            }
            p->seg_start[p->nseg] = (uint32_t)at;
            p->seg_end[p->nseg] = (uint32_t)e;
            p->nseg++;
            if (e == len)
                break;
            at = e + 1;
        }
    }
    p->root = compile(p, 0, 0, errstr, errstr_size);
    if (!p->root)
        goto err;
    return p;
err:
    fm_avro_path_destroy(p);
    return NULL;
}

void fm_avro_path_destroy(fm_avro_path *p)
{
    if (!p)
        return;
    plan_free(p->root, p->s);
    fm_avro_schema_destroy(p->s);
    free(p->text);
    free(p);
}

/* -- reading payloads ---------------------------------------------------- */

typedef struct rd {
    const uint8_t *p, *start, *end;
    const node *nodes;
    const kid *kids;
    const fm_avro_path *path;
    unsigned depth;
    uint32_t empty;      /* zero-byte items still allowed */
    const node *rec;     /* the record and field being read, for messages */
    const char *field;
    char *errstr;
    size_t errstr_size;
} rd;

__attribute__((format(printf, 2, 3), cold, noinline)) static fm_avro_result
bad(rd *r, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    if (r->rec)
        snprintf(r->errstr, r->errstr_size,
                 "avro: field %s of record %s: %s at byte %zu", r->field,
                 r->rec->name, what, (size_t)(r->p - r->start));
    else
        snprintf(r->errstr, r->errstr_size, "avro: %s at byte %zu", what,
                 (size_t)(r->p - r->start));
    return FM_AVRO_BAD;
}

__attribute__((cold, noinline)) static fm_avro_result
truncated(rd *r, const char *what)
{
    return bad(r, "%s past the end of %zu bytes", what,
               (size_t)(r->end - r->start));
}

/* A zigzag varint of at most `bits` bits (64: a long, up to 10 bytes;
 * 32: an int, up to 5), its value in *v. */
static fm_avro_result rd_varint(rd *r, unsigned bits, int64_t *v,
                                const char *what)
{
    uint64_t u = 0;
    for (unsigned shift = 0;; shift += 7) {
        if (r->p == r->end)
            return truncated(r, what);
        uint8_t b = *r->p++;
        if (shift + 7 > bits && b >= 1u << (bits - shift))
            return bad(r, "%s: varint longer than %u bits", what, bits);
        u |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80))
            break;
    }
    *v = bits == 64 ? (int64_t)(u >> 1) ^ -(int64_t)(u & 1)
                    : (int32_t)((uint32_t)u >> 1) ^ -(int32_t)(u & 1);
    return FM_AVRO_FOUND;
}

/* A long, inline for the one-byte values most lengths, counts and branch
 * indexes are. */
static inline fm_avro_result rd_long(rd *r, int64_t *v, const char *what)
{
    if (r->p < r->end && !(*r->p & 0x80)) {
        uint8_t b = *r->p++;
        *v = (int64_t)(b >> 1) ^ -(int64_t)(b & 1);
        return FM_AVRO_FOUND;
    }
    return rd_varint(r, 64, v, what);
}

/* An int, the same way. */
static inline fm_avro_result rd_int(rd *r, int32_t *v, const char *what)
{
    int64_t l = 0;
    if (r->p < r->end && !(*r->p & 0x80)) {
        uint8_t b = *r->p++;
        *v = (int32_t)(b >> 1) ^ -(int32_t)(b & 1);
        return FM_AVRO_FOUND;
    }
    if (rd_varint(r, 32, &l, what))
        return FM_AVRO_BAD;
    *v = (int32_t)l;
    return FM_AVRO_FOUND;
}

/* A length (string, bytes, a map key) checked against the bytes left. */
static inline fm_avro_result rd_len(rd *r, size_t *n, const char *what)
{
    int64_t v = 0;
    if (rd_long(r, &v, what))
        return FM_AVRO_BAD;
    if (v < 0)
        return bad(r, "%s length %lld is negative", what, (long long)v);
    if ((uint64_t)v > (uint64_t)(r->end - r->p))
        return bad(r, "%s length %lld past the end (%zu left)", what,
                   (long long)v, (size_t)(r->end - r->p));
    *n = (size_t)v;
    return FM_AVRO_FOUND;
}

/* The head of an array or map block: its item count in *count (0: the
 * last block), checked against the bytes left for items of at least
 * item_min bytes; *block_end is where a block that states its size ends
 * (NULL when it does not). */
static fm_avro_result rd_block(rd *r, uint64_t item_min, const char *what,
                               uint64_t *count, const uint8_t **block_end)
{
    int64_t c = 0;
    if (rd_long(r, &c, what))
        return FM_AVRO_BAD;
    *block_end = NULL;
    if (c < 0) {
        if (c == INT64_MIN)
            return bad(r, "%s block count %lld", what, (long long)c);
        c = -c;
        size_t size = 0;
        if (rd_len(r, &size, "block"))
            return FM_AVRO_BAD;
        *block_end = r->p + size;
    }
    uint64_t left = (uint64_t)(r->end - r->p);
    if (item_min && (uint64_t)c > left / item_min)
        return bad(r, "%s block of %lld items of at least %llu bytes past "
                      "the end (%zu left)",
                   what, (long long)c, (unsigned long long)item_min,
                   (size_t)left);
    if (!item_min) {
        if ((uint64_t)c > r->empty)
            return bad(r, "%s block of %lld items that take no bytes: more "
                          "than %d in one payload",
                       what, (long long)c, FM_AVRO_MAX_EMPTY_ITEMS);
        r->empty -= (uint32_t)c;
    }
    *count = (uint64_t)c;
    return FM_AVRO_FOUND;
}

static fm_avro_result block_done(rd *r, const uint8_t *block_end,
                                 const char *what)
{
    if (block_end && r->p != block_end)
        return bad(r, "%s block states %zu bytes, its items took %zu", what,
                   (size_t)(block_end - r->start),
                   (size_t)(r->p - r->start));
    return FM_AVRO_FOUND;
}

static inline fm_avro_result rd_branch(rd *r, const node *nd, uint32_t *b)
{
    int64_t v = 0;
    if (rd_long(r, &v, "union branch"))
        return FM_AVRO_BAD;
    if (v < 0 || (uint64_t)v >= nd->n)
        return bad(r, "union branch %lld of %u", (long long)v,
                   (unsigned)nd->n);
    *b = (uint32_t)v;
    return FM_AVRO_FOUND;
}

static fm_avro_result enter(rd *r)
{
    if (++r->depth > FM_AVRO_MAX_DEPTH)
        return bad(r, "value nested deeper than %d", FM_AVRO_MAX_DEPTH);
    return FM_AVRO_FOUND;
}

static fm_avro_result fixed_bytes(rd *r, uint64_t n, const char *what)
{
    if (n > (uint64_t)(r->end - r->p))
        return bad(r, "%s of %llu bytes past the end (%zu left)", what,
                   (unsigned long long)n, (size_t)(r->end - r->p));
    r->p += n;
    return FM_AVRO_FOUND;
}

static fm_avro_result compound(rd *r, uint32_t t, fm_key *k);

/* An enum's symbol index, checked against its symbols. */
static inline fm_avro_result rd_enum(rd *r, const node *nd, int32_t *i)
{
    if (rd_int(r, i, "enum"))
        return FM_AVRO_BAD;
    if (*i < 0 || (uint32_t)*i >= nd->n)
        return bad(r, "enum %s symbol %d of %u", nd->name, (int)*i,
                   (unsigned)nd->n);
    return FM_AVRO_FOUND;
}

/* Reads past one value of type t, checking it: scalars inline, since a
 * record's fields are mostly scalars. */
static inline __attribute__((always_inline)) fm_avro_result skip(rd *r,
                                                                 uint32_t t)
{
    const node *nd = &r->nodes[t];
    int64_t l = 0;
    int32_t i = 0;
    size_t n = 0;
    switch (nd->type) {
    case AVRO_NULL: return FM_AVRO_FOUND;
    case AVRO_BOOLEAN:
        if (r->p == r->end)
            return truncated(r, "boolean");
        if (*r->p > 1)
            return bad(r, "boolean byte 0x%02x", *r->p);
        r->p++;
        return FM_AVRO_FOUND;
    case AVRO_INT32: return rd_int(r, &i, "int");
    case AVRO_INT64: return rd_long(r, &l, "long");
    case AVRO_FLOAT: return fixed_bytes(r, 4, "float");
    case AVRO_DOUBLE: return fixed_bytes(r, 8, "double");
    case AVRO_FIXED: return fixed_bytes(r, nd->size, "fixed");
    case AVRO_STRING:
    case AVRO_BYTES:
        if (rd_len(r, &n, nd->type == AVRO_STRING ? "string" : "bytes"))
            return FM_AVRO_BAD;
        r->p += n;
        return FM_AVRO_FOUND;
    case AVRO_ENUM: return rd_enum(r, nd, &i);
    default: return compound(r, t, NULL);
    }
}

static fm_avro_result key_full(rd *r)
{
    return bad(r, "key longer than %zu bytes", FM_KEY_MAX);
}

/* Reads one value of type t into k (fm_key.h's encoding). */
static fm_avro_result enc(rd *r, uint32_t t, fm_key *k)
{
    const node *nd = &r->nodes[t];
    const kid *kd = r->kids + nd->first;
    const uint8_t *at = r->p;
    int64_t l = 0;
    int32_t i = 0;
    size_t n = 0;
    switch (nd->type) {
    case AVRO_NULL: fm_key_null(k); return FM_AVRO_FOUND;
    case AVRO_BOOLEAN:
        if (skip(r, t))
            return FM_AVRO_BAD;
        fm_key_bool(k, *at == 1);
        return FM_AVRO_FOUND;
    case AVRO_INT32:
        if (rd_int(r, &i, "int"))
            return FM_AVRO_BAD;
        fm_key_int(k, i);
        return FM_AVRO_FOUND;
    case AVRO_INT64:
        if (rd_long(r, &l, "long"))
            return FM_AVRO_BAD;
        fm_key_int(k, l);
        return FM_AVRO_FOUND;
    case AVRO_FLOAT: {
        if (skip(r, t))
            return FM_AVRO_BAD;
        uint32_t u = (uint32_t)at[0] | (uint32_t)at[1] << 8 |
                     (uint32_t)at[2] << 16 | (uint32_t)at[3] << 24;
        float f;
        memcpy(&f, &u, 4);
        fm_key_real(k, f);
        return FM_AVRO_FOUND;
    }
    case AVRO_DOUBLE: {
        if (skip(r, t))
            return FM_AVRO_BAD;
        uint64_t u = 0;
        for (int j = 7; j >= 0; j--)
            u = u << 8 | at[j];
        double d;
        memcpy(&d, &u, 8);
        fm_key_real(k, d);
        return FM_AVRO_FOUND;
    }
    case AVRO_FIXED:
        if (skip(r, t))
            return FM_AVRO_BAD;
        fm_key_bytes(k, at, (size_t)nd->size);
        return FM_AVRO_FOUND;
    case AVRO_STRING:
    case AVRO_BYTES:
        if (rd_len(r, &n, type_word(nd->type)))
            return FM_AVRO_BAD;
        fm_key_bytes(k, r->p, n);
        r->p += n;
        return FM_AVRO_FOUND;
    case AVRO_ENUM:
        if (rd_enum(r, nd, &i))
            return FM_AVRO_BAD;
        fm_key_bytes(k, kd[i].name, kd[i].len);
        return FM_AVRO_FOUND;
    default: return compound(r, t, k);
    }
}

/* Reads a union, record, array or map into k, or only checks it when k
 * is NULL (skip). */
static fm_avro_result compound(rd *r, uint32_t t, fm_key *k)
{
    const node *nd = &r->nodes[t];
    const kid *kd = r->kids + nd->first;
    size_t n = 0;
    uint32_t b = 0;
    fm_key_mark m = 0;
    if (enter(r))
        return FM_AVRO_BAD;
    switch (nd->type) {
    case AVRO_UNION:
        if (rd_branch(r, nd, &b) ||
            (k ? enc(r, kd[b].node, k) : skip(r, kd[b].node)))
            return FM_AVRO_BAD;
        break;
    case AVRO_RECORD: {
        const node *rec = r->rec;
        const char *field = r->field;
        if (k)
            fm_key_compound(k, 'r');
        for (uint32_t j = 0; j < nd->n; j++) {
            r->rec = nd;
            r->field = kd[j].name;
            if (!k) {
                if (skip(r, kd[j].node))
                    return FM_AVRO_BAD;
                continue;
            }
            m = fm_key_elem_begin(k);
            if (enc(r, kd[j].node, k))
                return FM_AVRO_BAD;
            fm_key_elem_end(k, m);
        }
        r->rec = rec;
        r->field = field;
        break;
    }
    case AVRO_ARRAY:
    case AVRO_MAP: {
        bool map = nd->type == AVRO_MAP;
        uint64_t item = r->nodes[kd[0].node].min;
        if (map)
            item = add_sat(item, 1);
        size_t start = 0;
        if (k) {
            fm_key_compound(k, map ? 'm' : 'a');
            start = k->len;
        }
        for (;;) {
            uint64_t c = 0;
            const uint8_t *be = NULL;
            if (rd_block(r, item, type_word(nd->type), &c, &be))
                return FM_AVRO_BAD;
            if (!c)
                break;
            while (c--) {
                if (map && rd_len(r, &n, "map key"))
                    return FM_AVRO_BAD;
                if (!k) {
                    r->p += map ? n : 0;
                    if (skip(r, kd[0].node))
                        return FM_AVRO_BAD;
                    continue;
                }
                if (!fm_key_ok(k))
                    return key_full(r);
                if (map) {
                    m = fm_key_elem_begin(k);
                    fm_key_bytes(k, r->p, n);
                    fm_key_elem_end(k, m);
                    r->p += n;
                }
                m = fm_key_elem_begin(k);
                if (enc(r, kd[0].node, k))
                    return FM_AVRO_BAD;
                fm_key_elem_end(k, m);
            }
            if (block_done(r, be, type_word(nd->type)))
                return FM_AVRO_BAD;
        }
        if (k && map && fm_key_ok(k) && !fm_key_map_sort(k, start))
            return key_full(r);
        break;
    }
    default: return bad(r, "type %s", type_word(nd->type));
    }
    r->depth--;
    return FM_AVRO_FOUND;
}

/* A missing key's reason: where on the path (the segments before pl),
 * what is there and, short of the leaf, the field it lacks. */
static void missing(rd *r, const plan *pl, const node *nd)
{
    const fm_avro_path *p = r->path;
    int sl = pl->seg ? (int)p->seg_end[pl->seg - 1] : 0;
    const char *what = nd->type == AVRO_NULL ? "null" : nd->name;
    if (pl->seg < p->nseg)
        snprintf(r->errstr, r->errstr_size,
                 "avro: %.*s is %s, without field %.*s", sl ? sl : 1,
                 sl ? p->text : "/", what,
                 (int)(p->seg_end[pl->seg] - p->seg_start[pl->seg]),
                 p->text + p->seg_start[pl->seg]);
    else
        snprintf(r->errstr, r->errstr_size, "avro: %.*s is %s", sl ? sl : 1,
                 sl ? p->text : "/", what);
}

/* Follows the plan through one value; the leaf's value goes into k. */
static fm_avro_result walk(rd *r, const plan *pl, fm_key *k)
{
    const node *nd = &r->nodes[pl->node];
    const kid *kd = r->kids + nd->first;
    fm_avro_result res;
    uint32_t b = 0;
    switch (pl->kind) {
    case P_FIELD: {
        if (enter(r))
            return FM_AVRO_BAD;
        const node *rec = r->rec;
        const char *field = r->field;
        res = FM_AVRO_FOUND;
        for (uint32_t j = 0; j < nd->n; j++) {
            r->rec = nd;
            r->field = kd[j].name;
            if (j == pl->field) {
                res = walk(r, pl->next, k);
                if (res == FM_AVRO_BAD)
                    return res;
            } else if (skip(r, kd[j].node))
                return FM_AVRO_BAD;
        }
        r->rec = rec;
        r->field = field;
        r->depth--;
        return res;
    }
    case P_UNION:
        if (enter(r) || rd_branch(r, nd, &b))
            return FM_AVRO_BAD;
        res = walk(r, pl->branch[b], k);
        r->depth--;
        return res;
    case P_ABSENT:
        missing(r, pl, nd);
        return skip(r, pl->node) ? FM_AVRO_BAD : FM_AVRO_MISSING;
    case P_LEAF:
        if (nd->type == AVRO_UNION) {
            if (rd_branch(r, nd, &b))
                return FM_AVRO_BAD;
            nd = &r->nodes[kd[b].node];
            if (nd->type != AVRO_NULL)
                return enc(r, kd[b].node, k);
        } else if (nd->type != AVRO_NULL)
            return enc(r, pl->node, k);
        missing(r, pl, nd);
        return FM_AVRO_MISSING;
    }
    return FM_AVRO_BAD;
}

fm_avro_result fm_avro_extract(const fm_avro_path *p, const uint8_t *payload,
                               size_t len, fm_key *out, char *errstr,
                               size_t errstr_size)
{
    static const uint8_t none[1];
    rd r = {
        .p = payload ? payload : none,
        .nodes = p->s->nodes,
        .kids = p->s->kids,
        .path = p,
        .empty = FM_AVRO_MAX_EMPTY_ITEMS,
        .errstr = errstr,
        .errstr_size = errstr_size,
    };
    r.start = r.p;
    r.end = r.p + (payload ? len : 0);
    size_t start = out->len;
    bool was_ok = fm_key_ok(out);
    fm_avro_result res = walk(&r, p->root, out);
    if (res == FM_AVRO_FOUND && !fm_key_ok(out))
        res = key_full(&r);
    if (res != FM_AVRO_FOUND) {
        out->len = start;
        out->failed = !was_ok;
    }
    return res;
}
