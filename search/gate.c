/*
 * gate.c - the acceptance gate (see gate.h).
 */
#include "gate.h"

#include <math.h>
#include <moetune/plugin.h>
#include <stdio.h>

mt_gate_refusal mt_gate_judge(const mt_gate_in *g, char *reason, size_t n)
{
    const mt_stats_decision *d = g->dec;
    double cm, xm;
    if (d->verdict != MT_STATS_BETTER) {
        mt_gate_refusal r = d->verdict == MT_STATS_WORSE            ? MT_GATE_SLOWER
                            : fabs(d->effect) < g->min_effect         ? MT_GATE_BELOW_EFFECT
                                                                      : MT_GATE_NOT_SIGNIFICANT;
        const char *why = r == MT_GATE_SLOWER         ? "slower"
                          : r == MT_GATE_BELOW_EFFECT ? "below the minimum effect"
                                                      : "not significant";
        snprintf(reason, n, "%s: %s (effect %+.2f%%, p %.3g, alpha %.3g)", why, d->reason,
                 100 * d->effect, d->p, d->alpha_look);
        return r;
    }
    if (g->bad_iterations) {
        snprintf(reason, n, "the candidate's loss is not finite, or it skipped or NaN'd iterations");
        return MT_GATE_BAD_ITERATIONS;
    }
    if ((g->label & MT_LABEL_TRAINING_EQUIVALENT) && g->n_control_loss && g->n_candidate_loss &&
        mt_stats_median(g->control_loss, g->n_control_loss, &cm) == 0 &&
        mt_stats_median(g->candidate_loss, g->n_candidate_loss, &xm) == 0 &&
        fabs(xm - cm) > g->loss_tolerance * fabs(cm)) {
        snprintf(reason, n,
                 "the loss diverges from the control's at the same seed: %.4f vs %.4f (%+.2f%%, "
                 "tolerance %.1f%%)",
                 xm, cm, 100 * (xm - cm) / cm, 100 * g->loss_tolerance);
        return MT_GATE_LOSS;
    }
    if (isfinite(g->capacity_gb) && isfinite(g->candidate_peak_gb) &&
        g->candidate_peak_gb > g->capacity_gb * (1 - g->memory_headroom)) {
        snprintf(reason, n,
                 "memory: the hottest GPU peaks at %.1f GB, over %.1f GB (%.0f GB less the "
                 "%.0f%% headroom)",
                 g->candidate_peak_gb, g->capacity_gb * (1 - g->memory_headroom), g->capacity_gb,
                 100 * g->memory_headroom);
        return MT_GATE_MEMORY;
    }
    if (!g->label || (g->label & g->allowed_labels) != g->label) {
        snprintf(reason, n, "the label (%s) is not allowed by the contract",
                 g->label & MT_LABEL_BENCHMARK_ONLY ? "benchmark-only" : "none");
        return MT_GATE_LABEL;
    }
    if (!g->activation) {
        snprintf(reason, n, "%s",
                 g->activation_why ? g->activation_why : "activation not verified");
        return MT_GATE_ACTIVATION;
    }
    snprintf(reason, n,
             MT_GATE_ACCEPTED_PREFIX "%+.2f%% step time, p %.3g <= %.3g, CI [%+.2f%%, "
                                     "%+.2f%%]; loss tracks the control, memory within "
                                     "headroom, activation verified",
             100 * d->effect, d->p, d->alpha_look, 100 * d->ci_lo, 100 * d->ci_hi);
    return MT_GATE_ACCEPTED;
}

int mt_gate(const mt_gate_in *g, char *reason, size_t n)
{
    return mt_gate_judge(g, reason, n) == MT_GATE_ACCEPTED;
}
