/*
 * test_verify.c - plugins say whether their knobs really took effect, from
 * the evidence of a run: the arguments dump proves only the request; log
 * lines and trace facts prove (or disprove) what ran.
 */
#include "testkit.h"

#include <check.h>
#include <string.h>

static const mt_knob_verdict *verdict_for(const mt_verdicts *vs, const char *knob)
{
    size_t i;
    for (i = 0; i < vs->n; i++)
        if (!strcmp(vs->v[i].knob, knob))
            return &vs->v[i];
    return NULL;
}

static mt_verdicts run_verify(tk *t, mt_kv *ev)
{
    mt_verdicts vs = {0};
    mt_ctx_v1 ctx = mt_ctx_make(t->contract, t->cfg, ev, NULL);
    ck_assert_int_eq(mt_registry_verify(t->reg, &ctx, &vs, t->diag), 0);
    return vs;
}

START_TEST(flex_backend_fallback_is_not_applied)
{
    tk *t = tk_open("qwen3-30b-a3b-h100x16.cfg");
    mt_kv *ev = mt_kv_new();
    mt_verdicts vs;
    const mt_knob_verdict *v;
    tk_set(t, "moe_token_dispatcher_type=flex");
    tk_set(t, "moe_flex_dispatcher_backend=hybridep");
    mt_kv_set(ev, "args.moe_token_dispatcher_type", "flex");
    mt_kv_set(ev, "args.moe_flex_dispatcher_backend", "hybridep");
    /* only the request is known: unknown */
    vs = run_verify(t, ev);
    v = verdict_for(&vs, "moe_flex_dispatcher_backend");
    ck_assert_ptr_nonnull(v);
    ck_assert_uint_eq(v->verdict, MT_VERDICT_UNKNOWN);
    mt_verdicts_clear(&vs);
    /* the framework said it fell back */
    mt_kv_set(ev, "log.dispatcher_fallback",
              "WARNING: HybridEP is not supported on this platform. Falling back to alltoall.");
    vs = run_verify(t, ev);
    v = verdict_for(&vs, "moe_flex_dispatcher_backend");
    ck_assert_uint_eq(v->verdict, MT_VERDICT_NOT_APPLIED);
    ck_assert_ptr_nonnull(strstr(v->evidence, "Falling back to alltoall"));
    mt_verdicts_clear(&vs);
    /* a profiled run showed HybridEP kernels */
    mt_kv_unset(ev, "log.dispatcher_fallback");
    mt_kv_set(ev, "trace.available", "true");
    mt_kv_set(ev, "trace.hybridep_kernels", "1284");
    vs = run_verify(t, ev);
    v = verdict_for(&vs, "moe_flex_dispatcher_backend");
    ck_assert_uint_eq(v->verdict, MT_VERDICT_APPLIED);
    mt_verdicts_clear(&vs);
    mt_kv_destroy(&ev);
    tk_close(&t);
}
END_TEST

START_TEST(fp8_needs_the_trace)
{
    tk *t = tk_open("qwen3-30b-a3b-h100x16.cfg");
    mt_kv *ev = mt_kv_new();
    mt_verdicts vs;
    const mt_knob_verdict *v;
    tk_set(t, "fp8_format=e4m3");
    tk_set(t, "fp8_recipe=blockwise");
    mt_kv_set(ev, "args.fp8_recipe", "blockwise");
    mt_kv_set(ev, "trace.available", "true");
    mt_kv_set(ev, "trace.fp8_gemm", "0");
    vs = run_verify(t, ev);
    v = verdict_for(&vs, "fp8_recipe");
    ck_assert_ptr_nonnull(v);
    ck_assert_uint_eq(v->verdict, MT_VERDICT_NOT_APPLIED);
    mt_verdicts_clear(&vs);
    mt_kv_set(ev, "trace.fp8_gemm", "4096");
    vs = run_verify(t, ev);
    ck_assert_uint_eq(verdict_for(&vs, "fp8_recipe")->verdict, MT_VERDICT_APPLIED);
    mt_verdicts_clear(&vs);
    mt_kv_destroy(&ev);
    tk_close(&t);
}
END_TEST

START_TEST(graphs_captured_but_not_replayed)
{
    tk *t = tk_open("qwen3-30b-a3b-h100x16.cfg");
    mt_kv *ev = mt_kv_new();
    mt_verdicts vs;
    tk_set(t, "cuda_graph_impl=transformer_engine");
    tk_set(t, "cuda_graph_modules=moe_router,moe_preprocess");
    mt_kv_set(ev, "args.cuda_graph_impl", "transformer_engine");
    mt_kv_set(ev, "log.cuda_graph_capture", "Time spent in CUDA Graphs capture on rank 0: 3.2s");
    mt_kv_set(ev, "trace.available", "true");
    mt_kv_set(ev, "trace.graph_launches", "0");
    vs = run_verify(t, ev);
    ck_assert_uint_eq(verdict_for(&vs, "cuda_graph_impl")->verdict, MT_VERDICT_NOT_APPLIED);
    mt_verdicts_clear(&vs);
    mt_kv_set(ev, "trace.graph_launches", "960");
    vs = run_verify(t, ev);
    ck_assert_uint_eq(verdict_for(&vs, "cuda_graph_impl")->verdict, MT_VERDICT_APPLIED);
    mt_verdicts_clear(&vs);
    mt_kv_destroy(&ev);
    tk_close(&t);
}
END_TEST

/* Megatron-LM 0.18+ dumps cuda_graph_modules as CudaGraphModule members;
 * a working graph run must not read as a different module list. */
START_TEST(graph_modules_from_an_enum_list_dump)
{
    tk *t = tk_open("qwen3-30b-a3b-h100x16.cfg");
    mt_kv *ev = mt_kv_new();
    mt_verdicts vs;
    tk_set(t, "cuda_graph_impl=transformer_engine");
    tk_set(t, "cuda_graph_modules=moe_router,moe_preprocess");
    mt_kv_set(ev, "args.cuda_graph_impl", "transformer_engine");
    mt_kv_set(ev, "args.cuda_graph_modules",
              "[<CudaGraphModule.moe_router: 4>, <CudaGraphModule.moe_preprocess: 5>]");
    mt_kv_set(ev, "log.cuda_graph_capture", "Time spent in CUDA Graphs capture on rank 0: 3.2s");
    mt_kv_set(ev, "trace.available", "true");
    mt_kv_set(ev, "trace.graph_launches", "960");
    vs = run_verify(t, ev);
    ck_assert_uint_eq(verdict_for(&vs, "cuda_graph_modules")->verdict, MT_VERDICT_APPLIED);
    mt_verdicts_clear(&vs);
    /* the dump names another list: not applied */
    mt_kv_set(ev, "args.cuda_graph_modules", "[<CudaGraphModule.attn: 1>]");
    vs = run_verify(t, ev);
    ck_assert_uint_eq(verdict_for(&vs, "cuda_graph_modules")->verdict, MT_VERDICT_NOT_APPLIED);
    mt_verdicts_clear(&vs);
    /* the plain-string form of older dumps still reads */
    mt_kv_set(ev, "args.cuda_graph_modules", "['moe_preprocess', 'moe_router']");
    vs = run_verify(t, ev);
    ck_assert_uint_eq(verdict_for(&vs, "cuda_graph_modules")->verdict, MT_VERDICT_APPLIED);
    mt_verdicts_clear(&vs);
    mt_kv_destroy(&ev);
    tk_close(&t);
}
END_TEST

START_TEST(parallel_sizes_from_the_arguments_dump)
{
    tk *t = tk_open("qwen3-30b-a3b-h100x16.cfg");
    mt_kv *ev = mt_kv_new();
    mt_verdicts vs;
    tk_set(t, "expert_model_parallel_size=8");
    mt_kv_set(ev, "args.expert_model_parallel_size", "8");
    vs = run_verify(t, ev);
    ck_assert_uint_eq(verdict_for(&vs, "expert_model_parallel_size")->verdict, MT_VERDICT_APPLIED);
    mt_verdicts_clear(&vs);
    mt_kv_set(ev, "args.expert_model_parallel_size", "16");
    vs = run_verify(t, ev);
    ck_assert_uint_eq(verdict_for(&vs, "expert_model_parallel_size")->verdict,
                      MT_VERDICT_NOT_APPLIED);
    mt_verdicts_clear(&vs);
    mt_kv_destroy(&ev);
    tk_close(&t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("verify");
    TCase *tc = tcase_create("evidence");
    tcase_add_test(tc, flex_backend_fallback_is_not_applied);
    tcase_add_test(tc, fp8_needs_the_trace);
    tcase_add_test(tc, graphs_captured_but_not_replayed);
    tcase_add_test(tc, graph_modules_from_an_enum_list_dump);
    tcase_add_test(tc, parallel_sizes_from_the_arguments_dump);
    suite_add_tcase(s, tc);
    return tk_run(s);
}
