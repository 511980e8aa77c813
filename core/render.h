/*
 * render.h - a config as a launch command: the core's base flags (model
 * shape, batch, iterations, always --log-interval 1 and --log-throughput),
 * then every plugin's knobs, in the contract's dialect.
 */
#ifndef MT_RENDER_H
#define MT_RENDER_H

#include "contract.h"
#include "registry.h"
#include "sink.h"

/* Fills out (initialised by the caller with mt_rendered_init).  The
 * contract's launch env comes first; plugin env settings override it.
 * 0, or negative with the failing plugin named in d. */
int mt_render(mt_registry *r, const mt_contract *c, const mt_kv *cfg, uint32_t dialect,
              mt_rendered *out, mt_diag *d);

#endif
