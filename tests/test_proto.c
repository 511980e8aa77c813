/*
 * test_proto.c - the worker protocol's message layer and keys over real
 * ZeroMQ sockets: every command round trip over a ROUTER/DEALER pair on
 * inproc:// and on tcp://127.0.0.1 (ephemeral port) with ROUTER_MANDATORY
 * and ROUTER_HANDOVER set; malformed, oversized and unknown messages
 * rejected with the frame and field named (also over a socket, where the
 * stream stays usable after a bad message); a finished run with NaN/inf
 * losses and GPU rows through JSON and into a real store, bit for bit;
 * CURVE with the ZAP handler (a known worker key talks, an unknown one and
 * a client with the wrong server key never reach the application); key
 * files: generation modes, refusals of readable secret keys, symlinks,
 * mismatched halves, writable known-keys directories; no key material in
 * any log line or error.
 */
#include "config.h"
#include "keys.h"
#include "proto.h"
#include "store.h"
#include "testkit.h"

#include <check.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#define CONTRACT "qwen3-30b-a3b-h100x16.cfg"

/* ---- helpers ------------------------------------------------------------------ */

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static char *tmp_dir(void)
{
    char *p = strdup("/tmp/moetune-proto-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(p));
    return p;
}

static void rm_rf(char *dir)
{
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(dir);
}

static char *join(const char *a, const char *b)
{
    char *p = malloc(strlen(a) + strlen(b) + 2);
    sprintf(p, "%s/%s", a, b);
    return p;
}

static void write_file(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    ck_assert_int_eq(chmod(path, mode), 0);
}

/* A ROUTER (coordinator) and a DEALER (worker "w1") on an endpoint. */
typedef struct pair {
    void *ctx, *router, *dealer;
    char endpoint[256];
} pair;

static void *new_router(void *ctx, const char *bind_to, char *endpoint, size_t cap)
{
    void *r = zmq_socket(ctx, ZMQ_ROUTER);
    char err[256];
    size_t len = cap;
    int zero = 0;
    ck_assert_ptr_nonnull(r);
    zmq_setsockopt(r, ZMQ_LINGER, &zero, sizeof zero);
    ck_assert_msg(mt_proto_socket_setup(r, 1, NULL, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(zmq_bind(r, bind_to) == 0, "bind %s: %s", bind_to, zmq_strerror(errno));
    ck_assert_int_eq(zmq_getsockopt(r, ZMQ_LAST_ENDPOINT, endpoint, &len), 0);
    return r;
}

static void *new_dealer(void *ctx, const char *name)
{
    void *d = zmq_socket(ctx, ZMQ_DEALER);
    char err[256];
    int zero = 0;
    ck_assert_ptr_nonnull(d);
    zmq_setsockopt(d, ZMQ_LINGER, &zero, sizeof zero);
    ck_assert_msg(mt_proto_socket_setup(d, 0, name, err, sizeof err) == 0, "%s", err);
    return d;
}

static void pair_open(pair *p, const char *bind_to)
{
    memset(p, 0, sizeof *p);
    p->ctx = zmq_ctx_new();
    ck_assert_ptr_nonnull(p->ctx);
    p->router = new_router(p->ctx, bind_to, p->endpoint, sizeof p->endpoint);
    p->dealer = new_dealer(p->ctx, "w1");
    ck_assert_int_eq(zmq_connect(p->dealer, p->endpoint), 0);
}

static void pair_close(pair *p)
{
    zmq_close(p->dealer);
    zmq_close(p->router);
    zmq_ctx_term(p->ctx);
}

/* Waits up to ms for a message; the recv's return code (-EAGAIN: none). */
static int recv_within(void *sock, int router, mt_proto_msg *m, int ms, char *err, size_t errlen)
{
    zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
    mt_proto_msg_init(m);
    if (zmq_poll(&it, 1, ms) <= 0)
        return -EAGAIN;
    return mt_proto_recv(sock, router, m, err, errlen);
}

/* Sends body (consumed) and expects it to arrive intact as command. */
static void send_ok(void *from, const char *to, int command, cJSON *body)
{
    char err[512];
    int rc;
    ck_assert_ptr_nonnull(body);
    rc = mt_proto_send(from, to, to ? strlen(to) : 0, command, body, err, sizeof err);
    ck_assert_msg(rc == 0, "send %s: %d %s", mt_proto_cmd_name(command), rc, err);
    cJSON_Delete(body);
}

static void recv_ok(void *sock, int router, int command, mt_proto_msg *m)
{
    char err[512] = "";
    int rc = recv_within(sock, router, m, 5000, err, sizeof err);
    ck_assert_msg(rc == 0, "recv %s: %d %s", mt_proto_cmd_name(command), rc, err);
    ck_assert_str_eq(mt_proto_cmd_name(m->command), mt_proto_cmd_name(command));
    if (router) {
        ck_assert_uint_eq(m->idlen, 2);
        ck_assert(memcmp(m->identity, "w1", 2) == 0);
    } else {
        ck_assert_uint_eq(m->idlen, 0);
    }
    ck_assert_uint_eq(m->frames, router ? 4 : 3);
}

/* Nothing arrives within ms. */
static void recv_none(void *sock, int router, int ms)
{
    mt_proto_msg m;
    char err[512] = "";
    int rc = recv_within(sock, router, &m, ms, err, sizeof err);
    ck_assert_msg(rc == -EAGAIN, "expected no message, got rc %d (%s) command %s", rc, err,
                  mt_proto_cmd_name(m.command));
    mt_proto_msg_clear(&m);
}

static int bits_eq(double a, double b)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    return memcmp(&a, &b, sizeof a) == 0;
}

/* ---- a finished run with every awkward value ---------------------------------------- */

typedef struct sample_run {
    mt_store_sample s[5];
    mt_store_loss l[5][3];
    mt_store_gpu_mem g[4];
    mt_store_result r;
} sample_run;

static void sample_fill(sample_run *x, const char *config_id, const char *canonical)
{
    static const double weird[] = {0.1 + 0.2, 1e-300, 1.7976931348623157e308, -0.0, 5e-324};
    size_t i;
    memset(x, 0, sizeof *x);
    for (i = 0; i < 5; i++) {
        x->l[i][0].key = "lm loss";
        x->l[i][0].value = 11.6 - 0.01 * (double)i + weird[i];
        x->l[i][1].key = "load_balancing_loss";
        x->l[i][1].value = i == 1 ? NAN : i == 2 ? INFINITY : i == 3 ? -INFINITY : weird[i];
        x->l[i][2].key = "z \"quoted\" \\ key";
        x->l[i][2].value = 1.0 / 3.0 * (double)i;
        x->s[i].iteration = (long)i + 1;
        x->s[i].elapsed_ms = i == 0 ? NAN : 1234.5678901234567 + (double)i * 0.1;
        x->s[i].tflops = i == 4 ? NAN : 138.1 - (double)i * 0.2;
        x->s[i].grad_norm = i == 2 ? NAN : weird[i];
        x->s[i].skipped = (long)i;
        x->s[i].nan = i == 3 ? 2 : 0;
        x->s[i].losses = x->l[i];
        x->s[i].n_losses = i == 4 ? 0 : 3;
    }
    x->g[0] = (mt_store_gpu_mem){0, "node0", 0, 79456894976LL, 71234567890LL, "nvml"};
    x->g[1] = (mt_store_gpu_mem){1, "node0", 1, 9007199254740993LL, -1, "log"}; /* > 2^53 */
    x->g[2] = (mt_store_gpu_mem){-1, NULL, -1, 1, -1, "sim"};
    x->g[3] = (mt_store_gpu_mem){15, "node1", 7, INT64_MAX, INT64_MIN + 1, "nvml"};
    x->r.run.id = 42;
    x->r.run.config_id = config_id;
    x->r.run.config_canonical = canonical;
    x->r.run.kind = "screen";
    x->r.run.replicate = 2;
    x->r.run.retry = 1;
    x->r.run.outcome = "ok";
    x->r.run.evidence = "iteration 5: ok \"quoted\"\n\ttab";
    x->r.run.worker = "w1";
    x->r.run.fingerprint = "{\"hosts\":[\"node0\"],\"driver\":\"570.86\"}";
    x->r.run.started = 1767225600.123456789;
    x->r.run.ended = 1767225700.5;
    x->r.run.wall_s = 100.37654321;
    x->r.run.sim_s = NAN;
    x->r.run.gpu_hours = 0.1 + 0.7;
    x->r.run.log_path = NULL;
    x->r.samples = x->s;
    x->r.n_samples = 5;
    x->r.gpus = x->g;
    x->r.n_gpus = 4;
}

static void str_eq_or_null(const char *a, const char *b)
{
    if (!a || !b)
        ck_assert_msg(a == b, "one of two strings is NULL");
    else
        ck_assert_str_eq(a, b);
}

static void result_eq(const mt_store_result *a, const mt_store_result *b)
{
    size_t i, k;
    str_eq_or_null(a->run.config_id, b->run.config_id);
    str_eq_or_null(a->run.config_canonical, b->run.config_canonical);
    str_eq_or_null(a->run.kind, b->run.kind);
    ck_assert_int_eq(a->run.replicate, b->run.replicate);
    ck_assert_int_eq(a->run.retry, b->run.retry);
    str_eq_or_null(a->run.outcome, b->run.outcome);
    str_eq_or_null(a->run.evidence, b->run.evidence);
    str_eq_or_null(a->run.worker, b->run.worker);
    str_eq_or_null(a->run.fingerprint, b->run.fingerprint);
    str_eq_or_null(a->run.log_path, b->run.log_path);
    ck_assert(bits_eq(a->run.started, b->run.started));
    ck_assert(bits_eq(a->run.ended, b->run.ended));
    ck_assert(bits_eq(a->run.wall_s, b->run.wall_s));
    ck_assert(bits_eq(a->run.sim_s, b->run.sim_s));
    ck_assert(bits_eq(a->run.gpu_hours, b->run.gpu_hours));
    ck_assert_uint_eq(a->n_samples, b->n_samples);
    for (i = 0; i < a->n_samples; i++) {
        const mt_store_sample *x = &a->samples[i], *y = &b->samples[i];
        ck_assert_int_eq(x->iteration, y->iteration);
        ck_assert_msg(bits_eq(x->elapsed_ms, y->elapsed_ms), "sample %zu elapsed %.17g vs %.17g", i,
                      x->elapsed_ms, y->elapsed_ms);
        ck_assert(bits_eq(x->tflops, y->tflops));
        ck_assert_msg(bits_eq(x->grad_norm, y->grad_norm), "sample %zu grad_norm %.17g vs %.17g", i,
                      x->grad_norm, y->grad_norm);
        ck_assert_int_eq(x->skipped, y->skipped);
        ck_assert_int_eq(x->nan, y->nan);
        ck_assert_uint_eq(x->n_losses, y->n_losses);
        for (k = 0; k < x->n_losses; k++) {
            ck_assert_str_eq(x->losses[k].key, y->losses[k].key);
            ck_assert_msg(bits_eq(x->losses[k].value, y->losses[k].value),
                          "sample %zu loss %s: %.17g vs %.17g", i, x->losses[k].key,
                          x->losses[k].value, y->losses[k].value);
        }
    }
    ck_assert_uint_eq(a->n_gpus, b->n_gpus);
    for (i = 0; i < a->n_gpus; i++) {
        ck_assert_int_eq(a->gpus[i].rank, b->gpus[i].rank);
        str_eq_or_null(a->gpus[i].host, b->gpus[i].host);
        ck_assert_int_eq(a->gpus[i].gpu, b->gpus[i].gpu);
        ck_assert_int_eq(a->gpus[i].peak_bytes, b->gpus[i].peak_bytes);
        ck_assert_int_eq(a->gpus[i].alloc_bytes, b->gpus[i].alloc_bytes);
        str_eq_or_null(a->gpus[i].source, b->gpus[i].source);
    }
}

/* ---- every command, both ways ------------------------------------------------------- */

static const char *const memo_text =
    "{\"outcome\":\"ok\",\"evidence\":\"window 5..20\",\"ms\":1234.5,\"tflops\":138.1,"
    "\"loss\":null,\"loss_finite\":1,\"skipped\":0,\"nan\":0,\"peak_gb\":79.4,"
    "\"gpu_hours\":0.8,\"wall_s\":100.3,\"run_id\":7,\"verdicts\":{},\"trace\":{}}";

static void roundtrip_all(void *router, void *dealer)
{
    mt_proto_msg m;
    char err[512];
    const char *launchers[] = {"local", "srun"}, *programs[] = {"moetune-sim", "torchrun"};
    const char *lines[] = {" [2026-01-01 00:00:00] iteration        5/      20 | elapsed time per "
                           "iteration (ms): 1234.5 |",
                           "iteration 6 \"quoted\" \\ line"};
    mt_proto_jobref running[] = {{"job/screen/0123456789abcdef/0", 0}},
                    finished[] = {{"job/screen/fedcba9876543210/1", 3}, {"j2", 0}};
    sample_run x;

    /* ready: worker -> coordinator */
    {
        mt_proto_ready r = {.worker = "w1",
                            .host = "node0",
                            .gpus = 8,
                            .gpu_type = "NVIDIA H100 80GB HBM3",
                            .nodes = 2,
                            .slots = 1,
                            .version = "0.1.0"};
        mt_proto_ready v;
        mt_proto_jobref j;
        send_ok(dealer, NULL, MT_PROTO_READY,
                mt_proto_ready_body(&r, launchers, 2, programs, 2, running, 1, finished, 2));
        recv_ok(router, 1, MT_PROTO_READY, &m);
        ck_assert_int_eq(mt_proto_get_ready(&m, &v), 0);
        ck_assert_int_eq(mt_proto_get_job(&m, &(mt_proto_job){0}), -EINVAL);
        ck_assert_str_eq(v.worker, "w1");
        ck_assert_str_eq(v.host, "node0");
        ck_assert_int_eq(v.gpus, 8);
        ck_assert_str_eq(v.gpu_type, "NVIDIA H100 80GB HBM3");
        ck_assert_int_eq(v.nodes, 2);
        ck_assert_int_eq(v.slots, 1);
        ck_assert_str_eq(v.version, "0.1.0");
        ck_assert_uint_eq(mt_proto_count(v.launchers), 2);
        ck_assert_str_eq(mt_proto_str_at(v.launchers, 1), "srun");
        ck_assert_ptr_null(mt_proto_str_at(v.launchers, 2));
        ck_assert_str_eq(mt_proto_str_at(v.programs, 0), "moetune-sim");
        ck_assert_uint_eq(mt_proto_count(v.running), 1);
        ck_assert_int_eq(mt_proto_jobref_at(v.running, 0, &j), 0);
        ck_assert_str_eq(j.job_id, running[0].job_id);
        ck_assert_uint_eq(mt_proto_count(v.finished), 2);
        ck_assert_int_eq(mt_proto_jobref_at(v.finished, 0, &j), 0);
        ck_assert_str_eq(j.job_id, finished[0].job_id);
        ck_assert_int_eq(j.retry, 3);
        ck_assert_int_eq(mt_proto_jobref_at(v.finished, 2, &j), -EINVAL);
        ck_assert_int_eq(mt_proto_jobref_of(&m, &j), -EINVAL);
        mt_proto_msg_clear(&m);
    }
    /* job: coordinator -> worker */
    {
        mt_proto_job j = {.job_id = "job/screen/0123456789abcdef/2",
                          .retry = 1,
                          .kind = "screen",
                          .contract = "contract {\n  name = \"x\";\n};\n",
                          .config = "a=1\nb=2\n",
                          .replicate = 2,
                          .time_limit_s = 900.5,
                          .profile = 1,
                          .hang_factor = 10,
                          .sim_seed = "18446744073709551615",
                          .launcher = "srun"};
        mt_proto_job v;
        mt_proto_jobref r;
        send_ok(router, "w1", MT_PROTO_JOB, mt_proto_job_body(&j));
        recv_ok(dealer, 0, MT_PROTO_JOB, &m);
        ck_assert_int_eq(mt_proto_get_job(&m, &v), 0);
        ck_assert_str_eq(v.job_id, j.job_id);
        ck_assert_int_eq(v.retry, 1);
        ck_assert_str_eq(v.kind, "screen");
        ck_assert_str_eq(v.contract, j.contract);
        ck_assert_str_eq(v.config, j.config);
        ck_assert_int_eq(v.replicate, 2);
        ck_assert(v.time_limit_s == 900.5);
        ck_assert_int_eq(v.profile, 1);
        ck_assert(v.hang_factor == 10);
        ck_assert_str_eq(v.sim_seed, "18446744073709551615");
        ck_assert_str_eq(v.launcher, "srun");
        ck_assert_int_eq(mt_proto_jobref_of(&m, &r), 0);
        ck_assert_str_eq(r.job_id, j.job_id);
        ck_assert_int_eq(r.retry, 1);
        mt_proto_msg_clear(&m);
        /* the optional fields absent: their defaults */
        j.profile = 0, j.hang_factor = 0, j.sim_seed = NULL, j.launcher = NULL;
        send_ok(router, "w1", MT_PROTO_JOB, mt_proto_job_body(&j));
        recv_ok(dealer, 0, MT_PROTO_JOB, &m);
        ck_assert_int_eq(mt_proto_get_job(&m, &v), 0);
        ck_assert_int_eq(v.profile, 0);
        ck_assert_ptr_null(v.sim_seed);
        ck_assert_ptr_null(v.launcher);
        ck_assert_ptr_null(v.rev);
        ck_assert_ptr_null(v.prepare);
        ck_assert_ptr_null(v.nodelist);
        mt_proto_msg_clear(&m);
        /* a comparison's later replicate: pinned to its first control run's nodes */
        j.nodelist = "gpu07,gpu08.cluster-a";
        send_ok(router, "w1", MT_PROTO_JOB, mt_proto_job_body(&j));
        recv_ok(dealer, 0, MT_PROTO_JOB, &m);
        ck_assert_int_eq(mt_proto_get_job(&m, &v), 0);
        ck_assert_str_eq(v.nodelist, "gpu07,gpu08.cluster-a");
        mt_proto_msg_clear(&m);
        j.nodelist = NULL;
        /* a bisect job: the revision, the repository and the prepare templates */
        {
            const char *prep[] = {"git clone -q {repo} {work}", "git -C {work} checkout {rev}"};
            j.kind = "bisect";
            j.rev = "4a9b5fbf572da07e879900f6ac5d0af8b30b7ee9";
            j.repo = "/srv/megatron";
            j.prepare_v = prep;
            j.n_prepare = 2;
            j.prepare_timeout_s = 1800;
            send_ok(router, "w1", MT_PROTO_JOB, mt_proto_job_body(&j));
            recv_ok(dealer, 0, MT_PROTO_JOB, &m);
            ck_assert_int_eq(mt_proto_get_job(&m, &v), 0);
            ck_assert_str_eq(v.kind, "bisect");
            ck_assert_str_eq(v.rev, j.rev);
            ck_assert_str_eq(v.repo, "/srv/megatron");
            ck_assert_int_eq(cJSON_GetArraySize(v.prepare), 2);
            ck_assert_str_eq(mt_proto_str_at(v.prepare, 1), "git -C {work} checkout {rev}");
            ck_assert(v.prepare_timeout_s == 1800);
            mt_proto_msg_clear(&m);
        }
    }
    /* job-ack, accepted and refused */
    {
        mt_proto_job_ack a = {"job/screen/0123456789abcdef/2", 1, 1, NULL, "81234.0"}, v;
        send_ok(dealer, NULL, MT_PROTO_JOB_ACK, mt_proto_job_ack_body(&a));
        recv_ok(router, 1, MT_PROTO_JOB_ACK, &m);
        ck_assert_int_eq(mt_proto_get_job_ack(&m, &v), 0);
        ck_assert_int_eq(v.accepted, 1);
        ck_assert_ptr_null(v.reason);
        ck_assert_str_eq(v.slurm_step, "81234.0");
        mt_proto_msg_clear(&m);
        a.accepted = 0, a.reason = "program /bin/sh is not on this worker's allowlist";
        a.slurm_step = NULL;
        send_ok(dealer, NULL, MT_PROTO_JOB_ACK, mt_proto_job_ack_body(&a));
        recv_ok(router, 1, MT_PROTO_JOB_ACK, &m);
        ck_assert_int_eq(mt_proto_get_job_ack(&m, &v), 0);
        ck_assert_int_eq(v.accepted, 0);
        ck_assert_str_eq(v.reason, a.reason);
        ck_assert_ptr_null(v.slurm_step);
        mt_proto_msg_clear(&m);
    }
    /* progress */
    {
        mt_proto_progress p = {"job/screen/0123456789abcdef/2", 1, NULL, 6, 12.5, 1234.5, "9.1"}, v;
        send_ok(dealer, NULL, MT_PROTO_PROGRESS, mt_proto_progress_body(&p, lines, 2));
        recv_ok(router, 1, MT_PROTO_PROGRESS, &m);
        ck_assert_int_eq(mt_proto_get_progress(&m, &v), 0);
        ck_assert_uint_eq(mt_proto_count(v.lines), 2);
        ck_assert_str_eq(mt_proto_str_at(v.lines, 0), lines[0]);
        ck_assert_str_eq(mt_proto_str_at(v.lines, 1), lines[1]);
        ck_assert_int_eq(v.iteration, 6);
        ck_assert(v.elapsed_s == 12.5 && v.step_ms == 1234.5);
        ck_assert_str_eq(v.slurm_step, "9.1");
        mt_proto_msg_clear(&m);
        p.iteration = -1, p.elapsed_s = NAN, p.step_ms = NAN, p.slurm_step = NULL;
        send_ok(dealer, NULL, MT_PROTO_PROGRESS, mt_proto_progress_body(&p, NULL, 0));
        recv_ok(router, 1, MT_PROTO_PROGRESS, &m);
        ck_assert_int_eq(mt_proto_get_progress(&m, &v), 0);
        ck_assert_uint_eq(mt_proto_count(v.lines), 0);
        ck_assert_int_eq(v.iteration, -1);
        ck_assert(isnan(v.elapsed_s) && isnan(v.step_ms));
        mt_proto_msg_clear(&m);
    }
    /* result, with a run and without */
    {
        mt_proto_result v;
        mt_store_result back;
        cJSON *memo = cJSON_Parse(memo_text);
        sample_fill(&x, "0123456789abcdef", "a=1\nb=2\n");
        send_ok(dealer, NULL, MT_PROTO_RESULT,
                mt_proto_result_body("job/screen/0123456789abcdef/2", 1, memo_text, &x.r));
        recv_ok(router, 1, MT_PROTO_RESULT, &m);
        ck_assert_int_eq(mt_proto_get_result(&m, &v), 0);
        ck_assert_int_eq(v.retry, 1);
        ck_assert(cJSON_Compare(v.memo, memo, 1));
        ck_assert_msg(mt_proto_result_to_store(v.run, v.samples, v.gpus, &back, err, sizeof err) ==
                          0,
                      "%s", err);
        result_eq(&x.r, &back);
        mt_proto_result_release(&back);
        mt_proto_msg_clear(&m);
        cJSON_Delete(memo);

        send_ok(dealer, NULL, MT_PROTO_RESULT,
                mt_proto_result_body("job/x/2", 0,
                                     "{\"outcome\":\"launch_error\",\"evidence\":\"no\"}", NULL));
        recv_ok(router, 1, MT_PROTO_RESULT, &m);
        ck_assert_int_eq(mt_proto_get_result(&m, &v), 0);
        ck_assert_ptr_null(v.run);
        ck_assert_uint_eq(mt_proto_count(v.samples), 0);
        mt_proto_msg_clear(&m);
    }
    /* result-ack */
    {
        mt_proto_result_ack a = {"job/screen/0123456789abcdef/2", 1, "duplicate", 77}, v;
        send_ok(router, "w1", MT_PROTO_RESULT_ACK, mt_proto_result_ack_body(&a));
        recv_ok(dealer, 0, MT_PROTO_RESULT_ACK, &m);
        ck_assert_int_eq(mt_proto_get_result_ack(&m, &v), 0);
        ck_assert_str_eq(v.status, "duplicate");
        ck_assert_int_eq(v.run_id, 77);
        mt_proto_msg_clear(&m);
    }
    /* heartbeat both ways */
    {
        mt_proto_heartbeat h = {12, 1767225600.25, NULL, 0}, v;
        mt_proto_jobref j;
        send_ok(dealer, NULL, MT_PROTO_HEARTBEAT, mt_proto_heartbeat_body(&h, running, 1));
        recv_ok(router, 1, MT_PROTO_HEARTBEAT, &m);
        ck_assert_int_eq(mt_proto_get_heartbeat(&m, &v), 0);
        ck_assert_int_eq(v.seq, 12);
        ck_assert(v.time == 1767225600.25);
        ck_assert_int_eq(mt_proto_jobref_at(v.running, 0, &j), 0);
        ck_assert_str_eq(j.job_id, running[0].job_id);
        ck_assert_int_eq(v.reannounce, 0);
        mt_proto_msg_clear(&m);
        h.reannounce = 1;
        send_ok(router, "w1", MT_PROTO_HEARTBEAT, mt_proto_heartbeat_body(&h, NULL, 0));
        recv_ok(dealer, 0, MT_PROTO_HEARTBEAT, &m);
        ck_assert_int_eq(mt_proto_get_heartbeat(&m, &v), 0);
        ck_assert_int_eq(v.reannounce, 1);
        ck_assert_ptr_null(v.running);
        mt_proto_msg_clear(&m);
        send_ok(router, "w1", MT_PROTO_HEARTBEAT, mt_proto_heartbeat_body(NULL, NULL, 0));
        recv_ok(dealer, 0, MT_PROTO_HEARTBEAT, &m);
        ck_assert_int_eq(mt_proto_get_heartbeat(&m, &v), 0);
        ck_assert_int_eq(v.seq, -1);
        ck_assert(isnan(v.time));
        mt_proto_msg_clear(&m);
    }
    /* cancel */
    {
        mt_proto_cancel c = {"job/screen/0123456789abcdef/2", 1, "the tune is over"}, v;
        send_ok(router, "w1", MT_PROTO_CANCEL, mt_proto_cancel_body(&c));
        recv_ok(dealer, 0, MT_PROTO_CANCEL, &m);
        ck_assert_int_eq(mt_proto_get_cancel(&m, &v), 0);
        ck_assert_str_eq(v.job_id, c.job_id);
        ck_assert_str_eq(v.reason, c.reason);
        mt_proto_msg_clear(&m);
    }
    /* disconnect both ways */
    {
        mt_proto_disconnect v;
        send_ok(dealer, NULL, MT_PROTO_DISCONNECT, mt_proto_disconnect_body("worker stopping"));
        recv_ok(router, 1, MT_PROTO_DISCONNECT, &m);
        ck_assert_int_eq(mt_proto_get_disconnect(&m, &v), 0);
        ck_assert_str_eq(v.reason, "worker stopping");
        mt_proto_msg_clear(&m);
        send_ok(router, "w1", MT_PROTO_DISCONNECT, mt_proto_disconnect_body("coordinator done"));
        recv_ok(dealer, 0, MT_PROTO_DISCONNECT, &m);
        ck_assert_int_eq(mt_proto_get_disconnect(&m, &v), 0);
        ck_assert_str_eq(v.reason, "coordinator done");
        mt_proto_msg_clear(&m);
    }
}

START_TEST(roundtrip_inproc)
{
    pair p;
    pair_open(&p, "inproc://proto-test");
    ck_assert_str_eq(p.endpoint, "inproc://proto-test");
    roundtrip_all(p.router, p.dealer);
    pair_close(&p);
}
END_TEST

START_TEST(roundtrip_tcp)
{
    pair p;
    pair_open(&p, "tcp://127.0.0.1:*");
    ck_assert(strncmp(p.endpoint, "tcp://127.0.0.1:", 16) == 0);
    roundtrip_all(p.router, p.dealer);
    pair_close(&p);
}
END_TEST

/* ROUTER_MANDATORY: a send to a peer that is not there fails loudly. */
START_TEST(router_mandatory)
{
    pair p;
    char err[256];
    cJSON *b = mt_proto_disconnect_body("x");
    pair_open(&p, "inproc://proto-mandatory");
    ck_assert_int_eq(mt_proto_send(p.router, "nobody", 6, MT_PROTO_DISCONNECT, b, err, sizeof err),
                     -EHOSTUNREACH);
    ck_assert_ptr_nonnull(strstr(err, "send disconnect"));
    cJSON_Delete(b);
    pair_close(&p);
}
END_TEST

/* ROUTER_HANDOVER: a worker that comes back under its name takes over. */
START_TEST(router_handover)
{
    pair p;
    void *second;
    mt_proto_msg m;
    mt_proto_ready r = {.worker = "w1", .host = "node0", .gpus = 0, .gpu_type = "", .nodes = 1};
    pair_open(&p, "tcp://127.0.0.1:*");
    send_ok(p.dealer, NULL, MT_PROTO_READY,
            mt_proto_ready_body(&r, NULL, 0, NULL, 0, NULL, 0, NULL, 0));
    recv_ok(p.router, 1, MT_PROTO_READY, &m);
    mt_proto_msg_clear(&m);
    r.host = "node0-again";
    second = new_dealer(p.ctx, "w1");
    ck_assert_int_eq(zmq_connect(second, p.endpoint), 0);
    send_ok(second, NULL, MT_PROTO_READY,
            mt_proto_ready_body(&r, NULL, 0, NULL, 0, NULL, 0, NULL, 0));
    recv_ok(p.router, 1, MT_PROTO_READY, &m);
    {
        mt_proto_ready v;
        ck_assert_int_eq(mt_proto_get_ready(&m, &v), 0);
        ck_assert_str_eq(v.host, "node0-again");
    }
    mt_proto_msg_clear(&m);
    send_ok(p.router, "w1", MT_PROTO_HEARTBEAT, mt_proto_heartbeat_body(NULL, NULL, 0));
    recv_ok(second, 0, MT_PROTO_HEARTBEAT, &m);
    mt_proto_msg_clear(&m);
    recv_none(p.dealer, 0, 200);
    zmq_close(second);
    pair_close(&p);
}
END_TEST

/* ---- malformed messages ------------------------------------------------------------- */

typedef struct bad {
    const char *frames[6];
    size_t n;
    int rc;
    const char *needle;
} bad;

static void decode_bad(const bad *b)
{
    const void *fr[6];
    size_t ln[6], i;
    mt_proto_msg m;
    char err[600] = "";
    int rc;
    for (i = 0; i < b->n; i++) {
        fr[i] = b->frames[i];
        ln[i] = strlen(b->frames[i]);
    }
    mt_proto_msg_init(&m);
    rc = mt_proto_decode(fr, ln, b->n, &m, err, sizeof err);
    ck_assert_msg(rc == b->rc, "case \"%s\": rc %d, expected %d (%s)", b->needle, rc, b->rc, err);
    if (b->rc == 0) { /* the controls: valid after all */
        ck_assert_ptr_nonnull(m.body);
        mt_proto_msg_clear(&m);
        return;
    }
    ck_assert_msg(strstr(err, b->needle) != NULL, "error \"%s\" lacks \"%s\"", err, b->needle);
    ck_assert_msg(strchr(err, '\n') == NULL, "error spans lines: %s", err);
    ck_assert_int_eq(m.command, MT_PROTO_NONE);
    ck_assert_ptr_null(m.body);
}

#define T MT_PROTO_TAG
#define OKJOB                                                                                      \
    "{\"job_id\":\"j1\",\"retry\":0,\"kind\":\"screen\",\"contract\":\"c\",\"config\":\"\","       \
    "\"replicate\":0,\"time_limit_s\":0}"

START_TEST(malformed_rejected)
{
    static const bad cases[] = {
        {{T, "job"}, 2, -EPROTO, "message has 2 frames, expected 3 (tag, command, body)"},
        {{T}, 1, -EPROTO, "message has 1 frame,"},
        {{0}, 0, -EPROTO, "message has 0 frames"},
        {{T, "job", OKJOB, "extra"}, 4, -EPROTO, "message has 4 frames"},
        {{"moetune/2", "job", OKJOB},
         3,
         -EPROTONOSUPPORT,
         "frame 0 (tag): protocol version 2 is not supported (this side speaks moetune/1)"},
        {{"moetune/10", "job", OKJOB}, 3, -EPROTONOSUPPORT, "protocol version 10"},
        {{"moetune/1x", "job", OKJOB},
         3,
         -EPROTO,
         "frame 0 (tag): expected \"moetune/1\", got \"moetune/1x\""},
        {{"MOETUNE/1", "job", OKJOB}, 3, -EPROTO, "frame 0 (tag)"},
        {{"", "job", OKJOB}, 3, -EPROTO, "frame 0 (tag): expected \"moetune/1\", got \"\""},
        {{"x\x01\"y", "job", OKJOB}, 3, -EPROTO, "got \"x\\x01\\\"y\""},
        {{T, "jobs", OKJOB}, 3, -EPROTO, "frame 1 (command): unknown command \"jobs\""},
        {{T, "JOB", OKJOB}, 3, -EPROTO, "unknown command \"JOB\""},
        {{T, "", OKJOB}, 3, -EPROTO, "unknown command \"\""},
        {{T, "job", ""}, 3, -EPROTO, "frame 2 (body): job: empty, expected a JSON object"},
        {{T, "job", "not json"}, 3, -EPROTO, "frame 2 (body): job: not a JSON object"},
        {{T, "job", "[1,2]"}, 3, -EPROTO, "not a JSON object (starts with \"[1,2]\")"},
        {{T, "job", "\"s\""}, 3, -EPROTO, "not a JSON object"},
        {{T, "job", "{\"job_id\":"}, 3, -EPROTO, "frame 2 (body): job: not valid JSON (at offset"},
        {{T, "job", "{\"a\":1,}"}, 3, -EPROTO, "not valid JSON"},
        {{T, "job", OKJOB "{}"}, 3, -EPROTO, "trailing data after the JSON object at offset"},
        {{T, "job", OKJOB " \n"}, 3, 0, ""},
        {{T, "heartbeat",
          "{\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}"},
         3,
         -EPROTO,
         "nested deeper than 32 levels"},
        {{T, "heartbeat", "{\"a\":\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"}"}, 3, 0, ""},
        {{T, "job",
          "{\"retry\":0,\"kind\":\"screen\",\"contract\":\"c\",\"config\":\"\","
          "\"replicate\":0,\"time_limit_s\":0}"},
         3,
         -EPROTO,
         "frame 2 (body): job: field \"job_id\" is missing (an id"},
        {{T, "job",
          "{\"job_id\":\"j1\",\"retry\":\"0\",\"kind\":\"screen\",\"contract\":\"c\","
          "\"config\":\"\",\"replicate\":0,\"time_limit_s\":0}"},
         3,
         -EPROTO,
         "job: field \"retry\": expected an integer >= 0, got a string"},
        {{T, "job",
          "{\"job_id\":\"j1\",\"retry\":0,\"kind\":\"screen\",\"contract\":\"c\","
          "\"config\":\"\",\"replicate\":0,\"time_limit_s\":0,\"nodelist\":\"gpu07,,gpu08\"}"},
         3,
         -EPROTO,
         "field \"nodelist\": expected a node list (host names of A-Z a-z 0-9 . _ - separated by "
         "commas), got a node list with an empty name at offset 6"},
        {{T, "job",
          "{\"job_id\":\"j1\",\"retry\":0,\"kind\":\"screen\",\"contract\":\"c\","
          "\"config\":\"\",\"replicate\":0,\"time_limit_s\":0,\"nodelist\":\"gpu[07-08]\"}"},
         3,
         -EPROTO,
         "got a node list with byte 0x5b at offset 3"},
        {{T, "job",
          "{\"job_id\":\"j1\",\"retry\":-1,\"kind\":\"screen\",\"contract\":\"c\","
          "\"config\":\"\",\"replicate\":0,\"time_limit_s\":0}"},
         3,
         -EPROTO,
         "field \"retry\": expected an integer >= 0, got -1"},
        {{T, "job",
          "{\"job_id\":\"j1\",\"retry\":0.5,\"kind\":\"screen\",\"contract\":\"c\","
          "\"config\":\"\",\"replicate\":0,\"time_limit_s\":0}"},
         3,
         -EPROTO,
         "field \"retry\": expected an integer >= 0, got 0.5"},
        {{T, "job",
          "{\"job_id\":\"j 1\",\"retry\":0,\"kind\":\"screen\",\"contract\":\"c\","
          "\"config\":\"\",\"replicate\":0,\"time_limit_s\":0}"},
         3,
         -EPROTO,
         "field \"job_id\": expected an id (1-200 characters of A-Z a-z 0-9 . _ : / @ + = -), got "
         "a string with byte 0x20 at offset 1"},
        {{T, "job",
          "{\"job_id\":\"\",\"retry\":0,\"kind\":\"screen\",\"contract\":\"c\","
          "\"config\":\"\",\"replicate\":0,\"time_limit_s\":0}"},
         3,
         -EPROTO,
         "field \"job_id\": expected an id (1-200 characters of A-Z a-z 0-9 . _ : / @ + = -), got "
         "a string of 0 characters"},
        {{T, "job",
          "{\"job_id\":\"j1\",\"retry\":0,\"kind\":\"screen\",\"contract\":\"\","
          "\"config\":\"\",\"replicate\":0,\"time_limit_s\":0}"},
         3,
         -EPROTO,
         "field \"contract\": expected a non-empty string, got an empty string"},
        {{T, "job",
          "{\"job_id\":\"j1\",\"retry\":0,\"kind\":\"screen\",\"contract\":\"c\","
          "\"config\":\"\",\"replicate\":0,\"time_limit_s\":-1}"},
         3,
         -EPROTO,
         "field \"time_limit_s\": expected a finite number >= 0, got -1"},
        {{T, "job",
          "{\"job_id\":\"j1\",\"retry\":0,\"kind\":\"screen\",\"contract\":\"c\","
          "\"config\":\"\",\"replicate\":0,\"time_limit_s\":1e999}"},
         3,
         -EPROTO,
         "field \"time_limit_s\": expected a finite number >= 0"},
        {{T, "job",
          "{\"job_id\":\"j1\",\"retry\":0,\"kind\":\"screen\",\"contract\":\"c\","
          "\"config\":\"\",\"replicate\":0,\"time_limit_s\":0,\"sim_seed\":\"-1\"}"},
         3,
         -EPROTO,
         "field \"sim_seed\": expected a decimal unsigned 64-bit integer"},
        {{T, "job",
          "{\"job_id\":\"j1\",\"retry\":0,\"retry\":1,\"kind\":\"screen\",\"contract\":\"c\","
          "\"config\":\"\",\"replicate\":0,\"time_limit_s\":0}"},
         3,
         -EPROTO,
         "job: field \"retry\" appears more than once"},
        {{T, "ready",
          "{\"worker\":\"w1\",\"host\":\"h\",\"gpus\":8,\"gpu_type\":\"\",\"nodes\":0,"
          "\"launchers\":[],\"programs\":[],\"running\":[],\"finished\":[]}"},
         3,
         -EPROTO,
         "ready: field \"nodes\": expected an integer >= 1, got 0"},
        {{T, "ready",
          "{\"worker\":\"w1\",\"host\":\"h\",\"gpus\":8,\"gpu_type\":\"\",\"nodes\":1,"
          "\"launchers\":[\"local\",3],\"programs\":[],\"running\":[],\"finished\":[]}"},
         3,
         -EPROTO,
         "ready: field \"launchers[1]\": expected a string, got 3"},
        {{T, "ready",
          "{\"worker\":\"w1\",\"host\":\"h\",\"gpus\":8,\"gpu_type\":\"\",\"nodes\":1,"
          "\"launchers\":[],\"programs\":{},\"running\":[],\"finished\":[]}"},
         3,
         -EPROTO,
         "field \"programs\": expected an array of strings, got an object"},
        {{T, "ready",
          "{\"worker\":\"w1\",\"host\":\"h\",\"gpus\":8,\"gpu_type\":\"\",\"nodes\":1,"
          "\"launchers\":[],\"programs\":[],\"running\":[{\"job_id\":\"a\"}],\"finished\":[]}"},
         3,
         -EPROTO,
         "ready: field \"running[0].retry\" is missing"},
        {{T, "ready",
          "{\"worker\":\"w1\",\"host\":\"h\",\"gpus\":8,\"gpu_type\":\"\",\"nodes\":1,"
          "\"launchers\":[],\"programs\":[],\"running\":[],\"finished\":[7]}"},
         3,
         -EPROTO,
         "ready: field \"finished[0]\": expected an object, got 7"},
        {{T, "job-ack", "{\"job_id\":\"j1\",\"retry\":0,\"accepted\":false}"},
         3,
         -EPROTO,
         "job-ack: field \"reason\" is required"},
        {{T, "job-ack", "{\"job_id\":\"j1\",\"retry\":0,\"accepted\":1}"},
         3,
         -EPROTO,
         "field \"accepted\": expected true or false, got 1"},
        {{T, "result-ack", "{\"job_id\":\"j1\",\"retry\":0,\"status\":\"ok\"}"},
         3,
         -EPROTO,
         "field \"status\": expected \"stored\", \"duplicate\" or \"discarded\""},
        {{T, "progress", "{\"job_id\":\"j1\",\"retry\":0,\"lines\":\"x\"}"},
         3,
         -EPROTO,
         "progress: field \"lines\": expected an array of strings, got a string"},
        {{T, "cancel", "{\"job_id\":\"j1\",\"retry\":0}"},
         3,
         -EPROTO,
         "cancel: field \"reason\" is missing"},
        {{T, "disconnect", "{\"reason\":null}"},
         3,
         -EPROTO,
         "disconnect: field \"reason\": expected a string, got null"},
        {{T, "heartbeat", "{\"seq\":-3}"}, 3, -EPROTO, "heartbeat: field \"seq\""},
        {{T, "heartbeat", "{\"unknown\":[1,{\"x\":2}]}"}, 3, 0, ""},
        {{T, "result",
          "{\"job_id\":\"j1\",\"retry\":0,\"memo\":{},\"run\":null,\"samples\":[1],"
          "\"gpus\":[]}"},
         3,
         -EPROTO,
         "result: \"samples\" and \"gpus\" must be empty when \"run\" is null"},
        {{T, "result",
          "{\"job_id\":\"j1\",\"retry\":0,\"memo\":[],\"run\":null,\"samples\":[],"
          "\"gpus\":[]}"},
         3,
         -EPROTO,
         "result: field \"memo\": expected an object, got an array"},
        {{T, "result",
          "{\"job_id\":\"j1\",\"retry\":0,\"memo\":{},\"run\":{\"config_id\":\"xyz\"},"
          "\"samples\":[],\"gpus\":[]}"},
         3,
         -EPROTO,
         "result: field \"run.config_id\": expected 16 hex digits"},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
        decode_bad(&cases[i]);
}
END_TEST

/* A result whose run breaks a rule deep inside, each named. */
START_TEST(malformed_result_fields)
{
    static const struct {
        const char *path, *value, *needle;
    } cases[] = {
        {"run", "{\"kind\":1}", "run.config_id"},
        {"run.kind", "\"\"", "run.kind"},
        {"run.retry", "2", "field \"run.retry\" (2) differs from \"retry\" (1)"},
        {"run.replicate", "-1", "run.replicate"},
        {"run.started", "\"later\"", "run.started\": expected a number or \"nan\""},
        {"run.outcome", "null", "run.outcome"},
        {"run.worker", "3", "run.worker"},
        {"samples.0", "3", "samples[0]\": expected an object"},
        {"samples.1.iteration", "1.5", "samples[1].iteration"},
        {"samples.2.losses", "[]", "samples[2].losses\": expected an object"},
        {"samples.2.losses.lm loss", "\"NaN\"", "samples[2].losses.lm loss"},
        {"samples.3.nan", "-1", "samples[3].nan"},
        {"gpus.1.peak_bytes", "\"12a\"", "gpus[1].peak_bytes"},
        {"gpus.1.peak_bytes", "1e300", "gpus[1].peak_bytes"},
        {"gpus.0.rank", "-2", "gpus[0].rank"},
        {"gpus.2.host", "7", "gpus[2].host"},
    };
    sample_run x;
    size_t i;
    sample_fill(&x, "0123456789abcdef", "a=1\n");
    /* this test reprints with cJSON's own printer, which turns DBL_MAX into
     * a number that reads back as inf (why result_json.c prints its own) */
    x.l[2][0].value = 1.5;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cJSON *body = mt_proto_result_body("j1", 1, "{}", &x.r), *at = body, *v;
        char path[128], *tok, *save = NULL, *text, err[600] = "";
        const void *fr[3];
        size_t ln[3];
        mt_proto_msg m;
        int rc;
        /* reparse so raw numbers become ordinary ones, as on the wire */
        text = cJSON_PrintUnformatted(body);
        cJSON_Delete(body);
        body = at = cJSON_Parse(text);
        free(text);
        snprintf(path, sizeof path, "%s", cases[i].path);
        for (tok = strtok_r(path, ".", &save); tok; tok = strtok_r(NULL, ".", &save)) {
            char *rest = strtok_r(NULL, "", &save);
            cJSON *parent = at;
            if (cJSON_IsArray(parent))
                at = cJSON_GetArrayItem(parent, atoi(tok));
            else
                at = cJSON_GetObjectItemCaseSensitive(parent, tok);
            ck_assert_msg(at != NULL, "%s: no %s", cases[i].path, tok);
            if (!rest) {
                v = cJSON_Parse(cases[i].value);
                ck_assert_ptr_nonnull(v);
                if (cJSON_IsArray(parent))
                    cJSON_ReplaceItemInArray(parent, atoi(tok), v);
                else
                    cJSON_ReplaceItemInObjectCaseSensitive(parent, tok, v);
                break;
            }
            save = rest;
        }
        text = cJSON_PrintUnformatted(body);
        fr[0] = MT_PROTO_TAG, ln[0] = strlen(MT_PROTO_TAG);
        fr[1] = "result", ln[1] = 6;
        fr[2] = text, ln[2] = strlen(text);
        rc = mt_proto_decode(fr, ln, 3, &m, err, sizeof err);
        ck_assert_msg(rc == -EPROTO, "%s: rc %d", cases[i].path, rc);
        ck_assert_msg(strstr(err, cases[i].needle) != NULL, "%s: \"%s\" lacks \"%s\"",
                      cases[i].path, err, cases[i].needle);
        /* the sender refuses the same body */
        ck_assert_int_eq(mt_proto_validate(MT_PROTO_RESULT, body, err, sizeof err), -EINVAL);
        free(text);
        cJSON_Delete(body);
    }
}
END_TEST

START_TEST(oversized_rejected)
{
    size_t n = MT_PROTO_MAX_BODY + 1;
    char *big = malloc(n + 1), err[512] = "";
    const void *fr[3] = {MT_PROTO_TAG, "heartbeat", big};
    size_t ln[3] = {strlen(MT_PROTO_TAG), 9, n};
    mt_proto_msg m;
    mt_proto_job j = {.job_id = "j1", .kind = "screen", .config = ""};
    cJSON *body;
    pair p;
    /* {"pad":"xxxx...x"} exactly one byte over */
    memset(big, 'x', n);
    memcpy(big, "{\"pad\":\"", 8);
    memcpy(big + n - 2, "\"}", 2);
    big[n] = '\0';
    ck_assert_int_eq(mt_proto_decode(fr, ln, 3, &m, err, sizeof err), -EMSGSIZE);
    ck_assert_ptr_nonnull(
        strstr(err, "frame 2 (body): heartbeat: 8388609 bytes, over the limit of 8388608"));
    /* at the limit it passes */
    big[n - 3] = '"', big[n - 2] = '}';
    ln[2] = n - 1;
    ck_assert_int_eq(mt_proto_decode(fr, ln, 3, &m, err, sizeof err), 0);
    mt_proto_msg_clear(&m);
    /* within the bytes but too many values: refused before parsing */
    {
        size_t k, vals = MT_PROTO_MAX_VALUES + 1, len = 0;
        char *many = malloc(8 + vals * 2 + 4);
        len += (size_t)sprintf(many, "{\"a\":[");
        for (k = 0; k + 1 < vals; k++) {
            many[len++] = '0';
            many[len++] = ',';
        }
        many[len++] = '0';
        memcpy(many + len, "]}", 2);
        len += 2;
        fr[2] = many, ln[2] = len;
        ck_assert_int_eq(mt_proto_decode(fr, ln, 3, &m, err, sizeof err), -EMSGSIZE);
        ck_assert_ptr_nonnull(strstr(err, "more than 2000000 JSON values"));
        free(many);
        fr[2] = big;
    }

    pair_open(&p, "inproc://proto-big");
    /* the sender refuses a body over the limit */
    big[n - 3] = 'x';
    big[n] = '\0';
    j.contract = big;
    body = mt_proto_job_body(&j);
    ck_assert_int_eq(mt_proto_send(p.dealer, NULL, 0, MT_PROTO_JOB, body, err, sizeof err),
                     -EMSGSIZE);
    ck_assert_ptr_nonnull(strstr(err, "send job: body of"));
    cJSON_Delete(body);
    /* a raw oversized frame over inproc reaches recv, which drops it */
    ck_assert_int_eq(zmq_send(p.dealer, MT_PROTO_TAG, strlen(MT_PROTO_TAG), ZMQ_SNDMORE), 9);
    ck_assert_int_eq(zmq_send(p.dealer, "job", 3, ZMQ_SNDMORE), 3);
    ck_assert_int_eq(zmq_send(p.dealer, big, n, 0), (int)n);
    ck_assert_int_eq(recv_within(p.router, 1, &m, 5000, err, sizeof err), -EMSGSIZE);
    ck_assert_uint_eq(m.idlen, 2);
    ck_assert_uint_eq(m.frames, 4);
    pair_close(&p);

    /* over TCP, ZMQ_MAXMSGSIZE drops the connection before the frame is
     * ever buffered whole; the router keeps serving others */
    pair_open(&p, "tcp://127.0.0.1:*");
    {
        void *other;
        ck_assert_int_eq(zmq_send(p.dealer, MT_PROTO_TAG, strlen(MT_PROTO_TAG), ZMQ_SNDMORE), 9);
        ck_assert_int_eq(zmq_send(p.dealer, "job", 3, ZMQ_SNDMORE), 3);
        big = realloc(big, MT_PROTO_MAX_BODY + 8192);
        memset(big, 'x', MT_PROTO_MAX_BODY + 8192);
        ck_assert_int_eq(zmq_send(p.dealer, big, MT_PROTO_MAX_BODY + 8192, 0),
                         (int)(MT_PROTO_MAX_BODY + 8192));
        recv_none(p.router, 1, 1000);
        other = new_dealer(p.ctx, "w1");
        ck_assert_int_eq(zmq_connect(other, p.endpoint), 0);
        send_ok(other, NULL, MT_PROTO_HEARTBEAT, mt_proto_heartbeat_body(NULL, NULL, 0));
        recv_ok(p.router, 1, MT_PROTO_HEARTBEAT, &m);
        mt_proto_msg_clear(&m);
        zmq_close(other);
    }
    pair_close(&p);
    free(big);
}
END_TEST

/* Bad messages over a real socket: dropped with a reason and the sender's
 * routing id; the stream stays in step, the next good message arrives. */
START_TEST(malformed_over_socket)
{
    static const struct {
        const char *frames[7];
        int n, rc;
        const char *needle;
    } cases[] = {
        {{"moetune/2", "ready", "{}"}, 3, -EPROTONOSUPPORT, "protocol version 2"},
        {{MT_PROTO_TAG, "reddy", "{}"}, 3, -EPROTO, "unknown command \"reddy\""},
        {{MT_PROTO_TAG, "ready"}, 2, -EPROTO, "message has 2 frames"},
        {{MT_PROTO_TAG, "ready", "{}", "{}", "{}", "{}", "{}"}, 7, -EPROTO, "message has 7 frames"},
        {{MT_PROTO_TAG, "heartbeat", "{nope"}, 3, -EPROTO, "not valid JSON"},
        {{MT_PROTO_TAG, "ready", "{}"}, 3, -EPROTO, "ready: field \"worker\" is missing"},
    };
    pair p;
    size_t i;
    int k;
    pair_open(&p, "tcp://127.0.0.1:*");
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mt_proto_msg m;
        char err[512] = "";
        for (k = 0; k < cases[i].n; k++)
            ck_assert_int_ge(zmq_send(p.dealer, cases[i].frames[k], strlen(cases[i].frames[k]),
                                      k + 1 < cases[i].n ? ZMQ_SNDMORE : 0),
                             0);
        ck_assert_int_eq(recv_within(p.router, 1, &m, 5000, err, sizeof err), cases[i].rc);
        ck_assert_msg(strstr(err, cases[i].needle) != NULL, "\"%s\" lacks \"%s\"", err,
                      cases[i].needle);
        ck_assert_uint_eq(m.idlen, 2);
        ck_assert(memcmp(m.identity, "w1", 2) == 0);
        ck_assert_uint_eq(m.frames, (size_t)cases[i].n + 1);
        ck_assert_ptr_null(m.body);
        /* the next good one still decodes */
        send_ok(p.dealer, NULL, MT_PROTO_HEARTBEAT, mt_proto_heartbeat_body(NULL, NULL, 0));
        recv_ok(p.router, 1, MT_PROTO_HEARTBEAT, &m);
        mt_proto_msg_clear(&m);
    }
    pair_close(&p);
}
END_TEST

/* The sender validates: nothing malformed leaves. */
START_TEST(send_validates)
{
    pair p;
    char err[512];
    cJSON *b;
    mt_proto_job_ack a = {"j1", 0, 0, NULL, NULL};
    pair_open(&p, "inproc://proto-send");
    b = mt_proto_job_ack_body(&a);
    ck_assert_int_eq(mt_proto_send(p.dealer, NULL, 0, MT_PROTO_JOB_ACK, b, err, sizeof err),
                     -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "job-ack: field \"reason\" is required"));
    cJSON_Delete(b);
    b = cJSON_CreateObject();
    ck_assert_int_eq(mt_proto_send(p.dealer, NULL, 0, MT_PROTO_JOB, b, err, sizeof err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "job: field \"job_id\" is missing"));
    ck_assert_int_eq(mt_proto_send(p.dealer, NULL, 0, 99, b, err, sizeof err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "unknown command 99"));
    ck_assert_int_eq(mt_proto_send(p.dealer, NULL, 0, MT_PROTO_NONE, b, err, sizeof err), -EINVAL);
    cJSON_Delete(b);
    b = cJSON_CreateArray();
    ck_assert_int_eq(mt_proto_send(p.dealer, NULL, 0, MT_PROTO_HEARTBEAT, b, err, sizeof err),
                     -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "heartbeat: the body is an array, expected an object"));
    ck_assert_int_eq(mt_proto_send(p.dealer, NULL, 0, MT_PROTO_HEARTBEAT, NULL, err, sizeof err),
                     -EINVAL);
    cJSON_Delete(b);
    /* bad routing ids */
    b = mt_proto_heartbeat_body(NULL, NULL, 0);
    ck_assert_int_eq(mt_proto_send(p.router, "", 0, MT_PROTO_HEARTBEAT, b, err, sizeof err),
                     -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "routing id of 0 bytes"));
    cJSON_Delete(b);
    /* bad worker names for the DEALER's routing id */
    ck_assert_int_eq(mt_proto_socket_setup(p.dealer, 0, "bad name", err, sizeof err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "worker name"));
    ck_assert_int_eq(mt_proto_socket_setup(p.dealer, 0, NULL, err, sizeof err), -EINVAL);
    recv_none(p.router, 1, 100);
    /* the builders refuse missing required strings */
    ck_assert_ptr_null(mt_proto_job_body(&(mt_proto_job){.job_id = "j"}));
    ck_assert_ptr_null(mt_proto_result_body("j", 0, "[1]", NULL));
    ck_assert_ptr_null(mt_proto_result_body("j", 0, "{", NULL));
    pair_close(&p);
}
END_TEST

START_TEST(command_names)
{
    int i;
    for (i = 1; i < MT_PROTO_COMMANDS; i++) {
        const char *n = mt_proto_cmd_name(i);
        ck_assert_int_eq(mt_proto_cmd_parse(n, strlen(n)), i);
    }
    ck_assert_str_eq(mt_proto_cmd_name(MT_PROTO_RESULT_ACK), "result-ack");
    ck_assert_str_eq(mt_proto_cmd_name(0), "?");
    ck_assert_str_eq(mt_proto_cmd_name(MT_PROTO_COMMANDS), "?");
    ck_assert_int_eq(mt_proto_cmd_parse("ready", 4), MT_PROTO_NONE);
    ck_assert_int_eq(mt_proto_cmd_parse(NULL, 0), MT_PROTO_NONE);
}
END_TEST

/* ---- a finished run into a real store ------------------------------------------------ */

START_TEST(result_into_store)
{
    tk *t = tk_open(CONTRACT);
    char *canonical = mt_config_canonical(t->cfg), id[17], *dir = tmp_dir(), *text, err[512];
    sample_run x;
    mt_store *s;
    mt_diag *d = mt_diag_new();
    mt_store_result back;
    mt_store_sample *sv;
    mt_store_gpu_mem *gv;
    mt_store_run *runs;
    size_t ns, ng, nr, i;
    int64_t run_id, again;
    mt_proto_msg m;
    mt_proto_result v;
    const void *fr[3];
    size_t ln[3];
    cJSON *body;

    mt_config_id(t->cfg, id);
    sample_fill(&x, id, canonical);
    /* peaks the store can rank (byte counts within SQLite's int64 either way) */
    body = mt_proto_result_body("job/screen/x/2", 1, memo_text, &x.r);
    text = cJSON_PrintUnformatted(body);
    cJSON_Delete(body);
    fr[0] = MT_PROTO_TAG, ln[0] = strlen(MT_PROTO_TAG);
    fr[1] = "result", ln[1] = 6;
    fr[2] = text, ln[2] = strlen(text);
    ck_assert_msg(mt_proto_decode(fr, ln, 3, &m, err, sizeof err) == 0, "%s", err);
    free(text);
    ck_assert_int_eq(mt_proto_get_result(&m, &v), 0);
    ck_assert_msg(mt_proto_result_to_store(v.run, v.samples, v.gpus, &back, err, sizeof err) == 0,
                  "%s", err);
    result_eq(&x.r, &back);

    s = mt_store_open(dir, t->contract, d);
    ck_assert_msg(s != NULL, "%s", mt_diag_count(d) ? mt_diag_at(d, 0)->message : "?");
    ck_assert_msg(mt_store_put_result(s, &back, &run_id, d) == 0, "%s",
                  mt_diag_count(d) ? mt_diag_at(d, 0)->message : "?");
    /* the same result again (a worker resending after a lost result-ack) */
    ck_assert_int_eq(mt_store_put_result(s, &back, &again, d), 1);
    ck_assert_int_eq(again, run_id);
    ck_assert_int_eq(mt_store_list_runs(s, NULL, NULL, &runs, &nr, d), 0);
    ck_assert_uint_eq(nr, 1);
    ck_assert(bits_eq(runs[0].started, x.r.run.started));
    ck_assert(isnan(runs[0].sim_s));
    ck_assert_str_eq(runs[0].evidence, x.r.run.evidence);
    mt_store_runs_free(runs, nr);
    ck_assert_int_eq(mt_store_samples(s, run_id, &sv, &ns, d), 0);
    ck_assert_uint_eq(ns, 5);
    for (i = 0; i < ns; i++) {
        ck_assert_int_eq(sv[i].iteration, x.s[i].iteration);
        ck_assert(bits_eq(sv[i].elapsed_ms, x.s[i].elapsed_ms));
        ck_assert_uint_eq(sv[i].n_losses, x.s[i].n_losses);
    }
    ck_assert(isnan(sv[1].losses[1].value));
    ck_assert(isinf(sv[2].losses[1].value) && sv[2].losses[1].value > 0);
    ck_assert(isinf(sv[3].losses[1].value) && sv[3].losses[1].value < 0);
    mt_store_samples_free(sv, ns);
    ck_assert_int_eq(mt_store_gpu_memory(s, run_id, &gv, &ng, d), 0);
    ck_assert_uint_eq(ng, 4);
    ck_assert_int_eq(gv[0].peak_bytes, INT64_MAX); /* hottest first */
    mt_store_gpu_memory_free(gv, ng);
    mt_store_destroy(&s);
    mt_proto_result_release(&back);
    ck_assert_ptr_null(back.samples);
    mt_proto_msg_clear(&m);
    mt_diag_destroy(&d);
    free(canonical);
    tk_close(&t);
    rm_rf(dir);
}
END_TEST

/* ---- keys ------------------------------------------------------------------------ */

static int file_mode(const char *path)
{
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    return (int)(sb.st_mode & 07777);
}

START_TEST(keygen_and_load)
{
    char *dir = tmp_dir(), *kd = join(dir, "keys"), *kp, *pp, err[512], pub[41], pub2[41];
    char *text;
    mt_keypair k, k2;
    mode_t old = umask(0);
    ck_assert_msg(mt_keys_generate(kd, "coord", 0, pub, err, sizeof err) == 0, "%s", err);
    umask(old);
    kp = join(kd, "coord.key");
    pp = join(kd, "coord.pub");
    ck_assert_int_eq(file_mode(kp), 0600);
    ck_assert_int_eq(file_mode(pp), 0644);
    ck_assert_int_eq(file_mode(kd), 0700);
    ck_assert_uint_eq(strlen(pub), 40);
    /* the public file holds the public key; the secret file not */
    text = tk_slurp(pp);
    ck_assert_ptr_nonnull(strstr(text, pub));
    free(text);
    ck_assert_msg(mt_keys_load(kd, "coord", &k, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(k.public_key, pub);
    text = tk_slurp(kp);
    ck_assert_ptr_nonnull(strstr(text, k.secret_key));
    ck_assert_ptr_null(strstr(text, pub));
    free(text);
    ck_assert_int_eq(mt_keys_load_public(pp, pub2, err, sizeof err), 0);
    ck_assert_str_eq(pub2, pub);
    /* no silent replacement */
    ck_assert_int_eq(mt_keys_generate(kd, "coord", 0, NULL, err, sizeof err), -EEXIST);
    ck_assert_ptr_nonnull(strstr(err, "use --force"));
    ck_assert_int_eq(mt_keys_generate(kd, "coord", 1, pub2, err, sizeof err), 0);
    ck_assert_str_ne(pub2, pub);
    ck_assert_int_eq(mt_keys_load(kd, "coord", &k2, err, sizeof err), 0);
    ck_assert_str_eq(k2.public_key, pub2);
    ck_assert_int_eq(file_mode(kp), 0600);
    /* names */
    ck_assert_int_eq(mt_keys_generate(kd, "../evil", 0, NULL, err, sizeof err), -EINVAL);
    ck_assert_int_eq(mt_keys_generate(kd, ".hidden", 0, NULL, err, sizeof err), -EINVAL);
    ck_assert_int_eq(mt_keys_generate(kd, "", 0, NULL, err, sizeof err), -EINVAL);
    ck_assert_int_eq(mt_keys_load(kd, "missing", &k2, err, sizeof err), -ENOENT);
    /* wipe */
    mt_keypair_wipe(&k);
    ck_assert_int_eq(k.secret_key[0], 0);
    mt_keypair_wipe(&k2);
    free(kp);
    free(pp);
    free(kd);
    rm_rf(dir);
}
END_TEST

START_TEST(secret_key_permissions)
{
    char *dir = tmp_dir(), *kp, *pp, *link_path, err[512], secret[41];
    static const int bad_modes[] = {0640, 0604, 0660, 0644, 0700, 0620};
    mt_keypair k;
    size_t i;
    ck_assert_int_eq(mt_keys_generate(dir, "w1", 0, NULL, err, sizeof err), 0);
    ck_assert_int_eq(mt_keys_load(dir, "w1", &k, err, sizeof err), 0);
    memcpy(secret, k.secret_key, sizeof secret);
    kp = join(dir, "w1.key");
    pp = join(dir, "w1.pub");
    for (i = 0; i < sizeof bad_modes / sizeof bad_modes[0]; i++) {
        int rc;
        ck_assert_int_eq(chmod(kp, (mode_t)bad_modes[i]), 0);
        rc = mt_keys_load(dir, "w1", &k, err, sizeof err);
        if ((bad_modes[i] & 077) == 0) {
            ck_assert_msg(rc == 0, "mode %o: %s", bad_modes[i], err);
            continue;
        }
        ck_assert_msg(rc == -EACCES, "mode %o: rc %d", bad_modes[i], rc);
        ck_assert_ptr_nonnull(strstr(err, "accessible by group or others"));
        ck_assert_ptr_nonnull(strstr(err, "chmod 600"));
        ck_assert_ptr_null(strstr(err, secret));
        ck_assert_int_eq(k.secret_key[0], 0); /* nothing half loaded */
    }
    ck_assert_int_eq(chmod(kp, 0600), 0);
    ck_assert_int_eq(mt_keys_load(dir, "w1", &k, err, sizeof err), 0);
    /* a symlink to the key is not followed */
    link_path = join(dir, "alias.key");
    ck_assert_int_eq(symlink(kp, link_path), 0);
    ck_assert_int_eq(mt_keys_load(dir, "alias", &k, err, sizeof err), -EACCES);
    ck_assert_ptr_nonnull(strstr(err, "symbolic link"));
    /* garbage and a mismatched public half */
    write_file(kp, "# comment\nnot-a-key\n", 0600);
    ck_assert_int_eq(mt_keys_load(dir, "w1", &k, err, sizeof err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "the key line has 9 characters, expected 40"));
    write_file(kp, "\n", 0600);
    ck_assert_int_eq(mt_keys_load(dir, "w1", &k, err, sizeof err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "no key line"));
    {
        char other[41], text[128];
        ck_assert_int_eq(mt_keys_generate(dir, "w2", 0, other, err, sizeof err), 0);
        snprintf(text, sizeof text, "%s\n", secret);
        write_file(kp, text, 0600);
        ck_assert_int_eq(mt_keys_load(dir, "w1", &k, err, sizeof err), 0);
        snprintf(text, sizeof text, "# w2's public key by mistake\n%s\n", other);
        write_file(pp, text, 0644);
        ck_assert_int_eq(mt_keys_load(dir, "w1", &k, err, sizeof err), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "is not the public half of"));
        ck_assert_ptr_null(strstr(err, secret));
        ck_assert_ptr_null(strstr(err, other));
    }
    mt_keypair_wipe(&k);
    free(kp);
    free(pp);
    free(link_path);
    rm_rf(dir);
}
END_TEST

/* ---- CURVE with the ZAP handler ------------------------------------------------------ */

typedef struct logcap {
    pthread_mutex_t mu;
    char text[16384];
    int lines, refused;
} logcap;

static void cap_log(void *ctx, int level, const char *line)
{
    logcap *c = ctx;
    pthread_mutex_lock(&c->mu);
    strncat(c->text, line, sizeof c->text - strlen(c->text) - 2);
    strcat(c->text, "\n");
    c->lines++;
    c->refused += level;
    pthread_mutex_unlock(&c->mu);
}

typedef struct curve_env {
    char *dir, *keys, *known;
    mt_keypair coord, w1, intruder;
    void *ctx, *router;
    mt_zap *zap;
    logcap log;
    char endpoint[256];
} curve_env;

static void curve_open(curve_env *e)
{
    char err[512], *src, *dst, *text;
    memset(e, 0, sizeof *e);
    pthread_mutex_init(&e->log.mu, NULL);
    e->dir = tmp_dir();
    e->keys = join(e->dir, "keys");
    e->known = join(e->dir, "known");
    ck_assert_int_eq(mt_keys_generate(e->keys, "coord", 0, NULL, err, sizeof err), 0);
    ck_assert_int_eq(mt_keys_generate(e->keys, "w1", 0, NULL, err, sizeof err), 0);
    ck_assert_int_eq(mt_keys_generate(e->keys, "intruder", 0, NULL, err, sizeof err), 0);
    ck_assert_int_eq(mt_keys_load(e->keys, "coord", &e->coord, err, sizeof err), 0);
    ck_assert_int_eq(mt_keys_load(e->keys, "w1", &e->w1, err, sizeof err), 0);
    ck_assert_int_eq(mt_keys_load(e->keys, "intruder", &e->intruder, err, sizeof err), 0);
    /* the coordinator knows w1 (its .pub copied in), not the intruder */
    ck_assert_int_eq(mkdir(e->known, 0755), 0);
    src = join(e->keys, "w1.pub");
    dst = join(e->known, "w1.pub");
    text = tk_slurp(src);
    write_file(dst, text, 0644);
    free(text);
    free(src);
    free(dst);
    e->ctx = zmq_ctx_new();
    e->zap = mt_zap_start(e->ctx, e->known, cap_log, &e->log, err, sizeof err);
    ck_assert_msg(e->zap != NULL, "%s", err);
    e->router = zmq_socket(e->ctx, ZMQ_ROUTER);
    {
        int zero = 0;
        zmq_setsockopt(e->router, ZMQ_LINGER, &zero, sizeof zero);
    }
    ck_assert_int_eq(mt_proto_socket_setup(e->router, 1, NULL, err, sizeof err), 0);
    ck_assert_msg(mt_curve_server(e->router, &e->coord, e->zap, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(zmq_bind(e->router, "tcp://127.0.0.1:*"), 0);
    {
        size_t len = sizeof e->endpoint;
        ck_assert_int_eq(zmq_getsockopt(e->router, ZMQ_LAST_ENDPOINT, e->endpoint, &len), 0);
    }
}

/* No key material in anything logged. */
static void curve_check_logs(curve_env *e)
{
    const mt_keypair *all[] = {&e->coord, &e->w1, &e->intruder};
    size_t i;
    for (i = 0; i < 3; i++) {
        ck_assert_ptr_null(strstr(e->log.text, all[i]->public_key));
        ck_assert_ptr_null(strstr(e->log.text, all[i]->secret_key));
    }
}

static void curve_close(curve_env *e)
{
    zmq_close(e->router);
    mt_zap_stop(&e->zap);
    ck_assert_ptr_null(e->zap);
    zmq_ctx_term(e->ctx);
    mt_keypair_wipe(&e->coord);
    mt_keypair_wipe(&e->w1);
    mt_keypair_wipe(&e->intruder);
    free(e->keys);
    free(e->known);
    rm_rf(e->dir);
}

static void *curve_dealer(curve_env *e, const char *name, const mt_keypair *own,
                          const char *server_public)
{
    void *d = new_dealer(e->ctx, name);
    char err[512];
    ck_assert_msg(mt_curve_client(d, own, server_public, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(zmq_connect(d, e->endpoint), 0);
    return d;
}

START_TEST(curve_known_key_talks)
{
    curve_env e;
    void *d;
    mt_proto_msg m;
    unsigned long ok, no;
    mt_proto_ready r = {.worker = "w1", .host = "node0", .gpu_type = "", .nodes = 1};
    curve_open(&e);
    d = curve_dealer(&e, "w1", &e.w1, e.coord.public_key);
    send_ok(d, NULL, MT_PROTO_READY, mt_proto_ready_body(&r, NULL, 0, NULL, 0, NULL, 0, NULL, 0));
    recv_ok(e.router, 1, MT_PROTO_READY, &m);
    ck_assert_str_eq(m.user_id, "w1"); /* the key's name, from the ZAP reply */
    ck_assert(strncmp(m.peer, "127.0.0.1", 9) == 0);
    mt_proto_msg_clear(&m);
    send_ok(e.router, "w1", MT_PROTO_HEARTBEAT, mt_proto_heartbeat_body(NULL, NULL, 0));
    recv_ok(d, 0, MT_PROTO_HEARTBEAT, &m);
    mt_proto_msg_clear(&m);
    mt_zap_counts(e.zap, &ok, &no);
    ck_assert_uint_eq(ok, 1);
    ck_assert_uint_eq(no, 0);
    ck_assert_ptr_nonnull(strstr(e.log.text, "admitted worker key \"w1\" from 127.0.0.1"));
    curve_check_logs(&e);
    zmq_close(d);
    curve_close(&e);
}
END_TEST

START_TEST(curve_unknown_key_refused)
{
    curve_env e;
    void *d;
    unsigned long ok, no;
    int i;
    curve_open(&e);
    d = curve_dealer(&e, "intruder", &e.intruder, e.coord.public_key);
    send_ok(d, NULL, MT_PROTO_HEARTBEAT, mt_proto_heartbeat_body(NULL, NULL, 0));
    recv_none(e.router, 1, 1500);
    for (i = 0; i < 50; i++) {
        mt_zap_counts(e.zap, &ok, &no);
        if (no)
            break;
        usleep(20000);
    }
    ck_assert_uint_eq(ok, 0);
    ck_assert_uint_ge(no, 1);
    pthread_mutex_lock(&e.log.mu);
    ck_assert_msg(strstr(e.log.text,
                         "refused a CURVE client from 127.0.0.1: its public key is not one of the "
                         "known worker keys") != NULL,
                  "log: %s", e.log.text);
    pthread_mutex_unlock(&e.log.mu);
    curve_check_logs(&e);
    zmq_close(d);
    curve_close(&e);
}
END_TEST

START_TEST(curve_wrong_server_key)
{
    curve_env e;
    void *d, *plain;
    unsigned long ok, no;
    char err[256];
    curve_open(&e);
    /* w1's own keys, but it trusts the wrong server */
    d = curve_dealer(&e, "w1", &e.w1, e.intruder.public_key);
    send_ok(d, NULL, MT_PROTO_HEARTBEAT, mt_proto_heartbeat_body(NULL, NULL, 0));
    recv_none(e.router, 1, 1500);
    mt_zap_counts(e.zap, &ok, &no);
    ck_assert_uint_eq(ok, 0); /* the handshake fails before ZAP is asked */
    /* a client without CURVE at all gets nowhere either */
    plain = new_dealer(e.ctx, "w1");
    ck_assert_int_eq(zmq_connect(plain, e.endpoint), 0);
    send_ok(plain, NULL, MT_PROTO_HEARTBEAT, mt_proto_heartbeat_body(NULL, NULL, 0));
    recv_none(e.router, 1, 1000);
    /* and the setters refuse what cannot work */
    ck_assert_int_eq(mt_curve_client(d, &e.w1, "short", err, sizeof err), -EINVAL);
    ck_assert_int_eq(mt_curve_server(e.router, &e.coord, NULL, err, sizeof err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "ZAP handler"));
    curve_check_logs(&e);
    zmq_close(plain);
    zmq_close(d);
    curve_close(&e);
}
END_TEST

START_TEST(zap_lookup_rules)
{
    char *dir = tmp_dir(), *known = join(dir, "known"), *pub, err[512], name[64], why[512];
    char text[128];
    mt_keypair k;
    uint8_t bin[32];
    ck_assert_int_eq(mt_keys_generate(dir, "w7", 0, NULL, err, sizeof err), 0);
    ck_assert_int_eq(mt_keys_load(dir, "w7", &k, err, sizeof err), 0);
    ck_assert_ptr_nonnull(zmq_z85_decode(bin, k.public_key));
    ck_assert_int_lt(mt_zap_lookup(known, bin, name, sizeof name, why, sizeof why), 0);
    ck_assert_ptr_nonnull(strstr(why, "is missing"));
    ck_assert_int_eq(mkdir(known, 0700), 0);
    ck_assert_int_eq(mt_zap_lookup(known, bin, name, sizeof name, why, sizeof why), 0);
    pub = join(known, "gpu-node-7.pub");
    snprintf(text, sizeof text, "# a comment\n\n  %s  \r\n", k.public_key);
    write_file(pub, text, 0644);
    ck_assert_int_eq(mt_zap_lookup(known, bin, name, sizeof name, why, sizeof why), 1);
    ck_assert_str_eq(name, "gpu-node-7");
    /* a key file others could write is not trusted */
    ck_assert_int_eq(chmod(pub, 0666), 0);
    ck_assert_int_eq(mt_zap_lookup(known, bin, name, sizeof name, why, sizeof why), 0);
    ck_assert_ptr_nonnull(strstr(why, "ignored"));
    ck_assert_ptr_nonnull(strstr(why, "gpu-node-7.pub"));
    ck_assert_ptr_null(strstr(why, k.public_key));
    ck_assert_int_eq(chmod(pub, 0644), 0);
    /* nor a directory others could write */
    ck_assert_int_eq(chmod(known, 0777), 0);
    ck_assert_int_eq(mt_zap_lookup(known, bin, name, sizeof name, why, sizeof why), -EACCES);
    ck_assert_ptr_nonnull(strstr(why, "writable by group or others"));
    ck_assert_int_eq(chmod(known, 0755), 0);
    ck_assert_int_eq(mt_zap_lookup(known, bin, name, sizeof name, why, sizeof why), 1);
    /* a file that does not end in .pub is not a key */
    {
        char *other = join(known, "w8.txt");
        rename(pub, other);
        ck_assert_int_eq(mt_zap_lookup(known, bin, name, sizeof name, why, sizeof why), 0);
        free(other);
    }
    mt_keypair_wipe(&k);
    free(pub);
    free(known);
    rm_rf(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("proto");
    TCase *wire = tcase_create("wire"), *bad = tcase_create("malformed"),
          *res = tcase_create("result"), *keys = tcase_create("keys"),
          *curve = tcase_create("curve");
    tcase_add_test(wire, roundtrip_inproc);
    tcase_add_test(wire, roundtrip_tcp);
    tcase_add_test(wire, router_mandatory);
    tcase_add_test(wire, router_handover);
    tcase_add_test(wire, command_names);
    tcase_add_test(bad, malformed_rejected);
    tcase_add_test(bad, malformed_result_fields);
    tcase_add_test(bad, oversized_rejected);
    tcase_add_test(bad, malformed_over_socket);
    tcase_add_test(bad, send_validates);
    tcase_add_test(res, result_into_store);
    tcase_add_test(keys, keygen_and_load);
    tcase_add_test(keys, secret_key_permissions);
    tcase_add_test(keys, zap_lookup_rules);
    tcase_add_test(curve, curve_known_key_talks);
    tcase_add_test(curve, curve_unknown_key_refused);
    tcase_add_test(curve, curve_wrong_server_key);
    tcase_set_timeout(wire, 30);
    tcase_set_timeout(bad, 60);
    tcase_set_timeout(res, 60);
    tcase_set_timeout(keys, 30);
    tcase_set_timeout(curve, 30);
    suite_add_tcase(s, wire);
    suite_add_tcase(s, bad);
    suite_add_tcase(s, res);
    suite_add_tcase(s, keys);
    suite_add_tcase(s, curve);
    return tk_run(s);
}
