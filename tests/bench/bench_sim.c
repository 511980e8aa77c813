/*
 * bench_sim.c - speed of the simulator (prints figures; never fails on time).
 *
 *   bench_sim [MOETUNE_SIM_BINARY CONTRACT]
 *
 * 1. In-process evaluation: sim_evaluate over the calibration configs and
 *    their neighbours; target >= 100,000 configs/s.
 * 2. With the sim binary: a 50-step simulated run, process start to exit,
 *    no sleeping, 101 times; target median <= 20 ms.
 */
#include "config.h"
#include "contract.h"
#include "registry.h"
#include "render.h"
#include "simcalib.h"

#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

extern char **environ;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void in_process(void)
{
    sim_cfg cfgs[256];
    size_t n = 0, i;
    const sim_point *p;
    double t0, dt, sink = 0;
    long evals = 0;
    for (p = sim_points(); p->id && n < 64; p++) {
        sim_cfg base;
        int v;
        if (sim_cfg_from_sets(p->sets, &base))
            continue;
        for (v = 0; v < 4 && n < 256; v++) {
            cfgs[n] = base;
            cfgs[n].micro_batch_size = 1 + (v & 1);
            cfgs[n].moe_permute_fusion = v >> 1;
            n++;
        }
    }
    t0 = now();
    do {
        for (i = 0; i < n; i++) {
            sim_breakdown b;
            sim_evaluate(&cfgs[i], &b);
            sink += b.step_s;
            evals++;
        }
        dt = now() - t0;
    } while (dt < 1.0);
    printf("in-process evaluation: %.0f configs/s (%ld evaluations in %.2f s; target >= 100000)%s\n",
           evals / dt, evals, dt, sink > 0 ? "" : " (no result?)");
}

static void process_runs(const char *sim, const char *contract_path)
{
    mt_diag *d = mt_diag_new();
    mt_contract *c = mt_contract_load(contract_path, d);
    mt_registry *r = mt_registry_new();
    mt_kv *cfg;
    mt_rendered out;
    char **argv;
    size_t i;
    enum { RUNS = 101 };
    double times[RUNS];
    int devnull = open("/dev/null", O_WRONLY);
    if (!c) {
        mt_diag_print(d, stderr);
        return;
    }
    mt_registry_load_default(r, NULL, 0, d);
    mt_registry_finish(r, d);
    mt_config_normalize_space(r, c, d);
    cfg = mt_config_base(r, c, d);
    if (!cfg) {
        mt_diag_print(d, stderr);
        return;
    }
    mt_kv_set(cfg, "train_iters", "50");
    mt_rendered_init(&out);
    mt_render(r, c, cfg, MT_DIALECT_MLM, &out, d);
    argv = calloc(out.argv.n + 16, sizeof *argv);
    argv[0] = (char *)sim;
    for (i = 0; i < out.argv.n; i++)
        argv[i + 1] = out.argv.v[i];
    argv[i + 1] = "--sim-nodes";
    argv[i + 2] = "2";
    argv[i + 3] = "--sim-time-scale";
    argv[i + 4] = "0";
    argv[i + 5] = NULL;
    for (i = 0; i < RUNS; i++) {
        posix_spawn_file_actions_t fa;
        pid_t pid;
        int st;
        double t0 = now();
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, devnull, 1);
        posix_spawn_file_actions_adddup2(&fa, devnull, 2);
        if (posix_spawn(&pid, sim, &fa, NULL, argv, environ)) {
            perror("posix_spawn");
            return;
        }
        waitpid(pid, &st, 0);
        times[i] = (now() - t0) * 1000;
        posix_spawn_file_actions_destroy(&fa);
        if (!WIFEXITED(st) || WEXITSTATUS(st)) {
            fprintf(stderr, "run %zu failed (status %d)\n", i, st);
            return;
        }
    }
    qsort(times, RUNS, sizeof times[0], cmp_double);
    printf("50-step simulated run, process start to exit: median %.2f ms, p10 %.2f ms, p90 %.2f "
           "ms over %d runs (target <= 20 ms)\n",
           times[RUNS / 2], times[RUNS / 10], times[RUNS * 9 / 10], RUNS);
    close(devnull);
    free(argv);
    mt_rendered_clear(&out);
    mt_kv_destroy(&cfg);
    mt_registry_destroy(&r);
    mt_contract_destroy(&c);
    mt_diag_destroy(&d);
}

int main(int argc, char **argv)
{
    in_process();
    if (argc > 2)
        process_runs(argv[1], argv[2]);
    return 0;
}
