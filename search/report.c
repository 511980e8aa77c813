/*
 * report.c - the evidence bundle's human views, rendered from bundle.json
 * alone (schema: search/BUNDLE.md): REPORT.md (text and tables) and
 * report.html (one self-contained page: inline CSS, inline SVG plots drawn
 * here, a few lines of inline script that check the page rendered; nothing is
 * fetched from anywhere).
 *
 * bundle.json is first read in full into a model, checking every field the
 * views use and naming its JSON path on any problem ("decisions[3].control.
 * samples"); nothing is written unless the whole bundle reads.  Both views are
 * then built in memory and each is written to a temporary file in DIR that is
 * renamed over the old one, so a reader never sees half a report.
 *
 * Every string from the bundle is escaped for its context: HTML text and
 * attributes, Markdown table cells ('|'), code spans and fenced blocks.
 */
#include "report.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PATH_LEN 256
#define MAX_PROBLEMS 40
#define MAX_BUNDLE_BYTES (512L << 20)

/* ---- arena: everything the model holds, freed at once ----------------- */

typedef struct ablock {
    struct ablock *next;
    max_align_t data[];
} ablock;

typedef struct arena {
    ablock *head;
    int oom;
} arena;

static void *ar_alloc(arena *a, size_t n)
{
    ablock *b = calloc(1, sizeof *b + (n ? n : 1));
    if (!b) {
        a->oom = 1;
        return NULL;
    }
    b->next = a->head;
    a->head = b;
    return b->data;
}

static char *ar_strdup(arena *a, const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = ar_alloc(a, n);
    if (p)
        memcpy(p, s, n);
    return p;
}

static void ar_free(arena *a)
{
    while (a->head) {
        ablock *n = a->head->next;
        free(a->head);
        a->head = n;
    }
}

/* ---- growing text ----------------------------------------------------- */

typedef struct sb {
    char *s;
    size_t n, cap;
    int oom;
} sb;

static void sb_putn(sb *b, const char *s, size_t n)
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

static void sb_puts(sb *b, const char *s) { sb_putn(b, s, strlen(s)); }

static void sb_printf(sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sb *b, const char *fmt, ...)
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
        sb_putn(b, small, (size_t)n);
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
    sb_putn(b, big, (size_t)n);
    free(big);
}

/* HTML text or attribute value; NULL (a JSON null) reads "n/a". */
static void sb_html(sb *b, const char *s)
{
    const char *p;
    if (!s) {
        sb_puts(b, "n/a");
        return;
    }
    for (p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        switch (c) {
        case '&': sb_puts(b, "&amp;"); break;
        case '<': sb_puts(b, "&lt;"); break;
        case '>': sb_puts(b, "&gt;"); break;
        case '"': sb_puts(b, "&quot;"); break;
        case '\'': sb_puts(b, "&#39;"); break;
        default:
            if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)
                sb_puts(b, "&#xFFFD;");
            else
                sb_putn(b, p, 1);
        }
    }
}

/* Markdown inline text, safe in a table cell: one line, no raw HTML, no
 * code span or strong emphasis started by the bundle's text.  '<' and '&' stay
 * readable ("p <= 0.05") where they cannot start a tag or an entity. */
static void sb_md(sb *b, const char *s)
{
    const char *p;
    if (!s) {
        sb_puts(b, "n/a");
        return;
    }
    for (p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        switch (c) {
        case '|': sb_puts(b, "\\|"); break;
        case '\\': sb_puts(b, "\\\\"); break;
        case '`': sb_puts(b, "\\`"); break;
        case '*': sb_puts(b, "\\*"); break;
        case '<': /* only where a tag, comment or autolink could start */
            sb_puts(b, isalpha((unsigned char)p[1]) || (p[1] && strchr("/!?", p[1])) ? "&lt;"
                                                                                 : "<");
            break;
        case '&': /* only where an entity could start */
            sb_puts(b, isalnum((unsigned char)p[1]) || p[1] == '#' ? "&amp;" : "&");
            break;
        case '\n':
        case '\r':
        case '\t': sb_putn(b, " ", 1); break;
        default:
            if (c < 0x20 || c == 0x7f)
                sb_putn(b, "?", 1);
            else
                sb_putn(b, p, 1);
        }
    }
}

static size_t longest_run(const char *s, char c)
{
    size_t run = 0, best = 0;
    for (; s && *s; s++) {
        run = *s == c ? run + 1 : 0;
        if (run > best)
            best = run;
    }
    return best;
}

/* A Markdown code span (knob names, values, flags), safe in a table cell. */
static void sb_mdcode(sb *b, const char *s)
{
    size_t ticks, i;
    const char *p;
    if (!s) {
        sb_puts(b, "n/a");
        return;
    }
    if (!*s) {
        sb_puts(b, "(empty)");
        return;
    }
    ticks = longest_run(s, '`') + 1;
    for (i = 0; i < ticks; i++)
        sb_putn(b, "`", 1);
    if (s[0] == '`' || s[0] == ' ')
        sb_putn(b, " ", 1);
    for (p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '|')
            sb_puts(b, "\\|");
        else if (c < 0x20 || c == 0x7f)
            sb_putn(b, " ", 1);
        else
            sb_putn(b, p, 1);
    }
    if (s[strlen(s) - 1] == '`' || s[strlen(s) - 1] == ' ')
        sb_putn(b, " ", 1);
    for (i = 0; i < ticks; i++)
        sb_putn(b, "`", 1);
}

/* A fenced Markdown block whose fence no line of body can close. */
static void sb_mdfence(sb *b, const char *info, const char *body)
{
    size_t ticks = longest_run(body, '`') + 1, i;
    if (ticks < 3)
        ticks = 3;
    for (i = 0; i < ticks; i++)
        sb_putn(b, "`", 1);
    sb_printf(b, "%s\n%s", info, body);
    if (b->n && b->s[b->n - 1] != '\n')
        sb_putn(b, "\n", 1);
    for (i = 0; i < ticks; i++)
        sb_putn(b, "`", 1);
    sb_puts(b, "\n\n");
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
        sb_puts(b, s);
        return;
    }
    sb_putn(b, "'", 1);
    for (p = s; *p; p++) {
        if (*p == '\'')
            sb_puts(b, "'\\''");
        else
            sb_putn(b, p, 1);
    }
    sb_putn(b, "'", 1);
}

/* ---- figures as text -------------------------------------------------- */

static void sb_num(sb *b, const char *fmt, double x) __attribute__((format(printf, 2, 0)));
static void sb_num(sb *b, const char *fmt, double x)
{
    if (isnan(x))
        sb_puts(b, "n/a");
    else
        sb_printf(b, fmt, x);
}

static void sb_pct(sb *b, double frac)
{
    if (isnan(frac))
        sb_puts(b, "n/a");
    else
        sb_printf(b, "%+.2f%%", frac * 100);
}

static void sb_ci(sb *b, int has, const double ci[2])
{
    if (!has) {
        sb_puts(b, "n/a");
        return;
    }
    sb_puts(b, "[");
    sb_pct(b, ci[0]);
    sb_puts(b, ", ");
    sb_pct(b, ci[1]);
    sb_puts(b, "]");
}

static void sb_p(sb *b, double p) { sb_num(b, "%.3g", p); }

static void sb_secs(sb *b, double s)
{
    sb_num(b, "%.4g", s);
    if (!isnan(s))
        sb_puts(b, " s");
}

static void json_number_text(char *out, size_t n, double x)
{
    if (x == floor(x) && fabs(x) < 1e15) {
        snprintf(out, n, "%.0f", x);
        return;
    }
    snprintf(out, n, "%.15g", x);
    if (strtod(out, NULL) != x)
        snprintf(out, n, "%.17g", x);
}

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

static const char *const share_keys[NSHARES] = {"compute", "hidden_comm", "exposed_comm",
                                                "idle",    "bubble",      "other"};
static const char *const share_names[NSHARES] = {
    "compute", "compute, comm hidden under it", "exposed comm", "idle", "bubble", "other"};
static const char *const share_colors[NSHARES] = {"#4a78b5", "#7fa7d9", "#c0392b",
                                                  "#9aa5b1", "#8e6bbf", "#d0d7de"};

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

/* ---- reading bundle.json ---------------------------------------------- */

enum { J_STR, J_NUM, J_INT, J_BOOL, J_OBJ, J_ARR, J_ANY };
#define J_NULL 0x100 /* null allowed */

typedef struct rd {
    const char *file;
    mt_diag *d;
    arena *ar;
    int problems;
} rd;

static void problem(rd *r, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void problem(rd *r, const char *path, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    if (++r->problems > MAX_PROBLEMS)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    mt_diag_add(r->d, r->file, 0, path && *path ? path : NULL, "%s", msg);
}

/* Paths longer than PATH_LEN end in "..." rather than overflow. */
static void path_fit(char *out, int n)
{
    if (n >= PATH_LEN)
        memcpy(out + PATH_LEN - 4, "...", 4);
}

static void path_key(char *out, const char *parent, const char *key)
{
    if (parent && *parent)
        path_fit(out, snprintf(out, PATH_LEN, "%s.%s", parent, key));
    else
        path_fit(out, snprintf(out, PATH_LEN, "%s", key));
}

static void path_idx(char *out, const char *parent, size_t i)
{
    path_fit(out, snprintf(out, PATH_LEN, "%s[%zu]", parent, i));
}

static const char *want_name(int want)
{
    switch (want & 0xff) {
    case J_STR: return want & J_NULL ? "a string or null" : "a string";
    case J_NUM: return want & J_NULL ? "a number or null" : "a number";
    case J_INT: return want & J_NULL ? "an integer or null" : "an integer";
    case J_BOOL: return "true or false";
    case J_OBJ: return want & J_NULL ? "an object or null" : "an object";
    case J_ARR: return want & J_NULL ? "an array or null" : "an array";
    default: return "a value";
    }
}

static void found_name(char *out, size_t n, const cJSON *j)
{
    if (cJSON_IsNull(j))
        snprintf(out, n, "null");
    else if (cJSON_IsBool(j))
        snprintf(out, n, "%s", cJSON_IsTrue(j) ? "true" : "false");
    else if (cJSON_IsNumber(j))
        snprintf(out, n, "the number %g", j->valuedouble);
    else if (cJSON_IsString(j))
        snprintf(out, n, "a string");
    else if (cJSON_IsArray(j))
        snprintf(out, n, "an array");
    else if (cJSON_IsObject(j))
        snprintf(out, n, "an object");
    else
        snprintf(out, n, "an invalid value");
}

/* j checked against want; NULL when absent, an allowed null, or wrong (the
 * problem recorded under path). */
static const cJSON *check(rd *r, const cJSON *j, const char *path, int want)
{
    char found[64];
    int ok;
    if (!j) {
        problem(r, path, "missing; expected %s", want_name(want));
        return NULL;
    }
    if (cJSON_IsNull(j)) {
        if (!(want & J_NULL) && (want & 0xff) != J_ANY)
            problem(r, path, "is null; expected %s", want_name(want));
        return (want & 0xff) == J_ANY ? j : NULL;
    }
    switch (want & 0xff) {
    case J_STR: ok = cJSON_IsString(j) && j->valuestring; break;
    case J_NUM: ok = cJSON_IsNumber(j) && isfinite(j->valuedouble); break;
    case J_INT:
        ok = cJSON_IsNumber(j) && isfinite(j->valuedouble) &&
             j->valuedouble == floor(j->valuedouble) && fabs(j->valuedouble) < 1e15;
        break;
    case J_BOOL: ok = cJSON_IsBool(j); break;
    case J_OBJ: ok = cJSON_IsObject(j); break;
    case J_ARR: ok = cJSON_IsArray(j); break;
    default: ok = !cJSON_IsInvalid(j); break;
    }
    if (!ok) {
        found_name(found, sizeof found, j);
        problem(r, path, "expected %s, found %s", want_name(want), found);
        return NULL;
    }
    return j;
}

/* Member key of obj (whose path is parent); its path goes to path when
 * given.  obj NULL (already reported) yields NULL quietly. */
static const cJSON *get(rd *r, const cJSON *obj, const char *parent, const char *key, int want,
                        char *path)
{
    char local[PATH_LEN];
    char *p = path ? path : local;
    path_key(p, parent, key);
    if (!obj)
        return NULL;
    return check(r, cJSON_GetObjectItemCaseSensitive(obj, key), p, want);
}

static const char *get_str(rd *r, const cJSON *obj, const char *parent, const char *key,
                           int nullable)
{
    const cJSON *j = get(r, obj, parent, key, J_STR | (nullable ? J_NULL : 0), NULL);
    return j ? j->valuestring : NULL;
}

static double get_num(rd *r, const cJSON *obj, const char *parent, const char *key, int want)
{
    const cJSON *j = get(r, obj, parent, key, want, NULL);
    return j ? j->valuedouble : NAN;
}

static int get_bool(rd *r, const cJSON *obj, const char *parent, const char *key)
{
    const cJSON *j = get(r, obj, parent, key, J_BOOL, NULL);
    return j ? cJSON_IsTrue(j) : 0;
}

static const char *get_enum(rd *r, const cJSON *obj, const char *parent, const char *key,
                            const char *const *allowed)
{
    char path[PATH_LEN];
    sb list = {0};
    const cJSON *j = get(r, obj, parent, key, J_STR, path);
    size_t i;
    if (!j)
        return NULL;
    for (i = 0; allowed[i]; i++)
        if (!strcmp(j->valuestring, allowed[i]))
            return allowed[i];
    for (i = 0; allowed[i]; i++)
        sb_printf(&list, "%s\"%s\"", i ? ", " : "", allowed[i]);
    problem(r, path, "\"%.60s\" is not one of %s", j->valuestring, list.s ? list.s : "");
    free(list.s);
    return NULL;
}

/* Any JSON value as the text a reader sees: strings as they are, numbers as
 * written, null as "null", arrays and objects as compact JSON. */
static const char *value_text(rd *r, const cJSON *j)
{
    char num[64], *printed;
    const char *out;
    if (cJSON_IsString(j))
        return j->valuestring ? j->valuestring : "";
    if (cJSON_IsNumber(j)) {
        json_number_text(num, sizeof num, j->valuedouble);
        return ar_strdup(r->ar, num);
    }
    if (cJSON_IsBool(j))
        return cJSON_IsTrue(j) ? "true" : "false";
    if (cJSON_IsNull(j))
        return "null";
    printed = cJSON_PrintUnformatted(j);
    if (!printed) {
        r->ar->oom = 1;
        return "";
    }
    out = ar_strdup(r->ar, printed);
    cJSON_free(printed);
    return out ? out : "";
}

static const char *get_value(rd *r, const cJSON *obj, const char *parent, const char *key)
{
    const cJSON *j = get(r, obj, parent, key, J_ANY, NULL);
    return j ? value_text(r, j) : NULL;
}

static size_t array_len(const cJSON *a)
{
    int n = cJSON_GetArraySize(a);
    return n > 0 ? (size_t)n : 0;
}

static vec get_vec(rd *r, const cJSON *obj, const char *parent, const char *key, int elem_nullable)
{
    char path[PATH_LEN], ep[PATH_LEN];
    const cJSON *a = get(r, obj, parent, key, J_ARR, path), *e;
    vec v = {NULL, 0};
    size_t i = 0;
    if (!a || !(v.v = ar_alloc(r->ar, array_len(a) * sizeof(double))))
        return v;
    cJSON_ArrayForEach(e, a)
    {
        const cJSON *c;
        path_idx(ep, path, i);
        c = check(r, e, ep, J_NUM | (elem_nullable ? J_NULL : 0));
        v.v[i++] = c ? c->valuedouble : NAN;
    }
    v.n = i;
    return v;
}

static strs get_strs(rd *r, const cJSON *obj, const char *parent, const char *key)
{
    char path[PATH_LEN], ep[PATH_LEN];
    const cJSON *a = get(r, obj, parent, key, J_ARR, path), *e;
    strs v = {NULL, 0};
    size_t i = 0;
    if (!a || !(v.v = ar_alloc(r->ar, array_len(a) * sizeof(char *))))
        return v;
    cJSON_ArrayForEach(e, a)
    {
        const cJSON *c;
        path_idx(ep, path, i);
        c = check(r, e, ep, J_STR);
        v.v[i++] = c ? c->valuestring : "";
    }
    v.n = i;
    return v;
}

static map get_map(rd *r, const cJSON *obj, const char *parent, const char *key, int nullable)
{
    const cJSON *o = get(r, obj, parent, key, J_OBJ | (nullable ? J_NULL : 0), NULL), *e;
    map m = {NULL, NULL, 0};
    size_t n, i = 0;
    if (!o)
        return m;
    n = array_len(o);
    m.key = ar_alloc(r->ar, n * sizeof(char *));
    m.val = ar_alloc(r->ar, n * sizeof(char *));
    if (!m.key || !m.val)
        return m;
    cJSON_ArrayForEach(e, o)
    {
        m.key[i] = e->string ? e->string : "";
        m.val[i++] = value_text(r, e);
    }
    m.n = i;
    return m;
}

static const char *map_get(const map *m, const char *key)
{
    size_t i;
    for (i = 0; i < m->n; i++)
        if (!strcmp(m->key[i], key))
            return m->val[i];
    return NULL;
}

static changes get_changes(rd *r, const cJSON *obj, const char *parent, const char *key)
{
    char path[PATH_LEN], ep[PATH_LEN];
    const cJSON *a = get(r, obj, parent, key, J_ARR, path), *e;
    changes v = {NULL, 0};
    size_t i = 0;
    if (!a || !(v.v = ar_alloc(r->ar, array_len(a) * sizeof(change))))
        return v;
    cJSON_ArrayForEach(e, a)
    {
        change *c = &v.v[i];
        path_idx(ep, path, i++);
        if (!check(r, e, ep, J_OBJ))
            continue;
        c->knob = get_str(r, e, ep, "knob", 0);
        c->from = get_value(r, e, ep, "from");
        c->to = get_value(r, e, ep, "to");
    }
    v.n = i;
    return v;
}

/* [lo, hi] | null */
static int get_pair(rd *r, const cJSON *obj, const char *parent, const char *key, int want,
                    double out[2])
{
    char path[PATH_LEN], ep[PATH_LEN];
    const cJSON *a = get(r, obj, parent, key, J_ARR | J_NULL, path);
    int i;
    out[0] = out[1] = NAN;
    if (!a)
        return 0;
    if (cJSON_GetArraySize(a) != 2) {
        problem(r, path, "expected [lo, hi], found an array of %d", cJSON_GetArraySize(a));
        return 0;
    }
    for (i = 0; i < 2; i++) {
        const cJSON *c;
        path_idx(ep, path, (size_t)i);
        c = check(r, cJSON_GetArrayItem(a, i), ep, want);
        if (!c)
            return 0;
        out[i] = c->valuedouble;
    }
    return 1;
}

static void read_arm(rd *r, const cJSON *obj, const char *parent, const char *key, int tflops,
                     arm *out)
{
    char path[PATH_LEN];
    const cJSON *o = get(r, obj, parent, key, J_OBJ | J_NULL, path);
    out->median = out->tflops = out->tokens = NAN;
    out->tflops_source = NULL;
    out->present = o != NULL;
    if (!o)
        return;
    out->s = get_vec(r, o, path, "samples", 0);
    out->median = get_num(r, o, path, "median", J_NUM | J_NULL);
    if (tflops)
        out->tflops = get_num(r, o, path, "tflops", J_NUM | J_NULL);
    /* newer members, absent from older bundles */
    if (cJSON_GetObjectItemCaseSensitive(o, "tflops_source"))
        out->tflops_source = get_str(r, o, path, "tflops_source", 1);
    if (cJSON_GetObjectItemCaseSensitive(o, "tokens_per_s_per_gpu"))
        out->tokens = get_num(r, o, path, "tokens_per_s_per_gpu", J_NUM | J_NULL);
    /* a validation arm's runs (absent in bundles written before them): the
     * log directories are named after the config id, so a reader finds
     * them from the report */
    if (tflops && cJSON_GetObjectItemCaseSensitive(o, "config_id")) {
        char lp[PATH_LEN], ep[PATH_LEN];
        size_t i;
        out->config_id = get_str(r, o, path, "config_id", 0);
        out->log_dirs = get_strs(r, o, path, "log_dirs");
        path_key(lp, path, "log_dirs");
        for (i = 0; out->config_id && i < out->log_dirs.n; i++) {
            const char *d = out->log_dirs.v[i], *base = strrchr(d, '/');
            if (!strstr(base ? base + 1 : d, out->config_id)) {
                path_idx(ep, lp, i);
                problem(r, ep,
                        "\"%.200s\" is not named after the arm's config id %.20s; the runs "
                        "of an arm are stored and logged under one id",
                        d, out->config_id);
            }
        }
    }
}

/* label_reasons of a config (optional: bundles written before it). */
static strs get_reasons(rd *r, const cJSON *o, const char *path)
{
    strs none = {NULL, 0};
    if (!o || !cJSON_GetObjectItemCaseSensitive(o, "label_reasons"))
        return none;
    return get_strs(r, o, path, "label_reasons");
}

/* validation.natural (optional). */
static void read_natural(rd *r, const cJSON *v, natural *n)
{
    static const char *const statuses[] = {"measured", "skipped", "off", NULL};
    static const char *const labels[] = {"training-equivalent", "benchmark-only", NULL};
    const char *path = "validation.natural";
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(v, "natural");
    memset(n, 0, sizeof *n);
    n->gain = n->p = NAN;
    if (!o || cJSON_IsNull(o) || !(o = get(r, v, "validation", "natural", J_OBJ, NULL)))
        return;
    n->present = 1;
    n->status = get_enum(r, o, path, "status", statuses);
    n->reason = get_str(r, o, path, "reason", 0);
    n->label = get_enum(r, o, path, "label", labels);
    read_arm(r, o, path, "baseline", 1, &n->base);
    read_arm(r, o, path, "winner", 1, &n->win);
    n->gain = get_num(r, o, path, "gain", J_NUM | J_NULL);
    n->has_ci = get_pair(r, o, path, "ci", J_NUM, n->ci);
    n->p = get_num(r, o, path, "p_value", J_NUM | J_NULL);
    n->confirmed = get_bool(r, o, path, "confirmed");
    if (n->status && !strcmp(n->status, "measured") && (!n->base.present || !n->win.present))
        problem(r, path, "is measured but an arm is null");
}

static void read_wall(rd *r, const cJSON *obj, const char *parent, const char *key, wall *w)
{
    static const char *const walls[] = {"memory", "communication", "host", "compute", NULL};
    char path[PATH_LEN], sp[PATH_LEN];
    const cJSON *o = get(r, obj, parent, key, J_OBJ | J_NULL, path), *sh;
    int i;
    double sum = 0;
    w->present = o != NULL;
    if (!o)
        return;
    w->wall = get_enum(r, o, path, "wall", walls);
    w->runner_up = get_str(r, o, path, "runner_up", 1);
    w->confidence = get_num(r, o, path, "confidence", J_NUM | J_NULL);
    w->window_s = get_num(r, o, path, "window_s", J_NUM | J_NULL);
    /* steps: absent in bundles written before it */
    if (cJSON_GetObjectItemCaseSensitive(o, "steps"))
        w->has_steps = get_pair(r, o, path, "steps", J_INT, w->steps);
    sh = get(r, o, path, "shares", J_OBJ, sp);
    for (i = 0; i < NSHARES; i++) {
        char kp[PATH_LEN];
        if (i == SHARE_OTHER && sh && !cJSON_GetObjectItemCaseSensitive(sh, share_keys[i])) {
            w->share[i] = 0;
            continue;
        }
        w->share[i] = get_num(r, sh, sp, share_keys[i], J_NUM);
        if (sh && isnan(w->share[i]))
            w->share[i] = 0;
        else if (w->share[i] < 0) {
            path_key(kp, sp, share_keys[i]);
            problem(r, kp, "is %g; a share of the window is not negative", w->share[i]);
        }
        sum += fmax(w->share[i], 0);
    }
    /* all zero: nothing classified, drawn as an empty bar */
    if (sh && sum > 0 && fabs(sum - 1) > 0.005)
        problem(r, sp,
                "add up to %.1f%%; the shares partition the profiled window (hidden "
                "communication is a share of compute time, not stacked on it) and must add "
                "up to 100%%",
                100 * sum);
}

static void read_decision(rd *r, const cJSON *o, const char *path, decision *dc)
{
    static const char *const verdicts[] = {"accepted", "rejected", "dropped", "kept", "failed",
                                           NULL};
    dc->index = get_num(r, o, path, "index", J_INT);
    dc->phase = get_str(r, o, path, "phase", 0);
    dc->variable = get_str(r, o, path, "variable", 0);
    dc->wall = get_str(r, o, path, "wall", 1);
    dc->change = get_changes(r, o, path, "change");
    dc->repairs = get_strs(r, o, path, "repairs");
    dc->verdict = get_enum(r, o, path, "verdict", verdicts);
    dc->reason = get_str(r, o, path, "reason", 0);
    read_arm(r, o, path, "control", 0, &dc->control);
    read_arm(r, o, path, "candidate", 0, &dc->candidate);
    dc->gain = get_num(r, o, path, "gain", J_NUM | J_NULL);
    dc->has_ci = get_pair(r, o, path, "ci", J_NUM, dc->ci);
    dc->p = get_num(r, o, path, "p_value", J_NUM | J_NULL);
    dc->evidence = get_map(r, o, path, "evidence", 1);
    dc->arm_value = dc->arm_of = NAN;
    if (cJSON_GetObjectItemCaseSensitive(o, "arms")) {
        char ap[300];
        const cJSON *a = get(r, o, path, "arms", J_OBJ, NULL);
        snprintf(ap, sizeof ap, "%s.arms", path);
        if (a) {
            dc->arm_value = get_num(r, a, ap, "value", J_INT);
            dc->arm_of = get_num(r, a, ap, "of", J_INT);
            dc->arm_selected = get_bool(r, a, ap, "selected");
        }
    }
}

/* "value 2 of 3, selected" of a multi-arm screen's decision; "" otherwise. */
static void arm_words(const decision *dc, char *buf, size_t n)
{
    buf[0] = '\0';
    if (isfinite(dc->arm_value) && isfinite(dc->arm_of))
        snprintf(buf, n, "%s %.0f of %.0f%s", strcmp(dc->phase ? dc->phase : "", "select")
                                                  ? "value"
                                                  : "follow-up of value",
                 dc->arm_value, dc->arm_of, dc->arm_selected ? ", selected" : "");
}

static void read_validation(rd *r, const cJSON *root, validation *v)
{
    const cJSON *o = get(r, root, "", "validation", J_OBJ | J_NULL, NULL);
    const char *path = "validation";
    v->gain = v->p = NAN;
    v->present = o != NULL;
    if (!o)
        return;
    get_pair(r, o, path, "window", J_INT, v->window);
    v->steps = get_num(r, o, path, "steps", J_INT);
    read_arm(r, o, path, "baseline", 1, &v->base);
    read_arm(r, o, path, "winner", 1, &v->win);
    if (!v->base.present)
        problem(r, "validation.baseline", "is null; the validation must measure the baseline");
    if (!v->win.present)
        problem(r, "validation.winner", "is null; the validation must measure the winner");
    v->gain = get_num(r, o, path, "gain", J_NUM | J_NULL);
    v->has_ci = get_pair(r, o, path, "ci", J_NUM, v->ci);
    v->p = get_num(r, o, path, "p_value", J_NUM | J_NULL);
    v->confirmed = get_bool(r, o, path, "confirmed");
    v->recommendation = get_str(r, o, path, "recommendation", 0);
    read_natural(r, o, &v->nat);
}

static int tpoint_cmp(const void *a, const void *b)
{
    const tpoint *x = a, *y = b;
    if (x->run != y->run)
        return x->run < y->run ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* baseline.fit (optional: bundles written before it have none). */
static void read_basefit(rd *r, const cJSON *base, const char *parent, basefit *f)
{
    char path[PATH_LEN], ep[PATH_LEN];
    const cJSON *o, *j, *p;
    memset(f, 0, sizeof *f);
    f->est = f->usable = f->uncertainty = f->probe_peak = NAN;
    if (!base || !(j = cJSON_GetObjectItemCaseSensitive(base, "fit")) || cJSON_IsNull(j))
        return;
    if (!(o = get(r, base, parent, "fit", J_OBJ, path)))
        return;
    f->present = 1;
    j = get(r, o, path, "fits", J_BOOL | J_NULL, NULL);
    f->fits = j ? cJSON_IsTrue(j) : -1;
    f->est = get_num(r, o, path, "estimate_gb", J_NUM | J_NULL);
    f->usable = get_num(r, o, path, "usable_gb", J_NUM | J_NULL);
    f->uncertainty = get_num(r, o, path, "uncertainty", J_NUM);
    if ((p = get(r, o, path, "probe", J_OBJ | J_NULL, ep))) {
        f->probe_outcome = get_str(r, p, ep, "outcome", 0);
        f->probe_peak = get_num(r, p, ep, "peak_gb", J_NUM | J_NULL);
    }
    j = get(r, o, path, "fitted", J_ARR | J_NULL, NULL);
    if (j) {
        f->has_fitted = 1;
        f->fitted = get_changes(r, o, path, "fitted");
    }
    f->reason = get_str(r, o, path, "reason", 0);
}

/* memory[i]'s source, hottest and roles (absent in bundles written before
 * them; then nothing is checked).  The hottest must be the largest figure
 * of per_gpu_gb, which then has one figure (or null) per GPU. */
static void read_mem_more(rd *r, const cJSON *e, const char *ep, mem *me, double gpus)
{
    char hp[PATH_LEN], rp[PATH_LEN], xp[PATH_LEN];
    const cJSON *h, *a, *x;
    size_t i, n = me->per_gpu.n;
    if (cJSON_GetObjectItemCaseSensitive(e, "source"))
        me->source = get_str(r, e, ep, "source", 0);
    if (!cJSON_GetObjectItemCaseSensitive(e, "hottest"))
        return;
    if ((h = get(r, e, ep, "hottest", J_OBJ | J_NULL, hp))) {
        me->has_hot = 1;
        me->hot_rank = get_num(r, h, hp, "rank", J_INT);
        me->hot_peak = get_num(r, h, hp, "peak_gb", J_NUM);
        me->hot_role = get_str(r, h, hp, "role", 0);
        me->hot_why = get_str(r, h, hp, "why", 0);
        path_key(rp, ep, "per_gpu_gb");
        if (isfinite(gpus) && (double)n != gpus)
            problem(r, rp, "has %zu figures for %.0f GPUs; one per GPU (null: no figure)", n,
                    gpus);
        path_key(xp, hp, "rank");
        if (isfinite(me->hot_rank) && (me->hot_rank < 0 || me->hot_rank >= (double)n))
            problem(r, xp, "%.0f is not a GPU of per_gpu_gb (0-%zu)", me->hot_rank,
                    n ? n - 1 : 0);
        else if (isfinite(me->hot_rank) && isfinite(me->hot_peak)) {
            double at = me->per_gpu.v[(size_t)me->hot_rank];
            if (!(fabs(at - me->hot_peak) <= 1e-6 * fmax(1, fabs(at))))
                problem(r, xp, "GPU %.0f has %g GB in per_gpu_gb, not the hottest's %g GB",
                        me->hot_rank, at, me->hot_peak);
            for (i = 0; i < n; i++)
                if (me->per_gpu.v[i] > me->hot_peak * (1 + 1e-9)) {
                    problem(r, xp, "GPU %zu has %g GB, more than the hottest (GPU %.0f)", i,
                            me->per_gpu.v[i], me->hot_rank);
                    break;
                }
        }
    }
    if (!cJSON_GetObjectItemCaseSensitive(e, "roles"))
        return;
    a = get(r, e, ep, "roles", J_ARR, rp);
    if (!a || !(me->roles = ar_alloc(r->ar, array_len(a) * sizeof(mem_role))))
        return;
    i = 0;
    cJSON_ArrayForEach(x, a)
    {
        mem_role *ro = &me->roles[i];
        path_idx(xp, rp, i++);
        ro->rank = ro->peak = ro->median = NAN;
        if (!check(r, x, xp, J_OBJ))
            continue;
        ro->role = get_str(r, x, xp, "role", 0);
        ro->rank = get_num(r, x, xp, "rank", J_INT);
        ro->peak = get_num(r, x, xp, "peak_gb", J_NUM);
        ro->median = get_num(r, x, xp, "median_gb", J_NUM | J_NULL);
        if (isfinite(ro->rank) && (ro->rank < 0 || ro->rank >= (double)n)) {
            char kp[PATH_LEN];
            path_key(kp, xp, "rank");
            problem(r, kp, "%.0f is not a GPU of per_gpu_gb (0-%zu)", ro->rank, n ? n - 1 : 0);
        }
    }
    me->nroles = i;
}

static void read_bundle(rd *r, const cJSON *root, model *m)
{
    static const char *const statuses[] = {"validated", "not_confirmed", "baseline_only", "failed",
                                           NULL};
    static const char *const labels[] = {"training-equivalent", "benchmark-only", NULL};
    char path[PATH_LEN], ep[PATH_LEN];
    const cJSON *o, *e, *a;
    double schema;
    size_t i;

    if (!cJSON_IsObject(root)) {
        problem(r, NULL, "the bundle is not a JSON object");
        return;
    }
    schema = get_num(r, root, "", "schema", J_INT);
    if (!isnan(schema) && schema != 1) {
        problem(r, "schema", "schema version %.0f is not supported (this moetune reads version 1)",
                schema);
        return;
    }
    m->version = get_str(r, root, "", "moetune_version", 0);
    m->created = get_str(r, root, "", "created", 0);

    o = get(r, root, "", "contract", J_OBJ, path);
    m->contract_name = get_str(r, o, path, "name", 0);
    m->contract_path = get_str(r, o, path, "path", 0);
    m->fingerprint = get_str(r, o, path, "fingerprint", 0);
    m->stack = get_map(r, o, path, "stack", 0);

    o = get(r, root, "", "hardware", J_OBJ, path);
    m->gpu = get_str(r, o, path, "gpu", 0);
    m->gpus = get_num(r, o, path, "gpus", J_INT);
    m->gpus_per_node = get_num(r, o, path, "gpus_per_node", J_INT);
    m->memory_gb = get_num(r, o, path, "memory_gb", J_NUM);

    m->strategy = get_str(r, root, "", "strategy", 0);
    m->status = get_enum(r, root, "", "status", statuses);

    o = get(r, root, "", "budget", J_OBJ, path);
    m->gh_limit = get_num(r, o, path, "gpu_hours_limit", J_NUM | J_NULL);
    m->gh_used = get_num(r, o, path, "gpu_hours_used", J_NUM);
    m->runs_limit = get_num(r, o, path, "runs_limit", J_INT | J_NULL);
    m->runs_used = get_num(r, o, path, "runs_used", J_INT);
    m->deadline = get_str(r, o, path, "deadline", 1);
    m->stopped_because = get_str(r, o, path, "stopped_because", 0);

    o = get(r, root, "", "baseline", J_OBJ, path);
    m->base_config = get_map(r, o, path, "config", 0);
    m->base_label = get_str(r, o, path, "label", 0);
    m->base_reasons = get_reasons(r, o, path);
    read_basefit(r, o, path, &m->fit);

    o = get(r, root, "", "recipe", J_OBJ, path);
    m->config = get_map(r, o, path, "config", 0);
    m->label = get_enum(r, o, path, "label", labels);
    m->reasons = get_reasons(r, o, path);
    m->change = get_changes(r, o, path, "changes");
    m->megatron_args = get_strs(r, o, path, "megatron_args");
    m->bridge_overrides = get_strs(r, o, path, "bridge_overrides");
    m->env = get_map(r, o, path, "env", 0);
    m->command_diff = get_strs(r, o, path, "command_diff");
    if (cJSON_GetObjectItemCaseSensitive(o, "notes"))
        m->notes = get_strs(r, o, path, "notes");
    o = get(r, o, path, "meshes", J_OBJ, ep);
    m->mesh_attention = get_str(r, o, ep, "attention", 0);
    m->mesh_moe = get_str(r, o, ep, "moe", 0);

    a = get(r, root, "", "decisions", J_ARR, NULL);
    if (a && (m->dec = ar_alloc(r->ar, array_len(a) * sizeof(decision)))) {
        i = 0;
        cJSON_ArrayForEach(e, a)
        {
            path_idx(ep, "decisions", i);
            m->dec[i].index = NAN;
            if (check(r, e, ep, J_OBJ))
                read_decision(r, e, ep, &m->dec[i]);
            i++;
        }
        m->ndec = i;
        /* ids name plots and anchors (ab-ID) and the store's decision/ID:
         * two decisions with one id would point at one of them */
        for (i = 1; i < m->ndec; i++) {
            size_t k;
            if (isnan(m->dec[i].index))
                continue;
            for (k = 0; k < i && m->dec[k].index != m->dec[i].index; k++)
                ;
            if (k < i) {
                path_idx(ep, "decisions", i);
                path_key(path, ep, "index");
                problem(r, path, "%.0f is also decisions[%zu].index; decision ids are unique",
                        m->dec[i].index, k);
            }
        }
    }

    a = get(r, root, "", "timeline", J_ARR, NULL);
    if (a && (m->tl = ar_alloc(r->ar, array_len(a) * sizeof(tpoint)))) {
        i = 0;
        cJSON_ArrayForEach(e, a)
        {
            tpoint *t = &m->tl[i];
            path_idx(ep, "timeline", i);
            t->order = i++;
            t->run = t->gpu_hours = t->tflops = t->best = NAN;
            if (!check(r, e, ep, J_OBJ))
                continue;
            t->run = get_num(r, e, ep, "run", J_INT);
            t->gpu_hours = get_num(r, e, ep, "gpu_hours", J_NUM);
            t->tflops = get_num(r, e, ep, "tflops", J_NUM | J_NULL);
            t->best = get_num(r, e, ep, "best_tflops", J_NUM | J_NULL);
            t->phase = get_str(r, e, ep, "phase", 0);
        }
        m->ntl = i;
        if (!r->problems)
            qsort(m->tl, m->ntl, sizeof *m->tl, tpoint_cmp);
    }

    a = get(r, root, "", "memory", J_ARR, NULL);
    if (a && (m->mem = ar_alloc(r->ar, array_len(a) * sizeof(mem)))) {
        i = 0;
        cJSON_ArrayForEach(e, a)
        {
            mem *me = &m->mem[i];
            path_idx(ep, "memory", i++);
            if (!check(r, e, ep, J_OBJ))
                continue;
            me->name = get_str(r, e, ep, "name", 0);
            me->capacity = get_num(r, e, ep, "capacity_gb", J_NUM);
            me->headroom = get_num(r, e, ep, "headroom_gb", J_NUM);
            me->per_gpu = get_vec(r, e, ep, "per_gpu_gb", 1);
            read_mem_more(r, e, ep, me, m->gpus);
        }
        m->nmem = i;
    }

    o = get(r, root, "", "walls", J_OBJ | J_NULL, path);
    if (o) {
        read_wall(r, o, path, "before", &m->before);
        read_wall(r, o, path, "after", &m->after);
    }

    a = get(r, root, "", "ablation", J_ARR, NULL);
    if (a && (m->abl = ar_alloc(r->ar, array_len(a) * sizeof(ablation)))) {
        i = 0;
        cJSON_ArrayForEach(e, a)
        {
            ablation *ab = &m->abl[i];
            path_idx(ep, "ablation", i++);
            ab->gain_without = ab->p = NAN;
            if (!check(r, e, ep, J_OBJ))
                continue;
            ab->knob = get_str(r, e, ep, "knob", 0);
            ab->to = get_value(r, e, ep, "to");
            ab->gain_without = get_num(r, e, ep, "gain_without", J_NUM | J_NULL);
            ab->p = get_num(r, e, ep, "p_value", J_NUM | J_NULL);
            ab->kept = get_bool(r, e, ep, "kept");
            ab->reason = get_str(r, e, ep, "reason", 0);
        }
        m->nabl = i;
    }

    read_validation(r, root, &m->val);
    m->ablation_complete = -1;
    if (cJSON_GetObjectItemCaseSensitive(root, "ablation_complete"))
        m->ablation_complete = get_bool(r, root, "", "ablation_complete");

    m->total_gain = get_num(r, root, "", "total_gain", J_NUM | J_NULL);
    if (!isnan(m->total_gain)) {
        if (!m->val.present)
            problem(r, "total_gain",
                    "is %g but there is no validation; the total gain is what the final "
                    "validation measured (null without one)",
                    m->total_gain);
        else if (isnan(m->val.gain) ||
                 fabs(m->total_gain - m->val.gain) > 1e-9 * fmax(1, fabs(m->val.gain)))
            problem(r, "total_gain",
                    "is %g but validation.gain is %g; the total gain is what the final "
                    "validation measured, never a sum of earlier A/Bs",
                    m->total_gain, m->val.gain);
    }
}

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

static void svg_open(sb *b, const char *plot, int w, int h, const char *label)
{
    sb_printf(b,
              "<svg class=\"plot\" data-plot=\"%s\" viewBox=\"0 0 %d %d\" width=\"%d\" "
              "height=\"%d\" role=\"img\" aria-label=\"",
              plot, w, h, w, h);
    sb_html(b, label);
    sb_puts(b, "\">");
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
    const vec *s;
    double median;
    const char *color;
} arm_view;

/* A strip plot: one row per arm, every sample a dot (jittered), the
 * interquartile box and range behind, the median a black bar. */
static void svg_strip(sb *b, const char *plot, const char *label, const arm_view *arms,
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
        sb_printf(b,
                  "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#eaeef2\"/>"
                  "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>",
                  tx, T, tx, base, tx, base + 14, ticks[i]);
    }
    sb_printf(b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#8c959f\"/>", L, base,
              W - R, base);
    sb_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">step time (s)</text>", W - R,
              base + 28);
    for (i = 0; i < narms; i++) {
        const vec *s = arms[i].s;
        int y = T + ROW * i + ROW / 2;
        size_t n = 0;
        double *sorted = malloc((s->n ? s->n : 1) * sizeof(double));
        sb_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", L - 8, y + 4);
        sb_html(b, arms[i].label);
        sb_printf(b, " (n=%zu)</text>", s->n);
        for (k = 0; sorted && k < s->n; k++)
            if (isfinite(s->v[k]))
                sorted[n++] = s->v[k];
        if (sorted && n) {
            qsort(sorted, n, sizeof *sorted, dbl_cmp);
            sb_printf(b,
                      "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\" "
                      "stroke-opacity=\"0.6\"/>",
                      ax(&x, sorted[0]), y, ax(&x, sorted[n - 1]), y, arms[i].color);
            if (n >= 2) {
                double q1 = ax(&x, quantile(sorted, n, 0.25));
                double q3 = ax(&x, quantile(sorted, n, 0.75));
                sb_printf(b,
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
            sb_printf(b,
                      "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\" fill-opacity=\"0.75\"/>",
                      ax(&x, s->v[k]), y + jit * 16, arms[i].color);
        }
        if (isfinite(arms[i].median)) {
            double mx = ax(&x, arms[i].median);
            sb_printf(b,
                      "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#1f2328\" "
                      "stroke-width=\"2.5\"><title>median %.5g s</title></line>",
                      mx, y - 15, mx, y + 15, arms[i].median);
        }
    }
    sb_puts(b, "</svg>");
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
static void svg_throughput(sb *b, const model *m)
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
        sb_printf(b,
                  "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#eaeef2\"/>"
                  "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>",
                  L, ty, W - R, ty, L - 6, ty + 4, ticks[i]);
    }
    nt = nice_ticks(x0, x1, 10, ticks, 16);
    for (i = 0; i < nt; i++) {
        double tx = ax(&x, ticks[i]);
        if (ticks[i] != floor(ticks[i]))
            continue;
        sb_printf(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>", tx,
                  H - B + 16, ticks[i]);
    }
    sb_printf(b,
              "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#8c959f\"/>"
              "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#8c959f\"/>",
              L, H - B, W - R, H - B, L, T, L, H - B);
    sb_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">run</text>", W - R, H - 8);
    sb_printf(b,
              "<text x=\"14\" y=\"%d\" transform=\"rotate(-90 14 %d)\" "
              "text-anchor=\"middle\">TFLOP/s per GPU</text>",
              (T + H - B) / 2, (T + H - B) / 2);
    /* the accepted best: a step line, broken where it is null */
    sb_puts(b, "<path fill=\"none\" stroke=\"#1e7b34\" stroke-width=\"2\" d=\"");
    for (k = 0; k < m->ntl; k++) {
        const tpoint *t = &m->tl[k];
        if (!isfinite(t->best)) {
            pen = 0;
            continue;
        }
        if (!pen)
            sb_printf(b, "M%.1f %.1f", ax(&x, t->run), ax(&y, t->best));
        else
            sb_printf(b, "H%.1fV%.1f", ax(&x, t->run), ax(&y, t->best));
        pen = 1;
    }
    if (!m->ntl)
        sb_printf(b, "M%d %d", L, H - B);
    sb_puts(b, "\"/>");
    for (k = 0; k < m->ntl; k++) {
        const tpoint *t = &m->tl[k];
        double px = ax(&x, t->run);
        int j;
        for (j = 0; j < nseen && strcmp(seen[j], t->phase ? t->phase : ""); j++)
            ;
        if (j == nseen && nseen < 16)
            seen[nseen++] = t->phase ? t->phase : "";
        if (isfinite(t->tflops))
            sb_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>", px,
                      ax(&y, t->tflops), phase_color(t->phase));
        else
            sb_printf(b,
                      "<path d=\"M%.1f %.1fl6 6m0 -6l-6 6\" stroke=\"#b3261e\" "
                      "stroke-width=\"1.5\"/>",
                      px - 3, (double)(H - B - 9));
    }
    /* legend */
    legend_x = L + 8;
    sb_printf(b,
              "<line x1=\"%d\" y1=\"14\" x2=\"%d\" y2=\"14\" stroke=\"#1e7b34\" "
              "stroke-width=\"2\"/><text x=\"%d\" y=\"18\">incumbent, median of its runs so "
              "far</text>",
              legend_x, legend_x + 18, legend_x + 22);
    legend_x += 250;
    for (i = 0; i < nseen && legend_x < W - 120; i++) {
        sb_printf(b, "<circle cx=\"%d\" cy=\"14\" r=\"3.5\" fill=\"%s\"/><text x=\"%d\" y=\"18\">",
                  legend_x, phase_color(seen[i]), legend_x + 8);
        sb_html(b, seen[i]);
        sb_puts(b, "</text>");
        legend_x += 16 + 7 * (int)(strlen(seen[i]) < 20 ? strlen(seen[i]) : 20);
    }
    sb_printf(b,
              "<path d=\"M%d 11l6 6m0 -6l-6 6\" stroke=\"#b3261e\" stroke-width=\"1.5\"/>"
              "<text x=\"%d\" y=\"18\">failed run</text>",
              legend_x, legend_x + 10);
    sb_puts(b, "</svg>");
}

/* Per-GPU peak memory as bars against the capacity and the headroom limit:
 * every GPU, or (roles) the hottest GPU of each role, labelled by rank. */
static void svg_memory(sb *b, const mem *e, const char *plot, int roles)
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
        sb_printf(b,
                  "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#eaeef2\"/>"
                  "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>",
                  L, ty, W - R, ty, L - 6, ty + 4, ticks[i]);
    }
    sb_printf(b,
              "<text x=\"12\" y=\"%d\" transform=\"rotate(-90 12 %d)\" "
              "text-anchor=\"middle\">GB</text>",
              (T + H - B) / 2, (T + H - B) / 2);
    every = n > 32 ? (n + 15) / 16 : 1;
    for (k = 0; k < n; k++) {
        double v = roles ? e->roles[k].peak : e->per_gpu.v[k];
        double bx = L + band * (double)k + band * 0.15;
        size_t gpu = roles ? (size_t)e->roles[k].rank : k;
        if (k % every == 0)
            sb_printf(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%zu</text>",
                      L + band * ((double)k + 0.5), H - B + 14, gpu);
        if (roles) {
            sb_printf(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">",
                      L + band * ((double)k + 0.5), H - B + 26);
            sb_html(b, e->roles[k].role);
            sb_puts(b, "</text>");
        }
        if (!isfinite(v)) {
            sb_printf(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">?</text>",
                      L + band * ((double)k + 0.5), H - B - 4);
            continue;
        }
        sb_printf(b,
                  "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\">"
                  "<title>GPU %zu: %.2f GB</title></rect>",
                  bx, ax(&y, fmax(v, 0)), band * 0.7, (H - B) - ax(&y, fmax(v, 0)),
                  v > limit ? "#c0392b" : "#4a78b5", gpu, v);
    }
    sb_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">GPU</text>", W - R,
              H - (roles ? 0 : 6));
    sb_printf(b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#8c959f\"/>", L, H - B,
              W - R, H - B);
    sb_printf(b,
              "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#b3261e\" "
              "stroke-width=\"1.5\" stroke-dasharray=\"6 3\"/>"
              "<text x=\"%d\" y=\"%.1f\">capacity %.4g GB</text>",
              L, ax(&y, e->capacity), W - R, ax(&y, e->capacity), W - R + 6,
              ax(&y, e->capacity) + 4, e->capacity);
    sb_printf(b,
              "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#bf8700\" "
              "stroke-width=\"1.5\" stroke-dasharray=\"3 3\"/>"
              "<text x=\"%d\" y=\"%.1f\">limit %.4g GB</text>",
              L, ax(&y, limit), W - R, ax(&y, limit), W - R + 6, ax(&y, limit) + 14, limit);
    sb_puts(b, "</svg>");
}

/* Wall breakdown before and after as 100% bars: the shares partition each
 * profiled window (read_wall refused any that do not add up to 100%). */
static void svg_walls(sb *b, const wall *before, const wall *after)
{
    const wall *rows[2] = {before, after};
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
        sb_printf(b,
                  "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#eaeef2\"/>"
                  "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g%%</text>",
                  tx, T, tx, base, tx, base + 14, ticks[i] * 100);
    }
    sb_printf(b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#8c959f\"/>", L, base,
              W - R, base);
    for (i = 0, nrows = 0; i < 2; i++) {
        int y;
        double at = 0;
        if (!rows[i]->present)
            continue;
        y = T + ROW * nrows++ + 8;
        sb_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>", L - 8, y + 18,
                  names[i]);
        for (j = 0; j < NSHARES; j++) {
            double s = fmax(rows[i]->share[j], 0), x0 = ax(&x, at), x1 = ax(&x, at + s);
            at += s;
            if (!(s > 0))
                continue;
            sb_printf(b,
                      "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"28\" fill=\"%s\">"
                      "<title>%s %.1f%%</title></rect>",
                      x0, y, x1 - x0, share_colors[j], share_names[j], s * 100);
            if (x1 - x0 > 38)
                sb_printf(b,
                          "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" "
                          "style=\"fill:#fff\">%.0f%%</text>",
                          (x0 + x1) / 2, y + 18, s * 100);
        }
    }
    for (j = 0, lx = L; j < NSHARES; j++) {
        sb_printf(b,
                  "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                  "<text x=\"%d\" y=\"%d\">%s</text>",
                  lx, base + 28, share_colors[j], lx + 16, base + 38, share_names[j]);
        lx += 30 + 6 * (int)strlen(share_names[j]);
    }
    sb_puts(b, "</svg>");
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
static void sb_label_why(sb *b, const char *label, const strs *why, int md)
{
    size_t i;
    if (!why->n) {
        (md ? sb_md : sb_html)(b, label_words(label));
        return;
    }
    sb_puts(b, "benchmark-only because ");
    for (i = 0; i < why->n; i++) {
        if (i)
            sb_puts(b, "; ");
        (md ? sb_md : sb_html)(b, why->v[i]);
    }
}

/* An arm's throughput: "TF (logged|computed)". */
static void sb_tflops(sb *b, const arm *a)
{
    sb_num(b, "%.4g", a->tflops);
    if (a->tflops_source && !isnan(a->tflops))
        sb_printf(b, " (%s)", a->tflops_source);
}

static void sb_window(sb *b, const validation *v)
{
    if (isnan(v->window[0]))
        sb_puts(b, "the steady window");
    else
        sb_printf(b, "steps %.0f-%.0f", v->window[0], v->window[1]);
}

static int is_flag(const char *a)
{
    return a[0] == '-' && (a[1] == '-' || (a[1] >= 'A' && a[1] <= 'Z') ||
                           (a[1] >= 'a' && a[1] <= 'z'));
}

/* The Megatron-LM arguments as shell text, one flag with its values per
 * line. */
static void sb_flags(sb *b, const model *m)
{
    size_t i;
    for (i = 0; i < m->megatron_args.n; i++) {
        const char *a = m->megatron_args.v[i];
        if (i)
            sb_puts(b, is_flag(a) ? " \\\n" : " ");
        sb_shword(b, a);
    }
    sb_puts(b, m->megatron_args.n ? "\n" : "# no arguments\n");
}

/* The environment as shell assignments, one a line. */
static void sb_env(sb *b, const model *m)
{
    size_t i;
    for (i = 0; i < m->env.n; i++) {
        sb_puts(b, m->env.key[i]);
        sb_putn(b, "=", 1);
        sb_shword(b, m->env.val[i]);
        sb_putn(b, "\n", 1);
    }
    if (!m->env.n)
        sb_puts(b, "# no variables\n");
}

/* "9.6 of 24", or "14 (no limit)". */
static void sb_used(sb *b, const char *fmt, double used, double limit)
    __attribute__((format(printf, 2, 0)));
static void sb_used(sb *b, const char *fmt, double used, double limit)
{
    sb_num(b, fmt, used);
    if (isnan(limit)) {
        sb_puts(b, " (no limit)");
        return;
    }
    sb_puts(b, " of ");
    sb_num(b, fmt, limit);
}

static void sb_samples(sb *b, const vec *s)
{
    size_t k;
    if (!s->n)
        sb_puts(b, "none");
    for (k = 0; k < s->n; k++) {
        if (k)
            sb_puts(b, ", ");
        sb_num(b, "%.5g", s->v[k]);
    }
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

/* Whether the base fits, in words (plain text; the caller escapes it). */
static void fit_words(sb *t, const basefit *f)
{
    size_t i;
    sb_puts(t, f->fits == 1 ? "yes" : f->fits == 0 ? "no" : "unknown (the base does not run)");
    if (isfinite(f->est))
        sb_printf(t, ": estimate %.1f GB", f->est);
    else
        sb_puts(t, ": no estimate");
    if (f->probe_outcome) {
        sb_printf(t, ", probe %s", f->probe_outcome);
        if (isfinite(f->probe_peak))
            sb_printf(t, " (hottest GPU %.1f GB)", f->probe_peak);
    } else {
        sb_puts(t, ", not probed");
    }
    if (isfinite(f->usable))
        sb_printf(t, ", of %.1f GB usable", f->usable);
    if (isfinite(f->uncertainty))
        sb_printf(t, " (estimate uncertainty %.0f%%)", 100 * f->uncertainty);
    if (f->fits == 1)
        return;
    if (f->has_fitted && f->fitted.n) {
        sb_puts(t, ". Not a usable base: the fit phase made it fit with ");
        for (i = 0; i < f->fitted.n; i++)
            sb_printf(t, "%s%s=%s", i ? ", " : "", f->fitted.v[i].knob ? f->fitted.v[i].knob : "",
                      f->fitted.v[i].to ? f->fitted.v[i].to : "");
        sb_puts(t, ", and that config is the validation's control");
    } else if (f->fits == 0) {
        sb_puts(t, ". Not a usable base, and no memory change of the space made it fit");
    }
}

/* A failed tune has no recipe: what stands in the recipe's place is the base
 * as given, and the report says why it is not recommended. */
static void no_recipe_words(sb *t, const model *m)
{
    const basefit *f = &m->fit;
    sb_puts(t, "No usable recipe. ");
    if (f->present && f->fits == 0)
        sb_puts(t, "The base config does not fit in memory and no memory change of the space "
                   "made it fit");
    else if (f->present && f->fits < 0)
        sb_puts(t, "The base config does not run");
    else if (f->present && f->fits != 1)
        sb_puts(t, "The base config does not fit in memory");
    else
        sb_puts(t, "The tune failed");
    sb_printf(t,
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
static int no_recipe(const model *m) { return is_failed(m) || base_unusable(m); }

static void h_kv(sb *b, const char *key, const char *val)
{
    sb_printf(b, "<tr><th>%s</th><td>", key);
    sb_html(b, val);
    sb_puts(b, "</td></tr>\n");
}

static void h_code(sb *b, const char *s)
{
    sb_puts(b, "<code>");
    sb_html(b, s);
    sb_puts(b, "</code>");
}

static void h_map_table(sb *b, const map *m, const char *k, const char *v)
{
    size_t i;
    if (!m->n) {
        sb_puts(b, "<p class=\"note\">none</p>\n");
        return;
    }
    sb_printf(b, "<table><tr><th>%s</th><th>%s</th></tr>\n", k, v);
    for (i = 0; i < m->n; i++) {
        sb_puts(b, "<tr><td>");
        h_code(b, m->key[i]);
        sb_puts(b, "</td><td>");
        h_code(b, m->val[i]);
        sb_puts(b, "</td></tr>\n");
    }
    sb_puts(b, "</table>\n");
}

static void h_changes(sb *b, const changes *c)
{
    size_t i;
    for (i = 0; i < c->n; i++) {
        if (i)
            sb_puts(b, "<br>");
        h_code(b, c->v[i].knob);
        sb_puts(b, ": ");
        h_code(b, c->v[i].from);
        sb_puts(b, " &rarr; ");
        h_code(b, c->v[i].to);
    }
}

static void h_banner(sb *b, const model *m)
{
    const validation *v = &m->val;
    if (!v->present) {
        sb_puts(b, "<div class=\"banner warn\"><strong>No validation was run</strong>, so no "
                   "total gain is claimed (status: ");
        sb_html(b, m->status);
        sb_puts(b, ").</div>\n");
        return;
    }
    if (v->confirmed) {
        sb_puts(b, "<div class=\"banner ok\"><strong>Validated gain: ");
        sb_pct(b, v->gain);
        sb_puts(b, "</strong> shorter median step time, winner against baseline over ");
        sb_window(b, v);
        sb_puts(b, " (");
        sb_secs(b, v->base.median);
        sb_puts(b, " &rarr; ");
        sb_secs(b, v->win.median);
        sb_puts(b, "; CI ");
        sb_ci(b, v->has_ci, v->ci);
        sb_puts(b, ", p = ");
        sb_p(b, v->p);
        sb_puts(b, "). This is the total gain, as the final validation measured it.");
        if (v->recommendation && !strncmp(v->recommendation, "benchmark only: ", 16)) {
            sb_puts(b, "\n<p class=\"rec\">Recommendation: ");
            sb_html(b, v->recommendation);
            sb_puts(b, "</p>");
        }
        sb_puts(b, "</div>\n");
        return;
    }
    sb_puts(b, "<div class=\"banner bad\"><strong>Validation did not confirm the winner.</strong> "
               "Measured over ");
    sb_window(b, v);
    sb_puts(b, ", the winner's gain was ");
    sb_pct(b, v->gain);
    sb_puts(b, " (CI ");
    sb_ci(b, v->has_ci, v->ci);
    sb_puts(b, ", p = ");
    sb_p(b, v->p);
    sb_puts(b, "), which does not confirm an improvement; no gain is claimed.\n"
               "<p class=\"rec\">Recommendation: ");
    sb_html(b, v->recommendation);
    sb_puts(b, "</p></div>\n");
}

static void h_summary(sb *b, const model *m)
{
    sb_puts(b, "<section id=\"summary\"><h2>Summary</h2>\n");
    h_banner(b, m);
    sb_puts(b, "<table>\n");
    h_kv(b, "Contract", m->contract_name);
    h_kv(b, "Contract file", m->contract_path);
    sb_puts(b, "<tr><th>Fingerprint</th><td>");
    h_code(b, m->fingerprint);
    sb_puts(b, "</td></tr>\n<tr><th>Hardware</th><td>");
    sb_num(b, "%.0f", m->gpus);
    sb_puts(b, " &times; ");
    sb_html(b, m->gpu);
    sb_puts(b, " (");
    sb_num(b, "%.0f", m->gpus_per_node);
    sb_puts(b, " per node, ");
    sb_num(b, "%.4g", m->memory_gb);
    sb_puts(b, " GB each)</td></tr>\n");
    h_kv(b, "Strategy", m->strategy);
    h_kv(b, "Status", m->status);
    sb_printf(b, "<tr><th>Label</th><td><span class=\"badge %s\">",
              m->label && !strcmp(m->label, "benchmark-only") ? "bo" : "te");
    sb_html(b, m->label);
    sb_puts(b, "</span></td></tr>\n<tr><th>");
    sb_puts(b, m->val.present && m->val.confirmed ? "Total gain (validated)"
                                                  : "Total gain");
    sb_puts(b, "</th><td>");
    if (m->val.present && m->val.confirmed)
        sb_pct(b, m->val.gain);
    else if (m->val.present) {
        sb_puts(b, "none claimed (validation measured ");
        sb_pct(b, m->val.gain);
        sb_puts(b, ", not confirmed)");
    } else
        sb_puts(b, "none claimed (no validation)");
    sb_puts(b, "</td></tr>\n<tr><th>GPU hours</th><td>");
    sb_used(b, "%.4g", m->gh_used, m->gh_limit);
    sb_puts(b, "</td></tr>\n<tr><th>Runs</th><td>");
    sb_used(b, "%.0f", m->runs_used, m->runs_limit);
    sb_puts(b, "</td></tr>\n");
    if (m->deadline)
        h_kv(b, "Deadline", m->deadline);
    h_kv(b, "Stopped because", m->stopped_because);
    sb_puts(b, "<tr><th>Baseline</th><td>");
    if (m->base_reasons.n)
        sb_label_why(b, m->base_label, &m->base_reasons, 0);
    else
        sb_html(b, m->base_label);
    sb_puts(b, "</td></tr>\n");
    if (m->val.nat.present && m->val.nat.status && !strcmp(m->val.nat.status, "measured")) {
        sb_puts(b, "<tr><th>Gain with natural routing</th><td>");
        if (isfinite(m->val.nat.gain)) {
            sb_pct(b, m->val.nat.gain);
            sb_puts(b, " (");
            sb_html(b, m->val.nat.label);
            sb_puts(b, ")");
        } else {
            sb_puts(b, "none measured: ");
            sb_html(b, m->val.nat.reason ? m->val.nat.reason : "no statistics");
        }
        sb_puts(b, "</td></tr>\n");
    }
    if (m->ablation_complete == 0)
        h_kv(b, "Ablation",
             "winner not ablated: the budget left an accepted change without "
             "its leave-one-out A/B");
    if (m->fit.present) {
        sb t = {0};
        fit_words(&t, &m->fit);
        h_kv(b, "Base fits in memory", t.s ? t.s : "");
        if (t.oom)
            b->oom = 1;
        free(t.s);
    }
    sb_puts(b, "</table>\n<h3>Stack</h3>\n");
    h_map_table(b, &m->stack, "component", "version");
    sb_puts(b, "</section>\n");
}

static void h_recipe(sb *b, const model *m)
{
    size_t i;
    sb_puts(b, "<section id=\"recipe\"><h2>Recipe</h2>\n<p>Label: ");
    sb_printf(b, "<span class=\"badge %s\">",
              m->label && !strcmp(m->label, "benchmark-only") ? "bo" : "te");
    sb_html(b, m->label);
    sb_puts(b, "</span> &mdash; ");
    sb_label_why(b, m->label, &m->reasons, 0);
    sb_puts(b, ".</p>\n");
    if (m->val.present && !m->val.confirmed) {
        sb_puts(b, "<p class=\"banner bad\">Validation did not confirm the winner; the "
                   "recommendation is: ");
        sb_html(b, m->val.recommendation);
        sb_puts(b, "</p>\n");
    }
    if (no_recipe(m)) {
        sb t = {0};
        no_recipe_words(&t, m);
        sb_puts(b, "<p class=\"banner bad\">");
        sb_html(b, t.s ? t.s : "");
        sb_puts(b, "</p>\n");
        if (t.oom)
            b->oom = 1;
        free(t.s);
    }
    sb_puts(b, "<h3>Changes from the baseline</h3>\n");
    if (!m->change.n && no_recipe(m))
        sb_puts(b, "<p class=\"note\">None: the config shown is the base, not a "
                   "recommendation.</p>\n");
    else if (!m->change.n)
        sb_puts(b, "<p class=\"note\">None: the baseline is the recommendation.</p>\n");
    else {
        sb_puts(b, "<table><tr><th>knob</th><th>from</th><th>to</th></tr>\n");
        for (i = 0; i < m->change.n; i++) {
            sb_puts(b, "<tr><td>");
            h_code(b, m->change.v[i].knob);
            sb_puts(b, "</td><td>");
            h_code(b, m->change.v[i].from);
            sb_puts(b, "</td><td>");
            h_code(b, m->change.v[i].to);
            sb_puts(b, "</td></tr>\n");
        }
        sb_puts(b, "</table>\n");
    }
    if (m->notes.n) {
        sb_puts(b, "<h3>Before you train with it</h3>\n<ul>\n");
        for (i = 0; i < m->notes.n; i++) {
            sb_puts(b, "<li>");
            sb_html(b, m->notes.v[i]);
            sb_puts(b, "</li>\n");
        }
        sb_puts(b, "</ul>\n");
    }
    {
        sb cmd = {0};
        sb_flags(&cmd, m);
        sb_puts(b, "<h3>Megatron-LM flags</h3>\n<pre class=\"cmd\">");
        sb_html(b, cmd.s ? cmd.s : "");
        cmd.n = 0;
        sb_env(&cmd, m);
        sb_puts(b, "</pre>\n<h3>Environment</h3>\n<pre class=\"cmd\">");
        sb_html(b, cmd.s ? cmd.s : "");
        sb_puts(b, "</pre>\n");
        if (cmd.oom)
            b->oom = 1;
        free(cmd.s);
    }
    sb_puts(b, "<h3>Megatron-Bridge overrides</h3>\n<pre>");
    for (i = 0; i < m->bridge_overrides.n; i++) {
        sb_html(b, m->bridge_overrides.v[i]);
        sb_puts(b, "\n");
    }
    if (!m->bridge_overrides.n)
        sb_puts(b, "(none)");
    sb_puts(b, "</pre>\n<h3>Command diff against the baseline</h3>\n<pre class=\"diff\">");
    for (i = 0; i < m->command_diff.n; i++) {
        const char *l = m->command_diff.v[i];
        sb_printf(b, "<span class=\"%s\">", l[0] == '+' ? "add" : l[0] == '-' ? "del" : "ctx");
        sb_html(b, l);
        sb_puts(b, "</span>\n");
    }
    if (!m->command_diff.n)
        sb_puts(b, "(no difference)");
    sb_printf(b, "</pre>\n<details><summary>Full recommended config (%zu knobs)</summary>\n",
              m->config.n);
    sb_puts(b, "<table><tr><th>knob</th><th>value</th><th>baseline</th></tr>\n");
    for (i = 0; i < m->config.n; i++) {
        const char *bv = map_get(&m->base_config, m->config.key[i]);
        sb_puts(b, "<tr><td>");
        h_code(b, m->config.key[i]);
        sb_puts(b, "</td><td>");
        h_code(b, m->config.val[i]);
        sb_puts(b, "</td><td>");
        if (!bv)
            sb_puts(b, "(not set)");
        else if (strcmp(bv, m->config.val[i]))
            h_code(b, bv);
        else
            sb_puts(b, "same");
        sb_puts(b, "</td></tr>\n");
    }
    sb_puts(b, "</table></details>\n</section>\n");
}

static void h_meshes(sb *b, const model *m)
{
    sb_puts(b, "<section id=\"meshes\"><h2>Parallel folding meshes</h2>\n"
               "<div class=\"mesh\"><b>Attention</b>");
    h_code(b, m->mesh_attention);
    sb_puts(b, "</div>\n<div class=\"mesh\"><b>MoE</b>");
    h_code(b, m->mesh_moe);
    sb_puts(b, "</div>\n<p class=\"note\">Attention: TP &times; CP &times; DP &times; PP; "
               "MoE: ETP &times; EP &times; EDP &times; PP.</p>\n</section>\n");
}

static void h_arm_cell(sb *b, const arm *a)
{
    sb_puts(b, "<td class=\"n\">");
    if (!a->present)
        sb_puts(b, "not run");
    else {
        sb_secs(b, a->median);
        sb_printf(b, " (n=%zu)", a->s.n);
    }
    sb_puts(b, "</td>");
}

static int has_samples(const decision *dc) { return dc->control.s.n + dc->candidate.s.n > 0; }

static void h_decisions(sb *b, const model *m)
{
    size_t i, j;
    sb_puts(b, "<section id=\"decisions\"><h2>Decisions</h2>\n");
    if (!m->ndec) {
        sb_puts(b, "<p class=\"note\">No decisions were made.</p>\n</section>\n");
        return;
    }
    sb_puts(b, "<table class=\"dec\"><colgroup><col class=\"c-no\"><col class=\"c-id\">"
               "<col class=\"c-phase\"><col class=\"c-var\"><col class=\"c-wall\">"
               "<col class=\"c-change\"><col class=\"c-verdict\"><col class=\"c-med\">"
               "<col class=\"c-med\"><col class=\"c-gain\"><col class=\"c-ci\">"
               "<col class=\"c-p\"></colgroup>\n<tr><th>#</th><th>id</th><th>phase</th>"
               "<th>variable</th><th>wall</th><th>change</th><th>verdict</th>"
               "<th>control median</th><th>candidate median</th><th>gain</th><th>CI</th>"
               "<th>p</th></tr>\n");
    for (i = 0; i < m->ndec; i++) {
        const decision *dc = &m->dec[i];
        /* #: the decisions in order, 1, 2, 3...; id: the store's number */
        sb_puts(b, "<tr><td class=\"n dno\" rowspan=\"2\">");
        if (has_samples(dc))
            sb_printf(b, "<a href=\"#ab-%.0f\">%zu</a>", dc->index, i + 1);
        else
            sb_printf(b, "%zu", i + 1);
        sb_puts(b, "</td><td class=\"n\" rowspan=\"2\">");
        sb_num(b, "%.0f", dc->index);
        sb_puts(b, "</td><td>");
        sb_html(b, dc->phase);
        sb_puts(b, "</td><td>");
        h_code(b, dc->variable);
        {
            char aw[80];
            arm_words(dc, aw, sizeof aw);
            if (aw[0]) {
                sb_puts(b, "<br><span class=\"arm\">");
                sb_html(b, aw);
                sb_puts(b, "</span>");
            }
        }
        sb_puts(b, "</td><td>");
        sb_html(b, dc->wall ? dc->wall : "");
        sb_puts(b, "</td><td>");
        h_changes(b, &dc->change);
        sb_printf(b, "</td><td class=\"v-%s\">", dc->verdict ? dc->verdict : "none");
        sb_html(b, dc->verdict);
        sb_puts(b, "</td>");
        h_arm_cell(b, &dc->control);
        h_arm_cell(b, &dc->candidate);
        sb_puts(b, "<td class=\"n\">");
        sb_pct(b, dc->gain);
        sb_puts(b, "</td><td class=\"n\">");
        sb_ci(b, dc->has_ci, dc->ci);
        sb_puts(b, "</td><td class=\"n\">");
        sb_p(b, dc->p);
        sb_puts(b, "</td></tr>\n<tr class=\"more\"><td colspan=\"10\"><b>reason</b> ");
        sb_html(b, dc->reason);
        if (dc->repairs.n) {
            sb_puts(b, "<br><b>repairs</b> ");
            for (j = 0; j < dc->repairs.n; j++) {
                if (j)
                    sb_puts(b, "; ");
                sb_html(b, dc->repairs.v[j]);
            }
        }
        if (dc->evidence.n) {
            sb_puts(b, "<br><b>evidence</b> ");
            for (j = 0; j < dc->evidence.n; j++) {
                if (j)
                    sb_puts(b, "; ");
                h_code(b, dc->evidence.key[j]);
                sb_puts(b, " = ");
                sb_html(b, dc->evidence.val[j]);
            }
        }
        sb_puts(b, "</td></tr>\n");
    }
    sb_puts(b, "</table>\n<p class=\"note\">gain: the candidate's median step time "
               "shorter than the control's, as a fraction of the control's. #: the decisions "
               "in the order they were taken. id: the decision's number in the store "
               "(<code>decision/ID</code> in moetune.db; its runs are replicates ID&times;100 "
               "and up); profiled runs take numbers too, so ids may skip.</p>\n</section>\n");
}

static void h_distributions(sb *b, const model *m)
{
    size_t i, n = 0;
    sb_puts(b, "<section id=\"distributions\"><h2>Step-time distributions of each A/B</h2>\n");
    for (i = 0; i < m->ndec; i++)
        n += has_samples(&m->dec[i]);
    if (!n) {
        sb_puts(b, "<p class=\"note\">No A/B was measured.</p>\n</section>\n");
        return;
    }
    sb_puts(b, "<div class=\"grid\">\n");
    for (i = 0; i < m->ndec; i++) {
        const decision *dc = &m->dec[i];
        const char *cand = dc->verdict && !strcmp(dc->verdict, "accepted") ? "#1e7b34"
                           : dc->verdict && !strcmp(dc->verdict, "failed") ? "#b3261e"
                                                                           : "#d9822b";
        arm_view arms[2] = {{"control", &dc->control.s, dc->control.median, "#4a78b5"},
                            {"candidate", &dc->candidate.s, dc->candidate.median, cand}};
        char plot[48], label[PATH_LEN];
        if (!has_samples(dc))
            continue;
        snprintf(plot, sizeof plot, "ab-%.0f", dc->index);
        snprintf(label, sizeof label, "step times of decision %zu (%s): control and candidate",
                 i + 1, dc->variable ? dc->variable : "");
        sb_printf(b, "<figure id=\"%s\"><figcaption><b>#%zu ", plot, i + 1);
        sb_html(b, dc->variable);
        sb_printf(b, "</b> (id %.0f) <span class=\"v-%s\">", dc->index,
                  dc->verdict ? dc->verdict : "none");
        sb_html(b, dc->verdict);
        sb_puts(b, "</span>, gain ");
        sb_pct(b, dc->gain);
        sb_puts(b, ", CI ");
        sb_ci(b, dc->has_ci, dc->ci);
        sb_puts(b, ", p = ");
        sb_p(b, dc->p);
        sb_puts(b, "</figcaption>\n");
        svg_strip(b, plot, label, arms, 2, 440);
        sb_puts(b, "\n<details><summary>samples (s)</summary>control: ");
        sb_samples(b, &dc->control.s);
        sb_puts(b, "<br>candidate: ");
        sb_samples(b, &dc->candidate.s);
        sb_puts(b, "</details></figure>\n");
    }
    sb_puts(b, "</div>\n</section>\n");
}

static void h_throughput(sb *b, const model *m)
{
    double best = NAN;
    size_t k, failed = 0;
    sb_puts(b, "<section id=\"throughput\"><h2>Throughput over the tune</h2>\n");
    if (!m->ntl) {
        sb_puts(b, "<p class=\"note\">No runs were recorded.</p>\n</section>\n");
        return;
    }
    for (k = 0; k < m->ntl; k++) {
        if (isfinite(m->tl[k].best))
            best = m->tl[k].best;
        failed += !isfinite(m->tl[k].tflops);
    }
    sb_printf(b, "<p>%zu runs, %zu without a throughput figure (failed); the accepted best "
                 "config at the last run: ", m->ntl, failed);
    sb_num(b, "%.4g", best);
    sb_puts(b, " TFLOP/s per GPU (its runs' median; the step line is the incumbent's, each "
               "accepted decision moves it, a faster single run of a rejected candidate does "
               "not); ");
    sb_num(b, "%.4g", m->tl[m->ntl - 1].gpu_hours);
    sb_puts(b, " GPU hours at the last run.</p>\n");
    svg_throughput(b, m);
    sb_puts(b, "\n</section>\n");
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

/* The hottest GPU in words: "rank 3 at 71.10 GB (first stage): why". */
static void sb_hottest(sb *b, const mem *e, int html)
{
    sb_printf(b, "rank %.0f at %.2f GB (", e->hot_rank, e->hot_peak);
    if (html)
        sb_html(b, e->hot_role);
    else
        sb_md(b, e->hot_role);
    sb_puts(b, "): ");
    if (html)
        sb_html(b, e->hot_why);
    else
        sb_md(b, e->hot_why);
}

static void h_memory(sb *b, const model *m)
{
    size_t i, k;
    sb_puts(b, "<section id=\"memory\"><h2>Per-GPU peak memory</h2>\n");
    if (!m->nmem) {
        sb_puts(b, "<p class=\"note\">No memory figures were recorded.</p>\n</section>\n");
        return;
    }
    for (i = 0; i < m->nmem; i++) {
        const mem *e = &m->mem[i];
        char plot[64];
        double hot = NAN;
        size_t hot_k = 0, known = 0;
        int roles = e->per_gpu.n > MEM_EVERY_GPU && e->nroles > 0;
        for (k = 0; k < e->per_gpu.n; k++)
            if (isfinite(e->per_gpu.v[k])) {
                known++;
                if (!(e->per_gpu.v[k] <= hot)) {
                    hot = e->per_gpu.v[k];
                    hot_k = k;
                }
            }
        plot_name(plot, sizeof plot, "memory", e->name, i);
        sb_puts(b, "<figure><figcaption><b>");
        sb_html(b, e->name);
        sb_puts(b, "</b>: ");
        if (e->has_hot) {
            sb_puts(b, "<span class=\"hottest\">hottest GPU: ");
            sb_hottest(b, e, 1);
            sb_puts(b, "</span>");
        } else if (isnan(hot))
            sb_puts(b, "no per-GPU figures");
        else
            sb_printf(b, "hottest GPU %zu at %.2f GB", hot_k, hot);
        sb_printf(b, "; %.4g GB capacity, limit %.4g GB (headroom %.4g GB); figures for %zu of "
                     "%zu GPUs",
                  e->capacity, e->capacity - e->headroom, e->headroom, known, e->per_gpu.n);
        if (e->source) {
            sb_puts(b, " (source: ");
            sb_html(b, e->source);
            sb_puts(b, ")");
        }
        if (roles)
            sb_printf(b, ". %zu GPUs: the chart shows the hottest GPU of each role; every GPU's "
                         "figure is in bundle.json",
                      e->per_gpu.n);
        sb_puts(b, "</figcaption>\n");
        svg_memory(b, e, plot, roles);
        if (e->nroles) {
            sb_puts(b, "\n<table class=\"roles\"><tr><th>role</th><th>hottest GPU</th>"
                       "<th>peak</th><th>median GPU of its stage</th></tr>\n");
            for (k = 0; k < e->nroles; k++) {
                sb_puts(b, "<tr><td>");
                sb_html(b, e->roles[k].role);
                sb_printf(b, "</td><td class=\"n\">%.0f</td><td class=\"n\">%.2f GB</td>"
                             "<td class=\"n\">",
                          e->roles[k].rank, e->roles[k].peak);
                sb_num(b, "%.2f GB", e->roles[k].median);
                sb_puts(b, "</td></tr>\n");
            }
            sb_puts(b, "</table>");
        }
        sb_puts(b, "</figure>\n");
    }
    sb_puts(b, "</section>\n");
}

/* The window a wall came from: "steps 3-5 (6.21 s)", "one modelled step
 * (2.07 s)" (a wall without steps, as the model executor writes it). */
static void sb_wall_window(sb *b, const wall *w)
{
    if (w->has_steps) {
        if (w->steps[0] == w->steps[1])
            sb_printf(b, "step %.0f", w->steps[0]);
        else
            sb_printf(b, "steps %.0f-%.0f", w->steps[0], w->steps[1]);
        if (isfinite(w->window_s)) {
            sb_puts(b, " (");
            sb_secs(b, w->window_s);
            sb_puts(b, ")");
        }
    } else if (isfinite(w->window_s)) {
        sb_puts(b, "one modelled step (");
        sb_secs(b, w->window_s);
        sb_puts(b, ")");
    } else {
        sb_puts(b, "n/a");
    }
}

static void h_wall_row(sb *b, const char *what, const wall *w)
{
    sb_printf(b, "<tr><th>%s</th><td>", what);
    if (!w->present) {
        sb_puts(b, "not profiled</td></tr>\n");
        return;
    }
    sb_html(b, w->wall);
    sb_puts(b, " (runner-up ");
    sb_html(b, w->runner_up);
    sb_puts(b, ", confidence ");
    sb_num(b, "%.2f", w->confidence);
    sb_puts(b, ")</td><td class=\"n\">");
    sb_wall_window(b, w);
    sb_puts(b, "</td></tr>\n");
}

/* What the two profiles are (search/engine.c: the first profile of the
 * retune phase, and the winner's). */
#define WALLS_NOTE_MD                                                                              \
    "\"Before\" is the profile the retune phase began with, of the config after fit and "          \
    "scale (the baseline only when those kept it); \"after\" is the winner's."
#define WALLS_NOTE_HTML                                                                            \
    "&quot;Before&quot; is the profile the retune phase began with, of the config after fit "     \
    "and scale (the baseline only when those kept it); &quot;after&quot; is the winner&#39;s."

static void h_walls(sb *b, const model *m)
{
    int j;
    sb_puts(b, "<section id=\"walls\"><h2>Wall breakdown before and after</h2>\n");
    if (!m->before.present && !m->after.present) {
        sb_puts(b, "<p class=\"note\">No profile was taken.</p>\n</section>\n");
        return;
    }
    sb_puts(b, "<p class=\"note\">" WALLS_NOTE_HTML "</p>\n");
    svg_walls(b, &m->before, &m->after);
    sb_puts(b, "\n<table><tr><th></th><th>dominant wall</th><th>window</th></tr>\n");
    h_wall_row(b, "before", &m->before);
    h_wall_row(b, "after", &m->after);
    sb_puts(b, "</table>\n<table><tr><th>share of the window</th><th>before</th>"
               "<th>after</th></tr>\n");
    for (j = 0; j < NSHARES; j++) {
        sb_printf(b, "<tr><td>%s</td><td class=\"n share-before\">", share_names[j]);
        sb_num(b, "%.1f%%", m->before.present ? m->before.share[j] * 100 : NAN);
        sb_puts(b, "</td><td class=\"n share-after\">");
        sb_num(b, "%.1f%%", m->after.present ? m->after.share[j] * 100 : NAN);
        sb_puts(b, "</td></tr>\n");
    }
    sb_puts(b, "</table>\n<p class=\"note\">The shares partition each profiled window and add "
               "up to 100%: compute time with communication hidden under it is its own share, "
               "beside compute with nothing under it; idle excludes the pipeline bubble, shown "
               "apart; other is time no trace class covers (optimizer step, host work outside "
               "kernels).</p>\n</section>\n");
}

static void h_ablation(sb *b, const model *m)
{
    size_t i;
    sb_puts(b, "<section id=\"ablation\"><h2>Ablation (leave one out)</h2>\n");
    if (!m->nabl) {
        sb_puts(b, "<p class=\"note\">No ablation: no accepted change to remove.</p>\n"
                   "</section>\n");
        return;
    }
    sb_puts(b, "<table><tr><th>knob</th><th>to</th><th>gain without it</th><th>p</th>"
               "<th>kept</th><th>reason</th></tr>\n");
    for (i = 0; i < m->nabl; i++) {
        const ablation *a = &m->abl[i];
        sb_puts(b, "<tr><td>");
        h_code(b, a->knob);
        sb_puts(b, "</td><td>");
        h_code(b, a->to);
        sb_puts(b, "</td><td class=\"n\">");
        sb_pct(b, a->gain_without);
        sb_puts(b, "</td><td class=\"n\">");
        sb_p(b, a->p);
        sb_printf(b, "</td><td class=\"%s\">%s</td><td>", a->kept ? "v-kept" : "v-dropped",
                  a->kept ? "kept" : "dropped");
        sb_html(b, a->reason);
        sb_puts(b, "</td></tr>\n");
    }
    sb_puts(b, "</table>\n</section>\n");
}

/* The natural-routing validation beside the forced one: the
 * training-equivalent gain, or why there is none. */
static void h_natural(sb *b, const natural *n)
{
    if (!n->present)
        return;
    sb_puts(b, "<h3>With natural routing</h3>\n");
    if (strcmp(n->status ? n->status : "", "measured")) {
        sb_puts(b, "<p class=\"note\">No natural-routing validation: ");
        sb_html(b, n->reason);
        sb_puts(b, ".</p>\n");
        return;
    }
    sb_puts(b, "<table><tr><th></th><th>baseline</th><th>winner</th></tr>\n"
               "<tr><th>median step time</th><td class=\"n\">");
    sb_secs(b, n->base.median);
    sb_puts(b, "</td><td class=\"n\">");
    sb_secs(b, n->win.median);
    sb_puts(b, "</td></tr>\n<tr><th>TFLOP/s per GPU</th><td class=\"n\">");
    sb_tflops(b, &n->base);
    sb_puts(b, "</td><td class=\"n\">");
    sb_tflops(b, &n->win);
    sb_puts(b, "</td></tr>\n<tr><th>tokens/s per GPU</th><td class=\"n\">");
    sb_num(b, "%.0f", n->base.tokens);
    sb_puts(b, "</td><td class=\"n\">");
    sb_num(b, "%.0f", n->win.tokens);
    sb_puts(b, "</td></tr>\n</table>\n<table>\n<tr><th>gain (");
    sb_html(b, n->label);
    sb_puts(b, ")</th><td>");
    sb_pct(b, n->gain);
    sb_puts(b, "</td></tr>\n<tr><th>CI</th><td>");
    sb_ci(b, n->has_ci, n->ci);
    sb_puts(b, "</td></tr>\n<tr><th>p</th><td>");
    sb_p(b, n->p);
    sb_printf(b, "</td></tr>\n<tr><th>confirmed</th><td class=\"%s\">%s</td></tr>\n",
              n->confirmed ? "v-accepted" : "v-failed", n->confirmed ? "yes" : "no");
    h_kv(b, "result", n->reason);
    sb_puts(b, "</table>\n");
}

static void h_validation(sb *b, const model *m)
{
    const validation *v = &m->val;
    arm_view arms[2];
    sb_puts(b, "<section id=\"validation\"><h2>Validation: baseline against winner</h2>\n");
    if (!v->present) {
        sb_puts(b, "<p class=\"note\">No validation was run, so no total gain is claimed.</p>\n"
                   "</section>\n");
        return;
    }
    if (!v->confirmed) {
        sb_puts(b, "<div class=\"banner bad\"><strong>Validation did not confirm the winner."
                   "</strong><p class=\"rec\">Recommendation: ");
        sb_html(b, v->recommendation);
        sb_puts(b, "</p></div>\n");
    }
    sb_puts(b, "<table><tr><th></th><th>baseline</th><th>winner</th></tr>\n"
               "<tr><th>median step time</th><td class=\"n\">");
    sb_secs(b, v->base.median);
    sb_puts(b, "</td><td class=\"n\">");
    sb_secs(b, v->win.median);
    sb_printf(b, "</td></tr>\n<tr><th>samples</th><td class=\"n\">%zu</td><td class=\"n\">%zu"
                 "</td></tr>\n<tr><th>TFLOP/s per GPU</th><td class=\"n\">",
              v->base.s.n, v->win.s.n);
    sb_tflops(b, &v->base);
    sb_puts(b, "</td><td class=\"n\">");
    sb_tflops(b, &v->win);
    sb_puts(b, "</td></tr>\n<tr><th>tokens/s per GPU</th><td class=\"n\">");
    sb_num(b, "%.0f", v->base.tokens);
    sb_puts(b, "</td><td class=\"n\">");
    sb_num(b, "%.0f", v->win.tokens);
    sb_puts(b, "</td></tr>\n");
    if (v->base.config_id || v->win.config_id) {
        const arm *arms2[2] = {&v->base, &v->win};
        int k;
        size_t i;
        sb_puts(b, "<tr><th>config id (runs)</th>");
        for (k = 0; k < 2; k++) {
            sb_puts(b, "<td class=\"cfgid\">");
            h_code(b, arms2[k]->config_id ? arms2[k]->config_id : "n/a");
            sb_puts(b, "</td>");
        }
        sb_puts(b, "</tr>\n<tr><th>log folders</th>");
        for (k = 0; k < 2; k++) {
            sb_puts(b, "<td class=\"logdirs\">");
            for (i = 0; i < arms2[k]->log_dirs.n; i++) {
                if (i)
                    sb_puts(b, "<br>");
                h_code(b, arms2[k]->log_dirs.v[i]);
            }
            if (!arms2[k]->log_dirs.n)
                sb_puts(b, "none kept (the executor writes no logs)");
            sb_puts(b, "</td>");
        }
        sb_puts(b, "</tr>\n");
    }
    sb_puts(b, "</table>\n<table>\n<tr><th>window</th><td>");
    sb_window(b, v);
    sb_puts(b, " of ");
    sb_num(b, "%.0f", v->steps);
    sb_puts(b, " steps</td></tr>\n<tr><th>gain</th><td>");
    sb_pct(b, v->gain);
    sb_puts(b, "</td></tr>\n<tr><th>CI</th><td>");
    sb_ci(b, v->has_ci, v->ci);
    sb_puts(b, "</td></tr>\n<tr><th>p</th><td>");
    sb_p(b, v->p);
    sb_printf(b, "</td></tr>\n<tr><th>confirmed</th><td class=\"%s\">%s</td></tr>\n",
              v->confirmed ? "v-accepted" : "v-failed", v->confirmed ? "yes" : "no");
    h_kv(b, "recommendation", v->recommendation);
    sb_puts(b, "</table>\n");
    h_natural(b, &v->nat);
    arms[0] = (arm_view){"baseline", &v->base.s, v->base.median, "#4a78b5"};
    arms[1] = (arm_view){"winner", &v->win.s, v->win.median, v->confirmed ? "#1e7b34" : "#d9822b"};
    if (v->base.s.n + v->win.s.n) {
        sb_puts(b, "<figure><figcaption>Step times in the validation window</figcaption>\n");
        svg_strip(b, "validation", "validation step times: baseline and winner", arms, 2, 900);
        sb_puts(b, "\n<details><summary>samples (s)</summary>baseline: ");
        sb_samples(b, &v->base.s);
        sb_puts(b, "<br>winner: ");
        sb_samples(b, &v->win.s);
        sb_puts(b, "</details></figure>\n");
    }
    sb_puts(b, "</section>\n");
}

static void render_html(sb *b, const model *m)
{
    sb_puts(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
               "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
               "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n"
               "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
               "<title>moetune report: ");
    sb_html(b, m->contract_name);
    sb_printf(b, "</title>\n<style>\n%s</style></head>\n<body>\n<header><h1>moetune report: ",
              html_css);
    sb_html(b, m->contract_name);
    sb_puts(b, "</h1><p class=\"sub\">created ");
    sb_html(b, m->created);
    sb_puts(b, " by moetune ");
    sb_html(b, m->version);
    sb_puts(b, "; strategy ");
    sb_html(b, m->strategy);
    sb_puts(b, "; status ");
    sb_html(b, m->status);
    sb_puts(b, "</p>\n<nav><a href=\"#summary\">summary</a><a href=\"#recipe\">recipe</a>"
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
    sb_printf(b, "<script>\n%s</script>\n</body></html>\n", html_check);
}

/* ---- REPORT.md -------------------------------------------------------- */

static void md_changes(sb *b, const changes *c)
{
    size_t i;
    for (i = 0; i < c->n; i++) {
        if (i)
            sb_puts(b, "; ");
        sb_mdcode(b, c->v[i].knob);
        sb_puts(b, ": ");
        sb_mdcode(b, c->v[i].from);
        sb_puts(b, " -> ");
        sb_mdcode(b, c->v[i].to);
    }
}

static void md_banner(sb *b, const model *m)
{
    const validation *v = &m->val;
    if (!v->present) {
        sb_puts(b, "> **No validation was run**, so no total gain is claimed (status: ");
        sb_md(b, m->status);
        sb_puts(b, ").\n\n");
        return;
    }
    if (v->confirmed) {
        sb_puts(b, "> **Validated gain: ");
        sb_pct(b, v->gain);
        sb_puts(b, "** shorter median step time, winner against baseline over ");
        sb_window(b, v);
        sb_puts(b, " (");
        sb_secs(b, v->base.median);
        sb_puts(b, " -> ");
        sb_secs(b, v->win.median);
        sb_puts(b, "; CI ");
        sb_ci(b, v->has_ci, v->ci);
        sb_puts(b, ", p = ");
        sb_p(b, v->p);
        sb_puts(b, "). This is the total gain, as the final validation measured it.\n");
        if (v->recommendation && !strncmp(v->recommendation, "benchmark only: ", 16)) {
            sb_puts(b, ">\n> **Recommendation:** ");
            sb_md(b, v->recommendation);
            sb_puts(b, "\n");
        }
        sb_puts(b, "\n");
        return;
    }
    sb_puts(b, "> **Validation did not confirm the winner.** Measured over ");
    sb_window(b, v);
    sb_puts(b, ", the winner's gain was ");
    sb_pct(b, v->gain);
    sb_puts(b, " (CI ");
    sb_ci(b, v->has_ci, v->ci);
    sb_puts(b, ", p = ");
    sb_p(b, v->p);
    sb_puts(b, "), which does not confirm an improvement; no gain is claimed.\n>\n"
               "> **Recommendation:** ");
    sb_md(b, v->recommendation);
    sb_puts(b, "\n\n");
}

static void md_arm(sb *b, const arm *a)
{
    if (!a->present) {
        sb_puts(b, "not run");
        return;
    }
    sb_secs(b, a->median);
    sb_printf(b, " (n=%zu)", a->s.n);
}

/* The natural-routing validation in REPORT.md (see h_natural). */
static void md_natural(sb *b, const natural *n)
{
    if (!n->present)
        return;
    sb_puts(b, "\n### With natural routing\n\n");
    if (strcmp(n->status ? n->status : "", "measured")) {
        sb_puts(b, "No natural-routing validation: ");
        sb_md(b, n->reason);
        sb_puts(b, ".\n");
        return;
    }
    sb_puts(b, "| | baseline | winner |\n|---|---:|---:|\n| median step time | ");
    sb_secs(b, n->base.median);
    sb_puts(b, " | ");
    sb_secs(b, n->win.median);
    sb_puts(b, " |\n| TFLOP/s per GPU | ");
    sb_tflops(b, &n->base);
    sb_puts(b, " | ");
    sb_tflops(b, &n->win);
    sb_puts(b, " |\n| tokens/s per GPU | ");
    sb_num(b, "%.0f", n->base.tokens);
    sb_puts(b, " | ");
    sb_num(b, "%.0f", n->win.tokens);
    sb_puts(b, " |\n\n| | |\n|---|---|\n| gain (");
    sb_md(b, n->label);
    sb_puts(b, ") | ");
    sb_pct(b, n->gain);
    sb_puts(b, " |\n| CI | ");
    sb_ci(b, n->has_ci, n->ci);
    sb_puts(b, " |\n| p | ");
    sb_p(b, n->p);
    sb_printf(b, " |\n| confirmed | %s |\n| result | ", n->confirmed ? "yes" : "no");
    sb_md(b, n->reason);
    sb_puts(b, " |\n");
}

static void render_md(sb *b, const model *m)
{
    size_t i, j, maxg = 0;
    sb body = {0};

    sb_puts(b, "# moetune report: ");
    sb_md(b, m->contract_name);
    sb_puts(b, "\n\nCreated ");
    sb_md(b, m->created);
    sb_puts(b, " by moetune ");
    sb_md(b, m->version);
    sb_puts(b, "; strategy ");
    sb_md(b, m->strategy);
    sb_puts(b, "; status ");
    sb_md(b, m->status);
    sb_puts(b, ". Plots: report.html (self-contained).\n\n");
    md_banner(b, m);

    sb_puts(b, "## Summary\n\n| | |\n|---|---|\n| Contract | ");
    sb_md(b, m->contract_name);
    sb_puts(b, " (");
    sb_mdcode(b, m->contract_path);
    sb_puts(b, ") |\n| Fingerprint | ");
    sb_mdcode(b, m->fingerprint);
    sb_puts(b, " |\n| Hardware | ");
    sb_num(b, "%.0f", m->gpus);
    sb_puts(b, " x ");
    sb_md(b, m->gpu);
    sb_puts(b, " (");
    sb_num(b, "%.0f", m->gpus_per_node);
    sb_puts(b, " per node, ");
    sb_num(b, "%.4g", m->memory_gb);
    sb_puts(b, " GB each) |\n| Strategy | ");
    sb_md(b, m->strategy);
    sb_puts(b, " |\n| Status | ");
    sb_md(b, m->status);
    sb_puts(b, " |\n| Label | ");
    sb_md(b, m->label);
    sb_puts(b, " |\n| Total gain | ");
    if (m->val.present && m->val.confirmed) {
        sb_pct(b, m->val.gain);
        sb_puts(b, " (validated)");
    } else if (m->val.present) {
        sb_puts(b, "none claimed (validation measured ");
        sb_pct(b, m->val.gain);
        sb_puts(b, ", not confirmed)");
    } else
        sb_puts(b, "none claimed (no validation)");
    sb_puts(b, " |\n| GPU hours | ");
    sb_used(b, "%.4g", m->gh_used, m->gh_limit);
    sb_puts(b, " |\n| Runs | ");
    sb_used(b, "%.0f", m->runs_used, m->runs_limit);
    if (m->deadline) {
        sb_puts(b, " |\n| Deadline | ");
        sb_md(b, m->deadline);
    }
    sb_puts(b, " |\n| Stopped because | ");
    sb_md(b, m->stopped_because);
    sb_puts(b, " |\n| Baseline | ");
    if (m->base_reasons.n)
        sb_label_why(b, m->base_label, &m->base_reasons, 1);
    else
        sb_md(b, m->base_label);
    if (m->val.nat.present && m->val.nat.status && !strcmp(m->val.nat.status, "measured")) {
        sb_puts(b, " |\n| Gain with natural routing | ");
        if (isfinite(m->val.nat.gain)) {
            sb_pct(b, m->val.nat.gain);
            sb_puts(b, " (");
            sb_md(b, m->val.nat.label);
            sb_puts(b, ")");
        } else {
            sb_puts(b, "none measured: ");
            sb_md(b, m->val.nat.reason ? m->val.nat.reason : "no statistics");
        }
    }
    if (m->ablation_complete == 0)
        sb_puts(b, " |\n| Ablation | winner not ablated: the budget left an accepted change "
                   "without its leave-one-out A/B");
    if (m->fit.present) {
        sb t = {0};
        fit_words(&t, &m->fit);
        sb_puts(b, " |\n| Base fits in memory | ");
        sb_md(b, t.s ? t.s : "");
        if (t.oom)
            b->oom = 1;
        free(t.s);
    }
    sb_puts(b, " |\n\n### Stack\n\n");
    if (!m->stack.n)
        sb_puts(b, "none recorded\n\n");
    else {
        sb_puts(b, "| component | version |\n|---|---|\n");
        for (i = 0; i < m->stack.n; i++) {
            sb_puts(b, "| ");
            sb_mdcode(b, m->stack.key[i]);
            sb_puts(b, " | ");
            sb_mdcode(b, m->stack.val[i]);
            sb_puts(b, " |\n");
        }
        sb_puts(b, "\n");
    }

    sb_puts(b, "## Recipe\n\nLabel: **");
    sb_md(b, m->label);
    sb_puts(b, "**: ");
    sb_label_why(b, m->label, &m->reasons, 1);
    sb_puts(b, ".\n\n");
    if (m->val.present && !m->val.confirmed) {
        sb_puts(b, "Validation did not confirm the winner; the recommendation is: ");
        sb_md(b, m->val.recommendation);
        sb_puts(b, "\n\n");
    }
    if (no_recipe(m)) {
        sb t = {0};
        no_recipe_words(&t, m);
        sb_puts(b, "> **");
        sb_md(b, t.s ? t.s : "");
        sb_puts(b, "**\n\n");
        if (t.oom)
            b->oom = 1;
        free(t.s);
    }
    sb_puts(b, "### Changes from the baseline\n\n");
    if (!m->change.n && no_recipe(m))
        sb_puts(b, "None: the config shown is the base, not a recommendation.\n\n");
    else if (!m->change.n)
        sb_puts(b, "None: the baseline is the recommendation.\n\n");
    else {
        sb_puts(b, "| knob | from | to |\n|---|---|---|\n");
        for (i = 0; i < m->change.n; i++) {
            sb_puts(b, "| ");
            sb_mdcode(b, m->change.v[i].knob);
            sb_puts(b, " | ");
            sb_mdcode(b, m->change.v[i].from);
            sb_puts(b, " | ");
            sb_mdcode(b, m->change.v[i].to);
            sb_puts(b, " |\n");
        }
        sb_puts(b, "\n");
    }
    if (m->notes.n) {
        sb_puts(b, "### Before you train with it\n\n");
        for (i = 0; i < m->notes.n; i++) {
            sb_puts(b, "- ");
            sb_md(b, m->notes.v[i]);
            sb_puts(b, "\n");
        }
        sb_puts(b, "\n");
    }
    sb_puts(b, "### Megatron-LM flags\n\n");
    sb_flags(&body, m);
    sb_mdfence(b, "sh", body.s ? body.s : "");
    body.n = 0;
    sb_puts(b, "### Environment\n\n");
    sb_env(&body, m);
    sb_mdfence(b, "sh", body.s ? body.s : "");
    body.n = 0;
    sb_puts(b, "### Megatron-Bridge overrides\n\n");
    for (i = 0; i < m->bridge_overrides.n; i++) {
        sb_puts(&body, m->bridge_overrides.v[i]);
        sb_putn(&body, "\n", 1);
    }
    sb_mdfence(b, "", m->bridge_overrides.n && body.s ? body.s : "(none)\n");
    body.n = 0;
    sb_puts(b, "### Command diff against the baseline\n\n");
    for (i = 0; i < m->command_diff.n; i++) {
        sb_puts(&body, m->command_diff.v[i]);
        sb_putn(&body, "\n", 1);
    }
    sb_mdfence(b, "diff", m->command_diff.n && body.s ? body.s : "(no difference)\n");
    if (body.oom)
        b->oom = 1;
    free(body.s);

    sb_puts(b, "## Parallel folding meshes\n\n- Attention (TP x CP x DP x PP): ");
    sb_mdcode(b, m->mesh_attention);
    sb_puts(b, "\n- MoE (ETP x EP x EDP x PP): ");
    sb_mdcode(b, m->mesh_moe);
    sb_puts(b, "\n\n## Decisions\n\n");
    if (!m->ndec)
        sb_puts(b, "No decisions were made.\n\n");
    else {
        sb_puts(b, "| # | id | phase | variable | wall | change | repairs | verdict | "
                   "control median | candidate median | gain | CI | p | evidence | reason |\n"
                   "|---:|---:|---|---|---|---|---|---|---:|---:|---:|---:|---:|---|---|\n");
        for (i = 0; i < m->ndec; i++) {
            const decision *dc = &m->dec[i];
            sb_printf(b, "| %zu | ", i + 1);
            sb_num(b, "%.0f", dc->index);
            sb_puts(b, " | ");
            sb_md(b, dc->phase);
            sb_puts(b, " | ");
            sb_mdcode(b, dc->variable);
            {
                char aw[80];
                arm_words(dc, aw, sizeof aw);
                if (aw[0]) {
                    sb_puts(b, " (");
                    sb_md(b, aw);
                    sb_puts(b, ")");
                }
            }
            sb_puts(b, " | ");
            sb_md(b, dc->wall ? dc->wall : "");
            sb_puts(b, " | ");
            md_changes(b, &dc->change);
            sb_puts(b, " | ");
            for (j = 0; j < dc->repairs.n; j++) {
                if (j)
                    sb_puts(b, "; ");
                sb_md(b, dc->repairs.v[j]);
            }
            sb_puts(b, " | ");
            sb_md(b, dc->verdict);
            sb_puts(b, " | ");
            md_arm(b, &dc->control);
            sb_puts(b, " | ");
            md_arm(b, &dc->candidate);
            sb_puts(b, " | ");
            sb_pct(b, dc->gain);
            sb_puts(b, " | ");
            sb_ci(b, dc->has_ci, dc->ci);
            sb_puts(b, " | ");
            sb_p(b, dc->p);
            sb_puts(b, " | ");
            for (j = 0; j < dc->evidence.n; j++) {
                if (j)
                    sb_puts(b, "; ");
                sb_mdcode(b, dc->evidence.key[j]);
                sb_puts(b, " = ");
                sb_md(b, dc->evidence.val[j]);
            }
            sb_puts(b, " | ");
            sb_md(b, dc->reason);
            sb_puts(b, " |\n");
        }
        sb_puts(b, "\ngain: the candidate's median step time shorter than the control's, as a "
                   "fraction of the control's. #: the decisions in the order they were taken. "
                   "id: the decision's number in the store (`decision/ID` in moetune.db; its "
                   "runs are replicates ID x 100 and up); profiled runs take numbers too, so "
                   "ids may skip.\n\n### Samples (step times, s)\n\n");
        for (i = 0; i < m->ndec; i++) {
            const decision *dc = &m->dec[i];
            if (!has_samples(dc))
                continue;
            sb_printf(b, "- #%zu (id %.0f) ", i + 1, dc->index);
            sb_mdcode(b, dc->variable);
            sb_puts(b, ": control ");
            sb_samples(b, &dc->control.s);
            sb_puts(b, "; candidate ");
            sb_samples(b, &dc->candidate.s);
            sb_puts(b, "\n");
        }
        sb_puts(b, "\n");
    }

    sb_puts(b, "## Throughput over the tune\n\n");
    if (!m->ntl)
        sb_puts(b, "No runs were recorded.\n\n");
    else {
        sb_puts(b, "| run | phase | GPU hours | TFLOP/s per GPU | "
                   "incumbent, median of its runs so far |\n"
                   "|---:|---|---:|---:|---:|\n");
        for (i = 0; i < m->ntl; i++) {
            const tpoint *t = &m->tl[i];
            sb_puts(b, "| ");
            sb_num(b, "%.0f", t->run);
            sb_puts(b, " | ");
            sb_md(b, t->phase);
            sb_puts(b, " | ");
            sb_num(b, "%.4g", t->gpu_hours);
            sb_puts(b, " | ");
            if (isnan(t->tflops))
                sb_puts(b, "failed");
            else
                sb_num(b, "%.4g", t->tflops);
            sb_puts(b, " | ");
            sb_num(b, "%.4g", t->best);
            sb_puts(b, " |\n");
        }
        sb_puts(b, "\n");
    }

    sb_puts(b, "## Per-GPU peak memory (GB)\n\n");
    for (i = 0; i < m->nmem; i++)
        if (m->mem[i].has_hot) {
            sb_puts(b, "- ");
            sb_md(b, m->mem[i].name);
            sb_puts(b, ": hottest GPU: ");
            sb_hottest(b, &m->mem[i], 0);
            sb_puts(b, "\n");
        }
    if (m->nmem && m->mem[0].has_hot)
        sb_puts(b, "\n");
    for (i = 0; i < m->nmem; i++)
        if (m->mem[i].per_gpu.n > maxg)
            maxg = m->mem[i].per_gpu.n;
    if (m->nmem && maxg > MEM_EVERY_GPU) {
        /* hundreds of GPUs: the hottest of each role (all in bundle.json) */
        sb_printf(b, "%zu GPUs: the hottest GPU of each role; every GPU's figure is in "
                     "bundle.json.\n\n",
                  maxg);
        for (i = 0; i < m->nmem; i++) {
            const mem *e = &m->mem[i];
            sb_puts(b, "| ");
            sb_md(b, e->name);
            sb_puts(b, ": role | GPU | peak | median GPU of its stage |\n|---|---:|---:|---:|\n");
            for (j = 0; j < e->nroles; j++) {
                sb_puts(b, "| ");
                sb_md(b, e->roles[j].role);
                sb_printf(b, " | %.0f | %.2f | ", e->roles[j].rank, e->roles[j].peak);
                sb_num(b, "%.2f", e->roles[j].median);
                sb_puts(b, " |\n");
            }
            sb_printf(b, "| capacity | | %.4g | |\n| limit (capacity - headroom) | | %.4g | |\n\n",
                      e->capacity, e->capacity - e->headroom);
        }
    } else if (!m->nmem)
        sb_puts(b, "No memory figures were recorded.\n\n");
    else {
        sb_puts(b, "| GPU |");
        for (i = 0; i < m->nmem; i++) {
            sb_puts(b, " ");
            sb_md(b, m->mem[i].name);
            sb_puts(b, " |");
        }
        sb_puts(b, "\n|---:|");
        for (i = 0; i < m->nmem; i++)
            sb_puts(b, "---:|");
        sb_puts(b, "\n");
        for (j = 0; j < maxg; j++) {
            sb_printf(b, "| %zu |", j);
            for (i = 0; i < m->nmem; i++) {
                sb_puts(b, " ");
                if (j < m->mem[i].per_gpu.n)
                    sb_num(b, "%.2f", m->mem[i].per_gpu.v[j]);
                sb_puts(b, " |");
            }
            sb_puts(b, "\n");
        }
        sb_puts(b, "| capacity |");
        for (i = 0; i < m->nmem; i++)
            sb_printf(b, " %.4g |", m->mem[i].capacity);
        sb_puts(b, "\n| limit (capacity - headroom) |");
        for (i = 0; i < m->nmem; i++)
            sb_printf(b, " %.4g |", m->mem[i].capacity - m->mem[i].headroom);
        sb_puts(b, "\n\n");
    }

    sb_puts(b, "## Wall breakdown before and after\n\n");
    if (!m->before.present && !m->after.present)
        sb_puts(b, "No profile was taken.\n\n");
    else {
        const wall *w[2] = {&m->before, &m->after};
        sb_puts(b, WALLS_NOTE_MD "\n\n");
        sb_puts(b, "| | before | after |\n|---|---:|---:|\n| dominant wall |");
        for (i = 0; i < 2; i++) {
            sb_puts(b, " ");
            if (!w[i]->present)
                sb_puts(b, "not profiled");
            else {
                sb_md(b, w[i]->wall);
                sb_puts(b, " (runner-up ");
                sb_md(b, w[i]->runner_up);
                sb_puts(b, ", confidence ");
                sb_num(b, "%.2f", w[i]->confidence);
                sb_puts(b, ")");
            }
            sb_puts(b, " |");
        }
        sb_puts(b, "\n| window |");
        for (i = 0; i < 2; i++) {
            sb_puts(b, " ");
            if (w[i]->present)
                sb_wall_window(b, w[i]);
            else
                sb_puts(b, "n/a");
            sb_puts(b, " |");
        }
        for (j = 0; j < NSHARES; j++) {
            sb_printf(b, "\n| %s |", share_names[j]);
            for (i = 0; i < 2; i++) {
                sb_puts(b, " ");
                sb_num(b, "%.1f%%", w[i]->present ? w[i]->share[j] * 100 : NAN);
                sb_puts(b, " |");
            }
        }
        sb_puts(b, "\n\nThe shares partition each profiled window and add up to 100%: compute "
                   "time with communication hidden under it is its own share, beside compute "
                   "with nothing under it; idle excludes the pipeline bubble, shown apart; "
                   "other is time no trace class covers.\n\n");
    }

    sb_puts(b, "## Ablation (leave one out)\n\n");
    if (!m->nabl)
        sb_puts(b, "No ablation: no accepted change to remove.\n\n");
    else {
        sb_puts(b, "| knob | to | gain without it | p | kept | reason |\n"
                   "|---|---|---:|---:|---|---|\n");
        for (i = 0; i < m->nabl; i++) {
            const ablation *a = &m->abl[i];
            sb_puts(b, "| ");
            sb_mdcode(b, a->knob);
            sb_puts(b, " | ");
            sb_mdcode(b, a->to);
            sb_puts(b, " | ");
            sb_pct(b, a->gain_without);
            sb_puts(b, " | ");
            sb_p(b, a->p);
            sb_puts(b, a->kept ? " | kept | " : " | dropped | ");
            sb_md(b, a->reason);
            sb_puts(b, " |\n");
        }
        sb_puts(b, "\n");
    }

    sb_puts(b, "## Validation: baseline against winner\n\n");
    if (!m->val.present)
        sb_puts(b, "No validation was run, so no total gain is claimed.\n");
    else {
        const validation *v = &m->val;
        if (!v->confirmed) {
            sb_puts(b, "**Validation did not confirm the winner.** Recommendation: ");
            sb_md(b, v->recommendation);
            sb_puts(b, "\n\n");
        }
        sb_puts(b, "| | baseline | winner |\n|---|---:|---:|\n| median step time | ");
        sb_secs(b, v->base.median);
        sb_puts(b, " | ");
        sb_secs(b, v->win.median);
        sb_printf(b, " |\n| samples | %zu | %zu |\n| TFLOP/s per GPU | ", v->base.s.n,
                  v->win.s.n);
        sb_tflops(b, &v->base);
        sb_puts(b, " | ");
        sb_tflops(b, &v->win);
        sb_puts(b, " |\n| tokens/s per GPU | ");
        sb_num(b, "%.0f", v->base.tokens);
        sb_puts(b, " | ");
        sb_num(b, "%.0f", v->win.tokens);
        if (v->base.config_id || v->win.config_id) {
            const arm *arms2[2] = {&v->base, &v->win};
            int k;
            size_t i;
            sb_puts(b, " |\n| config id (runs) |");
            for (k = 0; k < 2; k++) {
                sb_puts(b, " ");
                sb_mdcode(b, arms2[k]->config_id ? arms2[k]->config_id : "n/a");
                sb_puts(b, " |");
            }
            sb_puts(b, "\n| log folders |");
            for (k = 0; k < 2; k++) {
                sb_puts(b, " ");
                for (i = 0; i < arms2[k]->log_dirs.n; i++) {
                    if (i)
                        sb_puts(b, "<br>");
                    sb_mdcode(b, arms2[k]->log_dirs.v[i]);
                }
                if (!arms2[k]->log_dirs.n)
                    sb_puts(b, "none kept");
                if (!k)
                    sb_puts(b, " |"); /* the last cell is closed below */
            }
        }
        sb_puts(b, " |\n\n| | |\n|---|---|\n| window | ");
        sb_window(b, v);
        sb_puts(b, " of ");
        sb_num(b, "%.0f", v->steps);
        sb_puts(b, " steps |\n| gain | ");
        sb_pct(b, v->gain);
        sb_puts(b, " |\n| CI | ");
        sb_ci(b, v->has_ci, v->ci);
        sb_puts(b, " |\n| p | ");
        sb_p(b, v->p);
        sb_printf(b, " |\n| confirmed | %s |\n| recommendation | ", v->confirmed ? "yes" : "no");
        sb_md(b, v->recommendation);
        sb_puts(b, " |\n\nSamples (s): baseline ");
        sb_samples(b, &v->base.s);
        sb_puts(b, "; winner ");
        sb_samples(b, &v->win.s);
        sb_puts(b, "\n");
        md_natural(b, &v->nat);
    }
}

/* ---- files ------------------------------------------------------------ */

static char *join_path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* Writes text to DIR/NAME through a temporary file renamed into place. */
static int write_atomic(const char *dir, const char *name, const sb *text, mt_diag *d)
{
    char *path = join_path(dir, name), *tmp = NULL;
    size_t off = 0;
    int fd = -1, err = 0;
    if (!path || !(tmp = malloc(strlen(path) + 16))) {
        free(path);
        return -ENOMEM;
    }
    sprintf(tmp, "%s.tmp.XXXXXX", path);
    fd = mkstemp(tmp);
    if (fd < 0) {
        err = -errno;
        mt_diag_add(d, path, 0, NULL, "cannot create a temporary file beside it: %s",
                    strerror(errno));
        goto out;
    }
    while (off < text->n) {
        ssize_t w = write(fd, text->s + off, text->n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            err = -errno;
            mt_diag_add(d, tmp, 0, NULL, "cannot write: %s", strerror(errno));
            goto out;
        }
        off += (size_t)w;
    }
    if (fchmod(fd, 0644) < 0 || fsync(fd) < 0) {
        err = -errno;
        mt_diag_add(d, tmp, 0, NULL, "cannot finish writing: %s", strerror(errno));
        goto out;
    }
    if (close(fd) < 0) {
        fd = -1;
        err = -errno;
        mt_diag_add(d, tmp, 0, NULL, "cannot close: %s", strerror(errno));
        goto out;
    }
    fd = -1;
    if (rename(tmp, path) < 0) {
        err = -errno;
        mt_diag_add(d, path, 0, NULL, "cannot rename %s into place: %s", tmp, strerror(errno));
    }
out:
    if (fd >= 0)
        close(fd);
    if (err && tmp)
        unlink(tmp);
    free(tmp);
    free(path);
    return err;
}

static char *read_file(const char *path, size_t *len, mt_diag *d, int *err)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t cap = 0, n = 0, got;
    if (!f) {
        *err = -errno;
        mt_diag_add(d, path, 0, NULL, "cannot read the bundle: %s", strerror(errno));
        return NULL;
    }
    do {
        if (cap - n < 65536) {
            char *nb;
            cap = cap ? cap * 2 : 262144;
            if ((long)cap > MAX_BUNDLE_BYTES + 262144L || !(nb = realloc(buf, cap + 1))) {
                *err = (long)cap > MAX_BUNDLE_BYTES ? -EFBIG : -ENOMEM;
                mt_diag_add(d, path, 0, NULL, "the bundle is too large to read (over %ld MB)",
                            MAX_BUNDLE_BYTES >> 20);
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
    } while (got > 0);
    if (ferror(f)) {
        *err = -EIO;
        mt_diag_add(d, path, 0, NULL, "cannot read the bundle: read error");
        free(buf);
        fclose(f);
        return NULL;
    }
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* True when text ends inside a string or an unclosed object or array: a
 * bundle cut short rather than one written wrong. */
static int looks_truncated(const char *t, size_t n)
{
    int depth = 0, in_str = 0, esc = 0;
    size_t i;
    for (i = 0; i < n; i++) {
        char c = t[i];
        if (in_str) {
            if (esc)
                esc = 0;
            else if (c == '\\')
                esc = 1;
            else if (c == '"')
                in_str = 0;
        } else if (c == '"')
            in_str = 1;
        else if (c == '{' || c == '[')
            depth++;
        else if ((c == '}' || c == ']') && --depth < 0)
            return 0;
    }
    return in_str || depth > 0;
}

/* Where the parse stopped, as line and column, with a hint for a bundle
 * cut short. */
static void parse_problem(const char *file, const char *text, size_t len, const char *at,
                          mt_diag *d)
{
    const char *p;
    int line = 1, col = 1;
    if (!at || at < text || at > text + len)
        at = text + len;
    for (p = text; p < at; p++) {
        if (*p == '\n') {
            line++;
            col = 1;
        } else
            col++;
    }
    if (looks_truncated(text, len))
        mt_diag_add(d, file, line, NULL,
                    "not valid JSON: the text ends before its last string, object or array is "
                    "closed (truncated?); the parser stopped at column %d",
                    col);
    else
        mt_diag_add(d, file, line, NULL, "not valid JSON near column %d: '%.20s'", col, at);
}

int mt_report_write(const char *dir, mt_diag *d)
{
    char *file = join_path(dir, "bundle.json"), *text;
    size_t len = 0;
    int err = 0;
    cJSON *root = NULL;
    const char *end = NULL;
    arena ar = {NULL, 0};
    model m;
    rd r;
    sb html = {0}, md = {0};

    if (!file)
        return -ENOMEM;
    text = read_file(file, &len, d, &err);
    if (!text) {
        free(file);
        return err ? err : -EIO;
    }
    if (strlen(text) != len) {
        mt_diag_add(d, file, 0, NULL, "not valid JSON: the file holds a NUL byte");
        err = -EINVAL;
        goto out;
    }
    root = cJSON_ParseWithLengthOpts(text, len + 1, &end, 1);
    if (!root) {
        parse_problem(file, text, len, end ? end : cJSON_GetErrorPtr(), d);
        err = -EINVAL;
        goto out;
    }
    memset(&m, 0, sizeof m);
    r = (rd){file, d, &ar, 0};
    read_bundle(&r, root, &m);
    if (r.problems > MAX_PROBLEMS)
        mt_diag_add(d, file, 0, NULL, "... and %d more problems", r.problems - MAX_PROBLEMS);
    if (ar.oom) {
        err = -ENOMEM;
        goto out;
    }
    if (r.problems) {
        err = -EINVAL;
        goto out;
    }
    render_html(&html, &m);
    render_md(&md, &m);
    if (html.oom || md.oom) {
        err = -ENOMEM;
        mt_diag_add(d, dir, 0, NULL, "out of memory while rendering the report");
        goto out;
    }
    err = write_atomic(dir, "report.html", &html, d);
    if (!err)
        err = write_atomic(dir, "REPORT.md", &md, d);
out:
    free(html.s);
    free(md.s);
    cJSON_Delete(root);
    ar_free(&ar);
    free(text);
    free(file);
    return err;
}
