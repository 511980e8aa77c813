/*
 * report_read.c - mt_report_write: reads bundle.json (schema:
 * search/BUNDLE.md) in full into a model, checking every field the views use
 * and naming its JSON path on any problem ("decisions[3].control.samples");
 * nothing is written unless the whole bundle reads.  Both views
 * (report_md.c, report_html.c) are then built in memory and each is written
 * to a temporary file in DIR that is renamed over the old one, so a reader
 * never sees half a report.
 */
#include "report.h"
#include "report_int.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_PROBLEMS 40
#define MAX_BUNDLE_BYTES (512L << 20)

/* The shares' keys in bundle.json, in share order (report_int.h). */
static const char *const share_keys[MT__NSHARES] = {"compute", "hidden_comm", "exposed_comm",
                                                "idle",    "bubble",      "other"};

/* ---- arena: everything the model holds, freed at once ----------------- */

typedef struct ablock {
    struct ablock *next;
    max_align_t data[];
} ablock;

typedef struct arena {
    ablock *head;
    int oom;
} arena;

static void *ar_alloc(arena *a, size_t n)
{
    ablock *b = calloc(1, sizeof *b + (n ? n : 1));
    if (!b) {
        a->oom = 1;
        return NULL;
    }
    b->next = a->head;
    a->head = b;
    return b->data;
}

static char *ar_strdup(arena *a, const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = ar_alloc(a, n);
    if (p)
        memcpy(p, s, n);
    return p;
}

/* Frees every block of a (the struct itself is the caller's). */
static void ar_clear(arena *a)
{
    while (a->head) {
        ablock *n = a->head->next;
        free(a->head);
        a->head = n;
    }
}

static void json_number_text(char *out, size_t n, double x)
{
    if (x == floor(x) && fabs(x) < 1e15) {
        snprintf(out, n, "%.0f", x);
        return;
    }
    snprintf(out, n, "%.15g", x);
    if (strtod(out, NULL) != x)
        snprintf(out, n, "%.17g", x);
}

/* ---- reading bundle.json ---------------------------------------------- */

enum { J_STR, J_NUM, J_INT, J_BOOL, J_OBJ, J_ARR, J_ANY };
#define J_NULL 0x100 /* null allowed */

typedef struct rd {
    const char *file;
    mt_diag *d;
    arena *ar;
    int problems;
} rd;

static void problem(rd *r, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void problem(rd *r, const char *path, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    if (++r->problems > MAX_PROBLEMS)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    mt_diag_add(r->d, r->file, 0, path && *path ? path : NULL, "%s", msg);
}

/* Paths longer than PATH_LEN end in "..." rather than overflow. */
static void path_fit(char *out, int n)
{
    if (n >= MT__PATH_LEN)
        memcpy(out + MT__PATH_LEN - 4, "...", 4);
}

static void path_key(char *out, const char *parent, const char *key)
{
    if (parent && *parent)
        path_fit(out, snprintf(out, MT__PATH_LEN, "%s.%s", parent, key));
    else
        path_fit(out, snprintf(out, MT__PATH_LEN, "%s", key));
}

static void path_idx(char *out, const char *parent, size_t i)
{
    path_fit(out, snprintf(out, MT__PATH_LEN, "%s[%zu]", parent, i));
}

static const char *want_name(int want)
{
    switch (want & 0xff) {
    case J_STR: return want & J_NULL ? "a string or null" : "a string";
    case J_NUM: return want & J_NULL ? "a number or null" : "a number";
    case J_INT: return want & J_NULL ? "an integer or null" : "an integer";
    case J_BOOL: return "true or false";
    case J_OBJ: return want & J_NULL ? "an object or null" : "an object";
    case J_ARR: return want & J_NULL ? "an array or null" : "an array";
    default: return "a value";
    }
}

static void found_name(char *out, size_t n, const cJSON *j)
{
    if (cJSON_IsNull(j))
        snprintf(out, n, "null");
    else if (cJSON_IsBool(j))
        snprintf(out, n, "%s", cJSON_IsTrue(j) ? "true" : "false");
    else if (cJSON_IsNumber(j))
        snprintf(out, n, "the number %g", j->valuedouble);
    else if (cJSON_IsString(j))
        snprintf(out, n, "a string");
    else if (cJSON_IsArray(j))
        snprintf(out, n, "an array");
    else if (cJSON_IsObject(j))
        snprintf(out, n, "an object");
    else
        snprintf(out, n, "an invalid value");
}

/* j checked against want; NULL when absent, an allowed null, or wrong (the
 * problem recorded under path). */
static const cJSON *check(rd *r, const cJSON *j, const char *path, int want)
{
    char found[64];
    int ok;
    if (!j) {
        problem(r, path, "missing; expected %s", want_name(want));
        return NULL;
    }
    if (cJSON_IsNull(j)) {
        if (!(want & J_NULL) && (want & 0xff) != J_ANY)
            problem(r, path, "is null; expected %s", want_name(want));
        return (want & 0xff) == J_ANY ? j : NULL;
    }
    switch (want & 0xff) {
    case J_STR: ok = cJSON_IsString(j) && j->valuestring; break;
    case J_NUM: ok = cJSON_IsNumber(j) && isfinite(j->valuedouble); break;
    case J_INT:
        ok = cJSON_IsNumber(j) && isfinite(j->valuedouble) &&
             j->valuedouble == floor(j->valuedouble) && fabs(j->valuedouble) < 1e15;
        break;
    case J_BOOL: ok = cJSON_IsBool(j); break;
    case J_OBJ: ok = cJSON_IsObject(j); break;
    case J_ARR: ok = cJSON_IsArray(j); break;
    default: ok = !cJSON_IsInvalid(j); break;
    }
    if (!ok) {
        found_name(found, sizeof found, j);
        problem(r, path, "expected %s, found %s", want_name(want), found);
        return NULL;
    }
    return j;
}

/* Member key of obj (whose path is parent); its path goes to path when
 * given.  obj NULL (already reported) yields NULL quietly. */
static const cJSON *get(rd *r, const cJSON *obj, const char *parent, const char *key, int want,
                        char *path)
{
    char local[MT__PATH_LEN];
    char *p = path ? path : local;
    path_key(p, parent, key);
    if (!obj)
        return NULL;
    return check(r, cJSON_GetObjectItemCaseSensitive(obj, key), p, want);
}

static const char *get_str(rd *r, const cJSON *obj, const char *parent, const char *key,
                           int nullable)
{
    const cJSON *j = get(r, obj, parent, key, J_STR | (nullable ? J_NULL : 0), NULL);
    return j ? j->valuestring : NULL;
}

static double get_num(rd *r, const cJSON *obj, const char *parent, const char *key, int want)
{
    const cJSON *j = get(r, obj, parent, key, want, NULL);
    return j ? j->valuedouble : NAN;
}

static int get_bool(rd *r, const cJSON *obj, const char *parent, const char *key)
{
    const cJSON *j = get(r, obj, parent, key, J_BOOL, NULL);
    return j ? cJSON_IsTrue(j) : 0;
}

static const char *get_enum(rd *r, const cJSON *obj, const char *parent, const char *key,
                            const char *const *allowed)
{
    char path[MT__PATH_LEN];
    mt__sb list = {0};
    const cJSON *j = get(r, obj, parent, key, J_STR, path);
    size_t i;
    if (!j)
        return NULL;
    for (i = 0; allowed[i]; i++)
        if (!strcmp(j->valuestring, allowed[i]))
            return allowed[i];
    for (i = 0; allowed[i]; i++)
        mt__sb_printf(&list, "%s\"%s\"", i ? ", " : "", allowed[i]);
    problem(r, path, "\"%.60s\" is not one of %s", j->valuestring, list.s ? list.s : "");
    mt__sb_clear(&list);
    return NULL;
}

/* Any JSON value as the text a reader sees: strings as they are, numbers as
 * written, null as "null", arrays and objects as compact JSON. */
static const char *value_text(rd *r, const cJSON *j)
{
    char num[64], *printed;
    const char *out;
    if (cJSON_IsString(j))
        return j->valuestring ? j->valuestring : "";
    if (cJSON_IsNumber(j)) {
        json_number_text(num, sizeof num, j->valuedouble);
        return ar_strdup(r->ar, num);
    }
    if (cJSON_IsBool(j))
        return cJSON_IsTrue(j) ? "true" : "false";
    if (cJSON_IsNull(j))
        return "null";
    printed = cJSON_PrintUnformatted(j);
    if (!printed) {
        r->ar->oom = 1;
        return "";
    }
    out = ar_strdup(r->ar, printed);
    cJSON_free(printed);
    return out ? out : "";
}

static const char *get_value(rd *r, const cJSON *obj, const char *parent, const char *key)
{
    const cJSON *j = get(r, obj, parent, key, J_ANY, NULL);
    return j ? value_text(r, j) : NULL;
}

static size_t array_len(const cJSON *a)
{
    int n = cJSON_GetArraySize(a);
    return n > 0 ? (size_t)n : 0;
}

static mt__vec get_vec(rd *r, const cJSON *obj, const char *parent, const char *key,
                       int elem_nullable)
{
    char path[MT__PATH_LEN], ep[MT__PATH_LEN];
    const cJSON *a = get(r, obj, parent, key, J_ARR, path), *e;
    mt__vec v = {NULL, 0};
    size_t i = 0;
    if (!a || !(v.v = ar_alloc(r->ar, array_len(a) * sizeof(double))))
        return v;
    cJSON_ArrayForEach(e, a)
    {
        const cJSON *c;
        path_idx(ep, path, i);
        c = check(r, e, ep, J_NUM | (elem_nullable ? J_NULL : 0));
        v.v[i++] = c ? c->valuedouble : NAN;
    }
    v.n = i;
    return v;
}

static mt__strs get_strs(rd *r, const cJSON *obj, const char *parent, const char *key)
{
    char path[MT__PATH_LEN], ep[MT__PATH_LEN];
    const cJSON *a = get(r, obj, parent, key, J_ARR, path), *e;
    mt__strs v = {NULL, 0};
    size_t i = 0;
    if (!a || !(v.v = ar_alloc(r->ar, array_len(a) * sizeof(char *))))
        return v;
    cJSON_ArrayForEach(e, a)
    {
        const cJSON *c;
        path_idx(ep, path, i);
        c = check(r, e, ep, J_STR);
        v.v[i++] = c ? c->valuestring : "";
    }
    v.n = i;
    return v;
}

static mt__map get_map(rd *r, const cJSON *obj, const char *parent, const char *key, int nullable)
{
    const cJSON *o = get(r, obj, parent, key, J_OBJ | (nullable ? J_NULL : 0), NULL), *e;
    mt__map m = {NULL, NULL, 0};
    size_t n, i = 0;
    if (!o)
        return m;
    n = array_len(o);
    m.key = ar_alloc(r->ar, n * sizeof(char *));
    m.val = ar_alloc(r->ar, n * sizeof(char *));
    if (!m.key || !m.val)
        return m;
    cJSON_ArrayForEach(e, o)
    {
        m.key[i] = e->string ? e->string : "";
        m.val[i++] = value_text(r, e);
    }
    m.n = i;
    return m;
}

const char *mt__map_get(const mt__map *m, const char *key)
{
    size_t i;
    for (i = 0; i < m->n; i++)
        if (!strcmp(m->key[i], key))
            return m->val[i];
    return NULL;
}

static mt__changes get_changes(rd *r, const cJSON *obj, const char *parent, const char *key)
{
    char path[MT__PATH_LEN], ep[MT__PATH_LEN];
    const cJSON *a = get(r, obj, parent, key, J_ARR, path), *e;
    mt__changes v = {NULL, 0};
    size_t i = 0;
    if (!a || !(v.v = ar_alloc(r->ar, array_len(a) * sizeof(mt__change))))
        return v;
    cJSON_ArrayForEach(e, a)
    {
        mt__change *c = &v.v[i];
        path_idx(ep, path, i++);
        if (!check(r, e, ep, J_OBJ))
            continue;
        c->knob = get_str(r, e, ep, "knob", 0);
        c->from = get_value(r, e, ep, "from");
        c->to = get_value(r, e, ep, "to");
    }
    v.n = i;
    return v;
}

/* [lo, hi] | null */
static int get_pair(rd *r, const cJSON *obj, const char *parent, const char *key, int want,
                    double out[2])
{
    char path[MT__PATH_LEN], ep[MT__PATH_LEN];
    const cJSON *a = get(r, obj, parent, key, J_ARR | J_NULL, path);
    int i;
    out[0] = out[1] = NAN;
    if (!a)
        return 0;
    if (cJSON_GetArraySize(a) != 2) {
        problem(r, path, "expected [lo, hi], found an array of %d", cJSON_GetArraySize(a));
        return 0;
    }
    for (i = 0; i < 2; i++) {
        const cJSON *c;
        path_idx(ep, path, (size_t)i);
        c = check(r, cJSON_GetArrayItem(a, i), ep, want);
        if (!c)
            return 0;
        out[i] = c->valuedouble;
    }
    return 1;
}

static void read_arm(rd *r, const cJSON *obj, const char *parent, const char *key, int tflops,
                     mt__arm *out)
{
    char path[MT__PATH_LEN];
    const cJSON *o = get(r, obj, parent, key, J_OBJ | J_NULL, path);
    out->median = out->tflops = out->tokens = NAN;
    out->tflops_source = NULL;
    out->present = o != NULL;
    if (!o)
        return;
    out->s = get_vec(r, o, path, "samples", 0);
    out->median = get_num(r, o, path, "median", J_NUM | J_NULL);
    if (tflops)
        out->tflops = get_num(r, o, path, "tflops", J_NUM | J_NULL);
    /* newer members, absent from older bundles */
    if (cJSON_GetObjectItemCaseSensitive(o, "tflops_source"))
        out->tflops_source = get_str(r, o, path, "tflops_source", 1);
    if (cJSON_GetObjectItemCaseSensitive(o, "tokens_per_s_per_gpu"))
        out->tokens = get_num(r, o, path, "tokens_per_s_per_gpu", J_NUM | J_NULL);
    /* a validation arm's runs (absent in bundles written before them): the
     * log directories are named after the config id, so a reader finds
     * them from the report */
    if (tflops && cJSON_GetObjectItemCaseSensitive(o, "config_id")) {
        char lp[MT__PATH_LEN], ep[MT__PATH_LEN];
        size_t i;
        out->config_id = get_str(r, o, path, "config_id", 0);
        out->log_dirs = get_strs(r, o, path, "log_dirs");
        path_key(lp, path, "log_dirs");
        for (i = 0; out->config_id && i < out->log_dirs.n; i++) {
            const char *d = out->log_dirs.v[i], *base = strrchr(d, '/');
            if (!strstr(base ? base + 1 : d, out->config_id)) {
                path_idx(ep, lp, i);
                problem(r, ep,
                        "\"%.200s\" is not named after the arm's config id %.20s; the runs "
                        "of an arm are stored and logged under one id",
                        d, out->config_id);
            }
        }
    }
}

/* label_reasons of a config (optional: bundles written before it). */
static mt__strs get_reasons(rd *r, const cJSON *o, const char *path)
{
    mt__strs none = {NULL, 0};
    if (!o || !cJSON_GetObjectItemCaseSensitive(o, "label_reasons"))
        return none;
    return get_strs(r, o, path, "label_reasons");
}

/* validation.natural (optional). */
static void read_natural(rd *r, const cJSON *v, mt__natural *n)
{
    static const char *const statuses[] = {"measured", "skipped", "off", NULL};
    static const char *const labels[] = {"training-equivalent", "benchmark-only", NULL};
    const char *path = "validation.natural";
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(v, "natural");
    memset(n, 0, sizeof *n);
    n->gain = n->p = NAN;
    if (!o || cJSON_IsNull(o) || !(o = get(r, v, "validation", "natural", J_OBJ, NULL)))
        return;
    n->present = 1;
    n->status = get_enum(r, o, path, "status", statuses);
    n->reason = get_str(r, o, path, "reason", 0);
    n->label = get_enum(r, o, path, "label", labels);
    read_arm(r, o, path, "baseline", 1, &n->base);
    read_arm(r, o, path, "winner", 1, &n->win);
    n->gain = get_num(r, o, path, "gain", J_NUM | J_NULL);
    n->has_ci = get_pair(r, o, path, "ci", J_NUM, n->ci);
    n->p = get_num(r, o, path, "p_value", J_NUM | J_NULL);
    n->confirmed = get_bool(r, o, path, "confirmed");
    if (n->status && !strcmp(n->status, "measured") && (!n->base.present || !n->win.present))
        problem(r, path, "is measured but an arm is null");
}

static void read_wall(rd *r, const cJSON *obj, const char *parent, const char *key, mt__wall *w)
{
    static const char *const walls[] = {"memory", "communication", "host", "compute", NULL};
    char path[MT__PATH_LEN], sp[MT__PATH_LEN];
    const cJSON *o = get(r, obj, parent, key, J_OBJ | J_NULL, path), *sh;
    int i;
    double sum = 0;
    w->present = o != NULL;
    if (!o)
        return;
    w->wall = get_enum(r, o, path, "wall", walls);
    w->runner_up = get_str(r, o, path, "runner_up", 1);
    w->confidence = get_num(r, o, path, "confidence", J_NUM | J_NULL);
    w->window_s = get_num(r, o, path, "window_s", J_NUM | J_NULL);
    /* steps: absent in bundles written before it */
    if (cJSON_GetObjectItemCaseSensitive(o, "steps"))
        w->has_steps = get_pair(r, o, path, "steps", J_INT, w->steps);
    sh = get(r, o, path, "shares", J_OBJ, sp);
    for (i = 0; i < MT__NSHARES; i++) {
        char kp[MT__PATH_LEN];
        if (i == MT__SHARE_OTHER && sh && !cJSON_GetObjectItemCaseSensitive(sh, share_keys[i])) {
            w->share[i] = 0;
            continue;
        }
        w->share[i] = get_num(r, sh, sp, share_keys[i], J_NUM);
        if (sh && isnan(w->share[i]))
            w->share[i] = 0;
        else if (w->share[i] < 0) {
            path_key(kp, sp, share_keys[i]);
            problem(r, kp, "is %g; a share of the window is not negative", w->share[i]);
        }
        sum += fmax(w->share[i], 0);
    }
    /* all zero: nothing classified, drawn as an empty bar */
    if (sh && sum > 0 && fabs(sum - 1) > 0.005)
        problem(r, sp,
                "add up to %.1f%%; the shares partition the profiled window (hidden "
                "communication is a share of compute time, not stacked on it) and must add "
                "up to 100%%",
                100 * sum);
}

static void read_decision(rd *r, const cJSON *o, const char *path, mt__decision *dc)
{
    static const char *const verdicts[] = {"accepted", "rejected", "dropped", "kept", "failed",
                                           NULL};
    dc->index = get_num(r, o, path, "index", J_INT);
    dc->phase = get_str(r, o, path, "phase", 0);
    dc->variable = get_str(r, o, path, "variable", 0);
    dc->wall = get_str(r, o, path, "wall", 1);
    dc->change = get_changes(r, o, path, "change");
    dc->repairs = get_strs(r, o, path, "repairs");
    dc->verdict = get_enum(r, o, path, "verdict", verdicts);
    dc->reason = get_str(r, o, path, "reason", 0);
    read_arm(r, o, path, "control", 0, &dc->control);
    read_arm(r, o, path, "candidate", 0, &dc->candidate);
    dc->gain = get_num(r, o, path, "gain", J_NUM | J_NULL);
    dc->has_ci = get_pair(r, o, path, "ci", J_NUM, dc->ci);
    dc->p = get_num(r, o, path, "p_value", J_NUM | J_NULL);
    dc->evidence = get_map(r, o, path, "evidence", 1);
    dc->arm_value = dc->arm_of = NAN;
    if (cJSON_GetObjectItemCaseSensitive(o, "arms")) {
        char ap[300];
        const cJSON *a = get(r, o, path, "arms", J_OBJ, NULL);
        snprintf(ap, sizeof ap, "%s.arms", path);
        if (a) {
            dc->arm_value = get_num(r, a, ap, "value", J_INT);
            dc->arm_of = get_num(r, a, ap, "of", J_INT);
            dc->arm_selected = get_bool(r, a, ap, "selected");
        }
    }
}
static void read_validation(rd *r, const cJSON *root, mt__validation *v)
{
    const cJSON *o = get(r, root, "", "validation", J_OBJ | J_NULL, NULL);
    const char *path = "validation";
    v->gain = v->p = NAN;
    v->present = o != NULL;
    if (!o)
        return;
    get_pair(r, o, path, "window", J_INT, v->window);
    v->steps = get_num(r, o, path, "steps", J_INT);
    read_arm(r, o, path, "baseline", 1, &v->base);
    read_arm(r, o, path, "winner", 1, &v->win);
    if (!v->base.present)
        problem(r, "validation.baseline", "is null; the validation must measure the baseline");
    if (!v->win.present)
        problem(r, "validation.winner", "is null; the validation must measure the winner");
    v->gain = get_num(r, o, path, "gain", J_NUM | J_NULL);
    v->has_ci = get_pair(r, o, path, "ci", J_NUM, v->ci);
    v->p = get_num(r, o, path, "p_value", J_NUM | J_NULL);
    v->confirmed = get_bool(r, o, path, "confirmed");
    v->recommendation = get_str(r, o, path, "recommendation", 0);
    read_natural(r, o, &v->nat);
}

static int tpoint_cmp(const void *a, const void *b)
{
    const mt__tpoint *x = a, *y = b;
    if (x->run != y->run)
        return x->run < y->run ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* baseline.fit (optional: bundles written before it have none). */
static void read_basefit(rd *r, const cJSON *base, const char *parent, mt__basefit *f)
{
    char path[MT__PATH_LEN], ep[MT__PATH_LEN];
    const cJSON *o, *j, *p;
    memset(f, 0, sizeof *f);
    f->est = f->usable = f->uncertainty = f->probe_peak = NAN;
    if (!base || !(j = cJSON_GetObjectItemCaseSensitive(base, "fit")) || cJSON_IsNull(j))
        return;
    if (!(o = get(r, base, parent, "fit", J_OBJ, path)))
        return;
    f->present = 1;
    j = get(r, o, path, "fits", J_BOOL | J_NULL, NULL);
    f->fits = j ? cJSON_IsTrue(j) : -1;
    f->est = get_num(r, o, path, "estimate_gb", J_NUM | J_NULL);
    f->usable = get_num(r, o, path, "usable_gb", J_NUM | J_NULL);
    f->uncertainty = get_num(r, o, path, "uncertainty", J_NUM);
    if ((p = get(r, o, path, "probe", J_OBJ | J_NULL, ep))) {
        f->probe_outcome = get_str(r, p, ep, "outcome", 0);
        f->probe_peak = get_num(r, p, ep, "peak_gb", J_NUM | J_NULL);
    }
    j = get(r, o, path, "fitted", J_ARR | J_NULL, NULL);
    if (j) {
        f->has_fitted = 1;
        f->fitted = get_changes(r, o, path, "fitted");
    }
    f->reason = get_str(r, o, path, "reason", 0);
}

/* memory[i]'s source, hottest and roles (absent in bundles written before
 * them; then nothing is checked).  The hottest must be the largest figure
 * of per_gpu_gb, which then has one figure (or null) per GPU. */
static void read_mem_more(rd *r, const cJSON *e, const char *ep, mt__mem *me, double gpus)
{
    char hp[MT__PATH_LEN], rp[MT__PATH_LEN], xp[MT__PATH_LEN];
    const cJSON *h, *a, *x;
    size_t i, n = me->per_gpu.n;
    if (cJSON_GetObjectItemCaseSensitive(e, "source"))
        me->source = get_str(r, e, ep, "source", 0);
    if (!cJSON_GetObjectItemCaseSensitive(e, "hottest"))
        return;
    if ((h = get(r, e, ep, "hottest", J_OBJ | J_NULL, hp))) {
        me->has_hot = 1;
        me->hot_rank = get_num(r, h, hp, "rank", J_INT);
        me->hot_peak = get_num(r, h, hp, "peak_gb", J_NUM);
        me->hot_role = get_str(r, h, hp, "role", 0);
        me->hot_why = get_str(r, h, hp, "why", 0);
        path_key(rp, ep, "per_gpu_gb");
        if (isfinite(gpus) && (double)n != gpus)
            problem(r, rp, "has %zu figures for %.0f GPUs; one per GPU (null: no figure)", n,
                    gpus);
        path_key(xp, hp, "rank");
        if (isfinite(me->hot_rank) && (me->hot_rank < 0 || me->hot_rank >= (double)n))
            problem(r, xp, "%.0f is not a GPU of per_gpu_gb (0-%zu)", me->hot_rank,
                    n ? n - 1 : 0);
        else if (isfinite(me->hot_rank) && isfinite(me->hot_peak)) {
            double at = me->per_gpu.v[(size_t)me->hot_rank];
            if (!(fabs(at - me->hot_peak) <= 1e-6 * fmax(1, fabs(at))))
                problem(r, xp, "GPU %.0f has %g GB in per_gpu_gb, not the hottest's %g GB",
                        me->hot_rank, at, me->hot_peak);
            for (i = 0; i < n; i++)
                if (me->per_gpu.v[i] > me->hot_peak * (1 + 1e-9)) {
                    problem(r, xp, "GPU %zu has %g GB, more than the hottest (GPU %.0f)", i,
                            me->per_gpu.v[i], me->hot_rank);
                    break;
                }
        }
    }
    if (!cJSON_GetObjectItemCaseSensitive(e, "roles"))
        return;
    a = get(r, e, ep, "roles", J_ARR, rp);
    if (!a || !(me->roles = ar_alloc(r->ar, array_len(a) * sizeof(mt__mem_role))))
        return;
    i = 0;
    cJSON_ArrayForEach(x, a)
    {
        mt__mem_role *ro = &me->roles[i];
        path_idx(xp, rp, i++);
        ro->rank = ro->peak = ro->median = NAN;
        if (!check(r, x, xp, J_OBJ))
            continue;
        ro->role = get_str(r, x, xp, "role", 0);
        ro->rank = get_num(r, x, xp, "rank", J_INT);
        ro->peak = get_num(r, x, xp, "peak_gb", J_NUM);
        ro->median = get_num(r, x, xp, "median_gb", J_NUM | J_NULL);
        if (isfinite(ro->rank) && (ro->rank < 0 || ro->rank >= (double)n)) {
            char kp[MT__PATH_LEN];
            path_key(kp, xp, "rank");
            problem(r, kp, "%.0f is not a GPU of per_gpu_gb (0-%zu)", ro->rank, n ? n - 1 : 0);
        }
    }
    me->nroles = i;
}

/* Who wrote the bundle, of what, on what, and the budget. */
static void read_top(rd *r, const cJSON *root, mt__model *m)
{
    static const char *const statuses[] = {"validated", "not_confirmed", "baseline_only", "failed",
                                           NULL};
    char path[MT__PATH_LEN];
    const cJSON *o;

    m->version = get_str(r, root, "", "moetune_version", 0);
    m->created = get_str(r, root, "", "created", 0);

    o = get(r, root, "", "contract", J_OBJ, path);
    m->contract_name = get_str(r, o, path, "name", 0);
    m->contract_path = get_str(r, o, path, "path", 0);
    m->fingerprint = get_str(r, o, path, "fingerprint", 0);
    m->stack = get_map(r, o, path, "stack", 0);

    o = get(r, root, "", "hardware", J_OBJ, path);
    m->gpu = get_str(r, o, path, "gpu", 0);
    m->gpus = get_num(r, o, path, "gpus", J_INT);
    m->gpus_per_node = get_num(r, o, path, "gpus_per_node", J_INT);
    m->memory_gb = get_num(r, o, path, "memory_gb", J_NUM);

    m->strategy = get_str(r, root, "", "strategy", 0);
    m->status = get_enum(r, root, "", "status", statuses);

    o = get(r, root, "", "budget", J_OBJ, path);
    m->gh_limit = get_num(r, o, path, "gpu_hours_limit", J_NUM | J_NULL);
    m->gh_used = get_num(r, o, path, "gpu_hours_used", J_NUM);
    m->runs_limit = get_num(r, o, path, "runs_limit", J_INT | J_NULL);
    m->runs_used = get_num(r, o, path, "runs_used", J_INT);
    m->deadline = get_str(r, o, path, "deadline", 1);
    m->stopped_because = get_str(r, o, path, "stopped_because", 0);
}

/* The baseline and the recipe. */
static void read_recipe(rd *r, const cJSON *root, mt__model *m)
{
    static const char *const labels[] = {"training-equivalent", "benchmark-only", NULL};
    char path[MT__PATH_LEN], ep[MT__PATH_LEN];
    const cJSON *o;

    o = get(r, root, "", "baseline", J_OBJ, path);
    m->base_config = get_map(r, o, path, "config", 0);
    m->base_label = get_str(r, o, path, "label", 0);
    m->base_reasons = get_reasons(r, o, path);
    read_basefit(r, o, path, &m->fit);

    o = get(r, root, "", "recipe", J_OBJ, path);
    m->config = get_map(r, o, path, "config", 0);
    m->label = get_enum(r, o, path, "label", labels);
    m->reasons = get_reasons(r, o, path);
    m->change = get_changes(r, o, path, "changes");
    m->megatron_args = get_strs(r, o, path, "megatron_args");
    m->bridge_overrides = get_strs(r, o, path, "bridge_overrides");
    m->env = get_map(r, o, path, "env", 0);
    m->command_diff = get_strs(r, o, path, "command_diff");
    if (cJSON_GetObjectItemCaseSensitive(o, "notes"))
        m->notes = get_strs(r, o, path, "notes");
    o = get(r, o, path, "meshes", J_OBJ, ep);
    m->mesh_attention = get_str(r, o, ep, "attention", 0);
    m->mesh_moe = get_str(r, o, ep, "moe", 0);
}

static void read_decisions(rd *r, const cJSON *root, mt__model *m)
{
    char path[MT__PATH_LEN], ep[MT__PATH_LEN];
    const cJSON *e, *a;
    size_t i;

    a = get(r, root, "", "decisions", J_ARR, NULL);
    if (a && (m->dec = ar_alloc(r->ar, array_len(a) * sizeof(mt__decision)))) {
        i = 0;
        cJSON_ArrayForEach(e, a)
        {
            path_idx(ep, "decisions", i);
            m->dec[i].index = NAN;
            if (check(r, e, ep, J_OBJ))
                read_decision(r, e, ep, &m->dec[i]);
            i++;
        }
        m->ndec = i;
        /* ids name plots and anchors (ab-ID) and the store's decision/ID:
         * two decisions with one id would point at one of them */
        for (i = 1; i < m->ndec; i++) {
            size_t k;
            if (isnan(m->dec[i].index))
                continue;
            for (k = 0; k < i && m->dec[k].index != m->dec[i].index; k++)
                ;
            if (k < i) {
                path_idx(ep, "decisions", i);
                path_key(path, ep, "index");
                problem(r, path, "%.0f is also decisions[%zu].index; decision ids are unique",
                        m->dec[i].index, k);
            }
        }
    }
}

static void read_timeline(rd *r, const cJSON *root, mt__model *m)
{
    char ep[MT__PATH_LEN];
    const cJSON *e, *a;
    size_t i;

    a = get(r, root, "", "timeline", J_ARR, NULL);
    if (a && (m->tl = ar_alloc(r->ar, array_len(a) * sizeof(mt__tpoint)))) {
        i = 0;
        cJSON_ArrayForEach(e, a)
        {
            mt__tpoint *t = &m->tl[i];
            path_idx(ep, "timeline", i);
            t->order = i++;
            t->run = t->gpu_hours = t->tflops = t->best = NAN;
            if (!check(r, e, ep, J_OBJ))
                continue;
            t->run = get_num(r, e, ep, "run", J_INT);
            t->gpu_hours = get_num(r, e, ep, "gpu_hours", J_NUM);
            t->tflops = get_num(r, e, ep, "tflops", J_NUM | J_NULL);
            t->best = get_num(r, e, ep, "best_tflops", J_NUM | J_NULL);
            t->phase = get_str(r, e, ep, "phase", 0);
        }
        m->ntl = i;
        if (!r->problems)
            qsort(m->tl, m->ntl, sizeof *m->tl, tpoint_cmp);
    }
}

static void read_memory(rd *r, const cJSON *root, mt__model *m)
{
    char ep[MT__PATH_LEN];
    const cJSON *e, *a;
    size_t i;

    a = get(r, root, "", "memory", J_ARR, NULL);
    if (a && (m->mem = ar_alloc(r->ar, array_len(a) * sizeof(mt__mem)))) {
        i = 0;
        cJSON_ArrayForEach(e, a)
        {
            mt__mem *me = &m->mem[i];
            path_idx(ep, "memory", i++);
            if (!check(r, e, ep, J_OBJ))
                continue;
            me->name = get_str(r, e, ep, "name", 0);
            me->capacity = get_num(r, e, ep, "capacity_gb", J_NUM);
            me->headroom = get_num(r, e, ep, "headroom_gb", J_NUM);
            me->per_gpu = get_vec(r, e, ep, "per_gpu_gb", 1);
            read_mem_more(r, e, ep, me, m->gpus);
        }
        m->nmem = i;
    }
}

/* The walls and the ablation. */
static void read_ablation(rd *r, const cJSON *root, mt__model *m)
{
    char path[MT__PATH_LEN], ep[MT__PATH_LEN];
    const cJSON *o, *e, *a;
    size_t i;

    o = get(r, root, "", "walls", J_OBJ | J_NULL, path);
    if (o) {
        read_wall(r, o, path, "before", &m->before);
        read_wall(r, o, path, "after", &m->after);
    }

    a = get(r, root, "", "ablation", J_ARR, NULL);
    if (a && (m->abl = ar_alloc(r->ar, array_len(a) * sizeof(mt__ablation)))) {
        i = 0;
        cJSON_ArrayForEach(e, a)
        {
            mt__ablation *ab = &m->abl[i];
            path_idx(ep, "ablation", i++);
            ab->gain_without = ab->p = NAN;
            if (!check(r, e, ep, J_OBJ))
                continue;
            ab->knob = get_str(r, e, ep, "knob", 0);
            ab->to = get_value(r, e, ep, "to");
            ab->gain_without = get_num(r, e, ep, "gain_without", J_NUM | J_NULL);
            ab->p = get_num(r, e, ep, "p_value", J_NUM | J_NULL);
            ab->kept = get_bool(r, e, ep, "kept");
            ab->reason = get_str(r, e, ep, "reason", 0);
        }
        m->nabl = i;
    }
}

/* The validation and what it comes to. */
static void read_totals(rd *r, const cJSON *root, mt__model *m)
{
    read_validation(r, root, &m->val);
    m->ablation_complete = -1;
    if (cJSON_GetObjectItemCaseSensitive(root, "ablation_complete"))
        m->ablation_complete = get_bool(r, root, "", "ablation_complete");

    m->total_gain = get_num(r, root, "", "total_gain", J_NUM | J_NULL);
    if (!isnan(m->total_gain)) {
        if (!m->val.present)
            problem(r, "total_gain",
                    "is %g but there is no validation; the total gain is what the final "
                    "validation measured (null without one)",
                    m->total_gain);
        else if (isnan(m->val.gain) ||
                 fabs(m->total_gain - m->val.gain) > 1e-9 * fmax(1, fabs(m->val.gain)))
            problem(r, "total_gain",
                    "is %g but validation.gain is %g; the total gain is what the final "
                    "validation measured, never a sum of earlier A/Bs",
                    m->total_gain, m->val.gain);
    }
}

static void read_bundle(rd *r, const cJSON *root, mt__model *m)
{
    double schema;

    if (!cJSON_IsObject(root)) {
        problem(r, NULL, "the bundle is not a JSON object");
        return;
    }
    schema = get_num(r, root, "", "schema", J_INT);
    if (!isnan(schema) && schema != 1) {
        problem(r, "schema", "schema version %.0f is not supported (this moetune reads version 1)",
                schema);
        return;
    }
    read_top(r, root, m);
    read_recipe(r, root, m);
    read_decisions(r, root, m);
    read_timeline(r, root, m);
    read_memory(r, root, m);
    read_ablation(r, root, m);
    read_totals(r, root, m);
}

/* ---- files ------------------------------------------------------------ */

static char *join_path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static char *read_file(const char *path, size_t *len, mt_diag *d, int *err)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t cap = 0, n = 0, got;
    if (!f) {
        *err = -errno;
        mt_diag_add(d, path, 0, NULL, "cannot read the bundle: %s", strerror(errno));
        return NULL;
    }
    do {
        if (cap - n < 65536) {
            char *nb;
            cap = cap ? cap * 2 : 262144;
            if ((long)cap > MAX_BUNDLE_BYTES + 262144L || !(nb = realloc(buf, cap + 1))) {
                *err = (long)cap > MAX_BUNDLE_BYTES ? -EFBIG : -ENOMEM;
                mt_diag_add(d, path, 0, NULL, "the bundle is too large to read (over %ld MB)",
                            MAX_BUNDLE_BYTES >> 20);
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
    } while (got > 0);
    if (ferror(f)) {
        *err = -EIO;
        mt_diag_add(d, path, 0, NULL, "cannot read the bundle: read error");
        free(buf);
        fclose(f);
        return NULL;
    }
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* True when text ends inside a string or an unclosed object or array: a
 * bundle cut short rather than one written wrong. */
static int looks_truncated(const char *t, size_t n)
{
    int depth = 0, in_str = 0, esc = 0;
    size_t i;
    for (i = 0; i < n; i++) {
        char c = t[i];
        if (in_str) {
            if (esc)
                esc = 0;
            else if (c == '\\')
                esc = 1;
            else if (c == '"')
                in_str = 0;
        } else if (c == '"')
            in_str = 1;
        else if (c == '{' || c == '[')
            depth++;
        else if ((c == '}' || c == ']') && --depth < 0)
            return 0;
    }
    return in_str || depth > 0;
}

/* Where the parse stopped, as line and column, with a hint for a bundle
 * cut short. */
static void parse_problem(const char *file, const char *text, size_t len, const char *at,
                          mt_diag *d)
{
    const char *p;
    int line = 1, col = 1;
    if (!at || at < text || at > text + len)
        at = text + len;
    for (p = text; p < at; p++) {
        if (*p == '\n') {
            line++;
            col = 1;
        } else
            col++;
    }
    if (looks_truncated(text, len))
        mt_diag_add(d, file, line, NULL,
                    "not valid JSON: the text ends before its last string, object or array is "
                    "closed (truncated?); the parser stopped at column %d",
                    col);
    else
        mt_diag_add(d, file, line, NULL, "not valid JSON near column %d: '%.20s'", col, at);
}

void mt__bundle_clear(mt__bundle *b)
{
    if (b->arena) {
        ar_clear(b->arena);
        free(b->arena);
    }
    cJSON_Delete(b->root);
    free(b->text);
    memset(b, 0, sizeof *b);
}

int mt__bundle_read(const char *dir, mt__bundle *b, mt_diag *d)
{
    char *file = join_path(dir, "bundle.json");
    size_t len = 0;
    int err = 0;
    const char *end = NULL;
    arena *ar;
    rd r;

    memset(b, 0, sizeof *b);
    if (!file || !(ar = b->arena = calloc(1, sizeof *ar))) {
        free(file);
        return -ENOMEM;
    }
    b->text = read_file(file, &len, d, &err);
    if (!b->text) {
        free(file);
        return err ? err : -EIO;
    }
    if (strlen(b->text) != len) {
        mt_diag_add(d, file, 0, NULL, "not valid JSON: the file holds a NUL byte");
        err = -EINVAL;
        goto out;
    }
    b->root = cJSON_ParseWithLengthOpts(b->text, len + 1, &end, 1);
    if (!b->root) {
        parse_problem(file, b->text, len, end ? end : cJSON_GetErrorPtr(), d);
        err = -EINVAL;
        goto out;
    }
    r = (rd){file, d, ar, 0};
    read_bundle(&r, b->root, &b->m);
    if (r.problems > MAX_PROBLEMS)
        mt_diag_add(d, file, 0, NULL, "... and %d more problems", r.problems - MAX_PROBLEMS);
    if (ar->oom)
        err = -ENOMEM;
    else if (r.problems)
        err = -EINVAL;
out:
    free(file);
    return err;
}
