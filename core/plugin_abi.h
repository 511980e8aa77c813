/*
 * plugin_abi.h - the plugin ABI versions this host loads, and the adapter
 * each one goes through (NCCL's tuner/net plugin loader shape).
 *
 * The loader (core/registry.c) looks up the descriptor symbols of its table
 * of mt_plugin_abi entries in order, newest first, and hands the first one a plugin
 * exports to that version's adapter.  The adapter validates what is
 * specific to its version (the descriptor's abi_version and struct_size)
 * and returns the host's internal form, mt_plugin_desc; everything after
 * that (name, entry points, tables, knob ownership, init) is checked once,
 * on the internal form, whatever version the plugin was built for.
 *
 * Today v1 is the only and newest version, so the internal form is
 * mt_plugin_v1 and its adapter (core/plugin_v1.c) is the identity plus
 * validation.  Adding v2 means: mt_plugin_desc becomes mt_plugin_v2, a
 * core/plugin_v2.c adapter (identity plus validation) goes first in the
 * table, and plugin_v1.c translates a v1 descriptor into a v2 one written
 * into the storage the loader passes; a v1 plugin itself never changes.
 */
#ifndef MT_PLUGIN_ABI_H
#define MT_PLUGIN_ABI_H

#include "diag.h"

#include <moetune/plugin.h>

/* The host's internal form of a descriptor: the newest ABI's. */
typedef mt_plugin_v1 mt_plugin_desc;

/* Validates the exported object sym (what dlsym returned for this version's
 * symbol) of the file path and sets *desc to its internal form: sym itself
 * when the version is the newest, else storage filled by translation
 * (storage lives as long as the plugin).  0, or a negative code with the
 * reason in d (path named). */
typedef int (*mt_plugin_adapt_fn)(const void *sym, const char *path, mt_plugin_desc *storage,
                                  const mt_plugin_desc **desc, mt_diag *d);

typedef struct mt_plugin_abi {
    uint32_t version;         /* the ABI version (MT_PLUGIN_ABI_VERSION of its header) */
    const char *symbol;       /* the descriptor symbol ("moetune_plugin_v1") */
    mt_plugin_adapt_fn adapt; /* core/plugin_v<version>.c */
} mt_plugin_abi;

/* core/plugin_v1.c */
int mt_plugin_adapt_v1(const void *sym, const char *path, mt_plugin_desc *storage,
                       const mt_plugin_desc **desc, mt_diag *d);

#endif
