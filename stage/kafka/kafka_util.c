/*
 * kafka_util.c -- see kafka_util.h.
 */
#include "kafka/kafka_util.h"
#include "base/timeouts.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

typedef struct conf_ctx {
    rd_kafka_conf_t *conf;
    char *errstr;
    size_t errstr_size;
    const char *prefix;
} conf_ctx;

static int conf_set_cb(const char *key, const char *value, void *opaque)
{
    conf_ctx *c = opaque;
    char err[BS_ERRSTR_SIZE];
    if (rd_kafka_conf_set(c->conf, key, value, err, sizeof(err)) !=
        RD_KAFKA_CONF_OK) {
        snprintf(c->errstr, c->errstr_size, "%s%s: %s", c->prefix, key, err);
        return -1;
    }
    return 0;
}

rd_kafka_conf_t *bs_kafka_conf_new(const bs_config *cfg, const char *role,
                                   const char *const *defaults,
                                   const char *const *forced, char *errstr,
                                   size_t errstr_size)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    conf_ctx c = {conf, errstr, errstr_size, ""};
    char prefix[32];
    for (size_t i = 0; defaults[i]; i += 2)
        if (conf_set_cb(defaults[i], defaults[i + 1], &c))
            goto fail;
    c.prefix = "kafka.";
    if (bs_config_foreach(cfg, "kafka.", conf_set_cb, &c))
        goto fail;
    snprintf(prefix, sizeof(prefix), "%s.", role);
    c.prefix = prefix;
    if (bs_config_foreach(cfg, prefix, conf_set_cb, &c))
        goto fail;
    c.prefix = "";
    for (size_t i = 0; forced[i]; i += 2)
        if (conf_set_cb(forced[i], forced[i + 1], &c))
            goto fail;
    return conf;
fail:
    rd_kafka_conf_destroy(conf);
    return NULL;
}

rd_kafka_conf_t *bs_kafka_reader_conf(const bs_config *cfg,
                                      const char *group_id,
                                      const char *client_id, char *errstr,
                                      size_t errstr_size)
{
    /* It reads to a known end: a fetch that waits for more data only adds
     * latency to a restore. */
    const char *const defaults[] = {"client.id", client_id,
                                    "fetch.wait.max.ms", "10", NULL};
    char group[300];
    snprintf(group, sizeof(group), "%s.replay", group_id);
    const char *const forced[] = {"enable.auto.commit", "false",
                                  "enable.auto.offset.store", "false",
                                  "enable.partition.eof", "true",
                                  "isolation.level", "read_committed",
                                  "group.id", group, NULL};
    rd_kafka_conf_t *conf = bs_kafka_conf_new(cfg, "consumer", defaults,
                                              forced, errstr, errstr_size);
    if (conf)
        bs_kafka_conf_no_auto_create(conf);
    return conf;
}

void bs_kafka_conf_no_auto_create(rd_kafka_conf_t *conf)
{
    char v[8];
    size_t n = sizeof(v);
    if (rd_kafka_conf_get(conf, "allow.auto.create.topics", v, &n) ==
            RD_KAFKA_CONF_OK &&
        strcmp(v, "false") != 0)
        (void)rd_kafka_conf_set(conf, "allow.auto.create.topics", "false",
                                NULL, 0);
}

int bs_topic_partitions(rd_kafka_t *rk, const char *topic, int timeout_ms,
                        int *err_out, char *errstr, size_t errstr_size)
{
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t err =
        rkt ? rd_kafka_metadata(rk, 0, rkt, &md, timeout_ms)
            : RD_KAFKA_RESP_ERR__INVALID_ARG;
    int n = -1;
    char ignored[8];
    if (!errstr) { /* the caller only wants the count, or 0 */
        errstr = ignored;
        errstr_size = sizeof(ignored);
    }
    if (err)
        snprintf(errstr, errstr_size, "metadata of %s: %s", topic,
                 rd_kafka_err2str(err));
    else if (md->topic_cnt != 1 || md->topics[0].err)
        snprintf(errstr, errstr_size, "topic %s: %s", topic,
                 md->topic_cnt ? rd_kafka_err2str(md->topics[0].err)
                               : "not in the metadata");
    else if (md->topics[0].partition_cnt <= 0)
        snprintf(errstr, errstr_size, "topic %s has no partitions", topic);
    else
        n = md->topics[0].partition_cnt;
    if (err_out)
        *err_out = err ? (int)err
                   : md && md->topic_cnt == 1 ? (int)md->topics[0].err
                                              : 0;
    if (md)
        rd_kafka_metadata_destroy(md);
    if (rkt)
        rd_kafka_topic_destroy(rkt);
    return n;
}

bool bs_kafka_refused(int err)
{
    return err == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED ||
           err == RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED ||
           err == RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED ||
           err == RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED;
}

bool bs_refusal_text(int err, const char *op, const char *name, char *buf,
                     size_t size)
{
    const char *type;
    switch (err) {
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
        type = "Topic";
        break;
    case RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED:
        type = "Group";
        break;
    case RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
        type = "TransactionalId";
        break;
    case RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED:
        type = "Cluster";
        op = "IdempotentWrite";
        name = "kafka-cluster";
        break;
    default:
        return false;
    }
    snprintf(buf, size, "%s on %s:%s", op, type, name ? name : "?");
    return true;
}

const char *bs_kafka_principal(const bs_config *cfg, char *buf, size_t size)
{
    if (!cfg)
        return NULL;
    const char *proto = bs_config_get_str(cfg, "kafka.security.protocol");
    const char *user = bs_config_get_str(cfg, "kafka.sasl.username");
    if (!proto || strncasecmp(proto, "SASL_", 5) != 0 || !user || !*user)
        return NULL;
    snprintf(buf, size, "User:%s", user);
    return buf;
}

bool bs_refusal_message(const bs_config *cfg, int err, const char *op,
                        const char *name, char *buf, size_t size)
{
    char what[300], who[200];
    if (!bs_refusal_text(err, op, name, what, sizeof(what)))
        return false;
    const char *p = bs_kafka_principal(cfg, who, sizeof(who));
    snprintf(buf, size, "not authorized: %s refused%s%s (%s): grant that ACL "
             "(docs/security.md, \"ACLs the stage's principal needs\")",
             what, p ? " to " : "", p ? p : "",
             rd_kafka_err2name((rd_kafka_resp_err_t)err));
    return true;
}

int bs_topic_refused(const bs_config *cfg, rd_kafka_t *rk, const char *topic,
                     int timeout_ms)
{
    const char *proto = cfg ? bs_config_get_str(cfg, "kafka.security.protocol")
                            : NULL;
    if (!proto || (strncasecmp(proto, "SASL_", 5) != 0 &&
                   strcasecmp(proto, "SSL") != 0))
        return 0;
    int err = 0;
    (void)bs_topic_partitions(rk, topic, timeout_ms, &err, NULL, 0);
    return bs_kafka_refused(err) ? err : 0;
}

int bs_topic_lookup(rd_kafka_t *rk, const char *topic, int timeout_ms,
                    int32_t *leader0, char *errstr, size_t errstr_size)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 1, NULL, &md, timeout_ms);
    if (err) {
        snprintf(errstr, errstr_size, "metadata: %s", rd_kafka_err2str(err));
        return -1;
    }
    int n = -1;
    for (int i = 0; i < md->topic_cnt; i++) {
        const rd_kafka_metadata_topic_t *t = &md->topics[i];
        if (strcmp(t->topic, topic) != 0)
            continue;
        if (t->err)
            snprintf(errstr, errstr_size, "topic %s: %s", topic,
                     rd_kafka_err2str(t->err));
        else if (t->partition_cnt <= 0)
            snprintf(errstr, errstr_size, "topic %s has no partitions",
                     topic);
        else
            n = t->partition_cnt;
        if (n > 0 && leader0)
            for (int p = 0; p < t->partition_cnt; p++)
                if (t->partitions[p].id == 0)
                    *leader0 = t->partitions[p].leader;
        break;
    }
    if (n < 0 && !errstr[0])
        snprintf(errstr, errstr_size, "topic %s does not exist", topic);
    rd_kafka_metadata_destroy(md);
    return n;
}


int bs_topic_config(rd_kafka_t *rk, const char *topic, int32_t broker,
                    const char *name, char *value, size_t vsize,
                    int timeout_ms, int *refused, char *errstr,
                    size_t errstr_size)
{
    *refused = 0;
    rd_kafka_ConfigResource_t *cr =
        rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic);
    rd_kafka_AdminOptions_t *o =
        rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    int rc = -1;
    snprintf(errstr, errstr_size, "DescribeConfigs of %s: no answer within "
             "%d ms", topic, timeout_ms);
    if (!cr || !o || !q)
        goto out;
    rd_kafka_AdminOptions_set_request_timeout(o, timeout_ms, NULL, 0);
    if (broker >= 0)
        rd_kafka_AdminOptions_set_broker(o, broker, NULL, 0);
    rd_kafka_DescribeConfigs(rk, &cr, 1, o, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, timeout_ms +
                                                      BS_REPLY_GRACE_MS);
    if (!ev)
        goto out;
    rd_kafka_resp_err_t err = rd_kafka_event_error(ev);
    const rd_kafka_DescribeConfigs_result_t *res =
        rd_kafka_event_DescribeConfigs_result(ev);
    size_t n = 0;
    const rd_kafka_ConfigResource_t **rs =
        res && !err ? rd_kafka_DescribeConfigs_result_resources(res, &n)
                    : NULL;
    if (!err && n == 1)
        err = rd_kafka_ConfigResource_error(rs[0]);
    if (err == RD_KAFKA_RESP_ERR__UNSUPPORTED_FEATURE ||
        err == RD_KAFKA_RESP_ERR_UNSUPPORTED_VERSION ||
        err == RD_KAFKA_RESP_ERR_INVALID_REQUEST) {
        rc = 2;
    } else if (err || n != 1) {
        snprintf(errstr, errstr_size, "DescribeConfigs of %s: %s", topic,
                 err ? rd_kafka_err2str(err) : "no such resource");
        *refused = bs_kafka_refused(err) ? (int)err : 0;
    } else {
        size_t ne = 0;
        const rd_kafka_ConfigEntry_t **ce =
            rd_kafka_ConfigResource_configs(rs[0], &ne);
        snprintf(value, vsize, "(not described)");
        for (size_t i = 0; i < ne; i++)
            if (!strcmp(rd_kafka_ConfigEntry_name(ce[i]), name)) {
                const char *v = rd_kafka_ConfigEntry_value(ce[i]);
                snprintf(value, vsize, "%s", v ? v : "");
            }
        rc = 1;
    }
    rd_kafka_event_destroy(ev);
out:
    if (q)
        rd_kafka_queue_destroy(q);
    if (o)
        rd_kafka_AdminOptions_destroy(o);
    if (cr)
        rd_kafka_ConfigResource_destroy(cr);
    return rc;
}
