/*
 * cmd_core.c - the `moetune` commands of the core floor: plugins, check,
 * import, candidates, parse, runs, space (core/cmd_core.h).
 */
#include "cmd_core.h"

#include "audit.h"
#include "cli.h"
#include "config.h"
#include "contract.h"
#include "evaluate.h"
#include "import.h"
#include "logparse.h"
#include "memory.h"
#include "registry.h"
#include "store.h"
#include "wall.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int mt_cmd_plugins(int argc, char **argv)
{
    mt_session s;
    const char *pos[1] = {NULL};
    static const mt_opt opts[] = {{NULL}};
    mt_cmd c = {"plugins", "usage: moetune plugins [CONTRACT]\n"
                           "  the loaded plugins, their knobs and load errors\n",
                opts, pos, 0, 1, "CONTRACT", NULL};
    size_t i;
    int failed, rc;
    if ((rc = mt_cli_parse(&c, argc, argv, 2)))
        return rc == MT_CLI_HELP ? 0 : rc;
    memset(&s, 0, sizeof s);
    if (pos[0]) {
        mt_diag *d = mt_diag_new();
        s.contract = mt_contract_load(pos[0], d);
        if (!s.contract) {
            mt_diag_print(d, stderr);
            mt_diag_destroy(&d);
            return MT_EXIT_BAD_INPUT;
        }
        mt_diag_destroy(&d);
    }
    mt_session_load_plugins(&s);
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
    mt_session_clear(&s);
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
static void print_plugins(const mt_session *s)
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

int mt_cmd_check_contract(const char *path)
{
    mt_session s;
    mt_diag *d;
    mt_mem_estimate mem;
    char id[17];
    int fit;
    int rc = mt_session_open(&s, path, 0);
    if (rc) {
        mt_session_clear(&s);
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
        mt_session_clear(&s);
        return MT_EXIT_BAD_INPUT;
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
    mt_session_clear(&s);
    return fit == 1 ? 0 : fit == 0 ? MT_EXIT_NO_FIT : 1;
}

static int cmd_check_startup(const char *path);

int mt_cmd_check(int argc, char **argv)
{
    const char *pos[1] = {NULL};
    int startup = 0, rc;
    const mt_opt opts[] = {
        {"--startup-only", NULL, NULL, MT_OPT_FLAG, &startup, 0, 0, NULL,
         "only what the training program's own start-up checks say of the base config"},
        {NULL}};
    mt_cmd c = {"check",
                "usage: moetune check CONTRACT [--startup-only]\n"
                "  validate a contract; print meshes and memory (exit 0 legal and the base\n"
                "  fits, 2 not legal, 4 legal but the base does not fit by the estimate);\n"
                "  --startup-only: exit 0 legal at start-up, 2 not\n",
                opts, pos, 1, 1, "CONTRACT", NULL};
    if ((rc = mt_cli_parse(&c, argc, argv, 2)))
        return rc == MT_CLI_HELP ? 0 : rc;
    return startup ? cmd_check_startup(pos[0]) : mt_cmd_check_contract(pos[0]);
}

/* check --startup-only: what the training program's own start-up checks
 * say about the base config, nothing else.  Exit 0 legal, 2 not. */
static int cmd_check_startup(const char *path)
{
    mt_session s;
    mt_violations vs = {0};
    mt_diag *d;
    size_t i, n = 0;
    int rc = mt_session_open(&s, path, 0);
    if (rc) {
        mt_session_clear(&s);
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
    rc = n ? MT_EXIT_BAD_INPUT : mt_diag_count(d) ? 1 : 0;
    mt_violations_clear(&vs);
    mt_diag_destroy(&d);
    mt_session_clear(&s);
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

/* --stack and --env NAME=VALUE words into kv; 0, or MT_EXIT_USAGE. */
static int name_values(const char *opt, const mt_cli_list *l, mt_kv *kv)
{
    size_t i;
    for (i = 0; i < l->n; i++) {
        const char *val = l->v[i], *eq = strchr(val, '=');
        char key[256];
        if (!eq || eq == val || (size_t)(eq - val) >= sizeof key) {
            fprintf(stderr, "moetune import: %s '%s' is not NAME=VALUE\n", opt, val);
            return MT_EXIT_USAGE;
        }
        snprintf(key, sizeof key, "%.*s", (int)(eq - val), val);
        mt_kv_set(kv, key, eq + 1);
    }
    return 0;
}

#define IMPORT_USAGE                                                                              \
    "usage: moetune import [--stack NAME=VERSION]... [--hardware gpu=G,gpus_per_node=P,nodes=N]\n" \
    "       [--env NAME=VALUE]... [--dialect mlm|bridge] [--backend sim|command]\n"              \
    "       [--name NAME] [-o FILE] (-- ARGV... | --argv FILE)\n"                                 \
    "  a contract from an existing Megatron-LM command line\n"

int mt_cmd_import(int argc, char **argv)
{
    mt_import_opts o;
    mt_session s;
    char **args = NULL, **owned = NULL;
    size_t nargs = 0, i;
    const char *outpath = NULL, *hardware = NULL, *argv_file = NULL;
    mt_cli_list stack = {0}, env = {0}, rest = {0};
    FILE *out = stdout;
    mt_diag *d;
    int rc = 0;
    const mt_opt opts[] = {
        {"--stack", NULL, "NAME=VERSION", MT_OPT_LIST, &stack, 0, 0, NULL,
         "a stack component and its version (megatron_lm=core_v0.19.0)"},
        {"--hardware", NULL, "gpu=G,gpus_per_node=P,nodes=N", MT_OPT_STR, &hardware, 0, 0, NULL,
         "the machines"},
        {"--env", NULL, "NAME=VALUE", MT_OPT_LIST, &env, 0, 0, NULL, "a launch environment variable"},
        {"--dialect", NULL, "mlm|bridge", MT_OPT_STR, &o.dialect, 0, 0, NULL, "the command line's dialect"},
        {"--backend", NULL, "sim|command", MT_OPT_STR, &o.backend, 0, 0, NULL,
         "what the contract's runs launch"},
        {"--name", NULL, "NAME", MT_OPT_STR, &o.name, 0, 0, NULL, "the contract's name"},
        {"--output", "-o", "FILE", MT_OPT_STR, &outpath, 0, 0, NULL, "write it here (default: stdout)"},
        {"--argv", NULL, "FILE", MT_OPT_STR, &argv_file, 0, 0, NULL,
         "the command line, one word a line (instead of -- ARGV...)"},
        {NULL}};
    mt_cmd c = {"import", IMPORT_USAGE, opts, NULL, 0, 0, NULL, &rest};
    memset(&o, 0, sizeof o);
    memset(&s, 0, sizeof s);
    if ((rc = mt_cli_parse(&c, argc, argv, 2)))
        return rc == MT_CLI_HELP ? 0 : rc;
    o.stack = mt_kv_new(), o.hardware = mt_kv_new(), o.env = mt_kv_new();
    rc = name_values("--stack", &stack, o.stack);
    if (!rc)
        rc = name_values("--env", &env, o.env);
    if (!rc && hardware && split_pairs(hardware, o.hardware)) {
        fprintf(stderr, "moetune import: --hardware '%s' is not gpu=G,gpus_per_node=P,nodes=N\n",
                hardware);
        rc = MT_EXIT_USAGE;
    }
    if (!rc && o.dialect && strcmp(o.dialect, "mlm") && strcmp(o.dialect, "bridge")) {
        fprintf(stderr, "moetune import: --dialect is mlm or bridge, not '%s'\n", o.dialect);
        rc = MT_EXIT_USAGE;
    }
    if (!rc && o.backend && strcmp(o.backend, "sim") && strcmp(o.backend, "command")) {
        fprintf(stderr, "moetune import: --backend is sim or command, not '%s'\n", o.backend);
        rc = MT_EXIT_USAGE;
    }
    if (!rc && argv_file) {
        if (!(owned = read_argv_file(argv_file, &nargs))) {
            fprintf(stderr, "moetune import: cannot read %s: %s\n", argv_file, strerror(errno));
            rc = MT_EXIT_BAD_INPUT;
        }
        args = owned;
    } else if (!rc && rest.n) {
        args = (char **)rest.v, nargs = rest.n;
    }
    if (!rc && !args) {
        fprintf(stderr, "moetune import: give the command line after '--' or with --argv FILE\n");
        rc = MT_EXIT_USAGE;
    }
    if (!rc && !mt_kv_get(o.stack, "megatron_lm") && !mt_kv_get(o.stack, "dialect")) {
        fprintf(stderr, "moetune import: give the stack, e.g. --stack megatron_lm=core_v0.19.0 "
                        "--stack transformer_engine=2.12\n");
        rc = MT_EXIT_USAGE;
    }
    if (!rc) {
        mt_session_load_plugins(&s);
        mt_session_warn_load(&s);
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
    mt_cli_list_clear(&stack), mt_cli_list_clear(&env), mt_cli_list_clear(&rest);
    mt_session_clear(&s);
    return rc;
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
        mt_cli_print_violations(&c->violations, stdout, "      ");
    } else {
        char id[17];
        mt_config_id(c->config, id);
        printf("    legality: legal (config %s)\n", id);
    }
}

/* The candidates for the config; with a wall, the plugins see it as the
 * profile's evidence ("wall"), as a tune's plugins do after a profile, and
 * only candidates for that wall are listed. */
static int list_candidates(mt_session *s, const char *wall, uint32_t mask)
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
    mt_candidates_clear(&cs);
    mt_diag_destroy(&d);
    return rc;
}

/* Knob values the plugins know that the contract's stack lacks: each value
 * set alone on the base, and listed when its owner says it needs a newer
 * Megatron core, so the user sees what an upgrade would offer. */
static void list_not_offered(mt_session *s)
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
            mt_violations_clear(&vs);
            mt_diag_destroy(&d);
            mt_kv_destroy(&cfg);
        }
    }
    free(names);
}

int mt_cmd_candidates(int argc, char **argv)
{
    mt_session s;
    mt_cli_list sets = {0};
    const char *wall = NULL, *pos[1] = {NULL};
    uint32_t mask = 0;
    const mt_opt opts[] = {
        {"--set", NULL, "KNOB=VALUE", MT_OPT_LIST, &sets, 0, 0, NULL, "change the base config"},
        {"--wall", NULL, "W", MT_OPT_STR, &wall, 0, 0, NULL,
         "the plugins see W (memory, communication, host, compute) as the profiled wall, as in a "
         "tune, and only W's candidates are listed"},
        {NULL}};
    mt_cmd c = {"candidates",
                "usage: moetune candidates CONTRACT [--wall W] [--set knob=value]...\n"
                "  every plugin's candidates, with repairs and legality\n",
                opts, pos, 1, 1, "CONTRACT", NULL};
    int rc = mt_cli_parse(&c, argc, argv, 2);
    if (rc)
        return rc == MT_CLI_HELP ? 0 : rc;
    if (wall && !(mask = mt_wall_parse(wall))) {
        fprintf(stderr, "moetune: --wall takes memory, communication, host or compute, not '%s'\n",
                wall);
        mt_cli_list_clear(&sets);
        return MT_EXIT_USAGE;
    }
    rc = mt_session_open_legal(&s, pos[0], &sets);
    if (!rc) {
        printf("candidates for %s%s%s:\n", s.contract->name, wall ? ", wall " : "",
               wall ? wall : "");
        print_meshes(s.cfg, s.contract, "  current: ");
        rc = list_candidates(&s, wall, mask);
        if (!rc)
            list_not_offered(&s);
    }
    mt_session_clear(&s);
    return rc;
}

int mt_cmd_runs(int argc, char **argv)
{
    mt_diag *d;
    mt_store *st;
    const char *pos[1] = {NULL};
    int fmt = MT_STORE_TEXT, csv = 0, json = 0, rc;
    const mt_opt opts[] = {{"--csv", NULL, NULL, MT_OPT_FLAG, &csv, 0, 0, NULL, "as CSV"},
                           {"--json", NULL, NULL, MT_OPT_FLAG, &json, 0, 0, NULL, "as JSON"},
                           {NULL}};
    mt_cmd c = {"runs",
                "usage: moetune runs DIR [--csv|--json]\n"
                "  the runs recorded in a tune directory's store\n",
                opts, pos, 1, 1, "DIR", NULL};
    if ((rc = mt_cli_parse(&c, argc, argv, 2)))
        return rc == MT_CLI_HELP ? 0 : rc;
    if (csv && json) {
        fprintf(stderr, "moetune runs: --csv and --json exclude each other; give one\n");
        return mt_cli_usage(&c);
    }
    fmt = csv ? MT_STORE_CSV : json ? MT_STORE_JSON : MT_STORE_TEXT;
    d = mt_diag_new();
    st = mt_store_open(pos[0], NULL, d);
    if (!st) {
        mt_diag_print(d, stderr);
        mt_diag_destroy(&d);
        return MT_EXIT_BAD_INPUT;
    }
    rc = mt_store_print_runs(st, stdout, fmt, d);
    mt_diag_print(d, stderr);
    mt_store_destroy(&st);
    mt_diag_destroy(&d);
    return rc ? 1 : 0;
}

int mt_cmd_parse(int argc, char **argv)
{
    mt_logparse *p;
    mt_diag *d;
    const char *pos[1] = {NULL};
    int json = 0, rc;
    const mt_opt opts[] = {{"--json", NULL, NULL, MT_OPT_FLAG, &json, 0, 0, NULL, "as JSON"},
                           {NULL}};
    mt_cmd c = {"parse",
                "usage: moetune parse LOG [--json]\n"
                "  what moetune reads from a training log\n",
                opts, pos, 1, 1, "LOG", NULL};
    if ((rc = mt_cli_parse(&c, argc, argv, 2)))
        return rc == MT_CLI_HELP ? 0 : rc;
    p = mt_logparse_new();
    d = mt_diag_new();
    rc = mt_logparse_read_file(p, pos[0], d);
    if (rc) {
        mt_diag_print(d, stderr);
        mt_diag_destroy(&d);
        mt_logparse_destroy(&p);
        return MT_EXIT_BAD_INPUT;
    }
    mt_logparse_print(p, stdout, json);
    mt_diag_destroy(&d);
    mt_logparse_destroy(&p);
    return 0;
}

/* moetune space CONTRACT [--json]: the declared space (normalized values),
 * the base's value of each of its knobs, and the screen protocol. */
int mt_cmd_space(int argc, char **argv)
{
    mt_session s;
    cJSON *o, *sp, *base;
    const char *k, *v, *pos[1] = {NULL};
    char *text;
    size_t i;
    int rc, json = 0;
    const mt_opt opts[] = {
        {"--json", NULL, NULL, MT_OPT_FLAG, &json, 0, 0, NULL, "JSON (the only form)"}, {NULL}};
    mt_cmd c = {"space",
                "usage: moetune space CONTRACT [--json]\n"
                "  the declared search space and the base's values (JSON)\n",
                opts, pos, 1, 1, "CONTRACT", NULL};
    if ((rc = mt_cli_parse(&c, argc, argv, 2)))
        return rc == MT_CLI_HELP ? 0 : rc;
    if ((rc = mt_session_open(&s, pos[0], 1))) {
        mt_session_clear(&s);
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
    mt_session_clear(&s);
    return 0;
}
