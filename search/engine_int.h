/*
 * engine_int.h - the engine's internals shared by engine.c (the policy),
 * bundle.c (the evidence bundle) and bisect_cmd.c.  Not an interface: the
 * jobs run on an mt_exec (exec.h), which knows nothing of mt__eng.
 */
#ifndef MT_ENGINE_INT_H
#define MT_ENGINE_INT_H

#include "engine.h"
#include "exec.h"
#include "stats.h"
#include "store.h"
#include "wall.h"

#include <cjson/cJSON.h>

#define MAX_REPS 40 /* replicates per arm of one decision */

typedef struct mt__eng {
    mt_registry *reg;
    mt_contract *c;
    mt_tune_opts o;
    mt_diag *d;
    mt_exec *x;   /* the jobs: executor, memo, budget spent (owned) */
    mt_store *st; /* x's store (borrowed): decisions, events */
    double budget_gh, until, started;
    int budget_runs;
    int seq;                  /* decision sequence number */
    const char *phase;
    mt_kv *baseline, *best;
    mt_kv *fitted;            /* the base made to fit by the fit phase; NULL: the base fits */
    cJSON *base_fit;          /* what the fit phase found of the base (bundle baseline.fit) */
    double best_ms, baseline_ms;
    double best_peak_gb;      /* the best's measured hottest GPU, GB; NAN: not measured */
    cJSON *decisions, *timeline, *accepted, *ablation, *walls_before, *walls_after;
    cJSON *validation, *mem_baseline, *mem_winner;
    cJSON *baseline_arm, *best_arm; /* their latest measured figures (status.json) */
    int ablating, ablate_left;      /* ablation runs; the ablations still to run */
    int not_ablated;                /* accepted changes the budget left unablated */
    int natural_plan;               /* validation will add natural-routing arms */
    int validated;                  /* the validation ran: nothing left to reserve */
    cJSON *tflops_of;         /* config id -> [TFLOP/s per GPU of each ok run] (timeline) */
    char stopped[128];
    int last_worse;           /* the last screen found the candidate slower */
    int last_memory;          /* ... refused it for memory (gate or OOM) */
    mt_tune_result *res;      /* where accepted changes are listed */
    const char *strategy;     /* mt_strategy_name of o.strategy (the bundle's) */
} mt__eng;

/* engine.c.  The files below it (exec.c, zexec.c, bundle.c) never call
 * into it: the dependencies run engine -> bundle and engine -> exec ->
 * zexec; what the executor tells the engine comes back through
 * mt_exec_env's callbacks (on_live, on_job), what the bundle needs is in
 * mt__eng (strategy). */
void mt__eng_progress(mt__eng *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void mt__eng_progress_quiet(mt__eng *e); /* status.json only */

/* bundle.c */
int mt__eng_write_bundle(mt__eng *e, const mt_kv *recipe, int status, double gain, mt_diag *d);

#endif
