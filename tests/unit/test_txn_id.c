/*
 * test_txn_id.c -- the transactional id a stage derives (stage/clients/txn.c,
 * bs_txn_id) and the host slots behind it (stage/kafka/txn_id.c), without a
 * broker (issue 26: two instances of one configuration on one host had one
 * id and fenced each other):
 *
 *   - two stages of one configuration on one host get different ids, each
 *     holding a slot; a slot released is taken again by the next, which
 *     then has the id of the one before (a restart aborts what its
 *     predecessor left open);
 *   - a slot held by another process is skipped, and is free again once
 *     that process is killed -9 (the kernel drops its lock);
 *   - exactly_once.transactional.id is used as is, and
 *     consumer.group.instance.id gives bloomstage-GROUP-INSTANCE, neither
 *     taking a slot;
 *   - a slot directory that cannot hold slot files still gives ids unique
 *     to each stage;
 *   - the fencing window: BS_TXN_FENCED_MAX fencings within
 *     BS_TXN_FENCED_WINDOW_S trip it, the same spread wider do not.
 *
 * The stages are built by hand (zeroed, with the settings bs_txn_id reads),
 * as test_state builds its own.
 */
#include "clients/txn.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

typedef struct fix {
    char dir[64];
    bs_config *cfg;
} fix;

static int setup(void **state)
{
    fix *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/bs-txnid-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    f->cfg = bs_config_new();
    assert_non_null(f->cfg);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fix *f = *state;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", f->dir);
    bs_config_destroy(f->cfg);
    free(f);
    return 0;
}

/* A stage as bs_txn_id sees it: one configuration for all (group g, the
 * same checkpoint.dir), the id computed with slot files in dir. */
static bs_stage *stage_with_id(fix *f, const char *dir, const char *explicit_id)
{
    bs_stage *s = calloc(1, sizeof(*s));
    assert_non_null(s);
    s->cfg = f->cfg;
    s->set.group_id = "g";
    s->set.checkpoint_dir = "/var/lib/bloomstage";
    s->set.transactional_id = explicit_id;
    bs_txn_id(s, dir);
    return s;
}

static void stage_free(bs_stage *s)
{
    bs_txn_slot_release(&s->txn_slot);
    free(s);
}

static void test_two_stages_differ(void **state)
{
    fix *f = *state;
    bs_stage *a = stage_with_id(f, f->dir, NULL);
    bs_stage *b = stage_with_id(f, f->dir, NULL);
    if (!strcmp(a->txn_id, b->txn_id))
        fail_msg("two stages of one configuration on one host got one "
                 "transactional id: %s", a->txn_id);
    assert_true(a->txn_slot.held && b->txn_slot.held);
    assert_int_equal(a->txn_slot.slot, 0);
    assert_int_equal(b->txn_slot.slot, 1);
    assert_non_null(strstr(a->txn_id, "bloomstage-g-"));
    assert_non_null(strstr(a->txn_id, "-slot0"));
    /* a restarts: its slot, and so its id, is taken back. */
    char was[sizeof(a->txn_id)];
    snprintf(was, sizeof(was), "%s", a->txn_id);
    stage_free(a);
    bs_stage *a2 = stage_with_id(f, f->dir, NULL);
    assert_string_equal(a2->txn_id, was);
    bs_stage *c = stage_with_id(f, f->dir, NULL);
    assert_int_equal(c->txn_slot.slot, 2);
    stage_free(a2);
    stage_free(b);
    stage_free(c);
}

static void test_other_process_killed(void **state)
{
    fix *f = *state;
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        bs_txn_slot sl = {0};
        char err[512];
        char ok = bs_txn_slot_take(&sl, f->dir, "g", err, sizeof(err)) == 0 &&
                          sl.slot == 0
                      ? 'y'
                      : 'n';
        if (write(ready[1], &ok, 1) != 1)
            _exit(2);
        pause();
        _exit(0);
    }
    close(ready[1]);
    char ok = 0;
    assert_int_equal(read(ready[0], &ok, 1), 1);
    close(ready[0]);
    assert_int_equal(ok, 'y');
    bs_stage *a = stage_with_id(f, f->dir, NULL);
    assert_int_equal(a->txn_slot.slot, 1);
    stage_free(a);
    assert_int_equal(kill(pid, SIGKILL), 0);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    bs_stage *b = stage_with_id(f, f->dir, NULL);
    assert_int_equal(b->txn_slot.slot, 0);
    stage_free(b);
}

static void test_explicit_and_static(void **state)
{
    fix *f = *state;
    bs_stage *a = stage_with_id(f, f->dir, "mine");
    assert_string_equal(a->txn_id, "mine");
    assert_false(a->txn_slot.held);
    stage_free(a);
    char err[256];
    assert_int_equal(bs_config_set(f->cfg, "consumer.group.instance.id",
                                   "i1", "test", err, sizeof(err)),
                     0);
    bs_stage *b = stage_with_id(f, f->dir, NULL);
    assert_string_equal(b->txn_id, "bloomstage-g-i1");
    assert_false(b->txn_slot.held);
    stage_free(b);
    /* The explicit id wins over the instance id too. */
    bs_stage *c = stage_with_id(f, f->dir, "mine");
    assert_string_equal(c->txn_id, "mine");
    stage_free(c);
}

static void test_no_slot_dir(void **state)
{
    fix *f = *state;
    char file[128];
    snprintf(file, sizeof(file), "%s/not-a-dir", f->dir);
    FILE *fp = fopen(file, "w");
    assert_non_null(fp);
    fclose(fp);
    bs_stage *a = stage_with_id(f, file, NULL);
    bs_stage *b = stage_with_id(f, file, NULL);
    assert_false(a->txn_slot.held);
    assert_non_null(strstr(a->txn_id, "bloomstage-g-"));
    if (!strcmp(a->txn_id, b->txn_id))
        fail_msg("without slots two stages got one id: %s", a->txn_id);
    stage_free(a);
    stage_free(b);
}

static void test_fence_window(void **state)
{
    (void)state;
    bs_fence_window w = {0};
    double t = 1000;
    for (int i = 1; i < BS_TXN_FENCED_MAX; i++)
        assert_false(bs_fence_window_add(&w, t += 1));
    assert_true(bs_fence_window_add(&w, t += 1));
    /* Spread wider than the window, they never trip it. */
    bs_fence_window slow = {0};
    double step = BS_TXN_FENCED_WINDOW_S / (BS_TXN_FENCED_MAX - 1) + 1;
    for (int i = 0; i < 4 * BS_TXN_FENCED_MAX; i++)
        assert_false(bs_fence_window_add(&slow, t += step));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_two_stages_differ, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_other_process_killed, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_explicit_and_static, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_no_slot_dir, setup, teardown),
        cmocka_unit_test(test_fence_window),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
