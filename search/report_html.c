/*
 * report_html.c - report.html: one self-contained page (inline CSS, inline
 * SVG plots drawn here, a few lines of inline script that check the page
 * rendered; nothing is fetched from anywhere), from a model (report_int.h).
 * Every string from the bundle is escaped for HTML text or attributes.
 */
#include "report_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const share_colors[MT__NSHARES] = {"#4a78b5", "#7fa7d9", "#c0392b",
                                                  "#9aa5b1", "#8e6bbf", "#d0d7de"};

static void h_code(mt__sb *b, const char *s);

const mt__markup mt__html_markup = {
    .text = mt__sb_html, .code = h_code, MT__MARKUP(MT__MARKUP_HTML)};

/* ---- plots (inline SVG) ----------------------------------------------- */

typedef struct axis {
    double d0, d1, r0, r1;
} axis;

static double clampc(double x)
{
    if (!(x > -1e6))
        return -1e6;
    return x > 1e6 ? 1e6 : x;
}

static double ax(const axis *a, double v)
{
    return clampc(a->r0 + (v - a->d0) / (a->d1 - a->d0) * (a->r1 - a->r0));
}

/* Widens [lo, hi] by frac each side; a single value or an empty range gets
 * a span around it, so no scale ever divides by zero. */
static void domain_pad(double *lo, double *hi, double frac)
{
    double span, d;
    if (!isfinite(*lo) || !isfinite(*hi) || *hi < *lo) {
        *lo = 0;
        *hi = 1;
        return;
    }
    span = *hi - *lo;
    if (!isfinite(span)) {
        *lo = -1e300;
        *hi = 1e300;
        return;
    }
    if (!(span > 1e-12 * fmax(fabs(*lo), fabs(*hi))) || span == 0) {
        d = fabs(*lo) * 0.05;
        if (!(d > 0))
            d = 1;
        *lo -= d;
        *hi += d;
        return;
    }
    *lo -= span * frac;
    *hi += span * frac;
}

static int nice_ticks(double lo, double hi, int want, double *out, int max)
{
    double span = hi - lo, raw, mag, norm, step, t;
    int n = 0;
    if (!(span > 0) || !isfinite(span) || want < 1)
        return 0;
    raw = span / want;
    mag = pow(10, floor(log10(raw)));
    norm = raw / mag;
    step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
    if (!(step > 0) || !isfinite(step))
        return 0;
    for (t = ceil(lo / step) * step; t <= hi + step * 1e-9 && n < max; t += step)
        out[n++] = fabs(t) < step * 1e-9 ? 0 : t;
    return n;
}

static void svg_open(mt__sb *b, const char *plot, int w, int h, const char *label)
{
    mt__sb_printf(b,
              "<svg class=\"plot\" data-plot=\"%s\" viewBox=\"0 0 %d %d\" width=\"%d\" "
              "height=\"%d\" role=\"img\" aria-label=\"",
              plot, w, h, w, h);
    mt__sb_html(b, label);
    mt__sb_puts(b, "\">");
}

static int dbl_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Linear-interpolated quantile of sorted x[0..n). */
static double quantile(const double *x, size_t n, double q)
{
    double pos = q * (double)(n - 1), f = floor(pos);
    size_t i = (size_t)f;
    if (i + 1 >= n)
        return x[n - 1];
    return x[i] + (pos - f) * (x[i + 1] - x[i]);
}

typedef struct arm_view {
    const char *label;
    const mt__vec *s;
    double median;
    const char *color;
} arm_view;

/* A strip plot: one row per arm, every sample a dot (jittered), the
 * interquartile box and range behind, the median a black bar. */
static void svg_strip(mt__sb *b, const char *plot, const char *label, const arm_view *arms,
                      int narms, int W)
{
    const int L = 112, R = 14, T = 8, ROW = 40;
    int H = T + narms * ROW + 34, i, nt, base = T + narms * ROW;
    double lo = INFINITY, hi = -INFINITY, ticks[16];
    size_t k;
    axis x;
    for (i = 0; i < narms; i++) {
        for (k = 0; k < arms[i].s->n; k++)
            if (isfinite(arms[i].s->v[k])) {
                lo = fmin(lo, arms[i].s->v[k]);
                hi = fmax(hi, arms[i].s->v[k]);
            }
        if (isfinite(arms[i].median)) {
            lo = fmin(lo, arms[i].median);
            hi = fmax(hi, arms[i].median);
        }
    }
    domain_pad(&lo, &hi, 0.08);
    x = (axis){lo, hi, L, W - R};
    svg_open(b, plot, W, H, label);
    nt = nice_ticks(lo, hi, 5, ticks, 16);
    for (i = 0; i < nt; i++) {
        double tx = ax(&x, ticks[i]);
        mt__sb_printf(b,
                  "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#eaeef2\"/>"
                  "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>",
                  tx, T, tx, base, tx, base + 14, ticks[i]);
    }
    mt__sb_printf(b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#8c959f\"/>", L, base,
              W - R, base);
    mt__sb_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">step time (s)</text>", W - R,
              base + 28);
    for (i = 0; i < narms; i++) {
        const mt__vec *s = arms[i].s;
        int y = T + ROW * i + ROW / 2;
        size_t n = 0;
        double *sorted = malloc((s->n ? s->n : 1) * sizeof(double));
        mt__sb_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", L - 8, y + 4);
        mt__sb_html(b, arms[i].label);
        mt__sb_printf(b, " (n=%zu)</text>", s->n);
        for (k = 0; sorted && k < s->n; k++)
            if (isfinite(s->v[k]))
                sorted[n++] = s->v[k];
        if (sorted && n) {
            qsort(sorted, n, sizeof *sorted, dbl_cmp);
            mt__sb_printf(b,
                      "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\" "
                      "stroke-opacity=\"0.6\"/>",
                      ax(&x, sorted[0]), y, ax(&x, sorted[n - 1]), y, arms[i].color);
            if (n >= 2) {
                double q1 = ax(&x, quantile(sorted, n, 0.25));
                double q3 = ax(&x, quantile(sorted, n, 0.75));
                mt__sb_printf(b,
                          "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"22\" fill=\"%s\" "
                          "fill-opacity=\"0.12\" stroke=\"%s\" stroke-opacity=\"0.5\"/>",
                          q1, y - 11, fmax(q3 - q1, 0.5), arms[i].color, arms[i].color);
            }
        }
        free(sorted);
        for (k = 0; k < s->n; k++) {
            double jit = fmod((double)k * 0.6180339887, 1.0) - 0.5;
            if (!isfinite(s->v[k]))
                continue;
            mt__sb_printf(b,
                      "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\" fill-opacity=\"0.75\"/>",
                      ax(&x, s->v[k]), y + jit * 16, arms[i].color);
        }
        if (isfinite(arms[i].median)) {
            double mx = ax(&x, arms[i].median);
            mt__sb_printf(b,
                      "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#1f2328\" "
                      "stroke-width=\"2.5\"><title>median %.5g s</title></line>",
                      mx, y - 15, mx, y + 15, arms[i].median);
        }
    }
    mt__sb_puts(b, "</svg>");
}

static const char *phase_color(const char *phase)
{
    static const char *const names[] = {"fit", "scale", "profile", "retune", "ablate", "validate"};
    static const char *const colors[] = {"#8250df", "#0b7285", "#57606a",
                                         "#1f6feb", "#bf8700", "#1e7b34"};
    size_t i;
    for (i = 0; phase && i < sizeof names / sizeof *names; i++)
        if (!strcmp(phase, names[i]))
            return colors[i];
    return "#6e7781";
}

/* Throughput over the tune: each run's TFLOP/s per GPU (failed runs as
 * crosses on the axis) and the accepted best's (the incumbent's) as a step
 * line. */
static void svg_throughput(mt__sb *b, const mt__model *m)
{
    const int W = 900, H = 320, L = 62, R = 20, T = 30, B = 44;
    double x0 = INFINITY, x1 = -INFINITY, ymax = 0, ticks[16];
    const char *seen[16];
    int nseen = 0, nt, i, pen = 0, legend_x;
    size_t k;
    axis x, y;
    for (k = 0; k < m->ntl; k++) {
        x0 = fmin(x0, m->tl[k].run);
        x1 = fmax(x1, m->tl[k].run);
        if (isfinite(m->tl[k].tflops))
            ymax = fmax(ymax, m->tl[k].tflops);
        if (isfinite(m->tl[k].best))
            ymax = fmax(ymax, m->tl[k].best);
    }
    domain_pad(&x0, &x1, 0.02);
    if (!(ymax > 0) || !isfinite(ymax))
        ymax = 1;
    x = (axis){x0, x1, L, W - R};
    y = (axis){0, ymax * 1.1, H - B, T};
    svg_open(b, "throughput", W, H, "throughput per run over the tune");
    nt = nice_ticks(0, ymax * 1.1, 5, ticks, 16);
    for (i = 0; i < nt; i++) {
        double ty = ax(&y, ticks[i]);
        mt__sb_printf(b,
                  "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#eaeef2\"/>"
                  "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>",
                  L, ty, W - R, ty, L - 6, ty + 4, ticks[i]);
    }
    nt = nice_ticks(x0, x1, 10, ticks, 16);
    for (i = 0; i < nt; i++) {
        double tx = ax(&x, ticks[i]);
        if (ticks[i] != floor(ticks[i]))
            continue;
        mt__sb_printf(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>", tx,
                  H - B + 16, ticks[i]);
    }
    mt__sb_printf(b,
              "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#8c959f\"/>"
              "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#8c959f\"/>",
              L, H - B, W - R, H - B, L, T, L, H - B);
    mt__sb_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">run</text>", W - R, H - 8);
    mt__sb_printf(b,
              "<text x=\"14\" y=\"%d\" transform=\"rotate(-90 14 %d)\" "
              "text-anchor=\"middle\">TFLOP/s per GPU</text>",
              (T + H - B) / 2, (T + H - B) / 2);
    /* the accepted best: a step line, broken where it is null */
    mt__sb_puts(b, "<path fill=\"none\" stroke=\"#1e7b34\" stroke-width=\"2\" d=\"");
    for (k = 0; k < m->ntl; k++) {
        const mt__tpoint *t = &m->tl[k];
        if (!isfinite(t->best)) {
            pen = 0;
            continue;
        }
        if (!pen)
            mt__sb_printf(b, "M%.1f %.1f", ax(&x, t->run), ax(&y, t->best));
        else
            mt__sb_printf(b, "H%.1fV%.1f", ax(&x, t->run), ax(&y, t->best));
        pen = 1;
    }
    if (!m->ntl)
        mt__sb_printf(b, "M%d %d", L, H - B);
    mt__sb_puts(b, "\"/>");
    for (k = 0; k < m->ntl; k++) {
        const mt__tpoint *t = &m->tl[k];
        double px = ax(&x, t->run);
        int j;
        for (j = 0; j < nseen && strcmp(seen[j], t->phase ? t->phase : ""); j++)
            ;
        if (j == nseen && nseen < 16)
            seen[nseen++] = t->phase ? t->phase : "";
        if (isfinite(t->tflops))
            mt__sb_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>", px,
                      ax(&y, t->tflops), phase_color(t->phase));
        else
            mt__sb_printf(b,
                      "<path d=\"M%.1f %.1fl6 6m0 -6l-6 6\" stroke=\"#b3261e\" "
                      "stroke-width=\"1.5\"/>",
                      px - 3, (double)(H - B - 9));
    }
    /* legend */
    legend_x = L + 8;
    mt__sb_printf(b,
              "<line x1=\"%d\" y1=\"14\" x2=\"%d\" y2=\"14\" stroke=\"#1e7b34\" "
              "stroke-width=\"2\"/><text x=\"%d\" y=\"18\">incumbent, median of its runs so "
              "far</text>",
              legend_x, legend_x + 18, legend_x + 22);
    legend_x += 250;
    for (i = 0; i < nseen && legend_x < W - 120; i++) {
        mt__sb_printf(b,
                      "<circle cx=\"%d\" cy=\"14\" r=\"3.5\" fill=\"%s\"/><text x=\"%d\" y=\"18\">",
                      legend_x, phase_color(seen[i]), legend_x + 8);
        mt__sb_html(b, seen[i]);
        mt__sb_puts(b, "</text>");
        legend_x += 16 + 7 * (int)(strlen(seen[i]) < 20 ? strlen(seen[i]) : 20);
    }
    mt__sb_printf(b,
              "<path d=\"M%d 11l6 6m0 -6l-6 6\" stroke=\"#b3261e\" stroke-width=\"1.5\"/>"
              "<text x=\"%d\" y=\"18\">failed run</text>",
              legend_x, legend_x + 10);
    mt__sb_puts(b, "</svg>");
}

/* Per-GPU peak memory as bars against the capacity and the headroom limit:
 * every GPU, or (roles) the hottest GPU of each role, labelled by rank. */
static void svg_memory(mt__sb *b, const mt__mem *e, const char *plot, int roles)
{
    const int H = 260, L = 50, R = 150, T = 16, B = 36;
    size_t n = roles ? e->nroles : e->per_gpu.n, k, every;
    int W = 70 + (int)(n < 40 ? n : 40) * 26 + R;
    double ymax = fmax(e->capacity, 0), limit = e->capacity - e->headroom, band, ticks[16];
    axis y;
    int i, nt;
    char label[160];
    if (W < 420)
        W = 420;
    if (W > 1000)
        W = 1000;
    for (k = 0; k < n; k++) {
        double v = roles ? e->roles[k].peak : e->per_gpu.v[k];
        if (isfinite(v))
            ymax = fmax(ymax, v);
    }
    if (!(ymax > 0) || !isfinite(ymax))
        ymax = 1;
    ymax *= 1.08;
    y = (axis){0, ymax, H - B, T};
    band = (double)(W - L - R) / (double)(n ? n : 1);
    snprintf(label, sizeof label, "%s (%s)",
             roles ? "peak memory of the hottest GPU of each role" : "per-GPU peak memory",
             e->name ? e->name : "");
    svg_open(b, plot, W, H, label);
    nt = nice_ticks(0, ymax, 5, ticks, 16);
    for (i = 0; i < nt; i++) {
        double ty = ax(&y, ticks[i]);
        mt__sb_printf(b,
                  "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#eaeef2\"/>"
                  "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>",
                  L, ty, W - R, ty, L - 6, ty + 4, ticks[i]);
    }
    mt__sb_printf(b,
              "<text x=\"12\" y=\"%d\" transform=\"rotate(-90 12 %d)\" "
              "text-anchor=\"middle\">GB</text>",
              (T + H - B) / 2, (T + H - B) / 2);
    every = n > 32 ? (n + 15) / 16 : 1;
    for (k = 0; k < n; k++) {
        double v = roles ? e->roles[k].peak : e->per_gpu.v[k];
        double bx = L + band * (double)k + band * 0.15;
        size_t gpu = roles ? (size_t)e->roles[k].rank : k;
        if (k % every == 0)
            mt__sb_printf(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%zu</text>",
                      L + band * ((double)k + 0.5), H - B + 14, gpu);
        if (roles) {
            mt__sb_printf(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">",
                      L + band * ((double)k + 0.5), H - B + 26);
            mt__sb_html(b, e->roles[k].role);
            mt__sb_puts(b, "</text>");
        }
        if (!isfinite(v)) {
            mt__sb_printf(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">?</text>",
                      L + band * ((double)k + 0.5), H - B - 4);
            continue;
        }
        mt__sb_printf(b,
                  "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\">"
                  "<title>GPU %zu: %.2f GB</title></rect>",
                  bx, ax(&y, fmax(v, 0)), band * 0.7, (H - B) - ax(&y, fmax(v, 0)),
                  v > limit ? "#c0392b" : "#4a78b5", gpu, v);
    }
    mt__sb_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">GPU</text>", W - R,
              H - (roles ? 0 : 6));
    mt__sb_printf(b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#8c959f\"/>", L, H - B,
              W - R, H - B);
    mt__sb_printf(b,
              "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#b3261e\" "
              "stroke-width=\"1.5\" stroke-dasharray=\"6 3\"/>"
              "<text x=\"%d\" y=\"%.1f\">capacity %.4g GB</text>",
              L, ax(&y, e->capacity), W - R, ax(&y, e->capacity), W - R + 6,
              ax(&y, e->capacity) + 4, e->capacity);
    mt__sb_printf(b,
              "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#bf8700\" "
              "stroke-width=\"1.5\" stroke-dasharray=\"3 3\"/>"
              "<text x=\"%d\" y=\"%.1f\">limit %.4g GB</text>",
              L, ax(&y, limit), W - R, ax(&y, limit), W - R + 6, ax(&y, limit) + 14, limit);
    mt__sb_puts(b, "</svg>");
}

/* Wall breakdown before and after as 100% bars: the shares partition each
 * profiled window (read_wall refused any that do not add up to 100%). */
static void svg_walls(mt__sb *b, const mt__wall *before, const mt__wall *after)
{
    const mt__wall *rows[2] = {before, after};
    const char *names[2] = {"before", "after"};
    const int W = 900, L = 70, R = 20, T = 10, ROW = 44;
    int nrows = 0, H, i, j, nt, base, lx;
    double xmax = 1, ticks[16];
    axis x;
    for (i = 0; i < 2; i++)
        nrows += rows[i]->present;
    H = T + (nrows ? nrows : 1) * ROW + 56;
    base = T + (nrows ? nrows : 1) * ROW;
    x = (axis){0, xmax, L, W - R};
    svg_open(b, "walls", W, H, "wall breakdown before and after");
    nt = nice_ticks(0, xmax, 5, ticks, 16);
    for (i = 0; i < nt; i++) {
        double tx = ax(&x, ticks[i]);
        mt__sb_printf(b,
                  "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#eaeef2\"/>"
                  "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g%%</text>",
                  tx, T, tx, base, tx, base + 14, ticks[i] * 100);
    }
    mt__sb_printf(b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#8c959f\"/>", L, base,
              W - R, base);
    for (i = 0, nrows = 0; i < 2; i++) {
        int y;
        double at = 0;
        if (!rows[i]->present)
            continue;
        y = T + ROW * nrows++ + 8;
        mt__sb_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>", L - 8, y + 18,
                  names[i]);
        for (j = 0; j < MT__NSHARES; j++) {
            double s = fmax(rows[i]->share[j], 0), x0 = ax(&x, at), x1 = ax(&x, at + s);
            at += s;
            if (!(s > 0))
                continue;
            mt__sb_printf(b,
                      "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"28\" fill=\"%s\">"
                      "<title>%s %.1f%%</title></rect>",
                      x0, y, x1 - x0, share_colors[j], mt__share_names[j], s * 100);
            if (x1 - x0 > 38)
                mt__sb_printf(b,
                          "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" "
                          "style=\"fill:#fff\">%.0f%%</text>",
                          (x0 + x1) / 2, y + 18, s * 100);
        }
    }
    for (j = 0, lx = L; j < MT__NSHARES; j++) {
        mt__sb_printf(b,
                  "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                  "<text x=\"%d\" y=\"%d\">%s</text>",
                  lx, base + 28, share_colors[j], lx + 16, base + 38, mt__share_names[j]);
        lx += 30 + 6 * (int)strlen(mt__share_names[j]);
    }
    mt__sb_puts(b, "</svg>");
}

/* ---- report.html ------------------------------------------------------ */

static const char html_css[] =
    ":root{--ok:#1e7b34;--bad:#b3261e;--warn:#9a6700;--ink:#1f2328;--mute:#59636e;"
    "--line:#d0d7de}\n"
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:var(--ink);"
    "margin:0 auto;max-width:1180px;padding:16px 24px;background:#fff}\n"
    "h1{font-size:22px;margin:8px 0 2px}h2{font-size:18px;border-bottom:1px solid var(--line);"
    "padding-bottom:4px;margin-top:30px}h3{font-size:15px;margin:16px 0 6px}\n"
    ".sub{color:var(--mute);margin:0 0 8px}nav a{margin-right:12px}\n"
    ".arm{color:var(--mute);font-size:12px}\n"
    "table{border-collapse:collapse;margin:6px 0}th,td{border:1px solid var(--line);"
    "padding:3px 7px;text-align:left;vertical-align:top}th{background:#f6f8fa}\n"
    "td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\n"
    "code,pre{font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}\n"
    "pre{background:#f6f8fa;border:1px solid var(--line);padding:8px 10px;overflow-x:auto}\n"
    ".banner{border-radius:6px;padding:10px 14px;margin:10px 0;border:1px solid}\n"
    ".banner.ok{background:#e9f6ec;border-color:#9ed3aa}.banner.bad{background:#fdecea;"
    "border-color:#f1a9a3}.banner.warn{background:#fff6e0;border-color:#e9cc7a}\n"
    ".rec{font-size:16px;font-weight:600}\n"
    ".v-accepted{color:var(--ok);font-weight:600}.v-rejected{color:var(--mute)}"
    ".v-dropped{color:var(--warn)}.v-failed{color:var(--bad);font-weight:600}"
    ".v-kept{color:#0b5cad;font-weight:600}\n"
    ".badge{display:inline-block;border-radius:10px;padding:1px 9px;font-weight:600}"
    ".badge.te{background:#e9f6ec;color:var(--ok)}.badge.bo{background:#fff6e0;"
    "color:var(--warn)}\n"
    ".grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(450px,1fr));gap:10px}\n"
    "figure{margin:6px 0;border:1px solid var(--line);border-radius:6px;padding:6px 8px}"
    "figcaption{font-size:13px;margin-bottom:4px}\n"
    "svg.plot{display:block;max-width:100%;height:auto}"
    "svg.plot text{font:11px system-ui,sans-serif;fill:#424a53}\n"
    ".diff .add{color:var(--ok)}.diff .del{color:var(--bad)}\n"
    ".mesh{font-size:17px;margin:6px 0}.mesh b{display:inline-block;width:100px}\n"
    "details summary{cursor:pointer;color:var(--mute)}.note{color:var(--mute)}\n"
    ".wide{overflow-x:auto}table.dec{font-size:13px;width:100%;table-layout:fixed}"
    "table.dec td,table.dec th{overflow-wrap:break-word}"
    "table.dec td.n{white-space:normal}table.dec code{white-space:pre-wrap;"
    "overflow-wrap:anywhere}tr.more td{overflow-wrap:anywhere}"
    "col.c-no{width:2.6em}col.c-id{width:3em}col.c-phase{width:4.6em}col.c-var{width:10%}"
    "col.c-wall{width:8.6em}col.c-verdict{width:6.2em}col.c-med{width:6.6em}"
    "col.c-gain{width:5em}col.c-ci{width:8.6em}col.c-p{width:5em}"
    "tr.more td{color:#424a53;border-top:none;padding-bottom:6px}"
    "tr.more b{color:var(--mute);font-weight:600}\n";

/* Checks on load that every section and plot rendered; a headless browser's
 * DOM dump then carries the verdict on <body>. */
static const char html_check[] =
    "(function(){var ids=['summary','recipe','meshes','decisions','distributions',"
    "'throughput','memory','walls','ablation','validation'],miss=[];\n"
    "ids.forEach(function(id){if(!document.getElementById(id))miss.push(id);});\n"
    "document.querySelectorAll('svg.plot').forEach(function(s){if(!s.querySelector("
    "'rect,circle,line,path,polyline,polygon,ellipse'))miss.push('plot:'+"
    "s.getAttribute('data-plot'));});\n"
    "document.querySelectorAll('table.dec').forEach(function(t){var p=t.parentNode;"
    "if(t.scrollWidth>p.clientWidth+1||p.scrollWidth>p.clientWidth+1)"
    "miss.push('decisions-overflow');});\n"
    "document.body.dataset.check=miss.length?'missing:'+miss.join(','):'ok';})();\n";

static void h_kv(mt__sb *b, const char *key, const char *val)
{
    mt__sb_printf(b, "<tr><th>%s</th><td>", key);
    mt__sb_html(b, val);
    mt__sb_puts(b, "</td></tr>\n");
}

static void h_code(mt__sb *b, const char *s)
{
    mt__sb_puts(b, "<code>");
    mt__sb_html(b, s);
    mt__sb_puts(b, "</code>");
}

static void h_summary(mt__sb *b, const mt__model *m)
{
    mt__sb_puts(b, "<section id=\"summary\"><h2>Summary</h2>\n");
    mt__banner(b, &mt__html_markup, m);
    mt__sb_puts(b, "<table>\n");
    h_kv(b, "Contract", m->contract_name);
    h_kv(b, "Contract file", m->contract_path);
    mt__summary_head_rows(b, &mt__html_markup, m);
    mt__sb_printf(b, "<tr><th>Label</th><td><span class=\"badge %s\">",
              m->label && !strcmp(m->label, "benchmark-only") ? "bo" : "te");
    mt__sb_html(b, m->label);
    mt__sb_puts(b, "</span></td></tr>\n<tr><th>");
    mt__sb_puts(b, m->val.present && m->val.confirmed ? "Total gain (validated)"
                                                  : "Total gain");
    mt__sb_puts(b, "</th><td>");
    mt__total_gain(b, m, NULL);
    mt__sb_puts(b, "</td></tr>\n");
    mt__summary_rows(b, &mt__html_markup, m);
    mt__sb_puts(b, "</table>\n<h3>Stack</h3>\n");
    mt__map_table(b, &mt__html_markup, &m->stack, "component", "version");
    mt__sb_puts(b, "</section>\n");
}

static void h_recipe(mt__sb *b, const mt__model *m)
{
    size_t i;
    mt__sb_puts(b, "<section id=\"recipe\"><h2>Recipe</h2>\n<p>Label: ");
    mt__sb_printf(b, "<span class=\"badge %s\">",
              m->label && !strcmp(m->label, "benchmark-only") ? "bo" : "te");
    mt__sb_html(b, m->label);
    mt__sb_puts(b, "</span> &mdash; ");
    mt__sb_label_why(b, m->label, &m->reasons, mt__sb_html);
    mt__sb_puts(b, ".</p>\n");
    mt__recipe_changes(b, &mt__html_markup, m);
    {
        mt__sb cmd = {0};
        mt__sb_flags(&cmd, m);
        mt__sb_puts(b, "<h3>Megatron-LM flags</h3>\n<pre class=\"cmd\">");
        mt__sb_html(b, cmd.s ? cmd.s : "");
        cmd.n = 0;
        mt__sb_env(&cmd, m);
        mt__sb_puts(b, "</pre>\n<h3>Environment</h3>\n<pre class=\"cmd\">");
        mt__sb_html(b, cmd.s ? cmd.s : "");
        mt__sb_puts(b, "</pre>\n");
        if (cmd.oom)
            b->oom = 1;
        mt__sb_clear(&cmd);
    }
    mt__sb_puts(b, "<h3>Megatron-Bridge overrides</h3>\n<pre>");
    for (i = 0; i < m->bridge_overrides.n; i++) {
        mt__sb_html(b, m->bridge_overrides.v[i]);
        mt__sb_puts(b, "\n");
    }
    if (!m->bridge_overrides.n)
        mt__sb_puts(b, "(none)");
    mt__sb_puts(b, "</pre>\n<h3>Command diff against the baseline</h3>\n<pre class=\"diff\">");
    for (i = 0; i < m->command_diff.n; i++) {
        const char *l = m->command_diff.v[i];
        mt__sb_printf(b, "<span class=\"%s\">", l[0] == '+' ? "add" : l[0] == '-' ? "del" : "ctx");
        mt__sb_html(b, l);
        mt__sb_puts(b, "</span>\n");
    }
    if (!m->command_diff.n)
        mt__sb_puts(b, "(no difference)");
    mt__sb_printf(b, "</pre>\n<details><summary>Full recommended config (%zu knobs)</summary>\n",
              m->config.n);
    mt__sb_puts(b, "<table><tr><th>knob</th><th>value</th><th>baseline</th></tr>\n");
    for (i = 0; i < m->config.n; i++) {
        const char *bv = mt__map_get(&m->base_config, m->config.key[i]);
        mt__sb_puts(b, "<tr><td>");
        h_code(b, m->config.key[i]);
        mt__sb_puts(b, "</td><td>");
        h_code(b, m->config.val[i]);
        mt__sb_puts(b, "</td><td>");
        if (!bv)
            mt__sb_puts(b, "(not set)");
        else if (strcmp(bv, m->config.val[i]))
            h_code(b, bv);
        else
            mt__sb_puts(b, "same");
        mt__sb_puts(b, "</td></tr>\n");
    }
    mt__sb_puts(b, "</table></details>\n</section>\n");
}

static void h_meshes(mt__sb *b, const mt__model *m)
{
    mt__sb_puts(b, "<section id=\"meshes\"><h2>Parallel folding meshes</h2>\n"
               "<div class=\"mesh\"><b>Attention</b>");
    h_code(b, m->mesh_attention);
    mt__sb_puts(b, "</div>\n<div class=\"mesh\"><b>MoE</b>");
    h_code(b, m->mesh_moe);
    mt__sb_puts(b, "</div>\n<p class=\"note\">Attention: TP &times; CP &times; DP &times; PP; "
               "MoE: ETP &times; EP &times; EDP &times; PP.</p>\n</section>\n");
}

static void h_arm_cell(mt__sb *b, const mt__arm *a)
{
    mt__sb_puts(b, "<td class=\"n\">");
    mt__arm_median(b, a);
    mt__sb_puts(b, "</td>");
}

static void h_decisions(mt__sb *b, const mt__model *m)
{
    size_t i, j;
    mt__sb_puts(b, "<section id=\"decisions\"><h2>Decisions</h2>\n");
    if (!m->ndec) {
        mt__para_note(b, &mt__html_markup, MT__NO_DECISIONS);
        mt__sb_puts(b, "</section>\n");
        return;
    }
    mt__sb_puts(b, "<table class=\"dec\"><colgroup><col class=\"c-no\"><col class=\"c-id\">"
               "<col class=\"c-phase\"><col class=\"c-var\"><col class=\"c-wall\">"
               "<col class=\"c-change\"><col class=\"c-verdict\"><col class=\"c-med\">"
               "<col class=\"c-med\"><col class=\"c-gain\"><col class=\"c-ci\">"
               "<col class=\"c-p\"></colgroup>\n<tr><th>#</th><th>id</th><th>phase</th>"
               "<th>variable</th><th>wall</th><th>change</th><th>verdict</th>"
               "<th>control median</th><th>candidate median</th><th>gain</th><th>CI</th>"
               "<th>p</th></tr>\n");
    for (i = 0; i < m->ndec; i++) {
        const mt__decision *dc = &m->dec[i];
        /* #: the decisions in order, 1, 2, 3...; id: the store's number */
        mt__sb_puts(b, "<tr><td class=\"n dno\" rowspan=\"2\">");
        if (mt__has_samples(dc))
            mt__sb_printf(b, "<a href=\"#ab-%.0f\">%zu</a>", dc->index, i + 1);
        else
            mt__sb_printf(b, "%zu", i + 1);
        mt__sb_puts(b, "</td><td class=\"n\" rowspan=\"2\">");
        mt__sb_num(b, "%.0f", dc->index);
        mt__sb_puts(b, "</td><td>");
        mt__sb_html(b, dc->phase);
        mt__sb_puts(b, "</td><td>");
        h_code(b, dc->variable);
        {
            char aw[80];
            mt__arm_words(dc, aw, sizeof aw);
            if (aw[0]) {
                mt__sb_puts(b, "<br><span class=\"arm\">");
                mt__sb_html(b, aw);
                mt__sb_puts(b, "</span>");
            }
        }
        mt__sb_puts(b, "</td><td>");
        mt__sb_html(b, dc->wall ? dc->wall : "");
        mt__sb_puts(b, "</td><td>");
        mt__change_cell(b, &mt__html_markup, &dc->change);
        mt__sb_printf(b, "</td><td class=\"v-%s\">", dc->verdict ? dc->verdict : "none");
        mt__sb_html(b, dc->verdict);
        mt__sb_puts(b, "</td>");
        h_arm_cell(b, &dc->control);
        h_arm_cell(b, &dc->candidate);
        mt__sb_puts(b, "<td class=\"n\">");
        mt__sb_pct(b, dc->gain);
        mt__sb_puts(b, "</td><td class=\"n\">");
        mt__sb_ci(b, dc->has_ci, dc->ci);
        mt__sb_puts(b, "</td><td class=\"n\">");
        mt__sb_p(b, dc->p);
        mt__sb_puts(b, "</td></tr>\n<tr class=\"more\"><td colspan=\"10\"><b>reason</b> ");
        mt__sb_html(b, dc->reason);
        if (dc->repairs.n) {
            mt__sb_puts(b, "<br><b>repairs</b> ");
            for (j = 0; j < dc->repairs.n; j++) {
                if (j)
                    mt__sb_puts(b, "; ");
                mt__sb_html(b, dc->repairs.v[j]);
            }
        }
        if (dc->evidence.n) {
            mt__sb_puts(b, "<br><b>evidence</b> ");
            for (j = 0; j < dc->evidence.n; j++) {
                if (j)
                    mt__sb_puts(b, "; ");
                h_code(b, dc->evidence.key[j]);
                mt__sb_puts(b, " = ");
                mt__sb_html(b, dc->evidence.val[j]);
            }
        }
        mt__sb_puts(b, "</td></tr>\n");
    }
    mt__decisions_note(b, &mt__html_markup);
    mt__sb_puts(b, "</section>\n");
}

static void h_distributions(mt__sb *b, const mt__model *m)
{
    size_t i, n = 0;
    mt__sb_puts(b, "<section id=\"distributions\"><h2>Step-time distributions of each A/B</h2>\n");
    for (i = 0; i < m->ndec; i++)
        n += mt__has_samples(&m->dec[i]);
    if (!n) {
        mt__sb_puts(b, "<p class=\"note\">No A/B was measured.</p>\n</section>\n");
        return;
    }
    mt__sb_puts(b, "<div class=\"grid\">\n");
    for (i = 0; i < m->ndec; i++) {
        const mt__decision *dc = &m->dec[i];
        const char *cand = dc->verdict && !strcmp(dc->verdict, "accepted") ? "#1e7b34"
                           : dc->verdict && !strcmp(dc->verdict, "failed") ? "#b3261e"
                                                                           : "#d9822b";
        arm_view arms[2] = {{"control", &dc->control.s, dc->control.median, "#4a78b5"},
                            {"candidate", &dc->candidate.s, dc->candidate.median, cand}};
        char plot[48], label[MT__PATH_LEN];
        if (!mt__has_samples(dc))
            continue;
        snprintf(plot, sizeof plot, "ab-%.0f", dc->index);
        snprintf(label, sizeof label, "step times of decision %zu (%s): control and candidate",
                 i + 1, dc->variable ? dc->variable : "");
        mt__sb_printf(b, "<figure id=\"%s\"><figcaption><b>#%zu ", plot, i + 1);
        mt__sb_html(b, dc->variable);
        mt__sb_printf(b, "</b> (id %.0f) <span class=\"v-%s\">", dc->index,
                  dc->verdict ? dc->verdict : "none");
        mt__sb_html(b, dc->verdict);
        mt__sb_puts(b, "</span>, gain ");
        mt__sb_pct(b, dc->gain);
        mt__sb_puts(b, ", CI ");
        mt__sb_ci(b, dc->has_ci, dc->ci);
        mt__sb_puts(b, ", p = ");
        mt__sb_p(b, dc->p);
        mt__sb_puts(b, "</figcaption>\n");
        svg_strip(b, plot, label, arms, 2, 440);
        mt__sb_puts(b, "\n<details><summary>samples (s)</summary>control: ");
        mt__sb_samples(b, &dc->control.s);
        mt__sb_puts(b, "<br>candidate: ");
        mt__sb_samples(b, &dc->candidate.s);
        mt__sb_puts(b, "</details></figure>\n");
    }
    mt__sb_puts(b, "</div>\n</section>\n");
}

static void h_throughput(mt__sb *b, const mt__model *m)
{
    double best = NAN;
    size_t k, failed = 0;
    mt__sb_puts(b, "<section id=\"throughput\"><h2>Throughput over the tune</h2>\n");
    if (!m->ntl) {
        mt__para_note(b, &mt__html_markup, MT__NO_RUNS);
        mt__sb_puts(b, "</section>\n");
        return;
    }
    for (k = 0; k < m->ntl; k++) {
        if (isfinite(m->tl[k].best))
            best = m->tl[k].best;
        failed += !isfinite(m->tl[k].tflops);
    }
    mt__sb_printf(b, "<p>%zu runs, %zu without a throughput figure (failed); the accepted best "
                 "config at the last run: ", m->ntl, failed);
    mt__sb_num(b, "%.4g", best);
    mt__sb_puts(b, " TFLOP/s per GPU (its runs' median; the step line is the incumbent's, each "
               "accepted decision moves it, a faster single run of a rejected candidate does "
               "not); ");
    mt__sb_num(b, "%.4g", m->tl[m->ntl - 1].gpu_hours);
    mt__sb_puts(b, " GPU hours at the last run.</p>\n");
    svg_throughput(b, m);
    mt__sb_puts(b, "\n</section>\n");
}

static void plot_name(char *out, size_t n, const char *prefix, const char *name, size_t i)
{
    size_t k = (size_t)snprintf(out, n, "%s-", prefix), start = k;
    const char *p;
    for (p = name ? name : ""; *p && k + 1 < n; p++)
        if ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '_')
            out[k++] = *p;
        else if (*p >= 'A' && *p <= 'Z')
            out[k++] = (char)(*p - 'A' + 'a');
    out[k] = '\0';
    if (k == start)
        snprintf(out, n, "%s-%zu", prefix, i);
}

static void h_memory(mt__sb *b, const mt__model *m)
{
    size_t i, k;
    mt__sb_puts(b, "<section id=\"memory\"><h2>Per-GPU peak memory</h2>\n");
    if (!m->nmem) {
        mt__para_note(b, &mt__html_markup, MT__NO_MEMORY);
        mt__sb_puts(b, "</section>\n");
        return;
    }
    for (i = 0; i < m->nmem; i++) {
        const mt__mem *e = &m->mem[i];
        char plot[64];
        double hot = NAN;
        size_t hot_k = 0, known = 0;
        int roles = e->per_gpu.n > MT__MEM_EVERY_GPU && e->nroles > 0;
        for (k = 0; k < e->per_gpu.n; k++)
            if (isfinite(e->per_gpu.v[k])) {
                known++;
                if (!(e->per_gpu.v[k] <= hot)) {
                    hot = e->per_gpu.v[k];
                    hot_k = k;
                }
            }
        plot_name(plot, sizeof plot, "memory", e->name, i);
        mt__sb_puts(b, "<figure><figcaption><b>");
        mt__sb_html(b, e->name);
        mt__sb_puts(b, "</b>: ");
        if (e->has_hot) {
            mt__sb_puts(b, "<span class=\"hottest\">hottest GPU: ");
            mt__sb_hottest(b, e, mt__sb_html);
            mt__sb_puts(b, "</span>");
        } else if (isnan(hot))
            mt__sb_puts(b, "no per-GPU figures");
        else
            mt__sb_printf(b, "hottest GPU %zu at %.2f GB", hot_k, hot);
        mt__sb_printf(b, "; %.4g GB capacity, limit %.4g GB (headroom %.4g GB); figures for %zu of "
                     "%zu GPUs",
                  e->capacity, e->capacity - e->headroom, e->headroom, known, e->per_gpu.n);
        if (e->source) {
            mt__sb_puts(b, " (source: ");
            mt__sb_html(b, e->source);
            mt__sb_puts(b, ")");
        }
        if (roles)
            mt__sb_printf(b,
                          ". %zu GPUs: the chart shows the hottest GPU of each role; every GPU's "
                          "figure is in bundle.json",
                          e->per_gpu.n);
        mt__sb_puts(b, "</figcaption>\n");
        svg_memory(b, e, plot, roles);
        if (e->nroles) {
            mt__sb_puts(b, "\n<table class=\"roles\"><tr><th>role</th><th>hottest GPU</th>"
                       "<th>peak</th><th>median GPU of its stage</th></tr>\n");
            for (k = 0; k < e->nroles; k++) {
                mt__sb_puts(b, "<tr><td>");
                mt__sb_html(b, e->roles[k].role);
                mt__sb_printf(b, "</td><td class=\"n\">%.0f</td><td class=\"n\">%.2f GB</td>"
                             "<td class=\"n\">",
                          e->roles[k].rank, e->roles[k].peak);
                mt__sb_num(b, "%.2f GB", e->roles[k].median);
                mt__sb_puts(b, "</td></tr>\n");
            }
            mt__sb_puts(b, "</table>");
        }
        mt__sb_puts(b, "</figure>\n");
    }
    mt__sb_puts(b, "</section>\n");
}
static void h_wall_row(mt__sb *b, const char *what, const mt__wall *w)
{
    mt__sb_printf(b, "<tr><th>%s</th><td>", what);
    if (!w->present) {
        mt__sb_puts(b, "not profiled</td></tr>\n");
        return;
    }
    mt__wall_words(b, &mt__html_markup, w);
    mt__sb_puts(b, "</td><td class=\"n\">");
    mt__sb_wall_window(b, w);
    mt__sb_puts(b, "</td></tr>\n");
}

static void h_walls(mt__sb *b, const mt__model *m)
{
    int j;
    mt__sb_puts(b, "<section id=\"walls\"><h2>Wall breakdown before and after</h2>\n");
    if (!m->before.present && !m->after.present) {
        mt__para_note(b, &mt__html_markup, MT__NO_PROFILE);
        mt__sb_puts(b, "</section>\n");
        return;
    }
    mt__sb_puts(b, "<p class=\"note\">");
    mt__sb_html(b, MT__WALLS_NOTE);
    mt__sb_puts(b, "</p>\n");
    svg_walls(b, &m->before, &m->after);
    mt__sb_puts(b, "\n<table><tr><th></th><th>dominant wall</th><th>window</th></tr>\n");
    h_wall_row(b, "before", &m->before);
    h_wall_row(b, "after", &m->after);
    mt__sb_puts(b, "</table>\n<table><tr><th>share of the window</th><th>before</th>"
               "<th>after</th></tr>\n");
    for (j = 0; j < MT__NSHARES; j++) {
        mt__sb_printf(b, "<tr><td>%s</td><td class=\"n share-before\">", mt__share_names[j]);
        mt__sb_num(b, "%.1f%%", m->before.present ? m->before.share[j] * 100 : NAN);
        mt__sb_puts(b, "</td><td class=\"n share-after\">");
        mt__sb_num(b, "%.1f%%", m->after.present ? m->after.share[j] * 100 : NAN);
        mt__sb_puts(b, "</td></tr>\n");
    }
    mt__sb_puts(b, "</table>\n<p class=\"note\">" MT__SHARES_NOTE " (optimizer step, host work "
                   "outside kernels).</p>\n</section>\n");
}

static void h_ablation(mt__sb *b, const mt__model *m)
{
    mt__sb_puts(b, "<section id=\"ablation\"><h2>Ablation (leave one out)</h2>\n");
    mt__ablation_table(b, &mt__html_markup, m);
    mt__sb_puts(b, "</section>\n");
}

static void h_validation(mt__sb *b, const mt__model *m)
{
    const mt__validation *v = &m->val;
    arm_view arms[2];
    mt__sb_puts(b, "<section id=\"validation\"><h2>Validation: baseline against winner</h2>\n");
    if (!v->present) {
        mt__sb_printf(b, "%s%s%s</section>\n", mt__html_markup.note, MT__NO_VALIDATION,
                      mt__html_markup.note_end);
        return;
    }
    if (!v->confirmed) {
        mt__sb_puts(b, "<div class=\"banner bad\"><strong>Validation did not confirm the winner."
                   "</strong><p class=\"rec\">Recommendation: ");
        mt__sb_html(b, v->recommendation);
        mt__sb_puts(b, "</p></div>\n");
    }
    mt__arm_rows(b, &mt__html_markup, &v->base, &v->win, 1);
    mt__validation_runs(b, &mt__html_markup, v);
    mt__validation_rows(b, &mt__html_markup, v);
    mt__natural_section(b, &mt__html_markup, &v->nat);
    arms[0] = (arm_view){"baseline", &v->base.s, v->base.median, "#4a78b5"};
    arms[1] = (arm_view){"winner", &v->win.s, v->win.median, v->confirmed ? "#1e7b34" : "#d9822b"};
    if (v->base.s.n + v->win.s.n) {
        mt__sb_puts(b, "<figure><figcaption>Step times in the validation window</figcaption>\n");
        svg_strip(b, "validation", "validation step times: baseline and winner", arms, 2, 900);
        mt__sb_puts(b, "\n<details><summary>samples (s)</summary>baseline: ");
        mt__sb_samples(b, &v->base.s);
        mt__sb_puts(b, "<br>winner: ");
        mt__sb_samples(b, &v->win.s);
        mt__sb_puts(b, "</details></figure>\n");
    }
    mt__sb_puts(b, "</section>\n");
}

void mt__report_html(mt__sb *b, const mt__model *m)
{
    mt__sb_puts(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
               "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
               "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n"
               "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
               "<title>moetune report: ");
    mt__sb_html(b, m->contract_name);
    mt__sb_printf(b, "</title>\n<style>\n%s</style></head>\n<body>\n<header><h1>moetune report: ",
              html_css);
    mt__sb_html(b, m->contract_name);
    mt__sb_puts(b, "</h1><p class=\"sub\">created ");
    mt__byline(b, &mt__html_markup, m);
    mt__sb_puts(b, "</p>\n<nav><a href=\"#summary\">summary</a><a href=\"#recipe\">recipe</a>"
               "<a href=\"#meshes\">meshes</a><a href=\"#decisions\">decisions</a>"
               "<a href=\"#distributions\">distributions</a><a href=\"#throughput\">"
               "throughput</a><a href=\"#memory\">memory</a><a href=\"#walls\">walls</a>"
               "<a href=\"#ablation\">ablation</a><a href=\"#validation\">validation</a></nav>"
               "</header>\n");
    h_summary(b, m);
    h_recipe(b, m);
    h_meshes(b, m);
    h_decisions(b, m);
    h_distributions(b, m);
    h_throughput(b, m);
    h_memory(b, m);
    h_walls(b, m);
    h_ablation(b, m);
    h_validation(b, m);
    mt__sb_printf(b, "<script>\n%s</script>\n</body></html>\n", html_check);
}

