/*
 * test_window.c - the steps each summary used are the declared window, for
 * every executor.
 *
 * A job's memo records which iterations its median step time covers
 * (window {first, last, n}: workers/measure.c for the processes the local and
 * ZeroMQ executors run, search/exec.c for the model executor).  The contract
 * declares each kind's window (screen: the iterations after the warm-up;
 * validate: first..last, which the bundle repeats as validation.window); the
 * gain, its p value and "confirmed" come from those medians, so a summary
 * that takes one step more or fewer than declared misreports them while
 * every figure still looks plausible.
 *
 * Each executor runs a short tune of tests/contracts/tune-small.cfg (a run
 * budget of 48: the fit probe, the profile, the screens the budget leaves
 * and the validation with its natural-routing arms), and every "ok" memo
 * of its store must cover exactly its kind's declared window, one sample per
 * step.  The bundle's budget must be what those jobs charged (one run each,
 * their GPU-hours summed), with the validation's first look (and as much for
 * its natural-routing arms) kept in reserve by the search; and a run that
 * stops short of its window's last step is no "ok" run:
 *   model: mt_tune in process (MT_EXEC_MODEL), and mt_model_job per kind;
 *   local: mt_tune in process (MT_EXEC_LOCAL): real moetune-sim processes;
 *   zmq:   mt_tune in process (MT_EXEC_ZMQ) with one real `moetune worker`
 *          process on 127.0.0.1.
 */
#include "engine.h"
#include "logparse.h"
#include "measure.h"
#include "testkit.h"

#include <arpa/inet.h>
#include <check.h>
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef MT_SIM_BIN
#error "MT_SIM_BIN must name the built moetune-sim"
#endif

#define SMALL MT_SOURCE_DIR "/tests/contracts/tune-small.cfg"
#define RUNS 48                 /* fit, profile, a few screens, the validation (see the header) */
#define VALIDATION_REPLICATES 6 /* per arm at the validation's first look (search/engine.c) */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st, (void)ftw;
    return type == FTW_DP ? rmdir(path) : unlink(path);
}

static void rm_rf(const char *dir)
{
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* A fresh directory /tmp/moetune-window-TAG-XXXXXX into base. */
static void fresh(char *base, size_t n, const char *tag)
{
    snprintf(base, n, "/tmp/moetune-window-%s-XXXXXX", tag);
    ck_assert_ptr_nonnull(mkdtemp(base));
}

/* The declared window of a job kind: validate jobs time the validation
 * window, every other kind (fit, profile, screen) the screen window. */
static const mt_window *declared(const mt_contract *c, const char *kind)
{
    return !strcmp(kind, "validate") ? &c->validate : &c->screen;
}

/* One memo against its kind's window; where names the memo in messages. */
static void check_memo(const mt_contract *c, const char *kind, const cJSON *m, const char *where)
{
    const mt_window *w = declared(c, kind);
    const cJSON *win = cJSON_GetObjectItemCaseSensitive(m, "window"), *f, *l, *n;
    ck_assert_msg(cJSON_IsObject(win), "%s: an ok memo without its window", where);
    f = cJSON_GetObjectItemCaseSensitive(win, "first");
    l = cJSON_GetObjectItemCaseSensitive(win, "last");
    n = cJSON_GetObjectItemCaseSensitive(win, "n");
    ck_assert(cJSON_IsNumber(f) && cJSON_IsNumber(l) && cJSON_IsNumber(n));
    ck_assert_msg(f->valueint == w->first && l->valueint == w->last,
                  "%s: the median covers steps %d-%d, the contract declares %d-%d", where,
                  f->valueint, l->valueint, w->first, w->last);
    ck_assert_msg(n->valueint == w->last - w->first + 1, "%s: %d samples over steps %d-%d", where,
                  n->valueint, w->first, w->last);
}

typedef struct seen {
    int screen, validate, other;
    int jobs;          /* every job memo, whatever its outcome */
    int validate_jobs; /* those of the validation */
    double gpu_hours;  /* what they charged */
} seen;

/* Every job memo in DIR/moetune.db against the contract; counts the ok
 * ones by kind into s. */
static void check_store(const mt_contract *c, const char *dir, seen *s)
{
    char path[600], where[700];
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    memset(s, 0, sizeof *s);
    snprintf(path, sizeof path, "%s/moetune.db", dir);
    ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    ck_assert_int_eq(
        sqlite3_prepare_v2(db, "SELECT key, value FROM memo WHERE key LIKE 'job/%'", -1, &q, NULL),
        SQLITE_OK);
    while (sqlite3_step(q) == SQLITE_ROW) {
        const char *key = (const char *)sqlite3_column_text(q, 0);
        cJSON *m = cJSON_Parse((const char *)sqlite3_column_text(q, 1));
        const cJSON *outcome = cJSON_GetObjectItemCaseSensitive(m, "outcome");
        char kind[32] = "";
        ck_assert_ptr_nonnull(m);
        /* job/KIND/CONFIG/REPLICATE (search/exec.c mt_exec_job_key) */
        ck_assert_int_eq(sscanf(key, "job/%31[^/]/", kind), 1);
        s->jobs++;
        s->validate_jobs += !strcmp(kind, "validate");
        if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(m, "gpu_hours")))
            s->gpu_hours += cJSON_GetObjectItemCaseSensitive(m, "gpu_hours")->valuedouble;
        if (cJSON_IsString(outcome) && !strcmp(outcome->valuestring, "ok")) {
            snprintf(where, sizeof where, "%s (%s)", key, dir);
            check_memo(c, kind, m, where);
            if (!strcmp(kind, "screen"))
                s->screen++;
            else if (!strcmp(kind, "validate"))
                s->validate++;
            else
                s->other++;
        }
        cJSON_Delete(m);
    }
    sqlite3_finalize(q);
    sqlite3_close(db);
    /* both windows were exercised */
    ck_assert_int_gt(s->screen, 0);
    ck_assert_int_gt(s->validate, 0);
}

/* The bundle's declared validation window is the contract's, and its budget
 * is what the jobs charged: one run per job, their GPU-hours summed. */
static void check_bundle(const mt_contract *c, const char *dir, const seen *s)
{
    cJSON *b = tk_bundle(dir);
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(b, "validation"), "window");
    const cJSON *budget = cJSON_GetObjectItemCaseSensitive(b, "budget");
    const cJSON *runs = cJSON_GetObjectItemCaseSensitive(budget, "runs_used");
    const cJSON *gh = cJSON_GetObjectItemCaseSensitive(budget, "gpu_hours_used");
    ck_assert_msg(cJSON_IsArray(w) && cJSON_GetArraySize(w) == 2, "no validation.window");
    ck_assert_int_eq(cJSON_GetArrayItem(w, 0)->valueint, c->validate.first);
    ck_assert_int_eq(cJSON_GetArrayItem(w, 1)->valueint, c->validate.last);
    ck_assert(cJSON_IsNumber(runs) && cJSON_IsNumber(gh));
    ck_assert_msg(runs->valueint == s->jobs, "%s: budget.runs_used %d, %d jobs stored", dir,
                  runs->valueint, s->jobs);
    ck_assert_msg(fabs(gh->valuedouble - s->gpu_hours) <= 1e-9 * s->gpu_hours,
                  "%s: budget.gpu_hours_used %.9g, the jobs charged %.9g", dir, gh->valuedouble,
                  s->gpu_hours);
    /* the run budget binds the search, which keeps the validation's first
     * look (two arms of six replicates) and as much again for its
     * natural-routing arms (tune-small.cfg forces balance) in reserve,
     * whatever else is left; the GPU-hours (600) are far from binding here */
    ck_assert_msg(s->jobs - s->validate_jobs + 4 * VALIDATION_REPLICATES <= RUNS,
                  "%s: the search ran %d jobs of a budget of %d runs", dir,
                  s->jobs - s->validate_jobs, RUNS);
    /* the reserve it stopped at covers the validation's first look, both
     * arms, and its natural-routing arms */
    {
        int used = 0, of = 0, kept = -1;
        const char *why = cJSON_GetObjectItemCaseSensitive(budget, "stopped_because")->valuestring;
        ck_assert_msg(sscanf(why, "run budget (%d used of %d, %d kept", &used, &of, &kept) == 3,
                      "%s: stopped because %s", dir, why);
        ck_assert_msg(kept >= 4 * VALIDATION_REPLICATES, "%s: %d runs kept in reserve, under %d",
                      dir, kept, 4 * VALIDATION_REPLICATES);
    }
    /* and the reserve is what lets validation run inside the budget */
    ck_assert_msg(runs->valueint <= RUNS, "%s: %d runs used of a budget of %d", dir,
                  runs->valueint, RUNS);
    /* the baseline is always validated, the winner beside it when there is one */
    ck_assert_int_ge(s->validate_jobs, VALIDATION_REPLICATES);
    ck_assert_msg(!strncmp(cJSON_GetObjectItemCaseSensitive(budget, "stopped_because")->valuestring,
                           "run budget", 10),
                  "%s: stopped because %s", dir,
                  cJSON_GetObjectItemCaseSensitive(budget, "stopped_because")->valuestring);
    cJSON_Delete(b);
}

static tk *small(void)
{
    mt_diag *d = mt_diag_new();
    tk *t = tk_open_path(SMALL, d);
    ck_assert_msg(t != NULL, "%s: %s", SMALL, mt_diag_count(d) ? mt_diag_at(d, 0)->message : "");
    mt_diag_destroy(&d);
    /* one sample per step: moetune measures with --log-interval 1 */
    ck_assert_int_eq(t->contract->log_interval, 1);
    /* the windows differ, so a job timed over the other kind's shows */
    ck_assert(t->contract->screen.first != t->contract->validate.first);
    return t;
}

/* Runs the tune with o (dir and executor set by the caller), then checks its
 * store and bundle. */
static void tune_and_check(tk *t, mt_tune_opts *o)
{
    mt_tune_result res;
    mt_diag *d = mt_diag_new();
    seen s;
    o->runs = RUNS;
    o->exec.sim_path = MT_SIM_BIN;
    ck_assert_msg(mt_tune(t->reg, t->contract, o, &res, d) == 0, "%s",
                  mt_diag_count(d) ? mt_diag_at(d, 0)->message : "");
    mt_tune_result_clear(&res);
    mt_diag_destroy(&d);
    check_store(t->contract, o->dir, &s);
    check_bundle(t->contract, o->dir, &s);
}

/* ---- the model executor -----------------------------------------------------------------------
 */

START_TEST(model_jobs_cover_the_declared_window)
{
    static const char *const kinds[] = {"screen", "validate", "profile", "fit"};
    tk *t = small();
    size_t i;
    for (i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        char *text = mt_model_job(t->contract, t->cfg, kinds[i], 0, 0);
        cJSON *m = cJSON_Parse(text);
        ck_assert_ptr_nonnull(m);
        ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(m, "outcome")->valuestring, "ok");
        check_memo(t->contract, kinds[i], m, kinds[i]);
        cJSON_Delete(m);
        free(text);
    }
    tk_close(&t);
}
END_TEST

START_TEST(model_tune_covers_the_declared_window)
{
    char base[256], dir[300];
    mt_tune_opts o;
    tk *t = small();
    fresh(base, sizeof base, "model");
    snprintf(dir, sizeof dir, "%s/T", base);
    mt_tune_opts_init(&o);
    o.dir = dir;
    o.exec.executor = MT_EXEC_MODEL;
    tune_and_check(t, &o);
    tk_close(&t);
    rm_rf(base);
}
END_TEST

/* ---- the local executor: moetune-sim processes through workers/measure.c ----------------------
 */

/* A log of iterations 1..last, one Megatron-LM iteration line each. */
static mt_logparse *log_up_to(int last)
{
    mt_logparse *p = mt_logparse_new();
    char line[512];
    int i;
    for (i = 1; i <= last; i++) {
        int n = snprintf(line, sizeof line,
                         " [2026-03-01 10:00:%02d.000001] iteration %8d/      20 | consumed "
                         "samples: %8d | elapsed time per iteration (ms): 7012.3 | lm loss: "
                         "2.345678E+00 | number of skipped iterations:   0 | number of nan "
                         "iterations:   0 |\n",
                         i % 60, i, 512 * i);
        mt_logparse_feed(p, line, (size_t)n);
    }
    mt_logparse_finish(p);
    return p;
}

/* A run that exits 0 without logging its window's last step did not measure
 * the declared window: not "ok", whatever its median says. */
START_TEST(a_run_short_of_its_window_is_not_ok)
{
    mt_run_result run;
    mt_logparse *p;
    char ev[256];
    memset(&run, 0, sizeof run);
    run.outcome = MT_OUTCOME_OK;
    run.exited = 1;
    p = log_up_to(19);
    ck_assert_int_eq(mt_measure_classify(&run, p, 11, 20, ev, sizeof ev), MT_OUTCOME_CRASH);
    ck_assert_msg(strstr(ev, "ended at iteration 19, before its window ended (20)"), "%s", ev);
    mt_logparse_destroy(&p);
    p = log_up_to(20);
    ck_assert_int_eq(mt_measure_classify(&run, p, 11, 20, ev, sizeof ev), MT_OUTCOME_OK);
    mt_logparse_destroy(&p);
}
END_TEST

START_TEST(local_tune_covers_the_declared_window)
{
    char base[256], dir[300];
    mt_tune_opts o;
    tk *t = small();
    fresh(base, sizeof base, "local");
    snprintf(dir, sizeof dir, "%s/T", base);
    mt_tune_opts_init(&o);
    o.dir = dir;
    o.exec.executor = MT_EXEC_LOCAL;
    o.exec.slots = 2;
    tune_and_check(t, &o);
    tk_close(&t);
    rm_rf(base);
}
END_TEST

/* ---- the ZeroMQ executor: one `moetune worker` process ----------------------------------------
 */

static int free_port(void)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int s = socket(AF_INET, SOCK_STREAM, 0), port;
    ck_assert_int_ge(s, 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(getsockname(s, (struct sockaddr *)&a, &len), 0);
    port = ntohs(a.sin_port);
    close(s);
    return port;
}

/* `moetune worker --connect EP --name w1 --dir WDIR`, output to LOG, in a
 * process group of its own that dies with this process. */
static pid_t worker_start(const char *ep, const char *wdir, const char *log)
{
    pid_t parent = getpid(), pid;
    fflush(NULL);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int fd;
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
            _exit(127);
        setenv("MOETUNE_SIM", MT_SIM_BIN, 1);
        execl(MT_MOETUNE_BIN, MT_MOETUNE_BIN, "worker", "--connect", ep, "--name", "w1", "--dir",
              wdir, (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid);
    return pid;
}

START_TEST(zmq_tune_covers_the_declared_window)
{
    char base[256], dir[300], wdir[300], log[300], ep[64];
    mt_tune_opts o;
    tk *t = small();
    pid_t w;
    int st = 0;
    double t0;
    fresh(base, sizeof base, "zmq");
    snprintf(dir, sizeof dir, "%s/T", base);
    snprintf(wdir, sizeof wdir, "%s/w1", base);
    snprintf(log, sizeof log, "%s/w1.log", base);
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", free_port());
    w = worker_start(ep, wdir, log);
    mt_tune_opts_init(&o);
    o.dir = dir;
    o.exec.executor = MT_EXEC_ZMQ;
    o.exec.workers = ep;
    o.exec.worker_wait_s = 60; /* fail, not hang, should the worker never come */
    tune_and_check(t, &o);
    /* the coordinator's goodbye ends the worker */
    for (t0 = now_s(); waitpid(w, &st, WNOHANG) == 0; usleep(20000))
        if (now_s() - t0 > 30) {
            kill(-w, SIGKILL);
            waitpid(w, &st, 0);
            ck_abort_msg("the worker outlived the tune by 30 s:\n%s", tk_slurp(log));
        }
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "worker: %s", tk_slurp(log));
    tk_close(&t);
    rm_rf(base);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("window");
    TCase *model = tcase_create("model"), *local = tcase_create("local"),
          *zmq = tcase_create("zmq");
    tcase_add_test(model, model_jobs_cover_the_declared_window);
    tcase_add_test(model, model_tune_covers_the_declared_window);
    suite_add_tcase(s, model);
    tcase_set_timeout(local, 120);
    tcase_add_test(local, a_run_short_of_its_window_is_not_ok);
    tcase_add_test(local, local_tune_covers_the_declared_window);
    suite_add_tcase(s, local);
    tcase_set_timeout(zmq, 120);
    tcase_add_test(zmq, zmq_tune_covers_the_declared_window);
    suite_add_tcase(s, zmq);
    return tk_run(s);
}
