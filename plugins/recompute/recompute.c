/*
 * recompute - activation recomputation, fine-grained activation offloading
 * and optimizer CPU offloading: the memory levers of the MoE workflow.
 *
 * The fit phase prescribes "selective recompute before full; offload last",
 * each step cheapest first.  Costs come from shared/facts/calibration.md
 * (point E: Moonlight-16B step cost of selective sets; point F: optimizer
 * offload).  Legality mirrors Megatron's TransformerConfig checks listed in
 * shared/facts/megatron.md; one function (rc_rules) answers check() and
 * filters every candidate propose() builds.
 */
#include "pluginkit.h"

#include <ctype.h>

#define LIST_MAX 256

static const char *const granularity_values[] = {"none", "full", "selective", NULL};
static const char *const method_values[] = {"none", "uniform", "block", NULL};
static const char *const recompute_module_values[] = {
    "core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts",
    "gdn_norm_out", NULL};
static const char *const offload_module_values[] = {
    "attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm", "expert_fc1", "moe_act",
    NULL};

static const mt_knob_v1 recompute_knobs[] = {
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_ENUM, "recompute_granularity", granularity_values,
     "none", "activation recomputation: full layers or selected modules"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_ENUM, "recompute_method", method_values, "none",
     "full recompute: uniform chunks or a block of layers per stage"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_INT, "recompute_num_layers", NULL, "0",
     "full recompute: layers per chunk (uniform) or per stage (block); 0 = unset"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_LIST, "recompute_modules", recompute_module_values,
     "", "selective recompute modules; empty = Megatron's default (core_attn)"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_BOOL, "fine_grained_activation_offloading", NULL,
     "false", "offload chosen activations to host memory"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_LIST, "offload_modules", offload_module_values, "",
     "modules whose activations are offloaded"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_BOOL, "optimizer_cpu_offload", NULL, "false",
     "run (part of) the optimizer step on the CPU"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_STRING, "optimizer_offload_fraction", NULL, "1.0",
     "share of optimizer states offloaded, decimal in (0, 1]"},
};

static const mt_variable_v1 recompute_variables[] = {
    {sizeof(mt_variable_v1), "recompute",
     "recompute_granularity recompute_method recompute_num_layers recompute_modules",
     MT_WALL_MEMORY},
    {sizeof(mt_variable_v1), "activation_offload",
     "fine_grained_activation_offloading offload_modules", MT_WALL_MEMORY},
    {sizeof(mt_variable_v1), "optimizer_offload",
     "optimizer_cpu_offload optimizer_offload_fraction", MT_WALL_MEMORY},
};

/* Facts owned elsewhere that the rules read. */
typedef struct rc_env {
    long layers, pp, experts, shared;
    int mla, grouped_gemm, shared_overlap, fp8_delayed, dist_opt, gdn;
} rc_env;

/* This plugin's knobs. */
typedef struct rc {
    char gran[16], method[16];
    long num_layers;
    char modules[LIST_MAX]; /* canonical order, "" = empty */
    int offloading;
    char offload[LIST_MAX];
    int opt_offload;
    char fraction[32];
} rc;

/* Core knobs live in the config; the model table is the fallback. */
static long core_int(const mt_ctx_v1 *ctx, const char *key, long def)
{
    if (pk_get(ctx->config, key))
        return pk_int(ctx->config, key, def);
    return pk_int(ctx->model, key, def);
}

static int core_bool(const mt_ctx_v1 *ctx, const char *key)
{
    if (pk_get(ctx->config, key))
        return pk_bool(ctx->config, key);
    return pk_bool(ctx->model, key);
}

static void env_read(const mt_ctx_v1 *ctx, rc_env *e)
{
    const char *variant = pk_get(ctx->config, "experimental_attention_variant");
    if (!variant)
        variant = pk_get(ctx->model, "experimental_attention_variant");
    e->layers = core_int(ctx, "num_layers", 0);
    e->pp = pk_int(ctx->config, "pipeline_model_parallel_size", 1);
    e->experts = core_int(ctx, "num_experts", 0);
    e->shared = core_int(ctx, "moe_shared_expert_intermediate_size", 0);
    e->mla = core_bool(ctx, "multi_latent_attention");
    e->grouped_gemm = pk_bool(ctx->config, "moe_grouped_gemm");
    e->shared_overlap = pk_bool(ctx->config, "moe_shared_expert_overlap");
    e->fp8_delayed = pk_eq(ctx->config, "fp8_recipe", "delayed");
    e->dist_opt = pk_bool(ctx->config, "use_distributed_optimizer");
    e->gdn = variant && !strcmp(variant, "gated_delta_net");
    if (e->pp < 1)
        e->pp = 1;
}

static void copy_str(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src ? src : "");
}

static void rc_read(const mt_kv *c, rc *r)
{
    copy_str(r->gran, sizeof r->gran, pk_str(c, "recompute_granularity", "none"));
    copy_str(r->method, sizeof r->method, pk_str(c, "recompute_method", "none"));
    r->num_layers = pk_int(c, "recompute_num_layers", 0);
    copy_str(r->modules, sizeof r->modules, pk_str(c, "recompute_modules", ""));
    r->offloading = pk_bool(c, "fine_grained_activation_offloading");
    copy_str(r->offload, sizeof r->offload, pk_str(c, "offload_modules", ""));
    r->opt_offload = pk_bool(c, "optimizer_cpu_offload");
    copy_str(r->fraction, sizeof r->fraction, pk_str(c, "optimizer_offload_fraction", "1.0"));
}

static int list_empty(const char *list)
{
    for (; *list; list++)
        if (*list != ' ')
            return 0;
    return 1;
}

/* `list` minus the words in `drop`, in canonical order of `values`. */
static void list_filter(const char *const *values, const char *list, const char *drop,
                        char *out, size_t n)
{
    size_t o = 0;
    out[0] = '\0';
    for (; *values; values++)
        if (pk_word_in(list, *values) && !pk_word_in(drop, *values) && o < n)
            o += (size_t)snprintf(out + o, n - o, "%s%s", o ? " " : "", *values);
}

/* Megatron recomputes core_attn when selective recompute names no module. */
static const char *effective_modules(const rc *r)
{
    if (!strcmp(r->gran, "selective") && list_empty(r->modules))
        return "core_attn";
    return r->modules;
}

/* optimizer_offload_fraction as Megatron's float argument takes it, limited
 * to plain decimals so the rendered flag reads the same in both dialects.
 * Parsed by hand: strtod would follow the host's locale. */
static int parse_fraction(const char *s, double *v)
{
    double x = 0, scale = 1;
    int digits = 0, dot = 0;
    for (; *s; s++) {
        if (isdigit((unsigned char)*s)) {
            digits++;
            if (dot)
                x += (*s - '0') * (scale /= 10);
            else if (x < 1e9)
                x = x * 10 + (*s - '0');
        } else if (*s == '.' && !dot) {
            dot = 1;
        } else {
            return -1;
        }
    }
    if (!digits)
        return -1;
    *v = x;
    return 0;
}

/* Layers one pipeline stage holds at most: the bound on full recompute's
 * recompute_num_layers for both methods. */
static long layers_per_stage(const rc_env *e)
{
    return e->layers > 0 ? (e->layers + e->pp - 1) / e->pp : 0;
}

/* ------------------------------------------------------------------------ */
/* Rules                                                                     */


static int rc_rules(const rc_env *e, const rc *r, mt_sink *sink)
{
    pk_rules ro = {sink, 0};
    int selective = !strcmp(r->gran, "selective"), full = !strcmp(r->gran, "full");
    int has_method = strcmp(r->method, "none") != 0;
    double frac = 0;

    if (selective && (has_method || r->num_layers > 0))
        pk_fail(&ro, "recompute.selective_takes_no_method",
                "recompute_method recompute_num_layers recompute_granularity",
                "selective recompute takes no recompute_method (%s) or recompute_num_layers "
                "(%ld); set them to none and 0",
                r->method, r->num_layers);
    if (full && (!has_method || r->num_layers <= 0))
        pk_fail(&ro, "recompute.full_needs_method_and_layers",
                "recompute_method recompute_num_layers recompute_granularity",
                "full recompute needs recompute_method uniform or block (it is %s) and "
                "recompute_num_layers > 0 (it is %ld)",
                r->method, r->num_layers);
    if (full && r->num_layers > 0 && layers_per_stage(e) > 0 &&
        r->num_layers > layers_per_stage(e))
        pk_fail(&ro, "recompute.full_layers_within_stage",
                "recompute_num_layers pipeline_model_parallel_size num_layers",
                "recompute_num_layers %ld exceeds the %ld layers a pipeline stage holds "
                "(num_layers %ld over PP %ld)",
                r->num_layers, layers_per_stage(e), e->layers, e->pp);
    if (!selective && !full && (has_method || r->num_layers > 0))
        pk_fail(&ro, "recompute.method_needs_granularity",
                "recompute_method recompute_num_layers recompute_granularity",
                "recompute_method %s / recompute_num_layers %ld are set but "
                "recompute_granularity is none, so nothing is recomputed; unset them",
                r->method, r->num_layers);
    if (!selective && !list_empty(r->modules))
        pk_fail(&ro, "recompute.modules_need_selective",
                "recompute_modules recompute_granularity",
                "recompute_modules \"%s\" only apply to selective recompute, but "
                "recompute_granularity is %s; empty the list or use selective",
                r->modules, r->gran);

    /* The module rules below hold under selective recompute, the only time
     * Megatron reads the list (modules_need_selective covers the rest). */
    if (selective && pk_word_in(r->modules, "moe_act") && !e->grouped_gemm)
        pk_fail(&ro, "recompute.moe_act_needs_grouped_gemm", "recompute_modules moe_grouped_gemm",
                "moe_act recompute needs --moe-grouped-gemm, which is off; drop moe_act from "
                "recompute_modules \"%s\"",
                r->modules);
    if (selective && pk_word_in(r->modules, "mla_up_proj") && !e->mla)
        pk_fail(&ro, "recompute.mla_up_proj_needs_mla",
                "recompute_modules multi_latent_attention",
                "mla_up_proj recompute needs multi-latent attention, which this model does not "
                "use; drop mla_up_proj from recompute_modules \"%s\"",
                r->modules);
    if ((pk_word_in(r->modules, "moe") || pk_word_in(r->modules, "moe_act")) && e->experts <= 0)
        pk_fail(&ro, "recompute.moe_needs_experts", "recompute_modules num_experts",
                "recompute_modules \"%s\" names MoE modules but the model has no experts "
                "(num_experts %ld); drop moe / moe_act",
                r->modules, e->experts);
    if (pk_word_in(r->modules, "shared_experts") && e->shared <= 0)
        pk_fail(&ro, "recompute.shared_experts_needs_shared_expert",
                "recompute_modules moe_shared_expert_intermediate_size",
                "shared_experts recompute needs shared experts, but "
                "moe_shared_expert_intermediate_size is %ld; drop shared_experts",
                e->shared);
    if (selective && pk_word_in(r->modules, "shared_experts") && e->shared_overlap)
        pk_fail(&ro, "recompute.shared_experts_excludes_overlap",
                "recompute_modules moe_shared_expert_overlap",
                "shared_experts recompute cannot run with --moe-shared-expert-overlap; drop "
                "shared_experts from recompute_modules \"%s\" or turn the overlap off",
                r->modules);
    if (selective && e->fp8_delayed &&
        (pk_word_in(r->modules, "moe_act") || pk_word_in(r->modules, "layernorm")))
        pk_fail(&ro, "recompute.fp8_delayed_excludes_modules", "recompute_modules fp8_recipe",
                "with fp8_recipe delayed Megatron rejects moe_act and layernorm recompute; "
                "drop them from recompute_modules \"%s\"",
                r->modules);
    if (selective && pk_word_in(r->modules, "gdn_norm_out") && !e->gdn)
        pk_fail(&ro, "recompute.gdn_norm_out_needs_gdn", "recompute_modules",
                "gdn_norm_out recompute only exists for gated delta net attention, which this "
                "model does not use; drop it from recompute_modules \"%s\"",
                r->modules);

    if (r->offloading && list_empty(r->offload))
        pk_fail(&ro, "recompute.offloading_needs_modules",
                "offload_modules fine_grained_activation_offloading",
                "fine_grained_activation_offloading is on but offload_modules is empty; name "
                "the modules to offload or turn offloading off");
    if (!r->offloading && !list_empty(r->offload))
        pk_fail(&ro, "recompute.offload_modules_need_offloading",
                "offload_modules fine_grained_activation_offloading",
                "offload_modules \"%s\" do nothing without fine_grained_activation_offloading; "
                "turn it on or empty the list",
                r->offload);
    /* Megatron reads offload_modules only with offloading on
     * (offload_modules_need_offloading covers the rest). */
    if (r->offloading && pk_word_in(r->offload, "attn_proj") &&
        !pk_word_in(r->offload, "core_attn"))
        pk_fail(&ro, "recompute.offload_attn_proj_needs_core_attn", "offload_modules",
                "Megatron offloads attn_proj only together with core_attn; offload_modules is "
                "\"%s\"",
                r->offload);
    if (selective) {
        const char *mods = effective_modules(r);
        const char *both = pk_word_in(mods, "core_attn") && pk_word_in(r->offload, "core_attn")
                               ? "core_attn"
                           : pk_word_in(mods, "moe_act") && pk_word_in(r->offload, "moe_act")
                               ? "moe_act"
                               : NULL;
        if (both)
            pk_fail(&ro, "recompute.module_recomputed_and_offloaded",
                    "offload_modules recompute_modules",
                    "%s is both recomputed (recompute_modules \"%s\") and offloaded "
                    "(offload_modules \"%s\"); pick one",
                    both, mods, r->offload);
        /* Megatron asserts this one: recomputing whole MoE layers wraps the
         * expert activations it would offload. */
        if (r->offloading && pk_word_in(mods, "moe") &&
            (pk_word_in(r->offload, "moe_act") || pk_word_in(r->offload, "expert_fc1")))
            pk_fail(&ro, "recompute.moe_recompute_excludes_expert_offload",
                    "offload_modules recompute_modules",
                    "recompute_modules \"%s\" recomputes whole MoE layers, so Megatron refuses "
                    "to offload expert activations inside them (offload_modules \"%s\"); drop "
                    "moe_act / expert_fc1 from offload_modules or moe from recompute_modules",
                    mods, r->offload);
    }

    if (parse_fraction(r->fraction, &frac) < 0 || frac <= 0 || frac > 1)
        pk_fail(&ro, "recompute.offload_fraction_range", "optimizer_offload_fraction",
                "optimizer_offload_fraction \"%s\" must be a decimal in (0, 1], e.g. 0.25",
                r->fraction);
    if (r->opt_offload && !e->dist_opt)
        pk_fail(&ro, "recompute.optimizer_offload_needs_distributed_optimizer",
                "optimizer_cpu_offload use_distributed_optimizer",
                "optimizer_cpu_offload needs --use-distributed-optimizer, which is off; turn "
                "the distributed optimizer on or the offload off");
    return ro.n;
}

static int recompute_check(void *state, const mt_ctx_v1 *ctx, mt_sink *out)
{
    rc_env e;
    rc r;
    (void)state;
    env_read(ctx, &e);
    rc_read(ctx->config, &r);
    rc_rules(&e, &r, out);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Candidates                                                                */

/* Selective sets, cheapest first.  Costs are step-time increases from
 * calibration point E; "~" marks estimates not measured there (layernorm
 * alone is E's layernorm + moe_act minus moe_act). */
typedef struct selective_set {
    const char *modules;
    const char *cost;
    unsigned needs; /* NEED_* bits */
} selective_set;

enum { NEED_MOE = 1u, NEED_MLA = 2u, NEED_DENSE = 4u, NEED_SHARED = 8u };

static const selective_set selective_sets[] = {
    {"moe_act", "step +2.0% (calibration E)", NEED_MOE},
    {"core_attn", "step +3.9% (calibration E)", 0},
    {"mla_up_proj", "step +5.2% (calibration E)", NEED_MLA},
    {"moe_act mlp", "step ~+5.5% (moe_act +2.0% plus the dense MLPs; calibration C's winner)",
     NEED_MOE | NEED_DENSE},
    {"core_attn moe_act", "step ~+5.9% (core_attn +3.9% plus moe_act +2.0%)", NEED_MOE},
    {"mla_up_proj mlp", "step +8.7% (calibration E)", NEED_MLA | NEED_DENSE},
    {"layernorm", "step ~+8.8% (calibration E: layernorm + moe_act minus moe_act)", 0},
    {"moe_act layernorm", "step +10.8% (calibration E)", NEED_MOE},
    {"mlp", "only the dense MLP layers: little to save on a MoE model", NEED_DENSE},
    {"shared_experts", "the shared expert's MLP", NEED_MOE | NEED_SHARED},
    {"moe", "whole MoE layers: the largest selective saving, about one extra MoE forward",
     NEED_MOE},
};

/* Whether the model has dense (non-MoE) MLP layers for "mlp" to recompute:
 * a dense model, leading dense layers (first_k_dense), a moe_layer_freq
 * above 1, or a pattern such as "([0]*3+[1]*58)" with a 0 entry in it. */
static int has_dense_layers(const mt_ctx_v1 *ctx, const rc_env *e)
{
    const char *freq = pk_get(ctx->config, "moe_layer_freq");
    const char *p;
    if (!freq)
        freq = pk_get(ctx->model, "moe_layer_freq");
    if (e->experts <= 0 || core_int(ctx, "first_k_dense", 0) > 0)
        return 1;
    if (!freq || !*freq)
        return 0;
    if (!strchr(freq, '['))
        return strtol(freq, NULL, 10) != 1;
    for (p = freq; *p; p++)
        if (*p == '0' && (p == freq || !isdigit((unsigned char)p[-1])) &&
            !isdigit((unsigned char)p[1]))
            return 1;
    return 0;
}

static int space_ok_str(const mt_ctx_v1 *ctx, const char *knob, const char *from, const char *to)
{
    return !strcmp(from, to) || pk_space_allows(ctx, knob, to);
}

static int rc_space_ok(const mt_ctx_v1 *ctx, const rc *a, const rc *b)
{
    char x[32], y[32];
    snprintf(x, sizeof x, "%ld", a->num_layers);
    snprintf(y, sizeof y, "%ld", b->num_layers);
    return space_ok_str(ctx, "recompute_granularity", a->gran, b->gran) &&
           space_ok_str(ctx, "recompute_method", a->method, b->method) &&
           space_ok_str(ctx, "recompute_num_layers", x, y) &&
           space_ok_str(ctx, "recompute_modules", a->modules, b->modules) &&
           space_ok_str(ctx, "fine_grained_activation_offloading", a->offloading ? "true" : "false",
                        b->offloading ? "true" : "false") &&
           space_ok_str(ctx, "offload_modules", a->offload, b->offload) &&
           space_ok_str(ctx, "optimizer_cpu_offload", a->opt_offload ? "true" : "false",
                        b->opt_offload ? "true" : "false") &&
           space_ok_str(ctx, "optimizer_offload_fraction", a->fraction, b->fraction);
}

static void set_str(mt_sink *out, const char *knob, const char *from, const char *to)
{
    if (strcmp(from, to))
        pk_host->sink_set(out, knob, to);
}

static void set_rc(mt_sink *out, const rc *a, const rc *b)
{
    char x[32];
    set_str(out, "recompute_granularity", a->gran, b->gran);
    set_str(out, "recompute_method", a->method, b->method);
    if (a->num_layers != b->num_layers) {
        snprintf(x, sizeof x, "%ld", b->num_layers);
        pk_host->sink_set(out, "recompute_num_layers", x);
    }
    set_str(out, "recompute_modules", a->modules, b->modules);
    if (a->offloading != b->offloading)
        pk_host->sink_set(out, "fine_grained_activation_offloading",
                          b->offloading ? "true" : "false");
    set_str(out, "offload_modules", a->offload, b->offload);
    if (a->opt_offload != b->opt_offload)
        pk_host->sink_set(out, "optimizer_cpu_offload", b->opt_offload ? "true" : "false");
    set_str(out, "optimizer_offload_fraction", a->fraction, b->fraction);
}

/* Emits c when it is legal, inside the space and not the current config.
 * Returns 1 when emitted. */
static int offer(const mt_ctx_v1 *ctx, const rc_env *e, const rc *cur, const rc *c,
                 const char *variable, const char *summary, uint32_t walls, const char *why,
                 mt_sink *out)
{
    if (rc_rules(e, c, NULL) || !rc_space_ok(ctx, cur, c))
        return 0;
    pk_host->sink_candidate(out, variable, summary, walls, MT_LABEL_TRAINING_EQUIVALENT);
    set_rc(out, cur, c);
    pk_note(out, "%s", why);
    return 1;
}

static void recompute_off(rc *c)
{
    copy_str(c->gran, sizeof c->gran, "none");
    copy_str(c->method, sizeof c->method, "none");
    c->num_layers = 0;
    c->modules[0] = '\0';
}

static void propose_recompute(const mt_ctx_v1 *ctx, const rc_env *e, const rc *cur,
                              mt_sink *out)
{
    const char *wall = pk_get(ctx->evidence, "wall");
    int dense = has_dense_layers(ctx, e);
    char summary[256], why[400];
    size_t i;
    rc c;

    /* Recompute is revisited once the profile says memory no longer limits:
     * then it only costs time. */
    if (wall && *wall && strcmp(wall, "memory") && strcmp(cur->gran, "none")) {
        c = *cur;
        recompute_off(&c);
        snprintf(summary, sizeof summary, "remove recompute: the wall is %s, not memory",
                 wall);
        snprintf(why, sizeof why,
                 "the dominant wall is %s; recomputation spends compute to save memory that is "
                 "no longer the limit (full recompute costs about one extra forward pass)",
                 wall);
        offer(ctx, e, cur, &c, "recompute", summary, MT_WALL_COMPUTE, why, out);
    }

    for (i = 0; i < sizeof selective_sets / sizeof selective_sets[0]; i++) {
        const selective_set *s = &selective_sets[i];
        if (((s->needs & NEED_MOE) && e->experts <= 0) || ((s->needs & NEED_MLA) && !e->mla) ||
            ((s->needs & NEED_DENSE) && !dense) || ((s->needs & NEED_SHARED) && e->shared <= 0))
            continue;
        if (!strcmp(cur->gran, "selective") && !strcmp(effective_modules(cur), s->modules))
            continue;
        c = *cur;
        recompute_off(&c);
        copy_str(c.gran, sizeof c.gran, "selective");
        copy_str(c.modules, sizeof c.modules, s->modules);
        snprintf(summary, sizeof summary, "selective recompute of %s", s->modules);
        snprintf(why, sizeof why,
                 "selective before full, cheapest first; %s: %s. It drops the activations those "
                 "modules keep for backward",
                 s->modules, s->cost);
        offer(ctx, e, cur, &c, "recompute", summary, MT_WALL_MEMORY, why, out);
    }

    if (strcmp(cur->gran, "full") || strcmp(cur->method, "uniform") || cur->num_layers != 1) {
        c = *cur;
        recompute_off(&c);
        copy_str(c.gran, sizeof c.gran, "full");
        copy_str(c.method, sizeof c.method, "uniform");
        c.num_layers = 1;
        offer(ctx, e, cur, &c, "recompute", "full recompute, uniform, 1 layer per chunk",
              MT_WALL_MEMORY,
              "full recompute after every selective set: it keeps only each layer's input and "
              "costs about one extra forward pass",
              out);
    }
}

/* Activation offload sets, lightest first; modules already recomputed are
 * left out (a module is recomputed or offloaded, not both). */
static void propose_offload(const mt_ctx_v1 *ctx, const rc_env *e, const rc *cur, mt_sink *out)
{
    static const char *const sets[] = {
        "expert_fc1 moe_act",
        "attn_norm core_attn attn_proj mlp_norm expert_fc1 moe_act",
    };
    const char *recomputed = strcmp(cur->gran, "selective") ? "" : effective_modules(cur);
    char drop[LIST_MAX + 16], summary[LIST_MAX + 64], prev[LIST_MAX] = "";
    size_t i;
    snprintf(drop, sizeof drop, "%s%s", recomputed,
             pk_word_in(recomputed, "core_attn") ? " attn_proj" : "");
    for (i = 0; i < sizeof sets / sizeof sets[0]; i++) {
        rc c = *cur;
        list_filter(offload_module_values, sets[i], drop, c.offload, sizeof c.offload);
        if (list_empty(c.offload) || !strcmp(c.offload, prev))
            continue;
        copy_str(prev, sizeof prev, c.offload);
        c.offloading = 1;
        if (c.offloading == cur->offloading && !strcmp(c.offload, cur->offload))
            continue;
        snprintf(summary, sizeof summary, "offload activations of %s to host memory", c.offload);
        offer(ctx, e, cur, &c, "activation_offload", summary, MT_WALL_MEMORY,
              "offload after recompute: activations move to host memory over PCIe/C2C, "
              "overlapped with compute while the host link keeps up",
              out);
    }
}

static void propose_optimizer(const mt_ctx_v1 *ctx, const rc_env *e, const rc *cur,
                              mt_sink *out)
{
    static const char *const fractions[] = {"0.25", "1.0"};
    static const char *const percent[] = {"25%", "100%"};
    size_t i;
    double have = 0;
    int cur_ok = parse_fraction(cur->fraction, &have) == 0;
    for (i = 0; i < sizeof fractions / sizeof fractions[0]; i++) {
        rc c = *cur;
        double want = 0;
        char summary[128];
        parse_fraction(fractions[i], &want);
        if (cur->opt_offload && cur_ok && have == want)
            continue;
        c.opt_offload = 1;
        if (!(cur_ok && have == want))
            copy_str(c.fraction, sizeof c.fraction, fractions[i]);
        snprintf(summary, sizeof summary, "optimizer CPU offload of %s of the optimizer states",
                 percent[i]);
        offer(ctx, e, cur, &c, "optimizer_offload", summary, MT_WALL_MEMORY,
              "offload last, it is the most expensive lever: calibration F saves ~3.8 GB per "
              "25% offloaded at 1.9x the step (25%) and 4.2x (100%)",
              out);
    }
}

static int recompute_propose(void *state, const mt_ctx_v1 *ctx, mt_sink *out)
{
    rc_env e;
    rc cur;
    (void)state;
    env_read(ctx, &e);
    rc_read(ctx->config, &cur);
    propose_recompute(ctx, &e, &cur, out);
    propose_offload(ctx, &e, &cur, out);
    propose_optimizer(ctx, &e, &cur, out);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Repair                                                                    */

/* Appends one reason to why, "; "-separated, never past its end. */
static void add_reason(char *why, size_t n, const char *reason)
{
    size_t w = strlen(why);
    if (w + 1 < n)
        snprintf(why + w, n - w, "%s%s", w ? "; " : "", reason);
}

static int recompute_repair(void *state, const mt_ctx_v1 *ctx, mt_sink *out)
{
    rc_env e;
    rc r;
    char drop[LIST_MAX] = "", kept[LIST_MAX], why[320] = "";
    (void)state;
    env_read(ctx, &e);
    rc_read(ctx->config, &r);

    if (e.fp8_delayed && (pk_word_in(r.modules, "moe_act") || pk_word_in(r.modules, "layernorm"))) {
        strcat(drop, " moe_act layernorm");
        add_reason(why, sizeof why, "fp8_recipe delayed rejects moe_act and layernorm recompute");
    }
    if (!e.grouped_gemm && pk_word_in(r.modules, "moe_act")) {
        strcat(drop, " moe_act");
        add_reason(why, sizeof why, "moe_act recompute needs grouped GEMM, which is off");
    }
    if (e.shared_overlap && pk_word_in(r.modules, "shared_experts")) {
        strcat(drop, " shared_experts");
        add_reason(why, sizeof why,
                   "shared_experts recompute cannot run with shared-expert overlap");
    }
    if (drop[0] && !pk_get(ctx->changed, "recompute_modules")) {
        list_filter(recompute_module_values, r.modules, drop, kept, sizeof kept);
        pk_host->sink_set(out, "recompute_modules", kept);
        /* an empty list would mean core_attn to Megatron, not "nothing" */
        if (list_empty(kept) && !strcmp(r.gran, "selective") &&
            !pk_get(ctx->changed, "recompute_granularity")) {
            pk_host->sink_set(out, "recompute_granularity", "none");
            pk_note(out, "recompute_modules \"%s\" emptied, recompute turned off: %s", r.modules,
                    why);
        } else {
            pk_note(out, "recompute_modules \"%s\" -> \"%s\": %s", r.modules, kept, why);
        }
    }

    if (r.opt_offload && !e.dist_opt && !pk_get(ctx->changed, "optimizer_cpu_offload")) {
        pk_host->sink_set(out, "optimizer_cpu_offload", "false");
        pk_note(out, "optimizer_cpu_offload turned off: it needs the distributed optimizer, "
                     "which is now off");
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Render                                                                    */

/* Bridge lists are always bracketed: pk_render would print a one-module list
 * as a bare string. */
static void render_list(mt_sink *out, uint32_t d, const char *knob, const char *section,
                        const char *list)
{
    char buf[LIST_MAX + 4];
    size_t o = 0;
    const char *p = list;
    if (d == MT_DIALECT_MLM) {
        pk_render(out, d, knob, section, NULL, list);
        return;
    }
    buf[o++] = '[';
    while (*p) {
        size_t len;
        while (*p == ' ')
            p++;
        len = strcspn(p, " ");
        if (len && o + len + 3 < sizeof buf) {
            if (o > 1)
                buf[o++] = ',';
            memcpy(buf + o, p, len);
            o += len;
        }
        p += len;
    }
    buf[o++] = ']';
    buf[o] = '\0';
    pk_render(out, d, knob, section, NULL, buf);
}

static int recompute_render(void *state, const mt_ctx_v1 *ctx, uint32_t dialect, mt_sink *out)
{
    rc r;
    double frac;
    char buf[32];
    (void)state;
    rc_read(ctx->config, &r);
    if (strcmp(r.gran, "none"))
        pk_render(out, dialect, "recompute_granularity", "model", NULL, r.gran);
    if (strcmp(r.method, "none"))
        pk_render(out, dialect, "recompute_method", "model", NULL, r.method);
    if (r.num_layers > 0) {
        snprintf(buf, sizeof buf, "%ld", r.num_layers);
        pk_render(out, dialect, "recompute_num_layers", "model", NULL, buf);
    }
    if (!strcmp(r.gran, "selective") && !list_empty(r.modules))
        render_list(out, dialect, "recompute_modules", "model", r.modules);
    if (r.offloading)
        pk_render_bool(out, dialect, "fine_grained_activation_offloading", "model", NULL, 1);
    if (!list_empty(r.offload))
        render_list(out, dialect, "offload_modules", "model", r.offload);
    if (r.opt_offload)
        pk_render_bool(out, dialect, "optimizer_cpu_offload", "optimizer", NULL, 1);
    if (parse_fraction(r.fraction, &frac) == 0 && frac != 1.0)
        pk_render(out, dialect, "optimizer_offload_fraction", "optimizer", NULL, r.fraction);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Verify                                                                    */

/* Both lists hold the same words; `args` may be a Python list repr
 * ("['moe_act', 'core_attn']") or None. */
static int same_words(const char *config, const char *args)
{
    char word[64];
    const char *p = args;
    int n_args = 0, n_cfg = 0;
    while (*p) {
        size_t len = 0;
        while (*p && !(isalnum((unsigned char)*p) || *p == '_'))
            p++;
        while (*p && (isalnum((unsigned char)*p) || *p == '_')) {
            if (len + 1 < sizeof word)
                word[len++] = *p;
            p++;
        }
        word[len] = '\0';
        if (!len || !strcmp(word, "None"))
            continue;
        if (!pk_word_in(config, word))
            return 0;
        n_args++;
    }
    for (p = config; *p;) {
        while (*p == ' ')
            p++;
        if (*p)
            n_cfg++;
        while (*p && *p != ' ')
            p++;
    }
    return n_args == n_cfg;
}

enum { V_STR, V_INT, V_BOOL, V_LIST, V_FLOAT };

static int args_match(int kind, const char *want, const char *arg)
{
    switch (kind) {
    case V_INT:
        return strtol(want, NULL, 10) ==
               (strcmp(arg, "None") ? strtol(arg, NULL, 10) : 0);
    case V_BOOL:
        return !strcmp(want, "true") ==
               (!strcmp(arg, "True") || !strcmp(arg, "true") || !strcmp(arg, "1"));
    case V_LIST:
        return same_words(want, arg);
    case V_FLOAT: {
        double a = 0, b = 0;
        return parse_fraction(want, &a) == 0 && parse_fraction(arg, &b) == 0 && a - b < 1e-9 &&
               b - a < 1e-9;
    }
    default:
        return !strcmp(want, arg) || (!strcmp(want, "none") && !strcmp(arg, "None"));
    }
}

static void verify_knob(const mt_ctx_v1 *ctx, mt_sink *out, const char *knob, int kind,
                        const char *def)
{
    char key[160];
    const char *want = pk_str(ctx->config, knob, def), *arg;
    if (!strcmp(want, def))
        return;
    snprintf(key, sizeof key, "args.%s", knob);
    arg = pk_get(ctx->evidence, key);
    if (!arg)
        pk_verdict(out, knob, MT_VERDICT_UNKNOWN,
                   "no arguments dump in the evidence; %s is read at startup, so the dump of a "
                   "short run settles it",
                   knob);
    else if (args_match(kind, want, arg))
        pk_verdict(out, knob, MT_VERDICT_APPLIED, "arguments dump: %s = %s (config \"%s\")",
                   knob, arg, want);
    else
        pk_verdict(out, knob, MT_VERDICT_NOT_APPLIED,
                   "arguments dump: %s = %s but the config asks for \"%s\"", knob, arg, want);
}

static int recompute_verify(void *state, const mt_ctx_v1 *ctx, mt_sink *out)
{
    (void)state;
    verify_knob(ctx, out, "recompute_granularity", V_STR, "none");
    verify_knob(ctx, out, "recompute_method", V_STR, "none");
    verify_knob(ctx, out, "recompute_num_layers", V_INT, "0");
    verify_knob(ctx, out, "recompute_modules", V_LIST, "");
    verify_knob(ctx, out, "fine_grained_activation_offloading", V_BOOL, "false");
    verify_knob(ctx, out, "offload_modules", V_LIST, "");
    verify_knob(ctx, out, "optimizer_cpu_offload", V_BOOL, "false");
    verify_knob(ctx, out, "optimizer_offload_fraction", V_FLOAT, "1.0");
    return 0;
}

MT_PLUGIN_EXPORT const mt_plugin_v1 moetune_plugin_v1 = {
    sizeof(mt_plugin_v1),
    MT_PLUGIN_ABI_VERSION,
    "recompute",
    "1.0.0",
    "activation recomputation, fine-grained activation offloading and optimizer CPU offload",
    recompute_knobs,
    (uint32_t)(sizeof recompute_knobs / sizeof recompute_knobs[0]),
    NULL,
    0,
    recompute_variables,
    (uint32_t)(sizeof recompute_variables / sizeof recompute_variables[0]),
    pk_init,
    NULL,
    recompute_propose,
    recompute_repair,
    recompute_check,
    recompute_render,
    recompute_verify,
};
