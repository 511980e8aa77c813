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

#include <stddef.h>

#define PATH_LEN 256

/* ---- growing text ----------------------------------------------------- */

/* Caller-owned text: zero it to start, mt__sb_clear it when done; oom is set (and
 * further appends are dropped) when memory ran out. */
typedef struct sb {
    char *s;
    size_t n, cap;
    int oom;
} sb;


/* Frees b's text and zeroes it. */
void mt__sb_clear(sb *b);
void mt__sb_putn(sb *b, const char *s, size_t n);
void mt__sb_puts(sb *b, const char *s);
void mt__sb_printf(sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* HTML text or attribute value; NULL (a JSON null) reads "n/a". */
void mt__sb_html(sb *b, const char *s);
/* Markdown inline text, safe in a table cell. */
void mt__sb_md(sb *b, const char *s);

/* Figures; NaN (a JSON null) reads "n/a". */
void mt__sb_num(sb *b, const char *fmt, double x) __attribute__((format(printf, 2, 0)));
void mt__sb_pct(sb *b, double frac);
void mt__sb_ci(sb *b, int has, const double ci[2]);
void mt__sb_p(sb *b, double p);
void mt__sb_secs(sb *b, double s);

/* ---- the model -------------------------------------------------------- */

typedef struct vec {
    double *v; /* NaN where the bundle says null */
    size_t n;
} vec;

typedef struct strs {
    const char **v;
    size_t n;
} strs;

typedef struct map {
    const char **key, **val;
    size_t n;
} map;

typedef struct change {
    const char *knob, *from, *to;
} change;

typedef struct changes {
    change *v;
    size_t n;
} changes;

typedef struct arm {
    int present;
    vec s;
    double median, tflops, tokens; /* NaN: null */
    const char *tflops_source;     /* "logged" | "computed"; NULL: absent */
    const char *config_id;         /* validation arms: the runs' config id; NULL: not given */
    strs log_dirs;                 /* ... and their log directories */
} arm;

typedef struct decision {
    double index;
    const char *phase, *variable, *wall, *verdict, *reason;
    changes change;
    strs repairs;
    arm control, candidate;
    double gain, p, ci[2];
    int has_ci;
    map evidence;
    /* a multi-arm screen's value (arms, optional): value of of, selected */
    double arm_value, arm_of;
    int arm_selected;
} decision;

typedef struct tpoint {
    double run, gpu_hours, tflops, best;
    const char *phase;
    size_t order;
} tpoint;

/* The hottest GPU of one role (memory[].roles). */
typedef struct mem_role {
    const char *role;
    double rank, peak, median;
} mem_role;

/* More GPUs than this: the chart shows the hottest of each role. */
#define MEM_EVERY_GPU 16

typedef struct mem {
    const char *name;
    double capacity, headroom;
    vec per_gpu;
    const char *source; /* NULL: not given (bundles before it) */
    int has_hot;
    double hot_rank, hot_peak;
    const char *hot_role, *hot_why;
    mem_role *roles;
    size_t nroles;
} mem;

/* A wall's shares partition its profiled window (search/BUNDLE.md): they
 * add up to 1.  Hidden communication is compute time with communication
 * under it, a share of its own beside compute with nothing under it. */
#define NSHARES 6
#define SHARE_OTHER 5 /* optional in the bundle (bundles before it: 0) */

typedef struct wall {
    int present;
    const char *wall, *runner_up;
    double confidence, window_s, share[NSHARES];
    int has_steps;
    double steps[2]; /* the profiled steps, inclusive */
} wall;

/* The shares' names in both views, in share order (report_text.c). */
extern const char *const mt__share_names[NSHARES];

typedef struct ablation {
    const char *knob, *to, *reason;
    double gain_without, p;
    int kept;
} ablation;

/* validation.natural: the natural-routing arms (absent or null: none). */
typedef struct natural {
    int present;
    const char *status, *reason, *label; /* measured | skipped | off */
    double gain, p, ci[2];
    int has_ci, confirmed;
    arm base, win;
} natural;

typedef struct validation {
    int present;
    double window[2], steps, gain, p, ci[2];
    int has_ci, confirmed;
    arm base, win;
    const char *recommendation;
    natural nat;
} validation;

/* baseline.fit: what the fit phase found of the base (absent or null: no
 * fit phase ran, nothing is said). */
typedef struct basefit {
    int present;
    int fits; /* 1, 0, -1 unknown (the base does not run) */
    double est, usable, uncertainty, probe_peak;
    const char *probe_outcome; /* NULL: not probed */
    int has_fitted;
    changes fitted; /* the fit phase's change, when one fits */
    const char *reason;
} basefit;

typedef struct model {
    const char *version, *created;
    const char *contract_name, *contract_path, *fingerprint;
    map stack;
    const char *gpu;
    double gpus, gpus_per_node, memory_gb;
    const char *strategy, *status;
    double gh_limit, gh_used, runs_limit, runs_used;
    const char *deadline, *stopped_because;
    map base_config;
    const char *base_label;
    strs base_reasons, reasons; /* label_reasons (absent in older bundles) */
    int ablation_complete;      /* -1: not said (older bundles) */
    basefit fit;
    map config;
    const char *label;
    changes change;
    strs megatron_args, bridge_overrides, command_diff;
    strs notes; /* recipe.notes (optional): what to know before training with it */
    map env;
    const char *mesh_attention, *mesh_moe;
    decision *dec;
    size_t ndec;
    tpoint *tl;
    size_t ntl;
    mem *mem;
    size_t nmem;
    wall before, after;
    ablation *abl;
    size_t nabl;
    validation val;
    double total_gain;
} model;


/* ---- report_read.c ---------------------------------------------------- */

/* The value of key in m; NULL when m has no such key. */
const char *mt__map_get(const map *m, const char *key);

/* ---- report_text.c: the wording both views share ----------------------- */

/* "value 2 of 3, selected" of a multi-arm screen's decision; "" otherwise. */
void mt__arm_words(const decision *dc, char *buf, size_t n);
/* The label's words, escaped by text (mt__sb_md or mt__sb_html). */
void mt__sb_label_why(sb *b, const char *label, const strs *why, void (*text)(sb *, const char *));
void mt__sb_tflops(sb *b, const arm *a);
void mt__sb_window(sb *b, const validation *v);
/* The Megatron-LM arguments and the environment as shell text (unescaped). */
void mt__sb_flags(sb *b, const model *m);
void mt__sb_env(sb *b, const model *m);
void mt__sb_used(sb *b, const char *fmt, double used, double limit)
    __attribute__((format(printf, 2, 0)));
void mt__sb_samples(sb *b, const vec *s);
/* Plain text: the caller escapes it for its view. */
void mt__fit_words(sb *t, const basefit *f);
void mt__no_recipe_words(sb *t, const model *m);
int mt__no_recipe(const model *m);
int mt__has_samples(const decision *dc);
void mt__sb_hottest(sb *b, const mem *e, void (*text)(sb *, const char *));
void mt__sb_wall_window(sb *b, const wall *w);

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
    void (*text)(sb *b, const char *s); /* escaped text: mt__sb_md | mt__sb_html */
    void (*code)(sb *b, const char *s); /* a code span */
    MT__MARKUP(MT__MARKUP_FIELD)
} mt__markup;

extern const mt__markup mt__md_markup, mt__html_markup;

/* The validation banner: the validated gain, or why none is claimed. */
void mt__banner(sb *b, const mt__markup *k, const model *m);
/* "none claimed (...)" unless the validation confirmed the gain, which reads
 * as its figure and then validated (NULL: nothing). */
void mt__total_gain(sb *b, const model *m, const char *validated);
/* The summary's rows from GPU hours to whether the base fits. */
void mt__summary_rows(sb *b, const mt__markup *k, const model *m);
/* A two-column table of code spans headed kname and vname. */
void mt__map_table(sb *b, const mt__markup *k, const map *m, const char *kname,
                   const char *vname);
/* What an empty section says (mt__para_note). */
#define MT__NO_DECISIONS "No decisions were made."
#define MT__NO_RUNS "No runs were recorded."
#define MT__NO_MEMORY "No memory figures were recorded."
#define MT__NO_PROFILE "No profile was taken."
#define MT__NO_VALIDATION "No validation was run, so no total gain is claimed."

/* A paragraph of plain prose s (not escaped: the report's own words). */
void mt__para_note(sb *b, const mt__markup *k, const char *s);
/* "created ... by moetune V; strategy S; status T", after its first word. */
void mt__byline(sb *b, const mt__markup *k, const model *m);
/* The summary's rows from the fingerprint to the status. */
void mt__summary_head_rows(sb *b, const mt__markup *k, const model *m);
/* An arm's median step time and sample count: "1.234 s (n=5)", "not run". */
void mt__arm_median(sb *b, const arm *a);
/* What the decisions table's columns mean; closes the table. */
void mt__decisions_note(sb *b, const mt__markup *k);
/* A profiled wall: "communication (runner-up compute, confidence 0.22)". */
void mt__wall_words(sb *b, const mt__markup *k, const wall *w);
/* A decision's changes: "knob: from -> to", one after another. */
void mt__changes(sb *b, const mt__markup *k, const changes *c);
/* The ablation's table, or why there is none. */
void mt__ablation_table(sb *b, const mt__markup *k, const model *m);
/* The recipe's warnings, its changes from the baseline and its notes. */
void mt__recipe_changes(sb *b, const mt__markup *k, const model *m);
/* The baseline and winner table's rows (samples: with its samples row). */
void mt__arm_rows(sb *b, const mt__markup *k, const arm *base, const arm *win, int samples);
/* The validation runs' config ids and log folders, when the bundle names
 * them: rows of the baseline and winner table. */
void mt__validation_runs(sb *b, const mt__markup *k, const validation *v);
/* The validation's figures, from the window to the recommendation. */
void mt__validation_rows(sb *b, const mt__markup *k, const validation *v);
/* The natural-routing validation beside the forced one: the
 * training-equivalent gain, or why there is none. */
void mt__natural(sb *b, const mt__markup *k, const natural *n);

/* The shares' note, up to where the HTML view says more. */
#define MT__SHARES_NOTE                                                                            \
    "The shares partition each profiled window and add up to 100%: compute time with "           \
    "communication hidden under it is its own share, beside compute with nothing under it; "     \
    "idle excludes the pipeline bubble, shown apart; other is time no trace class covers"

/* ---- the views -------------------------------------------------------- */

/* Appends the whole of REPORT.md / report.html for m to b. */
void mt__report_md(sb *b, const model *m);
void mt__report_html(sb *b, const model *m);

#endif
