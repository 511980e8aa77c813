/*
 * precision.c - the precision plugin: BF16 mixed precision, FP8 and FP4
 * training recipes, and the MoE router dtype.
 *
 * moetune tunes BF16 mixed-precision training (bf16 defaults to true and no
 * candidate turns it off).  Low-precision recipes are proposed as
 * training-equivalent: they are a training recipe, but they change numerics,
 * so each candidate says that the loss gate must confirm it.
 *
 * Start-up rules are Megatron-LM's own precision checks (validate_args and
 * TransformerConfig.__post_init__) per core version, over the parsed
 * namespace: "fp8 mode" is --fp8-format given, the recipe defaults to
 * delayed, FP32 training and a router without --moe-router-dtype start.
 * A recipe the GPU lacks (mxfp8, NVFP4 before Blackwell) fails only on the
 * GPU: a runtime rule.
 *
 * Rules owned elsewhere and deliberately not repeated here: FP8 `delayed`
 * with moe_act/layernorm recompute belongs to the recompute plugin, fp8 with
 * the block-scope inference CUDA graph to the cudagraph plugin, the EP
 * overlap dtype rule to the overlap plugin.
 */
#include "pluginkit.h"

#include <ctype.h>

static const char *const fp8_formats[] = {"none", "e4m3", "hybrid", NULL};
static const char *const fp8_recipes[] = {"none", "delayed", "tensorwise", "blockwise", "mxfp8",
                                          NULL};
static const char *const fp4_formats[] = {"none", "e2m1", NULL};
static const char *const fp4_recipes[] = {"none", "nvfp4", NULL};
static const char *const router_dtypes[] = {"none", "fp32", "fp64", NULL};

static const mt_knob_v1 knobs[] = {
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_BOOL, "bf16", NULL, "true",
     "BF16 mixed precision (--bf16; Megatron's default is FP32); moetune tunes BF16 runs"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_ENUM, "fp8_format", fp8_formats, "none",
     "FP8 format (--fp8-format): e4m3, or hybrid (E4M3 forward, E5M2 gradients)"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_ENUM, "fp8_recipe", fp8_recipes, "none",
     "FP8 scaling recipe (--fp8-recipe; none = Megatron's default, delayed); mxfp8 needs "
     "Blackwell"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_ENUM, "fp4_format", fp4_formats, "none",
     "FP4 format (--fp4-format e2m1); needs Blackwell, excludes FP8"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_ENUM, "fp4_recipe", fp4_recipes, "none",
     "FP4 recipe (--fp4-recipe nvfp4)"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_ENUM, "moe_router_dtype", router_dtypes, "none",
     "MoE router dtype (--moe-router-dtype); FP32 is the MoE recipe and proposed"},
};

static const mt_variable_v1 variables[] = {
    {sizeof(mt_variable_v1), "precision", "bf16 fp8_format fp8_recipe fp4_format fp4_recipe",
     MT_WALL_COMPUTE | MT_WALL_MEMORY},
    {sizeof(mt_variable_v1), "router_dtype", "moe_router_dtype", MT_WALL_COMPUTE},
};

/* One low-precision recipe a candidate can switch to. */
typedef struct recipe {
    const char *summary;
    const char *fp8_format, *fp8_recipe; /* "none" for FP4 */
    const char *fp4_format, *fp4_recipe; /* "none" for FP8 */
    const char *why;
} recipe;

/* Hopper: per-tensor current scaling first (robust and fast), then the
 * 1x128/128x128 block-scaled recipe DeepSeek-V3 trained with (E4M3 for both
 * passes, as block scaling keeps the range), then delayed scaling (amax
 * history; cheapest scaling, least robust). */
static const recipe hopper_recipes[] = {
    {"FP8 tensorwise (hybrid)", "hybrid", "tensorwise", "none", "none",
     "FP8 with per-tensor current scaling, E4M3 forward and E5M2 gradients"},
    {"FP8 blockwise (e4m3)", "e4m3", "blockwise", "none", "none",
     "FP8 with 1x128/128x128 block scaling in E4M3 (the DeepSeek-V3 recipe)"},
    {"FP8 delayed scaling (hybrid)", "hybrid", "delayed", "none", "none",
     "FP8 with delayed (amax-history) scaling, E4M3 forward and E5M2 gradients"},
};

/* Blackwell: MXFP8 (E4M3 with 1x32 E8M0 block scales, native tensor-core
 * support; the recipe of the published Blackwell records), then NVFP4. */
static const recipe blackwell_recipes[] = {
    {"MXFP8 (e4m3)", "e4m3", "mxfp8", "none", "none",
     "MXFP8: E4M3 with 1x32 block scales on Blackwell tensor cores"},
    {"NVFP4 (e2m1)", "none", "none", "e2m1", "nvfp4",
     "NVFP4: E2M1 with 1x16 block scales on Blackwell tensor cores"},
};

static int is_set(const char *v) { return v && *v && strcmp(v, "none"); }

static const char *arch_of(const mt_ctx_v1 *ctx) { return pk_str(ctx->hardware, "arch", ""); }

/* The config wins over the model view. */
static long num_experts(const mt_ctx_v1 *ctx)
{
    long n = pk_int(ctx->config, "num_experts", -1);
    return n >= 0 ? n : pk_int(ctx->model, "num_experts", 0);
}

/* Megatron core is at least v; a contract without a stack is judged as the
 * newest. */
static int core_ge(const mt_ctx_v1 *ctx, const char *v)
{
    return !pk_get(ctx->contract, "stack.megatron_core") || pk_core_ge(ctx, v);
}

/* Transformer Engine is declared and older than v (an undeclared TE proves
 * nothing either way). */
static int te_lt(const mt_ctx_v1 *ctx, const char *v)
{
    return pk_get(ctx->contract, "stack.transformer_engine") && !pk_te_ge(ctx, v);
}

static const char *te_version(const mt_ctx_v1 *ctx)
{
    return pk_str(ctx->contract, "stack.transformer_engine", "?");
}

/* "fp8 mode" is --fp8-format given (dest fp8), "fp4 mode" --fp4-format. */
static int fp8_on(const mt_ctx_v1 *ctx) { return pk_arg_set(ctx, "fp8"); }
static int fp4_on(const mt_ctx_v1 *ctx) { return pk_arg_set(ctx, "fp4"); }

static const char *fp8_recipe(const mt_ctx_v1 *ctx)
{
    return pk_str(pk_args(ctx), "fp8_recipe", "delayed");
}

/* --fp4-param-gather: dest fp4_param on core r0.15, fp4_param_gather later. */
static int fp4_param(const mt_ctx_v1 *ctx)
{
    return pk_arg_on(ctx, core_ge(ctx, "0.18") ? "fp4_param_gather" : "fp4_param");
}

/* --fp8-param-gather after validate_args' FSDP2 block, which turns it off
 * under torch FSDP2 (TE >= 2.0). */
static int fp8_param(const mt_ctx_v1 *ctx)
{
    return pk_arg_on(ctx, "fp8_param_gather") &&
           !(pk_arg_on(ctx, "use_torch_fsdp2") && pk_te_ge(ctx, "2.0"));
}

/* GTP weight remat (core 0.19+): shards over the matching TP size. */
static long remat(const mt_ctx_v1 *ctx, const char *shards, long tp)
{
    long n = pk_arg_int(ctx, shards, 0);
    return pk_arg_set(ctx, shards) && tp > 0 && n > 0 ? n / tp : 1;
}

/* validate_args' precision checks, in its order. */
static void args_rules(const mt_ctx_v1 *ctx, mt_sink *out)
{
    int v18 = core_ge(ctx, "0.18"), v19 = core_ge(ctx, "0.19");
    int fp8 = fp8_on(ctx), fp4 = fp4_on(ctx), f8p = fp8_param(ctx);
    int bf16 = pk_arg_on(ctx, "bf16"), fp16 = pk_arg_on(ctx, "fp16");
    const char *r8 = fp8_recipe(ctx);

    if (!v18 && pk_arg_on(ctx, "use_torch_fsdp2") && pk_arg_on(ctx, "fp4_param") &&
        te_lt(ctx, "2.7"))
        pk_startup(out, "precision.fsdp2_fp4_param_needs_te_2_7", "fp4_format",
                   "--fp4-param requires Transformer Engine >= 2.7.0.dev0 (it is %s); "
                   "upgrade TE or drop --fp4-param-gather",
                   te_version(ctx));
    if (f8p && !pk_arg_on(ctx, "use_distributed_optimizer") &&
        !pk_arg_on(ctx, "use_torch_fsdp2") && !pk_arg_on(ctx, "use_megatron_fsdp"))
        pk_startup(out, "precision.fp8_param_gather_needs_dist_opt", "",
                   "--fp8-param-gather only supported with distributed optimizer, torch fsdp2, "
                   "megatron fsdp, or inference mode; add --use-distributed-optimizer or drop "
                   "--fp8-param-gather");
    if (fp4 && fp8)
        pk_startup(out, "precision.fp4_fp8_exclusive", "fp4_format fp8_format",
                   "--fp4-format and --fp8-format cannot be used simultaneously. Please choose "
                   "one (fp8_format=%s, fp4_format=%s)",
                   pk_arg(ctx, "fp8"), pk_arg(ctx, "fp4"));
    if (fp4_param(ctx) && !fp4)
        pk_startup(out, "precision.fp4_param_gather_needs_fp4", "fp4_format",
                   "--fp4-param-gather must be used together with --fp4-format; set fp4_format "
                   "or drop --fp4-param-gather");
    if (fp4 && te_lt(ctx, "2.7"))
        pk_startup(out, "precision.fp4_needs_te_2_7", "fp4_format",
                   "--fp4-format requires Transformer Engine >= 2.7.0.dev0 for "
                   "NVFP4BlockScaling support (it is %s); upgrade TE or set fp4_format=none",
                   te_version(ctx));
    if (v19 && pk_arg_on(ctx, "use_megatron_fsdp") &&
        (pk_arg_on(ctx, "moe_single_grouped_weight") || pk_arg_on(ctx, "moe_single_grouped_bias")))
        pk_startup(out, "precision.fsdp_single_grouped", "",
                   "Megatron-FSDP does not currently support moe_single_grouped_weight or "
                   "moe_single_grouped_bias; drop them or use the distributed optimizer");
    if (fp16 && bf16)
        pk_startup(out, "precision.fp16_and_bf16", "bf16",
                   "validate_args asserts not args.bf16 with --fp16: choose one of --fp16 and "
                   "--bf16");
    if (bf16 && pk_arg_on(ctx, "accumulate_allreduce_grads_in_fp32") &&
        !pk_arg_is(ctx, "main_grads_dtype", "fp32"))
        pk_startup(out, "precision.main_grads_dtype_with_fp32_accum", "",
                   "--main-grads-dtype can only be fp32 when --accumulate-allreduce-grads-in-fp32 "
                   "is set (it is %s)",
                   pk_str(pk_args(ctx), "main_grads_dtype", "?"));
    /* fp8 with --inference-cuda-graph-scope=block is the cudagraph plugin's
     * rule (cudagraph.inference_block_fp8). */
    if (!v18 && fp8 && pk_arg_is(ctx, "cuda_graph_impl", "local") &&
        pk_arg_is(ctx, "cuda_graph_scope", "full_iteration") &&
        pk_arg_on(ctx, "inference_dynamic_batching"))
        pk_startup(out, "precision.inference_dynamic_full_iter_fp8", "fp8_format",
                   "fp8 is not supported with inference dynamic batching and full_iteration "
                   "CUDA graph; set fp8_format=none or use another graph scope");
    if (pk_arg_on(ctx, "fp16_lm_cross_entropy") && !fp16)
        pk_startup(out, "precision.fp16_lm_cross_entropy_needs_fp16", "",
                   "lm cross entropy in fp16 only support in fp16 mode; drop "
                   "--fp16-lm-cross-entropy");
    if (pk_arg_on(ctx, "fp32_residual_connection") && !fp16 && !bf16)
        pk_startup(out, "precision.fp32_residual_needs_half", "bf16",
                   "residual connection in fp32 only supported when using fp16 or bf16; set "
                   "bf16=true or drop --fp32-residual-connection");
    if (pk_arg_on(ctx, "moe_grouped_gemm")) {
        if (!v18 && !bf16)
            pk_startup(out, "precision.grouped_gemm_needs_bf16", "bf16 moe_grouped_gemm",
                       "Currently GroupedGEMM for MoE only supports bf16 dtype (Megatron core %s); "
                       "set bf16=true or turn grouped GEMM off",
                       pk_str(ctx->contract, "stack.megatron_core", "?"));
        if (pk_capability(ctx) > 0 && pk_capability(ctx) < 80)
            pk_startup(out, "precision.grouped_gemm_capability", "moe_grouped_gemm",
                       "Unsupported compute capability for GroupedGEMM kernels (%d.%d); turn "
                       "grouped GEMM off",
                       pk_capability(ctx) / 10, pk_capability(ctx) % 10);
    }
    if (!v18 && fp16 && pk_arg_int(ctx, "expert_model_parallel_size", 1) > 1)
        pk_startup(out, "precision.ep_fp16", "bf16",
                   "Expert parallelism is not supported with fp16 training (Megatron core %s); "
                   "use --bf16 or expert_model_parallel_size 1",
                   pk_str(ctx->contract, "stack.megatron_core", "?"));
    if (v19) {
        long tp = pk_arg_int(ctx, "tensor_model_parallel_size", 1);
        long etp = pk_arg_int(ctx, "expert_tensor_parallel_size", tp);
        int gtp = remat(ctx, "tensor_parallel_num_weight_shards", tp) > 1 ||
                  remat(ctx, "expert_tensor_parallel_num_weight_shards", etp) > 1;
        if (gtp && fp4 && !fp4_param(ctx))
            pk_startup(out, "precision.gtp_fp4_needs_fp4_param_gather", "fp4_format",
                       "GTP (--tensor-parallel-num-weight-shards / "
                       "--expert-tensor-parallel-num-weight-shards > 1) with --fp4-format "
                       "requires --fp4-param-gather so NVFP4 weights are all-gathered as native "
                       "NVFP4");
        if (gtp && !strcmp(r8, "mxfp8")) {
            if (!f8p)
                pk_startup(out, "precision.gtp_mxfp8_needs_fp8_param_gather", "fp8_recipe",
                           "GTP + mxfp8 requires --fp8-param-gather (the optimizer maintains "
                           "the fp8 shard)");
            else if (!pk_arg_on(ctx, "reuse_grad_buf_for_mxfp8_param_ag") ||
                     pk_arg_on(ctx, "use_megatron_fsdp"))
                pk_startup(out, "precision.gtp_mxfp8_needs_reuse_grad_buf", "fp8_recipe",
                           "GTP + mxfp8 + --fp8-param-gather requires "
                           "--reuse-grad-buf-for-mxfp8-param-ag (Megatron-FSDP turns it off)");
        }
    }
    if (pk_arg_on(ctx, "optimizer_cpu_offload") &&
        pk_arg_on(ctx, "use_precision_aware_optimizer") && f8p && strcmp(r8, "delayed"))
        pk_startup(out, "precision.cpu_offload_fp8_param_gather_needs_delayed", "fp8_recipe",
                   "When `--fp8-param-gather` is enabled, the optimizer cpu offload must be used "
                   "in conjunction with `--fp8-recipe delayed` (it is %s)",
                   r8);
}

/* TransformerConfig.__post_init__'s precision checks, in its order. */
static void config_rules(const mt_ctx_v1 *ctx, mt_sink *out)
{
    int v18 = core_ge(ctx, "0.18"), v19 = core_ge(ctx, "0.19"), v20 = core_ge(ctx, "0.20");
    int fp8 = fp8_on(ctx), fp4 = fp4_on(ctx), f8p = fp8_param(ctx);
    int gg = pk_arg_on(ctx, "moe_grouped_gemm");
    int op_fuser = pk_arg_on(ctx, "use_transformer_engine_op_fuser");
    /* main derives grouped tensors from the op fuser with grouped GEMM */
    int grouped_tensor = pk_arg_on(ctx, "moe_use_grouped_tensor") || (op_fuser && gg);
    int sgw = pk_arg_on(ctx, "moe_single_grouped_weight");
    int sgb = pk_arg_on(ctx, "moe_single_grouped_bias");
    const char *r8 = fp8_recipe(ctx);
    const char *r4 = pk_str(pk_args(ctx), "fp4_recipe", "nvfp4");
    int pad_q = pk_arg_on(ctx, "moe_router_padding_for_quantization");
    int pad8 = pk_arg_on(ctx, "moe_router_padding_for_fp8");

    if (v20 && pk_arg_on(ctx, "moe_use_grouped_tensor") && !gg)
        pk_startup(out, "precision.moe_use_grouped_tensor_needs_grouped_gemm", "moe_grouped_gemm",
                   "moe_use_grouped_tensor=True requires moe_grouped_gemm=True; turn grouped GEMM "
                   "on");
    if (fp8 && pk_arg_on(ctx, "first_last_layers_bf16")) {
        if (!strcmp(r8, "delayed")) {
            pk_startup(out, "precision.delayed_first_last_bf16", "fp8_recipe fp8_format",
                       "Delayed scaling does not support first / last layer in BF16; use "
                       "fp8_recipe tensorwise, blockwise or mxfp8, or drop "
                       "--first-last-layers-bf16");
        } else {
            long pp = pk_arg_int(ctx, "pipeline_model_parallel_size", 1);
            long m = pp > 0 ? pk_arg_int(ctx, "num_layers", 0) / pp : 0;
            long s = pk_arg_int(ctx, "num_layers_at_start_in_bf16", 1);
            long e = pk_arg_int(ctx, "num_layers_at_end_in_bf16", 1);
            if (s < 0 || s > m)
                pk_startup(out, "precision.bf16_layers_at_start_range", "",
                           "num_layers_at_start_in_bf16 (%ld) must be between 0 and number of "
                           "layers per pipeline stage (%ld)",
                           s, m);
            if (e < 0 || e > m)
                pk_startup(out, "precision.bf16_layers_at_end_range", "",
                           "num_layers_at_end_in_bf16 (%ld) must be between 0 and number of "
                           "layers per pipeline stage (%ld)",
                           e, m);
        }
    }
    if (v18 && fp8 && !strcmp(r8, "custom") && !*pk_str(pk_args(ctx), "fp8_quantizer_factory", ""))
        pk_startup(out, "precision.fp8_custom_recipe_needs_factory", "fp8_recipe",
                   "fp8_quantizer_factory must be provided when fp8_recipe is 'custom'; pass "
                   "--fp8-quantizer-factory package.module.quantizer_factory");
    if (f8p && !fp8)
        pk_startup(out, "precision.fp8_param_needs_fp8", "fp8_format",
                   "fp8_param must be used together with fp8 mode (--fp8-param-gather without "
                   "--fp8-format); set fp8_format or drop --fp8-param-gather");
    if (v18 && pk_arg_on(ctx, "fp8_output_proj")) {
        if (!fp8)
            pk_startup(out, "precision.fp8_output_proj_needs_fp8", "fp8_format",
                       "fp8_output_proj must be used together with fp8 mode; set fp8_format or "
                       "drop --fp8-output-proj");
        else if (strcmp(r8, "mxfp8"))
            pk_startup(out, "precision.fp8_output_proj_needs_mxfp8", "fp8_recipe",
                       "fp8_output_proj requires fp8_recipe='mxfp8', got '%s'", r8);
    }
    if (v18 && fp4 && !strcmp(r4, "custom") && !*pk_str(pk_args(ctx), "fp4_quantizer_factory", ""))
        pk_startup(out, "precision.fp4_custom_recipe_needs_factory", "fp4_recipe",
                   "fp4_quantizer_factory must be provided when fp4_recipe is 'custom'; pass "
                   "--fp4-quantizer-factory package.module.quantizer_factory");
    if (v18 && pk_arg_is(ctx, "transformer_impl", "inference_optimized") &&
        pk_arg_set(ctx, "num_experts")) {
        if (pad_q)
            pk_startup(out, "precision.inference_no_router_padding", "",
                       "Inference-optimized MoE layers do not support padded routing map for "
                       "quantization; drop --moe-router-padding-for-quantization");
        if (!pk_arg_is(ctx, "moe_router_dtype", "fp32"))
            pk_startup(out, "precision.inference_router_dtype_fp32", "moe_router_dtype",
                       "--transformer-impl='inference_optimized' requires --moe-router-dtype=fp32 "
                       "to avoid costly dtype conversions during decode; set "
                       "moe_router_dtype=fp32");
    }
    if (v18 && (sgw || sgb)) {
        if (!gg)
            pk_startup(out, "precision.single_grouped_needs_grouped_gemm", "moe_grouped_gemm",
                       "moe_single_grouped_weight and moe_single_grouped_bias require "
                       "moe_grouped_gemm=True; turn grouped GEMM on");
        else if (te_lt(ctx, "2.14"))
            pk_startup(out, "precision.single_grouped_needs_te_2_14", "",
                       "moe_single_grouped_weight and moe_single_grouped_bias require "
                       "transformer-engine>=2.14.0, but your version is %s",
                       te_version(ctx));
        else {
            if (sgw) {
                if (v19 ? (fp8 && strcmp(r8, "mxfp8")) || (fp4 && strcmp(r4, "nvfp4"))
                        : fp4 || !fp8 || strcmp(r8, "mxfp8"))
                    pk_startup(out, "precision.single_grouped_weight_recipe", "fp8_recipe",
                               "moe_single_grouped_weight is currently supported %s",
                               v19 ? "with high-precision primary weights, fp8_recipe='mxfp8', "
                                     "or fp4_recipe='nvfp4'"
                                   : "only with fp8 mode and fp8_recipe='mxfp8'");
                if (v19 && !v20 && !op_fuser)
                    pk_startup(out, "precision.single_grouped_weight_needs_op_fuser", "",
                               "moe_single_grouped_weight requires "
                               "use_transformer_engine_op_fuser=True");
                if (v20 && fp4 && !fp4_param(ctx))
                    pk_startup(out, "precision.single_grouped_weight_fp4_param", "fp4_format",
                               "moe_single_grouped_weight with FP4 compute requires "
                               "fp4_param=True (--fp4-param-gather)");
                if (v20 && !grouped_tensor)
                    pk_startup(out, "precision.single_grouped_weight_needs_grouped_tensor", "",
                               "moe_single_grouped_weight requires moe_use_grouped_tensor=True");
            }
            if (sgb && !pk_arg_on(ctx, "add_bias_linear"))
                pk_startup(out, "precision.single_grouped_bias_needs_bias", "",
                           "moe_single_grouped_bias requires add_bias_linear=True");
            if (sgb && v20 && !grouped_tensor)
                pk_startup(out, "precision.single_grouped_bias_needs_grouped_tensor", "",
                           "moe_single_grouped_bias requires moe_use_grouped_tensor=True");
        }
    }
    if (pk_arg_set(ctx, "num_experts") && fp8 && pk_arg_int(ctx, "num_experts", 0) > 0 &&
        (te_lt(ctx, "1.7") || (gg && te_lt(ctx, "1.11"))))
        pk_startup(out, "precision.moe_fp8_te_versions", "fp8_format",
                   "Only transformer-engine>=%s supports %s, but your version is %s",
                   te_lt(ctx, "1.7") ? "1.7.0" : "1.11.0",
                   te_lt(ctx, "1.7") ? "MoE FP8 training" : "FP8 grouped gemm", te_version(ctx));
    /* Routing-map padding for quantized GEMMs: core r0.15 knows only the
     * fp8 flag; later versions map it onto padding_for_quantization. */
    if (v18 ? (pad8 || pad_q) && !fp8 && !fp4 : pad8 && !fp8)
        pk_startup(out, "precision.router_padding_needs_fp8", "fp8_format",
                   "%s must be specified when moe_router_padding_for_%s is True; set fp8_format "
                   "or drop the padding flag",
                   v18 ? "fp8/fp4" : "fp8", v18 ? "quantization" : "fp8");
}

/* What only fails on the GPU: block-scaled recipes need Blackwell tensor
 * cores, FP8 needs Hopper or later. */
static void runtime_rules(const mt_ctx_v1 *ctx, mt_sink *out)
{
    const mt_kv *c = ctx->config;
    const char *arch = arch_of(ctx), *gpu = pk_str(ctx->hardware, "gpu", "?");
    int fp8, fp4, mx;
    if (pk_args(ctx)) {
        fp8 = fp8_on(ctx), fp4 = fp4_on(ctx);
        mx = fp8 && !strcmp(fp8_recipe(ctx), "mxfp8");
    } else {
        fp8 = is_set(pk_str(c, "fp8_format", "none"));
        fp4 = is_set(pk_str(c, "fp4_format", "none"));
        mx = fp8 && pk_eq(c, "fp8_recipe", "mxfp8");
    }
    /* An unknown arch proves nothing either way; the host validates it. */
    if (!*arch || !(fp8 || fp4))
        return;
    if (strcmp(arch, "hopper") && strcmp(arch, "blackwell"))
        pk_runtime(out, "precision.recipe_arch", fp8 ? "fp8_format fp8_recipe" : "fp4_format",
                   "runtime: low-precision training needs Hopper or Blackwell FP8 tensor cores; "
                   "%s is %s; set fp8_format and fp4_format to none",
                   gpu, arch);
    else if (strcmp(arch, "blackwell")) {
        if (mx)
            pk_runtime(out, "precision.recipe_arch", "fp8_recipe fp8_format",
                       "runtime: --fp8-recipe mxfp8 needs Blackwell (block-scaled MXFP8 GEMMs); "
                       "%s is %s; use tensorwise, blockwise or delayed there",
                       gpu, arch);
        if (fp4)
            pk_runtime(out, "precision.recipe_arch", "fp4_format fp4_recipe",
                       "runtime: FP4 (--fp4-format) needs Blackwell (NVFP4 GEMMs); %s is %s; set "
                       "fp4_format and fp4_recipe to none",
                       gpu, arch);
    }
}

static int precision_check(void *state, const mt_ctx_v1 *ctx, mt_sink *out)
{
    (void)state;
    if (pk_args(ctx)) {
        args_rules(ctx, out);
        config_rules(ctx, out);
    }
    runtime_rules(ctx, out);
    return 0;
}

static int space_ok(const mt_ctx_v1 *ctx, const char *knob, const char *from, const char *to)
{
    return !strcmp(from, to) || pk_space_allows(ctx, knob, to);
}

/* A recipe is a candidate when it changes something, the contract's space
 * allows every value it writes, and the hardware runs it (the tables are
 * already per architecture). */
static int recipe_usable(const mt_ctx_v1 *ctx, const recipe *r)
{
    const mt_kv *c = ctx->config;
    const char *f8 = pk_str(c, "fp8_format", "none"), *r8 = pk_str(c, "fp8_recipe", "none");
    const char *f4 = pk_str(c, "fp4_format", "none"), *r4 = pk_str(c, "fp4_recipe", "none");
    if (!strcmp(f8, r->fp8_format) && !strcmp(r8, r->fp8_recipe) &&
        !strcmp(f4, r->fp4_format) && !strcmp(r4, r->fp4_recipe))
        return 0;
    return space_ok(ctx, "fp8_format", f8, r->fp8_format) &&
           space_ok(ctx, "fp8_recipe", r8, r->fp8_recipe) &&
           space_ok(ctx, "fp4_format", f4, r->fp4_format) &&
           space_ok(ctx, "fp4_recipe", r4, r->fp4_recipe);
}

static void set_if_changed(const mt_ctx_v1 *ctx, mt_sink *out, const char *knob, const char *v)
{
    const char *cur = pk_get(ctx->config, knob);
    if (!cur || strcmp(cur, v))
        pk_host->sink_set(out, knob, v);
}

static void emit_recipe(const mt_ctx_v1 *ctx, mt_sink *out, const recipe *r, uint32_t walls)
{
    pk_host->sink_candidate(out, "precision", r->summary, walls, MT_LABEL_TRAINING_EQUIVALENT);
    set_if_changed(ctx, out, "fp8_format", r->fp8_format);
    set_if_changed(ctx, out, "fp8_recipe", r->fp8_recipe);
    set_if_changed(ctx, out, "fp4_format", r->fp4_format);
    set_if_changed(ctx, out, "fp4_recipe", r->fp4_recipe);
    pk_note(out, "%s", r->why);
    if (is_set(r->fp8_format) || is_set(r->fp4_format)) {
        pk_note(out, "speeds up the GEMM share of the step only (and shrinks activation "
                     "memory); quantization kernels add launches");
        pk_note(out, "changes numerics although it is a training recipe: the loss gate must "
                     "confirm the loss tracks the control at the same seed");
    }
}

static const recipe bf16_only = {"bf16 only", "none", "none", "none", "none",
                                 "back to plain BF16: when the GEMM share of the step is small, "
                                 "quantization and scaling kernels can cost more than the "
                                 "faster GEMMs save"};

static int precision_propose(void *state, const mt_ctx_v1 *ctx, mt_sink *out)
{
    const mt_kv *c = ctx->config;
    const char *arch = arch_of(ctx), *rd = pk_str(c, "moe_router_dtype", "none");
    const char *wall = pk_get(ctx->evidence, "wall");
    const recipe *list = NULL;
    size_t n = 0, i;
    int lowp = is_set(pk_str(c, "fp8_format", "none")) || is_set(pk_str(c, "fp8_recipe", "none")) ||
               is_set(pk_str(c, "fp4_format", "none")) || is_set(pk_str(c, "fp4_recipe", "none"));
    /* A profile that blames anything but compute says the GEMMs are not the
     * bottleneck, so dropping the quantization overhead is the better bet. */
    int bf16_first = lowp && wall && strncmp(wall, "compute", 7);
    (void)state;

    if (num_experts(ctx) > 0 && strcmp(rd, "fp32") && pk_space_allows(ctx, "moe_router_dtype", "fp32")) {
        pk_host->sink_candidate(out, "router_dtype", "router in FP32", MT_WALL_COMPUTE,
                                MT_LABEL_TRAINING_EQUIVALENT);
        pk_host->sink_set(out, "moe_router_dtype", "fp32");
        if (!strcmp(rd, "fp64"))
            pk_note(out, "FP32 routing is the Megatron MoE recipe; FP64 routing runs the "
                         "router GEMM and softmax at FP64 throughput for no training benefit");
        else
            pk_note(out, "router must be FP32: BF16 gating perturbs top-k selection and gating "
                         "weights across many experts; Megatron's MoE recipes set "
                         "--moe-router-dtype fp32");
    }

    if (!strcmp(arch, "hopper"))
        list = hopper_recipes, n = sizeof hopper_recipes / sizeof hopper_recipes[0];
    else if (!strcmp(arch, "blackwell"))
        list = blackwell_recipes, n = sizeof blackwell_recipes / sizeof blackwell_recipes[0];

    if (bf16_first && recipe_usable(ctx, &bf16_only))
        emit_recipe(ctx, out, &bf16_only, MT_WALL_COMPUTE);
    for (i = 0; i < n; i++)
        if (recipe_usable(ctx, &list[i]))
            emit_recipe(ctx, out, &list[i], MT_WALL_COMPUTE | MT_WALL_MEMORY);
    if (lowp && !bf16_first && recipe_usable(ctx, &bf16_only))
        emit_recipe(ctx, out, &bf16_only, MT_WALL_COMPUTE);
    return 0;
}

/* No other plugin's knob takes part in a precision rule (the recompute rule
 * on FP8 `delayed` is repaired by the recompute plugin), so another
 * candidate cannot break one; violations that predate the candidate are not
 * repaired here, as that would change two things in one A/B. */
static int precision_repair(void *state, const mt_ctx_v1 *ctx, mt_sink *out)
{
    (void)state, (void)ctx, (void)out;
    return 0;
}

static int precision_render(void *state, const mt_ctx_v1 *ctx, uint32_t d, mt_sink *out)
{
    const mt_kv *c = ctx->config;
    const char *f8 = pk_str(c, "fp8_format", "none"), *r8 = pk_str(c, "fp8_recipe", "none");
    const char *f4 = pk_str(c, "fp4_format", "none"), *r4 = pk_str(c, "fp4_recipe", "none");
    const char *rd = pk_str(c, "moe_router_dtype", "none");
    (void)state;

    if (d == MT_DIALECT_BRIDGE) {
        /* Library recipes hold mixed_precision as a recipe name (a string:
         * mixed_precision.<field> fails there), and each name fixes the
         * format with the recipe, so only the named combinations render. */
        static const struct {
            const char *f8, *r8, *f4, *name;
        } names[] = {
            {"none", "none", "none", "bf16_mixed"},
            {"hybrid", "tensorwise", "none", "bf16_with_fp8_current_scaling_mixed"},
            {"hybrid", "delayed", "none", "bf16_with_fp8_delayed_scaling_mixed"},
            {"hybrid", "blockwise", "none", "bf16_with_fp8_subchannel_scaling_mixed"},
            {"e4m3", "mxfp8", "none", "bf16_with_mxfp8_mixed"},
            {"none", "none", "nvfp4", "bf16_with_nvfp4_mixed"},
        };
        const char *f4r = is_set(r4) ? r4 : is_set(f4) ? "nvfp4" : "none";
        const char *name = NULL;
        char msg[512];
        size_t i;
        for (i = 0; pk_bool(c, "bf16") && i < sizeof names / sizeof names[0]; i++)
            if (!strcmp(names[i].f8, is_set(f8) ? f8 : "none") &&
                /* a recipe without a format is unused, as in Megatron */
                !strcmp(names[i].r8, is_set(f8) && is_set(r8) ? r8 : "none") &&
                !strcmp(names[i].f4, f4r))
                name = names[i].name;
        if (!name) {
            snprintf(msg, sizeof msg,
                     "precision %s%s%s%s%s%s%s%s has no Megatron-Bridge mixed_precision recipe "
                     "name (bf16_mixed; fp8 hybrid with tensorwise, delayed or blockwise; e4m3 "
                     "with mxfp8; nvfp4): a library recipe cannot take it",
                     pk_bool(c, "bf16") ? "bf16" : "fp32", is_set(f8) ? ", fp8 " : "",
                     is_set(f8) ? f8 : "", is_set(r8) ? " + " : "", is_set(r8) ? r8 : "",
                     is_set(f4) || is_set(r4) ? ", fp4 " : "", is_set(f4) ? f4 : "",
                     is_set(r4) ? r4 : "");
            pk_host->sink_error(out, msg);
            return 0;
        }
        snprintf(msg, sizeof msg, "mixed_precision=%s", name);
        pk_host->sink_arg(out, msg);
        if (is_set(rd))
            pk_render(out, d, "moe_router_dtype", "model", NULL, rd);
        return 0;
    }
    /* Megatron's own default is FP32 training, so --bf16 is always written. */
    if (pk_bool(c, "bf16"))
        pk_render_bool(out, d, "bf16", "mixed_precision", NULL, 1);
    if (is_set(f8))
        pk_render(out, d, "fp8_format", "mixed_precision", "fp8", f8);
    if (is_set(r8))
        pk_render(out, d, "fp8_recipe", "mixed_precision", "fp8_recipe", r8);
    if (is_set(f4))
        pk_render(out, d, "fp4_format", "mixed_precision", "fp4", f4);
    if (is_set(r4))
        pk_render(out, d, "fp4_recipe", "mixed_precision", "fp4_recipe", r4);
    if (is_set(rd))
        pk_render(out, d, "moe_router_dtype", "model", NULL, rd);
    return 0;
}

/* The arguments dump names a flag by its argparse dest, which for the format
 * flags is "fp8" / "fp4", not the flag name. */
static const char *args_value(const mt_ctx_v1 *ctx, const char *dest, const char *knob)
{
    char key[96];
    const char *v;
    snprintf(key, sizeof key, "args.%s", dest);
    v = pk_get(ctx->evidence, key);
    if (!v && strcmp(dest, knob)) {
        snprintf(key, sizeof key, "args.%s", knob);
        v = pk_get(ctx->evidence, key);
    }
    return v;
}

/* Knobs the arguments dump settles on its own: read once at start-up. */
static void verify_by_args(const mt_ctx_v1 *ctx, mt_sink *out, const char *knob, const char *want)
{
    const char *got = args_value(ctx, knob, knob);
    if (!got)
        pk_verdict(out, knob, MT_VERDICT_UNKNOWN,
                   "no arguments dump in the evidence; cannot tell whether %s = %s was used",
                   knob, want);
    else if (pk_same_value(want, got))
        pk_verdict(out, knob, MT_VERDICT_APPLIED, "arguments dump: %s = %s", knob, got);
    else
        pk_verdict(out, knob, MT_VERDICT_NOT_APPLIED,
                   "arguments dump: %s = %s, but %s was requested", knob, got, want);
}

/* FP8/FP4 recipes print no line: the dump proves the request, only GEMM kernel
 * names in a profiled run prove that the low-precision path ran. */
static void verify_lowp(const mt_ctx_v1 *ctx, mt_sink *out, const char *knob, const char *dest,
                        const char *want, int fp4)
{
    const char *r8 = pk_str(ctx->config, "fp8_recipe", "none");
    const char *trace_key = fp4 ? "trace.nvfp4_gemm"
                            : !strcmp(r8, "mxfp8") ? "trace.mxfp8_gemm" : "trace.fp8_gemm";
    const char *kind = fp4 ? "NVFP4" : !strcmp(r8, "mxfp8") ? "MXFP8" : "FP8";
    const char *got = args_value(ctx, dest, knob);
    long kernels = pk_int(ctx->evidence, trace_key, -1);

    if (got && !pk_same_value(want, got)) {
        pk_verdict(out, knob, MT_VERDICT_NOT_APPLIED,
                   "arguments dump: %s = %s, but %s = %s was requested", dest, got, knob, want);
        return;
    }
    if (kernels > 0) {
        pk_verdict(out, knob, MT_VERDICT_APPLIED, "%s = %ld %s GEMM kernels in the trace",
                   trace_key, kernels, kind);
        return;
    }
    if (pk_eq(ctx->evidence, "trace.available", "true")) {
        pk_verdict(out, knob, MT_VERDICT_NOT_APPLIED,
                   "requested %s but no %s GEMM kernels in the trace (%s = %ld)",
                   fp4 ? "FP4" : "FP8", kind, trace_key, kernels < 0 ? 0L : kernels);
        return;
    }
    pk_verdict(out, knob, MT_VERDICT_UNKNOWN,
               "needs a profiled run: low-precision recipes print no line, and the arguments "
               "dump %s",
               got ? "proves only the request" : "is missing too");
}

static int precision_verify(void *state, const mt_ctx_v1 *ctx, mt_sink *out)
{
    const mt_kv *c = ctx->config;
    const char *f8 = pk_str(c, "fp8_format", "none"), *r8 = pk_str(c, "fp8_recipe", "none");
    const char *f4 = pk_str(c, "fp4_format", "none"), *r4 = pk_str(c, "fp4_recipe", "none");
    const char *rd = pk_str(c, "moe_router_dtype", "none");
    (void)state;

    if (!pk_bool(c, "bf16"))
        verify_by_args(ctx, out, "bf16", "false");
    if (is_set(f8))
        verify_lowp(ctx, out, "fp8_format", "fp8", f8, 0);
    if (is_set(r8))
        verify_lowp(ctx, out, "fp8_recipe", "fp8_recipe", r8, 0);
    if (is_set(f4))
        verify_lowp(ctx, out, "fp4_format", "fp4", f4, 1);
    if (is_set(r4))
        verify_lowp(ctx, out, "fp4_recipe", "fp4_recipe", r4, 1);
    if (is_set(rd))
        verify_by_args(ctx, out, "moe_router_dtype", rd);
    return 0;
}

MT_PLUGIN_EXPORT const mt_plugin_v1 moetune_plugin_v1 = {
    .struct_size = sizeof(mt_plugin_v1),
    .abi_version = MT_PLUGIN_ABI_VERSION,
    .name = "precision",
    .version = "1.0.0",
    .description = "BF16 mixed precision, FP8/MXFP8 and NVFP4 recipes, FP32 MoE router",
    .knobs = knobs,
    .n_knobs = sizeof knobs / sizeof knobs[0],
    .variables = variables,
    .n_variables = sizeof variables / sizeof variables[0],
    .init = pk_init,
    .propose = precision_propose,
    .repair = precision_repair,
    .check = precision_check,
    .render = precision_render,
    .verify = precision_verify,
};
