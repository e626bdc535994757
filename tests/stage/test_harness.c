/*
 * test_harness.c -- the harness (harness/, support.h) against
 * the real `bloomstage mock-broker` process, so that the integration tests
 * and bench/e2e.c can trust it.
 *
 * What must hold:
 *   - the broker starts, prints its bootstrap list, answers control commands
 *     with ok / error, and exits 0 on SIGTERM (every fixture's teardown);
 *   - 1000 records with keys, values and headers produced to explicit
 *     partitions of a 3-partition topic on a 3-broker cluster come back
 *     exactly: count, per-partition order, offsets, bytes, headers;
 *   - offsets committed by a standalone consumer are read back by
 *     h_committed, which does not join the group (a join would take ~3 s
 *     and make the next standalone commit fail with UNKNOWN_MEMBER_ID);
 *   - injected faults reach clients, in push order: a retriable Produce
 *     error fails a producer without retries and is ridden out by one with
 *     them (leader errors are ridden out by both: librdkafka does not count
 *     them as retries); clear-errors, topic-error and broker-down/up do
 *     what they say;
 *   - a read with isolation.level=read_committed gets the same records (the
 *     mock has no transactions: everything is committed);
 *   - unknown topics: a producer auto-creates one with 4 partitions, a
 *     reader creates nothing (as cmd_mock_broker.c documents);
 *   - the process helpers capture output, pass the environment, report exec
 *     failures and time out instead of hanging; a log file is kept, a piped
 *     stdout is read by lines, SIGTERM-then-SIGKILL stops a child that
 *     ignores SIGTERM, an exited child can be looked at without reaping it;
 *   - a cluster attached by its bootstrap list has no control channel.
 *
 * Needs BLOOMSTAGE_BIN (ctest sets it).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "support.h"

/* ---- fixtures: one fresh broker per test ---------------------------- */

static int setup_one_broker(void **state)
{
    static const char *const topics[] = {"in:3", NULL};
    return h_fixture_setup(state, 1, topics);
}

static int setup_three_brokers(void **state)
{
    static const char *const topics[] = {"in:3", "out:1", NULL};
    return h_fixture_setup(state, 3, topics);
}

/* SIGTERM must stop the broker cleanly, with exit status 0: the fixture's
 * teardown fails otherwise. */
#define teardown_broker h_fixture_teardown

static h_broker *broker_of(void **state)
{
    return ((h_fixture *)*state)->broker;
}

/* ---- the broker and its control channel ---------------------------- */

static void test_broker_control(void **state)
{
    h_broker *b = broker_of(state);
    const char *bs = h_broker_bootstraps(b);
    assert_non_null(strstr(bs, "127.0.0.1:"));

    int parts = 0;
    H_CHECK(h_topic_partitions(bs, "in", &parts));
    assert_int_equal(parts, 3);

    H_CHECK(h_broker_control(b, "create-topic extra 5"));
    H_CHECK(h_topic_partitions(bs, "extra", &parts));
    assert_int_equal(parts, 5);

    assert_int_equal(h_broker_control(b, "create-topic extra 5"), -1);
    assert_non_null(strstr(h_last_error(), "TOPIC_ALREADY_EXISTS"));
    assert_int_equal(h_broker_control(b, "no-such-command"), -1);
    assert_non_null(strstr(h_last_error(), "unknown command"));
    assert_int_equal(h_broker_control(b, "push-errors Produce 1 NO_SUCH"),
                     -1);
    assert_non_null(strstr(h_last_error(), "unknown error name"));
    assert_int_equal(h_broker_control(b, "push-errors Bogus 1 _TRANSPORT"),
                     -1);
    assert_non_null(strstr(h_last_error(), "unknown API"));
    /* still answering after errors */
    H_CHECK(h_broker_control(b, "clear-errors Fetch"));
}

/* ---- produce, consume ---------------------------------------------- */

#define N_RECORDS 1000

typedef struct gen_record {
    char key[32];
    char value[64];
    char seq[24];
    h_header headers[3];
    h_record rec;
} gen_record;

/* Record i: key "key-i" (none for every 100th), value "value-i-..." (a
 * tombstone for every 250th), headers seq=i, src=test and, for every 7th,
 * a null-valued "flag"; partition i % 3. */
static gen_record *make_records(size_t n)
{
    gen_record *g = calloc(n, sizeof(*g));
    assert_non_null(g);
    for (size_t i = 0; i < n; i++) {
        snprintf(g[i].key, sizeof(g[i].key), "key-%zu", i);
        snprintf(g[i].value, sizeof(g[i].value), "value-%zu-%zx", i,
                 i * 2654435761u);
        snprintf(g[i].seq, sizeof(g[i].seq), "%zu", i);
        g[i].rec = h_rec(i % 100 == 1 ? NULL : g[i].key,
                         i % 250 == 3 ? NULL : g[i].value);
        g[i].headers[0] = (h_header){"seq", g[i].seq, strlen(g[i].seq)};
        g[i].headers[1] = (h_header){"src", "test", 4};
        g[i].headers[2] = (h_header){"flag", NULL, 0};
        g[i].rec.headers = g[i].headers;
        g[i].rec.n_headers = i % 7 == 0 ? 3 : 2;
        g[i].rec.partition = (int32_t)(i % 3);
    }
    return g;
}

static void assert_bytes(const void *got, size_t got_len, const void *want,
                         size_t want_len, size_t i, const char *what)
{
    if (!want) {
        if (got)
            fail_msg("record %zu: %s should be null", i, what);
        return;
    }
    if (!got || got_len != want_len || memcmp(got, want, want_len))
        fail_msg("record %zu: %s '%.*s' != '%.*s'", i, what,
                 got ? (int)got_len : 4, got ? (const char *)got : "NULL",
                 (int)want_len, (const char *)want);
}

static void test_produce_consume_roundtrip(void **state)
{
    h_broker *b = broker_of(state);
    const char *bs = h_broker_bootstraps(b);
    gen_record *g = make_records(N_RECORDS);
    h_record *recs = malloc(N_RECORDS * sizeof(*recs));
    assert_non_null(recs);
    for (size_t i = 0; i < N_RECORDS; i++)
        recs[i] = g[i].rec;

    H_CHECK(h_produce(bs, "in", H_PARTITION_PER_RECORD, recs, N_RECORDS));

    h_record_list got = {0};
    H_CHECK(h_consume_all(bs, "in", H_CONSUME_MS, &got));
    assert_int_equal(got.n, N_RECORDS);
    for (int32_t p = 0; p < 3; p++)
        assert_int_equal(h_record_list_count_partition(&got, p),
                         N_RECORDS / 3 + (p < N_RECORDS % 3));

    /* Sorted by partition then offset; within a partition the records come
     * in produce order with offsets 0, 1, 2, ... */
    size_t k = 0;
    for (int32_t p = 0; p < 3; p++) {
        int64_t offset = 0;
        for (size_t i = (size_t)p; i < N_RECORDS; i += 3, k++, offset++) {
            const h_record *r = &got.recs[k];
            assert_int_equal(r->partition, p);
            assert_int_equal(r->offset, offset);
            assert_true(r->timestamp > 0);
            assert_bytes(r->key, r->key_len, g[i].rec.key, g[i].rec.key_len,
                         i, "key");
            assert_bytes(r->value, r->value_len, g[i].rec.value,
                         g[i].rec.value_len, i, "value");
            if (r->key) /* NUL-terminated for string compares */
                assert_string_equal(r->key, g[i].key);
            assert_int_equal(r->n_headers, g[i].rec.n_headers);
            for (size_t h = 0; h < r->n_headers; h++) {
                assert_string_equal(r->headers[h].name, g[i].headers[h].name);
                assert_bytes(r->headers[h].value, r->headers[h].value_len,
                             g[i].headers[h].value,
                             g[i].headers[h].value_len, i, "header");
            }
        }
    }

    /* Reading again gives the same (nothing was consumed "away"), and an
     * empty topic is read at once. */
    h_record_list again = {0};
    H_CHECK(h_consume_all(bs, "in", H_CONSUME_MS, &again));
    assert_int_equal(again.n, N_RECORDS);
    h_record_list_free(&again);
    /* read_committed: the same records (the mock has no transactions, so
     * its last stable offset is the high watermark). */
    H_CHECK(h_consume_all_conf(bs, "in", H_CONSUME_MS, H_READ_COMMITTED,
                               &again));
    assert_int_equal(again.n, N_RECORDS);
    for (size_t i = 0; i < N_RECORDS; i++) {
        assert_int_equal(again.recs[i].partition, got.recs[i].partition);
        assert_int_equal(again.recs[i].offset, got.recs[i].offset);
        assert_int_equal(again.recs[i].value_len, got.recs[i].value_len);
    }
    h_record_list_free(&again);
    double t0 = h_now_s();
    H_CHECK(h_consume_all(bs, "out", H_CONSUME_MS, &again));
    assert_int_equal(again.n, 0);
    assert_true(h_now_s() - t0 < 3.0);

    /* The partitioner path: equal keys land in one partition. */
    h_record same[20];
    for (size_t i = 0; i < 20; i++)
        same[i] = h_rec(i % 2 ? "odd" : "even", "x");
    H_CHECK(h_produce(bs, "in", RD_KAFKA_PARTITION_UA, same, 20));
    H_CHECK(h_consume_all(bs, "in", H_CONSUME_MS, &again));
    assert_int_equal(again.n, N_RECORDS + 20);
    int32_t part_of[2] = {-1, -1};
    size_t seen = 0;
    for (size_t i = 0; i < again.n; i++) {
        const h_record *r = &again.recs[i];
        if (!r->key || (strcmp(r->key, "odd") && strcmp(r->key, "even")))
            continue;
        int odd = !strcmp(r->key, "odd");
        if (part_of[odd] < 0)
            part_of[odd] = r->partition;
        assert_int_equal(r->partition, part_of[odd]);
        seen++;
    }
    assert_int_equal(seen, 20);

    int64_t lo, hi;
    H_CHECK(h_watermarks(bs, "in", 0, &lo, &hi));
    assert_int_equal(lo, 0);
    assert_int_equal(hi, (int64_t)h_record_list_count_partition(&again, 0));

    h_record_list_free(&again);
    h_record_list_free(&got);
    h_record_list_free(NULL);
    free(recs);
    free(g);
}

/* ---- committed offsets --------------------------------------------- */

static void test_committed_offsets(void **state)
{
    h_broker *b = broker_of(state);
    const char *bs = h_broker_bootstraps(b);
    int64_t off[3] = {0, 0, 0};

    /* A group nobody used has no offsets. */
    H_CHECK(h_committed(bs, "g", "in", 3, off));
    for (int p = 0; p < 3; p++)
        assert_int_equal(off[p], RD_KAFKA_OFFSET_INVALID);

    /* A throwaway standalone consumer in group "g" commits an explicit
     * list, synchronously, with the plain rd_kafka_commit(). */
    rd_kafka_conf_t *conf = h_kafka_conf(bs);
    char errstr[256];
    assert_int_equal(rd_kafka_conf_set(conf, "group.id", "g", errstr,
                                       sizeof(errstr)), RD_KAFKA_CONF_OK);
    assert_int_equal(rd_kafka_conf_set(conf, "enable.auto.commit", "false",
                                       errstr, sizeof(errstr)),
                     RD_KAFKA_CONF_OK);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr,
                                  sizeof(errstr));
    if (!rk)
        fail_msg("rd_kafka_new: %s", errstr);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(2);
    rd_kafka_topic_partition_list_add(l, "in", 0)->offset = 17;
    rd_kafka_topic_partition_list_add(l, "in", 2)->offset = 42;
    rd_kafka_resp_err_t err = rd_kafka_commit(rk, l, 0);
    if (err) {
        h_dump_kafka_log();
        fail_msg("rd_kafka_commit: %s", rd_kafka_err2str(err));
    }
    rd_kafka_topic_partition_list_destroy(l);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);

    /* Read back without joining: fast (a join takes ~3 s on the mock). */
    double t0 = h_now_s();
    H_CHECK(h_committed(bs, "g", "in", 3, off));
    assert_true(h_now_s() - t0 < 2.5);
    assert_int_equal(off[0], 17);
    assert_int_equal(off[1], RD_KAFKA_OFFSET_INVALID);
    assert_int_equal(off[2], 42);

    /* h_commit overwrites; had h_committed joined the group, the mock would
     * now refuse a standalone commit with UNKNOWN_MEMBER_ID. */
    const int64_t next[3] = {18, 5, -1};
    H_CHECK(h_commit(bs, "g", "in", 3, next));
    H_CHECK(h_committed(bs, "g", "in", 3, off));
    assert_int_equal(off[0], 18);
    assert_int_equal(off[1], 5);
    assert_int_equal(off[2], 42);

    /* Groups are separate. */
    H_CHECK(h_committed(bs, "other", "in", 3, off));
    assert_int_equal(off[0], RD_KAFKA_OFFSET_INVALID);

    /* A partition that does not exist is an error, not an offset. */
    int64_t four[4];
    assert_int_equal(h_committed(bs, "g", "in", 4, four), -1);
    assert_non_null(strstr(h_last_error(), "UNKNOWN_TOPIC_OR_PART"));
    const int64_t bad[4] = {-1, -1, -1, 3};
    assert_int_equal(h_commit(bs, "g", "in", 4, bad), -1);
    assert_non_null(strstr(h_last_error(), "UNKNOWN_TOPIC_OR_PART"));
}

/* ---- fault injection ----------------------------------------------- */

static void test_injected_produce_errors(void **state)
{
    h_broker *b = broker_of(state);
    const char *bs = h_broker_bootstraps(b);
    static const char *const no_retries[] = {"retries=0", NULL};
    h_record r = h_rec("k", "v");
    h_record ten[10];
    for (size_t i = 0; i < 10; i++)
        ten[i] = h_rec("k", "v");

    /* librdkafka 2.0.2 handles a leader error by refreshing metadata and
     * requeueing the batch, which does not count as a retry: even a producer
     * with retries=0 rides out NOT_LEADER_FOR_PARTITION.  Errors queue in
     * push order, so the error after the three leader errors, a plain
     * retriable one, is what fails that producer. */
    H_CHECK(h_broker_control(b, "push-errors Produce 3 "
                                "NOT_LEADER_FOR_PARTITION"));
    H_CHECK(h_broker_control(b, "push-errors Produce 1 NOT_ENOUGH_REPLICAS"));
    assert_int_equal(h_produce_conf(bs, "in", 0, &r, 1, no_retries), -1);
    assert_non_null(strstr(h_last_error(), "NOT_ENOUGH_REPLICAS"));

    /* A producer that retries (the harness's default) rides out both. */
    H_CHECK(h_broker_control(b, "push-errors Produce 3 "
                                "NOT_LEADER_FOR_PARTITION"));
    H_CHECK(h_broker_control(b, "push-errors Produce 2 REQUEST_TIMED_OUT"));
    H_CHECK(h_produce(bs, "in", 0, ten, 10));
    /* ...and used every error up: retries=0 succeeds now. */
    H_CHECK(h_produce_conf(bs, "in", 0, &r, 1, no_retries));

    h_record_list got = {0};
    H_CHECK(h_consume_all(bs, "in", H_CONSUME_MS, &got));
    assert_int_equal(got.n, 11); /* the failed record was never stored */
    h_record_list_free(&got);

    /* clear-errors empties the queue. */
    H_CHECK(h_broker_control(b, "push-errors Produce 5 REQUEST_TIMED_OUT"));
    H_CHECK(h_broker_control(b, "clear-errors Produce"));
    H_CHECK(h_produce_conf(bs, "in", 1, &r, 1, no_retries));

    /* A permanent error fails even a retrying producer. */
    H_CHECK(h_broker_control(b, "push-errors Produce 1 "
                                "TOPIC_AUTHORIZATION_FAILED"));
    assert_int_equal(h_produce(bs, "in", 1, &r, 1), -1);
    assert_non_null(strstr(h_last_error(), "TOPIC_AUTHORIZATION_FAILED"));

    /* _TRANSPORT: the broker drops the connection instead of answering. */
    H_CHECK(h_broker_control(b, "push-errors Produce 1 _TRANSPORT"));
    assert_int_equal(h_produce_conf(bs, "in", 2, &r, 1, no_retries), -1);
    assert_non_null(strstr(h_last_error(), "_TRANSPORT"));
    H_CHECK(h_produce(bs, "in", 2, &r, 1));
}

static void test_topic_error_and_broker_down(void **state)
{
    h_broker *b = broker_of(state);
    const char *bs = h_broker_bootstraps(b);
    h_record r = h_rec("k", "v");
    h_record_list got = {0};

    H_CHECK(h_broker_control(b, "topic-error in TOPIC_AUTHORIZATION_FAILED"));
    assert_int_equal(h_consume_all(bs, "in", 5000, &got), -1);
    assert_non_null(strstr(h_last_error(), "TOPIC_AUTHORIZATION_FAILED"));
    H_CHECK(h_broker_control(b, "topic-error in NO_ERROR"));
    H_CHECK(h_consume_all(bs, "in", 5000, &got));
    assert_int_equal(got.n, 0);

    /* A cluster whose only broker is down: the producer gives up after its
     * message timeout, and works again once the broker is back. */
    static const char *const short_timeout[] = {"message.timeout.ms=1500",
                                                NULL};
    H_CHECK(h_broker_control(b, "broker-down 1"));
    double t0 = h_now_s();
    assert_int_equal(h_produce_conf(bs, "in", 0, &r, 1, short_timeout), -1);
    assert_true(h_now_s() - t0 < 8.0);
    assert_non_null(strstr(h_last_error(), "not delivered"));
    H_CHECK(h_broker_control(b, "broker-up 1"));
    H_CHECK(h_produce(bs, "in", 0, &r, 1));
    H_CHECK(h_consume_all(bs, "in", H_CONSUME_MS, &got));
    assert_int_equal(got.n, 1);
    h_record_list_free(&got);

    assert_int_equal(h_broker_control(b, "broker-down 9"), -1);
}

/* ---- unknown topics ------------------------------------------------ */

static void test_unknown_topics(void **state)
{
    h_broker *b = broker_of(state);
    const char *bs = h_broker_bootstraps(b);
    h_record_list got = {0};
    int parts = 0;

    /* Readers create nothing. */
    assert_int_equal(h_consume_all(bs, "nobody", 5000, &got), -1);
    assert_non_null(strstr(h_last_error(), "does not exist"));
    assert_int_equal(h_topic_partitions(bs, "nobody", &parts), -1);
    int64_t off[1];
    assert_int_equal(h_committed(bs, "g", "nobody", 1, off), -1);
    assert_int_equal(h_topic_partitions(bs, "nobody", &parts), -1);

    /* A producer auto-creates, with the mock's default of 4 partitions. */
    h_record r = h_rec("k", "v");
    H_CHECK(h_produce(bs, "auto", RD_KAFKA_PARTITION_UA, &r, 1));
    H_CHECK(h_topic_partitions(bs, "auto", &parts));
    assert_int_equal(parts, 4);
    H_CHECK(h_consume_all(bs, "auto", H_CONSUME_MS, &got));
    assert_int_equal(got.n, 1);
    h_record_list_free(&got);
}

/* ---- mock-broker as a plain process -------------------------------- */

static void test_mock_broker_cli(void **state)
{
    (void)state;
    const char *bin = h_bloomstage_path();
    if (!bin)
        fail_msg("%s", h_last_error());
    h_proc *p = NULL;
    int st = 0;

    char *bad[] = {(char *)bin, "mock-broker", "-t", "nocount", NULL};
    H_CHECK(h_process_spawn(bad, NULL, &p));
    H_CHECK(h_process_wait(p, 10000, &st));
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 2);
    assert_non_null(strstr(h_process_stderr(p), "TOPIC:PARTITIONS"));
    h_process_free(p);

    /* Without --control: bootstrap line first, runs until SIGTERM, exit 0. */
    char *plain[] = {(char *)bin, "mock-broker", "-b", "2", "-t", "a:2",
                     NULL};
    H_CHECK(h_process_spawn(plain, NULL, &p));
    double t0 = h_now_s();
    while (!strchr(h_process_stdout(p), '\n') && h_now_s() - t0 < 10)
        if (h_process_wait(p, 20, &st) != 1)
            fail_msg("mock-broker exited early: %s", h_process_stderr(p));
    const char *out = h_process_stdout(p);
    assert_non_null(strchr(out, '\n'));
    char *bs = h_strdupf("%.*s", (int)(strchr(out, '\n') - out), out);
    assert_non_null(strchr(bs, ','));  /* two brokers */
    int parts = 0;
    H_CHECK(h_topic_partitions(bs, "a", &parts));
    assert_int_equal(parts, 2);
    assert_int_equal(h_process_wait(p, 300, &st), 1); /* stdin is no stop */
    H_CHECK(h_process_kill(p, SIGTERM));
    H_CHECK(h_process_wait(p, 10000, &st));
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    free(bs);
    h_process_free(p);
}

/* ---- processes and files ------------------------------------------- */

static void test_process_helpers(void **state)
{
    (void)state;
    h_proc *p = NULL;
    int st = 0;

    char *sh[] = {"sh", "-c", "echo out $H_TEST_VAR; echo err >&2; exit 3",
                  NULL};
    char *env[] = {"H_TEST_VAR=hello", NULL};
    H_CHECK(h_process_spawn(sh, env, &p));
    H_CHECK(h_process_wait(p, 10000, &st));
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 3);
    assert_string_equal(h_status_str(st), "exit 3");
    assert_string_equal(h_process_stdout(p), "out hello\n");
    assert_string_equal(h_process_stderr(p), "err\n");
    H_CHECK(h_process_wait(p, 0, &st)); /* reaped: same answer again */
    assert_int_equal(WEXITSTATUS(st), 3);
    h_process_free(p);

    char *missing[] = {"/nonexistent/binary", NULL};
    assert_int_equal(h_process_spawn(missing, NULL, &p), -1);
    assert_null(p);
    assert_non_null(strstr(h_last_error(), "No such file"));

    char *sleeper[] = {"sleep", "30", NULL};
    H_CHECK(h_process_spawn(sleeper, NULL, &p));
    double t0 = h_now_s();
    assert_int_equal(h_process_wait(p, 200, &st), 1);
    assert_true(h_now_s() - t0 < 2.0);
    H_CHECK(h_process_kill(p, SIGTERM));
    H_CHECK(h_process_wait(p, 5000, &st));
    assert_true(WIFSIGNALED(st));
    assert_string_equal(h_status_str(st), "killed by SIGTERM");
    h_process_free(p);

    /* free kills a child still running */
    H_CHECK(h_process_spawn(sleeper, NULL, &p));
    h_process_free(p);
    h_process_free(NULL);

    char *dir = NULL;
    H_CHECK(h_tmpdir_new(&dir));
    char *sub = h_strdupf("%s/sub", dir);
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "mkdir -p %s/a/b && touch %s/a/b/c", sub, sub);
    assert_int_equal(system(cmd), 0);
    char *file = h_strdupf("%s/f.conf", dir);
    H_CHECK(h_write_file(file, "a=1\nb=2\n"));
    char *text = NULL;
    size_t len = 0;
    H_CHECK(h_read_file(file, &text, &len));
    assert_string_equal(text, "a=1\nb=2\n");
    assert_int_equal(len, 8);
    free(text);
    H_CHECK(h_tmpdir_remove(dir));
    assert_int_equal(h_read_file(file, &text, NULL), -1);
    H_CHECK(h_tmpdir_remove(dir)); /* already gone: fine */
    free(file);
    free(sub);
    free(dir);

    assert_non_null(h_bloomstage_path());

    /* A log file that stays; stdout piped and read by lines. */
    H_CHECK(h_tmpdir_new(&dir));
    char *log = h_strdupf("%s/child.log", dir);
    char *lines[] = {"sh", "-c", "echo one; echo err >&2; echo two; exit 4",
                     NULL};
    h_spawn_opts so = {.log_path = log, .pipe_stdout = true};
    H_CHECK(h_process_spawn_opts(lines, &so, &p));
    char line[64];
    H_CHECK(h_process_read_line(p, 10000, line, sizeof(line)));
    assert_string_equal(line, "one");
    H_CHECK(h_process_read_line(p, 10000, line, sizeof(line)));
    assert_string_equal(line, "two");
    assert_int_equal(h_process_read_line(p, 10000, line, sizeof(line)), -1);
    assert_non_null(strstr(h_last_error(), "ended (exit 4)"));
    /* Exited and not reaped: peek sees it, again and again. */
    for (int i = 0; i < 2; i++) {
        H_CHECK(h_process_peek(p, &st));
        assert_string_equal(h_status_str(st), "exit 4");
    }
    H_CHECK(h_process_wait(p, 0, &st));
    assert_string_equal(h_status_str(st), "exit 4");
    assert_string_equal(h_process_stderr(p), "err\n");
    h_process_free(p);
    H_CHECK(h_read_file(log, &text, NULL));
    assert_string_equal(text, "err\n");
    free(text);

    /* stdout and stderr both to the log; a child deaf to SIGTERM is killed
     * after the timeout; one still running peeks as running. */
    char *deaf[] = {"sh", "-c", "trap '' TERM; echo up; exec sleep 30", NULL};
    so = (h_spawn_opts){.log_path = log};
    H_CHECK(h_process_spawn_opts(deaf, &so, &p));
    t0 = h_now_s();
    while (!strstr(h_process_stdout(p), "up") && h_now_s() - t0 < 10)
        h_sleep_ms(10);
    assert_string_equal(h_process_stderr(p), "up\n");
    assert_int_equal(h_process_peek(p, &st), 1);
    t0 = h_now_s();
    assert_int_equal(h_process_terminate(p, 300, &st), 1);
    assert_true(h_now_s() - t0 < 5.0);
    assert_string_equal(h_status_str(st), "killed by SIGKILL");
    h_process_free(p);
    H_CHECK(h_tmpdir_remove(dir));
    free(log);
    free(dir);
}

/* ---- a cluster attached by its bootstrap list ---------------------- */

static void test_attached_cluster(void **state)
{
    h_broker *mock = broker_of(state);
    h_broker *b = NULL;
    H_CHECK(h_broker_attach(h_broker_bootstraps(mock), &b));
    assert_false(h_broker_is_mock(b));
    assert_true(h_broker_is_mock(mock));
    assert_int_equal(h_broker_pid(b), -1);
    const char *bs = h_broker_bootstraps(b);
    assert_string_equal(bs, h_broker_bootstraps(mock));
    /* The same cluster, seen through the other handle... */
    int parts = 0;
    H_CHECK(h_topic_partitions(bs, "in", &parts));
    assert_int_equal(parts, 3);
    /* ...without the control channel, and nothing to stop. */
    assert_int_equal(h_broker_control(b, "broker-down 1"), -1);
    assert_non_null(strstr(h_last_error(), "not a mock broker"));
    assert_string_equal(h_broker_stderr(b), "");
    H_CHECK(h_broker_stop(b));
    assert_int_equal(h_broker_attach("no-port", &b), -1);
    assert_null(b);
}

int main(void)
{
    h_test_main("test_harness", NULL, NULL, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_process_helpers),
        cmocka_unit_test(test_mock_broker_cli),
        cmocka_unit_test_setup_teardown(test_broker_control, setup_one_broker,
                                        teardown_broker),
        cmocka_unit_test_setup_teardown(test_produce_consume_roundtrip,
                                        setup_three_brokers, teardown_broker),
        cmocka_unit_test_setup_teardown(test_committed_offsets,
                                        setup_one_broker, teardown_broker),
        cmocka_unit_test_setup_teardown(test_injected_produce_errors,
                                        setup_one_broker, teardown_broker),
        cmocka_unit_test_setup_teardown(test_topic_error_and_broker_down,
                                        setup_one_broker, teardown_broker),
        cmocka_unit_test_setup_teardown(test_unknown_topics, setup_one_broker,
                                        teardown_broker),
        cmocka_unit_test_setup_teardown(test_attached_cluster,
                                        setup_one_broker, teardown_broker),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
