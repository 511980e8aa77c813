/*
 * worker.h - `moetune worker`: a ZeroMQ worker on a GPU node (PROTOCOL.md).
 *
 * One thread polls the DEALER socket, the running job's progress pipe and a
 * signalfd.  A job runs in a child process that measures it (workers/
 * measure.c) into the worker's own store, one per contract, so a finished
 * result survives the worker and is re-sent until the coordinator
 * acknowledges it.  The job keeps running when the coordinator goes away;
 * the worker re-announces itself when it hears from it again.
 */
#ifndef MT_WORKER_H
#define MT_WORKER_H

#include <stddef.h>

typedef struct mt_worker_opts {
    const char *connect;       /* tcp://HOST:PORT */
    const char *name;          /* routing id and ready.worker; default: host-pid */
    const char *dir;           /* work directory (stores, run logs, contracts) */
    const char *sim_path;      /* the {sim} placeholder */
    const char *const *allow;  /* argv[0] allowlist: paths or base names */
    size_t n_allow;
    const char *key_dir, *key_name; /* own CURVE keypair (DIR/NAME.key), or NULL */
    const char *server_key;    /* the coordinator's public key file, or NULL */
    int gpus;                  /* GPUs per node */
    const char *gpu_type;
    int nodes;
    const char *launchers;     /* "local" or "local,srun" */
    double heartbeat_s;        /* 0: 1 s */
    int exit_when_idle_s;      /* > 0: exit after this long with no coordinator and no job */
    /* --trust-plugin-path: load the files a job's contract names in
     * launch.plugin_path (otherwise refused; launch.plugins still holds) */
    int trust_plugin_path;
    /* BENCHMARK ONLY (`--bench-echo`, tests/bench/bench_workers.c): every
     * job is acknowledged and answered at once with a synthetic result (a
     * run of 20 samples and 8 GPU rows, outcome ok, evidence "bench-echo"),
     * and no program runs.  It measures the coordinator and the transport;
     * never use it for a tune. */
    int bench_echo;
} mt_worker_opts;

/* Runs until SIGTERM/SIGINT or a disconnect from the coordinator.  0 on a
 * clean stop, 1 on a setup failure (message on stderr). */
int mt_worker_main(const mt_worker_opts *o);

/* The allowlist rule.  argv[0] is resolved first, as the runner will (a bare
 * name on search_path, the job's PATH; NULL: /usr/local/bin:/usr/bin:/bin),
 * and every link in it is resolved: the program is judged by its real file.
 *   - A shell is never run: refused when the name given, the real file's
 *     name or the real file's identity (the same size and SHA-256 as a shell
 *     found at start-up on the worker's PATH or in /bin, /usr/bin) is a
 *     shell's (sh, bash, dash, zsh, ksh, csh, tcsh, fish, busybox, env).
 *   - The allowlist names real files: an entry with a slash matches a
 *     program whose real file is the entry's real file; a bare name matches
 *     the name given or the real file's name.
 *   - An interpreter (python3*, perl, ruby, node, ... by name or by
 *     identity) run with inline code (-c, -e, --eval, ...) is refused.
 * A program that does not exist yet (a prepare step's script in a work
 * directory an earlier step creates) can only be judged by its name.  1
 * allowed, 0 refused with the reason in why. */
int mt_worker_allowed(const char *const *argv, const char *const *allow, size_t n_allow,
                      const char *search_path, char *why, size_t n);

/* Records the shells and interpreters on the worker's PATH and in /bin and
 * /usr/bin (real path, size, SHA-256), once; mt_worker_allowed calls it, and
 * mt_worker_main at start-up so later changes to PATH do not matter. */
void mt_worker_scan_interpreters(void);

#endif
