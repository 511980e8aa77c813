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
    p->check.max_replicates = 16;
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

/* All samples of a reference, in one array (caller frees; NULL when none). */
static double *ref_samples(const bs *s, const ref *r, int *n)
{
    double *v = NULL;
    int i;
    *n = 0;
    for (i = 0; i < r->n; i++) {
        const mt_bisect_rev *x = &s->b->revs[r->rev[i]];
        double *w;
        if (!x->n)
            continue;
        w = realloc(v, (size_t)(*n + x->n) * sizeof *w);
        if (!w) {
            free(v);
            *n = 0;
            return NULL;
        }
        v = w;
        memcpy(v + *n, x->ms, (size_t)x->n * sizeof *v);
        *n += x->n;
    }
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
        c->effect = c->ms_after / c->ms_before - 1;
        if (mt_stats_bootstrap_ci(x, (size_t)nx, y, (size_t)ny, 2000, 0.95,
                                  (uint64_t)b * 7919u + 17, &c->ci_lo, &c->ci_hi))
            c->ci_lo = c->ci_hi = NAN;
    }
    free(x);
    free(y);
}

/* A consistency check's answer: slower (significantly), or, when the
 * replicate cap was reached, still possibly slower by the minimum effect and
 * by half the bracket's whole step (L to H); the search of that range, and
 * the final check of each step, settle it. */
static int differs(const bs *s, int v, const mt_stats_decision *d, int L, int H)
{
    const mt_bisect_rev *l = &s->b->revs[L], *h = &s->b->revs[H];
    double ml, mh, half = 0;
    if (l->n && h->n && !mt_stats_median(l->ms, (size_t)l->n, &ml) &&
        !mt_stats_median(h->ms, (size_t)h->n, &mh) && ml > 0)
        half = (mh / ml - 1) / 2;
    return v == MT_STATS_WORSE || (v == MT_STATS_UNKNOWN && d->capped &&
                                   d->effect >= fmax(s->p->check.min_effect, half));
}

/* Searches bracket (a, b) with references L (low) and H (high). */
static void search(bs *s, int a, int b, const ref *L0, const ref *H0)
{
    ref L = *L0, H = *H0;
    int m, cls, a_differs = 0, b_differs = 0;
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
    /* the bracket is closed: is the step at b the whole of L -> H?  (Against
     * the references' own revisions: the pools may hold revisions of a
     * level in between, misread by the SPRT.) */
    {
        mt_stats_decision d;
        ref X, Y;
        if (b != H.rev[0]) {
            ref_one(&X, b);
            ref_one(&Y, H.rev[0]);
            b_differs = differs(s, compare(s, &X, &Y, &s->p->check, 0, &d), &d, L.rev[0], H.rev[0]);
        }
        if (!s->rc && a != L.rev[0]) {
            ref_one(&X, a);
            ref_one(&Y, L.rev[0]);
            a_differs = differs(s, compare(s, &Y, &X, &s->p->check, 0, &d), &d, L.rev[0], H.rev[0]);
        }
    }
    if (s->rc)
        return;
    record(s, a, b, &L, &H, a_differs, b_differs);
    if (b_differs) {
        int top = H.rev[0];
        if (s->b->n_culprits < s->p->max_culprits) {
            ref X, Y;
            ref_one(&X, b);
            ref_one(&Y, top);
            note(s, "#%d is faster than #%d: another regression lies in #%d..#%d",
                 b, top, b + 1, top);
            search(s, b, top, &X, &Y);
        } else {
            note(s, "another regression lies in #%d..#%d (not searched: culprit cap)",
                 b + 1, top);
        }
    }
    if (a_differs) {
        int bottom = L.rev[0];
        if (s->b->n_culprits < s->p->max_culprits) {
            ref X, Y;
            ref_one(&X, bottom);
            ref_one(&Y, a);
            note(s, "#%d is slower than #%d: another regression lies in #%d..#%d",
                 a, bottom, bottom + 1, a);
            search(s, bottom, a, &X, &Y);
        } else {
            note(s, "another regression lies in #%d..#%d (not searched: culprit cap)",
                 bottom + 1, a);
        }
    }
}

static int by_lo(const void *x, const void *y)
{
    const mt_bisect_culprit *a = x, *b = y;
    return (a->lo > b->lo) - (a->lo < b->lo);
}

int mt_bisect_run(mt_bisect *b, size_t n, const mt_bisect_params *p, mt_bisect_run_fn fn,
                  void *ctx)
{
    bs s;
    int last = (int)n - 1, v;
    memset(b, 0, sizeof *b);
    if (n < 2 || n > 1000000 || !fn || !p || mt_stats_design_check(&p->ends) || !(p->eps > 0) ||
        p->eps >= 0.5 || p->mid_initial < 1 || p->mid_max < p->mid_initial || p->slots < 1 ||
        p->max_culprits < 1 || mt_stats_design_check(&p->check))
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
    qsort(b->culprits, (size_t)b->n_culprits, sizeof b->culprits[0], by_lo);
    /* with more than one culprit, each step must hold on its own: the
     * parent against the culprit (kept when slower, or when the cap left a
     * step of the minimum effect unresolved) */
    if (b->n_culprits > 1) {
        int i, k = 0;
        for (i = 0; i < b->n_culprits && !s.rc; i++) {
            mt_bisect_culprit *c = &b->culprits[i];
            mt_stats_decision d;
            ref X, Y;
            ref_one(&X, c->parent);
            ref_one(&Y, c->hi);
            int v = compare(&s, &X, &Y, &p->check, 0, &d);
            if (v == MT_STATS_WORSE || (v == MT_STATS_UNKNOWN && d.effect >= p->check.min_effect)) {
                b->culprits[k++] = *c;
            } else {
                b->revs[c->hi].cls = MT_BC_NONE;
                note(&s, "#%d is not slower than #%d on its own (%+.2f%%, %s): "
                         "dropped as a culprit", c->hi, c->parent, 100 * d.effect,
                     mt_stats_verdict_name(d.verdict));
            }
        }
        b->n_culprits = k;
    }
    b->outcome = MT_BISECT_FOUND;
    snprintf(b->why, sizeof b->why, "%d regression%s found in %ld runs", b->n_culprits,
             b->n_culprits == 1 ? "" : "s", b->runs);
    return 0;
}

void mt_bisect_free(mt_bisect *b)
{
    size_t i;
    for (i = 0; b->revs && i < b->n; i++)
        free(b->revs[i].ms);
    free(b->revs);
    b->revs = NULL;
}
