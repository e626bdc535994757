/*
 * fm_normalize.h -- key normalization (`dedup.key.normalize`,
 * `blocklist.NAME.normalize`): the same bytes in, the same bytes out on the
 * stream and in the list files, so a list and a stream agree.
 *
 *   lower  Unicode simple lowercase mappings (UnicodeData.txt field 13) of
 *          these blocks, each in full:
 *            U+0041-005A   ASCII A-Z
 *            U+00C0-00DE   Latin-1 Supplement (not U+00D7, the sign x)
 *            U+0100-017F   Latin Extended-A (U+0130 maps to i, U+0178 to
 *                          U+00FF)
 *            U+0370-03FF   Greek and Coptic (final sigma U+03C2 stays, it
 *                          is lowercase already)
 *            U+0400-04FF   Cyrillic
 *          Nothing else folds (no other script, no full mapping: U+00DF
 *          stays one character).  Every mapping keeps a character's UTF-8
 *          length or shortens it (U+0130, 2 bytes, to i), so the output is
 *          never longer than the input.
 *   trim   removes white space at both ends: U+0009-000D (tab, LF, VT, FF,
 *          CR), U+0020, U+0085, U+00A0, U+1680, U+2000-200A, U+2028,
 *          U+2029, U+202F, U+205F, U+3000 (Unicode's White_Space) and
 *          U+FEFF (the byte-order mark a list file may begin with).
 *          White space inside the key stays.
 *
 * Bytes that are not well-formed UTF-8 (a stray continuation byte, an
 * overlong form, a surrogate, a truncated sequence) pass through unchanged
 * and are never white space; each such byte is taken on its own, so what
 * follows it is read as usual.  The two commute: their order in a list does
 * not change the result.
 */
#ifndef BLOOMSTAGE_FM_NORMALIZE_H
#define BLOOMSTAGE_FM_NORMALIZE_H

#include <stddef.h>
#include <stdint.h>

#define FM_NORM_LOWER 1u
#define FM_NORM_TRIM 2u

/* Parses a comma-separated list of the words above ("lower,trim"; blanks
 * around a word ignored; "" is no normalization) into FM_NORM_* flags.
 * 0, or -1 with errstr naming the unknown or empty word. */
int fm_norm_parse(const char *list, unsigned *flags, char *errstr,
                  size_t errstr_size);

/* Writes in[0..len) normalized by flags into out[0..out_size), its length
 * in *out_len.  The output is never longer than len, so out_size >= len
 * always suffices, and out may be in (in place).  -1 with errstr when
 * out_size is too small (out is then partly written). */
int fm_norm_apply(unsigned flags, const uint8_t *in, size_t len, uint8_t *out,
                  size_t out_size, size_t *out_len, char *errstr,
                  size_t errstr_size);

/* The simple lowercase of a code point under the table above (itself when
 * it does not fold). */
uint32_t fm_norm_lower_cp(uint32_t cp);

#endif
