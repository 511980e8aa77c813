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
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_BOOL, "use_precision_aware_optimizer", NULL,
     "false", "the precision-aware optimizer, whose code path optimizer CPU offload reuses"},
};

static const mt_variable_v1 recompute_variables[] = {
    {sizeof(mt_variable_v1), "recompute",
     "recompute_granularity recompute_method recompute_num_layers recompute_modules",
     MT_WALL_MEMORY},
    {sizeof(mt_variable_v1), "activation_offload",
     "fine_grained_activation_offloading offload_modules", MT_WALL_MEMORY},
    {sizeof(mt_variable_v1), "optimizer_offload",
     "optimizer_cpu_offload optimizer_offload_fraction use_precision_aware_optimizer",
     MT_WALL_MEMORY},
};

/* Facts owned elsewhere that the rules read. */
typedef struct rc_env {
    long layers, pp, experts, shared;
    int mla, grouped_gemm, shared_overlap, fp8, fp8_delayed, dist_opt, gdn;
} rc_env;

/* This plugin's knobs. */
typedef struct rc {
    char gran[16], method[16];
    long num_layers;
    char modules[LIST_MAX]; /* canonical order, "" = empty */
    int offloading;
    char offload[LIST_MAX];
    int opt_offload, precision_aware;
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
    e->fp8 = strcmp(pk_str(ctx->config, "fp8_format", "none"), "none") != 0;
    /* Megatron's fp8_recipe defaults to delayed */
    e->fp8_delayed = pk_eq(ctx->config, "fp8_recipe", "delayed") ||
                     !strcmp(pk_str(ctx->config, "fp8_recipe", "none"), "none");
    e->dist_opt = pk_bool(ctx->config, "use_distributed_optimizer");
    e->gdn = variant && (!strcmp(variant, "gated_delta_net") ||
                         (pk_core_ge(ctx, "0.20") && (!strcmp(variant, "gdn") || !strcmp(variant, "gdn2"))));
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
    r->precision_aware = pk_bool(c, "use_precision_aware_optimizer");
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


/* ------------------------------------------------------------------------ */
/* Rules                                                                     */


/* The start-up rules a candidate of this plugin can run into, read from
 * the config: propose() offers nothing they refuse.  check() judges the
 * rendered command line itself (rc_startup). */
static int rc_rules(const mt_ctx_v1 *ctx, const rc_env *e, const rc *r)
{
    int selective = !strcmp(r->gran, "selective"), full = !strcmp(r->gran, "full");
    int has_method = strcmp(r->method, "none") != 0;
    const char *mods = effective_modules(r);
    if (!pk_core_ge(ctx, "0.18") && (r->offloading || !list_empty(r->offload)))
        return 1; /* needs_core */
    if (selective && (has_method || r->num_layers > 0))
        return 1;
    if (full && (!has_method || r->num_layers <= 0))
        return 1;
    if (selective) {
        if (pk_word_in(mods, "moe_act") && !e->grouped_gemm)
            return 1;
        if (pk_word_in(mods, "mla_up_proj") && !e->mla)
            return 1;
        if (pk_word_in(mods, "gdn_norm_out") && (!pk_core_ge(ctx, "0.19") || !e->gdn))
            return 1;
        if (pk_word_in(mods, "shared_experts") && e->shared > 0 && e->shared_overlap)
            return 1;
        if (e->fp8 && e->fp8_delayed &&
            (pk_word_in(mods, "moe_act") || pk_word_in(mods, "layernorm")))
            return 1;
    }
    if (r->offloading) {
        if (list_empty(r->offload))
            return 1;
        if (pk_word_in(r->offload, "attn_proj") && !pk_word_in(r->offload, "core_attn"))
            return 1;
        if (pk_core_ge(ctx, "0.19") && selective && pk_word_in(mods, "moe") &&
            (pk_word_in(r->offload, "moe_act") || pk_word_in(r->offload, "expert_fc1")))
            return 1;
        if (pk_te_ge(ctx, "2.10") && !pk_eq(ctx->config, "env.NVTE_CPU_OFFLOAD_V1", "1"))
            return 1;
    }
    if (r->opt_offload && !r->precision_aware)
        return 1;
    if (r->opt_offload && pk_bool(ctx->config, "fp8_param_gather") &&
        !pk_eq(ctx->config, "fp8_recipe", "delayed"))
        return 1;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Start-up rules: Megatron-LM's recompute and offloading checks            */
/* (validate_args, TransformerConfig), over the parsed namespace.            */

static size_t rs_word(const char **p, char *w, size_t n)
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

static void rs_add(char *list, size_t n, const char *word)
{
    size_t o = strlen(list), len = strlen(word);
    if (o + len + 2 < n) {
        if (o)
            list[o++] = ' ';
        memcpy(list + o, word, len + 1);
    }
}

/* The distinct words of list outside allowed, as a Python set repr
 * ("{'a', 'b'}"; Python's order is hash-random, so upstream's message is
 * compared by its prefix).  Returns how many. */
static int rs_invalid(const char *list, const char *const *allowed, char *out, size_t n)
{
    char w[64], seen[LIST_MAX] = "";
    const char *p = list ? list : "";
    size_t o = (size_t)snprintf(out, n, "{");
    int k = 0;
    while (rs_word(&p, w, sizeof w))
        if (!pk_value_in(allowed, w) && !pk_word_in(seen, w)) {
            rs_add(seen, sizeof seen, w);
            if (o < n)
                o += (size_t)snprintf(out + o, n - o, "%s'%s'", k ? ", " : "", w);
            k++;
        }
    if (o < n)
        snprintf(out + o, n - o, "}");
    return k;
}

/* The words of list that are in set, as a Python set repr. */
static int rs_both(const char *list, const char *const *set, char *out, size_t n)
{
    const char *const *s;
    size_t o = (size_t)snprintf(out, n, "{");
    int k = 0;
    for (s = set; *s; s++)
        if (pk_word_in(list, *s)) {
            if (o < n)
                o += (size_t)snprintf(out + o, n - o, "%s'%s'", k ? ", " : "", *s);
            k++;
        }
    if (o < n)
        snprintf(out + o, n - o, "}");
    return k;
}

static void rc_startup(const mt_ctx_v1 *ctx, mt_sink *out)
{
    static const char *const rm_015[] = {"core_attn", "moe_act", "layernorm", "mla_up_proj",
                                         "mlp", "moe", "shared_experts", NULL};
    static const char *const rm_019[] = {"core_attn", "moe_act", "layernorm", "mla_up_proj",
                                         "mlp", "moe", "shared_experts", "gdn_norm_out", NULL};
    static const char *const rm_main[] = {"core_attn", "moe_act", "layernorm", "mla_up_proj",
                                          "mlp", "moe", "shared_experts", "gdn_norm_out",
                                          "gdp_in_proj", "gdp_qkv", "mhc", NULL};
    static const char *const off_018[] = {"core_attn", "attn_proj", "expert_fc1", "moe_act",
                                          "attn_norm", "mlp_norm", "qkv_linear", NULL};
    static const char *const off_019[] = {"core_attn", "attn_proj", "expert_fc1", "moe_act",
                                          "attn_norm", "mlp_norm", "qkv_linear",
                                          "fused_group_mlp", NULL};
    static const char *const off_main[] = {"core_attn", "attn_proj", "expert_fc1", "moe_act",
                                           "attn_norm", "mlp_norm", "qkv_linear",
                                           "fused_group_mlp", "gdp_qkv", NULL};
    static const char *const in_moe[] = {"moe_act", "expert_fc1", "fused_group_mlp", NULL};
    static const char *const fc1_act[] = {"expert_fc1", "moe_act", NULL};
    int v018 = pk_core_ge(ctx, "0.18"), v019 = pk_core_ge(ctx, "0.19");
    int vmain = pk_core_ge(ctx, "0.20");
    const char *gran = pk_arg(ctx, "recompute_granularity");
    const char *method = pk_arg(ctx, "recompute_method");
    const char *given = pk_arg(ctx, "recompute_modules");
    const char *off = pk_str(pk_args(ctx), "offload_modules", "");
    const char *stack = pk_str(ctx->contract, "stack.megatron_core", "?");
    int nl = pk_arg_set(ctx, "recompute_num_layers");
    int selective = gran && !strcmp(gran, "selective"), full = gran && !strcmp(gran, "full");
    int fine = v018 && pk_arg_on(ctx, "fine_grained_activation_offloading");
    int cpu = v018 && pk_arg_int(ctx, "cpu_offloading_num_layers", 0) > 0;
    long layers = pk_arg_int(ctx, "num_layers", 0), pp = pk_arg_int(ctx, "pipeline_model_parallel_size", 1);
    char rm[LIST_MAX], bad[LIST_MAX];
    const char *gran2;

    /* validate_args */
    if (pk_arg_on(ctx, "distribute_saved_activations")) {
        if (pk_arg_int(ctx, "tensor_model_parallel_size", 1) <= 1)
            pk_startup(out, "recompute.distribute_needs_tp",
                       "distribute_saved_activations tensor_model_parallel_size",
                       "can distribute recomputed activations only across tensor model parallel "
                       "groups; use TP > 1 or drop --distribute-saved-activations");
        else if (!full)
            pk_startup(out, "recompute.distribute_needs_full",
                       "distribute_saved_activations recompute_granularity",
                       "distributed recompute activations is only application to full recompute "
                       "granularity; use --recompute-granularity full");
        else if (!method)
            pk_startup(out, "recompute.distribute_needs_method",
                       "distribute_saved_activations recompute_method",
                       "for distributed recompute activations to work you need to use a "
                       "recompute method ; set --recompute-method uniform or block");
    }
    if (selective && method)
        pk_startup(out, "recompute.selective_with_method", "recompute_method recompute_granularity",
                   "recompute method is not yet supported for selective recomputing granularity; "
                   "drop --recompute-method %s",
                   method);
    if (pk_arg_on(ctx, "optimizer_cpu_offload")) {
        /* the torch-FSDP2 block clears fp8_param_gather first (TE >= 2.0) */
        int fp8pg = pk_arg_on(ctx, "fp8_param_gather") &&
                    !(pk_arg_on(ctx, "use_torch_fsdp2") && pk_te_ge(ctx, "2.0"));
        if (!pk_arg_on(ctx, "use_precision_aware_optimizer"))
            pk_startup(out, "recompute.optimizer_offload_needs_precision_aware",
                       "optimizer_cpu_offload",
                       "The optimizer cpu offload must be used in conjunction with "
                       "`--use-precision-aware-optimizer`, as the hybrid device optimizer reuses "
                       "the code path of this flag.; add --use-precision-aware-optimizer");
        else if (fp8pg && !pk_arg_is(ctx, "fp8_recipe", "delayed"))
            pk_startup(out, "recompute.optimizer_offload_fp8_param_gather_delayed",
                       "optimizer_cpu_offload",
                       "When `--fp8-param-gather` is enabled, the optimizer cpu offload must be "
                       "used in conjunction with `--fp8-recipe delayed`. (the recipe is %s)",
                       pk_str(pk_args(ctx), "fp8_recipe", "None"));
    }
    if (fine) {
        const char *v1 = pk_env(ctx, "NVTE_CPU_OFFLOAD_V1");
        if (!pk_arg_is(ctx, "transformer_impl", "transformer_engine"))
            pk_startup(out, "recompute.fg_offload_needs_te_impl",
                       "fine_grained_activation_offloading",
                       "Fine-grained activation offloading is only supported with "
                       "transformer_engine implementation");
        else if (pk_te_ge(ctx, "2.10") && !(v1 && !strcmp(v1, "1")))
            pk_startup(out, "recompute.fg_offload_nvte_env", "fine_grained_activation_offloading",
                       "For fine-grained activation offloading with TE >= 2.10.0, "
                       "NVTE_CPU_OFFLOAD_V1 should be set to 1 to avoid offloading weights.; set "
                       "env NVTE_CPU_OFFLOAD_V1=1");
    }

    /* TransformerConfig: CPU (layer) offloading */
    if (cpu) {
        long n = pk_arg_int(ctx, "cpu_offloading_num_layers", 0);
        if (n >= layers)
            pk_startup(out, "recompute.cpu_offload_num_layers", "cpu_offloading_num_layers",
                       "CPU offloading can be done only for layers less than %ld", layers);
        if (pp > 1)
            pk_startup(out, "recompute.cpu_offload_pp", "cpu_offloading_num_layers",
                       "Currently there is no support for Pipeline parallelism with CPU "
                       "offloading (PP %ld)",
                       pp);
        if (gran)
            pk_startup(out, "recompute.cpu_offload_with_recompute",
                       "cpu_offloading_num_layers recompute_granularity",
                       "CPU offloading does not work when activation recomputation is enabled");
    }
    /* recompute */
    if (full && !method)
        pk_startup(out, "recompute.full_needs_method", "recompute_method recompute_granularity",
                   "Using recompute_granularity: full so recompute_method must be \"block\" or "
                   "\"uniform\"");
    else if (full && !nl)
        pk_startup(out, "recompute.full_needs_num_layers",
                   "recompute_num_layers recompute_granularity",
                   "When using recompute_granularity: full recompute_num_layers must be between 1 "
                   "and num_layers_per_pipeline_rank: %ld",
                   pp > 0 ? (layers - ((layers % pp + pp) % pp)) / pp : layers);
    if (selective && nl)
        pk_startup(out, "recompute.selective_with_num_layers",
                   "recompute_num_layers recompute_granularity",
                   "When using recompute_granularity: selective recompute_num_layers must be "
                   "None.; drop --recompute-num-layers");
    if (gran && pk_arg_on(ctx, "distribute_saved_activations") && pk_arg_on(ctx, "sequence_parallel"))
        pk_startup(out, "recompute.distribute_with_sp",
                   "distribute_saved_activations sequence_parallel",
                   "distribute_saved_activations: True must be false when sequence parallel is "
                   "enabled: True");
    snprintf(rm, sizeof rm, "%s", given ? given : "core_attn");
    if (selective) {
        const char *const *allowed = vmain ? rm_main : v019 ? rm_019 : rm_015;
        if (*rm && rs_invalid(rm, allowed, bad, sizeof bad))
            pk_startup(out, "recompute.modules_invalid", "recompute_modules",
                       "Invalid choices for recompute_modules: %s. (Megatron core %s)", bad,
                       stack);
        if (pk_word_in(rm, "moe_act") && !pk_arg_on(ctx, "moe_grouped_gemm"))
            pk_startup(out, "recompute.moe_act_needs_grouped_gemm",
                       "recompute_modules moe_grouped_gemm",
                       "moe_act in recompute_modules is only supported with moe_grouped_gemm.; "
                       "add --moe-grouped-gemm or drop moe_act");
        if (pk_word_in(rm, "mla_up_proj") && !pk_arg_on(ctx, "multi_latent_attention"))
            pk_startup(out, "recompute.mla_up_proj_needs_mla", "recompute_modules",
                       "mla_up_proj in recompute_modules is only supported with "
                       "multi_latent_attention.; drop mla_up_proj");
        if (v019 && pk_word_in(rm, "gdn_norm_out")) {
            const char *var = pk_str(pk_args(ctx), "experimental_attention_variant", "");
            int gdn = !strcmp(var, "gated_delta_net") ||
                      (vmain && (!strcmp(var, "gdn") || !strcmp(var, "gdn2")));
            if (!gdn)
                pk_startup(out, "recompute.gdn_norm_out_needs_gdn", "recompute_modules",
                           vmain ? "gdn_norm_out in recompute_modules is only supported with "
                                   "experimental_attention_variant='gdn' or 'gdn2'."
                                 : "gdn_norm_out in recompute_modules is only supported with "
                                   "experimental_attention_variant='gated_delta_net'.");
        }
        if (pk_word_in(rm, "shared_experts") && pk_arg_set(ctx, "moe_shared_expert_intermediate_size") &&
            pk_arg_on(ctx, "moe_shared_expert_overlap"))
            pk_startup(out, "recompute.shared_experts_with_overlap",
                       "recompute_modules moe_shared_expert_overlap",
                       "shared_experts recompute cannot work with --moe-shared-expert-overlap.; "
                       "drop one");
        if (pk_arg_on(ctx, "fp8") && (pk_word_in(rm, "moe_act") || pk_word_in(rm, "layernorm")) &&
            pk_arg_is(ctx, "fp8_recipe", "delayed"))
            pk_startup(out, "recompute.fp8_delayed_moe_act_layernorm", "recompute_modules fp8_recipe",
                       "Delayed scaling does not support moe_act and layernorm recompute for "
                       "fp8.; drop moe_act / layernorm or use another fp8 recipe");
    }
    gran2 = gran;
    if (pk_arg_on(ctx, "moe_layer_recompute")) {
        if (full)
            pk_startup(out, "recompute.moe_layer_recompute_with_full",
                       "recompute_granularity",
                       "Do not set --moe-layer-recompute with full recompute granularity. ");
        else {
            gran2 = "selective";
            if (!pk_word_in(rm, "moe"))
                rs_add(rm, sizeof rm, "moe");
        }
    }
    if (vmain && gran2 && !strcmp(gran2, "selective") && pk_word_in(rm, "mhc")) {
        if (!pk_arg_on(ctx, "enable_mhc_connections"))
            pk_startup(out, "recompute.mhc_needs_enable", "recompute_modules",
                       "'mhc' in recompute_modules requires enable_mhc_connections=True.");
        else if (pk_word_in(rm, "mlp"))
            pk_startup(out, "recompute.mhc_with_mlp", "recompute_modules",
                       "'mhc' and 'mlp' in recompute_modules cannot be used together. They use "
                       "different checkpoint mechanisms that may conflict.");
        else if (pk_arg_set(ctx, "mhc_recompute_layer_num") &&
                 pk_arg_int(ctx, "mhc_recompute_layer_num", 0) < 1)
            pk_startup(out, "recompute.mhc_recompute_layer_num", "recompute_modules",
                       "mhc_recompute_layer_num must be a positive integer when 'mhc' is in "
                       "recompute_modules.");
        else if (fine)
            pk_startup(out, "recompute.mhc_with_fg_offload",
                       "recompute_modules fine_grained_activation_offloading",
                       "'mhc' in recompute_modules + fine_grained_activation_offloading is not "
                       "yet supported.");
    }
    if (vmain && pk_arg_on(ctx, "enable_mhc_connections") && gran2 && !strcmp(gran2, "full"))
        pk_startup(out, "recompute.mhc_full_recompute", "recompute_granularity",
                   "enable_mhc_connections is not yet compatible with full activation recompute.");

    /* fine-grained activation offloading */
    if (fine) {
        const char *const *allowed = vmain ? off_main : v019 ? off_019 : off_018;
        int sel2 = gran2 && !strcmp(gran2, "selective");
        if (cpu)
            pk_startup(out, "recompute.fg_offload_with_cpu_offload",
                       "fine_grained_activation_offloading cpu_offloading_num_layers",
                       "fine_grained_activation_offloading cannot be enabled with cpu_offloading.");
        if (!off[strspn(off, " ")])
            pk_startup(out, "recompute.fg_offload_modules_empty", "offload_modules",
                       "AssertionError (fine-grained activation offloading with an empty "
                       "offload_modules); name the modules to offload with --offload-modules");
        if (rs_invalid(off, allowed, bad, sizeof bad))
            pk_startup(out, "recompute.fg_offload_modules_invalid", "offload_modules",
                       "Invalid choices for offload_modules: %s. (Megatron core %s)", bad, stack);
        if (pk_word_in(off, "attn_proj") && !pk_word_in(off, "core_attn"))
            pk_startup(out, "recompute.fg_offload_attn_proj_needs_core_attn", "offload_modules",
                       "attn_proj cannot be set to offload_modules alone without core_attn "
                       "because the input of attn_proj is the output of core_attn, which is "
                       "needed in core_attn.backward().");
        if (vmain && pk_word_in(off, "gdp_qkv") && sel2 && pk_word_in(rm, "gdp_in_proj"))
            pk_startup(out, "recompute.fg_offload_gdp_qkv_with_gdp_in_proj",
                       "offload_modules recompute_modules",
                       "gdp_qkv cannot be set in offload_modules together with gdp_in_proj in "
                       "recompute_modules");
        if (v019 && sel2 && pk_word_in(rm, "moe") && rs_both(off, in_moe, bad, sizeof bad))
            pk_startup(out, "recompute.fg_offload_inside_moe_recompute",
                       "offload_modules recompute_modules",
                       "Cannot offload %s while recomputing the entire MoE layer. Either remove "
                       "'moe' from --recompute-modules or remove it from --offload-modules.",
                       bad);
        if (v019) {
            double frac = pk_arg_num(ctx, "activation_offload_fraction", 1.0);
            if (pk_arg_int(ctx, "min_offloaded_tensor_size", 0) < 0)
                pk_startup(out, "recompute.fg_offload_min_tensor_size", "offload_modules",
                           "min_offloaded_tensor_size must be non-negative.");
            if (!(frac >= 0.0 && frac <= 1.0))
                pk_startup(out, "recompute.fg_offload_fraction", "offload_modules",
                           "activation_offload_fraction must be in range [0, 1].");
            if (pk_arg_int(ctx, "delta_offload_bytes_across_pp_ranks", 0) < 0)
                pk_startup(out, "recompute.fg_offload_delta_bytes", "offload_modules",
                           "delta_offload_bytes_across_pp_ranks must be non-negative.");
            if (pk_word_in(off, "fused_group_mlp")) {
                if (!pk_arg_on(ctx, "use_transformer_engine_op_fuser"))
                    pk_startup(out, "recompute.fg_offload_fused_group_mlp_needs_fuser",
                               "offload_modules",
                               "fused_group_mlp requires use_transformer_engine_op_fuser.");
                if (rs_both(off, fc1_act, bad, sizeof bad))
                    pk_startup(out, "recompute.fg_offload_fused_group_mlp_partial",
                               "offload_modules",
                               "fused_group_mlp offloads the whole fused grouped MLP and cannot "
                               "be combined with expert_fc1 or moe_act. Remove: %s",
                               bad);
            }
        }
    }
}

static int recompute_check(void *state, const mt_ctx_v1 *ctx, mt_sink *out)
{
    rc r;
    (void)state;
    rc_read(ctx->config, &r);
    if (!pk_core_ge(ctx, "0.18") && (r.offloading || !list_empty(r.offload)))
        pk_startup(out, "recompute.needs_core", "fine_grained_activation_offloading offload_modules",
                   "fine-grained activation offloading (offload_modules \"%s\") needs Megatron "
                   "core >= 0.18 (the stack is %s); turn it off",
                   r.offload, pk_str(ctx->contract, "stack.megatron_core", "?"));
    if (pk_args(ctx))
        rc_startup(ctx, out);
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
           space_ok_str(ctx, "optimizer_offload_fraction", a->fraction, b->fraction) &&
           space_ok_str(ctx, "use_precision_aware_optimizer", a->precision_aware ? "true" : "false",
                        b->precision_aware ? "true" : "false");
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
    if (a->precision_aware != b->precision_aware)
        pk_host->sink_set(out, "use_precision_aware_optimizer",
                          b->precision_aware ? "true" : "false");
}

/* Emits c when it is legal, inside the space and not the current config.
 * Returns 1 when emitted. */
static int offer(const mt_ctx_v1 *ctx, const rc_env *e, const rc *cur, const rc *c,
                 const char *variable, const char *summary, uint32_t walls, const char *why,
                 mt_sink *out)
{
    if (rc_rules(ctx, e, c) || !rc_space_ok(ctx, cur, c))
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
        c.precision_aware = 1; /* Megatron's hybrid device optimizer needs it */
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

    if (e.fp8 && e.fp8_delayed &&
        (pk_word_in(r.modules, "moe_act") || pk_word_in(r.modules, "layernorm"))) {
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
    /* Megatron reads the module list without selective recompute too (the
     * EP-overlap checks), so a list is rendered whenever it is set. */
    if (!list_empty(r.modules))
        render_list(out, dialect, "recompute_modules", "model", r.modules);
    /* r0.15 has no fine-grained offloading: check() reports needs_core */
    if (dialect != MT_DIALECT_MLM || pk_core_ge(ctx, "0.18")) {
        if (r.offloading)
            pk_render_bool(out, dialect, "fine_grained_activation_offloading", "model", NULL, 1);
        if (!list_empty(r.offload))
            render_list(out, dialect, "offload_modules", "model", r.offload);
    }
    if (r.opt_offload)
        pk_render_bool(out, dialect, "optimizer_cpu_offload", "optimizer", NULL, 1);
    if (r.precision_aware && dialect == MT_DIALECT_BRIDGE)
        pk_bridge_no_path(out, ctx, "--use-precision-aware-optimizer");
    else if (r.precision_aware)
        pk_render_bool(out, dialect, "use_precision_aware_optimizer", "optimizer", NULL, 1);
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
    verify_knob(ctx, out, "use_precision_aware_optimizer", V_BOOL, "false");
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
