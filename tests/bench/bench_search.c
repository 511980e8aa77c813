/*
 * bench_search.c - the search benchmark: how close each strategy's
 * recommendation comes to the best config of the declared space, and at
 * what cost (prints tables; never fails on the figures).
 *
 *   bench_search [CONTRACTS_DIR] [--seeds N] [--grid-seeds G] [--only SUBSTRING] [--jobs N]
 *                [--contract-budget] [--no-tpe]
 *
 * For every contract of CONTRACTS_DIR (default: examples/contracts) and
 * seeds 1..N (default 20), in process on the model executor (the sim's
 * model with the sim's noise), each tune in its own temporary directory:
 *   ofat    no budget: a full tune (--contract-budget: the contract's own,
 *           which stops some seeds early: the engine keeps validation's
 *           reserve);
 *   grid    no budget: the whole declared space (seeds 1..G, default 5:
 *           grid is deterministic apart from the noise);
 *   random  at that seed's ofat GPU-hours;
 *   tpe     Optuna's TPE sampler at that seed's ofat GPU-hours
 *           (tests/tpe_harness.py, python3-optuna, through `moetune
 *           model-screen`: the same model-executor job and accounting).
 * Each recommendation is evaluated noise-free (mt_optimum_tflops) as a
 * share of the noise-free optimum of the declared space (mt_optimum_find).
 * Wrong accepts: accepted changes whose config is slower noise-free than the
 * one it replaced (ofat: every accepted change; grid, random, tpe: their one
 * change, the baseline -> the recommendation, when they make it).
 *
 * Twins: a contract whose declared space, base config, optimum and count of
 * fitting configs equal an earlier contract's (a -bridge contract and its
 * Megatron-LM twin: the model executor reads neither the dialect nor the
 * launch) runs ofat on seeds 1..TWIN_CHECK only; when those tunes match the
 * twin's exactly (recipe, share, GPU-hours, runs, accepts), its tables are
 * the twin's, labelled so, and nothing else of it runs; when they do not,
 * every strategy runs on it as on any other contract.
 *
 * Plugins: the built-ins only (a contract's launch.plugin_path is not
 * loaded).  Tunes run in a pool of forked workers (--jobs, default: the CPUs), TPE
 * in one background process per contract.
 *
 * Environment: MT_PYTHON (default /usr/bin/python3 when present, else
 * python3 on PATH); MOETUNE_BUILTIN_DIR defaults to this build's plugins/;
 * TMPDIR (default /dev/shm when writable, else /tmp) holds the tune
 * directories, each removed when its tune is scored.
 */
#include "config.h"
#include "contract.h"
#include "engine.h"
#include "model.h"
#include "registry.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef MT_SOURCE_DIR
#define MT_SOURCE_DIR "."
#endif
#ifndef MT_BUILD_DIR
#define MT_BUILD_DIR "build"
#endif
#ifndef MT_MOETUNE_BIN
#define MT_MOETUNE_BIN MT_BUILD_DIR "/moetune"
#endif

extern char **environ;

enum { S_OFAT, S_GRID, S_RANDOM, S_TPE, NSTRAT };
static const char *const strat_name[NSTRAT] = {"ofat", "grid", "random", "tpe"};

#define MAX_SEEDS 1000

typedef struct outcome {
    int done;            /* measured */
    double share;        /* noise-free TFLOP/s of the recommendation / the optimum's */
    double gpu_hours;
    int runs;
    int accepted, wrong; /* accepted changes; those slower noise-free */
    int over_headroom;   /* the recommendation does not fit the headroom (sim) */
    int budget_stop;     /* stopped by its budget; ofat without one: over the contract's */
    uint64_t off;        /* knobs of the space (bit i: entry i) where it differs from the optimum */
} outcome;

typedef struct bench_contract {
    char path[4096];
    mt_contract *c;
    mt_registry *reg;
    mt_kv *base;
    mt_optimum opt;
    outcome r[NSTRAT][MAX_SEEDS];
    pid_t tpe_pid;
    char tpe_out[1400];
    char tpe_err[256];  /* why TPE is unavailable ("" when it ran) */
    int twin;           /* the contract whose figures these are (see Twins), or -1 */
} bench_contract;

#define TWIN_CHECK 2 /* ofat seeds a twin runs to show it is one */

static char tmp_root[1024];
static int ofat_contract_budget; /* --contract-budget: ofat within the contract's budget */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb, (void)flag, (void)f;
    return remove(p);
}

static void rm_tree(const char *dir)
{
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *x, int n)
{
    if (n <= 0)
        return NAN;
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

/* Noise-free TFLOP/s (0 when the sim refuses the config). */
static double tflops(const bench_contract *b, const mt_kv *cfg, int *fits)
{
    int f = 0;
    double t = cfg ? mt_optimum_tflops(b->c, cfg, &f) : 0;
    if (fits)
        *fits = f;
    return t;
}

static int slower(const bench_contract *b, const mt_kv *from, const mt_kv *to)
{
    return tflops(b, to, NULL) < tflops(b, from, NULL) * (1 - 1e-9);
}

static int same_config(const mt_kv *a, const mt_kv *b)
{
    char x[17], y[17];
    mt_config_id(a, x);
    mt_config_id(b, y);
    return !strcmp(x, y);
}

/* Whether b may be a's twin: the same declared space (knobs and values, in
 * order), base config, noise-free optimum and fitting count. */
static int twin_candidate(const struct bench_contract *a, const struct bench_contract *b)
{
    const char *ka, *va, *kb, *vb;
    size_t i;
    if (mt_kv_count(a->c->space) != mt_kv_count(b->c->space) || !same_config(a->base, b->base) ||
        !same_config(a->opt.best, b->opt.best) || a->opt.best_tflops != b->opt.best_tflops ||
        a->opt.fitting != b->opt.fitting || a->opt.grid != b->opt.grid)
        return 0;
    for (i = 0; mt_kv_entry(a->c->space, i, &ka, &va) == 0; i++)
        if (mt_kv_entry(b->c->space, i, &kb, &vb) || strcmp(ka, kb) || strcmp(va, vb))
            return 0;
    return 1;
}

/* Whether ofat's tunes on seeds 1..TWIN_CHECK came out the same. */
static int same_tunes(const outcome *x, const outcome *y)
{
    int s;
    for (s = 0; s < TWIN_CHECK; s++)
        if (!x[s].done || !y[s].done || x[s].share != y[s].share ||
            x[s].gpu_hours != y[s].gpu_hours || x[s].runs != y[s].runs ||
            x[s].accepted != y[s].accepted || x[s].wrong != y[s].wrong || x[s].off != y[s].off)
            return 0;
    return 1;
}

/* Scores a recommendation into o (the single-change strategies). */
static void score(const bench_contract *b, const mt_kv *recipe, outcome *o)
{
    int fits = 0;
    double t = tflops(b, recipe, &fits);
    const char *k, *v, *mine;
    size_t i;
    for (i = 0; recipe && i < 64 && mt_kv_entry(b->c->space, i, &k, &v) == 0; i++)
        if (!(mine = mt_kv_get(recipe, k)) || strcmp(mine, mt_kv_get(b->opt.best, k)))
            o->off |= (uint64_t)1 << i;
    o->share = b->opt.best_tflops > 0 ? t / b->opt.best_tflops : NAN;
    o->over_headroom = recipe && !fits;
    if (recipe && !same_config(recipe, b->base)) {
        o->accepted = 1;
        o->wrong = slower(b, b->base, recipe);
    }
    o->done = 1;
}

static int budget_stop(const char *stopped)
{
    return !strncmp(stopped, "GPU-hour budget", 15) || !strncmp(stopped, "run budget", 10) ||
           !strncmp(stopped, "deadline", 8);
}

static int run_tune(bench_contract *b, int strategy, int seed, double gpu_hours, outcome *o)
{
    mt_tune_opts opts;
    mt_tune_result res;
    mt_diag *d = mt_diag_new();
    char dir[1400];
    int rc;
    size_t i;
    const char *slash = strrchr(b->path, '/');
    snprintf(dir, sizeof dir, "%s/%.200s-%s-%d", tmp_root, slash ? slash + 1 : b->path,
             strat_name[strategy], seed);
    mkdir(dir, 0755);
    mt_tune_opts_init(&opts);
    opts.dir = dir;
    opts.exec.executor = MT_EXEC_MODEL;
    opts.strategy = strategy == S_GRID     ? MT_STRATEGY_GRID
                    : strategy == S_RANDOM ? MT_STRATEGY_RANDOM
                                           : MT_STRATEGY_OFAT;
    opts.seed = (uint64_t)seed;
    if (strategy != S_OFAT || !ofat_contract_budget) {
        opts.gpu_hours = strategy == S_RANDOM ? gpu_hours : 1e12;
        opts.runs = 100000000;
        opts.until = (double)time(NULL) + 1e8;
    }
    rc = mt_tune(b->reg, b->c, &opts, &res, d);
    if (rc) {
        fprintf(stderr, "bench_search: %s %s seed %d failed:\n", b->c->name,
                strat_name[strategy], seed);
        mt_diag_print(d, stderr);
    } else {
        memset(o, 0, sizeof *o);
        score(b, res.recipe, o);
        if (strategy == S_OFAT) {
            o->accepted = (int)res.n_accepted;
            o->wrong = 0;
            for (i = 0; i < res.n_accepted; i++)
                o->wrong += slower(b, res.accepted_from[i], res.accepted_to[i]);
        }
        o->gpu_hours = res.gpu_hours;
        o->runs = res.runs;
        o->budget_stop = budget_stop(res.stopped);
        if (strategy == S_OFAT && !ofat_contract_budget)
            o->budget_stop = res.gpu_hours > b->c->gpu_hours || res.runs > b->c->max_runs;
    }
    mt_tune_result_clear(&res);
    mt_diag_destroy(&d);
    rm_tree(dir);
    return rc;
}

/* ---- a pool of forked workers, one tune each ---------------------------------------------- */

typedef struct job {
    bench_contract *b;
    int strategy, seed;
    double gpu_hours;
} job;

typedef struct worker {
    pid_t pid;
    int fd;
    job j;
} worker;

/* Waits for one worker's result (its pipe: the outcome, then end of file
 * when it exits); never waits for a process that is not a worker. */
static int reap(worker *w, int *nw)
{
    struct pollfd *p = calloc((size_t)*nw, sizeof *p);
    int st = 0, i, failed = 0;
    ssize_t got;
    outcome o;
    for (i = 0; i < *nw; i++)
        p[i].fd = w[i].fd, p[i].events = POLLIN;
    while (poll(p, (nfds_t)*nw, -1) < 0 && errno == EINTR)
        ;
    for (i = 0; i < *nw && !p[i].revents; i++)
        ;
    free(p);
    if (i == *nw)
        return 1;
    got = read(w[i].fd, &o, sizeof o);
    while (waitpid(w[i].pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (got == (ssize_t)sizeof o && WIFEXITED(st) && WEXITSTATUS(st) == 0)
        w[i].j.b->r[w[i].j.strategy][w[i].j.seed - 1] = o;
    else
        failed = 1;
    close(w[i].fd);
    w[i] = w[--*nw];
    return failed;
}

/* Runs the jobs, at most par at once; the number that failed. */
static int run_jobs(const job *jobs, int n, int par)
{
    worker *w = calloc((size_t)par + 1, sizeof *w);
    int nw = 0, i, failed = 0;
    for (i = 0; i < n; i++) {
        int fds[2];
        pid_t pid;
        while (nw >= par)
            failed += reap(w, &nw);
        if (pipe(fds)) {
            perror("bench_search: pipe");
            failed++;
            continue;
        }
        fflush(NULL);
        pid = fork();
        if (pid == 0) {
            outcome o;
            int rc;
            close(fds[0]);
            memset(&o, 0, sizeof o);
            rc = run_tune(jobs[i].b, jobs[i].strategy, jobs[i].seed, jobs[i].gpu_hours, &o);
            if (!rc && write(fds[1], &o, sizeof o) != (ssize_t)sizeof o)
                rc = 1;
            _exit(rc ? 1 : 0);
        }
        close(fds[1]);
        if (pid < 0) {
            perror("bench_search: fork");
            close(fds[0]);
            failed++;
            continue;
        }
        w[nw].pid = pid, w[nw].fd = fds[0], w[nw].j = jobs[i];
        nw++;
    }
    while (nw > 0)
        failed += reap(w, &nw);
    free(w);
    return failed;
}

static const char *python_bin(void)
{
    const char *p = getenv("MT_PYTHON");
    if (p && *p)
        return p;
    return access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
}

/* Starts tests/tpe_harness.py for every seed at its ofat GPU-hours; its
 * output goes to b->tpe_out. */
static void tpe_start(bench_contract *b, int seeds)
{
    posix_spawn_file_actions_t fa;
    char **argv = calloc((size_t)(2 * seeds + 12), sizeof *argv);
    char harness[4200], (*runs)[64] = calloc((size_t)seeds, sizeof *runs);
    int n = 0, s, err;
    const char *slash = strrchr(b->path, '/');
    snprintf(harness, sizeof harness, "%s/tests/tpe_harness.py", MT_SOURCE_DIR);
    snprintf(b->tpe_out, sizeof b->tpe_out, "%s/tpe-%.200s.jsonl", tmp_root,
             slash ? slash + 1 : b->path);
    argv[n++] = (char *)python_bin();
    argv[n++] = harness;
    argv[n++] = "--moetune";
    argv[n++] = MT_MOETUNE_BIN;
    argv[n++] = "--contract";
    argv[n++] = b->path;
    for (s = 0; s < seeds; s++) {
        if (!b->r[S_OFAT][s].done)
            continue;
        snprintf(runs[s], sizeof runs[s], "%d:%.17g", s + 1, b->r[S_OFAT][s].gpu_hours);
        argv[n++] = "--run";
        argv[n++] = runs[s];
    }
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, b->tpe_out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    err = posix_spawnp(&b->tpe_pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (err) {
        snprintf(b->tpe_err, sizeof b->tpe_err, "cannot start %s: %s", argv[0], strerror(err));
        b->tpe_pid = 0;
    }
    free(argv);
    free(runs);
}

/* Waits for the harness and scores its recommendations; 1 when it failed
 * (not when python or optuna is missing, the harness's exit status 3: TPE
 * is then unavailable). */
static int tpe_finish(bench_contract *b)
{
    int st = 0;
    FILE *f;
    char *line = NULL;
    size_t cap = 0;
    if (!b->tpe_pid)
        return 0; /* no python: unavailable, like no optuna */
    while (waitpid(b->tpe_pid, &st, 0) < 0 && errno == EINTR)
        ;
    b->tpe_pid = 0;
    if (!(f = fopen(b->tpe_out, "r"))) {
        snprintf(b->tpe_err, sizeof b->tpe_err, "the harness left no output");
        return 1;
    }
    while (getline(&line, &cap, f) > 0) {
        cJSON *j = cJSON_Parse(line), *x, *best;
        int seed;
        outcome *o;
        mt_kv *cfg;
        if (!j)
            continue;
        if (cJSON_IsString(x = cJSON_GetObjectItemCaseSensitive(j, "error"))) {
            snprintf(b->tpe_err, sizeof b->tpe_err, "%s", x->valuestring);
            cJSON_Delete(j);
            break;
        }
        x = cJSON_GetObjectItemCaseSensitive(j, "seed");
        seed = cJSON_IsNumber(x) ? x->valueint : 0;
        if (seed < 1 || seed > MAX_SEEDS) {
            cJSON_Delete(j);
            continue;
        }
        o = &b->r[S_TPE][seed - 1];
        memset(o, 0, sizeof *o);
        cfg = mt_kv_dup(b->base);
        best = cJSON_GetObjectItemCaseSensitive(j, "best");
        cJSON_ArrayForEach(x, best)
        {
            if (cJSON_IsString(x) &&
                mt_config_set(b->reg, cfg, x->string, x->valuestring, NULL, 0, "tpe", NULL)) {
                fprintf(stderr, "bench_search: tpe seed %d: %s=%s refused\n", seed, x->string,
                        x->valuestring);
            }
        }
        /* no screened config: the baseline stands */
        score(b, cfg, o);
        o->gpu_hours = cJSON_GetObjectItemCaseSensitive(j, "gpu_hours")->valuedouble;
        o->runs = cJSON_GetObjectItemCaseSensitive(j, "runs")->valueint;
        x = cJSON_GetObjectItemCaseSensitive(j, "stopped");
        o->budget_stop = cJSON_IsString(x) && budget_stop(x->valuestring);
        mt_kv_destroy(&cfg);
        cJSON_Delete(j);
    }
    free(line);
    fclose(f);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 3)
        return 0;
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
        if (!b->tpe_err[0])
            snprintf(b->tpe_err, sizeof b->tpe_err, "the harness failed (status %d)",
                     WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        return 1;
    }
    return 0;
}

typedef struct summary {
    int n;
    double share_med, share_worst, gh_med, gh_max, runs_med;
    int accepted, wrong, over, budget;
} summary;

static summary summarize(const outcome *r, int seeds)
{
    summary s;
    double *sh = calloc((size_t)seeds + 1, sizeof *sh), *gh = calloc((size_t)seeds + 1, sizeof *gh),
           *rn = calloc((size_t)seeds + 1, sizeof *rn);
    int i;
    memset(&s, 0, sizeof s);
    s.share_worst = INFINITY;
    for (i = 0; i < seeds; i++) {
        if (!r[i].done)
            continue;
        sh[s.n] = r[i].share;
        gh[s.n] = r[i].gpu_hours;
        rn[s.n] = r[i].runs;
        s.n++;
        if (r[i].share < s.share_worst)
            s.share_worst = r[i].share;
        s.accepted += r[i].accepted;
        s.wrong += r[i].wrong;
        s.over += r[i].over_headroom;
        s.budget += r[i].budget_stop;
    }
    s.share_med = median(sh, s.n);
    s.gh_med = median(gh, s.n);
    s.runs_med = median(rn, s.n);
    qsort(gh, (size_t)s.n, sizeof *gh, cmp_double);
    s.gh_max = s.n ? gh[s.n - 1] : NAN;
    if (!s.n)
        s.share_worst = NAN;
    free(sh), free(gh), free(rn);
    return s;
}

static int open_contract(bench_contract *b, const char *path)
{
    mt_diag *d = mt_diag_new();
    int rc = -1;
    snprintf(b->path, sizeof b->path, "%s", path);
    if (!(b->c = mt_contract_load(path, d)))
        goto out;
    b->reg = mt_registry_new();
    mt_registry_load_default(b->reg, NULL, 0, d);
    mt_registry_finish(b->reg, d);
    mt_config_normalize_space(b->reg, b->c, d);
    if (!(b->base = mt_config_base(b->reg, b->c, d)) || mt_diag_count(d))
        goto out;
    if (mt_optimum_find(b->reg, b->c, b->base, 5000000, &b->opt, d) || !b->opt.best)
        goto out;
    rc = 0;
out:
    if (rc) {
        fprintf(stderr, "bench_search: %s:\n", path);
        mt_diag_print(d, stderr);
    }
    mt_diag_destroy(&d);
    return rc;
}

static void close_contract(bench_contract *b)
{
    mt_kv_destroy(&b->opt.best);
    mt_kv_destroy(&b->base);
    mt_registry_destroy(&b->reg);
    mt_contract_destroy(&b->c);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    const char *dir = MT_SOURCE_DIR "/examples/contracts", *only = NULL;
    int seeds = 20, grid_seeds = 5, tpe = 1, i, s, k, nc = 0, nj = 0, failures = 0, par;
    char **paths = NULL;
    bench_contract **bc;
    DIR *dh;
    struct dirent *de;
    double t0 = now(), t, tstrat[NSTRAT] = {0};
    job *jobs;
    char timing[256];

    par = (int)sysconf(_SC_NPROCESSORS_ONLN);
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seeds") && i + 1 < argc)
            seeds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--grid-seeds") && i + 1 < argc)
            grid_seeds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i];
        else if (!strcmp(argv[i], "--jobs") && i + 1 < argc)
            par = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--contract-budget"))
            ofat_contract_budget = 1;
        else if (!strcmp(argv[i], "--no-tpe"))
            tpe = 0;
        else if (argv[i][0] != '-')
            dir = argv[i];
        else {
            fprintf(stderr, "usage: bench_search [CONTRACTS_DIR] [--seeds N] [--grid-seeds G] "
                            "[--only SUBSTRING] [--jobs N] [--contract-budget] [--no-tpe]\n");
            return 64;
        }
    }
    if (seeds < 1 || seeds > MAX_SEEDS)
        seeds = 20;
    if (grid_seeds < 0)
        grid_seeds = 0;
    if (grid_seeds > seeds)
        grid_seeds = seeds;
    if (par < 1)
        par = 1;
    setenv("MOETUNE_BUILTIN_DIR", MT_BUILD_DIR "/plugins", 0);
    /* the tunes' stores commit every job: a memory file system keeps that cheap */
    snprintf(tmp_root, sizeof tmp_root, "%.900s/bench_search.XXXXXX",
             getenv("TMPDIR") && *getenv("TMPDIR")  ? getenv("TMPDIR")
             : access("/dev/shm", W_OK | X_OK) == 0 ? "/dev/shm"
                                                    : "/tmp");
    if (!mkdtemp(tmp_root)) {
        perror("bench_search: mkdtemp");
        return 1;
    }
    if (!(dh = opendir(dir))) {
        fprintf(stderr, "bench_search: %s: %s\n", dir, strerror(errno));
        rm_tree(tmp_root);
        return 1;
    }
    while ((de = readdir(dh))) {
        size_t n = strlen(de->d_name);
        char p[4200];
        if (n < 5 || strcmp(de->d_name + n - 4, ".cfg") || (only && !strstr(de->d_name, only)))
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        paths = realloc(paths, (size_t)(nc + 1) * sizeof *paths);
        paths[nc++] = strdup(p);
    }
    closedir(dh);
    qsort(paths, (size_t)nc, sizeof *paths, cmp_str);
    bc = calloc((size_t)nc + 1, sizeof *bc);

    printf("search benchmark: %d contract(s) of %s, seeds 1..%d (grid: 1..%d), model executor, "
           "%d worker(s); ofat %s\n",
           nc, dir, seeds, grid_seeds, par,
           ofat_contract_budget ? "within the contract's budget" : "unbudgeted (a full tune)");
    fflush(stdout);
    /* ofat first on every contract (its GPU-hours are the others' budget);
     * then TPE in the background while random and grid run in the pool */
    jobs = calloc((size_t)nc * (size_t)(2 * seeds + grid_seeds) + 1, sizeof *jobs);
    for (k = 0; k < nc; k++) {
        bc[k] = calloc(1, sizeof **bc);
        if (open_contract(bc[k], paths[k])) {
            failures++;
            close_contract(bc[k]);
            free(bc[k]);
            bc[k] = NULL;
            continue;
        }
        bc[k]->twin = -1;
        for (i = 0; i < k && seeds >= TWIN_CHECK; i++)
            if (bc[i] && bc[i]->twin < 0 && twin_candidate(bc[i], bc[k])) {
                bc[k]->twin = i;
                break;
            }
        for (s = 0; s < (bc[k]->twin >= 0 ? TWIN_CHECK : seeds); s++)
            jobs[nj++] = (job){bc[k], S_OFAT, s + 1, 0};
    }
    t = now();
    failures += run_jobs(jobs, nj, par);
    /* a twin whose first tunes differ is no twin: all its seeds run */
    nj = 0;
    for (k = 0; k < nc; k++)
        if (bc[k] && bc[k]->twin >= 0 &&
            !same_tunes(bc[k]->r[S_OFAT], bc[bc[k]->twin]->r[S_OFAT])) {
            printf("%s: not %s's twin after all (ofat seeds 1-%d differ): every strategy runs\n",
                   bc[k]->c->name, bc[bc[k]->twin]->c->name, TWIN_CHECK);
            bc[k]->twin = -1;
            for (s = TWIN_CHECK; s < seeds; s++)
                jobs[nj++] = (job){bc[k], S_OFAT, s + 1, 0};
        }
    failures += run_jobs(jobs, nj, par);
    tstrat[S_OFAT] = now() - t;
    t = now();
    for (k = 0; k < nc && tpe; k++)
        if (bc[k] && bc[k]->twin < 0)
            tpe_start(bc[k], seeds);
    nj = 0;
    for (k = 0; k < nc; k++) {
        if (!bc[k] || bc[k]->twin >= 0)
            continue;
        for (s = 0; s < seeds; s++)
            if (bc[k]->r[S_OFAT][s].done)
                jobs[nj++] = (job){bc[k], S_RANDOM, s + 1, bc[k]->r[S_OFAT][s].gpu_hours};
        for (s = 0; s < grid_seeds; s++)
            jobs[nj++] = (job){bc[k], S_GRID, s + 1, 0};
    }
    failures += run_jobs(jobs, nj, par);
    tstrat[S_RANDOM] = now() - t;
    t = now();
    for (k = 0; k < nc; k++)
        if (bc[k] && bc[k]->twin < 0 && tpe)
            failures += tpe_finish(bc[k]);
    tstrat[S_TPE] = now() - t;
    free(jobs);
    /* a twin's tables are its twin's */
    for (k = 0; k < nc; k++)
        if (bc[k] && bc[k]->twin >= 0) {
            const bench_contract *w = bc[bc[k]->twin];
            memcpy(bc[k]->r, w->r, sizeof w->r);
            memcpy(bc[k]->tpe_err, w->tpe_err, sizeof w->tpe_err);
        }

    /* the tables */
    for (k = 0; k < nc; k++) {
        bench_contract *b = bc[k];
        const char *slash;
        if (!b)
            continue;
        slash = strrchr(b->path, '/');
        printf("\n== %s (%s): optimum %.1f TFLOP/s/GPU; base %.1f (%.1f%%); %zu of %zu configs "
               "legal and fit\n",
               b->c->name, slash ? slash + 1 : b->path, b->opt.best_tflops, b->opt.base_tflops,
               100 * b->opt.base_tflops / b->opt.best_tflops, b->opt.fitting, b->opt.grid);
        if (b->twin >= 0)
            printf("  the figures of %s, its twin: the same space, base and optimum, and ofat's "
                   "tunes on seeds 1-%d came out the same to the last run (the model executor "
                   "reads neither dialect nor launch); the rest was not run again\n",
                   bc[b->twin]->c->name, TWIN_CHECK);
        printf("  %-7s %5s %9s %8s %10s %10s %7s %9s %8s %6s\n", "", "seeds", "share med",
               "worst", "GPU-h med", "GPU-h max", "runs", "wrong/acc", "budget", "mem!");
        for (i = 0; i < NSTRAT; i++) {
            summary sm = summarize(b->r[i], seeds);
            if (i == S_TPE && (!tpe || b->tpe_err[0] || !sm.n)) {
                printf("  %-7s unavailable: %s\n", strat_name[i],
                       !tpe ? "--no-tpe" : b->tpe_err[0] ? b->tpe_err : "no result");
                continue;
            }
            if (!sm.n) {
                printf("  %-7s not run\n", strat_name[i]);
                continue;
            }
            printf("  %-7s %5d %8.1f%% %7.1f%% %10.1f %10.1f %7.0f %5d/%-3d %8d %6d\n",
                   strat_name[i], sm.n, 100 * sm.share_med, 100 * sm.share_worst, sm.gh_med,
                   sm.gh_max, sm.runs_med, sm.wrong, sm.accepted, sm.budget, sm.over);
        }
        {
            /* where ofat's recipes leave the optimum: knob (optimum's value) seeds */
            const char *kn, *v;
            size_t j;
            int printed = 0;
            for (j = 0; j < 64 && mt_kv_entry(b->c->space, j, &kn, &v) == 0; j++) {
                int n = 0, m = 0;
                for (s = 0; s < seeds; s++)
                    if (b->r[S_OFAT][s].done) {
                        m++;
                        n += (b->r[S_OFAT][s].off >> j) & 1;
                    }
                if (!n)
                    continue;
                printf("%s %s=%s %d/%d", printed ? "," : "  ofat's recipe differs from the optimum in:",
                       kn, mt_kv_get(b->opt.best, kn), n, m);
                printed = 1;
            }
            printf("%s\n", printed ? "" : "  ofat's recipe is the optimum on every seed");
            printf("  ofat's share by seed:");
            for (s = 0; s < seeds; s++)
                if (b->r[S_OFAT][s].done)
                    printf(" %.1f", 100 * b->r[S_OFAT][s].share);
            printf("\n");
        }
    }
    printf("\n  share: noise-free TFLOP/s of the recommended config / the optimum's (median and "
           "worst seed);\n  budget: seeds stopped by their budget (random, tpe: ofat's GPU-hours; "
           "ofat: %s);\n  wrong/acc: accepted changes slower noise-free / accepted "
           "changes (grid, random, tpe: base -> recommendation);\n  mem!: recommendations over "
           "the contract's memory headroom (sim)\n",
           ofat_contract_budget ? "the contract's" : "none, so: seeds that spent more than the "
                                                    "contract's GPU-hours or runs");

    /* the targets */
    printf("\ntargets for ofat (informational): median >= 98%%, worst >= 95%%, GPU-h <= 10%% of "
           "grid's, median share ahead of random and of tpe\n");
    for (k = 0; k < nc; k++) {
        bench_contract *b = bc[k];
        summary o, g, r, t;
        char gtxt[64], rtxt[64], ttxt[64];
        if (!b)
            continue;
        o = summarize(b->r[S_OFAT], seeds);
        g = summarize(b->r[S_GRID], seeds);
        r = summarize(b->r[S_RANDOM], seeds);
        t = summarize(b->r[S_TPE], seeds);
        if (g.n)
            snprintf(gtxt, sizeof gtxt, "%s (%.1f%%)", o.gh_med <= 0.10 * g.gh_med ? "met" : "MISSED",
                     100 * o.gh_med / g.gh_med);
        else
            snprintf(gtxt, sizeof gtxt, "n/a");
        /* two decimals: medians that round alike at one can still differ */
        snprintf(rtxt, sizeof rtxt, "%s (%.2f%% vs %.2f%%)",
                 o.share_med > r.share_med ? "met" : "MISSED", 100 * o.share_med,
                 100 * r.share_med);
        if (tpe && !b->tpe_err[0] && t.n)
            snprintf(ttxt, sizeof ttxt, "%s (%.2f%% vs %.2f%%)",
                     o.share_med > t.share_med ? "met" : "MISSED", 100 * o.share_med,
                     100 * t.share_med);
        else
            snprintf(ttxt, sizeof ttxt, "n/a");
        printf("  %-34s median %s (%.1f%%)  worst %s (%.1f%%)  GPU-h %s  vs random %s  vs tpe %s",
               b->c->name, o.share_med >= 0.98 ? "met" : "MISSED", 100 * o.share_med,
               o.share_worst >= 0.95 ? "met" : "MISSED", 100 * o.share_worst, gtxt, rtxt, ttxt);
        if (b->twin >= 0)
            printf("  (twin of %s)", bc[b->twin]->c->name);
        printf("\n");
    }
    snprintf(timing, sizeof timing, "ofat %.1f s; random, grid and tpe %.1f s; then tpe %.1f s",
             tstrat[S_OFAT], tstrat[S_RANDOM], tstrat[S_TPE]);
    printf("\nruntime: %.1f s (%s)\n", now() - t0, timing);

    for (k = 0; k < nc; k++) {
        if (bc[k]) {
            close_contract(bc[k]);
            free(bc[k]);
        }
        free(paths[k]);
    }
    free(paths);
    free(bc);
    rm_tree(tmp_root);
    return failures ? 1 : 0;
}
