/*
 * exec.h - the executor: how `moetune tune` and `moetune bisect` run their
 * jobs (one measurement each), on which machines, and what they cost.
 *
 * Both commands take the same executor options (mt_exec_opts, embedded in
 * mt_tune_opts and mt_bisect_opts).
 */
#ifndef MT_EXEC_H
#define MT_EXEC_H

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

#endif
