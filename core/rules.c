#include "rules.h"

#include "../plugins/pluginkit.h"

/* Rules are grouped by what they are about; each names upstream's check in
 * its comment (file and function) and carries upstream's wording. */
static void check_core(const mt_ctx_v1 *ctx, mt_sink *s)
{
    (void)ctx;
    (void)s;
}

void mt_core_check(const mt_ctx_v1 *ctx, mt_violations *out)
{
    mt_sink s;
    if (!pk_args(ctx))
        return;
    pk_host = mt_host_table();
    mt_sink_init(&s, MT_SINK_CHECK, "core");
    s.viol = out;
    check_core(ctx, &s);
    mt_sink_fini(&s);
}
