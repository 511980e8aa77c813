/*
 * test_config.c - knob model: canonical values and serialization, config
 * ids, diffs, the derived folding meshes, the kv map and SHA-256.
 */
#include "layout.h"
#include "sha256.h"
#include "testkit.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

START_TEST(sha256_vectors)
{
    char hex[65];
    mt_sha256_hex("", 0, hex);
    ck_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    mt_sha256_hex("abc", 3, hex);
    ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    mt_sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, hex);
    ck_assert_str_eq(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}
END_TEST

START_TEST(kv_sorted_and_owned)
{
    mt_kv *kv = mt_kv_new(), *dup;
    const char *k, *v;
    char big[600];
    ck_assert_int_eq(mt_kv_set(kv, "b", "2"), 0);
    ck_assert_int_eq(mt_kv_set(kv, "a", "1"), 0);
    ck_assert_int_eq(mt_kv_set(kv, "c", "3"), 0);
    ck_assert_int_eq(mt_kv_set(kv, "b", "two"), 0);
    ck_assert_uint_eq(mt_kv_count(kv), 3);
    ck_assert_int_eq(mt_kv_entry(kv, 0, &k, &v), 0);
    ck_assert_str_eq(k, "a");
    ck_assert_int_eq(mt_kv_entry(kv, 1, &k, &v), 0);
    ck_assert_str_eq(v, "two");
    ck_assert_int_eq(mt_kv_entry(kv, 3, &k, &v), -1);
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    ck_assert_int_eq(mt_kv_setf(kv, "big", "%s", big), 0);
    ck_assert_uint_eq(strlen(mt_kv_get(kv, "big")), sizeof big - 1);
    dup = mt_kv_dup(kv);
    ck_assert_int_eq(mt_kv_unset(kv, "a"), 0);
    ck_assert_int_lt(mt_kv_unset(kv, "a"), 0);
    ck_assert_ptr_null(mt_kv_get(kv, "a"));
    ck_assert_str_eq(mt_kv_get(dup, "a"), "1");
    mt_kv_destroy(&kv);
    ck_assert_ptr_null(kv);
    mt_kv_destroy(&dup);
}
END_TEST

START_TEST(canonical_values)
{
    tk *t = tk_open("qwen3-30b-a3b-h100x16.cfg");
    char id1[17], id2[17], id3[17];
    mt_kv *other;
    mt_diag *d = mt_diag_new();
    /* list order and spelling do not change the config */
    tk_set(t, "cuda_graph_impl=transformer_engine");
    tk_set(t, "cuda_graph_modules=moe_preprocess,moe_router");
    ck_assert_str_eq(mt_kv_get(t->cfg, "cuda_graph_modules"), "moe_router moe_preprocess");
    tk_set(t, "moe_permute_fusion=True");
    ck_assert_str_eq(mt_kv_get(t->cfg, "moe_permute_fusion"), "true");
    tk_set(t, "micro_batch_size=01");
    ck_assert_str_eq(mt_kv_get(t->cfg, "micro_batch_size"), "1");
    mt_config_id(t->cfg, id1);
    other = mt_config_base(t->reg, t->contract, d);
    /* same knobs set in another order, other spellings */
    mt_config_set(t->reg, other, "moe_permute_fusion", "1", NULL, 0, "t", d);
    mt_config_set(t->reg, other, "cuda_graph_modules", "moe_router moe_preprocess", NULL, 0, "t", d);
    mt_config_set(t->reg, other, "cuda_graph_impl", "transformer_engine", NULL, 0, "t", d);
    ck_assert_uint_eq(mt_diag_count(d), 0);
    mt_config_id(other, id2);
    ck_assert_str_eq(id1, id2);
    ck_assert_uint_eq(strlen(id1), 16);
    mt_config_set(t->reg, other, "moe_permute_fusion", "false", NULL, 0, "t", d);
    mt_config_id(other, id3);
    ck_assert_str_ne(id1, id3);
    {
        char *text = mt_config_canonical(t->cfg);
        ck_assert_ptr_nonnull(strstr(text, "\ncuda_graph_modules=moe_router moe_preprocess\n"));
        ck_assert_ptr_nonnull(strstr(text, "\nlog_interval=1\n"));
        ck_assert_ptr_nonnull(strstr(text, "\nenv.CUDA_DEVICE_MAX_CONNECTIONS=\n"));
        free(text);
    }
    mt_kv_destroy(&other);
    mt_diag_destroy(&d);
    tk_close(&t);
}
END_TEST

START_TEST(bad_values_refused)
{
    tk *t = tk_open("qwen3-30b-a3b-h100x16.cfg");
    mt_diag *d = mt_diag_new();
    ck_assert_int_ne(mt_config_set(t->reg, t->cfg, "micro_batch_size", "two", NULL, 0, "--set", d), 0);
    ck_assert_int_ne(mt_config_set(t->reg, t->cfg, "moe_token_dispatcher_type", "flexx", NULL, 0, "--set", d), 0);
    ck_assert_int_ne(mt_config_set(t->reg, t->cfg, "cuda_graph_modules", "attn attn", NULL, 0, "--set", d), 0);
    ck_assert_int_ne(mt_config_set(t->reg, t->cfg, "cuda_graph_modules", "attn bogus", NULL, 0, "--set", d), 0);
    ck_assert_int_ne(mt_config_set(t->reg, t->cfg, "moe_permute_fusion", "yes", NULL, 0, "--set", d), 0);
    ck_assert_int_ne(mt_config_set(t->reg, t->cfg, "tensor_model_paralel_size", "2", NULL, 0, "--set", d), 0);
    ck_assert_uint_eq(mt_diag_count(d), 6);
    ck_assert(mt_diag_contains(d, "legal values: allgather, alltoall, flex"));
    ck_assert(mt_diag_contains(d, "lists \"attn\" twice"));
    ck_assert(mt_diag_contains(d, "did you mean 'tensor_model_parallel_size'?"));
    ck_assert_str_eq(mt_kv_get(t->cfg, "micro_batch_size"), "1");
    mt_diag_destroy(&d);
    tk_close(&t);
}
END_TEST

START_TEST(diff_lists_changes)
{
    tk *t = tk_open("qwen3-30b-a3b-h100x16.cfg");
    mt_kv *before = mt_kv_dup(t->cfg);
    mt_strlist out = {0};
    tk_set(t, "moe_token_dispatcher_type=flex");
    tk_set(t, "moe_flex_dispatcher_backend=hybridep");
    ck_assert_int_eq(mt_config_diff(before, t->cfg, &out), 2);
    ck_assert_str_eq(out.v[0], "moe_flex_dispatcher_backend: none -> hybridep");
    ck_assert_str_eq(out.v[1], "moe_token_dispatcher_type: alltoall -> flex");
    mt_strlist_clear(&out);
    ck_assert_int_eq(mt_config_diff(before, before, &out), 0);
    mt_kv_destroy(&before);
    tk_close(&t);
}
END_TEST

START_TEST(meshes)
{
    tk *t = tk_open("qwen3-30b-a3b-h100x16.cfg");
    mt_mesh m;
    char att[160], moe[160];
    mt_config_mesh(t->cfg, t->contract->hardware, &m);
    mt_mesh_format(&m, att, sizeof att, moe, sizeof moe);
    ck_assert_str_eq(att, "Attention: TP1 x CP1 x DP16 x PP1");
    ck_assert_str_eq(moe, "MoE: ETP1 x EP16 x EDP1 x PP1");
    tk_set(t, "tensor_model_parallel_size=2");
    tk_set(t, "expert_model_parallel_size=8");
    mt_config_mesh(t->cfg, t->contract->hardware, &m);
    mt_mesh_format(&m, att, sizeof att, moe, sizeof moe);
    ck_assert_str_eq(att, "Attention: TP2 x CP1 x DP8 x PP1");
    ck_assert_str_eq(moe, "MoE: ETP1 x EP8 x EDP2 x PP1");
    tk_close(&t);

    t = tk_open("deepseek-v3-gb200x256.cfg");
    mt_config_mesh(t->cfg, t->contract->hardware, &m);
    mt_mesh_format(&m, att, sizeof att, moe, sizeof moe);
    ck_assert_int_eq(m.vpp, 4);
    ck_assert_str_eq(att, "Attention: TP1 x CP1 x DP32 x PP8 (VPP4)");
    ck_assert_str_eq(moe, "MoE: ETP1 x EP32 x EDP1 x PP8 (VPP4)");
    tk_close(&t);
}
END_TEST

/* Megatron's layout grammar: the examples of facts/megatron.md, and errors
 * with their position. */
START_TEST(pipeline_layouts)
{
    mt_layout_stage st[64];
    int n, err, i, t;
    n = mt_layout_parse("Et|(tt|)*30mL", st, 64, &err);
    ck_assert_int_eq(n, 32);
    for (i = 0, t = 0; i < n; i++)
        t += st[i].t;
    ck_assert_int_eq(t, 61);
    ck_assert_int_eq(st[0].e, 1);
    ck_assert_int_eq(st[31].m, 1);
    ck_assert_int_eq(st[31].l, 1);
    n = mt_layout_parse("Et*2|(tt|)*22t|(tt|)*7mL", st, 64, &err);
    ck_assert_int_eq(n, 32);
    ck_assert_int_eq(st[0].t, 2);
    ck_assert_int_eq(st[23].t, 1);
    n = mt_layout_parse("E, t*3 | t*3, L", st, 64, &err);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(st[1].t, 3);
    ck_assert_int_eq(mt_layout_parse("Et|(tt|x", st, 64, &err), -1);
    ck_assert_int_eq(err, 7);
    ck_assert_int_eq(mt_layout_parse("E(t|)*2", st, 64, &err), -1); /* a group starts a stage */
    ck_assert_int_eq(mt_layout_parse("(t|)*100", st, 64, &err), -1); /* more stages than room */
    ck_assert_int_eq(mt_layout_parse("t*0", st, 64, &err), -1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("knob model");
    tcase_add_test(tc, sha256_vectors);
    tcase_add_test(tc, kv_sorted_and_owned);
    tcase_add_test(tc, canonical_values);
    tcase_add_test(tc, bad_values_refused);
    tcase_add_test(tc, diff_lists_changes);
    tcase_add_test(tc, meshes);
    tcase_add_test(tc, pipeline_layouts);
    suite_add_tcase(s, tc);
    return tk_run(s);
}
