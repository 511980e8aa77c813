#include "audit.h"

#include "config.h"
#include "evaluate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Splits a '\n'-joined value list into at most max words (in place). */
static size_t split_bar(char *s, char **out, size_t max)
{
    size_t n = 0;
    char *p = s;
    while (n < max) {
        out[n++] = p;
        p = strchr(p, '\n');
        if (!p)
            break;
        *p++ = '\0';
    }
    return n;
}

/* Every value a knob may take in this contract: the base value plus the
 * declared space. */
static size_t values_of(const mt_contract *c, const mt_kv *base, const char *knob, char *buf,
                        size_t blen, char **out, size_t max)
{
    const char *space = mt_kv_get(c->space, knob);
    const char *b = mt_kv_get(base, knob);
    size_t n = 0;
    if (space) {
        snprintf(buf, blen, "%s", space);
        n = split_bar(buf, out, max);
    }
    if (b && n < max) {
        size_t i;
        for (i = 0; i < n; i++)
            if (!strcmp(out[i], b))
                break;
        if (i == n)
            out[n++] = (char *)b;
    }
    return n;
}

static int window_hit(const char *what, const char *field, int every, const mt_window *w,
                      const char *wname, const mt_contract *c, mt_diag *d)
{
    int i;
    if (every <= 0)
        return 0;
    for (i = w->first; i <= w->last; i++)
        if (i % every == 0) {
            mt_diag_add(d, c->path, mt_contract_line(c, field), field,
                        "the %s timing window (iterations %d-%d) contains iteration %d, %s "
                        "(every %d steps); move the window or change the interval so that no "
                        "multiple of %d falls inside it",
                        wname, w->first, w->last, i, what, every, every);
            return 1;
        }
    return 0;
}

int mt_audit_windows(const mt_contract *c, const mt_kv *base, mt_diag *d)
{
    const mt_window *wins[2] = {&c->screen, &c->validate};
    const char *names[2] = {"screen", "validate"};
    char buf[1024], gbuf[1024], *vals[64], *gvals[64];
    size_t nv, ng, i, j;
    int problems = 0, w, graphs = 0, gc = 0;

    if (c->log_interval != 1) {
        /* Not a start-up rule: Megatron runs with any positive interval, but
         * moetune reads every iteration's line. */
        mt_diag_add(d, c->path, mt_contract_line(c, "intervals.log"), "intervals.log",
                    "moetune measures every iteration, so it needs --log-interval 1; "
                    "intervals.log is %d (set it to 1)", c->log_interval);
        problems++;
    }
    for (w = 0; w < 2; w++) {
        problems += window_hit("an evaluation step", "intervals.eval", c->eval_interval, wins[w],
                               names[w], c, d);
        problems += window_hit("a checkpoint save", "intervals.save", c->save_interval, wins[w],
                               names[w], c, d);
    }
    /* CUDA graph capture happens in iteration warmup+1; every timing window
     * must start after it whenever some config may capture graphs. */
    nv = values_of(c, base, "cuda_graph_impl", buf, sizeof buf, vals, 64);
    for (i = 0; i < nv; i++)
        graphs |= strcmp(vals[i], "none") != 0;
    if (graphs) {
        ng = values_of(c, base, "cuda_graph_warmup_steps", gbuf, sizeof gbuf, gvals, 64);
        for (j = 0; j < ng; j++) {
            int capture = atoi(gvals[j]) + 1;
            for (w = 0; w < 2; w++)
                if (wins[w]->first <= capture) {
                    const char *field = mt_kv_get(c->space, "cuda_graph_warmup_steps")
                                            ? "space.cuda_graph_warmup_steps"
                                            : (w ? "windows.validate.first" : "windows.screen.warmup");
                    mt_diag_add(d, c->path, mt_contract_line(c, field), field,
                                "the %s timing window (iterations %d-%d) %s iteration %d, where "
                                "CUDA graphs are captured (cuda_graph_warmup_steps = %s); start "
                                "the window after iteration %d",
                                names[w], wins[w]->first, wins[w]->last,
                                capture <= wins[w]->last ? "contains" : "precedes", capture,
                                gvals[j], capture);
                    problems++;
                }
        }
    }
    nv = values_of(c, base, "manual_gc", buf, sizeof buf, vals, 64);
    for (i = 0; i < nv; i++)
        gc |= !strcmp(vals[i], "true");
    if (gc) {
        ng = values_of(c, base, "manual_gc_interval", gbuf, sizeof gbuf, gvals, 64);
        for (j = 0; j < ng; j++)
            for (w = 0; w < 2; w++) {
                const char *field = mt_kv_get(c->space, "manual_gc_interval")
                                        ? "space.manual_gc_interval"
                                        : "base.manual_gc_interval";
                problems += window_hit("a manual garbage-collection step", field, atoi(gvals[j]),
                                       wins[w], names[w], c, d);
            }
    }
    return problems;
}

static void report_violations(const mt_contract *c, const mt_violations *vs, const char *prefix,
                              mt_diag *d)
{
    size_t i;
    for (i = 0; i < vs->n; i++) {
        char first[256], field[300];
        int line;
        sscanf(vs->v[i].knobs, "%255s", first);
        snprintf(field, sizeof field, "base.%s", first);
        line = mt_contract_line(c, field);
        if (!line) {
            /* name a knob of the rule the contract does set */
            char copy[1024], *tok, *save = NULL;
            snprintf(copy, sizeof copy, "%s", vs->v[i].knobs);
            for (tok = strtok_r(copy, " ", &save); tok && !line; tok = strtok_r(NULL, " ", &save)) {
                snprintf(field, sizeof field, "base.%s", tok);
                line = mt_contract_line(c, field);
            }
            if (!line)
                snprintf(field, sizeof field, "base.%s", first);
        }
        mt_diag_add(d, c->path, line, field, "%s[%s, %s] %s", prefix, vs->v[i].rule,
                    vs->v[i].rule_class == MT_RULE_RUNTIME ? "runtime" : "start-up",
                    vs->v[i].message);
    }
}

int mt_audit_base(mt_registry *r, const mt_contract *c, const mt_kv *base, mt_diag *d)
{
    mt_violations vs = {0};
    int n;
    mt_legality(r, c, base, &vs, d);
    report_violations(c, &vs, "the base configuration is illegal: ", d);
    n = (int)vs.n;
    mt_violations_clear(&vs);
    return n;
}

/* Search for a legal config of the space with knob = value.  In order: the
 * base with it; the base with it and one other knob changed to each of its
 * values (what a one-at-a-time search reaches); the same with two other
 * knobs changed (a rule that needs both); then the grid of the other knobs'
 * values walked from the base's, GRID_TRIES points at most per value.  All
 * but the single changes share a budget of AUDIT_TRIES configs.  Only a grid
 * walked to its end may say "every config"; a capped search says how many
 * it tried. */
#define GRID_TRIES 200
#define AUDIT_TRIES 20000
#define MAX_VALUES 64

/* Applies base + sets and says whether the result is legal; the first
 * violation found is kept in *first. */
static int legal_with(mt_registry *r, const mt_contract *c, const mt_kv *base, mt_kv *sets,
                      mt_violations *first, mt_diag *d)
{
    mt_candidate cand;
    int ok;
    memset(&cand, 0, sizeof cand);
    cand.plugin = "(space)";
    cand.sets = sets;
    cand.repairs = mt_kv_new();
    mt_candidate_apply(r, c, base, &cand, d);
    ok = !cand.violations.n;
    if (!ok && !first->n) {
        *first = cand.violations;
        memset(&cand.violations, 0, sizeof cand.violations);
    }
    free(cand.variable);
    mt_kv_destroy(&cand.repairs);
    mt_kv_destroy(&cand.config);
    mt_strlist_clear(&cand.notes);
    mt_strlist_clear(&cand.repair_notes);
    mt_violations_clear(&cand.violations);
    return ok;
}

/* sets = knob i at its value, every other knob m at vals[m][idx[m]] (or at
 * its base value where idx is NULL), normalized. */
static void grid_sets(mt_registry *r, size_t nk, const char **knobs, char ***vals,
                      const size_t *idx, size_t i, const char *canon, mt_kv *sets)
{
    size_t m;
    char c2[2048], why[1024];
    mt_kv_clear(sets);
    for (m = 0; m < nk; m++) {
        if (m == i)
            mt_kv_set(sets, knobs[m], canon);
        else if (idx && vals[m][idx[m]] &&
                 !mt_registry_normalize(r, knobs[m], vals[m][idx[m]], c2, sizeof c2, why,
                                        sizeof why))
            mt_kv_set(sets, knobs[m], c2);
    }
}

/* The declared space being audited: each knob's values (vals[i][0..nv[i]),
 * the base's index bidx[i]) and the scratch of the search (idx, sets). */
typedef struct space_walk {
    mt_registry *r;
    const mt_contract *c;
    const mt_kv *base;
    mt_diag *d;
    size_t nk;
    const char **knobs;
    char ***vals;
    size_t *nv, *bidx, *idx;
    mt_kv *sets;
} space_walk;

/* One declared value's search: knob i at canon, what it tried and found. */
typedef struct value_search {
    size_t i, budget, tries, grid, pairs;
    const char *canon;
    int found, exhausted;
    mt_violations first;
} value_search;

/* Knob i's declared values split into s->vals[i] (its text kept in *buf)
 * and checked; the base's value located, or added as a point of the grid.
 * The number of problems said in d, or -1 when out of memory. */
static int declare_values(space_walk *s, size_t i, char **buf)
{
    const char *k, *v;
    char field[300], canon[2048], why[1024];
    size_t j;
    int problems = 0;
    mt_kv_entry(s->c->space, i, &k, &v);
    s->knobs[i] = k;
    *buf = strdup(v);
    s->vals[i] = calloc(MAX_VALUES + 1, sizeof **s->vals);
    if (!*buf || !s->vals[i])
        return -1;
    s->nv[i] = split_bar(*buf, s->vals[i], MAX_VALUES);
    snprintf(field, sizeof field, "space.%s", k);
    if (mt_registry_is_core(k)) {
        mt_diag_add(s->d, s->c->path, mt_contract_line(s->c, field), field,
                    "%s is fixed by the contract and cannot be searched", k);
        return 1;
    }
    if (!mt_registry_knob(s->r, k, NULL)) {
        mt_kv *scratch = mt_kv_new();
        mt_config_set(s->r, scratch, k, s->vals[i][0], s->c->path, mt_contract_line(s->c, field),
                      field, s->d);
        mt_kv_destroy(&scratch);
        return 1;
    }
    for (j = 0; j < s->nv[i]; j++)
        if (mt_registry_normalize(s->r, k, s->vals[i][j], canon, sizeof canon, why, sizeof why)) {
            mt_diag_add(s->d, s->c->path, mt_contract_line(s->c, field), field, "%s", why);
            problems++;
        }
    /* the grid walks from the base: its value is a point of the grid */
    {
        const char *b = mt_kv_get(s->base, k);
        for (j = 0; b && j < s->nv[i]; j++) {
            if (!mt_registry_normalize(s->r, k, s->vals[i][j], canon, sizeof canon, why,
                                       sizeof why) &&
                !strcmp(canon, b))
                break;
        }
        /* the base's value, or (NULL) the knob left unset as in the base */
        if (j == s->nv[i] && s->nv[i] < MAX_VALUES)
            s->vals[i][s->nv[i]++] = (char *)b;
        s->bidx[i] = j < s->nv[i] ? j : 0;
    }
    return problems;
}

/* Tries the grid point idx (NULL: the base) with the searched value. */
static void try_point(space_walk *s, value_search *v, const size_t *idx)
{
    grid_sets(s->r, s->nk, s->knobs, s->vals, idx, v->i, v->canon, s->sets);
    v->found = legal_with(s->r, s->c, s->base, s->sets, &v->first, s->d);
    v->tries++;
}

/* s->idx back at the base's values. */
static void idx_at_base(space_walk *s)
{
    size_t k;
    for (k = 0; k < s->nk; k++)
        s->idx[k] = s->bidx[k];
}

/* 2. the base with the value and one other change. */
static void try_singles(space_walk *s, value_search *v)
{
    size_t m, w;
    for (m = 0; m < s->nk && !v->found; m++)
        for (w = 0; m != v->i && w < s->nv[m] && !v->found; w++) {
            if (w == s->bidx[m] || !s->vals[m][w])
                continue;
            idx_at_base(s);
            s->idx[m] = w;
            try_point(s, v, s->idx);
        }
}

/* 3. two other changes (a rule that needs two knobs: full recompute needs
 * a method and a layer count), within the budget. */
static void try_pairs(space_walk *s, value_search *v)
{
    size_t m, w, i = v->i;
    for (m = 0; m < s->nk && !v->found && v->tries < v->budget; m++)
        for (w = 0; m != i && w < s->nv[m] && !v->found && v->tries < v->budget; w++) {
            size_t m2, w2;
            if (w == s->bidx[m] || !s->vals[m][w])
                continue;
            for (m2 = m + 1; m2 < s->nk && !v->found && v->tries < v->budget; m2++)
                for (w2 = 0; m2 != i && w2 < s->nv[m2] && !v->found && v->tries < v->budget; w2++) {
                    if (w2 == s->bidx[m2] || !s->vals[m2][w2])
                        continue;
                    idx_at_base(s);
                    s->idx[m] = w, s->idx[m2] = w2;
                    try_point(s, v, s->idx);
                    v->pairs++;
                }
        }
}

/* 4. the grid of the other knobs, from the base's values; the points one
 * or two changes away were tried above (pairs only when pairs_done). */
static void try_grid(space_walk *s, value_search *v, int pairs_done)
{
    size_t m, visited, i = v->i;
    idx_at_base(s);
    for (visited = 0;
         !v->found && v->grid < GRID_TRIES && v->tries < v->budget && visited < 64 * GRID_TRIES;
         visited++) {
        size_t diff = 0;
        /* next grid point (mixed radix over the other knobs) */
        for (m = 0; m < s->nk; m++) {
            if (m == i)
                continue;
            if ((s->idx[m] = (s->idx[m] + 1) % s->nv[m]) != s->bidx[m])
                break;
        }
        if (m >= s->nk) {
            v->exhausted = 1; /* back at the base: the whole grid was tried */
            break;
        }
        for (m = 0; m < s->nk; m++)
            diff += m != i && s->idx[m] != s->bidx[m];
        if (diff == 1 || (diff == 2 && pairs_done))
            continue;
        try_point(s, v, s->idx);
        v->grid++;
    }
}

/* Says in d that value j of knob i has no legal config found. */
static void report_unreachable(space_walk *s, const value_search *v, size_t j, double configs)
{
    char field[300];
    size_t i = v->i;
    snprintf(field, sizeof field, "space.%s", s->knobs[i]);
    if (v->exhausted)
        mt_diag_add(s->d, s->c->path, mt_contract_line(s->c, field), field,
                    "value \"%s\" is illegal in every config of the declared space "
                    "(%zu tried); e.g. [%s] %s. Remove the value or widen the space",
                    s->vals[i][j], v->tries, v->first.n ? v->first.v[0].rule : "?",
                    v->first.n ? v->first.v[0].message : "");
    else
        mt_diag_add(s->d, s->c->path, mt_contract_line(s->c, field), field,
                    "value \"%s\": no legal config found in %zu tried (the base with "
                    "it, each single change of another knob, %zu pairs of changes, "
                    "%zu grid points from the base, of the space's %.0f configs; the "
                    "search is capped); e.g. [%s] %s. Remove the value, or make sure "
                    "a config of the space can use it",
                    s->vals[i][j], v->tries, v->pairs, v->grid, configs,
                    v->first.n ? v->first.v[0].rule : "?", v->first.n ? v->first.v[0].message : "");
}

/* Searches a legal config for value j of knob i, spending from *budget;
 * 1 (said in d) when none was found, 0 when one was or the value is the
 * base's own. */
static int search_value(space_walk *s, size_t i, size_t j, size_t *budget, double configs)
{
    value_search v;
    char canon[2048], why[1024];
    int pairs_done, problem = 0;
    if (!s->vals[i][j] || (j == s->bidx[i] && s->vals[i][j] == mt_kv_get(s->base, s->knobs[i])))
        return 0; /* the base's own value, not declared: mt_audit_base's */
    memset(&v, 0, sizeof v);
    v.i = i;
    v.budget = *budget;
    v.canon = canon;
    mt_registry_normalize(s->r, s->knobs[i], s->vals[i][j], canon, sizeof canon, why, sizeof why);
    /* 1. the base with it */
    try_point(s, &v, NULL);
    try_singles(s, &v);
    try_pairs(s, &v);
    pairs_done = !v.found && v.tries < v.budget;
    try_grid(s, &v, pairs_done);
    *budget = *budget > v.tries ? *budget - v.tries : 0;
    if (!v.found) {
        report_unreachable(s, &v, j, configs);
        problem = 1;
    }
    mt_violations_clear(&v.first);
    return problem;
}

int mt_audit_space(mt_registry *r, const mt_contract *c, const mt_kv *base, mt_diag *d)
{
    size_t nk = mt_kv_count(c->space), i, j, budget = AUDIT_TRIES;
    const char **knobs = calloc(nk + 1, sizeof *knobs);
    char **bufs = calloc(nk + 1, sizeof *bufs);
    char ***vals = calloc(nk + 1, sizeof *vals);
    size_t *nv = calloc(nk + 1, sizeof *nv), *bidx = calloc(nk + 1, sizeof *bidx);
    size_t *idx = calloc(nk + 1, sizeof *idx);
    mt_kv *sets = mt_kv_new();
    space_walk s;
    double configs = 1;
    int problems = 0;

    if (!knobs || !bufs || !vals || !nv || !bidx || !idx || !sets)
        goto done;
    s.r = r, s.c = c, s.base = base, s.d = d, s.nk = nk;
    s.knobs = knobs, s.vals = vals, s.nv = nv, s.bidx = bidx, s.idx = idx, s.sets = sets;
    /* Every declared value must be a legal value of its knob first. */
    for (i = 0; i < nk; i++) {
        int p = declare_values(&s, i, &bufs[i]);
        if (p < 0)
            goto done;
        problems += p;
        configs *= (double)nv[i]; /* used only when no value has a problem */
    }
    if (problems)
        goto done;
    for (i = 0; i < nk; i++)
        for (j = 0; j < nv[i]; j++)
            problems += search_value(&s, i, j, &budget, configs);
done:
    for (i = 0; i < nk; i++) {
        if (bufs)
            free(bufs[i]);
        if (vals)
            free(vals[i]);
    }
    free(knobs);
    free(bufs);
    free(vals);
    free(nv);
    free(bidx);
    free(idx);
    mt_kv_destroy(&sets);
    return problems;
}
