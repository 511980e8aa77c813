/*
 * flops.c - Megatron's model FLOPs per token and throughput (flops.h).
 */
#include "flops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A numeric field of the shape; def when absent or empty. */
static double field(const mt_kv *m, const char *k, double def)
{
    const char *v = mt_kv_get(m, k);
    char *end;
    double x;
    if (!v || !*v)
        return def;
    x = strtod(v, &end);
    return *end ? NAN : x;
}

static int is_true(const mt_kv *m, const char *k)
{
    const char *v = mt_kv_get(m, k);
    return v && (!strcmp(v, "true") || !strcmp(v, "1"));
}

int mt_flops_per_token(const mt_kv *model, double seq, int tp, double *out)
{
    double h = field(model, "hidden_size", NAN), L = field(model, "num_layers", NAN);
    double heads = field(model, "num_attention_heads", NAN), V = field(model, "vocab_size", NAN);
    double groups = field(model, "num_query_groups", heads);
    double kvc = field(model, "kv_channels", h / heads);
    double ffn = field(model, "ffn_hidden_size", 4 * h);
    double moe_ffn = field(model, "moe_ffn_hidden_size", ffn);
    double topk = field(model, "moe_router_topk", 0), experts = field(model, "num_experts", 0);
    double shared = field(model, "moe_shared_expert_intermediate_size", 0);
    double dense = field(model, "first_k_dense", 0), mtp = field(model, "mtp_num_layers", 0);
    double n_moe, n_dense, layers, pad, attn, mlp, mtp_proj, logits;
    const double gated = 1.5; /* SwiGLU: three GEMMs where a plain FFN has two */
    *out = NAN;
    if (!(h > 0 && L > 0 && heads > 0 && V > 0 && seq > 0 && groups > 0 && kvc > 0 && ffn > 0 &&
          moe_ffn >= 0 && topk >= 0 && shared >= 0 && dense >= 0 && dense <= L && mtp >= 0) ||
        tp < 1)
        return -1;
    /* MoE layers after the first_k_dense dense ones; MTP layers take the
     * kind of the last layer (Megatron: last_layer_is_moe) */
    n_moe = experts > 0 ? L - dense : 0;
    n_dense = L - n_moe;
    if (n_moe > 0)
        n_moe += mtp;
    else
        n_dense += mtp;
    layers = L + mtp;
    pad = 128.0 * tp;
    V = ceil(V / pad) * pad;
    if (is_true(model, "multi_latent_attention")) {
        double ql = field(model, "q_lora_rank", 0), kl = field(model, "kv_lora_rank", NAN);
        double qk = field(model, "qk_head_dim", NAN),
               rope = field(model, "qk_pos_emb_head_dim", NAN);
        double v = field(model, "v_head_dim", NAN), q;
        if (!(kl > 0 && qk > 0 && rope >= 0 && v > 0 && ql >= 0))
            return -1;
        /* per token: parameters of each projection (norms as +1), then the
         * causal core (scores over q/k, and over v, each halved) */
        q = ql > 0 ? ql * (h + heads * (qk + rope) + 1) : h * heads * (qk + rope);
        attn = 3 * 2 * layers *
               (q + kl * (h + heads * (qk + v) + 1) + h * rope + heads * v * h +
                seq * heads * (qk + rope) / 2 + seq * heads * v / 2);
    } else {
        /* q and o projections (heads x kv channels), k and v (groups), and
         * the causal core term, in units of the query projection */
        attn = 12 * layers * h * h * (1 + groups / heads + seq / h / 2) * (kvc * heads / h);
    }
    mlp = 12 * layers * h *
          (ffn * gated * n_dense / layers + moe_ffn * topk * gated * n_moe / layers +
           shared * gated * n_moe / layers);
    mtp_proj = 3 * 2 * mtp * (3 * h + 2 * h * h); /* MTP norms and its 2h -> h projection */
    logits = 3 * 2 * h * V * (mtp + 1);
    *out = mlp + attn + mtp_proj + logits;
    return isfinite(*out) && *out > 0 ? 0 : -1;
}

int mt_flops_throughput(const mt_contract *c, const mt_kv *cfg, double step_s, double *tflops,
                        double *tokens)
{
    double seq = c && c->batch ? field(c->batch, "seq_length", NAN) : NAN;
    double gbs = c && c->batch ? field(c->batch, "global_batch_size", NAN) : NAN;
    double world = c && c->hardware ? field(c->hardware, "world_size", NAN) : NAN;
    double tp = cfg ? field(cfg, "tensor_model_parallel_size", 1) : 1, per_token, tok;
    if (tflops)
        *tflops = NAN;
    if (tokens)
        *tokens = NAN;
    if (!c || !(step_s > 0) || !(seq > 0) || !(gbs > 0) || !(world > 0) || !(tp >= 1) ||
        mt_flops_per_token(c->model, seq, (int)tp, &per_token))
        return -1;
    tok = gbs * seq / step_s / world;
    if (tflops)
        *tflops = per_token * tok / 1e12;
    if (tokens)
        *tokens = tok;
    return 0;
}
