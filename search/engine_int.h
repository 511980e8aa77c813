/*
 * engine_int.h - the engine's internals shared by engine.c (the policy),
 * exec.c (jobs), zexec.c (the ZeroMQ executor), bundle.c (the evidence
 * bundle) and bisect_cmd.c.  Not an interface.
 */
#ifndef MT_ENGINE_INT_H
#define MT_ENGINE_INT_H

#include "engine.h"
#include "stats.h"
#include "store.h"
#include "wall.h"

#include <cjson/cJSON.h>

#define MAX_REPS 40 /* replicates per arm of one decision */

typedef struct jobreq {
    const mt_kv *cfg;
    char id[17];     /* the config's id (mt_config_id) */
    const char *kind; /* fit | screen | profile | validate */
    int rep;
    const char *phase; /* for the timeline */
    char key[128];     /* the memo key (job/KIND/ID/REP) */
    cJSON *out;      /* the job's memo (owned) */
    int fresh;       /* executed now (not found in the memo) */
    const char *rev; /* a bisection job: the revision (prepared, then measured) */
    const char *routing; /* NULL: the contract's; "natural": the router's own (a
                            validation's natural-routing arms) */
    int group;           /* > 0: a comparison's replicate (its decision's group): the
                            ZeroMQ executor runs a group's jobs on workers of one host
                            under the local launcher */
    const char *host;    /* NULL, or that host (the control's first run's, once known) */
    const char *nodes;   /* NULL, or the node list "a,b" of the control's first run
                            (once known): under srun the step's --nodelist */
} jobreq;

/* A run fingerprint's node list as "a,b" into buf (n bytes): "" when none
 * is known, or a name is empty, holds more than [A-Za-z0-9._-] (what a
 * job's nodelist may carry) or does not fit.  Returns buf.  (zexec.c) */
const char *eng_fp_nodes(const cJSON *fp, char *buf, size_t n);

typedef struct eng {
    mt_registry *reg;
    mt_contract *c;
    mt_tune_opts o;
    mt_diag *d;
    mt_store *st;
    const char *sim;
    double budget_gh, until, started;
    int budget_runs;
    double gpu_hours;         /* charged so far (memoized jobs included) */
    int runs, executed;
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
    int last_worse;
    int last_memory;          /* ... refused it for memory (gate or OOM) */
    mt_tune_result *res;      /* where accepted changes are listed */
    void *zx;                 /* the ZeroMQ executor's state */
    char live[256];           /* the latest progress line of a running job */
    /* status.json from the latest progress line (eng_progress_quiet), which
     * the ZeroMQ executor calls while it waits; NULL: none written */
    void (*status_live)(struct eng *e);
    const char *strategy;     /* mt_strategy_name of o.strategy (the bundle's) */           /* the last screen found the candidate slower */
    FILE *status_tty;
    /* a bisection: the prepare step's templates and the repository */
    const char *const *prepare;
    size_t n_prepare;
    const char *repo;
    double prepare_timeout_s;
} eng;

/* exec.c */
int eng_exec(eng *e, jobreq *v, size_t n);
void eng_jobs_free(jobreq *v, size_t n);
void eng_job_key(const char *kind, const char *id, int rep, char *key, size_t n);
int eng_job_ok(const cJSON *j);
double eng_num(const cJSON *o, const char *k);
const char *eng_str(const cJSON *o, const char *k);

/* engine.c.  The files below it (exec.c, zexec.c, bundle.c) never call
 * into it: the dependencies run engine -> bundle and engine -> exec ->
 * zexec, and what they need of the engine is in eng (status_live,
 * strategy). */
void eng_progress(eng *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void eng_progress_quiet(eng *e); /* status.json only */

/* zexec.c (and eng_fp_nodes above) */
int eng_zx_open(eng *e);
void eng_zx_close(eng *e);
int eng_zx_run(eng *e, jobreq *v, size_t n);
/* Benchmarks only (tests/bench/bench_workers.c): when set, called with a
 * job's key and retry as its `job` message is sent (event 0) and as a
 * `result` for it arrives (event 1, before it is stored).  NULL otherwise. */
extern void (*eng_zx_probe)(const char *key, int retry, int event);

/* bundle.c */
int eng_write_bundle(eng *e, const mt_kv *recipe, int status, double gain, mt_diag *d);

#endif
