/*
 * simmodel.c - the analytic cost model of one MoE training step.
 *
 * One model, not a table of the calibration points: a step is the sum over
 * microbatches and pipeline stages of GPU work (GEMMs, attention, memory-bound
 * passes), exposed communication (EP dispatch/combine, TP, CP, DP), the host's
 * launch stream where it cannot keep up with the GPU, the pipeline bubble,
 * and optimizer time.  Every constant below says where its value comes from:
 * a hardware fact (shared/facts/calibration.md), a published measurement, or
 * the fit (`moetune-sim calibrate --fit` over the points declared fitted in
 * simcalib.c).
 *
 * Its interface: workers/sim/sim.h.
 */
#include "sim.h"

#include "hardware.h"
#include "layout.h"
#include "simconst.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Model FLOPs of one token, Megatron's count (fwd+bwd factor 3, FMA 2,
 * SwiGLU 3 matrices, causal attention core, logits once per output head).
 * Split into GEMM, attention-core and expert parts for the throughput model. */
typedef struct flops {
    double dense_gemm;  /* attention projections, dense and shared MLPs   */
    double expert_gemm; /* routed experts                                 */
    double attn_core;   /* QK^T and AV                                    */
    double logits;      /* output layer(s)                                */
    double total;
    /* forward-only pieces, per layer and token, for recompute */
    double f_attn_proj, f_mla_up, f_core, f_dense_mlp, f_expert, f_shared;
} flops;

static void model_flops(const sim_cfg *c, flops *f)
{
    double h = c->hidden_size, s = c->seq_length, heads = c->num_attention_heads;
    double groups = c->num_query_groups > 0 ? c->num_query_groups : heads;
    double kvc = c->kv_channels > 0 ? c->kv_channels : h / heads;
    double L = c->num_layers, dense = c->first_k_dense, moe = L - dense;
    double mtp = c->mtp_num_layers, V = c->vocab_size;
    double ffn = c->ffn_hidden_size > 0 ? c->ffn_hidden_size : 4 * h;
    double attn_params, core;
    memset(f, 0, sizeof *f);
    if (c->multi_latent_attention) {
        double ql = c->q_lora_rank, kl = c->kv_lora_rank, qk = c->qk_head_dim;
        double rope = c->qk_pos_emb_head_dim, v = c->v_head_dim;
        double q = ql > 0 ? h * ql + ql * heads * (qk + rope) : h * heads * (qk + rope);
        double up = (ql > 0 ? ql * heads * (qk + rope) : 0) + kl * heads * (qk + v);
        attn_params = q + h * (kl + rope) + kl * heads * (qk + v) + heads * v * h;
        f->f_mla_up = 2 * up;
        core = 2 * heads * (qk + rope + v) * s / 2;
    } else {
        attn_params = h * heads * kvc + 2 * h * groups * kvc + heads * kvc * h;
        core = 2 * heads * kvc * s;
    }
    f->f_attn_proj = 2 * attn_params;
    f->f_core = core;
    f->f_dense_mlp = 2 * 3 * h * ffn;
    f->f_expert = 2 * 3 * h * c->moe_ffn_hidden_size * c->moe_router_topk;
    f->f_shared = 2 * 3 * h * c->moe_shared_expert_intermediate_size;
    f->dense_gemm = 3 * ((L + mtp) * f->f_attn_proj + dense * f->f_dense_mlp +
                         (moe + mtp) * f->f_shared + mtp * 2 * 2 * h * h);
    f->expert_gemm = 3 * (moe + mtp) * f->f_expert;
    f->attn_core = 3 * (L + mtp) * core;
    f->logits = (1 + mtp) * 6 * h * V;
    f->total = f->dense_gemm + f->expert_gemm + f->attn_core + f->logits;
}

/* Transformer (and MTP) layers on pipeline rank `stage` over all its virtual
 * chunks, or on the busiest rank when stage < 0; *vpp gets the number of
 * virtual chunks.  An explicit layout is counted stage by stage. */
static double stage_layers(const sim_cfg *c, int stage, int *vpp)
{
    int pp = c->pipeline_model_parallel_size > 0 ? c->pipeline_model_parallel_size : 1;
    double L = c->num_layers + c->mtp_num_layers, per_rank[256];
    int i;
    *vpp = 1;
    if (pp > 256)
        pp = 256;
    memset(per_rank, 0, sizeof per_rank);
    if (c->pipeline_model_parallel_layout[0]) {
        mt_layout_stage st[1024];
        int n = mt_layout_parse(c->pipeline_model_parallel_layout, st, 1024, NULL);
        for (i = 0; i < n; i++)
            per_rank[i % pp] += st[i].t + st[i].m;
        *vpp = n / pp > 0 ? n / pp : 1;
    } else {
        if (c->num_virtual_stages_per_pipeline_rank > 1)
            *vpp = c->num_virtual_stages_per_pipeline_rank;
        else if (c->num_layers_per_virtual_pipeline_stage > 0)
            *vpp = (int)(L / pp / c->num_layers_per_virtual_pipeline_stage);
        if (*vpp < 1)
            *vpp = 1;
        if (c->decoder_first_pipeline_num_layers > 0 || c->decoder_last_pipeline_num_layers > 0) {
            double first = c->decoder_first_pipeline_num_layers;
            double last = c->decoder_last_pipeline_num_layers;
            double mid = pp - (first > 0) - (last > 0), rest = c->num_layers - first - last;
            double even = mid > 0 ? rest / mid : 0;
            for (i = 0; i < pp; i++)
                per_rank[i] = even;
            if (first > 0)
                per_rank[0] = first;
            if (last > 0)
                per_rank[pp - 1] = last;
            per_rank[pp - 1] += c->mtp_num_layers;
        } else {
            for (i = 0; i < pp; i++)
                per_rank[i] = c->num_layers / (double)pp;
            per_rank[pp - 1] += c->mtp_num_layers;
        }
    }
    if (stage >= 0)
        return per_rank[stage < pp ? stage : pp - 1];
    {
        double best = 0;
        for (i = 0; i < pp; i++)
            if (per_rank[i] > best)
                best = per_rank[i];
        return best;
    }
}

static double busiest_stage_layers(const sim_cfg *c, int *vpp)
{
    return stage_layers(c, -1, vpp);
}

/* The pipeline stage with the most layers (the first of them). */
static int busiest_stage(const sim_cfg *c)
{
    int pp = c->pipeline_model_parallel_size > 0 ? c->pipeline_model_parallel_size : 1;
    int st, best = 0, v;
    for (st = 1; st < pp; st++)
        if (stage_layers(c, st, &v) > stage_layers(c, best, &v))
            best = st;
    return best;
}

/* Parameters one GPU of pipeline stage `stage` holds: the non-expert ones
 * (sharded over TP, replicated over DP) and its local experts' (sharded over
 * EP x ETP, replicated over the expert-DP group). */
static void rank_params(const sim_cfg *c, int stage, double *nonexp, double *exp)
{
    double tp = c->tensor_model_parallel_size, ep = c->expert_model_parallel_size, etp = sim_etp(c);
    double h = c->hidden_size, heads = c->num_attention_heads, V = c->vocab_size, attn_p;
    double groups = c->num_query_groups > 0 ? c->num_query_groups : heads;
    double kvc = c->kv_channels > 0 ? c->kv_channels : h / heads;
    int pp = c->pipeline_model_parallel_size > 0 ? c->pipeline_model_parallel_size : 1, vpp;
    double layers = stage_layers(c, stage, &vpp);
    double dense_here = stage == 0 ? fmin(c->first_k_dense, layers) : 0;
    double moe_layers = layers - dense_here;
    if (c->multi_latent_attention) {
        double ql = c->q_lora_rank, kl = c->kv_lora_rank, qk = c->qk_head_dim;
        double rope = c->qk_pos_emb_head_dim, v = c->v_head_dim;
        attn_p = (ql > 0 ? h * ql + ql * heads * (qk + rope) : h * heads * (qk + rope)) +
                 h * (kl + rope) + kl * heads * (qk + v) + heads * v * h;
    } else {
        attn_p = h * heads * kvc + 2 * h * groups * kvc + heads * kvc * h;
    }
    *nonexp =
        layers * attn_p / tp + dense_here * 3 * h * c->ffn_hidden_size / tp +
        moe_layers * (3 * h * c->moe_shared_expert_intermediate_size / tp + h * c->num_experts);
    if (stage == 0)
        *nonexp += V * h / tp;
    if (stage == pp - 1)
        *nonexp += V * h / tp;
    *exp = moe_layers * c->num_experts * 3 * h * c->moe_ffn_hidden_size / (ep * etp);
}

/* Imbalance of the hottest expert rank under natural routing: the load of a
 * rank is the sum over its E/EP experts; with a long-tailed expert popularity
 * the max over EP ranks grows with EP and shrinks with experts per rank. */
static double routing_imbalance(const sim_cfg *c)
{
    double ep = c->expert_model_parallel_size, e_local;
    if (!c->routing_natural || c->moe_router_force_load_balancing || ep <= 1 || c->num_experts <= 0)
        return 1.0;
    if (c->moe_expert_capacity_factor > 0)
        return fmin(1.0 + K.imbalance * sqrt(ep / c->num_experts * ep),
                    c->moe_expert_capacity_factor); /* drop-and-pad caps the hot rank */
    e_local = c->num_experts / ep;
    return 1.0 + K.imbalance * sqrt(ep) / sqrt(e_local);
}

/* EP span: how many GPUs the expert group covers, and the share of its
 * all-to-all bytes that leaves the NVLink domain. */
static double inter_fraction(const sim_cfg *c, int domain)
{
    double span = (double)c->expert_model_parallel_size * sim_etp(c);
    if (span <= domain || span <= 1)
        return 0;
    return 1.0 - domain / span;
}

/* Dispatcher bandwidths (GB/s per GPU) inside and across NVLink domains,
 * from the published figures in shared/facts/calibration.md. */
static void dispatcher_bw(const sim_cfg *c, const mt_gpu_spec *g, int backend, double *intra,
                          double *inter, double *fixed_us)
{
    int nvl72 = g->nvlink_domain >= 72;
    double sms = c->moe_flex_dispatcher_num_sms > 0 ? c->moe_flex_dispatcher_num_sms : 24;
    /* flex kernels scale with the SMs they are given, saturating around 32 */
    double sm_eff = fmin(1.0, 0.8 + 0.2 * sms / 32.0);
    /* DeepEP's intranode figure was measured on H800, whose NVLink runs at
     * 400 GB/s; H100/H200 have 900 GB/s */
    double hopper_nvl = nvl72 ? 1.0 : fmin(K.flex_nvl_hopper, g->nvlink_gbps / 400.0);
    switch (backend) {
    case SIM_BACKEND_DEEPEP:
        *intra =
            (nvl72 ? K.deepep_nvl72 : 155.0 * hopper_nvl) * sm_eff; /* 153/158 GB/s, H800 node */
        *inter = 50.0 * sm_eff;                                     /* 43-58 GB/s over RDMA */
        *fixed_us = 25;
        break;
    case SIM_BACKEND_HYBRIDEP:
        *intra = (nvl72 ? 500.0 : 160.0 * hopper_nvl) * sm_eff; /* ~480-550 GB/s on NVL72, 32 SMs */
        *inter = 77.0 * sm_eff; /* ~77 GB/s across H100 nodes, 16 ranks */
        *fixed_us = 20;
        break;
    case SIM_BACKEND_NCCLEP:
        *intra = nvl72 ? 350.0 : 130.0 * hopper_nvl;
        *inter = 45.0;
        *fixed_us = 30;
        break;
    default: /* NCCL all-to-all (alltoall / allgather dispatchers) */
        *intra = nvl72 ? K.a2a_nvl72 : K.a2a_intra;
        *inter = K.a2a_inter;
        *fixed_us = 40;
        break;
    }
}

/* Which flex backend the hardware really runs (Bridge falls back silently). */
static int effective_backend(const sim_cfg *c, const mt_gpu_spec *g, const char **why)
{
    *why = NULL;
    if (c->moe_token_dispatcher_type != SIM_DISP_FLEX)
        return SIM_BACKEND_NONE;
    if (c->moe_flex_dispatcher_backend == SIM_BACKEND_HYBRIDEP && !strcmp(g->name, "B200")) {
        *why = "HybridEP needs an NVLink domain with its NVSHMEM path (H100/H200 or NVL72); "
               "not supported on B200";
        return SIM_BACKEND_NONE;
    }
    if (c->moe_flex_dispatcher_backend == SIM_BACKEND_HYBRIDEP && (c->stack & SIM_STACK_NO_HYBRIDEP)) {
        /* a stack (container) built without the HybridEP extension */
        *why = "HybridEP is not installed in this stack (ImportError: hybrid_ep)";
        return SIM_BACKEND_NONE;
    }
    if (c->moe_flex_dispatcher_backend == SIM_BACKEND_NCCLEP && sim_world(c) <= 1) {
        *why = "NCCL EP needs more than one GPU";
        return SIM_BACKEND_NONE;
    }
    return c->moe_flex_dispatcher_backend;
}

/* Low-precision GEMM inputs one layer quantizes per microbatch, forward
 * and backward (input, output gradient, the transposed copy wgrad reads):
 * in the attention block and in the MLP side, where TE's grouped linear
 * quantizes each local expert's split on its own.  Current (tensorwise)
 * scaling needs the whole tensor's amax before the cast can start: an amax
 * reduction, the scale, then the cast (3 kernels); delayed and block
 * scaling compute the scale inside the cast (1 kernel). */
static int lowp_tensors(const sim_cfg *c, double *attn, double *mlp)
{
    double ep = c->expert_model_parallel_size > 0 ? c->expert_model_parallel_size : 1;
    double local = c->num_experts > 0 ? ceil(c->num_experts / (ep * sim_etp(c))) : 0;
    int kernels = c->fp8_recipe == SIM_FP8R_TENSORWISE ? 3 : 1;
    *attn = *mlp = 0;
    if (c->fp8_recipe == SIM_FP8R_NONE && !c->fp4_recipe)
        return 0;
    *attn = 3 * 2 * kernels;
    *mlp = 3 * (2 * local + (c->moe_shared_expert_intermediate_size > 0 ? 2 : 0)) * kernels;
    return kernels;
}

/* Kernel launches per layer and microbatch (fwd+bwd) by scope, used for the
 * host's launch stream; CUDA graphs remove the launches of what they capture. */
static double host_launches(const sim_cfg *c, int backend)
{
    unsigned m = c->cuda_graph_impl == SIM_CG_TE || c->cuda_graph_impl == SIM_CG_LOCAL
                     ? c->cuda_graph_modules
                     : 0;
    int full = c->cuda_graph_impl == SIM_CG_FULL_ITERATION;
    double attn = 36, router = c->moe_router_fusion ? 8 : 20;
    double prep = c->moe_permute_fusion ? 10 : 24, experts = 18, disp = 8, shared = 14;
    double launches;
    if (c->moe_token_dispatcher_type == SIM_DISP_FLEX && backend != SIM_BACKEND_NONE)
        disp = 4;
    if (full)
        return 0.5; /* one graph launch per microbatch, amortized */
    /* alltoall/allgather read token counts back to the host every layer:
     * the host never runs ahead, so replaying captured graphs saves launches
     * the GPU was not waiting for (point B: no gain, 41.36 s vs 42.00 s) */
    if (c->moe_token_dispatcher_type != SIM_DISP_FLEX || backend == SIM_BACKEND_NONE)
        m = 0;
    if (m & SIM_CG_ATTN)
        attn = 1;
    if (m & SIM_CG_MOE_ROUTER)
        router = 1;
    if (m & SIM_CG_MOE_PREPROCESS)
        prep = 1;
    if (m & SIM_CG_MOE)
        router = prep = experts = 1;
    if ((m & (SIM_CG_MOE_ROUTER | SIM_CG_MOE)) && (c->stack & SIM_STACK_GRAPH_SHARED_EXPERT))
        shared = 1;
    if (c->moe_shared_expert_intermediate_size <= 0)
        shared = 0;
    {
        double q_attn, q_mlp;
        lowp_tensors(c, &q_attn, &q_mlp);
        attn += (m & SIM_CG_ATTN) ? 0 : q_attn;
        experts += (m & SIM_CG_MOE) ? 0 : q_mlp;
    }
    launches = attn + router + prep + experts + disp + shared;
    if (c->recompute_granularity == SIM_GRAN_FULL)
        launches *= 1.33;
    if (c->overlap_moe_expert_parallel_comm)
        launches *= K.overlap_host; /* the overlap schedule splits layers into more pieces */
    return launches;
}

/* What sim_evaluate's parts share: the configuration, its GPU, the model's
 * FLOPs and the per-step figures every part of the step time reads. */
typedef struct eval_ctx {
    const sim_cfg *c;
    const mt_gpu_spec *g;
    flops f;
    double world, tp, cp, pp, ep, dp;
    double tokens_step, micro, mb_tokens_gpu, layers_stage;
    double peak_bf16, peak_gemm, hbm, eff, expert_eff, imb, per_gpu, act_bytes;
    int vpp, backend, fp8, fp4;
} eval_ctx;

/* Checks the sizes and fills the step's token, microbatch and stage figures; -1 if unusable. */
static int eval_setup(const sim_cfg *c, sim_breakdown *b, eval_ctx *e)
{
    const char *why;

    e->c = c;
    e->g = sim_gpu(c);
    e->world = sim_world(c);
    e->tp = c->tensor_model_parallel_size;
    e->cp = c->context_parallel_size;
    e->pp = c->pipeline_model_parallel_size;
    e->ep = c->expert_model_parallel_size;
    if (!e->g || e->world < 1 || e->tp < 1 || e->pp < 1 || e->cp < 1 || e->ep < 1 ||
        c->micro_batch_size < 1 || c->seq_length < 1 || c->hidden_size < 1)
        return -1;
    e->dp = floor(e->world / (e->tp * e->pp * e->cp));
    if (e->dp < 1)
        return -1;
    model_flops(c, &e->f);
    e->tokens_step =
        (double)(c->global_batch_size > 0 ? c->global_batch_size : c->micro_batch_size * e->dp) *
        c->seq_length;
    b->model_tflop = e->f.total * e->tokens_step / 1e12;
    e->micro =
        e->tokens_step / (c->micro_batch_size * (double)c->seq_length) / e->dp; /* per DP rank */
    if (e->micro < 1)
        e->micro = 1;
    e->layers_stage = busiest_stage_layers(c, &e->vpp);
    /* tokens one GPU works on per microbatch (attention side): TP shards
     * them under sequence parallelism, CP splits the sequence */
    e->mb_tokens_gpu = (double)c->micro_batch_size * c->seq_length / e->cp;

    e->backend = effective_backend(c, e->g, &why);
    b->fallback = why;
    b->fallback_backend = e->backend;
    return 0;
}

/* Sets the GPU's peak rates and the GEMM efficiency for this precision, TP and MBS. */
static void eval_peaks(eval_ctx *e)
{
    const sim_cfg *c = e->c;
    const mt_gpu_spec *g = e->g;

    e->fp8 = c->fp8_recipe != SIM_FP8R_NONE;
    e->fp4 = c->fp4_recipe != 0;
    e->peak_bf16 = g->bf16_tflops * 1e12;
    e->peak_gemm = e->fp4 ? g->fp8_tflops * 2e12 : e->fp8 ? g->fp8_tflops * 1e12 : e->peak_bf16;
    e->hbm = g->hbm_tbps * 1e12;
    /* GEMM efficiency falls when TP shrinks the matrices and rises with MBS;
     * low precision loses some of its peak to quantization and scaling */
    e->eff = K.gemm_eff / (1 + K.tp_penalty * (e->tp - 1)) *
             (1 + K.mbs_gain * log2((double)c->micro_batch_size));
    if (e->fp8 || e->fp4)
        e->eff *= c->fp8_recipe == SIM_FP8R_MXFP8 || e->fp4 ? K.lowp_eff_block : K.lowp_eff;
    if (e->eff > 0.92)
        e->eff = 0.92;
}

/* GEMM and attention-core time of the GPU's share of the step; sets per_gpu, imb, expert_eff. */
static void eval_gemm_attn(eval_ctx *e, double *gemm_t, double *attn_t)
{
    const sim_cfg *c = e->c;
    /* tokens of the whole step one GPU works on for its pipeline stage:
     * its DP replica's tokens, shared over TP x CP, for the stage's share
     * of the layers */
    double stage_share = e->layers_stage / (c->num_layers + c->mtp_num_layers);
    double replica_tok = e->tokens_step / (e->tp * e->cp * e->dp);
    double per_gpu = stage_share * replica_tok;
    double expert_eff = e->eff * (c->moe_grouped_gemm ? 1.0 : K.ungrouped_eff);
    e->per_gpu = per_gpu;
    e->expert_eff = expert_eff;
    e->imb = routing_imbalance(c);
    *gemm_t = per_gpu * (e->f.dense_gemm / (e->peak_gemm * e->eff) +
                         e->f.expert_gemm * e->imb / (e->peak_gemm * expert_eff));
    /* the output layer sits on the last stage; uneven layouts give that
     * stage fewer layers, so with PP > 1 half of it is on the critical path */
    *gemm_t += replica_tok * e->f.logits / (e->peak_bf16 * e->eff) * (e->pp > 1 ? 0.5 : 1.0);
    /* Blackwell Ultra (GB300) doubles the exponent throughput that bounds
     * softmax: attention runs faster at the same GEMM peak */
    *attn_t = per_gpu * e->f.attn_core /
              (e->peak_bf16 * K.attn_eff * (!strcmp(e->g->name, "GB300") ? K.gb300_attn : 1.0));
}

/* Adds the low-precision casts' HBM traffic and kernels to *mem_t. */
static void eval_quant_mem(const eval_ctx *e, double *mem_t)
{
    const sim_cfg *c = e->c;
    double h = c->hidden_size, k = c->moe_router_topk, L = c->num_layers + c->mtp_num_layers;
    /* quantization: every GEMM input element is read in BF16 and
     * written in 8 bits (3 bytes), forward, as an output gradient
     * and transposed for wgrad; current scaling reads it once
     * more for the amax (5 bytes).  A norm that quantizes its
     * own output (a stack fusion) saves the attention input's
     * pass.  Each cast is a kernel of fixed cost besides. */
    double q_attn, q_mlp;
    int kernels = lowp_tensors(c, &q_attn, &q_mlp);
    double ffn_e = c->moe_ffn_hidden_size, sh = c->moe_shared_expert_intermediate_size;
    double attn_in =
        h * (c->stack & SIM_STACK_QUANT_IN_NORM ? 0.3 : 1) +
        c->num_attention_heads * (c->kv_channels > 0 ? c->kv_channels : h / c->num_attention_heads);
    double mlp_in = k * (h + ffn_e) * e->imb + (sh > 0 ? h + sh : 0);
    double bytes = kernels == 3 ? 5.0 : 3.0;
    *mem_t += e->per_gpu * L * 3 * (attn_in / e->tp + mlp_in / e->tp) * bytes / e->hbm;
    *mem_t += e->micro * e->layers_stage * (q_attn + q_mlp) * K.quant_kernel_us * 1e-6;
}

/* Memory-bound time: per-token passes, per-microbatch weight reads, and the casts; sets act_bytes.
 */
static double eval_mem(eval_ctx *e)
{
    const sim_cfg *c = e->c;
    double mem_t;
    /* memory-bound passes per layer and token (bytes over HBM): norms and
     * residuals, quantization, router, permute/unpermute, activation */
    double h = c->hidden_size, k = c->moe_router_topk, L = c->num_layers + c->mtp_num_layers;
    double act_bytes = k * c->moe_ffn_hidden_size * 2.0 * 3;
    double permute = (c->moe_permute_fusion ? K.permute_fused : K.permute_unfused) * k * h * 2;
    double norm = (c->stack & SIM_STACK_QUANT_IN_NORM ? 0.6 : 1.0) * 16 * h * 2;
    double router = (c->moe_router_fusion ? 0.4 : 1.0) * 8 * h * 2;
    double per_tok_layer = (norm + router + (permute + act_bytes) * e->imb) / e->tp;
    e->act_bytes = act_bytes;
    mem_t = e->per_gpu * L * per_tok_layer * 3 * K.mem_passes / e->hbm;
    {
        /* every microbatch reads each weight twice (forward, dgrad)
         * and accumulates its FP32 main gradient in place (read and
         * write, 8 bytes): per microbatch, not per token, so it
         * weighs on GPUs with many local experts and few tokens
         * each */
        double nonexp_p, exp_p, wb = e->fp8 || e->fp4 ? 1.0 : 2.0;
        rank_params(c, busiest_stage(c), &nonexp_p, &exp_p);
        mem_t += e->micro * (nonexp_p + exp_p) * (2 * wb + 8) / e->hbm;
    }
    if (e->fp8 || e->fp4)
        eval_quant_mem(e, &mem_t);
    return mem_t;
}

/* Recompute time: the forward of what is recomputed, once more. */
static double eval_recompute(const eval_ctx *e, double gemm_t, double attn_t, double mem_t)
{
    const sim_cfg *c = e->c;
    const flops *f = &e->f;
    double rc_t = 0, h = c->hidden_size, L = c->num_layers + c->mtp_num_layers;
    double per_gpu = e->per_gpu, peak_gemm = e->peak_gemm, eff = e->eff, hbm = e->hbm, tp = e->tp;
    if (c->recompute_granularity == SIM_GRAN_FULL) {
        rc_t = (gemm_t + attn_t + mem_t) / 3.0;
    } else if (c->recompute_granularity == SIM_GRAN_SELECTIVE) {
        unsigned m = c->recompute_modules;
        double moe_frac = (c->num_layers - c->first_k_dense + c->mtp_num_layers) / L;
        if (m & SIM_RC_CORE_ATTN)
            rc_t += attn_t / 3.0;
        if (m & SIM_RC_MLA_UP_PROJ) {
            /* the up-projections are small GEMMs whose outputs (q, k, v
             * per head) are large: the recompute is mostly memory traffic */
            double qk = c->qk_head_dim + c->qk_pos_emb_head_dim;
            rc_t += per_gpu * L * f->f_mla_up / (peak_gemm * eff) +
                    per_gpu * L * c->num_attention_heads * (2 * qk + c->v_head_dim) * 2 *
                        K.mla_up_bytes / hbm / tp;
        }
        if (m & SIM_RC_MOE_ACT)
            rc_t += per_gpu * L * moe_frac * e->act_bytes * e->imb * K.mem_passes / hbm / tp;
        if (m & SIM_RC_LAYERNORM)
            rc_t += per_gpu * L * h * 2 * K.norm_recompute / hbm / tp;
        if (m & SIM_RC_MLP)
            rc_t += per_gpu * (f->f_dense_mlp * c->first_k_dense + f->f_shared * moe_frac * L) /
                    (peak_gemm * eff);
        if (m & SIM_RC_SHARED_EXPERTS)
            rc_t += per_gpu * L * moe_frac * f->f_shared / (peak_gemm * eff);
        if (m & SIM_RC_MOE)
            rc_t += per_gpu * f->expert_gemm * e->imb / (peak_gemm * e->expert_eff) / 3.0;
    }
    return rc_t;
}

/* EP dispatch/combine time of the step on the busiest GPU, before any overlap. */
static double eval_ep_comm(const eval_ctx *e)
{
    const sim_cfg *c = e->c;
    const mt_gpu_spec *g = e->g;
    double intra_bw, inter_bw, fixed_us, fin, ep_comm, ep = e->ep;
    int backend = e->backend;

    dispatcher_bw(c, g, backend, &intra_bw, &inter_bw, &fixed_us);
    fin = inter_fraction(c, c->nvlink_domain > 0 ? c->nvlink_domain : g->nvlink_domain);
    /* each routed token's hidden state goes out (dispatch) and back
     * (combine), in forward and backward: 4 transfers per MoE layer */
    double moe_layers = (c->num_layers - c->first_k_dense + c->mtp_num_layers) * e->layers_stage /
                        (c->num_layers + c->mtp_num_layers);
    double tok = e->mb_tokens_gpu / e->tp; /* SP shards tokens over TP before dispatch */
    double leave = ep > 1 ? (ep - 1) / ep : 0;
    double bytes_per = e->fp8 && backend != SIM_BACKEND_NONE ? 1.5 : 2.0;
    double a2a_bytes =
        4 * moe_layers * tok * c->moe_router_topk * c->hidden_size * bytes_per * leave;
    /* NVLink and the scale-out NICs move their shares at the same time;
     * the published dispatcher figures count the bytes of the link that
     * limits them.  NCCL's all-to-all sends every routed copy that leaves
     * the node over the NIC.  DeepEP and HybridEP are hierarchical: a
     * token crosses to each remote node it has experts on once, and that
     * node's NVLink fans it out, so the NIC carries the expected number
     * of distinct remote nodes among top-k uniform picks (forced balance)
     * and NVLink carries every copy. */
    {
        double intra_bytes = a2a_bytes * (1 - fin), inter_bytes = a2a_bytes * fin;
        if (fin > 0 && backend != SIM_BACKEND_NONE && backend != SIM_BACKEND_NCCLEP) {
            double domain = c->nvlink_domain > 0 ? c->nvlink_domain : g->nvlink_domain;
            double nodes = ceil(ep * sim_etp(c) / domain), k = c->moe_router_topk;
            double distinct = (nodes - 1) * (1 - pow(1 - 1 / nodes, k));
            double copies = k * fin;
            intra_bytes = a2a_bytes;
            inter_bytes = copies > 0 ? a2a_bytes * fin * distinct / copies : 0;
        }
        ep_comm = ep > 1 ? fmax(intra_bytes / (intra_bw * 1e9), inter_bytes / (inter_bw * 1e9)) +
                               4 * moe_layers * fixed_us * 1e-6
                         : 0;
    }
    if (backend == SIM_BACKEND_HYBRIDEP && !c->moe_permute_fusion)
        ep_comm *= 1.10; /* HybridEP's extra copy: 10-20% of comm unless fused into permute */
    if (c->moe_token_dispatcher_type == SIM_DISP_ALLGATHER)
        ep_comm *= ep; /* every rank receives every token */
    ep_comm *= e->imb; /* the hot rank waits for its extra tokens */
    ep_comm *= e->micro;
    return ep_comm;
}

/* TP collectives' time on NVLink (0 without TP). */
static double eval_tp_comm(const eval_ctx *e)
{
    const sim_cfg *c = e->c;
    double tp = e->tp, tp_comm;
    /* with sequence parallelism every TP block (attention; the dense MLP
     * or the TP-sharded shared expert) all-gathers its input and
     * reduce-scatters its output: 2 collectives forward, 2 backward, and
     * 2 more forward when the layer is recomputed in full; without SP the
     * same bytes move as one all-reduce.  A ring collective over TP ranks
     * takes tp-1 steps of latency plus (tp-1)/tp of the tensor at the bus
     * bandwidth.  The routed experts (ETP 1) need none. */
    double blocks =
        1 + ((c->first_k_dense > 0 || c->moe_shared_expert_intermediate_size > 0) ? 1.0 : 0.0);
    double colls = blocks * (4 + (c->recompute_granularity == SIM_GRAN_FULL ? 2 : 0));
    double bytes = e->mb_tokens_gpu * c->hidden_size * 2 * (tp - 1) / tp;
    double busbw = K.tp_busbw * e->g->nvlink_gbps * 1e9;
    tp_comm = e->micro * e->layers_stage * colls * ((tp - 1) * K.tp_step_us * 1e-6 + bytes / busbw);
    if (c->tp_comm_overlap)
        tp_comm *= 0.3;
    return tp_comm;
}

/* Host-blocking syncs' exposed time: the host cannot run ahead after each one. */
static double eval_sync(const eval_ctx *e, double ep_comm)
{
    const sim_cfg *c = e->c;
    int backend = e->backend;
    /* host-blocking syncs: the alltoall and allgather dispatchers copy
     * the token counts to the host every MoE layer, DeepEP's normal
     * kernels (and NCCL EP) make the host wait for the receive counts
     * it allocates by; HybridEP does not, nor do static shapes (drop
     * and pad to capacity, which full-iteration graphs need).  After
     * each one the host cannot run ahead: the Python and launches up to
     * the next long kernel are on the GPU's critical path, less what the
     * dispatch it launches first covers.  Recomputing
     * the MoE forward dispatches again. */
    double syncs = 0, moe_frac = (c->num_layers - c->first_k_dense + c->mtp_num_layers) /
                                 (double)(c->num_layers + c->mtp_num_layers);
    if (c->moe_token_dispatcher_type != SIM_DISP_FLEX || backend == SIM_BACKEND_NONE ||
        backend == SIM_BACKEND_DEEPEP || backend == SIM_BACKEND_NCCLEP)
        syncs = 1;
    if (c->recompute_granularity == SIM_GRAN_FULL ||
        (c->recompute_granularity == SIM_GRAN_SELECTIVE && (c->recompute_modules & SIM_RC_MOE)))
        syncs *= 2;
    if (c->cuda_graph_impl == SIM_CG_FULL_ITERATION ||
        (c->moe_expert_capacity_factor > 0 && c->moe_pad_expert_input_to_capacity))
        syncs = 0;
    /* the dispatch the host launches first after the sync runs
     * while it goes on: only the rest of its work is exposed */
    double n = e->micro * e->layers_stage * moe_frac, dispatch = n > 0 ? ep_comm / (4 * n) : 0;
    return n * syncs * fmax(0, K.sync_us * 1e-6 - dispatch);
}

/* The host's time: Python per layer, plus one launch per uncaptured kernel. */
static double eval_host(const eval_ctx *e)
{
    const sim_cfg *c = e->c;
    double launch_us;
    double launches = host_launches(c, e->backend);
    double per_layer = c->cuda_graph_impl == SIM_CG_FULL_ITERATION ? 0 : K.host_layer_us;
    if (c->overlap_moe_expert_parallel_comm)
        per_layer *= K.overlap_host; /* and adds stream syncs to every layer */
    double factor = e->g->nvlink_domain >= 72 ? K.grace_factor : 1.0; /* Grace vs x86 cores */
    if (c->cpu_bind)
        factor *= K.cpu_bind_gain;
    if (c->stack & SIM_STACK_CPU_WORK)
        factor *= 0.95;
    if (c->manual_gc)
        factor *= 0.97; /* no Python GC pauses between launches */
    launch_us = K.launch_us * (c->stack & SIM_STACK_PDL ? 0.8 : 1.0);
    return e->micro * e->layers_stage * (per_layer + launches * launch_us) * factor * 1e-6;
}

/* DP gradient reduce / param gather and the optimizer; fills b's DP, optimizer and offload parts.
 */
static double eval_dp_optimizer(const eval_ctx *e, sim_breakdown *b)
{
    const sim_cfg *c = e->c;
    const mt_gpu_spec *g = e->g;
    double world = e->world, ep = e->ep, pp = e->pp, dp = e->dp, tp = e->tp, cp = e->cp, dp_t;
    /* the busiest stage's GPU: its non-expert parameters are reduced
     * over DP, its experts' over the expert-DP group (EDP = world / (EP x
     * ETP x PP)); FP32 gradients are reduce-scattered and BF16
     * parameters all-gathered (distributed optimizer), (n-1)/n of them
     * per GPU, over the NIC once the group leaves the node */
    double edp = floor(world / (ep * sim_etp(c) * pp)), nonexp, expp, shard;
    rank_params(c, busiest_stage(c), &nonexp, &expp);
    {
        double dense_span = dp * tp * cp, exp_span = edp * ep * sim_etp(c);
        double bw_d =
            (dense_span > c->gpus_per_node ? g->scaleout_gbps : g->nvlink_gbps * 0.6) * 1e9;
        double bw_e = (exp_span > c->gpus_per_node ? g->scaleout_gbps : g->nvlink_gbps * 0.6) * 1e9;
        double per = c->use_distributed_optimizer ? 4 + 2 : 2 * 4; /* RS fp32 + AG bf16, or AR */
        dp_t = (dp > 1 ? nonexp * per * (dp - 1) / dp / bw_d : 0) +
               (edp > 1 ? expp * per * (edp - 1) / edp / bw_e : 0);
    }
    dp_t *= c->overlap_grad_reduce ? (c->overlap_param_gather ? K.dp_exposed_overlap : 0.5) : 1.0;
    b->dp_exposed = dp_t;
    /* Adam over the GPU's shard: ~30 bytes of HBM traffic per parameter
     * (FP32 master, moments and gradient read, master/moments/BF16
     * parameter written) */
    shard = c->use_distributed_optimizer ? nonexp / dp + expp / fmax(1, edp) : nonexp + expp;
    b->optimizer = shard * 30 / e->hbm + 0.05;
    if (c->optimizer_cpu_offload)
        b->offload = c->optimizer_offload_fraction * shard * K.cpu_opt_s_per_param;
    if (c->fine_grained_activation_offloading)
        b->offload += e->micro * e->layers_stage * e->mb_tokens_gpu * c->hidden_size * 2 * 2 /
                      (K.offload_gbps * 1e9) * 0.3;
    return dp_t;
}

int sim_evaluate(const sim_cfg *c, sim_breakdown *b)
{
    eval_ctx e;
    double gemm_t, attn_t, mem_t, rc_t, ep_comm, ep_hidden = 0;
    double tp_comm = 0, cp_comm = 0, dp_t, host_t, gpu_t, busy, sync_t, bubble;
    double tp, cp, pp, ep, micro, layers_stage;

    memset(b, 0, sizeof *b);
    if (eval_setup(c, b, &e) < 0)
        return -1;
    tp = e.tp, cp = e.cp, pp = e.pp, ep = e.ep, micro = e.micro, layers_stage = e.layers_stage;

    /* ---- compute: the GPU's share of the step's model FLOPs -------------- */
    eval_peaks(&e);
    eval_gemm_attn(&e, &gemm_t, &attn_t);
    mem_t = eval_mem(&e);
    rc_t = eval_recompute(&e, gemm_t, attn_t, mem_t);

    /* ---- EP dispatch / combine ------------------------------------------- */
    ep_comm = eval_ep_comm(&e);

    /* ---- EP overlap: hides comm under compute of the other microbatch ---- */
    if (c->overlap_moe_expert_parallel_comm && ep > 1) {
        double cover = K.overlap_cover * (gemm_t + attn_t);
        ep_hidden = fmin(ep_comm * K.overlap_max_hidden, cover);
        gemm_t *= 1 + K.overlap_contention; /* SM contention */
        if (c->delay_wgrad_compute)
            ep_hidden = fmin(ep_comm * fmin(0.95, K.overlap_max_hidden + 0.1), cover * 1.15);
    }
    b->ep_comm = ep_comm;
    b->ep_exposed = ep_comm - ep_hidden;

    /* ---- TP and CP communication on NVLink -------------------------------- */
    if (tp > 1)
        tp_comm = eval_tp_comm(&e);
    if (cp > 1) {
        double kv = 2 * (c->num_query_groups > 0 ? c->num_query_groups : c->num_attention_heads) *
                    (c->kv_channels > 0 ? c->kv_channels : c->hidden_size / c->num_attention_heads);
        cp_comm = micro * 3 * layers_stage * e.mb_tokens_gpu * kv * 2 * (cp - 1) / cp /
                  (e.g->nvlink_gbps * 0.6e9) * 0.3; /* ring exchange mostly overlapped */
    }
    b->tp_comm = tp_comm;
    b->cp_comm = cp_comm;

    /* ---- the host: Python per layer, launches, host-blocking syncs ------- */
    host_t = eval_host(&e);
    sync_t = eval_sync(&e, ep_comm);

    /* ---- combine: GPU stream vs host stream (whole step) ----------------- */
    gpu_t = gemm_t + attn_t + mem_t + rc_t + b->ep_exposed + tp_comm + cp_comm;
    /* host and GPU run as a pipeline of kernels: the slower stream sets the
     * pace, and where they are close the GPU still waits between kernels (a
     * smooth maximum; host_p large = a hard maximum) */
    busy = pow(pow(gpu_t, K.host_p) + pow(host_t, K.host_p), 1.0 / K.host_p) + sync_t;
    b->compute = gemm_t + attn_t + mem_t + rc_t;
    b->host = busy - gpu_t > 0 ? busy - gpu_t : 0;

    /* ---- pipeline bubble: (PP-1)/(VPP x microbatches) of the busy time ---- */
    bubble = pp > 1 ? busy * (pp - 1) / (e.vpp * micro) : 0;
    if (pp > 1)
        bubble += micro * 2 * e.vpp * K.p2p_us * 1e-6;
    b->pp_bubble = bubble;

    /* ---- DP gradient reduce / param gather, optimizer ---------------------- */
    dp_t = eval_dp_optimizer(&e, b);

    b->step_s = (busy + bubble + dp_t + b->optimizer + b->offload) *
                (c->stack_slowdown > 0 ? c->stack_slowdown : 1.0);
    b->tflops_per_gpu = b->model_tflop / b->step_s / e.world;
    b->capture_s = c->cuda_graph_impl != SIM_CG_NONE ? 2.0 + 0.05 * layers_stage : 0;
    b->first_iter_s = b->step_s * 1.8 + 4.0; /* allocator warm-up, NCCL communicator setup */
    return 0;
}

/* ---- memory ------------------------------------------------------------- */

#define GiB (1024.0 * 1024.0 * 1024.0)

/* The rank's weights, gradients and optimizer states (bytes) for its stage. */
static void mem_states(const sim_cfg *c, int stage, double dp, double edp, sim_mem *m)
{
    double nonexp, exp;

    rank_params(c, stage, &nonexp, &exp);
    m->weights = (nonexp + exp) * 2;
    m->grads = (nonexp + exp) * 2;
    {
        /* Adam's FP32 master copy and two moments; the precision-aware
         * optimizer keeps them in the dtypes it is given */
        static const double dt_bytes[] = {4, 2, 2, 1};
        double per = 12;
        if (c->use_precision_aware_optimizer)
            per = dt_bytes[c->main_params_dtype & 3] + dt_bytes[c->exp_avg_dtype & 3] +
                  dt_bytes[c->exp_avg_sq_dtype & 3];
        m->optimizer = c->use_distributed_optimizer ? nonexp * per / dp + exp * per / edp
                                                    : (nonexp + exp) * per;
    }
    if (c->optimizer_cpu_offload)
        m->optimizer *= 1 - fmin(1, fmax(0, c->optimizer_offload_fraction));
}

/* Activation bytes of one microbatch over the rank's layers, after recompute and offloading. */
static double micro_activations(const sim_cfg *c, double tokens, double imb, double layers,
                                double moe_layers, double dense_here)
{
    double tp = c->tensor_model_parallel_size, etp = sim_etp(c), h = c->hidden_size;
    double heads = c->num_attention_heads;
    double groups = c->num_query_groups > 0 ? c->num_query_groups : heads;
    double kvc = c->kv_channels > 0 ? c->kv_channels : h / heads;
    double sbh, a_norm, a_attn, a_mla = 0, a_moe, a_act, a_shared, a_mlp, micro_act;
    int fp8 = c->fp8_recipe != SIM_FP8R_NONE, fp4 = c->fp4_recipe != 0;
    double act_b = fp4 ? 1.2 : fp8 ? 1.5 : 2.0;
    unsigned rcm = c->recompute_granularity == SIM_GRAN_SELECTIVE ? c->recompute_modules : 0;

    sbh = tokens * h;
    a_norm = 4 * sbh / tp;
    a_attn = 2 * tokens * (heads * kvc * 2 + 2 * groups * kvc) / tp;
    if (c->multi_latent_attention) {
        double qk = c->qk_head_dim, rope = c->qk_pos_emb_head_dim, v = c->v_head_dim;
        a_mla = 1.5 * tokens * heads * (2 * (qk + rope) + v) / tp; /* point D: 30.4 GB */
        a_attn = 4 * tokens * heads * (qk + rope + v) / tp;
    }
    a_moe = tokens * c->moe_router_topk * imb * (act_b * h + 4 * c->moe_ffn_hidden_size) / etp / tp;
    /* the SwiGLU output the expert fc2 needs (calibration D: 3.8 GB for all
     * of DeepSeek-V3's in-flight MoE layers) */
    a_act = 0.4 * tokens * c->moe_router_topk * imb * 2 * c->moe_ffn_hidden_size / etp / tp;
    a_shared = c->moe_shared_expert_intermediate_size > 0
                   ? tokens * (act_b * h + 6 * c->moe_shared_expert_intermediate_size) / tp
                   : 0;
    a_mlp = tokens * (act_b * h + 6 * c->ffn_hidden_size) / tp;
    if (rcm & SIM_RC_LAYERNORM)
        a_norm *= 0.25;
    if (rcm & SIM_RC_CORE_ATTN)
        a_attn *= 0.3;
    if (rcm & SIM_RC_MLA_UP_PROJ)
        a_mla = 0;
    if (rcm & SIM_RC_MOE_ACT)
        a_act = 0;
    if (rcm & SIM_RC_MOE)
        a_moe = a_act = 0;
    if (rcm & SIM_RC_MLP)
        a_mlp = 0, a_shared = 0, a_act *= 0.5;
    if (rcm & SIM_RC_SHARED_EXPERTS)
        a_shared = 0;
    if (c->fine_grained_activation_offloading) {
        unsigned o = c->offload_modules;
        if (o & SIM_OFF_CORE_ATTN)
            a_attn *= 0.3;
        if (o & SIM_OFF_EXPERT_FC1)
            a_moe *= 0.5;
        if (o & SIM_OFF_MOE_ACT)
            a_act = 0;
        if (o & (SIM_OFF_ATTN_NORM | SIM_OFF_MLP_NORM))
            a_norm *= 0.5;
        if (o & SIM_OFF_QKV_LINEAR)
            a_attn *= 0.8;
    }
    micro_act = layers * (a_norm + a_attn + a_mla) + moe_layers * (a_moe + a_act + a_shared) +
                dense_here * a_mlp;
    if (c->recompute_granularity == SIM_GRAN_FULL)
        micro_act = layers * 2 * sbh / tp + a_norm + a_attn + a_mla + a_moe + a_act + a_shared;
    return micro_act;
}

/* CUDA graphs' pools, comm buffers, and the allocator's totals and fragmentation. */
static void mem_graphs_totals(const sim_cfg *c, double pp, sim_mem *m)
{
    if (c->cuda_graph_impl == SIM_CG_FULL_ITERATION)
        /* the whole step in one graph: its private pool is where the step's
         * activations live (counted above), plus static inputs/outputs */
        m->graphs = 2.5e9 + 0.05 * m->activations;
    else if (c->cuda_graph_impl != SIM_CG_NONE)
        m->graphs = pp > 1 ? 10.5e9 + 0.05 * m->activations : 2.0e9 + 0.05 * m->activations;
    m->buffers = 1.2e9;
    if (c->moe_token_dispatcher_type == SIM_DISP_FLEX) {
        if (c->moe_flex_dispatcher_backend == SIM_BACKEND_DEEPEP)
            m->buffers += 2.0e9;
        else if (c->moe_flex_dispatcher_backend == SIM_BACKEND_HYBRIDEP)
            m->buffers += 1.5e9;
        else
            m->buffers += 1.0e9;
    }
    m->max_allocated =
        m->weights + m->grads + m->optimizer + m->activations + m->logits + m->graphs + m->buffers;
    m->allocated = m->weights + m->grads + m->optimizer + m->buffers + m->graphs;
    /* the caching allocator's fragmentation: a few percent plus a block */
    m->frag = 0.04 * m->max_allocated + 0.3e9;
    m->reserved = m->allocated + m->frag;
    m->max_reserved = m->max_allocated + m->frag;
}

void sim_rank_memory(const sim_cfg *c, int rank, sim_mem *m)
{
    const mt_gpu_spec *g = sim_gpu(c);
    double tp = c->tensor_model_parallel_size, pp = c->pipeline_model_parallel_size;
    double cp = c->context_parallel_size, ep = c->expert_model_parallel_size, etp = sim_etp(c);
    double world = sim_world(c), dp, edp, V = c->vocab_size;
    double s = c->seq_length, b = c->micro_batch_size, tokens, layers, moe_layers, dense_here;
    double micro_act, inflight, nmicro, imb = 1, stage_size;
    int stage, vpp, pp_i = (int)pp, first, last;

    memset(m, 0, sizeof *m);
    if (!g || tp < 1 || pp < 1 || cp < 1 || ep < 1 || etp < 1 || world < 1)
        return;
    dp = fmax(1, floor(world / (tp * pp * cp)));
    edp = fmax(1, floor(world / (etp * ep * pp)));
    stage_size = world / pp;
    stage = (int)(rank / stage_size);
    if (stage >= pp_i)
        stage = pp_i - 1;
    first = stage == 0;
    last = stage == pp_i - 1;
    layers = stage_layers(c, stage, &vpp);
    dense_here = first ? fmin(c->first_k_dense, layers) : 0;
    moe_layers = layers - dense_here;
    /* the hot expert rank (EP index 0 by convention) takes the routing
     * excess.  The step waits for the hottest rank of every layer, but a
     * GPU's memory sums its own load over its layers, and the hot rank of
     * one layer is not the hot rank of the next: over n MoE layers its
     * excess averages down by sqrt(n) */
    if ((int)(fmod(rank, stage_size) / etp) % (int)ep == 0)
        imb = 1 + (routing_imbalance(c) - 1) / sqrt(fmax(1, moe_layers));

    mem_states(c, stage, dp, edp, m);

    tokens = s * b / cp;
    micro_act = micro_activations(c, tokens, imb, layers, moe_layers, dense_here);
    nmicro = (c->global_batch_size > 0 ? c->global_batch_size : b * dp) / (b * dp);
    inflight = fmin(pp - stage, nmicro);
    if (vpp > 1)
        inflight *= 1 + (pp - 1) / (pp * vpp);
    if (inflight < 1)
        inflight = 1;
    m->activations = micro_act * inflight;
    if (last)
        m->logits = tokens * V / tp * 6;
    mem_graphs_totals(c, pp, m);
}

int sim_hottest_rank(const sim_cfg *c, double *max_reserved)
{
    int world = sim_world(c), pp = c->pipeline_model_parallel_size, best = 0, stage;
    int stage_size = pp > 0 ? world / pp : world;
    double top = -1;
    /* ranks differ by pipeline stage and by hot expert rank: check the first
     * (EP index 0) and a cold rank of every stage */
    for (stage = 0; stage < (pp > 0 ? pp : 1); stage++) {
        int cand[2] = {stage * stage_size, stage * stage_size + stage_size - 1}, i;
        for (i = 0; i < 2; i++) {
            sim_mem m;
            if (cand[i] >= world)
                continue;
            sim_rank_memory(c, cand[i], &m);
            if (m.max_reserved > top) {
                top = m.max_reserved;
                best = cand[i];
            }
        }
    }
    if (max_reserved)
        *max_reserved = top;
    return best;
}

void sim_theoretical_memory(const sim_cfg *c, double *weight_opt_mb, double *act_mb)
{
    sim_mem m;
    sim_rank_memory(c, 0, &m);
    *weight_opt_mb = (m.weights + m.grads + m.optimizer) / (1024.0 * 1024.0);
    *act_mb = (m.activations + m.logits) / (1024.0 * 1024.0);
}
