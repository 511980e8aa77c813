/*
 * simlog.c - the sim's output, line for line as Megatron-LM prints it
 * (megatron/training/training.py training_log, report_memory,
 * arguments.py _print_args and validate_args), with Megatron-Bridge's
 * variants (timestamps without microseconds, the "Step Time" line, memory in
 * GB), and the sim's own "[sim] ..." lines.
 */
#include "simlog.h"

#include "hardware.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MiB (1024.0 * 1024.0)
#define GiB (1024.0 * 1024.0 * 1024.0)

/* One line, flushed: a parent reading a pipe sees it at once. */
static void line(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(FILE *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fflush(f);
}

void simlog_time(char *buf, size_t n, double clock_s, int frac)
{
    long long us = llround((clock_s > 0 ? clock_s : 0) * 1e6);
    time_t t = (time_t)(SIM_EPOCH + us / 1000000);
    struct tm tm;
    gmtime_r(&t, &tm);
    if (frac)
        snprintf(buf, n, "%04d-%02d-%02d %02d:%02d:%02d.%06lld", tm.tm_year + 1900, tm.tm_mon + 1,
                 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, us % 1000000);
    else
        snprintf(buf, n, "%04d-%02d-%02d %02d:%02d:%02d", tm.tm_year + 1900, tm.tm_mon + 1,
                 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

/* ---- the training curve ------------------------------------------------------ */

static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* A standard normal drawn from (seed, iteration, stream) alone. */
static double curve_gauss(const sim_cfg *c, int it, unsigned stream)
{
    uint64_t s = mix64((uint64_t)(int64_t)c->seed ^ mix64((uint64_t)(unsigned)it << 8 | stream));
    uint64_t a = mix64(s), b = mix64(s ^ 0x5851f42d4c957f2dULL);
    double u1 = ((double)(a >> 11) + 0.5) / 9007199254740992.0;
    double u2 = ((double)(b >> 11) + 0.5) / 9007199254740992.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

double simlog_lm_loss(const sim_cfg *c, int it)
{
    double v = c->vocab_size > 0 ? c->vocab_size : 50257; /* GPT-2's vocabulary by default */
    double start = log(v) + 0.05, floor_ = 2.0;
    double base = floor_ + (start - floor_) / sqrt(1.0 + it / 12.0);
    /* random routing (benchmark-only) trains a little worse */
    if (c->moe_router_force_load_balancing)
        base += 0.01;
    return base * (1.0 + 0.004 * curve_gauss(c, it, 1)) * (1.0 + c->loss_shift);
}

double simlog_lb_loss(const sim_cfg *c, int it)
{
    if (c->num_experts <= 0)
        return 0;
    if (c->moe_router_force_load_balancing)
        return 1.0 + 0.0005 * fabs(curve_gauss(c, it, 2));
    return 1.0 + 0.12 * exp(-it / 25.0) + 0.003 * fabs(curve_gauss(c, it, 2));
}

double simlog_grad_norm(const sim_cfg *c, int it)
{
    return 0.9 + 6.0 * exp(-it / 10.0) + 0.05 * fabs(curve_gauss(c, it, 3));
}

double simlog_lr(const sim_cfg *c, int it)
{
    const double max_lr = 3.0e-4, min_lr = 3.0e-5;
    int n = c->train_iters > 0 ? c->train_iters : 1;
    int warm = n / 10 > 0 ? n / 10 : 1;
    double p;
    if (it <= warm)
        return max_lr * it / warm;
    p = (double)(it - warm) / (n - warm > 0 ? n - warm : 1);
    if (p > 1)
        p = 1;
    return min_lr + (max_lr - min_lr) * 0.5 * (1.0 + cos(3.141592653589793 * p));
}

/* ---- start-up ---------------------------------------------------------------- */

void simlog_world(FILE *f, const sim_cfg *c)
{
    line(f,
         "using world size: %d, data-parallel size: %d, context-parallel size: %d, hierarchical "
         "context-parallel sizes: None, tensor-model-parallel size: %d, "
         "encoder-tensor-model-parallel size: 0, pipeline-model-parallel size: %d, "
         "encoder-pipeline-model-parallel size: 0",
         sim_world(c), sim_dp(c), c->context_parallel_size, c->tensor_model_parallel_size,
         c->pipeline_model_parallel_size);
}

static void dump_line(void *ctx, const char *name, const char *value)
{
    static const char dots[] = "................................................";
    int n = 48 - (int)strlen(name);
    if (n < 0)
        n = 0;
    line((FILE *)ctx, "  %s %.*s %s", name, n, dots, value);
}

void simlog_args(FILE *f, const sim_cfg *c, const sim_opts *o)
{
    line(f, "------------------------ arguments ------------------------");
    sim_args_dump(c, o, dump_line, f);
    line(f, "-------------------- end of arguments ---------------------");
}

void simlog_sim_info(FILE *f, const sim_cfg *c, const sim_opts *o)
{
    static const char *const inject_v[] = {"none", "nan", "skip", "hang", "nccl", "crash", "degrade"};
    int nvl = c->nvlink_domain > 0 ? c->nvlink_domain : sim_gpu(c) ? sim_gpu(c)->nvlink_domain : 0;
    line(f,
         "[sim] moetune-sim config_id=%016llx gpu=%s nodes=%d gpus_per_node=%d world=%d "
         "nvlink_domain=%d stack=%s routing=%s seed=%llu replicate=%d noise_offset_sd=%g "
         "noise_jitter_cv=%g noise_rho=%g startup_s=%g inject=%s",
         (unsigned long long)sim_cfg_id(c), c->gpu, c->nodes, c->gpus_per_node, sim_world(c), nvl,
         c->stack_name[0] ? c->stack_name : "default", c->routing_natural ? "natural" : "forced",
         (unsigned long long)o->noise_seed, c->replicate, c->noise_offset_sd, c->noise_jitter_cv,
         c->noise_rho, c->startup_s,
         c->inject >= 0 && c->inject < 7 ? inject_v[c->inject] : "none");
}

void simlog_fallback(FILE *f, const sim_cfg *c, const sim_breakdown *b)
{
    static const char *const names[] = {"alltoall", "DeepEP", "HybridEP", "NCCL EP"};
    const char *why = b->fallback;
    size_t n;
    if (!why)
        return;
    n = strlen(why);
    while (n && (why[n - 1] == '.' || why[n - 1] == ' '))
        n--;
    if (strstr(why, "Falling back"))
        line(f, "WARNING: %.*s.", (int)n, why);
    else
        line(f, "WARNING: %s dispatcher backend unavailable: %.*s. Falling back to %s.",
             c->moe_flex_dispatcher_backend >= 0 && c->moe_flex_dispatcher_backend < 4
                 ? names[c->moe_flex_dispatcher_backend]
                 : "flex",
             (int)n, why,
             b->fallback_backend > 0 && b->fallback_backend < 4 ? names[b->fallback_backend]
                                                                : "alltoall");
}

void simlog_datetime(FILE *f, const char *what, double clock_s)
{
    char ts[40];
    simlog_time(ts, sizeof ts, clock_s, 0);
    line(f, "[%s] datetime: %s ", what, ts);
}

/* Where the framework stands when it rejects or fails. */
static void traceback_head(FILE *f, const sim_cfg *c)
{
    fprintf(f, "Traceback (most recent call last):\n");
    if (c->bridge) {
        fprintf(f, "  File \"/opt/Megatron-Bridge/scripts/training/run_recipe.py\", line 134, in "
                   "<module>\n    main()\n");
        fprintf(f, "  File \"/opt/Megatron-Bridge/src/megatron/bridge/training/pretrain.py\", "
                   "line 58, in pretrain\n    _pretrain(state=state, forward_step_func=forward_step_func)\n");
    } else {
        fprintf(f, "  File \"/opt/megatron-lm/pretrain_gpt.py\", line 345, in <module>\n"
                   "    pretrain(\n");
    }
}

void simlog_assertion(FILE *f, const sim_cfg *c, const char *rule, const char *msg)
{
    traceback_head(f, c);
    if (c->bridge)
        fprintf(f, "  File \"/opt/Megatron-Bridge/src/megatron/bridge/training/config.py\", line "
                   "1012, in validate\n    self.model.finalize()\n");
    else
        fprintf(f, "  File \"/opt/megatron-lm/megatron/training/training.py\", line 612, in pretrain\n"
                   "    initialize_megatron(\n"
                   "  File \"/opt/megatron-lm/megatron/training/initialize.py\", line 81, in "
                   "initialize_megatron\n    validate_args(args, args_defaults)\n"
                   "  File \"/opt/megatron-lm/megatron/training/arguments.py\", line 467, in "
                   "validate_args\n");
    {
        /* sim_check words the message as the framework raises it, usually
         * with the exception type in front; add AssertionError otherwise */
        size_t k = strspn(msg, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_.");
        int typed = k > 5 && msg[k] == ':' &&
                    (!strncmp(msg + k - 5, "Error", 5) || (k > 9 && !strncmp(msg + k - 9, "Exception", 9)));
        fprintf(f, "    %s  # %s\n", typed && strncmp(msg, "AssertionError", 14) ? "raise ..." : "assert ...",
                rule && *rule ? rule : "legality");
        line(f, "%s%s", typed ? "" : "AssertionError: ", msg);
    }
}

/* ---- training ---------------------------------------------------------------- */

void simlog_iteration(FILE *f, const sim_cfg *c, const sim_iter_log *l)
{
    char ts[40], buf[1024];
    size_t o = 0;
#define ADD(...)                                                                              \
    do {                                                                                      \
        if (o < sizeof buf)                                                                   \
            o += (size_t)snprintf(buf + o, sizeof buf - o, __VA_ARGS__);                      \
    } while (0)
    simlog_time(ts, sizeof ts, l->clock_s, !c->bridge);
    ADD(" [%s] iteration %8d/%8d |", ts, l->iteration, c->train_iters);
    ADD(" consumed samples: %12lld |", (long long)l->iteration * c->global_batch_size);
    ADD(" elapsed time per iteration (ms): %.1f |", l->elapsed_s * 1000.0);
    if (c->log_throughput)
        ADD(" throughput per GPU (TFLOP/s/GPU): %.1f |", l->tflops);
    ADD(" learning rate: %.6E |", l->lr);
    ADD(" global batch size: %5d |", c->global_batch_size);
    /* Megatron prints a loss only when its interval mean is positive (a NaN
     * mean is printed by the sim so the failure is visible in the line) */
    if (l->advanced > 0 && (isnan(l->lm_loss) || l->lm_loss > 0))
        ADD(" lm loss: %.6E |", l->lm_loss);
    if (l->advanced > 0 && c->num_experts > 0 && (isnan(l->lb_loss) || l->lb_loss > 0))
        ADD(" load_balancing_loss: %.6E |", l->lb_loss);
    ADD(" loss scale: %.1f |", l->loss_scale);
    if (l->grad_norm >= 0 || isnan(l->grad_norm))
        ADD(" grad norm: %.3f |", l->grad_norm);
    ADD(" number of skipped iterations: %3d |", l->skipped);
    ADD(" number of nan iterations: %3d |", l->nan);
#undef ADD
    /* printf spells NaN "nan"/"NAN" as Python's format() does */
    line(f, "%s", buf);
    if (c->bridge)
        line(f, "Step Time : %.2fs GPU utilization: %.1fMODEL_TFLOP/s/GPU", l->elapsed_s,
             l->tflops);
}

void simlog_theoretical(FILE *f, const sim_cfg *c)
{
    double w = 0, a = 0;
    sim_theoretical_memory(c, &w, &a);
    line(f,
         "Theoretical memory footprints: weight and optimizer=%.2f MB, activation=%.2f MB, "
         "total=%.2f MB",
         w, a, w + a);
}

int simlog_is_dp0(const sim_cfg *c, int rank)
{
    int tp = c->tensor_model_parallel_size, cp = c->context_parallel_size, dp = sim_dp(c);
    if (tp < 1 || cp < 1 || dp < 1)
        return 0;
    return (rank / (tp * cp)) % dp == 0;
}

void simlog_memory(FILE *f, const sim_cfg *c, int iteration, int only_rank)
{
    int tp = c->tensor_model_parallel_size, cp = c->context_parallel_size;
    int pp = c->pipeline_model_parallel_size, dp = sim_dp(c), world = sim_world(c);
    int p, q, t;
    if (tp < 1 || cp < 1 || pp < 1 || dp < 1)
        return;
    /* rank order tp-cp-ep-dp-pp: data-parallel rank 0 of each group */
    for (p = 0; p < pp; p++)
        for (q = 0; q < cp; q++)
            for (t = 0; t < tp; t++) {
                long r = t + (long)tp * q + (long)tp * cp * dp * p;
                sim_mem m;
                if (r >= world || (only_rank >= 0 && r != only_rank))
                    continue;
                sim_rank_memory(c, (int)r, &m);
                if (c->bridge)
                    line(f,
                         "[Rank %ld] (after %d iterations) memory (GB) | mem-allocated-gigabytes: "
                         "%.3f | mem-max-allocated-gigabytes: %.3f | mem-reserved-gigabytes: "
                         "%.3f | mem-max-reserved-gigabytes: %.3f",
                         r, iteration, m.allocated / 1e9, m.max_allocated / 1e9, m.reserved / 1e9,
                         m.max_reserved / 1e9);
                else
                    line(f,
                         "[Rank %ld] (after %d iterations) memory (MB) | allocated: %.2f | max "
                         "allocated: %.2f | reserved: %.2f | max reserved: %.2f",
                         r, iteration, m.allocated / MiB, m.max_allocated / MiB, m.reserved / MiB,
                         m.max_reserved / MiB);
            }
}

void simlog_capture(FILE *f, const sim_cfg *c, double capture_s)
{
    int pp = c->pipeline_model_parallel_size > 0 ? c->pipeline_model_parallel_size : 1;
    int layers = c->num_layers / pp > 0 ? c->num_layers / pp : 1;
    int dp = sim_dp(c) > 0 ? sim_dp(c) : 1;
    int mbs = c->micro_batch_size > 0 ? c->micro_batch_size : 1;
    long micro = c->global_batch_size / ((long)mbs * dp);
    switch (c->cuda_graph_impl) {
    case SIM_CG_TE:
        line(f, "Start CUDA Graphs capture...");
        line(f, "Time spent in CUDA Graphs capture on rank 0: %.3fs", capture_s);
        break;
    case SIM_CG_LOCAL:
        /* one forward and one backward graph per layer and microbatch */
        line(f, "Creating %ld CUDA graphs", (long)layers * (micro > 0 ? micro : 1) * 2);
        break;
    case SIM_CG_FULL_ITERATION:
        line(f, "Capture CUDA graph for training!!!");
        break;
    default:
        break;
    }
}

void simlog_validation(FILE *f, const char *where, double loss)
{
    char buf[512];
    int n = snprintf(buf, sizeof buf, " validation loss at %s | lm loss value: %.6E | lm loss PPL: "
                                      "%.6E | ",
                     where, loss, exp(loss < 700 ? loss : 700));
    if (n < 0)
        n = 0;
    if (n > (int)sizeof buf - 1)
        n = (int)sizeof buf - 1;
    line(f, "%.*s", n + 1, "------------------------------------------------------------------"
                           "------------------------------------------------------------------"
                           "------------------------------------------------------------------");
    line(f, "%s", buf);
    line(f, "%.*s", n + 1, "------------------------------------------------------------------"
                           "------------------------------------------------------------------"
                           "------------------------------------------------------------------");
}

/* ---- failures ---------------------------------------------------------------- */

static void train_step_frames(FILE *f, const sim_cfg *c)
{
    traceback_head(f, c);
    if (c->bridge)
        fprintf(f, "  File \"/opt/Megatron-Bridge/src/megatron/bridge/training/train.py\", line "
                   "231, in train\n    ) = train_step(\n");
    else
        fprintf(f, "  File \"/opt/megatron-lm/megatron/training/training.py\", line 737, in pretrain\n"
                   "    iteration, num_floating_point_operations_so_far = train(\n"
                   "  File \"/opt/megatron-lm/megatron/training/training.py\", line 2298, in train\n"
                   "    ) = train_step(\n");
    fprintf(f, "  File \"/opt/megatron-lm/megatron/core/pipeline_parallel/schedules.py\", line 500, "
               "in forward_backward_no_pipelining\n    output_tensor, num_tokens = forward_step(\n");
}

void simlog_oom(FILE *f, const sim_cfg *c, int rank, double max_reserved)
{
    const mt_gpu_spec *g = sim_gpu(c);
    double cap = g ? mt_gpu_oom_bytes(g) : 80e9;
    double free_b = 0.004 * cap, in_use = cap - free_b;
    double tried = max_reserved - in_use, unalloc;
    sim_mem m;
    int gpn = c->gpus_per_node > 0 ? c->gpus_per_node : 1;
    sim_rank_memory(c, rank, &m);
    unalloc = m.frag < 0.05 * in_use ? m.frag : 0.05 * in_use;
    {
        /* the allocation that fails is one layer's activations, or the
         * whole overflow when that is smaller */
        int pp = c->pipeline_model_parallel_size > 0 ? c->pipeline_model_parallel_size : 1;
        double layers = c->num_layers / pp > 0 ? c->num_layers / pp : 1;
        double chunk = m.activations / layers;
        if (tried > chunk && chunk > 0)
            tried = chunk;
    }
    if (tried < free_b + 2 * MiB)
        tried = free_b + 2 * MiB;
    train_step_frames(f, c);
    fprintf(f, "  File \"/opt/megatron-lm/megatron/core/transformer/moe/experts.py\", line 254, in "
               "forward\n    intermediate_parallel = self.activation_func(fc1_output)\n");
    line(f,
         "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate %.2f GiB. GPU %d has a "
         "total capacity of %.2f GiB of which %.2f MiB is free. Including non-PyTorch memory, this "
         "process has %.2f GiB memory in use. Of the allocated memory %.2f GiB is allocated by "
         "PyTorch, and %.2f MiB is reserved by PyTorch but unallocated. If reserved but "
         "unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
         "to avoid fragmentation.  See documentation for Memory Management  "
         "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
         tried / GiB, rank % gpn, cap / GiB, free_b / MiB, in_use / GiB, (in_use - unalloc) / GiB,
         unalloc / MiB);
}

void simlog_nan(FILE *f, const sim_cfg *c, int rank, int iteration)
{
    int gpn = c->gpus_per_node > 0 ? c->gpus_per_node : 1;
    train_step_frames(f, c);
    fprintf(f, "  File \"/opt/megatron-lm/megatron/core/rerun_state_machine.py\", line 521, in "
               "validate_result\n    raise RuntimeError(full_message)\n");
    line(f,
         "RuntimeError: Rank %d, node node%d, device %d, iteration %d: Unexpected result nan "
         "(message='found NaN in local forward loss calculation')",
         rank, rank / gpn, rank % gpn, iteration);
}

void simlog_nccl(FILE *err, FILE *out, const sim_cfg *c, int rank, double clock_s)
{
    int world = sim_world(c), other = rank == 0 ? (world > 1 ? 1 : 0) : 0;
    char ts[40];
    train_step_frames(err, c);
    fprintf(err, "  File \"/opt/megatron-lm/megatron/core/transformer/moe/token_dispatcher.py\", "
                 "line 612, in token_dispatch\n    global_input_tokens = all_to_all(\n");
    line(err,
         "torch.distributed.DistBackendError: NCCL error in: "
         "../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error (run "
         "with NCCL_DEBUG=INFO for details), NCCL version 2.21.5");
    line(err, "ncclSystemError: System call (e.g. socket, malloc) or external library call failed "
              "or device error. ");
    line(err, "Last error:");
    line(err, "[rank%d] socketProgress: Connection closed by remote peer node%d<45123>", rank,
         (rank / (c->gpus_per_node > 0 ? c->gpus_per_node : 1) + 1) %
             (c->nodes > 0 ? c->nodes : 1));
    simlog_time(ts, sizeof ts, clock_s, 1);
    line(out,
         "[rank%d]:[E%s ProcessGroupNCCL.cpp:616] [Rank %d] Watchdog caught collective operation "
         "timeout: WorkNCCL(SeqNum=4821, OpType=ALLTOALL_BASE, NumelIn=8388608, NumelOut=8388608, "
         "Timeout(ms)=600000) ran for 600041 milliseconds before timing out.",
         other, ts + 5, other);
}

void simlog_crash(FILE *f, const sim_cfg *c, int rank)
{
    (void)c;
    fprintf(f, "Fatal Python error: Segmentation fault\n\n");
    fprintf(f, "Thread 0x00007f3a2c5ff740 (most recent call first):\n");
    fprintf(f, "  File \"/usr/local/lib/python3.12/dist-packages/transformer_engine/pytorch/"
               "module/grouped_linear.py\", line 171 in forward\n");
    fprintf(f, "  File \"/opt/megatron-lm/megatron/core/transformer/moe/experts.py\", line 254 in "
               "forward\n");
    line(f, "[rank%d] Segmentation fault (core dumped)", rank);
}

/* ---- the sim's own lines ------------------------------------------------------- */

int simlog_peak_memory(FILE *f, FILE *err, const sim_cfg *c, double oom_cap)
{
    int world = sim_world(c), gpn = c->gpus_per_node > 0 ? c->gpus_per_node : 1, r, top_rank;
    double top = 0;
    int rc = 0;
    if (c->memory_file[0]) {
        FILE *mf = fopen(c->memory_file, "w");
        if (!mf) {
            line(err, "[sim] cannot write memory file %s: %s", c->memory_file, strerror(errno));
            rc = -1;
        }
        top_rank = 0;
        top = -1;
        for (r = 0; r < world; r++) {
            sim_mem m;
            double peak;
            sim_rank_memory(c, r, &m);
            peak = m.max_reserved;
            if (oom_cap > 0 && peak > oom_cap)
                peak = oom_cap;
            if (peak > top)
                top = peak, top_rank = r;
            if (mf)
                fprintf(mf, "rank=%d host=node%d gpu=%d peak_mib=%.1f\n", r, r / gpn, r % gpn,
                        peak / MiB);
        }
        if (mf && fclose(mf) != 0) {
            line(err, "[sim] cannot write memory file %s: %s", c->memory_file, strerror(errno));
            rc = -1;
        }
    } else {
        top_rank = sim_hottest_rank(c, &top);
        if (oom_cap > 0 && top > oom_cap)
            top = oom_cap;
    }
    line(f, "[sim] per-GPU peak memory (MiB): max %.1f on rank %d", top / MiB, top_rank);
    return rc;
}

int simlog_rank_peak(FILE *f, FILE *err, const sim_cfg *c, int rank, const char *host, int gpu,
                     double oom_cap)
{
    sim_mem m;
    double peak;
    int rc = 0;
    sim_rank_memory(c, rank, &m);
    peak = m.max_reserved;
    if (oom_cap > 0 && peak > oom_cap)
        peak = oom_cap;
    if (c->memory_file[0]) {
        char rec[512];
        int n = snprintf(rec, sizeof rec, "rank=%d host=%s gpu=%d peak_mib=%.1f\n", rank, host,
                         gpu, peak / MiB);
        int fd = open(c->memory_file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0 || n <= 0 || (size_t)n >= sizeof rec || write(fd, rec, (size_t)n) != n) {
            line(err, "[sim] cannot write memory file %s: %s", c->memory_file, strerror(errno));
            rc = -1;
        }
        if (fd >= 0)
            close(fd);
    }
    line(f, "[sim] GPU peak memory (MiB): %.1f on rank %d (host %s, GPU %d)", peak / MiB, rank,
         host, gpu);
    return rc;
}

void simlog_wall(FILE *f, const sim_cfg *c, double startup_s, int steps, double steps_s)
{
    double wall = startup_s + steps_s;
    line(f, "[sim] simulated wall time: %.3f s (startup %.3f s + %d steps %.3f s); GPU-hours: %.6f",
         wall, startup_s, steps, steps_s, wall * sim_world(c) / 3600.0);
}
