/*
 * moetune/plugin.h - the moetune candidate plugin ABI, version 1.
 *
 * STATUS: v1 is frozen.  Nothing declared here changes: not a struct's
 * layout, a symbol, a constant, an enum value, or a rule this comment
 * states.  A later version adds a new symbol and new structs beside v1
 * (moetune_plugin_v2, mt_plugin_v2, mt_host_v2, ...) and never edits v1's;
 * the host keeps loading v1 plugins unchanged (see "Loading").
 *
 * This header is self-contained: it uses only <stddef.h> and <stdint.h>. A
 * plugin copies or includes it and never links against the host.
 *
 * A plugin is a shared object exporting one const object:
 *
 *     const mt_plugin_v1 moetune_plugin_v1 = { sizeof(mt_plugin_v1),
 *                                              MT_PLUGIN_ABI_VERSION, ... };
 *
 * Knob model.  A config is a map from canonical knob names to string values.
 * Canonical names are Megatron-LM flag names without the leading dashes, with
 * dashes turned into underscores ("moe_token_dispatcher_type"); environment
 * variables that act as knobs are "env.NAME" ("env.CUDA_DEVICE_MAX_CONNECTIONS");
 * launcher settings are "launcher.NAME" ("launcher.cpu_bind").  Values:
 * integers in decimal, booleans "true"/"false", enums as their Megatron
 * spelling, module lists as space-separated names in canonical order (the order
 * of the knob's value list), the empty string for an empty list.
 *
 * Loading.  The host dlopens the file (RTLD_NOW | RTLD_LOCAL) and looks up
 * the descriptor symbols of every ABI version it knows, newest first
 * ("moetune_plugin_v1" is the only one so far); the first one the file
 * exports is checked by that version's rules and translated into the
 * host's current form by a small adapter, the way NCCL loads its net and
 * tuner plugins.  A v1 descriptor must have abi_version 1 and a
 * struct_size covering every v1 field; its knob, extension and variable
 * tables are checked as "Struct growth" says.  A file that fails any check
 * is reported (file named) and left out; the others load.
 *
 * Ownership and lifetime.
 *   - Every pointer the host passes (host table, context, key/value views,
 *     sinks, strings returned by accessors) is valid only for the duration of
 *     the call it was passed to, except the host table given to init, which
 *     stays valid until fini returns.
 *   - Plugins allocate nothing the host must free: results go through the
 *     sink builders, which copy their arguments before returning.
 *   - The descriptor and everything it points to (names, knob tables) must be
 *     static and live as long as the shared object is loaded.
 *
 * Calling rules.
 *   - The host serializes calls into one plugin: no two calls into the same
 *     plugin run concurrently.  Different plugins may be called concurrently.
 *   - Every call is deterministic: the same inputs give the same outputs, in
 *     the same order.  Resume depends on it; do not use clocks, randomness or
 *     global mutable state that outlives a call, other than what init sets up.
 *   - Entry points return 0 on success and a negative value on failure.  On
 *     failure, say why through the sink's error builder.
 *
 * Containment.  A plugin runs in the host's process, under a guard:
 *   - A fatal signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGSYS)
 *     during a call, including the file's constructors while it is opened,
 *     makes the host print the plugin, its file and the call, then die of
 *     the signal.
 *   - Each call has a time limit, the same for every call and counted per
 *     call (not summed): init, fini, each entry point, and the file's
 *     constructors while it is opened.  The default is 60 s; the host's
 *     --plugin-timeout S (any command) sets it, else MOETUNE_PLUGIN_TIMEOUT
 *     (seconds; a value that is not a number >= 0 is warned about and the
 *     default used); 0 means no limit.  A call past it ends the host with
 *     exit 1, the plugin, the call and the limit named.
 *   - exit() inside a call ends the host with exit 1, the plugin and the call
 *     named, whatever status the plugin gave.  (_exit() cannot be caught.)
 *   - Output is capped per call: at most MT_PLUGIN_MAX_CANDIDATES candidates
 *     from one propose(), and at most MT_PLUGIN_MAX_OUTPUT_BYTES from one
 *     call of any entry point, counting every string passed to a sink
 *     builder plus MT_PLUGIN_ITEM_BYTES per builder call.  Past a cap every
 *     builder returns -E2BIG (a negative value) and stores nothing, and the
 *     call is reported as failed, naming the cap; what came before it is
 *     kept.  The caps are per call: the next call starts from zero.
 *   None of this is a sandbox: a plugin has the host's privileges, which is
 *   why the host loads only files that it has checked (see the README's
 *   security section).
 *
 * Struct growth.  Every struct that crosses the boundary starts with its own
 * size.  A reader must only read the fields the writer's struct_size covers;
 * use MT_HAS_FIELD() for the fields v1 hosts gained after the first ones
 * (mt_host_v1.sink_violation_class, mt_ctx_v1.args), which older v1 hosts
 * lack.  Those were the last: with v1 frozen, a new field or service comes
 * in a new version's struct.  The knob, extension and variable tables are
 * arrays, so their element size is fixed per ABI version: the host refuses
 * a v1 table whose entries are not exactly the v1 size (a larger entry
 * would need a new table in a v2 descriptor).
 *
 * Versions.  A plugin's own version (mt_plugin_v1.version) should be
 * dotted decimal numbers, "1.4.0".  The host compares versions number by
 * number from the left, a missing number counting as 0 ("1.4" equals
 * "1.4.0", "1.10" is newer than "1.9"), and a NULL or empty version is 0.
 * Keep to digits and dots: other characters between numbers only separate
 * them ("1.4.0-rc1" compares as 1.4.0.1, newer than 1.4.0), and a version
 * that does not start with a digit reads as 0 first ("v1.2" as 0.1.2).
 * A contract names the plugins it needs in launch.plugins, each "NAME" or
 * "NAME >= VERSION" (a plugin name, a version of digits and dots):
 *     plugins = ["flexdemo >= 1.0.0"];
 * The host refuses the contract (exit 2, naming the plugin and why) unless
 * a plugin of that name is loaded, enabled (its init succeeded) and, with
 * a VERSION, its own version compares >= VERSION.  The same comparison
 * reads the stack versions of the contract view ("stack.megatron_core"
 * >= "0.18").
 */
#ifndef MOETUNE_PLUGIN_H
#define MOETUNE_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a v1 descriptor carries in abi_version, and the symbol it is
 * exported under.  Frozen like the rest: a later version defines its own
 * constants beside these. */
#define MT_PLUGIN_ABI_VERSION 1
#define MT_PLUGIN_SYMBOL_V1 "moetune_plugin_v1"

/* Output caps per call (see "Containment" above). */
#define MT_PLUGIN_MAX_CANDIDATES 1000
#define MT_PLUGIN_MAX_OUTPUT_BYTES (4u * 1024u * 1024u)
#define MT_PLUGIN_ITEM_BYTES 64u

/* True when a struct whose first member is struct_size covers `field`. */
#define MT_HAS_FIELD(ptr, type, field)                                         \
    ((ptr)->struct_size >= offsetof(type, field) + sizeof(((type *)0)->field))

#if defined(__GNUC__)
#define MT_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define MT_PLUGIN_EXPORT
#endif

/* The walls a candidate attacks (bit set). */
enum mt_wall {
    MT_WALL_MEMORY = 1u << 0,
    MT_WALL_COMM = 1u << 1,
    MT_WALL_HOST = 1u << 2,
    MT_WALL_COMPUTE = 1u << 3
};

/* Whether results obtained with a candidate stand for real training. */
enum mt_label {
    MT_LABEL_TRAINING_EQUIVALENT = 1, /* same math as training           */
    MT_LABEL_BENCHMARK_ONLY = 2       /* e.g. forced balanced routing    */
};

/* The command-line dialect a config is rendered into. */
enum mt_dialect {
    MT_DIALECT_MLM = 0,   /* Megatron-LM flags: --tensor-model-parallel-size 2 */
    MT_DIALECT_BRIDGE = 1 /* Megatron-Bridge overrides: model.x=..., ddp.x=...  */
};

/* When a violated rule would stop a real run.
 *   STARTUP  the training program refuses the config before it trains: its
 *            argument parser, argument validation or config constructors
 *            (what Megatron's parse_args, validate_args and TransformerConfig
 *            enforce).
 *   RUNTIME  the program starts, and the config fails later, on the GPU or
 *            in a library: a precision recipe the architecture lacks, a
 *            dispatcher backend the hardware or the installed packages
 *            cannot run, memory. */
enum mt_rule_class {
    MT_RULE_STARTUP = 1,
    MT_RULE_RUNTIME = 2
};

/* The verdict of verify() for one knob. */
enum mt_verdict {
    MT_VERDICT_UNKNOWN = 0,    /* evidence cannot tell              */
    MT_VERDICT_APPLIED = 1,    /* evidence shows the knob took effect */
    MT_VERDICT_NOT_APPLIED = 2 /* evidence shows it did not          */
};

/* How a knob reaches the training program. */
enum mt_knob_kind {
    MT_KNOB_FLAG = 0,    /* command-line flag / Bridge override */
    MT_KNOB_ENV = 1,     /* environment variable ("env.NAME")   */
    MT_KNOB_LAUNCHER = 2 /* launcher setting ("launcher.NAME")  */
};

/* The type of a knob's values; the host checks it before any plugin sees a
 * config. */
enum mt_knob_type {
    MT_TYPE_INT = 0,    /* decimal integer >= 0               */
    MT_TYPE_BOOL = 1,   /* "true" / "false"                   */
    MT_TYPE_ENUM = 2,   /* one of values[]                    */
    MT_TYPE_LIST = 3,   /* space-separated subset of values[] */
    MT_TYPE_STRING = 4  /* free text, checked by the owner    */
};

/* A knob a plugin owns.  values is NULL-terminated (NULL for INT, BOOL,
 * STRING).  default_value is the framework's default: the value a config has
 * when neither the contract nor a candidate sets it. */
typedef struct mt_knob_v1 {
    uint32_t struct_size;
    uint32_t kind; /* enum mt_knob_kind */
    uint32_t type; /* enum mt_knob_type */
    const char *name;
    const char *const *values;
    const char *default_value;
    const char *help;
} mt_knob_v1;

/* New values a plugin adds to a knob another plugin owns.  The extender then
 * answers legality, rendering and verification for exactly those values; the
 * owner skips a value that is not in its own list. */
typedef struct mt_extension_v1 {
    uint32_t struct_size;
    const char *knob;
    const char *const *values; /* NULL-terminated, at least one */
} mt_extension_v1;

/* A variable: a named group of coupled knobs one candidate changes together
 * ("mbs" = micro_batch_size with gradient accumulation following). */
typedef struct mt_variable_v1 {
    uint32_t struct_size;
    const char *name;
    const char *knobs; /* space-separated knob names */
    uint32_t walls;    /* enum mt_wall bits          */
} mt_variable_v1;

/* A read-only key/value view owned by the host. */
typedef struct mt_kv mt_kv;
/* An output builder owned by the host; which builders a sink accepts depends
 * on the call it was passed to (see mt_plugin_v1). */
typedef struct mt_sink mt_sink;

/* Log levels for mt_host_v1.log. */
enum mt_log_level { MT_LOG_DEBUG = 0, MT_LOG_INFO = 1, MT_LOG_WARN = 2, MT_LOG_ERROR = 3 };

/* Services the host hands to a plugin at init.  Frozen as it is here: new
 * services come in a later version's host table (see "Struct growth"). */
typedef struct mt_host_v1 {
    uint32_t struct_size;
    uint32_t abi_version;

    /* Logging: msg is a complete line without trailing newline. */
    void (*log)(int level, const char *plugin, const char *msg);

    /* Key/value accessors.  get returns NULL when the key is absent.
     * Returned strings live as long as the view, i.e. for the call. */
    const char *(*kv_get)(const mt_kv *kv, const char *key);
    size_t (*kv_count)(const mt_kv *kv);
    /* Entries in ascending key order; returns 0, or -1 when i is out of range. */
    int (*kv_entry)(const mt_kv *kv, size_t i, const char **key, const char **value);

    /* propose(): start a new candidate, then set its knobs with sink_set and
     * explain it with sink_note.  walls: enum mt_wall bits; label: enum
     * mt_label. */
    int (*sink_candidate)(mt_sink *s, const char *variable, const char *summary,
                          uint32_t walls, uint32_t label);
    /* propose() / repair(): set a knob of the current candidate or repair. */
    int (*sink_set)(mt_sink *s, const char *knob, const char *value);
    /* propose() / repair(): a why-line for the current candidate or repair. */
    int (*sink_note)(mt_sink *s, const char *text);

    /* check(): one violated rule.  rule is a stable id ("ep_overlap.needs_ep"),
     * knobs the space-separated knobs involved (the first one is the knob
     * whose owner is asked to repair), message says what is wrong and how to
     * fix it. */
    int (*sink_violation)(mt_sink *s, const char *rule, const char *knobs,
                          const char *message);

    /* render(): one argv token, one environment variable, one launcher
     * setting (e.g. "cpu_bind" = "numa"). */
    int (*sink_arg)(mt_sink *s, const char *token);
    int (*sink_env)(mt_sink *s, const char *name, const char *value);
    int (*sink_launch)(mt_sink *s, const char *key, const char *value);

    /* verify(): a verdict for one knob (enum mt_verdict) with the evidence
     * (the log line or trace fact that decided it, or why nothing can). */
    int (*sink_verdict)(mt_sink *s, const char *knob, uint32_t verdict,
                        const char *evidence);

    /* Any call: the reason for a failure. */
    int (*sink_error)(mt_sink *s, const char *message);

    /* check(): one violated rule of a class (enum mt_rule_class).
     * sink_violation is sink_violation_class with MT_RULE_STARTUP.  Added
     * after the first v1 hosts: test with MT_HAS_FIELD(host, mt_host_v1,
     * sink_violation_class) before calling. */
    int (*sink_violation_class)(mt_sink *s, const char *rule, const char *knobs,
                                const char *message, uint32_t rule_class);
} mt_host_v1;

/* Everything a call may look at.
 *   config    the full config: every declared knob, defaults filled in, and
 *             the base model/batch settings the core owns ("num_layers",
 *             "global_batch_size", ...).
 *   hardware  "gpu" (H100, H200, B200, GB200, GB300), "arch" (hopper,
 *             blackwell), "gpus_per_node", "nodes", "world_size",
 *             "nvlink_domain", "hbm_gb".
 *   model     the model shape: "num_layers", "hidden_size",
 *             "num_attention_heads", "num_query_groups", "num_experts",
 *             "moe_router_topk", "multi_latent_attention", ...
 *   contract  contract settings: "routing" (forced|natural), "drop_and_pad"
 *             (true|false), "labels" (space-separated allowed labels),
 *             "dialect" (mlm|bridge: the command-line dialect the contract
 *             renders in), "space.<knob>" (the declared values, one per
 *             line: a value may contain spaces, e.g. a module list, or '|',
 *             a layout), and the stack keys below.
 *   evidence  what is known about the latest run (may be empty); the keys
 *             are listed below.
 *   changed   repair() only: the knobs the candidate changed, with their new
 *             values; NULL in other calls.
 *   args      check() only: the argument namespace the training program's
 *             own parser gives for the config as rendered in the contract's
 *             stack dialect (one key per dest, its defaults filled in, a
 *             None value absent; booleans "true"/"false", lists
 *             space-joined, numbers as written), plus "env.NAME" for every
 *             variable of the run's environment.  Start-up rules read this:
 *             it is what upstream's validation reads.  NULL in other calls
 *             and when the command line does not parse (the host then
 *             reports the parser's error itself).  Added after the first v1
 *             hosts: test with MT_HAS_FIELD(ctx, mt_ctx_v1, args).
 * Stack keys of the contract view: "stack.<key>" for every entry of the
 * contract's stack group, as declared ("stack.megatron_lm",
 * "stack.transformer_engine", "stack.pytorch", "stack.megatron_bridge",
 * "stack.container", ...; absent when not declared), and two the host sets:
 *   stack.dialect        the known Megatron-LM version the stack is judged
 *                        by ("core_r0.15.0", "core_v0.18.0", "main"): the
 *                        declared stack.dialect, else stack.megatron_lm
 *   stack.megatron_core  that version's Megatron-Core package version
 *                        ("0.18.0"), what start-up rules compare against
 * Versions compare as "Versions" above says.  The hardware view also holds
 * "compute_capability" ("9.0", "10.0", "10.3").
 *
 * Evidence keys (verify() reads them; each is absent when unknown):
 *   args.<name>              every entry of the training program's
 *                            arguments dump (or Megatron-Bridge's
 *                            configuration block), as printed, except that
 *                            an enum is its member name ("AttnBackend.auto"
 *                            -> "auto") and a list of enums its names
 *                            separated by spaces
 *   log.world                the "using world size: ..." line
 *   log.dispatcher_fallback  the first dispatcher "... Falling back to
 *                            alltoall." line
 *   log.import_error         the first ImportError naming DeepEP / HybridEP
 *   log.cuda_graph_capture   the most telling CUDA graph capture line (TE,
 *                            local or full iteration: time spent > graphs
 *                            created > full-iteration capture > start)
 *   log.oom, log.nan         the first out-of-memory / NaN line, when the
 *                            run had one (log.nan: a NaN error line, else
 *                            "iteration N: ..." from the iteration lines)
 *   log.nccl_error           the first NCCL error line
 *   log.infra, log.watchdog  the first lost node / Xid / IB line; the first
 *                            collective watchdog line
 *   env.<NAME>               an environment variable the run was launched
 *                            with
 *   launch.<key>             a launcher setting the run was launched with
 *   wall                     the dominant wall of the latest profile
 *                            ("memory", "communication", "host",
 *                            "compute"), when candidates follow a profile
 * and, from the Kineto trace of a profiled run:
 *   trace.available          "true" when a profiled run's trace was
 *                            analysed; the trace keys below come only with
 *                            it
 *   trace.wall               the dominant wall the profile shows (same
 *                            names as "wall")
 *   trace.fp8_gemm           count of FP8 GEMM kernels
 *   trace.mxfp8_gemm         count of MXFP8 (block-scaled) GEMM kernels
 *   trace.nvfp4_gemm         count of NVFP4 GEMM kernels
 *   trace.deepep_kernels     count of DeepEP dispatch/combine kernels
 *   trace.hybridep_kernels   count of HybridEP dispatch/combine kernels
 *   trace.alltoall_kernels   count of NCCL all-to-all / send-recv kernels
 *   trace.graph_launches     count of CUDA graph launches
 *   trace.kernel_launches    count of individual kernel launches (runtime
 *                            API)
 *   trace.comm_hidden_fraction  hidden / all communication time (interval
 *                            unions over the devices), from 0 to 1
 *   trace.steps              steps the trace marks (ProfilerStep#N ranges)
 *   trace.graph_steps        ... of which hold a graph launch
 *   trace.graph_first_step, trace.graph_last_step  the first and last of
 *                            those
 *   trace.launches_per_graph_step, trace.launches_per_eager_step
 *                            kernel launches per step with / without graphs
 * Counts are decimal integers, fractions decimal numbers.
 */
typedef struct mt_ctx_v1 {
    uint32_t struct_size;
    const mt_kv *config;
    const mt_kv *hardware;
    const mt_kv *model;
    const mt_kv *contract;
    const mt_kv *evidence;
    const mt_kv *changed;
    const mt_kv *args;
} mt_ctx_v1;

/* The plugin descriptor, exported as `moetune_plugin_v1`. */
typedef struct mt_plugin_v1 {
    uint32_t struct_size;  /* sizeof(mt_plugin_v1) when built */
    uint32_t abi_version;  /* MT_PLUGIN_ABI_VERSION            */
    const char *name;      /* unique, [a-z0-9_-]+              */
    const char *version;   /* the plugin's own version         */
    const char *description;

    const mt_knob_v1 *knobs; /* knobs owned */
    uint32_t n_knobs;
    const mt_extension_v1 *extends; /* values added to others' knobs */
    uint32_t n_extends;
    const mt_variable_v1 *variables; /* what candidates change */
    uint32_t n_variables;

    /* Called once after loading.  *state is handed back to every call.  On
     * failure return < 0 and say why with host->sink_error(err, ...); the
     * plugin is then disabled and fini is not called.  May be NULL. */
    int (*init)(const mt_host_v1 *host, mt_sink *err, void **state);
    /* Called once before unloading.  May be NULL. */
    void (*fini)(void *state);

    /* Candidates from ctx->config and ctx->evidence, most promising first in
     * the order the MoE workflow prescribes.  Each candidate changes exactly
     * one declared variable.  Sink: candidate, set, note, error. */
    int (*propose)(void *state, const mt_ctx_v1 *ctx, mt_sink *out);

    /* ctx->config is illegal because of the change in ctx->changed, made by
     * another plugin.  Emit the minimal change to this plugin's own knobs
     * that makes its rules hold again (sink set/note), or nothing when no
     * change of its knobs can.  Sink: set, note, error.  May be NULL. */
    int (*repair)(void *state, const mt_ctx_v1 *ctx, mt_sink *out);

    /* Every rule violated by ctx->config that touches this plugin's knobs
     * (or the values it extends).  Sink: violation, error. */
    int (*check)(void *state, const mt_ctx_v1 *ctx, mt_sink *out);

    /* This plugin's knobs as argv tokens, environment and launcher settings
     * for the dialect (enum mt_dialect).  Sink: arg, env, launch, error. */
    int (*render)(void *state, const mt_ctx_v1 *ctx, uint32_t dialect, mt_sink *out);

    /* Whether this plugin's knobs really took effect, from ctx->evidence.
     * One verdict per knob that differs from its default.  Sink: verdict,
     * error.  May be NULL (every knob is then "unknown"). */
    int (*verify)(void *state, const mt_ctx_v1 *ctx, mt_sink *out);
} mt_plugin_v1;

#ifdef __cplusplus
}
#endif
#endif /* MOETUNE_PLUGIN_H */
