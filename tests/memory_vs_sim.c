/*
 * memory_vs_sim.c - the core's analytic memory estimate (core/memory.c)
 * against the simulator's per-GPU peak (workers/sim, sim_hottest_rank) over
 * random legal configs of the example and test contracts.
 *
 * A diagnostic, not a proof: the two are separate models of the same
 * Megatron memory, so agreement says they tell the same story, and the
 * published peaks (tests/test_memory.c) say whether the story is true.
 * Configs are drawn from each contract's declared space on top of its base
 * (deterministic seed), round robin over the contracts, kept when new and
 * when the plugins and the sim both find them legal, and compared rank-for-rank on the hottest GPU:
 * the estimate's total against the sim's max reserved bytes.  Prints the relative error's
 * distribution per contract and overall (and how many fit the usable
 * memory by each: fit:e, fit:s); exits 1 when the overall 95th
 * percentile of |error| passes the limit.
 *
 *   memory-vs-sim [--configs N] [--seed S] [--limit FRACTION] [--show K]
 */
#include "config.h"
#include "contract.h"
#include "diag.h"
#include "evaluate.h"
#include "memory.h"
#include "registry.h"
#include "sim.h"

#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CONTRACTS 64
/* Draws in a row that add nothing (illegal, refused by the sim, or already
 * held) before a contract's space counts as exhausted. */
#define MAX_MISSES 400

typedef struct sample {
    double err; /* (estimate - sim) / sim */
    double est, sim;
    double usable; /* HBM less the contract's headroom, GB */
    char id[17];
} sample;

typedef struct family {
    char name[96];
    sample *s;
    size_t n;
    sample base; /* the contract's base config (sim < 0: the sim refuses it) */
} family;

static uint64_t rng_next(uint64_t *x)
{
    /* splitmix64: deterministic and independent of the C library */
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int by_abs(const void *a, const void *b)
{
    double x = fabs(*(const double *)a), y = fabs(*(const double *)b);
    return x < y ? -1 : x > y;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double quantile(const double *sorted, size_t n, double q)
{
    double pos;
    size_t i;
    if (!n)
        return NAN;
    pos = q * (double)(n - 1);
    i = (size_t)pos;
    if (i + 1 >= n)
        return sorted[n - 1];
    return sorted[i] + (pos - (double)i) * (sorted[i + 1] - sorted[i]);
}

/* One line of the distribution: |error| quantiles and the signed median. */
static double report(const char *name, const sample *s, size_t n)
{
    double *a = malloc((n ? n : 1) * sizeof *a), *v = malloc((n ? n : 1) * sizeof *v), p95;
    size_t i, fit_est = 0, fit_sim = 0;
    for (i = 0; i < n; i++) {
        a[i] = v[i] = s[i].err;
        fit_est += s[i].est <= s[i].usable;
        fit_sim += s[i].sim <= s[i].usable;
    }
    qsort(a, n, sizeof *a, by_abs);
    qsort(v, n, sizeof *v, by_value);
    for (i = 0; i < n; i++)
        a[i] = fabs(a[i]);
    p95 = quantile(a, n, 0.95);
    printf("%-40s %5zu  %+7.1f%%  %6.1f%%  %6.1f%%  %6.1f%%  %6.1f%%  %5zu %5zu\n", name, n,
           100 * quantile(v, n, 0.5), 100 * quantile(a, n, 0.5), 100 * quantile(a, n, 0.9),
           100 * p95, 100 * (n ? a[n - 1] : NAN), fit_est, fit_sim);
    free(a), free(v);
    return p95;
}

static int has_suffix(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

/* The contracts of a directory, sorted, appended to paths. */
static size_t list_contracts(const char *dir, char **paths, size_t n, size_t max)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t first = n, i, j;
    if (!d)
        return n;
    while ((e = readdir(d)) && n < max) {
        if (!has_suffix(e->d_name, ".cfg"))
            continue;
        paths[n] = malloc(strlen(dir) + strlen(e->d_name) + 2);
        sprintf(paths[n], "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    for (i = first; i < n; i++) /* directory order is not deterministic */
        for (j = i + 1; j < n; j++)
            if (strcmp(paths[j], paths[i]) < 0) {
                char *t = paths[i];
                paths[i] = paths[j];
                paths[j] = t;
            }
    return n;
}

/* The sim's per-GPU peak for cfg in GB, or -1 when the sim refuses it. */
static double sim_peak(const mt_contract *c, const mt_kv *cfg)
{
    sim_cfg sc;
    char err[256], rule[64], msg[512];
    double peak = -1;
    if (sim_cfg_from_moetune(&sc, cfg, c->hardware, c->view, err, sizeof err))
        return -1;
    if (sim_check(&sc, rule, sizeof rule, msg, sizeof msg))
        return -1;
    sim_hottest_rank(&sc, &peak);
    return peak > 0 ? peak / 1e9 : -1;
}

/* Values of one space knob (newline-separated in the contract), in place. */
static size_t split_values(char *v, char **out, size_t max)
{
    size_t n = 0;
    char *p = v;
    while (n < max) {
        out[n++] = p;
        p = strchr(p, '\n');
        if (!p)
            break;
        *p++ = '\0';
    }
    return n;
}

/* A contract being sampled. */
typedef struct source {
    mt_contract *c;
    mt_kv *base;
    size_t cap, misses;
    int done;
} source;

/* Loads path into src and f (its base's figures); 0, or -1 when skipped. */
static int open_source(mt_registry *r, const char *path, source *src, family *f)
{
    mt_diag *d = mt_diag_new();
    const char *slash = strrchr(path, '/');
    mt_mem_estimate m;
    memset(src, 0, sizeof *src);
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", slash ? slash + 1 : path);
    src->c = mt_contract_load(path, d);
    if (!src->c || mt_config_normalize_space(r, src->c, d) ||
        !(src->base = mt_config_base(r, src->c, d)) || mt_diag_count(d)) {
        fprintf(stderr, "memory-vs-sim: %s: skipped (%s)\n", f->name,
                mt_diag_count(d) ? mt_diag_at(d, 0)->message : "cannot load");
        mt_kv_destroy(&src->base);
        mt_contract_destroy(&src->c);
        mt_diag_destroy(&d);
        src->done = 1;
        return -1;
    }
    mt_diag_destroy(&d);
    f->base.sim = sim_peak(src->c, src->base);
    f->base.est = mt_memory_estimate(src->base, src->c->hardware, &m) == 0 ? m.hottest->total : -1;
    f->base.err = f->base.sim > 0 ? (f->base.est - f->base.sim) / f->base.sim : NAN;
    mt_config_id(src->base, f->base.id);
    return 0;
}

/* One random draw from src's space on top of its base; 1 when it adds a
 * legal config f does not hold yet. */
static int draw_one(mt_registry *r, source *src, uint64_t *seed, family *f)
{
    const mt_contract *c = src->c;
    mt_kv *cfg = mt_kv_dup(src->base);
    mt_violations vs = {0};
    mt_mem_estimate m;
    size_t nk = mt_kv_count(c->space), k;
    double sim;
    char id[17];
    int bad = 0, added = 0;
    for (k = 0; k < nk && !bad; k++) {
        const char *knob, *vals;
        char *copy, *v[256];
        size_t nv;
        mt_kv_entry(c->space, k, &knob, &vals);
        copy = strdup(vals);
        nv = split_values(copy, v, 256);
        bad = mt_config_set(r, cfg, knob, v[rng_next(seed) % nv], NULL, 0, "space", NULL) != 0;
        free(copy);
    }
    if (!bad) {
        mt_config_id(cfg, id);
        for (k = 0; k < f->n && !bad; k++)
            bad = !strcmp(f->s[k].id, id);
    }
    if (!bad) {
        mt_legality(r, c, cfg, &vs, NULL);
        bad = vs.n != 0;
        mt_violations_clear(&vs);
    }
    if (!bad && (sim = sim_peak(c, cfg)) > 0 && mt_memory_estimate(cfg, c->hardware, &m) == 0) {
        sample *s;
        if (f->n == src->cap) {
            size_t cap = src->cap ? 2 * src->cap : 64;
            sample *ns = realloc(f->s, cap * sizeof *ns);
            if (!ns) {
                mt_kv_destroy(&cfg);
                return 0;
            }
            f->s = ns, src->cap = cap;
        }
        s = &f->s[f->n++];
        s->est = m.hottest->total;
        s->sim = sim;
        s->err = (s->est - sim) / sim;
        s->usable = m.hbm_gb * (1 - c->memory_headroom);
        memcpy(s->id, id, sizeof s->id);
        added = 1;
    }
    mt_kv_destroy(&cfg);
    return added;
}

static int by_abs_err(const void *a, const void *b)
{
    double x = fabs(((const sample *)a)->err), y = fabs(((const sample *)b)->err);
    return x > y ? -1 : x < y;
}

int main(int argc, char **argv)
{
    size_t want = 1000, n = 0, i, total = 0, live;
    uint64_t seed = 20261215, seed0;
    double limit = 0.25, p95;
    int show = 0, skipped = 0, a;
    char *paths[MAX_CONTRACTS];
    family fam[MAX_CONTRACTS];
    source src[MAX_CONTRACTS];
    sample *all;
    mt_diag *d = mt_diag_new();
    mt_registry *r = mt_registry_new();
    const char *builtin = getenv("MOETUNE_BUILTIN_DIR");
    struct timespec t0, t1;

    for (a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--configs") && a + 1 < argc)
            want = strtoul(argv[++a], NULL, 10);
        else if (!strcmp(argv[a], "--seed") && a + 1 < argc)
            seed = strtoull(argv[++a], NULL, 10);
        else if (!strcmp(argv[a], "--limit") && a + 1 < argc)
            limit = strtod(argv[++a], NULL);
        else if (!strcmp(argv[a], "--show") && a + 1 < argc)
            show = atoi(argv[++a]);
        else {
            fprintf(
                stderr,
                "usage: memory-vs-sim [--configs N] [--seed S] [--limit FRACTION] [--show K]\n");
            return 64;
        }
    }
    seed0 = seed;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    mt_registry_load_path(r, builtin && *builtin ? builtin : MT_BUILD_DIR "/plugins", d);
    mt_registry_finish(r, d);
    if (mt_diag_count(d)) {
        mt_diag_print(d, stderr);
        return 1;
    }
    n = list_contracts(MT_SOURCE_DIR "/examples/contracts", paths, n, MAX_CONTRACTS);
    n = list_contracts(MT_SOURCE_DIR "/tests/contracts", paths, n, MAX_CONTRACTS);
    if (!n) {
        fprintf(stderr, "memory-vs-sim: no contracts under %s\n", MT_SOURCE_DIR);
        return 1;
    }
    /* round robin over the contracts, one new unique legal config each
     * turn, until want are held or every space is exhausted (a contract
     * whose space is small gives all it has) */
    for (i = 0; i < n; i++)
        skipped += open_source(r, paths[i], &src[i], &fam[i]) != 0;
    for (live = n; total < want && live > 0;) {
        live = 0;
        for (i = 0; i < n && total < want; i++) {
            if (src[i].done)
                continue;
            if (draw_one(r, &src[i], &seed, &fam[i]))
                total++, src[i].misses = 0;
            else if (++src[i].misses > MAX_MISSES)
                src[i].done = 1;
            live += !src[i].done;
        }
    }
    for (i = 0; i < n; i++) {
        mt_kv_destroy(&src[i].base);
        mt_contract_destroy(&src[i].c);
    }
    all = calloc(total ? total : 1, sizeof *all);
    total = 0;
    printf("estimate (core/memory.c) vs sim peak (sim_hottest_rank), relative error of the "
           "hottest GPU\n");
    printf("%-40s %5s  %8s  %7s  %7s  %7s  %7s  %5s %5s\n", "contract", "n", "median", "|med|",
           "|p90|", "|p95|", "|max|", "fit:e", "fit:s");
    for (i = 0; i < n; i++) {
        if (fam[i].n)
            report(fam[i].name, fam[i].s, fam[i].n);
        memcpy(all + total, fam[i].s, fam[i].n * sizeof *all);
        total += fam[i].n;
    }
    p95 = report("all", all, total);
    printf("the contracts' bases: estimate / sim, GB\n");
    for (i = 0; i < n; i++)
        if (fam[i].base.sim > 0)
            printf("  %-38s %7.1f / %7.1f (%+.0f%%)\n", fam[i].name, fam[i].base.est,
                   fam[i].base.sim, 100 * fam[i].base.err);
    if (show > 0) {
        qsort(all, total, sizeof *all, by_abs_err);
        printf("largest errors:\n");
        for (a = 0; a < show && (size_t)a < total; a++)
            printf("  config %s: estimate %.1f GB, sim %.1f GB (%+.1f%%)\n", all[a].id, all[a].est,
                   all[a].sim, 100 * all[a].err);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%zu legal configs of %zu contracts (%d skipped) in %.1f s; seed %llu\n", total, n,
           skipped, (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9,
           (unsigned long long)seed0);
    for (i = 0; i < n; i++)
        free(fam[i].s), free(paths[i]);
    free(all);
    mt_registry_destroy(&r);
    mt_diag_destroy(&d);
    if (total < want / 2) {
        printf("FAIL: only %zu legal configs (wanted %zu)\n", total, want);
        return 1;
    }
    if (!(p95 <= limit)) {
        printf("FAIL: the 95th percentile of |error| is %.1f%%, past %.0f%%\n", 100 * p95,
               100 * limit);
        return 1;
    }
    printf("ok: the 95th percentile of |error| is %.1f%% (limit %.0f%%)\n", 100 * p95, 100 * limit);
    return 0;
}
