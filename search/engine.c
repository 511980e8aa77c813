/*
 * engine.c - the policy: fit, scale, profile, retune through the gate,
 * ablate, validate (see engine.h).  Deterministic: given the same jobs'
 * results it takes the same decisions, which is what makes resume exact.
 */
#include "engine_int.h"

#include "clock.h"
#include "config.h"
#include "gate.h"
#include "job_memo.h"
#include "evaluate.h"
#include "flops.h"
#include "label.h"
#include "launch.h"
#include "measure.h"
#include "memory.h"
#include "status.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_AB 48      /* A/B decisions of one tune, a safety bound */
#define REP_BLOCK 100  /* replicate numbers reserved per decision */
#define MAX_ARMS 6     /* values of one variable screened together */

void mt_tune_opts_init(mt_tune_opts *o)
{
    memset(o, 0, sizeof *o);
    mt_exec_opts_init(&o->exec);
}

void mt_tune_result_clear(mt_tune_result *r)
{
    size_t i;
    mt_kv_destroy(&r->recipe);
    for (i = 0; i < r->n_accepted; i++) {
        mt_kv_destroy(&r->accepted_from[i]);
        mt_kv_destroy(&r->accepted_to[i]);
    }
    free(r->accepted_from);
    free(r->accepted_to);
    r->accepted_from = r->accepted_to = NULL;
    r->n_accepted = 0;
}

int mt_strategy_parse(const char *s)
{
    if (!strcmp(s, "ofat"))
        return MT_STRATEGY_OFAT;
    if (!strcmp(s, "grid"))
        return MT_STRATEGY_GRID;
    if (!strcmp(s, "random"))
        return MT_STRATEGY_RANDOM;
    return -1;
}

const char *mt_strategy_name(int s)
{
    return s == MT_STRATEGY_GRID ? "grid" : s == MT_STRATEGY_RANDOM ? "random" : "ofat";
}

/* ---- progress ----------------------------------------------------------------------------- */

/* An arm's throughput in status.json: NAME_tflops, NAME_tflops_source,
 * NAME_tokens_per_s_per_gpu (the median of its screen's replicates). */
static void status_arm(cJSON *o, const char *name, const cJSON *arm)
{
    static const char *const keys[] = {"tflops", "tflops_source", "tokens_per_s_per_gpu"};
    char k[64];
    size_t i;
    for (i = 0; arm && i < sizeof keys / sizeof keys[0]; i++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(arm, keys[i]);
        snprintf(k, sizeof k, "%s_%s", name, keys[i]);
        if (cJSON_IsNumber(x) || cJSON_IsString(x))
            cJSON_AddItemToObject(o, k, cJSON_Duplicate(x, 0));
    }
}

static void write_status(mt__eng *e, const char *line)
{
    double used = mt_exec_gpu_hours(e->x), el = mt_clock_wall_s() - e->started;
    cJSON *o = mt_status_spent(e->phase, line, e->x, e->budget_gh, e->budget_runs);
    if (isfinite(e->best_ms) && isfinite(e->baseline_ms) && e->baseline_ms > 0) {
        cJSON_AddNumberToObject(o, "best_ms", e->best_ms);
        cJSON_AddNumberToObject(o, "baseline_ms", e->baseline_ms);
        cJSON_AddNumberToObject(o, "screened_gain", 1 - e->best_ms / e->baseline_ms);
    }
    /* an estimate of the time left, while there is a phase to run */
    if (used > 0 && e->budget_gh > used && !(e->phase && !strcmp(e->phase, "done")))
        cJSON_AddNumberToObject(o, "eta_s", el / used * (e->budget_gh - used));
    status_arm(o, "baseline", e->baseline_arm);
    status_arm(o, "best", e->best_arm);
    mt_status_write(e->o.dir, o);
}

void mt__eng_progress_quiet(mt__eng *e)
{
    write_status(e, mt_exec_live(e->x));
}

/* Plugin failures mt_candidates_for added to e->d since item `from` (a
 * propose() that failed or passed an output cap): each message once per
 * tune on stderr, so a misbehaving plugin is never silent. */
static void warn_plugin_failures(mt__eng *e, size_t from)
{
    size_t i, j, n = mt_diag_count(e->d);
    for (i = from; i < n; i++) {
        const mt_diag_item *it = mt_diag_at(e->d, i);
        for (j = 0; j < i; j++)
            if (!strcmp(mt_diag_at(e->d, j)->message, it->message))
                break;
        if (j == i)
            fprintf(stderr, "moetune: warning: %s: %s\n", it->file ? it->file : "plugin",
                    it->message);
    }
}

void mt__eng_progress(mt__eng *e, const char *fmt, ...)
{
    char line[1024], stamp[32];
    va_list ap;
    time_t t = time(NULL);
    struct tm tm;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    localtime_r(&t, &tm);
    strftime(stamp, sizeof stamp, "%H:%M:%S", &tm);
    if (e->o.progress) {
        if (e->o.tty) {
            char best[64] = "";
            if (isfinite(e->best_ms) && isfinite(e->baseline_ms) && e->baseline_ms > 0)
                snprintf(best, sizeof best, " | best %+.1f%%",
                         100 * (1 - e->best_ms / e->baseline_ms));
            fprintf(e->o.progress, "\r\033[K[%s] %-8s %.70s%s | %.1f/%.0f GPU-h, %d runs\n", stamp,
                    e->phase ? e->phase : "", line, best, mt_exec_gpu_hours(e->x), e->budget_gh,
                    mt_exec_runs(e->x));
        } else {
            fprintf(e->o.progress, "[%s] %s: %s\n", stamp, e->phase ? e->phase : "start", line);
        }
        fflush(e->o.progress);
    }
    write_status(e, line);
    mt_store_add_event(e->st, NAN, e->phase ? e->phase : "start", line, NULL);
}

/* ---- helpers ------------------------------------------------------------------------------ */

/* A job memo's hottest-GPU peak, GB (NAN: none). */
static double memo_peak_gb(const cJSON *job)
{
    mt_job_memo m;
    mt_job_memo_from_json(job, &m);
    return m.peak_gb;
}

static double hbm_gb(mt__eng *e)
{
    mt_mem_estimate est;
    if (mt_memory_estimate(e->best ? e->best : e->baseline, e->c->hardware, &est) == 0)
        return est.hbm_gb;
    return NAN;
}

/* What the analytic estimate says of a config against the usable memory
 * (HBM less the contract's headroom).  The estimate is a model with a
 * declared relative error (gates.memory_uncertainty): past the usable memory
 * by no more than that, only a run can tell. */
enum { MEM_FITS, MEM_UNSURE, MEM_OVER, MEM_UNKNOWN };

typedef struct memview {
    int verdict;
    double est, usable, limit; /* GB; limit = usable x (1 + uncertainty) */
} memview;

static int mem_view(mt__eng *e, const mt_kv *cfg, memview *m)
{
    mt_mem_estimate est;
    memset(m, 0, sizeof *m);
    m->est = m->usable = m->limit = NAN;
    m->verdict = MEM_UNKNOWN;
    if (mt_memory_estimate(cfg, e->c->hardware, &est))
        return m->verdict;
    m->est = est.hottest->total;
    m->usable = est.hbm_gb * (1 - e->c->memory_headroom);
    m->limit = m->usable * (1 + e->c->memory_uncertainty);
    m->verdict = m->est <= m->usable ? MEM_FITS : m->est <= m->limit ? MEM_UNSURE : MEM_OVER;
    return m->verdict;
}

/* The estimate's figures in words, for decisions and progress lines. */
static void mem_words(mt__eng *e, const memview *m, char *buf, size_t n)
{
    double u = 100 * e->c->memory_uncertainty;
    switch (m->verdict) {
    case MEM_FITS:
        snprintf(buf, n, "estimate %.1f GB of %.1f GB usable", m->est, m->usable);
        break;
    case MEM_UNSURE:
        snprintf(buf, n,
                 "estimate %.1f GB, past the %.1f GB usable but within its %.0f%% uncertainty "
                 "(%.1f GB)",
                 m->est, m->usable, u, m->limit);
        break;
    case MEM_OVER:
        snprintf(buf, n,
                 "estimate %.1f GB, past the %.1f GB usable by more than its %.0f%% uncertainty "
                 "(%.1f GB)",
                 m->est, m->usable, u, m->limit);
        break;
    default:
        snprintf(buf, n, "no estimate (unusable parallel sizes)");
    }
}

/* A config worth measuring: the estimate fits, or misses by no more than its
 * uncertainty.  Once the current best's peak has been measured, the
 * estimate is read against it: the measured peak gives the level and the
 * estimate only the difference between the two configs (one change apart),
 * which a model's systematic error largely cancels out of.  The measured
 * peak of the config itself decides, at the gate or in a probe. */
static int may_fit(mt__eng *e, const mt_kv *cfg)
{
    memview m, b;
    int v = mem_view(e, cfg, &m);
    if (v != MEM_UNKNOWN && isfinite(e->best_peak_gb) && mem_view(e, e->best, &b) != MEM_UNKNOWN) {
        double est = m.est - b.est + e->best_peak_gb;
        return est <= m.limit;
    }
    return v == MEM_FITS || v == MEM_UNSURE;
}

static cJSON *diff_json(const mt_kv *from, const mt_kv *to)
{
    cJSON *a = cJSON_CreateArray();
    const char *k, *v;
    size_t i;
    for (i = 0; mt_kv_entry(to, i, &k, &v) == 0; i++) {
        const char *f = mt_kv_get(from, k);
        if (!f || strcmp(f, v)) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "knob", k);
            cJSON_AddStringToObject(o, "from", f ? f : "");
            cJSON_AddStringToObject(o, "to", v);
            cJSON_AddItemToArray(a, o);
        }
    }
    return a;
}

static int label_allowed(mt__eng *e, uint32_t label)
{
    return (label & e->c->labels) == label && label;
}

static int word_in(const char *list, const char *w)
{
    size_t n = strlen(w);
    const char *p = list;
    while (p && *p) {
        size_t len = strcspn(p, " ");
        if (len == n && !strncmp(p, w, n))
            return 1;
        p += len;
        while (*p == ' ')
            p++;
    }
    return 0;
}

/* An undeclared boolean knob that moves together with a declared one of
 * the same variable (sequence_parallel with TP, the precision-aware
 * optimizer with optimizer offload): a mode that follows the declared
 * change.  An undeclared knob of more values (PP, CP, VPP sizes) is a
 * dimension the contract chose not to search, and is not coupled. */
static int coupled_to_declared(mt__eng *e, const mt_kv *from, const mt_kv *to, const char *knob)
{
    const mt_knob_v1 *kd = mt_registry_knob(e->reg, knob, NULL);
    size_t i;
    if (!kd || kd->type != MT_TYPE_BOOL)
        return 0;
    for (i = 0; i < mt_registry_count(e->reg); i++) {
        const mt_plugin *p = mt_registry_at(e->reg, i);
        uint32_t j;
        for (j = 0; p->enabled && j < p->desc->n_variables; j++) {
            const char *knobs = p->desc->variables[j].knobs, *q = knobs;
            if (!knobs || !word_in(knobs, knob))
                continue;
            while (*q) {
                char other[128];
                size_t len = strcspn(q, " ");
                const char *a, *b;
                snprintf(other, sizeof other, "%.*s", (int)(len < 127 ? len : 127), q);
                q += len;
                while (*q == ' ')
                    q++;
                if (!strcmp(other, knob) || !mt_kv_get(e->c->space, other))
                    continue;
                a = mt_kv_get(from, other), b = mt_kv_get(to, other);
                if (b && (!a || strcmp(a, b)))
                    return 1;
            }
        }
    }
    return 0;
}

/* Whether the config needs knob's change to be legal: with the knob kept
 * at its value in from, the rest of to is illegal (a repair's
 * CUDA_DEVICE_MAX_CONNECTIONS).  Changed by choice (the pipeline size beside
 * an EP change, where the contract does not search PP), an undeclared knob
 * would take the walk outside the declared space. */
static int required_change(mt__eng *e, const mt_kv *from, const mt_kv *to, const char *knob)
{
    mt_kv *kept = mt_kv_dup(to);
    const char *f = mt_kv_get(from, knob);
    mt_violations vs = {0};
    int need;
    if (!kept)
        return 1;
    mt_kv_set(kept, knob, f ? f : "");
    mt_legality(e->reg, e->c, kept, &vs, e->d);
    need = vs.n > 0;
    mt_violations_clear(&vs);
    mt_kv_destroy(&kept);
    return need;
}

/* Every knob that differs between from and to is declared in the contract's
 * space and takes a declared value, or is an undeclared boolean companion or
 * a change legality needs (above): knobs the contract leaves out of its
 * space are otherwise frozen at their base values. */
static int in_space(mt__eng *e, const mt_kv *from, const mt_kv *to)
{
    const char *k, *v;
    size_t i;
    for (i = 0; mt_kv_entry(to, i, &k, &v) == 0; i++) {
        const char *f = mt_kv_get(from, k), *list, *p;
        size_t n = strlen(v);
        if (f && !strcmp(f, v))
            continue;
        if (!(list = mt_kv_get(e->c->space, k))) {
            if (coupled_to_declared(e, from, to, k) || required_change(e, from, to, k))
                continue;
            return 0;
        }
        for (p = list;;) {
            size_t len = strcspn(p, "\n");
            if (len == n && !strncmp(p, v, n))
                break;
            if (!p[len])
                return 0;
            p += len + 1;
        }
    }
    return 1;
}

static void design(mt__eng *e, mt_stats_design *ds, int validate, int seq)
{
    mt_stats_design_default(ds);
    ds->alpha = e->c->alpha;
    ds->min_effect = e->c->min_effect;
    ds->initial = e->c->replicates > 5 ? e->c->replicates : 5;
    ds->step = ds->initial > 5 ? ds->initial / 2 : 3;
    ds->max_replicates = 3 * ds->initial > MAX_REPS ? MAX_REPS : 3 * ds->initial;
    if (validate) {
        ds->initial = e->c->replicates > 6 ? e->c->replicates : 6;
        ds->step = 3;
        ds->max_replicates = 2 * ds->initial > MAX_REPS ? MAX_REPS : 2 * ds->initial;
    }
    ds->same_band = ds->min_effect > 0.015 ? 1.5 * ds->min_effect : 0.0225;
    ds->seed = (uint64_t)seq * 7919u + 1;
}

/* GPU-hours of one screen run of the current best (the latest seen). */
static double screen_cost(mt__eng *e)
{
    double last = NAN;
    if (mt_exec_runs(e->x) > 0)
        last = mt_exec_gpu_hours(e->x) / mt_exec_runs(e->x);
    return isfinite(last) && last > 0 ? last : 0;
}

/* What ablation and validation need, kept in reserve by every earlier
 * phase: validation's first look (twice when it adds natural-routing arms)
 * and one first look of every ablation still to run, the change being
 * screened counted as one that may be accepted, and while searching the
 * profiled run of the best that change would make.  Each is counted once:
 * while ablation runs, the reserve holds only the ablations after the
 * current one, whose own runs afford() adds. */
static void reserve(mt__eng *e, double *gh, int *runs)
{
    mt_stats_design ds;
    double ratio = (double)e->c->validate.steps / (double)e->c->screen.steps;
    /* searching (ofat): the accepted changes and the one being screened,
     * which may be accepted too */
    int abl = e->ablating                         ? e->ablate_left
              : e->o.strategy == MT_STRATEGY_OFAT ? cJSON_GetArraySize(e->accepted) + 1
                                                  : 0;
    if (e->validated) {
        *gh = 0, *runs = 0; /* the natural-routing arms: afford()'s n */
        return;
    }
    design(e, &ds, 1, 0);
    *runs = 2 * ds.initial * (e->natural_plan ? 2 : 1);
    *gh = *runs * screen_cost(e) * (ratio > 1 ? ratio : 1);
    design(e, &ds, 0, 0);
    *runs += 2 * ds.initial * abl;
    *gh += 2 * ds.initial * abl * screen_cost(e);
    if (!e->ablating && e->o.strategy == MT_STRATEGY_OFAT) {
        /* the profiled run of a best the screen may accept */
        *runs += 1;
        *gh += screen_cost(e);
    }
}

/* Whether n more screen runs fit the budget, the run cap and the deadline
 * with validation kept in reserve; sets e->stopped when not. */
static int afford(mt__eng *e, int n)
{
    double rgh, per = screen_cost(e), wall_per;
    int rruns;
    reserve(e, &rgh, &rruns);
    if (mt_exec_gpu_hours(e->x) + n * per + rgh > e->budget_gh) {
        snprintf(e->stopped, sizeof e->stopped,
                 "GPU-hour budget (%.1f used of %.1f, %.1f kept for ablation and validation)",
                 mt_exec_gpu_hours(e->x), e->budget_gh, rgh);
        return 0;
    }
    if (mt_exec_runs(e->x) + n + rruns > e->budget_runs) {
        snprintf(e->stopped, sizeof e->stopped,
                 "run budget (%d used of %d, %d kept for ablation and validation)",
                 mt_exec_runs(e->x), e->budget_runs, rruns);
        return 0;
    }
    wall_per = mt_exec_executed(e->x) > 0 ? (mt_clock_wall_s() - e->started) / mt_exec_executed(e->x) : 0;
    if (e->until > 0 && mt_clock_wall_s() + (n + 2.5 * rruns) * wall_per > e->until) {
        snprintf(e->stopped, sizeof e->stopped, "deadline (validation needs about %.0f s)",
                 2.5 * rruns * wall_per);
        return 0;
    }
    return 1;
}

/* An arm's figures: its replicates' step times (ms; a failed replicate, NAN,
 * has no sample) and their median, and the median model TFLOP/s per GPU and
 * tokens/s per GPU over the same declared window.  TFLOP/s is the log's own
 * (each replicate's median throughput line, "logged") when every replicate
 * has one, else it is computed from each step time with Megatron's formula
 * (core/flops.h, "computed"); tokens/s per GPU always follow from the step
 * time, GBS and sequence. */
static cJSON *arm_json(mt__eng *e, const mt_kv *cfg, const double *x, const double *tf, size_t n)
{
    cJSON *o = cJSON_CreateObject(), *a = cJSON_CreateArray();
    double med = NAN, ok[MAX_REPS], t[MAX_REPS], tok[MAX_REPS], v;
    size_t i, m = 0, logged = 0;
    for (i = 0; i < n; i++)
        if (isfinite(x[i]) && m < MAX_REPS) { /* a failed replicate has no sample */
            cJSON_AddItemToArray(a, cJSON_CreateNumber((ok[m] = x[i]) / 1000.0));
            t[m] = tf ? tf[i] : NAN;
            logged += isfinite(t[m]) && t[m] > 0;
            m++;
        }
    cJSON_AddItemToObject(o, "samples", a);
    if (m && mt_stats_median(ok, m, &med) == 0)
        cJSON_AddNumberToObject(o, "median", med / 1000.0);
    else
        cJSON_AddNullToObject(o, "median");
    for (i = 0; i < m; i++) {
        double ctf = NAN;
        mt_flops_throughput(e->c, cfg, ok[i] / 1000.0, &ctf, &tok[i]);
        if (logged < m)
            t[i] = ctf;
    }
    if (m && mt_stats_median(t, m, &v) == 0 && isfinite(v)) {
        cJSON_AddNumberToObject(o, "tflops", v);
        cJSON_AddStringToObject(o, "tflops_source", logged == m ? "logged" : "computed");
    } else {
        cJSON_AddNullToObject(o, "tflops");
        cJSON_AddNullToObject(o, "tflops_source");
    }
    if (m && mt_stats_median(tok, m, &v) == 0 && isfinite(v))
        cJSON_AddNumberToObject(o, "tokens_per_s_per_gpu", v);
    else
        cJSON_AddNullToObject(o, "tokens_per_s_per_gpu");
    return o;
}

/* ---- one A/B ------------------------------------------------------------------------------ */

/* The replicates of one multi-arm screen, shared by its A/Bs: each
 * (config, replicate) runs once, so every arm is compared with the same
 * control runs and the follow-up between two arms reads the runs their
 * screens made. */
typedef struct arm_pool {
    struct pooled {
        char id[17];
        int rep;
        cJSON *job;
    } *v;
    size_t n;
} arm_pool;

static const cJSON *pool_get(const arm_pool *p, const char *id, int rep)
{
    size_t i;
    for (i = 0; p && i < p->n; i++)
        if (p->v[i].rep == rep && !strcmp(p->v[i].id, id))
            return p->v[i].job;
    return NULL;
}

static void pool_put(arm_pool *p, const char *id, int rep, const cJSON *job)
{
    struct pooled *v;
    if (!p || !job || pool_get(p, id, rep) || !(v = realloc(p->v, (p->n + 1) * sizeof *v)))
        return;
    p->v = v;
    memcpy(v[p->n].id, id, 17);
    v[p->n].rep = rep;
    v[p->n++].job = cJSON_Duplicate(job, 1);
}

static void pool_clear(arm_pool *p)
{
    size_t i;
    for (i = 0; i < p->n; i++)
        cJSON_Delete(p->v[i].job);
    free(p->v);
    memset(p, 0, sizeof *p);
}

typedef struct ab_in {
    const char *phase, *variable, *wall;
    const mt_kv *ctl, *cand;
    cJSON *changes, *repairs; /* owned by the caller; copied */
    uint32_t label;
    int gate;     /* 1: the full gate; 0: the statistics only (ablation) */
    int validate; /* validation runs */
    const char *routing; /* NULL: the contract's; "natural": the router's own */
    double alpha;        /* > 0: this decision's alpha (a multi-arm screen's share) */
    int rep_base;        /* > 0: replicates rep_base * REP_BLOCK + i (a multi-arm group's) */
    arm_pool *pool;      /* runs shared with the group's other A/Bs, or NULL */
    int pending;         /* 1: the caller commits the record (ab_commit) */
    int initial;         /* > 0: replicates per arm at the first look */
    int one_look;        /* 1: the first look only (undecided stays undecided) */
} ab_in;

/* Why a comparison was not accepted; its reason text says the same in words
 * (the engine switches on this, never on the text). */
typedef enum ab_refusal {
    AB_NONE = 0,         /* accepted, or judged without the gate */
    AB_GATE,             /* the gate refused: ab_out.gate says why */
    AB_RUN_LOST,         /* the candidate's run lost to infrastructure on every retry */
    AB_CANDIDATE_FAILED, /* the candidate's run failed (ab_out's failure says how) */
    AB_CONTROL_FAILED,   /* the control's run failed (ab_out's failure says how) */
    AB_OTHER_MACHINE,    /* a replicate ran on another machine (fingerprint) */
    AB_NO_STATISTICS     /* non-positive step times */
} ab_refusal;

typedef struct ab_out {
    int have_stats;
    mt_stats_decision dec;
    int accepted;
    ab_refusal refusal;
    mt_gate_refusal gate; /* with AB_GATE */
    int failed_oom;       /* with AB_*_FAILED: the failed run's outcome is oom */
    char failure[560];    /* with AB_*_FAILED: "run failed: OUTCOME (EVIDENCE)" */
    char reason[600];
    double gain; /* -effect */
    cJSON *decision; /* the record: borrowed from e->decisions, or owned when pending */
    /* what ab_commit stores */
    int seq;
    cJSON *stats;
    int64_t cruns[MAX_REPS], xruns[MAX_REPS];
    int nruns;
} ab_out;

static void store_decision(mt__eng *e, int seq, const ab_in *in, const char *verdict, cJSON *stats,
                           const char *reason, int64_t *cruns, size_t nc, int64_t *xruns,
                           size_t nx)
{
    char key[64], *text = NULL, cid[17], xid[17], *cc, *xc, *stext;
    mt_store_decision dec;
    snprintf(key, sizeof key, "decision/%d", seq);
    if (mt_store_memo_get(e->st, key, &text, e->d) == 1) {
        free(text); /* stored before a resume */
        return;
    }
    {
        /* validation runs are stored under the ids of the configs as they
         * ran (the validation's length): the decision names those */
        mt_kv *ctl = in->validate ? mt_measure_run_config(e->c, in->ctl, "validate") : NULL;
        mt_kv *cand = in->validate ? mt_measure_run_config(e->c, in->cand, "validate") : NULL;
        const mt_kv *c0 = ctl ? ctl : in->ctl, *x0 = cand ? cand : in->cand;
        mt_config_id(x0, xid);
        mt_config_id(c0, cid);
        cc = mt_config_canonical(c0);
        xc = mt_config_canonical(x0);
        mt_kv_destroy(&ctl), mt_kv_destroy(&cand);
    }
    stext = cJSON_PrintUnformatted(stats);
    memset(&dec, 0, sizeof dec);
    dec.kind = in->phase;
    dec.variable = in->variable;
    dec.candidate_id = xid;
    dec.candidate_canonical = xc;
    dec.control_id = cid;
    dec.control_canonical = cc;
    /* the store knows the candidate's side only: an ablation that keeps the
     * change rejected its removal, one that drops it accepted it */
    dec.verdict = !strcmp(verdict, "kept")      ? "rejected"
                  : !strcmp(verdict, "dropped") ? "accepted"
                  : !strcmp(verdict, "failed")  ? "unknown"
                                                : verdict;
    dec.statistics = stext;
    dec.evidence = reason;
    dec.created = NAN;
    dec.candidate_runs = xruns;
    dec.n_candidate_runs = nx;
    dec.control_runs = cruns;
    dec.n_control_runs = nc;
    if (mt_store_begin(e->st, e->d) == 0) {
        if (mt_store_add_decision(e->st, &dec, NULL, e->d) == 0 &&
            mt_store_memo_put(e->st, key, "true", e->d) >= 0)
            mt_store_commit(e->st, e->d);
        else
            mt_store_rollback(e->st);
    }
    free(cc), free(xc), free(stext);
}

/* The changed knobs' activation: every knob of the change must be verified
 * applied; unknown verdicts ask for a profiled run of the candidate. */
static int activation(mt__eng *e, const ab_in *in, const cJSON *job, int seq, char *why, size_t n,
                      cJSON *evidence)
{
    cJSON *x, *lists[2] = {in->changes, in->repairs}, *prof = NULL;
    mt_exec_job q;
    mt_job_memo jm, pm;
    int l, ok = 1, need_profile = 0;
    mt_job_memo_from_json(job, &jm);
    for (l = 0; l < 2; l++)
        cJSON_ArrayForEach(x, lists[l])
        {
            const char *knob = mt_exec_str(x, "knob"), *ve;
            const char *v = mt_job_memo_verdict(&jm, knob, &ve);
            if (v && !strcmp(v, "applied"))
                continue;
            if (v && !strcmp(v, "not_applied")) {
                snprintf(why, n, "activation: %s did not take effect (%s)", knob, ve);
                return 0;
            }
            need_profile = 1;
        }
    if (!need_profile)
        return 1;
    memset(&q, 0, sizeof q);
    q.cfg = in->cand;
    mt_config_id(in->cand, q.id);
    q.kind = "profile";
    q.rep = seq * REP_BLOCK + REP_BLOCK - 1;
    q.phase = in->phase;
    if (mt_exec_run(e->x, &q, 1) || !mt_exec_job_ok(q.out)) {
        mt_job_memo m;
        mt_job_memo_from_json(q.out, &m);
        snprintf(why, n, "activation: the profiled run of the candidate failed (%s)",
                 q.out ? m.evidence : "no result");
        mt_exec_jobs_free(&q, 1);
        return 0;
    }
    prof = q.out;
    mt_job_memo_from_json(prof, &pm);
    cJSON_AddItemToObject(evidence, "profile_trace", cJSON_Duplicate(pm.trace, 1));
    for (l = 0; l < 2 && ok; l++)
        cJSON_ArrayForEach(x, lists[l])
        {
            const char *knob = mt_exec_str(x, "knob"), *ve;
            const char *v = mt_job_memo_verdict(&pm, knob, &ve);
            if (!v || strcmp(v, "applied")) {
                snprintf(why, n, "activation not verified: %s is %s after a profiled run%s%s",
                         knob, v ? v : "unchecked (no plugin verdict)", v ? ": " : "", ve);
                ok = 0;
                break;
            }
        }
    mt_exec_jobs_free(&q, 1);
    return ok;
}

/* Stores a decision and adds its record to the bundle's; the record's
 * verdict and reason are the ones stored (a multi-arm screen sets them once
 * it has selected among the arms). */
static void ab_commit(mt__eng *e, const ab_in *in, ab_out *out)
{
    cJSON *rec = out->decision;
    store_decision(e, out->seq, in, mt_exec_str(rec, "verdict"), out->stats,
                   mt_exec_str(rec, "reason"), out->cruns, (size_t)out->nruns, out->xruns,
                   (size_t)out->nruns);
    cJSON_AddItemToArray(e->decisions, rec);
    cJSON_Delete(out->stats);
    out->stats = NULL;
}

/* Whether an ablation drops the change: removing it is faster (better, or
 * shown faster by its interval, which lies wholly below zero, though the
 * replicates ran out before it could be said faster by the minimum effect:
 * the smaller change is at least as fast), or the same within the same band,
 * slower by less than half the minimum effect and not shown slower at all
 * (the interval of the slowdown reaches zero).  A change whose removal
 * measurably hurts stays, however small the point estimate.  The decision
 * record and the ablation row both say what this says. */
static int ablation_drops(const mt__eng *e, const mt_stats_decision *d)
{
    return d->verdict == MT_STATS_BETTER ||
           (d->verdict == MT_STATS_UNKNOWN && d->ci_hi < 0) ||
           (d->verdict == MT_STATS_SAME && d->effect < e->c->min_effect / 2 && d->ci_lo <= 0);
}

/* A record's verdict and reason, replaced. */
static void rec_verdict(cJSON *rec, const char *verdict, const char *reason)
{
    cJSON_ReplaceItemInObjectCaseSensitive(rec, "verdict", cJSON_CreateString(verdict));
    cJSON_ReplaceItemInObjectCaseSensitive(rec, "reason", cJSON_CreateString(reason));
}

/* Whether two runs' fingerprints (their memos' "fingerprint") say they ran
 * on different machines or software: the first key that differs into why
 * as "KEY: A vs B".  Unknown is not a difference: a memo without one (the
 * model executor, a memo stored before fingerprints were memoized) and a
 * null node list (srun, Slurm never listed the step) are not compared. */
static int fp_differs(const cJSON *a, const cJSON *b, char *why, size_t n)
{
    static const char *const keys[] = {"hosts", "gpus",      "driver", "cuda_runtime",
                                       "nccl",  "container", "stack",  NULL};
    int i;
    if (!cJSON_IsObject(a) || !cJSON_IsObject(b))
        return 0;
    for (i = 0; keys[i]; i++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(a, keys[i]);
        const cJSON *y = cJSON_GetObjectItemCaseSensitive(b, keys[i]);
        char *sx, *sy;
        if (!strcmp(keys[i], "hosts") && (cJSON_IsNull(x) || cJSON_IsNull(y)))
            continue;
        if ((!x && !y) || (x && y && cJSON_Compare(x, y, 1)))
            continue;
        sx = x ? cJSON_PrintUnformatted(x) : NULL;
        sy = y ? cJSON_PrintUnformatted(y) : NULL;
        snprintf(why, n, "%s: %.160s vs %.160s", keys[i], sx ? sx : "(absent)",
                 sy ? sy : "(absent)");
        free(sx), free(sy);
        return 1;
    }
    return 0;
}

/* The one host of a fingerprint, or NULL (none known, or several). */
static const char *fp_host(const cJSON *fp)
{
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(fp, "hosts");
    return cJSON_IsArray(h) && cJSON_GetArraySize(h) == 1
               ? cJSON_GetStringValue(cJSON_GetArrayItem(h, 0))
               : NULL;
}

/* A failed run of one arm (who: "candidate" or "control") as out's
 * refusal r: its failure, reason and whether it ran out of memory; 1. */
static int arm_failed(ab_out *out, ab_refusal r, const char *who, const mt_job_memo *m)
{
    snprintf(out->failure, sizeof out->failure, "run failed: %s (%s)", m->outcome, m->evidence);
    snprintf(out->reason, sizeof out->reason, "the %s's %s", who, out->failure);
    out->refusal = r;
    out->failed_oom = !strncmp(m->outcome, "oom", 3);
    return 1;
}

/* The refusal of one replicate pair (a lost or failed run, or another
 * machine than the comparison's), set in out: 1, or 0 when it may be judged. */
static int ab_pair_refused(const cJSON *c, const cJSON *x, const mt_job_memo *cm,
                           const mt_job_memo *xm, cJSON **fp_ref, int n, ab_out *out)
{
    if (!mt_exec_job_ok(x) && !strcmp(xm->outcome, "infra")) {
        /* the coordinator retried it (PROTOCOL.md 5): still lost */
        snprintf(out->reason, sizeof out->reason,
                 "not judged: the candidate's run was lost to infrastructure on every "
                 "retry (%s); this says nothing against the candidate",
                 xm->evidence);
        out->refusal = AB_RUN_LOST;
        return 1;
    } else if (!mt_exec_job_ok(x)) {
        return arm_failed(out, AB_CANDIDATE_FAILED, "candidate", xm);
    } else if (!mt_exec_job_ok(c)) {
        return arm_failed(out, AB_CONTROL_FAILED, "control", cm);
    } else {
        /* every replicate of both arms on the machine of the first
         * control run: the same nodes, GPUs, driver, CUDA, NCCL,
         * container and stack (DESIGN.md 4) */
        const cJSON *fc = cm->fingerprint, *fx = xm->fingerprint;
        char why[340];
        int arm = 0;
        if (!*fp_ref && fc)
            *fp_ref = cJSON_Duplicate(fc, 1);
        if (fp_differs(*fp_ref, fc, why, sizeof why))
            arm = 1;
        else if (fp_differs(*fp_ref, fx, why, sizeof why))
            arm = 2;
        if (arm) {
            snprintf(out->reason, sizeof out->reason,
                     "not judged: replicate %d of the %s ran on another machine than "
                     "the control's first (fingerprint differs in %s); a comparison "
                     "across different nodes or GPU fingerprints is refused, which says "
                     "nothing against the candidate",
                     n + 1, arm == 1 ? "control" : "candidate", why);
            out->refusal = AB_OTHER_MACHINE;
            return 1;
        }
    }
    return 0;
}

/* A judged comparison's gain, and its verdict through the gate (when asked). */
static void ab_gate(mt__eng *e, const ab_in *in, ab_out *out, cJSON *cjobs, cJSON *xjobs, int seq,
                    cJSON *ev)
{
    const mt_stats_decision *dd = &out->dec;
    out->gain = -dd->effect;
    if (!in->gate) {
        snprintf(out->reason, sizeof out->reason, "%s: %s",
                 mt_stats_verdict_name(dd->verdict), dd->reason);
    } else {
        cJSON *x;
        double cl[MAX_REPS], xl[MAX_REPS], peak = NAN;
        size_t nc = 0, nx = 0;
        mt_gate_in g;
        memset(&g, 0, sizeof g);
        cJSON_ArrayForEach(x, xjobs)
        {
            mt_job_memo m;
            double l, p;
            mt_job_memo_from_json(x, &m);
            l = m.loss, p = m.peak_gb;
            if (m.loss_finite != 1 || m.skipped > 0 || m.nan > 0)
                g.bad_iterations = 1;
            if (isfinite(l) && nx < MAX_REPS)
                xl[nx++] = l;
            if (isfinite(p) && !(p <= peak))
                peak = p;
        }
        cJSON_ArrayForEach(x, cjobs)
        {
            mt_job_memo m;
            double l;
            mt_job_memo_from_json(x, &m);
            l = m.loss;
            if (isfinite(l) && nc < MAX_REPS)
                cl[nc++] = l;
        }
        if (isfinite(peak))
            cJSON_AddNumberToObject(ev, "peak_gb", peak);
        g.dec = dd;
        g.min_effect = e->c->min_effect;
        g.loss_tolerance = e->c->loss_tolerance;
        g.memory_headroom = e->c->memory_headroom;
        g.capacity_gb = hbm_gb(e);
        g.label = in->label;
        g.allowed_labels = e->c->labels;
        g.control_loss = cl, g.n_control_loss = nc;
        g.candidate_loss = xl, g.n_candidate_loss = nx;
        g.candidate_peak_gb = peak;
        g.activation = 1;
        /* activation last: it may need a profiled run of the candidate */
        out->gate = mt_gate_judge(&g, out->reason, sizeof out->reason);
        if (out->gate == MT_GATE_ACCEPTED) {
            char why[600];
            g.activation = activation(e, in, cJSON_GetArrayItem(xjobs, 0), seq, why,
                                      sizeof why, ev);
            g.activation_why = why;
            out->gate = mt_gate_judge(&g, out->reason, sizeof out->reason);
            out->accepted = out->gate == MT_GATE_ACCEPTED;
        }
        if (!out->accepted)
            out->refusal = AB_GATE;
    }
}

/* The decision record's head: index, phase, variable, wall, change, repairs, verdict, reason. */
static void ab_record_head(mt__eng *e, const ab_in *in, const ab_out *out, int failed, int seq,
                           cJSON *rec)
{
    cJSON_AddNumberToObject(rec, "index", seq);
    cJSON_AddStringToObject(rec, "phase", in->phase);
    cJSON_AddStringToObject(rec, "variable", in->variable ? in->variable : "");
    if (in->wall)
        cJSON_AddStringToObject(rec, "wall", in->wall);
    else
        cJSON_AddNullToObject(rec, "wall");
    cJSON_AddItemToObject(rec, "change", cJSON_Duplicate(in->changes, 1));
    {
        cJSON *rp = cJSON_CreateArray(), *x;
        cJSON_ArrayForEach(x, in->repairs)
        {
            char t[512];
            snprintf(t, sizeof t, "%s=%s (was %s)", mt_exec_str(x, "knob"), mt_exec_str(x, "to"),
                     mt_exec_str(x, "from"));
            cJSON_AddItemToArray(rp, cJSON_CreateString(t));
        }
        cJSON_AddItemToObject(rec, "repairs", rp);
    }
    {
        const char *verdict = !in->gate && out->have_stats && !failed
                                  ? (ablation_drops(e, &out->dec) ? "dropped" : "kept")
                              : out->accepted ? "accepted"
                              : failed        ? "failed"
                                              : "rejected";
        if (in->validate)
            verdict = out->have_stats && out->dec.verdict == MT_STATS_BETTER ? "accepted"
                                                                                : "rejected";
        cJSON_AddStringToObject(rec, "verdict", verdict);
    }
    cJSON_AddStringToObject(rec, "reason", out->reason);
}

/* The record's gain, ci and p value, and the statistics (or nulls without them). */
static void ab_record_stats(const ab_out *out, int n, cJSON *rec, cJSON *stats)
{
    if (out->have_stats) {
        cJSON *ci = cJSON_CreateArray();
        cJSON_AddNumberToObject(rec, "gain", -out->dec.effect);
        cJSON_AddItemToArray(ci, cJSON_CreateNumber(-out->dec.ci_hi));
        cJSON_AddItemToArray(ci, cJSON_CreateNumber(-out->dec.ci_lo));
        cJSON_AddItemToObject(rec, "ci", ci);
        cJSON_AddNumberToObject(rec, "p_value", out->dec.p);
        cJSON_AddStringToObject(stats, "verdict", mt_stats_verdict_name(out->dec.verdict));
        cJSON_AddNumberToObject(stats, "effect", out->dec.effect);
        cJSON_AddNumberToObject(stats, "ci_lo", out->dec.ci_lo);
        cJSON_AddNumberToObject(stats, "ci_hi", out->dec.ci_hi);
        cJSON_AddNumberToObject(stats, "p_mw", out->dec.p_mw);
        cJSON_AddNumberToObject(stats, "p_ks", out->dec.p_ks);
        cJSON_AddNumberToObject(stats, "alpha_look", out->dec.alpha_look);
        cJSON_AddNumberToObject(stats, "look", out->dec.look);
        cJSON_AddNumberToObject(stats, "replicates", n);
    } else {
        cJSON_AddNullToObject(rec, "gain");
        cJSON_AddNullToObject(rec, "ci");
        cJSON_AddNullToObject(rec, "p_value");
    }
}

/* The baseline's figures for status.json, from the first screen of the base. */
static void ab_note_baseline(mt__eng *e, const ab_in *in, const char *cid, int n, const cJSON *rec)
{
    if (e->baseline_arm || in->validate || in->routing)
        return;
    {
        /* the first screen of the base (or of the config the fit phase made
         * of it): the baseline's figures for status.json */
        char bid[17];
        mt_config_id(e->fitted ? e->fitted : e->baseline, bid);
        if (!strcmp(bid, cid) && n > 0) {
            const cJSON *arm = cJSON_GetObjectItemCaseSensitive(rec, "control");
            e->baseline_arm = cJSON_Duplicate(arm, 1);
            e->baseline_ms = mt_exec_num(arm, "median") * 1000;
            if (!e->best_arm) {
                e->best_arm = cJSON_Duplicate(arm, 1);
                e->best_ms = e->baseline_ms;
            }
        }
    }
}

/* The jobs for replicates n..target-1 of both arms that the group's pool
 * lacks, into q (got and slot say where each pair's runs come from): how many. */
static int ab_queue(const ab_in *in, const char *cid, const char *xid, const char *kind, int seq,
                    int base, int n, int target, const cJSON *fp_ref, char *nodes, size_t nn,
                    mt_exec_job *q, const cJSON **got, int *slot)
{
    int i, j = 0;
    for (i = n; i < target; i++) {
        int a;
        for (a = 0; a < 2; a++) {
            const char *id = a ? xid : cid;
            int s = 2 * (i - n) + a;
            if ((got[s] = pool_get(in->pool, id, base + i)) != NULL)
                continue; /* this group ran it already */
            slot[s] = j;
            q[j].cfg = a ? in->cand : in->ctl, memcpy(q[j].id, id, 17), q[j].kind = kind;
            q[j].routing = in->routing;
            /* one comparison (a multi-arm group's A/Bs share it), on one
             * host: its first control run's, once that is known */
            q[j].group = in->rep_base > 0 ? in->rep_base : seq;
            q[j].host = fp_host(fp_ref);
            q[j].nodes = mt_zexec_fp_nodes(fp_ref, nodes, nn)[0] ? nodes : NULL;
            q[j].rep = base + i, q[j++].phase = in->phase;
        }
    }
    return j;
}

/* The record's evidence: ev (given to rec) with the candidate's first run's verdicts. */
static void ab_record_evidence(cJSON *rec, cJSON *ev, const cJSON *xjobs)
{
    const cJSON *x;
    mt_job_memo m;
    mt_job_memo_from_json(cJSON_GetArrayItem(xjobs, 0), &m);
    cJSON_ArrayForEach(x, m.verdicts) {
        char key[300];
        const char *v = mt_job_memo_verdict(&m, x->string, NULL);
        snprintf(key, sizeof key, "verdict.%s", x->string);
        cJSON_AddStringToObject(ev, key, v ? v : "");
    }
    cJSON_AddItemToObject(rec, "evidence", ev);
}

/* The runs just made into got, and into the group's pool. */
static void ab_collect(const ab_in *in, const mt_exec_job *q, const int *slot, const cJSON **got,
                       int k)
{
    int i;
    for (i = 0; i < 2 * k; i++)
        if (!got[i]) {
            got[i] = q[slot[i]].out;
            pool_put(in->pool, q[slot[i]].id, q[slot[i]].rep, got[i]);
        }
}

static int ab(mt__eng *e, const ab_in *in, ab_out *out)
{
    int seq = ++e->seq, look = 0, target, n = 0, i, failed = 0, budget_cut = 0;
    mt_stats_design ds;
    double xs[MAX_REPS], ys[MAX_REPS], xt[MAX_REPS], yt[MAX_REPS];
    int64_t cruns[MAX_REPS], xruns[MAX_REPS];
    cJSON *cjobs = cJSON_CreateArray(), *xjobs = cJSON_CreateArray();
    cJSON *rec = cJSON_CreateObject(), *stats = cJSON_CreateObject(), *ev = cJSON_CreateObject();
    cJSON *fp_ref = NULL; /* the machine of the comparison: its first control run's */
    char cid[17], xid[17], nodes[4096];
    const char *kind = in->validate ? "validate" : "screen";
    memset(out, 0, sizeof *out);
    design(e, &ds, in->validate, seq);
    if (in->alpha > 0)
        ds.alpha = in->alpha;
    if (in->initial > ds.initial) {
        ds.initial = in->initial;
        if (ds.max_replicates < ds.initial + ds.step)
            ds.max_replicates = ds.initial + ds.step > MAX_REPS ? MAX_REPS : ds.initial + ds.step;
    }
    target = ds.initial;
    mt_config_id(in->ctl, cid);
    mt_config_id(in->cand, xid);
    for (;;) {
        int k = target - n, j = 0, base = (in->rep_base > 0 ? in->rep_base : seq) * REP_BLOCK;
        mt_exec_job *q = calloc((size_t)(2 * k), sizeof *q);
        const cJSON **got = calloc((size_t)(2 * k), sizeof *got);
        int *slot = calloc((size_t)(2 * k), sizeof *slot);
        j = ab_queue(in, cid, xid, kind, seq, base, n, target, fp_ref, nodes, sizeof nodes, q, got,
                     slot);
        if (mt_exec_run(e->x, q, (size_t)j)) {
            mt_exec_jobs_free(q, (size_t)j);
            free(q), free(got), free(slot);
            cJSON_Delete(cjobs), cJSON_Delete(xjobs), cJSON_Delete(rec), cJSON_Delete(stats);
            cJSON_Delete(ev), cJSON_Delete(fp_ref);
            return -1;
        }
        ab_collect(in, q, slot, got, k);
        for (i = 0; i < 2 * k; i += 2) {
            const cJSON *c = got[i], *x = got[i + 1];
            mt_job_memo cm, xm;
            mt_job_memo_from_json(c, &cm);
            mt_job_memo_from_json(x, &xm);
            if (!failed)
                failed = ab_pair_refused(c, x, &cm, &xm, &fp_ref, n, out);
            if (n < MAX_REPS) {
                xs[n] = cm.ms, ys[n] = xm.ms;
                xt[n] = cm.tflops, yt[n] = xm.tflops;
                cruns[n] = (int64_t)cm.run_id;
                xruns[n] = (int64_t)xm.run_id;
                n++;
            }
            cJSON_AddItemToArray(cjobs, cJSON_Duplicate(c, 1));
            cJSON_AddItemToArray(xjobs, cJSON_Duplicate(x, 1));
        }
        mt_exec_jobs_free(q, (size_t)j);
        free(q), free(got), free(slot);
        if (failed)
            break;
        if (mt_stats_decide(&ds, xs, (size_t)n, ys, (size_t)n, look, &out->dec) == 0) {
            out->have_stats = 1;
            if (out->dec.verdict == MT_STATS_UNKNOWN && !out->dec.capped && !in->one_look) {
                int more =
                    n + out->dec.add_control > MAX_REPS ? MAX_REPS : n + out->dec.add_control;
                /* what is kept for ablation and validation is no screen's to
                 * spend on more replicates: undecided, it stays undecided */
                if (!in->validate && !afford(e, 2 * (more - n))) {
                    budget_cut = 1;
                    break;
                }
                target = more;
                look++;
                continue;
            }
        } else {
            snprintf(out->reason, sizeof out->reason, "no statistics (non-positive step times)");
            out->refusal = AB_NO_STATISTICS;
            failed = 1;
        }
        break;
    }
    /* the gate */
    if (!failed && out->have_stats) {
        ab_gate(e, in, out, cjobs, xjobs, seq, ev);
    }
    if (budget_cut) {
        size_t l = strlen(out->reason);
        snprintf(out->reason + l, sizeof out->reason - l, "; no further replicates: %s",
                 e->stopped);
    }
    /* the record */
    ab_record_head(e, in, out, failed, seq, rec);
    cJSON_AddItemToObject(rec, "control", arm_json(e, in->ctl, xs, xt, (size_t)n));
    cJSON_AddItemToObject(rec, "candidate", arm_json(e, in->cand, ys, yt, (size_t)n));
    ab_record_stats(out, n, rec, stats);
    ab_record_evidence(rec, ev, xjobs);
    ev = NULL;
    out->decision = rec;
    out->seq = seq;
    out->stats = stats;
    stats = NULL;
    memcpy(out->cruns, cruns, sizeof cruns);
    memcpy(out->xruns, xruns, sizeof xruns);
    out->nruns = n;
    if (!in->pending)
        ab_commit(e, in, out);
    ab_note_baseline(e, in, cid, n, rec);
    cJSON_Delete(cjobs), cJSON_Delete(xjobs), cJSON_Delete(stats), cJSON_Delete(ev);
    cJSON_Delete(fp_ref);
    return 0;
}

/* ---- phases ------------------------------------------------------------------------------- */

/* A profiled run of the best config: its job memo (the caller's), which
 * holds its wall and its trace evidence; NULL when the run failed or gave
 * no wall. */
static cJSON *profile_best(mt__eng *e)
{
    mt_exec_job q;
    mt_job_memo m;
    cJSON *w = NULL;
    memset(&q, 0, sizeof q);
    q.cfg = e->best;
    mt_config_id(e->best, q.id);
    q.kind = "profile";
    q.rep = ++e->seq * REP_BLOCK;
    q.phase = "profile";
    if (mt_exec_run(e->x, &q, 1) == 0 && mt_exec_job_ok(q.out)) {
        mt_job_memo_from_json(q.out, &m);
        if (m.has_wall)
            w = q.out, q.out = NULL;
    }
    mt_exec_jobs_free(&q, 1);
    return w;
}

static int probe_fits(mt__eng *e, const mt_kv *cfg, cJSON **job)
{
    mt_exec_job q;
    double cap = hbm_gb(e), peak;
    int ok;
    memset(&q, 0, sizeof q);
    q.cfg = cfg;
    mt_config_id(cfg, q.id);
    q.kind = "fit";
    q.rep = 0;
    q.phase = "fit";
    if (mt_exec_run(e->x, &q, 1))
        return -1;
    peak = memo_peak_gb(q.out);
    ok = mt_exec_job_ok(q.out) &&
         (!isfinite(peak) || !isfinite(cap) || peak <= cap * (1 - e->c->memory_headroom));
    *job = q.out;
    return ok;
}

static void record_simple(mt__eng *e, const char *phase, const char *variable, const mt_kv *from,
                          const mt_kv *to, const char *verdict, const char *reason)
{
    cJSON *rec = cJSON_CreateObject(), *stats = cJSON_CreateObject();
    ab_in in;
    int seq = ++e->seq;
    memset(&in, 0, sizeof in);
    in.phase = phase;
    in.variable = variable;
    in.ctl = from;
    in.cand = to;
    cJSON_AddNumberToObject(rec, "index", seq);
    cJSON_AddStringToObject(rec, "phase", phase);
    cJSON_AddStringToObject(rec, "variable", variable);
    cJSON_AddNullToObject(rec, "wall");
    cJSON_AddItemToObject(rec, "change", diff_json(from, to));
    cJSON_AddItemToObject(rec, "repairs", cJSON_CreateArray());
    cJSON_AddStringToObject(rec, "verdict", verdict);
    cJSON_AddStringToObject(rec, "reason", reason);
    cJSON_AddItemToObject(rec, "control", arm_json(e, from, NULL, NULL, 0));
    cJSON_AddItemToObject(rec, "candidate", arm_json(e, to, NULL, NULL, 0));
    cJSON_AddNullToObject(rec, "gain");
    cJSON_AddNullToObject(rec, "ci");
    cJSON_AddNullToObject(rec, "p_value");
    cJSON_AddItemToObject(rec, "evidence", cJSON_CreateObject());
    cJSON_AddItemToArray(e->decisions, rec);
    store_decision(e, seq, &in,
                   !strcmp(verdict, "accepted") || !strcmp(verdict, "kept") ? "accepted"
                                                                            : "rejected",
                   stats, reason, NULL, 0, NULL, 0);
    cJSON_Delete(stats);
}

/* The probe's figures in words. */
static void probe_words(const cJSON *job, char *buf, size_t n)
{
    mt_job_memo m;
    mt_job_memo_from_json(job, &m);
    if (isfinite(m.peak_gb))
        snprintf(buf, n, "probe %s, hottest GPU %.1f GB", m.outcome, m.peak_gb);
    else
        snprintf(buf, n, "probe %s (%s), no peak figure", m.outcome, m.evidence);
}

/* A figure in GB, null when there is none. */
static void add_gb(cJSON *o, const char *k, double v)
{
    if (isfinite(v))
        cJSON_AddNumberToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

/* What the fit phase found of the base, for the bundle (baseline.fit,
 * search/BUNDLE.md): fits 1 / 0 / -1 unknown (the base does not run). */
static void fit_record(mt__eng *e, int fits, const memview *m, const cJSON *job, const char *reason)
{
    cJSON *o = cJSON_CreateObject(), *p;
    if (fits < 0)
        cJSON_AddNullToObject(o, "fits");
    else
        cJSON_AddBoolToObject(o, "fits", fits);
    add_gb(o, "estimate_gb", m->est);
    add_gb(o, "usable_gb", m->usable);
    cJSON_AddNumberToObject(o, "uncertainty", e->c->memory_uncertainty);
    if (job) {
        mt_job_memo jm;
        mt_job_memo_from_json(job, &jm);
        p = cJSON_AddObjectToObject(o, "probe");
        cJSON_AddStringToObject(p, "outcome", jm.outcome);
        add_gb(p, "peak_gb", jm.peak_gb);
    } else {
        cJSON_AddNullToObject(o, "probe");
    }
    cJSON_AddNullToObject(o, "fitted"); /* the fit phase's change, once one fits */
    cJSON_AddStringToObject(o, "reason", reason);
    cJSON_Delete(e->base_fit);
    e->base_fit = o;
}

#define MAX_FIT_PROBES 8 /* probe runs of memory changes in one fit phase */

/* The fit steps of the MoE workflow, in its order: the parallel layout
 * (lowest dense TP, then the largest EP), memory changes that add no work
 * (optimizer sharding, allocator settings, precision), selective
 * recompute, full recompute, offload last. */
enum { FIT_LAYOUT, FIT_FREE, FIT_SELECTIVE, FIT_FULL, FIT_OFFLOAD };
static const char *const fit_step_names[] = {"parallel layout", "memory setting",
                                             "selective recompute", "full recompute", "offload"};

static const char *const parallel_sizes[] = {
    "tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size",
    "expert_model_parallel_size", "expert_tensor_parallel_size"};

static long knob_long(const mt_kv *cfg, const char *k, long def)
{
    const char *v = mt_kv_get(cfg, k);
    return v && *v ? strtol(v, NULL, 10) : def;
}

static int knob_differs(const mt_kv *a, const mt_kv *b, const char *k)
{
    const char *x = mt_kv_get(a, k), *y = mt_kv_get(b, k);
    return strcmp(x ? x : "", y ? y : "");
}

/* A knob value that turns something on: not unset, false or zero (text such
 * as a module list is on). */
static int value_on(const char *v)
{
    char *end;
    double x;
    if (!*v || !strcmp(v, "false"))
        return 0;
    x = strtod(v, &end);
    return *end || x != 0;
}

/* The step a memory change belongs to, from what it does to the config (not
 * from which plugin offered it): the latest step of the workflow it
 * reaches.  Offload: a knob named *offload* turned on (or to another
 * non-zero value); recompute by recompute_granularity; layout by the
 * parallel sizes. */
static int fit_step(const mt_kv *base, const mt_kv *cfg)
{
    const char *k, *v, *g = mt_kv_get(cfg, "recompute_granularity");
    size_t i;
    for (i = 0; mt_kv_entry(cfg, i, &k, &v) == 0; i++)
        if (strstr(k, "offload") && knob_differs(base, cfg, k) && value_on(v))
            return FIT_OFFLOAD;
    if (g && !strcmp(g, "full") && knob_differs(base, cfg, "recompute_granularity"))
        return FIT_FULL;
    if (g && !strcmp(g, "selective") &&
        (knob_differs(base, cfg, "recompute_granularity") ||
         knob_differs(base, cfg, "recompute_modules")))
        return FIT_SELECTIVE;
    for (i = 0; i < sizeof parallel_sizes / sizeof parallel_sizes[0]; i++)
        if (knob_differs(base, cfg, parallel_sizes[i]))
            return FIT_LAYOUT;
    return FIT_FREE;
}

typedef struct fitrank {
    int step;
    long tp, ep, mp; /* dense TP; EP; the other model parallelism, PP x CP */
    size_t at;       /* the plugins' order, the last tie-break */
} fitrank;

static int fitrank_cmp(const void *pa, const void *pb)
{
    const fitrank *a = pa, *b = pb;
    if (a->step != b->step)
        return a->step < b->step ? -1 : 1;
    if (a->step == FIT_LAYOUT) {
        if (a->tp != b->tp)
            return a->tp < b->tp ? -1 : 1;
        if (a->ep != b->ep)
            return a->ep > b->ep ? -1 : 1;
        if (a->mp != b->mp)
            return a->mp < b->mp ? -1 : 1;
    }
    return a->at < b->at ? -1 : a->at > b->at;
}

/* Whether the base fits: by the estimate, then a probe run.  0 it fits, 1
 * it does not run at all (no memory change can fix that), 2 it does not
 * fit (the fit phase searches), -1 the executor failed. */
static int fit_base(mt__eng *e)
{
    cJSON *job = NULL;
    memview base_m;
    int r;
    char why[1200], mw[256], pw[300];
    mem_view(e, e->best, &base_m);
    mem_words(e, &base_m, mw, sizeof mw);
    if (base_m.verdict == MEM_FITS || base_m.verdict == MEM_UNSURE) {
        r = probe_fits(e, e->best, &job);
        if (r < 0)
            return -1;
        probe_words(job, pw, sizeof pw);
        if (r) {
            e->best_peak_gb = memo_peak_gb(job);
            snprintf(why, sizeof why, "the base config fits: %s; %s", mw, pw);
            mt__eng_progress(e, "%s", why);
            if (base_m.verdict == MEM_UNSURE) /* the probe overruled the estimate: evidence */
                record_simple(e, "fit", "base", e->best, e->best, "kept", why);
            fit_record(e, 1, &base_m, job, why);
            cJSON_Delete(job);
            return 0;
        }
        mt_job_memo jm;
        mt_job_memo_from_json(job, &jm);
        if (strcmp(jm.outcome, "oom") && strcmp(jm.outcome, "ok")) {
            /* not a memory problem: the base itself does not run (a hang, a
             * crash, a launch refusal); no memory change can fix that */
            snprintf(why, sizeof why, "the base config's probe failed: %s (%s)", jm.outcome,
                     jm.evidence);
            snprintf(e->stopped, sizeof e->stopped, "the base config does not run (%.40s)",
                     jm.outcome);
            fit_record(e, -1, &base_m, job, why);
            cJSON_Delete(job);
            mt__eng_progress(e, "%s", why);
            record_simple(e, "fit", "base", e->best, e->best, "failed", why);
            return 1;
        }
        snprintf(why, sizeof why, "the base config does not fit: %s; %s, over the %.1f GB usable",
                 mw, pw, base_m.usable);
        fit_record(e, 0, &base_m, job, why);
        cJSON_Delete(job);
    } else {
        snprintf(why, sizeof why, "the base config does not fit: %s; not probed", mw);
        fit_record(e, 0, &base_m, NULL, why);
    }
    mt__eng_progress(e, "%s", why);
    record_simple(e, "fit", "base", e->best, e->best, "rejected", why);
    return 2;
}

/* Fit: the base when a probe confirms it fits (probed when the estimate
 * fits or misses within its uncertainty; beyond that it is rejected unrun);
 * else the memory-wall candidates in the workflow's order (fit_step), each
 * estimated, probed within the uncertainty, the first that fits taken. */
static int phase_fit(mt__eng *e)
{
    mt_candidates cs = {0};
    cJSON *job = NULL;
    fitrank *order = NULL;
    memview m;
    size_t i, n = 0;
    int probes = 0, r;
    char why[1200], mw[256], pw[300];
    e->phase = "fit";
    if ((r = fit_base(e)) != 2)
        return r;

    {
        size_t before = mt_diag_count(e->d);
        mt_candidates_for(e->reg, e->c, e->best, NULL, MT_WALL_MEMORY, &cs, e->d);
        warn_plugin_failures(e, before);
    }
    order = calloc(cs.n + 1, sizeof *order);
    for (i = 0; order && i < cs.n; i++) {
        mt_candidate *k = &cs.v[i];
        if (k->reject || k->violations.n || !k->config || !label_allowed(e, k->label) ||
            !in_space(e, e->best, k->config))
            continue;
        order[n].step = fit_step(e->best, k->config);
        order[n].tp = knob_long(k->config, "tensor_model_parallel_size", 1);
        order[n].ep = knob_long(k->config, "expert_model_parallel_size", 1);
        order[n].mp = knob_long(k->config, "pipeline_model_parallel_size", 1) *
                      knob_long(k->config, "context_parallel_size", 1);
        order[n++].at = i;
    }
    if (n > 1)
        qsort(order, n, sizeof *order, fitrank_cmp);
    for (i = 0; i < n; i++) {
        mt_candidate *k = &cs.v[order[i].at];
        const char *step = fit_step_names[order[i].step];
        mem_view(e, k->config, &m);
        mem_words(e, &m, mw, sizeof mw);
        if (m.verdict == MEM_OVER || m.verdict == MEM_UNKNOWN) {
            snprintf(why, sizeof why, "%s (%s): %s; not probed", k->summary, step, mw);
            record_simple(e, "fit", k->variable, e->best, k->config, "rejected", why);
            mt__eng_progress(e, "%s", why);
            continue;
        }
        if (probes == MAX_FIT_PROBES) {
            mt__eng_progress(e, "the fit phase stops after %d probes", MAX_FIT_PROBES);
            break;
        }
        probes++;
        r = probe_fits(e, k->config, &job);
        if (r < 0)
            break;
        probe_words(job, pw, sizeof pw);
        snprintf(why, sizeof why, "%s (%s): %s; %s%s", k->summary, step, mw, pw,
                 r ? "" : ", over the usable memory");
        if (r)
            e->best_peak_gb = memo_peak_gb(job);
        cJSON_Delete(job);
        record_simple(e, "fit", k->variable, e->best, k->config, r ? "accepted" : "rejected", why);
        mt__eng_progress(e, "%s", why);
        if (r) {
            char note[2600];
            /* the base's own figures stay; the record gains the change */
            snprintf(note, sizeof note, "%s; made to fit by %s", mt_exec_str(e->base_fit, "reason"),
                     why);
            cJSON_ReplaceItemInObjectCaseSensitive(e->base_fit, "fitted",
                                                   diff_json(e->baseline, k->config));
            cJSON_ReplaceItemInObjectCaseSensitive(e->base_fit, "reason", cJSON_CreateString(note));
            mt_kv_destroy(&e->best);
            e->best = mt_kv_dup(k->config);
            e->fitted = mt_kv_dup(k->config);
            free(order);
            mt_candidates_clear(&cs);
            return 0;
        }
    }
    free(order);
    mt_candidates_clear(&cs);
    snprintf(e->stopped, sizeof e->stopped, "nothing fits in memory");
    return 1;
}

typedef struct tried {
    char **keys;
    size_t n;
} tried;

/* The change's key: variable and the knobs it sets. */
static void change_key(const mt_candidate *k, char *out, size_t n)
{
    const char *kn, *v;
    size_t i, off = (size_t)snprintf(out, n, "%s:", k->variable);
    for (i = 0; k->sets && mt_kv_entry(k->sets, i, &kn, &v) == 0 && off < n; i++)
        off += (size_t)snprintf(out + off, n - off, " %s=%s", kn, v);
}

static int tried_has(const tried *t, const char *k);

/* How often this change was screened; -1 once it was found slower against
 * the current best (against a later best it may be tried again: another
 * change can make it pay). */
static int tried_count(const tried *t, const mt_candidate *k, const char *best_id)
{
    char key[1024], slow[1100];
    size_t i;
    int n = 0;
    change_key(k, key, sizeof key);
    snprintf(slow, sizeof slow, "slower|%s|%s", best_id, key);
    for (i = 0; i < t->n; i++) {
        if (!strcmp(t->keys[i], slow))
            return -1;
        n += !strcmp(t->keys[i], key);
    }
    return n;
}

static int tried_has(const tried *t, const char *k)
{
    size_t i;
    for (i = 0; i < t->n; i++)
        if (!strcmp(t->keys[i], k))
            return 1;
    return 0;
}

static void tried_add(tried *t, const char *k)
{
    char **p = realloc(t->keys, (t->n + 1) * sizeof *p);
    if (!p)
        return;
    t->keys = p;
    t->keys[t->n++] = strdup(k);
}

static void tried_free(tried *t)
{
    size_t i;
    for (i = 0; i < t->n; i++)
        free(t->keys[i]);
    free(t->keys);
    memset(t, 0, sizeof *t);
}

/* Each knob of kv with the value it has in from: [{knob, from, to}]. */
static cJSON *changes_json(const mt_kv *kv, const mt_kv *from)
{
    cJSON *a = cJSON_CreateArray();
    const char *kn, *v;
    size_t i;
    for (i = 0; kv && mt_kv_entry(kv, i, &kn, &v) == 0; i++) {
        cJSON *o = cJSON_CreateObject();
        const char *f = mt_kv_get(from, kn);
        cJSON_AddStringToObject(o, "knob", kn);
        cJSON_AddStringToObject(o, "from", f ? f : "");
        cJSON_AddStringToObject(o, "to", v);
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

/* Rank of a candidate against the profile's wall (prof: its job memo, or
 * NULL): dominant 0, runner-up 1, other 2. */
static int wall_rank(uint32_t walls, const cJSON *prof)
{
    mt_job_memo m;
    uint32_t dom, run;
    mt_job_memo_from_json(prof, &m);
    dom = m.has_wall ? mt_wall_parse(m.wall.wall) : 0;
    run = m.has_wall ? mt_wall_parse(m.wall.runner_up) : 0;
    if (dom && (walls & dom))
        return 0;
    if (run && (walls & run))
        return 1;
    return 2;
}

/* How one arm of a multi-arm screen went, for the walk's bookkeeping. */
typedef struct arm_result {
    int screened; /* its A/B ran */
    int worse;    /* significantly slower than the control */
    int memory;   /* refused for memory (the gate's figures or an OOM) */
    double near;  /* < 0: a near miss (faster, but under the minimum effect) */
} arm_result;

/* Refused by the gate only for being under the minimum effect. */
static int below_effect(const ab_out *o)
{
    return o->refusal == AB_GATE && o->gate == MT_GATE_BELOW_EFFECT;
}

static int refused_for_memory(const ab_out *o)
{
    return !o->accepted &&
           ((o->refusal == AB_GATE && o->gate == MT_GATE_MEMORY) ||
            ((o->refusal == AB_CANDIDATE_FAILED || o->refusal == AB_CONTROL_FAILED) &&
             o->failed_oom));
}

/* Candidate k, accepted by decision rec: it becomes the best. */
static void take_change(mt__eng *e, const mt_candidate *k, const ab_in *in, const cJSON *rec)
{
    cJSON *a = cJSON_CreateObject();
    const cJSON *cand = cJSON_GetObjectItemCaseSensitive(rec, "candidate");
    cJSON_AddStringToObject(a, "variable", k->variable);
    cJSON_AddStringToObject(a, "summary", k->summary);
    cJSON_AddItemToObject(a, "change", cJSON_Duplicate(in->changes, 1));
    cJSON_AddItemToObject(a, "repairs", cJSON_Duplicate(in->repairs, 1));
    cJSON_AddNumberToObject(a, "label", k->label);
    cJSON_AddItemToArray(e->accepted, a);
    if (e->res) {
        mt_tune_result *r = e->res;
        mt_kv **f = realloc(r->accepted_from, (r->n_accepted + 1) * sizeof *f);
        mt_kv **t = f ? realloc(r->accepted_to, (r->n_accepted + 1) * sizeof *t) : NULL;
        if (f)
            r->accepted_from = f;
        if (t) {
            r->accepted_to = t;
            r->accepted_from[r->n_accepted] = mt_kv_dup(e->best);
            r->accepted_to[r->n_accepted++] = mt_kv_dup(k->config);
        }
    }
    mt_kv_destroy(&e->best);
    e->best = mt_kv_dup(k->config);
    e->best_ms = mt_exec_num(cand, "median") * 1000;
    cJSON_Delete(e->best_arm);
    e->best_arm = cJSON_Duplicate(cand, 1);
    /* the gate read its replicates' hottest GPU */
    e->best_peak_gb = mt_exec_num(cJSON_GetObjectItemCaseSensitive(rec, "evidence"), "peak_gb");
}

/* Screens candidate k against the best; accepts through the gate. */
static int screen_candidate(mt__eng *e, const char *phase, mt_candidate *k, const cJSON *wall,
                            int *accepted, double *near_effect)
{
    ab_in in;
    ab_out out;
    char wname[64];
    int rc;
    memset(&in, 0, sizeof in);
    mt_wall_format(k->walls, wname, sizeof wname);
    in.phase = phase;
    in.variable = k->variable;
    in.wall = wname;
    in.ctl = e->best;
    in.cand = k->config;
    in.changes = changes_json(k->sets, e->best);
    in.repairs = changes_json(k->repairs, e->best);
    in.label = k->label;
    in.gate = 1;
    mt__eng_progress(e, "screening %s: %s", k->variable, k->summary);
    rc = ab(e, &in, &out);
    *accepted = 0;
    e->last_worse = rc == 0 && out.have_stats && out.dec.verdict == MT_STATS_WORSE;
    e->last_memory = rc == 0 && refused_for_memory(&out);
    /* a near miss: refused only for being smaller than the minimum effect,
     * with the candidate estimated faster (the bundle below) */
    if (near_effect)
        *near_effect = rc == 0 && !out.accepted && out.have_stats && out.dec.effect < 0 &&
                               below_effect(&out)
                           ? out.dec.effect
                           : 0;
    if (rc == 0) {
        /* an accepted screen's reason starts "accepted: " itself */
        mt__eng_progress(e, "%s %s%s", k->variable, out.accepted ? "" : "rejected: ", out.reason);
        if (out.accepted) {
            *accepted = 1;
            take_change(e, k, &in, out.decision);
        }
    }
    (void)wall;
    cJSON_Delete(in.changes);
    cJSON_Delete(in.repairs);
    return rc;
}

/* How many knobs candidate k changes in the incumbent, repairs included. */
static int knobs_changed(mt__eng *e, const mt_candidate *k)
{
    cJSON *d = diff_json(e->best, k->config);
    int n = cJSON_GetArraySize(d);
    cJSON_Delete(d);
    return n;
}

/* How many of the config's knobs are off the training program's defaults
 * (the owner's default; knobs without one are not counted): the simpler of
 * two configs sets fewer. */
static int off_default(mt__eng *e, const mt_kv *cfg)
{
    const char *k, *v;
    size_t i;
    int n = 0;
    for (i = 0; mt_kv_entry(cfg, i, &k, &v) == 0; i++) {
        const mt_plugin *owner;
        const mt_knob_v1 *kn = mt_registry_knob(e->reg, k, &owner);
        if (kn && kn->default_value && strcmp(kn->default_value, v))
            n++;
    }
    return n;
}

/* Whether value c is the smaller change than value l: fewer knobs off their
 * defaults, and at equal counts fewer knobs changed from the incumbent. */
static int smaller_change(mt__eng *e, const mt_candidate *c, const mt_candidate *l)
{
    int a = off_default(e, c->config), b = off_default(e, l->config);
    return a != b ? a < b : knobs_changed(e, c) < knobs_changed(e, l);
}

/* The gate's reason without its leading "accepted: " (the gate's
 * MT_GATE_ACCEPTED_PREFIX, which every accepted reason has). */
static const char *gate_words(const ab_out *o)
{
    return o->accepted ? o->reason + strlen(MT_GATE_ACCEPTED_PREFIX) : o->reason;
}

static double rec_median(const cJSON *rec, const char *arm)
{
    return mt_exec_num(cJSON_GetObjectItemCaseSensitive(rec, arm), "median");
}

/* Replicates per arm at a multi-arm screen's first look: the design's, or
 * more when the smallest p that many replicates can give (2 / C(2n, n),
 * exact two-sided Mann-Whitney or KS, no ties) is above the first look's
 * share of alpha, which no effect however large could then pass. */
static int arms_initial(mt__eng *e, double alpha)
{
    mt_stats_design ds;
    double a0;
    int n;
    design(e, &ds, 0, 0);
    ds.alpha = alpha;
    a0 = mt_stats_design_alpha(&ds, 0);
    for (n = ds.initial; n < MAX_REPS / 2; n++) {
        double c = 1; /* C(2n, n) */
        int i;
        for (i = 1; i <= n; i++)
            c = c * (n + i) / i;
        if (2 / c <= a0)
            break;
    }
    return n;
}

/* One multi-arm screen's state (screen_arms). */
typedef struct arm_group {
    mt__eng *e;
    mt_candidate **k;
    size_t m, offered, ran, ns, pass;
    arm_pool pool;
    ab_in in[MAX_ARMS], sin[MAX_ARMS];
    ab_out *out, *sout;
    char wname[MAX_ARMS][64], note[MAX_ARMS][400];
    int group, lead, sel_arm[MAX_ARMS], n0;
    double alpha;
} arm_group;

/* Each value's A/B input against the best: its changes, repairs, label,
 * the group's alpha, pool and replicate numbers, one look first. */
static void arms_inputs(arm_group *g, const char *phase)
{
    size_t j;
    for (j = 0; j < g->m; j++) {
        memset(&g->in[j], 0, sizeof g->in[j]);
        mt_wall_format(g->k[j]->walls, g->wname[j], sizeof g->wname[j]);
        g->in[j].phase = phase;
        g->in[j].variable = g->k[j]->variable;
        g->in[j].wall = g->wname[j];
        g->in[j].ctl = g->e->best;
        g->in[j].cand = g->k[j]->config;
        g->in[j].changes = changes_json(g->k[j]->sets, g->e->best);
        g->in[j].repairs = changes_json(g->k[j]->repairs, g->e->best);
        g->in[j].label = g->k[j]->label;
        g->in[j].gate = 1;
        g->in[j].alpha = g->alpha;
        g->in[j].rep_base = g->group;
        g->in[j].pool = &g->pool;
        g->in[j].pending = 1;
        g->in[j].initial = g->n0;
        g->in[j].one_look = 1;
    }
}

/* Every value's first look before any value's further replicates (so
 * that none depends on its place in the order), then more replicates for
 * those undecided at it.  0, or the first A/B's error. */
static int arms_looks(arm_group *g)
{
    size_t j;
    int rc = 0;
    for (j = 0; j < g->m; j++) {
        mt__eng_progress(g->e, "screening %s, value %zu of %zu: %s", g->k[j]->variable, j + 1, g->m,
                     g->k[j]->summary);
        if ((rc = ab(g->e, &g->in[j], &g->out[j])) != 0)
            break;
        g->ran++;
    }
    for (j = 0; rc == 0 && j < g->ran; j++) {
        ab_out *o = &g->out[j];
        if (!(o->have_stats && o->dec.verdict == MT_STATS_UNKNOWN && !o->dec.capped))
            continue;
        /* undecided at the first look: on with more replicates (the first
         * look's runs come from the pool) */
        cJSON_Delete(o->decision), cJSON_Delete(o->stats);
        g->in[j].one_look = 0;
        if ((rc = ab(g->e, &g->in[j], o)) != 0) {
            o->decision = NULL, o->stats = NULL;
            break;
        }
    }
    return rc;
}

/* What each value's screen says (res), and the values that pass the gate
 * (pass; lead: the one with the lowest median). */
static void arms_results(arm_group *g, arm_result *res)
{
    size_t j;
    for (j = 0; j < g->ran; j++) {
        ab_out *o = &g->out[j];
        res[j].screened = 1;
        res[j].worse = o->have_stats && o->dec.verdict == MT_STATS_WORSE;
        res[j].memory = refused_for_memory(o);
        res[j].near = !o->accepted && o->have_stats && o->dec.effect < 0 && below_effect(o)
                          ? o->dec.effect
                          : 0;
        mt__eng_progress(g->e, "%s value %zu %s%s", g->k[j]->variable, j + 1,
                     o->accepted ? "passes the gate: " : "rejected: ", gate_words(o));
        if (o->accepted) {
            g->pass++;
            if (g->lead < 0 || rec_median(o->decision, "candidate") <
                                rec_median(g->out[g->lead].decision, "candidate"))
                g->lead = (int)j;
        }
    }
}

/* The selection A/B of value c against the leader l: why the one leads,
 * the notes both records keep, and the new leader. */
static void select_verdict(arm_group *g, size_t c, int l, const ab_out *so, char *why, size_t whyn)
{
    if (so->have_stats && (so->dec.verdict == MT_STATS_BETTER ||
                           (so->dec.verdict == MT_STATS_SAME &&
                            fabs(so->dec.effect) < g->e->c->min_effect / 2 &&
                            smaller_change(g->e, g->k[c], g->k[l])))) {
        int better = so->dec.verdict == MT_STATS_BETTER;
        snprintf(why, whyn, "value %zu is %s value %d (%+.2f%%, p %.3g, alpha %.3g): "
                 "it leads", c + 1,
                 better ? "faster by at least the minimum effect than"
                        : "the smaller change (fewer knobs off their defaults, or as "
                          "many and fewer changed), the same within the same band and "
                          "within half the minimum effect of",
                 l + 1, 100 * so->dec.effect, so->dec.p, so->dec.alpha_look);
        snprintf(g->note[l], sizeof g->note[l], "value %zu is %s (%+.2f%%, p %.3g)", c + 1,
                 better ? "faster by at least the minimum effect"
                        : "the same within the same band, within half the minimum "
                          "effect, and the smaller change",
                 100 * so->dec.effect, so->dec.p);
        g->lead = (int)c;
    } else {
        const char *how =
            !so->have_stats ? "not compared"
            : so->dec.verdict == MT_STATS_WORSE
                ? "slower than the leader by at least the minimum effect"
            : so->dec.verdict == MT_STATS_SAME
                ? "the same as the leader within the same band (the leader has the "
                  "lower median, or is no larger a change)"
                : "not shown faster than the leader at the replicate cap (the leader "
                  "has the lower median)";
        snprintf(why, whyn, "value %zu is %s (%+.2f%%, p %.3g, alpha %.3g): value "
                 "%d leads", c + 1, how, so->have_stats ? 100 * so->dec.effect : NAN,
                 so->have_stats ? so->dec.p : NAN, so->have_stats ? so->dec.alpha_look : NAN,
                 l + 1);
        snprintf(g->note[c], sizeof g->note[c], "against value %d it is %s (%+.2f%%)", l + 1,
                 how, so->have_stats ? 100 * so->dec.effect : NAN);
    }
}

/* Two or more values pass: each is compared with the leader in turn, by
 * median, at alpha over the passes less one; the winner of each leads.
 * 0, or the first A/B's error. */
static int arms_select(arm_group *g)
{
    size_t j;
    int rc = 0;
    size_t ord[MAX_ARMS], no = 0, a, b;
    double a2 = g->e->c->alpha / (double)(g->pass - 1);
    for (j = 0; j < g->m; j++)
        if (g->out[j].accepted && (int)j != g->lead)
            ord[no++] = j;
    for (a = 1; a < no; a++) /* by median, ascending (a stable insertion sort) */
        for (b = a; b > 0 && rec_median(g->out[ord[b]].decision, "candidate") <
                                 rec_median(g->out[ord[b - 1]].decision, "candidate");
             b--) {
            size_t tmp = ord[b];
            ord[b] = ord[b - 1], ord[b - 1] = tmp;
        }
    for (a = 0; a < no && rc == 0; a++) {
        size_t c = ord[a];
        ab_in *si = &g->sin[g->ns];
        ab_out *so = &g->sout[g->ns];
        char why[600];
        int l = g->lead;
        memset(si, 0, sizeof *si);
        si->phase = "select";
        si->variable = g->k[c]->variable;
        si->wall = g->wname[c];
        si->ctl = g->k[l]->config;
        si->cand = g->k[c]->config;
        si->changes = diff_json(g->k[l]->config, g->k[c]->config);
        si->repairs = cJSON_CreateArray();
        si->label = g->k[c]->label;
        si->alpha = a2;
        si->rep_base = g->group;
        si->pool = &g->pool;
        si->pending = 1;
        mt__eng_progress(g->e, "selecting %s: value %zu against the leader, value %d", g->k[c]->variable,
                     c + 1, l + 1);
        if ((rc = ab(g->e, si, so)) != 0) {
            cJSON_Delete(si->changes), cJSON_Delete(si->repairs);
            break;
        }
        g->sel_arm[g->ns++] = (int)c;
        select_verdict(g, c, l, so, why, sizeof why);
        rec_verdict(so->decision, g->lead == (int)c ? "accepted" : "rejected", why);
        mt__eng_progress(g->e, "select %s: %s", g->k[c]->variable, why);
    }
    return rc;
}

/* The records, the arms first, then the selection's: committed when the
 * screen ran to its end (rc 0), else dropped. */
static void arms_commit(arm_group *g, int rc)
{
    size_t j;
    for (j = 0; j < g->ran; j++) {
        cJSON *rec = g->out[j].decision, *arms = cJSON_CreateObject();
        int chosen = rc == 0 && (int)j == g->lead;
        cJSON_AddNumberToObject(arms, "group", g->group);
        cJSON_AddNumberToObject(arms, "value", (double)(j + 1));
        cJSON_AddNumberToObject(arms, "of", (double)g->m);
        cJSON_AddNumberToObject(arms, "offered", (double)g->offered);
        cJSON_AddNumberToObject(arms, "first_look", g->n0);
        cJSON_AddBoolToObject(arms, "selected", chosen);
        cJSON_AddNumberToObject(arms, "alpha", g->alpha);
        cJSON_AddItemToObject(rec, "arms", arms);
        if (g->out[j].accepted && !chosen) {
            char why[1200];
            snprintf(why, sizeof why,
                     "passed the gate (%.590s), not selected: %.400s; value %d is selected",
                     gate_words(&g->out[j]), g->note[j][0] ? g->note[j] : "the run stopped",
                     g->lead + 1);
            rec_verdict(rec, "rejected", why);
            g->out[j].accepted = 0;
        }
        if (rc == 0)
            ab_commit(g->e, &g->in[j], &g->out[j]);
        else
            cJSON_Delete(rec), cJSON_Delete(g->out[j].stats);
    }
    for (j = 0; j < g->ns; j++) {
        cJSON *arms = cJSON_CreateObject();
        cJSON_AddNumberToObject(arms, "group", g->group);
        cJSON_AddNumberToObject(arms, "value", g->sel_arm[j] + 1);
        cJSON_AddNumberToObject(arms, "of", (double)g->m);
        cJSON_AddNumberToObject(arms, "offered", (double)g->offered);
        cJSON_AddBoolToObject(arms, "selected", rc == 0 && g->sel_arm[j] == g->lead);
        cJSON_AddNumberToObject(arms, "alpha", g->e->c->alpha / (double)(g->pass - 1));
        cJSON_AddItemToObject(g->sout[j].decision, "arms", arms);
        if (rc == 0)
            ab_commit(g->e, &g->sin[j], &g->sout[j]);
        else
            cJSON_Delete(g->sout[j].decision), cJSON_Delete(g->sout[j].stats);
        cJSON_Delete(g->sin[j].changes), cJSON_Delete(g->sin[j].repairs);
    }
}

/* A variable with several values (dispatcher type and backend, SM counts,
 * graph scopes, recompute module sets, layouts) screened as one multi-arm
 * comparison against one matched control, so that which value wins does
 * not depend on the order the plugins propose them in:
 *  1. every arm against the control, on the same control runs (the pool),
 *     each through the full gate at alpha / m: Bonferroni over the m arms,
 *     so the chance of accepting any arm that is not faster stays within
 *     the contract's alpha;
 *  2. among the k arms that pass, the one with the lowest median leads, and
 *     each other is compared with the leader (the statistics alone, at
 *     alpha / (k - 1), on the runs both already have, with more replicates
 *     while undecided): an arm faster than the leader by the minimum effect
 *     replaces it; one slower, or within the minimum effect, does not.
 * This is an indifference-zone selection with the minimum effect as the
 * zone: the arm kept is within the minimum effect of the fastest passing
 * arm unless a follow-up errs, at a rate within alpha.  Every arm's record
 * is in the bundle (arms: group, of, selected), so are the follow-ups
 * (phase "select"), and only the selected arm's verdict is "accepted". */
static int screen_arms(mt__eng *e, const char *phase, mt_candidate **k, size_t m, int *accepted,
                       arm_result *res)
{
    arm_group *g = calloc(1, sizeof *g);
    size_t j;
    int rc = 0;
    *accepted = 0;
    memset(res, 0, m * sizeof *res);
    if (!g || !(g->out = calloc(MAX_ARMS, sizeof *g->out)) ||
        !(g->sout = calloc(MAX_ARMS, sizeof *g->sout))) {
        if (g)
            free(g->out), free(g->sout);
        free(g);
        return -1;
    }
    g->e = e, g->k = k, g->offered = m, g->lead = -1, g->alpha = e->c->alpha;
    /* as many values as the budget affords their first looks, each with the
     * replicates that can reach alpha / m at that look */
    for (; m >= 1; m--) {
        g->alpha = e->c->alpha / (double)m;
        g->n0 = arms_initial(e, g->alpha);
        if (m == 1 || afford(e, (int)(m + 1) * g->n0))
            break;
    }
    g->m = m;
    e->stopped[0] = 0;
    g->group = ++e->seq; /* the group's replicate numbers */
    if (m < g->offered)
        mt__eng_progress(e, "screening %s: %zu of its %zu values (the budget affords %zu) against one "
                     "control, alpha %.3g each (spent over its looks), %d replicates a look first",
                     k[0]->variable, m, g->offered, m, g->alpha, g->n0);
    else
        mt__eng_progress(e, "screening %s: %zu values against one control, alpha %.3g each (spent "
                     "over its looks), %d replicates a look first",
                     k[0]->variable, m, g->alpha, g->n0);
    arms_inputs(g, phase);
    rc = arms_looks(g);
    if (rc == 0)
        arms_results(g, res);
    if (rc == 0 && g->pass >= 2)
        rc = arms_select(g);
    arms_commit(g, rc);
    if (rc == 0 && g->lead >= 0) {
        int lead = g->lead;
        *accepted = 1;
        take_change(e, k[lead], &g->in[lead], g->out[lead].decision);
        mt__eng_progress(e, "%s: value %d selected (%s): %s", k[lead]->variable, lead + 1,
                     k[lead]->summary, gate_words(&g->out[lead]));
    }
    for (j = 0; j < m; j++)
        cJSON_Delete(g->in[j].changes), cJSON_Delete(g->in[j].repairs);
    pool_clear(&g->pool);
    free(g->out), free(g->sout);
    free(g);
    return rc;
}

/* What a candidate the engine put together owns (sets, repairs, config,
 * violations, notes), freed. */
static void built_release(mt_candidate *pc)
{
    mt_kv_destroy(&pc->sets), mt_kv_destroy(&pc->config), mt_kv_destroy(&pc->repairs);
    mt_violations_clear(&pc->violations);
    mt_strlist_clear(&pc->repair_notes);
    mt_strlist_clear(&pc->notes);
}

/* Screens a candidate the engine put together (pc's plugin, variable,
 * summary, walls, label and sets set by the caller) against the incumbent:
 * applied through the repair protocol, and screened when it is legal, in
 * the declared space, may fit, was not tried from this incumbent and the
 * budget affords it.  1 when screened (*accepted, *rc say how it went), 0
 * when it was not, -1 when only the budget stopped it.  Frees what pc owns
 * (sets, repairs, config, violations, notes). */
static int screen_built(mt__eng *e, const char *phase, mt_candidate *pc, const cJSON *wall, tried *t,
                        int *accepted, int *rc)
{
    char kid[17], best_id[17], key[64];
    int screened = 0;
    if (!pc->repairs)
        pc->repairs = mt_kv_new();
    mt_candidate_apply(e->reg, e->c, e->best, pc, e->d);
    mt_config_id(e->best, best_id);
    if (pc->config && !pc->violations.n && label_allowed(e, pc->label) &&
        in_space(e, e->best, pc->config) && may_fit(e, pc->config)) {
        mt_config_id(pc->config, kid);
        snprintf(key, sizeof key, "%s>%s", best_id, kid);
        if (!tried_has(t, key)) {
            mt_stats_design ds;
            design(e, &ds, 0, 0);
            if (!afford(e, 2 * ds.initial)) {
                screened = -1;
            } else {
                tried_add(t, key);
                *rc = screen_candidate(e, phase, pc, wall, accepted, NULL);
                screened = 1;
            }
        }
    }
    built_release(pc);
    return screened;
}

/* A change that is fast but does not fit (the gate's memory refusal, or an
 * OOM) is tried once more together with a change that makes room: each
 * memory-wall candidate and a smaller micro-batch, from the declared space,
 * whose pairing is legal, may fit and was not tried from this incumbent.
 * The pairings are the values of one multi-arm screen (one alone, a plain
 * screen), so the room-maker that costs least wins, whatever the plugins'
 * order; each is disclosed in its decision (variable "X+Y"). */
static int pair_for_memory(mt__eng *e, const char *phase, mt_candidates *cs, size_t pick, tried *t,
                           int *accepted, int *ab_count)
{
    mt_candidate *x = &cs->v[pick], pc[MAX_ARMS], *ks[MAX_ARMS];
    char var[MAX_ARMS][256], sum[MAX_ARMS][600], best_id[17], key[MAX_ARMS][64];
    size_t mi, m = 0, i;
    int rc = 0;
    mt_stats_design ds;
    mt_config_id(e->best, best_id);
    for (mi = 0; mi < cs->n && m < MAX_ARMS; mi++) {
        mt_candidate *mk = &cs->v[mi], *p = &pc[m];
        char kid[17];
        const char *k, *v;
        int lower_mbs = 0;
        if (mi == pick || mk->reject || mk->violations.n || !mk->config ||
            !strcmp(mk->variable, x->variable))
            continue;
        if (!strcmp(mk->variable, "mbs")) {
            const char *now = mt_kv_get(e->best, "micro_batch_size");
            const char *to = mk->sets ? mt_kv_get(mk->sets, "micro_batch_size") : NULL;
            lower_mbs = now && to && atol(to) < atol(now);
        }
        if (!(mk->walls & MT_WALL_MEMORY) && !lower_mbs)
            continue;
        if (!label_allowed(e, mk->label) || !in_space(e, e->best, mk->config))
            continue;
        memset(p, 0, sizeof *p);
        snprintf(var[m], sizeof var[m], "%s+%s", x->variable, mk->variable);
        snprintf(sum[m], sizeof sum[m], "%s, with %s to make room", x->summary, mk->summary);
        p->plugin = x->plugin;
        p->variable = var[m];
        p->summary = sum[m];
        p->walls = x->walls;
        p->label = (x->label | mk->label) & MT_LABEL_BENCHMARK_ONLY ? MT_LABEL_BENCHMARK_ONLY
                                                                    : MT_LABEL_TRAINING_EQUIVALENT;
        p->sets = mt_kv_new();
        p->repairs = mt_kv_new();
        for (i = 0; x->sets && mt_kv_entry(x->sets, i, &k, &v) == 0; i++)
            mt_kv_set(p->sets, k, v);
        for (i = 0; mk->sets && mt_kv_entry(mk->sets, i, &k, &v) == 0; i++)
            mt_kv_set(p->sets, k, v);
        mt_candidate_apply(e->reg, e->c, e->best, p, e->d);
        if (!p->config || p->violations.n || !label_allowed(e, p->label) ||
            !in_space(e, e->best, p->config) || !may_fit(e, p->config)) {
            built_release(p);
            continue;
        }
        mt_config_id(p->config, kid);
        snprintf(key[m], sizeof key[m], "%s>%s", best_id, kid);
        for (i = 0; i < m && strcmp(key[i], key[m]); i++)
            ;
        if (i < m || tried_has(t, key[m])) {
            built_release(p);
            continue;
        }
        m++;
    }
    design(e, &ds, 0, 0);
    if (m > 0 && !afford(e, 2 * ds.initial))
        while (m > 0)
            built_release(&pc[--m]); /* not even one: the budget (screen_arms trims the rest) */
    if (m > 0) {
        for (i = 0; i < m; i++) {
            tried_add(t, key[i]);
            ks[i] = &pc[i];
        }
        if (m == 1) {
            rc = screen_candidate(e, phase, &pc[0], NULL, accepted, NULL);
        } else {
            arm_result ar[MAX_ARMS];
            rc = screen_arms(e, phase, ks, m, accepted, ar);
        }
        (*ab_count)++;
    }
    for (i = 0; i < m; i++)
        built_release(&pc[i]);
    return rc;
}

/* Near misses: changes refused only because each alone was smaller than the
 * minimum effect, though estimated faster.  Several such changes to
 * different knobs can add up to more than the minimum effect, which no
 * one-variable screen would ever see; when the walk runs out of candidates
 * they are screened once more as one change against the incumbent (the
 * decision's variable names them all, and ablation later tests the bundle
 * as a whole). */
#define MAX_NEAR 16
typedef struct near_miss {
    char *variable, *summary;
    mt_kv *sets;
    uint32_t walls, label;
    double effect; /* median(candidate) / median(control) - 1, < 0 */
} near_miss;

typedef struct near_list {
    near_miss v[MAX_NEAR];
    size_t n;
} near_list;

static int kv_same(const mt_kv *a, const mt_kv *b)
{
    const char *k, *v, *w;
    size_t i;
    if (mt_kv_count(a) != mt_kv_count(b))
        return 0;
    for (i = 0; mt_kv_entry(a, i, &k, &v) == 0; i++)
        if (!(w = mt_kv_get(b, k)) || strcmp(v, w))
            return 0;
    return 1;
}

static void near_add(near_list *l, const mt_candidate *k, double effect)
{
    near_miss *m;
    size_t i;
    for (i = 0; i < l->n; i++)
        if (!strcmp(l->v[i].variable, k->variable) && kv_same(l->v[i].sets, k->sets))
            return;
    if (l->n == MAX_NEAR || !k->sets)
        return;
    m = &l->v[l->n++];
    m->variable = strdup(k->variable);
    m->summary = strdup(k->summary ? k->summary : k->variable);
    m->sets = mt_kv_dup(k->sets);
    m->walls = k->walls;
    m->label = k->label;
    m->effect = effect;
}

static void near_clear(near_list *l)
{
    size_t i;
    for (i = 0; i < l->n; i++) {
        free(l->v[i].variable), free(l->v[i].summary);
        mt_kv_destroy(&l->v[i].sets);
    }
    l->n = 0;
}

static int near_cmp(const void *pa, const void *pb)
{
    const near_miss *a = pa, *b = pb;
    return a->effect < b->effect ? -1 : a->effect > b->effect;
}

/* The bundle of the near misses that still change the incumbent, the most
 * promising first; a later one that sets a knob an earlier one set to
 * another value is left out.  1 when a legal bundle of two or more was
 * screened (*accepted tells), 0 when there was none to screen. */
static int screen_near_bundle(mt__eng *e, near_list *l, const cJSON *wall, tried *t, int *accepted,
                              int *rc)
{
    mt_candidate pc;
    char var[512] = "", sum[1200] = "";
    size_t i, used = 0;
    uint32_t label = MT_LABEL_TRAINING_EQUIVALENT;
    *accepted = 0;
    if (l->n < 2)
        return 0;
    qsort(l->v, l->n, sizeof l->v[0], near_cmp);
    memset(&pc, 0, sizeof pc);
    pc.sets = mt_kv_new();
    pc.repairs = mt_kv_new();
    for (i = 0; i < l->n; i++) {
        const char *k, *v, *now;
        size_t j;
        int clash = 0, changes = 0;
        for (j = 0; mt_kv_entry(l->v[i].sets, j, &k, &v) == 0; j++) {
            const char *have = mt_kv_get(pc.sets, k);
            if (have && strcmp(have, v))
                clash = 1;
            now = mt_kv_get(e->best, k);
            changes += !now || strcmp(now, v);
        }
        if (clash || !changes)
            continue;
        for (j = 0; mt_kv_entry(l->v[i].sets, j, &k, &v) == 0; j++)
            mt_kv_set(pc.sets, k, v);
        snprintf(var + strlen(var), sizeof var - strlen(var), "%s%s", used ? "+" : "",
                 l->v[i].variable);
        snprintf(sum + strlen(sum), sizeof sum - strlen(sum), "%s%s (%+.2f%% alone)",
                 used ? "; " : "", l->v[i].summary, 100 * l->v[i].effect);
        pc.walls |= l->v[i].walls;
        if (l->v[i].label & MT_LABEL_BENCHMARK_ONLY)
            label = MT_LABEL_BENCHMARK_ONLY;
        used++;
    }
    if (used >= 2) {
        char v2[560], s2[1300];
        snprintf(v2, sizeof v2, "bundle:%s", var);
        snprintf(s2, sizeof s2, "the near misses together: %s", sum);
        pc.plugin = "bundle";
        pc.variable = v2;
        pc.summary = s2;
        pc.label = label;
        return screen_built(e, "retune", &pc, wall, t, accepted, rc) == 1;
    }
    mt_kv_destroy(&pc.sets), mt_kv_destroy(&pc.repairs);
    return 0;
}

/* The walk is over: the wall of where it ended (profiled now unless it
 * stopped on an error) is walls_after, and walls_before when there was
 * none. */
static void keep_walls(mt__eng *e, cJSON *wall, int rc)
{
    if (!wall && !rc) {
        e->phase = "profile";
        wall = profile_best(e);
    }
    if (wall) {
        cJSON_Delete(e->walls_after);
        e->walls_after = wall;
        if (!e->walls_before)
            e->walls_before = cJSON_Duplicate(wall, 1);
    }
}

/* Profiles the best config for the retune walk: its wall (the first one
 * kept as walls_before), or NULL when the run gave no trace. */
static cJSON *walk_profile(mt__eng *e)
{
    cJSON *wall;
    e->phase = "profile";
    wall = profile_best(e);
    if (wall) {
        mt_job_memo m;
        mt_job_memo_from_json(wall, &m);
        mt__eng_progress(e, "wall: %s (runner-up %s, confidence %.2f): %s", m.wall.wall,
                         m.wall.runner_up, m.wall.confidence, m.wall.reason);
        if (!e->walls_before)
            e->walls_before = cJSON_Duplicate(wall, 1);
    } else {
        mt__eng_progress(e, "the profiled run gave no trace; candidates in plugin order");
    }
    e->phase = "retune";
    return wall;
}

/* The profile as the plugins' evidence: its trace figures, and the ABI's
 * "wall" (the dominant one, which they read to order and pick). */
static void wall_evidence(const cJSON *prof, mt_kv *ev)
{
    const cJSON *x;
    mt_job_memo m;
    mt_job_memo_from_json(prof, &m);
    cJSON_ArrayForEach(x, m.trace)
        mt_kv_set(ev, x->string, cJSON_IsString(x) ? x->valuestring : "");
    mt_kv_set(ev, "wall", m.wall.wall);
}

/* Which of cs may be screened from the best now (ok[i] 1; 2: alone it does
 * not fit, a pairing may), and the one to screen first: the first of the
 * dominant wall's (any layout change while scaling).  (size_t)-1: none. */
static size_t walk_pick(mt__eng *e, const mt_candidates *cs, char *ok, tried *t,
                        const char *best_id, int scale_left, const cJSON *wall)
{
    size_t i, pick = (size_t)-1;
    int best_rank = 99;
    for (i = 0; i < cs->n; i++) {
        const mt_candidate *k = &cs->v[i];
        char key[64], kid[17];
        int is_layout = !strcmp(k->plugin, "folding"), rank;
        if (k->reject || k->violations.n || !k->config)
            continue;
        if (!label_allowed(e, k->label) || !in_space(e, e->best, k->config))
            continue;
        if (scale_left > 0 && !is_layout)
            continue;
        mt_config_id(k->config, kid);
        snprintf(key, sizeof key, "%s>%s", best_id, kid);
        if (!strcmp(kid, best_id) || tried_has(t, key) || tried_count(t, k, best_id) >= 3 ||
            tried_count(t, k, best_id) < 0)
            continue;
        if (!may_fit(e, k->config)) {
            ok[i] = 2;
            continue;
        }
        ok[i] = 1;
        rank = scale_left > 0 ? 0 : wall_rank(k->walls, wall);
        if (rank < best_rank) {
            best_rank = rank;
            pick = i;
        }
    }
    return pick;
}

/* The walk is out of changes that fit alone: those the estimate says do
 * not fit, each paired with the changes that make room, the dominant
 * wall's first, until one is accepted. */
static int walk_pairings(mt__eng *e, const char *phase, mt_candidates *cs, const char *ok,
                         tried *t, const char *best_id, const cJSON *wall, int *accepted,
                         int *ab_count)
{
    int r, rc = 0;
    size_t i;
    for (r = 0; r <= 2 && !*accepted && rc == 0; r++)
        for (i = 0; i < cs->n && !*accepted && rc == 0; i++) {
            char ck[1024], room[1100];
            if (!ok || ok[i] != 2 || wall_rank(cs->v[i].walls, wall) != r)
                continue;
            change_key(&cs->v[i], ck, sizeof ck);
            snprintf(room, sizeof room, "room|%s|%s", best_id, ck);
            if (tried_has(t, room))
                continue;
            tried_add(t, room);
            e->phase = phase;
            rc = pair_for_memory(e, phase, cs, i, t, accepted, ab_count);
        }
    return rc;
}

/* k is screened from the best: neither its config nor its change again. */
static void mark_tried(const mt_candidate *k, const char *best_id, tried *t)
{
    char kid[17], key[64], ck[1024];
    mt_config_id(k->config, kid);
    snprintf(key, sizeof key, "%s>%s", best_id, kid);
    tried_add(t, key);
    change_key(k, ck, sizeof ck);
    tried_add(t, ck);
}

/* k measured slower than the best: not screened again from it. */
static void mark_slower(const mt_candidate *k, const char *best_id, tried *t)
{
    char ck[1024], slow[1100];
    change_key(k, ck, sizeof ck);
    snprintf(slow, sizeof slow, "slower|%s|%s", best_id, ck);
    tried_add(t, slow);
}

/* One multi-arm screen of a variable's values (cs's arm[0..m-1]) against
 * the best, and what it leaves: the tried marks, the near misses, and the
 * pairings of every value refused for memory. */
static int walk_arms(mt__eng *e, const char *phase, mt_candidates *cs, const size_t *arm,
                     size_t m, const char *best_id, tried *t, near_list *nl, int *accepted,
                     int *ab_count)
{
    mt_candidate *ks[MAX_ARMS];
    arm_result ar[MAX_ARMS];
    size_t i;
    int rc;
    for (i = 0; i < m; i++)
        ks[i] = &cs->v[arm[i]];
    rc = screen_arms(e, phase, ks, m, accepted, ar);
    if (rc == 0 && *accepted) {
        /* the group compared the new best with its other values
         * already: none is screened again from it */
        char nid[17], kid[17], key[64];
        mt_config_id(e->best, nid);
        for (i = 0; i < m; i++) {
            mt_config_id(ks[i]->config, kid);
            snprintf(key, sizeof key, "%s>%s", nid, kid);
            if (strcmp(kid, nid))
                tried_add(t, key);
        }
    }
    for (i = 0; rc == 0 && i < m; i++) {
        if (ar[i].worse)
            mark_slower(ks[i], best_id, t);
        if (!*accepted && ar[i].near < 0 && !strcmp(phase, "retune"))
            near_add(nl, ks[i], ar[i].near);
    }
    (*ab_count)++;
    for (i = 0; rc == 0 && !*accepted && i < m && !strcmp(phase, "retune"); i++)
        if (ar[i].memory)
            rc = pair_for_memory(e, phase, cs, arm[i], t, accepted, ab_count);
    return rc;
}

/* One A/B of cs's pick against the best, and what it leaves (as above). */
static int walk_one(mt__eng *e, const char *phase, mt_candidates *cs, size_t pick,
                    const cJSON *wall, const char *best_id, tried *t, near_list *nl,
                    int *accepted, int *ab_count)
{
    double near_effect = 0;
    int rc = screen_candidate(e, phase, &cs->v[pick], wall, accepted, &near_effect);
    if (rc == 0 && !*accepted && near_effect < 0 && !strcmp(phase, "retune"))
        near_add(nl, &cs->v[pick], near_effect);
    if (rc == 0 && !*accepted && e->last_worse)
        mark_slower(&cs->v[pick], best_id, t);
    (*ab_count)++;
    if (rc == 0 && !*accepted && e->last_memory && !strcmp(phase, "retune"))
        rc = pair_for_memory(e, phase, cs, pick, t, accepted, ab_count);
    return rc;
}

/* Scale (the folding plugin's layouts) and retune (every other plugin, the
 * dominant wall's first): one variable per screen until nothing passes, then
 * the near misses as one change. */
static int phase_search(mt__eng *e)
{
    tried t = {0};
    near_list nl;
    cJSON *wall = NULL;
    char *ok = NULL; /* which of the walk's candidates may be screened now */
    size_t arm[MAX_ARMS], m;
    int ab_count = 0, scale_left = 3, rc = 0;
    nl.n = 0;
    e->phase = "scale";
    for (;;) {
        mt_candidates cs = {0};
        mt_kv *ev = mt_kv_new();
        size_t i, pick = (size_t)-1;
        int accepted = 0;
        char best_id[17];
        const char *phase = scale_left > 0 ? "scale" : "retune";
        if (!strcmp(phase, "retune") && !wall)
            wall = walk_profile(e);
        if (wall)
            wall_evidence(wall, ev);
        if (ab_count >= MAX_AB) {
            snprintf(e->stopped, sizeof e->stopped, "the decision cap (%d A/B tests)", MAX_AB);
            mt_kv_destroy(&ev);
            break;
        }
        mt_config_id(e->best, best_id);
        {
            size_t before = mt_diag_count(e->d);
            mt_candidates_for(e->reg, e->c, e->best, ev, 0, &cs, e->d);
            warn_plugin_failures(e, before);
        }
        mt_kv_destroy(&ev);
        free(ok);
        ok = calloc(cs.n + 1, 1);
        if (ok)
            pick = walk_pick(e, &cs, ok, &t, best_id, scale_left, wall);
        if (pick == (size_t)-1 && scale_left <= 0 && ab_count < MAX_AB) {
            /* the walk is out of changes that fit alone: those the estimate
             * says do not fit, each paired with the changes that make room,
             * the dominant wall's first */
            rc = walk_pairings(e, phase, &cs, ok, &t, best_id, wall, &accepted, &ab_count);
            if (rc || accepted) {
                mt_candidates_clear(&cs);
                if (rc)
                    break;
                cJSON_Delete(wall);
                wall = NULL; /* re-profile the new best, and walk on from it */
                continue;
            }
        }
        if (pick == (size_t)-1) {
            mt_candidates_clear(&cs);
            if (scale_left > 0) {
                scale_left = 0;
                continue;
            }
            if (ab_count < MAX_AB && screen_near_bundle(e, &nl, wall, &t, &accepted, &rc)) {
                ab_count++;
                near_clear(&nl);
                if (rc)
                    break;
                if (accepted) {
                    cJSON_Delete(wall);
                    wall = NULL; /* re-profile the new best, and walk on from it */
                    continue;
                }
            }
            snprintf(e->stopped, sizeof e->stopped, "no further candidate passes the gate");
            break;
        }
        /* the pick's variable's other values: one multi-arm screen */
        arm[0] = pick, m = 1;
        for (i = 0; i < cs.n && m < MAX_ARMS; i++)
            if (i != pick && ok[i] == 1 && !strcmp(cs.v[i].variable, cs.v[pick].variable))
                arm[m++] = i;
        {
            mt_stats_design ds;
            design(e, &ds, 0, 0);
            if (!afford(e, 2 * ds.initial)) {
                mt_candidates_clear(&cs);
                break;
            }
        }
        for (i = 0; i < m; i++)
            mark_tried(&cs.v[arm[i]], best_id, &t);
        e->phase = phase;
        if (m > 1)
            rc = walk_arms(e, phase, &cs, arm, m, best_id, &t, &nl, &accepted, &ab_count);
        else
            rc = walk_one(e, phase, &cs, pick, wall, best_id, &t, &nl, &accepted, &ab_count);
        if (rc == 0 && accepted) {
            /* the accepted screen measured the old best against the new:
             * going back is not screened from it */
            char nid[17], key[64];
            mt_config_id(e->best, nid);
            snprintf(key, sizeof key, "%s>%s", nid, best_id);
            tried_add(&t, key);
        }
        mt_candidates_clear(&cs);
        if (rc)
            break;
        if (scale_left > 0)
            scale_left--;
        if (accepted && !strcmp(phase, "retune")) {
            cJSON_Delete(wall);
            wall = NULL; /* re-profile the new best */
        }
    }
    keep_walls(e, wall, rc);
    tried_free(&t);
    near_clear(&nl);
    free(ok);
    return rc;
}

/* "knob=value knob=value" of an accepted change (its ablation row's "to") */
static void change_text(const cJSON *a, char *to, size_t n)
{
    const cJSON *x;
    size_t off = 0;
    to[0] = '\0';
    cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(a, "change"))
    {
        /* a value with a space ("attn moe_router") or none is quoted */
        const char *v = mt_exec_str(x, "to"), *q = !*v || strchr(v, ' ') ? "\"" : "";
        off += (size_t)snprintf(to + off, off < n ? n - off : 0, "%s%s=%s%s%s", off ? " " : "",
                                mt_exec_str(x, "knob"), q, v, q);
    }
}

/* An ablation row that measured nothing: kept or not, and why. */
static void row_unmeasured(cJSON *row, int kept, const char *reason)
{
    cJSON_AddNullToObject(row, "gain_without");
    cJSON_AddNullToObject(row, "p_value");
    cJSON_AddBoolToObject(row, "kept", kept);
    cJSON_AddStringToObject(row, "reason", reason);
}

/* Why an ablation kept or dropped its change (drop), from its A/B out; part:
 * the knobs of it the winner still holds when a later change superseded
 * the rest (NULL: all of them). */
static void ablation_why(const mt__eng *e, const ab_out *out, int drop, const char *part,
                         char *why, size_t n)
{
    char kept_same[200] = "";
    if (!drop && out->have_stats && out->dec.verdict == MT_STATS_SAME)
        snprintf(kept_same, sizeof kept_same,
                 out->dec.effect >= e->c->min_effect / 2
                     ? "kept: without it the steps are %.2f%% longer, within the same band "
                       "but not under half the minimum effect"
                     : "kept: without it the steps are %.2f%% longer, within the same band "
                       "but shown longer (interval %.2f%% to %.2f%%)",
                 100 * out->dec.effect, 100 * out->dec.ci_lo, 100 * out->dec.ci_hi);
    if (drop && out->dec.verdict == MT_STATS_UNKNOWN)
        snprintf(kept_same, sizeof kept_same,
                 "removing it is faster: without it the steps are %.2f%% shorter (interval "
                 "%.2f%% to %.2f%%), undecided against the minimum effect at the replicate "
                 "cap: dropped",
                 -100 * out->dec.effect, -100 * out->dec.ci_hi, -100 * out->dec.ci_lo);
    snprintf(why, n, "%s%s%s%s",
             drop ? (kept_same[0] ? kept_same : "removing it does not hurt: dropped")
             : kept_same[0] ? kept_same
                            : out->reason,
             part ? " (partly superseded: the winner holds only " : "", part ? part : "",
             part ? " of it)" : "");
}

/* Ablates one accepted change a against the winner: the ablation row in
 * *row_out, *superseded set when the winner holds none of its knobs at the
 * change's values (nothing to remove, nothing measured).  0, or -1 when the
 * executor failed. */
static int ablate_one(mt__eng *e, const cJSON *a, cJSON **row_out, int *superseded)
{
    mt_candidate k;
    cJSON *x;
    ab_in in;
    ab_out out;
    cJSON *row = cJSON_CreateObject();
    char to[512], part[600] = "";
    int rc = 0, live = 0, all = 0;
    *row_out = row;
    *superseded = 0;
    memset(&k, 0, sizeof k);
    k.plugin = "ablation";
    k.variable = (char *)mt_exec_str(a, "variable");
    k.sets = mt_kv_new();
    k.repairs = mt_kv_new();
    /* only the knobs the winner holds at this change's value: a later
     * change to the same knob superseded the rest */
    cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(a, "change"))
    {
        const char *now = mt_kv_get(e->best, mt_exec_str(x, "knob"));
        all++;
        if (now && !strcmp(now, mt_exec_str(x, "to"))) {
            mt_kv_set(k.sets, mt_exec_str(x, "knob"), mt_exec_str(x, "from"));
            snprintf(part + strlen(part), sizeof part - strlen(part), "%s%s=%s", live ? " " : "",
                     mt_exec_str(x, "knob"), mt_exec_str(x, "to"));
            live++;
        }
    }
    change_text(a, to, sizeof to);
    cJSON_AddStringToObject(row, "knob", mt_exec_str(a, "variable"));
    cJSON_AddStringToObject(row, "to", to);
    if (!live) {
        /* nothing of it is in the winner: said, not measured */
        row_unmeasured(row, 0, "superseded: later accepted changes set every knob it changed to "
                               "other values, so the winner does not hold it");
        *superseded = 1;
        mt_kv_destroy(&k.sets), mt_kv_destroy(&k.repairs);
        return 0;
    }
    mt_candidate_apply(e->reg, e->c, e->best, &k, e->d);
    if (k.reject || k.violations.n || !k.config) {
        row_unmeasured(row, 1, "cannot be removed alone (illegal without it)");
        goto done;
    }
    {
        mt_stats_design ds;
        design(e, &ds, 0, 0);
        if (!afford(e, 2 * ds.initial)) {
            row_unmeasured(row, 1, "not ablated: budget");
            e->not_ablated++;
            goto done;
        }
    }
    memset(&in, 0, sizeof in);
    in.phase = "ablate";
    in.variable = mt_exec_str(a, "variable");
    in.ctl = e->best;
    in.cand = k.config;
    in.changes = diff_json(e->best, k.config);
    in.repairs = cJSON_CreateArray();
    in.label = MT_LABEL_TRAINING_EQUIVALENT;
    in.gate = 0;
    mt__eng_progress(e, "ablating %s", in.variable);
    rc = ab(e, &in, &out);
    if (rc == 0) {
        int drop = out.have_stats && ablation_drops(e, &out.dec);
        char why[900];
        if (out.have_stats) {
            cJSON_AddNumberToObject(row, "gain_without", -out.dec.effect);
            cJSON_AddNumberToObject(row, "p_value", out.dec.p);
        } else {
            cJSON_AddNullToObject(row, "gain_without");
            cJSON_AddNullToObject(row, "p_value");
        }
        cJSON_AddBoolToObject(row, "kept", !drop);
        ablation_why(e, &out, drop, live < all ? part : NULL, why, sizeof why);
        cJSON_AddStringToObject(row, "reason", why);
        mt__eng_progress(e, "%s %s", in.variable, drop ? "dropped" : "kept");
        if (drop) {
            const cJSON *arm = cJSON_GetObjectItemCaseSensitive(out.decision, "candidate");
            cJSON_Delete(e->best_arm);
            e->best_arm = cJSON_Duplicate(arm, 1);
            e->best_ms = mt_exec_num(arm, "median") * 1000;
            mt_kv_destroy(&e->best);
            e->best = mt_kv_dup(k.config);
            e->best_peak_gb = NAN; /* the ablation's statistics read no peak */
        }
    }
    cJSON_Delete(in.changes), cJSON_Delete(in.repairs);
done:
    mt_kv_destroy(&k.sets), mt_kv_destroy(&k.config), mt_kv_destroy(&k.repairs);
    mt_violations_clear(&k.violations);
    mt_strlist_clear(&k.repair_notes);
    return rc;
}

/* Ablate: each accepted change removed from the winner once, in order.  A
 * change a later one superseded can come back when that later one is
 * dropped (its "from" is the earlier change's value): such changes are
 * ablated again once the pass is over, until none comes back. */
static int phase_ablate(mt__eng *e)
{
    cJSON *a;
    int rc = 0, i = 0, again = 1, n = cJSON_GetArraySize(e->accepted);
    int *sup = calloc((size_t)(n > 0 ? n : 1), sizeof *sup);
    e->phase = "ablate";
    e->ablating = 1;
    e->ablate_left = n;
    cJSON_ArrayForEach(a, e->accepted)
    {
        cJSON *row;
        e->ablate_left--; /* this one's runs are afford()'s n, the rest stay reserved */
        rc = ablate_one(e, a, &row, &sup[i]);
        cJSON_AddItemToArray(e->ablation, row);
        i++;
        if (rc)
            break;
    }
    while (rc == 0 && again) {
        again = 0;
        for (i = 0; i < n && rc == 0; i++) {
            const cJSON *x;
            int back = 0;
            if (!sup || !sup[i])
                continue;
            a = cJSON_GetArrayItem(e->accepted, i);
            cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(a, "change"))
            {
                const char *now = mt_kv_get(e->best, mt_exec_str(x, "knob"));
                back |= now && !strcmp(now, mt_exec_str(x, "to"));
            }
            if (back) {
                cJSON *row;
                rc = ablate_one(e, a, &row, &sup[i]);
                cJSON_ReplaceItemInArray(e->ablation, i, row);
                again = 1;
            }
        }
    }
    free(sup);
    e->ablating = 0;
    return rc;
}

/* A GPU's place in the mesh (Megatron's default order, pipeline outermost,
 * then data/expert groups, TP innermost): its pipeline stage and its
 * expert-parallel rank. */
typedef struct gpu_role {
    long stage, expert;
} gpu_role;

static gpu_role role_of(const mt_mesh *m, long rank)
{
    gpu_role r;
    long stage_size = m->pp > 0 && m->world >= m->pp ? m->world / m->pp : m->world;
    long etp = m->etp > 0 ? m->etp : 1, ep = m->ep > 0 ? m->ep : 1;
    if (stage_size < 1)
        stage_size = 1;
    r.stage = rank / stage_size;
    if (m->pp > 0 && r.stage >= m->pp)
        r.stage = m->pp - 1;
    r.expert = (rank % stage_size / etp) % ep;
    return r;
}

/* "first stage" / "middle stages" / "last stage" / "every stage". */
static const char *stage_role(const mt_mesh *m, long stage)
{
    if (m->pp <= 1)
        return "every stage";
    return stage == 0 ? "first stage" : stage == m->pp - 1 ? "last stage" : "middle stages";
}

static int dbl_less(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median peak of the GPUs whose stage role is that of stage (NAN: none). */
static double role_median(const mt_mesh *m, const double *gb, long n, long stage)
{
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v), med;
    long i, k = 0;
    const char *want = stage_role(m, stage);
    if (!v)
        return NAN;
    for (i = 0; i < n; i++)
        if (isfinite(gb[i]) && !strcmp(stage_role(m, role_of(m, i).stage), want))
            v[k++] = gb[i];
    qsort(v, (size_t)k, sizeof *v, dbl_less);
    med = k ? (k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2) : NAN;
    free(v);
    return med;
}

static void add_role(cJSON *roles, const char *role, long rank, double gb, double median)
{
    cJSON *x = cJSON_CreateObject();
    cJSON_AddStringToObject(x, "role", role);
    cJSON_AddNumberToObject(x, "rank", (double)rank);
    cJSON_AddNumberToObject(x, "peak_gb", gb);
    add_gb(x, "median_gb", median);
    cJSON_AddItemToArray(roles, x);
}

/* The memory of one validation run (search/BUNDLE.md memory[]): every
 * GPU's peak from the store's rows of the run (NVML, the sim's report or the
 * log's per-rank lines; measure.c collects them), indexed by global rank;
 * the hottest GPU named with its place in the mesh and why it is the
 * hottest; the hottest GPU of each role (pipeline stage first / middle /
 * last, and a hot expert rank: one above its stage's median). */
static cJSON *memory_json(mt__eng *e, const char *name, const cJSON *job, const mt_kv *cfg)
{
    cJSON *o = cJSON_CreateObject(), *a = cJSON_CreateArray(), *roles = cJSON_CreateArray();
    mt_job_memo jm;
    double cap = hbm_gb(e), p, run, *gb;
    long world = strtol(mt_kv_get(e->c->hardware, "world_size"), NULL, 10), i, hot = -1;
    mt_store_gpu_mem *rows = NULL;
    size_t nrows = 0, r;
    const char *source = "none";
    mt_mesh mesh;
    mt_job_memo_from_json(job, &jm);
    p = jm.peak_gb, run = jm.run_id;
    if (world < 1)
        world = 1;
    gb = malloc((size_t)world * sizeof *gb);
    for (i = 0; gb && i < world; i++)
        gb[i] = NAN;
    if (gb && isfinite(run) && run >= 0 &&
        mt_store_gpu_memory(e->st, (int64_t)run, &rows, &nrows, e->d) == 0) {
        for (r = 0; r < nrows; r++)
            if (rows[r].rank >= 0 && rows[r].rank < world && rows[r].peak_bytes > 0) {
                gb[rows[r].rank] = (double)rows[r].peak_bytes / 1e9;
                source = rows[r].source ? rows[r].source : "none";
            }
    }
    if (gb && !strcmp(source, "none") && isfinite(p)) {
        /* no rows (the model executor): the hottest GPU's figure alone */
        double pr = jm.peak_rank;
        if (isfinite(pr) && pr >= 0 && pr < world) {
            gb[(long)pr] = p;
            source = "peak";
        }
    }
    mt_config_mesh(cfg, e->c->hardware, &mesh);
    if (mesh.world != world)
        mesh.world = world;
    for (i = 0; gb && i < world; i++) {
        if (isfinite(gb[i]) && (hot < 0 || gb[i] > gb[hot]))
            hot = i;
        cJSON_AddItemToArray(a, isfinite(gb[i]) ? cJSON_CreateNumber(gb[i]) : cJSON_CreateNull());
    }
    cJSON_AddStringToObject(o, "name", name);
    cJSON_AddNumberToObject(o, "capacity_gb", isfinite(cap) ? cap : 0);
    cJSON_AddNumberToObject(o, "headroom_gb", isfinite(cap) ? cap * e->c->memory_headroom : 0);
    cJSON_AddItemToObject(o, "per_gpu_gb", a);
    cJSON_AddStringToObject(o, "source", source);
    if (hot >= 0) {
        static const char *const stage_roles[] = {"first stage", "middle stages", "last stage",
                                                  "every stage"};
        cJSON *h = cJSON_AddObjectToObject(o, "hottest");
        gpu_role hr = role_of(&mesh, hot);
        double med = role_median(&mesh, gb, world, hr.stage), excess = -INFINITY;
        long hot_expert = -1, k;
        char why[512];
        size_t off;
        for (k = 0; k < 4; k++) {
            long best = -1;
            for (i = 0; i < world; i++)
                if (isfinite(gb[i]) &&
                    !strcmp(stage_role(&mesh, role_of(&mesh, i).stage), stage_roles[k]) &&
                    (best < 0 || gb[i] > gb[best]))
                    best = i;
            if (best >= 0)
                add_role(roles, stage_roles[k], best, gb[best],
                         role_median(&mesh, gb, world, role_of(&mesh, best).stage));
        }
        /* the hot expert rank: the GPU furthest above its stage's median,
         * when an expert rank stands out (> 1%) */
        for (i = 0; mesh.ep > 1 && i < world; i++) {
            double m = isfinite(gb[i]) ? role_median(&mesh, gb, world, role_of(&mesh, i).stage)
                                       : NAN;
            if (isfinite(m) && gb[i] - m > excess) {
                excess = gb[i] - m;
                hot_expert = i;
            }
        }
        if (hot_expert >= 0 && excess > 0.01 * gb[hot_expert])
            add_role(roles, "hot expert rank", hot_expert, gb[hot_expert], gb[hot_expert] - excess);
        cJSON_AddNumberToObject(h, "rank", (double)hot);
        cJSON_AddNumberToObject(h, "peak_gb", gb[hot]);
        cJSON_AddNumberToObject(h, "stage", (double)hr.stage + 1);
        cJSON_AddNumberToObject(h, "stages", (double)(mesh.pp > 0 ? mesh.pp : 1));
        cJSON_AddNumberToObject(h, "expert_rank", (double)hr.expert);
        cJSON_AddNumberToObject(h, "expert_ranks", (double)(mesh.ep > 0 ? mesh.ep : 1));
        cJSON_AddStringToObject(h, "role", stage_role(&mesh, hr.stage));
        if (mesh.pp > 1)
            off = (size_t)snprintf(why, sizeof why, "pipeline stage %ld of %ld%s", hr.stage + 1,
                                   mesh.pp,
                                   hr.stage == 0 ? " (the first holds the embedding and the "
                                                   "most microbatches in flight)"
                                   : hr.stage == mesh.pp - 1 ? " (the last holds the output "
                                                               "layer and the loss)"
                                                             : "");
        else
            off = (size_t)snprintf(why, sizeof why, "no pipeline parallelism: one stage");
        if (mesh.ep > 1 && off < sizeof why)
            off += (size_t)snprintf(why + off, sizeof why - off, ", expert rank %ld of %ld",
                                    hr.expert, mesh.ep);
        if (!strcmp(source, "peak") && off < sizeof why)
            snprintf(why + off, sizeof why - off,
                     "; the run reported its hottest GPU only, no other GPU's figure");
        else if (isfinite(med) && gb[hot] - med > 0.01 * gb[hot] && off < sizeof why)
            snprintf(why + off, sizeof why - off,
                     "; %.1f GB above the median GPU of its stage (%.1f GB)%s", gb[hot] - med, med,
                     mesh.ep > 1 ? ": its expert rank holds more routed tokens than the others"
                                 : "");
        else if (off < sizeof why)
            snprintf(why + off, sizeof why - off,
                     "; its stage's GPUs are within 1%% of it: the stage itself is the hottest");
        cJSON_AddStringToObject(h, "why", why);
    } else {
        cJSON_AddNullToObject(o, "hottest");
    }
    cJSON_AddItemToObject(o, "roles", roles);
    mt_store_gpu_memory_free(rows, nrows);
    free(gb);
    return o;
}

/* A config's label and the settings that make it so, into o (label,
 * label_reasons). */
static void add_label(mt__eng *e, cJSON *o, const mt_kv *cfg, int routing)
{
    mt_strlist why = {0};
    uint32_t label = mt_label_config(e->c, cfg, routing, &why);
    cJSON *a = cJSON_CreateArray();
    size_t i;
    for (i = 0; i < why.n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(why.v[i]));
    cJSON_AddStringToObject(o, "label", mt_label_word(label));
    cJSON_AddItemToObject(o, "label_reasons", a);
    mt_strlist_clear(&why);
}

/* Whether validation can add natural-routing arms: the contract forces
 * balance, does not switch them off, and the backend can route naturally
 * (the sim models it; a real stack needs real data).  0 with the reason in
 * why otherwise. */
static int natural_possible(mt__eng *e, char *why, size_t n)
{
    const char *ds = mt_kv_get(e->c->data, "dataset");
    if (e->c->routing == MT_ROUTING_NATURAL) {
        snprintf(why, n,
                 "data.routing = \"natural\": the validation itself measures the "
                 "router's own routing");
        return 0;
    }
    if (!e->c->natural_validation) {
        snprintf(why, n, "switched off by data.natural_validation = false (the contract)");
        return 0;
    }
    if (!strcmp(e->c->backend, "sim"))
        return 1;
    if (!strcmp(e->c->backend, "command") && !(ds && !strcmp(ds, "mock")))
        return 1;
    if (!strcmp(e->c->backend, "command"))
        snprintf(why, n,
                 "skipped: a real stack with mock data (data.dataset = \"mock\") has no "
                 "natural routing to run, the router would route synthetic tokens");
    else
        snprintf(why, n, "skipped: the %s backend runs no router on training data", e->c->backend);
    return 0;
}

/* cfg with the router's own routing (no forced load balancing); NULL with
 * the reason in why when that is illegal.  Caller frees. */
static mt_kv *natural_config(mt__eng *e, const mt_kv *cfg, const char *name, char *why, size_t n)
{
    mt_kv *k = mt_kv_dup(cfg);
    mt_violations vs = {0};
    const char *v = mt_kv_get(k, "moe_router_force_load_balancing");
    if (v && strcmp(v, "false"))
        mt_kv_set(k, "moe_router_force_load_balancing", "false");
    mt_legality(e->reg, e->c, k, &vs, NULL);
    if (vs.n) {
        snprintf(why, n, "skipped: the %s is illegal without forced load balancing (%s: %s)", name,
                 vs.v[0].rule, vs.v[0].message);
        mt_kv_destroy(&k);
    }
    mt_violations_clear(&vs);
    return k;
}

/* The natural-routing validation (bundle validation.natural): baseline and
 * winner again, each with the router's own routing, over the same window
 * and replicates as the validation; its gain is the training-equivalent
 * figure beside the forced-routing one.  NULL when the contract's routing is
 * natural already (nothing to add); else an object whose status says
 * whether it was measured and, when not, why. */
static cJSON *natural_validate(mt__eng *e, const mt_kv *base, int compare, int *rc)
{
    cJSON *o, *a;
    mt_kv *nb = NULL, *nw = NULL;
    char why[800] = "";
    ab_in in;
    ab_out out;
    mt_stats_design ds;
    *rc = 0;
    if (e->c->routing == MT_ROUTING_NATURAL)
        return NULL;
    e->validated = 1; /* what it reserved is this */
    o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "routing", "natural");
    if (!natural_possible(e, why, sizeof why)) {
        cJSON_AddStringToObject(o, "status", e->c->natural_validation ? "skipped" : "off");
    } else if (!compare) {
        cJSON_AddStringToObject(o, "status", "skipped");
        snprintf(why, sizeof why,
                 "skipped: no change passed the gate, so there is no winner to "
                 "compare");
    } else if (!(nb = natural_config(e, base, "baseline", why, sizeof why)) ||
               !(nw = natural_config(e, e->best, "winner", why, sizeof why))) {
        cJSON_AddStringToObject(o, "status", "skipped");
    } else if (design(e, &ds, 1, 0), !afford(e, 2 * ds.initial)) {
        cJSON_AddStringToObject(o, "status", "skipped");
        snprintf(why, sizeof why, "skipped: budget (%s)", e->stopped);
    }
    if (why[0]) {
        cJSON_AddStringToObject(o, "reason", why);
        cJSON_AddNullToObject(o, "baseline");
        cJSON_AddNullToObject(o, "winner");
        cJSON_AddNullToObject(o, "gain");
        cJSON_AddNullToObject(o, "ci");
        cJSON_AddNullToObject(o, "p_value");
        cJSON_AddBoolToObject(o, "confirmed", 0);
        add_label(e, o, e->best, MT_ROUTING_NATURAL);
        mt__eng_progress(e, "natural-routing validation %s", why);
        mt_kv_destroy(&nb), mt_kv_destroy(&nw);
        return o;
    }
    memset(&in, 0, sizeof in);
    in.phase = "validate";
    in.variable = "winner (natural routing)";
    in.ctl = nb;
    in.cand = nw;
    in.changes = diff_json(nb, nw);
    in.repairs = cJSON_CreateArray();
    in.label = MT_LABEL_TRAINING_EQUIVALENT;
    in.validate = 1;
    in.routing = "natural";
    mt__eng_progress(e,
                 "validating the winner against the baseline with natural routing over steps "
                 "%d-%d",
                 e->c->validate.first, e->c->validate.last);
    if ((*rc = ab(e, &in, &out)) != 0) {
        cJSON_Delete(in.changes), cJSON_Delete(in.repairs), cJSON_Delete(o);
        mt_kv_destroy(&nb), mt_kv_destroy(&nw);
        return NULL;
    }
    cJSON_AddStringToObject(o, "status", "measured");
    a = out.decision;
    cJSON_AddItemToObject(o, "baseline",
                          cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(a, "control"), 1));
    cJSON_AddItemToObject(o, "winner",
                          cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(a, "candidate"), 1));
    cJSON_AddItemToObject(o, "ci", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(a, "ci"), 1));
    if (out.have_stats) {
        cJSON_AddNumberToObject(o, "gain", -out.dec.effect);
        cJSON_AddNumberToObject(o, "p_value", out.dec.p);
    } else {
        cJSON_AddNullToObject(o, "gain");
        cJSON_AddNullToObject(o, "p_value");
    }
    cJSON_AddBoolToObject(o, "confirmed", out.have_stats && out.dec.verdict == MT_STATS_BETTER);
    if (out.have_stats)
        cJSON_AddStringToObject(o, "verdict", mt_stats_verdict_name(out.dec.verdict));
    else
        cJSON_AddNullToObject(o, "verdict");
    if (out.have_stats)
        snprintf(why, sizeof why,
                 "with natural routing the winner's steps are %.1f%% %s "
                 "(%.600s)",
                 100 * fabs(out.dec.effect), out.dec.effect <= 0 ? "shorter" : "longer",
                 out.reason);
    else if (out.refusal == AB_CANDIDATE_FAILED)
        snprintf(why, sizeof why, "with natural routing the winner's %s", out.failure);
    else if (out.refusal == AB_CONTROL_FAILED)
        snprintf(why, sizeof why, "with natural routing the baseline's %s", out.failure);
    else
        snprintf(why, sizeof why, "with natural routing: %.600s",
                 out.reason[0] ? out.reason : "no statistics");
    cJSON_AddStringToObject(o, "reason", why);
    add_label(e, o, nw, MT_ROUTING_NATURAL);
    mt__eng_progress(e, "%s", why);
    cJSON_Delete(in.changes), cJSON_Delete(in.repairs);
    mt_kv_destroy(&nb), mt_kv_destroy(&nw);
    return o;
}

/* Where a validation arm's runs are: its config id as the runs are stored
 * (the validation's length) and their log directories from the store,
 * relative to the tune directory when under it (search/BUNDLE.md). */
static void arm_runs(mt__eng *e, cJSON *arm, const mt_kv *cfg)
{
    char id[17];
    mt_store_run *runs = NULL;
    size_t n = 0, i, dl = strlen(e->o.dir);
    cJSON *dirs;
    if (!arm)
        return;
    mt_measure_config_id(e->c, cfg, "validate", id);
    cJSON_AddStringToObject(arm, "config_id", id);
    dirs = cJSON_AddArrayToObject(arm, "log_dirs");
    if (mt_store_list_runs(e->st, id, "validate", &runs, &n, e->d))
        return;
    for (i = 0; dirs && i < n; i++) {
        const char *p = runs[i].log_path;
        if (!p || !*p)
            continue;
        if (!strncmp(p, e->o.dir, dl) && p[dl] == '/')
            p += dl + 1;
        cJSON_AddItemToArray(dirs, cJSON_CreateString(p));
    }
    mt_store_runs_free(runs, n);
}

/* No change was accepted: the baseline alone, for its figures (six
 * validation replicates), recommended as it is.  0, or -1 (v freed). */
static int validate_baseline_only(mt__eng *e, const mt_kv *base, const char *bid, cJSON *v,
                                  mt_kv **recipe, int *status)
{
    /* nothing to compare: the baseline alone, for its figures */
    mt_exec_job q[6];
    double xs[6], xt[6];
    int i, n = 0;
    memset(q, 0, sizeof q);
    for (i = 0; i < 6; i++) {
        q[i].cfg = base, memcpy(q[i].id, bid, 17), q[i].kind = "validate";
        q[i].rep = (e->seq + 1) * REP_BLOCK + i, q[i].phase = "validate";
    }
    e->seq++;
    if (mt_exec_run(e->x, q, 6)) {
        mt_exec_jobs_free(q, 6);
        cJSON_Delete(v);
        return -1;
    }
    for (i = 0; i < 6; i++)
        if (mt_exec_job_ok(q[i].out)) {
            mt_job_memo m;
            mt_job_memo_from_json(q[i].out, &m);
            xt[n] = m.tflops;
            xs[n++] = m.ms;
        }
    cJSON_AddItemToObject(v, "baseline", arm_json(e, base, xs, xt, (size_t)n));
    cJSON_AddItemToObject(v, "winner", arm_json(e, base, xs, xt, (size_t)n));
    arm_runs(e, cJSON_GetObjectItemCaseSensitive(v, "baseline"), base);
    arm_runs(e, cJSON_GetObjectItemCaseSensitive(v, "winner"), base);
    cJSON_AddNullToObject(v, "gain");
    cJSON_AddNullToObject(v, "ci");
    cJSON_AddNullToObject(v, "p_value");
    cJSON_AddBoolToObject(v, "confirmed", 0);
    cJSON_AddStringToObject(v, "recommendation",
                            "no change passed the gate: keep the baseline (validated here)");
    e->mem_baseline = memory_json(e, "baseline", q[0].out, base);
    e->mem_winner = memory_json(e, "winner", q[0].out, base);
    mt_exec_jobs_free(q, 6);
    add_label(e, v, base, -1);
    {
        int rc;
        cJSON *nat = natural_validate(e, base, 0, &rc);
        if (nat)
            cJSON_AddItemToObject(v, "natural", nat);
    }
    e->validation = v;
    *recipe = mt_kv_dup(base);
    *status = 2;
    mt__eng_progress(e, "no change was accepted; the baseline stands");
    return 0;
}

/* The validation's verdict into v (gain, interval, p, recommendation) and
 * what it recommends: the winner when it is confirmed faster, else the
 * baseline. */
static void validate_verdict(mt__eng *e, cJSON *v, const ab_out *out, const mt_kv *base,
                             mt_kv **recipe, int *status, double *gain)
{
    cJSON *x;
    x = cJSON_GetObjectItemCaseSensitive(out->decision, "ci");
    cJSON_AddItemToObject(v, "ci", cJSON_Duplicate(x, 1));
    if (out->have_stats) {
        cJSON_AddNumberToObject(v, "gain", -out->dec.effect);
        cJSON_AddNumberToObject(v, "p_value", out->dec.p);
    } else {
        cJSON_AddNullToObject(v, "gain");
        cJSON_AddNullToObject(v, "p_value");
    }
    if (out->have_stats && out->dec.verdict == MT_STATS_BETTER) {
        char r[256];
        *gain = -out->dec.effect;
        snprintf(r, sizeof r, "use the winner: %.1f%% shorter steps over steps %d-%d (p %.3g)",
                 100 * *gain, e->c->validate.first, e->c->validate.last, out->dec.p);
        cJSON_AddBoolToObject(v, "confirmed", 1);
        cJSON_AddStringToObject(v, "recommendation", r);
        *recipe = mt_kv_dup(e->best);
        *status = 0;
    } else {
        char r[1024];
        snprintf(r, sizeof r,
                 "validation did not confirm the winner (%s); recommend the baseline, the best "
                 "validated config",
                 out->reason[0] ? out->reason : "no statistics");
        cJSON_AddBoolToObject(v, "confirmed", 0);
        cJSON_AddStringToObject(v, "recommendation", r);
        *recipe = mt_kv_dup(base);
        *status = 1;
    }
}

/* The memory of both arms from the first validation replicate of each
 * (memoized reads, not runs: uncharged, off the timeline). */
static void validate_memory(mt__eng *e, const mt_kv *base, const char *bid, const char *wid)
{
    /* memory of both from the first validation replicate of each */
    mt_exec_job q[2];
    memset(q, 0, sizeof q);
    q[0].cfg = base, memcpy(q[0].id, bid, 17);
    q[1].cfg = e->best, memcpy(q[1].id, wid, 17);
    q[0].kind = q[1].kind = "validate";
    q[0].rep = q[1].rep = e->seq * REP_BLOCK;
    q[0].phase = q[1].phase = "validate";
    if (mt_exec_run(e->x, q, 2) == 0) {
        e->mem_baseline = memory_json(e, "baseline", q[0].out, base);
        e->mem_winner = memory_json(e, "winner", q[1].out, e->best);
    }
    mt_exec_uncharge(e->x, q, 2); /* memoized reads, not runs */
    cJSON_DeleteItemFromArray(e->timeline, cJSON_GetArraySize(e->timeline) - 1);
    cJSON_DeleteItemFromArray(e->timeline, cJSON_GetArraySize(e->timeline) - 1);
    mt_exec_jobs_free(q, 2);
}

/* With forced routing in the contract, the winner and the baseline again
 * with natural routing: the training-equivalent figure, and a benchmark-
 * only recommendation when it does not back the gain.  0, or -1. */
static int validate_natural(mt__eng *e, cJSON *v, const mt_kv *base, int status, double gain)
{
    int rc;
    cJSON *nat = natural_validate(e, base, 1, &rc);
    if (rc)
        return -1;
    if (nat && status == 0 && !strcmp(mt_exec_str(nat, "status"), "measured") &&
        strcmp(mt_exec_str(nat, "verdict"), "better")) {
        /* the training-equivalent figure does not back the gain: the
         * winner is a benchmark recipe only */
        char r[1024];
        double g = mt_exec_num(nat, "gain");
        int worse = !strcmp(mt_exec_str(nat, "verdict"), "worse");
        if (!cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(nat, "gain")))
            /* no figure: a run failed (the winner out of memory once
             * routing is no longer balanced, say) */
            snprintf(r, sizeof r,
                     "benchmark only: the winner's steps are %.1f%% shorter over steps "
                     "%d-%d with the contract's forced routing, but %.600s: keep the "
                     "baseline for training",
                     100 * gain, e->c->validate.first, e->c->validate.last,
                     mt_exec_str(nat, "reason"));
        else
            snprintf(r, sizeof r,
                     "benchmark only: the winner's steps are %.1f%% shorter over steps %d-%d "
                     "with the contract's forced routing, but %s with natural routing (%.1f%% "
                     "%s, p %.3g): %s",
                     100 * gain, e->c->validate.first, e->c->validate.last,
                     worse ? "longer" : "not shorter", 100 * fabs(g),
                     g < 0 ? "longer" : "shorter", mt_exec_num(nat, "p_value"),
                     worse ? "keep the baseline for training"
                           : "for training, the gain is not shown");
        cJSON_ReplaceItemInObjectCaseSensitive(v, "recommendation", cJSON_CreateString(r));
        mt__eng_progress(e, "%s", r);
    }
    if (nat)
        cJSON_AddItemToObject(v, "natural", nat);
    return 0;
}

/* Validate: baseline and winner over the contract's validation window. */
static int phase_validate(mt__eng *e, mt_kv **recipe, int *status, double *gain)
{
    char bid[17], wid[17];
    ab_in in;
    ab_out out;
    cJSON *v = cJSON_CreateObject(), *w = cJSON_CreateArray();
    /* the control: the base, or the config the fit phase made of it (a base
     * that does not fit cannot be measured, nor recommended) */
    const mt_kv *base = e->fitted ? e->fitted : e->baseline;
    e->phase = "validate";
    mt_config_id(base, bid);
    mt_config_id(e->best, wid);
    cJSON_AddItemToArray(w, cJSON_CreateNumber(e->c->validate.first));
    cJSON_AddItemToArray(w, cJSON_CreateNumber(e->c->validate.last));
    cJSON_AddItemToObject(v, "window", w);
    cJSON_AddNumberToObject(v, "steps", e->c->validate.steps);
    *gain = NAN;
    if (!strcmp(bid, wid))
        return validate_baseline_only(e, base, bid, v, recipe, status);
    memset(&in, 0, sizeof in);
    in.phase = "validate";
    in.variable = "winner";
    in.ctl = base;
    in.cand = e->best;
    in.changes = diff_json(base, e->best);
    in.repairs = cJSON_CreateArray();
    in.label = MT_LABEL_TRAINING_EQUIVALENT;
    in.gate = 0;
    in.validate = 1;
    mt__eng_progress(e, "validating the winner against the baseline over steps %d-%d",
                 e->c->validate.first, e->c->validate.last);
    if (ab(e, &in, &out)) {
        cJSON_Delete(in.changes), cJSON_Delete(in.repairs), cJSON_Delete(v);
        return -1;
    }
    cJSON_AddItemToObject(v, "baseline",
                          cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(out.decision, "control"), 1));
    cJSON_AddItemToObject(v, "winner",
                          cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(out.decision, "candidate"), 1));
    arm_runs(e, cJSON_GetObjectItemCaseSensitive(v, "baseline"), base);
    arm_runs(e, cJSON_GetObjectItemCaseSensitive(v, "winner"), e->best);
    validate_verdict(e, v, &out, base, recipe, status, gain);
    mt__eng_progress(e, "%s", mt_exec_str(v, "recommendation"));
    validate_memory(e, base, bid, wid);
    cJSON_Delete(in.changes), cJSON_Delete(in.repairs);
    add_label(e, v, e->best, -1);
    if (validate_natural(e, v, base, *status, *gain)) {
        cJSON_Delete(v);
        return -1;
    }
    e->validation = v;
    return 0;
}

/* ---- grid and random ---------------------------------------------------------------------- */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Every config of the declared space that is legal and fits by estimate. */
static mt_kv **space_configs(mt__eng *e, size_t *count)
{
    size_t nk = mt_kv_count(e->c->space), i, n = 0, cap = 0;
    const char **knobs = calloc(nk + 1, sizeof *knobs);
    char **copies = calloc(nk + 1, sizeof *copies), ***vals = calloc(nk + 1, sizeof *vals);
    size_t *nv = calloc(nk + 1, sizeof *nv), *idx = calloc(nk + 1, sizeof *idx);
    mt_kv **out = NULL, *cfg = mt_kv_dup(e->baseline);
    for (i = 0; i < nk; i++) {
        const char *k, *v;
        char *p;
        mt_kv_entry(e->c->space, i, &k, &v);
        knobs[i] = k;
        copies[i] = strdup(v);
        vals[i] = calloc(strlen(v) + 2, sizeof **vals);
        for (p = copies[i];;) {
            vals[i][nv[i]++] = p;
            if (!(p = strchr(p, '\n')))
                break;
            *p++ = '\0';
        }
    }
    for (;;) {
        mt_violations vs = {0};
        for (i = 0; i < nk; i++)
            mt_kv_set(cfg, knobs[i], vals[i][idx[i]]);
        mt_legality(e->reg, e->c, cfg, &vs, NULL);
        if (!vs.n && may_fit(e, cfg)) {
            if (n == cap) {
                cap = cap ? 2 * cap : 256;
                out = realloc(out, cap * sizeof *out);
            }
            out[n++] = mt_kv_dup(cfg);
        }
        mt_violations_clear(&vs);
        for (i = 0; i < nk; i++) {
            if (++idx[i] < nv[i])
                break;
            idx[i] = 0;
        }
        if (i == nk)
            break;
    }
    mt_kv_destroy(&cfg);
    for (i = 0; i < nk; i++)
        free(copies[i]), free(vals[i]);
    free(knobs), free(copies), free(vals), free(nv), free(idx);
    *count = n;
    return out;
}

static int phase_sample(mt__eng *e)
{
    size_t n = 0, i, j;
    mt_kv **all = space_configs(e, &n);
    int reps = e->c->replicates, rc = 0;
    double best = INFINITY;
    uint64_t s = e->o.seed * 0x2545f4914f6cdd1dULL + 7;
    e->phase = mt_strategy_name(e->o.strategy);
    mt__eng_progress(e, "%zu configs of the declared space are legal and fit", n);
    if (e->o.strategy == MT_STRATEGY_RANDOM)
        for (i = n; i > 1; i--) {
            mt_kv *t;
            j = (size_t)(splitmix(&s) % i);
            t = all[i - 1], all[i - 1] = all[j], all[j] = t;
        }
    for (i = 0; i < n; i++) {
        mt_exec_job q[64];
        double ms[64], med, cap = hbm_gb(e);
        int k, ok = 0, over = 0;
        char id[17];
        if (!afford(e, reps))
            break;
        mt_config_id(all[i], id);
        memset(q, 0, sizeof q);
        for (k = 0; k < reps && k < 64; k++) {
            q[k].cfg = all[i], memcpy(q[k].id, id, 17), q[k].kind = "screen", q[k].rep = k;
            q[k].phase = e->phase;
        }
        if (mt_exec_run(e->x, q, (size_t)k)) {
            mt_exec_jobs_free(q, (size_t)k);
            rc = -1;
            break;
        }
        for (j = 0; j < (size_t)k; j++)
            if (mt_exec_job_ok(q[j].out)) {
                mt_job_memo m;
                double peak;
                mt_job_memo_from_json(q[j].out, &m);
                peak = m.peak_gb;
                ms[ok++] = m.ms;
                /* the memory gate ofat applies: the measured peak within the headroom */
                if (isfinite(peak) && isfinite(cap) && peak > cap * (1 - e->c->memory_headroom))
                    over = 1;
            }
        if (ok == k && !over && mt_stats_median(ms, (size_t)ok, &med) == 0 && med < best) {
            best = med;
            mt_kv_destroy(&e->best);
            e->best = mt_kv_dup(all[i]);
            e->best_ms = med;
        }
        mt_exec_jobs_free(q, (size_t)k);
    }
    if (i == n && !e->stopped[0])
        snprintf(e->stopped, sizeof e->stopped, "the whole space was screened");
    for (i = 0; i < n; i++)
        mt_kv_destroy(&all[i]);
    free(all);
    return rc;
}

/* ---- the environment a tune was started with ---------------------------------------------- */

#define ENV_MEMO "tune/environment"

/* The result-changing variables of this process (workers/launch.h
 * MT_ENV_RESULT, less the knobs) against those the tune recorded at its
 * start (memo ENV_MEMO; recorded now when there are none: a new tune, or
 * one begun before moetune recorded them).  0; 1 when they differ (each
 * difference in e->d); negative on a store error. */
static int env_check(mt__eng *e)
{
    mt_kv *now = mt_kv_new();
    cJSON *was = NULL, *o = NULL;
    const cJSON *x;
    const char *k, *v;
    char *text = NULL, path[4096];
    size_t i, n = 0;
    int rc = -ENOMEM, got;
    if (!now || mt_launch_result_env(e->baseline, now))
        goto out;
    got = mt_store_memo_get(e->st, ENV_MEMO, &text, e->d);
    if (got < 0) {
        rc = got;
        goto out;
    }
    if (got == 0) {
        if (!(o = cJSON_CreateObject()))
            goto out;
        for (i = 0; mt_kv_entry(now, i, &k, &v) == 0; i++)
            cJSON_AddStringToObject(o, k, v);
        free(text);
        if (!(text = cJSON_PrintUnformatted(o)))
            goto out;
        rc = mt_store_memo_put(e->st, ENV_MEMO, text, e->d) < 0 ? -1 : 0;
        goto out;
    }
    if (!(was = cJSON_Parse(text)) || !cJSON_IsObject(was)) {
        mt_diag_add(e->d, e->o.dir, 0, NULL,
                    "the store's record of the tune's environment (memo %s) is damaged",
                    ENV_MEMO);
        rc = -1;
        goto out;
    }
    snprintf(path, sizeof path, "%s/moetune.db", e->o.dir);
    /* recorded names: gone or changed; then the new ones */
    cJSON_ArrayForEach(x, was)
    {
        const char *cur = mt_kv_get(now, x->string);
        if (!cJSON_IsString(x) || (cur && !strcmp(cur, x->valuestring)))
            continue;
        n++;
        if (cur)
            mt_diag_add(e->d, path, 0, x->string, "recorded '%s', now '%s'", x->valuestring, cur);
        else
            mt_diag_add(e->d, path, 0, x->string, "recorded '%s', now unset", x->valuestring);
    }
    for (i = 0; mt_kv_entry(now, i, &k, &v) == 0; i++)
        if (!cJSON_GetObjectItemCaseSensitive(was, k)) {
            n++;
            mt_diag_add(e->d, path, 0, k, "recorded unset, now '%s'", v);
        }
    if (n)
        mt_diag_add(e->d, path, 0, NULL,
                    "this tune was started with other result-changing environment variables "
                    "(%zu differ%s, above): a resume must see the same ones, or its runs would "
                    "not be comparable with the stored ones; resume with the recorded values, "
                    "or start a new tune in another directory",
                    n, n == 1 ? "s" : "");
    rc = n ? 1 : 0;
out:
    if (rc == -ENOMEM)
        mt_diag_add(e->d, e->o.dir, 0, NULL, "out of memory");
    cJSON_Delete(was);
    cJSON_Delete(o);
    free(text);
    mt_kv_destroy(&now);
    return rc;
}

/* ---- the timeline ------------------------------------------------------------------------ */

/* The incumbent's throughput: the median TFLOP/s per GPU of every run of
 * the config the engine holds as its best now (the accepted best, not the
 * best single sample of any config).  Each config's figures are kept by
 * its id, so a candidate accepted after its runs has them at once. */
static double incumbent_tflops(mt__eng *e, const mt_exec_job *q, double tf)
{
    char id[17];
    cJSON *a;
    double v[MAX_REPS * 4], med = NAN;
    size_t n = 0;
    if (!e->best || !q->cfg)
        return NAN; /* a bisection: no incumbent */
    if (!e->tflops_of && !(e->tflops_of = cJSON_CreateObject()))
        return NAN;
    if (isfinite(tf) && mt_exec_job_ok(q->out)) {
        mt_config_id(q->cfg, id);
        if (!(a = cJSON_GetObjectItemCaseSensitive(e->tflops_of, id)))
            a = cJSON_AddArrayToObject(e->tflops_of, id);
        if (a)
            cJSON_AddItemToArray(a, cJSON_CreateNumber(tf));
    }
    mt_config_id(e->best, id);
    cJSON_ArrayForEach(
        a, cJSON_GetObjectItemCaseSensitive(e->tflops_of, id)) if (n < sizeof v / sizeof v[0])
        v[n++] = a->valuedouble;
    if (n && mt_stats_median(v, n, &med))
        med = NAN;
    return med;
}

/* The job's row of the tune's timeline (bundle.json timeline), as the
 * executor counts it (mt_exec_env.on_job). */
static void timeline(mt__eng *e, const mt_exec_job *q, int runs, double gpu_hours)
{
    cJSON *o = cJSON_CreateObject();
    mt_job_memo m;
    double tf;
    const char *src = "logged";
    double best;
    mt_job_memo_from_json(q->out, &m);
    tf = m.tflops;
    if (!isfinite(tf) && mt_exec_job_ok(q->out)) {
        /* a log without throughput lines: Megatron's formula (core/flops.h) */
        mt_flops_throughput(e->c, q->cfg, m.ms / 1000.0, &tf, NULL);
        src = "computed";
    }
    /* the accepted best's throughput so far (the incumbent's runs) */
    best = incumbent_tflops(e, q, tf);
    cJSON_AddNumberToObject(o, "run", runs);
    cJSON_AddNumberToObject(o, "gpu_hours", gpu_hours);
    if (isfinite(tf)) {
        cJSON_AddNumberToObject(o, "tflops", tf);
        cJSON_AddStringToObject(o, "tflops_source", src);
    } else {
        cJSON_AddNullToObject(o, "tflops");
        cJSON_AddNullToObject(o, "tflops_source");
    }
    if (isfinite(best))
        cJSON_AddNumberToObject(o, "best_tflops", best);
    else
        cJSON_AddNullToObject(o, "best_tflops");
    cJSON_AddStringToObject(o, "phase", q->phase ? q->phase : (e->phase ? e->phase : ""));
    cJSON_AddItemToArray(e->timeline, o);
}

static void on_job(void *ctx, const mt_exec_job *q, int runs, double gpu_hours)
{
    timeline(ctx, q, runs, gpu_hours);
}

static void on_live(void *ctx)
{
    mt__eng_progress_quiet(ctx);
}

/* ---- the tune ------------------------------------------------------------------------------ */

/* A tune's engine before anything runs: the options, the budget, the
 * deadline, the empty records. */
static void eng_init(mt__eng *e, mt_registry *reg, mt_contract *c, const mt_tune_opts *o,
                     mt_tune_result *out, mt_diag *d)
{
    memset(e, 0, sizeof *e);
    e->strategy = mt_strategy_name(o->strategy);
    e->reg = reg;
    e->c = c;
    e->o = *o;
    e->res = out;
    e->d = d;
    e->started = mt_clock_wall_s();
    e->budget_gh = o->gpu_hours > 0 ? o->gpu_hours : c->gpu_hours;
    e->budget_runs = o->runs > 0 ? o->runs : c->max_runs;
    e->until = o->until > 0 ? o->until : e->started + c->deadline_hours * 3600;
    e->best_ms = e->baseline_ms = e->best_peak_gb = NAN;
    e->decisions = cJSON_CreateArray();
    e->timeline = cJSON_CreateArray();
    e->accepted = cJSON_CreateArray();
    e->ablation = cJSON_CreateArray();
}

/* What the tune's caller gets: its status, gain, spending, and the recipe
 * (taken from *recipe; the baseline when the tune failed). */
static void tune_result(const mt__eng *e, mt_kv **recipe, int status, double gain,
                        mt_tune_result *out)
{
    out->status = status;
    out->gain = gain;
    out->gpu_hours = mt_exec_gpu_hours(e->x);
    out->runs = mt_exec_runs(e->x);
    out->runs_executed = mt_exec_executed(e->x);
    out->accepted = cJSON_GetArraySize(e->accepted);
    out->not_ablated = e->not_ablated;
    snprintf(out->stopped, sizeof out->stopped, "%s", e->stopped);
    snprintf(out->bundle, sizeof out->bundle, "%s/bundle.json", e->o.dir);
    if (*recipe) {
        mt_config_id(*recipe, out->recipe_id);
        out->recipe = *recipe;
        *recipe = NULL;
    } else if (status == 3) {
        mt_config_id(e->baseline, out->recipe_id);
        out->recipe = mt_kv_dup(e->baseline);
    }
}

/* Everything the engine holds, freed (its executor too). */
static void eng_clear(mt__eng *e)
{
    mt_kv_destroy(&e->baseline);
    mt_kv_destroy(&e->best);
    mt_kv_destroy(&e->fitted);
    cJSON_Delete(e->base_fit);
    cJSON_Delete(e->decisions);
    cJSON_Delete(e->timeline);
    cJSON_Delete(e->tflops_of);
    cJSON_Delete(e->accepted);
    cJSON_Delete(e->ablation);
    cJSON_Delete(e->walls_before);
    cJSON_Delete(e->walls_after);
    cJSON_Delete(e->validation);
    cJSON_Delete(e->mem_baseline);
    cJSON_Delete(e->mem_winner);
    cJSON_Delete(e->baseline_arm);
    cJSON_Delete(e->best_arm);
    mt_exec_destroy(&e->x);
}

int mt_tune(mt_registry *reg, mt_contract *c, const mt_tune_opts *o, mt_tune_result *out,
            mt_diag *d)
{
    mt__eng e;
    mt_exec_env env = {0};
    int rc = -1, status = 3;
    mt_kv *recipe = NULL;
    double gain = NAN;
    memset(out, 0, sizeof *out);
    out->gain = NAN;
    eng_init(&e, reg, c, o, out, d);
    env.reg = reg;
    env.c = c;
    env.dir = o->dir;
    env.seed = o->seed;
    env.log = o->progress;
    env.ctx = &e;
    env.on_live = on_live;
    env.on_job = on_job;
    if (!(e.x = mt_exec_new(&o->exec, &env, d)))
        goto out;
    e.st = mt_exec_store(e.x);
    if (o->exec.executor == MT_EXEC_MODEL && strcmp(c->backend, "sim")) {
        mt_diag_add(d, c->path, 0, "launch.backend",
                    "the model executor needs the sim backend, not \"%s\"", c->backend);
        goto out;
    }
    e.baseline = mt_config_base(reg, c, d);
    if (!e.baseline)
        goto out;
    {
        int env = env_check(&e);
        if (env) {
            out->refused = env > 0;
            goto out;
        }
    }
    e.best = mt_kv_dup(e.baseline);
    {
        char why[600];
        e.natural_plan = natural_possible(&e, why, sizeof why);
    }
    e.phase = "start";
    mt__eng_progress(&e, "%s tune of %s (%s), budget %.1f GPU-hours and %d runs%s",
                 mt_strategy_name(o->strategy), c->name, c->fingerprint, e.budget_gh,
                 e.budget_runs, o->resume ? ", resumed" : "");
    if (o->strategy == MT_STRATEGY_OFAT) {
        int f = phase_fit(&e);
        if (f < 0)
            goto out;
        if (f == 0) {
            if (phase_search(&e) || phase_ablate(&e))
                goto out;
        }
        if (f > 0) {
            rc = mt__eng_write_bundle(&e, e.baseline, 3, NAN, d);
            status = 3;
            goto done;
        }
    } else if (phase_sample(&e)) {
        goto out;
    }
    if (phase_validate(&e, &recipe, &status, &gain))
        goto out;
    rc = mt__eng_write_bundle(&e, recipe, status, gain, d);
done:
    tune_result(&e, &recipe, status, gain, out);
    e.phase = "done";
    mt__eng_progress(&e, "finished (%s%s): bundle %s",
                 status == 0   ? "validated"
                 : status == 1 ? "not confirmed"
                 : status == 2 ? "baseline only"
                               : "failed",
                 e.not_ablated ? ", winner not ablated" : "", out->bundle);
out:
    mt_kv_destroy(&recipe);
    eng_clear(&e);
    return rc;
}
