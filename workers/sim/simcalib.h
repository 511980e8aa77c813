/*
 * simcalib.h - the published points the sim is calibrated against
 * (shared/facts/calibration.md), the table that compares them, and the fit.
 */
#ifndef MT_SIMCALIB_H
#define MT_SIMCALIB_H

#include "sim.h"

#include <stdio.h>

enum sim_metric {
    SIM_M_TFLOPS, /* model TFLOP/s/GPU */
    SIM_M_STEP_S, /* seconds per step */
    SIM_M_RATIO,  /* step time relative to the point's reference config */
    SIM_M_PEAK_GB /* hottest GPU's peak memory, GB (1e9) */
};

typedef struct sim_point {
    const char *id;   /* "A3" */
    const char *what; /* one line */
    enum sim_metric metric;
    double published;
    int fitted;                  /* SIM_FITTED, SIM_PREDICTED or SIM_SHOWN */
    const char *const *sets;     /* name=value settings over the base */
    const char *const *ref_sets; /* SIM_M_RATIO: the reference config */
    const char *why;             /* SIM_SHOWN: why the point is no target */
} sim_point;

enum {
    SIM_PREDICTED = 0, /* judged at 20%, never used by the fit */
    SIM_FITTED = 1,    /* the fit uses it; judged at 10% (at most half the points) */
    SIM_SHOWN = 2      /* printed with its error and the reason it is no target */
};

/* The points, NULL-id terminated. */
const sim_point *sim_points(void);
/* Simulated value of a point (noise-free); NAN when it cannot be evaluated. */
double sim_point_value(const sim_point *p);
/* Prints the table: point, published, simulated, error, fitted/predicted.
 * Returns the number of points outside tolerance (10% fitted, 20% predicted). */
int sim_calibration_table(FILE *out);
/* Fills c from name=value settings (as the points are written). */
int sim_cfg_from_sets(const char *const *sets, sim_cfg *c);
/* Checks the qualitative landscape of calibration.md; prints each check and
 * returns how many fail. */
int sim_landscape_check(FILE *out);
/* Refits the fitted constants on the fitted points (coordinate descent on the
 * squared log error); prints the new values. */
void sim_calibration_fit(FILE *out, int rounds);
/* The fit without the fitted points named in leave_out (NULL-terminated
 * ids): the constants are refitted in place and the final loss returned.
 * Callers save and restore K (the held-out check does). */
double sim_calibration_refit(const char *const *leave_out, int rounds);

#endif
