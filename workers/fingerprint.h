/*
 * fingerprint.h - what a run ran on: hosts, GPU UUIDs and names, driver,
 * CUDA runtime and NCCL versions, container digest, stack commits.  Runs
 * whose fingerprints differ are not compared (A/B arms run on the same
 * nodes, in the same container, on the same stack).
 *
 * The CUDA runtime and NCCL versions come from the libraries themselves
 * (dlopen of libcudart / libnccl, cudaRuntimeGetVersion / ncclGetVersion,
 * neither of which touches a GPU), loaded once per process and kept loaded;
 * NULL in the JSON where a library is absent.  The container comes from
 * MOETUNE_CONTAINER_DIGEST when the launch sets it, else from the runtime's
 * hints (/run/.containerenv written by podman names the image id;
 * /.dockerenv only says "docker").
 */
#ifndef MT_FINGERPRINT_H
#define MT_FINGERPRINT_H

#include "diag.h"
#include "kv.h"
#include "nvml.h"

#include <stddef.h>

typedef struct mt_fingerprint_in {
    const char *const *hosts; /* the launcher's node list; NULL: this host */
    size_t n_hosts;
    int hosts_unknown;   /* 1: a launcher's node list that could not be
                            learnt (srun: Slurm never listed the step):
                            hosts is null, not this host */
    const mt_nvml *nvml; /* GPU UUIDs, names, driver; NULL or unavailable: none */
    const mt_kv *stack;  /* the contract's stack group (versions, commits) */
    const mt_kv *env;    /* the job's environment, for
                            MOETUNE_CONTAINER_DIGEST; NULL: this process's */
} mt_fingerprint_in;

/* The fingerprint as one line of JSON with the keys hosts (null when
 * hosts_unknown), gpus (index,
 * uuid, name), driver, nvml (its status line), cuda_runtime, nccl,
 * container (kind, digest, image) and stack.  Keys are always present
 * (null when unknown) so two fingerprints compare key by key.  Caller
 * frees.  NULL (problem in d) only when out of memory. */
char *mt_fingerprint_json(const mt_fingerprint_in *in, mt_diag *d);

/* 0 when a and b (from mt_fingerprint_json) describe the same machine and
 * software; 1 when they differ, each differing key in d as
 * "fingerprint differs in <key>: <a> vs <b>"; -1 when one is not a
 * fingerprint. */
int mt_fingerprint_compare(const char *a, const char *b, mt_diag *d);

/* "13.0" / "2.28.9" into buf, or "" when the library is absent; 0 when
 * known, -1 otherwise. */
int mt_fingerprint_cuda_runtime(char *buf, size_t cap);
int mt_fingerprint_nccl(char *buf, size_t cap);

#endif
