/*
 * zexec.c - the ZeroMQ executor: the coordinator side of PROTOCOL.md.
 *
 * A ROUTER bound at --workers; workers announce themselves (ready), take a
 * job each (job, job-ack), stream progress, and send results that are
 * stored with the job's memo in one transaction before they are
 * acknowledged.  Link liveness (heartbeats, 3 intervals) and job liveness
 * are separate: a job is re-queued, under a new retry number, only when its
 * worker has been unreachable past the job grace.  Results are keyed by the
 * job's memo key: the first one is stored, a late or repeated one is
 * acknowledged as a duplicate and never counted twice.
 */
#include "exec_int.h"

#include "clock.h"
#include "config.h"
#include "job_memo.h"
#include "keys.h"
#include "prepare.h"
#include "proto.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <zmq.h>

#define ZX_MAX_WORKERS 1024

enum { ZJ_QUEUED, ZJ_SENT, ZJ_ACKED, ZJ_DONE };

typedef struct zworker {
    unsigned char id[MT_PROTO_IDENTITY_MAX + 1];
    size_t idlen;
    char name[MT_PROTO_ID_MAX + 1];
    int gpus, nodes, alive;
    char host[256]; /* its `ready` host: where its local launcher runs a job */
    char launchers[128];
    char programs[1024]; /* '\n'-joined */
    char gpu_type[128];  /* its `ready` gpu_type; "" when it declares none */
    double last_seen;
    int job; /* index into the batch, -1 idle */
} zworker;

typedef struct zjob {
    mt_exec_job *q;
    char key[128];
    int retry, state, worker;
    double sent_at;
} zjob;

typedef struct zx {
    void *ctx, *sock;
    struct mt_zap *zap;
    zworker *w;
    size_t nw;
    double last_hb;
    long long hb_seq;
    zjob *jobs; /* the batch in flight */
    size_t njobs;
    unsigned long stored, duplicates;
    /* a resumed tune: the workers its previous coordinator had when it
     * stopped, not back yet; no job is dispatched while one is missing
     * (until expect_until), since it may still run a job of the tune or
     * hold its result (PROTOCOL.md, "Coordinator restart") */
    char (*expect)[MT_PROTO_ID_MAX + 1];
    size_t nexpect;
    char **late; /* "JOB_ID retry N" of the late results recorded, each once */
    size_t nlate;
    double expect_until;
    int expect_logged;
    /* a comparison's jobs (an A/B's replicates, mt_exec_job.group) stay together:
     * under the local launcher on workers of one host, under srun on one
     * worker (its steps then get the first control run's --nodelist) */
    struct zpin {
        int group;
        char host[256]; /* local: the host; srun: the worker's name */
        char *nodes;    /* srun: "a,b", the node list of its first run stored */
    } *pins;
    size_t npins;
} zx;

static void zlog(mt_exec *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void zlog(mt_exec *e, const char *fmt, ...)
{
    va_list ap;
    char line[600];
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (e->env.log) {
        fprintf(e->env.log, "  [workers] %s\n", line);
        fflush(e->env.log);
    }
    mt_store_add_event(e->st, NAN, "workers", line, NULL);
}

static void expect_drop(zx *z, const char *name)
{
    size_t i;
    for (i = 0; i < z->nexpect; i++)
        if (!strcmp(z->expect[i], name)) {
            memmove(z->expect + i, z->expect + i + 1, (z->nexpect - i - 1) * sizeof *z->expect);
            z->nexpect--;
            return;
        }
}

/* The workers the previous coordinator of this tune had when it stopped,
 * from its events: those ready since it started listening, less those that
 * disconnected; none when it ended the tune itself (it released them). */
static void expect_workers(mt_exec *e)
{
    zx *z = e->zx;
    mt_diag *d = mt_diag_new();
    mt_store_event *ev = NULL;
    size_t n = 0, i;
    if (!d || mt_store_list_events(e->st, &ev, &n, d)) {
        mt_diag_destroy(&d);
        return;
    }
    for (i = 0; i < n; i++) {
        const char *t = ev[i].text ? ev[i].text : "", *rest;
        char name[MT_PROTO_ID_MAX + 1];
        if (!ev[i].kind || strcmp(ev[i].kind, "workers"))
            continue;
        if (!strncmp(t, "coordinator listening on ", 25) || !strncmp(t, "the tune is over", 16)) {
            z->nexpect = 0;
            continue;
        }
        if (strncmp(t, "worker ", 7) || sscanf(t + 7, "%200[^ ]", name) != 1)
            continue;
        rest = t + 7 + strlen(name);
        expect_drop(z, name);
        if (!strncmp(rest, " (", 2) && strstr(rest, ") is ready")) {
            void *nx = realloc(z->expect, (z->nexpect + 1) * sizeof *z->expect);
            if (!nx)
                break;
            z->expect = nx;
            snprintf(z->expect[z->nexpect++], sizeof *z->expect, "%s", name);
        }
    }
    mt_store_events_free(ev, n);
    mt_diag_destroy(&d);
    z->expect_until = mt_clock_wall_s() + (e->o.job_grace_s > 0 ? e->o.job_grace_s : MT_PROTO_JOB_GRACE_S);
}

int mt_zexec_open(mt_exec *e)
{
    zx *z = calloc(1, sizeof *z);
    char err[512];
    int rc = -1;
    if (!z)
        return -1;
    e->zx = z;
    z->ctx = zmq_ctx_new();
    z->sock = zmq_socket(z->ctx, ZMQ_ROUTER);
    if (mt_proto_socket_setup(z->sock, 1, NULL, err, sizeof err)) {
        mt_diag_add(e->d, e->o.workers, 0, NULL, "%s", err);
        return -1;
    }
    if (e->o.key_dir) {
        mt_keypair kp;
        char known[4096];
        snprintf(known, sizeof known, "%s/workers", e->o.key_dir);
        if (mt_keys_load(e->o.key_dir, "coordinator", &kp, err, sizeof err) ||
            !(z->zap = mt_zap_start(z->ctx, known, NULL, NULL, err, sizeof err)) ||
            mt_curve_server(z->sock, &kp, z->zap, err, sizeof err)) {
            mt_diag_add(e->d, e->o.key_dir, 0, NULL, "CURVE: %s", err);
            mt_keypair_wipe(&kp);
            return -1;
        }
        mt_keypair_wipe(&kp);
    }
    if (zmq_bind(z->sock, e->o.workers)) {
        mt_diag_add(e->d, e->o.workers, 0, NULL, "cannot bind the coordinator's socket: %s",
                    zmq_strerror(zmq_errno()));
        return -1;
    }
    rc = 0;
    expect_workers(e);
    zlog(e, "coordinator listening on %s%s", e->o.workers,
         e->o.key_dir ? " (CURVE: known worker keys only)" : " (no CURVE)");
    return rc;
}

void mt_zexec_close(mt_exec *e)
{
    zx *z = e->zx;
    size_t i;
    int linger = 500;
    if (!z)
        return;
    zlog(e, "the tune is over: its workers are released");
    for (i = 0; i < z->nw; i++)
        if (z->w[i].alive) {
            cJSON *body = mt_proto_disconnect_body("the tune is over");
            mt_proto_send(z->sock, z->w[i].id, z->w[i].idlen, MT_PROTO_DISCONNECT, body, NULL, 0);
            cJSON_Delete(body); /* mt_proto_send does not take the body */
        }
    zmq_setsockopt(z->sock, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(z->sock);
    mt_zap_stop(&z->zap);
    zmq_ctx_term(z->ctx);
    free(z->w);
    free(z->expect);
    for (i = 0; i < z->npins; i++)
        free(z->pins[i].nodes);
    free(z->pins);
    for (i = 0; i < z->nlate; i++)
        free(z->late[i]);
    free(z->late);
    free(z);
    e->zx = NULL;
}

static zworker *find_worker(zx *z, const unsigned char *id, size_t idlen)
{
    size_t i;
    for (i = 0; i < z->nw; i++)
        if (z->w[i].idlen == idlen && !memcmp(z->w[i].id, id, idlen))
            return &z->w[i];
    return NULL;
}

static void send_to(mt_exec *e, zworker *w, int cmd, cJSON *body)
{
    zx *z = e->zx;
    char err[256];
    int rc;
    if (!body)
        return;
    rc = mt_proto_send(z->sock, w->id, w->idlen, cmd, body, err, sizeof err);
    cJSON_Delete(body);
    if (rc == -EHOSTUNREACH && w->alive) {
        w->alive = 0;
        zlog(e, "worker %s is gone (its connection closed)", w->name);
    } else if (rc && rc != -EHOSTUNREACH && rc != -EAGAIN) {
        zlog(e, "cannot send %s to %s: %s", mt_proto_cmd_name(cmd), w->name, err);
    }
}

/* A fingerprint's node list as "a,b" into buf ("" when none is known). */
const char *mt_zexec_fp_nodes(const cJSON *fp, char *buf, size_t n)
{
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(fp, "hosts"), *x;
    size_t len = 0;
    buf[0] = '\0';
    if (!cJSON_IsArray(h))
        return buf;
    cJSON_ArrayForEach(x, h) {
        const char *s = cJSON_GetStringValue(x);
        size_t k = s ? strlen(s) : 0, i;
        for (i = 0; i < k; i++) /* what a job's nodelist may carry (PROTOCOL.md) */
            if (!isalnum((unsigned char)s[i]) && !strchr("._-", s[i]))
                k = 0;
        if (!k || len + k + 2 > n) {
            buf[0] = '\0'; /* unnamed, odd, or too long to pass: not pinned */
            return buf;
        }
        if (len)
            buf[len++] = ',';
        memcpy(buf + len, s, k + 1);
        len += k;
    }
    return buf;
}

static int job_index(zx *z, const char *key, int retry)
{
    size_t i;
    for (i = 0; i < z->njobs; i++)
        if (!strcmp(z->jobs[i].key, key) && (retry < 0 || z->jobs[i].retry == retry))
            return (int)i;
    return -1;
}

static struct zpin *pin_of(zx *z, int group);

/* Under srun, the first run stored of a comparison names its nodes (its
 * fingerprint's hosts): the comparison's later jobs are sent with them as
 * their step's --nodelist. */
static void learn_nodes(mt_exec *e, const char *key, const cJSON *memo)
{
    zx *z = e->zx;
    int j = job_index(z, key, -1);
    struct zpin *pin;
    char buf[MT_PROTO_HOSTS_MAX + 1];
    mt_job_memo m;
    mt_job_memo_from_json(memo, &m);
    if (!strcmp(e->c->launcher, "local") || j < 0 || z->jobs[j].q->group <= 0 ||
        !(pin = pin_of(z, z->jobs[j].q->group)) || pin->nodes ||
        !mt_zexec_fp_nodes(m.fingerprint, buf, sizeof buf)[0])
        return;
    pin->nodes = strdup(buf);
}

/* A result (or a refusal) becomes the job's memo. */
static int store_memo(mt_exec *e, const char *key, const char *memo, mt_diag *d)
{
    return mt_store_memo_put(e->st, key, memo, d);
}

static void job_finished(zx *z, const char *key)
{
    int j = job_index(z, key, -1);
    if (j >= 0 && z->jobs[j].state != ZJ_DONE) {
        z->jobs[j].state = ZJ_DONE;
        if (z->jobs[j].worker >= 0 && (size_t)z->jobs[j].worker < z->nw &&
            z->w[z->jobs[j].worker].job == j)
            z->w[z->jobs[j].worker].job = -1;
    }
}

static void failed_memo(mt_exec *e, const char *key, const char *outcome, const char *why)
{
    char *text = mt_job_memo_failed(outcome, why);
    if (text)
        store_memo(e, key, text, e->d);
    free(text);
    job_finished(e->zx, key);
}

void (*mt_zexec_probe)(const char *key, int retry, int event);

/* A result whose outcome is infra (a node lost, an NCCL or InfiniBand
 * error, an Xid: PROTOCOL.md 5) says nothing about the config: its run is
 * stored as evidence, under its retry number, but it is not the job's
 * result.  The job is re-queued as retry + 1, up to ZX_INFRA_RETRIES times;
 * after that the infra result stands (the engine never counts it against
 * the candidate as a failure of the config: it is typed infra). */
#define ZX_INFRA_RETRIES 3

/* 1 when r was an infra result that re-queued its job (stored, acked). */
static int infra_retry(mt_exec *e, zworker *w, const mt_proto_result *r)
{
    zx *z = e->zx;
    mt_job_memo m;
    mt_proto_result_ack a;
    mt_store_result sr;
    int64_t run_id = -1;
    char err[512], line[1024];
    int j;
    mt_job_memo_from_json(r->memo, &m);
    if (strcmp(m.outcome, "infra") || r->retry >= ZX_INFRA_RETRIES ||
        (j = job_index(z, r->job_id, r->retry)) < 0 || z->jobs[j].state == ZJ_DONE)
        return 0;
    if (r->run) {
        if (mt_proto_result_to_store(r->run, r->samples, r->gpus, &sr, err, sizeof err)) {
            zlog(e, "result of %s unusable: %s", r->job_id, err);
            return 0;
        }
        if (mt_store_put_result(e->st, &sr, &run_id, e->d) < 0) {
            mt_proto_result_release(&sr);
            return 1; /* not acknowledged: the worker sends it again */
        }
        mt_proto_result_release(&sr);
    }
    snprintf(line, sizeof line,
             "job %s (retry %d) on worker %s: infra (%.700s); re-queued as retry %d, not "
             "counted against the config",
             r->job_id, r->retry, w ? w->name : "?", m.evidence,
             r->retry + 1);
    mt_store_add_event(e->st, NAN, "job-requeued", line, NULL);
    zlog(e, "%s", line);
    if (z->jobs[j].worker >= 0 && (size_t)z->jobs[j].worker < z->nw &&
        z->w[z->jobs[j].worker].job == j)
        z->w[z->jobs[j].worker].job = -1;
    z->jobs[j].state = ZJ_QUEUED;
    z->jobs[j].retry = r->retry + 1;
    z->jobs[j].worker = -1;
    memset(&a, 0, sizeof a);
    a.job_id = r->job_id;
    a.retry = r->retry;
    a.run_id = run_id;
    a.status = "stored";
    if (w)
        send_to(e, w, MT_PROTO_RESULT_ACK, mt_proto_result_ack_body(&a));
    return 1;
}

static void on_result(mt_exec *e, zworker *w, const mt_proto_msg *m)
{
    zx *z = e->zx;
    mt_proto_result r;
    mt_proto_result_ack a;
    char *have = NULL, err[512], *text = NULL;
    cJSON *memo;
    int64_t run_id = -1;
    const char *status = "stored";
    if (mt_proto_get_result(m, &r))
        return;
    if (mt_zexec_probe)
        mt_zexec_probe(r.job_id, r.retry, 1);
    memset(&a, 0, sizeof a);
    a.job_id = r.job_id;
    a.retry = r.retry;
    a.run_id = -1;
    if (mt_store_memo_get(e->st, r.job_id, &have, e->d) == 1) {
        /* the job already has its result: a repeat, or a late one from a
         * worker declared lost; recorded once, never counted twice */
        char ev[600];
        double gh = NAN;
        const cJSON *cid = r.run ? cJSON_GetObjectItem(r.run, "config_id") : NULL;
        const cJSON *kd = r.run ? cJSON_GetObjectItem(r.run, "kind") : NULL;
        const cJSON *rp = r.run ? cJSON_GetObjectItem(r.run, "replicate") : NULL;
        mt_store_run prev;
        int same = !r.run; /* a result with no run carries no GPU-hours */
        if (r.run && cJSON_IsNumber(cJSON_GetObjectItem(r.run, "gpu_hours")))
            gh = cJSON_GetObjectItem(r.run, "gpu_hours")->valuedouble;
        memset(&prev, 0, sizeof prev);
        if (cJSON_IsString(cid) && cJSON_IsString(kd) && cJSON_IsNumber(rp) &&
            mt_store_find_run(e->st, cid->valuestring, kd->valuestring, rp->valueint, r.retry,
                              &prev, NULL) == 1) {
            /* the very run already stored (its ack was lost, or the worker
             * sent it again on re-announcing): PROTOCOL.md 5, a duplicate,
             * not a late result */
            same = 1;
            mt_store_run_clear(&prev);
        }
        status = "duplicate";
        z->duplicates++;
        if (!same) {
            /* the same late result again (resent while its ack was on the
             * way): recorded once */
            char tag[MT_PROTO_ID_MAX + 32];
            size_t i;
            char **nl;
            snprintf(tag, sizeof tag, "%s retry %d", r.job_id, r.retry);
            for (i = 0; i < z->nlate && !same; i++)
                same = !strcmp(z->late[i], tag);
            if (!same && (nl = realloc(z->late, (z->nlate + 1) * sizeof *nl))) {
                z->late = nl;
                if ((z->late[z->nlate] = strdup(tag)))
                    z->nlate++;
            }
        }
        if (!same) {
            snprintf(ev, sizeof ev,
                     "result of %s (retry %d) from %s: the job already has its result; this one "
                     "(%.3f GPU-hours) is not counted",
                     r.job_id, r.retry, w ? w->name : "?", gh);
            mt_store_add_event(e->st, NAN, "late-result", ev, NULL);
            zlog(e, "%s", ev);
        }
    } else if (strncmp(r.job_id, "job/", 4)) {
        status = "discarded";
    } else if (infra_retry(e, w, &r)) {
        free(have);
        return;
    } else {
        mt_store_result sr;
        int ok = 0;
        memo = cJSON_Duplicate(r.memo, 1);
        if (mt_store_begin(e->st, e->d) == 0) {
            ok = 1;
            if (r.run) {
                if (mt_proto_result_to_store(r.run, r.samples, r.gpus, &sr, err, sizeof err)) {
                    zlog(e, "result of %s unusable: %s", r.job_id, err);
                    ok = 0;
                } else {
                    ok = mt_store_put_result(e->st, &sr, &run_id, e->d) >= 0;
                    mt_proto_result_release(&sr);
                }
            }
            if (ok) {
                mt_job_memo m;
                mt_job_memo_from_json(memo, &m);
                m.run_id = (double)run_id; /* the coordinator's store's row */
                text = mt_job_memo_to_json(&m);
                ok = text && store_memo(e, r.job_id, text, e->d) >= 0;
            }
            if (ok)
                ok = mt_store_commit(e->st, e->d) == 0;
            else
                mt_store_rollback(e->st);
        }
        cJSON_Delete(memo);
        free(text);
        if (!ok) {
            free(have);
            return; /* not acknowledged: the worker sends it again */
        }
        z->stored++;
        a.run_id = run_id;
        learn_nodes(e, r.job_id, r.memo);
    }
    free(have);
    a.status = status;
    job_finished(z, r.job_id);
    if (w)
        send_to(e, w, MT_PROTO_RESULT_ACK, mt_proto_result_ack_body(&a));
}

static int can_run(mt_exec *e, const zworker *w);
static void unable_why(mt_exec *e, const zworker *w, char *buf, size_t n);

static void on_ready(mt_exec *e, const mt_proto_msg *m)
{
    zx *z = e->zx;
    mt_proto_ready r;
    zworker *w;
    size_t i;
    if (mt_proto_get_ready(m, &r))
        return;
    if (!(w = find_worker(z, m->identity, m->idlen))) {
        zworker *nw;
        if (z->nw == ZX_MAX_WORKERS)
            return;
        nw = realloc(z->w, (z->nw + 1) * sizeof *nw);
        if (!nw)
            return;
        z->w = nw;
        w = &z->w[z->nw++];
        memset(w, 0, sizeof *w);
        memcpy(w->id, m->identity, m->idlen);
        w->idlen = m->idlen;
        w->job = -1;
    }
    snprintf(w->name, sizeof w->name, "%s", r.worker);
    w->gpus = r.gpus;
    w->nodes = r.nodes;
    snprintf(w->host, sizeof w->host, "%s", r.host);
    snprintf(w->gpu_type, sizeof w->gpu_type, "%s", r.gpu_type ? r.gpu_type : "");
    w->launchers[0] = w->programs[0] = '\0';
    for (i = 0; i < mt_proto_count(r.launchers); i++) {
        size_t l = strlen(w->launchers);
        snprintf(w->launchers + l, sizeof w->launchers - l, "%s%s", l ? "," : "",
                 mt_proto_str_at(r.launchers, i));
    }
    for (i = 0; i < mt_proto_count(r.programs); i++) {
        size_t l = strlen(w->programs);
        snprintf(w->programs + l, sizeof w->programs - l, "%s%s", l ? "\n" : "",
                 mt_proto_str_at(r.programs, i));
    }
    if (!w->alive)
        zlog(e, "worker %s (%s, %d GPUs%s%s, %s) is ready", w->name, r.host, w->gpus,
             w->gpu_type[0] ? " " : "", w->gpu_type, w->launchers);
    w->alive = 1;
    w->last_seen = mt_clock_wall_s();
    if (z->nexpect) {
        expect_drop(z, w->name);
        if (!z->nexpect)
            zlog(e, "the previous coordinator's workers are back: dispatching");
    }
    if (!can_run(e, w)) {
        char why[4096];
        unable_why(e, w, why, sizeof why);
        zlog(e, "%s: it gets no job of this tune", why);
    }
    /* reconcile (PROTOCOL.md 5): a job it acknowledged that is in neither
     * its running nor its finished list is gone (the worker restarted under
     * the same name): re-queued at once, as a retry, not after the grace */
    for (i = 0; i < z->njobs; i++) {
        zjob *zj = &z->jobs[i];
        size_t k;
        int listed = 0;
        if (zj->worker != (int)(w - z->w) || zj->state != ZJ_ACKED)
            continue;
        for (k = 0; k < mt_proto_count(r.running) && !listed; k++) {
            mt_proto_jobref ref;
            listed = mt_proto_jobref_at(r.running, k, &ref) == 0 && !strcmp(ref.job_id, zj->key) &&
                     ref.retry == zj->retry;
        }
        for (k = 0; k < mt_proto_count(r.finished) && !listed; k++) {
            mt_proto_jobref ref;
            listed = mt_proto_jobref_at(r.finished, k, &ref) == 0 &&
                     !strcmp(ref.job_id, zj->key) && ref.retry == zj->retry;
        }
        if (listed)
            continue;
        zlog(e,
             "job %s (retry %d) lost with worker %s: it announced itself again without it (it "
             "restarted); re-queued as retry %d",
             zj->key, zj->retry, w->name, zj->retry + 1);
        zj->state = ZJ_QUEUED;
        zj->retry++;
        zj->worker = -1;
    }
    /* re-attach: a job of the batch it still runs stays with it */
    w->job = -1;
    for (i = 0; i < mt_proto_count(r.running); i++) {
        mt_proto_jobref ref;
        int j;
        if (mt_proto_jobref_at(r.running, i, &ref) == 0 &&
            (j = job_index(z, ref.job_id, ref.retry)) >= 0 && z->jobs[j].state != ZJ_DONE) {
            z->jobs[j].state = ZJ_ACKED;
            z->jobs[j].worker = (int)(w - z->w);
            w->job = j;
            zlog(e, "worker %s still runs %s: re-attached", w->name, ref.job_id);
        }
    }
}

/* Whether w's programs offer prog: by path, or by base name either way. */
static int offers(const zworker *w, const char *prog)
{
    const char *b = strrchr(prog, '/') ? strrchr(prog, '/') + 1 : prog;
    char list[sizeof w->programs], *tok, *save = NULL;
    snprintf(list, sizeof list, "%s", w->programs);
    for (tok = strtok_r(list, "\n", &save); tok; tok = strtok_r(NULL, "\n", &save)) {
        const char *tb = strrchr(tok, '/') ? strrchr(tok, '/') + 1 : tok;
        if (!strcmp(tok, prog) || !strcmp(tb, b))
            return 1;
    }
    return 0;
}

/* Whether a worker's declared GPU type is the contract's GPU: every word of
 * the contract's name (H100, GB200, ...) is a whole word of the worker's
 * (nvidia-smi's "NVIDIA H100 80GB HBM3"), letters compared without case,
 * so B200 is not GB200.  A worker that declares no type matches any. */
static int gpu_matches(const char *want, const char *have)
{
    const char *p = want;
    if (!have[0] || !want || !want[0])
        return 1;
    while (*p) {
        size_t n = 0;
        const char *q = have;
        int found = 0;
        while (*p && !isalnum((unsigned char)*p))
            p++;
        while (isalnum((unsigned char)p[n]))
            n++;
        if (!n)
            break;
        while (*q && !found) {
            size_t m = 0;
            while (*q && !isalnum((unsigned char)*q))
                q++;
            while (isalnum((unsigned char)q[m]))
                m++;
            found = m == n && !strncasecmp(p, q, n);
            q += m;
        }
        if (!found)
            return 0;
        p += n;
    }
    return 1;
}

/* The program of a prepare template (its first word), or NULL when it has
 * a placeholder (the worker judges it once expanded) or does not split. */
static char *prepare_program(const char *tmpl)
{
    mt_strlist words = {0};
    mt_diag *d = mt_diag_new();
    char *prog = NULL;
    if (d && !mt_prepare_split(tmpl, &words, d) && words.n && !strchr(words.v[0], '{'))
        prog = strdup(words.v[0]);
    mt_strlist_clear(&words);
    mt_diag_destroy(&d);
    return prog;
}

/* Can worker w run this contract's jobs?  (PROTOCOL.md 5, "Dispatch".)
 * why, when given, gets the first thing that does not match. */
static int can_run_why(mt_exec *e, const zworker *w, char *why, size_t nwhy)
{
    const char *prog = e->c->n_template ? e->c->launch_template[0] : "";
    const char *gpu = mt_kv_get(e->c->hardware, "gpu");
    size_t i;
    if (why && nwhy)
        why[0] = '\0';
    if (!strstr(w->launchers, e->c->launcher)) {
        if (why)
            snprintf(why, nwhy, "it offers launchers [%s]; the jobs use %s", w->launchers,
                     e->c->launcher);
        return 0;
    }
    if (strcmp(e->c->backend, "sim")) {
        long gpn = strtol(mt_kv_get(e->c->hardware, "gpus_per_node"), NULL, 10);
        long nodes = strtol(mt_kv_get(e->c->hardware, "nodes"), NULL, 10);
        if (w->gpus < gpn || w->nodes < nodes) {
            if (why)
                snprintf(why, nwhy, "it has %d GPUs x %d nodes; the jobs need %ld x %ld", w->gpus,
                         w->nodes, gpn, nodes);
            return 0;
        }
    }
    if (!gpu_matches(gpu, w->gpu_type)) {
        if (why)
            snprintf(why, nwhy, "its GPU type is \"%s\"; the contract's GPU is %s", w->gpu_type,
                     gpu);
        return 0;
    }
    if (!offers(w, !strncmp(prog, "{sim}", 5) ? e->sim : prog)) {
        if (why)
            snprintf(why, nwhy, "it does not offer the program %s",
                     !strncmp(prog, "{sim}", 5) ? e->sim : prog);
        return 0;
    }
    for (i = 0; i < e->n_prepare; i++) {
        char *pp = prepare_program(e->prepare[i]);
        int ok = !pp || offers(w, pp);
        if (!ok && why)
            snprintf(why, nwhy, "it does not offer the prepare program %s", pp);
        free(pp);
        if (!ok)
            return 0;
    }
    if (!w->alive) { /* last: what it could never run says more */
        if (why)
            snprintf(why, nwhy, "it is unreachable");
        return 0;
    }
    return 1;
}

static int can_run(mt_exec *e, const zworker *w)
{
    return can_run_why(e, w, NULL, 0);
}

/* Why worker w cannot run this contract's jobs, for the log. */
static void unable_why(mt_exec *e, const zworker *w, char *buf, size_t n)
{
    const char *prog = e->c->n_template ? e->c->launch_template[0] : "";
    char progs[1024], why[512];
    size_t i;
    can_run_why(e, w, why, sizeof why);
    snprintf(progs, sizeof progs, "%s", w->programs);
    for (i = 0; progs[i]; i++)
        if (progs[i] == '\n')
            progs[i] = ' ';
    snprintf(buf, n,
             "worker %s cannot run them (%s): it offers programs [%s] with launchers [%s] (%d GPUs "
             "x %d nodes, GPU type \"%s\"); the jobs run %s with the %s launcher on %s",
             w->name, why[0] ? why : "it is not alive", progs, w->launchers, w->gpus, w->nodes,
             w->gpu_type, !strncmp(prog, "{sim}", 5) ? e->sim : prog, e->c->launcher,
             mt_kv_get(e->c->hardware, "gpu") ? mt_kv_get(e->c->hardware, "gpu") : "any GPU");
}

/* The host a comparison's jobs are pinned to, or NULL. */
static struct zpin *pin_of(zx *z, int group)
{
    size_t i;
    for (i = 0; i < z->npins; i++)
        if (z->pins[i].group == group)
            return &z->pins[i];
    return NULL;
}

static struct zpin *pin_set(zx *z, int group, const char *host)
{
    struct zpin *p = pin_of(z, group), *v;
    if (!p) {
        if (!(v = realloc(z->pins, (z->npins + 1) * sizeof *v)))
            return NULL;
        z->pins = v;
        p = &z->pins[z->npins++];
        p->group = group;
        p->nodes = NULL;
    }
    snprintf(p->host, sizeof p->host, "%s", host);
    return p;
}

/* What a comparison is pinned to on worker w: its host under the local
 * launcher, the worker itself under srun (its steps, placed by Slurm, are
 * pinned by --nodelist). */
static const char *pin_key(const mt_exec *e, const zworker *w)
{
    return strcmp(e->c->launcher, "local") ? w->name : w->host;
}

/* Whether a live worker of that pin key (busy or not) can run the contract's
 * jobs. */
static int host_able(mt_exec *e, const char *key)
{
    zx *z = e->zx;
    size_t i;
    for (i = 0; i < z->nw; i++)
        if (!strcmp(pin_key(e, &z->w[i]), key) && can_run(e, &z->w[i]))
            return 1;
    return 0;
}

static void dispatch(mt_exec *e)
{
    zx *z = e->zx;
    size_t j, i;
    char *contract_text = NULL;
    for (j = 0; j < z->njobs; j++) {
        zjob *zj = &z->jobs[j];
        mt_proto_job pj;
        char *canon, seed[32];
        zworker *w = NULL;
        struct zpin *pin = NULL;
        /* under the local launcher a job runs on its worker's host: the
         * replicates of one comparison go to workers on one host (the
         * control's first run's, when the engine knows it), so both arms
         * run on the same node (DESIGN.md 4) */
        int local = !strcmp(e->c->launcher, "local"), pinned = zj->q->group > 0;
        if (zj->state != ZJ_QUEUED)
            continue;
        if (pinned && !(pin = pin_of(z, zj->q->group)) && local && zj->q->host &&
            zj->q->host[0])
            pin = pin_set(z, zj->q->group, zj->q->host);
        if (pin && !host_able(e, pin->host)) {
            zlog(e,
                 "no worker %s%s can run the jobs of comparison %d any more: the rest go "
                 "to another %s, and the comparison is refused if its runs' fingerprints "
                 "differ",
                 local ? "on " : "", pin->host, pin->group, local ? "host" : "worker");
            pin->host[0] = '\0';
        }
        if (pin && !pin->host[0])
            pin = NULL; /* pinned anew to the host it goes to */
        for (i = 0; i < z->nw && !w; i++)
            if (z->w[i].job < 0 && can_run(e, &z->w[i]) &&
                (!pin || !strcmp(pin_key(e, &z->w[i]), pin->host)))
                w = &z->w[i];
        if (!w && pin)
            continue; /* its host is busy: others may go meanwhile */
        if (!w)
            break;
        if (pinned && !pin)
            pin_set(z, zj->q->group, pin_key(e, w));
        if (!contract_text) {
            FILE *f = fopen(e->c->path, "rb");
            long len;
            if (!f)
                return;
            fseek(f, 0, SEEK_END);
            len = ftell(f);
            rewind(f);
            contract_text = calloc(1, (size_t)len + 1);
            if (contract_text && fread(contract_text, 1, (size_t)len, f) != (size_t)len)
                contract_text[0] = '\0';
            fclose(f);
        }
        canon = mt_config_canonical(zj->q->cfg);
        memset(&pj, 0, sizeof pj);
        pj.job_id = zj->key;
        pj.retry = zj->retry;
        pj.kind = !strcmp(zj->q->kind, "profile") ? "profile" : zj->q->kind;
        pj.contract = contract_text;
        pj.config = canon;
        pj.replicate = zj->q->rep;
        pj.profile = !strcmp(zj->q->kind, "profile");
        pj.routing = zj->q->routing;
        /* under srun, a comparison's runs on its first control run's nodes;
         * not a retry: the job it repeats may have lost one of them (infra),
         * and a retry elsewhere is refused by the fingerprint check instead */
        if (!local && zj->retry == 0)
            pj.nodelist = zj->q->nodes && zj->q->nodes[0] ? zj->q->nodes
                          : pin && pin->nodes         ? pin->nodes
                                                      : NULL;
        if (e->env.seed) {
            snprintf(seed, sizeof seed, "%llu", (unsigned long long)e->env.seed);
            pj.sim_seed = seed;
        }
        if (zj->q->rev) {
            pj.rev = zj->q->rev;
            pj.repo = e->repo;
            pj.prepare_v = e->prepare;
            pj.n_prepare = e->n_prepare;
            pj.prepare_timeout_s = e->prepare_timeout_s;
        }
        send_to(e, w, MT_PROTO_JOB, mt_proto_job_body(&pj));
        if (mt_zexec_probe)
            mt_zexec_probe(zj->key, zj->retry, 0);
        free(canon);
        zj->state = ZJ_SENT;
        zj->worker = (int)(w - z->w);
        zj->sent_at = mt_clock_wall_s();
        w->job = (int)j;
    }
    free(contract_text);
}

static void handle(mt_exec *e, mt_proto_msg *m)
{
    zx *z = e->zx;
    zworker *w = find_worker(z, m->identity, m->idlen);
    mt_proto_jobref ref;
    if (w) {
        if (!w->alive && m->command != MT_PROTO_READY) {
            /* back within the grace: it keeps its job */
            zlog(e, "worker %s is reachable again", w->name);
            w->alive = 1;
        }
        w->last_seen = mt_clock_wall_s();
    }
    switch (m->command) {
    case MT_PROTO_READY:
        on_ready(e, m);
        break;
    case MT_PROTO_JOB_ACK: {
        mt_proto_job_ack a;
        int j;
        if (!w || mt_proto_get_job_ack(m, &a) || (j = job_index(z, a.job_id, a.retry)) < 0)
            break;
        if (a.accepted) {
            if (z->jobs[j].state == ZJ_SENT)
                z->jobs[j].state = ZJ_ACKED;
        } else if (!strcmp(a.reason, "no free slot")) {
            z->jobs[j].state = ZJ_QUEUED;
            w->job = -2; /* busy with something we do not track: skip it a while */
        } else {
            /* a typed launch refusal: the job's outcome, never retried forever */
            char why[700];
            snprintf(why, sizeof why, "worker %s refused the job: %s", w->name, a.reason);
            zlog(e, "%s", why);
            w->job = -1;
            failed_memo(e, a.job_id, "launch_error", why);
        }
        break;
    }
    case MT_PROTO_PROGRESS: {
        mt_proto_progress p;
        if (mt_proto_get_progress(m, &p) == 0 && mt_proto_count(p.lines))
            snprintf(e->live, sizeof e->live, "%s: %s", w ? w->name : "?",
                     mt_proto_str_at(p.lines, mt_proto_count(p.lines) - 1));
        if (!w)
            goto unknown;
        break;
    }
    case MT_PROTO_RESULT:
        on_result(e, w, m);
        if (!w)
            goto unknown;
        break;
    case MT_PROTO_HEARTBEAT:
        if (!w)
            goto unknown;
        break;
    case MT_PROTO_DISCONNECT:
        if (w) {
            size_t j;
            zlog(e, "worker %s disconnected", w->name);
            w->alive = 0;
            for (j = 0; j < z->njobs; j++)
                if (z->jobs[j].worker == (int)(w - z->w) && z->jobs[j].state != ZJ_DONE) {
                    /* it stopped its jobs itself: again at once, new retry */
                    z->jobs[j].state = ZJ_QUEUED;
                    z->jobs[j].retry++;
                    z->jobs[j].worker = -1;
                }
            w->job = -1;
        }
        break;
    default:
        break;
    }
    (void)ref;
    return;
unknown: {
    /* a worker this coordinator does not know (it restarted): ask it to
     * announce itself */
    mt_proto_heartbeat h;
    zworker tmp;
    memset(&h, 0, sizeof h);
    h.seq = -1;
    h.time = NAN;
    h.reannounce = 1;
    memset(&tmp, 0, sizeof tmp);
    memcpy(tmp.id, m->identity, m->idlen);
    tmp.idlen = m->idlen;
    snprintf(tmp.name, sizeof tmp.name, "(unknown)");
    send_to(e, &tmp, MT_PROTO_HEARTBEAT, mt_proto_heartbeat_body(&h, NULL, 0));
}
}

/* Liveness: heartbeats out, unreachable workers, lost jobs re-queued. */
static void tick(mt_exec *e)
{
    zx *z = e->zx;
    double t = mt_clock_wall_s(), hb = MT_PROTO_HEARTBEAT_MS / 1000.0;
    double grace = e->o.job_grace_s > 0 ? e->o.job_grace_s : MT_PROTO_JOB_GRACE_S;
    size_t i, j;
    if (t - z->last_hb >= hb) {
        for (i = 0; i < z->nw; i++) {
            mt_proto_heartbeat h;
            if (!z->w[i].alive && t - z->w[i].last_seen > 10 * grace)
                continue;
            memset(&h, 0, sizeof h);
            h.seq = z->hb_seq;
            h.time = t;
            send_to(e, &z->w[i], MT_PROTO_HEARTBEAT, mt_proto_heartbeat_body(&h, NULL, 0));
        }
        z->hb_seq++;
        z->last_hb = t;
    }
    for (i = 0; i < z->nw; i++) {
        zworker *w = &z->w[i];
        if (w->job == -2 && t - w->last_seen < hb)
            w->job = -1;
        if (w->alive && t - w->last_seen > MT_PROTO_LIVENESS * hb) {
            w->alive = 0;
            zlog(e, "worker %s is unreachable (silent %.1f s); its job keeps its place for %.0f s",
                 w->name, t - w->last_seen, grace);
        }
    }
    for (j = 0; j < z->njobs; j++) {
        zjob *zj = &z->jobs[j];
        zworker *w;
        if ((zj->state != ZJ_SENT && zj->state != ZJ_ACKED) || zj->worker < 0)
            continue;
        w = &z->w[zj->worker];
        if (zj->state == ZJ_SENT && w->alive && t - zj->sent_at > MT_PROTO_ACK_TIMEOUT_MS / 1000.0) {
            zj->state = ZJ_QUEUED; /* never acknowledged: send it again */
            w->job = -1;
            continue;
        }
        if (!w->alive && t - w->last_seen > grace) {
            zlog(e, "job %s (retry %d) lost with worker %s: re-queued as retry %d", zj->key,
                 zj->retry, w->name, zj->retry + 1);
            {
                mt_proto_cancel c;
                c.job_id = zj->key;
                c.retry = zj->retry;
                c.reason = "re-queued after the job grace";
                send_to(e, w, MT_PROTO_CANCEL, mt_proto_cancel_body(&c));
            }
            zj->state = ZJ_QUEUED;
            zj->retry++;
            zj->worker = -1;
            w->job = -1;
        }
    }
}

int mt_zexec_run(mt_exec *e, mt_exec_job *v, size_t n)
{
    zx *z = e->zx;
    size_t i, left;
    double last_able = mt_clock_wall_s(), last_status = 0;
    char err[512];
    z->jobs = calloc(n ? n : 1, sizeof *z->jobs);
    z->njobs = 0;
    for (i = 0; i < n; i++) {
        char *have = NULL;
        if (mt_store_memo_get(e->st, v[i].key, &have, e->d) == 1) {
            free(have);
            continue;
        }
        z->jobs[z->njobs].q = &v[i];
        snprintf(z->jobs[z->njobs].key, sizeof z->jobs[0].key, "%s", v[i].key);
        z->jobs[z->njobs].worker = -1;
        z->njobs++;
    }
    for (;;) {
        zmq_pollitem_t it = {z->sock, 0, ZMQ_POLLIN, 0};
        for (left = 0, i = 0; i < z->njobs; i++)
            left += z->jobs[i].state != ZJ_DONE;
        if (!left)
            break;
        if (z->nexpect && mt_clock_wall_s() < z->expect_until) {
            if (!z->expect_logged) {
                char names[600] = "";
                z->expect_logged = 1;
                for (i = 0; i < z->nexpect; i++) {
                    size_t l = strlen(names);
                    snprintf(names + l, sizeof names - l, "%s%s", i ? ", " : "", z->expect[i]);
                }
                zlog(e, "resumed: waiting up to %.0f s for the previous coordinator's workers (%s) "
                     "before dispatching, so that a job one still runs is not launched again",
                     z->expect_until - mt_clock_wall_s(), names);
            }
        } else {
            if (z->nexpect) {
                zlog(e, "%zu of the previous coordinator's workers did not come back within the "
                     "job grace: dispatching",
                     z->nexpect);
                z->nexpect = 0;
            }
            dispatch(e);
        }
        if (zmq_poll(&it, 1, 100) > 0) {
            int k;
            for (k = 0; k < 256; k++) {
                mt_proto_msg m;
                int rc;
                mt_proto_msg_init(&m);
                rc = mt_proto_recv_queued(z->sock, 1, &m, err, sizeof err);
                if (rc == -EAGAIN) {
                    mt_proto_msg_clear(&m);
                    break;
                }
                if (rc)
                    zlog(e, "dropped a message from %s: %s", m.user_id[0] ? m.user_id : "a peer",
                         err);
                else
                    handle(e, &m);
                mt_proto_msg_clear(&m);
            }
        }
        tick(e);
        if (mt_clock_wall_s() - last_status > 1.0) {
            if (e->env.on_live)
                e->env.on_live(e->env.ctx);
            last_status = mt_clock_wall_s();
        }
        if (e->o.worker_wait_s > 0) {
            size_t able = 0;
            const zworker *unable = NULL;
            /* the first that connected, the first reachable one if any */
            for (i = 0; i < z->nw; i++) {
                able += can_run(e, &z->w[i]);
                if (!unable || (z->w[i].alive && !unable->alive))
                    unable = &z->w[i];
            }
            /* the wait counts from the last moment a worker could run the
             * jobs: a worker silent for a while mid-tune is not fatal */
            if (able)
                last_able = mt_clock_wall_s();
            if (!able && mt_clock_wall_s() - last_able > e->o.worker_wait_s) {
                /* connected workers that cannot run the jobs are no better
                 * than none: the jobs would wait forever */
                char why[4096] = "";
                if (unable)
                    unable_why(e, unable, why, sizeof why);
                if (!unable)
                    mt_diag_add(e->d, e->o.workers, 0, NULL,
                                "no worker connected within %.0f s (start `moetune worker "
                                "--connect ...` on the GPU nodes)",
                                e->o.worker_wait_s);
                else
                    mt_diag_add(e->d, e->o.workers, 0, NULL,
                                "no connected worker can run this contract's jobs within %.0f s: "
                                "%s (see the worker's --allow and --launchers)",
                                e->o.worker_wait_s, why);
                free(z->jobs);
                z->jobs = NULL;
                return -1;
            }
        }
    }
    free(z->jobs);
    z->jobs = NULL;
    z->njobs = 0;
    return 0;
}
