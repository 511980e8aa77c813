/*
 * bench_bisect.c - accuracy against runs for three ways of bisecting a
 * throughput regression, over seeded trials under the sim's noise model.
 *
 * Each trial: N revisions (64), revision 0 good, N-1 bad, one culprit drawn
 * uniformly from 1..N-1 that makes every later revision `step` (3%) slower.
 * A sample is one run's median step time over the screen window (steps
 * 11..20 of 20), the sim's noise exactly: a per-run offset (Gaussian, sd 1%
 * by default), per-step AR(1) jitter (cv 2%, lag-1 0.5), seeded by (trial,
 * revision, replicate) so every run is independent.
 *
 *   moetune    search/bisect.c: the ends by the group-sequential test, an
 *              SPRT per midpoint, consistency checks (one slot: no speculation)
 *   git-bisect one run per revision; a revision is bad when its run is slower
 *              than the midpoint of the two ends' runs (a `git bisect run`
 *              script with a threshold)
 *   git x8     the same with the mean of 8 runs per revision (as many runs
 *              as moetune spends, spent evenly)
 *   asv-find   one run per revision; recurse on the side with the bigger
 *              normalized jump (|log(mid/lo)| against |log(hi/mid)|)
 *
 * Accuracy is the share of trials whose reported culprit is exactly the
 * true one (for moetune: exactly one culprit, the true one).  Also printed:
 * moetune's false alarms on trials with no regression, how it does with two
 * regressions (both found exactly: targets 95% at the default noise, 85% at
 * twice it), and how often the culprit's 95% interval holds the true step
 * (target 95%; over the one-regression trials found exactly, and, for
 * information, over the exact steps of the two-regression trials).  Targets
 * print `met` or `MISSED`; the exit status is 0 either way.
 * Usage: bench_bisect [--trials N] [--revs N] [--step X]
 */
#include "bisect.h"
#include "sim.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct trial {
    uint64_t seed;
    int n;
    int culprit[2];  /* first revisions of the regressions (0: none) */
    double step[2];
    double offset_sd;
} trial;

static double sample(const trial *t, int rev, int rep)
{
    sim_noise nz;
    double v[10], m, f = 1.0;
    int it, k = 0, i;
    sim_noise_init(&nz, t->seed, (uint64_t)rev * 0x9E3779B97F4A7C15ull + 1, rep, t->offset_sd,
                   0.02, 0.5);
    for (it = 1; it <= 20; it++) {
        double x = sim_noise_step(&nz);
        if (it >= 11)
            v[k++] = x;
    }
    mt_stats_median(v, 10, &m);
    for (i = 0; i < 2; i++)
        if (t->culprit[i] && rev >= t->culprit[i])
            f *= 1 + t->step[i];
    return 1000.0 * f * m;
}

static int runner(void *ctx, mt_bisect_job *jobs, size_t n)
{
    const trial *t = ctx;
    size_t i;
    for (i = 0; i < n; i++) {
        jobs[i].status = MT_BJ_OK;
        jobs[i].ms = sample(t, jobs[i].rev, jobs[i].rep);
        strcpy(jobs[i].outcome, "ok");
    }
    return 0;
}

/* The mean of k runs of a revision. */
static double mean_k(const trial *t, int rev, int k)
{
    double s = 0;
    int i;
    for (i = 0; i < k; i++)
        s += sample(t, rev, i);
    return s / k;
}

/* git bisect run with k runs per revision (their mean) and a midpoint
 * threshold. */
static int git_style(const trial *t, int k, long *runs)
{
    double g = mean_k(t, 0, k), b = mean_k(t, t->n - 1, k), thr = (g + b) / 2;
    int lo = 0, hi = t->n - 1;
    *runs = 2 * k;
    while (hi - lo > 1) {
        int m = lo + (hi - lo) / 2;
        *runs += k;
        if (mean_k(t, m, k) > thr)
            hi = m;
        else
            lo = m;
    }
    return hi;
}

/* asv find: recurse on the bigger normalized jump, one run per revision. */
static int asv_style(const trial *t, long *runs)
{
    double vlo = sample(t, 0, 0), vhi = sample(t, t->n - 1, 0);
    int lo = 0, hi = t->n - 1;
    *runs = 2;
    while (hi - lo > 1) {
        int m = lo + (hi - lo) / 2;
        double vm = sample(t, m, 0);
        (*runs)++;
        if (fabs(log(vm / vlo)) >= fabs(log(vhi / vm)))
            hi = m, vhi = vm;
        else
            lo = m, vlo = vm;
    }
    return hi;
}

typedef struct tally {
    long ok, trials, runs, max_runs;
} tally;

static void add(tally *y, int ok, long runs)
{
    y->ok += ok;
    y->trials++;
    y->runs += runs;
    if (runs > y->max_runs)
        y->max_runs = runs;
}

static void row(const char *method, double noise, const tally *y)
{
    printf("  %-10s  offset sd %.0f%%  accuracy %6.2f%%  mean runs %6.1f  max runs %4ld\n", method,
           100 * noise, 100.0 * y->ok / y->trials, (double)y->runs / y->trials, y->max_runs);
}

int main(int argc, char **argv)
{
    int trials = 200, n = 64, i, k;
    double step = 0.03, budget;
    mt_bisect_params p;
    double noises[2] = {0.01, 0.02};
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--trials") && i + 1 < argc)
            trials = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--revs") && i + 1 < argc)
            n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--step") && i + 1 < argc)
            step = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_bisect [--trials N] [--revs N] [--step X]\n");
            return 2;
        }
    }
    if (trials < 1 || n < 3 || !(step > 0)) {
        fprintf(stderr, "bench_bisect: bad arguments\n");
        return 2;
    }
    mt_bisect_params_default(&p);
    budget = 12 * log2((double)n);
    printf("bench_bisect: %d trials, %d revisions, one %.1f%% regression; target at the default "
           "noise: >= 99%% accuracy, mean runs < 12 x log2(N) = %.1f\n",
           trials, n, 100 * step, budget);
    for (k = 0; k < 2; k++) {
        tally mo = {0}, gi = {0}, g8 = {0}, twor = {0}, as = {0}, fa = {0}, two = {0};
        tally cov = {0}, cov2 = {0};
        double width = 0, width2 = 0;
        for (i = 0; i < trials; i++) {
            trial t;
            mt_bisect b;
            long r = 0;
            memset(&t, 0, sizeof t);
            t.seed = 1000003ull * (uint64_t)(i + 1) + (uint64_t)k;
            t.n = n;
            t.offset_sd = noises[k];
            t.culprit[0] = 1 + (int)(((uint64_t)i * 2654435761u + 12345u) % (uint64_t)(n - 1));
            t.step[0] = step;
            mt_bisect_run(&b, (size_t)n, &p, runner, &t);
            add(&mo,
                b.outcome == MT_BISECT_FOUND && b.n_culprits == 1 &&
                    b.culprits[0].lo == t.culprit[0] && b.culprits[0].hi == t.culprit[0],
                b.runs);
            if (b.outcome == MT_BISECT_FOUND && b.n_culprits == 1 &&
                b.culprits[0].lo == t.culprit[0] && b.culprits[0].hi == t.culprit[0]) {
                add(&cov, b.culprits[0].ci_lo <= step && step <= b.culprits[0].ci_hi, 0);
                width += b.culprits[0].ci_hi - b.culprits[0].ci_lo;
            }
            if (getenv("BENCH_BISECT_DEBUG") && !(b.outcome == MT_BISECT_FOUND && b.n_culprits == 1 &&
                    b.culprits[0].lo == t.culprit[0] && b.culprits[0].hi == t.culprit[0])) {
                int q;
                for (q = 0; q < b.n_culprits; q++)
                    printf("  found %d..%d (%+.2f%%)", b.culprits[q].lo, b.culprits[q].hi, 100 * b.culprits[q].effect);
                for (q = 0; q < b.n_notes; q++)
                    printf("  note: %s\n", b.notes[q]);
                size_t j;
                printf("trial %d culprit %d runs %ld:", i, t.culprit[0], b.runs);
                for (j = 0; j < b.n; j++)
                    if (b.revs[j].n)
                        printf(" %zu:%d%c", j, b.revs[j].n, "?LHP"[b.revs[j].cls]);
                printf("\n");
            }
            mt_bisect_clear(&b);
            {
                int g = git_style(&t, 1, &r);
                add(&gi, g == t.culprit[0], r);
                g = git_style(&t, 8, &r);
                add(&g8, g == t.culprit[0], r);
                g = asv_style(&t, &r);
                add(&as, g == t.culprit[0], r);
            }
            /* no regression at all: the search must stop at the ends */
            t.culprit[0] = 0;
            mt_bisect_run(&b, (size_t)n, &p, runner, &t);
            add(&fa, b.outcome == MT_BISECT_NOT_REPRODUCED, b.runs);
            mt_bisect_clear(&b);
            /* two regressions of `step` each, at least 4 revisions apart */
            t.culprit[0] = 1 + (int)(((uint64_t)i * 40503u + 7u) % (uint64_t)(n / 2 - 2));
            t.culprit[1] = t.culprit[0] + 4 + (int)(((uint64_t)i * 9973u) % (uint64_t)(n / 2 - 3));
            t.step[1] = step;
            mt_bisect_run(&b, (size_t)n, &p, runner, &t);
            add(&two,
                b.outcome == MT_BISECT_FOUND && b.n_culprits == 2 &&
                    b.culprits[0].lo == t.culprit[0] && b.culprits[0].hi == t.culprit[0] &&
                    b.culprits[1].lo == t.culprit[1] && b.culprits[1].hi == t.culprit[1],
                b.runs);
            {
                /* both found, or the missing one inside a range a note names */
                int q, r, ok = b.outcome == MT_BISECT_FOUND;
                for (r = 0; r < 2 && ok; r++) {
                    int hit = 0;
                    for (q = 0; q < b.n_culprits; q++)
                        hit |= b.culprits[q].lo <= t.culprit[r] && t.culprit[r] <= b.culprits[q].hi;
                    for (q = 0; q < b.n_notes && !hit; q++) {
                        const char *x = strstr(b.notes[q], "lies in #");
                        int lo, hi;
                        if (x && sscanf(x, "lies in #%d..#%d", &lo, &hi) == 2)
                            hit = lo <= t.culprit[r] && t.culprit[r] <= hi;
                    }
                    ok = hit;
                }
                add(&twor, ok, b.runs);
            }
            {
                int q;
                for (q = 0; q < b.n_culprits && b.outcome == MT_BISECT_FOUND; q++)
                    if (b.culprits[q].lo == b.culprits[q].hi &&
                        (b.culprits[q].lo == t.culprit[0] || b.culprits[q].lo == t.culprit[1])) {
                        add(&cov2, b.culprits[q].ci_lo <= step && step <= b.culprits[q].ci_hi, 0);
                        width2 += b.culprits[q].ci_hi - b.culprits[q].ci_lo;
                    }
            }
            if (getenv("BENCH_BISECT_DEBUG2") &&
                !(b.outcome == MT_BISECT_FOUND && b.n_culprits == 2 &&
                  b.culprits[0].lo == t.culprit[0] && b.culprits[0].hi == t.culprit[0] &&
                  b.culprits[1].lo == t.culprit[1] && b.culprits[1].hi == t.culprit[1])) {
                int q;
                size_t j;
                printf("two: %d %d:", t.culprit[0], t.culprit[1]);
                for (q = 0; q < b.n_culprits; q++)
                    printf("  found %d..%d (%+.2f%%)", b.culprits[q].lo, b.culprits[q].hi, 100 * b.culprits[q].effect);
                printf("\n");
                for (q = 0; q < b.n_notes; q++)
                    printf("  note: %s\n", b.notes[q]);
                for (j = 0; j < b.n; j++)
                    if (b.revs[j].n)
                        printf(" %zu:%d%c", j, b.revs[j].n, "?LHP"[b.revs[j].cls]);
                printf("\n");
            }
            mt_bisect_clear(&b);
        }
        printf("noise: per-run offset sd %.0f%% (%s), jitter cv 2%%, lag-1 0.5\n", 100 * noises[k],
               k ? "twice the default" : "the default");
        row("moetune", noises[k], &mo);
        row("git-bisect", noises[k], &gi);
        row("asv-find", noises[k], &as);
        row("git x8", noises[k], &g8);
        printf("  moetune, no regression: stopped at the ends (correct) in %.2f%%, mean runs %.1f\n",
               100.0 * fa.ok / fa.trials, (double)fa.runs / fa.trials);
        printf("  moetune, two %.0f%% regressions: both found exactly in %.2f%%, mean runs %.1f\n",
               100 * step, 100.0 * two.ok / two.trials, (double)two.runs / two.trials);
        printf("  moetune, two %.0f%% regressions: each found or inside a range a note names in "
               "%.2f%%\n", 100 * step, 100.0 * twor.ok / twor.trials);
        printf("  moetune, culprit interval (95%%, Welch t on log run times, Hsu df): holds the true %.0f%% "
               "step in %.2f%% of %ld exact finds, mean width %.2f%%; two regressions: %.2f%% of "
               "%ld exact steps, mean width %.2f%%\n",
               100 * step, cov.trials ? 100.0 * cov.ok / cov.trials : 0, cov.trials,
               cov.trials ? 100 * width / cov.trials : 0, cov2.trials ? 100.0 * cov2.ok / cov2.trials : 0,
               cov2.trials, cov2.trials ? 100 * width2 / cov2.trials : 0);
        {
            double both = 100.0 * two.ok / two.trials, want = k ? 85.0 : 95.0;
            double c = cov.trials ? 100.0 * cov.ok / cov.trials : 0;
            printf("bench_bisect: two-regression target at %s noise (both exact >= %.0f%%) %s "
                   "(both exact %.2f%%, mean runs %.1f)\n",
                   k ? "twice the default" : "the default", want, both >= want ? "met" : "MISSED",
                   both, (double)two.runs / two.trials);
            printf("bench_bisect: interval target at %s noise (coverage >= 95%%) %s (%.2f%% of %ld "
                   "exact finds)\n",
                   k ? "twice the default" : "the default", c >= 95.0 ? "met" : "MISSED", c,
                   cov.trials);
        }
        if (k == 0) {
            int ok = 100.0 * mo.ok / mo.trials >= 99.0 && (double)mo.runs / mo.trials < budget;
            printf("bench_bisect: target at the default noise %s (accuracy %.2f%%, mean runs %.1f "
                   "against %.1f)\n",
                   ok ? "met" : "MISSED", 100.0 * mo.ok / mo.trials, (double)mo.runs / mo.trials,
                   budget);
        }
    }
    return 0;
}
