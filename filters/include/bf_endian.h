/*
 * bf_endian.h -- little-endian field access for serialized formats: the
 * filter format (format.c) and bloomstage's checkpoint format share it
 * (public for that reason; part of libbloomfilters' include/).
 * Byte by byte, so alignment and host byte order never matter.
 */
#ifndef BF_ENDIAN_H
#define BF_ENDIAN_H

#include <stdint.h>
#include <string.h>

static inline void bf_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void bf_put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline void bf_put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* An n-byte (n <= 8) little-endian unsigned integer. */
static inline uint64_t bf_getn(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static inline void bf_putf64(uint8_t *p, double d)
{
    uint64_t v;
    memcpy(&v, &d, 8);
    bf_put64(p, v);
}

static inline double bf_getf64(const uint8_t *p)
{
    uint64_t v = bf_getn(p, 8);
    double d;
    memcpy(&d, &v, 8);
    return d;
}

#endif
