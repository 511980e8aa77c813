/*
 * test_tune_optimum.c - a tune against the limit of its space: the
 * Qwen3-235B-A22B example on 256 x H100 (examples/contracts/
 * qwen3-235b-a22b-h100x256.cfg, point I of shared/facts/calibration.md)
 * starts from a naive layout (TP2 EP8 PP32 VPP3, alltoall, recompute), and
 * `moetune tune` on the sim must end in a validated recipe whose noise-free
 * throughput is within 5% of the noise-free optimum of the declared space
 * (search/model.c, the evaluator behind `moetune optimum`).  Also what
 * `moetune optimum` says of a base that fits and of one that does not.
 *
 * The tune is a real `moetune` process with the model executor (the sim's
 * model in process, with its noise: the same engine and budget as a tune
 * whose jobs are sim processes, as the search benchmark runs it).
 */
#include "config.h"
#include "memory.h"
#include "model.h"
#include "testkit.h"

#include <check.h>
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXAMPLE "qwen3-235b-a22b-h100x256.cfg"
#define SMALL_FIT MT_SOURCE_DIR "/tests/contracts/tune-small-fit.cfg"

/* The share of the optimum the recipe must reach (the bar). */
#define MIN_SHARE 0.95

typedef tk_proc run;

/* Runs moetune with args (NULL-terminated), capturing both streams. */
static run moetune(const char *const *args) { return tk_spawn(MT_MOETUNE_BIN, args); }

static void done(run *r) { tk_proc_free(r); }

static const cJSON *get(const cJSON *o, const char *k)
{
    return cJSON_GetObjectItemCaseSensitive(o, k);
}

/* The example's space holds both published layouts of point I, and each is
 * legal under every plugin and the training program's start-up rules. */
START_TEST(space_holds_point_i_layouts)
{
    static const char *const layouts[][8] = {
        /* TP2 EP32 PP8 VPP4, flex DeepEP, recompute layernorm + moe_act */
        {"expert_model_parallel_size=32", "pipeline_model_parallel_size=8",
         "pipeline_model_parallel_layout=Et*2|(t*3|)*30t*2L", "moe_token_dispatcher_type=flex",
         "moe_flex_dispatcher_backend=deepep", NULL},
        /* TP4 EP8 PP8 VPP4, flex DeepEP, no recompute */
        {"tensor_model_parallel_size=4", "pipeline_model_parallel_size=8",
         "pipeline_model_parallel_layout=Et*2|(t*3|)*30t*2L", "moe_token_dispatcher_type=flex",
         "moe_flex_dispatcher_backend=deepep", "recompute_granularity=none",
         "recompute_modules=", NULL}};
    size_t i, j;
    for (i = 0; i < 2; i++) {
        tk *t = tk_open(EXAMPLE);
        mt_violations vs = {0};
        mt_mesh m;
        for (j = 0; layouts[i][j]; j++) {
            char knob[128];
            const char *eq = strchr(layouts[i][j], '='), *vals;
            snprintf(knob, sizeof knob, "%.*s", (int)(eq - layouts[i][j]), layouts[i][j]);
            vals = mt_kv_get(t->contract->space, knob);
            ck_assert_msg(vals, "%s is not declared in the space", knob);
            tk_set(t, layouts[i][j]);
        }
        mt_legality(t->reg, t->contract, t->cfg, &vs, t->diag);
        ck_assert_msg(vs.n == 0, "layout %zu: %s", i, vs.n ? vs.v[0].message : "");
        mt_violations_clear(&vs);
        /* 94 layers + embedding + loss on 32 stages: VPP 4 at PP 8 */
        mt_config_mesh(t->cfg, t->contract->hardware, &m);
        ck_assert_int_eq(m.pp, 8);
        ck_assert_int_eq(m.vpp, 4);
        tk_close(&t);
    }
}
END_TEST

/* `moetune check` and `moetune optimum` accept the example; the space is
 * small enough to enumerate in seconds; the base is a usable one (it fits
 * in the sim) and optimum says so with its figures. */
START_TEST(check_and_optimum_accept_the_example)
{
    char *path = tk_example(EXAMPLE);
    const char *check[] = {"check", path, NULL}, *opt[] = {"optimum", path, NULL};
    run r = moetune(check);
    ck_assert_msg(r.status == 0, "exit %d\n%s%s", r.status, r.out, r.err);
    ck_assert_ptr_nonnull(strstr(r.out, ": OK"));
    ck_assert_ptr_nonnull(strstr(r.out, "Attention: TP2 x CP1 x DP4 x PP32"));
    done(&r);
    r = moetune(opt);
    ck_assert_msg(r.status == 0, "exit %d\n%s%s", r.status, r.out, r.err);
    ck_assert_msg(strstr(r.out, "\nbase: ") && strstr(r.out, " TFLOP/s/GPU (fits: hottest GPU "),
                  "%s", r.out);
    ck_assert_msg(strstr(r.out, "\noptimum: ") && strstr(r.out, "% over the base)"), "%s", r.out);
    done(&r);
    free(path);
}
END_TEST

/* A base that does not fit is never shown as a usable base: no throughput
 * for it and no gain over it, with the figures that say why. */
START_TEST(optimum_refuses_a_base_that_does_not_fit)
{
    const char *opt[] = {"optimum", SMALL_FIT, NULL};
    run r = moetune(opt);
    const char *line;
    ck_assert_msg(r.status == 0, "exit %d\n%s%s", r.status, r.out, r.err);
    line = strstr(r.out, "\nbase: ");
    ck_assert_ptr_nonnull(line);
    ck_assert_msg(!strncmp(line, "\nbase: does not fit (hottest GPU ", 33), "%s", r.out);
    ck_assert_msg(strstr(line, " GB usable at 10% headroom); not a usable base"), "%s", r.out);
    ck_assert_ptr_null(strstr(r.out, "TFLOP/s/GPU (fits"));
    ck_assert_ptr_null(strstr(r.out, "over the base"));
    done(&r);
}
END_TEST

/* The tune of the example on the sim: a validated recipe within 5% of the
 * space's noise-free optimum, and it fits. */
START_TEST(tune_reaches_the_optimum)
{
    char *path = tk_example(EXAMPLE);
    char base[] = "/tmp/moetune-opt-tune-XXXXXX", dir[64], cmd[128];
    const char *args[] = {"tune", path, "--dir", dir, "--executor", "model", "--quiet", NULL};
    tk *t = tk_open(EXAMPLE);
    mt_optimum o;
    mt_kv *recipe = mt_kv_new();
    const cJSON *x;
    cJSON *b;
    double tf;
    int fits = 0;
    run r;
    ck_assert_ptr_nonnull(mkdtemp(base));
    snprintf(dir, sizeof dir, "%s/T", base);
    ck_assert_int_eq(mt_optimum_find(t->reg, t->contract, t->cfg, 5000000, &o, t->diag), 0);
    ck_assert_ptr_nonnull(o.best);
    r = moetune(args);
    ck_assert_msg(r.status == 0, "exit %d\n%s%s", r.status, r.out, r.err);
    b = tk_bundle(dir);
    ck_assert_str_eq(get(b, "status")->valuestring, "validated");
    /* the base fits in the sim, and the fit phase says so too */
    ck_assert(o.base_fits);
    ck_assert(cJSON_IsTrue(get(get(get(b, "baseline"), "fit"), "fits")));
    cJSON_ArrayForEach(x, get(get(b, "recipe"), "config"))
        mt_kv_set(recipe, x->string, x->valuestring);
    tf = mt_optimum_tflops(t->contract, recipe, &fits);
    ck_assert_msg(fits, "the recipe does not fit in the sim");
    ck_assert_msg(tf >= MIN_SHARE * o.best_tflops,
                  "recipe %.1f TFLOP/s/GPU is %.1f%% of the optimum %.1f (base %.1f); "
                  "stopped: %s",
                  tf, 100 * tf / o.best_tflops, o.best_tflops, o.base_tflops,
                  get(get(b, "budget"), "stopped_because")->valuestring);
    printf("tune of %s: recipe %.1f TFLOP/s/GPU, optimum %.1f (share %.3f), base %.1f; %zu "
           "configs, %zu fit\n",
           EXAMPLE, tf, o.best_tflops, tf / o.best_tflops, o.base_tflops, o.grid, o.fitting);
    cJSON_Delete(b);
    mt_kv_destroy(&recipe);
    mt_kv_destroy(&o.best);
    done(&r);
    {
        /* status of the finished tune: no time left to estimate, and the
         * store's empty run list is explained, not a contradiction of the
         * runs counted */
        const char *st[] = {"status", dir, NULL};
        r = moetune(st);
        ck_assert_msg(r.status == 0, "%s", r.err);
        ck_assert_msg(strstr(r.out, "\"phase\":\t\"done\"") && !strstr(r.out, "eta_s"), "%s",
                      r.out);
        ck_assert_msg(strstr(r.out, "store: 0 runs") &&
                          strstr(r.out, "the model executor's runs are predictions"),
                      "%s", r.out);
        done(&r);
    }
    tk_close(&t);
    free(path);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    if (system(cmd)) {
        /* leftovers in /tmp are harmless */
    }
}
END_TEST

/* text with every "from" replaced by "to" (each must occur); caller frees */
static char *replaced(const char *text, const char *const (*subs)[2], size_t n)
{
    char *s = strdup(text);
    size_t i;
    for (i = 0; s && i < n; i++) {
        char *at = strstr(s, subs[i][0]), *t;
        size_t a, lf, lt;
        ck_assert_msg(at, "the example has no '%s'", subs[i][0]);
        a = (size_t)(at - s), lf = strlen(subs[i][0]), lt = strlen(subs[i][1]);
        t = malloc(strlen(s) - lf + lt + 1);
        ck_assert_ptr_nonnull(t);
        memcpy(t, s, a);
        memcpy(t + a, subs[i][1], lt);
        strcpy(t + a + lt, at + lf);
        free(s);
        s = t;
    }
    return s;
}

/* `moetune check` on the example with its base set to each published run
 * of point I: both fit on the 80 GB H100s they ran on, as the estimate
 * says for the hottest rank. */
START_TEST(check_says_point_i_runs_fit)
{
    static const char *const common[][2] = {
        {"pipeline_model_parallel_size = 32;", "pipeline_model_parallel_size = 8;"},
        {"pipeline_model_parallel_layout = \"E|(t|)*94L\";",
         "pipeline_model_parallel_layout = \"Et*2|(t*3|)*30t*2L\";"},
        {"moe_token_dispatcher_type = \"alltoall\";",
         "moe_token_dispatcher_type = \"flex\";\n  moe_flex_dispatcher_backend = \"deepep\";"}};
    /* I1: TP2 EP32 PP8 VPP4, recompute layernorm + moe_act (the base's) */
    static const char *const i1[][2] = {
        {"expert_model_parallel_size = 8;", "expert_model_parallel_size = 32;"}};
    /* I2: TP4 EP8 PP8 VPP4, no recompute */
    static const char *const i2[][2] = {
        {"tensor_model_parallel_size = 2;", "tensor_model_parallel_size = 4;"},
        {"recompute_granularity = \"selective\";", "recompute_granularity = \"none\";"},
        {"recompute_modules = [\"layernorm\", \"moe_act\"];", "recompute_modules = [];"}};
    char *path = tk_example(EXAMPLE), *text = tk_slurp(path);
    int k;
    ck_assert_ptr_nonnull(text);
    for (k = 0; k < 2; k++) {
        char *a = replaced(text, common, 3);
        char *b = k ? replaced(a, i2, 3) : replaced(a, i1, 1);
        char *cfg = tk_write_temp(k ? "i2.cfg" : "i1.cfg", b);
        const char *args[] = {"check", cfg, NULL};
        run r = moetune(args);
        ck_assert_msg(r.status == 0, "I%d: exit %d\n%s%s", k + 1, r.status, r.out, r.err);
        ck_assert_msg(strstr(r.out, ": OK"), "I%d:\n%s", k + 1, r.out);
        ck_assert_msg(strstr(r.out, k ? "Attention: TP4 x CP1 x DP8 x PP8 (VPP4)"
                                      : "Attention: TP2 x CP1 x DP16 x PP8 (VPP4)"),
                      "I%d:\n%s", k + 1, r.out);
        ck_assert_msg(strstr(r.out, " GB usable at 8% headroom): fits\n"), "I%d:\n%s", k + 1,
                      r.out);
        printf("point I%d: %.*s\n", k + 1,
               (int)strcspn(strstr(r.out, "memory estimate"), "\n"), strstr(r.out, "memory estimate"));
        done(&r);
        unlink(cfg);
        free(cfg), free(b), free(a);
    }
    free(text), free(path);
}
END_TEST

/* Changes each under the minimum effect add up: with the example's minimum
 * effect raised to 5%, the graph scopes, EP overlap and the layout are each
 * refused alone (estimated faster, but by less), and the walk ends by
 * screening them as one bundle, which passes the gate and is ablated as
 * one change. */
START_TEST(near_misses_screened_as_a_bundle)
{
    char *path = tk_example(EXAMPLE), *text = tk_slurp(path), *at, *cfg;
    char base[] = "/tmp/moetune-opt-bundle-XXXXXX", dir[64], cmd[128];
    const char *args[] = {"tune", NULL, "--dir", dir, "--executor", "model", NULL};
    const cJSON *x, *bundle = NULL;
    cJSON *b;
    int parts = 0, ablated = 0;
    run r;
    ck_assert_ptr_nonnull(text);
    at = strstr(text, "min_effect = 0.02;");
    ck_assert_ptr_nonnull(at);
    memcpy(at, "min_effect = 0.05;", 18);
    cfg = tk_write_temp("bundle.cfg", text);
    ck_assert_ptr_nonnull(cfg);
    args[1] = cfg;
    ck_assert_ptr_nonnull(mkdtemp(base));
    snprintf(dir, sizeof dir, "%s/T", base);
    r = moetune(args);
    ck_assert_msg(r.status == 0, "exit %d\n%s%s", r.status, r.out, r.err);
    b = tk_bundle(dir);
    ck_assert_ptr_nonnull(b);
    cJSON_ArrayForEach(x, get(b, "decisions"))
    {
        const char *v = get(x, "variable")->valuestring;
        if (!strncmp(v, "bundle:", 7) && !strcmp(get(x, "verdict")->valuestring, "accepted"))
            bundle = x;
    }
    ck_assert_msg(bundle, "no accepted bundle of near misses");
    /* it names its parts, each with the effect it had alone (under 5%) */
    {
        const char *v = get(bundle, "variable")->valuestring + 7, *p;
        char part[64];
        while (*v) {
            size_t n = strcspn(v, "+");
            const cJSON *y;
            int refused = 0;
            snprintf(part, sizeof part, "%.*s", (int)n, v);
            cJSON_ArrayForEach(y, get(b, "decisions"))
                if (get(y, "index")->valueint < get(bundle, "index")->valueint &&
                    !strcmp(get(y, "variable")->valuestring, part) &&
                    !strncmp(get(y, "reason")->valuestring, "below the minimum effect", 24))
                    refused = 1;
            ck_assert_msg(refused, "%s was not refused alone for its size before the bundle", part);
            parts++;
            v += n;
            if (*v == '+')
                v++;
        }
        p = get(bundle, "reason")->valuestring;
        ck_assert_ptr_nonnull(strstr(p, "accepted: "));
    }
    ck_assert_int_ge(parts, 2);
    /* the progress line names each part with its effect alone: every one
     * was estimated faster */
    {
        const char *line = strstr(r.out, "the near misses together: "), *p;
        int n = 0;
        if (!line)
            line = strstr(r.err, "the near misses together: ");
        ck_assert_msg(line, "no progress line for the bundle\n%s%s", r.out, r.err);
        for (p = line; (p = strstr(p, "% alone)")) && p < line + strcspn(line, "\n"); p++) {
            const char *q = p;
            while (q > line && q[-1] != '(')
                q--;
            ck_assert_msg(atof(q) < 0, "a part estimated slower joined the bundle: %.80s", q);
            n++;
        }
        ck_assert_int_eq(n, parts);
    }
    cJSON_ArrayForEach(x, get(b, "ablation"))
        if (!strcmp(get(x, "knob")->valuestring, get(bundle, "variable")->valuestring))
            ablated = isfinite(get(x, "gain_without")->valuedouble) ? 1 : 0;
    ck_assert_msg(ablated, "the bundle has no measured ablation row");
    cJSON_Delete(b);
    done(&r);
    unlink(cfg);
    free(cfg), free(text), free(path);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    if (system(cmd)) {
        /* leftovers in /tmp are harmless */
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tune_optimum");
    TCase *tc = tcase_create("example");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, space_holds_point_i_layouts);
    tcase_add_test(tc, check_and_optimum_accept_the_example);
    tcase_add_test(tc, optimum_refuses_a_base_that_does_not_fit);
    tcase_add_test(tc, tune_reaches_the_optimum);
    tcase_add_test(tc, near_misses_screened_as_a_bundle);
    tcase_add_test(tc, check_says_point_i_runs_fit);
    suite_add_tcase(s, tc);
    return tk_run(s);
}
