/*
 * test_registry.c -- the Schema Registry client (stage/registry/) against a
 * real registry: Apicurio Registry started by scripts/registry twice, once
 * plain and once with HTTPS and basic auth, each on a fresh directory and
 * owned by this test's pid (a killed test leaves no JVM).  Schemas are
 * registered through the Confluent API (POST /subjects/S/versions): an Avro
 * record, a Protobuf file importing another that imports a third (given as
 * references), a JSON Schema.
 *
 * Checks: each id comes back with the registered text and type; the
 * references come back resolved, named, each after what it imports; a
 * second get of an id makes no HTTP request; an unknown id is NOT_FOUND
 * (and, negative answers kept, not asked again); a port where nothing
 * listens is UNREACHABLE naming the URL; of two URLs the dead first one is
 * passed over and the live one asked first afterwards; the cache's bound
 * evicts the least recently used; 65 references, the bound passed only at
 * depth 2, are BAD (and overflow nothing); no password (the user info's,
 * a URL's) ever appears in an errstr; HTTPS with the test CA works and
 * without it is refused; basic auth from
 * schema.registry.basic.auth.user.info set with @file: and with
 * BLOOMSTAGE_..._FILE works, a wrong password is a 401.
 * The reply parser is checked on bytes of its own (no network).
 *
 * Nothing is skipped: without Java or Maven the registry does not start and
 * the test fails with scripts/registry's message saying which is missing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "registry/registry.h"
#include "support.h"

#include <config.h>
#include <curl/curl.h>
#include <jansson.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* -- the registries ------------------------------------------------------ */

#define PASSWORD "Tr0ub4dor-registry-pw"
#define USER_INFO "stage:" PASSWORD

static char base_dir[256];
static h_registry plain_reg, secure_reg;
static const char *plain_url = plain_reg.url;   /* http://127.0.0.1:P/apis/ccompat/v7 */
static const char *secure_url = secure_reg.url; /* https://... with basic auth */
static const char *ca_file = secure_reg.ca;

static int start_registries(void **state)
{
    (void)state;
    snprintf(base_dir, sizeof base_dir, "/tmp/bs-registry-XXXXXX");
    if (!mkdtemp(base_dir))
        return -1;
    char plain[300], secure[300];
    snprintf(plain, sizeof plain, "%s/plain", base_dir);
    snprintf(secure, sizeof secure, "%s/secure", base_dir);
    char *secure_args[] = {"--tls", "--basic-auth", USER_INFO, NULL};
    /* Both JVMs start side by side (the first run fetches once: the
     * script's lock). */
    H_CHECK(h_registry_spawn(&plain_reg, plain, NULL, NULL));
    H_CHECK(h_registry_spawn(&secure_reg, secure, secure_args, USER_INFO));
    H_CHECK(h_registry_wait(&plain_reg));
    H_CHECK(h_registry_wait(&secure_reg));
    assert_int_equal(strncmp(plain_url, "http://127.0.0.1:", 17), 0);
    assert_int_equal(strncmp(secure_url, "https://127.0.0.1:", 18), 0);
    return 0;
}

/* Stops both; -1 (a failed teardown) if a JVM outlives `stop`. */
static int stop_registries(void **state)
{
    (void)state;
    int rc = 0;
    h_registry *regs[] = {&plain_reg, &secure_reg};
    for (size_t i = 0; i < 2; i++)
        if (h_registry_stop(regs[i]) != 0) {
            fprintf(stderr, "# %s\n", h_last_error());
            rc = -1;
        }
    char *argv[] = {"rm", "-rf", base_dir, NULL};
    pid_t pid;
    int status;
    if (posix_spawnp(&pid, "rm", NULL, NULL, argv, environ) == 0)
        waitpid(pid, &status, 0);
    return rc;
}

/* -- registering (the Confluent API, as producers' serializers do) ------- */

/* The id the registry gave; refs (taken) NULL for none. */
static int32_t post_schema(const h_registry *reg, const char *subject,
                           const char *type, const char *text, json_t *refs)
{
    char *rj = refs ? json_dumps(refs, JSON_COMPACT) : NULL;
    json_decref(refs);
    int32_t id = h_registry_post(reg, subject, type, text, rj);
    free(rj);
    if (id < 0)
        fail_msg("%s", h_last_error());
    return id;
}

static json_t *ref(const char *name, const char *subject, int version)
{
    return json_pack("{s:s, s:s, s:i}", "name", name, "subject", subject,
                     "version", version);
}

static const char avro_text[] =
    "{\"type\":\"record\",\"name\":\"Event\",\"namespace\":\"bs.test\","
    "\"fields\":[{\"name\":\"id\",\"type\":\"string\"},"
    "{\"name\":\"n\",\"type\":[\"null\",\"long\"]}]}";
static const char proto_a[] = "syntax = \"proto3\";\npackage bs.a;\n"
                              "message A { string x = 1; }\n";
static const char proto_b[] = "syntax = \"proto3\";\npackage bs.b;\n"
                              "import \"bs/a.proto\";\n"
                              "message B { bs.a.A a = 1; int64 y = 2; }\n";
static const char proto_main[] = "syntax = \"proto3\";\npackage bs.main;\n"
                                 "import \"bs/b.proto\";\n"
                                 "message Event { string id = 1; "
                                 "bs.b.B b = 2; }\n";
static const char json_text[] =
    "{\"$schema\":\"http://json-schema.org/draft-07/schema#\","
    "\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\"}}}";

/* Ids of what the plain registry holds (registered once, in order). */
static int32_t id_avro, id_proto, id_json, id_extra[3];

static void register_plain(void)
{
    static bool done;
    if (done)
        return;
    id_avro = post_schema(&plain_reg, "events-avro-value", "AVRO", avro_text,
                          NULL);
    post_schema(&plain_reg, "bs-a.proto", "PROTOBUF", proto_a, NULL);
    json_t *rb = json_array();
    json_array_append_new(rb, ref("bs/a.proto", "bs-a.proto", 1));
    post_schema(&plain_reg, "bs-b.proto", "PROTOBUF", proto_b, rb);
    json_t *rm = json_array();
    json_array_append_new(rm, ref("bs/b.proto", "bs-b.proto", 1));
    id_proto = post_schema(&plain_reg, "events-proto-value", "PROTOBUF",
                           proto_main, rm);
    id_json = post_schema(&plain_reg, "events-json-value", "JSON", json_text,
                          NULL);
    for (int i = 0; i < 3; i++) {
        char subject[64], text[256];
        snprintf(subject, sizeof subject, "extra-%d-value", i);
        snprintf(text, sizeof text,
                 "{\"type\":\"record\",\"name\":\"X%d\",\"fields\":[]}", i);
        id_extra[i] = post_schema(&plain_reg, subject, "AVRO", text, NULL);
    }
    done = true;
}

/* A loopback port nothing listens on (bound, then closed). */
static int dead_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static bs_registry *new_reg(const char *urls, size_t max, long neg_ttl)
{
    char errstr[BS_ERRSTR_SIZE];
    bs_registry_conf conf = {.urls = urls, .max_schemas = max,
                             .negative_ttl_ms = neg_ttl, .timeout_ms = 10000};
    bs_registry *reg = bs_registry_new(&conf, errstr, sizeof errstr);
    if (!reg)
        fail_msg("bs_registry_new(%s): %s", urls, errstr);
    return reg;
}

/* -- against the plain registry ------------------------------------------ */

static void test_each_type_comes_back(void **state)
{
    (void)state;
    register_plain();
    bs_registry *reg = new_reg(plain_url, 0, 0);
    char errstr[BS_ERRSTR_SIZE];
    const bs_registry_schema *s;

    assert_int_equal(bs_registry_get(reg, id_avro, &s, errstr, sizeof errstr),
                     BS_REGISTRY_FOUND);
    assert_int_equal(s->id, id_avro);
    assert_int_equal(s->type, BS_REGISTRY_AVRO);
    assert_string_equal(s->text, avro_text);
    assert_int_equal(s->text_len, strlen(avro_text));
    assert_int_equal(s->nrefs, 0);

    assert_int_equal(bs_registry_get(reg, id_json, &s, errstr, sizeof errstr),
                     BS_REGISTRY_FOUND);
    assert_int_equal(s->type, BS_REGISTRY_JSON);
    assert_string_equal(s->text, json_text);

    /* main imports b, b imports a: both come back, a before b. */
    uint64_t before = bs_registry_requests(reg);
    assert_int_equal(
        bs_registry_get(reg, id_proto, &s, errstr, sizeof errstr),
        BS_REGISTRY_FOUND);
    assert_int_equal(bs_registry_requests(reg) - before, 3);
    assert_int_equal(s->type, BS_REGISTRY_PROTOBUF);
    assert_string_equal(s->text, proto_main);
    assert_int_equal(s->nrefs, 2);
    assert_string_equal(s->refs[0].name, "bs/a.proto");
    assert_string_equal(s->refs[0].subject, "bs-a.proto");
    assert_int_equal(s->refs[0].version, 1);
    assert_int_equal(s->refs[0].type, BS_REGISTRY_PROTOBUF);
    assert_string_equal(s->refs[0].text, proto_a);
    assert_string_equal(s->refs[1].name, "bs/b.proto");
    assert_string_equal(s->refs[1].subject, "bs-b.proto");
    assert_string_equal(s->refs[1].text, proto_b);
    bs_registry_destroy(reg);
}

static void test_second_get_makes_no_request(void **state)
{
    (void)state;
    register_plain();
    bs_registry *reg = new_reg(plain_url, 0, 0);
    char errstr[BS_ERRSTR_SIZE];
    const bs_registry_schema *a, *b;
    assert_int_equal(bs_registry_get(reg, id_proto, &a, errstr, sizeof errstr),
                     BS_REGISTRY_FOUND);
    uint64_t after_first = bs_registry_requests(reg);
    assert_true(after_first >= 1);
    for (int i = 0; i < 100; i++)
        assert_int_equal(
            bs_registry_get(reg, id_proto, &b, errstr, sizeof errstr),
            BS_REGISTRY_FOUND);
    assert_int_equal(bs_registry_requests(reg), after_first);
    assert_ptr_equal(a, b);
    bs_registry_destroy(reg);
}

static void test_unknown_id_is_not_found(void **state)
{
    (void)state;
    register_plain();
    char errstr[BS_ERRSTR_SIZE];
    const bs_registry_schema *s = (const void *)1;
    /* Negative answers not kept: each get asks. */
    bs_registry *reg = new_reg(plain_url, 0, 0);
    assert_int_equal(bs_registry_get(reg, 987654, &s, errstr, sizeof errstr),
                     BS_REGISTRY_NOT_FOUND);
    assert_null(s);
    assert_non_null(strstr(errstr, "40403"));
    assert_non_null(strstr(errstr, plain_url));
    assert_int_equal(bs_registry_get(reg, 987654, &s, errstr, sizeof errstr),
                     BS_REGISTRY_NOT_FOUND);
    assert_int_equal(bs_registry_requests(reg), 2);
    bs_registry_destroy(reg);
    /* Kept for a minute: the second get answers from the cache, with the
     * same message. */
    reg = new_reg(plain_url, 0, 60000);
    char first[BS_ERRSTR_SIZE];
    assert_int_equal(bs_registry_get(reg, 987654, &s, first, sizeof first),
                     BS_REGISTRY_NOT_FOUND);
    assert_int_equal(bs_registry_get(reg, 987654, &s, errstr, sizeof errstr),
                     BS_REGISTRY_NOT_FOUND);
    assert_int_equal(bs_registry_requests(reg), 1);
    assert_string_equal(first, errstr);
    bs_registry_destroy(reg);
}

static void test_nothing_listening_is_unreachable(void **state)
{
    (void)state;
    char url[128], errstr[BS_ERRSTR_SIZE];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/apis/ccompat/v7",
             dead_port());
    bs_registry *reg = new_reg(url, 0, 60000);
    const bs_registry_schema *s;
    assert_int_equal(bs_registry_get(reg, 1, &s, errstr, sizeof errstr),
                     BS_REGISTRY_UNREACHABLE);
    assert_non_null(strstr(errstr, url));
    assert_non_null(strstr(errstr, "/schemas/ids/1"));
    assert_non_null(strstr(errstr, "onnect")); /* curl: couldn't connect */
    /* Never kept: the next get asks again. */
    assert_int_equal(bs_registry_get(reg, 1, &s, errstr, sizeof errstr),
                     BS_REGISTRY_UNREACHABLE);
    assert_int_equal(bs_registry_requests(reg), 2);
    assert_int_equal(bs_registry_cached(reg), 0);
    bs_registry_destroy(reg);
}

static void test_dead_first_url_is_passed_over(void **state)
{
    (void)state;
    register_plain();
    char urls[1024], errstr[BS_ERRSTR_SIZE];
    snprintf(urls, sizeof urls, "http://127.0.0.1:%d/apis/ccompat/v7 , %s",
             dead_port(), plain_url);
    bs_registry *reg = new_reg(urls, 0, 0);
    const bs_registry_schema *s;
    assert_int_equal(bs_registry_get(reg, id_avro, &s, errstr, sizeof errstr),
                     BS_REGISTRY_FOUND);
    assert_string_equal(s->text, avro_text);
    assert_int_equal(bs_registry_requests(reg), 2);
    /* The live one is asked first from now on. */
    assert_int_equal(bs_registry_get(reg, id_json, &s, errstr, sizeof errstr),
                     BS_REGISTRY_FOUND);
    assert_int_equal(bs_registry_requests(reg), 3);
    bs_registry_destroy(reg);
}

static void test_cache_bound_evicts_least_recent(void **state)
{
    (void)state;
    register_plain();
    bs_registry *reg = new_reg(plain_url, 2, 0);
    char errstr[BS_ERRSTR_SIZE];
    const bs_registry_schema *s;
    for (int i = 0; i < 3; i++)
        assert_int_equal(
            bs_registry_get(reg, id_extra[i], &s, errstr, sizeof errstr),
            BS_REGISTRY_FOUND);
    assert_int_equal(bs_registry_requests(reg), 3);
    assert_int_equal(bs_registry_cached(reg), 2);
    /* 1 and 2 are kept, used in the order 2, 1: no request. */
    assert_int_equal(
        bs_registry_get(reg, id_extra[2], &s, errstr, sizeof errstr),
        BS_REGISTRY_FOUND);
    assert_int_equal(
        bs_registry_get(reg, id_extra[1], &s, errstr, sizeof errstr),
        BS_REGISTRY_FOUND);
    assert_int_equal(bs_registry_requests(reg), 3);
    /* 0 was evicted: asked again, and 2 (now least recent) goes. */
    assert_int_equal(
        bs_registry_get(reg, id_extra[0], &s, errstr, sizeof errstr),
        BS_REGISTRY_FOUND);
    assert_int_equal(bs_registry_requests(reg), 4);
    assert_int_equal(
        bs_registry_get(reg, id_extra[1], &s, errstr, sizeof errstr),
        BS_REGISTRY_FOUND);
    assert_int_equal(bs_registry_requests(reg), 4);
    assert_int_equal(
        bs_registry_get(reg, id_extra[2], &s, errstr, sizeof errstr),
        BS_REGISTRY_FOUND);
    assert_int_equal(bs_registry_requests(reg), 5);
    assert_int_equal(bs_registry_cached(reg), 2);
    bs_registry_destroy(reg);
}

/* More references than BS_REGISTRY_MAX_REFS, found only at depth 2: main
 * imports a leaf and 32 files that import one more each (65 in all).  The
 * bound is kept when a nested reference fills it (BAD, no overflow). */
static void test_reference_bound_holds_at_depth(void **state)
{
    (void)state;
    register_plain();
    char name[64], subject[64], text[256], errstr[BS_ERRSTR_SIZE];
    json_t *main_refs = json_array();
    post_schema(&plain_reg, "bound-leaf", "PROTOBUF",
                "syntax = \"proto3\";\npackage leaf;\nmessage L {}\n", NULL);
    json_array_append_new(main_refs, ref("leaf.proto", "bound-leaf", 1));
    for (int i = 0; i < 32; i++) {
        snprintf(subject, sizeof subject, "bound-b%d", i);
        snprintf(text, sizeof text,
                 "syntax = \"proto3\";\npackage b%d;\nmessage B {}\n", i);
        post_schema(&plain_reg, subject, "PROTOBUF", text, NULL);
        json_t *refs = json_array();
        snprintf(name, sizeof name, "b%d.proto", i);
        json_array_append_new(refs, ref(name, subject, 1));
        snprintf(subject, sizeof subject, "bound-a%d", i);
        snprintf(text, sizeof text,
                 "syntax = \"proto3\";\npackage a%d;\nimport \"b%d.proto\";\n"
                 "message A { b%d.B b = 1; }\n",
                 i, i, i);
        post_schema(&plain_reg, subject, "PROTOBUF", text, refs);
        snprintf(name, sizeof name, "a%d.proto", i);
        json_array_append_new(main_refs, ref(name, subject, 1));
    }
    int32_t id = post_schema(&plain_reg, "bound-main", "PROTOBUF",
                             "syntax = \"proto3\";\npackage m;\nmessage M {}\n",
                             main_refs);
    bs_registry *reg = new_reg(plain_url, 0, 0);
    const bs_registry_schema *s;
    assert_int_equal(bs_registry_get(reg, id, &s, errstr, sizeof errstr),
                     BS_REGISTRY_BAD);
    assert_non_null(strstr(errstr, "more than 64 references"));
    bs_registry_destroy(reg);
}

/* -- secrets ------------------------------------------------------------- */

static void test_password_never_in_errstr(void **state)
{
    (void)state;
    char urls[512], errstr[BS_ERRSTR_SIZE];
    int p1 = dead_port(), p2 = dead_port();
    snprintf(urls, sizeof urls,
             "http://stage:url-pw-3141@127.0.0.1:%d/apis/ccompat/v7,"
             "https://127.0.0.1:%d",
             p1, p2);
    bs_registry_conf conf = {.urls = urls, .user_info = USER_INFO};
    bs_registry *reg = bs_registry_new(&conf, errstr, sizeof errstr);
    assert_non_null(reg);
    const bs_registry_schema *s;
    assert_int_equal(bs_registry_get(reg, 7, &s, errstr, sizeof errstr),
                     BS_REGISTRY_UNREACHABLE);
    assert_null(strstr(errstr, PASSWORD));
    assert_null(strstr(errstr, "url-pw-3141"));
    assert_null(strstr(errstr, "stage:"));
    char shown[128];
    snprintf(shown, sizeof shown, "http://127.0.0.1:%d/apis/ccompat/v7", p1);
    assert_non_null(strstr(errstr, shown));
    snprintf(shown, sizeof shown, "https://127.0.0.1:%d", p2);
    assert_non_null(strstr(errstr, shown));
    bs_registry_destroy(reg);

    /* Configuration errors do not repeat a URL holding a password. */
    const char *bad[] = {"ftp://u:url-pw-3141@h/x", "http://u:url-pw-3141@",
                         "http://h:1,,http://u:url-pw-3141@h"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        conf.urls = bad[i];
        errstr[0] = '\0';
        assert_null(bs_registry_new(&conf, errstr, sizeof errstr));
        assert_true(errstr[0] != '\0');
        assert_null(strstr(errstr, "url-pw-3141"));
        assert_null(strstr(errstr, PASSWORD));
    }
}

static void test_conf_refused_with_reasons(void **state)
{
    (void)state;
    char errstr[BS_ERRSTR_SIZE];
    struct {
        bs_registry_conf conf;
        const char *says;
    } cases[] = {
        {{.urls = ""}, "empty URL"},
        {{.urls = NULL}, "no URL"},
        {{.urls = "gopher://h:70"}, "scheme 'gopher'"},
        {{.urls = "http://h:1", .user_info = "nocolon"}, "USER:PASSWORD"},
        {{.urls = "http://h:1", .ca_location = "/nonexistent/ca.pem"},
         "'/nonexistent/ca.pem'"},
        {{.urls = "http://h:1", .cert_location = "/etc/hostname"},
         "needs its key"},
        {{.urls = "http://h:1", .max_schemas = 2000000}, "at most"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        errstr[0] = '\0';
        assert_null(bs_registry_new(&cases[i].conf, errstr, sizeof errstr));
        if (!strstr(errstr, cases[i].says))
            fail_msg("case %zu: '%s' does not say '%s'", i, errstr,
                     cases[i].says);
    }
}

/* -- HTTPS and basic auth ------------------------------------------------- */

/* The user info as the stage gets it: from the configuration, which reads
 * it from a file (@file: in the properties file, or the _FILE variable). */
static void test_tls_and_basic_auth_from_config(void **state)
{
    (void)state;
    const char *key = "schema.registry.basic.auth.user.info";
    char pw_file[300], errstr[BS_ERRSTR_SIZE];
    snprintf(pw_file, sizeof pw_file, "%s/user-info", base_dir);
    FILE *f = fopen(pw_file, "w");
    assert_non_null(f);
    fprintf(f, "%s\n", USER_INFO);
    fclose(f);
    int32_t id = post_schema(&secure_reg, "secure-value", "AVRO", avro_text,
                             NULL);

    for (int how = 0; how < 2; how++) {
        bs_config *cfg = bs_config_new();
        assert_non_null(cfg);
        char env_var[400], *envp[] = {env_var, NULL};
        if (how == 0) {
            char value[320];
            snprintf(value, sizeof value, "@file:%s", pw_file);
            assert_int_equal(bs_config_set(cfg, key, value, NULL, errstr,
                                           sizeof errstr),
                             0);
        } else {
            snprintf(env_var, sizeof env_var,
                     "BLOOMSTAGE_SCHEMA_REGISTRY_BASIC_AUTH_USER_INFO_FILE=%s",
                     pw_file);
            if (bs_config_load_env(cfg, envp, errstr, sizeof errstr) != 0)
                fail_msg("%s", errstr);
        }
        assert_true(bs_config_value_hidden(cfg, key));
        bs_registry_conf conf = {
            .urls = secure_url,
            .user_info = bs_config_get_str(cfg, key),
            .ca_location = ca_file,
        };
        assert_string_equal(conf.user_info, USER_INFO);
        bs_registry *reg = bs_registry_new(&conf, errstr, sizeof errstr);
        if (!reg)
            fail_msg("%s", errstr);
        const bs_registry_schema *s;
        if (bs_registry_get(reg, id, &s, errstr, sizeof errstr) !=
            BS_REGISTRY_FOUND)
            fail_msg("HTTPS with the CA and the user: %s", errstr);
        assert_string_equal(s->text, avro_text);
        bs_registry_destroy(reg);
        /* The effective configuration shows the key, never the value. */
        char *text = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&text, &len);
        assert_int_equal(bs_config_print_effective(cfg, mem), 0);
        fclose(mem);
        assert_non_null(strstr(text, key));
        assert_null(strstr(text, PASSWORD));
        free(text);
        bs_config_destroy(cfg);
    }

    const bs_registry_schema *s;
    /* Without the CA: the certificate is refused. */
    bs_registry_conf conf = {.urls = secure_url, .user_info = USER_INFO};
    bs_registry *reg = bs_registry_new(&conf, errstr, sizeof errstr);
    assert_non_null(reg);
    assert_int_equal(bs_registry_get(reg, id, &s, errstr, sizeof errstr),
                     BS_REGISTRY_UNREACHABLE);
    assert_non_null(strstr(errstr, "certificate"));
    assert_non_null(strstr(errstr, secure_url));
    assert_null(strstr(errstr, PASSWORD));
    bs_registry_destroy(reg);

    /* A wrong password, and none: 401, retriable, nothing kept. */
    const char *users[] = {"stage:not-the-" PASSWORD, NULL};
    for (size_t i = 0; i < 2; i++) {
        conf = (bs_registry_conf){.urls = secure_url, .user_info = users[i],
                                  .ca_location = ca_file,
                                  .negative_ttl_ms = 60000};
        reg = bs_registry_new(&conf, errstr, sizeof errstr);
        assert_non_null(reg);
        assert_int_equal(bs_registry_get(reg, id, &s, errstr, sizeof errstr),
                         BS_REGISTRY_UNREACHABLE);
        assert_non_null(strstr(errstr, "HTTP 401"));
        assert_null(strstr(errstr, PASSWORD));
        assert_int_equal(bs_registry_cached(reg), 0);
        bs_registry_destroy(reg);
    }

    /* The test CA's client certificate and key are accepted by the client
     * (the registry asks for none: Apicurio 3.0.9 cannot require one). */
    char cert[300], cert_key[300];
    snprintf(cert, sizeof cert, "%s/secure/tls/client.pem", base_dir);
    snprintf(cert_key, sizeof cert_key, "%s/secure/tls/client.key",
             base_dir);
    conf = (bs_registry_conf){.urls = secure_url, .user_info = USER_INFO,
                              .ca_location = ca_file, .cert_location = cert,
                              .key_location = cert_key};
    reg = bs_registry_new(&conf, errstr, sizeof errstr);
    assert_non_null(reg);
    if (bs_registry_get(reg, id, &s, errstr, sizeof errstr) !=
        BS_REGISTRY_FOUND)
        fail_msg("HTTPS with a client certificate: %s", errstr);
    bs_registry_destroy(reg);
}

/* -- replies without the network ----------------------------------------- */

static bs_registry_result parse(long status, const char *body,
                                bs_registry_reply **out, char *errstr)
{
    return bs_registry_reply_parse(status, body, strlen(body), out, errstr,
                                   BS_ERRSTR_SIZE);
}

static void test_reply_parser(void **state)
{
    (void)state;
    char errstr[BS_ERRSTR_SIZE];
    bs_registry_reply *r;
    /* Confluent omits schemaType for Avro. */
    assert_int_equal(
        parse(200, "{\"schema\":\"\\\"string\\\"\"}", &r, errstr),
        BS_REGISTRY_FOUND);
    assert_int_equal(r->type, BS_REGISTRY_AVRO);
    assert_string_equal(r->text, "\"string\"");
    assert_int_equal(r->nrefs, 0);
    bs_registry_reply_destroy(r);
    assert_int_equal(
        parse(200,
              "{\"schema\":\"x\",\"schemaType\":\"PROTOBUF\",\"references\":"
              "[{\"name\":\"a.proto\",\"subject\":\"a\",\"version\":3}],"
              "\"id\":5}",
              &r, errstr),
        BS_REGISTRY_FOUND);
    assert_int_equal(r->type, BS_REGISTRY_PROTOBUF);
    assert_int_equal(r->nrefs, 1);
    assert_string_equal(r->refs[0].name, "a.proto");
    assert_int_equal(r->refs[0].version, 3);
    bs_registry_reply_destroy(r);

    struct {
        long status;
        const char *body;
        bs_registry_result want;
        const char *says;
    } cases[] = {
        {200, "not json", BS_REGISTRY_BAD, "not JSON"},
        {200, "", BS_REGISTRY_BAD, "empty body"},
        {200, "[]", BS_REGISTRY_BAD, "not a JSON object"},
        {200, "{\"schema\":5}", BS_REGISTRY_BAD, "\"schema\""},
        {200, "{\"schema\":\"x\",\"schemaType\":\"XML\"}", BS_REGISTRY_BAD,
         "schema type 'XML' is not supported"},
        {200, "{\"schema\":\"a\\u0000b\"}", BS_REGISTRY_BAD, "not JSON"},
        {200, "{\"schema\":\"x\",\"schema\":\"y\"}", BS_REGISTRY_BAD,
         "not JSON"},
        {200,
         "{\"schema\":\"x\",\"references\":[{\"name\":\"a\",\"subject\":"
         "\"a\",\"version\":0}]}",
         BS_REGISTRY_BAD, "\"version\""},
        {200, "{\"schema\":\"x\",\"references\":[{\"subject\":\"a\"}]}",
         BS_REGISTRY_BAD, "\"name\" is missing"},
        {404, "{\"error_code\":40403,\"message\":\"Schema not found\"}",
         BS_REGISTRY_NOT_FOUND,
         "HTTP 404: Schema not found (error_code 40403)"},
        {404, "{\"error_code\":40402}", BS_REGISTRY_NOT_FOUND, "40402"},
        {404, "<html>no</html>", BS_REGISTRY_UNREACHABLE, "ccompat"},
        {401, "", BS_REGISTRY_UNREACHABLE, "HTTP 401"},
        {403, "", BS_REGISTRY_UNREACHABLE, "HTTP 403"},
        {500, "{\"error_code\":50001,\"message\":\"store\\nerror\"}",
         BS_REGISTRY_UNREACHABLE, "store?error (error_code 50001)"},
        {503, "", BS_REGISTRY_UNREACHABLE, "HTTP 503"},
        {429, "", BS_REGISTRY_UNREACHABLE, "HTTP 429"},
        {302, "", BS_REGISTRY_UNREACHABLE, "redirect"},
        {422, "{\"error_code\":42201,\"message\":\"bad id\"}",
         BS_REGISTRY_BAD, "bad id"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        r = (void *)1;
        errstr[0] = '\0';
        bs_registry_result got = parse(cases[i].status, cases[i].body, &r,
                                       errstr);
        if (got != cases[i].want || !strstr(errstr, cases[i].says))
            fail_msg("case %zu (HTTP %ld %s): %s '%s', want %s saying '%s'",
                     i, cases[i].status, cases[i].body,
                     bs_registry_result_name(got), errstr,
                     bs_registry_result_name(cases[i].want), cases[i].says);
        assert_null(r);
    }
    /* Too many references. */
    json_t *refs = json_array();
    for (int i = 0; i <= BS_REGISTRY_MAX_REFS; i++)
        json_array_append_new(refs, ref("n", "s", 1));
    json_t *root = json_pack("{s:s, s:o}", "schema", "x", "references", refs);
    char *body = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    assert_int_equal(parse(200, body, &r, errstr), BS_REGISTRY_BAD);
    assert_non_null(strstr(errstr, "references; at most"));
    free(body);
    /* Past the reply bound: refused before parsing. */
    assert_int_equal(bs_registry_reply_parse(200, "{}",
                                             BS_REGISTRY_MAX_REPLY + 1, &r,
                                             errstr, sizeof errstr),
                     BS_REGISTRY_BAD);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reply_parser),
        cmocka_unit_test(test_conf_refused_with_reasons),
        cmocka_unit_test(test_each_type_comes_back),
        cmocka_unit_test(test_second_get_makes_no_request),
        cmocka_unit_test(test_unknown_id_is_not_found),
        cmocka_unit_test(test_nothing_listening_is_unreachable),
        cmocka_unit_test(test_dead_first_url_is_passed_over),
        cmocka_unit_test(test_cache_bound_evicts_least_recent),
        cmocka_unit_test(test_reference_bound_holds_at_depth),
        cmocka_unit_test(test_password_never_in_errstr),
        cmocka_unit_test(test_tls_and_basic_auth_from_config),
    };
    int failed = cmocka_run_group_tests(tests, start_registries,
                                        stop_registries);
    curl_global_cleanup();
    return failed;
}
