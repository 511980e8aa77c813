/*
 * simlegal.c - the sim's legality: the first rule Megatron would reject a
 * configuration with, worded the way Megatron (or Transformer Engine) words
 * it, or 0 when the run would start.
 *
 * Written from shared/facts/megatron.md ("Legality rules the framework
 * enforces") on its own, independently of moetune's plugins: the sim plays
 * the framework, and tests/test_sim_legality.c compares the two.  Where
 * megatron.md is silent on a detail (under which condition a rule applies,
 * what the error says) the sim follows upstream Megatron-LM.
 *
 * The checks run in the order a Megatron launch hits them:
 *   0. argument sanity (sizes >= 1, choices that only make sense together);
 *   1. megatron/training/arguments.py validate_args();
 *   2. the micro-batch calculator (global batch size);
 *   3. parallel_state.initialize_model_parallel() (the expert grid);
 *   4. TransformerConfig.__post_init__() (model, MoE, recompute, pipeline
 *      layout, CUDA graphs, EP overlap);
 *   5. Transformer Engine at the first FP8/FP4 autocast (hardware support).
 *
 * Decisions where megatron.md leaves room (each also noted at its check):
 * - CUDA_DEVICE_MAX_CONNECTIONS: before Blackwell with TP > 1 or CP > 1,
 *   Megatron asserts the variable equals "1" unless EP overlap is on (then it
 *   only warns).  Unset (0) is not "1", so unset is an error there, exactly
 *   as `os.environ.get(...) == "1"` fails on a missing variable.
 * - A VPP size of 1 (one virtual stage per rank, or a layout with exactly PP
 *   stages) is no VPP: Megatron resets it to None, so it needs no PP > 1.
 * - FP8 needs both --fp8-format and --fp8-recipe (FP4 likewise): a recipe
 *   without a format, or a format without a recipe, is rejected.  Upstream
 *   argparse defaults the recipe to "delayed"; the sim, like moetune's knob
 *   model, has an explicit "none" and demands the pair.
 * - A flex dispatcher backend the hardware does not support is NOT an error
 *   here: Bridge falls back to alltoall with a warning (the model does that).
 * - Recompute-module rules apply under selective granularity (Megatron only
 *   reads the module list then); "no moe in recompute modules" for EP overlap
 *   applies to the list as given, as Megatron checks it there.  The sim runs
 *   no gated-delta-net model, so gdn_norm_out recompute is always refused.
 * - CUDA graph module rules apply to per-layer graphs (local,
 *   transformer_engine); with graphs off Megatron never reads the list.  An
 *   empty module list captures whole layers, which in a MoE model is the moe
 *   scope, so it too needs drop-and-pad.
 * - EP overlap's "BF16/FP16 compute path" is Megatron's assertion of a BF16
 *   or FP16 model: FP8 and FP4 recipes run on a BF16 model and pass.  Its
 *   "no full recompute" also covers what Megatron asserts beside it: no
 *   recompute method or layer count, and at most one MTP layer.
 * - GQA (num_query_groups > 0, rendered with --group-query-attention) needs
 *   the groups divisible by TP, MLA models included (the core_r0.15 rule the
 *   contracts pin; Megatron main also accepts TP a multiple of the groups).
 *
 * Beyond megatron.md's list, the sim enforces what upstream asserts on the
 * same knobs: sizes >= 1, top-k <= experts, grouped GEMM needs BF16, padding
 * to capacity needs a capacity factor, the flex dispatcher needs an
 * expert-TP x EP group > 1 and no padding, fine-grained offloading needs
 * modules (attn_proj only with core_attn, no expert offload under moe
 * recompute), optimizer CPU offload needs the distributed optimizer, and the
 * layout's embedding/loss placement.  Upstream rules outside the knobs the
 * sim models (allocator settings, dropout, inference) are not checked.
 */
#include "sim.h"

#include "hardware.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct verdict {
    char *rule;
    size_t rlen;
    char *msg;
    size_t mlen;
} verdict;

static int reject(verdict *v, const char *rule, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int reject(verdict *v, const char *rule, const char *fmt, ...)
{
    va_list ap;
    if (v->rule && v->rlen)
        snprintf(v->rule, v->rlen, "%s", rule);
    if (v->msg && v->mlen) {
        va_start(ap, fmt);
        vsnprintf(v->msg, v->mlen, fmt, ap);
        va_end(ap);
    }
    return 1;
}

/* ---- the pipeline layout grammar ------------------------------------------
 * Megatron's PipelineParallelLayerLayout.parse_str_to_list: commas are
 * removed; every "(...)*k" (no nested parentheses) is unrolled in one
 * left-to-right pass, then every "x*k" (one character); what remains is
 * split at '|' into stages, each a run of E (embedding), t (transformer
 * layer), m (MTP layer), L (loss). */

#define LAYOUT_EXPANDED_MAX (1 << 20)

typedef struct layout {
    int stages;
    int n_embed, n_loss, n_layers, n_mtp;
    char first, last;     /* first and last layer in layer order, 0 when none */
    int layer_after_mtp;  /* a transformer layer placed after an MTP layer */
} layout;

typedef struct sbuf {
    char *s;
    size_t n, cap;
    int overflow;
} sbuf;

static void sb_putn(sbuf *b, const char *p, size_t n, long times)
{
    long i;
    for (i = 0; i < times && !b->overflow; i++) {
        if (b->n + n + 1 > b->cap) {
            size_t cap = b->cap ? b->cap : 256;
            char *t;
            while (b->n + n + 1 > cap)
                cap *= 2;
            if (cap > LAYOUT_EXPANDED_MAX) {
                b->overflow = 1;
                return;
            }
            t = realloc(b->s, cap);
            if (!t) {
                b->overflow = 1;
                return;
            }
            b->s = t;
            b->cap = cap;
        }
        memcpy(b->s + b->n, p, n);
        b->n += n;
        b->s[b->n] = '\0';
    }
}

/* Reads \d+ at p; the count (capped), and the end in *end; -1 when none. */
static long read_count(const char *p, const char **end)
{
    long k = 0;
    if (*p < '0' || *p > '9')
        return -1;
    while (*p >= '0' && *p <= '9') {
        if (k < LAYOUT_EXPANDED_MAX)
            k = k * 10 + (*p - '0');
        p++;
    }
    *end = p;
    return k;
}

/* One pass of re.sub(r'\(([^)]+)\)\*(\d+)', ...). */
static void unroll_groups(const char *in, sbuf *out)
{
    const char *p = in;
    while (*p && !out->overflow) {
        if (*p == '(') {
            const char *close = strchr(p + 1, ')');
            const char *end;
            long k;
            if (close && close > p + 1 && close[1] == '*' && (k = read_count(close + 2, &end)) >= 0) {
                sb_putn(out, p + 1, (size_t)(close - p - 1), k);
                p = end;
                continue;
            }
        }
        sb_putn(out, p, 1, 1);
        p++;
    }
}

/* One pass of re.sub(r'(.)\*(\d+)', ...). */
static void unroll_chars(const char *in, sbuf *out)
{
    const char *p = in;
    while (*p && !out->overflow) {
        const char *end;
        long k;
        if (p[1] == '*' && (k = read_count(p + 2, &end)) >= 0) {
            sb_putn(out, p, 1, k);
            p = end;
            continue;
        }
        sb_putn(out, p, 1, 1);
        p++;
    }
}

/* 0, or -1 with Megatron's message in err. */
static int layout_parse(const char *text, layout *lo, char *err, size_t errlen)
{
    sbuf nocomma = {0}, groups = {0}, flat = {0};
    const char *p, *stage;
    int rc = 0, seen_mtp = 0;
    memset(lo, 0, sizeof *lo);
    for (p = text; *p; p++)
        if (*p != ',')
            sb_putn(&nocomma, p, 1, 1);
    sb_putn(&nocomma, "", 0, 1);
    unroll_groups(nocomma.s ? nocomma.s : "", &groups);
    sb_putn(&groups, "", 0, 1);
    unroll_chars(groups.s ? groups.s : "", &flat);
    sb_putn(&flat, "", 0, 1);
    if (nocomma.overflow || groups.overflow || flat.overflow) {
        snprintf(err, errlen,
                 "ValueError: pipeline_model_parallel_layout '%s' unrolls to more than %d layers",
                 text, LAYOUT_EXPANDED_MAX);
        rc = -1;
        goto out;
    }
    lo->stages = 1;
    stage = flat.s ? flat.s : "";
    for (p = stage; *p; p++) {
        switch (*p) {
        case '|':
            lo->stages++;
            stage = p + 1;
            continue;
        case 'E':
            lo->n_embed++;
            break;
        case 'L':
            lo->n_loss++;
            break;
        case 't':
            lo->n_layers++;
            if (seen_mtp)
                lo->layer_after_mtp = 1;
            break;
        case 'm':
            lo->n_mtp++;
            seen_mtp = 1;
            break;
        default: {
            size_t slen = strcspn(stage, "|");
            snprintf(err, errlen,
                     "AssertionError: Invalid layer character: %c (stage='%.*s', layout_str='%s'), "
                     "known layer characters: ['E', 'L', 't', 'm']",
                     *p, (int)slen, stage, flat.s);
            rc = -1;
            goto out;
        }
        }
        if (!lo->first)
            lo->first = *p;
        lo->last = *p;
    }
out:
    free(nocomma.s);
    free(groups.s);
    free(flat.s);
    return rc;
}

/* ---- helpers ---------------------------------------------------------------- */

static const char *const disp_names[] = {"allgather", "alltoall", "flex"};
static const char *const backend_names[] = {"none", "deepep", "hybridep", "ncclep"};
static const char *const fp8r_names[] = {"none", "delayed", "tensorwise", "blockwise", "mxfp8"};
static const char *const cg_impl_names[] = {"none", "local", "transformer_engine", "full_iteration"};

static const char *name_of(const char *const *names, size_t n, int i)
{
    return i >= 0 && (size_t)i < n ? names[i] : "?";
}
#define NAME(arr, i) name_of(arr, sizeof arr / sizeof arr[0], i)

static void module_list(unsigned bits, const char *const *names, size_t n, char *buf, size_t len)
{
    size_t i, off = 0;
    buf[0] = '\0';
    for (i = 0; i < n && off < len; i++)
        if (bits & (1u << i))
            off += (size_t)snprintf(buf + off, len - off, "%s'%s'", off ? ", " : "", names[i]);
}

/* Python's rendering of an optional int argument (0 = unset). */
static const char *int_or_none(int v, char *buf, size_t n)
{
    if (!v)
        return "None";
    snprintf(buf, n, "%d", v);
    return buf;
}

static int is_blackwell(const mt_gpu_spec *g) { return g && !strcmp(g->arch, "blackwell"); }
static int is_hopper_or_later(const mt_gpu_spec *g)
{
    return g && (!strcmp(g->arch, "hopper") || !strcmp(g->arch, "blackwell"));
}

/* Everything the phases share. */
typedef struct state {
    const sim_cfg *c;
    const mt_gpu_spec *gpu;
    long world, tp, pp, cp, ep, etp, dp;
    int moe;             /* num_experts > 0 */
    int vpp;             /* virtual pipeline size, 0 = none (Megatron's None) */
    int has_layout;
    layout lo;
    int fp8, fp4;
    int gqa;
} state;

/* ---- 0. argument sanity -------------------------------------------------- */

static int check_args(state *s, verdict *v)
{
    const sim_cfg *c = s->c;
    static const struct {
        const char *flag;
        size_t off;
        int min;
    } sizes[] = {
        {"--num-layers", offsetof(sim_cfg, num_layers), 1},
        {"--hidden-size", offsetof(sim_cfg, hidden_size), 1},
        {"--num-attention-heads", offsetof(sim_cfg, num_attention_heads), 1},
        {"--seq-length", offsetof(sim_cfg, seq_length), 1},
        {"--tensor-model-parallel-size", offsetof(sim_cfg, tensor_model_parallel_size), 1},
        {"--pipeline-model-parallel-size", offsetof(sim_cfg, pipeline_model_parallel_size), 1},
        {"--context-parallel-size", offsetof(sim_cfg, context_parallel_size), 1},
        {"--expert-model-parallel-size", offsetof(sim_cfg, expert_model_parallel_size), 1},
        {"--expert-tensor-parallel-size", offsetof(sim_cfg, expert_tensor_parallel_size), 0},
        {"--micro-batch-size", offsetof(sim_cfg, micro_batch_size), 1},
        {"--global-batch-size", offsetof(sim_cfg, global_batch_size), 1},
        {"--num-experts", offsetof(sim_cfg, num_experts), 0},
        {"--moe-router-topk", offsetof(sim_cfg, moe_router_topk), 1},
        {"--num-query-groups", offsetof(sim_cfg, num_query_groups), 0},
        {"--mtp-num-layers", offsetof(sim_cfg, mtp_num_layers), 0},
        {"--num-layers-per-virtual-pipeline-stage",
         offsetof(sim_cfg, num_layers_per_virtual_pipeline_stage), 0},
        {"--num-virtual-stages-per-pipeline-rank",
         offsetof(sim_cfg, num_virtual_stages_per_pipeline_rank), 0},
        {"--decoder-first-pipeline-num-layers", offsetof(sim_cfg, decoder_first_pipeline_num_layers), 0},
        {"--decoder-last-pipeline-num-layers", offsetof(sim_cfg, decoder_last_pipeline_num_layers), 0},
        {"--recompute-num-layers", offsetof(sim_cfg, recompute_num_layers), 0},
        {"--moe-flex-dispatcher-num-sms", offsetof(sim_cfg, moe_flex_dispatcher_num_sms), 0},
        {"--cuda-graph-warmup-steps", offsetof(sim_cfg, cuda_graph_warmup_steps), 0},
        {"--manual-gc-interval", offsetof(sim_cfg, manual_gc_interval), 0},
    };
    size_t i;
    if (!s->gpu) {
        const char *const *n = mt_gpu_names();
        char known[128] = "";
        size_t off = 0;
        for (; *n && off < sizeof known; n++)
            off += (size_t)snprintf(known + off, sizeof known - off, "%s%s", off ? ", " : "", *n);
        return reject(v, "unknown_gpu", "sim: unknown GPU type '%s' (known: %s)", c->gpu, known);
    }
    if (c->gpus_per_node < 1 || c->nodes < 1)
        return reject(v, "world_size",
                      "sim: the cluster needs at least one GPU (gpus per node %d, nodes %d)",
                      c->gpus_per_node, c->nodes);
    for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        int val = *(const int *)((const char *)c + sizes[i].off);
        if (val < sizes[i].min)
            return reject(v, "size_positive",
                          "AssertionError: %s must be %s, got %d", sizes[i].flag,
                          sizes[i].min ? "a positive integer" : "non-negative", val);
    }
    if (c->moe_expert_capacity_factor < 0)
        return reject(v, "size_positive",
                      "AssertionError: --moe-expert-capacity-factor must be non-negative, got %g",
                      c->moe_expert_capacity_factor);
    /* FP8 and FP4 come as a format plus a recipe. */
    if (c->fp8_recipe != SIM_FP8R_NONE && c->fp8_format == SIM_FP8F_NONE)
        return reject(v, "fp8_recipe_needs_format",
                      "ValueError: --fp8-recipe %s is set without --fp8-format: FP8 is off, "
                      "choose a format (e4m3 or hybrid) or drop the recipe",
                      NAME(fp8r_names, c->fp8_recipe));
    if (c->fp8_format != SIM_FP8F_NONE && c->fp8_recipe == SIM_FP8R_NONE)
        return reject(v, "fp8_format_needs_recipe",
                      "ValueError: --fp8-format %s is set without --fp8-recipe; choose one of "
                      "delayed, tensorwise, blockwise, mxfp8",
                      c->fp8_format == SIM_FP8F_E4M3 ? "e4m3" : "hybrid");
    if (c->fp4_recipe && !c->fp4_format)
        return reject(v, "fp4_recipe_needs_format",
                      "ValueError: --fp4-recipe nvfp4 is set without --fp4-format e2m1");
    if (c->fp4_format && !c->fp4_recipe)
        return reject(v, "fp4_format_needs_recipe",
                      "ValueError: --fp4-format e2m1 is set without --fp4-recipe nvfp4");
    return 0;
}

/* ---- 1. validate_args ------------------------------------------------------ */

static int check_validate_args(state *s, verdict *v)
{
    const sim_cfg *c = s->c;
    long model = s->tp * s->pp * s->cp;
    int forms;
    char a[16], b[16];
    /* The data-parallel size must be whole. */
    if (s->world % model)
        return reject(v, "dp_whole",
                      "AssertionError: world size (%ld) is not divisible by total_model_size "
                      "(total_model_size=%ld: tensor %ld x pipeline %ld x context %ld)",
                      s->world, model, s->tp, s->pp, s->cp);
    s->dp = s->world / model;

    /* At most one way to ask for virtual pipeline stages. */
    forms = (c->num_layers_per_virtual_pipeline_stage > 0) +
            (c->num_virtual_stages_per_pipeline_rank > 0) + s->has_layout;
    if (forms > 1)
        return reject(v, "vpp_forms_exclusive",
                      "AssertionError: No more than one of the following arguments can be set at "
                      "the same time: --num-layers-per-virtual-pipeline-stage, "
                      "--num-virtual-stages-per-pipeline-rank,--pipeline-model-parallel-layout. "
                      "args.num_layers_per_virtual_pipeline_stage=%s, "
                      "args.num_virtual_stages_per_pipeline_rank=%s, "
                      "args.pipeline_model_parallel_layout=%s%s%s.",
                      int_or_none(c->num_layers_per_virtual_pipeline_stage, a, sizeof a),
                      int_or_none(c->num_virtual_stages_per_pipeline_rank, b, sizeof b),
                      s->has_layout ? "'" : "",
                      s->has_layout ? c->pipeline_model_parallel_layout : "None",
                      s->has_layout ? "'" : "");

    if (s->has_layout) {
        char err[600];
        if (layout_parse(c->pipeline_model_parallel_layout, &s->lo, err, sizeof err))
            return reject(v, "layout_syntax", "%s", err);
        if (s->lo.stages % s->pp)
            return reject(v, "layout_stages_pp",
                          "AssertionError: The length of pipeline_model_parallel_layout must be "
                          "divisible by pipeline_model_parallel_size (num_stages=%d, "
                          "args.pipeline_model_parallel_size=%ld)",
                          s->lo.stages, s->pp);
        s->vpp = (int)(s->lo.stages / s->pp);
    } else if (c->num_layers_per_virtual_pipeline_stage > 0 || c->num_virtual_stages_per_pipeline_rank > 0) {
        if (c->num_virtual_stages_per_pipeline_rank == 0) {
            int per_stage;
            if (c->decoder_first_pipeline_num_layers || c->decoder_last_pipeline_num_layers)
                return reject(v, "vpp_layers_uneven",
                              "AssertionError: please use --num-virtual-stages-per-pipeline-rank "
                              "to specify virtual pipeline parallel degree when enable uneven "
                              "pipeline parallelism");
            if (c->num_layers % s->pp)
                return reject(v, "layers_pp",
                              "AssertionError: number of layers of the model must be divisible "
                              "pipeline model parallel size (num_layers=%d, "
                              "pipeline_model_parallel_size=%ld)",
                              c->num_layers, s->pp);
            per_stage = (int)(c->num_layers / s->pp);
            if (per_stage % c->num_layers_per_virtual_pipeline_stage)
                return reject(v, "vpp_chunk",
                              "AssertionError: number of layers per pipeline stage must be "
                              "divisible number of layers per virtual pipeline stage (%d layers "
                              "per stage, %d per virtual stage)",
                              per_stage, c->num_layers_per_virtual_pipeline_stage);
            s->vpp = per_stage / c->num_layers_per_virtual_pipeline_stage;
        } else {
            s->vpp = c->num_virtual_stages_per_pipeline_rank;
        }
    } else if (!c->decoder_first_pipeline_num_layers && !c->decoder_last_pipeline_num_layers) {
        if (c->num_layers % s->pp)
            return reject(v, "layers_pp",
                          "AssertionError: Number of layers should be divisible by the "
                          "pipeline-model-parallel size (num_layers=%d, "
                          "pipeline_model_parallel_size=%ld)",
                          c->num_layers, s->pp);
    }
    if (s->vpp == 1)
        s->vpp = 0; /* Megatron: a VPP size of 1 is None */
    if (s->vpp && s->pp <= 1)
        return reject(v, "vpp_needs_pp",
                      "AssertionError: When interleaved schedule is used, "
                      "pipeline-model-parallel size should be greater than 1 "
                      "(virtual pipeline size %d, pipeline-model-parallel size %ld)",
                      s->vpp, s->pp);
    /* Even stages with virtual stages per rank: the stages split the layers
     * evenly (megatron.md; Megatron cuts num_layers // PP per rank), and each
     * rank's layers split evenly into its virtual stages. */
    if (!s->has_layout && c->num_virtual_stages_per_pipeline_rank > 0 &&
        !c->decoder_first_pipeline_num_layers && !c->decoder_last_pipeline_num_layers &&
        c->num_layers % s->pp)
        return reject(v, "layers_pp",
                      "AssertionError: Number of layers should be divisible by the "
                      "pipeline-model-parallel size (num_layers=%d, "
                      "pipeline_model_parallel_size=%ld)",
                      c->num_layers, s->pp);
    if (s->vpp && !s->has_layout && c->num_virtual_stages_per_pipeline_rank > 0 &&
        !c->decoder_first_pipeline_num_layers && !c->decoder_last_pipeline_num_layers &&
        (c->num_layers / s->pp) % s->vpp)
        return reject(v, "vpp_chunk",
                      "AssertionError: num_layers_per_pipeline_rank (%ld) must be divisible by "
                      "virtual pipeline size (%d)",
                      c->num_layers / s->pp, s->vpp);

    if (c->overlap_param_gather && !c->use_distributed_optimizer)
        return reject(v, "opg_needs_distopt",
                      "AssertionError: --overlap-param-gather only supported with distributed "
                      "optimizer or megatron fsdp");
    if (c->overlap_param_gather && !c->overlap_grad_reduce)
        return reject(v, "opg_needs_ogr",
                      "AssertionError: Must use --overlap-param-gather with --overlap-grad-reduce");

    if (s->fp4 && s->fp8)
        return reject(v, "fp8_fp4_exclusive",
                      "ValueError: --fp4-format and --fp8-format cannot be used simultaneously. "
                      "Please choose one.");
    if (c->fp16 && c->bf16)
        return reject(v, "fp16_bf16_exclusive",
                      "AssertionError: --fp16 and --bf16 cannot be used together");

    if (c->context_parallel_size > 1 && c->seq_length % (2 * c->context_parallel_size))
        return reject(v, "seq_cp",
                      "AssertionError: seq-length should be a multiple of 2 * "
                      "context-parallel-size if context-parallel-size > 1. (seq_length=%d, "
                      "context_parallel_size=%d)",
                      c->seq_length, c->context_parallel_size);

    if (s->moe && c->moe_grouped_gemm && !c->bf16)
        return reject(v, "grouped_gemm_needs_bf16",
                      "AssertionError: Currently GroupedGEMM for MoE only supports bf16 dtype.");

    if (c->recompute_granularity == SIM_GRAN_SELECTIVE && c->recompute_method != SIM_METHOD_NONE)
        return reject(v, "selective_no_method",
                      "AssertionError: recompute method is not yet supported for selective "
                      "recomputing granularity (--recompute-method %s)",
                      c->recompute_method == SIM_METHOD_UNIFORM ? "uniform" : "block");

    /* Megatron turns sequence parallelism off at TP 1 (a warning) before it
     * checks TP communication overlap, so both halves of the rule fire here. */
    if (c->tp_comm_overlap && s->tp <= 1)
        return reject(v, "tp_comm_overlap_needs_tp",
                      "AssertionError: Tensor parallel communication/GEMM overlap can happen only "
                      "when sequence parallelism is enabled (sequence parallelism was disabled "
                      "because tensor-model-parallel size is %ld)",
                      s->tp);
    if (c->tp_comm_overlap && !c->sequence_parallel)
        return reject(v, "tp_comm_overlap_needs_sp",
                      "AssertionError: Tensor parallel communication/GEMM overlap can happen only "
                      "when sequence parallelism is enabled");

    /* Before Blackwell, TP/CP communication must be queued ahead of the
     * GEMMs; with EP overlap Megatron only warns.  Unset is not "1". */
    if ((s->tp > 1 || s->cp > 1) && !is_blackwell(s->gpu) && !c->overlap_moe_expert_parallel_comm &&
        c->cuda_device_max_connections != 1) {
        char now[32];
        if (c->cuda_device_max_connections)
            snprintf(now, sizeof now, "'%d'", c->cuda_device_max_connections);
        else
            snprintf(now, sizeof now, "unset");
        return reject(v, "cuda_device_max_connections",
                      "AssertionError: Using tensor model parallelism or context parallelism "
                      "require setting the environment variable CUDA_DEVICE_MAX_CONNECTIONS to 1 "
                      "(%s on %s, tensor %ld, context %ld)",
                      now, s->gpu->name, s->tp, s->cp);
    }

    if (c->expert_model_parallel_size > 1 && !s->moe)
        return reject(v, "ep_needs_experts",
                      "AssertionError: num_experts must be non None to use expert model "
                      "parallelism (expert_model_parallel_size=%d)",
                      c->expert_model_parallel_size);
    if (s->moe && c->num_experts % c->expert_model_parallel_size)
        return reject(v, "experts_ep",
                      "AssertionError: Number of experts should be a multiple of expert model "
                      "parallel_size. (num_experts=%d, expert_model_parallel_size=%d)",
                      c->num_experts, c->expert_model_parallel_size);
    if (s->moe && s->tp > 1 && !c->sequence_parallel)
        return reject(v, "moe_tp_needs_sp",
                      "AssertionError: When using MoE and tensor parallelism, sequence "
                      "parallelism must be used. (tensor_model_parallel_size=%ld)",
                      s->tp);
    return 0;
}

/* ---- 2. the micro-batch calculator ------------------------------------------ */

static int check_batch(state *s, verdict *v)
{
    const sim_cfg *c = s->c;
    long per = (long)c->micro_batch_size * s->dp;
    if (c->global_batch_size % per)
        return reject(v, "gbs_divisible",
                      "AssertionError: global batch size (%d) is not divisible by micro batch "
                      "size (%d) times data parallel size (%ld)",
                      c->global_batch_size, c->micro_batch_size, s->dp);
    return 0;
}

/* ---- 3. parallel_state ----------------------------------------------------- */

static int check_parallel_state(state *s, verdict *v)
{
    long grid = s->etp * s->ep * s->pp;
    if (s->world % grid)
        return reject(v, "expert_grid",
                      "RuntimeError: decoder world_size (%ld) is not divisible by "
                      "expert_tensor_model_pipeline_parallel size (%ld: expert tensor %ld x "
                      "expert model %ld x pipeline %ld)",
                      s->world, grid, s->etp, s->ep, s->pp);
    return 0;
}

/* ---- 4. TransformerConfig ---------------------------------------------------- */

static int check_model(state *s, verdict *v)
{
    const sim_cfg *c = s->c;
    if (c->num_attention_heads % c->tensor_model_parallel_size)
        return reject(v, "heads_tp",
                      "ValueError: num_attention_heads (%d) must be a multiple of "
                      "tensor_model_parallel_size (%d).",
                      c->num_attention_heads, c->tensor_model_parallel_size);
    /* Each TP rank holds whole KV groups (the core_r0.15 rule the contracts
     * pin; Megatron main also lets TP ranks share a group when TP is a
     * multiple of the group count).  MLA models go through the same check:
     * MLATransformerConfig runs TransformerConfig's. */
    if (s->gqa && c->num_query_groups % c->tensor_model_parallel_size)
        return reject(v, "query_groups_tp",
                      "ValueError: num_query_groups (%d) must be a multiple of "
                      "tensor_model_parallel_size (%d).",
                      c->num_query_groups, c->tensor_model_parallel_size);
    if (s->moe && c->moe_router_topk > c->num_experts)
        return reject(v, "topk_experts",
                      "RuntimeError: selected index k out of range: moe_router_topk (%d) exceeds "
                      "num_moe_experts (%d)",
                      c->moe_router_topk, c->num_experts);
    return 0;
}

static int check_moe(state *s, verdict *v)
{
    const sim_cfg *c = s->c;
    if (c->moe_flex_dispatcher_backend != SIM_BACKEND_NONE &&
        c->moe_token_dispatcher_type != SIM_DISP_FLEX)
        return reject(v, "flex_backend_needs_flex",
                      "ValueError: moe_flex_dispatcher_backend='%s' requires "
                      "moe_token_dispatcher_type='flex' (got '%s').",
                      NAME(backend_names, c->moe_flex_dispatcher_backend),
                      NAME(disp_names, c->moe_token_dispatcher_type));
    if (s->moe && c->moe_token_dispatcher_type == SIM_DISP_FLEX && s->etp * s->ep <= 1)
        return reject(v, "flex_needs_ep",
                      "AssertionError: Flex token dispatcher requires TPxEP > 1 (expert tensor "
                      "parallel %ld x expert model parallel %ld)",
                      s->etp, s->ep);
    if (c->moe_token_dispatcher_type == SIM_DISP_FLEX && c->moe_pad_expert_input_to_capacity)
        return reject(v, "flex_no_pad",
                      "ValueError: Flex token dispatcher does not support "
                      "moe_pad_expert_input_to_capacity");
    if (c->moe_shared_expert_overlap && c->moe_token_dispatcher_type != SIM_DISP_ALLTOALL &&
        c->moe_token_dispatcher_type != SIM_DISP_FLEX)
        return reject(v, "shared_expert_overlap_dispatcher",
                      "ValueError: moe_shared_expert_overlap only works with alltoall or flex "
                      "token dispatcher (got '%s').",
                      NAME(disp_names, c->moe_token_dispatcher_type));
    if (c->moe_pad_expert_input_to_capacity && c->moe_expert_capacity_factor <= 0)
        return reject(v, "pad_needs_capacity",
                      "ValueError: moe_expert_capacity_factor must be set to use "
                      "moe_pad_expert_input_to_capacity");
    return 0;
}

static int check_recompute(state *s, verdict *v)
{
    const sim_cfg *c = s->c;
    unsigned m = c->recompute_modules;
    (void)s;
    if (c->recompute_granularity == SIM_GRAN_FULL) {
        if (c->recompute_method == SIM_METHOD_NONE)
            return reject(v, "full_needs_method",
                          "ValueError: Using recompute_granularity: full so recompute_method "
                          "must be \"block\" or \"uniform\"");
        if (c->recompute_num_layers <= 0)
            return reject(v, "full_needs_num_layers",
                          "ValueError: When using recompute_granularity: full "
                          "recompute_num_layers must be between 1 and "
                          "num_layers_per_pipeline_rank: %ld",
                          c->num_layers / s->pp);
    }
    if (c->recompute_granularity == SIM_GRAN_SELECTIVE) {
        if (c->recompute_num_layers > 0)
            return reject(v, "selective_no_num_layers",
                          "ValueError: When using recompute_granularity: selective "
                          "recompute_num_layers must be None. (got %d)",
                          c->recompute_num_layers);
        if ((m & SIM_RC_MOE_ACT) && !c->moe_grouped_gemm)
            return reject(v, "recompute_moe_act_needs_grouped_gemm",
                          "ValueError: moe_act in recompute_modules is only supported with "
                          "moe_grouped_gemm.");
        if ((m & SIM_RC_MLA_UP_PROJ) && !c->multi_latent_attention)
            return reject(v, "recompute_mla_up_proj_needs_mla",
                          "ValueError: mla_up_proj in recompute_modules is only supported with "
                          "multi_latent_attention.");
        if ((m & SIM_RC_SHARED_EXPERTS) && c->moe_shared_expert_overlap)
            return reject(v, "recompute_shared_experts_overlap",
                          "ValueError: shared_experts recompute cannot work with "
                          "--moe-shared-expert-overlap.");
        /* No model the sim runs has gated delta net (linear) attention. */
        if (m & SIM_RC_GDN_NORM_OUT)
            return reject(v, "recompute_gdn_norm_out_needs_gdn",
                          "ValueError: gdn_norm_out in recompute_modules is only supported with "
                          "experimental_attention_variant='gated_delta_net'.");
        if (s->fp8 && c->fp8_recipe == SIM_FP8R_DELAYED && (m & (SIM_RC_MOE_ACT | SIM_RC_LAYERNORM)))
            return reject(v, "fp8_delayed_recompute",
                          "ValueError: Delayed scaling does not support moe_act and layernorm "
                          "recompute for fp8.");
    }
    return 0;
}

/* Fine-grained activation offloading and optimizer offload (upstream rules
 * beside the recompute ones; megatron.md lists the knobs). */
static int check_offload(state *s, verdict *v)
{
    const sim_cfg *c = s->c;
    unsigned off = c->offload_modules;
    if (c->fine_grained_activation_offloading) {
        if (!off)
            return reject(v, "offload_needs_modules",
                          "AssertionError: fine_grained_activation_offloading needs "
                          "offload_modules (self.offload_modules is not None and "
                          "len(self.offload_modules) > 0)");
        if ((off & SIM_OFF_ATTN_PROJ) && !(off & SIM_OFF_CORE_ATTN))
            return reject(v, "offload_attn_proj_needs_core_attn",
                          "ValueError: attn_proj cannot be set to offload_modules alone without "
                          "core_attn because the input of attn_proj is the output of core_attn, "
                          "which is needed in core_attn.backward().");
        if (c->recompute_granularity == SIM_GRAN_SELECTIVE && (c->recompute_modules & SIM_RC_MOE) &&
            (off & (SIM_OFF_MOE_ACT | SIM_OFF_EXPERT_FC1)))
            return reject(v, "offload_inside_moe_recompute",
                          "AssertionError: Cannot offload %s while recomputing the entire MoE "
                          "layer. 'moe' in recompute_modules wraps the full MoE forward in a "
                          "checkpoint, so offloading activations inside it is redundant and will "
                          "cause errors.",
                          (off & SIM_OFF_MOE_ACT) && (off & SIM_OFF_EXPERT_FC1) ? "{'moe_act', 'expert_fc1'}"
                          : (off & SIM_OFF_MOE_ACT)                             ? "{'moe_act'}"
                                                                                : "{'expert_fc1'}");
    }
    /* The CPU-offloaded optimizer is the precision-aware distributed one. */
    if (c->optimizer_cpu_offload && !c->use_distributed_optimizer)
        return reject(v, "optimizer_offload_needs_distopt",
                      "AssertionError: --optimizer-cpu-offload uses the precision-aware optimizer, "
                      "which is only supported with distributed optimizer "
                      "(--use-distributed-optimizer)");
    return 0;
}

static int check_pipeline(state *s, verdict *v)
{
    const sim_cfg *c = s->c;
    int first = c->decoder_first_pipeline_num_layers, last = c->decoder_last_pipeline_num_layers;
    if (s->has_layout) {
        const layout *lo = &s->lo;
        if (first || last)
            return reject(v, "layout_with_uneven",
                          "ValueError: pipeline_model_parallel_layout cannot be set with other "
                          "pipeline layout arguments. self.num_layers_in_first_pipeline_stage=%s, "
                          "self.num_layers_in_last_pipeline_stage=%s",
                          first ? "set" : "None", last ? "set" : "None");
        if (lo->first != 'E')
            return reject(v, "layout_embedding",
                          "AssertionError: The first layer must be embedding, but got %s",
                          lo->first == 't'   ? "LayerType.decoder"
                          : lo->first == 'm' ? "LayerType.mtp"
                          : lo->first == 'L' ? "LayerType.loss"
                                             : "nothing");
        if (lo->last != 'L')
            return reject(v, "layout_loss",
                          "AssertionError: The last layer must be loss, but got %s",
                          lo->last == 't'   ? "LayerType.decoder"
                          : lo->last == 'm' ? "LayerType.mtp"
                                            : "LayerType.embedding");
        if (lo->n_embed != 1)
            return reject(v, "layout_embedding",
                          "AssertionError: Embedding must be specified exactly once (found %d)",
                          lo->n_embed);
        if (lo->n_loss != 1)
            return reject(v, "layout_loss",
                          "AssertionError: Loss must be specified exactly once (found %d)",
                          lo->n_loss);
        if (lo->n_layers != c->num_layers)
            return reject(v, "layout_layers",
                          "AssertionError: Number of decoder layers %d must match num_layers %d",
                          lo->n_layers, c->num_layers);
        if (lo->n_mtp != c->mtp_num_layers)
            return reject(v, "layout_mtp",
                          "AssertionError: Number of mtp layers in layout must match "
                          "mtp_num_layers (layout %d, mtp_num_layers %d)",
                          lo->n_mtp, c->mtp_num_layers);
        if (lo->layer_after_mtp)
            return reject(v, "layout_mtp",
                          "AssertionError: decoder layers must be placed before MTP layers");
        return 0;
    }
    if (first || last) {
        int layers = c->num_layers;
        long stages = s->pp;
        if (first) {
            if (s->vpp && first % s->vpp)
                return reject(v, "uneven_vpp",
                              "ValueError: number of layers at first stage: %d must be divisible "
                              "by virtual pipeline parallel degree %d",
                              first, s->vpp);
            layers -= first;
            stages--;
        }
        if (last) {
            if (s->vpp && last % s->vpp)
                return reject(v, "uneven_vpp",
                              "ValueError: number of layers at last stage: %d must be divisible "
                              "by virtual pipeline parallel degree %d",
                              last, s->vpp);
            layers -= last;
            stages--;
        }
        if (layers < 0 || stages < 0 || (layers != 0) != (stages != 0))
            return reject(v, "uneven_layers",
                          "ValueError: Mismatch: %d middle layers remaining but %ld middle PP "
                          "stages available.",
                          layers, stages);
        if (stages && layers % stages)
            return reject(v, "uneven_layers",
                          "ValueError: number of layers at middle stage: %d must be divisible by "
                          "the middle pipeline model parallel size %ld",
                          layers, stages);
        if (stages && s->vpp && (layers / stages) % s->vpp)
            return reject(v, "uneven_vpp",
                          "ValueError: number of layers on each middle pipeline rank: %ld must be "
                          "divisible by virtual pipeline parallel degree %d",
                          layers / stages, s->vpp);
    }
    return 0;
}

static int check_cuda_graphs(state *s, verdict *v)
{
    const sim_cfg *c = s->c;
    unsigned g = c->cuda_graph_modules;
    (void)s;
    if (c->cuda_graph_impl == SIM_CG_NONE)
        return 0;
    if (c->cuda_graph_impl == SIM_CG_FULL_ITERATION && g) {
        char list[128];
        static const char *const cg_names[] = {"attn", "mlp", "moe", "moe_router", "moe_preprocess"};
        module_list(g, cg_names, 5, list, sizeof list);
        return reject(v, "cg_full_iteration_modules",
                      "AssertionError: cuda_graph_modules must be empty when "
                      "cuda_graph_impl=\"full_iteration\". (got [%s])",
                      list);
    }
    if (c->cuda_graph_impl != SIM_CG_FULL_ITERATION) {
        if ((g & SIM_CG_MOE) && (g & SIM_CG_MOE_ROUTER))
            return reject(v, "cg_moe_router_exclusive",
                          "AssertionError: cuda_graph_modules must not contain both moe and "
                          "moe_router.");
        if ((g & SIM_CG_MOE_PREPROCESS) && !(g & SIM_CG_MOE_ROUTER))
            return reject(v, "cg_preprocess_needs_router",
                          "AssertionError: moe_preprocess cuda graph is only supported with "
                          "moe_router cuda graph.");
        /* An empty module list captures whole layers: in a MoE model that
         * includes the experts, the moe scope. */
        if (((g & SIM_CG_MOE) || (!g && s->moe)) &&
            !(c->moe_expert_capacity_factor > 0 && c->moe_pad_expert_input_to_capacity))
            return reject(v, "cg_moe_needs_drop_pad",
                          "AssertionError: moe cuda graph is only supported with drop-padding "
                          "MoE. (cuda_graph_modules %s, --moe-expert-capacity-factor %s, "
                          "--moe-pad-expert-input-to-capacity %s)",
                          g ? "holds moe" : "empty: whole layers",
                          c->moe_expert_capacity_factor > 0 ? "set" : "unset",
                          c->moe_pad_expert_input_to_capacity ? "true" : "false");
    }
    if (c->recompute_granularity == SIM_GRAN_FULL && c->cuda_graph_impl != SIM_CG_FULL_ITERATION)
        return reject(v, "cg_full_recompute",
                      "AssertionError: full recompute is only supported with full iteration CUDA "
                      "graph. (--cuda-graph-impl %s)",
                      NAME(cg_impl_names, c->cuda_graph_impl));
    return 0;
}

static int check_ep_overlap(state *s, verdict *v)
{
    const sim_cfg *c = s->c;
    if (c->overlap_moe_expert_parallel_comm) {
        if (s->pp > 1 && !s->vpp)
            return reject(v, "ep_overlap_needs_vpp",
                          "AssertionError: If enabling EP A2A overlap, "
                          "virtual_pipeline_model_parallel_size must be specified when "
                          "pipeline_model_parallel_size > 1 (pipeline_model_parallel_size=%ld)",
                          s->pp);
        if (s->ep <= 1)
            return reject(v, "ep_overlap_needs_ep",
                          "AssertionError: overlap_moe_expert_parallel_comm is only supported with "
                          "expert model parallelism (expert_model_parallel_size=%ld)",
                          s->ep);
        if (c->moe_token_dispatcher_type != SIM_DISP_ALLTOALL &&
            c->moe_token_dispatcher_type != SIM_DISP_FLEX)
            return reject(v, "ep_overlap_dispatcher",
                          "AssertionError: overlap_moe_expert_parallel_comm is supported with "
                          "alltoall/flex token dispatcher (got '%s')",
                          NAME(disp_names, c->moe_token_dispatcher_type));
        if (c->recompute_granularity == SIM_GRAN_FULL)
            return reject(v, "ep_overlap_full_recompute",
                          "AssertionError: disable full recomputation when enabling "
                          "overlap_moe_expert_parallel_comm");
        if (c->recompute_method != SIM_METHOD_NONE)
            return reject(v, "ep_overlap_recompute_method",
                          "AssertionError: disable recomputation method when enabling "
                          "overlap_moe_expert_parallel_comm (--recompute-method %s)",
                          c->recompute_method == SIM_METHOD_UNIFORM ? "uniform" : "block");
        if (c->recompute_num_layers > 0)
            return reject(v, "ep_overlap_recompute_method",
                          "AssertionError: recompute_num_layers must be None when enabling "
                          "overlap_moe_expert_parallel_comm (got %d)",
                          c->recompute_num_layers);
        if (c->recompute_modules & SIM_RC_MOE)
            return reject(v, "ep_overlap_recompute_moe",
                          "AssertionError: disable moe in recompute_modules when enabling "
                          "overlap_moe_expert_parallel_comm");
        if (!c->bf16 && !c->fp16)
            return reject(v, "ep_overlap_precision",
                          "AssertionError: overlap_moe_expert_parallel_comm is only supported "
                          "with bf16 or fp16 model");
        if (c->moe_shared_expert_overlap)
            return reject(v, "ep_overlap_shared_expert_overlap",
                          "AssertionError: disable moe_shared_expert_overlap when enabling "
                          "overlap_moe_expert_parallel_comm");
        if (c->mtp_num_layers > 1)
            return reject(v, "ep_overlap_mtp",
                          "AssertionError: MTP layernum only supports 1 when enabling "
                          "overlap_moe_expert_parallel_comm. (mtp_num_layers=%d)",
                          c->mtp_num_layers);
    }
    if (c->delay_wgrad_compute && !c->overlap_moe_expert_parallel_comm)
        return reject(v, "delay_wgrad_needs_ep_overlap",
                      "AssertionError: overlap_moe_expert_parallel_comm must be enabled when "
                      "enabling delay_wgrad_compute");
    return 0;
}

/* ---- 5. Transformer Engine at the first autocast ------------------------------ */

static int check_hardware(state *s, verdict *v)
{
    const sim_cfg *c = s->c;
    if ((s->fp8 || s->fp4) && !is_hopper_or_later(s->gpu))
        return reject(v, "fp8_arch",
                      "AssertionError: Device compute capability 8.9 or higher required for FP8 "
                      "execution. (%s is %s)",
                      s->gpu->name, s->gpu->arch);
    if (s->fp8 && c->fp8_recipe == SIM_FP8R_MXFP8 && !is_blackwell(s->gpu))
        return reject(v, "mxfp8_needs_blackwell",
                      "AssertionError: Device compute capability 10.0 or higher required for "
                      "MXFP8 execution. (%s is %s)",
                      s->gpu->name, s->gpu->arch);
    if (s->fp4 && !is_blackwell(s->gpu))
        return reject(v, "nvfp4_needs_blackwell",
                      "AssertionError: Device compute capability 10.0 or higher required for "
                      "NVFP4 execution. (%s is %s)",
                      s->gpu->name, s->gpu->arch);
    return 0;
}

int sim_check(const sim_cfg *c, char *rule, size_t rlen, char *msg, size_t mlen)
{
    verdict v = {rule, rlen, msg, mlen};
    state s;
    if (rule && rlen)
        rule[0] = '\0';
    if (msg && mlen)
        msg[0] = '\0';
    memset(&s, 0, sizeof s);
    s.c = c;
    s.gpu = sim_gpu(c);
    s.world = (long)c->gpus_per_node * c->nodes;
    s.tp = c->tensor_model_parallel_size;
    s.pp = c->pipeline_model_parallel_size;
    s.cp = c->context_parallel_size;
    s.ep = c->expert_model_parallel_size;
    s.etp = c->expert_tensor_parallel_size > 0 ? c->expert_tensor_parallel_size : s.tp;
    s.moe = c->num_experts > 0;
    s.has_layout = c->pipeline_model_parallel_layout[0] != '\0';
    s.fp8 = c->fp8_format != SIM_FP8F_NONE;
    s.fp4 = c->fp4_format != 0;
    s.gqa = c->group_query_attention || c->num_query_groups > 0;
    if (check_args(&s, &v) || check_validate_args(&s, &v) || check_batch(&s, &v) ||
        check_parallel_state(&s, &v) || check_model(&s, &v) || check_moe(&s, &v) ||
        check_recompute(&s, &v) || check_offload(&s, &v) || check_pipeline(&s, &v) || check_cuda_graphs(&s, &v) ||
        check_ep_overlap(&s, &v) || check_hardware(&s, &v))
        return 1;
    return 0;
}
