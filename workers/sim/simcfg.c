/*
 * simcfg.c - the sim's settings: defaults and the one name -> field mapping
 * every front end (Megatron-LM flags, Bridge overrides, moetune in-process)
 * goes through.
 *
 * Its interface: workers/sim/sim.h.
 */
#include "sim.h"

#include "dialect.h"
#include "hardware.h"
#include "kv.h"
#include "sha256.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A Megatron-LM version name as its flag table spells it ("core_v0.15.0"),
 * or NULL when no table has it. */
const char *sim_megatron_version(const char *name)
{
    const mt_mlm_dialect *d = mt_dialect_find(name && *name ? name : "main");
    return d ? mt_dialect_name(d) : NULL;
}

enum ftype { T_INT, T_BOOL, T_DOUBLE, T_STR, T_ENUM, T_BITS };

typedef struct setting {
    const char *name;
    enum ftype type;
    size_t offset;
    size_t size;                 /* T_STR buffer size */
    const char *const *values;   /* T_ENUM (index = value), T_BITS (bit i) */
    int in_id;                   /* part of the config id */
} setting;

static const char *const gran_v[] = {"none", "full", "selective", NULL};
static const char *const method_v[] = {"none", "uniform", "block", NULL};
static const char *const rc_v[] = {"core_attn", "moe_act", "layernorm", "mla_up_proj",
                                   "mlp", "moe", "shared_experts", "gdn_norm_out", NULL};
static const char *const off_v[] = {"attn_norm", "qkv_linear", "core_attn", "attn_proj",
                                    "mlp_norm", "expert_fc1", "moe_act", NULL};
static const char *const disp_v[] = {"allgather", "alltoall", "flex", NULL};
static const char *const backend_v[] = {"none", "deepep", "hybridep", "ncclep", NULL};
static const char *const fp8f_v[] = {"none", "e4m3", "hybrid", NULL};
static const char *const fp8r_v[] = {"none", "delayed", "tensorwise", "blockwise", "mxfp8", NULL};
static const char *const fp4f_v[] = {"none", "e2m1", NULL};
static const char *const fp4r_v[] = {"none", "nvfp4", NULL};
static const char *const dtype_v[] = {"none", "fp32", "fp64", NULL};
static const char *const cg_impl_v[] = {"none", "local", "transformer_engine", "full_iteration", NULL};
static const char *const cg_v[] = {"attn", "mlp", "moe", "moe_router", "moe_preprocess", NULL};
static const char *const bind_v[] = {"none", "numa", NULL};
static const char *const inject_v[] = {"none", "nan", "skip", "hang", "nccl", "crash", "degrade", NULL};
static const char *const routing_v[] = {"forced", "natural", NULL};
static const char *const optdt_v[] = {"fp32", "fp16", "bf16", "fp8", NULL};
static const char *const stack_v[] = {"pdl", "graph_shared_expert", "cpu_work", "quant_in_norm", "no_hybridep", NULL};

#define F(name, type, id) {#name, type, offsetof(sim_cfg, name), 0, NULL, id}
#define E(name, vals, id) {#name, T_ENUM, offsetof(sim_cfg, name), 0, vals, id}
#define B(name, vals, id) {#name, T_BITS, offsetof(sim_cfg, name), 0, vals, id}
#define S(name, id) {#name, T_STR, offsetof(sim_cfg, name), sizeof(((sim_cfg *)0)->name), NULL, id}

static const setting settings[] = {
    F(num_layers, T_INT, 1), F(hidden_size, T_INT, 1), F(ffn_hidden_size, T_INT, 1),
    F(num_attention_heads, T_INT, 1), F(num_query_groups, T_INT, 1),
    F(group_query_attention, T_BOOL, 1), F(kv_channels, T_INT, 1), F(num_experts, T_INT, 1),
    F(moe_router_topk, T_INT, 1), F(moe_ffn_hidden_size, T_INT, 1),
    F(moe_shared_expert_intermediate_size, T_INT, 1), F(multi_latent_attention, T_BOOL, 1),
    F(q_lora_rank, T_INT, 1), F(kv_lora_rank, T_INT, 1), F(qk_head_dim, T_INT, 1),
    F(qk_pos_emb_head_dim, T_INT, 1), F(v_head_dim, T_INT, 1), F(vocab_size, T_INT, 1),
    F(mtp_num_layers, T_INT, 1), F(seq_length, T_INT, 1), F(max_position_embeddings, T_INT, 0),
    F(tensor_model_parallel_size, T_INT, 1), F(pipeline_model_parallel_size, T_INT, 1),
    F(context_parallel_size, T_INT, 1), F(expert_model_parallel_size, T_INT, 1),
    F(expert_tensor_parallel_size, T_INT, 1), F(sequence_parallel, T_BOOL, 1),
    F(num_layers_per_virtual_pipeline_stage, T_INT, 1),
    F(num_virtual_stages_per_pipeline_rank, T_INT, 1), S(pipeline_model_parallel_layout, 1),
    F(decoder_first_pipeline_num_layers, T_INT, 1), F(decoder_last_pipeline_num_layers, T_INT, 1),
    F(micro_batch_size, T_INT, 1), F(global_batch_size, T_INT, 1), F(train_iters, T_INT, 0),
    E(recompute_granularity, gran_v, 1), E(recompute_method, method_v, 1),
    F(recompute_num_layers, T_INT, 1), B(recompute_modules, rc_v, 1),
    F(fine_grained_activation_offloading, T_BOOL, 1), B(offload_modules, off_v, 1),
    F(optimizer_cpu_offload, T_BOOL, 1), F(optimizer_offload_fraction, T_DOUBLE, 1),
    F(use_precision_aware_optimizer, T_BOOL, 1), E(exp_avg_dtype, optdt_v, 1),
    E(exp_avg_sq_dtype, optdt_v, 1), E(main_params_dtype, optdt_v, 1),
    E(moe_token_dispatcher_type, disp_v, 1), E(moe_flex_dispatcher_backend, backend_v, 1),
    F(moe_flex_dispatcher_num_sms, T_INT, 1), F(moe_permute_fusion, T_BOOL, 1),
    F(moe_grouped_gemm, T_BOOL, 1), F(moe_router_force_load_balancing, T_BOOL, 1),
    F(moe_expert_capacity_factor, T_DOUBLE, 1), F(moe_pad_expert_input_to_capacity, T_BOOL, 1),
    F(overlap_moe_expert_parallel_comm, T_BOOL, 1), F(delay_wgrad_compute, T_BOOL, 1),
    F(moe_shared_expert_overlap, T_BOOL, 1), F(overlap_grad_reduce, T_BOOL, 1),
    F(overlap_param_gather, T_BOOL, 1), F(tp_comm_overlap, T_BOOL, 1),
    F(use_distributed_optimizer, T_BOOL, 1), F(bf16, T_BOOL, 1), F(fp16, T_BOOL, 1),
    E(fp8_format, fp8f_v, 1), E(fp8_recipe, fp8r_v, 1), E(fp4_format, fp4f_v, 1),
    E(fp4_recipe, fp4r_v, 1), E(cuda_graph_impl, cg_impl_v, 1), B(cuda_graph_modules, cg_v, 1),
    F(cuda_graph_warmup_steps, T_INT, 1), F(manual_gc, T_BOOL, 1), F(manual_gc_interval, T_INT, 1),
    F(moe_router_fusion, T_BOOL, 1), F(log_interval, T_INT, 0), F(log_throughput, T_BOOL, 0),
    F(eval_interval, T_INT, 0), F(eval_iters, T_INT, 0), F(save_interval, T_INT, 0),
    F(seed, T_INT, 0), F(mock_data, T_BOOL, 0), F(profile, T_BOOL, 0),
    F(profile_step_start, T_INT, 0), F(profile_step_end, T_INT, 0),
    F(use_pytorch_profiler, T_BOOL, 0), S(tensorboard_dir, 0),
    S(gpu, 1), F(gpus_per_node, T_INT, 1), F(nodes, T_INT, 1), F(nvlink_domain, T_INT, 1),
    B(stack, stack_v, 1), S(stack_name, 0), F(stack_slowdown, T_DOUBLE, 1),
    F(replicate, T_INT, 0), F(noise_offset_sd, T_DOUBLE, 0), F(noise_jitter_cv, T_DOUBLE, 0),
    F(noise_rho, T_DOUBLE, 0), F(startup_s, T_DOUBLE, 0), F(time_scale, T_DOUBLE, 0),
    E(inject, inject_v, 0), F(inject_step, T_INT, 0), F(inject_rank, T_INT, 0),
    F(step_scale, T_DOUBLE, 0), F(loss_shift, T_DOUBLE, 0),
    F(bridge, T_BOOL, 0), S(memory_file, 0),
};
#define N_SETTINGS (sizeof settings / sizeof settings[0])

void sim_cfg_defaults(sim_cfg *c)
{
    memset(c, 0, sizeof *c);
    /* Megatron-LM defaults */
    c->num_layers = 1;
    c->hidden_size = 1024;
    c->num_attention_heads = 16;
    c->moe_router_topk = 2;
    c->seq_length = 4096;
    c->tensor_model_parallel_size = 1;
    c->pipeline_model_parallel_size = 1;
    c->context_parallel_size = 1;
    c->expert_model_parallel_size = 1;
    c->micro_batch_size = 1;
    c->global_batch_size = 0; /* 0 = MBS x DP */
    c->train_iters = 10;
    c->optimizer_offload_fraction = 1.0;
    c->moe_token_dispatcher_type = SIM_DISP_ALLGATHER;
    c->cuda_graph_warmup_steps = 3;
    c->log_interval = 100;
    c->eval_interval = 1000;
    c->eval_iters = 100;
    c->seed = 1234;
    c->profile_step_start = 10;
    c->profile_step_end = 12;
    /* the sim's own: one H100 node, default noise, a few minutes of start-up */
    snprintf(c->gpu, sizeof c->gpu, "H100");
    c->gpus_per_node = 8;
    c->nodes = 1;
    c->stack_slowdown = 1.0;
    c->noise_offset_sd = 0.01;
    c->noise_jitter_cv = 0.02;
    c->noise_rho = 0.5;
    c->routing_natural = 1;
    c->startup_s = 180.0;
    c->inject_step = 5;
    c->step_scale = 1.0;
}

static const setting *find(const char *name)
{
    size_t i;
    for (i = 0; i < N_SETTINGS; i++)
        if (!strcmp(settings[i].name, name))
            return &settings[i];
    return NULL;
}

const char *const *sim_cfg_values(const char *name)
{
    const setting *st = find(name);
    return st && (st->type == T_ENUM || st->type == T_BITS) ? st->values : NULL;
}

static int parse_int(const char *v, int *out)
{
    char *end;
    long n;
    if (!v || !*v)
        return -1;
    n = strtol(v, &end, 10);
    if (*end || n < -1000000000L || n > 1000000000L)
        return -1;
    *out = (int)n;
    return 0;
}

static int parse_bool(const char *v, int *out)
{
    if (!v || !strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "1"))
        return *out = 1, 0;
    if (!strcmp(v, "false") || !strcmp(v, "False") || !strcmp(v, "0"))
        return *out = 0, 0;
    return -1;
}

static int word_index(const char *const *vals, const char *w, size_t len)
{
    int i;
    for (i = 0; vals[i]; i++)
        if (strlen(vals[i]) == len && !strncmp(vals[i], w, len))
            return i;
    return -1;
}

#define NOT_SPECIAL 1 /* special_setting: not one of its names */

/* The settings not in the table: environment and launcher knobs, routing, the router dtype and
 * moe_layer_freq; 0 or -1 as sim_cfg_set, NOT_SPECIAL for any other name. */
static int special_setting(sim_cfg *c, const char *name, const char *value, char *err,
                           size_t errlen)
{
    if (!strcmp(name, "env.CUDA_DEVICE_MAX_CONNECTIONS")) {
        if (!value || !*value)
            return c->cuda_device_max_connections = 0, 0;
        if (parse_int(value, &c->cuda_device_max_connections) || c->cuda_device_max_connections < 1) {
            snprintf(err, errlen, "CUDA_DEVICE_MAX_CONNECTIONS must be a positive integer, got '%s'", value);
            return -1;
        }
        return 0;
    }
    if (!strcmp(name, "launcher.cpu_bind") || !strcmp(name, "cpu_bind")) {
        int i = word_index(bind_v, value ? value : "", value ? strlen(value) : 0);
        if (i < 0) {
            snprintf(err, errlen, "cpu_bind takes none or numa, not '%s'", value ? value : "");
            return -1;
        }
        c->cpu_bind = i;
        return 0;
    }
    if (!strcmp(name, "routing")) {
        int i = word_index(routing_v, value ? value : "", value ? strlen(value) : 0);
        if (i < 0) {
            snprintf(err, errlen, "routing takes forced or natural, not '%s'", value ? value : "");
            return -1;
        }
        c->routing_natural = i;
        return 0;
    }
    if (!strcmp(name, "moe_router_dtype")) {
        int i = word_index(dtype_v, value ? value : "", value ? strlen(value) : 0);
        if (i < 0) {
            snprintf(err, errlen, "invalid choice: '%s' (choose from 'fp32', 'fp64')", value ? value : "");
            return -1;
        }
        c->moe_router_dtype_fp32 = i > 0;
        return 0;
    }
    if (!strcmp(name, "moe_layer_freq")) {
        /* "1" (all MoE) or "([0]*k+[1]*n)" (k leading dense layers) */
        const char *z = value ? strstr(value, "[0]*") : NULL;
        if (value && !strcmp(value, "1"))
            return c->first_k_dense = 0, 0;
        char *end = NULL;
        long k = z ? strtol(z + 4, &end, 10) : -1;
        if (!z || end == z + 4 || k < 0 || (*end != '+' && *end != ')')) {
            snprintf(err, errlen, "moe_layer_freq: cannot read '%s'; use 1 or ([0]*k+[1]*n)",
                     value ? value : "");
            return -1;
        }
        c->first_k_dense = (int)k;
        return 0;
    }
    return NOT_SPECIAL;
}

/* A T_DOUBLE setting: a number, or "" for unset (0); 0 or -1. */
static int set_double(char *base, const setting *s, const char *name, const char *value, char *err,
                      size_t errlen)
{
    char *end;
    double d;
    if (value && !*value) { /* unset, e.g. a dropless capacity factor */
        *(double *)(base + s->offset) = 0;
        return 0;
    }
    d = value ? strtod(value, &end) : 0;
    if (!value || *end) {
        snprintf(err, errlen, "argument %s: invalid float value: '%s'", name, value ? value : "");
        return -1;
    }
    *(double *)(base + s->offset) = d;
    return 0;
}

/* A T_ENUM setting: one of its words, by index; 0, or -1 listing the choices. */
static int set_enum(char *base, const setting *s, const char *name, const char *value, char *err,
                    size_t errlen)
{
    int i = word_index(s->values, value ? value : "", value ? strlen(value) : 0);
    if (i < 0) {
        size_t off = 0, k;
        off += (size_t)snprintf(err, errlen, "argument %s: invalid choice: '%s' (choose from ",
                                name, value ? value : "");
        for (k = 0; s->values[k] && off < errlen; k++)
            off += (size_t)snprintf(err + off, errlen - off, "%s'%s'", k ? ", " : "", s->values[k]);
        if (off < errlen)
            snprintf(err + off, errlen - off, ")");
        return -1;
    }
    *(int *)(base + s->offset) = i;
    return 0;
}

/* A T_BITS setting: a list of its words (spaces, commas, brackets, quotes between); 0 or -1. */
static int set_bits(char *base, const setting *s, const char *name, const char *value, char *err,
                    size_t errlen)
{
    unsigned bits = 0;
    const char *p = value ? value : "";
    while (*p) {
        size_t len = strcspn(p, " ,[]'\"");
        if (len) {
            int i = word_index(s->values, p, len);
            if (i < 0) {
                snprintf(err, errlen, "argument %s: invalid choice: '%.*s'", name, (int)len, p);
                return -1;
            }
            bits |= 1u << i;
        }
        p += len;
        while (*p && strchr(" ,[]'\"", *p))
            p++;
    }
    *(unsigned *)(base + s->offset) = bits;
    return 0;
}

int sim_cfg_set(sim_cfg *c, const char *name, const char *value, char *err, size_t errlen)
{
    const setting *s;
    char *base = (char *)c;
    int rc = special_setting(c, name, value, err, errlen);
    if (rc != NOT_SPECIAL)
        return rc;
    /* aliases: Megatron's older spellings */
    if (!strcmp(name, "cuda_graph_scope"))
        name = "cuda_graph_modules";
    if (!strcmp(name, "num_moe_experts"))
        name = "num_experts";
    s = find(name);
    if (!s) {
        snprintf(err, errlen, "unrecognized setting '%s'", name);
        return -2;
    }
    switch (s->type) {
    case T_INT:
        if (parse_int(value, (int *)(base + s->offset))) {
            snprintf(err, errlen, "argument %s: invalid int value: '%s'", name, value ? value : "");
            return -1;
        }
        return 0;
    case T_BOOL:
        if (parse_bool(value, (int *)(base + s->offset))) {
            snprintf(err, errlen, "argument %s: expected true or false, got '%s'", name, value);
            return -1;
        }
        return 0;
    case T_DOUBLE:
        return set_double(base, s, name, value, err, errlen);
    case T_STR:
        if (!value || strlen(value) >= s->size) {
            snprintf(err, errlen, "argument %s: value too long", name);
            return -1;
        }
        memcpy(base + s->offset, value, strlen(value) + 1);
        return 0;
    case T_ENUM:
        return set_enum(base, s, name, value, err, errlen);
    case T_BITS:
        return set_bits(base, s, name, value, err, errlen);
    }
    return -1;
}

int sim_world(const sim_cfg *c) { return c->gpus_per_node * c->nodes; }
int sim_etp(const sim_cfg *c)
{
    return c->expert_tensor_parallel_size > 0 ? c->expert_tensor_parallel_size
                                              : c->tensor_model_parallel_size;
}
int sim_dp(const sim_cfg *c)
{
    int d = c->tensor_model_parallel_size * c->pipeline_model_parallel_size * c->context_parallel_size;
    return d > 0 ? sim_world(c) / d : 0;
}
int sim_edp(const sim_cfg *c)
{
    int d = sim_etp(c) * c->expert_model_parallel_size * c->pipeline_model_parallel_size;
    return d > 0 ? sim_world(c) / d : 0;
}

const struct mt_gpu_spec *sim_gpu(const sim_cfg *c) { return mt_gpu_find(c->gpu); }

uint64_t sim_cfg_id(const sim_cfg *c)
{
    mt_sha256 h;
    uint8_t d[32];
    size_t i;
    uint64_t id = 0;
    mt_sha256_init(&h);
    for (i = 0; i < N_SETTINGS; i++) {
        const setting *s = &settings[i];
        if (!s->in_id)
            continue;
        mt_sha256_update(&h, s->name, strlen(s->name) + 1);
        if (s->type == T_STR)
            mt_sha256_update(&h, (const char *)c + s->offset, strlen((const char *)c + s->offset));
        else if (s->type == T_DOUBLE)
            mt_sha256_update(&h, (const char *)c + s->offset, sizeof(double));
        else
            mt_sha256_update(&h, (const char *)c + s->offset, sizeof(int));
    }
    mt_sha256_update(&h, &c->cuda_device_max_connections, sizeof(int));
    mt_sha256_update(&h, &c->cpu_bind, sizeof(int));
    mt_sha256_update(&h, &c->moe_router_dtype_fp32, sizeof(int));
    mt_sha256_update(&h, &c->first_k_dense, sizeof(int));
    mt_sha256_update(&h, &c->routing_natural, sizeof(int));
    if (c->step_scale != 1.0) /* only when set: every other config keeps its id (and noise) */
        mt_sha256_update(&h, &c->step_scale, sizeof(double));
    if (c->stack_name[0]) /* a stack file's commit: each revision of a bisection its own noise */
        mt_sha256_update(&h, c->stack_name, strlen(c->stack_name));
    mt_sha256_final(&h, d);
    for (i = 0; i < 8; i++)
        id = id << 8 | d[i];
    return id;
}

int sim_cfg_from_moetune(sim_cfg *c, const mt_kv *config, const mt_kv *hw, const mt_kv *contract,
                         char *err, size_t errlen)
{
    static const char *const hw_keys[] = {"gpu", "gpus_per_node", "nodes", "nvlink_domain"};
    const char *k, *v;
    size_t i;
    sim_cfg_defaults(c);
    for (i = 0; mt_kv_entry(config, i, &k, &v) == 0; i++) {
        char why[256];
        int rc;
        if (!strncmp(k, "env.", 4) && strcmp(k, "env.CUDA_DEVICE_MAX_CONNECTIONS"))
            continue; /* allocator and NCCL settings: no effect in the model */
        if (!*v)
            continue; /* an unset knob: the setting's default */
        rc = sim_cfg_set(c, k, v, why, sizeof why);
        if (rc == -2)
            continue; /* a knob the model has no field for (it changes no step time);
                       * its start-up rules are judged on the command line */
        if (rc) {
            snprintf(err, errlen, "%s = %s: %s", k, v, why);
            return -1;
        }
    }
    for (i = 0; i < sizeof hw_keys / sizeof hw_keys[0]; i++) {
        char why[256];
        v = mt_kv_get(hw, hw_keys[i]);
        if (v && sim_cfg_set(c, hw_keys[i], v, why, sizeof why)) {
            snprintf(err, errlen, "hardware %s: %s", hw_keys[i], why);
            return -1;
        }
    }
    v = contract ? mt_kv_get(contract, "routing") : NULL;
    c->routing_natural = v && !strcmp(v, "natural");
    /* the stack the sim plays: its start-up rules (not part of the config id) */
    v = contract ? mt_kv_get(contract, "stack.dialect") : NULL;
    if (!v && contract)
        v = mt_kv_get(contract, "stack.megatron_lm");
    if (v && sim_megatron_version(v))
        snprintf(c->megatron, sizeof c->megatron, "%s", sim_megatron_version(v));
    v = contract ? mt_kv_get(contract, "stack.transformer_engine") : NULL;
    if (v)
        snprintf(c->te_version, sizeof c->te_version, "%s", v);
    if (c->global_batch_size <= 0)
        c->global_batch_size = c->micro_batch_size * sim_dp(c);
    return 0;
}
