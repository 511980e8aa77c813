/*
 * sim.h - the simulated Megatron training program: configuration, legality,
 * cost and memory model, noise, output.
 *
 * The sim stands where a real Megatron-LM / Megatron-Bridge training command
 * stands.  Its configuration is one struct, filled by name through
 * sim_cfg_set() from canonical knob names (the Megatron flag without dashes,
 * underscores for dashes: the same names moetune's knob model uses), so the
 * command-line parser, the Bridge override parser and in-process evaluation
 * (moetune optimum) share one mapping.
 *
 * Legality (simlegal.c) is written from shared/facts/megatron.md on its own,
 * independently of moetune's plugins: the differential test compares them.
 */
#ifndef MT_SIM_H
#define MT_SIM_H

#include <stddef.h>
#include <stdint.h>

/* Recompute modules (bits), in Megatron's documented order. */
enum {
    SIM_RC_CORE_ATTN = 1 << 0,
    SIM_RC_MOE_ACT = 1 << 1,
    SIM_RC_LAYERNORM = 1 << 2,
    SIM_RC_MLA_UP_PROJ = 1 << 3,
    SIM_RC_MLP = 1 << 4,
    SIM_RC_MOE = 1 << 5,
    SIM_RC_SHARED_EXPERTS = 1 << 6,
    SIM_RC_GDN_NORM_OUT = 1 << 7
};

/* Offload modules (bits). */
enum {
    SIM_OFF_ATTN_NORM = 1 << 0,
    SIM_OFF_QKV_LINEAR = 1 << 1,
    SIM_OFF_CORE_ATTN = 1 << 2,
    SIM_OFF_ATTN_PROJ = 1 << 3,
    SIM_OFF_MLP_NORM = 1 << 4,
    SIM_OFF_EXPERT_FC1 = 1 << 5,
    SIM_OFF_MOE_ACT = 1 << 6
};

/* CUDA graph modules (bits). */
enum {
    SIM_CG_ATTN = 1 << 0,
    SIM_CG_MLP = 1 << 1,
    SIM_CG_MOE = 1 << 2,
    SIM_CG_MOE_ROUTER = 1 << 3,
    SIM_CG_MOE_PREPROCESS = 1 << 4
};

enum sim_gran { SIM_GRAN_NONE, SIM_GRAN_FULL, SIM_GRAN_SELECTIVE };
enum sim_method { SIM_METHOD_NONE, SIM_METHOD_UNIFORM, SIM_METHOD_BLOCK };
enum sim_opt_dtype { SIM_OPTDT_FP32, SIM_OPTDT_FP16, SIM_OPTDT_BF16, SIM_OPTDT_FP8 };
enum sim_dispatcher { SIM_DISP_ALLGATHER, SIM_DISP_ALLTOALL, SIM_DISP_FLEX };
enum sim_backend { SIM_BACKEND_NONE, SIM_BACKEND_DEEPEP, SIM_BACKEND_HYBRIDEP, SIM_BACKEND_NCCLEP };
enum sim_fp8_format { SIM_FP8F_NONE, SIM_FP8F_E4M3, SIM_FP8F_HYBRID };
enum sim_fp8_recipe {
    SIM_FP8R_NONE,
    SIM_FP8R_DELAYED,
    SIM_FP8R_TENSORWISE,
    SIM_FP8R_BLOCKWISE,
    SIM_FP8R_MXFP8
};
enum sim_graph_impl { SIM_CG_NONE, SIM_CG_LOCAL, SIM_CG_TE, SIM_CG_FULL_ITERATION };
enum sim_inject { SIM_INJECT_NONE, SIM_INJECT_NAN, SIM_INJECT_SKIP, SIM_INJECT_HANG, SIM_INJECT_NCCL, SIM_INJECT_CRASH,
                  SIM_INJECT_DEGRADE };

/* Software-stack features (bits) a stack version file can switch on:
 * the [stack] steps of calibration point C. */
enum {
    SIM_STACK_PDL = 1 << 0,              /* programmatic dependent launch + fused MXFP8 swizzle */
    SIM_STACK_GRAPH_SHARED_EXPERT = 1 << 1, /* graphs also capture the shared expert */
    SIM_STACK_CPU_WORK = 1 << 2,         /* further CPU-side work */
    SIM_STACK_QUANT_IN_NORM = 1 << 3,    /* quantization fused into the norm */
    SIM_STACK_NO_HYBRIDEP = 1 << 4       /* built without HybridEP: flex falls back to alltoall */
};

#define SIM_LAYOUT_MAX 512
#define SIM_PATH_MAX 1024

typedef struct sim_cfg {
    /* model shape */
    int num_layers, hidden_size, ffn_hidden_size, num_attention_heads, num_query_groups;
    int group_query_attention, kv_channels, num_experts, moe_router_topk, moe_ffn_hidden_size;
    int moe_shared_expert_intermediate_size, first_k_dense; /* from --moe-layer-freq */
    int multi_latent_attention, q_lora_rank, kv_lora_rank, qk_head_dim, qk_pos_emb_head_dim;
    int v_head_dim, vocab_size, mtp_num_layers, seq_length, max_position_embeddings;
    /* parallelism and batch */
    int tensor_model_parallel_size, pipeline_model_parallel_size, context_parallel_size;
    int expert_model_parallel_size, expert_tensor_parallel_size; /* 0 = same as TP */
    int sequence_parallel;
    int num_layers_per_virtual_pipeline_stage, num_virtual_stages_per_pipeline_rank;
    char pipeline_model_parallel_layout[SIM_LAYOUT_MAX];
    int decoder_first_pipeline_num_layers, decoder_last_pipeline_num_layers;
    int micro_batch_size, global_batch_size, train_iters;
    /* recompute and offload */
    int recompute_granularity, recompute_method, recompute_num_layers; /* enums */
    unsigned recompute_modules;                                       /* SIM_RC_* */
    int fine_grained_activation_offloading;
    unsigned offload_modules; /* SIM_OFF_* */
    int optimizer_cpu_offload;
    int use_precision_aware_optimizer; /* exp_avg / exp_avg_sq / main_params dtypes below apply */
    int exp_avg_dtype, exp_avg_sq_dtype, main_params_dtype; /* SIM_OPTDT_* */
    double optimizer_offload_fraction;
    /* dispatcher */
    int moe_token_dispatcher_type, moe_flex_dispatcher_backend, moe_flex_dispatcher_num_sms;
    int moe_permute_fusion, moe_grouped_gemm, moe_router_force_load_balancing;
    double moe_expert_capacity_factor; /* 0 = dropless */
    int moe_pad_expert_input_to_capacity;
    /* overlap */
    int overlap_moe_expert_parallel_comm, delay_wgrad_compute, moe_shared_expert_overlap;
    int overlap_grad_reduce, overlap_param_gather, tp_comm_overlap, use_distributed_optimizer;
    /* precision */
    int bf16, fp16, fp8_format, fp8_recipe, fp4_format, fp4_recipe;
    int moe_router_dtype_fp32; /* --moe-router-dtype fp32|fp64 */
    /* CUDA graphs */
    int cuda_graph_impl;
    unsigned cuda_graph_modules; /* SIM_CG_* */
    int cuda_graph_warmup_steps;
    /* host */
    int manual_gc, manual_gc_interval, moe_router_fusion, cpu_bind;
    int cuda_device_max_connections; /* 0 = unset */
    /* run, logging, profiling */
    int log_interval, log_throughput, eval_interval, eval_iters, save_interval, seed;
    int mock_data;
    int profile, profile_step_start, profile_step_end, use_pytorch_profiler;
    char tensorboard_dir[SIM_PATH_MAX];
    /* cluster (sim flags / environment) */
    char gpu[16];
    int gpus_per_node, nodes, nvlink_domain;
    /* software stack */
    unsigned stack;                 /* SIM_STACK_* */
    char stack_name[128];           /* "commit" from the stack file */
    double stack_slowdown;          /* multiplicative step-time factor from the stack file */
    /* noise and simulation */
    int replicate;
    double noise_offset_sd, noise_jitter_cv, noise_rho;
    int routing_natural;            /* real routing (imbalance) vs forced balance */
    double startup_s, time_scale;
    int inject, inject_step, inject_rank;
    double step_scale;              /* test fixtures: multiplies every step time (1 = none) */
    double loss_shift;              /* test fixtures: relative shift of the reported lm loss */
    int bridge;                     /* Bridge overrides and log format */
    char memory_file[SIM_PATH_MAX]; /* per-GPU peak memory side file */
    /* the software stack the sim plays (MOETUNE_SIM_MEGATRON / _TE); not part
     * of the config id, so every existing config keeps its noise */
    char megatron[32];              /* Megatron-LM version name ("" = main) */
    char te_version[16];            /* Transformer Engine version ("" = 2.12) */
} sim_cfg;

/* Megatron's defaults and the sim's own (H100, 1 node x 8, default noise). */
void sim_cfg_defaults(sim_cfg *c);

/* Sets one setting by canonical name ("tensor_model_parallel_size",
 * "recompute_modules" with space-separated values, "env.CUDA_DEVICE_MAX_CONNECTIONS",
 * "launcher.cpu_bind", "gpu", ...).  0, or -1 with the reason in err
 * (an unknown name: -2).  Boolean flags take "true"/"false". */
int sim_cfg_set(sim_cfg *c, const char *name, const char *value, char *err, size_t errlen);

/* The value names of an enum or bit-set setting (index = value, bit i),
 * NULL-terminated; NULL for another or an unknown name. */
const char *const *sim_cfg_values(const char *name);

/* Fills c from a moetune config (canonical knob names), the hardware view
 * (gpu, gpus_per_node, nodes, nvlink_domain) and the contract view
 * (routing).  Environment knobs the sim has no use for are skipped.  0, or
 * -1 with the offending knob in err. */
struct mt_kv;
int sim_cfg_from_moetune(sim_cfg *c, const struct mt_kv *config, const struct mt_kv *hardware,
                         const struct mt_kv *contract, char *err, size_t errlen);

/* Derived sizes (after all settings). */
int sim_world(const sim_cfg *c);
int sim_etp(const sim_cfg *c);
int sim_dp(const sim_cfg *c);
int sim_edp(const sim_cfg *c);

/* Legality (simlegal.c).
 *
 * The stack the sim plays: a Megatron-LM version (core_r0.15.0,
 * core_v0.18.0, core_v0.19.0, main), a Transformer Engine version, the
 * GPU's CUDA capability major, WORLD_SIZE and the environment. */
typedef struct sim_stack {
    const char *megatron;      /* NULL or "" = main */
    const char *te;            /* NULL or "" = 2.12 */
    int arch_major;            /* 9 Hopper, 10 Blackwell */
    long world;
    const struct mt_kv *env;   /* NAME -> value; NULL = empty */
} sim_stack;

/* The first start-up failure, as upstream raises it. */
typedef struct sim_verdict {
    char rule[64];     /* a short id where the sim has one ("" otherwise) */
    char type[40];     /* "argparse", "AssertionError", "ValueError", "KeyError", ... */
    char msg[1024];    /* the exception's message (argparse: the error text) */
    char where[128];   /* upstream file (argparse: the flag or "argparse") */
    int exit_status;   /* 2 for argparse errors, 1 for an uncaught exception */
} sim_verdict;

/* The canonical name of a Megatron-LM version the sim plays, or NULL. */
const char *sim_megatron_version(const char *name);

/* Start-up: parse_args (the version's flag table) + validate_args + the
 * micro-batch calculator + TransformerConfig, as that version runs them.
 * 0 when the run starts, 1 with v filled.  ns_out (optional) receives the
 * argument namespace. */
int sim_startup_argv(const sim_stack *st, char *const *argv, size_t argc, sim_verdict *v,
                     struct mt_kv *ns_out);
/* The same checks from a parsed namespace (validate_args on). */
int sim_startup_ns(const sim_stack *st, const struct mt_kv *ns, sim_verdict *v);

/* What only fails once the model runs (a TE recipe the GPU lacks): 0 or 1. */
int sim_runtime_check(const sim_cfg *c, sim_verdict *v);

/* The stack of a sim_cfg (its megatron, te_version, GPU, world);
 * CUDA_DEVICE_MAX_CONNECTIONS goes into env when set. */
void sim_stack_of(const sim_cfg *c, sim_stack *st, struct mt_kv *env);

/* Start-up and runtime legality of a config (the command line it stands
 * for, in the spelling of c->megatron): 1 with the exception in msg
 * ("AssertionError: ..."), rule its id or type; 0 when it runs. */
int sim_check(const sim_cfg *c, char *rule, size_t rlen, char *msg, size_t mlen);

/* The GPU spec for c->gpu, or NULL. */
struct mt_gpu_spec;
const struct mt_gpu_spec *sim_gpu(const sim_cfg *c);

/* ---- the cost and memory model (simmodel.c) ------------------------------ */

typedef struct sim_breakdown {
    double step_s;          /* noise-free steady-state step time */
    double model_tflop;     /* model FLOPs of one step, TFLOP (Megatron's count) */
    double tflops_per_gpu;  /* model TFLOP/s/GPU at step_s */
    /* seconds per step, on the critical path */
    double compute, ep_comm, ep_exposed, tp_comm, cp_comm, dp_exposed, pp_bubble, host,
        offload, optimizer;
    double capture_s;       /* CUDA graph capture time at the capture step */
    double first_iter_s;    /* iteration 1 (warm-up) */
    const char *fallback;   /* dispatcher fallback reason, or NULL */
    int fallback_backend;   /* the backend that actually ran */
} sim_breakdown;

/* Noise-free evaluation.  0, or -1 when the config cannot be evaluated
 * (unknown GPU, zero sizes). */
int sim_evaluate(const sim_cfg *c, sim_breakdown *b);

typedef struct sim_mem {
    double weights, grads, optimizer, activations, logits, graphs, buffers, frag; /* bytes */
    double allocated, max_allocated, reserved, max_reserved;                      /* bytes */
} sim_mem;

/* Peak memory of one global rank (pipeline stage and expert rank matter). */
void sim_rank_memory(const sim_cfg *c, int rank, sim_mem *m);
/* The hottest rank and its max reserved bytes. */
int sim_hottest_rank(const sim_cfg *c, double *max_reserved);
/* Megatron's "Theoretical memory footprints" figures (MB) for rank 0. */
void sim_theoretical_memory(const sim_cfg *c, double *weight_opt_mb, double *act_mb);

/* ---- noise (simnoise.c) ---------------------------------------------------- */

typedef struct sim_noise {
    uint64_t state;
    double offset;   /* per-run multiplicative offset (1 + N(0, sd)) */
    double prev;     /* previous step's jitter (AR(1)) */
    double cv, rho;
} sim_noise;

/* Seeded by (seed, config id, replicate). */
void sim_noise_init(sim_noise *n, uint64_t seed, uint64_t config_id, int replicate,
                    double offset_sd, double jitter_cv, double rho);
/* Multiplier for the next step: offset * (1 + AR(1) jitter). */
double sim_noise_step(sim_noise *n);
/* Standard normal from the generator. */
double sim_noise_gauss(sim_noise *n);

/* A 64-bit id of the config's canonical settings (not seed, replicate,
 * logging or noise). */
uint64_t sim_cfg_id(const sim_cfg *c);

#endif
