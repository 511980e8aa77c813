/*
 * memory.h - analytic per-GPU memory estimate for the hottest rank.
 *
 * Used by `moetune check`, the fit phase and the search before any probe
 * runs.  It is the core's own model of Megatron's memory, independent of the
 * simulator: it reads only the config (the core's knob names) and the
 * hardware view.  Per pipeline rank it counts
 *   - weights (BF16), main gradients (FP32 unless BF16 reduction is asked
 *     for) and Adam states (the distributed optimizer shards dense states
 *     over DP x CP and expert states over the expert-DP group; BF16 states
 *     with the precision-aware optimizer; CPU offload moves the moments),
 *   - saved activations per layer and microbatch (sequence parallel shards
 *     the norms and the MoE tokens over TP; routed experts hold topk copies
 *     of their tokens), with selective/full recompute, FP8/FP4 saved inputs
 *     and fine-grained offloading,
 *   - the microbatch-chunks in flight at the peak, replayed from Megatron's
 *     1F1B / interleaved schedule for that rank's chunks (explicit layouts,
 *     uneven first/last stages and MTP make ranks differ),
 *   - the loss stage's logits, one layer's backward workspace, CUDA graph
 *     static buffers, and memory outside the caching allocator (CUDA
 *     context, NCCL, dispatcher buffers).
 * The published peaks it is held to are in tests/test_memory.c.
 */
#ifndef MT_MEMORY_H
#define MT_MEMORY_H

#include "kv.h"

typedef struct mt_mem_stage {
    /* GB (1e9 bytes) */
    double weights, grads, optimizer, activations, logits, workspace, graphs, buffers, total;
    double layers;      /* transformer + MTP layers on this rank (all virtual chunks) */
    double inflight;    /* microbatch-chunks whose activations are held at the peak */
    double inflight_mb; /* the same in microbatches of the whole rank (activations over one
                           microbatch's worth of every chunk) */
    int rank;           /* pipeline rank, 0-based */
} mt_mem_stage;

typedef struct mt_mem_estimate {
    mt_mem_stage first, last;    /* pipeline ranks 0 and PP-1 */
    mt_mem_stage hot;            /* the rank with the largest total (may be a middle one) */
    const mt_mem_stage *hottest; /* points at hot */
    char hottest_name[64];       /* "every rank", "pipeline stage 2 of 8", ... (1-based) */
    double params_total;         /* whole model, billions */
    double hbm_gb;               /* capacity of one GPU */
    int pp, vpp;                 /* pipeline ranks, virtual chunks per rank */
    double microbatches;         /* microbatches per rank and step */
    /* what the static terms assumed, for reports */
    double grad_bytes;          /* bytes per parameter of the main gradients (4 or 2) */
    double state_bytes;         /* optimizer bytes per parameter on the GPU (master + moments) */
    double offload;             /* fraction of the optimizer step on the CPU */
    double dp_shard, edp_shard; /* ranks the distributed optimizer shards over (1: not) */
    double flex_buffer_gb;      /* part of buffers that is the flex dispatcher's */
} mt_mem_estimate;

/* Fills out for cfg on hardware (world_size, hbm_gb).  0, or -1 when the
 * config's sizes are unusable (a zero parallel size, a layout that does not
 * parse or does not divide into PP ranks). */
int mt_memory_estimate(const mt_kv *cfg, const mt_kv *hardware, mt_mem_estimate *out);

#endif
