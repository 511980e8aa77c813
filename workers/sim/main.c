/*
 * main.c - moetune-sim: a simulated Megatron training run.
 *
 *   moetune-sim [Megatron-LM flags] [--sim-* flags]
 *   moetune-sim --bridge [section.field=value overrides] [--sim-* flags]
 *   moetune-sim calibrate [--fit [ROUNDS]]
 *
 * It stands where `torchrun pretrain_gpt.py ...` stands: it parses the
 * command line as Megatron does, rejects illegal configurations as the
 * framework does, prints the start-up lines, then one line per logged
 * iteration with step times from the cost model times the seeded noise, on
 * a simulated clock that starts at the run's start-up time.  Failures (OOM
 * on the hottest GPU, injected NaN, hang, NCCL error, crash) look and exit
 * like the real ones; for test fixtures, a run can also degrade from a step
 * on, scale every step time, or shift its reported loss.  The sim's own
 * figures (simulated wall time, GPU-hours, per-GPU peak memory, trace path)
 * are on lines marked "[sim]".
 */
#include "sim.h"
#include "simargs.h"
#include "simcalib.h"
#include "simlog.h"
#include "simtrace.h"

#include "hardware.h"
#include "kv.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static char outbuf[1 << 16];

/* Sleeps time_scale x the simulated seconds (demos of live progress). */
static void scaled_sleep(const sim_cfg *c, double sim_s)
{
    double s = c->time_scale * sim_s;
    struct timespec ts;
    if (!(s > 0))
        return;
    if (s > 3600)
        s = 3600;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* The rank this process plays.  Under a launcher that starts one task per
 * GPU (srun, or torchrun, or moetune rank-exec in front) each task is one
 * rank: RANK and WORLD_SIZE, else SLURM_PROCID and SLURM_NTASKS; the GPU
 * from LOCAL_RANK, else SLURM_LOCALID.  Without a rank variable (WORLD_SIZE
 * alone only sizes the cluster), or with a world of one, the process
 * speaks for every rank at once: rank = -1. */
typedef struct sim_rank {
    int rank, world, local;
    char host[128];
} sim_rank;

/* A whole number >= lo in variable name, or -1 (unset); -2 malformed. */
static long env_count(const char *name, long lo)
{
    const char *v = getenv(name);
    char *end;
    long x;
    if (!v || !*v)
        return -1;
    x = strtol(v, &end, 10);
    return *end || x < lo || x > 1000000 ? -2 : x;
}

/* 0 (me filled), or an exit status after printing why on stderr. */
static int sim_rank_of_env(const sim_cfg *c, sim_rank *me)
{
    const char *rn = "RANK", *wn = "WORLD_SIZE", *ln = "LOCAL_RANK";
    long r, w, l;
    memset(me, 0, sizeof *me);
    me->rank = -1;
    /* WORLD_SIZE alone is the cluster's size (simargs.c), not a rank */
    if (getenv("RANK") == NULL)
        rn = "SLURM_PROCID", wn = "SLURM_NTASKS";
    if (getenv("LOCAL_RANK") == NULL)
        ln = "SLURM_LOCALID";
    r = env_count(rn, 0), w = env_count(wn, 1), l = env_count(ln, 0);
    if (r == -1)
        return 0;
    if (r < 0 || w < 0) {
        fprintf(stderr,
                "moetune-sim: %s=%s and %s=%s: give both, whole numbers with %s < %s (one process "
                "per rank), or neither (one process for all ranks)\n",
                rn, getenv(rn) ? getenv(rn) : "(unset)", wn, getenv(wn) ? getenv(wn) : "(unset)",
                rn, wn);
        return 2;
    }
    if (w == 1)
        return 0;
    if (r >= w) {
        fprintf(stderr, "moetune-sim: %s=%ld is not below %s=%ld\n", rn, r, wn, w);
        return 2;
    }
    if (w != sim_world(c)) {
        fprintf(stderr,
                "moetune-sim: started as rank %ld of %ld (%s, %s), but the simulated cluster "
                "has %d GPUs (%d nodes x %d): start one task per GPU, or none of these "
                "variables for one process that speaks for every rank\n",
                r, w, rn, wn, sim_world(c), c->nodes, c->gpus_per_node);
        return 2;
    }
    if (l == -2) {
        fprintf(stderr, "moetune-sim: %s=%s is not a whole number\n", ln, getenv(ln));
        return 2;
    }
    me->rank = (int)r;
    me->world = (int)w;
    me->local = l >= 0 ? (int)l : (int)(r % (c->gpus_per_node > 0 ? c->gpus_per_node : 1));
    if (getenv("SLURMD_NODENAME") && *getenv("SLURMD_NODENAME"))
        snprintf(me->host, sizeof me->host, "%s", getenv("SLURMD_NODENAME"));
    else if (gethostname(me->host, sizeof me->host - 1) != 0)
        snprintf(me->host, sizeof me->host, "localhost");
    return 0;
}

/* Waits for the end, as a rank whose peer failed does: blocked in a
 * collective until the launcher (or a watchdog) stops it. */
static void hang_in_collective(void)
{
    fflush(stdout);
    fflush(stderr);
    for (;;)
        pause();
}

static int calibrate(int argc, char **argv)
{
    if (argc > 2 && !strcmp(argv[2], "--fit")) {
        int rounds = argc > 3 ? atoi(argv[3]) : 0;
        sim_calibration_fit(stdout, rounds > 0 ? rounds : 20);
        return 0;
    }
    if (argc > 2) {
        fprintf(stderr, "usage: moetune-sim calibrate [--fit [ROUNDS]]\n");
        return 2;
    }
    return sim_calibration_table(stdout) > 0 ? 1 : 0;
}

/* argparse's usage line for the error message: the sim's own (simargs.c
 * prints it for its errors); here only the shape matters. */
static int is_sim_token(const char *t)
{
    return !strncmp(t, "--sim-", 6) || !strcmp(t, "--bridge") || !strncmp(t, "--bridge=", 9);
}

/* Step 1: the Megatron-LM flags of argv (the --sim-* ones and their values
 * left out) through sim_startup_argv with the stack from the environment
 * and the sim's cluster settings.  0, or the exit status after printing
 * upstream's error: argparse's usage + "error:" line (2), or a traceback
 * ending in "Type: message" (1). */
static int megatron_startup(int argc, char **argv)
{
    sim_cfg tmp;
    sim_opts to;
    sim_stack st;
    sim_verdict v;
    char **mlm, **simv;
    int i, nm = 0, ns = 1, rc = 0;
    const char *e;
    mt_kv *env;
    for (i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help") || !strcmp(argv[i], "--bridge") ||
            !strncmp(argv[i], "--bridge=", 9))
            return 0; /* the usage, or Bridge's overrides: sim_args_parse's part */
    e = getenv("MOETUNE_SIM_BRIDGE");
    if (e && (!strcmp(e, "1") || !strcmp(e, "true")))
        return 0;
    mlm = calloc((size_t)argc + 1, sizeof *mlm);
    simv = calloc((size_t)argc + 1, sizeof *simv);
    if (!mlm || !simv) {
        free(mlm);
        free(simv);
        return 1;
    }
    simv[0] = argv[0];
    for (i = 1; i < argc; i++) {
        if (is_sim_token(argv[i])) {
            simv[ns++] = argv[i];
            if (!strchr(argv[i], '=') && i + 1 < argc && strncmp(argv[i + 1], "--", 2))
                simv[ns++] = argv[++i];
        } else {
            mlm[nm++] = argv[i];
        }
    }
    /* the cluster (GPU, world) from the sim's own settings */
    sim_cfg_defaults(&tmp);
    rc = sim_args_parse(&tmp, &to, ns, simv, stdout, stderr);
    if (rc) {
        free(mlm);
        free(simv);
        return rc == SIM_ARGS_HELP ? 0 : rc;
    }
    env = mt_kv_new();
    {
        static const char *const names[] = {"CUDA_DEVICE_MAX_CONNECTIONS", "PYTORCH_CUDA_ALLOC_CONF",
                                            "NCCL_GRAPH_REGISTER", "NVTE_CPU_OFFLOAD_V1"};
        size_t k;
        for (k = 0; k < sizeof names / sizeof names[0]; k++)
            if ((e = getenv(names[k])) != NULL)
                mt_kv_set(env, names[k], e);
    }
    sim_stack_of(&tmp, &st, NULL);
    st.env = env;
    if (sim_startup_argv(&st, mlm, (size_t)nm, &v, NULL)) {
        if (!strcmp(v.type, "argparse")) {
            fprintf(stderr, "usage: pretrain_gpt.py [-h] ...\npretrain_gpt.py: error: %s\n", v.msg);
        } else {
            char m[1200];
            snprintf(m, sizeof m, "%s: %s", v.type, v.msg);
            simlog_assertion(stderr, &tmp, v.rule, m);
        }
        fflush(stderr);
        rc = v.exit_status ? v.exit_status : 1;
    }
    mt_kv_destroy(&env);
    free(mlm);
    free(simv);
    return rc;
}

/* One run's state: its configuration and cost, its clock, the rank it
 * plays, and the statistics of the logging interval under way. */
typedef struct sim_run {
    sim_cfg c;
    sim_opts o;
    sim_breakdown b;
    sim_noise noise;
    sim_trace *trace;
    double clock, startup, hottest_bytes, hbm;
    double int_elapsed, int_lm, int_lb, loss_scale;
    int hottest, oom, capture_step, first_log;
    int int_count, int_adv, int_skipped, int_nan, steps_done;
    int inject_rank, per, r0, last;
    sim_rank me;
    FILE *devnull;
} sim_run;

/* Steps 1 and 2: start-up parse, rank, legality, cost; 1 with *rc set when main is to return. */
static int run_prepare(sim_run *R, int argc, char **argv, int *rc)
{
    sim_cfg *c = &R->c;
    char rule[128], msg[1024];

    /* 1. Megatron-LM's start-up (parse_args, validate_args, TransformerConfig)
     *    on the real command line, as the version the sim plays runs it */
    if ((*rc = megatron_startup(argc, argv)) != 0)
        return 1;
    sim_cfg_defaults(c);
    *rc = sim_args_parse(c, &R->o, argc, argv, stdout, stderr);
    if (*rc == SIM_ARGS_HELP) {
        *rc = 0;
        return 1;
    }
    if (*rc)
        return 1;
    if ((*rc = sim_rank_of_env(c, &R->me)) != 0)
        return 1;
    /* one process per rank: each prints what Megatron's rank of its role
     * prints (the arguments and start-up lines on rank 0, the iteration
     * lines on the last rank, memory lines on data-parallel rank 0 of each
     * position); every rank runs the same seeded model, so all agree */
    R->per = R->me.rank >= 0;
    R->r0 = !R->per || R->me.rank == 0;
    R->last = !R->per || R->me.rank == R->me.world - 1;
    *rc = 1;
    if (R->per && !(R->devnull = fopen("/dev/null", "w")))
        return 1;

    /* 2. legality: Bridge's overrides are judged as the Megatron-LM command
     *    line they stand for (the version's start-up rules); a Megatron-LM
     *    command line was judged in step 1 */
    rule[0] = msg[0] = '\0';
    if (c->bridge && sim_check(c, rule, sizeof rule, msg, sizeof msg)) {
        simlog_assertion(stderr, c, rule, msg[0] ? msg : "illegal configuration");
        return 1;
    }
    if (sim_evaluate(c, &R->b)) {
        fprintf(stderr,
                "RuntimeError: moetune-sim cannot evaluate this configuration (GPU %s, "
                "world %d)\n",
                c->gpu, sim_world(c));
        return 1;
    }
    R->hbm = mt_gpu_oom_bytes(sim_gpu(c));
    R->inject_rank = c->inject_rank >= 0 && c->inject_rank < sim_world(c) ? c->inject_rank : 0;
    return 0;
}

/* Step 3: the start-up lines, the noise, the hottest rank, the trace. */
static void run_startup(sim_run *R)
{
    sim_cfg *c = &R->c;

    R->startup = c->startup_s;
    R->clock = R->startup;
    if (R->r0) {
        simlog_world(stdout, c);
        simlog_args(stdout, c, &R->o);
        simlog_sim_info(stdout, c, &R->o);
        simlog_fallback(stdout, c, &R->b);
        simlog_datetime(stdout, "before the start of training step", R->clock);
    }
    if (R->per) {
        /* what the launcher gave this rank (MASTER_ADDR from rank-exec or torchrun) */
        printf("[sim] rank %d of %d on %s, GPU %d; MASTER_ADDR=%s MASTER_PORT=%s\n", R->me.rank,
               R->me.world, R->me.host, R->me.local,
               getenv("MASTER_ADDR") ? getenv("MASTER_ADDR") : "-",
               getenv("MASTER_PORT") ? getenv("MASTER_PORT") : "-");
        fflush(stdout);
    }

    sim_noise_init(&R->noise, R->o.noise_seed, sim_cfg_id(c), c->replicate, c->noise_offset_sd,
                   c->noise_jitter_cv, c->noise_rho);
    R->hottest = sim_hottest_rank(c, &R->hottest_bytes);
    R->oom = R->hbm > 0 && R->hottest_bytes > R->hbm;
    R->capture_step = c->cuda_graph_impl != SIM_CG_NONE ? c->cuda_graph_warmup_steps + 1 : -1;
    R->trace = R->r0 ? sim_trace_open(c, &R->b) : NULL;
}

/* What only the GPU finds (a TE recipe the hardware lacks), at the first forward; 1 if it failed.
 */
static int run_runtime_check(sim_run *R)
{
    sim_verdict rv;
    if (!sim_runtime_check(&R->c, &rv))
        return 0;
    if (!R->r0)
        return 1; /* every rank fails alike; rank 0 says it */
    simlog_datetime(stdout, "after the start of training step", R->clock);
    /* raised in the first forward pass, not in validate_args */
    fprintf(stderr,
            "[rank%d]: Traceback (most recent call last):\n"
            "  File \"/opt/megatron-lm/megatron/training/training.py\", line 2270, in train\n"
            "    train_step(forward_step_func, train_data_iterator, model, optimizer, ...)\n"
            "  File \"/opt/megatron-lm/%s\", in forward\n"
            "%.39s: %.900s\n",
            R->inject_rank, rv.where[0] ? rv.where : "megatron/core/transformer/moe/moe_layer.py",
            rv.type, rv.msg);
    fflush(stderr);
    sim_trace_discard(R->trace);
    return 1;
}

/* Step 5: the hottest GPU runs out of memory in the first iteration; the exit status. */
static int run_oom(sim_run *R, double t)
{
    sim_cfg *c = &R->c;
    if (R->per) {
        /* only the rank that runs out says so; its peers wait in the
         * next collective until they are stopped */
        sim_mem mine;
        sim_rank_memory(c, R->me.rank, &mine);
        if (!(mine.max_reserved > R->hbm)) {
            sim_trace_discard(R->trace);
            hang_in_collective();
        }
        R->clock += 0.5 * t;
        sim_trace_discard(R->trace);
        simlog_oom(stderr, c, R->me.rank, mine.max_reserved);
        simlog_rank_peak(stdout, stderr, c, R->me.rank, R->me.host, R->me.local, R->hbm);
        simlog_wall(stdout, c, R->startup, 0, R->clock - R->startup);
        return 1;
    }
    R->clock += 0.5 * t;
    sim_trace_discard(R->trace);
    simlog_oom(stderr, c, R->hottest, R->hottest_bytes);
    simlog_peak_memory(stdout, stderr, c, R->hbm);
    simlog_wall(stdout, c, R->startup, 0, R->clock - R->startup);
    return 1;
}

/* Step 6: an injected failure from its step on; an exit status, or -1 to go on (flags set). */
static int run_inject(sim_run *R, double *t, int *skipped, int *is_nan)
{
    sim_cfg *c = &R->c;
    switch (c->inject) {
    case SIM_INJECT_HANG:
        /* stuck in a collective: no more output until killed */
        fflush(stdout);
        fflush(stderr);
        for (;;)
            pause();
    case SIM_INJECT_NCCL:
        sim_trace_discard(R->trace);
        if (R->per && R->me.rank != R->inject_rank)
            hang_in_collective(); /* the peer's NCCL error: wait for the stop */
        R->clock += 0.5 * *t;
        simlog_nccl(stderr, R->per ? R->devnull : stdout, c, R->inject_rank, R->clock + 600.0);
        R->clock += 600.0; /* the others' watchdog timeout */
        simlog_wall(stdout, c, R->startup, R->steps_done, R->clock - R->startup);
        return 1;
    case SIM_INJECT_CRASH: {
        struct rlimit nocore = {0, 0};
        sim_trace_discard(R->trace);
        if (R->per && R->me.rank != R->inject_rank)
            hang_in_collective();
        R->clock += 0.5 * *t;
        simlog_wall(stdout, c, R->startup, R->steps_done, R->clock - R->startup);
        simlog_crash(stderr, c, R->inject_rank);
        fflush(stdout);
        fflush(stderr);
        setrlimit(RLIMIT_CORE, &nocore); /* no core file in the worker's directory */
        signal(SIGSEGV, SIG_DFL);
        raise(SIGSEGV);
        return 139;
    }
    case SIM_INJECT_NAN:
        *is_nan = 1;
        break;
    case SIM_INJECT_SKIP:
        *skipped = 1;
        break;
    case SIM_INJECT_DEGRADE:
        *t *= 1.5; /* a run that degrades (throttling, a leak): 1.5x from the step on */
        break;
    default:
        break;
    }
    return -1;
}

/* Adds one iteration to the interval's statistics and logs (then resets) them when due. */
static void run_account(sim_run *R, int it, double t, int skipped, int is_nan)
{
    sim_cfg *c = &R->c;
    /* the interval's statistics, reset at each log as Megatron does */
    R->int_elapsed += t;
    R->int_count++;
    if (skipped) {
        R->int_skipped++;
        R->loss_scale *= 0.5;
    } else {
        R->int_adv++;
        if (is_nan) {
            R->int_nan++;
            R->int_lm += NAN;
            R->int_lb += NAN;
        } else {
            R->int_lm += simlog_lm_loss(c, it);
            R->int_lb += simlog_lb_loss(c, it);
        }
    }
    if (it % c->log_interval == 0 || is_nan) {
        sim_iter_log l;
        double mean = R->int_elapsed / R->int_count;
        memset(&l, 0, sizeof l);
        l.iteration = it;
        l.clock_s = R->clock;
        l.elapsed_s = mean;
        l.tflops = R->b.model_tflop / (mean * sim_world(c));
        l.lr = simlog_lr(c, it);
        l.advanced = R->int_adv;
        l.lm_loss = R->int_adv ? R->int_lm / R->int_adv : 0;
        l.lb_loss = R->int_adv ? R->int_lb / R->int_adv : 0;
        l.loss_scale = R->loss_scale;
        l.grad_norm = R->int_adv ? (is_nan ? NAN : simlog_grad_norm(c, it)) : -1;
        l.skipped = R->int_skipped;
        l.nan = R->int_nan;
        if (R->last)
            simlog_iteration(stdout, c, &l);
        if (R->first_log) {
            if (R->r0)
                simlog_theoretical(stdout, c);
            simlog_memory(stdout, c, it, R->per ? R->me.rank : -1);
            R->first_log = 0;
        }
        R->int_elapsed = R->int_lm = R->int_lb = 0;
        R->int_count = R->int_adv = R->int_skipped = R->int_nan = 0;
    }
}

/* --check-for-nan-in-loss-and-grad (Megatron's default) stops the run; the exit status. */
static int run_nan_stop(sim_run *R, int it)
{
    sim_cfg *c = &R->c;
    sim_trace_discard(R->trace);
    if (R->per) {
        /* every rank stops; the last, which logs, says why */
        if (R->last)
            simlog_nan(stderr, c, R->inject_rank, it);
        simlog_rank_peak(stdout, stderr, c, R->me.rank, R->me.host, R->me.local, 0);
        if (R->last)
            simlog_wall(stdout, c, R->startup, R->steps_done, R->clock - R->startup);
        return 1;
    }
    simlog_nan(stderr, c, R->inject_rank, it);
    simlog_peak_memory(stdout, stderr, c, 0);
    simlog_wall(stdout, c, R->startup, R->steps_done, R->clock - R->startup);
    return 1;
}

/* Step 4: one iteration; an exit status, or -1 to go on. */
static int run_iteration(sim_run *R, int it)
{
    sim_cfg *c = &R->c;
    double mult = sim_noise_step(&R->noise);
    double t = (it == 1 ? R->b.first_iter_s : R->b.step_s) * mult * c->step_scale;
    double start = R->clock;
    int skipped = 0, is_nan = 0, rc;

    if (it == R->capture_step) {
        simlog_capture(R->r0 ? stdout : R->devnull, c, R->b.capture_s);
        t += R->b.capture_s;
    }
    if (it == 1 && R->oom)
        return run_oom(R, t);
    if (c->inject != SIM_INJECT_NONE && it >= c->inject_step &&
        (rc = run_inject(R, &t, &skipped, &is_nan)) >= 0)
        return rc;
    R->clock += t;
    R->steps_done++;
    scaled_sleep(c, t);
    if (R->trace && sim_trace_in_window(c, it))
        sim_trace_step(R->trace, it, start, t);

    run_account(R, it, t, skipped, is_nan);
    if (is_nan)
        return run_nan_stop(R, it);
    if (c->eval_interval > 0 && c->eval_iters > 0 && it % c->eval_interval == 0) {
        char where[64];
        R->clock += c->eval_iters * R->b.step_s * mult / 3.0; /* forward only */
        snprintf(where, sizeof where, "iteration %d", it);
        if (R->last)
            simlog_validation(stdout, where, simlog_lm_loss(c, it) * 1.01);
    }
    return -1;
}

/* After the last iteration: the final validation, the trace, peak memory and wall time. */
static int run_finish(sim_run *R)
{
    sim_cfg *c = &R->c;
    if (R->r0)
        simlog_datetime(stdout, "after training is done", R->clock);
    if (c->eval_iters > 0 && c->train_iters > 0) {
        char where[64];
        R->clock += c->eval_iters * R->b.step_s / 3.0;
        snprintf(where, sizeof where, "iteration %d on validation set", c->train_iters);
        if (R->last)
            simlog_validation(stdout, where, simlog_lm_loss(c, c->train_iters) * 1.01);
    }

    /* the sim's own report */
    if (R->trace) {
        char path[SIM_PATH_MAX + 64], err[SIM_PATH_MAX + 128];
        int w = sim_trace_close(R->trace, path, sizeof path, err, sizeof err);
        if (w > 0)
            printf("[sim] wrote trace %s\n", path);
        else if (w < 0)
            fprintf(stderr, "[sim] trace: %s\n", err);
        else
            printf("[sim] no trace: the profile window [%d, %d) holds no iteration of 1..%d\n",
                   c->profile_step_start, c->profile_step_end, c->train_iters);
        fflush(stdout);
        fflush(stderr);
    }
    if (R->per)
        simlog_rank_peak(stdout, stderr, c, R->me.rank, R->me.host, R->me.local, 0);
    else
        simlog_peak_memory(stdout, stderr, c, 0);
    if (R->r0)
        simlog_wall(stdout, c, R->startup, R->steps_done, R->clock - R->startup);
    if (R->devnull)
        fclose(R->devnull);
    return 0;
}

int main(int argc, char **argv)
{
    static sim_run R; /* zeroed: no trace, no /dev/null, empty interval */
    int rc, it;

    if (argc > 1 && !strcmp(argv[1], "calibrate"))
        return calibrate(argc, argv);

    setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf); /* every line is flushed by simlog */
    R.first_log = 1;
    R.loss_scale = 1.0;
    if (run_prepare(&R, argc, argv, &rc))
        return rc;
    run_startup(&R);
    if (run_runtime_check(&R))
        return 1;
    for (it = 1; it <= R.c.train_iters; it++)
        if ((rc = run_iteration(&R, it)) >= 0)
            return rc;
    return run_finish(&R);
}
