/*
 * scalable.c -- a scalable Bloom filter (Almeida, Baquero, Preguica, Hutchison,
 * "Scalable Bloom Filters", 2007): a cascade of blocked layers for streams
 * whose size nobody knows in advance.
 *
 * Layer i holds n0*s^i keys at error P0*r^i, P0 = P*(1-r); the compound
 * error 1 - prod(1 - P0 r^i) <= sum P0 r^i < P for any number of layers.  A
 * layer is full when the count of inserts that set a new bit reaches its
 * capacity; then the next insert opens a new layer.  Lookups go newest layer
 * first (recent keys are the likeliest duplicates, and the newest layer is
 * the largest).  The filter owns its layers.
 */
#include "bf_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void bf_scalable_params_default(bf_scalable_params *p)
{
    p->initial_capacity = 100000;
    p->fpr = 1e-6;
    p->growth = 2.0;
    p->tightening = 0.85;
    p->seed = BF_DEFAULT_SEED;
    p->max_bytes = 0;
}

static bool params_valid(const bf_scalable_params *p, char *errstr,
                         size_t errstr_size)
{
    if (p->initial_capacity == 0) {
        bf_seterr(errstr, errstr_size, "initial capacity must be >= 1");
        return false;
    }
    if (!(p->fpr > 0 && p->fpr <= BF_FPR_MAX)) {
        bf_seterr(errstr, errstr_size, "fpr %g is outside (0, %g]", p->fpr,
                  BF_FPR_MAX);
        return false;
    }
    if (!(p->growth >= 1.0 && p->growth <= 1024.0)) {
        bf_seterr(errstr, errstr_size, "growth %g is outside [1, 1024]",
                  p->growth);
        return false;
    }
    if (!(p->tightening > 0 && p->tightening < 1)) {
        bf_seterr(errstr, errstr_size, "tightening %g is outside (0, 1)",
                  p->tightening);
        return false;
    }
    return true;
}

/* Capacity and error of layer i. */
static void layer_target(const bf_scalable_params *p, uint32_t i,
                         uint64_t *capacity, double *fpr)
{
    double cap = ceil((double)p->initial_capacity * pow(p->growth, i));
    *capacity = cap >= 1e18 ? UINT64_C(1000000000000000000) : (uint64_t)cap;
    *fpr = p->fpr * (1 - p->tightening) * pow(p->tightening, i);
}

bf_err bf_scalable_layer_geometry(const bf_scalable *sb, uint32_t i,
                                  uint64_t *nblocks, uint32_t *k,
                                  uint64_t *capacity, double *fpr)
{
    layer_target(&sb->params, i, capacity, fpr);
    return bf_size_for(*capacity, *fpr, BF_BLOCK_BITS, nblocks, k);
}

bf_scalable *bf_scalable_wrap(const bf_scalable_params *p,
                              bf_blocked **layers, uint32_t nlayers)
{
    bf_scalable *sb = calloc(1, sizeof(*sb));
    if (!sb)
        return NULL;
    sb->params = *p;
    sb->layers = layers;
    sb->nlayers = nlayers;
    for (uint32_t i = 0; i < nlayers; i++)
        sb->bytes += layers[i]->nblocks * BF_BLOCK_BYTES;
    return sb;
}

/* Appends layer number sb->nlayers.  BF_ERR_NOMEM when memory or max_bytes
 * says no, BF_ERR_INVALID past BF_MAX_LAYERS or the smallest sizable fpr. */
static bf_err add_layer(bf_scalable *sb, char *errstr, size_t errstr_size)
{
    if (sb->nlayers >= BF_MAX_LAYERS) {
        bf_seterr(errstr, errstr_size, "scalable filter has %u layers, the "
                  "most it may have", sb->nlayers);
        return BF_ERR_NOMEM;
    }
    if (sb->params.max_bytes && sb->next_bytes &&
        sb->bytes + sb->next_bytes > sb->params.max_bytes) {
        bf_seterr(errstr, errstr_size,
                  "layer %u needs %llu bytes and would pass the cap of %llu "
                  "bytes",
                  sb->nlayers, (unsigned long long)sb->next_bytes,
                  (unsigned long long)sb->params.max_bytes);
        return BF_ERR_NOMEM;
    }
    uint64_t capacity, nblocks;
    double fpr;
    uint32_t k;
    layer_target(&sb->params, sb->nlayers, &capacity, &fpr);
    if (bf_size_for(capacity, fpr, BF_BLOCK_BITS, &nblocks, &k) != BF_OK) {
        bf_seterr(errstr, errstr_size,
                  "layer %u (%llu keys at fpr %g) cannot be sized",
                  sb->nlayers, (unsigned long long)capacity, fpr);
        return BF_ERR_NOMEM;
    }
    uint64_t bytes = nblocks * BF_BLOCK_BYTES;
    sb->next_bytes = bytes;
    if (sb->params.max_bytes && sb->bytes + bytes > sb->params.max_bytes) {
        bf_seterr(errstr, errstr_size,
                  "layer %u needs %llu bytes and would pass the cap of %llu "
                  "bytes",
                  sb->nlayers, (unsigned long long)bytes,
                  (unsigned long long)sb->params.max_bytes);
        return BF_ERR_NOMEM;
    }
    bf_blocked **layers =
        realloc(sb->layers, (sb->nlayers + 1) * sizeof(*layers));
    if (!layers) {
        bf_seterr(errstr, errstr_size, "out of memory");
        return BF_ERR_NOMEM;
    }
    sb->layers = layers;
    bf_blocked *bf = bf_blocked_new_geometry(nblocks, k, sb->params.seed,
                                             errstr, errstr_size);
    if (!bf)
        return BF_ERR_NOMEM;
    /* A tracked filter's new layer is all changes from the mark on: its
     * blocks are written as they fill (delta.c), never the empty rest. */
    if (sb->track && !bf_blocked_track(bf)) {
        bf_blocked_destroy(bf);
        bf_seterr(errstr, errstr_size, "out of memory for layer %u's "
                  "change bitmap", sb->nlayers);
        return BF_ERR_NOMEM;
    }
    bf->capacity = capacity;
    bf->fpr = fpr;
    sb->layers[sb->nlayers++] = bf;
    sb->bytes += bytes;
    sb->next_bytes = 0;
    return BF_OK;
}

bf_scalable *bf_scalable_new(const bf_scalable_params *p, char *errstr,
                             size_t errstr_size)
{
    if (!params_valid(p, errstr, errstr_size))
        return NULL;
    bf_scalable *sb = bf_scalable_wrap(p, NULL, 0);
    if (!sb) {
        bf_seterr(errstr, errstr_size, "out of memory");
        return NULL;
    }
    if (add_layer(sb, errstr, errstr_size) != BF_OK) {
        bf_scalable_destroy(sb);
        return NULL;
    }
    return sb;
}

void bf_scalable_destroy(bf_scalable *sb)
{
    if (!sb)
        return;
    for (uint32_t i = 0; i < sb->nlayers; i++)
        bf_blocked_destroy(sb->layers[i]);
    free(sb->layers);
    free(sb);
}

uint64_t bf_scalable_seed(const bf_scalable *sb) { return sb->params.seed; }

void bf_scalable_set_max_bytes(bf_scalable *sb, uint64_t max_bytes)
{
    sb->params.max_bytes = max_bytes;
}

void bf_scalable_params_get(const bf_scalable *sb, bf_scalable_params *out)
{
    *out = sb->params;
}

bool bf_scalable_contains_h(const bf_scalable *sb, bf_hash h)
{
    for (uint32_t i = sb->nlayers; i-- > 0;)
        if (bf_blocked_contains_h(sb->layers[i], h))
            return true;
    return false;
}

bool bf_scalable_contains(const bf_scalable *sb, const void *key, size_t len)
{
    return bf_scalable_contains_h(sb, bf_hash_key(key, len, sb->params.seed));
}

void bf_scalable_prefetch_h(const bf_scalable *sb, bf_hash h)
{
    for (uint32_t i = sb->nlayers; i-- > 0;)
        bf_blocked_prefetch_h(sb->layers[i], h);
}

int bf_scalable_add_if_absent_h(bf_scalable *sb, bf_hash h)
{
    if (bf_scalable_contains_h(sb, h))
        return 0;
    bf_blocked *top = sb->layers[sb->nlayers - 1];
    if (bf_blocked_inserts(top) >= top->capacity) {
        if (add_layer(sb, NULL, 0) != BF_OK)
            return -BF_ERR_NOMEM;
        top = sb->layers[sb->nlayers - 1];
    }
    /* The newest layer said absent, so this sets a new bit and counts;
     * its block is in cache from that lookup (but in a layer just added),
     * so counting the bits costs nothing here, and keeps the fill the
     * stage's metrics read every second exact without a recount. */
    (void)bf_blocked_add_counted_h(top, h);
    return 1;
}

int bf_scalable_add_if_absent(bf_scalable *sb, const void *key, size_t len)
{
    return bf_scalable_add_if_absent_h(sb,
                                       bf_hash_key(key, len, sb->params.seed));
}

uint32_t bf_scalable_layers(const bf_scalable *sb) { return sb->nlayers; }

bool bf_scalable_layer_info(const bf_scalable *sb, uint32_t layer,
                            bf_info *out)
{
    if (layer >= sb->nlayers)
        return false;
    bf_blocked_info(sb->layers[layer], out);
    return true;
}

void bf_scalable_info(const bf_scalable *sb, bf_info *out)
{
    memset(out, 0, sizeof(*out));
    out->kind = BF_KIND_SCALABLE;
    out->hash_id = BF_HASH_XXH3_128;
    out->seed = sb->params.seed;
    out->fpr_target = sb->params.fpr;
    out->layers = sb->nlayers;
    double pass = 1.0; /* probability an absent key passes every layer */
    for (uint32_t i = 0; i < sb->nlayers; i++) {
        bf_info li;
        bf_blocked_info(sb->layers[i], &li);
        out->capacity += li.capacity;
        out->k = li.k;
        out->scheme = li.scheme;
        out->cells += li.cells;
        out->bytes += li.bytes;
        out->inserts += li.inserts;
        out->cells_set += li.cells_set;
        out->est_keys += li.est_keys;
        pass *= 1.0 - li.est_fpr;
    }
    out->fill = out->cells ? (double)out->cells_set / (double)out->cells : 0;
    out->est_fpr = 1.0 - pass;
}
