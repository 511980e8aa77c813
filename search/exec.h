/*
 * exec.h - the executor: how `moetune tune` and `moetune bisect` run their
 * jobs (one measurement each), on which machines, and what they cost.
 *
 * An mt_exec owns the executor (local processes, the sim's model in
 * process, or ZeroMQ workers and their coordinator, search/zexec.c), the
 * store the jobs are memoized in, the budget spent by jobs (GPU-hours and
 * runs) and, for a bisection, each revision's prepare step.  What the
 * caller wants to know as jobs run (a running job's progress line, each
 * counted job's timeline row) comes back through the callbacks of
 * mt_exec_env.  Both commands take the same options (mt_exec_opts,
 * embedded in mt_tune_opts and mt_bisect_opts).
 */
#ifndef MT_EXEC_H
#define MT_EXEC_H

#include "contract.h"
#include "diag.h"
#include "registry.h"
#include "store.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* How jobs run. */
enum mt_executor_kind {
    MT_EXEC_LOCAL = 0, /* the contract's launcher, `slots` jobs at once (processes) */
    MT_EXEC_MODEL = 1, /* sim backend only: the sim's model in process, with the sim's
                          noise; for the search benchmark (same engine, same budget) */
    MT_EXEC_ZMQ = 2    /* ZeroMQ workers (workers/PROTOCOL.md) connected to `workers` */
};

/* The executor's options, the same for a tune and a bisection. */
typedef struct mt_exec_opts {
    int executor;          /* enum mt_executor_kind (a bisection: LOCAL or ZMQ) */
    int slots;             /* concurrent jobs, >= 1 (a bisection: > 1 speculates) */
    const char *sim_path;  /* the {sim} placeholder; NULL: moetune-sim */
    const char *workers;   /* ZMQ executor: the endpoint to bind, tcp://HOST:PORT */
    const char *key_dir;   /* ZMQ executor: CURVE keys (coordinator.key, workers/ *.pub) */
    double job_grace_s;    /* ZMQ executor: 0: 60 s */
    double worker_wait_s;  /* ZMQ executor: fail when no worker came within this (0: wait) */
} mt_exec_opts;

/* Local executor, one slot, no workers. */
void mt_exec_opts_init(mt_exec_opts *o);

/* One job of a batch: (config, kind, replicate), or a revision's. */
typedef struct mt_exec_job {
    const mt_kv *cfg;
    char id[17];      /* the config's id (mt_config_id) */
    const char *kind; /* fit | screen | profile | validate */
    int rep;
    const char *phase;   /* for the timeline */
    char key[128];       /* the memo key (job/KIND/ID/REP) */
    cJSON *out;          /* the job's memo (owned; mt_exec_jobs_free) */
    int fresh;           /* executed now (not found in the memo) */
    const char *rev;     /* a bisection job: the revision (prepared, then measured) */
    const char *routing; /* NULL: the contract's; "natural": the router's own (a
                            validation's natural-routing arms) */
    int group;           /* > 0: a comparison's replicate (its decision's group): the
                            ZeroMQ executor runs a group's jobs on workers of one host
                            under the local launcher */
    const char *host;    /* NULL, or that host (the control's first run's, once known) */
    const char *nodes;   /* NULL, or the node list "a,b" of the control's first run
                            (once known): under srun the step's --nodelist */
} mt_exec_job;

/* What the executor works for, and whom it tells. */
typedef struct mt_exec_env {
    mt_registry *reg;
    mt_contract *c;
    const char *dir; /* the directory: store, runs/, work/ */
    uint64_t seed;   /* the sim's noise seed offset */
    FILE *log;       /* the coordinator's lines (NULL: none) */
    void *ctx;       /* passed to the callbacks */
    /* a running job's progress line changed (mt_exec_live); the ZeroMQ
     * executor calls it while it waits.  NULL: not told */
    void (*on_live)(void *ctx);
    /* each job a batch counts (memoized ones included), its memo read, with
     * the runs and GPU-hours spent so far, it included.  NULL: not told */
    void (*on_job)(void *ctx, const mt_exec_job *q, int runs, double gpu_hours);
} mt_exec_env;

typedef struct mt_exec mt_exec;

/* Opens DIR's store and, for the ZeroMQ executor, binds the coordinator.
 * o and env are copied (the strings they point to are borrowed).  NULL
 * with the reason in d.  Caller owns the return value (mt_exec_destroy);
 * d is borrowed for its lifetime. */
mt_exec *mt_exec_new(const mt_exec_opts *o, const mt_exec_env *env, mt_diag *d);

/* Disconnects the workers, closes the store, frees *px, sets it NULL. */
void mt_exec_destroy(mt_exec **px);

/* A bisection: each revision's prepare step (workers/prepare.h) before its
 * first job; the arrays and strings are borrowed. */
void mt_exec_set_prepare(mt_exec *x, const char *const *prepare, size_t n, const char *repo,
                         double timeout_s);

/* Runs a batch: each job's memo is read first (a finished job never runs
 * again), the others run on the executor, and every job gets its memo in
 * out and is charged to the budget.  0, or negative with the reason in d. */
int mt_exec_run(mt_exec *x, mt_exec_job *v, size_t n);

/* Jobs charged by mt_exec_run that were memoized reads, not runs: their
 * runs and GPU-hours come off the budget. */
void mt_exec_uncharge(mt_exec *x, const mt_exec_job *v, size_t n);

mt_store *mt_exec_store(mt_exec *x);        /* borrowed, for the executor's lifetime */
const char *mt_exec_sim(const mt_exec *x);  /* the {sim} placeholder's value */
double mt_exec_gpu_hours(const mt_exec *x); /* charged so far (memoized jobs included) */
int mt_exec_runs(const mt_exec *x);         /* jobs charged so far */
int mt_exec_executed(const mt_exec *x);     /* jobs executed by this process */
const char *mt_exec_live(const mt_exec *x); /* a running job's latest line, or "" */

/* A run fingerprint's node list as "a,b" into buf (n bytes): "" when none
 * is known, or a name is empty, holds more than [A-Za-z0-9._-] (what a
 * job's nodelist may carry) or does not fit.  Returns buf.  (zexec.c) */
const char *mt_zexec_fp_nodes(const cJSON *fp, char *buf, size_t n);

/* A memo's number (NAN when absent) and string ("" when absent). */
double mt_exec_num(const cJSON *o, const char *k);
const char *mt_exec_str(const cJSON *o, const char *k);

/* Frees the batch's memos (out). */
void mt_exec_jobs_free(mt_exec_job *v, size_t n);
/* The memo key of a job: job/KIND/ID/REP. */
void mt_exec_job_key(const char *kind, const char *id, int rep, char *key, size_t n);
/* A memo of a run that measured: outcome ok and a finite step time. */
int mt_exec_job_ok(const cJSON *j);

#endif
