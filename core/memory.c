#include "memory.h"

#include "layout.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GB 1e9

static double num(const mt_kv *kv, const char *k, double def)
{
    const char *v = mt_kv_get(kv, k);
    return v && *v ? strtod(v, NULL) : def;
}

static int on(const mt_kv *kv, const char *k)
{
    const char *v = mt_kv_get(kv, k);
    return v && !strcmp(v, "true");
}

static int has(const mt_kv *kv, const char *k, const char *word)
{
    const char *v = mt_kv_get(kv, k), *p;
    size_t n = strlen(word);
    for (p = v; p && (p = strstr(p, word)); p += n)
        if ((p == v || p[-1] == ' ') && (p[n] == ' ' || !p[n]))
            return 1;
    return 0;
}

/* Transformer and MTP layers on the first and last pipeline ranks (all
 * their virtual chunks) from an explicit layout; 0 when it cannot be read. */
static int layout_layers(const char *layout, long pp, double *first, double *last)
{
    mt_layout_stage st[1024]; /* 16 KiB: far more stages than any cluster has */
    int n = mt_layout_parse(layout, st, 1024, NULL), s;
    if (n < 1 || pp < 1 || n % pp)
        return 0;
    *first = *last = 0;
    for (s = 0; s < n; s++) {
        if (s % pp == 0)
            *first += st[s].t + st[s].m;
        if (s % pp == pp - 1)
            *last += st[s].t + st[s].m;
    }
    return 1;
}

int mt_memory_estimate(const mt_kv *cfg, const mt_kv *hw, mt_mem_estimate *out)
{
    double L = num(cfg, "num_layers", 1), h = num(cfg, "hidden_size", 1);
    double heads = num(cfg, "num_attention_heads", 1);
    double groups = num(cfg, "num_query_groups", heads);
    double kvc = num(cfg, "kv_channels", h / heads);
    double E = num(cfg, "num_experts", 0), topk = num(cfg, "moe_router_topk", 1);
    double fm = num(cfg, "moe_ffn_hidden_size", 0), fs = num(cfg, "moe_shared_expert_intermediate_size", 0);
    double fd = num(cfg, "ffn_hidden_size", 4 * h), V = num(cfg, "vocab_size", 0);
    double mtp = num(cfg, "mtp_num_layers", 0);
    double s = num(cfg, "seq_length", 4096), b = num(cfg, "micro_batch_size", 1);
    double gbs = num(cfg, "global_batch_size", 1);
    double tp = num(cfg, "tensor_model_parallel_size", 1), pp = num(cfg, "pipeline_model_parallel_size", 1);
    double cp = num(cfg, "context_parallel_size", 1), ep = num(cfg, "expert_model_parallel_size", 1);
    double etp = num(cfg, "expert_tensor_parallel_size", 0);
    double world = num(hw, "world_size", 1);
    double dense_layers = 0, attn, moe_layer, dense_mlp, embed;
    double dp, edp, vpp = 1, first_layers, last_layers;
    int mla = on(cfg, "multi_latent_attention");
    const char *freq = mt_kv_get(cfg, "moe_layer_freq");
    const char *layout = mt_kv_get(cfg, "pipeline_model_parallel_layout");
    int dist_opt = on(cfg, "use_distributed_optimizer");
    const char *gran = mt_kv_get(cfg, "recompute_granularity");
    const char *impl = mt_kv_get(cfg, "cuda_graph_impl");
    const char *disp = mt_kv_get(cfg, "moe_flex_dispatcher_backend");
    int fp8 = mt_kv_get(cfg, "fp8_recipe") && strcmp(mt_kv_get(cfg, "fp8_recipe"), "none");
    int fp4 = mt_kv_get(cfg, "fp4_recipe") && strcmp(mt_kv_get(cfg, "fp4_recipe"), "none");
    double act_b = fp4 ? 1.2 : fp8 ? 1.5 : 2.0; /* bytes per saved linear input */
    mt_mem_stage *st[2];
    int i;

    memset(out, 0, sizeof *out);
    if (etp <= 0)
        etp = tp;
    if (tp < 1 || pp < 1 || cp < 1 || ep < 1 || b < 1)
        return -1;
    dp = floor(world / (tp * pp * cp));
    edp = floor(world / (etp * ep * pp));
    if (dp < 1) dp = 1;
    if (edp < 1) edp = 1;
    if (freq && freq[0] == '(') {
        const char *z = strstr(freq, "[0]*");
        if (z)
            dense_layers = strtod(z + 4, NULL);
    }

    /* Parameters (per layer, whole model). */
    if (mla) {
        double ql = num(cfg, "q_lora_rank", 0), kl = num(cfg, "kv_lora_rank", 0);
        double qk = num(cfg, "qk_head_dim", 128), rope = num(cfg, "qk_pos_emb_head_dim", 64);
        double v = num(cfg, "v_head_dim", 128);
        attn = (ql > 0 ? h * ql + ql * heads * (qk + rope) : h * heads * (qk + rope)) +
               h * (kl + rope) + kl * heads * (qk + v) + heads * v * h;
    } else {
        attn = h * heads * kvc + 2 * h * groups * kvc + heads * kvc * h;
    }
    moe_layer = E * 3 * h * fm;       /* experts (SwiGLU: fc1 is 2 x h x f) */
    dense_mlp = 3 * h * fd;
    embed = V * h;
    out->params_total = (L * attn + dense_layers * dense_mlp + (L - dense_layers) * (moe_layer + 3 * h * fs + h * E) +
                         mtp * (attn + moe_layer + 3 * h * fs + 2 * h * h) + 2 * embed) / 1e9;
    out->hbm_gb = num(hw, "hbm_gb", 80);

    /* Layers on the first and last stage (all virtual chunks). */
    if (layout && *layout && layout_layers(layout, (long)pp, &first_layers, &last_layers)) {
        vpp = 2; /* interleaved: see in-flight factor below */
    } else {
        double first = num(cfg, "decoder_first_pipeline_num_layers", 0);
        double last = num(cfg, "decoder_last_pipeline_num_layers", 0);
        double rest = L - first - last, mid = pp - (first > 0) - (last > 0);
        double even = mid > 0 ? rest / mid : rest;
        first_layers = first > 0 ? first : (pp > 1 ? even : L);
        last_layers = last > 0 ? last : (pp > 1 ? even : L);
        if (num(cfg, "num_virtual_stages_per_pipeline_rank", 0) > 1 ||
            num(cfg, "num_layers_per_virtual_pipeline_stage", 0) > 0)
            vpp = 2;
    }
    out->first.layers = first_layers;
    out->last.layers = last_layers;
    st[0] = &out->first;
    st[1] = &out->last;

    for (i = 0; i < 2; i++) {
        mt_mem_stage *m = st[i];
        double layers = m->layers;
        double dense_here = i == 0 ? fmin(dense_layers, layers) : 0;
        double moe_here = layers - dense_here;
        double nonexp, exp, per_layer, micro, inflight, tokens = s * b / cp;
        double sbh, a_norm, a_attn, a_mla = 0, a_moe, a_act, a_mlp, a_shared;
        if (i == 1 && mtp > 0)
            moe_here += mtp; /* MTP layers sit on the last stage */
        nonexp = (layers + (i == 1 ? mtp : 0)) * attn / tp + dense_here * dense_mlp / tp +
                 moe_here * (3 * h * fs / tp + h * E);
        if (i == 0 || pp == 1)
            nonexp += embed / tp;
        if (i == 1 || pp == 1)
            nonexp += embed / tp;
        exp = moe_here * moe_layer / (ep * etp);
        m->weights = (nonexp + exp) * 2 / GB;
        /* Megatron keeps the gradient buffer in the parameter dtype (BF16). */
        m->grads = (nonexp + exp) * 2 / GB;
        /* Adam: FP32 master weights + two moments = 12 bytes per parameter. */
        m->optimizer = dist_opt ? (nonexp * 12 / dp + exp * 12 / edp) / GB
                                : (nonexp + exp) * 12 / GB;
        if (on(cfg, "optimizer_cpu_offload"))
            m->optimizer *= 1 - num(cfg, "optimizer_offload_fraction", 1.0);

        /* Saved activations per layer and microbatch, bytes. Sequence
         * parallel shards the norm/residual tensors over TP. */
        sbh = tokens * h;
        a_norm = 2 * 2 * sbh / tp;                                  /* two norm outputs */
        a_attn = 2 * tokens * (heads * kvc * 2 + 2 * groups * kvc) / tp; /* Q,K,V + context */
        if (mla) {
            double qk = num(cfg, "qk_head_dim", 128), rope = num(cfg, "qk_pos_emb_head_dim", 64);
            double v = num(cfg, "v_head_dim", 128);
            a_mla = 2 * tokens * heads * (2 * (qk + rope) + v) / tp;
            a_attn = 2 * tokens * heads * (qk + rope + v) * 2 / tp;
        }
        /* Routed tokens: expert fc1 input, fc1 output (2f), activation output (f). */
        a_moe = tokens * topk * (act_b * h + 2 * 2 * fm) / etp;
        a_act = tokens * topk * 2 * fm / etp;
        a_shared = fs > 0 ? tokens * (act_b * h + 2 * 3 * fs) / tp : 0;
        a_mlp = tokens * (act_b * h + 2 * 3 * fd) / tp;
        if (gran && !strcmp(gran, "selective")) {
            if (has(cfg, "recompute_modules", "layernorm"))
                a_norm *= 0.25;
            if (has(cfg, "recompute_modules", "core_attn"))
                a_attn *= 0.3;
            if (has(cfg, "recompute_modules", "mla_up_proj"))
                a_mla = 0;
            if (has(cfg, "recompute_modules", "moe_act"))
                a_act = 0;
            if (has(cfg, "recompute_modules", "moe"))
                a_moe = 0, a_act = 0;
            if (has(cfg, "recompute_modules", "mlp"))
                a_mlp = 0, a_shared = 0;
            if (has(cfg, "recompute_modules", "shared_experts"))
                a_shared = 0;
        }
        if (on(cfg, "fine_grained_activation_offloading")) {
            if (has(cfg, "offload_modules", "core_attn"))
                a_attn *= 0.3;
            if (has(cfg, "offload_modules", "expert_fc1"))
                a_moe *= 0.5;
            if (has(cfg, "offload_modules", "moe_act"))
                a_act = 0;
            if (has(cfg, "offload_modules", "attn_norm") || has(cfg, "offload_modules", "mlp_norm"))
                a_norm *= 0.5;
        }
        per_layer = a_norm + a_attn + a_mla;
        micro = layers * per_layer + moe_here * (a_moe + a_act + a_shared) + dense_here * a_mlp;
        if (gran && !strcmp(gran, "full")) /* each layer's input, plus one layer being recomputed */
            micro = layers * 2 * sbh / tp + per_layer + a_moe + a_act + a_shared;
        /* In-flight microbatches under 1F1B: the first stage holds PP of them,
         * the last one; interleaving adds (PP-1)/(PP*VPP) per chunk. */
        {
            double nmicro = gbs / (b * dp);
            inflight = i == 0 ? fmin(pp, nmicro) : 1;
            if (vpp > 1 && i == 0)
                inflight *= 1 + (pp - 1) / (pp * vpp);
        }
        m->activations = micro * inflight / GB;
        if (i == 1 || pp == 1)
            m->logits = tokens * V / tp * 6 / GB; /* BF16 logits + FP32 loss workspace */
        if (impl && !strcmp(impl, "full_iteration"))
            m->graphs = 2.5 + 0.25 * m->activations;
        else if (impl && strcmp(impl, "none"))
            m->graphs = pp > 1 ? 10.5 + 0.05 * m->activations : 2.0 + 0.05 * m->activations;
        /* CUDA context + NCCL buffers, plus the flex dispatcher's registered buffers. */
        m->buffers = 1.2;
        if (disp && !strcmp(disp, "deepep"))
            m->buffers += 2.0;
        else if (disp && !strcmp(disp, "hybridep"))
            m->buffers += 1.5;
        m->total = m->weights + m->grads + m->optimizer + m->activations + m->logits + m->graphs +
                   m->buffers;
    }
    if (out->last.total > out->first.total) {
        out->hottest = &out->last;
        out->hottest_name = pp > 1 ? "last pipeline stage" : "every rank";
    } else {
        out->hottest = &out->first;
        out->hottest_name = pp > 1 ? "first pipeline stage" : "every rank";
    }
    return 0;
}
