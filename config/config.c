/*
 * config.c -- the configuration store: layers, loaders, getters (the
 * checks across keys are validate.c's, the effective-configuration print
 * print.c's).
 *
 * A bs_config is a list of entries in the order their keys were first set;
 * every plain table key has one from the start (its default, or no value if
 * it has none).  An entry owns copies of its key, its value text, its origin
 * ("default", "FILE:LINE", "env NAME", "-X key=value") and the value parsed
 * from that text (values.c), and remembers the layer that set it: a layer
 * never replaces a value from a higher one, so precedence does not depend on
 * the order the loaders run in.
 *
 * The blocklist array is built by bs_config_validate and dropped by any
 * later change; it points into the entries.
 */
#include "config_int.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum layer { LAYER_DEFAULT = 0, LAYER_FILE, LAYER_ENV, LAYER_ARG };

/* Values longer than this are cut in messages. */
#define SHOW_MAX 64

void bs_config_fail(char *errstr, size_t n, const char *fmt, ...)
{
    if (!errstr || n == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errstr, n, fmt, ap);
    va_end(ap);
}

static int show_len(const char *s)
{
    size_t len = strlen(s);
    return len > SHOW_MAX ? SHOW_MAX - 3 : (int)len;
}

static const char *show_more(const char *s)
{
    return strlen(s) > SHOW_MAX ? "..." : "";
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' ||
           c == '\v';
}

/* s[0..*len) without surrounding blanks: returns the new start. */
static const char *trim(const char *s, size_t *len)
{
    while (*len > 0 && is_blank(*s)) {
        s++;
        (*len)--;
    }
    while (*len > 0 && is_blank(s[*len - 1]))
        (*len)--;
    return s;
}

static void entry_free(bs_config_entry *e)
{
    free(e->key);
    free(e->value);
    free(e->origin);
    bs_value_free(&e->v);
}

void bs_config_drop_blocklists(bs_config *cfg)
{
    for (size_t i = 0; i < cfg->nbl; i++)
        free(cfg->bl_names[i]);
    free(cfg->bl_names);
    free(cfg->bl);
    cfg->bl_names = NULL;
    cfg->bl = NULL;
    cfg->nbl = 0;
}

bs_config_entry *bs_config_find_entry(const bs_config *cfg, const char *key)
{
    for (size_t i = 0; i < cfg->n; i++)
        if (strcmp(cfg->entries[i].key, key) == 0)
            return &cfg->entries[i];
    return NULL;
}

void bs_config_destroy(bs_config *cfg)
{
    if (!cfg)
        return;
    for (size_t i = 0; i < cfg->n; i++)
        entry_free(&cfg->entries[i]);
    free(cfg->entries);
    bs_config_drop_blocklists(cfg);
    free(cfg);
}

bs_config *bs_config_new(void)
{
    bs_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg)
        return NULL;
    cfg->cap = bs_config_nrows;
    cfg->entries = calloc(cfg->cap, sizeof *cfg->entries);
    if (!cfg->entries)
        goto err;
    for (size_t i = 0; i < bs_config_nrows; i++) {
        const bs_config_row *row = &bs_config_rows[i];
        if (bs_config_row_is_pattern(row))
            continue;
        bs_config_entry *e = &cfg->entries[cfg->n++];
        e->row = row;
        e->layer = LAYER_DEFAULT;
        e->key = strdup(row->name);
        e->origin = strdup("default");
        if (!e->key || !e->origin)
            goto err;
        if (row->def) {
            char why[256];
            e->value = strdup(row->def);
            /* A default the parser rejects is a bug in the table (and a
             * test checks none does). */
            if (!e->value ||
                bs_value_parse(row, e->value, &e->v, why, sizeof why) != 0)
                goto err;
        }
    }
    return cfg;
err:
    bs_config_destroy(cfg);
    return NULL;
}

/* The message for a key no row matches. */
static void unknown_key(const char *where, const char *key, int layer,
                        const char *why, char *errstr, size_t n)
{
    char sugg[BS_CONFIG_MAX_KEY + 1], env[3 * BS_CONFIG_MAX_KEY + 16];
    if (why[0]) {
        bs_config_fail(errstr, n, "%s: key '%s': %s", where, key, why);
    } else if (!bs_config_suggest(key, sugg, sizeof sugg)) {
        bs_config_fail(errstr, n, "%s: unknown key '%s' (`bloomstage config "
                       "--list` shows every key)", where, key);
    } else if (layer == LAYER_ENV &&
               bs_config_env_encode(sugg, env, sizeof env) == 0) {
        bs_config_fail(errstr, n, "%s: unknown key '%s' (did you mean '%s', "
                       "set as %s%s?)", where, key, sugg,
                       BS_CONFIG_ENV_PREFIX, env);
    } else {
        bs_config_fail(errstr, n, "%s: unknown key '%s' (did you mean '%s'?)",
                       where, key, sugg);
    }
}

/* Sets key=value (both trimmed here) in `layer`.  `where` prefixes every
 * message and becomes the entry's origin. */
static int set_layer(bs_config *cfg, int layer, const char *rawkey,
                     size_t keylen, const char *rawval, size_t vallen,
                     const char *where, char *errstr, size_t n)
{
    const char *k = trim(rawkey, &keylen);
    const char *val = trim(rawval, &vallen);
    char key[BS_CONFIG_MAX_KEY + 1];
    if (keylen == 0) {
        bs_config_fail(errstr, n, "%s: empty key", where);
        return -1;
    }
    if (keylen > BS_CONFIG_MAX_KEY) {
        bs_config_fail(errstr, n, "%s: key '%.*s...' longer than %d bytes",
                       where, SHOW_MAX - 3, k, BS_CONFIG_MAX_KEY);
        return -1;
    }
    memcpy(key, k, keylen);
    key[keylen] = '\0';
    if (vallen > BS_CONFIG_MAX_LINE) {
        bs_config_fail(errstr, n, "%s: key '%s': value longer than %d bytes",
                       where, key, BS_CONFIG_MAX_LINE);
        return -1;
    }

    char why[512];
    const bs_config_row *row = bs_config_row_find(key, why, sizeof why);
    if (!row) {
        unknown_key(where, key, layer, why, errstr, n);
        return -1;
    }

    bs_config_entry e = {.row = row, .layer = layer};
    e.value = strndup(val, vallen);
    if (!e.value)
        goto nomem;
    if (bs_value_parse(row, e.value, &e.v, why, sizeof why) != 0) {
        bs_config_fail(errstr, n, "%s: key '%s': value '%.*s%s' %s", where,
                       key, show_len(e.value), e.value, show_more(e.value),
                       why);
        entry_free(&e);
        return -1;
    }

    bs_config_entry *old = bs_config_find_entry(cfg, key);
    if (old && old->layer > layer) { /* a higher layer already set it */
        entry_free(&e);
        return 0;
    }
    e.origin = strdup(where);
    if (!e.origin)
        goto nomem;
    if (old) {
        e.key = old->key;
        old->key = NULL;
        entry_free(old);
        *old = e;
    } else {
        if (cfg->n >= BS_CONFIG_MAX_KEYS) {
            bs_config_fail(errstr, n, "%s: key '%s': more than %d keys", where,
                           key, BS_CONFIG_MAX_KEYS);
            entry_free(&e);
            return -1;
        }
        e.key = strdup(key);
        if (!e.key)
            goto nomem;
        if (cfg->n == cfg->cap) {
            size_t cap = cfg->cap * 2;
            bs_config_entry *grown =
                realloc(cfg->entries, cap * sizeof *grown);
            if (!grown)
                goto nomem;
            cfg->entries = grown;
            cfg->cap = cap;
        }
        cfg->entries[cfg->n++] = e;
    }
    bs_config_drop_blocklists(cfg);
    return 0;
nomem:
    entry_free(&e);
    bs_config_fail(errstr, n, "%s: key '%s': out of memory", where, key);
    return -1;
}

int bs_config_set(bs_config *cfg, const char *key, const char *value,
                  const char *origin, char *errstr, size_t errstr_size)
{
    char where[BS_CONFIG_MAX_KEY + SHOW_MAX + 16];
    if (!origin) {
        snprintf(where, sizeof where, "-X %.*s=%.*s%s",
                 (int)strnlen(key, BS_CONFIG_MAX_KEY), key, show_len(value),
                 value, show_more(value));
        origin = where;
    }
    return set_layer(cfg, LAYER_ARG, key, strlen(key), value, strlen(value),
                     origin, errstr, errstr_size);
}

int bs_config_set_arg(bs_config *cfg, const char *arg, char *errstr,
                      size_t errstr_size)
{
    char where[BS_CONFIG_MAX_KEY + SHOW_MAX + 16];
    const char *eq = strchr(arg, '=');
    if (!eq) {
        bs_config_fail(errstr, errstr_size, "-X %.*s%s: expected key=value",
                       show_len(arg), arg, show_more(arg));
        return -1;
    }
    size_t keylen = (size_t)(eq - arg);
    const char *k = trim(arg, &keylen);
    snprintf(where, sizeof where, "-X %.*s=%.*s%s",
             (int)(keylen > BS_CONFIG_MAX_KEY ? BS_CONFIG_MAX_KEY : keylen), k,
             show_len(eq + 1), eq + 1, show_more(eq + 1));
    return set_layer(cfg, LAYER_ARG, arg, (size_t)(eq - arg), eq + 1,
                     strlen(eq + 1), where, errstr, errstr_size);
}

/* One line of at most BS_CONFIG_MAX_LINE bytes, without its '\n', into buf
 * (BS_CONFIG_MAX_LINE + 1 bytes).  Returns 1 for a line, 0 at the end, -1
 * with a message for a line too long, a NUL byte or a read error. */
static int read_line(FILE *f, char *buf, size_t *len, const char *path,
                     unsigned long lineno, char *errstr, size_t n)
{
    size_t o = 0;
    int c;
    while ((c = getc(f)) != EOF && c != '\n') {
        if (o == BS_CONFIG_MAX_LINE) {
            bs_config_fail(errstr, n, "%s:%lu: line longer than %d bytes",
                           path, lineno, BS_CONFIG_MAX_LINE);
            return -1;
        }
        if (c == '\0') {
            bs_config_fail(errstr, n, "%s:%lu: NUL byte in line (not a text "
                           "file?)", path, lineno);
            return -1;
        }
        buf[o++] = (char)c;
    }
    if (c == EOF && ferror(f)) {
        bs_config_fail(errstr, n, "%s:%lu: read error: %s", path, lineno,
                       strerror(errno));
        return -1;
    }
    buf[o] = '\0';
    *len = o;
    return c == EOF && o == 0 ? 0 : 1;
}

int bs_config_load_file(bs_config *cfg, const char *path, char *errstr,
                        size_t errstr_size)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        bs_config_fail(errstr, errstr_size, "%s: cannot open config file: %s",
                       path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        bs_config_fail(errstr, errstr_size, "%s: cannot read config file: %s",
                       path, strerror(EISDIR));
        fclose(f);
        return -1;
    }
    int rc = -1;
    char *line = malloc(BS_CONFIG_MAX_LINE + 1);
    char *where = malloc(strlen(path) + 32);
    if (!line || !where) {
        bs_config_fail(errstr, errstr_size, "%s: out of memory", path);
        goto out;
    }
    for (unsigned long lineno = 1;; lineno++) {
        size_t len;
        int got = read_line(f, line, &len, path, lineno, errstr, errstr_size);
        if (got < 0)
            goto out;
        if (got == 0)
            break;
        const char *s = line;
        if (lineno == 1 && len >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) {
            s += 3; /* a UTF-8 byte-order mark, as some editors write */
            len -= 3;
        }
        s = trim(s, &len);
        if (len == 0 || s[0] == '#' || s[0] == '!')
            continue;
        sprintf(where, "%s:%lu", path, lineno);
        const char *eq = memchr(s, '=', len);
        if (!eq) {
            bs_config_fail(errstr, errstr_size,
                           "%s: expected key=value, got '%.*s%s'", where,
                           len > SHOW_MAX ? SHOW_MAX - 3 : (int)len, s,
                           len > SHOW_MAX ? "..." : "");
            goto out;
        }
        size_t keylen = (size_t)(eq - s);
        (void)trim(s, &keylen);
        if (keylen == 0) {
            bs_config_fail(errstr, errstr_size, "%s: empty key before '='",
                           where);
            goto out;
        }
        if (set_layer(cfg, LAYER_FILE, s, (size_t)(eq - s), eq + 1,
                      len - (size_t)(eq - s) - 1, where, errstr,
                      errstr_size) != 0)
            goto out;
    }
    rc = 0;
out:
    free(line);
    free(where);
    fclose(f);
    return rc;
}

/* BLOOMSTAGE_ variables that are not configuration keys: load_env leaves
 * them alone instead of calling them unknown.  BLOOMSTAGE_CRASH_AT: the
 * tests' crash points (stage/crash_point.c). */
static const char *const env_not_keys[] = {"BLOOMSTAGE_CRASH_AT", NULL};

int bs_config_load_env(bs_config *cfg, char *const *envp, char *errstr,
                       size_t errstr_size)
{
    const size_t plen = strlen(BS_CONFIG_ENV_PREFIX);
    for (size_t i = 0; envp && envp[i]; i++) {
        const char *var = envp[i];
        const char *eq = strchr(var, '=');
        if (!eq || strncmp(var, BS_CONFIG_ENV_PREFIX, plen) != 0 ||
            (size_t)(eq - var) < plen)
            continue;
        size_t namelen = (size_t)(eq - var);
        bool skip = false;
        for (size_t j = 0; env_not_keys[j]; j++)
            skip |= strlen(env_not_keys[j]) == namelen &&
                    strncmp(env_not_keys[j], var, namelen) == 0;
        if (skip)
            continue;
        if (namelen > plen + 3 * BS_CONFIG_MAX_KEY) {
            bs_config_fail(errstr, errstr_size, "env %.*s...: name too long",
                           SHOW_MAX - 3, var);
            return -1;
        }
        char name[3 * BS_CONFIG_MAX_KEY + 32], where[sizeof name + 8];
        char key[3 * BS_CONFIG_MAX_KEY + 1];
        memcpy(name, var, namelen);
        name[namelen] = '\0';
        snprintf(where, sizeof where, "env %s", name);
        if (bs_config_env_decode(name + plen, key, sizeof key) != 0) {
            bs_config_fail(errstr, errstr_size, "%s: name too long", where);
            return -1;
        }
        if (set_layer(cfg, LAYER_ENV, key, strlen(key), eq + 1,
                      strlen(eq + 1), where, errstr, errstr_size) != 0)
            return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Getters                                                                   */

const char *bs_config_get_str(const bs_config *cfg, const char *key)
{
    const bs_config_entry *e = bs_config_find_entry(cfg, key);
    if (e)
        return e->value;
    const bs_config_row *row = bs_config_row_find(key, NULL, 0);
    if (!row)
        return NULL;
    if (row->def_from)
        return bs_config_get_str(cfg, row->def_from);
    return row->def;
}

const char *bs_config_origin(const bs_config *cfg, const char *key)
{
    const bs_config_entry *e = bs_config_find_entry(cfg, key);
    if (e)
        return e->value ? e->origin : NULL;
    return bs_config_get_str(cfg, key) ? "default" : NULL;
}

/* The row of a typed getter's key; a wrong key or type is a bug in the
 * caller, so it aborts rather than returning a plausible 0. */
static const bs_config_row *typed_row(const char *fn, const char *key,
                                      bs_ctype t1, bs_ctype t2)
{
    const bs_config_row *row = bs_config_row_find(key, NULL, 0);
    if (!row || (row->type != t1 && row->type != t2)) {
        fprintf(stderr, "bloomstage: BUG: %s(\"%s\"): %s\n", fn, key,
                row ? "wrong type for this key" : "no such key");
        abort();
    }
    return row;
}

/* The parsed value of `key`: its entry's, or that of the key it defaults
 * from, or (pattern keys) its default parsed into *tmp.  NULL if none. */
static const bs_value *typed_value(const bs_config *cfg,
                                   const bs_config_row *row, const char *key,
                                   bs_value *tmp)
{
    const bs_config_entry *e = bs_config_find_entry(cfg, key);
    if (e)
        return e->value ? &e->v : NULL;
    if (row->def_from) {
        e = bs_config_find_entry(cfg, row->def_from);
        return e && e->value ? &e->v : NULL;
    }
    char why[256];
    if (!row->def || row->type == BS_CT_KEYSPEC || row->type == BS_CT_TOPICS ||
        bs_value_parse(row, row->def, tmp, why, sizeof why) != 0)
        return NULL;
    return tmp;
}

int64_t bs_config_get_int(const bs_config *cfg, const char *key)
{
    const bs_config_row *row =
        typed_row(__func__, key, BS_CT_INT, BS_CT_SIZE);
    bs_value tmp;
    const bs_value *v = typed_value(cfg, row, key, &tmp);
    return v ? v->i : 0;
}

double bs_config_get_double(const bs_config *cfg, const char *key)
{
    const bs_config_row *row =
        typed_row(__func__, key, BS_CT_DOUBLE, BS_CT_DOUBLE);
    bs_value tmp;
    const bs_value *v = typed_value(cfg, row, key, &tmp);
    return v ? v->d : 0.0;
}

bool bs_config_get_bool(const bs_config *cfg, const char *key)
{
    const bs_config_row *row =
        typed_row(__func__, key, BS_CT_BOOL, BS_CT_BOOL);
    bs_value tmp;
    const bs_value *v = typed_value(cfg, row, key, &tmp);
    return v ? v->b : false;
}

int bs_config_get_enum(const bs_config *cfg, const char *key)
{
    const bs_config_row *row =
        typed_row(__func__, key, BS_CT_ENUM, BS_CT_ENUM);
    bs_value tmp;
    const bs_value *v = typed_value(cfg, row, key, &tmp);
    return v ? v->e : 0;
}

const char *bs_config_enum_text(const char *key, int index)
{
    const bs_config_row *row =
        typed_row(__func__, key, BS_CT_ENUM, BS_CT_ENUM);
    for (int i = 0; row->values[i]; i++)
        if (i == index)
            return row->values[i];
    return NULL;
}

const bs_config_keyspec *bs_config_get_keyspec(const bs_config *cfg,
                                               const char *key)
{
    const bs_config_row *row =
        typed_row(__func__, key, BS_CT_KEYSPEC, BS_CT_KEYSPEC);
    bs_value tmp;
    const bs_value *v = typed_value(cfg, row, key, &tmp);
    return v ? &v->ks : NULL;
}

size_t bs_config_get_topics(const bs_config *cfg, const char *key,
                            const char *const **topics)
{
    const bs_config_row *row =
        typed_row(__func__, key, BS_CT_TOPICS, BS_CT_TOPICS);
    bs_value tmp;
    const bs_value *v = typed_value(cfg, row, key, &tmp);
    *topics = v ? v->topics : NULL;
    return v ? v->ntopics : 0;
}

size_t bs_config_blocklists(const bs_config *cfg,
                            const bs_config_blocklist **blocklists)
{
    *blocklists = cfg->bl;
    return cfg->nbl;
}

int bs_config_foreach(const bs_config *cfg, const char *prefix,
                      int (*cb)(const char *key, const char *value,
                                void *opaque),
                      void *opaque)
{
    size_t plen = strlen(prefix);
    for (size_t i = 0; i < cfg->n; i++) {
        const bs_config_entry *e = &cfg->entries[i];
        if (!e->value || strncmp(e->key, prefix, plen) != 0)
            continue;
        int rc = cb(e->key + plen, e->value, opaque);
        if (rc)
            return rc;
    }
    return 0;
}
