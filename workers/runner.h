/*
 * runner.h - runs one measurement: a rendered argv and environment (never a
 * shell), with every descendant under control.
 *
 * The job runs in its own process group under a shepherd process that is a
 * child subreaper (prctl PR_SET_CHILD_SUBREAPER), so every descendant, even
 * one that called setsid() or double-forked, stays below the shepherd and is
 * reaped there.  Stopping a run sends SIGTERM (and SIGCONT) to the job's
 * process group and to every descendant, then SIGKILL after the grace
 * period, repeated until none is left; the shepherd reports "done" only when
 * it has no child left, so a finished wait means no orphan survives.  When
 * the job's main process exits on its own, whatever it left behind is
 * stopped the same way.  The shepherd stops the job too when moetune dies
 * (its end of the control socket closes).
 *
 * stdout and stderr stream to RUN_DIR/stdout.log and RUN_DIR/stderr.log as
 * the bytes arrive (the files are the program's output, unchanged) and, line
 * by line, to the caller's callback; a line longer than MT_RUNNER_LINE_MAX is
 * cut there (the rest of it up to the newline is dropped from the callback,
 * not from the log file), so memory stays bounded whatever the program
 * prints.
 *
 * A run is stopped when it exceeds its time limit (timeout) or when no
 * iteration has been reported through mt_runner_progress within
 * hang_factor x step_s (hang; before the first iteration, startup_s more is
 * allowed).  The runner knows nothing about log formats: the caller's line
 * callback decides what an iteration is and calls mt_runner_progress, or
 * mt_runner_stop when a line shows the run is lost (an OOM on one rank while
 * the others wait in a collective).
 *
 * Start, wait for and destroy a run from one thread; runs on different
 * threads are independent.  The shepherd uses only async-signal-safe calls
 * (no malloc, no stdio), so a multithreaded caller (the NVML sampler, a
 * ZeroMQ context) may start runs.
 */
#ifndef MT_RUNNER_H
#define MT_RUNNER_H

#include "diag.h"
#include "kv.h"

#include <signal.h>
#include <stddef.h>
#include <sys/types.h>

/* Typed outcome of a run.  The runner sets ok, crash, hang, timeout and
 * launch_error from process facts; oom, nan and infra come from the log
 * (the caller's parser), skipped from the scheduler. */
enum mt_outcome {
    MT_OUTCOME_OK = 0,
    MT_OUTCOME_OOM,
    MT_OUTCOME_NAN,
    MT_OUTCOME_HANG,
    MT_OUTCOME_TIMEOUT,
    MT_OUTCOME_CRASH,
    MT_OUTCOME_INFRA,
    MT_OUTCOME_LAUNCH_ERROR,
    MT_OUTCOME_SKIPPED
};
#define MT_OUTCOME_COUNT 9

/* "ok", "oom", "nan", "hang", "timeout", "crash", "infra", "launch_error",
 * "skipped"; NULL when out of range.  Static storage. */
const char *mt_outcome_name(int outcome);
/* The outcome named name, or -1 when none is. */
int mt_outcome_parse(const char *name);

enum mt_stream { MT_STREAM_STDOUT = 1, MT_STREAM_STDERR = 2 };

/* The longest line handed to a callback, in bytes (without the newline). */
#define MT_RUNNER_LINE_MAX ((size_t)1 << 20)

/* One line of the run's output, without its newline; line[n] is '\0' (the
 * line itself may hold other NUL bytes).  Borrowed: valid during the call. */
typedef void (*mt_line_fn)(void *ctx, int stream, const char *line, size_t n);
/* Called once when the runner begins to stop a live run, before any signal
 * (the srun launcher cancels the Slurm step here).  Nonzero: the problem is
 * in d and the local signals go on regardless. */
typedef int (*mt_stop_fn)(void *ctx, mt_diag *d);

typedef struct mt_run_spec {
    const char *const *argv; /* NULL-terminated; argv[0] a path (a relative
                                one from the caller's working directory), or
                                a name looked up in the PATH of env */
    const mt_kv *env;        /* the job's whole environment (NULL: empty) */
    const char *run_dir;     /* created if missing; logs go here; NULL: no logs */
    const char *cwd;         /* job's working directory; NULL: the caller's */
    double time_limit_s;     /* whole run; 0: none */
    double step_s;           /* expected step time; 0: no hang detection */
    double hang_factor;      /* k; 0: 10 */
    double startup_s;        /* extra allowance before the first iteration */
    double grace_s;          /* SIGTERM to SIGKILL; 0: 10 s */
    mt_line_fn on_line;      /* may be NULL */
    void *line_ctx;
    mt_stop_fn on_stop; /* may be NULL */
    void *stop_ctx;
    /* may be NULL: a flag a signal handler sets (a worker told to cancel
     * the job).  Once it is nonzero the run is stopped as by mt_runner_stop
     * (outcome infra, "cancelled"), the stop hook (scancel) included; while
     * it is set, the wait looks at it at least every 200 ms. */
    volatile sig_atomic_t *cancel;
    /* 0, or a descriptor above 2 that the run's shepherd keeps open (the
     * job does not get it) until the job's last descendant is gone: a lock
     * held through it outlives a killed caller for as long as the run's
     * processes do (the prepare step's lock, workers/prepare.c). */
    int hold_fd;
} mt_run_spec;

typedef struct mt_run_result {
    int outcome;                         /* enum mt_outcome */
    const char *evidence;                /* why, in words ("exit status 1", "killed by
                                            signal 11 (SIGSEGV)", "no new iteration for ...") */
    int exited;                          /* the job's main process exited ... */
    int exit_code;                       /* ... with this status */
    int signaled;                        /* it was killed by a signal ... */
    int signal;                          /* ... this one */
    int timed_out;                       /* stopped at the time limit */
    int hung;                            /* stopped for want of iteration progress */
    int stopped;                         /* stopped by mt_runner_stop */
    int launch_errno;                    /* ENOENT, EACCES, ENOEXEC...: the program never ran */
    double wall_s;                       /* start to the main process's exit */
    long progress;                       /* mt_runner_progress calls */
    long lines[3];                       /* lines by stream (index enum mt_stream) */
    long truncated;                      /* lines cut at MT_RUNNER_LINE_MAX */
    int leftovers;                       /* processes still alive after the main process
                                            exited on its own (then stopped) */
    int unreaped;                        /* descendants outlived SIGKILL + 30 s (never seen) */
    const char *stdout_log, *stderr_log; /* NULL without run_dir */
} mt_run_result;

typedef struct mt_run mt_run;

/* Starts a run.  A program that cannot be run (missing, not executable) is
 * not an error here: the run's result says launch_error.  NULL, with the
 * problem in d, when the spec is unusable or the worker cannot start
 * anything (run_dir not creatable, no processes or pipes left): treat as
 * infra.  Strings in spec are copied; callbacks are kept.  Caller owns the
 * return value; free with mt_runner_destroy. */
mt_run *mt_runner_start(const mt_run_spec *spec, mt_diag *d);

/* Streams output to the logs and callbacks, enforces the limits, and returns
 * when the run is over and every descendant is gone.  Fills res (its
 * strings borrowed from run).  0, or negative when called twice. */
int mt_runner_wait(mt_run *run, mt_run_result *res);

/* An iteration was seen: resets the hang clock.  Call from the line
 * callback.  Whatever shows the job advancing may count (an iteration, a
 * validation or checkpoint line): the caller decides. */
void mt_runner_progress(mt_run *run);

/* Changes the expected step time and k while the run goes (the parser has
 * measured real steps; the last iteration is done and only shutdown is
 * left: step_s 0 turns hang detection off).  hang_factor <= 0 keeps k. */
void mt_runner_set_hang(mt_run *run, double step_s, double hang_factor);

/* Asks the runner to stop the run now (SIGTERM, grace, SIGKILL) and to
 * report outcome (enum mt_outcome) with evidence (copied; may be NULL).
 * Safe from the line callback; the first stop wins. */
void mt_runner_stop(mt_run *run, int outcome, const char *evidence);

/* The job's process id (its process group); 0 when it never started. */
pid_t mt_runner_pid(const mt_run *run);

/* Stops a run still going (without callbacks), waits for it, frees it and
 * sets *run to NULL; NULL-safe. */
void mt_runner_destroy(mt_run **run);

#endif
