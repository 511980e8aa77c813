/*
 * test_containment.c - a plugin that crashes, hangs, exits or floods inside a
 * call never takes moetune down without a word (core/callguard.h, the caps
 * of abi/moetune/plugin.h).  Each case is a real `moetune` process with one
 * misbehaving plugin (tests/fixtures/misbehave.c) on MOETUNE_PLUGIN_PATH,
 * the operator's way of adding a plugin.
 */
#include "testkit.h"

#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MISBEHAVE(tag) MT_BUILD_DIR "/tests/fixtures/misbehave_" tag ".so"

typedef struct child {
    int status;      /* raw wait status */
    int killed;      /* we had to kill it: it hung */
    double seconds;  /* wall time */
    long max_rss_kb; /* its peak resident memory */
    char *out, *err;
} child;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Runs moetune with args and the plugin at plugin on MOETUNE_PLUGIN_PATH
 * (timeout: MOETUNE_PLUGIN_TIMEOUT, or NULL), killing it after limit_s. */
static child run(const char *plugin, const char *timeout, double limit_s,
                 const char *const *args)
{
    char out[] = "/tmp/moetune-test-cont-out-XXXXXX", err[] = "/tmp/moetune-test-cont-err-XXXXXX";
    int fo = mkstemp(out), fe = mkstemp(err), st = 0;
    const char *argv[32];
    struct rusage ru;
    child c;
    double t0 = now_s();
    pid_t pid, got;
    size_t i;
    memset(&c, 0, sizeof c);
    ck_assert(fo >= 0 && fe >= 0);
    argv[0] = "moetune";
    for (i = 0; args[i] && i < 30; i++)
        argv[i + 1] = args[i];
    argv[i + 1] = NULL;
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(fo, 1), dup2(fe, 2);
        setenv("MOETUNE_PLUGIN_PATH", plugin, 1);
        if (timeout)
            setenv("MOETUNE_PLUGIN_TIMEOUT", timeout, 1);
        execv(MT_MOETUNE_BIN, (char *const *)argv);
        _exit(127);
    }
    for (;;) {
        got = wait4(pid, &st, WNOHANG, &ru);
        if (got == pid)
            break;
        if (now_s() - t0 > limit_s) {
            kill(pid, SIGKILL);
            got = wait4(pid, &st, 0, &ru);
            c.killed = 1;
            break;
        }
        usleep(20000);
    }
    c.status = st;
    c.seconds = now_s() - t0;
    c.max_rss_kb = ru.ru_maxrss;
    c.out = tk_slurp(out);
    c.err = tk_slurp(err);
    close(fo), close(fe);
    unlink(out), unlink(err);
    return c;
}

static void child_free(child *c)
{
    free(c->out);
    free(c->err);
}

/* A segfault in propose(): the plugin, its file and the call are named
 * before moetune dies of the signal (before the guard: "Segmentation fault"
 * from the shell and nothing else). */
START_TEST(crash_in_propose_is_named)
{
    char *contract = tk_example("qwen3-30b-a3b-h100x16.cfg");
    const char *args[] = {"candidates", contract, NULL};
    child c = run(MISBEHAVE("crash"), NULL, 120, args);
    ck_assert_msg(!c.killed, "moetune hung");
    /* dies of the signal (under AddressSanitizer its own handler reports
     * next and may end the process its way) */
    ck_assert_msg(WIFSIGNALED(c.status) || (WIFEXITED(c.status) && WEXITSTATUS(c.status) != 0),
                  "expected a failure, status %d\n%s", c.status, c.err);
    ck_assert_msg(strstr(c.err, "moetune: plugin fixture-crash (" MISBEHAVE("crash")
                                ") crashed in propose(): SIGSEGV (invalid memory access); "
                                "moetune stops\n"),
                  "stderr: %s", c.err);
    child_free(&c);
    free(contract);
}
END_TEST

/* An endless check() hangs neither check nor candidates: past the per-call
 * limit moetune prints the plugin and the call and exits 1. */
START_TEST(endless_check_hits_the_watchdog)
{
    char *contract = tk_example("qwen3-30b-a3b-h100x16.cfg");
    const char *check[] = {"check", contract, NULL};
    const char *cands[] = {"candidates", contract, NULL};
    const char *opt[] = {"check", contract, "--plugin-timeout", "0.5", NULL};
    const char *const msg = "moetune: plugin fixture-loop (" MISBEHAVE("loop")
                            ") did not return from check() within 1 s";
    child c = run(MISBEHAVE("loop"), "1", 60, check);
    ck_assert_msg(!c.killed, "check hung");
    ck_assert_msg(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 1, "status %d\n%s", c.status,
                  c.err);
    ck_assert_msg(strstr(c.err, msg), "stderr: %s", c.err);
    ck_assert(c.seconds < 30);
    child_free(&c);
    c = run(MISBEHAVE("loop"), "1", 60, cands);
    ck_assert_msg(!c.killed, "candidates hung");
    ck_assert_msg(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 1, "status %d\n%s", c.status,
                  c.err);
    ck_assert_msg(strstr(c.err, msg), "stderr: %s", c.err);
    child_free(&c);
    /* the option beats the environment */
    c = run(MISBEHAVE("loop"), "600", 60, opt);
    ck_assert_msg(!c.killed, "check --plugin-timeout 0.5 hung");
    ck_assert_msg(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 1, "status %d", c.status);
    ck_assert_msg(strstr(c.err, "did not return from check() within 0.5 s"), "stderr: %s", c.err);
    child_free(&c);
    free(contract);
}
END_TEST

/* exit(0) inside propose() during a tune: exit 1 naming the plugin, not a
 * silent success without a bundle. */
START_TEST(exit_in_propose_is_exit_1)
{
    char *contract = tk_example("qwen3-30b-a3b-h100x16.cfg");
    char dir[] = "/tmp/moetune-test-cont-tune-XXXXXX";
    const char *tune[] = {"tune", contract, "--dir", dir, "--quiet", NULL};
    const char *cands[] = {"candidates", contract, NULL};
    const char *const msg = "moetune: plugin fixture-exit (" MISBEHAVE("exit")
                            ") called exit() inside propose(); moetune stops (exit 1)\n";
    child c;
    ck_assert_ptr_nonnull(mkdtemp(dir));
    rmdir(dir);
    c = run(MISBEHAVE("exit"), NULL, 280, tune);
    ck_assert_msg(!c.killed, "tune hung");
    ck_assert_msg(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 1, "status %d\n%s", c.status,
                  c.err);
    ck_assert_msg(strstr(c.err, msg), "stderr: %s", c.err);
    child_free(&c);
    c = run(MISBEHAVE("exit"), NULL, 60, cands);
    ck_assert_msg(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 1, "status %d", c.status);
    ck_assert_msg(strstr(c.err, msg), "stderr: %s", c.err);
    child_free(&c);
    {
        const char *rm[] = {"rm", "-rf", dir, NULL};
        tk_proc r = tk_spawn("/bin/rm", rm + 1);
        tk_proc_free(&r);
    }
    free(contract);
}
END_TEST

/* 2 million candidates from one propose(): the host keeps the first
 * MT_PLUGIN_MAX_CANDIDATES, refuses the rest cheaply, names the cap, and its
 * memory stays small. */
START_TEST(flood_is_capped)
{
    char *contract = tk_example("qwen3-30b-a3b-h100x16.cfg");
    const char *cands[] = {"candidates", contract, NULL};
    char want[300];
    child c = run(MISBEHAVE("flood"), NULL, 120, cands);
    ck_assert_msg(!c.killed, "candidates did not finish");
    ck_assert_msg(WIFEXITED(c.status), "status %d\n%s", c.status, c.err);
    snprintf(want, sizeof want,
             "plugin fixture-flood: propose(): output cap: more than %d candidates in one "
             "propose() call (MT_PLUGIN_MAX_CANDIDATES); the rest were refused",
             MT_PLUGIN_MAX_CANDIDATES);
    ck_assert_msg(strstr(c.err, want), "stderr: %.2000s", c.err);
    ck_assert_msg(c.max_rss_kb < 1024 * 1024, "peak memory %ld kB", c.max_rss_kb);
    child_free(&c);
    free(contract);
}
END_TEST

/* The same flood during a tune: the tune goes on with bounded memory, and
 * says once that the plugin passed the cap (a plugin's failing propose()
 * was silent in a tune before). */
START_TEST(flood_in_a_tune_is_said)
{
    char *contract = tk_example("qwen3-30b-a3b-h100x16.cfg");
    char dir[] = "/tmp/moetune-test-cont-flood-XXXXXX";
    const char *tune[] = {"tune", contract, "--dir", dir, "--quiet", NULL};
    const char *needle = "plugin fixture-flood: propose(): output cap: more than";
    char *at;
    child c;
    ck_assert_ptr_nonnull(mkdtemp(dir));
    rmdir(dir);
    c = run(MISBEHAVE("flood"), NULL, 280, tune);
    ck_assert_msg(!c.killed, "tune did not finish");
    ck_assert_msg(WIFEXITED(c.status), "status %d\n%s", c.status, c.err);
    at = strstr(c.err, needle);
    ck_assert_msg(at, "stderr: %.2000s", c.err);
    ck_assert_msg(!strstr(at + 1, needle), "the warning is repeated"); /* once per tune */
    ck_assert_msg(c.max_rss_kb < 1024 * 1024, "peak memory %ld kB", c.max_rss_kb);
    child_free(&c);
    {
        const char *rm[] = {"-rf", dir, NULL};
        tk_proc r = tk_spawn("/bin/rm", rm);
        tk_proc_free(&r);
    }
    free(contract);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("containment");
    TCase *tc = tcase_create("misbehaving plugins");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, crash_in_propose_is_named);
    tcase_add_test(tc, endless_check_hits_the_watchdog);
    tcase_add_test(tc, exit_in_propose_is_exit_1);
    tcase_add_test(tc, flood_is_capped);
    tcase_add_test(tc, flood_in_a_tune_is_said);
    suite_add_tcase(s, tc);
    return tk_run(s);
}
