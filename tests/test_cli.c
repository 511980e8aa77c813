/*
 * test_cli.c - the `moetune` front end as a user runs it: a real child
 * process per command, its exit code and output.
 */
#include "testkit.h"

#include <check.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef tk_proc run;

/* Runs moetune with args (NULL-terminated), capturing both streams. */
static run moetune(const char *const *args) { return tk_spawn(MT_MOETUNE_BIN, args); }

static void done(run *r) { tk_proc_free(r); }

START_TEST(check_every_example)
{
    static const char *const names[] = {
        "qwen3-30b-a3b-h100x16.cfg", "qwen3-30b-a3b-h100x16-bridge.cfg",
        "deepseek-v3-gb200x256.cfg", "deepseek-v3-gb200x256-bridge.cfg",
        "qwen3-30b-a3b-gb300x8.cfg", "qwen3-30b-a3b-gb300x8-bridge.cfg",
        "qwen3-30b-a3b-h100x16-core_r0.15.cfg", "qwen3-235b-a22b-h100x256.cfg"};
    size_t i;
    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
        char *path = tk_example(names[i]);
        const char *args[] = {"check", path, NULL};
        run r = moetune(args);
        /* legal: OK when the base fits the estimate, else exit 4 and a
         * verdict that says so (never both) */
        ck_assert_msg(r.status == 0 || r.status == 4, "%s: exit %d\n%s", names[i], r.status,
                      r.err);
        if (r.status == 0) {
            ck_assert_ptr_nonnull(strstr(r.out, ": OK\n"));
            ck_assert_ptr_nonnull(strstr(r.out, "headroom): fits\n"));
        } else {
            ck_assert_ptr_null(strstr(r.out, ": OK"));
            ck_assert_ptr_nonnull(strstr(r.out, ": legal, but the base does not fit in memory"));
            ck_assert_ptr_nonnull(strstr(r.out, "headroom): does not fit\n"));
        }
        ck_assert_ptr_nonnull(strstr(r.out, "Attention: TP"));
        ck_assert_ptr_nonnull(strstr(r.out, "MoE: ETP"));
        ck_assert_ptr_nonnull(strstr(r.out, "memory estimate per GPU"));
        done(&r);
        free(path);
    }
}
END_TEST

/* A launch command line through the commands a user types: import it,
 * check it at start-up, render it back; a start-up violation is exit 2 and
 * names upstream's reason; an older stack lists what it cannot offer. */
START_TEST(import_check_render)
{
    static const char *const argv_line[] = {
        "--num-layers", "48", "--hidden-size", "2048", "--ffn-hidden-size", "6144",
        "--num-attention-heads", "32", "--group-query-attention", "--num-query-groups", "4",
        "--num-experts", "128", "--moe-router-topk", "8", "--moe-ffn-hidden-size", "768",
        "--vocab-size", "151936", "--seq-length", "4096", "--max-position-embeddings", "4096",
        "--position-embedding-type", "rope", "--micro-batch-size", "1",
        "--global-batch-size", "1024", "--bf16", "--expert-model-parallel-size", "16",
        "--moe-token-dispatcher-type", "alltoall", "--moe-grouped-gemm",
        "--use-distributed-optimizer", "--overlap-param-gather", "--data-path", "/d/x", NULL};
    char cfg[] = "/tmp/moetune-cli-import-XXXXXX";
    const char *args[64];
    size_t n = 0, i;
    int fd = mkstemp(cfg);
    run r;
    close(fd);
    args[n++] = "import", args[n++] = "--stack", args[n++] = "megatron_lm=core_v0.19.0";
    args[n++] = "--stack", args[n++] = "transformer_engine=2.12";
    args[n++] = "--hardware", args[n++] = "gpu=H100,gpus_per_node=8,nodes=2";
    args[n++] = "-o", args[n++] = cfg, args[n++] = "--";
    for (i = 0; argv_line[i]; i++)
        args[n++] = argv_line[i];
    args[n] = NULL;
    r = moetune(args);
    ck_assert_msg(r.status == 0, "import: exit %d\n%s", r.status, r.err);
    done(&r);
    /* --overlap-param-gather without --overlap-grad-reduce: upstream dies */
    args[0] = "check", args[1] = "--startup-only", args[2] = cfg, args[3] = NULL;
    r = moetune(args);
    ck_assert_int_eq(r.status, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "Must use --overlap-param-gather with --overlap-grad-reduce"));
    done(&r);
    /* fixed, it is legal at start-up and renders the data path verbatim */
    args[0] = "render", args[1] = cfg, args[2] = "--set", args[3] = "overlap_grad_reduce=true";
    args[4] = NULL;
    r = moetune(args);
    ck_assert_msg(r.status == 0, "render: %s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "--data-path\n/d/x\n"));
    ck_assert_ptr_nonnull(strstr(r.out, "--overlap-grad-reduce\n"));
    done(&r);
    /* a flag the version does not have is refused as upstream's parser would */
    args[0] = "import", args[1] = "--stack", args[2] = "megatron_lm=core_r0.15.0";
    args[3] = "--hardware", args[4] = "gpu=H100,gpus_per_node=8,nodes=2", args[5] = "--";
    args[6] = "--num-layers", args[7] = "4", args[8] = "--moe-flex-dispatcher-num-sms";
    args[9] = "8", args[10] = NULL;
    r = moetune(args);
    ck_assert_int_eq(r.status, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "unrecognized arguments: --moe-flex-dispatcher-num-sms 8"));
    done(&r);
    /* an unknown version lists the known ones */
    args[2] = "megatron_lm=core_v0.21.0";
    r = moetune(args);
    ck_assert_int_eq(r.status, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "core_r0.15.0, core_v0.18.0, core_v0.19.0, main"));
    done(&r);
    unlink(cfg);
    {
        char *path = tk_example("qwen3-30b-a3b-h100x16-core_r0.15.cfg");
        const char *c[] = {"candidates", path, NULL};
        r = moetune(c);
        ck_assert_msg(r.status == 0, "%s", r.err);
        ck_assert_ptr_nonnull(strstr(r.out, "not offered on Megatron-LM core_r0.15.0:"));
        ck_assert_ptr_nonnull(strstr(r.out, "- moe_flex_dispatcher_backend=hybridep: "));
        ck_assert_ptr_nonnull(strstr(r.out, "needs Megatron core >= 0.18"));
        done(&r);
        free(path);
    }
}
END_TEST

/* A legal contract whose base does not fit: the verdict says so, the exit
 * status is 4, and the report names what the estimate counts on the
 * hottest rank. */
START_TEST(check_base_that_does_not_fit)
{
    char path[512];
    const char *args[] = {"check", path, NULL};
    static const char *const terms[] = {"  weights ", "  grads ", "  optimizer ",
                                        "  activations ", "  logits ", "  workspace ",
                                        "  cuda graphs ", "  buffers ", "microbatch-chunk"};
    run r;
    size_t i;
    snprintf(path, sizeof path, "%s/tests/contracts/qwen3-30b-a3b-h100x1.cfg", MT_SOURCE_DIR);
    r = moetune(args);
    ck_assert_msg(r.status == 4, "exit %d\n%s%s", r.status, r.out, r.err);
    ck_assert_ptr_null(strstr(r.out, ": OK"));
    ck_assert_ptr_nonnull(strstr(r.out, "contract qwen3-30b-a3b-h100x1: legal, but the base does "
                                        "not fit in memory: "));
    ck_assert_ptr_nonnull(strstr(r.out, "hottest rank (every rank): "));
    for (i = 0; i < sizeof terms / sizeof terms[0]; i++)
        ck_assert_msg(strstr(r.out, terms[i]), "no '%s' in\n%s", terms[i], r.out);
    done(&r);
}
END_TEST

START_TEST(check_bad_contract_exits_2)
{
    char *path = tk_write_temp("cli", "version = 1;\nname = \"x\";\nmodel = { num_layers = \"a\"; };\n");
    const char *args[] = {"check", path, NULL};
    run r = moetune(args);
    ck_assert_int_eq(r.status, 2);
    ck_assert_ptr_nonnull(strstr(r.err, ":3: model.num_layers: 'model.num_layers' must be an integer"));
    ck_assert_ptr_nonnull(strstr(r.err, "missing group 'launch'"));
    done(&r);
    unlink(path);
    free(path);
}
END_TEST

START_TEST(render_sets_and_errors)
{
    char *path = tk_example("qwen3-30b-a3b-h100x16.cfg");
    const char *ok[] = {"render", path, "--set", "moe_token_dispatcher_type=flex", "--set",
                        "moe_flex_dispatcher_backend=hybridep", NULL};
    const char *typo[] = {"render", path, "--set", "moe_dispatcher_type=flex", NULL};
    const char *illegal[] = {"render", path, "--set", "overlap_grad_reduce=false", NULL};
    const char *core[] = {"render", path, "--set", "global_batch_size=8", NULL};
    const char *bridge[] = {"render", path, "--dialect", "bridge", NULL};
    run r = moetune(ok);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "--moe-token-dispatcher-type\nflex\n"));
    ck_assert_ptr_nonnull(strstr(r.out, "--moe-flex-dispatcher-backend\nhybridep\n"));
    ck_assert_ptr_nonnull(strstr(r.out, "--log-interval\n1\n"));
    ck_assert_ptr_nonnull(strstr(r.out, "# environment\n"));
    done(&r);
    r = moetune(typo);
    ck_assert_int_eq(r.status, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "did you mean 'moe_token_dispatcher_type'?"));
    done(&r);
    r = moetune(illegal);
    ck_assert_int_eq(r.status, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "the configuration is illegal"));
    done(&r);
    r = moetune(core);
    ck_assert_int_eq(r.status, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "fixed by the contract"));
    done(&r);
    r = moetune(bridge);
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "model.moe_token_dispatcher_type=alltoall\n"));
    done(&r);
    free(path);
}
END_TEST

/* A contract whose launch template prints each argument it gets as
 * "[word]" and the environment variable MT_SPACED as "ENV[value]", with
 * values and fixed arguments that only correct quoting carries through a
 * shell (spaces alone; spaces, quotes, $, a backslash, a semicolon).  Caller frees the
 * path (and unlinks it). */
static const char spaced_value[] = "two  words 'and' \"$HOME\" \\n;";
static char *quoting_contract(void)
{
    char *small = tk_slurp(MT_SOURCE_DIR "/tests/contracts/tune-small.cfg"), *text, *path;
    const char *tmpl = "  template = [\"{sim}\", \"{args}\"];";
    const char *at = small ? strstr(small, tmpl) : NULL;
    static const char repl[] =
        "  template = [\"/bin/sh\", \"-c\", \"for a; do printf '[%s]\\\\n' \\\"$a\\\"; done; "
        "printf 'ENV[%s]\\\\n' \\\"$MT_SPACED\\\"\", \"train\", \"{args}\"];\n"
        "  env = { MT_SPACED = \"two  words 'and' \\\"$HOME\\\" \\\\n;\"; MT_WORDS = \"just words\"; };";
    static const char fixed[] = "\nfixed_args = [\"--data-path\", \"/data/my corpus\", \"/data/it's\"];\n";
    ck_assert_ptr_nonnull(at);
    text = malloc(strlen(small) + sizeof repl + sizeof fixed);
    sprintf(text, "%.*s%s%s%s", (int)(at - small), small, repl, at + strlen(tmpl), fixed);
    path = tk_write_temp("quoting", text);
    free(text), free(small);
    return path;
}

/* The lines of out as "[line]" lines, each followed by a newline. */
static char *bracketed(const char *out)
{
    char *b = malloc(3 * strlen(out) + 1), *o = b;
    const char *p = out;
    while (*p) {
        size_t n = strcspn(p, "\n");
        o += sprintf(o, "[%.*s]\n", (int)n, p);
        p += n + (p[n] == '\n');
    }
    *o = '\0';
    return b;
}

/* render --argv-only is the default listing up to its environment; --format
 * env is NAME=value lines a shell reads back exactly; --format sh is a
 * script that sh -n accepts and that, run, hands the program every argument
 * and the environment intact; bad values are usage errors that name the
 * option and what it takes. */
START_TEST(render_argv_only_and_formats)
{
    char *path = quoting_contract(), *sh = NULL, *env = NULL, *want;
    const char *plain[] = {"render", path, NULL};
    const char *argv_only[] = {"render", path, "--argv-only", NULL};
    const char *fenv[] = {"render", path, "--format", "env", NULL};
    const char *fsh[] = {"render", path, "--format", "sh", NULL};
    const char *bad[] = {"render", path, "--format", "json", NULL};
    const char *both[] = {"render", path, "--argv-only", "--format", "sh", NULL};
    const char *bridge_sh[] = {"render", path, "--dialect", "bridge", "--format", "sh", NULL};
    const char *lone[] = {"render", path, "--format", NULL};
    run r = moetune(plain), a = moetune(argv_only), x;
    size_t n;
    ck_assert_msg(r.status == 0 && a.status == 0, "%s%s", r.err, a.err);
    /* the default listing is unchanged: argv, then the environment */
    n = strlen(a.out);
    ck_assert_msg(n > 0 && !strncmp(r.out, a.out, n), "--argv-only is not the listing's argv");
    ck_assert_msg(!strncmp(r.out + n, "# environment\nMT_SPACED=two  words 'and'",
                           strlen("# environment\nMT_SPACED=two  words 'and'")),
                  "after argv: %.40s", r.out + n);
    ck_assert_ptr_null(strstr(a.out, "# environment"));
    ck_assert_ptr_null(strstr(a.out, "MT_SPACED"));
    ck_assert_ptr_nonnull(strstr(a.out, "--data-path\n/data/my corpus\n/data/it's\n"));
    done(&r);

    x = moetune(fenv);
    ck_assert_msg(x.status == 0, "%s", x.err);
    /* the contract's own variables, then (a sim contract) the cluster the
     * sim stands for, as moetune sets it per run */
    ck_assert_msg(!strncmp(x.out, "MOETUNE_SIM_GPU=", 16) &&
                      strstr(x.out, "\nMT_SPACED='two  words '\\''and'\\'' \"$HOME\" \\n;'\n"
                                    "MT_WORDS='just words'\n"),
                  "%s", x.out);
    env = tk_write_temp("render-env", x.out);
    done(&x);
    {
        const char *args[] = {"-c", "set -a; . \"$1\"; printf '%s' \"$MT_SPACED\"", "sh", env,
                              NULL};
        x = tk_spawn("/bin/sh", args);
        ck_assert_msg(x.status == 0, "%s", x.err);
        ck_assert_str_eq(x.out, spaced_value);
        done(&x);
    }

    x = moetune(fsh);
    ck_assert_msg(x.status == 0, "%s", x.err);
    ck_assert_msg(!strncmp(x.out, "#!/bin/sh\n", 10), "%s", x.out);
    ck_assert_ptr_nonnull(strstr(x.out, "\nexport MT_SPACED='two  words '\\''and'\\''"));
    ck_assert_ptr_nonnull(strstr(x.out, " '/data/my corpus' '/data/it'\\''s'"));
    sh = tk_write_temp("render-sh", x.out);
    done(&x);
    {
        const char *syntax[] = {"-n", sh, NULL};
        const char *exec[] = {sh, NULL};
        x = tk_spawn("/bin/sh", syntax);
        ck_assert_msg(x.status == 0, "sh -n: %s", x.err);
        done(&x);
        /* run: the program gets exactly the rendered words, then the env */
        x = tk_spawn("/bin/sh", exec);
        ck_assert_msg(x.status == 0, "%s", x.err);
        want = bracketed(a.out);
        want = realloc(want, strlen(want) + sizeof spaced_value + 8);
        sprintf(want + strlen(want), "ENV[%s]\n", spaced_value);
        ck_assert_str_eq(x.out, want);
        free(want);
        done(&x);
    }
    done(&a);

    x = moetune(bad);
    ck_assert_int_eq(x.status, 64);
    ck_assert_ptr_nonnull(strstr(x.err, "--format takes env, sh or launch, not 'json'"));
    done(&x);
    x = moetune(both);
    ck_assert_int_eq(x.status, 64);
    ck_assert_ptr_nonnull(strstr(x.err, "--argv-only and --format sh exclude each other"));
    done(&x);
    x = moetune(lone);
    ck_assert_int_eq(x.status, 64);
    ck_assert_ptr_nonnull(strstr(x.err, "incomplete option '--format'"));
    done(&x);
    /* Bridge overrides have no program under this Megatron-LM template */
    x = moetune(bridge_sh);
    ck_assert_int_eq(x.status, 2);
    ck_assert_ptr_nonnull(strstr(x.err, "takes no Megatron-Bridge overrides"));
    done(&x);
    unlink(sh), unlink(env), unlink(path);
    free(sh), free(env), free(path);
}
END_TEST

START_TEST(candidates_by_wall)
{
    char *path = tk_example("qwen3-30b-a3b-h100x16.cfg");
    const char *all[] = {"candidates", path, NULL};
    const char *mem[] = {"candidates", path, "--wall", "memory", NULL};
    const char *bad[] = {"candidates", path, "--wall", "disk", NULL};
    run r = moetune(all);
    const char *p;
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "[dispatcher] dispatcher:"));
    ck_assert_ptr_nonnull(strstr(r.out, "legality: legal"));
    ck_assert_ptr_nonnull(strstr(r.out, "label: training-equivalent"));
    done(&r);
    r = moetune(mem);
    ck_assert_int_eq(r.status, 0);
    for (p = r.out; (p = strstr(p, "| wall: ")); p++) {
        const char *nl = strchr(p, '\n'), *m = strstr(p, "memory");
        ck_assert_msg(m && (!nl || m < nl), "non-memory candidate under --wall memory: %.60s", p);
    }
    ck_assert_ptr_null(strstr(r.out, "[dispatcher] dispatcher:"));
    done(&r);
    r = moetune(bad);
    ck_assert_int_eq(r.status, 64);
    done(&r);
    free(path);
    /* the plugins see the wall as the profile's evidence: the 235B base
     * recomputes, and a compute wall makes recompute offer its removal */
    path = tk_example("qwen3-235b-a22b-h100x256.cfg");
    {
        const char *cmp[] = {"candidates", path, "--wall", "compute", NULL};
        const char *none[] = {"candidates", path, NULL};
        r = moetune(cmp);
        ck_assert_msg(r.status == 0, "%s", r.err);
        ck_assert_ptr_nonnull(strstr(r.out, "remove recompute: the wall is compute, not memory"));
        done(&r);
        r = moetune(none);
        ck_assert_msg(r.status == 0, "%s", r.err);
        ck_assert_ptr_null(strstr(r.out, "remove recompute"));
        done(&r);
    }
    free(path);
}
END_TEST

START_TEST(plugins_listing)
{
    const char *args[] = {"plugins", NULL};
    run r = moetune(args);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "dispatcher 1.0.0 (ABI 1)"));
    ck_assert_ptr_nonnull(strstr(r.out, "moe_flex_dispatcher_backend"));
    ck_assert_ptr_nonnull(strstr(r.out, "path:"));
    done(&r);
}
END_TEST

/* moetune parse reads a real Megatron-format log (one the sim wrote). */
START_TEST(parse_a_log)
{
    const char *text[] = {"parse", MT_SOURCE_DIR "/tests/fuzz/corpus_logparse/sim-mlm.log", NULL};
    const char *json[] = {"parse", MT_SOURCE_DIR "/tests/fuzz/corpus_logparse/sim-mlm.log", "--json",
                          NULL};
    const char *missing[] = {"parse", "/nonexistent/train.log", NULL};
    run r = moetune(text);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "iterations: 5"));
    ck_assert_ptr_nonnull(strstr(r.out, "lm loss 1.162272E+01"));
    done(&r);
    r = moetune(json);
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "\"iterations\":[{\"iteration\":1,"));
    done(&r);
    r = moetune(missing);
    ck_assert_int_eq(r.status, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "cannot open the log"));
    done(&r);
}
END_TEST

/* moetune profile on the real Kineto trace of shared/data/traces. */
START_TEST(profile_a_trace)
{
    const char *trace = MT_SOURCE_DIR "/../shared/data/traces/a100-2rank-nccl.json.gz";
    const char *args[] = {"profile", trace, NULL};
    run r;
    if (access(trace, R_OK) != 0) {
        fprintf(stderr, "profile_a_trace: %s is absent; skipped\n", trace);
        return;
    }
    r = moetune(args);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "hidden_comm_us   7317.025 (15.609% of communication)"));
    ck_assert_ptr_nonnull(strstr(r.out, "trace.available = true"));
    done(&r);
}
END_TEST

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* --window, --compare, --contract (its profile group), --class, --json and
 * the errors, on hand-built traces whose figures are known. */
START_TEST(profile_window_compare_contract)
{
    static const char a_json[] =
        "{\"traceEvents\": ["
        "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#1\",\"pid\":1,"
        "\"tid\":1,\"ts\":0,\"dur\":100},"
        "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#2\",\"pid\":1,"
        "\"tid\":1,\"ts\":100,\"dur\":100},"
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"gemm\",\"pid\":0,\"tid\":7,\"ts\":0,"
        "\"dur\":100,\"args\":{\"device\":0}},"
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"gemm\",\"pid\":0,\"tid\":7,\"ts\":100,"
        "\"dur\":40,\"args\":{\"device\":0}},"
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"my_custom_a2a\",\"pid\":0,\"tid\":8,"
        "\"ts\":140,\"dur\":60,\"args\":{\"device\":0}}]}";
    static const char b_json[] =
        "{\"traceEvents\": ["
        "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#1\",\"pid\":1,"
        "\"tid\":1,\"ts\":0,\"dur\":100},"
        "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#2\",\"pid\":1,"
        "\"tid\":1,\"ts\":100,\"dur\":70},"
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"gemm\",\"pid\":0,\"tid\":7,\"ts\":0,"
        "\"dur\":100,\"args\":{\"device\":0}},"
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"gemm\",\"pid\":0,\"tid\":7,\"ts\":100,"
        "\"dur\":60,\"args\":{\"device\":0}},"
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"my_custom_a2a\",\"pid\":0,\"tid\":8,"
        "\"ts\":110,\"dur\":60,\"args\":{\"device\":0}}]}";
    char dir[] = "/tmp/moetune-cli-prof-XXXXXX", a[300], b[300], c[300];
    char *example = tk_example("qwen3-30b-a3b-h100x16.cfg"), *text = tk_slurp(example), *ctext;
    run r;
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(a, sizeof a, "%s/a.json", dir);
    snprintf(b, sizeof b, "%s/b.json", dir);
    snprintf(c, sizeof c, "%s/c.cfg", dir);
    write_text(a, a_json);
    write_text(b, b_json);
    /* the contract adds the custom kernel as communication */
    ctext = malloc(strlen(text) + 200);
    sprintf(ctext, "%s\nprofile = { comm_share = 0.25; classes = [\"communication:^my_custom\"]; };\n",
            text);
    write_text(c, ctext);
    {
        /* step 2 alone: a's custom kernel is compute without the contract */
        const char *args[] = {"profile", a, "--window", "2:2", NULL};
        r = moetune(args);
        ck_assert_msg(r.status == 0, "%s", r.err);
        ck_assert_ptr_nonnull(strstr(r.out, "steps 2 to 2"));
        ck_assert_ptr_nonnull(strstr(r.out, "comm_us          0.000"));
        done(&r);
    }
    {
        const char *args[] = {"profile", a, "--window", "2:2", "--contract", c, NULL};
        r = moetune(args);
        ck_assert_msg(r.status == 0, "%s", r.err);
        /* 60 of 100 us exposed: above the contract's 25% */
        ck_assert_ptr_nonnull(strstr(r.out, "exposed_comm_us  60.000 (60.000% of window)"));
        ck_assert_ptr_nonnull(strstr(r.out, "wall: communication"));
        ck_assert_ptr_nonnull(strstr(r.out, "threshold 25.0%"));
        done(&r);
    }
    {
        /* b hides 50 of its 60 us under the GEMM */
        const char *args[] = {"profile", a,       "--window", "2:2",  "--class",
                              "communication:my_custom", "--compare", b, NULL};
        r = moetune(args);
        ck_assert_msg(r.status == 0, "%s", r.err);
        ck_assert_ptr_nonnull(strstr(r.out, "hidden_comm"));
        ck_assert_ptr_nonnull(strstr(r.out, "+50.000 us"));
        ck_assert_ptr_nonnull(strstr(r.out, "-30.000 us")); /* the window: 100 -> 70 */
        done(&r);
    }
    {
        const char *args[] = {"profile", a, "--class", "communication:my_custom", "--compare", b,
                              "--window", "2:2", "--json", NULL};
        r = moetune(args);
        ck_assert_msg(r.status == 0, "%s", r.err);
        ck_assert_ptr_nonnull(strstr(r.out, "\"delta\": {"));
        ck_assert_ptr_nonnull(strstr(r.out, "\"hidden_comm_us\": 50.000000"));
        done(&r);
    }
    {
        const char *args[] = {"profile", a, "--window", "3:4", NULL};
        r = moetune(args);
        ck_assert_int_eq(r.status, 2);
        ck_assert_ptr_nonnull(strstr(r.err, "marks steps 1 to 2"));
        done(&r);
    }
    {
        const char *args[] = {"profile", a, "--window", "x", NULL};
        r = moetune(args);
        ck_assert_int_eq(r.status, 64);
        done(&r);
    }
    {
        const char *args[] = {"profile", a, "--class", "bogus:x", NULL};
        r = moetune(args);
        ck_assert_int_eq(r.status, 2);
        ck_assert_ptr_nonnull(strstr(r.err, "not a kernel class rule"));
        done(&r);
    }
    unlink(a), unlink(b), unlink(c);
    rmdir(dir);
    free(example), free(text), free(ctext);
}
END_TEST

/* The example contract with line inserted into its launch group; caller
 * frees the path. */
static char *contract_with(const char *line)
{
    char *example = tk_example("qwen3-30b-a3b-h100x16.cfg"), *text = tk_slurp(example);
    char *edited = malloc(strlen(text) + strlen(line) + 16), *at = strstr(text, "  backend = \"sim\";");
    char *path;
    ck_assert_ptr_nonnull(at);
    sprintf(edited, "%.*s  %s\n%s", (int)(at - text), text, line, at);
    path = tk_write_temp("pp", edited);
    free(edited), free(text), free(example);
    return path;
}

/* An untrusted contract runs no code: the files of its launch.plugin_path
 * are refused by check, render and plugins (the marker plugin's
 * constructor never runs), and check says what it loaded and what it
 * refused and why. */
START_TEST(contract_plugin_path_refused)
{
    char line[512], marker[] = "/tmp/moetune-test-marker-XXXXXX", *path;
    const char *check[] = {"check", NULL, NULL}, *render[] = {"render", NULL, "--argv-only", NULL},
               *plugins[] = {"plugins", NULL, NULL};
    int fd = mkstemp(marker);
    run r;
    close(fd);
    unlink(marker);
    setenv("MT_FIXTURE_MARKER", marker, 1);
    snprintf(line, sizeof line, "plugin_path = [\"%s\"];",
             MT_BUILD_DIR "/tests/fixtures/marker.so");
    path = contract_with(line);
    check[1] = render[1] = plugins[1] = path;
    r = moetune(check);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "plugins: 7 loaded\n"));
    ck_assert_ptr_nonnull(strstr(r.out, "  recompute 1.0.0 (built-in) " MT_BUILD_DIR "/plugins/recompute.so\n"));
    ck_assert_ptr_nonnull(strstr(r.out, "  refused: "));
    ck_assert_ptr_nonnull(strstr(r.out, "refused to load \"" MT_BUILD_DIR
                                        "/tests/fixtures/marker.so\": files a contract names load "
                                        "only with --trust-plugin-path"));
    ck_assert_ptr_nonnull(strstr(r.err, "warning"));
    done(&r);
    r = moetune(render);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.err, "refused to load"));
    done(&r);
    r = moetune(plugins);
    ck_assert_ptr_null(strstr(r.out, "fixture-marker"));
    ck_assert_ptr_nonnull(strstr(r.err, "refused to load"));
    done(&r);
    ck_assert_msg(access(marker, F_OK) != 0, "code from the contract's plugin_path ran");
    unsetenv("MT_FIXTURE_MARKER");
    unlink(path);
    free(path);
}
END_TEST

/* With --trust-plugin-path (on any command) the contract's launch.plugin_path
 * is searched too, relative to the contract; a plugin whose init fails is
 * listed as disabled with its reason, and the others go on. */
START_TEST(contract_plugin_path_trusted)
{
    char line[512], *path;
    const char *plugins[] = {"plugins", NULL, "--trust-plugin-path", NULL},
               *check[] = {"--trust-plugin-path", "check", NULL, NULL};
    run r;
    snprintf(line, sizeof line, "plugin_path = [\"%s\"];",
             MT_BUILD_DIR "/tests/fixtures/init_fail.so");
    path = contract_with(line);
    plugins[1] = path;
    check[2] = path;
    r = moetune(plugins);
    ck_assert_int_eq(r.status, 1);
    ck_assert_ptr_nonnull(strstr(r.out, "fixture-init_fail 0.0.1 (ABI 1)  DISABLED"));
    ck_assert_ptr_nonnull(strstr(r.out, "recompute 1.0.0 (ABI 1)\n"));
    ck_assert_ptr_nonnull(strstr(r.err, "init failed: license server unreachable"));
    done(&r);
    r = moetune(check);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.err, "warning"));
    ck_assert_ptr_nonnull(strstr(r.err, "init_fail.so"));
    ck_assert_ptr_nonnull(strstr(r.out, "  fixture-init_fail 0.0.1 (launch.plugin_path) " MT_BUILD_DIR
                                        "/tests/fixtures/init_fail.so  DISABLED: init failed"));
    done(&r);
    unlink(path);
    free(path);
}
END_TEST

/* launch.plugins names what a contract needs; the operator provides it
 * (MOETUNE_PLUGIN_PATH).  Missing, or older than the least version, is bad
 * input naming the plugin and where to put it. */
START_TEST(contract_plugins_by_name)
{
    char *any = contract_with("plugins = [\"fixture-marker\"];");
    char *newer = contract_with("plugins = [\"fixture-marker >= 0.2\", \"recompute>=1.0\"];");
    char *old = contract_with("plugins = [\"fixture-marker >= 0.0.1\"];");
    char *bad = contract_with("plugins = [\"../evil.so\"];");
    const char *check[] = {"check", NULL, NULL};
    run r;
    check[1] = any;
    r = moetune(check);
    ck_assert_int_eq(r.status, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "launch.plugins"));
    ck_assert_ptr_nonnull(strstr(r.err, "plugin fixture-marker is not loaded"));
    ck_assert_ptr_nonnull(strstr(r.err, "MOETUNE_PLUGIN_PATH"));
    done(&r);
    check[1] = bad;
    r = moetune(check);
    ck_assert_int_eq(r.status, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "is not \"NAME\" or \"NAME >= VERSION\""));
    done(&r);
    setenv("MOETUNE_PLUGIN_PATH", MT_BUILD_DIR "/tests/fixtures/marker.so", 1);
    check[1] = any;
    r = moetune(check);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "  fixture-marker 0.0.1 (MOETUNE_PLUGIN_PATH) " MT_BUILD_DIR
                                        "/tests/fixtures/marker.so\n"));
    done(&r);
    check[1] = old;
    r = moetune(check);
    ck_assert_msg(r.status == 0, "%s", r.err);
    done(&r);
    check[1] = newer;
    r = moetune(check);
    ck_assert_int_eq(r.status, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "plugin fixture-marker 0.0.1 (" MT_BUILD_DIR
                                        "/tests/fixtures/marker.so) is older than the 0.2 the "
                                        "contract needs"));
    done(&r);
    setenv("MOETUNE_PLUGIN_PATH", "", 1);
    unlink(any), unlink(newer), unlink(old), unlink(bad);
    free(any), free(newer), free(old), free(bad);
}
END_TEST

/* Issue 18, messages: a tune directory that cannot be written says why
 * (permission, read-only file system), not the "No such file or directory"
 * of a file inside it.  As root every mode bit is ignored, so root tries
 * /proc/sys, which no one may write into. */
/* A numeric or named option value that is not whole and in range is a
 * usage error naming the option and the value, before anything is
 * written: never a silent fallback (local for a misspelt executor, the
 * contract's budget for a negative one, seed 0 for a word). */
START_TEST(tune_option_values_are_checked)
{
    static const char *const bad[][3] = {
        {"--executor", "modle", "--executor modle: write local or model"},
        {"--gpu-hours", "-5", "--gpu-hours -5: write a number > 0"},
        {"--gpu-hours", "1e9x", "--gpu-hours 1e9x: write a number > 0"},
        {"--runs", "0", "--runs 0: write a whole number >= 1"},
        {"--runs", "12abc", "--runs 12abc: write a whole number >= 1"},
        {"--seed", "abc", "--seed abc: write a whole number >= 0"},
        {"--seed", "-3", "--seed -3: write a whole number >= 0"},
        {"--jobs", "two", "--jobs two: write a whole number >= 1"},
        {"--worker-wait", "nan", "--worker-wait nan: write a number >= 0"},
    };
    char dir[] = "/tmp/moetune-opts-XXXXXX", sub[64];
    char *contract = tk_example("qwen3-30b-a3b-gb300x8.cfg");
    size_t i;
    struct stat sb;
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(sub, sizeof sub, "%s/T", dir);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *args[] = {"tune", contract, "--dir", sub, bad[i][0], bad[i][1], "--quiet", NULL};
        run r = moetune(args);
        ck_assert_msg(r.status == 64, "%s %s: exit %d", bad[i][0], bad[i][1], r.status);
        ck_assert_msg(strstr(r.err, bad[i][2]), "%s %s: %s", bad[i][0], bad[i][1], r.err);
        ck_assert_msg(stat(sub, &sb) != 0, "%s %s created the tune directory", bad[i][0], bad[i][1]);
        done(&r);
    }
    {
        const char *args[] = {"bisect", contract, "--good-config", contract, "--bad-config",
                              contract, "--dir", sub, "--prepare-timeout", "-1", NULL};
        run r = moetune(args);
        ck_assert_int_eq(r.status, 64);
        ck_assert_ptr_nonnull(strstr(r.err, "moetune bisect: --prepare-timeout -1: write a number > 0"));
        done(&r);
    }
    rmdir(dir);
    free(contract);
}
END_TEST

START_TEST(unwritable_tune_dir_says_why)
{
    char base[64] = "/tmp/moetune-ro-XXXXXX", dir[128];
    char *contract = tk_example("qwen3-30b-a3b-h100x16.cfg");
    const char *args[] = {"tune", contract, "--dir", dir, "--quiet", NULL};
    run r;
    int root = geteuid() == 0;
    if (root) {
        snprintf(dir, sizeof dir, "/proc/sys");
    } else {
        ck_assert_ptr_nonnull(mkdtemp(base));
        ck_assert_int_eq(chmod(base, 0555), 0);
        snprintf(dir, sizeof dir, "%s/T", base);
    }
    r = moetune(args);
    ck_assert_int_eq(r.status, 2);
    ck_assert_msg(strstr(r.err, root ? "moetune tune: cannot write into the tune directory "
                                       "/proc/sys: Permission denied"
                                     : "moetune tune: cannot create the tune directory ") &&
                      strstr(r.err, "Permission denied"),
                  "%s", r.err);
    ck_assert_msg(!strstr(r.err, "No such file or directory"), "%s", r.err);
    done(&r);
    if (!root) {
        chmod(base, 0755);
        rmdir(base);
    }
    free(contract);
}
END_TEST

/* Issue 18, messages: `moetune measure` whose store refuses the run (here a
 * trigger in the real store, as a full disk or a foreign writer would)
 * fails with the store's reason and frees the measurement: under the
 * sanitizer build (MOETUNE_SANITIZE) LeakSanitizer reported it before. */
START_TEST(measure_store_failure_is_reported_and_leaks_nothing)
{
    char dir[64] = "/tmp/moetune-storefail-XXXXXX", db[128];
    char *ex = tk_example("qwen3-30b-a3b-h100x16.cfg");
    const char *first[] = {"measure", ex, "--dir", dir, NULL};
    const char *second[] = {"measure", ex, "--dir", dir, "--replicate", "1", NULL};
    sqlite3 *h = NULL;
    char *err = NULL;
    run r;
    ck_assert_ptr_nonnull(mkdtemp(dir));
    r = moetune(first);
    ck_assert_msg(r.status == 0, "%s", r.err);
    done(&r);
    snprintf(db, sizeof db, "%s/moetune.db", dir);
    ck_assert_int_eq(sqlite3_open(db, &h), SQLITE_OK);
    ck_assert_msg(sqlite3_exec(h,
                               "CREATE TRIGGER refuse BEFORE INSERT ON runs BEGIN SELECT "
                               "RAISE(ABORT, 'refused by test_cli'); END;",
                               NULL, NULL, &err) == SQLITE_OK,
                  "%s", err ? err : "");
    sqlite3_close(h);
    r = moetune(second);
    ck_assert_int_eq(r.status, 1);
    ck_assert_msg(strstr(r.err, "cannot store a run") && strstr(r.err, "refused by test_cli"),
                  "%s", r.err);
    ck_assert_msg(!strstr(r.err, "LeakSanitizer") && !strstr(r.err, "AddressSanitizer"), "%s",
                  r.err);
    done(&r);
    {
        const char *rm[] = {"-rf", dir, NULL};
        run x = tk_spawn("/bin/rm", rm);
        done(&x);
    }
    free(ex);
}
END_TEST

/* The example with its launch template replaced (caller frees the path). */
static char *with_template(const char *tmpl)
{
    char *ex = tk_example("qwen3-30b-a3b-h100x16.cfg"), *text = tk_slurp(ex), *path, *out;
    const char *from = "template = [\"{sim}\", \"{args}\"];", *at;
    ck_assert_ptr_nonnull(text);
    ck_assert_ptr_nonnull(at = strstr(text, from));
    out = malloc(strlen(text) + strlen(tmpl) + 1);
    memcpy(out, text, (size_t)(at - text));
    strcpy(out + (at - text), tmpl);
    strcat(out, at + strlen(from));
    path = tk_write_temp("tmpl", out);
    free(out), free(text), free(ex);
    return path;
}

/* Issue 18, messages: `check` and `measure` agree on a template's
 * placeholders (an unknown one is refused by both; {rev} is bisect's, and
 * both say so in the same words, and `tune` refuses it before any run),
 * and a single string holding {args} is told to split into words. */
START_TEST(template_placeholders_check_and_measure_agree)
{
    char dir[64] = "/tmp/moetune-tmpl-XXXXXX", tdir[80];
    char *rev = with_template("template = [\"{sim}\", \"--x={rev}\", \"{args}\"];");
    char *bogus = with_template("template = [\"{sim}\", \"{bogus}\", \"{args}\"];");
    char *one = with_template("template = [\"{sim} {args}\"];");
    const char *check_rev[] = {"check", rev, NULL}, *check_bogus[] = {"check", bogus, NULL};
    const char *check_one[] = {"check", one, NULL};
    const char *measure_rev[] = {"measure", rev, "--dir", dir, NULL};
    const char *measure_bogus[] = {"measure", bogus, "--dir", dir, NULL};
    const char *tune_rev[] = {"tune", rev, "--dir", tdir, "--quiet", NULL};
    run r;
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(tdir, sizeof tdir, "%s/T", dir);
    r = moetune(check_rev);
    ck_assert_int_eq(r.status, 0);
    ck_assert_msg(strstr(r.out, "launch.template: names {rev} or {work}, which only `moetune "
                                "bisect` fills; `tune` and `measure` refuse this contract"),
                  "%s", r.out);
    done(&r);
    r = moetune(measure_rev);
    ck_assert_int_ne(r.status, 0);
    ck_assert_msg(strstr(r.err, "the template word \"--x={rev}\" names {rev}, which only "
                                "`moetune bisect` fills"),
                  "%s", r.err);
    done(&r);
    r = moetune(tune_rev);
    ck_assert_int_eq(r.status, 2);
    ck_assert_msg(strstr(r.err, "launch.template names {rev} or {work}, which only `moetune "
                                "bisect` fills"),
                  "%s", r.err);
    done(&r);
    r = moetune(check_bogus);
    ck_assert_int_eq(r.status, 2);
    ck_assert_msg(strstr(r.err, "unknown placeholder '{bogus}' in template word \"{bogus}\""),
                  "%s", r.err);
    done(&r);
    r = moetune(measure_bogus);
    ck_assert_int_ne(r.status, 0);
    ck_assert_msg(strstr(r.err, "unknown placeholder '{bogus}' in template word \"{bogus}\""),
                  "%s", r.err);
    done(&r);
    r = moetune(check_one);
    ck_assert_int_eq(r.status, 2);
    ck_assert_msg(strstr(r.err, "word \"{sim} {args}\" holds {args} inside it") &&
                      strstr(r.err, "split the string into words") &&
                      !strstr(r.err, "never says where"),
                  "%s", r.err);
    done(&r);
    unlink(rev), unlink(bogus), unlink(one);
    free(rev), free(bogus), free(one);
    {
        const char *rm[] = {"/bin/rm", "-rf", dir, NULL};
        run x = tk_spawn("/bin/rm", rm + 1);
        done(&x);
    }
}
END_TEST

/* One option-table parser for every command (core/cli.h): --help lists the
 * options on stdout with exit 0; an unknown option, a missing value, an
 * extra argument and a missing one are usage errors (64) that name the
 * command and the word; "--opt=value" is "--opt value". */
START_TEST(every_command_parses_alike)
{
    static const char *const cmds[] = {"plugins", "check", "import", "render", "candidates",
                                       "parse", "runs", "space", "measure", "profile", "worker",
                                       "keygen", "calibration", "tune", "status", "demo",
                                       "bisect", "optimum", "recipe", "model-screen", "rank-exec"};
    char *path = tk_example("qwen3-30b-a3b-gb300x8.cfg");
    char want[96];
    size_t i;
    for (i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        const char *help[] = {cmds[i], "--help", NULL};
        const char *bogus[] = {cmds[i], "--no-such-option", NULL};
        run r = moetune(help);
        snprintf(want, sizeof want, "usage: moetune %s", cmds[i]);
        ck_assert_msg(r.status == 0, "%s --help: exit %d: %s", cmds[i], r.status, r.err);
        ck_assert_msg(strstr(r.out, want) && strstr(r.out, "options:") &&
                          strstr(r.out, "--help"),
                      "%s --help:\n%s", cmds[i], r.out);
        done(&r);
        r = moetune(bogus);
        snprintf(want, sizeof want, "moetune %s: unknown option '--no-such-option'", cmds[i]);
        ck_assert_msg(r.status == 64, "%s: exit %d", cmds[i], r.status);
        ck_assert_msg(strstr(r.err, want) && strstr(r.err, "--help lists every option"),
                      "%s:\n%s", cmds[i], r.err);
        done(&r);
    }
    {
        const char *extra[] = {"parse", "a.log", "b.log", NULL};
        const char *missing[] = {"runs", NULL};
        const char *noval[] = {"tune", path, "--dir", NULL};
        const char *eq[] = {"render", path, "--format=env", NULL};
        const char *sp[] = {"render", path, "--format", "env", NULL};
        run a, b;
        a = moetune(extra);
        ck_assert_int_eq(a.status, 64);
        ck_assert_ptr_nonnull(strstr(a.err, "moetune parse: unexpected argument 'b.log'"));
        done(&a);
        a = moetune(missing);
        ck_assert_int_eq(a.status, 64);
        ck_assert_ptr_nonnull(strstr(a.err, "moetune runs: missing DIR"));
        done(&a);
        a = moetune(noval);
        ck_assert_int_eq(a.status, 64);
        ck_assert_ptr_nonnull(strstr(a.err, "moetune tune: incomplete option '--dir'"));
        done(&a);
        a = moetune(eq);
        b = moetune(sp);
        ck_assert_msg(a.status == 0, "%s", a.err);
        ck_assert_int_eq(b.status, 0);
        ck_assert_str_eq(a.out, b.out);
        done(&a), done(&b);
    }
    free(path);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("commands");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, check_every_example);
    tcase_add_test(tc, every_command_parses_alike);
    tcase_add_test(tc, unwritable_tune_dir_says_why);
    tcase_add_test(tc, tune_option_values_are_checked);
    tcase_add_test(tc, measure_store_failure_is_reported_and_leaks_nothing);
    tcase_add_test(tc, template_placeholders_check_and_measure_agree);
    tcase_add_test(tc, check_bad_contract_exits_2);
    tcase_add_test(tc, check_base_that_does_not_fit);
    tcase_add_test(tc, import_check_render);
    tcase_add_test(tc, render_sets_and_errors);
    tcase_add_test(tc, render_argv_only_and_formats);
    tcase_add_test(tc, candidates_by_wall);
    tcase_add_test(tc, plugins_listing);
    tcase_add_test(tc, contract_plugin_path_refused);
    tcase_add_test(tc, contract_plugin_path_trusted);
    tcase_add_test(tc, contract_plugins_by_name);
    tcase_add_test(tc, parse_a_log);
    tcase_add_test(tc, profile_a_trace);
    tcase_add_test(tc, profile_window_compare_contract);
    suite_add_tcase(s, tc);
    return tk_run(s);
}
