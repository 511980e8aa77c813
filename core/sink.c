#include "sink.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GROW(arr, n, cap)                                                                     \
    do {                                                                                      \
        if ((n) == (cap)) {                                                                   \
            size_t nc_ = (cap) ? (cap) * 2 : 8;                                               \
            void *np_ = realloc((arr), nc_ * sizeof *(arr));                                  \
            if (!np_)                                                                         \
                return -ENOMEM;                                                               \
            (arr) = np_;                                                                      \
            (cap) = nc_;                                                                      \
        }                                                                                     \
    } while (0)

static char *dupstr(const char *s) { return strdup(s ? s : ""); }

int mt_strlist_push(mt_strlist *l, const char *s)
{
    GROW(l->v, l->n, l->cap);
    l->v[l->n] = dupstr(s);
    if (!l->v[l->n])
        return -ENOMEM;
    l->n++;
    return 0;
}

void mt_strlist_clear(mt_strlist *l)
{
    size_t i;
    for (i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

char *mt_strlist_join(const mt_strlist *l, const char *sep)
{
    size_t i, len = 1, off = 0, sl = strlen(sep);
    char *out;
    for (i = 0; i < l->n; i++)
        len += strlen(l->v[i]) + sl;
    out = malloc(len);
    if (!out)
        return NULL;
    out[0] = '\0';
    for (i = 0; i < l->n; i++) {
        size_t k = strlen(l->v[i]);
        if (i) {
            memcpy(out + off, sep, sl);
            off += sl;
        }
        memcpy(out + off, l->v[i], k);
        off += k;
    }
    out[off] = '\0';
    return out;
}

void mt_violations_clear(mt_violations *vs)
{
    size_t i;
    for (i = 0; i < vs->n; i++) {
        free(vs->v[i].plugin);
        free(vs->v[i].rule);
        free(vs->v[i].knobs);
        free(vs->v[i].message);
    }
    free(vs->v);
    memset(vs, 0, sizeof *vs);
}

int mt_violations_add(mt_violations *vs, const char *plugin, const char *rule,
                      const char *knobs, const char *message, uint32_t rule_class)
{
    mt_violation *v;
    GROW(vs->v, vs->n, vs->cap);
    v = &vs->v[vs->n++];
    v->plugin = dupstr(plugin);
    v->rule = dupstr(rule);
    v->knobs = dupstr(knobs);
    v->message = dupstr(message);
    v->rule_class = rule_class;
    return 0;
}

int mt_violations_has(const mt_violations *vs, const char *rule)
{
    size_t i;
    for (i = 0; i < vs->n; i++)
        if (!strcmp(vs->v[i].rule, rule))
            return 1;
    return 0;
}

void mt_verdicts_clear(mt_verdicts *vs)
{
    size_t i;
    for (i = 0; i < vs->n; i++) {
        free(vs->v[i].plugin);
        free(vs->v[i].knob);
        free(vs->v[i].evidence);
    }
    free(vs->v);
    memset(vs, 0, sizeof *vs);
}

static void candidate_free(mt_candidate *c)
{
    free(c->plugin);
    free(c->variable);
    free(c->summary);
    mt_kv_destroy(&c->sets);
    mt_strlist_clear(&c->notes);
    mt_kv_destroy(&c->repairs);
    mt_strlist_clear(&c->repair_notes);
    mt_kv_destroy(&c->config);
    mt_violations_clear(&c->violations);
    free(c->reject);
}

void mt_candidates_clear(mt_candidates *cs)
{
    size_t i;
    for (i = 0; i < cs->n; i++)
        candidate_free(&cs->v[i]);
    free(cs->v);
    memset(cs, 0, sizeof *cs);
}

void mt_rendered_init(mt_rendered *r)
{
    memset(r, 0, sizeof *r);
    r->env = mt_kv_new();
    r->launch = mt_kv_new();
}

void mt_rendered_clear(mt_rendered *r)
{
    mt_strlist_clear(&r->argv);
    mt_kv_destroy(&r->env);
    mt_kv_destroy(&r->launch);
}

void mt_sink_init(mt_sink *s, int kind, const char *plugin)
{
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->plugin = plugin;
}

void mt_sink_fini(mt_sink *s) { mt_strlist_clear(&s->errors); }

static int wrong(mt_sink *s, const char *builder)
{
    static const char *const calls[] = {"init", "propose", "repair", "check", "render", "verify"};
    char msg[160];
    if (!s)
        return -EINVAL;
    snprintf(msg, sizeof msg, "protocol error: %s() called %s, which that call does not accept",
             calls[s->kind], builder);
    mt_strlist_push(&s->errors, msg);
    return -EINVAL;
}

/* Charges one builder call against the per-call output caps of plugin.h:
 * MT_PLUGIN_ITEM_BYTES plus the lengths of its strings (a, b, c may be
 * NULL), and one candidate when candidate is set.  0, or -E2BIG once a cap
 * is passed: the first refusal records an error naming the cap, later ones
 * only refuse, so a flood costs nothing more. */
static int charge(mt_sink *s, const char *a, const char *b, const char *c, int candidate)
{
    static const char *const calls[] = {"init", "propose", "repair", "check", "render", "verify"};
    size_t bytes = MT_PLUGIN_ITEM_BYTES + (a ? strlen(a) : 0) + (b ? strlen(b) : 0) +
                   (c ? strlen(c) : 0);
    char msg[300];
    if (s->capped)
        return -E2BIG;
    s->out_bytes += bytes;
    s->out_candidates += candidate != 0;
    if (s->out_candidates > MT_PLUGIN_MAX_CANDIDATES)
        snprintf(msg, sizeof msg,
                 "output cap: more than %d candidates in one %s() call "
                 "(MT_PLUGIN_MAX_CANDIDATES); the rest were refused",
                 MT_PLUGIN_MAX_CANDIDATES, calls[s->kind]);
    else if (s->out_bytes > MT_PLUGIN_MAX_OUTPUT_BYTES)
        snprintf(msg, sizeof msg,
                 "output cap: more than %u bytes in one %s() call "
                 "(MT_PLUGIN_MAX_OUTPUT_BYTES); the rest was refused",
                 (unsigned)MT_PLUGIN_MAX_OUTPUT_BYTES, calls[s->kind]);
    else
        return 0;
    s->capped = 1;
    mt_strlist_push(&s->errors, msg);
    return -E2BIG;
}

/* ---- host table ---------------------------------------------------------- */

static void h_log(int level, const char *plugin, const char *msg)
{
    static const char *const names[] = {"debug", "info", "warn", "error"};
    const char *env = getenv("MOETUNE_LOG");
    int min = env ? atoi(env) : MT_LOG_WARN;
    if (level < min)
        return;
    fprintf(stderr, "moetune: plugin %s: %s: %s\n", plugin ? plugin : "?",
            names[level >= 0 && level <= 3 ? level : 3], msg ? msg : "");
}

static const char *h_kv_get(const mt_kv *kv, const char *key) { return mt_kv_get(kv, key); }
static size_t h_kv_count(const mt_kv *kv) { return mt_kv_count(kv); }
static int h_kv_entry(const mt_kv *kv, size_t i, const char **k, const char **v)
{
    return mt_kv_entry(kv, i, k, v);
}

static int h_candidate(mt_sink *s, const char *variable, const char *summary, uint32_t walls,
                       uint32_t label)
{
    mt_candidate *c;
    if (!s || s->kind != MT_SINK_PROPOSE)
        return wrong(s, "sink_candidate");
    if (!variable || !*variable) {
        mt_strlist_push(&s->errors, "protocol error: candidate without a variable");
        return -EINVAL;
    }
    if (charge(s, variable, summary, NULL, 1))
        return -E2BIG;
    GROW(s->cands->v, s->cands->n, s->cands->cap);
    c = &s->cands->v[s->cands->n];
    memset(c, 0, sizeof *c);
    c->plugin = dupstr(s->plugin);
    c->variable = dupstr(variable);
    c->summary = dupstr(summary);
    c->walls = walls;
    c->label = label;
    c->sets = mt_kv_new();
    c->repairs = mt_kv_new();
    s->cands->n++;
    return 0;
}

static int h_set(mt_sink *s, const char *knob, const char *value)
{
    if (!s || !knob)
        return -EINVAL;
    if (charge(s, knob, value, NULL, 0))
        return -E2BIG;
    if (s->kind == MT_SINK_PROPOSE) {
        if (!s->cands->n)
            return wrong(s, "sink_set before sink_candidate");
        return mt_kv_set(s->cands->v[s->cands->n - 1].sets, knob, value ? value : "");
    }
    if (s->kind == MT_SINK_REPAIR)
        return mt_kv_set(s->sets, knob, value ? value : "");
    return wrong(s, "sink_set");
}

static int h_note(mt_sink *s, const char *text)
{
    if (!s)
        return -EINVAL;
    if (charge(s, text, NULL, NULL, 0))
        return -E2BIG;
    if (s->kind == MT_SINK_PROPOSE) {
        if (!s->cands->n)
            return wrong(s, "sink_note before sink_candidate");
        return mt_strlist_push(&s->cands->v[s->cands->n - 1].notes, text);
    }
    if (s->kind == MT_SINK_REPAIR)
        return mt_strlist_push(s->notes, text);
    return wrong(s, "sink_note");
}

static int h_violation_class(mt_sink *s, const char *rule, const char *knobs,
                             const char *message, uint32_t rule_class)
{
    mt_violation *v = NULL;
    if (!s || s->kind != MT_SINK_CHECK)
        return wrong(s, "sink_violation");
    if (rule_class != MT_RULE_STARTUP && rule_class != MT_RULE_RUNTIME)
        return wrong(s, "sink_violation_class with an unknown class");
    if (charge(s, rule, knobs, message, 0))
        return -E2BIG;
    (void)v;
    return mt_violations_add(s->viol, s->plugin, rule, knobs, message, rule_class);
}

static int h_violation(mt_sink *s, const char *rule, const char *knobs, const char *message)
{
    return h_violation_class(s, rule, knobs, message, MT_RULE_STARTUP);
}

static int h_arg(mt_sink *s, const char *token)
{
    if (!s || s->kind != MT_SINK_RENDER)
        return wrong(s, "sink_arg");
    if (charge(s, token, NULL, NULL, 0))
        return -E2BIG;
    return mt_strlist_push(&s->rendered->argv, token);
}

static int h_env(mt_sink *s, const char *name, const char *value)
{
    if (!s || s->kind != MT_SINK_RENDER)
        return wrong(s, "sink_env");
    if (charge(s, name, value, NULL, 0))
        return -E2BIG;
    return mt_kv_set(s->rendered->env, name, value);
}

static int h_launch(mt_sink *s, const char *key, const char *value)
{
    if (!s || s->kind != MT_SINK_RENDER)
        return wrong(s, "sink_launch");
    if (charge(s, key, value, NULL, 0))
        return -E2BIG;
    return mt_kv_set(s->rendered->launch, key, value);
}

static int h_verdict(mt_sink *s, const char *knob, uint32_t verdict, const char *evidence)
{
    mt_knob_verdict *v;
    if (!s || s->kind != MT_SINK_VERIFY)
        return wrong(s, "sink_verdict");
    if (charge(s, knob, evidence, NULL, 0))
        return -E2BIG;
    if (verdict > MT_VERDICT_NOT_APPLIED)
        verdict = MT_VERDICT_UNKNOWN;
    GROW(s->verdicts->v, s->verdicts->n, s->verdicts->cap);
    v = &s->verdicts->v[s->verdicts->n++];
    v->plugin = dupstr(s->plugin);
    v->knob = dupstr(knob);
    v->verdict = verdict;
    v->evidence = dupstr(evidence);
    return 0;
}

static int h_error(mt_sink *s, const char *message)
{
    if (!s)
        return -EINVAL;
    if (charge(s, message, NULL, NULL, 0))
        return -E2BIG;
    return mt_strlist_push(&s->errors, message);
}

static const mt_host_v1 host_table = {
    sizeof(mt_host_v1), MT_PLUGIN_ABI_VERSION, h_log,   h_kv_get,  h_kv_count, h_kv_entry,
    h_candidate,        h_set,                 h_note,  h_violation, h_arg,    h_env,
    h_launch,           h_verdict,             h_error, h_violation_class};

const mt_host_v1 *mt_host_table(void) { return &host_table; }
