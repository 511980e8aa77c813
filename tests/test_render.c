/*
 * test_render.c - golden renderings of the canonical Qwen3-30B-A3B 16 x H100
 * recipe (calibration point A) in both dialects, and the core's forced
 * logging flags.
 */
#include "testkit.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const recipe[] = {
    "moe_token_dispatcher_type=flex",
    "moe_flex_dispatcher_backend=hybridep",
    "moe_flex_dispatcher_num_sms=32",
    "moe_permute_fusion=true",
    "overlap_moe_expert_parallel_comm=true",
    "cuda_graph_impl=transformer_engine",
    "cuda_graph_modules=moe_router,moe_preprocess",
};

static mt_rendered render_recipe(tk *t, uint32_t dialect)
{
    mt_rendered out;
    mt_violations vs = {0};
    size_t i;
    for (i = 0; i < sizeof recipe / sizeof recipe[0]; i++)
        tk_set(t, recipe[i]);
    mt_legality(t->reg, t->contract, t->cfg, &vs, t->diag);
    ck_assert_msg(vs.n == 0, "canonical recipe illegal: [%s] %s", vs.n ? vs.v[0].rule : "",
                  vs.n ? vs.v[0].message : "");
    mt_violations_clear(&vs);
    mt_rendered_init(&out);
    ck_assert_int_eq(mt_render(t->reg, t->contract, t->cfg, dialect, &out, t->diag), 0);
    return out;
}

/* Index of token in argv, or -1. */
static long find(const mt_strlist *a, const char *tok)
{
    size_t i;
    for (i = 0; i < a->n; i++)
        if (!strcmp(a->v[i], tok))
            return (long)i;
    return -1;
}

/* flag followed by exactly the given value tokens (NULL-terminated). */
static void expect_flag(const mt_strlist *a, const char *flag, const char *v1, const char *v2)
{
    long at = find(a, flag);
    ck_assert_msg(at >= 0, "missing %s", flag);
    if (v1) {
        ck_assert_msg((size_t)at + 1 < a->n && !strcmp(a->v[at + 1], v1), "%s: expected %s, got %s",
                      flag, v1, (size_t)at + 1 < a->n ? a->v[at + 1] : "(end)");
    }
    if (v2) {
        ck_assert_msg((size_t)at + 2 < a->n && !strcmp(a->v[at + 2], v2), "%s: expected %s %s", flag,
                      v1, v2);
    }
    if (!v1 && (size_t)at + 1 < a->n)
        ck_assert_msg(!strncmp(a->v[at + 1], "--", 2), "%s takes no value, followed by %s", flag,
                      a->v[at + 1]);
    ck_assert_msg(find(a, flag) == at, "dup");
}

START_TEST(golden_mlm)
{
    tk *t = tk_open("qwen3-30b-a3b-h100x16.cfg");
    mt_rendered out = render_recipe(t, MT_DIALECT_MLM);
    const mt_strlist *a = &out.argv;
    /* knob flags the issue names, and the only other knob flags allowed */
    static const char *const allowed[] = {
        "--tensor-model-parallel-size", "--pipeline-model-parallel-size",
        "--expert-model-parallel-size", "--expert-tensor-parallel-size", "--micro-batch-size",
        "--bf16", "--moe-router-dtype", "--moe-token-dispatcher-type",
        "--moe-flex-dispatcher-backend", "--moe-flex-dispatcher-num-sms",
        "--overlap-moe-expert-parallel-comm", "--cuda-graph-impl", "--cuda-graph-modules",
        "--moe-grouped-gemm", "--moe-router-force-load-balancing",
        /* the recipe fuses permute into the HybridEP dispatch (0.18+) */
        "--moe-permute-fusion", "--moe-permute-fusion-into-hybridep",
        /* the contract's fixed_args (the published recipe's architecture) */
        "--position-embedding-type", "--attention-dropout", "--hidden-dropout", "--swiglu",
        "--disable-bias-linear", "--normalization", "--norm-epsilon", "--qk-layernorm",
        "--untie-embeddings-and-output-weights", "--rotary-base",
        /* the contract's base: distributed optimizer with overlapped DP traffic */
        "--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather",
        /* core base flags */
        "--num-layers", "--hidden-size", "--ffn-hidden-size", "--num-attention-heads",
        "--group-query-attention", "--num-query-groups", "--kv-channels", "--num-experts",
        "--moe-router-topk", "--moe-ffn-hidden-size", "--vocab-size", "--seq-length",
        "--max-position-embeddings", "--global-batch-size", "--train-iters", "--seed",
        "--log-interval", "--log-throughput", "--eval-iters", "--mock-data"};
    size_t i, j;

    expect_flag(a, "--tensor-model-parallel-size", "1", NULL);
    expect_flag(a, "--pipeline-model-parallel-size", "1", NULL);
    expect_flag(a, "--expert-model-parallel-size", "16", NULL);
    expect_flag(a, "--expert-tensor-parallel-size", "1", NULL);
    expect_flag(a, "--micro-batch-size", "1", NULL);
    expect_flag(a, "--global-batch-size", "1024", NULL);
    expect_flag(a, "--seq-length", "4096", NULL);
    expect_flag(a, "--bf16", NULL, NULL);
    expect_flag(a, "--moe-router-dtype", "fp32", NULL);
    expect_flag(a, "--moe-token-dispatcher-type", "flex", NULL);
    expect_flag(a, "--moe-flex-dispatcher-backend", "hybridep", NULL);
    expect_flag(a, "--moe-flex-dispatcher-num-sms", "32", NULL);
    expect_flag(a, "--overlap-moe-expert-parallel-comm", NULL, NULL);
    expect_flag(a, "--cuda-graph-impl", "transformer_engine", NULL);
    expect_flag(a, "--cuda-graph-modules", "moe_router", "moe_preprocess");
    expect_flag(a, "--moe-grouped-gemm", NULL, NULL);
    expect_flag(a, "--moe-permute-fusion", NULL, NULL);
    expect_flag(a, "--moe-permute-fusion-into-hybridep", NULL, NULL);
    expect_flag(a, "--moe-router-force-load-balancing", NULL, NULL);
    expect_flag(a, "--position-embedding-type", "rope", NULL);
    /* the architecture moetune's FLOPs and memory assume, as the model has it */
    expect_flag(a, "--swiglu", NULL, NULL);
    expect_flag(a, "--disable-bias-linear", NULL, NULL);
    expect_flag(a, "--normalization", "RMSNorm", NULL);
    expect_flag(a, "--qk-layernorm", NULL, NULL);
    expect_flag(a, "--rotary-base", "1000000", NULL);
    expect_flag(a, "--log-interval", "1", NULL);
    expect_flag(a, "--log-throughput", NULL, NULL);
    ck_assert_int_eq(find(a, "--delay-wgrad-compute"), -1);
    ck_assert_int_eq(find(a, "--recompute-granularity"), -1);
    ck_assert_int_eq(find(a, "--sequence-parallel"), -1);
    for (i = 0; i < a->n; i++) {
        int ok = 0;
        if (strncmp(a->v[i], "--", 2))
            continue;
        for (j = 0; j < sizeof allowed / sizeof allowed[0]; j++)
            ok |= !strcmp(a->v[i], allowed[j]);
        ck_assert_msg(ok, "unexpected flag %s in the canonical recipe", a->v[i]);
    }
    ck_assert_int_eq(mt_kv_count(out.env), 0);
    mt_rendered_clear(&out);
    tk_close(&t);
}
END_TEST

/* The example contract on another Megatron-LM version. */
static tk *open_on(const char *version)
{
    char *path = tk_example("qwen3-30b-a3b-h100x16.cfg"), *text = tk_slurp(path), *tmp;
    char *at = strstr(text, "megatron_lm = \"main\";"), *buf;
    mt_diag *d = mt_diag_new();
    tk *t;
    ck_assert_ptr_nonnull(at);
    buf = malloc(strlen(text) + 64);
    sprintf(buf, "%.*smegatron_lm = \"%s\";%s", (int)(at - text), text, version,
            at + strlen("megatron_lm = \"main\";"));
    tmp = tk_write_temp("render-version", buf);
    t = tk_open_path(tmp, d);
    ck_assert_msg(t != NULL, "%s", mt_diag_count(d) ? mt_diag_at(d, 0)->message : "");
    mt_diag_destroy(&d);
    unlink(tmp);
    free(tmp), free(buf), free(text), free(path);
    return t;
}

/* The same recipe in the spelling of each version that has its features:
 * the SM count is --moe-hybridep-num-sms on 0.18 and
 * --moe-flex-dispatcher-num-sms from 0.19; on 0.15 HybridEP and graph
 * modules do not exist, and the recipe is illegal at start-up, saying which
 * version it needs. */
START_TEST(golden_mlm_every_version)
{
    static const char *const versions[] = {"core_v0.18.0", "core_v0.19.0", "main"};
    size_t i, k;
    tk *t;
    mt_violations vs = {0};
    int needs = 0;
    for (i = 0; i < 3; i++) {
        mt_rendered out;
        t = open_on(versions[i]);
        out = render_recipe(t, MT_DIALECT_MLM);
        expect_flag(&out.argv, "--moe-flex-dispatcher-backend", "hybridep", NULL);
        expect_flag(&out.argv, i ? "--moe-flex-dispatcher-num-sms" : "--moe-hybridep-num-sms",
                    "32", NULL);
        ck_assert_int_eq(find(&out.argv, i ? "--moe-hybridep-num-sms" : "--moe-flex-dispatcher-num-sms"), -1);
        expect_flag(&out.argv, "--moe-permute-fusion-into-hybridep", NULL, NULL);
        expect_flag(&out.argv, "--cuda-graph-modules", "moe_router", "moe_preprocess");
        mt_rendered_clear(&out);
        tk_close(&t);
    }
    t = open_on("core_r0.15.0");
    for (k = 0; k < sizeof recipe / sizeof recipe[0]; k++)
        tk_set(t, recipe[k]);
    mt_legality(t->reg, t->contract, t->cfg, &vs, t->diag);
    for (k = 0; k < vs.n; k++)
        needs |= strstr(vs.v[k].rule, ".needs_core") && strstr(vs.v[k].message, "0.18");
    ck_assert_msg(needs, "core_r0.15.0: the recipe should need Megatron core >= 0.18");
    mt_violations_clear(&vs);
    tk_close(&t);
}
END_TEST

/* The example contract with stack.megatron_bridge set to version. */
static tk *open_bridge_on(const char *file, const char *version)
{
    char *path = tk_example(file), *text = tk_slurp(path), *tmp;
    const char *pat = "megatron_bridge = \"main\";";
    char *at = strstr(text, pat), *buf;
    mt_diag *d = mt_diag_new();
    tk *t;
    ck_assert_ptr_nonnull(at);
    buf = malloc(strlen(text) + 64);
    sprintf(buf, "%.*smegatron_bridge = \"%s\";%s", (int)(at - text), text, version,
            at + strlen(pat));
    tmp = tk_write_temp("render-bridge", buf);
    t = tk_open_path(tmp, d);
    ck_assert_msg(t != NULL, "%s", mt_diag_count(d) ? mt_diag_at(d, 0)->message : "");
    mt_diag_destroy(&d);
    unlink(tmp);
    free(tmp), free(buf), free(text), free(path);
    return t;
}

START_TEST(golden_bridge)
{
    tk *t = tk_open("qwen3-30b-a3b-h100x16-bridge.cfg");
    mt_rendered out = render_recipe(t, MT_DIALECT_BRIDGE);
    const mt_strlist *a = &out.argv;
    static const char *const want[] = {
        "model.tensor_model_parallel_size=1", "model.pipeline_model_parallel_size=1",
        "model.expert_model_parallel_size=16", "model.expert_tensor_parallel_size=1",
        "train.micro_batch_size=1", "train.global_batch_size=1024", "model.seq_length=4096",
        "dataset.seq_length=4096", "validation.eval_iters=0",
        "mixed_precision=bf16_mixed", "model.moe_router_dtype=fp32",
        "model.moe_token_dispatcher_type=flex", "model.moe_flex_dispatcher_backend=hybridep",
        "model.moe_flex_dispatcher_num_sms=32", "model.overlap_moe_expert_parallel_comm=True",
        "model.cuda_graph_impl=transformer_engine",
        "model.cuda_graph_modules=[moe_router,moe_preprocess]", "model.moe_grouped_gemm=True",
        "model.moe_router_force_load_balancing=True", "model.moe_permute_fusion=True",
        "model.moe_permute_fusion_into_hybridep=True", "ddp.overlap_grad_reduce=True",
        "ddp.overlap_param_gather=True", "ddp.use_distributed_optimizer=True",
        "optimizer.use_distributed_optimizer=True",
        "logger.log_interval=1", "logger.log_throughput=True"};
    size_t i;
    for (i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(find(a, want[i]) >= 0, "missing %s", want[i]);
    tk_check_bridge(a, "main");
    for (i = 0; i < a->n; i++)
        ck_assert_msg(!strstr(a->v[i], "delay_wgrad") && !strstr(a->v[i], "recompute_granularity") &&
                          !strstr(a->v[i], "sequence_parallel") && !strstr(a->v[i], "cuda_graph_scope"),
                      "unexpected %s", a->v[i]);
    mt_rendered_clear(&out);
    tk_close(&t);
}
END_TEST

/* The same recipe on Bridge 0.2.x: v0.2.2's paths. */
START_TEST(golden_bridge_v022)
{
    static const char *const versions[] = {"0.2.2", "0.2.x"};
    size_t v, i;
    for (v = 0; v < 2; v++) {
        tk *t = open_bridge_on("qwen3-30b-a3b-h100x16-bridge.cfg", versions[v]);
        mt_rendered out = render_recipe(t, MT_DIALECT_BRIDGE);
        const mt_strlist *a = &out.argv;
        static const char *const want[] = {
            "model.seq_length=4096", "dataset.sequence_length=4096", "train.eval_iters=0",
            "mixed_precision=bf16_mixed", "model.moe_hybridep_num_sms=32",
            "model.cuda_graph_scope=[moe_router,moe_preprocess]",
            "model.overlap_moe_expert_parallel_comm=True"};
        for (i = 0; i < sizeof want / sizeof want[0]; i++)
            ck_assert_msg(find(a, want[i]) >= 0, "%s: missing %s", versions[v], want[i]);
        tk_check_bridge(a, "v0.2.2");
        ck_assert_int_eq(find(a, "dataset.seq_length=4096"), -1);
        mt_rendered_clear(&out);
        tk_close(&t);
    }
}
END_TEST

/* DeepSeek-V3: the layout quoted, the layer pattern written out, the MXFP8
 * recipe by name, on both versions. */
START_TEST(golden_bridge_deepseek)
{
    static const char *const versions[] = {"main", "0.2.2"};
    size_t v;
    for (v = 0; v < 2; v++) {
        tk *t = open_bridge_on("deepseek-v3-gb200x256-bridge.cfg", versions[v]);
        mt_rendered out;
        mt_rendered_init(&out);
        ck_assert_int_eq(mt_render(t->reg, t->contract, t->cfg, MT_DIALECT_BRIDGE, &out, t->diag), 0);
        ck_assert(find(&out.argv, "model.pipeline_model_parallel_layout='Et|(tt|)*30mL'") >= 0);
        ck_assert(find(&out.argv, "mixed_precision=bf16_with_mxfp8_mixed") >= 0);
        ck_assert(find(&out.argv, "model.moe_layer_freq=[0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,"
                                  "1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,"
                                  "1,1,1,1,1,1,1,1,1,1,1,1,1,1]") >= 0);
        tk_check_bridge(&out.argv, v ? "v0.2.2" : "main");
        mt_rendered_clear(&out);
        tk_close(&t);
    }
}
END_TEST

/* FP8 e4m3 with tensorwise scaling has no recipe name: a render error that
 * says so, never a mixed_precision.* override. */
START_TEST(bridge_precision_without_name)
{
    tk *t = tk_open("qwen3-30b-a3b-h100x16-bridge.cfg");
    mt_rendered out;
    tk_set(t, "fp8_format=e4m3");
    tk_set(t, "fp8_recipe=tensorwise");
    mt_rendered_init(&out);
    ck_assert_int_ne(mt_render(t->reg, t->contract, t->cfg, MT_DIALECT_BRIDGE, &out, t->diag), 0);
    ck_assert_msg(mt_diag_contains(t->diag, "no Megatron-Bridge mixed_precision recipe name"),
                  "the error should say the combination has no recipe name");
    mt_rendered_clear(&out);
    tk_close(&t);
}
END_TEST

/* The core always forces per-step logging with throughput, whatever the
 * contract says, because every parser downstream relies on it. */
START_TEST(forced_logging)
{
    tk *t = tk_open("deepseek-v3-gb200x256.cfg");
    mt_rendered out;
    mt_rendered_init(&out);
    ck_assert_int_eq(mt_render(t->reg, t->contract, t->cfg, MT_DIALECT_MLM, &out, t->diag), 0);
    expect_flag(&out.argv, "--log-interval", "1", NULL);
    expect_flag(&out.argv, "--log-throughput", NULL, NULL);
    expect_flag(&out.argv, "--pipeline-model-parallel-layout", "Et|(tt|)*30mL", NULL);
    expect_flag(&out.argv, "--moe-layer-freq", "([0]*3+[1]*58)", NULL);
    expect_flag(&out.argv, "--multi-latent-attention", NULL, NULL);
    expect_flag(&out.argv, "--fp8-recipe", "mxfp8", NULL);
    expect_flag(&out.argv, "--recompute-modules", "mla_up_proj", "mlp");
    mt_rendered_clear(&out);
    tk_close(&t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("render");
    TCase *tc = tcase_create("golden");
    tcase_add_test(tc, golden_mlm);
    tcase_add_test(tc, golden_mlm_every_version);
    tcase_add_test(tc, golden_bridge);
    tcase_add_test(tc, golden_bridge_v022);
    tcase_add_test(tc, golden_bridge_deepseek);
    tcase_add_test(tc, bridge_precision_without_name);
    tcase_add_test(tc, forced_logging);
    suite_add_tcase(s, tc);
    return tk_run(s);
}
