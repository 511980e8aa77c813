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
    mt_violations_free(&vs);
    return n;
}

/* Search for a legal config of the space with knob = value. */
#define MAX_TRIES 20000

int mt_audit_space(mt_registry *r, const mt_contract *c, const mt_kv *base, mt_diag *d)
{
    size_t nk = mt_kv_count(c->space), i, j;
    const char **knobs = calloc(nk + 1, sizeof *knobs);
    char **bufs = calloc(nk + 1, sizeof *bufs);
    char ***vals = calloc(nk + 1, sizeof *vals);
    size_t *nv = calloc(nk + 1, sizeof *nv);
    int problems = 0;

    if (!knobs || !bufs || !vals || !nv)
        goto done;
    /* Every declared value must be a legal value of its knob first. */
    for (i = 0; i < nk; i++) {
        const char *k, *v;
        char field[300], canon[2048], why[1024];
        mt_kv_entry(c->space, i, &k, &v);
        knobs[i] = k;
        bufs[i] = strdup(v);
        vals[i] = calloc(64, sizeof **vals);
        nv[i] = split_bar(bufs[i], vals[i], 64);
        snprintf(field, sizeof field, "space.%s", k);
        if (mt_registry_is_core(k)) {
            mt_diag_add(d, c->path, mt_contract_line(c, field), field,
                        "%s is fixed by the contract and cannot be searched", k);
            problems++;
            continue;
        }
        if (!mt_registry_knob(r, k, NULL)) {
            mt_kv *scratch = mt_kv_new();
            mt_config_set(r, scratch, k, vals[i][0], c->path, mt_contract_line(c, field), field, d);
            mt_kv_destroy(&scratch);
            problems++;
            continue;
        }
        for (j = 0; j < nv[i]; j++)
            if (mt_registry_normalize(r, k, vals[i][j], canon, sizeof canon, why, sizeof why)) {
                mt_diag_add(d, c->path, mt_contract_line(c, field), field, "%s", why);
                problems++;
            }
    }
    if (problems)
        goto done;
    for (i = 0; i < nk; i++)
        for (j = 0; j < nv[i]; j++) {
            size_t idx[64] = {0}, tries = 0, m;
            int found = 0, exhausted = 0;
            mt_violations first = {0};
            char canon[2048], why[1024], field[300];
            mt_registry_normalize(r, knobs[i], vals[i][j], canon, sizeof canon, why, sizeof why);
            while (!found && tries < MAX_TRIES) {
                mt_candidate cand;
                memset(&cand, 0, sizeof cand);
                cand.plugin = "(space)";
                cand.sets = mt_kv_new();
                cand.repairs = mt_kv_new();
                /* idx all zero = the base config itself with knob=value */
                for (m = 0; m < nk && m < 64; m++) {
                    char c2[2048];
                    if (m == i) {
                        mt_kv_set(cand.sets, knobs[m], canon);
                    } else if (tries > 0) {
                        mt_registry_normalize(r, knobs[m], vals[m][idx[m]], c2, sizeof c2, why,
                                              sizeof why);
                        mt_kv_set(cand.sets, knobs[m], c2);
                    }
                }
                mt_candidate_apply(r, c, base, &cand, d);
                if (!cand.violations.n)
                    found = 1;
                else if (!first.n) {
                    first = cand.violations;
                    memset(&cand.violations, 0, sizeof cand.violations);
                }
                cand.plugin = NULL;
                free(cand.variable);
                mt_kv_destroy(&cand.sets);
                mt_kv_destroy(&cand.repairs);
                mt_kv_destroy(&cand.config);
                mt_strlist_free(&cand.notes);
                mt_strlist_free(&cand.repair_notes);
                mt_violations_free(&cand.violations);
                tries++;
                if (tries == 1)
                    continue; /* next: the first grid point */
                /* next grid point (mixed radix over the other knobs) */
                for (m = 0; m < nk && m < 64; m++) {
                    if (m == i)
                        continue;
                    if (++idx[m] < nv[m])
                        break;
                    idx[m] = 0;
                }
                if (m >= nk || m >= 64) {
                    exhausted = 1; /* wrapped: the whole grid was tried */
                    break;
                }
            }
            if (!found) {
                snprintf(field, sizeof field, "space.%s", knobs[i]);
                mt_diag_add(d, c->path, mt_contract_line(c, field), field,
                            "value \"%s\" is illegal in every config of the declared space "
                            "(%zu tried%s); e.g. [%s] %s. Remove the value or widen the space",
                            vals[i][j], tries, exhausted ? "" : ", search capped",
                            first.n ? first.v[0].rule : "?",
                            first.n ? first.v[0].message : "");
                problems++;
            }
            mt_violations_free(&first);
        }
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
    return problems;
}
