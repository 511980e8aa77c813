/*
 * model.c - search/'s one door to the simulator's model (model.h): the
 * model executor's jobs and the noise-free optimum of a declared space.
 */
#include "model.h"

#include "evaluate.h"
#include "hardware.h"
#include "job_memo.h"
#include "sim.h"
#include "stats.h"
#include "wall.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the model executor ------------------------------------------------------------------ */

/* One job of the model executor as its memo (JSON text, caller frees);
 * natural: the router's own routing although the contract forces balance. */
char *mt_model_job_routed(const mt_contract *c, const mt_kv *cfg, const char *kind, int rep,
                          uint64_t seed, int natural)
{
    sim_cfg sc;
    sim_breakdown b;
    sim_noise nz;
    char err[256], rule[64], msg[256], *text;
    const mt_gpu_spec *g;
    mt_job_memo j;
    mt_wall_verdict wv;
    cJSON *v = cJSON_CreateObject();
    double peak = 0, steps[1024], step_s, world;
    int validate = !strcmp(kind, "validate"), n = 0, it, first, last, total;
    int used_first = -1, used_last = -1, bad;
    size_t i;
    const char *k, *val;
    first = validate ? c->validate.first : c->screen.first;
    last = validate ? c->validate.last : c->screen.last;
    total = validate ? c->validate.steps : c->screen.steps;
    world = strtod(mt_kv_get(c->hardware, "world_size"), NULL);
    err[0] = msg[0] = '\0';
    mt_job_memo_init(&j);
    j.verdicts = v;
    bad = sim_cfg_from_moetune(&sc, cfg, c->hardware, c->view, err, sizeof err);
    if (!bad && natural)
        sc.routing_natural = 1; /* the router's own routing; the sim's config id follows it */
    if (bad || sim_check(&sc, rule, sizeof rule, msg, sizeof msg) || sim_evaluate(&sc, &b)) {
        j.outcome = "crash";
        j.evidence = err[0] ? err : msg;
        j.gpu_hours = 0;
    } else {
        g = sim_gpu(&sc);
        int hot_rank = sim_hottest_rank(&sc, &peak);
        if (g && peak > mt_gpu_oom_bytes(g)) {
            j.outcome = "oom";
            j.evidence = "model: the hottest rank exceeds HBM";
            j.gpu_hours = sc.startup_s * world / 3600;
        } else {
            sim_noise_init(&nz, seed ? seed : (uint64_t)sc.seed, sim_cfg_id(&sc),
                           rep, sc.noise_offset_sd, sc.noise_jitter_cv, sc.noise_rho);
            for (it = 1; it <= total && it <= last; it++) {
                double t = b.step_s * sim_noise_step(&nz);
                if (it >= first && n < 1024) {
                    steps[n++] = t;
                    if (used_first < 0)
                        used_first = it;
                    used_last = it;
                }
            }
            mt_stats_median(steps, (size_t)n, &step_s);
            j.outcome = "ok";
            j.evidence = "model executor";
            j.measured = 1;
            j.ms = step_s * 1000;
            j.tflops = b.tflops_per_gpu * b.step_s / step_s;
            j.loss = 2.5;
            j.loss_finite = 1;
            j.skipped = j.nan = 0;
            j.peak_gb = peak / 1e9;
            j.peak_rank = hot_rank;
            j.gpu_hours = (sc.startup_s + total * b.step_s) * world / 3600;
            if (n > 0) {
                /* the steps the median covers, as measure.c records them */
                j.has_window = 1;
                j.window_first = used_first;
                j.window_last = used_last;
                j.window_n = n;
            }
            /* the model honours every knob: each is applied by construction */
            for (i = 0; mt_kv_entry(cfg, i, &k, &val) == 0; i++) {
                cJSON *x = cJSON_CreateObject();
                cJSON_AddStringToObject(x, "verdict", "applied");
                cJSON_AddStringToObject(x, "evidence", "model executor");
                cJSON_AddItemToObject(v, k, x);
            }
            if (!strcmp(kind, "profile")) {
                mt_wall_input in;
                double tot = b.step_s > 0 ? b.step_s : 1;
                memset(&in, 0, sizeof in);
                in.window_ns = (int64_t)(tot * 1e9);
                in.exposed_comm_ns =
                    (int64_t)((b.ep_exposed + b.tp_comm + b.cp_comm + b.dp_exposed) * 1e9);
                in.idle_ns = (int64_t)((b.host + b.pp_bubble) * 1e9);
                in.bubble_share = b.pp_bubble / tot;
                in.gaps_per_device = 1000;
                in.headroom = -1;
                mt_wall_classify(&in, &c->profile, &wv);
                j.has_wall = 1;
                j.wall.wall = mt_wall_name(wv.wall);
                j.wall.runner_up = mt_wall_name(wv.runner_up);
                j.wall.confidence = wv.confidence;
                j.wall.reason = wv.reason;
                j.wall.compute = b.compute / tot;
                j.wall.exposed_comm = wv.exposed_share;
                j.wall.hidden_comm = (b.ep_comm - b.ep_exposed) / tot;
                j.wall.idle = wv.idle_share;
                j.wall.bubble = b.pp_bubble / tot;
                /* the shares are of one modelled step: no step range */
                j.wall.window_s = tot;
            }
        }
    }
    text = mt_job_memo_to_json(&j);
    cJSON_Delete(v);
    return text;
}

char *mt_model_job(const mt_contract *c, const mt_kv *cfg, const char *kind, int rep, uint64_t seed)
{
    return mt_model_job_routed(c, cfg, kind, rep, seed, 0);
}

double mt_model_launch_gpu_hours(const mt_contract *c, const mt_kv *cfg)
{
    sim_cfg sc;
    char err[256];
    double world = strtod(mt_kv_get(c->hardware, "world_size"), NULL);
    if (sim_cfg_from_moetune(&sc, cfg, c->hardware, c->view, err, sizeof err))
        sim_cfg_defaults(&sc);
    return sc.startup_s * world / 3600;
}

/* ---- the optimum -------------------------------------------------------------------------- */

/* Noise-free throughput of cfg, or 0 when the sim refuses it or it does not
 * fit in memory with the contract's headroom. */
static double throughput(const mt_contract *c, const mt_kv *cfg, double *step, int *fits,
                         double *peak_gb)
{
    sim_cfg sc;
    sim_breakdown b;
    char err[256], rule[64], msg[256];
    double peak;
    const mt_gpu_spec *g;
    *fits = 0;
    if (sim_cfg_from_moetune(&sc, cfg, c->hardware, c->view, err, sizeof err))
        return 0;
    if (sim_check(&sc, rule, sizeof rule, msg, sizeof msg))
        return 0;
    if (sim_evaluate(&sc, &b))
        return 0;
    g = sim_gpu(&sc);
    sim_hottest_rank(&sc, &peak);
    *fits = g && peak <= g->hbm_gb * 1e9 * (1 - c->memory_headroom);
    *step = b.step_s;
    if (peak_gb)
        *peak_gb = peak / 1e9;
    return b.tflops_per_gpu;
}

/* cfg made legal by the owners' repairs of knobs the space does not
 * declare (sequence_parallel follows TP > 1 for MoE), as the tune's
 * candidates are: the repaired config, or NULL when it stays illegal or a
 * repair would move a declared knob (that config is enumerated itself). */
static mt_kv *repair_undeclared(mt_registry *r, const mt_contract *c, const mt_kv *base,
                                const mt_kv *cfg, mt_diag *d)
{
    mt_candidate k;
    const char *kn, *v, *b;
    size_t i;
    mt_kv *out = NULL;
    int ok = 1;
    memset(&k, 0, sizeof k);
    k.plugin = "optimum";
    k.variable = "space";
    k.sets = mt_kv_new();
    k.repairs = mt_kv_new();
    for (i = 0; mt_kv_entry(cfg, i, &kn, &v) == 0; i++)
        if (!(b = mt_kv_get(base, kn)) || strcmp(b, v))
            mt_kv_set(k.sets, kn, v);
    if (k.sets && k.repairs && mt_candidate_apply(r, c, base, &k, d) == 0 && k.config &&
        !k.violations.n && mt_kv_count(k.repairs) > 0) {
        for (i = 0; mt_kv_entry(k.repairs, i, &kn, &v) == 0; i++)
            if (mt_kv_get(c->space, kn))
                ok = 0;
        if (ok) {
            out = k.config;
            k.config = NULL;
        }
    }
    mt_kv_destroy(&k.sets), mt_kv_destroy(&k.repairs), mt_kv_destroy(&k.config);
    mt_violations_clear(&k.violations);
    mt_strlist_clear(&k.repair_notes);
    mt_strlist_clear(&k.notes);
    return out;
}

double mt_optimum_tflops(const mt_contract *c, const mt_kv *cfg, int *fits)
{
    double step = 0;
    int f = 0;
    double tf = throughput(c, cfg, &step, &f, NULL);
    if (fits)
        *fits = f;
    return tf;
}

int mt_optimum_find(mt_registry *r, const mt_contract *c, const mt_kv *base, size_t max_grid,
                    mt_optimum *out, mt_diag *d)
{
    size_t nk = mt_kv_count(c->space), i, grid = 1;
    const char **knobs = calloc(nk + 1, sizeof *knobs);
    char **copies = calloc(nk + 1, sizeof *copies);
    char ***vals = calloc(nk + 1, sizeof *vals);
    size_t *nv = calloc(nk + 1, sizeof *nv), *idx = calloc(nk + 1, sizeof *idx);
    mt_kv *cfg = NULL;
    struct timespec t0, t1;
    int rc = 0, fits;
    double step;

    memset(out, 0, sizeof *out);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (i = 0; i < nk; i++) {
        const char *k, *v;
        char *p;
        mt_kv_entry(c->space, i, &k, &v);
        knobs[i] = k;
        copies[i] = strdup(v);
        vals[i] = calloc(strlen(v) + 2, sizeof **vals);
        for (p = copies[i];;) {
            vals[i][nv[i]++] = p;
            p = strchr(p, '\n');
            if (!p)
                break;
            *p++ = '\0';
        }
        if (grid > max_grid / nv[i]) {
            mt_diag_add(d, c->path, 0, "space",
                        "the declared space has more than %zu configs; optimum refuses to "
                        "enumerate it",
                        max_grid);
            rc = -1;
            goto done;
        }
        grid *= nv[i];
    }
    out->grid = grid;
    out->base_tflops = throughput(c, base, &step, &out->base_fits, &out->base_peak_gb);
    cfg = mt_kv_dup(base);
    for (;;) {
        mt_violations vs = {0};
        mt_kv *repaired;
        double tf;
        for (i = 0; i < nk; i++)
            mt_kv_set(cfg, knobs[i], vals[i][idx[i]]);
        mt_legality(r, c, cfg, &vs, d);
        if (vs.n && (repaired = repair_undeclared(r, c, base, cfg, d)) != NULL) {
            mt_violations_clear(&vs); /* legal once an undeclared knob follows */
            mt_kv_destroy(&cfg);
            cfg = repaired;
        }
        if (!vs.n) {
            tf = throughput(c, cfg, &step, &fits, NULL);
            if (tf > 0) {
                out->legal++;
                if (fits) {
                    out->fitting++;
                    if (tf > out->best_tflops) {
                        out->best_tflops = tf;
                        out->best_step_s = step;
                        mt_kv_destroy(&out->best);
                        out->best = mt_kv_dup(cfg);
                    }
                }
            }
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
done:
    clock_gettime(CLOCK_MONOTONIC, &t1);
    out->seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    mt_kv_destroy(&cfg);
    for (i = 0; i < nk; i++) {
        free(copies[i]);
        free(vals[i]);
    }
    free(knobs), free(copies), free(vals), free(nv), free(idx);
    return rc;
}
