/*
 * model.h - search/'s one door to the simulator's model (workers/sim).
 *
 * search/model.c is the only search/ file that includes the sim's sim.h:
 * the model executor (MT_EXEC_MODEL: one job evaluated in process, with the
 * sim's own noise) and the noise-free optimum of a contract's declared space
 * (`moetune optimum`, the limit the search benchmarks compare against).
 */
#ifndef MT_MODEL_H
#define MT_MODEL_H

#include "contract.h"
#include "diag.h"
#include "registry.h"

#include <stdint.h>
#include <stdio.h>

/* ---- the model executor ---- */

/* One job of the model executor (MT_EXEC_MODEL), exactly as a tune runs it:
 * kind "screen" | "validate" | "profile", replicate rep, the sim's noise
 * seeded by seed (0: the contract's sim seed), as the tune's seed option.
 * Returns the job's memo (an mt_job_memo, workers/job_memo.h) as JSON text
 * (caller frees; NULL when out of memory): outcome ("ok" | "oom" |
 * "crash"), ms (median step of the contract's window), window {first,
 * last, n} (the steps that median covers), tflops, gpu_hours (what the
 * tune charges), peak_gb, evidence.
 * The plugins' legality is not asked: the engine only submits configs that
 * pass it. */
char *mt_model_job(const mt_contract *c, const mt_kv *cfg, const char *kind, int rep,
                   uint64_t seed);

/* mt_model_job with the router's own routing (natural != 0) although the
 * contract forces balance: the engine's jobs with routing "natural". */
char *mt_model_job_routed(const mt_contract *c, const mt_kv *cfg, const char *kind, int rep,
                          uint64_t seed, int natural);

/* GPU-hours of one launch that ends at start-up (the sim's start-up time on
 * every GPU of the contract): what the model executor charges an oom job. */
double mt_model_launch_gpu_hours(const mt_contract *c, const mt_kv *cfg);

/* ---- the optimum: the best config of a contract's declared search space,
 * evaluated noise-free in process with the simulator's model ---- */

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
