/*
 * test_import.c - `moetune import`: a contract from a launch command line,
 * and back.
 *
 * The canonical Qwen3-30B-A3B recipe of each supported Megatron-LM version,
 * in that version's spelling, is imported, loaded as a contract and rendered
 * again: the rendered command line must mean exactly what the original
 * meant (the same argument namespace under that version's parser), except
 * for the flags moetune sets on every run itself.  Bad command lines are
 * refused the way upstream's parser refuses them.
 */
#include "config.h"
#include "dialect.h"
#include "evaluate.h"
#include "import.h"
#include "render.h"
#include "testkit.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QWEN3_30B                                                                                 \
    "--num-layers 48 --hidden-size 2048 --ffn-hidden-size 6144 --num-attention-heads 32 "        \
    "--group-query-attention --num-query-groups 4 --kv-channels 128 --qk-layernorm "             \
    "--num-experts 128 --moe-router-topk 8 --moe-ffn-hidden-size 768 "                           \
    "--moe-router-load-balancing-type aux_loss --moe-aux-loss-coeff 1e-3 --vocab-size 151936 "   \
    "--position-embedding-type rope --rotary-base 1000000 --swiglu --normalization RMSNorm "     \
    "--norm-epsilon 1e-6 --disable-bias-linear --untie-embeddings-and-output-weights "           \
    "--attention-dropout 0.0 --hidden-dropout 0.0 --seq-length 4096 "                           \
    "--max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 1024 "             \
    "--train-iters 50 --eval-iters 0 --mock-data --tokenizer-type NullTokenizer --seed 1234 "    \
    "--log-interval 1 --log-throughput --bf16 --use-distributed-optimizer "                      \
    "--overlap-grad-reduce --overlap-param-gather --moe-grouped-gemm --moe-router-dtype fp32 "   \
    "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 "                           \
    "--expert-model-parallel-size 16 --expert-tensor-parallel-size 1 "                           \
    "--moe-token-dispatcher-type flex --moe-permute-fusion --overlap-moe-expert-parallel-comm "   \
    "--manual-gc --manual-gc-interval 10 --data-path /data/qwen3_text_document "                 \
    "--save /ckpt/qwen3 --save-interval 1000 "

/* The tuned recipe in each version's own spelling (facts/megatron.md). */
static const struct {
    const char *version;
    const char *argv;
} recipes[] = {
    {"core_r0.15.0", QWEN3_30B "--moe-enable-deepep --moe-deepep-num-sms 32 "
                     "--cuda-graph-impl transformer_engine --cuda-graph-scope attn"},
    {"core_v0.18.0", QWEN3_30B "--moe-flex-dispatcher-backend hybridep --moe-hybridep-num-sms 32 "
                     "--moe-permute-fusion-into-hybridep --cuda-graph-impl transformer_engine "
                     "--cuda-graph-modules moe_router moe_preprocess"},
    {"core_v0.19.0", QWEN3_30B "--moe-flex-dispatcher-backend hybridep "
                     "--moe-flex-dispatcher-num-sms 32 --moe-permute-fusion-into-hybridep "
                     "--cuda-graph-impl transformer_engine --cuda-graph-modules moe_router moe_preprocess"},
    {"main", QWEN3_30B "--moe-flex-dispatcher-backend hybridep --moe-flex-dispatcher-num-sms 32 "
             "--moe-permute-fusion-into-hybridep --cuda-graph-impl transformer_engine "
             "--cuda-graph-modules moe_router moe_preprocess"},
};

/* Dests moetune sets on every run itself (core/import.h). */
static int forced(const char *dest)
{
    return !strcmp(dest, "train_iters") ||
           !strcmp(dest, "log_throughput") || !strcmp(dest, "eval_interval") ||
           !strcmp(dest, "save_interval");
}

static size_t split(char *s, char **v, size_t max)
{
    size_t n = 0;
    char *tok, *save = NULL;
    for (tok = strtok_r(s, " ", &save); tok && n < max; tok = strtok_r(NULL, " ", &save))
        v[n++] = tok;
    return n;
}

/* Imports argv for version on 2 x 8 H100; returns the contract text (or NULL
 * with the first problem in why). */
static char *import_text(mt_registry *reg, const char *version, const char *line, char *why,
                         size_t n)
{
    mt_import_opts o;
    char buf[8192], *v[512], *text = NULL;
    size_t argc, len = 0;
    FILE *mem = open_memstream(&text, &len);
    mt_diag *d = mt_diag_new();
    int rc;
    memset(&o, 0, sizeof o);
    o.stack = mt_kv_new(), o.hardware = mt_kv_new(), o.env = mt_kv_new();
    mt_kv_set(o.stack, "megatron_lm", version);
    mt_kv_set(o.stack, "transformer_engine", "2.12");
    mt_kv_set(o.hardware, "gpu", "H100");
    mt_kv_set(o.hardware, "gpus_per_node", "8");
    mt_kv_set(o.hardware, "nodes", "2");
    mt_kv_set(o.env, "CUDA_DEVICE_MAX_CONNECTIONS", "32");
    snprintf(buf, sizeof buf, "%s", line);
    argc = split(buf, v, 512);
    rc = mt_import(reg, &o, v, argc, mem, d);
    fclose(mem);
    snprintf(why, n, "%s", mt_diag_count(d) ? mt_diag_at(d, 0)->message : "");
    mt_diag_destroy(&d);
    mt_kv_destroy(&o.stack), mt_kv_destroy(&o.hardware), mt_kv_destroy(&o.env);
    if (rc) {
        free(text);
        return NULL;
    }
    return text;
}

START_TEST(canonical_recipes_round_trip)
{
    mt_diag *d = mt_diag_new();
    mt_registry *reg = tk_registry(d);
    size_t i;
    for (i = 0; i < sizeof recipes / sizeof recipes[0]; i++) {
        const mt_mlm_dialect *dl = mt_dialect_find(recipes[i].version);
        char why[512], buf[8192], *v[512];
        char *text = import_text(reg, recipes[i].version, recipes[i].argv, why, sizeof why);
        mt_contract *c;
        mt_kv *cfg, *orig = mt_kv_new(), *back = mt_kv_new();
        mt_rendered rd;
        mt_argparse_result res;
        mt_violations vs = {0};
        size_t argc, k;
        const char *key, *val;
        ck_assert_msg(text != NULL, "%s: import refused: %s", recipes[i].version, why);
        c = mt_contract_load_string(text, "imported.cfg", d);
        ck_assert_msg(c != NULL, "%s: the imported contract does not load: %s\n%s",
                      recipes[i].version, mt_diag_count(d) ? mt_diag_at(d, 0)->message : "", text);
        cfg = mt_config_base(reg, c, d);
        ck_assert_msg(cfg != NULL, "%s: base: %s", recipes[i].version,
                      mt_diag_count(d) ? mt_diag_at(d, 0)->message : "");
        /* The recipe is legal at start-up on its own version. */
        mt_legality(reg, c, cfg, &vs, d);
        for (k = 0; k < vs.n; k++)
            ck_assert_msg(vs.v[k].rule_class != MT_RULE_STARTUP, "%s: [%s] %s",
                          recipes[i].version, vs.v[k].rule, vs.v[k].message);
        mt_violations_clear(&vs);
        mt_rendered_init(&rd);
        ck_assert_int_eq(mt_render(reg, c, cfg, MT_DIALECT_MLM, &rd, d), 0);
        ck_assert_int_eq(mt_argparse(dl, rd.argv.v, rd.argv.n, back, &res), 0);
        mt_argparse_result_clear(&res);
        snprintf(buf, sizeof buf, "%s", recipes[i].argv);
        argc = split(buf, v, 512);
        ck_assert_int_eq(mt_argparse(dl, v, argc, orig, &res), 0);
        mt_argparse_result_clear(&res);
        for (k = 0; mt_kv_entry(orig, k, &key, &val) == 0; k++) {
            const char *got = mt_kv_get(back, key);
            if (forced(key))
                continue;
            ck_assert_msg(got && !strcmp(got, val), "%s: %s was %s, renders as %s",
                          recipes[i].version, key, val, got ? got : "None");
        }
        for (k = 0; mt_kv_entry(back, k, &key, &val) == 0; k++)
            ck_assert_msg(forced(key) || mt_kv_get(orig, key), "%s: the render adds %s = %s",
                          recipes[i].version, key, val);
        mt_rendered_clear(&rd);
        mt_kv_destroy(&orig), mt_kv_destroy(&back), mt_kv_destroy(&cfg);
        mt_contract_destroy(&c);
        free(text);
    }
    mt_registry_destroy(&reg);
    mt_diag_destroy(&d);
}
END_TEST

START_TEST(bad_command_lines_refused_as_upstream_does)
{
    mt_diag *d = mt_diag_new();
    mt_registry *reg = tk_registry(d);
    char why[512], *text;
    /* A flag the version does not have. */
    text = import_text(reg, "core_r0.15.0", QWEN3_30B "--moe-flex-dispatcher-backend hybridep", why,
                       sizeof why);
    ck_assert_ptr_null(text);
    ck_assert_ptr_nonnull(strstr(why, "unrecognized arguments: --moe-flex-dispatcher-backend hybridep"));
    /* A value outside the flag's choices. */
    text = import_text(reg, "main", QWEN3_30B "--recompute-granularity partial", why, sizeof why);
    ck_assert_ptr_null(text);
    ck_assert_ptr_nonnull(strstr(why, "argument --recompute-granularity: invalid choice: 'partial' "
                                      "(choose from 'full', 'selective')"));
    /* Not an MoE model. */
    text = import_text(reg, "main", "--num-layers 2 --hidden-size 64 --num-attention-heads 4 "
                                    "--seq-length 128 --vocab-size 100", why, sizeof why);
    ck_assert_ptr_null(text);
    ck_assert_ptr_nonnull(strstr(why, "--num-experts"));
    /* An unknown version lists the known ones. */
    text = import_text(reg, "core_v0.99.0", QWEN3_30B, why, sizeof why);
    ck_assert_ptr_null(text);
    ck_assert_ptr_nonnull(strstr(why, "core_r0.15.0, core_v0.18.0, core_v0.19.0, main"));
    mt_registry_destroy(&reg);
    mt_diag_destroy(&d);
}
END_TEST

/* Data, tokenizer and checkpoint flags are kept verbatim as fixed_args. */
START_TEST(non_knob_flags_kept_verbatim)
{
    mt_diag *d = mt_diag_new();
    mt_registry *reg = tk_registry(d);
    char why[512];
    char *text = import_text(reg, "main", recipes[3].argv, why, sizeof why);
    mt_contract *c;
    size_t i;
    int data = 0, save = 0;
    ck_assert_ptr_nonnull(text);
    ck_assert_ptr_nonnull(strstr(text, "fixed_args = ["));
    c = mt_contract_load_string(text, "imported.cfg", d);
    ck_assert_ptr_nonnull(c);
    for (i = 0; i + 1 < c->n_fixed_args; i++) {
        data |= !strcmp(c->fixed_args[i], "--data-path") &&
                !strcmp(c->fixed_args[i + 1], "/data/qwen3_text_document");
        save |= !strcmp(c->fixed_args[i], "--save") && !strcmp(c->fixed_args[i + 1], "/ckpt/qwen3");
    }
    ck_assert(data && save);
    /* What moetune sets itself is said, not silently dropped. */
    ck_assert_ptr_nonnull(strstr(text, "#   --train-iters 50"));
    ck_assert_ptr_nonnull(strstr(text, "#   --save-interval 1000"));
    mt_contract_destroy(&c);
    free(text);
    /* A fixed flag the version lacks is a contract error naming it. */
    c = mt_contract_load_string("version = 1; name = \"x\"; fixed_args = [\"--no-such-flag\"];",
                                "x.cfg", d);
    ck_assert_ptr_null(c);
    mt_registry_destroy(&reg);
    mt_diag_destroy(&d);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("import");
    TCase *tc = tcase_create("import");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, canonical_recipes_round_trip);
    tcase_add_test(tc, bad_command_lines_refused_as_upstream_does);
    tcase_add_test(tc, non_knob_flags_kept_verbatim);
    suite_add_tcase(s, tc);
    return tk_run(s);
}
