/*
 * test_memory.c - the analytic memory estimate against the published peak
 * (calibration point A: 61.4 GB on H100, alltoall, no graphs) and its
 * qualitative behaviour (recompute, offload, graphs, sharding, pipeline).
 */
#include "memory.h"
#include "testkit.h"

#include <check.h>
#include <math.h>

static double hottest(tk *t)
{
    mt_mem_estimate m;
    ck_assert_int_eq(mt_memory_estimate(t->cfg, t->contract->hardware, &m), 0);
    return m.hottest->total;
}

START_TEST(point_a_peak)
{
    tk *t = tk_open("qwen3-30b-a3b-h100x16.cfg");
    mt_mem_estimate m;
    ck_assert_int_eq(mt_memory_estimate(t->cfg, t->contract->hardware, &m), 0);
    /* 30.5 B parameters (Qwen3-30B-A3B) */
    ck_assert_msg(fabs(m.params_total - 30.5) < 1.0, "params %.2f B", m.params_total);
    ck_assert_msg(fabs(m.hottest->total - 61.4) / 61.4 <= 0.10, "estimate %.1f GB vs 61.4 GB",
                  m.hottest->total);
    tk_close(&t);
}
END_TEST

START_TEST(knobs_move_memory_the_right_way)
{
    tk *t = tk_open("qwen3-30b-a3b-h100x16.cfg");
    double base = hottest(t), v;
    tk_set(t, "recompute_granularity=selective");
    tk_set(t, "recompute_modules=moe_act");
    v = hottest(t);
    ck_assert_double_lt(v, base);
    tk_set(t, "recompute_modules=core_attn,moe_act,layernorm");
    ck_assert_double_lt(hottest(t), v);
    tk_set(t, "recompute_granularity=full");
    tk_set(t, "recompute_modules=");
    tk_set(t, "recompute_method=uniform");
    tk_set(t, "recompute_num_layers=1");
    ck_assert_double_lt(hottest(t), v);
    tk_set(t, "recompute_granularity=none");
    tk_set(t, "recompute_method=none");
    tk_set(t, "recompute_num_layers=0");
    ck_assert_double_eq_tol(hottest(t), base, 1e-9);
    tk_set(t, "cuda_graph_impl=transformer_engine");
    tk_set(t, "cuda_graph_modules=moe_router,moe_preprocess");
    v = hottest(t);
    ck_assert_double_gt(v, base);
    ck_assert_double_lt(v - base, 10.0); /* a few GB at PP 1 */
    tk_set(t, "cuda_graph_impl=none");
    tk_set(t, "cuda_graph_modules=");
    tk_set(t, "optimizer_cpu_offload=true");
    tk_set(t, "optimizer_offload_fraction=0.5");
    ck_assert_double_lt(hottest(t), base);
    tk_set(t, "optimizer_cpu_offload=false");
    tk_set(t, "use_distributed_optimizer=false");
    tk_set(t, "overlap_param_gather=false");
    ck_assert_double_gt(hottest(t), base);
    tk_close(&t);
}
END_TEST

START_TEST(deepseek_pipeline)
{
    tk *t = tk_open("deepseek-v3-gb200x256.cfg");
    mt_mem_estimate m;
    ck_assert_int_eq(mt_memory_estimate(t->cfg, t->contract->hardware, &m), 0);
    /* DeepSeek-V3: 671 B parameters plus the MTP layer */
    ck_assert_msg(m.params_total > 660 && m.params_total < 700, "params %.1f B", m.params_total);
    /* layout Et|(tt|)*30mL: rank 0 holds 1 + 3 x 2 transformer layers */
    ck_assert_double_eq_tol(m.first.layers, 7, 1e-9);
    ck_assert_double_eq_tol(m.last.layers, 7, 1e-9);
    ck_assert_double_lt(m.hottest->total, m.hbm_gb);
    ck_assert_double_gt(m.hottest->total, 40);
    tk_close(&t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("memory");
    TCase *tc = tcase_create("estimate");
    tcase_add_test(tc, point_a_peak);
    tcase_add_test(tc, knobs_move_memory_the_right_way);
    tcase_add_test(tc, deepseek_pipeline);
    suite_add_tcase(s, tc);
    return tk_run(s);
}
