/*
 * cmd_workers.c - the `moetune` commands of the workers floor: measure,
 * profile, worker, keygen, calibration (workers/cmd_workers.h).
 */
#include "cmd_workers.h"

#include "cli.h"
#include "keys.h"
#include "measure.h"
#include "profile.h"
#include "simcalib.h"
#include "store.h"
#include "trace.h"
#include "worker.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int mt_cmd_calibration(int argc, char **argv)
{
    int bad, fit = 0;
    const mt_opt opts[] = {{"--fit", NULL, NULL, MT_OPT_FLAG, &fit, 0, 0, NULL,
                            "refit the fitted constants first (on at most half the points)"},
                           {NULL}};
    mt_cmd c = {"calibration",
                "usage: moetune calibration [--fit]\n"
                "  the simulator against the published numbers\n",
                opts, NULL, 0, 0, NULL, NULL};
    if ((bad = mt_cli_parse(&c, argc, argv, 2)))
        return bad == MT_CLI_HELP ? 0 : bad;
    if (fit) {
        printf("refitting the fitted constants (write them into workers/sim/simconst.c):\n");
        sim_calibration_fit(stdout, 40);
    }
    bad = sim_calibration_table(stdout);
    printf("\nqualitative landscape:\n");
    bad += sim_landscape_check(stdout);
    return bad ? 1 : 0;
}

int mt_cmd_measure(int argc, char **argv)
{
    mt_session s;
    const char *dir = NULL, *kind = "screen", *pos[1] = {NULL};
    char simbin[PATH_MAX], rundir[PATH_MAX];
    mt_cli_list sets = {0};
    size_t i;
    int replicate = 0, rc;
    mt_diag *d;
    mt_store *st;
    mt_measure m;
    mt_measure_spec spec;
    const mt_opt opts[] = {
        {"--dir", NULL, "DIR", MT_OPT_STR, &dir, 0, 0, NULL, "the store and the run's logs"},
        {"--kind", NULL, "screen|validate", MT_OPT_STR, &kind, 0, 0, NULL,
         "the contract's screen or validation window (default screen)"},
        {"--replicate", NULL, "N", MT_OPT_INT, &replicate, 0, 0, NULL, "the replicate number"},
        {"--set", NULL, "KNOB=VALUE", MT_OPT_LIST, &sets, 0, 0, NULL, "change the base config"},
        {NULL}};
    mt_cmd c = {"measure",
                "usage: moetune measure CONTRACT --dir DIR [--kind screen|validate] [--replicate N]\n"
                "       [--set k=v]...\n"
                "  run one measurement of the config, parse, verify, store\n",
                opts, pos, 1, 1, "CONTRACT", NULL};
    if ((rc = mt_cli_parse(&c, argc, argv, 2)))
        return rc == MT_CLI_HELP ? 0 : rc;
    if (!dir || (strcmp(kind, "screen") && strcmp(kind, "validate"))) {
        fprintf(stderr, "moetune measure: needs --dir DIR, and --kind screen or validate\n");
        mt_cli_list_clear(&sets);
        return MT_EXIT_USAGE;
    }
    if ((rc = mt_session_open_legal(&s, pos[0], &sets)))
        return rc;
    d = mt_diag_new();
    st = mt_store_open(dir, s.contract, d);
    if (!st) {
        mt_diag_print(d, stderr);
        mt_diag_destroy(&d);
        mt_session_clear(&s);
        return MT_EXIT_BAD_INPUT;
    }
    mt_cli_sim_path(simbin, sizeof simbin);
    {
        char id[17];
        mt_store_run prev;
        mt_measure_config_id(s.contract, s.cfg, kind, id);
        memset(&prev, 0, sizeof prev);
        if (mt_store_find_run(st, id, kind, replicate, -1, &prev, d) == 1 &&
            strcmp(prev.outcome, "infra")) {
            printf("already measured: config %s %s replicate %d: %s (run %lld); not run again\n",
                   id, kind, replicate, prev.outcome, (long long)prev.id);
            mt_store_run_clear(&prev);
            mt_store_destroy(&st);
            mt_diag_destroy(&d);
            mt_session_clear(&s);
            return 0;
        }
        mt_store_run_clear(&prev);
        snprintf(rundir, sizeof rundir, "%s/runs", dir);
        mkdir(rundir, 0755);
        snprintf(rundir, sizeof rundir, "%s/runs/%s-%s-r%d", dir, id, kind, replicate);
    }
    memset(&spec, 0, sizeof spec);
    spec.contract = s.contract;
    spec.reg = s.reg;
    spec.config = s.cfg;
    spec.kind = kind;
    spec.replicate = replicate;
    spec.run_dir = rundir;
    spec.sim_path = simbin;
    rc = mt_measure_run(&spec, st, &m, d);
    mt_diag_print(d, stderr);
    if (rc == 0) {
        printf("config %s, %s replicate %d: %s\n", m.config_id, kind, replicate,
               mt_outcome_name(m.outcome));
        printf("  evidence: %s\n", m.evidence);
        printf("  window %d-%d: %zu iterations, median %.1f ms/step, %.1f TFLOP/s/GPU\n", m.first,
               m.last, m.n_window, m.median_step_ms, m.median_tflops);
        printf("  loss %s; skipped %ld, NaN %ld\n", m.loss_finite ? "finite" : "NOT finite",
               m.skipped, m.nan);
        printf("  hottest GPU: %.2f GiB on rank %d (from %s)\n", m.peak_bytes / 1073741824.0,
               m.peak_rank, m.peak_source);
        if (m.sim_seconds > 0)
            printf("  simulated time %.0f s\n", m.sim_seconds);
        for (i = 0; i < m.verdicts.n; i++)
            printf("  verify %-34s %-11s %s\n", m.verdicts.v[i].knob,
                   m.verdicts.v[i].verdict == MT_VERDICT_APPLIED       ? "applied"
                   : m.verdicts.v[i].verdict == MT_VERDICT_NOT_APPLIED ? "NOT APPLIED"
                                                                       : "unknown",
                   m.verdicts.v[i].evidence);
        printf("  stored as run %lld in %s; logs in %s\n", (long long)m.run_id, dir, rundir);
        rc = m.outcome == MT_OUTCOME_OK ? 0 : 1;
    } else {
        rc = 1;
    }
    mt_measure_clear(&m); /* a failed store keeps the parsed log and verdicts too */
    mt_store_destroy(&st);
    mt_diag_destroy(&d);
    mt_session_clear(&s);
    return rc;
}

#define PROFILE_USAGE                                                                       \
    "usage: moetune profile TRACE [--window A:B] [--device N] [--json] [--compare TRACE2]\n"  \
    "                       [--contract CONTRACT] [--class CLASS:PATTERN]... [--bubble SHARE]\n" \
    "                       [--gap-us US]\n"

/* Opens path, applies the kernel-class rules (contract's first, then the
 * command line's) and builds its profile.  0 or an exit code. */
static int profile_one(const char *path, const mt_contract *c, const char *const *classes,
                       size_t nclasses,
                       const mt_profile_opts *o, mt_profile *p, mt_diag *d)
{
    mt_trace *t = mt_trace_open(path, d);
    size_t i;
    int rc = 0;
    if (!t)
        return MT_EXIT_BAD_INPUT;
    for (i = 0; c && i < c->n_trace_classes && !rc; i++)
        rc = mt_trace_add_class(t, c->trace_classes[i], d);
    for (i = 0; i < nclasses && !rc; i++)
        rc = mt_trace_add_class(t, classes[i], d);
    if (!rc)
        rc = mt_profile_build(t, path, o, p, d);
    mt_trace_destroy(&t);
    return rc ? MT_EXIT_BAD_INPUT : 0;
}

int mt_cmd_profile(int argc, char **argv)
{
    mt_diag *d;
    mt_contract *c = NULL;
    mt_profile pa, pb;
    mt_profile_opts o;
    const char *compare = NULL, *contract = NULL, *window = NULL, *pos[1] = {NULL};
    mt_cli_list classes = {0};
    int json = 0, rc;
    const mt_opt opts[] = {
        {"--window", NULL, "A:B", MT_OPT_STR, &window, 0, 0, NULL,
         "the steps A to B (the trace's ProfilerStep marks)"},
        {"--device", NULL, "N", MT_OPT_INT, &o.device, 0, 0, NULL, "the GPU whose activity counts"},
        {"--json", NULL, NULL, MT_OPT_FLAG, &json, 0, 0, NULL, "as JSON"},
        {"--compare", NULL, "TRACE2", MT_OPT_STR, &compare, 0, 0, NULL, "and the change to TRACE2"},
        {"--contract", NULL, "CONTRACT", MT_OPT_STR, &contract, 0, 0, NULL,
         "its kernel classes, profile rules and memory headroom"},
        {"--class", NULL, "CLASS:PATTERN", MT_OPT_LIST, &classes, 0, 0, NULL,
         "a kernel-class rule, after the contract's"},
        {"--bubble", NULL, "SHARE", MT_OPT_DOUBLE, &o.bubble_share, 0, 0, NULL,
         "the pipeline bubble's share of the step, 0 to 1"},
        {"--gap-us", NULL, "US", MT_OPT_DOUBLE, &o.rules.gap_us, 0, 1, NULL,
         "the shortest idle gap that counts (microseconds)"},
        {NULL}};
    mt_cmd cmd = {"profile", PROFILE_USAGE, opts, pos, 1, 1, "TRACE", NULL};
    mt_profile_opts_init(&o);
    memset(&pa, 0, sizeof pa);
    memset(&pb, 0, sizeof pb);
    if ((rc = mt_cli_parse(&cmd, argc, argv, 2)))
        return rc == MT_CLI_HELP ? 0 : rc;
    if (window &&
        (sscanf(window, "%d:%d", &o.first, &o.last) != 2 || o.first < 0 || o.last < o.first)) {
        fprintf(stderr, "moetune profile: --window %s: not a valid value\n" PROFILE_USAGE, window);
        mt_cli_list_clear(&classes);
        return MT_EXIT_USAGE;
    }
    if (!(o.bubble_share < 1)) {
        fprintf(stderr, "moetune profile: --bubble %g: write a share below 1\n" PROFILE_USAGE,
                o.bubble_share);
        mt_cli_list_clear(&classes);
        return MT_EXIT_USAGE;
    }
    o.has_steps = window != NULL;
    d = mt_diag_new();
    if (contract) {
        double gap = o.rules.gap_us;
        if (!(c = mt_contract_load(contract, d))) {
            mt_diag_print(d, stderr);
            mt_diag_destroy(&d);
            mt_cli_list_clear(&classes);
            return MT_EXIT_BAD_INPUT;
        }
        o.rules = c->profile;
        if (gap != 20)
            o.rules.gap_us = gap; /* the command line wins */
        o.headroom_gate = c->memory_headroom;
    }
    rc = profile_one(pos[0], c, classes.v, classes.n, &o, &pa, d);
    if (!rc && compare)
        rc = profile_one(compare, c, classes.v, classes.n, &o, &pb, d);
    if (rc)
        mt_diag_print(d, stderr);
    else if (compare)
        mt_profile_compare(&pa, &pb, stdout, json);
    else
        mt_profile_print(&pa, stdout, json);
    mt_profile_clear(&pa);
    mt_profile_clear(&pb);
    mt_contract_destroy(&c);
    mt_diag_destroy(&d);
    mt_cli_list_clear(&classes);
    return rc;
}

/* moetune worker: a ZeroMQ worker (workers/PROTOCOL.md). */
#define WORKER_USAGE                                                                         \
    "usage: moetune worker --connect tcp://HOST:PORT [--name NAME] [--dir DIR]\n"           \
    "       [--allow PROGRAM]... [--key DIR/NAME --server-key FILE]\n"                       \
    "       [--gpus N] [--gpu-type T] [--nodes N] [--launchers local,srun]\n"                \
    "       [--trust-plugin-path] [--plugin-timeout S]\n"                                    \
    "  a ZeroMQ worker that runs a tune's jobs on this node (workers/PROTOCOL.md)\n"

int mt_cmd_worker(int argc, char **argv)
{
    mt_worker_opts o;
    mt_cli_list allow = {0};
    const char *key = NULL;
    char simbin[PATH_MAX], keydir[PATH_MAX] = "", *slash;
    int rc;
    const mt_opt opts[] = {
        {"--connect", NULL, "tcp://HOST:PORT", MT_OPT_STR, &o.connect, 0, 0, NULL,
         "the coordinator (a tune's --workers)"},
        {"--name", NULL, "NAME", MT_OPT_STR, &o.name, 0, 0, NULL, "this worker's name (host-pid)"},
        {"--dir", NULL, "DIR", MT_OPT_STR, &o.dir, 0, 0, NULL,
         "work directory: stores, run logs, contracts (moetune-worker)"},
        {"--allow", NULL, "PROGRAM", MT_OPT_LIST, &allow, 0, 0, NULL,
         "a program jobs may run (default: the simulator only)"},
        {"--key", NULL, "DIR/NAME", MT_OPT_STR, &key, 0, 0, NULL, "own CURVE keypair DIR/NAME.key"},
        {"--server-key", NULL, "FILE", MT_OPT_STR, &o.server_key, 0, 0, NULL,
         "the coordinator's public key"},
        {"--gpus", NULL, "N", MT_OPT_INT, &o.gpus, 1, 0, NULL, "GPUs per node (8)"},
        {"--gpu-type", NULL, "T", MT_OPT_STR, &o.gpu_type, 0, 0, NULL, "the GPU model"},
        {"--nodes", NULL, "N", MT_OPT_INT, &o.nodes, 1, 0, NULL, "nodes this worker drives (1)"},
        {"--launchers", NULL, "local,srun", MT_OPT_STR, &o.launchers, 0, 0, NULL,
         "the launchers it offers (local)"},
        {"--idle-exit", NULL, "S", MT_OPT_INT, &o.exit_when_idle_s, 0, 0, NULL,
         "exit after S s with no coordinator and no job (0: never)"},
        {"--bench-echo", NULL, NULL, MT_OPT_FLAG, &o.bench_echo, 0, 0, NULL,
         "BENCHMARK ONLY: answer every job at once with a synthetic result, run nothing"},
        {NULL}};
    mt_cmd c = {"worker", WORKER_USAGE, opts, NULL, 0, 0, NULL, NULL};
    memset(&o, 0, sizeof o);
    o.dir = "moetune-worker";
    o.gpus = 8;
    o.nodes = 1;
    o.launchers = "local";
    if ((rc = mt_cli_parse(&c, argc, argv, 2)))
        return rc == MT_CLI_HELP ? 0 : rc;
    if (key) {
        snprintf(keydir, sizeof keydir, "%s", key);
        if (!(slash = strrchr(keydir, '/'))) {
            fprintf(stderr, "moetune worker: --key %s: write DIR/NAME\n", key);
            mt_cli_list_clear(&allow);
            return mt_cli_usage(&c);
        }
        *slash = '\0';
        o.key_dir = keydir;
        o.key_name = slash + 1;
    }
    if (!o.connect) {
        fprintf(stderr, "moetune worker: missing --connect tcp://HOST:PORT\n");
        mt_cli_list_clear(&allow);
        return mt_cli_usage(&c);
    }
    mt_cli_sim_path(simbin, sizeof simbin);
    o.sim_path = simbin;
    if (!allow.n)
        allow.v[allow.n++] = simbin; /* by default: the simulator only */
    o.trust_plugin_path = mt_cli_trust_plugin_path;
    o.allow = allow.v;
    o.n_allow = allow.n;
    rc = mt_worker_main(&o);
    mt_cli_list_clear(&allow);
    return rc;
}

/* moetune keygen DIR NAME [--force]: a CURVE keypair. */
int mt_cmd_keygen(int argc, char **argv)
{
    char pub[64], err[512];
    const char *pos[2] = {NULL, NULL};
    int force = 0, rc;
    const mt_opt opts[] = {
        {"--force", NULL, NULL, MT_OPT_FLAG, &force, 0, 0, NULL, "replace an existing keypair"},
        {NULL}};
    mt_cmd c = {"keygen",
                "usage: moetune keygen DIR NAME [--force]\n"
                "  the coordinator's keys are DIR/coordinator.key and .pub; a worker's\n"
                "  public key goes into the coordinator's DIR/workers/\n",
                opts, pos, 2, 2, "DIR NAME", NULL};
    if ((rc = mt_cli_parse(&c, argc, argv, 2)))
        return rc == MT_CLI_HELP ? 0 : rc;
    mkdir(pos[0], 0700);
    if (mt_keys_generate(pos[0], pos[1], force, pub, err, sizeof err)) {
        fprintf(stderr, "moetune keygen: %s\n", err);
        return MT_EXIT_BAD_INPUT;
    }
    printf("%s/%s.key (secret, 0600) and %s/%s.pub written\n", pos[0], pos[1], pos[0],
           pos[1]);
    return 0;
}
