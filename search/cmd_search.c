/*
 * cmd_search.c - the `moetune` commands of the search floor that are not
 * the tune itself: render, recipe, optimum, bisect, model-screen
 * (search/cmd_search.h).
 */
#include "cmd_search.h"

#include "bisect.h"
#include "cli.h"
#include "config.h"
#include "dirlock.h"
#include "engine.h"
#include "evaluate.h"
#include "job_memo.h"
#include "measure.h"
#include "memory.h"
#include "model.h"
#include "prepare.h"
#include "recipe.h"
#include "render.h"
#include "stats.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* render's output options: format "env" or "sh" (NULL: today's listing),
 * argv_only. */
typedef struct render_opts {
    const char *format;
    int argv_only;
} render_opts;

/* --format and --argv-only: 0, or MT_EXIT_USAGE with the problem said. */
static int check_render_opts(const render_opts *ro)
{
    if (ro->format && strcmp(ro->format, "env") && strcmp(ro->format, "sh") &&
        strcmp(ro->format, "launch")) {
        fprintf(stderr, "moetune render: --format takes env, sh or launch, not '%s'\n",
                ro->format);
        return MT_EXIT_USAGE;
    }
    if (ro->format && ro->argv_only) {
        fprintf(stderr, "moetune render: --argv-only and --format %s exclude each other; give "
                        "one\n",
                ro->format);
        return MT_EXIT_USAGE;
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
 * command.  0, or 1 (moetune failed) / MT_EXIT_BAD_INPUT with d filled. */
static int print_formatted(mt_session *s, uint32_t dial, const char *format, mt_diag *d)
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
        mt_cli_sim_path(simbin, sizeof simbin);
        rc = mt_render(s->reg, s->contract, s->cfg, dial, &out, d) ? 1 : 0;
        if (!rc && mt_measure_command(s->contract, &out, simbin, ".", "mt-render", NULL, NULL,
                                      NULL, NULL, &cmd, NULL, d))
            rc = MT_EXIT_BAD_INPUT;
        for (i = 0; !rc && i < cmd.n; i++)
            printf("%s\n", cmd.v[i]);
        mt_strlist_clear(&cmd);
        mt_rendered_clear(&out);
        return rc;
    }
    if (!strcmp(format, "env")) {
        rc = mt_render(s->reg, s->contract, s->cfg, dial, &out, d) ? 1 : 0;
        if (!rc && !strcmp(s->contract->backend, "sim"))
            mt_measure_sim_env(s->contract, NULL, out.env); /* as the sh format exports */
        if (!rc && mt_recipe_env_text(out.env, &text, d))
            rc = MT_EXIT_BAD_INPUT;
    } else {
        mt_cli_sim_path(simbin, sizeof simbin);
        snprintf(title, sizeof title, "moetune render %s", s->contract->path);
        rc = mt_recipe_command(s->reg, s->contract, s->cfg, dial, simbin, &out, &cmd, d)
                 ? MT_EXIT_BAD_INPUT
             : mt_recipe_sh_script(&cmd, out.env, out.launch, title, &text, d) ? MT_EXIT_BAD_INPUT
                                                                                 : 0;
    }
    if (!rc)
        fputs(text, stdout);
    free(text);
    mt_strlist_clear(&cmd);
    mt_rendered_clear(&out);
    return rc;
}

int mt_cmd_render(int argc, char **argv)
{
    mt_session s;
    mt_cli_list sets = {0};
    const char *dialect = NULL, *pos[1] = {NULL};
    render_opts ro = {NULL, 0};
    uint32_t dial;
    mt_rendered out;
    mt_diag *d;
    int rc;
    const mt_opt opts[] = {
        {"--set", NULL, "KNOB=VALUE", MT_OPT_LIST, &sets, 0, 0, NULL, "change the base config"},
        {"--dialect", NULL, "mlm|bridge", MT_OPT_STR, &dialect, 0, 0, NULL,
         "the command line's dialect (default: the contract's)"},
        {"--argv-only", NULL, NULL, MT_OPT_FLAG, &ro.argv_only, 0, 0, NULL, "the argv alone"},
        {"--format", NULL, "env|sh|launch", MT_OPT_STR, &ro.format, 0, 0, NULL,
         "env: NAME=value lines (sh-quoted); sh: a runnable script; launch: the worker's argv"},
        {NULL}};
    mt_cmd c = {"render",
                "usage: moetune render CONTRACT [--set knob=value]... [--dialect mlm|bridge]\n"
                "       [--argv-only | --format env|sh|launch]\n"
                "  the launch command for the base config (+ sets): argv one word a line,\n"
                "  then the environment and launcher settings\n",
                opts, pos, 1, 1, "CONTRACT", NULL};
    if ((rc = mt_cli_parse(&c, argc, argv, 2)))
        return rc == MT_CLI_HELP ? 0 : rc;
    if ((rc = check_render_opts(&ro))) {
        mt_cli_list_clear(&sets);
        return rc;
    }
    if (dialect && strcmp(dialect, "mlm") && strcmp(dialect, "bridge")) {
        fprintf(stderr, "moetune: --dialect takes mlm or bridge, not '%s'\n", dialect);
        mt_cli_list_clear(&sets);
        return MT_EXIT_USAGE;
    }
    if ((rc = mt_session_open_legal(&s, pos[0], &sets)))
        return rc;
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
        mt_rendered_clear(&out);
    }
    if (rc)
        mt_diag_print(d, stderr);
    mt_diag_destroy(&d);
    mt_session_clear(&s);
    return rc;
}

#define RECIPE_USAGE "usage: moetune recipe DIR [--format " "mlm|bridge|env|sbatch]\n"

/* moetune recipe DIR [--format F]: the recipe file of a finished tune's
 * bundle, as written (search/recipe.h). */
int mt_cmd_recipe(int argc, char **argv)
{
    const char *format = "mlm", *pos[1] = {NULL};
    char *text = NULL;
    mt_diag *d;
    int f, rc;
    const mt_opt opts[] = {{"--format", NULL, "mlm|bridge|env|sbatch", MT_OPT_STR, &format, 0, 0,
                            NULL, "which recipe file (default mlm)"},
                           {NULL}};
    mt_cmd c = {"recipe", RECIPE_USAGE, opts, pos, 1, 1, "DIR (a tune's --dir)", NULL};
    if ((rc = mt_cli_parse(&c, argc, argv, 2)))
        return rc == MT_CLI_HELP ? 0 : rc;
    if ((f = mt_recipe_format_parse(format)) < 0) {
        fprintf(stderr, "moetune recipe: --format takes " MT_RECIPE_FORMAT_WORDS ", not '%s'\n",
                format);
        return MT_EXIT_USAGE;
    }
    d = mt_diag_new();
    rc = mt_recipe_read(pos[0], f, &text, d);
    if (rc) {
        fprintf(stderr, "moetune recipe: ");
        mt_diag_print(d, stderr);
    } else {
        fputs(text, stdout);
    }
    free(text);
    mt_diag_destroy(&d);
    return rc ? MT_EXIT_BAD_INPUT : 0;
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

int mt_cmd_optimum(int argc, char **argv)
{
    const char *pos[1] = {NULL};
    static const mt_opt opts[] = {{NULL}};
    mt_cmd c = {"optimum",
                "usage: moetune optimum CONTRACT\n"
                "  best config of the declared space (simulator, no noise)\n",
                opts, pos, 1, 1, "CONTRACT", NULL};
    const char *path;
    mt_session s;
    mt_optimum o;
    mt_diag *d;
    int rc = mt_cli_parse(&c, argc, argv, 2);
    if (rc)
        return rc == MT_CLI_HELP ? 0 : rc;
    path = pos[0];
    rc = mt_session_open(&s, path, 0);
    if (rc) {
        mt_session_clear(&s);
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
            mt_strlist_clear(&diff);
            mt_kv_destroy(&o.best);
        } else {
            printf("optimum: no config of the space is legal and fits\n");
        }
    }
    mt_diag_destroy(&d);
    mt_session_clear(&s);
    return rc ? MT_EXIT_BAD_INPUT : 0;
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

int mt_cmd_bisect(int argc, char **argv)
{
    mt_session s;
    mt_bisect_opts o;
    mt_cli_list prep = {0};
    const char *contract = NULL, *workers = NULL;
    char simbin[PATH_MAX];
    int rc, quiet = 0, outcome = 0, lock = -1;
    mt_diag *d;
    const mt_opt opts[] = {
        {"--good", NULL, "REV", MT_OPT_STR, &o.good, 0, 0, NULL, "a revision without the regression"},
        {"--bad", NULL, "REV", MT_OPT_STR, &o.bad, 0, 0, NULL, "a later revision with it"},
        {"--repo", NULL, "PATH", MT_OPT_STR, &o.repo, 0, 0, NULL, "the git repository of the revisions"},
        {"--revs", NULL, "FILE", MT_OPT_STR, &o.revs_file, 0, 0, NULL,
         "the revisions, one a line, oldest first"},
        {"--good-config", NULL, "GOOD.cfg", MT_OPT_STR, &o.good_config, 0, 0, NULL,
         "bisect the knob changes between two contracts' base configs"},
        {"--bad-config", NULL, "BAD.cfg", MT_OPT_STR, &o.bad_config, 0, 0, NULL,
         "(with --good-config)"},
        {"--dir", NULL, "DIR", MT_OPT_STR, &o.dir, 0, 0, NULL, "the bisection's directory"},
        {"--prepare", NULL, "'ARGV TEMPLATE'", MT_OPT_LIST, &prep, 0, 0, NULL,
         "a step that prepares each revision"},
        {"--prepare-timeout", NULL, "S", MT_OPT_DOUBLE, &o.prepare_timeout_s, 0, 1, NULL,
         "each prepare step's time limit"},
        {"--jobs", NULL, "N", MT_OPT_INT, &o.exec.slots, 1, 0, NULL, "runs at once (local executor)"},
        {"--workers", NULL, "tcp://HOST:PORT", MT_OPT_STR, &workers, 0, 0, NULL,
         "run the jobs on ZeroMQ workers"},
        {"--keys", NULL, "DIR", MT_OPT_STR, &o.exec.key_dir, 0, 0, NULL, "CURVE keys for the workers"},
        {"--job-grace", NULL, "S", MT_OPT_DOUBLE, &o.exec.job_grace_s, 0, 0, NULL,
         "how long a worker's job may run past its limit"},
        {"--worker-wait", NULL, "S", MT_OPT_DOUBLE, &o.exec.worker_wait_s, 0, 0, NULL,
         "how long to wait for a worker that can run the jobs"},
        {"--quiet", NULL, NULL, MT_OPT_FLAG, &quiet, 0, 0, NULL, "no progress on stderr"},
        {NULL}};
    mt_cmd c = {"bisect", BISECT_USAGE, opts, &contract, 0, 1, "CONTRACT", NULL};
    memset(&o, 0, sizeof o);
    o.exec.executor = MT_EXEC_LOCAL;
    o.exec.slots = 1;
    if ((rc = mt_cli_parse(&c, argc, argv, 2)))
        return rc == MT_CLI_HELP ? 0 : rc;
    if (workers)
        o.exec.workers = workers, o.exec.executor = MT_EXEC_ZMQ;
    o.n_prepare = prep.n;
    if (o.good_config || o.bad_config) {
        /* the config source: two contracts, nothing to check out */
        if (!contract || !o.good_config || !o.bad_config || !o.dir || o.good || o.bad || o.repo ||
            o.revs_file || o.n_prepare || o.exec.slots < 1) {
            fputs("moetune bisect: --good-config and --bad-config go together, with --dir, and "
                  "without --good, --bad, --repo, --revs or --prepare\n", stderr);
            goto usage;
        }
    } else if (!contract || !o.good || !o.bad || !o.dir || !o.repo == !o.revs_file ||
               o.exec.slots < 1 || o.prepare_timeout_s < 0)
        goto usage;
    o.prepare = prep.v;
    /* every prepare template must split and expand before anything runs */
    {
        mt_strlist *steps = NULL;
        size_t i;
        d = mt_diag_new();
        if (mt_prepare_expand(prep.v, o.n_prepare, "REV", o.repo, "WORK", &steps, d)) {
            mt_diag_print(d, stderr);
            mt_diag_destroy(&d);
            mt_cli_list_clear(&prep);
            return MT_EXIT_BAD_INPUT;
        }
        for (i = 0; i < o.n_prepare; i++)
            mt_strlist_clear(&steps[i]);
        free(steps);
        mt_diag_destroy(&d);
    }
    rc = mt_session_open(&s, contract, 0);
    if (rc) {
        mt_session_clear(&s);
        mt_cli_list_clear(&prep);
        return rc;
    }
    /* one owner per bisection directory */
    if (mt_cli_make_dir("bisect", o.dir) || (lock = mt_cli_own_dir("bisect", o.dir, "bisection", &rc)) < 0) {
        mt_session_clear(&s);
        mt_cli_list_clear(&prep);
        return lock < 0 && rc ? rc : MT_EXIT_BAD_INPUT;
    }
    mt_cli_sim_path(simbin, sizeof simbin);
    o.exec.sim_path = simbin;
    o.progress = quiet ? NULL : stderr;
    d = mt_diag_new();
    rc = mt_bisect_cmd(s.reg, s.contract, &o, &outcome, d);
    if (rc) {
        mt_diag_print(d, stderr);
        rc = rc == -EINVAL ? MT_EXIT_BAD_INPUT : EXIT_FAILURE;
    } else {
        rc = outcome == MT_BISECT_FOUND ? 0 : outcome == MT_BISECT_NOT_REPRODUCED ? 3 : 1;
    }
    mt_diag_destroy(&d);
    mt_session_clear(&s);
    mt_dirlock_release(&lock);
    mt_cli_list_clear(&prep);
    return rc;
usage:
    mt_cli_list_clear(&prep);
    return mt_cli_usage(&c);
}

/* ---- space, model-screen: the search benchmark's TPE harness (tests/tpe_harness.py)
 * drives the same sim through the same contract with these ----------------------------- */

/* One screen of cfg on the model executor (search/exec.c's job, identical
 * accounting): nrep replicates 0..nrep-1, as grid and random screen. */
static cJSON *model_screen_one(mt_session *s, const mt_kv *cfg, int nrep, int rep0, uint64_t seed,
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
            mt_job_memo m;
            free(text);
            if (!j) {
                outcome = "error";
                break;
            }
            mt_job_memo_from_json(j, &m);
            gh += isfinite(m.gpu_hours) ? m.gpu_hours : 0;
            if (!strcmp(m.outcome, "ok") && isfinite(m.ms)) {
                ms[ok] = m.ms;
                tf[ok++] = m.tflops;
                if (isfinite(m.peak_gb) && isfinite(cap_gb) && m.peak_gb > cap_gb)
                    within = 0;
            } else if (!strcmp(outcome, "ok")) {
                outcome = !*m.outcome ? "error" : !strcmp(m.outcome, "oom") ? "oom" : "crash";
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
    mt_violations_clear(&vs);
    return o;
}

/* A --stdin line: one JSON object of knob -> value (strings, numbers,
 * booleans), or {"set": {knob: value}, "first_replicate": N}. */
static mt_kv *model_screen_line(mt_session *s, const char *line, int *rep0, char *why, size_t n)
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
#define MODEL_SCREEN_USAGE                                                                     \
    "usage: moetune model-screen CONTRACT [--set knob=value]... [--replicates N] "             \
    "[--first-replicate K] [--seed S] [--noise-free] [--json] [--stdin]\n"                      \
    "  one screen on the sim's model, as `tune --executor model` runs it (JSON; --stdin:\n"    \
    "  one JSON object of sets a line)\n"

int mt_cmd_model_screen(int argc, char **argv)
{
    mt_session s;
    mt_cli_list sets = {0};
    int rc, nrep = 0, rep0 = 0, noise_free = 0, from_stdin = 0, json = 0;
    unsigned long long seed = 0;
    const char *contract = NULL;
    const mt_opt opts[] = {
        {"--set", NULL, "KNOB=VALUE", MT_OPT_LIST, &sets, 0, 0, NULL, "change the base config"},
        {"--replicates", "--replicate", "N", MT_OPT_INT, &nrep, 0, 0, NULL,
         "replicates (at most 64; default the contract's)"},
        {"--first-replicate", NULL, "K", MT_OPT_INT, &rep0, 0, 0, NULL, "the first replicate's number"},
        {"--seed", NULL, "S", MT_OPT_U64, &seed, 0, 0, NULL, "the noise seed"},
        {"--noise-free", NULL, NULL, MT_OPT_FLAG, &noise_free, 0, 0, NULL,
         "add the noise-free throughput"},
        {"--json", NULL, NULL, MT_OPT_FLAG, &json, 0, 0, NULL, "JSON (the only form)"},
        {"--stdin", NULL, NULL, MT_OPT_FLAG, &from_stdin, 0, 0, NULL,
         "one JSON object of sets a line on stdin, one result a line"},
        {NULL}};
    mt_cmd c = {"model-screen", MODEL_SCREEN_USAGE, opts, &contract, 1, 1, "CONTRACT", NULL};
    if ((rc = mt_cli_parse(&c, argc, argv, 2)))
        return rc == MT_CLI_HELP ? 0 : rc;
    if (nrep > 64) {
        fprintf(stderr, "moetune model-screen: --replicates %d: at most 64\n", nrep);
        mt_cli_list_clear(&sets);
        return mt_cli_usage(&c);
    }
    if ((rc = mt_session_open(&s, contract, 1)) ||
        (rc = mt_session_apply_sets(&s, sets.v, sets.n))) {
        mt_session_clear(&s);
        mt_cli_list_clear(&sets);
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
    mt_session_clear(&s);
    mt_cli_list_clear(&sets);
    return 0;
}
