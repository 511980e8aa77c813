#include "evaluate.h"

#include "derive.h"
#include "dialect.h"
#include "render.h"
#include "rules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The kind of an argparse refusal, as a rule id of the core. */
static const char *parse_rule(const char *error)
{
    if (!strncmp(error, "unrecognized arguments", 22))
        return "core.args_unrecognized";
    if (strstr(error, ": invalid choice: "))
        return "core.args_invalid_choice";
    if (strstr(error, ": expected "))
        return "core.args_arity";
    if (!strncmp(error, "KeyError: ", 10))
        return "core.args_unknown_enum_member";
    return "core.args_invalid_value";
}

/* The knob a parser error is about: the offending flag's dest. */
static void parse_knob(const mt_argparse_result *res, const char *error, char *buf, size_t n)
{
    const char *f = strcmp(res->where, "argparse") ? res->where : NULL;
    size_t i;
    if (!f && !strncmp(error, "unrecognized arguments: ", 24))
        f = error + 24;
    if (!f) {
        buf[0] = 0;
        return;
    }
    while (*f == '-')
        f++;
    for (i = 0; f[i] && f[i] != ' ' && f[i] != '=' && i + 1 < n; i++)
        buf[i] = f[i] == '-' ? '_' : f[i];
    buf[i] = 0;
}

mt_kv *mt_extension_choices(const mt_registry *r)
{
    mt_kv *extra = mt_kv_new();
    size_t i;
    for (i = 0; extra && i < mt_registry_count(r); i++) {
        const mt_plugin *p = mt_registry_at(r, i);
        uint32_t j;
        if (!p->enabled)
            continue;
        for (j = 0; j < p->desc->n_extends; j++) {
            const mt_extension_v1 *e = &p->desc->extends[j];
            const char *const *v;
            char flag[256], list[2048];
            size_t k, len;
            snprintf(flag, sizeof flag, "--%s", e->knob);
            for (k = 2; flag[k]; k++)
                if (flag[k] == '_')
                    flag[k] = '-';
            len = (size_t)snprintf(list, sizeof list, "%s", mt_kv_get(extra, flag) ?: "");
            for (v = e->values; v && *v && len < sizeof list; v++)
                len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", len ? "|" : "", *v);
            mt_kv_set(extra, flag, list);
        }
    }
    return extra;
}

mt_kv *mt_args_of(mt_registry *r, const mt_contract *c, const mt_kv *cfg, mt_violations *out,
                  mt_diag *d)
{
    char why[512];
    const mt_mlm_dialect *dl = mt_dialect_for_stack(c->stack, why, sizeof why);
    mt_rendered rd;
    mt_kv *args;
    mt_argparse_result res = {0};
    mt_kv *extra = NULL;
    size_t i;
    const char *k, *v;
    if (!dl)
        return NULL;
    mt_rendered_init(&rd);
    /* Bridge builds the same Megatron-Core configs: its rules are judged on
     * the Megatron-LM spelling of the same config. */
    if (mt_render(r, c, cfg, MT_DIALECT_MLM, &rd, d)) {
        mt_rendered_clear(&rd);
        return NULL;
    }
    args = mt_kv_new();
    extra = mt_extension_choices(r);
    if (args && mt_argparse_ext(dl, rd.argv.v, rd.argv.n, args, &res, extra)) {
        char msg[800], knob[128];
        parse_knob(&res, res.error, knob, sizeof knob);
        snprintf(msg, sizeof msg, "Megatron-LM %s's argument parser refuses the command line: %s",
                 mt_dialect_name(dl), res.error);
        if (out)
            mt_violations_add(out, "core", parse_rule(res.error), knob, msg, MT_RULE_STARTUP);
        mt_kv_destroy(&args);
    } else if (args) {
        mt_args_derive(args, strtol(mt_kv_get(c->hardware, "world_size") ?: "1", NULL, 10));
        for (i = 0; mt_kv_entry(rd.env, i, &k, &v) == 0; i++) {
            char key[512];
            snprintf(key, sizeof key, "env.%s", k);
            mt_kv_set(args, key, v);
        }
    }
    mt_argparse_result_clear(&res);
    mt_rendered_clear(&rd);
    mt_kv_destroy(&extra);
    return args;
}

int mt_legality(mt_registry *r, const mt_contract *c, const mt_kv *cfg, mt_violations *out,
                mt_diag *d)
{
    mt_ctx_v1 ctx = mt_ctx_make(c, cfg, NULL, NULL);
    mt_kv *args = mt_args_of(r, c, cfg, out, d);
    int rc;
    ctx.args = args;
    rc = mt_registry_check(r, &ctx, out, d);
    if (args)
        mt_core_check(&ctx, out);
    mt_kv_destroy(&args);
    return rc;
}

/* The plugin that answers for knob's current value: the extender when the
 * value is an extension value, else the owner (NULL for core knobs). */
static const mt_plugin *answerer(const mt_registry *r, const mt_kv *cfg, const char *knob)
{
    const mt_plugin *own = NULL, *ext;
    const char *v = mt_kv_get(cfg, knob);
    if (!mt_registry_knob(r, knob, &own))
        return NULL;
    ext = v ? mt_registry_extender(r, knob, v) : NULL;
    return ext ? ext : own;
}

int mt_candidate_apply(mt_registry *r, const mt_contract *c, const mt_kv *base,
                       mt_candidate *cand, mt_diag *d)
{
    const char *k, *v;
    size_t i;
    int round;

    mt_kv_destroy(&cand->config);
    mt_violations_clear(&cand->violations);
    cand->config = mt_kv_dup(base);
    if (!cand->config)
        return -1;
    for (i = 0; mt_kv_entry(cand->sets, i, &k, &v) == 0; i++)
        mt_kv_set(cand->config, k, v);

    for (round = 0; round < 4; round++) {
        mt_violations vs = {0};
        const mt_plugin *asked[32];
        size_t n_asked = 0, applied = 0;
        mt_legality(r, c, cand->config, &vs, d);
        if (!vs.n) {
            mt_violations_clear(&vs);
            break;
        }
        for (i = 0; i < vs.n; i++) {
            char first[256];
            const mt_plugin *p;
            size_t j, before;
            mt_kv *got;
            mt_ctx_v1 ctx;
            sscanf(vs.v[i].knobs, "%255s", first);
            if (!vs.v[i].knobs[0] || mt_kv_get(cand->sets, first))
                continue; /* the candidate's own knob: nothing to repair */
            p = answerer(r, cand->config, first);
            if (!p || !strcmp(p->desc->name, cand->plugin))
                continue;
            for (j = 0; j < n_asked; j++)
                if (asked[j] == p)
                    break;
            if (j < n_asked || n_asked == 32)
                continue;
            asked[n_asked++] = p;
            got = mt_kv_new();
            before = cand->repair_notes.n;
            ctx = mt_ctx_make(c, cand->config, NULL, cand->sets);
            mt_registry_repair(r, p, &ctx, got, &cand->repair_notes, d);
            for (j = before; j < cand->repair_notes.n; j++) {
                /* attribute each note to the plugin that forced the change */
                char *line = malloc(strlen(p->desc->name) + strlen(cand->repair_notes.v[j]) + 3);
                if (line) {
                    sprintf(line, "%s: %s", p->desc->name, cand->repair_notes.v[j]);
                    free(cand->repair_notes.v[j]);
                    cand->repair_notes.v[j] = line;
                }
            }
            for (j = 0; mt_kv_entry(got, j, &k, &v) == 0; j++) {
                const char *cur = mt_kv_get(cand->config, k);
                if (cur && !strcmp(cur, v))
                    continue;
                mt_kv_set(cand->config, k, v);
                mt_kv_set(cand->repairs, k, v);
                applied++;
            }
            mt_kv_destroy(&got);
        }
        mt_violations_clear(&vs);
        if (!applied)
            break;
    }
    return mt_legality(r, c, cand->config, &cand->violations, d);
}

uint32_t mt_wall_parse(const char *name)
{
    if (!strcmp(name, "memory"))
        return MT_WALL_MEMORY;
    if (!strcmp(name, "communication") || !strcmp(name, "comm"))
        return MT_WALL_COMM;
    if (!strcmp(name, "host") || !strcmp(name, "launch"))
        return MT_WALL_HOST;
    if (!strcmp(name, "compute"))
        return MT_WALL_COMPUTE;
    return 0;
}

void mt_wall_format(uint32_t walls, char *buf, size_t n)
{
    static const char *const names[] = {"memory", "communication", "host", "compute"};
    size_t off = 0;
    int i;
    buf[0] = '\0';
    for (i = 0; i < 4; i++)
        if (walls & (1u << i))
            off += (size_t)snprintf(buf + off, off < n ? n - off : 0, "%s%s", off ? "+" : "",
                                    names[i]);
    if (!off)
        snprintf(buf, n, "none");
}

int mt_candidates_for(mt_registry *r, const mt_contract *c, const mt_kv *cfg,
                      const mt_kv *evidence, uint32_t wall_mask, mt_candidates *out, mt_diag *d)
{
    mt_candidates all = {0};
    mt_ctx_v1 ctx = mt_ctx_make(c, cfg, evidence, NULL);
    size_t i;
    int rc = mt_registry_propose(r, NULL, &ctx, &all, d);
    for (i = 0; i < all.n; i++) {
        mt_candidate *cand = &all.v[i];
        if (wall_mask && !(cand->walls & wall_mask))
            continue;
        if (!cand->reject)
            mt_candidate_apply(r, c, cfg, cand, d);
        if (out->n == out->cap) {
            size_t cap = out->cap ? out->cap * 2 : 16;
            mt_candidate *nv = realloc(out->v, cap * sizeof *nv);
            if (!nv)
                break;
            out->v = nv;
            out->cap = cap;
        }
        out->v[out->n++] = *cand;
        memset(cand, 0, sizeof *cand); /* moved */
    }
    mt_candidates_clear(&all);
    return rc;
}
