/*
 * report_text.c - the report's text: growing buffers, escaping for HTML and
 * Markdown, figures, and the wording REPORT.md and report.html both say
 * (report_int.h).  Every string from the bundle is escaped for its context.
 */
#include "report_int.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const mt__share_names[MT__NSHARES] = {
    "compute", "compute, comm hidden under it", "exposed comm", "idle", "bubble", "other"};

/* ---- growing text ----------------------------------------------------- */

void mt__sb_putn(mt__sb *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        char *ns;
        while (cap < b->n + n + 1)
            cap *= 2;
        ns = realloc(b->s, cap);
        if (!ns) {
            b->oom = 1;
            return;
        }
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

void mt__sb_clear(mt__sb *b)
{
    free(b->s);
    *b = (mt__sb){0};
}

void mt__sb_puts(mt__sb *b, const char *s) { mt__sb_putn(b, s, strlen(s)); }

void mt__sb_printf(mt__sb *b, const char *fmt, ...)
{
    char small[256], *big;
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        mt__sb_putn(b, small, (size_t)n);
        return;
    }
    big = malloc((size_t)n + 1);
    if (!big) {
        b->oom = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    mt__sb_putn(b, big, (size_t)n);
    free(big);
}

/* Appends s with each character that esc names replaced (esc returns the
 * replacement for *p, or NULL to keep it); NULL (a JSON null) reads "n/a". */
static void sb_escaped(mt__sb *b, const char *s, const char *(*esc)(const char *p))
{
    const char *p, *r;
    if (!s) {
        mt__sb_puts(b, "n/a");
        return;
    }
    for (p = s; *p; p++) {
        r = esc(p);
        if (r)
            mt__sb_puts(b, r);
        else
            mt__sb_putn(b, p, 1);
    }
}

static const char *html_escape(const char *p)
{
    unsigned char c = (unsigned char)*p;
    switch (c) {
    case '&': return "&amp;";
    case '<': return "&lt;";
    case '>': return "&gt;";
    case '"': return "&quot;";
    case '\'': return "&#39;";
    default: return (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f ? "&#xFFFD;" : NULL;
    }
}

/* HTML text or attribute value; NULL (a JSON null) reads "n/a". */
void mt__sb_html(mt__sb *b, const char *s) { sb_escaped(b, s, html_escape); }

/* Markdown inline text, safe in a table cell: one line, no raw HTML, no
 * code span or strong emphasis started by the bundle's text.  '<' and '&' stay
 * readable ("p <= 0.05") where they cannot start a tag or an entity. */
static const char *md_escape(const char *p)
{
    unsigned char c = (unsigned char)*p;
    switch (c) {
    case '|': return "\\|";
    case '\\': return "\\\\";
    case '`': return "\\`";
    case '*': return "\\*";
    case '<': /* only where a tag, comment or autolink could start */
        return isalpha((unsigned char)p[1]) || (p[1] && strchr("/!?", p[1])) ? "&lt;" : "<";
    case '&': /* only where an entity could start */
        return isalnum((unsigned char)p[1]) || p[1] == '#' ? "&amp;" : "&";
    case '\n':
    case '\r':
    case '\t': return " ";
    default: return c < 0x20 || c == 0x7f ? "?" : NULL;
    }
}

void mt__sb_md(mt__sb *b, const char *s) { sb_escaped(b, s, md_escape); }

/* A word for a POSIX shell: as is when plain, else single-quoted. */
static void sb_shword(mt__sb *b, const char *s)
{
    const char *p;
    int plain = *s != '\0';
    for (p = s; *p; p++)
        if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./=:,+@%-", *p))
            plain = 0;
    if (plain) {
        mt__sb_puts(b, s);
        return;
    }
    mt__sb_putn(b, "'", 1);
    for (p = s; *p; p++) {
        if (*p == '\'')
            mt__sb_puts(b, "'\\''");
        else
            mt__sb_putn(b, p, 1);
    }
    mt__sb_putn(b, "'", 1);
}

/* ---- figures as text -------------------------------------------------- */

void mt__sb_num(mt__sb *b, const char *fmt, double x)
{
    if (isnan(x))
        mt__sb_puts(b, "n/a");
    else
        mt__sb_printf(b, fmt, x);
}

void mt__sb_pct(mt__sb *b, double frac)
{
    if (isnan(frac))
        mt__sb_puts(b, "n/a");
    else
        mt__sb_printf(b, "%+.2f%%", frac * 100);
}

void mt__sb_ci(mt__sb *b, int has, const double ci[2])
{
    if (!has) {
        mt__sb_puts(b, "n/a");
        return;
    }
    mt__sb_puts(b, "[");
    mt__sb_pct(b, ci[0]);
    mt__sb_puts(b, ", ");
    mt__sb_pct(b, ci[1]);
    mt__sb_puts(b, "]");
}

void mt__sb_p(mt__sb *b, double p) { mt__sb_num(b, "%.3g", p); }

void mt__sb_secs(mt__sb *b, double s)
{
    mt__sb_num(b, "%.4g", s);
    if (!isnan(s))
        mt__sb_puts(b, " s");
}


/* "value 2 of 3, selected" of a multi-arm screen's decision; "" otherwise. */
void mt__arm_words(const mt__decision *dc, char *buf, size_t n)
{
    buf[0] = '\0';
    if (isfinite(dc->arm_value) && isfinite(dc->arm_of))
        snprintf(buf, n, "%s %.0f of %.0f%s", strcmp(dc->phase ? dc->phase : "", "select")
                                                  ? "value"
                                                  : "follow-up of value",
                 dc->arm_value, dc->arm_of, dc->arm_selected ? ", selected" : "");
}

/* ---- shared wording --------------------------------------------------- */

static const char *label_words(const char *label)
{
    if (label && !strcmp(label, "benchmark-only"))
        return "at least one change alters what training computes (numerics or semantics); "
               "the figures hold for benchmarking, not as a drop-in training recipe";
    return "every change keeps the baseline's training math (loss tracked within the "
           "contract's tolerance); safe to adopt for training";
}

/* The label's words: the settings that make it benchmark-only when the
 * bundle names them (label_reasons), else label_words. */
void mt__sb_label_why(mt__sb *b, const char *label, const mt__strs *why,
                      void (*text)(mt__sb *, const char *))
{
    size_t i;
    if (!why->n) {
        text(b, label_words(label));
        return;
    }
    mt__sb_puts(b, "benchmark-only because ");
    for (i = 0; i < why->n; i++) {
        if (i)
            mt__sb_puts(b, "; ");
        text(b, why->v[i]);
    }
}

/* An arm's throughput: "TF (logged|computed)". */
void mt__sb_tflops(mt__sb *b, const mt__arm *a)
{
    mt__sb_num(b, "%.4g", a->tflops);
    if (a->tflops_source && !isnan(a->tflops))
        mt__sb_printf(b, " (%s)", a->tflops_source);
}

void mt__sb_window(mt__sb *b, const mt__validation *v)
{
    if (isnan(v->window[0]))
        mt__sb_puts(b, "the steady window");
    else
        mt__sb_printf(b, "steps %.0f-%.0f", v->window[0], v->window[1]);
}

static int is_flag(const char *a)
{
    return a[0] == '-' && (a[1] == '-' || (a[1] >= 'A' && a[1] <= 'Z') ||
                           (a[1] >= 'a' && a[1] <= 'z'));
}

/* The Megatron-LM arguments as shell text, one flag with its values per
 * line. */
void mt__sb_flags(mt__sb *b, const mt__model *m)
{
    size_t i;
    for (i = 0; i < m->megatron_args.n; i++) {
        const char *a = m->megatron_args.v[i];
        if (i)
            mt__sb_puts(b, is_flag(a) ? " \\\n" : " ");
        sb_shword(b, a);
    }
    mt__sb_puts(b, m->megatron_args.n ? "\n" : "# no arguments\n");
}

/* The environment as shell assignments, one a line. */
void mt__sb_env(mt__sb *b, const mt__model *m)
{
    size_t i;
    for (i = 0; i < m->env.n; i++) {
        mt__sb_puts(b, m->env.key[i]);
        mt__sb_putn(b, "=", 1);
        sb_shword(b, m->env.val[i]);
        mt__sb_putn(b, "\n", 1);
    }
    if (!m->env.n)
        mt__sb_puts(b, "# no variables\n");
}

/* "9.6 of 24", or "14 (no limit)". */
void mt__sb_used(mt__sb *b, const char *fmt, double used, double limit)
{
    mt__sb_num(b, fmt, used);
    if (isnan(limit)) {
        mt__sb_puts(b, " (no limit)");
        return;
    }
    mt__sb_puts(b, " of ");
    mt__sb_num(b, fmt, limit);
}

void mt__sb_samples(mt__sb *b, const mt__vec *s)
{
    size_t k;
    if (!s->n)
        mt__sb_puts(b, "none");
    for (k = 0; k < s->n; k++) {
        if (k)
            mt__sb_puts(b, ", ");
        mt__sb_num(b, "%.5g", s->v[k]);
    }
}

/* Whether the base fits, in words (plain text; the caller escapes it). */
void mt__fit_words(mt__sb *t, const mt__basefit *f)
{
    size_t i;
    mt__sb_puts(t, f->fits == 1 ? "yes" : f->fits == 0 ? "no" : "unknown (the base does not run)");
    if (isfinite(f->est))
        mt__sb_printf(t, ": estimate %.1f GB", f->est);
    else
        mt__sb_puts(t, ": no estimate");
    if (f->probe_outcome) {
        mt__sb_printf(t, ", probe %s", f->probe_outcome);
        if (isfinite(f->probe_peak))
            mt__sb_printf(t, " (hottest GPU %.1f GB)", f->probe_peak);
    } else {
        mt__sb_puts(t, ", not probed");
    }
    if (isfinite(f->usable))
        mt__sb_printf(t, ", of %.1f GB usable", f->usable);
    if (isfinite(f->uncertainty))
        mt__sb_printf(t, " (estimate uncertainty %.0f%%)", 100 * f->uncertainty);
    if (f->fits == 1)
        return;
    if (f->has_fitted && f->fitted.n) {
        mt__sb_puts(t, ". Not a usable base: the fit phase made it fit with ");
        for (i = 0; i < f->fitted.n; i++)
            mt__sb_printf(t, "%s%s=%s", i ? ", " : "",
                          f->fitted.v[i].knob ? f->fitted.v[i].knob : "",
                          f->fitted.v[i].to ? f->fitted.v[i].to : "");
        mt__sb_puts(t, ", and that config is the validation's control");
    } else if (f->fits == 0) {
        mt__sb_puts(t, ". Not a usable base, and no memory change of the space made it fit");
    }
}

/* A failed tune has no recipe: what stands in the recipe's place is the base
 * as given, and the report says why it is not recommended. */
void mt__no_recipe_words(mt__sb *t, const mt__model *m)
{
    const mt__basefit *f = &m->fit;
    mt__sb_puts(t, "No usable recipe. ");
    if (f->present && f->fits == 0)
        mt__sb_puts(t, "The base config does not fit in memory and no memory change of the space "
                   "made it fit");
    else if (f->present && f->fits < 0)
        mt__sb_puts(t, "The base config does not run");
    else if (f->present && f->fits != 1)
        mt__sb_puts(t, "The base config does not fit in memory");
    else
        mt__sb_puts(t, "The tune failed");
    mt__sb_printf(t,
              " (stopped because: %s). The config shown is the base as given, for "
              "reference only; it is not a recommendation.",
              m->stopped_because ? m->stopped_because : "unknown");
}

static int is_failed(const mt__model *m)
{
    return m->status && !strcmp(m->status, "failed");
}

/* The recipe is the base itself and the fit phase found that the base does
 * not fit (or does not run): whatever the status, there is nothing usable to
 * recommend. */
static int base_unusable(const mt__model *m)
{
    return m->fit.present && m->fit.fits != 1 && !m->change.n;
}

/* No recipe to recommend: a failed tune, or a recipe that is a base that
 * does not fit. */
int mt__no_recipe(const mt__model *m) { return is_failed(m) || base_unusable(m); }

int mt__has_samples(const mt__decision *dc) { return dc->control.s.n + dc->candidate.s.n > 0; }

/* The hottest GPU in words: "rank 3 at 71.10 GB (first stage): why". */
void mt__sb_hottest(mt__sb *b, const mt__mem *e, void (*text)(mt__sb *, const char *))
{
    mt__sb_printf(b, "rank %.0f at %.2f GB (", e->hot_rank, e->hot_peak);
    text(b, e->hot_role);
    mt__sb_puts(b, "): ");
    text(b, e->hot_why);
}

/* The window a wall came from: "steps 3-5 (6.21 s)", "one modelled step
 * (2.07 s)" (a wall without steps, as the model executor writes it). */
void mt__sb_wall_window(mt__sb *b, const mt__wall *w)
{
    if (w->has_steps) {
        if (w->steps[0] == w->steps[1])
            mt__sb_printf(b, "step %.0f", w->steps[0]);
        else
            mt__sb_printf(b, "steps %.0f-%.0f", w->steps[0], w->steps[1]);
        if (isfinite(w->window_s)) {
            mt__sb_puts(b, " (");
            mt__sb_secs(b, w->window_s);
            mt__sb_puts(b, ")");
        }
    } else if (isfinite(w->window_s)) {
        mt__sb_puts(b, "one modelled step (");
        mt__sb_secs(b, w->window_s);
        mt__sb_puts(b, ")");
    } else {
        mt__sb_puts(b, "n/a");
    }
}

/* ---- the sections' text both views build alike ------------------------- */

static void row(mt__sb *b, const mt__markup *k, const char *label)
{
    mt__sb_puts(b, k->row);
    mt__sb_puts(b, label);
    mt__sb_puts(b, k->head);
}

void mt__banner(mt__sb *b, const mt__markup *k, const mt__model *m)
{
    const mt__validation *v = &m->val;
    if (!v->present) {
        mt__sb_puts(b, k->banner_warn);
        mt__sb_puts(b, k->strong);
        mt__sb_puts(b, "No validation was run");
        mt__sb_puts(b, k->unstrong);
        mt__sb_puts(b, ", so no total gain is claimed (status: ");
        k->text(b, m->status);
        mt__sb_puts(b, ").");
        mt__sb_puts(b, k->line_end);
        mt__sb_puts(b, k->banner_end);
        return;
    }
    if (v->confirmed) {
        mt__sb_puts(b, k->banner_ok);
        mt__sb_puts(b, k->strong);
        mt__sb_puts(b, "Validated gain: ");
        mt__sb_pct(b, v->gain);
        mt__sb_puts(b, k->unstrong);
        mt__sb_puts(b, " shorter median step time, winner against baseline over ");
        mt__sb_window(b, v);
        mt__sb_puts(b, " (");
        mt__sb_secs(b, v->base.median);
        mt__sb_puts(b, k->arrow);
        mt__sb_secs(b, v->win.median);
        mt__sb_puts(b, "; CI ");
    } else {
        mt__sb_puts(b, k->banner_bad);
        mt__sb_puts(b, k->strong);
        mt__sb_puts(b, "Validation did not confirm the winner.");
        mt__sb_puts(b, k->unstrong);
        mt__sb_puts(b, " Measured over ");
        mt__sb_window(b, v);
        mt__sb_puts(b, ", the winner's gain was ");
        mt__sb_pct(b, v->gain);
        mt__sb_puts(b, " (CI ");
    }
    mt__sb_ci(b, v->has_ci, v->ci);
    mt__sb_puts(b, ", p = ");
    mt__sb_p(b, v->p);
    mt__sb_puts(b, v->confirmed ? "). This is the total gain, as the final validation measured it."
                                : "), which does not confirm an improvement; no gain is claimed.");
    mt__sb_puts(b, k->line_end);
    /* a validated gain names its recommendation only when it is benchmark-only */
    if (!v->confirmed ||
        (v->recommendation && !strncmp(v->recommendation, "benchmark only: ", 16))) {
        mt__sb_puts(b, k->rec);
        k->text(b, v->recommendation);
        mt__sb_puts(b, k->rec_end);
    }
    mt__sb_puts(b, k->banner_end);
}

void mt__total_gain(mt__sb *b, const mt__model *m, const char *validated)
{
    if (m->val.present && m->val.confirmed) {
        mt__sb_pct(b, m->val.gain);
        if (validated)
            mt__sb_puts(b, validated);
    } else if (m->val.present) {
        mt__sb_puts(b, "none claimed (validation measured ");
        mt__sb_pct(b, m->val.gain);
        mt__sb_puts(b, ", not confirmed)");
    } else
        mt__sb_puts(b, "none claimed (no validation)");
}

void mt__summary_rows(mt__sb *b, const mt__markup *k, const mt__model *m)
{
    const mt__natural *n = &m->val.nat;
    row(b, k, "GPU hours");
    mt__sb_used(b, "%.4g", m->gh_used, m->gh_limit);
    mt__sb_puts(b, k->row_end);
    row(b, k, "Runs");
    mt__sb_used(b, "%.0f", m->runs_used, m->runs_limit);
    mt__sb_puts(b, k->row_end);
    if (m->deadline) {
        row(b, k, "Deadline");
        k->text(b, m->deadline);
        mt__sb_puts(b, k->row_end);
    }
    row(b, k, "Stopped because");
    k->text(b, m->stopped_because);
    mt__sb_puts(b, k->row_end);
    row(b, k, "Baseline");
    if (m->base_reasons.n)
        mt__sb_label_why(b, m->base_label, &m->base_reasons, k->text);
    else
        k->text(b, m->base_label);
    mt__sb_puts(b, k->row_end);
    if (n->present && n->status && !strcmp(n->status, "measured")) {
        row(b, k, "Gain with natural routing");
        if (isfinite(n->gain)) {
            mt__sb_pct(b, n->gain);
            mt__sb_puts(b, " (");
            k->text(b, n->label);
            mt__sb_puts(b, ")");
        } else {
            mt__sb_puts(b, "none measured: ");
            k->text(b, n->reason ? n->reason : "no statistics");
        }
        mt__sb_puts(b, k->row_end);
    }
    if (m->ablation_complete == 0) {
        row(b, k, "Ablation");
        k->text(b, "winner not ablated: the budget left an accepted change without its "
                   "leave-one-out A/B");
        mt__sb_puts(b, k->row_end);
    }
    if (m->fit.present) {
        mt__sb t = {0};
        mt__fit_words(&t, &m->fit);
        row(b, k, "Base fits in memory");
        k->text(b, t.s ? t.s : "");
        mt__sb_puts(b, k->row_end);
        if (t.oom)
            b->oom = 1;
        mt__sb_clear(&t);
    }
}

void mt__map_table(mt__sb *b, const mt__markup *k, const mt__map *m, const char *kname,
                   const char *vname)
{
    size_t i;
    if (!m->n) {
        mt__sb_printf(b, "%s%s%s", k->para_note, k->no_map, k->para_end);
        return;
    }
    mt__sb_printf(b, k->map_table, kname, vname);
    for (i = 0; i < m->n; i++) {
        mt__sb_puts(b, k->crow);
        k->code(b, m->key[i]);
        mt__sb_puts(b, k->csep);
        k->code(b, m->val[i]);
        mt__sb_puts(b, k->crow_end);
    }
    mt__sb_puts(b, k->ctable_end);
}

void mt__para_note(mt__sb *b, const mt__markup *k, const char *s)
{
    mt__sb_printf(b, "%s%s%s", k->para_note, s, k->para_end);
}

void mt__byline(mt__sb *b, const mt__markup *k, const mt__model *m)
{
    k->text(b, m->created);
    mt__sb_puts(b, " by moetune ");
    k->text(b, m->version);
    mt__sb_puts(b, "; strategy ");
    k->text(b, m->strategy);
    mt__sb_puts(b, "; status ");
    k->text(b, m->status);
}

void mt__summary_head_rows(mt__sb *b, const mt__markup *k, const mt__model *m)
{
    row(b, k, "Fingerprint");
    k->code(b, m->fingerprint);
    mt__sb_puts(b, k->row_end);
    row(b, k, "Hardware");
    mt__sb_num(b, "%.0f", m->gpus);
    mt__sb_puts(b, k->times);
    k->text(b, m->gpu);
    mt__sb_puts(b, " (");
    mt__sb_num(b, "%.0f", m->gpus_per_node);
    mt__sb_puts(b, " per node, ");
    mt__sb_num(b, "%.4g", m->memory_gb);
    mt__sb_puts(b, " GB each)");
    mt__sb_puts(b, k->row_end);
    row(b, k, "Strategy");
    k->text(b, m->strategy);
    mt__sb_puts(b, k->row_end);
    row(b, k, "Status");
    k->text(b, m->status);
    mt__sb_puts(b, k->row_end);
}

void mt__arm_median(mt__sb *b, const mt__arm *a)
{
    if (!a->present) {
        mt__sb_puts(b, "not run");
        return;
    }
    mt__sb_secs(b, a->median);
    mt__sb_printf(b, " (n=%zu)", a->s.n);
}

void mt__decisions_note(mt__sb *b, const mt__markup *k)
{
    mt__sb_puts(b, k->ctable_end);
    mt__sb_puts(b, k->para_note);
    mt__sb_printf(b,
                  "gain: the candidate's median step time shorter than the control's, as a "
                  "fraction of the control's. #: the decisions in the order they were taken. "
                  "id: the decision's number in the store (%sdecision/ID%s in moetune.db; its "
                  "runs are replicates ID%s100 and up); profiled runs take numbers too, so ids "
                  "may skip.",
                  k->code_open, k->code_close, k->times_tight);
    mt__sb_puts(b, k->para_end);
}

void mt__wall_words(mt__sb *b, const mt__markup *k, const mt__wall *w)
{
    k->text(b, w->wall);
    mt__sb_puts(b, " (runner-up ");
    k->text(b, w->runner_up);
    mt__sb_puts(b, ", confidence ");
    mt__sb_num(b, "%.2f", w->confidence);
    mt__sb_puts(b, ")");
}

void mt__change_cell(mt__sb *b, const mt__markup *k, const mt__changes *c)
{
    size_t i;
    for (i = 0; i < c->n; i++) {
        if (i)
            mt__sb_puts(b, k->change_sep);
        k->code(b, c->v[i].knob);
        mt__sb_puts(b, ": ");
        k->code(b, c->v[i].from);
        mt__sb_puts(b, k->arrow);
        k->code(b, c->v[i].to);
    }
}

void mt__ablation_table(mt__sb *b, const mt__markup *k, const mt__model *m)
{
    size_t i;
    if (!m->nabl) {
        mt__sb_printf(b, "%sNo ablation: no accepted change to remove.%s", k->para_note,
                      k->para_end);
        return;
    }
    mt__sb_puts(b, k->abl_table);
    for (i = 0; i < m->nabl; i++) {
        const mt__ablation *a = &m->abl[i];
        mt__sb_puts(b, k->crow);
        k->code(b, a->knob);
        mt__sb_puts(b, k->csep);
        k->code(b, a->to);
        mt__sb_puts(b, k->csep_n);
        mt__sb_pct(b, a->gain_without);
        mt__sb_puts(b, k->csep_n);
        mt__sb_p(b, a->p);
        mt__sb_printf(b, "%s%s%s", a->kept ? k->kept_sep : k->dropped_sep,
                      a->kept ? "kept" : "dropped", k->csep);
        k->text(b, a->reason);
        mt__sb_puts(b, k->crow_end);
    }
    mt__sb_puts(b, k->ctable_end);
}

void mt__recipe_changes(mt__sb *b, const mt__markup *k, const mt__model *m)
{
    size_t i;
    if (m->val.present && !m->val.confirmed) {
        mt__sb_puts(b, k->para_bad);
        mt__sb_puts(b, "Validation did not confirm the winner; the recommendation is: ");
        k->text(b, m->val.recommendation);
        mt__sb_puts(b, k->para_end);
    }
    if (mt__no_recipe(m)) {
        mt__sb t = {0};
        mt__no_recipe_words(&t, m);
        mt__sb_puts(b, k->shout);
        k->text(b, t.s ? t.s : "");
        mt__sb_puts(b, k->shout_end);
        if (t.oom)
            b->oom = 1;
        mt__sb_clear(&t);
    }
    mt__sb_printf(b, "%sChanges from the baseline%s", k->h3, k->h3_end);
    if (!m->change.n) {
        mt__sb_puts(b, k->para_note);
        mt__sb_puts(b, mt__no_recipe(m)
                           ? "None: the config shown is the base, not a recommendation."
                           : "None: the baseline is the recommendation.");
        mt__sb_puts(b, k->para_end);
    } else {
        mt__sb_puts(b, k->changes_table);
        for (i = 0; i < m->change.n; i++) {
            mt__sb_puts(b, k->crow);
            k->code(b, m->change.v[i].knob);
            mt__sb_puts(b, k->csep);
            k->code(b, m->change.v[i].from);
            mt__sb_puts(b, k->csep);
            k->code(b, m->change.v[i].to);
            mt__sb_puts(b, k->crow_end);
        }
        mt__sb_puts(b, k->ctable_end);
    }
    if (!m->notes.n)
        return;
    mt__sb_printf(b, "%sBefore you train with it%s%s", k->h3, k->h3_end, k->list);
    for (i = 0; i < m->notes.n; i++) {
        mt__sb_puts(b, k->item);
        k->text(b, m->notes.v[i]);
        mt__sb_puts(b, k->item_end);
    }
    mt__sb_puts(b, k->list_end);
}

void mt__arm_rows(mt__sb *b, const mt__markup *k, const mt__arm *base, const mt__arm *win,
                  int samples)
{
    mt__sb_puts(b, k->arms_table);
    mt__sb_puts(b, k->row);
    mt__sb_puts(b, "median step time");
    mt__sb_puts(b, k->head_n);
    mt__sb_secs(b, base->median);
    mt__sb_puts(b, k->cell_n);
    mt__sb_secs(b, win->median);
    mt__sb_puts(b, k->row_end);
    if (samples)
        mt__sb_printf(b, "%ssamples%s%zu%s%zu%s", k->row, k->head_n, base->s.n, k->cell_n,
                      win->s.n, k->row_end);
    mt__sb_puts(b, k->row);
    mt__sb_puts(b, "TFLOP/s per GPU");
    mt__sb_puts(b, k->head_n);
    mt__sb_tflops(b, base);
    mt__sb_puts(b, k->cell_n);
    mt__sb_tflops(b, win);
    mt__sb_puts(b, k->row_end);
    mt__sb_puts(b, k->row);
    mt__sb_puts(b, "tokens/s per GPU");
    mt__sb_puts(b, k->head_n);
    mt__sb_num(b, "%.0f", base->tokens);
    mt__sb_puts(b, k->cell_n);
    mt__sb_num(b, "%.0f", win->tokens);
    mt__sb_puts(b, k->row_end);
}

/* A gain's CI, p and whether it is confirmed, then what it comes to (label:
 * words). */
static void verdict_rows(mt__sb *b, const mt__markup *k, int has_ci, const double ci[2], double p,
                         int confirmed, const char *label, const char *words)
{
    row(b, k, "CI");
    mt__sb_ci(b, has_ci, ci);
    mt__sb_puts(b, k->row_end);
    row(b, k, "p");
    mt__sb_p(b, p);
    mt__sb_puts(b, k->row_end);
    mt__sb_printf(b, "%sconfirmed%s%s%s", k->row, confirmed ? k->head_yes : k->head_no,
                  confirmed ? "yes" : "no", k->row_end);
    row(b, k, label);
    k->text(b, words);
    mt__sb_puts(b, k->row_end);
    mt__sb_puts(b, k->kv_end);
}

void mt__validation_runs(mt__sb *b, const mt__markup *k, const mt__validation *v)
{
    const mt__arm *arms2[2] = {&v->base, &v->win};
    int j;
    size_t i;
    if (!v->base.config_id && !v->win.config_id)
        return;
    mt__sb_puts(b, k->ids_row);
    for (j = 0; j < 2; j++) {
        mt__sb_puts(b, k->ids_cell);
        k->code(b, arms2[j]->config_id ? arms2[j]->config_id : "n/a");
        mt__sb_puts(b, k->runs_cell_end);
    }
    mt__sb_puts(b, k->dirs_row);
    for (j = 0; j < 2; j++) {
        mt__sb_puts(b, k->dirs_cell);
        for (i = 0; i < arms2[j]->log_dirs.n; i++) {
            if (i)
                mt__sb_puts(b, "<br>");
            k->code(b, arms2[j]->log_dirs.v[i]);
        }
        if (!arms2[j]->log_dirs.n)
            mt__sb_puts(b, k->no_dirs);
        mt__sb_puts(b, k->runs_cell_end);
    }
    mt__sb_puts(b, k->runs_end);
}

void mt__validation_rows(mt__sb *b, const mt__markup *k, const mt__validation *v)
{
    mt__sb_puts(b, k->arms_to_kv);
    row(b, k, "window");
    mt__sb_window(b, v);
    mt__sb_puts(b, " of ");
    mt__sb_num(b, "%.0f", v->steps);
    mt__sb_puts(b, " steps");
    mt__sb_puts(b, k->row_end);
    row(b, k, "gain");
    mt__sb_pct(b, v->gain);
    mt__sb_puts(b, k->row_end);
    verdict_rows(b, k, v->has_ci, v->ci, v->p, v->confirmed, "recommendation", v->recommendation);
}

void mt__natural_section(mt__sb *b, const mt__markup *k, const mt__natural *n)
{
    if (!n->present)
        return;
    mt__sb_puts(b, k->natural_head);
    if (strcmp(n->status ? n->status : "", "measured")) {
        mt__sb_puts(b, k->note);
        mt__sb_puts(b, "No natural-routing validation: ");
        k->text(b, n->reason);
        mt__sb_puts(b, ".");
        mt__sb_puts(b, k->note_end);
        return;
    }
    mt__arm_rows(b, k, &n->base, &n->win, 0);
    mt__sb_puts(b, k->arms_to_kv);
    mt__sb_puts(b, k->row);
    mt__sb_puts(b, "gain (");
    k->text(b, n->label);
    mt__sb_puts(b, ")");
    mt__sb_puts(b, k->head);
    mt__sb_pct(b, n->gain);
    mt__sb_puts(b, k->row_end);
    verdict_rows(b, k, n->has_ci, n->ci, n->p, n->confirmed, "result", n->reason);
}
