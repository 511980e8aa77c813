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
#include "engine_int.h"

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
                        "a revision is one word of at most 200 characters, not \"%.100s\"", s);
            goto bad;
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

typedef struct bctx {
    eng *e;
    const revlist *revs;
    char (*ids)[17];
    FILE *progress;
} bctx;


static int run_jobs(void *ctx, mt_bisect_job *jobs, size_t n)
{
    bctx *b = ctx;
    jobreq *v = calloc(n, sizeof *v);
    size_t i;
    int rc;
    if (!v)
        return -1;
    for (i = 0; i < n; i++) {
        v[i].cfg = b->e->baseline;
        memcpy(v[i].id, b->ids[jobs[i].rev], 17);
        v[i].kind = "bisect";
        v[i].rep = jobs[i].rep;
        v[i].phase = "bisect";
        v[i].rev = b->revs->v[jobs[i].rev];
    }
    rc = eng_exec(b->e, v, n);
    for (i = 0; i < n && !rc; i++) {
        const char *oc = eng_str(v[i].out, "outcome");
        mt_bisect_job *j = &jobs[i];
        snprintf(j->outcome, sizeof j->outcome, "%s", oc[0] ? oc : "?");
        snprintf(j->evidence, sizeof j->evidence, "%s", eng_str(v[i].out, "evidence"));
        j->ms = NAN;
        if (eng_job_ok(v[i].out)) {
            j->status = MT_BJ_OK;
            j->ms = eng_num(v[i].out, "ms");
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
                        v[i].rev, j->rep, j->ms, v[i].fresh ? "" : " (from the store)");
            else
                fprintf(b->progress, "moetune bisect: #%d %.12s replicate %d: %s: %.200s\n",
                        j->rev, v[i].rev, j->rep, j->outcome, j->evidence);
        }
    }
    eng_jobs_free(v, n);
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

static cJSON *bisect_json(const eng *e, const mt_bisect_opts *o, const revlist *revs,
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
    cJSON_AddStringToObject(root, "source", o->repo ? "git" : "file");
    cJSON_AddStringToObject(root, "origin", o->repo ? o->repo : o->revs_file);
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
    cJSON_AddNumberToObject(root, "runs_executed", e->executed);
    cJSON_AddNumberToObject(root, "gpu_hours", e->gpu_hours);
    x = cJSON_AddObjectToObject(root, "method");
    cJSON_AddNumberToObject(x, "alpha", p->ends.alpha);
    cJSON_AddNumberToObject(x, "min_effect", p->ends.min_effect);
    cJSON_AddNumberToObject(x, "ends_initial", p->ends.initial);
    cJSON_AddNumberToObject(x, "ends_max", p->ends.max_replicates);
    cJSON_AddNumberToObject(x, "sprt_error", p->eps);
    cJSON_AddNumberToObject(x, "midpoint_initial", p->mid_initial);
    cJSON_AddNumberToObject(x, "midpoint_max", p->mid_max);
    cJSON_AddNumberToObject(x, "check_alpha", p->check.alpha);
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
static int write_html(const char *path, const eng *e, const revlist *revs, const mt_bisect *b)
{
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
    if (b->n_notes) {
        fprintf(f, "<h2>Notes</h2><ul>\n");
        for (k = 0; k < b->n_notes; k++) {
            fprintf(f, "<li>");
            html_escape(f, b->notes[k]);
            fprintf(f, "</li>\n");
        }
        fprintf(f, "</ul>\n");
    }
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
    fprintf(f, "</table>\n<p>%ld runs (%d executed by the last invocation), %.2f GPU-hours.</p>\n"
               "</body></html>\n", b->runs, e->executed, e->gpu_hours);
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

int mt_bisect_cmd(mt_registry *reg, mt_contract *c, const mt_bisect_opts *o, int *outcome,
                  mt_diag *d)
{
    eng e;
    revlist revs = {0};
    mt_bisect b;
    mt_bisect_params p;
    bctx ctx;
    cJSON *json = NULL;
    char path[4200], *text = NULL;
    size_t i;
    int rc = -1;
    FILE *f;
    memset(&b, 0, sizeof b);
    memset(&e, 0, sizeof e);
    *outcome = MT_BISECT_ERROR;
    rc = -EINVAL; /* bad input until the revisions are known */
    if (o->repo ? revs_from_git(o->repo, o->good, o->bad, &revs, d)
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
    mt_tune_opts_init(&e.o);
    e.o.dir = o->dir;
    e.o.executor = o->executor;
    e.o.slots = o->slots > 0 ? o->slots : 1;
    e.o.workers = o->workers;
    e.o.key_dir = o->key_dir;
    e.o.job_grace_s = o->job_grace_s;
    e.o.worker_wait_s = o->worker_wait_s;
    e.d = d;
    e.sim = o->sim_path ? o->sim_path : "moetune-sim";
    e.timeline = cJSON_CreateArray();
    e.prepare = o->prepare;
    e.n_prepare = o->n_prepare;
    e.repo = o->repo;
    e.prepare_timeout_s = o->prepare_timeout_s;
    e.phase = "bisect";
    if (!(e.st = mt_store_open(o->dir, c, d)))
        goto out;
    if (o->executor == MT_EXEC_ZMQ && (!o->workers || eng_zx_open(&e)))
        goto out;
    if (!(e.baseline = mt_config_base(reg, c, d)))
        goto out;
    ctx.e = &e;
    ctx.revs = &revs;
    ctx.progress = o->progress;
    ctx.ids = calloc(revs.n, sizeof *ctx.ids);
    if (!ctx.ids)
        goto out;
    for (i = 0; i < revs.n; i++)
        mt_prepare_rev_id(revs.v[i], ctx.ids[i]);
    mt_bisect_params_default(&p);
    p.ends.alpha = c->alpha;
    p.ends.min_effect = c->min_effect;
    p.ends.same_band = c->min_effect > 0.015 ? 1.5 * c->min_effect : 0.03;
    p.ends.initial = c->replicates > 8 ? c->replicates : 8;
    p.ends.max_replicates = 4 * p.ends.initial;
    p.check.alpha = c->alpha / 5;
    p.check.min_effect = c->min_effect;
    p.check.same_band = p.ends.same_band;
    p.slots = e.o.executor == MT_EXEC_ZMQ ? (o->slots > 1 ? o->slots : 1) : e.o.slots;
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
    text = json ? cJSON_Print(json) : NULL;
    snprintf(path, sizeof path, "%s/bisect.json", o->dir);
    if (!text || !(f = fopen(path, "w"))) {
        mt_diag_add(d, path, 0, NULL, "cannot write: %s", strerror(errno));
        goto out;
    }
    fputs(text, f);
    fputc('\n', f);
    if (fclose(f)) {
        mt_diag_add(d, path, 0, NULL, "cannot write: %s", strerror(errno));
        goto out;
    }
    snprintf(path, sizeof path, "%s/bisect.html", o->dir);
    if (write_html(path, &e, &revs, &b)) {
        mt_diag_add(d, path, 0, NULL, "cannot write: %s", strerror(errno));
        goto out;
    }
    /* the summary on stdout */
    printf("%s\n", b.why);
    if (b.outcome == MT_BISECT_FOUND || b.outcome == MT_BISECT_NOT_REPRODUCED)
        printf("ends: good %.1f ms, bad %.1f ms (%+.2f%%, 95%% CI %+.2f%% .. %+.2f%%, %d + %d "
               "runs)\n",
               b.ends.median_control, b.ends.median_candidate, 100 * b.ends.effect,
               100 * b.ends_ci_lo, 100 * b.ends_ci_hi, b.revs[0].n, b.revs[b.n - 1].n);
    for (i = 0; i < (size_t)b.n_culprits; i++) {
        const mt_bisect_culprit *cu = &b.culprits[i];
        if (cu->lo == cu->hi)
            printf("culprit: %s (#%d): %+.2f%% step time (95%% CI %+.2f%% .. %+.2f%%), %.1f -> "
                   "%.1f ms%s\n",
                   revs.v[cu->hi], cu->hi, 100 * cu->effect, 100 * cu->ci_lo, 100 * cu->ci_hi,
                   cu->ms_before, cu->ms_after, cu->partial ? " (a partial step)" : "");
        else {
            int j;
            printf("culprit range: one of #%d..#%d (the others could not be tested): %+.2f%% "
                   "(95%% CI %+.2f%% .. %+.2f%%)\n",
                   cu->lo, cu->hi, 100 * cu->effect, 100 * cu->ci_lo, 100 * cu->ci_hi);
            for (j = cu->lo; j <= cu->hi; j++)
                printf("  %s (#%d, %s)\n", revs.v[j], j, rev_verdict(&b.revs[j]));
        }
    }
    for (i = 0; i < (size_t)b.n_notes; i++)
        printf("note: %s\n", b.notes[i]);
    printf("spent: %ld runs (%d executed now), %.2f GPU-hours\nbisect.json: %s/bisect.json\n"
           "bisect.html: %s/bisect.html\n",
           b.runs, e.executed, e.gpu_hours, o->dir, o->dir);
    rc = 0;
out:
    free(text);
    cJSON_Delete(json);
    mt_bisect_free(&b);
    rl_free(&revs);
    mt_kv_destroy(&e.baseline);
    cJSON_Delete(e.timeline);
    eng_zx_close(&e);
    mt_store_close(&e.st);
    return rc;
}
