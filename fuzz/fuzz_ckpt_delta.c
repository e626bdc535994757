/*
 * fuzz_ckpt_delta.c -- libFuzzer target for checkpoint deltas
 * (CHECKPOINT_DIR/TOPIC-P.SEQ.ckpd: stage/checkpoint/checkpoint.c's bs_ckpt_decode and
 * bs_ckpt_apply, which ends in libbloomfilters' bf_filter_delta_apply).
 * The input is a whole delta file; seeds in fuzz/corpus/ckpt_delta/ are
 * real ones made from the base in ckpt_delta_base.h (fuzz/make_seeds).
 *
 * Each input is decoded twice: as given, then with both checksums
 * recomputed (the filter delta's own trailer, then the file's), so
 * mutations reach the checks behind them.  A delta that decodes is applied
 * to the base state.  Promises checked (a broken one aborts):
 *   - a failed decode frees everything and names the file;
 *   - a refused apply leaves the state exactly as it was (the filter's
 *     bytes, seq, id, offset) and says why, naming the file;
 *   - an applied delta leaves a filter that serializes, loads back to the
 *     same bytes, has no changes pending and is at the delta's id.
 */
#include "fuzz_check.h"
#include "ckpt_delta_base.h"
#include "fuzz_ckpt.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

static bf_membuf serialize(const bf_filter *f)
{
    bf_membuf m = {NULL, 0, 0};
    CHECK(bf_filter_serialize(f, bf_membuf_write, &m) == BF_OK);
    return m;
}

static void apply(bs_checkpoint *d)
{
    bs_checkpoint c;
    CHECK(delta_base_state(&c) == 0);
    bf_membuf before = serialize(c.filter);
    char err[1024] = "";
    if (bs_ckpt_apply(&c, d, "fuzz.ckpd", err, sizeof err) == 0) {
        uint64_t mark = 0;
        CHECK(bf_filter_tracked(c.filter, &mark) && mark == d->id);
        CHECK(c.seq == d->seq && c.id == d->id);
        CHECK(c.next_offset == d->next_offset);
        CHECK(bf_filter_delta_blocks(c.filter) == 0);
        bf_membuf after = serialize(c.filter);
        bf_filter *back = NULL;
        CHECK(bf_filter_load_mem(after.buf, after.len, BF_LOAD_COPY, &back,
                                 err, sizeof err) == BF_OK);
        bf_membuf again = serialize(back);
        CHECK(again.len == after.len &&
              memcmp(again.buf, after.buf, after.len) == 0);
        free(again.buf);
        free(after.buf);
        bf_filter_destroy(back);
    } else {
        CHECK(strncmp(err, "fuzz.ckpd: ", 11) == 0);
        CHECK(c.seq == DELTA_BASE_SEQ && c.id == DELTA_BASE_ID &&
              c.next_offset == 100);
        bf_membuf after = serialize(c.filter);
        CHECK(after.len == before.len &&
              memcmp(after.buf, before.buf, before.len) == 0);
        free(after.buf);
    }
    free(before.buf);
    bs_ckpt_free(&c);
}

static void decode(const uint8_t *buf, size_t len)
{
    char err[1024];
    bs_checkpoint d;
    int rc = bs_ckpt_decode(buf, len, "fuzz.ckpd", &d, err, sizeof err);
    if (rc == 1) {
        if (d.delta) {
            CHECK(d.filter == NULL && d.dbytes != NULL && d.seq > 0);
            apply(&d);
        }
        bs_ckpt_free(&d);
    } else {
        CHECK(rc == -1 && d.filter == NULL && d.wm == NULL &&
              d.dmem == NULL);
        CHECK(strncmp(err, "fuzz.ckpd: ", 11) == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    CHECK(fuzz_ckpt_twice(data, size, decode));
    return 0;
}
