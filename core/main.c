/*
 * main.c - the `moetune` command-line front end.
 *
 * Exit codes: 0 success, 1 a failure of moetune or a plugin, 2 bad input
 * (contract, knob, value, illegal combination), 64 usage; tune and bisect:
 * 75 another process owns the directory; tune: 128 + N stopped by signal N
 * (SIGTERM, SIGINT).  README.md lists each command's.
 */
#include "audit.h"
#include "callguard.h"
#include "dirlock.h"
#include "config.h"
#include "contract.h"
#include "evaluate.h"
#include "import.h"
#include "memory.h"
#include "model.h"
#include "registry.h"
#include "render.h"
#include "simcalib.h"
#include "store.h"
#include "bisect.h"
#include "recipe.h"
#include "engine.h"
#include "prepare.h"
#include "keys.h"
#include "rankexec.h"
#include "worker.h"
#include "profile.h"
#include "trace.h"
#include "measure.h"
#include "stats.h"
#include <cjson/cJSON.h>
#include <unistd.h>

#include <limits.h>
#include <errno.h>
#include <time.h>
#include <sys/wait.h>
#include <spawn.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef MOETUNE_VERSION
#define MOETUNE_VERSION "0.1.0"
#endif
#ifndef MOETUNE_SOURCE_DIR
#define MOETUNE_SOURCE_DIR "."
#endif

#define EXIT_BAD_INPUT 2
/* check: the contract is legal but its base does not fit by the estimate
 * (the code `tune` uses when nothing fits) */
#define EXIT_NO_FIT 4
/* tune: a validated winner that is not ablated (the budget left at least one
 * accepted change without its leave-one-out A/B) */
#define EXIT_NOT_ABLATED 5
#define EXIT_USAGE 64
/* tune, bisect: another moetune process owns the directory (core/dirlock.h);
 * sysexits' EX_TEMPFAIL: try again once it has ended */
#define EXIT_BUSY 75

/* A command's numeric option value, whole and in range, or a usage error
 * naming the command, the option and the value (0, or -1 after printing). */
static int opt_double(const char *cmd, const char *opt, const char *v, double min, int min_open,
                      double *out)
{
    char *end;
    double x;
    errno = 0;
    x = strtod(v, &end);
    if (end == v || *end || errno || !isfinite(x) || x < min || (min_open && x == min)) {
        fprintf(stderr, "moetune %s: %s %s: write a number %s %g\n", cmd, opt, v,
                min_open ? ">" : ">=", min);
        return -1;
    }
    *out = x;
    return 0;
}

static int opt_int(const char *cmd, const char *opt, const char *v, long min, int *out)
{
    char *end;
    long x;
    errno = 0;
    x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < min || x > INT_MAX) {
        fprintf(stderr, "moetune %s: %s %s: write a whole number >= %ld\n", cmd, opt, v, min);
        return -1;
    }
    *out = (int)x;
    return 0;
}

static int opt_u64(const char *cmd, const char *opt, const char *v, unsigned long long *out)
{
    char *end;
    unsigned long long x;
    errno = 0;
    x = strtoull(v, &end, 10);
    if (end == v || *end || errno || v[0] == '-') {
        fprintf(stderr, "moetune %s: %s %s: write a whole number >= 0\n", cmd, opt, v);
        return -1;
    }
    *out = x;
    return 0;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: moetune <command> [options]\n"
            "\n"
            "  plugins [CONTRACT]            list loaded plugins, their knobs and load errors\n"
            "  check CONTRACT                validate a contract; print meshes and memory (exit 0\n"
            "                                legal and the base fits, 2 not legal, 4 legal but\n"
            "                                the base does not fit by the estimate)\n"
            "  check --startup-only CONTRACT  only what the training program's own start-up\n"
            "                                checks say of the base config (exit 0 legal, 2 not)\n"
            "  import [--stack NAME=VERSION]... [--hardware gpu=G,gpus_per_node=P,nodes=N]\n"
            "       [--env NAME=VALUE]... [--dialect mlm|bridge] [--backend sim|command]\n"
            "       [--name NAME] [-o FILE] (-- ARGV... | --argv FILE)\n"
            "                                a contract from an existing Megatron-LM command line\n"
            "  render CONTRACT [--set knob=value]... [--dialect mlm|bridge]\n"
            "       [--argv-only | --format env|sh|launch]\n"
            "                                the launch command for the base config (+ sets):\n"
            "                                argv one word a line, then the environment and\n"
            "                                launcher settings; --argv-only the argv alone;\n"
            "                                --format env NAME=value lines (sh-quoted), sh a\n"
            "                                runnable script (exports, then the command)\n"
            "  candidates CONTRACT [--wall W] [--set knob=value]...\n"
            "                                every plugin's candidates, with repairs and legality;\n"
            "                                --wall W: the plugins see W as the profiled wall (as\n"
            "                                in a tune) and only W's candidates are listed\n"
            "  demo [CONTRACT] [--dir DIR]   check the example contract and tune it on the simulator\n"
            "  calibration [--fit]           the simulator against the published numbers\n"
            "  optimum CONTRACT              best config of the declared space (simulator, no noise)\n"
            "  space CONTRACT [--json]       the declared search space and the base's values (JSON)\n"
            "  model-screen CONTRACT [--set k=v]... [--replicates N] [--seed S] [--noise-free] [--stdin]\n"
            "                                one screen on the sim's model, as `tune --executor model`\n"
            "                                runs it (JSON; --stdin: one JSON object of sets a line)\n"
            "  runs DIR [--csv|--json]       the runs recorded in a tune directory's store\n"
            "  measure CONTRACT --dir DIR [--kind screen|validate] [--replicate N] [--set k=v]...\n"
            "                                run one measurement of the config, parse, verify, store\n"
            "  parse LOG [--json]            what moetune reads from a training log\n"
            "  profile TRACE [--window A:B] [--device N] [--json] [--compare TRACE2] [--contract C]\n"
            "                                unions of a Kineto or Nsight Systems trace: hidden and exposed\n"
            "                                communication, idle gaps, the wall, the activation evidence\n"
            "  tune CONTRACT --dir DIR [--strategy ofat|grid|random] [--until HH:MM] [--jobs N]\n"
            "       [--executor local|model] [--gpu-hours X] [--runs N] [--seed N] [--notify CMD]\n"
            "                                the unattended evidence-gated tune, ending in a\n"
            "                                validated recipe and bundle.json, REPORT.md, report.html\n"
            "  tune --resume DIR             continue a tune after a crash, kill or stop: nothing\n"
            "                                finished runs again (the stored options, contract and\n"
            "                                environment apply; one that differs is refused)\n"
            "  status DIR                    a tune's live state (from another terminal)\n"
            "  recipe DIR [--format mlm|bridge|env|sbatch]\n"
            "                                the finished tune's recipe, as written into DIR:\n"
            "                                the Megatron-LM command (default), Megatron-Bridge\n"
            "                                overrides, the environment, or a Slurm batch script\n"
            "  bisect CONTRACT --good REV --bad REV (--repo PATH | --revs FILE) --dir DIR ...\n"
            "                                the commit a throughput regression came in with\n"
            "                                (moetune bisect --help for every option)\n"
            "  worker --connect tcp://HOST:PORT [--allow PROGRAM]... [--key DIR/NAME --server-key F]\n"
            "                                a ZeroMQ worker that runs a tune's jobs on this node\n"
            "  keygen DIR NAME [--force]     a CURVE keypair for the coordinator or a worker\n"
            "  rank-exec -- PROGRAM [ARGS]   (an srun task) RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,\n"
            "                                MASTER_PORT from Slurm's variables, then PROGRAM\n"
            "\n"
            "Plugins: built-ins, then MOETUNE_PLUGIN_PATH (colon-separated); a contract names\n"
            "the plugins it needs in launch.plugins, and the files of its launch.plugin_path\n"
            "load only with --trust-plugin-path.  Every command takes --trust-plugin-path and\n"
            "--plugin-timeout S (each plugin call's limit, default 60 s; 0: none).\n"
            "Walls: memory, communication, host, compute.\n");
}

typedef struct session {
    mt_contract *contract;
    mt_registry *reg;
    mt_kv *cfg;
    mt_diag *load_diag; /* plugin load problems: warnings for most commands */
} session;

static void session_close(session *s)
{
    mt_kv_destroy(&s->cfg);
    mt_registry_destroy(&s->reg);
    mt_contract_destroy(&s->contract);
    mt_diag_destroy(&s->load_diag);
}

/* --trust-plugin-path (any command): load the files a contract names in
 * launch.plugin_path.  Without it a contract names plugins only by name
 * (launch.plugins), and its files are refused: checking or rendering an
 * untrusted contract must never run code from it. */
static int trust_plugin_path;

/* Loads plugins: the built-ins and MOETUNE_PLUGIN_PATH (the operator's), and
 * with --trust-plugin-path the contract's plugin_path, resolved against the
 * contract's directory; without it each of those is a refusal in
 * s->load_diag. */
static void load_plugins(session *s)
{
    char **extra = NULL;
    size_t n = 0, i;
    s->reg = mt_registry_new();
    s->load_diag = mt_diag_new();
    if (s->contract && s->contract->n_plugin_path && !trust_plugin_path)
        for (i = 0; i < s->contract->n_plugin_path; i++)
            mt_diag_add(s->load_diag, s->contract->path,
                        mt_contract_line(s->contract, "launch.plugin_path"), "launch.plugin_path",
                        "refused to load \"%s\": files a contract names load only with "
                        "--trust-plugin-path (or install the plugin in MOETUNE_PLUGIN_PATH and "
                        "name it in launch.plugins)",
                        s->contract->plugin_path[i]);
    if (s->contract && s->contract->n_plugin_path && trust_plugin_path) {
        const char *slash = strrchr(s->contract->path, '/');
        int dirlen = slash ? (int)(slash - s->contract->path) : 0;
        extra = calloc(s->contract->n_plugin_path, sizeof *extra);
        for (i = 0; extra && i < s->contract->n_plugin_path; i++) {
            const char *p = s->contract->plugin_path[i];
            char buf[PATH_MAX];
            if (p[0] == '/' || !slash)
                snprintf(buf, sizeof buf, "%s", p);
            else
                snprintf(buf, sizeof buf, "%.*s/%s", dirlen, s->contract->path, p);
            extra[n++] = strdup(buf);
        }
    }
    mt_registry_load_default(s->reg, (const char *const *)extra, n, s->load_diag);
    mt_registry_finish(s->reg, s->load_diag);
    for (i = 0; i < n; i++)
        free(extra[i]);
    free(extra);
}

/* The contract's launch.plugins, each loaded, enabled and new enough; a
 * problem goes to d (bad input: the contract cannot be judged without it). */
static void require_plugins(const session *s, mt_diag *d)
{
    size_t i;
    char why[1024];
    for (i = 0; s->contract && i < s->contract->n_plugins; i++)
        if (mt_registry_require(s->reg, s->contract->plugins[i],
                                s->contract->plugin_min_versions[i], why, sizeof why))
            mt_diag_add(d, s->contract->path, mt_contract_line(s->contract, "launch.plugins"),
                        "launch.plugins", "%s", why);
}

static void warn_load(const session *s)
{
    size_t i;
    for (i = 0; i < mt_diag_count(s->load_diag); i++) {
        const mt_diag_item *it = mt_diag_at(s->load_diag, i);
        fprintf(stderr, "moetune: warning: %s: %s\n", it->file ? it->file : "plugin", it->message);
    }
}

/* Contract + plugins + base config; returns an exit code (0 = go on). */
static int session_open(session *s, const char *path, int quiet_load)
{
    mt_diag *d = mt_diag_new();
    memset(s, 0, sizeof *s);
    s->contract = mt_contract_load(path, d);
    if (!s->contract) {
        mt_diag_print(d, stderr);
        mt_diag_destroy(&d);
        return EXIT_BAD_INPUT;
    }
    load_plugins(s);
    if (!quiet_load)
        warn_load(s);
    require_plugins(s, d);
    if (mt_diag_count(d)) {
        mt_diag_print(d, stderr);
        mt_diag_destroy(&d);
        return EXIT_BAD_INPUT;
    }
    mt_config_normalize_space(s->reg, s->contract, d);
    s->cfg = mt_config_base(s->reg, s->contract, d);
    if (!s->cfg || mt_diag_count(d)) {
        mt_diag_print(d, stderr);
        mt_diag_destroy(&d);
        return EXIT_BAD_INPUT;
    }
    mt_diag_destroy(&d);
    return 0;
}

static int apply_sets(session *s, char **sets, size_t n)
{
    mt_diag *d = mt_diag_new();
    size_t i;
    int bad = 0;
    for (i = 0; i < n; i++) {
        char *eq = strchr(sets[i], '=');
        if (!eq) {
            mt_diag_add(d, NULL, 0, "--set", "'%s' is not knob=value", sets[i]);
            bad = 1;
            continue;
        }
        *eq = '\0';
        if (mt_registry_is_core(sets[i]) && strcmp(sets[i], "train_iters")) {
            mt_diag_add(d, NULL, 0, "--set",
                        "%s is fixed by the contract (model, batch, intervals or data); edit the "
                        "contract instead",
                        sets[i]);
            bad = 1;
        } else if (mt_config_set(s->reg, s->cfg, sets[i], eq + 1, NULL, 0, "--set", d)) {
            bad = 1;
        }
        *eq = '=';
    }
    mt_diag_print(d, stderr);
    mt_diag_destroy(&d);
    return bad ? EXIT_BAD_INPUT : 0;
}

static void print_violations(const mt_violations *vs, FILE *out, const char *indent)
{
    size_t i;
    for (i = 0; i < vs->n; i++)
        fprintf(out, "%s[%s, %s] %s (plugin %s)\n", indent, vs->v[i].rule,
                vs->v[i].rule_class == MT_RULE_RUNTIME ? "runtime" : "start-up", vs->v[i].message,
                vs->v[i].plugin);
}

static int cmd_plugins(int argc, char **argv)
{
    session s;
    size_t i;
    int failed;
    memset(&s, 0, sizeof s);
    if (argc > 2) {
        mt_diag *d = mt_diag_new();
        s.contract = mt_contract_load(argv[2], d);
        if (!s.contract) {
            mt_diag_print(d, stderr);
            mt_diag_destroy(&d);
            return EXIT_BAD_INPUT;
        }
        mt_diag_destroy(&d);
    }
    load_plugins(&s);
    for (i = 0; i < mt_registry_count(s.reg); i++) {
        const mt_plugin *p = mt_registry_at(s.reg, i);
        uint32_t k;
        printf("%s %s (ABI %u)%s\n", p->desc->name, p->desc->version ? p->desc->version : "?",
               p->desc->abi_version, p->enabled ? "" : "  DISABLED");
        printf("  path:     %s\n", p->path);
        if (p->desc->description)
            printf("  about:    %s\n", p->desc->description);
        if (!p->enabled)
            printf("  disabled: %s\n", p->why_disabled);
        printf("  owns:    ");
        for (k = 0; k < p->desc->n_knobs; k++)
            printf(" %s", p->desc->knobs[k].name);
        printf("\n");
        if (p->desc->n_extends) {
            printf("  extends: ");
            for (k = 0; k < p->desc->n_extends; k++) {
                const char *const *v;
                printf(" %s +=", p->desc->extends[k].knob);
                for (v = p->desc->extends[k].values; v && *v; v++)
                    printf(" %s", *v);
            }
            printf("\n");
        }
        printf("  variables:");
        for (k = 0; k < p->desc->n_variables; k++)
            printf(" %s", p->desc->variables[k].name);
        printf("\n");
    }
    failed = (int)mt_diag_count(s.load_diag);
    if (failed) {
        fprintf(stderr, "moetune: %d plugin problem%s:\n", failed, failed == 1 ? "" : "s");
        mt_diag_print(s.load_diag, stderr);
    }
    session_close(&s);
    return failed ? 1 : 0;
}

/* What the analytic estimate counts on the hottest rank of m (filled by
 * mt_memory_estimate), one term a line, against the contract's usable
 * memory. */
static void print_memory(const mt_mem_estimate *m, const mt_contract *c)
{
    const mt_mem_stage *h = m->hottest;
    double cap = m->hbm_gb * (1 - c->memory_headroom);
    char shard[96] = "", flex[48] = "";
    printf("model: %.2f B parameters\n", m->params_total);
    printf("memory estimate per GPU, hottest rank (%s): %.1f GB of %.0f GB (%.1f GB usable at "
           "%.0f%% headroom): %s\n",
           m->hottest_name, h->total, m->hbm_gb, cap, c->memory_headroom * 100,
           h->total <= cap ? "fits" : "does not fit");
    printf("  on that rank: %.0f layer%s of the model, %d virtual chunk%s; %.0f microbatch%s per "
           "step\n",
           h->layers, h->layers == 1 ? "" : "s", m->vpp, m->vpp == 1 ? "" : "s", m->microbatches,
           m->microbatches == 1 ? "" : "es");
    if (m->dp_shard > 1 || m->edp_shard > 1)
        snprintf(shard, sizeof shard, ", sharded over DPxCP %.0f (dense) / EDP %.0f (experts)",
                 m->dp_shard, m->edp_shard);
    printf("  %-12s %6.1f GB  BF16\n", "weights", h->weights);
    printf("  %-12s %6.1f GB  main gradients in %s\n", "grads", h->grads,
           m->grad_bytes >= 4 ? "FP32" : "BF16");
    printf("  %-12s %6.1f GB  Adam master weights and moments, %.0f bytes a parameter%s%s\n",
           "optimizer", h->optimizer, m->state_bytes, shard,
           m->offload > 0 ? ", the offloaded moments on the CPU" : "");
    printf("  %-12s %6.1f GB  saved for backward: %.0f microbatch-chunk%s in flight (%.2f "
           "microbatches of this rank's layers)\n",
           "activations", h->activations, h->inflight, h->inflight == 1 ? "" : "s",
           h->inflight_mb);
    printf("  %-12s %6.1f GB  the loss's FP32 softmax%s\n", "logits", h->logits,
           h->logits > 0 ? "" : " (not on this rank)");
    printf("  %-12s %6.1f GB  one layer's backward, or the loss's BF16 logits\n", "workspace",
           h->workspace);
    printf("  %-12s %6.1f GB  static buffers of the captured scopes\n", "cuda graphs",
           h->graphs);
    if (m->flex_buffer_gb > 0)
        snprintf(flex, sizeof flex, ", %.1f GB flex dispatcher buffers", m->flex_buffer_gb);
    printf("  %-12s %6.1f GB  outside PyTorch's allocator: CUDA context, NCCL%s\n", "buffers",
           h->buffers, flex);
}

static void print_meshes(const mt_kv *cfg, const mt_contract *c, const char *indent)
{
    mt_mesh m;
    char att[160], moe[160];
    mt_config_mesh(cfg, c->hardware, &m);
    mt_mesh_format(&m, att, sizeof att, moe, sizeof moe);
    printf("%s%s\n%s%s\n", indent, att, indent, moe);
}

/* What check loaded and refused: every plugin with its version, how it was
 * found and its file, then every file not loaded and why. */
static void print_plugins(const session *s)
{
    size_t i, n = mt_registry_count(s->reg);
    printf("plugins: %zu loaded\n", n);
    for (i = 0; i < n; i++) {
        const mt_plugin *p = mt_registry_at(s->reg, i);
        printf("  %s %s (%s) %s%s%s\n", p->desc->name, p->desc->version ? p->desc->version : "?",
               p->origin, p->path, p->enabled ? "" : "  DISABLED: ",
               p->enabled ? "" : p->why_disabled);
    }
    for (i = 0; i < mt_diag_count(s->load_diag); i++) {
        const mt_diag_item *it = mt_diag_at(s->load_diag, i);
        printf("  refused: %s: %s\n", it->file ? it->file : "plugin", it->message);
    }
}

static int cmd_check(const char *path)
{
    session s;
    mt_diag *d;
    mt_mem_estimate mem;
    char id[17];
    int fit;
    int rc = session_open(&s, path, 0);
    if (rc) {
        session_close(&s);
        return rc;
    }
    d = mt_diag_new();
    mt_audit_base(s.reg, s.contract, s.cfg, d);
    mt_audit_windows(s.contract, s.cfg, d);
    mt_audit_space(s.reg, s.contract, s.cfg, d);
    if (mt_diag_count(d)) {
        mt_diag_print(d, stderr);
        fprintf(stderr, "moetune: %s: %zu problem%s; nothing was run\n", path, mt_diag_count(d),
                mt_diag_count(d) == 1 ? "" : "s");
        mt_diag_destroy(&d);
        session_close(&s);
        return EXIT_BAD_INPUT;
    }
    mt_diag_destroy(&d);
    mt_config_id(s.cfg, id);
    /* legal; the verdict also says whether the base fits the estimate */
    if (mt_memory_estimate(s.cfg, s.contract->hardware, &mem)) {
        fit = -1;
        printf("contract %s: legal, but its memory cannot be estimated (unusable parallel "
               "sizes or layout)\n",
               s.contract->name);
    } else if (mem.hottest->total <= mem.hbm_gb * (1 - s.contract->memory_headroom)) {
        fit = 1;
        printf("contract %s: OK\n", s.contract->name);
    } else {
        fit = 0;
        printf("contract %s: legal, but the base does not fit in memory: %.1f GB estimated on "
               "the hottest GPU (%s), %.1f GB usable\n",
               s.contract->name, mem.hottest->total, mem.hottest_name,
               mem.hbm_gb * (1 - s.contract->memory_headroom));
    }
    printf("fingerprint: %s\n", s.contract->fingerprint);
    printf("hardware: %s x %s (%s nodes x %s), NVLink domain %s\n",
           mt_kv_get(s.contract->hardware, "world_size"), mt_kv_get(s.contract->hardware, "gpu"),
           mt_kv_get(s.contract->hardware, "nodes"),
           mt_kv_get(s.contract->hardware, "gpus_per_node"),
           mt_kv_get(s.contract->hardware, "nvlink_domain"));
    printf("base config %s\n", id);
    print_meshes(s.cfg, s.contract, "  ");
    if (fit >= 0)
        print_memory(&mem, s.contract);
    printf("windows: screen %d-%d of %d steps; validate %d-%d of %d steps\n",
           s.contract->screen.first, s.contract->screen.last, s.contract->screen.steps,
           s.contract->validate.first, s.contract->validate.last, s.contract->validate.steps);
    printf("search space: %zu knobs\n", mt_kv_count(s.contract->space));
    print_plugins(&s);
    if (s.contract->template_bisect)
        /* the same words `measure` and `tune` refuse it with (workers/launch.c) */
        printf("launch.template: names {rev} or {work}, which only `moetune bisect` fills; "
               "`tune` and `measure` refuse this contract (drop them from the template for "
               "those)\n");
    if (s.contract->srun_bisect)
        /* as workers/measure.c refuses it outside a bisection */
        printf("launch.srun: a container setting names {rev} or {work}, which only `moetune "
               "bisect` fills (each revision in its own image); `tune` and `measure` refuse "
               "this contract (drop them from the container settings for those)\n");
    session_close(&s);
    return fit == 1 ? 0 : fit == 0 ? EXIT_NO_FIT : 1;
}

/* check --startup-only: what the training program's own start-up checks
 * say about the base config, nothing else.  Exit 0 legal, 2 not. */
static int cmd_check_startup(const char *path)
{
    session s;
    mt_violations vs = {0};
    mt_diag *d;
    size_t i, n = 0;
    int rc = session_open(&s, path, 0);
    if (rc) {
        session_close(&s);
        return rc;
    }
    d = mt_diag_new();
    mt_legality(s.reg, s.contract, s.cfg, &vs, d);
    mt_diag_print(d, stderr);
    for (i = 0; i < vs.n; i++) {
        if (vs.v[i].rule_class != MT_RULE_STARTUP)
            continue;
        if (!n++)
            fprintf(stderr, "moetune: %s: %s would stop at start-up:\n", path,
                    mt_kv_get(s.contract->view, "stack.dialect"));
        fprintf(stderr, "  [%s] %s (plugin %s)\n", vs.v[i].rule, vs.v[i].message,
                vs.v[i].plugin);
    }
    if (!n)
        printf("contract %s: legal at start-up on Megatron-LM %s\n", s.contract->name,
               mt_kv_get(s.contract->view, "stack.dialect"));
    rc = n ? EXIT_BAD_INPUT : mt_diag_count(d) ? 1 : 0;
    mt_violations_free(&vs);
    mt_diag_destroy(&d);
    session_close(&s);
    return rc;
}

/* "a=1,b=2" into kv; -1 on a piece without '='. */
static int split_pairs(const char *spec, mt_kv *kv)
{
    char buf[1024], *tok, *save = NULL;
    snprintf(buf, sizeof buf, "%s", spec);
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok)
            return -1;
        *eq = 0;
        mt_kv_set(kv, tok, eq + 1);
    }
    return 0;
}

/* One token a line; blank lines and lines starting with '#' skipped. */
static char **read_argv_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "r");
    char *line = NULL, **v = NULL;
    size_t cap = 0;
    ssize_t len;
    *n = 0;
    if (!f)
        return NULL;
    while ((len = getline(&line, &cap, f)) >= 0) {
        char **nv;
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = 0;
        if (!len || line[0] == '#')
            continue;
        nv = realloc(v, (*n + 2) * sizeof *v);
        if (!nv)
            break;
        v = nv;
        v[(*n)++] = strdup(line);
        v[*n] = NULL;
    }
    free(line);
    fclose(f);
    if (!v)
        v = calloc(1, sizeof *v);
    return v;
}

static int cmd_import(int argc, char **argv)
{
    mt_import_opts o;
    session s;
    char **args = NULL, **owned = NULL;
    size_t nargs = 0, i;
    const char *outpath = NULL;
    FILE *out = stdout;
    mt_diag *d;
    int rc = 0, a;
    memset(&o, 0, sizeof o);
    memset(&s, 0, sizeof s);
    o.stack = mt_kv_new(), o.hardware = mt_kv_new(), o.env = mt_kv_new();
    for (a = 2; a < argc && !rc; a++) {
        const char *opt = argv[a];
        const char *val = a + 1 < argc ? argv[a + 1] : NULL;
        if (!strcmp(opt, "--")) {
            args = argv + a + 1;
            nargs = (size_t)(argc - a - 1);
            break;
        }
        if (!val) {
            fprintf(stderr, "moetune import: option '%s' needs a value\n", opt);
            rc = EXIT_USAGE;
        } else if (!strcmp(opt, "--stack") || !strcmp(opt, "--env")) {
            const char *eq = strchr(val, '=');
            char key[256];
            if (!eq || eq == val || (size_t)(eq - val) >= sizeof key) {
                fprintf(stderr, "moetune import: %s '%s' is not NAME=VALUE\n", opt, val);
                rc = EXIT_USAGE;
            } else {
                snprintf(key, sizeof key, "%.*s", (int)(eq - val), val);
                mt_kv_set(opt[2] == 's' ? o.stack : o.env, key, eq + 1);
            }
            a++;
        } else if (!strcmp(opt, "--hardware")) {
            if (split_pairs(val, o.hardware)) {
                fprintf(stderr, "moetune import: --hardware '%s' is not gpu=G,gpus_per_node=P,"
                                "nodes=N\n", val);
                rc = EXIT_USAGE;
            }
            a++;
        } else if (!strcmp(opt, "--dialect")) {
            if (strcmp(val, "mlm") && strcmp(val, "bridge")) {
                fprintf(stderr, "moetune import: --dialect is mlm or bridge, not '%s'\n", val);
                rc = EXIT_USAGE;
            }
            o.dialect = val, a++;
        } else if (!strcmp(opt, "--backend")) {
            if (strcmp(val, "sim") && strcmp(val, "command")) {
                fprintf(stderr, "moetune import: --backend is sim or command, not '%s'\n", val);
                rc = EXIT_USAGE;
            }
            o.backend = val, a++;
        } else if (!strcmp(opt, "--name")) {
            o.name = val, a++;
        } else if (!strcmp(opt, "-o") || !strcmp(opt, "--output")) {
            outpath = val, a++;
        } else if (!strcmp(opt, "--argv")) {
            owned = read_argv_file(val, &nargs);
            if (!owned) {
                fprintf(stderr, "moetune import: cannot read %s: %s\n", val, strerror(errno));
                rc = EXIT_BAD_INPUT;
            }
            args = owned;
            a++;
        } else {
            fprintf(stderr, "moetune import: unknown option '%s'\n", opt);
            rc = EXIT_USAGE;
        }
    }
    if (!rc && !args) {
        fprintf(stderr, "moetune import: give the command line after '--' or with --argv FILE\n");
        rc = EXIT_USAGE;
    }
    if (!rc && !mt_kv_get(o.stack, "megatron_lm") && !mt_kv_get(o.stack, "dialect")) {
        fprintf(stderr, "moetune import: give the stack, e.g. --stack megatron_lm=core_v0.19.0 "
                        "--stack transformer_engine=2.12\n");
        rc = EXIT_USAGE;
    }
    if (!rc) {
        load_plugins(&s);
        warn_load(&s);
        if (outpath && !(out = fopen(outpath, "w"))) {
            fprintf(stderr, "moetune import: cannot write %s: %s\n", outpath, strerror(errno));
            rc = 1;
        }
    }
    if (!rc) {
        d = mt_diag_new();
        rc = mt_import(s.reg, &o, args, nargs, out, d);
        if (mt_diag_count(d)) {
            for (i = 0; i < mt_diag_count(d); i++)
                fprintf(stderr, "moetune import: %s: %s\n", mt_diag_at(d, i)->field,
                        mt_diag_at(d, i)->message);
        }
        mt_diag_destroy(&d);
        if (out != stdout && fclose(out) && !rc)
            rc = 1;
        if (rc && outpath)
            unlink(outpath);
    }
    for (i = 0; owned && owned[i]; i++)
        free(owned[i]);
    free(owned);
    mt_kv_destroy(&o.stack), mt_kv_destroy(&o.hardware), mt_kv_destroy(&o.env);
    session_close(&s);
    return rc;
}

/* render's output options: format "env" or "sh" (NULL: today's listing),
 * argv_only. */
typedef struct render_opts {
    const char *format;
    int argv_only;
} render_opts;

static int parse_opts(int argc, char **argv, char ***sets, size_t *nsets, const char **dialect,
                      const char **wall, render_opts *ro)
{
    int i;
    *sets = calloc((size_t)argc, sizeof **sets);
    *nsets = 0;
    for (i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--set") && i + 1 < argc)
            (*sets)[(*nsets)++] = argv[++i];
        else if (!strncmp(argv[i], "--set=", 6))
            (*sets)[(*nsets)++] = argv[i] + 6;
        else if (dialect && !strcmp(argv[i], "--dialect") && i + 1 < argc)
            *dialect = argv[++i];
        else if (wall && !strcmp(argv[i], "--wall") && i + 1 < argc)
            *wall = argv[++i];
        else if (ro && !strcmp(argv[i], "--format") && i + 1 < argc)
            ro->format = argv[++i];
        else if (ro && !strcmp(argv[i], "--argv-only"))
            ro->argv_only = 1;
        else {
            fprintf(stderr, "moetune: unknown or incomplete option '%s'\n", argv[i]);
            return EXIT_USAGE;
        }
    }
    return 0;
}

static int require_legal(session *s)
{
    mt_violations vs = {0};
    mt_diag *d = mt_diag_new();
    int rc = 0;
    mt_legality(s->reg, s->contract, s->cfg, &vs, d);
    mt_diag_print(d, stderr);
    if (vs.n) {
        fprintf(stderr, "moetune: the configuration is illegal:\n");
        print_violations(&vs, stderr, "  ");
        rc = EXIT_BAD_INPUT;
    } else if (mt_diag_count(d)) {
        rc = 1;
    }
    mt_violations_free(&vs);
    mt_diag_destroy(&d);
    return rc;
}

/* Contract, plugins, base config with the --set changes applied, and the
 * result checked legal; returns an exit code (0 = go on). */
static int session_open_legal(session *s, const char *path, char **sets, size_t nsets)
{
    int rc = session_open(s, path, 0);
    if (!rc)
        rc = apply_sets(s, sets, nsets);
    if (!rc)
        rc = require_legal(s);
    return rc;
}

static void sim_path(char *buf, size_t n);

/* --format and --argv-only: 0, or EXIT_USAGE with the problem said. */
static int check_render_opts(const render_opts *ro)
{
    if (ro->format && strcmp(ro->format, "env") && strcmp(ro->format, "sh") &&
        strcmp(ro->format, "launch")) {
        fprintf(stderr, "moetune render: --format takes env, sh or launch, not '%s'\n",
                ro->format);
        return EXIT_USAGE;
    }
    if (ro->format && ro->argv_only) {
        fprintf(stderr, "moetune render: --argv-only and --format %s exclude each other; give "
                        "one\n",
                ro->format);
        return EXIT_USAGE;
    }
    return 0;
}

/* Today's listing: argv, one word a line, then the environment and the
 * launcher settings under their headers (or argv alone). */
static void print_rendered(const mt_rendered *out, int argv_only)
{
    const char *k, *v;
    size_t i;
    for (i = 0; i < out->argv.n; i++)
        printf("%s\n", out->argv.v[i]);
    if (argv_only)
        return;
    printf("# environment\n");
    for (i = 0; mt_kv_entry(out->env, i, &k, &v) == 0; i++)
        printf("%s=%s\n", k, v);
    if (mt_kv_count(out->launch)) {
        printf("# launcher\n");
        for (i = 0; mt_kv_entry(out->launch, i, &k, &v) == 0; i++)
            printf("%s=%s\n", k, v);
    }
}

/* --format env|sh: the environment file, or the script that runs the
 * command.  0, or 1 (moetune failed) / EXIT_BAD_INPUT with d filled. */
static int print_formatted(session *s, uint32_t dial, const char *format, mt_diag *d)
{
    mt_rendered out;
    mt_strlist cmd = {0};
    char *text = NULL, simbin[PATH_MAX], title[PATH_MAX + 64];
    int rc;
    mt_rendered_init(&out);
    if (!strcmp(format, "launch")) {
        /* the exact argv a worker runs (srun, its options, the container,
         * rank-exec, the template), one word a line; the job is named
         * mt-render here (each run's own name is unique) and {run_dir} is . */
        size_t i;
        sim_path(simbin, sizeof simbin);
        rc = mt_render(s->reg, s->contract, s->cfg, dial, &out, d) ? 1 : 0;
        if (!rc && mt_measure_command(s->contract, &out, simbin, ".", "mt-render", NULL, NULL,
                                      NULL, NULL, &cmd, NULL, d))
            rc = EXIT_BAD_INPUT;
        for (i = 0; !rc && i < cmd.n; i++)
            printf("%s\n", cmd.v[i]);
        mt_strlist_free(&cmd);
        mt_rendered_free(&out);
        return rc;
    }
    if (!strcmp(format, "env")) {
        rc = mt_render(s->reg, s->contract, s->cfg, dial, &out, d) ? 1 : 0;
        if (!rc && !strcmp(s->contract->backend, "sim"))
            mt_measure_sim_env(s->contract, NULL, out.env); /* as the sh format exports */
        if (!rc && mt_recipe_env_text(out.env, &text, d))
            rc = EXIT_BAD_INPUT;
    } else {
        sim_path(simbin, sizeof simbin);
        snprintf(title, sizeof title, "moetune render %s", s->contract->path);
        rc = mt_recipe_command(s->reg, s->contract, s->cfg, dial, simbin, &out, &cmd, d)
                 ? EXIT_BAD_INPUT
             : mt_recipe_sh_script(&cmd, out.env, out.launch, title, &text, d) ? EXIT_BAD_INPUT
                                                                                 : 0;
    }
    if (!rc)
        fputs(text, stdout);
    free(text);
    mt_strlist_free(&cmd);
    mt_rendered_free(&out);
    return rc;
}

static int cmd_render(int argc, char **argv)
{
    session s;
    char **sets = NULL;
    size_t nsets = 0;
    const char *dialect = NULL;
    render_opts ro = {NULL, 0};
    uint32_t dial;
    mt_rendered out;
    mt_diag *d;
    int rc = parse_opts(argc, argv, &sets, &nsets, &dialect, NULL, &ro);
    if (!rc)
        rc = check_render_opts(&ro);
    if (rc) {
        free(sets);
        return rc;
    }
    if (dialect && strcmp(dialect, "mlm") && strcmp(dialect, "bridge")) {
        fprintf(stderr, "moetune: --dialect takes mlm or bridge, not '%s'\n", dialect);
        free(sets);
        return EXIT_USAGE;
    }
    rc = session_open_legal(&s, argv[2], sets, nsets);
    free(sets);
    if (rc) {
        session_close(&s);
        return rc;
    }
    dial = dialect ? (!strcmp(dialect, "bridge") ? MT_DIALECT_BRIDGE : MT_DIALECT_MLM)
                   : (uint32_t)s.contract->dialect;
    d = mt_diag_new();
    if (ro.format) {
        rc = print_formatted(&s, dial, ro.format, d);
    } else {
        mt_rendered_init(&out);
        rc = mt_render(s.reg, s.contract, s.cfg, dial, &out, d) ? 1 : 0;
        if (!rc)
            print_rendered(&out, ro.argv_only);
        mt_rendered_free(&out);
    }
    if (rc)
        mt_diag_print(d, stderr);
    mt_diag_destroy(&d);
    session_close(&s);
    return rc;
}

#define RECIPE_USAGE "usage: moetune recipe DIR [--format " "mlm|bridge|env|sbatch]\n"

/* moetune recipe DIR [--format F]: the recipe file of a finished tune's
 * bundle, as written (search/recipe.h). */
static int cmd_recipe(int argc, char **argv)
{
    const char *dir = NULL, *format = "mlm";
    char *text = NULL;
    mt_diag *d;
    int i, f, rc;
    for (i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--format") && i + 1 < argc)
            format = argv[++i];
        else if (!strncmp(argv[i], "--format=", 9))
            format = argv[i] + 9;
        else if (argv[i][0] != '-' && !dir)
            dir = argv[i];
        else {
            fprintf(stderr, "moetune recipe: unknown or incomplete option '%s'\n" RECIPE_USAGE,
                    argv[i]);
            return EXIT_USAGE;
        }
    }
    if (!dir) {
        fprintf(stderr, "moetune recipe: missing DIR (a tune's --dir)\n" RECIPE_USAGE);
        return EXIT_USAGE;
    }
    if ((f = mt_recipe_format_parse(format)) < 0) {
        fprintf(stderr, "moetune recipe: --format takes " MT_RECIPE_FORMAT_WORDS ", not '%s'\n",
                format);
        return EXIT_USAGE;
    }
    d = mt_diag_new();
    rc = mt_recipe_read(dir, f, &text, d);
    if (rc) {
        fprintf(stderr, "moetune recipe: ");
        mt_diag_print(d, stderr);
    } else {
        fputs(text, stdout);
    }
    free(text);
    mt_diag_destroy(&d);
    return rc ? EXIT_BAD_INPUT : 0;
}

static void print_candidate(const mt_candidate *c, const mt_kv *base)
{
    char walls[96];
    size_t i;
    const char *k, *v;
    mt_wall_format(c->walls, walls, sizeof walls);
    printf("- [%s] %s: %s\n", c->plugin, c->variable, c->summary);
    printf("    label: %s | wall: %s\n",
           c->label == MT_LABEL_BENCHMARK_ONLY ? "benchmark-only" : "training-equivalent", walls);
    printf("    change:");
    for (i = 0; mt_kv_entry(c->sets, i, &k, &v) == 0; i++)
        printf(" %s=%s%s%s%s", k, *v ? v : "\"\"", mt_kv_get(base, k) ? " (was " : "",
               mt_kv_get(base, k) ? (*mt_kv_get(base, k) ? mt_kv_get(base, k) : "\"\"") : "",
               mt_kv_get(base, k) ? ")" : "");
    printf("\n");
    for (i = 0; i < c->notes.n; i++)
        printf("    why: %s\n", c->notes.v[i]);
    if (c->reject) {
        printf("    REFUSED by the host: %s\n", c->reject);
        return;
    }
    if (mt_kv_count(c->repairs)) {
        printf("    forced repairs:");
        for (i = 0; mt_kv_entry(c->repairs, i, &k, &v) == 0; i++)
            printf(" %s=%s", k, *v ? v : "\"\"");
        printf("\n");
        for (i = 0; i < c->repair_notes.n; i++)
            printf("      %s\n", c->repair_notes.v[i]);
    }
    if (c->violations.n) {
        printf("    legality: ILLEGAL\n");
        print_violations(&c->violations, stdout, "      ");
    } else {
        char id[17];
        mt_config_id(c->config, id);
        printf("    legality: legal (config %s)\n", id);
    }
}

/* The candidates for the config; with a wall, the plugins see it as the
 * profile's evidence ("wall"), as a tune's plugins do after a profile, and
 * only candidates for that wall are listed. */
static int list_candidates(session *s, const char *wall, uint32_t mask)
{
    mt_candidates cs = {0};
    mt_diag *d = mt_diag_new();
    mt_kv *ev = wall ? mt_kv_new() : NULL;
    size_t i, legal = 0;
    int rc;
    if (ev)
        mt_kv_set(ev, "wall", wall);
    mt_candidates_for(s->reg, s->contract, s->cfg, ev, mask, &cs, d);
    mt_kv_destroy(&ev);
    for (i = 0; i < cs.n; i++) {
        print_candidate(&cs.v[i], s->cfg);
        legal += !cs.v[i].reject && !cs.v[i].violations.n;
    }
    printf("%zu candidates, %zu legal\n", cs.n, legal);
    rc = mt_diag_count(d) ? 1 : 0;
    mt_diag_print(d, stderr);
    mt_candidates_free(&cs);
    mt_diag_destroy(&d);
    return rc;
}

/* Knob values the plugins know that the contract's stack lacks: each value
 * set alone on the base, and listed when its owner says it needs a newer
 * Megatron core, so the user sees what an upgrade would offer. */
static void list_not_offered(session *s)
{
    size_t n = 0, i, shown = 0;
    const char **names = mt_registry_knob_names(s->reg, &n);
    for (i = 0; names && i < n; i++) {
        static const char *const on[] = {"true", NULL};
        const mt_knob_v1 *k = mt_registry_knob(s->reg, names[i], NULL);
        const char *const *v;
        if (!k || mt_registry_is_core(names[i]))
            continue;
        if (k->type == MT_TYPE_BOOL)
            v = on;
        else if ((k->type == MT_TYPE_ENUM || k->type == MT_TYPE_LIST) && k->values)
            v = k->values;
        else
            continue;
        for (; *v; v++) {
            mt_kv *cfg = mt_kv_dup(s->cfg);
            mt_violations vs = {0};
            mt_diag *d = mt_diag_new();
            size_t j;
            if (!**v || (mt_kv_get(cfg, names[i]) && !strcmp(mt_kv_get(cfg, names[i]), *v))) {
                mt_kv_destroy(&cfg), mt_diag_destroy(&d);
                continue;
            }
            mt_kv_set(cfg, names[i], *v);
            mt_legality(s->reg, s->contract, cfg, &vs, d);
            for (j = 0; j < vs.n; j++) {
                char first[128];
                sscanf(vs.v[j].knobs, "%127s", first);
                if (!strstr(vs.v[j].rule, ".needs_core") || strcmp(first, names[i]))
                    continue;
                if (!shown++)
                    printf("not offered on Megatron-LM %s:\n",
                           mt_kv_get(s->contract->view, "stack.dialect"));
                printf("- %s=%s: %s\n", names[i], *v, vs.v[j].message);
                break;
            }
            mt_violations_free(&vs);
            mt_diag_destroy(&d);
            mt_kv_destroy(&cfg);
        }
    }
    free(names);
}

static int cmd_candidates(int argc, char **argv)
{
    session s;
    char **sets = NULL;
    size_t nsets = 0;
    const char *wall = NULL;
    uint32_t mask = 0;
    int rc = parse_opts(argc, argv, &sets, &nsets, NULL, &wall, NULL);
    if (rc) {
        free(sets);
        return rc;
    }
    if (wall && !(mask = mt_wall_parse(wall))) {
        fprintf(stderr, "moetune: --wall takes memory, communication, host or compute, not '%s'\n",
                wall);
        free(sets);
        return EXIT_USAGE;
    }
    rc = session_open_legal(&s, argv[2], sets, nsets);
    free(sets);
    if (!rc) {
        printf("candidates for %s%s%s:\n", s.contract->name, wall ? ", wall " : "",
               wall ? wall : "");
        print_meshes(s.cfg, s.contract, "  current: ");
        rc = list_candidates(&s, wall, mask);
        if (!rc)
            list_not_offered(&s);
    }
    session_close(&s);
    return rc;
}

static int cmd_calibration(int argc, char **argv)
{
    int bad;
    if (argc > 2 && !strcmp(argv[2], "--fit")) {
        printf("refitting the fitted constants (write them into workers/sim/simconst.c):\n");
        sim_calibration_fit(stdout, 40);
    } else if (argc > 2) {
        fprintf(stderr, "moetune calibration: unknown option '%s'\n", argv[2]);
        return EXIT_USAGE;
    }
    bad = sim_calibration_table(stdout);
    printf("\nqualitative landscape:\n");
    bad += sim_landscape_check(stdout);
    return bad ? 1 : 0;
}

/* The base's line of `moetune optimum`: its throughput only when it is a
 * usable base (the sim runs it and its hottest rank keeps the headroom);
 * otherwise why not, with the sim's peak and the analytic estimate. */
static void print_optimum_base(const mt_optimum *o, const mt_kv *base, const mt_contract *c)
{
    mt_mem_estimate m;
    char est[96] = "";
    double usable = 0;
    if (mt_memory_estimate(base, c->hardware, &m) == 0) {
        usable = m.hbm_gb * (1 - c->memory_headroom);
        snprintf(est, sizeof est, "estimate %.1f GB", m.hottest->total);
    }
    if (o->base_tflops <= 0) {
        printf("base: not usable: the sim refuses it (run `moetune check` on the contract)\n");
        return;
    }
    if (!o->base_fits) {
        printf("base: does not fit (hottest GPU %.1f GB in the sim%s%s, of %.1f GB usable at "
               "%.0f%% headroom); not a usable base, no gain over it is claimed\n",
               o->base_peak_gb, est[0] ? ", " : "", est, usable, c->memory_headroom * 100);
        return;
    }
    printf("base: %.1f TFLOP/s/GPU (fits: hottest GPU %.1f GB in the sim%s%s, of %.1f GB "
           "usable)\n",
           o->base_tflops, o->base_peak_gb, est[0] ? ", " : "", est, usable);
}

static int cmd_optimum(const char *path)
{
    session s;
    mt_optimum o;
    mt_diag *d;
    int rc = session_open(&s, path, 0);
    if (rc) {
        session_close(&s);
        return rc;
    }
    d = mt_diag_new();
    rc = mt_optimum_find(s.reg, s.contract, s.cfg, 5000000, &o, d);
    mt_diag_print(d, stderr);
    if (rc == 0) {
        printf("search space: %zu configs, %zu legal, %zu fit in memory (%.0f%% headroom)\n",
               o.grid, o.legal, o.fitting, s.contract->memory_headroom * 100);
        printf("evaluated in %.3f s (%.0f configs/s, legality by the plugins and the sim)\n",
               o.seconds, o.seconds > 0 ? o.grid / o.seconds : 0.0);
        print_optimum_base(&o, s.cfg, s.contract);
        if (o.best) {
            mt_strlist diff = {0};
            size_t i;
            char id[17], over[64] = "";
            mt_config_id(o.best, id);
            /* a gain is only claimed over a base that runs and fits */
            if (o.base_tflops > 0 && o.base_fits)
                snprintf(over, sizeof over, ", %+.1f%% over the base",
                         100 * (o.best_tflops / o.base_tflops - 1));
            printf("optimum: %.1f TFLOP/s/GPU, %.3f s/step (config %s%s)\n", o.best_tflops,
                   o.best_step_s, id, over);
            mt_config_diff(s.cfg, o.best, &diff);
            for (i = 0; i < diff.n; i++)
                printf("  %s\n", diff.v[i]);
            mt_strlist_free(&diff);
            mt_kv_destroy(&o.best);
        } else {
            printf("optimum: no config of the space is legal and fits\n");
        }
    }
    mt_diag_destroy(&d);
    session_close(&s);
    return rc ? EXIT_BAD_INPUT : 0;
}

static int cmd_runs(int argc, char **argv)
{
    mt_diag *d = mt_diag_new();
    mt_store *st;
    int fmt = MT_STORE_TEXT, rc;
    if (argc < 3) {
        fprintf(stderr, "moetune runs: missing DIR\n");
        mt_diag_destroy(&d);
        return EXIT_USAGE;
    }
    if (argc > 3 && !strcmp(argv[3], "--csv"))
        fmt = MT_STORE_CSV;
    else if (argc > 3 && !strcmp(argv[3], "--json"))
        fmt = MT_STORE_JSON;
    else if (argc > 3) {
        fprintf(stderr, "moetune runs: unknown option '%s' (--csv or --json)\n", argv[3]);
        mt_diag_destroy(&d);
        return EXIT_USAGE;
    }
    st = mt_store_open(argv[2], NULL, d);
    if (!st) {
        mt_diag_print(d, stderr);
        mt_diag_destroy(&d);
        return EXIT_BAD_INPUT;
    }
    rc = mt_store_print_runs(st, stdout, fmt, d);
    mt_diag_print(d, stderr);
    mt_store_close(&st);
    mt_diag_destroy(&d);
    return rc ? 1 : 0;
}

/* The simulator beside this executable (build tree or install), unless
 * MOETUNE_SIM names another. */
static void sim_path(char *buf, size_t n)
{
    const char *env = getenv("MOETUNE_SIM");
    char exe[PATH_MAX];
    ssize_t len;
    if (env && *env) {
        snprintf(buf, n, "%s", env);
        return;
    }
    len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        char *slash;
        exe[len] = '\0';
        slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            if ((size_t)snprintf(buf, n, "%.*s/moetune-sim", (int)(n > 13 ? n - 13 : 0), exe) < n &&
                access(buf, X_OK) == 0)
                return;
        }
    }
    snprintf(buf, n, "moetune-sim");
}

static int cmd_measure(int argc, char **argv)
{
    session s;
    const char *dir = NULL, *kind = "screen";
    char **sets = calloc((size_t)argc, sizeof *sets), simbin[PATH_MAX], rundir[PATH_MAX];
    size_t nsets = 0, i;
    int replicate = 0, rc, j;
    mt_diag *d;
    mt_store *st;
    mt_measure m;
    mt_measure_spec spec;
    for (j = 3; j < argc; j++) {
        if (!strcmp(argv[j], "--dir") && j + 1 < argc)
            dir = argv[++j];
        else if (!strcmp(argv[j], "--kind") && j + 1 < argc)
            kind = argv[++j];
        else if (!strcmp(argv[j], "--replicate") && j + 1 < argc)
            replicate = atoi(argv[++j]);
        else if (!strcmp(argv[j], "--set") && j + 1 < argc)
            sets[nsets++] = argv[++j];
        else {
            fprintf(stderr, "moetune measure: unknown or incomplete option '%s'\n", argv[j]);
            free(sets);
            return EXIT_USAGE;
        }
    }
    if (!dir || (strcmp(kind, "screen") && strcmp(kind, "validate"))) {
        fprintf(stderr, "moetune measure: needs --dir DIR, and --kind screen or validate\n");
        free(sets);
        return EXIT_USAGE;
    }
    rc = session_open_legal(&s, argv[2], sets, nsets);
    free(sets);
    if (rc) {
        session_close(&s);
        return rc;
    }
    d = mt_diag_new();
    st = mt_store_open(dir, s.contract, d);
    if (!st) {
        mt_diag_print(d, stderr);
        mt_diag_destroy(&d);
        session_close(&s);
        return EXIT_BAD_INPUT;
    }
    sim_path(simbin, sizeof simbin);
    {
        char id[17];
        mt_store_run prev;
        mt_measure_config_id(s.contract, s.cfg, kind, id);
        memset(&prev, 0, sizeof prev);
        if (mt_store_find_run(st, id, kind, replicate, -1, &prev, d) == 1 &&
            strcmp(prev.outcome, "infra")) {
            printf("already measured: config %s %s replicate %d: %s (run %lld); not run again\n",
                   id, kind, replicate, prev.outcome, (long long)prev.id);
            mt_store_run_clear(&prev);
            mt_store_close(&st);
            mt_diag_destroy(&d);
            session_close(&s);
            return 0;
        }
        mt_store_run_clear(&prev);
        snprintf(rundir, sizeof rundir, "%s/runs", dir);
        mkdir(rundir, 0755);
        snprintf(rundir, sizeof rundir, "%s/runs/%s-%s-r%d", dir, id, kind, replicate);
    }
    memset(&spec, 0, sizeof spec);
    spec.contract = s.contract;
    spec.reg = s.reg;
    spec.config = s.cfg;
    spec.kind = kind;
    spec.replicate = replicate;
    spec.run_dir = rundir;
    spec.sim_path = simbin;
    rc = mt_measure_run(&spec, st, &m, d);
    mt_diag_print(d, stderr);
    if (rc == 0) {
        printf("config %s, %s replicate %d: %s\n", m.config_id, kind, replicate,
               mt_outcome_name(m.outcome));
        printf("  evidence: %s\n", m.evidence);
        printf("  window %d-%d: %zu iterations, median %.1f ms/step, %.1f TFLOP/s/GPU\n", m.first,
               m.last, m.n_window, m.median_step_ms, m.median_tflops);
        printf("  loss %s; skipped %ld, NaN %ld\n", m.loss_finite ? "finite" : "NOT finite",
               m.skipped, m.nan);
        printf("  hottest GPU: %.2f GiB on rank %d (from %s)\n", m.peak_bytes / 1073741824.0,
               m.peak_rank, m.peak_source);
        if (m.sim_seconds > 0)
            printf("  simulated time %.0f s\n", m.sim_seconds);
        for (i = 0; i < m.verdicts.n; i++)
            printf("  verify %-34s %-11s %s\n", m.verdicts.v[i].knob,
                   m.verdicts.v[i].verdict == MT_VERDICT_APPLIED       ? "applied"
                   : m.verdicts.v[i].verdict == MT_VERDICT_NOT_APPLIED ? "NOT APPLIED"
                                                                       : "unknown",
                   m.verdicts.v[i].evidence);
        printf("  stored as run %lld in %s; logs in %s\n", (long long)m.run_id, dir, rundir);
        rc = m.outcome == MT_OUTCOME_OK ? 0 : 1;
    } else {
        rc = 1;
    }
    mt_measure_clear(&m); /* a failed store keeps the parsed log and verdicts too */
    mt_store_close(&st);
    mt_diag_destroy(&d);
    session_close(&s);
    return rc;
}

static int cmd_parse(int argc, char **argv)
{
    mt_logparse *p;
    mt_diag *d;
    int json = argc > 3 && !strcmp(argv[3], "--json"), rc;
    if (argc < 3 || (argc > 3 && !json)) {
        fprintf(stderr, "usage: moetune parse LOG [--json]\n");
        return EXIT_USAGE;
    }
    p = mt_logparse_new();
    d = mt_diag_new();
    rc = mt_logparse_read_file(p, argv[2], d);
    if (rc) {
        mt_diag_print(d, stderr);
        mt_diag_destroy(&d);
        mt_logparse_destroy(&p);
        return EXIT_BAD_INPUT;
    }
    mt_logparse_print(p, stdout, json);
    mt_diag_destroy(&d);
    mt_logparse_destroy(&p);
    return 0;
}

#define PROFILE_USAGE                                                                       \
    "usage: moetune profile TRACE [--window A:B] [--device N] [--json] [--compare TRACE2]\n"  \
    "                       [--contract CONTRACT] [--class CLASS:PATTERN]... [--bubble SHARE]\n" \
    "                       [--gap-us US]\n"

/* Opens path, applies the kernel-class rules (contract's first, then the
 * command line's) and builds its profile.  0 or an exit code. */
static int profile_one(const char *path, const mt_contract *c, char **classes, int nclasses,
                       const mt_profile_opts *o, mt_profile *p, mt_diag *d)
{
    mt_trace *t = mt_trace_open(path, d);
    size_t i;
    int rc = 0;
    if (!t)
        return EXIT_BAD_INPUT;
    for (i = 0; c && i < c->n_trace_classes && !rc; i++)
        rc = mt_trace_add_class(t, c->trace_classes[i], d);
    for (i = 0; i < (size_t)nclasses && !rc; i++)
        rc = mt_trace_add_class(t, classes[i], d);
    if (!rc)
        rc = mt_profile_build(t, path, o, p, d);
    mt_trace_destroy(&t);
    return rc ? EXIT_BAD_INPUT : 0;
}

static int cmd_profile(int argc, char **argv)
{
    mt_diag *d;
    mt_contract *c = NULL;
    mt_profile pa, pb;
    mt_profile_opts o;
    const char *compare = NULL, *contract = NULL;
    char **classes = calloc((size_t)argc, sizeof *classes);
    int json = 0, j, nclasses = 0, rc;
    char *end;
    mt_profile_opts_init(&o);
    memset(&pa, 0, sizeof pa);
    memset(&pb, 0, sizeof pb);
    if (!classes)
        return EXIT_BAD_INPUT;
    for (j = 3; j < argc; j++) {
        const char *a = argv[j], *v = j + 1 < argc ? argv[j + 1] : NULL;
        if (!strcmp(a, "--json")) {
            json = 1;
            continue;
        }
        if (!v)
            goto usage;
        j++;
        if (!strcmp(a, "--device")) {
            long x = strtol(v, &end, 10);
            if (*end || x < 0 || x > INT32_MAX)
                goto bad_value;
            o.device = (int)x;
        } else if (!strcmp(a, "--window")) {
            if (sscanf(v, "%d:%d", &o.first, &o.last) != 2 || o.first < 0 || o.last < o.first)
                goto bad_value;
            o.has_steps = 1;
        } else if (!strcmp(a, "--compare")) {
            compare = v;
        } else if (!strcmp(a, "--contract")) {
            contract = v;
        } else if (!strcmp(a, "--class")) {
            classes[nclasses++] = argv[j];
        } else if (!strcmp(a, "--bubble")) {
            o.bubble_share = strtod(v, &end);
            if (*end || !(o.bubble_share >= 0 && o.bubble_share < 1))
                goto bad_value;
        } else if (!strcmp(a, "--gap-us")) {
            o.rules.gap_us = strtod(v, &end);
            if (*end || !(o.rules.gap_us > 0))
                goto bad_value;
        } else {
            goto usage;
        }
        continue;
    bad_value:
        fprintf(stderr, "moetune profile: %s %s: not a valid value\n" PROFILE_USAGE, a, v);
        free(classes);
        return EXIT_USAGE;
    }
    if (argc < 3 || argv[2][0] == '-')
        goto usage;
    d = mt_diag_new();
    if (contract) {
        double gap = o.rules.gap_us;
        if (!(c = mt_contract_load(contract, d))) {
            mt_diag_print(d, stderr);
            mt_diag_destroy(&d);
            free(classes);
            return EXIT_BAD_INPUT;
        }
        o.rules = c->profile;
        if (gap != 20)
            o.rules.gap_us = gap; /* the command line wins */
        o.headroom_gate = c->memory_headroom;
    }
    rc = profile_one(argv[2], c, classes, nclasses, &o, &pa, d);
    if (!rc && compare)
        rc = profile_one(compare, c, classes, nclasses, &o, &pb, d);
    if (rc)
        mt_diag_print(d, stderr);
    else if (compare)
        mt_profile_compare(&pa, &pb, stdout, json);
    else
        mt_profile_print(&pa, stdout, json);
    mt_profile_free(&pa);
    mt_profile_free(&pb);
    mt_contract_destroy(&c);
    mt_diag_destroy(&d);
    free(classes);
    return rc;
usage:
    fputs(PROFILE_USAGE, stderr);
    free(classes);
    return EXIT_USAGE;
}

/* ---- tune and status ------------------------------------------------------------------ */

#define TUNE_USAGE                                                                               \
    "usage: moetune tune CONTRACT --dir DIR [--strategy ofat|grid|random] [--until HH:MM]\n"      \
    "                    [--jobs N] [--executor local|model] [--gpu-hours X] [--runs N]\n"         \
    "                    [--seed N] [--notify CMD] [--quiet]\n"                                  \
    "                    [--workers tcp://HOST:PORT [--keys DIR] [--job-grace S] [--worker-wait S]]\n" \
    "       moetune tune --resume DIR [--jobs N] [--workers ...] [the stored options]\n"        \
    "  Exit: 0 validated (or the baseline stands), 3 not confirmed, 4 nothing fits, 5 not\n"    \
    "  ablated, 1 failed, 2 bad input (also a resume that contradicts the stored tune),\n"     \
    "  75 another process owns DIR, 130/143 stopped by SIGINT/SIGTERM (resume it).\n"

/* "07:00" -> the next such local time (today or tomorrow); 0 when malformed. */
static double parse_until(const char *s)
{
    int h, m;
    char tail;
    time_t now = time(NULL), t;
    struct tm tm;
    if (sscanf(s, "%d:%d%c", &h, &m, &tail) != 2 || h < 0 || h > 23 || m < 0 || m > 59)
        return 0;
    localtime_r(&now, &tm);
    tm.tm_hour = h, tm.tm_min = m, tm.tm_sec = 0;
    t = mktime(&tm);
    if (t <= now)
        t += 24 * 3600;
    return (double)t;
}

static int copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b;
    char buf[65536];
    size_t n;
    int rc = 0;
    if (!a)
        return -1;
    if (!(b = fopen(to, "wb"))) {
        fclose(a);
        return -1;
    }
    while ((n = fread(buf, 1, sizeof buf, a)) > 0)
        if (fwrite(buf, 1, n, b) != n)
            rc = -1;
    fclose(a);
    if (fclose(b))
        rc = -1;
    return rc;
}

/* Runs --notify's argv (split on blanks, no shell) with the bundle path. */
static void notify(const char *cmd, const char *bundle, const char *status)
{
    char *copy = strdup(cmd), *tok, *save = NULL, *av[64];
    int n = 0;
    pid_t pid;
    posix_spawnattr_t at;
    sigset_t none;
    extern char **environ;
    if (!copy)
        return;
    for (tok = strtok_r(copy, " \t", &save); tok && n < 62; tok = strtok_r(NULL, " \t", &save))
        av[n++] = tok;
    av[n++] = (char *)bundle;
    av[n] = NULL;
    setenv("MOETUNE_STATUS", status, 1);
    /* the program gets default signals: moetune tune blocks SIGTERM/SIGINT */
    posix_spawnattr_init(&at);
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK);
    if (n > 1 && posix_spawnp(&pid, av[0], NULL, &at, av, environ) == 0) {
        int st;
        waitpid(pid, &st, 0);
    } else {
        fprintf(stderr, "moetune tune: --notify: cannot run '%s'\n", av[0]);
    }
    posix_spawnattr_destroy(&at);
    free(copy);
}

/* mkdir -p DIR (0755); 0, or -1 after saying why on stderr. */
static int make_dir(const char *cmd, const char *dir)
{
    char p[PATH_MAX], *q;
    struct stat sb;
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) {
        fprintf(stderr, "moetune %s: %s: the path is too long\n", cmd, dir);
        return -1;
    }
    for (q = p + 1; *q; q++)
        if (*q == '/') {
            *q = '\0';
            if (mkdir(p, 0755) != 0 && errno != EEXIST)
                break; /* the last mkdir says why */
            *q = '/';
        }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "moetune %s: cannot create the %s directory %s: %s\n", cmd, cmd, dir,
                strerror(errno));
        return -1;
    }
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "moetune %s: %s is not a directory\n", cmd, dir);
        return -1;
    }
    if (access(dir, W_OK) != 0) {
        /* say why here: the errno of a file inside it would mislead */
        fprintf(stderr, "moetune %s: cannot write into the %s directory %s: %s\n", cmd, cmd, dir,
                strerror(errno));
        return -1;
    }
    return 0;
}

/* Takes DIR for this process (core/dirlock.h): the lock's descriptor, kept
 * open until the process ends; or -1 after printing the refusal, with the
 * exit code in *rc (EXIT_BUSY when another process owns DIR). */
static int own_dir(const char *cmd, const char *dir, const char *what, int *rc)
{
    mt_diag *d = mt_diag_new();
    pid_t owner;
    int fd = mt_dirlock_acquire(dir, what, &owner, d);
    if (fd < 0) {
        fprintf(stderr, "moetune %s: ", cmd);
        mt_diag_print(d, stderr);
        *rc = fd == -EBUSY ? EXIT_BUSY : EXIT_FAILURE;
        fd = -1;
    }
    mt_diag_destroy(&d);
    return fd;
}

/* ---- a tune stopped by SIGTERM or SIGINT ----
 * Both signals are blocked in every thread of `moetune tune` and taken by
 * one thread with sigwait (no handler runs, so nothing in the tune is
 * interrupted half-way); that thread marks status.json stopped, says what
 * was interrupted and how to resume, and ends the process at once with
 * 128 + the signal, exactly as a crash would end it: every finished run is
 * in the store, the shepherds stop the runs in progress, and a resume
 * replays the tune (search/BUNDLE.md, "Stopping a tune"). */
static struct {
    sigset_t set;
    char dir[PATH_MAX];
    char resume[8192];
} stopper;

static void *stop_watch(void *arg)
{
    char phase[64], last[1024];
    int sig = 0;
    (void)arg;
    while (sigwait(&stopper.set, &sig) != 0 || (sig != SIGTERM && sig != SIGINT))
        ;
    mt_tune_mark_stopped(stopper.dir, sig == SIGTERM ? "SIGTERM" : "SIGINT", stopper.resume,
                         phase, sizeof phase, last, sizeof last);
    fprintf(stderr,
            "\nmoetune tune: stopped by %s during %s%s%s%s in %s; every finished run is kept, "
            "the runs in progress are stopped and run again on resume.\nresume with: %s\n",
            sig == SIGTERM ? "SIGTERM" : "SIGINT", phase, last[0] ? " (" : "", last,
            last[0] ? ")" : "", stopper.dir, stopper.resume);
    fflush(stderr);
    _exit(128 + sig);
}

/* Starts the stop thread; 0, or -1 (the tune then runs with the default
 * signal actions). */
static int stop_watch_start(const char *dir, const char *resume)
{
    pthread_t t;
    snprintf(stopper.dir, sizeof stopper.dir, "%s", dir);
    snprintf(stopper.resume, sizeof stopper.resume, "%s", resume);
    sigemptyset(&stopper.set);
    sigaddset(&stopper.set, SIGTERM);
    sigaddset(&stopper.set, SIGINT);
    if (pthread_sigmask(SIG_BLOCK, &stopper.set, NULL) != 0)
        return -1;
    if (pthread_create(&t, NULL, stop_watch, NULL) != 0) {
        pthread_sigmask(SIG_UNBLOCK, &stopper.set, NULL);
        return -1;
    }
    pthread_detach(t);
    return 0;
}

/* Appends " WORD" to buf, shell-quoted. */
static void append_word(char *buf, size_t n, const char *word)
{
    char *q = mt_recipe_sh_quote(word);
    size_t len = strlen(buf);
    snprintf(buf + len, n - len, " %s", q ? q : word);
    free(q);
}

/* The options a tune directory keeps (DIR/tune.opts) and those a resume
 * gave. */
typedef struct given_opts {
    int strategy, executor, gpu_hours, runs, seed;
    const char *until;
} given_opts;

/* A resume's options against the stored ones: each that contradicts them
 * is printed with both values; the number of them. */
static int resume_conflicts(const char *dir, const mt_contract *c, const mt_tune_opts *o,
                            const given_opts *g, int strategy, int executor, double gh, int runs,
                            unsigned long long seed, double until)
{
    int n = 0;
    const char *head = "moetune tune --resume %s: ";
#define CONFLICT(...)                                                                              \
    do {                                                                                           \
        fprintf(stderr, head, dir);                                                                \
        fprintf(stderr, __VA_ARGS__);                                                              \
        n++;                                                                                       \
    } while (0)
    if (g->strategy && o->strategy != strategy)
        CONFLICT("--strategy %s contradicts the stored tune (strategy %s)\n",
                 mt_strategy_name(o->strategy), mt_strategy_name(strategy));
    if (g->seed && o->seed != seed)
        CONFLICT("--seed %llu contradicts the stored tune (seed %llu)\n",
                 (unsigned long long)o->seed, seed);
    if (g->executor && (o->executor == MT_EXEC_MODEL) != (executor == MT_EXEC_MODEL))
        CONFLICT("--executor %s contradicts the stored tune (executor %s)\n",
                 o->executor == MT_EXEC_MODEL ? "model" : "local",
                 executor == MT_EXEC_MODEL ? "model" : "local");
    /* a budget the tune took from the contract is the contract's figure */
    if (g->gpu_hours && (o->gpu_hours > 0 ? o->gpu_hours : c->gpu_hours) !=
                            (gh > 0 ? gh : c->gpu_hours))
        CONFLICT("--gpu-hours %g contradicts the stored tune (%g GPU-hours%s)\n", o->gpu_hours,
                 gh > 0 ? gh : c->gpu_hours, gh > 0 ? "" : ", the contract's budget");
    if (g->runs && (o->runs > 0 ? o->runs : c->max_runs) != (runs > 0 ? runs : c->max_runs))
        CONFLICT("--runs %d contradicts the stored tune (%d runs%s)\n", o->runs,
                 runs > 0 ? runs : c->max_runs, runs > 0 ? "" : ", the contract's budget");
    if (g->until) {
        /* the stored deadline is a moment; --until names a time of day:
         * the same HH:MM is the same deadline */
        char was[16] = "";
        time_t t = (time_t)until;
        struct tm tm;
        int h = -1, m = -1;
        if (until > 0 && localtime_r(&t, &tm))
            strftime(was, sizeof was, "%H:%M", &tm);
        if (sscanf(g->until, "%d:%d", &h, &m) != 2 || !was[0] ||
            h != (was[0] - '0') * 10 + (was[1] - '0') || m != (was[3] - '0') * 10 + (was[4] - '0'))
            CONFLICT("--until %s contradicts the stored tune (%s%s)\n", g->until,
                     was[0] ? "--until " : "the contract's deadline", was);
    }
#undef CONFLICT
    if (n)
        fprintf(stderr,
                "moetune tune --resume %s: a resume continues the tune as it was started (its "
                "options are in %s/tune.opts): drop %s, or start a new tune in another "
                "directory\n",
                dir, dir, n == 1 ? "that option" : "those options");
    return n;
}

/* The bundle's recommendation when it is "benchmark only" (validated with
 * the contract's forced routing, not backed with natural routing): the
 * line that says not to train with the winner, beside "validated". */
static void print_benchmark_only(const char *bundle)
{
    FILE *f = fopen(bundle, "r");
    char *text = NULL;
    long size;
    cJSON *b, *rec;
    if (!f)
        return;
    if (fseek(f, 0, SEEK_END) || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) ||
        !(text = malloc((size_t)size + 1)) || fread(text, 1, (size_t)size, f) != (size_t)size) {
        free(text);
        fclose(f);
        return;
    }
    fclose(f);
    text[size] = '\0';
    b = cJSON_Parse(text);
    free(text);
    rec = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(b, "validation"),
                                           "recommendation");
    if (cJSON_IsString(rec) && !strncmp(rec->valuestring, "benchmark only: ", 16))
        printf("recommendation: %s\n", rec->valuestring);
    cJSON_Delete(b);
}

static int cmd_tune(int argc, char **argv)
{
    session s;
    mt_tune_opts o;
    mt_tune_result res;
    const char *dir = NULL, *contract = NULL, *notify_cmd = NULL;
    char simbin[PATH_MAX], path[PATH_MAX], saved[PATH_MAX], resume[8192];
    int j, rc, quiet = 0, lock = -1;
    mt_diag *d;
    struct stat sb;
    given_opts given;
    memset(&given, 0, sizeof given);
    mt_tune_opts_init(&o);
    for (j = 2; j < argc; j++) {
        const char *a = argv[j], *v = j + 1 < argc ? argv[j + 1] : NULL;
        if (!strcmp(a, "--quiet")) {
            quiet = 1;
            continue;
        }
        if (a[0] != '-') {
            if (contract)
                goto usage;
            contract = a;
            continue;
        }
        if (!v)
            goto usage;
        j++;
        if (!strcmp(a, "--dir"))
            dir = v;
        else if (!strcmp(a, "--resume"))
            dir = v, o.resume = 1;
        else if (!strcmp(a, "--strategy")) {
            if ((o.strategy = mt_strategy_parse(v)) < 0)
                goto usage;
            given.strategy = 1;
        } else if (!strcmp(a, "--until")) {
            if (!(o.until = parse_until(v))) {
                fprintf(stderr, "moetune tune: --until %s: write a local time HH:MM\n", v);
                return EXIT_USAGE;
            }
            given.until = v;
        } else if (!strcmp(a, "--jobs")) {
            if (opt_int("tune", a, v, 1, &o.slots))
                return EXIT_USAGE;
        } else if (!strcmp(a, "--executor")) {
            if (strcmp(v, "model") && strcmp(v, "local")) {
                fprintf(stderr, "moetune tune: --executor %s: write local or model\n", v);
                return EXIT_USAGE;
            }
            o.executor = !strcmp(v, "model") ? MT_EXEC_MODEL : MT_EXEC_LOCAL, given.executor = 1;
        } else if (!strcmp(a, "--gpu-hours")) {
            if (opt_double("tune", a, v, 0, 1, &o.gpu_hours))
                return EXIT_USAGE;
            given.gpu_hours = 1;
        } else if (!strcmp(a, "--runs")) {
            if (opt_int("tune", a, v, 1, &o.runs))
                return EXIT_USAGE;
            given.runs = 1;
        } else if (!strcmp(a, "--seed")) {
            unsigned long long seed;
            if (opt_u64("tune", a, v, &seed))
                return EXIT_USAGE;
            o.seed = seed, given.seed = 1;
        }
        else if (!strcmp(a, "--notify"))
            notify_cmd = v;
        else if (!strcmp(a, "--workers"))
            o.workers = v, o.executor = MT_EXEC_ZMQ;
        else if (!strcmp(a, "--keys"))
            o.key_dir = v;
        else if (!strcmp(a, "--job-grace")) {
            if (opt_double("tune", a, v, 0, 0, &o.job_grace_s))
                return EXIT_USAGE;
        } else if (!strcmp(a, "--worker-wait")) {
            if (opt_double("tune", a, v, 0, 0, &o.worker_wait_s))
                return EXIT_USAGE;
        } else
            goto usage;
    }
    if (!dir || (!contract && !o.resume) || (contract && o.resume) || o.slots < 1)
        goto usage;
    snprintf(saved, sizeof saved, "%s/contract.path", dir);
    if (o.resume) {
        FILE *f = fopen(saved, "r");
        if (!f || !fgets(path, sizeof path, f)) {
            fprintf(stderr, "moetune tune --resume %s: not a tune directory (no contract.path)\n",
                    dir);
            if (f)
                fclose(f);
            return EXIT_BAD_INPUT;
        }
        fclose(f);
        path[strcspn(path, "\n")] = '\0';
        if (stat(path, &sb)) { /* moved: the copy taken at the start */
            snprintf(path, sizeof path, "%s/contract.cfg", dir);
        }
        contract = path;
        /* one owner per tune directory, before anything is read for the tune */
        if ((lock = own_dir("tune --resume", dir, "tune", &rc)) < 0)
            return rc;
    } else {
        char store[PATH_MAX];
        snprintf(store, sizeof store, "%s/moetune.db", dir);
        if (stat(store, &sb) == 0) {
            fprintf(stderr,
                    "moetune tune: %s already holds a tune; continue it with --resume %s, or "
                    "choose a new directory\n",
                    dir, dir);
            return EXIT_BAD_INPUT;
        }
    }
    rc = session_open(&s, contract, 0);
    if (rc) {
        session_close(&s);
        mt_dirlock_release(&lock);
        return rc;
    }
    if (s.contract->template_bisect || s.contract->srun_bisect) {
        /* refused before any run: every job would fail to launch */
        fprintf(stderr,
                "moetune tune: %s: %s names {rev} or {work}, which only `moetune "
                "bisect` fills; drop them from %s to tune\n",
                contract,
                s.contract->template_bisect ? "launch.template" : "a launch.srun container setting",
                s.contract->template_bisect ? "the template" : "the container settings");
        session_close(&s);
        mt_dirlock_release(&lock);
        return EXIT_BAD_INPUT;
    }
    if (!o.resume) {
        char store[PATH_MAX];
        if (make_dir("tune", dir) || (lock = own_dir("tune", dir, "tune", &rc)) < 0) {
            session_close(&s);
            return lock < 0 && rc ? rc : EXIT_BAD_INPUT;
        }
        /* again, now that it is ours: a tune started here since */
        snprintf(store, sizeof store, "%s/moetune.db", dir);
        if (stat(store, &sb) == 0) {
            fprintf(stderr,
                    "moetune tune: %s already holds a tune; continue it with --resume %s, or "
                    "choose a new directory\n",
                    dir, dir);
            session_close(&s);
            mt_dirlock_release(&lock);
            return EXIT_BAD_INPUT;
        }
    }
    d = mt_diag_new();
    if (!o.resume) {
        char copy[PATH_MAX], real[PATH_MAX];
        FILE *f;
        snprintf(copy, sizeof copy, "%s/contract.cfg", dir);
        if (!realpath(contract, real))
            snprintf(real, sizeof real, "%s", contract);
        if (copy_file(contract, copy) || !(f = fopen(saved, "w"))) {
            fprintf(stderr, "moetune tune: cannot write into %s: %s\n", dir, strerror(errno));
            mt_diag_destroy(&d);
            session_close(&s);
            return EXIT_BAD_INPUT;
        }
        fprintf(f, "%s\n", real);
        fclose(f);
        /* the options a resume must keep: the same budget, strategy, seed */
        snprintf(copy, sizeof copy, "%s/tune.opts", dir);
        if ((f = fopen(copy, "w"))) {
            fprintf(f, "%d %d %.17g %d %llu %.17g\n", o.strategy, o.executor, o.gpu_hours, o.runs,
                    (unsigned long long)o.seed, o.until);
            fclose(f);
        }
    } else {
        char copy[PATH_MAX];
        FILE *f;
        int strategy, executor, runs;
        double gh, until;
        unsigned long long seed;
        snprintf(copy, sizeof copy, "%s/tune.opts", dir);
        if ((f = fopen(copy, "r"))) {
            if (fscanf(f, "%d %d %lg %d %llu %lg", &strategy, &executor, &gh, &runs, &seed,
                       &until) == 6) {
                if (resume_conflicts(dir, s.contract, &o, &given, strategy, executor, gh, runs, seed,
                                     until)) {
                    fclose(f);
                    mt_diag_destroy(&d);
                    session_close(&s);
                    mt_dirlock_release(&lock);
                    return EXIT_BAD_INPUT;
                }
                o.strategy = strategy, o.seed = seed;
                if (o.executor != MT_EXEC_ZMQ) /* the same jobs on other executors */
                    o.executor = executor == MT_EXEC_ZMQ ? MT_EXEC_LOCAL : executor;
                if (o.gpu_hours <= 0)
                    o.gpu_hours = gh;
                if (o.runs <= 0)
                    o.runs = runs;
                if (o.until <= 0)
                    o.until = until;
            }
            fclose(f);
        }
    }
    sim_path(simbin, sizeof simbin);
    o.sim_path = simbin;
    o.dir = dir;
    o.progress = quiet ? NULL : stderr;
    o.tty = !quiet && isatty(2);
    /* the command that continues this tune: what tune.opts does not keep */
    snprintf(resume, sizeof resume, "moetune tune --resume");
    append_word(resume, sizeof resume, dir);
    if (o.slots > 1) {
        char n[32];
        snprintf(n, sizeof n, "%d", o.slots);
        append_word(resume, sizeof resume, "--jobs");
        append_word(resume, sizeof resume, n);
    }
    if (o.workers) {
        append_word(resume, sizeof resume, "--workers");
        append_word(resume, sizeof resume, o.workers);
    }
    if (o.workers && o.key_dir) {
        append_word(resume, sizeof resume, "--keys");
        append_word(resume, sizeof resume, o.key_dir);
    }
    if (stop_watch_start(dir, resume))
        fprintf(stderr, "moetune tune: cannot watch for SIGTERM/SIGINT; they stop the tune "
                        "without a word\n");
    rc = mt_tune(s.reg, s.contract, &o, &res, d);
    if (rc) {
        mt_diag_print(d, stderr);
        if (notify_cmd)
            notify(notify_cmd, "", "failed");
        rc = res.refused ? EXIT_BAD_INPUT : EXIT_FAILURE;
    } else {
        static const char *const words[] = {"validated", "not-confirmed", "baseline-only",
                                            "nothing-fits"};
        printf("bundle: %s\nreport: %s/report.html\n", res.bundle, dir);
        if (isfinite(res.gain))
            printf("validated gain: %.2f%% shorter steps (%s)\n", 100 * res.gain,
                   words[res.status]);
        print_benchmark_only(res.bundle);
        if (res.not_ablated)
            printf("winner not ablated: the budget left %d of %d accepted changes without their "
                   "leave-one-out A/B\n",
                   res.not_ablated, res.accepted);
        else
            printf("result: %s (%s)\n",
                   res.status == 3 && strstr(res.stopped, "does not run") ? "failed"
                                                                          : words[res.status],
                   res.stopped);
        printf("spent: %.1f GPU-hours, %d runs (%d executed now)\n", res.gpu_hours, res.runs,
               res.runs_executed);
        /* status 3: nothing fits, or the base itself does not run */
        if (res.status == 3 && strstr(res.stopped, "does not run")) {
            if (notify_cmd)
                notify(notify_cmd, res.bundle, "failed");
            rc = EXIT_FAILURE;
        } else {
            if (notify_cmd)
                notify(notify_cmd, res.bundle, words[res.status]);
            rc = res.status == 0 || res.status == 2 ? 0 : res.status == 1 ? 3 : 4;
            if (rc == 0 && res.not_ablated)
                rc = EXIT_NOT_ABLATED;
        }
    }
    mt_tune_result_free(&res);
    mt_diag_destroy(&d);
    session_close(&s);
    mt_dirlock_release(&lock);
    return rc;
usage:
    fputs(TUNE_USAGE, stderr);
    return EXIT_USAGE;
}

/* ---- bisect ------------------------------------------------------------------------- */

#define BISECT_USAGE                                                                               \
    "usage: moetune bisect CONTRACT --good REV --bad REV (--repo PATH | --revs FILE) --dir DIR\n"  \
    "       moetune bisect CONTRACT --good-config GOOD.cfg --bad-config BAD.cfg --dir DIR\n"       \
    "                      [--prepare 'ARGV TEMPLATE']... [--prepare-timeout S] [--jobs N]\n"      \
    "                      [--workers tcp://HOST:PORT [--keys DIR] [--job-grace S]\n"              \
    "                      [--worker-wait S]] [--quiet]\n"                                         \
    "  templates: words split at blanks, '...' or \"...\" group, no shell; placeholders\n"         \
    "  {rev} {work} {repo}; a step exiting 125 skips the revision.  --revs FILE: one\n"            \
    "  revision a line, oldest first: commits, tags, stack versions or container images\n"         \
    "  (the contract's launch.srun container settings take {rev} too).  --good-config and\n"       \
    "  --bad-config: two contracts (e.g. from moetune import) of the contract's model,\n"          \
    "  hardware and stack; the knob changes between their base configs are bisected.\n"            \
    "  Run the same command\n"                                                                     \
    "  with the same --dir to resume.  Exit: 0 culprit found, 3 regression not reproduced,\n"      \
    "  1 failed, 2 bad input, 75 another process owns DIR.\n"

static int cmd_bisect(int argc, char **argv)
{
    session s;
    mt_bisect_opts o;
    const char *contract = NULL, **prep = calloc((size_t)argc + 1, sizeof *prep);
    char simbin[PATH_MAX];
    int j, rc, quiet = 0, outcome = 0, lock = -1;
    mt_diag *d;
    memset(&o, 0, sizeof o);
    o.executor = MT_EXEC_LOCAL;
    o.slots = 1;
    if (!prep)
        return EXIT_FAILURE;
    for (j = 2; j < argc; j++) {
        const char *a = argv[j], *v = j + 1 < argc ? argv[j + 1] : NULL;
        if (!strcmp(a, "--quiet")) {
            quiet = 1;
            continue;
        }
        if (a[0] != '-') {
            if (contract)
                goto usage;
            contract = a;
            continue;
        }
        if (!v)
            goto usage;
        j++;
        if (!strcmp(a, "--good"))
            o.good = v;
        else if (!strcmp(a, "--bad"))
            o.bad = v;
        else if (!strcmp(a, "--repo"))
            o.repo = v;
        else if (!strcmp(a, "--revs"))
            o.revs_file = v;
        else if (!strcmp(a, "--good-config"))
            o.good_config = v;
        else if (!strcmp(a, "--bad-config"))
            o.bad_config = v;
        else if (!strcmp(a, "--dir"))
            o.dir = v;
        else if (!strcmp(a, "--prepare"))
            prep[o.n_prepare++] = v;
        else if (!strcmp(a, "--prepare-timeout")) {
            if (opt_double("bisect", a, v, 0, 1, &o.prepare_timeout_s))
                goto bad_value;
        } else if (!strcmp(a, "--jobs")) {
            if (opt_int("bisect", a, v, 1, &o.slots))
                goto bad_value;
        } else if (!strcmp(a, "--workers"))
            o.workers = v, o.executor = MT_EXEC_ZMQ;
        else if (!strcmp(a, "--keys"))
            o.key_dir = v;
        else if (!strcmp(a, "--job-grace")) {
            if (opt_double("bisect", a, v, 0, 0, &o.job_grace_s))
                goto bad_value;
        } else if (!strcmp(a, "--worker-wait")) {
            if (opt_double("bisect", a, v, 0, 0, &o.worker_wait_s))
                goto bad_value;
        } else
            goto usage;
    }
    if (o.good_config || o.bad_config) {
        /* the config source: two contracts, nothing to check out */
        if (!contract || !o.good_config || !o.bad_config || !o.dir || o.good || o.bad || o.repo ||
            o.revs_file || o.n_prepare || o.slots < 1) {
            fputs("moetune bisect: --good-config and --bad-config go together, with --dir, and "
                  "without --good, --bad, --repo, --revs or --prepare\n", stderr);
            goto usage;
        }
    } else if (!contract || !o.good || !o.bad || !o.dir || !o.repo == !o.revs_file ||
               o.slots < 1 || o.prepare_timeout_s < 0)
        goto usage;
    o.prepare = prep;
    /* every prepare template must split and expand before anything runs */
    {
        mt_strlist *steps = NULL;
        size_t i;
        d = mt_diag_new();
        if (mt_prepare_expand(prep, o.n_prepare, "REV", o.repo, "WORK", &steps, d)) {
            mt_diag_print(d, stderr);
            mt_diag_destroy(&d);
            free(prep);
            return EXIT_BAD_INPUT;
        }
        for (i = 0; i < o.n_prepare; i++)
            mt_strlist_free(&steps[i]);
        free(steps);
        mt_diag_destroy(&d);
    }
    rc = session_open(&s, contract, 0);
    if (rc) {
        session_close(&s);
        free(prep);
        return rc;
    }
    /* one owner per bisection directory */
    if (make_dir("bisect", o.dir) || (lock = own_dir("bisect", o.dir, "bisection", &rc)) < 0) {
        session_close(&s);
        free(prep);
        return lock < 0 && rc ? rc : EXIT_BAD_INPUT;
    }
    sim_path(simbin, sizeof simbin);
    o.sim_path = simbin;
    o.progress = quiet ? NULL : stderr;
    d = mt_diag_new();
    rc = mt_bisect_cmd(s.reg, s.contract, &o, &outcome, d);
    if (rc) {
        mt_diag_print(d, stderr);
        rc = rc == -EINVAL ? EXIT_BAD_INPUT : EXIT_FAILURE;
    } else {
        rc = outcome == MT_BISECT_FOUND ? 0 : outcome == MT_BISECT_NOT_REPRODUCED ? 3 : 1;
    }
    mt_diag_destroy(&d);
    session_close(&s);
    mt_dirlock_release(&lock);
    free(prep);
    return rc;
usage:
    free(prep);
    fputs(BISECT_USAGE, stderr);
    return EXIT_USAGE;
bad_value: /* named by opt_* */
    free(prep);
    return EXIT_USAGE;
}

/* moetune worker: a ZeroMQ worker (workers/PROTOCOL.md). */
static int cmd_worker(int argc, char **argv)
{
    mt_worker_opts o;
    const char **allow = calloc((size_t)argc + 1, sizeof *allow);
    char simbin[PATH_MAX], keydir[PATH_MAX] = "", *slash;
    int j, rc;
    memset(&o, 0, sizeof o);
    o.dir = "moetune-worker";
    o.gpus = 8;
    o.nodes = 1;
    o.launchers = "local";
    if (!allow)
        return EXIT_FAILURE;
    for (j = 2; j < argc; j++) {
        const char *a = argv[j], *v = j + 1 < argc ? argv[j + 1] : NULL;
        if (!strcmp(a, "--bench-echo")) {
            /* benchmark only (tests/bench/bench_workers.c): answers every job
             * at once with a synthetic result, runs nothing */
            o.bench_echo = 1;
            continue;
        }
        if (!v)
            goto usage;
        j++;
        if (!strcmp(a, "--connect"))
            o.connect = v;
        else if (!strcmp(a, "--name"))
            o.name = v;
        else if (!strcmp(a, "--dir"))
            o.dir = v;
        else if (!strcmp(a, "--allow"))
            allow[o.n_allow++] = v;
        else if (!strcmp(a, "--key")) {
            snprintf(keydir, sizeof keydir, "%s", v);
            if (!(slash = strrchr(keydir, '/')))
                goto usage;
            *slash = '\0';
            o.key_dir = keydir;
            o.key_name = slash + 1;
        } else if (!strcmp(a, "--server-key"))
            o.server_key = v;
        else if (!strcmp(a, "--gpus"))
            o.gpus = atoi(v);
        else if (!strcmp(a, "--gpu-type"))
            o.gpu_type = v;
        else if (!strcmp(a, "--nodes"))
            o.nodes = atoi(v);
        else if (!strcmp(a, "--launchers"))
            o.launchers = v;
        else if (!strcmp(a, "--idle-exit"))
            o.exit_when_idle_s = atoi(v);
        else
            goto usage;
    }
    if (!o.connect)
        goto usage;
    sim_path(simbin, sizeof simbin);
    o.sim_path = simbin;
    if (!o.n_allow)
        allow[o.n_allow++] = simbin; /* by default: the simulator only */
    o.trust_plugin_path = trust_plugin_path;
    o.allow = allow;
    rc = mt_worker_main(&o);
    free(allow);
    return rc;
usage:
    fprintf(stderr, "usage: moetune worker --connect tcp://HOST:PORT [--name NAME] [--dir DIR]\n"
                    "       [--allow PROGRAM]... [--key DIR/NAME --server-key FILE]\n"
                    "       [--gpus N] [--gpu-type T] [--nodes N] [--launchers local,srun]\n"
                    "       [--trust-plugin-path] [--plugin-timeout S]\n");
    free(allow);
    return EXIT_USAGE;
}

/* moetune keygen DIR NAME [--force]: a CURVE keypair. */
static int cmd_keygen(int argc, char **argv)
{
    char pub[64], err[512];
    int force = argc == 5 && !strcmp(argv[4], "--force");
    if (argc != 4 && !force) {
        fprintf(stderr, "usage: moetune keygen DIR NAME [--force]\n"
                        "  the coordinator's keys are DIR/coordinator.key and .pub; a worker's\n"
                        "  public key goes into the coordinator's DIR/workers/\n");
        return EXIT_USAGE;
    }
    mkdir(argv[2], 0700);
    if (mt_keys_generate(argv[2], argv[3], force, pub, err, sizeof err)) {
        fprintf(stderr, "moetune keygen: %s\n", err);
        return EXIT_BAD_INPUT;
    }
    printf("%s/%s.key (secret, 0600) and %s/%s.pub written\n", argv[2], argv[3], argv[2],
           argv[3]);
    return 0;
}

/* The throughput line of status.json's figures: the baseline's and the
 * best config's median model TFLOP/s per GPU (logged or computed) and
 * tokens/s per GPU, from the same window as their step times. */
static void status_throughput(const char *text)
{
    cJSON *o = cJSON_Parse(text);
    static const char *const who[] = {"baseline", "best"};
    int i, any = 0;
    for (i = 0; o && i < 2; i++) {
        char k[64];
        const cJSON *tf, *src, *tok;
        snprintf(k, sizeof k, "%s_tflops", who[i]);
        tf = cJSON_GetObjectItemCaseSensitive(o, k);
        snprintf(k, sizeof k, "%s_tflops_source", who[i]);
        src = cJSON_GetObjectItemCaseSensitive(o, k);
        snprintf(k, sizeof k, "%s_tokens_per_s_per_gpu", who[i]);
        tok = cJSON_GetObjectItemCaseSensitive(o, k);
        if (!cJSON_IsNumber(tf) && !cJSON_IsNumber(tok))
            continue;
        printf("%s %s: ", any++ ? ";" : "throughput", who[i]);
        if (cJSON_IsNumber(tf))
            printf("%.1f TFLOP/s/GPU (%s)", tf->valuedouble,
                   cJSON_IsString(src) ? src->valuestring : "logged");
        else
            printf("n/a TFLOP/s/GPU");
        if (cJSON_IsNumber(tok))
            printf(", %.0f tokens/s/GPU", tok->valuedouble);
    }
    if (any)
        printf("\n");
    cJSON_Delete(o);
}

/* Whether the tune status.json describes is still running: a stopped tune
 * (phase "stopped") and one whose process is gone without a word (killed,
 * crashed: nobody owns the directory, core/dirlock.h) say so, and how to
 * resume. */
static void status_liveness(const char *dir, const char *text)
{
    cJSON *o = cJSON_Parse(text);
    const cJSON *phase = cJSON_GetObjectItemCaseSensitive(o, "phase");
    const cJSON *pid = cJSON_GetObjectItemCaseSensitive(o, "pid");
    char *q = mt_recipe_sh_quote(dir);
    pid_t owner = 0;
    if (cJSON_IsString(phase) && !strcmp(phase->valuestring, "stopped")) {
        const cJSON *sig = cJSON_GetObjectItemCaseSensitive(o, "signal");
        const cJSON *was = cJSON_GetObjectItemCaseSensitive(o, "interrupted");
        const cJSON *res = cJSON_GetObjectItemCaseSensitive(o, "resume");
        printf("stopped: by %s during %s; resume with: %s\n",
               cJSON_IsString(sig) ? sig->valuestring : "a signal",
               cJSON_IsString(was) ? was->valuestring : "the tune",
               cJSON_IsString(res) ? res->valuestring : "moetune tune --resume DIR");
    } else if (cJSON_IsString(phase) && strcmp(phase->valuestring, "done") &&
               mt_dirlock_owner(dir, &owner) == 0) {
        printf("not running: process %.0f that wrote this is gone (killed or crashed); resume "
               "with: moetune tune --resume %s\n",
               cJSON_IsNumber(pid) ? pid->valuedouble : -1.0, q ? q : dir);
    }
    free(q);
    cJSON_Delete(o);
}

/* moetune status DIR: the live state a tune writes, and its store. */
/* Whether DIR's tune runs the model executor (tune.opts' second field). */
static int model_executor(const char *dir)
{
    char path[PATH_MAX];
    int strategy, executor = -1;
    FILE *f;
    snprintf(path, sizeof path, "%s/tune.opts", dir);
    if (!(f = fopen(path, "r")))
        return 0;
    if (fscanf(f, "%d %d", &strategy, &executor) != 2)
        executor = -1;
    fclose(f);
    return executor == MT_EXEC_MODEL;
}

static int cmd_status(int argc, char **argv)
{
    char path[PATH_MAX], buf[8192];
    FILE *f;
    size_t n;
    mt_diag *d;
    mt_store *st;
    mt_store_run *runs = NULL;
    size_t nr = 0, i, ok = 0;
    double gh = 0;
    if (argc != 3) {
        fprintf(stderr, "usage: moetune status DIR\n");
        return EXIT_USAGE;
    }
    snprintf(path, sizeof path, "%s/status.json", argv[2]);
    if ((f = fopen(path, "r"))) {
        n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        fclose(f);
        fputs(buf, stdout);
        status_throughput(buf);
        status_liveness(argv[2], buf);
    } else {
        fprintf(stderr, "%s: no status.json (not a tune directory, or it has not started)\n",
                argv[2]);
        return EXIT_BAD_INPUT;
    }
    d = mt_diag_new();
    if ((st = mt_store_open(argv[2], NULL, d)) &&
        mt_store_list_runs(st, NULL, NULL, &runs, &nr, d) == 0) {
        for (i = 0; i < nr; i++) {
            ok += !strcmp(runs[i].outcome, "ok");
            gh += isfinite(runs[i].gpu_hours) ? runs[i].gpu_hours : 0;
        }
        printf("store: %zu runs (%zu ok), %.2f GPU-hours\n", nr, ok, gh);
        if (model_executor(argv[2]))
            printf("  (the model executor's runs are predictions of the sim's model, not "
                   "stored as runs: status.json's runs and gpu_hours count them)\n");
        for (i = nr > 5 ? nr - 5 : 0; i < nr; i++)
            printf("  run %lld %s %s r%d: %s\n", (long long)runs[i].id, runs[i].kind,
                   runs[i].config_id, runs[i].replicate, runs[i].outcome);
        mt_store_runs_free(runs, nr);
    } else {
        mt_diag_print(d, stderr);
    }
    mt_store_close(&st);
    mt_diag_destroy(&d);
    snprintf(path, sizeof path, "%s/bundle.json", argv[2]);
    if (access(path, R_OK) == 0)
        printf("finished: %s/report.html\n", argv[2]);
    return 0;
}

static int cmd_demo(int argc, char **argv)
{
    char path[PATH_MAX], dir[PATH_MAX], store[PATH_MAX + 16];
    char *args[8];
    int rc, n = 0, j;
    struct stat sb;
    snprintf(path, sizeof path, "%s/examples/contracts/qwen3-30b-a3b-h100x16.cfg",
             MOETUNE_SOURCE_DIR);
    snprintf(dir, sizeof dir, "moetune-demo");
    for (j = 2; j < argc; j++) {
        if (!strcmp(argv[j], "--dir") && j + 1 < argc)
            snprintf(dir, sizeof dir, "%s", argv[++j]);
        else if (argv[j][0] != '-')
            snprintf(path, sizeof path, "%s", argv[j]);
        else {
            fprintf(stderr, "usage: moetune demo [CONTRACT] [--dir DIR]\n");
            return EXIT_USAGE;
        }
    }
    printf("== moetune check %s\n", path);
    fflush(stdout);
    rc = cmd_check(path);
    if (rc && rc != EXIT_NO_FIT) /* a base that does not fit is the tune's fit phase's job */
        return rc;
    /* an unattended tune on the simulated cluster, from the contract's naive
     * baseline to a validated recipe and its evidence bundle */
    snprintf(store, sizeof store, "%s/moetune.db", dir);
    args[n++] = argv[0];
    args[n++] = "tune";
    if (stat(store, &sb) == 0) {
        printf("\n== moetune tune --resume %s  (a demo tune is already there)\n", dir);
        args[n++] = "--resume";
        args[n++] = dir;
    } else {
        printf("\n== moetune tune %s --dir %s\n", path, dir);
        args[n++] = path;
        args[n++] = "--dir";
        args[n++] = dir;
    }
    args[n] = NULL;
    fflush(stdout);
    rc = cmd_tune(n, args);
    if (rc == 0 || rc == 3 || rc == EXIT_NOT_ABLATED)
        printf("\nopen %s/report.html (or read %s/REPORT.md); `moetune runs %s` lists every "
               "run\n",
               dir, dir, dir);
    return rc;
}

/* ---- space, model-screen: the search benchmark's TPE harness (tests/tpe_harness.py)
 * drives the same sim through the same contract with these ----------------------------- */

/* moetune space CONTRACT [--json]: the declared space (normalized values),
 * the base's value of each of its knobs, and the screen protocol. */
static int cmd_space(int argc, char **argv)
{
    session s;
    cJSON *o, *sp, *base;
    const char *k, *v;
    char *text;
    size_t i;
    int rc;
    if (argc < 3 || argv[2][0] == '-') {
        fprintf(stderr, "usage: moetune space CONTRACT [--json]\n");
        return EXIT_USAGE;
    }
    if ((rc = session_open(&s, argv[2], 1))) {
        session_close(&s);
        return rc;
    }
    o = cJSON_CreateObject();
    sp = cJSON_AddObjectToObject(o, "space");
    base = cJSON_AddObjectToObject(o, "base");
    cJSON_AddStringToObject(o, "contract", s.contract->name);
    cJSON_AddNumberToObject(o, "replicates", s.contract->replicates);
    cJSON_AddNumberToObject(o, "gpu_hours_budget", s.contract->gpu_hours);
    for (i = 0; mt_kv_entry(s.contract->space, i, &k, &v) == 0; i++) {
        cJSON *a = cJSON_AddArrayToObject(sp, k);
        const char *p = v, *b = mt_kv_get(s.cfg, k);
        for (;;) {
            size_t len = strcspn(p, "\n");
            char *one = strndup(p, len);
            cJSON_AddItemToArray(a, cJSON_CreateString(one ? one : ""));
            free(one);
            if (!p[len])
                break;
            p += len + 1;
        }
        if (b)
            cJSON_AddStringToObject(base, k, b);
        else
            cJSON_AddNullToObject(base, k);
    }
    text = cJSON_PrintUnformatted(o);
    puts(text ? text : "{}");
    free(text);
    cJSON_Delete(o);
    session_close(&s);
    return 0;
}

/* One screen of cfg on the model executor (search/exec.c's job, identical
 * accounting): nrep replicates 0..nrep-1, as grid and random screen. */
static cJSON *model_screen_one(session *s, const mt_kv *cfg, int nrep, int rep0, uint64_t seed,
                               int noise_free)
{
    cJSON *o = cJSON_CreateObject(), *vs_json, *reps;
    mt_violations vs = {0};
    mt_mem_estimate est;
    char id[17];
    double ms[64], tf[64], gh = 0, med, cap_gb = NAN;
    int r, ok = 0, fits_est, within = 1;
    const char *outcome = "ok";
    size_t i;
    mt_config_id(cfg, id);
    cJSON_AddStringToObject(o, "config_id", id);
    mt_legality(s->reg, s->contract, cfg, &vs, NULL);
    cJSON_AddBoolToObject(o, "legal", vs.n == 0);
    vs_json = cJSON_AddArrayToObject(o, "violations");
    for (i = 0; i < vs.n; i++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "rule", vs.v[i].rule ? vs.v[i].rule : "");
        cJSON_AddStringToObject(x, "plugin", vs.v[i].plugin ? vs.v[i].plugin : "");
        cJSON_AddStringToObject(x, "message", vs.v[i].message ? vs.v[i].message : "");
        cJSON_AddItemToArray(vs_json, x);
    }
    fits_est = mt_memory_estimate(cfg, s->contract->hardware, &est) == 0;
    if (fits_est)
        cap_gb = est.hbm_gb * (1 - s->contract->memory_headroom);
    fits_est = fits_est && est.hottest->total <= cap_gb;
    cJSON_AddBoolToObject(o, "fits_estimate", fits_est);
    cJSON_AddNumberToObject(o, "launch_gpu_hours", mt_model_launch_gpu_hours(s->contract, cfg));
    reps = cJSON_AddArrayToObject(o, "replicates");
    if (vs.n) {
        outcome = "illegal"; /* the engine never launches it: nothing charged */
    } else {
        for (r = 0; r < nrep && r < 64; r++) {
            char *text = mt_model_job(s->contract, cfg, "screen", rep0 + r, seed);
            cJSON *j = text ? cJSON_Parse(text) : NULL;
            const cJSON *x;
            free(text);
            if (!j) {
                outcome = "error";
                break;
            }
            x = cJSON_GetObjectItemCaseSensitive(j, "gpu_hours");
            gh += cJSON_IsNumber(x) ? x->valuedouble : 0;
            x = cJSON_GetObjectItemCaseSensitive(j, "outcome");
            if (cJSON_IsString(x) && !strcmp(x->valuestring, "ok") &&
                cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(j, "ms"))) {
                ms[ok] = cJSON_GetObjectItemCaseSensitive(j, "ms")->valuedouble;
                x = cJSON_GetObjectItemCaseSensitive(j, "tflops");
                tf[ok++] = cJSON_IsNumber(x) ? x->valuedouble : NAN;
                x = cJSON_GetObjectItemCaseSensitive(j, "peak_gb");
                if (cJSON_IsNumber(x) && isfinite(cap_gb) && x->valuedouble > cap_gb)
                    within = 0;
            } else if (!strcmp(outcome, "ok")) {
                outcome = cJSON_IsString(x) ? (!strcmp(x->valuestring, "oom") ? "oom" : "crash")
                                            : "error";
            }
            cJSON_DeleteItemFromObjectCaseSensitive(j, "verdicts");
            cJSON_AddNumberToObject(j, "replicate", rep0 + r);
            cJSON_AddItemToArray(reps, j);
        }
    }
    cJSON_AddStringToObject(o, "outcome", outcome);
    if (!strcmp(outcome, "ok") && ok > 0 && mt_stats_median(ms, (size_t)ok, &med) == 0) {
        cJSON_AddNumberToObject(o, "ms", med);
        mt_stats_median(tf, (size_t)ok, &med);
        cJSON_AddNumberToObject(o, "tflops", med);
    } else {
        cJSON_AddNullToObject(o, "ms");
        cJSON_AddNullToObject(o, "tflops");
    }
    /* the measured peak of every replicate within the contract's headroom */
    cJSON_AddBoolToObject(o, "within_headroom", !strcmp(outcome, "ok") && within);
    cJSON_AddNumberToObject(o, "gpu_hours", gh);
    cJSON_AddNumberToObject(o, "runs", cJSON_GetArraySize(reps));
    if (noise_free) {
        int fits = 0;
        double t = mt_optimum_tflops(s->contract, cfg, &fits);
        cJSON_AddNumberToObject(o, "noise_free_tflops", t);
        cJSON_AddBoolToObject(o, "noise_free_fits", fits);
    }
    mt_violations_free(&vs);
    return o;
}

/* A --stdin line: one JSON object of knob -> value (strings, numbers,
 * booleans), or {"set": {knob: value}, "first_replicate": N}. */
static mt_kv *model_screen_line(session *s, const char *line, int *rep0, char *why, size_t n)
{
    cJSON *top = cJSON_Parse(line), *j = top, *x;
    mt_kv *cfg;
    mt_diag *d;
    if (cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(top, "set"))) {
        x = cJSON_GetObjectItemCaseSensitive(top, "first_replicate");
        if (cJSON_IsNumber(x))
            *rep0 = x->valueint;
        j = cJSON_GetObjectItemCaseSensitive(top, "set");
    }
    if (!cJSON_IsObject(j)) {
        snprintf(why, n, "not a JSON object of knob -> value");
        cJSON_Delete(top);
        return NULL;
    }
    cfg = mt_kv_dup(s->cfg);
    d = mt_diag_new();
    cJSON_ArrayForEach(x, j)
    {
        char buf[64];
        const char *v = buf;
        if (cJSON_IsString(x))
            v = x->valuestring;
        else if (cJSON_IsBool(x))
            v = cJSON_IsTrue(x) ? "true" : "false";
        else if (cJSON_IsNumber(x))
            snprintf(buf, sizeof buf, "%.17g", x->valuedouble);
        else
            v = "";
        if (mt_config_set(s->reg, cfg, x->string, v, NULL, 0, "--stdin", d))
            break;
    }
    if (mt_diag_count(d)) {
        snprintf(why, n, "%s", mt_diag_at(d, 0)->message);
        mt_kv_destroy(&cfg);
    }
    mt_diag_destroy(&d);
    cJSON_Delete(top);
    return cfg;
}

/* moetune model-screen CONTRACT [--set k=v]... [--replicates N] [--first-replicate K]
 *                      [--seed S] [--noise-free] [--json] [--stdin]
 * Replicates K..K+N-1 (N: the contract's replicates); illegal configs are not run. */
static int cmd_model_screen(int argc, char **argv)
{
    session s;
    char **sets = calloc((size_t)argc + 1, sizeof *sets);
    size_t nsets = 0;
    int j, rc, nrep = 0, rep0 = 0, noise_free = 0, from_stdin = 0;
    uint64_t seed = 0;
    const char *contract = NULL;
    for (j = 2; j < argc; j++) {
        const char *a = argv[j];
        if (!strcmp(a, "--json"))
            continue;
        if (!strcmp(a, "--noise-free")) {
            noise_free = 1;
            continue;
        }
        if (!strcmp(a, "--stdin")) {
            from_stdin = 1;
            continue;
        }
        if (a[0] != '-' && !contract) {
            contract = a;
            continue;
        }
        if (j + 1 >= argc)
            goto usage;
        if (!strcmp(a, "--set"))
            sets[nsets++] = argv[++j];
        else if (!strcmp(a, "--replicates") || !strcmp(a, "--replicate"))
            nrep = atoi(argv[++j]);
        else if (!strcmp(a, "--first-replicate"))
            rep0 = atoi(argv[++j]);
        else if (!strcmp(a, "--seed"))
            seed = strtoull(argv[++j], NULL, 10);
        else
            goto usage;
    }
    if (!contract || nrep > 64 || rep0 < 0)
        goto usage;
    if ((rc = session_open(&s, contract, 1)) || (rc = apply_sets(&s, sets, nsets))) {
        session_close(&s);
        free(sets);
        return rc;
    }
    if (nrep <= 0)
        nrep = s.contract->replicates;
    if (!from_stdin) {
        cJSON *o = model_screen_one(&s, s.cfg, nrep, rep0, seed, noise_free);
        char *text = cJSON_PrintUnformatted(o);
        puts(text ? text : "{}");
        free(text);
        cJSON_Delete(o);
    } else {
        char *line = NULL;
        size_t cap = 0;
        while (getline(&line, &cap, stdin) > 0) {
            char why[1024] = "";
            int first = rep0;
            mt_kv *cfg;
            cJSON *o;
            char *text;
            if (strspn(line, " \t\r\n") == strlen(line))
                continue;
            cfg = model_screen_line(&s, line, &first, why, sizeof why);
            if (cfg) {
                o = model_screen_one(&s, cfg, nrep, first, seed, noise_free);
            } else {
                o = cJSON_CreateObject();
                cJSON_AddStringToObject(o, "error", why);
            }
            text = cJSON_PrintUnformatted(o);
            puts(text ? text : "{}");
            fflush(stdout);
            free(text);
            cJSON_Delete(o);
            mt_kv_destroy(&cfg);
        }
        free(line);
    }
    session_close(&s);
    free(sets);
    return 0;
usage:
    free(sets);
    fprintf(stderr, "usage: moetune model-screen CONTRACT [--set knob=value]... [--replicates N] "
                    "[--first-replicate K] [--seed S] [--noise-free] [--json] [--stdin]\n");
    return EXIT_USAGE;
}

/* The options every command takes, anywhere before a "--": removed from
 * argv.  0, or EXIT_USAGE with a message. */
static int global_options(int *argc, char **argv)
{
    int i, o = 1;
    for (i = 1; i < *argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            while (i < *argc)
                argv[o++] = argv[i++];
            break;
        }
        if (!strcmp(a, "--trust-plugin-path")) {
            trust_plugin_path = 1;
            continue;
        }
        if (!strcmp(a, "--plugin-timeout") || !strncmp(a, "--plugin-timeout=", 17)) {
            const char *v = a[16] == '=' ? a + 17 : i + 1 < *argc ? argv[++i] : NULL;
            char *end = NULL;
            double sec = v ? strtod(v, &end) : -1;
            if (!v || !*v || *end || mt_callguard_set_limit(sec)) {
                fprintf(stderr, "moetune: --plugin-timeout needs a number of seconds >= 0 "
                                "(0: no limit), got '%s'\n",
                        v ? v : "");
                return EXIT_USAGE;
            }
            continue;
        }
        argv[o++] = argv[i];
    }
    argv[o] = NULL;
    *argc = o;
    return 0;
}

int main(int argc, char **argv)
{
    if (global_options(&argc, argv))
        return EXIT_USAGE;
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
        !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("moetune %s (plugin ABI %d)\n", MOETUNE_VERSION, MT_PLUGIN_ABI_VERSION);
        return 0;
    }
    if (!strcmp(argv[1], "plugins"))
        return cmd_plugins(argc, argv);
    if (!strcmp(argv[1], "space"))
        return cmd_space(argc, argv);
    if (!strcmp(argv[1], "model-screen"))
        return cmd_model_screen(argc, argv);
    if (!strcmp(argv[1], "demo"))
        return cmd_demo(argc, argv);
    if (!strcmp(argv[1], "runs"))
        return cmd_runs(argc, argv);
    if (!strcmp(argv[1], "parse"))
        return cmd_parse(argc, argv);
    if (!strcmp(argv[1], "profile"))
        return cmd_profile(argc, argv);
    if (!strcmp(argv[1], "tune"))
        return cmd_tune(argc, argv);
    if (!strcmp(argv[1], "status"))
        return cmd_status(argc, argv);
    if (!strcmp(argv[1], "recipe"))
        return cmd_recipe(argc, argv);
    if (!strcmp(argv[1], "bisect"))
        return cmd_bisect(argc, argv);
    if (!strcmp(argv[1], "worker"))
        return cmd_worker(argc, argv);
    if (!strcmp(argv[1], "keygen"))
        return cmd_keygen(argc, argv);
    if (!strcmp(argv[1], "rank-exec"))
        return mt_rank_exec_main(argc, argv);
    if (!strcmp(argv[1], "measure")) {
        if (argc < 3) {
            fprintf(stderr, "moetune measure: missing CONTRACT\n");
            return EXIT_USAGE;
        }
        return cmd_measure(argc, argv);
    }
    if (!strcmp(argv[1], "calibration"))
        return cmd_calibration(argc, argv);
    if (!strcmp(argv[1], "import"))
        return cmd_import(argc, argv);
    if (!strcmp(argv[1], "optimum")) {
        if (argc < 3) {
            fprintf(stderr, "moetune optimum: missing CONTRACT\n");
            return EXIT_USAGE;
        }
        return cmd_optimum(argv[2]);
    }
    if (argc < 3 && (!strcmp(argv[1], "check") || !strcmp(argv[1], "render") ||
                     !strcmp(argv[1], "candidates"))) {
        fprintf(stderr, "moetune %s: missing CONTRACT\n", argv[1]);
        usage(stderr);
        return EXIT_USAGE;
    }
    if (!strcmp(argv[1], "check")) {
        if (!strcmp(argv[2], "--startup-only")) {
            if (argc != 4) {
                fprintf(stderr, "moetune check --startup-only: give one CONTRACT\n");
                return EXIT_USAGE;
            }
            return cmd_check_startup(argv[3]);
        }
        if (argc > 3 && !strcmp(argv[3], "--startup-only") && argc == 4)
            return cmd_check_startup(argv[2]);
        if (argc > 3) {
            fprintf(stderr, "moetune check: unexpected argument '%s'\n", argv[3]);
            return EXIT_USAGE;
        }
        return cmd_check(argv[2]);
    }
    if (!strcmp(argv[1], "render"))
        return cmd_render(argc, argv);
    if (!strcmp(argv[1], "candidates"))
        return cmd_candidates(argc, argv);
    fprintf(stderr, "moetune: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return EXIT_USAGE;
}
