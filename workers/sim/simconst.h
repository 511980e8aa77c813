/*
 * simconst.h - the named constants of the sim's cost model.  Values and
 * their sources are in simconst.c; `moetune-sim calibrate --fit` refits the
 * ones marked fitted there against the fitted calibration points.
 */
#ifndef MT_SIMCONST_H
#define MT_SIMCONST_H

#include <stddef.h>

typedef struct sim_constants {
    double gemm_eff, tp_penalty, mbs_gain, lowp_eff, lowp_eff_block, ungrouped_eff, attn_eff;
    double mem_passes, permute_fused, permute_unfused, norm_recompute;
    double a2a_intra, a2a_inter, a2a_nvl72, deepep_nvl72, sync_us;
    double imbalance;
    double overlap_cover, overlap_max_hidden, overlap_contention;
    double launch_us, host_layer_us, grace_factor, cpu_bind_gain, host_p, p2p_us, mla_up_bytes;
    double gb300_attn, overlap_host;
    double dp_exposed_overlap, cpu_opt_s_per_param, offload_gbps;
    double flex_nvl_hopper, tp_busbw, tp_step_us, quant_kernel_us;
} sim_constants;

/* The model's constants (mutable only by the fitting command). */
extern sim_constants K;

typedef struct sim_const_info {
    const char *name;
    size_t offset;
    int fitted;     /* refit by calibrate --fit */
    double lo, hi;  /* plausible range for the fit */
    const char *source;
} sim_const_info;

/* The table of constants, NULL-name terminated. */
const sim_const_info *sim_constants_table(void);
double *sim_const_ref(const sim_const_info *ci);

#endif
