/*
 * validate.c -- bs_config_validate: what no single value can say (store.c
 * parses each one as it is set).  Required keys set and non-empty; every
 * blocklist.NAME group complete (its required keys, and a path or a topic);
 * the output and rejected topics neither consumed by the stage nor the
 * same; `reject` only with somewhere to reject to; the few librdkafka
 * properties whose mistakes would otherwise surface only at the first
 * connection, all in one place below; the metrics endpoint's TLS and
 * auth keys set together and their files readable; the endpoint's port in
 * range; the checkpoint store's directory or topic not empty.  Then the
 * blocklist array
 * bs_config_blocklists hands out, pointing into the entries.  Also the
 * NAME-group walk the effective-configuration print shares (print.c).
 * Every message starts with the origin of the value at fault and names its
 * key, and never shows a secret value.
 */
#include "config_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

bool bs_config_same_group(const bs_config_row *a, const bs_config_row *b)
{
    const char *sa = strchr(a->name, '*'), *sb = strchr(b->name, '*');
    return sa && sb && sa[1] != '\0' && sb[1] != '\0' &&
           sa - a->name == sb - b->name &&
           strncmp(a->name, b->name, (size_t)(sa - a->name)) == 0;
}

bool bs_config_group_leader(const bs_config_row *row)
{
    for (const bs_config_row *r = bs_config_rows; r < row; r++)
        if (bs_config_same_group(r, row))
            return false;
    return bs_config_same_group(row, row);
}

int bs_config_foreach_name(const bs_config *cfg, const bs_config_row *row,
                           bs_config_name_fn fn, void *opaque)
{
    for (size_t i = 0; i < cfg->n; i++) {
        const bs_config_entry *e = &cfg->entries[i];
        char name[BS_CONFIG_MAX_KEY + 1], prev[BS_CONFIG_MAX_KEY + 1];
        if (!bs_config_same_group(e->row, row) ||
            !bs_config_row_name_of(e->row, e->key, name, sizeof name))
            continue;
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++) {
            const bs_config_entry *p = &cfg->entries[j];
            seen = bs_config_same_group(p->row, row) &&
                   bs_config_row_name_of(p->row, p->key, prev, sizeof prev) &&
                   strcmp(prev, name) == 0;
        }
        if (seen)
            continue;
        int rc = fn(cfg, row, name, e, opaque);
        if (rc)
            return rc;
    }
    return 0;
}

void bs_config_instantiate(const bs_config_row *row, const char *name,
                           char *buf, size_t n)
{
    const char *star = strchr(row->name, '*');
    snprintf(buf, n, "%.*s%s%s", (int)(star - row->name), row->name, name,
             star + 1);
}

struct vctx {
    char *errstr;
    size_t n;
};

/* A NAME group: every required row of its prefix must have a value. */
static int check_group(const bs_config *cfg, const bs_config_row *first_row,
                       const char *name, const bs_config_entry *first,
                       void *opaque)
{
    struct vctx *v = opaque;
    for (size_t i = 0; i < bs_config_nrows; i++) {
        const bs_config_row *row = &bs_config_rows[i];
        if (!(row->flags & BS_CF_REQUIRED) ||
            !bs_config_same_group(row, first_row))
            continue;
        char key[2 * BS_CONFIG_MAX_KEY + 2];
        bs_config_instantiate(row, name, key, sizeof key);
        const bs_config_entry *e = bs_config_find_entry(cfg, key);
        if (!e || !e->value || !e->value[0]) {
            bs_config_fail(v->errstr, v->n,
                 "%s: key '%s' is set, so '%s' is required but %s",
                 first->origin, first->key, key, e ? "empty" : "not set");
            return -1;
        }
    }
    /* BS_CF_ANY_OF rows: one of them at least (blocklist.NAME.path or
     * .topic), none of them empty. */
    char names[4 * BS_CONFIG_MAX_KEY + 16] = "";
    size_t nl = 0;
    bool any_of = false, any_set = false;
    for (size_t i = 0; i < bs_config_nrows; i++) {
        const bs_config_row *row = &bs_config_rows[i];
        if (!(row->flags & BS_CF_ANY_OF) ||
            !bs_config_same_group(row, first_row))
            continue;
        char key[2 * BS_CONFIG_MAX_KEY + 2];
        bs_config_instantiate(row, name, key, sizeof key);
        any_of = true;
        if (nl < sizeof names)
            nl += (size_t)snprintf(names + nl, sizeof names - nl, "%s'%s'",
                                   nl ? " or " : "", key);
        const bs_config_entry *e = bs_config_find_entry(cfg, key);
        if (e && e->value && !e->value[0]) {
            bs_config_fail(v->errstr, v->n, "%s: key '%s' is set, so '%s' is "
                           "required but empty", e->origin, key, key);
            return -1;
        }
        any_set |= e && e->value;
    }
    if (any_of && !any_set) {
        bs_config_fail(v->errstr, v->n, "%s: key '%s' is set, so %s is "
                       "required but neither is set", first->origin,
                       first->key, names);
        return -1;
    }
    return 0;
}

/* opaque: the bs_config being validated, the one foreach_name walks. */
static int add_blocklist(const bs_config *ccfg, const bs_config_row *row,
                         const char *name, const bs_config_entry *first,
                         void *opaque)
{
    (void)ccfg;
    (void)row;
    (void)first;
    bs_config *cfg = opaque;
    char key[2 * BS_CONFIG_MAX_KEY + 16];
    char *copy = strdup(name);
    if (!copy)
        return -1;
    bs_config_blocklist *b = &cfg->bl[cfg->nbl];
    cfg->bl_names[cfg->nbl++] = copy;
    b->name = copy;
    snprintf(key, sizeof key, "blocklist.%s.path", name);
    b->path = bs_config_get_str(cfg, key);
    snprintf(key, sizeof key, "blocklist.%s.key", name);
    b->key = bs_config_get_keyspec(cfg, key);
    snprintf(key, sizeof key, "blocklist.%s.fpr", name);
    b->fpr = bs_config_get_double(cfg, key);
    snprintf(key, sizeof key, "blocklist.%s.topic", name);
    b->topic = bs_config_get_str(cfg, key);
    snprintf(key, sizeof key, "blocklist.%s.capacity", name);
    b->capacity = (uint64_t)bs_config_get_int(cfg, key);
    snprintf(key, sizeof key, "blocklist.%s.normalize", name);
    b->normalize = (bs_normalize)bs_config_get_enum(cfg, key);
    snprintf(key, sizeof key, "blocklist.%s.match", name);
    b->match = (bs_match)bs_config_get_enum(cfg, key);
    if (b->path && !b->path[0])
        b->path = NULL;
    if (b->topic && !b->topic[0])
        b->topic = NULL;
    return 0;
}

/* output.topic / rejected.topic must not be consumed by the stage itself. */
static int check_not_input(const bs_config *cfg, const char *key,
                           char *errstr, size_t n)
{
    const bs_config_entry *e = bs_config_find_entry(cfg, key);
    const bs_config_entry *in = bs_config_find_entry(cfg, "input.topics");
    if (!e || !e->value || !e->value[0] || !in)
        return 0;
    for (size_t i = 0; i < in->v.ntopics; i++) {
        if (strcmp(in->v.topics[i], e->value) == 0) {
            bs_config_fail(errstr, n,
                 "%s: key '%s': topic '%s' is also in input.topics (%s): the "
                 "stage would consume its own output",
                 e->origin, key, e->value, in->origin);
            return -1;
        }
    }
    return 0;
}

/* -- librdkafka properties checked before any client exists ------------- */

/* The prefixes of the two clients' own keys; each client also gets the
 * kafka. keys, which its own override (as stage/clients/clients.c sets them). */
static const char *const client_prefixes[] = {"consumer.", "producer."};

/* The entry giving librdkafka property `prop` to the client of `prefix`:
 * its own key, else the kafka. one; NULL when neither is set non-empty. */
static const bs_config_entry *client_entry(const bs_config *cfg,
                                           const char *prefix,
                                           const char *prop)
{
    const char *const prefixes[] = {prefix, "kafka."};
    for (size_t i = 0; i < 2; i++) {
        char key[BS_CONFIG_MAX_KEY + 1];
        snprintf(key, sizeof key, "%s%s", prefixes[i], prop);
        const bs_config_entry *e = bs_config_find_entry(cfg, key);
        if (e && e->value && e->value[0])
            return e;
    }
    return NULL;
}

/* SASL without a mechanism: librdkafka would assume GSSAPI (Kerberos),
 * which is rarely what was meant and fails only when it connects. */
static int check_sasl(const bs_config *cfg, char *errstr, size_t n)
{
    for (size_t i = 0; i < 2; i++) {
        const char *prefix = client_prefixes[i];
        const bs_config_entry *proto =
            client_entry(cfg, prefix, "security.protocol");
        if (!proto || (strcasecmp(proto->value, "sasl_ssl") != 0 &&
                       strcasecmp(proto->value, "sasl_plaintext") != 0))
            continue;
        if (client_entry(cfg, prefix, "sasl.mechanism") ||
            client_entry(cfg, prefix, "sasl.mechanisms"))
            continue;
        bs_config_fail(errstr, n,
             "%s: key '%s': %s needs a SASL mechanism: set "
             "kafka.sasl.mechanism to PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, "
             "OAUTHBEARER or GSSAPI (librdkafka would otherwise assume "
             "GSSAPI, Kerberos)",
             proto->origin, proto->key,
             proto->secret ? BS_CONFIG_REDACTED : proto->value);
        return -1;
    }
    return 0;
}

/* Properties naming a file librdkafka opens only when it makes a client:
 * checked here, so a wrong path stops start-up with its key.  A CA
 * location may also be a directory of certificates, or "probe" (librdkafka
 * then searches the usual places). */
static const struct kafka_file {
    const char *prop;
    bool dir_ok;
} kafka_files[] = {
    {"ssl.ca.location", true},
    {"ssl.certificate.location", false},
    {"ssl.key.location", false},
};

/* e's value names a file (or, dir_ok, a directory) that can be read:
 * 0, or -1 with "ORIGIN: key 'K': cannot read 'PATH': why". */
static int check_file(const bs_config_entry *e, bool dir_ok, char *errstr,
                      size_t n)
{
    char why[BS_CONFIG_MAX_LINE / 16];
    int fd = bs_config_open_path(e->value, dir_ok, why, sizeof why);
    if (fd >= 0) {
        close(fd);
        return 0;
    }
    if (e->secret) /* the path came from a file: not shown */
        snprintf(why, sizeof why, "cannot read the file it names");
    bs_config_fail(errstr, n, "%s: key '%s': %s", e->origin, e->key, why);
    return -1;
}

static int check_kafka_files(const bs_config *cfg, char *errstr, size_t n)
{
    for (size_t i = 0; i < cfg->n; i++) {
        const bs_config_entry *e = &cfg->entries[i];
        if (!e->value || !e->value[0] || !bs_config_row_is_passthrough(e->row))
            continue;
        const char *prop = e->key + (strchr(e->row->name, '*') - e->row->name);
        for (size_t j = 0; j < sizeof kafka_files / sizeof *kafka_files;
             j++) {
            const struct kafka_file *kf = &kafka_files[j];
            if (strcmp(prop, kf->prop) != 0 ||
                (kf->dir_ok && strcmp(e->value, "probe") == 0))
                continue;
            if (check_file(e, kf->dir_ok, errstr, n) != 0)
                return -1;
        }
    }
    return 0;
}

/* -- the metrics endpoint's TLS and basic auth ---------------------------- */

/* The keys that protect the metrics endpoint; the files they name are
 * read here first, so a wrong path is a configuration error (what is in
 * them is the endpoint's to check: stage/ops/metrics_guard.c). */
static const char *const metrics_guard_keys[] = {
    "metrics.tls.cert.path", "metrics.tls.key.path",
    "metrics.auth.users.path", "metrics.auth.probes.open"};

/* An entry with a value other than the key's default, or NULL. */
static const bs_config_entry *changed(const bs_config *cfg, const char *key)
{
    const bs_config_entry *e = bs_config_find_entry(cfg, key);
    const bs_config_row *row = bs_config_row_by_name(key);
    return e && e->value && strcmp(e->value, row->def) != 0 ? e : NULL;
}

static int check_metrics_guard(const bs_config *cfg, char *errstr, size_t n)
{
    const char *listen = bs_config_get_str(cfg, "metrics.listen");
    const bs_config_entry *cert = changed(cfg, "metrics.tls.cert.path");
    const bs_config_entry *key = changed(cfg, "metrics.tls.key.path");
    const bs_config_entry *users = changed(cfg, "metrics.auth.users.path");
    const bs_config_entry *open = changed(cfg, "metrics.auth.probes.open");
    for (size_t i = 0; i < sizeof metrics_guard_keys / sizeof
                               *metrics_guard_keys; i++) {
        const bs_config_entry *e = changed(cfg, metrics_guard_keys[i]);
        if (e && (!listen || !listen[0])) {
            bs_config_fail(errstr, n, "%s: key '%s': set, but metrics.listen "
                           "is empty (no endpoint to protect)", e->origin,
                           e->key);
            return -1;
        }
    }
    if ((cert != NULL) != (key != NULL)) {
        const bs_config_entry *e = cert ? cert : key;
        bs_config_fail(errstr, n, "%s: key '%s' is set, so '%s' is required "
                       "but not set", e->origin, e->key,
                       cert ? "metrics.tls.key.path" : "metrics.tls.cert.path");
        return -1;
    }
    if (open && !users) {
        bs_config_fail(errstr, n, "%s: key '%s': no effect without "
                       "metrics.auth.users.path (every path is open)",
                       open->origin, open->key);
        return -1;
    }
    if ((cert && check_file(cert, false, errstr, n) != 0) ||
        (key && check_file(key, false, errstr, n) != 0) ||
        (users && check_file(users, false, errstr, n) != 0))
        return -1;
    return 0;
}

/* metrics.listen: HOST:PORT, :PORT or [V6]:PORT with PORT a decimal in
 * 1..65535, or 0 for any free port (the tests' choice).  getaddrinfo
 * would take 99999 and listen on 99999 mod 65536. */
static int check_listen(const bs_config *cfg, char *errstr, size_t n)
{
    const bs_config_entry *e = bs_config_find_entry(cfg, "metrics.listen");
    if (!e || !e->value || !e->value[0])
        return 0;
    const char *colon = strrchr(e->value, ':');
    const char *port = colon ? colon + 1 : NULL;
    size_t digits = port ? strspn(port, "0123456789") : 0;
    if (!port || !digits || port[digits] || digits > 5) {
        bs_config_fail(errstr, n, "%s: key 'metrics.listen': value '%s': "
                       "expected HOST:PORT, :PORT or [V6]:PORT with a "
                       "decimal PORT", e->origin, e->value);
        return -1;
    }
    long v = strtol(port, NULL, 10);
    if (v > 65535) {
        bs_config_fail(errstr, n, "%s: key 'metrics.listen': port %ld out of "
                       "range [1, 65535] (0: any free port)", e->origin, v);
        return -1;
    }
    return 0;
}

/* The directory store needs a directory: an empty checkpoint.dir would be
 * the working directory by accident; the Kafka store needs its topic. */
static int check_store(const bs_config *cfg, char *errstr, size_t n)
{
    const char *store = bs_config_get_str(cfg, "checkpoint.store");
    const char *key = store && !strcmp(store, "kafka") ? "checkpoint.topic"
                                                       : "checkpoint.dir";
    const bs_config_entry *e = bs_config_find_entry(cfg, key);
    if (e && e->value && !e->value[0]) {
        bs_config_fail(errstr, n, "%s: key '%s': must not be empty with "
                       "checkpoint.store=%s", e->origin, key,
                       store ? store : "dir");
        return -1;
    }
    return 0;
}

/* A key part read with a schema (avro:, protobuf:) needs a registry to
 * fetch it from. */
static int check_registry(const bs_config *cfg, char *errstr, size_t n)
{
    const char *url = bs_config_get_str(cfg, "schema.registry.url");
    if (url && *url)
        return 0;
    for (size_t i = 0; i < cfg->n; i++) {
        const bs_config_entry *e = &cfg->entries[i];
        if (!e->row || e->row->type != BS_CT_KEYSPEC || !e->value)
            continue;
        for (size_t k = 0; k < e->v.ks.nparts; k++) {
            if (!bs_config_keypart_framed(e->v.ks.parts[k].kind))
                continue;
            bs_config_fail(errstr, n, "%s: key '%s': '%s' reads records "
                           "with their schema from a Schema Registry: set "
                           "schema.registry.url", e->origin, e->key,
                           e->value);
            return -1;
        }
    }
    return 0;
}

int bs_config_validate(bs_config *cfg, char *errstr, size_t errstr_size)
{
    bs_config_drop_blocklists(cfg);
    for (size_t i = 0; i < bs_config_nrows; i++) {
        const bs_config_row *row = &bs_config_rows[i];
        if (!(row->flags & BS_CF_REQUIRED) || bs_config_row_is_pattern(row))
            continue;
        const bs_config_entry *e = bs_config_find_entry(cfg, row->name);
        char env[3 * BS_CONFIG_MAX_KEY + 1];
        if (e && e->value && e->value[0])
            continue;
        if (e && e->value) {
            bs_config_fail(errstr, errstr_size,
                           "%s: key '%s': must not be empty", e->origin,
                           row->name);
            return -1;
        }
        if (bs_config_env_encode(row->name, env, sizeof env) != 0)
            env[0] = '\0';
        bs_config_fail(errstr, errstr_size,
             "required key '%s' is not set (set it in the config file, as "
             "%s%s or with -X %s=...)",
             row->name, BS_CONFIG_ENV_PREFIX, env, row->name);
        return -1;
    }

    struct vctx v = {errstr, errstr_size};
    for (size_t i = 0; i < bs_config_nrows; i++)
        if (bs_config_group_leader(&bs_config_rows[i]) &&
            bs_config_foreach_name(cfg, &bs_config_rows[i], check_group,
                                   &v) != 0)
            return -1;

    if (check_not_input(cfg, "output.topic", errstr, errstr_size) != 0 ||
        check_not_input(cfg, "rejected.topic", errstr, errstr_size) != 0)
        return -1;
    const bs_config_entry *out = bs_config_find_entry(cfg, "output.topic");
    const bs_config_entry *rej = bs_config_find_entry(cfg, "rejected.topic");
    if (out && rej && out->value && rej->value &&
        strcmp(out->value, rej->value) == 0) {
        bs_config_fail(errstr, errstr_size,
             "%s: key 'rejected.topic': same topic as output.topic (%s): "
             "dropped records would be forwarded",
             rej->origin, out->origin);
        return -1;
    }

    /* reject routes to rejected.topic: without one it would be a silent
     * drop, which the stage never does. */
    const bs_config_entry *miss =
        bs_config_find_entry(cfg, "dedup.on.missing.key");
    if (miss && miss->value && !strcmp(miss->value, "reject") &&
        (!rej || !rej->value || !*rej->value)) {
        bs_config_fail(errstr, errstr_size,
             "%s: key 'dedup.on.missing.key': 'reject' needs rejected.topic "
             "(records without a key would otherwise be dropped silently)",
             miss->origin);
        return -1;
    }

    if (check_listen(cfg, errstr, errstr_size) != 0 ||
        check_store(cfg, errstr, errstr_size) != 0 ||
        check_registry(cfg, errstr, errstr_size) != 0 ||
        check_sasl(cfg, errstr, errstr_size) != 0 ||
        check_kafka_files(cfg, errstr, errstr_size) != 0 ||
        check_metrics_guard(cfg, errstr, errstr_size) != 0)
        return -1;

    /* The blocklist array: at most one per entry, so size it by entries. */
    const bs_config_row *path_row = bs_config_row_by_name("blocklist.*.path");
    cfg->bl = calloc(cfg->n ? cfg->n : 1, sizeof *cfg->bl);
    cfg->bl_names = calloc(cfg->n ? cfg->n : 1, sizeof *cfg->bl_names);
    if (!cfg->bl || !cfg->bl_names ||
        bs_config_foreach_name(cfg, path_row, add_blocklist, cfg) != 0) {
        bs_config_drop_blocklists(cfg);
        bs_config_fail(errstr, errstr_size, "out of memory");
        return -1;
    }
    return 0;
}
