/*
 * bench_trace.c - throughput and memory of the Chrome/Kineto trace reader.
 *
 * Generates a gzip Kineto trace with N kernel events (what the PyTorch
 * profiler writes, in the shape workers/sim/simtrace.c emits) over 8
 * devices: a compute stream and three communication streams (tensor-parallel
 * NCCL, DeepEP expert dispatch/combine, data-parallel NCCL) that overlap the
 * compute, a few dozen GEMM / attention / elementwise / NCCL / DeepEP kernel
 * names, cudaLaunchKernel runtime events for about a tenth of the kernels, a
 * memory copy per step and a ProfilerStep#N range per step.  Then, in a
 * forked child (so that its peak RSS is the analysis alone), it times
 * mt_trace_open, mt_trace_metrics_get for every device and mt_trace_evidence,
 * and prints events/s and the peak RSS against the size of the JSON.
 *
 * The target: 10 million kernel events analysed in under 30 s with
 * memory well under the trace size.  The verdict is informational: timing
 * never fails; only a real error (a write or parse failure, wrong counts)
 * exits nonzero.
 *
 *   bench_trace [N kernel events, default 10000000] [output dir] [--plain]
 *
 * Without an output dir the trace goes to a mkdtemp directory under $TMPDIR
 * (else /tmp) that is removed at the end; a given dir keeps the files.
 * --plain also writes the uncompressed JSON and times reading it.
 */
#include "diag.h"
#include "kv.h"
#include "trace.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#if defined(__SANITIZE_ADDRESS__)
#define BENCH_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BENCH_SANITIZED 1
#endif
#endif
#ifdef BENCH_SANITIZED
#define DEFAULT_EVENTS 1000000L /* a sanitizer build runs several times slower */
#else
#define DEFAULT_EVENTS 10000000L
#endif

#define NDEV 8
#define PER_STEP 4096 /* kernels per device per step */
#define HOST_PID 4242
#define OUTBUF (4u << 20)
#define TARGET_EVENTS 10000000.0
#define TARGET_S 30.0
#define TARGET_RSS_SHARE 0.25 /* "well under the trace size" */

/* ---- the generated trace ---------------------------------------------------------------- */

enum { S_COMP = 7, S_TP = 20, S_EP = 24, S_DP = 28 };
enum { WAIT = 1 }; /* a compute kernel that waits for the last communication to end */

typedef struct op {
    const char *name;
    int stream;
    int dur_us;
    int flags;
} op;

/* One MoE layer forward then backward, cycled; the optimizer tail ends each
 * device's step. */
static const op layer_ops[] = {
    {"transformer_engine::normalization::rmsnorm_fwd_tuned_kernel<transformer_engine::"
     "normalization::Kernel_traits<__nv_bfloat16, __nv_bfloat16, float, float, int, 4096u, 1u, 4u, "
     "1u, 16u> >",
     S_COMP, 15, 0},
    {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_"
     "segment_k_off_kernel__5x_cublas",
     S_COMP, 180, 0},
    {"void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
     "cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, "
     "true, false, false, true, true, false, false>(flash::Flash_fwd_params)",
     S_COMP, 260, 0},
    {"nvjet_tst_128x256_64x4_2x1_v_bz_coopA_TNN", S_COMP, 120, 0},
    {"ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", S_TP, 90, 0},
    {"triton_poi_fused__to_copy_add_mul_0", S_COMP, 12, 0},
    {"ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", S_TP, 80, 0},
    {"void topk_gating_softmax<float, 8, 4, 8, 32>(float const*, bool const*, float*, int, int*, "
     "int*, int, int, int)",
     S_COMP, 12, WAIT},
    {"void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*, int*, int*, bool*, "
     "int, int, int, int)",
     S_COMP, 8, 0},
    {"void deep_ep::intranode::notify_dispatch<8>(int const*, int*, int, int const*, int*, int, "
     "int, int, bool const*, int*, int*, int, int, void**, int**, int)",
     S_EP, 10, 0},
    {"void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*, long*, float*, int*, "
     "int*, int4 const*, float const*, long const*, float const*, bool const*, int const*, int, "
     "int, int, int, int, int, int, void**, int, int, int)",
     S_EP, 240, 0},
    {"cutlass3x_sm90_tensorop_gemm_e4m3_e4m3_f32_bf16_bf16_128x128x128_1x1x1_0_tnt_align16_"
     "warpspecialized_cooperative_fp8_fastaccum_epi_tma",
     S_COMP, 150, 0},
    {"triton_poi_fused_mul_silu_1", S_COMP, 20, 0},
    {"cutlass3x_sm90_tensorop_gemm_e4m3_e4m3_f32_bf16_bf16_128x256x128_2x1x1_0_tnt_align16_"
     "warpspecialized_pingpong_fp8_fastaccum_epi_tma",
     S_COMP, 140, 0},
    {"void moe_permute_row_kernel<__nv_bfloat16, 128>(__nv_bfloat16 const*, __nv_bfloat16*, int "
     "const*, int, int, int)",
     S_COMP, 18, WAIT},
    {"void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, "
     "int>, cutlass::gemm::collective::CollectiveMma<mxf8_grouped_128x128x128> > >",
     S_COMP, 320, 0},
    {"triton_poi_fused_mul_silu_2", S_COMP, 25, 0},
    {"cutlass3x_sm100_bstensorop_s256x128x64gemm_block_scaled_ue4m3xe2m1_ue4m3xe2m1_f32_bf16_"
     "bf16_256x128x256_2x1x1_0_tnt_align32_o_vs16_2sm_bias_bf16_relu",
     S_COMP, 300, 0},
    {"void moe_unpermute_row_kernel<__nv_bfloat16, 128>(__nv_bfloat16 const*, __nv_bfloat16*, "
     "int const*, float const*, int, int, int)",
     S_COMP, 18, 0},
    {"void deep_ep::intranode::combine<__nv_bfloat16, 8, 768, 4096>(__nv_bfloat16*, float*, "
     "__nv_bfloat16 const*, float const*, int const*, int const*, int const*, int const*, int, "
     "int, int, void**, int, int, int)",
     S_EP, 220, 0},
    {"void at::native::vectorized_elementwise_kernel<4, "
     "at::native::CUDAFunctor_add<c10::BFloat16>, "
     "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, "
     "at::detail::Array<char*, 3>)",
     S_COMP, 10, 0},
    {"triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_3", S_COMP, 14, WAIT},
    /* backward */
    {"triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_backward_4", S_COMP, 20, 0},
    {"void deep_ep::internode_ll::dispatch<true, 3, 10, 7168>(void*, float*, int*, long*, void*, "
     "int*, void*, int*, void*, void const*, long const*, int*, int*, int, int, int, int, int, "
     "int, int, int, int)",
     S_EP, 200, 0},
    {"nvjet_tst_256x128_64x4_1x2_h_bz_coopB_NNT", S_COMP, 240, 0},
    {"void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, __nv_bfloat16, "
     "false, false, false>(cublasLt::cublasSplitKParams<float>, float const*, __nv_bfloat16 "
     "const*, __nv_bfloat16*, float const*, float const*, __nv_bfloat16 const*, float const*, "
     "__nv_bfloat16*, void*, long, float*, int*)",
     S_COMP, 16, 0},
    {"void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, "
     "int>, cutlass::gemm::collective::CollectiveMma<mxf8_grouped_wgrad_128x128x128> > >",
     S_COMP, 380, WAIT},
    {"triton_poi_fused_mul_silu_silu_backward_5", S_COMP, 30, 0},
    {"void deep_ep::internode_ll::combine<3, 10, 7168>(void*, void*, int*, void*, void const*, "
     "long const*, float const*, int const*, int const*, int*, int*, int, int, int, int, int, int, "
     "int, int, bool)",
     S_EP, 190, 0},
    {"cutlass3x_sm90_tensorop_gemm_e4m3_e4m3_f32_bf16_bf16_256x128x128_2x1x1_0_ttn_align16_"
     "warpspecialized_cooperative_fp8_fastaccum_epi_tma",
     S_COMP, 260, 0},
    {"void hybrid_ep::dispatch_kernel<__nv_bfloat16, 8, 7168>(hybrid_ep::DispatchParams)", S_EP,
     150, 0},
    {"void flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128, 64, "
     "128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 8, "
     "cutlass::bfloat16_t> >, true, false, false, false, true, true, "
     "false>(flash::Flash_bwd_params)",
     S_COMP, 520, WAIT},
    {"void flash::flash_bwd_convert_dq_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, "
     "false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 8, "
     "cutlass::bfloat16_t> >>(flash::Flash_bwd_params, int)",
     S_COMP, 22, 0},
    {"ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", S_DP, 420, 0},
    {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize128x128x64_warpgroupsize1x1x1_execute_"
     "segment_k_off_kernel__5x_cublas",
     S_COMP, 210, 0},
    {"ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", S_TP, 60, 0},
    {"void at::native::(anonymous namespace)::cunn_SoftMaxBackward<4, float, float, float, "
     "at::native::(anonymous namespace)::SoftMaxBackwardEpilogue>(float*, float const*, float "
     "const*, int)",
     S_COMP, 14, 0},
    {"void hybrid_ep::combine_kernel<__nv_bfloat16, 8, 7168>(hybrid_ep::CombineParams)", S_EP, 140,
     0},
    {"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
     "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, "
     "1>)",
     S_COMP, 4, WAIT},
};
#define NOPS (sizeof layer_ops / sizeof layer_ops[0])

static const op tail_ops[] = {
    {"ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", S_DP, 900, 0},
    {"void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float, float, int>, float, "
     "float, float, float, float, float, adamMode_t, float>(long, int volatile*, "
     "TensorListMetadata<4>, AdamFunctor<float, float, int>, float, float, float, float, float, "
     "float, adamMode_t, float)",
     S_COMP, 300, WAIT},
    {"void multi_tensor_apply_kernel<TensorListMetadata<1>, L2NormFunctor<float, 512, 8>, float*, "
     "float*, bool, int>(long, int volatile*, TensorListMetadata<1>, L2NormFunctor<float, 512, 8>, "
     "float*, float*, bool, int)",
     S_COMP, 60, 0},
    {"ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", S_DP, 700, 0},
    {"ncclDevKernel_Broadcast_RING_LL(ncclDevKernelArgsStorage<4096ul>)", S_DP, 40, WAIT},
};
#define NTAIL (sizeof tail_ops / sizeof tail_ops[0])

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}
/* uniform in [lo, hi) */
static int64_t urange(int64_t lo, int64_t hi)
{
    return lo + (int64_t)(rnd() % (uint64_t)(hi - lo));
}

typedef struct out {
    gzFile gz;
    FILE *plain;
    char *buf;
    size_t n;
    uint64_t bytes; /* uncompressed JSON written */
    int err;
} out;

static void out_flush(out *o)
{
    if (!o->n || o->err)
        return;
    if (gzwrite(o->gz, o->buf, (unsigned)o->n) != (int)o->n)
        o->err = 1;
    if (o->plain && fwrite(o->buf, 1, o->n, o->plain) != o->n)
        o->err = 1;
    o->bytes += o->n;
    o->n = 0;
}

/* Room for one event (names are under 1 KiB). */
static char *out_room(out *o)
{
    if (OUTBUF - o->n < 2048)
        out_flush(o);
    return o->buf + o->n;
}

static char *put_s(char *p, const char *s)
{
    size_t n = strlen(s);
    memcpy(p, s, n);
    return p + n;
}

static char *put_u(char *p, uint64_t v)
{
    char tmp[24];
    int k = 0;
    do
        tmp[k++] = (char)('0' + v % 10);
    while (v /= 10);
    while (k)
        *p++ = tmp[--k];
    return p;
}

/* nanoseconds as microseconds with three decimals, as Kineto prints them */
static char *put_us(char *p, int64_t ns)
{
    unsigned r = (unsigned)(ns % 1000);
    p = put_u(p, (uint64_t)(ns / 1000));
    *p++ = '.';
    *p++ = (char)('0' + r / 100);
    *p++ = (char)('0' + r / 10 % 10);
    *p++ = (char)('0' + r % 10);
    return p;
}

static void emit_x(out *o, const char *cat, const char *name, long pid, long tid, int64_t ts,
                   int64_t dur, int dev, int stream, uint64_t corr)
{
    char *p = out_room(o), *b = p;
    p = put_s(p, ",\n    {\"ph\": \"X\", \"cat\": \"");
    p = put_s(p, cat);
    p = put_s(p, "\", \"name\": \"");
    p = put_s(p, name);
    p = put_s(p, "\", \"pid\": ");
    p = put_u(p, (uint64_t)pid);
    p = put_s(p, ", \"tid\": ");
    p = put_u(p, (uint64_t)tid);
    p = put_s(p, ", \"ts\": ");
    p = put_us(p, ts);
    p = put_s(p, ", \"dur\": ");
    p = put_us(p, dur);
    if (dev >= 0) {
        p = put_s(p, ", \"args\": {\"device\": ");
        p = put_u(p, (uint64_t)dev);
        p = put_s(p, ", \"stream\": ");
        p = put_u(p, (uint64_t)stream);
        p = put_s(p, ", \"correlation\": ");
        p = put_u(p, corr);
        p = put_s(p, "}}");
    } else if (corr) {
        p = put_s(p, ", \"args\": {\"correlation\": ");
        p = put_u(p, corr);
        p = put_s(p, "}}");
    } else {
        p = put_s(p, ", \"args\": {}}");
    }
    o->n += (size_t)(p - b);
}

typedef struct gen_stats {
    uint64_t kernels, launches, memcpys, steps, json_bytes, gz_bytes;
} gen_stats;

typedef struct dev_state {
    int64_t comp, tp, ep, dp; /* stream cursors */
    int64_t last_comm_end;
    size_t opi; /* position in layer_ops */
} dev_state;

static int64_t *cursor(dev_state *s, int stream)
{
    return stream == S_TP ? &s->tp : stream == S_EP ? &s->ep : stream == S_DP ? &s->dp : &s->comp;
}

/* One kernel of device d, launched from the host now and then. */
static void kernel(out *o, gen_stats *g, dev_state *s, int d, const op *k, uint64_t *corr)
{
    int64_t *cur = cursor(s, k->stream), start, dur;
    /* durations vary +-15 % and the devices differ a little (stragglers) */
    dur = (int64_t)k->dur_us * (850 + (int64_t)(rnd() % 300)) * (100 + d) / 100;
    if (k->stream == S_COMP) {
        /* launch gaps: mostly a microsecond or two, sometimes a host stall */
        start = s->comp + (rnd() % 50 == 0 ? urange(25000, 90000) : urange(800, 3000));
        if ((k->flags & WAIT) && s->last_comm_end > start)
            start = s->last_comm_end + urange(1000, 4000);
    } else {
        /* a collective is issued when the compute stream gets to it */
        start = (s->comp > *cur ? s->comp : *cur) + urange(500, 2000);
    }
    *cur = start + dur;
    if (k->stream != S_COMP && *cur > s->last_comm_end)
        s->last_comm_end = *cur;
    ++*corr;
    if (rnd() % 10 == 0) {
        emit_x(o, "cuda_runtime", "cudaLaunchKernel", HOST_PID + d, HOST_PID + d,
               start - urange(5000, 15000), urange(3000, 6000), -1, 0, *corr);
        g->launches++;
    }
    emit_x(o, "kernel", k->name, d, k->stream, start, dur, d, k->stream, *corr);
    g->kernels++;
}

static int generate(const char *gz_path, const char *plain_path, uint64_t n, gen_stats *g)
{
    out o = {0};
    uint64_t corr = 0;
    int64_t t0 = INT64_C(4458676983543183); /* ns, as Kineto's epoch-ish microseconds */
    struct stat st;
    char *p;
    int d, rc = 0;
    memset(g, 0, sizeof *g);
    if (!(o.buf = malloc(OUTBUF)) || !(o.gz = gzopen(gz_path, "wb1"))) {
        fprintf(stderr, "bench_trace: cannot create %s: %s\n", gz_path, strerror(errno));
        free(o.buf);
        return -1;
    }
    gzbuffer(o.gz, 1u << 20);
    if (plain_path && !(o.plain = fopen(plain_path, "wb"))) {
        fprintf(stderr, "bench_trace: cannot create %s: %s\n", plain_path, strerror(errno));
        gzclose(o.gz);
        free(o.buf);
        return -1;
    }
    p = out_room(&o);
    p += sprintf(p, "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [");
    for (d = 0; d < NDEV; d++)
        p += sprintf(p, "%s{\"id\": %d, \"name\": \"NVIDIA H200\", \"numSms\": 132}", d ? ", " : "",
                     d);
    p += sprintf(p,
                 "],\n  \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 0, "
                 "\"world_size\": %d},\n  \"traceEvents\": [\n",
                 NDEV);
    p += sprintf(p, "    {\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, \"args\": "
                    "{\"name\": \"GPU 0\"}}");
    o.n = (size_t)(p - o.buf);
    while (g->kernels < n && !o.err) {
        int64_t step_end = t0;
        for (d = 0; d < NDEV && g->kernels < n; d++) {
            dev_state s = {t0, t0, t0, t0, t0, 0};
            uint64_t left = n - g->kernels, k, per = left < PER_STEP ? left : PER_STEP;
            int64_t end;
            /* the batch arrives: one copy in */
            emit_x(&o, "gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", d, S_COMP, s.comp + 2000,
                   urange(20000, 40000), d, S_COMP, ++corr);
            s.comp += 45000;
            g->memcpys++;
            for (k = 0; k < per; k++) {
                const op *x =
                    per - k <= NTAIL ? &tail_ops[NTAIL - (per - k)] : &layer_ops[s.opi++ % NOPS];
                kernel(&o, g, &s, d, x, &corr);
            }
            end = s.comp;
            if (s.tp > end)
                end = s.tp;
            if (s.ep > end)
                end = s.ep;
            if (s.dp > end)
                end = s.dp;
            if (end > step_end)
                step_end = end;
        }
        for (d = 0; d < NDEV; d++) {
            char name[32];
            snprintf(name, sizeof name, "ProfilerStep#%" PRIu64, g->steps);
            out_room(&o);
            emit_x(&o, "user_annotation", name, HOST_PID + d, HOST_PID + d, t0 - 30000,
                   step_end - t0 + 60000, -1, 0, 0);
        }
        g->steps++;
        t0 = step_end + urange(300000, 800000); /* the data loader */
    }
    p = out_room(&o);
    p += sprintf(p, "\n  ],\n  \"traceName\": \"bench_trace.json\",\n  \"displayTimeUnit\": "
                    "\"ms\",\n  \"baseTimeNanoseconds\": 1700000000000000000\n}\n");
    o.n = (size_t)(p - o.buf);
    out_flush(&o);
    g->json_bytes = o.bytes;
    if (o.err)
        fprintf(stderr, "bench_trace: cannot write the trace: %s\n", strerror(errno)), rc = -1;
    if (gzclose(o.gz) != Z_OK && !rc)
        fprintf(stderr, "bench_trace: cannot finish %s\n", gz_path), rc = -1;
    if (o.plain && fclose(o.plain) && !rc)
        fprintf(stderr, "bench_trace: cannot finish %s\n", plain_path), rc = -1;
    free(o.buf);
    if (!rc && stat(gz_path, &st) == 0)
        g->gz_bytes = (uint64_t)st.st_size;
    return rc;
}

/* ---- the analysis, in a child ------------------------------------------------------------ */

typedef struct result {
    int ok;
    double parse_s, metrics_s, cpu_s;
    long base_kb, retained_kb, peak_kb;
    uint64_t kernels, launches, memcpys;
    int ndev;
    double hidden_fraction;
    char err[512];
} result;

static double now(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long rss_kb(void) /* resident now, from /proc */
{
    long pages = 0, res = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &res) != 2)
            res = 0;
        fclose(f);
    }
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static long maxrss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static void analyse(const char *path, result *r)
{
    mt_diag *d = mt_diag_new();
    mt_kv *ev = mt_kv_new();
    mt_trace *t;
    int dev[64], i;
    double w0, c0, w1;
    const char *hf;
    memset(r, 0, sizeof *r);
    r->base_kb = maxrss_kb();
    w0 = now(CLOCK_MONOTONIC);
    c0 = now(CLOCK_PROCESS_CPUTIME_ID);
    t = mt_trace_open(path, d);
    w1 = now(CLOCK_MONOTONIC);
    r->parse_s = w1 - w0;
    if (!t) {
        FILE *m = fmemopen(r->err, sizeof r->err - 1, "w");
        if (m) {
            mt_diag_print(d, m);
            fclose(m);
        }
        goto out;
    }
    r->retained_kb = rss_kb();
    r->ndev = (int)mt_trace_devices(t, dev, 64);
    for (i = 0; i < r->ndev && i < 64; i++) {
        mt_trace_metrics m;
        int rc = mt_trace_metrics_get(t, dev[i], NULL, &m);
        if (rc) {
            snprintf(r->err, sizeof r->err, "mt_trace_metrics_get(device %d): %s", dev[i],
                     strerror(-rc));
            goto out;
        }
    }
    if (!ev || mt_trace_evidence(t, ev)) {
        snprintf(r->err, sizeof r->err, "mt_trace_evidence failed");
        goto out;
    }
    r->metrics_s = now(CLOCK_MONOTONIC) - w1;
    r->cpu_s = now(CLOCK_PROCESS_CPUTIME_ID) - c0;
    hf = mt_kv_get(ev, "trace.comm_hidden_fraction");
    r->hidden_fraction = hf ? atof(hf) : -1;
    r->kernels = mt_trace_kernel_count(t);
    r->launches = mt_trace_kernel_launches(t);
    r->memcpys = mt_trace_memcpy_count(t);
    r->ok = 1;
out:
    r->peak_kb = maxrss_kb();
    mt_trace_destroy(&t);
    mt_kv_destroy(&ev);
    mt_diag_destroy(&d);
}

/* Runs analyse(path) in a child; 0 with *r filled, -1 when the child died. */
static int analyse_forked(const char *path, result *r)
{
    int fd[2], status = 0;
    struct rusage ru;
    pid_t pid;
    ssize_t got = 0, k;
    fflush(NULL);
    if (pipe(fd) || (pid = fork()) < 0) {
        perror("bench_trace: fork");
        return -1;
    }
    if (pid == 0) {
        result mine;
        const char *p = (const char *)&mine;
        size_t left = sizeof mine;
        close(fd[0]);
        analyse(path, &mine);
        while (left && (k = write(fd[1], p, left)) > 0)
            p += k, left -= (size_t)k;
        _exit(left ? 2 : 0);
    }
    close(fd[1]);
    while ((size_t)got < sizeof *r &&
           (k = read(fd[0], (char *)r + got, sizeof *r - (size_t)got)) > 0)
        got += k;
    close(fd[0]);
    if (wait4(pid, &status, 0, &ru) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) ||
        (size_t)got != sizeof *r) {
        fprintf(stderr, "bench_trace: the analysis child failed (status %d)\n", status);
        return -1;
    }
    if (ru.ru_maxrss > r->peak_kb)
        r->peak_kb = ru.ru_maxrss;
    return 0;
}

/* ---- main ---------------------------------------------------------------------------------- */

static void row(const char *what, uint64_t n, const gen_stats *g, const result *r)
{
    double json_mb = (double)g->json_bytes / 1e6, total = r->parse_s + r->metrics_s;
    double peak_mb = (double)r->peak_kb * 1024 / 1e6;
    printf("%-6s %11" PRIu64 " %9.1f %8.1f %8.2f %10.2f %8.2f %8.2f %12.0f %9.1f %7.1f%%\n", what,
           n, json_mb, (double)g->gz_bytes / 1e6, r->parse_s, r->metrics_s, total, r->cpu_s,
           total > 0 ? (double)n / total : 0, peak_mb, 100 * peak_mb / json_mb);
}

int main(int argc, char **argv)
{
    uint64_t n = DEFAULT_EVENTS;
    const char *dir_arg = NULL;
    char dir[4096], gz_path[4200], plain_path[4200];
    int plain = 0, made_dir = 0, rc = 0, i, npos = 0;
    gen_stats g;
    result rz, rp;
    double t0, gen_s;
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--plain")) {
            plain = 1;
        } else if (npos == 0) {
            char *end;
            unsigned long long v = strtoull(argv[i], &end, 10);
            if (*end || !v) {
                fprintf(stderr,
                        "usage: bench_trace [kernel events, default %ld] [output dir] [--plain]\n",
                        DEFAULT_EVENTS);
                return 2;
            }
            n = v;
            npos++;
        } else if (npos == 1) {
            dir_arg = argv[i];
            npos++;
        } else {
            fprintf(stderr, "bench_trace: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (dir_arg) {
        snprintf(dir, sizeof dir, "%s", dir_arg);
        if (mkdir(dir, 0777) && errno != EEXIST) {
            fprintf(stderr, "bench_trace: cannot create %s: %s\n", dir, strerror(errno));
            return 1;
        }
    } else {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/bench_trace.XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir)) {
            fprintf(stderr, "bench_trace: mkdtemp %s: %s\n", dir, strerror(errno));
            return 1;
        }
        made_dir = 1;
    }
    snprintf(gz_path, sizeof gz_path, "%s/trace.json.gz", dir);
    snprintf(plain_path, sizeof plain_path, "%s/trace.json", dir);

    t0 = now(CLOCK_MONOTONIC);
    if (generate(gz_path, plain ? plain_path : NULL, n, &g)) {
        rc = 1;
        goto out;
    }
    gen_s = now(CLOCK_MONOTONIC) - t0;
    printf("bench_trace: generated %" PRIu64 " kernel events (+%" PRIu64
           " cudaLaunchKernel, %" PRIu64 " copies, %" PRIu64
           " steps x %d devices) in %.1f s: %.1f MB of JSON, %.1f MB gzip%s\n",
           g.kernels, g.launches, g.memcpys, g.steps, NDEV, gen_s, (double)g.json_bytes / 1e6,
           (double)g.gz_bytes / 1e6, plain ? " (+ plain copy)" : "");

    if (analyse_forked(gz_path, &rz) || (plain && analyse_forked(plain_path, &rp))) {
        rc = 1;
        goto out;
    }
    if (!rz.ok || (plain && !rp.ok)) {
        fprintf(stderr, "bench_trace: analysis failed: %s\n", !rz.ok ? rz.err : rp.err);
        rc = 1;
        goto out;
    }
    if (rz.kernels != g.kernels || rz.launches != g.launches || rz.memcpys != g.memcpys ||
        rz.ndev != NDEV) {
        fprintf(
            stderr,
            "bench_trace: wrong counts: read %" PRIu64 " kernels, %" PRIu64 " launches, %" PRIu64
            " copies on %d devices; wrote %" PRIu64 ", %" PRIu64 ", %" PRIu64 " on %d\n",
            rz.kernels, rz.launches, rz.memcpys, rz.ndev, g.kernels, g.launches, g.memcpys, NDEV);
        rc = 1;
        goto out;
    }

    printf("\n%-6s %11s %9s %8s %8s %10s %8s %8s %12s %9s %8s\n", "input", "events", "JSON MB",
           "gzip MB", "parse s", "metrics s", "total s", "cpu s", "events/s", "peak RSS",
           "of JSON");
    row("gzip", g.kernels, &g, &rz);
    if (plain)
        row("plain", g.kernels, &g, &rp);
    printf("(MB = 10^6 bytes; peak RSS of the analysing child, which started at %.1f MB; %.1f MB "
           "resident after the parse; comm hidden fraction %.4f over %d devices)\n",
           (double)rz.base_kb * 1024 / 1e6, (double)rz.retained_kb * 1024 / 1e6, rz.hidden_fraction,
           rz.ndev);
    {
        double total = rz.parse_s + rz.metrics_s;
        double at_target = total / (double)g.kernels * TARGET_EVENTS;
        double share = (double)rz.peak_kb * 1024 / (double)g.json_bytes;
        printf("target: 10M events in < %.0f s: %s (%.1f s%s); peak memory well under the trace "
               "size (< %.0f%% of the JSON): %s (%.1f%%)\n",
               TARGET_S, at_target < TARGET_S ? "met" : "NOT met", at_target,
               g.kernels == (uint64_t)TARGET_EVENTS ? "" : " extrapolated linearly",
               100 * TARGET_RSS_SHARE, share < TARGET_RSS_SHARE ? "met" : "NOT met", 100 * share);
    }
#ifdef BENCH_SANITIZED
    puts("(sanitizer build: timings are not representative)");
#endif
out:
    if (made_dir) {
        unlink(gz_path);
        unlink(plain_path);
        rmdir(dir);
    }
    return rc;
}
