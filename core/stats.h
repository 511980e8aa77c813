/*
 * stats.h - the statistics every "is the candidate faster?" decision rests on.
 *
 * Unit of replication.  A *replicate* is an independent run of one config
 * (its own process, its own per-run noise); its sample is one number, the
 * median step time over the steady window declared before the run.  Steps
 * inside one run are autocorrelated and are never samples here.  A *retry*
 * is a re-run after an infrastructure failure (node lost, NCCL/IB error,
 * Xid); it replaces a replicate that produced no measurement and is never a
 * sample of its own.  This module sees replicates only: the caller passes one
 * value per successful replicate and decides elsewhere what to retry.
 *
 * Conventions.  x (or control) is the control arm, y (or candidate) the
 * candidate arm; samples are step times, so lower is better.  The relative
 * change is median(candidate) / median(control) - 1: -0.03 means the
 * candidate takes 3% less time per step.  Functions return 0, or a negative
 * errno value: -EINVAL for an empty sample, a non-finite value, or a bad
 * parameter (each function says which), -EDOM where a relative change needs
 * positive step times and does not get them, -ENOMEM.  Outputs are written
 * only on success.  Inputs are never modified; nothing returned needs
 * freeing.  Everything here is deterministic: the bootstrap draws from its
 * own seeded generator (splitmix64), never from rand().
 */
#ifndef MT_STATS_H
#define MT_STATS_H

#include <stddef.h>
#include <stdint.h>

/* How a p-value is computed.  AUTO picks EXACT where it is exact and cheap
 * (see each test) and ASYMPTOTIC otherwise. */
typedef enum mt_stats_method {
    MT_STATS_AUTO = 0,
    MT_STATS_EXACT,
    MT_STATS_ASYMPTOTIC
} mt_stats_method;

/* Largest arm for which AUTO uses the exact Mann-Whitney distribution. */
#define MT_STATS_MW_EXACT_MAX 20
/* Largest n * m for which AUTO uses the exact two-sample KS distribution
 * (an O(n m) recursion, no cancellation, so it is cheap far beyond this). */
#define MT_STATS_KS_EXACT_MAX_NM 1000000

/* Median of x[0..n-1] (mean of the two middle values for even n).
 * -EINVAL for n == 0 or a non-finite value. */
int mt_stats_median(const double *x, size_t n, double *median);

/*
 * Two-sided Mann-Whitney U test.  *u is the U statistic of x: the number of
 * pairs (x_i, y_j) with x_i > y_j, ties counting one half (scipy's U1).  A
 * large *u means the control is slower, i.e. the candidate faster.
 *
 * EXACT: the null distribution of U without ties, counted exactly (the
 * coefficients of the Gaussian binomial [n+m choose n]_q), p = 2 P(U >= max(U, nm - U)),
 * capped at 1.  -EINVAL when the pooled sample has ties (the no-ties
 * distribution would be wrong) or n + m > 50 (the counts stop being exact
 * in a double).  ASYMPTOTIC: normal approximation with the tie correction
 * of the variance and a continuity correction of 1/2.  AUTO: EXACT when
 * there are no ties and n, m <= MT_STATS_MW_EXACT_MAX, else ASYMPTOTIC.
 * These are the definitions scipy.stats.mannwhitneyu uses, so its values
 * serve as references.
 */
int mt_stats_mannwhitney(const double *x, size_t n, const double *y, size_t m, double *u,
                         double *p);
int mt_stats_mannwhitney_method(const double *x, size_t n, const double *y, size_t m,
                                mt_stats_method method, double *u, double *p);

/*
 * Two-sample Kolmogorov-Smirnov test, two-sided.  *d is the largest
 * distance between the two empirical distribution functions (evaluated at
 * the distinct pooled values, so ties never split).  EXACT: P(D >= d) under
 * the null, counting monotone lattice paths from (0,0) to (n,m) that touch
 * |i/n - j/m| >= d (computed as probabilities, so it neither overflows nor
 * cancels); with ties it is the continuous null, which makes p
 * conservative.  ASYMPTOTIC: the Kolmogorov limiting distribution at
 * lambda = (sqrt(e) + 0.12 + 0.11/sqrt(e)) d, e = nm/(n+m) (Stephens'
 * small-sample correction).  AUTO: EXACT when n m <= MT_STATS_KS_EXACT_MAX_NM.
 */
int mt_stats_ks2(const double *x, size_t n, const double *y, size_t m, double *d, double *p);
int mt_stats_ks2_method(const double *x, size_t n, const double *y, size_t m,
                        mt_stats_method method, double *d, double *p);

/*
 * Percentile bootstrap confidence interval of the relative change of medians,
 * median(y) / median(x) - 1 (x control, y candidate).  Each of b resamples
 * draws n values from x and m values from y with replacement (the arms are
 * independent, so they are resampled independently); [*lo, *hi] are the
 * (1 - level)/2 and (1 + level)/2 quantiles of the b changes (linear
 * interpolation between order statistics).  The same seed gives the same
 * interval on every machine.  -EINVAL unless b >= 10 and 0 < level < 1;
 * -EDOM unless every value is > 0.
 */
int mt_stats_bootstrap_ci(const double *x, size_t n, const double *y, size_t m, unsigned b,
                          double level, uint64_t seed, double *lo, double *hi);

/*
 * Student's t distribution with df > 0 degrees of freedom (not necessarily
 * an integer, as Welch's approximation gives): *q with P(T <= *q) = prob,
 * 0 < prob < 1.  The CDF is the regularized incomplete beta function
 * (continued fraction), inverted by bisection.  -EINVAL for a bad argument.
 */
int mt_stats_t_quantile(double prob, double df, double *q);

/*
 * Welch's interval for the relative change on the log scale: with one value
 * per replicate (a run), u = log x, v = log y, the estimate is
 * exp(mean v - mean u) - 1 (the ratio of geometric means) and [*lo, *hi] is
 * exp(mean v - mean u -+ t se) - 1, se^2 = s_u^2 / n + s_v^2 / m, t the
 * (1 + level)/2 quantile of Student's t with min(n, m) - 1 degrees of
 * freedom (Hsu's conservative choice instead of Welch-Satterthwaite's: at
 * least the nominal coverage for log-normal runs whatever the ratio of the
 * spreads).  The run is the unit (a run's per-run offset is shared by its
 * steps, so steps are never the sample).  -EINVAL unless n, m >= 2,
 * 0 < level < 1 and every value is finite; -EDOM unless every value is > 0.
 * Both arms constant: the interval is the estimate.
 */
int mt_stats_welch_log_ci(const double *x, size_t n, const double *y, size_t m, double level,
                          double *effect, double *lo, double *hi);

/* ---- the verdict ----------------------------------------------------------- */

typedef enum mt_stats_verdict {
    MT_STATS_UNKNOWN = 0, /* not decided: add replicates (or, at the cap, unresolved) */
    MT_STATS_BETTER,      /* candidate faster by at least min_effect, significantly */
    MT_STATS_WORSE,       /* candidate slower by at least min_effect, significantly */
    MT_STATS_SAME         /* no change that matters (see the rule below) */
} mt_stats_verdict;

/* "better", "worse", "same", "unknown".  Static storage. */
const char *mt_stats_verdict_name(mt_stats_verdict v);

typedef enum mt_stats_spending {
    MT_SPEND_POCOCK = 0,    /* Lan-DeMets Pocock type: alpha ln(1 + (e - 1) t); spends early */
    MT_SPEND_OBRIEN_FLEMING /* Lan-DeMets O'Brien-Fleming type: 2 - 2 Phi(z_{1-alpha/2} / sqrt t) */
} mt_stats_spending;

/*
 * A group-sequential design for one decision.  Look k (0-based) compares
 * n_k = min(initial + k step, max_replicates) replicates per arm; there are
 * K = 1 + ceil((max_replicates - initial) / step) looks, and the last is the
 * cap: no decision ever costs more than max_replicates runs per arm.
 *
 * Alpha spending.  alpha is the probability, over the whole decision and all
 * of its looks, of declaring BETTER when the candidate is no faster.  Look k
 * may spend alpha_k = A(t_k) - A(t_{k-1}), t_k = n_k / max_replicates, A the
 * spending function (A(0) = 0, A(1) = alpha).  Significance at look k is
 * p = min(p_MW, p_KS) <= alpha_k with both p two-sided, as Pinpoint combines
 * them.  Why this holds the one-sided rate at alpha, for any correlation
 * between the two tests and between looks: under no difference, a test
 * with P(p <= c) <= c has P(p <= c and the candidate's median lower) <= c/2,
 * because swapping two equal-sized arms (the plan) or reflecting symmetric
 * noise maps one direction onto the other and leaves both two-sided p-values
 * unchanged; the union over the two tests is <= c, and the union over the
 * looks is <= sum alpha_k = alpha.  (Unequal arms with skewed noise lose the
 * halving: the bound is then 2 alpha.)  Exact p-values satisfy
 * P(p <= c) <= c; the normal approximation, used with ties or above 20 per
 * arm, only nearly.  Stopping for SAME only removes chances to declare
 * BETTER.  The bound is conservative (the tests and the looks are strongly
 * correlated); the property test in tests/test_stats.c measures the real
 * rate: about 0.4% at alpha 0.01.
 */
typedef struct mt_stats_design {
    double alpha;       /* false-accept rate of BETTER per decision, e.g. 0.01 */
    double min_effect;  /* smallest relative change that counts, e.g. 0.01 */
    double same_band;   /* SAME once the CI fits inside +-same_band, e.g. 0.03 */
    int initial;        /* replicates per arm at look 0, >= 2 */
    int step;           /* replicates per arm added per further look, >= 1 */
    int max_replicates; /* cap per arm, >= initial */
    mt_stats_spending spending;
    unsigned bootstrap_b; /* bootstrap resamples, >= 10 */
    double ci_level;      /* bootstrap CI level, e.g. 0.90 */
    uint64_t seed;        /* bootstrap seed (look k uses a seed derived from it and k) */
} mt_stats_design;

/* alpha 0.01, min_effect 0.01, same_band 0.03, initial 8, step 4, max 16,
 * Pocock spending, 2000 resamples, 90% CI, seed 1. */
void mt_stats_design_default(mt_stats_design *d);
/* 0, or -EINVAL naming nothing: check each field against the comments above. */
int mt_stats_design_check(const mt_stats_design *d);
/* Number of looks K; 0 for an invalid design. */
int mt_stats_design_looks(const mt_stats_design *d);
/* Replicates per arm planned for look k (0 outside [0, K)). */
int mt_stats_design_replicates(const mt_stats_design *d, int look);
/* Two-sided nominal level alpha_k of look k (0 outside [0, K)). */
double mt_stats_design_alpha(const mt_stats_design *d, int look);

typedef struct mt_stats_decision {
    mt_stats_verdict verdict;
    int look;          /* the look this decision was made at */
    int capped;        /* 1 at the last look: no more replicates will be asked for */
    int add_control;   /* UNKNOWN below the cap: replicates to add to each arm */
    int add_candidate; /*   before calling again with look + 1; else 0 */
    size_t n_control, n_candidate;
    double median_control, median_candidate;
    double effect;       /* median(candidate) / median(control) - 1 */
    double ci_lo, ci_hi; /* bootstrap CI of effect at ci_level */
    double u, p_mw;      /* Mann-Whitney U of the control, two-sided p (AUTO) */
    double d_ks, p_ks;   /* KS distance, two-sided p (AUTO) */
    double p;            /* min(p_mw, p_ks) */
    double alpha_look;   /* alpha_k: significance threshold at this look */
    const char *reason;  /* one line on why; static storage */
} mt_stats_decision;

/*
 * Decides at look `look` on one value per replicate (the steady-window
 * median step time of each independent run; runs interleaved A B A B on
 * the same nodes).  The rule, in order:
 *   significant = p <= alpha_k.
 *   BETTER  significant and effect <= -min_effect.
 *   WORSE   significant and effect >= +min_effect.
 *   SAME    significant but |effect| < min_effect (real but too small to matter).
 *   SAME    |effect| < min_effect and the CI lies inside (-same_band, +same_band):
 *           no change as large as same_band is plausible.  The CI narrows as
 *           replicates accumulate, so this threshold is sample-count-aware the
 *           way Pinpoint's "high" p threshold is: noisy or few replicates
 *           never read as SAME.  With ci_level 0.90 this is an equivalence
 *           test at 5% per side (TOST).
 *   at the last look (the cap): SAME when |effect| < min_effect (the budget
 *           is spent and not even the point estimate shows a change that
 *           matters); otherwise UNKNOWN with capped = 1: a possible change the
 *           cap could not resolve, which a gate must not accept.
 *   otherwise UNKNOWN, with add_control/add_candidate set to reach the next
 *           look's planned count.
 * BETTER is never returned without significance.  The caller owns *out;
 * out->reason points to static storage.  -EINVAL for an invalid design, a
 * look outside [0, K), an arm with fewer than 2 replicates or a non-finite
 * value; -EDOM unless every value is > 0; -ENOMEM.
 */
int mt_stats_decide(const mt_stats_design *d, const double *control, size_t n,
                    const double *candidate, size_t m, int look, mt_stats_decision *out);

#endif
