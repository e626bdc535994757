/*
 * cache.c -- the client's answers by schema id: a hash index (linear
 * probing, backward-shift deletion) over a fixed array of entries, threaded
 * on a least-recently-used list; adding to a full cache evicts the least
 * recently used entry.  What an entry holds, and when a negative one
 * expires, is bs_registry_get's business (client.c).
 */
#include "registry/registry_int.h"

#include <stdlib.h>
#include <string.h>

static uint32_t slot_of(const bs_registry *reg, int32_t id)
{
    return ((uint32_t)id * UINT32_C(0x9E3779B1)) & reg->index_mask;
}

uint32_t bs_registry_cache_find(const bs_registry *reg, int32_t id)
{
    for (uint32_t s = slot_of(reg, id);; s = (s + 1) & reg->index_mask) {
        uint32_t e = reg->index[s];
        if (e == 0)
            return NIL;
        if (reg->entries[e - 1].id == id)
            return e - 1;
    }
}

static void lru_unlink(bs_registry *reg, uint32_t e)
{
    entry *x = &reg->entries[e];
    if (x->prev != NIL)
        reg->entries[x->prev].next = x->next;
    else
        reg->lru_head = x->next;
    if (x->next != NIL)
        reg->entries[x->next].prev = x->prev;
    else
        reg->lru_tail = x->prev;
}

static void lru_push_front(bs_registry *reg, uint32_t e)
{
    entry *x = &reg->entries[e];
    x->prev = NIL;
    x->next = reg->lru_head;
    if (reg->lru_head != NIL)
        reg->entries[reg->lru_head].prev = e;
    reg->lru_head = e;
    if (reg->lru_tail == NIL)
        reg->lru_tail = e;
}

void bs_registry_cache_touch(bs_registry *reg, uint32_t e)
{
    lru_unlink(reg, e);
    lru_push_front(reg, e);
}

void bs_registry_schema_free(bs_registry_schema *s)
{
    for (size_t i = 0; i < s->nrefs; i++) {
        free((char *)s->refs[i].name);
        free((char *)s->refs[i].subject);
        free((char *)s->refs[i].text);
    }
    free((bs_registry_ref *)s->refs);
    free((char *)s->text);
    memset(s, 0, sizeof *s);
}

void bs_registry_cache_remove(bs_registry *reg, uint32_t e)
{
    entry *x = &reg->entries[e];
    /* Backward-shift deletion keeps every probe chain unbroken. */
    uint32_t s = slot_of(reg, x->id);
    while (reg->index[s] != e + 1)
        s = (s + 1) & reg->index_mask;
    uint32_t hole = s;
    for (uint32_t t = (hole + 1) & reg->index_mask; reg->index[t];
         t = (t + 1) & reg->index_mask) {
        uint32_t home = slot_of(reg, reg->entries[reg->index[t] - 1].id);
        /* Move t into the hole unless its home lies in (hole, t]. */
        if (((t - home) & reg->index_mask) >= ((t - hole) & reg->index_mask)) {
            reg->index[hole] = reg->index[t];
            hole = t;
        }
    }
    reg->index[hole] = 0;
    lru_unlink(reg, e);
    bs_registry_schema_free(&x->schema);
    free(x->message);
    x->message = NULL;
    x->next = reg->free_head;
    reg->free_head = e;
    reg->nentries--;
}

entry *bs_registry_cache_add(bs_registry *reg, int32_t id)
{
    if (reg->nentries == reg->max_entries)
        bs_registry_cache_remove(reg, reg->lru_tail);
    uint32_t e = reg->free_head;
    entry *x = &reg->entries[e];
    reg->free_head = x->next;
    x->id = id;
    uint32_t s = slot_of(reg, id);
    while (reg->index[s])
        s = (s + 1) & reg->index_mask;
    reg->index[s] = e + 1;
    lru_push_front(reg, e);
    reg->nentries++;
    return x;
}

int bs_registry_cache_init(bs_registry *reg, size_t max)
{
    reg->max_entries = (uint32_t)max;
    uint32_t cap = 4;
    while (cap < 2 * reg->max_entries)
        cap *= 2;
    reg->index_mask = cap - 1;
    reg->index = calloc(cap, sizeof *reg->index);
    reg->entries = calloc(max, sizeof *reg->entries);
    if (!reg->index || !reg->entries)
        return -1;
    for (uint32_t i = 0; i < reg->max_entries; i++)
        reg->entries[i].next = i + 1 < reg->max_entries ? i + 1 : NIL;
    reg->free_head = 0;
    reg->lru_head = reg->lru_tail = NIL;
    return 0;
}

void bs_registry_cache_free(bs_registry *reg)
{
    if (reg->entries)
        for (uint32_t i = 0; i < reg->max_entries; i++) {
            bs_registry_schema_free(&reg->entries[i].schema);
            free(reg->entries[i].message);
        }
    free(reg->entries);
    free(reg->index);
}
