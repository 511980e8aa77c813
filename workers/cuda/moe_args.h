/*
 * moe_args.h - the command line of moetune-cuda-moe (Megatron flag names
 * where Megatron has one; see workers/cuda/README.md for the list) and its
 * exit codes.  Plain C: parsed and validated before any CUDA call, so a bad
 * flag is a usage error on any machine.
 */
#ifndef MT_MOE_ARGS_H
#define MT_MOE_ARGS_H

#include "moe_route.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Exit codes of moetune-cuda-moe (README.md "Exit codes"). */
enum {
    MT_MOE_EXIT_OK = 0,
    MT_MOE_EXIT_FAIL = 1,      /* a CUDA, cuBLASLt or NCCL call failed (the message names it) */
    MT_MOE_EXIT_USAGE = 2,     /* bad flag or value (the message names the flag) */
    MT_MOE_EXIT_CHECK = 3,     /* --check outside tolerance, graph replay differs, counts differ */
    MT_MOE_EXIT_OOM = 4,       /* the buffers do not fit in GPU memory ("CUDA out of memory") */
    MT_MOE_EXIT_FEW_GPUS = 68, /* fewer GPUs visible than --expert-model-parallel-size */
    MT_MOE_EXIT_NO_GPU = 69,   /* no usable CUDA GPU visible (EX_UNAVAILABLE) */
    MT_MOE_EXIT_SKIP = 77      /* --check only: 68 or 69 would apply; CTest's skip code */
};

typedef enum mt_moe_graph_scope {
    MT_MOE_GRAPH_NONE = 0,
    MT_MOE_GRAPH_ROUTER = 1,           /* router GEMM, softmax, top-k */
    MT_MOE_GRAPH_ROUTER_PREPROCESS = 2 /* and the permutation indices and counts */
} mt_moe_graph_scope;

typedef struct mt_moe_args {
    int hidden;      /* --hidden-size */
    int ffn;         /* --moe-ffn-hidden-size */
    int experts;     /* --num-experts */
    int topk;        /* --moe-router-topk */
    int micro_batch; /* --micro-batch-size */
    int seq_length;  /* --seq-length */
    int tokens;      /* per GPU: micro_batch * seq_length, or --tokens */
    int ep;          /* --expert-model-parallel-size */
    int fp8;         /* --fp8-format e4m3 (else BF16, --bf16) */
    int overlap;     /* --overlap-moe-expert-parallel-comm */
    int chunks;      /* expert chunks the communication is cut into (1 without overlap) */
    mt_moe_graph_scope graph_scope; /* --cuda-graph-scope / --cuda-graph-modules */
    int recompute_act;              /* --recompute-modules moe_act */
    int train_iters;                /* --train-iters */
    mt_moe_routing routing;         /* --moe-routing, --moe-router-force-load-balancing */
    double zipf_alpha;              /* --zipf-alpha */
    uint64_t seed;                  /* --seed */
    int check;                      /* --check: compare with the CPU reference */
    int gemm_bench;                 /* --gemm-bench N: time the expert GEMMs N times */
    double peak_bf16, peak_fp8;     /* --peak-bf16-tflops, --peak-fp8-tflops (0: by device) */
    int help;                       /* --help */
    int n_ignored;                  /* Megatron flags accepted but not applicable here */
    char ignored[1024];             /* their names, blank-separated (cut at the size) */
} mt_moe_args;

/* Largest problem --check accepts: tokens*ep*topk*hidden*ffn (the CPU
 * reference's work), so that a check stays a matter of seconds. */
#define MT_MOE_CHECK_MAX_WORK (1LL << 31)

/* The defaults (Qwen3-30B-A3B's expert shape on 4096 tokens, BF16, EP 1). */
void mt_moe_args_defaults(mt_moe_args *a);

/* Parses argv[1..argc-1] into *a (defaults first) and validates the whole.
 * 0, or -EINVAL with a one-line message in err naming the flag. */
int mt_moe_args_parse(mt_moe_args *a, int argc, char **argv, char *err, size_t errlen);

/* The usage text. */
void mt_moe_args_usage(FILE *f);

/* "bf16" | "fp8-e4m3", "none" | "router" | "router+preprocess", "balanced" | "zipf" */
const char *mt_moe_prec_name(const mt_moe_args *a);
const char *mt_moe_scope_name(mt_moe_graph_scope s);
const char *mt_moe_routing_name(mt_moe_routing r);

#ifdef __cplusplus
}
#endif

#endif
