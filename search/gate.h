/*
 * gate.h - the acceptance gate: whether a screened candidate may replace the
 * current best.  Every refusal names its reason.  The checks, in order:
 *   1. the statistics: BETTER (significant at the look's alpha and at least
 *      the minimum effect faster); SAME/UNKNOWN/WORSE are refused as "not
 *      significant", "below the minimum effect" or "slower";
 *   2. every candidate run's loss finite, no skipped or NaN iteration;
 *   3. for training-equivalent changes, the candidate's final loss within
 *      loss_tolerance (relative) of the control's at the same seed;
 *   4. the hottest GPU's measured peak within capacity less the headroom;
 *   5. the candidate's label allowed by the contract;
 *   6. activation: every changed knob verified applied by its plugin.
 */
#ifndef MT_GATE_H
#define MT_GATE_H

#include "stats.h"

#include <stddef.h>
#include <stdint.h>

typedef struct mt_gate_in {
    const mt_stats_decision *dec;
    double min_effect;
    double loss_tolerance;    /* relative */
    double memory_headroom;   /* fraction of capacity kept free */
    double capacity_gb;       /* NAN: unknown (the check is skipped) */
    uint32_t label;           /* the candidate's (MT_LABEL_* bits) */
    uint32_t allowed_labels;  /* the contract's */
    int bad_iterations;       /* a candidate run had a non-finite loss, skipped or NaN steps */
    const double *control_loss, *candidate_loss; /* final losses, one per replicate */
    size_t n_control_loss, n_candidate_loss;
    double candidate_peak_gb; /* hottest GPU over the candidate's runs; NAN unknown */
    int activation;           /* 1 verified; 0 not (activation_why says why) */
    const char *activation_why;
} mt_gate_in;

/* What the gate decided, one value per check above; the reason text says the
 * same in words (callers switch on this, never on the text). */
typedef enum mt_gate_refusal {
    MT_GATE_ACCEPTED = 0,
    MT_GATE_SLOWER,          /* 1: WORSE */
    MT_GATE_NOT_SIGNIFICANT, /* 1: SAME/UNKNOWN at or above the minimum effect */
    MT_GATE_BELOW_EFFECT,    /* 1: SAME/UNKNOWN under the minimum effect */
    MT_GATE_BAD_ITERATIONS,  /* 2 */
    MT_GATE_LOSS,            /* 3 */
    MT_GATE_MEMORY,          /* 4 */
    MT_GATE_LABEL,           /* 5 */
    MT_GATE_ACTIVATION       /* 6 */
} mt_gate_refusal;

/* How an accepted reason begins (the words after it say why). */
#define MT_GATE_ACCEPTED_PREFIX "accepted: "

/* The gate's decision: MT_GATE_ACCEPTED or the first check that refused;
 * reason gets one line either way. */
mt_gate_refusal mt_gate_judge(const mt_gate_in *g, char *reason, size_t n);

/* 1 accepted, 0 refused (mt_gate_judge's decision as a flag). */
int mt_gate(const mt_gate_in *g, char *reason, size_t n);

#endif
