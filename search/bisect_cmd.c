/*
 * bisect_cmd.c - `moetune bisect`: the revisions (git first-parent order or
 * a file), the jobs (prepare, then the contract's screen, on the engine's
 * executors with the engine's memo), the method (bisect.c), the evidence
 * (bisect.json, bisect.html).
 *
 * A job is (revision, replicate): memo key job/bisect/ID/REP with ID the
 * first 16 hex digits of the revision name's SHA-256.  The memo is written in
 * the run's own transaction, and the method asks for the same jobs in the
 * same order given the same samples, so a bisection killed at any point
 * and started again with the same arguments and directory runs nothing twice.
 */
#include "bisect.h"
#include "engine.h"
#include "exec.h"
#include "job_memo.h"
#include "status.h"

#include "bisect_config.h"
#include "config.h"
#include "launch.h"
#include "prepare.h"
#include "runner.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- revisions ------------------------------------------------------------------------------ */

typedef struct revlist {
    char **v;
    size_t n, cap;
} revlist;

static int rl_push(revlist *l, const char *s, size_t n)
{
    char *x;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        char **v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        l->v = v;
        l->cap = cap;
    }
    if (!(x = strndup(s, n)))
        return -ENOMEM;
    l->v[l->n++] = x;
    return 0;
}

static void rl_free(revlist *l)
{
    size_t i;
    for (i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* What a git command printed: its stdout lines, and its first stderr line. */
typedef struct gitout {
    revlist lines;
    char err[300];
} gitout;

static void git_line(void *ctx, int stream, const char *line, size_t n)
{
    gitout *g = ctx;
    if (stream == MT_STREAM_STDOUT && n)
        rl_push(&g->lines, line, n);
    else if (stream == MT_STREAM_STDERR && !g->err[0])
        snprintf(g->err, sizeof g->err, "%.*s", (int)(n < 290 ? n : 290), line);
}

/* Runs git (through the runner: no shell, every descendant reaped) and
 * collects its output.  The exit status, or -1 when it could not run. */
static int git(const char *const *argv, gitout *g)
{
    mt_run_spec rs;
    mt_run_result res;
    mt_run *run;
    mt_kv *env = mt_kv_new();
    mt_diag *d = mt_diag_new();
    int rc = -1;
    memset(g, 0, sizeof *g);
    mt_launch_environment(MT_LAUNCHER_LOCAL, 1, NULL, env);
    memset(&rs, 0, sizeof rs);
    rs.argv = argv;
    rs.env = env;
    rs.time_limit_s = 600;
    rs.on_line = git_line;
    rs.line_ctx = g;
    if ((run = mt_runner_start(&rs, d))) {
        mt_runner_wait(run, &res);
        if (res.exited)
            rc = res.exit_code;
        if (res.launch_errno)
            snprintf(g->err, sizeof g->err, "cannot run git: %s", strerror(res.launch_errno));
        mt_runner_destroy(&run);
    }
    mt_kv_destroy(&env);
    mt_diag_destroy(&d);
    return rc;
}

/* One revision name of git's: its full commit hash. */
static int git_commit(const char *repo, const char *rev, char *hash, size_t n, mt_diag *d)
{
    char spec[600];
    const char *argv[] = {"git", "-C", repo, "rev-parse", "--verify", "--quiet", spec, NULL};
    gitout g;
    int rc;
    snprintf(spec, sizeof spec, "%.500s^{commit}", rev);
    rc = git(argv, &g);
    if (rc != 0 || g.lines.n != 1 || strlen(g.lines.v[0]) < 40) {
        mt_diag_add(d, repo, 0, NULL, "%.200s is not a commit of the repository%s%s", rev,
                    g.err[0] ? ": " : "", g.err);
        rl_free(&g.lines);
        return -EINVAL;
    }
    snprintf(hash, n, "%s", g.lines.v[0]);
    rl_free(&g.lines);
    return 0;
}

static int revs_from_git(const char *repo, const char *good, const char *bad, revlist *l,
                         mt_diag *d)
{
    char g[128], b[128], range[300];
    const char *list[] = {"git", "-C", repo, "rev-list", "--first-parent", "--reverse", range,
                          NULL};
    const char *anc[] = {"git", "-C", repo, "merge-base", "--is-ancestor", g, b, NULL};
    gitout out;
    size_t i;
    int rc;
    if (git_commit(repo, good, g, sizeof g, d) || git_commit(repo, bad, b, sizeof b, d))
        return -EINVAL;
    if (!strcmp(g, b)) {
        mt_diag_add(d, repo, 0, NULL, "--good and --bad are the same commit (%s)", g);
        return -EINVAL;
    }
    rc = git(anc, &out);
    rl_free(&out.lines);
    if (rc != 0) {
        mt_diag_add(d, repo, 0, NULL, "--good %.100s is not an ancestor of --bad %.100s", good,
                    bad);
        return -EINVAL;
    }
    snprintf(range, sizeof range, "%s..%s", g, b);
    if (git(list, &out) != 0) {
        mt_diag_add(d, repo, 0, NULL, "git rev-list failed: %s", out.err);
        rl_free(&out.lines);
        return -EINVAL;
    }
    rl_push(l, g, strlen(g));
    for (i = 0; i < out.lines.n; i++)
        rl_push(l, out.lines.v[i], strlen(out.lines.v[i]));
    rl_free(&out.lines);
    if (l->n < 2 || strcmp(l->v[l->n - 1], b)) {
        mt_diag_add(d, repo, 0, NULL, "the first-parent history from %.12s does not reach %.12s",
                    b, g);
        return -EINVAL;
    }
    /* the first revision after good must have good as its first parent */
    {
        char parent[200], ph[128];
        snprintf(parent, sizeof parent, "%s^1", l->v[1]);
        if (git_commit(repo, parent, ph, sizeof ph, d) || strcmp(ph, g)) {
            mt_diag_add(d, repo, 0, NULL,
                        "--good %.100s is not on the first-parent history of --bad %.100s", good,
                        bad);
            return -EINVAL;
        }
    }
    return 0;
}

static int revs_from_file(const char *path, const char *good, const char *bad, revlist *l,
                          mt_diag *d)
{
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0, gi = -1, bi = -1;
    revlist all = {0};
    size_t i;
    if (!f) {
        mt_diag_add(d, path, 0, NULL, "cannot open the revisions file: %s", strerror(errno));
        return -EINVAL;
    }
    while (getline(&line, &cap, f) >= 0) {
        char *s = line, *e;
        lineno++;
        if ((e = strchr(s, '#')))
            *e = '\0';
        while (*s == ' ' || *s == '\t')
            s++;
        e = s + strlen(s);
        while (e > s && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
            *--e = '\0';
        if (!*s)
            continue;
        if (strpbrk(s, " \t") || strlen(s) > 200) {
            mt_diag_add(d, path, (int)lineno, NULL,
                        "a revision is one word of at most 200 characters (a commit, tag, stack "
                        "version or container image), not \"%.100s\"",
                        s);
            goto bad;
        }
        {
            /* it goes into prepare words and container images as it is */
            char why[400];
            if (mt_prepare_rev_ok(s, why, sizeof why)) {
                mt_diag_add(d, path, (int)lineno, NULL, "%s", why);
                goto bad;
            }
        }
        for (i = 0; i < all.n; i++)
            if (!strcmp(all.v[i], s)) {
                mt_diag_add(d, path, (int)lineno, NULL, "revision %s is listed twice", s);
                goto bad;
            }
        if (!strcmp(s, good))
            gi = (long)all.n;
        if (!strcmp(s, bad))
            bi = (long)all.n;
        if (rl_push(&all, s, strlen(s)))
            goto bad;
    }
    if (gi < 0 || bi < 0) {
        mt_diag_add(d, path, 0, NULL, "--%s %.200s is not in the revisions file",
                    gi < 0 ? "good" : "bad", gi < 0 ? good : bad);
        goto bad;
    }
    if (gi >= bi) {
        mt_diag_add(d, path, 0, NULL,
                    "--good must come before --bad in the revisions file (oldest first)");
        goto bad;
    }
    for (i = (size_t)gi; i <= (size_t)bi; i++)
        rl_push(l, all.v[i], strlen(all.v[i]));
    rl_free(&all);
    free(line);
    fclose(f);
    return 0;
bad:
    rl_free(&all);
    free(line);
    fclose(f);
    return -EINVAL;
}

/* ---- jobs ------------------------------------------------------------------------------------ */

/* What every step of a bisection shares: the contract, the executor its
 * jobs run on, the base config a revision's jobs measure. */
typedef struct bsess {
    mt_registry *reg;
    mt_contract *c;
    mt_diag *d;
    mt_exec *x;      /* owned */
    mt_kv *baseline; /* owned */
    const char *dir; /* the bisection directory (status.json) */
} bsess;

typedef struct bctx {
    bsess *e;
    const revlist *revs;
    char (*ids)[17];
    FILE *progress;
    /* the config source: revision i is the config cfgs[i], or, when NULL,
     * untestable for the reason skip[i] (no legal repair) */
    mt_kv **cfgs;
    char **skip;
} bctx;


static int run_jobs(void *ctx, mt_bisect_job *jobs, size_t n)
{
    bctx *b = ctx;
    mt_exec_job *v = calloc(n, sizeof *v);
    size_t i;
    int rc;
    if (!v)
        return -1;
    for (i = 0; i < n; i++) {
        v[i].kind = "bisect";
        v[i].rep = jobs[i].rep;
        v[i].phase = "bisect";
        if (b->cfgs) {
            /* a config: named by its own id (mt_exec_run), no prepare step */
            v[i].cfg = b->cfgs[jobs[i].rev];
            continue;
        }
        v[i].cfg = b->e->baseline;
        memcpy(v[i].id, b->ids[jobs[i].rev], 17);
        v[i].rev = b->revs->v[jobs[i].rev];
    }
    {
        /* untestable configs are skipped without a run; the rest run */
        mt_exec_job *w = calloc(n, sizeof *w);
        size_t m = 0;
        if (!w) {
            free(v);
            return -1;
        }
        for (i = 0; i < n; i++)
            if (v[i].cfg)
                w[m++] = v[i];
        rc = mt_exec_run(b->e->x, w, m);
        for (i = 0, m = 0; i < n; i++)
            if (v[i].cfg)
                v[i] = w[m++];
        free(w);
    }
    for (i = 0; i < n && !rc; i++) {
        const char *oc;
        mt_job_memo jm;
        mt_bisect_job *j = &jobs[i];
        if (!v[i].cfg) {
            j->status = MT_BJ_SKIP;
            j->ms = NAN;
            snprintf(j->outcome, sizeof j->outcome, "skip");
            snprintf(j->evidence, sizeof j->evidence, "%s", b->skip[j->rev]);
            if (b->progress)
                fprintf(b->progress, "moetune bisect: #%d %s: skipped: %.200s\n", j->rev,
                        b->revs->v[j->rev], j->evidence);
            continue;
        }
        mt_job_memo_from_json(v[i].out, &jm);
        oc = jm.outcome;
        snprintf(j->outcome, sizeof j->outcome, "%s", oc[0] ? oc : "?");
        snprintf(j->evidence, sizeof j->evidence, "%s", jm.evidence);
        j->ms = NAN;
        if (mt_exec_job_ok(v[i].out)) {
            j->status = MT_BJ_OK;
            j->ms = jm.ms;
        } else if (!strcmp(oc, "skip")) {
            j->status = MT_BJ_SKIP;
        } else if (!strcmp(oc, "infra")) {
            j->status = MT_BJ_INFRA;
        } else {
            j->status = MT_BJ_FAILED;
        }
        if (b->progress) {
            if (j->status == MT_BJ_OK)
                fprintf(b->progress, "moetune bisect: #%d %.12s replicate %d: %.1f ms%s\n", j->rev,
                        b->revs->v[j->rev], j->rep, j->ms, v[i].fresh ? "" : " (from the store)");
            else
                fprintf(b->progress, "moetune bisect: #%d %.12s replicate %d: %s: %.200s\n",
                        j->rev, b->revs->v[j->rev], j->rep, j->outcome, j->evidence);
        }
    }
    mt_exec_jobs_free(v, n);
    free(v);
    return rc;
}

/* ---- evidence -------------------------------------------------------------------------------- */

static const char *rev_verdict(const mt_bisect_rev *r)
{
    if (r->state == MT_BJ_SKIP)
        return "skip";
    if (r->state == MT_BJ_FAILED)
        return "failed";
    return mt_bisect_class_name(r->cls);
}

static void num_or_null(cJSON *o, const char *k, double v)
{
    if (isfinite(v))
        cJSON_AddNumberToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

static const char *outcome_name(int o)
{
    static const char *const n[] = {"found", "not_reproduced", "end_failed", "error"};
    return o >= 0 && o < 4 ? n[o] : "error";
}

static cJSON *bisect_json(const bsess *e, const mt_bisect_opts *o, const revlist *revs,
                          const mt_bisect *b, const mt_bisect_params *p)
{
    cJSON *root = cJSON_CreateObject(), *x, *arr;
    size_t i;
    int k;
    double med;
    cJSON_AddStringToObject(root, "schema", "moetune-bisect/1");
    x = cJSON_AddObjectToObject(root, "contract");
    cJSON_AddStringToObject(x, "name", e->c->name);
    cJSON_AddStringToObject(x, "fingerprint", e->c->fingerprint);
    cJSON_AddStringToObject(x, "path", e->c->path ? e->c->path : "");
    cJSON_AddStringToObject(root, "good", revs->v[0]);
    cJSON_AddStringToObject(root, "bad", revs->v[revs->n - 1]);
    cJSON_AddStringToObject(root, "source", o->good_config ? "config" : o->repo ? "git" : "file");
    cJSON_AddStringToObject(root, "origin", o->good_config ? o->good_config
                                            : o->repo      ? o->repo
                                                           : o->revs_file);
    cJSON_AddNumberToObject(root, "revisions", (double)revs->n);
    cJSON_AddStringToObject(root, "outcome", outcome_name(b->outcome));
    cJSON_AddStringToObject(root, "summary", b->why);
    x = cJSON_AddObjectToObject(root, "ends");
    num_or_null(x, "good_median_ms", b->ends.median_control);
    num_or_null(x, "bad_median_ms", b->ends.median_candidate);
    num_or_null(x, "effect", b->ends.effect);
    num_or_null(x, "ci_lo", b->ends_ci_lo);
    num_or_null(x, "ci_hi", b->ends_ci_hi);
    num_or_null(x, "p", b->ends.p);
    cJSON_AddStringToObject(x, "verdict", mt_stats_verdict_name(b->ends.verdict));
    cJSON_AddStringToObject(x, "reason", b->ends.reason ? b->ends.reason : "");
    if (b->revs) {
        cJSON_AddNumberToObject(x, "good_replicates", b->revs[0].n);
        cJSON_AddNumberToObject(x, "bad_replicates", b->revs[b->n - 1].n);
    }
    arr = cJSON_AddArrayToObject(root, "culprits");
    for (k = 0; k < b->n_culprits; k++) {
        const mt_bisect_culprit *c = &b->culprits[k];
        cJSON *y = cJSON_CreateObject(), *r;
        int j;
        cJSON_AddStringToObject(y, "revision", revs->v[c->hi]);
        cJSON_AddNumberToObject(y, "index", c->hi);
        cJSON_AddBoolToObject(y, "exact", c->lo == c->hi);
        r = cJSON_AddArrayToObject(y, "candidates");
        for (j = c->lo; j <= c->hi; j++)
            cJSON_AddItemToArray(r, cJSON_CreateString(revs->v[j]));
        cJSON_AddStringToObject(y, "parent", revs->v[c->parent]);
        num_or_null(y, "ms_before", c->ms_before);
        num_or_null(y, "ms_after", c->ms_after);
        num_or_null(y, "effect", c->effect);
        num_or_null(y, "ci_lo", c->ci_lo);
        num_or_null(y, "ci_hi", c->ci_hi);
        cJSON_AddNumberToObject(y, "ci_level", 0.95);
        cJSON_AddBoolToObject(y, "partial", c->partial);
        cJSON_AddItemToArray(arr, y);
    }
    arr = cJSON_AddArrayToObject(root, "notes");
    for (k = 0; k < b->n_notes; k++)
        cJSON_AddItemToArray(arr, cJSON_CreateString(b->notes[k]));
    arr = cJSON_AddArrayToObject(root, "measured");
    for (i = 0; b->revs && i < b->n; i++) {
        const mt_bisect_rev *r = &b->revs[i];
        cJSON *y, *s;
        int j;
        if (!r->n && !r->state && !r->asked)
            continue;
        y = cJSON_CreateObject();
        cJSON_AddNumberToObject(y, "index", (double)i);
        cJSON_AddStringToObject(y, "revision", revs->v[i]);
        cJSON_AddStringToObject(y, "verdict", rev_verdict(r));
        s = cJSON_AddArrayToObject(y, "samples_ms");
        for (j = 0; j < r->n; j++)
            cJSON_AddItemToArray(s, cJSON_CreateNumber(r->ms[j]));
        med = NAN;
        if (r->n)
            mt_stats_median(r->ms, (size_t)r->n, &med);
        num_or_null(y, "median_ms", med);
        cJSON_AddNumberToObject(y, "replicates_asked", r->asked);
        cJSON_AddNumberToObject(y, "lost_to_infra", r->infra);
        if (r->cls && isfinite(r->llr) && r->llr != 0)
            cJSON_AddNumberToObject(y, "llr", r->llr);
        if (r->state) {
            cJSON_AddStringToObject(y, "outcome", r->outcome);
            cJSON_AddStringToObject(y, "evidence", r->evidence);
        }
        cJSON_AddItemToArray(arr, y);
    }
    cJSON_AddNumberToObject(root, "runs", (double)b->runs);
    cJSON_AddNumberToObject(root, "runs_executed", mt_exec_executed(e->x));
    cJSON_AddNumberToObject(root, "gpu_hours", mt_exec_gpu_hours(e->x));
    x = cJSON_AddObjectToObject(root, "method");
    cJSON_AddNumberToObject(x, "alpha", p->ends.alpha);
    cJSON_AddNumberToObject(x, "min_effect", p->ends.min_effect);
    cJSON_AddNumberToObject(x, "ends_initial", p->ends.initial);
    cJSON_AddNumberToObject(x, "ends_max", p->ends.max_replicates);
    cJSON_AddNumberToObject(x, "sprt_error", p->eps);
    cJSON_AddNumberToObject(x, "midpoint_initial", p->mid_initial);
    cJSON_AddNumberToObject(x, "midpoint_max", p->mid_max);
    cJSON_AddNumberToObject(x, "check_alpha", p->check.alpha);
    cJSON_AddNumberToObject(x, "stretch_resolution_sd", p->resolution);
    cJSON_AddNumberToObject(x, "stretch_miss", p->miss);
    cJSON_AddNumberToObject(x, "verify_resolution_sd", p->verify_resolution);
    cJSON_AddNumberToObject(x, "verify_drop", p->verify_drop);
    cJSON_AddNumberToObject(x, "verify_max", p->verify_max);
    cJSON_AddStringToObject(x, "interval", "welch_t_log_runs");
    cJSON_AddNumberToObject(x, "slots", p->slots);
    return root;
}

static void html_escape(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '&')
            fputs("&amp;", f);
        else if (*s == '"')
            fputs("&quot;", f);
        else
            fputc(*s, f);
    }
}

/* bisect.html: step time against revision (every sample, each revision's
 * median coloured by its verdict, the culprits marked), then the tables. */
static void html_test(FILE *f, const cJSON *t)
{
    const cJSON *e = cJSON_GetObjectItem(t, "effect"), *lo = cJSON_GetObjectItem(t, "ci_lo"),
                *hi = cJSON_GetObjectItem(t, "ci_hi");
    const char *v = cJSON_GetStringValue(cJSON_GetObjectItem(t, "verdict"));
    fprintf(f, "<td>");
    if (t) {
        html_escape(f, v ? v : "?");
        if (cJSON_IsNumber(e))
            fprintf(f, " %+.2f%%", 100 * e->valuedouble);
        if (cJSON_IsNumber(lo) && cJSON_IsNumber(hi))
            fprintf(f, " (%+.2f%% .. %+.2f%%)", 100 * lo->valuedouble, 100 * hi->valuedouble);
    }
    fprintf(f, "</td>");
}

/* The config source's culprits and changes (bisect.json's `config`). */
static void html_config(FILE *f, const cJSON *cfg)
{
    const cJSON *c, *u;
    if (!cfg)
        return;
    fprintf(f, "<h2>Config culprits</h2>\n<table><tr><th>kind</th><th>changes</th><th>alone</th>"
               "<th>partner alone</th><th>together</th></tr>\n");
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(cfg, "culprits")) {
        const char *kind = cJSON_GetStringValue(cJSON_GetObjectItem(c, "kind"));
        fprintf(f, "<tr><td>");
        html_escape(f, kind ? kind : "?");
        fprintf(f, "</td><td class=\"mono\">");
        cJSON_ArrayForEach(u, cJSON_GetObjectItem(c, "units")) {
            const char *v = cJSON_GetStringValue(cJSON_GetObjectItem(u, "variable"));
            const char *ch = cJSON_GetStringValue(cJSON_GetObjectItem(u, "change"));
            html_escape(f, v ? v : "?");
            fprintf(f, ": ");
            html_escape(f, ch ? ch : "");
            fprintf(f, "<br>");
        }
        fprintf(f, "</td>");
        html_test(f, cJSON_GetObjectItem(c, "alone"));
        html_test(f, cJSON_GetObjectItem(c, "partner_alone"));
        html_test(f, cJSON_GetObjectItem(c, "together"));
        fprintf(f, "</tr>\n");
    }
    fprintf(f, "</table>\n<h2>Changes, in the order applied</h2>\n<table><tr><th>#</th><th>"
               "variable</th><th>change</th><th>repairs of that prefix</th></tr>\n");
    {
        const cJSON *units = cJSON_GetObjectItem(cfg, "units"),
                    *pre = cJSON_GetObjectItem(cfg, "prefixes");
        int i = 0;
        cJSON_ArrayForEach(u, units) {
            const cJSON *px = cJSON_GetArrayItem(pre, i + 1);
            const char *rp = cJSON_GetStringValue(cJSON_GetObjectItem(px, "repairs"));
            const char *un = cJSON_GetStringValue(cJSON_GetObjectItem(px, "untestable"));
            fprintf(f, "<tr><td>%d</td><td>", ++i);
            html_escape(f, cJSON_GetStringValue(cJSON_GetObjectItem(u, "variable")));
            fprintf(f, "</td><td class=\"mono\">");
            html_escape(f, cJSON_GetStringValue(cJSON_GetObjectItem(u, "change")));
            fprintf(f, "</td><td>");
            html_escape(f, un ? un : rp ? rp : "");
            fprintf(f, "</td></tr>\n");
        }
    }
    fprintf(f, "</table>\n");
}

/* One culprit's wall diagnosis (bisect.json's `diagnosis`). */
static void html_diag(FILE *f, const char *who, const cJSON *x)
{
    const cJSON *it;
    if (!x)
        return;
    fprintf(f, "<li><b>");
    html_escape(f, who);
    fprintf(f, "</b>: ");
    if (cJSON_GetObjectItem(x, "error")) {
        fprintf(f, "not diagnosed: ");
        html_escape(f, cJSON_GetStringValue(cJSON_GetObjectItem(x, "error")));
    } else {
        html_escape(f, cJSON_GetStringValue(cJSON_GetObjectItem(x, "wall")));
        fprintf(f, ": ");
        html_escape(f, cJSON_GetStringValue(cJSON_GetObjectItem(x, "reason")));
        fprintf(f, "<ul>");
        cJSON_ArrayForEach(it, cJSON_GetObjectItem(x, "evidence")) {
            fprintf(f, "<li class=\"mono\">");
            html_escape(f, cJSON_GetStringValue(it));
            fprintf(f, "</li>");
        }
        fprintf(f, "</ul>");
    }
    fprintf(f, "</li>\n");
}

static void html_walls(FILE *f, const cJSON *root)
{
    const cJSON *c;
    fprintf(f, "<h2>The wall of each culprit (a matched profiled pair)</h2>\n<ul>\n");
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "culprits"))
        html_diag(f, cJSON_GetStringValue(cJSON_GetObjectItem(c, "revision")),
                  cJSON_GetObjectItem(c, "diagnosis"));
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(cJSON_GetObjectItem(root, "config"), "culprits")) {
        char who[300];
        const cJSON *u;
        who[0] = '\0';
        cJSON_ArrayForEach(u, cJSON_GetObjectItem(c, "units"))
            snprintf(who + strlen(who), sizeof who - strlen(who), "%s%s", who[0] ? " + " : "",
                     cJSON_GetStringValue(cJSON_GetObjectItem(u, "variable")));
        html_diag(f, who, cJSON_GetObjectItem(c, "diagnosis"));
    }
    fprintf(f, "</ul>\n");
}

/* The culprits table's rows (revision, parent, times, step, interval, partial) and its end. */
static void html_culprit_rows(FILE *f, const revlist *revs, const mt_bisect *b)
{
    int k;
    for (k = 0; k < b->n_culprits; k++) {
        const mt_bisect_culprit *c = &b->culprits[k];
        fprintf(f, "<tr><td class=\"mono\">");
        if (c->lo < c->hi)
            fprintf(f, "one of #%d..#%d ", c->lo, c->hi);
        else
            fprintf(f, "#%d ", c->hi);
        html_escape(f, revs->v[c->hi]);
        fprintf(f, "</td><td class=\"mono\">");
        html_escape(f, revs->v[c->parent]);
        fprintf(f, "</td><td>%.1f</td><td>%.1f</td><td>%+.2f%%</td><td>%+.2f%% .. %+.2f%%</td>"
                   "<td>%s</td></tr>\n", c->ms_before, c->ms_after, 100 * c->effect,
                100 * c->ci_lo, 100 * c->ci_hi, c->partial ? "yes" : "no");
    }
    fprintf(f, "</table>\n");
}

/* The bisection's notes as a list, when there are any. */
static void html_notes(FILE *f, const mt_bisect *b)
{
    int k;
    if (b->n_notes) {
        fprintf(f, "<h2>Notes</h2><ul>\n");
        for (k = 0; k < b->n_notes; k++) {
            fprintf(f, "<li>");
            html_escape(f, b->notes[k]);
            fprintf(f, "</li>\n");
        }
        fprintf(f, "</ul>\n");
    }
}

/* The measured (or skipped) revisions' table: verdict, runs, median and every sample. */
static void html_revisions(FILE *f, const revlist *revs, const mt_bisect *b)
{
    double med;
    size_t i;
    int j;
    fprintf(f, "<h2>Measured revisions</h2>\n<table><tr><th>#</th><th>revision</th><th>verdict"
               "</th><th>runs</th><th>median (ms)</th><th>samples (ms)</th></tr>\n");
    for (i = 0; b->revs && i < b->n; i++) {
        const mt_bisect_rev *r = &b->revs[i];
        if (!r->n && !r->state)
            continue;
        fprintf(f, "<tr><td>%zu</td><td class=\"mono\">", i);
        html_escape(f, revs->v[i]);
        fprintf(f, "</td><td>%s", rev_verdict(r));
        if (r->state) {
            fprintf(f, ": ");
            html_escape(f, r->evidence);
        }
        med = NAN;
        if (r->n)
            mt_stats_median(r->ms, (size_t)r->n, &med);
        fprintf(f, "</td><td>%d</td><td>%.1f</td><td>", r->n, med);
        for (j = 0; j < r->n; j++)
            fprintf(f, "%s%.1f", j ? ", " : "", r->ms[j]);
        fprintf(f, "</td></tr>\n");
    }
}

static int write_html(const char *path, const bsess *e, const revlist *revs, const mt_bisect *b,
                      const cJSON *root)
{
    const cJSON *cfg = cJSON_GetObjectItem(root, "config");
    FILE *f = fopen(path, "w");
    const double W = 900, H = 360, L = 70, R = 20, T = 20, B = 50;
    double lo = INFINITY, hi = -INFINITY, med;
    size_t i;
    int j, k;
    if (!f)
        return -errno;
    for (i = 0; b->revs && i < b->n; i++)
        for (j = 0; j < b->revs[i].n; j++) {
            lo = fmin(lo, b->revs[i].ms[j]);
            hi = fmax(hi, b->revs[i].ms[j]);
        }
    if (!(hi > lo))
        lo = isfinite(lo) ? lo * 0.99 : 0, hi = isfinite(hi) ? hi * 1.01 + 1e-9 : 1;
    else {
        double pad = (hi - lo) * 0.08;
        lo -= pad, hi += pad;
    }
#define X(i) (L + (W - L - R) * ((double)(i) / (double)(b->n > 1 ? b->n - 1 : 1)))
#define Y(v) (T + (H - T - B) * (1 - ((v) - lo) / (hi - lo)))
    fprintf(f, "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>moetune bisect: ");
    html_escape(f, e->c->name);
    fprintf(f, "</title><style>body{font:14px sans-serif;margin:24px;max-width:1000px}"
               "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;"
               "text-align:left}.mono{font-family:monospace;word-break:break-all}</style></head>"
               "<body>\n");
    fprintf(f, "<h1>moetune bisect: ");
    html_escape(f, e->c->name);
    fprintf(f, "</h1>\n<p>");
    html_escape(f, b->why);
    fprintf(f, "</p>\n");
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "role=\"img\" aria-label=\"step time against revision\">\n", W, H);
    fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"#fafafa\" "
               "stroke=\"#999\"/>\n", L, T, W - L - R, H - T - B);
    for (k = 0; k <= 4; k++) {
        double v = lo + (hi - lo) * k / 4;
        fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%.1f</text>\n",
                L - 6, Y(v) + 4, v);
        fprintf(f, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>\n",
                L, W - R, Y(v), Y(v));
    }
    for (k = 0; k <= 8; k++) {
        size_t at = (b->n - 1) * (size_t)k / 8;
        if (k && at == (b->n - 1) * (size_t)(k - 1) / 8)
            continue;
        fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" font-size=\"11\" text-anchor=\"middle\">%zu"
                   "</text>\n", X(at), H - B + 14, at);
    }
    for (k = 0; k < b->n_culprits; k++) {
        const mt_bisect_culprit *c = &b->culprits[k];
        double x0 = (X(c->lo) + X(c->lo - 1)) / 2, x1 = (X(c->hi) + X(c->hi - 1)) / 2;
        if (c->hi > c->lo)
            fprintf(f, "<rect x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" height=\"%.0f\" "
                       "fill=\"#fde2e2\"/>\n", x0, T, X(c->hi) - x0, H - T - B);
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.0f\" y2=\"%.0f\" stroke=\"#c00\" "
                   "stroke-dasharray=\"4 3\"/><text x=\"%.1f\" y=\"%.0f\" font-size=\"11\" "
                   "fill=\"#c00\">#%d %+.2f%%</text>\n",
                x1, x1, T, H - B, x1 + 3, T + 12 + 12.0 * k, c->hi, 100 * c->effect);
    }
    for (i = 0; b->revs && i < b->n; i++) {
        const mt_bisect_rev *r = &b->revs[i];
        const char *col = r->cls == MT_BC_LOW       ? "#1a7f37"
                          : r->cls == MT_BC_HIGH    ? "#c62828"
                          : r->cls == MT_BC_PARTIAL ? "#e08a00"
                                                    : "#555";
        for (j = 0; j < r->n; j++)
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2\" fill=\"#888\" "
                       "fill-opacity=\"0.5\"/>\n", X(i), Y(r->ms[j]));
        if (r->n && mt_stats_median(r->ms, (size_t)r->n, &med) == 0)
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"8\" height=\"8\" fill=\"%s\"><title>#%zu "
                       "%.12s: %s, median %.1f ms over %d runs</title></rect>\n",
                    X(i) - 4, Y(med) - 4, col, i, revs->v[i], rev_verdict(r), med, r->n);
        if (r->state)
            fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" font-size=\"12\" text-anchor=\"middle\" "
                       "fill=\"#777\">&#215;<title>#%zu %s</title></text>\n",
                    X(i), H - B - 4, i, r->outcome);
    }
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"12\" text-anchor=\"middle\">revision "
               "(first-parent order, 0 = good, %zu = bad)</text>\n", (L + W - R) / 2, H - 12,
            b->n - 1);
    fprintf(f, "<text x=\"14\" y=\"%.0f\" font-size=\"12\" transform=\"rotate(-90 14 %.0f)\" "
               "text-anchor=\"middle\">step time (ms)</text>\n</svg>\n", (T + H - B) / 2,
            (T + H - B) / 2);
    fprintf(f, "<p>Grey dots: one run each (median step time of the screen window). Squares: "
               "each revision's median, green like the good end, red like the bad end, orange "
               "in between; &#215;: skipped or failed.</p>\n<h2>Culprits</h2>\n<table><tr><th>"
               "revision</th><th>parent</th><th>before (ms)</th><th>after (ms)</th><th>step"
               "</th><th>95%% interval</th><th>partial</th></tr>\n");
    html_culprit_rows(f, revs, b);
    html_config(f, cfg);
    html_walls(f, root);
    html_notes(f, b);
    html_revisions(f, revs, b);
    fprintf(f,
            "</table>\n<p>%ld runs (%d executed by the last invocation), %.2f GPU-hours.</p>\n"
            "</body></html>\n",
            b->runs, mt_exec_executed(e->x), mt_exec_gpu_hours(e->x));
#undef X
#undef Y
    return fclose(f) ? -EIO : 0;
}

/* The revision list a directory was started with must be the one asked for now. */
static int same_revisions(const char *dir, const revlist *revs, mt_diag *d)
{
    char path[4200], *line = NULL;
    size_t cap = 0, i = 0;
    FILE *f;
    int rc = 0;
    snprintf(path, sizeof path, "%s/revisions.txt", dir);
    if (!(f = fopen(path, "r"))) {
        if (!(f = fopen(path, "w"))) {
            mt_diag_add(d, path, 0, NULL, "cannot write: %s", strerror(errno));
            return -EIO;
        }
        for (i = 0; i < revs->n; i++)
            fprintf(f, "%s\n", revs->v[i]);
        return fclose(f) ? -EIO : 0;
    }
    while (getline(&line, &cap, f) >= 0) {
        line[strcspn(line, "\n")] = '\0';
        if (i >= revs->n || strcmp(line, revs->v[i])) {
            rc = -EINVAL;
            break;
        }
        i++;
    }
    if (i != revs->n)
        rc = -EINVAL;
    if (rc)
        mt_diag_add(d, path, 0, NULL,
                    "this directory holds a bisection of other revisions; choose a new --dir");
    free(line);
    fclose(f);
    return rc;
}

/* ---- the wall of a culprit -------------------------------------------------------------------- */

#define DIAG_REP 9000 /* the profiled pair's replicate: apart from every search's */

/* A matched profiled pair (kind profile, the contract's screen window, one
 * replicate each, run back to back by the same executor) before and after
 * a culprit, and what changed between them: each wall's time per step
 * (share of the profiled window x the run's median step), the hottest
 * GPU's peak, the trace's activation evidence and the plugins' verdicts
 * that differ.  The wall whose time grew most is the regression's, unless
 * the run after it ran out of memory or left less headroom than the gate
 * asks (memory).  NULL when the pair could not be measured (why in the
 * object's "error" otherwise). */
/* The share of the profiled window of walls[w] (diagnose): exposed
 * communication, host (idle less the pipeline's bubble), compute. */
static double wall_share(const mt_job_memo_wall *wl, int w)
{
    return w == 0 ? wl->exposed_comm : w == 1 ? wl->idle - wl->bubble : wl->compute;
}

static cJSON *diagnose(bsess *e, const mt_kv *cfg_before, const char *rev_before,
                       const mt_kv *cfg_after, const char *rev_after, const char *id_before,
                       const char *id_after, int *executed)
{
    static const char *const walls[] = {"communication", "host", "compute"};
    mt_exec_job v[2];
    mt_job_memo m[2];
    cJSON *x = cJSON_CreateObject(), *o[2], *sh, *ev;
    double ms[2], grow[3], best = -INFINITY, pk[2];
    const char *wall = NULL;
    char line[700];
    int i, w, rc;
    memset(v, 0, sizeof v);
    for (i = 0; i < 2; i++) {
        v[i].cfg = i ? cfg_after : cfg_before;
        v[i].rev = i ? rev_after : rev_before;
        if (v[i].rev)
            memcpy(v[i].id, i ? id_after : id_before, 17);
        v[i].kind = "profile";
        v[i].rep = DIAG_REP;
        v[i].phase = "bisect";
    }
    i = mt_exec_executed(e->x);
    rc = mt_exec_run(e->x, v, 2);
    *executed += mt_exec_executed(e->x) - i;
    if (rc || !v[0].out || !v[1].out) {
        cJSON_AddStringToObject(x, "error", "the profiled pair could not be run");
        mt_exec_jobs_free(v, 2);
        return x;
    }
    o[0] = v[0].out, o[1] = v[1].out;
    for (i = 0; i < 2; i++) {
        cJSON *y = cJSON_AddObjectToObject(x, i ? "after" : "before");
        mt_job_memo_from_json(o[i], &m[i]);
        ms[i] = m[i].ms;
        pk[i] = m[i].peak_gb;
        cJSON_AddStringToObject(y, "outcome", m[i].outcome);
        num_or_null(y, "ms", ms[i]);
        num_or_null(y, "peak_gb", pk[i]);
        if (m[i].has_wall)
            cJSON_AddItemToObject(y, "wall", mt_job_memo_wall_to_json(&m[i].wall));
    }
    if (!mt_exec_job_ok(o[1]) && !strcmp(m[1].outcome, "oom")) {
        wall = "memory";
        snprintf(line, sizeof line, "the run after it ran out of memory: %.300s",
                 m[1].evidence);
    } else if (!mt_exec_job_ok(o[0]) || !mt_exec_job_ok(o[1]) || !m[0].has_wall ||
               !m[1].has_wall) {
        snprintf(line, sizeof line, "the profiled pair did not both run and profile: %s / %s",
                 m[0].outcome, m[1].outcome);
        cJSON_AddStringToObject(x, "error", line);
        mt_exec_jobs_free(v, 2);
        return x;
    }
    sh = cJSON_AddObjectToObject(x, "change_points");
    for (w = 0; w < 3 && !wall; w++) {
        double a = wall_share(&m[0].wall, w), b = wall_share(&m[1].wall, w);
        /* the wall's time per step after minus before, in points of the step before */
        grow[w] = ms[0] > 0 ? 100 * (b * ms[1] - a * ms[0]) / ms[0] : NAN;
        num_or_null(sh, walls[w], grow[w]);
    }
    for (w = 0; w < 3 && !wall; w++)
        if (isfinite(grow[w]) && grow[w] > best)
            best = grow[w];
    for (w = 0; w < 3 && !wall; w++)
        if (isfinite(grow[w]) && grow[w] == best) {
            wall = walls[w];
            snprintf(line, sizeof line, "%+.1f%% step: %s time %+.1f points of the step",
                     ms[0] > 0 ? 100 * (ms[1] / ms[0] - 1) : NAN,
                     w == 0 ? "exposed communication" : w == 1 ? "host (idle, less bubble)"
                                                               : "compute",
                     grow[w]);
        }
    if (wall && strcmp(wall, "memory") && isfinite(pk[1]) && e->c->memory_headroom > 0) {
        /* the memory gate: the hottest GPU after it keeps less headroom */
        const char *cap = mt_kv_get(e->c->hardware, "hbm_gb");
        double capgb = cap ? strtod(cap, NULL) : NAN;
        if (isfinite(capgb) && capgb > 0 && pk[1] > (1 - e->c->memory_headroom) * capgb &&
            !(pk[0] > (1 - e->c->memory_headroom) * capgb))
            wall = "memory",
            snprintf(line, sizeof line, "the hottest GPU's peak went %.1f -> %.1f GB, past the "
                                        "gate's headroom", pk[0], pk[1]);
    }
    cJSON_AddStringToObject(x, "wall", wall ? wall : "?");
    cJSON_AddStringToObject(x, "reason", line);
    /* the activation evidence that differs: kernels gone or new, graphs, launches */
    ev = cJSON_AddArrayToObject(x, "evidence");
    {
        const cJSON *ta = m[0].trace, *tb = m[1].trace, *it;
        cJSON_ArrayForEach(it, tb) {
            const char *bv = cJSON_GetStringValue(it);
            const char *av = cJSON_GetStringValue(cJSON_GetObjectItem(ta, it->string));
            if (!strcmp(it->string, "trace.wall") || !strcmp(it->string, "trace.comm_hidden_fraction"))
                continue;
            if (bv && (!av || strcmp(av, bv))) {
                snprintf(line, sizeof line, "%s: %s -> %s", it->string, av ? av : "(none)", bv);
                cJSON_AddItemToArray(ev, cJSON_CreateString(line));
            }
        }
        cJSON_ArrayForEach(it, m[1].verdicts) {
            const char *bev, *bv = mt_job_memo_verdict(&m[1], it->string, &bev);
            const char *av = mt_job_memo_verdict(&m[0], it->string, NULL);
            if (bv && av && *bv && *av && strcmp(av, bv)) {
                snprintf(line, sizeof line, "verdict %s: %s -> %s (%.300s)", it->string, av, bv,
                         bev);
                cJSON_AddItemToArray(ev, cJSON_CreateString(line));
            }
        }
    }
    mt_exec_jobs_free(v, 2);
    return x;
}

static void print_diagnosis(const char *who, const cJSON *x)
{
    const cJSON *it;
    if (!x)
        return;
    if (cJSON_GetObjectItem(x, "error")) {
        printf("  wall of %s: not diagnosed: %s\n", who,
               cJSON_GetStringValue(cJSON_GetObjectItem(x, "error")));
        return;
    }
    printf("  wall of %s: %s: %s\n", who, cJSON_GetStringValue(cJSON_GetObjectItem(x, "wall")),
           cJSON_GetStringValue(cJSON_GetObjectItem(x, "reason")));
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(x, "evidence"))
        printf("    %s\n", cJSON_GetStringValue(it));
}

/* ---- the config source ------------------------------------------------------------------------ */

/* Revision k of a config bisection is the good config with the first k
 * units applied (units in name order, bisect_config.h), repaired; k = 0 is
 * the good config, k = n the bad one.  The first search finds where the
 * prefixes slow down; each culprit unit is then measured alone on the good
 * config: a unit slower alone is a culprit of its own; one that is not
 * slows only with something before it, which a second search finds (the
 * good config with the single culprits and the unit, then the earlier
 * units one by one), and the pair is measured together and its partner
 * alone.  Every measurement is a job of the same memo, so a config that
 * two searches share is measured once. */
typedef struct cfgsrc {
    mt_contract *ca, *cb;   /* the two contracts (owned) */
    mt_kv *good, *bad;      /* their base configs (owned) */
    mt_cfg_diff df;
    size_t n;               /* revisions: df.n + 1 */
    mt_kv **cfgs;           /* prefix configs; NULL: untestable (owned) */
    char **skip, **repairs; /* why untestable; the repairs it needed (owned) */
    cJSON *culprits;        /* what the follow-up found (owned) */
    cJSON *searches;        /* every search run (owned) */
    long runs;              /* the follow-up's runs */
    int diag_executed;      /* profiled pairs run now (not in runs_executed) */
} cfgsrc;

static void cfg_source_free(cfgsrc *s)
{
    size_t i;
    for (i = 0; i < s->n; i++) {
        mt_kv_destroy(&s->cfgs[i]);
        free(s->skip[i]);
        free(s->repairs[i]);
    }
    free(s->cfgs);
    free(s->skip);
    free(s->repairs);
    mt_cfg_diff_clear(&s->df);
    mt_kv_destroy(&s->good);
    mt_kv_destroy(&s->bad);
    mt_contract_destroy(&s->ca);
    mt_contract_destroy(&s->cb);
    cJSON_Delete(s->culprits);
    cJSON_Delete(s->searches);
    memset(s, 0, sizeof *s);
}

/* group of x must equal the measurement contract's: the first difference named. */
static int same_group(const mt_kv *ref, const mt_kv *x, const char *group, const char *path,
                      mt_diag *d)
{
    const char *k, *v;
    size_t i;
    for (i = 0; mt_kv_entry(ref, i, &k, &v) == 0; i++) {
        const char *w = mt_kv_get(x, k);
        if (!w || strcmp(v, w)) {
            mt_diag_add(d, path, 0, NULL,
                        "%s.%s is %s here and %s in the bisection's contract: a config "
                        "bisection compares configs of the same model, hardware and stack",
                        group, k, w ? w : "(unset)", v);
            return -1;
        }
    }
    for (i = 0; mt_kv_entry(x, i, &k, &v) == 0; i++)
        if (!mt_kv_get(ref, k)) {
            mt_diag_add(d, path, 0, NULL,
                        "%s.%s is set here and not in the bisection's contract: a config "
                        "bisection compares configs of the same model, hardware and stack",
                        group, k);
            return -1;
        }
    return 0;
}

static int cfg_source_open(mt_registry *reg, const mt_contract *c, const mt_bisect_opts *o,
                           cfgsrc *s, revlist *revs, mt_diag *d)
{
    const char *paths[2] = {o->good_config, o->bad_config};
    mt_contract **cc[2] = {&s->ca, &s->cb};
    mt_kv **cfg[2] = {&s->good, &s->bad};
    int *all = NULL, i;
    size_t k;
    char why[512], name[300], id[17];
    if (c->srun_bisect) {
        /* the revisions here are knob changes under one stack: a container
         * per revision would be an image named after a knob change */
        mt_diag_add(d, c->path, 0, "launch.srun",
                    "a container setting names {rev} or {work}, but --good-config/--bad-config "
                    "bisects knob changes under one stack, not revisions: name the image itself "
                    "(bisect images by tag with --revs FILE)");
        return -EINVAL;
    }
    for (i = 0; i < 2; i++) {
        if (!(*cc[i] = mt_contract_load(paths[i], d)))
            return -EINVAL;
        if (same_group(c->model, (*cc[i])->model, "model", paths[i], d) ||
            same_group(c->hardware, (*cc[i])->hardware, "hardware", paths[i], d) ||
            same_group(c->stack, (*cc[i])->stack, "stack", paths[i], d) ||
            same_group(c->batch, (*cc[i])->batch, "batch", paths[i], d))
            return -EINVAL;
        if (!(*cfg[i] = mt_config_base(reg, *cc[i], d)))
            return -EINVAL;
    }
    if (mt_cfg_diff_build(reg, s->good, s->bad, &s->df))
        return -ENOMEM;
    if (!s->df.n) {
        mt_diag_add(d, o->bad_config, 0, NULL,
                    "its base config is the same as that of %s: nothing to bisect", o->good_config);
        return -EINVAL;
    }
    s->n = s->df.n + 1;
    s->cfgs = calloc(s->n, sizeof *s->cfgs);
    s->skip = calloc(s->n, sizeof *s->skip);
    s->repairs = calloc(s->n, sizeof *s->repairs);
    all = calloc(s->n, sizeof *all);
    s->culprits = cJSON_CreateArray();
    s->searches = cJSON_CreateArray();
    if (!s->cfgs || !s->skip || !s->repairs || !all || !s->culprits || !s->searches) {
        free(all);
        return -ENOMEM;
    }
    for (k = 0; k < s->df.n; k++)
        all[k] = (int)k;
    for (k = 0; k < s->n; k++) {
        s->cfgs[k] = mt_cfg_diff_apply(reg, c, s->good, &s->df, all, k, &s->repairs[k], why,
                                       sizeof why, d);
        if (!s->cfgs[k]) {
            if (k == 0 || k == s->n - 1) {
                mt_diag_add(d, paths[k ? 1 : 0], 0, NULL, "its base config is not legal: %s",
                            why);
                free(all);
                return -EINVAL;
            }
            s->skip[k] = strdup(why);
        }
        if (s->cfgs[k])
            mt_config_id(s->cfgs[k], id);
        else
            snprintf(id, sizeof id, "untestable");
        if (k == 0)
            snprintf(name, sizeof name, "good:%s", id);
        else
            snprintf(name, sizeof name, "+%.200s:%s", s->df.u[k - 1].name, id);
        if (rl_push(revs, name, strlen(name))) {
            free(all);
            return -ENOMEM;
        }
    }
    free(all);
    return 0;
}

/* One search over configs cfgs[0..n-1] (names for progress lines), its
 * record appended to s->searches.  The bisection's outcome, or -1 when the
 * runner failed. */
static int cfg_search(bsess *e, cfgsrc *s, const mt_bisect_params *p, FILE *progress,
                      const char *purpose, mt_kv **cfgs, char **skip, revlist *names,
                      mt_bisect *out)
{
    bctx ctx;
    cJSON *x = cJSON_CreateObject(), *a;
    size_t i;
    memset(&ctx, 0, sizeof ctx);
    ctx.e = e;
    ctx.revs = names;
    ctx.progress = progress;
    ctx.cfgs = cfgs;
    ctx.skip = skip;
    if (progress)
        fprintf(progress, "moetune bisect: %s\n", purpose);
    if (mt_bisect_run(out, names->n, p, run_jobs, &ctx) || out->outcome == MT_BISECT_ERROR) {
        cJSON_Delete(x);
        return -1;
    }
    s->runs += out->runs;
    cJSON_AddStringToObject(x, "purpose", purpose);
    a = cJSON_AddArrayToObject(x, "revisions");
    for (i = 0; i < names->n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(names->v[i]));
    cJSON_AddStringToObject(x, "outcome", outcome_name(out->outcome));
    cJSON_AddStringToObject(x, "summary", out->why);
    num_or_null(x, "effect", out->ends.effect);
    num_or_null(x, "ci_lo", out->ends_ci_lo);
    num_or_null(x, "ci_hi", out->ends_ci_hi);
    cJSON_AddNumberToObject(x, "runs", (double)out->runs);
    cJSON_AddItemToArray(s->searches, x);
    return out->outcome;
}

/* good + units[0..k-1] against good: the ends test of a two-revision
 * search.  1 slower, 0 not, -1 failed; *fx the effect and its interval. */
static int cfg_test(bsess *e, cfgsrc *s, const mt_bisect_params *p, FILE *progress,
                    const char *purpose, const int *units, size_t k, double fx[3], char *why,
                    size_t why_len)
{
    mt_kv *cfgs[2] = {s->cfgs[0], NULL};
    char *skip[2] = {NULL, NULL}, name[300], id[17];
    revlist names = {0};
    mt_bisect b;
    int v = -1;
    fx[0] = fx[1] = fx[2] = NAN;
    cfgs[1] = mt_cfg_diff_apply(e->reg, e->c, s->good, &s->df, units, k, NULL, why, why_len, e->d);
    if (!cfgs[1])
        return -2; /* untestable: why says so */
    rl_push(&names, "good", 4);
    mt_config_id(cfgs[1], id);
    snprintf(name, sizeof name, "test:%s", id);
    rl_push(&names, name, strlen(name));
    memset(&b, 0, sizeof b);
    v = cfg_search(e, s, p, progress, purpose, cfgs, skip, &names, &b);
    if (v >= 0) {
        fx[0] = b.ends.effect, fx[1] = b.ends_ci_lo, fx[2] = b.ends_ci_hi;
        v = v == MT_BISECT_FOUND;
    }
    mt_bisect_clear(&b);
    rl_free(&names);
    mt_kv_destroy(&cfgs[1]);
    return v;
}

static cJSON *unit_json(const cfgsrc *s, int u)
{
    cJSON *x = cJSON_CreateObject();
    cJSON_AddStringToObject(x, "variable", s->df.u[u].name);
    cJSON_AddStringToObject(x, "change", s->df.u[u].summary);
    return x;
}

static void add_test(cJSON *o, const char *k, int v, const double fx[3], const char *why)
{
    cJSON *x = cJSON_AddObjectToObject(o, k);
    cJSON_AddStringToObject(x, "verdict", v == 1 ? "slower" : v == 0 ? "not slower" : "untestable");
    num_or_null(x, "effect", fx[0]);
    num_or_null(x, "ci_lo", fx[1]);
    num_or_null(x, "ci_hi", fx[2]);
    if (v == -2 && why)
        cJSON_AddStringToObject(x, "why", why);
}

/* The wall of a config culprit: the good config against it with units[0..k-1]. */
static void cfg_diagnose(bsess *e, cfgsrc *s, cJSON *x, const int *units, size_t k)
{
    char why[512];
    mt_kv *after = mt_cfg_diff_apply(e->reg, e->c, s->good, &s->df, units, k, NULL, why,
                                     sizeof why, e->d);
    if (after)
        cJSON_AddItemToObject(x, "diagnosis",
                              diagnose(e, s->cfgs[0], NULL, after, NULL, NULL, NULL,
                                       &s->diag_executed));
    mt_kv_destroy(&after);
}

/* The follow-up of the prefix search (above).  0, or -1 when a search failed. */
/* Searches the earlier non-single changes for the one that makes unit u slower; pv, *partner. */
static int cfg_find_partner(bsess *e, cfgsrc *s, const mt_bisect_params *p, FILE *progress,
                            const int *singles, int ns, int u, const int *list, int m,
                            char *purpose, size_t npurpose, char *why, size_t nwhy, int *partner)
{
    int units[130], nu, i, j, pv;
    mt_kv **cfgs;
    char **skip;
    revlist names = {0};
    mt_bisect pb;
    cfgs = calloc((size_t)m + 1, sizeof *cfgs);
    skip = calloc((size_t)m + 1, sizeof *skip);
    if (!cfgs || !skip) {
        free(cfgs);
        free(skip);
        return -1;
    }
    for (i = 0; i <= m; i++) {
        char name[300], id[17];
        nu = 0;
        for (j = 0; j < ns; j++)
            units[nu++] = singles[j];
        units[nu++] = u;
        for (j = 0; j < i; j++)
            units[nu++] = list[j];
        cfgs[i] = mt_cfg_diff_apply(e->reg, e->c, s->good, &s->df, units, (size_t)nu,
                                    NULL, why, nwhy, e->d);
        if (!cfgs[i])
            skip[i] = strdup(why);
        if (cfgs[i])
            mt_config_id(cfgs[i], id);
        else
            snprintf(id, sizeof id, "untestable");
        snprintf(name, sizeof name, "%s%.200s:%s", i ? "+" : "with:",
                 i ? s->df.u[list[i - 1]].name : s->df.u[u].name, id);
        rl_push(&names, name, strlen(name));
    }
    memset(&pb, 0, sizeof pb);
    snprintf(purpose, npurpose,
             "%s is not slower alone: which earlier change does it need?",
             s->df.u[u].name);
    if (!cfgs[0] || !cfgs[m]) {
        pv = MT_BISECT_END_FAILED;
    } else {
        pv = cfg_search(e, s, p, progress, purpose, cfgs, skip, &names, &pb);
    }
    if (pv == MT_BISECT_FOUND && pb.n_culprits >= 1 &&
        pb.culprits[0].lo == pb.culprits[0].hi)
        *partner = list[pb.culprits[0].hi - 1];
    mt_bisect_clear(&pb);
    for (i = 0; i <= m; i++) {
        mt_kv_destroy(&cfgs[i]);
        free(skip[i]);
    }
    free(cfgs);
    free(skip);
    rl_free(&names);
    return pv;
}

static int cfg_explain(bsess *e, cfgsrc *s, const revlist *revs, const mt_bisect *b,
                       const mt_bisect_params *p, FILE *progress, cJSON *root)
{
    int singles[64], ns = 0, k;
    char purpose[600], why[512];
    (void)revs;
    for (k = 0; k < b->n_culprits; k++) {
        const mt_bisect_culprit *cu = &b->culprits[k];
        cJSON *x = cJSON_CreateObject(), *us;
        double fx[3];
        int u = cu->hi - 1, v, j;
        cJSON_AddItemToArray(s->culprits, x);
        if (cu->lo != cu->hi) {
            cJSON_AddStringToObject(x, "kind", "range");
            us = cJSON_AddArrayToObject(x, "units");
            for (j = cu->lo; j <= cu->hi; j++)
                cJSON_AddItemToArray(us, unit_json(s, j - 1));
            cJSON_AddStringToObject(x, "why", "the prefixes between them have no legal repair: "
                                              "one of these changes, which cannot be told apart");
            continue;
        }
        snprintf(purpose, sizeof purpose, "is %s slower alone (the good config with only it)?",
                 s->df.u[u].name);
        v = cfg_test(e, s, p, progress, purpose, &u, 1, fx, why, sizeof why);
        if (v == -1)
            return -1;
        if (v == 1) {
            cJSON_AddStringToObject(x, "kind", "single");
            us = cJSON_AddArrayToObject(x, "units");
            cJSON_AddItemToArray(us, unit_json(s, u));
            add_test(x, "alone", v, fx, why);
            if (ns < 64)
                singles[ns++] = u;
            cfg_diagnose(e, s, x, &u, 1);
            continue;
        }
        /* not slower alone (or untestable alone): which earlier unit completes it? */
        {
            int list[64], m = 0, units[130], i;
            double ffx[3], tfx[3];
            int pv, tv, partner = -1;
            add_test(x, "alone", v, fx, why);
            for (i = 0; i < u && m < 64; i++) {
                int is_single = 0, q;
                for (q = 0; q < ns; q++)
                    is_single |= singles[q] == i;
                if (!is_single)
                    list[m++] = i;
            }
            if (!m) {
                cJSON_AddStringToObject(x, "kind", "context");
                us = cJSON_AddArrayToObject(x, "units");
                cJSON_AddItemToArray(us, unit_json(s, u));
                cJSON_AddStringToObject(x, "why", "slower after the culprits before it, not "
                                                  "alone, and no other change precedes it");
                continue;
            }
            pv = cfg_find_partner(e, s, p, progress, singles, ns, u, list, m, purpose,
                                  sizeof purpose, why, sizeof why, &partner);
            if (pv == -1)
                return -1;
            us = cJSON_AddArrayToObject(x, "units");
            if (partner < 0) {
                cJSON_AddStringToObject(x, "kind", "context");
                cJSON_AddItemToArray(us, unit_json(s, u));
                cJSON_AddStringToObject(x, "why", "slower after the changes before it, not "
                                                  "alone; no single earlier change completes it");
                continue;
            }
            snprintf(purpose, sizeof purpose, "is %s slower alone?", s->df.u[partner].name);
            pv = cfg_test(e, s, p, progress, purpose, &partner, 1, ffx, why, sizeof why);
            if (pv == -1)
                return -1;
            units[0] = partner, units[1] = u;
            snprintf(purpose, sizeof purpose, "are %s and %s slower together?",
                     s->df.u[partner].name, s->df.u[u].name);
            tv = cfg_test(e, s, p, progress, purpose, units, 2, tfx, why, sizeof why);
            if (tv == -1)
                return -1;
            cJSON_AddStringToObject(x, "kind", tv == 1 && pv != 1 && v != 1 ? "pair" : "context");
            cJSON_AddItemToArray(us, unit_json(s, partner));
            cJSON_AddItemToArray(us, unit_json(s, u));
            add_test(x, "partner_alone", pv, ffx, why);
            add_test(x, "together", tv, tfx, why);
            if (tv == 1)
                cfg_diagnose(e, s, x, units, 2);
        }
    }
    {
        cJSON *r = cJSON_GetObjectItem(root, "runs");
        if (r)
            cJSON_SetNumberValue(r, (double)b->runs + (double)s->runs);
        if ((r = cJSON_GetObjectItem(root, "runs_executed")))
            cJSON_SetNumberValue(r, mt_exec_executed(e->x) - s->diag_executed);
        if ((r = cJSON_GetObjectItem(root, "gpu_hours")))
            cJSON_SetNumberValue(r, mt_exec_gpu_hours(e->x));
    }
    return 0;
}

/* bisect.json's `config` object: the two ends, the units, the prefixes
 * (their repairs, or why untestable), the searches and the culprits. */
static void cfg_json(cfgsrc *s, cJSON *root)
{
    cJSON *x = cJSON_AddObjectToObject(root, "config"), *a;
    size_t i;
    char id[17];
    cJSON_AddStringToObject(x, "good_contract", s->ca->path ? s->ca->path : "");
    cJSON_AddStringToObject(x, "bad_contract", s->cb->path ? s->cb->path : "");
    mt_config_id(s->good, id);
    cJSON_AddStringToObject(x, "good_config_id", id);
    mt_config_id(s->bad, id);
    cJSON_AddStringToObject(x, "bad_config_id", id);
    a = cJSON_AddArrayToObject(x, "units");
    for (i = 0; i < s->df.n; i++)
        cJSON_AddItemToArray(a, unit_json(s, (int)i));
    a = cJSON_AddArrayToObject(x, "prefixes");
    for (i = 0; i < s->n; i++) {
        cJSON *y = cJSON_CreateObject();
        cJSON_AddNumberToObject(y, "index", (double)i);
        cJSON_AddNumberToObject(y, "units", (double)i);
        if (s->cfgs[i]) {
            mt_config_id(s->cfgs[i], id);
            cJSON_AddStringToObject(y, "config_id", id);
        }
        cJSON_AddStringToObject(y, "repairs", s->repairs[i] ? s->repairs[i] : "");
        if (s->skip[i])
            cJSON_AddStringToObject(y, "untestable", s->skip[i]);
        cJSON_AddItemToArray(a, y);
    }
    cJSON_AddItemToObject(x, "searches", s->searches);
    cJSON_AddItemToObject(x, "culprits", s->culprits);
    s->searches = s->culprits = NULL;
}

static void print_test(const cJSON *t, const char *what)
{
    const cJSON *e = cJSON_GetObjectItem(t, "effect"), *lo = cJSON_GetObjectItem(t, "ci_lo"),
                *hi = cJSON_GetObjectItem(t, "ci_hi");
    if (!t)
        return;
    printf(" %s %s", what, cJSON_GetStringValue(cJSON_GetObjectItem(t, "verdict")));
    if (cJSON_IsNumber(e))
        printf(" (%+.2f%%", 100 * e->valuedouble);
    if (cJSON_IsNumber(e) && cJSON_IsNumber(lo) && cJSON_IsNumber(hi))
        printf(", 95%% CI %+.2f%% .. %+.2f%%", 100 * lo->valuedouble, 100 * hi->valuedouble);
    if (cJSON_IsNumber(e))
        printf(")");
    printf(";");
}

static void cfg_print(const cJSON *root)
{
    const cJSON *x = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "config"), "culprits"), *c;
    cJSON_ArrayForEach(c, x) {
        const cJSON *u;
        const char *kind = cJSON_GetStringValue(cJSON_GetObjectItem(c, "kind"));
        int first = 1;
        printf("config culprit (%s):", kind ? kind : "?");
        cJSON_ArrayForEach(u, cJSON_GetObjectItem(c, "units")) {
            printf("%s %s [%s]", first ? "" : " +",
                   cJSON_GetStringValue(cJSON_GetObjectItem(u, "variable")),
                   cJSON_GetStringValue(cJSON_GetObjectItem(u, "change")));
            first = 0;
        }
        printf(";");
        print_test(cJSON_GetObjectItem(c, "alone"), "alone");
        print_test(cJSON_GetObjectItem(c, "partner_alone"), "partner alone");
        print_test(cJSON_GetObjectItem(c, "together"), "together");
        if (cJSON_GetObjectItem(c, "why"))
            printf(" %s", cJSON_GetStringValue(cJSON_GetObjectItem(c, "why")));
        printf("\n");
        print_diagnosis(kind ? kind : "?", cJSON_GetObjectItem(c, "diagnosis"));
    }
}

/* status.json while the ZeroMQ executor waits (mt_exec_env.on_live) */
static void on_live(void *ctx)
{
    const bsess *e = ctx;
    mt_status_exec(e->dir, "bisect", e->x);
}

/* The bisection's test parameters from the contract (alpha, minimum effect) and the slots. */
static void bisect_params(mt_bisect_params *p, const mt_contract *c, const mt_bisect_opts *o)
{
    mt_bisect_params_default(p);
    p->ends.alpha = c->alpha;
    p->ends.min_effect = c->min_effect;
    p->ends.same_band = c->min_effect > 0.015 ? 1.5 * c->min_effect : 0.03;
    p->ends.initial = c->replicates > 8 ? c->replicates : 8;
    p->ends.max_replicates = 4 * p->ends.initial;
    p->check.alpha = c->alpha / 5;
    p->check.min_effect = c->min_effect;
    p->check.same_band = p->ends.same_band;
    p->slots = o->exec.slots > 1 ? o->exec.slots : 1;
}

/* Each exact culprit's wall: its parent and it, profiled back to back, into json's culprits. */
static void diagnose_culprits(bsess *e, cfgsrc *cs, const revlist *revs, const mt_bisect *b,
                              FILE *progress, cJSON *json)
{
    size_t i;
    cJSON *arr = cJSON_GetObjectItem(json, "culprits");
    for (i = 0; i < (size_t)b->n_culprits; i++) {
        const mt_bisect_culprit *cu = &b->culprits[i];
        char ia[17], ib[17];
        if (cu->lo != cu->hi)
            continue;
        mt_prepare_rev_id(revs->v[cu->parent], ia);
        mt_prepare_rev_id(revs->v[cu->hi], ib);
        if (progress)
            fprintf(progress, "moetune bisect: the wall of #%d: a profiled pair\n", cu->hi);
        cJSON_AddItemToObject(cJSON_GetArrayItem(arr, (int)i), "diagnosis",
                              diagnose(e, e->baseline, revs->v[cu->parent], e->baseline,
                                       revs->v[cu->hi], ia, ib, &cs->diag_executed));
    }
}

/* The summary on stdout: the verdict, the ends, each culprit, the notes and the spend. */
static void print_summary(const bsess *e, const mt_bisect_opts *o, const revlist *revs,
                          const mt_bisect *b, const cJSON *json)
{
    size_t i;
    printf("%s\n", b->why);
    if (b->outcome == MT_BISECT_FOUND || b->outcome == MT_BISECT_NOT_REPRODUCED)
        printf("ends: good %.1f ms, bad %.1f ms (%+.2f%%, 95%% CI %+.2f%% .. %+.2f%%, %d + %d "
               "runs)\n",
               b->ends.median_control, b->ends.median_candidate, 100 * b->ends.effect,
               100 * b->ends_ci_lo, 100 * b->ends_ci_hi, b->revs[0].n, b->revs[b->n - 1].n);
    for (i = 0; i < (size_t)b->n_culprits; i++) {
        const mt_bisect_culprit *cu = &b->culprits[i];
        if (cu->lo == cu->hi) {
            printf("culprit: %s (#%d): %+.2f%% step time (95%% CI %+.2f%% .. %+.2f%%), %.1f -> "
                   "%.1f ms%s\n",
                   revs->v[cu->hi], cu->hi, 100 * cu->effect, 100 * cu->ci_lo, 100 * cu->ci_hi,
                   cu->ms_before, cu->ms_after, cu->partial ? " (a partial step)" : "");
            print_diagnosis(revs->v[cu->hi],
                            cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(json, "culprits"),
                                                                   (int)i),
                                                "diagnosis"));
        } else {
            int j;
            printf("culprit range: one of #%d..#%d (the others could not be tested): %+.2f%% "
                   "(95%% CI %+.2f%% .. %+.2f%%)\n",
                   cu->lo, cu->hi, 100 * cu->effect, 100 * cu->ci_lo, 100 * cu->ci_hi);
            for (j = cu->lo; j <= cu->hi; j++)
                printf("  %s (#%d, %s)\n", revs->v[j], j, rev_verdict(&b->revs[j]));
        }
    }
    for (i = 0; i < (size_t)b->n_notes; i++)
        printf("note: %s\n", b->notes[i]);
    if (o->good_config)
        cfg_print(json);
    printf("spent: %ld runs (%d executed now), %.2f GPU-hours\nbisect.json: %s/bisect.json\n"
           "bisect.html: %s/bisect.html\n",
           (long)cJSON_GetNumberValue(cJSON_GetObjectItem(json, "runs")), mt_exec_executed(e->x),
           mt_exec_gpu_hours(e->x), o->dir, o->dir);
}

/* text and a newline into path (bisect.json); a failure (or no text) is in d. */
static int write_json_text(const char *path, const char *text, mt_diag *d)
{
    FILE *f;
    if (!text || !(f = fopen(path, "w"))) {
        mt_diag_add(d, path, 0, NULL, "cannot write: %s", strerror(errno));
        return -1;
    }
    fputs(text, f);
    fputc('\n', f);
    if (fclose(f)) {
        mt_diag_add(d, path, 0, NULL, "cannot write: %s", strerror(errno));
        return -1;
    }
    return 0;
}

int mt_bisect_cmd(mt_registry *reg, mt_contract *c, const mt_bisect_opts *o, int *outcome,
                  mt_diag *d)
{
    bsess e;
    mt_exec_env env = {0};
    cfgsrc cs;
    revlist revs = {0};
    mt_bisect b;
    mt_bisect_params p;
    bctx ctx;
    cJSON *json = NULL;
    char path[4200], *text = NULL;
    size_t i;
    int rc = -1;
    memset(&b, 0, sizeof b);
    memset(&e, 0, sizeof e);
    memset(&cs, 0, sizeof cs);
    *outcome = MT_BISECT_ERROR;
    rc = -EINVAL; /* bad input until the revisions are known */
    if (o->good_config ? cfg_source_open(reg, c, o, &cs, &revs, d)
        : o->repo      ? revs_from_git(o->repo, o->good, o->bad, &revs, d)
                       : revs_from_file(o->revs_file, o->good, o->bad, &revs, d))
        goto out;
    if (mkdir(o->dir, 0755) && errno != EEXIST) {
        mt_diag_add(d, o->dir, 0, NULL, "cannot create the directory: %s", strerror(errno));
        rc = -1;
        goto out;
    }
    if (same_revisions(o->dir, &revs, d))
        goto out;
    rc = -1;
    e.reg = reg;
    e.c = c;
    e.d = d;
    e.dir = o->dir;
    env.reg = reg;
    env.c = c;
    env.dir = o->dir;
    env.ctx = &e;
    env.on_live = on_live;
    if (!(e.x = mt_exec_new(&o->exec, &env, d)))
        goto out;
    mt_exec_set_prepare(e.x, o->prepare, o->n_prepare, o->repo, o->prepare_timeout_s);
    if (!(e.baseline = mt_config_base(reg, c, d)))
        goto out;
    memset(&ctx, 0, sizeof ctx);
    ctx.e = &e;
    ctx.revs = &revs;
    ctx.progress = o->progress;
    if (o->good_config) {
        ctx.cfgs = cs.cfgs;
        ctx.skip = cs.skip;
    }
    ctx.ids = calloc(revs.n, sizeof *ctx.ids);
    if (!ctx.ids)
        goto out;
    for (i = 0; i < revs.n; i++)
        mt_prepare_rev_id(revs.v[i], ctx.ids[i]);
    bisect_params(&p, c, o);
    if (o->progress)
        fprintf(o->progress,
                "moetune bisect: %zu revisions from %.12s (good) to %.12s (bad), contract %s, "
                "alpha %g, minimum effect %.1f%%\n",
                revs.n, revs.v[0], revs.v[revs.n - 1], c->name, c->alpha, 100 * c->min_effect);
    if (mt_bisect_run(&b, revs.n, &p, run_jobs, &ctx)) {
        mt_diag_add(d, o->dir, 0, NULL, "the bisection could not run (out of memory)");
        free(ctx.ids);
        goto out;
    }
    free(ctx.ids);
    if (b.outcome == MT_BISECT_ERROR && mt_diag_count(d)) {
        /* the executor's failure is in d already */
        goto out;
    }
    *outcome = b.outcome;
    json = bisect_json(&e, o, &revs, &b, &p);
    if (o->good_config && b.outcome == MT_BISECT_FOUND && json &&
        cfg_explain(&e, &cs, &revs, &b, &p, o->progress, json) < 0) {
        mt_diag_add(d, o->dir, 0, NULL, "the config bisection's follow-up failed");
        goto out;
    }
    if (o->good_config && json)
        cfg_json(&cs, json);
    if (!o->good_config && b.outcome == MT_BISECT_FOUND && json) {
        diagnose_culprits(&e, &cs, &revs, &b, o->progress, json);
        cJSON_SetNumberValue(cJSON_GetObjectItem(json, "gpu_hours"), mt_exec_gpu_hours(e.x));
    }
    if (json) {
        /* the searches' runs and the profiled pairs', apart */
        cJSON_SetNumberValue(cJSON_GetObjectItem(json, "runs_executed"),
                             mt_exec_executed(e.x) - cs.diag_executed);
        cJSON_AddNumberToObject(json, "diagnosis_runs_executed", cs.diag_executed);
    }
    text = json ? cJSON_Print(json) : NULL;
    snprintf(path, sizeof path, "%s/bisect.json", o->dir);
    if (write_json_text(path, text, d))
        goto out;
    snprintf(path, sizeof path, "%s/bisect.html", o->dir);
    if (write_html(path, &e, &revs, &b, json)) {
        mt_diag_add(d, path, 0, NULL, "cannot write: %s", strerror(errno));
        goto out;
    }
    print_summary(&e, o, &revs, &b, json);
    rc = 0;
out:
    free(text);
    cJSON_Delete(json);
    mt_bisect_clear(&b);
    rl_free(&revs);
    cfg_source_free(&cs);
    mt_kv_destroy(&e.baseline);
    mt_exec_destroy(&e.x);
    return rc;
}
