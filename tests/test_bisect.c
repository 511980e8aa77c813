/*
 * test_bisect.c - the bisection method (search/bisect.c) on synthetic
 * revisions, and the prepare step (workers/prepare.c) on real processes.
 *
 * The synthetic runner draws each sample from N(level(rev), sd) with a
 * generator seeded by (trial seed, revision, replicate), so every job is
 * independent and a rerun asks for, and gets, exactly the same samples.
 */
#include "bisect.h"
#include "prepare.h"
#include "testkit.h"

#include <check.h>
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define N 64

typedef struct world {
    double level[N];     /* mean step time of each revision */
    double sd;
    uint64_t seed;
    int status[N];       /* MT_BJ_* returned for every job of that revision */
    int infra_first[N];  /* the first k replicates of that revision are lost */
    int fail_runner;     /* the runner itself fails on call k (0: never) */
    int calls;
    uint64_t trace;      /* a hash of every job asked for, in order */
    long jobs;
} world;

static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static double gauss(uint64_t *s)
{
    double u1, u2;
    *s = mix(*s);
    u1 = ((double)(*s >> 11) + 0.5) / 9007199254740992.0;
    *s = mix(*s);
    u2 = ((double)(*s >> 11) + 0.5) / 9007199254740992.0;
    return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

static int runner(void *ctx, mt_bisect_job *jobs, size_t n)
{
    world *w = ctx;
    size_t i;
    if (w->fail_runner && ++w->calls >= w->fail_runner)
        return -1;
    for (i = 0; i < n; i++) {
        mt_bisect_job *j = &jobs[i];
        uint64_t s = mix(w->seed ^ mix((uint64_t)j->rev * 1000 + (uint64_t)j->rep));
        w->trace = mix(w->trace ^ ((uint64_t)j->rev << 20 | (uint64_t)j->rep));
        w->jobs++;
        j->status = w->status[j->rev];
        if (j->status == MT_BJ_OK && j->rep < w->infra_first[j->rev]) {
            j->status = MT_BJ_INFRA;
            snprintf(j->outcome, sizeof j->outcome, "infra");
            snprintf(j->evidence, sizeof j->evidence, "NCCL error: unhandled system error");
            continue;
        }
        if (j->status == MT_BJ_OK) {
            j->ms = w->level[j->rev] + w->sd * gauss(&s);
            snprintf(j->outcome, sizeof j->outcome, "ok");
        } else {
            snprintf(j->outcome, sizeof j->outcome, "%s",
                     j->status == MT_BJ_SKIP ? "skip" : "prepare_failed");
            snprintf(j->evidence, sizeof j->evidence, "build.sh exited %d",
                     j->status == MT_BJ_SKIP ? 125 : 1);
        }
    }
    return 0;
}

/* Levels: 1000 ms, times (1 + step) from each culprit on. */
static void world_init(world *w, uint64_t seed, double sd, int c1, int c2, double step)
{
    int i;
    memset(w, 0, sizeof *w);
    w->seed = seed;
    w->sd = sd;
    for (i = 0; i < N; i++) {
        w->level[i] = 1000;
        if (c1 > 0 && i >= c1)
            w->level[i] *= 1 + step;
        if (c2 > 0 && i >= c2)
            w->level[i] *= 1 + step;
    }
}

START_TEST(one_regression_found_exactly_and_deterministically)
{
    world w;
    mt_bisect b, b2;
    mt_bisect_params p;
    uint64_t t1;
    long jobs1;
    mt_bisect_params_default(&p);
    world_init(&w, 7, 15, 37, 0, 0.03); /* 1.5% per run, a 3% step */
    ck_assert_int_eq(mt_bisect_run(&b, N, &p, runner, &w), 0);
    ck_assert_int_eq(b.outcome, MT_BISECT_FOUND);
    ck_assert_int_eq(b.n_culprits, 1);
    ck_assert_int_eq(b.culprits[0].lo, 37);
    ck_assert_int_eq(b.culprits[0].hi, 37);
    ck_assert_int_eq(b.culprits[0].parent, 36);
    ck_assert(b.culprits[0].ci_lo < 0.03 && b.culprits[0].ci_hi > 0.02);
    ck_assert(b.ends.verdict == MT_STATS_WORSE);
    ck_assert_int_eq(b.runs, w.jobs);
    ck_assert_int_ge(b.revs[0].n, p.ends.initial);
    ck_assert_int_ge(b.revs[N - 1].n, p.ends.initial);
    ck_assert_int_eq(b.revs[36].cls, MT_BC_LOW);
    ck_assert_int_eq(b.revs[37].cls, MT_BC_HIGH);
    /* the same samples: the same jobs in the same order (what resume relies on) */
    t1 = w.trace, jobs1 = w.jobs;
    world_init(&w, 7, 15, 37, 0, 0.03);
    ck_assert_int_eq(mt_bisect_run(&b2, N, &p, runner, &w), 0);
    ck_assert_uint_eq(w.trace, t1);
    ck_assert_int_eq(w.jobs, jobs1);
    ck_assert_int_eq(b2.culprits[0].hi, 37);
    mt_bisect_clear(&b);
    mt_bisect_clear(&b2);
}
END_TEST

START_TEST(culprits_at_the_edges)
{
    int c;
    for (c = 1; c < N; c += N - 2) { /* the first and the last revision after good */
        world w;
        mt_bisect b;
        mt_bisect_params p;
        mt_bisect_params_default(&p);
        world_init(&w, 11 + (uint64_t)c, 15, c, 0, 0.03);
        ck_assert_int_eq(mt_bisect_run(&b, N, &p, runner, &w), 0);
        ck_assert_int_eq(b.outcome, MT_BISECT_FOUND);
        ck_assert_int_eq(b.n_culprits, 1);
        ck_assert_int_eq(b.culprits[0].hi, c);
        ck_assert_int_eq(b.culprits[0].lo, c);
        mt_bisect_clear(&b);
    }
}
END_TEST

START_TEST(no_regression_stops_at_the_ends_with_figures)
{
    world w;
    mt_bisect b;
    mt_bisect_params p;
    mt_bisect_params_default(&p);
    world_init(&w, 3, 15, 0, 0, 0);
    ck_assert_int_eq(mt_bisect_run(&b, N, &p, runner, &w), 0);
    ck_assert_int_eq(b.outcome, MT_BISECT_NOT_REPRODUCED);
    ck_assert_int_eq(b.n_culprits, 0);
    ck_assert_ptr_nonnull(strstr(b.why, "does not reproduce"));
    ck_assert_ptr_nonnull(strstr(b.why, "CI"));
    /* only the ends were measured */
    ck_assert_int_eq(b.runs, b.revs[0].n + b.revs[N - 1].n);
    mt_bisect_clear(&b);
}
END_TEST

START_TEST(a_faster_bad_end_is_not_a_regression)
{
    world w;
    mt_bisect b;
    mt_bisect_params p;
    mt_bisect_params_default(&p);
    world_init(&w, 5, 15, 20, 0, -0.05);
    ck_assert_int_eq(mt_bisect_run(&b, N, &p, runner, &w), 0);
    ck_assert_int_eq(b.outcome, MT_BISECT_NOT_REPRODUCED);
    ck_assert(b.ends.effect < 0);
    mt_bisect_clear(&b);
}
END_TEST

START_TEST(skipped_revisions_give_a_range)
{
    world w;
    mt_bisect b;
    mt_bisect_params p;
    int i;
    mt_bisect_params_default(&p);
    world_init(&w, 9, 15, 30, 0, 0.03);
    for (i = 27; i <= 32; i++)
        w.status[i] = MT_BJ_SKIP;
    w.status[29] = MT_BJ_FAILED;
    ck_assert_int_eq(mt_bisect_run(&b, N, &p, runner, &w), 0);
    ck_assert_int_eq(b.outcome, MT_BISECT_FOUND);
    ck_assert_int_eq(b.n_culprits, 1);
    ck_assert_int_eq(b.culprits[0].lo, 27);
    ck_assert_int_eq(b.culprits[0].hi, 33);
    ck_assert_int_eq(b.culprits[0].parent, 26);
    for (i = 27; i <= 32; i++)
        if (b.revs[i].asked) /* whatever was tried is typed */
            ck_assert_int_eq(b.revs[i].state, i == 29 ? MT_BJ_FAILED : MT_BJ_SKIP);
    ck_assert_int_ge(b.revs[29].state == MT_BJ_FAILED || !b.revs[29].asked, 1);
    mt_bisect_clear(&b);
}
END_TEST

START_TEST(lost_replicates_are_asked_again_then_fail_the_revision)
{
    world w;
    mt_bisect b;
    mt_bisect_params p;
    mt_bisect_params_default(&p);
    world_init(&w, 13, 15, 40, 0, 0.03);
    w.infra_first[31] = 2;  /* two lost runs: still measured */
    w.infra_first[47] = 99; /* never a sample: failed after 3 losses */
    ck_assert_int_eq(mt_bisect_run(&b, N, &p, runner, &w), 0);
    ck_assert_int_eq(b.outcome, MT_BISECT_FOUND);
    ck_assert_int_eq(b.culprits[0].hi, 40);
    ck_assert_int_eq(b.revs[31].infra, 2);
    ck_assert_int_ge(b.revs[31].n, p.mid_initial);
    ck_assert_int_eq(b.revs[47].state, MT_BJ_FAILED);
    ck_assert_int_eq(b.revs[47].infra, 3);
    ck_assert_ptr_nonnull(strstr(b.revs[47].evidence, "NCCL"));
    mt_bisect_clear(&b);
}
END_TEST

START_TEST(an_end_that_cannot_be_measured)
{
    world w;
    mt_bisect b;
    mt_bisect_params p;
    mt_bisect_params_default(&p);
    world_init(&w, 1, 15, 10, 0, 0.03);
    w.status[N - 1] = MT_BJ_FAILED;
    ck_assert_int_eq(mt_bisect_run(&b, N, &p, runner, &w), 0);
    ck_assert_int_eq(b.outcome, MT_BISECT_END_FAILED);
    ck_assert_ptr_nonnull(strstr(b.why, "bad end"));
    ck_assert_ptr_nonnull(strstr(b.why, "prepare_failed"));
    mt_bisect_clear(&b);
}
END_TEST

START_TEST(a_failing_runner_stops_the_bisection)
{
    world w;
    mt_bisect b;
    mt_bisect_params p;
    mt_bisect_params_default(&p);
    world_init(&w, 1, 15, 10, 0, 0.03);
    w.fail_runner = 4;
    ck_assert_int_eq(mt_bisect_run(&b, N, &p, runner, &w), 0);
    ck_assert_int_eq(b.outcome, MT_BISECT_ERROR);
    mt_bisect_clear(&b);
}
END_TEST

START_TEST(two_regressions_are_both_found)
{
    /* nearly noise-free levels 1000, 1030, 1060.9: revision 31 lies between
     * the two steps; whichever side the SPRT puts it on, the closed
     * bracket's consistency check sees that its culprit is not the whole
     * step, and the other range is searched too */
    world w;
    mt_bisect b;
    mt_bisect_params p;
    mt_bisect_params_default(&p);
    world_init(&w, 21, 1.5, 20, 45, 0.03);
    ck_assert_int_eq(mt_bisect_run(&b, N, &p, runner, &w), 0);
    ck_assert_int_eq(b.outcome, MT_BISECT_FOUND);
    ck_assert_int_eq(b.n_culprits, 2);
    ck_assert_int_eq(b.culprits[0].hi, 20);
    ck_assert_int_eq(b.culprits[1].hi, 45);
    ck_assert(b.n_notes >= 1 && (strstr(b.notes[0], "another regression lies in") ||
                                 strstr(b.notes[0], "sits between")));
    ck_assert(b.culprits[0].partial || b.culprits[1].partial);
    ck_assert(fabs(b.culprits[0].effect - 0.03) < 0.005);
    ck_assert(fabs(b.culprits[1].effect - 0.03) < 0.005);
    mt_bisect_clear(&b);
}
END_TEST

START_TEST(two_regressions_at_run_noise)
{
    /* 1.5% per run and two 3% steps, the first midpoint (31) between them:
     * the SPRT puts it on one side, the closed bracket's split test or the
     * stretch test after the search finds the other step, each culprit is
     * verified on fresh runs, and each interval (Welch t on log run times)
     * holds 3% */
    static const int at[][2] = {{12, 40}, {20, 45}, {5, 33}, {28, 36}};
    size_t k;
    for (k = 0; k < sizeof at / sizeof at[0]; k++) {
        world w;
        mt_bisect b;
        mt_bisect_params p;
        int i;
        mt_bisect_params_default(&p);
        world_init(&w, 31 + k, 15, at[k][0], at[k][1], 0.03);
        ck_assert_int_eq(mt_bisect_run(&b, N, &p, runner, &w), 0);
        ck_assert_int_eq(b.outcome, MT_BISECT_FOUND);
        ck_assert_msg(b.n_culprits == 2 && b.culprits[0].hi == at[k][0] &&
                          b.culprits[1].hi == at[k][1] && b.culprits[0].lo == at[k][0] &&
                          b.culprits[1].lo == at[k][1],
                      "%d and %d: %d culprits, first %d", at[k][0], at[k][1], b.n_culprits,
                      b.n_culprits ? b.culprits[0].hi : -1);
        for (i = 0; i < 2; i++)
            ck_assert_msg(b.culprits[i].ci_lo < 0.03 && 0.03 < b.culprits[i].ci_hi &&
                              b.culprits[i].ci_lo < b.culprits[i].effect &&
                              b.culprits[i].effect < b.culprits[i].ci_hi,
                          "culprit %d: %.4f in %.4f .. %.4f", b.culprits[i].hi,
                          b.culprits[i].effect, b.culprits[i].ci_lo, b.culprits[i].ci_hi);
        ck_assert_int_eq(b.runs, w.jobs);
        mt_bisect_clear(&b);
    }
}
END_TEST

START_TEST(bad_parameters_are_refused)
{
    world w;
    mt_bisect b;
    mt_bisect_params p;
    world_init(&w, 1, 15, 10, 0, 0.03);
    mt_bisect_params_default(&p);
    ck_assert_int_eq(mt_bisect_run(&b, 1, &p, runner, &w), -EINVAL);
    ck_assert_int_eq(mt_bisect_run(&b, N, &p, NULL, &w), -EINVAL);
    p.eps = 0.7;
    ck_assert_int_eq(mt_bisect_run(&b, N, &p, runner, &w), -EINVAL);
    mt_bisect_params_default(&p);
    p.mid_max = 1;
    ck_assert_int_eq(mt_bisect_run(&b, N, &p, runner, &w), -EINVAL);
    mt_bisect_params_default(&p);
    p.ends.initial = 1;
    ck_assert_int_eq(mt_bisect_run(&b, N, &p, runner, &w), -EINVAL);
    mt_bisect_params_default(&p);
    p.resolution = 0;
    ck_assert_int_eq(mt_bisect_run(&b, N, &p, runner, &w), -EINVAL);
    mt_bisect_params_default(&p);
    p.miss = 0.5;
    ck_assert_int_eq(mt_bisect_run(&b, N, &p, runner, &w), -EINVAL);
    mt_bisect_params_default(&p);
    p.verify_max = p.check.initial - 1;
    ck_assert_int_eq(mt_bisect_run(&b, N, &p, runner, &w), -EINVAL);
    ck_assert_int_eq(w.jobs, 0);
}
END_TEST

START_TEST(speculation_measures_the_next_midpoints_alongside)
{
    world w;
    mt_bisect b;
    mt_bisect_params p;
    mt_bisect_params_default(&p);
    p.slots = 6;
    world_init(&w, 7, 15, 37, 0, 0.03);
    ck_assert_int_eq(mt_bisect_run(&b, N, &p, runner, &w), 0);
    ck_assert_int_eq(b.culprits[0].hi, 37);
    /* the first midpoint (31) came with both quarter points (15, 47) */
    ck_assert_int_ge(b.revs[15].n, p.mid_initial);
    ck_assert_int_ge(b.revs[47].n, p.mid_initial);
    mt_bisect_clear(&b);
}
END_TEST

/* ---- the prepare step ------------------------------------------------------------------------ */

START_TEST(prepare_templates_split_and_expand)
{
    const char *t[] = {"git clone -q {repo} {work}", "make -C '{work}/a b' \"x y\"z"};
    mt_strlist *s = NULL, one = {0};
    mt_diag *d = mt_diag_new();
    ck_assert_int_eq(mt_prepare_expand(t, 2, "abc123", "/r", "/w/1", &s, d), 0);
    ck_assert_int_eq((int)s[0].n, 5);
    ck_assert_str_eq(s[0].v[3], "/r");
    ck_assert_str_eq(s[0].v[4], "/w/1");
    ck_assert_int_eq((int)s[1].n, 4);
    ck_assert_str_eq(s[1].v[2], "/w/1/a b");
    ck_assert_str_eq(s[1].v[3], "x yz");
    mt_strlist_clear(&s[0]);
    mt_strlist_clear(&s[1]);
    free(s);
    ck_assert_int_eq(mt_prepare_split("a 'b", &one, d), -EINVAL);
    ck_assert_ptr_nonnull(strstr(mt_diag_at(d, mt_diag_count(d) - 1)->message, "unterminated"));
    mt_strlist_clear(&one);
    ck_assert_int_eq(mt_prepare_split("   ", &one, d), -EINVAL);
    {
        const char *u[] = {"build {revision}"};
        ck_assert_int_eq(mt_prepare_expand(u, 1, "r", NULL, "/w", &s, d), -EINVAL);
        ck_assert_ptr_nonnull(
            strstr(mt_diag_at(d, mt_diag_count(d) - 1)->message, "unknown placeholder"));
        u[0] = "git clone {repo} {work}"; /* {repo} without a repository */
        ck_assert_int_eq(mt_prepare_expand(u, 1, "r", NULL, "/w", &s, d), -EINVAL);
    }
    mt_diag_destroy(&d);
}
END_TEST

static char base[64] = "/tmp/mt-test-bisect-XXXXXX";

static char *work_dir(const char *tag)
{
    char *p = malloc(256);
    snprintf(p, 256, "%s/%s/work", base, tag);
    /* the record and the lock lie beside the work directory */
    *strrchr(p, '/') = '\0';
    mkdir(p, 0755);
    strcat(p, "/work");
    return p;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)st, (void)flag, (void)f;
    return remove(path);
}

START_TEST(prepare_runs_once_and_types_its_outcome)
{
    char *w = work_dir("once"), out[32], ev[512], path[400], *text;
    const char *ok[] = {"sh -c 'echo {rev} >> ../count-$MOETUNE_REV; pwd > where'"};
    const char *skip[] = {"true", "sh -c 'echo cannot build >&2; exit 125'", "true"};
    const char *bad[] = {"sh -c 'echo undefined reference >&2; exit 1'"};
    const char *none[] = {"/nonexistent/build-it"};
    mt_diag *d = mt_diag_new();
    /* runs in {work}, once however often it is asked */
    ck_assert_int_eq(mt_prepare_run(ok, 1, "r1", NULL, w, 30, out, sizeof out, ev, sizeof ev, d),
                     MT_PREP_OK);
    ck_assert_str_eq(out, "ok");
    ck_assert_int_eq(mt_prepare_run(ok, 1, "r1", NULL, w, 30, out, sizeof out, ev, sizeof ev, d),
                     MT_PREP_OK);
    snprintf(path, sizeof path, "%s/../count-r1", w);
    text = tk_slurp(path);
    ck_assert_str_eq(text, "r1\n");
    free(text);
    unlink(path);
    snprintf(path, sizeof path, "%s/where", w);
    text = tk_slurp(path);
    ck_assert_ptr_nonnull(strstr(text, w));
    free(text);
    /* 125 is skip, with the step's own words */
    free(w);
    w = work_dir("skip");
    ck_assert_int_eq(
        mt_prepare_run(skip, 3, "r2", NULL, w, 30, out, sizeof out, ev, sizeof ev, d),
        MT_PREP_SKIP);
    ck_assert_str_eq(out, "skip");
    ck_assert_ptr_nonnull(strstr(ev, "step 2"));
    ck_assert_ptr_nonnull(strstr(ev, "cannot build"));
    /* anything else fails, typed */
    free(w);
    w = work_dir("bad");
    ck_assert_int_eq(mt_prepare_run(bad, 1, "r3", NULL, w, 30, out, sizeof out, ev, sizeof ev, d),
                     MT_PREP_FAILED);
    ck_assert_str_eq(out, "prepare_failed");
    ck_assert_ptr_nonnull(strstr(ev, "undefined reference"));
    free(w);
    w = work_dir("none");
    ck_assert_int_eq(
        mt_prepare_run(none, 1, "r4", NULL, w, 30, out, sizeof out, ev, sizeof ev, d),
        MT_PREP_FAILED);
    ck_assert_str_eq(out, "launch_error");
    free(w);
    mt_diag_destroy(&d);
}
END_TEST

START_TEST(prepare_killed_half_way_runs_again_on_an_empty_directory)
{
    char *w = work_dir("again"), out[32], ev[512], path[400];
    const char *steps[] = {"sh -c 'test ! -e leftover && touch fresh'"};
    mt_diag *d = mt_diag_new();
    FILE *f;
    /* a work directory with leftovers and no record: a prepare that died */
    mkdir(w, 0755);
    snprintf(path, sizeof path, "%s/leftover", w);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    ck_assert_int_eq(
        mt_prepare_run(steps, 1, "r5", NULL, w, 30, out, sizeof out, ev, sizeof ev, d),
        MT_PREP_OK);
    snprintf(path, sizeof path, "%s/fresh", w);
    ck_assert_int_eq(access(path, F_OK), 0);
    free(w);
    mt_diag_destroy(&d);
}
END_TEST

/* The process preparing a revision is killed (SIGKILL, as a bisection is)
 * while its step, deaf to SIGTERM, still works in the directory: the next
 * prepare of that revision waits for the step's processes to be gone before
 * it empties the directory, so the dying step's last write (by the
 * directory's absolute path, as `git clone REPO {work}` writes) cannot land
 * in the fresh one. */
START_TEST(prepare_after_a_kill_waits_for_the_killed_step)
{
    char *w = work_dir("killed"), out[32], ev[512], path[400], *text;
    const char *slow[] = {"sh -c 'trap \"\" TERM; touch ../started; sleep 1; echo old >> $MOETUNE_WORK/writers'"};
    const char *quick[] = {"sh -c 'echo new >> writers'"};
    struct timespec nap = {0, 10 * 1000000L};
    mt_diag *d = mt_diag_new();
    pid_t pid;
    int i;
    fflush(NULL);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(mt_prepare_run(slow, 1, "r6", NULL, w, 30, out, sizeof out, ev, sizeof ev, d));
    snprintf(path, sizeof path, "%s/../started", w);
    for (i = 0; i < 1000 && access(path, F_OK) != 0; i++)
        nanosleep(&nap, NULL);
    ck_assert_int_eq(access(path, F_OK), 0);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    ck_assert_int_eq(
        mt_prepare_run(quick, 1, "r6", NULL, w, 30, out, sizeof out, ev, sizeof ev, d),
        MT_PREP_OK);
    /* past the killed step's own end (1 s after it started) */
    nap.tv_nsec = 0;
    nap.tv_sec = 2;
    nanosleep(&nap, NULL);
    snprintf(path, sizeof path, "%s/writers", w);
    text = tk_slurp(path);
    ck_assert_ptr_nonnull(text);
    ck_assert_str_eq(text, "new\n");
    free(text);
    free(w);
    mt_diag_destroy(&d);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("bisect");
    TCase *t = tcase_create("method");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, one_regression_found_exactly_and_deterministically);
    tcase_add_test(t, culprits_at_the_edges);
    tcase_add_test(t, no_regression_stops_at_the_ends_with_figures);
    tcase_add_test(t, a_faster_bad_end_is_not_a_regression);
    tcase_add_test(t, skipped_revisions_give_a_range);
    tcase_add_test(t, lost_replicates_are_asked_again_then_fail_the_revision);
    tcase_add_test(t, an_end_that_cannot_be_measured);
    tcase_add_test(t, a_failing_runner_stops_the_bisection);
    tcase_add_test(t, two_regressions_are_both_found);
    tcase_add_test(t, two_regressions_at_run_noise);
    tcase_add_test(t, bad_parameters_are_refused);
    tcase_add_test(t, speculation_measures_the_next_midpoints_alongside);
    suite_add_tcase(s, t);
    t = tcase_create("prepare");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, prepare_templates_split_and_expand);
    tcase_add_test(t, prepare_runs_once_and_types_its_outcome);
    tcase_add_test(t, prepare_killed_half_way_runs_again_on_an_empty_directory);
    tcase_add_test(t, prepare_after_a_kill_waits_for_the_killed_step);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    int rc;
    if (!mkdtemp(base))
        return 1;
    rc = tk_run(suite());
    nftw(base, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return rc;
}
