/*
 * simtrace.c - a Kineto-style trace of rank 0 for the profiled iterations,
 * laid out from the cost model's breakdown so that what a trace analysis
 * measures is what the model charged:
 *
 *   - compute kernels (GEMMs named by precision and architecture, flash
 *     attention, router, permute, activation) on compute stream 7 fill the
 *     breakdown's compute time;
 *   - EP dispatch/combine kernels, named by the dispatcher that really ran,
 *     sit on stream 20: the hidden part of each runs concurrently with a
 *     compute kernel (overlap), the exposed part leaves the compute stream
 *     idle;
 *   - TP/CP/DP communication and offload copies are serial (exposed);
 *   - the host's time becomes idle gaps before each individually launched
 *     kernel or graph launch (host-bound steps show gaps);
 *   - the pipeline bubble is idle time at both ends of the step;
 *   - CUDA graphs replace the per-kernel cudaLaunchKernel calls of what they
 *     capture with one cudaGraphLaunch per captured segment.
 *
 * To keep the file to a few thousand events, a step shows at most two
 * microbatch groups and a few layer groups, each standing for its share of
 * the real microbatches and layers (durations scale, fractions stay).
 */
#include "simtrace.h"

#include "hardware.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define HOST_PID 4242
#define HOST_TID 4242

/* ---- a growing text buffer ---------------------------------------------------- */

typedef struct tbuf {
    char *p;
    size_t n, cap;
    int oom;
} tbuf;

static void bput(tbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bput(tbuf *b, const char *fmt, ...)
{
    va_list ap;
    int k;
    if (b->oom)
        return;
    for (;;) {
        size_t room = b->cap - b->n;
        va_start(ap, fmt);
        k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? room : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = 1;
            return;
        }
        if (b->p && (size_t)k < room) {
            b->n += (size_t)k;
            return;
        }
        {
            size_t want = b->cap ? b->cap * 2 : 65536;
            char *np;
            while (want < b->n + (size_t)k + 1)
                want *= 2;
            np = realloc(b->p, want);
            if (!np) {
                b->oom = 1;
                return;
            }
            b->p = np;
            b->cap = want;
        }
    }
}

/* ---- ops of one step ----------------------------------------------------------- */

enum optype {
    OP_KERNEL,  /* compute kernel on stream 7 */
    OP_EP,      /* EP dispatch/combine: hidden part under a partner kernel, exposed part serial */
    OP_SERIAL,  /* communication on its own stream, compute waits */
    OP_MEMCPY,  /* offload copy, compute waits */
    OP_IDLE     /* nothing runs (pipeline bubble) */
};

/* Module tags for CUDA graph capture. */
enum {
    TAG_NONE = 0,            /* never captured (DP, optimizer) */
    TAG_ATTN = SIM_CG_ATTN,
    TAG_MLP = SIM_CG_MLP,
    TAG_MOE = SIM_CG_MOE,
    TAG_ROUTER = SIM_CG_MOE_ROUTER,
    TAG_PREP = SIM_CG_MOE_PREPROCESS,
    TAG_SHARED = 1 << 8      /* shared expert: captured with the router on newer stacks */
};

typedef struct op {
    const char *name;
    const char *partner;     /* OP_EP: the compute kernel that runs under it */
    int type, stream;
    unsigned tag;
    double dur;              /* OP_EP: whole comm duration */
    double hidden;           /* OP_EP: the part under the partner */
    int graphed;
} op;

typedef struct oplist {
    op *v;
    size_t n, cap;
    int oom;
} oplist;

static void add(oplist *l, int type, int stream, unsigned tag, const char *name, double dur)
{
    op *o;
    if (l->oom || dur <= 0)
        return;
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 256;
        op *nv = realloc(l->v, nc * sizeof *nv);
        if (!nv) {
            l->oom = 1;
            return;
        }
        l->v = nv;
        l->cap = nc;
    }
    o = &l->v[l->n++];
    memset(o, 0, sizeof *o);
    o->type = type;
    o->stream = stream;
    o->tag = tag;
    o->name = name;
    o->dur = dur;
}

/* A dispatch or combine on the EP stream: `hidden` of it runs under the
 * compute kernel named `partner` (EP overlap). */
static void add_ep(oplist *l, const char *name, double dur, double hidden, const char *partner)
{
    if (dur <= 0)
        return;
    add(l, OP_EP, SIM_STREAM_EP, TAG_MOE, name, dur);
    if (!l->oom && l->n) {
        l->v[l->n - 1].hidden = hidden;
        l->v[l->n - 1].partner = partner;
    }
}

/* ---- kernel names ----------------------------------------------------------------- */

typedef struct names {
    char gemm_fwd[256], gemm_dgrad[256], gemm_wgrad[256];
    char grouped_fwd[320], grouped_dgrad[320], grouped_wgrad[320];
    char router[200], quant[200];
    const char *dispatch, *combine;
} names;

/* The block-scaled Blackwell GEMMs' kernel names, as CUTLASS prints them:
 * forward, dgrad, wgrad, and Transformer Engine's quantize kernel. */
static const char *const nvfp4_names[4] = {
    "cutlass3x_sm100_bstensorop_s256x128x256gemm_block_scaled_ue4m3xe2m1_ue4m3xe2m1_"
    "f32_bf16_bf16_256x128x256_2x1x1_0_tnn_align32_2sm_nvf4",
    "cutlass3x_sm100_bstensorop_s256x128x256gemm_block_scaled_ue4m3xe2m1_ue4m3xe2m1_"
    "f32_bf16_bf16_256x128x256_2x1x1_0_nnn_align32_2sm_nvf4",
    "cutlass3x_sm100_bstensorop_s256x128x128gemm_block_scaled_ue8m0xe4m3_ue8m0xe4m3_"
    "f32_bf16_bf16_256x128x128_2x1x1_0_ntn_align32_2sm_mxf8f6f4",
    "void transformer_engine::nvfp4::quantize_transpose_kernel<__nv_bfloat16, __nv_fp4_e2m1>(...)",
};
static const char *const mxfp8_names[4] = {
    "cutlass3x_sm100_bstensorop_s256x128x128gemm_block_scaled_ue8m0xe4m3_ue8m0xe4m3_"
    "f32_bf16_bf16_256x128x128_2x1x1_0_tnn_align32_2sm_mxf8f6f4",
    "cutlass3x_sm100_bstensorop_s256x128x128gemm_block_scaled_ue8m0xe4m3_ue8m0xe4m3_"
    "f32_bf16_bf16_256x128x128_2x1x1_0_nnn_align32_2sm_mxf8f6f4",
    "cutlass3x_sm100_bstensorop_s256x128x128gemm_block_scaled_ue8m0xe4m3_ue8m0xe4m3_"
    "f32_bf16_bf16_256x128x128_2x1x1_0_ntn_align32_2sm_mxf8f6f4",
    "void transformer_engine::mxfp8::quantize_mxfp8_kernel<__nv_bfloat16, __nv_fp8_e4m3, true, "
    "true>(...)",
};

static void fixed_names(names *nm, const char *const v[4])
{
    snprintf(nm->gemm_fwd, sizeof nm->gemm_fwd, "%s", v[0]);
    snprintf(nm->gemm_dgrad, sizeof nm->gemm_dgrad, "%s", v[1]);
    snprintf(nm->gemm_wgrad, sizeof nm->gemm_wgrad, "%s", v[2]);
    snprintf(nm->quant, sizeof nm->quant, "%s", v[3]);
}

/* cuBLAS's xmma GEMMs: forward (tn), dgrad (nn) and wgrad (nt), each with
 * its input types (fwd, then the two backward ones) and tile. */
static void xmma_names(names *nm, const char *sm, const char *fwd_types, const char *bwd_types,
                       const char *acc, const char *tile)
{
    static const char fmt[] = "%s_xmma_gemm_%s_%s_f32_%s_n_%s_execute_segment_k_off_kernel__5x_cublas";
    snprintf(nm->gemm_fwd, sizeof nm->gemm_fwd, fmt, sm, fwd_types, acc, "tn", tile);
    snprintf(nm->gemm_dgrad, sizeof nm->gemm_dgrad, fmt, sm, bwd_types, acc, "nn", tile);
    snprintf(nm->gemm_wgrad, sizeof nm->gemm_wgrad, fmt, sm, bwd_types, acc, "nt", tile);
}

static void gemm_names(const sim_cfg *c, const mt_gpu_spec *g, names *nm)
{
    int bw = g && !strcmp(g->arch, "blackwell");
    const char *sm = bw ? "sm100" : "sm90";
    const char *tile = bw ? "tilesize256x128x64_cluster2x1x1" : "tilesize128x128x64_warpgroupsize1x1x1";
    const char *tile8 = bw ? "tilesize256x128x128_cluster2x1x1" : "tilesize128x128x128_warpgroupsize1x1x1";
    int fp4 = c->fp4_recipe != 0 || c->fp4_format != 0;
    int fp8 = c->fp8_recipe != SIM_FP8R_NONE || c->fp8_format != SIM_FP8F_NONE;

    if (fp4 && bw) {
        fixed_names(nm, nvfp4_names);
    } else if (fp8 && c->fp8_recipe == SIM_FP8R_MXFP8 && bw) {
        fixed_names(nm, mxfp8_names);
    } else if (fp8 && c->fp8_recipe == SIM_FP8R_BLOCKWISE) {
        const char *t = bw ? "256x128_128x4_2x1_2cta" : "128x128_128x4_1x1";
        snprintf(nm->gemm_fwd, sizeof nm->gemm_fwd, "nvjet_tst_%s_v_bz_blockscale_TNT_fp8", t);
        snprintf(nm->gemm_dgrad, sizeof nm->gemm_dgrad, "nvjet_tst_%s_v_bz_blockscale_NNT_fp8", t);
        snprintf(nm->gemm_wgrad, sizeof nm->gemm_wgrad, "nvjet_tst_%s_v_bz_blockscale_NTT_fp8", t);
        snprintf(nm->quant, sizeof nm->quant,
                 "void transformer_engine::fp8_block_scaling::block_scaled_cast_transpose_kernel<"
                 "__nv_bfloat16, __nv_fp8_e4m3>(...)");
    } else if (fp8) {
        /* delayed / tensorwise; the hybrid format takes gradients in E5M2 */
        xmma_names(nm, sm, "e4m3bf16", c->fp8_format == SIM_FP8F_HYBRID ? "e5m2e4m3bf16" : "e4m3e4m3bf16",
                   "e4m3f32", tile8);
        snprintf(nm->quant, sizeof nm->quant,
                 "void transformer_engine::cast_transpose_fused_kernel<__nv_bfloat16, "
                 "__nv_fp8_e4m3>(...)");
    } else {
        xmma_names(nm, sm, "bf16bf16", "bf16bf16", "bf16f32", tile);
        nm->quant[0] = '\0';
    }
    /* grouped expert GEMMs: the same math, one launch over all local experts */
    snprintf(nm->grouped_fwd, sizeof nm->grouped_fwd, "%s_grouped_gemm", nm->gemm_fwd);
    snprintf(nm->grouped_dgrad, sizeof nm->grouped_dgrad, "%s_grouped_gemm", nm->gemm_dgrad);
    snprintf(nm->grouped_wgrad, sizeof nm->grouped_wgrad, "%s_grouped_gemm", nm->gemm_wgrad);
    /* the router stays FP32 */
    snprintf(nm->router, sizeof nm->router,
             "%s_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize64x64x32_execute_segment_k_off_kernel__5x_cublas",
             sm);
}

static void comm_names(const sim_cfg *c, const sim_breakdown *b, const mt_gpu_spec *g, names *nm)
{
    int backend = b->fallback ? b->fallback_backend
                              : c->moe_token_dispatcher_type == SIM_DISP_FLEX
                                    ? c->moe_flex_dispatcher_backend
                                    : SIM_BACKEND_NONE;
    int domain = c->nvlink_domain > 0 ? c->nvlink_domain : g ? g->nvlink_domain : 8;
    int span = c->expert_model_parallel_size * sim_etp(c);
    if (c->moe_token_dispatcher_type == SIM_DISP_ALLGATHER) {
        nm->dispatch = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
        nm->combine = "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
        return;
    }
    switch (c->moe_token_dispatcher_type == SIM_DISP_FLEX ? backend : SIM_BACKEND_NONE) {
    case SIM_BACKEND_DEEPEP:
        if (span <= domain) {
            nm->dispatch = "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, long*, "
                           "float*, int*, int*, int4 const*, float const*, long const*, ...)";
            nm->combine = "void deep_ep::intranode::combine<__nv_bfloat16, 8, 768, 4096>(...)";
        } else {
            nm->dispatch = "void deep_ep::internode::dispatch<false, 8, 4, 24, 8192, 16, 4>(int4*, "
                           "float*, long*, float*, ...)";
            nm->combine = "void deep_ep::internode::combine<false, 8, 4, 24, 4096, 16, 4>(...)";
        }
        return;
    case SIM_BACKEND_HYBRIDEP:
        nm->dispatch = "void hybrid_ep::dispatch_kernel<__nv_bfloat16, 8, 128, true>(...)";
        nm->combine = "void hybrid_ep::combine_kernel<__nv_bfloat16, 8, 128, true>(...)";
        return;
    case SIM_BACKEND_NCCLEP:
        nm->dispatch = "void nccl_ep::dispatch_kernel<__nv_bfloat16>(...)";
        nm->combine = "void nccl_ep::combine_kernel<__nv_bfloat16>(...)";
        return;
    default:
        nm->dispatch = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)";
        nm->combine = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)";
        return;
    }
}

/* ---- the trace ------------------------------------------------------------------- */

struct sim_trace {
    sim_cfg c;
    sim_breakdown b;
    const mt_gpu_spec *g;
    names nm;
    tbuf out;
    oplist ops;
    int steps, micro_groups, layer_groups, local_experts, first;
    long corr;
    double total;  /* the breakdown's components summed */
};

int sim_trace_wanted(const sim_cfg *c)
{
    return c->profile && c->use_pytorch_profiler && c->tensorboard_dir[0];
}

int sim_trace_in_window(const sim_cfg *c, int it)
{
    return sim_trace_wanted(c) && it >= c->profile_step_start && it < c->profile_step_end;
}

sim_trace *sim_trace_open(const sim_cfg *c, const sim_breakdown *b)
{
    sim_trace *t;
    int pp = c->pipeline_model_parallel_size > 0 ? c->pipeline_model_parallel_size : 1;
    int dp = sim_dp(c) > 0 ? sim_dp(c) : 1, mbs = c->micro_batch_size > 0 ? c->micro_batch_size : 1;
    int layers = c->num_layers / pp > 0 ? c->num_layers / pp : 1;
    int lo, hi, window, lmax;
    long micro;
    if (!sim_trace_wanted(c))
        return NULL;
    t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->c = *c;
    t->b = *b;
    t->g = sim_gpu(c);
    gemm_names(c, t->g, &t->nm);
    comm_names(c, b, t->g, &t->nm);
    lo = c->profile_step_start > 1 ? c->profile_step_start : 1;
    hi = c->profile_step_end - 1 < c->train_iters ? c->profile_step_end - 1 : c->train_iters;
    window = hi >= lo ? hi - lo + 1 : 1;
    micro = c->global_batch_size / ((long)mbs * dp);
    /* keep the file to a few thousand events whatever the window */
    t->micro_groups = micro >= 2 && window <= 6 ? 2 : 1;
    lmax = 12 / window;
    if (lmax < 1)
        lmax = 1;
    if (lmax > 6)
        lmax = 6;
    t->layer_groups = layers < lmax ? layers : lmax;
    t->local_experts = c->num_experts > 0 && c->expert_model_parallel_size > 0
                           ? c->num_experts / c->expert_model_parallel_size
                           : 0;
    t->total = b->compute + b->ep_exposed + b->tp_comm + b->cp_comm + b->dp_exposed + b->pp_bubble +
               b->host + b->offload + b->optimizer;
    t->first = 1;
    bput(&t->out, "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [{\"id\": 0, \"name\": "
                  "\"NVIDIA %s\", \"numSms\": %d}],\n  \"distributedInfo\": {\"backend\": \"nccl\", "
                  "\"rank\": 0, \"world_size\": %d},\n  \"traceEvents\": [\n",
         c->gpu, t->g ? t->g->sms : 0, sim_world(c));
    bput(&t->out, "    {\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, \"args\": {\"name\": "
                  "\"GPU 0\"}},\n");
    bput(&t->out, "    {\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"args\": {\"name\": "
                  "\"python3 pretrain_gpt.py\"}}",
         HOST_PID);
    t->first = 0;
    return t;
}

/* What one pass's kernels are built from: its trace, names, kernel choices and comm sizes. */
typedef struct pass_kit {
    const sim_cfg *c;
    const names *nm;
    oplist *l;
    int dense, lowp, shared, nexp;
    const char *gf, *ge, *partner;
    double ep_op, hid, tp_op, cp_op;
} pass_kit;

#define K(tag, name, w) add(l, OP_KERNEL, SIM_STREAM_COMPUTE, tag, name, (w))

/* The forward pass's kernels over a layer group, with relative weights. */
static void pass_fwd_ops(const pass_kit *p)
{
    const sim_cfg *c = p->c;
    const names *nm = p->nm;
    oplist *l = p->l;
    const char *gf = p->gf, *ge = p->ge, *partner = p->partner;
    double ep_op = p->ep_op, hid = p->hid, tp_op = p->tp_op, cp_op = p->cp_op;
    int lowp = p->lowp, shared = p->shared, dense = p->dense, nexp = p->nexp, i;
    K(TAG_ATTN, "void transformer_engine::normalization::rmsnorm_fwd_tuned_kernel<...>", 1.5);
    if (lowp)
        K(TAG_ATTN, nm->quant, 1.0);
    if (tp_op > 0)
        add(l, OP_SERIAL, SIM_STREAM_TP, TAG_ATTN,
            c->tp_comm_overlap ? "userbuffers_fp16_sum_inplace_gpu_rr_ag"
                               : "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            tp_op / 2);
    K(TAG_ATTN, gf, 9);
    if (cp_op > 0)
        add(l, OP_SERIAL, SIM_STREAM_CP, TAG_ATTN,
            "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", cp_op);
    K(TAG_ATTN, "flash_fwd_kernel", 16);
    K(TAG_ATTN, gf, 6);
    if (tp_op > 0)
        add(l, OP_SERIAL, SIM_STREAM_TP, TAG_ATTN,
            c->tp_comm_overlap
                ? "userbuffers_fp16_sum_inplace_gpu_rr_rs"
                : "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            tp_op / 2);
    K(TAG_ATTN, "void transformer_engine::normalization::rmsnorm_fwd_tuned_kernel<...>", 1.5);
    if (lowp)
        K(TAG_ATTN, nm->quant, 1.0);
    if (dense) {
        K(TAG_MLP, gf, 25);
        K(TAG_MLP, "void transformer_engine::swiglu_kernel<__nv_bfloat16>(...)", 3);
        K(TAG_MLP, gf, 25);
        return;
    }
    K(TAG_ROUTER, nm->router, 1.5);
    if (c->moe_router_fusion) {
        K(TAG_ROUTER, "void transformer_engine::fused_topk_with_score_function_forward_kernel<float>(...)", 0.5);
    } else {
        K(TAG_ROUTER, "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float>(...)", 0.7);
        K(TAG_ROUTER, "void at::native::sbtopk::gatherTopK<float, unsigned int, 2, false>(...)", 0.8);
    }
    K(TAG_PREP, "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<long, at::native::func_wrapper<long, at::native::sum_functor<long, long, long>>, unsigned int, long, 4>>(...)", 0.5);
    K(TAG_MOE, c->moe_permute_fusion ? "void transformer_engine::moe_permute_kernel<__nv_bfloat16, float, true>(...)"
                                     : "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, true>(...)", 3);
    add_ep(l, nm->dispatch, ep_op, hid, partner);
    for (i = 0; i < nexp; i++)
        K(TAG_MOE, ge, 21.0 / nexp);
    K(TAG_MOE, "void transformer_engine::swiglu_kernel<__nv_bfloat16>(...)", 3);
    for (i = 0; i < nexp; i++)
        K(TAG_MOE, ge, 21.0 / nexp);
    add_ep(l, nm->combine, ep_op, hid, partner);
    K(TAG_MOE, c->moe_permute_fusion ? "void transformer_engine::moe_unpermute_kernel<__nv_bfloat16, float, true>(...)"
                                     : "void at::native::index_put_with_sort_kernel<c10::BFloat16>(...)", 3);
    if (shared)
        K(TAG_SHARED, nm->gemm_fwd, 9);
}

/* The backward pass's kernels: the same layer in reverse, GEMMs as dgrad + wgrad. */
static void pass_bwd_ops(const pass_kit *p)
{
    const sim_cfg *c = p->c;
    const names *nm = p->nm;
    oplist *l = p->l;
    const char *ge = p->ge, *partner = p->partner;
    double ep_op = p->ep_op, hid = p->hid, tp_op = p->tp_op, cp_op = p->cp_op;
    int lowp = p->lowp, shared = p->shared, dense = p->dense, nexp = p->nexp, i;
    if (dense) {
        K(TAG_MLP, nm->gemm_dgrad, 25);
        K(TAG_MLP, nm->gemm_wgrad, 25);
        K(TAG_MLP, "void transformer_engine::dswiglu_kernel<__nv_bfloat16>(...)", 3);
        K(TAG_MLP, nm->gemm_dgrad, 25);
        K(TAG_MLP, nm->gemm_wgrad, 25);
    } else {
        if (shared) {
            K(TAG_SHARED, nm->gemm_dgrad, 9);
            K(TAG_SHARED, nm->gemm_wgrad, 9);
        }
        K(TAG_MOE, c->moe_permute_fusion ? "void transformer_engine::moe_unpermute_bwd_kernel<__nv_bfloat16, float, true>(...)"
                                         : "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, true>(...)", 3);
        add_ep(l, nm->dispatch, ep_op, hid, partner);
        for (i = 0; i < nexp; i++)
            K(TAG_MOE, ge, 21.0 / nexp);
        if (!c->delay_wgrad_compute)
            for (i = 0; i < nexp; i++)
                K(TAG_MOE, c->moe_grouped_gemm ? nm->grouped_wgrad : nm->gemm_wgrad, 21.0 / nexp);
        K(TAG_MOE, "void transformer_engine::dswiglu_kernel<__nv_bfloat16>(...)", 3);
        for (i = 0; i < nexp; i++)
            K(TAG_MOE, ge, 21.0 / nexp);
        if (!c->delay_wgrad_compute)
            for (i = 0; i < nexp; i++)
                K(TAG_MOE, c->moe_grouped_gemm ? nm->grouped_wgrad : nm->gemm_wgrad, 21.0 / nexp);
        add_ep(l, nm->combine, ep_op, hid, partner);
        /* delayed weight gradients run after the combine was issued */
        if (c->delay_wgrad_compute)
            for (i = 0; i < 2 * nexp; i++)
                K(TAG_MOE, c->moe_grouped_gemm ? nm->grouped_wgrad : nm->gemm_wgrad, 21.0 / nexp);
        K(TAG_MOE, c->moe_permute_fusion ? "void transformer_engine::moe_permute_bwd_kernel<__nv_bfloat16, float, true>(...)"
                                         : "void at::native::index_put_with_sort_kernel<c10::BFloat16>(...)", 3);
        K(TAG_ROUTER, nm->router, 1.5);
        K(TAG_ROUTER, c->moe_router_fusion ? "void transformer_engine::fused_topk_with_score_function_backward_kernel<float>(...)"
                                           : "void at::native::(anonymous namespace)::cunn_SoftMaxBackward<4, float, float, float>(...)",
          c->moe_router_fusion ? 0.5 : 1.5);
        K(TAG_PREP, "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<long>, std::array<char*, 1ul>>(...)", 0.5);
    }
    K(TAG_ATTN, "void transformer_engine::normalization::rmsnorm_bwd_tuned_kernel<...>", 1.5);
    if (tp_op > 0)
        add(l, OP_SERIAL, SIM_STREAM_TP, TAG_ATTN,
            c->tp_comm_overlap ? "userbuffers_fp16_sum_inplace_gpu_rr_ag"
                               : "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            tp_op / 2);
    K(TAG_ATTN, nm->gemm_dgrad, 6);
    K(TAG_ATTN, nm->gemm_wgrad, 6);
    if (cp_op > 0)
        add(l, OP_SERIAL, SIM_STREAM_CP, TAG_ATTN,
            "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", cp_op);
    K(TAG_ATTN, "flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel", 16);
    K(TAG_ATTN, nm->gemm_dgrad, 9);
    K(TAG_ATTN, nm->gemm_wgrad, 9);
    if (tp_op > 0)
        add(l, OP_SERIAL, SIM_STREAM_TP, TAG_ATTN,
            c->tp_comm_overlap
                ? "userbuffers_fp16_sum_inplace_gpu_rr_rs"
                : "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            tp_op / 2);
    K(TAG_ATTN, "void transformer_engine::normalization::rmsnorm_bwd_tuned_kernel<...>", 1.5);
    if (lowp)
        K(TAG_ATTN, nm->quant, 2.0);
}
#undef K

/* Scales the kernels added since start to the pass's compute budget, less the hidden EP time. */
static void pass_scale(oplist *l, size_t start, double cp_budget, double hid)
{
    double unit, wsum = 0;
    int n_ep = 0;
    size_t j;
    if (l->oom)
        return;
    for (j = start; j < l->n; j++) {
        if (l->v[j].type == OP_KERNEL)
            wsum += l->v[j].dur;
        else if (l->v[j].type == OP_EP)
            n_ep++;
    }
    unit = wsum > 0 ? (cp_budget - n_ep * hid) / wsum : 0;
    if (unit < 0)
        unit = 0;
    for (j = start; j < l->n; j++)
        if (l->v[j].type == OP_KERNEL)
            l->v[j].dur *= unit;
}

/* Builds one forward (bwd = 0) or backward pass over a layer group. */
static void pass_ops(sim_trace *t, int bwd, int dense, double cp_budget, double ep_op, double hid_op,
                     double tp_op, double cp_op)
{
    const sim_cfg *c = &t->c;
    const names *nm = &t->nm;
    oplist *l = &t->ops;
    int lowp = nm->quant[0] != '\0';
    int shared = c->moe_shared_expert_intermediate_size > 0 && !dense;
    double hid = 0;
    const char *gf = bwd ? nm->gemm_dgrad : nm->gemm_fwd;
    const char *ge = c->moe_grouped_gemm ? (bwd ? nm->grouped_dgrad : nm->grouped_fwd) : gf;
    const char *partner = c->moe_grouped_gemm ? (bwd ? nm->grouped_fwd : nm->grouped_wgrad)
                                              : (bwd ? nm->gemm_fwd : nm->gemm_wgrad);
    int nexp = !c->moe_grouped_gemm && t->local_experts > 1 ? (t->local_experts < 4 ? t->local_experts : 4) : 1;
    size_t start = l->n;
    pass_kit p;
    /* EP comm: the hidden part of each of the two ops runs under a partner
     * kernel taken from this pass's compute */
    if (!dense && ep_op > 0)
        hid = hid_op;
    /* kernels are added with their relative weights and scaled to the
     * pass's compute budget at the end (pass_scale) */
    p.c = c, p.nm = nm, p.l = l, p.dense = dense, p.lowp = lowp, p.shared = shared;
    p.nexp = nexp, p.gf = gf, p.ge = ge, p.partner = partner;
    p.ep_op = ep_op, p.hid = hid, p.tp_op = tp_op, p.cp_op = cp_op;
    if (!bwd)
        pass_fwd_ops(&p);
    else
        pass_bwd_ops(&p);
    pass_scale(l, start, cp_budget, hid);
}

/* Whether CUDA graphs capture an op with this tag. */
static int captured(const sim_cfg *c, unsigned tag)
{
    unsigned m = c->cuda_graph_modules;
    if (tag == TAG_NONE)
        return 0;
    switch (c->cuda_graph_impl) {
    case SIM_CG_FULL_ITERATION:
        return 1;
    case SIM_CG_TE:
    case SIM_CG_LOCAL:
        if (!m)
            return 1; /* no module list: whole layers */
        if (tag == TAG_SHARED)
            return (m & (SIM_CG_MOE_ROUTER | SIM_CG_MOE)) && (c->stack & SIM_STACK_GRAPH_SHARED_EXPERT);
        if (m & SIM_CG_MOE)
            m |= SIM_CG_MOE_ROUTER | SIM_CG_MOE_PREPROCESS;
        return (tag & m) != 0;
    default:
        return 0;
    }
}

static void emit_kernel(sim_trace *t, const char *name, int stream, double ts, double dur, long corr,
                        const char *cat)
{
    bput(&t->out,
         ",\n    {\"ph\": \"X\", \"cat\": \"%s\", \"name\": \"%s\", \"pid\": 0, \"tid\": %d, "
         "\"ts\": %.3f, \"dur\": %.3f, \"args\": {\"device\": 0, \"stream\": %d, \"correlation\": %ld}}",
         cat, name, stream, ts, dur, stream, corr);
}

static void emit_runtime(sim_trace *t, const char *name, double ts, double dur, long corr)
{
    bput(&t->out,
         ",\n    {\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"%s\", \"pid\": %d, \"tid\": "
         "%d, \"ts\": %.3f, \"dur\": %.3f, \"args\": {\"correlation\": %ld}}",
         name, HOST_PID, HOST_TID, ts, dur, corr);
}

/* The step's ops: every pass over the microbatch and layer groups, then DP, offload, optimizer. */
static void step_ops(sim_trace *t, double k, double compute, double ep, double ex_frac, double tp,
                     double cp)
{
    const sim_cfg *c = &t->c;
    const sim_breakdown *b = &t->b;
    double pass_fwd, pass_bwd, ep_op, tp_op, cp_op, hid_pair, hid_f, hid_b;
    int M = t->micro_groups, L = t->layer_groups, m, l, dense0, moe_groups;
    size_t i;

    t->ops.n = 0;
    pass_fwd = compute / 3.0 / (M * L);
    pass_bwd = 2.0 * compute / 3.0 / (M * L);
    /* the first layer group stands for the leading dense layers, if any */
    dense0 = c->num_experts <= 0 || (c->first_k_dense > 0 && L > 1);
    moe_groups = c->num_experts <= 0 ? 0 : L - (dense0 ? 1 : 0);
    /* dispatch + combine, forward and backward, over the MoE layer groups */
    ep_op = moe_groups > 0 ? ep / (4.0 * M * moe_groups) : 0;
    tp_op = tp / (2.0 * M * L);
    cp_op = cp / (2.0 * M * L);
    /* the hidden EP time of a forward+backward pair, shared in proportion to
     * the passes' compute (backward has twice the forward's), within what
     * each op and each pass can hold */
    hid_pair = moe_groups > 0 ? (1 - ex_frac) * ep / (M * moe_groups) : 0;
    hid_b = hid_pair / 3.0;
    if (hid_b > ep_op)
        hid_b = ep_op;
    if (2 * hid_b > 0.9 * pass_bwd)
        hid_b = 0.45 * pass_bwd;
    hid_f = (hid_pair - 2 * hid_b) / 2;
    if (hid_f > ep_op)
        hid_f = ep_op;
    if (2 * hid_f > 0.9 * pass_fwd)
        hid_f = 0.45 * pass_fwd;
    if (hid_f < 0)
        hid_f = 0;
    for (m = 0; m < M; m++)
        for (l = 0; l < L; l++)
            pass_ops(t, 0, c->num_experts <= 0 || (l == 0 && dense0), pass_fwd, ep_op,
                     hid_f, tp_op, cp_op);
    for (m = 0; m < M; m++)
        for (l = L - 1; l >= 0; l--)
            pass_ops(t, 1, c->num_experts <= 0 || (l == 0 && dense0), pass_bwd, ep_op,
                     hid_b, tp_op, cp_op);
    if (b->dp_exposed > 0) {
        add(&t->ops, OP_SERIAL, SIM_STREAM_DP, TAG_NONE,
            "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            0.6 * b->dp_exposed * k);
        add(&t->ops, OP_SERIAL, SIM_STREAM_DP, TAG_NONE,
            "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            0.4 * b->dp_exposed * k);
    }
    if (b->offload > 0) {
        add(&t->ops, OP_MEMCPY, SIM_STREAM_MEMCPY, TAG_NONE, "Memcpy DtoH (Device -> Pinned)",
            0.5 * b->offload * k);
        add(&t->ops, OP_MEMCPY, SIM_STREAM_MEMCPY, TAG_NONE, "Memcpy HtoD (Pinned -> Device)",
            0.5 * b->offload * k);
    }
    for (i = 0; i < 4 && b->optimizer > 0; i++)
        add(&t->ops, OP_KERNEL, SIM_STREAM_COMPUTE, TAG_NONE,
            "void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float, float, float>, "
            "float, float, float, float, float, float, adamMode_t, float>(...)",
            0.25 * b->optimizer * k);
}

/* Launches on the host: every individually launched kernel and every graph; marks ops graphed. */
static int step_launches(sim_trace *t, int replay)
{
    const sim_cfg *c = &t->c;
    int launches = 0, in_graph = 0;
    size_t i;
    for (i = 0; i < t->ops.n; i++) {
        op *o = &t->ops.v[i];
        o->graphed = o->type != OP_IDLE && o->type != OP_MEMCPY && replay && captured(c, o->tag);
        if (o->type == OP_IDLE)
            continue;
        if (o->graphed) {
            if (!in_graph)
                launches++;
            in_graph = 1;
        } else {
            launches++;
            if (o->type == OP_EP && o->partner && o->hidden > 0)
                launches++;
            in_graph = 0;
        }
    }
    return launches;
}

/* Writes the step's ops as trace events from start_s on, gap microseconds of host time apart. */
static void step_emit(sim_trace *t, int it, double start_s, double T, double bubble, double gap)
{
    double tcur;
    int in_graph;
    long graph_corr = 0;
    size_t i;

    tcur = start_s * 1e6;
    bput(&t->out,
         ",\n    {\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#%d\", "
         "\"pid\": %d, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, \"args\": {}}",
         it, HOST_PID, HOST_TID, tcur, T);
    tcur += bubble / 2;
    in_graph = 0;
    for (i = 0; i < t->ops.n; i++) {
        op *o = &t->ops.v[i];
        long corr;
        if (o->graphed) {
            if (!in_graph) {
                graph_corr = ++t->corr;
                tcur += gap;
                emit_runtime(t, "cudaGraphLaunch", tcur - (gap > 0 ? gap : 6.0),
                             gap > 0 ? 0.9 * gap : 5.0, graph_corr);
            }
            in_graph = 1;
            corr = graph_corr;
        } else {
            in_graph = 0;
            corr = ++t->corr;
            tcur += gap;
            emit_runtime(t, o->type == OP_MEMCPY ? "cudaMemcpyAsync" : "cudaLaunchKernel",
                         tcur - (gap > 0 ? gap : 5.0), gap > 0 ? 0.9 * gap : 4.0, corr);
        }
        switch (o->type) {
        case OP_KERNEL:
            emit_kernel(t, o->name, o->stream, tcur, o->dur, corr, "kernel");
            tcur += o->dur;
            break;
        case OP_SERIAL:
            emit_kernel(t, o->name, o->stream, tcur, o->dur, corr, "kernel");
            tcur += o->dur;
            break;
        case OP_MEMCPY:
            emit_kernel(t, o->name, o->stream, tcur, o->dur, corr, "gpu_memcpy");
            tcur += o->dur;
            break;
        case OP_EP:
            emit_kernel(t, o->name, o->stream, tcur, o->dur, corr, "kernel");
            if (o->partner && o->hidden > 0) {
                long pc = corr;
                if (!o->graphed) {
                    pc = ++t->corr;
                    emit_runtime(t, "cudaLaunchKernel", tcur - 3.0, 2.5, pc);
                }
                emit_kernel(t, o->partner, SIM_STREAM_COMPUTE, tcur, o->hidden, pc, "kernel");
            }
            tcur += o->dur;
            break;
        default:
            tcur += o->dur;
            break;
        }
    }
}

void sim_trace_step(sim_trace *t, int it, double start_s, double dur_s)
{
    const sim_cfg *c;
    const sim_breakdown *b;
    double k, T, compute, ep, ex_frac, tp, cp, host, gap, bubble;
    int launches, replay;
    if (!t || dur_s <= 0)
        return;
    c = &t->c;
    b = &t->b;
    /* graphs exist only once captured, at step warm-up + 1 */
    replay = c->cuda_graph_impl != SIM_CG_NONE && it > c->cuda_graph_warmup_steps + 1;
    T = dur_s * 1e6; /* microseconds */
    k = t->total > 0 ? T / t->total : 0;
    compute = (b->compute > 0 ? b->compute : (t->total > 0 ? 0 : 0.6 * dur_s)) * (t->total > 0 ? k : 1e6);
    ep = b->ep_comm * k;
    ex_frac = b->ep_comm > 0 ? b->ep_exposed / b->ep_comm : 1;
    if (ex_frac < 0)
        ex_frac = 0;
    if (ex_frac > 1)
        ex_frac = 1;
    tp = b->tp_comm * k;
    cp = b->cp_comm * k;
    host = b->host * k;
    bubble = b->pp_bubble * k;

    /* ---- the step's ops ---- */
    step_ops(t, k, compute, ep, ex_frac, tp, cp);
    if (t->ops.oom)
        return;

    /* ---- launches, then the layout ---- */
    launches = step_launches(t, replay);
    gap = launches > 0 ? host / launches : 0;
    step_emit(t, it, start_s, T, bubble, gap);
    t->steps++;
}

/* mkdir -p */
static int make_dirs(const char *path)
{
    char buf[SIM_PATH_MAX + 1];
    size_t i, n = strlen(path);
    if (n >= sizeof buf)
        return -1;
    memcpy(buf, path, n + 1);
    for (i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == '\0') {
            char ch = buf[i];
            buf[i] = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return -1;
            buf[i] = ch;
        }
    }
    return 0;
}

int sim_trace_close(sim_trace *t, char *path, size_t n, char *err, size_t errlen)
{
    FILE *f;
    int rc = 0;
    if (!t)
        return 0;
    if (!t->steps) {
        rc = 0;
        goto out;
    }
    /* the noise-free breakdown the timeline was laid out from (seconds per
     * step), for checking a trace analysis against the model */
    bput(&t->out,
         "\n  ],\n  \"traceName\": \"trace_rank0.json\",\n  \"moetuneSim\": {\"step_s\": %.9g, "
         "\"compute\": %.9g, \"ep_comm\": %.9g, \"ep_exposed\": %.9g, \"tp_comm\": %.9g, "
         "\"cp_comm\": %.9g, \"dp_exposed\": %.9g, \"pp_bubble\": %.9g, \"host\": %.9g, "
         "\"offload\": %.9g, \"optimizer\": %.9g, \"steps\": %d}\n}\n",
         t->b.step_s, t->b.compute, t->b.ep_comm, t->b.ep_exposed, t->b.tp_comm, t->b.cp_comm,
         t->b.dp_exposed, t->b.pp_bubble, t->b.host, t->b.offload, t->b.optimizer, t->steps);
    if (t->out.oom || t->ops.oom) {
        snprintf(err, errlen, "out of memory building the trace");
        rc = -1;
        goto out;
    }
    if (make_dirs(t->c.tensorboard_dir)) {
        snprintf(err, errlen, "cannot create %s: %s", t->c.tensorboard_dir, strerror(errno));
        rc = -1;
        goto out;
    }
    if ((size_t)snprintf(path, n, "%s/trace_rank0.json", t->c.tensorboard_dir) >= n) {
        snprintf(err, errlen, "trace path too long");
        rc = -1;
        goto out;
    }
    f = fopen(path, "w");
    if (!f || fwrite(t->out.p, 1, t->out.n, f) != t->out.n) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        if (f)
            fclose(f);
        rc = -1;
        goto out;
    }
    if (fclose(f) != 0) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        rc = -1;
        goto out;
    }
    rc = 1;
out:
    free(t->out.p);
    free(t->ops.v);
    free(t);
    return rc;
}

void sim_trace_discard(sim_trace *t)
{
    if (!t)
        return;
    free(t->out.p);
    free(t->ops.v);
    free(t);
}
