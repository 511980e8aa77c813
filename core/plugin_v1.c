/*
 * plugin_v1.c - the adapter for ABI v1 descriptors (moetune_plugin_v1).
 *
 * v1 is the newest version, so a valid v1 descriptor is the internal form
 * as it is: this checks what makes the object readable as a v1 descriptor
 * and hands it back.  When v2 becomes the internal form, this file
 * translates a v1 descriptor into *storage instead (see plugin_abi.h).
 *
 * Its interface: core/plugin_abi.h.
 */
#include "plugin_abi.h"

#include <errno.h>

int mt_plugin_adapt_v1(const void *sym, const char *path, mt_plugin_desc *storage,
                       const mt_plugin_desc **desc, mt_diag *d)
{
    const mt_plugin_v1 *v1 = sym;
    (void)storage;
    if (v1->abi_version != 1) {
        mt_diag_add(d, path, 0, NULL,
                    "ABI version mismatch: expected 1, found %u; rebuild the plugin against "
                    "this moetune's moetune/plugin.h",
                    v1->abi_version);
        return -EPROTO;
    }
    if (v1->struct_size < offsetof(mt_plugin_v1, verify) + sizeof v1->verify) {
        mt_diag_add(d, path, 0, NULL,
                    "descriptor too small: struct_size %u, version 1 needs at least %zu",
                    v1->struct_size, offsetof(mt_plugin_v1, verify) + sizeof v1->verify);
        return -EPROTO;
    }
    *desc = v1;
    return 0;
}
