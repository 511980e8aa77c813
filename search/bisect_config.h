/*
 * bisect_config.h - the config source of `moetune bisect`: the difference
 * between a good and a bad config as changes of whole variables, and the
 * intermediate configs a search over them measures.
 *
 * A change (a "unit") is every knob of one variable (the plugins' coupled
 * knobs: dispatcher = type + backend + SMs) whose value differs between the
 * good and the bad config, set to the bad config's values; a differing knob
 * no variable names is a unit of its own.  The first variable (registry
 * order) that names a knob owns it.  Units are kept in the order of their
 * names, so the same two configs always give the same list.
 *
 * An intermediate config is the good config with some units applied.  It
 * goes through the repair protocol (core/evaluate.h) exactly as a tune's
 * candidate does: a knob another unit's value makes illegal is set by its
 * owner's repair, and the repair is recorded.  When no legal config is left,
 * the config is NULL and why says which rule stays violated.
 */
#ifndef MT_BISECT_CONFIG_H
#define MT_BISECT_CONFIG_H

#include "contract.h"
#include "diag.h"
#include "kv.h"
#include "registry.h"

#include <stddef.h>

typedef struct mt_cfg_unit {
    char *name;    /* the variable (or the lone knob) */
    mt_kv *sets;   /* knob -> the bad config's value */
    char *summary; /* "knob: good -> bad, ..." */
} mt_cfg_unit;

typedef struct mt_cfg_diff {
    mt_cfg_unit *u;
    size_t n;
} mt_cfg_diff;

/* The units that turn good into bad.  0 (n may be 0: the configs are the
 * same), or -ENOMEM. Free with mt_cfg_diff_clear. */
int mt_cfg_diff_build(const mt_registry *r, const mt_kv *good, const mt_kv *bad,
                      mt_cfg_diff *out);
void mt_cfg_diff_clear(mt_cfg_diff *df);

/* good with units[0..k-1] applied, repaired.  Caller owns the result (and
 * *repairs: "knob=value (owner: why)" lines, one a repair, when repairs is
 * not NULL).  NULL when no legal config remains (why filled: the first
 * violated rule and its message) or out of memory (why says so). */
mt_kv *mt_cfg_diff_apply(mt_registry *r, const mt_contract *c, const mt_kv *good,
                         const mt_cfg_diff *df, const int *units, size_t k, char **repairs,
                         char *why, size_t why_len, mt_diag *d);

#endif
