/*
 * moe_args.c - the command line of moetune-cuda-moe (see moe_args.h).
 */
#include "moe_args.h"

#include "dialect.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void mt_moe_args_defaults(mt_moe_args *a)
{
    /* the shape of one Qwen3-30B-A3B MoE layer, balanced routing */
    static const mt_moe_args defaults = {
        .hidden = 2048, .ffn = 768, .experts = 128, .topk = 8, .micro_batch = 1,
        .seq_length = 4096, .tokens = 4096, .ep = 1, .chunks = 1, .train_iters = 10,
        .routing = MT_MOE_ROUTE_BALANCED, .zipf_alpha = 1.2, .seed = 1234,
    };
    *a = defaults;
}

const char *mt_moe_prec_name(const mt_moe_args *a)
{
    return a->fp8 ? "fp8-e4m3" : "bf16";
}

const char *mt_moe_scope_name(mt_moe_graph_scope s)
{
    switch (s) {
    case MT_MOE_GRAPH_ROUTER:
        return "router";
    case MT_MOE_GRAPH_ROUTER_PREPROCESS:
        return "router+preprocess";
    default:
        return "none";
    }
}

const char *mt_moe_routing_name(mt_moe_routing r)
{
    return r == MT_MOE_ROUTE_ZIPF ? "zipf" : "balanced";
}

void mt_moe_args_usage(FILE *f)
{
    fputs(
        "usage: moetune-cuda-moe [flags]\n"
        "A native MoE layer benchmark (router, top-k, permute, all-to-all, grouped expert\n"
        "GEMMs, SwiGLU, combine; forward and backward) on cuBLASLt, NCCL and CUDA graphs.\n"
        "Prints Megatron-format iteration and memory lines.  BENCHMARK-ONLY: the routing\n"
        "is forced, not learnt.\n"
        "\n"
        "shape (per GPU):\n"
        "  --hidden-size N                 hidden size (multiple of 16; 2048)\n"
        "  --moe-ffn-hidden-size N         expert FFN size (multiple of 16; 768)\n"
        "  --num-experts N                 experts in total (128)\n"
        "  --moe-router-topk K             experts per token (8)\n"
        "  --micro-batch-size N            sequences per GPU (1)\n"
        "  --seq-length N                  tokens per sequence (4096)\n"
        "  --tokens N                      tokens per GPU (sets --micro-batch-size 1)\n"
        "parallelism and kernels:\n"
        "  --expert-model-parallel-size N  EP: GPUs of this node, one process drives all (1)\n"
        "  --bf16                          BF16 expert GEMMs, FP32 accumulate (default)\n"
        "  --fp8-format e4m3               FP8 e4m3 forward expert GEMMs, per-tensor scales\n"
        "  --fp8-recipe tensorwise         the only recipe here (current scaling)\n"
        "  --overlap-moe-expert-parallel-comm\n"
        "                                  all-to-all on its own stream, in expert chunks\n"
        "  --moe-overlap-chunks N          chunks with overlap (4, at most the local experts)\n"
        "  --cuda-graph-scope S...         moe_router [moe_preprocess]; also 'none', 'router',\n"
        "                                  'router+preprocess' (--cuda-graph-modules: the same)\n"
        "  --cuda-graph-impl I             none | local | transformer_engine (graphs need not "
        "none)\n"
        "  --recompute-modules moe_act     recompute the expert activation in backward\n"
        "  --recompute-granularity selective  accepted (selective is what moe_act needs)\n"
        "  --moe-router-dtype fp32         accepted (the router is FP32)\n"
        "run:\n"
        "  --train-iters N                 iterations (10)\n"
        "  --moe-routing balanced|zipf     forced routing (balanced)\n"
        "  --moe-router-force-load-balancing  the same as --moe-routing balanced\n"
        "  --zipf-alpha A                  Zipf exponent of the expert counts (1.2)\n"
        "  --seed N                        seed of the routing plan and the inputs (1234)\n"
        "  --check                         compare output and gradients with the CPU reference\n"
        "                                  (small sizes); exit 3 when outside tolerance\n"
        "  --gemm-bench N                  time the expert GEMMs alone, N repetitions\n"
        "  --peak-bf16-tflops X, --peak-fp8-tflops X\n"
        "                                  dense peak for the %-of-peak figures (default: by GPU)\n"
        "  --help                          this text\n"
        "\n"
        "exit codes: 0 ok, 1 CUDA/cuBLASLt/NCCL failure, 2 usage, 3 check failed, 4 out of GPU\n"
        "memory, 68 fewer GPUs than EP, 69 no CUDA GPU visible, 77 (--check only) no GPU or too\n"
        "few GPUs to run the check.\n",
        f);
}

static int fail(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t n, const char *fmt, ...)
{
    va_list ap;
    if (err && n) {
        va_start(ap, fmt);
        vsnprintf(err, n, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

static int parse_int(const char *flag, const char *v, long lo, long hi, int *out, char *err,
                     size_t n)
{
    char *end;
    long x;
    errno = 0;
    x = strtol(v, &end, 10);
    if (!*v || *end || errno)
        return fail(err, n, "%s: '%s' is not an integer", flag, v);
    if (x < lo || x > hi)
        return fail(err, n, "%s %ld: must be between %ld and %ld", flag, x, lo, hi);
    *out = (int)x;
    return 0;
}

static int parse_double(const char *flag, const char *v, double lo, double hi, double *out,
                        char *err, size_t n)
{
    char *end;
    double x;
    errno = 0;
    x = strtod(v, &end);
    if (!*v || *end || errno || !isfinite(x))
        return fail(err, n, "%s: '%s' is not a number", flag, v);
    if (x < lo || x > hi)
        return fail(err, n, "%s %s: must be between %g and %g", flag, v, lo, hi);
    *out = x;
    return 0;
}

/* flags that take one value */
static const char *const VALUED[] = {"--hidden-size",
                                     "--moe-ffn-hidden-size",
                                     "--num-experts",
                                     "--moe-router-topk",
                                     "--micro-batch-size",
                                     "--seq-length",
                                     "--tokens",
                                     "--expert-model-parallel-size",
                                     "--fp8-format",
                                     "--fp8-recipe",
                                     "--moe-overlap-chunks",
                                     "--cuda-graph-impl",
                                     "--recompute-granularity",
                                     "--moe-router-dtype",
                                     "--train-iters",
                                     "--moe-routing",
                                     "--zipf-alpha",
                                     "--seed",
                                     "--gemm-bench",
                                     "--peak-bf16-tflops",
                                     "--peak-fp8-tflops",
                                     NULL};
/* flags that take one or more values (up to the next --flag) */
static const char *const LISTED[] = {"--cuda-graph-scope", "--cuda-graph-modules",
                                     "--recompute-modules", NULL};
static const char *const SWITCHES[] = {"--bf16",
                                       "--overlap-moe-expert-parallel-comm",
                                       "--moe-router-force-load-balancing",
                                       "--check",
                                       "--help",
                                       "-h",
                                       NULL};

/* Megatron flags a training command line carries (every flag moetune
 * renders, workers/sim's table) that do not apply to one MoE layer: accepted
 * so that a contract's rendered command runs here unchanged, and listed as
 * ignored in the output.  Anything else unknown is a usage error. */
static const char *const IGNORED_VALUED[] = {
    "--num-layers", "--ffn-hidden-size", "--num-attention-heads", "--num-query-groups",
    "--kv-channels", "--moe-shared-expert-intermediate-size", "--moe-layer-freq",
    "--q-lora-rank", "--kv-lora-rank", "--qk-head-dim", "--qk-pos-emb-head-dim",
    "--v-head-dim", "--mtp-num-layers", "--vocab-size", "--max-position-embeddings",
    "--tensor-model-parallel-size", "--pipeline-model-parallel-size",
    "--context-parallel-size", "--expert-tensor-parallel-size",
    "--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank",
    "--pipeline-model-parallel-layout", "--decoder-first-pipeline-num-layers",
    "--decoder-last-pipeline-num-layers", "--global-batch-size", "--recompute-method",
    "--recompute-num-layers", "--optimizer-offload-fraction", "--moe-token-dispatcher-type",
    "--moe-flex-dispatcher-backend", "--moe-flex-dispatcher-num-sms",
    "--moe-expert-capacity-factor", "--fp4-format", "--fp4-recipe",
    "--cuda-graph-warmup-steps", "--manual-gc-interval", "--log-interval", "--eval-interval",
    "--eval-iters", "--save-interval", "--profile-step-start", "--profile-step-end",
    "--tensorboard-dir", NULL};
static const char *const IGNORED_SWITCHES[] = {
    "--group-query-attention", "--multi-latent-attention", "--sequence-parallel",
    "--fine-grained-activation-offloading", "--optimizer-cpu-offload", "--moe-permute-fusion",
    "--moe-grouped-gemm", "--moe-pad-expert-input-to-capacity", "--delay-wgrad-compute",
    "--moe-shared-expert-overlap", "--overlap-grad-reduce", "--overlap-param-gather",
    "--tp-comm-overlap", "--use-distributed-optimizer", "--manual-gc",
    "--moe-router-fusion", "--log-throughput", "--mock-data", "--profile",
    "--use-pytorch-profiler", NULL};
static const char *const IGNORED_LISTED[] = {
    "--offload-modules", NULL};

/* Megatron flags that would change the layer's arithmetic into something
 * this benchmark does not do: refused, never silently ignored. */
static const char *const UNSUPPORTED[] = {"--fp16", "--fp16-lm-cross-entropy", NULL};

static int in(const char *const *set, const char *s)
{
    for (; *set; set++)
        if (!strcmp(*set, s))
            return 1;
    return 0;
}

typedef struct seen {
    int tokens, mbs_or_seq, routing, force_balance, graph_modules, graph_none, overlap_chunks;
} seen;

static int graph_value(mt_moe_args *a, seen *s, const char *flag, const char *v, char *err,
                       size_t n)
{
    if (!strcmp(v, "none")) {
        s->graph_none = 1;
        return 0;
    }
    if (!strcmp(v, "router") || !strcmp(v, "moe_router")) {
        s->graph_modules |= 1;
        return 0;
    }
    if (!strcmp(v, "moe_preprocess")) {
        s->graph_modules |= 2;
        return 0;
    }
    if (!strcmp(v, "router+preprocess")) {
        s->graph_modules |= 3;
        return 0;
    }
    if (!strcmp(v, "attn") || !strcmp(v, "mlp") || !strcmp(v, "moe"))
        return fail(err, n, "%s %s: not part of this benchmark (moe_router, moe_preprocess only)",
                    flag, v);
    (void)a;
    return fail(err, n, "%s: unknown scope '%s' (moe_router, moe_preprocess, none)", flag, v);
}

static int one(mt_moe_args *a, seen *s, const char *flag, const char *v, char *err, size_t n)
{
    int rc = 0;
    if (!strcmp(flag, "--hidden-size"))
        rc = parse_int(flag, v, 16, 65536, &a->hidden, err, n);
    else if (!strcmp(flag, "--moe-ffn-hidden-size"))
        rc = parse_int(flag, v, 16, 65536, &a->ffn, err, n);
    else if (!strcmp(flag, "--num-experts"))
        rc = parse_int(flag, v, 1, MT_MOE_MAX_EXPERTS, &a->experts, err, n);
    else if (!strcmp(flag, "--moe-router-topk"))
        rc = parse_int(flag, v, 1, MT_MOE_MAX_TOPK, &a->topk, err, n);
    else if (!strcmp(flag, "--micro-batch-size")) {
        rc = parse_int(flag, v, 1, 1 << 20, &a->micro_batch, err, n);
        s->mbs_or_seq = 1;
    } else if (!strcmp(flag, "--seq-length")) {
        rc = parse_int(flag, v, 1, 1 << 24, &a->seq_length, err, n);
        s->mbs_or_seq = 1;
    } else if (!strcmp(flag, "--tokens")) {
        rc = parse_int(flag, v, 1, INT32_MAX / 2, &a->tokens, err, n);
        s->tokens = 1;
    } else if (!strcmp(flag, "--expert-model-parallel-size"))
        rc = parse_int(flag, v, 1, 64, &a->ep, err, n);
    else if (!strcmp(flag, "--fp8-format")) {
        if (!strcmp(v, "e4m3"))
            a->fp8 = 1;
        else if (!strcmp(v, "hybrid"))
            rc = fail(err, n, "--fp8-format hybrid: not supported here (e4m3 forward only)");
        else
            rc = fail(err, n, "--fp8-format: unknown format '%s' (e4m3)", v);
    } else if (!strcmp(flag, "--fp8-recipe")) {
        if (strcmp(v, "tensorwise"))
            rc = fail(err, n, "--fp8-recipe %s: not supported here (tensorwise only)", v);
    } else if (!strcmp(flag, "--moe-overlap-chunks")) {
        rc = parse_int(flag, v, 1, MT_MOE_MAX_CHUNKS, &a->chunks, err, n);
        s->overlap_chunks = 1;
    } else if (!strcmp(flag, "--cuda-graph-impl")) {
        if (!strcmp(v, "none"))
            s->graph_none = 1;
        else if (strcmp(v, "local") && strcmp(v, "transformer_engine"))
            rc = fail(err, n,
                      "--cuda-graph-impl %s: not supported here (none, local, "
                      "transformer_engine)",
                      v);
    } else if (!strcmp(flag, "--recompute-granularity")) {
        if (strcmp(v, "selective"))
            rc = fail(err, n, "--recompute-granularity %s: only selective applies here", v);
    } else if (!strcmp(flag, "--moe-router-dtype")) {
        if (strcmp(v, "fp32"))
            rc = fail(err, n, "--moe-router-dtype %s: the router here is fp32", v);
    } else if (!strcmp(flag, "--train-iters"))
        rc = parse_int(flag, v, 1, 1000000, &a->train_iters, err, n);
    else if (!strcmp(flag, "--moe-routing")) {
        if (!strcmp(v, "balanced"))
            a->routing = MT_MOE_ROUTE_BALANCED;
        else if (!strcmp(v, "zipf"))
            a->routing = MT_MOE_ROUTE_ZIPF;
        else
            rc = fail(err, n, "--moe-routing: unknown routing '%s' (balanced, zipf)", v);
        s->routing = 1;
    } else if (!strcmp(flag, "--zipf-alpha"))
        rc = parse_double(flag, v, 0, 10, &a->zipf_alpha, err, n);
    else if (!strcmp(flag, "--seed")) {
        char *end;
        unsigned long long u;
        errno = 0;
        u = strtoull(v, &end, 10);
        if (!*v || *end || errno || *v == '-')
            rc = fail(err, n, "--seed: '%s' is not a non-negative integer", v);
        else
            a->seed = (uint64_t)u;
    } else if (!strcmp(flag, "--gemm-bench"))
        rc = parse_int(flag, v, 0, 100000, &a->gemm_bench, err, n);
    else if (!strcmp(flag, "--peak-bf16-tflops"))
        rc = parse_double(flag, v, 1, 1e6, &a->peak_bf16, err, n);
    else if (!strcmp(flag, "--peak-fp8-tflops"))
        rc = parse_double(flag, v, 1, 1e6, &a->peak_fp8, err, n);
    else if (!strcmp(flag, "--cuda-graph-scope") || !strcmp(flag, "--cuda-graph-modules"))
        rc = graph_value(a, s, flag, v, err, n);
    else if (!strcmp(flag, "--recompute-modules")) {
        if (!strcmp(v, "moe_act"))
            a->recompute_act = 1;
        else
            rc = fail(err, n, "--recompute-modules %s: only moe_act applies to this benchmark", v);
    }
    return rc;
}

static int validate(mt_moe_args *a, const seen *s, char *err, size_t n)
{
    int local;
    if (s->tokens && s->mbs_or_seq)
        return fail(err, n, "--tokens: give either --tokens or --micro-batch-size/--seq-length");
    if (s->tokens) {
        a->micro_batch = 1;
        a->seq_length = a->tokens;
    } else {
        int64_t t = (int64_t)a->micro_batch * a->seq_length;
        if (t > INT32_MAX / 2)
            return fail(err, n,
                        "--seq-length: micro-batch-size * seq-length = %lld tokens is "
                        "too many",
                        (long long)t);
        a->tokens = (int)t;
    }
    if (s->routing && s->force_balance && a->routing != MT_MOE_ROUTE_BALANCED)
        return fail(err, n, "--moe-router-force-load-balancing: conflicts with --moe-routing %s",
                    mt_moe_routing_name(a->routing));
    if (a->hidden % 16)
        return fail(err, n,
                    "--hidden-size %d: must be a multiple of 16 (cuBLASLt FP8/BF16 "
                    "alignment)",
                    a->hidden);
    if (a->ffn % 16)
        return fail(err, n,
                    "--moe-ffn-hidden-size %d: must be a multiple of 16 (cuBLASLt "
                    "FP8/BF16 alignment)",
                    a->ffn);
    if (a->topk > a->experts)
        return fail(err, n, "--moe-router-topk %d: more than --num-experts %d", a->topk,
                    a->experts);
    if (a->experts % a->ep)
        return fail(err, n, "--expert-model-parallel-size %d: does not divide --num-experts %d",
                    a->ep, a->experts);
    if ((int64_t)a->tokens * a->topk * a->ep >= INT32_MAX)
        return fail(err, n,
                    "--tokens: tokens * topk * EP = %lld rows does not fit 32-bit "
                    "indices",
                    (long long)a->tokens * a->topk * a->ep);
    if (s->graph_modules == 2)
        return fail(err, n, "--cuda-graph-scope moe_preprocess: needs moe_router too");
    a->graph_scope = s->graph_none           ? MT_MOE_GRAPH_NONE
                     : s->graph_modules == 3 ? MT_MOE_GRAPH_ROUTER_PREPROCESS
                     : s->graph_modules == 1 ? MT_MOE_GRAPH_ROUTER
                                             : MT_MOE_GRAPH_NONE;
    local = a->experts / a->ep;
    if (s->overlap_chunks && !a->overlap)
        return fail(err, n, "--moe-overlap-chunks: needs --overlap-moe-expert-parallel-comm");
    if (!a->overlap)
        a->chunks = 1;
    else if (!s->overlap_chunks)
        a->chunks = 4;
    if (a->chunks > local)
        a->chunks = local;
    if (a->check &&
        (double)a->tokens * a->ep * a->topk * a->hidden * a->ffn > (double)MT_MOE_CHECK_MAX_WORK)
        return fail(err, n,
                    "--check: tokens*EP*topk*hidden*ffn = %.3g is too large for the CPU "
                    "reference (at most %lld); use small sizes",
                    (double)a->tokens * a->ep * a->topk * a->hidden * a->ffn,
                    (long long)MT_MOE_CHECK_MAX_WORK);
    return 0;
}

/* The flag's row in the newest Megatron-LM table that has it, or NULL. */
static const mt_flag *megatron_flag(const char *flag)
{
    const char *const *v = mt_dialect_known();
    const mt_flag *f = NULL;
    size_t n = 0;
    while (v[n])
        n++;
    while (n-- > 0 && !f) {
        const mt_mlm_dialect *d = mt_dialect_find(v[n]);
        f = d ? mt_dialect_flag(d, flag) : NULL;
    }
    return f;
}

int mt_moe_args_parse(mt_moe_args *a, int argc, char **argv, char *err, size_t errlen)
{
    seen s;
    const mt_flag *mf;
    int i, rc;
    mt_moe_args_defaults(a);
    memset(&s, 0, sizeof s);
    if (err && errlen)
        err[0] = 0;
    for (i = 1; i < argc; i++) {
        char flag[64];
        const char *arg = argv[i], *eq = strchr(arg, '='), *val = NULL;
        size_t fl = eq ? (size_t)(eq - arg) : strlen(arg);
        if (arg[0] != '-' || fl >= sizeof flag)
            return fail(err, errlen,
                        "unexpected argument '%.200s' (flags start with --; see "
                        "--help)",
                        arg);
        memcpy(flag, arg, fl);
        flag[fl] = 0;
        if (eq)
            val = eq + 1;
        if (in(SWITCHES, flag)) {
            if (val)
                return fail(err, errlen, "%s: takes no value", flag);
            if (!strcmp(flag, "--help") || !strcmp(flag, "-h"))
                a->help = 1;
            else if (!strcmp(flag, "--bf16"))
                ;
            else if (!strcmp(flag, "--overlap-moe-expert-parallel-comm"))
                a->overlap = 1;
            else if (!strcmp(flag, "--moe-router-force-load-balancing"))
                s.force_balance = 1;
            else if (!strcmp(flag, "--check"))
                a->check = 1;
        } else if (in(VALUED, flag)) {
            if (!val) {
                if (i + 1 >= argc)
                    return fail(err, errlen, "%s: needs a value", flag);
                val = argv[++i];
            }
            if ((rc = one(a, &s, flag, val, err, errlen)))
                return rc;
        } else if (in(LISTED, flag)) {
            int got = 0;
            if (val) {
                if ((rc = one(a, &s, flag, val, err, errlen)))
                    return rc;
                got = 1;
            }
            while (!val && i + 1 < argc && strncmp(argv[i + 1], "--", 2)) {
                if ((rc = one(a, &s, flag, argv[++i], err, errlen)))
                    return rc;
                got++;
            }
            if (!got)
                return fail(err, errlen, "%s: needs a value", flag);
        } else if (in(IGNORED_VALUED, flag) || in(IGNORED_LISTED, flag) ||
                   in(IGNORED_SWITCHES, flag)) {
            size_t used = strlen(a->ignored);
            if (in(IGNORED_VALUED, flag) && !val) {
                if (i + 1 >= argc)
                    return fail(err, errlen, "%s: needs a value", flag);
                i++;
            } else if (in(IGNORED_LISTED, flag) && !val) {
                while (i + 1 < argc && strncmp(argv[i + 1], "--", 2))
                    i++;
            } else if (in(IGNORED_SWITCHES, flag) && val) {
                return fail(err, errlen, "%s: takes no value", flag);
            }
            a->n_ignored++;
            if (used + fl + 2 < sizeof a->ignored)
                snprintf(a->ignored + used, sizeof a->ignored - used, "%s%s", used ? " " : "",
                         flag);
        } else if (in(UNSUPPORTED, flag)) {
            return fail(err, errlen, "%s: changes what the MoE layer computes in a way this "
                        "benchmark does not implement (BF16 or FP8 only)", flag);
        } else if ((mf = megatron_flag(flag))) {
            /* Any other flag of a Megatron-LM version moetune speaks (data,
             * tokenizer, architecture: a contract's fixed_args) is accepted
             * with its arity from that version's table, and ignored. */
            size_t used = strlen(a->ignored);
            int novalue = !strcmp(mf->nargs, "0");
            if (novalue && val)
                return fail(err, errlen, "%s: takes no value", flag);
            if (!novalue && !val) {
                int many = !strcmp(mf->nargs, "+") || !strcmp(mf->nargs, "*");
                int optional = !strcmp(mf->nargs, "?") || !strcmp(mf->nargs, "*");
                int got = 0;
                while (i + 1 < argc && strncmp(argv[i + 1], "--", 2) && (many || !got))
                    i++, got++;
                if (!got && !optional)
                    return fail(err, errlen, "%s: needs a value", flag);
            }
            a->n_ignored++;
            if (used + fl + 2 < sizeof a->ignored)
                snprintf(a->ignored + used, sizeof a->ignored - used, "%s%s", used ? " " : "",
                         flag);
        } else {
            return fail(err, errlen, "unknown flag %s (see --help)", flag);
        }
    }
    if (a->help)
        return 0;
    return validate(a, &s, err, errlen);
}
