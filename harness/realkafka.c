/*
 * realkafka.c -- see realkafka.h.
 */
#include "realkafka.h"
#include "files.h"
#include "proc.h"
#include "stage.h"

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef H_KAFKA_SCRIPT_DEFAULT
#define H_KAFKA_SCRIPT_DEFAULT "scripts/kafka"
#endif

struct h_kcluster {
    char *parent; /* a temporary directory; the cluster's is parent/kafka */
    char *dir;
    char *bootstraps;
    int nodes;
};

static const char *script(void)
{
    const char *s = getenv("BS_KAFKA_SCRIPT");
    return s && *s ? s : H_KAFKA_SCRIPT_DEFAULT;
}

/* The last non-empty line of text (its length in *len, no newline): the
 * script's own verdict, which a failure names first -- cmocka cuts a
 * message at about 1000 bytes, and the lines before the verdict (a
 * node's log) would fill them. */
static const char *last_line(const char *text, int *len)
{
    size_t end = strlen(text);
    while (end > 0 && text[end - 1] == '\n')
        end--;
    size_t start = end;
    while (start > 0 && text[start - 1] != '\n')
        start--;
    *len = (int)(end - start);
    return text + start;
}

/* Runs `scripts/kafka ARGS... --dir DIR` to its end (timeout_ms); 0 iff it
 * exited 0, with its stdout copied to out (if not NULL; malloc'd).  A
 * failure names the script's last line of stderr, then the stderr's
 * tail. */
static int run_script(const char *dir, const char *const *args,
                      int timeout_ms, char **out)
{
    const char *argv[64];
    size_t k = 0;
    argv[k++] = script();
    for (size_t i = 0; args[i]; i++) {
        if (k == 60) /* a cut list would run another command */
            return h_fail("%s %s: more than 59 arguments", argv[0], args[0]);
        argv[k++] = args[i];
    }
    argv[k++] = "--dir";
    argv[k++] = dir;
    argv[k] = NULL;
    h_proc *p = NULL;
    if (h_process_spawn((char *const *)argv, NULL, &p))
        return -1;
    int status = 0, rc = h_process_wait(p, timeout_ms, &status), n = 0;
    if (rc == 1) {
        const char *line = last_line(h_process_stderr(p), &n);
        h_fail("%s %s: still running after %d ms; its stderr's last line: "
               "%.*s; its stderr ends: %s", argv[0], args[0], timeout_ms, n,
               line, h_process_stderr_tail(p, 500));
        h_process_free(p);
        return -1;
    }
    if (rc == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        const char *line = last_line(h_process_stderr(p), &n);
        h_fail("%s %s%s%s: %s: %.*s; its stderr ends: %s", argv[0], args[0],
               args[1] ? " " : "", args[1] ? args[1] : "",
               h_status_str(status), n, line, h_process_stderr_tail(p, 500));
        rc = -1;
    }
    if (rc == 0 && out)
        *out = h_xstrdup(h_process_stdout(p));
    h_process_free(p);
    return rc;
}

int h_kcluster_run(const h_kcluster *c, const char *const *args,
                   int timeout_ms, char **out)
{
    return run_script(c->dir, args, timeout_ms, out);
}

int h_kcluster_start(int nodes, h_kcluster **out)
{
    return h_kcluster_start_args(nodes, NULL, out);
}

int h_kcluster_start_args(int nodes, const char *const *more,
                          h_kcluster **out)
{
    *out = NULL;
    h_kcluster *c = h_xcalloc(1, sizeof(*c));
    c->nodes = nodes;
    if (h_tmpdir_new(&c->parent)) {
        free(c);
        return -1;
    }
    c->dir = h_strdupf("%s/kafka", c->parent);
    char n[16], owner[32];
    snprintf(n, sizeof(n), "%d", nodes);
    snprintf(owner, sizeof(owner), "%d", (int)getpid());
    const char *args[8] = {"start", "--nodes", n, "--owner", owner};
    for (size_t i = 0, k = 5; more && more[i] && k < 7; i++)
        args[k++] = more[i];
    char *so = NULL;
    double t0 = h_now_s();
    if (run_script(c->dir, args, H_KAFKA_START_MS, &so)) {
        char why[2048];
        snprintf(why, sizeof(why), "%s", h_last_error());
        h_kcluster_stop(c);
        return h_fail("a %d-node Apache Kafka: %s", nodes, why);
    }
    /* The bootstrap list is its stdout's last line. */
    char *s = so;
    size_t len = strlen(s);
    while (len && (s[len - 1] == '\n' || s[len - 1] == '\r'))
        s[--len] = '\0';
    char *nl = strrchr(s, '\n');
    c->bootstraps = h_xstrdup(nl ? nl + 1 : s);
    free(so);
    if (!strstr(c->bootstraps, "127.0.0.1:")) {
        char why[512];
        snprintf(why, sizeof(why), "scripts/kafka start printed '%s', not a "
                 "bootstrap list", c->bootstraps);
        h_kcluster_stop(c);
        return h_fail("%s", why);
    }
    fprintf(stderr, "    (a %d-node Apache Kafka at %s in %.1f s)\n", nodes,
            c->bootstraps, h_now_s() - t0);
    *out = c;
    return 0;
}

const char *h_kcluster_bootstraps(const h_kcluster *c) { return c->bootstraps; }
const char *h_kcluster_dir(const h_kcluster *c) { return c->dir; }
int h_kcluster_nodes(const h_kcluster *c) { return c->nodes; }
int h_kcluster_rf(const h_kcluster *c) { return c->nodes < 3 ? c->nodes : 3; }

static int node_cmd(h_kcluster *c, const char *cmd, int i, int timeout_ms)
{
    char n[16];
    snprintf(n, sizeof(n), "%d", i);
    const char *const args[] = {cmd, n, NULL};
    return run_script(c->dir, args, timeout_ms, NULL);
}

int h_kcluster_stop_node(h_kcluster *c, int i)
{
    return node_cmd(c, "stop-node", i, H_KAFKA_STOP_MS);
}

int h_kcluster_start_node(h_kcluster *c, int i)
{
    return node_cmd(c, "start-node", i, H_KAFKA_START_MS);
}

int h_kcluster_kill_node(h_kcluster *c, int i)
{
    char *path = h_strdupf("%s/node%d/pid", c->dir, i), *text = NULL;
    int rc = h_read_file(path, &text, NULL);
    free(path);
    if (rc)
        return -1;
    long pid = strtol(text, NULL, 10);
    free(text);
    if (pid <= 1)
        return h_fail("node %d: no pid", i);
    /* Only the node's own JVM (its command line names its config). */
    char *cl = h_strdupf("/proc/%ld/cmdline", pid), *cmd = NULL;
    size_t len = 0;
    rc = h_read_file(cl, &cmd, &len);
    free(cl);
    if (rc)
        return h_fail("node %d (pid %ld) is not running", i, pid);
    char *want = h_strdupf("%s/node%d/server.properties", c->dir, i);
    bool ours = false;
    for (size_t k = 0; k < len; k += strlen(cmd + k) + 1)
        ours = ours || !strcmp(cmd + k, want);
    free(want);
    free(cmd);
    if (!ours)
        return h_fail("pid %ld is not node %d's JVM", pid, i);
    if (kill((pid_t)pid, SIGKILL))
        return h_fail("kill -9 %ld: %s", pid, strerror(errno));
    for (int64_t end = h_now_ms() + H_REAP_MS; kill((pid_t)pid, 0) == 0;) {
        /* setsid'd, not our child: gone when init reaps it. */
        if (h_now_ms() > end)
            return h_fail("node %d (pid %ld) still there after SIGKILL", i,
                          pid);
        h_sleep_ms(20);
    }
    return 0;
}

/* The port named KIND<i> in DIR/ports; -1 if unknown. */
static int port_of(const h_kcluster *c, const char *kind, int i)
{
    char *path = h_strdupf("%s/ports", c->dir), *text = NULL;
    int rc = h_read_file(path, &text, NULL);
    free(path);
    if (rc)
        return -1;
    char key[32];
    snprintf(key, sizeof(key), "%s%d=", kind, i);
    int port = -1;
    for (char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1
                                                       : NULL)
        if (!strncmp(l, key, strlen(key)))
            port = atoi(l + strlen(key));
    free(text);
    return port;
}

int h_kcluster_port(const h_kcluster *c, int i)
{
    return port_of(c, "broker", i);
}

int h_kcluster_proxied_port(const h_kcluster *c, int i)
{
    return port_of(c, "proxied", i);
}

int h_kcluster_proxy_port(const h_kcluster *c, int i)
{
    return port_of(c, "proxy", i);
}

const char *h_kcluster_log_tail(const h_kcluster *c, int i, size_t max)
{
    static char buf[8192];
    if (max >= sizeof(buf))
        max = sizeof(buf) - 1;
    char *path = h_strdupf("%s/node%d/server.log", c->dir, i), *text = NULL;
    size_t len = 0;
    buf[0] = '\0';
    if (h_read_file(path, &text, &len) == 0) {
        size_t from = len > max ? len - max : 0;
        snprintf(buf, sizeof(buf), "%s", text + from);
    }
    free(text);
    free(path);
    return buf;
}

int h_kcluster_stop(h_kcluster *c)
{
    if (!c)
        return 0;
    const char *const args[] = {"stop", NULL};
    int rc = run_script(c->dir, args, H_KAFKA_STOP_MS, NULL);
    if (c->bootstraps)
        h_kafka_conf_for(c->bootstraps, NULL);
    if (rc)
        fprintf(stderr, "scripts/kafka stop: %s\n", h_last_error());
    h_tmpdir_remove(c->parent);
    free(c->parent);
    free(c->dir);
    free(c->bootstraps);
    free(c);
    return rc;
}

/* ---- topics ------------------------------------------------------------ */

static rd_kafka_t *admin_client(const char *bootstraps)
{
    char errstr[512];
    rd_kafka_conf_t *conf = h_kafka_conf(bootstraps);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr,
                                  sizeof(errstr));
    if (!rk) {
        rd_kafka_conf_destroy(conf);
        h_fail("rd_kafka_new(admin): %s", errstr);
    }
    return rk;
}

/* Every partition of topic has a leader: 1 yes, 0 not yet, -1 an error
 * (h_last_error). */
static int topic_led(rd_kafka_t *rk, const char *topic, int partitions)
{
    rd_kafka_topic_t *t = rd_kafka_topic_new(rk, topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 0, t, &md, H_REQUEST_MS);
    rd_kafka_topic_destroy(t);
    if (err) {
        h_fail("metadata of %s: %s", topic, rd_kafka_err2name(err));
        return 0;
    }
    int ok = md->topic_cnt == 1 && !md->topics[0].err &&
             md->topics[0].partition_cnt == partitions;
    for (int p = 0; ok && p < md->topics[0].partition_cnt; p++)
        ok = md->topics[0].partitions[p].err == 0 &&
             md->topics[0].partitions[p].leader >= 0;
    if (!ok)
        h_fail("metadata of %s: %s, %d partitions (want %d)", topic,
               md->topic_cnt ? rd_kafka_err2name(md->topics[0].err) : "none",
               md->topic_cnt ? md->topics[0].partition_cnt : 0, partitions);
    rd_kafka_metadata_destroy(md);
    return ok;
}

int h_create_topic(const char *bootstraps, const char *topic, int partitions,
                   int rf, const char *const *configs)
{
    rd_kafka_t *rk = admin_client(bootstraps);
    if (!rk)
        return -1;
    char errstr[512];
    int rc = -1;
    rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(topic, partitions, rf,
                                                    errstr, sizeof(errstr));
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *o =
        rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
    rd_kafka_event_t *ev = NULL;
    if (!nt) {
        h_fail("NewTopic %s: %s", topic, errstr);
        goto done;
    }
    for (size_t i = 0; configs && configs[i]; i++) {
        char *kv = h_xstrdup(configs[i]), *eq = strchr(kv, '=');
        rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR__INVALID_ARG;
        if (eq) {
            *eq = '\0';
            err = rd_kafka_NewTopic_set_config(nt, kv, eq + 1);
        }
        free(kv);
        if (err) {
            h_fail("topic %s: config '%s': %s", topic, configs[i],
                   rd_kafka_err2str(err));
            goto done;
        }
    }
    if (rd_kafka_AdminOptions_set_operation_timeout(o, 30000, errstr,
                                                    sizeof(errstr)) ||
        rd_kafka_AdminOptions_set_request_timeout(o, 40000, errstr,
                                                  sizeof(errstr))) {
        h_fail("AdminOptions: %s", errstr);
        goto done;
    }
    rd_kafka_CreateTopics(rk, &nt, 1, o, q);
    ev = rd_kafka_queue_poll(q, 60000);
    if (!ev) {
        h_fail("CreateTopics %s: no result within 60 s", topic);
        goto done;
    }
    if (rd_kafka_event_error(ev)) {
        h_fail("CreateTopics %s: %s", topic, rd_kafka_event_error_string(ev));
        goto done;
    }
    const rd_kafka_CreateTopics_result_t *res =
        rd_kafka_event_CreateTopics_result(ev);
    size_t cnt = 0;
    const rd_kafka_topic_result_t **tr =
        res ? rd_kafka_CreateTopics_result_topics(res, &cnt) : NULL;
    if (cnt != 1) {
        h_fail("CreateTopics %s: %zu results", topic, cnt);
        goto done;
    }
    if (rd_kafka_topic_result_error(tr[0])) {
        h_fail("CreateTopics %s: %s: %s", topic,
               rd_kafka_err2name(rd_kafka_topic_result_error(tr[0])),
               rd_kafka_topic_result_error_string(tr[0])
                   ? rd_kafka_topic_result_error_string(tr[0])
                   : "");
        goto done;
    }
    for (int64_t end = h_now_ms() + 60000;;) {
        int led = topic_led(rk, topic, partitions);
        if (led == 1) {
            rc = 0;
            break;
        }
        if (h_now_ms() > end) {
            char why[512];
            snprintf(why, sizeof(why), "%s", h_last_error());
            h_fail("topic %s created, but after 60 s: %s", topic, why);
            break;
        }
        h_sleep_ms(100);
    }
done:
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_AdminOptions_destroy(o);
    if (nt)
        rd_kafka_NewTopic_destroy(nt);
    rd_kafka_queue_destroy(q);
    rd_kafka_destroy(rk);
    return rc;
}

static int topic_config_once(const char *bootstraps, const char *topic,
                             const char *key, char *buf, size_t size)
{
    rd_kafka_t *rk = admin_client(bootstraps);
    if (!rk)
        return -1;
    int rc = -1;
    rd_kafka_ConfigResource_t *cr =
        rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_DescribeConfigs(rk, &cr, 1, NULL, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 60000);
    if (!ev) {
        h_fail("DescribeConfigs %s: no result within 60 s", topic);
        goto done;
    }
    if (rd_kafka_event_error(ev)) {
        h_fail("DescribeConfigs %s: %s", topic,
               rd_kafka_event_error_string(ev));
        goto done;
    }
    const rd_kafka_DescribeConfigs_result_t *res =
        rd_kafka_event_DescribeConfigs_result(ev);
    size_t nres = 0, nent = 0;
    const rd_kafka_ConfigResource_t **rs =
        res ? rd_kafka_DescribeConfigs_result_resources(res, &nres) : NULL;
    if (nres != 1 || rd_kafka_ConfigResource_error(rs[0])) {
        h_fail("DescribeConfigs %s: %s", topic,
               nres == 1 ? rd_kafka_err2name(
                               rd_kafka_ConfigResource_error(rs[0]))
                         : "no result");
        goto done;
    }
    const rd_kafka_ConfigEntry_t **es =
        rd_kafka_ConfigResource_configs(rs[0], &nent);
    for (size_t i = 0; i < nent; i++)
        if (!strcmp(rd_kafka_ConfigEntry_name(es[i]), key)) {
            const char *v = rd_kafka_ConfigEntry_value(es[i]);
            snprintf(buf, size, "%s", v ? v : "");
            rc = 0;
        }
    if (rc)
        h_fail("topic %s has no config %s", topic, key);
done:
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_ConfigResource_destroy(cr);
    rd_kafka_queue_destroy(q);
    rd_kafka_destroy(rk);
    return rc;
}

int h_topic_config(const char *bootstraps, const char *topic,
                   const char *key, char *buf, size_t size)
{
    /* A broker other than the controller may not know a topic just made
     * for a moment (UNKNOWN_TOPIC_OR_PART): retried for 30 s. */
    for (int64_t end = h_now_ms() + 30000;;) {
        if (topic_config_once(bootstraps, topic, key, buf, size) == 0)
            return 0;
        if (h_now_ms() > end)
            return -1;
        h_sleep_ms(250);
    }
}

/* ---- fixtures ---------------------------------------------------------- */

/* The fixtures alive, made by h_kfixture_new_sized (a test that runs
 * cases side by side holds one per case). */
static h_fixture *g_kfx[H_KFIXTURES_MAX];

int h_kfixture_new_sized(h_kcluster *c, size_t size,
                         int (*cleanup)(h_fixture *fx), h_fixture **out)
{
    *out = NULL;
    if (size < sizeof(h_fixture))
        return h_fail("h_kfixture_new_sized: %zu bytes", size);
    size_t slot = 0;
    while (slot < H_KFIXTURES_MAX && g_kfx[slot])
        slot++;
    if (slot == H_KFIXTURES_MAX)
        return h_fail("h_kfixture_new_sized: %d are alive already",
                      H_KFIXTURES_MAX);
    h_fixture *fx = h_xcalloc(1, size);
    fx->t0 = h_now_s();
    fx->cleanup = cleanup;
    if (h_broker_attach(h_kcluster_bootstraps(c), &fx->broker) ||
        h_tmpdir_new(&fx->dir)) {
        char why[512];
        snprintf(why, sizeof(why), "%s", h_last_error());
        h_broker_stop(fx->broker);
        free(fx);
        return h_fail("%s", why);
    }
    fx->bs = h_broker_bootstraps(fx->broker);
    g_kfx[slot] = fx;
    *out = fx;
    return 0;
}

int h_fixture_new_on(h_kcluster *c, size_t size,
                     int (*cleanup)(h_fixture *fx), h_fixture **out)
{
    return c ? h_kfixture_new_sized(c, size, cleanup, out)
             : h_fixture_new_sized(1, NULL, size, cleanup, out);
}

int h_fixture_topic(h_fixture *fx, h_kcluster *c, const char *topic,
                    int parts, const char *const *configs)
{
    if (c)
        return h_create_topic(fx->bs, topic, parts, h_kcluster_rf(c),
                              configs);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "create-topic %s %d", topic, parts);
    return h_broker_control(fx->broker, cmd);
}

int h_kfixture_teardown(void **state)
{
    (void)state;
    h_feed_abandon();
    h_proc_release_all();
    double t0 = 0;
    int rc = 0;
    for (size_t i = 0; i < H_KFIXTURES_MAX; i++) {
        h_fixture *fx = g_kfx[i];
        g_kfx[i] = NULL;
        if (!fx)
            continue;
        if (t0 == 0 || fx->t0 < t0)
            t0 = fx->t0;
        if (h_fixture_free(fx))
            rc = -1;
    }
    if (t0 > 0)
        fprintf(stderr, "    (%.1f s)\n", h_now_s() - t0);
    return rc;
}

/* ---- a test's environment ---------------------------------------------- */

static int kenv_cleanup(h_fixture *fx)
{
    h_kenv *e = (h_kenv *)fx;
    if (e->q)
        rd_kafka_destroy(e->q);
    h_stream_free(e->st);
    free(e->conf);
    free(e->ckdir);
    free(e->scratch);
    return 0;
}

h_kenv *h_kenv_new(h_kcluster *c, const char *name, const h_kenv_opts *o)
{
    h_fixture *fx = NULL;
    H_MUST(h_kfixture_new_sized(c, sizeof(h_kenv), kenv_cleanup, &fx));
    h_kenv *e = (h_kenv *)fx;
    snprintf(e->in, sizeof(e->in), "%s-in", name);
    snprintf(e->out, sizeof(e->out), "%s-out", name);
    snprintf(e->rej, sizeof(e->rej), "%s-rej", name);
    snprintf(e->ckt, sizeof(e->ckt), "%s-ckpt", name);
    snprintf(e->lst, sizeof(e->lst), "%s-lst", name);
    snprintf(e->group, sizeof(e->group), "%s", name);
    int rf = h_kcluster_rf(c);
    H_MUST(h_create_topic(e->h.bs, e->in, o->nparts, rf, o->in_conf));
    if (!o->no_out)
        H_MUST(h_create_topic(e->h.bs, e->out, o->nparts, rf, NULL));
    if (o->rejected)
        H_MUST(h_create_topic(e->h.bs, e->rej, o->nparts, rf, o->rej_conf));
    static const char *const compact[] = {"cleanup.policy=compact", NULL};
    if (o->blocklist)
        H_MUST(h_create_topic(e->h.bs, e->lst, 1, rf, compact));
    if (o->kafka_store || o->ckpt_topic) {
        H_MUST(h_create_topic(e->h.bs, e->ckt, 3, rf, compact));
        char pol[64];
        H_MUST(h_topic_config(e->h.bs, e->ckt, "cleanup.policy", pol,
                              sizeof(pol)));
        if (strcmp(pol, "compact") != 0)
            h_test_fail("%s: cleanup.policy is '%s', not compact", e->ckt,
                        pol);
    }
    e->conf = h_strdupf("%s/stage.conf", e->h.dir);
    e->ckdir = h_strdupf("%s/ckpt", e->h.dir);
    char *rej = o->rejected ? h_strdupf("rejected.topic=%s\n", e->rej)
                            : h_strdupf("%s", "");
    char *ck = o->ckdir ? h_strdupf("checkpoint.dir=%s\n", e->ckdir)
                        : h_strdupf("%s", "");
    char *store = o->kafka_store
                      ? h_strdupf("checkpoint.store=kafka\n"
                                  "checkpoint.topic=%s\n"
                                  "checkpoint.chunk.bytes=16k\n", e->ckt)
                  : o->ckpt_topic ? h_strdupf("checkpoint.topic=%s\n", e->ckt)
                                  : h_strdupf("%s", "");
    char *list = o->blocklist ? h_strdupf("blocklist.x.topic=%s\n"
                                          "blocklist.x.key=key\n", e->lst)
                              : h_strdupf("%s", "");
    char *text = h_strdupf(
        "input.topics=%s\n"
        "output.topic=%s\n"
        "%s"
        "consumer.group.id=%s\n"
        "kafka.bootstrap.servers=%s\n"
        "%s%s"
        "checkpoint.interval.ms=%d\n"
        "kafka.reconnect.backoff.ms=100\n"
        "kafka.reconnect.backoff.max.ms=1000\n"
        "consumer.session.timeout.ms=6000\n"
        "consumer.heartbeat.interval.ms=1000\n"
        "consumer.fetch.wait.max.ms=100\n"
        "dedup.capacity=%d\n"
        "log.stats.interval.ms=0\n"
        "log.level=debug\n"
        "%s%s",
        e->in, e->out, rej, e->group, o->bootstraps ? o->bootstraps : e->h.bs,
        ck, store, o->checkpoint_ms,
        o->capacity, list, o->extra ? o->extra : "");
    int rc = h_write_file(e->conf, text);
    free(text);
    free(rej);
    free(ck);
    free(store);
    free(list);
    H_MUST(rc);
    e->q = h_query_client(h_kafka_conf(e->h.bs));
    if (!e->q)
        h_test_fail("%s", h_last_error());
    return e;
}

void h_kenv_free(h_kenv *e)
{
    (void)e;
    (void)h_kfixture_teardown(NULL);
}

/* ---- checking a test's outcome ----------------------------------------- */

/* The group's committed offsets are the input's end. */
void h_kenv_committed_end(h_kenv *e)
{
    int64_t c[256];
    H_MUST(h_committed_retry(e->h.bs, e->group, e->in, e->st->nparts, c, 30000));
    for (int p = 0; p < e->st->nparts; p++)
        if (c[p] != e->st->next[p])
            h_test_fail("%s [%d]: the group %s committed %lld, want the "
                        "input's end %lld", e->in, p, e->group, (long long)c[p],
                     (long long)e->st->next[p]);
}

void h_kenv_wait_committed_end(h_kenv *e, h_proc *const *procs,
                               int timeout_ms)
{
    h_wait_committed_tolerant(e->h.bs, e->group, e->in, e->st->nparts,
                              e->st->next, procs, timeout_ms);
}

/* Every unique key of the stream exactly once in the output (read at
 * read_committed); returns the records (owned by e->st). */
h_outrec *h_kenv_expect_once(h_kenv *e, size_t *n, const char *why)
{
    h_outrec *o = h_read_out_committed(e->st, e->h.bs, e->out, e->in, n);
    unsigned *c = h_count_copies(e->st, e->in, e->st->n, NULL);
    h_expect_once(e->st, c, e->in, e->out, e->st->n, why);
    if (*n != e->st->nids)
        h_test_fail("%s: %zu records in %s, want %zu (one per key)", why, *n,
                    e->out, e->st->nids);
    return o;
}

/* Every record of `topic` at read_committed (fails the test if it cannot
 * be read); the caller frees the list. */
static h_record_list read_committed_all(h_kenv *e, const char *topic)
{
    h_record_list l = {0};
    int rc = h_consume_all_conf(e->h.bs, topic, H_CONSUME_MS,
                                H_READ_COMMITTED, &l);
    if (rc)
        h_record_list_free(&l);
    H_MUST(rc);
    return l;
}

/*
 * The rejected topic (read_committed): every record a copy of an input
 * record (key, value, bloomstage-src) with bloomstage-reason duplicate;
 * every input record that is not its key's first is there at least once,
 * no first record is.  Returns how many records it holds; *extra gets the
 * copies beyond one per record.
 */
size_t h_kenv_expect_rejected(h_kenv *e, size_t *extra)
{
    h_stream *st = e->st;
    h_record_list l = read_committed_all(e, e->rej);
    free(e->scratch);
    uint8_t *seen = e->scratch = h_xcalloc(st->n, 1);
    char bad[512] = "";
    size_t x = 0;
    for (size_t k = 0; k < l.n && !bad[0]; k++) {
        const h_record *r = &l.recs[k];
        size_t i = h_stream_which(st, r);
        if (i >= st->n) {
            snprintf(bad, sizeof(bad), "%s %d:%lld is no input record",
                     e->rej, (int)r->partition, (long long)r->offset);
            break;
        }
        const h_header *src = h_header_last(r, "bloomstage-src");
        const h_header *why = h_header_last(r, "bloomstage-reason");
        char want[128];
        snprintf(want, sizeof(want), "%s:%d:%lld", e->in, (int)st->part[i],
                 (long long)st->off[i]);
        if (!src || !src->value || strcmp(src->value, want) || !why ||
            !why->value || strcmp(why->value, "duplicate"))
            snprintf(bad, sizeof(bad), "%s %d:%lld (input record %zu, %s): "
                     "bloomstage-src '%s' reason '%s', want that place "
                     "and 'duplicate'", e->rej, (int)r->partition,
                     (long long)r->offset, i, want,
                     src && src->value ? (const char *)src->value : "(none)",
                     why && why->value ? (const char *)why->value : "(none)");
        else if (st->first[st->id[i]] == i)
            snprintf(bad, sizeof(bad), "%s %d:%lld: input record %zu (%s), "
                     "the first of key k%07u, was rejected as a duplicate",
                     e->rej, (int)r->partition, (long long)r->offset, i,
                     want, st->id[i]);
        else if (seen[i]++)
            x++;
    }
    size_t n = l.n;
    h_record_list_free(&l);
    if (bad[0])
        h_test_fail("%s", bad);
    size_t missing = 0, first_missing = 0;
    for (size_t i = 0; i < st->n; i++)
        if (st->first[st->id[i]] != i && !seen[i] && missing++ == 0)
            first_missing = i;
    if (missing)
        h_test_fail("%zu duplicates of the input are not in %s (neither "
                 "forwarded nor rejected: lost), e.g. record %zu at %s:%d:%lld",
                 missing, e->rej, first_missing, e->in,
                 (int)st->part[first_missing],
                 (long long)st->off[first_missing]);
    if (extra)
        *extra = x;
    return n;
}

static h_kcluster *g_group_cluster;

int h_kgroup_setup_args(int nodes, const char *const *more)
{
    if (h_kcluster_start_args(nodes, more, &g_group_cluster)) {
        fprintf(stderr, "setup: %s\n", h_last_error());
        return -1;
    }
    return 0;
}

int h_kgroup_setup1(void **state)
{
    (void)state;
    return h_kgroup_setup_args(1, NULL);
}

int h_kgroup_setup3(void **state)
{
    (void)state;
    return h_kgroup_setup_args(3, NULL);
}

int h_kgroup_teardown(void **state)
{
    (void)state;
    int rc = h_kcluster_stop(g_group_cluster);
    g_group_cluster = NULL;
    return rc;
}

h_kcluster *h_kgroup_cluster(void) { return g_group_cluster; }

/* ---- committed offsets ------------------------------------------------- */

int h_committed_retry(const char *bootstraps, const char *group,
                      const char *topic, int nparts, int64_t *offsets,
                      int timeout_ms)
{
    int64_t end = h_now_ms() + timeout_ms;
    for (;;) {
        if (h_committed(bootstraps, group, topic, nparts, offsets) == 0)
            return 0;
        if (h_now_ms() > end) {
            char why[512];
            snprintf(why, sizeof(why), "%s", h_last_error());
            return h_fail("%s (still after %d ms of retries)", why,
                          timeout_ms);
        }
        h_nap(250);
    }
}

/* h_wait_committed_tolerant and h_wait_committed_past: committed offsets
 * equal to want[], or at least want[]. */
static void wait_committed(const char *bootstraps, const char *group,
                           const char *topic, int nparts, const int64_t *want,
                           bool at_least, h_proc *const *procs,
                           int timeout_ms)
{
    int64_t c[H_STREAM_MAXP];
    if (nparts < 1 || nparts > H_STREAM_MAXP)
        h_test_fail("waiting for %s's commits: %d partitions", group, nparts);
    double t0 = h_now_s();
    char last[512] = "no answer yet";
    for (;;) {
        int p = -1;
        if (h_committed(bootstraps, group, topic, nparts, c) == 0) {
            p = 0;
            while (p < nparts &&
                   (at_least ? c[p] >= want[p] : c[p] == want[p]))
                p++;
            if (p == nparts)
                return;
            snprintf(last, sizeof(last), "%s [%d] committed at %lld, want "
                     "%s%lld", topic, p, (long long)c[p],
                     at_least ? "at least " : "", (long long)want[p]);
        } else {
            snprintf(last, sizeof(last), "%s", h_last_error());
        }
        h_stages_alive(procs, at_least ? "before committing"
                                       : "before committing the end of the "
                                         "input");
        if ((h_now_s() - t0) * 1000 > timeout_ms)
            h_stage_fail(procs ? procs[0] : NULL, "the group %s did not "
                         "commit %s within %d ms: %s", group,
                         at_least ? "that far" : "the input's end",
                         timeout_ms, last);
        h_nap(200);
    }
}

void h_wait_committed_tolerant(const char *bootstraps, const char *group,
                               const char *topic, int nparts,
                               const int64_t *want, h_proc *const *procs,
                               int timeout_ms)
{
    wait_committed(bootstraps, group, topic, nparts, want, false, procs,
                   timeout_ms);
}

void h_wait_committed_past(const char *bootstraps, const char *group,
                           const char *topic, int nparts, const int64_t *want,
                           h_proc *const *procs, int timeout_ms)
{
    wait_committed(bootstraps, group, topic, nparts, want, true, procs,
                   timeout_ms);
}

/* ---- watermarks with a broker away ------------------------------------- */

int64_t h_topic_end_tolerant(rd_kafka_t *q, const char *topic, int nparts,
                             int64_t *hw, int timeout_ms)
{
    int64_t v[H_STREAM_MAXP];
    if (nparts < 1 || nparts > H_STREAM_MAXP)
        h_test_fail("h_topic_end_tolerant: %d partitions", nparts);
    for (int64_t end = h_now_ms() + timeout_ms;;) {
        if (h_offsets(q, topic, nparts, RD_KAFKA_OFFSET_END, v,
                      H_REQUEST_MS) == 0) {
            int64_t sum = 0;
            for (int p = 0; p < nparts; p++) {
                sum += v[p];
                if (hw)
                    hw[p] = v[p];
            }
            return sum;
        }
        if (h_now_ms() > end)
            h_test_fail("high watermarks of %s: %s (still after %d ms of "
                        "retries)", topic, h_last_error(), timeout_ms);
        h_nap(250);
    }
}

void h_wait_out_tolerant(rd_kafka_t *q, const char *topic, int nparts,
                         h_proc *const *procs, int64_t want, int timeout_ms)
{
    double t0 = h_now_s();
    for (;;) {
        int64_t left = timeout_ms - (int64_t)((h_now_s() - t0) * 1000);
        int64_t n = h_topic_end_tolerant(q, topic, nparts, NULL,
                                         left > 1000 ? (int)left : 1000);
        if (n >= want)
            return;
        h_stages_alive(procs, "while waiting for output");
        if ((h_now_s() - t0) * 1000 > timeout_ms)
            h_stage_fail(procs ? procs[0] : NULL, "%s holds %lld records "
                         "after %d ms, want at least %lld", topic,
                         (long long)n, timeout_ms, (long long)want);
        h_nap(200);
    }
}

/* ---- leaders and coordinators ------------------------------------------ */

/* Kafka's coordinator partition for an id: abs(String.hashCode) % count. */
static int32_t java_partition(const char *id, int count)
{
    int32_t h = 0;
    for (const unsigned char *s = (const unsigned char *)id; *s; s++)
        h = (int32_t)((uint32_t)h * 31u + *s);
    if (h == INT32_MIN)
        h = 0;
    return (h < 0 ? -h : h) % count;
}

int h_kleader_of(rd_kafka_t *q, const char *topic, int32_t part,
                 const char *id)
{
    rd_kafka_topic_t *t = rd_kafka_topic_new(q, topic, NULL);
    const rd_kafka_metadata_t *md = NULL;
    int leader = -1;
    if (rd_kafka_metadata(q, 0, t, &md, 5000) == 0 && md->topic_cnt == 1 &&
        md->topics[0].partition_cnt > 0) {
        const rd_kafka_metadata_topic_t *mt = &md->topics[0];
        if (id)
            part = java_partition(id, mt->partition_cnt);
        for (int i = 0; i < mt->partition_cnt; i++)
            if (mt->partitions[i].id == part)
                leader = mt->partitions[i].leader;
    }
    if (md)
        rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(t);
    return leader;
}

/* ---- reading ----------------------------------------------------------- */

h_outrec *h_read_out_committed(h_stream *st, const char *bootstraps,
                               const char *out_topic, const char *in_topic,
                               size_t *n)
{
    return h_read_out_conf(st, bootstraps, out_topic, in_topic,
                           H_READ_COMMITTED, n);
}

/* ---- the feeder -------------------------------------------------------- */

/*
 * One idempotent producer keeps the input's offsets the stream's.  When it
 * fails fatally (librdkafka before 2.3.0, #4438: a sequence desynchronized
 * under a broker pause), the feeder recovers without changing them:
 *
 *   1. the producer is purged (queue and in flight) and destroyed, so
 *      nothing more of it is sent;
 *   2. the input's high watermarks are asked every second by a fresh
 *      client (no metadata of its own to trust: it asks for the leaders,
 *      then ListOffsets, each bounded) until each has stood still for the
 *      quiet time: a record the old producer's leader appended but its
 *      followers had not yet fetched becomes visible when they do, or when
 *      a follower that stopped fetching leaves the ISR
 *      (replica.lag.time.max.ms, 30 s), so a replicated partition waits
 *      past that;
 *   3. each end lies between what the input held before the feeder began
 *      and what it sent, and the last FEED_CHECK records before it are
 *      the stream's at their offsets (else the test fails, naming them);
 *   4. a new idempotent producer resends, in stream order, exactly the
 *      records sent whose offset is at or past their partition's end (the
 *      ones before it are in the log, these are not: their producer is
 *      gone); then the feeder goes on at its rate.
 *
 * A failure during the resend starts the same again.  h_feed_finish's
 * check of the ends against the stream's is what would see a record of the
 * old producer that still landed after the quiet time.
 */
#define FEED_QUERY_MS 5000     /* each metadata and ListOffsets request */
#define FEED_QUIET_MS 2000     /* a partition with one replica */
#define FEED_QUIET_RF_MS 35000 /* a replicated one: 30 s and a margin */
#define FEED_RECOVER_MS 600000 /* the ends settled and checked, at most */
#define FEED_CHECK 64          /* records checked before each end */

typedef struct feeder {
    char *bs, *topic;
    const h_stream *st;
    h_producer *p; /* NULL while recovering */
    size_t from, next, end;
    double rate, credit, t_last;
    bool busy; /* in feed_tick: h_nap's hook is not entered twice */
    /* recovering: the fatal error, when, and the ends seen */
    char fatal[600], why_not[400];
    int64_t t_fatal, t_query;
    int64_t hw[H_STREAM_MAXP], still_since[H_STREAM_MAXP];
    int replicas[H_STREAM_MAXP];
} feeder;

static feeder *g_feed;
static unsigned g_feed_recoveries;

static void feed_producer_new(feeder *f)
{
    /* One request in flight and a request timeout past a paused
     * follower's removal from the ISR (replica.lag.time.max.ms, 30 s):
     * librdkafka before 2.3.0 (#4438) turns a request that may have been
     * persisted (a timeout, a cut connection) into a fatal error when a
     * later request of the same partition is already in flight.  They
     * make that rarer; the recovery above handles it. */
    rd_kafka_conf_t *conf = h_conf_pairs(
        h_kafka_conf(f->bs), "enable.idempotence", "true", "acks", "all",
        "linger.ms", "5", "message.timeout.ms", "300000",
        "max.in.flight.requests.per.connection", "1",
        "request.timeout.ms", "120000",
        "queue.buffering.max.messages", "2000000",
        "message.max.bytes", "10000000", NULL);
    H_MUST(h_producer_new(conf, 0, &f->p));
}

/* The producer failed fatally: what it said kept, the producer purged and
 * destroyed, the recovery begun. */
static void feed_lost_producer(feeder *f)
{
    char why[480] = "";
    rd_kafka_resp_err_t err =
        rd_kafka_fatal_error(h_producer_rk(f->p), why, sizeof(why));
    snprintf(f->fatal, sizeof(f->fatal), "%s: %s", rd_kafka_err2name(err),
             why);
    h_producer_abandon(f->p);
    f->p = NULL;
    f->t_fatal = h_now_ms();
    f->t_query = 0;
    f->why_not[0] = '\0';
    for (int p = 0; p < f->st->nparts; p++)
        f->still_since[p] = -1;
}

/* The producer has failed fatally. */
static bool feed_failed(const feeder *f)
{
    char why[8];
    return rd_kafka_fatal_error(h_producer_rk(f->p), why, sizeof(why)) != 0;
}

/* Record i queued: 0; -1 if the producer has failed fatally (the recovery
 * begun); any other failure fails the test. */
static int feed_send(feeder *f, size_t i)
{
    const h_stream *st = f->st;
    char *big = NULL;
    h_record r = h_stream_rec(st, i, &big);
    int rc = h_producer_send(f->p, f->topic, st->part[i], &r);
    free(big);
    if (rc == 0)
        return 0;
    if (feed_failed(f)) {
        feed_lost_producer(f);
        return -1;
    }
    h_test_fail("feeding record %zu: %s", i, h_last_error());
}

static void feed_upto(feeder *f, size_t upto)
{
    for (; f->p && f->next < upto; f->next++)
        if (feed_send(f, f->next))
            return;
    if (f->p)
        h_producer_poll(f->p);
}

/* The input's high watermarks into hw[] and each partition's replica
 * count, asked by a fresh client: its leaders first (every partition must
 * have one), then ListOffsets.  0, or -1 with f->why_not. */
static int feed_query_ends(feeder *f, int64_t *hw, int *replicas)
{
    int nparts = f->st->nparts, rc = -1;
    rd_kafka_t *q = h_query_client(h_kafka_conf(f->bs));
    if (!q) {
        snprintf(f->why_not, sizeof(f->why_not), "%s", h_last_error());
        return -1;
    }
    rd_kafka_topic_t *t = rd_kafka_topic_new(q, f->topic, NULL);
    const rd_kafka_metadata_t *md = NULL;
    rd_kafka_resp_err_t err = rd_kafka_metadata(q, 0, t, &md, FEED_QUERY_MS);
    if (err) {
        snprintf(f->why_not, sizeof(f->why_not), "metadata of %s: %s",
                 f->topic, rd_kafka_err2name(err));
        goto done;
    }
    const rd_kafka_metadata_topic_t *mt = &md->topics[0];
    if (md->topic_cnt != 1 || mt->err || mt->partition_cnt != nparts) {
        snprintf(f->why_not, sizeof(f->why_not), "metadata of %s: %s, %d "
                 "partitions", f->topic,
                 md->topic_cnt == 1 ? rd_kafka_err2name(mt->err) : "none",
                 md->topic_cnt == 1 ? mt->partition_cnt : 0);
        goto done;
    }
    for (int i = 0; i < nparts; i++) {
        const rd_kafka_metadata_partition_t *mp = &mt->partitions[i];
        if (mp->id < 0 || mp->id >= nparts || mp->leader < 0 || mp->err) {
            snprintf(f->why_not, sizeof(f->why_not), "%s [%d]: leader %d, "
                     "%s", f->topic, (int)mp->id, (int)mp->leader,
                     rd_kafka_err2name(mp->err));
            goto done;
        }
        replicas[mp->id] = mp->replica_cnt;
    }
    if (h_offsets(q, f->topic, nparts, RD_KAFKA_OFFSET_END, hw,
                  FEED_QUERY_MS)) {
        snprintf(f->why_not, sizeof(f->why_not), "%s", h_last_error());
        goto done;
    }
    rc = 0;
done:
    if (md)
        rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(t);
    rd_kafka_destroy(q);
    return rc;
}

/* Step 3: the input as the old producer left it agrees with the stream
 * (else the test fails).  0; -1 with f->why_not if it could not be read
 * (tried again later). */
static int feed_check_log(feeder *f)
{
    const h_stream *st = f->st;
    int nparts = st->nparts;
    int64_t before[H_STREAM_MAXP], sent[H_STREAM_MAXP], lo[H_STREAM_MAXP];
    h_stream_ends(st, f->from, before);
    h_stream_ends(st, f->next, sent);
    for (int p = 0; p < nparts; p++) {
        if (f->hw[p] < before[p] || f->hw[p] > sent[p])
            h_test_fail("the feeder's producer failed (%s); then %s [%d] "
                        "ended at offset %lld, but the stream's records "
                        "there end at %lld before the feeder began and at "
                        "%lld with all it sent: the input's offsets are no "
                        "longer the stream's", f->fatal, f->topic, p,
                        (long long)f->hw[p], (long long)before[p],
                        (long long)sent[p]);
        lo[p] = f->hw[p] > FEED_CHECK ? f->hw[p] - FEED_CHECK : 0;
    }
    h_record_list l = {0};
    if (h_consume_range(f->bs, f->topic, nparts, lo, f->hw, 30000, &l)) {
        snprintf(f->why_not, sizeof(f->why_not), "%s", h_last_error());
        h_record_list_free(&l);
        return -1;
    }
    char bad[600] = "";
    size_t want = 0;
    for (int p = 0; p < nparts; p++)
        want += (size_t)(f->hw[p] - lo[p]);
    for (size_t k = 0; k < l.n && !bad[0]; k++) {
        const h_record *r = &l.recs[k];
        size_t i = h_stream_which(st, r);
        if (i >= f->next || st->part[i] != r->partition ||
            st->off[i] != r->offset)
            snprintf(bad, sizeof(bad), "%s [%d] offset %lld holds key '%s' "
                     "value '%s', not the stream's record there",
                     f->topic, (int)r->partition, (long long)r->offset,
                     r->key ? (const char *)r->key : "NULL",
                     r->value ? (const char *)r->value : "NULL");
    }
    if (!bad[0] && l.n != want)
        snprintf(bad, sizeof(bad), "%zu records in the last %d offsets "
                 "before the ends of %s, want %zu", l.n, FEED_CHECK,
                 f->topic, want);
    h_record_list_free(&l);
    if (bad[0])
        h_test_fail("the feeder's producer failed (%s); then %s", f->fatal,
                    bad);
    return 0;
}

/* Step 4: a new producer resends what the old one sent past the ends;
 * one line says so. */
static void feed_resend(feeder *f)
{
    const h_stream *st = f->st;
    size_t resent[H_STREAM_MAXP] = {0};
    feed_producer_new(f);
    for (size_t i = f->from; i < f->next; i++) {
        if (st->off[i] < f->hw[st->part[i]])
            continue;
        if (feed_send(f, i))
            return; /* failed again: the recovery starts over */
        resent[st->part[i]]++;
    }
    h_producer_poll(f->p);
    g_feed_recoveries++;
    char per[H_STREAM_MAXP * 40] = "";
    size_t len = 0, total = 0;
    for (int p = 0; p < st->nparts; p++) {
        len += (size_t)snprintf(per + len, sizeof(per) - len, "%s[%d] %zu "
                                "from %lld", p ? ", " : "", p, resent[p],
                                (long long)f->hw[p]);
        total += resent[p];
    }
    printf("feeder: recovered from its producer's fatal error (%s) in "
           "%.1f s: a new producer resent %zu of the %zu records sent to %s "
           "(%s)\n", f->fatal, (h_now_ms() - f->t_fatal) / 1000.0, total,
           f->next - f->from, f->topic, per);
    fflush(stdout);
}

/* Steps 2 to 4, a look at the ends a second at most. */
static void feed_recover_step(feeder *f)
{
    int64_t now = h_now_ms();
    if (now < f->t_query)
        return;
    f->t_query = now + 1000;
    int nparts = f->st->nparts, replicas[H_STREAM_MAXP];
    int64_t hw[H_STREAM_MAXP];
    bool settled = true;
    if (feed_query_ends(f, hw, replicas) == 0) {
        for (int p = 0; p < nparts; p++) {
            if (f->still_since[p] < 0 || hw[p] != f->hw[p]) {
                f->hw[p] = hw[p];
                f->still_since[p] = now;
            }
            int quiet = replicas[p] > 1 ? FEED_QUIET_RF_MS : FEED_QUIET_MS;
            settled = settled && now - f->still_since[p] >= quiet;
        }
    } else {
        for (int p = 0; p < nparts; p++) /* unknown: may have moved */
            f->still_since[p] = -1;
        settled = false;
    }
    if (settled && feed_check_log(f) == 0) {
        feed_resend(f);
        return;
    }
    if (now - f->t_fatal > FEED_RECOVER_MS)
        h_test_fail("the feeder's producer failed (%s) and the ends of %s "
                    "were not settled and checked within %d s; last: %s",
                    f->fatal, f->topic, FEED_RECOVER_MS / 1000,
                    f->why_not[0] ? f->why_not : "still moving");
}

static void feed_tick(void *arg)
{
    (void)arg;
    feeder *f = g_feed;
    if (!f || f->busy)
        return;
    f->busy = true;
    double t = h_now_s();
    if (!f->p) {
        feed_recover_step(f);
        f->credit = 0; /* on at the rate after it, no burst */
    } else if (f->rate > 0) {
        f->credit += (t - f->t_last) * f->rate;
        size_t n = (size_t)f->credit;
        if (n > f->end - f->next)
            n = f->end - f->next;
        f->credit -= (double)n;
        feed_upto(f, f->next + n);
    }
    f->t_last = t;
    if (f->p) {
        h_producer_poll(f->p);
        if (feed_failed(f))
            feed_lost_producer(f);
    }
    f->busy = false;
}

void h_feed_start(const char *bootstraps, const char *topic,
                  const h_stream *st, size_t from)
{
    if (g_feed)
        h_test_fail("h_feed_start: a feeder is running already");
    feeder *f = h_xcalloc(1, sizeof(*f));
    f->bs = h_xstrdup(bootstraps);
    f->topic = h_xstrdup(topic);
    f->st = st;
    f->from = from;
    f->next = from;
    f->end = st->n;
    f->t_last = h_now_s();
    g_feed = f; /* before anything can fail: h_feed_abandon frees it */
    feed_producer_new(f);
    h_set_idle_hook(feed_tick, NULL);
}

void h_feed_rate(double rate)
{
    if (!g_feed)
        h_test_fail("h_feed_rate: no feeder");
    feed_tick(NULL);
    g_feed->rate = rate;
    g_feed->credit = 0;
}

size_t h_feed_next(void) { return g_feed ? g_feed->next : 0; }

unsigned h_feed_recoveries(void) { return g_feed_recoveries; }

void h_feed_finish(int flush_ms)
{
    feeder *f = g_feed;
    if (!f)
        h_test_fail("h_feed_finish: no feeder");
    /* Everything produced and delivered by one producer, recovering from
     * a fatal error as often as it takes; flush_ms is each producer's. */
    for (;;) {
        if (!f->p) {
            feed_recover_step(f);
            h_sleep_ms(100);
            continue;
        }
        feed_upto(f, f->end);
        int64_t deadline = h_now_ms() + flush_ms;
        while (f->p && rd_kafka_outq_len(h_producer_rk(f->p)) > 0 &&
               h_now_ms() < deadline) {
            rd_kafka_flush(h_producer_rk(f->p), 200);
            if (feed_failed(f))
                feed_lost_producer(f);
        }
        if (f->p)
            break;
    }
    g_feed = NULL;
    h_set_idle_hook(NULL, NULL);
    int rc = h_producer_close(f->p, f->topic, 0);
    char *bs = f->bs, *topic = f->topic;
    const h_stream *st = f->st;
    free(f);
    if (rc) {
        free(bs);
        free(topic);
        h_test_fail("feeding the input: %s", h_last_error());
    }
    char bad[256] = "";
    for (int p = 0; p < st->nparts && !bad[0]; p++) {
        int64_t lo, hi;
        if (h_watermarks(bs, topic, p, &lo, &hi))
            snprintf(bad, sizeof(bad), "%s", h_last_error());
        else if (lo != 0 || hi != st->next[p])
            snprintf(bad, sizeof(bad), "%s [%d] holds offsets %lld to %lld "
                     "after feeding, want 0 to %lld", topic, p, (long long)lo,
                     (long long)hi, (long long)st->next[p]);
    }
    free(bs);
    free(topic);
    if (bad[0])
        h_test_fail("%s", bad);
}

void h_feed_abandon(void)
{
    feeder *f = g_feed;
    if (!f)
        return;
    g_feed = NULL;
    h_set_idle_hook(NULL, NULL);
    h_producer_abandon(f->p);
    free(f->bs);
    free(f->topic);
    free(f);
}

void h_feed_test_fatal(const char *reason)
{
    if (!g_feed || !g_feed->p)
        h_test_fail("h_feed_test_fatal: no feeder producing");
    rd_kafka_resp_err_t err = rd_kafka_test_fatal_error(
        h_producer_rk(g_feed->p),
        RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER, reason);
    if (err)
        h_test_fail("rd_kafka_test_fatal_error: %s", rd_kafka_err2str(err));
}

h_ckpt_chains h_kenv_ckpt_chains(h_kenv *e)
{
    h_record_list l = read_committed_all(e, e->ckt);
    h_ckpt_chains c = {0, 0, 0};
    char bad[300] = "";
    for (size_t i = 0; i < l.n && !bad[0]; i++) {
        const h_record *r = &l.recs[i];
        size_t slashes = 0; /* bs1/GROUP/TOPIC/P; chunks have two more */
        for (size_t k = 0; k < r->key_len; k++)
            slashes += ((const char *)r->key)[k] == '/';
        if (slashes != 3 || !r->value)
            continue;
        json_t *j = json_loadb(r->value, r->value_len, 0, NULL);
        size_t n = json_array_size(json_object_get(j, "states"));
        json_decref(j);
        if (n < 1)
            snprintf(bad, sizeof(bad), "%s %d:%lld: a manifest naming no "
                     "state (or no JSON): %.120s", e->ckt, (int)r->partition,
                     (long long)r->offset, (const char *)r->value);
        c.manifests++;
        c.chains += n > 1;
        if (n > c.longest)
            c.longest = n;
    }
    h_record_list_free(&l);
    if (bad[0])
        h_test_fail("%s", bad);
    return c;
}
