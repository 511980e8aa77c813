/*
 * bundle.c - the evidence bundle: bundle.json (search/BUNDLE.md) written
 * atomically, then REPORT.md and report.html rendered from it alone.
 */
#include "engine_int.h"
#include "job_memo.h"

#include "config.h"
#include "evaluate.h"
#include "hardware.h"
#include "label.h"
#include "recipe.h"
#include "render.h"
#include "report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef MOETUNE_VERSION
#define MOETUNE_VERSION "0.1.0"
#endif

static cJSON *kv_json(const mt_kv *kv)
{
    cJSON *o = cJSON_CreateObject();
    const char *k, *v;
    size_t i;
    for (i = 0; kv && mt_kv_entry(kv, i, &k, &v) == 0; i++)
        cJSON_AddStringToObject(o, k, v);
    return o;
}

static void num_or_null(cJSON *o, const char *k, double v)
{
    if (isfinite(v))
        cJSON_AddNumberToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

static double share_of(double v)
{
    return isfinite(v) && v > 0 ? v : 0;
}

/* The wall of a profiled run's job memo (prof; NULL: none), in the bundle's
 * shape.  The memo's figures overlap: compute is the union of compute
 * kernels, communication hidden under compute included; idle includes the
 * pipeline bubble.  The bundle's shares partition the profiled window
 * instead (search/BUNDLE.md): compute with nothing under it, compute with
 * communication hidden under it, exposed communication, idle less the
 * bubble, the bubble, and what no trace class covers; they add up to 1. */
static cJSON *wall_json(const cJSON *prof)
{
    cJSON *o, *s;
    mt_job_memo m;
    const mt_job_memo_wall *w = &m.wall;
    double compute, hidden, exposed, idle, bubble, other, sum;
    mt_job_memo_from_json(prof, &m);
    if (!m.has_wall)
        return cJSON_CreateNull();
    compute = share_of(w->compute);
    hidden = fmin(share_of(w->hidden_comm), compute);
    exposed = share_of(w->exposed_comm);
    idle = share_of(w->idle);
    bubble = fmin(share_of(w->bubble), idle);
    sum = compute + exposed + idle;
    other = sum < 1 ? 1 - sum : 0;
    if (sum > 1) {
        /* overlapping figures of a malformed trace: scaled to the window */
        compute /= sum, hidden /= sum, exposed /= sum, idle /= sum, bubble /= sum;
    } else if (!(sum > 0)) {
        other = 1; /* nothing classified */
    }
    o = cJSON_CreateObject();
    s = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "wall", w->wall);
    cJSON_AddStringToObject(o, "runner_up", w->runner_up);
    num_or_null(o, "confidence", w->confidence);
    cJSON_AddNumberToObject(s, "compute", compute - hidden);
    cJSON_AddNumberToObject(s, "exposed_comm", exposed);
    cJSON_AddNumberToObject(s, "hidden_comm", hidden);
    cJSON_AddNumberToObject(s, "idle", idle - bubble);
    cJSON_AddNumberToObject(s, "bubble", bubble);
    cJSON_AddNumberToObject(s, "other", other);
    cJSON_AddItemToObject(o, "shares", s);
    if (w->has_steps && isfinite(w->first) && isfinite(w->last)) {
        cJSON *st = cJSON_CreateArray();
        cJSON_AddItemToArray(st, cJSON_CreateNumber(w->first));
        cJSON_AddItemToArray(st, cJSON_CreateNumber(w->last));
        cJSON_AddItemToObject(o, "steps", st);
    } else {
        cJSON_AddNullToObject(o, "steps");
    }
    num_or_null(o, "window_s", w->window_s);
    cJSON_AddStringToObject(o, "reason", w->reason);
    return o;
}

/* argv and env of cfg rendered in a dialect, as production runs it
 * (mt_recipe_production: without the screen's settings). */
static int render_json(mt__eng *e, const mt_kv *cfg, uint32_t dialect, cJSON **argv, cJSON **env)
{
    mt_rendered r;
    size_t i;
    mt_diag *d = mt_diag_new();
    mt_kv *prod = mt_recipe_production(cfg);
    int rc = -1;
    mt_rendered_init(&r);
    if (prod)
        rc = mt_render(e->reg, e->c, prod, dialect, &r, d);
    mt_kv_destroy(&prod);
    *argv = cJSON_CreateArray();
    for (i = 0; rc == 0 && i < r.argv.n; i++)
        cJSON_AddItemToArray(*argv, cJSON_CreateString(r.argv.v[i]));
    if (env)
        *env = kv_json(rc == 0 ? r.env : NULL);
    mt_rendered_clear(&r);
    mt_diag_destroy(&d);
    return rc;
}

/* "-  --flag" / "+  --flag" lines: the baseline's and the recipe's argv
 * grouped as flag + values, in the recipe's order. */
static cJSON *command_diff(const cJSON *a, const cJSON *b)
{
    cJSON *out = cJSON_CreateArray(), *x;
    char **ga = NULL, **gb = NULL;
    size_t na = 0, nb = 0, i, j;
    const cJSON *lists[2] = {a, b};
    char ***gs[2] = {&ga, &gb};
    size_t *ns[2] = {&na, &nb};
    int l;
    for (l = 0; l < 2; l++) {
        char *cur = NULL;
        cJSON_ArrayForEach(x, lists[l])
        {
            const char *s = x->valuestring ? x->valuestring : "";
            if (!strncmp(s, "--", 2) || !cur) {
                if (cur) {
                    *gs[l] = realloc(*gs[l], (*ns[l] + 1) * sizeof **gs[l]);
                    (*gs[l])[(*ns[l])++] = cur;
                }
                cur = strdup(s);
            } else {
                size_t len = strlen(cur) + strlen(s) + 2;
                char *n = malloc(len);
                snprintf(n, len, "%s %s", cur, s);
                free(cur);
                cur = n;
            }
        }
        if (cur) {
            *gs[l] = realloc(*gs[l], (*ns[l] + 1) * sizeof **gs[l]);
            (*gs[l])[(*ns[l])++] = cur;
        }
    }
    for (i = 0; i < na; i++) {
        for (j = 0; j < nb && strcmp(ga[i], gb[j]); j++)
            ;
        if (j == nb) {
            char line[4200];
            snprintf(line, sizeof line, "-  %s", ga[i]);
            cJSON_AddItemToArray(out, cJSON_CreateString(line));
        }
    }
    for (j = 0; j < nb; j++) {
        for (i = 0; i < na && strcmp(ga[i], gb[j]); i++)
            ;
        if (i == na) {
            char line[4200];
            snprintf(line, sizeof line, "+  %s", gb[j]);
            cJSON_AddItemToArray(out, cJSON_CreateString(line));
        }
    }
    for (i = 0; i < na; i++)
        free(ga[i]);
    for (j = 0; j < nb; j++)
        free(gb[j]);
    free(ga), free(gb);
    return out;
}

/* A config's label and why (label_reasons): what the contract and its knobs
 * make of it (core/label.h), and for the recipe also the accepted changes it
 * holds that their plugin labels benchmark-only. */
static void label_json(mt__eng *e, cJSON *o, const mt_kv *cfg, int with_changes)
{
    mt_strlist why = {0};
    uint32_t label = mt_label_config(e->c, cfg, -1, &why);
    cJSON *a, *x, *r = cJSON_CreateArray(), *list = with_changes ? e->accepted : NULL;
    size_t i;
    cJSON_ArrayForEach(a, list)
    {
        int in = 1;
        cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(a, "change"))
        {
            const char *v = mt_kv_get(cfg, mt_exec_str(x, "knob"));
            if (!v || strcmp(v, mt_exec_str(x, "to")))
                in = 0;
        }
        if (in && ((uint32_t)mt_exec_num(a, "label") & MT_LABEL_BENCHMARK_ONLY)) {
            char line[700];
            label = MT_LABEL_BENCHMARK_ONLY;
            snprintf(line, sizeof line,
                     "the accepted change %.100s (%.500s): its plugin labels it "
                     "benchmark-only",
                     mt_exec_str(a, "variable"), mt_exec_str(a, "summary"));
            mt_strlist_push(&why, line);
        }
    }
    for (i = 0; i < why.n; i++)
        cJSON_AddItemToArray(r, cJSON_CreateString(why.v[i]));
    cJSON_AddStringToObject(o, "label", mt_label_word(label));
    cJSON_AddItemToObject(o, "label_reasons", r);
    mt_strlist_clear(&why);
}

/* What a user must know before training with the recipe, one line each
 * (recipe.notes, and comment lines of the recipe's scripts): the routing
 * the recipe leaves to the router, what validation with natural routing
 * showed, the synthetic data, a rule the production config breaks. */
static void recipe_notes(mt__eng *e, const mt_kv *recipe, const mt_kv *prod, mt_strlist *notes)
{
    const char *fb = mt_kv_get(recipe, "moe_router_force_load_balancing");
    const char *ds = e->c->data ? mt_kv_get(e->c->data, "dataset") : NULL;
    const cJSON *v = e->validation, *nat = cJSON_GetObjectItemCaseSensitive(v, "natural");
    const char *rec = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(v, "recommendation"));
    mt_violations vs = {0};
    char line[1200];
    if (fb && strcmp(fb, "false")) {
        mt_strlist_push(notes, "Routing: the router's own choice of experts. The tune measured "
                               "with --moe-router-force-load-balancing (forced balance: its "
                               "figures are benchmark-only); this recipe leaves it out.");
        mt_legality(e->reg, e->c, prod, &vs, NULL);
        if (vs.n) {
            snprintf(line, sizeof line,
                     "Warning: without forced balance this config breaks %s: %.900s", vs.v[0].rule,
                     vs.v[0].message);
            mt_strlist_push(notes, line);
        }
        mt_violations_clear(&vs);
    }
    if (cJSON_IsObject(nat)) {
        const char *st = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(nat, "status"));
        const char *why = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(nat, "reason"));
        snprintf(line, sizeof line, "%s: %.1000s",
                 st && !strcmp(st, "measured") ? "Natural-routing validation"
                                               : "Not validated with natural routing",
                 why ? why : "no reason recorded");
        mt_strlist_push(notes, line);
    } else if (fb && strcmp(fb, "false")) {
        mt_strlist_push(notes, "Not validated with natural routing: the tune measured forced "
                               "balance only.");
    }
    if (rec && !strncmp(rec, "benchmark only: ", 16)) {
        snprintf(line, sizeof line, "Recommendation: %.1100s", rec);
        mt_strlist_push(notes, line);
    }
    if (ds && !strcmp(ds, "mock"))
        mt_strlist_push(notes, "Data: measured on synthetic tokens (data.dataset = \"mock\": "
                               "--mock-data, Bridge dataset.mock=True); for training, replace "
                               "it with your --data-path and tokenizer flags.");
}

/* The recipe files (search/recipe.h) written beside bundle.json, and their
 * names (recipe.files) and the reasons of the formats without one
 * (recipe.file_errors) into o.  No usable recipe (status 3, failed): files
 * is null and nothing is written.  0, or -1 with the problem in d. */
static int recipe_files(mt__eng *e, const mt_kv *recipe, int status, const char *label, cJSON *o,
                        mt_diag *d)
{
    mt_recipe rc;
    mt_kv *prod;
    cJSON *files, *errors, *x;
    mt_strlist notes = {0};
    char title[4096], id[17];
    size_t i, n;
    int f;
    if (status == 3) {
        cJSON_AddNullToObject(o, "files");
        return 0;
    }
    if (!(prod = mt_recipe_production(recipe))) {
        mt_diag_add(d, e->o.dir, 0, NULL, "out of memory writing the recipe");
        return -1;
    }
    mt_config_id(recipe, id);
    n = (size_t)snprintf(title, sizeof title, "moetune recipe of %s: config %s (%s), tune status %s",
                         e->c->name ? e->c->name : "the contract", id, label,
                         status == 0 ? "validated" : status == 1 ? "not_confirmed" : "baseline_only");
    recipe_notes(e, recipe, prod, &notes);
    x = cJSON_AddArrayToObject(o, "notes");
    for (i = 0; i < notes.n; i++) {
        cJSON_AddItemToArray(x, cJSON_CreateString(notes.v[i]));
        if (n < sizeof title)
            n += (size_t)snprintf(title + n, sizeof title - n, "\n%s", notes.v[i]);
    }
    mt_strlist_clear(&notes);
    if (mt_recipe_build(e->reg, e->c, prod, mt_exec_sim(e->x), title, &rc, d)) {
        mt_kv_destroy(&prod);
        return -1;
    }
    mt_kv_destroy(&prod);
    if (mt_recipe_write(&rc, e->o.dir, d)) {
        mt_recipe_clear(&rc);
        return -1;
    }
    files = cJSON_AddObjectToObject(o, "files");
    errors = cJSON_AddObjectToObject(o, "file_errors");
    for (f = 0; f < MT_RECIPE_NFORMATS; f++) {
        if (rc.text[f]) {
            cJSON_AddStringToObject(files, mt_recipe_format_name(f), mt_recipe_file_name(f));
        } else {
            cJSON_AddNullToObject(files, mt_recipe_format_name(f));
            cJSON_AddStringToObject(errors, mt_recipe_format_name(f), rc.why_not[f]);
        }
    }
    mt_recipe_clear(&rc);
    return 0;
}

/* The bundle's head: schema, contract, hardware, strategy, status, budget,
 * and the baseline with its label and fit. */
static void bundle_head(mt__eng *e, int status, cJSON *b)
{
    static const char *const statuses[] = {"validated", "not_confirmed", "baseline_only", "failed"};
    const mt_gpu_spec *g = mt_gpu_find(mt_kv_get(e->c->hardware, "gpu"));
    char stamp[64];
    time_t t = time(NULL);
    struct tm tm;
    cJSON *o;
    gmtime_r(&t, &tm);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
    cJSON_AddNumberToObject(b, "schema", 1);
    cJSON_AddStringToObject(b, "moetune_version", MOETUNE_VERSION);
    cJSON_AddStringToObject(b, "created", stamp);
    o = cJSON_AddObjectToObject(b, "contract");
    cJSON_AddStringToObject(o, "name", e->c->name ? e->c->name : "");
    cJSON_AddStringToObject(o, "path", e->c->path ? e->c->path : "");
    cJSON_AddStringToObject(o, "fingerprint", e->c->fingerprint);
    cJSON_AddItemToObject(o, "stack", kv_json(e->c->stack));
    o = cJSON_AddObjectToObject(b, "hardware");
    cJSON_AddStringToObject(o, "gpu", mt_kv_get(e->c->hardware, "gpu"));
    cJSON_AddNumberToObject(o, "gpus", strtod(mt_kv_get(e->c->hardware, "world_size"), NULL));
    cJSON_AddNumberToObject(o, "gpus_per_node",
                            strtod(mt_kv_get(e->c->hardware, "gpus_per_node"), NULL));
    cJSON_AddNumberToObject(o, "memory_gb", g ? g->hbm_gb : 0);
    cJSON_AddStringToObject(b, "strategy", e->strategy);
    cJSON_AddStringToObject(b, "status", statuses[status >= 0 && status <= 3 ? status : 3]);
    o = cJSON_AddObjectToObject(b, "budget");
    cJSON_AddNumberToObject(o, "gpu_hours_limit", e->budget_gh);
    cJSON_AddNumberToObject(o, "gpu_hours_used", mt_exec_gpu_hours(e->x));
    cJSON_AddNumberToObject(o, "runs_limit", e->budget_runs);
    cJSON_AddNumberToObject(o, "runs_used", mt_exec_runs(e->x));
    if (e->until > 0) {
        char dl[64];
        time_t u = (time_t)e->until;
        struct tm tu;
        gmtime_r(&u, &tu);
        strftime(dl, sizeof dl, "%Y-%m-%dT%H:%M:%SZ", &tu);
        cJSON_AddStringToObject(o, "deadline", dl);
    } else {
        cJSON_AddNullToObject(o, "deadline");
    }
    cJSON_AddStringToObject(o, "stopped_because", e->stopped[0] ? e->stopped : "finished");
    o = cJSON_AddObjectToObject(b, "baseline");
    cJSON_AddItemToObject(o, "config", kv_json(e->baseline));
    label_json(e, o, e->baseline, 0);
    /* whether the base fits, as the fit phase found it (null: no fit phase ran) */
    cJSON_AddItemToObject(o, "fit",
                          e->base_fit ? cJSON_Duplicate(e->base_fit, 1) : cJSON_CreateNull());
}

/* The recipe: its config, label, changes, command lines, meshes and files.
 * 0, or -1 with d filled. */
static int bundle_recipe(mt__eng *e, const mt_kv *recipe, int status, cJSON *b, mt_diag *d)
{
    cJSON *o, *x, *argv_base = NULL, *argv_rec = NULL, *env = NULL, *bridge = NULL;
    char att[128], moe[128];
    mt_mesh mesh;
    o = cJSON_AddObjectToObject(b, "recipe");
    cJSON_AddItemToObject(o, "config", kv_json(recipe));
    label_json(e, o, recipe, 1);
    x = cJSON_CreateArray();
    {
        const char *k, *v;
        size_t i;
        for (i = 0; mt_kv_entry(recipe, i, &k, &v) == 0; i++) {
            const char *f0 = mt_kv_get(e->baseline, k);
            if (!f0 || strcmp(f0, v)) {
                cJSON *c = cJSON_CreateObject();
                cJSON_AddStringToObject(c, "knob", k);
                cJSON_AddStringToObject(c, "from", f0 ? f0 : "");
                cJSON_AddStringToObject(c, "to", v);
                cJSON_AddItemToArray(x, c);
            }
        }
    }
    cJSON_AddItemToObject(o, "changes", x);
    render_json(e, e->baseline, MT_DIALECT_MLM, &argv_base, NULL);
    render_json(e, recipe, MT_DIALECT_MLM, &argv_rec, &env);
    render_json(e, recipe, MT_DIALECT_BRIDGE, &bridge, NULL);
    cJSON_AddItemToObject(o, "command_diff", command_diff(argv_base, argv_rec));
    cJSON_AddItemToObject(o, "megatron_args", argv_rec);
    cJSON_AddItemToObject(o, "bridge_overrides", bridge);
    cJSON_AddItemToObject(o, "env", env);
    cJSON_Delete(argv_base);
    mt_config_mesh(recipe, e->c->hardware, &mesh);
    mt_mesh_format(&mesh, att, sizeof att, moe, sizeof moe);
    x = cJSON_AddObjectToObject(o, "meshes");
    cJSON_AddStringToObject(x, "attention", att);
    cJSON_AddStringToObject(x, "moe", moe);
    if (recipe_files(e, recipe, status,
                     cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "label")), o, d))
        return -1;
    return 0;
}

/* The evidence: decisions, timeline, memory, walls, ablation, validation
 * and the total gain validation measured. */
static void bundle_evidence(const mt__eng *e, cJSON *b)
{
    cJSON *x;
    cJSON_AddItemToObject(b, "decisions", cJSON_Duplicate(e->decisions, 1));
    cJSON_AddItemToObject(b, "timeline", cJSON_Duplicate(e->timeline, 1));
    x = cJSON_AddArrayToObject(b, "memory");
    if (e->mem_baseline)
        cJSON_AddItemToArray(x, cJSON_Duplicate(e->mem_baseline, 1));
    if (e->mem_winner)
        cJSON_AddItemToArray(x, cJSON_Duplicate(e->mem_winner, 1));
    if (e->walls_before || e->walls_after) {
        x = cJSON_AddObjectToObject(b, "walls");
        cJSON_AddItemToObject(x, "before", wall_json(e->walls_before));
        cJSON_AddItemToObject(x, "after", wall_json(e->walls_after));
    } else {
        cJSON_AddNullToObject(b, "walls");
    }
    cJSON_AddItemToObject(b, "ablation", cJSON_Duplicate(e->ablation, 1));
    /* false: the budget left an accepted change unablated (`tune` exits 5) */
    cJSON_AddBoolToObject(b, "ablation_complete", e->not_ablated == 0);
    if (e->validation) {
        cJSON *v = cJSON_Duplicate(e->validation, 1);
        cJSON_AddItemToObject(b, "validation", v);
        /* the total gain is what validation measured, never a sum */
        x = cJSON_GetObjectItemCaseSensitive(v, "gain");
        if (cJSON_IsNumber(x))
            cJSON_AddNumberToObject(b, "total_gain", x->valuedouble);
        else
            cJSON_AddNullToObject(b, "total_gain");
    } else {
        cJSON_AddNullToObject(b, "validation");
        cJSON_AddNullToObject(b, "total_gain");
    }
}

/* b as DIR/bundle.json, through a temporary file renamed into place (b is
 * freed).  0, or -1 with d filled. */
static int bundle_save(const char *dir, cJSON *b, mt_diag *d)
{
    char path[4096], tmp[4200], *text;
    FILE *f;
    int rc;
    snprintf(path, sizeof path, "%s/bundle.json", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    text = cJSON_Print(b);
    cJSON_Delete(b);
    if (!text || !(f = fopen(tmp, "w"))) {
        mt_diag_add(d, tmp, 0, NULL, "cannot write the bundle");
        free(text);
        return -1;
    }
    fputs(text, f);
    fputc('\n', f);
    free(text);
    rc = fflush(f) || fsync(fileno(f));
    rc |= fclose(f) != 0;
    if (rc || rename(tmp, path)) {
        mt_diag_add(d, path, 0, NULL, "cannot write the bundle");
        return -1;
    }
    return 0;
}

int mt__eng_write_bundle(mt__eng *e, const mt_kv *recipe, int status, double gain, mt_diag *d)
{
    cJSON *b = cJSON_CreateObject();
    int rc;
    (void)gain;
    bundle_head(e, status, b);
    if (bundle_recipe(e, recipe, status, b, d)) {
        cJSON_Delete(b);
        return -1;
    }
    bundle_evidence(e, b);
    if (bundle_save(e->o.dir, b, d))
        return -1;
    rc = mt_report_write(e->o.dir, d);
    return rc < 0 ? rc : 0;
}
