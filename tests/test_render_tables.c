/*
 * test_render_tables.c - what moetune renders exists in the declared stack.
 *
 * Every example and test contract is rendered in the Megatron-LM spelling of
 * its stack: the base, every candidate the plugins propose for it (after
 * repair), and every pair of candidates that change different variables.
 * Each command line is read back by that version's own flag table
 * (core/dialects/mlm/V.tsv through the argparse emulation): every flag must
 * exist there, with its arity and one of its choices.  A candidate whose
 * feature the version lacks must not be proposed at all.
 */
#include "dialect.h"
#include "evaluate.h"
#include "render.h"
#include "testkit.h"

#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t rendered, refused;

/* NULL when cfg renders to a command line the stack's parser takes; else
 * the parser's message (static buffer). */
static const char *render_error(tk *t, const mt_kv *cfg)
{
    static char msg[700];
    char why[256];
    const mt_mlm_dialect *dl = mt_dialect_for_stack(t->contract->stack, why, sizeof why);
    mt_rendered rd;
    mt_kv *ns = mt_kv_new(), *extra = mt_extension_choices(t->reg);
    mt_argparse_result res = {0};
    mt_diag *d = mt_diag_new();
    const char *out = NULL;
    ck_assert_msg(dl != NULL, "%s", why);
    mt_rendered_init(&rd);
    if (mt_render(t->reg, t->contract, cfg, MT_DIALECT_MLM, &rd, d)) {
        snprintf(msg, sizeof msg, "render failed: %s",
                 mt_diag_count(d) ? mt_diag_at(d, 0)->message : "?");
        out = msg;
    } else if (mt_argparse_ext(dl, rd.argv.v, rd.argv.n, ns, &res, extra)) {
        snprintf(msg, sizeof msg, "%s: %s", mt_dialect_name(dl), res.error);
        out = msg;
    }
    rendered++;
    refused += out != NULL;
    mt_argparse_result_clear(&res);
    mt_rendered_clear(&rd);
    mt_kv_destroy(&ns);
    mt_kv_destroy(&extra);
    mt_diag_destroy(&d);
    return out;
}

static void check_contract(const char *path)
{
    mt_diag *d = mt_diag_new();
    tk *t = tk_open_path(path, d);
    mt_candidates cs = {0};
    mt_violations vs = {0};
    const char *e;
    size_t i, j;
    ck_assert_msg(t != NULL, "%s: %s", path, mt_diag_count(d) ? mt_diag_at(d, 0)->message : "?");
    mt_diag_destroy(&d);
    mt_legality(t->reg, t->contract, t->cfg, &vs, t->diag);
    if (!vs.n) {
        e = render_error(t, t->cfg);
        ck_assert_msg(e == NULL, "%s: the legal base renders what its stack refuses: %s", path, e);
    }
    mt_violations_clear(&vs);
    ck_assert_int_eq(mt_candidates_for(t->reg, t->contract, t->cfg, NULL, 0, &cs, t->diag), 0);
    for (i = 0; i < cs.n; i++) {
        if (!cs.v[i].config)
            continue;
        e = render_error(t, cs.v[i].config);
        ck_assert_msg(e == NULL, "%s: candidate %s/%s (%s) renders what its stack refuses: %s",
                      path, cs.v[i].plugin, cs.v[i].variable, cs.v[i].summary, e);
    }
    /* Pairs: the second candidate's changes on top of the first's result. */
    for (i = 0; i < cs.n; i++)
        for (j = i + 1; j < cs.n; j++) {
            mt_kv *pair;
            size_t k;
            const char *key, *val;
            if (!cs.v[i].config || !cs.v[j].config ||
                !strcmp(cs.v[i].variable, cs.v[j].variable))
                continue;
            pair = mt_kv_dup(cs.v[i].config);
            for (k = 0; mt_kv_entry(cs.v[j].sets, k, &key, &val) == 0; k++)
                mt_kv_set(pair, key, val);
            e = render_error(t, pair);
            ck_assert_msg(e == NULL, "%s: candidates %s + %s render what the stack refuses: %s",
                          path, cs.v[i].summary, cs.v[j].summary, e);
            mt_kv_destroy(&pair);
        }
    mt_candidates_clear(&cs);
    tk_close(&t);
}

static void check_dir(const char *dir)
{
    DIR *dp = opendir(dir);
    struct dirent *de;
    ck_assert_msg(dp != NULL, "cannot open %s", dir);
    while ((de = readdir(dp))) {
        size_t n = strlen(de->d_name);
        char path[2048];
        if (n < 5 || strcmp(de->d_name + n - 4, ".cfg"))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        check_contract(path);
    }
    closedir(dp);
}

START_TEST(every_rendered_flag_exists)
{
    check_dir(MT_SOURCE_DIR "/examples/contracts");
    check_dir(MT_SOURCE_DIR "/tests/contracts");
    check_dir(MT_SOURCE_DIR "/tests/contracts/faults");
    printf("every_rendered_flag_exists: %zu command lines, all taken by their stack's parser\n",
           rendered);
    ck_assert_uint_gt(rendered, 1000);
    ck_assert_uint_eq(refused, 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("render_tables");
    TCase *tc = tcase_create("render_tables");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, every_rendered_flag_exists);
    suite_add_tcase(s, tc);
    return tk_run(s);
}
