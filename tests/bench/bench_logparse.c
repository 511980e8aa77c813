/*
 * bench_logparse.c - throughput of the Megatron log parser on one core.
 *
 * Generates large logs in Megatron's real formats in memory, then times
 * mt_logparse_feed over them in 64 KiB chunks (what a pipe read delivers),
 * best of three, and prints MB/s (10^6 bytes per second) for each:
 *   megatron-lm  a pretraining log: the world line and arguments dump, NCCL
 *                INFO start-up lines, then one iteration line per step with
 *                a memory line, a warning or a validation block now and then
 *   bridge       the same as Megatron-Bridge prints it (no microseconds, a
 *                "Step Time" line before every iteration line, GB memory)
 *   srun-l       the megatron-lm log with every line labelled "<task>: "
 *   nccl-debug   NCCL_DEBUG=INFO chatter only (no iteration line at all): the
 *                worst case for the event scan
 * The target is >= 200 MB/s on one core.  Timing never fails a build.
 *
 *   bench_logparse [MiB per log, default 256]
 */
#include "logparse.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct buf {
    char *p;
    size_t n, cap;
} buf;

static void put(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(buf *b, const char *fmt, ...)
{
    va_list ap;
    int k;
    if (b->cap - b->n < 4096) {
        b->cap = b->cap ? b->cap * 2 : 1 << 20;
        b->p = realloc(b->p, b->cap);
        if (!b->p) {
            perror("realloc");
            exit(1);
        }
    }
    va_start(ap, fmt);
    k = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
}

static unsigned long long rng = 0x2545f4914f6cdd1dULL;
static double urand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static void stamp(char *out, size_t n, long long t_us, int frac)
{
    long long s = t_us / 1000000;
    int h = (int)(s / 3600 % 24), m = (int)(s / 60 % 60), sec = (int)(s % 60);
    if (frac)
        snprintf(out, n, "2026-01-%02lld %02d:%02d:%02d.%06lld", 1 + s / 86400 % 28, h, m, sec,
                 t_us % 1000000);
    else
        snprintf(out, n, "2026-01-%02lld %02d:%02d:%02d", 1 + s / 86400 % 28, h, m, sec);
}

/* prefix: "" or an srun label per line */
static void gen_training(buf *b, size_t target, int bridge, int srun)
{
    static const char *const args[] = {"bf16",
                                       "True",
                                       "context_parallel_size",
                                       "1",
                                       "cuda_graph_impl",
                                       "transformer_engine",
                                       "expert_model_parallel_size",
                                       "16",
                                       "global_batch_size",
                                       "1024",
                                       "moe_token_dispatcher_type",
                                       "flex",
                                       "pipeline_model_parallel_size",
                                       "2",
                                       "seq_length",
                                       "4096"};
    const char *dots = "................................................";
    long long t = 180000000, it;
    int total = 500000, i;
    char ts[40], pre[16] = "";
    if (srun)
        snprintf(pre, sizeof pre, "0: ");
    put(b,
        "%susing world size: 16, data-parallel size: 8, context-parallel size: 1, hierarchical "
        "context-parallel sizes: None, tensor-model-parallel size: 1, "
        "encoder-tensor-model-parallel size: 0, pipeline-model-parallel size: 2, "
        "encoder-pipeline-model-parallel size: 0\n",
        pre);
    put(b, "%s------------------------ arguments ------------------------\n", pre);
    for (i = 0; i < 90; i++) {
        const char *k = args[2 * (i % 8)];
        put(b, "%s  %s%d %.*s %s\n", pre, k, i, (int)(46 - strlen(k)), dots, args[2 * (i % 8) + 1]);
    }
    put(b, "%s-------------------- end of arguments ---------------------\n", pre);
    for (i = 0; i < 400; i++)
        put(b, "%snode%d:%d:%d [%d] NCCL INFO Channel %02d/0 : %d[%d] -> %d[%d] via P2P/IPC\n", pre,
            i % 2, 4000 + i % 16, 4100 + i, i % 8, i % 32, i % 16, i % 8, (i + 1) % 16,
            (i + 1) % 8);
    for (it = 1; b->n < target; it++) {
        double ms = 4300 + 200 * urand(), lm = 2.0 + 9.0 / (1 + it / 100.0) + 0.01 * urand();
        if (srun)
            snprintf(pre, sizeof pre, "%d: ", 15);
        t += (long long)(ms * 1000);
        stamp(ts, sizeof ts, t, !bridge);
        if (bridge)
            put(b, "%sStep Time : %.2fs GPU utilization: %.1fMODEL_TFLOP/s/GPU\n", pre, ms / 1000,
                520 + 10 * urand());
        put(b,
            "%s [%s] iteration %8lld/%8d | consumed samples: %12lld | elapsed time per iteration "
            "(ms): %.1f | throughput per GPU (TFLOP/s/GPU): %.1f | learning rate: %.6E | global "
            "batch size: %5d | lm loss: %.6E | load_balancing_loss: %.6E | loss scale: %.1f | grad "
            "norm: %.3f | number of skipped iterations: %3d | number of nan iterations: %3d |\n",
            pre, ts, it, total, it * 1024, ms, 520 + 10 * urand(), 3e-4 * (1 - it / 1e6), 1024, lm,
            1.0 + 0.01 * urand(), 1.0, 0.8 + urand(), 0, 0);
        if (it % 1000 == 2) {
            if (srun)
                snprintf(pre, sizeof pre, "%d: ", 8);
            if (bridge)
                put(b,
                    "%s[Rank 8] (after %lld iterations) memory (GB) | mem-allocated-gigabytes: "
                    "37.51 | mem-max-allocated-gigabytes: 58.719 | mem-reserved-gigabytes: 40.159 "
                    "| mem-max-reserved-gigabytes: 61.368 | mem-alloc-retires: 0\n",
                    pre, it);
            else
                put(b,
                    "%s[Rank 8] (after %lld iterations) memory (MB) | allocated: 35772.53 | max "
                    "allocated: 55999.13 | reserved: 38298.60 | max reserved: 58525.20\n",
                    pre, it);
        }
        if (it % 500 == 0) {
            put(b,
                "%s/usr/local/lib/python3.12/dist-packages/torch/utils/checkpoint.py:87: "
                "UserWarning: None of the inputs have requires_grad=True. Gradients will be None\n",
                pre);
            put(b,
                "%s-----------------------------------------------------------------------------\n",
                pre);
            put(b,
                "%s validation loss at iteration %lld on validation set | lm loss value: %.6E | "
                "lm loss PPL: %.6E | \n",
                pre, it, lm, 8.0);
            put(b,
                "%s-----------------------------------------------------------------------------\n",
                pre);
        }
    }
}

static void gen_nccl(buf *b, size_t target)
{
    long long i;
    for (i = 0; b->n < target; i++)
        switch (i % 4) {
        case 0:
            put(b,
                "node%lld:%lld:%lld [%lld] NCCL INFO Channel %02lld/0 : %lld[%lld] -> %lld[%lld] "
                "via "
                "P2P/IPC/read\n",
                i % 4, 4000 + i % 16, 4100 + i % 97, i % 8, i % 32, i % 16, i % 8, (i + 1) % 16,
                (i + 1) % 8);
            break;
        case 1:
            put(b,
                "node%lld:%lld:%lld [%lld] NCCL INFO Connected all rings, use ring PXN 0 GDR 1\n",
                i % 4, 4000 + i % 16, 4100 + i % 97, i % 8);
            break;
        case 2:
            put(b,
                "node%lld:%lld:%lld [%lld] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB "
                "[2]mlx5_2:1/IB [3]mlx5_3:1/IB ; OOB ib0:10.0.0.%lld<0>\n",
                i % 4, 4000 + i % 16, 4100 + i % 97, i % 8, i % 250);
            break;
        default:
            put(b,
                "node%lld:%lld:%lld [%lld] NCCL INFO comm 0x%llx rank %lld nranks 16 cudaDev %lld "
                "nvmlDev %lld busId %llx000 commId 0x%llx - Init COMPLETE\n",
                i % 4, 4000 + i % 16, 4100 + i % 97, i % 8, 0x55d0c0000000LL + i, i % 16, i % 8,
                i % 8, 0x18 + i % 8, 0x7d3c1a2b3c4dLL ^ i);
            break;
        }
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void run(const char *name, const buf *b)
{
    double best = 1e30;
    size_t iters = 0, events = 0;
    int rep;
    for (rep = 0; rep < 3; rep++) {
        mt_logparse *p = mt_logparse_new();
        size_t o;
        double t0, dt;
        if (!p) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
        t0 = now();
        for (o = 0; o < b->n; o += 65536)
            mt_logparse_feed(p, b->p + o, b->n - o < 65536 ? b->n - o : 65536);
        mt_logparse_finish(p);
        dt = now() - t0;
        if (dt < best)
            best = dt;
        iters = mt_logparse_iterations(p);
        events = mt_logparse_events(p);
        mt_logparse_destroy(&p);
    }
    printf("%-12s %8.1f MB in %6.3f s: %7.1f MB/s  (%zu iterations, %zu events)\n", name,
           b->n / 1e6, best, b->n / 1e6 / best, iters, events);
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? (size_t)strtoul(argv[1], NULL, 10) : 256, target;
    buf lm = {0}, br = {0}, sr = {0}, nc = {0};
    if (!mib)
        mib = 256;
    target = mib << 20;
    gen_training(&lm, target, 0, 0);
    gen_training(&br, target, 1, 0);
    gen_training(&sr, target, 0, 1);
    gen_nccl(&nc, target);
    printf("log parser throughput, one core, 64 KiB chunks, best of 3 (target >= 200 MB/s)\n");
    run("megatron-lm", &lm);
    run("bridge", &br);
    run("srun-l", &sr);
    run("nccl-debug", &nc);
    free(lm.p);
    free(br.p);
    free(sr.p);
    free(nc.p);
    return 0;
}
