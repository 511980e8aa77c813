/*
 * test_oot.c - the third-party dispatcher plugin built out of tree
 * (examples/plugin-flexdemo) loads beside the built-ins through the same
 * loader, extends the flex backend knob, proposes its candidate, answers
 * legality for its value and renders it.  Run by oot_plugin.sh with the
 * freshly built flexdemo.so.
 */
#include "testkit.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *plugin_path;

/* The H100 example without its backend space, so flexdemo may propose. */
static tk *open_contract(void)
{
    char *path = tk_example("qwen3-30b-a3b-h100x16.cfg"), *text = tk_slurp(path), *line, *tmp;
    mt_diag *d = mt_diag_new();
    tk *t;
    line = strstr(text, "  moe_flex_dispatcher_backend = [");
    ck_assert_ptr_nonnull(line);
    memset(line, ' ', strcspn(line, "\n"));
    tmp = tk_write_temp("oot", text);
    t = calloc(1, sizeof *t);
    t->diag = mt_diag_new();
    t->contract = mt_contract_load(tmp, d);
    ck_assert_ptr_nonnull(t->contract);
    t->reg = mt_registry_new();
    mt_registry_load_path(t->reg, MT_BUILD_DIR "/plugins", d);
    mt_registry_load_file(t->reg, plugin_path, d);
    mt_registry_finish(t->reg, d);
    mt_config_normalize_space(t->reg, t->contract, d);
    t->cfg = mt_config_base(t->reg, t->contract, d);
    ck_assert_msg(mt_diag_count(d) == 0, "%s", mt_diag_count(d) ? mt_diag_at(d, 0)->message : "");
    unlink(tmp);
    free(tmp), free(text), free(path);
    mt_diag_destroy(&d);
    return t;
}

START_TEST(loads_and_extends)
{
    tk *t = open_contract();
    const mt_plugin *p = mt_registry_find(t->reg, "flexdemo");
    ck_assert_ptr_nonnull(p);
    ck_assert(p->enabled);
    ck_assert_str_eq(p->path, plugin_path);
    ck_assert_ptr_eq(mt_registry_extender(t->reg, "moe_flex_dispatcher_backend", "flexdemo"), p);
    ck_assert_ptr_nonnull(mt_registry_knob(t->reg, "env.FLEXDEMO_CHUNK_KB", NULL));
    /* the extended value is now a legal value of the built-in knob */
    tk_set(t, "moe_token_dispatcher_type=flex");
    tk_set(t, "moe_flex_dispatcher_backend=flexdemo");
    tk_close(&t);
}
END_TEST

START_TEST(proposes_legal_candidate)
{
    tk *t = open_contract();
    mt_candidates cs = {0};
    size_t i;
    int seen = 0;
    mt_candidates_for(t->reg, t->contract, t->cfg, NULL, 0, &cs, t->diag);
    ck_assert_uint_eq(mt_diag_count(t->diag), 0);
    for (i = 0; i < cs.n; i++) {
        if (strcmp(cs.v[i].plugin, "flexdemo"))
            continue;
        seen = 1;
        ck_assert_ptr_null(cs.v[i].reject);
        ck_assert_str_eq(mt_kv_get(cs.v[i].sets, "moe_flex_dispatcher_backend"), "flexdemo");
        ck_assert_msg(cs.v[i].violations.n == 0, "[%s] %s", cs.v[i].violations.v[0].rule,
                      cs.v[i].violations.v[0].message);
        ck_assert(cs.v[i].walls & MT_WALL_COMM);
    }
    ck_assert_msg(seen, "no flexdemo candidate among %zu", cs.n);
    mt_candidates_clear(&cs);
    tk_close(&t);
}
END_TEST

START_TEST(legality_and_render_of_its_value)
{
    tk *t = open_contract();
    mt_violations vs = {0};
    mt_rendered out;
    size_t i;
    int flag = 0;
    /* its own rule: the backend needs flex */
    tk_set(t, "moe_flex_dispatcher_backend=flexdemo");
    mt_legality(t->reg, t->contract, t->cfg, &vs, t->diag);
    ck_assert_msg(mt_violations_has(&vs, "flexdemo.needs_flex"), "%zu violations", vs.n);
    mt_violations_clear(&vs);
    tk_set(t, "moe_token_dispatcher_type=flex");
    tk_set(t, "env.FLEXDEMO_CHUNK_KB=512");
    mt_legality(t->reg, t->contract, t->cfg, &vs, t->diag);
    ck_assert_msg(vs.n == 0, "[%s] %s", vs.n ? vs.v[0].rule : "", vs.n ? vs.v[0].message : "");
    mt_violations_clear(&vs);
    mt_rendered_init(&out);
    ck_assert_int_eq(mt_render(t->reg, t->contract, t->cfg, MT_DIALECT_MLM, &out, t->diag), 0);
    for (i = 0; i + 1 < out.argv.n; i++)
        if (!strcmp(out.argv.v[i], "--moe-flex-dispatcher-backend")) {
            ck_assert_str_eq(out.argv.v[i + 1], "flexdemo");
            flag++;
        }
    ck_assert_int_eq(flag, 1); /* rendered once, by the extender */
    ck_assert_str_eq(mt_kv_get(out.env, "FLEXDEMO_CHUNK_KB"), "512");
    mt_rendered_clear(&out);
    tk_close(&t);
}
END_TEST

int main(int argc, char **argv)
{
    Suite *s = suite_create("oot");
    TCase *tc = tcase_create("flexdemo");
    if (argc != 2) {
        fprintf(stderr, "usage: test_oot PATH/flexdemo.so\n");
        return 2;
    }
    plugin_path = argv[1];
    tcase_add_test(tc, loads_and_extends);
    tcase_add_test(tc, proposes_legal_candidate);
    tcase_add_test(tc, legality_and_render_of_its_value);
    suite_add_tcase(s, tc);
    return tk_run(s);
}
