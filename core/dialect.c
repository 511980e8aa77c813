#include "dialect.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Embedded by cmake/embed.cmake from core/dialects/mlm/<version>.tsv. */
extern const char *const mt_mlm_tables[];
extern const char *const mt_mlm_tables_files[];

/* The versions moetune speaks, oldest first, with each one's package
 * version (what `megatron.core.package_info` says at the pinned commit). */
static const struct {
    const char *name;
    const char *core_version;
} versions[] = {
    {"core_r0.15.0", "0.15.4"},
    {"core_v0.18.0", "0.18.0"},
    {"core_v0.19.0", "0.19.1"},
    {"main", "0.20.0"},
};
#define N_VERSIONS (sizeof versions / sizeof versions[0])

struct mt_mlm_dialect {
    const char *name;
    const char *core_version;
    char *text;     /* the table, cut in place into the row strings */
    mt_flag *flags; /* sorted by flag */
    size_t n;
};

static mt_mlm_dialect dialects[N_VERSIONS];
static const char *known[N_VERSIONS + 1];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static int flag_cmp(const void *a, const void *b)
{
    return strcmp(((const mt_flag *)a)->flag, ((const mt_flag *)b)->flag);
}

static char *cut(char **p, char sep)
{
    char *s = *p, *e;
    if (!s)
        return NULL;
    e = strchr(s, sep);
    if (e) {
        *e = 0;
        *p = e + 1;
    } else {
        *p = NULL;
    }
    return s;
}

/* Rows: flag action nargs type choices default dest; the first is a header.
 * The table is the project's own data, so a malformed row is a build defect:
 * it is skipped, and the table test (tests/test_dialect.c) fails on it. */
static void load(mt_mlm_dialect *d, const char *text)
{
    char *p, *line;
    size_t cap = 0;
    d->text = strdup(text);
    if (!d->text)
        return;
    p = d->text;
    cut(&p, '\n'); /* header */
    while ((line = cut(&p, '\n'))) {
        char *f[7], *q = line;
        int i;
        if (!*line)
            continue;
        for (i = 0; i < 7; i++)
            f[i] = cut(&q, '\t');
        if (!f[6] || strncmp(f[0], "-", 1))
            continue;
        if (d->n == cap) {
            mt_flag *nf;
            cap = cap ? cap * 2 : 512;
            nf = realloc(d->flags, cap * sizeof *nf);
            if (!nf)
                return;
            d->flags = nf;
        }
        d->flags[d->n++] = (mt_flag){f[0], f[1], f[2], f[3], strcmp(f[4], "-") ? f[4] : NULL,
                                     f[5], f[6]};
    }
    qsort(d->flags, d->n, sizeof *d->flags, flag_cmp);
}

static void init(void)
{
    size_t i, j;
    for (i = 0; i < N_VERSIONS; i++) {
        char want[64];
        dialects[i].name = versions[i].name;
        dialects[i].core_version = versions[i].core_version;
        known[i] = versions[i].name;
        snprintf(want, sizeof want, "%s.tsv", versions[i].name);
        for (j = 0; mt_mlm_tables_files[j]; j++)
            if (!strcmp(mt_mlm_tables_files[j], want))
                load(&dialects[i], mt_mlm_tables[j]);
    }
    known[N_VERSIONS] = NULL;
}

const char *const *mt_dialect_known(void)
{
    pthread_once(&once, init);
    return known;
}

const mt_mlm_dialect *mt_dialect_find(const char *version)
{
    size_t i;
    pthread_once(&once, init);
    for (i = 0; version && i < N_VERSIONS; i++)
        if (!strcmp(dialects[i].name, version))
            return dialects[i].n ? &dialects[i] : NULL;
    return NULL;
}

const mt_mlm_dialect *mt_dialect_for_stack(const mt_kv *stack, char *err, size_t n)
{
    const char *dialect = mt_kv_get(stack, "dialect");
    const char *mlm = mt_kv_get(stack, "megatron_lm");
    const char *want = dialect ? dialect : mlm;
    const mt_mlm_dialect *d = mt_dialect_find(want);
    size_t i, len;
    if (d)
        return d;
    if (!want)
        len = (size_t)snprintf(err, n, "stack.megatron_lm is not set; known versions:");
    else
        len = (size_t)snprintf(err, n, "%s \"%s\" is not a Megatron-LM version moetune knows "
                               "(known:", dialect ? "stack.dialect" : "stack.megatron_lm", want);
    for (i = 0; i < N_VERSIONS && len < n; i++)
        len += (size_t)snprintf(err + len, n - len, "%s %s", i ? "," : "", versions[i].name);
    if (len < n)
        snprintf(err + len, n - len, "%s", want ? "); for a newer or patched stack set "
                 "stack.dialect to the known version it follows" : "");
    return NULL;
}

const char *mt_dialect_name(const mt_mlm_dialect *d) { return d->name; }
const char *mt_dialect_core_version(const mt_mlm_dialect *d) { return d->core_version; }
size_t mt_dialect_count(const mt_mlm_dialect *d) { return d->n; }
const mt_flag *mt_dialect_at(const mt_mlm_dialect *d, size_t i) { return i < d->n ? &d->flags[i] : NULL; }

int mt_version_cmp(const char *a, const char *b)
{
    while (*a || *b) {
        long x = strtol(a, (char **)&a, 10), y = strtol(b, (char **)&b, 10);
        if (x != y)
            return x < y ? -1 : 1;
        while (*a && !isdigit((unsigned char)*a))
            a++;
        while (*b && !isdigit((unsigned char)*b))
            b++;
    }
    return 0;
}

const mt_flag *mt_dialect_flag(const mt_mlm_dialect *d, const char *flag)
{
    mt_flag key;
    key.flag = flag;
    return d->n ? bsearch(&key, d->flags, d->n, sizeof *d->flags, flag_cmp) : NULL;
}

const mt_flag *mt_dialect_flag_for(const mt_mlm_dialect *d, const char *dest)
{
    size_t i;
    const mt_flag *any = NULL;
    for (i = 0; i < d->n; i++) {
        const mt_flag *f = &d->flags[i];
        if (strcmp(f->dest, dest))
            continue;
        if (strcmp(f->action, "store_false"))
            return f;
        any = f;
    }
    return any;
}

/* ---- defaults --------------------------------------------------------------- */

/* "['p2p']" -> "p2p", "[1, 2]" -> "1 2", "[]" -> "". */
static void py_list(const char *s, char *buf, size_t n)
{
    size_t len = 0;
    s++;
    while (*s && *s != ']' && len + 1 < n) {
        if (*s == '\'' || *s == '"' || *s == ',') {
            if (*s == ',' && len)
                buf[len++] = ' ';
            s++;
            continue;
        }
        if (*s == ' ') {
            s++;
            continue;
        }
        buf[len++] = *s++;
    }
    buf[len] = 0;
}

int mt_flag_default(const mt_flag *f, char *buf, size_t n)
{
    const char *v = f->def, *dot;
    if (!strcmp(v, "None"))
        return -1;
    if (!strcmp(v, "True") || !strcmp(v, "False")) {
        snprintf(buf, n, "%s", v[0] == 'T' ? "true" : "false");
        return 0;
    }
    if (v[0] == '[') {
        py_list(v, buf, n);
        return 0;
    }
    /* An enum member printed as Class.member. */
    dot = strchr(v, '.');
    if (dot && isupper((unsigned char)v[0]) && !strchr(v, ' ')) {
        snprintf(buf, n, "%s", dot + 1);
        return 0;
    }
    snprintf(buf, n, "%s", v);
    return 0;
}

/* ---- argparse ----------------------------------------------------------------- */

/* Python's int(): optional blanks and sign, digits with single underscores
 * between them. */
static int py_int(const char *s, char *out, size_t n)
{
    char digits[64];
    size_t len = 0;
    int neg = 0;
    while (isspace((unsigned char)*s))
        s++;
    if (*s == '+' || *s == '-')
        neg = *s++ == '-';
    if (!isdigit((unsigned char)*s))
        return -1;
    while (*s) {
        if (isdigit((unsigned char)*s)) {
            if (len + 1 >= sizeof digits)
                return -1;
            digits[len++] = *s++;
        } else if (*s == '_' && isdigit((unsigned char)s[1]) && len) {
            s++;
        } else {
            break;
        }
    }
    while (isspace((unsigned char)*s))
        s++;
    if (*s)
        return -1;
    digits[len] = 0;
    {
        const char *d = digits;
        while (d[0] == '0' && d[1])
            d++;
        snprintf(out, n, "%s%s", neg && strcmp(d, "0") ? "-" : "", d);
    }
    return 0;
}

/* Python's float(): decimal or exponent forms, inf, nan, infinity. */
static int py_float(const char *s, char *out, size_t n)
{
    char buf[128];
    size_t len = 0;
    const char *p = s;
    char *end;
    while (isspace((unsigned char)*p))
        p++;
    for (; *p && len + 1 < sizeof buf; p++)
        if (*p != '_')
            buf[len++] = *p;
        else if (!(len && isdigit((unsigned char)buf[len - 1]) && isdigit((unsigned char)p[1])))
            return -1;
    buf[len] = 0;
    while (len && isspace((unsigned char)buf[len - 1]))
        buf[--len] = 0;
    if (!len || strchr(buf, 'x') || strchr(buf, 'X') || strchr(buf, 'p') || strchr(buf, 'P'))
        return -1;
    errno = 0;
    strtod(buf, &end);
    if (*end)
        return -1;
    snprintf(out, n, "%s", s);
    return 0;
}

/* The CUDA graph module converter's names (0.18+): CudaGraphModule
 * members and the deprecated whole-graph spellings it passes through. */
static const char *const graph_modules[] = {"attn", "mlp", "moe", "moe_router", "moe_preprocess",
                                            "mamba", "full", "full_iteration",
                                            "full_iteration_inference", NULL};

static int listed(const char *c, const char *v);

/* Converters that look a name up in an enum raise KeyError, which argparse
 * does not catch: parse_args dies there, in argv order, with
 * "KeyError: 'v'" (r0.15's lambda and 0.18+'s enum_type_handler for
 * --attention-backend, --exit-signal; the graph module converter). */
static int key_error(const mt_flag *f, const char *v)
{
    const char *const *m;
    if (!strcmp(f->type, "_parse_cuda_graph_modules_arg")) {
        for (m = graph_modules; *m; m++)
            if (!strcmp(*m, v))
                return 0;
        return 1;
    }
    if ((!strcmp(f->type, "enum_type_handler") || !strcmp(f->type, "lambda")) && f->choices)
        return !listed(f->choices, v);
    return 0;
}

/* Converts one value as the flag's type would; -1 with the converter's
 * argparse name in *tname when it refuses (argparse then says "invalid
 * <tname> value"), -2 when the converter raises past argparse. */
static int convert(const mt_flag *f, const char *v, char *out, size_t n, const char **tname)
{
    *tname = f->type;
    if (!strcmp(f->type, "int"))
        return py_int(v, out, n);
    if (!strcmp(f->type, "float"))
        return py_float(v, out, n);
    if (key_error(f, v))
        return -2;
    snprintf(out, n, "%s", v);
    return 0;
}

static int listed(const char *c, const char *v)
{
    const char *e;
    size_t vl = strlen(v);
    for (e = c; c && *e; e += *e == '|') {
        const char *s = e;
        e = strchr(s, '|');
        if (!e)
            e = s + strlen(s);
        if ((size_t)(e - s) == vl && !strncmp(s, v, vl))
            return 1;
    }
    return 0;
}

/* argparse's repr of a choice in "(choose from ...)". */
static int choice_ok(const mt_flag *f, const char *v, char *msg, size_t n, const mt_kv *extra)
{
    const char *c = f->choices, *e;
    size_t len, vl = strlen(v);
    int numeric = !strcmp(f->type, "int") || !strcmp(f->type, "float");
    if (!c || (extra && listed(mt_kv_get(extra, f->flag), v)))
        return 1;
    for (e = c; *e; e += *e == '|') {
        const char *s = e;
        e = strchr(s, '|');
        if (!e)
            e = s + strlen(s);
        if ((size_t)(e - s) == vl && !strncmp(s, v, vl))
            return 1;
    }
    len = (size_t)snprintf(msg, n, "argument %s: invalid choice: %s%s%s (choose from ", f->flag,
                           numeric ? "" : "'", v, numeric ? "" : "'");
    for (e = c; *e && len < n;) {
        const char *s = e;
        e = strchr(s, '|');
        if (!e)
            e = s + strlen(s);
        len += (size_t)snprintf(msg + len, n - len, "%s%s%.*s%s", s == c ? "" : ", ",
                                numeric ? "" : "'", (int)(e - s), s, numeric ? "" : "'");
        if (*e)
            e++;
    }
    if (len < n)
        snprintf(msg + len, n - len, ")");
    return 0;
}

/* argparse takes "-1" or "-.5" as a value, not an option, when the parser
 * has no option that looks like a negative number (Megatron has none): the
 * pattern ^-\d+$|^-\d*\.\d+$.  A token with a blank is never an option. */
static int looks_negative(const char *s)
{
    const char *p = s + 1;
    int before = 0, after = 0;
    while (isdigit((unsigned char)*p))
        p++, before++;
    if (!*p)
        return before > 0;
    if (*p++ != '.')
        return 0;
    while (isdigit((unsigned char)*p))
        p++, after++;
    return !*p && after > 0;
}

static int is_option(const char *s)
{
    return s[0] == '-' && s[1] && !looks_negative(s) && !strchr(s, ' ');
}

static int push_tok(mt_argparse_result *res, const mt_flag *f, size_t first, size_t count)
{
    mt_argtok *t;
    if (!res)
        return 0;
    t = realloc(res->toks, (res->n_toks + 1) * sizeof *t);
    if (!t)
        return -1;
    res->toks = t;
    t[res->n_toks++] = (mt_argtok){f, first, count};
    return 0;
}

static int fail(mt_argparse_result *res, const char *where, const char *fmt, const char *a,
                const char *b, const char *c)
{
    if (res) {
        snprintf(res->error, sizeof res->error, fmt, a, b, c);
        snprintf(res->where, sizeof res->where, "%s", where);
    }
    return -1;
}

void mt_argparse_result_clear(mt_argparse_result *res)
{
    if (!res)
        return;
    free(res->toks);
    res->toks = NULL;
    res->n_toks = 0;
}

/* The default namespace of each dialect, built once: a command line's parse
 * starts from a copy (in key order, so every insertion appends). */
static mt_kv *defaults_of[N_VERSIONS];
static pthread_mutex_t defaults_lock = PTHREAD_MUTEX_INITIALIZER;

static void build_defaults(const mt_mlm_dialect *d, mt_kv *ns);

static void set_defaults(const mt_mlm_dialect *d, mt_kv *ns)
{
    size_t slot = (size_t)(d - dialects);
    pthread_mutex_lock(&defaults_lock);
    if (!defaults_of[slot] && (defaults_of[slot] = mt_kv_new()))
        build_defaults(d, defaults_of[slot]);
    /* the cache lives as long as the process and never changes */
    mt_kv_borrow(ns, defaults_of[slot]);
    pthread_mutex_unlock(&defaults_lock);
}

static void build_defaults(const mt_mlm_dialect *d, mt_kv *ns)
{
    size_t i;
    char buf[1024];
    for (i = 0; i < d->n; i++) {
        const mt_flag *f = &d->flags[i];
        /* Aliases share a dest; the first row that sets a default wins, as
         * argparse keeps the first action's default. */
        if (mt_kv_get(ns, f->dest))
            continue;
        if (mt_flag_default(f, buf, sizeof buf) == 0)
            mt_kv_set(ns, f->dest, buf);
    }
}

int mt_argparse(const mt_mlm_dialect *d, char *const *argv, size_t argc, mt_kv *ns,
                mt_argparse_result *res)
{
    return mt_argparse_ext(d, argv, argc, ns, res, NULL);
}

/* Appends word a to the extras (elen used of extras[cap]), clipped. */
static void add_extra(char *extras, size_t cap, size_t *elen, const char *a)
{
    *elen += (size_t)snprintf(extras + *elen, cap - *elen, "%s%s", *elen ? " " : "", a);
    if (*elen >= cap)
        *elen = cap - 1;
}

/* A flag that takes no value (nargs 0, store_true/false/const) into ns;
 * -1 with res's error when it was given one inline. */
static int set_valueless(const mt_flag *f, const char *inline_val, mt_kv *ns,
                         mt_argparse_result *res)
{
    if (inline_val)
        return fail(res, f->flag, "argument %s: ignored explicit argument '%s'%s", f->flag,
                    inline_val, "");
    if (!strcmp(f->action, "store_true"))
        mt_kv_set(ns, f->dest, "true");
    else if (!strcmp(f->action, "store_false"))
        mt_kv_set(ns, f->dest, "false");
    else
        mt_kv_set(ns, f->dest, f->def);
    return 0;
}

/* How many values f's nargs takes, at least and at most. */
static void nargs_range(const mt_flag *f, size_t *want_min, size_t *want_max)
{
    if (!strcmp(f->nargs, "-")) {
        *want_min = *want_max = 1;
    } else if (!strcmp(f->nargs, "+")) {
        *want_min = 1, *want_max = (size_t)-1;
    } else if (!strcmp(f->nargs, "*")) {
        *want_min = 0, *want_max = (size_t)-1;
    } else if (!strcmp(f->nargs, "?")) {
        *want_min = 0, *want_max = 1;
    } else {
        *want_min = *want_max = (size_t)strtoul(f->nargs, NULL, 10);
    }
}

/* One value arg of f converted into one[n] and checked against its
 * choices; -1 with res's error when it is not valid. */
static int convert_value(const mt_flag *f, const char *arg, char *one, size_t n,
                         mt_argparse_result *res, const mt_kv *extra)
{
    char msg[512];
    const char *tname;
    int rc = convert(f, arg, one, n, &tname);
    if (rc == -2)
        return fail(res, f->flag, "KeyError: '%s'%s%s", arg, "", "");
    if (rc)
        return fail(res, f->flag, "argument %s: invalid %s value: '%s'", f->flag, tname, arg);
    if (!choice_ok(f, one, msg, sizeof msg, extra))
        return fail(res, f->flag, "%s%s%s", msg, "", "");
    return 0;
}

/* "--x=v" gives exactly one value: v converted into val[n]; -1 with res's
 * error when f takes none or more than one. */
static int inline_value(const mt_flag *f, const char *inline_val, size_t want_min, size_t want_max,
                        char *val, size_t n, mt_argparse_result *res, const mt_kv *extra)
{
    char one[1024];
    if (want_max < 1)
        return fail(res, f->flag, "argument %s: ignored explicit argument '%s'%s", f->flag,
                    inline_val, "");
    if (want_min > 1)
        return fail(res, f->flag, "argument %s: expected %s arguments%s", f->flag, f->nargs, "");
    if (convert_value(f, inline_val, one, sizeof one, res, extra))
        return -1;
    snprintf(val, n, "%s", one);
    return 0;
}

/* The values of f that follow it from argv[i], up to want_max and up to
 * the next option, converted and joined by spaces into val[n]; their count
 * into *vals.  -1 with res's error when fewer than want_min. */
static int following_values(const mt_flag *f, char *const *argv, size_t argc, size_t i,
                            size_t want_min, size_t want_max, char *val, size_t n,
                            mt_argparse_result *res, const mt_kv *extra, size_t *vals)
{
    char one[1024];
    size_t j = i, len = 0;
    while (j < argc && *vals < want_max && !is_option(argv[j]) && strcmp(argv[j], "--"))
        j++, (*vals)++;
    if (*vals < want_min) {
        if (want_min == 1 && want_max == 1)
            return fail(res, f->flag, "argument %s: expected one argument%s%s", f->flag, "", "");
        if (want_max == (size_t)-1)
            return fail(res, f->flag, "argument %s: expected at least one argument%s%s", f->flag,
                        "", "");
        return fail(res, f->flag, "argument %s: expected %s arguments%s", f->flag, f->nargs, "");
    }
    for (j = i; j < i + *vals; j++) {
        if (convert_value(f, argv[j], one, sizeof one, res, extra))
            return -1;
        len += (size_t)snprintf(val + len, n - len, "%s%s", len ? " " : "", one);
        if (len >= n)
            return fail(res, f->flag, "argument %s: value too long (over %s bytes)%s", f->flag,
                        "4096", "");
    }
    return 0;
}

int mt_argparse_ext(const mt_mlm_dialect *d, char *const *argv, size_t argc, mt_kv *ns,
                    mt_argparse_result *res, const mt_kv *extra)
{
    size_t i = 0;
    char extras[400] = "";
    size_t elen = 0;
    char val[4096];
    if (res) {
        res->error[0] = res->where[0] = 0;
        res->toks = NULL;
        res->n_toks = 0;
    }
    set_defaults(d, ns);
    while (i < argc) {
        const char *a = argv[i], *eq = NULL;
        char name[256];
        const mt_flag *f;
        size_t start = i, vals = 0, want_min, want_max;
        const char *inline_val = NULL;
        if (!strcmp(a, "--")) {
            /* Everything after "--" is positional: Megatron takes none. */
            for (i++; i < argc && elen < sizeof extras; i++)
                elen += (size_t)snprintf(extras + elen, sizeof extras - elen, "%s%s",
                                         elen ? " " : "", argv[i]);
            break;
        }
        if (!is_option(a)) {
            add_extra(extras, sizeof extras, &elen, a);
            push_tok(res, NULL, i, 1);
            i++;
            continue;
        }
        if (a[1] == '-')
            eq = strchr(a, '=');
        snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - a) : (int)strlen(a), a);
        f = mt_dialect_flag(d, name);
        if (!f) {
            /* With "=" argparse looks up the part before it; an unknown
             * option is kept whole among the extras. */
            add_extra(extras, sizeof extras, &elen, a);
            push_tok(res, NULL, i, 1);
            i++;
            continue;
        }
        if (eq)
            inline_val = eq + 1;
        i++;
        if (!strcmp(f->nargs, "0") || !strcmp(f->action, "store_true") ||
            !strcmp(f->action, "store_false") || !strcmp(f->action, "store_const")) {
            if (set_valueless(f, inline_val, ns, res))
                return -1;
            push_tok(res, f, start, 1);
            continue;
        }
        nargs_range(f, &want_min, &want_max);
        val[0] = 0;
        if (inline_val) {
            if (inline_value(f, inline_val, want_min, want_max, val, sizeof val, res, extra))
                return -1;
            vals = 1;
        } else {
            if (following_values(f, argv, argc, i, want_min, want_max, val, sizeof val, res, extra,
                                 &vals))
                return -1;
            i += vals;
        }
        if (!strcmp(f->nargs, "?") && !vals)
            mt_kv_set(ns, f->dest, ""); /* the const; Megatron's ?-flags have none */
        else
            mt_kv_set(ns, f->dest, val);
        push_tok(res, f, start, i - start);
    }
    if (elen)
        return fail(res, "argparse", "unrecognized arguments: %s%s%s", extras, "", "");
    return 0;
}
