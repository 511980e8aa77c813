/*
 * launch.h - from the contract's launch template to the argv and
 * environment a runner executes, under the `local` or `srun` launcher.
 *
 * Typical use (the worker, for one run):
 *   env   <- mt_launch_environment(kind, inherit, rendered env)
 *   l     <- mt_launch_new(kind, nodes, gpus_per_node, rendered launcher
 *            settings, job name from mt_launch_job_name, env)
 *   argv  <- mt_launch_expand(contract template, placeholders, rendered args)
 *   argv' <- mt_launch_wrap(l, argv)
 *   run   <- mt_runner_start({argv', env, on_stop = mt_launch_stop, stop_ctx = l})
 *
 * srun: `srun -l --nodes=N --ntasks-per-node=T --ntasks=N*T [--gpus-per-node=G]
 * --job-name=NAME --kill-on-bad-exit=1 [--cpu-bind=ldoms] [--container-image=I
 * [--container-mounts=M] [--container-workdir=W]] [MOETUNE rank-exec --] ARGV...`.  T is
 * one task per GPU unless the launcher setting ntasks_per_node says
 * otherwise (1 for a torchrun template, which starts the ranks itself).  A
 * run is stopped with scancel: inside an allocation (SLURM_JOB_ID in the
 * job's environment) srun makes a step of that job named NAME, found with
 * `squeue --steps --jobs=ID --name=NAME --format="%j %i"` (the name matched
 * here too: Slurm 22.05's squeue lists every step of the job whatever
 * --name says, the worker's own step included) and cancelled as
 * JOBID.STEPID;
 * outside one, srun makes a job named NAME, cancelled with
 * `scancel --name=NAME`.  Names come from mt_launch_job_name, so they are
 * unique and never match somebody else's job.
 */
#ifndef MT_LAUNCH_H
#define MT_LAUNCH_H

#include "diag.h"
#include "kv.h"
#include "sink.h"

enum mt_launcher { MT_LAUNCHER_LOCAL = 0, MT_LAUNCHER_SRUN = 1 };

/* Expands a launch template.  A token that is exactly "{args}" becomes the
 * rendered arguments, one token each; "{name}" anywhere in a token (name:
 * letters, digits, '_', '.', starting with a letter or '_') becomes the
 * value of placeholders[name]; "{{" and "}}" are literal braces; other
 * braces are kept as written.  An unknown name is an error naming it, the
 * token and the known names; "{args}" inside a longer token is an error too.
 * Appends to out (caller initialised, caller frees).  0 or -EINVAL/-ENOMEM,
 * with the problem in d (field "launch.template"). */
int mt_launch_expand(const char *const *tmpl, size_t n, const mt_kv *placeholders,
                     const mt_strlist *args, mt_strlist *out, mt_diag *d);

/* "local" or "srun" -> enum mt_launcher; -1 when neither. */
int mt_launch_kind(const char *name);

/* The caller's variables a run sees (the pass-through list; everything
 * else in moetune's environment is dropped, workers/PROTOCOL.md "The job's
 * environment"), in two kinds:
 *   MT_ENV_RESULT     they change results: MOETUNE_SIM_*, NCCL_*, NVTE_*,
 *                     CUDA_DEVICE_MAX_CONNECTIONS, PYTORCH_CUDA_ALLOC_CONF;
 *                     a tune records them at its start and a resume with
 *                     other values is refused (unless the name is a knob:
 *                     then the config sets it and the caller's is dropped);
 *   MT_ENV_PLACEMENT  launcher and placement: SLURM_* (srun only), RANK,
 *                     LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
 *                     CUDA_VISIBLE_DEVICES, PATH, HOME, USER, LOGNAME, LANG,
 *                     LC_ALL, TZ, TMPDIR, LD_LIBRARY_PATH,
 *                     MOETUNE_CONTAINER_DIGEST; they pass unrecorded. */
enum mt_env_class { MT_ENV_DROPPED = 0, MT_ENV_RESULT = 1, MT_ENV_PLACEMENT = 2 };

/* The class of the variable named by name's first n bytes. */
int mt_launch_env_class(const char *name, size_t n);

/* The job's whole environment into out (caller's map, entries added):
 * with inherit, all of this process's environment; without, only the
 * pass-through list above (SLURM_* for srun only).  Then rendered (the
 * contract's and the plugins' settings) on top.  0 or -ENOMEM. */
int mt_launch_environment(int kind, int inherit, const mt_kv *rendered, mt_kv *out);

/* This process's MT_ENV_RESULT variables into out (NAME -> value), except
 * those knobs (a config: "env.NAME" keys) sets.  0 or -ENOMEM. */
int mt_launch_result_env(const mt_kv *knobs, mt_kv *out);

/* A name no other run shares: "mt-<tag>-<host>-<pid>-<n>-<random hex>",
 * only [A-Za-z0-9._-].  Caller frees. */
char *mt_launch_job_name(const char *tag);

typedef struct mt_launch {
    int kind;            /* enum mt_launcher */
    int nodes;           /* >= 1 */
    int gpus_per_node;   /* 0: no --gpus-per-node (no GRES on the cluster) */
    int ntasks_per_node; /* srun tasks per node */
    int cpu_bind_numa;   /* launcher setting cpu_bind=numa */
    int rank_env;        /* setting rank_env=true: `MOETUNE rank-exec --` before argv */
    char *rank_exec;     /* that MOETUNE: setting rank_exec, else this program's own file */
    /* pyxis: --container-image, --container-mounts, --container-workdir */
    char *container_image, *container_mounts, *container_workdir;
    char *job_name;
    char *nodelist;          /* srun --nodelist ("a,b"), or NULL: Slurm places the step */
    mt_kv *env;              /* the job's environment (copy) */
    char *slurm_job_id;      /* SLURM_JOB_ID in env, or NULL */
    double cancel_timeout_s; /* per squeue / scancel call (default 15 s) */
} mt_launch;

/* Checks the launcher settings (the contract's launch.srun group with the
 * rendered `# launcher` section on top: cpu_bind = none|numa,
 * ntasks_per_node = N, and under srun rank_env = true|false, rank_exec =
 * PATH, container_image, container_mounts, container_workdir; any other
 * name is an error, never silently ignored) and keeps copies.  rank_env
 * puts `RANK_EXEC rank-exec --` in front of argv (workers/rankexec.h), so
 * each task gets RANK, WORLD_SIZE, MASTER_ADDR, ... without a shell;
 * RANK_EXEC defaults to this program's own file (/proc/self/exe), which
 * a container must mount at the same path (or set rank_exec).  The
 * container settings become pyxis's srun options --container-image=,
 * --container-mounts=, --container-workdir=.  env may be NULL (empty).  NULL with
 * the problem in d (field "launch.launcher" or "launcher.<name>").  Under
 * srun, cpu_bind=numa becomes --cpu-bind=ldoms.  Under local there is one
 * process tree on one node and nothing for the launcher to bind: the run
 * applies cpu_bind itself, through a template placeholder ({cpu_bind} ->
 * torchrun's or numactl's option) or, for the sim, MOETUNE_SIM_CPU_BIND in
 * the environment.  Caller owns the return value; free with
 * mt_launch_destroy. */
mt_launch *mt_launch_new(int kind, int nodes, int gpus_per_node, const mt_kv *settings,
                         const char *job_name, const mt_kv *env, mt_diag *d);
void mt_launch_destroy(mt_launch **l);

/* The command the runner executes: argv itself under `local`, prefixed by
 * srun and its options under `srun`.  Appends to out.  0 or -ENOMEM. */
int mt_launch_wrap(const mt_launch *l, const mt_strlist *argv, mt_strlist *out);

/* The squeue command that prints "NAME JOBID.STEPID" for the steps of the
 * allocation (inside one; mt_launch_stop keeps the line of the run's own
 * NAME); 0 with out left empty when there is no allocation (the
 * run is its own job).  Appends to out.  0 or -ENOMEM. */
int mt_launch_query_argv(const mt_launch *l, mt_strlist *out);

/* The scancel command: `scancel STEP` for a step found by the query
 * ("123.4"); without an allocation, `scancel --name=NAME`.  Inside an
 * allocation with no step found (it never started, or already ended),
 * out stays empty: there is nothing to cancel, and the runner's signals
 * to srun (which forwards SIGTERM to the tasks) do the rest.  Appends to
 * out.  0 or -ENOMEM. */
int mt_launch_cancel_argv(const mt_launch *l, const char *step, mt_strlist *out);

/* The run's hosts, one per entry, appended to out: this host under
 * `local`; under `srun`, the nodes Slurm gave the step (or job), from
 * squeue and `scontrol show hostnames`, so call it while the run is live
 * (from the line callback, at its first line).  For the fingerprint.  0, or
 * -1 with the problem in d. */
int mt_launch_hosts(const mt_launch *l, mt_strlist *out, mt_diag *d);

/* mt_stop_fn for the runner: under srun, finds the step and cancels it
 * (squeue, then scancel, each a real child process under the runner with
 * cancel_timeout_s); under local, nothing.  ctx is the mt_launch.  0, or -1
 * with what failed in d. */
int mt_launch_stop(void *ctx, mt_diag *d);

#endif
