/*
 * nvml.h - every GPU's memory during a run: NVML loaded with dlopen (no
 * build dependency on the driver), a sampling thread that records each
 * GPU's peak used memory, and the sim's per-GPU report for where there is
 * no NVML (the sim's --sim-memory-file).
 *
 * NVML reports a GPU's used memory whoever uses it, and only for the GPUs
 * of this node: a multi-node run's other nodes are covered by their own
 * workers, or by the per-rank memory lines of the log.  The memory gate
 * reads the hottest GPU of the result (mt_gpu_mems_hottest), never rank 0's
 * log line alone.
 */
#ifndef MT_NVML_H
#define MT_NVML_H

#include "diag.h"

#include <stddef.h>
#include <stdint.h>

/* One GPU's memory over a run. */
typedef struct mt_gpu_mem {
    char *host;           /* node name */
    int gpu;              /* index on the node */
    int rank;             /* global rank on it, -1 when unknown (NVML) */
    char *uuid;           /* "GPU-...", NULL when unknown (sim) */
    uint64_t peak_bytes;  /* highest used memory seen */
    uint64_t base_bytes;  /* used at the start of sampling (another tenant,
                             the driver); 0 for the sim */
    uint64_t total_bytes; /* 0 when unknown */
} mt_gpu_mem;

typedef struct mt_gpu_mems {
    mt_gpu_mem *v;
    size_t n, cap;
    char *source; /* "nvml" or "sim" */
    long samples; /* NVML polls made (0 for the sim) */
} mt_gpu_mems;

void mt_gpu_mems_clear(mt_gpu_mems *m);
/* Index of the GPU with the highest peak, or -1 when there is none. */
long mt_gpu_mems_hottest(const mt_gpu_mems *m);

typedef struct mt_nvml mt_nvml;

/* Loads NVML (library NULL: "libnvidia-ml.so.1", or MOETUNE_NVML_LIBRARY
 * when set), initialises it and reads the device list, UUIDs and driver
 * version.  Never NULL except out of memory: where NVML is absent or fails
 * the handle says so (mt_nvml_available 0, mt_nvml_status why).  Caller
 * owns the return value; free with mt_nvml_destroy. */
mt_nvml *mt_nvml_open(const char *library);
void mt_nvml_destroy(mt_nvml **n);

int mt_nvml_available(const mt_nvml *n);
/* "NVML: 8 GPUs, driver 550.54.15" or "no NVML: libnvidia-ml.so.1: cannot
 * open shared object file ... (the sim's per-GPU report stands in)".
 * Borrowed. */
const char *mt_nvml_status(const mt_nvml *n);
int mt_nvml_device_count(const mt_nvml *n);
/* Borrowed; NULL when unknown. */
const char *mt_nvml_uuid(const mt_nvml *n, int i);
const char *mt_nvml_name(const mt_nvml *n, int i);
const char *mt_nvml_driver(const mt_nvml *n);

typedef struct mt_nvml_sampler mt_nvml_sampler;

/* Starts a thread polling every GPU's used memory every period_ms (0:
 * 150 ms; at least 10 ms).  n must outlive the sampler.  NULL, with the
 * reason in d, when NVML is unavailable or the thread cannot start. */
mt_nvml_sampler *mt_nvml_sampler_start(mt_nvml *n, int period_ms, mt_diag *d);
/* Takes a last sample, stops and joins the thread, appends one entry per
 * GPU of this host to out (source "nvml"), frees the sampler and sets *s
 * to NULL.  0 or -ENOMEM. */
int mt_nvml_sampler_stop(mt_nvml_sampler **s, mt_gpu_mems *out);

/* Reads the sim's per-GPU report (--sim-memory-file PATH / env
 * MOETUNE_SIM_MEMORY_FILE): one line per rank,
 * "rank=<r> host=<name> gpu=<local> peak_mib=<x>".  Appends to out (source
 * "sim").  0, or -1 with file:line and the problem in d. */
int mt_sim_memory_read(const char *path, mt_gpu_mems *out, mt_diag *d);

#endif
