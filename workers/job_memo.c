/*
 * job_memo.c - a job's memo and its JSON (see job_memo.h).
 */
#include "job_memo.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void mt_job_memo_init(mt_job_memo *m)
{
    memset(m, 0, sizeof *m);
    m->outcome = m->evidence = "";
    m->ms = m->tflops = m->loss = m->peak_gb = m->peak_rank = m->wall_s = NAN;
    m->loss_finite = m->skipped = m->nan = NAN;
    m->run_id = -1;
    m->wall.window_s = NAN;
}

/* A number, or null when it is not finite. */
static void num_or_null(cJSON *o, const char *k, double v)
{
    if (isfinite(v))
        cJSON_AddNumberToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

cJSON *mt_job_memo_wall_to_json(const mt_job_memo_wall *w)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "wall", w->wall ? w->wall : "");
    cJSON_AddStringToObject(o, "runner_up", w->runner_up ? w->runner_up : "");
    cJSON_AddNumberToObject(o, "confidence", w->confidence);
    cJSON_AddStringToObject(o, "reason", w->reason ? w->reason : "");
    cJSON_AddNumberToObject(o, "compute", w->compute);
    cJSON_AddNumberToObject(o, "exposed_comm", w->exposed_comm);
    cJSON_AddNumberToObject(o, "hidden_comm", w->hidden_comm);
    cJSON_AddNumberToObject(o, "idle", w->idle);
    cJSON_AddNumberToObject(o, "bubble", w->bubble);
    if (w->has_steps) {
        cJSON_AddNumberToObject(o, "first", w->first);
        cJSON_AddNumberToObject(o, "last", w->last);
    }
    num_or_null(o, "window_s", w->window_s);
    return o;
}

char *mt_job_memo_to_json(const mt_job_memo *m)
{
    cJSON *o = cJSON_CreateObject();
    char *text;
    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "outcome", m->outcome ? m->outcome : "");
    cJSON_AddStringToObject(o, "evidence", m->evidence ? m->evidence : "");
    if (m->measured) {
        num_or_null(o, "ms", m->ms);
        num_or_null(o, "tflops", m->tflops);
        num_or_null(o, "loss", m->loss);
        cJSON_AddNumberToObject(o, "loss_finite", m->loss_finite);
        cJSON_AddNumberToObject(o, "skipped", m->skipped);
        cJSON_AddNumberToObject(o, "nan", m->nan);
        num_or_null(o, "peak_gb", m->peak_gb);
    }
    if (isfinite(m->peak_rank))
        cJSON_AddNumberToObject(o, "peak_rank", m->peak_rank);
    cJSON_AddNumberToObject(o, "gpu_hours", m->gpu_hours);
    if (isfinite(m->wall_s))
        cJSON_AddNumberToObject(o, "wall_s", m->wall_s);
    cJSON_AddNumberToObject(o, "run_id", m->run_id);
    if (cJSON_IsObject(m->fingerprint))
        cJSON_AddItemToObject(o, "fingerprint", cJSON_Duplicate(m->fingerprint, 1));
    cJSON_AddItemToObject(o, "verdicts", m->verdicts ? cJSON_Duplicate(m->verdicts, 1)
                                                     : cJSON_CreateObject());
    if (m->trace)
        cJSON_AddItemToObject(o, "trace", cJSON_Duplicate(m->trace, 1));
    if (m->has_window) {
        cJSON *w = cJSON_CreateObject();
        cJSON_AddNumberToObject(w, "first", m->window_first);
        cJSON_AddNumberToObject(w, "last", m->window_last);
        cJSON_AddNumberToObject(w, "n", m->window_n);
        cJSON_AddItemToObject(o, "window", w);
    }
    if (m->has_wall)
        cJSON_AddItemToObject(o, "wall", mt_job_memo_wall_to_json(&m->wall));
    text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(x) ? x->valuestring : "";
}

static const cJSON *obj(const cJSON *o, const char *k)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsObject(x) ? x : NULL;
}

const char *mt_job_memo_verdict(const mt_job_memo *m, const char *knob, const char **evidence)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(m->verdicts, knob);
    if (evidence)
        *evidence = v ? str(v, "evidence") : "";
    return v ? str(v, "verdict") : NULL;
}

void mt_job_memo_from_json(const cJSON *o, mt_job_memo *m)
{
    const cJSON *w;
    mt_job_memo_init(m);
    m->outcome = str(o, "outcome");
    m->evidence = str(o, "evidence");
    m->measured = cJSON_GetObjectItemCaseSensitive(o, "ms") != NULL;
    m->ms = num(o, "ms");
    m->tflops = num(o, "tflops");
    m->loss = num(o, "loss");
    m->loss_finite = num(o, "loss_finite");
    m->skipped = num(o, "skipped");
    m->nan = num(o, "nan");
    m->peak_gb = num(o, "peak_gb");
    m->peak_rank = num(o, "peak_rank");
    m->gpu_hours = num(o, "gpu_hours");
    m->wall_s = num(o, "wall_s");
    m->run_id = num(o, "run_id");
    m->fingerprint = obj(o, "fingerprint");
    m->verdicts = obj(o, "verdicts");
    m->trace = obj(o, "trace");
    if ((w = obj(o, "window"))) {
        m->has_window = 1;
        m->window_first = num(w, "first");
        m->window_last = num(w, "last");
        m->window_n = num(w, "n");
    }
    if ((w = obj(o, "wall"))) {
        m->has_wall = 1;
        m->wall.wall = str(w, "wall");
        m->wall.runner_up = str(w, "runner_up");
        m->wall.reason = str(w, "reason");
        m->wall.confidence = num(w, "confidence");
        m->wall.compute = num(w, "compute");
        m->wall.exposed_comm = num(w, "exposed_comm");
        m->wall.hidden_comm = num(w, "hidden_comm");
        m->wall.idle = num(w, "idle");
        m->wall.bubble = num(w, "bubble");
        m->wall.has_steps = cJSON_GetObjectItemCaseSensitive(w, "first") != NULL;
        m->wall.first = num(w, "first");
        m->wall.last = num(w, "last");
        m->wall.window_s = num(w, "window_s");
    }
}

char *mt_job_memo_failed(const char *outcome, const char *evidence)
{
    mt_job_memo j;
    mt_job_memo_init(&j);
    j.outcome = outcome;
    j.evidence = evidence ? evidence : "";
    j.gpu_hours = 0;
    return mt_job_memo_to_json(&j);
}
