/*
 * registry.h - the plugin loader and the knob universe.
 *
 * Built-in plugins and third-party ones go through exactly the same path:
 * dlopen(RTLD_NOW | RTLD_LOCAL), the versioned descriptor symbols newest
 * first, that version's adapter (ABI and size checks, translation into the
 * internal form: core/plugin_abi.h), knob ownership, extensions, init.  A plugin that fails any step is
 * reported (file named) and left out; the others go on.
 *
 * The registry also owns the core's base knobs (model shape, sequence, GBS,
 * iterations, logging), which no plugin may claim.
 */
#ifndef MT_REGISTRY_H
#define MT_REGISTRY_H

#include "diag.h"
#include "kv.h"
#include "plugin_abi.h"
#include "sink.h"

#include <moetune/plugin.h>

typedef struct mt_plugin {
    char *path;         /* the absolute file it was opened from */
    const char *origin; /* how it was found: "built-in", "MOETUNE_PLUGIN_PATH",
                           "launch.plugin_path", or "file" (a direct load) */
    uint32_t abi_version; /* the ABI version it was loaded through (its symbol's) */
    const mt_plugin_desc *desc; /* the internal form: the exported descriptor, or
                                   converted when an older version's adapter
                                   translated it */
    mt_plugin_desc converted;
    void *handle;
    void *state;
    int enabled;
    char *why_disabled; /* NULL while enabled */
} mt_plugin;

typedef struct mt_registry mt_registry;

/* Caller owns the return value; free with mt_registry_destroy (which calls
 * every initialised plugin's fini and dlcloses them). */
mt_registry *mt_registry_new(void);
void mt_registry_destroy(mt_registry **r);

/* Loads one plugin file.  path is resolved to one absolute file (realpath:
 * links and ".." resolved, a bare name taken in the working directory, never
 * searched on LD_LIBRARY_PATH); that file must be a regular file owned by
 * root or the user and not writable by group or others, and so must every
 * directory above it (sticky directories such as /tmp excepted), and only
 * that absolute path is opened.  0, or a negative code with the reason in
 * d. */
int mt_registry_load_file(mt_registry *r, const char *path, mt_diag *d);
/* Loads every *.so in dir (sorted by name), or the file when path is one.
 * Returns how many failed. */
int mt_registry_load_path(mt_registry *r, const char *path, mt_diag *d);
/* The standard search: built-ins (MOETUNE_BUILTIN_DIR, else the build tree
 * beside the executable, else the install dir), MOETUNE_PLUGIN_PATH
 * (colon-separated), then extra (the contract's plugin_path, resolved by the
 * caller, who passes it only when the operator trusts it:
 * --trust-plugin-path).  Returns how many failed. */
int mt_registry_load_default(mt_registry *r, const char *const *extra, size_t n_extra,
                             mt_diag *d);
/* Resolves extensions, then initialises plugins.  Call once after loading.
 * Returns how many plugins were disabled here. */
int mt_registry_finish(mt_registry *r, mt_diag *d);

/* Whether the contract's requirement "name, at least min_version" (NULL:
 * any version) holds: the plugin is loaded, enabled and new enough (dotted
 * numbers, mt_version_cmp of dialect.h).  0, or
 * -1 with why filled (what is missing and where it was looked for). */
int mt_registry_require(const mt_registry *r, const char *name, const char *min_version,
                        char *why, size_t why_len);

/* Enabled and disabled plugins, sorted by name after finish. */
size_t mt_registry_count(const mt_registry *r);
const mt_plugin *mt_registry_at(const mt_registry *r, size_t i);
const mt_plugin *mt_registry_find(const mt_registry *r, const char *name);

/* Knob lookup among core knobs and enabled plugins' knobs.  *owner is NULL
 * for core knobs. NULL when unknown. */
const mt_knob_v1 *mt_registry_knob(const mt_registry *r, const char *name,
                                   const mt_plugin **owner);
/* Every known knob name (core first, then plugins), NULL-terminated; caller
 * frees the array (not the strings). */
const char **mt_registry_knob_names(const mt_registry *r, size_t *n);
/* The plugin that extends knob with value, or NULL. */
const mt_plugin *mt_registry_extender(const mt_registry *r, const char *knob, const char *value);
/* True when knob is one of the core's base knobs. */
int mt_registry_is_core(const char *knob);

/* Checks value against the knob's type and values (extensions included) and
 * writes the canonical spelling into canon (lists reordered to the declared
 * order).  0, or -1 with why filled. */
int mt_registry_normalize(const mt_registry *r, const char *knob, const char *value,
                          char *canon, size_t canon_len, char *why, size_t why_len);

/* Plugin calls, serialized per plugin; failures of a plugin go to d. */
int mt_registry_check(mt_registry *r, const mt_ctx_v1 *ctx, mt_violations *out, mt_diag *d);
int mt_registry_render(mt_registry *r, const mt_ctx_v1 *ctx, uint32_t dialect,
                       mt_rendered *out, mt_diag *d);
/* Candidates of one plugin (or all when plugin is NULL), validated: a
 * candidate may only set knobs of its declared variable, with legal values;
 * an invalid one is kept with ->reject set. */
int mt_registry_propose(mt_registry *r, const char *plugin, const mt_ctx_v1 *ctx,
                        mt_candidates *out, mt_diag *d);
/* Asks p for a repair; sets limited to p's own (or extended) knobs outside
 * ctx->changed. */
int mt_registry_repair(mt_registry *r, const mt_plugin *p, const mt_ctx_v1 *ctx, mt_kv *sets,
                       mt_strlist *notes, mt_diag *d);
int mt_registry_verify(mt_registry *r, const mt_ctx_v1 *ctx, mt_verdicts *out, mt_diag *d);

#endif
