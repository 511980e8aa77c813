/*
 * simlog.h - everything the sim prints, in Megatron-LM's (and Megatron-
 * Bridge's) words: the arguments dump, the world-size line, iteration and
 * memory lines, CUDA graph capture lines, fallback warnings, validation
 * lines, the framework's failures (AssertionError, OutOfMemoryError, NaN,
 * NCCL errors) and the sim's own clearly marked "[sim] ..." lines.
 *
 * Timestamps come from the simulated clock: seconds since the run's fixed
 * epoch, 2026-01-01 00:00:00 UTC.  Every line is flushed as it is written,
 * so a parent reading a pipe sees it at once.
 */
#ifndef MT_SIMLOG_H
#define MT_SIMLOG_H

#include "sim.h"
#include "simargs.h"

#include <stdint.h>
#include <stdio.h>

/* The simulated clock's epoch: 2026-01-01 00:00:00 UTC. */
#define SIM_EPOCH 1767225600LL

/* "2026-01-01 00:03:00.123456" (frac) or "2026-01-01 00:03:00". */
void simlog_time(char *buf, size_t n, double clock_s, int frac);

/* ---- the training curve: a function of the seed and the iteration only ---- */

/* lm loss after iteration it (1-based): ~ln(vocab) falling towards ~2, with
 * small seeded noise.  Performance knobs do not enter; forced load balancing
 * (benchmark-only) shifts it slightly. */
double simlog_lm_loss(const sim_cfg *c, int it);
double simlog_lb_loss(const sim_cfg *c, int it);
double simlog_grad_norm(const sim_cfg *c, int it);
/* Linear warm-up over the first 10% of train_iters, cosine decay to 10%. */
double simlog_lr(const sim_cfg *c, int it);

/* ---- start-up ------------------------------------------------------------ */

void simlog_world(FILE *f, const sim_cfg *c);
void simlog_args(FILE *f, const sim_cfg *c, const sim_opts *o);
void simlog_sim_info(FILE *f, const sim_cfg *c, const sim_opts *o);
void simlog_fallback(FILE *f, const sim_cfg *c, const sim_breakdown *b);
void simlog_datetime(FILE *f, const char *what, double clock_s);
/* The framework's rejection of an illegal configuration (stderr). */
void simlog_assertion(FILE *f, const sim_cfg *c, const char *rule, const char *msg);

/* ---- training ---------------------------------------------------------------- */

typedef struct sim_iter_log {
    int iteration;
    double clock_s;     /* simulated time at the log point */
    double elapsed_s;   /* mean seconds per iteration over the interval */
    double tflops;      /* model TFLOP/s/GPU over the interval */
    double lr;
    double lm_loss, lb_loss; /* means over advanced iterations; NAN allowed */
    int advanced;       /* iterations in the interval that updated the model */
    double loss_scale;
    double grad_norm;   /* < 0: none (all skipped) */
    int skipped, nan;   /* counts within the interval, as Megatron resets them */
} sim_iter_log;

void simlog_iteration(FILE *f, const sim_cfg *c, const sim_iter_log *l);
/* Theoretical memory footprint line (rank 0, first logged iteration). */
void simlog_theoretical(FILE *f, const sim_cfg *c);
/* Memory lines of data-parallel rank 0 of every (PP, CP, TP) group; with
 * only_rank >= 0, that rank's line alone (when it is such a rank). */
void simlog_memory(FILE *f, const sim_cfg *c, int iteration, int only_rank);
/* 1 when rank is data-parallel rank 0 of its (PP, CP, TP) position. */
int simlog_is_dp0(const sim_cfg *c, int rank);
/* CUDA graph capture lines at the capture step. */
void simlog_capture(FILE *f, const sim_cfg *c, double capture_s);
void simlog_validation(FILE *f, const char *where, double loss);

/* ---- failures (stderr unless noted) ----------------------------------------- */

void simlog_oom(FILE *f, const sim_cfg *c, int rank, double max_reserved);
void simlog_nan(FILE *f, const sim_cfg *c, int rank, int iteration);
/* The failing rank's NCCL error (err) and another rank's watchdog line (out). */
void simlog_nccl(FILE *err, FILE *out, const sim_cfg *c, int rank, double clock_s);
void simlog_crash(FILE *f, const sim_cfg *c, int rank);

/* ---- the sim's own marked lines ------------------------------------------------- */

/* "[sim] per-GPU peak memory (MiB): max <x> on rank <r>", and the side file
 * when c->memory_file is set (one line per GPU).  oom_cap > 0 caps every
 * GPU at that many bytes (the run died at the limit).  0, or -1 when the
 * side file could not be written (reported on err). */
int simlog_peak_memory(FILE *f, FILE *err, const sim_cfg *c, double oom_cap);
/* One rank's own peak (one process per rank): "[sim] GPU peak memory
 * (MiB): <x> on rank <r> (host <h>, GPU <g>)", and its line appended to
 * c->memory_file with one write (O_APPEND: the ranks of a node share the
 * file).  oom_cap as above.  0, or -1 (reported on err). */
int simlog_rank_peak(FILE *f, FILE *err, const sim_cfg *c, int rank, const char *host, int gpu,
                     double oom_cap);
void simlog_wall(FILE *f, const sim_cfg *c, double startup_s, int steps, double steps_s);

#endif
