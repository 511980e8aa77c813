/*
 * rankexec.h - `moetune rank-exec -- ARGV...`: the rank environment
 * torch.distributed reads, from the variables Slurm gives each srun task,
 * then exec of ARGV (never a shell).
 *
 * Under the srun launcher with `launch.srun.rank_env = true`, every task is
 * started as `moetune rank-exec -- PROGRAM ARGS...`.  From SLURM_PROCID,
 * SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID, SLURM_STEP_TASKS_PER_NODE (or
 * SLURM_TASKS_PER_NODE), SLURM_STEP_NODELIST (or SLURM_JOB_NODELIST),
 * SLURM_JOB_ID and SLURM_STEP_ID it sets:
 *   RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK, GROUP_RANK;
 *   MASTER_ADDR  the first host of the step's node list (hostlist syntax
 *                such as gpu[01-03,07] expanded here, no scontrol call);
 *   MASTER_PORT  derived from the job and step ids: every task of a step
 *                computes the same port, two steps of one allocation get
 *                different ones (mt_rank_port);
 * and for torchrun (one task per node; torchrun reads PET_<OPTION> as the
 * default of --<option>): PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT,
 * PET_RDZV_ENDPOINT (MASTER_ADDR:MASTER_PORT).
 * A variable already set by the caller is replaced: srun's values are the
 * step's truth.
 */
#ifndef MT_RANKEXEC_H
#define MT_RANKEXEC_H

#include "sink.h"

#include <stddef.h>

/* The most hosts a node list may expand to (a longer one is refused). */
#define MT_HOSTLIST_MAX 65536

/* Expands a Slurm host list ("gpu[01-03,07],login1", "r[1-2]-n[1-2]")
 * into out (caller initialised and frees), in order.  Zero padding follows
 * the range's first number ("01-10" -> 01 .. 10).  0, or -1 with what is
 * wrong (the position and the text) in err. */
int mt_hostlist_expand(const char *list, mt_strlist *out, char *err, size_t n);

/* The first host of a list alone, into host.  0 or -1 (err). */
int mt_hostlist_first(const char *list, char *host, size_t hn, char *err, size_t n);

/* MASTER_PORT of a step: 20000 + (a hash of job id and step id) % 20000,
 * so 20000..39999, the same in every task of the step. */
int mt_rank_port(const char *job_id, const char *step_id);

/* Tasks on node node_id from Slurm's compressed count list
 * ("4(x2),3" -> node 0: 4, node 1: 4, node 2: 3).  -1 when malformed or
 * node_id is out of range. */
int mt_rank_tasks_on_node(const char *tasks_per_node, int node_id);

/* The rank environment from Slurm's variables (get: getenv or a test's
 * lookup) as NAME=value pairs appended to out (2 entries per variable:
 * name, value).  0, or -1 with what is missing or malformed, naming the
 * variable, in err. */
int mt_rank_env(const char *(*get)(const char *name, void *ctx), void *ctx, mt_strlist *out,
                char *err, size_t n);

/* `moetune rank-exec -- ARGV...`: sets the environment and execs ARGV
 * (PATH searched).  Returns only on failure: 64 usage, 2 bad Slurm
 * variables, 127 the program cannot be run (each said on stderr). */
int mt_rank_exec_main(int argc, char **argv);

#endif
