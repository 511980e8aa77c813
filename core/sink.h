/*
 * sink.h - the host side of the plugin ABI: the mt_host_v1 table and the
 * sinks (output builders) a call hands to a plugin, plus the result types
 * those builders fill.
 *
 * A sink accepts only the builders of the call it was made for; a plugin that
 * calls another builder gets -EINVAL and a protocol error naming it, so a
 * buggy plugin cannot, say, render from check().
 */
#ifndef MT_SINK_H
#define MT_SINK_H

#include "kv.h"

#include <moetune/plugin.h>
#include <stddef.h>

typedef struct mt_strlist {
    char **v;
    size_t n, cap;
} mt_strlist;

int mt_strlist_push(mt_strlist *l, const char *s);
void mt_strlist_clear(mt_strlist *l);
/* Joins with sep; caller owns the return value. */
char *mt_strlist_join(const mt_strlist *l, const char *sep);

typedef struct mt_violation {
    char *plugin;
    char *rule;
    char *knobs;   /* space-separated; first = the knob to repair */
    char *message;
    uint32_t rule_class; /* enum mt_rule_class */
} mt_violation;

typedef struct mt_violations {
    mt_violation *v;
    size_t n, cap;
} mt_violations;

void mt_violations_clear(mt_violations *vs);
/* Appends one violation (copies every string). */
int mt_violations_add(mt_violations *vs, const char *plugin, const char *rule,
                      const char *knobs, const char *message, uint32_t rule_class);
/* True when rule id appears. */
int mt_violations_has(const mt_violations *vs, const char *rule);

typedef struct mt_knob_verdict {
    char *plugin;
    char *knob;
    uint32_t verdict; /* enum mt_verdict */
    char *evidence;
} mt_knob_verdict;

typedef struct mt_verdicts {
    mt_knob_verdict *v;
    size_t n, cap;
} mt_verdicts;

void mt_verdicts_clear(mt_verdicts *vs);

/* A candidate as proposed, before and after the repair protocol. */
typedef struct mt_candidate {
    char *plugin;
    char *variable;
    char *summary;
    uint32_t walls;      /* enum mt_wall bits  */
    uint32_t label;      /* enum mt_label      */
    mt_kv *sets;         /* knob -> new value  */
    mt_strlist notes;
    mt_kv *repairs;      /* knob -> value forced by other plugins' repairs */
    mt_strlist repair_notes; /* "plugin: why" */
    mt_kv *config;       /* resulting config (NULL until applied) */
    mt_violations violations; /* left after repair */
    char *reject;        /* why the host refused it before checking, or NULL */
} mt_candidate;

typedef struct mt_candidates {
    mt_candidate *v;
    size_t n, cap;
} mt_candidates;

void mt_candidates_clear(mt_candidates *cs);

/* Rendered launch pieces. */
typedef struct mt_rendered {
    mt_strlist argv;
    mt_kv *env;
    mt_kv *launch;
} mt_rendered;

void mt_rendered_init(mt_rendered *r);
void mt_rendered_clear(mt_rendered *r);

enum mt_sink_kind {
    MT_SINK_INIT,
    MT_SINK_PROPOSE,
    MT_SINK_REPAIR,
    MT_SINK_CHECK,
    MT_SINK_RENDER,
    MT_SINK_VERIFY
};

struct mt_sink {
    int kind;               /* enum mt_sink_kind */
    const char *plugin;     /* name, for attribution */
    mt_strlist errors;      /* sink_error + protocol errors */
    mt_candidates *cands;   /* PROPOSE */
    mt_kv *sets;            /* REPAIR */
    mt_strlist *notes;      /* REPAIR */
    mt_violations *viol;    /* CHECK */
    mt_rendered *rendered;  /* RENDER */
    mt_verdicts *verdicts;  /* VERIFY */
    /* this call's output so far, against the caps of plugin.h */
    size_t out_bytes, out_candidates;
    int capped;             /* a cap was passed: every builder refuses */
};

/* The table every plugin gets at init. */
const mt_host_v1 *mt_host_table(void);
/* Initialises a sink of the given kind; free errors with mt_sink_fini. */
void mt_sink_init(mt_sink *s, int kind, const char *plugin);
void mt_sink_fini(mt_sink *s);

#endif
