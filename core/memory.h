/*
 * memory.h - analytic per-GPU memory estimate for the hottest rank.
 *
 * Used by `moetune check` and by the fit phase before any probe runs.  It
 * models weights, gradients, optimizer states (the distributed optimizer
 * shards dense states over DP and expert states over EDP), activations with
 * recompute and offload, pipeline in-flight microbatches, the logits of the
 * last stage, CUDA graph pools and dispatcher buffers.  Calibrated against
 * point A of shared/facts/calibration.md (61.4 GB peak on H100).
 */
#ifndef MT_MEMORY_H
#define MT_MEMORY_H

#include "kv.h"

typedef struct mt_mem_stage {
    double weights, grads, optimizer, activations, logits, graphs, buffers, total; /* GB */
    double layers;      /* transformer layers on this stage (all virtual chunks) */
} mt_mem_stage;

typedef struct mt_mem_estimate {
    mt_mem_stage first, last;
    const mt_mem_stage *hottest; /* points at first or last */
    const char *hottest_name;    /* "first pipeline stage" / "last pipeline stage" */
    double params_total;         /* whole model, billions */
    double hbm_gb;               /* capacity of one GPU */
} mt_mem_estimate;

/* 0, or -1 when the config's parallel sizes are unusable (zero). */
int mt_memory_estimate(const mt_kv *cfg, const mt_kv *hardware, mt_mem_estimate *out);

#endif
