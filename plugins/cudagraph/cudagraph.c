/*
 * cudagraph.c - the CUDA graph plugin.
 *
 * Owns the CUDA graph implementation (local, Transformer Engine, full
 * iteration), the modules a partial graph captures, and the warm-up steps
 * before capture.  Graphs remove kernel-launch gaps, so they attack the
 * host/launch wall, and only where shapes are static: dropless MoE routing
 * changes the expert token counts every step, so anything that captures the
 * experts needs drop-and-pad, or forced balancing for a benchmark.
 *
 * Legality follows shared/facts/megatron.md and Megatron-Core's CUDA graph
 * checks.
 */
#include "pluginkit.h"

#include <stdlib.h>

static const char *const impls[] = {"none", "local", "transformer_engine", "full_iteration", NULL};
static const char *const modules[] = {"attn", "mlp", "moe", "moe_router", "moe_preprocess", NULL};

static const mt_knob_v1 knobs[] = {
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_ENUM, "cuda_graph_impl", impls, "none",
     "who captures CUDA graphs: Megatron (local), Transformer Engine, or the whole iteration"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_LIST, "cuda_graph_modules", modules, "",
     "parts of each layer captured; empty = whole layers"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_INT, "cuda_graph_warmup_steps", NULL, "3",
     "eager iterations before capture"},
};

static const mt_variable_v1 variables[] = {
    {sizeof(mt_variable_v1), "cudagraph", "cuda_graph_impl cuda_graph_modules", MT_WALL_HOST},
};

static const char *impl(const mt_ctx_v1 *ctx)
{
    return pk_str(ctx->config, "cuda_graph_impl", "none");
}

static const char *scope(const mt_ctx_v1 *ctx)
{
    return pk_str(ctx->config, "cuda_graph_modules", "");
}

/* local and transformer_engine capture per layer; full_iteration captures
 * forward and backward of the whole step. */
static int layer_graphs(const mt_ctx_v1 *ctx)
{
    return pk_eq(ctx->config, "cuda_graph_impl", "local") ||
           pk_eq(ctx->config, "cuda_graph_impl", "transformer_engine");
}

static int is_moe(const mt_ctx_v1 *ctx)
{
    long n = pk_int(ctx->config, "num_experts", -1);
    return (n >= 0 ? n : pk_int(ctx->model, "num_experts", 0)) > 0;
}

/* Expert inputs have static shapes: the contract measures drop-and-pad, or
 * the config sets a capacity factor and pads to it. */
static int drop_and_pad(const mt_ctx_v1 *ctx)
{
    const char *cf = pk_str(ctx->config, "moe_expert_capacity_factor", "");
    if (pk_eq(ctx->contract, "drop_and_pad", "true"))
        return 1;
    return *cf && strtod(cf, NULL) > 0 && pk_bool(ctx->config, "moe_pad_expert_input_to_capacity");
}

/* The experts are inside the graph: the moe module, or whole layers. */
static int captures_experts(const mt_ctx_v1 *ctx, const char *impl_value, const char *mods)
{
    if (!is_moe(ctx))
        return 0;
    if (pk_word_in(mods, "moe"))
        return 1;
    return !*mods && (!strcmp(impl_value, "local") || !strcmp(impl_value, "transformer_engine"));
}

static int check(void *state, const mt_ctx_v1 *ctx, mt_sink *out)
{
    const char *im = impl(ctx), *mods = scope(ctx);
    long warmup = pk_int(ctx->config, "cuda_graph_warmup_steps", 3);
    /* The module rules hold for per-layer graphs only: with graphs off
     * Megatron never reads the list (modules_need_impl says so), and
     * full_iteration takes none (full_iteration_takes_no_modules). */
    int lg = layer_graphs(ctx);
    (void)state;

    if (lg && pk_word_in(mods, "moe") && pk_word_in(mods, "moe_router"))
        pk_violation(out, "cudagraph.moe_and_moe_router_exclusive", "cuda_graph_modules",
                     "cuda_graph_modules \"%s\" holds both moe and moe_router; moe already "
                     "captures the router, keep one",
                     mods);
    if (lg && pk_word_in(mods, "moe_preprocess") && !pk_word_in(mods, "moe_router"))
        pk_violation(out, "cudagraph.moe_preprocess_needs_moe_router", "cuda_graph_modules",
                     "cuda_graph_modules \"%s\" holds moe_preprocess without moe_router; add "
                     "moe_router",
                     mods);
    if (lg && captures_experts(ctx, im, mods) && !drop_and_pad(ctx))
        pk_violation(out, "cudagraph.moe_scope_needs_drop_and_pad",
                     "cuda_graph_modules cuda_graph_impl moe_expert_capacity_factor "
                     "moe_pad_expert_input_to_capacity",
                     "%s captures the experts, whose shapes change every step without "
                     "drop-and-pad (capacity factor %s, pad to capacity %s); capture "
                     "moe_router moe_preprocess instead, or set a capacity factor with padding",
                     *mods ? "cuda_graph_modules moe"
                           : "an empty cuda_graph_modules (whole layers)",
                     *pk_str(ctx->config, "moe_expert_capacity_factor", "")
                         ? pk_str(ctx->config, "moe_expert_capacity_factor", "")
                         : "unset",
                     pk_str(ctx->config, "moe_pad_expert_input_to_capacity", "false"));
    if (layer_graphs(ctx) && pk_eq(ctx->config, "recompute_granularity", "full"))
        pk_violation(out, "cudagraph.full_recompute_needs_full_iteration",
                     "cuda_graph_impl recompute_granularity",
                     "cuda_graph_impl %s cannot capture layers under full recompute; use "
                     "full_iteration graphs, selective recompute, or no graphs",
                     im);
    if (!strcmp(im, "full_iteration") && *mods)
        pk_violation(out, "cudagraph.full_iteration_takes_no_modules",
                     "cuda_graph_modules cuda_graph_impl",
                     "cuda_graph_impl full_iteration captures the whole step and takes no module "
                     "list, but cuda_graph_modules is \"%s\"; clear it",
                     mods);
    if (!strcmp(im, "none") && *mods)
        pk_violation(out, "cudagraph.modules_need_impl", "cuda_graph_modules cuda_graph_impl",
                     "cuda_graph_modules \"%s\" needs cuda_graph_impl local or "
                     "transformer_engine, but it is none; set one or clear the modules",
                     mods);
    if (strcmp(im, "none") && warmup < 1)
        pk_violation(out, "cudagraph.warmup_steps_min", "cuda_graph_warmup_steps cuda_graph_impl",
                     "cuda_graph_warmup_steps is %ld; capture needs at least 1 eager step "
                     "first (default 3)",
                     warmup);
    /* Whole-step graphs of a dropless MoE only run with balanced routing,
     * which makes the result benchmark-only. */
    if (!strcmp(im, "full_iteration") && is_moe(ctx) && !drop_and_pad(ctx) &&
        !pk_has(ctx->contract, "labels", "benchmark_only"))
        pk_violation(out, "cudagraph.full_iteration_needs_static_shapes", "cuda_graph_impl",
                     "full_iteration graphs need static expert shapes (drop-and-pad), which this "
                     "contract does not measure, and its labels (\"%s\") exclude benchmark-only "
                     "results; use transformer_engine with moe_router moe_preprocess",
                     pk_str(ctx->contract, "labels", ""));
    return 0;
}

static void note_memory(const mt_ctx_v1 *ctx, mt_sink *out)
{
    if (pk_int(ctx->config, "pipeline_model_parallel_size", 1) > 1)
        pk_note(out, "graphs cost memory: more than 10 GB per GPU with PP > 1 (calibration H); "
                     "the memory gate decides");
}

/* A per-layer Transformer Engine scope, unless it is the current one, illegal
 * here, or outside the contract's space. */
static void propose_te(const mt_ctx_v1 *ctx, mt_sink *out, const char *mods, const char *summary,
                       const char *why)
{
    const char *te = "transformer_engine";
    if (pk_eq(ctx->config, "cuda_graph_impl", te) && !strcmp(scope(ctx), mods))
        return;
    if (pk_eq(ctx->config, "recompute_granularity", "full") ||
        (captures_experts(ctx, te, mods) && !drop_and_pad(ctx)))
        return;
    if (!pk_space_allows(ctx, "cuda_graph_impl", te) ||
        !pk_space_allows(ctx, "cuda_graph_modules", mods))
        return;
    pk_host->sink_candidate(out, "cudagraph", summary, MT_WALL_HOST, MT_LABEL_TRAINING_EQUIVALENT);
    if (strcmp(impl(ctx), te))
        pk_host->sink_set(out, "cuda_graph_impl", te);
    if (strcmp(scope(ctx), mods))
        pk_host->sink_set(out, "cuda_graph_modules", mods);
    pk_note(out, "%s", why);
    note_memory(ctx, out);
}

static void propose_full_iteration(const mt_ctx_v1 *ctx, mt_sink *out)
{
    uint32_t label = MT_LABEL_TRAINING_EQUIVALENT;
    /* The module list is cleared because full_iteration takes none, whatever
     * the space lists for it. */
    if (pk_eq(ctx->config, "cuda_graph_impl", "full_iteration") ||
        !pk_space_allows(ctx, "cuda_graph_impl", "full_iteration"))
        return;
    if (is_moe(ctx) && !drop_and_pad(ctx)) {
        if (!pk_has(ctx->contract, "labels", "benchmark_only"))
            return;
        label = MT_LABEL_BENCHMARK_ONLY;
    }
    pk_host->sink_candidate(out, "cudagraph",
                            label == MT_LABEL_BENCHMARK_ONLY
                                ? "full-iteration CUDA graph (benchmark-only)"
                                : "full-iteration CUDA graph",
                            MT_WALL_HOST, label);
    pk_host->sink_set(out, "cuda_graph_impl", "full_iteration");
    if (*scope(ctx))
        pk_host->sink_set(out, "cuda_graph_modules", "");
    pk_note(out, "one graph for forward and backward removes every launch gap of the step "
                 "(the Blackwell records of calibration G use it)");
    if (label == MT_LABEL_BENCHMARK_ONLY)
        pk_note(out, "full-iteration graphs need static shapes, i.e. drop-and-pad; this "
                     "contract measures dropless routing, so the result is benchmark-only");
    note_memory(ctx, out);
}

static int propose(void *state, const mt_ctx_v1 *ctx, mt_sink *out)
{
    const char *wall = pk_str(ctx->evidence, "wall", "");
    (void)state;

    /* A graph win measured before a dispatcher or precision change can
     * vanish; once the profile says the host is no longer the wall, removing
     * the graphs (and their memory) is the first thing to try. */
    if (strcmp(impl(ctx), "none") && *wall && strncmp(wall, "host", 4) &&
        pk_space_allows(ctx, "cuda_graph_impl", "none")) {
        pk_host->sink_candidate(out, "cudagraph", "CUDA graphs off (graph wins can vanish)",
                                MT_WALL_HOST | MT_WALL_MEMORY, MT_LABEL_TRAINING_EQUIVALENT);
        pk_host->sink_set(out, "cuda_graph_impl", "none");
        if (*scope(ctx))
            pk_host->sink_set(out, "cuda_graph_modules", "");
        pk_note(out, "the profiled wall is %s, not host/launch: graphs may no longer pay for "
                     "their memory",
                wall);
    }

    if (is_moe(ctx)) {
        propose_te(ctx, out, "moe_router moe_preprocess",
                   "TE CUDA graphs on moe_router + moe_preprocess",
                   "captures the static part of each MoE layer (router, EP preprocess, shared "
                   "expert) and leaves the dynamic dispatch eager");
        propose_te(ctx, out, "attn moe_router moe_preprocess",
                   "TE CUDA graphs on attn + moe_router + moe_preprocess",
                   "adds attention to the captured scope (calibration B: 214 -> 274 TF on "
                   "16 x H100; calibration C: 611 -> 663 TF on 256 x GB200)");
        if (drop_and_pad(ctx))
            propose_te(ctx, out, "attn moe", "TE CUDA graphs on attn + moe",
                       "drop-and-pad gives the experts static shapes, so the whole MoE layer "
                       "can be captured");
    } else {
        propose_te(ctx, out, "attn mlp", "TE CUDA graphs on attn + mlp",
                   "captures attention and the dense MLP of each layer");
    }
    propose_full_iteration(ctx, out);
    return 0;
}

static int repair(void *state, const mt_ctx_v1 *ctx, mt_sink *out)
{
    (void)state;
    if (layer_graphs(ctx) && pk_eq(ctx->config, "recompute_granularity", "full") &&
        !pk_get(ctx->changed, "cuda_graph_impl")) {
        pk_host->sink_set(out, "cuda_graph_impl", "none");
        if (*scope(ctx) && !pk_get(ctx->changed, "cuda_graph_modules"))
            pk_host->sink_set(out, "cuda_graph_modules", "");
        pk_note(out, "CUDA graphs turned off: per-layer graphs (%s) cannot capture layers "
                     "under full recompute, which is now on",
                impl(ctx));
    }
    return 0;
}

static int render(void *state, const mt_ctx_v1 *ctx, uint32_t d, mt_sink *out)
{
    const char *im = impl(ctx), *mods = scope(ctx);
    (void)state;

    if (!strcmp(im, "none"))
        return 0;
    pk_render(out, d, "cuda_graph_impl", "model", NULL, im);
    if (*mods) {
        if (d == MT_DIALECT_BRIDGE && !strchr(mods, ' ')) {
            /* pk_render writes a Python list only for several words. */
            char buf[128];
            snprintf(buf, sizeof buf, "model.cuda_graph_scope=[%s]", mods);
            pk_host->sink_arg(out, buf);
        } else {
            pk_render(out, d, "cuda_graph_modules", "model", "cuda_graph_scope", mods);
        }
    }
    if (pk_int(ctx->config, "cuda_graph_warmup_steps", 3) != 3)
        pk_render(out, d, "cuda_graph_warmup_steps", "model", NULL,
                  pk_str(ctx->config, "cuda_graph_warmup_steps", "3"));
    return 0;
}

/* The arguments dump under `arg` against the config's `knob`: 1 same, 0
 * different, -1 absent. */
static int args_match(const mt_ctx_v1 *ctx, const char *knob, const char *arg,
                      const char **dumped)
{
    return pk_args_match(ctx, arg, pk_str(ctx->config, knob, ""), dumped);
}

/* The run left a log behind: an arguments dump or a parsed log line. */
static int have_log(const mt_ctx_v1 *ctx)
{
    const char *k, *v;
    size_t i;
    for (i = 0; ctx->evidence && pk_host->kv_entry(ctx->evidence, i, &k, &v) == 0; i++)
        if (!strncmp(k, "args.", 5) || !strncmp(k, "log.", 4))
            return 1;
    return 0;
}

/* Capture is not enough: a graph can be captured and never replayed.  Only
 * graph launches in a trace prove replay. */
static uint32_t graph_verdict(const mt_ctx_v1 *ctx, char *text, size_t n)
{
    const char *capture = pk_get(ctx->evidence, "log.cuda_graph_capture");
    long launches = pk_int(ctx->evidence, "trace.graph_launches", 0);
    int traced = pk_eq(ctx->evidence, "trace.available", "true");

    if (launches > 0 && pk_get(ctx->evidence, "trace.graph_last_step")) {
        /* placed against the steps: replays come after the capture step
         * (warm-up + 1) and stand in for the scope's kernel launches */
        long capture_step = pk_int(ctx->config, "cuda_graph_warmup_steps", 3) + 1;
        long last = pk_int(ctx->evidence, "trace.graph_last_step", 0);
        const char *g = pk_get(ctx->evidence, "trace.launches_per_graph_step");
        const char *e = pk_get(ctx->evidence, "trace.launches_per_eager_step");
        if (last <= capture_step) {
            snprintf(text, n,
                     "graph launches only up to step %ld, none after the capture step %ld: "
                     "nothing was replayed",
                     last, capture_step);
            return MT_VERDICT_NOT_APPLIED;
        }
        if (g && e && strtod(g, NULL) >= strtod(e, NULL)) {
            snprintf(text, n,
                     "graph launches after the capture step, but steps with graphs still make "
                     "%s kernel launches (eager steps %s): the scope's kernels are not in them",
                     g, e);
            return MT_VERDICT_NOT_APPLIED;
        }
        snprintf(text, n,
                 "replayed: %ld graph launches, steps %s to %ld after the capture step %ld, "
                 "%s kernel launches per replayed step%s%s%s",
                 launches, pk_get(ctx->evidence, "trace.graph_first_step"), last, capture_step,
                 g ? g : "?", e ? " (eager steps " : "", e ? e : "", e ? ")" : "");
        return MT_VERDICT_APPLIED;
    }
    if (launches > 0) {
        snprintf(text, n, "trace.graph_launches = %ld: captured graphs were replayed%s%.200s%s",
                 launches, capture ? " (log.cuda_graph_capture: \"" : "", capture ? capture : "",
                 capture ? "\")" : "");
        return MT_VERDICT_APPLIED;
    }
    if (capture && traced) {
        snprintf(text, n,
                 "captured but never replayed: log.cuda_graph_capture \"%.200s\", "
                 "trace.graph_launches = 0",
                 capture);
        return MT_VERDICT_NOT_APPLIED;
    }
    if (capture) {
        snprintf(text, n,
                 "captured (log.cuda_graph_capture: \"%.200s\"); replay needs a profiled run",
                 capture);
        return MT_VERDICT_UNKNOWN;
    }
    if (traced) {
        snprintf(text, n, "no capture line and trace.graph_launches = 0 in the profiled run");
        return MT_VERDICT_NOT_APPLIED;
    }
    if (have_log(ctx)) {
        snprintf(text, n,
                 "no CUDA graph capture line in the log (capture prints \"Start CUDA Graphs "
                 "capture...\", \"Creating <n> CUDA graphs\" or \"Capture CUDA graph for "
                 "training!!!\" after the warm-up steps)");
        return MT_VERDICT_NOT_APPLIED;
    }
    snprintf(text, n, "no log or trace for this run");
    return MT_VERDICT_UNKNOWN;
}

static int verify(void *state, const mt_ctx_v1 *ctx, mt_sink *out)
{
    const char *dumped;
    char text[512];
    uint32_t v;
    int m;
    (void)state;

    if (strcmp(impl(ctx), "none")) {
        v = graph_verdict(ctx, text, sizeof text);
        if (args_match(ctx, "cuda_graph_impl", "cuda_graph_impl", &dumped) == 0)
            pk_verdict(out, "cuda_graph_impl", MT_VERDICT_NOT_APPLIED,
                       "arguments dump: cuda_graph_impl = %.60s", dumped);
        else
            pk_verdict(out, "cuda_graph_impl", v, "%s", text);

        if (*scope(ctx)) {
            /* Older stacks dump the list as cuda_graph_scope. */
            m = args_match(ctx, "cuda_graph_modules", "cuda_graph_modules", &dumped);
            if (m < 0)
                m = args_match(ctx, "cuda_graph_modules", "cuda_graph_scope", &dumped);
            if (m == 0)
                pk_verdict(out, "cuda_graph_modules", MT_VERDICT_NOT_APPLIED,
                           "arguments dump: cuda graph modules = %.100s", dumped);
            else
                pk_verdict(out, "cuda_graph_modules", v, "%s", text);
        }
    }
    if (pk_int(ctx->config, "cuda_graph_warmup_steps", 3) != 3) {
        switch (args_match(ctx, "cuda_graph_warmup_steps", "cuda_graph_warmup_steps", &dumped)) {
        case 1:
            pk_verdict(out, "cuda_graph_warmup_steps", MT_VERDICT_APPLIED,
                       "arguments dump: cuda_graph_warmup_steps = %.20s (read at startup)",
                       dumped);
            break;
        case 0:
            pk_verdict(out, "cuda_graph_warmup_steps", MT_VERDICT_NOT_APPLIED,
                       "arguments dump: cuda_graph_warmup_steps = %.20s, but %s was requested",
                       dumped, pk_str(ctx->config, "cuda_graph_warmup_steps", ""));
            break;
        default:
            pk_verdict(out, "cuda_graph_warmup_steps", MT_VERDICT_UNKNOWN,
                       "no arguments dump entry for cuda_graph_warmup_steps");
        }
    }
    return 0;
}

MT_PLUGIN_EXPORT const mt_plugin_v1 moetune_plugin_v1 = {
    .struct_size = sizeof(mt_plugin_v1),
    .abi_version = MT_PLUGIN_ABI_VERSION,
    .name = "cudagraph",
    .version = "1.0.0",
    .description = "CUDA graphs: implementation (local, Transformer Engine, full iteration), "
                   "captured modules, warm-up steps",
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
