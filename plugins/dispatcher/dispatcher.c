/*
 * dispatcher.c - the MoE token dispatcher plugin.
 *
 * Owns how routed tokens travel to their experts and the kernels around that
 * trip: the dispatcher type and flex backend, the flex backend's SM budget,
 * permute fusion, grouped GEMM, and forced load balancing (benchmark-only).
 *
 * Start-up rules are Megatron-LM's own checks (validate_args and
 * TransformerConfig.__post_init__) on the dispatcher and MoE capacity
 * settings, per version, over the parsed namespace (ctx->args).  What only
 * fails once the model is built or the kernels run (the flex group of one
 * rank, a backend the GPU cannot run, the SM budget) is a runtime rule.
 * Which flex backend runs on which GPU is this plugin's own table
 * (backend_support below), because the framework does not reject an
 * unsupported backend: it silently falls back to alltoall, so running one
 * would measure alltoall under a flex label.
 *
 * Spelling per version: core r0.15 has no flex backend flag (DeepEP is
 * --moe-enable-deepep, its SMs --moe-deepep-num-sms); 0.18 adds
 * --moe-flex-dispatcher-backend (deepep, hybridep), --moe-hybridep-num-sms and
 * --moe-permute-fusion-into-hybridep; 0.19 adds ncclep and the unified
 * --moe-flex-dispatcher-num-sms.
 *
 * Backend values a third-party plugin adds to moe_flex_dispatcher_backend
 * (mt_extension_v1) are that plugin's business: every call here skips them.
 */
#include "pluginkit.h"

static const char *const dispatcher_types[] = {"allgather", "alltoall", "flex", NULL};
static const char *const flex_backends[] = {"none", "deepep", "hybridep", "ncclep", NULL};

static const mt_knob_v1 knobs[] = {
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_ENUM, "moe_token_dispatcher_type",
     dispatcher_types, "allgather", "how routed tokens reach their experts"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_ENUM, "moe_flex_dispatcher_backend",
     flex_backends, "none",
     "communication library behind the flex dispatcher; none = Megatron's default (deepep)"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_INT, "moe_flex_dispatcher_num_sms", NULL, "0",
     "SMs the flex backend's dispatch/combine kernels may use; 0 = the backend's default"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_BOOL, "moe_permute_fusion", NULL, "false",
     "fused token permute/unpermute kernels (with HybridEP: fused into the dispatch)"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_BOOL, "moe_grouped_gemm", NULL, "false",
     "one grouped GEMM for all local experts instead of one GEMM per expert"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_BOOL, "moe_router_force_load_balancing", NULL,
     "false", "random balanced routing; results with it are benchmark-only"},
};

/* The SM budget belongs to "dispatcher" too: leaving flex clears it, so the
 * alltoall control carries no flex-only setting. */
static const mt_variable_v1 variables[] = {
    {sizeof(mt_variable_v1), "dispatcher",
     "moe_token_dispatcher_type moe_flex_dispatcher_backend moe_flex_dispatcher_num_sms",
     MT_WALL_COMM},
    {sizeof(mt_variable_v1), "dispatcher_sms", "moe_flex_dispatcher_num_sms",
     MT_WALL_COMM | MT_WALL_COMPUTE},
    {sizeof(mt_variable_v1), "permute_fusion", "moe_permute_fusion",
     MT_WALL_COMM | MT_WALL_COMPUTE},
    {sizeof(mt_variable_v1), "grouped_gemm", "moe_grouped_gemm", MT_WALL_COMPUTE | MT_WALL_HOST},
    {sizeof(mt_variable_v1), "routing", "moe_router_force_load_balancing", MT_WALL_COMM},
};

/* Which flex backends run where.  It mirrors the conditions under which the
 * stack falls back to alltoall: DeepEP runs on Hopper and Blackwell; HybridEP
 * on Hopper and on the NVL72-class Blackwell systems (GB200, GB300) but not on
 * B200 nodes; NCCL EP wherever NCCL runs.  SM counts bound
 * moe_flex_dispatcher_num_sms when the hardware view has no "sms". */
static const struct backend_support {
    const char *gpu;
    const char *backends; /* space-separated */
    long sms;
} backend_support[] = {
    {"H100", "deepep hybridep ncclep", 132},  {"H200", "deepep hybridep ncclep", 132},
    {"B200", "deepep ncclep", 148},           {"GB200", "deepep hybridep ncclep", 152},
    {"GB300", "deepep hybridep ncclep", 160},
};

/* The first Megatron core release with each backend. */
static const struct backend_since {
    const char *backend, *core;
} backend_since[] = {{"deepep", "0.0"}, {"hybridep", "0.18"}, {"ncclep", "0.19"}};

static const struct backend_support *gpu_support(const mt_ctx_v1 *ctx)
{
    const char *gpu = pk_get(ctx->hardware, "gpu");
    size_t i;
    for (i = 0; gpu && i < sizeof backend_support / sizeof backend_support[0]; i++)
        if (!strcmp(backend_support[i].gpu, gpu))
            return &backend_support[i];
    return NULL;
}

/* -1 when the GPU is unknown: the range rule then cannot be judged. */
static long gpu_sms(const mt_ctx_v1 *ctx)
{
    const struct backend_support *s = gpu_support(ctx);
    return pk_int(ctx->hardware, "sms", s ? s->sms : -1);
}

/* 1 supported, 0 not, -1 unknown GPU. */
static int backend_supported(const mt_ctx_v1 *ctx, const char *backend)
{
    const struct backend_support *s = gpu_support(ctx);
    return s ? pk_word_in(s->backends, backend) : -1;
}

static const char *backend_title(const char *backend)
{
    if (!strcmp(backend, "deepep"))
        return "DeepEP";
    if (!strcmp(backend, "hybridep"))
        return "HybridEP";
    if (!strcmp(backend, "ncclep"))
        return "NCCL EP";
    return backend;
}

static const char *cfg(const mt_ctx_v1 *ctx, const char *knob)
{
    return pk_str(ctx->config, knob, "");
}

static long num_experts(const mt_ctx_v1 *ctx)
{
    long n = pk_int(ctx->config, "num_experts", -1);
    return n >= 0 ? n : pk_int(ctx->model, "num_experts", 0);
}

/* A backend this plugin answers for; "none" and extension values are not. */
static int own_backend(const char *backend)
{
    return strcmp(backend, "none") && pk_value_in(flex_backends, backend);
}

/* Megatron core is at least v; a contract without a stack is judged as the
 * newest, where every knob value exists. */
static int core_ge(const mt_ctx_v1 *ctx, const char *v)
{
    return !pk_get(ctx->contract, "stack.megatron_core") || pk_core_ge(ctx, v);
}

static const char *stack_name(const mt_ctx_v1 *ctx)
{
    return pk_str(ctx->contract, "stack.dialect",
                  pk_str(ctx->contract, "stack.megatron_lm", "?"));
}

/* The first core release with the backend ("0.0" for DeepEP), or NULL for a
 * value this plugin does not own. */
static const char *backend_core(const char *backend)
{
    size_t i;
    for (i = 0; i < sizeof backend_since / sizeof backend_since[0]; i++)
        if (!strcmp(backend_since[i].backend, backend))
            return backend_since[i].core;
    return NULL;
}

static int backend_available(const mt_ctx_v1 *ctx, const char *backend)
{
    const char *since = backend_core(backend);
    return !since || core_ge(ctx, since);
}

/* The backend the flex dispatcher runs, as TransformerConfig settles it:
 * --moe-enable-deepep forces deepep, else --moe-flex-dispatcher-backend
 * (default deepep).  Core r0.15 has only DeepEP, and only with the flag:
 * "none" there.  Without a parsed namespace, from the config. */
static const char *flex_backend(const mt_ctx_v1 *ctx)
{
    if (pk_args(ctx)) {
        if (pk_arg_on(ctx, "moe_enable_deepep"))
            return "deepep";
        if (!core_ge(ctx, "0.18"))
            return "none";
        return pk_arg(ctx, "moe_flex_dispatcher_backend") ?: "deepep";
    }
    if (!strcmp(cfg(ctx, "moe_flex_dispatcher_backend"), "none"))
        return core_ge(ctx, "0.18") ? "deepep" : "none";
    return cfg(ctx, "moe_flex_dispatcher_backend");
}

static const char *dispatcher_type(const mt_ctx_v1 *ctx)
{
    return pk_args(ctx) ? pk_str(pk_args(ctx), "moe_token_dispatcher_type", "allgather")
                        : cfg(ctx, "moe_token_dispatcher_type");
}

/* The expert model-parallel and expert tensor-parallel sizes (ETP defaults
 * to TP). */
static long ep_size(const mt_ctx_v1 *ctx)
{
    return pk_args(ctx) ? pk_arg_int(ctx, "expert_model_parallel_size", 1)
                        : pk_int(ctx->config, "expert_model_parallel_size", 1);
}

static long etp_size(const mt_ctx_v1 *ctx)
{
    long etp;
    if (pk_args(ctx))
        return pk_arg_int(ctx, "expert_tensor_parallel_size",
                          pk_arg_int(ctx, "tensor_model_parallel_size", 1));
    etp = pk_int(ctx->config, "expert_tensor_parallel_size", 0);
    return etp > 0 ? etp : pk_int(ctx->config, "tensor_model_parallel_size", 1);
}

/* The flex dispatcher communicates over the expert-TP x EP group. */
static long flex_group(const mt_ctx_v1 *ctx) { return ep_size(ctx) * etp_size(ctx); }

/* The runtime rule of MoEFlexTokenDispatcher: core r0.15 asserts TP x EP > 1
 * for every flex run, later versions for DeepEP and NCCL EP only. */
static int flex_group_required(const mt_ctx_v1 *ctx, const char *backend)
{
    return !core_ge(ctx, "0.18") || !strcmp(backend, "deepep") || !strcmp(backend, "ncclep");
}

static int benchmark_only_allowed(const mt_ctx_v1 *ctx)
{
    return pk_has(ctx->contract, "labels", "benchmark_only");
}

/* ---- knob values the version lacks --------------------------------------- */

static void version_rules(const mt_ctx_v1 *ctx, mt_sink *out)
{
    const char *backend = cfg(ctx, "moe_flex_dispatcher_backend");
    if (own_backend(backend) && !backend_available(ctx, backend))
        pk_startup(out, "dispatcher.needs_core",
                   "moe_flex_dispatcher_backend moe_token_dispatcher_type",
                   "the %s flex backend (--moe-flex-dispatcher-backend %s) needs Megatron core >= "
                   "%s (the stack is %s); use %s or the alltoall dispatcher",
                   backend_title(backend), backend,
                   backend_core(backend), stack_name(ctx),
                   core_ge(ctx, "0.18") ? "deepep or hybridep" : "deepep");
}

/* ---- start-up rules (Megatron's validate_args / TransformerConfig) -------- */

/* moe_expert_capacity_factor as TransformerConfig leaves it: a negative
 * factor means none. */
static int capacity_factor_set(const mt_ctx_v1 *ctx)
{
    return pk_arg_set(ctx, "moe_expert_capacity_factor") &&
           pk_arg_num(ctx, "moe_expert_capacity_factor", -1) >= 0;
}

static int lb_type_takes_capacity(const char *t)
{
    return !strcmp(t, "aux_loss") || !strcmp(t, "seq_aux_loss") || !strcmp(t, "global_aux_loss") ||
           !strcmp(t, "none");
}

/* First load-balancing type in the list that a capacity factor refuses, or
 * NULL. */
static const char *capacity_refused_lb(const mt_ctx_v1 *ctx, char *buf, size_t n)
{
    const char *p = pk_arg(ctx, "moe_router_load_balancing_type");
    while (p && *p) {
        size_t len;
        while (*p == ' ')
            p++;
        len = strcspn(p, " ");
        if (len && len < n) {
            memcpy(buf, p, len);
            buf[len] = 0;
            if (!lb_type_takes_capacity(buf))
                return buf;
        }
        p += len;
    }
    return NULL;
}

/* The inference-optimized MoE layers (TransformerConfig, 0.18+). */
static void inference_rules(const mt_ctx_v1 *ctx, mt_sink *out)
{
    int glu = pk_arg_on(ctx, "swiglu") || pk_arg_on(ctx, "quick_geglu");
    const char *gg = pk_str(pk_args(ctx), "inference_grouped_gemm_backend", "vllm");
    int gg_ok = !strcmp(gg, "torch") || !strcmp(gg, "vllm");
    if (!pk_arg_is(ctx, "transformer_impl", "inference_optimized") ||
        !pk_arg_set(ctx, "num_experts"))
        return;
    if (pk_arg_int(ctx, "expert_tensor_parallel_size", 1) > 1)
        pk_startup(out, "dispatcher.inference_no_etp",
                   "expert_tensor_parallel_size transformer_impl",
                   "Inference-optimized MoE layers does not support expert tensor parallelism "
                   "(expert_tensor_parallel_size is %ld); set it to 1",
                   pk_arg_int(ctx, "expert_tensor_parallel_size", 1));
    if (pk_arg_set(ctx, "moe_expert_capacity_factor"))
        pk_startup(out, "dispatcher.inference_dropless_only",
                   "moe_expert_capacity_factor transformer_impl",
                   "Inference-optimized MoE layers only support dropless MoE (a "
                   "moe_expert_capacity_factor is set); drop the capacity factor");
    if (glu && !core_ge(ctx, "0.20"))
        pk_startup(out, "dispatcher.inference_no_glu", "transformer_impl",
                   "--transformer-impl='inference_optimized' does not yet support gated linear "
                   "units (SwiGLU/GeGLU); use another transformer_impl");
    else if (glu && !gg_ok)
        pk_startup(out, "dispatcher.inference_glu_backend", "transformer_impl",
                   "--transformer-impl='inference_optimized' supports gated linear units "
                   "(SwiGLU/GeGLU) only with --inference-grouped-gemm-backend torch or vllm, got "
                   "'%s'",
                   gg);
    if (core_ge(ctx, "0.20") && pk_arg_on(ctx, "batch_invariant_mode")) {
        if (!gg_ok)
            pk_startup(out, "dispatcher.inference_batch_invariant_backend", "transformer_impl",
                       "batch_invariant_mode requires inference_grouped_gemm_backend 'torch' or "
                       "'vllm' (it is '%s')",
                       gg);
        if (pk_arg_int(ctx, "expert_model_parallel_size", 1) > 1 &&
            !pk_arg_is(ctx, "inference_moe_token_dispatcher_type", "nvls"))
            pk_startup(out, "dispatcher.inference_batch_invariant_nvls",
                       "expert_model_parallel_size transformer_impl",
                       "batch_invariant_mode with inference-optimized MoE and expert parallelism "
                       "requires inference_moe_token_dispatcher_type='nvls'");
    }
}

static void startup_rules(const mt_ctx_v1 *ctx, mt_sink *out)
{
    const char *type = pk_str(pk_args(ctx), "moe_token_dispatcher_type", "allgather");
    const char *backend = flex_backend(ctx);
    int flex = !strcmp(type, "flex"), deepep_flag = pk_arg_on(ctx, "moe_enable_deepep");
    int pad = pk_arg_on(ctx, "moe_pad_expert_input_to_capacity");
    int v18 = core_ge(ctx, "0.18"), v19 = core_ge(ctx, "0.19"), v20 = core_ge(ctx, "0.20");
    int op_fuser = pk_arg_on(ctx, "use_transformer_engine_op_fuser");
    char lb[64];
    const char *bad_lb;

    /* validate_args */
    if (v18 && pk_arg_on(ctx, "fake_process_group") && flex)
        pk_startup(out, "dispatcher.fake_pg_flex",
                   "moe_token_dispatcher_type",
                   "Fake process group is not supported with flex token dispatcher; use "
                   "alltoall");

    /* TransformerConfig */
    if (v18)
        inference_rules(ctx, out);
    if (deepep_flag && !flex)
        pk_startup(out, "dispatcher.deepep_needs_flex",
                   "moe_token_dispatcher_type moe_flex_dispatcher_backend",
                   "DeepEP backend is only supported with flex token dispatcher "
                   "(--moe-enable-deepep with moe_token_dispatcher_type %s); set the "
                   "dispatcher to flex or drop --moe-enable-deepep",
                   type);
    if (v18 && deepep_flag && flex && pk_arg_is(ctx, "moe_flex_dispatcher_backend", "hybridep"))
        pk_startup(out, "dispatcher.flex_single_backend", "moe_flex_dispatcher_backend",
                   "Only one backend is supported for flex token dispatcher "
                   "(--moe-enable-deepep with --moe-flex-dispatcher-backend hybridep); drop "
                   "--moe-enable-deepep");
    if (flex && pad && !v18)
        pk_startup(out, "dispatcher.flex_no_pad_to_capacity",
                   "moe_token_dispatcher_type moe_pad_expert_input_to_capacity",
                   "Flex token dispatcher does not support moe_pad_expert_input_to_capacity; "
                   "use alltoall for drop-and-pad");
    if (flex && pad && v18 && !strcmp(backend, "deepep"))
        pk_startup(out, "dispatcher.deepep_no_pad_to_capacity",
                   "moe_token_dispatcher_type moe_flex_dispatcher_backend "
                   "moe_pad_expert_input_to_capacity",
                   "Flex token dispatcher with deepep backend does not support "
                   "moe_pad_expert_input_to_capacity; use hybridep or alltoall for "
                   "drop-and-pad");
    if (v19 && !strcmp(backend, "ncclep") && !flex)
        pk_startup(out, "dispatcher.ncclep_needs_flex",
                   "moe_flex_dispatcher_backend moe_token_dispatcher_type",
                   "moe_flex_dispatcher_backend='ncclep' requires moe_token_dispatcher_type='flex' "
                   "(it is %s)",
                   type);
    if (v20 && flex && !strcmp(backend, "ncclep") && pk_arg_on(ctx, "moe_use_grouped_tensor") &&
        !op_fuser)
        pk_startup(out, "dispatcher.ncclep_grouped_tensor_needs_op_fuser",
                   "moe_flex_dispatcher_backend",
                   "moe_use_grouped_tensor=True without use_transformer_engine_op_fuser is not "
                   "yet supported with the NCCL-EP dispatcher; turn on "
                   "--use-transformer-engine-op-fuser or use another backend");
    if (v20) {
        const char *fwd = pk_str(pk_args(ctx), "moe_dispatch_fwd_dtype", "bf16");
        const char *bwd = pk_str(pk_args(ctx), "moe_combine_bwd_dtype", "bf16");
        if (strcmp(fwd, "bf16") || strcmp(bwd, "bf16")) {
            if (!flex || strcmp(backend, "ncclep"))
                pk_startup(out, "dispatcher.dispatch_dtype_needs_ncclep",
                           "moe_token_dispatcher_type moe_flex_dispatcher_backend",
                           "moe_dispatch_fwd_dtype / moe_combine_bwd_dtype require the 'ncclep' "
                           "flex dispatcher backend; use flex with ncclep or keep both bf16");
            else if (!(op_fuser && pk_arg_on(ctx, "moe_grouped_gemm")))
                pk_startup(out, "dispatcher.dispatch_dtype_needs_fused_grouped_gemm",
                           "moe_grouped_gemm",
                           "moe_dispatch_fwd_dtype / moe_combine_bwd_dtype = 'mxfp8' require "
                           "BOTH use_transformer_engine_op_fuser and moe_grouped_gemm; turn "
                           "both on or keep both dtypes bf16");
        }
    }
    if (v19 && pk_arg_set(ctx, "moe_deepep_num_sms") && pk_arg_set(ctx, "moe_hybridep_num_sms") &&
        pk_arg_int(ctx, "moe_deepep_num_sms", 0) != pk_arg_int(ctx, "moe_hybridep_num_sms", 0) &&
        !pk_arg_set(ctx, "moe_flex_dispatcher_num_sms"))
        pk_startup(out, "dispatcher.conflicting_sm_knobs", "moe_flex_dispatcher_num_sms",
                   "Conflicting deprecated SM-count knobs {'moe_deepep_num_sms': %ld, "
                   "'moe_hybridep_num_sms': %ld}; set a single moe_flex_dispatcher_num_sms "
                   "instead",
                   pk_arg_int(ctx, "moe_deepep_num_sms", 0),
                   pk_arg_int(ctx, "moe_hybridep_num_sms", 0));
    if (pk_arg_set(ctx, "moe_shared_expert_intermediate_size")) {
        long size = pk_arg_int(ctx, "moe_shared_expert_intermediate_size", 0);
        if (size <= 0)
            pk_startup(out, "dispatcher.shared_expert_size_positive", "",
                       "moe_shared_expert_intermediate_size must be num_shared_experts * "
                       "ffn_size_of_each_shared_expert, but got %ld",
                       size);
        /* moe_shared_expert_overlap with the dispatcher type is the overlap
         * plugin's rule (overlap.shared_expert_overlap_dispatcher). */
    }
    if (pk_arg_set(ctx, "moe_expert_capacity_factor") &&
        (bad_lb = capacity_refused_lb(ctx, lb, sizeof lb)))
        pk_startup(out, "dispatcher.capacity_factor_lb_type", "",
                   "moe_expert_capacity_factor only works with aux_loss, seq_aux_loss, "
                   "global_aux_loss or none load balancing (it is %s); drop the capacity "
                   "factor or change the load balancing",
                   bad_lb);
    if (pad && !capacity_factor_set(ctx))
        pk_startup(out, "dispatcher.pad_needs_capacity_factor", "",
                   "moe_expert_capacity_factor must be set to use "
                   "moe_pad_expert_input_to_capacity; set a capacity factor or turn padding off");
    if (v18 && pk_arg_set(ctx, "moe_expert_rank_capacity_factor")) {
        if (!v19) {
            if (!op_fuser)
                pk_startup(out, "dispatcher.rank_capacity_needs_op_fuser", "",
                           "moe_expert_rank_capacity_factor requires "
                           "use_transformer_engine_op_fuser to be enabled; add "
                           "--use-transformer-engine-op-fuser");
            if (strcmp(backend, "hybridep"))
                pk_startup(out, "dispatcher.rank_capacity_backend",
                           "moe_flex_dispatcher_backend",
                           "moe_expert_rank_capacity_factor requires moe_flex_dispatcher_backend "
                           "to be 'hybridep' (it is '%s')",
                           backend);
        } else if (strcmp(backend, "hybridep") && strcmp(backend, "ncclep")) {
            pk_startup(out, "dispatcher.rank_capacity_backend", "moe_flex_dispatcher_backend",
                       "moe_expert_rank_capacity_factor requires moe_flex_dispatcher_backend to "
                       "be 'hybridep' or 'ncclep' (it is '%s')",
                       backend);
        } else if (!strcmp(backend, "hybridep") && !op_fuser &&
                   /* main: grouped tensors suffice (without the op fuser only
                    * the explicit flag turns them on) */
                   (!v20 || !pk_arg_on(ctx, "moe_use_grouped_tensor"))) {
            pk_startup(out, "dispatcher.rank_capacity_hybridep_needs_op_fuser", "",
                       "moe_expert_rank_capacity_factor with the 'hybridep' backend requires "
                       "use_transformer_engine_op_fuser%s; add "
                       "--use-transformer-engine-op-fuser",
                       v20 ? "=True or moe_use_grouped_tensor=True" : " to be enabled");
        }
    }
    /* Routing-map padding for quantized GEMMs (TransformerConfig): core
     * r0.15 knows only the fp8 flag, later versions map it onto
     * padding_for_quantization and accept FP4 too. */
    if (!strcmp(type, "allgather") &&
        (v18 ? (pk_arg_on(ctx, "moe_router_padding_for_fp8") ||
                pk_arg_on(ctx, "moe_router_padding_for_quantization")) &&
                   (pk_arg_set(ctx, "fp8") || pk_arg_set(ctx, "fp4"))
             : pk_arg_on(ctx, "moe_router_padding_for_fp8") && pk_arg_set(ctx, "fp8")))
        pk_startup(out, "dispatcher.router_padding_allgather", "moe_token_dispatcher_type",
                   "allgather and alltoall_seq dispatcher does not support "
                   "moe_router_padding_for_%s; use alltoall or flex, or drop the padding flag",
                   v18 ? "quantization" : "fp8");
    if (v18 && pk_arg_on(ctx, "moe_paged_stash")) {
        static const char *const stashed[] = {"expert_fc1", "moe_act", "fused_group_mlp"};
        char hit[128] = "";
        size_t i, n = v19 ? 3 : 2;
        if (pk_arg_on(ctx, "cpu_offloading"))
            pk_startup(out, "dispatcher.paged_stash_no_cpu_offloading", "",
                       "moe_paged_stash cannot be enabled with cpu_offloading");
        if (!pk_arg_set(ctx, "moe_expert_rank_capacity_factor"))
            pk_startup(out, "dispatcher.paged_stash_needs_rank_capacity", "",
                       "moe_paged_stash requires moe_expert_rank_capacity_factor to be set; "
                       "there is no need to use paged stashing without it; set "
                       "--moe-expert-rank-capacity-factor or drop --moe-paged-stash");
        for (i = 0; i < n; i++)
            if (pk_arg_has(ctx, "offload_modules", stashed[i]))
                snprintf(hit + strlen(hit), sizeof hit - strlen(hit), "%s%s", *hit ? " " : "",
                         stashed[i]);
        if (*hit)
            pk_startup(out, "dispatcher.paged_stash_offload_conflict", "",
                       "When moe_paged_stash is enabled, offload_modules must not include %s "
                       "(paged stash covers those activations). Remove: %s",
                       v19 ? "expert_fc1, moe_act, or fused_group_mlp" : "expert_fc1 or moe_act",
                       hit);
    }
}

/* ---- runtime rules ----------------------------------------------------- */

static void runtime_rules(const mt_ctx_v1 *ctx, mt_sink *out)
{
    const char *type = dispatcher_type(ctx);
    const char *backend = flex_backend(ctx);
    long sms = pk_int(ctx->config, "moe_flex_dispatcher_num_sms", 0);
    long max_sms = gpu_sms(ctx), experts = num_experts(ctx);
    long topk = pk_args(ctx) ? pk_arg_int(ctx, "moe_router_topk", 2)
                             : pk_int(ctx->config, "moe_router_topk", 2);
    int flex = !strcmp(type, "flex");

    if (flex && !core_ge(ctx, "0.18") && !strcmp(backend, "none") &&
        !strcmp(cfg(ctx, "moe_flex_dispatcher_backend"), "none"))
        pk_runtime(out, "dispatcher.flex_needs_deepep",
                   "moe_flex_dispatcher_backend moe_token_dispatcher_type",
                   "runtime: the flex dispatcher of Megatron core %s runs DeepEP only and asserts "
                   "\"DeepEP is not enabled. Please set --moe-enable-deepep\" when the model is "
                   "built; set moe_flex_dispatcher_backend=deepep or use alltoall",
                   pk_str(ctx->contract, "stack.megatron_core", "?"));
    if (flex && own_backend(backend) && flex_group_required(ctx, backend) && flex_group(ctx) <= 1)
        pk_runtime(out, "dispatcher.flex_needs_ep",
                   "moe_token_dispatcher_type expert_model_parallel_size "
                   "expert_tensor_parallel_size",
                   "runtime: the %s flex dispatcher requires TPxEP > 1 when the model is built: "
                   "expert_model_parallel_size %ld x expert_tensor_parallel_size %ld is one "
                   "rank; set EP > 1 or use alltoall",
                   backend_title(backend), ep_size(ctx), etp_size(ctx));
    if (flex && own_backend(backend) && backend_supported(ctx, backend) == 0)
        pk_runtime(out, "dispatcher.backend_unsupported_gpu",
                   "moe_flex_dispatcher_backend moe_token_dispatcher_type",
                   "runtime: %s does not run on %s (the run would silently fall back to "
                   "alltoall); choose %s or use alltoall",
                   backend_title(backend), pk_str(ctx->hardware, "gpu", "?"),
                   gpu_support(ctx)->backends);
    /* DeepEP's buffer takes an even SM count (two SMs per channel). */
    if (sms > 0 && sms % 2 && flex && !strcmp(backend, "deepep"))
        pk_runtime(out, "dispatcher.num_sms_even", "moe_flex_dispatcher_num_sms",
                   "runtime: DeepEP takes an even SM count (its kernels pair SMs per channel), "
                   "but moe_flex_dispatcher_num_sms is %ld; use %ld",
                   sms, sms + 1);
    if (sms > 0 && max_sms > 0 && sms > max_sms)
        pk_runtime(out, "dispatcher.num_sms_range", "moe_flex_dispatcher_num_sms",
                   "runtime: moe_flex_dispatcher_num_sms %ld exceeds the %ld SMs of one %s; use "
                   "an even value in 2..%ld",
                   sms, max_sms, pk_str(ctx->hardware, "gpu", "?"), max_sms - max_sms % 2);
    /* The router picks moe_router_topk of num_experts experts per token. */
    if (experts > 0 && topk > experts)
        pk_runtime(out, "dispatcher.topk_exceeds_experts", "moe_router_topk num_experts",
                   "runtime: moe_router_topk %ld exceeds num_experts %ld; the router cannot pick "
                   "more experts than there are",
                   topk, experts);
}

static int check(void *state, const mt_ctx_v1 *ctx, mt_sink *out)
{
    (void)state;
    version_rules(ctx, out);
    if (pk_args(ctx))
        startup_rules(ctx, out);
    runtime_rules(ctx, out);
    /* moetune's contract, not Megatron: forced balancing changes what a
     * natural-routing contract measures. */
    if (pk_bool(ctx->config, "moe_router_force_load_balancing") &&
        pk_eq(ctx->contract, "routing", "natural") && !benchmark_only_allowed(ctx))
        pk_violation(out, "dispatcher.force_balance_not_allowed",
                     "moe_router_force_load_balancing",
                     "benchmark-only change not allowed by the contract labels: "
                     "--moe-router-force-load-balancing replaces the natural routing the "
                     "contract measures (labels: \"%s\"); turn it off",
                     pk_str(ctx->contract, "labels", ""));
    return 0;
}


static void set_if_changed(const mt_ctx_v1 *ctx, mt_sink *out, const char *knob,
                           const char *value)
{
    if (strcmp(cfg(ctx, knob), value))
        pk_host->sink_set(out, knob, value);
}

/* The profiled wall, when it is not the one a candidate targets, is worth a
 * line: the gate decides, but the reader should know why it was tried. */
static void note_wall(const mt_ctx_v1 *ctx, mt_sink *out, const char *target)
{
    const char *wall = pk_get(ctx->evidence, "wall");
    if (wall && *wall && strncmp(wall, target, strlen(target)))
        pk_note(out, "the profiled wall is %s, not %s; tried anyway because the change is "
                     "cheap to screen",
                wall, target);
}

/* Drop-and-pad refuses the flex dispatcher on core r0.15 and with DeepEP
 * later (TransformerConfig). */
static int pad_refuses(const mt_ctx_v1 *ctx, const char *backend)
{
    return pk_bool(ctx->config, "moe_pad_expert_input_to_capacity") &&
           (!core_ge(ctx, "0.18") || !strcmp(backend, "deepep"));
}

/* An odd moe_flex_dispatcher_num_sms is legal outside flex, but DeepEP
 * refuses it (dispatcher.num_sms_even, a runtime rule). */
static int sms_refuse(const mt_ctx_v1 *ctx, const char *backend)
{
    long sms = pk_int(ctx->config, "moe_flex_dispatcher_num_sms", 0);
    return sms > 0 && sms % 2 && !strcmp(backend, "deepep");
}

/* flex with `backend`: legal here, runnable, and inside the contract's
 * space? */
static int flex_possible(const mt_ctx_v1 *ctx, const char *backend)
{
    return pk_space_allows(ctx, "moe_token_dispatcher_type", "flex") &&
           pk_space_allows(ctx, "moe_flex_dispatcher_backend", backend) &&
           backend_available(ctx, backend) && backend_supported(ctx, backend) == 1 &&
           (!flex_group_required(ctx, backend) || flex_group(ctx) > 1) &&
           !pad_refuses(ctx, backend) && !sms_refuse(ctx, backend);
}

static void propose_flex(const mt_ctx_v1 *ctx, mt_sink *out, const char *backend,
                         const char *summary, const char *why)
{
    if (pk_eq(ctx->config, "moe_token_dispatcher_type", "flex") &&
        pk_eq(ctx->config, "moe_flex_dispatcher_backend", backend))
        return;
    if (!flex_possible(ctx, backend))
        return;
    pk_host->sink_candidate(out, "dispatcher", summary, MT_WALL_COMM,
                            MT_LABEL_TRAINING_EQUIVALENT);
    set_if_changed(ctx, out, "moe_token_dispatcher_type", "flex");
    set_if_changed(ctx, out, "moe_flex_dispatcher_backend", backend);
    pk_note(out, "%s", why);
    note_wall(ctx, out, "comm");
}

static void propose_sms(const mt_ctx_v1 *ctx, mt_sink *out)
{
    static const long builtin[] = {24, 32};
    const char *backend = cfg(ctx, "moe_flex_dispatcher_backend");
    const char *space = pk_get(ctx->contract, "space.moe_flex_dispatcher_num_sms");
    long cur = pk_int(ctx->config, "moe_flex_dispatcher_num_sms", 0);
    long max_sms = gpu_sms(ctx);
    long values[32];
    size_t n = 0, i;

    /* The SM budget is a DeepEP/HybridEP kernel setting. */
    if (!pk_eq(ctx->config, "moe_token_dispatcher_type", "flex") ||
        (strcmp(backend, "deepep") && strcmp(backend, "hybridep")))
        return;
    if (space) {
        /* Declared values are separated by newlines. */
        const char *p = space;
        while (*p && n < sizeof values / sizeof values[0]) {
            char *end;
            long v = strtol(p, &end, 10);
            if (end != p)
                values[n++] = v;
            p = end + strcspn(end, "\n");
            if (*p)
                p++;
        }
    } else {
        for (i = 0; i < sizeof builtin / sizeof builtin[0]; i++)
            values[n++] = builtin[i];
    }
    for (i = 0; i < n; i++) {
        char summary[96], value[24];
        long v = values[i];
        if (v <= 0 || v == cur || v % 2 || (max_sms > 0 && v > max_sms))
            continue;
        snprintf(value, sizeof value, "%ld", v);
        snprintf(summary, sizeof summary, "%s dispatch/combine on %ld SMs", backend_title(backend),
                 v);
        pk_host->sink_candidate(out, "dispatcher_sms", summary, MT_WALL_COMM | MT_WALL_COMPUTE,
                                MT_LABEL_TRAINING_EQUIVALENT);
        pk_host->sink_set(out, "moe_flex_dispatcher_num_sms", value);
        if (cur > 0)
            pk_note(out, "SMs given to %s are taken from the GEMMs: fewer slow communication, "
                         "more slow compute; trying %ld instead of %ld",
                    backend_title(backend), v, cur);
        else
            pk_note(out, "SMs given to %s are taken from the GEMMs: fewer slow communication, "
                         "more slow compute; trying %ld instead of the backend's default",
                    backend_title(backend), v);
    }
}

static int propose(void *state, const mt_ctx_v1 *ctx, mt_sink *out)
{
    const char *type = cfg(ctx, "moe_token_dispatcher_type");
    (void)state;

    if (num_experts(ctx) <= 0)
        return 0;

    /* alltoall first: the safe control every flex backend is judged against. */
    if (strcmp(type, "alltoall") && pk_space_allows(ctx, "moe_token_dispatcher_type", "alltoall")) {
        pk_host->sink_candidate(out, "dispatcher", "alltoall dispatcher (safe control)",
                                MT_WALL_COMM, MT_LABEL_TRAINING_EQUIVALENT);
        pk_host->sink_set(out, "moe_token_dispatcher_type", "alltoall");
        set_if_changed(ctx, out, "moe_flex_dispatcher_backend", "none");
        set_if_changed(ctx, out, "moe_flex_dispatcher_num_sms", "0");
        pk_note(out, "alltoall sends only the tokens each rank routes (allgather sends all); "
                     "it is the baseline a flex backend must beat and never falls back");
        note_wall(ctx, out, "comm");
    }
    propose_flex(ctx, out, "deepep", "flex + DeepEP dispatcher",
                 "DeepEP's fused dispatch/combine kernels beat NCCL all-to-all across nodes "
                 "(43-58 GB/s over RDMA, ~150 GB/s inside an NVLink domain)");
    propose_flex(ctx, out, "hybridep", "flex + HybridEP dispatcher (fused permute possible)",
                 "HybridEP reaches 46-77 GB/s across H100 nodes and ~500 GB/s on NVL72; its "
                 "extra copy (10-20% of communication) disappears once permute is fused");
    if (pk_space_declared(ctx, "moe_flex_dispatcher_backend"))
        propose_flex(ctx, out, "ncclep", "flex + NCCL EP dispatcher",
                     "the contract's space lists NCCL EP; screened like the other backends");

    if (!pk_bool(ctx->config, "moe_permute_fusion") &&
        pk_space_allows(ctx, "moe_permute_fusion", "true")) {
        pk_host->sink_candidate(out, "permute_fusion", "fused token permutation",
                                MT_WALL_COMM | MT_WALL_COMPUTE, MT_LABEL_TRAINING_EQUIVALENT);
        pk_host->sink_set(out, "moe_permute_fusion", "true");
        pk_note(out, "fused permute/unpermute kernels replace several memory-bound passes "
                     "(+7%% on DeepSeek-V3 GB200)%s",
                core_ge(ctx, "0.18") ? "; with HybridEP the permute fuses into the dispatch "
                                       "itself (--moe-permute-fusion-into-hybridep)"
                                     : "");
    }

    propose_sms(ctx, out);

    if (!pk_bool(ctx->config, "moe_grouped_gemm") &&
        pk_space_allows(ctx, "moe_grouped_gemm", "true")) {
        pk_host->sink_candidate(out, "grouped_gemm", "grouped GEMM for the local experts",
                                MT_WALL_COMPUTE | MT_WALL_HOST, MT_LABEL_TRAINING_EQUIVALENT);
        pk_host->sink_set(out, "moe_grouped_gemm", "true");
        pk_note(out, "one grouped GEMM launch per layer instead of one GEMM per local expert: "
                     "fewer launches and better tensor-core occupancy for small experts");
    }

    /* Forced balancing changes what is measured, so it is offered only where
     * the contract measures natural routing and accepts benchmark-only runs. */
    if (!pk_bool(ctx->config, "moe_router_force_load_balancing") &&
        pk_eq(ctx->contract, "routing", "natural") && benchmark_only_allowed(ctx) &&
        pk_space_allows(ctx, "moe_router_force_load_balancing", "true")) {
        pk_host->sink_candidate(out, "routing", "forced load balancing (benchmark-only)",
                                MT_WALL_COMM, MT_LABEL_BENCHMARK_ONLY);
        pk_host->sink_set(out, "moe_router_force_load_balancing", "true");
        pk_note(out, "random balanced routing removes the straggler expert ranks; the result "
                     "bounds what balancing could give and never stands for real training");
    }
    return 0;
}

static int repair(void *state, const mt_ctx_v1 *ctx, mt_sink *out)
{
    const char *type = cfg(ctx, "moe_token_dispatcher_type");
    const char *backend = flex_backend(ctx);
    int small = own_backend(backend) && flex_group_required(ctx, backend) && flex_group(ctx) <= 1;
    (void)state;

    /* Another plugin shrank the expert group or asked for padding: flex can no
     * longer run, and alltoall is what the stack would fall back to anyway. */
    /* A candidate that picked this backend itself is left as it is: legality
     * refuses it, and a repair must never undo the change it is about. */
    if (!strcmp(type, "flex") && !pk_get(ctx->changed, "moe_token_dispatcher_type") &&
        !pk_get(ctx->changed, "moe_flex_dispatcher_backend") &&
        (small || pad_refuses(ctx, backend))) {
        pk_host->sink_set(out, "moe_token_dispatcher_type", "alltoall");
        if (strcmp(cfg(ctx, "moe_flex_dispatcher_backend"), "none"))
            pk_host->sink_set(out, "moe_flex_dispatcher_backend", "none");
        if (pk_int(ctx->config, "moe_flex_dispatcher_num_sms", 0) > 0)
            pk_host->sink_set(out, "moe_flex_dispatcher_num_sms", "0");
        pk_note(out, "dispatcher switched from flex to alltoall: %s",
                small ? "this flex backend needs an expert group of more than one rank and "
                        "EP x ETP is now 1"
                      : "this flex backend rejects moe_pad_expert_input_to_capacity, which is "
                        "now on");
    }
    if (!pk_bool(ctx->config, "moe_grouped_gemm") && !pk_get(ctx->changed, "moe_grouped_gemm") &&
        num_experts(ctx) > 0 && pk_has(ctx->config, "recompute_modules", "moe_act") &&
        pk_eq(ctx->config, "recompute_granularity", "selective")) {
        pk_host->sink_set(out, "moe_grouped_gemm", "true");
        pk_note(out, "grouped GEMM turned on: recompute of moe_act needs it");
    }
    return 0;
}

/* The flag of the flex SM budget in this version: the unified flag from core
 * 0.19, the backend's own before (0.18: DeepEP or HybridEP; r0.15: DeepEP,
 * the only backend). */
static const char *sms_knob(const mt_ctx_v1 *ctx, uint32_t d, const char *backend)
{
    /* Bridge: the unified field on main; the backend's own on 0.2.x */
    if (d == MT_DIALECT_BRIDGE && pk_bridge_ge(ctx, PK_BRIDGE_MAIN))
        return "moe_flex_dispatcher_num_sms";
    if (d == MT_DIALECT_BRIDGE)
        return !strcmp(backend, "hybridep") ? "moe_hybridep_num_sms" : "moe_deepep_num_sms";
    if (core_ge(ctx, "0.19"))
        return "moe_flex_dispatcher_num_sms";
    if (!strcmp(backend, "hybridep"))
        return core_ge(ctx, "0.18") ? "moe_hybridep_num_sms" : NULL;
    if (!strcmp(backend, "deepep") || !strcmp(backend, "none"))
        return "moe_deepep_num_sms";
    return NULL;
}

static int render(void *state, const mt_ctx_v1 *ctx, uint32_t d, mt_sink *out)
{
    const char *type = cfg(ctx, "moe_token_dispatcher_type");
    const char *backend = cfg(ctx, "moe_flex_dispatcher_backend");
    const char *sms = cfg(ctx, "moe_flex_dispatcher_num_sms");
    int flex = !strcmp(type, "flex");
    (void)state;

    /* Always explicit: Megatron-LM and Bridge recipes disagree on the default,
     * and the golden command lines carry it. */
    pk_render(out, d, "moe_token_dispatcher_type", "model", NULL, type);
    /* A backend the version lacks is dispatcher.needs_core, never rendered.
     * Core r0.15 spells DeepEP --moe-enable-deepep, which it refuses without
     * flex: rendered only there (later versions ignore a backend outside
     * flex, so it is always written). */
    if (own_backend(backend) && backend_available(ctx, backend)) {
        if (core_ge(ctx, "0.18"))
            pk_render(out, d, "moe_flex_dispatcher_backend", "model", NULL, backend);
        else if (flex)
            pk_render_bool(out, d, "moe_enable_deepep", "model", NULL, 1);
    }
    if (pk_int(ctx->config, "moe_flex_dispatcher_num_sms", 0) > 0 &&
        backend_available(ctx, backend) && sms_knob(ctx, d, backend))
        pk_render(out, d, sms_knob(ctx, d, backend), "model", NULL, sms);
    if (pk_bool(ctx->config, "moe_permute_fusion")) {
        pk_render_bool(out, d, "moe_permute_fusion", "model", NULL, 1);
        /* HybridEP fuses the permute into its dispatch only when asked. */
        if (flex && !strcmp(backend, "hybridep") && core_ge(ctx, "0.18") &&
            (d != MT_DIALECT_BRIDGE || pk_bridge_ge(ctx, PK_BRIDGE_MAIN)))
            pk_render_bool(out, d, "moe_permute_fusion_into_hybridep", "model", NULL, 1);
    }
    if (pk_bool(ctx->config, "moe_grouped_gemm"))
        pk_render_bool(out, d, "moe_grouped_gemm", "model", NULL, 1);
    if (pk_bool(ctx->config, "moe_router_force_load_balancing"))
        pk_render_bool(out, d, "moe_router_force_load_balancing", "model", NULL, 1);
    return 0;
}

/* The arguments dump for `knob`: 1 matches `want`, 0 differs, -1 absent. */
static int args_match(const mt_ctx_v1 *ctx, const char *knob, const char *want,
                      const char **dumped)
{
    return pk_args_match(ctx, knob, want, dumped);
}

/* A verdict with its evidence, decided once and reported for several knobs. */
typedef struct finding {
    uint32_t verdict;
    char text[400];
} finding;

static void found(finding *f, uint32_t verdict, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void found(finding *f, uint32_t verdict, const char *fmt, ...)
{
    va_list ap;
    f->verdict = verdict;
    va_start(ap, fmt);
    vsnprintf(f->text, sizeof f->text, fmt, ap);
    va_end(ap);
}

/* Did the flex backend really run?  The arguments dump only shows the
 * request: a backend can fall back to alltoall or fail to import, so only a
 * fallback line, an ImportError or kernel names in a trace decide. */
static void flex_finding(const mt_ctx_v1 *ctx, const char *backend, finding *f)
{
    const char *line, *dumped;
    char key[64];
    int m;

    if ((line = pk_get(ctx->evidence, "log.dispatcher_fallback"))) {
        found(f, MT_VERDICT_NOT_APPLIED, "log.dispatcher_fallback: \"%.300s\"", line);
        return;
    }
    if ((line = pk_get(ctx->evidence, "log.import_error"))) {
        found(f, MT_VERDICT_NOT_APPLIED, "log.import_error: \"%.300s\"", line);
        return;
    }
    if ((m = args_match(ctx, "moe_token_dispatcher_type", "flex", &dumped)) == 0) {
        found(f, MT_VERDICT_NOT_APPLIED, "arguments dump: moe_token_dispatcher_type = %.60s",
              dumped);
        return;
    }
    if (own_backend(backend) &&
        args_match(ctx, "moe_flex_dispatcher_backend", backend, &dumped) == 0) {
        found(f, MT_VERDICT_NOT_APPLIED, "arguments dump: moe_flex_dispatcher_backend = %.60s",
              dumped);
        return;
    }
    if (!own_backend(backend)) {
        found(f, MT_VERDICT_UNKNOWN,
              "no fallback or ImportError line; the plugin that provides backend %.60s "
              "verifies its kernels",
              backend);
        return;
    }
    snprintf(key, sizeof key, "trace.%s_kernels", backend);
    if (pk_get(ctx->evidence, key) ||
        (pk_eq(ctx->evidence, "trace.available", "true") && strcmp(backend, "ncclep"))) {
        long n = pk_int(ctx->evidence, key, 0);
        if (n > 0)
            found(f, MT_VERDICT_APPLIED, "%s = %ld: the profiled run launched %s kernels", key,
                  n, backend_title(backend));
        else
            found(f, MT_VERDICT_NOT_APPLIED,
                  "%s = 0: the profiled run launched no %s dispatch/combine kernels", key,
                  backend_title(backend));
        return;
    }
    if (m == 1)
        found(f, MT_VERDICT_UNKNOWN,
              "arguments dump proves the request only; a profiled run must show "
              "DeepEP/HybridEP kernels");
    else
        found(f, MT_VERDICT_UNKNOWN,
              "no arguments dump, log line or trace for this run; needs a profiled run");
}

/* Plain startup arguments: the dump is enough. */
static void verify_by_args(const mt_ctx_v1 *ctx, mt_sink *out, const char *knob)
{
    const char *want = cfg(ctx, knob), *dumped;
    switch (args_match(ctx, knob, want, &dumped)) {
    case 1:
        pk_verdict(out, knob, MT_VERDICT_APPLIED, "arguments dump: %s = %.60s (read at startup)",
                   knob, dumped);
        break;
    case 0:
        pk_verdict(out, knob, MT_VERDICT_NOT_APPLIED,
                   "arguments dump: %s = %.60s, but %s was requested", knob, dumped, want);
        break;
    default:
        pk_verdict(out, knob, MT_VERDICT_UNKNOWN, "no arguments dump entry for %s", knob);
    }
}

static void verify_alltoall(const mt_ctx_v1 *ctx, mt_sink *out)
{
    const char *dumped;
    long n = pk_int(ctx->evidence, "trace.alltoall_kernels", -1);
    int m = args_match(ctx, "moe_token_dispatcher_type", "alltoall", &dumped);
    const char *k = "moe_token_dispatcher_type";

    if (m == 0)
        pk_verdict(out, k, MT_VERDICT_NOT_APPLIED,
                   "arguments dump: moe_token_dispatcher_type = %.60s", dumped);
    else if (n > 0)
        pk_verdict(out, k, MT_VERDICT_APPLIED,
                   "trace.alltoall_kernels = %ld: the profiled run launched all-to-all kernels",
                   n);
    else if (n == 0 && pk_eq(ctx->evidence, "trace.available", "true") &&
             pk_int(ctx->config, "expert_model_parallel_size", 1) > 1)
        pk_verdict(out, k, MT_VERDICT_NOT_APPLIED,
                   "trace.alltoall_kernels = 0: no all-to-all kernels in the profiled run");
    else if (m == 1)
        pk_verdict(out, k, MT_VERDICT_APPLIED,
                   "arguments dump: moe_token_dispatcher_type = %.60s (alltoall has no "
                   "fallback)",
                   dumped);
    else
        pk_verdict(out, k, MT_VERDICT_UNKNOWN, "no arguments dump or trace for this run");
}

static int verify(void *state, const mt_ctx_v1 *ctx, mt_sink *out)
{
    const char *type = cfg(ctx, "moe_token_dispatcher_type");
    const char *backend = cfg(ctx, "moe_flex_dispatcher_backend");
    finding flex = {MT_VERDICT_UNKNOWN, ""};
    int is_flex = !strcmp(type, "flex");
    (void)state;

    if (is_flex) {
        flex_finding(ctx, backend, &flex);
        pk_verdict(out, "moe_token_dispatcher_type", flex.verdict, "%s", flex.text);
    } else if (!strcmp(type, "alltoall")) {
        verify_alltoall(ctx, out);
    }
    if (own_backend(backend)) {
        if (is_flex)
            pk_verdict(out, "moe_flex_dispatcher_backend", flex.verdict, "%s", flex.text);
        else
            pk_verdict(out, "moe_flex_dispatcher_backend", MT_VERDICT_NOT_APPLIED,
                       "moe_token_dispatcher_type is %s, so the backend is never used", type);
    }
    if (pk_int(ctx->config, "moe_flex_dispatcher_num_sms", 0) > 0) {
        const char *want = cfg(ctx, "moe_flex_dispatcher_num_sms"), *dumped;
        /* the dest the version's own flag writes */
        const char *dest = sms_knob(ctx, MT_DIALECT_MLM, backend);
        int m = args_match(ctx, dest ? dest : "moe_flex_dispatcher_num_sms", want, &dumped);
        const char *k = "moe_flex_dispatcher_num_sms";
        if (!is_flex || flex.verdict == MT_VERDICT_NOT_APPLIED)
            pk_verdict(out, k, MT_VERDICT_NOT_APPLIED, "the flex backend did not run: %s",
                       is_flex ? flex.text : "the dispatcher is not flex");
        else if (m == 0)
            pk_verdict(out, k, MT_VERDICT_NOT_APPLIED,
                       "arguments dump: moe_flex_dispatcher_num_sms = %.60s, but %s was "
                       "requested",
                       dumped, want);
        else if (m == 1 && flex.verdict == MT_VERDICT_APPLIED)
            pk_verdict(out, k, MT_VERDICT_APPLIED,
                       "arguments dump: moe_flex_dispatcher_num_sms = %.60s, and %s", dumped,
                       flex.text);
        else
            pk_verdict(out, k, MT_VERDICT_UNKNOWN,
                       "needs a profiled run: the SM budget matters only if %s's kernels run",
                       backend_title(backend));
    }
    if (pk_bool(ctx->config, "moe_permute_fusion"))
        verify_by_args(ctx, out, "moe_permute_fusion");
    if (pk_bool(ctx->config, "moe_grouped_gemm"))
        verify_by_args(ctx, out, "moe_grouped_gemm");
    if (pk_bool(ctx->config, "moe_router_force_load_balancing"))
        verify_by_args(ctx, out, "moe_router_force_load_balancing");
    return 0;
}

MT_PLUGIN_EXPORT const mt_plugin_v1 moetune_plugin_v1 = {
    .struct_size = sizeof(mt_plugin_v1),
    .abi_version = MT_PLUGIN_ABI_VERSION,
    .name = "dispatcher",
    .version = "1.0.0",
    .description = "MoE token dispatcher (alltoall, flex with DeepEP/HybridEP/NCCL EP), flex "
                   "SM budget, permute fusion, grouped GEMM, forced load balancing",
    .knobs = knobs,
    .n_knobs = sizeof knobs / sizeof knobs[0],
    .variables = variables,
    .n_variables = sizeof variables / sizeof variables[0],
    .init = pk_init,
    .propose = propose,
    .repair = repair,
    .check = check,
    .render = render,
    .verify = verify,
};
