/*
 * test_dialect.c - the Megatron-LM dialects: each version's flag table, the
 * argparse emulation over it, the stack's version resolution, and the
 * derivations start-up rules read.
 *
 * Where ../shared/facts/upstream is present (a developer's checkout), the
 * tables are held against upstream's own partial tables and the parser
 * against every command line of the verdict corpus: each accepted row must
 * parse, and each row upstream's argparse refused must be refused with the
 * same message.  Without it those two tests say so and check nothing more.
 */
#include "derive.h"
#include "dialect.h"
#include "testkit.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const versions[] = {"core_r0.15.0", "core_v0.18.0", "core_v0.19.0", "main"};

static const char *facts_dir(void)
{
    static char dir[2048];
    struct stat st;
    const char *env = getenv("MOETUNE_UPSTREAM_FACTS");
    snprintf(dir, sizeof dir, "%s", env ? env : MT_SOURCE_DIR "/../shared/facts/upstream");
    return stat(dir, &st) == 0 ? dir : NULL;
}

/* argv from a space-separated string (the corpus has single spaces). */
static size_t split(char *s, char **v, size_t max)
{
    size_t n = 0;
    char *tok, *save = NULL;
    for (tok = strtok_r(s, " ", &save); tok && n < max; tok = strtok_r(NULL, " ", &save))
        v[n++] = tok;
    return n;
}

static int parse_str(const mt_mlm_dialect *d, const char *line, mt_kv *ns, char *err, size_t n)
{
    char buf[8192], *v[512];
    size_t argc;
    mt_argparse_result res;
    int rc;
    snprintf(buf, sizeof buf, "%s", line);
    argc = split(buf, v, 512);
    rc = mt_argparse(d, v, argc, ns, &res);
    snprintf(err, n, "%s", res.error);
    mt_argparse_result_clear(&res);
    return rc;
}

START_TEST(tables_load)
{
    size_t i;
    const char *const *known = mt_dialect_known();
    for (i = 0; i < 4; i++) {
        const mt_mlm_dialect *d = mt_dialect_find(versions[i]);
        size_t j;
        ck_assert_str_eq(known[i], versions[i]);
        ck_assert_msg(d != NULL, "%s has no table", versions[i]);
        ck_assert_uint_gt(mt_dialect_count(d), 500);
        for (j = 0; j < mt_dialect_count(d); j++) {
            const mt_flag *f = mt_dialect_at(d, j);
            ck_assert_msg(f->flag[0] == '-' && f->dest[0], "%s row %zu malformed", versions[i], j);
            if (j)
                ck_assert_msg(strcmp(mt_dialect_at(d, j - 1)->flag, f->flag) < 0,
                              "%s: %s listed twice or out of order", versions[i], f->flag);
        }
    }
    ck_assert_ptr_null(known[4]);
    ck_assert_ptr_null(mt_dialect_find("core_r0.14.0"));
}
END_TEST

START_TEST(versions_differ_where_upstream_does)
{
    const mt_mlm_dialect *r15 = mt_dialect_find("core_r0.15.0");
    const mt_mlm_dialect *v18 = mt_dialect_find("core_v0.18.0");
    const mt_mlm_dialect *v19 = mt_dialect_find("core_v0.19.0");
    const mt_mlm_dialect *m = mt_dialect_find("main");
    ck_assert_ptr_null(mt_dialect_flag(r15, "--moe-flex-dispatcher-backend"));
    ck_assert_ptr_nonnull(mt_dialect_flag(r15, "--moe-enable-deepep"));
    ck_assert_ptr_null(mt_dialect_flag(r15, "--cuda-graph-modules"));
    ck_assert_str_eq(mt_dialect_flag(r15, "--cuda-graph-scope")->choices, "full|attn|full_iteration");
    ck_assert_ptr_null(mt_dialect_flag(r15, "--fine-grained-activation-offloading"));
    ck_assert_ptr_null(mt_dialect_flag(r15, "--moe-permute-fusion-into-hybridep"));
    ck_assert_ptr_nonnull(mt_dialect_flag(v18, "--moe-permute-fusion-into-hybridep"));
    ck_assert_ptr_null(mt_dialect_flag(v18, "--moe-flex-dispatcher-num-sms"));
    ck_assert_ptr_nonnull(mt_dialect_flag(v19, "--moe-flex-dispatcher-num-sms"));
    ck_assert_str_eq(mt_dialect_flag(m, "--cuda-graph-impl")->choices,
                     "none|local|transformer_engine|full_iteration");
    /* Flags that are not knobs are in the tables too. */
    ck_assert_ptr_nonnull(mt_dialect_flag(r15, "--data-path"));
    ck_assert_ptr_nonnull(mt_dialect_flag(m, "--tokenizer-type"));
    ck_assert_ptr_nonnull(mt_dialect_flag(m, "--save"));
    ck_assert_str_eq(mt_dialect_core_version(v18), "0.18.0");
    ck_assert_int_lt(mt_version_cmp("0.15.4", "0.18"), 0);
    ck_assert_int_eq(mt_version_cmp("0.18.0", "0.18"), 0);
    ck_assert_int_gt(mt_version_cmp("0.20.0", "0.19.1"), 0);
}
END_TEST

START_TEST(stack_resolution)
{
    mt_kv *stack = mt_kv_new();
    char err[512];
    ck_assert_ptr_null(mt_dialect_for_stack(stack, err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "core_v0.19.0"));
    mt_kv_set(stack, "megatron_lm", "core_v0.21.0");
    ck_assert_ptr_null(mt_dialect_for_stack(stack, err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "\"core_v0.21.0\" is not a Megatron-LM version"));
    ck_assert_ptr_nonnull(strstr(err, "core_r0.15.0, core_v0.18.0, core_v0.19.0, main"));
    ck_assert_ptr_nonnull(strstr(err, "stack.dialect"));
    /* A newer or patched stack is judged by the dialect it names. */
    mt_kv_set(stack, "dialect", "core_v0.19.0");
    ck_assert_str_eq(mt_dialect_name(mt_dialect_for_stack(stack, err, sizeof err)),
                     "core_v0.19.0");
    mt_kv_destroy(&stack);
}
END_TEST

START_TEST(argparse_like_python)
{
    const mt_mlm_dialect *m = mt_dialect_find("main");
    mt_kv *ns = mt_kv_new();
    char err[512];
    /* Defaults: a None is absent, lists and enums are plain. */
    ck_assert_int_eq(parse_str(m, "--num-layers 4", ns, err, sizeof err), 0);
    ck_assert_str_eq(mt_kv_get(ns, "num_layers"), "4");
    ck_assert_str_eq(mt_kv_get(ns, "attention_dropout"), "0.1");
    ck_assert_str_eq(mt_kv_get(ns, "cp_comm_type"), "p2p");
    ck_assert_str_eq(mt_kv_get(ns, "attention_backend"), "auto");
    ck_assert_str_eq(mt_kv_get(ns, "sequence_parallel"), "false");
    ck_assert_ptr_null(mt_kv_get(ns, "global_batch_size"));
    /* Python's int(), the last occurrence winning, "=" values, negatives. */
    ck_assert_int_eq(parse_str(m, "--num-layers 0_8 --num-layers=012 --seed -3 --bf16 "
                                  "--cuda-graph-modules attn moe_router --no-check-for-nan-in-loss-and-grad",
                               ns, err, sizeof err), 0);
    ck_assert_str_eq(mt_kv_get(ns, "num_layers"), "12");
    ck_assert_str_eq(mt_kv_get(ns, "seed"), "-3");
    ck_assert_str_eq(mt_kv_get(ns, "bf16"), "true");
    ck_assert_str_eq(mt_kv_get(ns, "cuda_graph_modules"), "attn moe_router");
    ck_assert_str_eq(mt_kv_get(ns, "check_for_nan_in_loss_and_grad"), "false");
    /* The messages argparse prints. */
    ck_assert_int_eq(parse_str(m, "--tensor-model-parallel-size two", ns, err, sizeof err), -1);
    ck_assert_str_eq(err, "argument --tensor-model-parallel-size: invalid int value: 'two'");
    ck_assert_int_eq(parse_str(m, "--moe-token-dispatcher-type deepep", ns, err, sizeof err), -1);
    ck_assert_str_eq(err, "argument --moe-token-dispatcher-type: invalid choice: 'deepep' "
                          "(choose from 'allgather', 'alltoall', 'flex')");
    ck_assert_int_eq(parse_str(m, "--num-layers --bf16", ns, err, sizeof err), -1);
    ck_assert_str_eq(err, "argument --num-layers: expected one argument");
    ck_assert_int_eq(parse_str(m, "--cuda-graph-modules --bf16", ns, err, sizeof err), -1);
    ck_assert_str_eq(err, "argument --cuda-graph-modules: expected at least one argument");
    /* Unrecognized arguments are reported after everything else parsed. */
    ck_assert_int_eq(parse_str(m, "--not-a-flag --num-layers x", ns, err, sizeof err), -1);
    ck_assert_str_eq(err, "argument --num-layers: invalid int value: 'x'");
    ck_assert_int_eq(parse_str(m, "--not-a-flag 3 --bf16 --abbrev", ns, err, sizeof err), -1);
    ck_assert_str_eq(err, "unrecognized arguments: --not-a-flag 3 --abbrev");
    /* No abbreviations (allow_abbrev=False). */
    ck_assert_int_eq(parse_str(m, "--num-lay 3", ns, err, sizeof err), -1);
    ck_assert_str_eq(err, "unrecognized arguments: --num-lay 3");
    mt_kv_destroy(&ns);
}
END_TEST

START_TEST(extension_choices)
{
    const mt_mlm_dialect *m = mt_dialect_find("main");
    mt_kv *ns = mt_kv_new(), *extra = mt_kv_new();
    char *v[] = {"--moe-flex-dispatcher-backend", "flexdemo"};
    mt_argparse_result res;
    ck_assert_int_eq(mt_argparse(m, v, 2, ns, &res), -1);
    mt_argparse_result_clear(&res);
    mt_kv_set(extra, "--moe-flex-dispatcher-backend", "other|flexdemo");
    ck_assert_int_eq(mt_argparse_ext(m, v, 2, ns, &res, extra), 0);
    ck_assert_str_eq(mt_kv_get(ns, "moe_flex_dispatcher_backend"), "flexdemo");
    ck_assert_uint_eq(res.n_toks, 1);
    ck_assert_uint_eq(res.toks[0].count, 2);
    mt_argparse_result_clear(&res);
    mt_kv_destroy(&ns);
    mt_kv_destroy(&extra);
}
END_TEST

START_TEST(derivations)
{
    const mt_mlm_dialect *m = mt_dialect_find("main");
    mt_kv *ns = mt_kv_new();
    char err[512];
    ck_assert_int_eq(parse_str(m, "--num-layers 61 --hidden-size 1024 --num-attention-heads 8 "
                                  "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 8 "
                                  "--pipeline-model-parallel-layout Et*2|(tt|)*22t|(tt|)*7mL "
                                  "--micro-batch-size 2 --swiglu --num-experts 0",
                               ns, err, sizeof err), 0);
    mt_args_derive(ns, 64);
    ck_assert_str_eq(mt_kv_get(ns, "data_parallel_size"), "4");
    ck_assert_str_eq(mt_kv_get(ns, "global_batch_size"), "8");
    ck_assert_str_eq(mt_kv_get(ns, "virtual_pipeline_model_parallel_size"), "4");
    ck_assert_str_eq(mt_kv_get(ns, "expert_tensor_parallel_size"), "2");
    ck_assert_str_eq(mt_kv_get(ns, "ffn_hidden_size"), "2688");
    ck_assert_str_eq(mt_kv_get(ns, "kv_channels"), "128");
    ck_assert_ptr_null(mt_kv_get(ns, "num_experts"));
    ck_assert_str_eq(mt_kv_get(ns, "raw.num_experts"), "0");
    ck_assert_int_eq(parse_str(m, "--num-layers 8 --pipeline-model-parallel-size 2 "
                                  "--sequence-parallel --num-virtual-stages-per-pipeline-rank 1",
                               ns, err, sizeof err), 0);
    mt_args_derive(ns, 8);
    ck_assert_str_eq(mt_kv_get(ns, "sequence_parallel"), "false");
    ck_assert_str_eq(mt_kv_get(ns, "raw.sequence_parallel"), "true");
    ck_assert_ptr_null(mt_kv_get(ns, "virtual_pipeline_model_parallel_size"));
    ck_assert_str_eq(mt_kv_get(ns, "overlap_p2p_comm"), "false");
    mt_kv_destroy(&ns);
}
END_TEST

/* Our tables against upstream's own partial tables: every row equal. */
START_TEST(tables_equal_upstream)
{
    const char *dir = facts_dir();
    size_t i, rows = 0;
    if (!dir) {
        printf("tables_equal_upstream: no ../shared/facts/upstream here; nothing to compare\n");
        return;
    }
    for (i = 0; i < 4; i++) {
        char path[4096], line[4096];
        const mt_mlm_dialect *d = mt_dialect_find(versions[i]);
        FILE *f;
        snprintf(path, sizeof path, "%s/megatron-flags-%s.tsv", dir, versions[i]);
        f = fopen(path, "r");
        ck_assert_msg(f != NULL, "cannot read %s", path);
        while (fgets(line, sizeof line, f)) {
            char *c[7], *p = line;
            const mt_flag *row;
            int k;
            line[strcspn(line, "\r\n")] = 0;
            for (k = 0; k < 7; k++)
                c[k] = strsep(&p, "\t");
            if (!c[6] || !strcmp(c[0], "flag"))
                continue;
            row = mt_dialect_flag(d, c[0]);
            ck_assert_msg(row != NULL, "%s: %s missing from our table", versions[i], c[0]);
            ck_assert_str_eq(row->action, c[1]);
            ck_assert_str_eq(row->nargs, c[2]);
            ck_assert_str_eq(row->type, c[3]);
            ck_assert_str_eq(row->choices ? row->choices : "-", c[4]);
            ck_assert_str_eq(row->def, c[5]);
            ck_assert_str_eq(row->dest, c[6]);
            rows++;
        }
        fclose(f);
    }
    printf("tables_equal_upstream: %zu upstream rows, all equal\n", rows);
    ck_assert_uint_gt(rows, 1000);
}
END_TEST

/* Every command line of the corpus: accepted rows parse; rows upstream's
 * argparse refused are refused with the same words. */
START_TEST(parser_equals_upstream_argparse)
{
    const char *dir = facts_dir();
    size_t i, accepted = 0, refused = 0;
    if (!dir) {
        printf("parser_equals_upstream_argparse: no ../shared/facts/upstream here\n");
        return;
    }
    for (i = 0; i < 4; i++) {
        char path[4096], *line = NULL;
        size_t cap = 0;
        const mt_mlm_dialect *d = mt_dialect_find(versions[i]);
        mt_kv *ns = mt_kv_new();
        FILE *f;
        snprintf(path, sizeof path, "%s/megatron-verdicts-%s.tsv", dir, versions[i]);
        f = fopen(path, "r");
        ck_assert_msg(f != NULL, "cannot read %s", path);
        while (getline(&line, &cap, f) > 0) {
            char *c[10], *p = line, err[512];
            int k, rc;
            line[strcspn(line, "\r\n")] = 0;
            for (k = 0; k < 10; k++)
                c[k] = strsep(&p, "\t");
            if (!c[9] || !strcmp(c[0], "id"))
                continue;
            rc = parse_str(d, c[6], ns, err, sizeof err);
            if (!strcmp(c[7], "accept")) {
                ck_assert_msg(rc == 0, "%s: upstream accepts, we refuse: %s", c[0], err);
                accepted++;
            } else if (!strcmp(c[9], "argparse") || !strncmp(c[8], "argument --", 11)) {
                ck_assert_msg(rc == -1, "%s: upstream's parser refuses (%s), ours does not", c[0],
                              c[8]);
                ck_assert_msg(!strncmp(err, c[8], strlen(c[8])), "%s: upstream says '%s', we say '%s'",
                              c[0], c[8], err);
                refused++;
            }
        }
        free(line);
        fclose(f);
        mt_kv_destroy(&ns);
    }
    printf("parser_equals_upstream_argparse: %zu accepted rows parse, %zu argparse refusals "
           "worded as upstream's\n", accepted, refused);
    ck_assert_uint_gt(accepted, 3000);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dialect");
    TCase *tc = tcase_create("dialect");
    SRunner *sr;
    int failed;
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, tables_load);
    tcase_add_test(tc, versions_differ_where_upstream_does);
    tcase_add_test(tc, stack_resolution);
    tcase_add_test(tc, argparse_like_python);
    tcase_add_test(tc, extension_choices);
    tcase_add_test(tc, derivations);
    tcase_add_test(tc, tables_equal_upstream);
    tcase_add_test(tc, parser_equals_upstream_argparse);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
