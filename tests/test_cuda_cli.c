/*
 * test_cuda_cli.c - moetune-cuda-moe as a real child process, on any
 * machine: --help, usage errors (exit 2, the flag named), and the no-GPU
 * path.  CUDA_VISIBLE_DEVICES="" hides every GPU from the CUDA runtime, so
 * the no-GPU cases hold on GPU machines too; the one case that depends on
 * the machine (EP larger than the GPUs present) accepts exactly the two
 * documented outcomes, 68 or 69, each with its own message.
 *
 * Needs MT_CUDA_MOE_BIN (the built program).
 */
#include "moe_args.h"
#include "testkit.h"

#include <check.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef MT_CUDA_MOE_BIN
#error "MT_CUDA_MOE_BIN must name the built moetune-cuda-moe"
#endif

extern char **environ;

typedef struct run {
    int status;
    char *out, *err;
} run;

/* Runs the program with args (NULL-terminated); cvd: CUDA_VISIBLE_DEVICES
 * for the child (NULL: as inherited). */
static run program(const char *cvd, const char *const *args)
{
    char outp[] = "/tmp/moetune-cuda-out-XXXXXX", errp[] = "/tmp/moetune-cuda-err-XXXXXX";
    int fo = mkstemp(outp), fe = mkstemp(errp), st = 0;
    posix_spawn_file_actions_t fa;
    char *argv[40], **env, cvdvar[128];
    size_t i, n = 0, k = 0;
    pid_t pid;
    run r;
    ck_assert(fo >= 0 && fe >= 0);
    argv[0] = (char *)MT_CUDA_MOE_BIN;
    for (i = 0; args[i] && i < 38; i++)
        argv[i + 1] = (char *)args[i];
    argv[i + 1] = NULL;
    while (environ[n])
        n++;
    env = calloc(n + 2, sizeof *env);
    ck_assert_ptr_nonnull(env);
    for (i = 0; i < n; i++)
        if (!cvd || strncmp(environ[i], "CUDA_VISIBLE_DEVICES=", 21))
            env[k++] = environ[i];
    if (cvd) {
        snprintf(cvdvar, sizeof cvdvar, "CUDA_VISIBLE_DEVICES=%s", cvd);
        env[k++] = cvdvar;
    }
    env[k] = NULL;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fo, 1);
    posix_spawn_file_actions_adddup2(&fa, fe, 2);
    ck_assert_int_eq(posix_spawn(&pid, MT_CUDA_MOE_BIN, &fa, NULL, argv, env), 0);
    posix_spawn_file_actions_destroy(&fa);
    free(env);
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    close(fo);
    close(fe);
    ck_assert_msg(WIFEXITED(st), "moetune-cuda-moe died (status 0x%x)", st);
    r.status = WEXITSTATUS(st);
    r.out = tk_slurp(outp);
    r.err = tk_slurp(errp);
    ck_assert(r.out && r.err);
    unlink(outp);
    unlink(errp);
    return r;
}

static void done(run *r)
{
    free(r->out);
    free(r->err);
}

START_TEST(help_exits_zero)
{
    const char *args[] = {"--help", NULL};
    run r = program(NULL, args);
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "usage: moetune-cuda-moe"));
    ck_assert_ptr_nonnull(strstr(r.out, "69 no CUDA GPU visible"));
    done(&r);
}
END_TEST

START_TEST(usage_errors_exit_two)
{
    static const struct {
        const char *a[8];
        const char *msg;
    } bad[] = {
        {{"--hidden-size", "100", NULL}, "moetune-cuda-moe: --hidden-size 100: must be a multiple"},
        {{"--frobnicate", NULL}, "moetune-cuda-moe: unknown flag --frobnicate"},
        {{"--fp8-format", "hybrid", NULL}, "moetune-cuda-moe: --fp8-format hybrid"},
        {{"--num-experts", "6", "--moe-router-topk", "2", "--expert-model-parallel-size", "4",
          NULL},
         "moetune-cuda-moe: --expert-model-parallel-size 4: does not divide"},
    };
    size_t i;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        run r = program("", bad[i].a);
        ck_assert_msg(r.status == MT_MOE_EXIT_USAGE, "%s: exit %d", bad[i].a[0], r.status);
        ck_assert_msg(strstr(r.err, bad[i].msg) == r.err, "stderr: %s", r.err);
        ck_assert_str_eq(r.out, "");
        done(&r);
    }
}
END_TEST

START_TEST(no_gpu_exit_69)
{
    const char *args[] = {"--tokens", "256", "--train-iters", "2", NULL};
    run r = program("", args);
    ck_assert_int_eq(r.status, MT_MOE_EXIT_NO_GPU);
    ck_assert_msg(strstr(r.err, "moetune-cuda-moe: no CUDA GPU is visible (cudaGetDeviceCount: ") ==
                      r.err,
                  "stderr: %s", r.err);
    ck_assert_ptr_nonnull(strstr(r.err, "CUDA_VISIBLE_DEVICES=)"));
    ck_assert_str_eq(r.out, ""); /* no iteration line pretends anything ran */
    done(&r);
}
END_TEST

START_TEST(no_gpu_check_skips_77)
{
    const char *args[] = {
        "--check", "--tokens",      "64", "--hidden-size",     "128", "--moe-ffn-hidden-size",
        "64",      "--num-experts", "8",  "--moe-router-topk", "2",   NULL};
    run r = program("", args);
    ck_assert_int_eq(r.status, MT_MOE_EXIT_SKIP);
    ck_assert_ptr_nonnull(strstr(r.err, "no CUDA GPU is visible"));
    ck_assert_ptr_nonnull(strstr(r.err, "--check skipped"));
    done(&r);
}
END_TEST

/* EP 64: no machine here has 64 GPUs in one node */
/* A contract with the cuda backend, measured by moetune on a machine whose
 * GPUs are hidden: the rendered Megatron command runs unchanged, the program
 * says there is no GPU, and moetune types the run as the node's fault
 * (infra, retried elsewhere), with the program's own words as evidence. */
START_TEST(a_cuda_contract_measured_without_a_gpu_is_infra)
{
    char dir[] = "/tmp/moetune-cuda-measure-XXXXXX", path[8192], contract[1024], outp[1200],
        errp[1200], *out, *err, *slash;
    const char *argv[] = {MT_MOETUNE_BIN, "measure", contract, "--dir", dir, NULL};
    char **env;
    size_t n = 0, i, k = 0;
    posix_spawn_file_actions_t fa;
    pid_t pid;
    int st, fo, fe;
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(contract, sizeof contract, "%s/tests/contracts/qwen3-30b-a3b-h100x8-layer.cfg",
             MT_SOURCE_DIR);
    snprintf(path, sizeof path, "PATH=%s", MT_CUDA_MOE_BIN);
    slash = strrchr(path, '/');
    ck_assert_ptr_nonnull(slash);
    snprintf(slash, sizeof path - (size_t)(slash - path), ":%s",
             getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
    snprintf(outp, sizeof outp, "%s.out", dir);
    snprintf(errp, sizeof errp, "%s.err", dir);
    fo = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    fe = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert(fo >= 0 && fe >= 0);
    while (environ[n])
        n++;
    env = calloc(n + 3, sizeof *env);
    ck_assert_ptr_nonnull(env);
    for (i = 0; i < n; i++)
        if (strncmp(environ[i], "CUDA_VISIBLE_DEVICES=", 21) && strncmp(environ[i], "PATH=", 5))
            env[k++] = environ[i];
    env[k++] = path;
    env[k++] = "CUDA_VISIBLE_DEVICES=";
    env[k] = NULL;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fo, 1);
    posix_spawn_file_actions_adddup2(&fa, fe, 2);
    ck_assert_int_eq(posix_spawn(&pid, MT_MOETUNE_BIN, &fa, NULL, (char **)argv, env), 0);
    posix_spawn_file_actions_destroy(&fa);
    free(env);
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    close(fo);
    close(fe);
    out = tk_slurp(outp);
    err = tk_slurp(errp);
    ck_assert(out && err);
    ck_assert_msg(strstr(out, "screen replicate 0: infra"), "stdout: %s\nstderr: %s", out, err);
    ck_assert_msg(strstr(out, "no CUDA GPU is visible"), "stdout: %s", out);
    free(out);
    free(err);
    unlink(outp);
    unlink(errp);
}
END_TEST

START_TEST(too_few_gpus_68_or_no_gpu_69)
{
    const char *args[] = {"--expert-model-parallel-size", "64", "--num-experts", "64", NULL};
    run r = program(NULL, args);
    if (r.status == MT_MOE_EXIT_NO_GPU)
        ck_assert_ptr_nonnull(strstr(r.err, "moetune-cuda-moe: no CUDA GPU is visible"));
    else {
        ck_assert_msg(r.status == MT_MOE_EXIT_FEW_GPUS, "exit %d: %s", r.status, r.err);
        ck_assert_msg(strstr(r.err, "moetune-cuda-moe: too few GPUs visible: "
                                    "--expert-model-parallel-size 64 needs 64 GPUs in this node, ") == r.err,
                      "stderr: %s", r.err);
    }
    ck_assert_str_eq(r.out, "");
    done(&r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_cli");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, help_exits_zero);
    tcase_add_test(tc, usage_errors_exit_two);
    tcase_add_test(tc, no_gpu_exit_69);
    tcase_add_test(tc, no_gpu_check_skips_77);
    tcase_add_test(tc, too_few_gpus_68_or_no_gpu_69);
    tcase_add_test(tc, a_cuda_contract_measured_without_a_gpu_is_infra);
    suite_add_tcase(s, tc);
    return tk_run(s);
}
