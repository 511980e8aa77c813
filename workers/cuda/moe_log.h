/*
 * moe_log.h - what moetune-cuda-moe prints, in the formats of Megatron-LM's
 * training loop (shared/facts/megatron.md "Log formats"), so that moetune's
 * log parser (core/logparse.c) and everything behind it read the benchmark
 * unchanged:
 *
 *   the arguments dump   ------------------------ arguments ------------------------
 *                          hidden_size ..................................... 2048
 *                        -------------------- end of arguments ---------------------
 *   the world line       using world size: 8, data-parallel size: 8, context-parallel
 *                        size: 1, tensor-model-parallel size: 1, pipeline-model-parallel size: 1
 *   an iteration         " [2026-08-01 12:00:00.123456] iteration        3/      10 |
 *                        consumed samples:            3 | elapsed time per iteration (ms): 12.3 |
 *                        throughput per GPU (TFLOP/s/GPU): 456.7 | global batch size:     1 |
 *                        number of skipped iterations:   0 | number of nan iterations:   0 |"
 *                        (one line)
 *   memory, per rank     [Rank 0] (after 1 iterations) memory (MB) | allocated: 1.00 |
 *                        max allocated: 2.00 | reserved: 3.00 | max reserved: 4.00
 *   CUDA graph capture   Time spent in CUDA Graphs capture on rank 0: 0.012s
 *
 * Lines of the benchmark's own start with "moetune-cuda-moe: ".  Every
 * function writes whole lines and flushes (a parent reading a pipe sees each
 * at once); 0, or -EIO when the stream failed.
 */
#ifndef MT_MOE_LOG_H
#define MT_MOE_LOG_H

#include "moe_args.h"

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mt_moe_iter_log {
    double wall;          /* seconds since 1970 at the end of the iteration (local time printed) */
    int iteration, total; /* 1-based */
    int64_t consumed;     /* samples (sequences) consumed so far, all GPUs */
    double elapsed_ms;    /* this iteration */
    double tflops;        /* per GPU; negative: not printed */
    int global_batch;     /* sequences per iteration, all GPUs */
} mt_moe_iter_log;

int mt_moe_log_iteration(FILE *f, const mt_moe_iter_log *l);

/* Bytes in, printed in MiB as Megatron does ("memory (MB)"). */
int mt_moe_log_memory(FILE *f, int rank, int after, int64_t allocated, int64_t max_allocated,
                      int64_t reserved, int64_t max_reserved);

/* The arguments dump (argparse dest names, Python spellings: True, None,
 * ['moe_router']) and the world-size line; world = EP. */
int mt_moe_log_args(FILE *f, const mt_moe_args *a);

int mt_moe_log_capture(FILE *f, int rank, double seconds);

/* "moetune-cuda-moe: CUDA out of memory. Tried to allocate ..." (moetune's
 * parser classifies the run as OOM from it); to stderr, by the caller's f. */
int mt_moe_log_oom(FILE *f, int rank, int gpu, double tried_bytes, double free_bytes,
                   double total_bytes, double needed_bytes);

/* The model FLOPs of one iteration on one GPU: router GEMM forward and
 * backward (2+4 * tokens*hidden*experts) and the expert GEMMs over the rows
 * the GPU received (6 * rows*hidden*ffn forward for SwiGLU, twice that
 * backward).  Recomputation is not counted (as Megatron's model FLOPs). */
double mt_moe_layer_flops(const mt_moe_args *a, int64_t rows);
/* The expert GEMMs alone, forward (fwd 1) or backward (fwd 0). */
double mt_moe_expert_flops(const mt_moe_args *a, int64_t rows, int fwd);

#ifdef __cplusplus
}
#endif

#endif
