/*
 * dispatcher.c - the MoE token dispatcher plugin.
 *
 * Owns how routed tokens travel to their experts and the kernels around that
 * trip: the dispatcher type and flex backend, the flex backend's SM budget,
 * permute fusion, grouped GEMM, and forced load balancing (benchmark-only).
 *
 * Legality follows shared/facts/megatron.md and Megatron-Core's
 * TransformerConfig checks.  Which flex backend runs on which GPU is this
 * plugin's own rule (backend_support below), because the framework does not
 * reject an unsupported backend: it silently falls back to alltoall, so
 * running one would measure alltoall under a flex label.
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
     flex_backends, "none", "communication library behind the flex dispatcher"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_INT, "moe_flex_dispatcher_num_sms", NULL, "0",
     "SMs the flex backend's dispatch/combine kernels may use; 0 = the backend's default"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_BOOL, "moe_permute_fusion", NULL, "false",
     "fused token permute/unpermute kernels"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_BOOL, "moe_grouped_gemm", NULL, "false",
     "one grouped GEMM for all local experts instead of one GEMM per expert"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_BOOL, "moe_router_force_load_balancing", NULL,
     "false", "random balanced routing; results with it are benchmark-only"},
};

/* The SM budget belongs to "dispatcher" too: leaving flex must clear it, or
 * the alltoall control would be illegal (num_sms only with flex). */
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
 * B200 nodes; NCCL EP wherever NCCL runs (it needs more than one rank, checked
 * apart).  SM counts bound moe_flex_dispatcher_num_sms when the hardware view
 * has no "sms". */
static const struct backend_support {
    const char *gpu;
    const char *backends; /* space-separated */
    long sms;
} backend_support[] = {
    {"H100", "deepep hybridep ncclep", 132},  {"H200", "deepep hybridep ncclep", 132},
    {"B200", "deepep ncclep", 148},           {"GB200", "deepep hybridep ncclep", 152},
    {"GB300", "deepep hybridep ncclep", 160},
};

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

static long world_size(const mt_ctx_v1 *ctx)
{
    return pk_int(ctx->hardware, "world_size",
                  pk_int(ctx->hardware, "gpus_per_node", 1) * pk_int(ctx->hardware, "nodes", 1));
}

/* The flex dispatcher communicates over the expert-TP x EP group and asserts
 * that group is larger than one rank; expert TP defaults to TP when unset. */
static long flex_group(const mt_ctx_v1 *ctx)
{
    long ep = pk_int(ctx->config, "expert_model_parallel_size", 1);
    long etp = pk_int(ctx->config, "expert_tensor_parallel_size", 0);
    if (etp <= 0)
        etp = pk_int(ctx->config, "tensor_model_parallel_size", 1);
    return ep * etp;
}

static int benchmark_only_allowed(const mt_ctx_v1 *ctx)
{
    return pk_has(ctx->contract, "labels", "benchmark_only");
}

/* A backend this plugin answers for; "none" and extension values are not. */
static int own_backend(const char *backend)
{
    return strcmp(backend, "none") && pk_value_in(flex_backends, backend);
}

static int check(void *state, const mt_ctx_v1 *ctx, mt_sink *out)
{
    const char *type = cfg(ctx, "moe_token_dispatcher_type");
    const char *backend = cfg(ctx, "moe_flex_dispatcher_backend");
    long sms = pk_int(ctx->config, "moe_flex_dispatcher_num_sms", 0);
    long max_sms = gpu_sms(ctx);
    long experts = num_experts(ctx);
    int flex = !strcmp(type, "flex");
    (void)state;

    if (experts <= 0) {
        if (strcmp(type, "allgather") || strcmp(backend, "none") || sms > 0 ||
            pk_bool(ctx->config, "moe_permute_fusion") ||
            pk_bool(ctx->config, "moe_router_force_load_balancing"))
            pk_violation(out, "dispatcher.moe_flags_need_experts",
                         "moe_token_dispatcher_type moe_flex_dispatcher_backend "
                         "moe_flex_dispatcher_num_sms moe_permute_fusion "
                         "moe_router_force_load_balancing num_experts",
                         "MoE dispatcher settings need a MoE model: num_experts is %ld; "
                         "leave the dispatcher knobs at their defaults for a dense model",
                         experts);
        if (pk_bool(ctx->config, "moe_grouped_gemm"))
            pk_violation(out, "dispatcher.grouped_gemm_needs_experts",
                         "moe_grouped_gemm num_experts",
                         "--moe-grouped-gemm needs experts: num_experts is %ld; turn it off",
                         experts);
    }

    if (own_backend(backend) && !flex)
        pk_violation(out, "dispatcher.backend_needs_flex",
                     "moe_flex_dispatcher_backend moe_token_dispatcher_type",
                     "--moe-flex-dispatcher-backend %s only works with the flex dispatcher, "
                     "but moe_token_dispatcher_type is %s; set the type to flex or the backend "
                     "to none",
                     backend, type);
    if (flex && !strcmp(backend, "none"))
        pk_violation(out, "dispatcher.flex_needs_backend",
                     "moe_flex_dispatcher_backend moe_token_dispatcher_type",
                     "the flex dispatcher needs a backend, but moe_flex_dispatcher_backend is "
                     "none; choose deepep, hybridep or ncclep, or use alltoall");
    if (flex && flex_group(ctx) <= 1)
        pk_violation(out, "dispatcher.flex_needs_ep",
                     "moe_token_dispatcher_type expert_model_parallel_size "
                     "expert_tensor_parallel_size",
                     "the flex dispatcher needs expert parallelism: expert_model_parallel_size "
                     "%ld x expert_tensor_parallel_size gives a group of %ld rank; set EP > 1 "
                     "or use alltoall",
                     pk_int(ctx->config, "expert_model_parallel_size", 1), flex_group(ctx));
    if (flex && pk_bool(ctx->config, "moe_pad_expert_input_to_capacity"))
        pk_violation(out, "dispatcher.flex_no_pad_to_capacity",
                     "moe_token_dispatcher_type moe_pad_expert_input_to_capacity",
                     "the flex dispatcher is dropless and rejects "
                     "moe_pad_expert_input_to_capacity = true; use alltoall for drop-and-pad");
    /* Megatron pads expert inputs only up to a capacity (TransformerConfig). */
    if (pk_bool(ctx->config, "moe_pad_expert_input_to_capacity") &&
        !(strtod(cfg(ctx, "moe_expert_capacity_factor"), NULL) > 0))
        pk_violation(out, "dispatcher.pad_needs_capacity_factor",
                     "moe_pad_expert_input_to_capacity moe_expert_capacity_factor",
                     "moe_pad_expert_input_to_capacity needs moe_expert_capacity_factor (Megatron "
                     "raises when it is unset); set a capacity factor or turn padding off");
    /* The router picks moe_router_topk of num_experts experts per token. */
    if (experts > 0 && pk_int(ctx->config, "moe_router_topk", 2) > experts)
        pk_violation(out, "dispatcher.topk_exceeds_experts", "moe_router_topk num_experts",
                     "moe_router_topk %ld exceeds num_experts %ld; the router cannot pick more "
                     "experts than there are",
                     pk_int(ctx->config, "moe_router_topk", 2), experts);
    if (flex && own_backend(backend) && backend_supported(ctx, backend) == 0)
        pk_violation(out, "dispatcher.backend_unsupported_gpu",
                     "moe_flex_dispatcher_backend moe_token_dispatcher_type",
                     "%s does not run on %s (the run would silently fall back to alltoall); "
                     "choose %s or use alltoall",
                     backend_title(backend), pk_str(ctx->hardware, "gpu", "?"),
                     gpu_support(ctx)->backends);
    if (!strcmp(backend, "ncclep") && world_size(ctx) <= 1)
        pk_violation(out, "dispatcher.ncclep_needs_multi_gpu",
                     "moe_flex_dispatcher_backend moe_token_dispatcher_type",
                     "the ncclep backend needs more than one GPU, but world_size is %ld; "
                     "choose another backend",
                     world_size(ctx));

    if (sms > 0 && !flex)
        pk_violation(out, "dispatcher.num_sms_needs_flex",
                     "moe_flex_dispatcher_num_sms moe_token_dispatcher_type",
                     "--moe-flex-dispatcher-num-sms %ld only applies to the flex dispatcher, "
                     "but moe_token_dispatcher_type is %s; set it to 0",
                     sms, type);
    if (sms > 0 && sms % 2)
        pk_violation(out, "dispatcher.num_sms_even", "moe_flex_dispatcher_num_sms",
                     "--moe-flex-dispatcher-num-sms must be even (the kernels pair SMs per "
                     "channel), got %ld; use %ld",
                     sms, sms + 1);
    if (sms > 0 && max_sms > 0 && sms > max_sms)
        pk_violation(out, "dispatcher.num_sms_range", "moe_flex_dispatcher_num_sms",
                     "--moe-flex-dispatcher-num-sms %ld exceeds the %ld SMs of one %s; use an "
                     "even value in 2..%ld",
                     sms, max_sms, pk_str(ctx->hardware, "gpu", "?"), max_sms - max_sms % 2);

    if (!pk_bool(ctx->config, "moe_grouped_gemm") &&
        pk_has(ctx->config, "recompute_modules", "moe_act") &&
        pk_eq(ctx->config, "recompute_granularity", "selective"))
        pk_violation(out, "dispatcher.moe_act_needs_grouped_gemm",
                     "moe_grouped_gemm recompute_modules",
                     "recompute_modules includes moe_act, which needs --moe-grouped-gemm; "
                     "turn grouped GEMM on or drop moe_act");

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

/* flex with `backend`: legal here and inside the contract's space? */
static int flex_possible(const mt_ctx_v1 *ctx, const char *backend)
{
    return pk_space_allows(ctx, "moe_token_dispatcher_type", "flex") &&
           pk_space_allows(ctx, "moe_flex_dispatcher_backend", backend) &&
           backend_supported(ctx, backend) == 1 && flex_group(ctx) > 1 &&
           !pk_bool(ctx->config, "moe_pad_expert_input_to_capacity") &&
           (strcmp(backend, "ncclep") || world_size(ctx) > 1);
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
                     "(+7%% on DeepSeek-V3 GB200); with HybridEP the permute fuses into the "
                     "dispatch itself");
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
    const char *backend = cfg(ctx, "moe_flex_dispatcher_backend");
    (void)state;

    /* Another plugin shrank the expert group or asked for padding: flex can no
     * longer run, and alltoall is what the stack would fall back to anyway. */
    if (!strcmp(type, "flex") && !pk_get(ctx->changed, "moe_token_dispatcher_type") &&
        (flex_group(ctx) <= 1 || pk_bool(ctx->config, "moe_pad_expert_input_to_capacity"))) {
        pk_host->sink_set(out, "moe_token_dispatcher_type", "alltoall");
        if (strcmp(backend, "none"))
            pk_host->sink_set(out, "moe_flex_dispatcher_backend", "none");
        if (pk_int(ctx->config, "moe_flex_dispatcher_num_sms", 0) > 0)
            pk_host->sink_set(out, "moe_flex_dispatcher_num_sms", "0");
        pk_note(out, "dispatcher switched from flex to alltoall: %s",
                flex_group(ctx) <= 1
                    ? "flex needs an expert group of more than one rank and EP x ETP is now 1"
                    : "flex rejects moe_pad_expert_input_to_capacity, which is now on");
    }
    if (!pk_bool(ctx->config, "moe_grouped_gemm") && !pk_get(ctx->changed, "moe_grouped_gemm") &&
        num_experts(ctx) > 0 && pk_has(ctx->config, "recompute_modules", "moe_act") &&
        pk_eq(ctx->config, "recompute_granularity", "selective")) {
        pk_host->sink_set(out, "moe_grouped_gemm", "true");
        pk_note(out, "grouped GEMM turned on: recompute of moe_act needs it");
    }
    return 0;
}

static int render(void *state, const mt_ctx_v1 *ctx, uint32_t d, mt_sink *out)
{
    const char *type = cfg(ctx, "moe_token_dispatcher_type");
    const char *backend = cfg(ctx, "moe_flex_dispatcher_backend");
    const char *sms = cfg(ctx, "moe_flex_dispatcher_num_sms");
    (void)state;

    /* Always explicit: Megatron-LM and Bridge recipes disagree on the default,
     * and the golden command lines carry it. */
    pk_render(out, d, "moe_token_dispatcher_type", "model", NULL, type);
    if (!strcmp(type, "flex") && own_backend(backend))
        pk_render(out, d, "moe_flex_dispatcher_backend", "model", NULL, backend);
    if (pk_int(ctx->config, "moe_flex_dispatcher_num_sms", 0) > 0)
        pk_render(out, d, "moe_flex_dispatcher_num_sms", "model", NULL, sms);
    if (pk_bool(ctx->config, "moe_permute_fusion"))
        pk_render_bool(out, d, "moe_permute_fusion", "model", NULL, 1);
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
        int m = args_match(ctx, "moe_flex_dispatcher_num_sms", want, &dumped);
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
