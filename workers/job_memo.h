/*
 * job_memo.h - a job's memo: the summary of one measurement that the engine
 * memoizes in the store (`memo` table, key job/KIND/ID/REP) and reads back.
 *
 * Workers write it (workers/measure.c for a run, a failed job's memo for
 * one that produced no run; search/model.c for the model executor) and
 * search/ reads it, all through this struct: mt_job_memo_to_json and
 * mt_job_memo_from_json are the only places that know the JSON keys.
 *
 * The JSON (one object, keys in this order, stored unformatted; stores
 * written before this header read back the same):
 *   outcome      string  ok | oom | nan | hang | timeout | crash | infra |
 *                        launch_error | skipped (mt_outcome_name); a
 *                        bisection's prepare step: skip | prepare_failed
 *   evidence     string  the line that decided it
 *   -- when measured (a run, or the model executor's ok job):
 *   ms           number|null  median step time over the declared window
 *   tflops       number|null  median TFLOP/s per GPU over it
 *   loss         number|null  the last iteration's loss
 *   loss_finite  number  1: every loss finite
 *   skipped      number  skipped iterations
 *   nan          number  NaN iterations
 *   peak_gb      number|null  the hottest GPU's peak, GB
 *   -- always from here:
 *   peak_rank    number  its rank (absent: unknown)
 *   gpu_hours    number  what the budget is charged
 *   wall_s       number  the run's wall time, s (absent: no process)
 *   run_id       number  the store's run row; -1: no run stored
 *   fingerprint  object  what the run ran on: hosts, GPUs, driver, CUDA,
 *                        NCCL, container, stack (absent: unknown)
 *   verdicts     object  {knob: {verdict: applied | not_applied | unknown,
 *                        evidence}}, each plugin's activation verdicts
 *   trace        object  {trace.*: string}, what the trace analysis saw
 *                        (absent: not a run of measure.c)
 *   window       object  {first, last, n}: the iterations whose step times
 *                        the median ms summarizes (absent: none)
 *   wall         object  a profiled run's wall: {wall, runner_up,
 *                        confidence, reason, compute, exposed_comm,
 *                        hidden_comm, idle, bubble, first, last (the
 *                        profiled steps; absent: a modelled step),
 *                        window_s (null: unknown)} (absent: not profiled)
 */
#ifndef MT_JOB_MEMO_H
#define MT_JOB_MEMO_H

#include <cjson/cJSON.h>
#include <stdint.h>

typedef struct mt_job_memo_wall {
    const char *wall, *runner_up, *reason;
    double confidence, compute, exposed_comm, hidden_comm, idle, bubble;
    int has_steps;   /* first and last are the profiled steps */
    double first, last;
    double window_s; /* NAN: unknown (null) */
} mt_job_memo_wall;

/* Every pointer is borrowed: a writer's point at its own data for the call,
 * mt_job_memo_from_json's into the object it read (valid while it lives). */
typedef struct mt_job_memo {
    const char *outcome, *evidence;
    int measured;                  /* ms .. peak_gb are present */
    double ms, tflops, loss;       /* NAN: null (or absent) */
    double loss_finite, skipped, nan;
    double peak_gb;                /* NAN: null (or absent) */
    double peak_rank;              /* NAN: absent */
    double gpu_hours;
    double wall_s;                 /* NAN: absent */
    double run_id;                 /* -1: no run */
    const cJSON *fingerprint;      /* NULL: absent */
    const cJSON *verdicts;         /* NULL: an empty object */
    const cJSON *trace;            /* NULL: absent */
    int has_window;
    double window_first, window_last, window_n;
    int has_wall;
    mt_job_memo_wall wall;
} mt_job_memo;

/* An empty memo: no figures (NAN), run_id -1, nothing present. */
void mt_job_memo_init(mt_job_memo *m);

/* The memo as its JSON text (the layout above; caller frees); NULL when out
 * of memory. */
char *mt_job_memo_to_json(const mt_job_memo *m);

/* A memo's wall as the JSON object the memo holds (the "wall" layout
 * above); NULL when out of memory. */
cJSON *mt_job_memo_wall_to_json(const mt_job_memo_wall *w);

/* The memo of a job that produced no run (it could not be set up, was
 * refused, or its process died): outcome and evidence alone, no GPU-hours,
 * no run.  Caller frees; NULL on OOM. */
char *mt_job_memo_failed(const char *outcome, const char *evidence);

/* Reads a memo object (as stored, or as received from a worker) into m:
 * an absent or mistyped number reads NAN (run_id too), a string "", an
 * object NULL; measured, has_window, has_wall and wall.has_steps say which
 * groups were there. */
void mt_job_memo_from_json(const cJSON *o, mt_job_memo *m);

/* The activation verdict m holds for knob ("applied" | "not_applied" |
 * "unknown"; "" when its entry has none), or NULL when it holds no entry
 * for knob; *evidence (may be NULL) gets the entry's evidence ("" when
 * none).  Borrowed from m's verdicts. */
const char *mt_job_memo_verdict(const mt_job_memo *m, const char *knob, const char **evidence);

#endif
