/*
 * test_contract.c - every contract error class, each with file, line and
 * field, plus fingerprint stability and the window and space audits.
 */
#include "audit.h"
#include "testkit.h"

#include <check.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *example_text(void)
{
    char *path = tk_example("qwen3-30b-a3b-h100x16.cfg");
    char *text = tk_slurp(path);
    ck_assert_ptr_nonnull(text);
    free(path);
    return text;
}

/* Replaces the first occurrence of from by to in text (caller frees). */
static char *edit(const char *text, const char *from, const char *to)
{
    const char *at = strstr(text, from);
    char *out;
    ck_assert_msg(at != NULL, "fixture text lacks \"%s\"", from);
    out = malloc(strlen(text) - strlen(from) + strlen(to) + 1);
    memcpy(out, text, (size_t)(at - text));
    strcpy(out + (at - text), to);
    strcat(out, at + strlen(from));
    return out;
}

/* Loads the edited example; expects the load to fail with a message holding
 * needle, on the given field, with a line number. */
static void expect_load_error(const char *from, const char *to, const char *field,
                              const char *needle)
{
    char *base = example_text(), *text = edit(base, from, to);
    mt_diag *d = mt_diag_new();
    mt_contract *c = mt_contract_load_string(text, "edited.cfg", d);
    size_t i;
    int hit = 0;
    ck_assert_ptr_null(c);
    for (i = 0; i < mt_diag_count(d); i++) {
        const mt_diag_item *it = mt_diag_at(d, i);
        if (strstr(it->message, needle)) {
            hit = 1;
            ck_assert_str_eq(it->file, "edited.cfg");
            ck_assert_msg(it->line > 0, "no line for %s", needle);
            if (field)
                ck_assert_msg(it->field && !strcmp(it->field, field), "field %s, want %s",
                              it->field ? it->field : "(none)", field);
        }
    }
    if (!hit)
        mt_diag_print(d, stderr);
    ck_assert_msg(hit, "no error containing \"%s\"", needle);
    mt_diag_destroy(&d);
    free(text);
    free(base);
}

START_TEST(syntax_error)
{
    expect_load_error("num_layers = 48;", "num_layers = = 48;", NULL, "syntax error");
}
END_TEST

START_TEST(unknown_names_suggest)
{
    expect_load_error("num_layers = 48;", "num_layayers = 48;", "model.num_layayers",
                      "did you mean 'num_layers'?");
    expect_load_error("gates = {", "gatez = {", "gatez", "did you mean 'gates'?");
}
END_TEST

START_TEST(wrong_types_and_ranges)
{
    expect_load_error("num_layers = 48;", "num_layers = \"48\";", "model.num_layers",
                      "must be an integer, found a string (write it without quotes)");
    expect_load_error("alpha = 0.05;", "alpha = 0.9;", "gates.alpha", "out of range");
    expect_load_error("gpu = \"H100\";", "gpu = \"H101\";", "hardware.gpu",
                      "did you mean \"H100\"?");
    expect_load_error("routing = \"forced\";", "routing = \"random\";", "data.routing",
                      "is not one of forced|natural");
    expect_load_error("steps = 50;", "steps = 40;", "windows.validate.steps", "between 50");
    expect_load_error("loss_tolerance = 0.02;",
                      "loss_tolerance = 0.02;\n  memory_uncertainty = 1.5;",
                      "gates.memory_uncertainty", "out of range");
}
END_TEST

/* gates.memory_uncertainty: 0.15 unless given; it is part of the fingerprint
 * (it decides which configs the fit phase probes). */
START_TEST(memory_uncertainty_default_and_given)
{
    char *base = example_text();
    char *given = edit(base, "loss_tolerance = 0.02;",
                       "loss_tolerance = 0.02;\n  memory_uncertainty = 0.25;");
    char *same = edit(base, "loss_tolerance = 0.02;",
                      "loss_tolerance = 0.02;\n  memory_uncertainty = 0.15;");
    mt_diag *d = mt_diag_new();
    mt_contract *a = mt_contract_load_string(base, "a", d);
    mt_contract *g = mt_contract_load_string(given, "g", d);
    mt_contract *s = mt_contract_load_string(same, "s", d);
    ck_assert_uint_eq(mt_diag_count(d), 0);
    ck_assert_double_eq_tol(a->memory_uncertainty, 0.15, 1e-12);
    ck_assert_double_eq_tol(g->memory_uncertainty, 0.25, 1e-12);
    ck_assert_str_ne(a->fingerprint, g->fingerprint);
    ck_assert_str_eq(a->fingerprint, s->fingerprint);
    mt_contract_destroy(&a), mt_contract_destroy(&g), mt_contract_destroy(&s);
    mt_diag_destroy(&d);
    free(base), free(given), free(same);
}
END_TEST

START_TEST(missing_required)
{
    expect_load_error("  vocab_size = 151936;\n", "", "model.vocab_size",
                      "missing required setting 'model.vocab_size'");
    expect_load_error("version = 1;", "version = 2;", "version", "version = 1");
}
END_TEST

START_TEST(semantic_errors)
{
    expect_load_error("labels = [\"training_equivalent\", \"benchmark_only\"];",
                      "labels = [\"training_equivalent\"];", "labels",
                      "makes every result benchmark-only");
    expect_load_error("template = [\"{sim}\", \"{args}\"];", "template = [\"{sim}\"];",
                      "launch.template", "add \"{args}\"");
    expect_load_error("screen = { steps = 20;", "screen = { steps = 12;", "windows.screen.steps",
                      "raise steps");
    expect_load_error("moe_router_topk = 8;", "moe_router_topk = 800;", "model.moe_router_topk",
                      "exceeds num_experts");
    expect_load_error("gpus_per_node = 8;", "gpus_per_node = 16;", "hardware.gpus_per_node",
                      "at most 8 GPUs in one NVLink domain");
    expect_load_error("micro_batch_size = [1, 2];", "micro_batch_size = [1, 1];",
                      "space.micro_batch_size", "lists \"1\" twice");
    expect_load_error("micro_batch_size = [1, 2];", "micro_batch_size = [];",
                      "space.micro_batch_size", "is empty");
}
END_TEST

START_TEST(missing_file)
{
    mt_diag *d = mt_diag_new();
    ck_assert_ptr_null(mt_contract_load("/nonexistent/contract.cfg", d));
    ck_assert(mt_diag_contains(d, "cannot read the contract file"));
    mt_diag_destroy(&d);
}
END_TEST

START_TEST(fingerprint_canonical)
{
    char *base = example_text();
    char *reformatted = edit(base, "  num_layers = 48;", "  # a comment\n  num_layers   =   48 ;");
    char *renamed = edit(base, "name = \"qwen3-30b-a3b-h100x16\";", "name = \"other\";");
    char *changed = edit(base, "global_batch_size = 1024;", "global_batch_size = 512;");
    mt_diag *d = mt_diag_new();
    mt_contract *a = mt_contract_load_string(base, "a", d);
    mt_contract *b = mt_contract_load_string(reformatted, "b", d);
    mt_contract *n = mt_contract_load_string(renamed, "n", d);
    mt_contract *c = mt_contract_load_string(changed, "c", d);
    ck_assert_uint_eq(mt_diag_count(d), 0);
    ck_assert_uint_eq(strlen(a->fingerprint), 64);
    ck_assert_str_eq(a->fingerprint, b->fingerprint);
    ck_assert_str_eq(a->fingerprint, n->fingerprint);
    ck_assert_str_ne(a->fingerprint, c->fingerprint);
    ck_assert_ptr_nonnull(strstr(a->canonical, "batch.global_batch_size=1024\n"));
    /* defaults are written out, so an explicit default fingerprints the same */
    ck_assert_ptr_nonnull(strstr(a->canonical, "launch.launcher=local\n"));
    mt_contract_destroy(&a), mt_contract_destroy(&b), mt_contract_destroy(&n);
    mt_contract_destroy(&c);
    mt_diag_destroy(&d);
    free(base), free(reformatted), free(renamed), free(changed);
}
END_TEST

/* Errors that need the plugins: knob names and values in base and space. */
static void expect_open_error(const char *from, const char *to, const char *field,
                              const char *needle)
{
    char *base = example_text(), *text = edit(base, from, to);
    char *path = tk_write_temp("contract", text);
    mt_diag *d = mt_diag_new();
    tk *t = tk_open_path(path, d);
    if (!t)
        mt_diag_print(d, stderr);
    ck_assert_ptr_nonnull(t);
    if (!mt_diag_contains(d, needle))
        mt_diag_print(d, stderr);
    ck_assert_msg(mt_diag_contains(d, needle), "no error containing \"%s\"", needle);
    ck_assert_msg(mt_diag_contains(d, field), "no error on field %s", field);
    ck_assert_int_gt(mt_diag_at(d, 0)->line, 0);
    tk_close(&t);
    mt_diag_destroy(&d);
    unlink(path);
    free(path), free(text), free(base);
}

START_TEST(knob_errors)
{
    expect_open_error("  micro_batch_size = 1;", "  micro_batch_sise = 1;",
                      "base.micro_batch_sise", "did you mean 'micro_batch_size'?");
    expect_open_error("  moe_token_dispatcher_type = \"alltoall\";",
                      "  moe_token_dispatcher_type = \"all2all\";", "base.moe_token_dispatcher_type",
                      "legal values: allgather, alltoall, flex");
    expect_open_error("  micro_batch_size = 1;", "  micro_batch_size = 1;\n  num_layers = 24;",
                      "base.num_layers", "move it there");
    expect_open_error("  template = [\"{sim}\", \"{args}\"];",
                      "  template = [\"{sim}\", \"{args}\"];\n  env = { CUDA_DEVICE_MAX_CONNECTIONS = \"1\"; };",
                      "launch.env.CUDA_DEVICE_MAX_CONNECTIONS", "is a knob; set it in base");
    expect_open_error("  micro_batch_size = [1, 2];", "  micro_batch_size = [\"1\", \"x\"];",
                      "space.micro_batch_size", "needs a non-negative integer");
}
END_TEST

/* Audits against the real plugins. */
/* The example with from replaced by to, and then from2 by to2 when given. */
static mt_diag *audit2(const char *from, const char *to, const char *from2, const char *to2,
                       int which)
{
    char *base = example_text(), *text = edit(base, from, to);
    char *path = tk_write_temp("audit", text);
    mt_diag *d = mt_diag_new(), *load = mt_diag_new();
    tk *t;
    if (from2) {
        char *once = text;
        text = edit(once, from2, to2);
        free(once);
        free(path);
        path = tk_write_temp("audit", text);
    }
    t = tk_open_path(path, load);
    ck_assert_uint_eq(mt_diag_count(load), 0);
    if (which == 0)
        mt_audit_windows(t->contract, t->cfg, d);
    else if (which == 1)
        mt_audit_base(t->reg, t->contract, t->cfg, d);
    else
        mt_audit_space(t->reg, t->contract, t->cfg, d);
    tk_close(&t);
    mt_diag_destroy(&load);
    unlink(path);
    free(path), free(text), free(base);
    return d;
}

static mt_diag *audit(const char *from, const char *to, int which)
{
    return audit2(from, to, NULL, NULL, which);
}

START_TEST(windows_clean_example)
{
    mt_diag *d = audit("eval = 0;", "eval = 0;", 0);
    ck_assert_uint_eq(mt_diag_count(d), 0);
    mt_diag_destroy(&d);
}
END_TEST

START_TEST(window_contains_eval_save)
{
    mt_diag *d = audit("eval = 0;", "eval = 15;", 0);
    ck_assert(mt_diag_contains(d, "the screen timing window (iterations 11-20) contains iteration 15, an evaluation step"));
    ck_assert_int_gt(mt_diag_at(d, 0)->line, 0);
    mt_diag_destroy(&d);
    d = audit("save = 0;", "save = 45;", 0);
    ck_assert(mt_diag_contains(d, "the validate timing window (iterations 41-50) contains iteration 45, a checkpoint save"));
    mt_diag_destroy(&d);
    /* an interval whose multiples miss both windows is fine */
    d = audit("eval = 0;", "eval = 1000;", 0);
    ck_assert_uint_eq(mt_diag_count(d), 0);
    mt_diag_destroy(&d);
}
END_TEST

START_TEST(window_contains_graph_capture)
{
    /* graphs are in the space; warm-up 12 captures at iteration 13, inside 11-20 */
    mt_diag *d = audit("  micro_batch_size = 1;", "  micro_batch_size = 1;\n  cuda_graph_warmup_steps = 12;", 0);
    ck_assert(mt_diag_contains(d, "contains iteration 13, where CUDA graphs are captured"));
    mt_diag_destroy(&d);
}
END_TEST

START_TEST(window_contains_manual_gc)
{
    mt_diag *d = audit("manual_gc = [false, true];", "manual_gc = [false, true];\n  manual_gc_interval = [0, 7];", 0);
    ck_assert(mt_diag_contains(d, "iteration 14, a manual garbage-collection step (every 7 steps)"));
    mt_diag_destroy(&d);
}
END_TEST

START_TEST(illegal_base)
{
    mt_diag *d = audit("  expert_model_parallel_size = 16;", "  expert_model_parallel_size = 3;", 1);
    ck_assert_uint_gt(mt_diag_count(d), 0);
    ck_assert(mt_diag_contains(d, "the base configuration is illegal"));
    ck_assert(mt_diag_contains(d, "base.expert_model_parallel_size"));
    ck_assert_int_gt(mt_diag_at(d, 0)->line, 0);
    mt_diag_destroy(&d);
}
END_TEST

START_TEST(space_value_never_legal)
{
    /* the example's space has 82944 configs: a capped search, which finds
     * no config for 3 and says so, never "every" */
    mt_diag *d = audit("  micro_batch_size = [1, 2];", "  micro_batch_size = [1, 3];", 2);
    ck_assert_msg(mt_diag_contains(d, "value \"3\": no legal config found in "),
                  "%s", mt_diag_count(d) ? mt_diag_at(d, 0)->message : "no problem reported");
    ck_assert(mt_diag_contains(d, "the search is capped"));
    ck_assert(!mt_diag_contains(d, "every"));
    ck_assert(mt_diag_contains(d, "space.micro_batch_size"));
    mt_diag_destroy(&d);
    /* the example's own space is sound */
    d = audit("  micro_batch_size = [1, 2];", "  micro_batch_size = [1, 2];", 2);
    if (mt_diag_count(d))
        mt_diag_print(d, stderr);
    ck_assert_uint_eq(mt_diag_count(d), 0);
    mt_diag_destroy(&d);
}
END_TEST

/* Issue 18, messages: an integer past int64 in a contract file is shown as
 * written, not as the -1 libconfig reads it as, in a core field and in a
 * knob of base or space. */
START_TEST(huge_integer_is_shown_as_written)
{
    static const char *const cases[][3] = {
        {"eval = 0;", "eval = 99999999999999999999;",
         "'intervals.eval' = 99999999999999999999 is out of range"},
        {"  micro_batch_size = 1;", "  micro_batch_size = 99999999999999999999;",
         "micro_batch_size = 99999999999999999999 is out of range"},
        {"  micro_batch_size = [1, 2];", "  micro_batch_size = [1, 99999999999999999999];",
         "micro_batch_size = 99999999999999999999 is out of range"},
    };
    size_t k;
    for (k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char *base = example_text(), *text = edit(base, cases[k][0], cases[k][1]);
        char *path = tk_write_temp("huge", text);
        mt_diag *d = mt_diag_new();
        tk *t = tk_open_path(path, d);
        if (!mt_diag_contains(d, cases[k][2]))
            mt_diag_print(d, stderr);
        ck_assert_msg(mt_diag_contains(d, cases[k][2]), "case %zu", k);
        ck_assert(!mt_diag_contains(d, "-1"));
        tk_close(&t);
        mt_diag_destroy(&d);
        unlink(path);
        free(path), free(text), free(base);
    }
}
END_TEST

/* Issue 18, messages: a value with a zero-width space (U+200B), or a
 * control byte, looks right when printed raw; the message shows it
 * escaped. */
START_TEST(invisible_characters_are_shown_escaped)
{
    static const char *const cases[][3] = {
        {"  moe_token_dispatcher_type = \"alltoall\";",
         "  moe_token_dispatcher_type = \"alltoall\xe2\x80\x8b\";",
         "moe_token_dispatcher_type does not take \"alltoall\\u200b\""},
        {"  moe_token_dispatcher_type = \"alltoall\";",
         "  moe_token_dispatcher_type = \"all\x1b[0mtoall\";",
         "does not take \"all\\x1b[0mtoall\""},
        {"  moe_token_dispatcher_type = \"alltoall\";",
         "  moe_token_dispatcher_type = \"alltoall\xc2\xa0\";",
         "does not take \"alltoall\\u00a0\""},
    };
    size_t k;
    for (k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char *base = example_text(), *text = edit(base, cases[k][0], cases[k][1]);
        char *path = tk_write_temp("odd", text);
        mt_diag *d = mt_diag_new();
        tk *t = tk_open_path(path, d);
        if (!mt_diag_contains(d, cases[k][2]))
            mt_diag_print(d, stderr);
        ck_assert_msg(mt_diag_contains(d, cases[k][2]), "case %zu", k);
        tk_close(&t);
        mt_diag_destroy(&d);
        unlink(path);
        free(path), free(text), free(base);
    }
    /* visible UTF-8 stays as it is */
    {
        mt_diag *d = mt_diag_new();
        mt_diag_add(d, NULL, 0, NULL, "45 \xc2\xb5s \xe2\x80\x94 2\xc3\x97 faster");
        ck_assert_str_eq(mt_diag_at(d, 0)->message, "45 \xc2\xb5s \xe2\x80\x94 2\xc3\x97 faster");
        mt_diag_destroy(&d);
    }
}
END_TEST

/* The example's space, to be replaced whole. */
#define EXAMPLE_SPACE                                                                              \
    "  tensor_model_parallel_size = [1, 2];\n"                                                     \
    "  expert_model_parallel_size = [8, 16];\n"                                                    \
    "  micro_batch_size = [1, 2];\n"                                                               \
    "  moe_token_dispatcher_type = [\"alltoall\", \"flex\"];\n"                                    \
    "  moe_flex_dispatcher_backend = [\"deepep\", \"hybridep\"];\n"                                \
    "  moe_flex_dispatcher_num_sms = [24, 32];\n"                                                  \
    "  moe_permute_fusion = [false, true];\n"                                                      \
    "  overlap_moe_expert_parallel_comm = [false, true];\n"                                        \
    "  delay_wgrad_compute = [false, true];\n"                                                     \
    "  cuda_graph_impl = [\"none\", \"transformer_engine\"];\n"                                    \
    "  cuda_graph_modules = [\"\", \"moe_router moe_preprocess\", \"attn moe_router "             \
    "moe_preprocess\"];\n"                                                                         \
    "  recompute_granularity = [\"none\", \"selective\"];\n"                                       \
    "  recompute_modules = [\"\", \"moe_act\", \"core_attn\"];\n"                                  \
    "  manual_gc = [false, true];\n"

/* Issue 18, item 14: a 20-knob space of up to 10 values each (1.4e12
 * configs).  Values that need one change of another knob (delay_wgrad
 * needs EP overlap; a flex backend needs the flex dispatcher) or two (full
 * recompute needs a method and a layer count) are found from the base; the
 * one value no config can use (ETP 2: this model, the example without
 * --disable-bias-linear, has biases, and MoE bias needs ETP 1) is
 * reported as "no legal config found in N tried", never "every config" of
 * a space that was not walked; and it takes about a second, not minutes. */
START_TEST(big_space_audit_starts_from_the_base_and_never_claims_every)
{
    struct timespec t0, t1;
    mt_diag *d;
    double secs;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    d = audit2(EXAMPLE_SPACE,
              "  tensor_model_parallel_size = [1, 2, 4];\n"
              "  expert_model_parallel_size = [1, 2, 4, 8, 16];\n"
              "  expert_tensor_parallel_size = [1, 2];\n"
              "  micro_batch_size = [1, 2, 4, 8];\n"
              "  moe_token_dispatcher_type = [\"alltoall\", \"flex\", \"allgather\"];\n"
              "  moe_flex_dispatcher_backend = [\"deepep\", \"hybridep\"];\n"
              "  moe_flex_dispatcher_num_sms = [8, 16, 24, 32, 40, 48, 56, 64, 72, 80];\n"
              "  moe_permute_fusion = [false, true];\n"
              "  overlap_moe_expert_parallel_comm = [false, true];\n"
              "  delay_wgrad_compute = [false, true];\n"
              "  cuda_graph_impl = [\"none\", \"local\", \"transformer_engine\"];\n"
              "  cuda_graph_modules = [\"\", \"moe_router moe_preprocess\", \"attn moe_router "
              "moe_preprocess\", \"attn\", \"attn mlp\"];\n"
              "  cuda_graph_warmup_steps = [1, 2, 3, 4, 5, 6, 7, 8, 9];\n"
              "  recompute_granularity = [\"none\", \"selective\", \"full\"];\n"
              "  recompute_method = [\"uniform\", \"block\"];\n"
              "  recompute_num_layers = [1, 2, 3, 4, 5, 6, 8, 12, 16, 24];\n"
              "  recompute_modules = [\"\", \"moe_act\", \"core_attn\", \"layernorm\", \"moe_act "
              "core_attn\"];\n"
              "  manual_gc = [false, true];\n"
              "  manual_gc_interval = [0, 100, 200, 300, 400, 500, 600, 700, 800, 900];\n"
              "  optimizer_offload_fraction = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, "
              "1.0];\n",
              "\"--swiglu\", \"--disable-bias-linear\", ", "\"--swiglu\", ", 2);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    fprintf(stderr, "test_contract: the 20-knob space audit took %.2f s\n", secs);
    if (mt_diag_count(d) != 1)
        mt_diag_print(d, stderr);
    ck_assert_uint_eq(mt_diag_count(d), 1);
    ck_assert_str_eq(mt_diag_at(d, 0)->field, "space.expert_tensor_parallel_size");
    ck_assert_msg(mt_diag_contains(d, "value \"2\": no legal config found in ") &&
                      mt_diag_contains(d, "the search is capped") &&
                      mt_diag_contains(d, "1397230560000 configs"),
                  "%s", mt_diag_at(d, 0)->message);
    ck_assert(!mt_diag_contains(d, "every"));
    /* generous for a loaded machine; the capped grid search it replaces
     * took minutes on such spaces */
    ck_assert_msg(secs < 30, "%.1f s", secs);
    mt_diag_destroy(&d);
    /* a space small enough to walk whole may say "every" */
    d = audit(EXAMPLE_SPACE, "  micro_batch_size = [1, 3];\n  manual_gc = [false, true];\n", 2);
    ck_assert_msg(mt_diag_contains(d, "value \"3\" is illegal in every config of the declared "
                                      "space (2 tried)"),
                  "%s", mt_diag_count(d) ? mt_diag_at(d, 0)->message : "no problem reported");
    mt_diag_destroy(&d);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("contract");
    TCase *tc = tcase_create("errors");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, syntax_error);
    tcase_add_test(tc, unknown_names_suggest);
    tcase_add_test(tc, wrong_types_and_ranges);
    tcase_add_test(tc, memory_uncertainty_default_and_given);
    tcase_add_test(tc, missing_required);
    tcase_add_test(tc, semantic_errors);
    tcase_add_test(tc, missing_file);
    tcase_add_test(tc, fingerprint_canonical);
    tcase_add_test(tc, knob_errors);
    tcase_add_test(tc, windows_clean_example);
    tcase_add_test(tc, window_contains_eval_save);
    tcase_add_test(tc, window_contains_graph_capture);
    tcase_add_test(tc, window_contains_manual_gc);
    tcase_add_test(tc, illegal_base);
    tcase_add_test(tc, space_value_never_legal);
    tcase_add_test(tc, huge_integer_is_shown_as_written);
    tcase_add_test(tc, invisible_characters_are_shown_escaped);
    tcase_add_test(tc, big_space_audit_starts_from_the_base_and_never_claims_every);
    suite_add_tcase(s, tc);
    return tk_run(s);
}
