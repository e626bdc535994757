/*
 * avro.c -- what a key costs per record in formats/: an Avro string field
 * of a 10-field, ~200-byte record read by fm_avro_extract (the binary
 * walker) and by avro-c's generic value interface (avro_value_read, then
 * avro_value_get_by_name), the alternative avro.c's opening comment
 * weighs; a field at each end of the record; the whole record as a key;
 * and a domain's parse plus its lookups' normalization.
 *
 *   bench_avro [--n N]    N extractions per pass (default 2,000,000);
 *                         each figure is the median of 5 passes
 *
 * Single-threaded wall-clock loops: run on a quiet machine.
 */
#include <avro.h>
#include <fm_avro.h>
#include <fm_domain.h>
#include <fm_normalize.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PASSES 5

static const char SCHEMA[] =
    "{\"type\":\"record\",\"name\":\"Event\",\"namespace\":\"bench\","
    "\"fields\":["
    "{\"name\":\"id\",\"type\":\"long\"},"
    "{\"name\":\"user\",\"type\":\"string\"},"
    "{\"name\":\"email\",\"type\":\"string\"},"
    "{\"name\":\"ts\",\"type\":\"long\"},"
    "{\"name\":\"country\",\"type\":\"string\"},"
    "{\"name\":\"score\",\"type\":\"double\"},"
    "{\"name\":\"tags\",\"type\":{\"type\":\"array\",\"items\":\"string\"}},"
    "{\"name\":\"attrs\",\"type\":{\"type\":\"map\",\"values\":\"string\"}},"
    "{\"name\":\"kind\",\"type\":{\"type\":\"enum\",\"name\":\"Kind\","
    "\"symbols\":[\"VIEW\",\"CLICK\",\"BUY\"]}},"
    "{\"name\":\"session\",\"type\":[\"null\",\"string\"]}]}";

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v)
{
    qsort(v, PASSES, sizeof(*v), cmp_double);
    return v[PASSES / 2];
}

static void die(const char *what);

static void set(avro_value_t *rec, const char *name, avro_value_t *f)
{
    if (avro_value_get_by_name(rec, name, f, NULL))
        die(name);
}

/* The record, written by avro-c. */
static size_t record(avro_schema_t s, char *buf, size_t size)
{
    avro_value_iface_t *iface = avro_generic_class_from_schema(s);
    avro_value_t v, f, g;
    avro_generic_value_new(iface, &v);
    set(&v, "id", &f);
    avro_value_set_long(&f, 9007199254740993LL);
    set(&v, "user", &f);
    avro_value_set_string(&f, "ann.smith.1987");
    set(&v, "email", &f);
    avro_value_set_string(&f, "ann.smith@mx3.spam.example");
    set(&v, "ts", &f);
    avro_value_set_long(&f, 1764400000123LL);
    set(&v, "country", &f);
    avro_value_set_string(&f, "NO");
    set(&v, "score", &f);
    avro_value_set_double(&f, 0.734);
    set(&v, "tags", &f);
    const char *tags[] = {"newsletter", "mobile", "returning-customer"};
    for (int i = 0; i < 3; i++) {
        avro_value_append(&f, &g, NULL);
        avro_value_set_string(&g, tags[i]);
    }
    set(&v, "attrs", &f);
    avro_value_add(&f, "campaign", &g, NULL, NULL);
    avro_value_set_string(&g, "winter-sale-2026");
    avro_value_add(&f, "referrer", &g, NULL, NULL);
    avro_value_set_string(&g, "https://news.example/a");
    set(&v, "kind", &f);
    avro_value_set_enum(&f, 1);
    set(&v, "session", &f);
    avro_value_set_branch(&f, 1, &g);
    avro_value_set_string(&g, "5f0c6f0e-8a4e-4b8e-9d7b-2f1e0c3a9b71");
    avro_writer_t w = avro_writer_memory(buf, (int64_t)size);
    if (avro_value_write(w, &v))
        die(avro_strerror());
    size_t n = (size_t)avro_writer_tell(w);
    avro_writer_free(w);
    avro_value_decref(&v);
    avro_value_iface_decref(iface);
    return n;
}

static volatile size_t sink;

static void die(const char *what)
{
    fprintf(stderr, "bench_avro: %s\n", what);
    exit(1);
}

/* The median over PASSES of the ns one call of `one` takes, n calls a
 * pass. */
static double time_it(void (*one)(void *), void *ctx, long n)
{
    double t[PASSES];
    for (int pass = 0; pass < PASSES; pass++) {
        double t0 = now();
        for (long i = 0; i < n; i++)
            one(ctx);
        t[pass] = (now() - t0) / (double)n * 1e9;
    }
    return median(t);
}

typedef struct job {
    const char *buf;
    size_t len;
    fm_key k;
    char err[512];
    fm_avro_path *path;   /* walker */
    const char *field;    /* generic */
    avro_value_t v;
    avro_reader_t rd;
    unsigned lookups;     /* domains */
} job;

static void walker_one(void *ctx)
{
    job *j = ctx;
    fm_key_reset(&j->k);
    if (fm_avro_extract(j->path, (const uint8_t *)j->buf, j->len, &j->k,
                        j->err, sizeof(j->err)) != FM_AVRO_FOUND)
        die(j->err);
    sink += j->k.len;
}

static double walker(fm_avro_schema *s, const char *path, const char *buf,
                     size_t len, long n)
{
    job j = {.buf = buf, .len = len};
    j.path = fm_avro_path_compile(s, path, j.err, sizeof(j.err));
    if (!j.path)
        die(j.err);
    fm_key_init(&j.k);
    double ns = time_it(walker_one, &j, n);
    fm_key_free(&j.k);
    fm_avro_path_destroy(j.path);
    return ns;
}

static void generic_one(void *ctx)
{
    job *j = ctx;
    avro_value_t f;
    const char *str;
    size_t size;
    avro_reader_memory_set_source(j->rd, j->buf, (int64_t)j->len);
    avro_value_reset(&j->v);
    if (avro_value_read(j->rd, &j->v) ||
        avro_value_get_by_name(&j->v, j->field, &f, NULL) ||
        avro_value_get_string(&f, &str, &size))
        die(avro_strerror());
    fm_key_reset(&j->k);
    fm_key_bytes(&j->k, str, size - 1); /* avro-c counts the NUL */
    sink += j->k.len;
}

static double generic(avro_schema_t s, const char *field, const char *buf,
                      size_t len, long n)
{
    job j = {.buf = buf, .len = len, .field = field};
    avro_value_iface_t *iface = avro_generic_class_from_schema(s);
    avro_generic_value_new(iface, &j.v);
    j.rd = avro_reader_memory(buf, (int64_t)len);
    fm_key_init(&j.k);
    double ns = time_it(generic_one, &j, n);
    fm_key_free(&j.k);
    avro_reader_free(j.rd);
    avro_value_decref(&j.v);
    avro_value_iface_decref(iface);
    return ns;
}

/* A domain's lookups of an address: normalize (lower, trim), parse. */
static void domain_one(void *ctx)
{
    job *j = ctx;
    uint8_t norm[256];
    size_t m;
    fm_domain d;
    if (fm_norm_apply(FM_NORM_LOWER | FM_NORM_TRIM, (const uint8_t *)j->buf,
                      j->len, norm, sizeof(norm), &m, j->err,
                      sizeof(j->err)) ||
        fm_domain_parse(&d, norm, m, j->err, sizeof(j->err)))
        die(j->err);
    j->lookups = fm_domain_count(&d);
    sink += j->lookups;
}

int main(int argc, char **argv)
{
    long n = 2000000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--n") && i + 1 < argc)
            n = atol(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_avro [--n N]\n");
            return 2;
        }
    }
    if (n < 1)
        n = 1;
    avro_schema_t as;
    if (avro_schema_from_json_length(SCHEMA, strlen(SCHEMA), &as))
        die(avro_strerror());
    char err[512];
    fm_avro_schema *s = fm_avro_schema_new(SCHEMA, strlen(SCHEMA), err,
                                           sizeof(err));
    if (!s)
        die(err);
    char buf[1024];
    size_t len = record(as, buf, sizeof(buf));
    printf("record: 10 fields, %zu bytes; %ld extractions per pass, median "
           "of %d passes\n",
           len, n, PASSES);
    printf("%-44s %8.1f ns\n", "walker, /email (3rd field, string)",
           walker(s, "/email", buf, len, n));
    printf("%-44s %8.1f ns\n", "walker, /id (1st field, long)",
           walker(s, "/id", buf, len, n));
    printf("%-44s %8.1f ns\n", "walker, /session (10th, union string)",
           walker(s, "/session", buf, len, n));
    printf("%-44s %8.1f ns\n", "walker, whole record as a key",
           walker(s, "", buf, len, n / 4));
    printf("%-44s %8.1f ns\n", "avro-c avro_value_read, email",
           generic(as, "email", buf, len, n / 4));
    const char *addr = "  Ann.Smith@MX3.Spam.Example ";
    job dj = {.buf = addr, .len = strlen(addr)};
    double dt = time_it(domain_one, &dj, n);
    printf("%-44s %8.1f ns (%u lookups)\n", "lower+trim, then domain parse",
           dt, dj.lookups);
    fm_avro_schema_destroy(s);
    avro_schema_decref(as);
    return sink == 0;
}
