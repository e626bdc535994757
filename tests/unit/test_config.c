/*
 * test_config.c -- unit tests of config/ (libbsconfig).
 *
 * Every test that reads files writes them under its own mkdtemp directory
 * (the fixture), removed afterwards.  Messages are asserted in full: the
 * promise of this module is that an error says where (FILE:LINE, env NAME,
 * -X key=value), which key, and what is wrong.  The table itself is tested
 * too (defaults parse, enum constants and the table's values come from the
 * same lists, every example in the sample loads), so a bad row fails here
 * before it reaches a user.  So is bs_config_parse_size, the byte-size
 * parser the CLI shares.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "config.h"
#include "config_int.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct fixture {
    char dir[256];
    char path[512]; /* the last file written */
    bs_config *cfg;
    char err[1024];
} fixture;

static int rm_entry(const char *path, const struct stat *sb, int flag,
                    struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    const char *tmp = getenv("TMPDIR");
    snprintf(f->dir, sizeof f->dir, "%s/bscfg.XXXXXX", tmp ? tmp : "/tmp");
    if (!mkdtemp(f->dir)) {
        free(f);
        return -1;
    }
    f->cfg = bs_config_new();
    if (!f->cfg) {
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    bs_config_destroy(f->cfg);
    int rc = nftw(f->dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
    free(f);
    return rc;
}

/* Writes len bytes of content to DIR/name; the path is left in f->path. */
static const char *write_bytes(fixture *f, const char *name,
                               const char *content, size_t len)
{
    snprintf(f->path, sizeof f->path, "%s/%s", f->dir, name);
    FILE *fp = fopen(f->path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(content, 1, len, fp), len);
    assert_int_equal(fclose(fp), 0);
    return f->path;
}

static const char *write_conf(fixture *f, const char *content)
{
    return write_bytes(f, "test.conf", content, strlen(content));
}

/* Loads content as a file into a fresh configuration: the load's rc. */
static int load_text(fixture *f, const char *content)
{
    bs_config_destroy(f->cfg);
    f->cfg = bs_config_new();
    assert_non_null(f->cfg);
    f->err[0] = '\0';
    return bs_config_load_file(f->cfg, write_conf(f, content), f->err,
                               sizeof f->err);
}

/* Expected message: "PATH" + rest, with PATH the fixture's file. */
static void assert_err_at(fixture *f, const char *rest)
{
    char want[2048];
    snprintf(want, sizeof want, "%s%s", f->path, rest);
    assert_string_equal(f->err, want);
}

/* ------------------------------------------------------------------------ */

static void test_defaults(void **state)
{
    fixture *f = *state;
    bs_config *cfg = f->cfg;
    assert_true(bs_config_get_double(cfg, "dedup.fpr") == 1e-6);
    assert_int_equal(bs_config_get_int(cfg, "dedup.capacity"), 100000);
    assert_true(bs_config_get_double(cfg, "dedup.growth") == 2.0);
    assert_true(bs_config_get_double(cfg, "dedup.tightening") == 0.85);
    assert_int_equal(bs_config_get_int(cfg, "dedup.max.bytes"), 0);
    assert_int_equal(bs_config_get_enum(cfg, "dedup.on.missing.key"),
                     BS_CONFIG_MISSING_FORWARD);
    assert_string_equal(bs_config_get_str(cfg, "dedup.on.missing.key"),
                        "forward");
    assert_string_equal(bs_config_get_str(cfg, "checkpoint.dir"),
                        "checkpoints");
    assert_int_equal(bs_config_get_int(cfg, "checkpoint.interval.ms"), 1000);
    assert_int_equal(bs_config_get_int(cfg, "checkpoint.records"), 1000000);
    assert_string_equal(bs_config_get_str(cfg, "consumer.group.id"),
                        "bloomstage");
    assert_string_equal(bs_config_get_str(cfg, "rejected.topic"), "");
    assert_string_equal(bs_config_get_str(cfg, "metrics.listen"), "");
    assert_int_equal(bs_config_get_enum(cfg, "processing.guarantee"),
                     BS_CONFIG_EXACTLY_ONCE);
    assert_int_equal(bs_config_get_enum(cfg, "log.level"),
                     BS_CONFIG_LOG_INFO);

    const bs_config_keyspec *ks = bs_config_get_keyspec(cfg, "dedup.key");
    assert_non_null(ks);
    assert_int_equal(ks->parts[0].kind, BS_CONFIG_KEYSPEC_KEY);
    assert_string_equal(ks->parts[0].arg, "");

    assert_null(bs_config_get_str(cfg, "input.topics"));
    assert_null(bs_config_get_str(cfg, "output.topic"));
    assert_null(bs_config_origin(cfg, "input.topics"));
    assert_string_equal(bs_config_origin(cfg, "dedup.fpr"), "default");
    const char *const *topics = (const char *const *)1;
    assert_int_equal(bs_config_get_topics(cfg, "input.topics", &topics), 0);
    assert_null(topics);
    const bs_config_blocklist *bl = (const bs_config_blocklist *)1;
    assert_int_equal(bs_config_blocklists(cfg, &bl), 0);

    /* Unknown keys have no value and no origin; getters do not invent one. */
    assert_null(bs_config_get_str(cfg, "no.such.key"));
    assert_null(bs_config_origin(cfg, "no.such.key"));
    assert_null(bs_config_get_str(cfg, "kafka.bootstrap.servers"));

    assert_int_equal(bs_config_validate(cfg, f->err, sizeof f->err), -1);
    assert_string_equal(f->err,
                        "required key 'input.topics' is not set (set it in "
                        "the config file, as BLOOMSTAGE_INPUT_TOPICS or with "
                        "-X input.topics=...)");
}

/* Each enum key's values and constants come from one list in config.h:
 * every X(CONSTANT, "text") line must parse to CONSTANT, name CONSTANT as
 * "text" (bs_config_enum_text), and the row must allow no other value. */
typedef struct enum_case {
    int constant;
    const char *text;
} enum_case;
#define ENUM_CASE(name, text) {name, text},

static void check_enum_list(const char *key, const enum_case *cases,
                            size_t n)
{
    const bs_config_row *row = bs_config_row_by_name(key);
    assert_non_null(row);
    assert_int_equal(row->type, BS_CT_ENUM);
    size_t nvalues = 0;
    while (row->values[nvalues])
        nvalues++;
    if (nvalues != n)
        fail_msg("%s: the table allows %zu values, config.h lists %zu", key,
                 nvalues, n);
    for (size_t i = 0; i < n; i++) {
        bs_config *cfg = bs_config_new();
        char err[256];
        assert_non_null(cfg);
        assert_int_equal(bs_config_set(cfg, key, cases[i].text, "test", err,
                                       sizeof err),
                         0);
        if (bs_config_get_enum(cfg, key) != cases[i].constant)
            fail_msg("%s=%s parses to %d, its constant is %d", key,
                     cases[i].text, bs_config_get_enum(cfg, key),
                     cases[i].constant);
        assert_string_equal(bs_config_enum_text(key, cases[i].constant),
                            cases[i].text);
        /* What the getter hands back as text is the value set. */
        assert_string_equal(bs_config_get_str(cfg, key), cases[i].text);
        bs_config_destroy(cfg);
    }
    assert_null(bs_config_enum_text(key, (int)n));
    assert_null(bs_config_enum_text(key, -1));
}

static void test_enum_lists_round_trip(void **state)
{
    (void)state;
    static const enum_case missing[] = {
        BS_MISSING_KEY_POLICY_LIST(ENUM_CASE)};
    static const enum_case guarantee[] = {BS_GUARANTEE_LIST(ENUM_CASE)};
    static const enum_case store[] = {BS_CKPT_STORE_KIND_LIST(ENUM_CASE)};
    static const enum_case level[] = {BS_CONFIG_LOG_LEVEL_LIST(ENUM_CASE)};
    check_enum_list("dedup.on.missing.key", missing,
                    sizeof missing / sizeof missing[0]);
    check_enum_list("processing.guarantee", guarantee,
                    sizeof guarantee / sizeof guarantee[0]);
    check_enum_list("checkpoint.store", store,
                    sizeof store / sizeof store[0]);
    check_enum_list("log.level", level, sizeof level / sizeof level[0]);

    /* The constants the stage names keep their values (and their typed
     * enums hold them). */
    bs_guarantee g = BS_CONFIG_EXACTLY_ONCE;
    bs_missing_key_policy m = BS_CONFIG_MISSING_REJECT;
    bs_ckpt_store_kind k = BS_CONFIG_STORE_KAFKA;
    bs_config_log_level l = BS_CONFIG_LOG_DEBUG;
    assert_string_equal(bs_config_enum_text("processing.guarantee", g),
                        "exactly_once");
    assert_string_equal(bs_config_enum_text("dedup.on.missing.key", m),
                        "reject");
    assert_string_equal(bs_config_enum_text("checkpoint.store", k), "kafka");
    assert_string_equal(bs_config_enum_text("log.level", l), "debug");
}

/* bs_config_parse_size: the one byte-size parser (config SIZE keys, the
 * CLI's --max-memory, benchmarks). */
static void test_parse_size(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        uint64_t bytes;
    } good[] = {
        {"0", 0},
        {"1", 1},
        {"512", 512},
        {"1k", 1024},
        {"1K", 1024},
        {"512k", 524288},
        {"512M", 536870912},
        {"512m", 536870912},
        {"2G", UINT64_C(2) << 30},
        {"2g", UINT64_C(2) << 30},
        {"1T", UINT64_C(1) << 40},
        {"1t", UINT64_C(1) << 40},
        {"007k", 7168},
        {"9223372036854775807", UINT64_C(9223372036854775807)},
        {"8388607T", UINT64_C(8388607) << 40},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        uint64_t v = 12345;
        const char *why = "untouched";
        if (bs_config_parse_size(good[i].text, &v, &why) != 0)
            fail_msg("'%s' rejected: %s", good[i].text, why);
        assert_string_equal(why, "untouched");
        if (v != good[i].bytes)
            fail_msg("'%s' gave %llu, want %llu", good[i].text,
                     (unsigned long long)v,
                     (unsigned long long)good[i].bytes);
    }
    static const char *const junk[] = {
        "", "k", "M", "-1", "+1", " 1", "1 ", "1 k", "1kk", "1kB", "1KiB",
        "1.5M", "1e6", "0x10", "1X", "1P", "12abc", "1k ", "--1",
    };
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
        uint64_t v = 12345;
        const char *why = NULL;
        if (bs_config_parse_size(junk[i], &v, &why) == 0)
            fail_msg("'%s' accepted as %llu", junk[i],
                     (unsigned long long)v);
        assert_string_equal(why, BS_CONFIG_SIZE_SYNTAX);
        assert_int_equal(v, 12345); /* *out untouched on failure */
    }
    static const char *const huge[] = {
        "9223372036854775808", "18446744073709551616",
        "99999999999999999999999", "8388608T", "9007199254740992k",
        "8796093022208M", "8589934592G",
    };
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        uint64_t v = 12345;
        const char *why = NULL;
        if (bs_config_parse_size(huge[i], &v, &why) == 0)
            fail_msg("'%s' accepted as %llu", huge[i],
                     (unsigned long long)v);
        assert_string_equal(why, "is too large for a 64-bit integer");
    }
    /* why may be NULL. */
    uint64_t v;
    assert_int_equal(bs_config_parse_size("12Q", &v, NULL), -1);
    assert_int_equal(bs_config_parse_size(NULL, &v, NULL), -1);
    assert_int_equal(bs_config_parse_size("3k", &v, NULL), 0);
    assert_int_equal(v, 3072);
}

static void test_table_rows_are_sound(void **state)
{
    (void)state;
    for (size_t i = 0; i < bs_config_nrows; i++) {
        const bs_config_row *row = &bs_config_rows[i];
        char why[256];
        assert_non_null(row->help);
        assert_true(strlen(row->help) > 10);
        /* Names unique. */
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(row->name, bs_config_rows[j].name);
        /* A known section. */
        bool known = false;
        for (size_t s = 0; s < bs_config_nsections; s++)
            known |= strcmp(bs_config_sections[s].title, row->section) == 0;
        assert_true(known);
        /* Defaults parse. */
        if (row->def) {
            bs_value v;
            int rc = bs_value_parse(row, row->def, &v, why, sizeof why);
            bs_value_free(&v);
            if (rc != 0)
                fail_msg("default of %s: %s", row->name, why);
        }
        if (row->def_from) {
            const bs_config_row *from = bs_config_row_by_name(row->def_from);
            assert_non_null(from);
            assert_int_equal(from->type, row->type);
        }
        if (row->type == BS_CT_ENUM)
            assert_non_null(row->values);
        if (row->flags & BS_CF_REQUIRED)
            assert_null(row->def);
        if (bs_config_row_is_pattern(row)) {
            /* The sample shows an example for every pattern. */
            assert_non_null(row->example);
            /* Getters cannot store a parsed default for an unset pattern
             * key of these types: they must inherit or have none. */
            if (row->type == BS_CT_KEYSPEC || row->type == BS_CT_TOPICS)
                assert_null(row->def);
        } else {
            /* A plain key is found by its own name. */
            assert_ptr_equal(bs_config_row_find(row->name, why, sizeof why),
                             row);
        }
        if (row->example) {
            bs_config *cfg = bs_config_new();
            assert_non_null(cfg);
            if (bs_config_set_arg(cfg, row->example, why, sizeof why) != 0)
                fail_msg("example of %s: %s", row->name, why);
            bs_config_destroy(cfg);
        }
    }
}

static void test_file_syntax(void **state)
{
    fixture *f = *state;
    const char text[] =
        "\xEF\xBB\xBF# a comment\r\n"                 /* 1: BOM + comment */
        "! another comment\r\n"                        /* 2 */
        "   # indented comment\n"                      /* 3 */
        "\n"                                           /* 4 */
        "   \t  \r\n"                                  /* 5 */
        "input.topics = events , clicks\t \r\n"        /* 6 */
        "output.topic=out\n"                           /* 7 */
        "  kafka.sasl.jaas.config = a=b c=\"d\"  \r\n" /* 8 */
        "kafka.client.id=stage # not a comment\n"      /* 9 */
        "dedup.fpr=0.01\n"                             /* 10 */
        "dedup.fpr = 0.001\n"                          /* 11: later wins */
        "\tcheckpoint.dir\t=\t/var/lib/x y\n"          /* 12 */
        "rejected.topic=";                             /* 13, no newline */
    assert_int_equal(load_text(f, text), 0);
    bs_config *cfg = f->cfg;

    const char *const *topics;
    assert_int_equal(bs_config_get_topics(cfg, "input.topics", &topics), 2);
    assert_string_equal(topics[0], "events");
    assert_string_equal(topics[1], "clicks");
    assert_string_equal(bs_config_get_str(cfg, "input.topics"),
                        "events , clicks");
    assert_string_equal(bs_config_get_str(cfg, "output.topic"), "out");
    assert_string_equal(bs_config_get_str(cfg, "kafka.sasl.jaas.config"),
                        "a=b c=\"d\"");
    assert_string_equal(bs_config_get_str(cfg, "kafka.client.id"),
                        "stage # not a comment");
    assert_true(bs_config_get_double(cfg, "dedup.fpr") == 0.001);
    assert_string_equal(bs_config_get_str(cfg, "checkpoint.dir"),
                        "/var/lib/x y");
    assert_string_equal(bs_config_get_str(cfg, "rejected.topic"), "");

    char want[600];
    snprintf(want, sizeof want, "%s:11", f->path);
    assert_string_equal(bs_config_origin(cfg, "dedup.fpr"), want);
    snprintf(want, sizeof want, "%s:6", f->path);
    assert_string_equal(bs_config_origin(cfg, "input.topics"), want);
    snprintf(want, sizeof want, "%s:13", f->path);
    assert_string_equal(bs_config_origin(cfg, "rejected.topic"), want);
    assert_string_equal(bs_config_origin(cfg, "log.level"), "default");
    assert_int_equal(bs_config_validate(cfg, f->err, sizeof f->err), 0);

    /* An empty file and a comments-only file are fine (and change
     * nothing). */
    assert_int_equal(load_text(f, ""), 0);
    assert_int_equal(load_text(f, "# only\n\n!this\n"), 0);
    assert_string_equal(bs_config_origin(f->cfg, "dedup.fpr"), "default");
}

static void test_malformed_lines(void **state)
{
    fixture *f = *state;
    assert_int_equal(load_text(f, "# ok\ngarbage line\n"), -1);
    assert_err_at(f, ":2: expected key=value, got 'garbage line'");

    assert_int_equal(load_text(f, "=value\n"), -1);
    assert_err_at(f, ":1: empty key before '='");

    assert_int_equal(load_text(f, "\n\n   = value\n"), -1);
    assert_err_at(f, ":3: empty key before '='");

    /* A Java-style "key: value" is not accepted. */
    assert_int_equal(load_text(f, "dedup.fpr: 0.1\n"), -1);
    assert_err_at(f, ":1: expected key=value, got 'dedup.fpr: 0.1'");

    /* A long malformed line is cut in the message. */
    char line[200];
    memset(line, 'x', sizeof line - 2);
    line[sizeof line - 2] = '\n';
    line[sizeof line - 1] = '\0';
    assert_int_equal(load_text(f, line), -1);
    char want[128];
    snprintf(want, sizeof want, ":1: expected key=value, got '%.61s...'",
             line);
    assert_err_at(f, want);

    /* NUL bytes mean this is not a text file. */
    bs_config_destroy(f->cfg);
    f->cfg = bs_config_new();
    write_bytes(f, "nul.conf", "kafka.a=1\nkafka.b=\0\n", 20);
    assert_int_equal(
        bs_config_load_file(f->cfg, f->path, f->err, sizeof f->err), -1);
    assert_err_at(f, ":2: NUL byte in line (not a text file?)");
}

/* Each type's bad values, as the user sees them from a file at line 3. */
/* What a value that is no key spec at all is told. */
#define NOT_A_KEY_SPEC                                                        \
    "is not a key spec (key, value, header:NAME, json:/pointer, avro:/path, " \
    "protobuf:/path, or key.json:, key.avro:, key.protobuf: with a path "     \
    "into the record key; or several separated by commas)"

static void test_bad_values(void **state)
{
    fixture *f = *state;
    static const struct {
        const char *key, *value, *why;
    } cases[] = {
        /* double */
        {"dedup.fpr", "2", "out of range (0, 0.1]"},
        {"dedup.fpr", "abc", "is not a number"},
        {"dedup.fpr", "", "is not a number"},
        {"dedup.fpr", "0.01x", "is not a number"},
        {"dedup.fpr", "1e-3.5", "is not a number"},
        {"dedup.fpr", "nan", "is not a number"},
        {"dedup.fpr", "inf", "is not a number"},
        {"dedup.fpr", "0x1p-8", "is not a number"},
        {"dedup.fpr", "1e999", "is beyond the range of a double"},
        {"dedup.fpr", "1e-999", "is beyond the range of a double"},
        {"dedup.growth", "-3", "out of range [1.1, 16]"},
        /* int */
        {"dedup.capacity", "12x", "is not an integer"},
        {"dedup.capacity", "1.5", "is not an integer"},
        {"dedup.capacity", "1e6", "is not an integer"},
        {"dedup.capacity", "", "is not an integer"},
        {"dedup.capacity", "-", "is not an integer"},
        {"dedup.capacity", "0x10", "is not an integer"},
        {"dedup.capacity", "10k", "is not an integer"},
        {"dedup.capacity", "9223372036854775808",
         "is too large for a 64-bit integer"},
        {"dedup.capacity", "-9223372036854775809",
         "is too large for a 64-bit integer"},
        {"dedup.capacity", "-1", "out of range [1, 1000000000000]"},
        {"checkpoint.interval.ms", "9", "out of range [10, 86400000]"},
        /* size */
        {"dedup.max.bytes", "1X",
         "is not a size (digits, optionally followed by k, M, G or T: KiB, "
         "MiB, GiB, TiB)"},
        {"dedup.max.bytes", "k",
         "is not a size (digits, optionally followed by k, M, G or T: KiB, "
         "MiB, GiB, TiB)"},
        {"dedup.max.bytes", "1kk",
         "is not a size (digits, optionally followed by k, M, G or T: KiB, "
         "MiB, GiB, TiB)"},
        {"dedup.max.bytes", "1 k",
         "is not a size (digits, optionally followed by k, M, G or T: KiB, "
         "MiB, GiB, TiB)"},
        {"dedup.max.bytes", "1.5M",
         "is not a size (digits, optionally followed by k, M, G or T: KiB, "
         "MiB, GiB, TiB)"},
        {"dedup.max.bytes", "-1k",
         "is not a size (digits, optionally followed by k, M, G or T: KiB, "
         "MiB, GiB, TiB)"},
        {"dedup.max.bytes", "2T", "out of range [0, 1T]"},
        {"dedup.max.bytes", "9000000T", "is too large for a 64-bit integer"},
        {"checkpoint.chunk.bytes", "1023", "out of range [1k, 16M]"},
        /* enum */
        {"dedup.on.missing.key", "drop", "is not one of: forward, reject"},
        {"dedup.on.missing.key", "Forward", "is not one of: forward, reject"},
        {"log.level", "trace", "is not one of: error, warn, info, debug"},
        {"processing.guarantee", "exactly-once",
         "is not one of: at_least_once, exactly_once"},
        /* key-spec */
        {"dedup.key", "Key",
         NOT_A_KEY_SPEC},
        {"dedup.key", "",
         NOT_A_KEY_SPEC},
        {"dedup.key", "header",
         NOT_A_KEY_SPEC},
        {"dedup.key", "header:", "has an empty header name (header:NAME)"},
        /* composite key specs: each part checked, at most 8 */
        {"dedup.key", "json:/a,header:",
         "has an empty header name (header:NAME)"},
        {"dedup.key", "key,Value",
         NOT_A_KEY_SPEC},
        {"dedup.key", "key,value,key,value,key,value,key,value,key",
         "has 9 parts, more than 8"},
        {"dedup.key", "key.json:x", "has a JSON pointer not starting with "
         "'/' (RFC 6901: json:/a/b, or json: for the whole value)"},
        {"dedup.key", "json:user",
         "has a JSON pointer not starting with '/' (RFC 6901: json:/a/b, or "
         "json: for the whole value)"},
        {"dedup.key", "json:/a~2b",
         "has '~' not followed by 0 or 1 in its JSON pointer (~0 is '~', ~1 "
         "is '/')"},
        {"dedup.key", "json:/a~",
         "has '~' not followed by 0 or 1 in its JSON pointer (~0 is '~', ~1 "
         "is '/')"},
        {"dedup.key", "avro:email",
         "has a path not starting with '/' (avro:/a/b, or avro: alone for "
         "the whole value)"},
        {"dedup.key", "json:/a,key.protobuf:id",
         "has a path not starting with '/' (key.protobuf:/a/b, or "
         "key.protobuf: alone for the whole value)"},
        /* topic list */
        {"input.topics", "", "has an empty topic name (item 1)"},
        {"input.topics", "a,,b", "has an empty topic name (item 2)"},
        {"input.topics", "a,", "has an empty topic name (item 2)"},
        {"input.topics", ", a", "has an empty topic name (item 1)"},
        {"input.topics", "a, b ,a", "names topic 'a' twice"},
        {"input.topics", "a b",
         "has ' ' in topic 'a b' (topic names are letters, digits, '.', '_' "
         "and '-')"},
        {"input.topics", "a;b",
         "has ';' in topic 'a;b' (topic names are letters, digits, '.', '_' "
         "and '-')"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[512], want[1024];
        snprintf(text, sizeof text, "# header\n\n%s=%s\n", cases[i].key,
                 cases[i].value);
        if (load_text(f, text) != -1)
            fail_msg("%s=%s was accepted", cases[i].key, cases[i].value);
        snprintf(want, sizeof want, "%s:3: key '%s': value '%s' %s", f->path,
                 cases[i].key, cases[i].value, cases[i].why);
        assert_string_equal(f->err, want);
    }

    /* A topic name longer than Kafka allows (249). */
    char text[400], name[251];
    memset(name, 't', 250);
    name[250] = '\0';
    snprintf(text, sizeof text, "input.topics=ok,%s\n", name);
    assert_int_equal(load_text(f, text), -1);
    assert_non_null(strstr(
        f->err, "has a topic name longer than 249 characters (item 2)"));
    /* The value is cut in the message, not the reason. */
    assert_non_null(strstr(f->err, "...' has a topic"));
    name[249] = '\0';
    snprintf(text, sizeof text, "input.topics=ok,%s\n", name);
    assert_int_equal(load_text(f, text), 0);

    /* Strings take anything. */
    assert_int_equal(load_text(f, "checkpoint.dir=~/a b/#c=d\n"), 0);
    assert_string_equal(bs_config_get_str(f->cfg, "checkpoint.dir"),
                        "~/a b/#c=d");
}

/* bool has no key yet: its parser is tested on a row of its own. */
static void test_bool_values(void **state)
{
    (void)state;
    const bs_config_row row = {.name = "test.flag", .type = BS_CT_BOOL,
                               .help = "test"};
    bs_value v;
    char why[256];
    assert_int_equal(bs_value_parse(&row, "true", &v, why, sizeof why), 0);
    assert_true(v.b);
    assert_int_equal(bs_value_parse(&row, "false", &v, why, sizeof why), 0);
    assert_false(v.b);
    const char *bad[] = {"yes", "1", "TRUE", "", "true "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = '\0';
        assert_int_equal(bs_value_parse(&row, bad[i], &v, why, sizeof why),
                         -1);
        assert_string_equal(why, "is not true or false");
    }
    assert_string_equal(bs_ctype_name(BS_CT_BOOL), "bool");
}

static void test_range_edges(void **state)
{
    fixture *f = *state;
    static const struct {
        const char *key, *value;
        int ok;
    } cases[] = {
        {"dedup.fpr", "0", 0},          {"dedup.fpr", "-0", 0},
        {"dedup.fpr", "1e-300", 1},     {"dedup.fpr", "0.1", 1},
        {"dedup.fpr", "0.1000001", 0},  {"dedup.fpr", ".05", 1},
        {"dedup.growth", "1.1", 1},     {"dedup.growth", "1.0999", 0},
        {"dedup.growth", "16", 1},      {"dedup.growth", "16.0001", 0},
        {"dedup.tightening", "0", 0},   {"dedup.tightening", "1", 0},
        {"dedup.tightening", "1e-9", 1}, {"dedup.tightening", "0.999999", 1},
        {"dedup.capacity", "0", 0},     {"dedup.capacity", "1", 1},
        {"dedup.capacity", "1000000000000", 1},
        {"dedup.capacity", "1000000000001", 0},
        {"dedup.capacity", "+5", 1},
        {"checkpoint.interval.ms", "9", 0},
        {"checkpoint.interval.ms", "10", 1},
        {"checkpoint.interval.ms", "86400000", 1},
        {"checkpoint.interval.ms", "86400001", 0},
        {"checkpoint.records", "0", 1}, {"checkpoint.records", "-1", 0},
        {"checkpoint.records", "1000000000000", 1},
        {"checkpoint.records", "1000000000001", 0},
        {"dedup.max.bytes", "0", 1},    {"dedup.max.bytes", "-1", 0},
        {"dedup.max.bytes", "1T", 1},   {"dedup.max.bytes", "1099511627776", 1},
        {"dedup.max.bytes", "1099511627777", 0},
        {"blocklist.x.fpr", "0.1", 1},  {"blocklist.x.fpr", "0", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = bs_config_set(f->cfg, cases[i].key, cases[i].value, "test",
                               f->err, sizeof f->err);
        if (rc != (cases[i].ok ? 0 : -1))
            fail_msg("%s=%s: rc %d (%s)", cases[i].key, cases[i].value, rc,
                     f->err);
    }
    /* Parsed values, sizes with suffixes. */
    static const struct {
        const char *text;
        int64_t bytes;
    } sizes[] = {
        {"1k", 1024},           {"1K", 1024},
        {"3M", 3 << 20},        {"2g", INT64_C(2) << 30},
        {"1T", INT64_C(1) << 40}, {"512", 512},
        {"512M", 536870912},    {"0", 0},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        assert_int_equal(bs_config_set(f->cfg, "dedup.max.bytes",
                                       sizes[i].text, "test", f->err,
                                       sizeof f->err),
                         0);
        assert_int_equal(bs_config_get_int(f->cfg, "dedup.max.bytes"),
                         sizes[i].bytes);
    }
    assert_int_equal(bs_config_set(f->cfg, "dedup.capacity", "+5", "test",
                                   f->err, sizeof f->err),
                     0);
    assert_int_equal(bs_config_get_int(f->cfg, "dedup.capacity"), 5);
}

static void test_unknown_keys(void **state)
{
    fixture *f = *state;
    static const struct {
        const char *line, *msg;
    } cases[] = {
        {"dedup.fpp=1", "unknown key 'dedup.fpp' (did you mean 'dedup.fpr'?)"},
        {"dedpu.fpr=1", "unknown key 'dedpu.fpr' (did you mean 'dedup.fpr'?)"},
        {"dedup.capacty=1",
         "unknown key 'dedup.capacty' (did you mean 'dedup.capacity'?)"},
        {"Dedup.Fpr=1",
         "unknown key 'Dedup.Fpr' (did you mean 'dedup.fpr'?)"},
        {"blocklist.spam.pth=x",
         "unknown key 'blocklist.spam.pth' (did you mean "
         "'blocklist.spam.path'?)"},
        {"blocklst.spam.path=x",
         "unknown key 'blocklst.spam.path' (did you mean "
         "'blocklist.spam.path'?)"},
        {"blocklist.spam.fp=x",
         "unknown key 'blocklist.spam.fp' (did you mean "
         "'blocklist.spam.fpr'?)"},
        {"kafak.bootstrap.servers=x",
         "unknown key 'kafak.bootstrap.servers' (did you mean "
         "'kafka.bootstrap.servers'?)"},
        {"procesing.guarantee=x",
         "unknown key 'procesing.guarantee' (did you mean "
         "'processing.guarantee'?)"},
        {"dedup.xyzzy=1",
         "unknown key 'dedup.xyzzy' (`bloomstage config --list` shows every "
         "key)"},
        {"group.id=x",
         "unknown key 'group.id' (`bloomstage config --list` shows every "
         "key)"},
        /* Keys with the shape of a pattern but a bad NAME or suffix. */
        {"blocklist.a.b.path=x",
         "key 'blocklist.a.b.path': NAME 'a.b' has '.': a NAME is letters, "
         "digits, '_' and '-'"},
        {"blocklist..path=x",
         "key 'blocklist..path': empty NAME in 'blocklist.NAME.path'"},
        {"blocklist.sp am.key=x",
         "key 'blocklist.sp am.key': NAME 'sp am' has ' ': a NAME is "
         "letters, digits, '_' and '-'"},
        {"kafka.=x", "key 'kafka.': nothing after 'kafka.'"},
        {"producer.=x", "key 'producer.': nothing after 'producer.'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[256], want[1024];
        snprintf(text, sizeof text, "input.topics=a\n%s\n", cases[i].line);
        assert_int_equal(load_text(f, text), -1);
        snprintf(want, sizeof want, "%s:2: %s", f->path, cases[i].msg);
        assert_string_equal(f->err, want);
    }
}

static void test_distance_and_suggest(void **state)
{
    (void)state;
    assert_int_equal(bs_config_distance("", ""), 0);
    assert_int_equal(bs_config_distance("", "abc"), 3);
    assert_int_equal(bs_config_distance("abc", ""), 3);
    assert_int_equal(bs_config_distance("abc", "acb"), 1); /* transposition */
    assert_int_equal(bs_config_distance("kitten", "sitting"), 3);
    assert_int_equal(bs_config_distance("ca", "abc"), 3); /* OSA, not full DL */
    assert_int_equal(bs_config_distance("dedup.fpr", "dedup.fpr"), 0);

    char buf[BS_CONFIG_MAX_KEY + 1];
    assert_true(bs_config_suggest("log.levle", buf, sizeof buf));
    assert_string_equal(buf, "log.level");
    assert_true(bs_config_suggest("blocklist.bad-ips.pat", buf, sizeof buf));
    assert_string_equal(buf, "blocklist.bad-ips.path");
    assert_false(bs_config_suggest("zzz", buf, sizeof buf));
    assert_false(bs_config_suggest("dedup.fpr.x.y.z", buf, sizeof buf));
    /* Three edits away is too far. */
    assert_false(bs_config_suggest("dedup.abc", buf, sizeof buf));
}

static void test_env_names(void **state)
{
    (void)state;
    static const struct {
        const char *name, *key;
    } cases[] = {
        {"DEDUP_FPR", "dedup.fpr"},
        {"KAFKA_BOOTSTRAP_SERVERS", "kafka.bootstrap.servers"},
        {"KAFKA_CLIENT___RACK", "kafka.client-rack"},
        {"BLOCKLIST_BAD__IPS_PATH", "blocklist.bad_ips.path"},
        {"BLOCKLIST_BAD___IPS_PATH", "blocklist.bad-ips.path"},
        {"CONSUMER_GROUP_ID", "consumer.group.id"},
    };
    char buf[512];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(bs_config_env_decode(cases[i].name, buf, sizeof buf),
                         0);
        assert_string_equal(buf, cases[i].key);
        assert_int_equal(bs_config_env_encode(cases[i].key, buf, sizeof buf),
                         0);
        assert_string_equal(buf, cases[i].name);
    }
    /* Runs of underscores decode greedily from the left, like the image's
     * sed: 4 -> "-.", 5 -> "-_". */
    assert_int_equal(bs_config_env_decode("A____B", buf, sizeof buf), 0);
    assert_string_equal(buf, "a-.b");
    assert_int_equal(bs_config_env_decode("A_____B", buf, sizeof buf), 0);
    assert_string_equal(buf, "a-_b");
    assert_int_equal(bs_config_env_decode("", buf, sizeof buf), 0);
    assert_string_equal(buf, "");
    /* Every plain key round-trips. */
    for (size_t i = 0; i < bs_config_nrows; i++) {
        char key[512];
        if (bs_config_row_is_pattern(&bs_config_rows[i]))
            continue;
        assert_int_equal(bs_config_env_encode(bs_config_rows[i].name, buf,
                                              sizeof buf),
                         0);
        assert_int_equal(bs_config_env_decode(buf, key, sizeof key), 0);
        assert_string_equal(key, bs_config_rows[i].name);
    }
    /* Too small a buffer is an error, not a truncation. */
    assert_int_equal(bs_config_env_decode("DEDUP_FPR", buf, 9), -1);
    assert_int_equal(bs_config_env_decode("DEDUP_FPR", buf, 10), 0);
    assert_int_equal(bs_config_env_encode("dedup.fpr", buf, 9), -1);
}

static void test_env_load(void **state)
{
    fixture *f = *state;
    char *env[] = {
        "PATH=/usr/bin",
        "BLOOMSTAGEX=1",             /* not the prefix */
        "bloomstage_dedup_fpr=0.5",  /* the prefix is upper case */
        "BLOOMSTAGE_DEDUP_FPR=0.01",
        "BLOOMSTAGE_DEDUP_ON_MISSING_KEY= reject ",
        "BLOOMSTAGE_BLOCKLIST_BAD___IPS_PATH=/x/ips.bf",
        "BLOOMSTAGE_KAFKA_BOOTSTRAP_SERVERS=h1:9092,h2:9092",
        "BLOOMSTAGE_KAFKA_SASL_JAAS_CONFIG=a=b",
        "NOT_AN_ASSIGNMENT",
        NULL,
    };
    assert_int_equal(bs_config_load_env(f->cfg, env, f->err, sizeof f->err),
                     0);
    assert_true(bs_config_get_double(f->cfg, "dedup.fpr") == 0.01);
    assert_string_equal(bs_config_origin(f->cfg, "dedup.fpr"),
                        "env BLOOMSTAGE_DEDUP_FPR");
    assert_int_equal(bs_config_get_enum(f->cfg, "dedup.on.missing.key"),
                     BS_CONFIG_MISSING_REJECT);
    assert_string_equal(bs_config_get_str(f->cfg, "blocklist.bad-ips.path"),
                        "/x/ips.bf");
    assert_string_equal(bs_config_get_str(f->cfg, "kafka.bootstrap.servers"),
                        "h1:9092,h2:9092");
    assert_string_equal(bs_config_get_str(f->cfg, "kafka.sasl.jaas.config"),
                        "a=b");
    assert_int_equal(bs_config_load_env(f->cfg, NULL, f->err, sizeof f->err),
                     0);

    char *typo[] = {"BLOOMSTAGE_DEDUP_FRP=1", NULL};
    assert_int_equal(bs_config_load_env(f->cfg, typo, f->err, sizeof f->err),
                     -1);
    assert_string_equal(f->err,
                        "env BLOOMSTAGE_DEDUP_FRP: unknown key 'dedup.frp' "
                        "(did you mean 'dedup.fpr', set as "
                        "BLOOMSTAGE_DEDUP_FPR?)");

    char *unknown[] = {"BLOOMSTAGE_HOME=/opt/x", NULL};
    assert_int_equal(
        bs_config_load_env(f->cfg, unknown, f->err, sizeof f->err), -1);
    assert_string_equal(f->err, "env BLOOMSTAGE_HOME: unknown key 'home' "
                                "(`bloomstage config --list` shows every "
                                "key)");

    char *bad[] = {"BLOOMSTAGE_DEDUP_FPR=2", NULL};
    assert_int_equal(bs_config_load_env(f->cfg, bad, f->err, sizeof f->err),
                     -1);
    assert_string_equal(f->err, "env BLOOMSTAGE_DEDUP_FPR: key 'dedup.fpr': "
                                "value '2' out of range (0, 0.1]");

    char *empty[] = {"BLOOMSTAGE_=x", NULL};
    assert_int_equal(bs_config_load_env(f->cfg, empty, f->err, sizeof f->err),
                     -1);
    assert_string_equal(f->err, "env BLOOMSTAGE_: empty key");
}

/* defaults < file < env < -X, whatever order the loaders run in. */
static void test_precedence(void **state)
{
    fixture *f = *state;
    write_conf(f, "dedup.fpr=0.01\n"
                  "dedup.capacity=10\n"
                  "dedup.growth=3\n"
                  "dedup.tightening=0.5\n");
    char *env[] = {"BLOOMSTAGE_DEDUP_CAPACITY=20",
                   "BLOOMSTAGE_DEDUP_GROWTH=4", NULL};
    for (int order = 0; order < 2; order++) {
        bs_config *cfg = bs_config_new();
        assert_non_null(cfg);
        char *err = f->err;
        size_t n = sizeof f->err;
        if (order == 0) {
            assert_int_equal(bs_config_load_file(cfg, f->path, err, n), 0);
            assert_int_equal(bs_config_load_env(cfg, env, err, n), 0);
            assert_int_equal(bs_config_set_arg(cfg, "dedup.growth=5", err, n),
                             0);
        } else {
            assert_int_equal(bs_config_set_arg(cfg, "dedup.growth=5", err, n),
                             0);
            assert_int_equal(bs_config_load_env(cfg, env, err, n), 0);
            assert_int_equal(bs_config_load_file(cfg, f->path, err, n), 0);
        }
        char want[600];
        assert_true(bs_config_get_double(cfg, "dedup.fpr") == 0.01);
        snprintf(want, sizeof want, "%s:1", f->path);
        assert_string_equal(bs_config_origin(cfg, "dedup.fpr"), want);
        assert_int_equal(bs_config_get_int(cfg, "dedup.capacity"), 20);
        assert_string_equal(bs_config_origin(cfg, "dedup.capacity"),
                            "env BLOOMSTAGE_DEDUP_CAPACITY");
        assert_true(bs_config_get_double(cfg, "dedup.growth") == 5.0);
        assert_string_equal(bs_config_origin(cfg, "dedup.growth"),
                            "-X dedup.growth=5");
        assert_true(bs_config_get_double(cfg, "dedup.tightening") == 0.5);
        assert_int_equal(bs_config_get_int(cfg, "checkpoint.interval.ms"),
                         1000);
        assert_string_equal(bs_config_origin(cfg, "checkpoint.interval.ms"),
                            "default");
        bs_config_destroy(cfg);
    }

    /* A bad value is an error even in a layer that would be overridden: the
     * file is broken either way. */
    bs_config_destroy(f->cfg);
    f->cfg = bs_config_new();
    assert_int_equal(bs_config_set_arg(f->cfg, "dedup.fpr=0.05", f->err,
                                       sizeof f->err),
                     0);
    assert_int_equal(load_text(f, "dedup.fpr=7\n"), -1);
    assert_err_at(f, ":1: key 'dedup.fpr': value '7' out of range (0, 0.1]");
}

static void test_set_arg(void **state)
{
    fixture *f = *state;
    bs_config *cfg = f->cfg;
    char *err = f->err;
    size_t n = sizeof f->err;
    assert_int_equal(bs_config_set_arg(cfg, "dedup.fpr=2", err, n), -1);
    assert_string_equal(err, "-X dedup.fpr=2: key 'dedup.fpr': value '2' out "
                             "of range (0, 0.1]");
    assert_int_equal(bs_config_set_arg(cfg, "dedup.fpr", err, n), -1);
    assert_string_equal(err, "-X dedup.fpr: expected key=value");
    /* The origin repeats the value of bloomstage's own keys only: not of
     * an unknown key (a misspelt secret), nor of an empty one. */
    assert_int_equal(bs_config_set_arg(cfg, "=1", err, n), -1);
    assert_string_equal(err, "-X =...: empty key");
    assert_int_equal(bs_config_set_arg(cfg, "dedup.frp=1", err, n), -1);
    assert_string_equal(err, "-X dedup.frp: unknown key 'dedup.frp' (did "
                             "you mean 'dedup.fpr'?)");
    /* Blanks around key and value are ignored, '=' in the value kept. */
    assert_int_equal(
        bs_config_set_arg(cfg, " kafka.sasl.jaas.config = x=y z ", err, n), 0);
    assert_string_equal(bs_config_get_str(cfg, "kafka.sasl.jaas.config"),
                        "x=y z");
    assert_string_equal(bs_config_origin(cfg, "kafka.sasl.jaas.config"),
                        "-X kafka.sasl.jaas.config");
    assert_int_equal(bs_config_set_arg(cfg, "output.topic=secret-events",
                                       err, n),
                     0);
    assert_string_equal(bs_config_origin(cfg, "output.topic"),
                        "-X output.topic=secret-events");
    assert_int_equal(bs_config_set_arg(cfg, "kafka.client.id=bs", err, n), 0);
    assert_string_equal(bs_config_origin(cfg, "kafka.client.id"),
                        "-X kafka.client.id");
    /* bs_config_set names its own origin. */
    assert_int_equal(bs_config_set(cfg, "log.level", "verbose",
                                   "settings.json", err, n),
                     -1);
    assert_string_equal(err, "settings.json: key 'log.level': value "
                             "'verbose' is not one of: error, warn, info, "
                             "debug");
    assert_int_equal(bs_config_set(cfg, "log.level", "debug", NULL, err, n),
                     0);
    assert_string_equal(bs_config_origin(cfg, "log.level"),
                        "-X log.level=debug");
    /* Setting again replaces (and frees) the previous value. */
    for (int i = 0; i < 100; i++)
        assert_int_equal(bs_config_set(cfg, "dedup.key", "json:/a/b~1c", NULL,
                                       err, n),
                         0);
    const bs_config_keyspec *ks = bs_config_get_keyspec(cfg, "dedup.key");
    assert_int_equal(ks->parts[0].ntokens, 2);
    assert_string_equal(ks->parts[0].tokens[1], "b/c");
}

struct collected {
    char text[1024];
    int stop_after; /* stop (return 7) after this many; 0 = never */
    int calls;
};

static int collect(const char *key, const char *value, void *opaque)
{
    struct collected *c = opaque;
    size_t o = strlen(c->text);
    snprintf(c->text + o, sizeof c->text - o, "%s=%s;", key, value);
    c->calls++;
    return c->stop_after && c->calls >= c->stop_after ? 7 : 0;
}

static void test_passthrough(void **state)
{
    fixture *f = *state;
    assert_int_equal(load_text(f, "kafka.bootstrap.servers=b:9092\n"
                                  "consumer.session.timeout.ms=45000\n"
                                  "producer.linger.ms=5\n"
                                  "kafka.client.id=bs\n"
                                  "consumer.auto.offset.reset=earliest\n"
                                  "dedup.fpr=0.001\n"),
                     0);
    struct collected c = {{0}, 0, 0};
    assert_int_equal(bs_config_foreach(f->cfg, "kafka.", collect, &c), 0);
    assert_string_equal(c.text, "bootstrap.servers=b:9092;client.id=bs;");
    memset(&c, 0, sizeof c);
    assert_int_equal(bs_config_foreach(f->cfg, "consumer.", collect, &c), 0);
    /* consumer.group.id has a default, so it is always passed. */
    assert_string_equal(c.text, "group.id=bloomstage;session.timeout.ms=45000;"
                                "auto.offset.reset=earliest;");
    memset(&c, 0, sizeof c);
    assert_int_equal(bs_config_foreach(f->cfg, "producer.", collect, &c), 0);
    assert_string_equal(c.text, "linger.ms=5;");
    /* The callback can stop the walk. */
    memset(&c, 0, sizeof c);
    c.stop_after = 1;
    assert_int_equal(bs_config_foreach(f->cfg, "kafka.", collect, &c), 7);
    assert_int_equal(c.calls, 1);

    /* Overriding the group id passes the new one. */
    assert_int_equal(bs_config_set_arg(f->cfg, "consumer.group.id=g2", f->err,
                                       sizeof f->err),
                     0);
    memset(&c, 0, sizeof c);
    assert_int_equal(bs_config_foreach(f->cfg, "consumer.group.", collect, &c),
                     0);
    assert_string_equal(c.text, "id=g2;");
}

static void test_blocklists(void **state)
{
    fixture *f = *state;
    assert_int_equal(load_text(f, "input.topics=in\n"
                                  "output.topic=out\n"
                                  "dedup.key=json:/user/id\n"
                                  "blocklist.spam.path=/b/spam.bf\n"
                                  "blocklist.spam.key=header:from\n"
                                  "blocklist.ips.fpr=0.001\n"
                                  "blocklist.ips.path=/b/ips.bf\n"
                                  "blocklist.bad-list_2.path=/b/bad.bf\n"),
                     0);
    const bs_config_blocklist *bl;
    assert_int_equal(bs_config_blocklists(f->cfg, &bl), 0); /* not validated */
    assert_int_equal(bs_config_validate(f->cfg, f->err, sizeof f->err), 0);
    assert_int_equal(bs_config_blocklists(f->cfg, &bl), 3);

    assert_string_equal(bl[0].name, "spam");
    assert_string_equal(bl[0].path, "/b/spam.bf");
    assert_int_equal(bl[0].key->parts[0].kind, BS_CONFIG_KEYSPEC_HEADER);
    assert_string_equal(bl[0].key->parts[0].arg, "from");
    assert_true(bl[0].fpr == 1e-6);

    assert_string_equal(bl[1].name, "ips");
    assert_string_equal(bl[1].path, "/b/ips.bf");
    assert_true(bl[1].fpr == 0.001);
    /* Inherits dedup.key. */
    assert_int_equal(bl[1].key->parts[0].kind, BS_CONFIG_KEYSPEC_JSON);
    assert_string_equal(bl[1].key->parts[0].arg, "/user/id");
    assert_int_equal(bl[1].key->parts[0].ntokens, 2);

    assert_string_equal(bl[2].name, "bad-list_2");
    assert_int_equal(bl[2].key->parts[0].kind, BS_CONFIG_KEYSPEC_JSON);
    char origin[600];
    snprintf(origin, sizeof origin, "%s:6", f->path);
    assert_string_equal(bs_config_origin(f->cfg, "blocklist.ips.fpr"),
                        origin);
    assert_string_equal(bs_config_origin(f->cfg, "blocklist.spam.fpr"),
                        "default");
    assert_string_equal(bs_config_get_str(f->cfg, "blocklist.ips.key"),
                        "json:/user/id");

    /* A later dedup.key changes what unset blocklist keys inherit; any
     * change drops the array until the next validate. */
    assert_int_equal(
        bs_config_set_arg(f->cfg, "dedup.key=value", f->err, sizeof f->err),
        0);
    assert_int_equal(bs_config_blocklists(f->cfg, &bl), 0);
    assert_int_equal(bs_config_validate(f->cfg, f->err, sizeof f->err), 0);
    assert_int_equal(bs_config_blocklists(f->cfg, &bl), 3);
    assert_int_equal(bl[1].key->parts[0].kind, BS_CONFIG_KEYSPEC_VALUE);
    assert_int_equal(bl[0].key->parts[0].kind, BS_CONFIG_KEYSPEC_HEADER);

    /* Unset pattern keys read as their defaults. */
    assert_true(bs_config_get_double(f->cfg, "blocklist.none.fpr") == 1e-6);
    assert_int_equal(bs_config_get_keyspec(f->cfg, "blocklist.none.key")->parts[0].kind,
                     BS_CONFIG_KEYSPEC_VALUE);
    assert_null(bs_config_get_str(f->cfg, "blocklist.none.path"));
    assert_string_equal(bs_config_origin(f->cfg, "blocklist.none.fpr"),
                        "default");

    /* A blocklist without a path, named where it first appeared. */
    assert_int_equal(load_text(f, "input.topics=in\n"
                                  "output.topic=out\n"
                                  "blocklist.a.path=/a\n"
                                  "blocklist.x.fpr=0.01\n"
                                  "blocklist.x.key=value\n"),
                     0);
    assert_int_equal(bs_config_validate(f->cfg, f->err, sizeof f->err), -1);
    assert_err_at(f, ":4: key 'blocklist.x.fpr' is set, so "
                     "'blocklist.x.path' or 'blocklist.x.topic' is required "
                     "but neither is set");
    assert_int_equal(bs_config_blocklists(f->cfg, &bl), 0);
    /* ... and the environment can supply it. */
    char *env[] = {"BLOOMSTAGE_BLOCKLIST_X_PATH=/x", NULL};
    assert_int_equal(bs_config_load_env(f->cfg, env, f->err, sizeof f->err),
                     0);
    assert_int_equal(bs_config_validate(f->cfg, f->err, sizeof f->err), 0);
    assert_int_equal(bs_config_blocklists(f->cfg, &bl), 2);
    assert_string_equal(bl[1].path, "/x");

    assert_int_equal(load_text(f, "input.topics=in\n"
                                  "output.topic=out\n"
                                  "blocklist.e.path=\n"),
                     0);
    assert_int_equal(bs_config_validate(f->cfg, f->err, sizeof f->err), -1);
    assert_err_at(f, ":3: key 'blocklist.e.path' is set, so "
                     "'blocklist.e.path' is required but empty");

    /* A live list: a topic alone will do; capacity has a default. */
    assert_int_equal(load_text(f, "input.topics=in\n"
                                  "output.topic=out\n"
                                  "blocklist.live.topic=spam-list\n"
                                  "blocklist.both.capacity=5000\n"
                                  "blocklist.both.path=/b/base.txt\n"
                                  "blocklist.both.topic=both-list\n"),
                     0);
    assert_int_equal(bs_config_validate(f->cfg, f->err, sizeof f->err), 0);
    assert_int_equal(bs_config_blocklists(f->cfg, &bl), 2);
    assert_string_equal(bl[0].topic, "spam-list");
    assert_null(bl[0].path);
    assert_int_equal(bl[0].capacity, 100000);
    assert_string_equal(bl[1].topic, "both-list");
    assert_string_equal(bl[1].path, "/b/base.txt");
    assert_int_equal(bl[1].capacity, 5000);
    assert_int_equal(load_text(f, "input.topics=in\n"
                                  "output.topic=out\n"
                                  "blocklist.t.topic=\n"),
                     0);
    assert_int_equal(bs_config_validate(f->cfg, f->err, sizeof f->err), -1);
    assert_err_at(f, ":3: key 'blocklist.t.topic' is set, so "
                     "'blocklist.t.topic' is required but empty");
}

/* A composite key spec: a comma starts a part only where a part's name
 * follows it, so header names and pointers keep theirs. */
static void test_keyspec_parts(void **state)
{
    fixture *f = *state;
    static const struct {
        const char *text;
        size_t nparts;
        const char *args[3];
        bool on_key[3];
    } cases[] = {
        {"json:/user,json:/event", 2, {"/user", "/event"}, {false, false}},
        {"header:a,b", 1, {"a,b"}, {false}},
        {"json:/a,b,key", 2, {"/a,b", ""}, {false, false}},
        {"key.json:/id,header:x,value", 3, {"/id", "x", ""},
         {true, false, false}},
        {"key,value", 2, {"", ""}, {false, false}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(bs_config_set(f->cfg, "dedup.key", cases[i].text,
                                       "test", f->err, sizeof f->err),
                         0);
        const bs_config_keyspec *ks = bs_config_get_keyspec(f->cfg,
                                                            "dedup.key");
        assert_int_equal(ks->nparts, cases[i].nparts);
        for (size_t p = 0; p < cases[i].nparts; p++) {
            assert_string_equal(ks->parts[p].arg, cases[i].args[p]);
            assert_int_equal(ks->parts[p].on_key, cases[i].on_key[p]);
        }
    }
    const bs_config_keyspec *ks = bs_config_get_keyspec(f->cfg, "dedup.key");
    assert_int_equal(ks->parts[0].kind, BS_CONFIG_KEYSPEC_KEY);
    assert_int_equal(ks->parts[1].kind, BS_CONFIG_KEYSPEC_VALUE);
    assert_int_equal(bs_config_set(f->cfg, "dedup.key", "key.json:/a~1b/c",
                                   "test", f->err, sizeof f->err),
                     0);
    ks = bs_config_get_keyspec(f->cfg, "dedup.key");
    assert_int_equal(ks->parts[0].kind, BS_CONFIG_KEYSPEC_JSON);
    assert_int_equal(ks->parts[0].ntokens, 2);
    assert_string_equal(ks->parts[0].tokens[0], "a/b");
    assert_string_equal(ks->parts[0].tokens[1], "c");
}

static void test_keyspec(void **state)
{
    fixture *f = *state;
    static const struct {
        const char *text;
        bs_config_keyspec_kind kind;
        const char *arg;
        size_t ntokens;
        const char *tokens[3];
    } cases[] = {
        {"key", BS_CONFIG_KEYSPEC_KEY, "", 0, {NULL}},
        {"value", BS_CONFIG_KEYSPEC_VALUE, "", 0, {NULL}},
        {"header:X-Request-Id", BS_CONFIG_KEYSPEC_HEADER, "X-Request-Id", 0,
         {NULL}},
        {"header:a:b", BS_CONFIG_KEYSPEC_HEADER, "a:b", 0, {NULL}},
        {"json:", BS_CONFIG_KEYSPEC_JSON, "", 0, {NULL}},
        {"json:/", BS_CONFIG_KEYSPEC_JSON, "/", 1, {""}},
        {"json:/user/id", BS_CONFIG_KEYSPEC_JSON, "/user/id", 2,
         {"user", "id"}},
        {"json:/a~1b/~0c~01/0", BS_CONFIG_KEYSPEC_JSON, "/a~1b/~0c~01/0", 3,
         {"a/b", "~c~1", "0"}},
        {"json://", BS_CONFIG_KEYSPEC_JSON, "//", 2, {"", ""}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(bs_config_set(f->cfg, "dedup.key", cases[i].text,
                                       "test", f->err, sizeof f->err),
                         0);
        const bs_config_keyspec *ks = bs_config_get_keyspec(f->cfg,
                                                            "dedup.key");
        assert_int_equal(ks->parts[0].kind, cases[i].kind);
        assert_string_equal(ks->parts[0].arg, cases[i].arg);
        assert_int_equal(ks->parts[0].ntokens, cases[i].ntokens);
        for (size_t t = 0; t < cases[i].ntokens; t++)
            assert_string_equal(ks->parts[0].tokens[t], cases[i].tokens[t]);
    }
}

static void test_required_and_topics(void **state)
{
    fixture *f = *state;
    assert_int_equal(load_text(f, "output.topic=out\n"), 0);
    assert_int_equal(bs_config_validate(f->cfg, f->err, sizeof f->err), -1);
    assert_string_equal(f->err,
                        "required key 'input.topics' is not set (set it in "
                        "the config file, as BLOOMSTAGE_INPUT_TOPICS or with "
                        "-X input.topics=...)");

    assert_int_equal(load_text(f, "input.topics=in\n"), 0);
    assert_int_equal(bs_config_validate(f->cfg, f->err, sizeof f->err), -1);
    assert_string_equal(f->err,
                        "required key 'output.topic' is not set (set it in "
                        "the config file, as BLOOMSTAGE_OUTPUT_TOPIC or with "
                        "-X output.topic=...)");

    assert_int_equal(load_text(f, "input.topics=in\noutput.topic=\n"), 0);
    assert_int_equal(bs_config_validate(f->cfg, f->err, sizeof f->err), -1);
    assert_err_at(f, ":2: key 'output.topic': must not be empty");

    assert_int_equal(load_text(f, "input.topics=a,b,c\noutput.topic=b\n"), 0);
    assert_int_equal(bs_config_validate(f->cfg, f->err, sizeof f->err), -1);
    char want[2048];
    snprintf(want, sizeof want,
             "%s:2: key 'output.topic': topic 'b' is also in input.topics "
             "(%s:1): the stage would consume its own output",
             f->path, f->path);
    assert_string_equal(f->err, want);

    assert_int_equal(
        load_text(f, "input.topics=a\noutput.topic=o\nrejected.topic=a\n"), 0);
    assert_int_equal(bs_config_validate(f->cfg, f->err, sizeof f->err), -1);
    assert_non_null(strstr(f->err, ":3: key 'rejected.topic': topic 'a' is "
                                   "also in input.topics"));

    assert_int_equal(
        load_text(f, "input.topics=a\noutput.topic=o\nrejected.topic=o\n"), 0);
    assert_int_equal(bs_config_validate(f->cfg, f->err, sizeof f->err), -1);
    snprintf(want, sizeof want,
             "%s:3: key 'rejected.topic': same topic as output.topic (%s:2): "
             "dropped records would be forwarded",
             f->path, f->path);
    assert_string_equal(f->err, want);

    /* A key read with a schema needs a registry to fetch it from. */
    assert_int_equal(load_text(f, "input.topics=a\noutput.topic=o\n"
                                  "blocklist.spam.path=/x\n"
                                  "blocklist.spam.key=json:/u,key.avro:/id\n"),
                     0);
    assert_int_equal(bs_config_validate(f->cfg, f->err, sizeof f->err), -1);
    snprintf(want, sizeof want,
             "%s:4: key 'blocklist.spam.key': 'json:/u,key.avro:/id' reads "
             "records with their schema from a Schema Registry: set "
             "schema.registry.url", f->path);
    assert_string_equal(f->err, want);
    assert_int_equal(load_text(f, "input.topics=a\noutput.topic=o\n"
                                  "dedup.key=protobuf:/user/id\n"
                                  "schema.registry.url=http://r:8081\n"),
                     0);
    assert_int_equal(bs_config_validate(f->cfg, f->err, sizeof f->err), 0);

    assert_int_equal(load_text(f, "input.topics= a ,b.c,  d-e_f \n"
                                  "output.topic=o\nrejected.topic=r\n"),
                     0);
    assert_int_equal(bs_config_validate(f->cfg, f->err, sizeof f->err), 0);
    const char *const *t;
    assert_int_equal(bs_config_get_topics(f->cfg, "input.topics", &t), 3);
    assert_string_equal(t[0], "a");
    assert_string_equal(t[1], "b.c");
    assert_string_equal(t[2], "d-e_f");
}

static void test_line_too_long(void **state)
{
    fixture *f = *state;
    /* Exactly BS_CONFIG_MAX_LINE bytes (plus "\n") is fine. */
    size_t len = BS_CONFIG_MAX_LINE;
    char *text = malloc(len + 64);
    assert_non_null(text);
    int o = sprintf(text, "# first\nkafka.x=");
    memset(text + o, 'v', len - strlen("kafka.x="));
    strcpy(text + o + len - strlen("kafka.x="), "\n");
    assert_int_equal(load_text(f, text), 0);
    assert_int_equal(strlen(bs_config_get_str(f->cfg, "kafka.x")),
                     len - strlen("kafka.x="));

    /* One byte more is not. */
    o = sprintf(text, "# first\nkafka.x=");
    memset(text + o, 'v', len - strlen("kafka.x=") + 1);
    strcpy(text + o + len - strlen("kafka.x=") + 1, "\n");
    assert_int_equal(load_text(f, text), -1);
    assert_err_at(f, ":2: line longer than 65536 bytes");

    /* The same bound on values from other layers. */
    memset(text, 'v', len + 1);
    text[len + 1] = '\0';
    assert_int_equal(
        bs_config_set(f->cfg, "kafka.y", text, "test", f->err, sizeof f->err),
        -1);
    assert_string_equal(f->err,
                        "test: key 'kafka.y': value longer than 65536 bytes");
    free(text);

    /* And on keys. */
    char key[BS_CONFIG_MAX_KEY + 2];
    memset(key, 'k', sizeof key - 1);
    key[sizeof key - 1] = '\0';
    memcpy(key, "kafka.", 6);
    assert_int_equal(
        bs_config_set(f->cfg, key, "v", "test", f->err, sizeof f->err), -1);
    assert_non_null(strstr(f->err, "...' longer than 255 bytes"));
    key[sizeof key - 2] = '\0'; /* 255: fine */
    assert_int_equal(
        bs_config_set(f->cfg, key, "v", "test", f->err, sizeof f->err), 0);
}

static void test_key_count_cap(void **state)
{
    fixture *f = *state;
    char key[64];
    int i, rc = 0;
    for (i = 0; i < BS_CONFIG_MAX_KEYS + 10 && rc == 0; i++) {
        snprintf(key, sizeof key, "kafka.k%d", i);
        rc = bs_config_set(f->cfg, key, "1", "test", f->err, sizeof f->err);
    }
    assert_int_equal(rc, -1);
    assert_true(i <= BS_CONFIG_MAX_KEYS);
    snprintf(key, sizeof key, "': more than %d keys", BS_CONFIG_MAX_KEYS);
    assert_non_null(strstr(f->err, key));
    /* Existing keys can still be changed. */
    assert_int_equal(bs_config_set(f->cfg, "kafka.k0", "2", "test", f->err,
                                   sizeof f->err),
                     0);
    assert_string_equal(bs_config_get_str(f->cfg, "kafka.k0"), "2");
}

static void test_missing_file(void **state)
{
    fixture *f = *state;
    char path[600], want[1024];
    snprintf(path, sizeof path, "%s/does-not-exist.conf", f->dir);
    assert_int_equal(bs_config_load_file(f->cfg, path, f->err, sizeof f->err),
                     -1);
    snprintf(want, sizeof want,
             "%s: cannot open config file: No such file or directory", path);
    assert_string_equal(f->err, want);

    assert_int_equal(
        bs_config_load_file(f->cfg, f->dir, f->err, sizeof f->err), -1);
    snprintf(want, sizeof want, "%s: cannot read config file: Is a directory",
             f->dir);
    assert_string_equal(f->err, want);

    if (geteuid() != 0) { /* root reads anything */
        write_conf(f, "dedup.fpr=0.1\n");
        assert_int_equal(chmod(f->path, 0), 0);
        assert_int_equal(
            bs_config_load_file(f->cfg, f->path, f->err, sizeof f->err), -1);
        snprintf(want, sizeof want,
                 "%s: cannot open config file: Permission denied", f->path);
        assert_string_equal(f->err, want);
    }

    /* errstr may be NULL. */
    assert_int_equal(bs_config_load_file(f->cfg, path, NULL, 0), -1);
    /* A tiny buffer is truncated, not overrun. */
    char small[8];
    assert_int_equal(bs_config_load_file(f->cfg, path, small, sizeof small),
                     -1);
    assert_int_equal(strlen(small), sizeof small - 1);
}

/* Reads a stream written by a print function into a string (caller frees). */
static char *print_to_string(int (*fn)(FILE *), const bs_config *cfg)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    assert_non_null(mem);
    int rc = cfg ? bs_config_print_effective(cfg, mem) : fn(mem);
    assert_int_equal(fclose(mem), 0);
    assert_int_equal(rc, 0);
    return buf;
}

static void test_documents(void **state)
{
    fixture *f = *state;
    char *list = print_to_string(bs_config_print_list, NULL);
    char *sample = print_to_string(bs_config_print_sample, NULL);
    for (size_t i = 0; i < bs_config_nrows; i++) {
        char name[BS_CONFIG_MAX_KEY + 1], line[600];
        const bs_config_row *row = &bs_config_rows[i];
        bs_config_display_name(row, name, sizeof name);
        snprintf(line, sizeof line, "\n%s ", name);
        if (!strstr(list, line))
            fail_msg("--list lacks %s", name);
        if (bs_config_row_is_pattern(row))
            snprintf(line, sizeof line, "\n#%s\n", row->example);
        else if (row->def)
            snprintf(line, sizeof line, "\n#%s=%s\n", row->name, row->def);
        else
            snprintf(line, sizeof line, "\n#%s\n", row->example);
        if (!strstr(sample, line))
            fail_msg("--sample lacks %s", line + 1);
    }
    assert_non_null(strstr(list, "\ndedup.fpr                  double      "
                                 "1e-6           (0, 0.1]\n"));
    assert_non_null(strstr(list, "    env: BLOOMSTAGE_DEDUP_ON_MISSING_KEY\n"));
    /* No line of either is longer than 80 columns or ends in a blank. */
    const char *docs[] = {list, sample};
    for (size_t d = 0; d < 2; d++) {
        for (const char *p = docs[d]; *p;) {
            size_t l = strcspn(p, "\n");
            if (l > 80 || (l > 0 && p[l - 1] == ' '))
                fail_msg("bad line: %.*s", (int)l, p);
            p += l + (p[l] == '\n');
        }
    }

    /* Uncommenting every `#key=value` line of the sample gives a
     * configuration that loads and validates: the examples are real. */
    size_t slen = strlen(sample);
    char *live = malloc(slen + 1);
    assert_non_null(live);
    size_t o = 0;
    for (const char *p = sample; *p;) {
        size_t l = strcspn(p, "\n");
        if (p[0] == '#' && p[1] >= 'a' && p[1] <= 'z') {
            memcpy(live + o, p + 1, l - 1);
            o += l - 1;
        } else {
            memcpy(live + o, p, l);
            o += l;
        }
        live[o++] = '\n';
        p += l + (p[l] == '\n');
    }
    live[o] = '\0';
    assert_int_equal(load_text(f, live), 0);
    assert_int_equal(bs_config_validate(f->cfg, f->err, sizeof f->err), 0);
    const bs_config_blocklist *bl;
    assert_int_equal(bs_config_blocklists(f->cfg, &bl), 1);
    assert_string_equal(bl[0].name, "spam");
    free(live);

#ifdef BS_SAMPLE_CONF
    /* The checked-in sample is this output, byte for byte. */
    FILE *fp = fopen(BS_SAMPLE_CONF, "rb");
    assert_non_null(fp);
    char *disk = calloc(1, slen + 2);
    assert_non_null(disk);
    size_t got = fread(disk, 1, slen + 1, fp);
    fclose(fp);
    if (got != slen || memcmp(disk, sample, slen) != 0)
        fail_msg("%s differs from `bloomstage config --sample`; regenerate "
                 "it",
                 BS_SAMPLE_CONF);
    free(disk);
#endif
    free(list);
    free(sample);
}

static void test_effective(void **state)
{
    fixture *f = *state;
    assert_int_equal(load_text(f, "input.topics=in\n"
                                  "output.topic=out\n"
                                  "kafka.sasl.password=hunter2\n"
                                  "kafka.ssl.key.pem=PRIVATE\n"
                                  "kafka.sasl.username=alice\n"
                                  "kafka.client.id=bs\n"
                                  "blocklist.x.path=/x\n"),
                     0);
    assert_int_equal(bs_config_validate(f->cfg, f->err, sizeof f->err), 0);
    char *eff = print_to_string(NULL, f->cfg);
    assert_null(strstr(eff, "hunter2"));
    assert_null(strstr(eff, "PRIVATE"));
    char origin[600], want[1024];
    snprintf(origin, sizeof origin, "%s:1", f->path);
    static const char *const lines[][3] = {
        {"kafka.sasl.password", "[redacted]", NULL},
        {"kafka.ssl.key.pem", "[redacted]", NULL},
        {"kafka.sasl.username", "[redacted]", NULL}, /* librdkafka's call */
        {"kafka.client.id", "bs", NULL},
        {"blocklist.x.key", "key", "default (dedup.key)"},
        {"blocklist.x.fpr", "1e-6", "default"},
        {"log.level", "info", "default"},
        {"input.topics", "in", ""},
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        /* "key = value  # origin", aligned in columns. */
        snprintf(want, sizeof want, "%-28s = %-24s  # %s\n", lines[i][0],
                 lines[i][1],
                 !lines[i][2] ? "" : lines[i][2][0] ? lines[i][2] : origin);
        if (!lines[i][2]) /* origin not checked */
            want[strlen(want) - 1] = '\0';
        if (!strstr(eff, want))
            fail_msg("no line '%s' in:\n%s", want, eff);
    }
    free(eff);

    /* Values are printed on one line, control characters escaped. */
    char *env[] = {"BLOOMSTAGE_KAFKA_SSL_CERTIFICATE_PEM=-----BEGIN\nabc\\\t"
                   "\x01\n-----END",
                   NULL};
    assert_int_equal(bs_config_load_env(f->cfg, env, f->err, sizeof f->err),
                     0);
    eff = print_to_string(NULL, f->cfg);
    assert_non_null(strstr(eff, "kafka.ssl.certificate.pem    = -----BEGIN\\n"
                                "abc\\\\\\t\\x01\\n-----END  # env "
                                "BLOOMSTAGE_KAFKA_SSL_CERTIFICATE_PEM\n"));
    free(eff);

    /* A write error is reported. */
    FILE *full = fopen("/dev/full", "w");
    if (full) {
        assert_int_equal(bs_config_print_sample(full), -1);
        fclose(full);
    }
}

/* ------------------------------------------------------------------------ */
/* Secrets                                                                   */

/* The secret every test below sets, and must never find in what the
 * module writes. */
#define SECRET "hunter2-s3cr3t"

/* Fails if text shows SECRET; `what` says which output it was. */
static void assert_hidden(const char *text, const char *what)
{
    if (text && strstr(text, SECRET))
        fail_msg("%s shows the secret: %s", what, text);
}

/* The effective configuration of f->cfg shows no secret, and shows `key`
 * as "[redacted]" with `origin` (NULL: not checked). */
static void assert_redacted(fixture *f, const char *key, const char *origin)
{
    char *eff = print_to_string(NULL, f->cfg);
    assert_hidden(eff, "the effective configuration");
    char want[1024];
    snprintf(want, sizeof want, "\n%-28s = %-24s  # %s\n", key, "[redacted]",
             origin ? origin : "");
    if (!origin)
        want[strlen(want) - 1] = '\0';
    if (!strstr(eff, want))
        fail_msg("no line '%s' in:\n%s", want + 1, eff);
    free(eff);
    assert_hidden(bs_config_origin(f->cfg, key), "the origin");
}

/* A fresh, empty configuration in f->cfg. */
static void fresh(fixture *f)
{
    bs_config_destroy(f->cfg);
    f->cfg = bs_config_new();
    assert_non_null(f->cfg);
    f->err[0] = '\0';
}

static void test_secret_keys(void **state)
{
    (void)state;
    /* librdkafka's sensitive properties (CONFIGURATION.md, rdkafka_conf.c
     * _RK_SENSITIVE), the Java clients' passwords, in any case and under
     * each prefix. */
    static const char *const secret[] = {
        "sasl.password", "sasl.username", "ssl.key.password",
        "ssl.keystore.password", "ssl.key.pem", "ssl.ca.pem", "ssl_key",
        "sasl.oauthbearer.config", "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.client.credentials.client.secret",
        "sasl.oauthbearer.assertion.private.key.passphrase",
        "sasl.oauthbearer.assertion.private.key.pem", "sasl.jaas.config",
        "ssl.truststore.password", "SASL.PASSWORD",
        "schema.registry.basic.auth.user.info", NULL};
    static const char *const plain[] = {
        "sasl.mechanism", "sasl.mechanisms", "security.protocol",
        "ssl.key.location", "ssl.certificate.location", "ssl.ca.location",
        "ssl.certificate.pem", "bootstrap.servers", "client.id",
        "sasl.oauthbearer.client.id", "sasl.oauthbearer.token.endpoint.url",
        "sasl.kerberos.principal", "group.id", NULL};
    static const char *const prefixes[] = {"kafka.", "consumer.",
                                           "producer.", ""};
    char key[256];
    for (size_t p = 0; p < 4; p++) {
        for (size_t i = 0; secret[i]; i++) {
            snprintf(key, sizeof key, "%s%s", prefixes[p], secret[i]);
            if (!bs_config_key_is_secret(key))
                fail_msg("'%s' is not taken for a secret", key);
        }
        for (size_t i = 0; plain[i]; i++) {
            snprintf(key, sizeof key, "%s%s", prefixes[p], plain[i]);
            if (bs_config_key_is_secret(key))
                fail_msg("'%s' is taken for a secret", key);
        }
    }
    /* No key of the table is secret but the Schema Registry's
     * USER:PASSWORD. */
    for (size_t i = 0; i < bs_config_nrows; i++)
        assert_int_equal(
            bs_config_key_is_secret(bs_config_rows[i].name),
            strcmp(bs_config_rows[i].name,
                   "schema.registry.basic.auth.user.info") == 0);

    /* Text shown in a message is cut after a secret's name, and long text
     * at BS_CONFIG_SHOW_MAX. */
    char buf[BS_CONFIG_SHOW_MAX + 1], big[200];
    const char *t = "kafka.sasl.password:" SECRET;
    bs_config_show(buf, sizeof buf, t, strlen(t), true);
    assert_string_equal(buf, "kafka.sasl.password...");
    bs_config_show(buf, sizeof buf, t, strlen(t), false);
    assert_string_equal(buf, t);
    bs_config_show(buf, sizeof buf, "dedup.fpr", 9, true);
    assert_string_equal(buf, "dedup.fpr");
    memset(big, 'a', sizeof big);
    bs_config_show(buf, sizeof buf, big, sizeof big, true);
    assert_int_equal(strlen(buf), BS_CONFIG_SHOW_MAX);
    assert_string_equal(buf + BS_CONFIG_SHOW_MAX - 3, "...");
}

/* Every way a secret value comes in, and every way config/ writes
 * something: the value never shows. */
static void test_secret_never_shown(void **state)
{
    fixture *f = *state;
    char *err = f->err;
    size_t n = sizeof f->err;
    char want[2048];

    /* -X: origin names the key only (the bug: "-X key=VALUE"). */
    assert_int_equal(bs_config_set_arg(f->cfg,
                                       "kafka.sasl.password=" SECRET, err, n),
                     0);
    assert_string_equal(bs_config_get_str(f->cfg, "kafka.sasl.password"),
                        SECRET);
    assert_redacted(f, "kafka.sasl.password", "-X kafka.sasl.password");
    /* bs_config_set without an origin says it as -X does. */
    assert_int_equal(bs_config_set(f->cfg, "consumer.ssl.key.password",
                                   SECRET, NULL, err, n),
                     0);
    assert_redacted(f, "consumer.ssl.key.password",
                    "-X consumer.ssl.key.password");
    /* A secret-named key of the table's own patterns: redacted too. */
    assert_int_equal(bs_config_set_arg(f->cfg,
                                       "blocklist.password.path=" SECRET, err,
                                       n),
                     0);
    assert_redacted(f, "blocklist.password.path",
                    "-X blocklist.password.path");

    /* The environment. */
    fresh(f);
    char *env[] = {"BLOOMSTAGE_KAFKA_SASL_OAUTHBEARER_CLIENT_SECRET=" SECRET,
                   NULL};
    assert_int_equal(bs_config_load_env(f->cfg, env, err, n), 0);
    assert_redacted(f, "kafka.sasl.oauthbearer.client.secret",
                    "env BLOOMSTAGE_KAFKA_SASL_OAUTHBEARER_CLIENT_SECRET");

    /* The file, set twice (the later line wins, no warning), and a line
     * missing its '=' after a secret's name. */
    assert_int_equal(load_text(f, "kafka.ssl.keystore.password=first\n"
                                  "kafka.ssl.keystore.password=" SECRET "\n"),
                     0);
    snprintf(want, sizeof want, "%s:2", f->path);
    assert_redacted(f, "kafka.ssl.keystore.password", want);
    assert_int_equal(load_text(f, "kafka.sasl.password " SECRET "\n"), -1);
    assert_err_at(f, ":1: expected key=value, got 'kafka.sasl.password...'");

    /* -X errors: no '=', an unknown key (did you mean), a misspelt
     * secret of the table, a bad value for a secret-named key. */
    fresh(f);
    static const struct {
        const char *arg, *msg;
    } bad[] = {
        {"kafka.sasl.password:" SECRET,
         "-X kafka.sasl.password...: expected key=value"},
        {"sasl.password=" SECRET,
         "-X sasl.password: unknown key 'sasl.password' (`bloomstage config "
         "--list` shows every key)"},
        {"dedup.frp=" SECRET,
         "-X dedup.frp: unknown key 'dedup.frp' (did you mean "
         "'dedup.fpr'?)"},
        {"blocklist.password.fpr=" SECRET,
         "-X blocklist.password.fpr: key 'blocklist.password.fpr': value "
         "'[redacted]' is not a number"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(bs_config_set_arg(f->cfg, bad[i].arg, err, n), -1);
        assert_string_equal(err, bad[i].msg);
    }
    /* The environment's did-you-mean names variables, not values. */
    char *typo[] = {"BLOOMSTAGE_DEDUP_FRP=" SECRET, NULL};
    assert_int_equal(bs_config_load_env(f->cfg, typo, err, n), -1);
    assert_hidden(err, "an unknown variable's message");

    /* Validation messages start with the origin of the value at fault,
     * which names a secret's key only; a value read from a file is not
     * shown, not even the path it holds. */
    fresh(f);
    assert_int_equal(bs_config_set_arg(f->cfg, "input.topics=in", err, n), 0);
    assert_int_equal(bs_config_set_arg(f->cfg, "output.topic=out", err, n),
                     0);
    assert_int_equal(bs_config_set_arg(f->cfg,
                                       "blocklist.password.fpr=0.01", err, n),
                     0);
    assert_int_equal(bs_config_validate(f->cfg, err, n), -1);
    assert_string_equal(err, "-X blocklist.password.fpr: key "
                             "'blocklist.password.fpr' is set, so "
                             "'blocklist.password.path' or "
                             "'blocklist.password.topic' is required but "
                             "neither is set");
    fresh(f);
    char arg[700];
    assert_int_equal(bs_config_set_arg(f->cfg, "input.topics=in", err, n), 0);
    assert_int_equal(bs_config_set_arg(f->cfg, "output.topic=out", err, n),
                     0);
    snprintf(arg, sizeof arg, "kafka.security.protocol=@file:%s",
             write_bytes(f, "protocol", "SASL_SSL\n", 9));
    assert_int_equal(bs_config_set_arg(f->cfg, arg, err, n), 0);
    assert_int_equal(bs_config_validate(f->cfg, err, n), -1);
    snprintf(want, sizeof want, "-X %s: key 'kafka.security.protocol': "
             "[redacted] needs a SASL mechanism: set kafka.sasl.mechanism to "
             "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or GSSAPI "
             "(librdkafka would otherwise assume GSSAPI, Kerberos)", arg);
    assert_string_equal(err, want);
    assert_int_equal(bs_config_set_arg(f->cfg, "kafka.sasl.mechanism=PLAIN",
                                       err, n),
                     0);
    snprintf(arg, sizeof arg, "kafka.ssl.key.location=@file:%s",
             write_bytes(f, "location", SECRET "\n", sizeof SECRET));
    assert_int_equal(bs_config_set_arg(f->cfg, arg, err, n), 0);
    assert_int_equal(bs_config_validate(f->cfg, err, n), -1);
    snprintf(want, sizeof want, "-X %s: key 'kafka.ssl.key.location': cannot "
             "read the file it names", arg);
    assert_string_equal(err, want);
}

/* BLOOMSTAGE_<KEY>_FILE and @file:PATH. */
static void test_secret_files(void **state)
{
    fixture *f = *state;
    char *err = f->err;
    size_t n = sizeof f->err;
    char pw[600], var[700], arg[700], want[2048], missing[600];
    snprintf(pw, sizeof pw, "%s", write_conf(f, SECRET "\n"));
    snprintf(missing, sizeof missing, "%s/no-such-secret", f->dir);

    /* _FILE: the content, one newline removed; the origin names the
     * path. */
    snprintf(var, sizeof var, "BLOOMSTAGE_KAFKA_SASL_PASSWORD_FILE=%s", pw);
    char *env[] = {var, NULL};
    assert_int_equal(bs_config_load_env(f->cfg, env, err, n), 0);
    assert_string_equal(bs_config_get_str(f->cfg, "kafka.sasl.password"),
                        SECRET);
    snprintf(want, sizeof want, "env %s", var);
    assert_string_equal(bs_config_origin(f->cfg, "kafka.sasl.password"),
                        want);
    assert_redacted(f, "kafka.sasl.password", want);

    /* A value from a file is secret whatever its key. */
    snprintf(var, sizeof var, "BLOOMSTAGE_KAFKA_CLIENT_ID_FILE=%s", pw);
    assert_int_equal(bs_config_load_env(f->cfg, env, err, n), 0);
    assert_string_equal(bs_config_get_str(f->cfg, "kafka.client.id"), SECRET);
    snprintf(want, sizeof want, "env %s", var);
    assert_redacted(f, "kafka.client.id", want);

    /* @file: with -X, in the environment, in the properties file. */
    fresh(f);
    snprintf(arg, sizeof arg, "kafka.ssl.key.pem=@file:%s", pw);
    assert_int_equal(bs_config_set_arg(f->cfg, arg, err, n), 0);
    assert_string_equal(bs_config_get_str(f->cfg, "kafka.ssl.key.pem"),
                        SECRET);
    snprintf(want, sizeof want, "-X %s", arg);
    assert_redacted(f, "kafka.ssl.key.pem", want);
    snprintf(var, sizeof var, "BLOOMSTAGE_PRODUCER_SASL_PASSWORD=@file:%s",
             pw);
    assert_int_equal(bs_config_load_env(f->cfg, env, err, n), 0);
    assert_redacted(f, "producer.sasl.password",
                    "env BLOOMSTAGE_PRODUCER_SASL_PASSWORD");
    char conf[700];
    snprintf(conf, sizeof conf, "consumer.sasl.password = @file:%s\n", pw);
    write_bytes(f, "with-file.conf", conf, strlen(conf));
    assert_int_equal(bs_config_load_file(f->cfg, f->path, err, n), 0);
    assert_string_equal(bs_config_get_str(f->cfg, "consumer.sasl.password"),
                        SECRET);
    snprintf(want, sizeof want, "%s:1", f->path);
    assert_redacted(f, "consumer.sasl.password", want);

    /* The content is the value as the file holds it: blanks and inner
     * newlines kept (a PEM), one LF or CR LF removed, not two. */
    static const char *const contents[][2] = { /* content, value */
        {" a b \n", " a b "},
        {"-----BEGIN\nx\n-----END\n", "-----BEGIN\nx\n-----END"},
        {"crlf\r\n", "crlf"},
        {"two\n\n", "two\n"},
        {"cr\r", "cr\r"},
        {"", ""},
        {"none", "none"},
    };
    for (size_t i = 0; i < sizeof contents / sizeof contents[0]; i++) {
        const char *path = write_bytes(f, "content", contents[i][0],
                                       strlen(contents[i][0]));
        snprintf(arg, sizeof arg, "kafka.sasl.password=@file:%s", path);
        assert_int_equal(bs_config_set_arg(f->cfg, arg, err, n), 0);
        assert_string_equal(bs_config_get_str(f->cfg, "kafka.sasl.password"),
                            contents[i][1]);
    }
    /* A value from a file that the key's type rejects: not shown. */
    snprintf(arg, sizeof arg, "dedup.fpr=@file:%s", pw);
    assert_int_equal(bs_config_set_arg(f->cfg, arg, err, n), -1);
    snprintf(want, sizeof want, "-X %s: key 'dedup.fpr': value '[redacted]' "
             "is not a number", arg);
    assert_string_equal(err, want);

    /* A file that cannot be read: origin, key and path, no content. */
    fresh(f);
    snprintf(var, sizeof var, "BLOOMSTAGE_KAFKA_SASL_PASSWORD_FILE=%s",
             missing);
    assert_int_equal(bs_config_load_env(f->cfg, env, err, n), -1);
    snprintf(want, sizeof want, "env %s: key 'kafka.sasl.password': cannot "
             "read '%s': No such file or directory", var, missing);
    assert_string_equal(err, want);
    snprintf(arg, sizeof arg, "kafka.sasl.password=@file:%s", missing);
    assert_int_equal(bs_config_set_arg(f->cfg, arg, err, n), -1);
    snprintf(want, sizeof want, "-X %s: key 'kafka.sasl.password': cannot "
             "read '%s': No such file or directory", arg, missing);
    assert_string_equal(err, want);
    snprintf(arg, sizeof arg, "kafka.sasl.password=@file:%s", f->dir);
    assert_int_equal(bs_config_set_arg(f->cfg, arg, err, n), -1);
    snprintf(want, sizeof want, "-X %s: key 'kafka.sasl.password': cannot "
             "read '%s': is a directory, not a file", arg, f->dir);
    assert_string_equal(err, want);
    /* Not a regular file: refused before it is opened (a FIFO would
     * wait for a writer, a device could act on the open). */
    snprintf(want, sizeof want, "%s/fifo", f->dir);
    assert_int_equal(mkfifo(want, 0600), 0);
    const char *const odd[] = {"/dev/null", want};
    for (size_t i = 0; i < 2; i++) {
        char msg[2048];
        snprintf(arg, sizeof arg, "kafka.sasl.password=@file:%s", odd[i]);
        assert_int_equal(bs_config_set_arg(f->cfg, arg, err, n), -1);
        snprintf(msg, sizeof msg, "-X %s: key 'kafka.sasl.password': cannot "
                 "read '%s': is not a regular file", arg, odd[i]);
        assert_string_equal(err, msg);
    }
    assert_int_equal(bs_config_set_arg(f->cfg, "kafka.sasl.password=@file:",
                                       err, n),
                     -1);
    assert_string_equal(err, "-X kafka.sasl.password=@file:: key "
                             "'kafka.sasl.password': empty file name");
    if (geteuid() != 0) {
        const char *locked = write_bytes(f, "locked", SECRET, 6);
        assert_int_equal(chmod(locked, 0), 0);
        snprintf(arg, sizeof arg, "kafka.sasl.password=@file:%s", locked);
        assert_int_equal(bs_config_set_arg(f->cfg, arg, err, n), -1);
        snprintf(want, sizeof want, "-X %s: key 'kafka.sasl.password': "
                 "cannot read '%s': Permission denied", arg, locked);
        assert_string_equal(err, want);
    } else {
        print_message("test_secret_files: running as root, which reads any "
                      "file: the unreadable-file case is the directory "
                      "above\n");
    }
    /* More than a value may hold, a NUL byte: refused, content unshown. */
    char *huge = malloc(BS_CONFIG_MAX_LINE + 2);
    assert_non_null(huge);
    memset(huge, 'x', BS_CONFIG_MAX_LINE + 1);
    const char *path = write_bytes(f, "huge", huge, BS_CONFIG_MAX_LINE + 1);
    free(huge);
    snprintf(arg, sizeof arg, "kafka.sasl.password=@file:%s", path);
    assert_int_equal(bs_config_set_arg(f->cfg, arg, err, n), -1);
    snprintf(want, sizeof want, "-X %s: key 'kafka.sasl.password': '%s' "
             "holds more than %d bytes", arg, path, BS_CONFIG_MAX_LINE);
    assert_string_equal(err, want);
    path = write_bytes(f, "nul", SECRET "\0x", sizeof SECRET + 1);
    snprintf(arg, sizeof arg, "kafka.sasl.password=@file:%s", path);
    assert_int_equal(bs_config_set_arg(f->cfg, arg, err, n), -1);
    snprintf(want, sizeof want, "-X %s: key 'kafka.sasl.password': '%s' "
             "holds a NUL byte (a value is text)", arg, path);
    assert_string_equal(err, want);

    /* BLOOMSTAGE_X and BLOOMSTAGE_X_FILE both set, in either order: an
     * error naming both. */
    char plain[] = "BLOOMSTAGE_KAFKA_SASL_PASSWORD=" SECRET;
    snprintf(var, sizeof var, "BLOOMSTAGE_KAFKA_SASL_PASSWORD_FILE=%s", pw);
    char *both[2][3] = {{plain, var, NULL}, {var, plain, NULL}};
    snprintf(want, sizeof want, "env %s: key 'kafka.sasl.password': also set "
             "by BLOOMSTAGE_KAFKA_SASL_PASSWORD (set one of the two)", var);
    for (size_t i = 0; i < 2; i++) {
        fresh(f);
        assert_int_equal(bs_config_load_env(f->cfg, both[i], err, n), -1);
        assert_string_equal(err, want);
    }
    /* -X still wins over a secret from the environment. */
    fresh(f);
    char *one[] = {var, NULL};
    assert_int_equal(bs_config_load_env(f->cfg, one, err, n), 0);
    assert_int_equal(bs_config_set_arg(f->cfg, "kafka.sasl.password=x", err,
                                       n),
                     0);
    assert_string_equal(bs_config_get_str(f->cfg, "kafka.sasl.password"),
                        "x");
}

/* Loads conf as the fixture's file into a fresh configuration, which must
 * load, and validates it: that must pass when rest is NULL, else fail with
 * the message "PATH" + rest. */
static void assert_validates(fixture *f, const char *conf, const char *rest)
{
    assert_int_equal(load_text(f, conf), 0);
    int rc = bs_config_validate(f->cfg, f->err, sizeof f->err);
    if (!rest) {
        if (rc != 0)
            fail_msg("%s\nfails: %s", conf, f->err);
        return;
    }
    assert_int_equal(rc, -1);
    assert_err_at(f, rest);
}

/* The librdkafka properties validate checks before any client exists. */
static void test_kafka_checks(void **state)
{
    fixture *f = *state;
    char *err = f->err;
    size_t n = sizeof f->err;
    char conf[2048], want[2048], missing[600], cert[600];
    snprintf(missing, sizeof missing, "%s/no-such.pem", f->dir);
    snprintf(cert, sizeof cert, "%s", write_bytes(f, "cert.pem", "PEM\n", 4));
    const char *const base = "input.topics=in\noutput.topic=out\n";
    static const char sasl_msg[] =
        "needs a SASL mechanism: set kafka.sasl.mechanism to PLAIN, "
        "SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or GSSAPI (librdkafka "
        "would otherwise assume GSSAPI, Kerberos)";

    /* SASL without a mechanism, for either client, in any case. */
    static const struct {
        const char *conf; /* after base */
        int line;         /* of the protocol at fault; 0: valid */
        const char *key, *value;
    } sasl[] = {
        {"kafka.security.protocol=SASL_SSL\n", 3, "kafka.security.protocol",
         "SASL_SSL"},
        {"kafka.security.protocol=sasl_plaintext\n", 3,
         "kafka.security.protocol", "sasl_plaintext"},
        {"producer.security.protocol=SASL_SSL\n", 3,
         "producer.security.protocol", "SASL_SSL"},
        /* The consumer's own mechanism leaves the producer without. */
        {"kafka.security.protocol=SASL_SSL\nconsumer.sasl.mechanism=PLAIN\n",
         3, "kafka.security.protocol", "SASL_SSL"},
        {"kafka.security.protocol=SASL_SSL\nkafka.sasl.mechanism=\n", 3,
         "kafka.security.protocol", "SASL_SSL"},
        {"kafka.security.protocol=SASL_SSL\nkafka.sasl.mechanism=PLAIN\n", 0,
         NULL, NULL},
        {"kafka.security.protocol=SASL_SSL\nkafka.sasl.mechanisms=SCRAM-SHA-"
         "512\n",
         0, NULL, NULL},
        {"kafka.security.protocol=SASL_SSL\nconsumer.sasl.mechanism=PLAIN\n"
         "producer.sasl.mechanisms=PLAIN\n",
         0, NULL, NULL},
        {"kafka.security.protocol=SSL\n", 0, NULL, NULL},
        {"kafka.security.protocol=SASL_SSL\nconsumer.security.protocol=SSL\n"
         "producer.security.protocol=plaintext\n",
         0, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof sasl / sizeof sasl[0]; i++) {
        snprintf(conf, sizeof conf, "%s%s", base, sasl[i].conf);
        snprintf(want, sizeof want, ":%d: key '%s': %s %s", sasl[i].line,
                 sasl[i].key, sasl[i].value, sasl_msg);
        assert_validates(f, conf, sasl[i].line ? want : NULL);
    }

    /* TLS files: missing, a directory where a file must be, unreadable;
     * the CA location may be a directory or "probe". */
    static const struct {
        const char *key;
        const char *path; /* "M": missing, "D": the directory, "C": cert */
        const char *why;  /* NULL: valid */
    } files[] = {
        {"kafka.ssl.ca.location", "M", "No such file or directory"},
        {"kafka.ssl.ca.location", "D", NULL},
        {"kafka.ssl.ca.location", "C", NULL},
        {"consumer.ssl.ca.location", "M", "No such file or directory"},
        {"kafka.ssl.certificate.location", "M", "No such file or directory"},
        {"kafka.ssl.certificate.location", "D", "is a directory, not a file"},
        {"kafka.ssl.certificate.location", "C", NULL},
        {"producer.ssl.key.location", "M", "No such file or directory"},
        {"kafka.ssl.key.location", "D", "is a directory, not a file"},
        {"kafka.ssl.key.location", "C", NULL},
        {"kafka.ssl.crl.location", "M", NULL}, /* not checked */
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        const char *path = files[i].path[0] == 'M'   ? missing
                           : files[i].path[0] == 'D' ? f->dir
                                                     : cert;
        snprintf(conf, sizeof conf, "%s%s=%s\n", base, files[i].key, path);
        snprintf(want, sizeof want, ":3: key '%s': cannot read '%s': %s",
                 files[i].key, path, files[i].why);
        assert_validates(f, conf, files[i].why ? want : NULL);
    }
    fresh(f);
    assert_int_equal(bs_config_set_arg(f->cfg, "input.topics=in", err, n), 0);
    assert_int_equal(bs_config_set_arg(f->cfg, "output.topic=out", err, n),
                     0);
    assert_int_equal(bs_config_set_arg(f->cfg, "kafka.ssl.ca.location=probe",
                                       err, n),
                     0);
    assert_int_equal(bs_config_validate(f->cfg, err, n), 0);
    if (geteuid() != 0) {
        const char *key = write_bytes(f, "key.pem", "KEY\n", 4);
        assert_int_equal(chmod(key, 0), 0);
        snprintf(conf, sizeof conf, "kafka.ssl.key.location=%s", key);
        assert_int_equal(bs_config_set_arg(f->cfg, conf, err, n), 0);
        assert_int_equal(bs_config_validate(f->cfg, err, n), -1);
        snprintf(want, sizeof want, "-X kafka.ssl.key.location: key "
                 "'kafka.ssl.key.location': cannot read '%s': Permission "
                 "denied", key);
        assert_string_equal(err, want);
    } else {
        print_message("test_kafka_checks: running as root, which reads any "
                      "file: the unreadable key file is the directory "
                      "case above\n");
    }
}

/* metrics.listen's port: 1..65535, or 0 for any free port; anything else
 * (99999 would listen on 99999 mod 65536) refused naming the key. */
static void test_listen_port(void **state)
{
    fixture *f = *state;
    static const char *const good[] = {"127.0.0.1:9464", "0.0.0.0:65535",
                                       ":1", "[::1]:9464", "127.0.0.1:0",
                                       ""};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        char text[128];
        snprintf(text, sizeof text, "input.topics=in\noutput.topic=out\n"
                 "metrics.listen=%s\n", good[i]);
        assert_int_equal(load_text(f, text), 0);
        if (bs_config_validate(f->cfg, f->err, sizeof f->err) != 0)
            fail_msg("metrics.listen=%s refused: %s", good[i], f->err);
    }
    assert_int_equal(load_text(f, "input.topics=in\noutput.topic=out\n"
                                  "metrics.listen=127.0.0.1:99999\n"), 0);
    assert_int_equal(bs_config_validate(f->cfg, f->err, sizeof f->err), -1);
    assert_err_at(f, ":3: key 'metrics.listen': port 99999 out of range "
                     "[1, 65535] (0: any free port)");
    assert_int_equal(load_text(f, "input.topics=in\noutput.topic=out\n"
                                  "metrics.listen=127.0.0.1:65536\n"), 0);
    assert_int_equal(bs_config_validate(f->cfg, f->err, sizeof f->err), -1);
    assert_err_at(f, ":3: key 'metrics.listen': port 65536 out of range "
                     "[1, 65535] (0: any free port)");
    static const char *const bad[] = {"127.0.0.1", "127.0.0.1:", "host:http",
                                      "h:-1", "h:123456", "h:94 64"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char text[128], want[700];
        snprintf(text, sizeof text, "input.topics=in\noutput.topic=out\n"
                 "metrics.listen=%s\n", bad[i]);
        assert_int_equal(load_text(f, text), 0);
        assert_int_equal(bs_config_validate(f->cfg, f->err, sizeof f->err),
                         -1);
        snprintf(want, sizeof want, "%s:3: key 'metrics.listen': ", f->path);
        if (strncmp(f->err, want, strlen(want)) != 0)
            fail_msg("metrics.listen=%s: '%s'", bad[i], f->err);
    }
}

/* The checkpoint store's place may not be empty: an empty checkpoint.dir
 * with the directory store, an empty checkpoint.topic with Kafka's. */
static void test_store_place_not_empty(void **state)
{
    fixture *f = *state;
    assert_int_equal(load_text(f, "input.topics=in\noutput.topic=out\n"
                                  "checkpoint.dir=\n"), 0);
    assert_int_equal(bs_config_validate(f->cfg, f->err, sizeof f->err), -1);
    assert_err_at(f, ":3: key 'checkpoint.dir': must not be empty with "
                     "checkpoint.store=dir");
    /* Unused by the Kafka store: empty is fine there. */
    assert_int_equal(load_text(f, "input.topics=in\noutput.topic=out\n"
                                  "checkpoint.dir=\ncheckpoint.store=kafka\n"),
                     0);
    assert_int_equal(bs_config_validate(f->cfg, f->err, sizeof f->err), 0);
    assert_int_equal(load_text(f, "input.topics=in\noutput.topic=out\n"
                                  "checkpoint.store=kafka\n"
                                  "checkpoint.topic=\n"), 0);
    assert_int_equal(bs_config_validate(f->cfg, f->err, sizeof f->err), -1);
    assert_err_at(f, ":4: key 'checkpoint.topic': must not be empty with "
                     "checkpoint.store=kafka");
}

/* Bytes that are not UTF-8 in a message are shown \xNN: a topic name in a
 * value's error, and bs_config_escape itself. */
static void test_messages_escape_bytes(void **state)
{
    fixture *f = *state;
    assert_int_equal(load_text(f, "input.topics=ev\xffnts\n"), -1);
    assert_err_at(f, ":1: key 'input.topics': value 'ev\\xffnts' has "
                     "'\\xff' in topic 'ev\\xffnts' (topic names are "
                     "letters, digits, '.', '_' and '-')");
    assert_int_equal(load_text(f, "input.topics=a\noutput.topic=o\xfe\n"
                                  "rejected.topic=o\xfe\n"), 0);
    assert_int_equal(bs_config_validate(f->cfg, f->err, sizeof f->err), -1);
    assert_non_null(strstr(f->err, ":3: key 'rejected.topic': same topic"));
    assert_null(strchr(f->err, '\xfe'));

    char buf[64];
    assert_string_equal(bs_config_escape("plain", buf, sizeof buf), "plain");
    assert_string_equal(bs_config_escape("caf\xc3\xa9 \xf0\x9f\x98\x80",
                                         buf, sizeof buf),
                        "caf\xc3\xa9 \xf0\x9f\x98\x80");
    assert_string_equal(bs_config_escape("\xc0\xaf\xed\xa0\x80", buf,
                                         sizeof buf),
                        "\\xc0\\xaf\\xed\\xa0\\x80");
    assert_string_equal(bs_config_escape("a\nb\x7f", buf, sizeof buf),
                        "a\\x0ab\\x7f");
    /* Cut to fit, never in the middle of an escape or a character. */
    assert_string_equal(bs_config_escape("ab\xff", buf, 6), "ab");
    assert_string_equal(bs_config_escape("a\xc3\xa9", buf, 3), "a");
    assert_false(bs_config_needs_escape("caf\xc3\xa9"));
    assert_true(bs_config_needs_escape("\xe2\x82"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
        T(test_defaults),
        T(test_enum_lists_round_trip),
        T(test_parse_size),
        T(test_table_rows_are_sound),
        T(test_file_syntax),
        T(test_malformed_lines),
        T(test_bad_values),
        T(test_bool_values),
        T(test_range_edges),
        T(test_unknown_keys),
        T(test_distance_and_suggest),
        T(test_env_names),
        T(test_env_load),
        T(test_precedence),
        T(test_set_arg),
        T(test_passthrough),
        T(test_blocklists),
        T(test_keyspec),
        T(test_keyspec_parts),
        T(test_required_and_topics),
        T(test_line_too_long),
        T(test_key_count_cap),
        T(test_missing_file),
        T(test_documents),
        T(test_effective),
        T(test_secret_keys),
        T(test_secret_never_shown),
        T(test_secret_files),
        T(test_kafka_checks),
        T(test_listen_port),
        T(test_store_place_not_empty),
        T(test_messages_escape_bytes),
#undef T
    };
    return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
