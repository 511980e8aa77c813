/*
 * exec.c - the engine's jobs: one measurement each, memoized in the store.
 *
 * A job is (config, kind, replicate).  Before running, the memo is asked;
 * a finished job is never run again.  The local executor runs jobs through
 * workers/measure.c (the contract's launcher, real processes), in process
 * for one slot and in forked children (each with its own store connection)
 * for several.  The model executor evaluates the sim's model in process
 * (search/model.c), with the sim's own noise: the same engine and budget,
 * thousands of times faster, for the search benchmark.  Every job a batch
 * counts adds its row to the tune's timeline (its throughput and the
 * incumbent's).
 */
#include "exec_int.h"

#include "config.h"
#include "job_memo.h"
#include "measure.h"
#include "model.h"
#include "prepare.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

void mt_exec_opts_init(mt_exec_opts *o)
{
    memset(o, 0, sizeof *o);
    o->executor = MT_EXEC_LOCAL;
    o->slots = 1;
}

mt_exec *mt_exec_new(const mt_exec_opts *o, const mt_exec_env *env, mt_diag *d)
{
    mt_exec *x = calloc(1, sizeof *x);
    if (!x) {
        mt_diag_add(d, env->dir, 0, NULL, "out of memory");
        return NULL;
    }
    x->o = *o;
    if (x->o.slots < 1)
        x->o.slots = 1;
    x->env = *env;
    x->reg = env->reg;
    x->c = env->c;
    x->d = d;
    x->sim = o->sim_path ? o->sim_path : "moetune-sim";
    if (!(x->st = mt_store_open(env->dir, env->c, d)) ||
        (o->executor == MT_EXEC_ZMQ && (!o->workers || mt_zexec_open(x))))
        mt_exec_destroy(&x);
    return x;
}

void mt_exec_destroy(mt_exec **px)
{
    mt_exec *x = *px;
    if (!x)
        return;
    mt_zexec_close(x);
    mt_store_destroy(&x->st);
    free(x);
    *px = NULL;
}

void mt_exec_set_prepare(mt_exec *x, const char *const *prepare, size_t n, const char *repo,
                         double timeout_s)
{
    x->prepare = prepare;
    x->n_prepare = n;
    x->repo = repo;
    x->prepare_timeout_s = timeout_s;
}

void mt_exec_uncharge(mt_exec *x, const mt_exec_job *v, size_t n)
{
    size_t i;
    double gh = 0;
    for (i = 0; i < n; i++) {
        mt_job_memo m;
        mt_job_memo_from_json(v[i].out, &m);
        gh += isfinite(m.gpu_hours) ? m.gpu_hours : 0;
    }
    x->runs -= (int)n;
    x->gpu_hours -= gh;
}

mt_store *mt_exec_store(mt_exec *x)
{
    return x->st;
}

const char *mt_exec_sim(const mt_exec *x)
{
    return x->sim;
}

double mt_exec_gpu_hours(const mt_exec *x)
{
    return x ? x->gpu_hours : 0;
}

int mt_exec_runs(const mt_exec *x)
{
    return x ? x->runs : 0;
}

int mt_exec_executed(const mt_exec *x)
{
    return x ? x->executed : 0;
}

const char *mt_exec_live(const mt_exec *x)
{
    return x ? x->live : "";
}

double mt_exec_num(const cJSON *o, const char *k)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

const char *mt_exec_str(const cJSON *o, const char *k)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(x) ? x->valuestring : "";
}

int mt_exec_job_ok(const cJSON *j)
{
    mt_job_memo m;
    mt_job_memo_from_json(j, &m);
    return j && !strcmp(m.outcome, "ok") && isfinite(m.ms);
}

/* The memo of a measurement (measure.c calls it inside the run's
 * transaction). */
static char *job_memo(const mt_measure *m, void *ctx)
{
    (void)ctx;
    return mt_measure_memo_json(m);
}

void mt_exec_job_key(const char *kind, const char *id, int rep, char *key, size_t n)
{
    snprintf(key, n, "job/%s/%s/%d", kind, id, rep);
}

/* A job that could not even be set up (render failed, ...): a typed
 * outcome, memoized like any other. */
static int memo_failed(mt_exec *e, mt_store *st, const char *key, const char *why)
{
    char *text = mt_job_memo_failed("launch_error", why);
    int rc = text ? mt_store_memo_put(st, key, text, e->d) : -1;
    free(text);
    return rc < 0 ? rc : 0;
}

/* Runs one job through measure.c into st. */
static int run_local(mt_exec *e, mt_store *st, const mt_exec_job *q)
{
    mt_measure_spec spec;
    mt_measure m;
    char key[128], dir[4096];
    mt_diag *d = mt_diag_new();
    int rc;
    mt_exec_job_key(q->kind, q->id, q->rep, key, sizeof key);
    snprintf(dir, sizeof dir, "%s/runs", e->env.dir);
    mkdir(dir, 0755);
    snprintf(dir, sizeof dir, "%s/runs/%s-%s-r%d", e->env.dir, q->id, q->kind, q->rep);
    if (q->rev) {
        /* a bisection job: the revision's prepare step first (once per
         * revision); a skip or a failure is the job's typed outcome */
        char work[4096], root[4096], abs[PATH_MAX];
        /* absolute: the job runs in its own directory */
        if (!realpath(e->env.dir, abs))
            snprintf(abs, sizeof abs, "%s", e->env.dir);
        snprintf(root, sizeof root, "%.3000s/work", abs);
        rc = mt_prepare_job(e->prepare, e->n_prepare, q->rev, e->repo, root,
                            e->prepare_timeout_s, st, key, work, sizeof work, d);
        if (rc <= 0) {
            mt_diag_destroy(&d);
            return rc;
        }
        memset(&spec, 0, sizeof spec);
        spec.rev = q->rev;
        spec.work = strdup(work);
    } else {
        memset(&spec, 0, sizeof spec);
    }
    spec.contract = e->c;
    spec.reg = e->reg;
    spec.config = q->cfg;
    spec.kind = !strcmp(q->kind, "profile") ? "profile" : q->kind;
    spec.replicate = q->rep;
    spec.run_dir = dir;
    spec.sim_path = e->sim;
    spec.profile = !strcmp(q->kind, "profile");
    spec.sim_seed = e->env.seed;
    spec.routing = q->routing;
    spec.memo_key = key;
    spec.memo = job_memo;
    rc = mt_measure_run(&spec, st, &m, d);
    if (rc < 0) {
        char why[512];
        snprintf(why, sizeof why, "%s",
                 mt_diag_count(d) ? mt_diag_at(d, 0)->message : "the job could not be set up");
        rc = memo_failed(e, st, key, why);
    }
    mt_measure_clear(&m);
    mt_diag_destroy(&d);
    free((char *)spec.work);
    return rc;
}

/* ---- the model executor (its jobs in search/model.c) -------------------------------------- */

static int run_model(mt_exec *e, const mt_exec_job *q)
{
    char key[128], *text = mt_model_job_routed(e->c, q->cfg, q->kind, q->rep, e->env.seed,
                                               q->routing && !strcmp(q->routing, "natural"));
    int rc;
    if (!text)
        return -ENOMEM;
    mt_exec_job_key(q->kind, q->id, q->rep, key, sizeof key);
    rc = mt_store_memo_put(e->st, key, text, e->d);
    free(text);
    return rc < 0 ? rc : 0;
}

/* ---- batches ------------------------------------------------------------------------------ */

static cJSON *memo_get(mt_exec *e, const mt_exec_job *q)
{
    char key[128], *text = NULL;
    cJSON *j = NULL;
    mt_exec_job_key(q->kind, q->id, q->rep, key, sizeof key);
    if (mt_store_memo_get(e->st, key, &text, e->d) == 1)
        j = cJSON_Parse(text);
    free(text);
    return j;
}

int mt_exec_run(mt_exec *e, mt_exec_job *v, size_t n)
{
    size_t i, running = 0;
    pid_t *pids = calloc(n ? n : 1, sizeof *pids);
    int rc = 0;
    if (!pids)
        return -ENOMEM;
    for (i = 0; i < n; i++) {
        /* the job is named by the id of the config as it runs (the kind's
         * train_iters), the id measure.c stores the run under: memo key,
         * run directory and store agree (a validation run's differs from
         * its config's screens) */
        if (v[i].cfg && !v[i].rev)
            mt_measure_config_id(e->c, v[i].cfg, v[i].kind, v[i].id);
        v[i].out = memo_get(e, &v[i]);
        v[i].fresh = 0;
    }
    if (e->o.executor == MT_EXEC_ZMQ) {
        for (i = 0; i < n; i++) {
            mt_exec_job_key(v[i].kind, v[i].id, v[i].rep, v[i].key, sizeof v[i].key);
            if (!v[i].out)
                v[i].fresh = 1, e->executed++;
        }
        rc = mt_zexec_run(e, v, n);
    }
    for (i = 0; i < n && !rc && e->o.executor != MT_EXEC_ZMQ; i++) {
        if (v[i].out)
            continue;
        v[i].fresh = 1;
        e->executed++;
        if (e->o.executor == MT_EXEC_MODEL) {
            rc = run_model(e, &v[i]);
        } else if (e->o.slots <= 1) {
            rc = run_local(e, e->st, &v[i]);
        } else {
            pid_t pid, parent;
            while ((int)running >= e->o.slots) {
                int st;
                if (waitpid(-1, &st, 0) > 0)
                    running--;
            }
            fflush(NULL);
            parent = getpid();
            pid = fork();
            if (pid == 0) {
                /* the child: its own store connection, never the parent's */
                mt_diag *d;
                mt_store *st;
                sigset_t stop;
                int r;
                /* it dies with the tune (a stop, a crash, kill -9: its run's
                 * shepherd then stops the run), and takes the tune's
                 * blocked SIGTERM/SIGINT back (moetune tune waits for them
                 * in one thread) */
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent)
                    _exit(1);
                sigemptyset(&stop);
                sigaddset(&stop, SIGTERM);
                sigaddset(&stop, SIGINT);
                sigprocmask(SIG_UNBLOCK, &stop, NULL);
                d = mt_diag_new();
                st = mt_store_open(e->env.dir, e->c, d);
                r = st ? run_local(e, st, &v[i]) : -1;
                if (r)
                    mt_diag_print(d, stderr);
                mt_store_destroy(&st);
                _exit(r ? 1 : 0);
            }
            if (pid < 0) {
                mt_diag_add(e->d, e->env.dir, 0, NULL, "cannot fork a job: %s", strerror(errno));
                rc = -1;
                break;
            }
            pids[i] = pid;
            running++;
        }
    }
    while (running > 0) {
        int st;
        if (waitpid(-1, &st, 0) > 0)
            running--;
        else if (errno != EINTR)
            break;
    }
    free(pids);
    for (i = 0; i < n; i++) {
        if (!v[i].out)
            v[i].out = memo_get(e, &v[i]);
        if (!v[i].out && !rc) {
            mt_diag_add(e->d, e->env.dir, 0, NULL,
                        "job %s of config %s (replicate %d) left no result in the store", v[i].kind,
                        v[i].id, v[i].rep);
            rc = -1;
        }
        if (v[i].out) {
            mt_job_memo m;
            double gh;
            mt_job_memo_from_json(v[i].out, &m);
            gh = m.gpu_hours;
            e->gpu_hours += isfinite(gh) ? gh : 0;
            e->runs++;
            if (e->env.on_job)
                e->env.on_job(e->env.ctx, &v[i], e->runs, e->gpu_hours);
        }
    }
    return rc;
}

void mt_exec_jobs_free(mt_exec_job *v, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        cJSON_Delete(v[i].out);
        v[i].out = NULL;
    }
}
