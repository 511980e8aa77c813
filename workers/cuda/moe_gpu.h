/*
 * moe_gpu.h - the GPU side of moetune-cuda-moe (moe.cu), called from main.c
 * with validated arguments.
 */
#ifndef MT_MOE_GPU_H
#define MT_MOE_GPU_H

#include "moe_args.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Finds the GPUs (one process drives GPUs 0 .. EP-1 of those visible, NCCL
 * communicators from ncclCommInitAll), runs the benchmark, --check or
 * --gemm-bench as asked, prints everything, and returns the exit code
 * (moe_args.h MT_MOE_EXIT_*). */
int mt_moe_gpu_main(const mt_moe_args *a);

#ifdef __cplusplus
}
#endif

#endif
