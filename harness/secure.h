/*
 * secure.h -- a secured real Apache Kafka for the `security`-labelled C
 * tests: one KRaft node started by `scripts/kafka start --secure`
 * (SASL_SSL with SCRAM-SHA-512 and PLAIN, SSL with client certificates,
 * KRaft's StandardAuthorizer denying what no ACL allows; its DIR/
 * secure.env says where the CA, certificates and password files are).
 *
 * Every client the layer makes for the cluster's bootstrap list
 * (h_kafka_conf) is the super user admin over SASL_SSL, so the layer's
 * helpers (topics, feeding, reading at read_committed, committed offsets,
 * h_kenv_*) work on it unchanged.  A stage is given the settings of the
 * user `stage` by one means (h_sec_stage_settings) and exactly the ACLs
 * docs/security.md lists (h_stage_acls), granted and revoked as admin
 * (h_acls_grant).
 * Conventions: core.h.
 */
#ifndef BS_SUPPORT_SECURE_H
#define BS_SUPPORT_SECURE_H

#include "core.h"
#include "realkafka.h"

#include <librdkafka/rdkafka.h>

#include <stddef.h>

/* How a stage authenticates. */
typedef enum h_sec_auth {
    H_SEC_SCRAM, /* SASL_SSL, SCRAM-SHA-512, user stage */
    H_SEC_PLAIN, /* SASL_SSL, PLAIN, user stage */
    H_SEC_MTLS,  /* SSL with stage's client certificate (User:stage) */
} h_sec_auth;

/* What is wrong with its credentials. */
typedef enum h_sec_flaw {
    H_SEC_SOUND,          /* nothing */
    H_SEC_WRONG_PASSWORD, /* SASL: a password that is not stage's */
    H_SEC_EXPIRED_CERT,   /* mTLS: stage's certificate that expired */
    H_SEC_OTHER_CA,       /* mTLS: stage's certificate from another CA */
} h_sec_flaw;

/* The principal a stage is (ACLs name it). */
#define H_SEC_STAGE_PRINCIPAL "User:stage"
/* The topics (never created) whose ACLs h_acls_grant and h_acls_revoke
 * use to wait until a change applies: "h-sec-settled-N".  h_sec_denied
 * does not count their denials. */
#define H_SEC_SETTLE_TOPIC "h-sec-settled"

/* `scripts/kafka start --secure` of one node (h_kcluster_start_args);
 * the layer's clients for its bootstrap list are admin from then on
 * (h_kcluster_stop ends that). */
int h_sec_start(h_kcluster **out) H_WARN_UNUSED;
/* cmocka group setup of a test file on one secured node: h_kgroup_setup_
 * args, then admin's clients; h_kgroup_cluster() is the node,
 * h_kgroup_teardown stops it. */
int h_sec_group_setup(void **state);

/* The bootstrap list of the listener a stage authenticating by `auth`
 * reaches (SASL_SSL or SSL); a static buffer. */
const char *h_sec_bootstrap(const h_kcluster *c, h_sec_auth auth);
/* The password of user (admin, stage) on c: its password file's first
 * line, malloc'd. */
char *h_sec_password(const h_kcluster *c, const char *user);

/* The stage's configuration lines for auth with flaw ("kafka.security.
 * protocol=...\n" and the rest; without kafka.bootstrap.servers): the
 * caller frees them.  Fails the test if secure.env lacks something. */
char *h_sec_stage_settings(const h_kcluster *c, h_sec_auth auth,
                           h_sec_flaw flaw);

/* Whether a client with the stage's settings for auth and flaw gets the
 * metadata of topic (a librdkafka producer handle, one request of up to
 * 5 s): 0 it does, and the topic is there; 1 the broker refused the
 * client or the topic -- why (librdkafka's first error, or the topic's
 * error) in buf; -1 something else (h_last_error). */
int h_sec_try_metadata(const h_kcluster *c, h_sec_auth auth, h_sec_flaw flaw,
                       const char *topic, char *buf,
                       size_t size) H_WARN_UNUSED;

/* What the node's authorizer logged as denied to User:stage from byte
 * `from` of its log on: how many lines (the first few into buf, which may
 * be NULL); *end (if not NULL) is the log's size, the `from` of a later
 * call. */
size_t h_sec_denied(const h_kcluster *c, size_t from, size_t *end, char *buf,
                    size_t size);

/* ---- the ACLs a stage needs ------------------------------------------- */

/* Which of a test environment's resources an ACL is on. */
typedef enum h_acl_on {
    H_ACL_IN,    /* e->in, literal */
    H_ACL_OUT,   /* e->out, literal */
    H_ACL_REJ,   /* e->rej, literal */
    H_ACL_CKPT,  /* e->ckt, literal (checkpoint.store=kafka) */
    H_ACL_GROUP, /* the consumer group e->group, literal */
    H_ACL_TXN,   /* transactional ids "bloomstage-GROUP-", prefixed (the
                  * stage's default exactly_once.transactional.id) */
    H_ACL_LIST,  /* e->lst, literal (live blocklist x's topic) */
    H_ACL_GROUP_REPLAY, /* the group "GROUP.replay", literal */
    H_ACL_GROUP_LISTS,  /* the group "GROUP.lists", literal */
} h_acl_on;

/* What the stage does without an ACL: docs/security.md's "without it" cell. */
typedef enum h_acl_without {
    H_WITHOUT_EXITS,   /* "exits 1": held at start-up, then exit 1 */
    H_WITHOUT_RETRIES, /* "retries": rounds fail until it is granted */
    H_WITHOUT_GOES_ON, /* "goes on": works; the broker logs denials */
    H_WITHOUT_UNTRIED, /* "-": no test leaves it out (a CLI's row, or a
                        * configuration test_acl_missing does not run) */
} h_acl_without;

typedef struct h_acl {
    h_acl_on on;
    rd_kafka_AclOperation_t op;
    const char *why; /* what of the stage's needs it */
    h_acl_without without; /* the table's "without it" */
} h_acl;

/* docs/security.md's conditions (the "needed for" cells' beginnings) that a
 * test's stage or command meets, for h_stage_acls_for: a stage with
 * exactly_once.method=transactions, a rejected topic and
 * checkpoint.store=kafka; the same with exactly_once.method=replay; one
 * with transactions, a rejected topic and a live blocklist (the directory
 * store); `bloomstage blocklist`; `bloomstage checkpoint info` on the
 * Kafka store; and every row of the table. */
extern const char *const H_MEETS_TXN[];
extern const char *const H_MEETS_REPLAY[];
extern const char *const H_MEETS_LISTS[];
extern const char *const H_MEETS_BLOCKLIST_CLI[];
extern const char *const H_MEETS_INFO_CLI[];
extern const char *const H_MEETS_ALL[];

/* The ACLs docs/security.md's table ("ACLs the stage's principal needs") lists
 * for what a test runs: every row whose condition (the "needed for" cell)
 * begins with one of meets[] (NULL-terminated, e.g. "every stage",
 * "`checkpoint.store=kafka`"; NULL: h_stage_acls's), parsed into
 * acls[0..max); returns how many.  docs/security.md is the one list: a row the
 * parser does not know (a resource, a name, an operation, or what the
 * stage does without it) fails the test, naming it, as does a table not
 * found or nothing listed. */
size_t h_stage_acls_for(const char *const *meets, h_acl *acls, size_t max);
/* h_stage_acls_for(H_MEETS_TXN). */
size_t h_stage_acls(h_acl *acls, size_t max);

/* Allows or removes acls[0..n) for principal on e's resources on cluster
 * c, as admin: h_acls_apply. */
int h_acls_grant(h_kcluster *c, const h_kenv *e, const char *principal,
                 const h_acl *acls, size_t n) H_WARN_UNUSED;
int h_acls_revoke(h_kcluster *c, const h_kenv *e, const char *principal,
                  const h_acl *acls, size_t n) H_WARN_UNUSED;

/* Whether a and b are one row of the table (resource, operation and
 * "needed for" cell). */
bool h_acl_same(const h_acl *a, const h_acl *b);
/* What the stage says when a's ACL on e's resources is missing, into
 * buf: "Write on Topic:NAME" (a transactional id's prefix: the stage's id
 * starts with it). */
void h_acl_refusal(const h_kenv *e, const h_acl *a, char *buf, size_t size);

/* One ACL on one environment's resources, for changes that span several
 * environments (cases run side by side) in one go. */
typedef struct h_acl_for {
    const h_kenv *e;
    h_acl acl;
} h_acl_for;
/* Allows (add) or removes every a[0..n) for principal on cluster c, as
 * admin: the topic and group ACLs by one Admin API request (CreateAcls,
 * DeleteAcls), the transactional-id ones by one kafka-acls run per
 * operation (`scripts/kafka tool acls`: librdkafka 2.0.2's Admin API has
 * no TransactionalId resource type); then waits (up to 20 s) until the
 * broker's authorizer applies the change. */
int h_acls_apply(h_kcluster *c, const char *principal, const h_acl_for *a,
                 size_t n, bool add) H_WARN_UNUSED;

/* ---- a test's environment on the secured node ------------------------- */

/* h_kenv_new on cluster c with o (its extra lines after the stage's
 * settings for auth; its bootstraps those of auth's listener, metrics on
 * a free loopback port), the configuration kept 0600 (it holds a
 * password), and the ACLs h_stage_acls_for(meets) granted to
 * H_SEC_STAGE_PRINCIPAL (meets {NULL}: none). */
h_kenv *h_sec_kenv_new(h_kcluster *c, const char *name, h_sec_auth auth,
                       const h_kenv_opts *o, const char *const *meets);
/* e's configuration as the stage reaching c by auth with flaw: e->conf
 * with that listener and those settings after it (a later line wins),
 * written 0600 to DIR/NAME.conf; its path (the caller frees it). */
char *h_sec_kenv_conf(h_kcluster *c, const h_kenv *e, h_sec_auth auth,
                      h_sec_flaw flaw, const char *name);

#endif
