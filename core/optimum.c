#include "optimum.h"

#include "evaluate.h"
#include "hardware.h"
#include "sim.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    mt_violations_free(&k.violations);
    mt_strlist_free(&k.repair_notes);
    mt_strlist_free(&k.notes);
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
            mt_violations_free(&vs); /* legal once an undeclared knob follows */
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
        mt_violations_free(&vs);
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
