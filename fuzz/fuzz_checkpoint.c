/*
 * fuzz_checkpoint.c -- libFuzzer target for directory checkpoint files
 * (stage/checkpoint/checkpoint.c, bs_ckpt_decode: what bs_ckpt_load runs on the bytes
 * of CHECKPOINT_DIR/TOPIC-PARTITION.ckpt).  The input is a whole checkpoint
 * file; seeds in fuzz/corpus/checkpoint/ are real ones (fuzz/make-seeds).
 *
 * (Delta records, which the same decoder reads, are fuzz_ckpt_delta's.)
 * Each input is decoded twice: as given (what the stage does), then with
 * both checksums recomputed (the filter's own trailer where the header puts
 * the filter, then the file's), so mutations of the header and the filter
 * reach the checks behind the checksums.  A checkpoint that decodes is
 * encoded again (bs_ckpt_encode_record, what a checkpoint round writes,
 * with its audit sample), must decode to the same fields, and must encode
 * to the same bytes but for the time written and the checksum.  A broken promise aborts.
 */
#include "fuzz_check.h"
#include "fuzz_ckpt.h"

#include "checkpoint/checkpoint.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define FIXED FUZZ_CKPT_FIXED
#define TIME_OFF 24u

static void check_same(const bs_checkpoint *a, const bs_checkpoint *b)
{
    CHECK(strcmp(a->topic, b->topic) == 0);
    CHECK(a->partition == b->partition);
    CHECK(a->next_offset == b->next_offset);
    CHECK(a->nwm == b->nwm);
    for (uint32_t i = 0; i < a->nwm; i++) {
        CHECK(a->wm[i].partition == b->wm[i].partition);
        CHECK(a->wm[i].high == b->wm[i].high);
    }
    bf_info fa, fb;
    bf_filter_info(a->filter, &fa);
    bf_filter_info(b->filter, &fb);
    CHECK(fa.kind == fb.kind && fa.layers == fb.layers &&
          fa.cells == fb.cells && fa.cells_set == fb.cells_set &&
          fa.inserts == fb.inserts && fa.seed == fb.seed);
    CHECK((a->audit == NULL) == (b->audit == NULL));
    if (a->audit) {
        bf_audit_stats sa, sb;
        bf_audit_stats_get(a->audit, &sa);
        bf_audit_stats_get(b->audit, &sb);
        CHECK(sa.rate == sb.rate && sa.sampled == sb.sampled &&
              sa.lookups == sb.lookups &&
              sa.false_positives == sb.false_positives &&
              sa.entries == sb.entries && sa.bytes == sb.bytes);
    }
}

/* What a checkpoint round writes for c's state: a snapshot (seq 0 and a
 * new id, as bs_ckpt_encode names it) with its audit sample. */
static int encode(const bs_checkpoint *c, uint8_t **out, size_t *len,
                  char *err, size_t err_size)
{
    bs_ckpt_meta m = {c->topic, c->partition, c->next_offset, c->wm, c->nwm,
                      0, bs_ckpt_new_id(), 0, c->audit};
    return bs_ckpt_encode_record(&m, c->filter, false, out, len, err,
                                 err_size);
}

static void round_trip(const bs_checkpoint *c)
{
    char err[1024];
    uint8_t *e1 = NULL, *e2 = NULL;
    size_t l1 = 0, l2 = 0;
    /* A decoded checkpoint has a topic the encoder takes. */
    CHECK(encode(c, &e1, &l1, err, sizeof err) == 0);
    bs_checkpoint d;
    if (bs_ckpt_decode(e1, l1, "re-encoded", &d, err, sizeof err) != 1) {
        fprintf(stderr, "fuzz_checkpoint: a checkpoint's own encoding does "
                        "not decode: %s\n", err);
        abort();
    }
    check_same(c, &d);
    CHECK(encode(&d, &e2, &l2, err, sizeof err) == 0);
    /* Equal but for the time written, the state id (each encoding names
     * a new state) and the checksum over them. */
    CHECK(l1 == l2 && l1 >= FIXED + 8);
    memset(e1 + TIME_OFF, 0, 8);
    memset(e2 + TIME_OFF, 0, 8);
    size_t ids = FIXED + strlen(c->topic) + (size_t)c->nwm * 12;
    CHECK(ids + 16 <= l1);
    memset(e1 + ids + 8, 0, 8);
    memset(e2 + ids + 8, 0, 8);
    CHECK(memcmp(e1, e2, l1 - 8) == 0);
    bs_ckpt_free(&d);
    free(e1);
    free(e2);
}

static void decode(const uint8_t *buf, size_t len)
{
    char err[1024];
    bs_checkpoint c;
    int rc = bs_ckpt_decode(buf, len, "fuzz.ckpt", &c, err, sizeof err);
    if (rc == 1 && c.delta) {
        /* a delta record (fuzz_ckpt_delta applies them) */
        CHECK(c.filter == NULL && c.dbytes != NULL);
        bs_ckpt_free(&c);
    } else if (rc == 1) {
        CHECK(c.filter != NULL && (c.nwm == 0 || c.wm != NULL));
        CHECK(bf_filter_kind(c.filter) == BF_KIND_SCALABLE ||
          bf_filter_kind(c.filter) == BF_KIND_WINDOWED);
        CHECK(c.next_offset >= 0);
        round_trip(&c);
        bs_ckpt_free(&c);
    } else {
        /* Failure frees everything and says why, naming the file. */
        CHECK(rc == -1 && c.filter == NULL && c.wm == NULL &&
              c.audit == NULL);
        CHECK(strncmp(err, "fuzz.ckpt: ", 11) == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    CHECK(fuzz_ckpt_twice(data, size, decode));
    return 0;
}
