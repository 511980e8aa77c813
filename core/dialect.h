/*
 * dialect.h - what one version of the training stack accepts on its command
 * line.
 *
 * A Megatron-LM dialect is the flag table of that version's own argument
 * parser (every option string with its action, arity, converter, choices,
 * default and destination), read from upstream at a pinned commit and kept
 * as data in core/dialects/mlm/<version>.tsv (embedded at build time).  On
 * top of the table, mt_argparse() reads a command line the way Python's
 * argparse does with that parser (allow_abbrev off, last occurrence wins,
 * the same error texts), giving the argument namespace upstream's start-up
 * validation sees: one key per dest, defaults filled in.
 *
 * Namespace values are strings: integers in decimal, floats as written,
 * booleans "true"/"false", lists space-joined, enum defaults by member name
 * ("AttnBackend.auto" is "auto").  A dest whose value is None is absent.
 */
#ifndef MT_DIALECT_H
#define MT_DIALECT_H

#include "kv.h"

#include <stddef.h>

typedef struct mt_flag {
    const char *flag;    /* "--tensor-model-parallel-size"                      */
    const char *action;  /* store, store_true, store_false, store_const, append */
    const char *nargs;   /* "-" (one value), "0", "+", "*", "?", or a count     */
    const char *type;    /* converter name: int, float, str, ...; "-" = string  */
    const char *choices; /* "a|b|c", or NULL when none are declared             */
    const char *def;     /* the default as the table prints it                  */
    const char *dest;
} mt_flag;

typedef struct mt_mlm_dialect mt_mlm_dialect;

/* Known Megatron-LM versions, oldest first, NULL-terminated. */
const char *const *mt_dialect_known(void);
/* The dialect of a Megatron-LM version name ("core_v0.18.0", "main"), or NULL. */
const mt_mlm_dialect *mt_dialect_find(const char *version);
/* Picks the dialect of a contract's stack: `dialect` when set, else
 * `megatron_lm`.  On failure writes a message that lists the known
 * versions and returns NULL. */
const mt_mlm_dialect *mt_dialect_for_stack(const mt_kv *stack, char *err, size_t n);
/* "main", "core_r0.15.0", ... and the package version ("0.20.0"). */
const char *mt_dialect_name(const mt_mlm_dialect *d);
const char *mt_dialect_core_version(const mt_mlm_dialect *d);
/* 0 when a >= b, compared as dotted numbers: "0.18.0" vs "0.18". */
int mt_version_cmp(const char *a, const char *b);

size_t mt_dialect_count(const mt_mlm_dialect *d);
const mt_flag *mt_dialect_at(const mt_mlm_dialect *d, size_t i);
/* The row of an option string ("--bf16"), or NULL. */
const mt_flag *mt_dialect_flag(const mt_mlm_dialect *d, const char *flag);
/* The option string that sets dest to a true value (store_true) or takes a
 * value (store): "--sequence-parallel" for sequence_parallel.  NULL when the
 * version has no such dest. */
const mt_flag *mt_dialect_flag_for(const mt_mlm_dialect *d, const char *dest);

/* One option occurrence on a command line. */
typedef struct mt_argtok {
    const mt_flag *flag; /* NULL for an unrecognized token                     */
    size_t first;        /* index of the option token in argv                  */
    size_t count;        /* argv tokens it spans, option included              */
} mt_argtok;

typedef struct mt_argparse_result {
    mt_argtok *toks;
    size_t n_toks;
    char error[512]; /* argparse's message when parsing failed, "" otherwise */
    char where[128]; /* the offending flag, or "argparse"                     */
} mt_argparse_result;

/* Parses argv (program name excluded) into ns (cleared first: defaults,
 * then given values).  Returns 0, or -1 with res->error set the way
 * argparse words it ("argument --x: invalid choice: 'y' (choose from ...)",
 * "unrecognized arguments: ...").  res may be NULL. */
int mt_argparse(const mt_mlm_dialect *d, char *const *argv, size_t argc, mt_kv *ns,
                mt_argparse_result *res);
/* Same, where extra maps an option string ("--moe-flex-dispatcher-backend")
 * to more choices ("a|b") that the stack accepts besides the table's: the
 * values a plugin adds to a knob it extends (a patched stack's backend). */
int mt_argparse_ext(const mt_mlm_dialect *d, char *const *argv, size_t argc, mt_kv *ns,
                    mt_argparse_result *res, const mt_kv *extra);
void mt_argparse_result_clear(mt_argparse_result *res);

/* The namespace's default value of a row, normalized as above; NULL for None. */
int mt_flag_default(const mt_flag *f, char *buf, size_t n);

#endif
