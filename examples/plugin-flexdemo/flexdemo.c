/*
 * flexdemo.c - an example third-party moetune plugin, built out of tree.
 *
 * It adds a made-up vendor backend, "flexdemo", to Megatron's flex token
 * dispatcher: the knob moe_flex_dispatcher_backend belongs to moetune's
 * dispatcher plugin, and this plugin *extends* it with one value, then answers
 * legality, rendering and verification for exactly that value.  It also owns
 * one knob of its own, the environment variable FLEXDEMO_CHUNK_KB (the size
 * of the chunks the backend pipelines tokens in).
 *
 * The backend stands for the kind of vendor all-to-all library that moves
 * tokens over NVLink inside a domain and over RDMA between domains (a
 * UCCL-style design); the code here is only the moetune side of it.
 *
 * Hardware rule (made up for the demo, stated once here and in check()):
 *   - Hopper or Blackwell GPUs;
 *   - an NVLink domain of at least 8 GPUs (the intra-domain stage needs a
 *     full NVSwitch domain);
 *   - world_size <= 4 x nvlink_domain (the inter-domain stage is a single
 *     RDMA hop across at most four domains).
 *
 * This file uses nothing but the installed ABI header <moetune/plugin.h> and
 * the C library: a third-party plugin never includes moetune's internals.
 * Build: see Makefile and README.md next to this file.
 */
#include <moetune/plugin.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BACKEND "moe_flex_dispatcher_backend"
#define TYPE "moe_token_dispatcher_type"
#define CHUNK "env.FLEXDEMO_CHUNK_KB"
#define OURS "flexdemo"
#define DEFAULT_CHUNK_KB "512"

/* The host table from init; valid until the plugin is unloaded.  The ABI
 * serializes calls into one plugin, and nothing else here outlives a call. */
static const mt_host_v1 *host;

static const char *const added_values[] = {OURS, NULL};

static const mt_extension_v1 extensions[] = {
    {sizeof(mt_extension_v1), BACKEND, added_values},
};

static const mt_knob_v1 knobs[] = {
    {sizeof(mt_knob_v1), MT_KNOB_ENV, MT_TYPE_INT, CHUNK, NULL, "0",
     "FLEXDEMO_CHUNK_KB: token chunk size of the flexdemo backend in KB; 0 = unset"},
};

static const mt_variable_v1 variables[] = {
    {sizeof(mt_variable_v1), "flexdemo", TYPE " " BACKEND " " CHUNK, MT_WALL_COMM},
};

/* ---- small helpers (the built-in plugins' pluginkit.h is not public) ---- */

static const char *get(const mt_kv *kv, const char *key)
{
    return kv ? host->kv_get(kv, key) : NULL;
}

static const char *get_or(const mt_kv *kv, const char *key, const char *def)
{
    const char *v = get(kv, key);
    return v ? v : def;
}

static long get_long(const mt_kv *kv, const char *key, long def)
{
    const char *v = get(kv, key);
    char *end;
    long n;
    if (!v || !*v)
        return def;
    n = strtol(v, &end, 10);
    return *end ? def : n;
}

static int is(const mt_kv *kv, const char *key, const char *want)
{
    const char *v = get(kv, key);
    return v && !strcmp(v, want);
}

/* Whether the contract's search space allows value for knob: true when the
 * contract declares no space for it ("space.<knob>" = values one per line). */
static int space_allows(const mt_ctx_v1 *ctx, const char *knob, const char *value)
{
    char key[128];
    const char *p;
    size_t n = strlen(value);
    snprintf(key, sizeof key, "space.%s", knob);
    if (!(p = get(ctx->contract, key)))
        return 1;
    for (;;) {
        size_t len = strcspn(p, "\n");
        if (len == n && !strncmp(p, value, n))
            return 1;
        if (!p[len])
            return 0;
        p += len + 1;
    }
}

#if defined(__GNUC__)
#define FD_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define FD_PRINTF(fmt, args)
#endif

static void note(mt_sink *s, const char *fmt, ...) FD_PRINTF(2, 3);
static void note(mt_sink *s, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    host->sink_note(s, msg);
}

static void violation(mt_sink *s, const char *rule, const char *knob_list, const char *fmt, ...)
    FD_PRINTF(4, 5);
static void violation(mt_sink *s, const char *rule, const char *knob_list, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    host->sink_violation(s, rule, knob_list, msg);
}

static void verdict(mt_sink *s, const char *knob, uint32_t v, const char *fmt, ...)
    FD_PRINTF(4, 5);
static void verdict(mt_sink *s, const char *knob, uint32_t v, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    host->sink_verdict(s, knob, v, msg);
}

/* Why the hardware cannot run the backend (into why), or 0 when it can. */
static int hardware_unsupported(const mt_ctx_v1 *ctx, char *why, size_t n)
{
    const char *arch = get_or(ctx->hardware, "arch", "");
    const char *gpu = get_or(ctx->hardware, "gpu", "?");
    long domain = get_long(ctx->hardware, "nvlink_domain", 0);
    long world = get_long(ctx->hardware, "world_size", 0);

    if (strcmp(arch, "hopper") && strcmp(arch, "blackwell"))
        snprintf(why, n, "it runs on Hopper or Blackwell GPUs; %s is %s", gpu,
                 *arch ? arch : "of unknown architecture");
    else if (domain < 8)
        snprintf(why, n, "it needs an NVLink domain of at least 8 GPUs; %s has %ld", gpu, domain);
    else if (world > 4 * domain)
        snprintf(why, n, "it spans at most 4 NVLink domains (%ld GPUs with domains of %ld); "
                         "world_size is %ld",
                 4 * domain, domain, world);
    else
        return 0;
    return 1;
}

/* ---- entry points ------------------------------------------------------ */

static int fd_init(const mt_host_v1 *h, mt_sink *err, void **state)
{
    (void)state;
    if (!h || h->struct_size < sizeof(mt_host_v1)) {
        if (h && h->sink_error)
            h->sink_error(err, "flexdemo: host table too old for this plugin");
        return -1;
    }
    host = h;
    return 0;
}

/* Only configs that use the flexdemo value are this plugin's business.  The
 * backend knob is listed first where moving off flexdemo is the fix, so its
 * owner (the dispatcher plugin) is the one asked to repair. */
static int fd_check(void *state, const mt_ctx_v1 *ctx, mt_sink *out)
{
    const mt_kv *c = ctx->config;
    char why[256];
    long ep = get_long(c, "expert_model_parallel_size", 1);
    (void)state;

    if (!is(c, BACKEND, OURS))
        return 0;
    if (hardware_unsupported(ctx, why, sizeof why))
        violation(out, "flexdemo.hardware", BACKEND,
                  "--moe-flex-dispatcher-backend flexdemo is not supported here: %s; use "
                  "another backend",
                  why);
    if (!is(c, TYPE, "flex"))
        violation(out, "flexdemo.needs_flex", TYPE " " BACKEND,
                  "the flexdemo backend is a flex dispatcher backend, but "
                  "moe_token_dispatcher_type is %s; set it to flex",
                  get_or(c, TYPE, "?"));
    if (ep <= 1)
        violation(out, "flexdemo.needs_ep", BACKEND " expert_model_parallel_size",
                  "the flexdemo backend dispatches tokens between expert-parallel ranks, but "
                  "expert_model_parallel_size is %ld; set EP > 1",
                  ep);
    return 0;
}

static int fd_propose(void *state, const mt_ctx_v1 *ctx, mt_sink *out)
{
    const mt_kv *c = ctx->config;
    const char *chunk = DEFAULT_CHUNK_KB, *declared;
    char why[256], first[16];
    (void)state;

    if (is(c, BACKEND, OURS) || hardware_unsupported(ctx, why, sizeof why) ||
        get_long(c, "expert_model_parallel_size", 1) <= 1 || !space_allows(ctx, TYPE, "flex") ||
        !space_allows(ctx, BACKEND, OURS))
        return 0;
    /* A contract that searches the chunk size gets its first declared value. */
    if (!space_allows(ctx, CHUNK, chunk) && (declared = get(ctx->contract, "space." CHUNK))) {
        size_t len = strcspn(declared, "\n");
        if (!len || len >= sizeof first)
            return 0;
        memcpy(first, declared, len);
        first[len] = '\0';
        chunk = first;
    }

    host->sink_candidate(out, "flexdemo", "flex dispatcher, flexdemo backend", MT_WALL_COMM,
                         MT_LABEL_TRAINING_EQUIVALENT);
    if (!is(c, TYPE, "flex"))
        host->sink_set(out, TYPE, "flex");
    host->sink_set(out, BACKEND, OURS);
    if (!is(c, CHUNK, chunk))
        host->sink_set(out, CHUNK, chunk);
    note(out,
         "flexdemo pipelines dispatch and combine in %s KB chunks over NVLink inside a domain "
         "and one RDMA hop between domains; same tokens, same experts, same math",
         chunk);
    return 0;
}

static int fd_render(void *state, const mt_ctx_v1 *ctx, uint32_t dialect, mt_sink *out)
{
    const mt_kv *c = ctx->config;
    long chunk = get_long(c, CHUNK, 0);
    char buf[32];
    (void)state;

    if (!is(c, BACKEND, OURS))
        return 0;
    if (dialect == MT_DIALECT_MLM) {
        host->sink_arg(out, "--moe-flex-dispatcher-backend");
        host->sink_arg(out, OURS);
    } else {
        host->sink_arg(out, "model.moe_flex_dispatcher_backend=" OURS);
    }
    if (chunk > 0) {
        snprintf(buf, sizeof buf, "%ld", chunk);
        host->sink_env(out, "FLEXDEMO_CHUNK_KB", buf);
    }
    return 0;
}

/* The backend prints "flexdemo: dispatch ready" once its buffers are up (the
 * host's log parser files it as log.flexdemo); Megatron's fallback warning
 * or an ImportError proves that it did not run. */
static int fd_verify(void *state, const mt_ctx_v1 *ctx, mt_sink *out)
{
    const mt_kv *c = ctx->config, *ev = ctx->evidence;
    const char *ready = get(ev, "log.flexdemo"), *fallback = get(ev, "log.dispatcher_fallback");
    const char *import = get(ev, "log.import_error"), *chunk = get_or(c, CHUNK, "0");
    (void)state;

    if (is(c, BACKEND, OURS)) {
        if (fallback)
            verdict(out, BACKEND, MT_VERDICT_NOT_APPLIED, "dispatcher fell back: %s", fallback);
        else if (import)
            verdict(out, BACKEND, MT_VERDICT_NOT_APPLIED, "import failed: %s", import);
        else if (ready && strstr(ready, "flexdemo: dispatch ready"))
            verdict(out, BACKEND, MT_VERDICT_APPLIED, "log: %s", ready);
        else
            verdict(out, BACKEND, MT_VERDICT_UNKNOWN,
                    "no \"flexdemo: dispatch ready\" line and no fallback warning in the log");
    }
    if (get_long(c, CHUNK, 0) > 0) {
        const char *got = get(ev, CHUNK);
        if (!is(c, BACKEND, OURS))
            verdict(out, CHUNK, MT_VERDICT_UNKNOWN,
                    "FLEXDEMO_CHUNK_KB is passed only with the flexdemo backend, and the "
                    "backend is %s; nothing to verify",
                    get_or(c, BACKEND, "none"));
        else if (!got)
            verdict(out, CHUNK, MT_VERDICT_UNKNOWN,
                    "the worker recorded no FLEXDEMO_CHUNK_KB for this run");
        else if (!strcmp(got, chunk))
            verdict(out, CHUNK, MT_VERDICT_APPLIED, "the run was launched with %s = %s", CHUNK,
                    got);
        else
            verdict(out, CHUNK, MT_VERDICT_NOT_APPLIED,
                    "the run was launched with %s = \"%s\", but %s was requested", CHUNK, got,
                    chunk);
    }
    return 0;
}

MT_PLUGIN_EXPORT const mt_plugin_v1 moetune_plugin_v1 = {
    .struct_size = sizeof(mt_plugin_v1),
    .abi_version = MT_PLUGIN_ABI_VERSION,
    .name = "flexdemo",
    .version = "1.0.0",
    .description = "example out-of-tree plugin: a made-up flex dispatcher backend",
    .knobs = knobs,
    .n_knobs = sizeof knobs / sizeof knobs[0],
    .extends = extensions,
    .n_extends = sizeof extensions / sizeof extensions[0],
    .variables = variables,
    .n_variables = sizeof variables / sizeof variables[0],
    .init = fd_init,
    .propose = fd_propose,
    .check = fd_check,
    .render = fd_render,
    .verify = fd_verify,
};
