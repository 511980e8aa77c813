/*
 * test_exec.c - the executor (search/exec.h) on its own: a batch of jobs on
 * the model executor of tune-small.cfg, its memo (a finished job never
 * runs again), its budget accounting and the on_job callback.
 */
#include "config.h"
#include "exec.h"
#include "testkit.h"

#include <check.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SMALL MT_SOURCE_DIR "/tests/contracts/tune-small.cfg"

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

typedef struct told {
    int calls, last_runs;
    double last_gh;
} told;

static void on_job(void *ctx, const mt_exec_job *q, int runs, double gpu_hours)
{
    told *t = ctx;
    ck_assert_ptr_nonnull(q->out); /* its memo is read before the caller is told */
    t->calls++;
    t->last_runs = runs;
    t->last_gh = gpu_hours;
}

static void batch(mt_exec_job *v, const mt_kv *cfg)
{
    int i;
    memset(v, 0, 2 * sizeof *v);
    for (i = 0; i < 2; i++) {
        v[i].cfg = cfg;
        v[i].kind = "screen";
        v[i].rep = i;
    }
}

/* tune-small.cfg, a fresh directory (dir, a mkdtemp template), default
 * options and env for them. */
static tk *setup(char *dir, mt_exec_opts *o, mt_exec_env *env, mt_diag *d)
{
    tk *t = tk_open_path(SMALL, d);
    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_nonnull(mkdtemp(dir));
    mt_exec_opts_init(o);
    memset(env, 0, sizeof *env);
    env->reg = t->reg;
    env->c = t->contract;
    env->dir = dir;
    return t;
}

START_TEST(a_batch_is_memoized_and_charged)
{
    char dir[] = "/tmp/moetune-exec-XXXXXX";
    mt_diag *d = mt_diag_new();
    mt_exec_opts o;
    mt_exec_env env;
    tk *t = setup(dir, &o, &env, d);
    mt_exec *x;
    mt_exec_job v[2];
    told seen = {0};
    mt_kv *cfg;
    double gh;
    ck_assert_ptr_nonnull(cfg = mt_config_base(t->reg, t->contract, d));
    o.executor = MT_EXEC_MODEL;
    env.ctx = &seen;
    env.on_job = on_job;
    x = mt_exec_new(&o, &env, d);
    ck_assert_msg(x != NULL, "%s", mt_diag_count(d) ? mt_diag_at(d, 0)->message : "");
    ck_assert_ptr_nonnull(mt_exec_store(x));

    batch(v, cfg);
    ck_assert_int_eq(mt_exec_run(x, v, 2), 0);
    ck_assert(v[0].fresh && v[1].fresh);
    ck_assert(mt_exec_job_ok(v[0].out) && mt_exec_job_ok(v[1].out));
    ck_assert_int_eq(mt_exec_runs(x), 2);
    ck_assert_int_eq(mt_exec_executed(x), 2);
    gh = mt_exec_gpu_hours(x);
    ck_assert(gh > 0);
    ck_assert_int_eq(seen.calls, 2);
    ck_assert_int_eq(seen.last_runs, 2);
    ck_assert_double_eq(seen.last_gh, gh);
    mt_exec_jobs_free(v, 2);
    ck_assert_ptr_null(v[0].out);

    /* the same jobs again: read from the memo, charged, not executed */
    batch(v, cfg);
    ck_assert_int_eq(mt_exec_run(x, v, 2), 0);
    ck_assert(!v[0].fresh && !v[1].fresh);
    ck_assert(mt_exec_job_ok(v[0].out));
    ck_assert_int_eq(mt_exec_executed(x), 2);
    ck_assert_int_eq(mt_exec_runs(x), 4);
    ck_assert_int_eq(seen.calls, 4);
    /* ... and, taken as memoized reads, uncharged */
    mt_exec_uncharge(x, v, 2);
    ck_assert_int_eq(mt_exec_runs(x), 2);
    ck_assert_double_eq_tol(mt_exec_gpu_hours(x), gh, 1e-12);
    mt_exec_jobs_free(v, 2);

    mt_exec_destroy(&x);
    ck_assert_ptr_null(x);
    mt_exec_destroy(&x); /* twice: a no-op */
    mt_kv_destroy(&cfg);
    tk_close(&t);
    mt_diag_destroy(&d);
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}
END_TEST

START_TEST(zmq_without_an_endpoint_is_refused)
{
    char dir[] = "/tmp/moetune-exec-XXXXXX";
    mt_diag *d = mt_diag_new();
    mt_exec_opts o;
    mt_exec_env env;
    tk *t = setup(dir, &o, &env, d);
    ck_assert_int_eq(o.executor, MT_EXEC_LOCAL);
    ck_assert_int_eq(o.slots, 1);
    o.executor = MT_EXEC_ZMQ;
    ck_assert_ptr_null(mt_exec_new(&o, &env, d));
    tk_close(&t);
    mt_diag_destroy(&d);
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("exec");
    TCase *tc = tcase_create("model");
    tcase_add_test(tc, a_batch_is_memoized_and_charged);
    tcase_add_test(tc, zmq_without_an_endpoint_is_refused);
    suite_add_tcase(s, tc);
    return tk_run(s);
}
