/*
 * bisect_config.c - a good and a bad config as changes of whole variables
 * (see bisect_config.h).
 */
#include "bisect_config.h"

#include "evaluate.h"
#include "sink.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int word_in(const char *list, const char *w)
{
    size_t n = strlen(w);
    const char *p = list;
    while (p && *p) {
        size_t len;
        while (*p == ' ')
            p++;
        len = strcspn(p, " ");
        if (len == n && !strncmp(p, w, n))
            return 1;
        p += len;
    }
    return 0;
}

/* The variable that owns knob: the first (registry order) whose knob list
 * names it; NULL when none does. */
static const char *variable_of(const mt_registry *r, const char *knob)
{
    size_t i, j, n = mt_registry_count(r);
    for (i = 0; i < n; i++) {
        const mt_plugin *p = mt_registry_at(r, i);
        if (!p->enabled || !p->desc)
            continue;
        for (j = 0; j < p->desc->n_variables; j++) {
            const mt_variable_v1 *v = &p->desc->variables[j];
            if (v->name && v->knobs && word_in(v->knobs, knob))
                return v->name;
        }
    }
    return NULL;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const mt_cfg_unit *)a)->name, ((const mt_cfg_unit *)b)->name);
}

static int append(char **s, const char *add)
{
    size_t a = *s ? strlen(*s) : 0, b = strlen(add);
    char *x = realloc(*s, a + b + 3);
    if (!x)
        return -ENOMEM;
    if (a)
        memcpy(x + a, ", ", 2), a += 2;
    memcpy(x + a, add, b + 1);
    *s = x;
    return 0;
}

int mt_cfg_diff_build(const mt_registry *r, const mt_kv *good, const mt_kv *bad,
                      mt_cfg_diff *out)
{
    const char *k, *v;
    size_t i, j;
    memset(out, 0, sizeof *out);
    /* every knob of either config (a knob only one of them holds differs) */
    for (int side = 0; side < 2; side++) {
        const mt_kv *from = side ? good : bad;
        for (i = 0; mt_kv_entry(from, i, &k, &v) == 0; i++) {
            const char *g = mt_kv_get(good, k), *b = mt_kv_get(bad, k), *var;
            char line[600];
            mt_cfg_unit *u = NULL;
            if (side && b)
                continue; /* seen from bad's side already */
            if (!strcmp(g ? g : "", b ? b : ""))
                continue;
            var = variable_of(r, k);
            if (!var)
                var = k;
            for (j = 0; j < out->n; j++)
                if (!strcmp(out->u[j].name, var))
                    u = &out->u[j];
            if (!u) {
                mt_cfg_unit *x = realloc(out->u, (out->n + 1) * sizeof *x);
                if (!x)
                    goto oom;
                out->u = x;
                u = &out->u[out->n++];
                memset(u, 0, sizeof *u);
                if (!(u->name = strdup(var)) || !(u->sets = mt_kv_new()))
                    goto oom;
            }
            if (mt_kv_set(u->sets, k, b ? b : ""))
                goto oom;
            snprintf(line, sizeof line, "%.120s: %.200s -> %.200s", k, g && g[0] ? g : "(unset)",
                     b && b[0] ? b : "(unset)");
            if (append(&u->summary, line))
                goto oom;
        }
    }
    if (out->n > 1)
        qsort(out->u, out->n, sizeof *out->u, by_name);
    return 0;
oom:
    mt_cfg_diff_clear(out);
    return -ENOMEM;
}

void mt_cfg_diff_clear(mt_cfg_diff *df)
{
    size_t i;
    for (i = 0; i < df->n; i++) {
        free(df->u[i].name);
        free(df->u[i].summary);
        mt_kv_destroy(&df->u[i].sets);
    }
    free(df->u);
    memset(df, 0, sizeof *df);
}

mt_kv *mt_cfg_diff_apply(mt_registry *r, const mt_contract *c, const mt_kv *good,
                         const mt_cfg_diff *df, const int *units, size_t k, char **repairs,
                         char *why, size_t why_len, mt_diag *d)
{
    mt_candidate cand;
    mt_kv *out = NULL;
    const char *key, *val;
    size_t i, j;
    if (repairs)
        *repairs = NULL;
    why[0] = '\0';
    memset(&cand, 0, sizeof cand);
    cand.plugin = "(config bisection)";
    cand.variable = "(config bisection)";
    cand.summary = "";
    cand.sets = mt_kv_new();
    cand.repairs = mt_kv_new();
    if (!cand.sets || !cand.repairs)
        goto oom;
    for (i = 0; i < k; i++) {
        const mt_cfg_unit *u = &df->u[units[i]];
        for (j = 0; mt_kv_entry(u->sets, j, &key, &val) == 0; j++)
            if (mt_kv_set(cand.sets, key, val))
                goto oom;
    }
    mt_candidate_apply(r, c, good, &cand, d);
    if (!cand.config) {
        snprintf(why, why_len, "the config could not be built (out of memory)");
    } else if (cand.violations.n) {
        const mt_violation *x = &cand.violations.v[0];
        snprintf(why, why_len, "no legal repair: %s (%s) stays violated: %.300s",
                 x->rule ? x->rule : "?", x->plugin ? x->plugin : "?",
                 x->message ? x->message : "");
    } else {
        out = cand.config;
        cand.config = NULL;
        if (repairs) {
            for (i = 0; mt_kv_entry(cand.repairs, i, &key, &val) == 0; i++) {
                char line[400];
                snprintf(line, sizeof line, "%.100s=%.100s", key, val);
                if (append(repairs, line))
                    break;
            }
            for (i = 0; i < cand.repair_notes.n; i++)
                if (append(repairs, cand.repair_notes.v[i]))
                    break;
        }
    }
    goto done;
oom:
    snprintf(why, why_len, "out of memory");
done:
    mt_kv_destroy(&cand.sets);
    mt_kv_destroy(&cand.repairs);
    mt_kv_destroy(&cand.config);
    mt_violations_clear(&cand.violations);
    mt_strlist_clear(&cand.repair_notes);
    mt_strlist_clear(&cand.notes);
    return out;
}
