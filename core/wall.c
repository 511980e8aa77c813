/*
 * wall.c - the wall classification rule (see wall.h).
 */
#include "wall.h"

#include <math.h>
#include <moetune/plugin.h>
#include <stdio.h>

void mt_wall_default_rules(mt_profile_rules *r)
{
    r->comm_share = 0.2;
    r->host_share = 0.1;
    r->host_min_gaps = 20;
    r->gap_us = 20;
}

const char *mt_wall_name(int wall)
{
    static const char *const names[] = {"memory", "communication", "host", "compute"};
    return wall >= 0 && wall < MT_WALL_N ? names[wall] : "?";
}

unsigned mt_wall_bit(int wall)
{
    static const unsigned bits[] = {MT_WALL_MEMORY, MT_WALL_COMM, MT_WALL_HOST, MT_WALL_COMPUTE};
    return wall >= 0 && wall < MT_WALL_N ? bits[wall] : 0;
}

double mt_wall_bubble_share(int pp, int vpp, int microbatches)
{
    double idle;
    if (pp <= 1 || microbatches <= 0)
        return 0;
    if (vpp < 1)
        vpp = 1;
    idle = (double)(pp - 1);
    return idle / ((double)vpp * microbatches + idle);
}

void mt_wall_classify(const mt_wall_input *in, const mt_profile_rules *rules, mt_wall_verdict *v)
{
    mt_profile_rules def;
    double w = in->window_ns > 0 ? (double)in->window_ns : 0, *r = v->ratio, top, second;
    int i;
    if (!rules) {
        mt_wall_default_rules(&def);
        rules = &def;
    }
    v->exposed_share = w > 0 ? (double)in->exposed_comm_ns / w : 0;
    v->idle_share = w > 0 ? (double)in->idle_ns / w : 0;
    v->idle_net_share = v->idle_share - (in->bubble_share > 0 ? in->bubble_share : 0);
    if (v->idle_net_share < 0)
        v->idle_net_share = 0;

    r[MT_WALL_IDX_COMPUTE] = 1.0;
    r[MT_WALL_IDX_COMM] = v->exposed_share / rules->comm_share;
    r[MT_WALL_IDX_HOST] = v->idle_net_share / rules->host_share;
    if (rules->host_min_gaps > 0 && in->gaps_per_device < rules->host_min_gaps)
        r[MT_WALL_IDX_HOST] *= in->gaps_per_device / rules->host_min_gaps;
    if (in->oom)
        r[MT_WALL_IDX_MEMORY] = INFINITY;
    else if (in->full_recompute_only)
        r[MT_WALL_IDX_MEMORY] = 2.0;
    else if (in->headroom >= 0 && in->headroom_gate > 0)
        r[MT_WALL_IDX_MEMORY] =
            in->headroom > 0 ? in->headroom_gate / in->headroom : INFINITY;
    else
        r[MT_WALL_IDX_MEMORY] = 0;

    /* ties go to the earlier wall: memory, communication, host, compute */
    v->wall = 0;
    for (i = 1; i < MT_WALL_N; i++)
        if (r[i] > r[v->wall])
            v->wall = i;
    v->runner_up = v->wall == 0 ? 1 : 0;
    for (i = 0; i < MT_WALL_N; i++)
        if (i != v->wall && r[i] > r[v->runner_up])
            v->runner_up = i;
    top = r[v->wall];
    second = r[v->runner_up];
    v->confidence = isinf(top) ? (isinf(second) ? 0 : 1) : (top > 0 ? 1 - second / top : 0);

    switch (v->wall) {
    case MT_WALL_IDX_MEMORY:
        if (in->oom)
            snprintf(v->reason, sizeof v->reason, "the run ran out of memory");
        else if (in->full_recompute_only)
            snprintf(v->reason, sizeof v->reason, "it fits only with full recompute");
        else
            snprintf(v->reason, sizeof v->reason,
                     "the hottest GPU keeps %.1f%% free, under the %.1f%% headroom gate",
                     100 * in->headroom, 100 * in->headroom_gate);
        break;
    case MT_WALL_IDX_COMM:
        snprintf(v->reason, sizeof v->reason,
                 "exposed communication is %.1f%% of the window (threshold %.1f%%)",
                 100 * v->exposed_share, 100 * rules->comm_share);
        break;
    case MT_WALL_IDX_HOST:
        snprintf(v->reason, sizeof v->reason,
                 "the GPU idles %.1f%% of the window beyond the %.1f%% pipeline bubble, in %.0f "
                 "gaps over %g us per device (threshold %.1f%% with %d gaps)",
                 100 * v->idle_net_share, 100 * in->bubble_share, in->gaps_per_device,
                 rules->gap_us, 100 * rules->host_share, rules->host_min_gaps);
        break;
    default:
        snprintf(v->reason, sizeof v->reason,
                 "no other wall crosses its threshold (exposed communication %.1f%%, net idle "
                 "%.1f%%)",
                 100 * v->exposed_share, 100 * v->idle_net_share);
    }
}
