/*
 * evaluate.h - legality of a whole config and the repair protocol.
 *
 * A candidate changes one variable.  When that makes another plugin's knob
 * illegal, the knob's owner is asked for the minimal repair; the repair is
 * recorded with the candidate as a forced, disclosed change.  Rounds repeat
 * until the config is legal or nobody can repair further.
 */
#ifndef MT_EVALUATE_H
#define MT_EVALUATE_H

#include "config.h"
#include "contract.h"
#include "registry.h"
#include "sink.h"

/* Every rule cfg violates.  0, or negative when a plugin failed (in d). */
int mt_legality(mt_registry *r, const mt_contract *c, const mt_kv *cfg, mt_violations *out,
                mt_diag *d);
/* The argument namespace (ctx->args) of cfg: rendered in the Megatron-LM
 * spelling of the contract's stack and read by that version's parser, with
 * env.NAME for the run's environment.  NULL when the stack is unknown or the
 * render fails; when the parser refuses, also NULL, and the refusal is added
 * to out (when not NULL) as a start-up violation of the core. */
/* Choices plugins add to upstream flags through the knob values they
 * extend: option string -> "a|b" (for mt_argparse_ext). */
mt_kv *mt_extension_choices(const mt_registry *r);
mt_kv *mt_args_of(mt_registry *r, const mt_contract *c, const mt_kv *cfg, mt_violations *out,
                  mt_diag *d);

/* Builds cand->config = base + cand->sets + repairs, filling cand->repairs,
 * cand->repair_notes and cand->violations (empty when legal). */
int mt_candidate_apply(mt_registry *r, const mt_contract *c, const mt_kv *base,
                       mt_candidate *cand, mt_diag *d);

/* Parses "memory", "communication" (or "comm"), "host", "compute" into an
 * mt_wall bit; 0 when unknown. */
uint32_t mt_wall_parse(const char *name);
/* "memory+communication" style text for a bit set. */
void mt_wall_format(uint32_t walls, char *buf, size_t n);

/* Every enabled plugin's candidates for cfg (those targeting a wall in
 * wall_mask, all when 0), each applied through the repair protocol. */
int mt_candidates_for(mt_registry *r, const mt_contract *c, const mt_kv *cfg,
                      const mt_kv *evidence, uint32_t wall_mask, mt_candidates *out, mt_diag *d);

#endif
