/*
 * test_flops.c - Megatron's model FLOPs per token (core/flops.c) against the
 * published figures of shared/facts/calibration.md, read from the example
 * contracts' own model shapes, and the throughput it derives from a step.
 */
#include "flops.h"
#include "testkit.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>

static mt_contract *load(const char *name)
{
    char *path = tk_example(name);
    mt_diag *d = mt_diag_new();
    mt_contract *c = mt_contract_load(path, d);
    ck_assert_msg(c != NULL, "%s does not load", path);
    mt_diag_destroy(&d);
    free(path);
    return c;
}

/* GFLOP per token at sequence 4096 and TP 1, within the figures' rounding. */
static void expect_gflop(mt_contract *c, double want)
{
    double f = NAN;
    ck_assert_int_eq(mt_flops_per_token(c->model, 4096, 1, &f), 0);
    ck_assert_msg(fabs(f / 1e9 - want) < 0.006, "%s: %.4f GFLOP/token, published %.2f", c->name,
                  f / 1e9, want);
}

START_TEST(qwen3_30b)
{
    mt_contract *c = load("qwen3-30b-a3b-h100x16.cfg");
    expect_gflop(c, 23.01);
    mt_contract_destroy(&c);
}
END_TEST

START_TEST(qwen3_235b)
{
    mt_contract *c = load("qwen3-235b-a22b-h100x256.cfg");
    expect_gflop(c, 148.03);
    mt_contract_destroy(&c);
}
END_TEST

/* MLA, three dense layers, a shared expert; with and without its MTP layer. */
START_TEST(deepseek_v3_with_and_without_mtp)
{
    mt_contract *c = load("deepseek-v3-gb200x256.cfg");
    ck_assert_str_eq(mt_kv_get(c->model, "mtp_num_layers"), "1");
    expect_gflop(c, 259.99);
    mt_kv_set(c->model, "mtp_num_layers", "0");
    expect_gflop(c, 249.81);
    mt_contract_destroy(&c);
}
END_TEST

/* The vocabulary is padded to a multiple of 128 x TP: Qwen3's 151936 is a
 * multiple of 128 but not of 256, so TP 2 counts 152064 logits. */
START_TEST(vocabulary_padding_follows_tp)
{
    mt_contract *c = load("qwen3-30b-a3b-h100x16.cfg");
    double f1, f2;
    ck_assert_int_eq(mt_flops_per_token(c->model, 4096, 1, &f1), 0);
    ck_assert_int_eq(mt_flops_per_token(c->model, 4096, 2, &f2), 0);
    ck_assert(fabs((f2 - f1) - 6.0 * 2048 * (152064 - 151936)) < 1);
    mt_contract_destroy(&c);
}
END_TEST

/* Throughput from a step time: calibration point A's canonical recipe,
 * 20.15 s per step, is published as 299.4 TF; tokens per GPU are GBS x
 * sequence over the step and the 16 GPUs. */
START_TEST(throughput_of_a_step)
{
    mt_contract *c = load("qwen3-30b-a3b-h100x16.cfg");
    mt_kv *cfg = mt_kv_new();
    double tf, tok;
    mt_kv_set(cfg, "tensor_model_parallel_size", "1");
    ck_assert_int_eq(mt_flops_throughput(c, cfg, 20.15, &tf, &tok), 0);
    ck_assert_msg(fabs(tf - 299.4) < 0.5, "%.2f TF", tf);
    ck_assert(fabs(tok - 1024.0 * 4096 / 20.15 / 16) < 1e-6);
    ck_assert_int_eq(mt_flops_throughput(c, cfg, 0, &tf, &tok), -1);
    ck_assert(isnan(tf) && isnan(tok));
    mt_kv_destroy(&cfg);
    mt_contract_destroy(&c);
}
END_TEST

/* A shape without a required size, or with a nonsensical one, has no figure. */
START_TEST(unusable_shapes)
{
    mt_contract *c = load("qwen3-30b-a3b-h100x16.cfg");
    double f = 0;
    mt_kv_set(c->model, "hidden_size", "0");
    ck_assert_int_eq(mt_flops_per_token(c->model, 4096, 1, &f), -1);
    ck_assert(isnan(f));
    mt_kv_set(c->model, "hidden_size", "2048x");
    ck_assert_int_eq(mt_flops_per_token(c->model, 4096, 1, &f), -1);
    mt_kv_set(c->model, "hidden_size", "2048");
    ck_assert_int_eq(mt_flops_per_token(c->model, 0, 1, &f), -1);
    ck_assert_int_eq(mt_flops_per_token(c->model, 4096, 0, &f), -1);
    mt_contract_destroy(&c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("flops");
    TCase *tc = tcase_create("flops");
    tcase_add_test(tc, qwen3_30b);
    tcase_add_test(tc, qwen3_235b);
    tcase_add_test(tc, deepseek_v3_with_and_without_mtp);
    tcase_add_test(tc, vocabulary_padding_follows_tp);
    tcase_add_test(tc, throughput_of_a_step);
    tcase_add_test(tc, unusable_shapes);
    suite_add_tcase(s, tc);
    return tk_run(s);
}
