/*
 * measure.h - one measurement, end to end: render the config, launch it
 * under the contract's launcher, stream every line to the log parser, stop it
 * on timeout or hang, type the outcome, summarize the declared steady window,
 * collect every GPU's peak memory, ask the plugins whether their knobs took
 * effect, and store it all.
 *
 * The steady window comes from the contract (screen: after warm-up; validate:
 * first..last) and is fixed before the run starts; it never depends on the
 * data.  The CUDA graph capture step and warm-up are outside it by contract
 * (moetune check refuses windows that contain them).
 */
#ifndef MT_MEASURE_H
#define MT_MEASURE_H

#include "contract.h"
#include "logparse.h"
#include "registry.h"
#include "render.h"
#include "runner.h"
#include "sink.h"
#include "store.h"
#include "wall.h"

struct mt_measure;

typedef struct mt_measure_spec {
    const mt_contract *contract;
    mt_registry *reg;
    const mt_kv *config;    /* the config to measure */
    const char *kind;       /* "screen" | "validate" | "profile" | "fit" */
    int replicate;          /* independent run index (statistics) */
    int retry;              /* re-run after an infrastructure failure */
    const char *run_dir;    /* logs go here (created) */
    const char *sim_path;   /* the {sim} placeholder */
    double time_limit_s;    /* 0: from the contract's step count, generous */
    double hang_factor;     /* k; 0: 10 */
    /* a profiled run: the profiler is switched on for the screen window
     * (PyTorch profiler, traces under run_dir/tb), the trace is analysed
     * (profile.h) and its trace.* evidence joins the log's for verify */
    int profile;
    const mt_profile_rules *rules; /* wall thresholds; NULL: the contract's */
    uint64_t sim_seed;      /* sim backend: the noise seed (0: the contract's data.seed) */
    /* NULL: the contract's data.routing; "natural": the router's own routing
     * although the contract forces balance (the config must not force it
     * either); the sim backend is told so, a real stack routes by itself */
    const char *routing;
    /* under srun: the step's --nodelist ("a,b"), NULL to let Slurm place it */
    const char *nodelist;
    /* the engine's memo: when set, memo(m) (a JSON text, freed by the
     * caller) is stored under memo_key in the run's own transaction */
    /* every iteration line as it arrives (a worker's progress), or NULL */
    void (*on_line)(void *ctx, const char *line, size_t n);
    void *line_ctx;
    const char *memo_key;
    char *(*memo)(const struct mt_measure *m, void *ctx);
    void *memo_ctx;
    /* NULL, or a flag a signal handler sets to cancel the run (see
     * mt_run_spec.cancel): stopped through the launcher (scancel) */
    volatile sig_atomic_t *cancel;
    /* a bisection job: the revision measured and its prepared work
     * directory (workers/prepare.h).  {rev} and {work} are expanded in the
     * launch template and in the contract's env values, and MOETUNE_REV /
     * MOETUNE_WORK join the environment.  NULL otherwise. */
    const char *rev, *work;
} mt_measure_spec;

typedef struct mt_measure {
    double gpu_hours;            /* charged to the budget (stored runs) */
    int outcome;                 /* enum mt_outcome */
    char evidence[600];          /* the line that decided it */
    int first, last;             /* the declared window */
    size_t n_window;             /* iterations seen inside it */
    long used_first, used_last;  /* the first and last of them whose step time entered
                                    median_step_ms (-1 when none did) */
    double median_step_ms;       /* over the window; NAN when none */
    double median_tflops;        /* over the window; NAN when none */
    int loss_finite;             /* every loss in the run finite */
    long skipped, nan;           /* summed over the run */
    double peak_bytes;           /* hottest GPU's peak */
    int peak_rank;               /* its rank (-1 unknown) */
    char peak_source[8];         /* nvml | sim | log | none */
    double sim_seconds;          /* simulated wall time charged ([sim] line) */
    double last_loss;            /* "lm loss" of the last iteration; NAN when none */
    mt_kv *verify_evidence;      /* what verify saw: log.*, env.*, launch.*, trace.* (owned) */
    int profiled;                /* a trace was found and analysed */
    char trace_path[512];
    mt_wall_verdict wall;        /* the wall of the profiled window (profiled only) */
    double share_compute, share_hidden; /* compute and hidden comm / window (profiled) */
    int prof_first, prof_last;   /* the steps the profiler was asked for, inclusive
                                    (-1 when not profiled) */
    double prof_window_s;        /* the trace window one GPU saw, s; NAN: unknown */
    mt_verdicts verdicts;        /* each plugin's activation verdicts */
    int not_applied;             /* verdicts that say a knob did not take effect */
    mt_run_result run;           /* process facts (evidence copied below) */
    char run_evidence[600];
    char config_id[17];
    int64_t run_id;              /* store row, -1 when not stored */
    const char *fingerprint;     /* the run's fingerprint (JSON) while it is stored, for
                                    the memo; NULL otherwise (borrowed) */
    mt_logparse *log;            /* the parsed log (owned) */
} mt_measure;

/* The id of cfg as a job of kind runs it (out gets 16 hex digits and a
 * NUL): the config with train_iters set to the kind's steps (validate: the
 * contract's validation steps; every other kind: the screen's).  The run is
 * stored under this id, and the engine names the job, its memo key and its
 * run directory by it, so the three agree. */
/* The cluster a sim contract's runs stand for, as the environment
 * moetune-sim reads (MOETUNE_SIM_GPU, _GPUS_PER_NODE, _NODES,
 * _NVLINK_DOMAIN, _ROUTING: the contract's, or "natural" when routing says
 * so, _MEGATRON and _TE: the declared stack), set into env. */
void mt_measure_sim_env(const mt_contract *c, const char *routing, mt_kv *env);
void mt_measure_config_id(const mt_contract *c, const mt_kv *cfg, const char *kind,
                          char out[17]);
/* That config itself (caller owns it: mt_kv_destroy); NULL when out of
 * memory. */
mt_kv *mt_measure_run_config(const mt_contract *c, const mt_kv *cfg, const char *kind);

/* The launcher settings of a run: the contract's launch.srun group with
 * the rendered `# launcher` section on top.  Caller owns it; NULL on OOM. */
mt_kv *mt_measure_launch_settings(const mt_contract *c, const mt_kv *rendered);

/* The exact argv a run executes: the contract's template with its
 * placeholders ({sim}, {run_dir}, {nodes}, {gpus_per_node}, {world_size},
 * {job_name}; {rev}, {work} when rev is set) and r's arguments, under the
 * contract's launcher (srun and its options, the container, rank-exec)
 * with mt_measure_launch_settings; nodelist (may be NULL) the srun step's
 * --nodelist.  Appends to out; *lp (may be NULL) gets the launcher (caller
 * destroys).  0, or -1 with the problem in d. */
struct mt_launch;
int mt_measure_command(const mt_contract *c, const mt_rendered *r, const char *sim_path,
                       const char *run_dir, const char *job, const char *rev, const char *work,
                       const char *nodelist, const mt_kv *env, mt_strlist *out,
                       struct mt_launch **lp, mt_diag *d);

/* Runs one measurement; stores it when st is not NULL.  0 when a result
 * exists (whatever its outcome), negative when it could not even be set up
 * (the reason in d).  Free with mt_measure_clear. */
int mt_measure_run(const mt_measure_spec *spec, mt_store *st, mt_measure *out, mt_diag *d);
void mt_measure_clear(mt_measure *m);

/* The measurement's summary as the engine memoizes it: its mt_job_memo
 * as JSON (workers/job_memo.h has the schema), every group present but the
 * window (only when step times entered the median) and the wall (only for
 * a profiled run).  Caller frees; NULL on OOM. */
char *mt_measure_memo_json(const mt_measure *m);

/* Types a finished run from its process facts and its log: OOM on any rank
 * wins over the hang of the others; then NaN, infrastructure errors (NCCL,
 * Xid, lost node: retried, not held against the candidate), hang, timeout,
 * crash, an impossible step time (NaN, infinite or negative) in the window
 * window_first..window_last (crash, the log line named), a run that ended
 * before its window; else ok.  A restarted run (iteration numbers going
 * back) is judged by its last pass; the evidence says where it restarted
 * and how many earlier samples were set aside. */
/* The line that decided outcome (an OOM, NaN, NCCL or infrastructure
 * error, a crash) named by its rank and node in evidence (n bytes, the
 * text classify wrote): "rank R on HOST: <line>" when the line came from
 * one rank's stream (srun -l's label, torchrun's [rankN], or a rank the
 * line names) and hosts (the step's nodes, in order) holds its node, ranks
 * placed as srun's block distribution and torchrun place them (rank /
 * gpus_per_node); "rank R: <line>" without hosts; unchanged otherwise. */
void mt_measure_attribute(int outcome, const mt_logparse *log, const mt_strlist *hosts,
                          int gpus_per_node, char *evidence, size_t n);

int mt_measure_classify(const mt_run_result *run, const mt_logparse *log, int window_first,
                        int window_last, char *evidence, size_t n);

#endif
