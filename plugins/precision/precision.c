/*
 * precision.c - the precision plugin: BF16 mixed precision, FP8 and FP4
 * training recipes, and the MoE router dtype.
 *
 * moetune tunes BF16 mixed-precision training only: FP16 training is not a
 * moetune target (Megatron refuses expert parallelism and grouped GEMM with
 * FP16), so bf16 must stay true.  Low-precision recipes are proposed as
 * training-equivalent: they are a training recipe, but they change numerics,
 * so each candidate says that the loss gate must confirm it.
 *
 * Rules owned elsewhere and deliberately not repeated here: FP8 `delayed`
 * with moe_act/layernorm recompute belongs to the recompute plugin, the EP
 * overlap compute-path rule to the overlap plugin.
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
     "BF16 mixed precision (--bf16); must stay true: FP16 training is not a moetune target"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_ENUM, "fp8_format", fp8_formats, "none",
     "FP8 format (--fp8-format): e4m3, or hybrid (E4M3 forward, E5M2 gradients)"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_ENUM, "fp8_recipe", fp8_recipes, "none",
     "FP8 scaling recipe (--fp8-recipe); mxfp8 needs Blackwell"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_ENUM, "fp4_format", fp4_formats, "none",
     "FP4 format (--fp4-format e2m1); needs Blackwell, excludes FP8"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_ENUM, "fp4_recipe", fp4_recipes, "none",
     "FP4 recipe (--fp4-recipe nvfp4)"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_ENUM, "moe_router_dtype", router_dtypes, "none",
     "MoE router dtype (--moe-router-dtype); the router stays FP32 on MoE models"},
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

/* The config wins over the model view: rules are about what gets rendered. */
static long num_experts(const mt_ctx_v1 *ctx)
{
    long n = pk_int(ctx->config, "num_experts", -1);
    return n >= 0 ? n : pk_int(ctx->model, "num_experts", 0);
}

static const char *arch_of(const mt_ctx_v1 *ctx) { return pk_str(ctx->hardware, "arch", ""); }

static int lowp_arch_ok(const char *arch)
{
    return !strcmp(arch, "hopper") || !strcmp(arch, "blackwell");
}

static int precision_check(void *state, const mt_ctx_v1 *ctx, mt_sink *out)
{
    const mt_kv *c = ctx->config;
    const char *f8 = pk_str(c, "fp8_format", "none"), *r8 = pk_str(c, "fp8_recipe", "none");
    const char *f4 = pk_str(c, "fp4_format", "none"), *r4 = pk_str(c, "fp4_recipe", "none");
    const char *rd = pk_str(c, "moe_router_dtype", "none");
    const char *arch = arch_of(ctx), *gpu = pk_str(ctx->hardware, "gpu", "?");
    int fp8 = is_set(f8) || is_set(r8), fp4 = is_set(f4) || is_set(r4);
    long experts = num_experts(ctx);
    (void)state;

    if (!pk_bool(c, "bf16"))
        pk_violation(out, "precision.bf16_required", "bf16",
                     "bf16 is false: moetune tunes BF16 mixed-precision training only "
                     "(FP16 training is not a moetune target; Megatron refuses expert "
                     "parallelism with FP16 and grouped GEMM without BF16); set bf16=true");
    /* Megatron's own assertion, apart from the policy above: grouped GEMM
     * kernels take BF16 only. */
    if (!pk_bool(c, "bf16") && experts > 0 && pk_bool(c, "moe_grouped_gemm"))
        pk_violation(out, "precision.grouped_gemm_needs_bf16", "bf16 moe_grouped_gemm",
                     "--moe-grouped-gemm needs --bf16 (Megatron: \"Currently GroupedGEMM for MoE "
                     "only supports bf16 dtype\"); set bf16=true or turn grouped GEMM off");

    if (is_set(f8) && !is_set(r8))
        pk_violation(out, "precision.fp8_format_recipe_pair", "fp8_recipe fp8_format",
                     "--fp8-format %s is set but fp8_recipe is none; set fp8_recipe "
                     "(tensorwise, blockwise or delayed on Hopper, mxfp8 on Blackwell) or "
                     "fp8_format=none",
                     f8);
    else if (!is_set(f8) && is_set(r8))
        pk_violation(out, "precision.fp8_format_recipe_pair", "fp8_format fp8_recipe",
                     "--fp8-recipe %s is set but fp8_format is none, so FP8 is off; set "
                     "fp8_format (e4m3 or hybrid) or fp8_recipe=none",
                     r8);

    if (is_set(f4) && !is_set(r4))
        pk_violation(out, "precision.fp4_format_recipe_pair", "fp4_recipe fp4_format",
                     "--fp4-format %s is set but fp4_recipe is none; set fp4_recipe=nvfp4 "
                     "or fp4_format=none",
                     f4);
    else if (!is_set(f4) && is_set(r4))
        pk_violation(out, "precision.fp4_format_recipe_pair", "fp4_format fp4_recipe",
                     "--fp4-recipe %s is set but fp4_format is none, so FP4 is off; set "
                     "fp4_format=e2m1 or fp4_recipe=none",
                     r4);

    if (fp8 && fp4)
        pk_violation(out, "precision.fp8_fp4_exclusive",
                     "fp4_format fp4_recipe fp8_format fp8_recipe",
                     "FP8 (fp8_format=%s, fp8_recipe=%s) and FP4 (fp4_format=%s, "
                     "fp4_recipe=%s) are mutually exclusive (Megatron raises); keep one "
                     "and set the other pair to none",
                     f8, r8, f4, r4);

    /* An unknown arch proves nothing either way; the host validates it. */
    if (*arch && (fp8 || fp4)) {
        if (!lowp_arch_ok(arch))
            pk_violation(out, "precision.recipe_arch",
                         fp8 ? "fp8_recipe fp8_format" : "fp4_recipe fp4_format",
                         "low-precision training needs Hopper or Blackwell FP8 tensor cores; "
                         "%s is %s; set fp8_format, fp8_recipe, fp4_format and fp4_recipe "
                         "to none",
                         gpu, arch);
        else if (strcmp(arch, "blackwell")) {
            if (!strcmp(r8, "mxfp8"))
                pk_violation(out, "precision.recipe_arch", "fp8_recipe fp8_format",
                             "--fp8-recipe mxfp8 needs Blackwell (block-scaled MXFP8 GEMMs); "
                             "%s is %s; use tensorwise, blockwise or delayed there",
                             gpu, arch);
            if (is_set(f4) || is_set(r4))
                pk_violation(out, "precision.recipe_arch", "fp4_recipe fp4_format",
                             "FP4 (fp4_format=%s, fp4_recipe=%s) needs Blackwell (NVFP4 "
                             "GEMMs); %s is %s; set fp4_format and fp4_recipe to none",
                             f4, r4, gpu, arch);
        }
    }

    /* TE would take HYBRID here; moetune follows Megatron's MXFP8 recipes, which
     * use E4M3 for both passes since the 1x32 block scales carry the range. */
    if (!strcmp(r8, "mxfp8") && !strcmp(f8, "hybrid"))
        pk_violation(out, "precision.mxfp8_needs_e4m3", "fp8_format fp8_recipe",
                     "moetune runs --fp8-recipe mxfp8 with --fp8-format e4m3, as Megatron's "
                     "MXFP8 recipes and TE's MXFP8 default do (the 1x32 block scales carry "
                     "the gradient range); fp8_format is hybrid; set fp8_format=e4m3");

    if (experts > 0 && strcmp(rd, "fp32") && strcmp(rd, "fp64"))
        pk_violation(out, "precision.router_fp32", "moe_router_dtype",
                     "router must be FP32; set moe_router_dtype=fp32 (it is %s, so the "
                     "gating GEMM and routing scores over %ld experts run in BF16)",
                     rd, experts);
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
