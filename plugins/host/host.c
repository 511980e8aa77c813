/*
 * host.c - the host plugin: the host/launch side of a run.  Manual Python GC,
 * CPU/NUMA binding of ranks (a launcher setting), the fused MoE router
 * kernels, and the environment variables that act as knobs
 * (CUDA_DEVICE_MAX_CONNECTIONS, PYTORCH_CUDA_ALLOC_CONF).
 *
 * Every candidate here is training-equivalent: none changes the math.
 */
#include "pluginkit.h"

#define CDMC "env.CUDA_DEVICE_MAX_CONNECTIONS"
#define ALLOC "env.PYTORCH_CUDA_ALLOC_CONF"
#define CPU_BIND "launcher.cpu_bind"

static const char *const cpu_binds[] = {"none", "numa", NULL};

static const mt_knob_v1 knobs[] = {
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_BOOL, "manual_gc", NULL, "false",
     "disable Python's automatic GC and collect at fixed steps (--manual-gc)"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_INT, "manual_gc_interval", NULL, "0",
     "steps between manual collections; 0 = none between steps (--manual-gc-interval)"},
    {sizeof(mt_knob_v1), MT_KNOB_FLAG, MT_TYPE_BOOL, "moe_router_fusion", NULL, "false",
     "fused MoE router top-k/softmax/aux-loss kernels (--moe-router-fusion)"},
    {sizeof(mt_knob_v1), MT_KNOB_LAUNCHER, MT_TYPE_ENUM, CPU_BIND, cpu_binds, "none",
     "bind each rank to the CPU cores and NUMA node nearest its GPU (launcher)"},
    {sizeof(mt_knob_v1), MT_KNOB_ENV, MT_TYPE_STRING, CDMC, NULL, "",
     "CUDA_DEVICE_MAX_CONNECTIONS: hardware work queues per device, 1..32; \"\" = unset (8)"},
    {sizeof(mt_knob_v1), MT_KNOB_ENV, MT_TYPE_STRING, ALLOC, NULL, "",
     "PYTORCH_CUDA_ALLOC_CONF: caching-allocator key:value list; \"\" = unset"},
};

static const mt_variable_v1 variables[] = {
    {sizeof(mt_variable_v1), "manual_gc", "manual_gc manual_gc_interval", MT_WALL_HOST},
    {sizeof(mt_variable_v1), "router_fusion", "moe_router_fusion", MT_WALL_HOST | MT_WALL_COMPUTE},
    {sizeof(mt_variable_v1), "cpu_bind", CPU_BIND, MT_WALL_HOST},
    {sizeof(mt_variable_v1), "device_max_connections", CDMC, MT_WALL_HOST | MT_WALL_COMM},
    {sizeof(mt_variable_v1), "alloc_conf", ALLOC, MT_WALL_MEMORY},
};

/* ---- shared facts about the config ---------------------------------- */

static long num_experts(const mt_ctx_v1 *ctx)
{
    long n = pk_int(ctx->config, "num_experts", -1);
    return n >= 0 ? n : pk_int(ctx->model, "num_experts", 0);
}

/* Megatron's CUDA_DEVICE_MAX_CONNECTIONS requirement stops at compute
 * capability 10 (Blackwell); an unknown GPU proves nothing. */
static int before_blackwell(const mt_ctx_v1 *ctx)
{
    const char *arch = pk_str(ctx->hardware, "arch", "");
    int cap = pk_capability(ctx);
    if (cap > 0)
        return cap < 100;
    return *arch && strcmp(arch, "blackwell");
}

static int tp_or_cp(const mt_ctx_v1 *ctx)
{
    return pk_int(ctx->config, "tensor_model_parallel_size", 1) > 1 ||
           pk_int(ctx->config, "context_parallel_size", 1) > 1;
}

static int graphs_on(const mt_ctx_v1 *ctx)
{
    const char *impl = pk_str(ctx->config, "cuda_graph_impl", "none");
    return *impl && strcmp(impl, "none");
}

/* CUDA_DEVICE_MAX_CONNECTIONS as a number: 0 when unset, -1 when not a
 * decimal in CUDA's range 1..32. */
static long cdmc_value(const char *v)
{
    long n = 0;
    if (!v || !*v)
        return 0;
    for (; *v; v++) {
        if (*v < '0' || *v > '9' || n > 32)
            return -1;
        n = n * 10 + (*v - '0');
    }
    return n >= 1 && n <= 32 ? n : -1;
}

/* ---- PYTORCH_CUDA_ALLOC_CONF ----------------------------------------- */

static const char *const alloc_keys[] = {"expandable_segments", "max_split_size_mb",
                                         "garbage_collection_threshold",
                                         "roundup_power2_divisions", NULL};

#define ENTRY_MAX 160

/* Copies the next top-level entry of an allocator config into buf, dropping
 * blanks the way PyTorch's lexer does; commas inside [...] (the
 * roundup_power2_divisions list form) do not split.  *inner_blank is set when
 * a blank sat between two non-blank characters, i.e. entries were probably
 * separated by spaces.  Returns 1 with an entry, 0 at the end, -1 when the
 * entry does not fit. */
static int next_entry(const char **p, char *buf, size_t n, int *inner_blank)
{
    size_t len = 0;
    int depth = 0, blank = 0;
    *inner_blank = 0;
    while (**p == ',')
        (*p)++;
    if (!**p)
        return 0;
    for (; **p && (**p != ',' || depth > 0); (*p)++) {
        char ch = **p;
        if (ch == ' ' || ch == '\t') {
            blank = len > 0;
            continue;
        }
        if (blank)
            *inner_blank = 1;
        blank = 0;
        depth += ch == '[' ? 1 : ch == ']' ? -1 : 0;
        if (len + 1 >= n)
            return -1;
        buf[len++] = ch;
    }
    buf[len] = '\0';
    return 1;
}

static int all_digits(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

/* What PyTorch's caching allocator would refuse in one key's value, or NULL. */
static const char *alloc_value_problem(const char *key, const char *val)
{
    if (!strcmp(key, "expandable_segments"))
        return strcmp(val, "True") && strcmp(val, "False") ? "must be True or False" : NULL;
    if (!strcmp(key, "max_split_size_mb"))
        return !all_digits(val) || strlen(val) > 9 || atol(val) <= 20
                   ? "must be an integer number of MB above 20"
                   : NULL;
    if (!strcmp(key, "garbage_collection_threshold")) {
        char *end;
        double x = strtod(val, &end);
        return *end || !(x > 0.0 && x < 1.0) ? "must be a fraction strictly between 0 and 1"
                                             : NULL;
    }
    if (!strcmp(key, "roundup_power2_divisions")) {
        size_t len = strlen(val);
        long d;
        if (val[0] == '[')
            return val[len - 1] == ']' ? NULL : "list form must be [size:divisions,...]";
        d = all_digits(val) && len <= 9 ? atol(val) : 0;
        return d > 0 && !(d & (d - 1)) ? NULL : "must be a power of 2 or a [size:divisions] list";
    }
    return NULL;
}

/* Why the allocator config is invalid (written to why), or 0 when valid.
 * *expandable is set when it holds expandable_segments:True. */
static int alloc_conf_invalid(const char *conf, char *why, size_t n, int *expandable)
{
    char entry[ENTRY_MAX];
    const char *p = conf;
    int r, inner;
    *expandable = 0;
    while ((r = next_entry(&p, entry, sizeof entry, &inner)) != 0) {
        char *colon = strchr(entry, ':');
        const char *problem;
        const char *hint = inner ? " (separate entries with commas, not spaces)" : "";
        if (r < 0) {
            snprintf(why, n, "an entry is longer than %d characters", ENTRY_MAX - 1);
            return 1;
        }
        if (!colon || colon == entry) {
            snprintf(why, n, "entry \"%s\" is not key:value%s", entry, hint);
            return 1;
        }
        *colon = '\0';
        if (!pk_value_in(alloc_keys, entry)) {
            snprintf(why, n, "unknown key \"%s\"%s", entry, hint);
            return 1;
        }
        if (!colon[1]) {
            snprintf(why, n, "key \"%s\" has no value", entry);
            return 1;
        }
        if ((problem = alloc_value_problem(entry, colon + 1)) != NULL) {
            snprintf(why, n, "%s:%s: %s%s", entry, colon + 1, problem, hint);
            return 1;
        }
        if (!strcmp(entry, "expandable_segments"))
            *expandable = !strcmp(colon + 1, "True");
    }
    return 0;
}

/* conf with every expandable_segments entry removed, into buf (n bytes).
 * Returns 0, or -1 when it does not fit. */
static int alloc_conf_without_expandable(const char *conf, char *buf, size_t n)
{
    char entry[ENTRY_MAX];
    const char *p = conf;
    size_t len = 0;
    int r, inner;
    buf[0] = '\0';
    while ((r = next_entry(&p, entry, sizeof entry, &inner)) != 0) {
        size_t el = strlen(entry);
        if (r < 0)
            return -1;
        if (!strncmp(entry, "expandable_segments:", 20))
            continue;
        if (len + el + 2 > n)
            return -1;
        if (len)
            buf[len++] = ',';
        memcpy(buf + len, entry, el + 1);
        len += el;
    }
    return 0;
}

/* ---- check ------------------------------------------------------------ */

/* Megatron-LM's start-up checks on the launch environment (validate_args). */
static void startup_rules(const mt_ctx_v1 *ctx, mt_sink *out)
{
    const char *cdmc = pk_env(ctx, "CUDA_DEVICE_MAX_CONNECTIONS");
    long tp = pk_arg_int(ctx, "tensor_model_parallel_size", 1);
    long cp = pk_arg_int(ctx, "context_parallel_size", 1);
    int cap = pk_capability(ctx), one = cdmc && !strcmp(cdmc, "1");
    int torch_fsdp = pk_arg_on(ctx, "use_torch_fsdp2"), mfsdp = pk_arg_on(ctx, "use_megatron_fsdp");

    /* Before compute capability 10, TP or CP needs exactly the string "1";
     * FSDP and EP overlap only warn. */
    if ((tp > 1 || cp > 1) && cap > 0 && cap < 100 && !torch_fsdp && !mfsdp &&
        !pk_arg_on(ctx, "overlap_moe_expert_parallel_comm") && !one)
        pk_startup(out, "host.cuda_device_max_connections",
                   CDMC " tensor_model_parallel_size context_parallel_size",
                   "Using tensor model parallelism or context parallelism require setting the "
                   "environment variable CUDA_DEVICE_MAX_CONNECTIONS to 1 (TP %ld, CP %ld on "
                   "compute capability %d.%d, where it is %s%s%s); set "
                   "env.CUDA_DEVICE_MAX_CONNECTIONS=1",
                   tp, cp, cap / 10, cap % 10, cdmc ? "\"" : "unset", cdmc ? cdmc : "",
                   cdmc ? "\"" : "");
    if ((torch_fsdp || mfsdp) && one)
        pk_startup(out, "host.fsdp_cuda_device_max_connections", CDMC,
                   "%s (--use-%s with CUDA_DEVICE_MAX_CONNECTIONS=1); unset it or set it above 1",
                   torch_fsdp || !pk_core_ge(ctx, "0.18")
                       ? "FSDP always requires CUDA_DEVICE_MAX_CONNECTIONS value large than one"
                       : "FSDP requires CUDA_DEVICE_MAX_CONNECTIONS > 1 or unset.",
                   torch_fsdp ? "torch-fsdp2" : "megatron-fsdp");
}

static int host_check(void *state, const mt_ctx_v1 *ctx, mt_sink *out)
{
    const char *alloc = pk_str(ctx->config, ALLOC, "");
    (void)state;

    if (pk_args(ctx))
        startup_rules(ctx, out);

    /* PyTorch's caching allocator refuses a malformed config at the first CUDA
     * allocation: a runtime failure, not one of Megatron's checks. */
    if (*alloc) {
        char why[256];
        int expandable;
        if (alloc_conf_invalid(alloc, why, sizeof why, &expandable))
            pk_runtime(out, "host.alloc_conf_syntax", ALLOC,
                       "runtime: PyTorch's CUDA caching allocator refuses "
                       "PYTORCH_CUDA_ALLOC_CONF=\"%s\": %s; write comma-separated key:value "
                       "entries with keys expandable_segments, max_split_size_mb, "
                       "garbage_collection_threshold, roundup_power2_divisions",
                       alloc, why);
    }
    return 0;
}

/* ---- propose ---------------------------------------------------------- */

static void propose_router_fusion(const mt_ctx_v1 *ctx, mt_sink *out)
{
    if (num_experts(ctx) <= 0 || pk_bool(ctx->config, "moe_router_fusion") ||
        !pk_space_allows(ctx, "moe_router_fusion", "true"))
        return;
    pk_host->sink_candidate(out, "router_fusion", "fused MoE router kernels",
                            MT_WALL_HOST | MT_WALL_COMPUTE, MT_LABEL_TRAINING_EQUIVALENT);
    pk_host->sink_set(out, "moe_router_fusion", "true");
    pk_note(out, "fuses the router's top-k, softmax/sigmoid and aux-loss kernels: fewer small "
                 "launches per MoE layer (calibration C: 529.6 -> 540.0 TFLOP/s/GPU on "
                 "DeepSeek-V3, GB200)");
}

static void propose_cpu_bind(const mt_ctx_v1 *ctx, mt_sink *out)
{
    if (pk_eq(ctx->config, CPU_BIND, "numa") || !pk_space_allows(ctx, CPU_BIND, "numa"))
        return;
    pk_host->sink_candidate(out, "cpu_bind", "CPU/NUMA binding of ranks", MT_WALL_HOST,
                            MT_LABEL_TRAINING_EQUIVALENT);
    pk_host->sink_set(out, CPU_BIND, "numa");
    pk_note(out, "binds each rank to the cores and NUMA node nearest its GPU and NIC, so the "
                 "Python launch thread is not migrated or starved (calibration C: 691.5 -> "
                 "762.1 TFLOP/s/GPU on DeepSeek-V3, GB200, a host-bound platform)");
}

/* Manual GC at each interval the contract declares, else at 0: no collection
 * inside the timing window at all (Megatron still collects at eval/save
 * boundaries), instead of Python's GC pausing random steps on random ranks. */
static void propose_manual_gc_at(const mt_ctx_v1 *ctx, mt_sink *out, const char *interval)
{
    char summary[64];
    long cur = pk_int(ctx->config, "manual_gc_interval", 0), want = atol(interval);
    int on = pk_bool(ctx->config, "manual_gc");

    if (on && want == cur)
        return;
    snprintf(summary, sizeof summary, "manual GC, interval %s", interval);
    pk_host->sink_candidate(out, "manual_gc", summary, MT_WALL_HOST,
                            MT_LABEL_TRAINING_EQUIVALENT);
    if (!on)
        pk_host->sink_set(out, "manual_gc", "true");
    if (want != cur)
        pk_host->sink_set(out, "manual_gc_interval", interval);
    if (want == 0)
        pk_note(out, "Python's GC otherwise fires at random steps, on different ranks at "
                     "different times, and every other rank waits for the slowest; interval 0 "
                     "collects only at eval/save boundaries, outside the timing window");
    else
        pk_note(out, "Python's GC otherwise fires at random steps on different ranks; "
                     "collecting every %s steps on all ranks at once aligns the pauses",
                interval);
}

static void propose_manual_gc(const mt_ctx_v1 *ctx, mt_sink *out)
{
    const char *p = pk_get(ctx->contract, "space.manual_gc_interval");
    char val[16];

    if (!pk_space_allows(ctx, "manual_gc", "true"))
        return;
    if (!p) {
        propose_manual_gc_at(ctx, out, "0");
        return;
    }
    while (*p) {
        size_t len = strcspn(p, "\n");
        if (len && len < sizeof val) {
            memcpy(val, p, len);
            val[len] = '\0';
            if (all_digits(val))
                propose_manual_gc_at(ctx, out, val);
        }
        p += len + (p[len] == '\n');
    }
}

static void propose_connections(const mt_ctx_v1 *ctx, mt_sink *out)
{
    const char *cdmc = pk_str(ctx->config, CDMC, "");
    long conns = cdmc_value(cdmc);
    int ep_overlap = pk_bool(ctx->config, "overlap_moe_expert_parallel_comm");

    if (conns < 0)
        return;
    if (before_blackwell(ctx) && tp_or_cp(ctx) && !ep_overlap && strcmp(cdmc, "1") &&
        pk_space_allows(ctx, CDMC, "1")) {
        pk_host->sink_candidate(out, "device_max_connections", "CUDA_DEVICE_MAX_CONNECTIONS=1",
                                MT_WALL_HOST | MT_WALL_COMM, MT_LABEL_TRAINING_EQUIVALENT);
        pk_host->sink_set(out, CDMC, "1");
        pk_note(out, "TP/CP before Blackwell: one hardware queue keeps TP/CP communication "
                     "kernels launched ahead of the GEMMs they overlap (Megatron requires it)");
    }
    if (ep_overlap && conns < 32 && pk_space_allows(ctx, CDMC, "32")) {
        pk_host->sink_candidate(out, "device_max_connections", "CUDA_DEVICE_MAX_CONNECTIONS=32",
                                MT_WALL_HOST | MT_WALL_COMM, MT_LABEL_TRAINING_EQUIVALENT);
        pk_host->sink_set(out, CDMC, "32");
        pk_note(out, "EP overlap runs one micro-batch's all-to-all beside the other's expert "
                     "GEMMs; more hardware queues (it is %s; CUDA's maximum is 32) let them run "
                     "concurrently, as Megatron suggests",
                 *cdmc ? cdmc : "unset, i.e. 8");
    }
}

static void propose_alloc_conf(const mt_ctx_v1 *ctx, mt_sink *out)
{
    const char *alloc = pk_str(ctx->config, ALLOC, "");
    char why[256], next[512];
    int expandable;

    if (graphs_on(ctx) || alloc_conf_invalid(alloc, why, sizeof why, &expandable) ||
        expandable || strstr(alloc, "expandable_segments"))
        return;
    if ((size_t)snprintf(next, sizeof next, "%s%sexpandable_segments:True", alloc,
                         *alloc ? "," : "") >= sizeof next ||
        !pk_space_allows(ctx, ALLOC, next))
        return;
    pk_host->sink_candidate(out, "alloc_conf", "expandable segments", MT_WALL_MEMORY,
                            MT_LABEL_TRAINING_EQUIVALENT);
    pk_host->sink_set(out, ALLOC, next);
    pk_note(out, "grows allocator segments in place instead of carving fixed blocks: MoE "
                 "token counts change shape every step, and the fragmentation they leave "
                 "costs reserved memory (not with CUDA graphs, which Megatron refuses)");
}

static int host_propose(void *state, const mt_ctx_v1 *ctx, mt_sink *out)
{
    const char *wall = pk_get(ctx->evidence, "wall");
    int memory_bound = wall && !strncmp(wall, "mem", 3);
    (void)state;

    if (memory_bound)
        propose_alloc_conf(ctx, out);
    /* Blackwell systems turn host-bound first (calibration C), so binding
     * leads there. */
    if (pk_eq(ctx->hardware, "arch", "blackwell")) {
        propose_cpu_bind(ctx, out);
        propose_router_fusion(ctx, out);
    } else {
        propose_router_fusion(ctx, out);
        propose_cpu_bind(ctx, out);
    }
    propose_manual_gc(ctx, out);
    propose_connections(ctx, out);
    if (!memory_bound)
        propose_alloc_conf(ctx, out);
    return 0;
}

/* ---- repair ----------------------------------------------------------- */

static int changed(const mt_ctx_v1 *ctx, const char *knob)
{
    return pk_get(ctx->changed, knob) != NULL;
}

/* Only violations the candidate caused are repaired: fixing one that was
 * already there would change two things in one A/B. */
static int host_repair(void *state, const mt_ctx_v1 *ctx, mt_sink *out)
{
    const mt_kv *c = ctx->config;
    const char *cdmc = pk_str(c, CDMC, ""), *alloc = pk_str(c, ALLOC, "");
    int ep_overlap = pk_bool(c, "overlap_moe_expert_parallel_comm");
    int layout = changed(ctx, "tensor_model_parallel_size") ||
                 changed(ctx, "context_parallel_size") ||
                 changed(ctx, "overlap_moe_expert_parallel_comm");
    (void)state;

    if (layout && !changed(ctx, CDMC)) {
        if (!ep_overlap && before_blackwell(ctx) && tp_or_cp(ctx) && strcmp(cdmc, "1")) {
            pk_host->sink_set(out, CDMC, "1");
            pk_note(out, "CUDA_DEVICE_MAX_CONNECTIONS %s -> 1: TP %ld / CP %ld on %s without EP "
                         "overlap, and Megatron requires 1 before Blackwell",
                    *cdmc ? cdmc : "unset", pk_int(c, "tensor_model_parallel_size", 1),
                    pk_int(c, "context_parallel_size", 1), pk_str(ctx->hardware, "gpu", "?"));
        }
    }

    if (*alloc && changed(ctx, "cuda_graph_impl") && !changed(ctx, ALLOC) && graphs_on(ctx)) {
        char why[256], next[512];
        int expandable;
        if (!alloc_conf_invalid(alloc, why, sizeof why, &expandable) && expandable &&
            !alloc_conf_without_expandable(alloc, next, sizeof next)) {
            pk_host->sink_set(out, ALLOC, next);
            pk_note(out, "expandable_segments:True dropped from PYTORCH_CUDA_ALLOC_CONF: CUDA "
                         "graphs are now on (cuda_graph_impl=%s) and Megatron refuses both",
                    pk_str(c, "cuda_graph_impl", "?"));
        }
    }

    return 0;
}

/* ---- render ----------------------------------------------------------- */

static int host_render(void *state, const mt_ctx_v1 *ctx, uint32_t d, mt_sink *out)
{
    const mt_kv *c = ctx->config;
    const char *cdmc = pk_str(c, CDMC, ""), *alloc = pk_str(c, ALLOC, "");
    const char *interval = pk_str(c, "manual_gc_interval", "0");
    (void)state;

    if (pk_bool(c, "manual_gc"))
        pk_render_bool(out, d, "manual_gc", "train", NULL, 1);
    if (pk_int(c, "manual_gc_interval", 0) > 0)
        pk_render(out, d, "manual_gc_interval", "train", NULL, interval);
    if (pk_bool(c, "moe_router_fusion"))
        pk_render_bool(out, d, "moe_router_fusion", "model", NULL, 1);
    if (*cdmc)
        pk_host->sink_env(out, "CUDA_DEVICE_MAX_CONNECTIONS", cdmc);
    if (*alloc)
        pk_host->sink_env(out, "PYTORCH_CUDA_ALLOC_CONF", alloc);
    if (pk_eq(c, CPU_BIND, "numa"))
        pk_host->sink_launch(out, "cpu_bind", "numa");
    return 0;
}

/* ---- verify ----------------------------------------------------------- */

/* Flags read once at start-up: the arguments dump is enough. */
static void verify_arg(const mt_ctx_v1 *ctx, mt_sink *out, const char *knob, const char *want)
{
    char key[96];
    const char *got;
    snprintf(key, sizeof key, "args.%s", knob);
    got = pk_get(ctx->evidence, key);
    if (!got)
        pk_verdict(out, knob, MT_VERDICT_UNKNOWN,
                   "no arguments dump in the evidence; cannot tell whether %s = %s was used",
                   knob, want);
    else if (pk_same_value(want, got))
        pk_verdict(out, knob, MT_VERDICT_APPLIED, "arguments dump: %s = %s", knob, got);
    else
        pk_verdict(out, knob, MT_VERDICT_NOT_APPLIED,
                   "arguments dump: %s = %s, but %s was requested", knob, got, want);
}

/* Environment and launcher settings as the worker recorded them for the run
 * (evidence "env.NAME", "launch.KEY"). */
static void verify_recorded(const mt_ctx_v1 *ctx, mt_sink *out, const char *knob,
                            const char *key, const char *want)
{
    const char *got = pk_get(ctx->evidence, key);
    if (!got)
        pk_verdict(out, knob, MT_VERDICT_UNKNOWN,
                   "the worker recorded no %s for this run; cannot tell whether %s was used",
                   key, want);
    else if (!strcmp(got, want))
        pk_verdict(out, knob, MT_VERDICT_APPLIED, "the run was launched with %s = %s", key, got);
    else
        pk_verdict(out, knob, MT_VERDICT_NOT_APPLIED,
                   "the run was launched with %s = \"%s\", but \"%s\" was requested", key, got,
                   want);
}

static int host_verify(void *state, const mt_ctx_v1 *ctx, mt_sink *out)
{
    const mt_kv *c = ctx->config;
    const char *cdmc = pk_str(c, CDMC, ""), *alloc = pk_str(c, ALLOC, "");
    (void)state;

    if (pk_bool(c, "manual_gc"))
        verify_arg(ctx, out, "manual_gc", "true");
    if (pk_int(c, "manual_gc_interval", 0) != 0)
        verify_arg(ctx, out, "manual_gc_interval", pk_str(c, "manual_gc_interval", "0"));
    if (pk_bool(c, "moe_router_fusion"))
        verify_arg(ctx, out, "moe_router_fusion", "true");
    if (*cdmc)
        verify_recorded(ctx, out, CDMC, CDMC, cdmc);
    if (*alloc)
        verify_recorded(ctx, out, ALLOC, ALLOC, alloc);
    if (pk_eq(c, CPU_BIND, "numa"))
        verify_recorded(ctx, out, CPU_BIND, "launch.cpu_bind", "numa");
    return 0;
}

MT_PLUGIN_EXPORT const mt_plugin_v1 moetune_plugin_v1 = {
    .struct_size = sizeof(mt_plugin_v1),
    .abi_version = MT_PLUGIN_ABI_VERSION,
    .name = "host",
    .version = "1.0.0",
    .description = "manual GC, CPU/NUMA binding, router fusion, launch environment",
    .knobs = knobs,
    .n_knobs = sizeof knobs / sizeof knobs[0],
    .variables = variables,
    .n_variables = sizeof variables / sizeof variables[0],
    .init = pk_init,
    .propose = host_propose,
    .repair = host_repair,
    .check = host_check,
    .render = host_render,
    .verify = host_verify,
};
