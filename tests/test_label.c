/*
 * test_label.c - a config's label and the setting named for it
 * (core/label.c): forced routing in the contract and in the knobs, mock data
 * under natural routing on a real stack, flags that disable the optimizer
 * or the checkpoint path; each reason names its setting.
 */
#include "label.h"
#include "testkit.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

/* The demo's contract with from replaced by to (NULL: as it is). */
static mt_contract *demo(const char *from, const char *to)
{
    char *path = tk_example("qwen3-30b-a3b-h100x16.cfg"), *text = tk_slurp(path), *out = text;
    mt_diag *d = mt_diag_new();
    mt_contract *c;
    ck_assert_ptr_nonnull(text);
    if (from) {
        const char *at = strstr(text, from);
        ck_assert_msg(at != NULL, "the demo contract lacks \"%s\"", from);
        out = malloc(strlen(text) - strlen(from) + strlen(to) + 1);
        memcpy(out, text, (size_t)(at - text));
        strcpy(out + (at - text), to);
        strcat(out, at + strlen(from));
    }
    c = mt_contract_load_string(out, path, d);
    ck_assert_msg(c != NULL, "the edited demo contract does not load");
    if (out != text)
        free(out);
    free(text), free(path);
    mt_diag_destroy(&d);
    return c;
}

static int has(const mt_strlist *l, const char *needle)
{
    size_t i;
    for (i = 0; i < l->n; i++)
        if (strstr(l->v[i], needle))
            return 1;
    return 0;
}

static mt_kv *cfg_with(const char *knob, const char *value)
{
    mt_kv *k = mt_kv_new();
    mt_kv_set(k, "expert_model_parallel_size", "16");
    if (knob)
        mt_kv_set(k, knob, value);
    return k;
}

/* The demo: forced routing in the contract and forced load balancing in
 * the base; both are named. */
START_TEST(forced_routing_names_contract_and_knob)
{
    mt_contract *c = demo(NULL, NULL);
    mt_kv *cfg = cfg_with("moe_router_force_load_balancing", "true");
    mt_strlist why = {0};
    ck_assert_uint_eq(mt_label_config(c, cfg, -1, &why), MT_LABEL_BENCHMARK_ONLY);
    ck_assert_uint_eq(why.n, 2);
    ck_assert(has(&why, "data.routing = \"forced\""));
    ck_assert(has(&why, "moe_router_force_load_balancing = true"));
    ck_assert_str_eq(mt_label_word(MT_LABEL_BENCHMARK_ONLY), "benchmark-only");
    mt_strlist_clear(&why);
    /* forced by the contract alone */
    mt_kv_set(cfg, "moe_router_force_load_balancing", "false");
    ck_assert_uint_eq(mt_label_config(c, cfg, -1, &why), MT_LABEL_BENCHMARK_ONLY);
    ck_assert_uint_eq(why.n, 1);
    ck_assert(has(&why, "data.routing"));
    mt_strlist_clear(&why);
    mt_kv_destroy(&cfg);
    mt_contract_destroy(&c);
}
END_TEST

/* The natural-routing arms of a validation: the router's own routing on the
 * sim (no data there) is training-equivalent, with no reason; the knob
 * alone still forces balance. */
START_TEST(natural_routing_on_the_sim)
{
    mt_contract *c = demo(NULL, NULL);
    mt_kv *cfg = cfg_with("moe_router_force_load_balancing", "false");
    mt_strlist why = {0};
    ck_assert_uint_eq(mt_label_config(c, cfg, MT_ROUTING_NATURAL, &why),
                      MT_LABEL_TRAINING_EQUIVALENT);
    ck_assert_uint_eq(why.n, 0);
    ck_assert_str_eq(mt_label_word(MT_LABEL_TRAINING_EQUIVALENT), "training-equivalent");
    mt_kv_set(cfg, "moe_router_force_load_balancing", "true");
    ck_assert_uint_eq(mt_label_config(c, cfg, MT_ROUTING_NATURAL, &why), MT_LABEL_BENCHMARK_ONLY);
    ck_assert_uint_eq(why.n, 1);
    ck_assert(has(&why, "moe_router_force_load_balancing"));
    mt_strlist_clear(&why);
    mt_kv_destroy(&cfg);
    mt_contract_destroy(&c);
}
END_TEST

/* A real stack measuring natural routing on mock data routes synthetic
 * tokens: benchmark-only, naming data.dataset; real data are not. */
START_TEST(mock_data_matter_with_natural_routing)
{
    mt_contract *c = demo("routing = \"forced\";", "routing = \"natural\";");
    mt_kv *cfg = cfg_with(NULL, NULL);
    mt_strlist why = {0};
    ck_assert_uint_eq(mt_label_config(c, cfg, -1, &why), MT_LABEL_TRAINING_EQUIVALENT);
    free(c->backend);
    c->backend = strdup("command");
    ck_assert_uint_eq(mt_label_config(c, cfg, -1, &why), MT_LABEL_BENCHMARK_ONLY);
    ck_assert_uint_eq(why.n, 1);
    ck_assert(has(&why, "data.dataset = \"mock\""));
    mt_strlist_clear(&why);
    mt_kv_set(c->data, "dataset", "/data/train_text_document");
    ck_assert_uint_eq(mt_label_config(c, cfg, -1, &why), MT_LABEL_TRAINING_EQUIVALENT);
    ck_assert_uint_eq(why.n, 0);
    mt_kv_destroy(&cfg);
    mt_contract_destroy(&c);
}
END_TEST

/* Flags that take a run away from training, each named with where it is
 * set; a non-zero learning rate is none of them. */
START_TEST(disabled_optimizer_or_checkpoint_path)
{
    static const char *const flags[][2] = {
        {"\"--no-save-optim\"", "--no-save-optim (fixed_args)"},
        {"\"--no-load-optim\"", "--no-load-optim (fixed_args)"},
        {"\"--skip-train\"", "--skip-train (fixed_args)"},
        {"\"--lr\", \"0.0\"", "--lr 0.0 (fixed_args)"},
    };
    size_t i;
    for (i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        char to[256];
        mt_contract *c;
        mt_kv *cfg = cfg_with("moe_router_force_load_balancing", "false");
        mt_strlist why = {0};
        snprintf(to, sizeof to, "fixed_args = [%s, ", flags[i][0]);
        c = demo("fixed_args = [", to);
        ck_assert_uint_eq(mt_label_config(c, cfg, MT_ROUTING_NATURAL, &why),
                          MT_LABEL_BENCHMARK_ONLY);
        ck_assert_msg(why.n == 1 && has(&why, flags[i][1]), "%s: %zu reasons, first \"%s\"",
                      flags[i][0], why.n, why.n ? why.v[0] : "");
        mt_strlist_clear(&why);
        mt_kv_destroy(&cfg);
        mt_contract_destroy(&c);
    }
    {
        mt_contract *c = demo("fixed_args = [", "fixed_args = [\"--lr\", \"3e-4\", ");
        mt_kv *cfg = cfg_with(NULL, NULL);
        ck_assert_uint_eq(mt_label_config(c, cfg, MT_ROUTING_NATURAL, NULL),
                          MT_LABEL_TRAINING_EQUIVALENT);
        mt_kv_destroy(&cfg);
        mt_contract_destroy(&c);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("label");
    TCase *tc = tcase_create("label");
    tcase_add_test(tc, forced_routing_names_contract_and_knob);
    tcase_add_test(tc, natural_routing_on_the_sim);
    tcase_add_test(tc, mock_data_matter_with_natural_routing);
    tcase_add_test(tc, disabled_optimizer_or_checkpoint_path);
    suite_add_tcase(s, tc);
    return tk_run(s);
}
