/*
 * test_report.c - the bundle's human views: REPORT.md and report.html
 * rendered from hand-made bundle.json files (tests/fixtures/bundle-full.json
 * and variants of it built here): every section and plot present, nothing
 * fetched from the network, bundle text escaped, the unconfirmed and the
 * unvalidated cases worded plainly, edge cases drawn without a NaN, and
 * malformed bundles refused with the JSON path of the problem.
 */
#include "testkit.h"
#include "report.h"

#include <check.h>
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FIXTURE MT_SOURCE_DIR "/tests/fixtures/bundle-full.json"

static const char *const sections[] = {"summary",    "recipe",   "meshes", "decisions",
                                       "distributions", "throughput", "memory", "walls",
                                       "ablation",   "validation"};

/* ---- helpers ---------------------------------------------------------- */

typedef struct out {
    char dir[64];
    char *html, *md;
    int rc;
    mt_diag *d;
} out;

static cJSON *fixture(void)
{
    char *text = tk_slurp(FIXTURE);
    cJSON *j;
    ck_assert_msg(text != NULL, "cannot read %s", FIXTURE);
    j = cJSON_Parse(text);
    ck_assert_msg(j != NULL, "%s is not JSON", FIXTURE);
    free(text);
    return j;
}

static char *path_in(const char *dir, const char *name)
{
    char *p = malloc(strlen(dir) + strlen(name) + 2);
    sprintf(p, "%s/%s", dir, name);
    return p;
}

static void write_text(const char *dir, const char *name, const char *text, size_t len)
{
    char *p = path_in(dir, name);
    FILE *f = fopen(p, "wb");
    ck_assert_msg(f != NULL, "cannot write %s", p);
    ck_assert_int_eq(fwrite(text, 1, len, f), len);
    fclose(f);
    free(p);
}

static void rm_dir(const char *dir)
{
    DIR *dp = opendir(dir);
    struct dirent *e;
    if (!dp)
        return;
    while ((e = readdir(dp))) {
        char *p;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        p = path_in(dir, e->d_name);
        unlink(p);
        free(p);
    }
    closedir(dp);
    rmdir(dir);
}

/* Renders raw bundle text in a fresh directory. */
static void render_text(out *o, const char *text, size_t len)
{
    char *p;
    memset(o, 0, sizeof *o);
    strcpy(o->dir, "/tmp/moetune-test-report-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(o->dir));
    if (text)
        write_text(o->dir, "bundle.json", text, len);
    o->d = mt_diag_new();
    o->rc = mt_report_write(o->dir, o->d);
    p = path_in(o->dir, "report.html");
    o->html = tk_slurp(p);
    free(p);
    p = path_in(o->dir, "REPORT.md");
    o->md = tk_slurp(p);
    free(p);
}

static void render_json(out *o, const cJSON *j)
{
    char *text = cJSON_Print(j);
    render_text(o, text, strlen(text));
    free(text);
}

static void render_ok(out *o, const cJSON *j)
{
    render_json(o, j);
    if (o->rc)
        mt_diag_print(o->d, stderr);
    ck_assert_int_eq(o->rc, 0);
    ck_assert_int_eq(mt_diag_count(o->d), 0);
    ck_assert_msg(o->html && o->md, "a report file is missing");
}

static void out_free(out *o)
{
    free(o->html);
    free(o->md);
    mt_diag_destroy(&o->d);
    rm_dir(o->dir);
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    const char *p = hay;
    while ((p = strstr(p, needle))) {
        n++;
        p += strlen(needle);
    }
    return n;
}

#define ck_has(hay, needle) ck_assert_msg(strstr((hay), (needle)) != NULL, "missing: %s", (needle))
#define ck_lacks(hay, needle)                                                                      \
    ck_assert_msg(strstr((hay), (needle)) == NULL, "unexpected: %s", (needle))

static void ck_has_plot(const char *html, const char *name)
{
    char want[96];
    snprintf(want, sizeof want, "<svg class=\"plot\" data-plot=\"%s\"", name);
    ck_has(html, want);
}

/* Every section present; no network reference of any kind; the only script
 * is the inline check; no number in a drawing attribute is NaN or infinite. */
static void ck_page(const char *html)
{
    static const char *const attrs[] = {" x=\"", " y=\"", " x1=\"", " x2=\"", " y1=\"", " y2=\"",
                                        " cx=\"", " cy=\"", " width=\"", " height=\"", " d=\""};
    size_t i;
    char want[64];
    for (i = 0; i < sizeof sections / sizeof *sections; i++) {
        snprintf(want, sizeof want, "<section id=\"%s\"", sections[i]);
        ck_has(html, want);
    }
    ck_lacks(html, "http://");
    ck_lacks(html, "https://");
    ck_lacks(html, "<link");
    ck_lacks(html, "@import");
    ck_lacks(html, "url(");
    ck_lacks(html, "<script src");
    ck_assert_int_eq(count(html, "<script"), 1);
    ck_has(html, "document.body.dataset.check");
    for (i = 0; i < sizeof attrs / sizeof *attrs; i++) {
        const char *p = html;
        while ((p = strstr(p, attrs[i]))) {
            const char *v = p + strlen(attrs[i]), *end = strchr(v, '"');
            char val[256];
            size_t n = end ? (size_t)(end - v) : 0;
            if (n >= sizeof val)
                n = sizeof val - 1;
            memcpy(val, v, n);
            val[n] = '\0';
            ck_assert_msg(!strstr(val, "nan") && !strstr(val, "inf") && !strstr(val, "NAN") &&
                              !strstr(val, "INF"),
                          "bad number in%s%s\"", attrs[i], val);
            p = v;
        }
    }
}

/* Expects a refusal naming bundle.json and needle (in the field or the
 * message), and no report written. */
static void ck_refused(out *o, const char *needle)
{
    size_t i;
    int named = 0;
    ck_assert_int_lt(o->rc, 0);
    ck_assert_int_ge(mt_diag_count(o->d), 1);
    if (!mt_diag_contains(o->d, needle)) {
        mt_diag_print(o->d, stderr);
        ck_abort_msg("no problem mentions '%s'", needle);
    }
    for (i = 0; i < mt_diag_count(o->d); i++) {
        const char *f = mt_diag_at(o->d, i)->file;
        named |= f && strstr(f, "bundle.json") != NULL;
    }
    ck_assert_msg(named, "no problem names bundle.json");
    ck_assert_ptr_null(o->html);
    ck_assert_ptr_null(o->md);
}

static cJSON *at(cJSON *j, const char *key) { return cJSON_GetObjectItemCaseSensitive(j, key); }

static cJSON *decision(cJSON *j, int i) { return cJSON_GetArrayItem(at(j, "decisions"), i); }

static void set(cJSON *obj, const char *key, cJSON *v)
{
    if (at(obj, key))
        cJSON_ReplaceItemInObjectCaseSensitive(obj, key, v);
    else
        cJSON_AddItemToObject(obj, key, v);
}

/* ---- the full bundle -------------------------------------------------- */

START_TEST(full_bundle)
{
    static const char *const plots[] = {"ab-1",   "ab-2",           "ab-3",          "throughput",
                                        "walls",  "memory-baseline", "memory-winner", "validation"};
    cJSON *j = fixture();
    out o;
    size_t i;
    DIR *dp;
    struct dirent *e;
    int files = 0;
    render_ok(&o, j);
    ck_page(o.html);
    for (i = 0; i < sizeof plots / sizeof *plots; i++)
        ck_has_plot(o.html, plots[i]);
    ck_assert_int_eq(count(o.html, "<svg class=\"plot\""), 8);
    /* the summary: the validated gain, the contract's fingerprint and stack */
    ck_has(o.html, "Validated gain: +14.15%");
    ck_lacks(o.html, "did not confirm");
    ck_has(o.html, "9f2c1e7a4b3d5c6e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9012345678abcd");
    ck_has(o.html, "transformer-engine");
    ck_has(o.html, "training-equivalent");
    /* the recipe in both dialects, the meshes, every decision */
    ck_has(o.html, "--tensor-model-parallel-size 1");
    ck_has(o.html, "CUDA_DEVICE_MAX_CONNECTIONS=1");
    ck_has(o.html, "model.moe_token_dispatcher_type=flex");
    ck_has(o.html, "<span class=\"add\">+  --moe-token-dispatcher-type flex</span>");
    ck_has(o.html, "TP1 x CP1 x DP16 x PP1");
    ck_has(o.html, "ETP1 x EP8 x EDP2 x PP1");
    ck_has(o.html, "deep_ep::intranode::dispatch");
    ck_has(o.html, "[+8.10%, +9.75%]");
    ck_has(o.html, "0.0043");
    ck_has(o.html, "2.412, 2.398, 2.431, 2.405, 2.42");
    /* every sample drawn: 3 A/Bs x 10, the validation's 20, 13 runs with a
     * figure and 5 phases in the legend */
    ck_assert_int_eq(count(o.html, "<circle cx="), 3 * 10 + 20 + 13 + 5);
    /* capacity and limit lines */
    ck_has(o.html, "capacity 80 GB");
    ck_has(o.html, "limit 72 GB");

    /* REPORT.md: the recipe as flags, env and overrides; the tables */
    ck_has(o.md, "# moetune report: qwen3-30b-a3b-h100x16");
    ck_has(o.md, "### Environment\n\n```sh\nCUDA_DEVICE_MAX_CONNECTIONS=1\n"
                 "NVTE_FWD_LAYERNORM_SM_MARGIN=16\n```");
    ck_has(o.md, "### Megatron-LM flags\n\n```sh\n--tensor-model-parallel-size 1 \\\n"
                 "--expert-model-parallel-size 8 \\\n");
    ck_has(o.md, "--bf16\n```");
    ck_has(o.md, "| p=0.0043 <= 0.05 and gain 9.1% >= min_effect 2% |");
    ck_has(o.md, "| Runs | 14 (no limit) |");
    ck_has(o.md, "--recompute-modules moe_act layernorm");
    ck_has(o.md, "model.recompute_modules=[moe_act,layernorm]");
    ck_has(o.md, "| gain | +14.15% |");
    ck_has(o.md, "| Total gain | +14.15% (validated) |");
    ck_has(o.md, "| 2 | 2 | retune | `dispatcher` (value 2 of 2, selected) |");
    ck_has(o.md, "Attention (TP x CP x DP x PP): `TP1 x CP1 x DP16 x PP1`");
    ck_has(o.md, "| 0 | 63.40 | 71.10 |");
    ck_has(o.md, "| 15 | 61.30 | 69.00 |");
    ck_lacks(o.md, "did not confirm");

    /* written atomically: no temporary file is left behind */
    dp = opendir(o.dir);
    while ((e = readdir(dp)))
        if (e->d_name[0] != '.') {
            files++;
            ck_assert_msg(!strstr(e->d_name, ".tmp"), "left behind: %s", e->d_name);
        }
    closedir(dp);
    ck_assert_int_eq(files, 3);
    cJSON_Delete(j);
    out_free(&o);
}
END_TEST

START_TEST(rewrite_replaces)
{
    cJSON *j = fixture();
    mt_diag *d = mt_diag_new();
    out o;
    char *p, *again;
    render_ok(&o, j);
    ck_assert_int_eq(mt_report_write(o.dir, d), 0);
    p = path_in(o.dir, "report.html");
    again = tk_slurp(p);
    ck_assert_str_eq(again, o.html); /* deterministic */
    free(again);
    free(p);
    mt_diag_destroy(&d);
    cJSON_Delete(j);
    out_free(&o);
}
END_TEST

/* ---- escaping --------------------------------------------------------- */

START_TEST(escapes_bundle_text)
{
    cJSON *j = fixture(), *rec = at(j, "recipe");
    out o;
    set(at(rec, "config"), "moe_token_dispatcher_type",
        cJSON_CreateString("<script>alert(1)</script>"));
    set(cJSON_GetArrayItem(at(rec, "changes"), 1), "to",
        cJSON_CreateString("<script>alert(2)</script>"));
    set(decision(j, 0), "reason", cJSON_CreateString("a|b <script>alert(3)</script> & `x`"));
    set(decision(j, 0), "variable", cJSON_CreateString("tp\"onload=\"x"));
    render_ok(&o, j);
    ck_page(o.html);
    ck_lacks(o.html, "<script>alert");
    ck_has(o.html, "&lt;script&gt;alert(1)&lt;/script&gt;");
    ck_has(o.html, "&lt;script&gt;alert(2)&lt;/script&gt;");
    ck_has(o.html, "a|b &lt;script&gt;alert(3)&lt;/script&gt; &amp; `x`");
    ck_has(o.html, "tp&quot;onload=&quot;x");
    ck_lacks(o.html, "tp\"onload");
    /* Markdown: '|' cannot split a table cell, no raw HTML, no code span */
    ck_has(o.md, "a\\|b &lt;script>alert(3)&lt;/script> & \\`x\\`");
    ck_lacks(o.md, "alert(3)</script>");
    ck_has(o.md, "`<script>alert(2)</script>`"); /* literal inside a code span */
    cJSON_Delete(j);
    out_free(&o);
}
END_TEST

/* ---- validation outcomes ---------------------------------------------- */

START_TEST(unconfirmed_says_so)
{
    cJSON *j = fixture(), *v = at(j, "validation"), *ci = cJSON_CreateArray();
    out o;
    cJSON_AddItemToArray(ci, cJSON_CreateNumber(-0.011));
    cJSON_AddItemToArray(ci, cJSON_CreateNumber(0.019));
    set(v, "confirmed", cJSON_CreateFalse());
    set(v, "gain", cJSON_CreateNumber(0.004));
    set(v, "ci", ci);
    set(v, "p_value", cJSON_CreateNumber(0.41));
    set(v, "recommendation",
        cJSON_CreateString("keep the baseline; the best validated config is the baseline"));
    set(j, "status", cJSON_CreateString("not_confirmed"));
    set(j, "total_gain", cJSON_CreateNumber(0.004));
    render_ok(&o, j);
    ck_page(o.html);
    ck_has_plot(o.html, "validation");
    ck_has(o.html, "<div class=\"banner bad\"><strong>Validation did not confirm the winner.");
    ck_has(o.html, "Recommendation: keep the baseline; the best validated config is the baseline");
    ck_lacks(o.html, "Validated gain");
    ck_has(o.html, "none claimed (validation measured +0.40%, not confirmed)");
    ck_has(o.md, "**Validation did not confirm the winner.**");
    ck_has(o.md, "> **Recommendation:** keep the baseline; the best validated config is");
    ck_has(o.md, "| confirmed | no |");
    ck_lacks(o.md, "Validated gain");
    cJSON_Delete(j);
    out_free(&o);
}
END_TEST

START_TEST(no_validation_no_decisions)
{
    cJSON *j = fixture();
    out o;
    set(j, "validation", cJSON_CreateNull());
    set(j, "total_gain", cJSON_CreateNull());
    set(j, "decisions", cJSON_CreateArray());
    set(j, "timeline", cJSON_CreateArray());
    set(j, "ablation", cJSON_CreateArray());
    set(j, "memory", cJSON_CreateArray());
    set(j, "walls", cJSON_CreateNull());
    set(j, "status", cJSON_CreateString("baseline_only"));
    set(at(j, "recipe"), "changes", cJSON_CreateArray());
    set(at(j, "recipe"), "command_diff", cJSON_CreateArray());
    render_ok(&o, j);
    ck_page(o.html);
    ck_lacks(o.html, "<svg");
    ck_has(o.html, "No validation was run</strong>, so no total gain is claimed");
    ck_has(o.html, "No decisions were made.");
    ck_has(o.html, "None: the baseline is the recommendation.");
    ck_has(o.md, "No validation was run, so no total gain is claimed.");
    ck_has(o.md, "| Total gain | none claimed (no validation) |");
    ck_lacks(o.md, "did not confirm");
    cJSON_Delete(j);
    out_free(&o);
}
END_TEST

/* baseline.fit as the fit phase writes it (search/BUNDLE.md). */
static cJSON *base_fit(int fits, double est, double peak, cJSON *fitted)
{
    cJSON *f = cJSON_CreateObject(), *p = cJSON_CreateObject();
    cJSON_AddItemToObject(f, "fits", fits < 0 ? cJSON_CreateNull() : cJSON_CreateBool(fits));
    cJSON_AddNumberToObject(f, "estimate_gb", est);
    cJSON_AddNumberToObject(f, "usable_gb", 73.6);
    cJSON_AddNumberToObject(f, "uncertainty", 0.15);
    cJSON_AddStringToObject(p, "outcome", peak > 80 ? "oom" : "ok");
    cJSON_AddItemToObject(p, "peak_gb", peak > 80 ? cJSON_CreateNull() : cJSON_CreateNumber(peak));
    cJSON_AddItemToObject(f, "probe", p);
    cJSON_AddItemToObject(f, "fitted", fitted ? fitted : cJSON_CreateNull());
    cJSON_AddStringToObject(f, "reason", "the fit phase's words");
    return f;
}

/* A base that does not fit is never presented as usable: a failed tune's
 * recipe section says there is no usable recipe (not "the baseline is the
 * recommendation"), and the summary gives the figures. */
START_TEST(base_that_does_not_fit_is_not_usable)
{
    cJSON *j = fixture();
    out o;
    set(j, "validation", cJSON_CreateNull());
    set(j, "total_gain", cJSON_CreateNull());
    set(j, "ablation", cJSON_CreateArray());
    set(j, "memory", cJSON_CreateArray());
    set(j, "status", cJSON_CreateString("failed"));
    set(at(j, "budget"), "stopped_because", cJSON_CreateString("nothing fits in memory"));
    set(at(j, "recipe"), "changes", cJSON_CreateArray());
    set(at(j, "recipe"), "command_diff", cJSON_CreateArray());
    set(at(j, "baseline"), "fit", base_fit(0, 81.2, 90, NULL));
    render_ok(&o, j);
    ck_page(o.html);
    ck_lacks(o.html, "the baseline is the recommendation");
    ck_lacks(o.md, "the baseline is the recommendation");
    ck_has(o.html, "No usable recipe. The base config does not fit in memory and no memory "
                   "change of the space made it fit (stopped because: nothing fits in memory)");
    ck_has(o.md, "| Base fits in memory | no: estimate 81.2 GB, probe oom, of 73.6 GB usable "
                 "(estimate uncertainty 15%). Not a usable base, and no memory change of the "
                 "space made it fit |");
    ck_has(o.md, "None: the config shown is the base, not a recommendation.");
    cJSON_Delete(j);
    out_free(&o);
}
END_TEST

/* A base made to fit: the summary says the base does not fit, which change
 * made it fit, and that the fitted config is the validation's control; a
 * base that fits says so with the probe's figure. */
START_TEST(fitted_base_and_fitting_base_say_so)
{
    cJSON *j = fixture(), *ch = cJSON_CreateArray(), *c = cJSON_CreateObject();
    out o;
    cJSON_AddStringToObject(c, "knob", "recompute_modules");
    cJSON_AddStringToObject(c, "from", "");
    cJSON_AddStringToObject(c, "to", "moe_act");
    cJSON_AddItemToArray(ch, c);
    set(at(j, "baseline"), "fit", base_fit(0, 78.0, 75.1, ch));
    render_ok(&o, j);
    ck_has(o.md, "| Base fits in memory | no: estimate 78.0 GB, probe ok (hottest GPU 75.1 GB), "
                 "of 73.6 GB usable (estimate uncertainty 15%). Not a usable base: the fit "
                 "phase made it fit with recompute_modules=moe_act, and that config is the "
                 "validation's control |");
    ck_has(o.html, "<tr><th>Base fits in memory</th><td>no: estimate 78.0 GB");
    out_free(&o);
    set(at(j, "baseline"), "fit", base_fit(1, 70.5, 61.3, NULL));
    render_ok(&o, j);
    ck_has(o.md, "| Base fits in memory | yes: estimate 70.5 GB, probe ok (hottest GPU 61.3 GB), "
                 "of 73.6 GB usable (estimate uncertainty 15%) |");
    out_free(&o);
    /* a bundle without baseline.fit (written before it) says nothing of it */
    cJSON_DeleteItemFromObjectCaseSensitive(at(j, "baseline"), "fit");
    render_ok(&o, j);
    ck_lacks(o.md, "Base fits in memory");
    out_free(&o);
    /* and a malformed one is named */
    set(at(j, "baseline"), "fit", base_fit(1, 70.5, 61.3, NULL));
    set(at(at(j, "baseline"), "fit"), "uncertainty", cJSON_CreateString("15%"));
    render_json(&o, j);
    ck_refused(&o, "baseline.fit.uncertainty");
    cJSON_Delete(j);
    out_free(&o);
}
END_TEST

/* Whatever the status, a recipe that is a base the fit phase found not to
 * fit is no recommendation: a tune that stopped at the base (baseline_only)
 * with baseline.fit.fits false says so, in both views. */
START_TEST(unfit_base_is_never_the_recommendation)
{
    static const char *const statuses[] = {"baseline_only", "failed"};
    size_t k;
    for (k = 0; k < 2; k++) {
        cJSON *j = fixture();
        out o;
        set(j, "validation", cJSON_CreateNull());
        set(j, "total_gain", cJSON_CreateNull());
        set(j, "ablation", cJSON_CreateArray());
        set(j, "status", cJSON_CreateString(statuses[k]));
        set(at(j, "recipe"), "changes", cJSON_CreateArray());
        set(at(j, "recipe"), "command_diff", cJSON_CreateArray());
        set(at(j, "baseline"), "fit", base_fit(k ? -1 : 0, 81.2, 90, NULL));
        render_ok(&o, j);
        ck_page(o.html);
        ck_lacks(o.html, "the baseline is the recommendation");
        ck_lacks(o.md, "the baseline is the recommendation");
        ck_has(o.html, "<p class=\"banner bad\">No usable recipe. The base config does not ");
        ck_has(o.md, k ? "> **No usable recipe. The base config does not run"
                       : "> **No usable recipe. The base config does not fit in memory");
        ck_has(o.md, "None: the config shown is the base, not a recommendation.");
        out_free(&o);
        /* the same bundle with a base that fits: the baseline stands */
        set(at(j, "baseline"), "fit", base_fit(1, 60.2, 61.0, NULL));
        set(j, "status", cJSON_CreateString("baseline_only"));
        render_ok(&o, j);
        ck_has(o.html, "None: the baseline is the recommendation.");
        ck_lacks(o.html, "No usable recipe");
        cJSON_Delete(j);
        out_free(&o);
    }
}
END_TEST

/* ---- decisions -------------------------------------------------------- */

/* The engine's decision ids skip (profiled runs take numbers): the visible
 * numbers are 1, 2, 3 in order, each with its id; plots keep the id. */
START_TEST(decisions_numbered_consecutively)
{
    cJSON *j = fixture();
    out o;
    set(decision(j, 0), "index", cJSON_CreateNumber(1));
    set(decision(j, 1), "index", cJSON_CreateNumber(3));
    set(decision(j, 2), "index", cJSON_CreateNumber(7));
    render_ok(&o, j);
    ck_page(o.html);
    ck_has(o.html, "<td class=\"n dno\" rowspan=\"2\"><a href=\"#ab-1\">1</a></td>"
                   "<td class=\"n\" rowspan=\"2\">1</td>");
    ck_has(o.html, "<td class=\"n dno\" rowspan=\"2\"><a href=\"#ab-3\">2</a></td>"
                   "<td class=\"n\" rowspan=\"2\">3</td>");
    ck_has(o.html, "<td class=\"n dno\" rowspan=\"2\"><a href=\"#ab-7\">3</a></td>"
                   "<td class=\"n\" rowspan=\"2\">7</td>");
    ck_assert_int_eq(count(o.html, "class=\"n dno\""), 3);
    ck_has_plot(o.html, "ab-7");
    ck_has(o.html, "<figure id=\"ab-7\"><figcaption><b>#3 ");
    ck_has(o.html, "(id 7)");
    ck_has(o.html, "so ids may skip");
    /* the table wraps instead of scrolling sideways */
    ck_lacks(o.html, "<div class=\"wide\"><table class=\"dec\"");
    ck_has(o.html, "table.dec{font-size:13px;width:100%;table-layout:fixed}");
    ck_has(o.html, "tr.more td{overflow-wrap:anywhere}");
    ck_has(o.md, "| 2 | 3 | retune | `dispatcher` (value 2 of 2, selected) |");
    ck_has(o.md, "| 3 | 7 | retune | `permute_fusion` |");
    ck_has(o.md, "- #3 (id 7) `permute_fusion`");
    out_free(&o);
    /* one id twice is refused, by its path */
    set(decision(j, 2), "index", cJSON_CreateNumber(3));
    render_json(&o, j);
    ck_refused(&o, "decisions[2].index");
    ck_assert(mt_diag_contains(o.d, "3 is also decisions[1].index"));
    cJSON_Delete(j);
    out_free(&o);
}
END_TEST

/* ---- memory ----------------------------------------------------------- */

static cJSON *numbers(int n, double first, double step);

/* A memory entry of gpus GPUs in pp stages (rank-major, pipeline outermost)
 * with expert rank 0 of each stage hot, hottest, roles and why as
 * search/engine.c writes them. */
static cJSON *memory_of(const char *name, int gpus, int pp)
{
    cJSON *o = cJSON_CreateObject(), *a = cJSON_CreateArray(), *h, *roles, *x;
    int i, stage_size = gpus / pp;
    char why[256];
    for (i = 0; i < gpus; i++) {
        int stage = i / stage_size, hot = i % stage_size % 8 == 0;
        cJSON_AddItemToArray(a, cJSON_CreateNumber(50.0 + 3.0 * (pp - stage) +
                                                   (hot ? 1.5 : 0.001 * (i % 7))));
    }
    cJSON_AddStringToObject(o, "name", name);
    cJSON_AddNumberToObject(o, "capacity_gb", 80);
    cJSON_AddNumberToObject(o, "headroom_gb", 8);
    cJSON_AddItemToObject(o, "per_gpu_gb", a);
    cJSON_AddStringToObject(o, "source", "sim");
    h = cJSON_AddObjectToObject(o, "hottest");
    cJSON_AddNumberToObject(h, "rank", 0);
    cJSON_AddNumberToObject(h, "peak_gb", cJSON_GetArrayItem(a, 0)->valuedouble);
    cJSON_AddNumberToObject(h, "stage", 1);
    cJSON_AddNumberToObject(h, "stages", pp);
    cJSON_AddNumberToObject(h, "expert_rank", 0);
    cJSON_AddNumberToObject(h, "expert_ranks", 8);
    cJSON_AddStringToObject(h, "role", "first stage");
    snprintf(why, sizeof why, "pipeline stage 1 of %d (the first holds the embedding and the "
                              "most microbatches in flight), expert rank 0 of 8", pp);
    cJSON_AddStringToObject(h, "why", why);
    roles = cJSON_AddArrayToObject(o, "roles");
    x = cJSON_CreateObject();
    cJSON_AddStringToObject(x, "role", "first stage");
    cJSON_AddNumberToObject(x, "rank", 0);
    cJSON_AddNumberToObject(x, "peak_gb", cJSON_GetArrayItem(a, 0)->valuedouble);
    cJSON_AddNumberToObject(x, "median_gb", 50.0 + 3.0 * pp);
    cJSON_AddItemToArray(roles, x);
    x = cJSON_CreateObject();
    cJSON_AddStringToObject(x, "role", "last stage");
    cJSON_AddNumberToObject(x, "rank", gpus - stage_size);
    cJSON_AddNumberToObject(x, "peak_gb",
                            cJSON_GetArrayItem(a, gpus - stage_size)->valuedouble);
    cJSON_AddNumberToObject(x, "median_gb", 53.0);
    cJSON_AddItemToArray(roles, x);
    return o;
}

/* Up to 16 GPUs every GPU is drawn; past that the hottest of each role, and
 * either way the hottest GPU is named with its rank and why.  A hottest that
 * is not the largest figure, or a list short of the GPUs, is refused. */
START_TEST(memory_names_the_hottest_gpu)
{
    cJSON *j = fixture(), *mem;
    out o;
    render_ok(&o, j);
    ck_has(o.html, "<span class=\"hottest\">hottest GPU: rank 0 at 71.10 GB (every stage): "
                   "no pipeline parallelism: one stage, expert rank 0 of 8; 1.8 GB above the "
                   "median GPU of its stage (69.3 GB)");
    ck_has(o.html, "figures for 16 of 16 GPUs (source: sim)");
    ck_assert_int_eq(count(o.html, "<title>GPU 15: "), 2); /* every GPU of both */
    ck_has(o.md, "- winner: hottest GPU: rank 0 at 71.10 GB (every stage): no pipeline");
    out_free(&o);
    /* 256 GPUs in 4 stages: the roles' GPUs, not 256 bars */
    set(at(j, "hardware"), "gpus", cJSON_CreateNumber(256));
    mem = cJSON_CreateArray();
    cJSON_AddItemToArray(mem, memory_of("baseline", 256, 4));
    cJSON_AddItemToArray(mem, memory_of("winner", 256, 4));
    set(j, "memory", mem);
    render_ok(&o, j);
    ck_page(o.html);
    ck_has_plot(o.html, "memory-winner");
    ck_has(o.html, "256 GPUs: the chart shows the hottest GPU of each role");
    ck_has(o.html, "hottest GPU: rank 0 at 63.50 GB (first stage): pipeline stage 1 of 4");
    ck_assert_int_eq(count(o.html, "<title>GPU "), 4); /* 2 roles x 2 */
    ck_has(o.html, "<title>GPU 192: 54.50 GB</title>");
    ck_has(o.md, "256 GPUs: the hottest GPU of each role; every GPU's figure is in bundle.json.");
    ck_has(o.md, "| last stage | 192 | 54.50 | 53.00 |");
    ck_lacks(o.md, "| 255 |");
    out_free(&o);
    /* a hottest that is not the largest figure */
    set(at(cJSON_GetArrayItem(mem, 1), "hottest"), "rank", cJSON_CreateNumber(192));
    render_json(&o, j);
    ck_refused(&o, "memory[1].hottest.rank");
    ck_assert(mt_diag_contains(o.d, "not the hottest's"));
    out_free(&o);
    /* GPU 0 alone of 256 */
    set(at(cJSON_GetArrayItem(mem, 1), "hottest"), "rank", cJSON_CreateNumber(0));
    set(cJSON_GetArrayItem(mem, 1), "per_gpu_gb", numbers(1, 63.5, 0));
    render_json(&o, j);
    ck_refused(&o, "memory[1].per_gpu_gb");
    ck_assert(mt_diag_contains(o.d, "has 1 figures for 256 GPUs"));
    cJSON_Delete(j);
    out_free(&o);
}
END_TEST

/* ---- validation runs ---------------------------------------------------- */

/* A validation arm names the config id its runs are stored under and their
 * log folders, named after it; a folder under another id is refused. */
START_TEST(validation_runs_lead_to_their_logs)
{
    cJSON *j = fixture(), *w;
    out o;
    render_ok(&o, j);
    ck_has(o.html, "<tr><th>config id (runs)</th><td class=\"cfgid\"><code>5c0e7d2a91b34f68"
                   "</code></td><td class=\"cfgid\"><code>a47e19c03b5d6e21</code></td></tr>");
    ck_has(o.html, "<code>runs/a47e19c03b5d6e21-validate-r1900</code><br>"
                   "<code>runs/a47e19c03b5d6e21-validate-r1901</code>");
    ck_has(o.md, "| config id (runs) | `5c0e7d2a91b34f68` | `a47e19c03b5d6e21` |\n"
                 "| log folders | `runs/5c0e7d2a91b34f68-validate-r1900`<br>"
                 "`runs/5c0e7d2a91b34f68-validate-r1901` | `runs/a47e19c03b5d6e21-validate-r1900`"
                 "<br>`runs/a47e19c03b5d6e21-validate-r1901` |\n\n");
    out_free(&o);
    w = at(at(j, "validation"), "winner");
    cJSON_ReplaceItemInArray(at(w, "log_dirs"), 1,
                             cJSON_CreateString("runs/0b1c2d3e4f506172-validate-r1901"));
    render_json(&o, j);
    ck_refused(&o, "validation.winner.log_dirs[1]");
    ck_assert(mt_diag_contains(o.d, "is not named after the arm's config id a47e19c03b5d6e21"));
    out_free(&o);
    /* bundles written before it have neither: no rows */
    cJSON_DeleteItemFromObjectCaseSensitive(w, "config_id");
    cJSON_DeleteItemFromObjectCaseSensitive(w, "log_dirs");
    cJSON_DeleteItemFromObjectCaseSensitive(at(at(j, "validation"), "baseline"), "config_id");
    render_ok(&o, j);
    ck_lacks(o.html, "config id (runs)");
    cJSON_Delete(j);
    out_free(&o);
}
END_TEST

/* ---- throughput ------------------------------------------------------- */

/* timeline[].best_tflops is the incumbent's: the summary names its value at
 * the last run (an ablation that drops a change may lower it), never the
 * largest value of the line. */
START_TEST(throughput_line_is_the_accepted_best)
{
    cJSON *j = fixture(), *tl = at(j, "timeline");
    out o;
    set(cJSON_GetArrayItem(tl, 12), "best_tflops", cJSON_CreateNumber(340.5));
    set(cJSON_GetArrayItem(tl, 13), "best_tflops", cJSON_CreateNumber(340.5));
    render_ok(&o, j);
    ck_page(o.html);
    ck_has(o.html, "the accepted best config at the last run: 340.5 TFLOP/s per GPU");
    ck_lacks(o.html, "at the last run: 352.8");
    ck_has(o.html, ">incumbent, median of its runs so far</text>");
    ck_has(o.md, "| run | phase | GPU hours | TFLOP/s per GPU | incumbent, median of its runs so "
                 "far |");
    ck_has(o.md, "| 14 | validate | 9.6 | 351.4 | 340.5 |");
    cJSON_Delete(j);
    out_free(&o);
}
END_TEST

/* ---- walls ------------------------------------------------------------ */

/* The sum of the percentages in cells of class cls ("share-after"). */
static double cell_sum(const char *html, const char *cls)
{
    char want[64];
    const char *p = html;
    double sum = 0;
    snprintf(want, sizeof want, "class=\"n %s\">", cls);
    while ((p = strstr(p, want))) {
        p += strlen(want);
        sum += strtod(p, NULL);
    }
    return sum;
}

/* A wall's shares partition its profiled window: the rendered shares add up
 * to 100% (hidden communication a share of its own, not stacked on
 * compute), the window column names the profiled steps, and shares that
 * overlap (108%) are refused by their path. */
START_TEST(walls_are_shares_of_the_window)
{
    cJSON *j = fixture(), *after;
    out o;
    render_ok(&o, j);
    ck_page(o.html);
    ck_assert_msg(fabs(cell_sum(o.html, "share-before") - 100) < 0.05, "before sums to %g",
                  cell_sum(o.html, "share-before"));
    ck_assert_msg(fabs(cell_sum(o.html, "share-after") - 100) < 0.05, "after sums to %g",
                  cell_sum(o.html, "share-after"));
    ck_assert_int_eq(count(o.html, "class=\"n share-after\">"), 6);
    /* what "before" profiled: not the baseline, the config retune began with */
    ck_has(o.html, "the profile the retune phase began with, of the config after fit and scale");
    ck_has(o.md, "the profile the retune phase began with, of the config after fit and scale");
    ck_has(o.html, "<tr><td>compute, comm hidden under it</td><td class=\"n share-before\">8.0%"
                   "</td><td class=\"n share-after\">12.0%</td></tr>");
    ck_has(o.html, "<td class=\"n\">steps 3-5 (6.21 s)</td>");
    ck_has(o.md, "| window | steps 3-5 (7.23 s) | steps 3-5 (6.21 s) |");
    ck_has(o.md, "| other | 8.0% | 12.0% |");
    ck_lacks(o.md, "| window | n/a");
    out_free(&o);
    /* a wall of one modelled step (no steps), and one without a window */
    after = at(at(j, "walls"), "after");
    cJSON_DeleteItemFromObjectCaseSensitive(after, "steps");
    render_ok(&o, j);
    ck_has(o.md, "| window | steps 3-5 (7.23 s) | one modelled step (6.21 s) |");
    out_free(&o);
    /* hidden communication stacked on a compute share that already holds it */
    set(at(after, "shares"), "compute", cJSON_CreateNumber(0.67));
    render_json(&o, j);
    ck_refused(&o, "walls.after.shares");
    ck_assert(mt_diag_contains(o.d, "add up to 108.0%"));
    out_free(&o);
    set(at(after, "shares"), "compute", cJSON_CreateNumber(0.67));
    set(at(after, "shares"), "other", cJSON_CreateNumber(-0.08));
    render_json(&o, j);
    ck_refused(&o, "walls.after.shares.other");
    ck_assert(mt_diag_contains(o.d, "is -0.08; a share of the window is not negative"));
    cJSON_Delete(j);
    out_free(&o);
}
END_TEST

/* ---- edge cases in the data ------------------------------------------- */

static cJSON *numbers(int n, double first, double step)
{
    cJSON *a = cJSON_CreateArray();
    int i;
    for (i = 0; i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(first + step * i));
    return a;
}

START_TEST(edge_cases_draw)
{
    cJSON *j = fixture(), *d0 = decision(j, 0), *d1 = decision(j, 1), *d2 = decision(j, 2);
    cJSON *tl = cJSON_CreateArray(), *t = cJSON_CreateObject(), *mem, *m0;
    out o;
    /* one sample against all-equal samples; a never-run candidate */
    set(at(d0, "control"), "samples", numbers(1, 2.5, 0));
    set(at(d0, "control"), "median", cJSON_CreateNumber(2.5));
    set(at(d0, "candidate"), "samples", numbers(6, 2.5, 0));
    set(at(d0, "candidate"), "median", cJSON_CreateNumber(2.5));
    set(d1, "candidate", cJSON_CreateNull());
    set(d1, "verdict", cJSON_CreateString("failed"));
    set(d1, "gain", cJSON_CreateNull());
    set(d1, "ci", cJSON_CreateNull());
    set(d1, "p_value", cJSON_CreateNull());
    set(d1, "wall", cJSON_CreateNull());
    set(d1, "evidence", cJSON_CreateNull());
    set(at(d2, "control"), "samples", cJSON_CreateArray());
    set(at(d2, "control"), "median", cJSON_CreateNull());
    set(at(d2, "candidate"), "samples", cJSON_CreateArray());
    set(at(d2, "candidate"), "median", cJSON_CreateNull());
    /* a single run without a figure */
    cJSON_AddNumberToObject(t, "run", 1);
    cJSON_AddNumberToObject(t, "gpu_hours", 0);
    cJSON_AddNullToObject(t, "tflops");
    cJSON_AddNullToObject(t, "best_tflops");
    cJSON_AddStringToObject(t, "phase", "fit");
    cJSON_AddItemToArray(tl, t);
    set(j, "timeline", tl);
    /* zero capacity, a GPU without a figure, one GPU */
    mem = at(j, "memory");
    m0 = cJSON_GetArrayItem(mem, 0);
    set(m0, "capacity_gb", cJSON_CreateNumber(0));
    set(m0, "headroom_gb", cJSON_CreateNumber(0));
    cJSON_ReplaceItemInArray(at(m0, "per_gpu_gb"), 2, cJSON_CreateNull());
    set(cJSON_GetArrayItem(mem, 1), "per_gpu_gb", numbers(1, 0, 0));
    /* (as a bundle written before hottest and roles has it) */
    cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetArrayItem(mem, 1), "hottest");
    cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetArrayItem(mem, 1), "roles");
    /* all walls zero after; validation with one sample each, equal */
    set(at(at(j, "walls"), "after"), "shares", cJSON_Parse("{\"compute\":0,\"exposed_comm\":0,"
                                                           "\"hidden_comm\":0,\"idle\":0,"
                                                           "\"bubble\":0}"));
    set(at(at(j, "validation"), "baseline"), "samples", numbers(1, 2, 0));
    set(at(at(j, "validation"), "winner"), "samples", numbers(1, 2, 0));
    render_ok(&o, j);
    ck_page(o.html);
    ck_has_plot(o.html, "ab-1");
    ck_has_plot(o.html, "ab-2"); /* the control alone */
    ck_lacks(o.html, "data-plot=\"ab-3\"");
    ck_has_plot(o.html, "throughput");
    ck_has(o.html, "not run");
    ck_has(o.md, "| 1 | fit | 0 | failed | n/a |");
    cJSON_Delete(j);
    out_free(&o);
}
END_TEST

START_TEST(hundreds_of_decisions)
{
    cJSON *j = fixture(), *ds = at(j, "decisions"), *tl = at(j, "timeline");
    out o;
    int i;
    char plot[32];
    for (i = 4; i <= 400; i++) {
        cJSON *d = cJSON_Duplicate(cJSON_GetArrayItem(ds, i % 3), 1);
        set(d, "index", cJSON_CreateNumber(i));
        set(at(d, "candidate"), "samples", numbers(5, 2.0 + i * 0.001, 0.003));
        cJSON_AddItemToArray(ds, d);
    }
    for (i = 15; i <= 800; i++) {
        cJSON *t = cJSON_Duplicate(cJSON_GetArrayItem(tl, i % 14), 1);
        set(t, "run", cJSON_CreateNumber(i));
        cJSON_AddItemToArray(tl, t);
    }
    render_ok(&o, j);
    ck_page(o.html);
    for (i = 1; i <= 400; i += 57) {
        snprintf(plot, sizeof plot, "ab-%d", i);
        ck_has_plot(o.html, plot);
    }
    ck_has_plot(o.html, "ab-400");
    ck_assert_int_eq(count(o.html, "<svg class=\"plot\" data-plot=\"ab-"), 400);
    ck_has(o.md, "| 400 | ");
    cJSON_Delete(j);
    out_free(&o);
}
END_TEST

/* ---- malformed bundles ------------------------------------------------ */

START_TEST(not_json)
{
    out o;
    render_text(&o, "this is not a bundle\n", 21);
    ck_refused(&o, "not valid JSON");
    ck_assert_int_eq(o.rc, -EINVAL);
    out_free(&o);
}
END_TEST

START_TEST(truncated)
{
    char *text = tk_slurp(FIXTURE);
    out o;
    render_text(&o, text, strlen(text) / 2);
    ck_refused(&o, "truncated");
    ck_assert_int_gt(mt_diag_at(o.d, 0)->line, 1);
    free(text);
    out_free(&o);
}
END_TEST

START_TEST(no_bundle)
{
    out o;
    render_text(&o, NULL, 0);
    ck_refused(&o, "cannot read the bundle");
    ck_assert_int_eq(o.rc, -ENOENT);
    out_free(&o);
}
END_TEST

START_TEST(not_an_object)
{
    out o;
    render_text(&o, "[1, 2]", 6);
    ck_refused(&o, "not a JSON object");
    out_free(&o);
}
END_TEST

START_TEST(wrong_type_named)
{
    cJSON *j = fixture();
    out o;
    set(at(decision(j, 1), "control"), "samples", cJSON_CreateString("fast"));
    render_json(&o, j);
    ck_refused(&o, "decisions[1].control.samples");
    ck_assert_str_eq(mt_diag_at(o.d, 0)->field, "decisions[1].control.samples");
    ck_assert_str_eq(mt_diag_at(o.d, 0)->message, "expected an array, found a string");
    cJSON_Delete(j);
    out_free(&o);
}
END_TEST

START_TEST(wrong_element_named)
{
    cJSON *j = fixture();
    out o;
    cJSON_ReplaceItemInArray(at(at(decision(j, 2), "candidate"), "samples"), 3,
                             cJSON_CreateString("x"));
    cJSON_ReplaceItemInArray(at(at(j, "validation"), "window"), 1, cJSON_CreateNumber(50.5));
    render_json(&o, j);
    ck_refused(&o, "decisions[2].candidate.samples[3]");
    ck_assert(mt_diag_contains(o.d, "validation.window[1]"));
    ck_assert(mt_diag_contains(o.d, "expected an integer, found the number 50.5"));
    ck_assert_int_eq(mt_diag_count(o.d), 2);
    cJSON_Delete(j);
    out_free(&o);
}
END_TEST

START_TEST(missing_and_null_named)
{
    cJSON *j = fixture();
    out o;
    cJSON_DeleteItemFromObject(at(at(j, "recipe"), "meshes"), "moe");
    set(j, "contract", cJSON_CreateNull());
    set(at(j, "recipe"), "label", cJSON_CreateString("fast"));
    set(at(j, "walls"), "before", cJSON_CreateArray());
    render_json(&o, j);
    ck_refused(&o, "recipe.meshes.moe");
    ck_assert(mt_diag_contains(o.d, "missing; expected a string"));
    ck_assert(mt_diag_contains(o.d, "is null; expected an object"));
    ck_assert(mt_diag_contains(o.d, "\"fast\" is not one of"));
    ck_assert(mt_diag_contains(o.d, "walls.before"));
    cJSON_Delete(j);
    out_free(&o);
}
END_TEST

START_TEST(total_gain_is_validation_gain)
{
    cJSON *j = fixture();
    out o;
    set(j, "total_gain", cJSON_CreateNumber(0.09 + 0.0582)); /* a sum of A/Bs */
    render_json(&o, j);
    ck_refused(&o, "total_gain");
    ck_assert(mt_diag_contains(o.d, "never a sum"));
    cJSON_Delete(j);
    out_free(&o);
    j = fixture();
    set(j, "validation", cJSON_CreateNull());
    render_json(&o, j);
    ck_refused(&o, "there is no validation");
    cJSON_Delete(j);
    out_free(&o);
}
END_TEST

START_TEST(other_schema_refused)
{
    cJSON *j = fixture();
    out o;
    set(j, "schema", cJSON_CreateNumber(2));
    render_json(&o, j);
    ck_refused(&o, "schema version 2 is not supported");
    cJSON_Delete(j);
    out_free(&o);
}
END_TEST

START_TEST(many_problems_capped)
{
    cJSON *j = fixture(), *ds = at(j, "decisions");
    out o;
    int i;
    for (i = 0; i < 200; i++)
        cJSON_AddItemToArray(ds, cJSON_CreateNumber(i));
    render_json(&o, j);
    ck_refused(&o, "decisions[3]");
    ck_assert(mt_diag_contains(o.d, "more problems"));
    ck_assert_int_le(mt_diag_count(o.d), 41);
    cJSON_Delete(j);
    out_free(&o);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("test_report");
    TCase *tc = tcase_create("all");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, full_bundle);
    tcase_add_test(tc, rewrite_replaces);
    tcase_add_test(tc, escapes_bundle_text);
    tcase_add_test(tc, unconfirmed_says_so);
    tcase_add_test(tc, no_validation_no_decisions);
    tcase_add_test(tc, edge_cases_draw);
    tcase_add_test(tc, hundreds_of_decisions);
    tcase_add_test(tc, not_json);
    tcase_add_test(tc, truncated);
    tcase_add_test(tc, no_bundle);
    tcase_add_test(tc, not_an_object);
    tcase_add_test(tc, wrong_type_named);
    tcase_add_test(tc, wrong_element_named);
    tcase_add_test(tc, missing_and_null_named);
    tcase_add_test(tc, total_gain_is_validation_gain);
    tcase_add_test(tc, other_schema_refused);
    tcase_add_test(tc, many_problems_capped);
    tcase_add_test(tc, base_that_does_not_fit_is_not_usable);
    tcase_add_test(tc, fitted_base_and_fitting_base_say_so);
    tcase_add_test(tc, unfit_base_is_never_the_recommendation);
    tcase_add_test(tc, decisions_numbered_consecutively);
    tcase_add_test(tc, walls_are_shares_of_the_window);
    tcase_add_test(tc, throughput_line_is_the_accepted_best);
    tcase_add_test(tc, validation_runs_lead_to_their_logs);
    tcase_add_test(tc, memory_names_the_hottest_gpu);
    suite_add_tcase(s, tc);
    return tk_run(s);
}
