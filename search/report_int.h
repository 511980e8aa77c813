/*
 * report_int.h - what the report's files share (internal to search/report_*.c;
 * the public entry point is report.h):
 *
 *   report_read.c  reads bundle.json into a model (every field checked, each
 *                  problem named by its JSON path), writes the two files
 *   report_text.c  growing text, escaping, figures, and the wording both
 *                  views say alike
 *   report_md.c    REPORT.md from a model
 *   report_html.c  report.html from a model, with its inline SVG plots
 *
 * A model and every string it points to live in report_read.c's arena until
 * mt_report_write returns; the views only read it.
 */
#ifndef MT_REPORT_INT_H
#define MT_REPORT_INT_H

#include "diag.h"

#include <stddef.h>

#define MT__PATH_LEN 256

/* ---- growing text ----------------------------------------------------- */

/* Caller-owned text: zero it to start, mt__sb_clear it when done; oom is set (and
 * further appends are dropped) when memory ran out. */
typedef struct mt__sb {
    char *s;
    size_t n, cap;
    int oom;
} mt__sb;


/* Frees b's text and zeroes it. */
void mt__sb_clear(mt__sb *b);
void mt__sb_putn(mt__sb *b, const char *s, size_t n);
void mt__sb_puts(mt__sb *b, const char *s);
void mt__sb_printf(mt__sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* HTML text or attribute value; NULL (a JSON null) reads "n/a". */
void mt__sb_html(mt__sb *b, const char *s);
/* Markdown inline text, safe in a table cell. */
void mt__sb_md(mt__sb *b, const char *s);

/* Figures; NaN (a JSON null) reads "n/a". */
void mt__sb_num(mt__sb *b, const char *fmt, double x) __attribute__((format(printf, 2, 0)));
void mt__sb_pct(mt__sb *b, double frac);
void mt__sb_ci(mt__sb *b, int has, const double ci[2]);
void mt__sb_p(mt__sb *b, double p);
void mt__sb_secs(mt__sb *b, double s);

/* ---- the model -------------------------------------------------------- */

typedef struct mt__vec {
    double *v; /* NaN where the bundle says null */
    size_t n;
} mt__vec;

typedef struct mt__strs {
    const char **v;
    size_t n;
} mt__strs;

typedef struct mt__map {
    const char **key, **val;
    size_t n;
} mt__map;

typedef struct mt__change {
    const char *knob, *from, *to;
} mt__change;

typedef struct mt__changes {
    mt__change *v;
    size_t n;
} mt__changes;

typedef struct mt__arm {
    int present;
    mt__vec s;
    double median, tflops, tokens; /* NaN: null */
    const char *tflops_source;     /* "logged" | "computed"; NULL: absent */
    const char *config_id;         /* validation arms: the runs' config id; NULL: not given */
    mt__strs log_dirs;                 /* ... and their log directories */
} mt__arm;

typedef struct mt__decision {
    double index;
    const char *phase, *variable, *wall, *verdict, *reason;
    mt__changes change;
    mt__strs repairs;
    mt__arm control, candidate;
    double gain, p, ci[2];
    int has_ci;
    mt__map evidence;
    /* a multi-arm screen's value (arms, optional): value of of, selected */
    double arm_value, arm_of;
    int arm_selected;
} mt__decision;

typedef struct mt__tpoint {
    double run, gpu_hours, tflops, best;
    const char *phase;
    size_t order;
} mt__tpoint;

/* The hottest GPU of one role (memory[].roles). */
typedef struct mt__mem_role {
    const char *role;
    double rank, peak, median;
} mt__mem_role;

/* More GPUs than this: the chart shows the hottest of each role. */
#define MT__MEM_EVERY_GPU 16

typedef struct mt__mem {
    const char *name;
    double capacity, headroom;
    mt__vec per_gpu;
    const char *source; /* NULL: not given (bundles before it) */
    int has_hot;
    double hot_rank, hot_peak;
    const char *hot_role, *hot_why;
    mt__mem_role *roles;
    size_t nroles;
} mt__mem;

/* A wall's shares partition its profiled window (search/BUNDLE.md): they
 * add up to 1.  Hidden communication is compute time with communication
 * under it, a share of its own beside compute with nothing under it. */
#define MT__NSHARES 6
#define MT__SHARE_OTHER 5 /* optional in the bundle (bundles before it: 0) */

typedef struct mt__wall {
    int present;
    const char *wall, *runner_up;
    double confidence, window_s, share[MT__NSHARES];
    int has_steps;
    double steps[2]; /* the profiled steps, inclusive */
} mt__wall;

/* The shares' names in both views, in share order (report_text.c). */
extern const char *const mt__share_names[MT__NSHARES];

typedef struct mt__ablation {
    const char *knob, *to, *reason;
    double gain_without, p;
    int kept;
} mt__ablation;

/* validation.natural: the natural-routing arms (absent or null: none). */
typedef struct mt__natural {
    int present;
    const char *status, *reason, *label; /* measured | skipped | off */
    double gain, p, ci[2];
    int has_ci, confirmed;
    mt__arm base, win;
} mt__natural;

typedef struct mt__validation {
    int present;
    double window[2], steps, gain, p, ci[2];
    int has_ci, confirmed;
    mt__arm base, win;
    const char *recommendation;
    mt__natural nat;
} mt__validation;

/* baseline.fit: what the fit phase found of the base (absent or null: no
 * fit phase ran, nothing is said). */
typedef struct mt__basefit {
    int present;
    int fits; /* 1, 0, -1 unknown (the base does not run) */
    double est, usable, uncertainty, probe_peak;
    const char *probe_outcome; /* NULL: not probed */
    int has_fitted;
    mt__changes fitted; /* the fit phase's change, when one fits */
    const char *reason;
} mt__basefit;

typedef struct mt__model {
    const char *version, *created;
    const char *contract_name, *contract_path, *fingerprint;
    mt__map stack;
    const char *gpu;
    double gpus, gpus_per_node, memory_gb;
    const char *strategy, *status;
    double gh_limit, gh_used, runs_limit, runs_used;
    const char *deadline, *stopped_because;
    mt__map base_config;
    const char *base_label;
    mt__strs base_reasons, reasons; /* label_reasons (absent in older bundles) */
    int ablation_complete;      /* -1: not said (older bundles) */
    mt__basefit fit;
    mt__map config;
    const char *label;
    mt__changes change;
    mt__strs megatron_args, bridge_overrides, command_diff;
    mt__strs notes; /* recipe.notes (optional): what to know before training with it */
    mt__map env;
    const char *mesh_attention, *mesh_moe;
    mt__decision *dec;
    size_t ndec;
    mt__tpoint *tl;
    size_t ntl;
    mt__mem *mem;
    size_t nmem;
    mt__wall before, after;
    mt__ablation *abl;
    size_t nabl;
    mt__validation val;
    double total_gain;
} mt__model;


/* ---- report_read.c ---------------------------------------------------- */

/* The value of key in m; NULL when m has no such key. */
const char *mt__map_get(const mt__map *m, const char *key);

/* ---- report_text.c: the wording both views share ----------------------- */

/* "value 2 of 3, selected" of a multi-arm screen's decision; "" otherwise. */
void mt__arm_words(const mt__decision *dc, char *buf, size_t n);
/* The label's words, escaped by text (mt__sb_md or mt__sb_html). */
void mt__sb_label_why(mt__sb *b, const char *label, const mt__strs *why,
                      void (*text)(mt__sb *, const char *));
void mt__sb_tflops(mt__sb *b, const mt__arm *a);
void mt__sb_window(mt__sb *b, const mt__validation *v);
/* The Megatron-LM arguments and the environment as shell text (unescaped). */
void mt__sb_flags(mt__sb *b, const mt__model *m);
void mt__sb_env(mt__sb *b, const mt__model *m);
void mt__sb_used(mt__sb *b, const char *fmt, double used, double limit)
    __attribute__((format(printf, 2, 0)));
void mt__sb_samples(mt__sb *b, const mt__vec *s);
/* Plain text: the caller escapes it for its view. */
void mt__fit_words(mt__sb *t, const mt__basefit *f);
void mt__no_recipe_words(mt__sb *t, const mt__model *m);
int mt__no_recipe(const mt__model *m);
int mt__has_samples(const mt__decision *dc);
void mt__sb_hottest(mt__sb *b, const mt__mem *e, void (*text)(mt__sb *, const char *));
void mt__sb_wall_window(mt__sb *b, const mt__wall *w);

/* What the two profiles are (search/engine.c: the first profile of the
 * retune phase, and the winner's); each view escapes it. */
#define MT__WALLS_NOTE                                                                             \
    "\"Before\" is the profile the retune phase began with, of the config after fit and "          \
    "scale (the baseline only when those kept it); \"after\" is the winner's."

/* ---- report_text.c: the sections' text both views build alike ---------- */

/* The few markup differences between REPORT.md and report.html where both
 * say the same thing, X(field, Markdown, HTML), by the text that uses them.
 * A table row is row LABEL head VALUE row_end; the baseline and winner
 * table's number cells go head_n A cell_n B. */
/* the validation banner (mt__banner) */
#define MT__MARKUP_BANNER(X)                                                                       \
    X(strong, "**", "<strong>")                                                                    \
    X(unstrong, "**", "</strong>")                                                                 \
    X(arrow, " -> ", " &rarr; ")                                                                   \
    X(change_sep, "; ", "<br>") /* between a decision's changes */                                 \
    X(times, " x ", " &times; ") /* "8 x H100" */                                                  \
    X(times_tight, " x ", "&times;") /* "ID x 100" */                                              \
    X(code_open, "`", "<code>")                                                                    \
    X(code_close, "`", "</code>")                                                                  \
    X(banner_ok, "> ", "<div class=\"banner ok\">")                                                \
    X(banner_bad, "> ", "<div class=\"banner bad\">")                                              \
    X(banner_warn, "> ", "<div class=\"banner warn\">")                                            \
    X(banner_end, "\n", "</div>\n")                                                                \
    X(line_end, "\n", "") /* a banner's sentence ends */                                           \
    X(rec, ">\n> **Recommendation:** ", "\n<p class=\"rec\">Recommendation: ")                     \
    X(rec_end, "\n", "</p>")
/* the baseline and winner table and the figures' table */
#define MT__MARKUP_ROWS(X)                                                                         \
    X(row, "| ", "<tr><th>")                                                                       \
    X(head, " | ", "</th><td>")                                                                    \
    X(head_n, " | ", "</th><td class=\"n\">")                                                      \
    X(cell_n, " | ", "</td><td class=\"n\">")                                                      \
    X(row_end, " |\n", "</td></tr>\n")                                                             \
    X(head_yes, " | ", "</th><td class=\"v-accepted\">") /* a yes / no verdict cell */             \
    X(head_no, " | ", "</th><td class=\"v-failed\">")                                              \
    X(arms_table, "| | baseline | winner |\n|---|---:|---:|\n",                                    \
      "<table><tr><th></th><th>baseline</th><th>winner</th></tr>\n")                               \
    X(arms_to_kv, "\n| | |\n|---|---|\n", "</table>\n<table>\n") /* then the figures' table */     \
    X(kv_end, "", "</table>\n")
/* the natural-routing validation and the validation runs */
#define MT__MARKUP_RUNS(X)                                                                         \
    X(natural_head, "\n### With natural routing\n\n", "<h3>With natural routing</h3>\n")           \
    X(note, "", "<p class=\"note\">")                                                              \
    X(note_end, "\n", "</p>\n")                                                                    \
    X(ids_row, "| config id (runs) |", "<tr><th>config id (runs)</th>")                            \
    X(ids_cell, " ", "<td class=\"cfgid\">")                                                       \
    X(dirs_row, "\n| log folders |", "</tr>\n<tr><th>log folders</th>")                            \
    X(dirs_cell, " ", "<td class=\"logdirs\">")                                                    \
    X(runs_cell_end, " |", "</td>")                                                                \
    X(runs_end, "\n", "</tr>\n")                                                                   \
    X(no_dirs, "none kept", "none kept (the executor writes no logs)")
/* headings, paragraphs and lists */
#define MT__MARKUP_PARAS(X)                                                                        \
    X(h3, "### ", "<h3>")                                                                          \
    X(h3_end, "\n\n", "</h3>\n")                                                                   \
    X(para_bad, "", "<p class=\"banner bad\">") /* a paragraph that warns */                       \
    X(para_note, "", "<p class=\"note\">")                                                         \
    X(para_end, "\n\n", "</p>\n")                                                                  \
    X(shout, "> **", "<p class=\"banner bad\">") /* a paragraph that warns louder */               \
    X(shout_end, "**\n\n", "</p>\n")                                                               \
    X(list, "", "<ul>\n")                                                                          \
    X(item, "- ", "<li>")                                                                          \
    X(item_end, "\n", "</li>\n")                                                                   \
    X(list_end, "\n", "</ul>\n")
/* tables of code spans: changes, the stack */
#define MT__MARKUP_CODES(X)                                                                        \
    X(changes_table, "| knob | from | to |\n|---|---|---|\n",                                      \
      "<table><tr><th>knob</th><th>from</th><th>to</th></tr>\n")                                   \
    X(crow, "| ", "<tr><td>")                                                                      \
    X(csep, " | ", "</td><td>")                                                                    \
    X(crow_end, " |\n", "</td></tr>\n")                                                            \
    X(ctable_end, "\n", "</table>\n")                                                              \
    X(map_table, "| %s | %s |\n|---|---|\n", "<table><tr><th>%s</th><th>%s</th></tr>\n")           \
    X(no_map, "none recorded", "none")
/* the ablation's table */
#define MT__MARKUP_ABLATION(X)                                                                     \
    X(csep_n, " | ", "</td><td class=\"n\">")                                                      \
    X(kept_sep, " | ", "</td><td class=\"v-kept\">")                                               \
    X(dropped_sep, " | ", "</td><td class=\"v-dropped\">")                                         \
    X(abl_table,                                                                                   \
      "| knob | to | gain without it | p | kept | reason |\n|---|---|---:|---:|---|---|\n",        \
      "<table><tr><th>knob</th><th>to</th><th>gain without it</th><th>p</th><th>kept</th>"         \
      "<th>reason</th></tr>\n")
#define MT__MARKUP(X)                                                                              \
    MT__MARKUP_BANNER(X) MT__MARKUP_ROWS(X) MT__MARKUP_RUNS(X) MT__MARKUP_PARAS(X)                 \
    MT__MARKUP_CODES(X) MT__MARKUP_ABLATION(X)

#define MT__MARKUP_FIELD(f, md, html) const char *f;
#define MT__MARKUP_MD(f, md, html) .f = md,
#define MT__MARKUP_HTML(f, md, html) .f = html,

/* report_md.c: mt__md_markup, report_html.c: mt__html_markup. */
typedef struct mt__markup {
    void (*text)(mt__sb *b, const char *s); /* escaped text: mt__sb_md | mt__sb_html */
    void (*code)(mt__sb *b, const char *s); /* a code span */
    MT__MARKUP(MT__MARKUP_FIELD)
} mt__markup;

extern const mt__markup mt__md_markup, mt__html_markup;

/* The validation banner: the validated gain, or why none is claimed. */
void mt__banner(mt__sb *b, const mt__markup *k, const mt__model *m);
/* "none claimed (...)" unless the validation confirmed the gain, which reads
 * as its figure and then validated (NULL: nothing). */
void mt__total_gain(mt__sb *b, const mt__model *m, const char *validated);
/* The summary's rows from GPU hours to whether the base fits. */
void mt__summary_rows(mt__sb *b, const mt__markup *k, const mt__model *m);
/* A two-column table of code spans headed kname and vname. */
void mt__map_table(mt__sb *b, const mt__markup *k, const mt__map *m, const char *kname,
                   const char *vname);
/* What an empty section says (mt__para_note). */
#define MT__NO_DECISIONS "No decisions were made."
#define MT__NO_RUNS "No runs were recorded."
#define MT__NO_MEMORY "No memory figures were recorded."
#define MT__NO_PROFILE "No profile was taken."
#define MT__NO_VALIDATION "No validation was run, so no total gain is claimed."

/* A paragraph of plain prose s (not escaped: the report's own words). */
void mt__para_note(mt__sb *b, const mt__markup *k, const char *s);
/* "created ... by moetune V; strategy S; status T", after its first word. */
void mt__byline(mt__sb *b, const mt__markup *k, const mt__model *m);
/* The summary's rows from the fingerprint to the status. */
void mt__summary_head_rows(mt__sb *b, const mt__markup *k, const mt__model *m);
/* An arm's median step time and sample count: "1.234 s (n=5)", "not run". */
void mt__arm_median(mt__sb *b, const mt__arm *a);
/* What the decisions table's columns mean; closes the table. */
void mt__decisions_note(mt__sb *b, const mt__markup *k);
/* A profiled wall: "communication (runner-up compute, confidence 0.22)". */
void mt__wall_words(mt__sb *b, const mt__markup *k, const mt__wall *w);
/* A decision's changes: "knob: from -> to", one after another. */
void mt__change_cell(mt__sb *b, const mt__markup *k, const mt__changes *c);
/* The ablation's table, or why there is none. */
void mt__ablation_table(mt__sb *b, const mt__markup *k, const mt__model *m);
/* The recipe's warnings, its changes from the baseline and its notes. */
void mt__recipe_changes(mt__sb *b, const mt__markup *k, const mt__model *m);
/* The baseline and winner table's rows (samples: with its samples row). */
void mt__arm_rows(mt__sb *b, const mt__markup *k, const mt__arm *base, const mt__arm *win,
                  int samples);
/* The validation runs' config ids and log folders, when the bundle names
 * them: rows of the baseline and winner table. */
void mt__validation_runs(mt__sb *b, const mt__markup *k, const mt__validation *v);
/* The validation's figures, from the window to the recommendation. */
void mt__validation_rows(mt__sb *b, const mt__markup *k, const mt__validation *v);
/* The natural-routing validation beside the forced one: the
 * training-equivalent gain, or why there is none. */
void mt__natural_section(mt__sb *b, const mt__markup *k, const mt__natural *n);

/* The shares' note, up to where the HTML view says more. */
#define MT__SHARES_NOTE                                                                            \
    "The shares partition each profiled window and add up to 100%: compute time with "           \
    "communication hidden under it is its own share, beside compute with nothing under it; "     \
    "idle excludes the pipeline bubble, shown apart; other is time no trace class covers"

/* ---- the views -------------------------------------------------------- */

/* Appends the whole of REPORT.md / report.html for m to b. */
/* A bundle.json read into its model (report_read.c): m and everything it
 * points to live until mt__bundle_clear. */
typedef struct mt__bundle {
    mt__model m;
    void *arena; /* the model's allocations */
    struct cJSON *root;
    char *text;
} mt__bundle;

/* DIR/bundle.json into *b; 0, or -errno with every problem in d (clear b
 * either way). */
int mt__bundle_read(const char *dir, mt__bundle *b, mt_diag *d);
void mt__bundle_clear(mt__bundle *b);

void mt__report_md(mt__sb *b, const mt__model *m);
void mt__report_html(mt__sb *b, const mt__model *m);

#endif
