/*
 * test_runner.c - the runner, launchers, GPU memory and fingerprint with
 * real child processes: a helper that exits, dies of a signal, sleeps,
 * chatters without iterating, and leaves descendants behind that ignore
 * SIGTERM (also after setsid); the sim hanging in a collective; srun and
 * scancel against a real Slurm started for the test when it can be.
 *
 * Needs MT_FORKER_BIN (tests/helpers/forker.c built) and MT_SIM_BIN (the
 * built moetune-sim) besides testkit's definitions.  Survivors are found by
 * a unique marker in /proc/<pid>/cmdline.
 */
#include "fingerprint.h"
#include "launch.h"
#include "nvml.h"
#include "runner.h"
#include "testkit.h"

#include <check.h>
#include <cjson/cJSON.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef MT_FORKER_BIN
#error "MT_FORKER_BIN must name the built tests/helpers/forker"
#endif
#ifndef MT_SIM_BIN
#error "MT_SIM_BIN must name the built moetune-sim"
#endif

/* ---- helpers ------------------------------------------------------------------ */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* A marker no other process on the machine carries. */
static void make_marker(char *buf, size_t cap, const char *tag)
{
    static int n;
    snprintf(buf, cap, "mtmark-%s-%ld-%d-%ld", tag, (long)getpid(), ++n, (long)time(NULL));
}

/* Live forker processes whose command line holds marker (srun's own
 * command line holds it too, and is not counted); each is sent sig unless
 * sig is 0. */
static int signal_marked(const char *marker, int sig)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    int count = 0;
    size_t ml = strlen(marker);
    ck_assert_ptr_nonnull(d);
    while ((e = readdir(d)) != NULL) {
        char path[300], buf[4097];
        ssize_t n;
        int fd;
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        memset(buf, 0, sizeof buf);
        n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n > 0 && memmem(buf, (size_t)n, marker, ml) && !strcmp(buf, MT_FORKER_BIN)) {
            if (sig)
                kill((pid_t)strtol(e->d_name, NULL, 10), sig);
            count++;
        }
    }
    closedir(d);
    return count;
}

static int count_marked(const char *marker)
{
    return signal_marked(marker, 0);
}

/* Waits up to ms for no marked process to be left; returns how many are. */
static int wait_unmarked(const char *marker, long ms)
{
    double until = now_s() + (double)ms / 1000.0;
    int n;
    while ((n = count_marked(marker)) > 0 && now_s() < until)
        sleep_ms(20);
    return n;
}

/* Makes l->v usable as an execve argv: a NULL after the last entry (in
 * the list's spare slot, so mt_strlist_clear still frees it all). */
static void null_terminate(mt_strlist *l)
{
    ck_assert_int_eq(mt_strlist_push(l, ""), 0);
    free(l->v[--l->n]);
    l->v[l->n] = NULL;
}

static mt_kv *basic_env(void)
{
    mt_kv *env = mt_kv_new();
    ck_assert_int_eq(mt_launch_environment(MT_LAUNCHER_LOCAL, 0, NULL, env), 0);
    return env;
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st, (void)ftw;
    return type == FTW_DP ? rmdir(path) : unlink(path);
}

/* rm -r dir (a test's own temporary directory) and frees the name. */
static void rm_tree(char *dir)
{
    if (dir)
        nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(dir);
}

static char *temp_dir(const char *tag)
{
    char *p = NULL;
    ck_assert_int_ge(asprintf(&p, "/tmp/moetune-runner-%s-XXXXXX", tag), 0);
    ck_assert_ptr_nonnull(mkdtemp(p));
    return p;
}

/* What a test's line callback saw. */
typedef struct seen {
    mt_run *run;
    mt_strlist out, err;
    const char *marker;
    int marked_at_ready;
    int iterations_seen;
    const char *stop_on;     /* mt_runner_stop when a line contains this */
    int hang_off_after;      /* turn hang detection off after this many iterations */
    const mt_launch *launch; /* mt_launch_hosts at "ready" into hosts */
    mt_strlist hosts;
    int stop_outcome;
    size_t longest;
} seen;

static void on_line(void *ctx, int stream, const char *line, size_t n)
{
    seen *s = ctx;
    ck_assert_uint_eq(strlen(line) <= n, 1);
    ck_assert_int_eq(line[n], '\0');
    if (n > s->longest)
        s->longest = n;
    if (n < 4096)
        mt_strlist_push(stream == MT_STREAM_STDOUT ? &s->out : &s->err, line);
    if (strstr(line, " iteration ")) {
        s->iterations_seen++;
        mt_runner_progress(s->run);
        if (s->hang_off_after && s->iterations_seen == s->hang_off_after)
            mt_runner_set_hang(s->run, 0, 0);
    }
    if (s->marker && strstr(line, "ready")) { /* the last task's "ready" counts */
        s->marked_at_ready = count_marked(s->marker);
        if (s->launch && s->hosts.n == 0)
            ck_assert_int_eq(mt_launch_hosts(s->launch, &s->hosts, NULL), 0);
    }
    if (s->stop_on && strstr(line, s->stop_on))
        mt_runner_stop(s->run, s->stop_outcome, line);
}

static void seen_free(seen *s)
{
    mt_runner_destroy(&s->run);
    mt_strlist_clear(&s->out);
    mt_strlist_clear(&s->err);
    mt_strlist_clear(&s->hosts);
}

/* Runs argv (NULL-terminated) with spec's limits; fills res and s.  The
 * run (owner of res's strings) lives in s until the next run_job or
 * seen_free. */
static void run_job(const char *const *argv, mt_run_spec *spec, seen *s, mt_run_result *res)
{
    mt_diag *d = mt_diag_new();
    mt_kv *env = spec->env ? NULL : basic_env();
    mt_run *run;
    spec->argv = argv;
    if (env)
        spec->env = env;
    spec->on_line = on_line;
    spec->line_ctx = s;
    mt_runner_destroy(&s->run);
    run = mt_runner_start(spec, d);
    ck_assert_msg(run != NULL, "start failed");
    s->run = run;
    ck_assert_int_eq(mt_runner_wait(run, res), 0);
    ck_assert_int_lt(mt_runner_wait(run, NULL), 0); /* only once */
    if (env) {
        mt_kv_destroy(&env);
        spec->env = NULL;
    }
    mt_diag_destroy(&d);
}

/* ---- outcomes ------------------------------------------------------------------- */

START_TEST(outcome_names_round_trip)
{
    static const char *const names[] = {"ok",    "oom",   "nan",          "hang",   "timeout",
                                        "crash", "infra", "launch_error", "skipped"};
    int i;
    for (i = 0; i < MT_OUTCOME_COUNT; i++) {
        ck_assert_str_eq(mt_outcome_name(i), names[i]);
        ck_assert_int_eq(mt_outcome_parse(names[i]), i);
    }
    ck_assert_int_eq(mt_outcome_parse("oops"), -1);
    ck_assert_int_eq(mt_outcome_parse(NULL), -1);
    ck_assert_ptr_null(mt_outcome_name(MT_OUTCOME_COUNT));
    ck_assert_ptr_null(mt_outcome_name(-1));
}
END_TEST

/* ---- process facts ------------------------------------------------------------------ */

START_TEST(normal_run_streams_lines_and_logs)
{
    const char *argv[] = {MT_FORKER_BIN, "lines", "3", "0", NULL};
    char *dir = temp_dir("ok"), *log;
    mt_run_spec spec = {0};
    mt_run_result res;
    seen s = {0};
    spec.run_dir = dir;
    spec.time_limit_s = 20;
    run_job(argv, &spec, &s, &res);
    ck_assert_int_eq(res.outcome, MT_OUTCOME_OK);
    ck_assert_str_eq(res.evidence, "exit status 0");
    ck_assert_int_eq(res.exited, 1);
    ck_assert_int_eq(res.exit_code, 0);
    ck_assert_int_eq(res.signaled, 0);
    ck_assert_int_eq(res.launch_errno, 0);
    ck_assert_int_eq(res.leftovers, 0);
    ck_assert(res.wall_s > 0 && res.wall_s < 5);
    ck_assert_int_eq(res.lines[MT_STREAM_STDOUT], 3);
    ck_assert_int_eq(res.lines[MT_STREAM_STDERR], 3);
    ck_assert_uint_eq(s.out.n, 3);
    ck_assert_str_eq(s.out.v[0], "out 0");
    ck_assert_str_eq(s.out.v[2], "out 2");
    ck_assert_str_eq(s.err.v[1], "err 1");
    ck_assert_ptr_nonnull(res.stdout_log);
    log = tk_slurp(res.stdout_log);
    ck_assert_str_eq(log, "out 0\nout 1\nout 2\n");
    free(log);
    log = tk_slurp(res.stderr_log);
    ck_assert_str_eq(log, "err 0\nerr 1\nerr 2\n");
    free(log);
    seen_free(&s);
    rm_tree(dir);
}
END_TEST

START_TEST(nonzero_exit_is_crash)
{
    const char *argv[] = {MT_FORKER_BIN, "lines", "1", "3", NULL};
    mt_run_spec spec = {0};
    mt_run_result res;
    seen s = {0};
    run_job(argv, &spec, &s, &res);
    ck_assert_int_eq(res.outcome, MT_OUTCOME_CRASH);
    ck_assert_int_eq(res.exited, 1);
    ck_assert_int_eq(res.exit_code, 3);
    ck_assert_str_eq(res.evidence, "exit status 3");
    ck_assert_ptr_null(res.stdout_log); /* no run_dir, no logs */
    ck_assert_uint_eq(s.out.n, 1);
    seen_free(&s);
}
END_TEST

START_TEST(signal_is_crash)
{
    const char *argv[] = {MT_FORKER_BIN, "raise", "11", NULL};
    mt_run_spec spec = {0};
    mt_run_result res;
    seen s = {0};
    run_job(argv, &spec, &s, &res);
    ck_assert_int_eq(res.outcome, MT_OUTCOME_CRASH);
    ck_assert_int_eq(res.exited, 0);
    ck_assert_int_eq(res.signaled, 1);
    ck_assert_int_eq(res.signal, SIGSEGV);
    ck_assert_str_eq(res.evidence, "killed by signal 11 (SIGSEGV)");
    seen_free(&s);
}
END_TEST

START_TEST(missing_program_is_launch_error)
{
    const char *abs[] = {"/nonexistent/moetune-no-such-program", "x", NULL};
    const char *bare[] = {"moetune-no-such-program", NULL};
    mt_run_spec spec = {0};
    mt_run_result res;
    seen s = {0};
    run_job(abs, &spec, &s, &res);
    ck_assert_int_eq(res.outcome, MT_OUTCOME_LAUNCH_ERROR);
    ck_assert_int_eq(res.launch_errno, ENOENT);
    ck_assert_ptr_nonnull(
        strstr(res.evidence, "cannot run '/nonexistent/moetune-no-such-program'"));
    ck_assert_ptr_nonnull(strstr(res.evidence, "No such file or directory"));
    run_job(bare, &spec, &s, &res);
    ck_assert_int_eq(res.outcome, MT_OUTCOME_LAUNCH_ERROR);
    ck_assert_int_eq(res.launch_errno, ENOENT);
    ck_assert_ptr_nonnull(strstr(res.evidence, "not found in PATH ("));
    ck_assert_int_eq(res.exited, 0);
    ck_assert_uint_eq(s.out.n + s.err.n, 0);
    seen_free(&s);
}
END_TEST

START_TEST(not_executable_is_launch_error)
{
    char *dir = temp_dir("noexec"), *plain = NULL, *garbage = NULL;
    const char *argv[] = {NULL, NULL};
    mt_run_spec spec = {0};
    mt_run_result res;
    seen s = {0};
    FILE *f;
    ck_assert_int_ge(asprintf(&plain, "%s/plain", dir), 0);
    ck_assert_int_ge(asprintf(&garbage, "%s/garbage", dir), 0);
    f = fopen(plain, "w");
    fputs("#!/bin/sh\necho hi\n", f);
    fclose(f);
    chmod(plain, 0644);
    f = fopen(garbage, "w");
    fputs("neither ELF nor #! script\n", f);
    fclose(f);
    chmod(garbage, 0755);
    /* root bypasses permission bits but never lacks x on a mode-0644 file */
    argv[0] = plain;
    run_job(argv, &spec, &s, &res);
    ck_assert_int_eq(res.outcome, MT_OUTCOME_LAUNCH_ERROR);
    ck_assert_int_eq(res.launch_errno, EACCES);
    ck_assert_ptr_nonnull(strstr(res.evidence, "Permission denied"));
    argv[0] = dir; /* a directory */
    run_job(argv, &spec, &s, &res);
    ck_assert_int_eq(res.outcome, MT_OUTCOME_LAUNCH_ERROR);
    ck_assert_int_eq(res.launch_errno, EACCES);
    argv[0] = garbage; /* found at exec time, reported by the shepherd */
    run_job(argv, &spec, &s, &res);
    ck_assert_int_eq(res.outcome, MT_OUTCOME_LAUNCH_ERROR);
    ck_assert_int_eq(res.launch_errno, ENOEXEC);
    ck_assert_ptr_nonnull(strstr(res.evidence, "Exec format error"));
    free(plain), free(garbage);
    rm_tree(dir);
    seen_free(&s);
}
END_TEST

/* The job runs in spec.cwd; a relative program path means the caller's
 * working directory, wherever the job runs. */
START_TEST(working_directory_and_relative_program)
{
    const char *pwd[] = {"pwd", NULL};
    char *slash = strrchr(MT_FORKER_BIN, '/'),
         *dir = strndup(MT_FORKER_BIN, (size_t)(slash - MT_FORKER_BIN));
    char *rel = NULL, *home;
    const char *argv[] = {NULL, "lines", "1", "0", NULL};
    mt_run_spec spec = {0};
    mt_run_result res;
    seen s = {0};
    spec.cwd = "/tmp";
    run_job(pwd, &spec, &s, &res);
    ck_assert_int_eq(res.outcome, MT_OUTCOME_OK);
    ck_assert_uint_eq(s.out.n, 1);
    ck_assert_str_eq(s.out.v[0], "/tmp");
    ck_assert_ptr_nonnull(home = getcwd(NULL, 0));
    ck_assert_int_eq(chdir(dir), 0);
    ck_assert_int_ge(asprintf(&rel, ".%s", slash), 0);
    argv[0] = rel;
    spec.cwd = "/";
    run_job(argv, &spec, &s, &res);
    ck_assert_msg(res.outcome == MT_OUTCOME_OK, "%s", res.evidence);
    ck_assert_str_eq(s.out.v[1], "out 0");
    ck_assert_int_eq(chdir(home), 0);
    free(rel), free(dir), free(home);
    seen_free(&s);
}
END_TEST

START_TEST(bad_working_directory_is_launch_error)
{
    const char *argv[] = {MT_FORKER_BIN, "lines", "1", "0", NULL};
    mt_run_spec spec = {0};
    mt_run_result res;
    seen s = {0};
    spec.cwd = "/nonexistent/moetune-cwd";
    run_job(argv, &spec, &s, &res);
    ck_assert_int_eq(res.outcome, MT_OUTCOME_LAUNCH_ERROR);
    ck_assert_int_eq(res.launch_errno, ENOENT);
    ck_assert_ptr_nonnull(strstr(res.evidence, "cannot change to directory"));
    seen_free(&s);
}
END_TEST

/* ---- limits ------------------------------------------------------------------------ */

START_TEST(timeout_stops_a_sleeper)
{
    const char *argv[] = {MT_FORKER_BIN, "sleep", "30", NULL};
    mt_run_spec spec = {0};
    mt_run_result res;
    seen s = {0};
    double t0 = now_s();
    spec.time_limit_s = 1.0;
    spec.grace_s = 2;
    run_job(argv, &spec, &s, &res);
    ck_assert_int_eq(res.outcome, MT_OUTCOME_TIMEOUT);
    ck_assert_int_eq(res.timed_out, 1);
    ck_assert_int_eq(res.hung, 0);
    ck_assert_int_eq(res.signaled, 1);
    ck_assert_int_eq(res.signal, SIGTERM); /* it honoured SIGTERM: no SIGKILL needed */
    ck_assert_str_eq(res.evidence, "exceeded the time limit of 1 s");
    /* stopped at the limit, not at some multiple of it (0.6 s of slack for
     * a loaded machine; a job let run twice its limit ends past 2 s) */
    ck_assert_msg(res.wall_s >= 1.0 && res.wall_s < 1.6, "stopped after %.2f s", res.wall_s);
    ck_assert(now_s() - t0 < 2.5);
    seen_free(&s);
}
END_TEST

/* Prints three iteration lines, then only chatter: a hang, not a timeout. */
START_TEST(hang_without_iteration_progress)
{
    const char *argv[] = {MT_FORKER_BIN, "chatter", "20", "3", NULL};
    mt_run_spec spec = {0};
    mt_run_result res;
    seen s = {0};
    spec.time_limit_s = 20;
    spec.step_s = 0.02;
    spec.hang_factor = 15; /* 0.3 s without an iteration */
    spec.grace_s = 2;
    run_job(argv, &spec, &s, &res);
    ck_assert_int_eq(res.outcome, MT_OUTCOME_HANG);
    ck_assert_int_eq(res.hung, 1);
    ck_assert_int_eq(res.timed_out, 0);
    ck_assert_int_eq(res.progress, 3);
    ck_assert_int_eq(s.iterations_seen, 3);
    ck_assert_int_ge(res.lines[MT_STREAM_STDOUT], 6); /* it kept printing */
    ck_assert_ptr_nonnull(strstr(s.out.v[3], "chatter"));
    ck_assert_ptr_nonnull(strstr(res.evidence, "no new iteration for 0.3 s"));
    ck_assert_ptr_nonnull(strstr(res.evidence, "after 3 iterations"));
    ck_assert(res.wall_s < 3);
    seen_free(&s);
}
END_TEST

/* Iterating steadily is never a hang, and the start-up allowance counts
 * before the first iteration. */
START_TEST(progress_keeps_a_run_alive)
{
    const char *argv[] = {MT_FORKER_BIN, "chatter", "20", "1000", NULL};
    mt_run_spec spec = {0};
    mt_run_result res;
    seen s = {0};
    spec.time_limit_s = 1.0;
    spec.step_s = 0.02;
    spec.hang_factor = 25;
    spec.startup_s = 1;
    run_job(argv, &spec, &s, &res);
    ck_assert_int_eq(res.outcome, MT_OUTCOME_TIMEOUT);
    ck_assert_int_eq(res.hung, 0);
    ck_assert_int_ge(res.progress, 10);
    seen_free(&s);
}
END_TEST

/* After the last iteration only shutdown is left: the caller turns hang
 * detection off and the same chatter is no longer a hang. */
START_TEST(hang_detection_can_be_turned_off)
{
    const char *argv[] = {MT_FORKER_BIN, "chatter", "20", "3", NULL};
    mt_run_spec spec = {0};
    mt_run_result res;
    seen s = {0};
    s.hang_off_after = 3;
    spec.time_limit_s = 1.0;
    spec.step_s = 0.02;
    spec.hang_factor = 25; /* 0.5 s: far more than the 20 ms between iterations */
    run_job(argv, &spec, &s, &res);
    ck_assert_int_eq(res.outcome, MT_OUTCOME_TIMEOUT);
    ck_assert_int_eq(res.hung, 0);
    ck_assert_int_eq(res.progress, 3);
    seen_free(&s);
}
END_TEST

START_TEST(caller_stop_reports_its_outcome)
{
    const char *argv[] = {MT_FORKER_BIN, "chatter", "10", "1000", NULL};
    mt_run_spec spec = {0};
    mt_run_result res;
    seen s = {0};
    s.stop_on = "iteration        4/";
    s.stop_outcome = MT_OUTCOME_OOM;
    spec.time_limit_s = 20;
    run_job(argv, &spec, &s, &res);
    ck_assert_int_eq(res.outcome, MT_OUTCOME_OOM);
    ck_assert_int_eq(res.stopped, 1);
    ck_assert_int_eq(res.signal, SIGTERM);
    ck_assert_ptr_nonnull(strstr(res.evidence, "iteration        4/"));
    ck_assert(res.wall_s < 3);
    seen_free(&s);
}
END_TEST

START_TEST(long_line_is_cut_not_buffered)
{
    const char *argv[] = {MT_FORKER_BIN, "longline", "3000000", NULL};
    char *dir = temp_dir("long");
    mt_run_spec spec = {0};
    mt_run_result res;
    struct stat st;
    seen s = {0};
    spec.run_dir = dir;
    run_job(argv, &spec, &s, &res);
    ck_assert_int_eq(res.outcome, MT_OUTCOME_OK);
    ck_assert_uint_eq(s.longest, MT_RUNNER_LINE_MAX);
    ck_assert_int_eq(res.truncated, 1);
    ck_assert_int_eq(res.lines[MT_STREAM_STDOUT], 3);
    ck_assert_uint_eq(s.out.n, 2); /* the cut line is over 4096: not kept by the test */
    ck_assert_str_eq(s.out.v[0], "after");
    ck_assert_str_eq(s.out.v[1], "no newline at the end");
    /* the log keeps the program's bytes unchanged */
    ck_assert_int_eq(stat(res.stdout_log, &st), 0);
    ck_assert_int_eq(st.st_size, 3000000 + 1 + 6 + 21);
    seen_free(&s);
    rm_tree(dir);
}
END_TEST

/* ---- descendants ---------------------------------------------------------------------- */

/* Three children and three grandchildren, all ignoring SIGTERM like the
 * main process: SIGKILL after the grace period gets them all. */
START_TEST(tree_ignoring_sigterm_is_gone)
{
    char marker[96];
    const char *argv[] = {MT_FORKER_BIN, "tree", "3", marker, NULL};
    mt_run_spec spec = {0};
    mt_run_result res;
    seen s = {0};
    make_marker(marker, sizeof marker, "tree");
    s.marker = marker;
    spec.time_limit_s = 0.8;
    spec.grace_s = 0.3;
    run_job(argv, &spec, &s, &res);
    ck_assert_int_eq(s.marked_at_ready, 7);
    ck_assert_int_eq(res.outcome, MT_OUTCOME_TIMEOUT);
    ck_assert_int_eq(res.signal, SIGKILL);
    /* SIGKILL only after the whole grace period: the job had its chance to
     * save a checkpoint or flush its log */
    ck_assert_msg(res.wall_s >= 0.8 + 0.3, "SIGKILL after %.2f s", res.wall_s);
    ck_assert_int_eq(count_marked(marker), 0);
    seen_free(&s);
}
END_TEST

/* A grandchild in a session of its own (setsid), orphaned, ignoring
 * SIGTERM: the subreaper still has it. */
START_TEST(setsid_grandchild_is_gone)
{
    char marker[96];
    const char *argv[] = {MT_FORKER_BIN, "setsid", marker, NULL};
    mt_run_spec spec = {0};
    mt_run_result res;
    seen s = {0};
    make_marker(marker, sizeof marker, "setsid");
    s.marker = marker;
    spec.time_limit_s = 0.8;
    spec.grace_s = 0.3;
    run_job(argv, &spec, &s, &res);
    ck_assert_int_eq(s.marked_at_ready, 2);
    ck_assert_int_eq(res.outcome, MT_OUTCOME_TIMEOUT);
    ck_assert_int_eq(res.signal, SIGTERM);
    ck_assert_int_eq(count_marked(marker), 0);
    seen_free(&s);
}
END_TEST

/* The main process exits 0 but leaves a setsid daemon ignoring SIGTERM:
 * the run is ok, the daemon is stopped and counted. */
START_TEST(leftover_daemon_is_stopped)
{
    char marker[96];
    const char *argv[] = {MT_FORKER_BIN, "daemon", marker, NULL};
    mt_run_spec spec = {0};
    mt_run_result res;
    seen s = {0};
    make_marker(marker, sizeof marker, "daemon");
    s.marker = marker;
    spec.time_limit_s = 20;
    spec.grace_s = 0.3;
    run_job(argv, &spec, &s, &res);
    ck_assert_int_eq(s.marked_at_ready, 2);
    ck_assert_int_eq(res.outcome, MT_OUTCOME_OK);
    ck_assert_int_eq(res.exit_code, 0);
    ck_assert_int_eq(res.leftovers, 1);
    ck_assert_ptr_nonnull(strstr(res.evidence, "1 leftover process stopped"));
    ck_assert_int_eq(count_marked(marker), 0);
    seen_free(&s);
}
END_TEST

/* moetune dies mid-run (here: the process that started the run exits
 * without waiting): the shepherd sees its control socket close and stops
 * the job and every descendant itself. */
START_TEST(caller_death_stops_the_job)
{
    char marker[96];
    const char *argv[] = {MT_FORKER_BIN, "tree", "2", marker, NULL};
    int ready[2];
    pid_t p;
    char c = 0;
    make_marker(marker, sizeof marker, "orphan");
    ck_assert_int_eq(pipe(ready), 0);
    p = fork();
    ck_assert_int_ge(p, 0);
    if (p == 0) {
        mt_run_spec spec = {0};
        mt_kv *env = mt_kv_new();
        mt_run *run;
        mt_launch_environment(MT_LAUNCHER_LOCAL, 0, NULL, env);
        spec.argv = argv;
        spec.env = env;
        spec.grace_s = 0.3;
        run = mt_runner_start(&spec, NULL);
        if (!run)
            _exit(1);
        while (count_marked(marker) < 5)
            sleep_ms(10);
        if (write(ready[1], "r", 1) != 1)
            _exit(2);
        _exit(0); /* no wait, no destroy: as if killed */
    }
    close(ready[1]);
    ck_assert_int_eq(read(ready[0], &c, 1), 1);
    close(ready[0]);
    waitpid(p, NULL, 0);
    ck_assert_int_eq(wait_unmarked(marker, 5000), 0);
}
END_TEST

/* The timeout with the /proc walk blinded (MOETUNE_RUNNER_FAULT=no_proc_walk,
 * the runner's test hook): the walk then misses every descendant, as it
 * misses one forked between its scan and the signal, one whose /proc entry
 * it cannot read, or a pid past its limit.  The process-group signal alone
 * must still reach a child and a grandchild of the job, in its group and
 * ignoring SIGTERM.  The run happens in a child process, so that a runner
 * that leaves them alive fails here in seconds (its wait would block for the
 * grace period and 30 s more) and the survivors are killed afterwards. */
START_TEST(timeout_reaches_the_group_without_the_walk)
{
    char marker[96];
    const char *argv[] = {MT_FORKER_BIN, "tree", "1", marker, NULL};
    int status = 0, left;
    pid_t p;
    double t0;
    make_marker(marker, sizeof marker, "blind");
    ck_assert_int_eq(setenv("MOETUNE_RUNNER_FAULT", "no_proc_walk", 1), 0);
    p = fork();
    ck_assert_int_ge(p, 0);
    if (p == 0) {
        mt_run_spec spec = {0};
        mt_run_result res;
        seen s = {0};
        spec.time_limit_s = 0.5;
        spec.grace_s = 0.3;
        run_job(argv, &spec, &s, &res);
        /* 0: timed out and every descendant reaped within the grace */
        _exit(res.outcome == MT_OUTCOME_TIMEOUT && res.signal == SIGKILL && !res.unreaped ? 0 : 1);
    }
    unsetenv("MOETUNE_RUNNER_FAULT"); /* the child has it; nothing else here should */
    t0 = now_s();
    while (count_marked(marker) < 3 && now_s() - t0 < 10)
        sleep_ms(10);
    ck_assert_int_eq(count_marked(marker), 3); /* the job, its child and grandchild */
    /* time limit 0.5 s + grace 0.3 s, and room for a loaded machine */
    left = wait_unmarked(marker, 4000);
    signal_marked(marker, SIGKILL);
    if (left) {
        kill(p, SIGKILL);
        waitpid(p, NULL, 0);
    } else {
        ck_assert_int_eq(waitpid(p, &status, 0), p);
    }
    ck_assert_msg(left == 0, "%d of the job's descendants outlived its timeout", left);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
END_TEST

/* ---- the sim ----------------------------------------------------------------------- */

typedef struct sim_cmd {
    mt_strlist argv;
    mt_kv *env;
} sim_cmd;

/* The Qwen3-30B-A3B 16 x H100 contract's base config with sets, through
 * the contract's own launch template ({sim} {args}), plus the sim's
 * cluster flags and extra flags. */
static sim_cmd sim_command(const char *const *sets, const char *const *extra)
{
    tk *t = tk_open("qwen3-30b-a3b-h100x16.cfg");
    mt_rendered out;
    mt_strlist args = {0};
    mt_kv *ph = mt_kv_new();
    sim_cmd c;
    static const char *const hw[][2] = {{"gpu", "--sim-gpu"},
                                        {"gpus_per_node", "--sim-gpus-per-node"},
                                        {"nodes", "--sim-nodes"},
                                        {"nvlink_domain", "--sim-nvlink-domain"}};
    const char *v;
    size_t i;
    memset(&c, 0, sizeof c);
    for (i = 0; sets && sets[i]; i++)
        tk_set(t, sets[i]);
    mt_rendered_init(&out);
    ck_assert_int_eq(mt_render(t->reg, t->contract, t->cfg, MT_DIALECT_MLM, &out, t->diag), 0);
    for (i = 0; i < out.argv.n; i++)
        mt_strlist_push(&args, out.argv.v[i]);
    for (i = 0; i < sizeof hw / sizeof hw[0]; i++)
        if ((v = mt_kv_get(t->contract->hardware, hw[i][0])) != NULL) {
            mt_strlist_push(&args, hw[i][1]);
            mt_strlist_push(&args, v);
        }
    for (i = 0; extra && extra[i]; i++)
        mt_strlist_push(&args, extra[i]);
    mt_kv_set(ph, "sim", MT_SIM_BIN);
    ck_assert_int_eq(mt_launch_expand((const char *const *)t->contract->launch_template,
                                      t->contract->n_template, ph, &args, &c.argv, t->diag),
                     0);
    ck_assert_str_eq(c.argv.v[0], MT_SIM_BIN);
    c.env = mt_kv_new();
    ck_assert_int_eq(mt_launch_environment(MT_LAUNCHER_LOCAL, 0, out.env, c.env), 0);
    null_terminate(&c.argv);
    mt_strlist_clear(&args);
    mt_kv_destroy(&ph);
    mt_rendered_clear(&out);
    tk_close(&t);
    return c;
}

static void sim_cmd_free(sim_cmd *c)
{
    mt_strlist_clear(&c->argv);
    mt_kv_destroy(&c->env);
}

/* The sim stuck in a collective at iteration 3: no output at all after
 * iteration 2; stopped as hang, with SIGTERM. */
START_TEST(sim_hang_is_stopped_as_hang)
{
    const char *sets[] = {"train_iters=20", NULL};
    const char *extra[] = {"--sim-inject", "hang", "--sim-inject-step", "3", NULL};
    sim_cmd c = sim_command(sets, extra);
    char *dir = temp_dir("simhang"), *log;
    mt_run_spec spec = {0};
    mt_run_result res;
    seen s = {0};
    spec.env = c.env;
    spec.run_dir = dir;
    spec.time_limit_s = 20;
    spec.step_s = 0.05;
    spec.hang_factor = 4;
    spec.startup_s = 2;
    spec.grace_s = 2;
    run_job((const char *const *)c.argv.v, &spec, &s, &res);
    ck_assert_msg(res.outcome == MT_OUTCOME_HANG, "outcome %s: %s", mt_outcome_name(res.outcome),
                  res.evidence);
    ck_assert_int_eq(res.progress, 2);
    ck_assert_int_eq(res.signal, SIGTERM);
    ck_assert(res.wall_s < 5);
    log = tk_slurp(res.stdout_log);
    ck_assert_ptr_nonnull(strstr(log, "iteration        2/      20 |"));
    ck_assert_ptr_null(strstr(log, "iteration        3/"));
    free(log);
    sim_cmd_free(&c);
    seen_free(&s);
    rm_tree(dir);
}
END_TEST

/* A good sim run: ok, and its per-GPU report read back (one GPU per rank,
 * 16 of them on node0 and node1), with the hottest GPU named. */
START_TEST(sim_run_and_memory_report)
{
    const char *sets[] = {"train_iters=5", NULL};
    char *dir = temp_dir("simok"), *memfile = NULL, *bad = NULL, *text, *nl;
    const char *extra[] = {"--sim-memory-file", NULL, NULL};
    sim_cmd c;
    mt_run_spec spec = {0};
    mt_run_result res;
    mt_gpu_mems mems = {0};
    mt_diag *d = mt_diag_new();
    seen s = {0};
    long hot;
    size_t i;
    FILE *f;
    ck_assert_int_ge(asprintf(&memfile, "%s/memory.txt", dir), 0);
    extra[1] = memfile;
    c = sim_command(sets, extra);
    spec.env = c.env;
    spec.run_dir = dir;
    spec.time_limit_s = 20;
    spec.step_s = 1;
    run_job((const char *const *)c.argv.v, &spec, &s, &res);
    ck_assert_msg(res.outcome == MT_OUTCOME_OK, "%s", res.evidence);
    ck_assert_int_eq(res.progress, 5);
    ck_assert_int_eq(mt_sim_memory_read(memfile, &mems, d), 0);
    ck_assert_str_eq(mems.source, "sim");
    ck_assert_uint_eq(mems.n, 16);
    for (i = 0; i < mems.n; i++) {
        ck_assert_int_eq(mems.v[i].rank, (int)i);
        ck_assert_int_eq(mems.v[i].gpu, (int)i % 8);
        ck_assert_str_eq(mems.v[i].host, i < 8 ? "node0" : "node1");
        ck_assert(mems.v[i].peak_bytes > (uint64_t)1 << 30);
        ck_assert_ptr_null(mems.v[i].uuid);
    }
    hot = mt_gpu_mems_hottest(&mems);
    ck_assert_int_ge(hot, 0);
    for (i = 0; i < mems.n; i++)
        ck_assert(mems.v[i].peak_bytes <= mems.v[hot].peak_bytes);
    mt_gpu_mems_clear(&mems);
    /* a damaged report is refused with its file and line */
    text = tk_slurp(memfile);
    nl = strchr(text, '\n');
    ck_assert_ptr_nonnull(nl);
    ck_assert_int_ge(asprintf(&bad, "%s/bad.txt", dir), 0);
    f = fopen(bad, "w");
    fprintf(f, "%.*srank=1 host=node0 gpu=1 peak_mib=lots\n", (int)(nl - text + 1), text);
    fclose(f);
    ck_assert_int_eq(mt_sim_memory_read(bad, &mems, d), -1);
    ck_assert_int_eq(mt_diag_at(d, 0)->line, 2);
    ck_assert_ptr_nonnull(strstr(mt_diag_at(d, 0)->message, "bad number"));
    ck_assert_uint_eq(mems.n, 1);
    mt_gpu_mems_clear(&mems);
    mt_diag_clear(d);
    ck_assert_int_eq(mt_sim_memory_read("/nonexistent/memory.txt", &mems, d), -1);
    ck_assert(mt_diag_contains(d, "cannot read the sim's memory report"));
    mt_gpu_mems_clear(&mems);
    free(text), free(bad), free(memfile);
    rm_tree(dir);
    mt_diag_destroy(&d);
    sim_cmd_free(&c);
    seen_free(&s);
}
END_TEST

/* ---- launch templates and srun ----------------------------------------------------------- */

static void assert_argv(const mt_strlist *l, const char *const *want)
{
    size_t i;
    for (i = 0; want[i]; i++) {
        ck_assert_msg(i < l->n, "argv too short at %zu (want %s)", i, want[i]);
        ck_assert_str_eq(l->v[i], want[i]);
    }
    ck_assert_uint_eq(l->n, i);
}

START_TEST(template_expansion)
{
    const char *tmpl[] = {"{sim}",  "--bridge",     "--out={run_dir}/tb",
                          "{args}", "--json={{a}}", "{not a placeholder}"};
    const char *want[] = {"/opt/sim", "--bridge",   "--out=/runs/7/tb",    "--x",
                          "1",        "--json={a}", "{not a placeholder}", NULL};
    const char *unknown[] = {"{sim}", "--nodes={nodez}", "{args}"};
    const char *glued[] = {"{sim}", "pre{args}"};
    const char *noargs[] = {"{sim}"};
    mt_kv *ph = mt_kv_new();
    mt_strlist args = {0}, out = {0};
    mt_diag *d = mt_diag_new();
    mt_kv_set(ph, "sim", "/opt/sim");
    mt_kv_set(ph, "run_dir", "/runs/7");
    mt_kv_set(ph, "nodes", "2");
    mt_strlist_push(&args, "--x");
    mt_strlist_push(&args, "1");
    ck_assert_int_eq(mt_launch_expand(tmpl, 6, ph, &args, &out, d), 0);
    assert_argv(&out, want);
    mt_strlist_clear(&out);
    ck_assert_int_eq(mt_launch_expand(unknown, 3, ph, &args, &out, d), -EINVAL);
    ck_assert_str_eq(mt_diag_at(d, 0)->field, "launch.template");
    ck_assert_ptr_nonnull(strstr(mt_diag_at(d, 0)->message, "unknown placeholder '{nodez}'"));
    ck_assert_ptr_nonnull(
        strstr(mt_diag_at(d, 0)->message, "known: {args}, {nodes}, {run_dir}, {sim}"));
    mt_strlist_clear(&out);
    mt_diag_clear(d);
    ck_assert_int_eq(mt_launch_expand(glued, 2, ph, &args, &out, d), -EINVAL);
    ck_assert(mt_diag_contains(d, "must be a template token of its own"));
    mt_strlist_clear(&out);
    mt_diag_clear(d);
    ck_assert_int_eq(mt_launch_expand(noargs, 1, ph, &args, &out, d), -EINVAL);
    ck_assert(mt_diag_contains(d, "add \"{args}\""));
    mt_strlist_clear(&out);
    mt_strlist_clear(&args);
    mt_kv_destroy(&ph);
    mt_diag_destroy(&d);
}
END_TEST

START_TEST(srun_wrapping)
{
    const char *want[] = {"srun",
                          "-l",
                          "--nodes=2",
                          "--ntasks-per-node=8",
                          "--ntasks=16",
                          "--gpus-per-node=8",
                          "--job-name=mt-test-1",
                          "--kill-on-bad-exit=1",
                          "--cpu-bind=ldoms",
                          "/opt/sim",
                          "--x",
                          NULL};
    const char *want_torchrun[] = {"srun",
                                   "-l",
                                   "--nodes=4",
                                   "--ntasks-per-node=1",
                                   "--ntasks=4",
                                   "--job-name=mt-test-1",
                                   "--kill-on-bad-exit=1",
                                   "/opt/sim",
                                   "--x",
                                   NULL};
    const char *want_local[] = {"/opt/sim", "--x", NULL};
    mt_kv *set = mt_kv_new();
    mt_strlist argv = {0}, out = {0};
    mt_diag *d = mt_diag_new();
    mt_launch *l;
    mt_strlist_push(&argv, "/opt/sim");
    mt_strlist_push(&argv, "--x");
    mt_kv_set(set, "cpu_bind", "numa");
    l = mt_launch_new(MT_LAUNCHER_SRUN, 2, 8, set, "mt-test-1", NULL, d);
    ck_assert_ptr_nonnull(l);
    ck_assert_int_eq(mt_launch_wrap(l, &argv, &out), 0);
    assert_argv(&out, want);
    mt_strlist_clear(&out);
    mt_launch_destroy(&l);
    ck_assert_ptr_null(l);
    /* torchrun starts the ranks itself: one task per node, no GRES */
    mt_kv_set(set, "cpu_bind", "none");
    mt_kv_set(set, "ntasks_per_node", "1");
    l = mt_launch_new(MT_LAUNCHER_SRUN, 4, 0, set, "mt-test-1", NULL, d);
    ck_assert_ptr_nonnull(l);
    ck_assert_int_eq(mt_launch_wrap(l, &argv, &out), 0);
    assert_argv(&out, want_torchrun);
    mt_strlist_clear(&out);
    /* a comparison's later replicate: on the nodes of its first control run */
    l->nodelist = strdup("gpu07,gpu08,gpu09,gpu10");
    ck_assert_int_eq(mt_launch_wrap(l, &argv, &out), 0);
    ck_assert_uint_eq(out.n, 10);
    ck_assert_str_eq(out.v[2], "--nodes=4");
    ck_assert_str_eq(out.v[3], "--nodelist=gpu07,gpu08,gpu09,gpu10");
    ck_assert_str_eq(out.v[4], "--ntasks-per-node=1");
    mt_strlist_clear(&out);
    mt_launch_destroy(&l);
    /* local runs argv as it is */
    l = mt_launch_new(MT_LAUNCHER_LOCAL, 1, 8, set, NULL, NULL, d);
    ck_assert_ptr_nonnull(l);
    ck_assert_int_eq(mt_launch_wrap(l, &argv, &out), 0);
    assert_argv(&out, want_local);
    mt_strlist_clear(&out);
    mt_launch_destroy(&l);
    ck_assert_uint_eq(mt_diag_count(d), 0);
    /* settings a launcher cannot apply are refused, never ignored */
    mt_kv_set(set, "cpu_bind", "socket");
    mt_kv_set(set, "mem_bind", "local");
    ck_assert_ptr_null(mt_launch_new(MT_LAUNCHER_SRUN, 1, 8, set, "mt-x", NULL, d));
    ck_assert(mt_diag_contains(d, "cpu_bind takes none or numa, not 'socket'"));
    ck_assert(mt_diag_contains(d, "has no setting 'mem_bind'"));
    mt_diag_clear(d);
    ck_assert_ptr_null(mt_launch_new(MT_LAUNCHER_SRUN, 1, 8, NULL, NULL, NULL, d));
    ck_assert(mt_diag_contains(d, "needs a job name"));
    ck_assert_int_eq(mt_launch_kind("srun"), MT_LAUNCHER_SRUN);
    ck_assert_int_eq(mt_launch_kind("local"), MT_LAUNCHER_LOCAL);
    ck_assert_int_eq(mt_launch_kind("sbatch"), -1);
    mt_strlist_clear(&argv);
    mt_kv_destroy(&set);
    mt_diag_destroy(&d);
}
END_TEST

START_TEST(scancel_commands)
{
    const char *outside[] = {"scancel", "--name=mt-test-2", NULL};
    const char *query[] = {"squeue",           "--noheader",  "--steps", "--jobs=4242",
                           "--name=mt-test-2", "--format=%j %i", NULL};
    const char *step[] = {"scancel", "4242.3", NULL};
    mt_kv *env = mt_kv_new();
    mt_strlist out = {0};
    mt_launch *l;
    /* no allocation: srun makes its own job, cancelled by its unique name */
    l = mt_launch_new(MT_LAUNCHER_SRUN, 1, 8, NULL, "mt-test-2", env, NULL);
    ck_assert_int_eq(mt_launch_query_argv(l, &out), 0);
    ck_assert_uint_eq(out.n, 0);
    ck_assert_int_eq(mt_launch_cancel_argv(l, NULL, &out), 0);
    assert_argv(&out, outside);
    mt_strlist_clear(&out);
    mt_launch_destroy(&l);
    /* inside allocation 4242: the step is looked up, then cancelled */
    mt_kv_set(env, "SLURM_JOB_ID", "4242");
    l = mt_launch_new(MT_LAUNCHER_SRUN, 1, 8, NULL, "mt-test-2", env, NULL);
    ck_assert_str_eq(l->slurm_job_id, "4242");
    ck_assert_int_eq(mt_launch_query_argv(l, &out), 0);
    assert_argv(&out, query);
    mt_strlist_clear(&out);
    ck_assert_int_eq(mt_launch_cancel_argv(l, "4242.3", &out), 0);
    assert_argv(&out, step);
    mt_strlist_clear(&out);
    ck_assert_int_eq(mt_launch_cancel_argv(l, NULL, &out), 0);
    ck_assert_uint_eq(out.n, 0); /* no step: nothing of ours to cancel */
    mt_launch_destroy(&l);
    /* local: nothing to query or cancel */
    l = mt_launch_new(MT_LAUNCHER_LOCAL, 1, 8, NULL, NULL, env, NULL);
    ck_assert_int_eq(mt_launch_query_argv(l, &out), 0);
    ck_assert_int_eq(mt_launch_cancel_argv(l, NULL, &out), 0);
    ck_assert_uint_eq(out.n, 0);
    ck_assert_int_eq(mt_launch_stop(l, NULL), 0);
    {
        char host[256] = "";
        gethostname(host, sizeof host - 1);
        ck_assert_int_eq(mt_launch_hosts(l, &out, NULL), 0);
        ck_assert_uint_eq(out.n, 1);
        ck_assert_str_eq(out.v[0], host);
        mt_strlist_clear(&out);
    }
    mt_launch_destroy(&l);
    mt_kv_destroy(&env);
}
END_TEST

/* A worker without the Slurm client tools: the stop hook's failure is in
 * the evidence, and the local signals still end the run. */
START_TEST(failed_cancel_is_reported)
{
    const char *argv[] = {MT_FORKER_BIN, "sleep", "30", NULL};
    mt_kv *env = mt_kv_new();
    mt_run_spec spec = {0};
    mt_run_result res;
    mt_launch *l;
    seen s = {0};
    mt_kv_set(env, "PATH", "/nonexistent");
    l = mt_launch_new(MT_LAUNCHER_SRUN, 1, 8, NULL, "mt-test-3", env, NULL);
    ck_assert_ptr_nonnull(l);
    spec.time_limit_s = 0.3;
    spec.on_stop = mt_launch_stop;
    spec.stop_ctx = l;
    run_job(argv, &spec, &s, &res);
    ck_assert_int_eq(res.outcome, MT_OUTCOME_TIMEOUT);
    ck_assert_int_eq(res.signal, SIGTERM);
    ck_assert_ptr_nonnull(strstr(res.evidence, "exceeded the time limit of 0.3 s; the launcher's "
                                               "stop: scancel (for mt-test-3): cannot run "
                                               "'scancel': not found in PATH (/nonexistent)"));
    seen_free(&s);
    mt_launch_destroy(&l);
    mt_kv_destroy(&env);
}
END_TEST

START_TEST(launch_environment)
{
    mt_kv *rendered = mt_kv_new(), *env = mt_kv_new();
    char *a, *b;
    setenv("SLURM_MT_TEST", "7", 1);
    setenv("MT_TEST_PRIVATE", "x", 1);
    setenv("PATH", "/usr/bin:/bin", 1);
    mt_kv_set(rendered, "CUDA_DEVICE_MAX_CONNECTIONS", "1");
    mt_kv_set(rendered, "PATH", "/opt/stack/bin:/usr/bin");
    ck_assert_int_eq(mt_launch_environment(MT_LAUNCHER_SRUN, 0, rendered, env), 0);
    ck_assert_str_eq(mt_kv_get(env, "SLURM_MT_TEST"), "7");
    ck_assert_ptr_null(mt_kv_get(env, "MT_TEST_PRIVATE"));
    ck_assert_str_eq(mt_kv_get(env, "CUDA_DEVICE_MAX_CONNECTIONS"), "1");
    ck_assert_str_eq(mt_kv_get(env, "PATH"), "/opt/stack/bin:/usr/bin"); /* rendered wins */
    mt_kv_destroy(&env);
    env = mt_kv_new();
    ck_assert_int_eq(mt_launch_environment(MT_LAUNCHER_LOCAL, 0, NULL, env), 0);
    ck_assert_ptr_null(mt_kv_get(env, "SLURM_MT_TEST"));
    ck_assert_str_eq(mt_kv_get(env, "PATH"), "/usr/bin:/bin");
    mt_kv_destroy(&env);
    /* the pass-through list: result-changing variables and placement pass,
     * anything else is dropped; only the first are the tune's record */
    setenv("MOETUNE_SIM_MT_TEST", "1", 1);
    setenv("NCCL_MT_TEST", "2", 1);
    setenv("NVTE_MT_TEST", "3", 1);
    setenv("MASTER_PORT", "29500", 1);
    setenv("CUDA_VISIBLE_DEVICES", "0,1", 1);
    env = mt_kv_new();
    ck_assert_int_eq(mt_launch_environment(MT_LAUNCHER_LOCAL, 0, NULL, env), 0);
    ck_assert_str_eq(mt_kv_get(env, "MOETUNE_SIM_MT_TEST"), "1");
    ck_assert_str_eq(mt_kv_get(env, "NCCL_MT_TEST"), "2");
    ck_assert_str_eq(mt_kv_get(env, "NVTE_MT_TEST"), "3");
    ck_assert_str_eq(mt_kv_get(env, "MASTER_PORT"), "29500");
    ck_assert_str_eq(mt_kv_get(env, "CUDA_VISIBLE_DEVICES"), "0,1");
    ck_assert_ptr_null(mt_kv_get(env, "MT_TEST_PRIVATE"));
    mt_kv_destroy(&env);
    ck_assert_int_eq(mt_launch_env_class("NCCL_", 5), MT_ENV_DROPPED); /* a prefix alone */
    ck_assert_int_eq(mt_launch_env_class("MOETUNE_SIM", 11), MT_ENV_DROPPED);
    ck_assert_int_eq(mt_launch_env_class("PYTORCH_CUDA_ALLOC_CONF", 23), MT_ENV_RESULT);
    ck_assert_int_eq(mt_launch_env_class("SLURM_PROCID", 12), MT_ENV_PLACEMENT);
    env = mt_kv_new();
    mt_kv_set(rendered, "env.NCCL_MT_TEST", "9"); /* a knob: the config's, not the record's */
    ck_assert_int_eq(mt_launch_result_env(rendered, env), 0);
    ck_assert_str_eq(mt_kv_get(env, "MOETUNE_SIM_MT_TEST"), "1");
    ck_assert_ptr_null(mt_kv_get(env, "NCCL_MT_TEST"));
    ck_assert_ptr_null(mt_kv_get(env, "MASTER_PORT"));
    ck_assert_ptr_null(mt_kv_get(env, "PATH"));
    mt_kv_destroy(&env);
    unsetenv("MOETUNE_SIM_MT_TEST");
    unsetenv("NCCL_MT_TEST");
    unsetenv("NVTE_MT_TEST");
    unsetenv("MASTER_PORT");
    unsetenv("CUDA_VISIBLE_DEVICES");
    env = mt_kv_new();
    ck_assert_int_eq(mt_launch_environment(MT_LAUNCHER_LOCAL, 1, NULL, env), 0);
    ck_assert_str_eq(mt_kv_get(env, "MT_TEST_PRIVATE"), "x");
    mt_kv_destroy(&env);
    mt_kv_destroy(&rendered);
    a = mt_launch_job_name("screen run/1");
    b = mt_launch_job_name("screen run/1");
    ck_assert_str_ne(a, b);
    ck_assert_ptr_nonnull(strstr(a, "mt-screen_run_1-"));
    ck_assert_uint_eq(
        strspn(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_"), strlen(a));
    free(a), free(b);
    unsetenv("SLURM_MT_TEST");
    unsetenv("MT_TEST_PRIVATE");
}
END_TEST

/* ---- a real Slurm --------------------------------------------------------------------- */

typedef struct slurm {
    char *dir, *conf;
    pid_t ctld, slurmd;
    char why[512];
} slurm;

static int free_port(void)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int s = socket(AF_INET, SOCK_STREAM, 0), port = -1;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (s >= 0 && bind(s, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(s, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (s >= 0)
        close(s);
    return port;
}

/* A daemon in the foreground that dies with the test. */
static pid_t spawn_daemon(const char *const *argv, const char *log)
{
    pid_t p = fork();
    if (p == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (fd >= 0)
            dup2(fd, 1), dup2(fd, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    return p;
}

/* Runs a Slurm client with conf; stdout (first 4 KiB) into out. */
static int slurm_client(const slurm *s, const char *const *argv, char *out, size_t cap)
{
    int p[2], st = 0;
    pid_t pid;
    ssize_t n, got = 0;
    if (pipe(p) != 0)
        return -1;
    pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        setenv("SLURM_CONF", s->conf, 1);
        unsetenv("SLURM_JOB_ID");
        dup2(p[1], 1);
        if (null >= 0)
            dup2(null, 2); /* salloc's chatter */
        close(p[0]);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(p[1]);
    while (cap > 1 && (n = read(p[0], out + got, cap - 1 - (size_t)got)) > 0)
        got += n;
    if (cap)
        out[got] = '\0';
    close(p[0]);
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int slurm_start(slurm *s)
{
    char host[256] = "", *ctld_log = NULL, *d_log = NULL, out[4096];
    int ctld_port = free_port(), d_port = free_port(), i;
    FILE *f;
    memset(s, 0, sizeof *s);
    if (getenv("MOETUNE_TEST_SLURM") && !strcmp(getenv("MOETUNE_TEST_SLURM"), "0")) {
        snprintf(s->why, sizeof s->why, "MOETUNE_TEST_SLURM=0");
        return -1;
    }
    if (geteuid() != 0) {
        snprintf(s->why, sizeof s->why, "not root");
        return -1;
    }
    if (access("/usr/sbin/slurmctld", X_OK) || access("/usr/sbin/slurmd", X_OK) ||
        access("/usr/bin/srun", X_OK)) {
        snprintf(s->why, sizeof s->why,
                 "slurmctld/slurmd/srun not installed (apt-get install slurmctld slurmd "
                 "slurm-client)");
        return -1;
    }
    gethostname(host, sizeof host - 1);
    s->dir = temp_dir("slurm");
    ck_assert_int_ge(asprintf(&s->conf, "%s/slurm.conf", s->dir), 0);
    f = fopen(s->conf, "w");
    fprintf(f,
            "ClusterName=mtrunner\nSlurmctldHost=%s(127.0.0.1)\nAuthType=auth/none\n"
            "CredType=cred/none\nSlurmUser=root\nSlurmdUser=root\nSlurmctldPort=%d\n"
            "SlurmdPort=%d\nStateSaveLocation=%s\nSlurmdSpoolDir=%s\n"
            "SlurmctldPidFile=%s/ctld.pid\nSlurmdPidFile=%s/d.pid\n"
            "ProctrackType=proctrack/pgid\nTaskPlugin=task/none\nSelectType=select/cons_tres\n"
            "SelectTypeParameters=CR_Core\nSwitchType=switch/none\nMpiDefault=none\n"
            "JobAcctGatherType=jobacct_gather/none\nAccountingStorageType="
            "accounting_storage/none\nReturnToService=2\nKillWait=0\nMessageTimeout=5\n"
            "NodeName=%s NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN\n"
            "PartitionName=debug Nodes=%s Default=YES MaxTime=INFINITE State=UP\n",
            host, ctld_port, d_port, s->dir, s->dir, s->dir, s->dir, host, host);
    fclose(f);
    ck_assert_int_ge(asprintf(&ctld_log, "%s/ctld.log", s->dir), 0);
    ck_assert_int_ge(asprintf(&d_log, "%s/d.log", s->dir), 0);
    {
        const char *ctld[] = {"/usr/sbin/slurmctld", "-D", "-i", "-f", s->conf, NULL};
        const char *slurmd[] = {"/usr/sbin/slurmd", "-D", "-f", s->conf, "-N", host, NULL};
        s->ctld = spawn_daemon(ctld, ctld_log);
        sleep_ms(300);
        s->slurmd = spawn_daemon(slurmd, d_log);
    }
    for (i = 0; i < 100; i++) {
        const char *sinfo[] = {"sinfo", "--noheader", "--format=%T", NULL};
        if (slurm_client(s, sinfo, out, sizeof out) == 0 && strstr(out, "idle"))
            break;
        sleep_ms(100);
    }
    free(ctld_log), free(d_log);
    if (i == 100) {
        snprintf(s->why, sizeof s->why, "the node never became idle (logs in %s)", s->dir);
        return -1;
    }
    return 0;
}

/* Kills every process whose environment names our slurm.conf: a
 * slurmstepd (or its tasks) still waiting to report to the daemons. */
static int sweep_slurm(const slurm *s)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    char want[600];
    int n = 0;
    size_t wl = (size_t)snprintf(want, sizeof want, "SLURM_CONF=%s", s->conf) + 1;
    while (d && (e = readdir(d)) != NULL) {
        char path[300], *buf;
        ssize_t got;
        int fd;
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/environ", e->d_name);
        if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
            continue;
        buf = malloc(1 << 20);
        got = buf ? read(fd, buf, 1 << 20) : -1;
        close(fd);
        if (got > 0 && memmem(buf, (size_t)got, want, wl)) {
            kill(atoi(e->d_name), SIGKILL);
            n++;
        }
        free(buf);
    }
    if (d)
        closedir(d);
    return n;
}

static void slurm_stop(slurm *s)
{
    int n;
    /* a throwaway cluster: no orderly shutdown needed */
    if (s->slurmd > 0)
        kill(s->slurmd, SIGKILL), waitpid(s->slurmd, NULL, 0);
    if (s->ctld > 0)
        kill(s->ctld, SIGKILL), waitpid(s->ctld, NULL, 0);
    if (s->conf && (n = sweep_slurm(s)) > 0)
        fprintf(stderr, "real_srun_and_scancel: killed %d leftover Slurm process%s\n", n,
                n == 1 ? "" : "es");
    free(s->conf);
    rm_tree(s->dir);
}

/* Runs argv under the srun launcher with the test's Slurm; the caller's
 * seen and limits. */
static void srun_job(slurm *s, const char *slurm_job_id, const char *const *argv, double limit,
                     seen *sn, mt_run_result *res, char **name_out)
{
    mt_kv *rendered = mt_kv_new(), *env = mt_kv_new(), *settings = mt_kv_new();
    mt_strlist in = {0}, cmd = {0};
    mt_diag *d = mt_diag_new();
    mt_run_spec spec = {0};
    char *name = mt_launch_job_name("test");
    mt_launch *l;
    mt_run *run;
    size_t i;
    mt_kv_set(rendered, "SLURM_CONF", s->conf);
    ck_assert_int_eq(mt_launch_environment(MT_LAUNCHER_SRUN, 0, rendered, env), 0);
    mt_kv_unset(env, "SLURM_JOB_ID");
    if (slurm_job_id)
        mt_kv_set(env, "SLURM_JOB_ID", slurm_job_id);
    mt_kv_set(settings, "ntasks_per_node", "2");
    l = mt_launch_new(MT_LAUNCHER_SRUN, 1, 0, settings, name, env, d);
    ck_assert_ptr_nonnull(l);
    for (i = 0; argv[i]; i++)
        mt_strlist_push(&in, argv[i]);
    ck_assert_int_eq(mt_launch_wrap(l, &in, &cmd), 0);
    null_terminate(&cmd);
    spec.argv = (const char *const *)cmd.v;
    spec.env = env;
    spec.time_limit_s = limit;
    spec.grace_s = 3;
    spec.on_line = on_line;
    spec.line_ctx = sn;
    spec.on_stop = mt_launch_stop;
    spec.stop_ctx = l;
    sn->launch = l;
    run = mt_runner_start(&spec, d);
    ck_assert_ptr_nonnull(run);
    sn->run = run;
    mt_runner_wait(run, res);
    /* copy what the checks need before the run is freed */
    res->evidence = NULL;
    res->stdout_log = res->stderr_log = NULL;
    mt_runner_destroy(&sn->run);
    ck_assert_msg(mt_diag_count(d) == 0, "launcher: %s", mt_diag_at(d, 0)->message);
    sn->launch = NULL;
    mt_launch_destroy(&l);
    mt_strlist_clear(&in);
    mt_strlist_clear(&cmd);
    mt_kv_destroy(&env);
    mt_kv_destroy(&rendered);
    mt_kv_destroy(&settings);
    mt_diag_destroy(&d);
    if (name_out)
        *name_out = name;
    else
        free(name);
}

/* The runner's srun in the allocation jobid (or its own job when NULL),
 * stopped at the time limit; the runner's stop hook cancels the step or
 * job.  With a tree of tasks ignoring SIGTERM, only the cancellation can end
 * them (they are slurmstepd's children, not ours; Slurm needs ~5 s to
 * SIGKILL them).  With tasks that honour SIGTERM, the job's final state
 * CANCELLED shows that scancel, not srun's forwarding of our SIGTERM, ended
 * it. */
static void srun_cancel_case(slurm *s, const char *jobid, const char *tag, int ignore_term)
{
    char marker[96], out[4096], *name = NULL, *q = NULL;
    const char *tree[] = {MT_FORKER_BIN, "tree", "1", marker, NULL};
    const char *sleeper[] = {MT_FORKER_BIN, "sleep", "30", marker, NULL};
    const char *sq[] = {"squeue", "--noheader", "--states=PENDING,RUNNING,SUSPENDED", "--format=%j",
                        NULL};
    const char *state[] = {"squeue", "--noheader", "--states=all", NULL, "--format=%T", NULL};
    mt_run_result res;
    seen sn = {0};
    double t0 = now_s();
    char host[256] = "";
    int i;
    make_marker(marker, sizeof marker, tag);
    sn.marker = marker;
    /* the time limit must fall after every task said "ready": within an
     * allocation a step starts at once; a job of its own is scheduled
     * first, which on a loaded machine takes seconds */
    srun_job(s, jobid, ignore_term ? tree : sleeper, jobid ? 1.0 : 5.0, &sn, &res, &name);
    /* two tasks x (main + child + grandchild), or two sleepers */
    ck_assert_int_eq(sn.marked_at_ready, ignore_term ? 6 : 2);
    /* the launcher's node list, from Slurm itself */
    gethostname(host, sizeof host - 1);
    ck_assert_uint_eq(sn.hosts.n, 1);
    ck_assert_str_eq(sn.hosts.v[0], host);
    ck_assert_int_eq(res.outcome, MT_OUTCOME_TIMEOUT);
    ck_assert_msg(!(res.signaled && res.signal == SIGKILL), "srun had to be killed");
    ck_assert_int_eq(wait_unmarked(marker, 8000), 0);
    /* cancelled: neither pending nor running (completing is fine) */
    ck_assert_int_eq(slurm_client(s, sq, out, sizeof out), 0);
    ck_assert_msg(strstr(out, name) == NULL, "still queued: %s", out);
    if (!jobid) {
        ck_assert_int_ge(asprintf(&q, "--name=%s", name), 0);
        state[3] = q;
        for (i = 0; i < 100; i++) { /* COMPLETING first */
            ck_assert_int_eq(slurm_client(s, state, out, sizeof out), 0);
            if (!strstr(out, "COMPLETING"))
                break;
            sleep_ms(50);
        }
        ck_assert_msg(strstr(out, "CANCELLED") != NULL, "job state: %s", out);
        free(q);
    }
    fprintf(stderr,
            "real_srun_and_scancel: %s: stopped and cancelled in %.2f s (srun ran %.2f s, "
            "%s %d)\n",
            tag, now_s() - t0, res.wall_s, res.signaled ? "signal" : "exit status",
            res.signaled ? res.signal : res.exit_code);
    free(name);
    seen_free(&sn);
}

START_TEST(real_srun_and_scancel)
{
    slurm s;
    const char *lines[] = {MT_FORKER_BIN, "lines", "2", "0", NULL};
    const char *salloc[] = {"salloc",     "--no-shell",          "--nodes=1",
                            "--ntasks=2", "--job-name=mt-alloc", NULL};
    const char *alloc_q[] = {"squeue", "--noheader", "--name=mt-alloc", "--format=%i", NULL};
    const char *steps[] = {"squeue", "--noheader", "--steps", "--format=%i", NULL};
    char out[4096], jobid[32] = "", *p;
    mt_run_result res;
    seen sn = {0};
    size_t i;
    int zero = 0, one = 0;
    double t0 = now_s();
    if (slurm_start(&s) != 0) {
        fprintf(stderr, "real_srun_and_scancel: SKIPPED: Slurm could not be started here: %s\n",
                s.why);
        slurm_stop(&s);
        return;
    }
    fprintf(stderr, "real_srun_and_scancel: Slurm up in %.2f s\n", now_s() - t0);
    /* output of both tasks, with srun -l's "<task>: " prefix */
    srun_job(&s, NULL, lines, 30, &sn, &res, NULL);
    ck_assert_int_eq(res.outcome, MT_OUTCOME_OK);
    for (i = 0; i < sn.out.n; i++) {
        zero += !strcmp(sn.out.v[i], "0: out 1");
        one += !strcmp(sn.out.v[i], "1: out 1");
    }
    ck_assert_msg(zero == 1 && one == 1, "srun -l output: %s", sn.out.n ? sn.out.v[0] : "");
    seen_free(&sn);

    /* inside an allocation: the step is found with squeue and cancelled;
     * the allocation itself lives on */
    ck_assert_int_eq(slurm_client(&s, salloc, out, sizeof out), 0);
    ck_assert_int_eq(slurm_client(&s, alloc_q, out, sizeof out), 0);
    snprintf(jobid, sizeof jobid, "%s", out + strspn(out, " "));
    jobid[strcspn(jobid, " \n")] = '\0';
    ck_assert_msg(jobid[0], "no allocation");
    srun_cancel_case(&s, jobid, "step", 1);
    ck_assert_int_eq(slurm_client(&s, alloc_q, out, sizeof out), 0);
    ck_assert_msg(strstr(out, jobid) != NULL, "the allocation was cancelled too");
    for (i = 0; i < 50; i++) { /* a cancelled step may be listed while it completes */
        int live = 0;
        ck_assert_int_eq(slurm_client(&s, steps, out, sizeof out), 0);
        for (p = out; (p = strstr(p, jobid)) != NULL; p++)
            live |= p[strlen(jobid)] == '.' && strncmp(p + strlen(jobid), ".extern", 7) != 0;
        if (!live)
            break;
        sleep_ms(100);
    }
    ck_assert_msg(i < 50, "a step survived: %s", out);
    {
        const char *cancel[] = {"scancel", jobid, NULL};
        ck_assert_int_eq(slurm_client(&s, cancel, out, sizeof out), 0);
    }

    /* its own job, cancelled by name */
    srun_cancel_case(&s, NULL, "job", 0);
    slurm_stop(&s);
}
END_TEST

/* ---- NVML and the fingerprint ------------------------------------------------------------ */

START_TEST(nvml_says_when_absent)
{
    mt_nvml *n = mt_nvml_open("/nonexistent/libnvidia-ml.so.1");
    mt_diag *d = mt_diag_new();
    mt_nvml_sampler *s;
    ck_assert_ptr_nonnull(n);
    ck_assert_int_eq(mt_nvml_available(n), 0);
    ck_assert_ptr_nonnull(strstr(mt_nvml_status(n), "no NVML: /nonexistent/libnvidia-ml.so.1"));
    ck_assert_ptr_nonnull(strstr(mt_nvml_status(n), "the sim's per-GPU report stands in"));
    ck_assert_int_eq(mt_nvml_device_count(n), 0);
    ck_assert_ptr_null(mt_nvml_uuid(n, 0));
    ck_assert_ptr_null(mt_nvml_driver(n));
    s = mt_nvml_sampler_start(n, 100, d);
    ck_assert_ptr_null(s);
    ck_assert(mt_diag_contains(d, "GPU memory sampler: no NVML"));
    mt_nvml_destroy(&n);
    ck_assert_ptr_null(n);
    mt_diag_destroy(&d);
}
END_TEST

/* The machine's own NVML: sampled where there is a GPU, reported absent
 * where there is none. */
START_TEST(nvml_on_this_machine)
{
    mt_nvml *n = mt_nvml_open(NULL);
    mt_diag *d = mt_diag_new();
    mt_gpu_mems m = {0};
    mt_nvml_sampler *s;
    int i;
    ck_assert_ptr_nonnull(n);
    fprintf(stderr, "nvml_on_this_machine: %s\n", mt_nvml_status(n));
    if (!mt_nvml_available(n)) {
        ck_assert_ptr_nonnull(strstr(mt_nvml_status(n), "no NVML"));
        mt_nvml_destroy(&n);
        mt_diag_destroy(&d);
        return;
    }
    ck_assert_int_gt(mt_nvml_device_count(n), 0);
    ck_assert_ptr_nonnull(mt_nvml_driver(n));
    s = mt_nvml_sampler_start(n, 20, d);
    ck_assert_ptr_nonnull(s);
    sleep_ms(200);
    ck_assert_int_eq(mt_nvml_sampler_stop(&s, &m), 0);
    ck_assert_ptr_null(s);
    ck_assert_str_eq(m.source, "nvml");
    ck_assert_int_ge(m.samples, 3);
    ck_assert_uint_eq(m.n, (size_t)mt_nvml_device_count(n));
    for (i = 0; i < (int)m.n; i++) {
        ck_assert_ptr_nonnull(m.v[i].uuid);
        ck_assert_ptr_nonnull(strstr(m.v[i].uuid, "GPU-"));
        ck_assert(m.v[i].total_bytes > 0);
        ck_assert(m.v[i].peak_bytes >= m.v[i].base_bytes);
    }
    mt_gpu_mems_clear(&m);
    mt_nvml_destroy(&n);
    mt_diag_destroy(&d);
}
END_TEST

START_TEST(fingerprint_json_and_compare)
{
    const char *hosts[] = {"node1", "node2"};
    mt_kv *stack = mt_kv_new(), *env = mt_kv_new();
    mt_nvml *n = mt_nvml_open(NULL);
    mt_fingerprint_in in = {0};
    mt_diag *d = mt_diag_new();
    char *a, *b, *c, ver[32];
    cJSON *j, *x;
    void *cudart = dlopen("libcudart.so", RTLD_NOW | RTLD_LOCAL);
    mt_kv_set(stack, "megatron_lm", "core_r0.14.0@4a1b2c3");
    mt_kv_set(env, "MOETUNE_CONTAINER_DIGEST", "sha256:0123abcd");
    in.hosts = hosts;
    in.n_hosts = 2;
    in.nvml = n;
    in.stack = stack;
    in.env = env;
    a = mt_fingerprint_json(&in, d);
    ck_assert_ptr_nonnull(a);
    j = cJSON_Parse(a);
    ck_assert_ptr_nonnull(j);
    x = cJSON_GetObjectItem(j, "hosts");
    ck_assert_int_eq(cJSON_GetArraySize(x), 2);
    ck_assert_str_eq(cJSON_GetArrayItem(x, 1)->valuestring, "node2");
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "gpus")), mt_nvml_device_count(n));
    ck_assert_str_eq(
        cJSON_GetObjectItem(cJSON_GetObjectItem(j, "stack"), "megatron_lm")->valuestring,
        "core_r0.14.0@4a1b2c3");
    ck_assert_str_eq(
        cJSON_GetObjectItem(cJSON_GetObjectItem(j, "container"), "digest")->valuestring,
        "sha256:0123abcd");
    ck_assert_str_eq(cJSON_GetObjectItem(j, "nvml")->valuestring, mt_nvml_status(n));
    ck_assert(cJSON_HasObjectItem(j, "driver") && cJSON_HasObjectItem(j, "nccl"));
    if (cudart) {
        /* the toolkit is here: its runtime version is recorded */
        x = cJSON_GetObjectItem(j, "cuda_runtime");
        ck_assert(cJSON_IsString(x));
        ck_assert_int_eq(mt_fingerprint_cuda_runtime(ver, sizeof ver), 0);
        ck_assert_str_eq(x->valuestring, ver);
        ck_assert_ptr_nonnull(strchr(ver, '.'));
        fprintf(stderr, "fingerprint: %s\n", a);
    } else {
        ck_assert(cJSON_IsNull(cJSON_GetObjectItem(j, "cuda_runtime")));
    }
    cJSON_Delete(j);
    /* the same inputs give the same fingerprint; another host differs */
    b = mt_fingerprint_json(&in, d);
    ck_assert_str_eq(a, b);
    ck_assert_int_eq(mt_fingerprint_compare(a, b, d), 0);
    hosts[1] = "node3";
    c = mt_fingerprint_json(&in, d);
    ck_assert_int_eq(mt_fingerprint_compare(a, c, d), 1);
    ck_assert_uint_eq(mt_diag_count(d), 1);
    ck_assert(mt_diag_contains(d, "fingerprint differs in hosts: [\"node1\",\"node2\"] vs "
                                  "[\"node1\",\"node3\"]"));
    mt_diag_clear(d);
    ck_assert_int_eq(mt_fingerprint_compare(a, "{\"x\":1}", d), -1);
    ck_assert_int_eq(mt_fingerprint_compare(a, "not json", d), -1);
    free(a), free(b), free(c);
    mt_nvml_destroy(&n);
    mt_kv_destroy(&stack);
    mt_kv_destroy(&env);
    mt_diag_destroy(&d);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("runner");
    TCase *proc = tcase_create("process"), *lim = tcase_create("limits");
    TCase *desc = tcase_create("descendants"), *sim = tcase_create("sim");
    TCase *launch = tcase_create("launch"), *gpu = tcase_create("gpu");
    tcase_add_test(proc, outcome_names_round_trip);
    tcase_add_test(proc, normal_run_streams_lines_and_logs);
    tcase_add_test(proc, nonzero_exit_is_crash);
    tcase_add_test(proc, signal_is_crash);
    tcase_add_test(proc, missing_program_is_launch_error);
    tcase_add_test(proc, not_executable_is_launch_error);
    tcase_add_test(proc, working_directory_and_relative_program);
    tcase_add_test(proc, bad_working_directory_is_launch_error);
    tcase_add_test(lim, timeout_stops_a_sleeper);
    tcase_add_test(lim, hang_without_iteration_progress);
    tcase_add_test(lim, progress_keeps_a_run_alive);
    tcase_add_test(lim, hang_detection_can_be_turned_off);
    tcase_add_test(lim, caller_stop_reports_its_outcome);
    tcase_add_test(lim, long_line_is_cut_not_buffered);
    tcase_add_test(desc, tree_ignoring_sigterm_is_gone);
    tcase_add_test(desc, setsid_grandchild_is_gone);
    tcase_add_test(desc, leftover_daemon_is_stopped);
    tcase_add_test(desc, caller_death_stops_the_job);
    tcase_add_test(desc, timeout_reaches_the_group_without_the_walk);
    tcase_add_test(sim, sim_hang_is_stopped_as_hang);
    tcase_add_test(sim, sim_run_and_memory_report);
    tcase_add_test(launch, template_expansion);
    tcase_add_test(launch, srun_wrapping);
    tcase_add_test(launch, scancel_commands);
    tcase_add_test(launch, failed_cancel_is_reported);
    tcase_add_test(launch, launch_environment);
    tcase_add_test(launch, real_srun_and_scancel);
    tcase_add_test(gpu, nvml_says_when_absent);
    tcase_add_test(gpu, nvml_on_this_machine);
    tcase_add_test(gpu, fingerprint_json_and_compare);
    tcase_set_timeout(proc, 30);
    tcase_set_timeout(lim, 30);
    tcase_set_timeout(desc, 30);
    tcase_set_timeout(sim, 60);
    tcase_set_timeout(launch, 90);
    tcase_set_timeout(gpu, 30);
    suite_add_tcase(s, proc);
    suite_add_tcase(s, lim);
    suite_add_tcase(s, desc);
    suite_add_tcase(s, sim);
    suite_add_tcase(s, launch);
    suite_add_tcase(s, gpu);
    return tk_run(s);
}
