/*
 * fuzz_store_kafka.c -- libFuzzer target for the Kafka checkpoint store's
 * decoding (stage/store.c): a manifest record's value
 * (bs_store_manifest_parse), then records of the checkpoint topic offered
 * as its chunks (bs_store_chunks_add), then the checkpoint they make
 * (bs_store_chunks_decode, which ends in bs_ckpt_decode).  No broker: the
 * same functions bs_store_get runs on what it reads.
 *
 * Input: the manifest's JSON up to the first '\n', then records, each
 *   u8 key length, key, u16 value length (little-endian; 0xffff = a
 *   tombstone, no bytes), value
 * until the input ends.  The manifest key is "bs1/g/t/0", so chunk keys are
 * "bs1/g/t/0/SEQ/I".  Manifests claiming more than 1 MiB are skipped (the
 * decoder allocates the claimed size, up to 1 TiB, by design).  Everything
 * is freed on every call.
 */
#include "store.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define MANIFEST_KEY "bs1/g/t/0"
#define FUZZ_MAX_SIZE (1u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size);
    size_t mlen = nl ? (size_t)(nl - data) : size;
    bs_store_manifest m;
    if (bs_store_manifest_parse(data, mlen, &m) != 0)
        return 0;
    if (m.nchunks == 0 || m.size == 0 || m.chunk_bytes == 0 ||
        m.nchunks != (m.size + m.chunk_bytes - 1) / m.chunk_bytes)
        __builtin_trap(); /* parse promised these */
    if (m.size > FUZZ_MAX_SIZE)
        return 0;
    bs_store_chunks *g = bs_store_chunks_new(MANIFEST_KEY, &m);
    if (!g)
        return 0;
    const uint8_t *p = nl ? nl + 1 : data + size, *end = data + size;
    while (end - p >= 1) {
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
        (void)bs_store_chunks_add(g, key, klen, val, vlen);
    }
    bs_checkpoint c;
    char err[1024];
    if (bs_store_chunks_decode(g, "fuzz", &c, err, sizeof(err)) == 1) {
        if (!c.filter || !c.topic[0] || c.next_offset < 0)
            __builtin_trap();
        bs_ckpt_free(&c);
    } else if (!strstr(err, "fuzz")) {
        __builtin_trap(); /* every error names what it read */
    }
    bs_store_chunks_free(g);
    return 0;
}
