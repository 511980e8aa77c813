/*
 * test_rules.c - every legality rule of every built-in plugin, from the
 * tables in tests/rules/<plugin>.rules: one legal and one illegal case each.
 *
 *   <contract> <legal|illegal> <rule_id> [knob=value | --flag[=value] ...]
 *
 * illegal: after the sets, the rule must be among the violations.
 * legal:   the rule must not be violated and the whole config must be legal.
 *
 * A token that starts with "--" is a training-program flag no plugin owns as a
 * knob (--moe-layer-recompute, --activation-offload-fraction=1.5; commas stand
 * for spaces, so --recompute-modules,mhc,mlp is three arguments): it joins the
 * contract's fixed_args for that case only, as a contract imported from such
 * a command line would hold it.  Clauses that read those flags, or values a
 * knob does not take, are tripped this way, one at a time.
 *
 * Each clause of a multi-clause rule (conditions joined by ||, or several
 * sites under one rule id) has a case that trips it alone, and each way out
 * of a rule a legal case (issue 21).  The "proposals" test case also asks
 * every plugin for its candidates at each legal case: none may break a rule
 * of the plugin that offered it.
 */
#include "testkit.h"

#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_CONTRACTS 8
#define MAX_FLAGS 16 /* "--" tokens of one case */

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

/* A contract of tests/contracts rather than examples/contracts. */
static int test_only_contract(const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/examples/contracts/%s", MT_SOURCE_DIR, name);
    return access(path, R_OK) != 0;
}

typedef struct rule_seen {
    char id[128];
    int legal, illegal;
} rule_seen;

/* Applies "knob=value" (commas in the value stand for spaces) to t's config.
 * A knob or value the registry refuses is reported against the case's line
 * and returns 1: the file's other cases still run on an unchanged config. */
static int set_knob(tk *t, const char *assignment, const char *path, int lineno)
{
    char buf[1024], *eq, *p;
    mt_diag *d;
    int rc;
    snprintf(buf, sizeof buf, "%s", assignment);
    eq = strchr(buf, '=');
    if (!eq) {
        fprintf(stderr, "%s:%d: %s is neither knob=value nor --flag\n", path, lineno, assignment);
        return 1;
    }
    *eq = '\0';
    for (p = eq + 1; *p; p++)
        if (*p == ',')
            *p = ' ';
    d = mt_diag_new();
    rc = mt_config_set(t->reg, t->cfg, buf, eq + 1, NULL, 0, "test", d);
    if (rc)
        fprintf(stderr, "%s:%d: set %s: %s\n", path, lineno, assignment,
                mt_diag_count(d) ? mt_diag_at(d, 0)->message : "refused");
    mt_diag_destroy(&d);
    return rc != 0;
}

/* propose() offers nothing its own plugin's rules refuse: the predicates a
 * plugin judges candidates with (propose, repair) stand for the conditions of
 * its start-up rules, clause by clause.  Every candidate for the legal config
 * in t, once applied with its repairs, must break no rule of the plugin that
 * offered it; each that does is reported against the case's line.  Returns
 * how many did. */
static int own_rules_refuse(tk *t, const char *path, int lineno)
{
    mt_candidates cs = {0};
    mt_diag *d = mt_diag_new();
    size_t i, j;
    int bad = 0;
    ck_assert_msg(mt_candidates_for(t->reg, t->contract, t->cfg, NULL, 0, &cs, d) == 0 &&
                      mt_diag_count(d) == 0,
                  "%s:%d: candidates: %s", path, lineno,
                  mt_diag_count(d) ? mt_diag_at(d, 0)->message : "failed");
    for (i = 0; i < cs.n; i++) {
        size_t pl = strlen(cs.v[i].plugin);
        for (j = 0; j < cs.v[i].violations.n; j++) {
            const char *rule = cs.v[i].violations.v[j].rule;
            if (strncmp(rule, cs.v[i].plugin, pl) || rule[pl] != '.')
                continue;
            fprintf(stderr, "%s:%d: %s offers \"%s\", which its own rule %s refuses: %s\n", path,
                    lineno, cs.v[i].plugin, cs.v[i].summary, rule, cs.v[i].violations.v[j].message);
            bad++;
        }
    }
    mt_candidates_clear(&cs);
    mt_diag_destroy(&d);
    return bad;
}

/* Judges every case of one .rules file; with proposals, also what the plugins
 * offer for each legal case (own_rules_refuse).  Returns the failures. */
static int run_file(const char *path, int *cases, int proposals)
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
        char **fixed, *flags[MAX_FLAGS];
        size_t n_fixed;
        int has, legal, n_flags, bad_set = 0;
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
        fixed = t->contract->fixed_args;
        n_fixed = t->contract->n_fixed_args;
        n_flags = 0;
        while ((tok = strtok_r(NULL, " \t", &save))) {
            if (strncmp(tok, "--", 2)) {
                bad_set += set_knob(t, tok, path, lineno);
                continue;
            }
            for (;;) { /* commas stand for spaces: "--recompute-modules,mhc,mlp" */
                char *comma = strchr(tok, ',');
                ck_assert_msg(n_flags < MAX_FLAGS, "%s:%d: more than %d flag tokens", path, lineno,
                              MAX_FLAGS);
                flags[n_flags++] = tok;
                if (!comma)
                    break;
                *comma = '\0';
                tok = comma + 1;
            }
        }
        if (bad_set) {
            /* reported; the case is not judged, and the next starts clean */
            fails++;
            mt_kv_destroy(&t->cfg);
            t->cfg = saved;
            (*cases)++;
            continue;
        }
        if (n_flags) {
            /* the contract's own fixed args first, then the case's, in order */
            char **all = calloc(n_fixed + n_flags, sizeof *all);
            ck_assert_ptr_nonnull(all);
            for (i = 0; i < (int)n_fixed; i++)
                all[i] = fixed[i];
            for (i = 0; i < n_flags; i++)
                all[n_fixed + (size_t)i] = flags[i];
            t->contract->fixed_args = all;
            t->contract->n_fixed_args = n_fixed + (size_t)n_flags;
        }
        d = mt_diag_new();
        mt_legality(t->reg, t->contract, t->cfg, &vs, d);
        /* the plugins judge candidates on the knobs (their config view), so
         * only cases without "--" flags, on the example contracts (which
         * write what the published recipes set as fixed args; the test-only
         * ones keep defaults such as attention dropout 0.1 that propose()
         * cannot see), say what a proposal should know */
        if (proposals && legal && !n_flags && !test_only_contract(contract) && !vs.n &&
            !mt_diag_count(d))
            fails += own_rules_refuse(t, path, lineno);
        if (n_flags) {
            free(t->contract->fixed_args);
            t->contract->fixed_args = fixed;
            t->contract->n_fixed_args = n_fixed;
        }
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
        mt_violations_clear(&vs);
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

static void check_file(const char *plugin, int proposals)
{
    char path[1024];
    int cases = 0, fails;
    snprintf(path, sizeof path, "%s/tests/rules/%s.rules", MT_SOURCE_DIR, plugin);
    fails = run_file(path, &cases, proposals);
    ck_assert_msg(cases >= 2, "%s: no cases", path);
    ck_assert_msg(fails == 0, "%s: %d of %d cases failed (see stderr)", path, fails, cases);
}

static void check_plugin(const char *plugin)
{
    check_file(plugin, 0);
}

/* The legal cases of every file (those without "--" flags), as the start of
 * a search: what each plugin proposes there passes its own rules.  One test
 * over all the files, since a plugin's proposals meet every other plugin's
 * rows. */
START_TEST(proposals_pass_their_own_rules)
{
    static const char *const plugins[] = {"recompute", "dispatcher", "overlap", "precision",
                                          "cudagraph", "folding",    "host"};
    size_t i;
    for (i = 0; i < sizeof plugins / sizeof plugins[0]; i++)
        check_file(plugins[i], 1);
}
END_TEST

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
        mt_violations_clear(&vs);
        tk_close(&t);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rules");
    TCase *tc = tcase_create("legality"), *tp = tcase_create("proposals");
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
    tcase_set_timeout(tp, 300);
    tcase_add_test(tp, proposals_pass_their_own_rules);
    suite_add_tcase(s, tp);
    sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    for (i = 0; i < MAX_CONTRACTS; i++)
        tk_close(&cache[i].t);
    return failed ? 1 : 0;
}
