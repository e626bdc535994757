/*
 * stream.c -- see stream.h.
 */
#include "stream.h"
#include "kafka.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

h_stream *h_stream_new(size_t cap, int nparts, uint64_t seed)
{
    if (nparts <= 0 || nparts > H_STREAM_MAXP || cap >= 10000000)
        h_test_fail("h_stream_new(%zu, %d): at most %d partitions and 10M "
                    "records", cap, nparts, H_STREAM_MAXP);
    h_stream *st = h_xcalloc(1, sizeof(*st));
    st->cap = cap;
    st->nparts = nparts;
    st->seed = seed;
    st->id = h_xcalloc(cap, sizeof(*st->id));
    st->part = h_xcalloc(cap, sizeof(*st->part));
    st->off = h_xcalloc(cap, sizeof(*st->off));
    st->first = h_xcalloc(cap, sizeof(*st->first));
    st->key = h_xcalloc(cap, sizeof(*st->key));
    st->val = h_xcalloc(cap, sizeof(*st->val));
    st->ts = h_xcalloc(cap, sizeof(*st->ts));
    st->pad = h_xcalloc(cap, sizeof(*st->pad));
    return st;
}

void h_stream_free(h_stream *st)
{
    if (!st)
        return;
    free(st->id);
    free(st->part);
    free(st->off);
    free(st->first);
    free(st->key);
    free(st->val);
    free(st->ts);
    free(st->pad);
    free(st->out);
    free(st->copies);
    free(st);
}

static void stream_push(h_stream *st, uint32_t id)
{
    if (st->n >= st->cap)
        h_test_fail("stream full (%zu records)", st->cap);
    size_t i = st->n++;
    st->id[i] = id;
    st->part[i] = (int32_t)(h_mix64(id) % (uint64_t)st->nparts);
    st->off[i] = st->next[st->part[i]]++;
    snprintf(st->key[i], sizeof(st->key[i]), "k%07u", id);
    snprintf(st->val[i], sizeof(st->val[i]), "v%07zu", i);
}

void h_stream_add(h_stream *st, size_t count, unsigned dup_pct)
{
    for (size_t c = 0; c < count; c++) {
        uint32_t id;
        if (st->nids > 0 && h_splitmix64(&st->seed) % 100 < dup_pct)
            id = (uint32_t)(h_splitmix64(&st->seed) % st->nids);
        else
            id = UINT32_MAX;
        if (id == UINT32_MAX || st->pad[st->first[id]]) {
            id = (uint32_t)st->nids++;
            st->first[id] = st->n;
        }
        stream_push(st, id);
    }
}

void h_stream_add_big(h_stream *st, uint32_t pad)
{
    uint32_t id = (uint32_t)st->nids++;
    st->first[id] = st->n;
    stream_push(st, id);
    st->pad[st->n - 1] = pad;
}

h_record h_stream_rec(const h_stream *st, size_t i, char **big)
{
    h_record r = h_rec(st->key[i], st->val[i]);
    *big = NULL;
    if (st->pad[i]) {
        size_t len = strlen(st->val[i]);
        *big = h_xmalloc(len + st->pad[i]);
        memcpy(*big, st->val[i], len);
        memset(*big + len, '.', st->pad[i]);
        r.value = *big;
        r.value_len = len + st->pad[i];
    }
    r.partition = st->part[i];
    r.timestamp = st->ts[i];
    return r;
}

void h_stream_add_timed(h_stream *st, size_t count, int64_t t0,
                        int64_t step_ms, size_t window_records)
{
    for (size_t c = 0; c < count; c++) {
        size_t i = st->n, w = window_records ? window_records : 1;
        uint64_t r = h_splitmix64(&st->seed) % 100;
        /* How far back the copied record is, in records: inside half a
         * window, around the window's end, or well past it. */
        size_t lo = 1, hi = 0;
        if (r >= 40 && r < 70)
            hi = w / 2;
        else if (r >= 70 && r < 85)
            lo = w * 9 / 10, hi = w * 14 / 10;
        else if (r >= 85)
            lo = w * 3 / 2, hi = w * 3;
        uint32_t id;
        if (hi >= lo && i >= hi) {
            size_t back = lo + h_splitmix64(&st->seed) % (hi - lo + 1);
            id = st->id[i - back];
        } else {
            id = (uint32_t)st->nids++;
            st->first[id] = st->n;
        }
        stream_push(st, id);
        st->ts[i] = t0 + (int64_t)(i * (uint64_t)step_ms);
    }
}

uint32_t h_traffic_days(uint64_t per_day, int days, uint32_t *id,
                        int64_t *ts)
{
    const int64_t day = INT64_C(86400000);
    const double two_pi = 6.283185307179586;
    size_t n = (size_t)per_day * (size_t)(days > 0 ? days : 0);
    uint64_t rng = 42;
    uint32_t next_id = 0;
    size_t lo6 = 0, lo40 = 0, lo20 = 0;
    for (size_t i = 0; i < n; i++) {
        /* Record i's time: the day's records spread by a diurnal rate
         * r(t) ~ 2 - cos(2 pi t / day), whose CDF over a day,
         * (2x - sin(2 pi x)/(2 pi)) / 2, is inverted by Newton's method. */
        double u = (double)(i % per_day) / (double)per_day, x = u;
        for (int it = 0; it < 30; it++) {
            double f = (2 * x - sin(two_pi * x) / two_pi) / 2 - u;
            double df = (2 - cos(two_pi * x)) / 2;
            x -= f / df;
        }
        ts[i] = (int64_t)(i / per_day) * day + (int64_t)(x * (double)day) + 1;
        while (ts[lo6] < ts[i] - day / 4)
            lo6++;
        while (lo40 < i && ts[lo40] < ts[i] - day * 40 / 24)
            lo40++;
        while (lo20 < i && ts[lo20] < ts[i] - day * 20 / 24)
            lo20++;
        uint64_t r = (rng = h_mix64(rng)) % 100;
        if (r < 30 && i > lo6)
            id[i] = id[lo6 + h_mix64(rng + 1) % (i - lo6)];
        else if (r >= 30 && r < 50 && lo20 > lo40)
            id[i] = id[lo40 + h_mix64(rng + 2) % (lo20 - lo40)];
        else
            id[i] = next_id++;
    }
    return next_id;
}

void h_stream_add_days(h_stream *st, uint64_t per_day, int days, int64_t t0)
{
    size_t n = (size_t)per_day * (size_t)days;
    uint32_t *id = h_xcalloc(n ? n : 1, sizeof(*id));
    int64_t *ts = h_xcalloc(n ? n : 1, sizeof(*ts));
    (void)h_traffic_days(per_day, days, id, ts);
    size_t base = st->nids;
    for (size_t k = 0; k < n; k++) {
        size_t i = st->n;
        if (id[k] + base == st->nids && i < st->cap) /* a new key */
            st->first[st->nids++] = i;
        stream_push(st, (uint32_t)(id[k] + base));
        st->ts[i] = t0 + ts[k];
    }
    free(id);
    free(ts);
}

void h_stream_add_copies(h_stream *st, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        stream_push(st, st->id[i]);
}

void h_stream_ends(const h_stream *st, size_t upto, int64_t *end)
{
    for (int p = 0; p < st->nparts; p++)
        end[p] = 0;
    for (size_t i = 0; i < upto; i++)
        end[st->part[i]] = st->off[i] + 1;
}

void h_stream_produce(const h_stream *st, const char *bootstraps,
                      const char *topic, size_t from, size_t to,
                      const char *const *conf_kv)
{
    for (size_t c = from; c < to; c += 100000) {
        size_t end = to - c < 100000 ? to : c + 100000;
        h_record *recs = h_xcalloc(end - c, sizeof(*recs));
        char **big = h_xcalloc(end - c, sizeof(*big));
        for (size_t i = c; i < end; i++)
            recs[i - c] = h_stream_rec(st, i, &big[i - c]);
        int rc = h_produce_conf(bootstraps, topic, H_PARTITION_PER_RECORD,
                                recs, end - c, conf_kv);
        for (size_t i = c; i < end; i++)
            free(big[i - c]);
        free(big);
        free(recs);
        H_MUST(rc);
    }
    int64_t want[H_STREAM_MAXP];
    h_stream_ends(st, to, want);
    for (int p = 0; p < st->nparts; p++) {
        int64_t lo, hi;
        H_MUST(h_watermarks(bootstraps, topic, p, &lo, &hi));
        if (lo != 0 || hi != want[p])
            h_test_fail("%s [%d] holds offsets %lld to %lld after producing "
                        "records [0, %zu), want 0 to %lld", topic, p,
                        (long long)lo, (long long)hi, to,
                        (long long)want[p]);
    }
}

size_t h_stream_which(const h_stream *st, const h_record *r)
{
    const char *v = r->value;
    char *end = NULL;
    size_t i = v && v[0] == 'v' ? strtoul(v + 1, &end, 10) : 0;
    if (!v || v[0] != 'v' || i >= st->n || !r->key ||
        strcmp(r->key, st->key[i]) ||
        r->value_len != (size_t)(end - v) + st->pad[i])
        return st->n;
    for (size_t k = 0; k < st->pad[i]; k++)
        if (end[k] != '.')
            return st->n;
    return i;
}

h_outrec *h_read_out_conf(h_stream *st, const char *bootstraps,
                          const char *out_topic, const char *in_topic,
                          const char *const *conf_kv, size_t *n)
{
    h_record_list l = {0};
    int rc = h_consume_all_conf(bootstraps, out_topic, H_CONSUME_MS,
                                conf_kv, &l);
    if (rc)
        h_record_list_free(&l);
    H_MUST(rc);
    free(st->out);
    h_outrec *o = st->out = h_xcalloc(l.n ? l.n : 1, sizeof(*o));
    st->nout = 0;
    char bad[512] = "";
    for (size_t k = 0; k < l.n && !bad[0]; k++) {
        const h_record *r = &l.recs[k];
        const char *v = r->value;
        size_t i = h_stream_which(st, r);
        if (i >= st->n) {
            snprintf(bad, sizeof(bad), "%s %d:%lld: key '%s' value '%s' is "
                     "no input record", out_topic, (int)r->partition,
                     (long long)r->offset,
                     r->key ? (const char *)r->key : "NULL", v ? v : "NULL");
            break;
        }
        const h_header *h = h_header_last(r, "bloomstage-src");
        const char *src = h ? h->value : NULL;
        char want[128];
        snprintf(want, sizeof(want), "%s:%d:%lld", in_topic ? in_topic : "",
                 (int)st->part[i], (long long)st->off[i]);
        if (in_topic && (!src || strcmp(src, want))) {
            snprintf(bad, sizeof(bad), "%s %d:%lld: bloomstage-src '%s', "
                     "want '%s'", out_topic, (int)r->partition,
                     (long long)r->offset, src ? src : "(none)", want);
            break;
        }
        o[k] = (h_outrec){st->id[i], i, st->part[i], st->off[i], r->partition,
                          r->offset, 0};
    }
    *n = st->nout = l.n;
    h_record_list_free(&l);
    if (bad[0])
        h_test_fail("%s", bad);
    return o;
}

h_outrec *h_read_out(h_stream *st, const char *bootstraps,
                     const char *out_topic, const char *in_topic, size_t *n)
{
    return h_read_out_conf(st, bootstraps, out_topic, in_topic, NULL, n);
}

unsigned *h_count_copies(h_stream *st, const char *in_topic, size_t upto,
                         size_t *extra)
{
    const h_outrec *o = st->out;
    size_t n = st->nout;
    free(st->copies);
    unsigned *c = st->copies = h_xcalloc(st->nids, sizeof(*c));
    for (size_t k = 0; k < n; k++)
        c[o[k].id]++;
    size_t missing = 0, x = 0, first_missing = 0;
    for (size_t id = 0; id < st->nids; id++) {
        if (c[id] > 1)
            x += c[id] - 1;
        if (st->first[id] < upto && c[id] == 0 && missing++ == 0)
            first_missing = id;
    }
    if (missing)
        h_test_fail("%zu of %zu unique keys are not in the output (lost), "
                    "e.g. k%07zu (first at %s:%d:%lld)", missing, st->nids,
                    first_missing, in_topic,
                    (int)st->part[st->first[first_missing]],
                    (long long)st->off[st->first[first_missing]]);
    for (size_t k = 0; k < n; k++)
        if (o[k].rec >= upto)
            h_test_fail("output holds input record %zu, which was never "
                        "produced", o[k].rec);
    if (extra)
        *extra = x;
    return c;
}

void h_expect_once(const h_stream *st, const unsigned *c, const char *in_topic,
                   const char *out_topic, size_t upto, const char *why)
{
    const h_outrec *o = st->out;
    size_t n = st->nout, extra = 0;
    for (size_t id = 0; id < st->nids; id++)
        if (c[id] > 1)
            extra += c[id] - 1;
    for (size_t id = 0; id < st->nids; id++) {
        if (st->first[id] >= upto || c[id] == 1)
            continue;
        /* Name the copies: which input records, which output offsets. */
        char where[256] = "";
        size_t len = 0;
        for (size_t k = 0; k < n && len < sizeof(where) - 64; k++)
            if (o[k].id == id)
                len += (size_t)snprintf(where + len, sizeof(where) - len,
                                        " [%s:%d:%lld -> %s:%d:%lld]",
                                        in_topic, (int)o[k].src_part,
                                        (long long)o[k].src_off, out_topic,
                                        (int)o[k].part, (long long)o[k].off);
        h_test_fail("key k%07zu (first at %s:%d:%lld) is in the output %u "
                    "times, want exactly once (%zu duplicates in all, %zu "
                    "output records, %zu unique keys):%s -- %s", id, in_topic,
                    (int)st->part[st->first[id]],
                    (long long)st->off[st->first[id]], c[id], extra, n,
                    st->nids, where, why);
    }
}

void h_check_killed_keys(const h_stream *st, const h_outrec *o, size_t n,
                         unsigned killed, const int64_t *hw_kill,
                         const int64_t *resume, const char *in_topic,
                         size_t *n_killed, size_t *seen_again)
{
    uint8_t *by_killed = h_xcalloc(st->nids ? st->nids : 1, 1);
    size_t nk = 0, again = 0;
    for (size_t k = 0; k < n; k++)
        if ((killed >> o[k].src_part & 1) && o[k].off < hw_kill[o[k].part]) {
            by_killed[o[k].id] = 1;
            nk++;
        }
    char bad[256] = "";
    for (size_t k = 0; k < n && !bad[0]; k++)
        if ((killed >> o[k].src_part & 1) && o[k].off >= hw_kill[o[k].part] &&
            by_killed[o[k].id])
            snprintf(bad, sizeof(bad), "k%07u, forwarded by the killed "
                     "instance, forwarded again by a survivor from "
                     "%s:%d:%lld", o[k].id, in_topic, (int)o[k].src_part,
                     (long long)o[k].src_off);
    for (size_t i = 0; i < st->n && !bad[0]; i++)
        if ((killed >> st->part[i] & 1) && st->off[i] >= resume[st->part[i]] &&
            by_killed[st->id[i]] && st->first[st->id[i]] != i)
            again++;
    free(by_killed);
    if (bad[0])
        h_test_fail("%s", bad);
    if (nk == 0 || again == 0)
        h_test_fail("vacuous: the killed instance forwarded %zu records, %zu "
                    "of their keys came again after the takeover", nk, again);
    *n_killed = nk;
    *seen_again = again;
}

bool *h_stream_window_model(const h_stream *st, size_t upto,
                            int64_t window_ms, unsigned G, bool reject_late,
                            size_t *late)
{
    bool *fwd = h_xcalloc(upto ? upto : 1, sizeof(*fwd));
    int64_t *slice = h_xcalloc(st->nids ? st->nids : 1, sizeof(*slice));
    int64_t *tau = h_xcalloc(st->nids ? st->nids : 1, sizeof(*tau));
    bool *seen = h_xcalloc(st->nids ? st->nids : 1, sizeof(*seen));
    int64_t T[H_STREAM_MAXP], cur[H_STREAM_MAXP];
    for (int p = 0; p < H_STREAM_MAXP; p++)
        T[p] = cur[p] = -1;
    size_t nlate = 0;
    const double forget = (double)window_ms * (G + 1) / G;
    char bad[256] = "";
    for (size_t i = 0; i < upto && !bad[0]; i++) {
        int p = st->part[i];
        int64_t t = st->ts[i];
        if (t <= 0) {
            snprintf(bad, sizeof(bad), "record %zu has no timestamp", i);
            break;
        }
        int64_t s_t = (int64_t)(((__int128)t * G) / window_ms);
        if (t > T[p]) {
            T[p] = t;
            cur[p] = s_t;
        }
        bool is_late = s_t < cur[p] - (int64_t)G;
        nlate += is_late;
        if (is_late && reject_late)
            continue;
        uint32_t id = st->id[i];
        if (seen[id] && slice[id] >= cur[p] - (int64_t)G) {
            if ((double)(T[p] - tau[id]) >= forget)
                snprintf(bad, sizeof(bad), "model: record %zu dropped %lld "
                         "ms after its key was forwarded", i,
                         (long long)(T[p] - tau[id]));
            continue;
        }
        if (seen[id] && T[p] - tau[id] < window_ms)
            snprintf(bad, sizeof(bad), "model: record %zu forwarded %lld ms "
                     "after its key was", i, (long long)(T[p] - tau[id]));
        fwd[i] = true;
        seen[id] = true;
        slice[id] = cur[p];
        tau[id] = T[p];
    }
    free(slice);
    free(tau);
    free(seen);
    if (bad[0]) {
        free(fwd);
        h_test_fail("%s", bad);
    }
    if (late)
        *late = nlate;
    return fwd;
}

void h_expect_window_output(const h_stream *st, const bool *fwd, size_t upto,
                            const char *why)
{
    unsigned *c = h_xcalloc(upto ? upto : 1, sizeof(*c));
    char bad[512] = "";
    for (size_t k = 0; k < st->nout; k++) {
        size_t i = st->out[k].rec;
        if (i >= upto || !fwd[i]) {
            snprintf(bad, sizeof(bad), "output %d:%lld copies input record "
                     "%zu (k%07u at %lld ms), which the window drops",
                     (int)st->out[k].part, (long long)st->out[k].off, i,
                     st->id[i], (long long)st->ts[i]);
            break;
        }
        if (++c[i] > 1) {
            snprintf(bad, sizeof(bad), "input record %zu (k%07u) is in the "
                     "output %u times", i, st->id[i], c[i]);
            break;
        }
    }
    size_t want = 0, missing = 0, first = 0;
    for (size_t i = 0; i < upto && !bad[0]; i++) {
        want += fwd[i];
        if (fwd[i] && !c[i] && missing++ == 0)
            first = i;
    }
    free(c);
    if (!bad[0] && missing)
        snprintf(bad, sizeof(bad), "%zu of the %zu records the window "
                 "forwards are not in the output, e.g. record %zu (k%07u at "
                 "%lld ms)", missing, want, first, st->id[first],
                 (long long)st->ts[first]);
    if (bad[0])
        h_test_fail("%s: %s", why, bad);
}
