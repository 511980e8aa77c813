/*
 * recipe.c - shell-quoted environment files and launch scripts, and the
 * recipe files of a bundle (recipe.h).
 */
#include "recipe.h"

#include "measure.h"

#include "launch.h"
#include "render.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const format_names[MT_RECIPE_NFORMATS] = {"mlm", "bridge", "env", "sbatch"};
static const char *const file_names[MT_RECIPE_NFORMATS] = {
    "recipe.mlm.sh", "recipe.bridge.overrides", "recipe.env", "recipe.sbatch"};

/* The job name of the recipe's srun step and batch job. */
#define RECIPE_JOB_NAME "moetune-recipe"

int mt_recipe_format_parse(const char *name)
{
    int f;
    for (f = 0; name && f < MT_RECIPE_NFORMATS; f++)
        if (!strcmp(name, format_names[f]))
            return f;
    return -1;
}

const char *mt_recipe_format_name(int format)
{
    return format >= 0 && format < MT_RECIPE_NFORMATS ? format_names[format] : NULL;
}

const char *mt_recipe_file_name(int format)
{
    return format >= 0 && format < MT_RECIPE_NFORMATS ? file_names[format] : NULL;
}

char *mt_recipe_sh_quote(const char *word)
{
    static const char safe[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                               "0123456789_@%+=:,./-";
    size_t n = strlen(word), quotes = 0, i;
    char *out, *p;
    if (n && strspn(word, safe) == n)
        return strdup(word);
    for (i = 0; i < n; i++)
        quotes += word[i] == '\'';
    if (!(out = malloc(n + 3 * quotes + 3)))
        return NULL;
    p = out;
    *p++ = '\'';
    for (i = 0; i < n; i++) {
        if (word[i] == '\'') {
            memcpy(p, "'\\''", 4); /* close, an escaped quote, reopen */
            p += 4;
        } else {
            *p++ = word[i];
        }
    }
    *p++ = '\'';
    *p = '\0';
    return out;
}

/* ---- text building ------------------------------------------------------------------- */

/* A memory stream: the text is the caller's once closed. */
typedef struct text {
    FILE *f;
    char *s;
    size_t n;
    int oom;
} text;

static int text_open(text *t)
{
    memset(t, 0, sizeof *t);
    t->f = open_memstream(&t->s, &t->n);
    return t->f ? 0 : -1;
}

/* Closes the stream; the text (caller frees), or NULL on OOM. */
static char *text_close(text *t)
{
    int bad = !t->f || ferror(t->f) || t->oom;
    if (t->f && fclose(t->f))
        bad = 1;
    t->f = NULL;
    if (bad) {
        free(t->s);
        t->s = NULL;
    }
    return t->s;
}

/* One word, quoted. */
static void put_word(text *t, const char *word)
{
    char *q = mt_recipe_sh_quote(word);
    if (!q) {
        t->oom = 1;
        return;
    }
    fputs(q, t->f);
    free(q);
}

/* A flag or an override begins a continuation line; a flag's values stay
 * beside it. */
static int starts_line(const char *word)
{
    return word[0] == '-' || strchr(word, '=') != NULL;
}

/* lead, then the words of w quoted (flags on lines of their own, and the
 * word at index brk too: a program after its launcher's options), then
 * "$@" when pass_args: whatever the user adds on the command line comes
 * last, so it wins over the recipe's value for a flag given twice. */
static void put_command(text *t, const char *lead, const mt_strlist *w, size_t brk, int pass_args)
{
    size_t i;
    fputs(lead, t->f);
    for (i = 0; i < w->n; i++) {
        if (i)
            fputs(i == brk || starts_line(w->v[i]) ? " \\\n  " : " ", t->f);
        put_word(t, w->v[i]);
    }
    if (pass_args)
        fputs(" \\\n  \"$@\"", t->f);
    fputc('\n', t->f);
}

/* The title as comment lines: each of its lines after "# ". */
static void put_title(text *t, const char *title)
{
    const char *p = title;
    do {
        size_t n = strcspn(p, "\n");
        fprintf(t->f, "# %.*s\n", (int)n, p);
        p += n;
    } while (*p && *++p);
}

static int is_name(const char *s)
{
    size_t n = strlen(s);
    return n && !(s[0] >= '0' && s[0] <= '9') &&
           strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") == n;
}

/* NAME=value lines, each after prefix ("" or "export "). */
static int put_env(text *t, const char *prefix, const mt_kv *env, mt_diag *d)
{
    const char *k, *v;
    size_t i;
    for (i = 0; env && mt_kv_entry(env, i, &k, &v) == 0; i++) {
        if (!is_name(k)) {
            mt_diag_add(d, NULL, 0, "env",
                        "environment variable '%s' is not a shell variable name (letters, "
                        "digits and '_', not starting with a digit); rename it in the "
                        "contract's launch.env or base env group",
                        k);
            return -1;
        }
        fprintf(t->f, "%s%s=", prefix, k);
        put_word(t, v);
        fputc('\n', t->f);
    }
    return 0;
}

static int oom(mt_diag *d)
{
    mt_diag_add(d, NULL, 0, NULL, "out of memory writing a recipe");
    return -1;
}

int mt_recipe_env_text(const mt_kv *env, char **out, mt_diag *d)
{
    text t;
    *out = NULL;
    if (text_open(&t))
        return oom(d);
    if (put_env(&t, "", env, d)) {
        free(text_close(&t));
        return -1;
    }
    return (*out = text_close(&t)) ? 0 : oom(d);
}

/* The launcher settings as one comment line. */
static void put_launch_comment(text *t, const mt_kv *launch)
{
    const char *k, *v;
    size_t i;
    if (!launch || !mt_kv_count(launch))
        return;
    fputs("# launcher settings, applied by the launcher (srun, numactl), not by this script:",
          t->f);
    for (i = 0; mt_kv_entry(launch, i, &k, &v) == 0; i++)
        fprintf(t->f, " %s=%s", k, v);
    fputc('\n', t->f);
}

int mt_recipe_sh_script(const mt_strlist *cmd, const mt_kv *env, const mt_kv *launch,
                        const char *title, char **out, mt_diag *d)
{
    text t;
    *out = NULL;
    if (text_open(&t))
        return oom(d);
    fputs("#!/bin/sh\n", t.f);
    put_title(&t, title);
    fputs("set -e\n", t.f);
    if (put_env(&t, "export ", env, d)) {
        free(text_close(&t));
        return -1;
    }
    put_launch_comment(&t, launch);
    put_command(&t, "exec ", cmd, 0, 1);
    return (*out = text_close(&t)) ? 0 : oom(d);
}

/* ---- the command ---------------------------------------------------------------------- */

int mt_recipe_command(mt_registry *reg, const mt_contract *c, const mt_kv *cfg, uint32_t dialect,
                      const char *sim_path, mt_rendered *r, mt_strlist *cmd, mt_diag *d)
{
    mt_kv *ph;
    size_t i;
    int rc;
    if (mt_render(reg, c, cfg, dialect, r, d))
        return -1;
    /* a sim contract's program needs the cluster it stands for, which
     * moetune otherwise adds per run; without forced balance (a production
     * config: mt_recipe_production) it routes as the router chooses */
    if (!strcmp(c->backend, "sim")) {
        const char *fb = mt_kv_get(cfg, "moe_router_force_load_balancing");
        mt_measure_sim_env(c, fb && strcmp(fb, "false") ? NULL : "natural", r->env);
    }
    if (dialect == (uint32_t)c->dialect) {
        if (!(ph = mt_kv_new()))
            return oom(d);
        mt_kv_set(ph, "sim", sim_path ? sim_path : "moetune-sim");
        mt_kv_set(ph, "nodes", mt_kv_get(c->hardware, "nodes"));
        mt_kv_set(ph, "gpus_per_node", mt_kv_get(c->hardware, "gpus_per_node"));
        mt_kv_set(ph, "world_size", mt_kv_get(c->hardware, "world_size"));
        mt_kv_set(ph, "job_name", RECIPE_JOB_NAME);
        mt_kv_set(ph, "run_dir", ".");
        rc = mt_launch_expand((const char *const *)c->launch_template, c->n_template, ph, &r->argv,
                              cmd, d);
        mt_kv_destroy(&ph);
        return rc ? -1 : 0;
    }
    if (dialect != MT_DIALECT_MLM) {
        mt_diag_add(d, c->path, mt_contract_line(c, "launch.template"), "launch.dialect",
                    "the contract launches Megatron-LM (launch.dialect = \"mlm\"): its "
                    "launch.template takes no Megatron-Bridge overrides, and a Bridge launch "
                    "needs its own recipe name; print the overrides alone (--argv-only)");
        return -1;
    }
    /* Megatron-LM flags under a Bridge contract: Megatron-LM's own entry point */
    rc = mt_strlist_push(cmd, "python") || mt_strlist_push(cmd, "pretrain_gpt.py");
    for (i = 0; !rc && i < r->argv.n; i++)
        rc = mt_strlist_push(cmd, r->argv.v[i]);
    return rc ? oom(d) : 0;
}

/* ---- the production config ------------------------------------------------------------ */

/* Knobs moetune sets only to measure, the value that leaves each out of a
 * rendering (core knobs render only when nonzero, switches only when true:
 * core/render.c), and why the recipe leaves them out. */
static const struct {
    const char *knob, *off;
} screen_only[] = {
    /* the screen's or validation's length; the contract declares no
     * production length, so the flag is left to the user */
    {"train_iters", "0"},
    /* balanced routing (data.routing = "forced"): a benchmark setting; a
     * training run routes with the router's own choice of experts */
    {"moe_router_force_load_balancing", "false"},
};

mt_kv *mt_recipe_production(const mt_kv *cfg)
{
    mt_kv *p = mt_kv_dup(cfg);
    size_t i;
    for (i = 0; p && i < sizeof screen_only / sizeof screen_only[0]; i++)
        if (mt_kv_get(p, screen_only[i].knob) &&
            mt_kv_set(p, screen_only[i].knob, screen_only[i].off))
            mt_kv_destroy(&p);
    return p;
}

/* ---- the four files ------------------------------------------------------------------- */

/* The first problem in d as a string (caller frees), or a fallback. */
static char *first_problem(const mt_diag *d, const char *fallback)
{
    const mt_diag_item *it = mt_diag_count(d) ? mt_diag_at(d, 0) : NULL;
    if (!it)
        return strdup(fallback);
    if (it->field) {
        size_t n = strlen(it->field) + strlen(it->message) + 3;
        char *s = malloc(n);
        if (s)
            snprintf(s, n, "%s: %s", it->field, it->message);
        return s;
    }
    return strdup(it->message);
}

static char *mlm_text(const mt_contract *c, const mt_strlist *cmd, const char *title)
{
    text t;
    if (text_open(&t))
        return NULL;
    fputs("#!/bin/sh\n", t.f);
    put_title(&t, title);
    fprintf(t.f,
            "# The recipe's Megatron-LM command line.  Its environment is recipe.env beside\n"
            "# this file (set -a; . ./recipe.env; set +a); recipe.sbatch runs both on the\n"
            "# contract's nodes.  Left out, because moetune sets it only to measure:\n"
            "# --train-iters (its screens ran %d steps and its validations %d; the contract\n"
            "# declares no production length).  Arguments given to this script come last,\n"
            "# e.g. sh recipe.mlm.sh --train-iters 500000\n",
            c->screen.steps, c->validate.steps);
    if (c->dialect != MT_DIALECT_MLM)
        fputs("# The contract launches Megatron-Bridge; these are the same settings as\n"
              "# Megatron-LM's pretrain_gpt.py takes them: launch it as you launch Megatron-LM.\n",
              t.f);
    put_command(&t, "exec ", cmd, 0, 1);
    return text_close(&t);
}

/* One override a line: each line is one argv word of run_recipe.py (its
 * quotes are Hydra's, not the shell's). */
static char *bridge_text(const mt_strlist *overrides, char **why)
{
    text t;
    size_t i;
    for (i = 0; i < overrides->n; i++)
        if (strchr(overrides->v[i], '\n')) {
            *why = strdup("an override holds a newline, which a file of one override a "
                          "line cannot carry");
            return NULL;
        }
    if (text_open(&t))
        return NULL;
    for (i = 0; i < overrides->n; i++)
        fprintf(t.f, "%s\n", overrides->v[i]);
    return text_close(&t);
}

static char *sbatch_text(const mt_contract *c, const mt_launch *l, const mt_strlist *cmd,
                         const mt_kv *env, const char *title, mt_diag *d)
{
    mt_strlist srun = {0};
    const char *image = mt_kv_get(c->stack, "container");
    text t;
    if (text_open(&t))
        return NULL;
    fputs("#!/bin/bash\n", t.f);
    put_title(&t, title);
    fprintf(t.f,
            "# The recipe as a Slurm batch job on the contract's %d node(s) x %d GPUs\n"
            "# (hardware.nodes, hardware.gpus_per_node), with its launcher settings;\n"
            "# it needs no moetune coordinator or worker%s.  Submit: sbatch recipe.sbatch\n",
            l->nodes, l->gpus_per_node,
            strcmp(c->backend, "sim") ? ""
                                      : " (this contract's program is the simulator, "
                                        "moetune-sim: it stands in for Megatron)");
    fprintf(t.f, "#SBATCH --job-name=%s\n#SBATCH --nodes=%d\n#SBATCH --ntasks-per-node=%d\n",
            RECIPE_JOB_NAME, l->nodes, l->ntasks_per_node);
    if (l->gpus_per_node > 0)
        fprintf(t.f, "#SBATCH --gpus-per-node=%d\n", l->gpus_per_node);
    fputs("#SBATCH --exclusive\nset -e\n", t.f);
    if (put_env(&t, "export ", env, d)) {
        free(text_close(&t));
        return NULL;
    }
    if (mt_launch_wrap(l, NULL, &srun))
        t.oom = 1;
    if (image && *image) {
        char opt[4096];
        fputs("# the container (stack.container), through pyxis's --container-image\n", t.f);
        snprintf(opt, sizeof opt, "--container-image=%s", image);
        if (mt_strlist_push(&srun, opt))
            t.oom = 1;
    }
    {
        /* srun and its options, then the command on a line of its own */
        size_t brk = srun.n, i;
        for (i = 0; i < cmd->n; i++)
            if (mt_strlist_push(&srun, cmd->v[i]))
                t.oom = 1;
        put_command(&t, "", &srun, brk, 1);
    }
    mt_strlist_clear(&srun);
    return text_close(&t);
}

void mt_recipe_clear(mt_recipe *rc)
{
    int f;
    for (f = 0; f < MT_RECIPE_NFORMATS; f++) {
        free(rc->text[f]), free(rc->why_not[f]);
        rc->text[f] = rc->why_not[f] = NULL;
    }
}

/* The formats that use the contract's own dialect: env and sbatch. */
static void build_native(mt_registry *reg, const mt_contract *c, const mt_kv *cfg,
                         const char *sim_path, const char *title, mt_recipe *out)
{
    mt_rendered r;
    mt_strlist cmd = {0};
    mt_diag *d = mt_diag_new();
    mt_launch *l = NULL;
    int nodes = atoi(mt_kv_get(c->hardware, "nodes") ? mt_kv_get(c->hardware, "nodes") : "1");
    int gpn = atoi(mt_kv_get(c->hardware, "gpus_per_node") ? mt_kv_get(c->hardware, "gpus_per_node")
                                                           : "0");
    mt_rendered_init(&r);
    if (mt_recipe_command(reg, c, cfg, (uint32_t)c->dialect, sim_path, &r, &cmd, d) == 0) {
        if (mt_recipe_env_text(r.env, &out->text[MT_RECIPE_ENV], d) == 0 &&
            (l = mt_launch_new(MT_LAUNCHER_SRUN, nodes, gpn, r.launch, RECIPE_JOB_NAME, NULL, d)))
            out->text[MT_RECIPE_SBATCH] = sbatch_text(c, l, &cmd, r.env, title, d);
    }
    if (!out->text[MT_RECIPE_ENV])
        out->why_not[MT_RECIPE_ENV] = first_problem(d, "out of memory");
    if (!out->text[MT_RECIPE_SBATCH])
        out->why_not[MT_RECIPE_SBATCH] = first_problem(d, "out of memory");
    mt_launch_destroy(&l);
    mt_strlist_clear(&cmd);
    mt_rendered_clear(&r);
    mt_diag_destroy(&d);
}

int mt_recipe_build(mt_registry *reg, const mt_contract *c, const mt_kv *cfg, const char *sim_path,
                    const char *title, mt_recipe *out, mt_diag *d)
{
    mt_rendered r;
    mt_strlist cmd = {0};
    mt_diag *local = mt_diag_new();
    int f;
    memset(out, 0, sizeof *out);
    mt_rendered_init(&r);
    if (mt_recipe_command(reg, c, cfg, MT_DIALECT_MLM, sim_path, &r, &cmd, local) == 0)
        out->text[MT_RECIPE_MLM] = mlm_text(c, &cmd, title);
    if (!out->text[MT_RECIPE_MLM])
        out->why_not[MT_RECIPE_MLM] = first_problem(local, "out of memory");
    mt_rendered_clear(&r);
    mt_strlist_clear(&cmd);
    mt_diag_clear(local);
    mt_rendered_init(&r);
    if (mt_render(reg, c, cfg, MT_DIALECT_BRIDGE, &r, local) == 0)
        out->text[MT_RECIPE_BRIDGE] = bridge_text(&r.argv, &out->why_not[MT_RECIPE_BRIDGE]);
    if (!out->text[MT_RECIPE_BRIDGE] && !out->why_not[MT_RECIPE_BRIDGE])
        out->why_not[MT_RECIPE_BRIDGE] = first_problem(local, "out of memory");
    mt_rendered_clear(&r);
    mt_diag_destroy(&local);
    build_native(reg, c, cfg, sim_path, title, out);
    for (f = 0; f < MT_RECIPE_NFORMATS; f++)
        if (!out->text[f] && !out->why_not[f]) {
            mt_recipe_clear(out);
            return oom(d);
        }
    return 0;
}

static int write_file(const char *dir, const char *name, const char *body, mode_t mode, mt_diag *d)
{
    char path[4096], tmp[4200];
    FILE *f;
    int bad;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (!(f = fopen(tmp, "w"))) {
        mt_diag_add(d, tmp, 0, NULL, "cannot write the recipe: %s", strerror(errno));
        return -1;
    }
    bad = fputs(body, f) < 0;
    bad |= fflush(f) != 0 || fsync(fileno(f)) != 0;
    bad |= fclose(f) != 0;
    if (bad || chmod(tmp, mode) || rename(tmp, path)) {
        mt_diag_add(d, path, 0, NULL, "cannot write the recipe: %s", strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

int mt_recipe_write(const mt_recipe *rc, const char *dir, mt_diag *d)
{
    int f;
    for (f = 0; f < MT_RECIPE_NFORMATS; f++) {
        mode_t mode = f == MT_RECIPE_MLM || f == MT_RECIPE_SBATCH ? 0755 : 0644;
        if (rc->text[f]) {
            if (write_file(dir, file_names[f], rc->text[f], mode, d))
                return -1;
        } else {
            /* a resumed tune's earlier file must not outlive its recipe */
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dir, file_names[f]);
            unlink(path);
        }
    }
    return 0;
}

/* ---- reading a bundle's recipe --------------------------------------------------------- */

/* The whole file, or NULL (errno set). */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *s = NULL;
    size_t n = 0, cap = 0, got;
    if (!f)
        return NULL;
    do {
        if (cap - n < 4096) {
            char *g = realloc(s, cap = cap ? 2 * cap : 8192);
            if (!g) {
                free(s);
                fclose(f);
                errno = ENOMEM;
                return NULL;
            }
            s = g;
        }
        got = fread(s + n, 1, cap - n - 1, f);
        n += got;
    } while (got > 0);
    if (ferror(f)) {
        free(s);
        fclose(f);
        errno = EIO;
        return NULL;
    }
    fclose(f);
    s[n] = '\0';
    return s;
}

static const char *json_str(const cJSON *o, const char *key)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(x) ? x->valuestring : NULL;
}

/* The file name recipe.files.<format> holds; NULL with the reason in d. */
static const char *recipe_file(const cJSON *b, const char *path, int format, mt_diag *d)
{
    const cJSON *recipe = cJSON_GetObjectItemCaseSensitive(b, "recipe"), *files, *x;
    const char *fname = format_names[format], *name, *why;
    if (!cJSON_IsObject(recipe)) {
        mt_diag_add(d, path, 0, "recipe", "no 'recipe' object: this is not a moetune bundle");
        return NULL;
    }
    files = cJSON_GetObjectItemCaseSensitive(recipe, "files");
    if (!files) {
        mt_diag_add(d, path, 0, "recipe.files",
                    "missing: the bundle was written before moetune wrote recipe files; tune "
                    "again (or read recipe.megatron_args in bundle.json)");
        return NULL;
    }
    if (cJSON_IsNull(files)) {
        const char *status = json_str(b, "status");
        const char *stopped =
            json_str(cJSON_GetObjectItemCaseSensitive(b, "budget"), "stopped_because");
        mt_diag_add(d, path, 0, "recipe.files", "no usable recipe: the tune's status is '%s'%s%s%s",
                    status ? status : "?", stopped ? " (" : "", stopped ? stopped : "",
                    stopped ? ")" : "");
        return NULL;
    }
    if (!cJSON_IsObject(files)) {
        mt_diag_add(d, path, 0, "recipe.files", "must be an object of file names or null");
        return NULL;
    }
    x = cJSON_GetObjectItemCaseSensitive(files, fname);
    if (cJSON_IsString(x)) {
        name = x->valuestring;
        /* a file beside bundle.json, never a path elsewhere */
        if (!*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, "..")) {
            mt_diag_add(d, path, 0, "recipe.files",
                        "'%s' is not a file name in the bundle "
                        "directory",
                        name);
            return NULL;
        }
        return name;
    }
    why = json_str(cJSON_GetObjectItemCaseSensitive(recipe, "file_errors"), fname);
    mt_diag_add(d, path, 0, "recipe.files", "the recipe has no %s form: %s", fname,
                why ? why : "recipe.files names no file for it");
    return NULL;
}

int mt_recipe_read(const char *dir, int format, char **out, mt_diag *d)
{
    char path[4096], file[4200];
    char *json;
    const char *name;
    cJSON *b;
    struct stat sb;
    *out = NULL;
    if (format < 0 || format >= MT_RECIPE_NFORMATS) {
        mt_diag_add(d, NULL, 0, "--format", "use one of " MT_RECIPE_FORMAT_WORDS);
        return -1;
    }
    if (stat(dir, &sb) || !S_ISDIR(sb.st_mode)) {
        mt_diag_add(d, dir, 0, NULL,
                    "not a directory: give the tune's --dir, where bundle.json is");
        return -1;
    }
    snprintf(path, sizeof path, "%s/bundle.json", dir);
    if (!(json = slurp(path))) {
        mt_diag_add(d, path, 0, NULL,
                    "cannot read it (%s): %s is not a tune bundle, or its tune has not ended "
                    "(a tune writes bundle.json when it ends)",
                    strerror(errno), dir);
        return -1;
    }
    b = cJSON_Parse(json);
    if (!b || !cJSON_IsObject(b)) {
        const char *at = b ? NULL : cJSON_GetErrorPtr();
        if (at)
            mt_diag_add(d, path, 0, NULL, "not JSON (parsing stopped at byte %ld)",
                        (long)(at - json));
        else
            mt_diag_add(d, path, 0, NULL, "not a JSON object: not a moetune bundle");
        cJSON_Delete(b);
        free(json);
        return -1;
    }
    free(json);
    name = recipe_file(b, path, format, d);
    if (name) {
        snprintf(file, sizeof file, "%s/%s", dir, name);
        if (!(*out = slurp(file)))
            mt_diag_add(d, file, 0, NULL,
                        "cannot read it (%s); bundle.json's recipe.files.%s "
                        "names it",
                        strerror(errno), format_names[format]);
    }
    cJSON_Delete(b);
    return *out ? 0 : -1;
}
