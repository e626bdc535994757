/*
 * fuzz_store_kafka.c -- libFuzzer target for the Kafka checkpoint store's
 * decoding (stage/store/store_kafka_records.c): a manifest record's value
 * (bs_store_manifest_parse: version 1, one state, or 2, a chain), then
 * records of the checkpoint topic offered to the chain as its chunks
 * (bs_store_chain_add), then the state they make (bs_store_chain_decode:
 * the snapshot's bs_ckpt_decode, then each delta decoded and applied by
 * bs_ckpt_apply).  No broker: the same functions the Kafka store's get runs
 * on what it reads.
 *
 * Input: the manifest's JSON up to the first '\n', then records, each
 *   u8 key length, key, u16 value length (little-endian; 0xffff = a
 *   tombstone, no bytes), value
 * until the input ends; the i-th record is at offset i.  The manifest key
 * is "bs1/g/t/0", so chunk keys are "bs1/g/t/0/SEQ/I".  Manifests whose
 * states claim more than 1 MiB in all are skipped (the decoder allocates
 * the claimed sizes, up to 1 TiB a state, by design).  Everything is freed
 * on every call.
 */
#include "store/store_kafka_records.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MANIFEST_KEY "bs1/g/t/0"
#define FUZZ_MAX_SIZE (1u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size);
    size_t mlen = nl ? (size_t)(nl - data) : size;
    bs_store_manifest *st;
    size_t n;
    if (bs_store_manifest_parse(data, mlen, &st, &n) != 0)
        return 0;
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const bs_store_manifest *m = &st[i];
        if (m->nchunks == 0 || m->size == 0 || m->chunk_bytes == 0 ||
            m->nchunks != (m->size + m->chunk_bytes - 1) / m->chunk_bytes ||
            (i > 0 && (m->seq != st[i - 1].seq + 1 || m->first < st[i - 1].first)))
            __builtin_trap(); /* parse promised these */
        total += m->size;
    }
    bs_store_chain *c = total <= FUZZ_MAX_SIZE && n >= 1
                            ? bs_store_chain_new(MANIFEST_KEY, st, n)
                            : NULL;
    free(st);
    if (!c)
        return 0;
    const uint8_t *p = nl ? nl + 1 : data + size, *end = data + size;
    for (int64_t offset = 0; end - p >= 1; offset++) {
        size_t klen = p[0];
        if ((size_t)(end - p) < 1 + klen + 2)
            break;
        const uint8_t *key = p + 1;
        size_t vlen = (size_t)key[klen] | (size_t)key[klen + 1] << 8;
        const uint8_t *val = key + klen + 2;
        p = val;
        if (vlen == 0xffff) {
            val = NULL;
            vlen = 0;
        } else if ((size_t)(end - p) < vlen) {
            break;
        } else {
            p += vlen;
        }
        (void)bs_store_chain_add(c, offset, key, klen, val, vlen);
    }
    bs_checkpoint out;
    char err[1024];
    if (bs_store_chain_decode(c, "fuzz", &out, err, sizeof(err)) == 1) {
        if (!out.filter || !out.topic[0] || out.next_offset < 0 || out.delta)
            __builtin_trap();
        bs_ckpt_free(&out);
    } else if (!strstr(err, "fuzz")) {
        __builtin_trap(); /* every error names what it read */
    }
    bs_store_chain_free(c);
    return 0;
}
