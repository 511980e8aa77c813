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
    double base_tflops;
    mt_kv *best;        /* caller frees; NULL when nothing fits */
    double seconds;     /* wall time of the evaluation */
} mt_optimum;

/* Evaluates every config of the space (capped at max_grid); 0, or -1 when
 * the space is larger than max_grid (nothing evaluated). */
int mt_optimum_find(mt_registry *r, const mt_contract *c, const mt_kv *base, size_t max_grid,
                    mt_optimum *out, mt_diag *d);

#endif
