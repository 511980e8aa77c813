/*
 * pluginkit.h - small static helpers shared by the built-in plugins.
 *
 * Header-only on purpose: every built-in plugin is its own shared object that
 * links nothing from the host, exactly like a third-party plugin, so the
 * helpers are compiled into each one.  Everything here goes through the host
 * table handed to init; nothing allocates.  The helpers the core's own rules
 * share with the plugins (the host's views, ctx->args, stack versions,
 * start-up and runtime violations, the pipeline layout expansion) are in
 * moetune/kit.h, which this includes; what is here only plugins use.
 *
 * The evidence keys verify() reads, with their meaning, are listed in
 * moetune/plugin.h (above mt_ctx_v1).
 */
#ifndef MOETUNE_PLUGINKIT_H
#define MOETUNE_PLUGINKIT_H

#include <moetune/kit.h>
#include <moetune/plugin.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
