/*
 * overlap.c - the communication overlap plugin.
 *
 * Owns the switches that hide communication behind compute: EP all-to-all
 * overlap and its delayed weight-gradient companion, shared-expert overlap,
 * gradient-reduce and parameter-gather overlap, TP communication overlap, and
 * the distributed optimizer those data-parallel overlaps build on.
 *
 * Legality follows shared/facts/megatron.md and Megatron-Core's
 * TransformerConfig assertions.  Each switch is its own variable: the gate
 * measures one at a time, and the ablation can drop one without the others.
 */
#include "pluginkit.h"

static const mt_knob_v1 knobs[] = {
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_BOOL, "overlap_moe_expert_parallel_comm", NULL,
     "false", "overlap EP all-to-all with another micro-batch's compute"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_BOOL, "delay_wgrad_compute", NULL, "false",
     "defer weight-gradient GEMMs to overlap the backward all-to-all"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_BOOL, "moe_shared_expert_overlap", NULL, "false",
     "run the shared expert on a side stream during dispatch/combine"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_BOOL, "overlap_grad_reduce", NULL, "false",
     "overlap the data-parallel gradient reduce with backward compute"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_BOOL, "overlap_param_gather", NULL, "false",
     "overlap the distributed optimizer's parameter all-gather with forward compute"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_BOOL, "tp_comm_overlap", NULL, "false",
     "overlap TP/SP all-gather and reduce-scatter with the GEMMs (userbuffers)"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_BOOL, "use_distributed_optimizer", NULL, "false",
     "shard optimizer state across data-parallel ranks"},
};

static const mt_variable_v1 variables[] = {
    {sizeof(mt_variable_v1), "ep_overlap", "overlap_moe_expert_parallel_comm delay_wgrad_compute",
     MT_WALL_COMM},
    {sizeof(mt_variable_v1), "delay_wgrad", "delay_wgrad_compute", MT_WALL_COMM},
    {sizeof(mt_variable_v1), "shared_expert_overlap", "moe_shared_expert_overlap",
     MT_WALL_COMM},
    {sizeof(mt_variable_v1), "grad_reduce_overlap", "overlap_grad_reduce", MT_WALL_COMM},
    {sizeof(mt_variable_v1), "param_gather_overlap", "overlap_param_gather", MT_WALL_COMM},
    {sizeof(mt_variable_v1), "tp_comm_overlap", "tp_comm_overlap", MT_WALL_COMM},
    {sizeof(mt_variable_v1), "distributed_optimizer", "use_distributed_optimizer",
     MT_WALL_MEMORY},
};

static long cfg_int(const mt_ctx_v1 *ctx, const char *knob, long def)
{
    return pk_int(ctx->config, knob, def);
}

static int on(const mt_ctx_v1 *ctx, const char *knob)
{
    return pk_bool(ctx->config, knob);
}

/* Model facts the core may hold in the config or only in the model view. */
static long model_int(const mt_ctx_v1 *ctx, const char *key)
{
    long v = pk_int(ctx->config, key, -1);
    return v >= 0 ? v : pk_int(ctx->model, key, 0);
}

static const char *dispatcher(const mt_ctx_v1 *ctx)
{
    return pk_str(ctx->config, "moe_token_dispatcher_type", "allgather");
}

static int a2a_dispatcher(const mt_ctx_v1 *ctx)
{
    return !strcmp(dispatcher(ctx), "alltoall") || !strcmp(dispatcher(ctx), "flex");
}

/* '|' separators of a pipeline layout, with "(...)*k" groups repeated.  Depth
 * is bounded because the layout comes from a user's contract. */
static long layout_pipes(const char **p, int depth)
{
    long pipes = 0;
    while (**p && **p != ')') {
        if (**p == '|') {
            pipes++;
            (*p)++;
        } else if (**p == '(' && depth < 16) {
            long inner;
            (*p)++;
            inner = layout_pipes(p, depth + 1);
            if (**p == ')')
                (*p)++;
            if (**p == '*') {
                char *end;
                long k = strtol(*p + 1, &end, 10);
                *p = end;
                /* A layout has at most a few hundred stages; the clamp only
                 * keeps a hostile repeat count from overflowing. */
                inner *= k < 1 ? 1 : k > 100000 ? 100000 : k;
            }
            pipes += inner;
        } else {
            (*p)++;
        }
    }
    return pipes;
}

static long layout_stages(const mt_ctx_v1 *ctx)
{
    const char *layout = pk_str(ctx->config, "pipeline_model_parallel_layout", "");
    long pipes = 0;
    if (!*layout || !strcmp(layout, "none"))
        return 0;
    while (*layout) {
        pipes += layout_pipes(&layout, 0);
        if (*layout == ')')
            layout++; /* unbalanced: count on, the folding plugin reports it */
    }
    return pipes + 1;
}

/* Interleaved (virtual) pipelining is on: by either VPP flag, or by a layout
 * with more stages than pipeline ranks.  A virtual pipeline size of 1 (one
 * virtual stage per rank, or chunks of a whole stage) is none: Megatron
 * resets it to None. */
static int vpp_set(const mt_ctx_v1 *ctx)
{
    long pp = cfg_int(ctx, "pipeline_model_parallel_size", 1);
    long chunk = cfg_int(ctx, "num_layers_per_virtual_pipeline_stage", 0);
    long layers = cfg_int(ctx, "num_layers", 0);
    return (chunk > 0 && (pp < 1 || layers <= 0 || layers / pp > chunk)) ||
           cfg_int(ctx, "num_virtual_stages_per_pipeline_rank", 0) > 1 ||
           layout_stages(ctx) > pp;
}

static int full_recompute(const mt_ctx_v1 *ctx)
{
    return pk_eq(ctx->config, "recompute_granularity", "full") ||
           strcmp(pk_str(ctx->config, "recompute_method", "none"), "none") ||
           cfg_int(ctx, "recompute_num_layers", 0) > 0;
}

/* The MTP depth EP overlap accepts: one layer, and from core 0.19 also 0. */
static int mtp_ok_with_ep_overlap(const mt_ctx_v1 *ctx, long mtp)
{
    return mtp == 1 || (mtp == 0 && pk_core_ge(ctx, "0.19"));
}

/* Where rule checks go: propose() and repair() pass no sink, only count, and
 * keep the first message to explain a repair. */
typedef struct report {
    mt_sink *sink;
    char first[512];
} report;

static int violated(report *r, const char *rule, const char *knobs, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int violated(report *r, const char *rule, const char *knobs, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (r->sink)
        pk_host->sink_violation(r->sink, rule, knobs, msg);
    if (!r->first[0])
        memcpy(r->first, msg, sizeof msg);
    return 1;
}

/* ---- the config view, for propose() and repair() ----------------------
 *
 * The start-up rules below judge the parsed command line; these predicates
 * judge the config a candidate changes, with the same conditions, so that
 * propose() offers nothing the rules refuse and repair() knows what to undo.
 * They name the start-up rule each condition stands for. */

/* Requirements of EP overlap other than the shared-expert exclusion (two knobs
 * of this plugin, handled apart), as if EP overlap were on. */
static int ep_overlap_problems(const mt_ctx_v1 *ctx, report *r)
{
    long ep = cfg_int(ctx, "expert_model_parallel_size", 1);
    long pp = cfg_int(ctx, "pipeline_model_parallel_size", 1);
    long mtp = model_int(ctx, "mtp_num_layers");
    int n = 0;

    if (pp > 1 && !vpp_set(ctx))
        n += violated(r, "overlap.ep_a2a_needs_vpp_when_pp", "overlap_moe_expert_parallel_comm",
                      "EP overlap with pipeline_model_parallel_size %ld needs virtual pipeline "
                      "stages; set them or turn the overlap off",
                      pp);
    if (ep <= 1)
        n += violated(r, "overlap.ep_a2a_needs_ep", "overlap_moe_expert_parallel_comm",
                      "EP overlap needs expert parallelism, but expert_model_parallel_size is "
                      "%ld; set EP > 1 or turn the overlap off",
                      ep);
    if (!a2a_dispatcher(ctx))
        n += violated(r, "overlap.ep_a2a_dispatcher", "overlap_moe_expert_parallel_comm",
                      "EP overlap needs the alltoall or flex dispatcher, but "
                      "moe_token_dispatcher_type is %s; switch or turn the overlap off",
                      dispatcher(ctx));
    if (full_recompute(ctx))
        n += violated(r, "overlap.ep_a2a_no_full_recompute", "overlap_moe_expert_parallel_comm",
                      "EP overlap refuses full recompute, a recompute method and "
                      "recompute_num_layers; use selective recompute or turn the overlap off");
    if (pk_core_ge(ctx, "0.18") && pk_has(ctx->config, "recompute_modules", "moe"))
        n += violated(r, "overlap.ep_a2a_no_moe_recompute", "overlap_moe_expert_parallel_comm",
                      "EP overlap refuses recompute of the whole MoE layer (recompute_modules "
                      "\"%s\"); recompute moe_act instead or turn the overlap off",
                      pk_str(ctx->config, "recompute_modules", ""));
    if (!on(ctx, "bf16") && !on(ctx, "fp16"))
        n += violated(r, "overlap.ep_a2a_dtype", "overlap_moe_expert_parallel_comm",
                      "EP overlap needs a bf16 or fp16 model; turn bf16 on or the overlap off");
    if (mtp > 0 && !mtp_ok_with_ep_overlap(ctx, mtp))
        n += violated(r, "overlap.ep_a2a_mtp_layers", "overlap_moe_expert_parallel_comm",
                      "EP overlap supports at most one MTP layer, but mtp_num_layers is %ld; "
                      "turn the overlap off",
                      mtp);
    return n;
}

/* moe_shared_expert_overlap's own requirements (the EP-overlap exclusion is
 * handled apart).  Upstream judges it only with a shared expert. */
static int shared_problems(const mt_ctx_v1 *ctx, report *r)
{
    long shared = model_int(ctx, "moe_shared_expert_intermediate_size");
    int flex_ok = pk_core_ge(ctx, "0.18");
    int n = 0;

    if (shared <= 0)
        return 0;
    if (strcmp(dispatcher(ctx), "alltoall") && (!flex_ok || strcmp(dispatcher(ctx), "flex")))
        n += violated(r, "overlap.shared_expert_overlap_dispatcher", "moe_shared_expert_overlap",
                      "shared-expert overlap needs the alltoall%s dispatcher, but "
                      "moe_token_dispatcher_type is %s; switch or turn it off",
                      flex_ok ? " or flex" : "", dispatcher(ctx));
    if ((pk_eq(ctx->config, "recompute_granularity", "selective") ||
         pk_bool(ctx->config, "recompute_activations")) &&
        pk_has(ctx->config, "recompute_modules", "shared_experts"))
        n += violated(r, "overlap.shared_expert_overlap_vs_recompute", "moe_shared_expert_overlap",
                      "shared-expert overlap cannot be combined with recompute of "
                      "shared_experts (recompute_modules \"%s\"); drop one of them",
                      pk_str(ctx->config, "recompute_modules", ""));
    return n;
}

static int param_gather_problems(const mt_ctx_v1 *ctx, report *r)
{
    int n = 0;
    if (!on(ctx, "use_distributed_optimizer"))
        n += violated(r, "overlap.param_gather_needs_dist_opt", "overlap_param_gather",
                      "param-gather overlap needs the distributed optimizer, which is off; turn "
                      "it on or param-gather overlap off");
    if (!on(ctx, "overlap_grad_reduce"))
        n += violated(r, "overlap.param_gather_needs_grad_reduce", "overlap_param_gather",
                      "param-gather overlap needs grad-reduce overlap, which is off; turn both "
                      "on or param-gather overlap off");
    return n;
}

/* tp_comm_overlap needs sequence parallel, which Megatron turns off at TP 1. */
static int tp_comm_problems(const mt_ctx_v1 *ctx, report *r)
{
    if (cfg_int(ctx, "tensor_model_parallel_size", 1) > 1 && on(ctx, "sequence_parallel"))
        return 0;
    return violated(r, "overlap.tp_comm_overlap_needs_sp", "tp_comm_overlap",
                    "TP comm overlap needs sequence parallelism with TP > 1; turn it off");
}

/* ---- start-up rules: Megatron-LM's own checks over the parsed arguments --
 *
 * validate_args (training/arguments.py), ModelParallelConfig and
 * TransformerConfig __post_init__, per version.  Every rule is reported on
 * its own condition; upstream stops at the first failing one, and each of
 * these is a requirement it would raise once the earlier ones are fixed. */

#define A(dest) pk_arg_on(ctx, dest)
#define I(dest, def) pk_arg_int(ctx, dest, def)

static const char *arg_or(const mt_ctx_v1 *ctx, const char *dest, const char *none)
{
    const char *v = pk_arg(ctx, dest);
    return v ? v : none;
}

/* The recompute modules TransformerConfig ends with: the list given or its
 * default core_attn, plus moe under --moe-layer-recompute. */
static int recomputes(const mt_ctx_v1 *ctx, const char *module)
{
    const char *mods = pk_arg(ctx, "recompute_modules");
    if (!mods)
        mods = "core_attn";
    return pk_word_in(mods, module) || (!strcmp(module, "moe") && A("moe_layer_recompute"));
}

/* The EP all-to-all overlap block of TransformerConfig. */
static void startup_ep_overlap(const mt_ctx_v1 *ctx, mt_sink *out)
{
    const char *disp = arg_or(ctx, "moe_token_dispatcher_type", "None");
    const char *mtp = pk_arg(ctx, "mtp_num_layers");
    long pp = I("pipeline_model_parallel_size", 1), ep = I("expert_model_parallel_size", 1);

    if (pp > 1 && !pk_arg_set(ctx, "virtual_pipeline_model_parallel_size"))
        pk_startup(out, "overlap.ep_a2a_needs_vpp_when_pp",
                   "overlap_moe_expert_parallel_comm pipeline_model_parallel_size",
                   "If enabling EP A2A overlap, virtual_pipeline_model_parallel_size must be "
                   "specified when pipeline_model_parallel_size > 1 (it is %ld); set "
                   "--num-virtual-stages-per-pipeline-rank or a layout with more stages than "
                   "ranks, or drop --overlap-moe-expert-parallel-comm",
                   pp);
    if (ep <= 1)
        pk_startup(out, "overlap.ep_a2a_needs_ep",
                   "overlap_moe_expert_parallel_comm expert_model_parallel_size",
                   "overlap_moe_expert_parallel_comm is only supported with expert model "
                   "parallelism (expert_model_parallel_size is %ld); set EP > 1 or drop "
                   "--overlap-moe-expert-parallel-comm",
                   ep);
    if (strcmp(disp, "alltoall") && strcmp(disp, "flex"))
        pk_startup(out, "overlap.ep_a2a_dispatcher",
                   "overlap_moe_expert_parallel_comm moe_token_dispatcher_type",
                   "overlap_moe_expert_parallel_comm is supported with alltoall/flex token "
                   "dispatcher (it is %s); set --moe-token-dispatcher-type alltoall or flex",
                   disp);
    if (pk_arg_is(ctx, "recompute_granularity", "full"))
        pk_startup(out, "overlap.ep_a2a_no_full_recompute",
                   "overlap_moe_expert_parallel_comm recompute_granularity",
                   "disable full recomputation when enabling overlap_moe_expert_parallel_comm; "
                   "use --recompute-granularity selective or drop the overlap");
    if (pk_arg_set(ctx, "recompute_method"))
        pk_startup(out, "overlap.ep_a2a_no_recompute_method",
                   "overlap_moe_expert_parallel_comm recompute_method",
                   "disable recomputation method when enabling overlap_moe_expert_parallel_comm "
                   "(recompute_method is %s); drop --recompute-method",
                   pk_arg(ctx, "recompute_method"));
    if (pk_arg_set(ctx, "recompute_num_layers"))
        pk_startup(out, "overlap.ep_a2a_no_recompute_num_layers",
                   "overlap_moe_expert_parallel_comm recompute_num_layers",
                   "recompute_num_layers must be None when enabling "
                   "overlap_moe_expert_parallel_comm (it is %s); drop --recompute-num-layers",
                   pk_arg(ctx, "recompute_num_layers"));
    if (pk_core_ge(ctx, "0.18") && recomputes(ctx, "moe"))
        pk_startup(out, "overlap.ep_a2a_no_moe_recompute",
                   "overlap_moe_expert_parallel_comm recompute_modules moe_layer_recompute",
                   "disable moe in recompute_modules when enabling "
                   "overlap_moe_expert_parallel_comm; recompute moe_act instead, or drop "
                   "--moe-layer-recompute");
    if (!A("bf16") && !A("fp16"))
        pk_startup(out, "overlap.ep_a2a_dtype", "overlap_moe_expert_parallel_comm bf16",
                   "overlap_moe_expert_parallel_comm is only supported with bf16 or fp16 "
                   "model; add --bf16");
    if (A("moe_shared_expert_overlap"))
        pk_startup(out, "overlap.ep_a2a_no_shared_expert_overlap",
                   "moe_shared_expert_overlap overlap_moe_expert_parallel_comm",
                   "disable moe_shared_expert_overlap when enabling "
                   "overlap_moe_expert_parallel_comm; drop one of the two");
    if (mtp) {
        long m = strtol(mtp, NULL, 10);
        int v019 = pk_core_ge(ctx, "0.19");
        if (m != 1 && (!v019 || m != 0))
            pk_startup(out, "overlap.ep_a2a_mtp_layers",
                       "overlap_moe_expert_parallel_comm mtp_num_layers",
                       "%s when enabling overlap_moe_expert_parallel_comm. (mtp_num_layers is "
                       "%ld); use --mtp-num-layers 1 or drop the overlap",
                       v019 ? "MTP supports at most one layer" : "MTP layernum only supports 1",
                       m);
    }
    if (pk_core_ge(ctx, "0.19") && !strcmp(disp, "flex") && !A("moe_enable_deepep") &&
        pk_arg_is(ctx, "moe_flex_dispatcher_backend", "ncclep") &&
        A("fine_grained_activation_offloading") && pk_arg_has(ctx, "offload_modules", "expert_fc1"))
        pk_startup(out, "overlap.ep_a2a_ncclep_offload_fc1",
                   "overlap_moe_expert_parallel_comm offload_modules",
                   "overlap_moe_expert_parallel_comm with ncclep does not support offloading "
                   "'expert_fc1': it forces expert FC1 to save the raw bf16 input, which the "
                   "overlap path eagerly frees; drop expert_fc1 from --offload-modules");
}

/* delay_wgrad_compute, overlap_dispatch_backward_with_experts_wgrad and
 * ep_overlap_early_attn_memory_release (the CUDA-graph checks of the same
 * validate_args block belong to the cudagraph plugin). */
static void startup_wgrad(const mt_ctx_v1 *ctx, mt_sink *out)
{
    int ep_a2a = A("overlap_moe_expert_parallel_comm"), delay = A("delay_wgrad_compute");

    if (delay) {
        if (!pk_arg_is(ctx, "transformer_impl", "transformer_engine"))
            pk_startup(out, "overlap.delay_wgrad_needs_te_impl",
                       "delay_wgrad_compute transformer_impl",
                       "Delaying wgrad compute is only supported with transformer_engine "
                       "implementation (--transformer-impl is %s); use transformer_engine",
                       arg_or(ctx, "transformer_impl", "None"));
        if (A("overlap_grad_reduce") && !pk_te_ge(ctx, "2.8"))
            pk_startup(out, "overlap.delay_wgrad_grad_reduce_te28",
                       "delay_wgrad_compute overlap_grad_reduce",
                       "overlap_grad_reduce is only supported with TE >= 2.8.0 when enabling "
                       "delay_wgrad_compute; upgrade Transformer Engine or drop "
                       "--overlap-grad-reduce");
        if (!A("gradient_accumulation_fusion") && !pk_te_ge(ctx, "2.7"))
            pk_startup(out, "overlap.delay_wgrad_no_gaf_te27",
                       "delay_wgrad_compute gradient_accumulation_fusion",
                       "disabling gradient_accumulation_fusion is only supported with TE >= "
                       "2.7.0 when enabling delay_wgrad_compute; upgrade Transformer Engine or "
                       "drop --no-gradient-accumulation-fusion");
        if (!ep_a2a)
            pk_startup(out, "overlap.delay_wgrad_needs_ep_a2a",
                       "delay_wgrad_compute overlap_moe_expert_parallel_comm",
                       "overlap_moe_expert_parallel_comm must be enabled when enabling "
                       "delay_wgrad_compute; add --overlap-moe-expert-parallel-comm or drop "
                       "--delay-wgrad-compute");
        else if (!pk_core_ge(ctx, "0.18") && A("moe_use_legacy_grouped_gemm"))
            pk_startup(out, "overlap.delay_wgrad_legacy_grouped_gemm",
                       "delay_wgrad_compute moe_use_legacy_grouped_gemm",
                       "delay_wgrad_compute is not supported with legacy groupedgemm "
                       "implementation; drop --moe-use-legacy-grouped-gemm");
    }
    if (pk_core_ge(ctx, "0.18") && A("overlap_dispatch_backward_with_experts_wgrad")) {
        if (ep_a2a)
            pk_startup(out, "overlap.dispatch_bwd_wgrad_excl_ep_a2a",
                       "overlap_dispatch_backward_with_experts_wgrad "
                       "overlap_moe_expert_parallel_comm",
                       "overlap_moe_expert_parallel_comm must be disabled when enabling "
                       "overlap_dispatch_backward_with_experts_wgrad.; drop one of the two");
        if (!pk_te_ge(ctx, "2.3"))
            pk_startup(out, "overlap.dispatch_bwd_wgrad_te23",
                       "overlap_dispatch_backward_with_experts_wgrad",
                       "TE version >= 2.3.0 is required for "
                       "overlap_dispatch_backward_with_experts_wgrad; upgrade Transformer Engine");
        if (!ep_a2a && delay)
            pk_startup(out, "overlap.dispatch_bwd_wgrad_excl_delay_wgrad",
                       "overlap_dispatch_backward_with_experts_wgrad delay_wgrad_compute",
                       "delay_wgrad_compute and overlap_dispatch_backward_with_experts_wgrad "
                       "are mutually exclusive; use only one");
    }
    if (pk_core_ge(ctx, "0.18") && A("ep_overlap_early_attn_memory_release") && !ep_a2a)
        pk_startup(out, "overlap.ep_early_attn_release_needs_ep_a2a",
                   "ep_overlap_early_attn_memory_release overlap_moe_expert_parallel_comm",
                   "overlap_moe_expert_parallel_comm must be enabled when enabling "
                   "ep_overlap_early_attn_memory_release; add the overlap or drop the flag");
}

/* Shared-expert overlap outside the EP-overlap block. */
static void startup_shared_expert(const mt_ctx_v1 *ctx, mt_sink *out)
{
    const char *disp = arg_or(ctx, "moe_token_dispatcher_type", "None");
    int flex_ok = pk_core_ge(ctx, "0.18");

    if (!A("moe_shared_expert_overlap") || !pk_arg_set(ctx, "moe_shared_expert_intermediate_size"))
        return;
    if (strcmp(disp, "alltoall") && (!flex_ok || strcmp(disp, "flex")))
        pk_startup(out, "overlap.shared_expert_overlap_dispatcher",
                   "moe_shared_expert_overlap moe_token_dispatcher_type",
                   "moe_shared_expert_overlap only works with %s token dispatcher. (it is %s); "
                   "switch dispatcher or drop --moe-shared-expert-overlap",
                   flex_ok ? "alltoall or flex" : "alltoall", disp);
    if (pk_arg_is(ctx, "recompute_granularity", "selective") && recomputes(ctx, "shared_experts"))
        pk_startup(out, "overlap.shared_expert_overlap_vs_recompute",
                   "moe_shared_expert_overlap recompute_modules",
                   "shared_experts recompute cannot work with --moe-shared-expert-overlap.; "
                   "drop shared_experts from --recompute-modules or the overlap");
}

/* Data-parallel overlap (grad reduce, param gather) in validate_args. */
static void startup_dp_overlap(const mt_ctx_v1 *ctx, mt_sink *out)
{
    int v018 = pk_core_ge(ctx, "0.18");
    int dist_opt = A("use_distributed_optimizer");
    int vpp = pk_arg_set(ctx, "virtual_pipeline_model_parallel_size");

    if (A("overlap_param_gather")) {
        if (!dist_opt && !A("use_megatron_fsdp") && !(v018 && pk_arg_is(ctx, "optimizer", "dist_muon")))
            pk_startup(out, "overlap.param_gather_needs_dist_opt",
                       "overlap_param_gather use_distributed_optimizer",
                       "--overlap-param-gather only supported with distributed optimizer%s; "
                       "add --use-distributed-optimizer or drop --overlap-param-gather",
                       v018 ? ", megatron fsdp, or dist_muon" : " or megatron fsdp");
        if (!A("overlap_grad_reduce"))
            pk_startup(out, "overlap.param_gather_needs_grad_reduce",
                       "overlap_param_gather overlap_grad_reduce",
                       "Must use --overlap-param-gather with --overlap-grad-reduce; add "
                       "--overlap-grad-reduce or drop --overlap-param-gather");
        if (!v018 && A("use_legacy_models"))
            pk_startup(out, "overlap.param_gather_legacy_models",
                       "overlap_param_gather use_legacy_models",
                       "--overlap-param-gather only supported with MCore models; drop "
                       "--use-legacy-models or --overlap-param-gather");
    }
    if (A("overlap_param_gather_with_optimizer_step")) {
        if (!dist_opt)
            pk_startup(out, "overlap.param_gather_with_opt_step_needs_dist_opt",
                       "overlap_param_gather_with_optimizer_step use_distributed_optimizer",
                       "--overlap-param-gather-with-optimizer-step only supported with "
                       "distributed optimizer; add --use-distributed-optimizer");
        if (!A("overlap_param_gather"))
            pk_startup(out, "overlap.param_gather_with_opt_step_needs_param_gather",
                       "overlap_param_gather_with_optimizer_step overlap_param_gather",
                       "Must use --overlap-param-gather-with-optimizer-step with "
                       "--overlap-param-gather; add --overlap-param-gather");
        if (!vpp)
            pk_startup(out, "overlap.param_gather_with_opt_step_needs_interleaved",
                       "overlap_param_gather_with_optimizer_step "
                       "virtual_pipeline_model_parallel_size",
                       "--overlap-param-gather-with-optimizer-step only supported with "
                       "interleaved pipeline parallelism; set virtual pipeline stages or drop "
                       "the flag");
        /* use_dist_ckpt: every checkpoint format but torch (default torch_dist). */
        if (!pk_arg_is(ctx, "ckpt_format", "torch"))
            pk_startup(out, "overlap.param_gather_with_opt_step_dist_ckpt",
                       "overlap_param_gather_with_optimizer_step ckpt_format",
                       "--overlap-param-gather-with-optimizer-step not supported with "
                       "distributed checkpointing yet (--ckpt-format is %s); drop the flag",
                       arg_or(ctx, "ckpt_format", "None"));
    }
}

/* Pipeline p2p overlap in warmup/flush and deferred embedding wgrad
 * (ModelParallelConfig). */
static void startup_pipeline(const mt_ctx_v1 *ctx, mt_sink *out)
{
    long pp = I("pipeline_model_parallel_size", 1);
    int vpp = pk_arg_set(ctx, "virtual_pipeline_model_parallel_size");
    /* overlap_p2p_comm after validate_args: off without virtual stages. */
    int p2p = A("overlap_p2p_comm");

    /* The interleaved schedule's own PP > 1 / PP > 2 checks (A:604, A:608 in
     * 0.15) are the folding plugin's, with the virtual pipeline they judge. */
    if (A("overlap_p2p_comm_warmup_flush") && !p2p)
        pk_startup(out, "overlap.p2p_warmup_flush_needs_overlap_p2p",
                   "overlap_p2p_comm_warmup_flush overlap_p2p_comm",
                   "Pipeline parallel communication overlapping in warmup and flush is only "
                   "compatible with overlap_p2p_comm but not batch_p2p_comm. (p2p overlap is "
                   "%s); use virtual pipeline stages with p2p overlap, or drop "
                   "--overlap-p2p-communication-warmup-flush",
                   vpp ? "disabled" : "off without virtual pipeline stages");
    if (A("defer_embedding_wgrad_compute")) {
        if (pp == 1)
            pk_startup(out, "overlap.defer_embedding_wgrad_needs_pp",
                       "defer_embedding_wgrad_compute pipeline_model_parallel_size",
                       "Cannot defer embedding wgrad compute when pipeline model parallel is "
                       "not used; drop --defer-embedding-wgrad-compute or use PP > 1");
        if (!A("gradient_accumulation_fusion"))
            pk_startup(out, "overlap.defer_embedding_wgrad_needs_grad_acc_fusion",
                       "defer_embedding_wgrad_compute gradient_accumulation_fusion",
                       "Cannot defer embedding wgrad compute when gradient accumulation fusion "
                       "is not used; drop --no-gradient-accumulation-fusion or the deferral");
        if (I("wgrad_deferral_limit", 0) < 0)
            pk_startup(out, "overlap.defer_embedding_wgrad_limit_nonneg",
                       "defer_embedding_wgrad_compute wgrad_deferral_limit",
                       "Wgrad deferral limit should be greater than or equal to 0 when it is "
                       "enabled! (--wgrad-deferral-limit is %ld)",
                       I("wgrad_deferral_limit", 0));
    }
}

/* Tensor-parallel communication overlap and sequence parallel. */
static void startup_tp(const mt_ctx_v1 *ctx, mt_sink *out)
{
    long tp = I("tensor_model_parallel_size", 1);
    /* sequence_parallel after validate_args: off at TP 1. */
    int sp = A("sequence_parallel");

    if (A("tp_comm_overlap") && !sp)
        pk_startup(out, "overlap.tp_comm_overlap_needs_sp", "tp_comm_overlap sequence_parallel",
                   "Tensor parallel communication/GEMM overlap can happen only when sequence "
                   "parallelism is enabled%s; add --sequence-parallel or drop --tp-comm-overlap",
                   tp <= 1 ? " (and sequence parallelism is off at TP 1)" : "");
    /* Core 0.15's ModelParallelConfig calls warnings.warn for EP with TP but
     * without SP and never imported warnings: the run dies at start-up. */
    if (!pk_core_ge(ctx, "0.18") && I("expert_model_parallel_size", 1) > 1 && tp > 1 && !sp)
        pk_startup(out, "overlap.r015_ep_tp_without_sp_nameerror",
                   "sequence_parallel tensor_model_parallel_size expert_model_parallel_size",
                   "NameError: name 'warnings' is not defined (Megatron core 0.15's "
                   "ModelParallelConfig crashes warning about expert parallelism with TP %ld "
                   "and no sequence parallelism); add --sequence-parallel",
                   tp);
}

#undef A
#undef I

static int check(void *state, const mt_ctx_v1 *ctx, mt_sink *out)
{
    (void)state;
    if (!pk_args(ctx))
        return 0;
    startup_tp(ctx, out);
    startup_dp_overlap(ctx, out);
    startup_pipeline(ctx, out);
    startup_wgrad(ctx, out);
    startup_shared_expert(ctx, out);
    if (pk_arg_on(ctx, "overlap_moe_expert_parallel_comm"))
        startup_ep_overlap(ctx, out);
    return 0;
}

/* Whether a rule group holds, without reporting. */
static int holds(int (*rules)(const mt_ctx_v1 *, report *), const mt_ctx_v1 *ctx)
{
    report r = {NULL, ""};
    return rules(ctx, &r) == 0;
}

static long data_parallel(const mt_ctx_v1 *ctx)
{
    long world = pk_int(ctx->hardware, "world_size", 1);
    long split = cfg_int(ctx, "tensor_model_parallel_size", 1) *
                 cfg_int(ctx, "pipeline_model_parallel_size", 1) *
                 cfg_int(ctx, "context_parallel_size", 1);
    return split > 0 ? world / split : 1;
}

/* Opens a candidate that turns one boolean knob on, if that is no no-op and
 * the contract's space allows it. */
static int turn_on(const mt_ctx_v1 *ctx, mt_sink *out, const char *variable, const char *knob,
                   const char *summary, uint32_t walls)
{
    if (on(ctx, knob) || !pk_space_allows(ctx, knob, "true"))
        return 0;
    pk_host->sink_candidate(out, variable, summary, walls, MT_LABEL_TRAINING_EQUIVALENT);
    pk_host->sink_set(out, knob, "true");
    return 1;
}

static void propose_ep_overlap(const mt_ctx_v1 *ctx, mt_sink *out, int host_bound)
{
    if (on(ctx, "moe_shared_expert_overlap") || !holds(ep_overlap_problems, ctx))
        return;
    if (!turn_on(ctx, out, "ep_overlap", "overlap_moe_expert_parallel_comm",
                 "EP all-to-all overlap", MT_WALL_COMM))
        return;
    pk_note(out, "hides EP all-to-all behind another micro-batch's compute (calibration A: "
                 "0.11%% -> 36.6%% hidden, 244 -> 287 TF on 16 x H100)");
    if (host_bound)
        pk_note(out, "tried last: the profiled wall is host/launch on Blackwell, where EP "
                     "overlap was a net loss (calibration C, DeepSeek-V3 on GB200)");
    /* the second value of the variable: EP overlap leaves the backward
     * combine exposed unless the expert weight gradients are deferred to
     * cover it, so the two are tried together too (delay_wgrad_compute
     * needs the overlap: alone it is never a candidate) */
    if (on(ctx, "delay_wgrad_compute") || !pk_space_declared(ctx, "delay_wgrad_compute") ||
        !pk_space_allows(ctx, "delay_wgrad_compute", "true"))
        return; /* declared: a contract that does not search it keeps it */
    if (!turn_on(ctx, out, "ep_overlap", "overlap_moe_expert_parallel_comm",
                 "EP all-to-all overlap with delayed weight-gradient compute", MT_WALL_COMM))
        return;
    pk_host->sink_set(out, "delay_wgrad_compute", "true");
    pk_note(out, "hides EP all-to-all behind another micro-batch's compute, and defers the "
                 "expert weight-gradient GEMMs so they cover the backward all-to-all");
}

static int propose(void *state, const mt_ctx_v1 *ctx, mt_sink *out)
{
    const char *wall = pk_str(ctx->evidence, "wall", "");
    int host_bound = !strncmp(wall, "host", 4) && pk_eq(ctx->hardware, "arch", "blackwell");
    long dp = data_parallel(ctx);
    (void)state;

    if (!host_bound)
        propose_ep_overlap(ctx, out, 0);

    if (!on(ctx, "overlap_moe_expert_parallel_comm") && holds(shared_problems, ctx) &&
        turn_on(ctx, out, "shared_expert_overlap", "moe_shared_expert_overlap",
                "shared-expert overlap", MT_WALL_COMM))
        pk_note(out, "computes the shared expert (%ld wide) on a side stream while tokens are "
                     "dispatched and combined",
                model_int(ctx, "moe_shared_expert_intermediate_size"));

    if (on(ctx, "overlap_moe_expert_parallel_comm") &&
        turn_on(ctx, out, "delay_wgrad", "delay_wgrad_compute", "delayed weight-gradient compute",
                MT_WALL_COMM))
        pk_note(out, "defers expert weight-gradient GEMMs so they cover the backward "
                     "all-to-all that EP overlap leaves exposed");

    if (dp > 1 && turn_on(ctx, out, "grad_reduce_overlap", "overlap_grad_reduce",
                          "gradient reduce overlap", MT_WALL_COMM))
        pk_note(out, "starts the data-parallel gradient reduce (DP %ld) bucket by bucket during "
                     "backward instead of after it",
                dp);

    if (dp > 1 && on(ctx, "overlap_grad_reduce") && on(ctx, "use_distributed_optimizer") &&
        turn_on(ctx, out, "param_gather_overlap", "overlap_param_gather",
                "parameter all-gather overlap", MT_WALL_COMM))
        pk_note(out, "gathers the sharded parameters during the next forward instead of at the "
                     "end of the optimizer step");

    if (holds(tp_comm_problems, ctx) &&
        turn_on(ctx, out, "tp_comm_overlap", "tp_comm_overlap", "TP communication overlap",
                MT_WALL_COMM))
        pk_note(out, "overlaps the sequence-parallel all-gather/reduce-scatter of TP %ld with "
                     "the GEMMs that consume them",
                cfg_int(ctx, "tensor_model_parallel_size", 1));

    if (dp > 1 && turn_on(ctx, out, "distributed_optimizer", "use_distributed_optimizer",
                          "distributed optimizer", MT_WALL_MEMORY))
        pk_note(out, "shards optimizer state over %ld data-parallel ranks: frees memory for "
                     "larger micro-batches or less recompute, and enables param-gather overlap",
                dp);

    if (host_bound)
        propose_ep_overlap(ctx, out, 1);
    return 0;
}

/* Turns `knob` off unless the candidate under repair set it. */
static int turn_off(const mt_ctx_v1 *ctx, mt_sink *out, const char *knob)
{
    if (!on(ctx, knob) || pk_get(ctx->changed, knob))
        return 0;
    pk_host->sink_set(out, knob, "false");
    return 1;
}

/* The what-is-wrong half of a violation message, for a repair note. */
static const char *problem(report *r)
{
    char *fix = strstr(r->first, "; ");
    if (fix)
        *fix = '\0';
    return r->first;
}

static int repair(void *state, const mt_ctx_v1 *ctx, mt_sink *out)
{
    report r = {NULL, ""};
    (void)state;

    if (on(ctx, "overlap_moe_expert_parallel_comm") && ep_overlap_problems(ctx, &r) &&
        turn_off(ctx, out, "overlap_moe_expert_parallel_comm")) {
        pk_note(out, "EP overlap turned off: %s", problem(&r));
        if (turn_off(ctx, out, "delay_wgrad_compute"))
            pk_note(out, "delayed wgrad turned off with it: it needs EP overlap");
    } else if (!on(ctx, "overlap_moe_expert_parallel_comm") &&
               turn_off(ctx, out, "delay_wgrad_compute")) {
        pk_note(out, "delayed wgrad turned off: it needs EP overlap, which is off");
    }
    r.first[0] = '\0';
    if (on(ctx, "moe_shared_expert_overlap") && shared_problems(ctx, &r) &&
        turn_off(ctx, out, "moe_shared_expert_overlap"))
        pk_note(out, "shared-expert overlap turned off: %s", problem(&r));
    r.first[0] = '\0';
    if (on(ctx, "overlap_param_gather") && param_gather_problems(ctx, &r) &&
        turn_off(ctx, out, "overlap_param_gather"))
        pk_note(out, "param-gather overlap turned off: %s", problem(&r));
    if (on(ctx, "tp_comm_overlap") && !holds(tp_comm_problems, ctx) &&
        turn_off(ctx, out, "tp_comm_overlap"))
        pk_note(out, "tp_comm_overlap turned off: it needs TP > 1 with sequence parallel, and "
                     "TP is now %ld%s",
                cfg_int(ctx, "tensor_model_parallel_size", 1),
                on(ctx, "sequence_parallel") ? "" : " without sequence parallel");
    return 0;
}

static int render(void *state, const mt_ctx_v1 *ctx, uint32_t d, mt_sink *out)
{
    static const struct {
        const char *knob, *section;
    } flags[] = {
        /* Library pretrain recipes hold comm_overlap = None, where every
         * comm_overlap.* path fails: the switches go where the run reads them. */
        {"overlap_moe_expert_parallel_comm", "model"},
        {"delay_wgrad_compute", "model"},
        {"moe_shared_expert_overlap", "model"},
        {"overlap_grad_reduce", "ddp"},
        {"overlap_param_gather", "ddp"},
        {"tp_comm_overlap", "model"},
        {"use_distributed_optimizer", "ddp"},
    };
    size_t i;
    (void)state;
    for (i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (on(ctx, flags[i].knob))
            pk_render_bool(out, d, flags[i].knob, flags[i].section, NULL, 1);
    /* The optimizer's copy of the switch is kept equal to the DDP one. */
    if (d == MT_DIALECT_BRIDGE && on(ctx, "use_distributed_optimizer"))
        pk_render_bool(out, d, "use_distributed_optimizer", "optimizer", NULL, 1);
    return 0;
}

/* The arguments dump for `knob`: 1 matches the config, 0 differs, -1 absent. */
static int args_match(const mt_ctx_v1 *ctx, const char *knob, const char **dumped)
{
    return pk_args_match(ctx, knob, pk_str(ctx->config, knob, ""), dumped);
}

/* EP overlap is wired at model build, so the dump shows it was set up; only a
 * trace shows communication actually hidden behind compute. */
static void verify_ep_overlap(const mt_ctx_v1 *ctx, mt_sink *out)
{
    static const char *const k = "overlap_moe_expert_parallel_comm";
    const char *hidden = pk_get(ctx->evidence, "trace.comm_hidden_fraction");
    const char *dumped;
    int m = args_match(ctx, k, &dumped);

    if (m == 0) {
        pk_verdict(out, k, MT_VERDICT_NOT_APPLIED, "arguments dump: %s = %.60s", k, dumped);
    } else if (hidden && pk_eq(ctx->evidence, "trace.available", "true")) {
        double f = strtod(hidden, NULL);
        if (f > 0)
            pk_verdict(out, k, MT_VERDICT_APPLIED,
                       "trace.comm_hidden_fraction = %.40s: communication is hidden behind "
                       "compute",
                       hidden);
        else
            pk_verdict(out, k, MT_VERDICT_NOT_APPLIED,
                       "trace.comm_hidden_fraction = %.40s: no communication overlaps compute",
                       hidden);
    } else if (m == 1) {
        pk_verdict(out, k, MT_VERDICT_APPLIED,
                   "arguments dump: %s = %.60s (the overlap schedule is set up at model build; "
                   "only a trace's comm_hidden_fraction proves communication was hidden)",
                   k, dumped);
    } else {
        pk_verdict(out, k, MT_VERDICT_UNKNOWN, "no arguments dump or trace for this run");
    }
}

static int verify(void *state, const mt_ctx_v1 *ctx, mt_sink *out)
{
    size_t i;
    (void)state;
    for (i = 0; i < sizeof knobs / sizeof knobs[0]; i++) {
        const char *k = knobs[i].name, *dumped;
        if (!on(ctx, k))
            continue;
        if (!strcmp(k, "overlap_moe_expert_parallel_comm")) {
            verify_ep_overlap(ctx, out);
            continue;
        }
        switch (args_match(ctx, k, &dumped)) {
        case 1:
            pk_verdict(out, k, MT_VERDICT_APPLIED, "arguments dump: %s = %.60s (read at startup)",
                       k, dumped);
            break;
        case 0:
            pk_verdict(out, k, MT_VERDICT_NOT_APPLIED,
                       "arguments dump: %s = %.60s, but true was requested", k, dumped);
            break;
        default:
            pk_verdict(out, k, MT_VERDICT_UNKNOWN, "no arguments dump entry for %s", k);
        }
    }
    return 0;
}

MT_PLUGIN_EXPORT const mt_plugin_v1 moetune_plugin_v1 = {
    .struct_size = sizeof(mt_plugin_v1),
    .abi_version = MT_PLUGIN_ABI_VERSION,
    .name = "overlap",
    .version = "1.0.0",
    .description = "communication overlap: EP all-to-all overlap, delayed wgrad, shared-expert "
                   "overlap, grad-reduce/param-gather overlap, TP comm overlap, distributed "
                   "optimizer",
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
