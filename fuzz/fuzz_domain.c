/*
 * fuzz_domain.c -- libFuzzer target for key normalization and domain
 * lookups (formats/normalize.c, formats/domain.c) on arbitrary bytes: the
 * keys of a stream and the lines of a list file.
 *
 * Input: byte 0 the normalization flags (FM_NORM_*), the rest the key.
 * Checks, beyond the sanitizers: normalizing never lengthens a key, is
 * the same in place and is idempotent; every lookup is 1 to 253 bytes,
 * has no uppercase ASCII, and is the next one's parent at a label
 * boundary (a suffix after a '.') unless the key is one IPv6 or IPv4
 * address; labels are 1 to 63 bytes; the count stays within
 * FM_DOMAIN_MAX_LOOKUPS.
 */
#include "fm_domain.h"
#include "fm_normalize.h"
#include "fuzz_check.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned flags = data[0] & (FM_NORM_LOWER | FM_NORM_TRIM);
    const uint8_t *key = data + 1;
    size_t len = size - 1;
    uint8_t *out = malloc(len + 1), *again = malloc(len + 1);
    CHECK(out && again);
    char err[256];
    size_t n, m;
    CHECK(fm_norm_apply(flags, key, len, out, len, &n, err, sizeof(err)) == 0);
    CHECK(n <= len);
    CHECK(fm_norm_apply(flags, out, n, again, n, &m, err, sizeof(err)) == 0);
    CHECK(m == n && !memcmp(out, again, n));
    memcpy(again, key, len);
    CHECK(fm_norm_apply(flags, again, len, again, len, &m, err,
                        sizeof(err)) == 0);
    CHECK(m == n && !memcmp(out, again, n));
    if (n && fm_norm_apply(flags, key, len, again, n - 1, &m, err,
                           sizeof(err)) != -1)
        CHECK(m <= n - 1);

    fm_domain d;
    if (fm_domain_parse(&d, out, n, err, sizeof(err)) == 0) {
        unsigned c = fm_domain_count(&d);
        CHECK(c >= 1 && c <= FM_DOMAIN_MAX_LOOKUPS);
        CHECK(d.len >= 1 && d.len <= FM_DOMAIN_MAX && !d.name[d.len]);
        size_t prev_len = 0;
        const char *prev = NULL;
        for (unsigned i = 0; i < c; i++) {
            size_t l;
            const char *s = fm_domain_at(&d, i, &l);
            CHECK(l >= 1 && l <= FM_DOMAIN_MAX);
            for (size_t j = 0; j < l; j++)
                CHECK(!(s[j] >= 'A' && s[j] <= 'Z'));
            if (prev) {
                CHECK(l < prev_len && s == prev + (prev_len - l) &&
                      s[-1] == '.');
                CHECK(prev_len - l - 1 >= 1 &&
                      prev_len - l - 1 <= FM_DOMAIN_MAX_LABEL);
            }
            prev = s;
            prev_len = l;
        }
        if (c > 1) {
            CHECK(memchr(prev, '.', prev_len) == NULL);
            CHECK(prev_len <= FM_DOMAIN_MAX_LABEL);
        }
    } else {
        CHECK(fm_domain_count(&d) == 0 && !strncmp(err, "domain: ", 8));
    }
    free(out);
    free(again);
    return 0;
}
