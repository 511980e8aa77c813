/*
 * simargs.h - the sim's command line: Megatron-LM flags (argparse rules),
 * Megatron-Bridge overrides (Hydra rules), the sim's own --sim-* flags and
 * their MOETUNE_SIM_* environment twins, and the stack version file.  Every
 * setting goes through sim_cfg_set(), the one name -> field mapping.
 */
#ifndef MT_SIMARGS_H
#define MT_SIMARGS_H

#include "sim.h"

#include <stdint.h>
#include <stdio.h>

/* What the parse learned beyond sim_cfg: values the arguments dump prints
 * as given, and the sim's own seed. */
typedef struct sim_opts {
    uint64_t noise_seed;      /* --sim-seed / MOETUNE_SIM_SEED, else --seed */
    int have_noise_seed;
    int routing_set;          /* --sim-routing / MOETUNE_SIM_ROUTING given */
    int graph_scope_flag;     /* modules came as --cuda-graph-scope (older stacks) */
    char router_dtype[8];     /* --moe-router-dtype as given ("" = None) */
    char moe_layer_freq[128]; /* --moe-layer-freq as given ("" = 1) */
    char stack_file[SIM_PATH_MAX];
    const char *prog;         /* "pretrain_gpt.py" or Bridge's "run_recipe.py" */
} sim_opts;

/* Return values of sim_args_parse besides an exit status. */
#define SIM_ARGS_OK 0
#define SIM_ARGS_HELP (-1) /* -h/--help printed the usage: exit 0 */

/* Parses argv[1..argc-1] (and the environment) into c, which the caller has
 * set to sim_cfg_defaults().  Errors are printed to err as the framework
 * prints them; the return value is then the exit status: 2 for argparse
 * errors, a bad sim setting or stack file, 1 for a Bridge override error.
 * On success the derived defaults are filled (GBS = MBS x DP when unset,
 * routing from --moe-router-force-load-balancing when not given). */
int sim_args_parse(sim_cfg *c, sim_opts *o, int argc, char *const argv[], FILE *out, FILE *err);

/* Reads a stack version file (key = value lines, # comments) into c.
 * 0, or -1 with "FILE:LINE: reason" in msg. */
int sim_stack_load(sim_cfg *c, const char *path, char *msg, size_t n);

/* Argument dump entries as Megatron prints them (`  name ..... value`),
 * sorted by name: calls fn once per entry. */
typedef void (*sim_dump_fn)(void *ctx, const char *name, const char *value);
void sim_args_dump(const sim_cfg *c, const sim_opts *o, sim_dump_fn fn, void *ctx);

#endif
