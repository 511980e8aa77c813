/*
 * test_rules.c - every legality rule of every built-in plugin, from the
 * tables in tests/rules/<plugin>.rules: one legal and one illegal case each.
 *
 *   <contract> <legal|illegal> <rule_id> [knob=value ...]
 *
 * illegal: after the sets, the rule must be among the violations.
 * legal:   the rule must not be violated and the whole config must be legal.
 */
#include "testkit.h"

#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_CONTRACTS 8

typedef struct cached {
    char name[128];
    tk *t;
} cached;

static cached cache[MAX_CONTRACTS];

static tk *contract_named(const char *name)
{
    int i;
    for (i = 0; i < MAX_CONTRACTS && cache[i].t; i++)
        if (!strcmp(cache[i].name, name))
            return cache[i].t;
    ck_assert_int_lt(i, MAX_CONTRACTS);
    snprintf(cache[i].name, sizeof cache[i].name, "%s", name);
    {
        /* examples/contracts first, then the test-only contracts */
        char path[1024];
        mt_diag *d = mt_diag_new();
        snprintf(path, sizeof path, "%s/examples/contracts/%s", MT_SOURCE_DIR, name);
        if (access(path, R_OK) != 0)
            snprintf(path, sizeof path, "%s/tests/contracts/%s", MT_SOURCE_DIR, name);
        cache[i].t = tk_open_path(path, d);
        ck_assert_msg(cache[i].t && mt_diag_count(d) == 0, "%s: %s", path,
                      mt_diag_count(d) ? mt_diag_at(d, 0)->message : "cannot open");
        mt_diag_destroy(&d);
    }
    return cache[i].t;
}

typedef struct rule_seen {
    char id[128];
    int legal, illegal;
} rule_seen;

static int run_file(const char *path, int *cases)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    int lineno = 0, fails = 0;
    rule_seen seen[256];
    int nseen = 0, i;
    ck_assert_msg(f != NULL, "cannot open %s", path);
    while (fgets(line, sizeof line, f)) {
        char *save = NULL, *contract, *expect, *rule, *tok;
        tk *t;
        mt_kv *saved;
        mt_violations vs = {0};
        mt_diag *d;
        int has, legal;
        lineno++;
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[strspn(line, " \t")] || line[strspn(line, " \t")] == '#')
            continue;
        contract = strtok_r(line, " \t", &save);
        expect = strtok_r(NULL, " \t", &save);
        rule = strtok_r(NULL, " \t", &save);
        ck_assert_msg(contract && expect && rule, "%s:%d: malformed case", path, lineno);
        ck_assert_msg(!strcmp(expect, "legal") || !strcmp(expect, "illegal"),
                      "%s:%d: expect legal or illegal", path, lineno);
        legal = !strcmp(expect, "legal");
        t = contract_named(contract);
        saved = mt_kv_dup(t->cfg);
        while ((tok = strtok_r(NULL, " \t", &save)))
            tk_set(t, tok);
        d = mt_diag_new();
        mt_legality(t->reg, t->contract, t->cfg, &vs, d);
        ck_assert_msg(mt_diag_count(d) == 0, "%s:%d: plugin failure: %s", path, lineno,
                      mt_diag_count(d) ? mt_diag_at(d, 0)->message : "");
        has = mt_violations_has(&vs, rule);
        if (legal && (has || vs.n)) {
            fprintf(stderr, "%s:%d: expected legal (%s), got:\n", path, lineno, rule);
            for (i = 0; i < (int)vs.n; i++)
                fprintf(stderr, "    [%s] %s\n", vs.v[i].rule, vs.v[i].message);
            fails++;
        } else if (!legal && !has) {
            fprintf(stderr, "%s:%d: expected rule %s to be violated; violations:", path, lineno,
                    rule);
            for (i = 0; i < (int)vs.n; i++)
                fprintf(stderr, " [%s]", vs.v[i].rule);
            fprintf(stderr, "\n");
            fails++;
        }
        for (i = 0; i < nseen; i++)
            if (!strcmp(seen[i].id, rule))
                break;
        if (i == nseen && nseen < 256) {
            snprintf(seen[nseen].id, sizeof seen[nseen].id, "%s", rule);
            seen[nseen].legal = seen[nseen].illegal = 0;
            nseen++;
        }
        if (i < 256) {
            seen[i].legal += legal;
            seen[i].illegal += !legal;
        }
        mt_violations_free(&vs);
        mt_diag_destroy(&d);
        mt_kv_destroy(&t->cfg);
        t->cfg = saved;
        (*cases)++;
    }
    fclose(f);
    for (i = 0; i < nseen; i++)
        if (!seen[i].legal || !seen[i].illegal) {
            fprintf(stderr, "%s: rule %s lacks a%s case\n", path, seen[i].id,
                    seen[i].legal ? "n illegal" : " legal");
            fails++;
        }
    return fails;
}

static void check_plugin(const char *plugin)
{
    char path[1024];
    int cases = 0, fails;
    snprintf(path, sizeof path, "%s/tests/rules/%s.rules", MT_SOURCE_DIR, plugin);
    fails = run_file(path, &cases);
    ck_assert_msg(cases >= 2, "%s: no cases", path);
    ck_assert_msg(fails == 0, "%s: %d of %d cases failed (see stderr)", path, fails, cases);
}

START_TEST(rules_recompute) { check_plugin("recompute"); }
END_TEST
START_TEST(rules_dispatcher) { check_plugin("dispatcher"); }
END_TEST
START_TEST(rules_overlap) { check_plugin("overlap"); }
END_TEST
START_TEST(rules_precision) { check_plugin("precision"); }
END_TEST
START_TEST(rules_cudagraph) { check_plugin("cudagraph"); }
END_TEST
START_TEST(rules_folding) { check_plugin("folding"); }
END_TEST
START_TEST(rules_host) { check_plugin("host"); }
END_TEST

/* Every example contract's base config is legal under every plugin. */
START_TEST(examples_are_legal)
{
    static const char *const names[] = {
        "qwen3-30b-a3b-h100x16.cfg", "qwen3-30b-a3b-h100x16-bridge.cfg",
        "deepseek-v3-gb200x256.cfg", "deepseek-v3-gb200x256-bridge.cfg",
        "qwen3-30b-a3b-gb300x8.cfg", "qwen3-30b-a3b-gb300x8-bridge.cfg"};
    size_t i;
    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
        tk *t = tk_open(names[i]);
        mt_violations vs = {0};
        mt_legality(t->reg, t->contract, t->cfg, &vs, t->diag);
        ck_assert_msg(vs.n == 0, "%s: [%s] %s", names[i], vs.n ? vs.v[0].rule : "",
                      vs.n ? vs.v[0].message : "");
        mt_violations_free(&vs);
        tk_close(&t);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rules");
    TCase *tc = tcase_create("legality");
    SRunner *sr;
    int failed, i;
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, rules_recompute);
    tcase_add_test(tc, rules_dispatcher);
    tcase_add_test(tc, rules_overlap);
    tcase_add_test(tc, rules_precision);
    tcase_add_test(tc, rules_cudagraph);
    tcase_add_test(tc, rules_folding);
    tcase_add_test(tc, rules_host);
    tcase_add_test(tc, examples_are_legal);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    for (i = 0; i < MAX_CONTRACTS; i++)
        tk_close(&cache[i].t);
    return failed ? 1 : 0;
}
