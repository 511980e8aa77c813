/*
 * folding - parallel folding (TP, PP, CP, EP, ETP, sequence parallel, virtual
 * pipeline, uneven stages, explicit pipeline layouts) and the micro-batch size.
 *
 * check() reports Megatron's own start-up checks of the folding (world size,
 * virtual pipeline options, pipeline divisibility, first/last stage sizes;
 * validate_args and TransformerConfig, per version) over the parsed command
 * line, and the expert-grid tiling as a runtime rule.  fold_rules() is the
 * plugin's stricter filter of its own candidates (propose() never offers a
 * layout it refuses); it reports nothing.
 *
 * propose() follows the fit and scale phases of the MoE workflow: legal
 * layouts for the world size, lowest dense TP first, then PP ascending
 * (PP > 1 is for models that do not fit), then CP, then the largest legal EP;
 * after them the two headroom moves, TP down one legal step and MBS up with
 * GBS fixed.
 */
#include "pluginkit.h"

#include <ctype.h>

/* Longest layout taken as is (with the terminator): short enough that the
 * Bridge override "model.pipeline_model_parallel_layout=<layout>" fits
 * pk_render's 512-byte buffer. */
#define LAYOUT_MAX 400
#define LAYOUT_MAX_ENTRIES 100000 /* unrolled E/t/m/L/| entries               */
#define LAYOUT_MAX_REPEAT 100000
#define SIZE_MAX_SANE (1L << 20)  /* keeps products of three sizes in a long   */
#define MAX_VALUES 32
#define MAX_LAYOUT_CANDIDATES 12
#define EP_PER_GROUP 2            /* built-in EP values tried per (TP, PP, CP) */

static const mt_knob_v1 folding_knobs[] = {
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_INT, "tensor_model_parallel_size", NULL, "1",
     "dense tensor parallel size (TP)"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_INT, "pipeline_model_parallel_size", NULL, "1",
     "pipeline parallel size (PP)"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_INT, "context_parallel_size", NULL, "1",
     "context parallel size (CP)"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_INT, "expert_model_parallel_size", NULL, "1",
     "expert parallel size (EP)"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_INT, "expert_tensor_parallel_size", NULL, "0",
     "expert tensor parallel size (ETP); 0 = unset, Megatron then uses TP"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_BOOL, "sequence_parallel", NULL, "false",
     "sequence parallelism over the TP group"},
    /* The next four are strings so that unset ("") and a given 0 stay apart:
     * Megatron treats a given 0 as set (and refuses it). */
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_STRING, "num_layers_per_virtual_pipeline_stage",
     NULL, "", "layers per virtual pipeline chunk (an integer); \"\" = unset"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_STRING, "num_virtual_stages_per_pipeline_rank", NULL,
     "", "virtual pipeline stages per rank (VPP, an integer); \"\" = unset"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_STRING, "pipeline_model_parallel_layout", NULL, "",
     "explicit layer layout: stages split by '|', E t m L, (...)*k and t*k; \"\" = unset"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_STRING, "decoder_first_pipeline_num_layers", NULL,
     "", "transformer layers on the first pipeline stage (an integer); \"\" = even split"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_STRING, "decoder_last_pipeline_num_layers", NULL,
     "", "transformer layers on the last pipeline stage (an integer); \"\" = even split"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_INT, "micro_batch_size", NULL, "1",
     "micro-batch size (MBS); gradient accumulation = GBS / (MBS * DP)"},
};

#define LAYOUT_KNOBS                                                                             \
    "tensor_model_parallel_size pipeline_model_parallel_size context_parallel_size "           \
    "expert_model_parallel_size expert_tensor_parallel_size sequence_parallel "                \
    "num_layers_per_virtual_pipeline_stage num_virtual_stages_per_pipeline_rank "              \
    "pipeline_model_parallel_layout decoder_first_pipeline_num_layers "                        \
    "decoder_last_pipeline_num_layers"

static const mt_variable_v1 folding_variables[] = {
    {sizeof(mt_variable_v1), "layout", LAYOUT_KNOBS, MT_WALL_MEMORY | MT_WALL_COMM},
    {sizeof(mt_variable_v1), "mbs", "micro_batch_size", MT_WALL_COMPUTE | MT_WALL_HOST},
};

/* What the rules read besides this plugin's knobs; 0 = unknown (the rule that
 * needs it is then skipped rather than guessed). */
typedef struct shape {
    long world, nvlink, gpus_per_node;
    long layers, mtp, heads, groups, experts, seq, gbs;
    int mla;
} shape;

/* This plugin's knobs as numbers; etp == 0 means "same as TP". */
typedef struct fold {
    long tp, pp, cp, ep, etp, vpp_layers, vpp_stages, first, last, mbs;
    int sp;
    int layout_too_long;
    char layout[LAYOUT_MAX];
} fold;

/* ------------------------------------------------------------------------ */
/* Reading the context                                                       */

/* Core knobs live in the config; the model table is the fallback for hosts
 * that keep the shape apart. */
static long core_int(const mt_ctx_v1 *ctx, const char *key, long def)
{
    if (pk_get(ctx->config, key))
        return pk_int(ctx->config, key, def);
    return pk_int(ctx->model, key, def);
}

static void shape_read(const mt_ctx_v1 *ctx, shape *sh)
{
    sh->gpus_per_node = pk_int(ctx->hardware, "gpus_per_node", 0);
    sh->world = pk_int(ctx->hardware, "world_size", 0);
    if (sh->world <= 0)
        sh->world = sh->gpus_per_node * pk_int(ctx->hardware, "nodes", 0);
    sh->nvlink = pk_int(ctx->hardware, "nvlink_domain", sh->gpus_per_node);
    sh->layers = core_int(ctx, "num_layers", 0);
    sh->mtp = core_int(ctx, "mtp_num_layers", 0);
    sh->heads = core_int(ctx, "num_attention_heads", 0);
    sh->groups = core_int(ctx, "num_query_groups", 0);
    sh->experts = core_int(ctx, "num_experts", 0);
    sh->seq = core_int(ctx, "seq_length", 0);
    sh->gbs = core_int(ctx, "global_batch_size", 0);
    sh->mla = pk_get(ctx->config, "multi_latent_attention")
                  ? pk_bool(ctx->config, "multi_latent_attention")
                  : pk_bool(ctx->model, "multi_latent_attention");
    if (sh->mtp < 0)
        sh->mtp = 0;
    if (sh->experts < 0)
        sh->experts = 0;
}

static void fold_read(const mt_kv *c, fold *f)
{
    const char *layout = pk_str(c, "pipeline_model_parallel_layout", "");
    f->tp = pk_int(c, "tensor_model_parallel_size", 1);
    f->pp = pk_int(c, "pipeline_model_parallel_size", 1);
    f->cp = pk_int(c, "context_parallel_size", 1);
    f->ep = pk_int(c, "expert_model_parallel_size", 1);
    f->etp = pk_int(c, "expert_tensor_parallel_size", 0);
    f->sp = pk_bool(c, "sequence_parallel");
    f->vpp_layers = pk_int(c, "num_layers_per_virtual_pipeline_stage", 0);
    f->vpp_stages = pk_int(c, "num_virtual_stages_per_pipeline_rank", 0);
    f->first = pk_int(c, "decoder_first_pipeline_num_layers", 0);
    f->last = pk_int(c, "decoder_last_pipeline_num_layers", 0);
    f->mbs = pk_int(c, "micro_batch_size", 1);
    f->layout_too_long = strlen(layout) >= sizeof f->layout;
    snprintf(f->layout, sizeof f->layout, "%s", layout);
}

static long fold_etp(const fold *f)
{
    return f->etp > 0 ? f->etp : f->tp;
}

static int blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',';
}

/* Whitespace and commas are cosmetic, so a layout of only those is unset. */
static int layout_set(const fold *f)
{
    const char *p;
    for (p = f->layout; *p; p++)
        if (!blank(*p))
            return 1;
    return 0;
}

/* The layout without whitespace: one argv token, and one Bridge value that
 * pk_render does not mistake for a list. */
static void layout_compact(const char *in, char *out, size_t n)
{
    size_t o = 0;
    for (; *in && o + 1 < n; in++)
        if (*in != ' ' && *in != '\t' && *in != '\n' && *in != '\r')
            out[o++] = *in;
    out[o] = '\0';
}

/* ------------------------------------------------------------------------ */
/* Layout strings                                                            */

/* Counts gathered while unrolling a layout the way Megatron's
 * parse_str_to_list does: (...)*k first (one level, no nesting), then x*k. */
typedef struct layout_info {
    long stages, t, m, e, l;
    long entries;
    long stage_syms;     /* symbols in the stage being filled        */
    int e_misplaced;     /* an E that does not open stage 0           */
    long m_stage;        /* stage of the first m, -1 when none        */
    int m_split;         /* m in more than one stage                  */
    int t_after_m;       /* a decoder layer after an MTP layer        */
    char last_sym;       /* last layer symbol and its stage           */
    long last_sym_stage;
    long err_pos; /* 1-based character position; 0 = parsed */
    char err[200];
} layout_info;

static int layout_fail(layout_info *li, size_t pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int layout_fail(layout_info *li, size_t pos, const char *fmt, ...)
{
    va_list ap;
    li->err_pos = (long)pos + 1;
    va_start(ap, fmt);
    vsnprintf(li->err, sizeof li->err, fmt, ap);
    va_end(ap);
    return -1;
}

static int layout_emit(layout_info *li, char ch)
{
    long stage = li->stages - 1;
    if (++li->entries > LAYOUT_MAX_ENTRIES)
        return -1;
    if (ch == '|') {
        li->stages++;
        li->stage_syms = 0;
        return 0;
    }
    switch (ch) {
    case 'E':
        li->e++;
        if (stage != 0 || li->stage_syms != 0)
            li->e_misplaced = 1;
        break;
    case 'L':
        li->l++;
        break;
    case 't':
        li->t++;
        if (li->m)
            li->t_after_m = 1;
        break;
    default: /* 'm' */
        if (li->m_stage < 0)
            li->m_stage = stage;
        else if (li->m_stage != stage)
            li->m_split = 1;
        li->m++;
        break;
    }
    li->stage_syms++;
    li->last_sym = ch;
    li->last_sym_stage = stage;
    return 0;
}

static size_t skip_blank(const char *s, size_t i, size_t to)
{
    while (i < to && blank(s[i]))
        i++;
    return i;
}

/* A decimal repeat count at s[i]; *end gets the index after it. */
static int layout_count(layout_info *li, const char *s, size_t i, size_t to, size_t star,
                        long *k, size_t *end)
{
    long v = 0;
    if (i >= to || !isdigit((unsigned char)s[i]))
        return layout_fail(li, i < to ? i : star, "'*' must be followed by a repeat count");
    for (; i < to && isdigit((unsigned char)s[i]); i++) {
        v = v * 10 + (s[i] - '0');
        if (v > LAYOUT_MAX_REPEAT)
            return layout_fail(li, i, "repeat count above %d", LAYOUT_MAX_REPEAT);
    }
    *k = v;
    *end = i;
    return 0;
}

/* Symbols, x*k and '|' between from and to (no parentheses). With apply == 0
 * only the syntax is checked, so a group repeated zero times is still
 * validated. */
static int layout_segment(layout_info *li, const char *s, size_t from, size_t to, int apply)
{
    size_t i = from;
    while (i < to) {
        char ch = s[i];
        size_t sym, j;
        long k = 1, r;
        if (blank(ch)) {
            i++;
            continue;
        }
        if (ch == '*')
            return layout_fail(li, i, "'*' must follow a layer symbol or a ')'");
        if (isdigit((unsigned char)ch))
            return layout_fail(li, i, "'%c' is a stray digit: a repeat count needs '*' before it",
                               ch);
        if (ch != 'E' && ch != 't' && ch != 'm' && ch != 'L' && ch != '|')
            return layout_fail(li, i,
                               "'%c' is not a layout symbol (E embedding, t transformer layer, m "
                               "MTP layer, L loss, | stage break)",
                               ch);
        sym = i++;
        j = skip_blank(s, i, to);
        if (j < to && s[j] == '*') {
            if (layout_count(li, s, skip_blank(s, j + 1, to), to, j, &k, &i) < 0)
                return -1;
        }
        if (!apply)
            continue;
        for (r = 0; r < k; r++)
            if (layout_emit(li, s[sym]) < 0)
                return layout_fail(li, sym, "unrolls to more than %d entries",
                                   LAYOUT_MAX_ENTRIES);
    }
    return 0;
}

/* Parses s into li; returns 0, or -1 with li->err_pos/err set. */
static int layout_parse(const char *s, layout_info *li)
{
    size_t i = 0, n = strlen(s);
    memset(li, 0, sizeof *li);
    li->stages = 1;
    li->m_stage = -1;
    while (i < n) {
        if (s[i] == '(') {
            size_t open = i, close, j;
            long k, r;
            for (close = open + 1; close < n && s[close] != ')'; close++)
                if (s[close] == '(')
                    return layout_fail(li, close,
                                       "nested '(' is not supported (Megatron unrolls one "
                                       "level of (...)*k)");
            if (close == n)
                return layout_fail(li, open, "'(' is never closed");
            if (skip_blank(s, open + 1, close) == close)
                return layout_fail(li, open, "'()' holds nothing to repeat");
            j = skip_blank(s, close + 1, n);
            if (j >= n || s[j] != '*')
                return layout_fail(li, j < n ? j : close, "')' must be followed by '*<count>'");
            if (layout_count(li, s, skip_blank(s, j + 1, n), n, j, &k, &i) < 0)
                return -1;
            if (layout_segment(li, s, open + 1, close, 0) < 0)
                return -1;
            for (r = 0; r < k; r++)
                if (layout_segment(li, s, open + 1, close, 1) < 0)
                    return -1;
            continue;
        }
        if (s[i] == ')')
            return layout_fail(li, i, "')' has no matching '('");
        {
            size_t j = i;
            while (j < n && s[j] != '(' && s[j] != ')')
                j++;
            if (layout_segment(li, s, i, j, 1) < 0)
                return -1;
            i = j;
        }
    }
    return 0;
}

/* Virtual stages per pipeline rank the config asks for (1 = none). */
static long fold_vpp(const shape *sh, const fold *f)
{
    if (layout_set(f)) {
        layout_info li;
        if (!f->layout_too_long && layout_parse(f->layout, &li) == 0 && f->pp > 0 &&
            li.stages % f->pp == 0)
            return li.stages / f->pp;
        return 1;
    }
    if (f->vpp_stages > 0)
        return f->vpp_stages;
    if (f->vpp_layers > 0 && f->pp > 0 && sh->layers > 0 && sh->layers % f->pp == 0 &&
        (sh->layers / f->pp) % f->vpp_layers == 0)
        return sh->layers / f->pp / f->vpp_layers;
    return 1;
}

/* ------------------------------------------------------------------------ */
/* Rules                                                                     */


/* Long layouts are quoted by their head so messages stay readable. */
static const char *ellipsis(const char *s)
{
    return strlen(s) > 60 ? "..." : "";
}

static void layout_rules(pk_rules *ro, const shape *sh, const fold *f)
{
    layout_info li;
    if (f->layout_too_long) {
        pk_fail(ro, "folding.layout_syntax", "pipeline_model_parallel_layout",
                  "pipeline_model_parallel_layout is malformed at character %d: longer than %d "
                  "characters; write repeats as (...)*k and t*k",
                  LAYOUT_MAX, LAYOUT_MAX - 1);
        return;
    }
    if (layout_parse(f->layout, &li) < 0) {
        pk_fail(ro, "folding.layout_syntax", "pipeline_model_parallel_layout",
                  "pipeline_model_parallel_layout \"%.60s%s\" is malformed at character %ld: %s",
                  f->layout, ellipsis(f->layout), li.err_pos, li.err);
        return;
    }
    if (li.stages % f->pp)
        pk_fail(ro, "folding.layout_stages",
                  "pipeline_model_parallel_layout pipeline_model_parallel_size",
                  "pipeline_model_parallel_layout \"%.60s%s\" has %ld stage%s, not a multiple "
                  "of pipeline_model_parallel_size %ld (the quotient is the VPP size); add or "
                  "merge stages or change PP",
                  f->layout, ellipsis(f->layout), li.stages, li.stages == 1 ? "" : "s", f->pp);
    else if (f->pp == 1 && li.stages > 1)
        pk_fail(ro, "folding.vpp_needs_pp",
                  "pipeline_model_parallel_layout pipeline_model_parallel_size",
                  "pipeline_model_parallel_layout has %ld stages with pipeline_model_parallel_size "
                  "1, i.e. virtual pipeline stages without a pipeline; use PP > 1 or a "
                  "single-stage layout",
                  li.stages);
    if (sh->layers > 0 && li.t != sh->layers)
        pk_fail(ro, "folding.layout_layers", "pipeline_model_parallel_layout num_layers",
                  "pipeline_model_parallel_layout places %ld transformer layers (t) but "
                  "num_layers is %ld; every layer must be placed exactly once",
                  li.t, sh->layers);
    if (li.m != sh->mtp)
        pk_fail(ro, "folding.layout_mtp", "pipeline_model_parallel_layout mtp_num_layers",
                  "pipeline_model_parallel_layout places %ld MTP layers (m) but mtp_num_layers is "
                  "%ld; place each MTP layer exactly once",
                  li.m, sh->mtp);
    else if (li.t_after_m)
        pk_fail(ro, "folding.layout_mtp", "pipeline_model_parallel_layout mtp_num_layers",
                  "pipeline_model_parallel_layout puts a transformer layer (t) after an MTP "
                  "layer (m); decoder layers must come before MTP layers");
    else if (li.m_split)
        pk_fail(ro, "folding.layout_mtp", "pipeline_model_parallel_layout mtp_num_layers",
                  "pipeline_model_parallel_layout spreads the %ld MTP layers over several "
                  "stages; Megatron needs them all in one stage",
                  li.m);
    else if (li.m > 0 && li.stages % f->pp == 0 && li.m_stage / f->pp != li.stages / f->pp - 1)
        pk_fail(ro, "folding.layout_mtp", "pipeline_model_parallel_layout mtp_num_layers",
                  "pipeline_model_parallel_layout puts the MTP layers in stage %ld, virtual "
                  "stage %ld of %ld on its rank; Megatron needs them in the last virtual stage "
                  "(stage index >= %ld with PP %ld)",
                  li.m_stage + 1, li.m_stage / f->pp + 1, li.stages / f->pp,
                  (li.stages / f->pp - 1) * f->pp + 1, f->pp);
    if (li.e != 1)
        pk_fail(ro, "folding.layout_embedding", "pipeline_model_parallel_layout",
                  "pipeline_model_parallel_layout has %ld embedding entries (E); E must appear "
                  "exactly once, first in the first stage",
                  li.e);
    else if (li.e_misplaced)
        pk_fail(ro, "folding.layout_embedding", "pipeline_model_parallel_layout",
                  "pipeline_model_parallel_layout does not open with the embedding: E must be "
                  "the first entry of the first stage");
    if (li.l != 1)
        pk_fail(ro, "folding.layout_loss", "pipeline_model_parallel_layout",
                  "pipeline_model_parallel_layout has %ld loss entries (L); L must appear "
                  "exactly once, last in the last stage",
                  li.l);
    else if (li.last_sym != 'L' || li.last_sym_stage != li.stages - 1)
        pk_fail(ro, "folding.layout_loss", "pipeline_model_parallel_layout",
                  "pipeline_model_parallel_layout does not close with the loss: L must be the "
                  "last entry of the last stage (stage %ld of %ld)",
                  li.stages, li.stages);
}

static void uneven_rules(pk_rules *ro, const shape *sh, const fold *f)
{
    const char *knobs = "decoder_first_pipeline_num_layers decoder_last_pipeline_num_layers "
                        "pipeline_model_parallel_size num_layers";
    long rem = sh->layers, mid = f->pp, v = f->vpp_stages;
    if (f->pp < 2) {
        pk_fail(ro, "folding.uneven_stages", knobs,
                  "decoder_first_pipeline_num_layers %ld / decoder_last_pipeline_num_layers %ld "
                  "need pipeline stages, but pipeline_model_parallel_size is %ld; set PP > 1 or "
                  "unset them",
                  f->first, f->last, f->pp);
        return;
    }
    if (f->vpp_layers > 0)
        pk_fail(ro, "folding.uneven_stages",
                  "num_layers_per_virtual_pipeline_stage decoder_first_pipeline_num_layers "
                  "decoder_last_pipeline_num_layers",
                  "with uneven first/last stages Megatron takes VPP only as "
                  "--num-virtual-stages-per-pipeline-rank, not "
                  "--num-layers-per-virtual-pipeline-stage %ld",
                  f->vpp_layers);
    if (sh->layers <= 0)
        return;
    if (f->first > 0) {
        rem -= f->first;
        mid--;
    }
    if (f->last > 0) {
        rem -= f->last;
        mid--;
    }
    if (rem < 0 || (rem > 0) != (mid > 0) || (mid > 0 && rem % mid)) {
        pk_fail(ro, "folding.uneven_stages", knobs,
                  "first stage %ld + last stage %ld layers leave %ld of num_layers %ld for %ld "
                  "middle stages (PP %ld); the rest must split evenly over the middle stages",
                  f->first, f->last, rem, sh->layers, mid, f->pp);
        return;
    }
    if (v > 1 && ((f->first > 0 && f->first % v) || (f->last > 0 && f->last % v) ||
                  (mid > 0 && (rem / mid) % v)))
        pk_fail(ro, "folding.uneven_stages",
                  "num_virtual_stages_per_pipeline_rank decoder_first_pipeline_num_layers "
                  "decoder_last_pipeline_num_layers",
                  "with num_virtual_stages_per_pipeline_rank %ld the first (%ld), last (%ld) and "
                  "middle (%ld) stage layer counts must each divide by %ld; use a "
                  "pipeline_model_parallel_layout for such splits",
                  v, f->first, f->last, mid > 0 ? rem / mid : 0, v);
}

static void even_rules(pk_rules *ro, const shape *sh, const fold *f)
{
    long per;
    if (sh->layers <= 0)
        return;
    if (sh->layers % f->pp) {
        pk_fail(ro, "folding.pp_divides_layers", "pipeline_model_parallel_size num_layers",
                  "num_layers %ld is not divisible by pipeline_model_parallel_size %ld; pick a PP "
                  "that divides it, or give a pipeline_model_parallel_layout or first/last stage "
                  "sizes",
                  sh->layers, f->pp);
        return;
    }
    per = sh->layers / f->pp;
    if (f->vpp_layers > 0 && per % f->vpp_layers)
        pk_fail(ro, "folding.vpp_divides_stage_layers",
                  "num_layers_per_virtual_pipeline_stage pipeline_model_parallel_size num_layers",
                  "%ld layers per pipeline stage (num_layers %ld / PP %ld) do not divide into "
                  "chunks of num_layers_per_virtual_pipeline_stage %ld",
                  per, sh->layers, f->pp, f->vpp_layers);
    if (f->vpp_stages > 0 && per % f->vpp_stages)
        pk_fail(ro, "folding.vpp_divides_stage_layers",
                  "num_virtual_stages_per_pipeline_rank pipeline_model_parallel_size num_layers",
                  "%ld layers per pipeline stage (num_layers %ld / PP %ld) do not divide into "
                  "num_virtual_stages_per_pipeline_rank %ld virtual stages",
                  per, sh->layers, f->pp, f->vpp_stages);
}

/* Every folding rule; returns the number violated, reporting them to sink
 * when it is not NULL. */
static int fold_rules(const shape *sh, const fold *f, mt_sink *sink)
{
    pk_rules ro = {sink, 0};
    long etp = fold_etp(f), dp = 0;
    int has_layout = layout_set(f), uneven = f->first > 0 || f->last > 0;
    int vpp_forms = (f->vpp_layers > 0) + (f->vpp_stages > 0) + has_layout;

    if (f->tp < 1 || f->pp < 1 || f->cp < 1 || f->ep < 1 || f->mbs < 1 ||
        f->tp > SIZE_MAX_SANE || f->pp > SIZE_MAX_SANE || f->cp > SIZE_MAX_SANE ||
        f->ep > SIZE_MAX_SANE || f->etp > SIZE_MAX_SANE || f->mbs > SIZE_MAX_SANE) {
        pk_fail(&ro, "folding.sizes_range",
                  "tensor_model_parallel_size pipeline_model_parallel_size context_parallel_size "
                  "expert_model_parallel_size expert_tensor_parallel_size micro_batch_size",
                  "TP %ld, PP %ld, CP %ld, EP %ld, MBS %ld must be between 1 and %ld (ETP %ld "
                  "between 0 = same as TP and %ld)",
                  f->tp, f->pp, f->cp, f->ep, f->mbs, SIZE_MAX_SANE, f->etp, SIZE_MAX_SANE);
        return ro.n;
    }

    if (sh->world > 0) {
        if (sh->world % (f->tp * f->pp * f->cp))
            pk_fail(&ro, "folding.dp_whole",
                      "tensor_model_parallel_size pipeline_model_parallel_size "
                      "context_parallel_size",
                      "world size %ld is not divisible by TP*PP*CP = %ld*%ld*%ld = %ld, so the "
                      "data-parallel size is not whole; pick sizes whose product divides %ld",
                      sh->world, f->tp, f->pp, f->cp, f->tp * f->pp * f->cp, sh->world);
        else
            dp = sh->world / (f->tp * f->pp * f->cp);
        if (sh->world % (etp * f->ep * f->pp))
            pk_fail(&ro, "folding.expert_grid",
                      "expert_model_parallel_size expert_tensor_parallel_size "
                      "pipeline_model_parallel_size",
                      "expert grid ETP*EP*PP = %ld*%ld*%ld = %ld does not divide world size %ld; "
                      "pick EP and ETP so that it does",
                      etp, f->ep, f->pp, etp * f->ep * f->pp, sh->world);
    }

    if (f->ep > 1 && sh->experts == 0)
        pk_fail(&ro, "folding.ep_needs_experts", "expert_model_parallel_size num_experts",
                  "expert_model_parallel_size is %ld but the model has no experts "
                  "(num_experts 0); set EP 1",
                  f->ep);
    if (sh->experts > 0 && sh->experts % f->ep)
        pk_fail(&ro, "folding.ep_divides_experts", "expert_model_parallel_size num_experts",
                  "num_experts %ld is not divisible by expert_model_parallel_size %ld; pick an EP "
                  "that divides the expert count",
                  sh->experts, f->ep);
    if (sh->heads > 0 && sh->heads % f->tp)
        pk_fail(&ro, "folding.tp_divides_heads",
                  "tensor_model_parallel_size num_attention_heads",
                  "num_attention_heads %ld is not divisible by tensor_model_parallel_size %ld",
                  sh->heads, f->tp);
    /* MLA models too: Megatron's MLATransformerConfig runs this check. */
    if (sh->groups > 0 && sh->groups % f->tp)
        pk_fail(&ro, "folding.tp_divides_query_groups",
                  "tensor_model_parallel_size num_query_groups",
                  "num_query_groups %ld (GQA) is not divisible by tensor_model_parallel_size %ld; "
                  "each TP rank needs whole KV groups",
                  sh->groups, f->tp);
    if (f->sp && f->tp == 1)
        pk_fail(&ro, "folding.sp_needs_tp", "sequence_parallel tensor_model_parallel_size",
                  "sequence_parallel is on with tensor_model_parallel_size 1; Megatron turns it "
                  "off with a warning, so the config would not say what runs; set "
                  "sequence_parallel=false");
    if (sh->experts > 0 && f->tp > 1 && !f->sp)
        pk_fail(&ro, "folding.moe_tp_needs_sp",
                  "sequence_parallel tensor_model_parallel_size num_experts",
                  "a MoE model (num_experts %ld) with tensor_model_parallel_size %ld needs "
                  "sequence parallelism; set sequence_parallel=true",
                  sh->experts, f->tp);
    if (f->cp > 1 && sh->seq > 0 && sh->seq % (2 * f->cp))
        pk_fail(&ro, "folding.cp_divides_seq", "context_parallel_size seq_length",
                  "seq_length %ld is not divisible by 2*context_parallel_size = %ld (CP splits "
                  "the sequence into 2*CP chunks for load balance)",
                  sh->seq, 2 * f->cp);
    if (dp > 0 && sh->gbs > 0 && sh->gbs % (f->mbs * dp))
        pk_fail(&ro, "folding.gbs_divisible",
                  "micro_batch_size global_batch_size tensor_model_parallel_size "
                  "pipeline_model_parallel_size context_parallel_size",
                  "global_batch_size %ld is not divisible by MBS*DP = %ld*%ld = %ld; pick a "
                  "micro_batch_size or layout that divides it",
                  sh->gbs, f->mbs, dp, f->mbs * dp);

    if (vpp_forms > 1)
        pk_fail(&ro, "folding.vpp_exclusive",
                  "num_layers_per_virtual_pipeline_stage num_virtual_stages_per_pipeline_rank "
                  "pipeline_model_parallel_layout",
                  "set at most one of num_layers_per_virtual_pipeline_stage (%ld), "
                  "num_virtual_stages_per_pipeline_rank (%ld) and "
                  "pipeline_model_parallel_layout (%s)",
                  f->vpp_layers, f->vpp_stages, has_layout ? "set" : "unset");
    /* A virtual pipeline size of 1 is none: Megatron resets it to None. */
    if (f->pp == 1 && (f->vpp_layers > 0 || f->vpp_stages > 0) && fold_vpp(sh, f) > 1)
        pk_fail(&ro, "folding.vpp_needs_pp",
                  f->vpp_layers > 0 ? "num_layers_per_virtual_pipeline_stage "
                                      "pipeline_model_parallel_size"
                                    : "num_virtual_stages_per_pipeline_rank "
                                      "pipeline_model_parallel_size",
                  "a virtual pipeline (num_layers_per_virtual_pipeline_stage %ld, "
                  "num_virtual_stages_per_pipeline_rank %ld) needs pipeline_model_parallel_size "
                  "> 1; it is 1",
                  f->vpp_layers, f->vpp_stages);
    if (has_layout && uneven)
        pk_fail(&ro, "folding.layout_excludes_uneven",
                  "decoder_first_pipeline_num_layers decoder_last_pipeline_num_layers "
                  "pipeline_model_parallel_layout",
                  "pipeline_model_parallel_layout already places every layer; unset "
                  "decoder_first_pipeline_num_layers (%ld) and decoder_last_pipeline_num_layers "
                  "(%ld)",
                  f->first, f->last);

    if (has_layout)
        layout_rules(&ro, sh, f);
    else if (uneven)
        uneven_rules(&ro, sh, f);
    else
        even_rules(&ro, sh, f);
    return ro.n;
}

/* ------------------------------------------------------------------------ */
/* Start-up rules: Megatron's own checks of the parallel layout, over the
 * parsed namespace (ctx->args).  A = megatron/training/arguments.py
 * (validate_args), M = megatron/core/model_parallel_config.py,
 * T = megatron/core/transformer/transformer_config.py (__post_init__).
 * The layout's own validation (validate_layer_layout) and the batch and
 * model-shape checks are the core's (core/rules.c). */

enum { V_R15, V_V18, V_V19, V_MAIN };

static int fold_version(const mt_ctx_v1 *ctx)
{
    if (!pk_core_ge(ctx, "0.18"))
        return V_R15;
    if (!pk_core_ge(ctx, "0.19"))
        return V_V18;
    if (!pk_core_ge(ctx, "0.20"))
        return V_V19;
    return V_MAIN;
}




#define PIPE_KNOBS "pipeline_model_parallel_size num_layers"

/* A: the weight-shard count (0.19+), the world size, the VPP options and
 * the pipeline divisibility of validate_args. */
static void startup_validate_args(const mt_ctx_v1 *ctx, mt_sink *s)
{
    int ver = fold_version(ctx);
    long tp = pk_arg_int(ctx, "tensor_model_parallel_size", 1);
    long pp = pk_arg_int(ctx, "pipeline_model_parallel_size", 1);
    long cp = pk_arg_int(ctx, "context_parallel_size", 1);
    long world = pk_arg_int(ctx, "world_size", 1), gtp = 1, shards, total;
    long nlpvs = 0, nvspr = 0, layers = 0, vpp;
    int has_nlpvs = pk_arg_long(ctx, "num_layers_per_virtual_pipeline_stage", &nlpvs);
    int has_nvspr = pk_arg_long(ctx, "num_virtual_stages_per_pipeline_rank", &nvspr);
    const char *layout = pk_arg(ctx, "pipeline_model_parallel_layout");
    int uneven = pk_arg_set(ctx, "decoder_first_pipeline_num_layers") ||
                 pk_arg_set(ctx, "decoder_last_pipeline_num_layers");
    int acc = pk_arg_on(ctx, "account_for_embedding_in_pipeline_split") +
              pk_arg_on(ctx, "account_for_loss_in_pipeline_split");

    /* M:32 resolve_tensor_parallel_weight_shards (0.19+), for the dense
     * weights before the world-size check and for the experts after the
     * ETP default. */
    if (ver >= V_V19) {
        static const char *const pairs[][2] = {
            {"tensor_parallel_num_weight_shards", "tensor_model_parallel_size"},
            {"expert_tensor_parallel_num_weight_shards", "expert_tensor_parallel_size"},
        };
        size_t i;
        for (i = 0; i < 2; i++) {
            long t = pk_arg_int(ctx, pairs[i][1], 1);
            if (!pk_arg_raw_long(ctx, pairs[i][0], &shards))
                continue;
            if (shards < t)
                pk_startup(s, "folding.tp_weight_shards_lt_tp", pairs[i][1],
                           "%s (%ld) must be >= %s (%ld). -- the shard count covers TP times "
                           "the weight-remat factor; use a multiple of %ld",
                           pairs[i][0], shards, pairs[i][1], t, t);
            else if (i == 0 && t > 0 && pk_pymod(shards, t) == 0)
                gtp = shards / t;
        }
    }

    /* A:374 world size over TP*PP*CP (0.19+: times the weight-remat factor). */
    total = tp * pp * cp * gtp;
    if (total == 0)
        pk_startup(s, "folding.world_not_divisible_by_model_size",
                   "tensor_model_parallel_size pipeline_model_parallel_size "
                   "context_parallel_size",
                   "ZeroDivisionError: integer modulo by zero (world size %ld %% "
                   "total_model_size 0: TP %ld, PP %ld, CP %ld) -- every parallel size must be "
                   "at least 1",
                   world, tp, pp, cp);
    else if (pk_pymod(world, total))
        pk_startup(s, "folding.world_not_divisible_by_model_size",
                   "tensor_model_parallel_size pipeline_model_parallel_size "
                   "context_parallel_size",
                   "world size (%ld) is not divisible by total_model_size "
                   "(total_model_size=%ld) -- TP %ld * PP %ld * CP %ld%s must divide the GPU "
                   "count",
                   world, total, tp, pp, cp, gtp > 1 ? " * weight-remat factor" : "");

    /* A:532 at most one way to ask for virtual stages (0 counts as given). */
    if (has_nlpvs + has_nvspr + (layout != NULL) >= 2) {
        pk_startup(s, "folding.vpp_options_mutually_exclusive",
                   "num_layers_per_virtual_pipeline_stage num_virtual_stages_per_pipeline_rank "
                   "pipeline_model_parallel_layout",
                   "No more than one of the following arguments can be set at the same time: "
                   "--num-layers-per-virtual-pipeline-stage, --num-virtual-stages-per-pipeline-"
                   "rank,--pipeline-model-parallel-layout. "
                   "args.num_layers_per_virtual_pipeline_stage=%s, "
                   "args.num_virtual_stages_per_pipeline_rank=%s -- keep one",
                   has_nlpvs ? pk_arg(ctx, "num_layers_per_virtual_pipeline_stage") : "None",
                   has_nvspr ? pk_arg(ctx, "num_virtual_stages_per_pipeline_rank") : "None");
        return;
    }
    if (pp == 0)
        return; /* the world-size check divided by zero first */
    if (!pk_arg_long(ctx, "num_layers", &layers))
        pk_arg_long(ctx, "decoder_num_layers", &layers);
    if (layout) {
        /* A:548 the layout's stage count over PP gives VPP */
        static char buf[1 << 16];
        long stages = pk_layout_expand(layout, buf, sizeof buf);
        if (stages >= 0 && pk_pymod(stages, pp))
            pk_startup(s, "folding.layout_stages_not_divisible_by_pp",
                       "pipeline_model_parallel_layout pipeline_model_parallel_size",
                       "The length of pipeline_model_parallel_layout must be divisible by "
                       "pipeline_model_parallel_size (num_stages=%ld, "
                       "args.pipeline_model_parallel_size=%ld) -- add or merge stages so "
                       "their count is a multiple of PP",
                       stages, pp);
    } else if (has_nlpvs || has_nvspr) {
        if (!has_nvspr) {
            long l = layers + acc;
            if (uneven)
                pk_startup(s, "folding.vpp_uneven_needs_nvspr",
                           "num_layers_per_virtual_pipeline_stage "
                           "decoder_first_pipeline_num_layers decoder_last_pipeline_num_layers",
                           "please use --num-virtual-stages-per-pipeline-rank to specify "
                           "virtual pipeline parallel degree when enable uneven pipeline "
                           "parallelism -- replace --num-layers-per-virtual-pipeline-stage");
            else if (pk_pymod(l, pp))
                pk_startup(s, "folding.vpp_layers_not_divisible_by_pp", PIPE_KNOBS,
                           "number of layers of the model must be divisible pipeline model "
                           "parallel size -- %ld layers%s over PP %ld",
                           l, acc ? " (with the embedding/loss counted)" : "", pp);
            else if (nlpvs == 0)
                pk_startup(s, "folding.vpp_stage_not_divisible_by_layers_per_vstage",
                           "num_layers_per_virtual_pipeline_stage",
                           "ZeroDivisionError: integer modulo by zero "
                           "(--num-layers-per-virtual-pipeline-stage 0) -- give at least 1");
            else if (pk_pymod(pk_pydiv(l, pp), nlpvs))
                pk_startup(s, "folding.vpp_stage_not_divisible_by_layers_per_vstage",
                           "num_layers_per_virtual_pipeline_stage " PIPE_KNOBS,
                           "number of layers per pipeline stage must be divisible number of "
                           "layers per virtual pipeline stage -- %ld layers per stage, %ld per "
                           "virtual stage",
                           pk_pydiv(l, pp), nlpvs);
        }
    } else if (!uneven && pk_arg_set(ctx, "num_layers") && pk_pymod(layers + acc, pp)) {
        /* A:599 the plain even split */
        pk_startup(s, "folding.layers_not_divisible_by_pp", PIPE_KNOBS,
                   "Number of layers should be divisible by the pipeline-model-parallel size "
                   "-- %ld layers%s over PP %ld; pick a PP that divides them, or give "
                   "first/last stage sizes or a layout",
                   layers + acc, acc ? " (with the embedding/loss counted)" : "", pp);
    }

    /* A:604 the interleaved schedule needs enough pipeline ranks. */
    if (pk_arg_long(ctx, "virtual_pipeline_model_parallel_size", &vpp)) {
        if (pk_arg_on(ctx, "overlap_p2p_comm") && pp <= 1)
            pk_startup(s, "folding.interleaved_needs_pp_gt_1",
                       "pipeline_model_parallel_size num_virtual_stages_per_pipeline_rank",
                       "When interleaved schedule is used, pipeline-model-parallel size should "
                       "be greater than 1 -- virtual stages (VPP %ld) need PP > 1",
                       vpp);
        else if (!pk_arg_on(ctx, "overlap_p2p_comm") && pp <= 2)
            pk_startup(s, "folding.interleaved_needs_pp_gt_2",
                       "pipeline_model_parallel_size num_virtual_stages_per_pipeline_rank",
                       "When interleaved schedule is used and p2p communication overlap is "
                       "disabled, pipeline-model-parallel size should be greater than 2 to "
                       "avoid having multiple p2p sends and recvs between same 2 ranks per "
                       "communication batch -- VPP %ld with PP %ld",
                       vpp, pp);
    }
}

#define UNEVEN_KNOBS "decoder_first_pipeline_num_layers decoder_last_pipeline_num_layers"

/* T: the pipeline split of TransformerConfig.__post_init__ (first/last
 * stage sizes, the layout's conflicts, the embedding/loss accounting). */
static void startup_transformer_config(const mt_ctx_v1 *ctx, mt_sink *s)
{
    int ver = fold_version(ctx);
    long first = 0, last = 0, v = 0, layers = 0, pp = pk_arg_int(ctx, "pipeline_model_parallel_size", 1);
    int has_first = pk_arg_long(ctx, "decoder_first_pipeline_num_layers", &first);
    int has_last = pk_arg_long(ctx, "decoder_last_pipeline_num_layers", &last);
    int has_v = pk_arg_long(ctx, "virtual_pipeline_model_parallel_size", &v);
    int acc_e = pk_arg_on(ctx, "account_for_embedding_in_pipeline_split");
    int acc_l = pk_arg_on(ctx, "account_for_loss_in_pipeline_split");
    int first_set = pk_arg_set(ctx, "decoder_first_pipeline_num_layers");
    int last_set = pk_arg_set(ctx, "decoder_last_pipeline_num_layers");

    pk_arg_long(ctx, "num_layers", &layers);
    if ((first_set || last_set) && (acc_e || acc_l)) {
        pk_startup(s, "folding.first_last_with_account_for",
                   UNEVEN_KNOBS,
                   "num_layers_in_first_pipeline_stage and num_layers_in_last_pipeline_stage "
                   "cannot beset at the same time with account_for_embedding_in_pipeline_split"
                   "and account_for_loss_in_pipeline_split -- use one way to balance the ends");
        return;
    }
    if (pk_arg_set(ctx, "pipeline_model_parallel_layout")) {
        if (first_set || last_set || acc_e || acc_l)
            pk_startup(s, "folding.layout_with_other_pp_args",
                       "pipeline_model_parallel_layout " UNEVEN_KNOBS,
                       "pipeline_model_parallel_layout cannot be set with other pipeline layout "
                       "arguments. self.num_layers_in_first_pipeline_stage=%s, "
                       "self.num_layers_in_last_pipeline_stage=%s, "
                       "self.account_for_embedding_in_pipeline_split=%s, "
                       "self.account_for_loss_in_pipeline_split=%s. -- the layout places every "
                       "layer itself",
                       first_set ? pk_arg(ctx, "decoder_first_pipeline_num_layers") : "None",
                       last_set ? pk_arg(ctx, "decoder_last_pipeline_num_layers") : "None",
                       acc_e ? "True" : "False", acc_l ? "True" : "False");
        return;
    }
    if (first_set || last_set) {
        long rem = layers, pps = pp;
        if (first_set && has_first) {
            if (first <= 0) {
                pk_startup(s, "folding.first_stage_positive", UNEVEN_KNOBS,
                           "num_layers_in_first_pipeline_stage must be larger than 0 -- it is "
                           "%ld",
                           first);
                return;
            }
            if (has_v && v == 0) {
                pk_startup(s, "folding.first_stage_vpp_divisible",
                           "num_virtual_stages_per_pipeline_rank " UNEVEN_KNOBS,
                           "ZeroDivisionError: integer modulo by zero "
                           "(--num-virtual-stages-per-pipeline-rank 0) -- give at least 2 "
                           "virtual stages or none");
                return;
            }
            if (has_v && pk_pymod(first, v)) {
                pk_startup(s, "folding.first_stage_vpp_divisible",
                           "decoder_first_pipeline_num_layers num_virtual_stages_per_pipeline_rank",
                           "number of layers at first stage: %ldmust be divisible by virtual "
                           "pipelineparallel degree %ld -- or use a "
                           "pipeline_model_parallel_layout",
                           first, v);
                return;
            }
            rem -= first;
            pps--;
        }
        if (last_set && has_last) {
            if (last <= 0) {
                pk_startup(s, "folding.last_stage_positive", UNEVEN_KNOBS,
                           "num_layers_in_last_pipeline_stage must be larger than 0 -- it is "
                           "%ld",
                           last);
                return;
            }
            if (has_v && v == 0) {
                pk_startup(s, "folding.last_stage_vpp_divisible",
                           "num_virtual_stages_per_pipeline_rank " UNEVEN_KNOBS,
                           "ZeroDivisionError: integer modulo by zero "
                           "(--num-virtual-stages-per-pipeline-rank 0) -- give at least 2 "
                           "virtual stages or none");
                return;
            }
            if (has_v && pk_pymod(last, v)) {
                pk_startup(s, "folding.last_stage_vpp_divisible",
                           "decoder_last_pipeline_num_layers num_virtual_stages_per_pipeline_rank",
                           "number of layers at last stage: %ldmust be divisible by virtual "
                           "pipelineparallel degree %ld -- or use a "
                           "pipeline_model_parallel_layout",
                           last, v);
                return;
            }
            rem -= last;
            pps--;
        }
        if (ver >= V_V18 && (rem != 0) != (pps != 0)) {
            pk_startup(s, "folding.middle_stage_mismatch", UNEVEN_KNOBS " " PIPE_KNOBS,
                       "Mismatch: %ld middle layers remaining but %ld middle PP stages "
                       "available. -- the first and last stages leave layers without middle "
                       "stages (or stages without layers)",
                       rem, pps);
            return;
        }
        if (pps && pk_pymod(rem, pps)) {
            pk_startup(s, "folding.middle_stage_pp_divisible", UNEVEN_KNOBS " " PIPE_KNOBS,
                       "number of layers at middle stage: %ld must be divisible bythe middle "
                       "pipeline model parallel size %ld -- adjust the first/last stage sizes",
                       rem, pps);
            return;
        }
        if (pps && has_v) {
            if (v == 0)
                pk_startup(s, "folding.middle_rank_vpp_divisible",
                           "num_virtual_stages_per_pipeline_rank",
                           "ZeroDivisionError: integer modulo by zero "
                           "(--num-virtual-stages-per-pipeline-rank 0) -- give at least 2 "
                           "virtual stages or none");
            else if (pk_pymod(pk_pydiv(rem, pps), v))
                pk_startup(s, "folding.middle_rank_vpp_divisible",
                           "num_virtual_stages_per_pipeline_rank " UNEVEN_KNOBS,
                           "number of layers on each middle pipeline rank:%ld must be divisible "
                           "by virtualpipeline parallel degree %ld -- adjust the first/last "
                           "stage sizes or VPP",
                           pk_pydiv(rem, pps), v);
        }
        return;
    }
    if (acc_e || acc_l) {
        long l = layers + acc_e + acc_l;
        if (pp == 0)
            return;
        if (!has_v) {
            if (pk_pymod(l, pp))
                pk_startup(s, "folding.account_for_pp_divisible_novpp", PIPE_KNOBS,
                           "number of middle layers: %ld must be divisible by middle "
                           "pipeline_model_parallel_size %ld",
                           l, pp);
        } else if (pk_pymod(l, pp)) {
            pk_startup(s, "folding.account_for_pp_divisible", PIPE_KNOBS,
                       "num_layers: %ld after enableaccount_for_embedding_in_pipeline_split or "
                       "account_for_loss_in_pipeline_split must be divisibleby "
                       "pipeline_model_parallel_size %ld -- the embedding and loss count as "
                       "layers here",
                       l, pp);
        } else if (v == 0) {
            pk_startup(s, "folding.account_for_vpp_divisible",
                       "num_virtual_stages_per_pipeline_rank",
                       "ZeroDivisionError: integer modulo by zero "
                       "(--num-virtual-stages-per-pipeline-rank 0) -- give at least 2 virtual "
                       "stages or none");
        } else if (pk_pymod(pk_pydiv(l, pp), v)) {
            pk_startup(s, "folding.account_for_vpp_divisible",
                       "num_virtual_stages_per_pipeline_rank " PIPE_KNOBS,
                       "number of layers on each pipeline rank: %ld(after enable "
                       "account_for_embedding_in_pipeline_split or "
                       "account_for_loss_in_pipeline_split) must be divisible "
                       "byvirtual_pipeline_model_parallel_size%ld",
                       pk_pydiv(l, pp), v);
        }
    }
}

/* What Megatron checks only when it builds the process groups
 * (parallel_state.initialize_model_parallel), after start-up validation:
 * the expert grid must tile the world. */
static void runtime_rules(const mt_ctx_v1 *ctx, mt_sink *s)
{
    long world = pk_arg_int(ctx, "world_size", 0);
    long pp = pk_arg_int(ctx, "pipeline_model_parallel_size", 1);
    long ep = pk_arg_int(ctx, "expert_model_parallel_size", 1);
    long etp = pk_arg_int(ctx, "expert_tensor_parallel_size", 1);
    long grid = etp * ep * pp;
    if (world > 0 && grid > 0 && world % grid)
        pk_runtime(s, "folding.expert_grid",
                   "expert_model_parallel_size expert_tensor_parallel_size "
                   "pipeline_model_parallel_size",
                   "runtime (initialize_model_parallel): the expert grid ETP*EP*PP = "
                   "%ld*%ld*%ld = %ld does not divide world size %ld; pick EP and ETP so that it "
                   "does",
                   etp, ep, pp, grid, world);
}

static int folding_check(void *state, const mt_ctx_v1 *ctx, mt_sink *out)
{
    (void)state;
    if (!pk_args(ctx))
        return 0;
    startup_validate_args(ctx, out);
    startup_transformer_config(ctx, out);
    runtime_rules(ctx, out);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Candidates                                                                */

typedef struct vals {
    long v[MAX_VALUES];
    int n;
} vals;

static void vals_add(vals *vs, long v)
{
    int i, j;
    if (v < 1)
        return;
    for (i = 0; i < vs->n && vs->v[i] < v; i++)
        ;
    if ((i < vs->n && vs->v[i] == v) || vs->n == MAX_VALUES)
        return;
    for (j = vs->n; j > i; j--)
        vs->v[j] = vs->v[j - 1];
    vs->v[i] = v;
    vs->n++;
}

/* The contract's declared values of an integer knob (newline-separated in
 * "space.<knob>"), ascending; 0 when the contract does not search the knob. */
static int space_ints(const mt_ctx_v1 *ctx, const char *knob, vals *out)
{
    char key[160];
    const char *p;
    out->n = 0;
    snprintf(key, sizeof key, "space.%s", knob);
    p = pk_get(ctx->contract, key);
    if (!p)
        return 0;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end != p && (*end == '\n' || *end == '\0'))
            vals_add(out, v);
        p += strcspn(p, "\n");
        if (*p == '\n')
            p++;
    }
    return 1;
}

static void pow2_upto(vals *vs, long max)
{
    long v;
    for (v = 1; v <= max && v <= SIZE_MAX_SANE; v *= 2)
        vals_add(vs, v);
}

/* TP stays inside one NVLink domain and at most 8 wide (beyond that the
 * attention GEMMs get too thin to pay for the all-reduces). */
static void tp_values(const mt_ctx_v1 *ctx, const shape *sh, const fold *cur, vals *vs)
{
    long max = 8;
    if (space_ints(ctx, "tensor_model_parallel_size", vs))
        return;
    if (sh->nvlink > 0 && sh->nvlink < max)
        max = sh->nvlink;
    if (sh->world > 0 && sh->world < max)
        max = sh->world;
    pow2_upto(vs, max);
    vals_add(vs, cur->tp);
}

static void pp_values(const mt_ctx_v1 *ctx, const shape *sh, const fold *cur, vals *vs)
{
    long max = sh->world > 0 ? sh->world : cur->pp;
    if (space_ints(ctx, "pipeline_model_parallel_size", vs))
        return;
    if (sh->layers > 0 && sh->layers < max)
        max = sh->layers;
    pow2_upto(vs, max);
    vals_add(vs, cur->pp);
}

/* CP only pays when long sequences make attention memory dominate. */
static void cp_values(const mt_ctx_v1 *ctx, const shape *sh, const fold *cur, vals *vs)
{
    if (space_ints(ctx, "context_parallel_size", vs))
        return;
    vals_add(vs, 1);
    vals_add(vs, cur->cp);
    if (sh->seq >= 16384)
        pow2_upto(vs, 8);
}

static void ep_values(const mt_ctx_v1 *ctx, const shape *sh, const fold *cur, vals *vs)
{
    long v;
    if (space_ints(ctx, "expert_model_parallel_size", vs))
        return;
    vals_add(vs, 1);
    if (sh->experts <= 0)
        return;
    for (v = 2; v <= sh->experts && v <= SIZE_MAX_SANE && (sh->world <= 0 || v <= sh->world);
         v *= 2)
        if (sh->experts % v == 0)
            vals_add(vs, v);
    vals_add(vs, cur->ep);
}

static int fold_same_layout(const fold *a, const fold *b)
{
    return a->tp == b->tp && a->pp == b->pp && a->cp == b->cp && a->ep == b->ep &&
           fold_etp(a) == fold_etp(b);
}

static void clear_pipeline(fold *c)
{
    c->vpp_layers = c->vpp_stages = c->first = c->last = 0;
    c->layout[0] = '\0';
    c->layout_too_long = 0;
}

static size_t put_layers(char *buf, size_t n, size_t o, long t)
{
    if (o >= n)
        return o;
    if (t == 1)
        o += (size_t)snprintf(buf + o, n - o, "t");
    else if (t > 1)
        o += (size_t)snprintf(buf + o, n - o, "t*%ld", t);
    return o;
}

/* A balanced layout of `stages` stages: E opens the first, the MTP layers and
 * L close the last, and the layers that do not split evenly go to the middle
 * stages first, since the first and last stages also carry the embedding and
 * the loss. Returns 0, or -1 when it does not fit in n. */
static int derive_layout(const shape *sh, long stages, char *buf, size_t n)
{
    long base, rem, mid, extra_mid, i, k = 1, size_i, size_first, size_last;
    size_t o;
    if (stages < 1 || stages > LAYOUT_MAX_ENTRIES)
        return -1;
    base = size_first = size_last = sh->layers / stages;
    rem = sh->layers % stages;
    /* extra layers: middle stages, then the first, then the last */
    mid = stages > 2 ? stages - 2 : 0;
    extra_mid = rem < mid ? rem : mid;
    rem -= extra_mid;
    if (rem > 0 && stages > 1) {
        size_first++;
        rem--;
    }
    if (rem > 0)
        size_last++;
    o = (size_t)snprintf(buf, n, "E");
    if (stages == 1) {
        o = put_layers(buf, n, o, sh->layers);
    } else {
        o = put_layers(buf, n, o, size_first);
        if (o < n)
            o += (size_t)snprintf(buf + o, n - o, "|");
        for (i = 1; i <= mid && o < n; i += k) {
            size_i = base + (i <= extra_mid);
            for (k = 1; i + k <= mid && base + (i + k <= extra_mid) == size_i; k++)
                ;
            if (k == 1) {
                o = put_layers(buf, n, o, size_i);
                if (o < n)
                    o += (size_t)snprintf(buf + o, n - o, "|");
            } else {
                o += (size_t)snprintf(buf + o, n - o, "(");
                o = put_layers(buf, n, o, size_i);
                if (o < n)
                    o += (size_t)snprintf(buf + o, n - o, "|)*%ld", k);
            }
        }
        o = put_layers(buf, n, o, size_last);
    }
    for (i = 0; i < sh->mtp && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, "m");
    if (o < n)
        o += (size_t)snprintf(buf + o, n - o, "L");
    return o < n ? 0 : -1;
}

/* Adapts the pipeline knobs of c (a copy of cur with a new PP) so that the
 * layers still split; writes what it did to why. Returns 0 when no split can
 * be kept or derived. */
static int fit_pipeline(const shape *sh, const fold *cur, fold *c, char *why, size_t n)
{
    long v = fold_vpp(sh, cur), per;
    why[0] = '\0';
    if (c->pp == cur->pp)
        return 1;
    if (c->pp == 1) {
        if (cur->pp > 1)
            snprintf(why, n, "PP 1 drops the pipeline settings (VPP, layout, stage sizes)");
        clear_pipeline(c);
        return 1;
    }
    if (sh->layers <= 0)
        return 0;
    if (layout_set(cur)) {
        layout_info li;
        if (!cur->layout_too_long && layout_parse(cur->layout, &li) == 0 &&
            li.stages % c->pp == 0) {
            snprintf(why, n, "the layout's %ld stages are kept: VPP %ld at PP %ld", li.stages,
                     li.stages / c->pp, c->pp);
            return 1;
        }
    } else if (!cur->first && !cur->last && sh->layers % c->pp == 0) {
        per = sh->layers / c->pp;
        if (cur->vpp_layers > 0 && per % cur->vpp_layers) {
            c->vpp_layers = 0;
            snprintf(why, n, "%ld layers per stage do not split into chunks of %ld: VPP dropped",
                     per, cur->vpp_layers);
        }
        if (cur->vpp_stages > 0 && per % cur->vpp_stages) {
            c->vpp_stages = 0;
            snprintf(why, n, "%ld layers per stage do not split into %ld virtual stages: VPP "
                     "dropped",
                     per, cur->vpp_stages);
        }
        return 1;
    }
    if (!layout_set(cur) && sh->layers % c->pp == 0) {
        /* first/last stage sizes were only needed for the old PP */
        clear_pipeline(c);
        if (v > 1 && (sh->layers / c->pp) % v == 0)
            c->vpp_stages = v;
        snprintf(why, n, "num_layers %ld splits evenly over PP %ld: first/last stage sizes "
                 "dropped%s",
                 sh->layers, c->pp, c->vpp_stages ? ", VPP kept" : "");
        return 1;
    }
    /* a layout the new PP cannot take is re-derived rather than dropped:
     * whoever wrote it wanted the embedding and loss stages balanced */
    clear_pipeline(c);
    if (v < 1 || sh->layers < c->pp * v)
        v = 1;
    if (sh->layers < c->pp)
        return 0;
    if (derive_layout(sh, c->pp * v, c->layout, sizeof c->layout) < 0)
        return 0;
    snprintf(why, n, "num_layers %ld%s over PP %ld: derived layout \"%.200s\" (%ld stages, VPP %ld)",
             sh->layers, sh->mtp ? " + MTP" : "", c->pp, c->layout, c->pp * v, v);
    return 1;
}

/* Every knob a candidate changes must be inside the contract's space. */
static int space_ok_long(const mt_ctx_v1 *ctx, const char *knob, long from, long to)
{
    char buf[32];
    if (from == to)
        return 1;
    snprintf(buf, sizeof buf, "%ld", to);
    return pk_space_allows(ctx, knob, buf);
}

static int space_ok_opt(const mt_ctx_v1 *ctx, const char *knob, long from, long to)
{
    char buf[32] = "";
    if (from == to)
        return 1;
    if (to > 0)
        snprintf(buf, sizeof buf, "%ld", to);
    return pk_space_allows(ctx, knob, buf);
}

static int fold_space_ok(const mt_ctx_v1 *ctx, const fold *a, const fold *b)
{
    return space_ok_long(ctx, "tensor_model_parallel_size", a->tp, b->tp) &&
           space_ok_long(ctx, "pipeline_model_parallel_size", a->pp, b->pp) &&
           space_ok_long(ctx, "context_parallel_size", a->cp, b->cp) &&
           space_ok_long(ctx, "expert_model_parallel_size", a->ep, b->ep) &&
           space_ok_long(ctx, "expert_tensor_parallel_size", a->etp, b->etp) &&
           space_ok_opt(ctx, "num_layers_per_virtual_pipeline_stage", a->vpp_layers,
                        b->vpp_layers) &&
           space_ok_opt(ctx, "num_virtual_stages_per_pipeline_rank", a->vpp_stages,
                        b->vpp_stages) &&
           space_ok_opt(ctx, "decoder_first_pipeline_num_layers", a->first, b->first) &&
           space_ok_opt(ctx, "decoder_last_pipeline_num_layers", a->last, b->last) &&
           space_ok_long(ctx, "micro_batch_size", a->mbs, b->mbs) &&
           (a->sp == b->sp ||
            pk_space_allows(ctx, "sequence_parallel", b->sp ? "true" : "false")) &&
           (!strcmp(a->layout, b->layout) ||
            pk_space_allows(ctx, "pipeline_model_parallel_layout", b->layout));
}

static void set_long(mt_sink *out, const char *knob, long from, long to)
{
    char buf[32];
    if (from == to)
        return;
    snprintf(buf, sizeof buf, "%ld", to);
    pk_host->sink_set(out, knob, buf);
}

/* The optional pipeline knobs: 0 here means unset, spelled "". */
static void set_opt(mt_sink *out, const char *knob, long from, long to)
{
    char buf[32] = "";
    if (from == to)
        return;
    if (to > 0)
        snprintf(buf, sizeof buf, "%ld", to);
    pk_host->sink_set(out, knob, buf);
}


static void set_fold(mt_sink *out, const fold *a, const fold *b)
{
    set_long(out, "tensor_model_parallel_size", a->tp, b->tp);
    set_long(out, "pipeline_model_parallel_size", a->pp, b->pp);
    set_long(out, "context_parallel_size", a->cp, b->cp);
    set_long(out, "expert_model_parallel_size", a->ep, b->ep);
    set_long(out, "expert_tensor_parallel_size", a->etp, b->etp);
    if (a->sp != b->sp)
        pk_host->sink_set(out, "sequence_parallel", b->sp ? "true" : "false");
    set_opt(out, "num_layers_per_virtual_pipeline_stage", a->vpp_layers, b->vpp_layers);
    set_opt(out, "num_virtual_stages_per_pipeline_rank", a->vpp_stages, b->vpp_stages);
    if (strcmp(a->layout, b->layout))
        pk_host->sink_set(out, "pipeline_model_parallel_layout", b->layout);
    set_opt(out, "decoder_first_pipeline_num_layers", a->first, b->first);
    set_opt(out, "decoder_last_pipeline_num_layers", a->last, b->last);
}

/* Both folding meshes, as the report prints them. */
static void note_mesh(mt_sink *out, const shape *sh, const fold *c)
{
    long etp = fold_etp(c);
    long dp = sh->world > 0 ? sh->world / (c->tp * c->pp * c->cp) : 0;
    long edp = sh->world > 0 ? sh->world / (etp * c->ep * c->pp) : 0;
    pk_note(out, "Attention: TP%ld x CP%ld x DP%ld x PP%ld; MoE: ETP%ld x EP%ld x EDP%ld x PP%ld",
            c->tp, c->cp, dp, c->pp, etp, c->ep, edp, c->pp);
}

static void propose_layout(const shape *sh, const fold *cur, const fold *c, const char *pipe_why,
                           mt_sink *out)
{
    char summary[256];
    long dp = sh->world > 0 ? sh->world / (c->tp * c->pp * c->cp) : 0;
    long vpp = fold_vpp(sh, c);
    int n = snprintf(summary, sizeof summary, "TP%ld PP%ld CP%ld EP%ld ETP%ld (DP %ld)", c->tp,
                     c->pp, c->cp, c->ep, fold_etp(c), dp);
    if (vpp > 1 && n > 0 && (size_t)n < sizeof summary)
        snprintf(summary + n, sizeof summary - (size_t)n, " VPP %ld", vpp);
    pk_host->sink_candidate(out, "layout", summary, MT_WALL_MEMORY | MT_WALL_COMM,
                            MT_LABEL_TRAINING_EQUIVALENT);
    set_fold(out, cur, c);
    pk_note(out, "fit/scale order: lowest dense TP first, PP ascending (PP > 1 is for a model "
                 "that does not fit at PP 1), then the largest legal EP");
    note_mesh(out, sh, c);
    if (c->tp > 1)
        pk_note(out, "sequence_parallel follows TP > 1 (Megatron requires it for MoE with TP)");
    if (pipe_why[0])
        pk_note(out, "%s", pipe_why);
    if (sh->nvlink > 0 && fold_etp(c) * c->ep > sh->nvlink)
        pk_note(out, "the EP group (ETP*EP = %ld GPUs) spans more than one NVLink domain (%ld): "
                     "the all-to-all crosses the scale-out network",
                fold_etp(c) * c->ep, sh->nvlink);
}

/* TP down one legal step, everything else kept: fills memory headroom with
 * data parallelism. */
static int headroom_tp(const mt_ctx_v1 *ctx, const shape *sh, const fold *cur, fold *head)
{
    vals tps = {{0}, 0};
    int i;
    tp_values(ctx, sh, cur, &tps);
    for (i = tps.n - 1; i >= 0; i--) {
        if (tps.v[i] >= cur->tp)
            continue;
        *head = *cur;
        head->tp = tps.v[i];
        head->sp = head->tp > 1;
        if (fold_rules(sh, head, NULL) == 0 && fold_space_ok(ctx, cur, head))
            return 1;
    }
    return 0;
}

static void propose_mbs(const mt_ctx_v1 *ctx, const shape *sh, const fold *cur, mt_sink *out)
{
    vals mbs = {{0}, 0};
    fold c = *cur;
    long dp = sh->world > 0 ? sh->world / (cur->tp * cur->pp * cur->cp) : 0;
    char summary[256];
    int i;
    c.mbs = 0;
    if (space_ints(ctx, "micro_batch_size", &mbs)) {
        for (i = 0; i < mbs.n && !c.mbs; i++)
            if (mbs.v[i] > cur->mbs)
                c.mbs = mbs.v[i];
    } else if (cur->mbs <= SIZE_MAX_SANE / 2) {
        c.mbs = cur->mbs * 2;
    }
    if (!c.mbs || fold_rules(sh, &c, NULL) || !fold_space_ok(ctx, cur, &c))
        return;
    if (dp > 0 && sh->gbs > 0)
        snprintf(summary, sizeof summary,
                 "MBS %ld -> %ld with GBS %ld fixed: gradient accumulation falls from %ld to %ld",
                 cur->mbs, c.mbs, sh->gbs, sh->gbs / (cur->mbs * dp), sh->gbs / (c.mbs * dp));
    else
        snprintf(summary, sizeof summary,
                 "MBS %ld -> %ld with GBS fixed: gradient accumulation falls by %ldx", cur->mbs,
                 c.mbs, c.mbs / cur->mbs);
    pk_host->sink_candidate(out, "mbs", summary, MT_WALL_COMPUTE | MT_WALL_HOST,
                            MT_LABEL_TRAINING_EQUIVALENT);
    set_long(out, "micro_batch_size", cur->mbs, c.mbs);
    pk_note(out, "headroom: larger micro-batches make fatter GEMMs and fewer kernel launches per "
                 "sample; activation memory grows with MBS, so this needs memory to spare");
}

static int folding_propose(void *state, const mt_ctx_v1 *ctx, mt_sink *out)
{
    shape sh;
    fold cur, head;
    vals tps = {{0}, 0}, pps = {{0}, 0}, cps = {{0}, 0}, eps = {{0}, 0};
    int have_head, emitted = 0, ep_declared, a, b, d, e;
    char why[320];
    (void)state;
    shape_read(ctx, &sh);
    fold_read(ctx->config, &cur);
    if (fold_rules(&sh, &cur, NULL))
        return 0; /* nothing sensible to fold from an illegal config */
    have_head = headroom_tp(ctx, &sh, &cur, &head);

    tp_values(ctx, &sh, &cur, &tps);
    pp_values(ctx, &sh, &cur, &pps);
    cp_values(ctx, &sh, &cur, &cps);
    ep_declared = pk_space_declared(ctx, "expert_model_parallel_size");
    ep_values(ctx, &sh, &cur, &eps);

    for (a = 0; a < tps.n; a++)
        for (b = 0; b < pps.n; b++)
            for (d = 0; d < cps.n; d++) {
                int taken = 0;
                for (e = eps.n - 1; e >= 0; e--) {
                    fold c = cur;
                    if (emitted == MAX_LAYOUT_CANDIDATES)
                        goto headroom;
                    if (!ep_declared && taken == EP_PER_GROUP)
                        break;
                    c.tp = tps.v[a];
                    c.pp = pps.v[b];
                    c.cp = cps.v[d];
                    c.ep = eps.v[e];
                    /* ETP 1: experts are split by EP, not by TP; an unset ETP
                     * already means 1 at TP 1 */
                    c.etp = (cur.etp == 0 && c.tp == 1) ? 0 : 1;
                    c.sp = c.tp > 1;
                    if (fold_same_layout(&cur, &c))
                        continue;
                    if (!fit_pipeline(&sh, &cur, &c, why, sizeof why))
                        continue;
                    if (fold_rules(&sh, &c, NULL) || !fold_space_ok(ctx, &cur, &c))
                        continue;
                    if (have_head && fold_same_layout(&head, &c))
                        continue;
                    taken++;
                    emitted++;
                    propose_layout(&sh, &cur, &c, why, out);
                }
            }
headroom:
    if (have_head) {
        pk_host->sink_candidate(out, "layout", "headroom: TP down one legal step",
                                MT_WALL_MEMORY | MT_WALL_COMM, MT_LABEL_TRAINING_EQUIVALENT);
        set_fold(out, &cur, &head);
        pk_note(out, "TP %ld -> %ld: DP grows from %ld to %ld and the TP all-reduces shrink; "
                     "use it when the current layout leaves memory to spare",
                cur.tp, head.tp, sh.world > 0 ? sh.world / (cur.tp * cur.pp * cur.cp) : 0,
                sh.world > 0 ? sh.world / (head.tp * head.pp * head.cp) : 0);
        note_mesh(out, &sh, &head);
    }
    propose_mbs(ctx, &sh, &cur, out);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Repair                                                                    */

/* Only sequence parallelism can fall out of step through another plugin's
 * change (everything else here depends on knobs no candidate touches). */
static int folding_repair(void *state, const mt_ctx_v1 *ctx, mt_sink *out)
{
    shape sh;
    fold f;
    (void)state;
    if (pk_get(ctx->changed, "sequence_parallel"))
        return 0;
    shape_read(ctx, &sh);
    fold_read(ctx->config, &f);
    if (sh.experts > 0 && f.tp > 1 && !f.sp) {
        pk_host->sink_set(out, "sequence_parallel", "true");
        pk_note(out, "sequence_parallel turned on: a MoE model with TP %ld needs it", f.tp);
    } else if (f.sp && f.tp == 1) {
        pk_host->sink_set(out, "sequence_parallel", "false");
        pk_note(out, "sequence_parallel turned off: TP is 1, where Megatron would drop it anyway");
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Render                                                                    */

static void render_long(mt_sink *out, uint32_t d, const char *knob, const char *section,
                        const char *field, long v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%ld", v);
    pk_render(out, d, knob, section, field, buf);
}

/* An optional knob, rendered when the config gives it (its words as they
 * are: a layout of integers stays one word). */
static void render_given(const mt_ctx_v1 *ctx, mt_sink *out, uint32_t d, const char *knob,
                         const char *field)
{
    const char *v = pk_get(ctx->config, knob);
    char buf[64];
    size_t i, o = 0;
    if (!v)
        return;
    for (i = 0; v[i] && o + 1 < sizeof buf; i++)
        if (v[i] != ' ' && v[i] != '\t')
            buf[o++] = v[i];
    buf[o] = 0;
    if (buf[0])
        pk_render(out, d, knob, "model", field, buf);
}

static int folding_render(void *state, const mt_ctx_v1 *ctx, uint32_t dialect, mt_sink *out)
{
    shape sh;
    fold f;
    static char layout[8192];
    (void)state;
    shape_read(ctx, &sh);
    fold_read(ctx->config, &f);
    /* the whole layout, however long (fold_read keeps a bounded copy) */
    layout_compact(pk_str(ctx->config, "pipeline_model_parallel_layout", ""), layout,
                   sizeof layout);

    /* The parallel sizes and MBS are always spelled out: a launch command
     * should state its folding even where it matches the defaults. */
    render_long(out, dialect, "tensor_model_parallel_size", "model", NULL, f.tp);
    render_long(out, dialect, "pipeline_model_parallel_size", "model", NULL, f.pp);
    if (f.cp != 1)
        render_long(out, dialect, "context_parallel_size", "model", NULL, f.cp);
    render_long(out, dialect, "expert_model_parallel_size", "model", NULL, f.ep);
    render_long(out, dialect, "expert_tensor_parallel_size", "model", NULL, fold_etp(&f));
    if (f.sp)
        pk_render_bool(out, dialect, "sequence_parallel", "model", NULL, 1);

    if (dialect == MT_DIALECT_MLM) {
        /* given values go through as written: Megatron judges a 0 itself */
        render_given(ctx, out, dialect, "num_layers_per_virtual_pipeline_stage", NULL);
        render_given(ctx, out, dialect, "num_virtual_stages_per_pipeline_rank", NULL);
    } else {
        /* Bridge knows only the VPP size; with a layout it must agree with
         * the layout's stage count, which fold_vpp derives. */
        long vpp = fold_vpp(&sh, &f);
        if (f.vpp_layers > 0 || f.vpp_stages > 0 || (layout[0] && vpp > 1))
            render_long(out, dialect, "num_virtual_stages_per_pipeline_rank", "model",
                        "virtual_pipeline_model_parallel_size", vpp);
    }
    /* pk_render drops MLM value words of 128 bytes or more, and a layout is
     * one word however long it unrolls to */
    if (layout[0] && dialect == MT_DIALECT_MLM) {
        pk_host->sink_arg(out, "--pipeline-model-parallel-layout");
        pk_host->sink_arg(out, layout);
    } else if (layout[0]) {
        /* ( ) , = are not allowed in an unquoted Hydra value: a quoted string */
        static char quoted[sizeof layout * 2 + 3];
        if (pk_hydra_quote(layout, quoted, sizeof quoted) < 0)
            pk_host->sink_error(out, "the pipeline layout is too long to render");
        else
            pk_render(out, dialect, "pipeline_model_parallel_layout", "model", NULL, quoted);
    }
    render_given(ctx, out, dialect, "decoder_first_pipeline_num_layers",
                 "num_layers_in_first_pipeline_stage");
    render_given(ctx, out, dialect, "decoder_last_pipeline_num_layers",
                 "num_layers_in_last_pipeline_stage");
    render_long(out, dialect, "micro_batch_size", "train", NULL, f.mbs);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Verify                                                                    */

/* "N" after `name` in the log.world line, where name is a whole field:
 * "tensor-model-parallel size:" must not match inside
 * "encoder-tensor-model-parallel size:". -1 when absent. */
static long world_field(const char *line, const char *name)
{
    const char *p = line;
    size_t n = strlen(name);
    while (line && (p = strstr(p, name)) != NULL) {
        if (p == line || p[-1] == ' ' || p[-1] == ',') {
            char *end;
            long v = strtol(p + n, &end, 10);
            return end == p + n ? -1 : v;
        }
        p += n;
    }
    return -1;
}

/* Megatron prints None for unset integers. */
static long args_long(const char *v, int *ok)
{
    char *end;
    long n;
    *ok = 1;
    if (!strcmp(v, "None"))
        return 0;
    n = strtol(v, &end, 10);
    if (end == v || *end)
        *ok = 0;
    return n;
}

static void verify_long(const mt_ctx_v1 *ctx, mt_sink *out, const char *knob, long want,
                        const char *world_name)
{
    char key[160];
    const char *arg;
    snprintf(key, sizeof key, "args.%s", knob);
    arg = pk_get(ctx->evidence, key);
    if (arg) {
        int ok;
        long got = args_long(arg, &ok);
        if (ok && got == want)
            pk_verdict(out, knob, MT_VERDICT_APPLIED, "arguments dump: %s = %s (config %ld)",
                       knob, arg, want);
        else
            pk_verdict(out, knob, MT_VERDICT_NOT_APPLIED,
                       "arguments dump: %s = %s but the config asks for %ld", knob, arg, want);
        return;
    }
    if (world_name) {
        const char *line = pk_get(ctx->evidence, "log.world");
        long got = world_field(line, world_name);
        if (got >= 0) {
            pk_verdict(out, knob, got == want ? MT_VERDICT_APPLIED : MT_VERDICT_NOT_APPLIED,
                       "log: \"%s %ld\"%s (config %ld)", world_name, got,
                       got == want ? "" : " differs", want);
            return;
        }
    }
    pk_verdict(out, knob, MT_VERDICT_UNKNOWN,
               "no arguments dump%s in the evidence; the value is read at startup, so the dump "
               "of a short run settles it",
               world_name ? " or \"using world size\" line" : "");
}

static void verify_bool(const mt_ctx_v1 *ctx, mt_sink *out, const char *knob, int want)
{
    char key[160];
    const char *arg;
    int got;
    snprintf(key, sizeof key, "args.%s", knob);
    arg = pk_get(ctx->evidence, key);
    if (!arg) {
        pk_verdict(out, knob, MT_VERDICT_UNKNOWN,
                   "no arguments dump in the evidence; %s is read at startup, so the dump of a "
                   "short run settles it",
                   knob);
        return;
    }
    got = !strcmp(arg, "True") || !strcmp(arg, "true") || !strcmp(arg, "1");
    pk_verdict(out, knob, got == want ? MT_VERDICT_APPLIED : MT_VERDICT_NOT_APPLIED,
               "arguments dump: %s = %s%s (config %s)", knob, arg,
               got == want ? "" : ", not what the config asks for", want ? "true" : "false");
}

static void verify_layout(const mt_ctx_v1 *ctx, mt_sink *out, const char *want)
{
    const char *arg = pk_get(ctx->evidence, "args.pipeline_model_parallel_layout");
    char a[LAYOUT_MAX], w[LAYOUT_MAX];
    if (!arg) {
        pk_verdict(out, "pipeline_model_parallel_layout", MT_VERDICT_UNKNOWN,
                   "no arguments dump in the evidence; the layout is read at startup, so the "
                   "dump of a short run settles it");
        return;
    }
    layout_compact(arg, a, sizeof a);
    layout_compact(want, w, sizeof w);
    pk_verdict(out, "pipeline_model_parallel_layout",
               strcmp(a, w) ? MT_VERDICT_NOT_APPLIED : MT_VERDICT_APPLIED,
               "arguments dump: pipeline_model_parallel_layout = \"%.200s\"%s \"%.200s\"", arg,
               strcmp(a, w) ? " but the config asks for" : ", as configured:", w);
}

static int folding_verify(void *state, const mt_ctx_v1 *ctx, mt_sink *out)
{
    fold f;
    (void)state;
    fold_read(ctx->config, &f);
    if (f.tp != 1)
        verify_long(ctx, out, "tensor_model_parallel_size", f.tp, "tensor-model-parallel size:");
    if (f.pp != 1)
        verify_long(ctx, out, "pipeline_model_parallel_size", f.pp,
                    "pipeline-model-parallel size:");
    if (f.cp != 1)
        verify_long(ctx, out, "context_parallel_size", f.cp, "context-parallel size:");
    if (f.ep != 1)
        verify_long(ctx, out, "expert_model_parallel_size", f.ep, NULL);
    /* Megatron fills an unset ETP with TP before it prints the arguments */
    if (f.etp != 0)
        verify_long(ctx, out, "expert_tensor_parallel_size", fold_etp(&f), NULL);
    if (f.sp)
        verify_bool(ctx, out, "sequence_parallel", 1);
    if (f.vpp_layers)
        verify_long(ctx, out, "num_layers_per_virtual_pipeline_stage", f.vpp_layers, NULL);
    if (f.vpp_stages)
        verify_long(ctx, out, "num_virtual_stages_per_pipeline_rank", f.vpp_stages, NULL);
    if (f.layout[0])
        verify_layout(ctx, out, f.layout);
    if (f.first)
        verify_long(ctx, out, "decoder_first_pipeline_num_layers", f.first, NULL);
    if (f.last)
        verify_long(ctx, out, "decoder_last_pipeline_num_layers", f.last, NULL);
    if (f.mbs != 1)
        verify_long(ctx, out, "micro_batch_size", f.mbs, NULL);
    return 0;
}

MT_PLUGIN_EXPORT const mt_plugin_v1 moetune_plugin_v1 = {
    sizeof(mt_plugin_v1),
    MT_PLUGIN_ABI_VERSION,
    "folding",
    "1.0.0",
    "parallel folding (TP, PP, VPP and layouts, CP, EP, ETP, sequence parallel) and the "
    "micro-batch size",
    folding_knobs,
    (uint32_t)(sizeof folding_knobs / sizeof folding_knobs[0]),
    NULL,
    0,
    folding_variables,
    (uint32_t)(sizeof folding_variables / sizeof folding_variables[0]),
    pk_init,
    NULL,
    folding_propose,
    folding_repair,
    folding_check,
    folding_render,
    folding_verify,
};
