/*
 * label.c - training-equivalent or benchmark-only, and why (label.h).
 */
#include "label.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Training-program flags that take a run away from training: the figures
 * are still throughput, but a recipe measured with them is no training
 * recipe.  Matched as whole tokens of fixed_args and the launch template. */
static const struct {
    const char *flag, *why;
} no_training[] = {
    {"--skip-train", "no training step runs (evaluation only)"},
    {"--no-save-optim", "checkpoints are saved without the optimizer state, so training cannot "
                        "resume from them"},
    {"--no-load-optim", "the optimizer state of the checkpoint is not loaded"},
    {"--fake-process-group", "a fake process group: no collective communication runs"},
};

const char *mt_label_word(uint32_t label)
{
    return label & MT_LABEL_BENCHMARK_ONLY ? "benchmark-only" : "training-equivalent";
}

static void why(mt_strlist *reasons, const char *fmt, const char *a)
{
    char line[512];
    if (!reasons)
        return;
    snprintf(line, sizeof line, fmt, a);
    mt_strlist_push(reasons, line);
}

static int is_on(const char *v)
{
    return v && (!strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "True"));
}

/* A zero learning rate (`--lr 0`): the optimizer steps, and changes nothing. */
static int zero_lr(const char *const *argv, size_t n, size_t i)
{
    char *end;
    double x;
    if (strcmp(argv[i], "--lr") || i + 1 >= n)
        return 0;
    x = strtod(argv[i + 1], &end);
    return !*end && end != argv[i + 1] && x == 0;
}

static uint32_t scan_args(const char *const *argv, size_t n, const char *where, int natural,
                          mt_strlist *reasons)
{
    uint32_t label = MT_LABEL_TRAINING_EQUIVALENT;
    size_t i, j;
    char line[512];
    for (i = 0; i < n; i++) {
        for (j = 0; j < sizeof no_training / sizeof no_training[0]; j++)
            if (!strcmp(argv[i], no_training[j].flag)) {
                label = MT_LABEL_BENCHMARK_ONLY;
                snprintf(line, sizeof line, "%s (%s): %s", no_training[j].flag, where,
                         no_training[j].why);
                why(reasons, "%s", line);
            }
        if (zero_lr(argv, n, i)) {
            label = MT_LABEL_BENCHMARK_ONLY;
            snprintf(line, sizeof line,
                     "--lr %s (%s): a zero learning rate, the optimizer "
                     "updates nothing",
                     argv[i + 1], where);
            why(reasons, "%s", line);
        }
        if (natural && !strcmp(argv[i], "--mock-data")) {
            label = MT_LABEL_BENCHMARK_ONLY;
            snprintf(line, sizeof line,
                     "--mock-data (%s) with natural routing: the router routes "
                     "synthetic tokens, not the training data",
                     where);
            why(reasons, "%s", line);
        }
    }
    return label;
}

uint32_t mt_label_config(const mt_contract *c, const mt_kv *cfg, int routing, mt_strlist *reasons)
{
    uint32_t label = MT_LABEL_TRAINING_EQUIVALENT;
    const char *ds;
    int natural;
    if (routing < 0)
        routing = c->routing;
    natural = routing == MT_ROUTING_NATURAL;
    if (!natural) {
        label = MT_LABEL_BENCHMARK_ONLY;
        why(reasons, "%s",
            "data.routing = \"forced\" (the contract): balanced routing, not the "
            "router's own choice of experts");
    }
    if (cfg && is_on(mt_kv_get(cfg, "moe_router_force_load_balancing"))) {
        label = MT_LABEL_BENCHMARK_ONLY;
        why(reasons, "%s",
            "moe_router_force_load_balancing = true: random balanced routing "
            "replaces the router's choice of experts");
    }
    /* Synthetic tokens matter where the contract measures the router's own
     * load.  The sim backend has no data: its natural routing is a model of
     * real data's imbalance (calibration point A5), so there mock data
     * change nothing. */
    ds = c->data ? mt_kv_get(c->data, "dataset") : NULL;
    if (natural && ds && !strcmp(ds, "mock") && c->backend && strcmp(c->backend, "sim")) {
        label = MT_LABEL_BENCHMARK_ONLY;
        why(reasons, "%s",
            "data.dataset = \"mock\" (the contract) with natural routing: the "
            "router routes synthetic tokens, not the training data");
    }
    if (!c->backend || strcmp(c->backend, "sim"))
        natural = natural && !(ds && !strcmp(ds, "mock")); /* said once above */
    else
        natural = 0;
    label |= scan_args((const char *const *)c->fixed_args, c->n_fixed_args, "fixed_args", natural,
                       reasons);
    label |= scan_args((const char *const *)c->launch_template, c->n_template, "launch.template",
                       natural, reasons);
    return label & MT_LABEL_BENCHMARK_ONLY ? MT_LABEL_BENCHMARK_ONLY : MT_LABEL_TRAINING_EQUIVALENT;
}
