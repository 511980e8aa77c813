/*
 * test_sim_run.c - moetune-sim as a worker runs it: the launch command
 * moetune renders for the Qwen3-30B-A3B 16 x H100 contract (both dialects),
 * executed as a real child process, its exit status and its log read the
 * way Megatron's are read.  Failures (argparse errors, illegal configs, OOM,
 * injected NaN / NCCL error / hang / crash), determinism of the noise, and
 * the profiled run's trace.
 *
 * Needs MT_SIM_BIN (the built moetune-sim) besides testkit's definitions.
 */
#include "testkit.h"

#include <check.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef MT_SIM_BIN
#error "MT_SIM_BIN must name the built moetune-sim"
#endif

extern char **environ;

/* ---- a command line under construction ------------------------------------------ */

typedef struct cmd {
    mt_strlist argv; /* without argv[0] */
    mt_strlist env;  /* "K=V" added to the child's environment */
} cmd;

static void cmd_free(cmd *c)
{
    mt_strlist_clear(&c->argv);
    mt_strlist_clear(&c->env);
}

static void push_all(mt_strlist *l, const char *const *v)
{
    for (; *v; v++)
        mt_strlist_push(l, *v);
}

static void add_args(cmd *c, const char *const *v) { push_all(&c->argv, v); }

/* t's config rendered in its contract's dialect, as the worker would launch
 * it (template {sim} [--bridge] {args}), with the contract's cluster. */
static cmd render_cfg(tk *t)
{
    mt_rendered out;
    cmd c;
    size_t i;
    const char *k, *v;
    uint32_t dialect = strstr(t->contract->name, "bridge") ? MT_DIALECT_BRIDGE : MT_DIALECT_MLM;
    static const char *const hw[][2] = {{"gpu", "--sim-gpu"},
                                        {"gpus_per_node", "--sim-gpus-per-node"},
                                        {"nodes", "--sim-nodes"},
                                        {"nvlink_domain", "--sim-nvlink-domain"}};
    memset(&c, 0, sizeof c);
    mt_rendered_init(&out);
    ck_assert_int_eq(mt_render(t->reg, t->contract, t->cfg, dialect, &out, t->diag), 0);
    if (dialect == MT_DIALECT_BRIDGE)
        mt_strlist_push(&c.argv, "--bridge");
    for (i = 0; i < out.argv.n; i++)
        mt_strlist_push(&c.argv, out.argv.v[i]);
    for (i = 0; i < sizeof hw / sizeof hw[0]; i++)
        if ((v = mt_kv_get(t->contract->hardware, hw[i][0])) != NULL) {
            mt_strlist_push(&c.argv, hw[i][1]);
            mt_strlist_push(&c.argv, v);
        }
    for (i = 0; mt_kv_entry(out.env, i, &k, &v) == 0; i++) {
        char buf[512];
        snprintf(buf, sizeof buf, "%s=%s", k, v);
        mt_strlist_push(&c.env, buf);
    }
    /* the launcher's CPU binding reaches the sim through its environment */
    if ((v = mt_kv_get(out.launch, "cpu_bind")) != NULL) {
        char buf[128];
        snprintf(buf, sizeof buf, "MOETUNE_SIM_CPU_BIND=%s", v);
        mt_strlist_push(&c.env, buf);
    }
    mt_rendered_clear(&out);
    return c;
}

/* The contract's base config plus sets, rendered. */
static cmd rendered(const char *contract, const char *const *sets)
{
    tk *t = tk_open(contract);
    cmd c;
    size_t i;
    for (i = 0; sets && sets[i]; i++)
        tk_set(t, sets[i]);
    c = render_cfg(t);
    tk_close(&t);
    return c;
}

/* Replaces the value after flag (which must be present). */
static void set_flag(cmd *c, const char *flag, const char *value)
{
    size_t i;
    for (i = 0; i + 1 < c->argv.n; i++)
        if (!strcmp(c->argv.v[i], flag)) {
            free(c->argv.v[i + 1]);
            c->argv.v[i + 1] = strdup(value);
            return;
        }
    ck_abort_msg("flag %s not in the rendered command", flag);
}

/* ---- running it ---------------------------------------------------------------- */

typedef struct run {
    int status; /* raw wait status */
    int exited, code, signaled, sig, killed;
    char *out, *err;
} run;

static int keep_env(const char *e)
{
    return strncmp(e, "MOETUNE_SIM_", 12) && strncmp(e, "WORLD_SIZE=", 11) &&
           strncmp(e, "RANK=", 5) && strncmp(e, "SLURM_", 6) && strncmp(e, "LOCAL_RANK=", 11) &&
           strncmp(e, "CUDA_DEVICE_MAX_CONNECTIONS=", 28);
}

/* Runs the sim; kill_after_ms > 0 kills it (SIGKILL) if still running then. */
static run sim_run(const cmd *c, int kill_after_ms)
{
    char outp[] = "/tmp/moetune-sim-out-XXXXXX", errp[] = "/tmp/moetune-sim-err-XXXXXX";
    int fo = mkstemp(outp), fe = mkstemp(errp), st = 0;
    posix_spawn_file_actions_t fa;
    char **argv, **envp;
    size_t i, n = 0, ne = 0;
    pid_t pid;
    run r;
    memset(&r, 0, sizeof r);
    ck_assert(fo >= 0 && fe >= 0);
    argv = calloc(c->argv.n + 2, sizeof *argv);
    argv[0] = (char *)MT_SIM_BIN;
    for (i = 0; i < c->argv.n; i++)
        argv[i + 1] = c->argv.v[i];
    for (n = 0; environ[n]; n++)
        ;
    envp = calloc(n + c->env.n + 1, sizeof *envp);
    for (i = 0; i < n; i++)
        if (keep_env(environ[i]))
            envp[ne++] = environ[i];
    for (i = 0; i < c->env.n; i++)
        envp[ne++] = c->env.v[i];
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fo, 1);
    posix_spawn_file_actions_adddup2(&fa, fe, 2);
    ck_assert_int_eq(posix_spawn(&pid, MT_SIM_BIN, &fa, NULL, argv, envp), 0);
    posix_spawn_file_actions_destroy(&fa);
    if (kill_after_ms > 0) {
        int waited = 0;
        struct timespec ts = {0, 10 * 1000 * 1000};
        while (waitpid(pid, &st, WNOHANG) == 0) {
            if (waited >= kill_after_ms) {
                kill(pid, SIGKILL);
                r.killed = 1;
                ck_assert_int_eq(waitpid(pid, &st, 0), pid);
                break;
            }
            nanosleep(&ts, NULL);
            waited += 10;
        }
    } else {
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    }
    close(fo), close(fe);
    r.status = st;
    r.exited = WIFEXITED(st);
    r.code = r.exited ? WEXITSTATUS(st) : -1;
    r.signaled = WIFSIGNALED(st);
    r.sig = r.signaled ? WTERMSIG(st) : 0;
    r.out = tk_slurp(outp);
    r.err = tk_slurp(errp);
    ck_assert(r.out && r.err);
    unlink(outp), unlink(errp);
    free(argv);
    free(envp);
    return r;
}

static void done(run *r)
{
    free(r->out);
    free(r->err);
}

/* ---- reading the log -------------------------------------------------------------- */

static int count(const char *text, const char *needle)
{
    int n = 0;
    const char *p = text;
    size_t k = strlen(needle);
    while ((p = strstr(p, needle)) != NULL)
        n++, p += k;
    return n;
}

/* The value the arguments dump prints for name ("  name ..... value"), or
 * NULL; static buffer. */
static const char *dumped(const char *out, const char *name)
{
    static char val[512];
    const char *begin = strstr(out, "------------------------ arguments ------------------------\n");
    const char *end = strstr(out, "-------------------- end of arguments ---------------------");
    char key[160];
    const char *p;
    size_t n;
    if (!begin || !end)
        return NULL;
    snprintf(key, sizeof key, "\n  %s ", name);
    p = strstr(begin, key);
    if (!p || p > end)
        return NULL;
    p += strlen(key);
    while (*p == '.')
        p++;
    if (*p != ' ')
        return NULL;
    p++;
    n = strcspn(p, "\n");
    if (n >= sizeof val)
        n = sizeof val - 1;
    memcpy(val, p, n);
    val[n] = '\0';
    return val;
}

static void expect_dump(const char *out, const char *name, const char *want)
{
    const char *got = dumped(out, name);
    ck_assert_msg(got != NULL, "arguments dump lacks %s", name);
    ck_assert_msg(!strcmp(got, want), "arguments dump: %s = '%s', want '%s'", name, got, want);
}

typedef struct iter_line {
    int iteration, of;
    double clock;       /* seconds since midnight of the timestamp's day */
    long long consumed;
    double elapsed_ms, tflops, lr, loss;
    int gbs, skipped, nan, have_loss;
} iter_line;

/* Parses one iteration line in Megatron's format; 0 on success. */
static int parse_iteration(const char *line, int frac, iter_line *it)
{
    int y, mo, d, h, mi, n = 0;
    double s;
    const char *p;
    memset(it, 0, sizeof *it);
    if (frac) {
        if (sscanf(line, " [%4d-%2d-%2d %2d:%2d:%lf] iteration %d/%d |%n", &y, &mo, &d, &h, &mi, &s,
                   &it->iteration, &it->of, &n) != 8 || !n)
            return -1;
        /* microseconds present: six digits after the point */
        p = strchr(line, '.');
        if (!p || !isdigit((unsigned char)p[6]) || p[7] != ']')
            return -2;
    } else {
        int si;
        if (sscanf(line, " [%4d-%2d-%2d %2d:%2d:%2d] iteration %d/%d |%n", &y, &mo, &d, &h, &mi, &si,
                   &it->iteration, &it->of, &n) != 8 || !n)
            return -1;
        s = si;
    }
    it->clock = h * 3600.0 + mi * 60.0 + s;
    p = line + n;
    if (sscanf(p, " consumed samples: %lld | elapsed time per iteration (ms): %lf | throughput per "
                  "GPU (TFLOP/s/GPU): %lf | learning rate: %lf | global batch size: %d |%n",
               &it->consumed, &it->elapsed_ms, &it->tflops, &it->lr, &it->gbs, &n) != 5)
        return -3;
    p += n;
    if (sscanf(p, " lm loss: %lf |%n", &it->loss, &n) == 1) {
        it->have_loss = 1;
        p += n;
    }
    p = strstr(p, " loss scale: ");
    if (!p)
        return -4;
    p = strstr(p, " number of skipped iterations: ");
    if (!p || sscanf(p, " number of skipped iterations: %d | number of nan iterations: %d |",
                     &it->skipped, &it->nan) != 2)
        return -5;
    return 0;
}

/* Every iteration line of a log, in order; returns how many (at most max). */
static int iterations(const char *out, int frac, iter_line *v, int max)
{
    const char *p = out;
    int n = 0;
    while (*p) {
        size_t len = strcspn(p, "\n");
        char line[2048];
        if (len < sizeof line && strstr(p, "] iteration ") && strstr(p, "] iteration ") < p + len) {
            memcpy(line, p, len);
            line[len] = '\0';
            ck_assert_msg(n < max, "too many iteration lines");
            ck_assert_msg(parse_iteration(line, frac, &v[n]) == 0, "unparseable iteration line: %s",
                          line);
            n++;
        }
        p += len + (p[len] == '\n');
    }
    return n;
}

/* ---- a small JSON checker (the trace must parse) ----------------------------------- */

static const char *json_ws(const char *p)
{
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
        p++;
    return p;
}

static const char *json_value(const char *p, int depth);

static const char *json_string(const char *p)
{
    if (*p != '"')
        return NULL;
    for (p++; *p && *p != '"'; p++) {
        if ((unsigned char)*p < 0x20)
            return NULL;
        if (*p == '\\') {
            p++;
            if (!*p || !strchr("\"\\/bfnrtu", *p))
                return NULL;
        }
    }
    return *p == '"' ? p + 1 : NULL;
}

static const char *json_value(const char *p, int depth)
{
    p = json_ws(p);
    if (depth > 64)
        return NULL;
    if (*p == '{' || *p == '[') {
        char close = *p == '{' ? '}' : ']';
        int obj = *p == '{';
        p = json_ws(p + 1);
        if (*p == close)
            return p + 1;
        for (;;) {
            if (obj) {
                p = json_string(json_ws(p));
                if (!p)
                    return NULL;
                p = json_ws(p);
                if (*p != ':')
                    return NULL;
                p++;
            }
            p = json_value(p, depth + 1);
            if (!p)
                return NULL;
            p = json_ws(p);
            if (*p == ',') {
                p++;
                continue;
            }
            return *p == close ? p + 1 : NULL;
        }
    }
    if (*p == '"')
        return json_string(p);
    if (!strncmp(p, "true", 4) || !strncmp(p, "null", 4))
        return p + 4;
    if (!strncmp(p, "false", 5))
        return p + 5;
    {
        char *end;
        strtod(p, &end);
        return end > p ? end : NULL;
    }
}

static int json_ok(const char *text)
{
    const char *p = json_value(text, 0);
    return p && *json_ws(p) == '\0';
}

/* ---- the contract's runs --------------------------------------------------------------- */

static void check_normal_run(const run *r, int bridge)
{
    iter_line it[64];
    int n, i;
    ck_assert_msg(r->exited && r->code == 0, "exit %d signal %d\n%s", r->code, r->sig, r->err);
    /* the arguments dump shows the contract's settings */
    expect_dump(r->out, "expert_model_parallel_size", "16");
    expect_dump(r->out, "expert_tensor_parallel_size", "1");
    expect_dump(r->out, "tensor_model_parallel_size", "1");
    expect_dump(r->out, "pipeline_model_parallel_size", "1");
    expect_dump(r->out, "moe_token_dispatcher_type", "alltoall");
    expect_dump(r->out, "num_experts", "128");
    expect_dump(r->out, "moe_router_topk", "8");
    expect_dump(r->out, "num_layers", "48");
    expect_dump(r->out, "hidden_size", "2048");
    expect_dump(r->out, "num_query_groups", "4");
    expect_dump(r->out, "seq_length", "4096");
    expect_dump(r->out, "global_batch_size", "1024");
    expect_dump(r->out, "micro_batch_size", "1");
    expect_dump(r->out, "moe_grouped_gemm", "True");
    expect_dump(r->out, "moe_router_force_load_balancing", "True");
    expect_dump(r->out, "use_distributed_optimizer", "True");
    expect_dump(r->out, "overlap_grad_reduce", "True");
    expect_dump(r->out, "bf16", "True");
    expect_dump(r->out, "moe_router_dtype", "fp32");
    expect_dump(r->out, "train_iters", "20");
    expect_dump(r->out, "log_interval", "1");
    expect_dump(r->out, "world_size", "16");
    ck_assert_ptr_nonnull(strstr(r->out, "using world size: 16, data-parallel size: 16, "
                                         "context-parallel size: 1, "));
    ck_assert_ptr_nonnull(strstr(r->out, "tensor-model-parallel size: 1, "));
    ck_assert_ptr_nonnull(strstr(r->out, "pipeline-model-parallel size: 1, "));
    /* iteration lines: 1..20, consumed samples, a clock that moves forward */
    n = iterations(r->out, !bridge, it, 64);
    ck_assert_int_eq(n, 20);
    for (i = 0; i < n; i++) {
        ck_assert_int_eq(it[i].iteration, i + 1);
        ck_assert_int_eq(it[i].of, 20);
        ck_assert_int_eq(it[i].consumed, (long long)(i + 1) * 1024);
        ck_assert_int_eq(it[i].gbs, 1024);
        ck_assert(it[i].elapsed_ms > 0 && it[i].tflops > 0 && it[i].lr > 0);
        ck_assert(it[i].have_loss && it[i].loss > 1 && it[i].loss < 20);
        ck_assert_int_eq(it[i].skipped, 0);
        ck_assert_int_eq(it[i].nan, 0);
        if (i)
            ck_assert_msg(it[i].clock > it[i - 1].clock, "the clock went back at %d", i + 1);
    }
    /* warm-up: iteration 1 is slower than the steady state; the loss falls */
    ck_assert(it[0].elapsed_ms > it[10].elapsed_ms);
    ck_assert(it[19].loss < it[0].loss);
    /* memory lines: DP rank 0 of the single (TP, PP, CP) group, once */
    if (bridge) {
        ck_assert_int_eq(count(r->out, "[Rank 0] (after 1 iterations) memory (GB) | "
                                       "mem-allocated-gigabytes: "),
                         1);
        ck_assert_int_eq(count(r->out, "mem-max-reserved-gigabytes: "), 1);
        ck_assert_int_eq(count(r->out, "\nStep Time : "), 20);
        ck_assert_ptr_nonnull(strstr(r->out, "MODEL_TFLOP/s/GPU\n"));
    } else {
        ck_assert_int_eq(count(r->out, "[Rank 0] (after 1 iterations) memory (MB) | allocated: "), 1);
        ck_assert_int_eq(count(r->out, "memory (MB)"), 1);
    }
    ck_assert_int_eq(count(r->out, "Theoretical memory footprints: weight and optimizer="), 1);
    /* the sim's own marked lines */
    ck_assert_ptr_nonnull(strstr(r->out, "\n[sim] simulated wall time: "));
    ck_assert_ptr_nonnull(strstr(r->out, " s (startup 180.000 s + 20 steps "));
    ck_assert_ptr_nonnull(strstr(r->out, "; GPU-hours: "));
    ck_assert_ptr_nonnull(strstr(r->out, "\n[sim] per-GPU peak memory (MiB): max "));
    ck_assert_ptr_nonnull(strstr(r->out, "\n[sim] moetune-sim config_id="));
    /* no capture, no fallback with this base config */
    ck_assert_ptr_null(strstr(r->out, "CUDA Graphs capture"));
    ck_assert_ptr_null(strstr(r->out, "Falling back"));
}

START_TEST(contract_mlm)
{
    cmd c = rendered("qwen3-30b-a3b-h100x16.cfg", NULL);
    run r = sim_run(&c, 0);
    check_normal_run(&r, 0);
    ck_assert_str_eq(r.err, "");
    done(&r);
    cmd_free(&c);
}
END_TEST

START_TEST(contract_bridge)
{
    cmd c = rendered("qwen3-30b-a3b-h100x16-bridge.cfg", NULL);
    run r = sim_run(&c, 0);
    check_normal_run(&r, 1);
    ck_assert_str_eq(r.err, "");
    done(&r);
    cmd_free(&c);
}
END_TEST

/* Both dialects describe the same run: same dump, same config id. */
START_TEST(dialects_agree)
{
    cmd a = rendered("qwen3-30b-a3b-h100x16.cfg", NULL);
    cmd b = rendered("qwen3-30b-a3b-h100x16-bridge.cfg", NULL);
    run ra = sim_run(&a, 0), rb = sim_run(&b, 0);
    const char *da = strstr(ra.out, "------------------------ arguments");
    const char *db = strstr(rb.out, "------------------------ arguments");
    const char *ea = strstr(ra.out, "end of arguments"), *eb = strstr(rb.out, "end of arguments");
    const char *ia = strstr(ra.out, "config_id="), *ib = strstr(rb.out, "config_id=");
    ck_assert(da && db && ea && eb && ia && ib);
    ck_assert_msg(ea - da == eb - db && !memcmp(da, db, (size_t)(ea - da)),
                  "the two dialects' argument dumps differ");
    ck_assert(!strncmp(ia, ib, 26));
    done(&ra), done(&rb);
    cmd_free(&a), cmd_free(&b);
}
END_TEST

/* The canonical tuned recipe: flex + HybridEP, EP overlap, TE graphs. */
static const char *const recipe[] = {
    "moe_token_dispatcher_type=flex",
    "moe_flex_dispatcher_backend=hybridep",
    "moe_flex_dispatcher_num_sms=32",
    "moe_permute_fusion=true",
    "overlap_moe_expert_parallel_comm=true",
    "cuda_graph_impl=transformer_engine",
    "cuda_graph_modules=moe_router,moe_preprocess",
    NULL,
};

START_TEST(recipe_capture_step)
{
    cmd c = rendered("qwen3-30b-a3b-h100x16.cfg", recipe);
    run r = sim_run(&c, 0);
    iter_line it[32];
    const char *cap, *it3, *it4;
    int n;
    ck_assert_msg(r.exited && r.code == 0, "exit %d\n%s", r.code, r.err);
    expect_dump(r.out, "moe_token_dispatcher_type", "flex");
    expect_dump(r.out, "moe_flex_dispatcher_backend", "hybridep");
    expect_dump(r.out, "moe_flex_dispatcher_num_sms", "32");
    expect_dump(r.out, "overlap_moe_expert_parallel_comm", "True");
    expect_dump(r.out, "cuda_graph_impl", "transformer_engine");
    expect_dump(r.out, "cuda_graph_modules", "['moe_router', 'moe_preprocess']");
    /* capture at warm-up (3) + 1: between iteration 3's and 4's lines */
    ck_assert_int_eq(count(r.out, "Start CUDA Graphs capture..."), 1);
    ck_assert_int_eq(count(r.out, "Time spent in CUDA Graphs capture on rank 0: "), 1);
    cap = strstr(r.out, "Start CUDA Graphs capture...");
    it3 = strstr(r.out, "] iteration        3/");
    it4 = strstr(r.out, "] iteration        4/");
    ck_assert(cap && it3 && it4 && it3 < cap && cap < it4);
    n = iterations(r.out, 1, it, 32);
    ck_assert_int_eq(n, 20);
    ck_assert_msg(it[3].elapsed_ms > it[4].elapsed_ms * 1.02, "the capture step does not spike");
    done(&r);
    cmd_free(&c);
}
END_TEST

/* ---- failures ------------------------------------------------------------------------- */

START_TEST(unknown_flag_is_argparse_error)
{
    cmd c = rendered("qwen3-30b-a3b-h100x16.cfg", NULL);
    static const char *const extra[] = {"--foo", NULL};
    run r;
    add_args(&c, extra);
    r = sim_run(&c, 0);
    ck_assert(r.exited);
    ck_assert_int_eq(r.code, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "usage: pretrain_gpt.py [-h] "));
    ck_assert_ptr_nonnull(strstr(r.err, "pretrain_gpt.py: error: unrecognized arguments: --foo\n"));
    ck_assert_str_eq(r.out, "");
    done(&r);
    cmd_free(&c);
}
END_TEST

START_TEST(bad_values_are_errors)
{
    cmd c = rendered("qwen3-30b-a3b-h100x16.cfg", NULL);
    cmd b = rendered("qwen3-30b-a3b-h100x16-bridge.cfg", NULL);
    static const char *const unknown_key[] = {"model.foo=1", NULL};
    run r;
    set_flag(&c, "--num-layers", "abc");
    r = sim_run(&c, 0);
    ck_assert_int_eq(r.code, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "pretrain_gpt.py: error: argument --num-layers: invalid int "
                                        "value: 'abc'"));
    ck_assert_str_eq(r.out, "");
    done(&r);
    add_args(&b, unknown_key);
    r = sim_run(&b, 0);
    ck_assert_int_eq(r.code, 1);
    ck_assert_ptr_nonnull(strstr(r.err, "Could not override 'model.foo'. Key 'foo' not in "
                                        "'GPTModelProvider'"));
    ck_assert_str_eq(r.out, "");
    done(&r);
    cmd_free(&c), cmd_free(&b);
}
END_TEST

START_TEST(illegal_config_fails_before_iterations)
{
    cmd c = rendered("qwen3-30b-a3b-h100x16.cfg", NULL);
    run r;
    set_flag(&c, "--expert-model-parallel-size", "5");
    r = sim_run(&c, 0);
    ck_assert(r.exited);
    ck_assert_int_eq(r.code, 1);
    ck_assert_ptr_nonnull(strstr(r.err, "Traceback (most recent call last):"));
    ck_assert_ptr_nonnull(strstr(r.err, "AssertionError: "));
    ck_assert_ptr_null(strstr(r.out, " iteration "));
    done(&r);
    cmd_free(&c);
}
END_TEST

START_TEST(oom_on_the_hottest_rank)
{
    cmd c = rendered("qwen3-30b-a3b-h100x16.cfg", NULL);
    run r;
    set_flag(&c, "--micro-batch-size", "16");
    r = sim_run(&c, 0);
    ck_assert(r.exited);
    ck_assert_int_eq(r.code, 1);
    ck_assert_ptr_nonnull(strstr(r.err, "torch.OutOfMemoryError: CUDA out of memory. Tried to "
                                        "allocate "));
    ck_assert_ptr_nonnull(strstr(r.err, " has a total capacity of "));
    ck_assert_ptr_nonnull(strstr(r.err, " MiB is free."));
    ck_assert_ptr_null(strstr(r.out, "] iteration "));
    /* the peak the NVML sampler saw: the GPU's capacity */
    ck_assert_ptr_nonnull(strstr(r.out, "[sim] per-GPU peak memory (MiB): max "));
    ck_assert_ptr_nonnull(strstr(r.out, "[sim] simulated wall time: "));
    done(&r);
    cmd_free(&c);
}
END_TEST

START_TEST(nan_injection)
{
    cmd c = rendered("qwen3-30b-a3b-h100x16.cfg", NULL);
    static const char *const inj[] = {"--sim-inject", "nan", "--sim-inject-step", "3", NULL};
    iter_line it[32];
    run r;
    int n;
    add_args(&c, inj);
    r = sim_run(&c, 0);
    ck_assert_int_eq(r.code, 1);
    n = iterations(r.out, 1, it, 32);
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(it[1].nan, 0);
    ck_assert_int_eq(it[2].nan, 1);
    ck_assert_ptr_nonnull(strstr(r.out, "lm loss: NAN |"));
    ck_assert_ptr_nonnull(strstr(r.err, "RuntimeError: Rank 0, node node0, device 0, iteration 3: "
                                        "Unexpected result nan"));
    done(&r);
    cmd_free(&c);
}
END_TEST

START_TEST(skip_injection)
{
    cmd c = rendered("qwen3-30b-a3b-h100x16.cfg", NULL);
    static const char *const inj[] = {"--sim-inject", "skip", "--sim-inject-step", "5", NULL};
    iter_line it[32];
    run r;
    int n;
    add_args(&c, inj);
    r = sim_run(&c, 0);
    ck_assert_int_eq(r.code, 0);
    n = iterations(r.out, 1, it, 32);
    ck_assert_int_eq(n, 20);
    ck_assert_int_eq(it[3].skipped, 0);
    ck_assert(it[3].have_loss);
    ck_assert_int_eq(it[4].skipped, 1);
    ck_assert(!it[4].have_loss); /* Megatron prints no loss for a skipped interval */
    ck_assert_ptr_nonnull(strstr(r.out, "loss scale: 0.5 |"));
    done(&r);
    cmd_free(&c);
}
END_TEST

START_TEST(nccl_injection)
{
    cmd c = rendered("qwen3-30b-a3b-h100x16.cfg", NULL);
    static const char *const inj[] = {"--sim-inject", "nccl", "--sim-inject-step", "3",
                                      "--sim-inject-rank", "5", NULL};
    iter_line it[32];
    run r;
    add_args(&c, inj);
    r = sim_run(&c, 0);
    ck_assert(r.exited);
    ck_assert_int_eq(r.code, 1);
    ck_assert_int_eq(iterations(r.out, 1, it, 32), 2);
    ck_assert_ptr_nonnull(strstr(r.err, "torch.distributed.DistBackendError: NCCL error in: "
                                        "../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
                                        "unhandled system error"));
    ck_assert_ptr_nonnull(strstr(r.err, "ncclSystemError: System call (e.g. socket, malloc) or "
                                        "external library call failed or device error."));
    ck_assert_ptr_nonnull(strstr(r.err, "[rank5]"));
    ck_assert_ptr_nonnull(strstr(r.out, "[Rank 0] Watchdog caught collective operation timeout"));
    done(&r);
    cmd_free(&c);
}
END_TEST

START_TEST(hang_injection_blocks)
{
    cmd c = rendered("qwen3-30b-a3b-h100x16.cfg", NULL);
    static const char *const inj[] = {"--sim-inject", "hang", "--sim-inject-step", "4", NULL};
    iter_line it[32];
    run r;
    add_args(&c, inj);
    r = sim_run(&c, 700);
    ck_assert_msg(r.killed, "the hung run exited by itself (status %d)", r.status);
    ck_assert_int_eq(iterations(r.out, 1, it, 32), 3);
    ck_assert_ptr_null(strstr(r.out, "[sim] simulated wall time"));
    done(&r);
    cmd_free(&c);
}
END_TEST

START_TEST(crash_injection)
{
    cmd c = rendered("qwen3-30b-a3b-h100x16.cfg", NULL);
    static const char *const inj[] = {"--sim-inject", "crash", "--sim-inject-step", "2", NULL};
    run r;
    add_args(&c, inj);
    r = sim_run(&c, 0);
    ck_assert_msg(r.signaled && r.sig == SIGSEGV, "status %d", r.status);
    ck_assert_ptr_nonnull(strstr(r.err, "Segmentation fault"));
    done(&r);
    cmd_free(&c);
}
END_TEST

/* ---- noise: reruns repeat, replicates differ, the loss ignores both ---------------- */

START_TEST(determinism_and_replicates)
{
    cmd a = rendered("qwen3-30b-a3b-h100x16.cfg", NULL);
    cmd b = rendered("qwen3-30b-a3b-h100x16.cfg", NULL);
    cmd p = rendered("qwen3-30b-a3b-h100x16.cfg", NULL);
    static const char *const rep1[] = {"--sim-replicate", "1", NULL};
    static const char *const perf[] = {"--moe-permute-fusion", NULL};
    iter_line x[32], y[32], z[32];
    run r1, r2, r3, r4;
    int i, differ = 0;
    r1 = sim_run(&a, 0);
    r2 = sim_run(&a, 0);
    ck_assert_int_eq(r1.code, 0);
    ck_assert_msg(!strcmp(r1.out, r2.out), "same seed and replicate, different output");
    add_args(&b, rep1);
    r3 = sim_run(&b, 0);
    ck_assert_int_eq(r3.code, 0);
    ck_assert_int_eq(iterations(r1.out, 1, x, 32), 20);
    ck_assert_int_eq(iterations(r3.out, 1, y, 32), 20);
    for (i = 0; i < 20; i++) {
        differ += x[i].elapsed_ms != y[i].elapsed_ms;
        /* the loss curve depends on the training seed only */
        ck_assert_msg(x[i].loss == y[i].loss, "replicate changed the loss at %d", i + 1);
    }
    ck_assert_int_ge(differ, 19);
    /* a performance knob changes times, not the loss */
    add_args(&p, perf);
    r4 = sim_run(&p, 0);
    ck_assert_int_eq(r4.code, 0);
    ck_assert_int_eq(iterations(r4.out, 1, z, 32), 20);
    for (i = 0; i < 20; i++)
        ck_assert_msg(x[i].loss == z[i].loss, "permute fusion changed the loss at %d", i + 1);
    done(&r1), done(&r2), done(&r3), done(&r4);
    cmd_free(&a), cmd_free(&b), cmd_free(&p);
}
END_TEST

/* ---- the sim's own outputs ------------------------------------------------------------------ */

static char *temp_dir(const char *tag)
{
    char *d = malloc(64);
    snprintf(d, 64, "/tmp/moetune-sim-%s-XXXXXX", tag);
    ck_assert_ptr_nonnull(mkdtemp(d));
    return d;
}

static void rm_tree(const char *dir, const char *file)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    unlink(path);
    rmdir(dir);
}

START_TEST(profile_writes_trace)
{
    cmd c = rendered("qwen3-30b-a3b-h100x16.cfg", recipe);
    cmd base = rendered("qwen3-30b-a3b-h100x16.cfg", NULL);
    char *dir = temp_dir("trace"), *dir2 = temp_dir("trace2"), tb[128], tb2[128], want[256];
    char *trace, *path;
    const char *prof[] = {"--profile", "--use-pytorch-profiler", "--profile-step-start", "10",
                          "--profile-step-end", "12", "--tensorboard-dir", tb, NULL};
    const char *prof2[] = {"--profile", "--use-pytorch-profiler", "--tensorboard-dir", tb2, NULL};
    run r;
    snprintf(tb, sizeof tb, "%s/tb", dir);
    snprintf(tb2, sizeof tb2, "%s/tb", dir2);
    add_args(&c, prof);
    r = sim_run(&c, 0);
    ck_assert_msg(r.code == 0, "%s", r.err);
    snprintf(want, sizeof want, "[sim] wrote trace %s/trace_rank0.json\n", tb);
    ck_assert_ptr_nonnull(strstr(r.out, want));
    path = malloc(strlen(tb) + 32);
    sprintf(path, "%s/trace_rank0.json", tb);
    trace = tk_slurp(path);
    ck_assert_ptr_nonnull(trace);
    ck_assert_msg(json_ok(trace), "the trace is not valid JSON");
    ck_assert_ptr_nonnull(strstr(trace, "\"traceEvents\""));
    ck_assert_ptr_nonnull(strstr(trace, "ProfilerStep#10"));
    ck_assert_ptr_nonnull(strstr(trace, "ProfilerStep#11"));
    ck_assert_ptr_null(strstr(trace, "ProfilerStep#12"));
    ck_assert_ptr_nonnull(strstr(trace, "hybrid_ep::dispatch_kernel<"));
    ck_assert_ptr_nonnull(strstr(trace, "hybrid_ep::combine_kernel<"));
    ck_assert_ptr_nonnull(strstr(trace, "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"));
    ck_assert_ptr_nonnull(strstr(trace, "\"name\": \"flash_fwd_kernel\""));
    ck_assert_ptr_nonnull(strstr(trace, "flash_bwd"));
    ck_assert_ptr_nonnull(strstr(trace, "\"cat\": \"cuda_runtime\", \"name\": \"cudaGraphLaunch\""));
    ck_assert_ptr_nonnull(strstr(trace, "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL"));
    ck_assert_ptr_nonnull(strstr(trace, "\"tid\": 20,"));
    ck_assert_ptr_null(strstr(trace, "ncclDevKernel_SendRecv"));
    ck_assert_int_lt(count(trace, "\"ph\": \"X\""), 10000);
    free(trace);
    free(path);
    done(&r);
    rm_tree(tb, "trace_rank0.json");
    rmdir(dir);

    /* the untuned base: NCCL all-to-all, no graphs, every kernel launched */
    add_args(&base, prof2);
    r = sim_run(&base, 0);
    ck_assert_msg(r.code == 0, "%s", r.err);
    path = malloc(strlen(tb2) + 32);
    sprintf(path, "%s/trace_rank0.json", tb2);
    trace = tk_slurp(path);
    ck_assert_ptr_nonnull(trace);
    ck_assert(json_ok(trace));
    ck_assert_ptr_nonnull(strstr(trace, "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"));
    ck_assert_ptr_null(strstr(trace, "cudaGraphLaunch"));
    ck_assert_ptr_nonnull(strstr(trace, "\"name\": \"cudaLaunchKernel\""));
    ck_assert_ptr_null(strstr(trace, "hybrid_ep::"));
    free(trace);
    free(path);
    done(&r);
    rm_tree(tb2, "trace_rank0.json");
    rmdir(dir2);
    free(dir), free(dir2);
    cmd_free(&c), cmd_free(&base);
}
END_TEST

START_TEST(memory_file_per_gpu)
{
    cmd c = rendered("qwen3-30b-a3b-h100x16.cfg", NULL);
    char *dir = temp_dir("mem"), path[128], *text, line[128];
    const char *extra[] = {"--sim-memory-file", path, NULL};
    const char *p, *marked;
    double top = 0, v, shown;
    int i, n = 0;
    run r;
    snprintf(path, sizeof path, "%s/peaks.txt", dir);
    add_args(&c, extra);
    r = sim_run(&c, 0);
    ck_assert_int_eq(r.code, 0);
    text = tk_slurp(path);
    ck_assert_ptr_nonnull(text);
    for (i = 0; i < 16; i++) {
        snprintf(line, sizeof line, "rank=%d host=node%d gpu=%d peak_mib=", i, i / 8, i % 8);
        p = strstr(text, line);
        ck_assert_msg(p != NULL, "memory file lacks %s", line);
        v = strtod(p + strlen(line), NULL);
        ck_assert(v > 0);
        if (v > top)
            top = v;
        n++;
    }
    ck_assert_int_eq(count(text, "\n"), 16);
    marked = strstr(r.out, "[sim] per-GPU peak memory (MiB): max ");
    ck_assert_ptr_nonnull(marked);
    shown = strtod(marked + strlen("[sim] per-GPU peak memory (MiB): max "), NULL);
    ck_assert_msg(shown > top - 0.1 && shown < top + 0.1, "marked line %.1f, file max %.1f", shown,
                  top);
    free(text);
    done(&r);
    rm_tree(dir, "peaks.txt");
    free(dir);
    cmd_free(&c);
}
END_TEST

START_TEST(cluster_from_environment)
{
    cmd c = rendered("qwen3-30b-a3b-h100x16.cfg", NULL);
    cmd e;
    run r;
    size_t i;
    /* flags win over the environment */
    mt_strlist_push(&c.env, "MOETUNE_SIM_NODES=4");
    r = sim_run(&c, 0);
    ck_assert_int_eq(r.code, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "using world size: 16,"));
    done(&r);
    /* without the flags: MOETUNE_SIM_* and WORLD_SIZE */
    memset(&e, 0, sizeof e);
    for (i = 0; i < c.argv.n; i++) {
        if (!strncmp(c.argv.v[i], "--sim-", 6)) {
            i++;
            continue;
        }
        mt_strlist_push(&e.argv, c.argv.v[i]);
    }
    mt_strlist_push(&e.env, "WORLD_SIZE=32");
    mt_strlist_push(&e.env, "MOETUNE_SIM_GPU=H200");
    r = sim_run(&e, 0);
    ck_assert_msg(r.code == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "using world size: 32, data-parallel size: 32,"));
    ck_assert_ptr_nonnull(strstr(r.out, " gpu=H200 nodes=4 gpus_per_node=8 world=32 "));
    done(&r);
    cmd_free(&c), cmd_free(&e);
}
END_TEST

START_TEST(stack_file)
{
    cmd good = rendered("qwen3-30b-a3b-h100x16.cfg", NULL);
    cmd bad = rendered("qwen3-30b-a3b-h100x16.cfg", NULL);
    char *gp = tk_write_temp("stack", "# a stack\ncommit = abc123\npdl = 1\nslowdown = 1.25\n");
    char *bp = tk_write_temp("stack", "commit = abc123\nthis is not a setting\n");
    const char *g[] = {"--sim-stack", gp, NULL}, *b[] = {"--sim-stack", bp, NULL};
    char want[512];
    iter_line x[32], y[32];
    cmd plain = rendered("qwen3-30b-a3b-h100x16.cfg", NULL);
    run r, rp;
    add_args(&good, g);
    add_args(&bad, b);
    r = sim_run(&good, 0);
    rp = sim_run(&plain, 0);
    ck_assert_msg(r.code == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, " stack=abc123 "));
    ck_assert_int_eq(iterations(r.out, 1, x, 32), 20);
    ck_assert_int_eq(iterations(rp.out, 1, y, 32), 20);
    /* a slower stack is slower (the model applies the slowdown) */
    ck_assert(x[15].elapsed_ms > y[15].elapsed_ms * 1.1);
    done(&r), done(&rp);
    r = sim_run(&bad, 0);
    ck_assert_int_eq(r.code, 2);
    snprintf(want, sizeof want, "%s:2: ", bp);
    ck_assert_msg(strstr(r.err, want) != NULL, "no file:line in: %s", r.err);
    ck_assert_str_eq(r.out, "");
    done(&r);
    unlink(gp), unlink(bp);
    free(gp), free(bp);
    cmd_free(&good), cmd_free(&bad), cmd_free(&plain);
}
END_TEST

/* ---- every value moetune renders is accepted ------------------------------------------ */

/* Lower-case words, Python's list and None spellings folded (as the plugins
 * compare a config value with the arguments dump). */
static void normalize(const char *in, char *out, size_t n)
{
    size_t o = 0;
    int gap = 0;
    for (; *in && o + 2 < n; in++) {
        if (strchr(" []'\",", *in)) {
            gap = o > 0;
            continue;
        }
        if (gap)
            out[o++] = ' ';
        gap = 0;
        out[o++] = (char)tolower((unsigned char)*in);
    }
    out[o] = '\0';
    if (!strcmp(out, "none") || !strcmp(out, "0") || !strcmp(out, "false"))
        out[0] = '\0';
}

/* The argparse dest the dump prints a knob under. */
static const char *dest(const char *knob)
{
    if (!strcmp(knob, "fp8_format"))
        return "fp8";
    if (!strcmp(knob, "fp4_format"))
        return "fp4";
    return knob;
}

/* Each contract's base config with one space value changed at a time:
 * every legal rendering parses, in both dialects, and (Megatron-LM) the
 * dump shows the value. */
START_TEST(every_space_value_parses)
{
    static const char *const names[] = {
        "qwen3-30b-a3b-h100x16.cfg", "qwen3-30b-a3b-h100x16-bridge.cfg",
        "deepseek-v3-gb200x256.cfg", "deepseek-v3-gb200x256-bridge.cfg",
        "qwen3-30b-a3b-gb300x8.cfg", "qwen3-30b-a3b-gb300x8-bridge.cfg"};
    size_t ni, ki;
    int runs = 0;
    for (ni = 0; ni < sizeof names / sizeof names[0]; ni++) {
        tk *probe = tk_open(names[ni]);
        const char *knob, *values;
        int bridge = strstr(names[ni], "bridge") != NULL;
        for (ki = 0; mt_kv_entry(probe->contract->space, ki, &knob, &values) == 0; ki++) {
            const char *p = values;
            if (!strncmp(knob, "env.", 4) || !strncmp(knob, "launcher.", 9))
                continue;
            for (;;) {
                size_t len = strcspn(p, "|\n");
                char assign[512], val[256];
                tk *t = tk_open(names[ni]);
                mt_violations vs = {0};
                snprintf(val, sizeof val, "%.*s", (int)len, p);
                snprintf(assign, sizeof assign, "%s=%s", knob, val);
                tk_set(t, assign);
                mt_legality(t->reg, t->contract, t->cfg, &vs, t->diag);
                /* Bridge refuses a precision with no recipe name (e4m3 alone):
                 * a render error, nothing to launch */
                if (vs.n == 0 && bridge && !strcmp(assign, "fp8_format=e4m3")) {
                    mt_rendered ro;
                    mt_rendered_init(&ro);
                    ck_assert_int_ne(mt_render(t->reg, t->contract, t->cfg, MT_DIALECT_BRIDGE,
                                               &ro, t->diag), 0);
                    mt_rendered_clear(&ro);
                } else if (vs.n == 0) {
                    cmd c = render_cfg(t);
                    size_t i;
                    run r;
                    /* two iterations are enough to parse and start */
                    for (i = 0; i < c.argv.n; i++) {
                        if (!strcmp(c.argv.v[i], "--train-iters") && i + 1 < c.argv.n) {
                            free(c.argv.v[i + 1]);
                            c.argv.v[i + 1] = strdup("2");
                        } else if (!strncmp(c.argv.v[i], "train.train_iters=", 18)) {
                            free(c.argv.v[i]);
                            c.argv.v[i] = strdup("train.train_iters=2");
                        }
                    }
                    r = sim_run(&c, 0);
                    runs++;
                    ck_assert_msg(r.exited && (r.code == 0 || r.code == 1),
                                  "%s %s: exit %d\n%s", names[ni], assign, r.code, r.err);
                    ck_assert_msg(!strstr(r.err, "unrecognized arguments") &&
                                      !strstr(r.err, "Could not override") &&
                                      !strstr(r.err, ": error: argument"),
                                  "%s %s: not accepted\n%s", names[ni], assign, r.err);
                    if (r.code == 0 && !bridge) {
                        const char *got = dumped(r.out, dest(knob));
                        char a[256], b[256];
                        ck_assert_msg(got != NULL, "%s: dump lacks %s", names[ni], dest(knob));
                        normalize(val, a, sizeof a);
                        normalize(got, b, sizeof b);
                        ck_assert_msg(!strcmp(a, b), "%s %s: dump shows '%s'", names[ni], assign,
                                      got);
                    }
                    done(&r);
                    cmd_free(&c);
                }
                mt_violations_clear(&vs);
                tk_close(&t);
                if (!p[len])
                    break;
                p += len + 1;
            }
        }
        tk_close(&probe);
    }
    ck_assert_int_gt(runs, 30);
}
END_TEST


/* ---- one process per rank -------------------------------------------------------- */

static const char *const pp2[] = {"pipeline_model_parallel_size=2", "expert_model_parallel_size=8",
                                  NULL};

/* c run as rank `rank` of world (RANK / WORLD_SIZE, or the Slurm pair). */
static run rank_run(const cmd *base, int rank, int world, int slurm, const char *memfile,
                    int kill_after_ms)
{
    cmd c;
    char v[3][128];
    size_t i;
    run r;
    memset(&c, 0, sizeof c);
    for (i = 0; i < base->argv.n; i++)
        mt_strlist_push(&c.argv, base->argv.v[i]);
    for (i = 0; i < base->env.n; i++)
        mt_strlist_push(&c.env, base->env.v[i]);
    snprintf(v[0], sizeof v[0], "%s=%d", slurm ? "SLURM_PROCID" : "RANK", rank);
    snprintf(v[1], sizeof v[1], "%s=%d", slurm ? "SLURM_NTASKS" : "WORLD_SIZE", world);
    snprintf(v[2], sizeof v[2], "MOETUNE_SIM_MEMORY_FILE=%s", memfile ? memfile : "");
    mt_strlist_push(&c.env, v[0]);
    mt_strlist_push(&c.env, v[1]);
    if (memfile)
        mt_strlist_push(&c.env, v[2]);
    r = sim_run(&c, kill_after_ms);
    cmd_free(&c);
    return r;
}

/* The lines of text that contain needle, in order, joined. */
static char *lines_with(const char *text, const char *needle)
{
    size_t cap = strlen(text) + 1, n = 0;
    char *out = calloc(1, cap);
    const char *p = text;
    while (*p) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p + 1) : strlen(p);
        if (memmem(p, len, needle, strlen(needle))) {
            memcpy(out + n, p, len);
            n += len;
        }
        p += len;
    }
    out[n] = '\0';
    return out;
}

START_TEST(per_rank_roles_keep_the_one_process_figures)
{
    cmd c = rendered("qwen3-30b-a3b-h100x16.cfg", pp2);
    char *dir = temp_dir("ranks"), one_mem[160], rank_mem[160];
    char *one_iters, *one_memlines, *all_memlines = calloc(1, 1), *ft1, *ftr;
    run one;
    int r;
    snprintf(one_mem, sizeof one_mem, "%s/one.txt", dir);
    snprintf(rank_mem, sizeof rank_mem, "%s/ranks.txt", dir);
    {
        cmd o;
        char e[200];
        memset(&o, 0, sizeof o);
        for (size_t i = 0; i < c.argv.n; i++)
            mt_strlist_push(&o.argv, c.argv.v[i]);
        for (size_t i = 0; i < c.env.n; i++)
            mt_strlist_push(&o.env, c.env.v[i]);
        snprintf(e, sizeof e, "MOETUNE_SIM_MEMORY_FILE=%s", one_mem);
        mt_strlist_push(&o.env, e);
        one = sim_run(&o, 0);
        cmd_free(&o);
    }
    ck_assert_int_eq(one.code, 0);
    one_iters = lines_with(one.out, "] iteration ");
    one_memlines = lines_with(one.out, "[Rank ");
    ck_assert_int_eq(count(one_memlines, "\n"), 2); /* DP rank 0 of each of the two stages */
    for (r = 0; r < 16; r++) {
        run x = rank_run(&c, r, 16, r % 2, rank_mem, 0);
        char *it = lines_with(x.out, "] iteration "), *mem = lines_with(x.out, "[Rank ");
        ck_assert_msg(x.code == 0, "rank %d: exit %d: %s", r, x.code, x.err);
        if (r == 15)
            ck_assert_str_eq(it, one_iters); /* the last rank logs, the same figures */
        else
            ck_assert_msg(!*it, "rank %d printed iteration lines", r);
        /* memory lines: data-parallel rank 0 of each stage (0 and 8), its own */
        ck_assert_int_eq(count(mem, "\n"), r % 8 == 0 ? 1 : 0);
        if (r % 8 == 0) {
            char want[32];
            snprintf(want, sizeof want, "[Rank %d] ", r);
            ck_assert_ptr_nonnull(strstr(mem, want));
        }
        all_memlines = realloc(all_memlines, strlen(all_memlines) + strlen(mem) + 1);
        strcat(all_memlines, mem);
        ck_assert_int_eq(count(x.out, "-------------------- end of arguments"), r == 0);
        ck_assert_int_eq(count(x.out, "using world size: 16"), r == 0);
        ck_assert_int_eq(count(x.out, "[sim] simulated wall time: "), r == 0);
        ck_assert_int_eq(count(x.out, "[sim] GPU peak memory (MiB): "), 1);
        free(it), free(mem);
        done(&x);
    }
    ck_assert_str_eq(all_memlines, one_memlines);
    /* every rank reported its own peak: the one-process file's figures */
    ft1 = tk_slurp(one_mem);
    ftr = tk_slurp(rank_mem);
    ck_assert_int_eq(count(ftr, "\n"), 16);
    for (r = 0; r < 16; r++) {
        char key[64];
        const char *a, *b;
        snprintf(key, sizeof key, "rank=%d host=", r);
        a = strstr(ft1, key), b = strstr(ftr, key);
        ck_assert_msg(a && b, "rank %d missing from a memory file", r);
        ck_assert_msg(strtod(strstr(a, "peak_mib=") + 9, NULL) ==
                          strtod(strstr(b, "peak_mib=") + 9, NULL),
                      "rank %d: peaks differ", r);
    }
    free(ft1), free(ftr), free(one_iters), free(one_memlines), free(all_memlines);
    done(&one);
    unlink(one_mem);
    rm_tree(dir, "ranks.txt");
    free(dir);
    cmd_free(&c);
}
END_TEST

START_TEST(per_rank_oom_only_where_memory_runs_out)
{
    /* first stage past an H200's memory, second stage within it */
    cmd c = rendered("qwen3-30b-a3b-h100x16.cfg", pp2);
    run one, hot, cold, lastr;
    set_flag(&c, "--micro-batch-size", "8");
    set_flag(&c, "--sim-gpu", "H200");
    one = sim_run(&c, 0);
    ck_assert_int_eq(one.code, 1);
    ck_assert_ptr_nonnull(strstr(one.err, "torch.OutOfMemoryError"));
    hot = rank_run(&c, 3, 16, 0, NULL, 0);
    ck_assert_int_eq(hot.code, 1);
    ck_assert_ptr_nonnull(strstr(hot.err, "torch.OutOfMemoryError: CUDA out of memory."));
    ck_assert_ptr_nonnull(strstr(hot.err, "GPU 3 has a total capacity"));
    ck_assert_ptr_nonnull(strstr(hot.out, "[sim] GPU peak memory (MiB): "));
    /* the second stage does not run out: it waits in a collective */
    cold = rank_run(&c, 8, 16, 0, NULL, 400);
    ck_assert_msg(cold.killed, "rank 8 did not hang: exit %d", cold.code);
    ck_assert_ptr_null(strstr(cold.err, "OutOfMemoryError"));
    lastr = rank_run(&c, 15, 16, 1, NULL, 400);
    ck_assert(lastr.killed);
    ck_assert_ptr_null(strstr(lastr.out, "] iteration "));
    done(&one), done(&hot), done(&cold), done(&lastr);
    cmd_free(&c);
}
END_TEST

START_TEST(per_rank_nccl_error_from_one_rank)
{
    cmd c = rendered("qwen3-30b-a3b-h100x16.cfg", NULL);
    static const char *const inj[] = {"--sim-inject", "nccl", "--sim-inject-step", "3",
                                      "--sim-inject-rank", "5", NULL};
    run bad, peer, lastr;
    add_args(&c, inj);
    bad = rank_run(&c, 5, 16, 0, NULL, 0);
    ck_assert_int_eq(bad.code, 1);
    ck_assert_ptr_nonnull(strstr(bad.err, "torch.distributed.DistBackendError: NCCL error in: "));
    ck_assert_ptr_nonnull(strstr(bad.err, "[rank5]"));
    peer = rank_run(&c, 0, 16, 0, NULL, 400);
    ck_assert(peer.killed);
    ck_assert_ptr_null(strstr(peer.err, "NCCL error"));
    lastr = rank_run(&c, 15, 16, 0, NULL, 400);
    ck_assert(lastr.killed);
    /* the last rank logged the iterations before the failure, then waited */
    ck_assert_int_eq(count(lastr.out, "] iteration "), 2);
    done(&bad), done(&peer), done(&lastr);
    cmd_free(&c);
}
END_TEST

START_TEST(per_rank_environment_errors_are_named)
{
    cmd c = rendered("qwen3-30b-a3b-h100x16.cfg", NULL);
    run r = rank_run(&c, 3, 8, 0, NULL, 0);
    ck_assert_int_eq(r.code, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "started as rank 3 of 8 (RANK, WORLD_SIZE), but the "
                                        "simulated cluster has 16 GPUs (2 nodes x 8)"));
    done(&r);
    r = rank_run(&c, 16, 16, 1, NULL, 0);
    ck_assert_int_eq(r.code, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "SLURM_PROCID=16 is not below SLURM_NTASKS=16"));
    done(&r);
    /* a world of one is the one-process mode */
    r = rank_run(&c, 0, 1, 0, NULL, 0);
    ck_assert_int_eq(r.code, 0);
    ck_assert_int_eq(count(r.out, "[Rank "), 1);
    ck_assert_ptr_nonnull(strstr(r.out, "[sim] per-GPU peak memory (MiB): max "));
    done(&r);
    cmd_free(&c);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("sim_run");
    TCase *t = tcase_create("runs");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, contract_mlm);
    tcase_add_test(t, contract_bridge);
    tcase_add_test(t, dialects_agree);
    tcase_add_test(t, recipe_capture_step);
    tcase_add_test(t, unknown_flag_is_argparse_error);
    tcase_add_test(t, bad_values_are_errors);
    tcase_add_test(t, illegal_config_fails_before_iterations);
    tcase_add_test(t, oom_on_the_hottest_rank);
    tcase_add_test(t, nan_injection);
    tcase_add_test(t, skip_injection);
    tcase_add_test(t, nccl_injection);
    tcase_add_test(t, hang_injection_blocks);
    tcase_add_test(t, crash_injection);
    tcase_add_test(t, determinism_and_replicates);
    tcase_add_test(t, profile_writes_trace);
    tcase_add_test(t, memory_file_per_gpu);
    tcase_add_test(t, cluster_from_environment);
    tcase_add_test(t, stack_file);
    tcase_add_test(t, every_space_value_parses);
    tcase_add_test(t, per_rank_roles_keep_the_one_process_figures);
    tcase_add_test(t, per_rank_oom_only_where_memory_runs_out);
    tcase_add_test(t, per_rank_nccl_error_from_one_rank);
    tcase_add_test(t, per_rank_environment_errors_are_named);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
