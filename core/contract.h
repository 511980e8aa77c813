/*
 * contract.h - the frozen measurement contract (a libconfig file).
 *
 * The reference for every field is core/CONTRACT.md.  Loading checks the
 * structure (groups, names, types, ranges) and fills views the plugins see;
 * knob names and values in `base` and `space` are checked later against the
 * loaded plugins (config.h), because plugins declare the knobs.
 */
#ifndef MT_CONTRACT_H
#define MT_CONTRACT_H

#include "diag.h"
#include "kv.h"

enum mt_routing { MT_ROUTING_FORCED = 0, MT_ROUTING_NATURAL = 1 };

typedef struct mt_window {
    int steps;  /* iterations in the run                */
    int first;  /* first iteration of the timing window  */
    int last;   /* last iteration of the timing window   */
} mt_window;

/* Wall classification thresholds (the `profile` group). */
typedef struct mt_profile_rules {
    double comm_share;  /* exposed communication share of the window      */
    double host_share;  /* idle share net of the pipeline bubble           */
    int host_min_gaps;  /* ... with at least this many gaps above gap_us   */
    double gap_us;      /* an idle gap longer than this is a host gap      */
} mt_profile_rules;

typedef struct mt_contract {
    char *path;
    char *name;
    mt_kv *model;    /* model shape: num_layers, hidden_size, ...       */
    mt_kv *hardware; /* gpu, arch, gpus_per_node, nodes, world_size, ... */
    mt_kv *stack;    /* stack versions: megatron_lm, container, ...      */
    mt_kv *data;     /* routing, drop_and_pad, seed, dataset             */
    mt_kv *batch;    /* seq_length, global_batch_size                    */
    mt_kv *base;     /* knob -> value as written (env.X, launcher.X too)  */
    mt_kv *space;    /* knob -> values joined by '|'                      */
    mt_kv *view;     /* the ctx->contract view handed to plugins          */
    mt_kv *lines;    /* dotted field -> line number, for messages         */
    mt_window screen, validate;
    int screen_warmup;
    int eval_interval, save_interval; /* 0 = never */
    int log_interval;                 /* --log-interval; moetune measures with 1 */
    double alpha, min_effect, memory_headroom, loss_tolerance;
    /* the memory estimate's relative error: a config whose estimate passes
     * the usable memory (HBM less the headroom) by no more than this is
     * probed before it is rejected (search/engine.c) */
    double memory_uncertainty;
    int replicates;
    mt_profile_rules profile;
    char **trace_classes; /* "class:pattern" kernel-name rules, in order */
    size_t n_trace_classes;
    double gpu_hours, deadline_hours;
    int max_runs;
    int routing;         /* enum mt_routing */
    int drop_and_pad;
    /* data.natural_validation: with forced routing, validate baseline and
     * winner with natural routing too, where the backend can run it */
    int natural_validation;
    unsigned labels;     /* enum mt_label bits */
    char *backend;       /* sim | command | cuda */
    char *launcher;      /* local | srun */
    int dialect;         /* enum mt_dialect */
    char **launch_template;
    size_t n_template;
    int template_bisect; /* the template names {rev} or {work}: `moetune bisect` only */
    int srun_bisect;     /* a launch.srun container setting names {rev} or {work}: the same */
    mt_kv *launch_env;   /* static environment of every run */
    /* launch.srun: static settings of the srun launcher (ntasks_per_node,
     * rank_env, rank_exec, container_image, container_mounts,
     * container_workdir), as strings; empty under other launchers */
    mt_kv *launch_srun;
    /* launch.plugin_path: files or directories, loaded only when the
     * operator passes --trust-plugin-path (a contract is input, not code) */
    char **plugin_path;
    size_t n_plugin_path;
    /* launch.plugins: the plugins the contract needs, by name, with the
     * least version (NULL: any) */
    char **plugins;
    char **plugin_min_versions;
    size_t n_plugins;
    char **fixed_args;   /* flags that are not knobs, rendered verbatim */
    size_t n_fixed_args;
    char *canonical;     /* canonical form, "group.key=value\n" sorted */
    char fingerprint[65];
} mt_contract;

/* Parses and structurally validates path.  On any problem appends to diag
 * (file, line, field, how to fix) and returns NULL.  Caller owns the return
 * value; free with mt_contract_destroy. */
mt_contract *mt_contract_load(const char *path, mt_diag *diag);
/* Same, from text (path is used in messages only). */
mt_contract *mt_contract_load_string(const char *text, const char *path, mt_diag *diag);
void mt_contract_destroy(mt_contract **c);

/* Line of a dotted field in the file, or 0. */
int mt_contract_line(const mt_contract *c, const char *field);

#endif
