/*
 * secure.c -- see secure.h.
 */
#include "secure.h"
#include "files.h"
#include "kafka.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- docs/security.md's ACL table ---------------------------------------- */

const char *const H_MEETS_TXN[] = {
    "every stage", "`processing.guarantee=exactly_once`",
    "`rejected.topic` set", "`checkpoint.store=kafka`",
    "`exactly_once.method=transactions`", NULL};
const char *const H_MEETS_REPLAY[] = {
    "every stage", "`processing.guarantee=exactly_once`",
    "`rejected.topic` set", "`checkpoint.store=kafka`",
    "`exactly_once.method=replay`", NULL};
const char *const H_MEETS_LISTS[] = {
    "every stage", "`processing.guarantee=exactly_once`",
    "`rejected.topic` set", "`exactly_once.method=transactions`",
    "live blocklists", NULL};
const char *const H_MEETS_BLOCKLIST_CLI[] = {"`bloomstage blocklist", NULL};
const char *const H_MEETS_INFO_CLI[] = {"`bloomstage checkpoint info`",
                                        NULL};
const char *const H_MEETS_ALL[] = {"", NULL};

/* Cell i (1-based) of a markdown table row into buf, trimmed. */
static void cell(const char *row, int i, char *buf, size_t size)
{
    const char *p = strchr(row, '|'); /* before cell 1 */
    for (int k = 1; k < i && p; k++)
        p = strchr(p + 1, '|');
    buf[0] = '\0';
    if (!p)
        return;
    p++;
    const char *end = strchr(p, '|');
    if (!end)
        end = p + strlen(p);
    while (p < end && *p == ' ')
        p++;
    while (end > p && end[-1] == ' ')
        end--;
    snprintf(buf, size, "%.*s", (int)(end - p), p);
}

/* The index of text among words (NULL-ended); the test fails, naming the
 * table's column and the row, on a word the tests do not know. */
static int word_of(const char *text, const char *const *words,
                   const char *column, const char *row)
{
    for (int i = 0; words[i]; i++)
        if (strcmp(text, words[i]) == 0)
            return i;
    h_test_fail("docs/security.md's ACL table: '%s' is not a %s the tests "
                "know: %s",
                text, column, row);
}

/* One row of the table as an ACL; fails the test on a row it cannot
 * read. */
static h_acl acl_of_row(const char *row)
{
    char res[64], name[128], pattern[32], op[32], why[256], without[32];
    cell(row, 1, why, sizeof(why));
    cell(row, 6, without, sizeof(without));
    cell(row, 2, res, sizeof(res));
    cell(row, 3, name, sizeof(name));
    cell(row, 4, pattern, sizeof(pattern));
    cell(row, 5, op, sizeof(op));
    h_acl a = {.why = NULL};
    bool prefixed = strcmp(pattern, "prefixed") == 0;
    bool group = strcmp(res, "Group") == 0 && !prefixed &&
                 strstr(name, "`consumer.group.id`");
    if (strcmp(res, "TransactionalId") == 0 && prefixed &&
        strstr(name, "`consumer.group.id`"))
        a.on = H_ACL_TXN;
    else if (group && strstr(name, "`.replay`"))
        a.on = H_ACL_GROUP_REPLAY;
    else if (group && strstr(name, "`.lists`"))
        a.on = H_ACL_GROUP_LISTS;
    else if (group && !strchr(name, '+'))
        a.on = H_ACL_GROUP;
    else if (strcmp(res, "Topic") == 0 && !prefixed &&
             strstr(name, "`input.topics`"))
        a.on = H_ACL_IN;
    else if (strcmp(res, "Topic") == 0 && !prefixed &&
             strstr(name, "`output.topic`"))
        a.on = H_ACL_OUT;
    else if (strcmp(res, "Topic") == 0 && !prefixed &&
             strstr(name, "`rejected.topic`"))
        a.on = H_ACL_REJ;
    else if (strcmp(res, "Topic") == 0 && !prefixed &&
             strstr(name, "`checkpoint.topic`"))
        a.on = H_ACL_CKPT;
    else if (strcmp(res, "Topic") == 0 && !prefixed &&
             strstr(name, "`blocklist.NAME.topic`"))
        a.on = H_ACL_LIST;
    else
        h_test_fail("docs/security.md's ACL table: a resource the tests do not "
                    "know: %s", row);
    static const char *const ops[] = {"Read", "Write", "Describe",
                                      "DescribeConfigs", NULL};
    static const rd_kafka_AclOperation_t op_codes[] = {
        RD_KAFKA_ACL_OPERATION_READ, RD_KAFKA_ACL_OPERATION_WRITE,
        RD_KAFKA_ACL_OPERATION_DESCRIBE,
        RD_KAFKA_ACL_OPERATION_DESCRIBE_CONFIGS};
    a.op = op_codes[word_of(op, ops, "operation", row)];
    /* In h_acl_without's order. */
    static const char *const withouts[] = {"exits 1", "retries", "goes on",
                                           "-", NULL};
    a.without = (h_acl_without)word_of(without, withouts, "without it", row);
    a.why = h_xstrdup(why); /* kept for the test's life */
    return a;
}

size_t h_stage_acls_for(const char *const *meets, h_acl *acls, size_t max)
{
    char *text = NULL;
    if (h_read_file(H_SECURITY_MD, &text, NULL))
        h_test_fail("docs/security.md's ACL table: %s", h_last_error());
    static const char header[] =
        "| needed for | resource | name | pattern | operation | without it |";
    char *row = strstr(text, header);
    if (!row)
        h_test_fail("docs/security.md (%s) has no ACL table: no line \"%s\"",
                    H_SECURITY_MD, header);
    size_t n = 0;
    if (!meets)
        meets = H_MEETS_TXN;
    row = strchr(row, '\n');
    while (row && row[1] == '|') {
        row++;
        char *nl = strchr(row, '\n');
        if (nl)
            *nl = '\0';
        char cond[256];
        cell(row, 1, cond, sizeof(cond));
        bool met = false;
        for (size_t i = 0; meets[i]; i++)
            met |= strncmp(cond, meets[i], strlen(meets[i])) == 0;
        if (met && strncmp(row, "| ---", 5) != 0) {
            if (n == max)
                h_test_fail("docs/security.md's ACL table: more than %zu "
                            "rows", max);
            acls[n++] = acl_of_row(row);
        }
        row = nl;
    }
    free(text);
    if (n == 0)
        h_test_fail("docs/security.md's ACL table lists nothing for the tests' "
                    "stage");
    return n;
}

size_t h_stage_acls(h_acl *acls, size_t max)
{
    return h_stage_acls_for(H_MEETS_TXN, acls, max);
}

/* ---- DIR/secure.env ---------------------------------------------------- */

/* The value of KEY= in the cluster's secure.env (malloc'd); fails the
 * test if it is not there. */
static char *sec_env(const h_kcluster *c, const char *key)
{
    char *path = h_strdupf("%s/secure.env", h_kcluster_dir(c)), *text = NULL;
    int rc = h_read_file(path, &text, NULL);
    free(path);
    H_MUST(rc);
    size_t klen = strlen(key);
    char *val = NULL;
    for (char *l = text; l && *l && !val;) {
        char *nl = strchr(l, '\n');
        if (nl)
            *nl = '\0';
        if (!strncmp(l, key, klen) && l[klen] == '=')
            val = h_xstrdup(l + klen + 1);
        l = nl ? nl + 1 : NULL;
    }
    free(text);
    if (!val)
        h_test_fail("%s/secure.env has no %s", h_kcluster_dir(c), key);
    return val;
}

char *h_sec_password(const h_kcluster *c, const char *user)
{
    char *key = h_strdupf("KAFKA_PASSWORD_FILE_%s", user);
    char *path = sec_env(c, key), *text = NULL;
    int rc = h_read_file(path, &text, NULL);
    free(key);
    free(path);
    H_MUST(rc);
    text[strcspn(text, "\r\n")] = '\0';
    return text;
}

/* ---- the cluster ------------------------------------------------------- */

/* The layer's clients for c's bootstrap list are admin over SASL_SSL with
 * SCRAM-SHA-512 (until h_kcluster_stop). */
static void admin_clients(h_kcluster *c)
{
    char *ca = sec_env(c, "KAFKA_CA"), *pw = h_sec_password(c, "admin");
    char *kca = h_strdupf("ssl.ca.location=%s", ca);
    char *kpw = h_strdupf("sasl.password=%s", pw);
    const char *const kv[] = {"security.protocol=SASL_SSL",
                              "sasl.mechanisms=SCRAM-SHA-512",
                              "sasl.username=admin", kpw, kca, NULL};
    h_kafka_conf_for(h_kcluster_bootstraps(c), kv);
    free(kca);
    free(kpw);
    free(ca);
    free(pw);
}

static const char *const SECURE[] = {"--secure", NULL};

int h_sec_start(h_kcluster **out)
{
    if (h_kcluster_start_args(1, SECURE, out))
        return -1;
    admin_clients(*out);
    return 0;
}

int h_sec_group_setup(void **state)
{
    (void)state;
    if (h_kgroup_setup_args(1, SECURE))
        return -1;
    admin_clients(h_kgroup_cluster());
    return 0;
}

/* ---- a stage's settings ------------------------------------------------ */

const char *h_sec_bootstrap(const h_kcluster *c, h_sec_auth auth)
{
    static char buf[256];
    char *bs = sec_env(c, auth == H_SEC_MTLS ? "KAFKA_SSL_BOOTSTRAP"
                                             : "KAFKA_SASL_SSL_BOOTSTRAP");
    snprintf(buf, sizeof(buf), "%s", bs);
    free(bs);
    return buf;
}

char *h_sec_stage_settings(const h_kcluster *c, h_sec_auth auth,
                           h_sec_flaw flaw)
{
    char *ca = sec_env(c, "KAFKA_CA"), *text;
    if (auth == H_SEC_MTLS) {
        const char *which = flaw == H_SEC_EXPIRED_CERT ? "stage_expired"
                            : flaw == H_SEC_OTHER_CA   ? "stage_other_ca"
                                                       : "stage";
        char *kc = h_strdupf("KAFKA_CERT_%s", which);
        char *kk = h_strdupf("KAFKA_KEY_%s", which);
        char *cert = sec_env(c, kc), *key = sec_env(c, kk);
        text = h_strdupf("kafka.security.protocol=SSL\n"
                         "kafka.ssl.ca.location=%s\n"
                         "kafka.ssl.certificate.location=%s\n"
                         "kafka.ssl.key.location=%s\n", ca, cert, key);
        free(kc);
        free(kk);
        free(cert);
        free(key);
    } else {
        char *pw = h_sec_password(c, "stage");
        text = h_strdupf("kafka.security.protocol=SASL_SSL\n"
                         "kafka.sasl.mechanisms=%s\n"
                         "kafka.sasl.username=stage\n"
                         "kafka.sasl.password=%s%s\n"
                         "kafka.ssl.ca.location=%s\n",
                         auth == H_SEC_PLAIN ? "PLAIN" : "SCRAM-SHA-512",
                         flaw == H_SEC_WRONG_PASSWORD ? "not-" : "", pw, ca);
        free(pw);
    }
    free(ca);
    return text;
}

/* librdkafka's first error of a client, for h_sec_try_metadata. */
typedef struct first_error {
    char text[512];
} first_error;

static void first_error_cb(rd_kafka_t *rk, int err, const char *reason,
                           void *opaque)
{
    (void)rk;
    first_error *f = opaque;
    if (!f->text[0])
        snprintf(f->text, sizeof(f->text), "%s: %s",
                 rd_kafka_err2name((rd_kafka_resp_err_t)err), reason);
}

/* h_sec_try_metadata's answer from a metadata request's outcome (md, if
 * any, destroyed here). */
static int metadata_verdict(rd_kafka_resp_err_t err,
                            const struct rd_kafka_metadata *md,
                            const char *first, const char *topic, char *buf,
                            size_t size)
{
    if (err) {
        snprintf(buf, size, "%s (%s)", rd_kafka_err2name(err),
                 first[0] ? first : "no error reported");
        return 1;
    }
    int rc = md->topic_cnt != 1 || md->topics[0].err ? 1 : 0;
    if (rc)
        snprintf(buf, size, "topic %s: %s", topic,
                 md->topic_cnt ? rd_kafka_err2name(md->topics[0].err)
                               : "not in the metadata");
    rd_kafka_metadata_destroy(md);
    return rc;
}

int h_sec_try_metadata(const h_kcluster *c, h_sec_auth auth, h_sec_flaw flaw,
                       const char *topic, char *buf, size_t size)
{
    rd_kafka_conf_t *conf = h_kafka_conf(h_sec_bootstrap(c, auth));
    char *text = h_sec_stage_settings(c, auth, flaw), *save = NULL;
    int rc = 0;
    /* The stage's lines without their "kafka." prefix. */
    for (char *l = strtok_r(text, "\n", &save); l && rc == 0;
         l = strtok_r(NULL, "\n", &save)) {
        const char *kv[] = {l + strlen("kafka."), NULL};
        rc = h_conf_kv(conf, kv);
    }
    free(text);
    if (rc) {
        rd_kafka_conf_destroy(conf);
        return -1;
    }
    first_error f = {""};
    rd_kafka_conf_set_error_cb(conf, first_error_cb);
    rd_kafka_conf_set_opaque(conf, &f);
    char errstr[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr,
                                  sizeof(errstr));
    if (!rk) {
        rd_kafka_conf_destroy(conf);
        return h_fail("rd_kafka_new: %s", errstr);
    }
    rd_kafka_topic_t *t = rd_kafka_topic_new(rk, topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 0, t, &md, 5000);
    rd_kafka_poll(rk, 0); /* serves the error callback */
    rd_kafka_topic_destroy(t);
    rc = metadata_verdict(err, md, f.text, topic, buf, size);
    rd_kafka_destroy(rk);
    return rc;
}

/* ---- ACLs -------------------------------------------------------------- */

/* The name of resource `on` of e (in buf where it is made): a topic, a
 * group, or the transactional ids' prefix. */
static const char *resource_name(const h_kenv *e, h_acl_on on, char *buf,
                                 size_t size)
{
    switch (on) {
    case H_ACL_IN:
        return e->in;
    case H_ACL_OUT:
        return e->out;
    case H_ACL_REJ:
        return e->rej;
    case H_ACL_CKPT:
        return e->ckt;
    case H_ACL_LIST:
        return e->lst;
    case H_ACL_GROUP:
        return e->group;
    case H_ACL_GROUP_REPLAY:
    case H_ACL_GROUP_LISTS:
        snprintf(buf, size, "%s.%s", e->group,
                 on == H_ACL_GROUP_REPLAY ? "replay" : "lists");
        return buf;
    case H_ACL_TXN:
        break;
    }
    snprintf(buf, size, "bloomstage-%s-", e->group);
    return buf;
}

static bool is_group(h_acl_on on)
{
    return on == H_ACL_GROUP || on == H_ACL_GROUP_REPLAY ||
           on == H_ACL_GROUP_LISTS;
}

static const char *op_name(rd_kafka_AclOperation_t op)
{
    switch (op) {
    case RD_KAFKA_ACL_OPERATION_READ:
        return "Read";
    case RD_KAFKA_ACL_OPERATION_WRITE:
        return "Write";
    case RD_KAFKA_ACL_OPERATION_CREATE:
        return "Create";
    case RD_KAFKA_ACL_OPERATION_DESCRIBE:
        return "Describe";
    case RD_KAFKA_ACL_OPERATION_DESCRIBE_CONFIGS:
        return "DescribeConfigs";
    case RD_KAFKA_ACL_OPERATION_IDEMPOTENT_WRITE:
        return "IdempotentWrite";
    default:
        return "Unknown";
    }
}

bool h_acl_same(const h_acl *a, const h_acl *b)
{
    return a->on == b->on && a->op == b->op && !strcmp(a->why, b->why);
}

void h_acl_refusal(const h_kenv *e, const h_acl *a, char *buf, size_t size)
{
    char name[128];
    snprintf(buf, size, "%s on %s:%s", op_name(a->op),
             is_group(a->on)      ? "Group"
             : a->on == H_ACL_TXN ? "TransactionalId"
                                  : "Topic",
             resource_name(e, a->on, name, sizeof(name)));
}

/* CreateAcls (add) or DeleteAcls of b[0..n), sent as admin; the result
 * checked. */
static int acl_request(h_kcluster *c, rd_kafka_AclBinding_t **b, size_t n,
                       bool add)
{
    const char *what = add ? "CreateAcls" : "DeleteAcls";
    rd_kafka_t *rk = h_query_client(h_kafka_conf(h_kcluster_bootstraps(c)));
    if (!rk)
        return -1;
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    if (add)
        rd_kafka_CreateAcls(rk, b, n, NULL, q);
    else
        rd_kafka_DeleteAcls(rk, b, n, NULL, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, H_CMD_MS);
    int rc = 0;
    size_t nr = 0;
    if (!ev)
        rc = h_fail("%s: no answer within %d ms", what, H_CMD_MS);
    else if (rd_kafka_event_error(ev))
        rc = h_fail("%s: %s", what, rd_kafka_event_error_string(ev));
    else if (add) {
        const rd_kafka_acl_result_t **r = rd_kafka_CreateAcls_result_acls(
            rd_kafka_event_CreateAcls_result(ev), &nr);
        for (size_t i = 0; i < nr && rc == 0; i++)
            if (rd_kafka_acl_result_error(r[i]))
                rc = h_fail("%s: %s", what, rd_kafka_error_string(
                                rd_kafka_acl_result_error(r[i])));
    } else {
        const rd_kafka_DeleteAcls_result_response_t **r =
            rd_kafka_DeleteAcls_result_responses(
                rd_kafka_event_DeleteAcls_result(ev), &nr);
        for (size_t i = 0; i < nr && rc == 0; i++)
            if (rd_kafka_DeleteAcls_result_response_error(r[i]))
                rc = h_fail("%s: %s", what,
                            rd_kafka_error_string(
                                rd_kafka_DeleteAcls_result_response_error(
                                    r[i])));
    }
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
    rd_kafka_destroy(rk);
    return rc;
}

/* The topic and group ACLs of a[0..n), by one request. */
static int acls_admin(h_kcluster *c, const char *principal,
                      const h_acl_for *a, size_t n, bool add)
{
    rd_kafka_AclBinding_t **b = h_xcalloc(n ? n : 1, sizeof(*b));
    size_t nb = 0;
    char err[256], name[128];
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (a[i].acl.on == H_ACL_TXN)
            continue;
        const char *rname = resource_name(a[i].e, a[i].acl.on, name,
                                          sizeof(name));
        b[nb] = (add ? rd_kafka_AclBinding_new
                     : rd_kafka_AclBindingFilter_new)(
            is_group(a[i].acl.on) ? RD_KAFKA_RESOURCE_GROUP
                                  : RD_KAFKA_RESOURCE_TOPIC,
            rname, RD_KAFKA_RESOURCE_PATTERN_LITERAL, principal, "*",
            a[i].acl.op, RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW, err,
            sizeof(err));
        if (!b[nb])
            rc = h_fail("ACL binding %s %s: %s", rname,
                        op_name(a[i].acl.op), err);
        else
            nb++;
    }
    if (rc == 0 && nb)
        rc = acl_request(c, b, nb, add);
    rd_kafka_AclBinding_destroy_array(b, nb);
    free(b);
    return rc;
}

/* The transactional-id ACLs of a[0..n) (prefixed) by kafka-acls as admin
 * (`scripts/kafka tool acls`), one run per operation naming every id of
 * it. */
static int acls_txn(h_kcluster *c, const char *principal, const h_acl_for *a,
                    size_t n, bool add)
{
    static const rd_kafka_AclOperation_t ops[] = {
        RD_KAFKA_ACL_OPERATION_READ, RD_KAFKA_ACL_OPERATION_WRITE,
        RD_KAFKA_ACL_OPERATION_DESCRIBE};
    int rc = 0;
    for (size_t o = 0; o < sizeof(ops) / sizeof(*ops) && rc == 0; o++) {
        const char **argv = h_xcalloc(2 * n + 16, sizeof(*argv));
        char (*names)[128] = h_xcalloc(n ? n : 1, sizeof(*names));
        size_t k = 0, ids = 0;
        argv[k++] = "tool";
        argv[k++] = "acls";
        argv[k++] = add ? "--add" : "--remove";
        if (!add)
            argv[k++] = "--force";
        argv[k++] = "--allow-principal";
        argv[k++] = principal;
        argv[k++] = "--operation";
        argv[k++] = op_name(ops[o]);
        argv[k++] = "--resource-pattern-type";
        argv[k++] = "prefixed";
        for (size_t i = 0; i < n; i++)
            if (a[i].acl.on == H_ACL_TXN && a[i].acl.op == ops[o]) {
                argv[k++] = "--transactional-id";
                argv[k++] = resource_name(a[i].e, H_ACL_TXN, names[ids],
                                          sizeof(names[ids]));
                ids++;
            }
        argv[k] = NULL;
        if (ids && h_kcluster_run(c, argv, H_CMD_MS, NULL))
            rc = -1;
        free(names);
        free(argv);
    }
    return rc;
}

/* Waits (up to 20 s) until the node's authorizer has applied every ACL
 * change made before: a change reaches it through the metadata log a
 * moment after the request returns, in order.  So one more change is
 * made, Describe for H_SEC_STAGE_PRINCIPAL on a topic that does not
 * exist (H_SEC_SETTLE_TOPIC-N), and waited for: the stage's metadata
 * request says "unknown topic" rather than "not authorized" once it
 * applies; then it is removed. */
static int acls_settle(h_kcluster *c)
{
    static unsigned seq;
    char topic[64], err[256], why[1024];
    snprintf(topic, sizeof(topic), H_SEC_SETTLE_TOPIC "-%u", seq++);
    rd_kafka_AclBinding_t *b = rd_kafka_AclBinding_new(
        RD_KAFKA_RESOURCE_TOPIC, topic, RD_KAFKA_RESOURCE_PATTERN_LITERAL,
        H_SEC_STAGE_PRINCIPAL, "*", RD_KAFKA_ACL_OPERATION_DESCRIBE,
        RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW, err, sizeof(err));
    if (!b)
        return h_fail("ACL binding %s: %s", topic, err);
    int rc = acl_request(c, &b, 1, true);
    for (int64_t end = h_now_ms() + 20000; rc == 0;) {
        int r = h_sec_try_metadata(c, H_SEC_SCRAM, H_SEC_SOUND, topic, why,
                                   sizeof(why));
        if (r < 0)
            rc = -1;
        else if (r == 1 && strstr(why, "UNKNOWN_TOPIC"))
            break;
        else if (h_now_ms() > end)
            rc = h_fail("ACLs not applied within 20 s: Describe on %s: %s",
                        topic, r ? why : "the topic exists");
        else
            h_nap(100);
    }
    if (rc == 0)
        rc = acl_request(c, &b, 1, false);
    rd_kafka_AclBinding_destroy(b);
    return rc;
}

int h_acls_apply(h_kcluster *c, const char *principal, const h_acl_for *a,
                 size_t n, bool add)
{
    if (acls_admin(c, principal, a, n, add) ||
        acls_txn(c, principal, a, n, add))
        return -1;
    return acls_settle(c);
}

/* acls[0..n) on e's resources, as h_acls_apply's list. */
static int acls_change(h_kcluster *c, const h_kenv *e, const char *principal,
                       const h_acl *acls, size_t n, bool add)
{
    h_acl_for *a = h_xcalloc(n ? n : 1, sizeof(*a));
    for (size_t i = 0; i < n; i++)
        a[i] = (h_acl_for){e, acls[i]};
    int rc = h_acls_apply(c, principal, a, n, add);
    free(a);
    return rc;
}

int h_acls_grant(h_kcluster *c, const h_kenv *e, const char *principal,
                 const h_acl *acls, size_t n)
{
    return acls_change(c, e, principal, acls, n, true);
}

int h_acls_revoke(h_kcluster *c, const h_kenv *e, const char *principal,
                  const h_acl *acls, size_t n)
{
    return acls_change(c, e, principal, acls, n, false);
}

/* ---- what the authorizer denied ---------------------------------------- */

size_t h_sec_denied(const h_kcluster *c, size_t from, size_t *end, char *buf,
                    size_t size)
{
    char *path = h_strdupf("%s/node1/server.log", h_kcluster_dir(c));
    char *log = NULL;
    size_t len = 0, used = 0, n = 0;
    int rc = h_read_file(path, &log, &len);
    free(path);
    H_MUST(rc);
    if (buf && size)
        buf[0] = '\0';
    static const char needle[] = "Principal = " H_SEC_STAGE_PRINCIPAL
                                 " is Denied";
    for (const char *s = log + (from < len ? from : len);
         (s = strstr(s, needle)); s++) {
        int l = (int)strcspn(s, "\n");
        static const char settle[] = "Topic:LITERAL:" H_SEC_SETTLE_TOPIC;
        if (memmem(s, (size_t)l, settle, strlen(settle)))
            continue; /* acls_settle's, not the stage's */
        n++;
        if (buf && used + (size_t)l + 2 < size)
            used += (size_t)snprintf(buf + used, size - used, "%.*s\n", l, s);
    }
    free(log);
    if (end)
        *end = len;
    return n;
}

/* ---- a test's environment ---------------------------------------------- */

/* chmod 0600 of path, or the test fails. */
static void private_file(const char *path)
{
    if (chmod(path, 0600))
        h_test_fail("chmod 0600 %s failed", path);
}

h_kenv *h_sec_kenv_new(h_kcluster *c, const char *name, h_sec_auth auth,
                       const h_kenv_opts *o, const char *const *meets)
{
    char *sec = h_sec_stage_settings(c, auth, H_SEC_SOUND);
    char *extra = h_strdupf("%smetrics.listen=127.0.0.1:0\n%s", sec,
                            o->extra ? o->extra : "");
    h_kenv_opts so = *o;
    so.extra = extra;
    so.bootstraps = h_sec_bootstrap(c, auth);
    h_kenv *e = h_kenv_new(c, name, &so);
    free(sec);
    free(extra);
    private_file(e->conf);
    if (meets && !meets[0])
        return e;
    h_acl acls[32];
    size_t nacls = h_stage_acls_for(meets, acls, 32);
    H_MUST(h_acls_grant(c, e, H_SEC_STAGE_PRINCIPAL, acls, nacls));
    return e;
}

char *h_sec_kenv_conf(h_kcluster *c, const h_kenv *e, h_sec_auth auth,
                      h_sec_flaw flaw, const char *name)
{
    char *base = NULL;
    H_MUST(h_read_file(e->conf, &base, NULL));
    char *sec = h_sec_stage_settings(c, auth, flaw);
    char *text = h_strdupf("%skafka.bootstrap.servers=%s\n%s", base,
                           h_sec_bootstrap(c, auth), sec);
    char *conf = h_strdupf("%s/%s.conf", e->h.dir, name);
    /* Made 0600 before the password goes in. */
    H_MUST(h_write_file(conf, ""));
    private_file(conf);
    H_MUST(h_write_file(conf, text));
    free(base);
    free(sec);
    free(text);
    return conf;
}
