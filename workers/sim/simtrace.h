/*
 * simtrace.h - the profiled run's trace: what torch.profiler (Kineto) writes
 * for rank 0 with --profile --use-pytorch-profiler --tensorboard-dir DIR,
 * for iterations [profile_step_start, profile_step_end): Chrome trace JSON
 * with GPU kernels on compute and communication streams and the host's
 * launch calls, laid out from the cost model's breakdown of the step.
 */
#ifndef MT_SIMTRACE_H
#define MT_SIMTRACE_H

#include "sim.h"

#include <stddef.h>

typedef struct sim_trace sim_trace;

/* Streams (Kineto "tid" of device events). */
enum { SIM_STREAM_COMPUTE = 7, SIM_STREAM_EP = 20, SIM_STREAM_TP = 21, SIM_STREAM_CP = 22,
       SIM_STREAM_DP = 24, SIM_STREAM_MEMCPY = 30 };

/* True when the run asks for a PyTorch-profiler trace. */
int sim_trace_wanted(const sim_cfg *c);
/* True when iteration it is inside the profiled window. */
int sim_trace_in_window(const sim_cfg *c, int it);

/* NULL when no trace is wanted (or out of memory). */
sim_trace *sim_trace_open(const sim_cfg *c, const sim_breakdown *b);
/* One profiled iteration that started at start_s (simulated clock) and took
 * dur_s.  The timeline is scaled to dur_s. */
/* Lays out step it.  Steps up to and including the CUDA graph capture step
 * (warm-up + 1) run eagerly: every kernel is launched on its own; graphs
 * are replayed (one cudaGraphLaunch per captured segment) after it. */
void sim_trace_step(sim_trace *t, int it, double start_s, double dur_s);
/* Writes DIR/trace_rank0.json (creating DIR) and frees t.  1 written (path
 * set), 0 nothing profiled (no file), -1 error (err set). */
int sim_trace_close(sim_trace *t, char *path, size_t n, char *err, size_t errlen);
/* Frees t without writing anything (the run died: the profiler never
 * flushed its trace). */
void sim_trace_discard(sim_trace *t);

#endif
