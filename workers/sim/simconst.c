/*
 * simconst.c - values of the cost model's constants and where each comes
 * from.  "fit" = refit by `moetune-sim calibrate --fit` on the fitted points
 * declared in simcalib.c (at most half of all points); the value here is
 * the result of the last fit.
 */
#include "simconst.h"

#include <stddef.h>

sim_constants K = {
    /* compute */
    .gemm_eff = 0.849972,       /* fit (at its upper bound, 0.85): share of BF16 peak large GEMMs
                                 * reach */
    .tp_penalty = 0.0222086,    /* fit: GEMM efficiency lost per extra TP rank (narrower
                                 * per-rank matrices); TP's main cost is its collectives below */
    .mbs_gain = 0.04,           /* bigger microbatches make bigger GEMMs */
    .lowp_eff = 0.89961,        /* fit (at its upper bound, 0.9): share of the FP8 peak per-tensor
                                 * recipes' GEMMs reach; their quantization is costed apart */
    .lowp_eff_block = 0.949716, /* fit (at its upper bound, 0.95): the same for
                                 * MXFP8/NVFP4 block scaling */
    .ungrouped_eff = 0.55,      /* one GEMM per local expert instead of a grouped GEMM */
    .attn_eff = 0.45,           /* flash attention fwd+bwd vs BF16 peak */
    .gb300_attn = 1.5,          /* Blackwell Ultra: 2x softmax exponent rate, ~1.5x attention */
    /* memory-bound passes */
    .mem_passes = 2.36959,      /* fit: bytes multiplier for norms, router, permute,
                                 * activation */
    .permute_fused = 2.0,       /* passes over routed tokens with fused permute */
    .permute_unfused = 4.65281, /* fit: unfused permute/unpermute passes */
    .norm_recompute = 262.735,  /* fit (point E5): bytes per hidden element a layernorm
                                 * recompute moves; large because it re-runs the fused
                                 * norm+quant+residual */
    .mla_up_bytes = 0.0968758,  /* fit (point E2, near its lower bound 0): passes over
                                 * the MLA up-projection outputs beyond its GEMMs */
    /* EP dispatch / combine (GB/s per GPU) */
    .a2a_intra = 120.0,    /* NCCL all-to-all inside an H100 node */
    .a2a_inter = 30.0,     /* NCCL all-to-all across nodes: ~60% of a 50 GB/s NIC (many small
                            * per-peer messages, no hierarchical dedup); A4 predicts it */
    .a2a_nvl72 = 255.0,    /* NCCL all-to-all inside NVL72, between what keeps point C0's EP share
                            * above 20% and alltoall close to HybridEP inside one NVLink domain
                            * (calibration.md, shape of the landscape) */
    .deepep_nvl72 = 350.0, /* DeepEP inside NVL72 (combine drops to ~207 GB/s at 24 ranks) */
    .sync_us = 2863.92,    /* fit (points I): host time a host-blocking sync exposes per MoE
                            * layer and microbatch, less the dispatch it launches first */
    .imbalance = 0.783964, /* fit (point A5): natural routing's hot-rank excess per
                            * sqrt(EP) / sqrt(experts per rank) */
    /* EP overlap */
    .overlap_cover = 0.5,        /* EP overlap hides comm under at most this share of compute */
    .overlap_max_hidden = 0.366, /* point A: EP overlap hides 36.6% of communication time */
    .overlap_contention = 0.03,  /* SM contention of overlapped comm kernels */
    .overlap_host = 1.3,         /* EP overlap: ~30% more host work per layer (split chunks,
                                  * stream syncs); makes it a net loss on host-bound GB200 (C) */
    /* the host */
    .launch_us = 36.0651,      /* fit: host cost per uncaptured kernel (Python + launch), x86 */
    .host_layer_us = 1800,     /* fit (at its upper bound, 1.8 ms): Python per
                                * transformer layer and microbatch, fwd+bwd, x86 */
    .grace_factor = 3.68937,   /* fit (points C): host cost on the 256-GPU Grace systems
                                * vs x86; above Grace's single-thread deficit, it also carries
                                * the per-layer collective latencies of 64-node runs */
    .cpu_bind_gain = 0.906776, /* fit (point C7): CPU/NUMA binding cuts host cost */
    .host_p = 4.00024,         /* fit (at its lower bound, 4): smooth-max exponent of the host and
                                * GPU streams; large = the slower stream alone sets the pace */
    /* pipeline, DP, optimizer, offload */
    .p2p_us = 40.0,                     /* pipeline send/recv per microbatch and chunk */
    .dp_exposed_overlap = 0.15,         /* last bucket of overlapped grad reduce / param gather */
    .cpu_opt_s_per_param = 2.53952e-08, /* fit (point F1): CPU Adam step per parameter */
    .offload_gbps = 50.0,               /* host link for activation offload */
    /* with point I */
    .flex_nvl_hopper = 1.70706, /* fit: DeepEP/HybridEP inside an H100 node vs the
                                 * H800 figure (at most NVLink's 900/400 GB/s) */
    .tp_busbw = 0.49999,        /* fit (at its upper bound, 0.5): NCCL all-gather/reduce-scatter
                                 * bus bandwidth inside a node, share of the NVLink figure */
    .tp_step_us = 19.9783,      /* fit (at its upper bound, 20): latency of one ring step of a
                                 * TP collective */
    .quant_kernel_us = 8.65087, /* fit (point I3): fixed cost of one quantization
                                 * kernel */
};

#define C(name, fitted, lo, hi, src)                                                               \
    {                                                                                              \
#name, offsetof(sim_constants, name), fitted, lo, hi, src                                  \
    }

static const sim_const_info table[] = {
    C(gemm_eff, 1, 0.3, 0.85, "fit"),
    C(tp_penalty, 1, 0, 0.2, "fit"),
    C(mbs_gain, 0, 0, 0.1, "GEMM size with MBS"),
    C(lowp_eff, 1, 0.6, 0.9, "fit"),
    C(lowp_eff_block, 1, 0.4, 0.95, "fit"),
    C(ungrouped_eff, 0, 0.3, 1, "grouped GEMM"),
    C(attn_eff, 0, 0.3, 0.7, "flash attention"),
    C(mem_passes, 1, 0.3, 4, "fit"),
    C(permute_fused, 0, 1, 4, "fused permute"),
    C(permute_unfused, 1, 4, 24, "fit"),
    C(norm_recompute, 1, 4, 400, "fit"),
    C(a2a_intra, 0, 60, 250, "NCCL intra-node"),
    C(a2a_inter, 0, 10, 50, "NCCL inter-node"),
    C(a2a_nvl72, 0, 150, 500, "NCCL NVL72"),
    C(deepep_nvl72, 0, 200, 500, "DeepEP NVL72"),
    C(sync_us, 1, 0, 8000, "fit"),
    C(imbalance, 1, 0.02, 1.0, "fit"),
    C(overlap_cover, 0, 0.2, 1, "EP overlap"),
    C(overlap_max_hidden, 0, 0.2, 0.8, "point A"),
    C(overlap_contention, 0, 0, 0.1, "EP overlap"),
    C(launch_us, 1, 1, 80, "fit"),
    C(host_layer_us, 1, 0, 1800, "fit"),
    C(grace_factor, 1, 1, 10, "fit"),
    C(gb300_attn, 0, 1, 2, "Blackwell Ultra attention"),
    C(overlap_host, 0, 1, 2, "EP overlap host work"),
    C(cpu_bind_gain, 1, 0.5, 1, "fit"),
    C(host_p, 1, 4, 8, "fit"),
    C(mla_up_bytes, 1, 0, 100, "fit"),
    C(p2p_us, 0, 5, 200, "pipeline p2p"),
    C(dp_exposed_overlap, 0, 0, 0.5, "DP overlap"),
    C(cpu_opt_s_per_param, 1, 1e-10, 1e-6, "fit"),
    C(offload_gbps, 0, 10, 200, "host link"),
    C(flex_nvl_hopper, 1, 1, 2.25, "fit"),
    C(tp_busbw, 1, 0.3, 0.5, "fit"),
    C(tp_step_us, 1, 2, 20, "fit"),
    C(quant_kernel_us, 1, 1, 40, "fit"),
    {NULL, 0, 0, 0, 0, NULL},
};

const sim_const_info *sim_constants_table(void)
{
    return table;
}
double *sim_const_ref(const sim_const_info *ci)
{
    return (double *)((char *)&K + ci->offset);
}
