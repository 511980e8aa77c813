/*
 * bisect.h - noise-aware regression bisection over an ordered list of
 * revisions (the algorithm only; `moetune bisect` in bisect_cmd.c runs it
 * on the engine's executors and writes the evidence).
 *
 * Revision 0 is the good end, revision n-1 the bad end.  A sample is one
 * independent run's steady-window median step time (a replicate, exactly as
 * the tune's screens); steps inside a run are never samples.
 *
 *  1. The ends.  Both ends are measured interleaved and compared with the
 *     contract's group-sequential design (mt_stats_decide: min(MW, KS)
 *     against alpha spent across looks, the minimum effect, a hard cap).
 *     Anything but WORSE (the bad end slower) stops the search: the
 *     regression does not reproduce, and the figures say why.
 *  2. The search.  A bracket (a, b) holds the first revision that behaves
 *     like the bracket's high reference H rather than its low reference L
 *     (at the top, the good and bad ends).  A midpoint is classified by a
 *     sequential probability ratio test of "distributed as L" against
 *     "distributed as H" (Gaussian, the references' pooled spread), one
 *     replicate at a time, with per-classification error eps on either
 *     side (Wald's bounds), from `mid_initial` replicates up to `mid_max`.
 *     With more than one slot, the next level's two midpoints are measured
 *     speculatively in the same batch (Pinpoint measures two levels).
 *  3. A midpoint the SPRT cannot settle by its cap is compared with both
 *     references by the group-sequential test: slower than L and faster
 *     than H is a partial step (more than one change is involved): both
 *     halves are searched, each with its own references.
 *  4. Consistency.  When a bracket closes on a culprit c (its parent p),
 *     each side (the low reference's own revision to p, c to the high
 *     reference's) should be one level: its strongest split between two
 *     measured revisions, over every run already taken (mean log step time
 *     right of it against left of it, the pooled run-to-run variance), is a
 *     step when significant at check.alpha (Bonferroni over the splits), and
 *     that range is searched too (up to `max_culprits`, or reported when it
 *     cannot be).  Once the search is over, with more than one culprit each
 *     step is verified on fresh runs of the parent and the culprit (the runs
 *     that classified them are selected, so biased apart): Wald's SPRT of
 *     "no step" against a step of `verify_resolution` run-to-run sds (at
 *     least the minimum effect), keeping a step that is not there at
 *     check.alpha and dropping one that is at `verify_drop`; a step not
 *     kept is dropped.  Then every stretch between two culprits (and the
 *     ends) is tested sequentially for a step of `resolution` run-to-run sds
 *     (its strongest split, fresh runs to the two revisions either side of
 *     it while undecided, `miss` the error of missing such a step); a
 *     stretch with a step is searched, and the round repeats.  A hidden step
 *     well below `resolution` sds is found only by chance.
 *  5. The step.  Each culprit's step and 95% interval: Welch's t on the log
 *     step times of every run of the measured revisions of the stretches
 *     either side (one value per run: a run's per-run offset is shared by
 *     its steps; Hsu's min(n, m) - 1 degrees of freedom), the effect the
 *     ratio of geometric means.
 *  6. Skips.  A revision whose prepare step said skip (exit 125) or that
 *     failed (a typed outcome: build failure, crash, OOM...) is never a
 *     midpoint again; when only such revisions remain inside a bracket the
 *     culprit is reported as a range, as git bisect does.
 *
 * Deterministic: given the same samples it asks for the same jobs in the
 * same order, which is what makes a killed bisection resumable from the
 * store's memo.
 */
#ifndef MT_BISECT_H
#define MT_BISECT_H

#include "stats.h"

#include <stddef.h>

/* A job's result, as the runner fills it. */
enum mt_bisect_status {
    MT_BJ_OK = 0,     /* ms holds a sample */
    MT_BJ_SKIP = 1,   /* the prepare step exited 125: untestable revision */
    MT_BJ_FAILED = 2, /* a typed failure (prepare failed, build, crash, oom...) */
    MT_BJ_INFRA = 3   /* no sample, not the revision's fault (lost node...): ask again */
};

typedef struct mt_bisect_job {
    int rev;            /* revision index */
    int rep;            /* replicate index (0, 1, ...) for that revision */
    /* filled by the runner */
    int status;         /* enum mt_bisect_status */
    double ms;          /* the sample (MT_BJ_OK) */
    char outcome[32];   /* ok | skip | the typed outcome */
    char evidence[256];
} mt_bisect_job;

/* Runs jobs[0..n-1] (in parallel if it can) and fills their results.
 * Nonzero stops the bisection (the runner's own failure). */
typedef int (*mt_bisect_run_fn)(void *ctx, mt_bisect_job *jobs, size_t n);

typedef struct mt_bisect_params {
    mt_stats_design ends;  /* the ends' and the partial/consistency tests' design */
    double eps;            /* SPRT error per classification, each side (0.001) */
    int mid_initial;       /* replicates of a midpoint before its first look (2) */
    int mid_max;           /* SPRT cap per midpoint (12) */
    int slots;             /* jobs at once; > 1 enables speculation (1) */
    int max_culprits;      /* culprits recorded at most, before pruning (6) */
    mt_stats_design check; /* the consistency checks: alpha (ends / 5) is the error of
                            * seeing a step that is not there, min_effect the smallest
                            * step tested for, initial (4) the fresh runs per arm of a
                            * verification, max_replicates (24) a stretch test's cap */
    double resolution;     /* a stretch test's step, in run-to-run sds (1.5) */
    double miss;           /* a stretch test's error of missing that step (0.05) */
    double verify_resolution; /* a verification's step, in run-to-run sds (1.0) */
    double verify_drop;    /* a verification's error of dropping that step (0.01) */
    int verify_max;        /* fresh runs per arm of a verification at most (24) */
} mt_bisect_params;

/* Defaults above, ends = mt_stats_design_default with initial 8, step 4,
 * max 32. */
void mt_bisect_params_default(mt_bisect_params *p);

enum mt_bisect_class {
    MT_BC_NONE = 0,  /* not classified */
    MT_BC_LOW,       /* like the low (good) reference */
    MT_BC_HIGH,      /* like the high (bad) reference */
    MT_BC_PARTIAL    /* in between: slower than L and faster than H */
};
const char *mt_bisect_class_name(int c);

typedef struct mt_bisect_rev {
    int state;           /* 0 untested/ok, MT_BJ_SKIP, MT_BJ_FAILED */
    double *ms;          /* samples, in replicate order (owned) */
    int n;               /* samples */
    int cap;
    int asked;           /* replicates asked for (next replicate index) */
    int infra;           /* replicates lost to infrastructure */
    int cls;             /* enum mt_bisect_class (latest classification) */
    double llr;          /* the SPRT's log likelihood ratio (H over L) at its end */
    char outcome[32];    /* for skip/failed: why */
    char evidence[256];
} mt_bisect_rev;

typedef struct mt_bisect_culprit {
    int lo, hi;        /* the culprit is one of revisions lo..hi (lo == hi: exact) */
    int parent;        /* the last revision measured before it */
    double ms_before, ms_after;  /* medians of the runs either side (the stretches) */
    double effect, ci_lo, ci_hi; /* ratio of geometric means - 1, 95% Welch t interval */
    int partial;       /* the step is smaller than the whole regression */
} mt_bisect_culprit;

#define MT_BISECT_MAX_CULPRITS 8
#define MT_BISECT_MAX_NOTES 16

enum mt_bisect_outcome {
    MT_BISECT_FOUND = 0,          /* at least one culprit (or range) */
    MT_BISECT_NOT_REPRODUCED = 1, /* the ends do not differ by the minimum effect */
    MT_BISECT_END_FAILED = 2,     /* an end could not be measured */
    MT_BISECT_ERROR = 3           /* the runner failed */
};

typedef struct mt_bisect {
    size_t n;
    mt_bisect_rev *revs;   /* n revisions (owned) */
    int outcome;           /* enum mt_bisect_outcome */
    mt_stats_decision ends; /* the ends' comparison (control good, candidate bad) */
    double ends_ci_lo, ends_ci_hi;
    int n_culprits;
    mt_bisect_culprit culprits[MT_BISECT_MAX_CULPRITS];
    int n_notes;
    char notes[MT_BISECT_MAX_NOTES][256]; /* partial steps, further ranges */
    long runs;             /* jobs run, ends included */
    char why[256];         /* one line: the outcome in words */
} mt_bisect;

/* Runs the bisection over n >= 2 revisions.  0 (see b->outcome), negative
 * on a bad parameter or out of memory.  Free with mt_bisect_clear. */
int mt_bisect_run(mt_bisect *b, size_t n, const mt_bisect_params *p, mt_bisect_run_fn fn,
                  void *ctx);
void mt_bisect_clear(mt_bisect *b);

#endif
