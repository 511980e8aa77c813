/*
 * recipe.h - a config as something a person pastes or submits: shell-quoted
 * environment files and launch scripts (`moetune render --format env|sh`),
 * and the four recipe files a tune writes into its bundle directory
 * (`moetune recipe DIR`; search/BUNDLE.md):
 *
 *   recipe.mlm.sh            the Megatron-LM command line (a sh script)
 *   recipe.bridge.overrides  Megatron-Bridge overrides, one argv word a line
 *   recipe.env               the environment, NAME=value lines (sh syntax)
 *   recipe.sbatch            a Slurm batch script: #SBATCH lines, the
 *                            exported environment, srun with the command
 *
 * Every text comes from core/render.c (mt_render) and, for the command,
 * the contract's launch template (workers/launch.c); nothing here renders
 * a knob itself.
 */
#ifndef MT_RECIPE_H
#define MT_RECIPE_H

#include "contract.h"
#include "diag.h"
#include "registry.h"
#include "sink.h"

enum mt_recipe_format {
    MT_RECIPE_MLM = 0,
    MT_RECIPE_BRIDGE = 1,
    MT_RECIPE_ENV = 2,
    MT_RECIPE_SBATCH = 3,
    MT_RECIPE_NFORMATS = 4
};

/* The words a user types, for messages: "mlm, bridge, env or sbatch". */
#define MT_RECIPE_FORMAT_WORDS "mlm, bridge, env or sbatch"

/* "mlm" -> MT_RECIPE_MLM ...; -1 for any other name (NULL included). */
int mt_recipe_format_parse(const char *name);
/* The format's name ("mlm") and its file in the bundle directory
 * ("recipe.mlm.sh"); NULL out of range.  Static strings. */
const char *mt_recipe_format_name(int format);
const char *mt_recipe_file_name(int format);

/* word as one POSIX sh word: as is when it is non-empty and only
 * [A-Za-z0-9_@%+=:,./-], else in single quotes (a ' written '\'').  Caller
 * owns the return value; NULL on OOM. */
char *mt_recipe_sh_quote(const char *word);

/* The environment as "NAME=value\n" lines, each value quoted as
 * mt_recipe_sh_quote does, so that `set -a; . FILE` reads it back exactly.
 * *text: caller frees.  0, or -1 with the problem in d (a name that is not
 * a shell variable name). */
int mt_recipe_env_text(const mt_kv *env, char **text, mt_diag *d);

/* The command that runs cfg rendered in dialect: the contract's launch
 * template with {args} replaced by the rendered arguments when dialect is
 * the contract's (placeholders: {sim} = sim_path, {nodes},
 * {gpus_per_node}, {world_size}, {job_name} = "moetune-recipe", {run_dir} =
 * "."), or `python pretrain_gpt.py ARGS` for Megatron-LM flags under a
 * Bridge contract; a Bridge rendering under a Megatron-LM contract has no
 * program and is an error.  cmd and r are the caller's (initialised;
 * caller frees); r receives the rendering (argv, env, launcher settings).
 * 0, or -1 with the problem in d. */
int mt_recipe_command(mt_registry *reg, const mt_contract *c, const mt_kv *cfg, uint32_t dialect,
                      const char *sim_path, mt_rendered *r, mt_strlist *cmd, mt_diag *d);

/* A runnable sh script: "#!/bin/sh", the title as a comment, set -e, the
 * exported environment, the launcher settings as a comment (the launcher
 * applies them, not the script), then `exec CMD "$@"` with every word
 * quoted.  *text: caller frees.  0, or -1 with the problem in d. */
int mt_recipe_sh_script(const mt_strlist *cmd, const mt_kv *env, const mt_kv *launch,
                        const char *title, char **text, mt_diag *d);

/* cfg without the settings moetune adds only to measure: the screen's
 * short --train-iters (the contract declares no production length, so the
 * flag is left out; profiling flags and the sim's environment are added by
 * workers/measure.c after rendering and never reach a config).  Caller owns
 * the return value (mt_kv_destroy); NULL on OOM. */
mt_kv *mt_recipe_production(const mt_kv *cfg);

/* The recipe's texts: text[f] is the file of format f, or NULL with
 * why_not[f] saying why it has none (a knob with no Megatron-Bridge path,
 * launcher settings srun cannot apply). */
typedef struct mt_recipe {
    char *text[MT_RECIPE_NFORMATS];
    char *why_not[MT_RECIPE_NFORMATS];
} mt_recipe;

/* Builds every format of cfg (a production config: mt_recipe_production),
 * title the first comment line of the scripts: mlm in Megatron-LM flags,
 * bridge in the overrides of the contract's declared Megatron-Bridge
 * version, env and sbatch from the contract's own dialect and launch
 * template (the command moetune measured).  A format that cannot be made
 * gets its why_not instead.  out is the caller's (mt_recipe_clear).  0, or
 * -1 on OOM (in d). */
int mt_recipe_build(mt_registry *reg, const mt_contract *c, const mt_kv *cfg, const char *sim_path,
                    const char *title, mt_recipe *out, mt_diag *d);
void mt_recipe_clear(mt_recipe *rc);

/* Writes each text of rc to DIR/<mt_recipe_file_name> (a temporary file
 * renamed into place; scripts mode 0755, the others 0644).  0, or -1 with
 * the file named in d. */
int mt_recipe_write(const mt_recipe *rc, const char *dir, mt_diag *d);

/* The text of format in the bundle in dir: bundle.json's recipe.files names
 * the file, read back whole.  *text: caller frees.  0, or -1 with the path
 * and what is missing in d: no bundle.json, a bundle.json that is not JSON
 * or has no recipe, a bundle without a usable recipe (the tune failed), a
 * format the recipe has no form in, a file that is gone. */
int mt_recipe_read(const char *dir, int format, char **text, mt_diag *d);

#endif
