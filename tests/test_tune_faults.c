/*
 * test_tune_faults.c - the tune engine against faults, end to end: `moetune
 * tune` in a real process, the real sim in real processes, and the "faults"
 * fixture plugin (tests/fixtures/faultplugin.c, loaded through
 * MOETUNE_PLUGIN_PATH), whose candidates are all faster, each with one fault.
 * The contracts are in tests/contracts/faults/.  What is asserted is the
 * evidence bundle:
 *   - the gate refuses a candidate whose runs NaN (the run fails), skip
 *     iterations, diverge in loss from the control, or whose activation
 *     cannot be verified even after a profiled run; a benchmark-only
 *     candidate is never screened when the contract allows only
 *     training-equivalent changes;
 *   - ablation drops an accepted change whose removal does not hurt;
 *   - a winner that validation does not confirm is reported as such: bundle
 *     status not_confirmed, the baseline recommended, exit code 3.
 */
#include "testkit.h"

#include <check.h>
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <ftw.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define CONTRACT(name) MT_SOURCE_DIR "/tests/contracts/faults/" name

/* ---- running moetune ------------------------------------------------------------------- */

typedef struct tune_run {
    char tmp[256];    /* the test's directory (removed at the end) */
    char dir[300];    /* the tune directory */
    int code;         /* moetune's exit code */
    char *out, *err;  /* its stdout and stderr */
    cJSON *bundle;    /* bundle.json */
} tune_run;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* The environment of the child: ours, with the faults plugin on the plugin path. */
static char **child_env(void)
{
    size_t n = 0, i, k = 0;
    char **env;
    while (environ[n])
        n++;
    env = calloc(n + 2, sizeof *env);
    for (i = 0; i < n; i++)
        if (strncmp(environ[i], "MOETUNE_PLUGIN_PATH=", 20))
            env[k++] = environ[i];
    env[k++] = "MOETUNE_PLUGIN_PATH=" MT_FAULTS_PLUGIN;
    env[k] = NULL;
    return env;
}

/* Runs argv with stdout and stderr into files of dir; the exit code. */
static int spawn(char *const *argv, const char *dir, char **out, char **err)
{
    posix_spawn_file_actions_t fa;
    char opath[400], epath[400];
    char **env = child_env();
    pid_t pid;
    int st = 0;
    snprintf(opath, sizeof opath, "%s/stdout.txt", dir);
    snprintf(epath, sizeof epath, "%s/stderr.txt", dir);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, opath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, epath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert_int_eq(posix_spawn(&pid, argv[0], &fa, NULL, argv, env), 0);
    posix_spawn_file_actions_destroy(&fa);
    free(env);
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    *out = tk_slurp(opath);
    *err = tk_slurp(epath);
    ck_assert_msg(WIFEXITED(st), "%s died of signal %d: %s", argv[0], WTERMSIG(st),
                  *err ? *err : "");
    return WEXITSTATUS(st);
}

/* `moetune tune CONTRACT --dir DIR`; reads the bundle. */
static void tune(tune_run *t, const char *contract)
{
    char *argv[] = {(char *)MT_MOETUNE_BIN, "tune", (char *)contract, "--dir", t->dir, NULL};
    char path[400], *text;
    memset(t, 0, sizeof *t);
    snprintf(t->tmp, sizeof t->tmp, "/tmp/moetune-faults-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(t->tmp));
    snprintf(t->dir, sizeof t->dir, "%s/tune", t->tmp);
    argv[4] = t->dir;
    t->code = spawn(argv, t->tmp, &t->out, &t->err);
    snprintf(path, sizeof path, "%s/bundle.json", t->dir);
    text = tk_slurp(path);
    ck_assert_msg(text != NULL, "no bundle (exit %d): %s", t->code, t->err ? t->err : "");
    t->bundle = cJSON_Parse(text);
    free(text);
    ck_assert_msg(t->bundle != NULL, "bundle.json does not parse");
}

static void tune_done(tune_run *t)
{
    cJSON_Delete(t->bundle);
    free(t->out);
    free(t->err);
    nftw(t->tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- reading the bundle ---------------------------------------------------------------- */

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(x) ? x->valuestring : "";
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    ck_assert_msg(cJSON_IsNumber(x), "%s is not a number", k);
    return x->valuedouble;
}

static const cJSON *item(const cJSON *o, const char *k)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    ck_assert_msg(x != NULL, "no %s", k);
    return x;
}

/* The decisions of a phase that change knob to value. */
static int decisions(const tune_run *t, const char *phase, const char *knob, const char *value,
                     const cJSON **first)
{
    const cJSON *d, *c;
    int n = 0;
    *first = NULL;
    cJSON_ArrayForEach(d, item(t->bundle, "decisions"))
    {
        if (phase && strcmp(str(d, "phase"), phase))
            continue;
        cJSON_ArrayForEach(c, item(d, "change"))
            if (!strcmp(str(c, "knob"), knob) && !strcmp(str(c, "to"), value)) {
                if (!n++)
                    *first = d;
                break;
            }
    }
    return n;
}

/* The one screen of knob=value in the retune phase. */
static const cJSON *screened(const tune_run *t, const char *knob, const char *value)
{
    const cJSON *d;
    int n = decisions(t, "retune", knob, value, &d);
    ck_assert_msg(n == 1, "%s=%s screened %d times, not once", knob, value, n);
    return d;
}

static void has(const char *text, const char *want)
{
    ck_assert_msg(strstr(text, want) != NULL, "\"%s\" not in \"%s\"", want, text);
}

static const char *recipe_knob(const tune_run *t, const char *knob)
{
    return str(item(item(t->bundle, "recipe"), "config"), knob);
}

/* A gate refusal after statistics that said faster: the gate, not the
 * statistics, refused it. */
static void refused_faster(const cJSON *d, const char *why)
{
    ck_assert_str_eq(str(d, "verdict"), "rejected");
    has(str(d, "reason"), why);
    ck_assert_msg(num(d, "gain") > 0.10, "gain %.3f: the fixture should be ~15%% faster",
                  num(d, "gain"));
}

/* ---- the gate ---------------------------------------------------------------------------- */

START_TEST(gate_refuses_every_fault)
{
    tune_run t;
    const cJSON *d, *ev;
    tune(&t, CONTRACT("gate.cfg"));
    ck_assert_msg(t.code == 0, "exit %d: %s", t.code, t.err);
    ck_assert_str_eq(str(t.bundle, "status"), "baseline_only");

    /* NaN: Megatron stops the run, so the A/B fails on its first replicate */
    d = screened(&t, "fault_mode", "nan");
    ck_assert_str_eq(str(d, "verdict"), "failed");
    has(str(d, "reason"), "the candidate's run failed: nan");
    has(str(d, "reason"), "iteration 15");

    /* skipped iterations: the run finishes, 15% faster */
    refused_faster(screened(&t, "fault_mode", "skip"), "skipped or NaN'd iterations");

    /* a loss 5% off the control's at the same seed (tolerance 2%) */
    d = screened(&t, "fault_mode", "diverge");
    refused_faster(d, "the loss diverges from the control's at the same seed");
    has(str(d, "reason"), "+5.00%");

    /* activation: unknown on the screen runs, still unknown after a profiled run */
    d = screened(&t, "fault_mode", "unverified");
    refused_faster(d, "activation not verified: fault_mode is unknown after a profiled run");
    ev = item(d, "evidence");
    ck_assert_str_eq(str(ev, "verdict.fault_mode"), "unknown");
    ck_assert_ptr_nonnull(cJSON_GetObjectItemCaseSensitive(ev, "profile_trace"));

    /* benchmark-only: the contract allows training-equivalent changes only */
    ck_assert_int_eq(decisions(&t, NULL, "fault_mode", "benchmark", &d), 0);

    ck_assert_int_eq(cJSON_GetArraySize(item(t.bundle, "ablation")), 0);
    ck_assert(cJSON_IsFalse(item(item(t.bundle, "validation"), "confirmed")));
    ck_assert_str_eq(recipe_knob(&t, "fault_mode"), "none");
    tune_done(&t);
}
END_TEST

/* The benchmark-only candidate exists, is legal, in the space and faster: the
 * label alone keeps it out of the tune above. */
START_TEST(benchmark_candidate_is_kept_out_by_its_label_alone)
{
    mt_diag *d = mt_diag_new();
    mt_registry *reg = mt_registry_new();
    mt_contract *c = mt_contract_load(CONTRACT("gate.cfg"), d);
    mt_candidates cs = {0};
    mt_kv *base;
    size_t i;
    int found = 0;
    ck_assert_ptr_nonnull(c);
    mt_registry_load_path(reg, MT_BUILD_DIR "/plugins", d);
    mt_registry_load_path(reg, MT_FAULTS_PLUGIN, d);
    mt_registry_finish(reg, d);
    mt_config_normalize_space(reg, c, d);
    base = mt_config_base(reg, c, d);
    ck_assert_msg(base && mt_diag_count(d) == 0, "%s",
                  mt_diag_count(d) ? mt_diag_at(d, 0)->message : "no base config");
    ck_assert_uint_eq(c->labels, MT_LABEL_TRAINING_EQUIVALENT);
    ck_assert_int_eq(mt_candidates_for(reg, c, base, NULL, 0, &cs, d), 0);
    for (i = 0; i < cs.n; i++) {
        mt_candidate *k = &cs.v[i];
        const char *v = k->sets ? mt_kv_get(k->sets, "fault_mode") : NULL;
        mt_rendered r;
        if (!v || strcmp(v, "benchmark"))
            continue;
        found++;
        ck_assert_uint_eq(k->label, MT_LABEL_BENCHMARK_ONLY);
        ck_assert_ptr_null(k->reject);
        ck_assert_uint_eq(k->violations.n, 0);
        ck_assert_ptr_nonnull(k->config);
        mt_rendered_init(&r);
        ck_assert_int_eq(mt_render(reg, c, k->config, (uint32_t)c->dialect, &r, d), 0);
        ck_assert_str_eq(mt_kv_get(r.env, "MOETUNE_SIM_STEP_SCALE"), "0.850");
        mt_rendered_clear(&r);
    }
    ck_assert_int_eq(found, 1);
    mt_candidates_clear(&cs);
    mt_kv_destroy(&base);
    mt_contract_destroy(&c);
    mt_registry_destroy(&reg);
    mt_diag_destroy(&d);
}
END_TEST

/* ---- ablation ---------------------------------------------------------------------------- */

START_TEST(ablation_drops_a_change_that_does_not_help)
{
    tune_run t;
    const cJSON *d, *row, *neutral = NULL, *boost = NULL;
    tune(&t, CONTRACT("ablate.cfg"));
    ck_assert_msg(t.code == 0, "exit %d: %s", t.code, t.err);
    ck_assert_str_eq(str(t.bundle, "status"), "validated");
    /* both real gains when screened, one after the other */
    d = screened(&t, "fault_mode", "neutral");
    ck_assert_str_eq(str(d, "verdict"), "accepted");
    d = screened(&t, "fault_boost", "true");
    ck_assert_str_eq(str(d, "verdict"), "accepted");
    /* with boost in, neutral adds nothing: removing it does not hurt */
    cJSON_ArrayForEach(row, item(t.bundle, "ablation"))
    {
        if (!strcmp(str(row, "to"), "fault_mode=neutral"))
            neutral = row;
        if (!strcmp(str(row, "to"), "fault_boost=true"))
            boost = row;
    }
    ck_assert_ptr_nonnull(neutral);
    ck_assert_ptr_nonnull(boost);
    ck_assert(cJSON_IsFalse(item(neutral, "kept")));
    has(str(neutral, "reason"), "does not hurt");
    ck_assert_msg(num(neutral, "gain_without") > -0.02, "%g", num(neutral, "gain_without"));
    ck_assert(cJSON_IsTrue(item(boost, "kept")));
    ck_assert_int_eq(decisions(&t, "ablate", "fault_mode", "none", &d), 1);
    ck_assert_str_eq(str(d, "verdict"), "dropped");
    /* the recipe lacks it, and validation confirms what is left */
    ck_assert_str_eq(recipe_knob(&t, "fault_mode"), "none");
    ck_assert_str_eq(recipe_knob(&t, "fault_boost"), "true");
    ck_assert(cJSON_IsTrue(item(item(t.bundle, "validation"), "confirmed")));
    tune_done(&t);
}
END_TEST

/* ---- validation -------------------------------------------------------------------------- */

START_TEST(validation_that_does_not_confirm_is_reported)
{
    tune_run t;
    const cJSON *d, *v;
    tune(&t, CONTRACT("degrade.cfg"));
    ck_assert_msg(t.code == 3, "exit %d, not 3: %s", t.code, t.err);
    has(t.out, "not-confirmed");
    ck_assert_str_eq(str(t.bundle, "status"), "not_confirmed");
    /* faster over the screens... */
    d = screened(&t, "fault_mode", "degrade");
    ck_assert_str_eq(str(d, "verdict"), "accepted");
    /* ...slower over the validation window */
    ck_assert_int_eq(decisions(&t, "validate", "fault_mode", "degrade", &d), 1);
    ck_assert_str_eq(str(d, "verdict"), "rejected");
    ck_assert_msg(num(d, "gain") < -0.02, "validation gain %g", num(d, "gain"));
    v = item(t.bundle, "validation");
    ck_assert(cJSON_IsFalse(item(v, "confirmed")));
    has(str(v, "recommendation"), "validation did not confirm the winner");
    ck_assert_msg(num(v, "gain") < 0, "%g", num(v, "gain"));
    /* the baseline is the recipe */
    ck_assert(cJSON_Compare(item(item(t.bundle, "recipe"), "config"),
                            item(item(t.bundle, "baseline"), "config"), 1));
    ck_assert_str_eq(recipe_knob(&t, "fault_mode"), "none");
    tune_done(&t);
}
END_TEST

/* ---- the sim's fixture settings --------------------------------------------------------- */

START_TEST(sim_refuses_bad_fixture_settings)
{
    static const char *const bad[][2] = {{"--sim-step-scale", "0"},
                                         {"--sim-loss-shift", "-1"},
                                         {"--sim-inject", "slow"}};
    size_t i;
    char tmp[64];
    snprintf(tmp, sizeof tmp, "/tmp/moetune-faults-sim-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmp));
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *argv[] = {(char *)MT_SIM_BIN, (char *)bad[i][0], (char *)bad[i][1], NULL};
        char *out, *err;
        ck_assert_int_eq(spawn(argv, tmp, &out, &err), 2);
        has(err, bad[i][0]);
        free(out);
        free(err);
    }
    nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tune_faults");
    TCase *tc = tcase_create("end to end");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, gate_refuses_every_fault);
    tcase_add_test(tc, benchmark_candidate_is_kept_out_by_its_label_alone);
    tcase_add_test(tc, ablation_drops_a_change_that_does_not_help);
    tcase_add_test(tc, validation_that_does_not_confirm_is_reported);
    tcase_add_test(tc, sim_refuses_bad_fixture_settings);
    suite_add_tcase(s, tc);
    return tk_run(s);
}
