/*
 * cmd_tune.c - `moetune tune`, `status` and `demo` (search/cmd_search.h):
 * the unattended tune's front end, its resume, its stop on SIGTERM/SIGINT.
 */
#include "cmd_search.h"

#include "cli.h"
#include "cmd_core.h"
#include "dirlock.h"
#include "engine.h"
#include "recipe.h"
#include "status.h"
#include "store.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef MOETUNE_SOURCE_DIR
#define MOETUNE_SOURCE_DIR "."
#endif

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
    if (g->executor && (o->exec.executor == MT_EXEC_MODEL) != (executor == MT_EXEC_MODEL))
        CONFLICT("--executor %s contradicts the stored tune (executor %s)\n",
                 o->exec.executor == MT_EXEC_MODEL ? "model" : "local",
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

/* What `moetune tune`'s command line says. */
typedef struct tune_args {
    mt_tune_opts o;
    given_opts given;
    const char *dir, *contract, *notify_cmd;
    int quiet;
} tune_args;

/* The command line into a; 0, MT_CLI_HELP, or MT_EXIT_USAGE said. */
static int tune_parse(int argc, char **argv, tune_args *a)
{
    const char *resume_dir = NULL, *strategy = NULL, *executor = NULL, *workers = NULL;
    unsigned long long seed = 0;
    mt_tune_opts *o = &a->o;
    int rc;
    const mt_opt opts[] = {
        {"--dir", NULL, "DIR", MT_OPT_STR, &a->dir, 0, 0, NULL, "the tune's directory"},
        {"--resume", NULL, "DIR", MT_OPT_STR, &resume_dir, 0, 0, NULL,
         "continue the tune in DIR after a crash, kill or stop"},
        {"--strategy", NULL, "ofat|grid|random", MT_OPT_STR, &strategy, 0, 0, NULL,
         "the search (default ofat)"},
        {"--until", NULL, "HH:MM", MT_OPT_STR, &a->given.until, 0, 0, NULL, "the local deadline"},
        {"--jobs", NULL, "N", MT_OPT_INT, &o->exec.slots, 1, 0, NULL, "runs at once"},
        {"--executor", NULL, "local|model", MT_OPT_STR, &executor, 0, 0, NULL,
         "run the program, or predict with the sim's model"},
        {"--gpu-hours", NULL, "X", MT_OPT_DOUBLE, &o->gpu_hours, 0, 1, &a->given.gpu_hours,
         "the budget (default the contract's)"},
        {"--runs", NULL, "N", MT_OPT_INT, &o->runs, 1, 0, &a->given.runs,
         "the most runs (default the contract's)"},
        {"--seed", NULL, "N", MT_OPT_U64, &seed, 0, 0, &a->given.seed, "the strategy's seed"},
        {"--notify", NULL, "CMD", MT_OPT_STR, &a->notify_cmd, 0, 0, NULL,
         "run CMD BUNDLE at the end (no shell; MOETUNE_STATUS says how it ended)"},
        {"--workers", NULL, "tcp://HOST:PORT", MT_OPT_STR, &workers, 0, 0, NULL,
         "run the jobs on ZeroMQ workers"},
        {"--keys", NULL, "DIR", MT_OPT_STR, &o->exec.key_dir, 0, 0, NULL, "CURVE keys for the workers"},
        {"--job-grace", NULL, "S", MT_OPT_DOUBLE, &o->exec.job_grace_s, 0, 0, NULL,
         "how long a worker's job may run past its limit"},
        {"--worker-wait", NULL, "S", MT_OPT_DOUBLE, &o->exec.worker_wait_s, 0, 0, NULL,
         "how long to wait for a worker that can run the jobs"},
        {"--quiet", NULL, NULL, MT_OPT_FLAG, &a->quiet, 0, 0, NULL, "no progress on stderr"},
        {NULL}};
    mt_cmd c = {"tune", TUNE_USAGE, opts, &a->contract, 0, 1, "CONTRACT", NULL};
    if ((rc = mt_cli_parse(&c, argc, argv, 2)))
        return rc;
    if (resume_dir)
        a->dir = resume_dir, o->resume = 1;
    if (strategy && (o->strategy = mt_strategy_parse(strategy)) < 0) {
        fprintf(stderr, "moetune tune: --strategy %s: write ofat, grid or random\n", strategy);
        return mt_cli_usage(&c);
    }
    a->given.strategy = strategy != NULL;
    if (a->given.until && !(o->until = parse_until(a->given.until))) {
        fprintf(stderr, "moetune tune: --until %s: write a local time HH:MM\n", a->given.until);
        return MT_EXIT_USAGE;
    }
    if (executor && strcmp(executor, "model") && strcmp(executor, "local")) {
        fprintf(stderr, "moetune tune: --executor %s: write local or model\n", executor);
        return MT_EXIT_USAGE;
    }
    if (executor)
        o->exec.executor = !strcmp(executor, "model") ? MT_EXEC_MODEL : MT_EXEC_LOCAL;
    a->given.executor = executor != NULL;
    if (a->given.seed)
        o->seed = seed;
    if (workers)
        o->exec.workers = workers, o->exec.executor = MT_EXEC_ZMQ;
    if (!a->dir || (!a->contract && !o->resume) || (a->contract && o->resume) || o->exec.slots < 1)
        return mt_cli_usage(&c);
    return 0;
}

/* 0 when DIR holds no tune yet; MT_EXIT_BAD_INPUT, said, when it does. */
static int tune_dir_is_new(const char *dir)
{
    char store[PATH_MAX];
    struct stat sb;
    snprintf(store, sizeof store, "%s/moetune.db", dir);
    if (stat(store, &sb) != 0)
        return 0;
    fprintf(stderr,
            "moetune tune: %s already holds a tune; continue it with --resume %s, or choose a new "
            "directory\n",
            dir, dir);
    return MT_EXIT_BAD_INPUT;
}

/* A resume's contract: the path the tune started from (DIR/contract.path),
 * or the copy taken then when that has moved; into path.  0, or an exit
 * code said. */
static int tune_stored_contract(const char *dir, char *path, size_t n)
{
    char saved[PATH_MAX];
    struct stat sb;
    FILE *f;
    snprintf(saved, sizeof saved, "%s/contract.path", dir);
    f = fopen(saved, "r");
    if (!f || !fgets(path, (int)n, f)) {
        fprintf(stderr, "moetune tune --resume %s: not a tune directory (no contract.path)\n", dir);
        if (f)
            fclose(f);
        return MT_EXIT_BAD_INPUT;
    }
    fclose(f);
    path[strcspn(path, "\n")] = '\0';
    if (stat(path, &sb)) /* moved: the copy taken at the start */
        snprintf(path, n, "%s/contract.cfg", dir);
    return 0;
}

/* A new tune's start in DIR: the contract's copy and path, and the options
 * a resume must keep (the same budget, strategy, seed).  0, or an exit code
 * said. */
static int tune_save_start(const char *dir, const char *contract, const mt_tune_opts *o)
{
    char copy[PATH_MAX], real[PATH_MAX], saved[PATH_MAX];
    FILE *f;
    snprintf(copy, sizeof copy, "%s/contract.cfg", dir);
    snprintf(saved, sizeof saved, "%s/contract.path", dir);
    if (!realpath(contract, real))
        snprintf(real, sizeof real, "%s", contract);
    if (copy_file(contract, copy) || !(f = fopen(saved, "w"))) {
        fprintf(stderr, "moetune tune: cannot write into %s: %s\n", dir, strerror(errno));
        return MT_EXIT_BAD_INPUT;
    }
    fprintf(f, "%s\n", real);
    fclose(f);
    snprintf(copy, sizeof copy, "%s/tune.opts", dir);
    if ((f = fopen(copy, "w"))) {
        fprintf(f, "%d %d %.17g %d %llu %.17g\n", o->strategy, o->exec.executor, o->gpu_hours, o->runs,
                (unsigned long long)o->seed, o->until);
        fclose(f);
    }
    return 0;
}

/* A resume's options from DIR/tune.opts, after checking that what the
 * command line gave does not contradict them.  0, or MT_EXIT_BAD_INPUT
 * said. */
static int tune_load_stored(const char *dir, const mt_contract *c, tune_args *a)
{
    char copy[PATH_MAX];
    FILE *f;
    int strategy, executor, runs, n;
    double gh, until;
    unsigned long long seed;
    mt_tune_opts *o = &a->o;
    snprintf(copy, sizeof copy, "%s/tune.opts", dir);
    if (!(f = fopen(copy, "r")))
        return 0;
    n = fscanf(f, "%d %d %lg %d %llu %lg", &strategy, &executor, &gh, &runs, &seed, &until);
    fclose(f);
    if (n != 6)
        return 0;
    if (resume_conflicts(dir, c, o, &a->given, strategy, executor, gh, runs, seed, until))
        return MT_EXIT_BAD_INPUT;
    o->strategy = strategy, o->seed = seed;
    if (o->exec.executor != MT_EXEC_ZMQ) /* the same jobs on other executors */
        o->exec.executor = executor == MT_EXEC_ZMQ ? MT_EXEC_LOCAL : executor;
    if (o->gpu_hours <= 0)
        o->gpu_hours = gh;
    if (o->runs <= 0)
        o->runs = runs;
    if (o->until <= 0)
        o->until = until;
    return 0;
}

/* The command that continues this tune: what tune.opts does not keep. */
static void tune_resume_command(const mt_tune_opts *o, const char *dir, char *buf, size_t n)
{
    snprintf(buf, n, "moetune tune --resume");
    append_word(buf, n, dir);
    if (o->exec.slots > 1) {
        char jobs[32];
        snprintf(jobs, sizeof jobs, "%d", o->exec.slots);
        append_word(buf, n, "--jobs");
        append_word(buf, n, jobs);
    }
    if (o->exec.workers) {
        append_word(buf, n, "--workers");
        append_word(buf, n, o->exec.workers);
    }
    if (o->exec.workers && o->exec.key_dir) {
        append_word(buf, n, "--keys");
        append_word(buf, n, o->exec.key_dir);
    }
}

/* What a finished tune prints, the --notify call, and the exit code. */
static int tune_outcome(const mt_tune_result *res, const char *dir, const char *notify_cmd)
{
    static const char *const words[] = {"validated", "not-confirmed", "baseline-only",
                                        "nothing-fits"};
    /* status 3: nothing fits, or the base itself does not run */
    int failed = res->status == 3 && strstr(res->stopped, "does not run"), rc;
    printf("bundle: %s\nreport: %s/report.html\n", res->bundle, dir);
    if (isfinite(res->gain))
        printf("validated gain: %.2f%% shorter steps (%s)\n", 100 * res->gain, words[res->status]);
    print_benchmark_only(res->bundle);
    if (res->not_ablated)
        printf("winner not ablated: the budget left %d of %d accepted changes without their "
               "leave-one-out A/B\n",
               res->not_ablated, res->accepted);
    else
        printf("result: %s (%s)\n", failed ? "failed" : words[res->status], res->stopped);
    printf("spent: %.1f GPU-hours, %d runs (%d executed now)\n", res->gpu_hours, res->runs,
           res->runs_executed);
    if (notify_cmd)
        notify(notify_cmd, res->bundle, failed ? "failed" : words[res->status]);
    if (failed)
        return EXIT_FAILURE;
    rc = res->status == 0 || res->status == 2 ? 0 : res->status == 1 ? 3 : 4;
    return rc == 0 && res->not_ablated ? MT_EXIT_NOT_ABLATED : rc;
}

/* The contract's template or container settings name {rev} or {work}:
 * refused before any run (every job would fail to launch). */
static int tune_refuse_bisect_only(const mt_contract *c, const char *path)
{
    if (!c->template_bisect && !c->srun_bisect)
        return 0;
    fprintf(stderr,
            "moetune tune: %s: %s names {rev} or {work}, which only `moetune bisect` fills; drop "
            "them from %s to tune\n",
            path, c->template_bisect ? "launch.template" : "a launch.srun container setting",
            c->template_bisect ? "the template" : "the container settings");
    return MT_EXIT_BAD_INPUT;
}

/* Owns DIR and starts or resumes its tune's files; the lock in *lock.  0,
 * or an exit code said. */
static int tune_take_dir(tune_args *a, const mt_contract *c, int *lock)
{
    int rc = 0;
    if (a->o.resume)
        return tune_load_stored(a->dir, c, a);
    if (mt_cli_make_dir("tune", a->dir) || (*lock = mt_cli_own_dir("tune", a->dir, "tune", &rc)) < 0)
        return *lock < 0 && rc ? rc : MT_EXIT_BAD_INPUT;
    /* again, now that it is ours: a tune started here since */
    if ((rc = tune_dir_is_new(a->dir)))
        return rc;
    return tune_save_start(a->dir, a->contract, &a->o);
}

int mt_cmd_tune(int argc, char **argv)
{
    mt_session s;
    mt_tune_result res;
    tune_args a;
    char simbin[PATH_MAX], path[PATH_MAX], resume[8192];
    int rc, lock = -1;
    mt_diag *d;
    memset(&a, 0, sizeof a);
    mt_tune_opts_init(&a.o);
    if ((rc = tune_parse(argc, argv, &a)))
        return rc == MT_CLI_HELP ? 0 : rc;
    if (a.o.resume) {
        if ((rc = tune_stored_contract(a.dir, path, sizeof path)))
            return rc;
        a.contract = path;
        /* one owner per tune directory, before anything is read for the tune */
        if ((lock = mt_cli_own_dir("tune --resume", a.dir, "tune", &rc)) < 0)
            return rc;
    } else if ((rc = tune_dir_is_new(a.dir))) {
        return rc;
    }
    rc = mt_session_open(&s, a.contract, 0);
    if (!rc)
        rc = tune_refuse_bisect_only(s.contract, a.contract);
    if (!rc)
        rc = tune_take_dir(&a, s.contract, &lock);
    if (rc) {
        mt_session_clear(&s);
        mt_dirlock_release(&lock);
        return rc;
    }
    mt_cli_sim_path(simbin, sizeof simbin);
    a.o.exec.sim_path = simbin;
    a.o.dir = a.dir;
    a.o.progress = a.quiet ? NULL : stderr;
    a.o.tty = !a.quiet && isatty(2);
    tune_resume_command(&a.o, a.dir, resume, sizeof resume);
    if (stop_watch_start(a.dir, resume))
        fprintf(stderr, "moetune tune: cannot watch for SIGTERM/SIGINT; they stop the tune "
                        "without a word\n");
    d = mt_diag_new();
    rc = mt_tune(s.reg, s.contract, &a.o, &res, d);
    if (rc) {
        mt_diag_print(d, stderr);
        if (a.notify_cmd)
            notify(a.notify_cmd, "", "failed");
        rc = res.refused ? MT_EXIT_BAD_INPUT : EXIT_FAILURE;
    } else {
        rc = tune_outcome(&res, a.dir, a.notify_cmd);
    }
    mt_tune_result_clear(&res);
    mt_diag_destroy(&d);
    mt_session_clear(&s);
    mt_dirlock_release(&lock);
    return rc;
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

int mt_cmd_status(int argc, char **argv)
{
    char path[PATH_MAX], buf[8192];
    FILE *f;
    size_t n;
    mt_diag *d;
    mt_store *st;
    mt_store_run *runs = NULL;
    size_t nr = 0, i, ok = 0;
    double gh = 0;
    const char *dir = NULL;
    static const mt_opt opts[] = {{NULL}};
    mt_cmd c = {"status",
                "usage: moetune status DIR\n"
                "  a tune's live state (from another terminal)\n",
                opts, &dir, 1, 1, "DIR", NULL};
    int rc;
    if ((rc = mt_cli_parse(&c, argc, argv, 2)))
        return rc == MT_CLI_HELP ? 0 : rc;
    snprintf(path, sizeof path, "%s/status.json", dir);
    if ((f = fopen(path, "r"))) {
        n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        fclose(f);
        fputs(buf, stdout);
        status_throughput(buf);
        status_liveness(dir, buf);
    } else {
        fprintf(stderr, "%s: no status.json (not a tune directory, or it has not started)\n",
                dir);
        return MT_EXIT_BAD_INPUT;
    }
    d = mt_diag_new();
    if ((st = mt_store_open(dir, NULL, d)) &&
        mt_store_list_runs(st, NULL, NULL, &runs, &nr, d) == 0) {
        for (i = 0; i < nr; i++) {
            ok += !strcmp(runs[i].outcome, "ok");
            gh += isfinite(runs[i].gpu_hours) ? runs[i].gpu_hours : 0;
        }
        printf("store: %zu runs (%zu ok), %.2f GPU-hours\n", nr, ok, gh);
        if (model_executor(dir))
            printf("  (the model executor's runs are predictions of the sim's model, not "
                   "stored as runs: status.json's runs and gpu_hours count them)\n");
        for (i = nr > 5 ? nr - 5 : 0; i < nr; i++)
            printf("  run %lld %s %s r%d: %s\n", (long long)runs[i].id, runs[i].kind,
                   runs[i].config_id, runs[i].replicate, runs[i].outcome);
        mt_store_runs_free(runs, nr);
    } else {
        mt_diag_print(d, stderr);
    }
    mt_store_destroy(&st);
    mt_diag_destroy(&d);
    snprintf(path, sizeof path, "%s/bundle.json", dir);
    if (access(path, R_OK) == 0)
        printf("finished: %s/report.html\n", dir);
    return 0;
}

int mt_cmd_demo(int argc, char **argv)
{
    char path[PATH_MAX], dir[PATH_MAX], store[PATH_MAX + 16];
    char *args[8];
    const char *contract = NULL, *dir_opt = NULL;
    int rc, n = 0;
    struct stat sb;
    const mt_opt opts[] = {{"--dir", NULL, "DIR", MT_OPT_STR, &dir_opt, 0, 0, NULL,
                            "the tune's directory (moetune-demo)"},
                           {NULL}};
    mt_cmd c = {"demo",
                "usage: moetune demo [CONTRACT] [--dir DIR]\n"
                "  check the example contract and tune it on the simulator\n",
                opts, &contract, 0, 1, "CONTRACT", NULL};
    if ((rc = mt_cli_parse(&c, argc, argv, 2)))
        return rc == MT_CLI_HELP ? 0 : rc;
    if (contract)
        snprintf(path, sizeof path, "%s", contract);
    else
        snprintf(path, sizeof path, "%s/examples/contracts/qwen3-30b-a3b-h100x16.cfg",
                 MOETUNE_SOURCE_DIR);
    snprintf(dir, sizeof dir, "%s", dir_opt ? dir_opt : "moetune-demo");
    printf("== moetune check %s\n", path);
    fflush(stdout);
    rc = mt_cmd_check_contract(path);
    if (rc && rc != MT_EXIT_NO_FIT) /* a base that does not fit is the tune's fit phase's job */
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
    rc = mt_cmd_tune(n, args);
    if (rc == 0 || rc == 3 || rc == MT_EXIT_NOT_ABLATED)
        printf("\nopen %s/report.html (or read %s/REPORT.md); `moetune runs %s` lists every "
               "run\n",
               dir, dir, dir);
    return rc;
}
