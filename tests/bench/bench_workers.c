/*
 * bench_workers.c - the ZeroMQ coordinator under load.
 *
 * One coordinator (search/zexec.c, the executor `moetune tune --workers`
 * runs, driven here directly through mt_zexec_run), W worker processes
 * (`moetune worker --bench-echo`) on 127.0.0.1, J short jobs in one batch.
 * A --bench-echo worker (benchmark only, workers/worker.h) answers each job
 * at once with a synthetic result (20 samples, 8 GPU rows) and runs no
 * program: 20,000 real sim runs would measure the sim and two CPUs, not the
 * coordinator.  Everything else is the production path: each job message
 * carries the contract and the config, each result is decoded, validated,
 * stored with its memo in one SQLite transaction (synchronous=FULL) and
 * acknowledged, workers re-send unacknowledged results after 2 s, and the
 * coordinator heartbeats every worker every second.
 *
 * Printed:
 *   - jobs lost (no stored memo at the end; expected 0), runs stored twice
 *     for one job (expected 0), results that arrived more than once (worker
 *     re-sends, answered "duplicate"), job messages sent more than once (ack
 *     timeouts);
 *   - the coordinator's CPU time per job (getrusage of this process, all
 *     its threads, ZeroMQ's I/O thread included) and jobs/s;
 *   - dispatch latency, job sent -> its result received by the coordinator,
 *     p50/p90/p99/max (mt_zexec_probe), under the load (W jobs in flight: it
 *     is mostly queueing behind the coordinator's per-job work) and with
 *     one job at a time (max(W, 200) jobs, nothing queued);
 *   - in the same run, a raw ZeroMQ REQ/REP round trip on 127.0.0.1 (a child
 *     process answers; 1 KiB messages): the transport's limit.
 * The store lies on /dev/shm when it can (fsync costs nothing there): the
 * figure is the coordinator's CPU, not this machine's disk.  Only lost or
 * doubly stored jobs fail the benchmark; timing never does.
 *
 *   bench_workers [--workers 200] [--jobs 20000] [--rtt 20000] [--moetune PATH]
 */
#include "exec_int.h"

#include "config.h"
#include "contract.h"
#include "diag.h"
#include "kv.h"
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#ifndef MT_SOURCE_DIR
#error "MT_SOURCE_DIR must name the source tree"
#endif
#ifndef MT_MOETUNE_BIN
#error "MT_MOETUNE_BIN must name the built moetune"
#endif

#define REP0 1000000 /* the measured batch's replicates start here */
#define REP1 2000000 /* and the one-at-a-time jobs' here */

extern char **environ;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_s(struct rusage *u, double *user, double *sys)
{
    getrusage(RUSAGE_SELF, u);
    *user = (double)u->ru_utime.tv_sec + (double)u->ru_utime.tv_usec * 1e-6;
    *sys = (double)u->ru_stime.tv_sec + (double)u->ru_stime.tv_usec * 1e-6;
    return *user + *sys;
}

static int free_port(void)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int s = socket(AF_INET, SOCK_STREAM, 0), port = -1;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (s >= 0 && bind(s, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(s, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (s >= 0)
        close(s);
    return port;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* q-quantile of sorted v (nearest rank) */
static double quantile(const double *v, size_t n, double q)
{
    size_t i;
    if (!n)
        return NAN;
    i = (size_t)ceil(q * (double)n);
    return v[i ? i - 1 : 0];
}

/* ---- the probe: each measured job's send and result times ------------------------------- */

typedef struct probe {
    long base; /* replicate of the first job */
    size_t n;
    double *sent, *result; /* first send, first result (0: none) */
    int *sends, *results;
} probe;

static probe P;

static long probe_index(const char *key)
{
    const char *s = strrchr(key, '/');
    long rep = s ? strtol(s + 1, NULL, 10) : -1;
    return rep >= P.base && (size_t)(rep - P.base) < P.n ? rep - P.base : -1;
}

static void on_probe(const char *key, int retry, int event)
{
    long i = probe_index(key);
    double t = now_s();
    (void)retry;
    if (i < 0)
        return;
    if (event == 0) {
        if (!P.sends[i]++)
            P.sent[i] = t;
    } else {
        if (!P.results[i]++)
            P.result[i] = t;
    }
}

/* ---- the raw ZeroMQ round trip ------------------------------------------------------------ */

static void rtt(int n, double *p50, double *p90, double *p99)
{
    int port = free_port(), i;
    char ep[64], msg[1024];
    double *v = calloc((size_t)n, sizeof *v);
    pid_t child;
    void *ctx, *s;
    *p50 = *p90 = *p99 = NAN;
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    memset(msg, 'x', sizeof msg);
    fflush(NULL);
    child = fork();
    if (child == 0) {
        /* the answering side: its own process, as a worker is */
        void *c = zmq_ctx_new(), *r = zmq_socket(c, ZMQ_REP);
        char buf[2048];
        if (zmq_bind(r, ep))
            _exit(1);
        for (;;) {
            int k = zmq_recv(r, buf, sizeof buf, 0);
            if (k < 0)
                continue;
            zmq_send(r, buf, (size_t)(k < (int)sizeof buf ? k : (int)sizeof buf), 0);
            if (k == 4 && !memcmp(buf, "stop", 4))
                break;
        }
        zmq_close(r);
        zmq_ctx_term(c);
        _exit(0);
    }
    ctx = zmq_ctx_new();
    s = zmq_socket(ctx, ZMQ_REQ);
    zmq_connect(s, ep);
    for (i = -200; i < n; i++) { /* 200 warm-up round trips */
        char back[2048];
        double t = now_s();
        if (zmq_send(s, msg, sizeof msg, 0) < 0 || zmq_recv(s, back, sizeof back, 0) < 0)
            break;
        if (i >= 0)
            v[i] = now_s() - t;
    }
    if (i == n) {
        qsort(v, (size_t)n, sizeof *v, cmp_double);
        *p50 = quantile(v, (size_t)n, 0.50);
        *p90 = quantile(v, (size_t)n, 0.90);
        *p99 = quantile(v, (size_t)n, 0.99);
        {
            char back[16];
            zmq_send(s, "stop", 4, 0);
            zmq_recv(s, back, sizeof back, 0);
        }
    } else {
        kill(child, SIGKILL);
    }
    waitpid(child, NULL, 0);
    zmq_close(s);
    zmq_ctx_term(ctx);
    free(v);
}

/* ---- the benchmark ---------------------------------------------------------------------- */

static mt_exec_job *make_jobs(const mt_kv *cfg, const char *id, int rep0, size_t n)
{
    mt_exec_job *v = calloc(n ? n : 1, sizeof *v);
    size_t i;
    for (i = 0; v && i < n; i++) {
        v[i].cfg = cfg;
        memcpy(v[i].id, id, 17);
        v[i].kind = "screen";
        v[i].rep = rep0 + (int)i;
        v[i].phase = "bench";
        mt_exec_job_key("screen", id, v[i].rep, v[i].key, sizeof v[i].key);
    }
    return v;
}

static void rm_rf(const char *dir)
{
    pid_t p;
    char *av[] = {"rm", "-rf", (char *)dir, NULL};
    if (posix_spawnp(&p, "rm", NULL, NULL, av, environ) == 0)
        waitpid(p, NULL, 0);
}

int main(int argc, char **argv)
{
    int nworkers = 200, njobs = 20000, nrtt = 20000, i, port, rc = 0;
    const char *moetune = MT_MOETUNE_BIN;
    char dir[256], endpoint[64], wdir[300],
        contract_path[] = MT_SOURCE_DIR "/tests/contracts/tune-small.cfg";
    mt_diag *d = mt_diag_new();
    mt_contract *c;
    mt_store *st;
    mt_kv *cfg;
    char id[17];
    mt_exec_opts xo;
    mt_exec_env env = {0};
    mt_exec *x;
    pid_t *pids;
    mt_exec_job *warm, *v;
    size_t clean_exits = 0, none = 0, nwarm, k, lost = 0, twice_stored = 0, twice_received = 0,
           resent = 0, nlat = 0;
    double *lat, *one = NULL, t0, t1, c0, c1, u0, u1, s0, s1, r50, r90, r99, warm_s;
    struct rusage ru;
    struct stat sb;
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--workers") && i + 1 < argc)
            nworkers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--jobs") && i + 1 < argc)
            njobs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rtt") && i + 1 < argc)
            nrtt = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--moetune") && i + 1 < argc)
            moetune = argv[++i];
        else {
            fprintf(stderr,
                    "usage: bench_workers [--workers N] [--jobs N] [--rtt N] [--moetune PATH]\n");
            return 2;
        }
    }
    if (nworkers < 1 || njobs < 1 || nrtt < 1) {
        fprintf(stderr, "bench_workers: counts must be >= 1\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    snprintf(dir, sizeof dir, "%s/mt-bench-workers.XXXXXX",
             stat("/dev/shm", &sb) == 0 && access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(wdir, sizeof wdir, "%s/workers", dir);

    /* the coordinator: a contract, its store, the executor bound on loopback */
    if (!(c = mt_contract_load(contract_path, d))) {
        mt_diag_print(d, stderr);
        return 1;
    }
    cfg = mt_kv_dup(c->base);
    mt_config_id(cfg, id);
    port = free_port();
    snprintf(endpoint, sizeof endpoint, "tcp://127.0.0.1:%d", port);
    mt_exec_opts_init(&xo);
    xo.executor = MT_EXEC_ZMQ;
    xo.sim_path = "moetune-sim"; /* what the workers' default allowlist holds */
    xo.workers = endpoint;
    xo.worker_wait_s = 120;
    env.c = c;
    env.dir = dir;
    if (!(x = mt_exec_new(&xo, &env, d))) {
        mt_diag_print(d, stderr);
        return 1;
    }
    st = mt_exec_store(x);

    /* the workers */
    pids = calloc((size_t)nworkers, sizeof *pids);
    t0 = now_s();
    for (i = 0; i < nworkers; i++) {
        char name[32];
        char *av[] = {(char *)moetune, "worker", "--connect",    endpoint,      "--name", name,
                      "--dir",         wdir,     "--bench-echo", "--idle-exit", "30",     NULL};
        posix_spawn_file_actions_t fa;
        snprintf(name, sizeof name, "bench-%03d", i);
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
        if (posix_spawn(&pids[i], moetune, &fa, NULL, av, environ) != 0) {
            fprintf(stderr, "bench_workers: cannot start %s\n", moetune);
            pids[i] = 0;
            rc = 1;
        }
        posix_spawn_file_actions_destroy(&fa);
    }

    /* warm-up: until every worker has answered (connected and ready), not measured */
    nwarm = 0;
    for (i = 0; rc == 0; i++) {
        mt_store_run *runs = NULL;
        size_t nr = 0, nw = 0, a, b;
        warm = make_jobs(cfg, id, (int)nwarm, (size_t)nworkers * 2);
        if (mt_zexec_run(x, warm, (size_t)nworkers * 2) != 0) {
            mt_diag_print(d, stderr);
            rc = 1;
        }
        free(warm);
        nwarm += (size_t)nworkers * 2;
        if (mt_store_list_runs(st, id, "screen", &runs, &nr, d) == 0) {
            for (a = 0; a < nr; a++) {
                for (b = 0; b < a; b++)
                    if (runs[b].worker && runs[a].worker && !strcmp(runs[a].worker, runs[b].worker))
                        break;
                nw += b == a;
            }
            mt_store_runs_free(runs, nr);
        }
        if (nw >= (size_t)nworkers || now_s() - t0 > 60)
            break;
        usleep(200 * 1000);
    }
    warm_s = now_s() - t0;

    /* the measured batch */
    P.base = REP0;
    P.n = (size_t)njobs;
    P.sent = calloc(P.n, sizeof *P.sent);
    P.result = calloc(P.n, sizeof *P.result);
    P.sends = calloc(P.n, sizeof *P.sends);
    P.results = calloc(P.n, sizeof *P.results);
    v = make_jobs(cfg, id, REP0, P.n);
    mt_zexec_probe = on_probe;
    c0 = cpu_s(&ru, &u0, &s0);
    t0 = now_s();
    if (rc == 0 && mt_zexec_run(x, v, P.n) != 0) {
        mt_diag_print(d, stderr);
        rc = 1;
    }
    t1 = now_s();
    c1 = cpu_s(&ru, &u1, &s1);
    mt_zexec_probe = NULL;

    /* unloaded: one job at a time, the same path with nothing queued */
    {
        probe keep = P;
        size_t m;
        memset(&P, 0, sizeof P);
        P.base = REP1;
        P.n = (size_t)(nworkers < 200 ? 200 : nworkers);
        P.sent = calloc(P.n, sizeof *P.sent);
        P.result = calloc(P.n, sizeof *P.result);
        P.sends = calloc(P.n, sizeof *P.sends);
        P.results = calloc(P.n, sizeof *P.results);
        one = calloc(P.n, sizeof *one);
        mt_zexec_probe = on_probe;
        for (m = 0; rc == 0 && m < P.n; m++) {
            mt_exec_job *q = make_jobs(cfg, id, REP1 + (int)m, 1);
            if (mt_zexec_run(x, q, 1) != 0)
                rc = 1;
            free(q);
            if (P.sends[m] && P.results[m])
                one[none++] = P.result[m] - P.sent[m];
        }
        mt_zexec_probe = NULL;
        qsort(one, none, sizeof *one, cmp_double);
        free(P.sent), free(P.result), free(P.sends), free(P.results);
        P = keep;
    }
    mt_zexec_close(x); /* disconnect: the workers exit */

    /* what was stored: every job once */
    lat = calloc(P.n, sizeof *lat);
    for (k = 0; k < P.n; k++) {
        char *memo = NULL;
        if (mt_store_memo_get(st, v[k].key, &memo, d) != 1)
            lost++;
        free(memo);
        twice_received += P.results[k] > 1;
        resent += P.sends[k] > 1;
        if (P.results[k] && P.sends[k])
            lat[nlat++] = P.result[k] - P.sent[k];
    }
    {
        mt_store_run *runs = NULL;
        size_t nr = 0, a;
        int *seen = calloc(P.n, sizeof *seen);
        if (mt_store_list_runs(st, id, "screen", &runs, &nr, d) == 0) {
            for (a = 0; a < nr; a++)
                if (runs[a].replicate >= REP0 && (size_t)(runs[a].replicate - REP0) < P.n &&
                    seen[runs[a].replicate - REP0]++)
                    twice_stored++;
            mt_store_runs_free(runs, nr);
        }
        free(seen);
    }
    qsort(lat, nlat, sizeof *lat, cmp_double);

    for (i = 0; i < nworkers; i++) {
        int st_ = 0, tries;
        if (pids[i] <= 0)
            continue;
        for (tries = 0; tries < 100 && waitpid(pids[i], &st_, WNOHANG) == 0; tries++)
            usleep(50 * 1000);
        if (tries == 100) {
            kill(pids[i], SIGKILL);
            waitpid(pids[i], NULL, 0);
        } else {
            clean_exits += WIFEXITED(st_) && WEXITSTATUS(st_) == 0;
        }
    }
    rtt(nrtt, &r50, &r90, &r99);

    printf("bench_workers: 1 coordinator (search/zexec.c), %d worker processes (moetune worker "
           "--bench-echo), %d jobs, 127.0.0.1, store on %s\n",
           nworkers, njobs, !strncmp(dir, "/dev/shm", 8) ? "tmpfs (/dev/shm)" : "/tmp");
    printf("  warm-up: %zu jobs until every worker had answered, %.1f s (not measured)\n", nwarm,
           warm_s);
    printf("  %-44s %zu lost, %zu stored twice (of %d jobs)\n", "jobs:", lost, twice_stored, njobs);
    printf("  %-44s %zu results received twice (worker re-sends, answered duplicate), %zu jobs "
           "sent again (ack timeout)\n",
           "", twice_received, resent);
    printf("  %-44s %zu of %d exited 0 on the coordinator's disconnect\n", "workers:", clean_exits,
           nworkers);
    printf("  %-44s %.2f s, %.0f jobs/s\n", "wall:", t1 - t0, (double)njobs / (t1 - t0));
    printf("  %-44s %.3f ms per job (%.2f s: user %.2f, sys %.2f)\n",
           "coordinator CPU:", 1e3 * (c1 - c0) / njobs, c1 - c0, u1 - u0, s1 - s0);
    printf("  %-44s p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, max %.3f ms (%zu jobs)\n",
           "dispatch latency (job sent -> result in):", 1e3 * quantile(lat, nlat, 0.5),
           1e3 * quantile(lat, nlat, 0.9), 1e3 * quantile(lat, nlat, 0.99),
           nlat ? 1e3 * lat[nlat - 1] : NAN, nlat);
    printf("  %-44s p50 %.3f ms, p90 %.3f ms, p99 %.3f ms (%zu jobs)\n",
           "one job at a time (nothing queued):", 1e3 * quantile(one, none, 0.5),
           1e3 * quantile(one, none, 0.9), 1e3 * quantile(one, none, 0.99), none);
    printf("  %-44s p50 %.3f ms, p90 %.3f ms, p99 %.3f ms (%d x 1 KiB)\n",
           "raw ZeroMQ REQ/REP round trip (transport):", 1e3 * r50, 1e3 * r90, 1e3 * r99, nrtt);
    if (lost || twice_stored || rc) {
        fprintf(stderr, "bench_workers: FAILED: %zu jobs lost, %zu stored twice%s\n", lost,
                twice_stored, rc ? ", and the run did not complete" : "");
        rc = 1;
    }
    free(lat);
    free(one);
    free(v);
    free(pids);
    free(P.sent), free(P.result), free(P.sends), free(P.results);
    mt_kv_destroy(&cfg);
    mt_exec_destroy(&x);
    mt_contract_destroy(&c);
    mt_diag_destroy(&d);
    rm_rf(dir);
    return rc;
}
