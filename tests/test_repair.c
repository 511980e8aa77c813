/*
 * test_repair.c - the repair protocol: a candidate that makes another
 * plugin's knob illegal gets that owner's minimal repair, recorded and
 * disclosed with the candidate.
 */
#include "testkit.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static mt_candidate make(const char *plugin, const char *variable)
{
    mt_candidate c;
    memset(&c, 0, sizeof c);
    c.plugin = strdup(plugin);
    c.variable = strdup(variable);
    c.summary = strdup("test");
    c.label = MT_LABEL_TRAINING_EQUIVALENT;
    c.sets = mt_kv_new();
    c.repairs = mt_kv_new();
    return c;
}

static void drop(mt_candidate *c)
{
    mt_candidates one = {c, 1, 1};
    mt_candidate *copy = malloc(sizeof *copy);
    *copy = *c;
    one.v = copy;
    mt_candidates_clear(&one);
}

static int notes_mention(const mt_candidate *c, const char *needle)
{
    size_t i;
    for (i = 0; i < c->repair_notes.n; i++)
        if (strstr(c->repair_notes.v[i], needle))
            return 1;
    return 0;
}

/* TP 2 with TP comm overlap; the folding plugin moves TP to 1: overlap must
 * repair by turning TP comm overlap off. */
START_TEST(tp_to_one_repairs_tp_comm_overlap)
{
    tk *t = tk_open("qwen3-30b-a3b-h100x16.cfg");
    mt_candidate c;
    mt_violations vs = {0};
    tk_set(t, "tensor_model_parallel_size=2");
    tk_set(t, "sequence_parallel=true");
    tk_set(t, "tp_comm_overlap=true");
    tk_set(t, "env.CUDA_DEVICE_MAX_CONNECTIONS=1");
    mt_legality(t->reg, t->contract, t->cfg, &vs, t->diag);
    ck_assert_msg(vs.n == 0, "start illegal: [%s] %s", vs.n ? vs.v[0].rule : "",
                  vs.n ? vs.v[0].message : "");
    mt_violations_clear(&vs);

    c = make("folding", "layout");
    mt_kv_set(c.sets, "tensor_model_parallel_size", "1");
    mt_kv_set(c.sets, "sequence_parallel", "false");
    ck_assert_int_eq(mt_candidate_apply(t->reg, t->contract, t->cfg, &c, t->diag), 0);
    ck_assert_msg(c.violations.n == 0, "still illegal: [%s] %s",
                  c.violations.n ? c.violations.v[0].rule : "",
                  c.violations.n ? c.violations.v[0].message : "");
    ck_assert_str_eq(mt_kv_get(c.repairs, "tp_comm_overlap"), "false");
    ck_assert_str_eq(mt_kv_get(c.config, "tp_comm_overlap"), "false");
    ck_assert(notes_mention(&c, "overlap: "));
    /* the candidate's own change stands */
    ck_assert_str_eq(mt_kv_get(c.config, "tensor_model_parallel_size"), "1");
    ck_assert_ptr_null(mt_kv_get(c.repairs, "tensor_model_parallel_size"));
    /* the base is untouched */
    ck_assert_str_eq(mt_kv_get(t->cfg, "tp_comm_overlap"), "true");
    drop(&c);
    tk_close(&t);
}
END_TEST

/* Selective recompute of moe_act; the precision plugin moves to FP8 delayed,
 * which rejects moe_act recompute: recompute must drop moe_act. */
START_TEST(fp8_delayed_repairs_moe_act_recompute)
{
    tk *t = tk_open("qwen3-30b-a3b-h100x16.cfg");
    mt_candidate c;
    tk_set(t, "recompute_granularity=selective");
    tk_set(t, "recompute_modules=moe_act,core_attn");
    c = make("precision", "precision");
    mt_kv_set(c.sets, "fp8_format", "hybrid");
    mt_kv_set(c.sets, "fp8_recipe", "delayed");
    ck_assert_int_eq(mt_candidate_apply(t->reg, t->contract, t->cfg, &c, t->diag), 0);
    ck_assert_msg(c.violations.n == 0, "still illegal: [%s] %s",
                  c.violations.n ? c.violations.v[0].rule : "",
                  c.violations.n ? c.violations.v[0].message : "");
    ck_assert_str_eq(mt_kv_get(c.repairs, "recompute_modules"), "core_attn");
    ck_assert(notes_mention(&c, "recompute: "));
    drop(&c);

    /* moe_act alone: the list empties and selective recompute is switched off */
    tk_set(t, "recompute_modules=moe_act");
    c = make("precision", "precision");
    mt_kv_set(c.sets, "fp8_format", "hybrid");
    mt_kv_set(c.sets, "fp8_recipe", "delayed");
    mt_candidate_apply(t->reg, t->contract, t->cfg, &c, t->diag);
    ck_assert_uint_eq(c.violations.n, 0);
    ck_assert_str_eq(mt_kv_get(c.config, "recompute_modules"), "");
    ck_assert_str_eq(mt_kv_get(c.config, "recompute_granularity"), "none");
    drop(&c);
    tk_close(&t);
}
END_TEST

/* A candidate that breaks a rule nobody can repair stays illegal, with the
 * rule named. */
START_TEST(unrepairable_stays_illegal)
{
    tk *t = tk_open("qwen3-30b-a3b-h100x16.cfg");
    mt_candidate c = make("folding", "layout");
    mt_kv_set(c.sets, "expert_model_parallel_size", "5");
    mt_candidate_apply(t->reg, t->contract, t->cfg, &c, t->diag);
    ck_assert_uint_gt(c.violations.n, 0);
    drop(&c);
    tk_close(&t);
}
END_TEST

/* Through the plugins' own proposals: every proposal for the example
 * contracts is either legal after repair or says exactly why not. */
START_TEST(proposals_apply_cleanly)
{
    static const char *const names[] = {"qwen3-30b-a3b-h100x16.cfg", "deepseek-v3-gb200x256.cfg",
                                        "qwen3-30b-a3b-gb300x8.cfg"};
    size_t i, j;
    for (i = 0; i < 3; i++) {
        tk *t = tk_open(names[i]);
        mt_candidates cs = {0};
        size_t legal = 0;
        ck_assert_int_eq(mt_candidates_for(t->reg, t->contract, t->cfg, NULL, 0, &cs, t->diag), 0);
        ck_assert_msg(mt_diag_count(t->diag) == 0, "%s", mt_diag_count(t->diag) ? mt_diag_at(t->diag, 0)->message : "");
        ck_assert_uint_gt(cs.n, 5);
        for (j = 0; j < cs.n; j++) {
            ck_assert_msg(cs.v[j].reject == NULL, "%s: %s/%s refused: %s", names[i], cs.v[j].plugin,
                          cs.v[j].variable, cs.v[j].reject);
            legal += cs.v[j].violations.n == 0;
        }
        ck_assert_msg(legal * 2 >= cs.n, "%s: only %zu of %zu candidates legal", names[i], legal, cs.n);
        mt_candidates_clear(&cs);
        tk_close(&t);
    }
}
END_TEST

/* The MoE workflow orders: alltoall control before flex backends; selective
 * recompute before full, offload last; narrowest graph scope first. */
START_TEST(workflow_order)
{
    tk *t = tk_open("qwen3-30b-a3b-h100x16.cfg");
    mt_candidates cs = {0};
    size_t j;
    long deepep = -1, hybridep = -1, sel = -1, full = -1, off = -1, narrow = -1, wide = -1;
    tk_set(t, "moe_token_dispatcher_type=allgather");
    mt_candidates_for(t->reg, t->contract, t->cfg, NULL, 0, &cs, t->diag);
    for (j = 0; j < cs.n; j++) {
        const mt_kv *s = cs.v[j].sets;
        const char *b = mt_kv_get(s, "moe_flex_dispatcher_backend");
        const char *g = mt_kv_get(s, "recompute_granularity");
        const char *m = mt_kv_get(s, "cuda_graph_modules");
        if (b && !strcmp(b, "deepep") && deepep < 0) deepep = (long)j;
        if (b && !strcmp(b, "hybridep") && hybridep < 0) hybridep = (long)j;
        if (g && !strcmp(g, "selective") && sel < 0) sel = (long)j;
        if (g && !strcmp(g, "full") && full < 0) full = (long)j;
        if ((mt_kv_get(s, "fine_grained_activation_offloading") || mt_kv_get(s, "optimizer_cpu_offload")) && off < 0) off = (long)j;
        if (m && !strcmp(m, "moe_router moe_preprocess") && narrow < 0) narrow = (long)j;
        if (m && !strcmp(m, "attn moe_router moe_preprocess") && wide < 0) wide = (long)j;
    }
    ck_assert_str_eq(cs.v[0].plugin, "cudagraph"); /* plugins in name order */
    ck_assert_int_ge(deepep, 0);
    ck_assert_int_gt(hybridep, deepep);
    for (j = 0; j < cs.n; j++)
        if (!strcmp(cs.v[j].plugin, "dispatcher")) {
            ck_assert_str_eq(mt_kv_get(cs.v[j].sets, "moe_token_dispatcher_type"), "alltoall");
            break;
        }
    ck_assert_int_ge(sel, 0);
    if (full >= 0)
        ck_assert_int_gt(full, sel);
    if (off >= 0)
        ck_assert_int_gt(off, sel);
    ck_assert_int_ge(narrow, 0);
    ck_assert_int_gt(wide, narrow);
    mt_candidates_clear(&cs);
    tk_close(&t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("repair");
    TCase *tc = tcase_create("protocol");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, tp_to_one_repairs_tp_comm_overlap);
    tcase_add_test(tc, fp8_delayed_repairs_moe_act_recompute);
    tcase_add_test(tc, unrepairable_stays_illegal);
    tcase_add_test(tc, proposals_apply_cleanly);
    tcase_add_test(tc, workflow_order);
    suite_add_tcase(s, tc);
    return tk_run(s);
}
