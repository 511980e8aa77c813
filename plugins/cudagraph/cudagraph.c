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

#include <ctype.h>
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
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_BOOL, "check_for_nan_in_loss_and_grad", NULL,
     "true", "Megatron's NaN check of loss and gradients; full_iteration graphs need it off"},
};

static const mt_variable_v1 variables[] = {
    {sizeof(mt_variable_v1), "cudagraph",
     "cuda_graph_impl cuda_graph_modules check_for_nan_in_loss_and_grad", MT_WALL_HOST},
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

/* Whole layers of a MoE model inside per-layer graphs. */
static int captures_experts(const mt_ctx_v1 *ctx, const char *impl_value, const char *mods)
{
    if (!is_moe(ctx))
        return 0;
    if (pk_word_in(mods, "moe"))
        return 1;
    return !*mods && (!strcmp(impl_value, "local") || !strcmp(impl_value, "transformer_engine"));
}

/* r0.15 spells the module list as one --cuda-graph-scope value (full =
 * whole layers, attn) and full_iteration as a scope of local graphs. */
static int r015_expressible(const char *im, const char *mods)
{
    if (!*mods)
        return 1;
    return !strcmp(mods, "attn") && strcmp(im, "full_iteration");
}

/* ------------------------------------------------------------------------ */
/* Start-up rules: Megatron-LM's own CUDA graph checks (parse_args,          */
/* validate_args, TransformerConfig), over the parsed namespace.             */

#define CG_LIST 512

/* Appends word to a space-separated list. */
static void cg_add(char *list, size_t n, const char *word, size_t len)
{
    size_t o = strlen(list);
    if (o + len + 2 < n) {
        if (o)
            list[o++] = ' ';
        memcpy(list + o, word, len);
        list[o + len] = '\0';
    }
}

/* Copies the next word of *p into w (n bytes); 0 at the end of the list. */
static size_t cg_word(const char **p, char *w, size_t n)
{
    size_t len;
    while (**p == ' ')
        (*p)++;
    len = strcspn(*p, " ");
    if (!len)
        return 0;
    snprintf(w, n, "%.*s", (int)len, *p);
    *p += len;
    return len;
}

static int cg_count(const char *list, const char *word)
{
    char w[64];
    const char *p = list ? list : "";
    int n = 0;
    while (cg_word(&p, w, sizeof w))
        n += !strcmp(w, word);
    return n;
}

static int cg_len(const char *list)
{
    char w[64];
    const char *p = list ? list : "";
    int n = 0;
    while (cg_word(&p, w, sizeof w))
        n++;
    return n;
}

static int cg_is_zero(const char *v)
{
    return v && !strcmp(v, "0");
}

static int cg_strcmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* sorted(set(list) - keep) as Python prints it ("['a', 'b']"); returns the
 * number of names. */
static int cg_sorted_minus(const char *list, const char *const *keep, char *out, size_t n)
{
    char words[32][64];
    const char *v[32];
    const char *p = list ? list : "";
    int k = 0, i, j;
    size_t o;
    while (k < 32 && cg_word(&p, words[k], sizeof words[k])) {
        for (j = 0; j < k && strcmp(words[j], words[k]); j++)
            ;
        if (j == k && !pk_value_in(keep, words[k]))
            k++;
    }
    for (i = 0; i < k; i++)
        v[i] = words[i];
    qsort(v, (size_t)k, sizeof v[0], cg_strcmp);
    o = (size_t)snprintf(out, n, "[");
    for (i = 0; i < k && o < n; i++)
        o += (size_t)snprintf(out + o, n - o, "%s'%s'", i ? ", " : "", v[i]);
    if (o < n)
        snprintf(out + o, n - o, "]");
    return k;
}

/* Recompute as TransformerConfig sees it when the graph checks run: the
 * granularity after --recompute-activations and --moe-layer-recompute, the
 * module list after its core_attn default and the appended moe. */
typedef struct cg_recompute {
    char gran[16]; /* "" = None */
    char modules[CG_LIST];
} cg_recompute;

static void cg_recompute_read(const mt_ctx_v1 *ctx, cg_recompute *r)
{
    const char *g = pk_arg(ctx, "recompute_granularity");
    const char *m = pk_arg(ctx, "recompute_modules");
    snprintf(r->gran, sizeof r->gran, "%s", g ? g : "");
    snprintf(r->modules, sizeof r->modules, "%s", m ? m : "core_attn");
    if (pk_arg_on(ctx, "moe_layer_recompute") && strcmp(r->gran, "full")) {
        snprintf(r->gran, sizeof r->gran, "selective");
        if (!pk_word_in(r->modules, "moe"))
            cg_add(r->modules, sizeof r->modules, "moe", 3);
    }
}

/* Whether an evaluated --moe-layer-freq pattern holds a 0, from the
 * grammar the pattern check admits: integers, [a, b, ...], (...), + and *.
 * Returns 1 with *zero and *list set, 0 when the text is not such a value. */
typedef struct cg_freq {
    const char *p;
    int ok;
} cg_freq;

typedef struct cg_val {
    int is_list, zero, n; /* n: elements (lists) */
    long v;               /* the integer */
} cg_val;

static cg_val cg_expr(cg_freq *f);

static cg_val cg_atom(cg_freq *f)
{
    cg_val r = {0, 0, 0, 0};
    if (*f->p == '(') {
        f->p++;
        r = cg_expr(f);
        if (*f->p != ')')
            f->ok = 0;
        else
            f->p++;
    } else if (*f->p == '[') {
        f->p++;
        r.is_list = 1;
        while (f->ok && *f->p != ']') {
            cg_val e = cg_expr(f);
            if (!f->ok)
                break;
            r.n++;
            r.zero |= e.is_list ? 0 : e.v == 0;
            if (*f->p == ',')
                f->p++;
            else if (*f->p != ']')
                f->ok = 0;
        }
        if (*f->p == ']')
            f->p++;
        else
            f->ok = 0;
    } else if (*f->p >= '0' && *f->p <= '9') {
        r.v = strtol(f->p, (char **)&f->p, 10);
    } else {
        f->ok = 0;
    }
    return r;
}

static cg_val cg_term(cg_freq *f)
{
    cg_val r = cg_atom(f);
    while (f->ok && *f->p == '*') {
        cg_val k;
        f->p++;
        k = cg_atom(f);
        if (r.is_list && !k.is_list) {
            if (k.v <= 0)
                r.n = 0, r.zero = 0;
        } else if (!r.is_list && !k.is_list) {
            r.v *= k.v;
        } else if (!r.is_list && k.is_list) {
            if (r.v <= 0)
                k.n = 0, k.zero = 0;
            r = k;
        } else {
            f->ok = 0;
        }
    }
    return r;
}

static cg_val cg_expr(cg_freq *f)
{
    cg_val r = cg_term(f);
    while (f->ok && *f->p == '+') {
        cg_val b;
        f->p++;
        b = cg_term(f);
        if (r.is_list != b.is_list)
            f->ok = 0;
        else if (r.is_list)
            r.zero |= b.zero, r.n += b.n;
        else
            r.v += b.v;
    }
    return r;
}

/* TransformerConfig's "no dense layer": moe_layer_freq == 1, or a list
 * without a 0.  -1 when the value cannot be read. */
static int cg_all_moe(const mt_ctx_v1 *ctx)
{
    const char *s = pk_arg(ctx, "moe_layer_freq");
    char buf[1024];
    size_t o = 0;
    cg_freq f;
    cg_val v;
    if (!s)
        return -1;
    for (; *s && o + 1 < sizeof buf; s++)
        if (*s != ' ')
            buf[o++] = *s;
    buf[o] = '\0';
    if (!strchr(buf, '['))
        return pk_arg_int(ctx, "moe_layer_freq", 0) == 1;
    f.p = buf;
    f.ok = 1;
    v = cg_expr(&f);
    if (!f.ok || *f.p || !v.is_list)
        return -1;
    return !v.zero;
}

/* "expandable_segments:True" in PYTORCH_CUDA_ALLOC_CONF. */
static int cg_expandable(const mt_ctx_v1 *ctx)
{
    const char *conf = pk_env(ctx, "PYTORCH_CUDA_ALLOC_CONF");
    return conf && strstr(conf, "expandable_segments:True");
}

/* fp16 with dynamic loss scaling turns the NaN check off before it is read. */
static int cg_nan_check(const mt_ctx_v1 *ctx)
{
    if (pk_arg_on(ctx, "fp16") && !pk_arg_on(ctx, "loss_scale"))
        return 0;
    return pk_arg_on(ctx, "check_for_nan_in_loss_and_grad");
}

static void cg_startup_r015(const mt_ctx_v1 *ctx, mt_sink *out, const char *im)
{
    const char *scope = pk_str(pk_args(ctx), "cuda_graph_scope", "full");
    cg_recompute rc;
    const char *stack = pk_str(ctx->contract, "stack.megatron_core", "?");

    /* arguments.py: NaN check under a full-iteration graph (local only). */
    if (!strcmp(im, "local") && !strcmp(scope, "full_iteration") &&
        !pk_arg_on(ctx, "inference_dynamic_batching") && cg_nan_check(ctx))
        pk_startup(out, "cudagraph.full_iteration_nan_check", "cuda_graph_impl",
                   "--no-check-for-nan-in-loss-and-grad should be set with full_iteration CUDA "
                   "graph (Megatron core %s); add --no-check-for-nan-in-loss-and-grad",
                   stack);
    if (strcmp(im, "none") && cg_expandable(ctx))
        pk_startup(out, "cudagraph.expandable_segments", "cuda_graph_impl",
                   "expandable_segments:True may not be safe when using CUDA Graphs with some "
                   "specific parallel settings. The training may crash with illegal memory "
                   "access. (Megatron core %s refuses it); drop expandable_segments:True from "
                   "PYTORCH_CUDA_ALLOC_CONF or turn graphs off",
                   stack);
    if (strcmp(im, "none") && pk_arg_is(ctx, "recompute_granularity", "full"))
        pk_startup(out, "cudagraph.r015_full_recompute", "cuda_graph_impl recompute_granularity",
                   "recompute_granularity must not be full when CUDA Graphs are enabled. "
                   "(Megatron core %s); use selective recompute or no graphs",
                   stack);

    /* TransformerConfig */
    if (!strcmp(im, "none"))
        return;
    cg_recompute_read(ctx, &rc);
    if (!rc.gran[0])
        return;
    if (!(!strcmp(rc.gran, "selective") && !strcmp(im, "transformer_engine") &&
          !strcmp(scope, "attn"))) {
        pk_startup(out, "cudagraph.r015_recompute", "cuda_graph_impl recompute_granularity",
                   "CUDA graphs not supported with activation recomputation. (Megatron core %s "
                   "allows only selective recompute with transformer_engine graphs of scope "
                   "attn); turn recompute or graphs off",
                   stack);
    } else {
        char w[64];
        const char *p = rc.modules;
        while (cg_word(&p, w, sizeof w))
            if (!strcmp(w, "core_attn") || !strcmp(w, "mla_up_proj")) {
                pk_startup(out, "cudagraph.r015_attn_graph_recompute_module",
                           "cuda_graph_modules recompute_modules",
                           "attn cuda graph is not supported with %s recompute. (Megatron core "
                           "%s; recompute_modules defaults to core_attn); recompute other "
                           "modules",
                           w, stack);
                break;
            }
    }
}

static void cg_startup(const mt_ctx_v1 *ctx, mt_sink *out)
{
    char im[32], mods[CG_LIST] = "", g[CG_LIST] = "", w[64];
    const char *raw_impl = pk_str(pk_args(ctx), "cuda_graph_impl", "none");
    const char *scope_dep, *given, *inf_raw, *p;
    char inf[16];
    int enable = pk_arg_on(ctx, "enable_cuda_graph"), external = pk_arg_on(ctx, "external_cuda_graph");
    int v018 = pk_core_ge(ctx, "0.18"), v019 = pk_core_ge(ctx, "0.19");
    int te_impl = pk_arg_is(ctx, "transformer_impl", "transformer_engine");
    int offloading, fine;
    long experts;
    cg_recompute rc;

    /* An unknown module name never gets here: the module converter raises
     * KeyError inside parse_args (core.args_unknown_enum_member). */

    /* validate_args: the deprecated graph switches. */
    if ((enable || external) && strcmp(raw_impl, "none"))
        pk_startup(out, "cudagraph.deprecated_flag_with_impl", "cuda_graph_impl",
                   "Do not use --enable-cuda-graph or --external-cuda-graph with "
                   "--cuda-graph-impl.; keep only --cuda-graph-impl");
    else if (enable && external)
        pk_startup(out, "cudagraph.enable_and_external_both", "cuda_graph_impl",
                   "--enable-cuda-graph and --external-cuda-graph cannot be enabled at the same "
                   "time.; use --cuda-graph-impl local or transformer_engine");
    snprintf(im, sizeof im, "%s", enable ? "local" : external ? "transformer_engine" : raw_impl);

    if (!v018) {
        cg_startup_r015(ctx, out, im);
        return;
    }

    /* --cuda-graph-scope (deprecated) replaces the module list. */
    scope_dep = pk_arg(ctx, "cuda_graph_scope_deprecated");
    given = pk_str(pk_args(ctx), "cuda_graph_modules", "");
    if (scope_dep && cg_len(given) > 0)
        pk_startup(out, "cudagraph.scope_and_modules_both", "cuda_graph_modules",
                   "--cuda-graph-scope and --cuda-graph-modules cannot be used together.; "
                   "keep --cuda-graph-modules (--cuda-graph-scope is deprecated)");
    snprintf(mods, sizeof mods, "%s", scope_dep ? scope_dep : given);

    /* Module normalisation and the deprecated spellings. */
    inf_raw = pk_arg(ctx, "inference_cuda_graph_scope");
    snprintf(inf, sizeof inf, "%s", inf_raw ? inf_raw : "");
    if (cg_count(mods, "full")) {
        if (cg_len(mods) != 1)
            pk_startup(out, "cudagraph.full_scope_with_others", "cuda_graph_modules",
                       "full scope cannot be used with other scopes.; an empty "
                       "--cuda-graph-modules captures whole layers");
    } else {
        int fi = cg_count(mods, "full_iteration"), fii = cg_count(mods, "full_iteration_inference");
        if (fi && fii) {
            pk_startup(out, "cudagraph.multiple_deprecated_scopes", "cuda_graph_modules",
                       "cuda_graph_modules cannot contain multiple deprecated values at the "
                       "same time: ['full_iteration', 'full_iteration_inference'].; use "
                       "--cuda-graph-impl full_iteration or --inference-cuda-graph-scope block");
        } else if (fi) {
            if (strcmp(im, "none") && strcmp(im, "local") && strcmp(im, "full_iteration"))
                pk_startup(out, "cudagraph.full_iteration_scope_impl_conflict",
                           "cuda_graph_modules cuda_graph_impl",
                           "cuda_graph_modules='full_iteration' cannot be combined with "
                           "cuda_graph_impl='%s'.; use --cuda-graph-impl full_iteration",
                           im);
            else if (inf[0] && strcmp(inf, "none"))
                pk_startup(out, "cudagraph.full_iteration_scope_impl_conflict",
                           "cuda_graph_modules",
                           "cuda_graph_modules='full_iteration' cannot be combined with "
                           "inference_cuda_graph_scope='%s'.; use --cuda-graph-impl "
                           "full_iteration alone",
                           inf);
            snprintf(im, sizeof im, "full_iteration");
        } else if (fii) {
            if (strcmp(im, "none") && strcmp(im, "local"))
                pk_startup(out, "cudagraph.full_iteration_inference_scope_impl_conflict",
                           "cuda_graph_modules cuda_graph_impl",
                           "cuda_graph_modules='full_iteration_inference' cannot be combined "
                           "with cuda_graph_impl='%s'.; use --cuda-graph-impl local with "
                           "--inference-cuda-graph-scope block",
                           im);
            else if (inf[0] && strcmp(inf, "block"))
                pk_startup(out, "cudagraph.full_iteration_inference_scope_impl_conflict",
                           "cuda_graph_modules",
                           "cuda_graph_modules='full_iteration_inference' cannot be combined "
                           "with inference_cuda_graph_scope='%s'.; use "
                           "--inference-cuda-graph-scope block",
                           inf);
            if (strcmp(im, "none"))
                snprintf(inf, sizeof inf, "block");
        }
        for (p = mods; cg_word(&p, w, sizeof w);)
            if (strcmp(w, "full_iteration") && strcmp(w, "full_iteration_inference"))
                cg_add(g, sizeof g, w, strlen(w));
    }
    if (!inf[0])
        snprintf(inf, sizeof inf, "%s", !strcmp(im, "local") ? "layer" : "none");
    if (!strcmp(im, "local") ? strcmp(inf, "layer") && strcmp(inf, "block") : strcmp(inf, "none"))
        pk_startup(out, "cudagraph.inference_scope_invalid", "cuda_graph_impl",
                   "Invalid inference CUDA graph scope '%s' for --cuda-graph-impl='%s'.; "
                   "layer and block need --cuda-graph-impl local",
                   inf, im);

    if (!strcmp(im, "full_iteration") && cg_nan_check(ctx))
        pk_startup(out, "cudagraph.full_iteration_nan_check", "cuda_graph_impl",
                   "--no-check-for-nan-in-loss-and-grad should be set with "
                   "--cuda-graph-impl=full_iteration for training.; add "
                   "--no-check-for-nan-in-loss-and-grad");
    if (!strcmp(inf, "block") && pk_arg_set(ctx, "fp8")) {
        if (!pk_arg_is(ctx, "transformer_impl", "inference_optimized"))
            pk_startup(out, "cudagraph.inference_block_fp8", "cuda_graph_modules",
                       "fp8 with --inference-cuda-graph-scope=block is only supported with "
                       "--transformer-impl=inference_optimized");
        else if (!pk_arg_is(ctx, "fp8_recipe", "mxfp8"))
            pk_startup(out, "cudagraph.inference_block_fp8", "cuda_graph_modules",
                       "Only --fp8-recipe=mxfp8 is supported with --inference-cuda-graph-scope="
                       "block");
    }
    /* --enable-cuda-graph deletes its attribute, which the hybrid context
     * parallel check then reads. */
    if (pk_arg_on(ctx, "hybrid_context_parallel") &&
        pk_arg_int(ctx, "pipeline_model_parallel_size", 1) <= 1 && enable)
        pk_startup(out, "cudagraph.hybrid_cp_enable_attr", "cuda_graph_impl",
                   "AttributeError: 'Namespace' object has no attribute 'enable_cuda_graph' "
                   "(validate_args crashes); use --cuda-graph-impl local instead of "
                   "--enable-cuda-graph");

    /* Delayed wgrad with the wgrad GEMMs inside the graphs. */
    if (pk_arg_on(ctx, "delay_wgrad_compute") && te_impl && pk_arg_on(ctx, "overlap_grad_reduce") &&
        (pk_word_in(g, "attn") ||
         (pk_word_in(g, "moe_router") && pk_arg_set(ctx, "moe_shared_expert_intermediate_size") &&
          !pk_arg_on(ctx, "moe_shared_expert_overlap")))) {
        if (!pk_te_ge(ctx, "2.12"))
            pk_startup(out, "cudagraph.delay_wgrad_te_version",
                       "cuda_graph_modules delay_wgrad_compute",
                       "CUDA graph with delay_wgrad_compute requires TE version >= 2.12.0. (the "
                       "stack has %s); drop attn (and moe_router with a shared expert) from the "
                       "graph modules, or delayed wgrad",
                       pk_str(ctx->contract, "stack.transformer_engine", "no TE"));
        else if (!pk_arg_on(ctx, "gradient_accumulation_fusion"))
            pk_startup(out, "cudagraph.delay_wgrad_grad_accum_fusion",
                       "cuda_graph_modules delay_wgrad_compute",
                       "CUDA graph with delay_wgrad_compute requires gradient_accumulation_fusion "
                       "to be enabled. This is because the default gradient accumulation does "
                       "not use static memory addresses, which breaks CUDA graph requirements.; "
                       "drop --no-gradient-accumulation-fusion");
        else if (pk_word_in(g, "attn") &&
                 (pk_arg_on(ctx, "add_bias_linear") || pk_arg_on(ctx, "add_qkv_bias")))
            pk_startup(out, "cudagraph.delay_wgrad_attn_bias",
                       "cuda_graph_modules delay_wgrad_compute",
                       "CUDA graph with delay_wgrad_compute doesn't support attn bias for now.; "
                       "add --disable-bias-linear (and no --add-qkv-bias) or drop attn from the "
                       "graph modules");
    }
    if (!strcmp(im, "transformer_engine") && cg_expandable(ctx) &&
        !cg_is_zero(pk_env(ctx, "NCCL_GRAPH_REGISTER")))
        pk_startup(out, "cudagraph.nccl_graph_register", "cuda_graph_impl",
                   "Setting NCCL_GRAPH_REGISTER=0 to avoid illegal memory access when using CUDA "
                   "Graph with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.; set "
                   "NCCL_GRAPH_REGISTER=0 or drop expandable_segments:True");
    if (!strcmp(im, "full_iteration") && cg_len(g) > 0)
        pk_startup(out, "cudagraph.full_iteration_modules_nonempty",
                   "cuda_graph_modules cuda_graph_impl",
                   "--cuda-graph-modules must be empty when --cuda-graph-impl=full_iteration.; "
                   "clear cuda_graph_modules \"%s\"",
                   g);

    /* TransformerConfig */
    offloading = pk_arg_int(ctx, "cpu_offloading_num_layers", 0) > 0;
    fine = pk_arg_on(ctx, "fine_grained_activation_offloading");
    experts = pk_arg_int(ctx, "num_experts", 0);
    cg_recompute_read(ctx, &rc);
    if (strcmp(im, "none")) {
        int per_layer = !strcmp(im, "local") || !strcmp(im, "transformer_engine");
        int full_cg = !strcmp(im, "full_iteration") || !cg_len(g);
        if (offloading && strcmp(im, "full_iteration"))
            pk_startup(out, "cudagraph.cpu_offloading", "cuda_graph_impl",
                       "CUDA graphs not supported with CPU offloading.; use full_iteration "
                       "graphs or no CPU offloading");
        if (!strcmp(im, "local") &&
            (pk_word_in(g, "moe_router") || pk_word_in(g, "moe_preprocess"))) {
            /* local graphs capture router and preprocess together */
            if (!pk_word_in(g, "moe_router"))
                cg_add(g, sizeof g, "moe_router", 10);
            if (!pk_word_in(g, "moe_preprocess"))
                cg_add(g, sizeof g, "moe_preprocess", 14);
        }
        if (per_layer) {
            int drop_pad = pk_arg_set(ctx, "moe_expert_capacity_factor") &&
                           pk_arg_on(ctx, "moe_pad_expert_input_to_capacity");
            if (pk_word_in(g, "moe") && pk_word_in(g, "moe_router"))
                pk_startup(out, "cudagraph.moe_and_moe_router", "cuda_graph_modules",
                           "cuda_graph_modules must not contain both moe and moe_router.%s; "
                           "moe already captures the router, keep one",
                           !strcmp(im, "local") ? " (local graphs add moe_router to "
                                                  "moe_preprocess)" : "");
            if (pk_word_in(g, "moe_preprocess") && !pk_word_in(g, "moe_router"))
                pk_startup(out, "cudagraph.moe_preprocess_needs_router", "cuda_graph_modules",
                           "moe_preprocess cuda graph is only supported with moe_router cuda "
                           "graph.; add moe_router");
            if (experts <= 1) {
                if (pk_word_in(g, "moe") || pk_word_in(g, "moe_router"))
                    pk_startup(out, "cudagraph.moe_needs_moe_model", "cuda_graph_modules",
                               "moe cuda graph is only supported for MoE.; the model has no "
                               "experts, drop moe / moe_router");
            } else {
                if (pk_word_in(g, "mlp") && cg_all_moe(ctx) == 1)
                    pk_startup(out, "cudagraph.mlp_needs_dense", "cuda_graph_modules",
                               "mlp cuda graph is only supported for dense layers, but not "
                               "found in the model.; every layer is MoE (moe_layer_freq), drop "
                               "mlp");
                if (!drop_pad) {
                    if (pk_word_in(g, "moe"))
                        pk_startup(out, "cudagraph.moe_needs_drop_pad",
                                   "cuda_graph_modules moe_expert_capacity_factor "
                                   "moe_pad_expert_input_to_capacity",
                                   "moe cuda graph is only supported with drop-padding MoE.; "
                                   "set a capacity factor with --moe-pad-expert-input-to-"
                                   "capacity, or capture moe_router moe_preprocess instead");
                    else if (pk_arg_is(ctx, "moe_token_dispatcher_type", "alltoall") &&
                             (pk_arg_set(ctx, "moe_expert_capacity_factor") ||
                              pk_arg_on(ctx, "moe_router_padding_for_fp8")) &&
                             pk_word_in(g, "moe_preprocess"))
                        pk_startup(out, "cudagraph.moe_preprocess_dtoh", "cuda_graph_modules",
                                   "moe_preprocess cuda graph is not supported when there are "
                                   "DtoH copies and synchronizations in the preprocess step.%s; "
                                   "drop moe_preprocess",
                                   !strcmp(im, "local") ? " (local graphs capture it with "
                                                          "moe_router)" : "");
                }
            }
        }
        if (!strcmp(rc.gran, "full") && strcmp(im, "full_iteration"))
            pk_startup(out, "cudagraph.full_recompute_needs_full_iteration",
                       "cuda_graph_impl recompute_granularity",
                       "full recompute is only supported with full iteration CUDA graph.; use "
                       "--cuda-graph-impl full_iteration, selective recompute, or no graphs");
        if (!strcmp(rc.gran, "selective")) {
            if (!strcmp(im, "transformer_engine") && pk_word_in(rc.modules, "moe") &&
                pk_word_in(g, "moe_router"))
                pk_startup(out, "cudagraph.moe_recompute_with_router_graph",
                           "cuda_graph_modules recompute_modules",
                           "moe recompute is not supported with moe_router CUDA graph with: "
                           "--cuda-graph-impl transformer_engine.; drop moe from the "
                           "recompute modules or moe_router from the graph");
            if (pk_arg_num(ctx, "attention_dropout", 0.1) != 0.0 &&
                pk_word_in(rc.modules, "core_attn") && (full_cg || pk_word_in(g, "attn")))
                pk_startup(out, "cudagraph.attn_dropout_graphed_recompute",
                           "cuda_graph_modules recompute_modules",
                           "attention dropout is not supported with graphed attention "
                           "recomputation. (attention_dropout %s; core_attn is the default "
                           "selective module); set --attention-dropout 0.0 or keep core_attn "
                           "out of the graph or the recompute",
                           pk_str(pk_args(ctx), "attention_dropout", "0.1"));
            if (pk_arg_num(ctx, "hidden_dropout", 0.1) != 0.0 &&
                ((pk_word_in(rc.modules, "mlp") && (full_cg || pk_word_in(g, "mlp"))) ||
                 (pk_word_in(rc.modules, "moe") && (full_cg || pk_word_in(g, "moe")))))
                pk_startup(out, "cudagraph.hidden_dropout_graphed_recompute",
                           "cuda_graph_modules recompute_modules",
                           "hidden dropout is not supported with graphed MLP/MoE recomputation. "
                           "(hidden_dropout %s); set --hidden-dropout 0.0 or keep mlp/moe out "
                           "of the graph or the recompute",
                           pk_str(pk_args(ctx), "hidden_dropout", "0.1"));
            if (pk_arg_set(ctx, "moe_input_jitter_eps") && pk_word_in(rc.modules, "moe") &&
                (full_cg || pk_word_in(g, "moe")))
                pk_startup(out, "cudagraph.jitter_graphed_recompute",
                           "cuda_graph_modules recompute_modules",
                           "moe_input_jitter_eps is not supported with graphed moe "
                           "recomputation.; drop --moe-input-jitter-eps or moe recompute");
            if (v019 && pk_arg_int(ctx, "gtp_weight_remat_size", 1) > 1 && !strcmp(im, "local") &&
                (pk_arg_set(ctx, "fp8") || pk_arg_set(ctx, "fp4")) &&
                pk_arg_set(ctx, "moe_shared_expert_intermediate_size") &&
                !pk_arg_on(ctx, "moe_shared_expert_overlap") &&
                (full_cg || pk_word_in(g, "moe") || pk_word_in(g, "moe_router")) &&
                pk_word_in(rc.modules, "shared_experts"))
                pk_startup(out, "cudagraph.gtp_shared_experts",
                           "cuda_graph_modules recompute_modules",
                           "GTP + local CUDA graphs that capture shared_experts (moe_router/moe "
                           "scope) cannot recompute it under fp8/fp4; drop shared_experts from "
                           "--recompute-modules or use --cuda-graph-impl full_iteration");
        }
        if (fine) {
            const char *off = pk_str(pk_args(ctx), "offload_modules", "");
            static const char *const local_ok[] = {"expert_fc1", "moe_act", "fused_group_mlp",
                                                   NULL};
            int partial = 0;
            if (v019 && !strcmp(im, "local")) {
                char list[CG_LIST];
                if (cg_sorted_minus(off, local_ok, list, sizeof list))
                    pk_startup(out, "cudagraph.fg_offload_local_modules",
                               "offload_modules cuda_graph_impl",
                               "fine-grained activation offloading with cuda_graph_impl='local' "
                               "only supports offload_modules 'expert_fc1', 'moe_act', and "
                               "'fused_group_mlp'. Unsupported offload_modules: %s.; offload "
                               "only those or use transformer_engine graphs",
                               list);
                if (!cg_len(g))
                    pk_startup(out, "cudagraph.fg_offload_local_whole_layer",
                               "cuda_graph_modules cuda_graph_impl",
                               "fine-grained activation offloading with cuda_graph_impl='local' "
                               "is not supported with whole-layer CUDA graph capture.; name "
                               "the graph modules");
            }
            if (v019 && !strcmp(im, "local") && cg_len(off) > 0 && !pk_word_in(g, "moe")) {
                partial = 1;
                for (p = off; cg_word(&p, w, sizeof w);)
                    partial &= pk_value_in(local_ok, w);
            }
            if (strcmp(im, "transformer_engine") && strcmp(im, "full_iteration") && !partial)
                pk_startup(out, "cudagraph.fg_offload_impl", "cuda_graph_impl",
                           v019 ? "fine-grained activation offloading is only supported with "
                                  "transformer_engine CUDA graph implementation or local CUDA "
                                  "graph implementation with partial MoE offload.; use "
                                  "transformer_engine graphs"
                                : "fine-grained activation offloading is only supported with "
                                  "transformer_engine CUDA graph implementation or local CUDA "
                                  "graph implementation with full_iteration scope.; use "
                                  "transformer_engine graphs");
            if (pk_word_in(g, "moe"))
                pk_startup(out, "cudagraph.fg_offload_token_drop_moe", "cuda_graph_modules",
                           "Token-drop MoE is temporarily not supported with activation "
                           "offloading.; drop moe from the graph modules");
            if (pk_arg_int(ctx, "cuda_graph_warmup_steps", 3) <= 0)
                pk_startup(out, "cudagraph.fg_offload_warmup_steps", "cuda_graph_warmup_steps",
                           "cuda_graph_warmup_steps must be greater than 0 when enabling "
                           "fine-grained activation offloading.");
            if (!strcmp(im, "full_iteration") &&
                pk_arg_int(ctx, "fine_grained_offloading_max_inflight_offloads", -1) < 0)
                pk_startup(out, "cudagraph.fg_offload_max_inflight", "cuda_graph_impl",
                           "fine_grained_offloading_max_inflight_offloads must be a "
                           "non-negative integer when using fine-grained activation offloading "
                           "with full-iteration CUDA graphs; set "
                           "--fine-grained-offloading-max-inflight-offloads");
        }
    }
    /* The EP-overlap block of TransformerConfig. */
    if (pk_arg_on(ctx, "overlap_moe_expert_parallel_comm") && !strcmp(im, "transformer_engine") &&
        (pk_word_in(g, "moe") || pk_word_in(g, "mlp")))
        pk_startup(out, "cudagraph.ep_overlap_moe_mlp_graph", "cuda_graph_modules",
                   "CUDA graph scope on moe and mlp is not supported with "
                   "overlap_moe_expert_parallel_comm; capture attn / moe_router instead");
    if (pk_arg_on(ctx, "delay_wgrad_compute") && pk_arg_on(ctx, "overlap_moe_expert_parallel_comm") &&
        !strcmp(im, "transformer_engine") && !pk_te_ge(ctx, "2.10"))
        pk_startup(out, "cudagraph.delay_wgrad_te210_partial", "cuda_graph_impl",
                   "TE version >= 2.10.0 is required for delay_wgrad_compute with partial cuda "
                   "graph (the stack has %s)",
                   pk_str(ctx->contract, "stack.transformer_engine", "no TE"));
}

static int check(void *state, const mt_ctx_v1 *ctx, mt_sink *out)
{
    const char *im = impl(ctx), *mods = scope(ctx);
    (void)state;

    if (!pk_core_ge(ctx, "0.18") && !r015_expressible(im, mods))
        pk_startup(out, "cudagraph.needs_core", "cuda_graph_modules cuda_graph_impl",
                   "cuda_graph_modules \"%s\"%s needs Megatron core >= 0.18 (the stack is %s): "
                   "0.15 takes one --cuda-graph-scope value, full (whole layers) or attn, and "
                   "full_iteration as a scope of its own",
                   mods, !strcmp(im, "full_iteration") ? " with cuda_graph_impl full_iteration" : "",
                   pk_str(ctx->contract, "stack.megatron_core", "?"));
    if (pk_args(ctx))
        cg_startup(ctx, out);

    /* Runtime: per-layer graphs replay fixed shapes, and dropless routing
     * changes the expert token counts every step. */
    if (layer_graphs(ctx) && !*mods && is_moe(ctx) && !drop_and_pad(ctx))
        pk_runtime(out, "cudagraph.whole_layer_needs_static_shapes",
                   "cuda_graph_modules cuda_graph_impl",
                   "runtime: whole-layer %s graphs of a dropless MoE capture the experts, whose "
                   "token counts change every step; capture moe_router moe_preprocess instead, "
                   "or set a capacity factor with padding",
                   im);
    /* Whole-step graphs of a dropless MoE only run with balanced routing,
     * which makes the result benchmark-only. */
    if (!strcmp(im, "full_iteration") && is_moe(ctx) && !drop_and_pad(ctx) &&
        !pk_has(ctx->contract, "labels", "benchmark_only"))
        pk_runtime(out, "cudagraph.full_iteration_needs_static_shapes", "cuda_graph_impl",
                   "runtime: full_iteration graphs need static expert shapes (drop-and-pad), "
                   "which this contract does not measure, and its labels (\"%s\") exclude "
                   "benchmark-only results; use transformer_engine with moe_router "
                   "moe_preprocess",
                   pk_str(ctx->contract, "labels", ""));
    return 0;
}

static void note_memory(const mt_ctx_v1 *ctx, mt_sink *out)
{
    if (pk_int(ctx->config, "pipeline_model_parallel_size", 1) > 1)
        pk_note(out, "graphs cost memory: more than 10 GB per GPU with PP > 1 (calibration H); "
                     "the memory gate decides");
}

/* Delayed wgrad under per-layer TE graphs of mods, as the start-up rules
 * judge it from the config: with EP overlap it needs TE >= 2.10
 * (cudagraph.delay_wgrad_te210_partial); with grad-reduce overlap and the
 * wgrad GEMMs inside the graphs (attn, or moe_router with a shared expert
 * off its side stream) TE >= 2.12 (cudagraph.delay_wgrad_te_version). */
static int delay_wgrad_refuses(const mt_ctx_v1 *ctx, const char *mods)
{
    long shared = pk_int(ctx->config, "moe_shared_expert_intermediate_size", -1);
    if (shared < 0)
        shared = pk_int(ctx->model, "moe_shared_expert_intermediate_size", 0);
    if (!pk_bool(ctx->config, "delay_wgrad_compute"))
        return 0;
    if (pk_bool(ctx->config, "overlap_moe_expert_parallel_comm") && !pk_te_ge(ctx, "2.10"))
        return 1;
    return pk_bool(ctx->config, "overlap_grad_reduce") && !pk_te_ge(ctx, "2.12") &&
           (pk_word_in(mods, "attn") ||
            (pk_word_in(mods, "moe_router") && shared > 0 &&
             !pk_bool(ctx->config, "moe_shared_expert_overlap")));
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
        (captures_experts(ctx, te, mods) && !drop_and_pad(ctx)) || delay_wgrad_refuses(ctx, mods))
        return;
    /* moe recompute beside a moe_router graph (cudagraph.moe_recompute_with_router_graph) */
    if (pk_eq(ctx->config, "recompute_granularity", "selective") &&
        pk_has(ctx->config, "recompute_modules", "moe") && pk_word_in(mods, "moe_router"))
        return;
    /* TE graphs with expandable segments need NCCL_GRAPH_REGISTER=0, which no
     * knob sets (cudagraph.nccl_graph_register) */
    if (strstr(pk_str(ctx->config, "env.PYTORCH_CUDA_ALLOC_CONF", ""), "expandable_segments:True"))
        return;
    if (!pk_core_ge(ctx, "0.18") && !r015_expressible(te, mods))
        return; /* needs_core */
    /* before 0.18 an attn graph refuses core_attn (the default module) and
     * mla_up_proj recompute (cudagraph.r015_attn_graph_recompute_module) */
    if (!pk_core_ge(ctx, "0.18") && !strcmp(mods, "attn") &&
        pk_eq(ctx->config, "recompute_granularity", "selective")) {
        const char *rm = pk_str(ctx->config, "recompute_modules", "");
        if (!*rm || pk_word_in(rm, "core_attn") || pk_word_in(rm, "mla_up_proj"))
            return;
    }
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
    /* Megatron refuses full_iteration graphs with its NaN check on */
    if (strcmp(pk_str(ctx->config, "check_for_nan_in_loss_and_grad", "true"), "false"))
        pk_host->sink_set(out, "check_for_nan_in_loss_and_grad", "false");
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
        propose_te(ctx, out, "attn", "TE CUDA graphs on attention",
                   "captures each layer's attention and leaves the MoE layer eager; the one "
                   "per-layer scope of an MoE model before core 0.18 (--cuda-graph-scope attn)");
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

    if (d == MT_DIALECT_MLM && !pk_core_ge(ctx, "0.18")) {
        /* r0.15: no full_iteration impl (a scope of local graphs) and one
         * --cuda-graph-scope value; check() reports what it cannot say. */
        if (!strcmp(im, "full_iteration")) {
            pk_render(out, d, "cuda_graph_impl", "model", NULL, "local");
            pk_render(out, d, "cuda_graph_scope", "model", NULL, "full_iteration");
        } else {
            if (strcmp(im, "none"))
                pk_render(out, d, "cuda_graph_impl", "model", NULL, im);
            if (!strcmp(mods, "attn"))
                pk_render(out, d, "cuda_graph_scope", "model", NULL, "attn");
        }
    } else if (d == MT_DIALECT_MLM) {
        /* the module list is read without graphs too (delay_wgrad checks) */
        if (strcmp(im, "none"))
            pk_render(out, d, "cuda_graph_impl", "model", NULL, im);
        if (*mods)
            pk_render(out, d, "cuda_graph_modules", "model", NULL, mods);
    } else {
        /* Bridge main names the module list model.cuda_graph_modules; 0.2.x
         * has only the list model.cuda_graph_scope, and no full_iteration. */
        const char *field = pk_bridge_ge(ctx, PK_BRIDGE_MAIN) ? "cuda_graph_modules"
                                                              : "cuda_graph_scope";
        if (!strcmp(im, "none"))
            return 0;
        if (!strcmp(im, "full_iteration") && !pk_bridge_ge(ctx, PK_BRIDGE_MAIN)) {
            pk_bridge_no_path(out, ctx, "--cuda-graph-impl full_iteration");
            return 0;
        }
        pk_render(out, d, "cuda_graph_impl", "model", NULL, im);
        if (*mods) {
            if (!strchr(mods, ' ')) {
                /* pk_render writes a Python list only for several words. */
                char buf[128];
                snprintf(buf, sizeof buf, "[%s]", mods);
                pk_render(out, d, "cuda_graph_modules", "model", field, buf);
            } else {
                pk_render(out, d, "cuda_graph_modules", "model", field, mods);
            }
        }
    }
    if (pk_int(ctx->config, "cuda_graph_warmup_steps", 3) != 3)
        pk_render(out, d, "cuda_graph_warmup_steps", "model", NULL,
                  pk_str(ctx->config, "cuda_graph_warmup_steps", "3"));
    if (pk_eq(ctx->config, "check_for_nan_in_loss_and_grad", "false")) {
        if (d == MT_DIALECT_MLM)
            pk_host->sink_arg(out, "--no-check-for-nan-in-loss-and-grad");
        else
            pk_bridge_no_path(out, ctx, "--no-check-for-nan-in-loss-and-grad");
    }
    return 0;
}

/* The arguments dump under `arg` against the config's `knob`: 1 same, 0
 * different, -1 absent. */
static int args_match(const mt_ctx_v1 *ctx, const char *knob, const char *arg,
                      const char **dumped)
{
    return pk_args_match(ctx, arg, pk_str(ctx->config, knob, ""), dumped);
}

/* The module names of a dumped list: plain words ('attn') and enum reprs
 * (<CudaGraphModule.attn: 1>) alike, space-separated, in dump order. */
static void dumped_modules(const char *dumped, char *out, size_t n)
{
    const char *p = dumped;
    size_t o = 0;
    out[0] = '\0';
    while (*p) {
        const char *w, *dot;
        size_t len;
        while (*p && !(isalnum((unsigned char)*p) || *p == '_' || *p == '.'))
            p++;
        w = p;
        while (*p && (isalnum((unsigned char)*p) || *p == '_' || *p == '.'))
            p++;
        len = (size_t)(p - w);
        if (!len)
            continue;
        for (dot = w + len; dot > w && dot[-1] != '.'; dot--)
            ;
        len -= (size_t)(dot - w);
        w = dot;
        if (!len || strspn(w, "0123456789") >= len || (len == 4 && !strncmp(w, "None", 4)))
            continue;
        if (o + len + 2 < n) {
            if (o)
                out[o++] = ' ';
            memcpy(out + o, w, len);
            o += len;
            out[o] = '\0';
        }
    }
}

/* The config's module list against the dump entry `arg`, as sets: 1 same,
 * 0 different, -1 absent. */
static int modules_match(const mt_ctx_v1 *ctx, const char *arg, const char **dumped)
{
    char key[160], got[1024], w[64];
    const char *want = scope(ctx), *p;
    snprintf(key, sizeof key, "args.%s", arg);
    *dumped = pk_get(ctx->evidence, key);
    if (!*dumped)
        return -1;
    dumped_modules(*dumped, got, sizeof got);
    for (p = got; cg_word(&p, w, sizeof w);)
        if (!pk_word_in(want, w))
            return 0;
    for (p = want; cg_word(&p, w, sizeof w);)
        if (!pk_word_in(got, w))
            return 0;
    return 1;
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
        /* r0.15 runs full_iteration as local graphs of scope full_iteration */
        if (pk_args_match(ctx, "cuda_graph_impl",
                          !pk_core_ge(ctx, "0.18") && !strcmp(impl(ctx), "full_iteration")
                              ? "local"
                              : impl(ctx),
                          &dumped) == 0)
            pk_verdict(out, "cuda_graph_impl", MT_VERDICT_NOT_APPLIED,
                       "arguments dump: cuda_graph_impl = %.60s", dumped);
        else
            pk_verdict(out, "cuda_graph_impl", v, "%s", text);

        if (*scope(ctx)) {
            /* Older stacks dump the list as cuda_graph_scope; 0.18+ dump
             * CudaGraphModule members ("[<CudaGraphModule.attn: 1>]"). */
            m = modules_match(ctx, "cuda_graph_modules", &dumped);
            if (m < 0)
                m = modules_match(ctx, "cuda_graph_scope", &dumped);
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
