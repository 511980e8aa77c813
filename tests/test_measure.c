/*
 * test_measure.c - one measurement end to end against the real sim: the
 * contract's template, a real child process, the log parser, the typed
 * outcome with its evidence line, the declared window, every GPU's peak, the
 * plugins' verdicts, and the store (resume finds it).
 */
#include "measure.h"
#include "testkit.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];
static const char *sim_path = MT_SIM_BIN; /* the {sim} of the next measure() */

static void fresh_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/moetune-measure-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

/* Measures the example's base config (+ sets) with the sim environment
 * variables given as NAME=VALUE pairs (injections). */
static const char *contract_name = "qwen3-30b-a3b-h100x16.cfg"; /* of the next measure() */

static mt_measure measure(const char *kind, const char *const *sets, const char *const *env,
                          mt_store **st_out, tk **t_out)
{
    tk *t = tk_open(contract_name);
    mt_measure_spec spec;
    mt_measure m;
    mt_diag *d = mt_diag_new();
    mt_store *st;
    char run_dir[512];
    size_t i;
    for (i = 0; sets && sets[i]; i++)
        tk_set(t, sets[i]);
    for (i = 0; env && env[i]; i++)
        putenv((char *)env[i]);
    st = mt_store_open(dir, t->contract, d);
    ck_assert_msg(st != NULL, "%s", mt_diag_count(d) ? mt_diag_at(d, 0)->message : "");
    snprintf(run_dir, sizeof run_dir, "%s/run-%s", dir, kind);
    memset(&spec, 0, sizeof spec);
    spec.contract = t->contract;
    spec.reg = t->reg;
    spec.config = t->cfg;
    spec.kind = kind;
    spec.run_dir = run_dir;
    spec.sim_path = sim_path;
    spec.time_limit_s = 60;
    spec.hang_factor = 4;
    ck_assert_int_eq(mt_measure_run(&spec, st, &m, d), 0);
    for (i = 0; env && env[i]; i++) {
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)strcspn(env[i], "="), env[i]);
        unsetenv(name);
    }
    mt_diag_destroy(&d);
    *st_out = st;
    *t_out = t;
    return m;
}

START_TEST(ok_run_summarized_verified_stored)
{
    mt_store *st;
    tk *t;
    mt_measure m;
    mt_store_run prev;
    mt_diag *d = mt_diag_new();
    fresh_dir();
    m = measure("screen", NULL, NULL, &st, &t);
    ck_assert_msg(m.outcome == MT_OUTCOME_OK, "%s: %s", mt_outcome_name(m.outcome), m.evidence);
    /* the declared window: screen warm-up 10, window 10 */
    ck_assert_int_eq(m.first, 11);
    ck_assert_int_eq(m.last, 20);
    ck_assert_uint_eq(m.n_window, 10);
    /* point A4 of the calibration: ~45.65 s a step at ~133 TFLOP/s/GPU, 1% noise */
    ck_assert_msg(m.median_step_ms > 40000 && m.median_step_ms < 52000, "%.1f", m.median_step_ms);
    ck_assert(m.median_tflops > 115 && m.median_tflops < 150);
    ck_assert(m.loss_finite);
    /* every GPU's peak from the sim's per-GPU report, hottest ~61 GB */
    ck_assert_str_eq(m.peak_source, "sim");
    ck_assert(m.peak_bytes > 55e9 && m.peak_bytes < 70e9);
    ck_assert(m.sim_seconds > 180);
    /* the plugins read the arguments dump: EP 16 was applied */
    {
        size_t i;
        int seen = 0;
        for (i = 0; i < m.verdicts.n; i++)
            if (!strcmp(m.verdicts.v[i].knob, "expert_model_parallel_size")) {
                ck_assert_uint_eq(m.verdicts.v[i].verdict, MT_VERDICT_APPLIED);
                seen = 1;
            }
        ck_assert(seen);
        ck_assert_int_eq(m.not_applied, 0);
    }
    ck_assert_int_gt(m.run_id, 0);
    memset(&prev, 0, sizeof prev);
    ck_assert_int_eq(mt_store_find_run(st, m.config_id, "screen", 0, -1, &prev, d), 1);
    ck_assert_str_eq(prev.outcome, "ok");
    mt_store_run_clear(&prev);
    mt_measure_clear(&m);
    mt_store_destroy(&st);
    tk_close(&t);
    mt_diag_destroy(&d);
}
END_TEST

static void expect_outcome(const char *inject, int outcome, const char *needle)
{
    mt_store *st;
    tk *t;
    mt_measure m;
    char e1[64], e2[64], e3[64];
    const char *env[4];
    snprintf(e1, sizeof e1, "MOETUNE_SIM_INJECT=%s", inject);
    snprintf(e2, sizeof e2, "MOETUNE_SIM_INJECT_STEP=4");
    snprintf(e3, sizeof e3, "MOETUNE_SIM_INJECT_RANK=5");
    env[0] = e1, env[1] = e2, env[2] = e3, env[3] = NULL;
    fresh_dir();
    m = measure("screen", NULL, env, &st, &t);
    ck_assert_msg(m.outcome == outcome, "inject %s: got %s (%s)", inject, mt_outcome_name(m.outcome),
                  m.evidence);
    ck_assert_msg(strstr(m.evidence, needle), "inject %s: evidence \"%s\" lacks \"%s\"", inject,
                  m.evidence, needle);
    mt_measure_clear(&m);
    mt_store_destroy(&st);
    tk_close(&t);
}

START_TEST(nan_outcome) { expect_outcome("nan", MT_OUTCOME_NAN, "nan"); }
END_TEST
START_TEST(infra_outcome) { expect_outcome("nccl", MT_OUTCOME_INFRA, "NCCL"); }
END_TEST
START_TEST(hang_outcome) { expect_outcome("hang", MT_OUTCOME_HANG, "iteration"); }
END_TEST
START_TEST(crash_outcome) { expect_outcome("crash", MT_OUTCOME_CRASH, "signal"); }
END_TEST

START_TEST(oom_outcome)
{
    static const char *const sets[] = {"micro_batch_size=8", NULL};
    mt_store *st;
    tk *t;
    mt_measure m;
    fresh_dir();
    m = measure("screen", sets, NULL, &st, &t);
    ck_assert_msg(m.outcome == MT_OUTCOME_OOM, "%s: %s", mt_outcome_name(m.outcome), m.evidence);
    ck_assert_ptr_nonnull(strstr(m.evidence, "OutOfMemoryError"));
    mt_measure_clear(&m);
    mt_store_destroy(&st);
    tk_close(&t);
}
END_TEST

START_TEST(launch_error_outcome)
{
    tk *t = tk_open("qwen3-30b-a3b-h100x16.cfg");
    mt_measure_spec spec;
    mt_measure m;
    mt_diag *d = mt_diag_new();
    fresh_dir();
    memset(&spec, 0, sizeof spec);
    spec.contract = t->contract;
    spec.reg = t->reg;
    spec.config = t->cfg;
    spec.kind = "screen";
    spec.run_dir = dir;
    spec.sim_path = "/nonexistent/moetune-sim";
    ck_assert_int_eq(mt_measure_run(&spec, NULL, &m, d), 0);
    ck_assert_int_eq(m.outcome, MT_OUTCOME_LAUNCH_ERROR);
    mt_measure_clear(&m);
    mt_diag_destroy(&d);
    tk_close(&t);
}
END_TEST

/* ---- logs no run can print, from the real sim's Megatron-LM log ---------------------- */

/* Measures the base config through DIR/sim.sh: body, with $SIM the real
 * moetune-sim, edits what the sim prints (a real log, changed where the
 * test says).  The outcome; *out keeps the measurement (mt_measure_clear). */
static void measure_edited(const char *contract, const char *body, mt_measure *out)
{
    char path[400], text[4096];
    mt_store *st;
    tk *t;
    FILE *f;
    fresh_dir();
    snprintf(path, sizeof path, "%s/sim.sh", dir);
    snprintf(text, sizeof text, "#!/bin/sh\n# test_measure.c: the real sim's log, edited\nSIM='%s'\n%s\n",
             MT_SIM_BIN, body);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    ck_assert_int_eq(chmod(path, 0755), 0);
    sim_path = path;
    contract_name = contract;
    *out = measure("screen", NULL, NULL, &st, &t);
    sim_path = MT_SIM_BIN;
    contract_name = "qwen3-30b-a3b-h100x16.cfg";
    mt_store_destroy(&st);
    tk_close(&t);
}

/* The Megatron-LM and the Megatron-Bridge log (the sim prints each). */
static const char *const dialects[] = {"qwen3-30b-a3b-h100x16.cfg",
                                       "qwen3-30b-a3b-h100x16-bridge.cfg"};

/* Issue 18, item 10: an elapsed time of nan, inf or below zero in the
 * window (iteration 14 of 11-20) is a broken log, typed crash with its
 * line; the same value in the warm-up (iteration 3) leaves the run ok.
 * Loop index: value (i % 3) in log dialect (i / 3). */
static const char *const impossible[] = {"nan", "inf", "-45650.3"};

START_TEST(impossible_step_time_is_crash_with_its_line)
{
    char body[1024];
    mt_measure m;
    snprintf(body, sizeof body,
             "\"$SIM\" \"$@\" 2>&1 | sed -e '/ iteration  *14\\//s/elapsed time per iteration "
             "(ms): [^ |]*/elapsed time per iteration (ms): %s/'",
             impossible[_i % 3]);
    measure_edited(dialects[_i / 3], body, &m);
    ck_assert_msg(m.outcome == MT_OUTCOME_CRASH, "%s: %s (%s)", impossible[_i % 3],
                  mt_outcome_name(m.outcome), m.evidence);
    ck_assert_msg(strstr(m.evidence, "impossible step time in the window: log line ") &&
                      strstr(m.evidence, "iteration 14: \"elapsed time per iteration (ms): "),
                  "%s", m.evidence);
    ck_assert_msg(strstr(m.evidence, _i % 3 == 2 ? "-45650.3" : impossible[_i % 3]), "%s",
                  m.evidence);
    ck_assert_int_gt(m.run_id, 0); /* stored, as a failed run */
    mt_measure_clear(&m);
    snprintf(body, sizeof body,
             "\"$SIM\" \"$@\" 2>&1 | sed -e '/ iteration  *3\\//s/elapsed time per iteration "
             "(ms): [^ |]*/elapsed time per iteration (ms): %s/'",
             impossible[_i % 3]);
    measure_edited(dialects[_i / 3], body, &m);
    ck_assert_msg(m.outcome == MT_OUTCOME_OK, "%s in the warm-up: %s (%s)", impossible[_i % 3],
                  mt_outcome_name(m.outcome), m.evidence);
    ck_assert(isfinite(m.median_step_ms));
    mt_measure_clear(&m);
}
END_TEST

/* Issue 18, item 11: a run restarted from a checkpoint logs iterations
 * 1-12, then 8-20 again: the last pass is the measurement (stored, one
 * sample per iteration), the five repeated iterations are evidence. */
START_TEST(restarted_run_keeps_its_last_pass)
{
    mt_measure m;
    /* the resumed run prints no line of iterations 1-7: in Bridge's log
     * neither the iteration line nor the Step Time line after it */
    measure_edited(dialects[_i],
                   _i ? "\"$SIM\" \"$@\" 2>&1 | sed -n '1,/ iteration  *12\\//p'\n"
                        "\"$SIM\" \"$@\" 2>&1 | sed -e '/ iteration  *[1-7]\\//,/^Step Time/d'"
                      : "\"$SIM\" \"$@\" 2>&1 | sed -n '1,/ iteration  *12\\//p'\n"
                        "\"$SIM\" \"$@\" 2>&1 | sed -e '/ iteration  *[1-7]\\//d'",
                   &m);
    ck_assert_msg(m.outcome == MT_OUTCOME_OK, "%s (%s)", mt_outcome_name(m.outcome), m.evidence);
    ck_assert_msg(strstr(m.evidence, "the run restarted (iteration 8 logged after 12): its last "
                                     "pass is kept, 5 earlier samples of the same iterations set "
                                     "aside"),
                  "%s", m.evidence);
    ck_assert_int_gt(m.run_id, 0);
    ck_assert_uint_eq(m.n_window, 10);
    ck_assert_int_eq(m.used_first, 11);
    ck_assert_int_eq(m.used_last, 20);
    ck_assert_msg(m.median_step_ms > 40000 && m.median_step_ms < 52000, "%.1f", m.median_step_ms);
    mt_measure_clear(&m);
}
END_TEST

/* Issue 18, item 12: memory lines cut before their last field ("max
 * reserved: N" gone) on a node with neither NVML nor the sim's report:
 * the peak is what the lines still say (reserved), never a store error. */
START_TEST(memory_line_cut_before_its_last_field_keeps_its_fields)
{
    mt_measure m;
    measure_edited(dialects[_i],
                   "\"$SIM\" \"$@\" 2>&1 | sed -e '/memory (.B)/s/ | [^|]*$/ | max-res/'\n"
                   "rc=$?\nrm -f \"$MOETUNE_SIM_MEMORY_FILE\"\nexit $rc",
                   &m);
    ck_assert_msg(m.outcome == MT_OUTCOME_OK, "%s (%s)", mt_outcome_name(m.outcome), m.evidence);
    ck_assert_int_gt(m.run_id, 0);
    ck_assert_str_eq(m.peak_source, "log");
    /* the sim's rank 0 reserves ~38 GB before its peak (the corpus line:
     * reserved 38298.60 MB, max reserved 58525.20 MB) */
    ck_assert_msg(m.peak_bytes > 20e9 && m.peak_bytes < 70e9, "%.0f", m.peak_bytes);
    mt_measure_clear(&m);
}
END_TEST


/* ---- several ranks' streams, merged as srun -l and torchrun print them ----------- */

/* The example's rendered command with PP 2 and EP 8 (the sim's flags
 * added), for one process per rank; extra flags appended. */
static mt_strlist pp2_argv(const char *const *extra)
{
    tk *t = tk_open("qwen3-30b-a3b-h100x16.cfg");
    mt_rendered r;
    mt_strlist a = {0};
    size_t i;
    static const char *const sim[] = {"--sim-nodes", "2", "--sim-gpus-per-node", "8", NULL};
    tk_set(t, "pipeline_model_parallel_size=2");
    tk_set(t, "expert_model_parallel_size=8");
    mt_rendered_init(&r);
    ck_assert_int_eq(mt_render(t->reg, t->contract, t->cfg, MT_DIALECT_MLM, &r, t->diag), 0);
    for (i = 0; i < r.argv.n; i++)
        mt_strlist_push(&a, r.argv.v[i]);
    for (i = 0; sim[i]; i++)
        mt_strlist_push(&a, sim[i]);
    for (i = 0; extra && extra[i]; i++)
        mt_strlist_push(&a, extra[i]);
    mt_rendered_clear(&r);
    tk_close(&t);
    return a;
}

/* Runs rank `rank` of 16 and feeds its stdout and stderr to p, every line
 * behind prefix (srun -l's "R: ", or "N: [defaultR]:" under torchrun). */
static int feed_rank(mt_logparse *p, const mt_strlist *argv, int rank, const char *prefix)
{
    const char **args = calloc(argv->n + 1, sizeof *args);
    char rv[32];
    tk_proc r;
    int k;
    size_t i;
    for (i = 0; i < argv->n; i++)
        args[i] = argv->v[i];
    snprintf(rv, sizeof rv, "%d", rank);
    setenv("RANK", rv, 1);
    setenv("WORLD_SIZE", "16", 1);
    setenv("MOETUNE_SIM_GPU", "H200", 1);
    r = tk_spawn(MT_SIM_BIN, args);
    unsetenv("RANK"), unsetenv("WORLD_SIZE"), unsetenv("MOETUNE_SIM_GPU");
    for (k = 0; k < 2; k++) {
        const char *s = k ? r.err : r.out;
        while (*s) {
            size_t n = strcspn(s, "\n");
            mt_logparse_feed(p, prefix, strlen(prefix));
            mt_logparse_feed(p, s, n);
            mt_logparse_feed(p, "\n", 1);
            s += n + (s[n] == '\n');
        }
    }
    k = r.status;
    tk_proc_free(&r);
    free(args);
    return k;
}

START_TEST(ranks_streams_give_one_iteration_stream)
{
    static const char *const ranks[] = {"0", "3", "8", "15"};
    mt_strlist a = pp2_argv(NULL);
    mt_logparse *p = mt_logparse_new();
    mt_run_result run;
    char ev[600], pre[16];
    size_t i, n;
    for (i = 0; i < sizeof ranks / sizeof ranks[0]; i++) {
        snprintf(pre, sizeof pre, "%2s: ", ranks[i]);
        ck_assert_int_eq(feed_rank(p, &a, atoi(ranks[i]), pre), 0);
    }
    /* a stray iteration line from another rank (a print on every rank) */
    mt_logparse_feed(p, " 3:  [2026-01-01 00:03:00.000001] iteration        1/      20 | "
                        "elapsed time per iteration (ms): 1.0 | lm loss: 1.0E+01 | number of "
                        "skipped iterations:   0 | number of nan iterations:   0 |\n", 160);
    mt_logparse_finish(p);
    n = mt_logparse_iterations(p);
    ck_assert_uint_eq(n, 21);
    memset(&run, 0, sizeof run);
    run.outcome = MT_OUTCOME_OK;
    run.exited = 1;
    ck_assert_int_eq(mt_measure_classify(&run, p, 11, 20, ev, sizeof ev), MT_OUTCOME_OK);
    /* the last rank's stream alone: no restart, no stray sample */
    ck_assert_msg(!strstr(ev, "restarted"), "%s", ev);
    ck_assert_str_eq(ev, "exit status 0; iterations 1-20");
    /* each data-parallel rank 0's own memory line: the two stages */
    ck_assert_uint_eq(mt_logparse_ranks(p), 2);
    ck_assert_int_eq(mt_logparse_rank_memory(p, 0)->rank, 0);
    ck_assert_int_eq(mt_logparse_rank_memory(p, 1)->rank, 8);
    ck_assert(mt_logparse_rank_memory(p, 0)->max_reserved !=
              mt_logparse_rank_memory(p, 1)->max_reserved);
    mt_logparse_destroy(&p);
    mt_strlist_clear(&a);
}
END_TEST

START_TEST(failures_name_their_rank_and_node)
{
    static const char *const mbs8[] = {"--micro-batch-size", "8", NULL};
    static const char *const nccl[] = {"--sim-inject", "nccl", "--sim-inject-step", "3",
                                       "--sim-inject-rank", "13", NULL};
    mt_strlist hosts = {0}, a = pp2_argv(NULL), big;
    mt_logparse *p = mt_logparse_new();
    mt_run_result run;
    char ev[600];
    size_t i;
    mt_strlist_push(&hosts, "gpu07");
    mt_strlist_push(&hosts, "gpu08");
    memset(&run, 0, sizeof run);
    run.exited = 1;
    run.exit_code = 1;
    run.outcome = MT_OUTCOME_CRASH;
    /* the first stage runs out of an H200's memory; srun -l labels rank 5 */
    mt_strlist_clear(&a);
    big = pp2_argv(NULL);
    for (i = 0; i + 1 < big.n; i++)
        if (!strcmp(big.v[i], "--micro-batch-size")) {
            free(big.v[i + 1]);
            big.v[i + 1] = strdup(mbs8[1]);
        }
    ck_assert_int_ne(feed_rank(p, &big, 5, " 5: "), 0);
    mt_logparse_finish(p);
    ck_assert_int_eq(mt_measure_classify(&run, p, 11, 20, ev, sizeof ev), MT_OUTCOME_OOM);
    mt_measure_attribute(MT_OUTCOME_OOM, p, &hosts, 8, ev, sizeof ev);
    ck_assert_msg(strstr(ev, "rank 5 on gpu07: torch.OutOfMemoryError: CUDA out of memory.") == ev,
                  "%s", ev);
    mt_logparse_destroy(&p);
    mt_strlist_clear(&big);
    /* under torchrun: srun's label is the node's task (1), torchrun's the rank */
    p = mt_logparse_new();
    a = pp2_argv(nccl);
    ck_assert_int_ne(feed_rank(p, &a, 13, "1: [default13]:"), 0);
    mt_logparse_finish(p);
    ck_assert_int_eq(mt_measure_classify(&run, p, 11, 20, ev, sizeof ev), MT_OUTCOME_INFRA);
    mt_measure_attribute(MT_OUTCOME_INFRA, p, &hosts, 8, ev, sizeof ev);
    ck_assert_msg(strstr(ev, "rank 13 on gpu08: ") == ev, "%s", ev);
    ck_assert_msg(strstr(ev, "NCCL error") != NULL, "%s", ev);
    /* without the node list, the rank alone */
    ck_assert_int_eq(mt_measure_classify(&run, p, 11, 20, ev, sizeof ev), MT_OUTCOME_INFRA);
    mt_measure_attribute(MT_OUTCOME_INFRA, p, NULL, 8, ev, sizeof ev);
    ck_assert_msg(strstr(ev, "rank 13: ") == ev, "%s", ev);
    mt_logparse_destroy(&p);
    mt_strlist_clear(&a);
    mt_strlist_clear(&hosts);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("measure");
    TCase *tc = tcase_create("end to end");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, ok_run_summarized_verified_stored);
    tcase_add_test(tc, nan_outcome);
    tcase_add_test(tc, infra_outcome);
    tcase_add_test(tc, hang_outcome);
    tcase_add_test(tc, crash_outcome);
    tcase_add_test(tc, oom_outcome);
    tcase_add_test(tc, launch_error_outcome);
    tcase_add_loop_test(tc, impossible_step_time_is_crash_with_its_line, 0, 6);
    tcase_add_loop_test(tc, restarted_run_keeps_its_last_pass, 0, 2);
    tcase_add_loop_test(tc, memory_line_cut_before_its_last_field_keeps_its_fields, 0, 2);
    tcase_add_test(tc, ranks_streams_give_one_iteration_stream);
    tcase_add_test(tc, failures_name_their_rank_and_node);
    suite_add_tcase(s, tc);
    return tk_run(s);
}
