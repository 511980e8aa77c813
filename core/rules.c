#include "rules.h"

#include <moetune/kit.h>

#include <limits.h>

/* Rules are grouped by what they are about; each names upstream's check in
 * its comment (file and function) and carries upstream's wording.  Files:
 * A = megatron/training/arguments.py (validate_args and the type
 * converters), T = megatron/core/transformer/transformer_config.py
 * (TransformerConfig.__post_init__), M = model_parallel_config.py,
 * L = pipeline_parallel_layer_layout.py, N = num_microbatches_calculator.py.
 * Every rule reads the namespace after core/derive.c's derivations; where a
 * check runs before a derivation, it reads "raw.<dest>". */

/* ------------------------------------------------------------------------ */
/* Namespace helpers                                                         */

enum { R15, V18, V19, MAIN };

static int version(const mt_ctx_v1 *ctx)
{
    if (!pk_core_ge(ctx, "0.18"))
        return R15;
    if (!pk_core_ge(ctx, "0.19"))
        return V18;
    if (!pk_core_ge(ctx, "0.20"))
        return V19;
    return MAIN;
}

/* Number of words of a space-joined list. */
static long list_len(const char *v)
{
    long n = 0;
    int in = 0;
    for (; v && *v; v++) {
        if (*v != ' ' && !in)
            n++;
        in = *v != ' ';
    }
    return n;
}

/* ------------------------------------------------------------------------ */
/* Parse-time converters: the *_freq_type flags (A: moe_freq_type and its
 * siblings).  Without '[' the value goes through int(); with '[' every
 * character must be one of ,0-9[]()+* (else ValueError), then Python's eval
 * runs on it.  argparse turns a ValueError or TypeError into "invalid
 * <converter> value"; a SyntaxError or IndexError escapes parse_args.  The
 * evaluator below is a small Python expression reader for exactly that
 * alphabet: ints, + * ** (unary +), list and tuple displays (with starred
 * items), subscripts and calls. */

enum { FV_INT, FV_LIST, FV_TUPLE, FV_UNKNOWN };
enum { FE_NONE, FE_TYPE, FE_INDEX };

#define FV_NODES 8192
#define FV_ITEMS 65536

typedef struct fval {
    int kind;
    long i;      /* FV_INT value; big = unknown magnitude */
    int big;
    size_t item; /* first item index in the item pool (lists, tuples) */
    size_t n;    /* items stored                                      */
} fval;

typedef struct fparse {
    const char *s;
    size_t pos;
    int depth;
    int syntax;  /* a SyntaxError was found                            */
    int err;     /* first runtime error in evaluation order (FE_*)     */
    fval nodes[FV_NODES];
    size_t n_nodes;
    size_t items[FV_ITEMS];
    size_t n_items;
} fparse;

static size_t fv_new(fparse *p, int kind)
{
    if (p->n_nodes == FV_NODES)
        return 0; /* node 0 is the shared unknown */
    memset(&p->nodes[p->n_nodes], 0, sizeof p->nodes[0]);
    p->nodes[p->n_nodes].kind = kind;
    return p->n_nodes++;
}

static size_t fv_int(fparse *p, long v, int big)
{
    size_t n = fv_new(p, FV_INT);
    if (n) {
        p->nodes[n].i = v;
        p->nodes[n].big = big;
    }
    return n;
}

/* A list/tuple from up to cnt item indices. */
static size_t fv_seq(fparse *p, int kind, const size_t *items, size_t cnt)
{
    size_t n, j;
    if (p->n_items + cnt > FV_ITEMS)
        return 0;
    n = fv_new(p, kind);
    if (!n)
        return 0;
    p->nodes[n].item = p->n_items;
    p->nodes[n].n = cnt;
    for (j = 0; j < cnt; j++)
        p->items[p->n_items++] = items[j];
    return n;
}

static void fe(fparse *p, int e)
{
    if (!p->err)
        p->err = e;
}

static char fpeek(fparse *p)
{
    return p->s[p->pos];
}

static int fpower_tok(fparse *p)
{
    return p->s[p->pos] == '*' && p->s[p->pos + 1] == '*';
}

static size_t f_expr(fparse *p);
static size_t f_star_or_expr(fparse *p, int *starred);

/* Items of a display or argument list up to close; *trailing_comma and
 * *count tell a parenthesized value from a tuple. */
static size_t f_items(fparse *p, char close, int kind, int call)
{
    size_t buf[1024], cnt = 0;
    int commas = 0, any_star = 0, first_star = 0, n = 0;
    size_t v = 0;
    while (!p->syntax && fpeek(p) != close) {
        int starred = 0;
        size_t x;
        if (call && fpower_tok(p)) {
            p->pos += 2;
            x = f_expr(p);
            (void)x;
            starred = 2;
        } else {
            x = f_star_or_expr(p, &starred);
        }
        if (p->syntax)
            return 0;
        n++;
        any_star |= starred != 0;
        if (n == 1)
            first_star = starred;
        if (starred == 1 && !call) {
            const fval *e = &p->nodes[x];
            if (e->kind == FV_INT)
                fe(p, FE_TYPE); /* not iterable */
            else if (e->kind == FV_UNKNOWN || x == 0)
                v = 0;
            else {
                size_t j;
                for (j = 0; j < e->n && cnt < 1024; j++)
                    buf[cnt++] = p->items[e->item + j];
            }
        } else if (cnt < 1024) {
            buf[cnt++] = x;
        }
        if (n == 1)
            v = x;
        if (fpeek(p) == ',') {
            p->pos++;
            commas++;
            continue;
        }
        break;
    }
    if (p->syntax)
        return 0;
    if (fpeek(p) != close) {
        p->syntax = 1;
        return 0;
    }
    p->pos++;
    if (call)
        return 0;
    if (kind == FV_TUPLE && n == 1 && !commas) {
        /* a parenthesized expression, not a tuple; "(*x)" is refused */
        if (first_star)
            p->syntax = 1;
        return v;
    }
    (void)any_star;
    return fv_seq(p, kind, buf, cnt);
}

static size_t f_atom(fparse *p)
{
    char c = fpeek(p);
    if (c >= '0' && c <= '9') {
        size_t start = p->pos;
        long v = 0;
        int big = 0, nonzero = 0;
        while (fpeek(p) >= '0' && fpeek(p) <= '9') {
            int d = fpeek(p) - '0';
            nonzero |= d != 0;
            if (v > (LONG_MAX - d) / 10)
                big = 1;
            else
                v = v * 10 + d;
            p->pos++;
        }
        /* "01" is refused; "00" is zero */
        if (p->s[start] == '0' && nonzero) {
            p->syntax = 1;
            return 0;
        }
        return fv_int(p, v, big);
    }
    if (c == '(' || c == '[') {
        size_t v;
        if (++p->depth > 200) {
            p->syntax = 1; /* too many nested parentheses */
            return 0;
        }
        p->pos++;
        v = f_items(p, c == '(' ? ')' : ']', c == '(' ? FV_TUPLE : FV_LIST, 0);
        p->depth--;
        return v;
    }
    p->syntax = 1;
    return 0;
}

static size_t f_primary(fparse *p)
{
    size_t v = f_atom(p);
    while (!p->syntax && (fpeek(p) == '[' || fpeek(p) == '(')) {
        if (fpeek(p) == '(') {
            p->pos++;
            f_items(p, ')', FV_TUPLE, 1);
            fe(p, FE_TYPE); /* ints, lists and tuples are not callable */
            v = 0;
        } else {
            size_t idx;
            int starred = 0;
            p->pos++;
            if (fpeek(p) == ']') {
                p->syntax = 1;
                return 0;
            }
            idx = f_star_or_expr(p, &starred);
            if (fpeek(p) == ',') {
                /* a tuple index: still valid syntax */
                while (!p->syntax && fpeek(p) == ',') {
                    p->pos++;
                    if (fpeek(p) == ']')
                        break;
                    f_star_or_expr(p, &starred);
                }
                starred = 1;
            }
            if (p->syntax)
                return 0;
            if (fpeek(p) != ']') {
                p->syntax = 1;
                return 0;
            }
            p->pos++;
            {
                const fval *base = &p->nodes[v], *ix = &p->nodes[idx];
                if (v == 0 || base->kind == FV_UNKNOWN) {
                    v = 0;
                } else if (base->kind == FV_INT || starred) {
                    fe(p, FE_TYPE);
                    v = 0;
                } else if (idx == 0 || ix->kind == FV_UNKNOWN) {
                    v = 0;
                } else if (ix->kind != FV_INT) {
                    fe(p, FE_TYPE);
                    v = 0;
                } else if (ix->big || (size_t)ix->i >= base->n) {
                    fe(p, FE_INDEX);
                    v = 0;
                } else {
                    v = p->items[base->item + (size_t)ix->i];
                }
            }
        }
    }
    return v;
}

static size_t f_unary(fparse *p);

static size_t f_power(fparse *p)
{
    size_t a = f_primary(p), b;
    if (p->syntax || !fpower_tok(p))
        return a;
    p->pos += 2;
    b = f_unary(p);
    if (p->syntax)
        return 0;
    if (a == 0 || b == 0)
        return 0;
    if (p->nodes[a].kind != FV_INT || p->nodes[b].kind != FV_INT) {
        fe(p, FE_TYPE);
        return 0;
    }
    {
        long x = p->nodes[a].i, e = p->nodes[b].i, r = 1;
        int big = p->nodes[a].big || p->nodes[b].big;
        while (!big && e-- > 0) {
            if (x != 0 && labs(r) > LONG_MAX / (labs(x) ? labs(x) : 1))
                big = 1;
            else
                r *= x;
        }
        return fv_int(p, r, big);
    }
}

static size_t f_unary(fparse *p)
{
    if (fpeek(p) == '+' ) {
        size_t v;
        p->pos++;
        v = f_unary(p);
        if (!p->syntax && v && p->nodes[v].kind != FV_INT && p->nodes[v].kind != FV_UNKNOWN) {
            fe(p, FE_TYPE);
            return 0;
        }
        return v;
    }
    return f_power(p);
}

/* Repeats a sequence k times (k <= 0: empty). */
static size_t f_repeat(fparse *p, size_t seq, long k, int big)
{
    const fval *s = &p->nodes[seq];
    size_t buf[4096], cnt = 0, j;
    long r;
    if (big)
        return 0; /* too large to build: upstream runs out of memory */
    for (r = 0; r < k && cnt < 4096; r++)
        for (j = 0; j < s->n && cnt < 4096; j++)
            buf[cnt++] = p->items[s->item + j];
    if (k > 0 && s->n && (size_t)k * s->n > 4096)
        return 0;
    return fv_seq(p, s->kind, buf, cnt);
}

static size_t f_term(fparse *p)
{
    size_t a = f_unary(p);
    while (!p->syntax && fpeek(p) == '*' && !fpower_tok(p)) {
        size_t b;
        p->pos++;
        b = f_unary(p);
        if (p->syntax)
            return 0;
        if (a == 0 || b == 0) {
            a = 0;
            continue;
        }
        {
            const fval *x = &p->nodes[a], *y = &p->nodes[b];
            if (x->kind == FV_INT && y->kind == FV_INT) {
                int big = x->big || y->big ||
                          (x->i && labs(y->i) > LONG_MAX / labs(x->i));
                a = fv_int(p, big ? 0 : x->i * y->i, big);
            } else if (x->kind == FV_INT) {
                a = f_repeat(p, b, x->i, x->big);
            } else if (y->kind == FV_INT) {
                a = f_repeat(p, a, y->i, y->big);
            } else {
                fe(p, FE_TYPE);
                a = 0;
            }
        }
    }
    return a;
}

static size_t f_expr(fparse *p)
{
    size_t a = f_term(p);
    while (!p->syntax && fpeek(p) == '+') {
        size_t b;
        p->pos++;
        b = f_term(p);
        if (p->syntax)
            return 0;
        if (a == 0 || b == 0) {
            a = 0;
            continue;
        }
        {
            const fval *x = &p->nodes[a], *y = &p->nodes[b];
            if (x->kind == FV_INT && y->kind == FV_INT) {
                int big = x->big || y->big || x->i > LONG_MAX - y->i;
                a = fv_int(p, big ? 0 : x->i + y->i, big);
            } else if (x->kind == y->kind && x->kind != FV_INT) {
                size_t buf[4096], cnt = 0, j;
                for (j = 0; j < x->n && cnt < 4096; j++)
                    buf[cnt++] = p->items[x->item + j];
                for (j = 0; j < y->n && cnt < 4096; j++)
                    buf[cnt++] = p->items[y->item + j];
                a = fv_seq(p, x->kind, buf, cnt);
            } else {
                fe(p, FE_TYPE);
                a = 0;
            }
        }
    }
    return a;
}

static size_t f_star_or_expr(fparse *p, int *starred)
{
    *starred = 0;
    if (fpeek(p) == '*' && !fpower_tok(p)) {
        p->pos++;
        *starred = 1;
    }
    return f_expr(p);
}

enum { FREQ_OK, FREQ_VALUE, FREQ_SYNTAX, FREQ_INDEX };

typedef struct freq_result {
    int status;
    int kind;      /* FV_* of the result (FREQ_OK) */
    long i;        /* int result                   */
    int has_zero;  /* list result holds 0          */
    long len;      /* list result length           */
} freq_result;

/* Python's int() of a command-line word. */
static int py_int_word(const char *s, long *out)
{
    const char *p = s;
    long v = 0;
    int neg = 0, digits = 0, prev_digit = 0;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p == '+' || *p == '-')
        neg = *p++ == '-';
    for (; *p; p++) {
        if (*p >= '0' && *p <= '9') {
            v = v * 10 + (*p - '0');
            digits++;
            prev_digit = 1;
        } else if (*p == '_' && prev_digit && p[1] >= '0' && p[1] <= '9') {
            prev_digit = 0;
        } else {
            break;
        }
    }
    while (*p == ' ' || *p == '\t')
        p++;
    if (!digits || *p)
        return -1;
    *out = neg ? -v : v;
    return 0;
}

static void freq_eval(const char *s, freq_result *r)
{
    static fparse p; /* large; the rules run one at a time */
    const char *c;
    size_t v;
    int starred = 0, commas = 0;
    memset(r, 0, sizeof *r);
    if (!strchr(s, '[')) {
        r->status = py_int_word(s, &r->i) ? FREQ_VALUE : FREQ_OK;
        r->kind = FV_INT;
        return;
    }
    for (c = s; *c; c++)
        if (!strchr(",0123456789[]()+*", *c))
            break;
    if (*c) {
        r->status = FREQ_VALUE; /* "Invalid pattern" ValueError */
        return;
    }
    memset(&p, 0, sizeof p);
    p.s = s;
    p.n_nodes = 1; /* node 0: unknown */
    p.nodes[0].kind = FV_UNKNOWN;
    /* eval mode takes an expression list: "x," is a tuple */
    v = f_star_or_expr(&p, &starred);
    while (!p.syntax && fpeek(&p) == ',') {
        p.pos++;
        commas++;
        if (!fpeek(&p))
            break;
        f_star_or_expr(&p, &starred);
    }
    if (!p.syntax && (fpeek(&p) || (starred && !commas)))
        p.syntax = 1;
    if (p.syntax) {
        r->status = FREQ_SYNTAX;
        return;
    }
    if (p.err) {
        r->status = p.err == FE_INDEX ? FREQ_INDEX : FREQ_VALUE;
        return;
    }
    r->status = FREQ_OK;
    if (commas) {
        r->kind = FV_TUPLE;
        return;
    }
    r->kind = v ? p.nodes[v].kind : FV_UNKNOWN;
    if (r->kind == FV_INT)
        r->i = p.nodes[v].i;
    if (r->kind == FV_LIST) {
        size_t j;
        r->len = (long)p.nodes[v].n;
        for (j = 0; j < p.nodes[v].n; j++) {
            const fval *e = &p.nodes[p.items[p.nodes[v].item + j]];
            if (e->kind == FV_INT && !e->big && e->i == 0)
                r->has_zero = 1;
        }
    }
}

/* Where each version's converter sits, for the message. */
static const char *const freq_flags[][3] = {
    {"moe_layer_freq", "--moe-layer-freq", "moe_freq_type"},
    {"window_attn_skip_freq", "--window-attn-skip-freq", "moe_freq_type"},
    {"no_rope_freq", "--no-rope-freq", "no_rope_freq_type"},
    {"linear_attention_freq", "--linear-attention-freq", "la_freq_type"},
};

static void check_converters(const mt_ctx_v1 *ctx, mt_sink *s)
{
    size_t i;
    for (i = 0; i < sizeof freq_flags / sizeof freq_flags[0]; i++) {
        const char *v = pk_arg(ctx, freq_flags[i][0]);
        freq_result r;
        if (!v)
            continue;
        freq_eval(v, &r);
        if (r.status == FREQ_VALUE)
            pk_startup(s, "core.args_invalid_value", freq_flags[i][0],
                       "argument %s: invalid %s value: '%s' -- write an integer N (every N-th "
                       "layer) or a Python list such as ([0]*3+[1]*58)",
                       freq_flags[i][1], freq_flags[i][2], v);
        else if (r.status == FREQ_SYNTAX)
            pk_startup(s, "core.moe_layer_freq_syntax", freq_flags[i][0],
                       "SyntaxError: %s '%s' is not a valid Python expression (its converter "
                       "evals it and parse_args dies) -- balance the brackets, e.g. "
                       "([0]*3+[1]*58)",
                       freq_flags[i][1], v);
        else if (r.status == FREQ_INDEX)
            pk_startup(s, "core.moe_layer_freq_index", freq_flags[i][0],
                       "IndexError: list index out of range while evaluating %s '%s' -- index "
                       "only inside the list",
                       freq_flags[i][1], v);
    }
}

/* ------------------------------------------------------------------------ */
/* validate_args: context parallel, batch, attention backend                  */

static void check_parallel_args(const mt_ctx_v1 *ctx, mt_sink *s)
{
    int ver = version(ctx);
    long tp = pk_arg_int(ctx, "tensor_model_parallel_size", 1);
    long cp = pk_arg_int(ctx, "context_parallel_size", 1);
    long shards;

    /* M resolve_tensor_parallel_weight_shards (0.19+; A:415 before the
     * world-size check, again after the ETP default for the experts). */
    if (ver >= V19) {
        static const char *const pairs[][4] = {
            {"tensor_parallel_num_weight_shards", "tensor_model_parallel_size",
             "tensor_parallel_num_weight_shards", "tensor_model_parallel_size"},
            {"expert_tensor_parallel_num_weight_shards", "expert_tensor_parallel_size",
             "expert_tensor_parallel_num_weight_shards", "expert_tensor_parallel_size"},
        };
        size_t i;
        for (i = 0; i < 2; i++) {
            long t = pk_arg_int(ctx, pairs[i][1], 1);
            if (!pk_arg_raw_long(ctx, pairs[i][0], &shards) || shards < t)
                continue; /* unset, or the folding plugin's "must be >=" */
            if (t == 0)
                pk_startup(s, "core.tp_weight_shards_not_multiple", pairs[i][0],
                           "ZeroDivisionError: integer modulo by zero (%s %ld %% %s 0) -- "
                           "%s must be at least 1",
                           pairs[i][2], shards, pairs[i][3], pairs[i][3]);
            else if (pk_pymod(shards, t))
                pk_startup(s, "core.tp_weight_shards_not_multiple", pairs[i][0],
                           "%s (%ld) must be divisible by %s (%ld). -- use a multiple of %ld",
                           pairs[i][2], shards, pairs[i][3], t, t);
        }
    }

    /* A: hierarchical CP sizes multiply to CP; a2a+p2p needs them. */
    {
        const char *h = pk_arg(ctx, "hierarchical_context_parallel_sizes");
        if (h && list_len(h) > 0) {
            long prod = 1;
            char *end;
            const char *q = h;
            while (*q) {
                long x = strtol(q, &end, 10);
                if (end == q)
                    break;
                prod *= x;
                q = end;
            }
            if (prod != cp)
                pk_startup(s, "core.hier_cp_product", "context_parallel_size",
                           "AssertionError (no message): context_parallel_size %ld must equal "
                           "the product of --hierarchical-context-parallel-sizes (%s = %ld) -- "
                           "make them agree",
                           cp, h, prod);
        }
        if (pk_arg_has(ctx, "cp_comm_type", "a2a+p2p") && !h)
            pk_startup(s, "core.cp_a2a_p2p_needs_hier_sizes", "context_parallel_size",
                       "--hierarchical-context-parallel-sizes must be set when a2a+p2p is used "
                       "in cp comm -- give the a2a and p2p group sizes (their product is CP)");
    }

    /* T (CP > 1): a cp_comm_type list (more than one value) has one entry
     * per layer. */
    {
        const char *ct = pk_arg(ctx, "cp_comm_type");
        long n = list_len(ct), layers;
        if (cp > 1 && ct && n != 1 && pk_arg_long(ctx, "num_layers", &layers) && n != layers)
            pk_startup(s, "core.cp_comm_type_len", "context_parallel_size",
                       "Length of cp_comm_type (%ld) should equal to the total number of "
                       "transformer layers (%ld)! -- give one type, or one per layer",
                       n, layers);
    }

    /* A: --attention-backend local is only for the local spec. */
    if (pk_arg_is(ctx, "attention_backend", "local")) {
        const char *spec = pk_arg(ctx, "spec");
        if (!spec)
            pk_startup(s, "core.attention_backend_local_needs_spec", "attention_backend",
                       "TypeError: 'NoneType' object is not subscriptable (--attention-backend "
                       "local reads args.spec[0], and --spec is not given) -- add --spec local "
                       "or choose another backend");
        else if (strncmp(spec, "local", 5) || (spec[5] && spec[5] != ' '))
            pk_startup(s, "core.attention_backend_local_needs_spec", "attention_backend",
                       "--attention-backend local is only supported with --spec local -- "
                       "the spec is '%s'",
                       spec);
    }
    (void)tp;
}

static void check_batch(const mt_ctx_v1 *ctx, mt_sink *s)
{
    int ver = version(ctx);
    long mbs = 0, gbs = 0, dp = 0, gtp = pk_arg_int(ctx, "gtp_weight_remat_size", 1);
    int have_mbs = pk_arg_long(ctx, "micro_batch_size", &mbs);
    int have_dp = pk_arg_long(ctx, "data_parallel_size", &dp);

    /* A: micro-batch size required and positive (bare asserts). */
    if (!pk_arg_set(ctx, "micro_batch_size")) {
        pk_startup(s, "core.micro_batch_required", "micro_batch_size",
                   "AssertionError (no message): --micro-batch-size is required -- set it");
        return;
    }
    if (have_mbs && mbs <= 0) {
        pk_startup(s, "core.micro_batch_positive", "micro_batch_size",
                   "AssertionError (no message): micro_batch_size %ld must be > 0 -- set MBS "
                   ">= 1",
                   mbs);
        return;
    }
    if (ver >= V18 && pk_arg_set(ctx, "step_batch_size_schedule") &&
        pk_arg_raw(ctx, "global_batch_size"))
        pk_startup(s, "core.step_schedule_with_gbs", "global_batch_size",
                   "Cannot specify both --step-batch-size-schedule and --global-batch-size -- "
                   "drop one");
    if (!pk_arg_long(ctx, "global_batch_size", &gbs) || !have_mbs || !have_dp)
        return;
    if (gbs <= 0) {
        pk_startup(s, "core.gbs_positive", "global_batch_size",
                   "AssertionError (no message): global_batch_size %ld must be > 0 -- set a "
                   "positive global batch size",
                   gbs);
        return;
    }
    /* A (0.18+): the eval batch, which defaults to the training batch. */
    if (ver >= V18) {
        long eg = gbs, em = mbs, div;
        pk_arg_long(ctx, "eval_global_batch_size", &eg);
        pk_arg_long(ctx, "eval_micro_batch_size", &em);
        div = em * dp * (ver == MAIN ? gtp : 1);
        if (div == 0)
            pk_startup(s, "core.eval_gbs_divisible", "micro_batch_size global_batch_size",
                       "ZeroDivisionError: integer modulo by zero (eval_micro_batch_size %ld * "
                       "data_parallel_size %ld) -- make both positive",
                       em, dp);
        else if (pk_pymod(eg, div)) {
            if (ver == MAIN)
                pk_startup(s, "core.eval_gbs_divisible", "micro_batch_size global_batch_size",
                           "eval_global_batch_size (%ld) must be divisible by "
                           "eval_micro_batch_size (%ld) * data_parallel_size (%ld) * "
                           "gtp_weight_remat_size (%ld) -- pick a global batch that is a "
                           "multiple of %ld",
                           eg, em, dp, gtp, div);
            else
                pk_startup(s, "core.eval_gbs_divisible", "micro_batch_size global_batch_size",
                           "eval_global_batch_size (%ld) must be divisible by "
                           "eval_micro_batch_size (%ld) * data_parallel_size (%ld) -- pick a "
                           "global batch that is a multiple of %ld",
                           eg, em, dp, div);
        }
    }
    /* A (0.15): iteration-based training takes no batch-size ramp-up. */
    if (ver == R15 && pk_arg_on(ctx, "train_iters") && pk_arg(ctx, "rampup_batch_size"))
        pk_startup(s, "core.rampup_with_train_iters", "global_batch_size",
                   "expected no batch-size rampup for iteration-based training -- drop "
                   "--rampup-batch-size or train by samples");

    /* N: the constant micro-batch calculator (set_global_variables).  From
     * 0.19 it is given DP * the weight-remat factor. */
    if (ver == R15 && pk_arg(ctx, "rampup_batch_size"))
        return;
    if (ver >= V18 && pk_arg_set(ctx, "step_batch_size_schedule"))
        return;
    {
        long d = ver >= V19 ? dp * gtp : dp, unit = mbs * d;
        if (unit <= 0)
            return;
        if (!pk_arg_on(ctx, "decrease_batch_size_if_needed")) {
            if (gbs % unit)
                pk_startup(s, "core.gbs_not_divisible_by_mbs_dp",
                           "micro_batch_size global_batch_size",
                           "global batch size (%ld) is not divisible by micro batch size (%ld) "
                           "times data parallel size (%ld) -- pick a global batch that is a "
                           "multiple of %ld",
                           gbs, mbs, d, unit);
        } else if (gbs / unit < 1) {
            pk_startup(s, "core.num_microbatches_ge_1", "micro_batch_size global_batch_size",
                       "number of microbatches should be at least 1, got 0. -- the global "
                       "batch %ld is smaller than micro batch %ld times data parallel %ld",
                       gbs, mbs, d);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* validate_args: model shape, sequence, position embedding, MTP             */

static void check_shape(const mt_ctx_v1 *ctx, mt_sink *s)
{
    int ver = version(ctx);
    long hidden, heads, seq, mp, dseq, cp = pk_arg_int(ctx, "context_parallel_size", 1);

    /* A: kv_channels defaults to hidden // heads, after a bare assert. */
    if (!pk_arg_raw(ctx, "kv_channels") && pk_arg_long(ctx, "hidden_size", &hidden) &&
        pk_arg_long(ctx, "num_attention_heads", &heads)) {
        if (heads == 0)
            pk_startup(s, "core.kv_channels_heads_divisible", "num_attention_heads",
                       "ZeroDivisionError: integer modulo by zero (hidden_size %ld %% "
                       "num_attention_heads 0) -- num_attention_heads must be at least 1",
                       hidden);
        else if (pk_pymod(hidden, heads))
            pk_startup(s, "core.kv_channels_heads_divisible", "hidden_size num_attention_heads",
                       "AssertionError (no message): hidden_size %ld is not divisible by "
                       "num_attention_heads %ld, so kv_channels has no default -- set "
                       "--kv-channels or change the head count",
                       hidden, heads);
    }
    /* A: sequence length vs CP and max positions. */
    if (pk_arg_long(ctx, "seq_length", &seq) || pk_arg_long(ctx, "encoder_seq_length", &seq)) {
        if (cp > 1 && pk_pymod(seq, 2 * cp))
            pk_startup(s, "core.seq_len_cp_multiple", "seq_length context_parallel_size",
                       "seq-length should be a multiple of 2 * context-parallel-size if "
                       "context-parallel-size > 1. -- seq_length %ld, CP %ld",
                       seq, cp);
        if (pk_arg_long(ctx, "max_position_embeddings", &mp) && mp < seq)
            pk_startup(s, "core.max_pos_lt_seq", "seq_length",
                       "max_position_embeddings (%ld) must be greater than or equal to "
                       "seq_length (%ld). -- raise --max-position-embeddings",
                       mp, seq);
    }
    if (pk_arg_long(ctx, "decoder_seq_length", &dseq) &&
        pk_arg_long(ctx, "max_position_embeddings", &mp) && mp < dseq)
        pk_startup(s, "core.max_pos_lt_decoder_seq", "seq_length",
                   "AssertionError (no message): max_position_embeddings %ld is below "
                   "decoder_seq_length %ld -- raise --max-position-embeddings",
                   mp, dseq);

    /* A: mrope needs its sections. */
    if (pk_arg_is(ctx, "position_embedding_type", "mrope") && !pk_arg_set(ctx, "mrope_section"))
        pk_startup(s, "core.mrope_needs_section", "position_embedding_type",
                   "--mrope-section should be set when using --position-embedding-type mrope. "
                   "-- give the rotary sections");

    /* A: MTP supports rope and no position embedding.  0.15 checks the type
     * after --use-rotary-position-embeddings turned it into rope; 0.18+ check
     * before that (so they read the command line's type). */
    if (pk_arg_on(ctx, "mtp_num_layers")) {
        const char *pe = ver == R15 ? pk_arg(ctx, "position_embedding_type")
                                    : pk_arg_raw(ctx, "position_embedding_type");
        if (pe && strcmp(pe, "rope") && strcmp(pe, "none"))
            pk_startup(s, "core.mtp_position_embedding", "mtp_num_layers",
                       "Multi-Token Prediction (MTP) is not supported with %s position embedding "
                       "type.The supported position embedding types are rope and none. -- use "
                       "--position-embedding-type rope",
                       pe);
    }

    /* core_transformer_config_from_args: rope_type is an MLA setting. */
    {
        const char *rt = pk_arg(ctx, "rope_type");
        if (rt && !pk_arg_on(ctx, "multi_latent_attention") && strcmp(rt, "rope"))
            pk_startup(s, "core.rope_type_non_mla", "multi_latent_attention",
                       "Common attention only support rope_type=\"rope\", but got %s. -- drop "
                       "--rope-type or use MLA",
                       rt);
    }
}

/* ------------------------------------------------------------------------ */
/* MoE: experts, EP, router (validate_args and TransformerConfig)            */

static void check_moe(const mt_ctx_v1 *ctx, mt_sink *s)
{
    int ver = version(ctx);
    long ep = pk_arg_int(ctx, "expert_model_parallel_size", 1), experts = 0, topk;
    int have_experts = pk_arg_long(ctx, "num_experts", &experts);
    const char *score = pk_arg(ctx, "moe_router_score_function");

    /* A (0.15): MoE builds its own spec. */
    if (ver == R15 && have_experts && pk_arg_set(ctx, "spec"))
        pk_startup(s, "core.moe_spec_none", "num_experts",
                   "Model Spec must be None when using MoEs -- drop --spec");
    /* A: EP needs experts, and divides them. */
    if (ep > 1) {
        if (!pk_arg_set(ctx, "num_experts"))
            pk_startup(s, "core.ep_needs_experts", "expert_model_parallel_size",
                       "num_experts must be non None to use expert model parallelism -- set "
                       "EP 1 for a dense model");
        else if (have_experts && pk_pymod(experts, ep))
            pk_startup(s, "core.experts_not_multiple_of_ep", "expert_model_parallel_size",
                       "Number of experts should be a multiple of expert model parallel_size. "
                       "-- %ld experts over EP %ld",
                       experts, ep);
    }
    /* T: a negative expert count (0 became None). */
    if (have_experts && experts < 0)
        pk_startup(s, "core.num_experts_positive", "num_experts",
                   "num_moe_experts must be non-negative. -- num_experts is %ld", experts);
    /* T: moe_ffn_hidden_size without experts.  0.18+ clear it silently when
     * moe_layer_freq leaves some layers dense. */
    if (!pk_arg_set(ctx, "num_experts") && pk_arg_set(ctx, "moe_ffn_hidden_size")) {
        int dense_layers = 0;
        if (ver >= V18) {
            freq_result r;
            const char *f = pk_arg(ctx, "moe_layer_freq");
            if (f) {
                freq_eval(f, &r);
                dense_layers = r.status == FREQ_OK &&
                               ((r.kind == FV_LIST && r.has_zero) || (r.kind == FV_INT && r.i > 1));
            }
        }
        if (ver == R15)
            pk_startup(s, "core.moe_ffn_without_experts", "moe_ffn_hidden_size",
                       "moe_ffn_hidden_size must be None when num_experts is not set. -- drop "
                       "--moe-ffn-hidden-size");
        else if (!dense_layers)
            pk_startup(s, "core.moe_ffn_without_experts", "moe_ffn_hidden_size",
                       "moe_ffn_hidden_size is set but num_moe_experts is None. Please set "
                       "num_moe_experts or remove moe_ffn_hidden_size.");
    }
    /* T: bias in the experts only without expert TP. */
    if (pk_arg_set(ctx, "num_experts") && pk_arg_on(ctx, "add_bias_linear") &&
        pk_arg_int(ctx, "expert_tensor_parallel_size", 1) != 1)
        pk_startup(s, "core.moe_bias_needs_etp1", "expert_tensor_parallel_size",
                   "Bias in Moe is only supported when ETP==1 -- set ETP 1 or "
                   "--disable-bias-linear");
    /* T: aux-loss-free expert bias needs a sigmoid-like score. */
    if (pk_arg_on(ctx, "moe_router_enable_expert_bias") && score) {
        if (ver == R15 && strcmp(score, "sigmoid"))
            pk_startup(s, "core.expert_bias_score_function", "moe_router_enable_expert_bias",
                       "Expert bias for aux-loss-free routing only supports sigmoid score "
                       "function.Please set --moe-router-score-function sigmoid for sigmoid "
                       "score function.");
        else if (ver >= V18 && strcmp(score, "sigmoid") && strcmp(score, "sqrtsoftplus"))
            pk_startup(s, "core.expert_bias_score_function", "moe_router_enable_expert_bias",
                       "Expert bias for aux-loss-free routing only supports 'sigmoid' and "
                       "'sqrtsoftplus' score functions. Please set --moe-router-score-function "
                       "to 'sigmoid' or 'sqrtsoftplus', or unset "
                       "--moe-router-enable-expert-bias.");
    }
    /* T: top-1 softmax routing needs the pre-softmax. */
    if (pk_arg_long(ctx, "moe_router_topk", &topk) && topk == 1 && score &&
        !strcmp(score, "softmax") && !pk_arg_on(ctx, "moe_router_pre_softmax") &&
        !pk_arg_is(ctx, "moe_router_load_balancing_type", "sinkhorn"))
        pk_startup(s, "core.topk1_needs_pre_softmax", "moe_router_topk",
                   "Please use --moe-router-pre-softmax when topk is 1. -- or route to more "
                   "experts");
    /* T: group-limited routing. */
    if (pk_arg_on(ctx, "moe_router_group_topk")) {
        long groups, gk = pk_arg_int(ctx, "moe_router_group_topk", 0);
        if (!pk_arg_on(ctx, "moe_router_num_groups"))
            pk_startup(s, "core.group_topk_needs_num_groups", "moe_router_group_topk",
                       "When using group limited routing, moe_router_num_groups must be "
                       "specified. -- set --moe-router-num-groups");
        else if (pk_arg_long(ctx, "moe_router_num_groups", &groups)) {
            if (!have_experts)
                pk_startup(s, "core.group_topk_experts_divisible", "moe_router_group_topk",
                           "TypeError: unsupported operand type(s) for %%: 'NoneType' and 'int' "
                           "(group-limited routing without --num-experts) -- set the expert "
                           "count");
            else if (pk_pymod(experts, groups))
                pk_startup(s, "core.group_topk_experts_divisible", "moe_router_num_groups",
                           "num_moe_experts (%ld) should be divisible by moe_router_num_groups "
                           "(%ld).",
                           experts, groups);
            else if (gk > groups)
                pk_startup(s, "core.group_topk_le_num_groups", "moe_router_group_topk",
                           "moe_router_group_topk (%ld) should be smaller than "
                           "moe_router_num_groups (%ld).",
                           gk, groups);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* TransformerConfig / ModelParallelConfig: heads, groups, MLA              */

static void check_config(const mt_ctx_v1 *ctx, mt_sink *s)
{
    int ver = version(ctx);
    long tp = pk_arg_int(ctx, "tensor_model_parallel_size", 1), heads, groups;
    int mla = pk_arg_on(ctx, "multi_latent_attention");

    /* The 0.15 NameError for EP with TP but no sequence parallelism is the
     * overlap plugin's (overlap.r015_ep_tp_without_sp_nameerror). */
    if (tp == 0 || !pk_arg_long(ctx, "num_attention_heads", &heads))
        return;
    if (pk_pymod(heads, tp))
        pk_startup(s, "core.heads_not_multiple_of_tp", "tensor_model_parallel_size",
                   "num_attention_heads (%ld) must be a multiple of tensor_model_parallel_size "
                   "(%ld). -- pick a TP that divides the head count",
                   heads, tp);
    groups = heads;
    if (pk_arg_on(ctx, "group_query_attention"))
        groups = pk_arg_int(ctx, "num_query_groups", heads);
    if (ver == R15 && pk_pymod(groups, tp))
        pk_startup(s, "core.query_groups_vs_tp", "tensor_model_parallel_size",
                   "num_query_groups (%ld) must be a multiple of tensor_model_parallel_size "
                   "(%ld). -- pick a TP that divides the query groups",
                   groups, tp);
    else if (ver >= V18 && pk_pymod(groups, tp) && (groups == 0 || pk_pymod(tp, groups)))
        pk_startup(s, "core.query_groups_vs_tp", "tensor_model_parallel_size",
                   "num_query_groups (%ld) must be a multiple or divisor of "
                   "tensor_model_parallel_size (%ld). -- pick a TP that divides or is divided "
                   "by the query groups",
                   groups, tp);

    /* T: MLA and rotary options. */
    if (mla && pk_arg_on(ctx, "rotary_interleaved"))
        pk_startup(s, "core.mla_rotary_interleaved", "multi_latent_attention",
                   "rotary_interleaved does not work with multi_latent_attention. -- drop "
                   "--rotary-interleaved");
    if (mla && pk_arg_on(ctx, "apply_rope_fusion")) {
        const char *rt = pk_arg(ctx, "rope_type");
        if (rt && strcmp(rt, "yarn"))
            pk_startup(s, "core.mla_rope_fusion_needs_yarn", "multi_latent_attention",
                       "apply_rope_fusion for MLA only works with YARN RoPE. -- add "
                       "--no-rope-fusion or use --rope-type yarn");
        else if (pk_arg_on(ctx, "cache_mla_latents"))
            pk_startup(s, "core.rope_fusion_vs_cache_latents", "multi_latent_attention",
                       "Rope Fusion is not compatible with caching latents -- add "
                       "--no-rope-fusion or drop --cache-mla-latents");
    }
}

/* ------------------------------------------------------------------------ */
/* L validate_layer_layout (run from TransformerConfig) and the layout's
 * characters (validate_args parses the layout first).                      */

static const char *layer_name(char c)
{
    switch (c) {
    case 'E':
        return "embedding";
    case 'L':
        return "loss";
    case 't':
        return "decoder";
    default:
        return "mtp";
    }
}

static long count_char(const char *s, char c)
{
    long n = 0;
    for (; *s; s++)
        n += *s == c;
    return n;
}

/* parse_str_to_list: every character of every stage of the expanded
 * layout buf is E, L, t or m.  0 (said in s) when one is not. */
static int layout_chars_ok(const char *buf, mt_sink *s)
{
    const char *stage;
    for (stage = buf; stage;) {
        const char *end = strchr(stage, '|');
        size_t len = end ? (size_t)(end - stage) : strlen(stage);
        size_t i;
        for (i = 0; i < len; i++)
            if (!strchr("ELtm", stage[i])) {
                pk_startup(s, "core.layout_invalid_char", "pipeline_model_parallel_layout",
                           "Invalid layer character: %c (stage='%.*s', layout_str='%.200s'), "
                           "known layer characters: ['E', 'L', 't', 'm'] -- use only E, t, m, "
                           "L and | (with (...)*k and x*k repeats)",
                           stage[i], (int)len, stage, buf);
                return 0;
            }
        stage = end ? end + 1 : NULL;
    }
    return 1;
}

/* The layers of the layout in order (flat, fl of them, no stage marks):
 * one E first, one L last, num_layers t, mtp_num_layers m (into *mtp)
 * after the decoders.  0 (said in s) when one of these fails. */
static int layout_layers_ok(const mt_ctx_v1 *ctx, mt_sink *s, const char *layout, const char *flat,
                            size_t fl, long *mtp)
{
    long layers;
    int have_mtp;
    if (!fl) {
        pk_startup(s, "core.layout_empty", "pipeline_model_parallel_layout",
                   "IndexError: list index out of range (pipeline_model_parallel_layout '%s' "
                   "places no layer) -- start with E and end with L",
                   layout);
        return 0;
    }
    if (flat[0] != 'E') {
        pk_startup(s, "core.layout_first_not_embedding", "pipeline_model_parallel_layout",
                   "The first layer must be embedding, but got LayerType.%s -- open the layout "
                   "with E",
                   layer_name(flat[0]));
        return 0;
    }
    if (flat[fl - 1] != 'L') {
        pk_startup(s, "core.layout_last_not_loss", "pipeline_model_parallel_layout",
                   "The last layer must be loss, but got LayerType.%s -- close the layout with "
                   "L",
                   layer_name(flat[fl - 1]));
        return 0;
    }
    if (count_char(flat, 'E') != 1) {
        pk_startup(s, "core.layout_embedding_once", "pipeline_model_parallel_layout",
                   "Embedding must be specified exactly once -- the layout has %ld E",
                   count_char(flat, 'E'));
        return 0;
    }
    if (count_char(flat, 'L') != 1) {
        pk_startup(s, "core.layout_loss_once", "pipeline_model_parallel_layout",
                   "Loss must be specified exactly once -- the layout has %ld L",
                   count_char(flat, 'L'));
        return 0;
    }
    if (pk_arg_long(ctx, "num_layers", &layers) && count_char(flat, 't') != layers) {
        pk_startup(s, "core.layout_decoder_count", "pipeline_model_parallel_layout",
                   "Number of decoder layers %ldmust match num_layers %ld -- place every "
                   "transformer layer (t) exactly once",
                   count_char(flat, 't'), layers);
        return 0;
    }
    have_mtp = pk_arg_long(ctx, "mtp_num_layers", mtp);
    if (have_mtp ? count_char(flat, 'm') != *mtp : count_char(flat, 'm') != 0) {
        pk_startup(s, "core.layout_mtp_count", "pipeline_model_parallel_layout",
                   "Number of mtp layers in layout must match mtp_num_layers -- the layout has "
                   "%ld m, mtp_num_layers is %s",
                   count_char(flat, 'm'), have_mtp ? pk_arg(ctx, "mtp_num_layers") : "None");
        return 0;
    }
    {
        const char *m = strchr(flat, 'm');
        if (m && strchr(m, 't')) {
            pk_startup(s, "core.layout_mtp_after_decoders", "pipeline_model_parallel_layout",
                       "decoder layers must be placed before MTP layers");
            return 0;
        }
    }
    return 1;
}

/* The MTP layers' stages: per pipeline rank r, virtual stage v is stage
 * v*PP + r; MTP sits only in a rank's last virtual stage, all mtp of them
 * in one stage (on R15: the last, with the loss). */
static void layout_mtp_stages(const mt_ctx_v1 *ctx, mt_sink *s, const char *buf, long stages,
                              long pp, long vpp, long mtp)
{
    long i = 0, r, v;
    const char *st[4096], *stage;
    size_t len[4096];
    if (stages > 4096)
        return;
    for (stage = buf; stage && i < stages; i++) {
        const char *end = strchr(stage, '|');
        st[i] = stage;
        len[i] = end ? (size_t)(end - stage) : strlen(stage);
        stage = end ? end + 1 : NULL;
    }
    for (r = 0; r < pp; r++)
        for (v = 0; v + 1 < vpp; v++)
            if (memchr(st[v * pp + r], 'm', len[v * pp + r])) {
                pk_startup(s, "core.layout_mtp_last_vstage", "pipeline_model_parallel_layout",
                           "Currently we restrict that the MTP should be always in the last "
                           "virtual pipeline stage of that rank (stage %ld is virtual stage "
                           "%ld of %ld on pipeline rank %ld)",
                           v * pp + r + 1, v + 1, vpp, r);
                return;
            }
    for (r = 0; r < pp; r++) {
        long last = (vpp - 1) * pp + r, k, cnt = 0;
        for (k = 0; k < (long)len[last]; k++)
            cnt += st[last][k] == 'm';
        if (!cnt)
            continue;
        if (cnt != mtp) {
            pk_startup(s, "core.layout_mtp_same_stage", "pipeline_model_parallel_layout",
                       "All of the MTP layers must be in the same %s -- put all %ld m in "
                       "one stage",
                       version(ctx) == R15 ? "stage" : "one virtual pipeline stage", mtp);
            return;
        }
        if (version(ctx) == R15 && (r != pp - 1 || !memchr(st[last], 'L', len[last]))) {
            pk_startup(s, "core.layout_mtp_with_loss", "pipeline_model_parallel_layout",
                       "MTP layers must be in the last stage together with Loss stage.");
            return;
        }
    }
}

static void check_layout(const mt_ctx_v1 *ctx, mt_sink *s)
{
    static char buf[1 << 16];
    const char *layout = pk_arg(ctx, "pipeline_model_parallel_layout");
    const char *p;
    char flat[1 << 14];
    long stages, pp = pk_arg_int(ctx, "pipeline_model_parallel_size", 1), vpp, mtp = 0;
    size_t fl = 0;
    if (!layout)
        return;
    stages = pk_layout_expand(layout, buf, sizeof buf);
    if (stages < 0)
        return; /* too long to judge */
    if (!layout_chars_ok(buf, s))
        return;
    /* The rest runs in TransformerConfig, after validate_args (whose stage
     * count check the folding plugin owns) and the pipeline-argument
     * conflicts. */
    if (pp <= 0 || stages % pp || pk_arg_set(ctx, "decoder_first_pipeline_num_layers") ||
        pk_arg_set(ctx, "decoder_last_pipeline_num_layers") ||
        pk_arg_on(ctx, "account_for_embedding_in_pipeline_split") ||
        pk_arg_on(ctx, "account_for_loss_in_pipeline_split"))
        return;
    vpp = stages / pp;
    for (p = buf; *p && fl + 1 < sizeof flat; p++)
        if (*p != '|')
            flat[fl++] = *p;
    flat[fl] = 0;
    if (!layout_layers_ok(ctx, s, layout, flat, fl, &mtp))
        return;
    layout_mtp_stages(ctx, s, buf, stages, pp, vpp, mtp);
}

/* A (0.18+): the memory log interval is a multiple of the log interval. */
static void check_logging(const mt_ctx_v1 *ctx, mt_sink *s)
{
    long mem, every;
    if (version(ctx) < V18 || !pk_arg_long(ctx, "log_memory_interval", &mem) ||
        !pk_arg_long(ctx, "log_interval", &every))
        return;
    if (every == 0)
        pk_startup(s, "core.log_memory_interval", "log_interval",
                   "ZeroDivisionError: integer modulo by zero (log_memory_interval %ld %% "
                   "log_interval 0) -- log_interval must be at least 1",
                   mem);
    else if (pk_pymod(mem, every))
        pk_startup(s, "core.log_memory_interval", "log_interval",
                   "AssertionError (no message): log_memory_interval %ld is not a multiple of "
                   "log_interval %ld -- make it one",
                   mem, every);
}

static void check_core(const mt_ctx_v1 *ctx, mt_sink *s)
{
    check_logging(ctx, s);
    check_converters(ctx, s);
    check_parallel_args(ctx, s);
    check_batch(ctx, s);
    check_shape(ctx, s);
    check_moe(ctx, s);
    check_config(ctx, s);
    check_layout(ctx, s);
}

void mt_core_check(const mt_ctx_v1 *ctx, mt_violations *out)
{
    mt_sink s;
    if (!pk_args(ctx))
        return;
    pk_host = mt_host_table();
    mt_sink_init(&s, MT_SINK_CHECK, "core");
    s.viol = out;
    check_core(ctx, &s);
    mt_sink_fini(&s);
}
