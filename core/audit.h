/*
 * audit.h - the checks `moetune check` runs on a loaded contract beyond its
 * structure: the base config is legal, no timing window contains an eval,
 * checkpoint save, CUDA graph capture or manual-GC step, and every value the
 * search space declares is legal in at least one config of that space.
 */
#ifndef MT_AUDIT_H
#define MT_AUDIT_H

#include "contract.h"
#include "diag.h"
#include "registry.h"

/* Appends every problem to d; returns how many were found. */
int mt_audit_windows(const mt_contract *c, const mt_kv *base, mt_diag *d);
int mt_audit_base(mt_registry *r, const mt_contract *c, const mt_kv *base, mt_diag *d);
int mt_audit_space(mt_registry *r, const mt_contract *c, const mt_kv *base, mt_diag *d);

#endif
