/*
 * optimum.h - the best config of a contract's declared search space,
 * evaluated noise-free in process with the simulator's model: the limit the
 * search benchmarks compare against.
 */
#ifndef MT_OPTIMUM_H
#define MT_OPTIMUM_H

#include "contract.h"
#include "registry.h"

#include <stdio.h>

typedef struct mt_optimum {
    size_t grid;        /* configs in the declared space */
    size_t legal;       /* legal under every plugin (after no repair) and the sim */
    size_t fitting;     /* legal and within the memory headroom */
    double best_tflops; /* model TFLOP/s/GPU of the best */
    double best_step_s;
    double base_tflops; /* the base's, whether it fits or not (0: the sim refuses it) */
    int base_fits;      /* the base's hottest rank keeps the headroom (in the sim) */
    double base_peak_gb; /* the base's hottest rank in the sim, GB (0 when refused) */
    mt_kv *best;        /* caller frees; NULL when nothing fits */
    double seconds;     /* wall time of the evaluation */
} mt_optimum;

/* Evaluates every config of the space (capped at max_grid); 0, or -1 when
 * the space is larger than max_grid (nothing evaluated). */
int mt_optimum_find(mt_registry *r, const mt_contract *c, const mt_kv *base, size_t max_grid,
                    mt_optimum *out, mt_diag *d);

/* The noise-free model TFLOP/s/GPU of one config (the evaluator behind
 * mt_optimum_find): 0 when the sim refuses it (its own legality; the
 * plugins' rules are not asked).  *fits (may be NULL): the sim's hottest
 * rank stays within HBM less the contract's memory headroom. */
double mt_optimum_tflops(const mt_contract *c, const mt_kv *cfg, int *fits);

#endif
