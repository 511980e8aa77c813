/*
 * status.h - DIR/status.json, the progress a tune or a bisection shows
 * `moetune status` (its fields: README "Watching a tune").  Every write is
 * a whole file renamed over the last one, under one lock per process.
 */
#ifndef MT_STATUS_H
#define MT_STATUS_H

#include "exec.h"

#include <cjson/cJSON.h>
#include <stddef.h>

/* status.json's first fields: phase (NULL: "start"), last (the progress
 * line), live (x's live line, when it has one), pid, updated, and what x's
 * jobs spent against the budgets (0: none).  The caller adds its own and
 * hands it to mt_status_write. */
cJSON *mt_status_spent(const char *phase, const char *line, const mt_exec *x, double budget_gh,
                       int budget_runs);

/* Writes o (taken) as DIR/status.json. */
void mt_status_write(const char *dir, cJSON *o);

/* A bisection's DIR/status.json as the ZeroMQ executor waits: phase, x's
 * live line (last and live), pid, what x's jobs spent, no budget. */
void mt_status_exec(const char *dir, const char *phase, const mt_exec *x);

/* A tune ended by a signal (SIGTERM, SIGINT): DIR/status.json gets phase
 * "stopped", with "interrupted" (the phase it was in), "signal" (its name),
 * "resume" (the command that continues it) and this process's pid; nothing
 * writes status.json again in this process (call it last, then exit).
 * phase and last get the interrupted phase and the last progress line.
 * Safe from another thread than the tune's (not from a signal handler).
 * 0, or -ENOMEM. */
int mt_tune_mark_stopped(const char *dir, const char *signal, const char *resume, char *phase,
                         size_t phase_n, char *last, size_t last_n);

#endif
