/*
 * normalize.c -- case folding and trimming of keys (fm_normalize.h): a
 * UTF-8 reader that takes invalid bytes one at a time and leaves them as
 * they are, the simple lowercase mappings of five blocks as ranges, and
 * the White_Space set.
 */
#include "fm_normalize.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* The well-formed UTF-8 sequence at p[0..n) (Unicode Table 3-7): its
 * length, and the code point in *cp; 0 when p[0] does not start one. */
static size_t utf8_seq(const uint8_t *p, size_t n, uint32_t *cp)
{
    uint8_t b = p[0];
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    size_t len;
    uint8_t lo = 0x80, hi = 0xBF; /* the range of the second byte */
    if (b >= 0xC2 && b <= 0xDF)
        len = 2;
    else if (b >= 0xE0 && b <= 0xEF) {
        len = 3;
        if (b == 0xE0)
            lo = 0xA0; /* no overlong forms */
        else if (b == 0xED)
            hi = 0x9F; /* no surrogates */
    } else if (b >= 0xF0 && b <= 0xF4) {
        len = 4;
        if (b == 0xF0)
            lo = 0x90;
        else if (b == 0xF4)
            hi = 0x8F; /* nothing past U+10FFFF */
    } else
        return 0;
    if (n < len || p[1] < lo || p[1] > hi)
        return 0;
    uint32_t c = b & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if (i > 1 && (p[i] & 0xC0) != 0x80)
            return 0;
        c = c << 6 | (p[i] & 0x3F);
    }
    *cp = c;
    return len;
}

/* Runs of (uppercase, lowercase) pairs from first to last: cp is an
 * uppercase letter of one when it is an even distance from first, and its
 * lowercase is the next code point. */
static bool pair(uint32_t cp, uint32_t first, uint32_t last)
{
    return cp >= first && cp <= last && ((cp - first) & 1) == 0;
}

uint32_t fm_norm_lower_cp(uint32_t cp)
{
    if (cp < 0x80)
        return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
    if (cp < 0x100)
        return cp >= 0xC0 && cp <= 0xDE && cp != 0xD7 ? cp + 32 : cp;
    if (cp < 0x180) { /* Latin Extended-A */
        if (cp == 0x130)
            return 'i';
        if (cp == 0x178)
            return 0xFF;
        if (pair(cp, 0x100, 0x12E) || pair(cp, 0x132, 0x136) ||
            pair(cp, 0x139, 0x147) || pair(cp, 0x14A, 0x176) ||
            pair(cp, 0x179, 0x17D))
            return cp + 1;
        return cp;
    }
    if (cp >= 0x370 && cp < 0x400) { /* Greek and Coptic */
        if (pair(cp, 0x370, 0x372) || cp == 0x376 || pair(cp, 0x3D8, 0x3EE) ||
            cp == 0x3F7 || cp == 0x3FA)
            return cp + 1;
        if ((cp >= 0x391 && cp <= 0x3A1) || (cp >= 0x3A3 && cp <= 0x3AB))
            return cp + 32;
        if (cp >= 0x388 && cp <= 0x38A)
            return cp + 37;
        if (cp == 0x38E || cp == 0x38F)
            return cp + 63;
        if (cp >= 0x3FD)
            return cp - 130;
        switch (cp) {
        case 0x37F: return 0x3F3;
        case 0x386: return 0x3AC;
        case 0x38C: return 0x3CC;
        case 0x3CF: return 0x3D7;
        case 0x3F4: return 0x3B8;
        case 0x3F9: return 0x3F2;
        default: return cp;
        }
    }
    if (cp >= 0x400 && cp < 0x500) { /* Cyrillic */
        if (cp < 0x410)
            return cp + 80;
        if (cp < 0x430)
            return cp + 32;
        if (pair(cp, 0x460, 0x480) || pair(cp, 0x48A, 0x4BE) ||
            pair(cp, 0x4D0, 0x4FE))
            return cp + 1;
        if (cp == 0x4C0)
            return 0x4CF;
        if (pair(cp, 0x4C1, 0x4CD))
            return cp + 1;
        return cp;
    }
    return cp;
}

static bool is_space(uint32_t cp)
{
    if (cp < 0x100)
        return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 ||
               cp == 0xA0;
    return cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000 ||
           cp == 0xFEFF;
}

/* [*from, *to) of in without the white space at either end. */
static void trim_span(const uint8_t *in, size_t len, size_t *from, size_t *to)
{
    size_t start = len, end = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp = in[i];
        size_t n = 1;
        bool space;
        if (cp < 0x80) { /* ASCII: the common case */
            space = cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
        } else {
            n = utf8_seq(in + i, len - i, &cp);
            space = n && is_space(cp);
            if (!n)
                n = 1;
        }
        if (!space) {
            if (start == len)
                start = i;
            end = i + n;
        }
        i += n;
    }
    *from = start == len ? 0 : start;
    *to = start == len ? 0 : end;
}

int fm_norm_apply(unsigned flags, const uint8_t *in, size_t len, uint8_t *out,
                  size_t out_size, size_t *out_len, char *errstr,
                  size_t errstr_size)
{
    size_t from = 0, to = len;
    if (flags & FM_NORM_TRIM)
        trim_span(in, len, &from, &to);
    if (!(flags & FM_NORM_LOWER)) {
        if (to - from > out_size)
            goto small;
        memmove(out, in + from, to - from);
        *out_len = to - from;
        return 0;
    }
    size_t w = 0;
    for (size_t i = from; i < to;) {
        uint8_t b = in[i];
        if (b < 0x80) { /* ASCII: the common case, one byte to one */
            if (w >= out_size)
                goto small;
            out[w++] = b >= 'A' && b <= 'Z' ? (uint8_t)(b + 32) : b;
            i++;
            continue;
        }
        uint32_t cp;
        size_t n = utf8_seq(in + i, to - i, &cp);
        if (n != 2) { /* nothing of 3 or 4 bytes folds; invalid bytes pass */
            if (!n)
                n = 1;
            if (n > out_size - w)
                goto small;
            memmove(out + w, in + i, n);
            w += n;
            i += n;
            continue;
        }
        uint32_t lc = fm_norm_lower_cp(cp); /* below U+0800: 1 or 2 bytes */
        if (lc < 0x80) {
            if (w >= out_size)
                goto small;
            out[w++] = (uint8_t)lc;
        } else {
            if (out_size - w < 2)
                goto small;
            out[w++] = (uint8_t)(0xC0 | lc >> 6);
            out[w++] = (uint8_t)(0x80 | (lc & 0x3F));
        }
        i += 2;
    }
    *out_len = w;
    return 0;
small:
    snprintf(errstr, errstr_size,
             "normalize: output buffer of %zu bytes too small for a key of "
             "%zu bytes",
             out_size, len);
    return -1;
}

int fm_norm_parse(const char *list, unsigned *flags, char *errstr,
                  size_t errstr_size)
{
    static const struct {
        const char *word;
        unsigned flag;
    } words[] = {{"lower", FM_NORM_LOWER}, {"trim", FM_NORM_TRIM}};
    unsigned f = 0;
    const char *p = list;
    while (*p == ' ' || *p == '\t')
        p++;
    if (!*p) {
        *flags = 0;
        return 0;
    }
    for (;;) {
        const char *s = p, *e;
        while (*p && *p != ',')
            p++;
        e = p;
        while (s < e && (*s == ' ' || *s == '\t'))
            s++;
        while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        size_t n = (size_t)(e - s), i;
        for (i = 0; i < sizeof(words) / sizeof(words[0]); i++)
            if (strlen(words[i].word) == n && !memcmp(words[i].word, s, n))
                break;
        if (i == sizeof(words) / sizeof(words[0])) {
            if (n)
                snprintf(errstr, errstr_size,
                         "normalize: unknown \"%.*s\" in \"%s\" (known: "
                         "lower, trim)",
                         (int)(n > 64 ? 64 : n), s, list);
            else
                snprintf(errstr, errstr_size,
                         "normalize: empty word in \"%s\" (known: lower, "
                         "trim)",
                         list);
            return -1;
        }
        f |= words[i].flag;
        if (!*p)
            break;
        p++;
    }
    *flags = f;
    return 0;
}
