#include "measure.h"
#include "clock.h"
#include "dialect.h"

#include "config.h"
#include "profile.h"
#include "fingerprint.h"
#include "job_memo.h"
#include "launch.h"
#include "nvml.h"
#include "prepare.h"
#include "render.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include <dirent.h>
#include <sys/stat.h>
#include <time.h>

void mt_measure_sim_env(const mt_contract *c, const char *routing, mt_kv *env)
{
    char derr[256];
    const mt_mlm_dialect *dl;
    const char *te;
    mt_kv_set(env, "MOETUNE_SIM_GPU", mt_kv_get(c->hardware, "gpu"));
    mt_kv_set(env, "MOETUNE_SIM_GPUS_PER_NODE", mt_kv_get(c->hardware, "gpus_per_node"));
    mt_kv_set(env, "MOETUNE_SIM_NODES", mt_kv_get(c->hardware, "nodes"));
    mt_kv_set(env, "MOETUNE_SIM_NVLINK_DOMAIN", mt_kv_get(c->hardware, "nvlink_domain"));
    mt_kv_set(env, "MOETUNE_SIM_ROUTING",
              c->routing == MT_ROUTING_NATURAL || (routing && !strcmp(routing, "natural"))
                  ? "natural"
                  : "forced");
    /* the software stack the sim plays (workers/sim/README.md): the
     * Megatron-LM version whose flags and start-up rules it applies and the
     * Transformer Engine version (not part of the sim's config id, so the
     * noise of every run stays as it was) */
    dl = c->stack ? mt_dialect_for_stack(c->stack, derr, sizeof derr) : NULL;
    te = c->stack ? mt_kv_get(c->stack, "transformer_engine") : NULL;
    if (dl)
        mt_kv_set(env, "MOETUNE_SIM_MEGATRON", mt_dialect_name(dl));
    if (te)
        mt_kv_set(env, "MOETUNE_SIM_TE", te);
}

/* What the line and iteration callbacks share. */
typedef struct glue {
    const struct mt_measure_spec *spec;
    mt_logparse *log;
    mt_run *run;
    double last_iter_at;
    long iters;
    double sim_seconds;
    /* under srun: the step's nodes, asked of Slurm at the first line */
    mt_launch *launch;
    int hosts_asked;
    double hosts_at;
    mt_strlist hosts;
} glue;

static void on_iteration(void *ctx, const mt_iteration *it)
{
    glue *g = ctx;
    double t = mt_clock_mono_s();
    (void)it;
    if (!g->run)
        return;
    mt_runner_progress(g->run);
    /* the expected step comes from the run itself: after two iterations the
     * hang clock allows k times the real interval (at least half a second) */
    if (g->iters++ >= 1 && g->last_iter_at > 0)
        mt_runner_set_hang(g->run, fmax(0.5, t - g->last_iter_at), 0);
    g->last_iter_at = t;
}

static void on_line(void *ctx, int stream, const char *line, size_t n)
{
    glue *g = ctx;
    static const char marker[] = "[sim] simulated wall time: ";
    const char *s = line;
    size_t k = 0;
    if (g->spec && g->spec->on_line && memmem(line, n, " iteration ", 11))
        g->spec->on_line(g->spec->line_ctx, line, n);
    if (g->launch && g->launch->kind == MT_LAUNCHER_SRUN && !g->hosts.n && g->hosts_asked < 4 &&
        mt_clock_mono_s() - g->hosts_at > 0.3) {
        /* the nodes Slurm gave the step, while it is live: the run's node
         * list (fingerprint) and where each rank ran (evidence); asked at
         * the first line, and again (at most 4 times) when squeue did not
         * list the step yet */
        mt_diag *hd = mt_diag_new();
        g->hosts_asked++;
        g->hosts_at = mt_clock_mono_s();
        if (mt_launch_hosts(g->launch, &g->hosts, hd) != 0)
            mt_strlist_clear(&g->hosts);
        mt_diag_destroy(&hd);
    }
    /* srun -l labels each line with its task: "0: " (the number padded) */
    while (k < n && k < 8 && line[k] == ' ')
        k++;
    if (k < n && line[k] >= '0' && line[k] <= '9') {
        while (k < n && line[k] >= '0' && line[k] <= '9')
            k++;
        if (k + 1 < n && line[k] == ':' && line[k + 1] == ' ')
            s = line + k + 2;
    }
    if ((size_t)(line + n - s) > sizeof marker - 1 && !strncmp(s, marker, sizeof marker - 1))
        g->sim_seconds = strtod(s + sizeof marker - 1, NULL);
    mt_logparse_feed_channel(g->log, -1, stream, line, n);
    mt_logparse_feed_channel(g->log, -1, stream, "\n", 1);
}

/* The evidence names the rank and node of the line that decided the
 * outcome: an OOM, a NaN, an NCCL or infrastructure error, a crash, from
 * one rank's stream (srun -l's label, torchrun's [rankN], or the rank the
 * line names).  Ranks are placed as srun's block distribution and torchrun
 * place them: rank / gpus_per_node is the node's index in hosts. */
void mt_measure_attribute(int outcome, const mt_logparse *log, const mt_strlist *hosts,
                          int gpus_per_node, char *evidence, size_t n)
{
    static const mt_logevent_kind kinds[] = {MT_LOGEV_OOM,   MT_LOGEV_NAN,       MT_LOGEV_NCCL_ERROR,
                                             MT_LOGEV_INFRA, MT_LOGEV_CRASH,     MT_LOGEV_EXCEPTION};
    size_t i;
    if (outcome != MT_OUTCOME_OOM && outcome != MT_OUTCOME_NAN && outcome != MT_OUTCOME_INFRA &&
        outcome != MT_OUTCOME_CRASH)
        return;
    for (i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        const mt_logevent *e = mt_logparse_first(log, kinds[i]);
        const char *at;
        char who[200], *out;
        if (!e || e->rank < 0 || !e->text[0] || !(at = strstr(evidence, e->text)))
            continue;
        if (hosts && hosts->n && gpus_per_node > 0 && (size_t)(e->rank / gpus_per_node) < hosts->n)
            snprintf(who, sizeof who, "rank %d on %s: ", e->rank,
                     hosts->v[e->rank / gpus_per_node]);
        else
            snprintf(who, sizeof who, "rank %d: ", e->rank);
        if (!(out = malloc(n)))
            return;
        snprintf(out, n, "%.*s%s%s", (int)(at - evidence), evidence, who, at);
        memcpy(evidence, out, n);
        free(out);
        return;
    }
}

static const char *first_event(const mt_logparse *log, mt_logevent_kind kind)
{
    const mt_logevent *e = mt_logparse_first(log, kind);
    return e ? e->text : NULL;
}

/* The records of a run's last pass: a restarted run (from a checkpoint, or
 * from the start) logs some iterations again, and what its last pass
 * printed is what it measured.  keep[i] is 1 when record i is not followed
 * by a record of the same or an earlier iteration.  Caller frees; NULL on
 * OOM.  *superseded: the records set aside; *restart_at, *restart_after:
 * where the last restart went back to and from (-1 when none). */
static unsigned char *last_pass(const mt_logparse *log, size_t *superseded, int64_t *restart_at,
                                int64_t *restart_after)
{
    size_t n = mt_logparse_iterations(log), i;
    unsigned char *keep = calloc(n + 1, 1);
    int64_t min_after = INT64_MAX, prev = INT64_MIN;
    int speaker = -1;
    *superseded = 0;
    *restart_at = *restart_after = -1;
    if (!keep)
        return NULL;
    /* one iteration stream: Megatron logs on the last rank; when several
     * ranks' streams hold iteration lines (a patched stack, a print on
     * every rank), the highest rank's are the run's, the others are not
     * samples (and no restart) */
    for (i = 0; i < n; i++) {
        mt_iteration it;
        if (mt_logparse_iteration(log, i, &it) == 0 && it.rank > speaker)
            speaker = it.rank;
    }
    for (i = n; i-- > 0;) {
        mt_iteration it;
        if (mt_logparse_iteration(log, i, &it) || (speaker >= 0 && it.rank != speaker))
            continue;
        keep[i] = it.iteration < min_after;
        *superseded += !keep[i];
        if (it.iteration < min_after)
            min_after = it.iteration;
    }
    for (i = 0; i < n; i++) {
        mt_iteration it;
        if (mt_logparse_iteration(log, i, &it) || (speaker >= 0 && speaker != it.rank))
            continue;
        if (prev != INT64_MIN && it.iteration <= prev)
            *restart_at = it.iteration, *restart_after = prev;
        prev = it.iteration;
    }
    return keep;
}

/* A step time no run can have: NaN, infinite or negative. */
static int impossible_ms(double ms)
{
    return !isfinite(ms) || ms < 0;
}

static int classify(const mt_run_result *run, const mt_logparse *log, const unsigned char *keep,
                    int window_first, int window_last, char *evidence, size_t n)
{
    const char *why;
    size_t i, iters = mt_logparse_iterations(log);
    int64_t last = -1;
    if (run->outcome == MT_OUTCOME_LAUNCH_ERROR) {
        snprintf(evidence, n, "%s", run->evidence ? run->evidence : "the program could not start");
        return MT_OUTCOME_LAUNCH_ERROR;
    }
    /* an OOM on one rank leaves the others hanging in a collective: the OOM
     * is the cause, the hang a symptom */
    if ((why = first_event(log, MT_LOGEV_OOM))) {
        snprintf(evidence, n, "%s", why);
        return MT_OUTCOME_OOM;
    }
    if ((why = first_event(log, MT_LOGEV_NAN))) {
        snprintf(evidence, n, "%s", why);
        return MT_OUTCOME_NAN;
    }
    for (i = 0; i < iters; i++) {
        mt_iteration itv, *it = &itv;
        int k;
        if ((keep && !keep[i]) || mt_logparse_iteration(log, i, &itv))
            continue;
        if (it->nan_count > 0) {
            snprintf(evidence, n, "iteration %lld reports %lld NaN iterations",
                     (long long)it->iteration, (long long)it->nan_count);
            return MT_OUTCOME_NAN;
        }
        for (k = 0; k < it->n_losses; k++)
            if (!isfinite(it->loss[k])) {
                snprintf(evidence, n, "iteration %lld: %s is %g", (long long)it->iteration,
                         it->loss_key[k], it->loss[k]);
                return MT_OUTCOME_NAN;
            }
        if (it->iteration > last)
            last = it->iteration;
    }
    if ((why = first_event(log, MT_LOGEV_NCCL_ERROR)) || (why = first_event(log, MT_LOGEV_INFRA))) {
        snprintf(evidence, n, "%s", why);
        return MT_OUTCOME_INFRA;
    }
    if (run->hung) {
        snprintf(evidence, n, "%s", run->evidence ? run->evidence : "no iteration progress");
        return MT_OUTCOME_HANG;
    }
    if (run->timed_out) {
        snprintf(evidence, n, "%s", run->evidence ? run->evidence : "time limit reached");
        return MT_OUTCOME_TIMEOUT;
    }
    if (run->signaled || (run->exited && run->exit_code != 0) || run->outcome == MT_OUTCOME_CRASH) {
        why = first_event(log, MT_LOGEV_CRASH);
        if (!why)
            why = first_event(log, MT_LOGEV_EXCEPTION);
        snprintf(evidence, n, "%s%s%s", run->evidence ? run->evidence : "crash", why ? ": " : "",
                 why ? why : "");
        return MT_OUTCOME_CRASH;
    }
    /* a step time no GPU can take is a broken log, never a measurement:
     * the median would be NaN, or a negative time a "gain" */
    for (i = 0; i < iters; i++) {
        mt_iteration it;
        const char *field = NULL;
        double v = NAN;
        if ((keep && !keep[i]) || mt_logparse_iteration(log, i, &it) ||
            it.iteration < window_first || it.iteration > window_last)
            continue;
        if (it.has & MT_IT_ELAPSED && impossible_ms(it.elapsed_ms))
            field = "elapsed time per iteration (ms)", v = it.elapsed_ms;
        else if (!(it.has & MT_IT_ELAPSED) && it.has & MT_IT_STEP_TIME &&
                 impossible_ms(it.step_time_s))
            field = "Step Time (s)", v = it.step_time_s;
        if (field) {
            char rank[32] = "";
            if (it.rank >= 0)
                snprintf(rank, sizeof rank, ", rank %d", it.rank);
            snprintf(evidence, n,
                     "impossible step time in the window: log line %llu%s, iteration %lld: "
                     "\"%s: %g\" (NaN, infinite or negative); the log is broken, nothing was "
                     "measured",
                     (unsigned long long)it.line, rank, (long long)it.iteration, field, v);
            return MT_OUTCOME_CRASH;
        }
    }
    if (last < window_last) {
        snprintf(evidence, n, "the run ended at iteration %lld, before its window ended (%d)",
                 (long long)last, window_last);
        return MT_OUTCOME_CRASH;
    }
    snprintf(evidence, n, "exit status 0; iterations 1-%lld", (long long)last);
    return MT_OUTCOME_OK;
}

int mt_measure_classify(const mt_run_result *run, const mt_logparse *log, int window_first,
                        int window_last, char *evidence, size_t n)
{
    size_t superseded = 0;
    int64_t at = -1, after = -1;
    unsigned char *keep = last_pass(log, &superseded, &at, &after);
    int outcome = classify(run, log, keep, window_first, window_last, evidence, n);
    if (superseded && n) {
        /* evidence, not an error: the duplicates are set aside */
        size_t l = strlen(evidence);
        snprintf(evidence + l, n - l,
                 "; the run restarted (iteration %lld logged after %lld): its last pass is kept, "
                 "%zu earlier sample%s of the same iterations set aside",
                 (long long)at, (long long)after, superseded, superseded == 1 ? "" : "s");
    }
    free(keep);
    return outcome;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
    if (!n)
        return NAN;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void summarize(mt_measure *m)
{
    size_t i, n = mt_logparse_iterations(m->log), k = 0, kt = 0;
    double *steps = calloc(n + 1, sizeof *steps), *tf = calloc(n + 1, sizeof *tf);
    size_t superseded;
    int64_t at, after;
    unsigned char *keep = last_pass(m->log, &superseded, &at, &after);
    m->loss_finite = 1;
    m->last_loss = NAN;
    m->used_first = m->used_last = -1;
    for (i = 0; i < n; i++) {
        mt_iteration itv, *it = &itv;
        int j, found = 0;
        double lm;
        if ((keep && !keep[i]) || mt_logparse_iteration(m->log, i, &itv))
            continue;
        lm = mt_iteration_loss(it, "lm loss", &found);
        if (found)
            m->last_loss = lm;
        m->skipped += it->skipped > 0 ? (long)it->skipped : 0;
        m->nan += it->nan_count > 0 ? (long)it->nan_count : 0;
        for (j = 0; j < it->n_losses; j++)
            if (!isfinite(it->loss[j]))
                m->loss_finite = 0;
        if (it->iteration < m->first || it->iteration > m->last)
            continue;
        if (it->has & (MT_IT_ELAPSED | MT_IT_STEP_TIME)) {
            /* what the median covers, for the memo: checked against the
             * declared window (tests/test_window.c) */
            if (m->used_first < 0 || it->iteration < m->used_first)
                m->used_first = (long)it->iteration;
            if (it->iteration > m->used_last)
                m->used_last = (long)it->iteration;
        }
        if (it->has & MT_IT_ELAPSED)
            steps[k++] = it->elapsed_ms;
        else if (it->has & MT_IT_STEP_TIME)
            steps[k++] = it->step_time_s * 1000;
        if (it->has & MT_IT_TFLOPS)
            tf[kt++] = it->tflops;
    }
    m->n_window = k;
    m->median_step_ms = median(steps, k);
    m->median_tflops = median(tf, kt);
    free(keep);
    free(steps);
    free(tf);
}

/* Every GPU's peak: NVML on a real node, else the sim's report, else the
 * per-rank memory lines of the log (which only some ranks print). */
static void collect_memory(mt_measure *m, mt_gpu_mems *nv, const char *sim_file,
                           mt_store_gpu_mem **rows, size_t *nrows, mt_diag *d)
{
    mt_gpu_mems sim = {0};
    const mt_gpu_mems *src = NULL;
    size_t i;
    struct stat st;
    m->peak_rank = -1;
    snprintf(m->peak_source, sizeof m->peak_source, "none");
    if (nv && nv->n)
        src = nv;
    else if (sim_file && stat(sim_file, &st) == 0 && mt_sim_memory_read(sim_file, &sim, d) == 0 && sim.n)
        src = &sim;
    if (src) {
        long hot = mt_gpu_mems_hottest(src);
        *rows = calloc(src->n, sizeof **rows);
        for (i = 0; *rows && i < src->n; i++) {
            (*rows)[i].rank = src->v[i].rank;
            (*rows)[i].host = strdup(src->v[i].host ? src->v[i].host : "");
            (*rows)[i].gpu = src->v[i].gpu;
            (*rows)[i].peak_bytes = (int64_t)src->v[i].peak_bytes;
            (*rows)[i].alloc_bytes = -1;
            (*rows)[i].source = src == nv ? "nvml" : "sim";
        }
        *nrows = *rows ? src->n : 0;
        if (hot >= 0) {
            m->peak_bytes = (double)src->v[hot].peak_bytes;
            m->peak_rank = src->v[hot].rank;
        }
        snprintf(m->peak_source, sizeof m->peak_source, "%s", src == nv ? "nvml" : "sim");
    } else {
        size_t nr = mt_logparse_ranks(m->log), k = 0;
        *rows = calloc(nr + 1, sizeof **rows);
        for (i = 0; *rows && i < nr; i++) {
            const mt_rank_memory *r = mt_logparse_rank_memory(m->log, i);
            /* a line cut before its last field ("max reserved") keeps the
             * fields it has: the peak is the highest of them that is there */
            int64_t peak = r->max_reserved >= 0   ? r->max_reserved
                           : r->reserved >= 0     ? r->reserved
                           : r->max_allocated >= 0 ? r->max_allocated
                                                   : r->allocated;
            if (peak < 0)
                continue; /* no number at all on its lines */
            (*rows)[k].rank = r->rank;
            (*rows)[k].host = strdup("");
            (*rows)[k].gpu = -1;
            (*rows)[k].peak_bytes = peak;
            (*rows)[k].alloc_bytes = r->max_allocated >= 0 ? r->max_allocated : r->allocated;
            (*rows)[k].source = "log";
            k++;
            if ((double)peak > m->peak_bytes) {
                m->peak_bytes = (double)peak;
                m->peak_rank = r->rank;
                snprintf(m->peak_source, sizeof m->peak_source, "log");
            }
        }
        *nrows = *rows ? k : 0;
    }
    mt_gpu_mems_clear(&sim);
}

/* The first trace file under dir (depth-first, names sorted), or "". */
static int find_trace(const char *dir, char *out, size_t n, int depth)
{
    struct dirent **ents = NULL;
    int k, i, found = 0;
    if (depth > 4 || (k = scandir(dir, &ents, NULL, alphasort)) < 0)
        return 0;
    for (i = 0; i < k; i++) {
        const char *nm = ents[i]->d_name;
        char path[4096];
        struct stat sb;
        size_t len = strlen(nm);
        if (found || nm[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, nm);
        if (stat(path, &sb))
            continue;
        if (S_ISDIR(sb.st_mode))
            found = find_trace(path, out, n, depth + 1);
        else if ((len > 5 && !strcmp(nm + len - 5, ".json")) ||
                 (len > 8 && !strcmp(nm + len - 8, ".json.gz")) ||
                 (len > 7 && !strcmp(nm + len - 7, ".sqlite"))) {
            found = strlen(path) < n; /* a path too long to keep is skipped */
            if (found)
                memcpy(out, path, strlen(path) + 1);
        }
    }
    for (i = 0; i < k; i++)
        free(ents[i]);
    free(ents);
    return found;
}

/* Reads the profiled run's trace: its wall and its trace.* evidence. */
static void analyse_trace(const mt_measure_spec *spec, mt_measure *m, mt_kv *ev, mt_diag *d)
{
    const mt_contract *c = spec->contract;
    char tb[4096];
    mt_trace *t;
    mt_profile p;
    mt_profile_opts o;
    size_t i;
    const char *k, *v;
    snprintf(tb, sizeof tb, "%s/tb", spec->run_dir);
    if (m->outcome != MT_OUTCOME_OK || !find_trace(tb, m->trace_path, sizeof m->trace_path, 0))
        return;
    if (!(t = mt_trace_open(m->trace_path, d)))
        return;
    for (i = 0; i < c->n_trace_classes; i++)
        mt_trace_add_class(t, c->trace_classes[i], d);
    mt_profile_opts_init(&o);
    o.rules = spec->rules ? *spec->rules : c->profile;
    o.headroom_gate = c->memory_headroom;
    {
        long pp = strtol(mt_kv_get(spec->config, "pipeline_model_parallel_size")
                             ? mt_kv_get(spec->config, "pipeline_model_parallel_size")
                             : "1",
                         NULL, 10);
        long vpp = strtol(mt_kv_get(spec->config, "virtual_pipeline_model_parallel_size")
                              ? mt_kv_get(spec->config, "virtual_pipeline_model_parallel_size")
                              : "1",
                          NULL, 10);
        long mbs = strtol(mt_kv_get(spec->config, "micro_batch_size")
                              ? mt_kv_get(spec->config, "micro_batch_size")
                              : "1",
                          NULL, 10);
        long gbs = strtol(mt_kv_get(c->batch, "global_batch_size"), NULL, 10);
        mt_mesh mesh;
        mt_config_mesh(spec->config, c->hardware, &mesh);
        if (mesh.dp > 0 && mbs > 0)
            o.bubble_share = mt_wall_bubble_share((int)pp, (int)(vpp > 0 ? vpp : 1),
                                                  (int)(gbs / (mbs * mesh.dp)));
    }
    if (mt_profile_build(t, m->trace_path, &o, &p, d) == 0) {
        m->profiled = 1;
        m->wall = p.wall;
        m->share_compute = p.window_ns ? (double)p.compute_ns / (double)p.window_ns : 0;
        m->share_hidden = p.window_ns ? (double)p.hidden_ns / (double)p.window_ns : 0;
        /* window_ns sums the devices' windows */
        if (p.ndev && p.window_ns > 0)
            m->prof_window_s = (double)p.window_ns / (double)p.ndev / 1e9;
        if (p.has_steps)
            m->prof_first = p.first, m->prof_last = p.last;
        for (i = 0; mt_kv_entry(p.evidence, i, &k, &v) == 0; i++)
            mt_kv_set(ev, k, v);
        mt_kv_setf(ev, "trace.wall", "%s", mt_wall_name(p.wall.wall));
        mt_profile_clear(&p);
    }
    mt_trace_destroy(&t);
}

static void verify(const mt_measure_spec *spec, mt_measure *m, const mt_kv *cfg,
                   const mt_rendered *r, mt_diag *d)
{
    mt_kv *ev = mt_kv_new();
    const char *k, *v;
    size_t i;
    mt_ctx_v1 ctx;
    mt_logparse_evidence(m->log, ev);
    /* what the worker itself launched with is evidence too */
    for (i = 0; mt_kv_entry(r->env, i, &k, &v) == 0; i++) {
        char key[300];
        snprintf(key, sizeof key, "env.%s", k);
        mt_kv_set(ev, key, v);
    }
    for (i = 0; mt_kv_entry(r->launch, i, &k, &v) == 0; i++) {
        char key[300];
        snprintf(key, sizeof key, "launch.%s", k);
        mt_kv_set(ev, key, v);
    }
    if (spec->profile)
        analyse_trace(spec, m, ev, d);
    ctx = mt_ctx_make(spec->contract, cfg, ev, NULL);
    mt_registry_verify(spec->reg, &ctx, &m->verdicts, d);
    for (i = 0; i < m->verdicts.n; i++)
        m->not_applied += m->verdicts.v[i].verdict == MT_VERDICT_NOT_APPLIED;
    m->verify_evidence = ev;
}

static int store_result(const mt_measure_spec *spec, mt_store *st, mt_measure *m,
                        const mt_kv *cfg, const mt_store_gpu_mem *gpus, size_t ngpus,
                        const char *fingerprint, double started, mt_diag *d)
{
    size_t n = mt_logparse_iterations(m->log), i;
    mt_store_sample *samples = calloc(n + 1, sizeof *samples);
    mt_store_loss *losses = calloc(n * MT_LOGPARSE_MAX_LOSSES + 1, sizeof *losses);
    mt_store_result r;
    char *canon = mt_config_canonical(cfg);
    long world = strtol(mt_kv_get(spec->contract->hardware, "world_size"), NULL, 10);
    int rc;
    size_t superseded, ns = 0;
    int64_t at, after;
    unsigned char *keep = last_pass(m->log, &superseded, &at, &after);
    memset(&r, 0, sizeof r);
    /* one sample per iteration: a restarted run's last pass */
    for (i = 0; i < n; i++) {
        mt_iteration itv, *it = &itv;
        int k;
        if ((keep && !keep[i]) || mt_logparse_iteration(m->log, i, &itv))
            continue;
        samples[ns].iteration = (long)it->iteration;
        samples[ns].elapsed_ms = it->has & MT_IT_ELAPSED ? it->elapsed_ms : NAN;
        samples[ns].tflops = it->has & MT_IT_TFLOPS ? it->tflops : NAN;
        samples[ns].grad_norm = it->has & MT_IT_GRAD_NORM ? it->grad_norm : NAN;
        samples[ns].skipped = (long)it->skipped;
        samples[ns].nan = (long)it->nan_count;
        samples[ns].losses = losses + ns * MT_LOGPARSE_MAX_LOSSES;
        for (k = 0; k < it->n_losses; k++) {
            samples[ns].losses[k].key = it->loss_key[k];
            samples[ns].losses[k].value = it->loss[k];
        }
        samples[ns].n_losses = (size_t)it->n_losses;
        ns++;
    }
    free(keep);
    r.run.config_id = m->config_id;
    r.run.config_canonical = canon;
    r.run.kind = spec->kind;
    r.run.replicate = spec->replicate;
    r.run.retry = spec->retry;
    r.run.outcome = mt_outcome_name(m->outcome);
    r.run.evidence = m->evidence;
    r.run.fingerprint = fingerprint;
    r.run.started = started;
    r.run.ended = (double)time(NULL);
    r.run.wall_s = m->run.wall_s;
    r.run.sim_s = m->sim_seconds;
    r.run.gpu_hours = m->sim_seconds > 0 ? m->sim_seconds * (double)world / 3600.0
                                         : m->run.wall_s * (double)world / 3600.0;
    r.run.log_path = spec->run_dir;
    r.samples = samples;
    r.n_samples = ns;
    r.gpus = gpus;
    r.n_gpus = ngpus;
    m->gpu_hours = r.run.gpu_hours;
    if (spec->memo_key && spec->memo) {
        /* the run and its summary commit together: a resumed tune either
         * finds both or runs the job again, never half of it */
        char *memo = NULL;
        if ((rc = mt_store_begin(st, d)) == 0) {
            rc = mt_store_put_result(st, &r, &m->run_id, d);
            if (rc >= 0 && !(memo = spec->memo(m, spec->memo_ctx)))
                rc = -1;
            if (rc >= 0)
                rc = mt_store_memo_put(st, spec->memo_key, memo, d);
            if (rc >= 0)
                rc = mt_store_commit(st, d);
            else
                mt_store_rollback(st);
        }
        free(memo);
    } else {
        rc = mt_store_put_result(st, &r, &m->run_id, d);
    }
    free(canon);
    free(samples);
    free(losses);
    return rc < 0 ? rc : 0;
}

/* {rev} and {work} in every value of env; MOETUNE_REV and MOETUNE_WORK set. */
static int subst_env(mt_kv *env, const char *rev, const char *work)
{
    const char *k, *v;
    size_t i;
    mt_kv *out = mt_kv_new();
    int rc = out ? 0 : -1;
    for (i = 0; !rc && mt_kv_entry(env, i, &k, &v) == 0; i++) {
        size_t cap = strlen(v) * 1 + 1, len = 0;
        const char *p = v;
        char *b;
        if (!strstr(v, "{rev}") && !strstr(v, "{work}"))
            continue;
        /* each placeholder grows by at most its value */
        for (p = v; (p = strchr(p, '{')); p++)
            cap += strlen(rev) + strlen(work);
        if (!(b = malloc(cap))) {
            rc = -1;
            break;
        }
        for (p = v; *p;) {
            if (!strncmp(p, "{rev}", 5)) {
                memcpy(b + len, rev, strlen(rev)), len += strlen(rev), p += 5;
            } else if (!strncmp(p, "{work}", 6)) {
                memcpy(b + len, work, strlen(work)), len += strlen(work), p += 6;
            } else {
                b[len++] = *p++;
            }
        }
        b[len] = '\0';
        rc = mt_kv_set(out, k, b) ? -1 : 0;
        free(b);
    }
    for (i = 0; !rc && mt_kv_entry(out, i, &k, &v) == 0; i++)
        rc = mt_kv_set(env, k, v) ? -1 : 0;
    mt_kv_destroy(&out);
    if (!rc)
        rc = mt_kv_set(env, "MOETUNE_REV", rev) || mt_kv_set(env, "MOETUNE_WORK", work) ? -1 : 0;
    return rc;
}

/* The run's length: what the job kind measures. */
static int kind_steps(const mt_contract *c, const char *kind)
{
    return !strcmp(kind, "validate") ? c->validate.steps : c->screen.steps;
}

mt_kv *mt_measure_run_config(const mt_contract *c, const mt_kv *cfg, const char *kind)
{
    mt_kv *run = mt_kv_dup(cfg);
    if (run && mt_kv_setf(run, "train_iters", "%d", kind_steps(c, kind)) < 0)
        mt_kv_destroy(&run);
    return run;
}

void mt_measure_config_id(const mt_contract *c, const mt_kv *cfg, const char *kind,
                          char out[17])
{
    mt_kv *run = mt_measure_run_config(c, cfg, kind);
    mt_config_id(run ? run : cfg, out);
    mt_kv_destroy(&run);
}

mt_kv *mt_measure_launch_settings(const mt_contract *c, const mt_kv *rendered)
{
    mt_kv *s = c->launch_srun ? mt_kv_dup(c->launch_srun) : mt_kv_new();
    const char *k, *v;
    size_t i;
    for (i = 0; s && rendered && mt_kv_entry(rendered, i, &k, &v) == 0; i++)
        if (mt_kv_set(s, k, v))
            mt_kv_destroy(&s);
    return s;
}

/* {rev} and {work} in the srun launcher's container settings (launch.srun:
 * container_image, container_mounts, container_workdir), so each revision
 * of a bisection runs in its own image; {{ and }} are literal braces.  A
 * placeholder outside `moetune bisect` (rev NULL), any other placeholder
 * and a revision that cannot go in an image name are refused, naming the
 * setting.  0, or -EINVAL / -ENOMEM with d. */
static int subst_container(mt_kv *s, const char *rev, const char *work, mt_diag *d)
{
    static const char *const keys[] = {"container_image", "container_mounts", "container_workdir"};
    size_t i;
    for (i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *v = mt_kv_get(s, keys[i]), *p;
        char field[64], *b;
        size_t len = 0, cap;
        int rc;
        if (!v || !strchr(v, '{'))
            continue;
        snprintf(field, sizeof field, "launch.srun.%s", keys[i]);
        cap = strlen(v) + 1;
        for (p = v; (p = strchr(p, '{')); p++)
            cap += (rev ? strlen(rev) : 0) + (work ? strlen(work) : 0);
        if (!(b = malloc(cap))) {
            mt_diag_add(d, NULL, 0, field, "out of memory");
            return -ENOMEM;
        }
        for (p = v; *p;) {
            const char *val = NULL;
            size_t k = 0;
            if ((p[0] == '{' && p[1] == '{') || (p[0] == '}' && p[1] == '}')) {
                b[len++] = *p;
                p += 2;
                continue;
            }
            if (!strncmp(p, "{rev}", 5))
                val = rev, k = 5;
            else if (!strncmp(p, "{work}", 6))
                val = work, k = 6;
            else if (*p == '{') {
                mt_diag_add(d, NULL, 0, field,
                            "unknown placeholder in \"%.200s\"; the container settings take "
                            "{rev} and {work} (in `moetune bisect`; write {{ and }} for literal "
                            "braces)",
                            v);
                free(b);
                return -EINVAL;
            }
            if (k && !val) {
                mt_diag_add(d, NULL, 0, field,
                            "\"%.200s\" names {%s}, which only `moetune bisect` fills (the "
                            "revision it measures and its prepared work directory); run this "
                            "contract with `moetune bisect`, or drop {%s} for `tune` and "
                            "`measure`",
                            v, k == 5 ? "rev" : "work", k == 5 ? "rev" : "work");
                free(b);
                return -EINVAL;
            }
            if (k == 5) {
                char why[400];
                if (mt_prepare_rev_ok(rev, why, sizeof why)) {
                    mt_diag_add(d, NULL, 0, field, "{rev} in \"%.200s\": %s", v, why);
                    free(b);
                    return -EINVAL;
                }
            }
            if (val) {
                memcpy(b + len, val, strlen(val));
                len += strlen(val);
                p += k;
            } else {
                b[len++] = *p++;
            }
        }
        b[len] = '\0';
        rc = mt_kv_set(s, keys[i], b) ? -ENOMEM : 0;
        free(b);
        if (rc) {
            mt_diag_add(d, NULL, 0, field, "out of memory");
            return rc;
        }
    }
    return 0;
}

int mt_measure_command(const mt_contract *c, const mt_rendered *r, const char *sim_path,
                       const char *run_dir, const char *job, const char *rev, const char *work,
                       const char *nodelist, const mt_kv *env, mt_strlist *out, mt_launch **lp,
                       mt_diag *d)
{
    mt_kv *ph = mt_kv_new(), *settings = mt_measure_launch_settings(c, r->launch);
    mt_strlist argv = {0};
    mt_launch *l = NULL;
    int rc = -1;
    if (!ph || !settings) {
        mt_diag_add(d, NULL, 0, NULL, "out of memory");
        goto out;
    }
    /* placeholders of the launch template */
    mt_kv_set(ph, "sim", sim_path ? sim_path : "moetune-sim");
    mt_kv_set(ph, "run_dir", run_dir);
    mt_kv_set(ph, "nodes", mt_kv_get(c->hardware, "nodes"));
    mt_kv_set(ph, "gpus_per_node", mt_kv_get(c->hardware, "gpus_per_node"));
    mt_kv_set(ph, "world_size", mt_kv_get(c->hardware, "world_size"));
    mt_kv_set(ph, "job_name", job);
    if (rev) {
        mt_kv_set(ph, "rev", rev);
        mt_kv_set(ph, "work", work ? work : ".");
    }
    if (mt_launch_expand((const char *const *)c->launch_template, c->n_template, ph, &r->argv,
                         &argv, d))
        goto out;
    if (subst_container(settings, rev, rev ? (work ? work : ".") : NULL, d))
        goto out;
    l = mt_launch_new(mt_launch_kind(c->launcher),
                      (int)strtol(mt_kv_get(c->hardware, "nodes"), NULL, 10),
                      (int)strtol(mt_kv_get(c->hardware, "gpus_per_node"), NULL, 10), settings,
                      job, env, d);
    if (l && nodelist && nodelist[0] && !(l->nodelist = strdup(nodelist))) {
        mt_diag_add(d, NULL, 0, NULL, "out of memory");
        goto out;
    }
    if (!l || mt_launch_wrap(l, &argv, out))
        goto out;
    rc = 0;
out:
    if (lp && rc == 0)
        *lp = l;
    else
        mt_launch_destroy(&l);
    mt_strlist_clear(&argv);
    mt_kv_destroy(&ph);
    mt_kv_destroy(&settings);
    return rc;
}

/* The PyTorch profiler over three steps of the screen window, as the
 * dialect takes it (the end is exclusive, and must be reached for the
 * profiler to flush). */
static void add_profiler(const mt_measure_spec *spec, mt_measure *m, mt_rendered *r)
{
    const mt_contract *c = spec->contract;
    char a[32], b[32], tbdir[4096];
    size_t i;
    snprintf(a, sizeof a, "%d", m->first);
    snprintf(b, sizeof b, "%d", m->first + 3 < m->last ? m->first + 3 : m->last);
    m->prof_first = m->first;
    m->prof_last = (m->first + 3 < m->last ? m->first + 3 : m->last) - 1;
    snprintf(tbdir, sizeof tbdir, "%s/tb", spec->run_dir);
    if (c->dialect == MT_DIALECT_BRIDGE) {
        char o1[64], o2[64], o3[4200];
        snprintf(o1, sizeof o1, "profiling.profile_step_start=%s", a);
        snprintf(o2, sizeof o2, "profiling.profile_step_end=%s", b);
        snprintf(o3, sizeof o3, "logger.tensorboard_dir=%s", tbdir);
        mt_strlist_push(&r->argv, "profiling.use_pytorch_profiler=true");
        mt_strlist_push(&r->argv, o1);
        mt_strlist_push(&r->argv, o2);
        mt_strlist_push(&r->argv, o3);
    } else {
        const char *fl[] = {"--profile", "--use-pytorch-profiler", "--profile-step-start", a,
                            "--profile-step-end", b, "--tensorboard-dir", tbdir};
        for (i = 0; i < sizeof fl / sizeof fl[0]; i++)
            mt_strlist_push(&r->argv, fl[i]);
    }
}

/* The run's environment into env: the caller's pass-through list
 * (launch.h; a result-changing variable that is a knob is the config's
 * alone), the rendered knobs, the contract's static settings, and for the
 * sim the cluster it stands for (its per-rank memory report in memfile).
 * 0, or -1 out of memory. */
static int run_environment(const mt_measure_spec *spec, const mt_kv *cfg, const mt_rendered *r,
                           int kind, const char *memfile, mt_kv *env)
{
    const mt_contract *c = spec->contract;
    const char *ek, *ev;
    size_t i;
    if (mt_launch_environment(kind, 0, NULL, env))
        return -1;
    for (i = 0; mt_kv_entry(cfg, i, &ek, &ev) == 0; i++)
        if (!strncmp(ek, "env.", 4) && mt_launch_env_class(ek + 4, strlen(ek + 4)) == MT_ENV_RESULT)
            mt_kv_unset(env, ek + 4);
    for (i = 0; mt_kv_entry(r->env, i, &ek, &ev) == 0; i++)
        if (mt_kv_set(env, ek, ev))
            return -1;
    if (spec->rev && subst_env(env, spec->rev, spec->work ? spec->work : "."))
        return -1;
    if (!strcmp(c->backend, "sim")) {
        char rep[32];
        mt_measure_sim_env(c, spec->routing, env);
        snprintf(rep, sizeof rep, "%d", spec->replicate);
        mt_kv_set(env, "MOETUNE_SIM_REPLICATE", rep);
        mt_kv_set(env, "MOETUNE_SIM_MEMORY_FILE", memfile);
        if (spec->sim_seed) {
            char seed[32];
            snprintf(seed, sizeof seed, "%llu", (unsigned long long)spec->sim_seed);
            mt_kv_set(env, "MOETUNE_SIM_SEED", seed);
        }
        if (mt_kv_get(r->launch, "cpu_bind"))
            mt_kv_set(env, "MOETUNE_SIM_CPU_BIND", mt_kv_get(r->launch, "cpu_bind"));
        /* under srun every task is one rank of the sim (srun's SLURM_PROCID
         * and SLURM_NTASKS, or rank-exec's RANK and WORLD_SIZE); the local
         * launcher's one process speaks for every rank, whatever rank the
         * worker itself was given */
        mt_kv_unset(env, "WORLD_SIZE");
        mt_kv_unset(env, "RANK");
        mt_kv_unset(env, "LOCAL_RANK");
        /* each rank appends its own peak: no line of an earlier attempt */
        unlink(memfile);
    }
    return 0;
}

/* Runs the wrapped argv under the runner, its lines into g's log parser,
 * until it ends; m->run gets how (a program that cannot start is an
 * outcome, not a setup failure). */
static void run_program(const mt_measure_spec *spec, mt_launch *launch, const char **cargv,
                        const mt_kv *env, glue *g, mt_measure *m, mt_diag *d)
{
    const mt_contract *c = spec->contract;
    mt_run_spec rs;
    g->spec = spec;
    g->launch = launch;
    g->log = mt_logparse_new();
    mt_logparse_on_iteration(g->log, on_iteration, g);
    if (launch && launch->kind == MT_LAUNCHER_SRUN && launch->ntasks_per_node > 0) {
        /* torchrun under srun: each task starts the node's ranks, and its
         * lines carry srun's task and torchrun's local rank */
        int gpn = (int)strtol(mt_kv_get(c->hardware, "gpus_per_node"), NULL, 10);
        if (gpn > 0 && gpn % launch->ntasks_per_node == 0)
            mt_logparse_set_ranks_per_task(g->log, gpn / launch->ntasks_per_node);
    }
    memset(&rs, 0, sizeof rs);
    rs.argv = cargv;
    rs.env = env;
    rs.run_dir = spec->run_dir;
    rs.time_limit_s = spec->time_limit_s > 0 ? spec->time_limit_s : 600;
    rs.step_s = 0; /* set from the run's own pace after two iterations */
    rs.hang_factor = spec->hang_factor;
    rs.startup_s = 120;
    rs.on_line = on_line;
    rs.line_ctx = g;
    rs.on_stop = mt_launch_stop;
    rs.stop_ctx = launch;
    rs.cancel = spec->cancel;
    g->run = mt_runner_start(&rs, d);
    if (!g->run) {
        m->run.outcome = MT_OUTCOME_LAUNCH_ERROR;
        m->run.evidence = mt_diag_count(d) ? mt_diag_at(d, mt_diag_count(d) - 1)->message
                                           : "the program could not start";
    } else {
        mt_runner_wait(g->run, &m->run);
    }
    if (g->run && launch && launch->kind == MT_LAUNCHER_SRUN && !g->hosts.n && !launch->slurm_job_id) {
        /* the lines came too late to ask while the job ran (a short run, a
         * loaded machine): its own job is still listed once it has ended */
        mt_diag *hd = mt_diag_new();
        if (mt_launch_hosts(launch, &g->hosts, hd) != 0)
            mt_strlist_clear(&g->hosts);
        mt_diag_destroy(&hd);
    }
}

/* The machine the run ran on, as JSON: the hosts its lines named (under
 * srun without them: unknown, never this host), GPUs, driver, stack. */
static char *run_fingerprint(mt_nvml *nvml, const mt_strlist *hosts, int kind,
                             const mt_contract *c, const mt_kv *env, mt_diag *d)
{
    mt_fingerprint_in fin;
    memset(&fin, 0, sizeof fin);
    fin.nvml = nvml;
    if (hosts->n) {
        fin.hosts = (const char *const *)hosts->v;
        fin.n_hosts = hosts->n;
    } else if (kind == MT_LAUNCHER_SRUN) {
        fin.hosts_unknown = 1; /* not this host: Slurm's nodes, never learnt */
    }
    fin.stack = c->stack;
    fin.env = env;
    return mt_fingerprint_json(&fin, d);
}

int mt_measure_run(const mt_measure_spec *spec, mt_store *st, mt_measure *m, mt_diag *d)
{
    const mt_contract *c = spec->contract;
    mt_kv *cfg = mt_kv_dup(spec->config), *env = mt_kv_new();
    mt_rendered r;
    mt_strlist wrapped = {0};
    mt_launch *launch = NULL;
    mt_nvml *nvml = NULL;
    mt_nvml_sampler *sampler = NULL;
    mt_gpu_mems nvmems = {0};
    mt_store_gpu_mem *rows = NULL;
    size_t nrows = 0, i;
    glue g;
    char *job = NULL, *fp = NULL, memfile[4096], steps[32];
    const char **cargv = NULL;
    int kind = mt_launch_kind(c->launcher), rc = -1, window_steps;
    double started = (double)time(NULL);

    memset(m, 0, sizeof *m);
    memset(&g, 0, sizeof g);
    m->run_id = -1;
    m->used_first = m->used_last = -1; /* no window summarized (yet) */
    m->prof_first = m->prof_last = -1;
    m->prof_window_s = NAN;
    mt_rendered_init(&r);
    if (!strcmp(spec->kind, "validate")) {
        m->first = c->validate.first, m->last = c->validate.last;
        window_steps = c->validate.steps;
    } else {
        m->first = c->screen.first, m->last = c->screen.last;
        window_steps = c->screen.steps;
    }
    snprintf(steps, sizeof steps, "%d", window_steps);
    mt_kv_set(cfg, "train_iters", steps);
    mt_config_id(cfg, m->config_id); /* = mt_measure_config_id(c, spec->config, kind) */
    if (mkdir(spec->run_dir, 0755) != 0 && errno != EEXIST) {
        mt_diag_add(d, spec->run_dir, 0, NULL, "cannot create the run directory: %s",
                    strerror(errno));
        goto out;
    }
    if (mt_render(spec->reg, c, cfg, (uint32_t)c->dialect, &r, d))
        goto out;

    job = mt_launch_job_name(spec->kind);
    if (spec->profile)
        add_profiler(spec, m, &r);

    snprintf(memfile, sizeof memfile, "%s/gpu_memory.txt", spec->run_dir);
    if (run_environment(spec, cfg, &r, kind, memfile, env)) {
        mt_diag_add(d, spec->run_dir, 0, NULL, "out of memory");
        goto out;
    }
    if (mt_measure_command(c, &r, spec->sim_path, spec->run_dir, job, spec->rev, spec->work,
                           spec->nodelist, env, &wrapped, &launch, d))
        goto out;
    cargv = calloc(wrapped.n + 1, sizeof *cargv);
    for (i = 0; i < wrapped.n; i++)
        cargv[i] = wrapped.v[i];

    nvml = mt_nvml_open(NULL);
    if (mt_nvml_available(nvml))
        sampler = mt_nvml_sampler_start(nvml, 0, d);

    run_program(spec, launch, cargv, env, &g, m, d);
    if (sampler)
        mt_nvml_sampler_stop(&sampler, &nvmems);
    mt_logparse_finish(g.log);
    m->log = g.log;
    g.log = NULL;
    m->sim_seconds = g.sim_seconds;
    m->outcome = mt_measure_classify(&m->run, m->log, m->first, m->last, m->evidence,
                                     sizeof m->evidence);
    mt_measure_attribute(m->outcome, m->log, &g.hosts,
                         (int)strtol(mt_kv_get(c->hardware, "gpus_per_node"), NULL, 10),
                         m->evidence, sizeof m->evidence);
    summarize(m);
    collect_memory(m, &nvmems, memfile, &rows, &nrows, d);
    verify(spec, m, cfg, &r, d);
    fp = run_fingerprint(nvml, &g.hosts, kind, c, env, d);
    m->fingerprint = fp; /* the memo's copy (an A/B compares its runs' machines) */
    rc = st ? store_result(spec, st, m, cfg, rows, nrows, fp, started, d) : 0;
    m->fingerprint = NULL;
out:
    for (i = 0; rows && i < nrows; i++)
        free((char *)rows[i].host);
    free(rows);
    free(fp);
    free(cargv);
    free(job);
    mt_gpu_mems_clear(&nvmems);
    mt_nvml_destroy(&nvml);
    mt_launch_destroy(&launch);
    mt_strlist_clear(&wrapped);
    mt_rendered_clear(&r);
    mt_kv_destroy(&cfg);
    mt_kv_destroy(&env);
    mt_logparse_destroy(&g.log);
    mt_strlist_clear(&g.hosts);
    /* the run's facts borrow strings from the run (and from d): copy them
     * before it goes */
    snprintf(m->run_evidence, sizeof m->run_evidence, "%s", m->run.evidence ? m->run.evidence : "");
    m->run.evidence = m->run_evidence;
    m->run.stdout_log = m->run.stderr_log = NULL;
    mt_runner_destroy(&g.run);
    return rc;
}

void mt_measure_clear(mt_measure *m)
{
    mt_kv_destroy(&m->verify_evidence);
    mt_verdicts_clear(&m->verdicts);
    mt_logparse_destroy(&m->log);
}

/* ---- the memo: a finished measurement's summary ------------------------------------ */

static const char *memo_verdict_word(uint32_t v)
{
    switch (v) {
    case MT_VERDICT_APPLIED:
        return "applied";
    case MT_VERDICT_NOT_APPLIED:
        return "not_applied";
    default:
        return "unknown";
    }
}

char *mt_measure_memo_json(const mt_measure *m)
{
    mt_job_memo j;
    cJSON *v = cJSON_CreateObject(), *ev = cJSON_CreateObject(), *fpj;
    const char *k, *val;
    size_t i;
    char *text;
    mt_job_memo_init(&j);
    j.outcome = mt_outcome_name(m->outcome);
    j.evidence = m->evidence;
    j.measured = 1;
    j.ms = m->median_step_ms;
    j.tflops = m->median_tflops;
    j.loss = m->last_loss;
    j.loss_finite = m->loss_finite;
    j.skipped = (double)m->skipped;
    j.nan = (double)m->nan;
    j.peak_gb = m->peak_bytes > 0 ? m->peak_bytes / 1e9 : NAN;
    if (m->peak_rank >= 0)
        j.peak_rank = m->peak_rank;
    j.gpu_hours = m->gpu_hours;
    j.wall_s = m->run.wall_s;
    j.run_id = (double)m->run_id;
    /* what the run ran on (hosts, GPUs, driver, CUDA, NCCL, container,
     * stack): the engine refuses an A/B whose runs differ in it */
    fpj = m->fingerprint ? cJSON_Parse(m->fingerprint) : NULL;
    j.fingerprint = fpj;
    for (i = 0; i < m->verdicts.n; i++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "verdict", memo_verdict_word(m->verdicts.v[i].verdict));
        cJSON_AddStringToObject(x, "evidence",
                                m->verdicts.v[i].evidence ? m->verdicts.v[i].evidence : "");
        cJSON_AddItemToObject(v, m->verdicts.v[i].knob, x);
    }
    j.verdicts = v;
    for (i = 0; m->verify_evidence && mt_kv_entry(m->verify_evidence, i, &k, &val) == 0; i++)
        if (!strncmp(k, "trace.", 6))
            cJSON_AddStringToObject(ev, k, val);
    j.trace = ev;
    if (m->used_first >= 0) {
        j.has_window = 1;
        j.window_first = (double)m->used_first;
        j.window_last = (double)m->used_last;
        j.window_n = (double)m->n_window;
    }
    if (m->profiled) {
        j.has_wall = 1;
        j.wall.wall = mt_wall_name(m->wall.wall);
        j.wall.runner_up = mt_wall_name(m->wall.runner_up);
        j.wall.confidence = m->wall.confidence;
        j.wall.reason = m->wall.reason;
        j.wall.compute = m->share_compute;
        j.wall.exposed_comm = m->wall.exposed_share;
        j.wall.hidden_comm = m->share_hidden;
        j.wall.idle = m->wall.idle_share;
        j.wall.bubble = m->wall.idle_share - m->wall.idle_net_share;
        /* the profiled window the shares are of */
        j.wall.has_steps = m->prof_first >= 0;
        j.wall.first = m->prof_first;
        j.wall.last = m->prof_last;
        j.wall.window_s = m->prof_window_s;
    }
    text = mt_job_memo_to_json(&j);
    cJSON_Delete(fpj), cJSON_Delete(v), cJSON_Delete(ev);
    return text;
}

