/*
 * rules.h - the core's own start-up rules: what Megatron checks about the
 * knobs the core owns (model shape, sequence, batch, logging) and about the
 * fixed arguments no plugin owns (position embedding, tokenizer, ...).
 *
 * They are written with the same kit as the plugins' rules
 * (abi/moetune/kit.h: header-only, nothing but the ABI), over ctx->args.
 */
#ifndef MT_RULES_H
#define MT_RULES_H

#include "sink.h"

#include <moetune/plugin.h>

/* Adds every violated core rule to out (plugin "core"). */
void mt_core_check(const mt_ctx_v1 *ctx, mt_violations *out);

#endif
