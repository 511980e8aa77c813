/*
 * test_real_templates.c - the launch templates for real programs
 * (examples/contracts/real/): each passes `moetune check` and renders, under
 * `moetune render --format launch`, exactly the argv of its golden file in
 * tests/golden/real/ (srun and its options, pyxis's container options,
 * rank-exec, then python3 pretrain_gpt.py, or torchrun with its rendezvous
 * on the step's first node, or torchrun run_recipe.py --recipe NAME with
 * the Bridge overrides).  And the launch.srun group's refusals, each naming
 * its field.
 */
#include "contract.h"
#include "testkit.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const templates[] = {
    "qwen3-30b-a3b-h100x16-mlm-srun",
    "qwen3-30b-a3b-h100x16-mlm-torchrun",
    "qwen3-30b-a3b-h100x16-bridge-torchrun",
};

START_TEST(real_template_checks_and_renders_its_golden_argv)
{
    char path[1024], golden[1024], *want;
    const char *check[] = {"check", path, NULL};
    const char *render[] = {"render", path, "--format", "launch", NULL};
    tk_proc r;
    snprintf(path, sizeof path, "%s/examples/contracts/real/%s.cfg", MT_SOURCE_DIR,
             templates[_i]);
    snprintf(golden, sizeof golden, "%s/tests/golden/real/%s.launch", MT_SOURCE_DIR,
             templates[_i]);
    r = tk_spawn(MT_MOETUNE_BIN, check);
    ck_assert_msg(r.status == 0, "%s: check exit %d: %s%s", templates[_i], r.status, r.out, r.err);
    ck_assert_ptr_nonnull(strstr(r.out, ": OK\n"));
    tk_proc_free(&r);
    r = tk_spawn(MT_MOETUNE_BIN, render);
    ck_assert_msg(r.status == 0, "%s: render exit %d: %s", templates[_i], r.status, r.err);
    want = tk_slurp(golden);
    ck_assert_ptr_nonnull(want);
    ck_assert_msg(!strcmp(r.out, want), "%s: render --format launch differs from %s:\n%s",
                  templates[_i], golden, r.out);
    free(want);
    tk_proc_free(&r);
}
END_TEST

START_TEST(the_argv_has_each_part_in_place)
{
    /* what the golden files are read for, said once more here */
    char path[1024];
    const char *render[] = {"render", path, "--format", "launch", NULL};
    tk_proc r;
    snprintf(path, sizeof path, "%s/examples/contracts/real/%s.cfg", MT_SOURCE_DIR, templates[1]);
    r = tk_spawn(MT_MOETUNE_BIN, render);
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "srun\n-l\n--nodes=2\n--ntasks-per-node=1\n--ntasks=2\n"
                                        "--gpus-per-node=8\n"));
    ck_assert_ptr_nonnull(strstr(r.out, "--container-image=nvcr.io#nvidia/nemo:25.11\n"
                                        "--container-mounts=/opt/moetune:/opt/moetune,"
                                        "/lustre:/lustre\n"));
    ck_assert_ptr_nonnull(strstr(r.out, "/opt/moetune/bin/moetune\nrank-exec\n--\ntorchrun\n"
                                        "--nnodes=2\n--nproc-per-node=8\n--rdzv-backend=c10d\n"));
    ck_assert_ptr_nonnull(strstr(r.out, "\n/opt/megatron-lm/pretrain_gpt.py\n--num-layers\n48\n"));
    /* the core's logging flags, so the parser has its lines */
    ck_assert_ptr_nonnull(strstr(r.out, "\n--log-interval\n1\n--log-throughput\n"));
    tk_proc_free(&r);
}
END_TEST

/* The demo contract with its launch group replaced. */
static mt_contract *with_launch(const char *launch, mt_diag *d)
{
    char *path = tk_example("qwen3-30b-a3b-h100x16.cfg"), *text = tk_slurp(path), *at, *end;
    char *out;
    mt_contract *c;
    ck_assert_ptr_nonnull(text);
    at = strstr(text, "launch = {");
    ck_assert_ptr_nonnull(at);
    end = strstr(at, "};");
    ck_assert_ptr_nonnull(end);
    out = malloc(strlen(text) + strlen(launch) + 1);
    memcpy(out, text, (size_t)(at - text));
    strcpy(out + (at - text), launch);
    strcat(out, end + 2);
    c = mt_contract_load_string(out, path, d);
    free(out), free(text), free(path);
    return c;
}

static void refused(const char *launch, const char *field, const char *words)
{
    mt_diag *d = mt_diag_new();
    mt_contract *c = with_launch(launch, d);
    size_t i;
    int found = 0;
    ck_assert_msg(c == NULL, "accepted: %s", launch);
    for (i = 0; i < mt_diag_count(d); i++) {
        const mt_diag_item *e = mt_diag_at(d, i);
        if (e->field && !strcmp(e->field, field) && strstr(e->message, words))
            found = 1;
    }
    if (!found)
        mt_diag_print(d, stderr);
    ck_assert_msg(found, "no '%s' error with '%s' for: %s", field, words, launch);
    mt_diag_destroy(&d);
}

START_TEST(launch_srun_refusals_name_the_field)
{
    refused("launch = { backend = \"sim\"; launcher = \"local\"; template = [\"{sim}\", "
            "\"{args}\"]; srun = { rank_env = true; }; };",
            "launch.srun", "apply to the srun launcher only");
    refused("launch = { backend = \"sim\"; launcher = \"srun\"; template = [\"{sim}\", "
            "\"{args}\"]; srun = { rank_envs = true; }; };",
            "launch.srun.rank_envs", "rank_env");
    refused("launch = { backend = \"sim\"; launcher = \"srun\"; template = [\"{sim}\", "
            "\"{args}\"]; srun = { ntasks_per_node = 0; }; };",
            "launch.srun.ntasks_per_node", "from 1 to 4096");
    refused("launch = { backend = \"sim\"; launcher = \"srun\"; template = [\"{sim}\", "
            "\"{args}\"]; srun = { rank_env = \"yes\"; }; };",
            "launch.srun.rank_env", "true or false");
    refused("launch = { backend = \"sim\"; launcher = \"srun\"; template = [\"{sim}\", "
            "\"{args}\"]; srun = { container_mounts = \"/a:/a\"; }; };",
            "launch.srun.container_image", "no container_image");
    refused("launch = { backend = \"sim\"; launcher = \"srun\"; template = [\"{sim}\", "
            "\"{args}\"]; srun = { container_image = \"a b\"; }; };",
            "launch.srun.container_image", "one word");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("real_templates");
    TCase *tc = tcase_create("real_templates");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, real_template_checks_and_renders_its_golden_argv, 0,
                        (int)(sizeof templates / sizeof templates[0]));
    tcase_add_test(tc, the_argv_has_each_part_in_place);
    tcase_add_test(tc, launch_srun_refusals_name_the_field);
    suite_add_tcase(s, tc);
    return tk_run(s);
}
