/*
 * moetune/kit.h - header-only helpers over plugin ABI v1 (moetune/plugin.h):
 * reading the host's views, the argument namespace of ctx->args, the
 * contract's stack versions, violations of a rule class, and Megatron's
 * pipeline layout expansion.
 *
 * It uses nothing but plugin.h and the C library, and everything goes
 * through the host table (pk_host), so code on either side of the ABI can
 * compile it in: the built-in plugins (through plugins/pluginkit.h) and the
 * core's own start-up rules (core/rules.c, which sets pk_host to the host
 * table it hands the plugins).  It is a convenience, not part of the
 * binary interface: nothing here is exported, nothing allocates, and it is
 * not installed (a third-party plugin needs only plugin.h).
 */
#ifndef MOETUNE_KIT_H
#define MOETUNE_KIT_H

#include <moetune/plugin.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the host's views ---------------------------------------------------- */

/* The host table every helper calls through: a plugin keeps the one it got
 * at init (pk_init); the core's rules set it to the host's own. */
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

/* Python's integer a % b and a // b (the remainder takes b's sign), as Megatron's
 * validation computes them; b != 0. */
static inline long pk_pymod(long a, long b)
{
    long r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

static inline long pk_pydiv(long a, long b) { return (a - pk_pymod(a, b)) / b; }

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

#endif /* MOETUNE_KIT_H */
