/*
 * bisect.c - noise-aware regression bisection (see bisect.h for the method).
 */
#include "bisect.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INFRA_MAX 3 /* replicates lost to infrastructure before a revision counts as failed */
#define SEG_MIN_RUNS 3 /* runs of each revision at a split before a stretch's test looks */

void mt_bisect_params_default(mt_bisect_params *p)
{
    memset(p, 0, sizeof *p);
    mt_stats_design_default(&p->ends);
    p->ends.initial = 8;
    p->ends.step = 4;
    p->ends.max_replicates = 32;
    p->eps = 0.001;
    p->mid_initial = 2;
    p->mid_max = 12;
    p->slots = 1;
    p->max_culprits = 6;
    p->check = p->ends;
    p->check.alpha = p->ends.alpha / 5;
    p->check.initial = 4;
    p->check.step = 4;
    p->check.max_replicates = 24;
    p->resolution = 1.5;
    p->miss = 0.05;
    p->verify_resolution = 1.0;
    p->verify_drop = 0.01;
    p->verify_max = 24;
}

const char *mt_bisect_class_name(int c)
{
    switch (c) {
    case MT_BC_LOW:
        return "good";
    case MT_BC_HIGH:
        return "bad";
    case MT_BC_PARTIAL:
        return "partial";
    default:
        return "unclassified";
    }
}

typedef struct bs {
    mt_bisect *b;
    const mt_bisect_params *p;
    mt_bisect_run_fn fn;
    void *ctx;
    int rc;       /* the runner failed, or out of memory: stop everything */
} bs;

static void note(bs *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(bs *s, const char *fmt, ...)
{
    va_list ap;
    if (s->b->n_notes >= MT_BISECT_MAX_NOTES)
        return;
    va_start(ap, fmt);
    vsnprintf(s->b->notes[s->b->n_notes++], sizeof s->b->notes[0], fmt, ap);
    va_end(ap);
}

static int usable(const bs *s, int r)
{
    return s->b->revs[r].state == 0;
}

static int push(mt_bisect_rev *r, double ms)
{
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 16;
        double *v = realloc(r->ms, (size_t)cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        r->ms = v;
        r->cap = cap;
    }
    r->ms[r->n++] = ms;
    return 0;
}

/* Asks for want[i] more replicates of revs[i], interleaved (A B A B ...),
 * and applies the results. */
static void ask(bs *s, const int *revs, const int *want, size_t k)
{
    size_t i, n = 0, total = 0;
    int round;
    mt_bisect_job *jobs;
    if (s->rc)
        return;
    for (i = 0; i < k; i++)
        if (want[i] > 0 && usable(s, revs[i]))
            total += (size_t)want[i];
    if (!total)
        return;
    jobs = calloc(total, sizeof *jobs);
    if (!jobs) {
        s->rc = -ENOMEM;
        return;
    }
    for (round = 0; n < total; round++)
        for (i = 0; i < k; i++) {
            mt_bisect_rev *r = &s->b->revs[revs[i]];
            if (round < want[i] && usable(s, revs[i])) {
                jobs[n].rev = revs[i];
                jobs[n].rep = r->asked++;
                n++;
            }
        }
    if (s->fn(s->ctx, jobs, n)) {
        s->rc = -EIO;
        free(jobs);
        return;
    }
    s->b->runs += (long)n;
    for (i = 0; i < n; i++) {
        mt_bisect_rev *r = &s->b->revs[jobs[i].rev];
        if (r->state)
            continue;
        switch (jobs[i].status) {
        case MT_BJ_OK:
            if (isfinite(jobs[i].ms) && jobs[i].ms > 0) {
                if (push(r, jobs[i].ms))
                    s->rc = -ENOMEM;
                break;
            }
            /* a sample that is not a step time is lost */
            __attribute__((fallthrough));
        case MT_BJ_INFRA:
            if (++r->infra >= INFRA_MAX) {
                r->state = MT_BJ_FAILED;
                snprintf(r->outcome, sizeof r->outcome, "%s",
                         jobs[i].outcome[0] ? jobs[i].outcome : "infra");
                snprintf(r->evidence, sizeof r->evidence, "%d replicates lost: %s", r->infra,
                         jobs[i].evidence);
            }
            break;
        default:
            r->state = jobs[i].status == MT_BJ_SKIP ? MT_BJ_SKIP : MT_BJ_FAILED;
            snprintf(r->outcome, sizeof r->outcome, "%s",
                     jobs[i].outcome[0] ? jobs[i].outcome
                                        : (r->state == MT_BJ_SKIP ? "skip" : "failed"));
            snprintf(r->evidence, sizeof r->evidence, "%s", jobs[i].evidence);
            break;
        }
    }
    free(jobs);
}

/* Tops revs[i] up to need[i] samples (lost replicates asked again). */
static void ensure(bs *s, const int *revs, const int *need, size_t k)
{
    int want[8];
    size_t i;
    for (;;) {
        int any = 0;
        for (i = 0; i < k && i < 8; i++) {
            mt_bisect_rev *r = &s->b->revs[revs[i]];
            want[i] = usable(s, revs[i]) && r->n < need[i] ? need[i] - r->n : 0;
            any |= want[i] > 0;
        }
        if (!any || s->rc)
            return;
        ask(s, revs, want, k);
    }
}

static double mean(const double *x, int n)
{
    double t = 0;
    int i;
    for (i = 0; i < n; i++)
        t += x[i];
    return n ? t / n : NAN;
}

static double ssd(const double *x, int n, double m)
{
    double t = 0;
    int i;
    for (i = 0; i < n; i++)
        t += (x[i] - m) * (x[i] - m);
    return t;
}

/* The mean of a revision's log samples from replicate `from` on (log step
 * time: a multiplicative step is a shift there). */
static double lmean_from(const mt_bisect_rev *r, int from)
{
    double t = 0;
    int i;
    for (i = from; i < r->n; i++)
        t += log(r->ms[i]);
    return r->n > from ? t / (r->n - from) : NAN;
}

/* The run-to-run variance of log step time, pooled within every measured
 * revision (the noise is the executors', shared by all revisions). */
static double lvar(const bs *s)
{
    double ss = 0;
    long df = 0;
    size_t k;
    for (k = 0; k < s->b->n; k++) {
        const mt_bisect_rev *r = &s->b->revs[k];
        double m;
        int i;
        if (r->state || r->n < 2)
            continue;
        m = lmean_from(r, 0);
        for (i = 0; i < r->n; i++)
            ss += (log(r->ms[i]) - m) * (log(r->ms[i]) - m);
        df += r->n - 1;
    }
    return df > 0 && ss > 0 ? ss / (double)df : 1e-12;
}

/* z with P(Z > z) = q for the standard normal (bisection on erfc). */
static double z_upper(double q)
{
    double lo = 0, hi = 40;
    int i;
    for (i = 0; i < 200; i++) {
        double mid = 0.5 * (lo + hi);
        if (0.5 * erfc(mid / sqrt(2.0)) > q)
            lo = mid;
        else
            hi = mid;
    }
    return 0.5 * (lo + hi);
}

/* The verification of a step (lo: its parent, hi: the culprit) on fresh
 * runs only: the runs before from_lo / from_hi decided the two revisions'
 * classes, so they are selected (biased apart).  Wald's sequential
 * probability ratio test of "the same level" against "hi slower by theta"
 * (log scale) on the difference of the fresh runs' means, its variance the
 * pooled run-to-run variance over 1/n_lo + 1/n_hi; err_keep is the error of
 * keeping a step that is not there, err_drop that of dropping one of theta.
 * At least `minn` fresh runs per arm before the first look, then one run to
 * the arm with fewer (both when even), up to `cap` fresh runs per arm; at
 * the cap the step is kept only when significant (one-sided, at err_keep).
 * 1: kept, 0: dropped, -1: a revision became unusable.  *dout: the fresh
 * runs' log difference. */
static int verify_step(bs *s, int lo, int from_lo, int hi, int from_hi, int minn, double theta,
                       double err_keep, double err_drop, int cap, double *dout)
{
    const double A = log((1 - err_drop) / err_keep), B = log(err_drop / (1 - err_keep));
    const mt_bisect_rev *l = &s->b->revs[lo], *h = &s->b->revs[hi];
    for (;;) {
        int revs[2] = {lo, hi}, need[2], nl, nh;
        double d, v, llr;
        need[0] = l->n - from_lo < minn ? from_lo + minn : l->n;
        need[1] = h->n - from_hi < minn ? from_hi + minn : h->n;
        ensure(s, revs, need, 2);
        if (s->rc || !usable(s, lo) || !usable(s, hi))
            return -1;
        nl = l->n - from_lo;
        nh = h->n - from_hi;
        d = lmean_from(h, from_hi) - lmean_from(l, from_lo);
        v = lvar(s) * (1.0 / nl + 1.0 / nh);
        llr = (theta * d - 0.5 * theta * theta) / v;
        *dout = d;
        if (llr >= A)
            return 1;
        if (llr <= B)
            return 0;
        if (nl >= cap && nh >= cap)
            return d / sqrt(v) > z_upper(err_keep);
        need[0] = l->n + (nl <= nh && nl < cap);
        need[1] = h->n + (nh <= nl && nh < cap);
        ensure(s, revs, need, 2);
        if (s->rc || !usable(s, lo) || !usable(s, hi))
            return -1;
    }
}

/* The strongest step among the measured revisions of [lo, hi] (index
 * order): over each split between two consecutive measured revisions, the
 * difference of the mean log step time of all runs right of it and all runs
 * left of it, over its standard error (the pooled run-to-run variance).
 * One-sided (right slower).  *at and *to: the revisions either side of the
 * best split; *k: the number of splits (0 with fewer than two measured
 * revisions); *nl, *nr: the runs either side.  Returns its z. */
static double split(const bs *s, int lo, int hi, int *at, int *to, int *k, long *nl_out,
                    long *nr_out)
{
    double tot = 0, left = 0, best = 0, var = lvar(s);
    long n = 0, nl = 0;
    int r, prev = -1;
    *k = 0;
    *at = *to = -1;
    *nl_out = *nr_out = 0;
    for (r = lo; r <= hi; r++) {
        const mt_bisect_rev *x = &s->b->revs[r];
        int i;
        if (x->state || !x->n)
            continue;
        for (i = 0; i < x->n; i++)
            tot += log(x->ms[i]);
        n += x->n;
    }
    for (r = lo; r <= hi; r++) {
        const mt_bisect_rev *x = &s->b->revs[r];
        int i;
        if (x->state || !x->n)
            continue;
        if (prev >= 0) {
            double ml = left / nl, mr = (tot - left) / (n - nl);
            double z = (mr - ml) / sqrt(var * (1.0 / nl + 1.0 / (n - nl)));
            ++*k;
            if (*at < 0 || z > best) {
                best = z, *at = prev, *to = r;
                *nl_out = nl, *nr_out = n - nl;
            }
        }
        for (i = 0; i < x->n; i++)
            left += log(x->ms[i]);
        nl += x->n;
        prev = r;
    }
    return *at < 0 ? 0 : best;
}

/* Is there a step in [lo, hi], a stretch that should be one level?  Wald's
 * sequential probability ratio test on its strongest split (split()): the
 * difference of the two sides' mean log step time is "no step" (0) against
 * "a step of theta", its variance the pooled run-to-run variance over
 * 1/n_left + 1/n_right (every run of every revision of each side: without a
 * step they share a level).  The bound for a step is Bonferroni over the
 * splits (the strongest one is chosen): err_step over their number, the
 * error of seeing a step that is not there; err_miss is that of missing a
 * step of theta.  Before a look, and while undecided, the two revisions
 * either side of the split get fresh runs (at least minn each, then one more
 * to the side with fewer runs) up to cap runs each; at the cap a step is
 * seen only when the split is significant (one-sided, err_step over the
 * splits).  1: a step (*at, *to either side of it), 0: none, -1: a revision
 * became unusable. */
static int side_test(bs *s, int lo, int hi, double theta, double err_step, double err_miss,
                     int cap, int minn, int *at, int *to)
{
    for (;;) {
        int k, revs[2], need[2];
        long nl, nr;
        double z = split(s, lo, hi, at, to, &k, &nl, &nr), v, d, llr;
        if (!k)
            return 0;
        v = lvar(s) * (1.0 / nl + 1.0 / nr);
        d = z * sqrt(v);
        llr = (theta * d - 0.5 * theta * theta) / v;
        revs[0] = *at;
        revs[1] = *to;
        need[0] = s->b->revs[*at].n;
        need[1] = s->b->revs[*to].n;
        if (need[0] < minn || need[1] < minn) {
            need[0] = need[0] < minn ? minn : need[0];
            need[1] = need[1] < minn ? minn : need[1];
        } else {
            if (llr >= log(k * (1 - err_miss) / err_step))
                return 1;
            if (llr <= log(err_miss / (1 - err_step)))
                return 0;
            if (need[0] >= cap && need[1] >= cap)
                return z > z_upper(err_step / k);
            /* the smaller side's revision at the split: its variance dominates */
            if ((nl <= nr && need[0] < cap) || need[1] >= cap)
                need[0]++;
            else
                need[1]++;
        }
        ensure(s, revs, need, 2);
        if (s->rc || !usable(s, revs[0]) || !usable(s, revs[1]))
            return -1;
    }
}

/* A reference distribution: the samples of the revisions classified alike
 * within one bracket (the reference revision first). */
#define POOL_MAX 64
typedef struct ref {
    int rev[POOL_MAX];
    int n;
} ref;

static void ref_one(ref *r, int rev)
{
    r->rev[0] = rev;
    r->n = 1;
}

static void ref_add(ref *r, int rev)
{
    if (r->n < POOL_MAX)
        r->rev[r->n++] = rev;
}

/* Pooled mean, the within-revision sum of squares and its degrees of freedom. */
static void ref_stats(const bs *s, const ref *r, double *m, double *ss, int *df)
{
    double t = 0;
    int i, n = 0;
    *ss = 0;
    *df = 0;
    for (i = 0; i < r->n; i++) {
        const mt_bisect_rev *x = &s->b->revs[r->rev[i]];
        int j;
        if (x->n < 1)
            continue;
        for (j = 0; j < x->n; j++)
            t += x->ms[j];
        n += x->n;
        *ss += ssd(x->ms, x->n, mean(x->ms, x->n));
        *df += x->n - 1;
    }
    *m = n ? t / n : NAN;
}

/* Appends revision x's samples to *v (*n of them so far).  0, or -1 out of
 * memory (then *v is freed and *n is 0). */
static int append_samples(double **v, int *n, const mt_bisect_rev *x)
{
    double *w;
    if (!x->n)
        return 0;
    if (!(w = realloc(*v, (size_t)(*n + x->n) * sizeof *w))) {
        free(*v);
        *v = NULL;
        *n = 0;
        return -1;
    }
    memcpy(w + *n, x->ms, (size_t)x->n * sizeof *w);
    *v = w;
    *n += x->n;
    return 0;
}

/* All samples of a reference, in one array (caller frees; NULL when none). */
static double *ref_samples(const bs *s, const ref *r, int *n)
{
    double *v = NULL;
    int i;
    *n = 0;
    for (i = 0; i < r->n; i++)
        if (append_samples(&v, n, &s->b->revs[r->rev[i]]))
            return NULL;
    return v;
}

/* The SPRT's log likelihood ratio (H over L) of revision m's samples: the
 * predictive likelihood of their mean under "m is distributed as L" and
 * "as H", Gaussian with the references' pooled within-revision spread; the
 * references' own uncertainty (their means come from finite samples) is in
 * the variance, so thin references cannot make the test overconfident. */
static double llr(const bs *s, int m, const ref *L, const ref *H)
{
    const mt_bisect_rev *r = &s->b->revs[m];
    double ml, mh, sl, sh, var, x, vl, vh;
    int dl, dh, nl = 0, nh = 0, i;
    ref_stats(s, L, &ml, &sl, &dl);
    ref_stats(s, H, &mh, &sh, &dh);
    for (i = 0; i < L->n; i++)
        nl += s->b->revs[L->rev[i]].n;
    for (i = 0; i < H->n; i++)
        nh += s->b->revs[H->rev[i]].n;
    var = dl + dh > 0 ? (sl + sh) / (dl + dh) : 0;
    if (!(var > 0))
        var = 1e-12 * (ml + mh) * (ml + mh);
    if (!r->n || !nl || !nh)
        return 0;
    x = mean(r->ms, r->n);
    vl = var * (1.0 / r->n + 1.0 / nl);
    vh = var * (1.0 / r->n + 1.0 / nh);
    return -0.5 * ((x - mh) * (x - mh) / vh + log(vh)) + 0.5 * ((x - ml) * (x - ml) / vl + log(vl));
}

/* The group-sequential comparison of two references (control, candidate)
 * with design d: replicates are added look by look to each reference's own
 * revision (its first).  The verdict, or -1 when a revision became unusable
 * (or the runner failed). */
static int compare(bs *s, const ref *control, const ref *candidate, const mt_stats_design *dd,
                   int strict, mt_stats_decision *out)
{
    mt_stats_design d = *dd;
    int look, K, v = -1;
    d.seed = (uint64_t)control->rev[0] * 1000003u + (uint64_t)candidate->rev[0];
    K = mt_stats_design_looks(&d);
    for (look = 0; look < K; look++) {
        int revs[2] = {control->rev[0], candidate->rev[0]}, need[2], nx, ny;
        int nk = mt_stats_design_replicates(&d, look);
        double *x, *y;
        int rc;
        free(ref_samples(s, control, &nx));
        free(ref_samples(s, candidate, &ny));
        need[0] = s->b->revs[revs[0]].n + (nx < nk ? nk - nx : 0);
        need[1] = s->b->revs[revs[1]].n + (ny < nk ? nk - ny : 0);
        ensure(s, revs, need, 2);
        if (s->rc || !usable(s, revs[0]) || !usable(s, revs[1]))
            return -1;
        x = ref_samples(s, control, &nx);
        y = ref_samples(s, candidate, &ny);
        if (!x || !y) {
            free(x);
            free(y);
            s->rc = -ENOMEM;
            return -1;
        }
        rc = mt_stats_decide(&d, x, (size_t)nx, y, (size_t)ny, look, out);
        free(x);
        free(y);
        if (rc)
            return -1;
        v = (int)out->verdict;
        /* strict (the ends): SAME only once a change of the minimum effect
         * is outside the interval too; until the cap, more replicates */
        if (strict && out->verdict == MT_STATS_SAME && !out->capped &&
            !(out->ci_hi < d.min_effect && out->ci_lo > -d.min_effect))
            continue;
        if (out->verdict != MT_STATS_UNKNOWN || out->capped)
            break;
    }
    return v;
}

/* The usable revision strictly inside (a, b) nearest its middle, or -1. */
static int pick(const bs *s, int a, int b)
{
    int c = a + (b - a) / 2, k;
    for (k = 0; k <= b - a; k++) {
        int x = c + (k % 2 ? -(k + 1) / 2 : k / 2);
        if (x > a && x < b && usable(s, x))
            return x;
    }
    return -1;
}

/* Classifies revision m against references L and H; spec are revisions
 * to measure speculatively alongside (-1: none). */
static int classify(bs *s, int m, const ref *L, const ref *H, int spec0, int spec1)
{
    const mt_bisect_params *p = s->p;
    mt_bisect_rev *r = &s->b->revs[m];
    double A = log((1 - p->eps) / p->eps);
    int first = 1;
    for (;;) {
        int revs[3] = {m, spec0, spec1}, want[3] = {0, 0, 0};
        size_t k = 1;
        if (r->n < p->mid_initial) {
            want[0] = p->mid_initial - r->n;
        } else {
            r->llr = llr(s, m, L, H);
            if (r->llr >= A)
                return r->cls = MT_BC_HIGH;
            if (r->llr <= -A)
                return r->cls = MT_BC_LOW;
            if (r->n < p->mid_max) {
                want[0] = 1;
            } else {
                /* undecided at the cap: the references may be what is
                 * uncertain; top their own revisions up (to the ends' cap) */
                int l = L->rev[0], h = H->rev[0], j, more = 0;
                int rv[3] = {l, h, m}, wn[3] = {0, 0, 1};
                for (j = 0; j < 2; j++)
                    if (usable(s, rv[j]) && s->b->revs[rv[j]].n < p->ends.max_replicates)
                        wn[j] = 2, more = 1;
                if (!more)
                    break;
                ask(s, rv, wn, 3);
                if (s->rc || !usable(s, m) || !usable(s, l) || !usable(s, h))
                    return MT_BC_NONE;
                continue;
            }
        }
        if (first && p->slots > 1) {
            /* the next level's midpoints, speculatively (idle slots only) */
            int room = p->slots - want[0], j;
            for (j = 1; j < 3 && room > 0; j++)
                if (revs[j] >= 0 && usable(s, revs[j]) && s->b->revs[revs[j]].n < p->mid_initial) {
                    want[j] = p->mid_initial - s->b->revs[revs[j]].n;
                    if (want[j] > room)
                        want[j] = room;
                    room -= want[j];
                }
            k = 3;
        }
        first = 0;
        ask(s, revs, want, k);
        if (s->rc || !usable(s, m))
            return MT_BC_NONE;
    }
    /* undecided at the cap: where does it sit? */
    {
        mt_stats_decision d1, d2;
        ref M;
        int v1, v2;
        ref_one(&M, m);
        v1 = compare(s, L, &M, &p->ends, 0, &d1); /* m slower than L? */
        v2 = v1 < 0 ? -1 : compare(s, &M, H, &p->ends, 0, &d2); /* H slower than m? */
        if (v1 < 0 || v2 < 0)
            return MT_BC_NONE;
        if (v1 == MT_STATS_WORSE && v2 == MT_STATS_WORSE)
            return r->cls = MT_BC_PARTIAL;
        if (v1 == MT_STATS_WORSE)
            return r->cls = MT_BC_HIGH;
        if (v2 == MT_STATS_WORSE)
            return r->cls = MT_BC_LOW;
        r->llr = llr(s, m, L, H);
        return r->cls = r->llr > 0 ? MT_BC_HIGH : MT_BC_LOW;
    }
}

static void record(bs *s, int a, int b, const ref *L, const ref *H, int a_differs,
                   int b_differs)
{
    mt_bisect *B = s->b;
    mt_bisect_culprit *c;
    ref before, after;
    double *x, *y;
    int nx, ny, i;
    if (B->n_culprits >= MT_BISECT_MAX_CULPRITS)
        return;
    c = &B->culprits[B->n_culprits++];
    memset(c, 0, sizeof *c);
    c->lo = a + 1;
    c->hi = b;
    c->parent = a;
    c->partial = a_differs || b_differs;
    /* the step's size: the parent (pooled with L when alike) against the
     * culprit (pooled with H when alike) */
    ref_one(&before, a);
    for (i = 0; !a_differs && i < L->n; i++)
        if (L->rev[i] != a)
            ref_add(&before, L->rev[i]);
    ref_one(&after, b);
    for (i = 0; !b_differs && i < H->n; i++)
        if (H->rev[i] != b)
            ref_add(&after, H->rev[i]);
    x = ref_samples(s, &before, &nx);
    y = ref_samples(s, &after, &ny);
    c->ms_before = c->ms_after = c->effect = c->ci_lo = c->ci_hi = NAN;
    if (x && y) {
        mt_stats_median(x, (size_t)nx, &c->ms_before);
        mt_stats_median(y, (size_t)ny, &c->ms_after);
        /* a first estimate of the step (Welch's t on log run times, as
         * interval() computes the reported one once the stretches either
         * side are settled by consistency()) */
        if (mt_stats_welch_log_ci(x, (size_t)nx, y, (size_t)ny, 0.95, &c->effect, &c->ci_lo,
                                  &c->ci_hi)) {
            c->effect = c->ms_after / c->ms_before - 1;
            c->ci_lo = c->ci_hi = NAN;
        }
    }
    free(x);
    free(y);
}

static void search(bs *s, int a, int b, const ref *L0, const ref *H0);

/* Another regression lies in (lo, hi]: search it with lo and hi as its
 * references (or say so when the culprit cap stops it). */
static void further(bs *s, int lo, int hi, const char *how)
{
    if (s->b->n_culprits < s->p->max_culprits) {
        ref X, Y;
        ref_one(&X, lo);
        ref_one(&Y, hi);
        note(s, "#%d is %s than #%d: another regression lies in #%d..#%d", how[0] == 'f' ? lo : hi,
             how, how[0] == 'f' ? hi : lo, lo + 1, hi);
        search(s, lo, hi, &X, &Y);
    } else {
        note(s, "another regression lies in #%d..#%d (not searched: culprit cap)", lo + 1, hi);
    }
}

/* Searches bracket (a, b) with references L (low) and H (high). */
static void search(bs *s, int a, int b, const ref *L0, const ref *H0)
{
    ref L = *L0, H = *H0;
    int m, cls, a_differs, b_differs;
    while (!s->rc && (m = pick(s, a, b)) >= 0) {
        int q0 = pick(s, a, m), q1 = pick(s, m, b);
        cls = classify(s, m, &L, &H, q0, q1);
        if (s->rc)
            return;
        if (cls == MT_BC_NONE)
            continue; /* m became unusable (skip, failure): pick another */
        if (cls == MT_BC_LOW) {
            a = m;
            ref_add(&L, m);
        } else if (cls == MT_BC_HIGH) {
            b = m;
            ref_add(&H, m);
        } else {
            ref M;
            double ml = NAN, mm = NAN, mh = NAN;
            int nl, nh;
            double *xl = ref_samples(s, &L, &nl), *xh = ref_samples(s, &H, &nh);
            if (xl)
                mt_stats_median(xl, (size_t)nl, &ml);
            if (xh)
                mt_stats_median(xh, (size_t)nh, &mh);
            mt_stats_median(s->b->revs[m].ms, (size_t)s->b->revs[m].n, &mm);
            free(xl);
            free(xh);
            ref_one(&M, m);
            note(s, "#%d sits between its references (a partial step: median %.1f ms over %d runs, "
                    "good-like %.1f, bad-like %.1f): both sides are searched",
                 m, mm, s->b->revs[m].n, ml, mh);
            if (s->b->n_culprits < s->p->max_culprits)
                search(s, a, m, &L, &M);
            if (s->b->n_culprits < s->p->max_culprits)
                search(s, m, b, &M, &H);
            else
                note(s, "the culprit cap was reached: #%d..#%d were not searched",
                     m + 1, b);
            return;
        }
    }
    if (s->rc)
        return;
    /* the bracket is closed: is the step at b the whole of L -> H?  Each
     * side, from the reference's own revision to the end of the bracket,
     * should be one level; its strongest split over every run already
     * taken (split()) is a step when significant at the checks' alpha
     * (Bonferroni over the splits).  No runs are spent here: the stretches
     * between the culprits are tested again, sequentially, once the search
     * is over (consistency() in mt_bisect_run). */
    {
        int k, at, to;
        long nl, nr;
        double z = split(s, b, H.rev[0], &at, &to, &k, &nl, &nr);
        b_differs = k && z > z_upper(s->p->check.alpha / k);
        z = split(s, L.rev[0], a, &at, &to, &k, &nl, &nr);
        a_differs = k && z > z_upper(s->p->check.alpha / k);
    }
    record(s, a, b, &L, &H, a_differs, b_differs);
    if (b_differs)
        further(s, b, H.rev[0], "faster");
    if (a_differs)
        further(s, L.rev[0], a, "slower");
}

static int by_lo(const void *x, const void *y)
{
    const mt_bisect_culprit *a = x, *b = y;
    return (a->lo > b->lo) - (a->lo < b->lo);
}

/* All runs of the usable measured revisions of [lo, hi] (caller frees;
 * NULL when there are none, and then *oom says whether memory ran out). */
static double *range_samples(const bs *s, int lo, int hi, int *n, int *oom)
{
    double *v = NULL;
    int r;
    *n = 0;
    for (r = lo; r <= hi; r++)
        if (!s->b->revs[r].state && append_samples(&v, n, &s->b->revs[r])) {
            *oom = 1;
            return NULL;
        }
    return v;
}

/* The step of culprit c and its 95% interval, over the stretches either
 * side that the consistency tests left as one level each ([lo, parent] and
 * [hi, top]): Welch's t on the log step times of every run of their
 * measured revisions (one value per run: a run's per-run offset is shared
 * by its steps, so the run is the unit, never a step), the effect the ratio
 * of geometric means; the medians of the same runs either side. */
static void interval(bs *s, mt_bisect_culprit *c, int lo, int top)
{
    int nx, ny, oom = 0;
    double *x = range_samples(s, lo, c->parent, &nx, &oom);
    double *y = range_samples(s, c->hi, top, &ny, &oom);
    if (oom)
        s->rc = -ENOMEM;
    else if (x && y && nx >= 2 && ny >= 2) {
        mt_stats_median(x, (size_t)nx, &c->ms_before);
        mt_stats_median(y, (size_t)ny, &c->ms_after);
        if (mt_stats_welch_log_ci(x, (size_t)nx, y, (size_t)ny, 0.95, &c->effect, &c->ci_lo,
                                  &c->ci_hi))
            c->ci_lo = c->ci_hi = NAN;
    }
    free(x);
    free(y);
}

/* Once the search is over: each culprit's step must hold on its own
 * (verify_step() on fresh runs, when there is more than one), and every
 * stretch between two culprits (and the ends) must be one level
 * (side_test()); a stretch with a step is searched, and the new culprits
 * are verified in turn, until nothing changes. */
static void consistency(bs *s, int last)
{
    mt_bisect *b = s->b;
    const mt_bisect_params *p = s->p;
    int verified[4 * MT_BISECT_MAX_CULPRITS], nv = 0, round, i;
    const double floor = log1p(p->check.min_effect);
    for (round = 0; round < 4 && !s->rc; round++) {
        int k = 0, before;
        qsort(b->culprits, (size_t)b->n_culprits, sizeof b->culprits[0], by_lo);
        for (i = 0; i < b->n_culprits && !s->rc; i++) {
            mt_bisect_culprit *c = &b->culprits[i];
            int keep = 1, j, done = 0;
            double d = 0;
            for (j = 0; j < nv; j++)
                done |= verified[j] == c->hi;
            if (b->n_culprits > 1 && !done) {
                double theta = fmax(floor, p->verify_resolution * sqrt(lvar(s)));
                /* -1: a revision became unusable: the step stays, unverified */
                keep = verify_step(s, c->parent, b->revs[c->parent].n, c->hi, b->revs[c->hi].n,
                                   p->check.initial, theta, p->check.alpha, p->verify_drop,
                                   p->verify_max, &d) != 0;
                if (keep && nv < (int)(sizeof verified / sizeof verified[0]))
                    verified[nv++] = c->hi;
            }
            if (keep) {
                b->culprits[k++] = *c;
            } else {
                b->revs[c->hi].cls = MT_BC_NONE;
                note(s, "#%d is not slower than #%d on its own (%+.2f%% over fresh runs): "
                        "dropped as a culprit", c->hi, c->parent, 100 * expm1(d));
            }
        }
        b->n_culprits = k;
        if (s->rc)
            return;
        before = b->n_culprits;
        for (i = 0; i <= before && !s->rc && b->n_culprits < p->max_culprits; i++) {
            int lo = i ? b->culprits[i - 1].hi : 0, hi = i < before ? b->culprits[i].parent : last;
            int at, to;
            double theta = fmax(floor, p->resolution * sqrt(lvar(s)));
            if (hi > lo && side_test(s, lo, hi, theta, p->check.alpha, p->miss,
                                     p->check.max_replicates, SEG_MIN_RUNS, &at, &to) == 1)
                further(s, lo, hi, "slower");
        }
        if (b->n_culprits == before)
            break;
    }
    qsort(b->culprits, (size_t)b->n_culprits, sizeof b->culprits[0], by_lo);
    for (i = 0; i < b->n_culprits && !s->rc; i++)
        interval(s, &b->culprits[i], i ? b->culprits[i - 1].hi : 0,
                 i + 1 < b->n_culprits ? b->culprits[i + 1].parent : last);
}

int mt_bisect_run(mt_bisect *b, size_t n, const mt_bisect_params *p, mt_bisect_run_fn fn,
                  void *ctx)
{
    bs s;
    int last = (int)n - 1, v;
    memset(b, 0, sizeof *b);
    if (n < 2 || n > 1000000 || !fn || !p || mt_stats_design_check(&p->ends) || !(p->eps > 0) ||
        p->eps >= 0.5 || p->mid_initial < 1 || p->mid_max < p->mid_initial || p->slots < 1 ||
        p->max_culprits < 1 || mt_stats_design_check(&p->check) || !(p->resolution > 0) ||
        !(p->miss > 0 && p->miss < 0.5) || !(p->verify_resolution > 0) ||
        !(p->verify_drop > 0 && p->verify_drop < 0.5) || p->verify_max < p->check.initial)
        return -EINVAL;
    b->n = n;
    b->revs = calloc(n, sizeof *b->revs);
    if (!b->revs)
        return -ENOMEM;
    s.b = b;
    s.p = p;
    s.fn = fn;
    s.ctx = ctx;
    s.rc = 0;
    {
        ref G, Bd;
        ref_one(&G, 0);
        ref_one(&Bd, last);
        v = compare(&s, &G, &Bd, &p->ends, 1, &b->ends);
    }
    if (s.rc) {
        b->outcome = MT_BISECT_ERROR;
        snprintf(b->why, sizeof b->why, "the runner failed");
        return 0;
    }
    if (v < 0) {
        int r = usable(&s, 0) ? last : 0;
        b->outcome = MT_BISECT_END_FAILED;
        snprintf(b->why, sizeof b->why, "the %s end could not be measured: %s (%.180s)",
                 r ? "bad" : "good", b->revs[r].outcome, b->revs[r].evidence);
        return 0;
    }
    if (mt_stats_bootstrap_ci(b->revs[0].ms, (size_t)b->revs[0].n, b->revs[last].ms,
                              (size_t)b->revs[last].n, 2000, 0.95, 99, &b->ends_ci_lo,
                              &b->ends_ci_hi))
        b->ends_ci_lo = b->ends_ci_hi = NAN;
    b->revs[0].cls = MT_BC_LOW;
    b->revs[last].cls = MT_BC_HIGH;
    if (v != MT_STATS_WORSE) {
        b->outcome = MT_BISECT_NOT_REPRODUCED;
        snprintf(b->why, sizeof b->why,
                 "the regression does not reproduce%s: the bad end is %+.2f%% against the good "
                 "end (95%% CI %+.2f%% .. %+.2f%%, p = %.3g, %d + %d replicates; %s at alpha %g "
                 "and minimum effect %.1f%%)",
                 b->ends.verdict == MT_STATS_UNKNOWN ? " (not confirmed within the replicate cap)"
                                                     : "",
                 100 * b->ends.effect, 100 * b->ends_ci_lo, 100 * b->ends_ci_hi, b->ends.p,
                 b->revs[0].n, b->revs[last].n, mt_stats_verdict_name(b->ends.verdict),
                 p->ends.alpha, 100 * p->ends.min_effect);
        return 0;
    }
    {
        ref G, Bd;
        ref_one(&G, 0);
        ref_one(&Bd, last);
        search(&s, 0, last, &G, &Bd);
    }
    if (s.rc) {
        b->outcome = MT_BISECT_ERROR;
        snprintf(b->why, sizeof b->why, "the runner failed");
        return s.rc == -ENOMEM ? -ENOMEM : 0;
    }
    consistency(&s, last);
    if (s.rc) {
        b->outcome = MT_BISECT_ERROR;
        snprintf(b->why, sizeof b->why, "the runner failed");
        return s.rc == -ENOMEM ? -ENOMEM : 0;
    }
    b->outcome = MT_BISECT_FOUND;
    snprintf(b->why, sizeof b->why, "%d regression%s found in %ld runs", b->n_culprits,
             b->n_culprits == 1 ? "" : "s", b->runs);
    return 0;
}

void mt_bisect_clear(mt_bisect *b)
{
    size_t i;
    for (i = 0; b->revs && i < b->n; i++)
        free(b->revs[i].ms);
    free(b->revs);
    b->revs = NULL;
}
