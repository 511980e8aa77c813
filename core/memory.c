#include "memory.h"

#include "layout.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GB 1e9

/* ---- named constants ------------------------------------------------------------------------
 * Bytes per element.  Megatron trains with BF16 parameters and activations; with --bf16 and the
 * default --main-grads-dtype fp32 it sets accumulate_allreduce_grads_in_fp32, so the DDP grad
 * buffer is FP32 (shared/facts/upstream/megatron-flags-main.tsv: main_grads_dtype fp32,
 * grad_reduce_in_bf16 False).  Adam keeps FP32 master weights and two FP32 moments unless the
 * precision-aware optimizer is given other dtypes (exp_avg_dtype, exp_avg_sq_dtype,
 * main_params_dtype). */
#define BYTES_BF16 2.0
#define BYTES_FP32 4.0
/* A linear layer's input saved for its weight gradient under FP8 (E4M3, one byte; MXFP8 adds
 * one E8M0 scale per 32 values, blockwise one FP32 scale per 128) and NVFP4 (4 bits plus one
 * E4M3 scale per 16 values). */
#define BYTES_FP8 1.0
#define BYTES_MXFP8 (1.0 + 1.0 / 32)
#define BYTES_FP8_BLOCK (1.0 + 4.0 / 128)
#define BYTES_NVFP4 (0.5 + 1.0 / 16)
/* Megatron pads the vocabulary to a multiple of --make-vocab-size-divisible-by (default 128,
 * read from the config when it has the key) times TP. */
#define VOCAB_DIVISOR 128
/* The loss stage: the output layer's BF16 logits and vocab_parallel_cross_entropy's FP32 copy
 * (exp'd in place and saved for backward) coexist while the loss runs; after it the FP32
 * softmax stays until that microbatch's backward.  Each MTP head saves its own. */
#define LOGIT_SAVED_BYTES BYTES_FP32
#define LOGIT_TRANSIENT_BYTES BYTES_BF16
/* Memory outside PyTorch's caching allocator on every rank: the CUDA context with cuBLAS /
 * cuDNN workspaces (~0.6 GB on Hopper) and NCCL's communicator buffers for the TP, DP, EP, PP
 * and expert-DP groups (4 MiB per channel and peer, ~0.6 GB for a few groups). */
#define CONTEXT_GB 1.2
/* Registered communication buffers of the flex dispatcher backends, sized by their default
 * buffer hints for hidden sizes of a few thousand (DeepEP: NVLink + RDMA buffers of ~1 GB
 * each; HybridEP: its preallocated dispatch/combine staging buffers; NCCL EP: its window). */
#define DEEPEP_BUFFER_GB 2.0
#define HYBRIDEP_BUFFER_GB 1.5
#define NCCLEP_BUFFER_GB 1.0

static double num(const mt_kv *kv, const char *k, double def)
{
    const char *v = mt_kv_get(kv, k);
    char *end;
    double x;
    if (!v || !*v)
        return def;
    x = strtod(v, &end);
    return end == v ? def : x;
}

static int on(const mt_kv *kv, const char *k)
{
    const char *v = mt_kv_get(kv, k);
    return v && !strcmp(v, "true");
}

static int is(const mt_kv *kv, const char *k, const char *want)
{
    const char *v = mt_kv_get(kv, k);
    return v && !strcmp(v, want);
}

/* word appears in kv[k], a list separated by spaces or commas. */
static int has(const mt_kv *kv, const char *k, const char *word)
{
    const char *v = mt_kv_get(kv, k), *p;
    size_t n = strlen(word);
    for (p = v; p && (p = strstr(p, word)); p += n)
        if ((p == v || p[-1] == ' ' || p[-1] == ',') && (p[n] == ' ' || p[n] == ',' || !p[n]))
            return 1;
    return 0;
}

/* Bytes of one optimizer-state or master-weight element for a dtype name. */
static double dtype_bytes(const char *name, double def)
{
    if (!name || !*name)
        return def;
    if (!strcmp(name, "fp32"))
        return 4;
    if (!strcmp(name, "fp16") || !strcmp(name, "bf16"))
        return 2;
    if (!strcmp(name, "fp8"))
        return 1;
    return def;
}

/* moe_layer_freq into is_moe[0..L-1]: an integer k (every k-th layer, from
 * layer 0) or Megatron's pattern "([0]*3+[1]*58)" / "[1,0,1,...]". */
static void moe_pattern(const char *freq, int L, unsigned char *is_moe)
{
    int i, n = 0;
    const char *p = freq;
    for (i = 0; i < L; i++)
        is_moe[i] = 1;
    if (!freq || !*freq)
        return;
    while (*p == ' ' || *p == '(')
        p++;
    if (*p >= '0' && *p <= '9') {
        long k = strtol(p, NULL, 10);
        for (i = 0; i < L; i++)
            is_moe[i] = k > 0 && i % k == 0;
        return;
    }
    while (*p && n < L) {
        unsigned char vals[256];
        int nv = 0, rep = 1, r, j;
        while (*p && *p != '[')
            p++;
        if (!*p)
            break;
        for (p++; *p && *p != ']'; p++)
            if ((*p == '0' || *p == '1') && nv < 256)
                vals[nv++] = (unsigned char)(*p - '0');
        if (*p == ']')
            p++;
        while (*p == ' ')
            p++;
        if (*p == '*') {
            rep = (int)strtol(p + 1, (char **)&p, 10);
            if (rep < 0)
                rep = 0;
        }
        for (r = 0; r < rep && n < L; r++)
            for (j = 0; j < nv && n < L; j++)
                is_moe[n++] = vals[j];
    }
}

/* One virtual pipeline stage (model chunk). */
typedef struct chunk {
    double dense, moe, mtp; /* layers of each kind */
    int embed, loss;
    double act, logits; /* saved bytes per microbatch */
    double peak_layer;  /* the largest single layer's saved bytes */
} chunk;

/* Everything per layer that does not depend on the stage. */
typedef struct shape {
    double h, heads, groups, kvc, E, topk, fm, fs, fd, V;
    double s, b, gbs, tp, pp, cp, ep, etp, world;
    double T, Ts, sp;  /* tokens per rank (after CP), sequence-sharded tokens, SP divisor */
    double ab, ab_act; /* saved linear-input bytes (FP8/FP4 or BF16) */
    double rb;         /* router logits bytes */
    double cf;         /* expert capacity factor (drop-and-pad), 1 when dropless */
    int mla, qk_norm, unfused_attn;
    double ql, kl, qk, rope, vd;
} shape;

/* Parameters (elements on this rank) of one attention block. */
static double attn_params(const shape *m)
{
    double h = m->h, heads = m->heads;
    if (m->mla)
        return (m->ql > 0 ? h * m->ql + m->ql * heads * (m->qk + m->rope)
                          : h * heads * (m->qk + m->rope)) +
               h * (m->kl + m->rope) + m->kl * heads * (m->qk + m->vd) + heads * m->vd * h;
    return h * heads * m->kvc + 2 * h * m->groups * m->kvc + heads * m->kvc * h;
}

/* Recompute and offload choices, read once. */
typedef struct saving {
    int rc_norm, rc_core_attn, rc_mla_up, rc_moe_act, rc_moe, rc_mlp, rc_shared;
    double off_frac;
    int off_attn_norm, off_qkv, off_core_attn, off_attn_proj, off_mlp_norm, off_fc1, off_act;
} saving;

/* Saved activation bytes of one layer and microbatch on this rank.  kind:
 * 0 dense, 1 MoE, 2 MTP (an MoE layer plus its input projection). */
static double layer_act(const shape *m, const saving *sv, int kind)
{
    double T = m->T, Ts = m->Ts, h = m->h, tp = m->tp, keep = 1 - sv->off_frac;
    double norm_in_a, norm_out_a, norm_in_m, norm_out_m, q, k, v, o, lse, extra = 0;
    double bytes;

    /* The two norms save their inputs (the residual stream, sequence-sharded
     * under SP); their outputs are saved by the next linear (attention: in
     * FP8 when it is FP8) or by the router and dispatcher (MoE: BF16). */
    norm_in_a = Ts * h * BYTES_BF16;
    norm_in_m = Ts * h * BYTES_BF16;
    norm_out_a = Ts * h * m->ab;
    norm_out_m = Ts * h * (kind == 0 ? m->ab : BYTES_BF16);
    if (sv->rc_norm)
        norm_out_a = norm_out_m = 0; /* recomputed before the linear's backward */
    if (sv->off_attn_norm)
        norm_in_a *= keep;
    if (sv->off_mlp_norm)
        norm_in_m *= keep;
    if (sv->off_qkv)
        norm_out_a *= keep;

    /* Core attention (heads split over TP, the whole local sequence): the
     * fused kernels save q, k, v, the output and the softmax statistics. */
    if (m->mla) {
        double lat = Ts * (m->ql + m->kl + m->rope) * BYTES_BF16 * 2; /* latent norm in + out */
        q = T * m->heads / tp * (m->qk + m->rope) * BYTES_BF16;
        k = q;
        v = T * m->heads / tp * m->vd * BYTES_BF16;
        o = v;
        extra += lat;
        if (sv->rc_mla_up)
            q = k = v = 0; /* the up-projections and RoPE are recomputed */
    } else {
        q = T * m->heads / tp * m->kvc * BYTES_BF16;
        k = v = T * m->groups / tp * m->kvc * BYTES_BF16;
        o = q;
        if (m->qk_norm) /* the per-head q/k norms save their inputs */
            extra += (m->heads + m->groups) / tp * T * m->kvc * BYTES_BF16;
    }
    lse = T * m->heads / tp * BYTES_FP32;
    if (m->unfused_attn && !sv->rc_core_attn) /* the softmax probabilities */
        extra += T * m->heads / tp * (m->s / m->cp) * BYTES_BF16;
    if (sv->rc_core_attn)
        lse = 0; /* q, k, v are the checkpoint's inputs and o feeds the projection: kept */
    if (sv->off_core_attn)
        q *= keep, k *= keep, v *= keep;
    /* The output projection saves its own FP8 copy of o (o itself is held
     * by the attention backward). */
    if (m->ab < BYTES_BF16)
        extra += (m->mla ? T * m->heads / tp * m->vd : T * m->heads / tp * m->kvc) * m->ab *
                 (sv->off_attn_proj ? keep : 1);
    bytes = norm_in_a + norm_out_a + norm_in_m + norm_out_m + q + k + v + o + lse + extra;

    if (kind == 0) {
        /* dense SwiGLU MLP, TP-split: fc1 output (2 f) and the activation's
         * output (f), the fc2 input */
        if (!sv->rc_mlp)
            bytes += T * m->fd / tp * (2 * BYTES_BF16 + m->ab_act);
        return bytes;
    }

    /* MoE: the router's FP32 logits and scores for the local tokens. */
    if (!sv->rc_moe)
        bytes += Ts * m->E * (2 * m->rb + 1);
    /* Routed experts.  Under SP each rank routes its Ts tokens; after the EP
     * all-to-all (and the ETP all-gather) a rank processes Ts * topk * ETP
     * token copies (forced balance) with an FFN split ETP ways. */
    {
        double n = Ts * m->topk * m->etp * m->cf;
        double fc1_in = n * h * m->ab, fc1_out = n * 2 * m->fm / m->etp * BYTES_BF16;
        double act = n * m->fm / m->etp * m->ab_act, probs = n * BYTES_FP32;
        if (sv->rc_moe_act)
            act = 0;
        if (sv->rc_moe)
            fc1_in = fc1_out = act = probs = 0;
        if (sv->off_fc1)
            fc1_in *= keep;
        if (sv->off_act)
            fc1_out *= keep;
        bytes += fc1_in + fc1_out + act + probs;
    }
    /* Shared expert: a TP-split SwiGLU MLP on the same norm output (its own
     * FP8 copy of that input under FP8). */
    if (m->fs > 0 && !sv->rc_shared && !sv->rc_moe)
        bytes += T * m->fs / tp * (2 * BYTES_BF16 + m->ab_act) +
                 (m->ab < BYTES_BF16 ? Ts * h * m->ab : 0);
    if (kind == 2) /* MTP: both input norms (in + out) and the 2h projection input */
        bytes += Ts * h * BYTES_BF16 * 4 + Ts * 2 * h * m->ab;
    return bytes;
}

/* Peak of the saved activations of pipeline rank r over one step, replaying
 * Megatron's schedule: 1F1B holds PP - r microbatches on rank r; the
 * interleaved schedule runs (PP - r - 1) * 2 + (VPP - 1) * PP warm-up
 * forwards (chunks in groups of PP microbatches) before its first backward.
 * held[v] gets the microbatches of chunk v alive at the peak. */
static double schedule_peak(int pp, int vpp, int r, long nmicro, const chunk *c, double *held)
{
    long total = nmicro * vpp, warm, f = 0, b = 0;
    double alive = 0, peak = 0, *cnt;
    int v;
    for (v = 0; v < vpp; v++)
        held[v] = 0;
    if (nmicro < 1)
        return 0;
    if (vpp == 1) {
        long k = pp - r < nmicro ? pp - r : nmicro;
        held[0] = (double)k;
        return (double)k * (c[0].act + c[0].logits);
    }
    if (vpp < 1 || vpp > 1024) /* no real schedule has more chunks (layout.c's limit) */
        return 0;
    cnt = calloc((size_t)vpp, sizeof *cnt);
    if (!cnt)
        return 0;
    warm = (long)(pp - r - 1) * 2 + (long)(vpp - 1) * pp;
    if (warm > total)
        warm = total;
    /* forward k runs chunk (k mod PP*VPP) / PP; backward k the mirror chunk */
    while (f < total) {
        v = (int)((f % ((long)pp * vpp)) / pp);
        alive += c[v].act + c[v].logits;
        cnt[v]++;
        f++;
        if (alive > peak) {
            peak = alive;
            memcpy(held, cnt, sizeof *cnt * (size_t)vpp);
        }
        if (f > warm) { /* steady state: one backward after each forward */
            v = vpp - 1 - (int)((b % ((long)pp * vpp)) / pp);
            alive -= c[v].act + c[v].logits;
            cnt[v]--;
            b++;
        }
    }
    free(cnt);
    return peak;
}

/* Virtual stages from an explicit layout, from first/last-stage sizes, or
 * even; 0 or -1 when they do not divide into PP ranks. */
static int build_chunks(const mt_kv *cfg, int L, int mtp, int pp, int *vpp_out, chunk **out)
{
    const char *layout = mt_kv_get(cfg, "pipeline_model_parallel_layout");
    unsigned char *is_moe = calloc((size_t)L + 1, 1);
    chunk *c = NULL;
    int n, vpp = 1, s, next = 0;
    double *t = NULL, *m = NULL;

    if (!is_moe)
        return -1;
    moe_pattern(mt_kv_get(cfg, "moe_layer_freq"), L, is_moe);
    if (layout && *layout) {
        mt_layout_stage st[1024]; /* 16 KiB: more virtual stages than any cluster runs */
        n = mt_layout_parse(layout, st, 1024, NULL);
        if (n < 1 || n % pp)
            goto fail;
        vpp = n / pp;
        c = calloc((size_t)n, sizeof *c);
        t = calloc((size_t)n, sizeof *t);
        m = calloc((size_t)n, sizeof *m);
        if (!c || !t || !m)
            goto fail;
        for (s = 0; s < n; s++) {
            t[s] = st[s].t, m[s] = st[s].m;
            c[s].embed = st[s].e, c[s].loss = st[s].l;
        }
    } else {
        double first = num(cfg, "decoder_first_pipeline_num_layers", 0);
        double last = num(cfg, "decoder_last_pipeline_num_layers", 0);
        double per_v = num(cfg, "num_layers_per_virtual_pipeline_stage", 0);
        double nv = num(cfg, "num_virtual_stages_per_pipeline_rank", 0);
        double rest, mid;
        int r, v;
        if (nv > 1)
            vpp = (int)nv;
        else if (per_v > 0 && pp > 1)
            vpp = (int)fmax(1, round((double)L / pp / per_v));
        if (pp == 1)
            vpp = 1;
        n = pp * vpp;
        c = calloc((size_t)n, sizeof *c);
        t = calloc((size_t)n, sizeof *t);
        m = calloc((size_t)n, sizeof *m);
        if (!c || !t || !m)
            goto fail;
        if (pp == 1)
            first = last = 0;
        rest = L - first - last;
        mid = pp - (first > 0) - (last > 0);
        for (r = 0; r < pp; r++) {
            double lr = r == 0 && first > 0       ? first
                        : r == pp - 1 && last > 0 ? last
                        : mid > 0                 ? rest / mid
                                                  : 0;
            for (v = 0; v < vpp; v++)
                t[v * pp + r] = lr / vpp; /* a rank's layers split evenly over its chunks */
        }
        c[0].embed = 1;
        c[n - 1].loss = 1;
        m[n - 1] = mtp; /* MTP layers follow the decoder on the last stage */
    }
    /* layer indices run through the virtual stages in order */
    for (s = 0; s < n; s++) {
        int k, whole = (int)floor(t[s] + 1e-9);
        for (k = 0; k < whole && next < L; k++, next++)
            if (is_moe[next])
                c[s].moe++;
            else
                c[s].dense++;
        if (t[s] > whole) { /* a fractional share (uneven split): the density of the next layer */
            double f = t[s] - whole;
            if (next < L && is_moe[next])
                c[s].moe += f;
            else
                c[s].dense += f;
        }
        c[s].mtp = m[s];
    }
    free(is_moe), free(t), free(m);
    *vpp_out = vpp;
    *out = c;
    return 0;
fail:
    free(is_moe), free(c), free(t), free(m);
    return -1;
}

/* Bytes per element of a saved linear input for the config's precision. */
static double saved_input_bytes(const mt_kv *cfg)
{
    const char *r8 = mt_kv_get(cfg, "fp8_recipe"), *r4 = mt_kv_get(cfg, "fp4_recipe");
    if (r4 && *r4 && strcmp(r4, "none"))
        return BYTES_NVFP4;
    if (r8 && *r8 && strcmp(r8, "none")) {
        if (!strcmp(r8, "mxfp8"))
            return BYTES_MXFP8;
        if (!strcmp(r8, "blockwise"))
            return BYTES_FP8_BLOCK;
        return BYTES_FP8;
    }
    return BYTES_BF16;
}

/* CUDA graph memory of one rank, bytes.  Per-layer graphs (TE or local)
 * keep static buffers for every graphed scope: the forward's input and
 * output and the backward's incoming and outgoing gradients, one set per
 * graph instance; with pipelining every microbatch-chunk in flight needs its
 * own instance (CudaGraphManager creates one runner per outstanding
 * microbatch), without it one instance serves the microbatches in turn.
 * The tensors the graphed code saves for backward live in the graph pool in
 * place of the eager allocator (already counted as activations). */
static double graph_bytes(const mt_kv *cfg, const shape *m, const chunk *c, int vpp,
                          const double *held, double nmicro)
{
    const char *impl = mt_kv_get(cfg, "cuda_graph_impl");
    double io = 0, total = 0, unit = m->Ts * m->h * BYTES_BF16;
    int v;
    if (!impl || !*impl || !strcmp(impl, "none"))
        return 0;
    if (!strcmp(impl, "full_iteration")) {
        /* the whole step is one graph: its pool holds the step's working
         * set apart from the eager allocator (one layer's backward), plus
         * static copies of every microbatch's inputs (tokens, labels,
         * position ids and loss mask: 8 + 8 + 8 + 4 bytes a token) */
        double ws = 0;
        for (v = 0; v < vpp; v++)
            ws = fmax(ws, c[v].peak_layer);
        return ws + nmicro * m->s * m->b * 28;
    }
    /* static I/O per layer and instance, by scope */
    if (has(cfg, "cuda_graph_modules", "attn"))
        io += 4 * unit;
    if (has(cfg, "cuda_graph_modules", "moe_router")) /* norm + router: hidden in/out, probs */
        io += 4 * unit + 2 * m->Ts * m->E * m->rb * 2;
    if (has(cfg, "cuda_graph_modules", "moe"))
        io += 4 * unit;
    if (has(cfg, "cuda_graph_modules", "mlp"))
        io += 4 * unit;
    if (io == 0) /* no module list: Megatron graphs the whole layer */
        io = 4 * unit;
    for (v = 0; v < vpp; v++) {
        double layers = c[v].dense + c[v].moe + c[v].mtp;
        double inst = m->pp > 1 ? fmax(1, held[v]) : 1;
        total += layers * io * inst;
    }
    return total;
}

/* The model and parallel shape of cfg on hw into m; -1 when a size the
 * estimate divides by is missing or below 1. */
static int read_shape(const mt_kv *cfg, const mt_kv *hw, int L, shape *m)
{
    m->h = num(cfg, "hidden_size", 1);
    m->heads = num(cfg, "num_attention_heads", 1);
    m->groups = num(cfg, "num_query_groups", 0);
    if (m->groups <= 0)
        m->groups = m->heads;
    m->kvc = num(cfg, "kv_channels", 0);
    if (m->kvc <= 0)
        m->kvc = m->h / m->heads;
    m->E = num(cfg, "num_experts", 0);
    m->topk = num(cfg, "moe_router_topk", 1);
    m->fm = num(cfg, "moe_ffn_hidden_size", 0);
    m->fs = num(cfg, "moe_shared_expert_intermediate_size", 0);
    m->fd = num(cfg, "ffn_hidden_size", 0);
    if (m->fd <= 0)
        m->fd = 4 * m->h;
    m->V = num(cfg, "vocab_size", 0);
    m->s = num(cfg, "seq_length", 4096);
    m->b = num(cfg, "micro_batch_size", 1);
    m->gbs = num(cfg, "global_batch_size", 1);
    m->tp = num(cfg, "tensor_model_parallel_size", 1);
    m->pp = num(cfg, "pipeline_model_parallel_size", 1);
    m->cp = num(cfg, "context_parallel_size", 1);
    m->ep = num(cfg, "expert_model_parallel_size", 1);
    m->etp = num(cfg, "expert_tensor_parallel_size", 0);
    m->world = num(hw, "world_size", 1);
    if (m->etp <= 0)
        m->etp = m->tp; /* Megatron: ETP defaults to TP */
    if (m->tp < 1 || m->pp < 1 || m->cp < 1 || m->ep < 1 || m->b < 1 || L < 1 || m->h < 1 ||
        m->heads < 1 || m->world < 1)
        return -1;
    m->mla = on(cfg, "multi_latent_attention");
    m->ql = num(cfg, "q_lora_rank", 0);
    m->kl = num(cfg, "kv_lora_rank", 0);
    m->qk = num(cfg, "qk_head_dim", 128);
    m->rope = num(cfg, "qk_pos_emb_head_dim", 64);
    m->vd = num(cfg, "v_head_dim", 128);
    m->qk_norm = on(cfg, "qk_layernorm");
    m->unfused_attn =
        is(cfg, "attention_backend", "unfused") || is(cfg, "attention_backend", "local");
    m->sp =
        m->tp > 1 && (on(cfg, "sequence_parallel") || m->E > 0) ? m->tp : 1; /* MoE + TP needs SP */
    m->T = m->s * m->b / m->cp;
    m->Ts = m->T / m->sp;
    m->ab = saved_input_bytes(cfg);
    m->ab_act = m->ab;
    m->rb = is(cfg, "moe_router_dtype", "fp64") ? 8 : is(cfg, "moe_router_dtype", "fp32") ? 4 : 2;
    m->cf = 1;
    if (on(cfg, "moe_pad_expert_input_to_capacity") &&
        num(cfg, "moe_expert_capacity_factor", 0) > 0)
        m->cf = num(cfg, "moe_expert_capacity_factor", 1);
    return 0;
}

/* What selective recompute and activation offloading in cfg save, into sv. */
static void read_saving(const mt_kv *cfg, const shape *m, saving *sv)
{
    if (is(cfg, "recompute_granularity", "selective")) {
        sv->rc_norm = has(cfg, "recompute_modules", "layernorm");
        sv->rc_core_attn = has(cfg, "recompute_modules", "core_attn");
        sv->rc_mla_up = has(cfg, "recompute_modules", "mla_up_proj") && m->mla;
        sv->rc_moe_act = has(cfg, "recompute_modules", "moe_act");
        sv->rc_moe = has(cfg, "recompute_modules", "moe");
        sv->rc_mlp = has(cfg, "recompute_modules", "mlp");
        sv->rc_shared = has(cfg, "recompute_modules", "shared_experts");
    }
    if (on(cfg, "fine_grained_activation_offloading")) {
        sv->off_frac = fmin(1, fmax(0, num(cfg, "activation_offload_fraction", 1.0)));
        sv->off_attn_norm = has(cfg, "offload_modules", "attn_norm");
        sv->off_qkv = has(cfg, "offload_modules", "qkv_linear");
        sv->off_core_attn = has(cfg, "offload_modules", "core_attn");
        sv->off_attn_proj = has(cfg, "offload_modules", "attn_proj");
        sv->off_mlp_norm = has(cfg, "offload_modules", "mlp_norm");
        sv->off_fc1 = has(cfg, "offload_modules", "expert_fc1");
        sv->off_act = has(cfg, "offload_modules", "moe_act");
    }
}

/* Sizes the stages share: optimizer sharding, microbatches and parameter
 * element counts per layer kind. */
typedef struct sizes {
    double dp_shard, edp_shard, nmicro;
    double attn_p, moe_p, dense_p, mtp_p, embed, Vp;
} sizes;

/* Data-parallel sizes; the distributed optimizer shards dense states over
 * DP x CP and expert states over the expert-DP group.  Then the parameters
 * (elements): per rank for TP/EP-split parts. */
static void read_sizes(const mt_kv *cfg, const shape *m, sizes *z)
{
    double dp = floor(m->world / (m->tp * m->pp * m->cp));
    double edp = floor(m->world / (m->etp * m->ep * m->pp));
    if (dp < 1)
        dp = 1;
    if (edp < 1)
        edp = 1;
    z->dp_shard = dp * m->cp;
    z->edp_shard = edp;
    {
        double inst = num(cfg, "num_distributed_optimizer_instances", 1);
        if (inst > 1)
            z->dp_shard = fmax(1, z->dp_shard / inst), z->edp_shard = fmax(1, z->edp_shard / inst);
    }
    z->nmicro = floor(m->gbs / (m->b * dp));
    if (z->nmicro < 1)
        z->nmicro = 1;
    {
        double div = fmax(1, num(cfg, "make_vocab_size_divisible_by", VOCAB_DIVISOR)) * m->tp;
        z->Vp = ceil(m->V / div) * div;
    }
    z->attn_p = attn_params(m);
    z->dense_p = 3 * m->h * m->fd;
    z->moe_p = m->E * 3 * m->h * m->fm; /* SwiGLU experts: fc1 is h x 2f, fc2 f x h */
    z->mtp_p = 2 * m->h * m->h;         /* MTP's eh projection (norms are negligible) */
    z->embed = z->Vp * m->h;
}

/* The whole model's parameters, billions, from the layers of the nst chunks. */
static double params_total(const shape *m, const sizes *z, const chunk *c, int nst, int L)
{
    double dense_n = 0, moe_n = 0, mtp_n = 0;
    double attn_p = z->attn_p, dense_p = z->dense_p, moe_p = z->moe_p, mtp_p = z->mtp_p;
    int s;
    for (s = 0; s < nst; s++)
        dense_n += c[s].dense, moe_n += c[s].moe, mtp_n += c[s].mtp;
    return (L * attn_p + dense_n * dense_p + moe_n * (moe_p + 3 * m->h * m->fs + m->h * m->E) +
            mtp_n * (attn_p + moe_p + 3 * m->h * m->fs + m->h * m->E + mtp_p) + 2 * m->V * m->h) /
           1e9;
}

/* Bytes per element of weights, grads and optimizer state, and the share
 * of the optimizer step offloaded to the host. */
typedef struct elem_bytes {
    double w, g, master, mom, off;
} elem_bytes;

/* The element sizes of cfg's precision and optimizer settings into eb. */
static void read_elem_bytes(const mt_kv *cfg, elem_bytes *eb)
{
    eb->w = BYTES_BF16;
    eb->g = on(cfg, "grad_reduce_in_bf16") || is(cfg, "main_grads_dtype", "bf16") ? BYTES_BF16
                                                                                  : BYTES_FP32;
    eb->master = eb->mom = BYTES_FP32;
    if (on(cfg, "use_precision_aware_optimizer")) {
        eb->master = dtype_bytes(mt_kv_get(cfg, "main_params_dtype"), BYTES_FP32);
        eb->mom = (dtype_bytes(mt_kv_get(cfg, "exp_avg_dtype"), BYTES_FP32) +
                   dtype_bytes(mt_kv_get(cfg, "exp_avg_sq_dtype"), BYTES_FP32)) /
                  2;
    }
    /* Optimizer CPU offload runs that fraction of the step on the host: its
     * moments live there; the FP32 master weights stay on the GPU, which
     * casts them to the BF16 model weights (calibration F: 3.8 GB per 25% on
     * Qwen3-30B TP2 PP2 EP4 is two thirds of its Adam states). */
    eb->off = on(cfg, "optimizer_cpu_offload")
                  ? fmin(1, fmax(0, num(cfg, "optimizer_offload_fraction", 1.0)))
                  : 0;
}

/* Each of the nst chunks' saved activations, loss logits and largest
 * single layer per microbatch, after full recompute. */
static void chunk_activations(const mt_kv *cfg, const shape *m, const saving *sv, double Vp,
                              chunk *c, int nst)
{
    int v;
    for (v = 0; v < nst; v++) {
        double a = c[v].dense * layer_act(m, sv, 0) + c[v].moe * layer_act(m, sv, 1) +
                   c[v].mtp * layer_act(m, sv, 2);
        double pk = fmax(c[v].dense > 0 ? layer_act(m, sv, 0) : 0,
                         c[v].moe + c[v].mtp > 0 ? layer_act(m, sv, 1) : 0);
        if (is(cfg, "recompute_granularity", "full")) {
            /* only each recomputed unit's input is kept (uniform: one per
             * N layers; block: the first N layers of the chunk) */
            double n = fmax(1, num(cfg, "recompute_num_layers", 1));
            double layers = c[v].dense + c[v].moe + c[v].mtp, in = m->Ts * m->h * BYTES_BF16;
            if (is(cfg, "recompute_method", "block")) {
                double rc = fmin(n, layers);
                a = layers > 0 ? a * (layers - rc) / layers + rc * in : 0;
            } else {
                a = ceil(layers / n) * in;
                pk *= n; /* one unit recomputed at a time */
            }
        }
        if (c[v].loss) /* final norm and the saved FP32 softmax of each output head */
            a += 2 * m->Ts * m->h * BYTES_BF16,
                c[v].logits = m->T * Vp / m->tp * LOGIT_SAVED_BYTES * (1 + c[v].mtp);
        c[v].act = a;
        c[v].peak_layer = pk;
    }
}

/* The flex dispatcher backend's registered buffers, GB (0 without flex). */
static double flex_buffer_gb(const mt_kv *cfg)
{
    const char *disp = mt_kv_get(cfg, "moe_flex_dispatcher_backend");
    if (is(cfg, "moe_token_dispatcher_type", "flex") && disp) {
        if (!strcmp(disp, "deepep"))
            return DEEPEP_BUFFER_GB;
        else if (!strcmp(disp, "hybridep"))
            return HYBRIDEP_BUFFER_GB;
        else if (!strcmp(disp, "ncclep"))
            return NCCLEP_BUFFER_GB;
    }
    return 0;
}

/* Weights, grads and optimizer state of pipeline rank r into st; the
 * largest transient working set of its chunks into *ws. */
static void stage_states(const mt_kv *cfg, const shape *m, const sizes *z, const elem_bytes *eb,
                         const chunk *c, int pp, int vpp, int r, mt_mem_stage *st, double *ws)
{
    double nonexp = 0, exp = 0;
    int v;
    for (v = 0; v < vpp; v++) {
        const chunk *k = &c[v * pp + r];
        double moe_layers = k->moe + k->mtp;
        st->layers += k->dense + k->moe + k->mtp;
        nonexp += (k->dense + k->moe + k->mtp) * z->attn_p / m->tp + k->dense * z->dense_p / m->tp +
                  moe_layers * (3 * m->h * m->fs / m->tp + m->h * m->E) + k->mtp * z->mtp_p / m->tp;
        exp += moe_layers * z->moe_p / (m->ep * m->etp);
        if (k->embed)
            nonexp += z->embed / m->tp;
        if (k->loss) {
            /* the output layer (untied; tied weights keep a copy here
             * when PP > 1), and MTP's copy of the embedding */
            if (!is(cfg, "untie_embeddings_and_output_weights", "false") || pp > 1)
                nonexp += z->embed / m->tp;
            if (k->mtp > 0 && !k->embed)
                nonexp += z->embed / m->tp;
        }
        /* one layer's backward, or the loss's BF16 logits beside their
         * FP32 copy: not at the same time */
        *ws = fmax(*ws,
                   fmax(k->peak_layer, k->loss ? m->T * z->Vp / m->tp * LOGIT_TRANSIENT_BYTES : 0));
    }
    st->weights = (nonexp + exp) * eb->w / GB;
    st->grads = (nonexp + exp) * eb->g / GB;
    if (on(cfg, "use_distributed_optimizer"))
        st->optimizer = (nonexp / z->dp_shard + exp / z->edp_shard) *
                        (eb->master + 2 * eb->mom * (1 - eb->off)) / GB;
    else
        st->optimizer = (nonexp + exp) * (eb->master + 2 * eb->mom * (1 - eb->off)) / GB;
}

/* Activations, logits and graph memory pipeline rank r holds at its peak
 * under the schedule, into st; kc and held are scratch of vpp entries. */
static void stage_activations(const mt_kv *cfg, const shape *m, const chunk *c, int pp, int vpp,
                              int r, double nmicro, chunk *kc, double *held, mt_mem_stage *st)
{
    double act = 0, logits = 0, one = 0;
    int v;
    for (v = 0; v < vpp; v++)
        kc[v] = c[v * pp + r];
    schedule_peak(pp, vpp, r, (long)nmicro, kc, held);
    for (v = 0; v < vpp; v++) {
        act += held[v] * kc[v].act;
        logits += held[v] * kc[v].logits;
        one += kc[v].act + kc[v].logits;
        st->inflight += held[v];
    }
    st->graphs = graph_bytes(cfg, m, kc, vpp, held, nmicro) / GB;
    st->activations = act / GB;
    st->logits = logits / GB;
    st->inflight_mb = one > 0 ? (act + logits) / one : 0;
}

/* Names the hottest stage of the pp in out->hottest_name. */
static void name_hottest(mt_mem_estimate *out, int pp)
{
    out->hottest = &out->hot;
    if (pp == 1)
        snprintf(out->hottest_name, sizeof out->hottest_name, "every rank");
    else
        snprintf(out->hottest_name, sizeof out->hottest_name, "pipeline stage %d of %d%s",
                 out->hot.rank + 1, pp,
                 out->hot.rank == 0        ? ", the first"
                 : out->hot.rank == pp - 1 ? ", the last"
                                           : "");
}

int mt_memory_estimate(const mt_kv *cfg, const mt_kv *hw, mt_mem_estimate *out)
{
    shape m;
    saving sv;
    sizes z;
    elem_bytes eb;
    int L = (int)num(cfg, "num_layers", 1), mtp = (int)num(cfg, "mtp_num_layers", 0);
    int pp, vpp = 1, r, nst;
    chunk *c = NULL, *kc = NULL;
    double *held = NULL;
    mt_mem_stage *best = NULL;

    memset(out, 0, sizeof *out);
    memset(&m, 0, sizeof m);
    memset(&sv, 0, sizeof sv);
    if (read_shape(cfg, hw, L, &m))
        return -1;
    pp = (int)m.pp;
    read_saving(cfg, &m, &sv);
    read_sizes(cfg, &m, &z);
    if (build_chunks(cfg, L, mtp, pp, &vpp, &c))
        return -1;
    nst = pp * vpp;
    kc = calloc((size_t)vpp, sizeof *kc);
    held = calloc((size_t)vpp, sizeof *held);
    if (!kc || !held) {
        free(c), free(kc), free(held);
        return -1;
    }
    out->params_total = params_total(&m, &z, c, nst, L);
    out->pp = pp;
    out->vpp = vpp;
    out->microbatches = z.nmicro;
    out->hbm_gb = num(hw, "hbm_gb", 80);
    read_elem_bytes(cfg, &eb);
    chunk_activations(cfg, &m, &sv, z.Vp, c, nst);

    out->grad_bytes = eb.g;
    out->state_bytes = eb.master + 2 * eb.mom * (1 - eb.off);
    out->offload = eb.off;
    out->dp_shard = on(cfg, "use_distributed_optimizer") ? z.dp_shard : 1;
    out->edp_shard = on(cfg, "use_distributed_optimizer") ? z.edp_shard : 1;
    for (r = 0; r < pp; r++) {
        mt_mem_stage st;
        double ws = 0;
        memset(&st, 0, sizeof st);
        st.rank = r;
        stage_states(cfg, &m, &z, &eb, c, pp, vpp, r, &st, &ws);
        stage_activations(cfg, &m, c, pp, vpp, r, z.nmicro, kc, held, &st);
        /* EP overlap runs a forward and a backward of two microbatches
         * layer by layer: the saved activations peak no higher, but both
         * layers' working tensors coexist */
        if (on(cfg, "overlap_moe_expert_parallel_comm"))
            ws *= 2;
        st.workspace = ws / GB;
        out->flex_buffer_gb = flex_buffer_gb(cfg);
        st.buffers = CONTEXT_GB + out->flex_buffer_gb;
        st.total = st.weights + st.grads + st.optimizer + st.activations + st.logits +
                   st.workspace + st.graphs + st.buffers;
        if (r == 0)
            out->first = st;
        if (r == pp - 1)
            out->last = st;
        if (!best || st.total > out->hot.total) {
            out->hot = st;
            best = &out->hot;
        }
    }
    name_hottest(out, pp);
    free(c), free(kc), free(held);
    return 0;
}
