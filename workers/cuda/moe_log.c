/*
 * moe_log.c - Megatron-format lines of moetune-cuda-moe (see moe_log.h).
 */
#include "moe_log.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <time.h>

#define MiB (1024.0 * 1024.0)

static int done(FILE *f)
{
    fflush(f);
    return ferror(f) ? -EIO : 0;
}

int mt_moe_log_iteration(FILE *f, const mt_moe_iter_log *l)
{
    char ts[48];
    struct tm tm;
    double whole = floor(l->wall > 0 ? l->wall : 0);
    time_t t = (time_t)whole;
    long us = (long)((l->wall - whole) * 1e6);
    if (us < 0)
        us = 0;
    if (us > 999999)
        us = 999999;
    if (!localtime_r(&t, &tm))
        memset(&tm, 0, sizeof tm);
    snprintf(ts, sizeof ts, "%04d-%02d-%02d %02d:%02d:%02d.%06ld", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, us);
    fprintf(f,
            " [%s] iteration %8d/%8d | consumed samples: %12lld | elapsed time per "
            "iteration (ms): %.1f |",
            ts, l->iteration, l->total, (long long)l->consumed, l->elapsed_ms);
    if (l->tflops >= 0)
        fprintf(f, " throughput per GPU (TFLOP/s/GPU): %.1f |", l->tflops);
    fprintf(f,
            " global batch size: %5d | number of skipped iterations: %3d | number of nan "
            "iterations: %3d |\n",
            l->global_batch, 0, 0);
    return done(f);
}

int mt_moe_log_memory(FILE *f, int rank, int after, int64_t allocated, int64_t max_allocated,
                      int64_t reserved, int64_t max_reserved)
{
    fprintf(f,
            "[Rank %d] (after %d iterations) memory (MB) | allocated: %.2f | max allocated: "
            "%.2f | reserved: %.2f | max reserved: %.2f\n",
            rank, after, (double)allocated / MiB, (double)max_allocated / MiB,
            (double)reserved / MiB, (double)max_reserved / MiB);
    return done(f);
}

static void arg(FILE *f, const char *name, const char *value)
{
    size_t n = strlen(name), dots = n < 48 ? 48 - n : 0, i;
    fprintf(f, "  %s ", name);
    for (i = 0; i < dots; i++)
        fputc('.', f);
    fprintf(f, " %s\n", value);
}

static void argi(FILE *f, const char *name, long long v)
{
    char b[32];
    snprintf(b, sizeof b, "%lld", v);
    arg(f, name, b);
}

int mt_moe_log_args(FILE *f, const mt_moe_args *a)
{
    char b[64];
    const char *scope = a->graph_scope == MT_MOE_GRAPH_ROUTER ? "['moe_router']"
                        : a->graph_scope == MT_MOE_GRAPH_ROUTER_PREPROCESS
                            ? "['moe_router', 'moe_preprocess']"
                            : "[]";
    fputs("------------------------ arguments ------------------------\n", f);
    arg(f, "benchmark_only", "True");
    argi(f, "hidden_size", a->hidden);
    argi(f, "moe_ffn_hidden_size", a->ffn);
    argi(f, "num_experts", a->experts);
    argi(f, "moe_router_topk", a->topk);
    argi(f, "micro_batch_size", a->micro_batch);
    argi(f, "seq_length", a->seq_length);
    argi(f, "global_batch_size", (long long)a->micro_batch * a->ep);
    argi(f, "expert_model_parallel_size", a->ep);
    argi(f, "world_size", a->ep);
    arg(f, "bf16", "True");
    arg(f, "fp8", a->fp8 ? "e4m3" : "None");
    arg(f, "fp8_recipe", a->fp8 ? "tensorwise" : "None");
    arg(f, "moe_router_dtype", "fp32");
    arg(f, "moe_grouped_gemm", "True");
    arg(f, "moe_token_dispatcher_type", "alltoall");
    arg(f, "overlap_moe_expert_parallel_comm", a->overlap ? "True" : "False");
    argi(f, "moe_overlap_chunks", a->chunks);
    arg(f, "cuda_graph_impl", a->graph_scope ? "local" : "none");
    arg(f, "cuda_graph_scope", scope);
    arg(f, "cuda_graph_modules", scope);
    arg(f, "recompute_granularity", a->recompute_act ? "selective" : "None");
    arg(f, "recompute_modules", a->recompute_act ? "['moe_act']" : "None");
    arg(f, "moe_router_force_load_balancing", "True");
    arg(f, "moe_routing", mt_moe_routing_name(a->routing));
    snprintf(b, sizeof b, "%g", a->zipf_alpha);
    arg(f, "zipf_alpha", a->routing == MT_MOE_ROUTE_ZIPF ? b : "None");
    argi(f, "train_iters", a->train_iters);
    argi(f, "log_interval", 1);
    arg(f, "log_throughput", "True");
    snprintf(b, sizeof b, "%llu", (unsigned long long)a->seed);
    arg(f, "seed", b);
    fputs("-------------------- end of arguments ---------------------\n", f);
    fprintf(f,
            "using world size: %d, data-parallel size: %d, context-parallel size: 1, "
            "tensor-model-parallel size: 1, pipeline-model-parallel size: 1\n",
            a->ep, a->ep);
    return done(f);
}

int mt_moe_log_capture(FILE *f, int rank, double seconds)
{
    fprintf(f, "Time spent in CUDA Graphs capture on rank %d: %.3fs\n", rank, seconds);
    return done(f);
}

int mt_moe_log_oom(FILE *f, int rank, int gpu, double tried_bytes, double free_bytes,
                   double total_bytes, double needed_bytes)
{
    fprintf(f,
            "moetune-cuda-moe: CUDA out of memory. Tried to allocate %.2f MiB on rank %d (GPU "
            "%d: %.2f GiB free of %.2f GiB); this configuration needs %.2f GiB per GPU\n",
            tried_bytes / MiB, rank, gpu, free_bytes / (MiB * 1024), total_bytes / (MiB * 1024),
            needed_bytes / (MiB * 1024));
    return done(f);
}

double mt_moe_expert_flops(const mt_moe_args *a, int64_t rows, int fwd)
{
    double f = 6.0 * (double)rows * a->hidden * a->ffn;
    return fwd ? f : 2.0 * f;
}

double mt_moe_layer_flops(const mt_moe_args *a, int64_t rows)
{
    return 6.0 * a->tokens * (double)a->hidden * a->experts + mt_moe_expert_flops(a, rows, 1) +
           mt_moe_expert_flops(a, rows, 0);
}
