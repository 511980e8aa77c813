#include "derive.h"

#include <moetune/kit.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long num(const mt_kv *a, const char *k, long def)
{
    const char *v = mt_kv_get(a, k);
    char *end;
    long n;
    if (!v || !*v)
        return def;
    n = strtol(v, &end, 10);
    return *end ? def : n;
}

static int on(const mt_kv *a, const char *k)
{
    const char *v = mt_kv_get(a, k);
    return v && !strcmp(v, "true");
}

/* Overwrites k, keeping the command line's value under raw.k. */
static void derive(mt_kv *a, const char *k, const char *v)
{
    char raw[300];
    const char *old = mt_kv_get(a, k);
    snprintf(raw, sizeof raw, "raw.%s", k);
    if (!mt_kv_get(a, raw))
        mt_kv_set(a, raw, old ? old : "None");
    if (v)
        mt_kv_set(a, k, v);
    else
        mt_kv_unset(a, k);
}

static void derive_long(mt_kv *a, const char *k, long v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%ld", v);
    derive(a, k, buf);
}

/* Python's floor division and modulo for the few places a negative size
 * can reach them. */
static long fdiv(long a, long b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

static void derive_vpp(mt_kv *a)
{
    long pp = num(a, "pipeline_model_parallel_size", 1);
    const char *layout = mt_kv_get(a, "pipeline_model_parallel_layout");
    long vpp = 0;
    int set = 0;
    if (layout) {
        char buf[8192];
        long stages = pk_layout_expand(layout, buf, sizeof buf);
        if (stages > 0 && pp > 0 && stages % pp == 0)
            vpp = stages / pp, set = 1;
    } else if (mt_kv_get(a, "num_layers_per_virtual_pipeline_stage")) {
        long per = num(a, "num_layers_per_virtual_pipeline_stage", 0);
        long layers = num(a, "num_layers", 0) + on(a, "account_for_embedding_in_pipeline_split") +
                      on(a, "account_for_loss_in_pipeline_split");
        if (pp > 0 && per != 0 && layers % pp == 0 && fdiv(layers, pp) % per == 0)
            vpp = fdiv(fdiv(layers, pp), per), set = 1;
    } else if (mt_kv_get(a, "num_virtual_stages_per_pipeline_rank")) {
        vpp = num(a, "num_virtual_stages_per_pipeline_rank", 0), set = 1;
    }
    if (set && vpp != 1)
        derive_long(a, "virtual_pipeline_model_parallel_size", vpp);
    else
        derive(a, "virtual_pipeline_model_parallel_size", NULL);
    if (!mt_kv_get(a, "virtual_pipeline_model_parallel_size")) {
        derive(a, "overlap_p2p_comm", "false");
        derive(a, "align_param_gather", "false");
    }
}

void mt_args_derive(mt_kv *a, long world)
{
    long tp = num(a, "tensor_model_parallel_size", 1);
    long pp = num(a, "pipeline_model_parallel_size", 1);
    long cp = num(a, "context_parallel_size", 1);
    long shards = num(a, "tensor_parallel_num_weight_shards", 0);
    long total, hidden = num(a, "hidden_size", 0), heads = num(a, "num_attention_heads", 0);
    char seq[64];
    mt_kv_setf(a, "world_size", "%ld", world);
    mt_kv_set(a, "rank", "0");
    /* GTP weight remat (0.19+, A:415 resolve_tensor_parallel_weight_shards):
     * the shards over TP multiply the model size. */
    total = tp * pp * cp;
    if (shards > 0 && tp > 0 && shards >= tp && shards % tp == 0) {
        total *= shards / tp;
        mt_kv_setf(a, "gtp_weight_remat_size", "%ld", shards / tp);
    } else {
        mt_kv_set(a, "gtp_weight_remat_size", "1");
    }
    if (total > 0 && world % total == 0)
        mt_kv_setf(a, "data_parallel_size", "%ld", world / total);
    if (!mt_kv_get(a, "expert_tensor_parallel_size"))
        derive_long(a, "expert_tensor_parallel_size", tp);
    if (on(a, "recompute_activations"))
        derive(a, "recompute_granularity", "selective");
    if (!mt_kv_get(a, "global_batch_size") && mt_kv_get(a, "data_parallel_size"))
        derive_long(a, "global_batch_size",
                    num(a, "micro_batch_size", 1) * num(a, "data_parallel_size", 1));
    derive_vpp(a);
    if (!mt_kv_get(a, "ffn_hidden_size"))
        derive_long(a, "ffn_hidden_size",
                    on(a, "swiglu") ? (4 * hidden * 2 / 3 / 64) * 64 : 4 * hidden);
    if (!mt_kv_get(a, "kv_channels") && heads > 0 && hidden % heads == 0)
        derive_long(a, "kv_channels", hidden / heads);
    if (tp == 1 && on(a, "sequence_parallel"))
        derive(a, "sequence_parallel", "false");
    /* seq_length and encoder_seq_length mirror each other (A:849). */
    if (mt_kv_get(a, "seq_length") && !mt_kv_get(a, "encoder_seq_length")) {
        snprintf(seq, sizeof seq, "%s", mt_kv_get(a, "seq_length"));
        derive(a, "encoder_seq_length", seq);
    } else if (!mt_kv_get(a, "seq_length") && mt_kv_get(a, "encoder_seq_length")) {
        snprintf(seq, sizeof seq, "%s", mt_kv_get(a, "encoder_seq_length"));
        derive(a, "seq_length", seq);
    }
    if (on(a, "use_rotary_position_embeddings"))
        derive(a, "position_embedding_type", "rope");
    /* RoPE fusion only for rope (A:1005). */
    if (on(a, "apply_rope_fusion") && strcmp(mt_kv_get(a, "position_embedding_type") ?: "", "rope"))
        derive(a, "apply_rope_fusion", "false");
    if (mt_kv_get(a, "num_experts") && num(a, "num_experts", -1) == 0)
        derive(a, "num_experts", NULL);
    if (mt_kv_get(a, "num_experts") && !mt_kv_get(a, "moe_ffn_hidden_size"))
        derive(a, "moe_ffn_hidden_size", mt_kv_get(a, "ffn_hidden_size"));
}
