/*
 * exec_int.h - the executor's state, shared by exec.c (batches, the local
 * and model executors) and zexec.c (the ZeroMQ executor).  Not an
 * interface: the rest of search/ sees mt_exec through exec.h.
 */
#ifndef MT_EXEC_INT_H
#define MT_EXEC_INT_H

#include "exec.h"

struct mt_exec {
    mt_exec_opts o;
    mt_exec_env env;
    mt_registry *reg;
    mt_contract *c;
    mt_diag *d;
    mt_store *st;     /* owned */
    const char *sim;  /* the {sim} placeholder's value */
    double gpu_hours; /* charged so far (memoized jobs included) */
    int runs, executed;
    void *zx;       /* the ZeroMQ executor's state */
    char live[256]; /* the latest progress line of a running job */
    /* a bisection: the prepare step's templates and the repository */
    const char *const *prepare;
    size_t n_prepare;
    const char *repo;
    double prepare_timeout_s;
};

/* zexec.c.  It calls nothing of exec.c: the dependencies run exec -> zexec. */
int mt_zexec_open(mt_exec *e);
void mt_zexec_close(mt_exec *e);
int mt_zexec_run(mt_exec *e, mt_exec_job *v, size_t n);
/* Benchmarks only (tests/bench/bench_workers.c): when set, called with a
 * job's key and retry as its `job` message is sent (event 0) and as a
 * `result` for it arrives (event 1, before it is stored).  NULL otherwise. */
extern void (*mt_zexec_probe)(const char *key, int retry, int event);

#endif
