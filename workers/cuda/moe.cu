/*
 * moe.cu - the GPU side of moetune-cuda-moe: one MoE layer, forward and
 * backward, on every GPU of an expert-parallel group driven by this one
 * process (see README.md for what runs where and why).
 *
 * Per GPU (rank r of EP), per iteration:
 *   router   x (bf16) -> x32 -> logits = x32 Wr^T (cuBLASLt FP32) -> softmax,
 *            top-k (one warp per token), gates at the forced plan's experts
 *   preprocess  per-expert ranks (one block per expert, stable), counts,
 *            offsets, positions; the counts are copied to the host and checked
 *            against the plan (Megatron also synchronises on tokens_per_expert)
 *   permute  x rows to the permuted buffer (global expert order)
 *   dispatch NCCL send/recv per peer in one group per chunk (comm stream)
 *   experts  per chunk: receive order -> grouped order, [FP8 quantize],
 *            fc1, SwiGLU, [FP8 quantize], fc2 (cuBLASLt: one strided-batched
 *            call when the chunk's experts have equal rows, else one call per
 *            expert over NG streams), grouped -> receive order
 *   combine  NCCL back, then y[t] = sum_j gate * o
 *   backward the mirror image; the router's own backward (dlogits, dWr, dx)
 *            runs while the gradient all-to-all is in flight
 * CUDA graphs capture the router (and preprocess) once, after the first
 * (eager) iteration; the replay is verified against the eager result.
 */
#include "moe_args.h"
#include "moe_gpu.h"
#include "moe_log.h"
#include "moe_ref.h"
#include "moe_route.h"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef __nv_bfloat16 bf16;

#define PROG "moetune-cuda-moe"
#define NG 4                        /* streams the per-expert GEMMs spread over */
#define WS_BYTES ((size_t)32 << 20) /* cuBLASLt workspace per stream */
#define MAX_EP 64
#define FULL 0xffffffffu

/* ---- errors ------------------------------------------------------------------------- */

static int fail_cuda(cudaError_t e, const char *what, int line)
{
    if (e == cudaErrorMemoryAllocation) {
        /* the same "CUDA out of memory." as alloc_all's message (README, exit 4) */
        fprintf(stderr, PROG ": CUDA out of memory. (%s in %s, moe.cu:%d)\n", cudaGetErrorName(e),
                what, line);
        return MT_MOE_EXIT_OOM;
    }
    fprintf(stderr, PROG ": CUDA error: %s (%s) in %s (moe.cu:%d)\n", cudaGetErrorString(e),
            cudaGetErrorName(e), what, line);
    return MT_MOE_EXIT_FAIL;
}

#define CU(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            return fail_cuda(e_, #call, __LINE__);                                                 \
    } while (0)
#define LT(call)                                                                                   \
    do {                                                                                           \
        cublasStatus_t s_ = (call);                                                                \
        if (s_ == CUBLAS_STATUS_ALLOC_FAILED) {                                                    \
            fprintf(stderr, PROG ": CUDA out of memory. (cuBLASLt %s in %s, moe.cu:%d)\n",          \
                    cublasLtGetStatusName(s_), #call, __LINE__);                                   \
            return MT_MOE_EXIT_OOM;                                                                \
        }                                                                                          \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
            fprintf(stderr, PROG ": cuBLASLt error: %s (%s) in %s (moe.cu:%d)\n",                  \
                    cublasLtGetStatusString(s_), cublasLtGetStatusName(s_), #call, __LINE__);      \
            return MT_MOE_EXIT_FAIL;                                                               \
        }                                                                                          \
    } while (0)
#define NC(call)                                                                                   \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        if (r_ != ncclSuccess) {                                                                   \
            fprintf(stderr, PROG ": NCCL error: %s in %s (moe.cu:%d)\n", ncclGetErrorString(r_),   \
                    #call, __LINE__);                                                              \
            return MT_MOE_EXIT_FAIL;                                                               \
        }                                                                                          \
    } while (0)
#define TRY(expr)                                                                                  \
    do {                                                                                           \
        int rc_ = (expr);                                                                          \
        if (rc_)                                                                                   \
            return rc_;                                                                            \
    } while (0)
#define KCHECK() CU(cudaGetLastError())

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- kernels ------------------------------------------------------------------------ */

static unsigned grid_for(int64_t n, int threads)
{
    int64_t g = (n + threads - 1) / threads;
    if (g < 1)
        g = 1;
    if (g > 65535LL * 32)
        g = 65535LL * 32;
    return (unsigned)g;
}

/* blocks of `threads` for one warp per token (no grid-stride loop there):
 * at most 2^31 tokens / 4, inside the grid limit */
static unsigned warp_blocks(int64_t tokens, int threads)
{
    return (unsigned)((tokens * 32 + threads - 1) / threads);
}

__global__ void k_init_bf16(bf16 *p, int64_t n, uint64_t seed, uint32_t tensor, uint64_t base,
                            float scale)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        p[i] = __float2bfloat16_rn(mt_moe_init_uniform(seed, tensor, base + (uint64_t)i) * scale);
}

__global__ void k_init_f32(float *p, int64_t n, uint64_t seed, uint32_t tensor, uint64_t base,
                           float scale)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        p[i] = mt_moe_init_uniform(seed, tensor, base + (uint64_t)i) * scale;
}

__global__ void k_cast(const bf16 *x, float *y, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = __bfloat162float(x[i]);
}

/* the total order of top-k (moe_route.c better()): numbers before NaN,
 * larger first, ties to the lower expert id */
__device__ __forceinline__ bool better(float av, int ai, float bv, int bi)
{
    if (bi < 0)
        return ai >= 0;
    if (ai < 0)
        return false;
    bool an = isnan(av), bn = isnan(bv);
    if (an != bn)
        return bn;
    if (!an && av != bv)
        return av > bv;
    return ai < bi;
}

/* One warp per token: softmax over the experts, the natural top-k (kept for
 * the check), and the gates at the plan's experts. */
__global__ void k_router(const float *logits, int T, int E, int K, const int32_t *ids, float *probs,
                         int32_t *ids_nat, float *gates)
{
    int t = (int)((blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5), lane = threadIdx.x & 31;
    if (t >= T)
        return;
    const float *row = logits + (int64_t)t * E;
    float m = -INFINITY, s = 0.0f;
    for (int e = lane; e < E; e += 32)
        m = fmaxf(m, row[e]);
    for (int o = 16; o; o >>= 1)
        m = fmaxf(m, __shfl_xor_sync(FULL, m, o));
    for (int e = lane; e < E; e += 32)
        s += expf(row[e] - m);
    for (int o = 16; o; o >>= 1)
        s += __shfl_xor_sync(FULL, s, o);
    for (int e = lane; e < E; e += 32)
        probs[(int64_t)t * E + e] = expf(row[e] - m) / s;
    unsigned taken = 0; /* bit i: expert lane + 32 i */
    for (int j = 0; j < K; j++) {
        float bv = 0.0f;
        int bi = -1;
        for (int i = 0, e = lane; e < E; i++, e += 32)
            if (!((taken >> i) & 1u) && better(row[e], e, bv, bi)) {
                bv = row[e];
                bi = e;
            }
        for (int o = 16; o; o >>= 1) {
            float ov = __shfl_xor_sync(FULL, bv, o);
            int oi = __shfl_xor_sync(FULL, bi, o);
            if (better(ov, oi, bv, bi)) {
                bv = ov;
                bi = oi;
            }
        }
        if (bi >= 0 && (bi & 31) == lane)
            taken |= 1u << (bi >> 5);
        if (lane == 0)
            ids_nat[(int64_t)t * K + j] = bi;
    }
    for (int j = lane; j < K; j += 32) {
        int id = ids[(int64_t)t * K + j];
        gates[(int64_t)t * K + j] = expf(row[id] - m) / s;
    }
}

/* One block (256 threads) per expert: the stable rank of each of its
 * (token, slot) entries among the entries of that expert, and its count. */
__global__ void k_rank(const int32_t *ids, int64_t n, int32_t *rank, int32_t *counts)
{
    __shared__ int warp_tot[8];
    int e = blockIdx.x, lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    int base = 0;
    for (int64_t s = 0; s < n; s += blockDim.x) {
        int64_t f = s + threadIdx.x;
        bool hit = f < n && ids[f] == e;
        unsigned b = __ballot_sync(FULL, hit);
        int before = __popc(b & ((1u << lane) - 1u));
        if (lane == 0)
            warp_tot[w] = __popc(b);
        __syncthreads();
        int off = 0, tot = 0;
        for (int i = 0; i < (int)(blockDim.x >> 5); i++) {
            if (i < w)
                off += warp_tot[i];
            tot += warp_tot[i];
        }
        if (hit)
            rank[f] = base + off + before;
        base += tot;
        __syncthreads();
    }
    if (threadIdx.x == 0)
        counts[e] = base;
}

__global__ void k_offsets(const int32_t *counts, int E, int32_t *offs)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        int acc = 0;
        for (int e = 0; e < E; e++) {
            offs[e] = acc;
            acc += counts[e];
        }
        offs[E] = acc;
    }
}

__global__ void k_pos(const int32_t *ids, const int32_t *rank, const int32_t *offs, int64_t n,
                      int32_t *pos)
{
    for (int64_t f = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; f < n;
         f += (int64_t)gridDim.x * blockDim.x)
        pos[f] = offs[ids[f]] + rank[f];
}

/* 16-byte vectors of a bf16 row (hidden % 16 == 0: rows are 32-byte multiples) */
__device__ __forceinline__ void copy_row(uint4 *dst, const uint4 *src, int vec)
{
    for (int v = threadIdx.x; v < vec; v += blockDim.x)
        dst[v] = src[v];
}

/* one block per (token, slot): xs[pos[f]] = x[f / K] */
__global__ void k_permute(const bf16 *x, const int32_t *pos, int K, int H, bf16 *xs)
{
    int64_t f = blockIdx.x;
    int vec = H / 8;
    copy_row((uint4 *)(xs + (int64_t)pos[f] * H), (const uint4 *)(x + (f / K) * H), vec);
}

/* blocks [b0, b0 + gridDim.x): receive order <-> grouped order */
__global__ void k_reorder(const mt_moe_block *blk, int b0, const bf16 *src, bf16 *dst, int H,
                          int to_grouped)
{
    mt_moe_block b = blk[b0 + blockIdx.x];
    int vec = H / 8;
    for (int64_t r = blockIdx.y; r < b.rows; r += gridDim.y) {
        int64_t from = to_grouped ? b.recv_row + r : b.grouped_row + r;
        int64_t to = to_grouped ? b.grouped_row + r : b.recv_row + r;
        copy_row((uint4 *)(dst + to * H), (const uint4 *)(src + from * H), vec);
    }
}

__global__ void k_swiglu(const bf16 *h, bf16 *act, int64_t r0, int64_t r1, int F)
{
    int64_t n = (r1 - r0) * F;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = r0 + i / F, j = i % F;
        float a = __bfloat162float(h[r * 2 * F + j]), b = __bfloat162float(h[r * 2 * F + F + j]);
        act[r * F + j] = __float2bfloat16_rn(a / (1.0f + expf(-a)) * b);
    }
}

__global__ void k_swiglu_bwd(const bf16 *h, const bf16 *dact, bf16 *dh, int64_t r0, int64_t r1,
                             int F)
{
    int64_t n = (r1 - r0) * F;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = r0 + i / F, j = i % F;
        float a = __bfloat162float(h[r * 2 * F + j]), b = __bfloat162float(h[r * 2 * F + F + j]);
        float d = __bfloat162float(dact[r * F + j]), s = 1.0f / (1.0f + expf(-a));
        dh[r * 2 * F + j] = __float2bfloat16_rn(d * b * s * (1.0f + a * (1.0f - s)));
        dh[r * 2 * F + F + j] = __float2bfloat16_rn(d * a * s);
    }
}

/* max |v| into *slot (a non-negative float compared as its bits); one
 * atomic per block, not per warp: the weights' amax runs over up to 2^21
 * blocks into one address every iteration */
__global__ void k_amax(const bf16 *p, int64_t n, float *slot)
{
    __shared__ float sh[32];
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (int)(blockDim.x >> 5);
    float m = 0.0f;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        m = fmaxf(m, fabsf(__bfloat162float(p[i])));
    for (int o = 16; o; o >>= 1)
        m = fmaxf(m, __shfl_xor_sync(FULL, m, o));
    if (lane == 0)
        sh[w] = m;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int i = 1; i < nw; i++)
            m = fmaxf(m, sh[i]);
        atomicMax((unsigned *)slot, __float_as_uint(m));
    }
}

/* e4m3 with the scale 448/amax (1 when amax is 0): moe_ref.c's formula */
__global__ void k_quant(const bf16 *src, uint8_t *dst, int64_t n, const float *amax, float *inv)
{
    float a = *amax;
    float sc = (a > 0.0f && !isinf(a)) ? MT_MOE_E4M3_MAX / a : 1.0f;
    if (blockIdx.x == 0 && threadIdx.x == 0)
        *inv = 1.0f / sc;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = (uint8_t)__nv_cvt_float_to_fp8(__bfloat162float(src[i]) * sc, __NV_SATFINITE,
                                                __NV_E4M3);
}

/* one block per token: y[t] = sum_j gate * o[pos] */
__global__ void k_combine(const bf16 *orv, const int32_t *pos, const float *gates, int K, int H,
                          bf16 *y)
{
    int64_t t = blockIdx.x;
    for (int c = threadIdx.x; c < H; c += blockDim.x) {
        float acc = 0.0f;
        for (int j = 0; j < K; j++)
            acc += gates[t * K + j] * __bfloat162float(orv[(int64_t)pos[t * K + j] * H + c]);
        y[t * H + c] = __float2bfloat16_rn(acc);
    }
}

__device__ float block_sum(float v, float *sh)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (int)(blockDim.x >> 5);
    for (int o = 16; o; o >>= 1)
        v += __shfl_xor_sync(FULL, v, o);
    if (lane == 0)
        sh[w] = v;
    __syncthreads();
    v = 0.0f;
    if (threadIdx.x == 0)
        for (int i = 0; i < nw; i++)
            v += sh[i];
    __syncthreads();
    return v; /* valid in thread 0 */
}

/* one block (256 threads) per token: dos[pos] = bf16(gate * dy), dgate = dy . o */
__global__ void k_combine_bwd(const bf16 *dy, const bf16 *orv, const int32_t *pos,
                              const float *gates, int K, int H, bf16 *dos, float *dg)
{
    __shared__ float sh[32];
    int64_t t = blockIdx.x;
    for (int j = 0; j < K; j++) {
        int64_t p = pos[t * K + j];
        float g = gates[t * K + j], part = 0.0f;
        for (int c = threadIdx.x; c < H; c += blockDim.x) {
            float d = __bfloat162float(dy[t * H + c]);
            dos[p * H + c] = __float2bfloat16_rn(g * d);
            part += d * __bfloat162float(orv[p * H + c]);
        }
        part = block_sum(part, sh);
        if (threadIdx.x == 0)
            dg[t * K + j] = part;
    }
}

/* one warp per token: dlogits = p * (dprob - sum_j p[id_j] dgate_j) */
__global__ void k_router_bwd(const float *probs, const int32_t *ids, const float *dg, int T, int E,
                             int K, float *dlog)
{
    int t = (int)((blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5), lane = threadIdx.x & 31;
    if (t >= T)
        return;
    const float *p = probs + (int64_t)t * E;
    const int32_t *id = ids + (int64_t)t * K;
    const float *g = dg + (int64_t)t * K;
    float S = 0.0f;
    for (int j = lane; j < K; j += 32)
        S += p[id[j]] * g[j];
    for (int o = 16; o; o >>= 1)
        S += __shfl_xor_sync(FULL, S, o);
    for (int e = lane; e < E; e += 32) {
        float dp = 0.0f;
        for (int j = 0; j < K; j++)
            if (id[j] == e)
                dp = g[j];
        dlog[(int64_t)t * E + e] = p[e] * (dp - S);
    }
}

/* one block per token: dx = bf16(sum_j dxp[pos] + dx_router) */
__global__ void k_dx(const bf16 *dxp, const int32_t *pos, const float *dxr, int K, int H, bf16 *dx)
{
    int64_t t = blockIdx.x;
    for (int c = threadIdx.x; c < H; c += blockDim.x) {
        float acc = 0.0f;
        for (int j = 0; j < K; j++)
            acc += __bfloat162float(dxp[(int64_t)pos[t * K + j] * H + c]);
        dx[t * H + c] = __float2bfloat16_rn(acc + dxr[t * H + c]);
    }
}

/* ---- per-GPU state -------------------------------------------------------------------- */

enum {
    K_FC1,
    K_FC2,
    K_FC2_DGRAD,
    K_FC2_WGRAD,
    K_FC1_DGRAD,
    K_FC1_WGRAD,
    K_R_FWD,
    K_R_WGRAD,
    K_R_DGRAD
};
static const char *const KIND_NAME[] = {"fc1",       "fc2",          "fc2 dgrad",
                                        "fc2 wgrad", "fc1 dgrad",    "fc1 wgrad",
                                        "router",    "router wgrad", "router dgrad"};
enum { S_X = 0, S_W1 = 1, S_ACT = 2, S_W2 = 3 }; /* FP8 scale slots: slot * chunks + chunk */
enum { B_STATIC = 0, B_SAVED = 1, B_TRANSIENT = 2 };

typedef struct Gemm {
    int used, kind, fp8, m, n, k, batch, slot_a, slot_b;
    long long sa, sb, sd;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulAlgo_t algo;
} Gemm;

typedef struct Dev {
    int id, rank;
    cudaStream_t cs, ms, gs[NG];
    cudaEvent_t ev_ready, ev_comb, ev_fork, ev_join[NG];
    cudaEvent_t ev_disp[MT_MOE_MAX_CHUNKS], ev_exp[MT_MOE_MAX_CHUNKS];
    cudaEvent_t t0, t_fwd, t_bwd, t_d0, t_d1; /* timing */
    cublasLtHandle_t lt;
    ncclComm_t comm;
    mt_moe_layout *lay;
    int32_t *plan_ids; /* host [T*K] */
    int32_t *h_counts; /* pinned [E] */
    void *ws[NG + 1];  /* [NG]: the compute stream's */
    bf16 *x, *dy, *w1, *w2, *xs, *xr, *xg, *h, *act, *og, *os, *orv, *y;
    bf16 *dos, *dor, *dog, *dact, *dh, *dxg, *dxs, *dxp, *dx;
    float *x32, *wr, *logits, *probs, *gates, *dg, *dlog, *dwr, *dxr, *dw1, *dw2, *amax, *inv;
    int32_t *ids, *ids_nat, *rank_in, *cnt, *offs, *pos;
    uint8_t *xq, *actq, *w1q, *w2q;
    mt_moe_block *blocks;
    cudaGraph_t graph;
    cudaGraphExec_t gexec;
    Gemm *gc;
    int gc_cap, gc_n;
    int64_t bytes[3];
    int64_t max_reserved;
    void *allocs[96];
    int n_allocs;
} Dev;

typedef struct Ctx {
    const mt_moe_args *a;
    int ep, E, L, C, H, F, K, T;
    int64_t *counts_all; /* [ep][E]: the plan */
    Dev *dev;
    int have_nccl;
    double *times; /* host wall ms per iteration */
    double peak_bf16, peak_fp8;
    const char *peak_src;
} Ctx;

/* ---- cuBLASLt: one descriptor, layouts and algorithm per shape, cached ---------------- */

static uint64_t gemm_hash(const Gemm *g)
{
    uint64_t h = 1469598103934665603ULL;
    long long v[11] = {g->kind,   g->fp8,    g->m,  g->n,  g->k, g->batch,
                       g->slot_a, g->slot_b, g->sa, g->sb, g->sd};
    for (int i = 0; i < 11; i++) {
        h ^= (uint64_t)v[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static int gemm_same(const Gemm *a, const Gemm *b)
{
    return a->kind == b->kind && a->fp8 == b->fp8 && a->m == b->m && a->n == b->n && a->k == b->k &&
           a->batch == b->batch && a->slot_a == b->slot_a && a->slot_b == b->slot_b &&
           a->sa == b->sa && a->sb == b->sb && a->sd == b->sd;
}

static int gemm_grow(Dev *d)
{
    int cap = d->gc_cap ? d->gc_cap * 2 : 256, i;
    Gemm *n = (Gemm *)calloc((size_t)cap, sizeof *n);
    if (!n) {
        fprintf(stderr, PROG ": out of host memory\n");
        return MT_MOE_EXIT_FAIL;
    }
    for (i = 0; i < d->gc_cap; i++)
        if (d->gc[i].used) {
            uint64_t h = gemm_hash(&d->gc[i]);
            int j = (int)(h & (uint64_t)(cap - 1));
            while (n[j].used)
                j = (j + 1) & (cap - 1);
            n[j] = d->gc[i];
        }
    free(d->gc);
    d->gc = n;
    d->gc_cap = cap;
    return 0;
}

static int layout(cublasLtMatrixLayout_t *l, cudaDataType_t t, int64_t rows, int64_t cols,
                  int64_t ld, int batch, long long stride)
{
    LT(cublasLtMatrixLayoutCreate(l, t, (uint64_t)rows, (uint64_t)cols, ld));
    if (batch > 1) {
        int32_t b = batch;
        int64_t s = stride;
        LT(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof b));
        LT(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &s,
                                            sizeof s));
    }
    return 0;
}

/*
 * Column-major view of row-major tensors (what cuBLASLt sees):
 *   forward  D[m x n] = op(A)^T-form "TN": A stored k x m (weights [out][in]),
 *            B stored k x n (activations [rows][in]); FP8 needs exactly this
 *            TN form on Hopper, with lda, ldb (= k) multiples of 16.
 *   dgrad    "NN": A stored m x k (weights), B stored k x n (gradients).
 *   wgrad    "NT": A stored m x k (activations^T view), B stored n x k.
 * Every leading dimension is the stored row count (no padding inside a row).
 */
static int gemm_get(Dev *d, int kind, int fp8, int m, int n, int k, int batch, long long sa,
                    long long sb, long long sd, int slot_a, int slot_b, Gemm **out)
{
    Gemm key;
    memset(&key, 0, sizeof key);
    key.kind = kind;
    key.fp8 = fp8;
    key.m = m;
    key.n = n;
    key.k = k;
    key.batch = batch;
    key.sa = batch > 1 ? sa : 0;
    key.sb = batch > 1 ? sb : 0;
    key.sd = batch > 1 ? sd : 0;
    key.slot_a = slot_a;
    key.slot_b = slot_b;
    if (d->gc_n * 2 >= d->gc_cap)
        TRY(gemm_grow(d));
    int j = (int)(gemm_hash(&key) & (uint64_t)(d->gc_cap - 1));
    while (d->gc[j].used) {
        if (gemm_same(&d->gc[j], &key)) {
            *out = &d->gc[j];
            return 0;
        }
        j = (j + 1) & (d->gc_cap - 1);
    }
    Gemm *g = &d->gc[j];
    *g = key;
    cudaDataType_t ta, tb, td;
    cublasOperation_t opa, opb;
    if (kind >= K_R_FWD)
        ta = tb = td = CUDA_R_32F;
    else if (fp8) {
        ta = tb = CUDA_R_8F_E4M3;
        td = CUDA_R_16BF;
    } else if (kind == K_FC2_WGRAD || kind == K_FC1_WGRAD) {
        ta = tb = CUDA_R_16BF;
        td = CUDA_R_32F; /* main grads in FP32, as Megatron keeps them */
    } else
        ta = tb = td = CUDA_R_16BF;
    switch (kind) {
    case K_FC1:
    case K_FC2:
    case K_R_FWD:
        opa = CUBLAS_OP_T;
        opb = CUBLAS_OP_N;
        break;
    case K_FC2_WGRAD:
    case K_FC1_WGRAD:
    case K_R_WGRAD:
        opa = CUBLAS_OP_N;
        opb = CUBLAS_OP_T;
        break;
    default:
        opa = CUBLAS_OP_N;
        opb = CUBLAS_OP_N;
        break;
    }
    LT(cublasLtMatmulDescCreate(&g->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LT(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    LT(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    if (fp8) {
        const float *pa = d->inv + slot_a, *pb = d->inv + slot_b;
        int8_t fast = 1; /* as Transformer Engine's forward GEMMs */
        LT(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &pa,
                                          sizeof pa));
        LT(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &pb,
                                          sizeof pb));
        LT(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast,
                                          sizeof fast));
    }
    if (opa == CUBLAS_OP_T)
        TRY(layout(&g->la, ta, k, m, k, batch, sa));
    else
        TRY(layout(&g->la, ta, m, k, m, batch, sa));
    if (opb == CUBLAS_OP_T)
        TRY(layout(&g->lb, tb, n, k, n, batch, sb));
    else
        TRY(layout(&g->lb, tb, k, n, k, batch, sb));
    TRY(layout(&g->ld, td, m, n, m, batch, sd));
    cublasLtMatmulPreference_t pref;
    uint64_t wsb = WS_BYTES;
    LT(cublasLtMatmulPreferenceCreate(&pref));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb,
                                            sizeof wsb));
    cublasLtMatmulHeuristicResult_t res;
    int nres = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(d->lt, g->desc, g->la, g->lb, g->ld, g->ld,
                                                       pref, 1, &res, &nres);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS || nres < 1) {
        fprintf(stderr,
                PROG ": cuBLASLt has no algorithm for the %s%s GEMM m=%d n=%d k=%d batch=%d (%s)\n",
                fp8 ? "FP8 " : "", KIND_NAME[kind], m, n, k, batch,
                st != CUBLAS_STATUS_SUCCESS ? cublasLtGetStatusString(st) : "no result");
        return MT_MOE_EXIT_FAIL;
    }
    g->algo = res.algo;
    g->used = 1;
    d->gc_n++;
    *out = g;
    return 0;
}

static int gemm_run(Dev *d, Gemm *g, const void *A, const void *B, void *D, cudaStream_t st,
                    void *ws)
{
    float alpha = 1.0f, beta = 0.0f;
    LT(cublasLtMatmul(d->lt, g->desc, &alpha, A, g->la, B, g->lb, &beta, D, g->ld, D, g->ld,
                      &g->algo, ws, WS_BYTES, st));
    return 0;
}

static void gemm_free(Dev *d)
{
    for (int i = 0; i < d->gc_cap; i++)
        if (d->gc[i].used) {
            cublasLtMatrixLayoutDestroy(d->gc[i].la);
            cublasLtMatrixLayoutDestroy(d->gc[i].lb);
            cublasLtMatrixLayoutDestroy(d->gc[i].ld);
            cublasLtMatmulDescDestroy(d->gc[i].desc);
        }
    free(d->gc);
    d->gc = NULL;
    d->gc_cap = d->gc_n = 0;
}

/* ---- expert GEMMs ----------------------------------------------------------------------- */

/* An operand of the expert GEMMs: a weight tensor (per_exp elements per
 * expert) or rows of the grouped buffers (width elements per row). */
typedef struct Opnd {
    void *base;
    int esz;                /* bytes per element */
    int64_t per_exp, width; /* one of the two is 0 */
} Opnd;

static Opnd weights(void *base, int esz, int64_t per_exp)
{
    Opnd o = {base, esz, per_exp, 0};
    return o;
}

static Opnd rows_of(void *base, int esz, int64_t width)
{
    Opnd o = {base, esz, 0, width};
    return o;
}

/* local expert i, whose rows start at row o */
static void *opnd_at(Opnd a, int i, int64_t o)
{
    return (char *)a.base + (a.per_exp * i + a.width * o) * a.esz;
}

/* the batch stride (elements) when every expert has P rows */
static long long opnd_stride(Opnd a, int64_t P)
{
    return a.per_exp ? a.per_exp : a.width * P;
}

/* m, n, k and the operands of a kind for `rows` rows (layouts: gemm_get) */
static void expert_shape(const Ctx *x, Dev *d, int kind, int fp8, int rows, int *m, int *n, int *k,
                         Opnd *A, Opnd *B, Opnd *D)
{
    int H = x->H, F = x->F, q = fp8 ? 1 : 2;
    switch (kind) {
    case K_FC1:
        *m = 2 * F, *n = rows, *k = H;
        *A = weights(fp8 ? (void *)d->w1q : (void *)d->w1, q, 2LL * F * H);
        *B = rows_of(fp8 ? (void *)d->xq : (void *)d->xg, q, H);
        *D = rows_of(d->h, 2, 2 * F);
        break;
    case K_FC2:
        *m = H, *n = rows, *k = F;
        *A = weights(fp8 ? (void *)d->w2q : (void *)d->w2, q, (int64_t)H * F);
        *B = rows_of(fp8 ? (void *)d->actq : (void *)d->act, q, F);
        *D = rows_of(d->og, 2, H);
        break;
    case K_FC2_DGRAD:
        *m = F, *n = rows, *k = H;
        *A = weights(d->w2, 2, (int64_t)H * F);
        *B = rows_of(d->dog, 2, H);
        *D = rows_of(d->dact, 2, F);
        break;
    case K_FC2_WGRAD:
        *m = F, *n = H, *k = rows;
        *A = rows_of(d->act, 2, F);
        *B = rows_of(d->dog, 2, H);
        *D = weights(d->dw2, 4, (int64_t)H * F);
        break;
    case K_FC1_DGRAD:
        *m = H, *n = rows, *k = 2 * F;
        *A = weights(d->w1, 2, 2LL * F * H);
        *B = rows_of(d->dh, 2, 2 * F);
        *D = rows_of(d->dxg, 2, H);
        break;
    default: /* K_FC1_WGRAD */
        *m = H, *n = 2 * F, *k = rows;
        *A = rows_of(d->xg, 2, H);
        *B = rows_of(d->dh, 2, 2 * F);
        *D = weights(d->dw1, 4, 2LL * F * H);
        break;
    }
}

/* The GEMMs of one kind for the local experts of chunk c: one strided
 * batched call when they all have the same (non-zero) rows, else one call per
 * expert spread over the NG streams.  An expert without rows has a zero
 * weight gradient. */
static int expert_gemms(const Ctx *x, Dev *d, int kind, int c)
{
    const mt_moe_layout *l = d->lay;
    int cb = l->chunk_begin[c], ce = l->chunk_begin[c + 1], i, j = 0, equal = 1, m, n, k;
    int fp8 = x->a->fp8 && (kind == K_FC1 || kind == K_FC2);
    int wgrad = kind == K_FC2_WGRAD || kind == K_FC1_WGRAD;
    int slot_a = -1, slot_b = -1;
    Opnd A, B, D;
    Gemm *g;
    if (fp8) {
        slot_a = (kind == K_FC1 ? S_W1 : S_W2) * x->C + c;
        slot_b = (kind == K_FC1 ? S_X : S_ACT) * x->C + c;
    }
    for (i = cb + 1; i < ce; i++)
        if (l->expert_rows[i] != l->expert_rows[cb])
            equal = 0;
    if (equal) {
        int64_t rows = l->expert_rows[cb], P = l->expert_off[cb + 1] - l->expert_off[cb];
        expert_shape(x, d, kind, fp8, (int)(fp8 ? P : rows), &m, &n, &k, &A, &B, &D);
        if (rows == 0) { /* no tokens: a zero weight gradient */
            if (wgrad)
                CU(cudaMemsetAsync(opnd_at(D, cb, 0), 0, (size_t)(D.per_exp * D.esz * (ce - cb)),
                                   d->cs));
            return 0;
        }
        TRY(gemm_get(d, kind, fp8, m, n, k, ce - cb, opnd_stride(A, P), opnd_stride(B, P),
                     opnd_stride(D, P), slot_a, slot_b, &g));
        return gemm_run(d, g, opnd_at(A, cb, l->expert_off[cb]), opnd_at(B, cb, l->expert_off[cb]),
                        opnd_at(D, cb, l->expert_off[cb]), d->cs, d->ws[NG]);
    }
    CU(cudaEventRecord(d->ev_fork, d->cs));
    for (i = 0; i < NG; i++)
        CU(cudaStreamWaitEvent(d->gs[i], d->ev_fork, 0));
    for (i = cb; i < ce; i++, j++) {
        int64_t rows = l->expert_rows[i], P = l->expert_off[i + 1] - l->expert_off[i];
        cudaStream_t st = d->gs[j % NG];
        expert_shape(x, d, kind, fp8, (int)(fp8 ? P : rows), &m, &n, &k, &A, &B, &D);
        if (rows == 0) {
            if (wgrad)
                CU(cudaMemsetAsync(opnd_at(D, i, 0), 0, (size_t)(D.per_exp * D.esz), st));
            continue;
        }
        TRY(gemm_get(d, kind, fp8, m, n, k, 1, 0, 0, 0, slot_a, slot_b, &g));
        TRY(gemm_run(d, g, opnd_at(A, i, l->expert_off[i]), opnd_at(B, i, l->expert_off[i]),
                     opnd_at(D, i, l->expert_off[i]), st, d->ws[j % NG]));
    }
    for (i = 0; i < NG; i++) {
        CU(cudaEventRecord(d->ev_join[i], d->gs[i]));
        CU(cudaStreamWaitEvent(d->cs, d->ev_join[i], 0));
    }
    return 0;
}

/* ---- the phases ------------------------------------------------------------------------- */

static int amax_quant(Dev *d, const bf16 *src, uint8_t *dst, int64_t n, int slot)
{
    if (n <= 0)
        return 0;
    k_amax<<<grid_for(n, 256), 256, 0, d->cs>>>(src, n, d->amax + slot);
    KCHECK();
    k_quant<<<grid_for(n, 256), 256, 0, d->cs>>>(src, dst, n, d->amax + slot, d->inv + slot);
    KCHECK();
    return 0;
}

static int router_fwd(const Ctx *x, Dev *d)
{
    int64_t th = (int64_t)x->T * x->H;
    Gemm *g;
    k_cast<<<grid_for(th, 256), 256, 0, d->cs>>>(d->x, d->x32, th);
    KCHECK();
    TRY(gemm_get(d, K_R_FWD, 0, x->E, x->T, x->H, 1, 0, 0, 0, -1, -1, &g));
    TRY(gemm_run(d, g, d->wr, d->x32, d->logits, d->cs, d->ws[NG]));
    k_router<<<warp_blocks(x->T, 128), 128, 0, d->cs>>>(d->logits, x->T, x->E, x->K, d->ids,
                                                        d->probs, d->ids_nat, d->gates);
    KCHECK();
    return 0;
}

static int preprocess(const Ctx *x, Dev *d)
{
    int64_t n = (int64_t)x->T * x->K;
    k_rank<<<x->E, 256, 0, d->cs>>>(d->ids, n, d->rank_in, d->cnt);
    KCHECK();
    k_offsets<<<1, 32, 0, d->cs>>>(d->cnt, x->E, d->offs);
    KCHECK();
    k_pos<<<grid_for(n, 256), 256, 0, d->cs>>>(d->ids, d->rank_in, d->offs, n, d->pos);
    KCHECK();
    return 0;
}

static int router_preprocess(const Ctx *x, Dev *d)
{
    if (d->gexec) {
        CU(cudaGraphLaunch(d->gexec, d->cs));
        if (x->a->graph_scope == MT_MOE_GRAPH_ROUTER)
            TRY(preprocess(x, d));
        return 0;
    }
    TRY(router_fwd(x, d));
    return preprocess(x, d);
}

static int reorder(const Ctx *x, Dev *d, int c, const bf16 *src, bf16 *dst, int to_grouped)
{
    const mt_moe_layout *l = d->lay;
    int b0 = l->block_begin[c], nb = l->block_begin[c + 1] - b0;
    if (nb <= 0)
        return 0;
    k_reorder<<<dim3((unsigned)nb, 32), 128, 0, d->cs>>>(d->blocks, b0, src, dst, x->H, to_grouped);
    KCHECK();
    return 0;
}

static int chunk_rows(const Dev *d, int c, int64_t *r0, int64_t *r1)
{
    *r0 = d->lay->expert_off[d->lay->chunk_begin[c]];
    *r1 = d->lay->expert_off[d->lay->chunk_begin[c + 1]];
    return *r1 > *r0;
}

static int experts_fwd(const Ctx *x, Dev *d, int c)
{
    int64_t r0, r1;
    TRY(reorder(x, d, c, d->xr, d->xg, 1));
    if (chunk_rows(d, c, &r0, &r1)) {
        if (x->a->fp8)
            TRY(amax_quant(d, d->xg + r0 * x->H, d->xq + r0 * x->H, (r1 - r0) * x->H,
                           S_X * x->C + c));
        TRY(expert_gemms(x, d, K_FC1, c));
        k_swiglu<<<grid_for((r1 - r0) * x->F, 256), 256, 0, d->cs>>>(d->h, d->act, r0, r1, x->F);
        KCHECK();
        if (x->a->fp8)
            TRY(amax_quant(d, d->act + r0 * x->F, d->actq + r0 * x->F, (r1 - r0) * x->F,
                           S_ACT * x->C + c));
        TRY(expert_gemms(x, d, K_FC2, c));
    }
    return reorder(x, d, c, d->og, d->os, 0);
}

static int experts_bwd(const Ctx *x, Dev *d, int c)
{
    int64_t r0, r1;
    TRY(reorder(x, d, c, d->dor, d->dog, 1));
    if (chunk_rows(d, c, &r0, &r1)) {
        TRY(expert_gemms(x, d, K_FC2_DGRAD, c));
        if (x->a->recompute_act) { /* the activation output was not kept */
            k_swiglu<<<grid_for((r1 - r0) * x->F, 256), 256, 0, d->cs>>>(d->h, d->act, r0, r1,
                                                                         x->F);
            KCHECK();
        }
        TRY(expert_gemms(x, d, K_FC2_WGRAD, c));
        k_swiglu_bwd<<<grid_for((r1 - r0) * x->F, 256), 256, 0, d->cs>>>(d->h, d->dact, d->dh, r0,
                                                                         r1, x->F);
        KCHECK();
        TRY(expert_gemms(x, d, K_FC1_DGRAD, c));
        TRY(expert_gemms(x, d, K_FC1_WGRAD, c));
    } else {
        TRY(expert_gemms(x, d, K_FC2_WGRAD, c)); /* zero gradients */
        TRY(expert_gemms(x, d, K_FC1_WGRAD, c));
    }
    return reorder(x, d, c, d->dxg, d->dxs, 0);
}

/* The all-to-all of chunk c over every GPU, one NCCL group:
 * which 0 dispatch (send: permuted order, receive: receive order), 1 combine. */
static int a2a(Ctx *x, int which, int c, bf16 *const *send, bf16 *const *recv)
{
    int ep = x->ep;
    NC(ncclGroupStart());
    for (int r = 0; r < ep; r++) {
        Dev *d = &x->dev[r];
        const mt_moe_layout *l = d->lay;
        const int64_t *so = which ? l->recv_off : l->send_off,
                      *sc = which ? l->recv_cnt : l->send_cnt;
        const int64_t *ro = which ? l->send_off : l->recv_off,
                      *rc = which ? l->send_cnt : l->recv_cnt;
        for (int p = 0; p < ep; p++) {
            int64_t i = (int64_t)c * ep + p;
            if (sc[i] > 0) {
                ncclResult_t e = ncclSend(send[r] + so[i] * x->H, (size_t)(sc[i] * x->H),
                                          ncclBfloat16, p, d->comm, d->ms);
                if (e != ncclSuccess) {
                    ncclGroupEnd();
                    NC(e);
                }
            }
            if (rc[i] > 0) {
                ncclResult_t e = ncclRecv(recv[r] + ro[i] * x->H, (size_t)(rc[i] * x->H),
                                          ncclBfloat16, p, d->comm, d->ms);
                if (e != ncclSuccess) {
                    ncclGroupEnd();
                    NC(e);
                }
            }
        }
    }
    NC(ncclGroupEnd());
    return 0;
}

static int fp8_weights(const Ctx *x, Dev *d)
{
    CU(cudaMemsetAsync(d->amax, 0, sizeof(float) * 4 * (size_t)x->C, d->cs));
    for (int c = 0; c < x->C; c++) {
        int cb = d->lay->chunk_begin[c], ce = d->lay->chunk_begin[c + 1];
        int64_t w1n = 2LL * x->F * x->H, w2n = (int64_t)x->H * x->F;
        TRY(amax_quant(d, d->w1 + cb * w1n, d->w1q + cb * w1n, (ce - cb) * w1n, S_W1 * x->C + c));
        TRY(amax_quant(d, d->w2 + cb * w2n, d->w2q + cb * w2n, (ce - cb) * w2n, S_W2 * x->C + c));
    }
    return 0;
}

/* The exchange around the experts, forward (fwd 1) or backward: dispatch
 * every chunk (the communication streams already wait for the send buffers),
 * the experts of each chunk as soon as it has arrived, each chunk's results
 * back as soon as its experts are done; the compute streams then wait for
 * the last of it. */
static int exchange(Ctx *x, int fwd)
{
    int ep = x->ep, C = x->C, r, c;
    bf16 *s[MAX_EP], *rv[MAX_EP];
    for (r = 0; r < ep; r++) {
        s[r] = fwd ? x->dev[r].xs : x->dev[r].dos;
        rv[r] = fwd ? x->dev[r].xr : x->dev[r].dor;
    }
    for (c = 0; c < C; c++) {
        TRY(a2a(x, 0, c, s, rv));
        for (r = 0; r < ep; r++) {
            CU(cudaSetDevice(x->dev[r].id));
            CU(cudaEventRecord(x->dev[r].ev_disp[c], x->dev[r].ms));
        }
    }
    for (r = 0; r < ep; r++) {
        Dev *d = &x->dev[r];
        CU(cudaSetDevice(d->id));
        if (fwd)
            CU(cudaEventRecord(d->t_d1, d->ms));
        for (c = 0; c < C; c++) {
            CU(cudaStreamWaitEvent(d->cs, d->ev_disp[c], 0));
            TRY(fwd ? experts_fwd(x, d, c) : experts_bwd(x, d, c));
            CU(cudaEventRecord(d->ev_exp[c], d->cs));
        }
        s[r] = fwd ? d->os : d->dxs;
        rv[r] = fwd ? d->orv : d->dxp;
    }
    for (c = 0; c < C; c++) {
        for (r = 0; r < ep; r++) {
            CU(cudaSetDevice(x->dev[r].id));
            CU(cudaStreamWaitEvent(x->dev[r].ms, x->dev[r].ev_exp[c], 0));
        }
        TRY(a2a(x, 1, c, s, rv));
    }
    for (r = 0; r < ep; r++) {
        Dev *d = &x->dev[r];
        CU(cudaSetDevice(d->id));
        CU(cudaEventRecord(d->ev_comb, d->ms));
        CU(cudaStreamWaitEvent(d->cs, d->ev_comb, 0));
    }
    return 0;
}

/* One iteration on every GPU; *ms the host wall time. */
static int iteration(Ctx *x, double *ms)
{
    int ep = x->ep, r;
    double t0 = now_s();
    for (r = 0; r < ep; r++) {
        Dev *d = &x->dev[r];
        CU(cudaSetDevice(d->id));
        CU(cudaEventRecord(d->t0, d->cs));
        if (x->a->fp8)
            TRY(fp8_weights(x, d));
        TRY(router_preprocess(x, d));
        CU(cudaMemcpyAsync(d->h_counts, d->cnt, sizeof(int32_t) * (size_t)x->E,
                           cudaMemcpyDeviceToHost, d->cs));
    }
    /* tokens per expert on the host (Megatron synchronises here too): the
     * GEMM sizes come from them; they must equal the plan's */
    for (r = 0; r < ep; r++) {
        Dev *d = &x->dev[r];
        CU(cudaSetDevice(d->id));
        CU(cudaStreamSynchronize(d->cs));
        for (int e = 0; e < x->E; e++)
            if (d->h_counts[e] != x->counts_all[(int64_t)r * x->E + e]) {
                fprintf(stderr,
                        PROG ": rank %d: the GPU routed %d tokens to expert %d, the plan %lld\n", r,
                        d->h_counts[e], e, (long long)x->counts_all[(int64_t)r * x->E + e]);
                return MT_MOE_EXIT_CHECK;
            }
        k_permute<<<(unsigned)((int64_t)x->T * x->K), 128, 0, d->cs>>>(d->x, d->pos, x->K, x->H,
                                                                       d->xs);
        KCHECK();
        CU(cudaEventRecord(d->ev_ready, d->cs));
        CU(cudaStreamWaitEvent(d->ms, d->ev_ready, 0));
        CU(cudaEventRecord(d->t_d0, d->ms));
    }
    TRY(exchange(x, 1));
    for (r = 0; r < ep; r++) {
        Dev *d = &x->dev[r];
        Gemm *g;
        CU(cudaSetDevice(d->id));
        k_combine<<<(unsigned)x->T, 256, 0, d->cs>>>(d->orv, d->pos, d->gates, x->K, x->H, d->y);
        KCHECK();
        CU(cudaEventRecord(d->t_fwd, d->cs));
        /* backward: the output gradient to the experts' GPUs ... */
        k_combine_bwd<<<(unsigned)x->T, 256, 0, d->cs>>>(d->dy, d->orv, d->pos, d->gates, x->K,
                                                         x->H, d->dos, d->dg);
        KCHECK();
        CU(cudaEventRecord(d->ev_ready, d->cs));
        CU(cudaStreamWaitEvent(d->ms, d->ev_ready, 0));
        /* ... while the router's backward runs here */
        k_router_bwd<<<warp_blocks(x->T, 128), 128, 0, d->cs>>>(d->probs, d->ids, d->dg, x->T, x->E,
                                                                x->K, d->dlog);
        KCHECK();
        TRY(gemm_get(d, K_R_WGRAD, 0, x->H, x->E, x->T, 1, 0, 0, 0, -1, -1, &g));
        TRY(gemm_run(d, g, d->x32, d->dlog, d->dwr, d->cs, d->ws[NG]));
        TRY(gemm_get(d, K_R_DGRAD, 0, x->H, x->T, x->E, 1, 0, 0, 0, -1, -1, &g));
        TRY(gemm_run(d, g, d->wr, d->dlog, d->dxr, d->cs, d->ws[NG]));
    }
    TRY(exchange(x, 0));
    for (r = 0; r < ep; r++) {
        Dev *d = &x->dev[r];
        CU(cudaSetDevice(d->id));
        k_dx<<<(unsigned)x->T, 256, 0, d->cs>>>(d->dxp, d->pos, d->dxr, x->K, x->H, d->dx);
        KCHECK();
        CU(cudaEventRecord(d->t_bwd, d->cs));
    }
    for (r = 0; r < ep; r++) {
        CU(cudaSetDevice(x->dev[r].id));
        CU(cudaStreamSynchronize(x->dev[r].cs));
    }
    *ms = (now_s() - t0) * 1e3;
    return 0;
}

/* ---- set-up --------------------------------------------------------------------------- */

typedef struct Spec {
    void **p;
    size_t bytes;
    int cls;
} Spec;

static int alloc_all(Ctx *x, Dev *d)
{
    int64_t T = x->T, H = x->H, F = x->F, E = x->E, K = x->K, L = x->L, C = x->C;
    int64_t N = T * K, R = d->lay->recv_rows, G = d->lay->grouped_rows;
    int fp8 = x->a->fp8, act_cls = x->a->recompute_act ? B_TRANSIENT : B_SAVED;
    Spec s[96];
    int n = 0, i;
    size_t total = 0;
#define S(ptr, b, c)                                                                               \
    do {                                                                                           \
        s[n].p = (void **)&(ptr);                                                                  \
        s[n].bytes = (size_t)(b);                                                                  \
        s[n++].cls = (c);                                                                          \
    } while (0)
    S(d->w1, L * 2 * F * H * 2, B_STATIC);
    S(d->w2, L * H * F * 2, B_STATIC);
    S(d->wr, E * H * 4, B_STATIC);
    S(d->dw1, L * 2 * F * H * 4, B_STATIC);
    S(d->dw2, L * H * F * 4, B_STATIC);
    S(d->dwr, E * H * 4, B_STATIC);
    S(d->x, T * H * 2, B_STATIC);
    S(d->dy, T * H * 2, B_STATIC);
    S(d->ids, N * 4, B_STATIC);
    S(d->blocks, (int64_t)sizeof(mt_moe_block) * L * x->ep, B_STATIC);
    S(d->amax, 4 * C * 4, B_STATIC);
    S(d->inv, 4 * C * 4, B_STATIC);
    S(d->cnt, E * 4, B_STATIC);
    S(d->offs, (E + 1) * 4, B_STATIC);
    for (i = 0; i <= NG; i++)
        S(d->ws[i], WS_BYTES, B_STATIC);
    if (fp8) {
        S(d->w1q, L * 2 * F * H, B_STATIC);
        S(d->w2q, L * H * F, B_STATIC);
    }
    S(d->x32, T * H * 4, B_SAVED);
    S(d->probs, T * E * 4, B_SAVED);
    S(d->gates, N * 4, B_SAVED);
    S(d->pos, N * 4, B_SAVED);
    S(d->xg, G * H * 2, B_SAVED);
    S(d->h, G * 2 * F * 2, B_SAVED);
    S(d->act, G * F * 2, act_cls);
    S(d->orv, N * H * 2, B_SAVED);
    S(d->logits, T * E * 4, B_TRANSIENT);
    S(d->ids_nat, N * 4, B_TRANSIENT);
    S(d->rank_in, N * 4, B_TRANSIENT);
    S(d->xs, N * H * 2, B_TRANSIENT);
    S(d->xr, R * H * 2, B_TRANSIENT);
    S(d->og, G * H * 2, B_TRANSIENT);
    S(d->os, R * H * 2, B_TRANSIENT);
    S(d->y, T * H * 2, B_TRANSIENT);
    S(d->dos, N * H * 2, B_TRANSIENT);
    S(d->dor, R * H * 2, B_TRANSIENT);
    S(d->dog, G * H * 2, B_TRANSIENT);
    S(d->dact, G * F * 2, B_TRANSIENT);
    S(d->dh, G * 2 * F * 2, B_TRANSIENT);
    S(d->dxg, G * H * 2, B_TRANSIENT);
    S(d->dxs, R * H * 2, B_TRANSIENT);
    S(d->dxp, N * H * 2, B_TRANSIENT);
    S(d->dx, T * H * 2, B_TRANSIENT);
    S(d->dg, N * 4, B_TRANSIENT);
    S(d->dlog, T * E * 4, B_TRANSIENT);
    S(d->dxr, T * H * 4, B_TRANSIENT);
    if (fp8) {
        S(d->xq, G * H, B_TRANSIENT);
        S(d->actq, G * F, B_TRANSIENT);
    }
#undef S
    for (i = 0; i < n; i++)
        total += s[i].bytes;
    for (i = 0; i < n; i++) {
        size_t b = s[i].bytes < 256 ? 256 : s[i].bytes;
        cudaError_t e = cudaMalloc(s[i].p, b);
        if (e != cudaSuccess) {
            size_t fr = 0, tot = 0;
            cudaGetLastError();
            cudaMemGetInfo(&fr, &tot);
            if (e == cudaErrorMemoryAllocation)
                mt_moe_log_oom(stderr, d->rank, d->id, (double)b, (double)fr, (double)tot,
                               (double)total);
            else
                fail_cuda(e, "cudaMalloc", __LINE__);
            return e == cudaErrorMemoryAllocation ? MT_MOE_EXIT_OOM : MT_MOE_EXIT_FAIL;
        }
        d->allocs[d->n_allocs++] = *s[i].p;
        d->bytes[s[i].cls] += (int64_t)b;
        /* zero: the padding rows of the grouped buffers stay zero for good */
        CU(cudaMemsetAsync(*s[i].p, 0, b, d->cs));
    }
    return 0;
}

static int init_data(Ctx *x, Dev *d)
{
    const mt_moe_args *a = x->a;
    int64_t T = x->T, H = x->H, F = x->F, E = x->E, L = x->L;
    uint64_t r = (uint64_t)d->rank;
#define INIT_BF16(p, n, tensor, base)                                                              \
    do {                                                                                           \
        k_init_bf16<<<grid_for(n, 256), 256, 0, d->cs>>>(p, n, a->seed, tensor, base,              \
                                                         mt_moe_init_scale(tensor, x->H, x->F));   \
        KCHECK();                                                                                  \
    } while (0)
    INIT_BF16(d->x, T * H, MT_MOE_T_X, r * (uint64_t)(T * H));
    INIT_BF16(d->dy, T * H, MT_MOE_T_DY, r * (uint64_t)(T * H));
    INIT_BF16(d->w1, L * 2 * F * H, MT_MOE_T_W1, r * (uint64_t)(L * 2 * F * H));
    INIT_BF16(d->w2, L * H * F, MT_MOE_T_W2, r * (uint64_t)(L * H * F));
#undef INIT_BF16
    k_init_f32<<<grid_for(E * H, 256), 256, 0, d->cs>>>(d->wr, E * H, a->seed, MT_MOE_T_WR, 0,
                                                        mt_moe_init_scale(MT_MOE_T_WR, x->H, x->F));
    KCHECK();
    CU(cudaMemcpyAsync(d->ids, d->plan_ids, sizeof(int32_t) * (size_t)(T * x->K),
                       cudaMemcpyHostToDevice, d->cs));
    CU(cudaMemcpyAsync(d->blocks, d->lay->blocks, sizeof(mt_moe_block) * (size_t)(L * x->ep),
                       cudaMemcpyHostToDevice, d->cs));
    CU(cudaStreamSynchronize(d->cs));
    return 0;
}

static int setup_dev(Ctx *x, Dev *d)
{
    int i;
    CU(cudaSetDevice(d->id));
    CU(cudaStreamCreateWithFlags(&d->cs, cudaStreamNonBlocking));
    CU(cudaStreamCreateWithFlags(&d->ms, cudaStreamNonBlocking));
    for (i = 0; i < NG; i++)
        CU(cudaStreamCreateWithFlags(&d->gs[i], cudaStreamNonBlocking));
    CU(cudaEventCreateWithFlags(&d->ev_ready, cudaEventDisableTiming));
    CU(cudaEventCreateWithFlags(&d->ev_comb, cudaEventDisableTiming));
    CU(cudaEventCreateWithFlags(&d->ev_fork, cudaEventDisableTiming));
    for (i = 0; i < NG; i++)
        CU(cudaEventCreateWithFlags(&d->ev_join[i], cudaEventDisableTiming));
    for (i = 0; i < x->C; i++) {
        CU(cudaEventCreateWithFlags(&d->ev_disp[i], cudaEventDisableTiming));
        CU(cudaEventCreateWithFlags(&d->ev_exp[i], cudaEventDisableTiming));
    }
    CU(cudaEventCreate(&d->t0));
    CU(cudaEventCreate(&d->t_fwd));
    CU(cudaEventCreate(&d->t_bwd));
    CU(cudaEventCreate(&d->t_d0));
    CU(cudaEventCreate(&d->t_d1));
    LT(cublasLtCreate(&d->lt));
    CU(cudaMallocHost((void **)&d->h_counts, sizeof(int32_t) * (size_t)x->E));
    TRY(alloc_all(x, d));
    return init_data(x, d);
}

static void teardown(Ctx *x)
{
    int r, i;
    if (!x->dev)
        return;
    for (r = 0; r < x->ep; r++) {
        Dev *d = &x->dev[r];
        if (cudaSetDevice(d->id) != cudaSuccess)
            continue;
        cudaDeviceSynchronize();
        if (d->gexec)
            cudaGraphExecDestroy(d->gexec);
        if (d->graph)
            cudaGraphDestroy(d->graph);
        if (x->have_nccl && d->comm)
            ncclCommDestroy(d->comm);
        gemm_free(d);
        if (d->lt)
            cublasLtDestroy(d->lt);
        for (i = 0; i < d->n_allocs; i++)
            cudaFree(d->allocs[i]);
        if (d->h_counts)
            cudaFreeHost(d->h_counts);
        free(d->plan_ids);
        mt_moe_layout_destroy(&d->lay);
        /* streams and events go with the process */
    }
    free(x->dev);
    free(x->counts_all);
    free(x->times);
    x->dev = NULL;
    x->times = NULL;
}

/* The forced plan of every rank (host), its counts, and each rank's layout. */
static int plan(Ctx *x)
{
    const mt_moe_args *a = x->a;
    int64_t n = (int64_t)x->T * x->K;
    int64_t *offs = (int64_t *)malloc(sizeof(int64_t) * (size_t)(x->E + 1));
    int32_t *pos = (int32_t *)malloc(sizeof(int32_t) * (size_t)n);
    x->counts_all = (int64_t *)calloc((size_t)x->ep * x->E, sizeof(int64_t));
    if (!offs || !pos || !x->counts_all) {
        free(offs);
        free(pos);
        fprintf(stderr, PROG ": out of host memory\n");
        return MT_MOE_EXIT_FAIL;
    }
    for (int r = 0; r < x->ep; r++) {
        Dev *d = &x->dev[r];
        d->plan_ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)n);
        if (!d->plan_ids ||
            mt_moe_route_generate(a->routing, a->zipf_alpha, x->T, x->K, x->E, a->seed, r,
                                  d->plan_ids) ||
            mt_moe_permute(d->plan_ids, x->T, x->K, x->E, x->counts_all + (int64_t)r * x->E, offs,
                           pos, NULL)) {
            free(offs);
            free(pos);
            fprintf(stderr, PROG ": the routing plan of rank %d could not be made\n", r);
            return MT_MOE_EXIT_FAIL;
        }
    }
    free(offs);
    free(pos);
    for (int r = 0; r < x->ep; r++)
        if (!(x->dev[r].lay = mt_moe_layout_new(x->counts_all, x->ep, x->E, r, x->C))) {
            fprintf(stderr, PROG ": the EP layout of rank %d could not be made\n", r);
            return MT_MOE_EXIT_FAIL;
        }
    return 0;
}

/* Dense peaks (TFLOP/s, no sparsity) by product name; else sm_90's 4096 BF16
 * FLOP per SM per clock at the maximum clock (an upper bound). */
static void peaks(Ctx *x, const cudaDeviceProp *p, int dev)
{
    static const struct {
        const char *name;
        double bf16, fp8;
    } T[] = {{"H200 NVL", 835.5, 1671.0}, {"H100 NVL", 835.5, 1671.0}, {"H100 PCIe", 756.5, 1513.0},
             {"GH200", 989.4, 1978.9},    {"H200", 989.4, 1978.9},     {"H100", 989.4, 1978.9},
             {"H800", 989.4, 1978.9},     {"H20", 148.0, 296.0}};
    x->peak_bf16 = x->peak_fp8 = 0;
    x->peak_src = "unknown";
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++)
        if (strstr(p->name, T[i].name)) {
            x->peak_bf16 = T[i].bf16;
            x->peak_fp8 = T[i].fp8;
            x->peak_src = "datasheet";
            break;
        }
    if (x->peak_bf16 == 0 && p->major == 9) {
        int khz = 0;
        if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev) == cudaSuccess && khz > 0) {
            x->peak_bf16 = p->multiProcessorCount * (khz * 1e3) * 4096.0 / 1e12;
            x->peak_fp8 = 2 * x->peak_bf16;
            x->peak_src = "SMs x max clock x 4096";
        }
    }
    if (x->a->peak_bf16 > 0) {
        x->peak_bf16 = x->a->peak_bf16;
        x->peak_src = "--peak-bf16-tflops";
    }
    if (x->a->peak_fp8 > 0)
        x->peak_fp8 = x->a->peak_fp8;
}

/* ---- CUDA graphs ------------------------------------------------------------------------ */

typedef struct Snap {
    void *p;
    size_t n;
} Snap;

/* What the captured part writes, to compare eager and replayed. */
static int snaps(const Ctx *x, Dev *d, Snap *s)
{
    int64_t T = x->T, E = x->E, N = (int64_t)x->T * x->K, n = 0;
    s[n].p = d->logits, s[n++].n = (size_t)(T * E * 4);
    s[n].p = d->probs, s[n++].n = (size_t)(T * E * 4);
    s[n].p = d->gates, s[n++].n = (size_t)(N * 4);
    s[n].p = d->ids_nat, s[n++].n = (size_t)(N * 4);
    if (x->a->graph_scope == MT_MOE_GRAPH_ROUTER_PREPROCESS) {
        s[n].p = d->rank_in, s[n++].n = (size_t)(N * 4);
        s[n].p = d->cnt, s[n++].n = (size_t)(E * 4);
        s[n].p = d->offs, s[n++].n = (size_t)((E + 1) * 4);
        s[n].p = d->pos, s[n++].n = (size_t)(N * 4);
    }
    return (int)n;
}

/* Captures the graph scope on every GPU after an eager iteration, replays it
 * once over poisoned outputs, and requires the eager bytes back. */
static int capture_and_verify(Ctx *x)
{
    static const char *const names[] = {"logits", "probs",  "gates",   "top-k ids",
                                        "ranks",  "counts", "offsets", "positions"};
    for (int r = 0; r < x->ep; r++) {
        Dev *d = &x->dev[r];
        Snap s[8];
        int ns, i, rc;
        size_t nodes = 0;
        double t0;
        CU(cudaSetDevice(d->id));
        CU(cudaStreamSynchronize(d->cs));
        ns = snaps(x, d, s);
        void *eager[8] = {0}, *replay[8] = {0};
        for (i = 0; i < ns; i++) {
            eager[i] = malloc(s[i].n);
            replay[i] = malloc(s[i].n);
            if (!eager[i] || !replay[i]) {
                fprintf(stderr, PROG ": out of host memory\n");
                return MT_MOE_EXIT_FAIL;
            }
            CU(cudaMemcpy(eager[i], s[i].p, s[i].n, cudaMemcpyDeviceToHost));
        }
        t0 = now_s();
        CU(cudaStreamBeginCapture(d->cs, cudaStreamCaptureModeThreadLocal));
        rc = router_fwd(x, d);
        if (!rc && x->a->graph_scope == MT_MOE_GRAPH_ROUTER_PREPROCESS)
            rc = preprocess(x, d);
        cudaGraph_t g = NULL;
        cudaError_t e = cudaStreamEndCapture(d->cs, &g);
        if (rc) {
            if (e == cudaSuccess && g)
                cudaGraphDestroy(g);
            return rc;
        }
        CU(e);
        d->graph = g;
        CU(cudaGraphInstantiate(&d->gexec, g, 0));
        CU(cudaGraphGetNodes(g, NULL, &nodes));
        double secs = now_s() - t0;
        for (i = 0; i < ns; i++)
            CU(cudaMemsetAsync(s[i].p, 0xff, s[i].n, d->cs));
        CU(cudaGraphLaunch(d->gexec, d->cs));
        CU(cudaStreamSynchronize(d->cs));
        int ok = 1;
        for (i = 0; i < ns; i++) {
            CU(cudaMemcpy(replay[i], s[i].p, s[i].n, cudaMemcpyDeviceToHost));
            if (memcmp(eager[i], replay[i], s[i].n)) {
                fprintf(stderr,
                        PROG ": CUDA graph replay on rank %d: %s differ from the eager run\n", r,
                        names[i]);
                ok = 0;
            }
        }
        for (i = 0; i < ns; i++) {
            free(eager[i]);
            free(replay[i]);
        }
        mt_moe_log_capture(stdout, r, secs);
        if (!ok)
            return MT_MOE_EXIT_CHECK;
        printf(PROG ": CUDA graph (%s) on rank %d: %zu nodes captured in %.3f s, replay verified "
                    "(outputs bitwise equal to the eager run)\n",
               mt_moe_scope_name(x->a->graph_scope), r, nodes, secs);
        fflush(stdout);
    }
    return 0;
}

/* ---- --check ---------------------------------------------------------------------------- */

static int download_bf16(const bf16 *src, float *dst, size_t n)
{
    uint16_t *tmp = (uint16_t *)malloc(n * 2 + 2);
    if (!tmp) {
        fprintf(stderr, PROG ": out of host memory\n");
        return MT_MOE_EXIT_FAIL;
    }
    cudaError_t e = cudaMemcpy(tmp, src, n * 2, cudaMemcpyDeviceToHost);
    for (size_t i = 0; e == cudaSuccess && i < n; i++)
        dst[i] = mt_bf16_value(tmp[i]);
    free(tmp);
    CU(e);
    return 0;
}

/* One compared tensor: the GPUs' values (all ranks, in the reference's
 * order) and the reference's. */
typedef struct Pair {
    const char *name;
    size_t n;
    double tol;
    float *gpu, *ref;
} Pair;

enum { P_LOGITS, P_GATES, P_Y, P_DX, P_DWR, P_DW1, P_DW2, P_COUNT };

/* The routing integers of rank r, exactly: the top-k ids against the CPU
 * top-k of the GPU's own logits, positions and counts against the plan's
 * permutation.  1 when all equal. */
static int check_routing(const Ctx *x, Dev *d, const float *logits, int *same)
{
    int64_t N = (int64_t)x->T * x->K, E = x->E;
    int32_t *g = (int32_t *)malloc(sizeof(int32_t) * (size_t)(2 * N + E)), *c;
    int64_t *cnt = (int64_t *)malloc(sizeof(int64_t) * (size_t)(2 * E + 1));
    int32_t *cpu = (int32_t *)malloc(sizeof(int32_t) * (size_t)(2 * N));
    int nat = 0, pos = 0, counts = 1, rc = 0;
    *same = 0;
    if (!g || !cnt || !cpu) {
        fprintf(stderr, PROG ": out of host memory\n");
        rc = MT_MOE_EXIT_FAIL;
        goto out;
    }
    c = g + 2 * N;
    if (cudaMemcpy(g, d->ids_nat, (size_t)N * 4, cudaMemcpyDeviceToHost) != cudaSuccess ||
        cudaMemcpy(g + N, d->pos, (size_t)N * 4, cudaMemcpyDeviceToHost) != cudaSuccess ||
        cudaMemcpy(c, d->cnt, (size_t)E * 4, cudaMemcpyDeviceToHost) != cudaSuccess) {
        rc = fail_cuda(cudaGetLastError(), "cudaMemcpy (routing check)", __LINE__);
        goto out;
    }
    if (mt_moe_topk(logits, x->T, x->E, x->K, cpu, NULL) ||
        mt_moe_permute(d->plan_ids, x->T, x->K, x->E, cnt, cnt + E, cpu + N, NULL)) {
        fprintf(stderr, PROG ": the CPU routing of rank %d failed\n", d->rank);
        rc = MT_MOE_EXIT_FAIL;
        goto out;
    }
    nat = !memcmp(g, cpu, (size_t)N * 4);
    pos = !memcmp(g + N, cpu + N, (size_t)N * 4);
    for (int64_t e = 0; e < E; e++)
        if (c[e] != cnt[e])
            counts = 0;
    printf(PROG ": check rank %d routing: top-k ids %s, permutation %s, token counts %s\n", d->rank,
           nat ? "equal" : "DIFFER", pos ? "equal" : "DIFFER", counts ? "equal" : "DIFFER");
    *same = nat && pos && counts;
out:
    free(g);
    free(cnt);
    free(cpu);
    return rc;
}

/* The inputs as the GPUs made them (moe_ref.h's generator, global indices). */
static void ref_inputs(const Ctx *x, float *xa, float *dy, float *wr, float *w1, float *w2)
{
    uint64_t seed = x->a->seed, i, tah = (uint64_t)x->T * x->ep * x->H;
    uint64_t w1n = (uint64_t)x->E * 2 * x->F * x->H, w2n = (uint64_t)x->E * x->H * x->F;
#define GEN(t, i) (mt_moe_init_uniform(seed, t, i) * mt_moe_init_scale(t, x->H, x->F))
    for (i = 0; i < tah; i++) {
        xa[i] = mt_bf16_round(GEN(MT_MOE_T_X, i));
        dy[i] = mt_bf16_round(GEN(MT_MOE_T_DY, i));
    }
    for (i = 0; i < (uint64_t)x->E * x->H; i++)
        wr[i] = GEN(MT_MOE_T_WR, i);
    for (i = 0; i < w1n; i++)
        w1[i] = mt_bf16_round(GEN(MT_MOE_T_W1, i));
    for (i = 0; i < w2n; i++)
        w2[i] = mt_bf16_round(GEN(MT_MOE_T_W2, i));
#undef GEN
}

/* The GPUs' results of the last iteration into the pairs' gpu arrays. */
static int gpu_results(const Ctx *x, Pair *p)
{
    int64_t T = x->T, H = x->H, F = x->F, E = x->E, K = x->K, L = x->L;
    for (int r = 0; r < x->ep; r++) {
        Dev *d = &x->dev[r];
        CU(cudaSetDevice(d->id));
        TRY(download_bf16(d->y, p[P_Y].gpu + r * T * H, (size_t)(T * H)));
        TRY(download_bf16(d->dx, p[P_DX].gpu + r * T * H, (size_t)(T * H)));
        CU(cudaMemcpy(p[P_LOGITS].gpu + r * T * E, d->logits, (size_t)(T * E * 4),
                      cudaMemcpyDeviceToHost));
        CU(cudaMemcpy(p[P_GATES].gpu + r * T * K, d->gates, (size_t)(T * K * 4),
                      cudaMemcpyDeviceToHost));
        CU(cudaMemcpy(p[P_DWR].gpu + r * E * H, d->dwr, (size_t)(E * H * 4),
                      cudaMemcpyDeviceToHost));
        CU(cudaMemcpy(p[P_DW1].gpu + r * L * 2 * F * H, d->dw1, (size_t)(L * 2 * F * H * 4),
                      cudaMemcpyDeviceToHost));
        CU(cudaMemcpy(p[P_DW2].gpu + r * L * H * F, d->dw2, (size_t)(L * H * F * 4),
                      cudaMemcpyDeviceToHost));
    }
    return 0;
}

static int check(Ctx *x)
{
    const mt_moe_args *a = x->a;
    int64_t T = x->T, H = x->H, F = x->F, E = x->E, K = x->K, ep = x->ep, TA = T * ep;
    double tol = a->fp8 ? MT_MOE_TOL_FP8 : MT_MOE_TOL_BF16;
    Pair p[P_COUNT] = {
        {"router logits", (size_t)(TA * E), MT_MOE_TOL_ROUTER, NULL, NULL},
        {"gates", (size_t)(TA * K), MT_MOE_TOL_ROUTER, NULL, NULL},
        {"output y", (size_t)(TA * H), tol, NULL, NULL},
        {"input grad dx", (size_t)(TA * H), tol, NULL, NULL},
        {"router weight grad", (size_t)(ep * E * H), tol, NULL, NULL},
        {"fc1 weight grad", (size_t)(E * 2 * F * H), tol, NULL, NULL},
        {"fc2 weight grad", (size_t)(E * H * F), tol, NULL, NULL},
    };
    float *xa = (float *)malloc(sizeof(float) * (size_t)(TA * H));
    float *dy = (float *)malloc(sizeof(float) * (size_t)(TA * H));
    float *wr = (float *)malloc(sizeof(float) * (size_t)(E * H));
    float *w1 = (float *)malloc(sizeof(float) * p[P_DW1].n);
    float *w2 = (float *)malloc(sizeof(float) * p[P_DW2].n);
    int32_t *ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)(TA * K));
    int bad = 0, rc = 0, i, same;
    mt_moe_ref_cfg c;
    mt_moe_ref_io io;
    for (i = 0; i < P_COUNT; i++)
        if (!(p[i].gpu = (float *)calloc(p[i].n, sizeof(float))) ||
            !(p[i].ref = (float *)calloc(p[i].n, sizeof(float))))
            rc = MT_MOE_EXIT_FAIL;
    if (rc || !xa || !dy || !wr || !w1 || !w2 || !ids) {
        fprintf(stderr, PROG ": out of host memory\n");
        rc = MT_MOE_EXIT_FAIL;
        goto out;
    }
    if ((rc = gpu_results(x, p)))
        goto out;
    for (int r = 0; r < ep; r++) {
        memcpy(ids + r * T * K, x->dev[r].plan_ids, sizeof(int32_t) * (size_t)(T * K));
        if ((rc = check_routing(x, &x->dev[r], p[P_LOGITS].gpu + r * T * E, &same)))
            goto out;
        bad |= !same;
    }
    ref_inputs(x, xa, dy, wr, w1, w2);
    memset(&c, 0, sizeof c);
    c.tokens = (int)TA;
    c.hidden = x->H;
    c.ffn = x->F;
    c.experts = x->E;
    c.topk = x->K;
    c.ep = x->ep;
    c.chunks = x->C;
    c.prec = a->fp8 ? MT_MOE_FP8 : MT_MOE_BF16;
    memset(&io, 0, sizeof io);
    io.x = xa;
    io.wr = wr;
    io.w1 = w1;
    io.w2 = w2;
    io.dy = dy;
    io.ids = ids;
    io.logits = p[P_LOGITS].ref;
    io.gates = p[P_GATES].ref;
    io.y = p[P_Y].ref;
    io.dx = p[P_DX].ref;
    io.dwr = p[P_DWR].ref;
    io.dw1 = p[P_DW1].ref;
    io.dw2 = p[P_DW2].ref;
    if (mt_moe_ref_run(&c, &io)) {
        fprintf(stderr, PROG ": the CPU reference failed\n");
        rc = MT_MOE_EXIT_FAIL;
        goto out;
    }
    for (i = 0; i < P_COUNT; i++) {
        double err = mt_moe_rel_err(p[i].gpu, p[i].ref, p[i].n);
        printf(PROG ": check %-22s error %.3e (tolerance %.1e) %s\n", p[i].name, err, p[i].tol,
               err <= p[i].tol ? "ok" : "FAILED");
        bad |= !(err <= p[i].tol);
    }
    printf(PROG ": check %s (%s, EP %d, %d chunk(s), graph scope %s, routing %s%s)\n",
           bad ? "FAILED" : "passed", mt_moe_prec_name(a), x->ep, x->C,
           mt_moe_scope_name(a->graph_scope), mt_moe_routing_name(a->routing),
           a->recompute_act ? ", moe_act recomputed" : "");
    fflush(stdout);
    rc = bad ? MT_MOE_EXIT_CHECK : 0;
out:
    for (i = 0; i < P_COUNT; i++) {
        free(p[i].gpu);
        free(p[i].ref);
    }
    free(xa);
    free(dy);
    free(wr);
    free(w1);
    free(w2);
    free(ids);
    return rc;
}

/* ---- --gemm-bench ------------------------------------------------------------------------ */

static int gemm_bench(Ctx *x)
{
    const mt_moe_args *a = x->a;
    int reps = a->gemm_bench;
    for (int r = 0; r < x->ep; r++) {
        Dev *d = &x->dev[r];
        CU(cudaSetDevice(d->id));
        CU(cudaEventRecord(d->t0, d->cs));
        for (int i = 0; i < reps; i++)
            for (int c = 0; c < x->C; c++) {
                TRY(expert_gemms(x, d, K_FC1, c));
                TRY(expert_gemms(x, d, K_FC2, c));
            }
        CU(cudaEventRecord(d->t_fwd, d->cs));
        for (int i = 0; i < reps; i++)
            for (int c = 0; c < x->C; c++) {
                TRY(expert_gemms(x, d, K_FC2_DGRAD, c));
                TRY(expert_gemms(x, d, K_FC2_WGRAD, c));
                TRY(expert_gemms(x, d, K_FC1_DGRAD, c));
                TRY(expert_gemms(x, d, K_FC1_WGRAD, c));
            }
        CU(cudaEventRecord(d->t_bwd, d->cs));
    }
    for (int r = 0; r < x->ep; r++) {
        Dev *d = &x->dev[r];
        float fwd = 0, bwd = 0;
        int64_t rows = 0;
        CU(cudaSetDevice(d->id));
        CU(cudaEventSynchronize(d->t_bwd));
        CU(cudaEventElapsedTime(&fwd, d->t0, d->t_fwd));
        CU(cudaEventElapsedTime(&bwd, d->t_fwd, d->t_bwd));
        for (int e = 0; e < x->L; e++)
            rows += d->lay->expert_rows[e];
        double fms = fwd / reps, bms = bwd / reps;
        double ftf = mt_moe_expert_flops(a, rows, 1) / (fms * 1e-3) / 1e12;
        double btf = mt_moe_expert_flops(a, rows, 0) / (bms * 1e-3) / 1e12;
        double fpk = a->fp8 ? x->peak_fp8 : x->peak_bf16, bpk = x->peak_bf16;
        printf(PROG ": expert-gemm rank=%d prec=%s experts=%d rows=%lld hidden=%d ffn=%d reps=%d "
                    "fwd_ms=%.3f fwd_tflops=%.1f fwd_peak=%.1f fwd_pct=%.1f "
                    "bwd_ms=%.3f bwd_tflops=%.1f bwd_peak=%.1f bwd_pct=%.1f peak_source=\"%s\"\n",
               r, mt_moe_prec_name(a), x->L, (long long)rows, x->H, x->F, reps, fms, ftf, fpk,
               fpk > 0 ? 100 * ftf / fpk : 0.0, bms, btf, bpk, bpk > 0 ? 100 * btf / bpk : 0.0,
               x->peak_src);
        fflush(stdout);
    }
    return 0;
}

/* ---- the run ------------------------------------------------------------------------------ */

static int sample_memory(Ctx *x)
{
    for (int r = 0; r < x->ep; r++) {
        size_t fr = 0, tot = 0;
        CU(cudaSetDevice(x->dev[r].id));
        CU(cudaMemGetInfo(&fr, &tot));
        if ((int64_t)(tot - fr) > x->dev[r].max_reserved)
            x->dev[r].max_reserved = (int64_t)(tot - fr);
    }
    return 0;
}

static int print_memory(Ctx *x, int after)
{
    for (int r = 0; r < x->ep; r++) {
        Dev *d = &x->dev[r];
        size_t fr = 0, tot = 0;
        CU(cudaSetDevice(d->id));
        CU(cudaMemGetInfo(&fr, &tot));
        mt_moe_log_memory(stdout, r, after, d->bytes[B_STATIC] + d->bytes[B_SAVED],
                          d->bytes[B_STATIC] + d->bytes[B_SAVED] + d->bytes[B_TRANSIENT],
                          (int64_t)(tot - fr), d->max_reserved);
    }
    return 0;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int run(Ctx *x)
{
    const mt_moe_args *a = x->a;
    int iters = a->check ? 2 : a->train_iters, gbs = a->micro_batch * x->ep;
    double *times, flops = 0;
    int devs[MAX_EP];
    ncclComm_t comms[MAX_EP];
    times = x->times = (double *)calloc((size_t)iters, sizeof(double));
    if (!times) {
        fprintf(stderr, PROG ": out of host memory\n");
        return MT_MOE_EXIT_FAIL;
    }
    TRY(plan(x));
    for (int r = 0; r < x->ep; r++) {
        TRY(setup_dev(x, &x->dev[r]));
        devs[r] = x->dev[r].id;
        flops += mt_moe_layer_flops(a, x->dev[r].lay->recv_rows);
    }
    flops /= x->ep; /* per GPU */
    NC(ncclCommInitAll(comms, x->ep, devs));
    x->have_nccl = 1;
    for (int r = 0; r < x->ep; r++)
        x->dev[r].comm = comms[r];
    printf(PROG ": NCCL %d.%d.%d communicators over %d GPU(s) of this process%s\n", NCCL_MAJOR,
           NCCL_MINOR, NCCL_PATCH, x->ep,
           x->ep == 1 ? " (EP 1: the all-to-all is a send/recv to itself)" : "");
    fflush(stdout);
    for (int it = 1; it <= iters; it++) {
        mt_moe_iter_log l;
        TRY(iteration(x, &times[it - 1]));
        TRY(sample_memory(x));
        l.wall = wall_s();
        l.iteration = it;
        l.total = iters;
        l.consumed = (int64_t)it * gbs;
        l.elapsed_ms = times[it - 1];
        l.tflops = flops / (times[it - 1] * 1e-3) / 1e12;
        l.global_batch = gbs;
        mt_moe_log_iteration(stdout, &l);
        if (it == 1) {
            TRY(print_memory(x, 1));
            if (a->graph_scope != MT_MOE_GRAPH_NONE)
                TRY(capture_and_verify(x));
        }
    }
    {
        Dev *d = &x->dev[0];
        float fwd = 0, bwd = 0, disp = 0;
        int64_t bytes = 0;
        double med;
        CU(cudaSetDevice(d->id));
        CU(cudaEventElapsedTime(&fwd, d->t0, d->t_fwd));
        CU(cudaEventElapsedTime(&bwd, d->t_fwd, d->t_bwd));
        CU(cudaEventElapsedTime(&disp, d->t_d0, d->t_d1));
        for (int p = 0; p < x->ep; p++)
            if (p != 0)
                for (int c = 0; c < x->C; c++)
                    bytes += d->lay->send_cnt[c * x->ep + p] * x->H * 2;
        qsort(times + (iters > 1), (size_t)(iters - (iters > 1)), sizeof(double), compare_double);
        med = times[(iters > 1) + (iters - (iters > 1)) / 2];
        printf(PROG ": summary: %d iterations, median %.3f ms%s (%.1f TFLOP/s per GPU); rank 0 "
                    "last iteration: forward %.3f ms, backward %.3f ms\n",
               iters, med, iters > 1 ? " after the first" : "", flops / (med * 1e-3) / 1e12, fwd,
               bwd);
        if (x->ep > 1)
            printf(PROG ": dispatch rank 0 (forward, %s): %.3f ms for %.2f MiB to %d other GPU(s): "
                        "%.1f GB/s%s\n",
                   a->overlap ? "overlapped with the experts" : "not overlapped", disp,
                   bytes / 1048576.0, x->ep - 1, disp > 0 ? bytes / (disp * 1e-3) / 1e9 : 0.0,
                   a->overlap ? " (includes time waiting for the experts of earlier chunks)" : "");
        else
            printf(PROG ": dispatch: EP 1, no traffic between GPUs (not a bandwidth figure)\n");
        fflush(stdout);
    }
    if (a->check)
        return check(x);
    if (a->gemm_bench > 0)
        return gemm_bench(x);
    return 0;
}

int mt_moe_gpu_main(const mt_moe_args *a)
{
    int n = 0, rc, r;
    cudaError_t e = cudaGetDeviceCount(&n);
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    Ctx x;
    if (e != cudaSuccess || n <= 0) {
        fprintf(stderr,
                PROG ": no CUDA GPU is visible (cudaGetDeviceCount: %s; "
                     "CUDA_VISIBLE_DEVICES=%s)%s\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "0 devices", cvd ? cvd : "(unset)",
                a->check ? "; --check skipped" : "");
        return a->check ? MT_MOE_EXIT_SKIP : MT_MOE_EXIT_NO_GPU;
    }
    if (n < a->ep) {
        fprintf(stderr,
                PROG ": too few GPUs visible: --expert-model-parallel-size %d needs %d GPUs "
                     "in this node, %d visible (CUDA_VISIBLE_DEVICES=%s)%s\n",
                a->ep, a->ep, n, cvd ? cvd : "(unset)", a->check ? "; --check skipped" : "");
        return a->check ? MT_MOE_EXIT_SKIP : MT_MOE_EXIT_FEW_GPUS;
    }
    memset(&x, 0, sizeof x);
    x.a = a;
    x.ep = a->ep;
    x.E = a->experts;
    x.L = a->experts / a->ep;
    x.C = a->chunks;
    x.H = a->hidden;
    x.F = a->ffn;
    x.K = a->topk;
    x.T = a->tokens;
    for (r = 0; r < a->ep; r++) {
        cudaDeviceProp p;
        e = cudaGetDeviceProperties(&p, r);
        if (e != cudaSuccess)
            return fail_cuda(e, "cudaGetDeviceProperties", __LINE__);
        if (p.major < 9) {
            fprintf(stderr,
                    PROG ": GPU %d (%s) is sm_%d%d; this benchmark needs sm_90 (Hopper) or "
                         "newer (FP8 cuBLASLt, the build's code)%s\n",
                    r, p.name, p.major, p.minor, a->check ? "; --check skipped" : "");
            return a->check ? MT_MOE_EXIT_SKIP : MT_MOE_EXIT_NO_GPU;
        }
        if (r == 0) {
            peaks(&x, &p, r);
            printf(PROG ": BENCHMARK-ONLY: one MoE layer with forced %s routing, not a training "
                        "run\n",
                   mt_moe_routing_name(a->routing));
            printf(PROG ": GPU 0 of %d visible: %s (sm_%d%d, %d SMs, %.1f GiB); dense peak "
                        "BF16 %.1f, FP8 %.1f TFLOP/s (%s)\n",
                   n, p.name, p.major, p.minor, p.multiProcessorCount,
                   p.totalGlobalMem / 1073741824.0, x.peak_bf16, x.peak_fp8, x.peak_src);
            printf(PROG ": hidden %d, expert FFN %d, %d experts, top-%d, %d tokens per GPU, EP %d, "
                        "%s, overlap %s (%d chunk(s)), CUDA graph %s, moe_act recompute %s, "
                        "routing %s%s\n",
                   a->hidden, a->ffn, a->experts, a->topk, a->tokens, a->ep, mt_moe_prec_name(a),
                   a->overlap ? "on" : "off", a->chunks, mt_moe_scope_name(a->graph_scope),
                   a->recompute_act ? "on" : "off", mt_moe_routing_name(a->routing),
                   a->check ? ", --check (2 iterations)" : "");
            fflush(stdout);
        }
    }
    mt_moe_log_args(stdout, a);
    x.dev = (Dev *)calloc((size_t)a->ep, sizeof(Dev));
    if (!x.dev) {
        fprintf(stderr, PROG ": out of host memory\n");
        return MT_MOE_EXIT_FAIL;
    }
    for (r = 0; r < a->ep; r++) {
        x.dev[r].id = r;
        x.dev[r].rank = r;
    }
    rc = run(&x);
    teardown(&x);
    return rc;
}
