/*
 * label.h - whether a config's figures are training-equivalent or
 * benchmark-only, and which setting makes them so.
 *
 * A label follows from the contract and every knob of the config (the
 * baseline's as much as the recipe's), never from the changes a tune made
 * alone: forced routing in the contract (data.routing = "forced") or in the
 * config (moe_router_force_load_balancing), synthetic data where the
 * contract measures natural routing (the router's load is the data's), and
 * training-program flags that disable the optimizer or the checkpoint path
 * (fixed_args or the launch template) each make a config benchmark-only.
 * The search engine adds what the plugins say of the changes it accepted
 * (a candidate's own label); see search/bundle.c.
 */
#ifndef MT_LABEL_H
#define MT_LABEL_H

#include "contract.h"
#include "kv.h"
#include "sink.h"

#include <stdint.h>

/* The label (MT_LABEL_TRAINING_EQUIVALENT or MT_LABEL_BENCHMARK_ONLY) of
 * config cfg measured under contract c with routing `routing` (enum
 * mt_routing; -1: the contract's own).  When reasons is not NULL, one
 * sentence per setting that makes it benchmark-only is appended to it, each
 * naming the setting (`data.routing = "forced"`, `--no-save-optim`, ...);
 * none for a training-equivalent config.  The caller frees reasons. */
uint32_t mt_label_config(const mt_contract *c, const mt_kv *cfg, int routing, mt_strlist *reasons);

/* "training-equivalent" | "benchmark-only" (the bundle's words). */
const char *mt_label_word(uint32_t label);

#endif
