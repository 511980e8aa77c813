/*
 * test_sim_legality.c - the sim and moetune's plugins agree on legality.
 *
 * The sim's legality (workers/sim/simlegal.c) plays the framework: upstream
 * Megatron-LM's start-up checks per version, written independently of the
 * plugins (tests/sim_conformance.c holds it to upstream's verdicts).  This
 * differential test draws at least 10,000 configs, deterministically: for
 * each example contract (and every .cfg in tests/contracts) it changes 1-6
 * knobs of the base config at random, values drawn from each knob's declared
 * values in the registry (integers and free-text knobs from per-knob pools
 * sized for the model), then compares
 *
 *     plugins: no violation except moetune policy rules   (mt_legality)
 *     sim:     sim_startup_argv() on the rendered command line (the
 *              contract's stack, GPU, world and environment) accepts, and
 *              sim_runtime_check() finds nothing the GPU cannot run
 *
 * Every disagreement is a bug in one of them.  The first few are printed
 * with the config diff and both verdicts.
 */
#include "testkit.h"

#include "sim.h"

#include <check.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIN_CONFIGS 10000
#define MAX_CHANGES 6
#define SHOW_DISAGREEMENTS 8
#define SEED 0x5eed1e9a11d17ULL

/* moetune POLICY rules: checks the plugins make on top of what the
 * framework enforces, so a config whose only violations are these is still
 * framework-legal (the sim must accept it).  Each with why it is policy: */
static const char *const policy_rules[] = {
    /* The router stays FP32 (megatron.md: "--moe-router-dtype fp32 (the router
     * stays FP32)") is moetune's numerical-stability policy; Megatron only
     * warns about >= 32 experts without FP32 routing. */
    "precision.router_fp32",
    /* moetune tunes BF16 training only; Megatron also trains in FP32/FP16. */
    "precision.bf16_required",
    /* --sequence-parallel at TP 1: Megatron turns it off with a warning
     * ("Disabling sequence parallelism because tensor model parallelism is
     * disabled"); moetune refuses the no-op knob. */
    "folding.sp_needs_tp",
    /* --moe-router-force-load-balancing is legal in Megatron; moetune only
     * allows it where the contract declares forced-balance (benchmark-only)
     * routing. */
    "dispatcher.force_balance_not_allowed",
    /* Full-iteration graphs need static shapes (drop-and-pad or forced
     * balance) for replay to be correct: moetune's policy; Megatron starts. */
    "cudagraph.full_iteration_needs_static_shapes",
    /* With EP overlap on Hopper, Megatron only warns about
     * CUDA_DEVICE_MAX_CONNECTIONS; moetune asks for a larger value. */
    "host.device_max_connections_ep_overlap",
    /* Knobs that do nothing in the config at hand: Megatron ignores them
     * silently, moetune refuses them so a config says what runs. */
    "host.gc_interval_needs_manual_gc",          /* --manual-gc-interval without --manual-gc */
    "recompute.offload_modules_need_offloading", /* modules without offloading */
    "recompute.method_needs_granularity",        /* method/layers without granularity */
    "recompute.modules_need_selective",          /* modules without selective */
    "recompute.shared_experts_needs_shared_expert", /* no shared expert to recompute */
    "overlap.shared_expert_overlap_needs_shared_expert", /* no shared expert to overlap */
    "cudagraph.modules_need_impl",               /* graph modules with graphs off */
    "dispatcher.num_sms_needs_flex",             /* SM count for a dispatcher that ignores it */
    /* moetune conventions Megatron does not enforce: */
    "dispatcher.flex_needs_backend",  /* Megatron defaults the flex backend to deepep; moetune
                                       * wants the backend named, so it is recorded */
    "cudagraph.warmup_steps_min",     /* at least one eager step before capture */
    "recompute.module_recomputed_and_offloaded", /* the same module both ways is waste */
    "precision.mxfp8_needs_e4m3",     /* TE's MXFP8 recipe also takes hybrid; moetune runs
                                       * MXFP8 as Megatron's recipes do, with e4m3 */
    /* A flex backend the GPU does not support is no framework error: Bridge
     * falls back to alltoall with a warning (megatron.md), and the sim models
     * the fallback.  moetune refuses it so a config says what runs. */
    "dispatcher.backend_unsupported_gpu",
    /* EP overlap with delayed-scaling FP8 or with FP4: Megatron asserts a BF16
     * (or FP16) model, which FP8/FP4 recipes still are; megatron.md's "BF16/FP16
     * compute path" is that assertion.  The overlap plugin's exclusion of
     * delayed FP8 and FP4 is its own conservative reading. */
    "overlap.ep_overlap_precision_recipe",
    /* Full recompute of more layers than a stage holds: Megatron's message
     * names the bound but only checks that the count is set; more layers
     * simply recompute them all. */
    "recompute.full_layers_within_stage",
    NULL,
};
/* Rule families by prefix the sim cannot judge: the allocator settings
 * (env.PYTORCH_CUDA_ALLOC_CONF) never reach it - sim_cfg_from_moetune drops
 * them and sim_cfg has no field for them.  Not all of these are policy:
 * host.alloc_conf_cuda_graphs is Megatron's own assertion (no
 * expandable_segments:True with CUDA graphs), exempted here only until the
 * sim carries the allocator setting. */
static const char *const policy_prefixes[] = {"host.alloc_conf_", NULL};

static int is_policy(const char *rule)
{
    int i;
    for (i = 0; policy_rules[i]; i++)
        if (!strcmp(rule, policy_rules[i]))
            return 1;
    for (i = 0; policy_prefixes[i]; i++)
        if (!strncmp(rule, policy_prefixes[i], strlen(policy_prefixes[i])))
            return 1;
    return 0;
}

/* ---- a small deterministic generator --------------------------------------- */

static uint64_t rng_state;

static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static size_t rng_below(size_t n) { return n ? (size_t)(rng_next() % n) : 0; }

/* The sim's start-up verdict on the command line moetune renders for cfg:
 * sim_startup_argv with the contract's stack (stack.dialect,
 * stack.transformer_engine), the GPU's capability and the world size.
 * 1 with the exception type in rule and "Type: message" in msg. */
static int sim_judge(tk *t, const mt_kv *cfg, char *rule, size_t rl, char *msg, size_t ml)
{
    mt_rendered r;
    mt_diag *d = mt_diag_new();
    sim_stack st;
    sim_verdict v;
    const char *cc = mt_kv_get(t->contract->hardware, "compute_capability");
    const char *ws = mt_kv_get(t->contract->hardware, "world_size");
    int rc;
    mt_rendered_init(&r);
    rc = mt_render(t->reg, t->contract, cfg, MT_DIALECT_MLM, &r, d);
    ck_assert_msg(rc == 0, "render failed: %s", mt_diag_count(d) ? mt_diag_at(d, 0)->message : "");
    mt_diag_destroy(&d);
    memset(&st, 0, sizeof st);
    st.megatron = mt_kv_get(t->contract->view, "stack.dialect");
    st.te = mt_kv_get(t->contract->view, "stack.transformer_engine");
    st.arch_major = cc ? atoi(cc) : 9;
    st.world = ws ? atol(ws) : 8;
    st.env = r.env;
    rc = sim_startup_argv(&st, r.argv.v, r.argv.n, &v, NULL);
    if (rc) {
        snprintf(rule, rl, "%s", v.type);
        snprintf(msg, ml, "%.40s: %.900s", v.type, v.msg);
    }
    mt_rendered_clear(&r);
    return rc;
}

/* ---- value pools ------------------------------------------------------------ */

typedef struct pool {
    const char *knob;
    const char *values; /* '|'-separated */
} pool;

/* Integers and free text: per-knob pools (legal and illegal values alike).
 * Knobs with no bearing on legality (logging, iterations, pure sizes) are
 * left out; so is moe_layer_freq, whose pattern would have to track
 * num_layers. */
static const pool pools[] = {
    {"num_layers", "48|47|61|60|64|32"},
    {"num_attention_heads", "32|128|24|20|16"},
    {"num_query_groups", "0|1|2|4|8|3"},
    {"num_experts", "8|64|128|256|96|6|3"},
    {"moe_router_topk", "1|2|4|8|16|300"},
    {"mtp_num_layers", "0|1|2"},
    {"moe_shared_expert_intermediate_size", "0|2048"},
    {"seq_length", "4096|2048|8192|1000|4098|6"},
    {"global_batch_size", "64|96|100|128|256|512|1000|1024|2048|4096"},
    {"moe_expert_capacity_factor", "|1.0|1.5"},
    {"tensor_model_parallel_size", "1|2|4|8|3"},
    {"pipeline_model_parallel_size", "1|2|4|8|16|3"},
    {"context_parallel_size", "1|2|4|3"},
    {"expert_model_parallel_size", "1|2|4|8|16|32|64|3|6"},
    {"expert_tensor_parallel_size", "0|1|2|4"},
    {"num_layers_per_virtual_pipeline_stage", "0|0|1|2|3|4|6"},
    {"num_virtual_stages_per_pipeline_rank", "0|0|1|2|3|4"},
    {"decoder_first_pipeline_num_layers", "0|0|1|2|3|4|5|6|8|12"},
    {"decoder_last_pipeline_num_layers", "0|0|1|2|3|4|5|6|8|12"},
    {"micro_batch_size", "1|2|3|4|8|16"},
    {"recompute_num_layers", "0|1|2|4|48"},
    {"moe_flex_dispatcher_num_sms", "0|16|20|24|32"},
    {"cuda_graph_warmup_steps", "0|1|3"},
    {"manual_gc_interval", "0|1|10|100"},
    {"optimizer_offload_fraction", "1.0|0.5"},
    {"env.CUDA_DEVICE_MAX_CONNECTIONS", "|1|8|32"},
    {"env.PYTORCH_CUDA_ALLOC_CONF", "|expandable_segments:True"},
    /* pipeline_model_parallel_layout: generated per model, see layouts() */
};

/* Knobs the test never changes: run length, logging, seeds, pure shapes. */
static const char *const frozen[] = {
    "hidden_size", "ffn_hidden_size", "kv_channels", "moe_ffn_hidden_size", "moe_layer_freq",
    "q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim",
    "vocab_size", "train_iters", "log_interval", "log_throughput", "eval_interval",
    "save_interval", "seed", NULL,
};

static const char *pool_of(const char *knob)
{
    size_t i;
    for (i = 0; i < sizeof pools / sizeof pools[0]; i++)
        if (!strcmp(pools[i].knob, knob))
            return pools[i].values;
    return NULL;
}

static int is_frozen(const char *knob)
{
    int i;
    for (i = 0; frozen[i]; i++)
        if (!strcmp(frozen[i], knob))
            return 1;
    return 0;
}

/* The i-th '|'-separated field of s into out. */
static void field(const char *s, size_t i, char *out, size_t n)
{
    while (i-- && s)
        s = strchr(s, '|') ? strchr(s, '|') + 1 : NULL;
    if (!s) {
        out[0] = '\0';
        return;
    }
    snprintf(out, n, "%.*s", (int)strcspn(s, "|"), s);
}

static size_t fields(const char *s)
{
    size_t n = 1;
    for (; *s; s++)
        n += *s == '|';
    return n;
}

/* Layouts for the model: stage counts 2..32 with the layers spread evenly
 * (written with the repeat grammar and cosmetic commas), plus broken ones. */
#define MAX_LAYOUTS 32
typedef struct layouts {
    char v[MAX_LAYOUTS][256];
    size_t n;
} layouts;

static void layout_even(layouts *ls, int layers, int mtp, int stages, int fuzz)
{
    char *out;
    size_t off = 0;
    int i, base, rem, run_n = -1, run_k = 0;
    if (ls->n >= MAX_LAYOUTS || stages < 2)
        return;
    out = ls->v[ls->n++];
    base = layers / stages;
    rem = layers % stages;
    /* first stage: embedding + its layers */
    off += (size_t)snprintf(out + off, 256 - off, "Et*%d|", base + (0 < rem) + fuzz);
    for (i = 1; i < stages - 1; i++) {
        int n = base + (i < rem);
        if (n == run_n) {
            run_k++;
            continue;
        }
        if (run_k)
            off += (size_t)snprintf(out + off, 256 - off, "(t*%d|)*%d,", run_n, run_k);
        run_n = n;
        run_k = 1;
    }
    if (run_k)
        off += (size_t)snprintf(out + off, 256 - off, "(t*%d|)*%d,", run_n, run_k);
    off += (size_t)snprintf(out + off, 256 - off, "t*%d", base + (stages - 1 < rem));
    for (i = 0; i < mtp; i++)
        off += (size_t)snprintf(out + off, 256 - off, "m");
    snprintf(out + off, 256 - off, "L");
}

static void make_layouts(layouts *ls, int layers, int mtp)
{
    static const int stage_counts[] = {2, 4, 8, 16, 32, 6, 12};
    size_t i;
    memset(ls, 0, sizeof *ls);
    snprintf(ls->v[ls->n++], 256, "%s", "");
    for (i = 0; i < sizeof stage_counts / sizeof stage_counts[0]; i++)
        layout_even(ls, layers, mtp, stage_counts[i], 0);
    layout_even(ls, layers, mtp, 8, 1);  /* one layer too many */
    layout_even(ls, layers, mtp, 4, -1); /* one too few */
    layout_even(ls, layers, mtp + 1, 8, 0); /* an MTP layer too many */
    snprintf(ls->v[ls->n++], 256, "Et*2|(tt|)*22t|(tt|)*7mL"); /* DeepSeek-V3, PP 8 x VPP 4 */
    snprintf(ls->v[ls->n++], 256, "Et|(tt|)*30mL");
    snprintf(ls->v[ls->n++], 256, "Et*%d|t*%dL", layers / 2, layers - layers / 2); /* no MTP */
    snprintf(ls->v[ls->n++], 256, "t*%d|Et*%dL", layers / 2, layers - layers / 2);  /* E late */
    snprintf(ls->v[ls->n++], 256, "Et*%d|t*%d", layers / 2, layers - layers / 2);   /* no L */
    snprintf(ls->v[ls->n++], 256, "Et*%d|mt*%dL", layers / 2, layers - layers / 2); /* m early */
    snprintf(ls->v[ls->n++], 256, "Ex|t*%dL", layers);                              /* bad char */
    snprintf(ls->v[ls->n++], 256, "(Et*%d|t*%d", layers / 2, layers - layers / 2);  /* unclosed */
}

/* A random value for knob, or NULL to leave it alone. */
static const char *draw_value(tk *t, const char *knob, const layouts *ls, char *buf, size_t n)
{
    const mt_plugin *owner = NULL;
    const mt_knob_v1 *k = mt_registry_knob(t->reg, knob, &owner);
    const char *p;
    size_t i, nv;
    if (!k || is_frozen(knob))
        return NULL;
    if (!strcmp(knob, "pipeline_model_parallel_layout")) {
        snprintf(buf, n, "%s", ls->v[rng_below(ls->n)]);
        return buf;
    }
    if ((p = pool_of(knob))) {
        field(p, rng_below(fields(p)), buf, n);
        return buf;
    }
    switch (k->type) {
    case MT_TYPE_BOOL:
        snprintf(buf, n, "%s", rng_below(2) ? "true" : "false");
        return buf;
    case MT_TYPE_ENUM:
        for (nv = 0; k->values && k->values[nv]; nv++)
            ;
        if (!nv)
            return NULL;
        snprintf(buf, n, "%s", k->values[rng_below(nv)]);
        return buf;
    case MT_TYPE_LIST: {
        size_t off = 0;
        buf[0] = '\0';
        for (i = 0; k->values && k->values[i]; i++)
            if (rng_below(3) == 0) /* subsets of one or two modules are the common case */
                off += (size_t)snprintf(buf + off, n - off, "%s%s", off ? " " : "", k->values[i]);
        return buf;
    }
    case MT_TYPE_INT: {
        static const char *const ints = "0|1|2|3|4|8|16|32";
        field(ints, rng_below(fields(ints)), buf, n);
        return buf;
    }
    default:
        return NULL;
    }
}

/* Settings a change usually comes with ('|'-separated knob=value), or NULL. */
static const char *companions(const char *knob, const char *val)
{
    static const struct {
        const char *knob, *val, *with;
    } table[] = {
        {"tensor_model_parallel_size", NULL, "sequence_parallel=true|env.CUDA_DEVICE_MAX_CONNECTIONS=1"},
        {"context_parallel_size", NULL, "env.CUDA_DEVICE_MAX_CONNECTIONS=1"},
        {"tp_comm_overlap", "true",
         "tensor_model_parallel_size=2|sequence_parallel=true|env.CUDA_DEVICE_MAX_CONNECTIONS=1"},
        {"pipeline_model_parallel_size", NULL, "num_virtual_stages_per_pipeline_rank=2"},
        {"overlap_param_gather", "true", "overlap_grad_reduce=true|use_distributed_optimizer=true"},
        {"delay_wgrad_compute", "true", "overlap_moe_expert_parallel_comm=true"},
        {"recompute_granularity", "full", "recompute_method=uniform|recompute_num_layers=1"},
        {"recompute_granularity", "selective", "recompute_method=none|recompute_num_layers=0"},
        {"recompute_modules", NULL, "recompute_granularity=selective"},
        {"offload_modules", NULL, "fine_grained_activation_offloading=true"},
        {"fine_grained_activation_offloading", "true", "offload_modules=core_attn attn_proj"},
        {"moe_token_dispatcher_type", "flex", "moe_flex_dispatcher_backend=hybridep"},
        {"moe_flex_dispatcher_backend", NULL, "moe_token_dispatcher_type=flex"},
        {"fp8_format", NULL, "fp8_recipe=tensorwise"},
        {"fp8_recipe", NULL, "fp8_format=e4m3"},
        {"fp4_format", NULL, "fp4_recipe=nvfp4"},
        {"fp4_recipe", NULL, "fp4_format=e2m1"},
        {"cuda_graph_impl", NULL, "cuda_graph_modules=moe_router moe_preprocess"},
        {"cuda_graph_modules", NULL, "cuda_graph_impl=transformer_engine"},
        {"moe_pad_expert_input_to_capacity", "true", "moe_expert_capacity_factor=1.0"},
        {"moe_expert_capacity_factor", NULL, "moe_pad_expert_input_to_capacity=true"},
        {"manual_gc_interval", NULL, "manual_gc=true"},
        {"optimizer_cpu_offload", "true", "use_distributed_optimizer=true"},
        {"moe_shared_expert_overlap", "true", "moe_shared_expert_intermediate_size=2048"},
    };
    size_t i;
    for (i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strcmp(table[i].knob, knob) && (!table[i].val || !strcmp(table[i].val, val)))
            return table[i].with;
    return NULL;
}

/* ---- the comparison ------------------------------------------------------------ */

typedef struct tally {
    long configs, rejected_sets, both_legal, both_illegal, policy_only, disagree;
    long plugin_only, sim_only;
} tally;

typedef struct rule_count {
    char rule[96];
    char example[400]; /* the first message */
    long n;
} rule_count;

#define MAX_RULES 256
static rule_count sim_rules[MAX_RULES], plugin_rules[MAX_RULES];
/* Rules behind the disagreements (for MT_SIM_LEGALITY_RULES=1). */
static rule_count plugin_only_rules[MAX_RULES], sim_only_rules[MAX_RULES];

static void count_rule(rule_count *rc, const char *rule, const char *message)
{
    int i;
    for (i = 0; i < MAX_RULES && rc[i].rule[0]; i++)
        if (!strcmp(rc[i].rule, rule))
            break;
    if (i == MAX_RULES)
        return;
    if (!rc[i].rule[0]) {
        snprintf(rc[i].rule, sizeof rc[i].rule, "%s", rule);
        snprintf(rc[i].example, sizeof rc[i].example, "%s", message);
    }
    rc[i].n++;
}

static void print_rules(const char *title, rule_count *rc, int examples)
{
    int i;
    fprintf(stderr, "  %s:", title);
    for (i = 0; i < MAX_RULES && rc[i].rule[0]; i++)
        if (examples)
            fprintf(stderr, "\n    %s=%ld: %s", rc[i].rule, rc[i].n, rc[i].example);
        else
            fprintf(stderr, "%s %s=%ld", i % 4 ? "" : "\n   ", rc[i].rule, rc[i].n);
    fprintf(stderr, "\n");
}

static void show(const char *contract, const mt_kv *base, const mt_kv *cfg,
                 const mt_violations *vs, int sim_rc, const char *rule, const char *msg,
                 const char *conv_err)
{
    mt_strlist diff = {0};
    size_t i;
    mt_config_diff(base, cfg, &diff);
    fprintf(stderr, "disagreement (%s):\n", contract);
    for (i = 0; i < diff.n; i++)
        fprintf(stderr, "    %s\n", diff.v[i]);
    fprintf(stderr, "  plugins: %s\n", vs->n ? "" : "legal");
    for (i = 0; i < vs->n; i++)
        fprintf(stderr, "    [%s]%s %s\n", vs->v[i].rule, is_policy(vs->v[i].rule) ? " (policy)" : "",
                vs->v[i].message);
    if (conv_err)
        fprintf(stderr, "  sim: cannot convert: %s\n", conv_err);
    else
        fprintf(stderr, "  sim: %s%s%s%s\n", sim_rc ? "[" : "legal", sim_rc ? rule : "",
                sim_rc ? "] " : "", sim_rc ? msg : "");
    mt_strlist_clear(&diff);
}

static int show_max = SHOW_DISAGREEMENTS;

static void run_contract(const char *path, long n, tally *tl, int *shown)
{
    mt_diag *d = mt_diag_new();
    tk *t = tk_open_path(path, d);
    const char **names;
    size_t n_names = 0, i;
    layouts ls;
    mt_kv *walk = NULL;
    const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    long j;
    ck_assert_msg(t && t->cfg && mt_diag_count(d) == 0, "%s: %s", path,
                  mt_diag_count(d) ? mt_diag_at(d, 0)->message : "cannot open");
    mt_diag_destroy(&d);
    names = mt_registry_knob_names(t->reg, &n_names);
    make_layouts(&ls, atoi(mt_kv_get(t->cfg, "num_layers")),
                 atoi(mt_kv_get(t->cfg, "mtp_num_layers") ? mt_kv_get(t->cfg, "mtp_num_layers") : "0"));
    for (j = 0; j < n; j++) {
        /* Half the draws start from the base config, half from the last
         * config both sides found legal: a walk through the legal region
         * reaches the combinations single changes of the base never do. */
        int from_walk = walk && rng_below(2);
        mt_kv *cfg = mt_kv_dup(from_walk ? walk : t->cfg);
        mt_violations vs = {0};
        sim_cfg sc;
        char err[512], rule[96], msg[1024];
        int changes = 1 + (int)rng_below(MAX_CHANGES), c, framework_illegal = 0, sim_rc = 0;
        int conv;
        for (c = 0; c < changes; c++) {
            char buf[256];
            const char *knob = names[rng_below(n_names)];
            const char *val = draw_value(t, knob, &ls, buf, sizeof buf);
            mt_diag *sd;
            if (!val) {
                c--; /* frozen or unknown: draw another knob */
                continue;
            }
            sd = mt_diag_new();
            if (mt_config_set(t->reg, cfg, knob, val, NULL, 0, "test", sd) != 0)
                tl->rejected_sets++; /* the knob model refuses the value before any plugin */
            mt_diag_destroy(&sd);
            /* Half the time the change brings the settings it usually comes
             * with, so the draw gets past the first prerequisite and reaches
             * the rules behind it. */
            if (rng_below(2)) {
                const char *with = companions(knob, val);
                char one[128];
                size_t k;
                for (k = 0; with && *with && k < fields(with); k++) {
                    char *eq;
                    field(with, k, one, sizeof one);
                    if (!(eq = strchr(one, '=')))
                        continue;
                    *eq = '\0';
                    sd = mt_diag_new();
                    if (mt_config_set(t->reg, cfg, one, eq + 1, NULL, 0, "test", sd) != 0)
                        tl->rejected_sets++;
                    mt_diag_destroy(&sd);
                }
            }
        }
        d = mt_diag_new();
        mt_legality(t->reg, t->contract, cfg, &vs, d);
        ck_assert_msg(mt_diag_count(d) == 0, "%s: plugin failure: %s", name,
                      mt_diag_count(d) ? mt_diag_at(d, 0)->message : "");
        mt_diag_destroy(&d);
        for (i = 0; i < vs.n; i++) {
            count_rule(plugin_rules, vs.v[i].rule, vs.v[i].message);
            if (!is_policy(vs.v[i].rule))
                framework_illegal = 1;
        }
        /* The sim judges the command line the host would launch (the
         * rendered Megatron-LM flags, fixed args included, and the run's
         * environment) with its own start-up code, then what only the GPU
         * finds on the model's view of the config. */
        conv = 0;
        sim_rc = sim_judge(t, cfg, rule, sizeof rule, msg, sizeof msg);
        if (!sim_rc && sim_cfg_from_moetune(&sc, cfg, t->contract->hardware, t->contract->view, err,
                                            sizeof err) == 0) {
            sim_verdict rv;
            if (sim_runtime_check(&sc, &rv)) {
                sim_rc = 1;
                snprintf(rule, sizeof rule, "%s", rv.rule);
                snprintf(msg, sizeof msg, "%.40s: %.900s", rv.type, rv.msg);
            }
        }
        if (sim_rc)
            count_rule(sim_rules, rule, msg);
        tl->configs++;
        if (conv != 0 || framework_illegal != (sim_rc != 0)) {
            tl->disagree++;
            if (conv == 0 && framework_illegal) {
                tl->plugin_only++;
                for (i = 0; i < vs.n; i++)
                    if (!is_policy(vs.v[i].rule))
                        count_rule(plugin_only_rules, vs.v[i].rule, vs.v[i].message);
            } else if (conv == 0) {
                tl->sim_only++;
                count_rule(sim_only_rules, rule, msg);
            }
            if ((*shown)++ < show_max)
                show(name, t->cfg, cfg, &vs, sim_rc, rule, msg, conv ? err : NULL);
        } else if (sim_rc) {
            tl->both_illegal++;
        } else {
            tl->both_legal++;
            if (vs.n)
                tl->policy_only++;
            mt_kv_destroy(&walk);
            walk = mt_kv_dup(cfg);
        }
        mt_violations_clear(&vs);
        mt_kv_destroy(&cfg);
    }
    mt_kv_destroy(&walk);
    free(names);
    tk_close(&t);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

START_TEST(sim_and_plugins_agree)
{
    static const char *const examples[] = {"qwen3-30b-a3b-h100x16.cfg", "deepseek-v3-gb200x256.cfg",
                                           "qwen3-30b-a3b-gb300x8.cfg"};
    char *paths[64];
    size_t n_paths = 0, i;
    tally tl = {0};
    int shown = 0;
    long per, total;
    DIR *dir;
    struct dirent *e;
    for (i = 0; i < sizeof examples / sizeof examples[0]; i++)
        paths[n_paths++] = tk_example(examples[i]);
    dir = opendir(MT_SOURCE_DIR "/tests/contracts");
    ck_assert_msg(dir != NULL, "cannot open tests/contracts");
    {
        char *extra[48];
        size_t n_extra = 0;
        while ((e = readdir(dir)) && n_extra < 48) {
            size_t len = strlen(e->d_name);
            if (len > 4 && !strcmp(e->d_name + len - 4, ".cfg")) {
                extra[n_extra] = malloc(sizeof MT_SOURCE_DIR + len + 32);
                sprintf(extra[n_extra], "%s/tests/contracts/%s", MT_SOURCE_DIR, e->d_name);
                n_extra++;
            }
        }
        qsort(extra, n_extra, sizeof extra[0], cmp_str); /* readdir order is not stable */
        for (i = 0; i < n_extra; i++)
            paths[n_paths++] = extra[i];
    }
    closedir(dir);
    if (getenv("MT_SIM_LEGALITY_SHOW"))
        show_max = atoi(getenv("MT_SIM_LEGALITY_SHOW"));
    /* MT_SIM_LEGALITY_N and MT_SIM_LEGALITY_SEED widen a search by hand. */
    total = getenv("MT_SIM_LEGALITY_N") ? atol(getenv("MT_SIM_LEGALITY_N")) : MIN_CONFIGS;
    if (total < MIN_CONFIGS)
        total = MIN_CONFIGS;
    per = (total + (long)n_paths - 1) / (long)n_paths;
    rng_state = getenv("MT_SIM_LEGALITY_SEED") ? strtoull(getenv("MT_SIM_LEGALITY_SEED"), NULL, 0)
                                               : SEED;
    for (i = 0; i < n_paths; i++)
        run_contract(paths[i], per, &tl, &shown);
    fprintf(stderr,
            "sim legality: %ld configs over %zu contracts: %ld legal on both sides (%ld with only "
            "policy violations), %ld illegal on both, %ld disagreements (%ld plugins-only "
            "illegal, %ld sim-only illegal); %ld knob values refused by the knob model\n",
            tl.configs, n_paths, tl.both_legal, tl.policy_only, tl.both_illegal, tl.disagree,
            tl.plugin_only, tl.sim_only, tl.rejected_sets);
    if (getenv("MT_SIM_LEGALITY_RULES")) {
        int ex = !strcmp(getenv("MT_SIM_LEGALITY_RULES"), "2");
        print_rules("sim rules", sim_rules, ex);
        print_rules("plugin rules", plugin_rules, ex);
        print_rules("plugin rules where only the plugins say illegal", plugin_only_rules, ex);
        print_rules("sim rules where only the sim says illegal", sim_only_rules, ex);
    }
    for (i = 0; i < n_paths; i++)
        free(paths[i]);
    ck_assert_int_ge(tl.configs, MIN_CONFIGS);
    ck_assert_msg(tl.disagree == 0, "%ld of %ld configs: the sim and the plugins disagree on "
                                    "legality (first ones above)",
                  tl.disagree, tl.configs);
    /* The draw must exercise both verdicts, or the agreement says little. */
    ck_assert_int_ge(tl.both_legal, tl.configs / 20);
    ck_assert_int_ge(tl.both_illegal, tl.configs / 20);
}
END_TEST

/* ---- the sim's own verdicts on known cases ---------------------------------------- */

static void sim_from(const char *contract, sim_cfg *sc)
{
    tk *t = tk_open(contract);
    char err[256];
    ck_assert_msg(sim_cfg_from_moetune(sc, t->cfg, t->contract->hardware, t->contract->view, err,
                                       sizeof err) == 0,
                  "%s: %s", contract, err);
    tk_close(&t);
}

/* sim_check's verdict for c after the "name=value" sets: want "" = legal,
 * else a substring of the exception line ("Type: message") it must raise. */
static void expect(const sim_cfg *base, const char *want, const char *sets)
{
    sim_cfg c = *base;
    char rule[96], msg[1024], buf[512], err[256], *save = NULL, *tok;
    int rc;
    snprintf(buf, sizeof buf, "%s", sets);
    for (tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(tok, '=');
        ck_assert_msg(eq != NULL, "bad set %s", tok);
        *eq = '\0';
        if (!strcmp(tok, "megatron")) {
            snprintf(c.megatron, sizeof c.megatron, "%s", eq + 1);
            continue;
        }
        if (!strcmp(tok, "te")) {
            snprintf(c.te_version, sizeof c.te_version, "%s", eq + 1);
            continue;
        }
        ck_assert_msg(sim_cfg_set(&c, tok, eq + 1, err, sizeof err) == 0, "%s: %s", tok, err);
    }
    rc = sim_check(&c, rule, sizeof rule, msg, sizeof msg);
    if (!*want) {
        ck_assert_msg(rc == 0, "[%s] expected legal, got [%s] %s", sets, rule, msg);
        return;
    }
    ck_assert_msg(rc != 0 && strstr(msg, want), "[%s] expected \"%s\", got %s", sets, want,
                  rc ? msg : "legal");
}

START_TEST(sim_known_cases)
{
    sim_cfg ds, qh, qb;
    sim_from("deepseek-v3-gb200x256.cfg", &ds);
    sim_from("qwen3-30b-a3b-h100x16.cfg", &qh);
    sim_from("qwen3-30b-a3b-gb300x8.cfg", &qb);
    /* The example bases run (the sim's model base: RoPE, no bias, no dropout). */
    expect(&ds, "", "");
    expect(&qh, "", "");
    expect(&qb, "", "");
    /* The layout grammar (upstream's PipelineParallelLayerLayout). */
    expect(&ds, "", "pipeline_model_parallel_layout=Et*2|(tt|)*22t|(tt|)*7mL");
    expect(&ds, "", "pipeline_model_parallel_layout=E,t|(t,t|)*30,m,L");
    expect(&ds, "The length of pipeline_model_parallel_layout must be divisible",
           "pipeline_model_parallel_layout=Et*3|(tt|)*29mL");
    expect(&ds, "Number of decoder layers 60must match num_layers 61",
           "pipeline_model_parallel_layout=Et|(tt|)*29t|mL");
    expect(&ds, "Number of mtp layers in layout must match", "pipeline_model_parallel_layout=Et|(tt|)*30L");
    expect(&ds, "decoder layers must be placed before MTP layers",
           "pipeline_model_parallel_layout=Et|(tt|)*29t|mtL");
    expect(&ds, "The first layer must be embedding, but got LayerType.decoder",
           "pipeline_model_parallel_layout=tE|(tt|)*30mL");
    expect(&ds, "The last layer must be loss, but got LayerType.mtp",
           "pipeline_model_parallel_layout=Et|(tt|)*30Lm");
    expect(&ds, "Invalid layer character: x", "pipeline_model_parallel_layout=Ex|(tt|)*30mL");
    expect(&ds, "No more than one of the following arguments", "num_virtual_stages_per_pipeline_rank=4");
    expect(&ds, "pipeline_model_parallel_layout cannot be set with other pipeline layout arguments",
           "decoder_first_pipeline_num_layers=5");
    /* Folding. */
    expect(&qh, "world size (16) is not divisible by total_model_size", "tensor_model_parallel_size=3");
    expect(&qh, "Number of experts should be a multiple of expert model parallel_size",
           "expert_model_parallel_size=3");
    expect(&qh, "eval_global_batch_size (1000) must be divisible", "global_batch_size=1000");
    expect(&qh, "global batch size (1000) is not divisible by micro batch size",
           "global_batch_size=1000 megatron=core_r0.15.0");
    expect(&qh, "seq-length should be a multiple of 2 * context-parallel-size",
           "context_parallel_size=2 seq_length=4098 env.CUDA_DEVICE_MAX_CONNECTIONS=1");
    expect(&qh, "Number of layers should be divisible by the pipeline-model-parallel size",
           "pipeline_model_parallel_size=16 num_layers=47");
    expect(&qh, "When interleaved schedule is used, pipeline-model-parallel size should be greater than 1",
           "num_virtual_stages_per_pipeline_rank=2");
    expect(&qh, "", "num_virtual_stages_per_pipeline_rank=1"); /* VPP 1 is none */
    expect(&qh, "number of layers at middle stage: 43 must be divisible",
           "pipeline_model_parallel_size=4 decoder_first_pipeline_num_layers=5 expert_model_parallel_size=4");
    /* TP: CUDA_DEVICE_MAX_CONNECTIONS before Blackwell; r0.15's NameError without SP. */
    expect(&qh, "CUDA_DEVICE_MAX_CONNECTIONS to 1", "tensor_model_parallel_size=2 sequence_parallel=true");
    expect(&qh, "", "tensor_model_parallel_size=2 sequence_parallel=true env.CUDA_DEVICE_MAX_CONNECTIONS=1");
    expect(&qh, "", "tensor_model_parallel_size=2 env.CUDA_DEVICE_MAX_CONNECTIONS=1");
    expect(&qh, "NameError: name 'warnings' is not defined",
           "tensor_model_parallel_size=2 env.CUDA_DEVICE_MAX_CONNECTIONS=1 megatron=core_r0.15.0");
    expect(&qb, "", "tensor_model_parallel_size=2 sequence_parallel=true");
    /* Precision: start-up vs what only the GPU finds. */
    expect(&qh, "MXFP8 (for all gemms) is only supported on Blackwell", "fp8_format=e4m3 fp8_recipe=mxfp8");
    expect(&qh, "a run-time failure", "fp4_format=e2m1 fp4_recipe=nvfp4");
    expect(&qb, "", "fp8_format=e4m3 fp8_recipe=mxfp8");
    expect(&qb, "--fp4-format and --fp8-format cannot be used simultaneously",
           "fp8_format=e4m3 fp8_recipe=mxfp8 fp4_format=e2m1 fp4_recipe=nvfp4");
    /* Overlap, dispatcher, recompute, graphs. */
    expect(&qh, "overlap_moe_expert_parallel_comm is only supported with expert model parallelism",
           "overlap_moe_expert_parallel_comm=true expert_model_parallel_size=1");
    expect(&qh, "overlap_moe_expert_parallel_comm must be enabled when enabling delay_wgrad_compute",
           "delay_wgrad_compute=true");
    expect(&qh, "", "moe_token_dispatcher_type=flex moe_flex_dispatcher_backend=hybridep");
    expect(&qh, "unrecognized arguments: --moe-flex-dispatcher-backend hybridep",
           "moe_token_dispatcher_type=flex moe_flex_dispatcher_backend=hybridep megatron=core_r0.15.0");
    expect(&qh, "", "moe_token_dispatcher_type=flex moe_flex_dispatcher_backend=deepep megatron=core_r0.15.0");
    expect(&qh, "DeepEP backend is only supported with flex token dispatcher",
           "moe_flex_dispatcher_backend=deepep megatron=core_r0.15.0");
    expect(&qh, "moe_act in recompute_modules is only supported with moe_grouped_gemm",
           "recompute_granularity=selective recompute_modules=moe_act moe_grouped_gemm=false");
    expect(&qh, "", "recompute_granularity=full recompute_method=uniform recompute_num_layers=1");
    expect(&qh, "full recompute is only supported with full iteration CUDA graph",
           "recompute_granularity=full recompute_method=uniform recompute_num_layers=1 "
           "cuda_graph_impl=transformer_engine cuda_graph_modules=moe_router");
    expect(&qh, "", "cuda_graph_impl=transformer_engine cuda_graph_modules=moe_router,moe_preprocess");
    expect(&qh, "moe_preprocess cuda graph is only supported with moe_router cuda graph",
           "cuda_graph_impl=transformer_engine cuda_graph_modules=attn,moe_preprocess");
    expect(&qh, "moe cuda graph is only supported with drop-padding MoE",
           "cuda_graph_impl=transformer_engine cuda_graph_modules=moe");
    expect(&qh, "CUDA graph with delay_wgrad_compute requires TE version >= 2.12.0",
           "cuda_graph_impl=transformer_engine cuda_graph_modules=attn delay_wgrad_compute=true "
           "overlap_grad_reduce=true te=2.9");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sim_legality");
    TCase *tc = tcase_create("differential");
    SRunner *sr;
    int failed;
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, sim_known_cases);
    tcase_add_test(tc, sim_and_plugins_agree);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
