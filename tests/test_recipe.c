/*
 * test_recipe.c - the recipe a tune leaves in its bundle directory and
 * `moetune recipe DIR [--format mlm|bridge|env|sbatch]` prints
 * (search/recipe.h): real tunes through the real moetune binary, then each
 * file read back, checked against bundle.json and the Bridge dialect's
 * rules, and run by a real sh (Slurm's srun stood in for by a script that
 * prints what it is given).
 */
#include "testkit.h"

#include <check.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SMALL MT_SOURCE_DIR "/tests/contracts/tune-small.cfg"
#define SMALL_SRUN MT_SOURCE_DIR "/tests/contracts/tune-small-srun.cfg"
#define H100X1 MT_SOURCE_DIR "/tests/contracts/qwen3-30b-a3b-h100x1.cfg"

static const char *const formats[] = {"mlm", "bridge", "env", "sbatch"};
static const char *const files[] = {"recipe.mlm.sh", "recipe.bridge.overrides", "recipe.env",
                                    "recipe.sbatch"};

typedef tk_proc run;

static run moetune(const char *const *args)
{
    return tk_spawn(MT_MOETUNE_BIN, args);
}

static run sh(const char *const *args)
{
    return tk_spawn("/bin/sh", args);
}

static void done(run *r)
{
    tk_proc_free(r);
}

static const cJSON *get(const cJSON *o, const char *k)
{
    return cJSON_GetObjectItemCaseSensitive(o, k);
}

/* A fresh directory under /tmp (caller frees, rm_rf removes it). */
static char *fresh_dir(const char *tag)
{
    char *d = malloc(256);
    snprintf(d, 256, "/tmp/moetune-recipe-%s-XXXXXX", tag);
    ck_assert_ptr_nonnull(mkdtemp(d));
    return d;
}

static void rm_rf(char *dir)
{
    const char *args[] = {"-rf", dir, NULL};
    run r = tk_spawn("/bin/rm", args);
    done(&r);
    free(dir);
}

static void write_text(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(chmod(path, mode), 0);
}

static char *path_in(const char *dir, const char *name)
{
    char *p = malloc(strlen(dir) + strlen(name) + 2);
    sprintf(p, "%s/%s", dir, name);
    return p;
}

/* `moetune tune CONTRACT --dir DIR --quiet [EXTRA...]`; its exit status. */
static int tune(const char *contract, const char *dir, const char *executor)
{
    const char *args[] = {
        "tune", contract, "--dir", dir, "--quiet", executor ? "--executor" : NULL, executor, NULL};
    run r = moetune(args);
    int st = r.status;
    if (st != 0 && st != 4)
        fprintf(stderr, "tune %s: exit %d\n%s%s", contract, st, r.out, r.err);
    done(&r);
    return st;
}

/* `moetune recipe DIR --format F`, which must succeed and print exactly the
 * file bundle.json names for F; its text (caller frees). */
static char *recipe(const char *dir, int f)
{
    const char *args[] = {"recipe", dir, "--format", formats[f], NULL};
    run r = moetune(args);
    char *file = path_in(dir, files[f]), *want = tk_slurp(file), *out;
    ck_assert_msg(r.status == 0, "recipe --format %s: exit %d: %s", formats[f], r.status, r.err);
    ck_assert_msg(want != NULL, "%s is missing", file);
    ck_assert_str_eq(r.out, want);
    out = r.out;
    r.out = NULL;
    free(r.err);
    free(want), free(file);
    return out;
}

/* The lines of text as a list (the bridge file: one override a line). */
static mt_strlist lines(const char *text)
{
    mt_strlist l = {0};
    const char *p = text;
    while (*p) {
        size_t n = strcspn(p, "\n");
        char *w = strndup(p, n);
        mt_strlist_push(&l, w);
        free(w);
        p += n + (p[n] == '\n');
    }
    return l;
}

/* A JSON array of strings as a list. */
static mt_strlist strings(const cJSON *a)
{
    mt_strlist l = {0};
    const cJSON *x;
    ck_assert(cJSON_IsArray(a));
    cJSON_ArrayForEach(x, a)
    {
        ck_assert(cJSON_IsString(x));
        mt_strlist_push(&l, x->valuestring);
    }
    return l;
}

/* Each word of l as "[word]\n", after prefix; caller frees. */
static char *bracketed(const char *prefix, const mt_strlist *l)
{
    size_t n = strlen(prefix) + 1, i;
    char *s, *o;
    for (i = 0; i < l->n; i++)
        n += strlen(l->v[i]) + 3;
    s = malloc(n);
    o = s + sprintf(s, "%s", prefix);
    for (i = 0; i < l->n; i++)
        o += sprintf(o, "[%s]\n", l->v[i]);
    return s;
}

static void syntax_ok(const char *dir, const char *name)
{
    char *p = path_in(dir, name);
    const char *args[] = {"-n", p, NULL};
    run r = sh(args);
    ck_assert_msg(r.status == 0, "sh -n %s: %s", name, r.err);
    done(&r);
    free(p);
}

/* The script with its first `exec ` replaced by a printer of each word, as
 * sh parses it: the words the program would get, program first. */
static char *words_of(const char *dir, const char *name)
{
    char *p = path_in(dir, name), *text = tk_slurp(p), *at, *edited, *tmp;
    const char *args[2];
    run r;
    ck_assert_ptr_nonnull(text);
    at = strstr(text, "\nexec ");
    ck_assert_msg(at != NULL, "%s has no exec line", name);
    edited = malloc(strlen(text) + 32);
    sprintf(edited, "%.*s\nprintf '[%%s]\\n' %s", (int)(at - text), text, at + 6);
    tmp = tk_write_temp("recipe-words", edited);
    args[0] = tmp, args[1] = NULL;
    r = sh(args);
    ck_assert_msg(r.status == 0, "%s: %s", name, r.err);
    unlink(tmp);
    free(tmp), free(edited), free(text), free(p);
    free(r.err);
    return r.out;
}

/* A directory holding an `srun` that prints each option as "SRUN[opt]",
 * then either each word of the command as "[word]" or, with exec_task,
 * runs the command, as srun runs a task. */
static char *fake_srun(int exec_task)
{
    static const char options[] =
        "#!/bin/sh\n"
        "while [ $# -gt 0 ]; do\n"
        "  case \"$1\" in -*) printf 'SRUN[%s]\\n' \"$1\"; shift ;; *) break ;; esac\n"
        "done\n";
    char *dir = fresh_dir("srun"), *p = path_in(dir, "srun"), script[512];
    snprintf(script, sizeof script, "%s%s", options,
             exec_task ? "exec \"$@\"\n" : "printf '[%s]\\n' \"$@\"\n");
    write_text(p, script, 0755);
    free(p);
    return dir;
}

/* sh SCRIPT with the fake srun first on PATH; its output (caller frees). */
static char *run_batch(const char *srun_dir, const char *dir, const char *name)
{
    char *p = path_in(dir, name);
    const char *args[] = {"-c", "PATH=\"$1:$PATH\"; export PATH; exec sh \"$2\"", "sh", srun_dir, p,
                          NULL};
    run r = sh(args);
    ck_assert_msg(r.status == 0, "%s under a stand-in srun: exit %d: %s", name, r.status, r.err);
    free(r.err), free(p);
    return r.out;
}

/* A real tune (the sim in real processes) of tests/contracts/tune-small.cfg:
 * its bundle names the four files, `moetune recipe` prints each, the
 * Megatron-LM command is bundle.json's production arguments (no screen
 * --train-iters 20) word for word as sh parses it, the overrides pass the
 * Bridge dialect's rules for Bridge main, and the batch script runs srun
 * with the contract's 2 nodes x 4 GPUs and its container, needing no
 * moetune. */
/* text without the lines of the sim's cluster (MOETUNE_SIM_*), in place */
static char *own_env(char *text)
{
    char *r = text, *w = text;
    while (*r) {
        size_t n = strcspn(r, "\n") + (r[strcspn(r, "\n")] ? 1 : 0);
        if (strncmp(r, "MOETUNE_SIM_", 12)) {
            memmove(w, r, n);
            w += n;
        }
        r += n;
    }
    *w = '\0';
    return text;
}

START_TEST(recipe_from_a_real_tune)
{
    char *dir = fresh_dir("tune"), *srun = fake_srun(0), *text, *want, *got, *sim;
    const cJSON *rec, *x;
    mt_strlist args, over, l;
    cJSON *b;
    size_t i;
    int f;
    ck_assert_int_eq(tune(SMALL, dir, NULL), 0);
    b = tk_bundle(dir);
    rec = get(b, "recipe");
    for (f = 0; f < 4; f++) {
        x = get(get(rec, "files"), formats[f]);
        ck_assert_msg(cJSON_IsString(x) && !strcmp(x->valuestring, files[f]),
                      "recipe.files.%s is not %s", formats[f], files[f]);
    }
    args = strings(get(rec, "megatron_args"));
    over = strings(get(rec, "bridge_overrides"));
    for (i = 0; i < args.n; i++)
        ck_assert_msg(strcmp(args.v[i], "--train-iters"), "megatron_args holds --train-iters %s",
                      i + 1 < args.n ? args.v[i + 1] : "");
    for (i = 0; i < over.n; i++)
        ck_assert_msg(strncmp(over.v[i], "train.train_iters=", 18), "overrides hold %s", over.v[i]);
    /* the contract forces balanced routing to measure; the recipe is for
     * training, so the router routes, and the recipe says so and why */
    ck_assert_str_eq(cJSON_GetStringValue(get(get(rec, "config"), "moe_router_force_load_balancing")),
                     "true");
    for (i = 0; i < args.n; i++)
        ck_assert_msg(strcmp(args.v[i], "--moe-router-force-load-balancing"),
                      "megatron_args force balanced routing");
    for (i = 0; i < over.n; i++)
        ck_assert_msg(!strstr(over.v[i], "force_load_balancing=True"), "overrides hold %s",
                      over.v[i]);
    {
        const cJSON *notes = get(rec, "notes"), *nat = get(get(b, "validation"), "natural");
        const char *why = cJSON_GetStringValue(get(nat, "reason"));
        int routing = 0, measured = 0, data = 0;
        ck_assert(cJSON_IsArray(notes));
        ck_assert_ptr_nonnull(why);
        cJSON_ArrayForEach(x, notes)
        {
            routing |= !strncmp(x->valuestring, "Routing: the router's own", 25);
            measured |= !strncmp(x->valuestring, "Natural-routing validation: ", 28) && strstr(x->valuestring, why);
            data |= !strncmp(x->valuestring, "Data: measured on synthetic tokens", 34);
        }
        ck_assert_msg(routing && measured && data, "recipe.notes: %s", cJSON_Print(notes));
        /* and the report shows them where the recipe is */
        for (f = 0; f < 2; f++) {
            char *p = path_in(dir, f ? "report.html" : "REPORT.md"), *r = tk_slurp(p);
            ck_assert_ptr_nonnull(r);
            ck_assert_msg(strstr(r, "Before you train with it") &&
                              (strstr(r, f ? "Routing: the router&#39;s own" : "Routing: the router's own")),
                          "%s lacks the recipe's notes", p);
            free(p), free(r);
        }
    }

    /* mlm: the default format, the sim's path, then exactly megatron_args */
    {
        const char *dflt[] = {"recipe", dir, NULL};
        run r = moetune(dflt);
        text = recipe(dir, 0);
        ck_assert_msg(r.status == 0, "%s", r.err);
        ck_assert_str_eq(r.out, text);
        done(&r);
    }
    ck_assert_ptr_null(strstr(text, "\n  --train-iters "));
    ck_assert_ptr_null(strstr(text, "--moe-router-force-load-balancing \\\n"));
    ck_assert_ptr_nonnull(strstr(text, "\n# Routing: the router's own choice of experts."));
    ck_assert_ptr_nonnull(strstr(text, "--moe-token-dispatcher-type"));
    syntax_ok(dir, files[0]);
    got = words_of(dir, files[0]);
    sim = strndup(got, strcspn(got, "\n") + 1);
    ck_assert_msg(strstr(sim, "moetune-sim]"), "the program is %s", sim);
    want = bracketed(sim, &args);
    ck_assert_str_eq(got, want);
    free(got), free(want), free(text);

    /* bridge: bundle.json's overrides, one a line, under Bridge main's rules */
    text = recipe(dir, 1);
    l = lines(text);
    ck_assert_uint_eq(l.n, over.n);
    for (i = 0; i < l.n; i++)
        ck_assert_str_eq(l.v[i], over.v[i]);
    ck_assert_uint_gt(l.n, 10);
    tk_check_bridge(&l, "main");
    mt_strlist_clear(&l);
    free(text);

    /* env: this contract's recipe sets no variable of its own; the sim's
     * cluster (what moetune adds per run) is there so the script runs */
    ck_assert_int_eq(cJSON_GetArraySize(get(rec, "env")), 0);
    text = recipe(dir, 2);
    ck_assert_ptr_nonnull(strstr(text, "MOETUNE_SIM_GPU=GB300\n"));
    ck_assert_ptr_nonnull(strstr(text, "MOETUNE_SIM_NODES=2\n"));
    ck_assert_ptr_nonnull(strstr(text, "MOETUNE_SIM_ROUTING=natural\n"));
    ck_assert_ptr_nonnull(strstr(text, "MOETUNE_SIM_GPUS_PER_NODE=4\n"));
    ck_assert_str_eq(own_env(text), "");
    free(text);

    /* sbatch: Slurm's geometry and the container, then the same command */
    text = recipe(dir, 3);
    ck_assert_msg(!strncmp(text, "#!/bin/bash\n", 12), "%s", text);
    ck_assert_ptr_nonnull(strstr(text, "\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=4\n"
                                       "#SBATCH --gpus-per-node=4\n"));
    syntax_ok(dir, files[3]);
    got = run_batch(srun, dir, files[3]);
    want = bracketed("SRUN[-l]\nSRUN[--nodes=2]\nSRUN[--ntasks-per-node=4]\nSRUN[--ntasks=8]\n"
                     "SRUN[--gpus-per-node=4]\nSRUN[--job-name=moetune-recipe]\n"
                     "SRUN[--kill-on-bad-exit=1]\n"
                     "SRUN[--container-image=nvcr.io/nvidia/nemo:25.11]\n",
                     &(mt_strlist){0});
    text = realloc(text, strlen(want) + strlen(sim) + 1);
    sprintf(text, "%s%s", want, sim);
    free(want);
    want = bracketed(text, &args);
    ck_assert_str_eq(got, want);
    free(got), free(want), free(text), free(sim);

    /* a recipe file that is gone is named */
    {
        char *p = path_in(dir, files[2]);
        const char *a[] = {"recipe", dir, "--format", "env", NULL};
        run r;
        unlink(p);
        r = moetune(a);
        ck_assert_int_eq(r.status, 2);
        ck_assert_msg(strstr(r.err, p) && strstr(r.err, "recipe.files.env names it"), "%s", r.err);
        done(&r);
        free(p);
    }
    mt_strlist_clear(&args), mt_strlist_clear(&over);
    cJSON_Delete(b);
    rm_rf(srun);
    rm_rf(dir);
}
END_TEST

/* tests/contracts/tune-small-srun.cfg with what only correct quoting and
 * rendering carry through: a launch template that prints each argument as
 * "[word]" and MT_SPACED as "ENV[value]", spaced (and quoted) environment
 * values and fixed arguments, CPU binding, Megatron-Bridge 0.2.2.  Caller
 * frees (and unlinks). */
static const char spaced_value[] = "two  words 'and' \"$HOME\" \\n;";
static char *quoting_contract(void)
{
    char *text = tk_slurp(SMALL_SRUN), *out, *path;
    static const char *const edits[][2] = {
        {"  template = [\"{sim}\", \"{args}\"];",
         "  template = [\"/bin/sh\", \"-c\", \"for a; do printf '[%s]\\\\n' \\\"$a\\\"; done; "
         "printf 'ENV[%s]\\\\n' \\\"$MT_SPACED\\\"\", \"train\", \"{args}\"];\n"
         "  env = { MT_SPACED = \"two  words 'and' \\\"$HOME\\\" \\\\n;\"; MT_WORDS = \"just "
         "words\"; };"},
        {"base = {\n", "base = {\n  launcher = { cpu_bind = \"numa\"; };\n"},
        {"stack = {\n", "stack = {\n  megatron_bridge = \"0.2.2\";\n"}};
    size_t i;
    ck_assert_ptr_nonnull(text);
    for (i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        char *at = strstr(text, edits[i][0]);
        ck_assert_msg(at != NULL, "no '%s' in %s", edits[i][0], SMALL_SRUN);
        out = malloc(strlen(text) + strlen(edits[i][1]) + 1);
        sprintf(out, "%.*s%s%s", (int)(at - text), text, edits[i][1], at + strlen(edits[i][0]));
        free(text);
        text = out;
    }
    out = malloc(strlen(text) + 128);
    sprintf(out, "%s\nfixed_args = [\"--data-path\", \"/data/my corpus\", \"/data/it's\"];\n",
            text);
    path = tk_write_temp("recipe-quoting", out);
    free(out), free(text);
    return path;
}

/* A tune (the model executor) of that contract: the Megatron-LM script run
 * with its environment file sourced, and the batch script run under a
 * stand-in srun, hand the program every argument of bundle.json and the
 * environment value intact; srun gets --cpu-bind=ldoms; the overrides are
 * Bridge 0.2.2's. */
START_TEST(recipe_carries_quoting_and_launcher)
{
    char *contract = quoting_contract(), *dir = fresh_dir("quote"), *srun = fake_srun(1);
    char *text, *got, *want, *mlm = path_in(dir, files[0]), *env = path_in(dir, files[2]);
    mt_strlist args, l;
    cJSON *b;
    size_t i;
    int found = 0;
    ck_assert_int_eq(tune(contract, dir, "model"), 0);
    b = tk_bundle(dir);
    args = strings(get(get(b, "recipe"), "megatron_args"));
    for (i = 0; i + 2 < args.n; i++)
        found |= !strcmp(args.v[i], "--data-path") && !strcmp(args.v[i + 1], "/data/my corpus") &&
                 !strcmp(args.v[i + 2], "/data/it's");
    ck_assert_msg(found, "megatron_args lack the fixed --data-path");

    /* env: one quoted line that sh reads back exactly */
    text = recipe(dir, 2);
    ck_assert_str_eq(own_env(text), "MT_SPACED='two  words '\\''and'\\'' \"$HOME\" \\n;'\n"
                                    "MT_WORDS='just words'\n");
    free(text);

    /* mlm, with its environment sourced as its header says */
    free(recipe(dir, 0));
    syntax_ok(dir, files[0]);
    {
        const char *a[] = {"-c", "set -a; . \"$1\"; set +a; exec sh \"$2\"", "sh", env, mlm, NULL};
        run r = sh(a);
        ck_assert_msg(r.status == 0, "%s", r.err);
        want = bracketed("", &args);
        want = realloc(want, strlen(want) + sizeof spaced_value + 8);
        sprintf(want + strlen(want), "ENV[%s]\n", spaced_value);
        ck_assert_str_eq(r.out, want);
        free(want);
        done(&r);
    }

    /* sbatch: srun's options from the launcher settings, the task's words
     * and environment intact */
    free(recipe(dir, 3));
    syntax_ok(dir, files[3]);
    got = run_batch(srun, dir, files[3]);
    want = bracketed("SRUN[-l]\nSRUN[--nodes=1]\nSRUN[--ntasks-per-node=8]\nSRUN[--ntasks=8]\n"
                     "SRUN[--gpus-per-node=8]\nSRUN[--job-name=moetune-recipe]\n"
                     "SRUN[--kill-on-bad-exit=1]\nSRUN[--cpu-bind=ldoms]\n"
                     "SRUN[--container-image=nvcr.io/nvidia/nemo:25.11]\n",
                     &args);
    want = realloc(want, strlen(want) + sizeof spaced_value + 8);
    sprintf(want + strlen(want), "ENV[%s]\n", spaced_value);
    ck_assert_str_eq(got, want);
    free(got), free(want);

    /* bridge: the contract declares Bridge 0.2.2, whose paths these are */
    text = recipe(dir, 1);
    l = lines(text);
    tk_check_bridge(&l, "v0.2.2");
    ck_assert_ptr_nonnull(strstr(text, "\ntrain.eval_iters=0\n"));
    ck_assert_ptr_nonnull(strstr(text, "\ndataset.sequence_length=4096\n"));
    mt_strlist_clear(&l);
    free(text);

    mt_strlist_clear(&args);
    cJSON_Delete(b);
    unlink(contract);
    free(contract), free(mlm), free(env);
    rm_rf(srun);
    rm_rf(dir);
}
END_TEST

/* What is not a recipe is said so, naming the path and what is missing:
 * a failed tune (nothing fits) writes no recipe file and its bundle has no
 * usable recipe; a missing directory, a directory without bundle.json, a
 * bundle.json that is not JSON or names a file outside its directory; an
 * unknown format is a usage error naming the formats. */
START_TEST(recipe_refusals)
{
    char *dir = fresh_dir("fail"), *other = fresh_dir("other"),
         *bundle = path_in(other, "bundle.json");
    const char *a[] = {"recipe", dir, NULL, NULL, NULL};
    run r;
    int f;
    ck_assert_int_eq(tune(H100X1, dir, "model"), 4);
    for (f = 0; f < 4; f++) {
        char *p = path_in(dir, files[f]);
        ck_assert_msg(access(p, F_OK) != 0, "a failed tune wrote %s", files[f]);
        free(p);
    }
    {
        cJSON *b = tk_bundle(dir);
        ck_assert_str_eq(cJSON_GetStringValue(get(b, "status")), "failed");
        ck_assert(cJSON_IsNull(get(get(b, "recipe"), "files")));
        cJSON_Delete(b);
    }
    r = moetune(a);
    ck_assert_int_eq(r.status, 2);
    ck_assert_msg(strstr(r.err, dir) &&
                      strstr(r.err, "bundle.json: recipe.files: no usable recipe: "
                                    "the tune's status is 'failed' (nothing fits"),
                  "%s", r.err);
    ck_assert_str_eq(r.out, "");
    done(&r);

    a[2] = "--format", a[3] = "toml";
    r = moetune(a);
    ck_assert_int_eq(r.status, 64);
    ck_assert_ptr_nonnull(strstr(r.err, "--format takes mlm, bridge, env or sbatch, not 'toml'"));
    done(&r);

    a[1] = "/nonexistent/moetune-tune", a[2] = NULL;
    r = moetune(a);
    ck_assert_int_eq(r.status, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "/nonexistent/moetune-tune: not a directory"));
    done(&r);

    a[1] = other;
    r = moetune(a);
    ck_assert_int_eq(r.status, 2);
    ck_assert_msg(strstr(r.err, bundle) && strstr(r.err, "is not a tune bundle"), "%s", r.err);
    done(&r);

    write_text(bundle, "{\"schema\": 1, \"recipe\": {", 0644);
    r = moetune(a);
    ck_assert_int_eq(r.status, 2);
    ck_assert_msg(strstr(r.err, bundle) && strstr(r.err, "not JSON"), "%s", r.err);
    done(&r);

    write_text(bundle, "{\"schema\": 1}", 0644);
    r = moetune(a);
    ck_assert_int_eq(r.status, 2);
    ck_assert_msg(strstr(r.err, "recipe: no 'recipe' object"), "%s", r.err);
    done(&r);

    write_text(bundle, "{\"recipe\": {\"files\": {\"mlm\": \"../../etc/passwd\"}}}", 0644);
    r = moetune(a);
    ck_assert_int_eq(r.status, 2);
    ck_assert_msg(strstr(r.err, "'../../etc/passwd' is not a file name in the bundle directory"),
                  "%s", r.err);
    ck_assert_str_eq(r.out, "");
    done(&r);

    write_text(bundle,
               "{\"recipe\": {\"files\": {\"mlm\": \"recipe.mlm.sh\", \"bridge\": null}, "
               "\"file_errors\": {\"bridge\": \"cuda_graph_x: no Megatron-Bridge path\"}}}",
               0644);
    a[2] = "--format", a[3] = "bridge";
    r = moetune(a);
    ck_assert_int_eq(r.status, 2);
    ck_assert_msg(
        strstr(r.err, "the recipe has no bridge form: cuda_graph_x: no Megatron-Bridge path"), "%s",
        r.err);
    done(&r);

    a[1] = NULL;
    r = moetune(a);
    ck_assert_int_eq(r.status, 64);
    ck_assert_ptr_nonnull(strstr(r.err, "usage: moetune recipe DIR"));
    done(&r);
    free(bundle);
    rm_rf(other);
    rm_rf(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("recipe");
    TCase *tc = tcase_create("recipe");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, recipe_from_a_real_tune);
    tcase_add_test(tc, recipe_carries_quoting_and_launcher);
    tcase_add_test(tc, recipe_refusals);
    suite_add_tcase(s, tc);
    return tk_run(s);
}
