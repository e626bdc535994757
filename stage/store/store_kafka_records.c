/*
 * store_kafka_records.c -- the Kafka store's record formats
 * (store_kafka_records.h documents them): the manifest written
 * (bs_store_manifest_json) and parsed (bs_store_manifest_parse), and the
 * chunks of one state or of a whole chain gathered from records in any
 * order and made back into a checkpoint.  No broker here and no trust in the input: store_kafka.c
 * feeds these the records it reads, test_store and fuzz_store_kafka bytes
 * of their own.
 */
#include "store/store_kafka_records.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

char *bs_store_manifest_json(const bs_store_manifest *chain, size_t n,
                             int64_t input_offset)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++) {
        const bs_store_manifest *r = &chain[i];
        char hex[17];
        snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)r->xxh3);
        if (json_array_append_new(
                arr, json_pack("{s:I, s:I, s:I, s:I, s:s, s:I}", "seq",
                               (json_int_t)r->seq, "chunks",
                               (json_int_t)r->nchunks, "chunk_bytes",
                               (json_int_t)r->chunk_bytes, "size",
                               (json_int_t)r->size, "xxh3", hex, "first",
                               (json_int_t)r->first)) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    json_t *j = arr ? json_pack("{s:i, s:I, s:o}", "v", 2, "input_offset",
                                (json_int_t)input_offset, "states", arr)
                    : NULL;
    char *val = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return val;
}

#define MAX_CHUNK_BYTES (UINT64_C(16) << 20) /* checkpoint.chunk.bytes' */
#define MAX_CKPT_BYTES (UINT64_C(1) << 40)

/* One state's fields (v1: at the top of the manifest).  0 or -1. */
static int state_parse(json_t *j, bs_store_manifest *m)
{
    json_int_t seq = 0, nchunks = 0, chunk = 0, size = 0, first = -1;
    const char *hex = NULL;
    size_t hexlen = 0;
    if (json_unpack(j, "{s:I, s:I, s:I, s:I, s:s%, s:I}", "seq", &seq,
                    "chunks", &nchunks, "chunk_bytes", &chunk, "size", &size,
                    "xxh3", &hex, &hexlen, "first", &first) != 0)
        return -1;
    if (seq < 1 || first < 0 || chunk < 1 ||
        (uint64_t)chunk > MAX_CHUNK_BYTES || size < 1 ||
        (uint64_t)size > MAX_CKPT_BYTES || nchunks < 1 ||
        nchunks > (json_int_t)UINT32_MAX || hexlen != 16 ||
        strspn(hex, "0123456789abcdefABCDEF") != 16)
        return -1;
    /* exactly as many chunks as the size needs */
    if ((uint64_t)nchunks != ((uint64_t)size + (uint64_t)chunk - 1) /
                                 (uint64_t)chunk)
        return -1;
    m->seq = seq;
    m->nchunks = (uint32_t)nchunks;
    m->chunk_bytes = (uint64_t)chunk;
    m->size = (uint64_t)size;
    m->xxh3 = strtoull(hex, NULL, 16);
    m->first = first;
    return 0;
}

int bs_store_manifest_parse(const void *v, size_t len,
                            bs_store_manifest **states, size_t *n)
{
    *states = NULL;
    *n = 0;
    json_t *j = json_loadb(v, len, 0, NULL), *arr = NULL;
    json_int_t ver = 0;
    bs_store_manifest *out = NULL;
    size_t count = 1;
    int rc = -1;
    if (!j || json_unpack(j, "{s:I}", "v", &ver) != 0)
        goto out;
    if (ver == 2) {
        if (json_unpack(j, "{s:o}", "states", &arr) != 0 ||
            !json_is_array(arr) || (count = json_array_size(arr)) < 1 ||
            count > BS_STORE_MAX_STATES)
            goto out;
    } else if (ver != 1) {
        goto out;
    }
    if (!(out = malloc(count * sizeof(*out))))
        goto out;
    for (size_t i = 0; i < count; i++) {
        if (state_parse(arr ? json_array_get(arr, i) : j, &out[i]) != 0)
            goto out;
        /* a chain: seq consecutive, each state written after the one
         * before it (a restore reads from states[0].first on) */
        if (i > 0 && (out[i].seq != out[i - 1].seq + 1 ||
                      out[i].first < out[i - 1].first))
            goto out;
    }
    *states = out;
    *n = count;
    out = NULL;
    rc = 0;
out:
    free(out);
    json_decref(j);
    return rc;
}

struct bs_store_chunks {
    char prefix[600]; /* MANIFEST_KEY/SEQ/ */
    size_t prefixlen;
    bs_store_manifest m;
    uint8_t *buf;
    uint8_t *have;
    uint32_t got;
};

bs_store_chunks *bs_store_chunks_new(const char *manifest_key,
                                     const bs_store_manifest *m)
{
    bs_store_chunks *g = calloc(1, sizeof(*g));
    if (!g)
        return NULL;
    int n = snprintf(g->prefix, sizeof(g->prefix), "%s/%lld/", manifest_key,
                     (long long)m->seq);
    g->m = *m;
    g->buf = m->size <= SIZE_MAX ? malloc((size_t)m->size) : NULL;
    g->have = calloc(m->nchunks, 1);
    if (n < 0 || (size_t)n >= sizeof(g->prefix) || !g->buf || !g->have) {
        bs_store_chunks_free(g);
        return NULL;
    }
    g->prefixlen = (size_t)n;
    return g;
}

int bs_store_chunks_add(bs_store_chunks *g, const void *key, size_t klen,
                        const void *val, size_t vlen)
{
    if (!key || klen <= g->prefixlen || memcmp(key, g->prefix, g->prefixlen))
        return 0;
    /* the chunk index: decimal digits, no leading zero */
    const char *d = (const char *)key + g->prefixlen;
    size_t n = klen - g->prefixlen;
    if (n > 10 || (n > 1 && d[0] == '0'))
        return 0;
    uint64_t i = 0;
    for (size_t k = 0; k < n; k++) {
        if (d[k] < '0' || d[k] > '9')
            return 0;
        i = i * 10 + (uint64_t)(d[k] - '0');
    }
    if (i >= g->m.nchunks || g->have[i] || !val)
        return 0;
    uint64_t off = i * g->m.chunk_bytes;
    uint64_t want = g->m.size - off < g->m.chunk_bytes ? g->m.size - off
                                                       : g->m.chunk_bytes;
    if (vlen != want)
        return 0; /* not ours after all: the count check will say */
    memcpy(g->buf + off, val, vlen);
    g->have[i] = 1;
    return ++g->got == g->m.nchunks;
}

int bs_store_chunks_decode(bs_store_chunks *g, const char *name,
                           bs_checkpoint *out, char *errstr,
                           size_t errstr_size)
{
    memset(out, 0, sizeof(*out));
    if (g->got != g->m.nchunks) {
        snprintf(errstr, errstr_size, "%s: checkpoint %lld has %u of its %u "
                 "chunks (deleted by retention?)", name, (long long)g->m.seq,
                 g->got, g->m.nchunks);
        return -1;
    }
    if (XXH3_64bits(g->buf, (size_t)g->m.size) != g->m.xxh3) {
        snprintf(errstr, errstr_size, "%s: checkpoint %lld does not match "
                 "its manifest's checksum", name, (long long)g->m.seq);
        return -1;
    }
    return bs_ckpt_decode(g->buf, (size_t)g->m.size, name, out, errstr,
                          errstr_size);
}

void bs_store_chunks_free(bs_store_chunks *g)
{
    if (!g)
        return;
    free(g->buf);
    free(g->have);
    free(g);
}

struct bs_store_chain {
    size_t n, complete;
    bs_store_manifest *states;
    bs_store_chunks **g;
};

bs_store_chain *bs_store_chain_new(const char *manifest_key,
                                   const bs_store_manifest *states, size_t n)
{
    bs_store_chain *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->n = n;
    c->states = malloc((n ? n : 1) * sizeof(*c->states));
    c->g = calloc(n ? n : 1, sizeof(*c->g));
    if (!c->states || !c->g) {
        bs_store_chain_free(c);
        return NULL;
    }
    memcpy(c->states, states, n * sizeof(*states));
    for (size_t i = 0; i < n; i++)
        if (!(c->g[i] = bs_store_chunks_new(manifest_key, &states[i]))) {
            bs_store_chain_free(c);
            return NULL;
        }
    return c;
}

int bs_store_chain_add(bs_store_chain *c, int64_t offset, const void *key,
                       size_t klen, const void *val, size_t vlen)
{
    for (size_t i = 0; i < c->n; i++)
        /* A state's chunks are the ones from its chunk 0 on: a put that
         * failed before its manifest may have left chunks under the same
         * keys earlier. */
        if (offset >= c->states[i].first &&
            bs_store_chunks_add(c->g[i], key, klen, val, vlen) == 1)
            c->complete++;
    return c->n && c->complete == c->n;
}

int bs_store_chain_decode(bs_store_chain *c, const char *name,
                          bs_checkpoint *out, char *errstr,
                          size_t errstr_size)
{
    memset(out, 0, sizeof(*out));
    if (c->n == 0) {
        snprintf(errstr, errstr_size, "%s: a manifest naming no state", name);
        return -1;
    }
    if (bs_store_chunks_decode(c->g[0], name, out, errstr, errstr_size) != 1)
        return -1;
    if (out->delta) {
        snprintf(errstr, errstr_size, "%s: checkpoint %lld is a delta, not "
                 "the snapshot a chain starts from", name,
                 (long long)c->states[0].seq);
        bs_ckpt_free(out);
        return -1;
    }
    for (size_t i = 1; i < c->n; i++) {
        bs_checkpoint d;
        char dname[800];
        snprintf(dname, sizeof(dname), "%s (delta %lld)", name,
                 (long long)c->states[i].seq);
        int r = -1;
        if (bs_store_chunks_decode(c->g[i], dname, &d, errstr,
                                   errstr_size) == 1) {
            if (!d.delta)
                snprintf(errstr, errstr_size, "%s: a snapshot where a delta "
                         "belongs", dname);
            else if (bs_ckpt_apply(out, &d, dname, errstr, errstr_size) == 0)
                r = 1;
            bs_ckpt_free(&d);
        }
        if (r != 1) {
            bs_ckpt_free(out);
            return -1;
        }
    }
    bs_ckpt_track_from(out->filter, out->id);
    return 1;
}

void bs_store_chain_free(bs_store_chain *c)
{
    if (!c)
        return;
    for (size_t i = 0; c->g && i < c->n; i++)
        bs_store_chunks_free(c->g[i]);
    free(c->g);
    free(c->states);
    free(c);
}

