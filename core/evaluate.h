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
