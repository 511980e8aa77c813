/*
 * simlegal.c - the sim's start-up legality: what the Megatron-LM version the
 * sim plays would refuse at start-up, with that version's first message,
 * and what only fails later, at run time, on the GPU.
 *
 * The sim's own code (issue 14), written from upstream Megatron-LM at the
 * pinned commits of each version (core_r0.15.0, core_v0.18.0, core_v0.19.0,
 * main: /work/spec/COMMON.md) and from the rule notes in /work/spec; it does
 * not share code with moetune's plugins (tests/test_sim_legality.c compares
 * the two, tests/sim_conformance.c compares it with upstream's verdicts).
 * Only the flag tables (core/dialects/mlm/<version>.tsv) and the argparse
 * emulation over them (core/dialect.c mt_argparse) come from the core: they
 * are data about the parser, not legality.
 *
 * A start-up check runs in upstream's order:
 *   1. parse_args: argparse over the version's table, then the custom
 *      converters argparse leaves to Python (moe_freq_type's eval, the CUDA
 *      graph module names, attention-backend enum lookups, tuple_type);
 *   2. validate_args (arguments.py) with WORLD_SIZE and the environment;
 *   3. the micro-batch calculator;
 *   4. ModelParallelConfig / TransformerConfig __post_init__.
 * Only the first failure is reported, as the exception upstream raises
 * (AssertionError, ValueError, KeyError, ZeroDivisionError, NameError, ...);
 * argparse errors exit 2, every other exception exits 1.
 *
 * What upstream only finds once the model runs on the GPU (a TE recipe the
 * hardware lacks: MXFP8 or NVFP4 before Blackwell; FP8 before Hopper) is
 * sim_runtime_check(): the sim prints its start-up lines first, then fails
 * there.  A dispatcher backend the GPU cannot run is no error at all: the
 * model falls back to alltoall with a warning (simmodel.c).
 *
 * Its interface: workers/sim/sim.h.
 */
#include "sim.h"

#include "dialect.h"
#include "hardware.h"
#include "kv.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the pipeline layout grammar ------------------------------------------
 * Megatron's PipelineParallelLayerLayout string: commas are removed; every
 * "(...)*k" (no nested parentheses) is unrolled in one left-to-right pass,
 * then every "x*k" (one character); what remains is split at '|' into
 * stages, each a run of E (embedding), t (decoder layer), m (MTP layer),
 * L (loss). */

#define LAYOUT_EXPANDED_MAX (1 << 20)

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

/* One pass of "(group)*k" -> group repeated k times. */
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

/* One pass of "x*k" -> x repeated k times. */
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

/* The layout unrolled into a fresh string (NULL when too large). */
static char *layout_expand(const char *text)
{
    sbuf nocomma = {0}, groups = {0}, flat = {0};
    const char *p;
    for (p = text; *p; p++)
        if (*p != ',')
            sb_putn(&nocomma, p, 1, 1);
    sb_putn(&nocomma, "", 0, 1);
    unroll_groups(nocomma.s ? nocomma.s : "", &groups);
    sb_putn(&groups, "", 0, 1);
    unroll_chars(groups.s ? groups.s : "", &flat);
    sb_putn(&flat, "", 0, 1);
    free(nocomma.s);
    free(groups.s);
    if (nocomma.overflow || groups.overflow || flat.overflow) {
        free(flat.s);
        return NULL;
    }
    if (!flat.s)
        flat.s = calloc(1, 1);
    return flat.s;
}

/* ---- the check's state ---------------------------------------------------- */

typedef struct chk {
    const mt_kv *ns;
    const mt_kv *env;
    int v;        /* 15, 18, 19, 20 (main) */
    int te;       /* major * 100 + minor: 209, 212 */
    int arch;     /* CUDA capability major */
    long world;
    sim_verdict *out;
    /* derived values (validate_args' mutations) */
    long tp, pp, cp, ep, etp, dp, gtp, gbs, mbs;
    int vpp_set;  /* virtual_pipeline_model_parallel_size is not None */
    long vpp;
    int sp;       /* sequence parallel after TP == 1 forcing */
    int overlap_p2p;
    int gran;     /* 0 None, 1 full, 2 selective */
    char impl[24];     /* cuda_graph_impl after the deprecated flags and modules */
    char g[256];       /* cuda graph modules after normalization, space-joined */
    int infer_block;   /* inference_cuda_graph_scope == block */
    int nan_check;
    long experts;      /* 0 = None */
    int fp8, fp4;
    char backend[16];  /* flex backend after moe_enable_deepep */
    double cf;         /* capacity factor, NAN = None */
    char rm[512];      /* recompute modules (TC view) */
    int cpu_offloading;
    char lb[64];       /* load-balancing type, "" when a list of several */
    int lb_list;
    int freq_all_moe;  /* moe_layer_freq says every layer is MoE */
    int add_bias, add_qkv_bias;
} chk;

static int failv(chk *k, const char *type, const char *where, const char *fmt, va_list ap)
{
    sim_verdict *o = k->out;
    if (o) {
        snprintf(o->type, sizeof o->type, "%s", type);
        snprintf(o->where, sizeof o->where, "%s", where);
        vsnprintf(o->msg, sizeof o->msg, fmt, ap);
        o->exit_status = !strcmp(type, "argparse") ? 2 : 1;
    }
    return 1;
}

static int fail(chk *k, const char *type, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(chk *k, const char *type, const char *where, const char *fmt, ...)
{
    va_list ap;
    int r;
    va_start(ap, fmt);
    r = failv(k, type, where, fmt, ap);
    va_end(ap);
    return r;
}

#define WA "megatron/training/arguments.py"
#define WT "megatron/core/transformer/transformer_config.py"
#define WM "megatron/core/model_parallel_config.py"
#define WN "megatron/core/num_microbatches_calculator.py"
#define WL "megatron/core/transformer/pipeline_parallel_layer_layout.py"
#define WG "megatron/core/transformer/cuda_graph_config.py"

#define AE(...) fail(k, "AssertionError", WA, __VA_ARGS__)
#define VE(...) fail(k, "ValueError", WA, __VA_ARGS__)
#define TAE(...) fail(k, "AssertionError", WT, __VA_ARGS__)
#define TVE(...) fail(k, "ValueError", WT, __VA_ARGS__)

static const char *S(const chk *k, const char *dest) { return mt_kv_get(k->ns, dest); }
static int has(const chk *k, const char *dest) { return S(k, dest) != NULL; }

/* Python truthiness of a namespace value. */
static int truthy(const char *v)
{
    char *end;
    double d;
    if (!v || !*v || !strcmp(v, "false") || !strcmp(v, "False") || !strcmp(v, "None"))
        return 0;
    d = strtod(v, &end);
    if (end != v && !*end)
        return d != 0;
    return 1;
}
static int on(const chk *k, const char *dest) { return truthy(S(k, dest)); }

static long I(const chk *k, const char *dest, long def)
{
    const char *v = S(k, dest);
    char *end;
    long n;
    if (!v || !*v)
        return def;
    n = strtol(v, &end, 10);
    return end == v ? def : n;
}

static double F(const chk *k, const char *dest, double def)
{
    const char *v = S(k, dest);
    char *end;
    double d;
    if (!v || !*v)
        return def;
    d = strtod(v, &end);
    return end == v ? def : d;
}

static int is(const chk *k, const char *dest, const char *val)
{
    const char *v = S(k, dest);
    return v && !strcmp(v, val);
}

/* The next space-separated word at *p into w (cut to wn - 1 bytes), *p
 * moved past it: 1; 0 when none is left. */
static int next_word(const char **p, char *w, size_t wn)
{
    size_t l;
    while (**p == ' ')
        (*p)++;
    l = strcspn(*p, " ");
    if (!l)
        return 0;
    snprintf(w, wn, "%.*s", (int)(l < wn - 1 ? l : wn - 1), *p);
    *p += l;
    return 1;
}

/* Whether the space-separated list holds the word. */
static int inw(const char *list, const char *w)
{
    size_t n = strlen(w);
    const char *p = list;
    if (!list)
        return 0;
    while (*p) {
        size_t l;
        while (*p == ' ')
            p++;
        l = strcspn(p, " ");
        if (l == n && !strncmp(p, w, n))
            return 1;
        p += l;
    }
    return 0;
}

static size_t nwords(const char *list)
{
    size_t n = 0;
    const char *p = list;
    if (!list)
        return 0;
    while (*p) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        n++;
        p += strcspn(p, " ");
    }
    return n;
}

static void addw(char *list, size_t cap, const char *w)
{
    size_t l = strlen(list);
    snprintf(list + l, cap - l, "%s%s", l ? " " : "", w);
}

static const char *env(const chk *k, const char *name)
{
    return k->env ? mt_kv_get(k->env, name) : NULL;
}

/* Python's floor modulo (the sign of the divisor). */
static long pymod(long a, long b)
{
    long r = a % b;
    return r && ((r < 0) != (b < 0)) ? r + b : r;
}
static long pydiv(long a, long b) { return (a - pymod(a, b)) / b; }

#define ZDIV(where) fail(k, "ZeroDivisionError", where, "integer modulo by zero")

/* ---- custom converters (what argparse leaves to Python) ------------------- */

/* moe_freq_type and friends: a pattern with '[' is Python-evaluated; the
 * sim evaluates the little language the allowed characters permit (ints,
 * lists, + and *, parentheses).  Results: 0 ok (list in *out, or an int),
 * 1 a ValueError/TypeError (argparse's "invalid ... value"), 2 a
 * SyntaxError or another escaping exception (message in why). */
typedef struct pyval {
    int is_list;
    long n;        /* int value, or list length */
    long zeros;    /* list: how many elements are 0 */
    int nested;    /* list holds non-int elements */
} pyval;

typedef struct peval {
    const char *p;
    int err;       /* 1 type error, 2 syntax error */
    char why[160];
} peval;

static void pe_ws(peval *e)
{
    while (*e->p == ' ')
        e->p++;
}

static pyval pe_expr(peval *e);

static pyval pe_atom(peval *e)
{
    pyval v = {0, 0, 0, 0};
    pe_ws(e);
    if (isdigit((unsigned char)*e->p)) {
        const char *s = e->p;
        long n = 0;
        while (isdigit((unsigned char)*e->p)) {
            if (n < 100000000L)
                n = n * 10 + (*e->p - '0');
            e->p++;
        }
        if (*s == '0' && e->p - s > 1 && !e->err) {
            e->err = 2;
            snprintf(e->why, sizeof e->why, "leading zeros in decimal integer literals are not "
                                            "permitted; use an 0o prefix for octal integers");
        }
        v.n = n;
        return v;
    }
    if (*e->p == '(') {
        e->p++;
        v = pe_expr(e);
        pe_ws(e);
        if (*e->p != ')') {
            if (!e->err) {
                e->err = 2;
                snprintf(e->why, sizeof e->why, *e->p ? "invalid syntax" : "'(' was never closed");
            }
            return v;
        }
        e->p++;
        return v;
    }
    if (*e->p == '[') {
        e->p++;
        v.is_list = 1;
        pe_ws(e);
        if (*e->p == ']') {
            e->p++;
            return v;
        }
        for (;;) {
            pyval el = pe_expr(e);
            if (e->err)
                return v;
            if (el.is_list)
                v.nested = 1;
            else if (el.n == 0)
                v.zeros++;
            v.n++;
            pe_ws(e);
            if (*e->p == ',') {
                e->p++;
                pe_ws(e);
                if (*e->p == ']') {
                    e->p++;
                    return v;
                }
                continue;
            }
            if (*e->p == ']') {
                e->p++;
                return v;
            }
            e->err = 2;
            snprintf(e->why, sizeof e->why, *e->p ? "invalid syntax" : "'[' was never closed");
            return v;
        }
    }
    if (!e->err) {
        e->err = 2;
        snprintf(e->why, sizeof e->why, "invalid syntax");
    }
    return v;
}

static pyval pe_term(peval *e)
{
    pyval a = pe_atom(e);
    for (;;) {
        pyval b;
        pe_ws(e);
        if (e->err || *e->p != '*')
            return a;
        e->p++;
        if (*e->p == '*') { /* power: int ** int only */
            e->p++;
            b = pe_atom(e);
            if (a.is_list || b.is_list) {
                if (!e->err)
                    e->err = 1;
                return a;
            }
            a.n = b.n > 40 ? 100000000L : (long)pow((double)a.n, (double)b.n);
            continue;
        }
        b = pe_atom(e);
        if (e->err)
            return a;
        if (a.is_list && b.is_list) {
            e->err = 1;
            return a;
        }
        if (a.is_list || b.is_list) {
            pyval l = a.is_list ? a : b;
            long times = a.is_list ? b.n : a.n;
            if (times < 0)
                times = 0;
            l.n *= times;
            l.zeros *= times;
            a = l;
        } else {
            a.n *= b.n;
        }
    }
}

static pyval pe_expr(peval *e)
{
    pyval a = pe_term(e);
    for (;;) {
        pyval b;
        pe_ws(e);
        if (e->err || *e->p != '+')
            return a;
        e->p++;
        b = pe_term(e);
        if (e->err)
            return a;
        if (a.is_list != b.is_list) {
            e->err = 1;
            return a;
        }
        a.n += b.n;
        a.zeros += b.zeros;
        a.nested |= b.nested;
    }
}

static int freq_eval(const char *s, pyval *out, char *why, size_t n)
{
    peval e;
    const char *p;
    if (!strchr(s, '[')) {
        char *end;
        errno = 0;
        out->is_list = 0;
        out->n = strtol(s, &end, 10);
        while (*end == ' ')
            end++;
        return end == s || *end || errno ? 1 : 0;
    }
    for (p = s; *p; p++)
        if (!strchr(",[]()+*0123456789", *p))
            return 1; /* "Invalid pattern": a ValueError argparse reports */
    e.p = s;
    e.err = 0;
    e.why[0] = 0;
    *out = pe_expr(&e);
    pe_ws(&e);
    if (!e.err && *e.p) {
        e.err = 2;
        snprintf(e.why, sizeof e.why, *e.p == ']' ? "unmatched ']'" : *e.p == ')' ? "unmatched ')'" : "invalid syntax");
    }
    if (e.err == 2)
        snprintf(why, n, "%s (<string>, line 1)", e.why);
    return e.err;
}

/* The converters, in command-line order of the flags in res->toks. */
static int check_converters(chk *k, const mt_mlm_dialect *d, char *const *argv,
                            const mt_argparse_result *res)
{
    static const char *const freq_dests[] = {"moe_layer_freq", "window_attn_skip_freq",
                                             "no_rope_freq", "linear_attention_freq"};
    static const char *const cg_names = "full full_iteration full_iteration_inference attn mlp moe "
                                        "moe_router moe_preprocess mamba";
    static const char *const backends = "flash fused unfused local auto";
    size_t t;
    (void)d;
    for (t = 0; res && t < res->n_toks; t++) {
        const mt_flag *f = res->toks[t].flag;
        size_t i, first = res->toks[t].first, count = res->toks[t].count;
        const char *inl;
        if (!f)
            continue;
        inl = strchr(argv[first], '=');
        for (i = 0; i < sizeof freq_dests / sizeof freq_dests[0]; i++)
            if (!strcmp(f->dest, freq_dests[i])) {
                const char *val = inl ? inl + 1 : count > 1 ? argv[first + 1] : "";
                char why[200];
                pyval pv;
                int r = freq_eval(val, &pv, why, sizeof why);
                if (r == 1)
                    return fail(k, "argparse", f->flag, "argument %s: invalid %s value: '%s'",
                                f->flag, f->type, val);
                if (r == 2)
                    return fail(k, "SyntaxError", WA, "%s", why);
            }
        if (k->v >= 18 && (!strcmp(f->flag, "--cuda-graph-modules") || !strcmp(f->flag, "--cuda-graph-scope"))) {
            for (i = 1; i < count; i++)
                if (!inw(cg_names, argv[first + i]))
                    return fail(k, "KeyError", WA, "'%s'", argv[first + i]);
            if (inl && !inw(cg_names, inl + 1))
                return fail(k, "KeyError", WA, "'%s'", inl + 1);
        }
        if (!strcmp(f->dest, "attention_backend")) {
            const char *val = inl ? inl + 1 : count > 1 ? argv[first + 1] : "";
            if (!inw(backends, val))
                return fail(k, "KeyError", k->v >= 18 ? "megatron/training/argument_utils.py" : WA,
                            "'%s'", val);
        }
        if (!strcmp(f->dest, "window_size")) {
            const char *val = inl ? inl + 1 : count > 1 ? argv[first + 1] : "";
            char buf[256], *p, *save = NULL;
            size_t l;
            snprintf(buf, sizeof buf, "%s", val);
            p = buf;
            while (*p == '(' || *p == ')')
                p++;
            l = strlen(p);
            while (l && (p[l - 1] == '(' || p[l - 1] == ')'))
                p[--l] = 0;
            {
                int bad = !*p || p[l ? l - 1 : 0] == ',' || *p == ',' || strstr(p, ",,");
                char *tok;
                for (tok = strtok_r(p, ",", &save); tok && !bad; tok = strtok_r(NULL, ",", &save)) {
                    char *end;
                    strtol(tok, &end, 10);
                    while (*end == ' ')
                        end++;
                    if (end == tok || *end)
                        bad = 1;
                }
                if (bad)
                    return fail(k, "argparse", f->flag, "argument %s: invalid tuple_type value: '%s'",
                                f->flag, val);
            }
        }
    }
    return 0;
}

/* ---- 2. validate_args ------------------------------------------------------ */

/* The VPP block: mutual exclusion, layout stages, divisibility. */
static int va_vpp(chk *k)
{
    int nl = has(k, "num_layers_per_virtual_pipeline_stage");
    int nv = has(k, "num_virtual_stages_per_pipeline_rank");
    const char *layout = S(k, "pipeline_model_parallel_layout");
    int first = has(k, "decoder_first_pipeline_num_layers"), last = has(k, "decoder_last_pipeline_num_layers");
    long acc = on(k, "account_for_embedding_in_pipeline_split") + on(k, "account_for_loss_in_pipeline_split");
    long L = I(k, "num_layers", 0) + acc;
    if (nl + nv + (layout != NULL) >= 2)
        return AE("No more than one of the following arguments can be set at the same time: "
                  "--num-layers-per-virtual-pipeline-stage, --num-virtual-stages-per-pipeline-rank,"
                  "--pipeline-model-parallel-layout. args.num_layers_per_virtual_pipeline_stage=%s, "
                  "args.num_virtual_stages_per_pipeline_rank=%s, "
                  "args.pipeline_model_parallel_layout=%s%s%s.",
                  nl ? S(k, "num_layers_per_virtual_pipeline_stage") : "None",
                  nv ? S(k, "num_virtual_stages_per_pipeline_rank") : "None", layout ? "'" : "",
                  layout ? layout : "None", layout ? "'" : "");
    k->vpp_set = 0;
    if (layout) {
        char *flat = layout_expand(layout), *p, *stage;
        long stages = 1;
        if (!flat)
            return fail(k, "MemoryError", WL, "the layout '%s' unrolls too far", layout);
        stage = flat;
        for (p = flat; *p; p++) {
            if (*p == '|') {
                stages++;
                stage = p + 1;
            } else if (!strchr("ELtm", *p)) {
                size_t sl = strcspn(stage, "|");
                fail(k, "AssertionError", WL,
                     "Invalid layer character: %c (stage='%.*s', layout_str='%.300s'), known layer "
                     "characters: ['E', 'L', 't', 'm']",
                     *p, (int)sl, stage, flat);
                free(flat);
                return 1;
            }
        }
        free(flat);
        if (pymod(stages, k->pp))
            return AE("The length of pipeline_model_parallel_layout must be divisible by "
                      "pipeline_model_parallel_size (num_stages=%ld, "
                      "args.pipeline_model_parallel_size=%ld)",
                      stages, k->pp);
        k->vpp = stages / k->pp;
        k->vpp_set = k->vpp != 1;
    } else if (nl) {
        long per = I(k, "num_layers_per_virtual_pipeline_stage", 0);
        if (first || last)
            return AE("please use --num-virtual-stages-per-pipeline-rank to specify virtual "
                      "pipeline parallel degree when enable uneven pipeline parallelism");
        if (pymod(L, k->pp))
            return AE("number of layers of the model must be divisible pipeline model parallel size");
        if (per == 0)
            return ZDIV(WA);
        if (pymod(pydiv(L, k->pp), per))
            return AE("number of layers per pipeline stage must be divisible number of layers per "
                      "virtual pipeline stage");
        k->vpp = pydiv(pydiv(L, k->pp), per);
        k->vpp_set = k->vpp != 1;
    } else if (nv) {
        k->vpp = I(k, "num_virtual_stages_per_pipeline_rank", 0);
        k->vpp_set = k->vpp != 1;
    } else if (!first && !last) {
        if (pymod(L, k->pp))
            return AE("Number of layers should be divisible by the pipeline-model-parallel size");
    }
    if (!k->vpp_set)
        k->vpp = 0;
    k->overlap_p2p = on(k, "overlap_p2p_comm");
    if (k->vpp_set) {
        if (k->overlap_p2p && k->pp <= 1)
            return AE("When interleaved schedule is used, pipeline-model-parallel size should be "
                      "greater than 1");
        if (!k->overlap_p2p && k->pp <= 2)
            return AE("When interleaved schedule is used and p2p communication overlap is disabled, "
                      "pipeline-model-parallel size should be greater than 2 to avoid having "
                      "multiple p2p sends and recvs between same 2 ranks per communication batch");
    } else {
        k->overlap_p2p = 0;
    }
    return 0;
}

/* CUDA graph flags: deprecated spellings, module normalization. */
static int va_graphs(chk *k)
{
    int en = on(k, "enable_cuda_graph"), ex = on(k, "external_cuda_graph");
    snprintf(k->impl, sizeof k->impl, "%s", S(k, "cuda_graph_impl") ? S(k, "cuda_graph_impl") : "none");
    if (en || ex) {
        if (strcmp(k->impl, "none"))
            return AE("Do not use --enable-cuda-graph or --external-cuda-graph with --cuda-graph-impl.");
        if (en && ex)
            return AE("--enable-cuda-graph and --external-cuda-graph cannot be enabled at the same time.");
        snprintf(k->impl, sizeof k->impl, "%s", en ? "local" : "transformer_engine");
    }
    k->g[0] = 0;
    if (k->v < 18)
        return 0; /* r0.15: --cuda-graph-scope is one string, read later */
    {
        const char *mods = S(k, "cuda_graph_modules"), *scope = S(k, "cuda_graph_scope_deprecated");
        char raw[256];
        const char *p;
        int fi = 0, fii = 0;
        snprintf(raw, sizeof raw, "%s", mods ? mods : "");
        if (scope) {
            if (nwords(raw))
                return AE("--cuda-graph-scope and --cuda-graph-modules cannot be used together.");
            snprintf(raw, sizeof raw, "%s", scope);
        }
        if (inw(raw, "full")) {
            if (nwords(raw) != 1)
                return fail(k, "AssertionError", WG, "full scope cannot be used with other scopes.");
            return 0;
        }
        fi = inw(raw, "full_iteration");
        fii = inw(raw, "full_iteration_inference");
        if (fi && fii)
            return fail(k, "AssertionError", WG,
                        "cuda_graph_modules cannot contain multiple deprecated values at the same "
                        "time: ['full_iteration', 'full_iteration_inference'].");
        if (fi && !strcmp(k->impl, "transformer_engine"))
            return fail(k, "AssertionError", WG,
                        "cuda_graph_modules='full_iteration' cannot be combined with "
                        "cuda_graph_impl='%s'.",
                        k->impl);
        if (fii && strcmp(k->impl, "none") && strcmp(k->impl, "local"))
            return fail(k, "AssertionError", WG,
                        "cuda_graph_modules='full_iteration_inference' cannot be combined with "
                        "cuda_graph_impl='%s'.",
                        k->impl);
        if (fii && !strcmp(k->impl, "local"))
            k->infer_block = 1;
        if (fi)
            snprintf(k->impl, sizeof k->impl, "full_iteration");
        char w[32];
        for (p = raw; next_word(&p, w, sizeof w);)
            if (strcmp(w, "full_iteration") && strcmp(w, "full_iteration_inference"))
                addw(k->g, sizeof k->g, w);
    }
    return 0;
}

/* Upstream's weight-shard resolve: s shards over a group of size ranks; 0 or the failure. */
static int va_shards(chk *k, long s, long size)
{
    if (s < size)
        return fail(k, "ValueError", WM,
                    "tensor_parallel_num_weight_shards (%ld) must be >= "
                    "tensor_model_parallel_size (%ld).",
                    s, size);
    if (size == 0)
        return ZDIV(WM);
    if (pymod(s, size))
        return fail(k, "ValueError", WM,
                    "tensor_parallel_num_weight_shards (%ld) must be divisible by "
                    "tensor_model_parallel_size (%ld).",
                    s, size);
    return 0;
}

/* The parallel sizes, DP, CP's hierarchy, ETP and the recompute granularity. */
static int va_sizes(chk *k)
{
    long total;

    k->tp = I(k, "tensor_model_parallel_size", 1);
    k->pp = I(k, "pipeline_model_parallel_size", 1);
    k->cp = I(k, "context_parallel_size", 1);
    k->ep = I(k, "expert_model_parallel_size", 1);
    k->gtp = 1;
    if (k->v >= 19 && has(k, "tensor_parallel_num_weight_shards")) {
        long s = I(k, "tensor_parallel_num_weight_shards", 0);
        if (va_shards(k, s, k->tp))
            return 1;
        k->gtp = s / k->tp;
    }
    total = k->tp * k->pp * k->cp * k->gtp;
    if (total == 0)
        return ZDIV(WA);
    if (pymod(k->world, total))
        return AE("world size (%ld) is not divisible by total_model_size (total_model_size=%ld)",
                  k->world, total);
    k->dp = pydiv(k->world, total);
    if (has(k, "hierarchical_context_parallel_sizes") && nwords(S(k, "hierarchical_context_parallel_sizes"))) {
        const char *p = S(k, "hierarchical_context_parallel_sizes");
        long prod = 1;
        while (*p) {
            char *end;
            prod *= strtol(p, &end, 10);
            if (end == p)
                break;
            p = end;
        }
        if (prod != k->cp)
            return AE("AssertionError (no message)");
    }
    if (inw(S(k, "cp_comm_type"), "a2a+p2p") && !has(k, "hierarchical_context_parallel_sizes"))
        return AE("--hierarchical-context-parallel-sizes must be set when a2a+p2p is used in cp comm");
    k->etp = has(k, "expert_tensor_parallel_size") ? I(k, "expert_tensor_parallel_size", 1) : k->tp;
    if (on(k, "recompute_activations"))
        k->gran = 2;
    else
        k->gran = is(k, "recompute_granularity", "full") ? 1 : is(k, "recompute_granularity", "selective") ? 2 : 0;
    return 0;
}

/* The micro and global batch sizes, and MTP's position embedding (r0.16 on). */
static int va_batch(chk *k)
{
    if (!has(k, "micro_batch_size"))
        return AE("AssertionError (no message)");
    k->mbs = I(k, "micro_batch_size", 0);
    if (k->mbs <= 0)
        return AE("AssertionError (no message)");
    k->gbs = has(k, "global_batch_size") ? I(k, "global_batch_size", 0) : k->mbs * k->dp;
    if (k->gbs <= 0)
        return AE("AssertionError (no message)");
    if (k->v >= 18) {
        long g = k->v >= 20 ? k->gtp : 1;
        if (k->mbs * k->dp * g == 0)
            return ZDIV(WA);
        if (pymod(k->gbs, k->mbs * k->dp * g))
            return AE("eval_global_batch_size (%ld) must be divisible by eval_micro_batch_size (%ld) "
                      "* data_parallel_size (%ld)%s",
                      k->gbs, k->mbs, k->dp, k->v >= 20 ? " * gtp_weight_remat_size (1)" : "");
        if (on(k, "mtp_num_layers") && !is(k, "position_embedding_type", "rope") &&
            !is(k, "position_embedding_type", "none"))
            return AE("Multi-Token Prediction (MTP) is not supported with %s position embedding "
                      "type.The supported position embedding types are rope and none.",
                      S(k, "position_embedding_type") ? S(k, "position_embedding_type") : "None");
    }
    return 0;
}

/* Overlapped parameter gather, FP8/FP4 parameters, the precisions and the NaN check. */
static int va_overlap_precision(chk *k)
{
    int fp16 = on(k, "fp16"), bf16 = on(k, "bf16");
    int distopt = on(k, "use_distributed_optimizer");

    if (on(k, "overlap_param_gather")) {
        if (!distopt && !(k->v >= 18 && is(k, "optimizer", "dist_muon")))
            return AE(k->v >= 18 ? "--overlap-param-gather only supported with distributed optimizer, "
                                   "megatron fsdp, or dist_muon"
                                 : "--overlap-param-gather only supported with distributed optimizer "
                                   "or megatron fsdp");
        if (!on(k, "overlap_grad_reduce"))
            return AE("Must use --overlap-param-gather with --overlap-grad-reduce");
    }
    if (on(k, "overlap_param_gather_with_optimizer_step")) {
        if (!distopt)
            return AE("--overlap-param-gather-with-optimizer-step only supported with distributed optimizer");
        if (!on(k, "overlap_param_gather"))
            return AE("Must use --overlap-param-gather-with-optimizer-step with --overlap-param-gather");
        if (!k->vpp_set)
            return AE("--overlap-param-gather-with-optimizer-step only supported with interleaved "
                      "pipeline parallelism");
        return AE("--overlap-param-gather-with-optimizer-step not supported with distributed "
                  "checkpointing yet");
    }
    if (on(k, "fp8_param_gather") && !distopt)
        return AE("--fp8-param-gather only supported with distributed optimizer, torch fsdp2, "
                  "megatron fsdp, or inference mode");
    k->fp8 = has(k, "fp8");
    k->fp4 = has(k, "fp4");
    if (k->fp4 && k->fp8)
        return VE("--fp4-format and --fp8-format cannot be used simultaneously. Please choose one.");
    if (on(k, k->v >= 18 ? "fp4_param_gather" : "fp4_param") && !k->fp4)
        return VE("--fp4-param-gather must be used together with --fp4-format.");
    if (fp16 && bf16)
        return AE("AssertionError (no message)");
    if (bf16 && on(k, "accumulate_allreduce_grads_in_fp32") && S(k, "main_grads_dtype") &&
        !is(k, "main_grads_dtype", "fp32"))
        return AE("--main-grads-dtype can only be fp32 when --accumulate-allreduce-grads-in-fp32 is set");
    k->nan_check = on(k, "check_for_nan_in_loss_and_grad");
    if (fp16 && !on(k, "loss_scale"))
        k->nan_check = 0;
    if (k->v < 18) {
        if (!strcmp(k->impl, "local") && is(k, "cuda_graph_scope", "full_iteration") && k->nan_check &&
            !on(k, "inference_dynamic_batching"))
            return AE("--no-check-for-nan-in-loss-and-grad should be set with full_iteration CUDA graph");
    } else {
        if (!strcmp(k->impl, "full_iteration") && k->nan_check)
            return AE("--no-check-for-nan-in-loss-and-grad should be set with "
                      "--cuda-graph-impl=full_iteration for training.");
        if (k->infer_block && k->fp8) {
            if (!is(k, "transformer_impl", "inference_optimized"))
                return AE("fp8 with --inference-cuda-graph-scope=block is only supported with "
                          "--transformer-impl=inference_optimized");
            if (!is(k, "fp8_recipe", "mxfp8"))
                return AE("Only --fp8-recipe=mxfp8 is supported with --inference-cuda-graph-scope=block");
        }
    }
    if (k->v < 18 && on(k, "train_iters") && has(k, "rampup_batch_size"))
        return AE("expected no batch-size rampup for iteration-based training");
    return 0;
}

/* The model's required sizes, heads, sequence lengths and memory-log interval. */
static int va_model_shape(chk *k)
{
    {
        static const char *const req[] = {"num_layers", "hidden_size", "num_attention_heads",
                                          "max_position_embeddings"};
        size_t i;
        for (i = 0; i < 4; i++)
            if (!has(k, req[i]))
                return AE("%s argument is None", req[i]);
    }
    if (!has(k, "kv_channels")) {
        long h = I(k, "num_attention_heads", 1);
        if (h == 0)
            return ZDIV(WA);
        if (pymod(I(k, "hidden_size", 0), h))
            return AE("AssertionError (no message)");
    }
    if (has(k, "seq_length") && k->cp > 1 && pymod(I(k, "seq_length", 0), 2 * k->cp))
        return AE("seq-length should be a multiple of 2 * context-parallel-size if "
                  "context-parallel-size > 1.");
    if (has(k, "seq_length") && I(k, "max_position_embeddings", 0) < I(k, "seq_length", 0))
        return AE("max_position_embeddings (%ld) must be greater than or equal to seq_length (%ld).",
                  I(k, "max_position_embeddings", 0), I(k, "seq_length", 0));
    if (has(k, "decoder_seq_length") && I(k, "max_position_embeddings", 0) < I(k, "decoder_seq_length", 0))
        return AE("AssertionError (no message)");
    if (k->v >= 18 && has(k, "log_memory_interval")) {
        if (I(k, "log_interval", 100) == 0)
            return ZDIV(WA);
        if (pymod(I(k, "log_memory_interval", 0), I(k, "log_interval", 100)))
            return AE("AssertionError (no message)");
    }
    return 0;
}

/* Recompute, fp16-only options, sequence parallelism, TP overlap, expert shards, biases, mrope. */
static int va_recompute_tp(chk *k)
{
    int fp16 = on(k, "fp16"), bf16 = on(k, "bf16");

    if (on(k, "distribute_saved_activations")) {
        if (k->tp <= 1)
            return AE("can distribute recomputed activations only across tensor model parallel groups");
        if (k->gran != 1)
            return AE("distributed recompute activations is only application to full recompute granularity");
        if (!has(k, "recompute_method"))
            return AE("for distributed recompute activations to work you need to use a recompute method ");
    }
    if (k->gran == 2 && has(k, "recompute_method"))
        return AE("recompute method is not yet supported for selective recomputing granularity");
    if (on(k, "fp16_lm_cross_entropy") && !fp16)
        return AE("lm cross entropy in fp16 only support in fp16 mode.");
    if (on(k, "fp32_residual_connection") && !(fp16 || bf16))
        return AE("residual connection in fp32 only supported when using fp16 or bf16.");
    if (k->v < 18 && on(k, "moe_grouped_gemm") && !bf16)
        return AE("Currently GroupedGEMM for MoE only supports bf16 dtype.");
    k->sp = on(k, "sequence_parallel") && k->tp != 1;
    if (on(k, "tp_comm_overlap") && !k->sp)
        return AE("Tensor parallel communication/GEMM overlap can happen only when sequence "
                  "parallelism is enabled");
    if ((k->tp > 1 || k->cp > 1) && k->arch < 10 && !on(k, "overlap_moe_expert_parallel_comm")) {
        const char *c = env(k, "CUDA_DEVICE_MAX_CONNECTIONS");
        if (!c || strcmp(c, "1"))
            return AE("Using tensor model parallelism or context parallelism require setting the "
                      "environment variable CUDA_DEVICE_MAX_CONNECTIONS to 1");
    }
    if (k->v >= 19 && has(k, "expert_tensor_parallel_num_weight_shards")) {
        /* the expert twin of the weight-shard resolve, after the ETP default
         * (upstream's helper words it with the non-expert names) */
        long s = I(k, "expert_tensor_parallel_num_weight_shards", 0);
        if (va_shards(k, s, k->etp))
            return 1;
    }
    k->add_bias = on(k, "add_bias_linear");
    k->add_qkv_bias = on(k, "add_qkv_bias") || k->add_bias;
    if (is(k, "attention_backend", "local") && !has(k, "spec"))
        return fail(k, "TypeError", WA, "'NoneType' object is not subscriptable");
    {
        const char *pe = on(k, "use_rotary_position_embeddings") ? "rope" : S(k, "position_embedding_type");
        if (pe && !strcmp(pe, "mrope") && !has(k, "mrope_section"))
            return AE("--mrope-section should be set when using --position-embedding-type mrope.");
    }
    return 0;
}

/* Experts, load balancing, CPU offload, delayed wgrad, activation offload, graphs' allocator. */
static int va_moe_offload(chk *k)
{
    int fp16 = on(k, "fp16");
    const char *alloc = env(k, "PYTORCH_CUDA_ALLOC_CONF");
    int expandable = alloc && strstr(alloc, "expandable_segments:True");

    k->experts = I(k, "num_experts", 0);
    if (k->ep > 1) {
        if (!k->experts)
            return AE("num_experts must be non None to use expert model parallelism");
        if (pymod(k->experts, k->ep))
            return AE("Number of experts should be a multiple of expert model parallel_size.");
        if (k->v < 18 && fp16)
            return AE("Expert parallelism is not supported with fp16 training.");
    }
    {
        const char *lb = S(k, "moe_router_load_balancing_type");
        k->lb_list = lb && nwords(lb) > 1;
        snprintf(k->lb, sizeof k->lb, "%s", lb && !k->lb_list ? lb : "");
    }
    if (on(k, "optimizer_cpu_offload")) {
        if (!on(k, "use_precision_aware_optimizer"))
            return AE("The optimizer cpu offload must be used in conjunction with "
                      "`--use-precision-aware-optimizer`, as the hybrid device optimizer reuses the "
                      "code path of this flag.");
        if (on(k, "fp8_param_gather") && !is(k, "fp8_recipe", "delayed"))
            return AE("When `--fp8-param-gather` is enabled, the optimizer cpu offload must be used "
                      "in conjunction with `--fp8-recipe delayed`.");
    }
    if (on(k, "delay_wgrad_compute")) {
        if (!is(k, "transformer_impl", "transformer_engine"))
            return AE("Delaying wgrad compute is only supported with transformer_engine implementation");
        if (k->v >= 18 && on(k, "overlap_grad_reduce")) {
            int attn = inw(k->g, "attn");
            int in_scope = attn || (inw(k->g, "moe_router") && has(k, "moe_shared_expert_intermediate_size") &&
                                    !on(k, "moe_shared_expert_overlap"));
            if (in_scope) {
                if (k->te < 212)
                    return AE("CUDA graph with delay_wgrad_compute requires TE version >= 2.12.0.");
                if (!on(k, "gradient_accumulation_fusion"))
                    return AE("CUDA graph with delay_wgrad_compute requires gradient_accumulation_fusion "
                              "to be enabled. This is because the default gradient accumulation does "
                              "not use static memory addresses, which breaks CUDA graph requirements.");
                if (attn && (k->add_bias || k->add_qkv_bias))
                    return AE("CUDA graph with delay_wgrad_compute doesn't support attn bias for now.");
            }
        }
    }
    if (k->v >= 18 && on(k, "fine_grained_activation_offloading")) {
        const char *nv = env(k, "NVTE_CPU_OFFLOAD_V1");
        if (!is(k, "transformer_impl", "transformer_engine"))
            return AE("Fine-grained activation offloading is only supported with transformer_engine "
                      "implementation");
        if (k->te >= 210 && (!nv || strcmp(nv, "1")))
            return AE("For fine-grained activation offloading with TE >= 2.10.0, NVTE_CPU_OFFLOAD_V1 "
                      "should be set to 1 to avoid offloading weights.");
    }
    k->cpu_offloading = k->v >= 18 && I(k, "cpu_offloading_num_layers", 0) > 0;
    if (k->v < 18) {
        if (strcmp(k->impl, "none") && expandable)
            return AE("expandable_segments:True may not be safe when using CUDA Graphs with some "
                      "specific parallel settings. The training may crash with illegal memory access.");
        if (strcmp(k->impl, "none") && k->gran == 1)
            return AE("recompute_granularity must not be full when CUDA Graphs are enabled.");
        if (on(k, "mtp_num_layers")) {
            const char *pe = on(k, "use_rotary_position_embeddings") ? "rope" : S(k, "position_embedding_type");
            if (!pe || (strcmp(pe, "rope") && strcmp(pe, "none")))
                return AE("Multi-Token Prediction (MTP) is not supported with %s position embedding "
                          "type.The supported position embedding types are rope and none.",
                          pe ? pe : "None");
        }
    } else {
        const char *ngr = env(k, "NCCL_GRAPH_REGISTER");
        if (!strcmp(k->impl, "transformer_engine") && expandable && (!ngr || strcmp(ngr, "0")))
            return AE("Setting NCCL_GRAPH_REGISTER=0 to avoid illegal memory access when using CUDA "
                      "Graph with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.");
        if (!strcmp(k->impl, "full_iteration") && nwords(k->g))
            return AE("--cuda-graph-modules must be empty when --cuda-graph-impl=full_iteration.");
    }
    return 0;
}

static int validate_args(chk *k)
{
    if (va_sizes(k) || va_graphs(k) || va_batch(k) || va_vpp(k) || va_overlap_precision(k) ||
        va_model_shape(k) || va_recompute_tp(k) || va_moe_offload(k))
        return 1;
    return 0;
}

/* ---- 3. the micro-batch calculator ----------------------------------------- */

static int microbatches(chk *k)
{
    long d = k->dp * (k->v >= 19 ? k->gtp : 1);
    if (k->v >= 18)
        return 0; /* validate_args' eval batch check already asked the same */
    if (on(k, "decrease_batch_size_if_needed")) {
        if (k->gbs / (k->mbs * d) < 1)
            return fail(k, "AssertionError", WN, "number of microbatches should be at least 1, got 0.");
        return 0;
    }
    if (pymod(k->gbs, k->mbs * d))
        return fail(k, "AssertionError", WN,
                    "global batch size (%ld) is not divisible by micro batch size (%ld) times data "
                    "parallel size (%ld)",
                    k->gbs, k->mbs, d);
    return 0;
}

/* ---- 4a. ModelParallelConfig.__post_init__ ----------------------------------- */

static int model_parallel_config(chk *k)
{
    if (on(k, "defer_embedding_wgrad_compute")) {
        if (k->pp == 1)
            return fail(k, "ValueError", WM, "Cannot defer embedding wgrad compute when pipeline model "
                                             "parallel is not used");
        if (!on(k, "gradient_accumulation_fusion"))
            return fail(k, "ValueError", WM, "Cannot defer embedding wgrad compute when gradient "
                                             "accumulation fusion is not used");
        if (I(k, "wgrad_deferral_limit", 0) < 0)
            return fail(k, "ValueError", WM, "Wgrad deferral limit should be greater than or equal to 0 "
                                             "when it is enabled!");
    }
    if (k->v < 18 && k->ep > 1 && k->tp > 1 && !k->sp)
        return fail(k, "NameError", WM, "name 'warnings' is not defined");
    if (on(k, "overlap_p2p_comm_warmup_flush") && !k->overlap_p2p)
        return fail(k, "ValueError", WM, "Pipeline parallel communication overlapping in warmup and "
                                         "flush is only compatible with overlap_p2p_comm but not "
                                         "batch_p2p_comm.");
    return 0;
}

/* ---- 4b. TransformerConfig.__post_init__ ------------------------------------ */

/* The layout's structure (validate_layer_layout). */
static int tc_layout(chk *k, const char *layout)
{
    char *flat = layout_expand(layout), *p;
    long nstages = 1, s, mtp = I(k, "mtp_num_layers", 0), nl = I(k, "num_layers", 0);
    long ce = 0, cl = 0, ct = 0, cm = 0, seen_m = 0, t_after_m = 0;
    char first = 0, last = 0;
    int rc = 0;
    if (!flat)
        return 0;
    for (p = flat; *p; p++) {
        if (*p == '|') {
            nstages++;
            continue;
        }
        if (!first)
            first = *p;
        last = *p;
        ce += *p == 'E', cl += *p == 'L', ct += *p == 't', cm += *p == 'm';
        if (*p == 'm')
            seen_m = 1;
        if (*p == 't' && seen_m)
            t_after_m = 1;
    }
#define LT(c) ((c) == 'E' ? "embedding" : (c) == 'L' ? "loss" : (c) == 't' ? "decoder" : "mtp")
    if (!first)
        rc = fail(k, "IndexError", WL, "list index out of range");
    else if (first != 'E')
        rc = fail(k, "AssertionError", WL, "The first layer must be embedding, but got LayerType.%s", LT(first));
    else if (last != 'L')
        rc = fail(k, "AssertionError", WL, "The last layer must be loss, but got LayerType.%s", LT(last));
    else if (ce != 1)
        rc = fail(k, "AssertionError", WL, "Embedding must be specified exactly once");
    else if (cl != 1)
        rc = fail(k, "AssertionError", WL, "Loss must be specified exactly once");
    else if (ct != nl)
        rc = fail(k, "AssertionError", WL, "Number of decoder layers %ldmust match num_layers %ld", ct, nl);
    else if (cm != mtp)
        rc = fail(k, "AssertionError", WL, "Number of mtp layers in layout must match mtp_num_layers");
    else if (t_after_m)
        rc = fail(k, "AssertionError", WL, "decoder layers must be placed before MTP layers");
    else if (cm) {
        /* stage i lives on pp rank i % PP, virtual stage i / PP */
        long pp = k->pp > 0 ? k->pp : 1, nv = nstages / pp;
        char *st = flat;
        for (s = 0; s < nstages && !rc; s++) {
            size_t len = strcspn(st, "|");
            long m = 0, i;
            int has_loss = 0;
            for (i = 0; i < (long)len; i++)
                m += st[i] == 'm', has_loss |= st[i] == 'L';
            if (m) {
                long rank = s % pp, vs = s / pp;
                if (vs != nv - 1)
                    rc = fail(k, "AssertionError", WL,
                              "Currently we restrict that the MTP should be always in the last ");
                else if (m != mtp)
                    rc = fail(k, "AssertionError", WL,
                              k->v < 18 ? "All of the MTP layers must be in the same stage"
                                        : "All of the MTP layers must be in the same one virtual "
                                          "pipeline stage");
                else if (k->v < 18 && (rank != pp - 1 || !has_loss))
                    rc = fail(k, "AssertionError", WL,
                              "MTP layers must be in the last stage together with Loss stage.");
            }
            st += len + (st[len] == '|');
        }
    }
#undef LT
    free(flat);
    return rc;
}

/* The first or the last pipeline stage's own layer count (`which` is "first" or "last"):
 * TransformerConfig's checks on it, then its layers and its stage leave the middle's. */
static int tc_edge_stage(chk *k, const char *which, long *rem, long *pps)
{
    char knob[64];
    snprintf(knob, sizeof knob, "decoder_%s_pipeline_num_layers", which);
    long n = I(k, knob, 0);
    if (n <= 0)
        return TVE("num_layers_in_%s_pipeline_stage must be larger than 0", which);
    if (k->vpp_set && k->vpp == 0)
        return ZDIV(WT);
    if (k->vpp_set && pymod(n, k->vpp))
        return TVE("number of layers at %s stage: %ldmust be divisible by virtual pipeline"
                   "parallel degree %ld",
                   which, n, k->vpp);
    *rem -= n;
    (*pps)--;
    return 0;
}

static int tc_pipeline(chk *k)
{
    const char *layout = S(k, "pipeline_model_parallel_layout");
    int first = has(k, "decoder_first_pipeline_num_layers"), last = has(k, "decoder_last_pipeline_num_layers");
    int ae = on(k, "account_for_embedding_in_pipeline_split"), al = on(k, "account_for_loss_in_pipeline_split");
    if ((first || last) && (ae || al))
        return TVE("num_layers_in_first_pipeline_stage and num_layers_in_last_pipeline_stage cannot "
                   "beset at the same time with account_for_embedding_in_pipeline_splitand "
                   "account_for_loss_in_pipeline_split");
    if (layout) {
        if (first || last || ae || al)
            return TVE("pipeline_model_parallel_layout cannot be set with other pipeline layout "
                       "arguments. self.num_layers_in_first_pipeline_stage=%s, "
                       "self.num_layers_in_last_pipeline_stage=%s, "
                       "self.account_for_embedding_in_pipeline_split=%s, "
                       "self.account_for_loss_in_pipeline_split=%s.",
                       first ? S(k, "decoder_first_pipeline_num_layers") : "None",
                       last ? S(k, "decoder_last_pipeline_num_layers") : "None", ae ? "True" : "False",
                       al ? "True" : "False");
        return tc_layout(k, layout);
    }
    if (first || last) {
        long rem = I(k, "num_layers", 0), pps = k->pp;
        int rc;
        if (first && (rc = tc_edge_stage(k, "first", &rem, &pps)))
            return rc;
        if (last && (rc = tc_edge_stage(k, "last", &rem, &pps)))
            return rc;
        if (k->v >= 18 && (rem != 0) != (pps != 0))
            return TVE("Mismatch: %ld middle layers remaining but %ld middle PP stages available.", rem, pps);
        if (pps && pymod(rem, pps))
            return TVE("number of layers at middle stage: %ld must be divisible bythe middle pipeline "
                       "model parallel size %ld",
                       rem, pps);
        if (pps && k->vpp_set && k->vpp && pymod(pydiv(rem, pps), k->vpp))
            return TVE("number of layers on each middle pipeline rank:%ld must be divisible by "
                       "virtualpipeline parallel degree %ld",
                       pydiv(rem, pps), k->vpp);
        return 0;
    }
    if (ae || al) {
        long lacc = I(k, "num_layers", 0) + ae + al;
        if (!k->vpp_set) {
            if (pymod(lacc, k->pp))
                return TVE("number of middle layers: %ld must be divisible by middle "
                           "pipeline_model_parallel_size %ld",
                           lacc, k->pp);
        } else {
            if (pymod(lacc, k->pp))
                return TVE("num_layers: %ld after enableaccount_for_embedding_in_pipeline_split or "
                           "account_for_loss_in_pipeline_split must be divisibleby "
                           "pipeline_model_parallel_size %ld",
                           lacc, k->pp);
            if (k->vpp == 0)
                return ZDIV(WT);
            if (pymod(pydiv(lacc, k->pp), k->vpp))
                return TVE("number of layers on each pipeline rank: %ld(after enable "
                           "account_for_embedding_in_pipeline_split or "
                           "account_for_loss_in_pipeline_split) must be divisible "
                           "byvirtual_pipeline_model_parallel_size%ld",
                           pydiv(lacc, k->pp), k->vpp);
        }
    }
    return 0;
}

static int tc_precision(chk *k)
{
    const char *recipe = S(k, "fp8_recipe") ? S(k, "fp8_recipe") : "delayed";
    if (k->fp8) {
        if (on(k, "first_last_layers_bf16")) {
            long m = k->pp ? pydiv(I(k, "num_layers", 0), k->pp) : 0;
            long s = I(k, "num_layers_at_start_in_bf16", 1), e = I(k, "num_layers_at_end_in_bf16", 1);
            if (!strcmp(recipe, "delayed"))
                return TAE("Delayed scaling does not support first / last layer in BF16.");
            if (s < 0 || s > m)
                return TAE("num_layers_at_start_in_bf16 (%ld) must be between 0 and number of layers "
                           "per pipeline stage (%ld).",
                           s, m);
            if (e < 0 || e > m)
                return TAE("num_layers_at_end_in_bf16 (%ld) must be between 0 and number of layers per "
                           "pipeline stage (%ld).",
                           e, m);
        }
        if (k->v >= 18 && !strcmp(recipe, "custom") && !on(k, "fp8_quantizer_factory"))
            return TVE("fp8_quantizer_factory must be provided when fp8_recipe is 'custom'. Specify a "
                       "Python import path (e.g., package.module.quantizer_factory) via "
                       "--fp8-quantizer-factory.");
    }
    if (on(k, "fp8_param_gather") && !k->fp8)
        return TVE("fp8_param must be used together with fp8 mode.");
    if (k->v >= 18 && on(k, "fp8_output_proj")) {
        if (!k->fp8)
            return TVE("fp8_output_proj must be used together with fp8 mode.");
        if (strcmp(recipe, "mxfp8"))
            return TVE("fp8_output_proj requires fp8_recipe='mxfp8', got '%s'.", recipe);
    }
    if (k->v >= 18 && k->fp4 && is(k, "fp4_recipe", "custom") && !on(k, "fp4_quantizer_factory"))
        return TVE("fp4_quantizer_factory must be provided when fp4_recipe is 'custom'. Specify a "
                   "Python import path (e.g., package.module.quantizer_factory) via "
                   "--fp4-quantizer-factory.");
    return 0;
}

/* The number of experts, inference-optimized MoE and single grouped weights. */
static int tc_moe_experts(chk *k)
{
    if (has(k, "num_experts") && I(k, "num_experts", 0) < 0)
        return TVE("num_moe_experts must be non-negative.");
    if (!k->experts && has(k, "moe_ffn_hidden_size")) {
        if (k->v < 18)
            return TAE("moe_ffn_hidden_size must be None when num_experts is not set.");
        if (k->freq_all_moe)
            return TVE("moe_ffn_hidden_size is set but num_moe_experts is None. Please set "
                       "num_moe_experts or remove moe_ffn_hidden_size.");
    }
    if (k->v >= 18 && is(k, "transformer_impl", "inference_optimized") && k->experts) {
        if (k->etp > 1)
            return TAE("Inference-optimized MoE layers does not support expert tensor parallelism.");
        if (has(k, "moe_expert_capacity_factor"))
            return TAE("Inference-optimized MoE layers only support dropless MoE ");
        if (on(k, "moe_router_padding_for_quantization"))
            return TAE("Inference-optimized MoE layers do not support padded routing map for quantization.");
        if (!is(k, "moe_router_dtype", "fp32"))
            return TAE("--transformer-impl='inference_optimized' requires --moe-router-dtype=fp32 to "
                       "avoid costly dtype conversions during decode.");
        if ((on(k, "swiglu") || on(k, "quick_geglu")) &&
            (k->v < 20 || !(is(k, "inference_grouped_gemm_backend", "torch") ||
                            is(k, "inference_grouped_gemm_backend", "vllm") ||
                            !has(k, "inference_grouped_gemm_backend"))))
            return TAE(k->v < 20 ? "--transformer-impl='inference_optimized' does not yet support gated "
                                   "linear units (SwiGLU/GeGLU)."
                                 : "--transformer-impl='inference_optimized' supports gated linear units "
                                   "(SwiGLU/GeGLU) only with --inference-grouped-gemm-backend torch or vllm");
    }
    if (k->v >= 18 && (on(k, "moe_single_grouped_weight") || on(k, "moe_single_grouped_bias"))) {
        if (!on(k, "moe_grouped_gemm"))
            return TAE("moe_single_grouped_weight and moe_single_grouped_bias require moe_grouped_gemm=True.");
        if (k->te < 214)
            return TAE("moe_single_grouped_weight and moe_single_grouped_bias require "
                       "transformer-engine>=2.14.0, but your version is %d.%d.0.",
                       k->te / 100, k->te % 100);
    }
    return 0;
}

/* The token dispatcher and its backend, and the shared expert's overlap. */
static int tc_moe_dispatcher(chk *k)
{
    int flex = is(k, "moe_token_dispatcher_type", "flex");
    const char *disp = S(k, "moe_token_dispatcher_type") ? S(k, "moe_token_dispatcher_type") : "allgather";
    int deepep = on(k, "moe_enable_deepep");
    int pad = on(k, "moe_pad_expert_input_to_capacity");
    int opf = on(k, "use_transformer_engine_op_fuser");
    /* dispatcher */
    snprintf(k->backend, sizeof k->backend, "%s",
             S(k, "moe_flex_dispatcher_backend") ? S(k, "moe_flex_dispatcher_backend") : "deepep");
    if (deepep) {
        if (!flex)
            return TVE("DeepEP backend is only supported with flex token dispatcher.");
        if (k->v >= 18 && !strcmp(k->backend, "hybridep"))
            return TVE("Only one backend is supported for flex token dispatcher.");
        snprintf(k->backend, sizeof k->backend, "deepep");
    }
    if (k->v < 18 && flex && pad)
        return TVE("Flex token dispatcher does not support moe_pad_expert_input_to_capacity");
    if (k->v >= 18 && flex && pad && !strcmp(k->backend, "deepep"))
        return TVE("Flex token dispatcher with deepep backend does not support "
                   "moe_pad_expert_input_to_capacity");
    if (k->v >= 19 && !strcmp(k->backend, "ncclep") && !flex)
        return TVE("moe_flex_dispatcher_backend='ncclep' requires moe_token_dispatcher_type='flex'.");
    if (k->v >= 20 && flex && !strcmp(k->backend, "ncclep") && on(k, "moe_use_grouped_tensor") && !opf)
        return TVE("moe_use_grouped_tensor=True without use_transformer_engine_op_fuser is not yet "
                   "supported with the NCCL-EP dispatcher. Use the TE op-fuser path or select the "
                   "alltoall, DeepEP, or HybridEP dispatcher.");
    if (k->v >= 20 && ((S(k, "moe_dispatch_fwd_dtype") && !is(k, "moe_dispatch_fwd_dtype", "bf16")) ||
                       (S(k, "moe_combine_bwd_dtype") && !is(k, "moe_combine_bwd_dtype", "bf16")))) {
        if (!flex || strcmp(k->backend, "ncclep"))
            return TVE("moe_dispatch_fwd_dtype / moe_combine_bwd_dtype require the 'ncclep' flex "
                       "dispatcher backend.");
        if (!(opf && on(k, "moe_grouped_gemm")))
            return TVE("moe_dispatch_fwd_dtype / moe_combine_bwd_dtype = 'mxfp8' require BOTH "
                       "use_transformer_engine_op_fuser and moe_grouped_gemm: only the fused grouped "
                       "GEMM path consumes the pre-quantized MXFP8 GroupedTensor payload.");
    }
    if (k->v >= 19 && has(k, "moe_deepep_num_sms") && has(k, "moe_hybridep_num_sms") &&
        I(k, "moe_deepep_num_sms", 0) != I(k, "moe_hybridep_num_sms", 0) && !has(k, "moe_flex_dispatcher_num_sms"))
        return TVE("Conflicting deprecated SM-count knobs {'moe_deepep_num_sms': %ld, "
                   "'moe_hybridep_num_sms': %ld}; set a single moe_flex_dispatcher_num_sms instead.",
                   I(k, "moe_deepep_num_sms", 0), I(k, "moe_hybridep_num_sms", 0));
    if (has(k, "moe_shared_expert_intermediate_size")) {
        if (I(k, "moe_shared_expert_intermediate_size", 0) <= 0)
            return TVE("moe_shared_expert_intermediate_size must be num_shared_experts * "
                       "ffn_size_of_each_shared_expert, but got %s",
                       S(k, "moe_shared_expert_intermediate_size"));
        if (on(k, "moe_shared_expert_overlap") && strcmp(disp, "alltoall") && (k->v < 18 || !flex))
            return TVE(k->v < 18 ? "moe_shared_expert_overlap only works with alltoall token dispatcher."
                                 : "moe_shared_expert_overlap only works with alltoall or flex token "
                                   "dispatcher.");
    }
    return 0;
}

/* The expert capacity factors and padding to capacity. */
static int tc_moe_capacity(chk *k)
{
    int pad = on(k, "moe_pad_expert_input_to_capacity");
    int opf = on(k, "use_transformer_engine_op_fuser");
    k->cf = has(k, "moe_expert_capacity_factor") ? F(k, "moe_expert_capacity_factor", 0) : NAN;
    if (!isnan(k->cf)) {
        static const char *const ok = "aux_loss seq_aux_loss global_aux_loss none";
        const char *lb = S(k, "moe_router_load_balancing_type");
        int bad = 0;
        if (k->lb_list) {
            const char *p = lb;
            while (*p) {
                char w[40];
                size_t l;
                while (*p == ' ')
                    p++;
                l = strcspn(p, " ");
                if (!l)
                    break;
                snprintf(w, sizeof w, "%.*s", (int)(l < 39 ? l : 39), p);
                bad |= !inw(ok, w);
                p += l;
            }
        } else {
            bad = !inw(ok, k->lb[0] ? k->lb : "aux_loss");
        }
        if (bad)
            return TVE("moe_expert_capacity_factor only works with aux_loss, seq_aux_loss, "
                       "global_aux_loss or none load balancing");
        if (k->cf < 0)
            k->cf = NAN;
    }
    if (pad && isnan(k->cf))
        return TVE("moe_expert_capacity_factor must be set to use moe_pad_expert_input_to_capacity");
    if (k->v >= 18 && has(k, "moe_expert_rank_capacity_factor")) {
        if (k->v == 18) {
            if (!opf)
                return TVE("moe_expert_rank_capacity_factor requires use_transformer_engine_op_fuser to "
                           "be enabled.");
            if (strcmp(k->backend, "hybridep"))
                return TVE("moe_expert_rank_capacity_factor requires moe_flex_dispatcher_backend to be "
                           "'hybridep'.");
        } else {
            if (strcmp(k->backend, "hybridep") && strcmp(k->backend, "ncclep"))
                return TVE("moe_expert_rank_capacity_factor requires moe_flex_dispatcher_backend to be "
                           "'hybridep' or 'ncclep'.");
            if (!strcmp(k->backend, "hybridep") && !opf && !(k->v >= 20 && on(k, "moe_use_grouped_tensor")))
                return TVE(k->v >= 20 ? "moe_expert_rank_capacity_factor with the 'hybridep' backend "
                                        "requires use_transformer_engine_op_fuser=True or "
                                        "moe_use_grouped_tensor=True."
                                      : "moe_expert_rank_capacity_factor with the 'hybridep' backend "
                                        "requires use_transformer_engine_op_fuser to be enabled.");
        }
    }
    return 0;
}

/* MoE: the experts, the dispatcher, the capacity. */
static int tc_moe(chk *k)
{
    int opf = on(k, "use_transformer_engine_op_fuser");
    int gt = k->v >= 20 && (on(k, "moe_use_grouped_tensor") || (opf && on(k, "moe_grouped_gemm")));
    if (tc_moe_experts(k) || tc_moe_dispatcher(k) || tc_moe_capacity(k))
        return 1;
    (void)gt;
    return 0;
}

/* The first word of the space-separated words that allowed does not hold,
 * into w (cut to wn - 1 bytes): 1; 0 when allowed holds every one. */
static int word_not_in(const char *words, const char *allowed, char *w, size_t wn)
{
    const char *p = words;
    while (next_word(&p, w, wn))
        if (!inw(allowed, w))
            return 1;
    return 0;
}

/* CPU offloading and the recompute granularity, method and modules. */
static int tc_recompute_modules(chk *k)
{
    static const char *const rm_ok[] = {"core_attn moe_act layernorm mla_up_proj mlp moe shared_experts",
                                        "core_attn moe_act layernorm mla_up_proj mlp moe shared_experts "
                                        "gdn_norm_out",
                                        "core_attn moe_act layernorm mla_up_proj mlp moe shared_experts "
                                        "gdn_norm_out gdp_in_proj gdp_qkv mhc"};
    const char *allowed = k->v < 19 ? rm_ok[0] : k->v == 19 ? rm_ok[1] : rm_ok[2];
    const char *rms = S(k, "recompute_modules");
    const char *recipe = S(k, "fp8_recipe") ? S(k, "fp8_recipe") : "delayed";
    long nl = I(k, "num_layers", 0);
    if (k->cpu_offloading) {
        if (I(k, "cpu_offloading_num_layers", 0) >= nl)
            return TVE("CPU offloading can be done only for layers less than %ld", nl);
        if (k->pp > 1)
            return TVE("Currently there is no support for Pipeline parallelism with CPU offloading");
        if (k->gran)
            return TVE("CPU offloading does not work when activation recomputation is enabled");
    }
    if (k->gran) {
        if (k->gran == 1 && !has(k, "recompute_method"))
            return TVE("Using recompute_granularity: full so recompute_method must be \"block\" or "
                       "\"uniform\"");
        if (k->gran == 1 && !has(k, "recompute_num_layers"))
            return TVE("When using recompute_granularity: full recompute_num_layers must be between 1 "
                       "and num_layers_per_pipeline_rank: %ld",
                       k->pp ? pydiv(nl, k->pp) : 0);
        if (k->gran == 2 && has(k, "recompute_num_layers"))
            return TVE("When using recompute_granularity: selective recompute_num_layers must be None.");
        if (on(k, "distribute_saved_activations") && k->sp)
            return TVE("distribute_saved_activations: True must be false when sequence parallel is "
                       "enabled: True");
    }
    snprintf(k->rm, sizeof k->rm, "%s", rms ? rms : "core_attn");
    if (k->gran == 2) {
        char w[48];
        if (word_not_in(k->rm, allowed, w, sizeof w))
            return TAE("Invalid choices for recompute_modules: {'%s'}. Allowed modules are: {%s}", w,
                       allowed);
        if (inw(k->rm, "moe_act") && !on(k, "moe_grouped_gemm"))
            return TAE("moe_act in recompute_modules is only supported with moe_grouped_gemm.");
        if (inw(k->rm, "mla_up_proj") && !on(k, "multi_latent_attention"))
            return TAE("mla_up_proj in recompute_modules is only supported with multi_latent_attention.");
        if (k->v >= 19 && inw(k->rm, "gdn_norm_out"))
            return TAE(k->v == 19 ? "gdn_norm_out in recompute_modules is only supported with "
                                    "experimental_attention_variant='gated_delta_net'."
                                  : "gdn_norm_out in recompute_modules is only supported with "
                                    "experimental_attention_variant='gdn' or 'gdn2'.");
        if (inw(k->rm, "shared_experts") && has(k, "moe_shared_expert_intermediate_size") &&
            on(k, "moe_shared_expert_overlap"))
            return TVE("shared_experts recompute cannot work with --moe-shared-expert-overlap.");
        if (k->fp8 && (inw(k->rm, "moe_act") || inw(k->rm, "layernorm")) && !strcmp(recipe, "delayed"))
            return TAE("Delayed scaling does not support moe_act and layernorm recompute for fp8.");
    }
    if (on(k, "moe_layer_recompute")) {
        if (k->gran == 1)
            return TVE("Do not set --moe-layer-recompute with full recompute granularity. ");
        k->gran = 2;
        if (!inw(k->rm, "moe"))
            addw(k->rm, sizeof k->rm, "moe");
    }
    if (k->v >= 20 && k->gran == 2 && inw(k->rm, "mhc"))
        return TVE("'mhc' in recompute_modules requires enable_mhc_connections=True.");
    return 0;
}

/* Fine-grained activation offloading's modules and sizes (r0.16 on). */
static int tc_offload_modules(chk *k)
{
    static const char *const off_ok[] = {"core_attn attn_proj expert_fc1 moe_act attn_norm mlp_norm qkv_linear",
                                         "core_attn attn_proj expert_fc1 moe_act attn_norm mlp_norm "
                                         "qkv_linear fused_group_mlp",
                                         "core_attn attn_proj expert_fc1 moe_act attn_norm mlp_norm "
                                         "qkv_linear fused_group_mlp gdp_qkv"};
    const char *oa = k->v == 18 ? off_ok[0] : k->v == 19 ? off_ok[1] : off_ok[2];
    const char *om = S(k, "offload_modules");
    char w[48];
    if (k->cpu_offloading)
        return TAE("fine_grained_activation_offloading cannot be enabled with cpu_offloading.");
    if (!nwords(om))
        return TAE("AssertionError (no message)");
    if (word_not_in(om, oa, w, sizeof w))
        return TAE("Invalid choices for offload_modules: {'%s'}. Allowed modules are: {%s}", w, oa);
    if (inw(om, "attn_proj") && !inw(om, "core_attn"))
        return TVE("attn_proj cannot be set to offload_modules alone without core_attn because the "
                   "input of attn_proj is the output of core_attn, which is needed in "
                   "core_attn.backward().");
    if (k->v >= 20 && inw(om, "gdp_qkv") && k->gran == 2 && inw(k->rm, "gdp_in_proj"))
        return TVE("gdp_qkv cannot be set in offload_modules together with gdp_in_proj in "
                   "recompute_modules");
    if (k->v >= 19 && k->gran == 2 && inw(k->rm, "moe") &&
        (inw(om, "moe_act") || inw(om, "expert_fc1") || inw(om, "fused_group_mlp")))
        return TVE("Cannot offload {'%s'} while recomputing the entire MoE layer. 'moe' in "
                   "recompute_modules wraps the full MoE forward in a checkpoint, so offloading "
                   "activations inside it is redundant and will cause errors. Either remove 'moe' "
                   "from --recompute-modules or remove it from --offload-modules.",
                   inw(om, "moe_act") ? "moe_act" : inw(om, "expert_fc1") ? "expert_fc1" : "fused_group_mlp");
    if (k->v >= 19) {
        if (I(k, "min_offloaded_tensor_size", 0) < 0)
            return TVE("min_offloaded_tensor_size must be non-negative.");
        {
            double fr = F(k, "activation_offload_fraction", 1.0);
            if (!(fr >= 0 && fr <= 1))
                return TVE("activation_offload_fraction must be in range [0, 1].");
        }
        if (I(k, "delta_offload_bytes_across_pp_ranks", 0) < 0)
            return TVE("delta_offload_bytes_across_pp_ranks must be non-negative.");
        if (inw(om, "fused_group_mlp")) {
            if (!on(k, "use_transformer_engine_op_fuser"))
                return TVE("fused_group_mlp requires use_transformer_engine_op_fuser.");
            if (inw(om, "expert_fc1") || inw(om, "moe_act"))
                return TVE("fused_group_mlp offloads the whole fused grouped MLP and cannot be "
                           "combined with expert_fc1 or moe_act.");
        }
    }
    return 0;
}

/* MoE paged stashing (r0.16 on). */
static int tc_paged_stash(chk *k)
{
    if (k->v >= 18 && on(k, "moe_paged_stash")) {
        const char *om = S(k, "offload_modules");
        if (k->cpu_offloading)
            return TVE("moe_paged_stash cannot be enabled with cpu_offloading.");
        if (!has(k, "moe_expert_rank_capacity_factor"))
            return TVE("moe_paged_stash requires moe_expert_rank_capacity_factor to be set; there is no "
                       "need to use paged stashing without it.");
        if (inw(om, "expert_fc1") || inw(om, "moe_act") || (k->v >= 19 && inw(om, "fused_group_mlp")))
            return TVE("When moe_paged_stash is enabled, offload_modules must not include expert_fc1, "
                       "moe_act%s (paged stash covers those activations).",
                       k->v >= 19 ? ", or fused_group_mlp" : "");
    }
    return 0;
}

/* recompute, offloading, CPU offloading */
static int tc_recompute(chk *k)
{
    if (tc_recompute_modules(k))
        return 1;
    if (k->v >= 18 && on(k, "fine_grained_activation_offloading") && tc_offload_modules(k))
        return 1;
    return tc_paged_stash(k);
}

static int tc_router(chk *k)
{
    const char *score = S(k, "moe_router_score_function") ? S(k, "moe_router_score_function") : "softmax";
    if (k->experts && k->add_bias && k->etp != 1)
        return TAE("Bias in Moe is only supported when ETP==1");
    if (on(k, "moe_router_enable_expert_bias")) {
        if (k->v < 18 && strcmp(score, "sigmoid"))
            return TAE("Expert bias for aux-loss-free routing only supports sigmoid score function.Please "
                       "set --moe-router-score-function sigmoid for sigmoid score function.");
        if (k->v >= 18 && strcmp(score, "sigmoid") && strcmp(score, "sqrtsoftplus"))
            return TAE("Expert bias for aux-loss-free routing only supports 'sigmoid' and 'sqrtsoftplus' "
                       "score functions. Please set --moe-router-score-function to 'sigmoid' or "
                       "'sqrtsoftplus', or unset --moe-router-enable-expert-bias.");
    }
    {
        int padq = on(k, "moe_router_padding_for_fp8") || (k->v >= 18 && on(k, "moe_router_padding_for_quantization"));
        int ag = !S(k, "moe_token_dispatcher_type") || is(k, "moe_token_dispatcher_type", "allgather");
        if (k->v < 18 && on(k, "moe_router_padding_for_fp8")) {
            if (!k->fp8)
                return TVE("fp8 must be specified when moe_router_padding_for_fp8 is True.");
            if (ag)
                return TVE("allgather and alltoall_seq dispatcher does not support moe_router_padding_for_fp8.");
        }
        if (k->v >= 18 && padq) {
            if (!k->fp8 && !k->fp4)
                return TVE("fp8/fp4 must be specified when moe_router_padding_for_quantization is True.");
            if (ag)
                return TVE("allgather and alltoall_seq dispatcher does not support "
                           "moe_router_padding_for_quantization.");
        }
    }
    if (I(k, "moe_router_topk", 2) == 1 && !strcmp(score, "softmax") && !on(k, "moe_router_pre_softmax") &&
        strcmp(k->lb, "sinkhorn"))
        return TVE("Please use --moe-router-pre-softmax when topk is 1.");
    if (on(k, "moe_router_group_topk")) {
        long g = I(k, "moe_router_num_groups", 0), t = I(k, "moe_router_group_topk", 0);
        if (on(k, "moe_router_topk_limited_devices"))
            return TVE("moe_router_topk_limited_devices is deprecated and replaced by "
                       "moe_router_group_topk and moe_router_num_groups.");
        if (!g)
            return TVE("When using group limited routing, moe_router_num_groups must be specified.");
        if (!k->experts)
            return fail(k, "TypeError", WT, "unsupported operand type(s) for %%: 'NoneType' and 'int'");
        if (pymod(k->experts, g))
            return TAE("num_moe_experts (%ld) should be divisible by moe_router_num_groups (%ld).", k->experts, g);
        if (t > g)
            return TAE("moe_router_group_topk (%ld) should be smaller than moe_router_num_groups (%ld).", t, g);
    }
    return 0;
}

static int tc_graphs(chk *k)
{
    const char *impl = k->impl;
    if (!strcmp(impl, "none"))
        return 0;
    if (k->v < 18) {
        const char *scope = S(k, "cuda_graph_scope") ? S(k, "cuda_graph_scope") : "full";
        int te_attn = k->gran == 2 && !strcmp(impl, "transformer_engine") && !strcmp(scope, "attn");
        if (k->gran && !te_attn)
            return TAE("CUDA graphs not supported with activation recomputation.");
        if (te_attn && (inw(k->rm, "core_attn") || inw(k->rm, "mla_up_proj"))) {
            /* the first of the two in list order */
            const char *a = strstr(k->rm, "core_attn"), *b = strstr(k->rm, "mla_up_proj");
            return TAE("attn cuda graph is not supported with %s recompute.",
                       a && (!b || a < b) ? "core_attn" : "mla_up_proj");
        }
        return 0;
    }
    {
        int partial = !strcmp(impl, "local") || !strcmp(impl, "transformer_engine");
        int drop_pad = !isnan(k->cf) && on(k, "moe_pad_expert_input_to_capacity");
        int full_cg;
        if (k->cpu_offloading && strcmp(impl, "full_iteration"))
            return TAE("CUDA graphs not supported with CPU offloading.");
        if (!strcmp(impl, "local")) {
            if (inw(k->g, "moe_router") && !inw(k->g, "moe_preprocess"))
                addw(k->g, sizeof k->g, "moe_preprocess");
            else if (inw(k->g, "moe_preprocess") && !inw(k->g, "moe_router"))
                addw(k->g, sizeof k->g, "moe_router");
        }
        if (partial) {
            if (inw(k->g, "moe") && inw(k->g, "moe_router"))
                return TAE("cuda_graph_modules must not contain both moe and moe_router.");
            if (inw(k->g, "moe_preprocess") && !inw(k->g, "moe_router"))
                return TAE("moe_preprocess cuda graph is only supported with moe_router cuda graph.");
            if (k->experts <= 1 && (inw(k->g, "moe") || inw(k->g, "moe_router")))
                return TAE("moe cuda graph is only supported for MoE.");
            if (k->experts > 1) {
                if (k->freq_all_moe && inw(k->g, "mlp"))
                    return TAE("mlp cuda graph is only supported for dense layers, but not found in the model.");
                if (!drop_pad && inw(k->g, "moe"))
                    return TAE("moe cuda graph is only supported with drop-padding MoE.");
                if (!drop_pad && !inw(k->g, "moe") && is(k, "moe_token_dispatcher_type", "alltoall") &&
                    (!isnan(k->cf) || on(k, "moe_router_padding_for_fp8")) && inw(k->g, "moe_preprocess"))
                    return TAE("moe_preprocess cuda graph is not supported when there are DtoH copies and "
                               "synchronizations in the preprocess step.");
            }
        }
        full_cg = !strcmp(impl, "full_iteration") || !nwords(k->g);
        if (k->gran) {
            if (k->gran == 1 && strcmp(impl, "full_iteration"))
                return TAE("full recompute is only supported with full iteration CUDA graph.");
            if (k->gran == 2) {
                if (!strcmp(impl, "transformer_engine") && inw(k->rm, "moe") && inw(k->g, "moe_router"))
                    return TAE("moe recompute is not supported with moe_router CUDA graph with: ");
                if (F(k, "attention_dropout", 0.1) != 0.0 && inw(k->rm, "core_attn") &&
                    (full_cg || inw(k->g, "attn")))
                    return TAE("attention dropout is not supported with graphed attention recomputation.");
                if (F(k, "hidden_dropout", 0.1) != 0.0 &&
                    ((inw(k->rm, "mlp") && (full_cg || inw(k->g, "mlp"))) ||
                     (inw(k->rm, "moe") && (full_cg || inw(k->g, "moe")))))
                    return TAE("hidden dropout is not supported with graphed MLP/MoE recomputation.");
                if (has(k, "moe_input_jitter_eps") && inw(k->rm, "moe") && (full_cg || inw(k->g, "moe")))
                    return TAE("moe_input_jitter_eps is not supported with graphed moe recomputation.");
            }
        }
        if (on(k, "fine_grained_activation_offloading")) {
            const char *om = S(k, "offload_modules");
            int local = !strcmp(impl, "local");
            if (k->v >= 19 && local) {
                const char *p = om ? om : "";
                char bad[256] = "";
                while (*p) {
                    char w[48];
                    size_t l;
                    while (*p == ' ')
                        p++;
                    l = strcspn(p, " ");
                    if (!l)
                        break;
                    snprintf(w, sizeof w, "%.*s", (int)(l < 47 ? l : 47), p);
                    if (!inw("expert_fc1 moe_act fused_group_mlp", w))
                        addw(bad, sizeof bad, w);
                    p += l;
                }
                if (bad[0])
                    return TAE("fine-grained activation offloading with cuda_graph_impl='local' only "
                               "supports offload_modules 'expert_fc1', 'moe_act', and 'fused_group_mlp'. "
                               "Unsupported offload_modules: ['%s'].",
                               bad);
                if (!nwords(k->g))
                    return TAE("fine-grained activation offloading with cuda_graph_impl='local' is not "
                               "supported with whole-layer CUDA graph capture.");
            }
            if (local && (k->v == 18 || inw(k->g, "moe")))
                return TAE(k->v == 18 ? "fine-grained activation offloading is only supported with "
                                        "transformer_engine CUDA graph implementation or local CUDA graph "
                                        "implementation with full_iteration scope."
                                      : "fine-grained activation offloading is only supported with "
                                        "transformer_engine CUDA graph implementation or local CUDA graph "
                                        "implementation with partial MoE offload.");
            if (inw(k->g, "moe"))
                return TAE("Token-drop MoE is temporarily not supported with activation offloading.");
            if (I(k, "cuda_graph_warmup_steps", 3) <= 0)
                return TAE("cuda_graph_warmup_steps must be greater than 0 when enabling fine-grained "
                           "activation offloading.");
            if (!strcmp(impl, "full_iteration") && (!has(k, "fine_grained_offloading_max_inflight_offloads") ||
                                                    I(k, "fine_grained_offloading_max_inflight_offloads", 0) < 0))
                return TAE("fine_grained_offloading_max_inflight_offloads must be a non-negative integer "
                           "when using fine-grained activation offloading with full-iteration CUDA graphs");
        }
    }
    return 0;
}

static int tc_ep_overlap(chk *k)
{
    int epo = on(k, "overlap_moe_expert_parallel_comm");
    if (epo) {
        long mtp = I(k, "mtp_num_layers", -1); /* -1 = None */
        if (k->pp > 1 && !k->vpp_set)
            return TAE("If enabling EP A2A overlap, virtual_pipeline_model_parallel_size must be "
                       "specified when pipeline_model_parallel_size > 1");
        if (k->ep <= 1)
            return TAE("overlap_moe_expert_parallel_comm is only supported with expert model parallelism");
        if (!is(k, "moe_token_dispatcher_type", "alltoall") && !is(k, "moe_token_dispatcher_type", "flex"))
            return TAE("overlap_moe_expert_parallel_comm is supported with alltoall/flex token dispatcher");
        if (k->gran == 1)
            return TAE("disable full recomputation when enabling overlap_moe_expert_parallel_comm");
        if (has(k, "recompute_method"))
            return TAE("disable recomputation method when enabling overlap_moe_expert_parallel_comm");
        if (has(k, "recompute_num_layers"))
            return TAE("recompute_num_layers must be None when enabling overlap_moe_expert_parallel_comm");
        if (k->v >= 18 && inw(k->rm, "moe"))
            return TAE("disable moe in recompute_modules when enabling overlap_moe_expert_parallel_comm");
        if (!on(k, "bf16") && !on(k, "fp16"))
            return TAE("overlap_moe_expert_parallel_comm is only supported with bf16 or fp16 model");
        if (on(k, "moe_shared_expert_overlap"))
            return TAE("disable moe_shared_expert_overlap when enabling overlap_moe_expert_parallel_comm");
        if (k->v < 19 ? !(mtp == -1 || mtp == 1) : !(mtp == -1 || mtp == 0 || mtp == 1))
            return TAE(k->v < 19 ? "MTP layernum only supports 1 when enabling overlap_moe_expert_parallel_comm."
                                 : "MTP supports at most one layer when enabling "
                                   "overlap_moe_expert_parallel_comm.");
        if (k->v >= 19 && is(k, "moe_token_dispatcher_type", "flex") && !strcmp(k->backend, "ncclep") &&
            on(k, "fine_grained_activation_offloading") && inw(S(k, "offload_modules"), "expert_fc1"))
            return TAE("overlap_moe_expert_parallel_comm with ncclep does not support offloading "
                       "'expert_fc1': it forces expert FC1 to save the raw bf16 input, which the overlap "
                       "path eagerly frees.");
        if (k->v >= 18 && !strcmp(k->impl, "transformer_engine") && (inw(k->g, "moe") || inw(k->g, "mlp")))
            return TAE("CUDA graph scope on moe and mlp is not supported with overlap_moe_expert_parallel_comm");
    }
    if (on(k, "delay_wgrad_compute")) {
        if (!epo)
            return TAE("overlap_moe_expert_parallel_comm must be enabled when enabling delay_wgrad_compute");
        if (k->v < 18 && on(k, "moe_use_legacy_grouped_gemm"))
            return TAE("delay_wgrad_compute is not supported with legacy groupedgemm implementation");
        if (k->v >= 18 && !strcmp(k->impl, "transformer_engine") && k->te < 210)
            return TAE("TE version >= 2.10.0 is required for delay_wgrad_compute with partial cuda graph");
    }
    if (k->v >= 18 && on(k, "overlap_dispatch_backward_with_experts_wgrad") && epo)
        return TAE("overlap_moe_expert_parallel_comm must be disabled when enabling "
                   "overlap_dispatch_backward_with_experts_wgrad.");
    if (k->v >= 18 && on(k, "ep_overlap_early_attn_memory_release") && !epo)
        return TAE("overlap_moe_expert_parallel_comm must be enabled when enabling "
                   "ep_overlap_early_attn_memory_release");
    return 0;
}

static int transformer_config(chk *k)
{
    long heads = I(k, "num_attention_heads", 1), q;
    int mla = on(k, "multi_latent_attention");
    const char *pe = on(k, "use_rotary_position_embeddings") ? "rope" : S(k, "position_embedding_type");
    int rope_fusion = on(k, "apply_rope_fusion") && pe && !strcmp(pe, "rope");
    if (k->v >= 20 && on(k, "moe_use_grouped_tensor") && !on(k, "moe_grouped_gemm"))
        return TVE("moe_use_grouped_tensor=True requires moe_grouped_gemm=True.");
    if (pymod(heads, k->tp))
        return TVE("num_attention_heads (%ld) must be a multiple of tensor_model_parallel_size (%ld).",
                   heads, k->tp);
    q = on(k, "group_query_attention") ? I(k, "num_query_groups", 1) : heads;
    if (k->v < 18 ? pymod(q, k->tp) != 0 : (q != 0 && pymod(q, k->tp) && pymod(k->tp, q)))
        return TVE(k->v < 18 ? "num_query_groups (%ld) must be a multiple of tensor_model_parallel_size (%ld)."
                             : "num_query_groups (%ld) must be a multiple or divisor of "
                               "tensor_model_parallel_size (%ld).",
                   q, k->tp);
    if (tc_precision(k) || tc_moe(k) || tc_recompute(k) || tc_pipeline(k))
        return 1;
    if (mla && on(k, "rotary_interleaved"))
        return TVE("rotary_interleaved does not work with multi_latent_attention.");
    if (tc_router(k) || tc_graphs(k) || tc_ep_overlap(k))
        return 1;
    if (k->cp > 1 && nwords(S(k, "cp_comm_type")) > 1 && (long)nwords(S(k, "cp_comm_type")) != I(k, "num_layers", 0))
        return TAE("Length of cp_comm_type (%zu) should equal to the total number of transformer layers (%ld)!",
                   nwords(S(k, "cp_comm_type")), I(k, "num_layers", 0));
    if (mla) {
        const char *rt = S(k, "rope_type") ? S(k, "rope_type") : "yarn";
        if (rope_fusion && strcmp(rt, "yarn"))
            return TVE("apply_rope_fusion for MLA only works with YARN RoPE.");
        if (on(k, "cache_mla_latents") && rope_fusion)
            return TAE("Rope Fusion is not compatible with caching latents");
    } else if (has(k, "rope_type") && !is(k, "rope_type", "rope")) {
        return TAE("Common attention only support rope_type=\"rope\", but got %s.", S(k, "rope_type"));
    }
    return 0;
}

/* ---- entry points -------------------------------------------------------------- */

static int version_code(const char *name)
{
    if (!name || !strcmp(name, "main"))
        return 20;
    if (strstr(name, "0.15"))
        return 15;
    if (strstr(name, "0.18"))
        return 18;
    if (strstr(name, "0.19"))
        return 19;
    return 20;
}

static int te_code(const char *te)
{
    int maj = 2, min = 12;
    if (te && *te && sscanf(te, "%d.%d", &maj, &min) < 1)
        maj = 2, min = 12;
    return maj * 100 + min;
}

static void chk_init(chk *k, const sim_stack *st, const mt_kv *ns, sim_verdict *v)
{
    memset(k, 0, sizeof *k);
    k->ns = ns;
    k->env = st->env;
    k->v = version_code(st->megatron);
    k->te = te_code(st->te);
    k->arch = st->arch_major > 0 ? st->arch_major : 9;
    k->world = st->world > 0 ? st->world : 1;
    k->out = v;
    k->cf = NAN;
    k->freq_all_moe = 1;
    {
        const char *fq = S(k, "moe_layer_freq");
        pyval pv;
        char why[200];
        if (fq && freq_eval(fq, &pv, why, sizeof why) == 0)
            k->freq_all_moe = pv.is_list ? pv.zeros == 0 : pv.n == 1;
    }
}

int sim_startup_ns(const sim_stack *st, const mt_kv *ns, sim_verdict *v)
{
    chk k;
    if (v)
        memset(v, 0, sizeof *v);
    chk_init(&k, st, ns, v);
    if (validate_args(&k) || microbatches(&k) || model_parallel_config(&k) || transformer_config(&k))
        return 1;
    return 0;
}

int sim_startup_argv(const sim_stack *st, char *const *argv, size_t argc, sim_verdict *v, mt_kv *ns_out)
{
    const mt_mlm_dialect *d = mt_dialect_find(st->megatron && *st->megatron ? st->megatron : "main");
    mt_kv *ns = ns_out ? ns_out : mt_kv_new();
    mt_argparse_result res;
    chk k;
    int rc, unknown = 0;
    char umsg[512] = "";
    if (v)
        memset(v, 0, sizeof *v);
    if (!d || !ns) {
        if (v) {
            snprintf(v->type, sizeof v->type, "RuntimeError");
            snprintf(v->msg, sizeof v->msg, "moetune-sim plays no Megatron-LM version '%s'",
                     st->megatron ? st->megatron : "");
            v->exit_status = 2;
        }
        if (!ns_out)
            mt_kv_destroy(&ns);
        return 1;
    }
    rc = mt_argparse(d, argv, argc, ns, &res);
    chk_init(&k, st, ns, v);
    if (rc && strcmp(res.where, "argparse")) {
        /* the converters of the flags before the failing one ran first */
        if (check_converters(&k, d, argv, &res)) {
            mt_argparse_result_clear(&res);
            if (!ns_out)
                mt_kv_destroy(&ns);
            return 1;
        }
        /* attention-backend converts by enum name before argparse looks at
         * its choices: an unknown name escapes as a KeyError */
        if (!strcmp(res.where, "--attention-backend") && strstr(res.error, "invalid choice: '")) {
            const char *q = strstr(res.error, "invalid choice: '") + 17;
            fail(&k, "KeyError", k.v >= 18 ? "megatron/training/argument_utils.py" : WA, "'%.*s'",
                 (int)strcspn(q, "'"), q);
            mt_argparse_result_clear(&res);
            if (!ns_out)
                mt_kv_destroy(&ns);
            return 1;
        }
        /* a value error: argparse stops at once; an exception a converter
         * raises and argparse does not catch ("KeyError: 'x'") escapes as is */
        {
            size_t tl = strspn(res.error, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz");
            if (tl > 5 && !strncmp(res.error + tl - 5, "Error", 5) && !strncmp(res.error + tl, ": ", 2)) {
                fail(&k, "", WA, "%s", res.error + tl + 2);
                if (v) {
                    snprintf(v->type, sizeof v->type, "%.*s", (int)tl, res.error);
                    v->exit_status = 1;
                }
                mt_argparse_result_clear(&res);
                if (!ns_out)
                    mt_kv_destroy(&ns);
                return 1;
            }
        }
        if (v) {
            snprintf(v->type, sizeof v->type, "argparse");
            snprintf(v->msg, sizeof v->msg, "%s", res.error);
            snprintf(v->where, sizeof v->where, "%s", res.where);
            v->exit_status = 2;
        }
        mt_argparse_result_clear(&res);
        if (!ns_out)
            mt_kv_destroy(&ns);
        return 1;
    }
    if (rc) {
        unknown = 1;
        snprintf(umsg, sizeof umsg, "%s", res.error);
    }
    rc = check_converters(&k, d, argv, &res);
    mt_argparse_result_clear(&res);
    if (!rc && unknown) {
        /* argparse reports leftovers only after the whole pass */
        rc = fail(&k, "argparse", "argparse", "%s", umsg);
    }
    if (!rc)
        rc = sim_startup_ns(st, ns, v);
    if (!ns_out)
        mt_kv_destroy(&ns);
    return rc;
}

/* ---- 5. what only the GPU finds: Transformer Engine at the first autocast ---- */

int sim_runtime_check(const sim_cfg *c, sim_verdict *v)
{
    const mt_gpu_spec *g = sim_gpu(c);
    int fp8 = c->fp8_format != SIM_FP8F_NONE, fp4 = c->fp4_format != 0;
    int hopper = g && (!strcmp(g->arch, "hopper") || !strcmp(g->arch, "blackwell"));
    int blackwell = g && !strcmp(g->arch, "blackwell");
    const char *msg = NULL;
    if (v)
        memset(v, 0, sizeof *v);
    if ((fp8 || fp4) && !hopper)
        msg = "Device compute capability 8.9 or higher required for FP8 execution.";
    else if (fp8 && c->fp8_recipe == SIM_FP8R_MXFP8 && !blackwell)
        msg = "MXFP8 (for all gemms) is only supported on Blackwell and newer architectures.";
    else if (fp4 && !blackwell)
        msg = "NVFP4 (for all gemms) is only supported on Blackwell and newer architectures.";
    if (!msg) {
        /* torch.distributed's process groups, built after start-up
         * (initialize_model_parallel): the expert grid must tile the world */
        long world = (long)c->gpus_per_node * c->nodes;
        long grid = (long)sim_etp(c) * c->expert_model_parallel_size * c->pipeline_model_parallel_size;
        const char *why = NULL, *type = "RuntimeError", *rule = NULL;
        char buf[300];
        if (grid > 0 && world % grid) {
            snprintf(buf, sizeof buf,
                     "world_size (%ld) is not divisible by expert_tensor_model_pipeline_parallel size "
                     "(%ld) in initialize_model_parallel",
                     world, grid);
            why = buf, rule = "expert_grid";
        } else if (c->num_experts > 0 && c->moe_router_topk > c->num_experts) {
            snprintf(buf, sizeof buf, "selected index k out of range (torch.topk k=%d over %d experts "
                                      "in the router's first forward)",
                     c->moe_router_topk, c->num_experts);
            why = buf, rule = "topk_exceeds_experts";
        } else if (c->moe_token_dispatcher_type == SIM_DISP_FLEX && c->num_experts > 0 &&
                   (long)sim_etp(c) * c->expert_model_parallel_size <= 1 &&
                   (strstr(c->megatron, "0.15") || c->moe_flex_dispatcher_backend != SIM_BACKEND_HYBRIDEP)) {
            /* r0.15: every flex backend; later: DeepEP (the default) and NCCL-EP */
            snprintf(buf, sizeof buf, "%s dispatcher requires TPxEP > 1 (expert tensor parallel %d x "
                                      "expert parallel %d when the MoE layer is built)",
                     strstr(c->megatron, "0.15") ? "Flex token"
                     : c->moe_flex_dispatcher_backend == SIM_BACKEND_NCCLEP ? "NCCL EP" : "DeepEP",
                     sim_etp(c), c->expert_model_parallel_size);
            why = buf, rule = "flex_needs_ep", type = "AssertionError";
        } else if ((c->cuda_graph_impl == SIM_CG_LOCAL || c->cuda_graph_impl == SIM_CG_TE) &&
                   !c->cuda_graph_modules && c->num_experts > 0 &&
                   !(c->moe_expert_capacity_factor > 0 && c->moe_pad_expert_input_to_capacity)) {
            snprintf(buf, sizeof buf, "CUDA graph replay of a whole MoE layer with dropless routing: "
                                      "the captured token counts change every step (capture failed "
                                      "at the capture step)");
            why = buf, rule = "whole_layer_graph_dropless";
        }
        if (!why)
            return 0;
        if (v) {
            snprintf(v->type, sizeof v->type, "%s", type);
            snprintf(v->where, sizeof v->where, "megatron/core/parallel_state.py");
            snprintf(v->msg, sizeof v->msg, "%s (a run-time failure: the start-up checks pass)", why);
            snprintf(v->rule, sizeof v->rule, "%s", rule);
            v->exit_status = 1;
        }
        return 1;
    }
    if (v) {
        snprintf(v->type, sizeof v->type, "AssertionError");
        snprintf(v->where, sizeof v->where, "transformer_engine/pytorch/fp8.py");
        snprintf(v->msg, sizeof v->msg, "%s (%s is %s; a run-time failure: the start-up checks pass)",
                 msg, g ? g->name : c->gpu, g ? g->arch : "?");
        snprintf(v->rule, sizeof v->rule, "%s", c->fp8_recipe == SIM_FP8R_MXFP8 ? "mxfp8_needs_blackwell"
                                                : fp4                           ? "nvfp4_needs_blackwell"
                                                                                : "fp8_arch");
        v->exit_status = 1;
    }
    return 1;
}

/* ---- sim_check: a sim_cfg as the Megatron-LM command line it stands for ------- */

typedef struct argvb {
    char *v[256];
    size_t n;
    char buf[16384];
    size_t used;
} argvb;

static void ab_push(argvb *a, const char *s)
{
    size_t l = strlen(s) + 1;
    if (a->n >= 255 || a->used + l > sizeof a->buf)
        return;
    memcpy(a->buf + a->used, s, l);
    a->v[a->n++] = a->buf + a->used;
    a->used += l;
}

static void ab_int(argvb *a, const char *flag, long v)
{
    char b[32];
    ab_push(a, flag);
    snprintf(b, sizeof b, "%ld", v);
    ab_push(a, b);
}

static void ab_list(argvb *a, const char *flag, unsigned bits, const char *const *names)
{
    int i;
    if (!bits)
        return;
    ab_push(a, flag);
    for (i = 0; names[i]; i++)
        if (bits & (1u << i))
            ab_push(a, names[i]);
}

/* The sim's model base and the model's shape. */
static void render_model(const sim_cfg *c, argvb *a)
{
    char b[600];
    ab_push(a, "--disable-bias-linear");
    ab_push(a, "--swiglu");
    ab_push(a, "--position-embedding-type");
    ab_push(a, "rope");
    ab_push(a, "--attention-dropout");
    ab_push(a, "0.0");
    ab_push(a, "--hidden-dropout");
    ab_push(a, "0.0");
    ab_int(a, "--num-layers", c->num_layers);
    ab_int(a, "--hidden-size", c->hidden_size);
    if (c->ffn_hidden_size > 0)
        ab_int(a, "--ffn-hidden-size", c->ffn_hidden_size);
    ab_int(a, "--num-attention-heads", c->num_attention_heads);
    if (c->group_query_attention || c->num_query_groups > 0) {
        ab_push(a, "--group-query-attention");
        if (c->num_query_groups > 0)
            ab_int(a, "--num-query-groups", c->num_query_groups);
    }
    if (c->kv_channels > 0)
        ab_int(a, "--kv-channels", c->kv_channels);
    if (c->num_experts > 0) {
        ab_int(a, "--num-experts", c->num_experts);
        if (c->moe_ffn_hidden_size > 0)
            ab_int(a, "--moe-ffn-hidden-size", c->moe_ffn_hidden_size);
        if (c->moe_shared_expert_intermediate_size > 0)
            ab_int(a, "--moe-shared-expert-intermediate-size", c->moe_shared_expert_intermediate_size);
        if (c->first_k_dense > 0 && c->first_k_dense < c->num_layers) {
            snprintf(b, sizeof b, "([0]*%d+[1]*%d)", c->first_k_dense, c->num_layers - c->first_k_dense);
            ab_push(a, "--moe-layer-freq");
            ab_push(a, b);
        }
    }
    ab_int(a, "--moe-router-topk", c->moe_router_topk);
    if (c->multi_latent_attention) {
        ab_push(a, "--multi-latent-attention");
        if (c->q_lora_rank > 0)
            ab_int(a, "--q-lora-rank", c->q_lora_rank);
        if (c->kv_lora_rank > 0)
            ab_int(a, "--kv-lora-rank", c->kv_lora_rank);
        if (c->qk_head_dim > 0)
            ab_int(a, "--qk-head-dim", c->qk_head_dim);
        if (c->qk_pos_emb_head_dim > 0)
            ab_int(a, "--qk-pos-emb-head-dim", c->qk_pos_emb_head_dim);
        if (c->v_head_dim > 0)
            ab_int(a, "--v-head-dim", c->v_head_dim);
    }
    if (c->mtp_num_layers > 0)
        ab_int(a, "--mtp-num-layers", c->mtp_num_layers);
    if (c->vocab_size > 0)
        ab_int(a, "--vocab-size", c->vocab_size);
    ab_int(a, "--seq-length", c->seq_length);
    ab_int(a, "--max-position-embeddings",
           c->max_position_embeddings > 0 ? c->max_position_embeddings : c->seq_length);
}

/* The parallel sizes, the pipeline layout and the batch. */
static void render_parallel(const sim_cfg *c, argvb *a)
{
    ab_int(a, "--tensor-model-parallel-size", c->tensor_model_parallel_size);
    ab_int(a, "--pipeline-model-parallel-size", c->pipeline_model_parallel_size);
    ab_int(a, "--context-parallel-size", c->context_parallel_size);
    ab_int(a, "--expert-model-parallel-size", c->expert_model_parallel_size);
    if (c->expert_tensor_parallel_size > 0)
        ab_int(a, "--expert-tensor-parallel-size", c->expert_tensor_parallel_size);
    if (c->sequence_parallel)
        ab_push(a, "--sequence-parallel");
    if (c->num_layers_per_virtual_pipeline_stage > 0)
        ab_int(a, "--num-layers-per-virtual-pipeline-stage", c->num_layers_per_virtual_pipeline_stage);
    if (c->num_virtual_stages_per_pipeline_rank > 0)
        ab_int(a, "--num-virtual-stages-per-pipeline-rank", c->num_virtual_stages_per_pipeline_rank);
    if (c->pipeline_model_parallel_layout[0]) {
        ab_push(a, "--pipeline-model-parallel-layout");
        ab_push(a, c->pipeline_model_parallel_layout);
    }
    if (c->decoder_first_pipeline_num_layers > 0)
        ab_int(a, "--decoder-first-pipeline-num-layers", c->decoder_first_pipeline_num_layers);
    if (c->decoder_last_pipeline_num_layers > 0)
        ab_int(a, "--decoder-last-pipeline-num-layers", c->decoder_last_pipeline_num_layers);
    ab_int(a, "--micro-batch-size", c->micro_batch_size);
    if (c->global_batch_size > 0)
        ab_int(a, "--global-batch-size", c->global_batch_size);
    ab_int(a, "--train-iters", c->train_iters);
}

/* Recompute, offloading and the MoE dispatcher and router. */
static void render_recompute_moe(const sim_cfg *c, int ver, argvb *a)
{
    static const char *const rc_n[] = {"core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp",
                                       "moe", "shared_experts", "gdn_norm_out", NULL};
    static const char *const off_n[] = {"attn_norm", "qkv_linear", "core_attn", "attn_proj",
                                        "mlp_norm", "expert_fc1", "moe_act", NULL};
    static const char *const disp_n[] = {"allgather", "alltoall", "flex"};
    static const char *const be_n[] = {"none", "deepep", "hybridep", "ncclep"};
    char b[600];
    if (c->recompute_granularity != SIM_GRAN_NONE) {
        ab_push(a, "--recompute-granularity");
        ab_push(a, c->recompute_granularity == SIM_GRAN_FULL ? "full" : "selective");
    }
    if (c->recompute_method != SIM_METHOD_NONE) {
        ab_push(a, "--recompute-method");
        ab_push(a, c->recompute_method == SIM_METHOD_UNIFORM ? "uniform" : "block");
    }
    if (c->recompute_num_layers > 0)
        ab_int(a, "--recompute-num-layers", c->recompute_num_layers);
    ab_list(a, "--recompute-modules", c->recompute_modules, rc_n);
    if (c->fine_grained_activation_offloading)
        ab_push(a, "--fine-grained-activation-offloading");
    ab_list(a, "--offload-modules", c->offload_modules, off_n);
    if (c->optimizer_cpu_offload)
        ab_push(a, "--optimizer-cpu-offload");
    ab_push(a, "--moe-token-dispatcher-type");
    ab_push(a, disp_n[c->moe_token_dispatcher_type % 3]);
    if (c->moe_flex_dispatcher_backend != SIM_BACKEND_NONE) {
        if (ver < 18 && c->moe_flex_dispatcher_backend == SIM_BACKEND_DEEPEP) {
            ab_push(a, "--moe-enable-deepep"); /* r0.15's one spelling of a flex backend */
        } else {
            ab_push(a, "--moe-flex-dispatcher-backend");
            ab_push(a, be_n[c->moe_flex_dispatcher_backend % 4]);
        }
    }
    if (c->moe_flex_dispatcher_num_sms > 0)
        ab_int(a, ver >= 19 ? "--moe-flex-dispatcher-num-sms" : "--moe-deepep-num-sms",
               c->moe_flex_dispatcher_num_sms);
    if (c->moe_permute_fusion)
        ab_push(a, "--moe-permute-fusion");
    if (c->moe_grouped_gemm)
        ab_push(a, "--moe-grouped-gemm");
    if (c->moe_router_force_load_balancing)
        ab_push(a, "--moe-router-force-load-balancing");
    if (c->moe_expert_capacity_factor > 0) {
        snprintf(b, sizeof b, "%g", c->moe_expert_capacity_factor);
        ab_push(a, "--moe-expert-capacity-factor");
        ab_push(a, b);
    }
}

/* Overlaps, the precisions, CUDA graphs and GC. */
static void render_overlap_precision(const sim_cfg *c, int ver, argvb *a)
{
    static const char *const cg_n[] = {"attn", "mlp", "moe", "moe_router", "moe_preprocess", NULL};
    static const char *const r8_n[] = {"delayed", "delayed", "tensorwise", "blockwise", "mxfp8"};
    static const char *const impl_n[] = {"none", "local", "transformer_engine", "full_iteration"};
    if (c->moe_pad_expert_input_to_capacity)
        ab_push(a, "--moe-pad-expert-input-to-capacity");
    if (c->overlap_moe_expert_parallel_comm)
        ab_push(a, "--overlap-moe-expert-parallel-comm");
    if (c->delay_wgrad_compute)
        ab_push(a, "--delay-wgrad-compute");
    if (c->moe_shared_expert_overlap)
        ab_push(a, "--moe-shared-expert-overlap");
    if (c->overlap_grad_reduce)
        ab_push(a, "--overlap-grad-reduce");
    if (c->overlap_param_gather)
        ab_push(a, "--overlap-param-gather");
    if (c->tp_comm_overlap)
        ab_push(a, "--tp-comm-overlap");
    if (c->use_distributed_optimizer)
        ab_push(a, "--use-distributed-optimizer");
    if (c->bf16)
        ab_push(a, "--bf16");
    if (c->fp16)
        ab_push(a, "--fp16");
    if (c->fp8_format != SIM_FP8F_NONE) {
        ab_push(a, "--fp8-format");
        ab_push(a, c->fp8_format == SIM_FP8F_E4M3 ? "e4m3" : "hybrid");
        ab_push(a, "--fp8-recipe");
        ab_push(a, r8_n[c->fp8_recipe % 5]);
    }
    if (c->fp4_format) {
        ab_push(a, "--fp4-format");
        ab_push(a, "e2m1");
        ab_push(a, "--fp4-recipe");
        ab_push(a, "nvfp4");
    }
    if (c->moe_router_dtype_fp32) {
        ab_push(a, "--moe-router-dtype");
        ab_push(a, "fp32");
    }
    if (c->cuda_graph_impl != SIM_CG_NONE) {
        ab_push(a, "--cuda-graph-impl");
        ab_push(a, impl_n[c->cuda_graph_impl % 4]);
        if (ver < 18) {
            /* r0.15: one --cuda-graph-scope value (full|attn|full_iteration) */
            if (c->cuda_graph_modules) {
                ab_push(a, "--cuda-graph-scope");
                ab_push(a, c->cuda_graph_modules == SIM_CG_ATTN ? "attn" : "moe_router");
            }
        } else {
            ab_list(a, "--cuda-graph-modules", c->cuda_graph_modules, cg_n);
        }
        ab_int(a, "--cuda-graph-warmup-steps", c->cuda_graph_warmup_steps);
    }
    if (c->manual_gc) {
        ab_push(a, "--manual-gc");
        if (c->manual_gc_interval > 0)
            ab_int(a, "--manual-gc-interval", c->manual_gc_interval);
    }
    if (c->moe_router_fusion)
        ab_push(a, "--moe-router-fusion");
}

/* The knobs in the version's spelling, on the sim's model base (an MoE LLM
 * like the corpus bases: no linear bias, no dropout, SwiGLU, RoPE). */
static void render_cfg(const sim_cfg *c, int ver, argvb *a)
{
    render_model(c, a);
    render_parallel(c, a);
    render_recompute_moe(c, ver, a);
    render_overlap_precision(c, ver, a);
}

void sim_stack_of(const sim_cfg *c, sim_stack *st, mt_kv *env)
{
    const mt_gpu_spec *g = sim_gpu(c);
    memset(st, 0, sizeof *st);
    st->megatron = c->megatron[0] ? c->megatron : "main";
    st->te = c->te_version[0] ? c->te_version : "2.12";
    st->arch_major = g && g->compute_capability ? atoi(g->compute_capability) : 9;
    st->world = (long)c->gpus_per_node * c->nodes;
    st->env = env;
    if (env && c->cuda_device_max_connections > 0)
        mt_kv_setf(env, "CUDA_DEVICE_MAX_CONNECTIONS", "%d", c->cuda_device_max_connections);
}

int sim_check(const sim_cfg *c, char *rule, size_t rlen, char *msg, size_t mlen)
{
    static argvb a; /* large; sim_check runs on one thread at a time per process */
    sim_verdict v;
    sim_stack st;
    mt_kv *env = mt_kv_new();
    int rc;
    if (rule && rlen)
        rule[0] = '\0';
    if (msg && mlen)
        msg[0] = '\0';
    memset(&a, 0, sizeof a);
    sim_stack_of(c, &st, env);
    render_cfg(c, version_code(st.megatron), &a);
    rc = sim_startup_argv(&st, a.v, a.n, &v, NULL);
    mt_kv_destroy(&env);
    if (!rc)
        rc = sim_runtime_check(c, &v);
    if (rc) {
        if (rule && rlen)
            snprintf(rule, rlen, "%s", v.rule[0] ? v.rule : v.type);
        if (msg && mlen)
            snprintf(msg, mlen, "%s%s%s", strcmp(v.type, "argparse") ? v.type : "",
                     strcmp(v.type, "argparse") ? ": " : "", v.msg);
    }
    return rc;
}
