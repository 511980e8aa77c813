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

const char *const mt__share_names[NSHARES] = {
    "compute", "compute, comm hidden under it", "exposed comm", "idle", "bubble", "other"};

/* ---- growing text ----------------------------------------------------- */

void mt__sb_putn(sb *b, const char *s, size_t n)
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

void mt__sb_puts(sb *b, const char *s) { mt__sb_putn(b, s, strlen(s)); }

void mt__sb_printf(sb *b, const char *fmt, ...)
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

/* HTML text or attribute value; NULL (a JSON null) reads "n/a". */
void mt__sb_html(sb *b, const char *s)
{
    const char *p;
    if (!s) {
        mt__sb_puts(b, "n/a");
        return;
    }
    for (p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        switch (c) {
        case '&': mt__sb_puts(b, "&amp;"); break;
        case '<': mt__sb_puts(b, "&lt;"); break;
        case '>': mt__sb_puts(b, "&gt;"); break;
        case '"': mt__sb_puts(b, "&quot;"); break;
        case '\'': mt__sb_puts(b, "&#39;"); break;
        default:
            if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)
                mt__sb_puts(b, "&#xFFFD;");
            else
                mt__sb_putn(b, p, 1);
        }
    }
}

/* Markdown inline text, safe in a table cell: one line, no raw HTML, no
 * code span or strong emphasis started by the bundle's text.  '<' and '&' stay
 * readable ("p <= 0.05") where they cannot start a tag or an entity. */
void mt__sb_md(sb *b, const char *s)
{
    const char *p;
    if (!s) {
        mt__sb_puts(b, "n/a");
        return;
    }
    for (p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        switch (c) {
        case '|': mt__sb_puts(b, "\\|"); break;
        case '\\': mt__sb_puts(b, "\\\\"); break;
        case '`': mt__sb_puts(b, "\\`"); break;
        case '*': mt__sb_puts(b, "\\*"); break;
        case '<': /* only where a tag, comment or autolink could start */
            mt__sb_puts(b, isalpha((unsigned char)p[1]) || (p[1] && strchr("/!?", p[1])) ? "&lt;"
                                                                                 : "<");
            break;
        case '&': /* only where an entity could start */
            mt__sb_puts(b, isalnum((unsigned char)p[1]) || p[1] == '#' ? "&amp;" : "&");
            break;
        case '\n':
        case '\r':
        case '\t': mt__sb_putn(b, " ", 1); break;
        default:
            if (c < 0x20 || c == 0x7f)
                mt__sb_putn(b, "?", 1);
            else
                mt__sb_putn(b, p, 1);
        }
    }
}

/* A word for a POSIX shell: as is when plain, else single-quoted. */
static void sb_shword(sb *b, const char *s)
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

void mt__sb_num(sb *b, const char *fmt, double x)
{
    if (isnan(x))
        mt__sb_puts(b, "n/a");
    else
        mt__sb_printf(b, fmt, x);
}

void mt__sb_pct(sb *b, double frac)
{
    if (isnan(frac))
        mt__sb_puts(b, "n/a");
    else
        mt__sb_printf(b, "%+.2f%%", frac * 100);
}

void mt__sb_ci(sb *b, int has, const double ci[2])
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

void mt__sb_p(sb *b, double p) { mt__sb_num(b, "%.3g", p); }

void mt__sb_secs(sb *b, double s)
{
    mt__sb_num(b, "%.4g", s);
    if (!isnan(s))
        mt__sb_puts(b, " s");
}


/* "value 2 of 3, selected" of a multi-arm screen's decision; "" otherwise. */
void mt__arm_words(const decision *dc, char *buf, size_t n)
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
void mt__sb_label_why(sb *b, const char *label, const strs *why, int md)
{
    size_t i;
    if (!why->n) {
        (md ? mt__sb_md : mt__sb_html)(b, label_words(label));
        return;
    }
    mt__sb_puts(b, "benchmark-only because ");
    for (i = 0; i < why->n; i++) {
        if (i)
            mt__sb_puts(b, "; ");
        (md ? mt__sb_md : mt__sb_html)(b, why->v[i]);
    }
}

/* An arm's throughput: "TF (logged|computed)". */
void mt__sb_tflops(sb *b, const arm *a)
{
    mt__sb_num(b, "%.4g", a->tflops);
    if (a->tflops_source && !isnan(a->tflops))
        mt__sb_printf(b, " (%s)", a->tflops_source);
}

void mt__sb_window(sb *b, const validation *v)
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
void mt__sb_flags(sb *b, const model *m)
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
void mt__sb_env(sb *b, const model *m)
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
void mt__sb_used(sb *b, const char *fmt, double used, double limit)
{
    mt__sb_num(b, fmt, used);
    if (isnan(limit)) {
        mt__sb_puts(b, " (no limit)");
        return;
    }
    mt__sb_puts(b, " of ");
    mt__sb_num(b, fmt, limit);
}

void mt__sb_samples(sb *b, const vec *s)
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
void mt__fit_words(sb *t, const basefit *f)
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
            mt__sb_printf(t, "%s%s=%s", i ? ", " : "", f->fitted.v[i].knob ? f->fitted.v[i].knob : "",
                      f->fitted.v[i].to ? f->fitted.v[i].to : "");
        mt__sb_puts(t, ", and that config is the validation's control");
    } else if (f->fits == 0) {
        mt__sb_puts(t, ". Not a usable base, and no memory change of the space made it fit");
    }
}

/* A failed tune has no recipe: what stands in the recipe's place is the base
 * as given, and the report says why it is not recommended. */
void mt__no_recipe_words(sb *t, const model *m)
{
    const basefit *f = &m->fit;
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

static int is_failed(const model *m)
{
    return m->status && !strcmp(m->status, "failed");
}

/* The recipe is the base itself and the fit phase found that the base does
 * not fit (or does not run): whatever the status, there is nothing usable to
 * recommend. */
static int base_unusable(const model *m)
{
    return m->fit.present && m->fit.fits != 1 && !m->change.n;
}

/* No recipe to recommend: a failed tune, or a recipe that is a base that
 * does not fit. */
int mt__no_recipe(const model *m) { return is_failed(m) || base_unusable(m); }

int mt__has_samples(const decision *dc) { return dc->control.s.n + dc->candidate.s.n > 0; }

/* The hottest GPU in words: "rank 3 at 71.10 GB (first stage): why". */
void mt__sb_hottest(sb *b, const mem *e, int html)
{
    mt__sb_printf(b, "rank %.0f at %.2f GB (", e->hot_rank, e->hot_peak);
    if (html)
        mt__sb_html(b, e->hot_role);
    else
        mt__sb_md(b, e->hot_role);
    mt__sb_puts(b, "): ");
    if (html)
        mt__sb_html(b, e->hot_why);
    else
        mt__sb_md(b, e->hot_why);
}


/* The window a wall came from: "steps 3-5 (6.21 s)", "one modelled step
 * (2.07 s)" (a wall without steps, as the model executor writes it). */
void mt__sb_wall_window(sb *b, const wall *w)
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


