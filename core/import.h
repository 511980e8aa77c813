/*
 * import.h - a contract from an existing Megatron-LM launch command line.
 *
 * The command line is read by the declared version's own flag table (an
 * unknown flag or value is refused the way upstream's parser refuses it).
 * Model shape, sequence and batch go to the contract's model and batch
 * groups, every flag a plugin owns goes to base as that knob, and every
 * other flag (data, tokenizer, checkpoint, architecture details) is kept
 * verbatim in fixed_args, so rendering the contract gives back an
 * equivalent command line.  Flags moetune sets itself on every run
 * (--log-throughput, --train-iters, --eval-interval,
 * --save-interval) are dropped, and the contract says so.
 */
#ifndef MT_IMPORT_H
#define MT_IMPORT_H

#include "diag.h"
#include "kv.h"
#include "registry.h"

#include <stdio.h>

typedef struct mt_import_opts {
    mt_kv *stack;       /* megatron_lm, transformer_engine, ... (--stack)   */
    mt_kv *hardware;    /* gpu, gpus_per_node, nodes (--hardware)           */
    mt_kv *env;         /* the run's environment (--env)                    */
    const char *name;   /* contract name; NULL: derived from the model      */
    const char *dialect;/* "mlm" or "bridge": the contract's launch dialect */
    const char *backend;/* "sim" (default) or "command"                     */
} mt_import_opts;

/* Writes the contract for argv to out.  Returns 0, or 2 (bad input: the
 * problem is in d) or 1 (moetune failed). */
int mt_import(const mt_registry *r, const mt_import_opts *o, char *const *argv, size_t argc,
              FILE *out, mt_diag *d);

#endif
