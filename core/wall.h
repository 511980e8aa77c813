/*
 * wall.h - which wall limits a run: memory, communication, host/launch or
 * compute, from a profile's figures and the run's outcome.
 *
 * The rule (documented in core/CONTRACT.md, `profile` group):
 *   memory         the run ran out of memory, fits only with full recompute,
 *                  or its hottest GPU keeps less free memory than the gate's
 *                  headroom;
 *   communication  exposed communication / window > profile.comm_share;
 *   host           (idle - explained pipeline bubble) / window >
 *                  profile.host_share, with at least profile.host_min_gaps
 *                  idle gaps longer than profile.gap_us per device;
 *   compute        otherwise.
 * Each wall gets a ratio, its figure over its threshold (compute is fixed at
 * 1: it wins when no other wall crosses its threshold; fewer host gaps than
 * the minimum scale the host ratio down in proportion; an OOM is infinite).
 * The wall is the largest ratio, the runner-up the second, and the
 * confidence 1 - runner-up / wall, in [0, 1]: 0 is a tie, 1 certain.
 */
#ifndef MT_WALL_H
#define MT_WALL_H

#include "contract.h"

#include <stddef.h>
#include <stdint.h>

enum { MT_WALL_IDX_MEMORY, MT_WALL_IDX_COMM, MT_WALL_IDX_HOST, MT_WALL_IDX_COMPUTE, MT_WALL_N };

typedef struct mt_wall_input {
    int64_t window_ns;       /* summed over the devices looked at          */
    int64_t exposed_comm_ns; /* summed likewise                            */
    int64_t idle_ns;         /* summed likewise                            */
    double bubble_share;     /* share of the window the pipeline explains  */
    double gaps_per_device;  /* idle gaps above the gap threshold          */
    int oom;                 /* the run ran out of memory                  */
    int full_recompute_only; /* fits only with full recompute              */
    double headroom;         /* free share of the hottest GPU, < 0 unknown */
    double headroom_gate;    /* the contract's gates.memory_headroom       */
} mt_wall_input;

typedef struct mt_wall_verdict {
    int wall, runner_up;     /* MT_WALL_IDX_*                               */
    double confidence;
    double ratio[MT_WALL_N];
    double exposed_share, idle_share, idle_net_share;
    char reason[256];
} mt_wall_verdict;

/* Classifies in under rules (NULL: the contract defaults). */
void mt_wall_classify(const mt_wall_input *in, const mt_profile_rules *rules, mt_wall_verdict *v);

/* "memory", "communication", "host", "compute"; "?" otherwise. */
const char *mt_wall_name(int wall);
/* The plugin ABI's wall bit (MT_WALL_*) of a wall index. */
unsigned mt_wall_bit(int wall);

/* Share of a step a 1F1B pipeline leaves idle: (pp-1) / (vpp*m + pp-1) for
 * pp stages, vpp virtual stages and m microbatches; 0 without a pipeline. */
double mt_wall_bubble_share(int pp, int vpp, int microbatches);

/* The contract's defaults. */
void mt_wall_default_rules(mt_profile_rules *r);

#endif
