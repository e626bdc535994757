/*
 * store.c -- the configuration store: layers, loaders, getters (the
 * checks across keys are validate.c's, the effective-configuration print
 * print.c's, what is secret and reading values from files secrets.c's).
 *
 * A bs_config is a list of entries in the order their keys were first set;
 * every plain table key has one from the start (its default, or no value if
 * it has none).  An entry owns copies of its key, its value text, its origin
 * (bs_config_origin says which) and the value parsed from that text
 * (values.c), and remembers the layer that set it: a layer never replaces a
 * value from a higher one, so precedence does not depend on the order the
 * loaders run in.
 *
 * A value "@file:PATH", or a BLOOMSTAGE_..._FILE variable, is read from the
 * file when it is set, so a missing secret stops start-up with the origin,
 * the key and the path; such a value, like that of a secret key, is never
 * shown (an origin names the path instead).
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

void bs_config_fail(char *errstr, size_t n, const char *fmt, ...)
{
    if (!errstr || n == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errstr, n, fmt, ap);
    va_end(ap);
    /* Values and names come from outside: bytes that are not UTF-8 (and
     * control characters) shown as \xNN, never raw on a terminal. */
    if (bs_config_needs_escape(errstr)) {
        char *copy = strdup(errstr);
        if (copy) {
            bs_config_escape(copy, errstr, n);
            free(copy);
        }
    }
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
        e->secret = bs_config_key_is_secret(row->name);
        if (!e->key || !e->origin)
            goto err;
        if (row->def) {
            char why[BS_ERRSTR_SIZE];
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

/* The trimmed key as a string in key[BS_CONFIG_MAX_KEY + 1]: -1 with
 * errstr when it is empty or too long. */
static int take_key(const char *k, size_t keylen, const char *where,
                    char *key, char *errstr, size_t n)
{
    if (keylen == 0) {
        bs_config_fail(errstr, n, "%s: empty key", where);
        return -1;
    }
    if (keylen > BS_CONFIG_MAX_KEY) {
        char shown[BS_CONFIG_SHOW_MAX + 1];
        bs_config_show(shown, sizeof shown, k, keylen, true);
        bs_config_fail(errstr, n, "%s: key '%s' longer than %d bytes", where,
                       shown, BS_CONFIG_MAX_KEY);
        return -1;
    }
    memcpy(key, k, keylen);
    key[keylen] = '\0';
    return 0;
}

/* e->value from val (or from the file it names: then e->secret) and
 * e->v parsed from it by row's type.  -1 with errstr (a secret value
 * never shown); e holds what it allocated either way. */
static int take_value(const bs_config_row *row, const char *key,
                      const char *val, size_t vallen, bool path_given,
                      const char *where, bs_config_entry *e, char *errstr,
                      size_t n)
{
    char why[BS_ERRSTR_SIZE];
    const size_t plen = strlen(BS_CONFIG_FILE_PREFIX);
    if (path_given ||
        (vallen >= plen && memcmp(val, BS_CONFIG_FILE_PREFIX, plen) == 0)) {
        char *path = path_given ? strndup(val, vallen)
                                : strndup(val + plen, vallen - plen);
        if (!path)
            goto nomem;
        int rc = bs_config_read_value_file(path, &e->value, why, sizeof why);
        free(path);
        if (rc != 0) {
            bs_config_fail(errstr, n, "%s: key '%s': %s", where, key, why);
            return -1;
        }
        e->secret = true;
    } else {
        e->value = strndup(val, vallen);
        if (!e->value)
            goto nomem;
    }
    if (bs_value_parse(row, e->value, &e->v, why, sizeof why) != 0) {
        char shown[BS_CONFIG_SHOW_MAX + 1];
        bs_config_show(shown, sizeof shown, e->value, strlen(e->value),
                       false);
        bs_config_fail(errstr, n, "%s: key '%s': value '%s' %s", where, key,
                       e->secret ? BS_CONFIG_REDACTED : shown, why);
        return -1;
    }
    return 0;
nomem:
    bs_config_fail(errstr, n, "%s: key '%s': out of memory", where, key);
    return -1;
}

/* e (its origin, where) stored as key's entry, replacing one a lower or
 * equal layer set; dropped when a higher layer set key already.  The
 * entry is cfg's either way, or freed: -1 with errstr. */
static int store_entry(bs_config *cfg, int layer, const char *key,
                       bs_config_entry *e, const char *where, char *errstr,
                       size_t n)
{
    bs_config_entry *old = bs_config_find_entry(cfg, key);
    if (old && old->layer > layer) { /* a higher layer already set it */
        entry_free(e);
        return 0;
    }
    e->origin = strdup(where);
    if (!e->origin)
        goto nomem;
    if (old) {
        e->key = old->key;
        old->key = NULL;
        entry_free(old);
        *old = *e;
    } else {
        if (cfg->n >= BS_CONFIG_MAX_KEYS) {
            bs_config_fail(errstr, n, "%s: key '%s': more than %d keys", where,
                           key, BS_CONFIG_MAX_KEYS);
            entry_free(e);
            return -1;
        }
        e->key = strdup(key);
        if (!e->key)
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
        cfg->entries[cfg->n++] = *e;
    }
    bs_config_drop_blocklists(cfg);
    return 0;
nomem:
    entry_free(e);
    bs_config_fail(errstr, n, "%s: key '%s': out of memory", where, key);
    return -1;
}

/* Sets key=value (both trimmed here) in `layer`.  `where` prefixes every
 * message and becomes the entry's origin.  The value is read from a file
 * when it is "@file:PATH" or, with `path_given` (BLOOMSTAGE_..._FILE), is
 * the path itself: then it is taken as the file holds it, untrimmed. */
static int set_layer(bs_config *cfg, int layer, const char *rawkey,
                     size_t keylen, const char *rawval, size_t vallen,
                     bool path_given, const char *where, char *errstr,
                     size_t n)
{
    const char *k = trim(rawkey, &keylen);
    const char *val = trim(rawval, &vallen);
    char key[BS_CONFIG_MAX_KEY + 1];
    if (take_key(k, keylen, where, key, errstr, n) != 0)
        return -1;
    if (vallen > BS_CONFIG_MAX_LINE) {
        bs_config_fail(errstr, n, "%s: key '%s': value longer than %d bytes",
                       where, key, BS_CONFIG_MAX_LINE);
        return -1;
    }
    char why[BS_ERRSTR_SIZE];
    const bs_config_row *row = bs_config_row_find(key, why, sizeof why);
    if (!row) {
        unknown_key(where, key, layer, why, errstr, n);
        return -1;
    }
    bs_config_entry e = {.row = row, .layer = layer};
    e.secret = bs_config_key_is_secret(key);
    if (take_value(row, key, val, vallen, path_given, where, &e, errstr,
                   n) != 0) {
        entry_free(&e);
        return -1;
    }
    return store_entry(cfg, layer, key, &e, where, errstr, n);
}

/* The origin of `-X key=value`.  It repeats the value only where that
 * helps and cannot leak: for bloomstage's own keys (a bad one is then in
 * plain sight), never for a secret, an unknown key (it may be a misspelt
 * secret) or a pass-through key (librdkafka rejects a misspelt property
 * by its origin).  A value read from a file shows its path instead:
 * "-X key=@file:PATH". */
static void arg_origin(char *buf, size_t n, const char *rawkey, size_t keylen,
                       const char *rawval, size_t vallen)
{
    const char *k = trim(rawkey, &keylen);
    const char *val = trim(rawval, &vallen);
    char key[BS_CONFIG_MAX_KEY + 1], shown[BS_CONFIG_SHOW_MAX + 1];
    if (keylen > BS_CONFIG_MAX_KEY)
        keylen = BS_CONFIG_MAX_KEY;
    memcpy(key, k, keylen);
    key[keylen] = '\0';
    const size_t plen = strlen(BS_CONFIG_FILE_PREFIX);
    const bs_config_row *row = bs_config_row_find(key, NULL, 0);
    if (keylen == 0) {
        snprintf(buf, n, "-X =...");
    } else if (vallen >= plen &&
               memcmp(val, BS_CONFIG_FILE_PREFIX, plen) == 0) {
        snprintf(buf, n, "-X %s=%.*s", key, (int)vallen, val);
    } else if (row && !bs_config_row_is_passthrough(row) &&
               !bs_config_key_is_secret(key)) {
        bs_config_show(shown, sizeof shown, val, vallen, false);
        snprintf(buf, n, "-X %s=%s", key, shown);
    } else {
        snprintf(buf, n, "-X %s", key);
    }
}

/* Room for an origin: "env NAME=PATH" or "-X key=@file:PATH" (a longer
 * path is cut in the origin, not in the file name opened). */
#define ORIGIN_MAX (3 * BS_CONFIG_MAX_KEY + 4096 + 64)

int bs_config_set(bs_config *cfg, const char *key, const char *value,
                  const char *origin, char *errstr, size_t errstr_size)
{
    char where[ORIGIN_MAX];
    size_t keylen = strlen(key), vallen = strlen(value);
    if (!origin) {
        arg_origin(where, sizeof where, key, keylen, value, vallen);
        origin = where;
    }
    return set_layer(cfg, LAYER_ARG, key, keylen, value, vallen, false,
                     origin, errstr, errstr_size);
}

int bs_config_set_arg(bs_config *cfg, const char *arg, char *errstr,
                      size_t errstr_size)
{
    char where[ORIGIN_MAX];
    const char *eq = strchr(arg, '=');
    if (!eq) {
        char shown[BS_CONFIG_SHOW_MAX + 1];
        bs_config_show(shown, sizeof shown, arg, strlen(arg), true);
        bs_config_fail(errstr, errstr_size, "-X %s: expected key=value",
                       shown);
        return -1;
    }
    size_t keylen = (size_t)(eq - arg), vallen = strlen(eq + 1);
    arg_origin(where, sizeof where, arg, keylen, eq + 1, vallen);
    return set_layer(cfg, LAYER_ARG, arg, keylen, eq + 1, vallen, false,
                     where, errstr, errstr_size);
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
            char shown[BS_CONFIG_SHOW_MAX + 1];
            bs_config_show(shown, sizeof shown, s, len, true);
            bs_config_fail(errstr, errstr_size,
                           "%s: expected key=value, got '%s'", where, shown);
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
                      len - (size_t)(eq - s) - 1, false, where, errstr,
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
 * them alone instead of calling them unknown.  BLOOMSTAGE_CRASH_AT and
 * BLOOMSTAGE_FAIL_AT: the tests' crash and fail points
 * (stage/base/crash_point.c); BLOOMSTAGE_CORE_DUMPS: `run` leaves core
 * dumps allowed (cli/cmd_run.c). */
static const char *const env_not_keys[] = {"BLOOMSTAGE_CRASH_AT",
                                           "BLOOMSTAGE_FAIL_AT",
                                           "BLOOMSTAGE_CORE_DUMPS", NULL};

/* The suffix of a variable whose value is the path of a file holding the
 * value (the container convention for secrets). */
#define ENV_FILE_SUFFIX "_FILE"

/* One BLOOMSTAGE_ variable that sets a key. */
typedef struct env_var {
    char name[3 * BS_CONFIG_MAX_KEY + 32]; /* without "=VALUE" */
    char key[3 * BS_CONFIG_MAX_KEY + 1];
    const char *value;
    bool from_file; /* NAME ends in _FILE: the value is a path */
} env_var;

/* Decodes envp entry `var`: 1 for a variable that sets a key, 0 for any
 * other, -1 with a message for a BLOOMSTAGE_ name too long. */
static int env_var_parse(const char *var, env_var *v, char *errstr, size_t n)
{
    const size_t plen = strlen(BS_CONFIG_ENV_PREFIX);
    const size_t slen = strlen(ENV_FILE_SUFFIX);
    const char *eq = strchr(var, '=');
    if (!eq || strncmp(var, BS_CONFIG_ENV_PREFIX, plen) != 0 ||
        (size_t)(eq - var) < plen)
        return 0;
    size_t namelen = (size_t)(eq - var);
    for (size_t j = 0; env_not_keys[j]; j++)
        if (strlen(env_not_keys[j]) == namelen &&
            strncmp(env_not_keys[j], var, namelen) == 0)
            return 0;
    if (namelen > plen + 3 * BS_CONFIG_MAX_KEY) {
        char shown[BS_CONFIG_SHOW_MAX + 1];
        bs_config_show(shown, sizeof shown, var, namelen, true);
        bs_config_fail(errstr, n, "env %s: name too long", shown);
        return -1;
    }
    memcpy(v->name, var, namelen);
    v->name[namelen] = '\0';
    v->value = eq + 1;
    v->from_file = namelen >= plen + slen &&
                   strcmp(v->name + namelen - slen, ENV_FILE_SUFFIX) == 0;
    char stem[sizeof v->name];
    size_t stemlen = namelen - plen - (v->from_file ? slen : 0);
    memcpy(stem, v->name + plen, stemlen);
    stem[stemlen] = '\0';
    if (bs_config_env_decode(stem, v->key, sizeof v->key) != 0) {
        bs_config_fail(errstr, n, "env %s: name too long", v->name);
        return -1;
    }
    return 1;
}

int bs_config_load_env(bs_config *cfg, char *const *envp, char *errstr,
                       size_t errstr_size)
{
    for (size_t i = 0; envp && envp[i]; i++) {
        env_var v, other;
        int rc = env_var_parse(envp[i], &v, errstr, errstr_size);
        if (rc < 0)
            return -1;
        if (rc == 0)
            continue;
        char where[ORIGIN_MAX];
        if (v.from_file)
            snprintf(where, sizeof where, "env %s=%s", v.name, v.value);
        else
            snprintf(where, sizeof where, "env %s", v.name);
        /* BLOOMSTAGE_X_FILE and BLOOMSTAGE_X both set: which one was
         * meant is anybody's guess. */
        for (size_t j = 0; v.from_file && envp[j]; j++) {
            if (env_var_parse(envp[j], &other, NULL, 0) == 1 &&
                !other.from_file && strcmp(other.key, v.key) == 0) {
                bs_config_fail(errstr, errstr_size,
                               "%s: key '%s': also set by %s (set one of "
                               "the two)",
                               where, v.key, other.name);
                return -1;
            }
        }
        if (set_layer(cfg, LAYER_ENV, v.key, strlen(v.key), v.value,
                      strlen(v.value), v.from_file, where, errstr,
                      errstr_size) != 0)
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

bool bs_config_value_hidden(const bs_config *cfg, const char *key)
{
    const bs_config_entry *e = bs_config_find_entry(cfg, key);
    return e ? e->secret : bs_config_key_is_secret(key);
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
    char why[BS_ERRSTR_SIZE];
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
