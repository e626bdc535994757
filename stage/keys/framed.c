/*
 * framed.c -- see framed.h.  The compiled entries live in a chained hash
 * table keyed by (key part, schema id); a Protobuf entry keeps one
 * compiled path per message of its schema that records name (Confluent's
 * message indexes pick it per record).
 */
#include "keys/framed.h"
#include "base/util.h"

#include <fm_avro.h>
#include <fm_frame.h>
#include <fm_proto.h>
#include <fm_protobuf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NBUCKETS 1024u
/* Paths kept per Protobuf schema; a record naming yet another message
 * compiles one for itself alone. */
#define MAX_PB_PATHS 64

typedef struct pb_path {
    const fm_proto_message *msg;
    fm_pb_path *path; /* NULL: the message lacks the path; why says so */
    char *why;
} pb_path;

typedef struct entry {
    struct entry *next;
    const bs_config_keypart *part;
    int32_t id;
    uint64_t used;
    bs_framed_result rc; /* FOUND: compiled below; MISSING or BAD: why */
    char *why;
    fm_avro_path *avro;
    fm_proto_schema *proto;
    pb_path pb[MAX_PB_PATHS];
    size_t npb;
} entry;

struct bs_framed {
    bs_registry *reg;
    /* The registry gave no answer: ids not compiled yet are UNREACHABLE
     * at once, with this error, until bs_framed_probe gets an answer (a
     * burst of records must not each wait for a registry that is away). */
    bool down;
    char down_why[BS_REGISTRY_MAX_NAME];
    entry *buckets[NBUCKETS];
    size_t n, max;
    uint64_t tick;
};

bs_framed *bs_framed_new(const bs_registry_conf *conf, size_t max_entries,
                         char *errstr, size_t errstr_size)
{
    bs_framed *f = calloc(1, sizeof(*f));
    if (!f) {
        bs_errf(errstr, errstr_size, "out of memory");
        return NULL;
    }
    f->reg = bs_registry_new(conf, errstr, errstr_size);
    if (!f->reg) {
        free(f);
        return NULL;
    }
    f->max = max_entries ? max_entries : 1;
    return f;
}

static void entry_free(entry *e)
{
    for (size_t i = 0; i < e->npb; i++) {
        fm_pb_path_destroy(e->pb[i].path);
        free(e->pb[i].why);
    }
    fm_proto_schema_destroy(e->proto);
    fm_avro_path_destroy(e->avro);
    free(e->why);
    free(e);
}

void bs_framed_destroy(bs_framed *f)
{
    if (!f)
        return;
    for (size_t b = 0; b < NBUCKETS; b++)
        for (entry *e = f->buckets[b], *next; e; e = next) {
            next = e->next;
            entry_free(e);
        }
    bs_registry_destroy(f->reg);
    free(f);
}

static size_t bucket(const bs_config_keypart *part, int32_t id)
{
    uint32_t h = (uint32_t)id * 2654435761u ^
                 (uint32_t)((uintptr_t)part >> 4) * 40503u;
    return (h ^ h >> 16) & (NBUCKETS - 1);
}

static entry *lookup(bs_framed *f, const bs_config_keypart *part, int32_t id)
{
    for (entry *e = f->buckets[bucket(part, id)]; e; e = e->next)
        if (e->id == id && e->part == part) {
            e->used = ++f->tick;
            return e;
        }
    return NULL;
}

/* Room for one more: the least recently used entry goes (a scan, on a new
 * id only). */
static void make_room(bs_framed *f)
{
    if (f->n < f->max)
        return;
    entry **victim = NULL;
    for (size_t b = 0; b < NBUCKETS; b++)
        for (entry **pe = &f->buckets[b]; *pe; pe = &(*pe)->next)
            if (!victim || (*pe)->used < (*victim)->used)
                victim = pe;
    if (!victim)
        return;
    entry *e = *victim;
    *victim = e->next;
    entry_free(e);
    f->n--;
}

static const char *kind_name(const bs_config_keypart *part)
{
    return part->kind == BS_CONFIG_KEYSPEC_AVRO ? "avro" : "protobuf";
}

/* The schema compiled for the part: an Avro path, or a Protobuf schema
 * whose paths come per message.  Sets e->rc and e->why. */
static void compile(entry *e, const bs_registry_schema *sc)
{
    char err[BS_REGISTRY_MAX_NAME];
    bool avro = e->part->kind == BS_CONFIG_KEYSPEC_AVRO;
    bs_registry_type want = avro ? BS_REGISTRY_AVRO : BS_REGISTRY_PROTOBUF;
    e->rc = BS_FRAMED_BAD;
    if (sc->type != want) {
        snprintf(err, sizeof(err), "schema id %d is %s, not %s", (int)e->id,
                 bs_registry_type_name(sc->type), bs_registry_type_name(want));
    } else if (avro && sc->nrefs) {
        snprintf(err, sizeof(err), "schema id %d references %zu other "
                 "schemas, which the Avro reader does not resolve",
                 (int)e->id, sc->nrefs);
    } else if (avro) {
        char why[512];
        fm_avro_schema *as = fm_avro_schema_new(sc->text, sc->text_len, why,
                                                sizeof(why));
        if (!as) {
            snprintf(err, sizeof(err), "schema id %d does not parse as "
                     "Avro: %s", (int)e->id, why);
        } else {
            e->avro = fm_avro_path_compile(as, e->part->arg, why,
                                           sizeof(why));
            fm_avro_schema_destroy(as);
            e->rc = e->avro ? BS_FRAMED_FOUND : BS_FRAMED_MISSING;
            if (!e->avro)
                snprintf(err, sizeof(err), "schema id %d: %s", (int)e->id,
                         why);
        }
    } else {
        fm_proto_source src[BS_REGISTRY_MAX_REFS + 1];
        for (size_t i = 0; i < sc->nrefs; i++)
            src[i] = (fm_proto_source){sc->refs[i].name, sc->refs[i].text,
                                       sc->refs[i].text_len};
        char main_name[32];
        snprintf(main_name, sizeof(main_name), "schema-%d.proto", (int)e->id);
        src[sc->nrefs] = (fm_proto_source){main_name, sc->text, sc->text_len};
        char why[512];
        e->proto = fm_proto_schema_new(src, sc->nrefs + 1, sc->nrefs, why,
                                       sizeof(why));
        e->rc = e->proto ? BS_FRAMED_FOUND : BS_FRAMED_BAD;
        snprintf(err, sizeof(err), "schema id %d does not parse as "
                 "Protobuf: %s", (int)e->id, why);
    }
    if (e->rc != BS_FRAMED_FOUND)
        e->why = strdup(err);
}

/* The entry for (part, id), compiled on first use.  NULL with *rc and why
 * set when the registry gives no schema (nothing kept: the registry's
 * own cache keeps a 404 for its negative TTL) or memory runs out. */
static entry *entry_for(bs_framed *f, const bs_config_keypart *part,
                        int32_t id, bs_framed_result *rc, char *why,
                        size_t why_size)
{
    entry *e = lookup(f, part, id);
    if (e)
        return e;
    if (f->down) {
        *rc = BS_FRAMED_UNREACHABLE;
        bs_errf(why, why_size, "%s", f->down_why);
        return NULL;
    }
    const bs_registry_schema *sc;
    char err[BS_REGISTRY_MAX_NAME];
    switch (bs_registry_get(f->reg, id, &sc, err, sizeof(err))) {
    case BS_REGISTRY_FOUND:
        break;
    case BS_REGISTRY_NOT_FOUND:
        *rc = BS_FRAMED_BAD;
        bs_errf(why, why_size, "%s: schema id %d: not found in the registry",
                kind_name(part), (int)id);
        return NULL;
    case BS_REGISTRY_UNREACHABLE:
        *rc = BS_FRAMED_UNREACHABLE;
        f->down = true;
        snprintf(f->down_why, sizeof(f->down_why), "%s", err);
        bs_errf(why, why_size, "%s", err);
        return NULL;
    case BS_REGISTRY_BAD:
        *rc = BS_FRAMED_BAD;
        bs_errf(why, why_size, "%s: schema id %d: %s", kind_name(part), (int)id,
                err);
        return NULL;
    }
    make_room(f);
    e = calloc(1, sizeof(*e));
    if (!e) {
        *rc = BS_FRAMED_BAD;
        bs_errf(why, why_size, "%s: schema id %d: out of memory",
                kind_name(part), (int)id);
        return NULL;
    }
    e->part = part;
    e->id = id;
    e->used = ++f->tick;
    compile(e, sc);
    size_t b = bucket(part, id);
    e->next = f->buckets[b];
    f->buckets[b] = e;
    f->n++;
    return e;
}

/* A Protobuf record: its message picked by the indexes after the schema
 * id, the path compiled for that message once. */
static bs_framed_result protobuf_key(entry *e, const uint8_t *p, size_t n,
                                     fm_key *out, char *why, size_t why_size)
{
    const fm_proto_message *msg;
    const uint8_t *payload;
    size_t plen;
    char err[512];
    if (fm_proto_message_by_index(e->proto, p, n, &msg, &payload, &plen, err,
                                  sizeof(err)) != 0) {
        bs_errf(why, why_size, "protobuf: schema id %d: %s", (int)e->id, err);
        return BS_FRAMED_BAD;
    }
    pb_path *pp = NULL, one = {msg, NULL, NULL};
    for (size_t i = 0; i < e->npb && !pp; i++)
        if (e->pb[i].msg == msg)
            pp = &e->pb[i];
    if (!pp) {
        pp = e->npb < MAX_PB_PATHS ? &e->pb[e->npb] : &one;
        *pp = one;
        pp->path = fm_pb_path_compile(msg, e->part->arg, err, sizeof(err));
        if (!pp->path)
            pp->why = strdup(err);
        if (pp != &one)
            e->npb++;
    }
    bs_framed_result rc = BS_FRAMED_MISSING;
    if (!pp->path) {
        bs_errf(why, why_size, "protobuf: schema id %d: %s", (int)e->id,
                pp->why ? pp->why : "out of memory");
    } else {
        fm_pb_result r = fm_pb_extract(pp->path, payload, plen, out, err,
                                       sizeof(err));
        if (r == FM_PB_FOUND) {
            rc = fm_key_ok(out) ? BS_FRAMED_FOUND : BS_FRAMED_BAD;
        } else {
            rc = r == FM_PB_MISSING ? BS_FRAMED_MISSING : BS_FRAMED_BAD;
            bs_errf(why, why_size, "%s", err);
        }
    }
    if (pp == &one) {
        fm_pb_path_destroy(one.path);
        free(one.why);
    }
    return rc;
}

bs_framed_result bs_framed_key(bs_framed *f, const bs_config_keypart *part,
                               const void *bytes, size_t len, fm_key *out,
                               int32_t *schema_id, char *why,
                               size_t why_size)
{
    uint32_t id;
    const uint8_t *rest;
    size_t rest_len;
    char err[128];
    *schema_id = -1;
    if (fm_frame_parse(bytes, len, &id, &rest, &rest_len, err,
                       sizeof(err)) != 0) {
        bs_errf(why, why_size, "%s: %s", kind_name(part), err);
        return BS_FRAMED_BAD;
    }
    if (id > INT32_MAX) {
        bs_errf(why, why_size, "%s: schema id %u is out of range",
                kind_name(part), id);
        return BS_FRAMED_BAD;
    }
    *schema_id = (int32_t)id;
    bs_framed_result rc;
    entry *e = entry_for(f, part, (int32_t)id, &rc, why, why_size);
    if (!e)
        return rc;
    if (e->rc != BS_FRAMED_FOUND) {
        bs_errf(why, why_size, "%s: %s", kind_name(part), e->why ? e->why
                                                             : "out of memory");
        return e->rc;
    }
    if (e->proto)
        return protobuf_key(e, rest, rest_len, out, why, why_size);
    switch (fm_avro_extract(e->avro, rest, rest_len, out, why, why_size)) {
    case FM_AVRO_FOUND:
        return BS_FRAMED_FOUND;
    case FM_AVRO_MISSING:
        return BS_FRAMED_MISSING;
    case FM_AVRO_BAD:
        break;
    }
    return BS_FRAMED_BAD;
}

bs_framed_result bs_framed_probe(bs_framed *f, int32_t schema_id, char *why,
                                 size_t why_size)
{
    const bs_registry_schema *sc;
    char err[BS_REGISTRY_MAX_NAME];
    if (bs_registry_get(f->reg, schema_id, &sc, err, sizeof(err)) ==
        BS_REGISTRY_UNREACHABLE) {
        f->down = true;
        snprintf(f->down_why, sizeof(f->down_why), "%s", err);
        bs_errf(why, why_size, "%s", err);
        return BS_FRAMED_UNREACHABLE;
    }
    f->down = false;
    return BS_FRAMED_FOUND;
}

uint64_t bs_framed_requests(const bs_framed *f)
{
    return bs_registry_requests(f->reg);
}

size_t bs_framed_entries(const bs_framed *f)
{
    return f->n;
}
