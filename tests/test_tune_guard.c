/*
 * test_tune_guard.c - what keeps a tune directory's results the tune's own,
 * with real `moetune` processes and the real sim (tests/contracts/
 * tune-small.cfg):
 *   - one owner per tune and bisection directory: a second process is
 *     refused at once (exit 75) naming the directory and the owner's PID,
 *     and kill -9 of the owner frees the directory for a resume;
 *   - a run sees the contract's environment and the pass-through list only;
 *   - a resume whose result-changing environment (MOETUNE_SIM_*, NCCL_*,
 *     ...) differs from the one recorded at the start is refused with each
 *     difference; launcher and placement variables do not matter;
 *   - a resume's options that contradict the stored tune are refused,
 *     each with the stored and the given value; equal ones are fine;
 *   - SIGTERM / SIGINT stop a tune with a message naming what was
 *     interrupted and the resume command, status.json "stopped", exit
 *     128 + the signal, no run left behind, and the resume ends with the
 *     uninterrupted tune's recipe, no run stored twice.
 */
#include "dirlock.h"
#include "store.h"
#include "testkit.h"

#include <check.h>
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define SMALL MT_SOURCE_DIR "/tests/contracts/tune-small.cfg"
#define BISECT MT_SOURCE_DIR "/tests/contracts/bisect-small.cfg"
/* really sleep this fraction of simulated time: a tune of tune-small.cfg
 * lasts seconds, long enough to be caught running */
#define SLOW_SCALE "0.00005"

/* ---- helpers ------------------------------------------------------------------------------ */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_ms(double ms)
{
    struct timespec ts;
    ts.tv_sec = (time_t)(ms / 1000);
    ts.tv_nsec = (long)((ms - 1000.0 * (double)ts.tv_sec) * 1e6);
    nanosleep(&ts, NULL);
}

static void fresh(char *base, size_t n, const char *tag)
{
    snprintf(base, n, "/tmp/moetune-guard-%s-XXXXXX", tag);
    ck_assert_ptr_nonnull(mkdtemp(base));
}

static void rm_rf(const char *path)
{
    char cmd[4200];
    if (strncmp(path, "/tmp/moetune-guard-", 19)) /* only our own mkdtemp directories */
        return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd)) {
        /* leftovers in /tmp are harmless */
    }
}

static int exists(const char *dir, const char *name)
{
    char p[4096];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return stat(p, &sb) == 0;
}

static int count_run_dirs(const char *dir)
{
    char p[4096];
    DIR *d;
    struct dirent *x;
    int n = 0;
    snprintf(p, sizeof p, "%s/runs", dir);
    if (!(d = opendir(p)))
        return 0;
    while ((x = readdir(d)))
        n += x->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Starts moetune with args in its own process group, stdout and stderr
 * into out and err (paths). */
static pid_t start(const char *const *args, const char *out, const char *err)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    char *argv[40];
    pid_t pid;
    size_t i;
    argv[0] = (char *)MT_MOETUNE_BIN;
    for (i = 0; args[i] && i < 38; i++)
        argv[i + 1] = (char *)args[i];
    argv[i + 1] = NULL;
    setenv("MOETUNE_SIM", MT_SIM_BIN, 1);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawnattr_init(&at);
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
    ck_assert_int_eq(posix_spawn(&pid, MT_MOETUNE_BIN, &fa, &at, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    return pid;
}

typedef struct out {
    int status; /* exit status; 1000 + N: killed by signal N */
    char *out, *err;
} out;

static out finish(pid_t pid, const char *o, const char *e)
{
    out r;
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 1000 + WTERMSIG(st);
    r.out = tk_slurp(o);
    r.err = tk_slurp(e);
    ck_assert_ptr_nonnull(r.out);
    ck_assert_ptr_nonnull(r.err);
    return r;
}

/* Runs moetune to completion. */
static out moetune(const char *const *args)
{
    char o[] = "/tmp/moetune-guard-out-XXXXXX", e[] = "/tmp/moetune-guard-err-XXXXXX";
    int fo = mkstemp(o), fe = mkstemp(e);
    out r;
    close(fo), close(fe);
    r = finish(start(args, o, e), o, e);
    unlink(o), unlink(e);
    return r;
}

static void out_free(out *r)
{
    free(r->out);
    free(r->err);
}

static void has(const char *text, const char *want)
{
    /* (Check's messages are short: the end of the text, where errors are) */
    size_t n = strlen(text);
    ck_assert_msg(strstr(text, want) != NULL, "\"%s\" not in:\n%s", want,
                  n > 2000 ? text + n - 2000 : text);
}

/* Waits (at most 60 s) until the tune in dir has started and `runs` of its
 * jobs have begun. */
static void wait_running(const char *dir, int runs)
{
    double t0 = now_s();
    while (!(exists(dir, "status.json") && count_run_dirs(dir) >= runs)) {
        ck_assert_msg(!exists(dir, "bundle.json"), "%s: the tune finished too soon", dir);
        ck_assert_msg(now_s() - t0 < 60, "%s: the tune did not start", dir);
        sleep_ms(2);
    }
}

/* Whether a live process of group pgid exists: from /proc, zombies not
 * counted (an orphan's zombie waits for whichever init reaps it; in a PID
 * namespace that may be slow or never). */
static int group_alive(pid_t pgid)
{
    DIR *d = opendir("/proc");
    struct dirent *x;
    int found = 0;
    ck_assert_ptr_nonnull(d);
    while (!found && (x = readdir(d))) {
        char path[300], buf[1024], *p, state;
        long pgrp;
        FILE *f;
        size_t n;
        if (x->d_name[0] < '0' || x->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/stat", x->d_name);
        if (!(f = fopen(path, "r")))
            continue;
        n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        /* pid (comm) state ppid pgrp ...: comm may hold anything but ')' ends it */
        if (!(p = strrchr(buf, ')')) || sscanf(p + 1, " %c %*d %ld", &state, &pgrp) != 2)
            continue;
        found = pgrp == (long)pgid && state != 'Z' && state != 'X';
    }
    closedir(d);
    return found;
}

/* Whether any live process of group pgid is left, waiting up to 30 s for
 * them to go (a stopped run's shepherd gives its job a grace period). */
static int group_left(pid_t pgid)
{
    double t0 = now_s();
    while (now_s() - t0 < 30) {
        if (!group_alive(pgid))
            return 0;
        sleep_ms(20);
    }
    return 1;
}

static int executed_now(const char *text)
{
    const char *p = strstr(text, " executed now)");
    if (!p)
        return -1;
    while (p > text && p[-1] != '(')
        p--;
    return atoi(p);
}

static size_t store_runs(const char *dir)
{
    mt_diag *d = mt_diag_new();
    mt_store *st = mt_store_open(dir, NULL, d);
    mt_store_run *v = NULL;
    size_t n = 0;
    ck_assert_msg(st != NULL, "%s", mt_diag_count(d) ? mt_diag_at(d, 0)->message : "");
    ck_assert_int_eq(mt_store_list_runs(st, NULL, NULL, &v, &n, d), 0);
    mt_store_runs_free(v, n);
    mt_store_destroy(&st);
    mt_diag_destroy(&d);
    return n;
}

static char *recipe_of(const char *dir)
{
    cJSON *b = tk_bundle(dir);
    char *s = cJSON_PrintUnformatted(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(b, "recipe"), "config"));
    cJSON_Delete(b);
    return s;
}

static cJSON *status_json(const char *dir)
{
    char p[4096], *text;
    cJSON *o;
    snprintf(p, sizeof p, "%s/status.json", dir);
    text = tk_slurp(p);
    ck_assert_ptr_nonnull(text);
    o = cJSON_Parse(text);
    free(text);
    ck_assert_ptr_nonnull(o);
    return o;
}

static const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(x) ? x->valuestring : "";
}

/* A finished tune of tune-small.cfg in base/name (the environment as it is). */
static void finished_tune(const char *dir)
{
    const char *args[] = {"tune", SMALL, "--dir", dir, "--quiet", NULL};
    out r = moetune(args);
    ck_assert_msg(r.status == 0, "exit %d\n%s", r.status, r.err);
    out_free(&r);
}

/* ---- 1. one owner per directory ----------------------------------------------------------- */

/* The race: a tune, and a resume of its directory while it runs. */
START_TEST(a_second_process_on_a_tune_directory_is_refused)
{
    char base[256], dir[300], o1[320], e1[320], want[128];
    const char *tune[] = {"tune", SMALL, "--dir", dir, "--quiet", NULL};
    const char *resume[] = {"tune", "--resume", dir, "--quiet", NULL};
    const char *again[] = {"tune", SMALL, "--dir", dir, "--quiet", NULL};
    pid_t first;
    out r;
    int st;
    fresh(base, sizeof base, "race");
    snprintf(dir, sizeof dir, "%s/D", base);
    snprintf(o1, sizeof o1, "%s/first.out", base);
    snprintf(e1, sizeof e1, "%s/first.err", base);
    setenv("MOETUNE_SIM_TIME_SCALE", SLOW_SCALE, 1);
    first = start(tune, o1, e1);
    wait_running(dir, 1);
    r = moetune(resume);
    ck_assert_msg(r.status == 75, "exit %d, not 75:\n%s", r.status, r.err);
    has(r.err, dir);
    snprintf(want, sizeof want, "owned by process %ld", (long)first);
    has(r.err, want);
    out_free(&r);
    /* a new tune into it: refused too (it holds a tune, and it is owned) */
    r = moetune(again);
    ck_assert_msg(r.status == 75 || r.status == 2, "exit %d:\n%s", r.status, r.err);
    out_free(&r);
    ck_assert_int_eq(waitpid(first, &st, WNOHANG), 0); /* the owner runs on */
    /* kill -9 of the owner (and its group): the kernel releases the lock, a
     * resume takes the directory at once and finishes the tune */
    ck_assert_int_eq(kill(-first, SIGKILL), 0);
    ck_assert_int_eq(waitpid(first, &st, 0), first);
    ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    ck_assert_msg(!group_left(first), "a job of the killed tune is still running");
    {
        size_t stored = store_runs(dir);
        r = moetune(resume);
        ck_assert_msg(r.status == 0, "exit %d:\n%s", r.status, r.err);
        /* nothing ran twice: what the resume executed plus what was stored */
        ck_assert_uint_eq((size_t)executed_now(r.out) + stored, store_runs(dir));
        out_free(&r);
    }
    rm_rf(base);
}
END_TEST

/* A directory another process owns (this test's process holds the lock):
 * tune and bisect both refuse it at once, naming the owner's PID. */
START_TEST(an_owned_directory_is_refused_by_tune_and_bisect)
{
    char base[256], dir[300], revs[320], want[128];
    const char *tune[] = {"tune", SMALL, "--dir", dir, "--quiet", NULL};
    const char *bisect[] = {"bisect", BISECT, "--good", "a", "--bad",   "b",
                            "--revs", revs,   "--dir",  dir, "--quiet", NULL};
    mt_diag *d = mt_diag_new();
    pid_t owner = -1;
    FILE *f;
    out r;
    int fd;
    fresh(base, sizeof base, "owned");
    snprintf(dir, sizeof dir, "%s/D", base);
    snprintf(revs, sizeof revs, "%s/revs", base);
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    ck_assert_ptr_nonnull(f = fopen(revs, "w"));
    fputs("a\nb\n", f);
    fclose(f);
    fd = mt_dirlock_acquire(dir, "tune", &owner, d);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(mt_dirlock_owner(dir, &owner), 1);
    ck_assert_int_eq(owner, getpid());
    snprintf(want, sizeof want, "owned by process %ld", (long)getpid());
    r = moetune(tune);
    ck_assert_msg(r.status == 75, "tune: exit %d, not 75:\n%s", r.status, r.err);
    has(r.err, dir);
    has(r.err, want);
    ck_assert(!exists(dir, "moetune.db")); /* refused before anything was written */
    out_free(&r);
    r = moetune(bisect);
    ck_assert_msg(r.status == 75, "bisect: exit %d, not 75:\n%s", r.status, r.err);
    has(r.err, dir);
    has(r.err, want);
    has(r.err, "bisection");
    out_free(&r);
    /* released: the tune runs */
    mt_dirlock_release(&fd);
    ck_assert_int_eq(fd, -1);
    ck_assert_int_eq(mt_dirlock_owner(dir, &owner), 0);
    r = moetune(tune);
    ck_assert_msg(r.status == 0, "exit %d:\n%s", r.status, r.err);
    out_free(&r);
    mt_diag_destroy(&d);
    rm_rf(base);
}
END_TEST

/* ---- 2. the recorded environment ---------------------------------------------------------- */

START_TEST(a_resume_with_another_environment_is_refused)
{
    char base[256], dir[300];
    const char *resume[] = {"tune", "--resume", dir, "--quiet", NULL};
    out r;
    fresh(base, sizeof base, "env");
    snprintf(dir, sizeof dir, "%s/D", base);
    unsetenv("MOETUNE_SIM_STEP_SCALE");
    setenv("NCCL_ALGO", "Ring", 1);
    finished_tune(dir);
    /* the case: a sim setting that makes every step faster */
    setenv("MOETUNE_SIM_STEP_SCALE", "0.5", 1);
    r = moetune(resume);
    ck_assert_msg(r.status == 2, "exit %d, not 2:\n%s%s", r.status, r.out, r.err);
    has(r.err, "MOETUNE_SIM_STEP_SCALE: recorded unset, now '0.5'");
    has(r.err, "1 differs");
    ck_assert_ptr_null(strstr(r.out, "bundle:"));
    out_free(&r);
    /* a recorded one changed, and one gone */
    unsetenv("MOETUNE_SIM_STEP_SCALE");
    setenv("NCCL_ALGO", "Tree", 1);
    r = moetune(resume);
    ck_assert_msg(r.status == 2, "exit %d:\n%s", r.status, r.err);
    has(r.err, "NCCL_ALGO: recorded 'Ring', now 'Tree'");
    out_free(&r);
    unsetenv("NCCL_ALGO");
    r = moetune(resume);
    ck_assert_msg(r.status == 2, "exit %d:\n%s", r.status, r.err);
    has(r.err, "NCCL_ALGO: recorded 'Ring', now unset");
    out_free(&r);
    /* launcher and placement variables pass without entering the record */
    setenv("NCCL_ALGO", "Ring", 1);
    setenv("CUDA_VISIBLE_DEVICES", "3", 1);
    setenv("MASTER_PORT", "29777", 1);
    setenv("SLURM_JOB_ID", "12345", 1);
    r = moetune(resume);
    ck_assert_msg(r.status == 0, "exit %d:\n%s", r.status, r.err);
    ck_assert_int_eq(executed_now(r.out), 0);
    out_free(&r);
    unsetenv("NCCL_ALGO");
    unsetenv("CUDA_VISIBLE_DEVICES");
    unsetenv("MASTER_PORT");
    unsetenv("SLURM_JOB_ID");
    rm_rf(base);
}
END_TEST

/* What a run sees: the contract's environment and the pass-through list,
 * nothing else of the caller's; a result-changing variable that is a knob
 * (env.CUDA_DEVICE_MAX_CONNECTIONS, host plugin) is the config's alone.  The
 * launch template prints the run's environment into its log, then runs the
 * sim. */
START_TEST(a_run_sees_the_contract_environment_and_the_pass_through_list)
{
    char base[256], dir[300], log[1024], *text, *cfg, *contract;
    const char *measure[] = {"measure", NULL, "--dir", dir, NULL};
    const char *from = "template = [\"{sim}\", \"{args}\"];";
    const char *to = "template = [\"/bin/sh\", \"-c\", \"env; exec \\\"$0\\\" \\\"$@\\\"\", "
                     "\"{sim}\", \"{args}\"];\n  env = { MT_FROM_CONTRACT = \"yes\"; };";
    char *at;
    out r;
    fresh(base, sizeof base, "jobenv");
    snprintf(dir, sizeof dir, "%s/M", base);
    ck_assert_ptr_nonnull(text = tk_slurp(SMALL));
    ck_assert_ptr_nonnull(at = strstr(text, from));
    ck_assert_int_ne(asprintf(&cfg, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from)),
                     -1);
    contract = tk_write_temp("jobenv.cfg", cfg);
    measure[1] = contract;
    setenv("MT_GUARD_PRIVATE", "secret", 1);
    setenv("NCCL_MT_GUARD", "1", 1);
    setenv("MASTER_PORT", "29501", 1);
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "7", 1);
    r = moetune(measure);
    ck_assert_msg(r.status == 0, "exit %d:\n%s%s", r.status, r.out, r.err);
    out_free(&r);
    snprintf(log, sizeof log, "%s/runs/%s", dir, "");
    {
        DIR *d = opendir(log);
        struct dirent *x;
        char *env = NULL, *text2;
        ck_assert_ptr_nonnull(d);
        while ((x = readdir(d)))
            if (x->d_name[0] != '.') {
                snprintf(log, sizeof log, "%s/runs/%s/stdout.log", dir, x->d_name);
                text2 = tk_slurp(log);
                ck_assert_ptr_nonnull(text2);
                /* one variable a line, each after a newline */
                ck_assert_int_ne(asprintf(&env, "\n%s", text2), -1);
                free(text2);
                break;
            }
        closedir(d);
        ck_assert_ptr_nonnull(env);
        has(env, "\nMT_FROM_CONTRACT=yes\n");
        has(env, "\nNCCL_MT_GUARD=1\n");
        has(env, "\nMASTER_PORT=29501\n");
        has(env, "\nPATH=");
        ck_assert_msg(!strstr(env, "MT_GUARD_PRIVATE"), "a dropped variable reached the run");
        ck_assert_msg(!strstr(env, "CUDA_DEVICE_MAX_CONNECTIONS=7"),
                      "the caller's value of a knob reached the run");
        free(env);
    }
    unsetenv("MT_GUARD_PRIVATE");
    unsetenv("NCCL_MT_GUARD");
    unsetenv("MASTER_PORT");
    unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
    unlink(contract);
    free(contract);
    free(cfg);
    free(text);
    rm_rf(base);
}
END_TEST

/* ---- 3. a resume's options ---------------------------------------------------------------- */

START_TEST(a_resume_refuses_options_that_contradict_the_stored_tune)
{
    char base[256], dir[300];
    const char *contra[] = {"tune",   "--resume", dir,       "--strategy", "grid",
                            "--seed", "5",        "--quiet", NULL};
    const char *budget[] = {"tune", "--resume", dir, "--runs", "17", "--quiet", NULL};
    const char *same[] = {"tune", "--resume", dir,   "--strategy", "ofat", "--seed",
                          "0",    "--runs",   "400", "--quiet",    NULL};
    out r;
    fresh(base, sizeof base, "opts");
    snprintf(dir, sizeof dir, "%s/D", base);
    finished_tune(dir);
    r = moetune(contra);
    ck_assert_msg(r.status == 2, "exit %d, not 2:\n%s%s", r.status, r.out, r.err);
    has(r.err, "--strategy grid contradicts the stored tune (strategy ofat)");
    has(r.err, "--seed 5 contradicts the stored tune (seed 0)");
    has(r.err, "drop those options");
    out_free(&r);
    r = moetune(budget);
    ck_assert_msg(r.status == 2, "exit %d:\n%s", r.status, r.err);
    has(r.err, "--runs 17 contradicts the stored tune (400 runs, the contract's budget)");
    out_free(&r);
    /* the stored values given again (400 runs is the contract's budget) */
    r = moetune(same);
    ck_assert_msg(r.status == 0, "exit %d:\n%s", r.status, r.err);
    ck_assert_int_eq(executed_now(r.out), 0);
    out_free(&r);
    rm_rf(base);
}
END_TEST

/* ---- 9. SIGTERM and SIGINT ---------------------------------------------------------------- */

/* Stops a slow tune of dir with sig (to its process group when group, as a
 * terminal's ^C does; else to moetune alone); checks the message, the exit
 * status and status.json; returns its stderr (caller frees). */
static char *stop_tune(const char *base, const char *dir, int sig, int group)
{
    char o[320], e[320], want[512];
    const char *tune[] = {"tune", SMALL, "--dir", dir, "--quiet", NULL};
    const char *status[] = {"status", dir, NULL};
    const char *name = sig == SIGTERM ? "SIGTERM" : "SIGINT";
    pid_t pid;
    cJSON *st;
    out r;
    snprintf(o, sizeof o, "%s/stop.out", base);
    snprintf(e, sizeof e, "%s/stop.err", base);
    pid = start(tune, o, e);
    wait_running(dir, 3);
    ck_assert_int_eq(kill(group ? -pid : pid, sig), 0);
    r = finish(pid, o, e);
    ck_assert_msg(r.status == 128 + sig, "exit %d, not %d:\n%s", r.status, 128 + sig, r.err);
    snprintf(want, sizeof want, "stopped by %s during ", name);
    has(r.err, want);
    snprintf(want, sizeof want, "resume with: moetune tune --resume %s\n", dir);
    has(r.err, want);
    /* nothing of the tune is left running: no moetune, no shepherd, no sim */
    ck_assert_msg(!group_left(pid), "a process of the stopped tune is still running");
    st = status_json(dir);
    ck_assert_str_eq(jstr(st, "phase"), "stopped");
    ck_assert_str_eq(jstr(st, "signal"), name);
    ck_assert_msg(jstr(st, "interrupted")[0] && strcmp(jstr(st, "interrupted"), "stopped"),
                  "interrupted: '%s'", jstr(st, "interrupted"));
    snprintf(want, sizeof want, "moetune tune --resume %s", dir);
    ck_assert_str_eq(jstr(st, "resume"), want);
    cJSON_Delete(st);
    out_free(&r);
    r = moetune(status);
    ck_assert_int_eq(r.status, 0);
    snprintf(want, sizeof want, "stopped: by %s during ", name);
    has(r.out, want);
    ck_assert_ptr_null(strstr(r.out, "finished:"));
    out_free(&r);
    return tk_slurp(e);
}

START_TEST(sigterm_stops_a_tune_that_then_resumes_to_the_same_recipe)
{
    char base[256], ref[300], dir[300], *ref_recipe, *rec, *err;
    const char *resume[] = {"tune", "--resume", dir, "--quiet", NULL};
    size_t stored, ref_runs;
    out r;
    fresh(base, sizeof base, "term");
    snprintf(ref, sizeof ref, "%s/ref", base);
    snprintf(dir, sizeof dir, "%s/D", base);
    /* the reference: the same tune uninterrupted (the time scale only sleeps) */
    unsetenv("MOETUNE_SIM_TIME_SCALE");
    finished_tune(ref);
    ref_recipe = recipe_of(ref);
    ref_runs = store_runs(ref);
    setenv("MOETUNE_SIM_TIME_SCALE", SLOW_SCALE, 1);
    err = stop_tune(base, dir, SIGTERM, 0);
    free(err);
    stored = store_runs(dir);
    ck_assert_uint_lt(stored, ref_runs);
    r = moetune(resume);
    ck_assert_msg(r.status == 0, "exit %d:\n%s", r.status, r.err);
    ck_assert_uint_eq((size_t)executed_now(r.out) + stored, ref_runs);
    ck_assert_uint_eq(store_runs(dir), ref_runs);
    rec = recipe_of(dir);
    ck_assert_str_eq(rec, ref_recipe);
    out_free(&r);
    free(rec);
    free(ref_recipe);
    rm_rf(base);
}
END_TEST

START_TEST(sigint_to_the_group_stops_a_tune_with_its_resume_command)
{
    char base[256], dir[300], *err;
    fresh(base, sizeof base, "int");
    snprintf(dir, sizeof dir, "%s/D", base);
    setenv("MOETUNE_SIM_TIME_SCALE", SLOW_SCALE, 1);
    err = stop_tune(base, dir, SIGINT, 1);
    ck_assert_ptr_nonnull(err);
    free(err);
    rm_rf(base);
}
END_TEST

/* A tune killed without a word (kill -9): status says it is not running. */
START_TEST(status_of_a_killed_tune_says_it_is_not_running)
{
    char base[256], dir[300], o[320], e[320];
    const char *tune[] = {"tune", SMALL, "--dir", dir, "--quiet", NULL};
    const char *status[] = {"status", dir, NULL};
    pid_t pid;
    out r;
    fresh(base, sizeof base, "dead");
    snprintf(dir, sizeof dir, "%s/D", base);
    snprintf(o, sizeof o, "%s/t.out", base);
    snprintf(e, sizeof e, "%s/t.err", base);
    setenv("MOETUNE_SIM_TIME_SCALE", SLOW_SCALE, 1);
    pid = start(tune, o, e);
    wait_running(dir, 2);
    r = moetune(status);
    ck_assert_ptr_null(strstr(r.out, "not running"));
    out_free(&r);
    ck_assert_int_eq(kill(-pid, SIGKILL), 0);
    r = finish(pid, o, e);
    ck_assert_int_eq(r.status, 1000 + SIGKILL);
    out_free(&r);
    r = moetune(status);
    ck_assert_int_eq(r.status, 0);
    has(r.out, "not running: process ");
    has(r.out, "resume with: moetune tune --resume ");
    out_free(&r);
    ck_assert(!group_left(pid));
    rm_rf(base);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tune_guard");
    TCase *owner = tcase_create("owner"), *env = tcase_create("environment");
    TCase *opts = tcase_create("options"), *stop = tcase_create("stop");
    tcase_set_timeout(owner, 240);
    tcase_set_timeout(env, 240);
    tcase_set_timeout(opts, 240);
    tcase_set_timeout(stop, 240);
    tcase_add_test(owner, a_second_process_on_a_tune_directory_is_refused);
    tcase_add_test(owner, an_owned_directory_is_refused_by_tune_and_bisect);
    tcase_add_test(env, a_resume_with_another_environment_is_refused);
    tcase_add_test(env, a_run_sees_the_contract_environment_and_the_pass_through_list);
    tcase_add_test(opts, a_resume_refuses_options_that_contradict_the_stored_tune);
    tcase_add_test(stop, sigterm_stops_a_tune_that_then_resumes_to_the_same_recipe);
    tcase_add_test(stop, sigint_to_the_group_stops_a_tune_with_its_resume_command);
    tcase_add_test(stop, status_of_a_killed_tune_says_it_is_not_running);
    suite_add_tcase(s, owner);
    suite_add_tcase(s, env);
    suite_add_tcase(s, opts);
    suite_add_tcase(s, stop);
    return tk_run(s);
}
