/*
 * print.c -- the documents the key table drives: `bloomstage config --list`
 * (a table for reading), `bloomstage config --sample` (the commented
 * sample file; config/bloomstage.conf is exactly its output, a test diffs
 * them) and `bloomstage config` (the effective configuration, each value
 * with where it came from, secrets redacted).  All write to a caller's
 * stream and report a failed write.
 */
#include "config_int.h"

#include <string.h>

#define WIDTH 76

void bs_config_display_name(const bs_config_row *row, char *buf, size_t n)
{
    const char *star = strchr(row->name, '*');
    if (star && star[1] != '\0')
        snprintf(buf, n, "%.*sNAME%s", (int)(star - row->name), row->name,
                 star + 1);
    else
        snprintf(buf, n, "%s", row->name);
}

/* Writes `text` wrapped at WIDTH columns, each line starting with
 * `indent`; runs of blanks become one space. */
static void wrap(FILE *out, const char *indent, const char *text)
{
    size_t col = 0, ilen = strlen(indent);
    const char *p = text;
    for (;;) {
        p += strspn(p, " ");
        if (*p == '\0')
            break;
        size_t wlen = strcspn(p, " ");
        if (col > 0 && col + 1 + wlen > WIDTH) {
            fputc('\n', out);
            col = 0;
        }
        if (col == 0) {
            fputs(indent, out);
            col = ilen;
        } else {
            fputc(' ', out);
            col++;
        }
        fwrite(p, 1, wlen, out);
        col += wlen;
        p += wlen;
    }
    if (col > 0)
        fputc('\n', out);
}

static const char *section_intro(const char *title)
{
    for (size_t i = 0; i < bs_config_nsections; i++)
        if (strcmp(bs_config_sections[i].title, title) == 0)
            return bs_config_sections[i].intro;
    return NULL;
}

static int finish(FILE *out)
{
    return fflush(out) != 0 || ferror(out) ? -1 : 0;
}

/* "(required)", "(dedup.key)", "\"\"", "-", or the default itself. */
static void list_default(const bs_config_row *row, char *buf, size_t n)
{
    if (row->flags & BS_CF_REQUIRED)
        snprintf(buf, n, "(required)");
    else if (row->def_from)
        snprintf(buf, n, "(%s)", row->def_from);
    else if (!row->def)
        snprintf(buf, n, "-");
    else if (row->def[0] == '\0')
        snprintf(buf, n, "\"\"");
    else
        snprintf(buf, n, "%s", row->def);
}

/* One line of the --list table, without trailing blanks. */
static void print_row(FILE *out, const char *key, const char *type,
                      const char *def, const char *range)
{
    char line[1024];
    snprintf(line, sizeof line, "%-26s %-11s %-14s %s", key, type, def,
             range);
    size_t len = strlen(line);
    while (len > 0 && line[len - 1] == ' ')
        line[--len] = '\0';
    fprintf(out, "%s\n", line);
}

int bs_config_print_list(FILE *out)
{
    char name[BS_CONFIG_MAX_KEY + 1], def[128], range[256];
    char env[3 * BS_CONFIG_MAX_KEY + 1];
    fprintf(out,
            "bloomstage configuration keys.  Precedence: defaults < config "
            "file (-c)\n< environment (BLOOMSTAGE_...) < -X key=value.  "
            "NAME: [A-Za-z0-9_-]+.\n");
    const char *section = NULL;
    for (size_t i = 0; i < bs_config_nrows; i++) {
        const bs_config_row *row = &bs_config_rows[i];
        if (!section || strcmp(section, row->section) != 0) {
            section = row->section;
            fprintf(out, "\n== %s ==\n\n", section);
            print_row(out, "KEY", "TYPE", "DEFAULT", "RANGE");
        }
        fputs("\n", out);
        bs_config_display_name(row, name, sizeof name);
        list_default(row, def, sizeof def);
        bs_config_format_range(row, range, sizeof range);
        print_row(out, name, bs_ctype_name(row->type), def, range);
        wrap(out, "    ", row->help);
        if (bs_config_env_encode(name, env, sizeof env) == 0)
            fprintf(out, "    env: %s%s\n", BS_CONFIG_ENV_PREFIX, env);
    }
    return finish(out);
}

/* The sample's opening comment: paragraphs, wrapped like the help texts. */
static const char *const sample_header[] = {
    "bloomstage.conf -- sample configuration of bloomstage",
    "This file is the output of `bloomstage config --sample` and a test "
    "keeps it so: change the key table (config/keys.c) and regenerate it "
    "rather than editing it by hand.  `bloomstage config --list` shows the "
    "same keys as a table; `bloomstage config --check -c FILE` checks a "
    "file.",
    "Syntax: one key=value per line; blanks around the key and the value "
    "are ignored and the value is the rest of the line ('=' and '#' "
    "included).  Lines starting with # or ! are comments.  Every key is "
    "shown below commented out, with its default, or an example when it "
    "has none.",
    "Sizes (type size) are bytes, optionally followed by k, M, G or T, "
    "which multiply by powers of 1024: 512k is 524288 bytes, 512M is "
    "536870912 (512 MiB).  `bloomstage dedup --max-memory` reads sizes "
    "the same way.",
    "Precedence: defaults < this file < environment < -X key=value on the "
    "command line.  The environment variable of a key is BLOOMSTAGE_ and "
    "the key in upper case with '.' -> '_', '_' -> '__' and '-' -> '___' "
    "(as in the apache/kafka image): BLOOMSTAGE_DEDUP_FPR=1e-9 sets "
    "dedup.fpr, BLOOMSTAGE_KAFKA_BOOTSTRAP_SERVERS sets "
    "kafka.bootstrap.servers.  Keys read from the environment are lower "
    "case.  A BLOOMSTAGE_ variable that names no key is an error.",
    "Secrets: a value written as @file:PATH (here, in the environment or "
    "with -X) is the content of file PATH, one trailing newline removed; "
    "BLOOMSTAGE_<KEY>_FILE=PATH in the environment does the same (Docker "
    "and Kubernetes secrets).  The values of secret keys (passwords, "
    "secrets, JAAS configs, private keys) and values read from files are "
    "never printed, `bloomstage config --check` shows [redacted].",
};

int bs_config_print_sample(FILE *out)
{
    char name[BS_CONFIG_MAX_KEY + 1], range[256], meta[512];
    for (size_t i = 0; i < sizeof sample_header / sizeof *sample_header;
         i++) {
        if (i > 0)
            fputs("#\n", out);
        wrap(out, "# ", sample_header[i]);
    }
    const char *section = NULL;
    for (size_t i = 0; i < bs_config_nrows; i++) {
        const bs_config_row *row = &bs_config_rows[i];
        bool pattern = bs_config_row_is_pattern(row);
        if (!section || strcmp(section, row->section) != 0) {
            section = row->section;
            fprintf(out, "\n# ========================================"
                         "==================================\n"
                         "# %s\n"
                         "# ========================================"
                         "==================================\n",
                    section);
            const char *intro = section_intro(section);
            if (intro) {
                fputs("#\n", out);
                wrap(out, "# ", intro);
            }
        }
        fputs("\n", out);
        wrap(out, "# ", row->help);

        bs_config_display_name(row, name, sizeof name);
        bs_config_format_range(row, range, sizeof range);
        size_t o = 0;
        if (pattern)
            o += (size_t)snprintf(meta, sizeof meta, "Keys: %s, type %s", name,
                                  bs_ctype_name(row->type));
        else
            o += (size_t)snprintf(meta, sizeof meta, "Type: %s",
                                  bs_ctype_name(row->type));
        if (range[0] && o < sizeof meta)
            o += (size_t)snprintf(meta + o, sizeof meta - o, "%s %s",
                                  row->type == BS_CT_ENUM ? ", one of" : " in",
                                  range);
        if (o < sizeof meta)
            o += (size_t)snprintf(meta + o, sizeof meta - o, ".");
        if ((row->flags & BS_CF_REQUIRED) && o < sizeof meta)
            o += (size_t)snprintf(meta + o, sizeof meta - o, "  Required%s.",
                                  pattern ? " for each NAME" : "");
        if (row->def_from && o < sizeof meta)
            snprintf(meta + o, sizeof meta - o, "  Default: the value of %s.",
                     row->def_from);
        wrap(out, "# ", meta);

        if (row->example && (pattern || !row->def))
            fprintf(out, "#%s\n", row->example);
        else
            fprintf(out, "#%s=%s\n", row->name, row->def ? row->def : "");
    }
    return finish(out);
}

/* -- the effective configuration (`bloomstage config --check`) ----------- */

/* s with control characters and bytes that are not UTF-8 escaped (a PEM
 * from the environment has newlines, a path may have anything): the
 * number of bytes written. */
static size_t put_escaped(FILE *out, const char *s)
{
    size_t len = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        size_t u = *p >= 0x80 ? bs_config_utf8_len(p) : 0;
        if (u) {
            fwrite(p, 1, u, out);
            len += u;
            p += u - 1;
        } else if (*p == '\n' || *p == '\r' || *p == '\t' || *p == '\\') {
            fputc('\\', out);
            fputc(*p == '\n' ? 'n' : *p == '\r' ? 'r' : *p == '\t' ? 't' : '\\',
                  out);
            len += 2;
        } else if (*p < 0x20 || *p >= 0x7f) {
            fprintf(out, "\\x%02x", *p);
            len += 4;
        } else {
            fputc(*p, out);
            len++;
        }
    }
    return len;
}

/* "key = value  # origin", the value padded to a column; a secret value
 * (of a secret key, or read from a file) as "[redacted]". */
static int print_kv(FILE *out, const char *key, const char *value,
                    const char *origin, bool secret)
{
    if (!value)
        value = "(unset)";
    else if (secret && value[0])
        value = BS_CONFIG_REDACTED;
    int w = fprintf(out, "%-28s = ", key);
    size_t vlen = put_escaped(out, value);
    if (w < 0 || fprintf(out, "%*s  # ", vlen < 24 ? (int)(24 - vlen) : 0,
                         "") < 0)
        return -1;
    put_escaped(out, origin);
    return fputc('\n', out) == EOF ? -1 : 0;
}

struct pctx {
    FILE *out;
    int rc;
};

/* Every middle-'*' row of the group, for one NAME, set or derived. */
static int print_group(const bs_config *cfg, const bs_config_row *first_row,
                       const char *name, const bs_config_entry *first,
                       void *opaque)
{
    (void)first;
    struct pctx *p = opaque;
    for (size_t i = 0; i < bs_config_nrows; i++) {
        const bs_config_row *row = &bs_config_rows[i];
        if (!bs_config_same_group(row, first_row))
            continue;
        char key[2 * BS_CONFIG_MAX_KEY + 2], origin[BS_CONFIG_MAX_KEY + 32];
        bs_config_instantiate(row, name, key, sizeof key);
        const bs_config_entry *e = bs_config_find_entry(cfg, key);
        const char *o = e ? e->origin : "default";
        if (!e && row->def_from) {
            snprintf(origin, sizeof origin, "default (%s)", row->def_from);
            o = origin;
        }
        if (print_kv(p->out, key, bs_config_get_str(cfg, key), o,
                     e ? e->secret : bs_config_key_is_secret(key)) < 0)
            p->rc = -1;
    }
    return 0;
}

int bs_config_print_effective(const bs_config *cfg, FILE *out)
{
    struct pctx p = {out, 0};
    for (size_t i = 0; i < bs_config_nrows; i++) {
        const bs_config_row *row = &bs_config_rows[i];
        const char *star = strchr(row->name, '*');
        if (!star) {
            const bs_config_entry *e = bs_config_find_entry(cfg, row->name);
            if (print_kv(out, row->name, e ? e->value : NULL,
                         e && e->value ? e->origin : "no default",
                         e ? e->secret : bs_config_key_is_secret(row->name)) <
                0)
                p.rc = -1;
        } else if (star[1] == '\0') {
            for (size_t j = 0; j < cfg->n; j++) {
                const bs_config_entry *e = &cfg->entries[j];
                if (e->row == row && print_kv(out, e->key, e->value,
                                              e->origin, e->secret) < 0)
                    p.rc = -1;
            }
        } else if (bs_config_group_leader(row)) {
            (void)bs_config_foreach_name(cfg, row, print_group, &p);
        }
    }
    if (fflush(out) != 0 || ferror(out))
        p.rc = -1;
    return p.rc;
}
