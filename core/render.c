#include "render.h"

#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct core_flag {
    const char *knob;
    const char *bridge; /* Bridge override path */
    int when;           /* ALWAYS, NONZERO, TRUE */
} core_flag;

enum { ALWAYS, NONZERO, IS_TRUE, NONEMPTY };

/* Order follows Megatron's own argument groups: model, MoE, MLA, data,
 * training, logging. */
static const core_flag core_flags[] = {
    {"num_layers", "model.num_layers", ALWAYS},
    {"hidden_size", "model.hidden_size", ALWAYS},
    {"ffn_hidden_size", "model.ffn_hidden_size", ALWAYS},
    {"num_attention_heads", "model.num_attention_heads", ALWAYS},
    {"num_query_groups", "model.num_query_groups", NONZERO},
    {"kv_channels", "model.kv_channels", NONZERO},
    {"num_experts", "model.num_moe_experts", NONZERO},
    {"moe_router_topk", "model.moe_router_topk", ALWAYS},
    {"moe_ffn_hidden_size", "model.moe_ffn_hidden_size", NONZERO},
    {"moe_shared_expert_intermediate_size", "model.moe_shared_expert_intermediate_size", NONZERO},
    {"moe_layer_freq", "model.moe_layer_freq", NONEMPTY},
    {"multi_latent_attention", "model.multi_latent_attention", IS_TRUE},
    {"q_lora_rank", "model.q_lora_rank", NONZERO},
    {"kv_lora_rank", "model.kv_lora_rank", NONZERO},
    {"qk_head_dim", "model.qk_head_dim", NONZERO},
    {"qk_pos_emb_head_dim", "model.qk_pos_emb_head_dim", NONZERO},
    {"v_head_dim", "model.v_head_dim", NONZERO},
    {"mtp_num_layers", "model.mtp_num_layers", NONZERO},
    {"vocab_size", "model.vocab_size", NONZERO},
    {"seq_length", "model.seq_length", ALWAYS},
    {"moe_expert_capacity_factor", "model.moe_expert_capacity_factor", NONEMPTY},
    {"moe_pad_expert_input_to_capacity", "model.moe_pad_expert_input_to_capacity", IS_TRUE},
    {"global_batch_size", "train.global_batch_size", ALWAYS},
    {"train_iters", "train.train_iters", NONZERO},
    {"eval_interval", "train.eval_interval", NONZERO},
    {"save_interval", "checkpoint.save_interval", NONZERO},
    {"seed", "rng.seed", ALWAYS},
    {"log_interval", "logger.log_interval", ALWAYS},
    {"log_throughput", "logger.log_throughput", IS_TRUE},
};

static void flag_name(const char *knob, char *buf, size_t n)
{
    size_t i;
    snprintf(buf, n, "--%s", knob);
    for (i = 2; buf[i]; i++)
        if (buf[i] == '_')
            buf[i] = '-';
}

/* A flag the contract's fixed_args give: the core leaves it to them. */
static int fixed_has(const mt_contract *c, const char *flag)
{
    size_t i, n = strlen(flag);
    for (i = 0; i < c->n_fixed_args; i++)
        if (!strncmp(c->fixed_args[i], flag, n) &&
            (c->fixed_args[i][n] == 0 || c->fixed_args[i][n] == '='))
            return 1;
    return 0;
}

/* The contract's Megatron-Bridge reads main's table (core/dialects/bridge/):
 * "main", an undeclared version, or anything after the 0.2 line; a 0.2.x
 * version reads v0.2.2's. */
static int bridge_main(const mt_contract *c)
{
    const char *v = mt_kv_get(c->view, "stack.megatron_bridge");
    long major, minor;
    char *end;
    if (!v || !strcmp(v, "main"))
        return 1;
    while (*v && (*v < '0' || *v > '9'))
        v++;
    major = strtol(v, &end, 10);
    minor = *end == '.' ? strtol(end + 1, NULL, 10) : 0;
    return major > 0 || minor > 2;
}

/* Megatron's --moe-layer-freq as Bridge takes it: an integer as is, and a
 * Python list expression ("([0]*3+[1]*58)", "[1,0,1]") written out as the
 * explicit list "[0,0,0,1,...]" (Bridge does not evaluate it).  0, or -1
 * when the expression is not a sum of [..] or [..]*k terms. */
static int layer_freq_list(const char *v, char *out, size_t n)
{
    char body[1024];
    size_t len, o = 0, i;
    const char *p;
    int first = 1;
    while (*v == ' ')
        v++;
    len = strlen(v);
    while (len && v[len - 1] == ' ')
        len--;
    if (len && v[0] != '(' && v[0] != '[') {
        if (len >= n)
            return -1;
        memcpy(out, v, len);
        out[len] = 0;
        return strspn(out, "0123456789") == len ? 0 : -1;
    }
    while (len >= 2 && v[0] == '(' && v[len - 1] == ')')
        v++, len -= 2;
    if (len >= sizeof body)
        return -1;
    for (i = 0; i < len; i++)
        if (v[i] != ' ')
            body[o++] = v[i];
    body[o] = 0;
    o = 0;
    if (n < 3)
        return -1;
    out[o++] = '[';
    for (p = body; *p;) {
        const char *close;
        long rep = 1, k;
        char *end;
        if (*p != '[' || !(close = strchr(p, ']')))
            return -1;
        if (close[1] == '*') {
            rep = strtol(close + 2, &end, 10);
            if (end == close + 2 || rep < 0 || rep > 100000)
                return -1;
        } else {
            end = (char *)close + 1;
        }
        for (k = 0; k < rep; k++) {
            const char *q = p + 1;
            while (q < close) {
                size_t w = strcspn(q, ",]");
                if (!w || strspn(q, "0123456789") != w)
                    return -1;
                if (o + w + 3 >= n)
                    return -1;
                if (!first)
                    out[o++] = ',';
                first = 0;
                memcpy(out + o, q, w);
                o += w;
                q += w + (q[w] == ',');
            }
        }
        p = end;
        if (*p == '+')
            p++;
        else if (*p)
            return -1;
    }
    out[o++] = ']';
    out[o] = 0;
    return 0;
}

static int render_core(const mt_contract *c, const mt_kv *cfg, uint32_t dialect,
                       mt_rendered *out, mt_diag *d)
{
    int bmain = bridge_main(c);
    size_t i;
    char buf[1024];
    const char *heads = mt_kv_get(cfg, "num_attention_heads");
    for (i = 0; i < sizeof core_flags / sizeof core_flags[0]; i++) {
        const core_flag *f = &core_flags[i];
        const char *v = mt_kv_get(cfg, f->knob);
        int on;
        if (!v)
            continue;
        on = f->when == ALWAYS || (f->when == NONZERO && *v && strcmp(v, "0")) ||
             (f->when == IS_TRUE && !strcmp(v, "true")) || (f->when == NONEMPTY && *v);
        /* The default pattern "1" (every layer MoE) needs no flag. */
        if (!strcmp(f->knob, "moe_layer_freq") && !strcmp(v, "1"))
            on = 0;
        if (!on)
            continue;
        if (dialect == MT_DIALECT_BRIDGE) {
            const char *path = f->bridge;
            char list[1024];
            if (!strcmp(f->knob, "moe_layer_freq")) {
                if (layer_freq_list(v, list, sizeof list)) {
                    mt_diag_add(d, NULL, 0, "moe_layer_freq",
                                "--moe-layer-freq %s has no Megatron-Bridge form: "
                                "model.moe_layer_freq takes an integer or a list of 0/1 "
                                "written out, and this is neither [..] nor [..]*k terms",
                                v);
                    return -1;
                }
                v = list;
            }
            /* main: validation.*; 0.2.x: train.* (main copies those with a warning) */
            if (!strcmp(f->knob, "eval_interval") && bmain)
                path = "validation.eval_interval";
            snprintf(buf, sizeof buf, "%s=%s", path, f->when == IS_TRUE ? "True" : v);
            mt_strlist_push(&out->argv, buf);
            /* 0.2.x asserts model.seq_length == dataset.sequence_length; main
             * copies dataset.seq_length over model.seq_length */
            if (!strcmp(f->knob, "seq_length")) {
                snprintf(buf, sizeof buf, "%s=%s",
                         bmain ? "dataset.seq_length" : "dataset.sequence_length", v);
                mt_strlist_push(&out->argv, buf);
            }
            continue;
        }
        /* Megatron needs GQA switched on explicitly before it reads the group count. */
        if (!strcmp(f->knob, "num_query_groups") && heads && !strcmp(v, heads))
            continue;
        if (!strcmp(f->knob, "num_query_groups"))
            mt_strlist_push(&out->argv, "--group-query-attention");
        flag_name(f->knob, buf, sizeof buf);
        if (fixed_has(c, buf))
            continue;
        mt_strlist_push(&out->argv, buf);
        if (f->when != IS_TRUE)
            mt_strlist_push(&out->argv, v);
        if (!strcmp(f->knob, "seq_length") && !fixed_has(c, "--max-position-embeddings")) {
            mt_strlist_push(&out->argv, "--max-position-embeddings");
            mt_strlist_push(&out->argv, v);
        }
    }
    /* Without an eval interval the run must not evaluate at all. */
    if (!strcmp(mt_kv_get(cfg, "eval_interval") ? mt_kv_get(cfg, "eval_interval") : "0", "0")) {
        if (dialect == MT_DIALECT_BRIDGE)
            mt_strlist_push(&out->argv, bmain ? "validation.eval_iters=0" : "train.eval_iters=0");
        else if (!fixed_has(c, "--eval-iters"))
            mt_strlist_push(&out->argv, "--eval-iters"), mt_strlist_push(&out->argv, "0");
    }
    if (mt_kv_get(c->data, "dataset") && !strcmp(mt_kv_get(c->data, "dataset"), "mock")) {
        if (dialect == MT_DIALECT_BRIDGE)
            mt_strlist_push(&out->argv, "dataset.mock=True");
        else
            mt_strlist_push(&out->argv, "--mock-data");
    }
    return 0;
}

int mt_render(mt_registry *r, const mt_contract *c, const mt_kv *cfg, uint32_t dialect,
              mt_rendered *out, mt_diag *d)
{
    mt_ctx_v1 ctx = mt_ctx_make(c, cfg, NULL, NULL);
    size_t i;
    const char *k, *v;
    for (i = 0; mt_kv_entry(c->launch_env, i, &k, &v) == 0; i++)
        mt_kv_set(out->env, k, v);
    if (render_core(c, cfg, dialect, out, d))
        return -1;
    if (mt_registry_render(r, &ctx, dialect, out, d))
        return -1;
    /* The contract's fixed flags come last, verbatim. */
    for (i = 0; dialect == MT_DIALECT_MLM && i < c->n_fixed_args; i++)
        mt_strlist_push(&out->argv, c->fixed_args[i]);
    return 0;
}
