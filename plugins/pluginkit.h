/*
 * pluginkit.h - small static helpers shared by the built-in plugins.
 *
 * Header-only on purpose: every built-in plugin is its own shared object that
 * links nothing from the host, exactly like a third-party plugin, so the
 * helpers are compiled into each one.  Everything here goes through the host
 * table handed to init; nothing allocates.
 *
 * Evidence keys read by verify() (written by the log parser and the trace
 * analyser of the host; absent when unknown):
 *   args.<name>              value from the Megatron arguments dump
 *   log.dispatcher_fallback  the "... Falling back to alltoall." line
 *   log.import_error         an ImportError line naming DeepEP / HybridEP
 *   log.cuda_graph_capture   a capture line (TE, local or full iteration)
 *   log.world                the "using world size: ..." line
 *   log.oom, log.nan         the out-of-memory / NaN line, when the run had one
 *   log.nccl_error           an NCCL error line
 *   log.infra, log.watchdog  a lost node / Xid / IB line; a collective watchdog line
 *   env.<NAME>               an environment variable the run was launched with
 *   launch.<key>             a launcher setting the run was launched with
 *   trace.available          "true" when a profiled run was analysed
 *   trace.fp8_gemm           count of FP8 GEMM kernels
 *   trace.mxfp8_gemm         count of MXFP8 (block-scaled) GEMM kernels
 *   trace.nvfp4_gemm         count of NVFP4 GEMM kernels
 *   trace.deepep_kernels     count of DeepEP dispatch/combine kernels
 *   trace.hybridep_kernels   count of HybridEP dispatch/combine kernels
 *   trace.alltoall_kernels   count of NCCL all-to-all / send-recv kernels
 *   trace.graph_launches     count of CUDA graph launches
 *   trace.kernel_launches    count of individual kernel launches (runtime API)
 *   trace.comm_hidden_fraction  hidden / all communication time (unions)
 *   trace.steps              steps the trace marks (ProfilerStep#N ranges)
 *   trace.graph_steps        ... of which hold a graph launch
 *   trace.graph_first_step, trace.graph_last_step  the first and last of those
 *   trace.launches_per_graph_step, trace.launches_per_eager_step
 *                            kernel launches per step with / without graphs
 */
#ifndef MOETUNE_PLUGINKIT_H
#define MOETUNE_PLUGINKIT_H

#include <moetune/plugin.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Each plugin keeps the host table it got at init here. */
static const mt_host_v1 *pk_host;

static inline int pk_init(const mt_host_v1 *host, mt_sink *err, void **state)
{
    (void)state;
    if (!host || host->struct_size < sizeof(mt_host_v1)) {
        if (host && host->sink_error)
            host->sink_error(err, "host table too old for this plugin");
        return -1;
    }
    pk_host = host;
    return 0;
}

static inline const char *pk_get(const mt_kv *kv, const char *key)
{
    return kv ? pk_host->kv_get(kv, key) : NULL;
}

/* String value or def when absent. */
static inline const char *pk_str(const mt_kv *kv, const char *key, const char *def)
{
    const char *v = pk_get(kv, key);
    return v ? v : def;
}

static inline long pk_int(const mt_kv *kv, const char *key, long def)
{
    const char *v = pk_get(kv, key);
    char *end;
    long n;
    if (!v || !*v)
        return def;
    n = strtol(v, &end, 10);
    return *end ? def : n;
}

static inline int pk_bool(const mt_kv *kv, const char *key)
{
    const char *v = pk_get(kv, key);
    return v && (!strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "1"));
}

static inline int pk_eq(const mt_kv *kv, const char *key, const char *want)
{
    const char *v = pk_get(kv, key);
    return v && !strcmp(v, want);
}

/* True when the space-separated list in `list` contains `word`. */
static inline int pk_word_in(const char *list, const char *word)
{
    size_t n = strlen(word);
    const char *p = list;
    if (!list || !n)
        return 0;
    while (*p) {
        while (*p == ' ')
            p++;
        if (!strncmp(p, word, n) && (p[n] == ' ' || p[n] == '\0'))
            return 1;
        while (*p && *p != ' ')
            p++;
    }
    return 0;
}

static inline int pk_has(const mt_kv *kv, const char *key, const char *word)
{
    return pk_word_in(pk_get(kv, key), word);
}

/* True when value v is in the NULL-terminated list. */
static inline int pk_value_in(const char *const *values, const char *v)
{
    for (; values && *values; values++)
        if (!strcmp(*values, v))
            return 1;
    return 0;
}

/* Whether the contract lets candidates use `value` for `knob`: true when the
 * contract declares no space for the knob, or lists the value in it
 * ("space.<knob>" = values separated by newlines). */
static inline int pk_space_allows(const mt_ctx_v1 *ctx, const char *knob, const char *value)
{
    char key[160];
    const char *list, *p;
    size_t n = strlen(value);
    snprintf(key, sizeof key, "space.%s", knob);
    list = pk_get(ctx->contract, key);
    if (!list)
        return 1;
    for (p = list;;) {
        size_t len = strcspn(p, "\n");
        if (len == n && !strncmp(p, value, n))
            return 1;
        if (!p[len])
            return 0;
        p += len + 1;
    }
}

/* True when the contract declares a search space for `knob`. */
static inline int pk_space_declared(const mt_ctx_v1 *ctx, const char *knob)
{
    char key[160];
    snprintf(key, sizeof key, "space.%s", knob);
    return pk_get(ctx->contract, key) != NULL;
}

/* Reduces a value to lowercase words separated by single spaces, so that a
 * config value ("none", "a b", "true") and its Python repr in the arguments
 * dump ("None", "['a', 'b']", "True") compare equal. */
static inline void pk_normalize(const char *in, char *out, size_t n)
{
    size_t o = 0;
    int gap = 0;
    for (; *in && o + 2 < n; in++) {
        if (strchr(" []'\",", *in)) {
            gap = o > 0;
            continue;
        }
        if (gap)
            out[o++] = ' ';
        gap = 0;
        out[o++] = *in >= 'A' && *in <= 'Z' ? (char)(*in - 'A' + 'a') : *in;
    }
    out[o] = '\0';
    if (!strcmp(out, "none"))
        out[0] = '\0'; /* None, "none" and an empty list all mean unset */
}

/* True when a config value and a dumped argument say the same thing. */
static inline int pk_same_value(const char *config_value, const char *dumped)
{
    char a[1024], b[1024];
    pk_normalize(config_value ? config_value : "", a, sizeof a);
    pk_normalize(dumped ? dumped : "", b, sizeof b);
    return !strcmp(a, b);
}

/* The arguments dump entry "args.<arg>" against want: 1 same, 0 different,
 * -1 absent.  *dumped receives the dumped text (or NULL). */
static inline int pk_args_match(const mt_ctx_v1 *ctx, const char *arg, const char *want,
                                const char **dumped)
{
    char key[160];
    snprintf(key, sizeof key, "args.%s", arg);
    *dumped = pk_get(ctx->evidence, key);
    if (!*dumped)
        return -1;
    return pk_same_value(want, *dumped);
}

static inline void pk_violation(mt_sink *s, const char *rule, const char *knobs,
                         const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static inline void pk_violation(mt_sink *s, const char *rule, const char *knobs,
                         const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pk_host->sink_violation(s, rule, knobs, msg);
}

/* A rule checker that either reports to a check() sink or, with a NULL
 * sink, only counts: propose() uses the counting form to skip candidates
 * that would be illegal, with the very rules check() reports. */
typedef struct pk_rules {
    mt_sink *sink; /* NULL: only count */
    int n;
} pk_rules;

static inline void pk_fail(pk_rules *ro, const char *rule, const char *knobs, const char *fmt,
                           ...) __attribute__((format(printf, 4, 5)));
static inline void pk_fail(pk_rules *ro, const char *rule, const char *knobs, const char *fmt,
                           ...)
{
    char msg[512];
    va_list ap;
    ro->n++;
    if (!ro->sink)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pk_host->sink_violation(ro->sink, rule, knobs, msg);
}

static inline void pk_note(mt_sink *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void pk_note(mt_sink *s, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pk_host->sink_note(s, msg);
}

static inline void pk_verdict(mt_sink *s, const char *knob, uint32_t verdict,
                       const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static inline void pk_verdict(mt_sink *s, const char *knob, uint32_t verdict,
                       const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pk_host->sink_verdict(s, knob, verdict, msg);
}

/* Render one knob as a flag (MLM) or override (Bridge).
 *   knob    canonical name ("moe_token_dispatcher_type")
 *   section Bridge section ("model", "comm_overlap", "ddp", "train", ...)
 *   field   Bridge field name, or NULL for the knob name
 *   value   NULL renders a bare MLM flag (boolean true) and "True" in Bridge;
 *           a value with spaces (module lists) becomes several MLM tokens and
 *           a Python list in Bridge: model.x=[a,b].  A one-element Bridge list
 *           must be passed bracketed ("[attn]") by the caller, who knows the
 *           knob is a list.
 * A value too long to render is reported through sink_error, never cut. */
static inline void pk_render(mt_sink *s, uint32_t dialect, const char *knob,
                             const char *section, const char *field, const char *value)
{
    char buf[2048];
    size_t i, n;
    int w;
    if (dialect == MT_DIALECT_MLM) {
        n = (size_t)snprintf(buf, sizeof buf, "--%s", knob);
        for (i = 2; i < n && i < sizeof buf; i++)
            if (buf[i] == '_')
                buf[i] = '-';
        pk_host->sink_arg(s, buf);
        if (value) {
            const char *p = value;
            while (*p) {
                size_t len = strcspn(p, " ");
                if (len >= sizeof buf) {
                    pk_host->sink_error(s, "a value word is too long to render");
                    return;
                }
                if (len) {
                    memcpy(buf, p, len);
                    buf[len] = '\0';
                    pk_host->sink_arg(s, buf);
                }
                p += len;
                while (*p == ' ')
                    p++;
            }
        }
        return;
    }
    if (!value) {
        w = snprintf(buf, sizeof buf, "%s.%s=True", section, field ? field : knob);
    } else if (strchr(value, ' ')) {
        size_t off = (size_t)snprintf(buf, sizeof buf, "%s.%s=[", section, field ? field : knob);
        for (i = 0; value[i] && off + 2 < sizeof buf; i++)
            buf[off++] = value[i] == ' ' ? ',' : value[i];
        if (value[i]) {
            pk_host->sink_error(s, "a list value is too long to render");
            return;
        }
        buf[off++] = ']';
        buf[off] = '\0';
        w = (int)off;
    } else {
        w = snprintf(buf, sizeof buf, "%s.%s=%s", section, field ? field : knob, value);
    }
    if (w < 0 || (size_t)w >= sizeof buf) {
        pk_host->sink_error(s, "a value is too long to render");
        return;
    }
    pk_host->sink_arg(s, buf);
}

/* Bridge spells booleans the Python way. */
static inline void pk_render_bool(mt_sink *s, uint32_t dialect, const char *knob,
                           const char *section, const char *field, int on)
{
    if (dialect == MT_DIALECT_MLM) {
        if (on)
            pk_render(s, dialect, knob, section, field, NULL);
        return;
    }
    pk_render(s, dialect, knob, section, field, on ? "True" : "False");
}

/* ---- start-up rules -------------------------------------------------------
 *
 * Start-up rules are the checks the training program itself makes before it
 * trains (Megatron's parse_args, validate_args, TransformerConfig), written
 * over ctx->args: the namespace that version's parser gives for the rendered
 * command line, by dest, defaults filled in, None absent.  Each rule names
 * the version (and Transformer Engine version, architecture, environment)
 * conditions upstream uses, so one rule serves every dialect.  Runtime rules
 * (what only fails on the GPU or in a library) are reported with
 * pk_runtime and read the config as before. */

/* Megatron's pipeline layout expansion (parse_str_to_list): commas
 * deleted; one left-to-right pass replacing "(X)*k" (X without ')') by k
 * copies of X; one pass replacing "c*k" (any one character c) by k copies
 * of c.  out receives the expansion; returns the number of '|'-separated
 * stages, or -1 when the expansion does not fit in n bytes.  Characters are
 * not judged here: a stage may hold anything. */
static inline long pk_layout_expand(const char *in, char *out, size_t n)
{
    char a[8192], b[8192];
    size_t o = 0, i, len;
    long stages = 1;
    for (i = 0; in[i] && o + 1 < sizeof a; i++)
        if (in[i] != ',')
            a[o++] = in[i];
    if (in[i])
        return -1;
    a[o] = 0;
    /* pass 1: (X)*k */
    o = 0;
    for (i = 0; a[i];) {
        if (a[i] == '(') {
            size_t j = i + 1, k;
            while (a[j] && a[j] != ')')
                j++;
            if (a[j] == ')' && j > i + 1 && a[j + 1] == '*' && a[j + 2] >= '0' && a[j + 2] <= '9') {
                unsigned long rep = 0;
                size_t d = j + 2;
                while (a[d] >= '0' && a[d] <= '9' && rep < 100000)
                    rep = rep * 10 + (unsigned long)(a[d++] - '0');
                while (a[d] >= '0' && a[d] <= '9')
                    d++;
                for (; rep; rep--)
                    for (k = i + 1; k < j; k++) {
                        if (o + 1 >= sizeof b)
                            return -1;
                        b[o++] = a[k];
                    }
                i = d;
                continue;
            }
        }
        if (o + 1 >= sizeof b)
            return -1;
        b[o++] = a[i++];
    }
    b[o] = 0;
    /* pass 2: c*k */
    o = 0;
    len = strlen(b);
    for (i = 0; i < len;) {
        if (i + 2 < len + 1 && b[i + 1] == '*' && b[i + 2] >= '0' && b[i + 2] <= '9') {
            unsigned long rep = 0;
            size_t d = i + 2;
            while (b[d] >= '0' && b[d] <= '9' && rep < 100000)
                rep = rep * 10 + (unsigned long)(b[d++] - '0');
            while (b[d] >= '0' && b[d] <= '9')
                d++;
            for (; rep; rep--) {
                if (o + 1 >= n)
                    return -1;
                out[o++] = b[i];
            }
            i = d;
            continue;
        }
        if (o + 1 >= n)
            return -1;
        out[o++] = b[i++];
    }
    out[o] = 0;
    for (i = 0; i < o; i++)
        stages += out[i] == '|';
    return stages;
}

static inline const mt_kv *pk_args(const mt_ctx_v1 *ctx)
{
    return MT_HAS_FIELD(ctx, mt_ctx_v1, args) ? ctx->args : NULL;
}

/* The value of dest, or NULL when it is None (or the version has no dest). */
static inline const char *pk_arg(const mt_ctx_v1 *ctx, const char *dest)
{
    return pk_get(pk_args(ctx), dest);
}

static inline int pk_arg_set(const mt_ctx_v1 *ctx, const char *dest)
{
    return pk_arg(ctx, dest) != NULL;
}

/* Python truthiness of dest: None, false, 0, "" and an empty list are false. */
static inline int pk_arg_on(const mt_ctx_v1 *ctx, const char *dest)
{
    const char *v = pk_arg(ctx, dest);
    char *end;
    double x;
    if (!v || !*v || !strcmp(v, "false") || !strcmp(v, "None"))
        return 0;
    x = strtod(v, &end);
    return *end || x != 0;
}

static inline long pk_arg_int(const mt_ctx_v1 *ctx, const char *dest, long def)
{
    return pk_int(pk_args(ctx), dest, def);
}

static inline double pk_arg_num(const mt_ctx_v1 *ctx, const char *dest, double def)
{
    const char *v = pk_arg(ctx, dest);
    char *end;
    double x;
    if (!v || !*v)
        return def;
    x = strtod(v, &end);
    return *end ? def : x;
}

/* A whole decimal integer v into *out: 1, or 0 (NULL, empty, not an
 * integer; *out untouched). */
static inline int pk_parse_long(const char *v, long *out)
{
    char *end;
    long n;
    if (!v || !*v)
        return 0;
    n = strtol(v, &end, 10);
    if (*end)
        return 0;
    *out = n;
    return 1;
}

/* The integer value of dest into *out: 1, or 0 when it is None or not an
 * integer. */
static inline int pk_arg_long(const mt_ctx_v1 *ctx, const char *dest, long *out)
{
    return pk_parse_long(pk_arg(ctx, dest), out);
}

/* What the command line said for dest before one of the host's derivations
 * overwrote it ("raw.<dest>"), else its value; NULL for None. */
static inline const char *pk_arg_raw(const mt_ctx_v1 *ctx, const char *dest)
{
    char key[200];
    const char *v;
    snprintf(key, sizeof key, "raw.%s", dest);
    v = pk_arg(ctx, key);
    if (v)
        return strcmp(v, "None") ? v : NULL;
    return pk_arg(ctx, dest);
}

/* pk_arg_long of the command line's value (pk_arg_raw). */
static inline int pk_arg_raw_long(const mt_ctx_v1 *ctx, const char *dest, long *out)
{
    return pk_parse_long(pk_arg_raw(ctx, dest), out);
}

static inline int pk_arg_is(const mt_ctx_v1 *ctx, const char *dest, const char *want)
{
    const char *v = pk_arg(ctx, dest);
    return v && !strcmp(v, want);
}

/* True when the list dest holds word. */
static inline int pk_arg_has(const mt_ctx_v1 *ctx, const char *dest, const char *word)
{
    return pk_word_in(pk_arg(ctx, dest), word);
}

/* The run's environment variable, or NULL when it is not set. */
static inline const char *pk_env(const mt_ctx_v1 *ctx, const char *name)
{
    char key[160];
    snprintf(key, sizeof key, "env.%s", name);
    return pk_get(pk_args(ctx), key);
}

/* Dotted version compare: <0, 0, >0. */
static inline int pk_vercmp(const char *a, const char *b)
{
    while ((a && *a) || (b && *b)) {
        long x = a && *a ? strtol(a, (char **)&a, 10) : 0;
        long y = b && *b ? strtol(b, (char **)&b, 10) : 0;
        if (x != y)
            return x < y ? -1 : 1;
        while (a && *a && (*a < '0' || *a > '9'))
            a++;
        while (b && *b && (*b < '0' || *b > '9'))
            b++;
    }
    return 0;
}

/* Megatron-Core's package version of the dialect is at least v ("0.18"). */
static inline int pk_core_ge(const mt_ctx_v1 *ctx, const char *v)
{
    const char *have = pk_get(ctx->contract, "stack.megatron_core");
    return have && pk_vercmp(have, v) >= 0;
}

/* Transformer Engine is at least v; an undeclared TE counts as absent. */
static inline int pk_te_ge(const mt_ctx_v1 *ctx, const char *v)
{
    const char *have = pk_get(ctx->contract, "stack.transformer_engine");
    return have && pk_vercmp(have, v) >= 0;
}

/* The GPU's compute capability as major*10 + minor (90, 100, 103). */
static inline int pk_capability(const mt_ctx_v1 *ctx)
{
    const char *v = pk_get(ctx->hardware, "compute_capability");
    long major, minor = 0;
    char *end;
    if (!v)
        return 0;
    major = strtol(v, &end, 10);
    if (*end == '.')
        minor = strtol(end + 1, NULL, 10);
    return (int)(major * 10 + minor);
}

static inline void pk_violation_in(mt_sink *s, uint32_t cls, const char *rule,
                                   const char *knobs, const char *msg)
{
    if (MT_HAS_FIELD(pk_host, mt_host_v1, sink_violation_class))
        pk_host->sink_violation_class(s, rule, knobs, msg, cls);
    else
        pk_host->sink_violation(s, rule, knobs, msg);
}

/* A start-up rule is violated.  msg should carry upstream's own wording
 * (so a user can match it with the run that would have died), then how to
 * fix it. */
static inline void pk_startup(mt_sink *s, const char *rule, const char *knobs, const char *fmt,
                              ...) __attribute__((format(printf, 4, 5)));
static inline void pk_startup(mt_sink *s, const char *rule, const char *knobs, const char *fmt,
                              ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pk_violation_in(s, MT_RULE_STARTUP, rule, knobs, msg);
}

/* A runtime-feasibility rule is violated. */
static inline void pk_runtime(mt_sink *s, const char *rule, const char *knobs, const char *fmt,
                              ...) __attribute__((format(printf, 4, 5)));
static inline void pk_runtime(mt_sink *s, const char *rule, const char *knobs, const char *fmt,
                              ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pk_violation_in(s, MT_RULE_RUNTIME, rule, knobs, msg);
}

/* ---- Megatron-Bridge versions ---------------------------------------------
 *
 * The Bridge dialect renders ConfigContainer overrides (section.field=value)
 * whose paths are those of core/dialects/bridge/<table>.tsv for the
 * contract's stack.megatron_bridge: a 0.2.x version ("0.2.2", "v0.2.x")
 * reads the v0.2.2 table, anything newer, "main" or an undeclared version
 * reads main's.  Where the paths differ, a plugin asks pk_bridge_ge(ctx,
 * PK_BRIDGE_MAIN). */

#define PK_BRIDGE_MAIN "0.3" /* the first version after the 0.2 line */

/* The contract's Megatron-Bridge is at least v ("0.4"); "main" and an
 * undeclared version are newer than any number. */
static inline int pk_bridge_ge(const mt_ctx_v1 *ctx, const char *v)
{
    const char *have = pk_get(ctx->contract, "stack.megatron_bridge");
    if (!have || !strcmp(have, "main"))
        return 1;
    while (*have && (*have < '0' || *have > '9'))
        have++; /* "v0.2.2" */
    return pk_vercmp(have, v) >= 0;
}

/* The table the version reads: "v0.2.2" or "main". */
static inline const char *pk_bridge_table(const mt_ctx_v1 *ctx)
{
    return pk_bridge_ge(ctx, PK_BRIDGE_MAIN) ? "main" : "v0.2.2";
}

/* A Megatron flag the Bridge version has no override path for: a render
 * error naming it, never a guessed path. */
static inline void pk_bridge_no_path(mt_sink *s, const mt_ctx_v1 *ctx, const char *flag)
{
    char msg[512];
    snprintf(msg, sizeof msg,
             "%s has no Megatron-Bridge override path in Bridge %s "
             "(core/dialects/bridge/%s.tsv): it cannot be rendered in the Bridge dialect",
             flag, pk_str(ctx->contract, "stack.megatron_bridge", "main"), pk_bridge_table(ctx));
    pk_host->sink_error(s, msg);
}

/* A string value as a Hydra QuotedString: single quotes, a backslash before
 * each single quote, and the backslashes before a quote or at the end
 * doubled, so Hydra reads back exactly value.  Returns the length, or -1
 * when out (n bytes) is too small. */
static inline int pk_hydra_quote(const char *value, char *out, size_t n)
{
    size_t o = 0, i, run;
    if (n < 3)
        return -1;
    out[o++] = '\'';
    for (i = 0; value[i]; i++) {
        if (value[i] == '\\') {
            for (run = 0; value[i + run] == '\\'; run++)
                ;
            /* a run before a quote or the end is doubled, else kept */
            if (value[i + run] == '\'' || value[i + run] == '\0')
                run *= 2;
            if (o + run + 2 >= n)
                return -1;
            for (; run; run--)
                out[o++] = '\\';
            while (value[i + 1] == '\\')
                i++;
            continue;
        }
        if (value[i] == '\'') {
            if (o + 3 >= n)
                return -1;
            out[o++] = '\\';
        } else if (o + 2 >= n) {
            return -1;
        }
        out[o++] = value[i];
    }
    out[o++] = '\'';
    out[o] = '\0';
    return (int)o;
}

#endif /* MOETUNE_PLUGINKIT_H */
