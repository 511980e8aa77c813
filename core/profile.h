/*
 * profile.h - one profiled run's figures, as `moetune profile` and the
 * tuning engine see them: the trace's per-device metrics over a window of
 * steps, their minimum and maximum across ranks, the wall (wall.h) and the
 * activation evidence.  Two profiles print side by side with deltas.
 */
#ifndef MT_PROFILE_H
#define MT_PROFILE_H

#include "trace.h"
#include "wall.h"

#include <stdio.h>

typedef struct mt_profile_opts {
    int device;                 /* -1: every device of the trace            */
    int has_steps;              /* window = steps [first, last]             */
    int first, last;
    double bubble_share;        /* share of the window the pipeline explains */
    mt_profile_rules rules;     /* thresholds and gap length                 */
    /* the run's memory facts, for the memory wall */
    int oom, full_recompute_only;
    double headroom, headroom_gate; /* headroom < 0: unknown */
} mt_profile_opts;

/* Defaults: every device, the whole trace, the contract's default rules,
 * memory unknown. */
void mt_profile_opts_init(mt_profile_opts *o);

typedef struct mt_profile_span {
    int64_t min, max;
    int min_dev, max_dev;
} mt_profile_span;

typedef struct mt_profile {
    char *label;
    size_t ndev;
    mt_trace_metrics *dev;     /* per device, ascending ids */
    int has_steps, first, last;
    /* across the devices looked at */
    mt_profile_span comm, exposed, hidden, idle, active, dispatch, combine;
    int64_t window_ns, exposed_ns, hidden_ns, comm_ns, compute_ns, idle_ns; /* sums */
    double bubble_share;
    mt_wall_verdict wall;
    mt_kv *evidence;
    char **names;              /* the top kernels' names, copied: the profile outlives its trace */
    size_t nnames;
} mt_profile;

/* Builds p from t.  0, or a negative error with an entry in d (a device
 * without kernels, steps the trace does not mark, out of memory). */
int mt_profile_build(const mt_trace *t, const char *label, const mt_profile_opts *o,
                     mt_profile *p, mt_diag *d);
void mt_profile_clear(mt_profile *p);

/* Text or one JSON object. */
void mt_profile_print(const mt_profile *p, FILE *out, int json);
/* a and b side by side with b - a; text or JSON. */
void mt_profile_compare(const mt_profile *a, const mt_profile *b, FILE *out, int json);

#endif
