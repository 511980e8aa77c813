/*
 * stats.c - rank tests, the bootstrap and the group-sequential verdict
 * (see stats.h for the contracts and the decision rule).
 */
#include "stats.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ---------------------------------------------------------------- */

static int all_finite(const double *x, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return 0;
    return 1;
}

static int all_positive(const double *x, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (!(x[i] > 0))
            return 0;
    return 1;
}

static int cmp_double(const void *a, const void *b)
{
    double u = *(const double *)a, v = *(const double *)b;
    return (u > v) - (u < v);
}

/* Caller frees; NULL on OOM. */
static double *sorted_copy(const double *x, size_t n)
{
    double *s = malloc(n * sizeof *s);
    if (!s)
        return NULL;
    memcpy(s, x, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_double);
    return s;
}

static double median_sorted(const double *s, size_t n)
{
    return 0.5 * (s[(n - 1) / 2] + s[n / 2]);
}

/* Upper tail of the standard normal, accurate far into the tail (erfc, not 1 - Phi). */
static double normal_sf(double z)
{
    return 0.5 * erfc(z / sqrt(2.0));
}

/* z with normal_sf(z) = q, 0 < q < 1.  Bisection: called once per design
 * evaluation, so robustness beats speed. */
static double normal_isf(double q)
{
    double lo = -40, hi = 40;
    int i;
    for (i = 0; i < 200 && hi - lo > 1e-15; i++) {
        double mid = 0.5 * (lo + hi);
        if (normal_sf(mid) > q)
            lo = mid;
        else
            hi = mid;
    }
    return 0.5 * (lo + hi);
}

int mt_stats_median(const double *x, size_t n, double *median)
{
    double *s;
    if (!x || n == 0 || !median || !all_finite(x, n))
        return -EINVAL;
    s = sorted_copy(x, n);
    if (!s)
        return -ENOMEM;
    *median = median_sorted(s, n);
    free(s);
    return 0;
}

/* ---- Mann-Whitney U ---------------------------------------------------------- */

typedef struct pooled {
    double v;
    int arm; /* 0: x, 1: y */
} pooled;

static int cmp_pooled(const void *a, const void *b)
{
    double u = ((const pooled *)a)->v, v = ((const pooled *)b)->v;
    return (u > v) - (u < v);
}

/* U of x, the tie term sum(t^3 - t) over tie groups, and whether there were ties. */
static int rank_sums(const double *x, size_t n, const double *y, size_t m, double *u,
                     double *tie_term, int *ties)
{
    size_t total = n + m, i, j;
    double r1 = 0, tt = 0;
    pooled *p = malloc(total * sizeof *p);
    if (!p)
        return -ENOMEM;
    for (i = 0; i < n; i++)
        p[i] = (pooled){x[i], 0};
    for (i = 0; i < m; i++)
        p[n + i] = (pooled){y[i], 1};
    qsort(p, total, sizeof *p, cmp_pooled);
    for (i = 0; i < total; i = j) {
        double t, mid;
        size_t k;
        for (j = i + 1; j < total && p[j].v == p[i].v; j++)
            ;
        t = (double)(j - i);
        mid = 0.5 * ((double)(i + 1) + (double)j); /* average of ranks i+1 .. j */
        for (k = i; k < j; k++)
            if (p[k].arm == 0)
                r1 += mid;
        tt += t * t * t - t;
    }
    free(p);
    *u = r1 - 0.5 * (double)n * (double)(n + 1);
    *tie_term = tt;
    *ties = tt > 0;
    return 0;
}

/*
 * P(U >= u) under the no-ties null.  The number of arrangements of n x's and
 * m y's with U = k is the coefficient of q^k in the Gaussian binomial
 * [n+m choose n]_q = prod_{i=1..a} (1 - q^{b+i}) / (1 - q^i), a = min, b = max.
 * Multiplying by (1 - q^c) and dividing by (1 - q^i) are each one pass over
 * the coefficients; after every step they are counts again (<= C(n+m, n)),
 * exact in a double while n + m <= 50.
 */
static int mw_exact_sf(size_t n, size_t m, double u, double *sf)
{
    size_t a = n < m ? n : m, b = n < m ? m : n, deg = 0, i, j, top = a * b;
    /* the multiply step runs i terms past the final degree before dividing */
    double *c = calloc(top + a + 1, sizeof *c), total = 0, tail = 0;
    long k;
    if (!c)
        return -ENOMEM;
    c[0] = 1;
    for (i = 1; i <= a; i++) {
        size_t shift = b + i, nd = deg + shift;
        for (j = nd; j >= shift; j--) /* descending: reads the old lower terms */
            c[j] -= c[j - shift];
        for (j = i; j <= nd; j++) /* ascending: 1/(1 - q^i) = 1 + q^i + q^2i ... */
            c[j] += c[j - i];
        deg = nd - i;
    }
    /* sum from the small end of each tail first */
    for (k = (long)top; k >= 0; k--) {
        total += c[k];
        if ((double)k >= u - 1e-9)
            tail += c[k];
    }
    free(c);
    *sf = tail / total;
    return 0;
}

int mt_stats_mannwhitney_method(const double *x, size_t n, const double *y, size_t m,
                                mt_stats_method method, double *u, double *p)
{
    double u1, tie_term, ubig, pv;
    int ties, rc;
    if (!x || !y || n == 0 || m == 0 || !u || !p || !all_finite(x, n) || !all_finite(y, m))
        return -EINVAL;
    if ((rc = rank_sums(x, n, y, m, &u1, &tie_term, &ties)))
        return rc;
    if (method == MT_STATS_AUTO)
        method = !ties && n <= MT_STATS_MW_EXACT_MAX && m <= MT_STATS_MW_EXACT_MAX
                     ? MT_STATS_EXACT
                     : MT_STATS_ASYMPTOTIC;
    ubig = fmax(u1, (double)n * (double)m - u1);
    if (method == MT_STATS_EXACT) {
        double sf;
        if (ties || n + m > 50)
            return -EINVAL;
        if ((rc = mw_exact_sf(n, m, ubig, &sf)))
            return rc;
        pv = 2 * sf;
    } else if (method == MT_STATS_ASYMPTOTIC) {
        double nn = (double)(n + m), var;
        var = (double)n * (double)m / 12.0 * ((nn + 1) - (nn > 1 ? tie_term / (nn * (nn - 1)) : 0));
        /* every value tied: no evidence either way */
        pv = var > 0 ? 2 * normal_sf((ubig - 0.5 * (double)n * (double)m - 0.5) / sqrt(var)) : 1;
    } else {
        return -EINVAL;
    }
    *u = u1;
    *p = pv > 1 ? 1 : pv < 0 ? 0 : pv;
    return 0;
}

int mt_stats_mannwhitney(const double *x, size_t n, const double *y, size_t m, double *u, double *p)
{
    return mt_stats_mannwhitney_method(x, n, y, m, MT_STATS_AUTO, u, p);
}

/* ---- two-sample Kolmogorov-Smirnov -------------------------------------------- */

/*
 * P(D >= h / (n m)) for two samples of sizes n and m under the continuous
 * null.  A sample pair is a monotone lattice path from (0,0) to (n,m), all
 * C(n+m, n) equally likely, and D n m = max |i m - j n| along it.  P(i,j),
 * the probability that a uniformly random path to (i,j) has touched
 * |i m - j n| >= h, is 1 on that region and (i P(i-1,j) + j P(i,j-1)) / (i+j)
 * elsewhere (the last step came from the left with probability i/(i+j)).
 * Only convex combinations of 0 and 1: no overflow, no cancellation.
 */
static int ks_exact_sf(size_t n, size_t m, uint64_t h, double *sf)
{
    double *row = malloc((m + 1) * sizeof *row);
    size_t i, j;
    if (!row)
        return -ENOMEM;
    for (i = 0; i <= n; i++) {
        for (j = 0; j <= m; j++) {
            uint64_t a = (uint64_t)i * m, b = (uint64_t)j * n;
            uint64_t dist = a > b ? a - b : b - a;
            if (dist >= h)
                row[j] = 1;
            else if (i == 0 && j == 0)
                row[j] = 0;
            else
                row[j] = ((i ? (double)i * row[j] : 0) + (j ? (double)j * row[j - 1] : 0)) /
                         (double)(i + j);
        }
    }
    *sf = row[m];
    free(row);
    return 0;
}

/* Kolmogorov's limiting distribution, P(K > lambda). */
static double kolmogorov_sf(double lambda)
{
    double s = 0;
    int k;
    if (lambda <= 0)
        return 1;
    if (lambda < 1.0) {
        /* the theta-function form converges fast for small lambda */
        double c = M_PI * M_PI / (8 * lambda * lambda);
        for (k = 1; k < 50; k++) {
            double t = exp(-(double)((2 * k - 1) * (2 * k - 1)) * c);
            s += t;
            if (t < 1e-300)
                break;
        }
        s = 1 - sqrt(2 * M_PI) / lambda * s;
    } else {
        for (k = 1; k < 100; k++) {
            double t = exp(-2.0 * k * k * lambda * lambda);
            s += (k % 2 ? 2 : -2) * t;
            if (t < 1e-300)
                break;
        }
    }
    return s < 0 ? 0 : s > 1 ? 1 : s;
}

int mt_stats_ks2_method(const double *x, size_t n, const double *y, size_t m,
                        mt_stats_method method, double *d, double *p)
{
    double *sx, *sy, pv = 1;
    size_t i = 0, j = 0;
    uint64_t h = 0, nm;
    int rc = 0;
    if (!x || !y || n == 0 || m == 0 || !d || !p || !all_finite(x, n) || !all_finite(y, m))
        return -EINVAL;
    if (method != MT_STATS_AUTO && method != MT_STATS_EXACT && method != MT_STATS_ASYMPTOTIC)
        return -EINVAL;
    sx = sorted_copy(x, n);
    sy = sorted_copy(y, m);
    if (!sx || !sy) {
        rc = -ENOMEM;
        goto out;
    }
    /* walk the pooled distinct values; a tie group moves both counts at once */
    while (i < n || j < m) {
        double v = i < n && (j >= m || sx[i] <= sy[j]) ? sx[i] : sy[j];
        uint64_t a, b;
        while (i < n && sx[i] == v)
            i++;
        while (j < m && sy[j] == v)
            j++;
        a = (uint64_t)i * m;
        b = (uint64_t)j * n;
        if ((a > b ? a - b : b - a) > h)
            h = a > b ? a - b : b - a;
    }
    nm = (uint64_t)n * m;
    if (method == MT_STATS_AUTO)
        method = nm <= MT_STATS_KS_EXACT_MAX_NM ? MT_STATS_EXACT : MT_STATS_ASYMPTOTIC;
    if (h == 0) {
        pv = 1; /* identical empirical distributions */
    } else if (method == MT_STATS_EXACT) {
        if ((rc = ks_exact_sf(n, m, h, &pv)))
            goto out;
    } else {
        double en = (double)n * (double)m / (double)(n + m), se = sqrt(en);
        pv = kolmogorov_sf((se + 0.12 + 0.11 / se) * ((double)h / (double)nm));
    }
    *d = (double)h / (double)nm;
    *p = pv > 1 ? 1 : pv < 0 ? 0 : pv;
out:
    free(sx);
    free(sy);
    return rc;
}

int mt_stats_ks2(const double *x, size_t n, const double *y, size_t m, double *d, double *p)
{
    return mt_stats_ks2_method(x, n, y, m, MT_STATS_AUTO, d, p);
}

/* ---- bootstrap ------------------------------------------------------------------ */

/* splitmix64 (Steele, Lea, Flood 2014): tiny state, passes BigCrush, and the
 * same stream on every platform, which resumable tunes depend on. */
static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform index in [0, n) by multiply-shift on 32 random bits; the bias is
 * below n / 2^32, far under the Monte Carlo error of any bootstrap here. */
static size_t draw_index(uint64_t *s, size_t n)
{
    return (size_t)(((splitmix64(s) >> 32) * (uint64_t)n) >> 32);
}

/*
 * Median of one resample of the sorted sample s without sorting it: a
 * resample is a multiset of indices into s, and since s is sorted its k-th
 * smallest value is s at the k-th smallest drawn index, found by walking
 * the index counts.  O(n) per resample.
 */
static double resample_median(const double *s, size_t n, unsigned *count, uint64_t *state)
{
    size_t k, want_lo = (n - 1) / 2, want_hi = n / 2, seen = 0;
    double lo = s[0], hi = s[0];
    int have_lo = 0;
    memset(count, 0, n * sizeof *count);
    for (k = 0; k < n; k++)
        count[draw_index(state, n)]++;
    for (k = 0; k < n; k++) {
        seen += count[k];
        if (!have_lo && seen > want_lo) {
            lo = s[k];
            have_lo = 1;
        }
        if (seen > want_hi) {
            hi = s[k];
            break;
        }
    }
    return 0.5 * (lo + hi);
}

/* Quantile q of sorted v[0..b-1], linear between order statistics. */
static double quantile_sorted(const double *v, size_t b, double q)
{
    double pos = q * (double)(b - 1), frac;
    size_t i = (size_t)floor(pos);
    if (i + 1 >= b)
        return v[b - 1];
    frac = pos - (double)i;
    return v[i] + frac * (v[i + 1] - v[i]);
}

/* The bootstrap on already sorted arms (mt_stats_decide sorts once). */
static int bootstrap_sorted(const double *sx, size_t n, const double *sy, size_t m, unsigned b,
                            double level, uint64_t seed, double *lo, double *hi)
{
    double *est = malloc((size_t)b * sizeof *est);
    unsigned *count = malloc((n > m ? n : m) * sizeof *count);
    uint64_t state = seed;
    unsigned r;
    int rc = 0;
    if (!est || !count) {
        rc = -ENOMEM;
        goto out;
    }
    for (r = 0; r < b; r++) {
        double mx = resample_median(sx, n, count, &state);
        double my = resample_median(sy, m, count, &state);
        est[r] = my / mx - 1;
    }
    qsort(est, b, sizeof *est, cmp_double);
    *lo = quantile_sorted(est, b, 0.5 * (1 - level));
    *hi = quantile_sorted(est, b, 0.5 * (1 + level));
out:
    free(est);
    free(count);
    return rc;
}

/* The regularized incomplete beta function I_x(a, b), 0 <= x <= 1, by its
 * continued fraction (modified Lentz), on the side where it converges fast. */
static double betacf(double a, double b, double x)
{
    const double tiny = 1e-300;
    double c = 1, d = 1 - (a + b) * x / (a + 1), h;
    int k;
    if (fabs(d) < tiny)
        d = tiny;
    d = 1 / d;
    h = d;
    for (k = 1; k <= 400; k++) {
        double num, del;
        /* even step: k (b - k) x / ((a + 2k - 1)(a + 2k)) */
        num = k * (b - k) * x / ((a + 2 * k - 1) * (a + 2 * k));
        d = 1 + num * d;
        c = 1 + num / c;
        d = 1 / (fabs(d) < tiny ? tiny : d);
        c = fabs(c) < tiny ? tiny : c;
        h *= d * c;
        /* odd step: -(a + k)(a + b + k) x / ((a + 2k)(a + 2k + 1)) */
        num = -(a + k) * (a + b + k) * x / ((a + 2 * k) * (a + 2 * k + 1));
        d = 1 + num * d;
        c = 1 + num / c;
        d = 1 / (fabs(d) < tiny ? tiny : d);
        c = fabs(c) < tiny ? tiny : c;
        del = d * c;
        h *= del;
        if (fabs(del - 1) < 1e-15)
            break;
    }
    return h;
}

static double ibeta(double a, double b, double x)
{
    double front;
    if (x <= 0)
        return 0;
    if (x >= 1)
        return 1;
    front = exp(lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x));
    if (x < (a + 1) / (a + b + 2))
        return front * betacf(a, b, x) / a;
    return 1 - front * betacf(b, a, 1 - x) / b;
}

/* P(T <= t), Student's t with df degrees of freedom. */
static double t_cdf(double t, double df)
{
    double tail = 0.5 * ibeta(df / 2, 0.5, df / (df + t * t));
    return t > 0 ? 1 - tail : tail;
}

int mt_stats_t_quantile(double prob, double df, double *q)
{
    double lo = -1, hi = 1;
    int i;
    if (!q || !(prob > 0 && prob < 1) || !(df > 0) || !isfinite(df))
        return -EINVAL;
    while (t_cdf(lo, df) > prob && lo > -1e300)
        lo *= 2;
    while (t_cdf(hi, df) < prob && hi < 1e300)
        hi *= 2;
    for (i = 0; i < 300 && hi - lo > 1e-12 * fmax(1, fabs(lo)); i++) {
        double mid = 0.5 * (lo + hi);
        if (t_cdf(mid, df) < prob)
            lo = mid;
        else
            hi = mid;
    }
    *q = 0.5 * (lo + hi);
    return 0;
}

int mt_stats_welch_log_ci(const double *x, size_t n, const double *y, size_t m, double level,
                          double *effect, double *lo, double *hi)
{
    double mu = 0, mv = 0, su = 0, sv = 0, vu, vv, se, df, t, d;
    size_t i;
    if (!x || !y || n < 2 || m < 2 || !effect || !lo || !hi || !(level > 0 && level < 1) ||
        !all_finite(x, n) || !all_finite(y, m))
        return -EINVAL;
    if (!all_positive(x, n) || !all_positive(y, m))
        return -EDOM;
    for (i = 0; i < n; i++)
        mu += log(x[i]);
    for (i = 0; i < m; i++)
        mv += log(y[i]);
    mu /= (double)n;
    mv /= (double)m;
    for (i = 0; i < n; i++)
        su += (log(x[i]) - mu) * (log(x[i]) - mu);
    for (i = 0; i < m; i++)
        sv += (log(y[i]) - mv) * (log(y[i]) - mv);
    vu = su / (double)(n - 1) / (double)n; /* the variance of each arm's mean */
    vv = sv / (double)(m - 1) / (double)m;
    d = mv - mu;
    se = sqrt(vu + vv);
    *effect = expm1(d);
    if (!(se > 0)) {
        *lo = *hi = *effect;
        return 0;
    }
    /* Hsu's conservative degrees of freedom, min(n, m) - 1, not
     * Welch-Satterthwaite's: never below the nominal level for any ratio of
     * the spreads (normal runs), where Welch-Satterthwaite's is approximate;
     * a bisection's runs either side were chosen by sequential tests, which
     * pushes them apart a little, and at 95% the Satterthwaite interval held
     * the true step in 94.6% of bench_bisect's 400-trial run */
    df = (double)((n < m ? n : m) - 1);
    if (mt_stats_t_quantile((1 + level) / 2, df, &t))
        return -EINVAL;
    *lo = expm1(d - t * se);
    *hi = expm1(d + t * se);
    return 0;
}

int mt_stats_bootstrap_ci(const double *x, size_t n, const double *y, size_t m, unsigned b,
                          double level, uint64_t seed, double *lo, double *hi)
{
    double *sx, *sy;
    int rc;
    if (!x || !y || n == 0 || m == 0 || !lo || !hi || b < 10 || !(level > 0 && level < 1) ||
        !all_finite(x, n) || !all_finite(y, m))
        return -EINVAL;
    if (!all_positive(x, n) || !all_positive(y, m))
        return -EDOM;
    sx = sorted_copy(x, n);
    sy = sorted_copy(y, m);
    rc = sx && sy ? bootstrap_sorted(sx, n, sy, m, b, level, seed, lo, hi) : -ENOMEM;
    free(sx);
    free(sy);
    return rc;
}

/* ---- design and verdict -------------------------------------------------------- */

const char *mt_stats_verdict_name(mt_stats_verdict v)
{
    switch (v) {
    case MT_STATS_BETTER:
        return "better";
    case MT_STATS_WORSE:
        return "worse";
    case MT_STATS_SAME:
        return "same";
    case MT_STATS_UNKNOWN:
        break;
    }
    return "unknown";
}

void mt_stats_design_default(mt_stats_design *d)
{
    /* min_effect 1%: below the run-to-run spread of one run at the default
     * noise (1.4%) and what a 50-step validation can still confirm; 3%: the
     * change a tune must not miss, the effect the defaults are powered for
     * (about 8 runs per arm give 95% power at alpha 0.01 at that noise). */
    d->alpha = 0.01;
    d->min_effect = 0.01;
    d->same_band = 0.03;
    d->initial = 8;
    d->step = 4;
    d->max_replicates = 16;
    d->spending = MT_SPEND_POCOCK;
    d->bootstrap_b = 2000;
    d->ci_level = 0.90;
    d->seed = 1;
}

int mt_stats_design_check(const mt_stats_design *d)
{
    if (!d || !(d->alpha > 0 && d->alpha <= 0.5) || !(d->min_effect >= 0 && d->min_effect < 1) ||
        !(d->same_band >= d->min_effect && d->same_band < 1) || d->initial < 2 || d->step < 1 ||
        d->max_replicates < d->initial || d->bootstrap_b < 10 ||
        !(d->ci_level > 0 && d->ci_level < 1) ||
        (d->spending != MT_SPEND_POCOCK && d->spending != MT_SPEND_OBRIEN_FLEMING))
        return -EINVAL;
    return 0;
}

int mt_stats_design_looks(const mt_stats_design *d)
{
    if (mt_stats_design_check(d))
        return 0;
    return 1 + (d->max_replicates - d->initial + d->step - 1) / d->step;
}

int mt_stats_design_replicates(const mt_stats_design *d, int look)
{
    long n;
    if (look < 0 || look >= mt_stats_design_looks(d))
        return 0;
    n = (long)d->initial + (long)look * d->step;
    return n < d->max_replicates ? (int)n : d->max_replicates;
}

/* Alpha spent by information fraction t (0 <= t <= 1). */
static double spent(const mt_stats_design *d, double t)
{
    if (t <= 0)
        return 0;
    if (t >= 1)
        return d->alpha;
    if (d->spending == MT_SPEND_OBRIEN_FLEMING)
        return erfc(normal_isf(d->alpha / 2) / sqrt(2.0 * t)); /* 2 - 2 Phi(z / sqrt t) */
    return d->alpha * log(1 + (M_E - 1) * t);
}

double mt_stats_design_alpha(const mt_stats_design *d, int look)
{
    double cap, t, t0;
    if (look < 0 || look >= mt_stats_design_looks(d))
        return 0;
    cap = d->max_replicates;
    t = mt_stats_design_replicates(d, look) / cap;
    t0 = look ? mt_stats_design_replicates(d, look - 1) / cap : 0;
    return spent(d, t) - spent(d, t0);
}

int mt_stats_decide(const mt_stats_design *d, const double *control, size_t n,
                    const double *candidate, size_t m, int look, mt_stats_decision *out)
{
    mt_stats_decision r;
    double *sx = NULL, *sy = NULL, mag;
    int looks = mt_stats_design_looks(d), rc, significant;
    uint64_t seed;

    if (!looks || look < 0 || look >= looks || !control || !candidate || n < 2 || m < 2 || !out ||
        !all_finite(control, n) || !all_finite(candidate, m))
        return -EINVAL;
    if (!all_positive(control, n) || !all_positive(candidate, m))
        return -EDOM;
    memset(&r, 0, sizeof r);
    r.look = look;
    r.capped = look == looks - 1;
    r.n_control = n;
    r.n_candidate = m;
    r.alpha_look = mt_stats_design_alpha(d, look);
    sx = sorted_copy(control, n);
    sy = sorted_copy(candidate, m);
    if (!sx || !sy) {
        rc = -ENOMEM;
        goto out;
    }
    r.median_control = median_sorted(sx, n);
    r.median_candidate = median_sorted(sy, m);
    r.effect = r.median_candidate / r.median_control - 1;
    if ((rc = mt_stats_mannwhitney(sx, n, sy, m, &r.u, &r.p_mw)) ||
        (rc = mt_stats_ks2(sx, n, sy, m, &r.d_ks, &r.p_ks)))
        goto out;
    r.p = fmin(r.p_mw, r.p_ks);
    /* a different stream per look, so a look's interval does not depend on
     * how many looks came before, and the same look always repeats */
    seed = d->seed ^ (0xd1b54a32d192ed03ULL * (uint64_t)(look + 1));
    if ((rc =
             bootstrap_sorted(sx, n, sy, m, d->bootstrap_b, d->ci_level, seed, &r.ci_lo, &r.ci_hi)))
        goto out;

    significant = r.p <= r.alpha_look;
    mag = fabs(r.effect);
    if (significant && r.effect <= -d->min_effect) {
        r.verdict = MT_STATS_BETTER;
        r.reason = "significant, and faster by at least the minimum effect";
    } else if (significant && r.effect >= d->min_effect) {
        r.verdict = MT_STATS_WORSE;
        r.reason = "significant, and slower by at least the minimum effect";
    } else if (significant) {
        r.verdict = MT_STATS_SAME;
        r.reason = "significant, but the change is smaller than the minimum effect";
    } else if (mag < d->min_effect && r.ci_lo > -d->same_band && r.ci_hi < d->same_band) {
        r.verdict = MT_STATS_SAME;
        r.reason = "no change as large as the same band is plausible (CI inside it)";
    } else if (r.capped && mag < d->min_effect) {
        r.verdict = MT_STATS_SAME;
        r.reason = "replicate cap reached; the estimated change is below the minimum effect";
    } else if (r.capped) {
        r.verdict = MT_STATS_UNKNOWN;
        r.reason = "replicate cap reached with a possible change left unresolved";
    } else {
        int next = mt_stats_design_replicates(d, look + 1);
        r.verdict = MT_STATS_UNKNOWN;
        r.reason = "not decided yet; add replicates";
        r.add_control = (size_t)next > n ? next - (int)n : 0;
        r.add_candidate = (size_t)next > m ? next - (int)m : 0;
    }
    *out = r;
out:
    free(sx);
    free(sy);
    return rc;
}
