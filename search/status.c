/*
 * status.c - DIR/status.json, what `moetune status` reads while a tune or a
 * bisection runs: written whole to a temporary file and renamed over it.
 */
#include "status.h"

#include "clock.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* status.json is written by a tune or a bisection and, once, by
 * mt_tune_mark_stopped from another thread: whoever writes holds this, so a
 * "stopped" is never overwritten by a rename still in flight. */
static pthread_mutex_t status_mu = PTHREAD_MUTEX_INITIALIZER;

/* Writes o as DIR/status.json (a temporary file renamed over it). */
static void status_put(const char *dir, const char *tmpname, cJSON *o)
{
    char path[4096], tmp[4200];
    char *text = cJSON_Print(o);
    FILE *f;
    snprintf(path, sizeof path, "%s/status.json", dir);
    snprintf(tmp, sizeof tmp, "%s/%s", dir, tmpname);
    if (text && (f = fopen(tmp, "w"))) {
        fputs(text, f);
        fputc('\n', f);
        if (fclose(f) == 0)
            rename(tmp, path);
    }
    free(text);
}

int mt_tune_mark_stopped(const char *dir, const char *signal, const char *resume, char *phase,
                         size_t phase_n, char *last, size_t last_n)
{
    char path[4096], buf[65536];
    FILE *f;
    size_t n = 0;
    cJSON *o = NULL;
    const cJSON *x;
    pthread_mutex_lock(&status_mu); /* kept: the process ends after this */
    snprintf(path, sizeof path, "%s/status.json", dir);
    if ((f = fopen(path, "r"))) {
        n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
    }
    buf[n] = '\0';
    if (!(o = cJSON_Parse(buf)) || !cJSON_IsObject(o)) {
        cJSON_Delete(o);
        o = cJSON_CreateObject();
    }
    if (!o)
        return -ENOMEM;
    x = cJSON_GetObjectItemCaseSensitive(o, "phase");
    snprintf(phase, phase_n, "%s", cJSON_IsString(x) ? x->valuestring : "start");
    x = cJSON_GetObjectItemCaseSensitive(o, "live");
    if (!cJSON_IsString(x) || !x->valuestring[0])
        x = cJSON_GetObjectItemCaseSensitive(o, "last");
    snprintf(last, last_n, "%s", cJSON_IsString(x) ? x->valuestring : "");
    cJSON_DeleteItemFromObjectCaseSensitive(o, "phase");
    cJSON_DeleteItemFromObjectCaseSensitive(o, "interrupted");
    cJSON_DeleteItemFromObjectCaseSensitive(o, "signal");
    cJSON_DeleteItemFromObjectCaseSensitive(o, "resume");
    cJSON_DeleteItemFromObjectCaseSensitive(o, "eta_s");
    cJSON_DeleteItemFromObjectCaseSensitive(o, "pid");
    cJSON_DeleteItemFromObjectCaseSensitive(o, "updated");
    cJSON_AddStringToObject(o, "phase", "stopped");
    cJSON_AddStringToObject(o, "interrupted", phase);
    cJSON_AddStringToObject(o, "signal", signal);
    cJSON_AddStringToObject(o, "resume", resume);
    cJSON_AddNumberToObject(o, "pid", (double)getpid());
    cJSON_AddNumberToObject(o, "updated", mt_clock_wall_s());
    status_put(dir, "status.json.stop", o);
    cJSON_Delete(o);
    return 0;
}

cJSON *mt_status_spent(const char *phase, const char *line, const mt_exec *x, double budget_gh,
                           int budget_runs)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "phase", phase ? phase : "start");
    cJSON_AddStringToObject(o, "last", line);
    if (mt_exec_live(x)[0])
        cJSON_AddStringToObject(o, "live", mt_exec_live(x));
    cJSON_AddNumberToObject(o, "pid", (double)getpid());
    cJSON_AddNumberToObject(o, "updated", mt_clock_wall_s());
    cJSON_AddNumberToObject(o, "gpu_hours", mt_exec_gpu_hours(x));
    cJSON_AddNumberToObject(o, "gpu_hours_budget", budget_gh);
    cJSON_AddNumberToObject(o, "runs", mt_exec_runs(x));
    cJSON_AddNumberToObject(o, "runs_budget", budget_runs);
    return o;
}

void mt_status_write(const char *dir, cJSON *o)
{
    pthread_mutex_lock(&status_mu);
    status_put(dir, "status.json.tmp", o);
    pthread_mutex_unlock(&status_mu);
    cJSON_Delete(o);
}

void mt_status_exec(const char *dir, const char *phase, const mt_exec *x)
{
    mt_status_write(dir, mt_status_spent(phase, mt_exec_live(x), x, 0, 0));
}

