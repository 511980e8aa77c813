#include "config.h"

#include "layout.h"
#include "sha256.h"
#include "spell.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mt_config_set(const mt_registry *r, mt_kv *cfg, const char *knob, const char *value,
                  const char *file, int line, const char *where, mt_diag *d)
{
    char canon[2048], why[1024];
    if (!mt_registry_knob(r, knob, NULL)) {
        size_t n = 0;
        const char **names = mt_registry_knob_names(r, &n);
        const char *close = names ? mt_spell_closest(knob, names, n) : NULL;
        if (close)
            mt_diag_add(d, file, line, where, "unknown knob '%s'; did you mean '%s'?", knob, close);
        else
            mt_diag_add(d, file, line, where,
                        "unknown knob '%s'; `moetune plugins` lists the knobs each plugin owns",
                        knob);
        free(names);
        return -1;
    }
    if (mt_registry_normalize(r, knob, value, canon, sizeof canon, why, sizeof why)) {
        mt_diag_add(d, file, line, where, "%s", why);
        return -1;
    }
    mt_kv_set(cfg, knob, canon);
    return 0;
}

/* The core's base knobs from the contract's model, batch, data, windows. */
static void core_from_contract(mt_kv *cfg, const mt_contract *c)
{
    static const char *const shape[] = {
        "num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads",
        "num_query_groups", "kv_channels", "num_experts", "moe_router_topk",
        "moe_ffn_hidden_size", "moe_shared_expert_intermediate_size", "multi_latent_attention",
        "q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim",
        "vocab_size", "mtp_num_layers"};
    size_t i;
    long dense = 0, layers = 0;
    for (i = 0; i < sizeof shape / sizeof shape[0]; i++) {
        const char *v = mt_kv_get(c->model, shape[i]);
        if (v)
            mt_kv_set(cfg, shape[i], v);
    }
    if (mt_kv_get(c->model, "first_k_dense"))
        dense = strtol(mt_kv_get(c->model, "first_k_dense"), NULL, 10);
    if (mt_kv_get(c->model, "num_layers"))
        layers = strtol(mt_kv_get(c->model, "num_layers"), NULL, 10);
    /* Megatron's pattern syntax for "first k layers dense". */
    if (dense > 0)
        mt_kv_setf(cfg, "moe_layer_freq", "([0]*%ld+[1]*%ld)", dense, layers - dense);
    else
        mt_kv_set(cfg, "moe_layer_freq", "1");
    mt_kv_set(cfg, "seq_length", mt_kv_get(c->batch, "seq_length"));
    mt_kv_set(cfg, "global_batch_size", mt_kv_get(c->batch, "global_batch_size"));
    mt_kv_setf(cfg, "train_iters", "%d", c->screen.steps);
    mt_kv_setf(cfg, "log_interval", "%d", c->log_interval);
    mt_kv_set(cfg, "log_throughput", "true");
    mt_kv_setf(cfg, "eval_interval", "%d", c->eval_interval);
    mt_kv_setf(cfg, "save_interval", "%d", c->save_interval);
    mt_kv_set(cfg, "seed", mt_kv_get(c->data, "seed") ? mt_kv_get(c->data, "seed") : "1234");
    if (c->drop_and_pad) {
        mt_kv_set(cfg, "moe_expert_capacity_factor", "1.0");
        mt_kv_set(cfg, "moe_pad_expert_input_to_capacity", "true");
    }
}

mt_kv *mt_config_base(const mt_registry *r, const mt_contract *c, mt_diag *d)
{
    mt_kv *cfg = mt_kv_new();
    size_t i, nerr = mt_diag_count(d);
    const char *k, *v;

    if (!cfg)
        return NULL;
    for (i = 0; i < mt_registry_count(r); i++) {
        const mt_plugin *p = mt_registry_at(r, i);
        uint32_t j;
        if (!p->enabled)
            continue;
        for (j = 0; j < p->desc->n_knobs; j++)
            mt_kv_set(cfg, p->desc->knobs[j].name, p->desc->knobs[j].default_value);
    }
    {
        /* core defaults first, then the contract's values */
        size_t n = 0;
        const char **names = mt_registry_knob_names(r, &n);
        for (i = 0; names && i < n; i++)
            if (mt_registry_is_core(names[i]))
                mt_kv_set(cfg, names[i], mt_registry_knob(r, names[i], NULL)->default_value);
        free(names);
    }
    core_from_contract(cfg, c);
    for (i = 0; mt_kv_entry(c->base, i, &k, &v) == 0; i++) {
        char field[512];
        snprintf(field, sizeof field, "base.%s", k);
        if (mt_registry_is_core(k)) {
            mt_diag_add(d, c->path, mt_contract_line(c, field), field,
                        "%s is a base setting the contract fixes elsewhere (model, batch, "
                        "intervals or data); move it there",
                        k);
            continue;
        }
        mt_config_set(r, cfg, k, v, c->path, mt_contract_line(c, field), field, d);
    }
    /* An environment variable that is a knob must be set as one, or the
     * plugin that owns it would never see it. */
    for (i = 0; mt_kv_entry(c->launch_env, i, &k, &v) == 0; i++) {
        char knob[300], field[300];
        snprintf(knob, sizeof knob, "env.%s", k);
        snprintf(field, sizeof field, "launch.env.%s", k);
        if (mt_registry_knob(r, knob, NULL))
            mt_diag_add(d, c->path, mt_contract_line(c, field), field,
                        "%s is a knob; set it in base (env = { %s = \"%s\"; }) so its owner checks "
                        "and records it",
                        k, k, v);
    }
    if (mt_diag_count(d) > nerr)
        mt_kv_destroy(&cfg);
    return cfg;
}

char *mt_config_canonical(const mt_kv *cfg)
{
    size_t i, len = 1, off = 0;
    const char *k, *v;
    char *out;
    for (i = 0; mt_kv_entry(cfg, i, &k, &v) == 0; i++)
        len += strlen(k) + strlen(v) + 2;
    out = malloc(len);
    if (!out)
        return NULL;
    for (i = 0; mt_kv_entry(cfg, i, &k, &v) == 0; i++)
        off += (size_t)sprintf(out + off, "%s=%s\n", k, v);
    out[off] = '\0';
    return out;
}

void mt_config_id(const mt_kv *cfg, char id[17])
{
    char *text = mt_config_canonical(cfg), hex[65];
    mt_sha256_hex(text ? text : "", text ? strlen(text) : 0, hex);
    memcpy(id, hex, 16);
    id[16] = '\0';
    free(text);
}

int mt_config_diff(const mt_kv *a, const mt_kv *b, mt_strlist *out)
{
    size_t i = 0, j = 0;
    const char *ka, *va, *kb, *vb;
    char line[4096];
    int n = 0;
    for (;;) {
        int ha = mt_kv_entry(a, i, &ka, &va) == 0, hb = mt_kv_entry(b, j, &kb, &vb) == 0;
        int c;
        if (!ha && !hb)
            break;
        c = !ha ? 1 : !hb ? -1 : strcmp(ka, kb);
        if (c == 0) {
            if (strcmp(va, vb)) {
                snprintf(line, sizeof line, "%s: %s -> %s", ka, *va ? va : "\"\"", *vb ? vb : "\"\"");
                mt_strlist_push(out, line), n++;
            }
            i++, j++;
        } else if (c < 0) {
            snprintf(line, sizeof line, "%s: %s -> (absent)", ka, va);
            mt_strlist_push(out, line), n++, i++;
        } else {
            snprintf(line, sizeof line, "%s: (absent) -> %s", kb, vb);
            mt_strlist_push(out, line), n++, j++;
        }
    }
    return n;
}

static long get_long(const mt_kv *kv, const char *k, long def)
{
    const char *v = mt_kv_get(kv, k);
    return v && *v ? strtol(v, NULL, 10) : def;
}

/* Number of stages of a pipeline layout, or 1 when it cannot be read (the
 * folding plugin reports malformed layouts). */
static long layout_stages(const char *s)
{
    mt_layout_stage st[1024]; /* 16 KiB: far more stages than any cluster has */
    int n = mt_layout_parse(s, st, 1024, NULL);
    return n > 0 ? n : 1;
}

void mt_config_mesh(const mt_kv *cfg, const mt_kv *hw, mt_mesh *m)
{
    const char *layout = mt_kv_get(cfg, "pipeline_model_parallel_layout");
    long layers = get_long(cfg, "num_layers", 1);
    memset(m, 0, sizeof *m);
    m->world = get_long(hw, "world_size", 1);
    m->tp = get_long(cfg, "tensor_model_parallel_size", 1);
    m->cp = get_long(cfg, "context_parallel_size", 1);
    m->pp = get_long(cfg, "pipeline_model_parallel_size", 1);
    m->ep = get_long(cfg, "expert_model_parallel_size", 1);
    m->etp = get_long(cfg, "expert_tensor_parallel_size", 0);
    if (m->etp <= 0)
        m->etp = m->tp;
    if (m->tp < 1) m->tp = 1;
    if (m->cp < 1) m->cp = 1;
    if (m->pp < 1) m->pp = 1;
    if (m->ep < 1) m->ep = 1;
    m->vpp = 1;
    if (layout && *layout)
        m->vpp = layout_stages(layout) / m->pp;
    else if (get_long(cfg, "num_virtual_stages_per_pipeline_rank", 0) > 0)
        m->vpp = get_long(cfg, "num_virtual_stages_per_pipeline_rank", 0);
    else if (get_long(cfg, "num_layers_per_virtual_pipeline_stage", 0) > 0)
        m->vpp = layers / m->pp / get_long(cfg, "num_layers_per_virtual_pipeline_stage", 1);
    if (m->vpp < 1)
        m->vpp = 1;
    m->whole = m->world % (m->tp * m->cp * m->pp) == 0 && m->world % (m->etp * m->ep * m->pp) == 0;
    m->dp = m->world / (m->tp * m->cp * m->pp);
    m->edp = m->world / (m->etp * m->ep * m->pp);
}

void mt_mesh_format(const mt_mesh *m, char *att, size_t alen, char *moe, size_t mlen)
{
    char vpp[32] = "";
    if (m->vpp > 1)
        snprintf(vpp, sizeof vpp, " (VPP%ld)", m->vpp);
    snprintf(att, alen, "Attention: TP%ld x CP%ld x DP%ld x PP%ld%s%s", m->tp, m->cp, m->dp, m->pp,
             vpp, m->whole ? "" : "  [does not divide the world]");
    snprintf(moe, mlen, "MoE: ETP%ld x EP%ld x EDP%ld x PP%ld%s%s", m->etp, m->ep, m->edp, m->pp,
             vpp, m->whole ? "" : "  [does not divide the world]");
}

static const mt_kv *empty_view(void)
{
    static mt_kv *empty;
    if (!empty)
        empty = mt_kv_new();
    return empty;
}

mt_ctx_v1 mt_ctx_make(const mt_contract *c, const mt_kv *cfg, const mt_kv *evidence,
                      const mt_kv *changed)
{
    mt_ctx_v1 ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.struct_size = sizeof ctx;
    ctx.config = cfg;
    ctx.hardware = c->hardware;
    ctx.model = c->model;
    ctx.contract = c->view;
    ctx.evidence = evidence ? evidence : empty_view();
    ctx.changed = changed;
    return ctx;
}

int mt_config_normalize_space(const mt_registry *r, mt_contract *c, mt_diag *d)
{
    size_t i, n = mt_kv_count(c->space);
    int problems = 0;
    for (i = 0; i < n; i++) {
        const char *k, *v;
        char field[300], *copy, *p, *out = NULL;
        size_t olen = 0, nvals = 0;
        mt_kv_entry(c->space, i, &k, &v);
        snprintf(field, sizeof field, "space.%s", k);
        if (mt_registry_is_core(k)) {
            mt_diag_add(d, c->path, mt_contract_line(c, field), field,
                        "%s is fixed by the contract (model, batch, intervals or data) and cannot "
                        "be searched",
                        k);
            problems++;
            continue;
        }
        copy = strdup(v);
        for (p = copy; p && problems >= 0;) {
            char *nl = strchr(p, '\n'), canon[2048], why[1024];
            if (nl)
                *nl = '\0';
            if (!mt_registry_knob(r, k, NULL)) {
                mt_kv *scratch = mt_kv_new();
                mt_config_set(r, scratch, k, p, c->path, mt_contract_line(c, field), field, d);
                mt_kv_destroy(&scratch);
                problems++;
                break;
            }
            if (mt_registry_normalize(r, k, p, canon, sizeof canon, why, sizeof why)) {
                mt_diag_add(d, c->path, mt_contract_line(c, field), field, "%s", why);
                problems++;
            } else {
                size_t cl = strlen(canon);
                char *grown = realloc(out, olen + cl + 2);
                if (grown) {
                    out = grown;
                    if (nvals++) /* by count: an empty first value still counts */
                        out[olen++] = '\n';
                    memcpy(out + olen, canon, cl + 1);
                    olen += cl;
                }
            }
            p = nl ? nl + 1 : NULL;
        }
        if (out) {
            char key[300];
            snprintf(key, sizeof key, "space.%s", k);
            mt_kv_set(c->view, key, out);
            /* c->space is being iterated: replace the value in place by key */
            mt_kv_set(c->space, k, out);
        }
        free(out);
        free(copy);
    }
    return problems;
}
