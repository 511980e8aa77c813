/*
 * engine.h - `moetune tune`: the evidence-gated policy engine.
 *
 * The MoE workflow as an unattended engine: fit (the analytic estimate,
 * then a probe), scale (the folding plugin's layouts), profile (the wall),
 * retune one variable at a time through the gate, ablate, validate over the
 * contract's 50-step window, and write the evidence bundle.  Grid and random
 * strategies run on the same executor with the same budget accounting.
 *
 * Every job (one measurement) and every decision is recorded in the tune
 * directory's store; a job's summary is memoized in the same transaction as
 * its run, so a tune killed at any moment and resumed replays its decisions
 * from the store (the engine is deterministic) and never runs a finished
 * measurement again.
 */
#ifndef MT_ENGINE_H
#define MT_ENGINE_H

#include "contract.h"
#include "diag.h"
#include "exec.h"
#include "model.h"
#include "registry.h"

#include <stdint.h>
#include <stdio.h>

enum mt_strategy { MT_STRATEGY_OFAT = 0, MT_STRATEGY_GRID = 1, MT_STRATEGY_RANDOM = 2 };

typedef struct mt_tune_opts {
    const char *dir;           /* the tune directory (store, logs, bundle) */
    mt_exec_opts exec;         /* how jobs run (search/exec.h) */
    int strategy;              /* enum mt_strategy */
    int resume;                /* continue an existing tune directory */
    double until;              /* Unix time deadline; 0: the contract's deadline_hours */
    double gpu_hours;          /* budget override; 0: the contract's */
    int runs;                  /* budget override; 0: the contract's */
    uint64_t seed;             /* random strategy's sampler; sim noise seed offset */
    FILE *progress;            /* progress lines (NULL: none) */
    int tty;                   /* progress as a live status line */
} mt_tune_opts;

void mt_tune_opts_init(mt_tune_opts *o);

typedef struct mt_tune_result {
    int status;                /* 0 validated, 1 not confirmed, 2 baseline only, 3 failed */
    char bundle[4096];         /* path of bundle.json ("" when none) */
    char recipe_id[17];        /* config id of the recommended config */
    mt_kv *recipe;             /* the recommended config (caller frees) */
    double gain;               /* validated gain (NAN when not validated) */
    double gpu_hours;          /* spent */
    int runs;                  /* jobs run (memoized ones included) */
    int runs_executed;         /* jobs actually executed by this invocation */
    int accepted, wrong;       /* accepted changes; (benchmark) filled by callers */
    int not_ablated;           /* accepted changes the budget left unablated: the
                                  winner is not ablated (`tune` exits 5) */
    char stopped[128];         /* why the search stopped */
    int refused;               /* mt_tune failed because the directory's tune cannot be
                                  continued as asked (the recorded environment differs,
                                  search/BUNDLE.md "Resume"): bad input, not a failure */
    /* every accepted change, as the configs it went from and to (owned) */
    size_t n_accepted;
    mt_kv **accepted_from, **accepted_to;
} mt_tune_result;

void mt_tune_result_clear(mt_tune_result *r);

/* Runs (or resumes) a tune.  0 when a bundle was written (whatever the
 * validation said), negative with the reason in d otherwise. */
int mt_tune(mt_registry *reg, mt_contract *c, const mt_tune_opts *o, mt_tune_result *out,
            mt_diag *d);

/* A tune ended by a signal: mt_tune_mark_stopped, search/status.h. */

/* The model executor's jobs (mt_model_job, ...): search/model.h. */

/* ---- moetune bisect (search/bisect_cmd.c; the method in search/bisect.h) ---- */

typedef struct mt_bisect_opts {
    const char *dir;          /* the bisection directory (store, logs, work trees, output) */
    mt_exec_opts exec;        /* how jobs run: LOCAL or ZMQ (slots > 1: speculative
                                 midpoints) */
    const char *good, *bad;   /* the ends */
    const char *repo;         /* a git repository (first-parent order), or NULL ... */
    const char *revs_file;    /* ... a file of revisions, one per line, oldest first, or NULL ... */
    const char *good_config, *bad_config; /* ... two contracts whose base configs are the ends
                                             (the config source; good/bad unused) */
    const char *const *prepare; /* argv templates (workers/prepare.h) */
    size_t n_prepare;
    double prepare_timeout_s; /* each prepare step; 0: 3600 */
    FILE *progress;           /* one line per measured revision (NULL: none) */
} mt_bisect_opts;

/* Runs (or, in a directory that holds the same bisection, resumes) a
 * bisection and writes DIR/bisect.json and DIR/bisect.html.  *outcome gets
 * enum mt_bisect_outcome (search/bisect.h).  0 when the output was written,
 * negative with the reason in d otherwise. */
int mt_bisect_cmd(mt_registry *reg, mt_contract *c, const mt_bisect_opts *o, int *outcome,
                  mt_diag *d);

/* "ofat" | "grid" | "random" -> enum; -1 when unknown. */
int mt_strategy_parse(const char *s);
const char *mt_strategy_name(int s);

#endif
