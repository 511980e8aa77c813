/*
 * main.c - moetune-cuda-moe: a native MoE layer benchmark on cuBLASLt, NCCL
 * and CUDA graphs (workers/cuda/README.md).  Flags are parsed and checked
 * here, before any CUDA call; the GPU side is moe.cu.
 */
#include "moe_args.h"
#include "moe_gpu.h"

#include <stdio.h>

int main(int argc, char **argv)
{
    mt_moe_args a;
    char err[512];
    if (mt_moe_args_parse(&a, argc, argv, err, sizeof err)) {
        fprintf(stderr, "moetune-cuda-moe: %s\n", err);
        return MT_MOE_EXIT_USAGE;
    }
    if (a.help) {
        mt_moe_args_usage(stdout);
        return MT_MOE_EXIT_OK;
    }
    if (a.n_ignored)
        printf("moetune-cuda-moe: %d Megatron flag%s of the training command do%s not apply to "
               "one MoE layer and %s ignored: %s\n",
               a.n_ignored, a.n_ignored == 1 ? "" : "s", a.n_ignored == 1 ? "es" : "",
               a.n_ignored == 1 ? "is" : "are", a.ignored);
    return mt_moe_gpu_main(&a);
}
