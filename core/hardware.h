/*
 * hardware.h - per-GPU facts (dense peaks, memory, NVLink domain) from
 * shared/facts/calibration.md, keyed by the contract's GPU name.
 */
#ifndef MT_HARDWARE_H
#define MT_HARDWARE_H

typedef struct mt_gpu_spec {
    const char *name;     /* "H100" */
    const char *arch;     /* "hopper" | "blackwell" */
    double bf16_tflops;   /* dense */
    double fp8_tflops;    /* dense */
    double hbm_gb;        /* 1e9 bytes */
    double hbm_tbps;
    int nvlink_domain;    /* GPUs in one NVLink domain */
    double nvlink_gbps;   /* per GPU, GB/s */
    double scaleout_gbps; /* per GPU, GB/s */
    int sms;
    const char *compute_capability; /* "9.0", "10.0", "10.3" */
} mt_gpu_spec;

/* NULL when unknown.  Case-sensitive canonical names; see mt_gpu_names. */
const mt_gpu_spec *mt_gpu_find(const char *name);
/* The bytes a process can allocate on the GPU before CUDA runs out of
 * memory: the published capacity is binary (H100's "80 GB" is 80 GiB,
 * nvidia-smi shows 81,559 MiB), less about half a GiB for the CUDA context.
 * The simulated runs fail at this; moetune's own gates and the estimate
 * compare against hbm_gb x 10^9 and a headroom, which is stricter. */
double mt_gpu_oom_bytes(const mt_gpu_spec *g);
/* NULL-terminated list of known names (for messages). */
const char *const *mt_gpu_names(void);

#endif
