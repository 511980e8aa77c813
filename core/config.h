/*
 * config.h - configs: points in knob space.
 *
 * A config is an mt_kv holding every known knob (core base knobs, then each
 * enabled plugin's knobs at their defaults, then the contract's base, then
 * any --set or candidate changes), all values in canonical spelling.  Its
 * canonical serialization is "knob=value\n" in key order; the id is the
 * first 16 hex digits of its SHA-256.
 */
#ifndef MT_CONFIG_H
#define MT_CONFIG_H

#include "contract.h"
#include "diag.h"
#include "kv.h"
#include "registry.h"

#include <moetune/plugin.h>

/* The contract's base config.  NULL with every problem in d (unknown knob
 * with a suggestion, illegal value, a base knob set in `base`).  Caller owns
 * the return value. */
mt_kv *mt_config_base(const mt_registry *r, const mt_contract *c, mt_diag *d);

/* Rewrites the contract's search space (and the plugin view of it) in
 * canonical spelling, checking every knob name and value against the
 * registry.  Returns how many problems were added to d. */
int mt_config_normalize_space(const mt_registry *r, mt_contract *c, mt_diag *d);

/* Sets one knob after checking name and value; 0, or -1 with a message in d
 * naming `where` (e.g. "--set" or "contract base"). */
int mt_config_set(const mt_registry *r, mt_kv *cfg, const char *knob, const char *value,
                  const char *file, int line, const char *where, mt_diag *d);

/* Caller owns the returned string. */
char *mt_config_canonical(const mt_kv *cfg);
void mt_config_id(const mt_kv *cfg, char id[17]);

/* One line per differing knob, "knob: old -> new", in key order. */
int mt_config_diff(const mt_kv *a, const mt_kv *b, mt_strlist *out);

/* The derived parallel folding meshes. */
typedef struct mt_mesh {
    long world, tp, cp, dp, pp, vpp;
    long etp, ep, edp;
    int whole; /* 0 when the sizes do not divide the world */
} mt_mesh;

void mt_config_mesh(const mt_kv *cfg, const mt_kv *hardware, mt_mesh *m);
/* "Attention: TP1 x CP1 x DP16 x PP1" and "MoE: ETP1 x EP16 x EDP1 x PP1". */
void mt_mesh_format(const mt_mesh *m, char *attention, size_t alen, char *moe, size_t mlen);

/* A context over borrowed views; evidence/changed may be NULL (an empty
 * view is substituted for evidence). */
mt_ctx_v1 mt_ctx_make(const mt_contract *c, const mt_kv *cfg, const mt_kv *evidence,
                      const mt_kv *changed);

#endif
