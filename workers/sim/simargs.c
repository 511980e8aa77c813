/*
 * simargs.c - the sim's command line.
 *
 * Megatron-LM flags follow argparse as Megatron configures it
 * (allow_abbrev=False): `--flag value` or `--flag=value`, store_true flags
 * take no value, list flags take values up to the next option, the last
 * occurrence wins, unknown tokens are collected and reported together as
 * "unrecognized arguments" (exit 2), a bad value stops at once (exit 2).
 * Megatron-Bridge overrides (`section.field=value`, with --bridge) follow
 * Hydra/OmegaConf: an unknown key or a value of the wrong type is exit 1.
 * Every setting, whatever its spelling, ends in sim_cfg_set().
 */
#include "simargs.h"

#include "dialect.h"
#include "hardware.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum kind { K_VAL, K_BOOL, K_LIST };

/* Special handling beyond "canonical name + value". */
enum special {
    S_NONE,
    S_ROUTER_DTYPE,  /* record the spelling for the dump */
    S_LAYER_FREQ,    /* record the spelling for the dump */
    S_GRAPH_SCOPE,   /* older spelling of --cuda-graph-modules */
    S_STACK,         /* --sim-stack FILE */
    S_SEED,          /* --sim-seed N */
    S_ROUTING,       /* --sim-routing */
    S_GQA_GROUPS     /* --num-query-groups */
};

typedef struct flag {
    const char *flag;      /* without the leading dashes */
    const char *canonical; /* sim_cfg_set name; NULL = the flag with '_' for '-' */
    enum kind kind;
    enum special special;
    const char *metavar;   /* for the usage line; NULL = upper-cased dest */
} flag;

/* A flag whose sim_cfg_set name is its own with '_' for '-', and no special handling. */
#define F_VAL(name) {name, NULL, K_VAL, S_NONE, NULL}
#define F_BOOL(name) {name, NULL, K_BOOL, S_NONE, NULL}
#define F_LIST(name) {name, NULL, K_LIST, S_NONE, NULL}
#define F_ONE_OF(name, choices) {name, NULL, K_VAL, S_NONE, choices}
/* One of the sim's own valued flags: its sim_cfg_set name and its metavar. */
#define F_SIM(name, canonical, metavar) {name, canonical, K_VAL, S_NONE, metavar}

/* Every flag moetune renders (core/render.c and each plugin's knobs), the
 * Megatron flags around them the issue names, and the sim's own. */
static const flag flags[] = {
    /* model shape */
    F_VAL("num-layers"),
    F_VAL("hidden-size"),
    F_VAL("ffn-hidden-size"),
    F_VAL("num-attention-heads"),
    F_BOOL("group-query-attention"),
    F_VAL("num-query-groups"),
    F_VAL("kv-channels"),
    F_VAL("num-experts"),
    F_VAL("moe-router-topk"),
    F_VAL("moe-ffn-hidden-size"),
    F_VAL("moe-shared-expert-intermediate-size"),
    {"moe-layer-freq", NULL, K_VAL, S_LAYER_FREQ, NULL},
    F_BOOL("multi-latent-attention"),
    F_VAL("q-lora-rank"),
    F_VAL("kv-lora-rank"),
    F_VAL("qk-head-dim"),
    F_VAL("qk-pos-emb-head-dim"),
    F_VAL("v-head-dim"),
    F_VAL("mtp-num-layers"),
    F_VAL("vocab-size"),
    F_VAL("seq-length"),
    F_VAL("max-position-embeddings"),
    /* parallelism and batch */
    F_VAL("tensor-model-parallel-size"),
    F_VAL("pipeline-model-parallel-size"),
    F_VAL("context-parallel-size"),
    F_VAL("expert-model-parallel-size"),
    F_VAL("expert-tensor-parallel-size"),
    F_BOOL("sequence-parallel"),
    F_VAL("num-layers-per-virtual-pipeline-stage"),
    F_VAL("num-virtual-stages-per-pipeline-rank"),
    F_VAL("pipeline-model-parallel-layout"),
    F_VAL("decoder-first-pipeline-num-layers"),
    F_VAL("decoder-last-pipeline-num-layers"),
    F_VAL("micro-batch-size"),
    F_VAL("global-batch-size"),
    F_VAL("train-iters"),
    /* recompute and offload */
    F_ONE_OF("recompute-granularity", "{full,selective}"),
    F_ONE_OF("recompute-method", "{uniform,block}"),
    F_VAL("recompute-num-layers"),
    F_LIST("recompute-modules"),
    F_BOOL("fine-grained-activation-offloading"),
    F_LIST("offload-modules"),
    F_BOOL("optimizer-cpu-offload"),
    F_VAL("optimizer-offload-fraction"),
    F_BOOL("use-precision-aware-optimizer"),
    F_ONE_OF("exp-avg-dtype", "{fp32,fp16,bf16,fp8}"),
    F_ONE_OF("exp-avg-sq-dtype", "{fp32,fp16,bf16,fp8}"),
    F_ONE_OF("main-params-dtype", "{fp32,fp16}"),
    /* dispatcher */
    F_ONE_OF("moe-token-dispatcher-type", "{allgather,alltoall,flex}"),
    F_ONE_OF("moe-flex-dispatcher-backend", "{deepep,hybridep,ncclep}"),
    F_VAL("moe-flex-dispatcher-num-sms"),
    F_BOOL("moe-permute-fusion"),
    F_BOOL("moe-grouped-gemm"),
    F_BOOL("moe-router-force-load-balancing"),
    F_VAL("moe-expert-capacity-factor"),
    F_BOOL("moe-pad-expert-input-to-capacity"),
    /* overlap */
    F_BOOL("overlap-moe-expert-parallel-comm"),
    F_BOOL("delay-wgrad-compute"),
    F_BOOL("moe-shared-expert-overlap"),
    F_BOOL("overlap-grad-reduce"),
    F_BOOL("overlap-param-gather"),
    F_BOOL("tp-comm-overlap"),
    F_BOOL("use-distributed-optimizer"),
    /* precision */
    F_BOOL("bf16"),
    F_BOOL("fp16"),
    F_ONE_OF("fp8-format", "{e4m3,hybrid}"),
    F_ONE_OF("fp8-recipe", "{tensorwise,delayed,mxfp8,blockwise}"),
    F_ONE_OF("fp4-format", "{e2m1}"),
    F_ONE_OF("fp4-recipe", "{nvfp4}"),
    {"moe-router-dtype", NULL, K_VAL, S_ROUTER_DTYPE, "{fp32,fp64}"},
    /* CUDA graphs */
    F_ONE_OF("cuda-graph-impl", "{none,local,transformer_engine,full_iteration}"),
    F_LIST("cuda-graph-modules"),
    {"cuda-graph-scope", "cuda_graph_modules", K_LIST, S_GRAPH_SCOPE, NULL},
    F_VAL("cuda-graph-warmup-steps"),
    /* host */
    F_BOOL("manual-gc"),
    F_VAL("manual-gc-interval"),
    F_BOOL("moe-router-fusion"),
    /* run, logging, profiling */
    F_VAL("log-interval"),
    F_BOOL("log-throughput"),
    F_VAL("eval-interval"),
    F_VAL("eval-iters"),
    F_VAL("save-interval"),
    F_VAL("seed"),
    F_BOOL("mock-data"),
    F_BOOL("profile"),
    F_VAL("profile-step-start"),
    F_VAL("profile-step-end"),
    F_BOOL("use-pytorch-profiler"),
    F_VAL("tensorboard-dir"),
    /* the sim's own */
    F_SIM("sim-gpu", "gpu", "GPU"),
    F_SIM("sim-gpus-per-node", "gpus_per_node", "N"),
    F_SIM("sim-nodes", "nodes", "N"),
    F_SIM("sim-nvlink-domain", "nvlink_domain", "N"),
    {"sim-stack", "stack", K_VAL, S_STACK, "FILE"},
    {"sim-seed", "seed", K_VAL, S_SEED, "N"},
    F_SIM("sim-replicate", "replicate", "N"),
    F_SIM("sim-noise-offset", "noise_offset_sd", "SD"),
    F_SIM("sim-noise-jitter", "noise_jitter_cv", "CV"),
    F_SIM("sim-noise-rho", "noise_rho", "RHO"),
    {"sim-routing", "routing", K_VAL, S_ROUTING, "{forced,natural}"},
    F_SIM("sim-startup-s", "startup_s", "SECONDS"),
    F_SIM("sim-time-scale", "time_scale", "SCALE"),
    F_SIM("sim-inject", "inject", "{nan,skip,hang,nccl,crash,degrade}"),
    F_SIM("sim-inject-step", "inject_step", "STEP"),
    F_SIM("sim-inject-rank", "inject_rank", "RANK"),
    F_SIM("sim-step-scale", "step_scale", "FACTOR"),
    F_SIM("sim-loss-shift", "loss_shift", "FRACTION"),
    F_SIM("sim-memory-file", "memory_file", "PATH"),
    F_SIM("sim-cpu-bind", "launcher.cpu_bind", "{none,numa}"),
    F_BOOL("bridge"),
};
#define N_FLAGS (sizeof flags / sizeof flags[0])

static const flag *find_flag(const char *name, size_t len)
{
    size_t i;
    for (i = 0; i < N_FLAGS; i++)
        if (strlen(flags[i].flag) == len && !strncmp(flags[i].flag, name, len))
            return &flags[i];
    return NULL;
}

/* The flag's sim_cfg_set name; `buf` holds it when it is derived. */
static const char *flag_dest(const flag *f, char buf[static 80])
{
    size_t i;
    if (f->canonical)
        return f->canonical;
    for (i = 0; f->flag[i] && i < 79; i++)
        buf[i] = f->flag[i] == '-' ? '_' : f->flag[i];
    buf[i] = 0;
    return buf;
}

static int is_sim_flag(const flag *f) { return !strncmp(f->flag, "sim-", 4) || !strcmp(f->flag, "bridge"); }

/* ---- output helpers -------------------------------------------------------- */

/* argparse's usage: "usage: PROG [-h] [--x X] ...", wrapped as argparse wraps. */
static void usage(FILE *f, const char *prog, int bridge)
{
    size_t i, col;
    char item[160];
    col = (size_t)fprintf(f, "usage: %s [-h]", prog);
    for (i = 0; i < N_FLAGS; i++) {
        const flag *g = &flags[i];
        size_t k, n;
        if (bridge && !is_sim_flag(g))
            continue;
        n = (size_t)snprintf(item, sizeof item, "[--%s", g->flag);
        if (g->kind != K_BOOL && n < sizeof item) {
            char mv[96];
            if (g->metavar) {
                snprintf(mv, sizeof mv, "%s", g->metavar);
            } else {
                snprintf(mv, sizeof mv, "%s", g->flag);
                for (k = 0; mv[k]; k++)
                    mv[k] = mv[k] == '-' ? '_' : (char)toupper((unsigned char)mv[k]);
            }
            if (g->kind == K_LIST)
                n += (size_t)snprintf(item + n, sizeof item - n, " [%s ...]", mv);
            else
                n += (size_t)snprintf(item + n, sizeof item - n, " %s", mv);
        }
        if (n < sizeof item - 1)
            snprintf(item + n, sizeof item - n, "]");
        if (col + 1 + strlen(item) > 79) {
            fprintf(f, "\n%*s", (int)(strlen(prog) + 7), "");
            col = strlen(prog) + 7;
        } else {
            fputc(' ', f);
            col++;
        }
        col += (size_t)fprintf(f, "%s", item);
    }
    if (bridge)
        fprintf(f, " [overrides ...]");
    fputc('\n', f);
}

static int argparse_error(FILE *err, const sim_opts *o, int bridge, const char *msg)
{
    usage(err, o->prog, bridge);
    fprintf(err, "%s: error: %s\n", o->prog, msg);
    fflush(err);
    return 2;
}

/* sim_cfg_set's "argument <name>: why" as argparse words it for --flag. */
static int value_error(FILE *err, const sim_opts *o, int bridge, const char *flagname,
                       const char *canonical, const char *why)
{
    char msg[1400];
    size_t cl = strlen(canonical);
    const char *w = why;
    if (!strncmp(w, "argument ", 9) && !strncmp(w + 9, canonical, cl) && w[9 + cl] == ':')
        w += 9 + cl + 1;
    while (*w == ' ')
        w++;
    snprintf(msg, sizeof msg, "argument --%s: %.1200s", flagname, w);
    return argparse_error(err, o, bridge, msg);
}

/* ---- applying one setting -------------------------------------------------- */

typedef struct parse_state {
    sim_cfg *c;
    sim_opts *o;
    FILE *out, *err;
    int bridge;
    int nodes_set;     /* nodes came from a flag or MOETUNE_SIM_NODES */
} parse_state;

static int parse_u64(const char *v, uint64_t *out)
{
    char *end;
    unsigned long long n;
    if (!v || !*v || *v == '-')
        return -1;
    errno = 0;
    n = strtoull(v, &end, 10);
    if (*end || errno)
        return -1;
    *out = (uint64_t)n;
    return 0;
}

/* Applies canonical=value; special cases first.  0, or -1 with why. */
static int apply(parse_state *ps, const flag *f, const char *canonical, const char *value,
                 char *why, size_t wn)
{
    sim_cfg *c = ps->c;
    sim_opts *o = ps->o;
    int rc;
    if (f) {
        switch (f->special) {
        case S_STACK:
            if (!value || strlen(value) >= sizeof o->stack_file) {
                snprintf(why, wn, "path too long");
                return -1;
            }
            memcpy(o->stack_file, value, strlen(value) + 1);
            return 0;
        case S_SEED:
            if (parse_u64(value, &o->noise_seed)) {
                snprintf(why, wn, "invalid int value: '%.200s'", value ? value : "");
                return -1;
            }
            o->have_noise_seed = 1;
            return 0;
        default:
            break;
        }
    }
    rc = sim_cfg_set(c, canonical, value, why, wn);
    if (rc)
        return -1;
    if (f && f->special == S_ROUTER_DTYPE)
        snprintf(o->router_dtype, sizeof o->router_dtype, "%s", value ? value : "");
    if (f && f->special == S_LAYER_FREQ)
        snprintf(o->moe_layer_freq, sizeof o->moe_layer_freq, "%s", value ? value : "");
    if (f && f->special == S_ROUTING)
        o->routing_set = 1;
    if (f)
        o->graph_scope_flag = f->special == S_GRAPH_SCOPE ? 1
                              : !strcmp(canonical, "cuda_graph_modules") ? 0
                                                                          : o->graph_scope_flag;
    if (!strcmp(canonical, "nodes"))
        ps->nodes_set = 1;
    return 0;
}

/* ---- environment ------------------------------------------------------------ */

typedef struct envmap {
    const char *var;
    const char *flag; /* the --flag twin */
} envmap;

static const envmap envs[] = {
    {"MOETUNE_SIM_GPU", "sim-gpu"},
    {"MOETUNE_SIM_GPUS_PER_NODE", "sim-gpus-per-node"},
    {"MOETUNE_SIM_NODES", "sim-nodes"},
    {"MOETUNE_SIM_NVLINK_DOMAIN", "sim-nvlink-domain"},
    {"MOETUNE_SIM_STACK", "sim-stack"},
    {"MOETUNE_SIM_SEED", "sim-seed"},
    {"MOETUNE_SIM_REPLICATE", "sim-replicate"},
    {"MOETUNE_SIM_NOISE_OFFSET", "sim-noise-offset"},
    {"MOETUNE_SIM_NOISE_JITTER", "sim-noise-jitter"},
    {"MOETUNE_SIM_NOISE_RHO", "sim-noise-rho"},
    {"MOETUNE_SIM_ROUTING", "sim-routing"},
    {"MOETUNE_SIM_STARTUP_S", "sim-startup-s"},
    {"MOETUNE_SIM_TIME_SCALE", "sim-time-scale"},
    {"MOETUNE_SIM_INJECT", "sim-inject"},
    {"MOETUNE_SIM_INJECT_STEP", "sim-inject-step"},
    {"MOETUNE_SIM_INJECT_RANK", "sim-inject-rank"},
    {"MOETUNE_SIM_STEP_SCALE", "sim-step-scale"},
    {"MOETUNE_SIM_LOSS_SHIFT", "sim-loss-shift"},
    {"MOETUNE_SIM_MEMORY_FILE", "sim-memory-file"},
    {"MOETUNE_SIM_CPU_BIND", "sim-cpu-bind"},
    {"MOETUNE_SIM_BRIDGE", "bridge"},
};

static int apply_env(parse_state *ps)
{
    size_t i;
    char why[1024], msg[1400], dest[80];
    const char *v;
    for (i = 0; i < sizeof envs / sizeof envs[0]; i++) {
        const flag *f = find_flag(envs[i].flag, strlen(envs[i].flag));
        v = getenv(envs[i].var);
        if (!v || !*v || !f)
            continue;
        if (apply(ps, f, flag_dest(f, dest), v, why, sizeof why)) {
            snprintf(msg, sizeof msg, "environment %s: %.1200s", envs[i].var, why);
            return argparse_error(ps->err, ps->o, ps->bridge, msg);
        }
    }
    v = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
    if (v && *v && sim_cfg_set(ps->c, "env.CUDA_DEVICE_MAX_CONNECTIONS", v, why, sizeof why)) {
        snprintf(msg, sizeof msg, "environment CUDA_DEVICE_MAX_CONNECTIONS: %.1200s", why);
        return argparse_error(ps->err, ps->o, ps->bridge, msg);
    }
    return 0;
}

/* ---- Megatron-LM flags ------------------------------------------------------ */

/* argparse treats "-x..." as an option unless it looks like a negative number. */
static int looks_like_option(const char *t)
{
    if (t[0] != '-' || !t[1])
        return 0;
    if (isdigit((unsigned char)t[1]) || (t[1] == '.' && isdigit((unsigned char)t[2])))
        return 0;
    return 1;
}

/* Appends s to a growing list of unrecognized tokens. */
static int push_unknown(char **buf, size_t *len, const char *s)
{
    size_t n = strlen(s);
    char *nb = realloc(*buf, *len + n + 2);
    if (!nb)
        return -1;
    *buf = nb;
    if (*len)
        nb[(*len)++] = ' ';
    memcpy(nb + *len, s, n + 1);
    *len += n;
    return 0;
}

/* Joins values[0..n-1] with spaces into a fresh string. */
static char *join(char *const *values, int n)
{
    size_t len = 1;
    int i;
    char *s;
    for (i = 0; i < n; i++)
        len += strlen(values[i]) + 1;
    s = malloc(len);
    if (!s)
        return NULL;
    s[0] = '\0';
    len = 0;
    for (i = 0; i < n; i++) {
        size_t k = strlen(values[i]);
        if (i)
            s[len++] = ' ';
        memcpy(s + len, values[i], k);
        len += k;
        s[len] = '\0';
    }
    return s;
}

/* ---- Bridge overrides ------------------------------------------------------- */

typedef struct bfield {
    const char *section, *field, *canonical;
} bfield;

/* Fields a Bridge override may set, and the canonical names they map to. */
static const bfield bfields[] = {
    {"model", "num_layers", "num_layers"},
    {"model", "hidden_size", "hidden_size"},
    {"model", "ffn_hidden_size", "ffn_hidden_size"},
    {"model", "num_attention_heads", "num_attention_heads"},
    {"model", "num_query_groups", "num_query_groups"},
    {"model", "kv_channels", "kv_channels"},
    {"model", "num_moe_experts", "num_experts"},
    {"model", "moe_router_topk", "moe_router_topk"},
    {"model", "moe_ffn_hidden_size", "moe_ffn_hidden_size"},
    {"model", "moe_shared_expert_intermediate_size", "moe_shared_expert_intermediate_size"},
    {"model", "moe_layer_freq", "moe_layer_freq"},
    {"model", "multi_latent_attention", "multi_latent_attention"},
    {"model", "q_lora_rank", "q_lora_rank"},
    {"model", "kv_lora_rank", "kv_lora_rank"},
    {"model", "qk_head_dim", "qk_head_dim"},
    {"model", "qk_pos_emb_head_dim", "qk_pos_emb_head_dim"},
    {"model", "v_head_dim", "v_head_dim"},
    {"model", "mtp_num_layers", "mtp_num_layers"},
    {"model", "vocab_size", "vocab_size"},
    {"model", "seq_length", "seq_length"},
    {"model", "max_position_embeddings", "max_position_embeddings"},
    {"model", "moe_expert_capacity_factor", "moe_expert_capacity_factor"},
    {"model", "moe_pad_expert_input_to_capacity", "moe_pad_expert_input_to_capacity"},
    {"model", "tensor_model_parallel_size", "tensor_model_parallel_size"},
    {"model", "pipeline_model_parallel_size", "pipeline_model_parallel_size"},
    {"model", "context_parallel_size", "context_parallel_size"},
    {"model", "expert_model_parallel_size", "expert_model_parallel_size"},
    {"model", "expert_tensor_parallel_size", "expert_tensor_parallel_size"},
    {"model", "sequence_parallel", "sequence_parallel"},
    {"model", "virtual_pipeline_model_parallel_size", "num_virtual_stages_per_pipeline_rank"},
    {"model", "pipeline_model_parallel_layout", "pipeline_model_parallel_layout"},
    {"model", "num_layers_in_first_pipeline_stage", "decoder_first_pipeline_num_layers"},
    {"model", "num_layers_in_last_pipeline_stage", "decoder_last_pipeline_num_layers"},
    {"model", "recompute_granularity", "recompute_granularity"},
    {"model", "recompute_method", "recompute_method"},
    {"model", "recompute_num_layers", "recompute_num_layers"},
    {"model", "recompute_modules", "recompute_modules"},
    {"model", "fine_grained_activation_offloading", "fine_grained_activation_offloading"},
    {"model", "offload_modules", "offload_modules"},
    {"model", "moe_token_dispatcher_type", "moe_token_dispatcher_type"},
    {"model", "moe_flex_dispatcher_backend", "moe_flex_dispatcher_backend"},
    {"model", "moe_flex_dispatcher_num_sms", "moe_flex_dispatcher_num_sms"},
    {"model", "moe_permute_fusion", "moe_permute_fusion"},
    {"model", "moe_grouped_gemm", "moe_grouped_gemm"},
    {"model", "moe_router_force_load_balancing", "moe_router_force_load_balancing"},
    {"model", "moe_shared_expert_overlap", "moe_shared_expert_overlap"},
    {"model", "moe_router_dtype", "moe_router_dtype"},
    {"model", "moe_router_fusion", "moe_router_fusion"},
    {"model", "cuda_graph_impl", "cuda_graph_impl"},
    {"model", "cuda_graph_scope", "cuda_graph_modules"},
    {"model", "cuda_graph_modules", "cuda_graph_modules"},
    {"model", "cuda_graph_warmup_steps", "cuda_graph_warmup_steps"},
    {"model", "bf16", "bf16"},
    {"model", "fp16", "fp16"},
    {"train", "global_batch_size", "global_batch_size"},
    {"train", "micro_batch_size", "micro_batch_size"},
    {"train", "train_iters", "train_iters"},
    {"train", "eval_interval", "eval_interval"},
    {"train", "eval_iters", "eval_iters"},
    {"train", "manual_gc", "manual_gc"},
    {"train", "manual_gc_interval", "manual_gc_interval"},
    {"model", "overlap_moe_expert_parallel_comm", "overlap_moe_expert_parallel_comm"},
    {"model", "delay_wgrad_compute", "delay_wgrad_compute"},
    {"model", "tp_comm_overlap", "tp_comm_overlap"},
    {"model", "moe_deepep_num_sms", "moe_flex_dispatcher_num_sms"},
    {"model", "moe_hybridep_num_sms", "moe_flex_dispatcher_num_sms"},
    {"validation", "eval_interval", "eval_interval"},
    {"validation", "eval_iters", "eval_iters"},
    {"dataset", "seq_length", "seq_length"},
    {"dataset", "sequence_length", "seq_length"},
    {"comm_overlap", "overlap_moe_expert_parallel_comm", "overlap_moe_expert_parallel_comm"},
    {"comm_overlap", "delay_wgrad_compute", "delay_wgrad_compute"},
    {"comm_overlap", "overlap_grad_reduce", "overlap_grad_reduce"},
    {"comm_overlap", "overlap_param_gather", "overlap_param_gather"},
    {"comm_overlap", "tp_comm_overlap", "tp_comm_overlap"},
    {"ddp", "use_distributed_optimizer", "use_distributed_optimizer"},
    {"ddp", "overlap_grad_reduce", "overlap_grad_reduce"},
    {"ddp", "overlap_param_gather", "overlap_param_gather"},
    {"mixed_precision", "bf16", "bf16"},
    {"mixed_precision", "fp16", "fp16"},
    {"mixed_precision", "fp8", "fp8_format"},
    {"mixed_precision", "fp8_recipe", "fp8_recipe"},
    {"mixed_precision", "fp4", "fp4_format"},
    {"mixed_precision", "fp4_recipe", "fp4_recipe"},
    {"optimizer", "optimizer_cpu_offload", "optimizer_cpu_offload"},
    {"optimizer", "optimizer_offload_fraction", "optimizer_offload_fraction"},
    {"optimizer", "use_precision_aware_optimizer", "use_precision_aware_optimizer"},
    {"optimizer", "exp_avg_dtype", "exp_avg_dtype"},
    {"optimizer", "exp_avg_sq_dtype", "exp_avg_sq_dtype"},
    {"optimizer", "main_params_dtype", "main_params_dtype"},
    {"optimizer", "use_distributed_optimizer", "use_distributed_optimizer"},
    {"logger", "log_interval", "log_interval"},
    {"logger", "log_throughput", "log_throughput"},
    {"logger", "tensorboard_dir", "tensorboard_dir"},
    {"checkpoint", "save_interval", "save_interval"},
    {"rng", "seed", "seed"},
    {"dataset", "mock", "mock_data"},
    {"profiling", "use_pytorch_profiler", "use_pytorch_profiler"},
    {"profiling", "use_nsys_profiler", "profile"},
    {"profiling", "profile_step_start", "profile_step_start"},
    {"profiling", "profile_step_end", "profile_step_end"},
};

/* Bridge's config classes, for Hydra's messages. */
static const char *section_class(const char *s, size_t n)
{
    static const struct {
        const char *s, *cls;
    } m[] = {{"model", "GPTModelProvider"},           {"train", "TrainingConfig"},
             {"comm_overlap", "CommOverlapConfig"},   {"ddp", "DistributedDataParallelConfig"},
             {"mixed_precision", "MixedPrecisionConfig"}, {"optimizer", "OptimizerConfig"},
             {"logger", "LoggerConfig"},              {"checkpoint", "CheckpointConfig"},
             {"rng", "RNGConfig"},                    {"dataset", "GPTDatasetConfig"},
             {"validation", "ValidationConfig"},
             {"profiling", "ProfilingConfig"}};
    size_t i;
    for (i = 0; i < sizeof m / sizeof m[0]; i++)
        if (strlen(m[i].s) == n && !strncmp(m[i].s, s, n))
            return m[i].cls;
    return NULL;
}

/* Hydra's report of a failed override; exit status 1. */
static int bridge_error(parse_state *ps, const char *tok, const char *kind, const char *what,
                        const char *key, const char *cls)
{
    FILE *err = ps->err;
    fprintf(err, "Error executing job with overrides: ['%.2000s']\n", tok);
    fprintf(err, "Traceback (most recent call last):\n");
    fprintf(err, "  File \"/opt/Megatron-Bridge/scripts/training/run_recipe.py\", line 121, in main\n");
    fprintf(err, "    cfg = process_config_with_overrides(cfg, cli_overrides)\n");
    fprintf(err, "%s: %s\n    full_key: %s\n    object_type=%s\n", kind, what, key, cls);
    fflush(err);
    return 1;
}

/* Converts a Python/YAML literal to what sim_cfg_set reads.  Returns a
 * pointer into buf (or value itself). */
static const char *bridge_value(const char *value, char *buf, size_t n)
{
    size_t len = strlen(value);
    /* quoted strings */
    if (len >= 2 && (value[0] == '"' || value[0] == '\'') && value[len - 1] == value[0]) {
        if (len - 2 >= n)
            return NULL;
        memcpy(buf, value + 1, len - 2);
        buf[len - 2] = '\0';
        return buf;
    }
    return value;
}

/* A mixed_precision recipe name (after "mixed_precision="): the precisions it sets; 0 or 1. */
static int apply_mixed_precision(parse_state *ps, const char *tok, const char *eq)
{
    static const struct {
        const char *name, *f8, *r8, *f4;
    } mp[] = {{"bf16_mixed", NULL, NULL, NULL},
              {"bf16_with_fp8_current_scaling_mixed", "hybrid", "tensorwise", NULL},
              {"bf16_with_fp8_delayed_scaling_mixed", "hybrid", "delayed", NULL},
              {"bf16_with_fp8_subchannel_scaling_mixed", "hybrid", "blockwise", NULL},
              {"bf16_with_mxfp8_mixed", "e4m3", "mxfp8", NULL},
              {"bf16_with_nvfp4_mixed", NULL, NULL, "nvfp4"}};
    char why[1024];
    size_t i;
    int rc;
    why[0] = '\0';
    for (i = 0; i < sizeof mp / sizeof mp[0]; i++)
        if (!strcmp(eq + 1, mp[i].name))
            break;
    if (i == sizeof mp / sizeof mp[0]) {
        snprintf(why, sizeof why, "Could not override 'mixed_precision'. Value '%.300s' is "
                 "not a registered mixed precision recipe", eq + 1);
        return bridge_error(ps, tok, "omegaconf.errors.ValidationError", why,
                            "mixed_precision", "ConfigContainer");
    }
    rc = sim_cfg_set(ps->c, "bf16", "true", why, sizeof why);
    if (!rc && mp[i].f8)
        rc = sim_cfg_set(ps->c, "fp8_format", mp[i].f8, why, sizeof why);
    if (!rc && mp[i].r8)
        rc = sim_cfg_set(ps->c, "fp8_recipe", mp[i].r8, why, sizeof why);
    if (!rc && mp[i].f4)
        rc = sim_cfg_set(ps->c, "fp4_format", "e2m1", why, sizeof why);
    if (!rc && mp[i].f4)
        rc = sim_cfg_set(ps->c, "fp4_recipe", mp[i].f4, why, sizeof why);
    if (rc)
        return bridge_error(ps, tok, "omegaconf.errors.ValidationError", why,
                            "mixed_precision", "ConfigContainer");
    return 0;
}

/* An explicit moe_layer_freq list [0,0,0,1,...] (leading dense layers) as the sim writes it,
 * in vbuf; -1 when it is not k zeros then ones. */
static int layer_freq_list(const char *val, char *vbuf, size_t n)
{
    long k = 0, ones = 0;
    const char *q = val + 1;
    while (*q == '0' || *q == '1') {
        if (*q == '0' && ones)
            break;
        *q == '0' ? k++ : ones++;
        q++;
        if (*q == ',')
            q++;
    }
    if (strcmp(q, "]") || !ones)
        return -1;
    snprintf(vbuf, n, "([0]*%ld+[1]*%ld)", k, ones);
    return 0;
}

/* Sets a Bridge field through its Megatron-LM flag; 1 with why filled if the value is bad. */
static int apply_bridge_value(parse_state *ps, const bfield *bf, const char *val, char *why,
                              size_t whylen)
{
    const flag *f = NULL;
    size_t k;
    char dest[80];
    for (k = 0; k < N_FLAGS; k++)
        if (!strcmp(flag_dest(&flags[k], dest), bf->canonical) && flags[k].special != S_GRAPH_SCOPE) {
            f = &flags[k];
            break;
        }
    if (apply(ps, f, bf->canonical, val, why, whylen)) {
        /* "argument <name>: reason" -> "reason" */
        size_t cl = strlen(bf->canonical);
        if (!strncmp(why, "argument ", 9) && !strncmp(why + 9, bf->canonical, cl) &&
            why[9 + cl] == ':')
            memmove(why, why + 10 + cl + (why[10 + cl] == ' '), strlen(why + 10 + cl) + 1);
        return 1;
    }
    return 0;
}

/* One Bridge override section.field=value (or a mixed_precision recipe); 0, or 1 after
 * printing Hydra's error. */
static int apply_override(parse_state *ps, const char *tok)
{
    const char *eq = strchr(tok, '='), *dot = strchr(tok, '.');
    const char *val, *cls;
    char section[64], field[128], key[200], why[1024], vbuf[SIM_PATH_MAX + 8];
    const bfield *bf = NULL;
    size_t i, sl, fl;
    int rc;
    why[0] = '\0';
    if (eq && (size_t)(eq - tok) == 15 && !strncmp(tok, "mixed_precision", 15))
        return apply_mixed_precision(ps, tok, eq);
    if (!eq || !dot || dot > eq || tok[0] == '+' || tok[0] == '~') {
        fprintf(ps->err, "hydra.errors.OverrideParseException: mismatched input '%.200s': "
                         "expecting key=value (section.field=value)\n",
                tok);
        return 1;
    }
    sl = (size_t)(dot - tok);
    fl = (size_t)(eq - dot - 1);
    snprintf(key, sizeof key, "%.*s", (int)(eq - tok > 190 ? 190 : eq - tok), tok);
    cls = section_class(tok, sl);
    if (!cls || sl >= sizeof section) {
        snprintf(why, sizeof why, "Could not override '%s'. Key '%.*s' not in 'ConfigContainer'",
                 key, (int)(sl > 100 ? 100 : sl), tok);
        return bridge_error(ps, tok, "omegaconf.errors.ConfigAttributeError", why, key,
                            "ConfigContainer");
    }
    memcpy(section, tok, sl);
    section[sl] = '\0';
    if (fl == 0 || fl >= sizeof field || memchr(dot + 1, '.', fl))
        goto unknown;
    memcpy(field, dot + 1, fl);
    field[fl] = '\0';
    for (i = 0; i < sizeof bfields / sizeof bfields[0]; i++)
        if (!strcmp(bfields[i].section, section) && !strcmp(bfields[i].field, field)) {
            bf = &bfields[i];
            break;
        }
    if (!bf)
        goto unknown;
    val = bridge_value(eq + 1, vbuf, sizeof vbuf);
    if (!val) {
        snprintf(why, sizeof why, "value too long");
        goto badvalue;
    }
    /* an explicit moe_layer_freq list [0,0,0,1,...]: leading dense layers */
    if (!strcmp(bf->canonical, "moe_layer_freq") && val[0] == '[') {
        if (layer_freq_list(val, vbuf, sizeof vbuf)) {
            snprintf(why, sizeof why, "the sim reads k dense layers then MoE ones");
            goto badvalue;
        }
        val = vbuf;
    }
    if (!strcmp(val, "None") || !strcmp(val, "null") || !strcmp(val, "~")) {
        /* unset: the field's own "nothing" */
        rc = sim_cfg_set(ps->c, bf->canonical, "none", why, sizeof why);
        if (rc)
            rc = sim_cfg_set(ps->c, bf->canonical, "0", why, sizeof why);
        if (rc)
            rc = sim_cfg_set(ps->c, bf->canonical, "", why, sizeof why);
        if (rc)
            goto badvalue;
        if (!strcmp(bf->canonical, "moe_router_dtype"))
            ps->o->router_dtype[0] = '\0';
        return 0;
    }
    if (apply_bridge_value(ps, bf, val, why, sizeof why))
        goto badvalue;
    if (!strcmp(section, "profiling") && !strcmp(field, "use_pytorch_profiler") &&
        ps->c->use_pytorch_profiler)
        ps->c->profile = 1;
    return 0;
unknown:
    snprintf(why, sizeof why, "Could not override '%s'. Key '%.*s' not in '%s'", key,
             (int)(fl > 150 ? 150 : fl), dot + 1, cls);
    return bridge_error(ps, tok, "omegaconf.errors.ConfigAttributeError", why, key, cls);
badvalue:
    {
        char what[1400];
        snprintf(what, sizeof what, "Could not override '%s'. Value '%.300s' could not be "
                                    "converted: %.600s",
                 key, eq + 1, why);
        return bridge_error(ps, tok, "omegaconf.errors.ValidationError", what, key, cls);
    }
}

/* ---- stack file -------------------------------------------------------------- */

static char *trim(char *s)
{
    char *e;
    while (*s == ' ' || *s == '\t')
        s++;
    e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == '\n'))
        *--e = '\0';
    return s;
}

int sim_stack_load(sim_cfg *c, const char *path, char *msg, size_t n)
{
    static const struct {
        const char *key;
        unsigned bit;
    } bits[] = {{"pdl", SIM_STACK_PDL},
                {"graph_shared_expert", SIM_STACK_GRAPH_SHARED_EXPERT},
                {"cpu_work", SIM_STACK_CPU_WORK},
                {"quant_in_norm", SIM_STACK_QUANT_IN_NORM},
                {"no_hybridep", SIM_STACK_NO_HYBRIDEP}};
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0;
    int rc = 0;
    if (!f) {
        snprintf(msg, n, "%.900s: cannot open stack file: %s", path, strerror(errno));
        return -1;
    }
    while (getline(&line, &cap, f) >= 0) {
        char *p, *eq, *key, *val, *end;
        size_t i;
        lineno++;
        p = strchr(line, '#');
        if (p)
            *p = '\0';
        p = trim(line);
        if (!*p)
            continue;
        eq = strchr(p, '=');
        if (!eq) {
            snprintf(msg, n, "%.900s:%ld: malformed line (expected key = value)", path, lineno);
            rc = -1;
            break;
        }
        *eq = '\0';
        key = trim(p);
        val = trim(eq + 1);
        if (!*key || !*val) {
            snprintf(msg, n, "%.900s:%ld: malformed line (expected key = value)", path, lineno);
            rc = -1;
            break;
        }
        if (!strcmp(key, "commit")) {
            if (strlen(val) >= sizeof c->stack_name) {
                snprintf(msg, n, "%.900s:%ld: commit is too long", path, lineno);
                rc = -1;
                break;
            }
            memcpy(c->stack_name, val, strlen(val) + 1);
            continue;
        }
        if (!strcmp(key, "slowdown")) {
            double d;
            errno = 0;
            d = strtod(val, &end);
            if (*end || errno || !(d > 0) || d > 1e6) {
                snprintf(msg, n, "%.900s:%ld: slowdown must be a positive number, not '%.100s'",
                         path, lineno, val);
                rc = -1;
                break;
            }
            c->stack_slowdown = d;
            continue;
        }
        for (i = 0; i < sizeof bits / sizeof bits[0]; i++)
            if (!strcmp(key, bits[i].key))
                break;
        if (i == sizeof bits / sizeof bits[0]) {
            snprintf(msg, n,
                     "%.900s:%ld: unknown key '%.100s' (known: commit, slowdown, pdl, "
                     "graph_shared_expert, cpu_work, quant_in_norm, no_hybridep)",
                     path, lineno, key);
            rc = -1;
            break;
        }
        if (!strcmp(val, "1") || !strcmp(val, "true") || !strcmp(val, "True")) {
            c->stack |= bits[i].bit;
        } else if (!strcmp(val, "0") || !strcmp(val, "false") || !strcmp(val, "False")) {
            c->stack &= ~bits[i].bit;
        } else {
            snprintf(msg, n, "%.900s:%ld: %s takes 0 or 1, not '%.100s'", path, lineno, key, val);
            rc = -1;
            break;
        }
    }
    free(line);
    fclose(f);
    return rc;
}

/* ---- Bridge's VPP size against a pipeline layout ----------------------------------- */

static long read_repeat(const char *p, const char **end)
{
    long k = 0;
    if (*p != '*' || p[1] < '0' || p[1] > '9') {
        *end = p;
        return -1;
    }
    for (p++; *p >= '0' && *p <= '9'; p++)
        if (k < 100000000L)
            k = k * 10 + (*p - '0');
    *end = p;
    return k;
}

/* Stages of a layout as Megatron unrolls it ("(...)*k", "x*k", '|' between
 * stages), or -1 when it is too big to count. */
static long layout_stages(const char *s)
{
    long bars = 0;
    const char *p = s, *end;
    while (*p) {
        long k;
        if (*p == '(') {
            const char *close = strchr(p, ')');
            if (close && (k = read_repeat(close + 1, &end)) >= 0) {
                long in = 0;
                const char *q;
                for (q = p + 1; q < close; q++)
                    if (*q == '|') {
                        long r = q[1] == '*' ? read_repeat(q + 1, &end) : -1;
                        in += r >= 0 ? r : 1;
                    }
                if (in > 0 && k > 100000000L / in)
                    return -1;
                bars += in * k;
                p = end;
                continue;
            }
        }
        if (*p == '|') {
            k = read_repeat(p + 1, &end);
            bars += k >= 0 ? k : 1;
            p = k >= 0 ? end : p + 1;
        } else {
            p++;
        }
        if (bars > 100000000L)
            return -1;
    }
    return bars + 1;
}

/* ---- the parse ----------------------------------------------------------------- */

/* The Megatron-LM and TE versions the sim plays, from the environment; 0 or an exit status. */
static int parse_stack_versions(parse_state *ps, const mt_mlm_dialect **dialect)
{
    sim_cfg *c = ps->c;
    sim_opts *o = ps->o;
    char msg[1400];
    const char *mv = getenv("MOETUNE_SIM_MEGATRON"), *te = getenv("MOETUNE_SIM_TE");
    const char *canon = sim_megatron_version(mv && *mv ? mv : "main");
    if (!canon) {
        snprintf(msg, sizeof msg,
                 "environment MOETUNE_SIM_MEGATRON: unknown Megatron-LM version '%.100s' (known: "
                 "core_r0.15.0, core_v0.18.0, core_v0.19.0, main)",
                 mv);
        return argparse_error(ps->err, o, ps->bridge, msg);
    }
    snprintf(c->megatron, sizeof c->megatron, "%s", canon);
    snprintf(c->te_version, sizeof c->te_version, "%s", te && *te ? te : "2.12");
    *dialect = mt_dialect_find(canon);
    return 0;
}

#define PARSE_NOMEM (-2) /* parse_token's "out of memory" */

/* Applies one known flag with its value(s) from argv (advancing *i past them); 0 or exit status. */
static int parse_flag(parse_state *ps, const flag *f, const char *inline_val, int argc,
                      char *const argv[], int *i)
{
    char why[1024], msg[1400], buf[80];
    const char *dest = flag_dest(f, buf);
    int rc;

    switch (f->kind) {
    case K_BOOL:
        if (inline_val && strcmp(f->flag, "bridge")) {
            snprintf(msg, sizeof msg, "argument --%s: ignored explicit argument '%.1000s'",
                     f->flag, inline_val);
            return argparse_error(ps->err, ps->o, ps->bridge, msg);
        }
        if (apply(ps, f, dest, inline_val ? inline_val : "true", why, sizeof why))
            return value_error(ps->err, ps->o, ps->bridge, f->flag, dest, why);
        break;
    case K_VAL: {
        const char *v = inline_val;
        if (!v) {
            if (*i + 1 >= argc || looks_like_option(argv[*i + 1])) {
                snprintf(msg, sizeof msg, "argument --%s: expected one argument", f->flag);
                return argparse_error(ps->err, ps->o, ps->bridge, msg);
            }
            v = argv[++*i];
        }
        if (apply(ps, f, dest, v, why, sizeof why))
            return value_error(ps->err, ps->o, ps->bridge, f->flag, dest, why);
        break;
    }
    case K_LIST: {
        char *joined;
        int start = *i + 1, n = 0;
        if (inline_val) {
            joined = join((char *const *)&inline_val, 1);
        } else {
            while (start + n < argc && !looks_like_option(argv[start + n]))
                n++;
            joined = join(argv + start, n);
            *i += n;
        }
        if (!joined)
            return PARSE_NOMEM;
        rc = apply(ps, f, dest, joined, why, sizeof why);
        free(joined);
        if (rc)
            return value_error(ps->err, ps->o, ps->bridge, f->flag, dest, why);
        break;
    }
    }
    return 0;
}

/* One token of argv (with the values it takes, advancing *i): a flag, an override or an unknown
 * one kept for the error; 0, an exit status, SIM_ARGS_HELP or PARSE_NOMEM. */
static int parse_token(parse_state *ps, const mt_mlm_dialect *dialect, int argc,
                       char *const argv[], int *i, char **unknown, size_t *unknown_len)
{
    const char *tok = argv[*i];
    const char *name, *eq, *inline_val = NULL;
    const flag *f;
    size_t nlen;

    if (!strcmp(tok, "-h") || !strcmp(tok, "--help")) {
        usage(ps->out, ps->o->prog, ps->bridge);
        fflush(ps->out);
        return SIM_ARGS_HELP;
    }
    if (!looks_like_option(tok)) {
        if (ps->bridge && strchr(tok, '='))
            return apply_override(ps, tok);
        if (push_unknown(unknown, unknown_len, tok))
            return PARSE_NOMEM;
        return 0;
    }
    if (tok[1] != '-') { /* a single-dash option argparse does not know */
        if (push_unknown(unknown, unknown_len, tok))
            return PARSE_NOMEM;
        return 0;
    }
    name = tok + 2;
    eq = strchr(name, '=');
    nlen = eq ? (size_t)(eq - name) : strlen(name);
    if (eq)
        inline_val = eq + 1;
    f = find_flag(name, nlen);
    if (f && ps->bridge && !is_sim_flag(f))
        f = NULL; /* Bridge takes overrides, not Megatron-LM flags */
    if (!f && !ps->bridge && dialect) {
        /* A flag of the Megatron-LM version the sim plays that the model
         * has no use for (--qk-layernorm, --rotary-base, ...): the
         * start-up check (sim_startup_argv) judged it; skip it and its
         * values as argparse would consume them. */
        char fname[256];
        const mt_flag *mf;
        snprintf(fname, sizeof fname, "--%.*s", (int)(nlen < 250 ? nlen : 250), name);
        mf = mt_dialect_flag(dialect, fname);
        if (mf) {
            if (!inline_val && strcmp(mf->nargs, "0")) {
                if (!strcmp(mf->nargs, "-")) {
                    if (*i + 1 < argc && !looks_like_option(argv[*i + 1]))
                        ++*i;
                } else {
                    while (*i + 1 < argc && !looks_like_option(argv[*i + 1]))
                        ++*i;
                }
            }
            return 0;
        }
    }
    if (!f) {
        if (push_unknown(unknown, unknown_len, tok))
            return PARSE_NOMEM;
        return 0;
    }
    return parse_flag(ps, f, inline_val, argc, argv, i);
}

/* The sim's own settings checked, WORLD_SIZE read, the stack file loaded; 0 or an exit status. */
static int parse_check_sim(parse_state *ps)
{
    sim_cfg *c = ps->c;
    sim_opts *o = ps->o;
    FILE *err = ps->err;
    char why[1024], msg[1400];
    const char *ws;
    int i;

    if (o->stack_file[0] && sim_stack_load(c, o->stack_file, why, sizeof why)) {
        fprintf(err, "%s: error: %s\n", o->prog, why);
        fflush(err);
        return 2;
    }
    if (c->gpus_per_node < 1) {
        snprintf(msg, sizeof msg, "argument --sim-gpus-per-node: must be at least 1, not %d",
                 c->gpus_per_node);
        return argparse_error(err, o, ps->bridge, msg);
    }
    ws = getenv("WORLD_SIZE");
    if (!ps->nodes_set && ws && *ws) {
        char *end;
        long w = strtol(ws, &end, 10);
        if (*end || w < 1 || w > 1000000 || w % c->gpus_per_node) {
            snprintf(msg, sizeof msg,
                     "environment WORLD_SIZE=%.40s is not a positive multiple of %d GPUs per node",
                     ws, c->gpus_per_node);
            return argparse_error(err, o, ps->bridge, msg);
        }
        c->nodes = (int)(w / c->gpus_per_node);
    }
    if (c->nodes < 1) {
        snprintf(msg, sizeof msg, "argument --sim-nodes: must be at least 1, not %d", c->nodes);
        return argparse_error(err, o, ps->bridge, msg);
    }
    if ((long)c->nodes * c->gpus_per_node > 1000000) {
        snprintf(msg, sizeof msg, "argument --sim-nodes: %d nodes x %d GPUs is too large", c->nodes,
                 c->gpus_per_node);
        return argparse_error(err, o, ps->bridge, msg);
    }
    if (!sim_gpu(c)) {
        const char *const *names = mt_gpu_names();
        size_t off = (size_t)snprintf(msg, sizeof msg, "argument --sim-gpu: invalid choice: '%s' "
                                                       "(choose from ",
                                      c->gpu);
        for (i = 0; names[i] && off < sizeof msg; i++)
            off += (size_t)snprintf(msg + off, sizeof msg - off, "%s'%s'", i ? ", " : "", names[i]);
        if (off < sizeof msg)
            snprintf(msg + off, sizeof msg - off, ")");
        return argparse_error(err, o, ps->bridge, msg);
    }
    if (c->nvlink_domain < 0) {
        snprintf(msg, sizeof msg, "argument --sim-nvlink-domain: must not be negative");
        return argparse_error(err, o, ps->bridge, msg);
    }
    if (c->replicate < 0) {
        snprintf(msg, sizeof msg, "argument --sim-replicate: must not be negative");
        return argparse_error(err, o, ps->bridge, msg);
    }
    if (!(c->startup_s >= 0) || c->startup_s > 1e7 || !(c->time_scale >= 0) || c->time_scale > 1e3) {
        snprintf(msg, sizeof msg, "argument --sim-startup-s/--sim-time-scale: out of range");
        return argparse_error(err, o, ps->bridge, msg);
    }
    if (!(c->step_scale > 0) || c->step_scale > 100 || !(c->loss_shift > -1) || c->loss_shift > 1) {
        snprintf(msg, sizeof msg, "argument --sim-step-scale/--sim-loss-shift: the step scale "
                                  "must be in (0, 100], the loss shift in (-1, 1]");
        return argparse_error(err, o, ps->bridge, msg);
    }
    if (!(c->noise_offset_sd >= 0) || c->noise_offset_sd > 1 || !(c->noise_jitter_cv >= 0) ||
        c->noise_jitter_cv > 1 || !(c->noise_rho >= 0) || c->noise_rho >= 1) {
        snprintf(msg, sizeof msg, "argument --sim-noise-*: offset and jitter must be in [0, 1], "
                                  "rho in [0, 1)");
        return argparse_error(err, o, ps->bridge, msg);
    }
    if (c->train_iters < 0 || c->log_interval < 1) {
        snprintf(msg, sizeof msg, c->train_iters < 0 ? "argument --train-iters: must not be negative"
                                                     : "argument --log-interval: must be positive");
        return argparse_error(err, o, ps->bridge, msg);
    }
    return 0;
}

/* What Bridge's rules and the defaults derive once the command line is read. */
static int parse_derive(parse_state *ps)
{
    sim_cfg *c = ps->c;
    sim_opts *o = ps->o;
    FILE *err = ps->err;

    if (!ps->bridge)
        c->bridge = 0;
    else
        c->bridge = 1;
    /* Bridge has one VPP size: with a layout it is the layout's stage count
     * over PP (Megatron-LM derives it from the layout), not a second way to
     * ask for VPP */
    if (ps->bridge && c->pipeline_model_parallel_layout[0] && c->num_virtual_stages_per_pipeline_rank > 0 &&
        c->pipeline_model_parallel_size > 0) {
        long st = layout_stages(c->pipeline_model_parallel_layout);
        long pp = c->pipeline_model_parallel_size;
        if (st < 0 || st % pp || st / pp != c->num_virtual_stages_per_pipeline_rank) {
            fprintf(err,
                    "Traceback (most recent call last):\n  File "
                    "\"/opt/Megatron-Bridge/src/megatron/bridge/models/gpt_provider.py\", line 212, "
                    "in finalize\n    assert ...\nAssertionError: virtual_pipeline_model_parallel_size "
                    "(%d) does not match pipeline_model_parallel_layout (%ld stages over "
                    "pipeline_model_parallel_size %ld)\n",
                    c->num_virtual_stages_per_pipeline_rank, st, pp);
            fflush(err);
            return 1;
        }
        c->num_virtual_stages_per_pipeline_rank = 0;
    }
    /* Bridge has no GQA switch: groups fewer than heads are GQA, groups equal
     * to heads are plain multi-head attention (as Megatron-LM without
     * --group-query-attention) */
    if (ps->bridge && c->num_query_groups > 0) {
        if (c->num_query_groups == c->num_attention_heads) {
            c->num_query_groups = 0;
            c->group_query_attention = 0;
        } else {
            c->group_query_attention = 1;
        }
    }
    if (!o->routing_set)
        c->routing_natural = !c->moe_router_force_load_balancing;
    if (!o->have_noise_seed)
        o->noise_seed = (uint64_t)(int64_t)c->seed;
    if (c->global_batch_size <= 0)
        c->global_batch_size = c->micro_batch_size * sim_dp(c);
    return SIM_ARGS_OK;
}

int sim_args_parse(sim_cfg *c, sim_opts *o, int argc, char *const argv[], FILE *out, FILE *err)
{
    parse_state ps;
    char *unknown = NULL;
    size_t unknown_len = 0;
    char msg[1400];
    int i, rc;
    const mt_mlm_dialect *dialect = NULL;

    memset(o, 0, sizeof *o);
    memset(&ps, 0, sizeof ps);
    ps.c = c;
    ps.o = o;
    ps.out = out;
    ps.err = err;
    /* --bridge anywhere switches the whole command line to Bridge rules */
    for (i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--bridge") || !strcmp(argv[i], "--bridge=true") ||
            !strcmp(argv[i], "--bridge=True"))
            ps.bridge = 1;
    {
        const char *b = getenv("MOETUNE_SIM_BRIDGE");
        if (b && (!strcmp(b, "1") || !strcmp(b, "true")))
            ps.bridge = 1;
    }
    o->prog = ps.bridge ? "run_recipe.py" : "pretrain_gpt.py";
    if ((rc = parse_stack_versions(&ps, &dialect)) != 0)
        return rc;

    if ((rc = apply_env(&ps)) != 0)
        return rc;

    for (i = 1; i < argc; i++) {
        rc = parse_token(&ps, dialect, argc, argv, &i, &unknown, &unknown_len);
        if (rc == PARSE_NOMEM)
            goto nomem;
        if (rc) {
            free(unknown);
            return rc;
        }
    }
    if (unknown) {
        int r;
        snprintf(msg, sizeof msg, "unrecognized arguments: %.1300s", unknown);
        free(unknown);
        r = argparse_error(err, o, ps.bridge, msg);
        return r;
    }

    if ((rc = parse_check_sim(&ps)) != 0)
        return rc;
    return parse_derive(&ps);
nomem:
    free(unknown);
    fprintf(err, "%s: error: out of memory\n", o->prog);
    return 2;
}

/* ---- the arguments dump --------------------------------------------------------- */

#define DUMP_MAX 128
#define DUMP_VAL 1100

typedef struct dump_entry {
    const char *name;
    char value[DUMP_VAL];
} dump_entry;

typedef struct dump {
    dump_entry e[DUMP_MAX];
    int n;
} dump;

static char *slot(dump *d, const char *name)
{
    if (d->n >= DUMP_MAX)
        return NULL;
    d->e[d->n].name = name;
    d->e[d->n].value[0] = '\0';
    return d->e[d->n++].value;
}

static void d_int(dump *d, const char *name, long v)
{
    char *s = slot(d, name);
    if (s)
        snprintf(s, DUMP_VAL, "%ld", v);
}

/* An int whose "unset" (0) prints as None. */
static void d_opt(dump *d, const char *name, long v)
{
    char *s = slot(d, name);
    if (s)
        snprintf(s, DUMP_VAL, v ? "%ld" : "None", v);
}

static void d_bool(dump *d, const char *name, int v)
{
    char *s = slot(d, name);
    if (s)
        snprintf(s, DUMP_VAL, "%s", v ? "True" : "False");
}

static void d_str(dump *d, const char *name, const char *v)
{
    char *s = slot(d, name);
    if (s)
        snprintf(s, DUMP_VAL, "%s", v && *v ? v : "None");
}

/* Python's repr of a float: the shortest text that reads back the same. */
static void py_float(char *s, size_t n, double v)
{
    int p;
    for (p = 1; p <= 17; p++) {
        snprintf(s, n, "%.*g", p, v);
        if (strtod(s, NULL) == v)
            break;
    }
    if (!strpbrk(s, ".eninf"))
        strncat(s, ".0", n - strlen(s) - 1);
}

static void d_float(dump *d, const char *name, double v, int none_if_zero)
{
    char *s = slot(d, name);
    if (!s)
        return;
    if (none_if_zero && v == 0)
        snprintf(s, DUMP_VAL, "None");
    else
        py_float(s, DUMP_VAL, v);
}

/* The enum's word, None for index 0 when that means unset. */
static void d_enum(dump *d, const char *name, const char *const *words, int v, int none_at_0)
{
    int i, ok = 0;
    for (i = 0; words[i]; i++)
        if (i == v)
            ok = 1;
    d_str(d, name, (none_at_0 && v == 0) || !ok ? NULL : words[v]);
}

/* A bit set as a Python list of quoted words, None when empty. */
static void d_list(dump *d, const char *name, const char *const *words, unsigned bits)
{
    char *s = slot(d, name);
    size_t off = 0;
    int i, first = 1;
    if (!s)
        return;
    if (!bits) {
        snprintf(s, DUMP_VAL, "None");
        return;
    }
    off += (size_t)snprintf(s, DUMP_VAL, "[");
    for (i = 0; words[i] && off < DUMP_VAL; i++)
        if (bits & (1u << i)) {
            off += (size_t)snprintf(s + off, DUMP_VAL - off, "%s'%s'", first ? "" : ", ", words[i]);
            first = 0;
        }
    if (off < DUMP_VAL)
        snprintf(s + off, DUMP_VAL - off, "]");
}

static int cmp_entry(const void *a, const void *b)
{
    const dump_entry *x = a, *y = b;
    return strcasecmp(x->name, y->name);
}

/* The model's shape, with Megatron's defaults filled in. */
static void dump_model(dump *d, const sim_cfg *c, const sim_opts *o)
{
    int heads = c->num_attention_heads > 0 ? c->num_attention_heads : 1;

    /* model shape */
    d_int(d, "num_layers", c->num_layers);
    d_int(d, "hidden_size", c->hidden_size);
    d_int(d, "ffn_hidden_size", c->ffn_hidden_size > 0 ? c->ffn_hidden_size : 4L * c->hidden_size);
    d_int(d, "num_attention_heads", c->num_attention_heads);
    d_bool(d, "group_query_attention", c->group_query_attention);
    d_int(d, "num_query_groups",
          c->group_query_attention && c->num_query_groups > 0 ? c->num_query_groups : heads);
    d_int(d, "kv_channels", c->kv_channels > 0 ? c->kv_channels : c->hidden_size / heads);
    d_opt(d, "num_experts", c->num_experts);
    d_int(d, "moe_router_topk", c->moe_router_topk);
    d_opt(d, "moe_ffn_hidden_size", c->moe_ffn_hidden_size);
    d_opt(d, "moe_shared_expert_intermediate_size", c->moe_shared_expert_intermediate_size);
    d_str(d, "moe_layer_freq", o->moe_layer_freq[0] ? o->moe_layer_freq : "1");
    d_bool(d, "multi_latent_attention", c->multi_latent_attention);
    d_opt(d, "q_lora_rank", c->q_lora_rank);
    d_opt(d, "kv_lora_rank", c->kv_lora_rank);
    d_opt(d, "qk_head_dim", c->qk_head_dim);
    d_opt(d, "qk_pos_emb_head_dim", c->qk_pos_emb_head_dim);
    d_opt(d, "v_head_dim", c->v_head_dim);
    d_opt(d, "mtp_num_layers", c->mtp_num_layers);
    d_opt(d, "vocab_size", c->vocab_size);
    d_int(d, "seq_length", c->seq_length);
    /* Megatron fills an unset maximum from the sequence length */
    d_int(d, "max_position_embeddings",
          c->max_position_embeddings > 0 ? c->max_position_embeddings : c->seq_length);
}

/* Parallelism (VPP as Megatron derives it) and the batch. */
static void dump_parallel(dump *d, const sim_cfg *c)
{
    int pp = c->pipeline_model_parallel_size > 0 ? c->pipeline_model_parallel_size : 1;
    int vpp = 0;

    /* parallelism and batch */
    d_int(d, "tensor_model_parallel_size", c->tensor_model_parallel_size);
    d_int(d, "pipeline_model_parallel_size", c->pipeline_model_parallel_size);
    d_int(d, "context_parallel_size", c->context_parallel_size);
    d_int(d, "expert_model_parallel_size", c->expert_model_parallel_size);
    d_int(d, "expert_tensor_parallel_size", sim_etp(c));
    d_bool(d, "sequence_parallel", c->sequence_parallel);
    d_opt(d, "num_layers_per_virtual_pipeline_stage", c->num_layers_per_virtual_pipeline_stage);
    d_opt(d, "num_virtual_stages_per_pipeline_rank", c->num_virtual_stages_per_pipeline_rank);
    if (c->pipeline_model_parallel_layout[0]) {
        long st = layout_stages(c->pipeline_model_parallel_layout);
        vpp = st > 0 && st % pp == 0 ? (int)(st / pp) : 0;
    } else if (c->num_virtual_stages_per_pipeline_rank > 0)
        vpp = c->num_virtual_stages_per_pipeline_rank;
    else if (c->num_layers_per_virtual_pipeline_stage > 0)
        vpp = c->num_layers / pp / c->num_layers_per_virtual_pipeline_stage;
    d_opt(d, "virtual_pipeline_model_parallel_size", vpp > 1 ? vpp : 0);
    d_str(d, "pipeline_model_parallel_layout", c->pipeline_model_parallel_layout);
    d_opt(d, "decoder_first_pipeline_num_layers", c->decoder_first_pipeline_num_layers);
    d_opt(d, "decoder_last_pipeline_num_layers", c->decoder_last_pipeline_num_layers);
    d_int(d, "micro_batch_size", c->micro_batch_size);
    d_int(d, "global_batch_size", c->global_batch_size);
    d_int(d, "train_iters", c->train_iters);
    d_int(d, "world_size", sim_world(c));
    d_int(d, "data_parallel_size", sim_dp(c));
    d_int(d, "rank", 0);
}

/* Recompute, offload, the dispatcher and the overlaps. */
static void dump_recompute_moe(dump *d, const sim_cfg *c)
{
    /* the value names are the settings' own (simcfg.c) */
    const char *const *gran_v = sim_cfg_values("recompute_granularity");
    const char *const *method_v = sim_cfg_values("recompute_method");
    const char *const *rc_v = sim_cfg_values("recompute_modules");
    const char *const *off_v = sim_cfg_values("offload_modules");
    const char *const *disp_v = sim_cfg_values("moe_token_dispatcher_type");
    const char *const *backend_v = sim_cfg_values("moe_flex_dispatcher_backend");

    /* recompute and offload */
    d_enum(d, "recompute_granularity", gran_v, c->recompute_granularity, 1);
    d_enum(d, "recompute_method", method_v, c->recompute_method, 1);
    d_opt(d, "recompute_num_layers", c->recompute_num_layers);
    d_list(d, "recompute_modules", rc_v, c->recompute_modules);
    d_bool(d, "fine_grained_activation_offloading", c->fine_grained_activation_offloading);
    d_list(d, "offload_modules", off_v, c->offload_modules);
    d_bool(d, "optimizer_cpu_offload", c->optimizer_cpu_offload);
    d_float(d, "optimizer_offload_fraction", c->optimizer_offload_fraction, 0);
    /* dispatcher */
    d_enum(d, "moe_token_dispatcher_type", disp_v, c->moe_token_dispatcher_type, 0);
    d_enum(d, "moe_flex_dispatcher_backend", backend_v, c->moe_flex_dispatcher_backend, 1);
    d_opt(d, "moe_flex_dispatcher_num_sms", c->moe_flex_dispatcher_num_sms);
    d_bool(d, "moe_permute_fusion", c->moe_permute_fusion);
    d_bool(d, "moe_grouped_gemm", c->moe_grouped_gemm);
    d_bool(d, "moe_router_force_load_balancing", c->moe_router_force_load_balancing);
    d_float(d, "moe_expert_capacity_factor", c->moe_expert_capacity_factor, 1);
    d_bool(d, "moe_pad_expert_input_to_capacity", c->moe_pad_expert_input_to_capacity);
    /* overlap */
    d_bool(d, "overlap_moe_expert_parallel_comm", c->overlap_moe_expert_parallel_comm);
    d_bool(d, "delay_wgrad_compute", c->delay_wgrad_compute);
    d_bool(d, "moe_shared_expert_overlap", c->moe_shared_expert_overlap);
    d_bool(d, "overlap_grad_reduce", c->overlap_grad_reduce);
    d_bool(d, "overlap_param_gather", c->overlap_param_gather);
    d_bool(d, "tp_comm_overlap", c->tp_comm_overlap);
    d_bool(d, "use_distributed_optimizer", c->use_distributed_optimizer);
}

/* Precision, CUDA graphs, the host, and the run's logging and profiling. */
static void dump_precision_run(dump *d, const sim_cfg *c, const sim_opts *o)
{
    /* the value names are the settings' own (simcfg.c) */
    const char *const *fp8f_v = sim_cfg_values("fp8_format");
    const char *const *fp8r_v = sim_cfg_values("fp8_recipe");
    const char *const *fp4f_v = sim_cfg_values("fp4_format");
    const char *const *fp4r_v = sim_cfg_values("fp4_recipe");
    const char *const *cg_impl_v = sim_cfg_values("cuda_graph_impl");
    const char *const *cg_v = sim_cfg_values("cuda_graph_modules");

    /* precision: the format flags' argparse dests are fp8 / fp4 */
    d_bool(d, "bf16", c->bf16);
    d_bool(d, "fp16", c->fp16);
    d_enum(d, "fp8", fp8f_v, c->fp8_format, 1);
    d_enum(d, "fp8_recipe", fp8r_v, c->fp8_recipe, 1);
    d_enum(d, "fp4", fp4f_v, c->fp4_format, 1);
    d_enum(d, "fp4_recipe", fp4r_v, c->fp4_recipe, 1);
    d_str(d, "moe_router_dtype", o->router_dtype[0] ? o->router_dtype : NULL);
    d_str(d, "params_dtype", c->bf16 ? "torch.bfloat16" : c->fp16 ? "torch.float16" : "torch.float32");
    /* CUDA graphs */
    d_enum(d, "cuda_graph_impl", cg_impl_v, c->cuda_graph_impl, 0);
    d_list(d, o->graph_scope_flag ? "cuda_graph_scope" : "cuda_graph_modules", cg_v,
           c->cuda_graph_modules);
    d_int(d, "cuda_graph_warmup_steps", c->cuda_graph_warmup_steps);
    /* host */
    d_bool(d, "manual_gc", c->manual_gc);
    d_int(d, "manual_gc_interval", c->manual_gc_interval);
    d_bool(d, "moe_router_fusion", c->moe_router_fusion);
    /* run, logging, profiling */
    d_int(d, "log_interval", c->log_interval);
    d_bool(d, "log_throughput", c->log_throughput);
    d_opt(d, "eval_interval", c->eval_interval);
    d_int(d, "eval_iters", c->eval_iters);
    d_opt(d, "save_interval", c->save_interval);
    d_int(d, "seed", c->seed);
    d_bool(d, "mock_data", c->mock_data);
    d_bool(d, "profile", c->profile);
    d_int(d, "profile_step_start", c->profile_step_start);
    d_int(d, "profile_step_end", c->profile_step_end);
    d_bool(d, "use_pytorch_profiler", c->use_pytorch_profiler);
    d_str(d, "tensorboard_dir", c->tensorboard_dir);
}

void sim_args_dump(const sim_cfg *c, const sim_opts *o, sim_dump_fn fn, void *ctx)
{
    static dump d; /* large: static, filled and emitted once per run */
    int i;

    d.n = 0;
    dump_model(&d, c, o);
    dump_parallel(&d, c);
    dump_recompute_moe(&d, c);
    dump_precision_run(&d, c, o);

    qsort(d.e, (size_t)d.n, sizeof d.e[0], cmp_entry);
    for (i = 0; i < d.n; i++)
        fn(ctx, d.e[i].name, d.e[i].value);
}
