/*
 * trace.c - Chrome/Kineto trace reading (yajl event parser over a zlib or
 * stdio stream) and the interval sweeps behind the wall figures.
 *
 * Only kept events are stored, as 32-byte intervals whose names are interned
 * in one string table, so memory follows the number of GPU events and never
 * the size of the JSON.
 */
#include "trace_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>
#include <zlib.h>

#define TRACE__CHUNK (256 * 1024)
#define TRACE__MAXDEPTH 512
#define TRACE__DEFAULT_GAP_NS 20000

/* name facts, one bit each */
enum {
    F_FP8 = 1 << 0,
    F_MXFP8 = 1 << 1,
    F_NVFP4 = 1 << 2,
    F_DEEPEP = 1 << 3,
    F_HYBRIDEP = 1 << 4,
    F_ALLTOALL = 1 << 5,
};

/* ---- exact decimal microseconds ----------------------------------------------------- */

int mt_trace_us_to_ns(const char *s, size_t len, int64_t *ns)
{
    const char *p = s, *end = s + len;
    int neg = 0, digits = 0, frac = 0, dot = 0;
    long exp10 = 0;
    uint64_t mant = 0;
    int dropped = 0;      /* digits below what fits in mant, counted as exponent */
    int round_digit = -1; /* first dropped digit for rounding */
    int64_t v;
    long shift;
    if (p < end && (*p == '-' || *p == '+'))
        neg = *p++ == '-';
    for (; p < end; p++) {
        if (*p == '.') {
            if (dot)
                return -EINVAL;
            dot = 1;
            continue;
        }
        if (*p < '0' || *p > '9')
            break;
        digits++;
        if (dot)
            frac++;
        if (mant <= (UINT64_MAX - 9) / 10) {
            mant = mant * 10 + (uint64_t)(*p - '0');
        } else {
            if (round_digit < 0)
                round_digit = *p - '0';
            dropped++;
        }
    }
    if (!digits)
        return -EINVAL;
    if (p < end && (*p == 'e' || *p == 'E')) {
        int eneg = 0, ed = 0;
        p++;
        if (p < end && (*p == '-' || *p == '+'))
            eneg = *p++ == '-';
        for (; p < end && *p >= '0' && *p <= '9'; p++, ed++)
            if (exp10 < 100000)
                exp10 = exp10 * 10 + (*p - '0');
        if (!ed)
            return -EINVAL;
        if (eneg)
            exp10 = -exp10;
    }
    if (p != end)
        return -EINVAL;
    /* value = mant * 10^(dropped - frac + exp10) us = ... * 10^(3 + ...) ns */
    shift = 3 + exp10 - frac + dropped;
    if (mant == 0) {
        *ns = 0;
        return 0;
    }
    if (shift >= 0) {
        for (; shift > 0; shift--) {
            if (mant > UINT64_MAX / 10)
                return -ERANGE;
            mant *= 10;
        }
    } else {
        uint64_t div = 1;
        int last = round_digit; /* only meaningful when shift == dropped part */
        for (; shift < 0; shift++) {
            if (div > UINT64_MAX / 10) { /* far below a nanosecond */
                mant = 0;
                div = 1;
                last = 0;
                break;
            }
            div *= 10;
        }
        if (div > 1) {
            uint64_t q = mant / div, r = mant % div;
            mant = q + (r * 2 >= div ? 1 : 0);
        } else if (last >= 5) {
            mant += 1;
        }
    }
    if (mant > (uint64_t)INT64_MAX)
        return -ERANGE;
    v = (int64_t)mant;
    *ns = neg ? -v : v;
    return 0;
}

/* ---- string table ------------------------------------------------------------------- */

static uint32_t mt__trace_hash(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    size_t i;
    for (i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static int mt__trace_rehash(mt_trace *t, size_t cap)
{
    uint32_t *h = calloc(cap, sizeof *h);
    size_t i;
    if (!h)
        return -ENOMEM;
    for (i = 0; i < t->nnames; i++) {
        const char *s = t->pool + t->names[i];
        size_t j = mt__trace_hash(s, strlen(s)) & (cap - 1);
        while (h[j])
            j = (j + 1) & (cap - 1);
        h[j] = (uint32_t)i + 1;
    }
    free(t->hash);
    t->hash = h;
    t->hash_cap = cap;
    return 0;
}

/* Id of name s (n bytes, no NUL needed), added when new; -1 on OOM. */
static long mt__trace_intern(mt_trace *t, const char *s, size_t n)
{
    size_t j;
    const char *nul = memchr(s, '\0', n);
    if (nul) /* a name ends at its first NUL (JSON "\u0000") */
        n = (size_t)(nul - s);
    if (t->nnames * 2 >= t->hash_cap && mt__trace_rehash(t, t->hash_cap ? t->hash_cap * 2 : 256))
        return -1;
    j = mt__trace_hash(s, n) & (t->hash_cap - 1);
    while (t->hash[j]) {
        const char *o = t->pool + t->names[t->hash[j] - 1];
        if (!strncmp(o, s, n) && o[n] == '\0')
            return (long)t->hash[j] - 1;
        j = (j + 1) & (t->hash_cap - 1);
    }
    if (t->pool_len + n + 1 > t->pool_cap) {
        size_t cap = t->pool_cap ? t->pool_cap : 4096;
        char *p;
        while (cap < t->pool_len + n + 1)
            cap *= 2;
        if (!(p = realloc(t->pool, cap)))
            return -1;
        t->pool = p;
        t->pool_cap = cap;
    }
    if (t->nnames == t->names_cap) {
        size_t cap = t->names_cap ? t->names_cap * 2 : 64;
        size_t *nm = realloc(t->names, cap * sizeof *nm);
        if (!nm)
            return -1;
        t->names = nm;
        t->names_cap = cap;
    }
    memcpy(t->pool + t->pool_len, s, n);
    t->pool[t->pool_len + n] = '\0';
    t->names[t->nnames] = t->pool_len;
    t->pool_len += n + 1;
    t->hash[j] = (uint32_t)t->nnames + 1;
    return (long)t->nnames++;
}

static const char *mt__trace_name(const mt_trace *t, uint32_t id)
{
    return t->pool + t->names[id];
}

/* ---- classes and facts ---------------------------------------------------------------- */

static const struct {
    const char *pattern;
    int prefix;
} mt__trace_comm_defaults[] = {
    {"nccl", 1},     {"deep_ep", 0},  {"hybrid_ep", 0}, {"nccl_ep", 0},
    {"alltoall", 0}, {"AllToAll", 0}, {"SendRecv", 0},
};

static int mt__trace_match(const char *name, const char *pattern, int prefix)
{
    return prefix ? !strncmp(name, pattern, strlen(pattern)) : strstr(name, pattern) != NULL;
}

static int mt__trace_any(const char *name, const char *const *pats)
{
    for (; *pats; pats++)
        if (strstr(name, *pats))
            return 1;
    return 0;
}

mt_trace_class mt_trace_classify(const mt_trace *t, const char *name)
{
    size_t i;
    for (i = 0; t && i < t->nrules; i++)
        if (mt__trace_match(name, t->rules[i].pattern, t->rules[i].prefix))
            return t->rules[i].cls;
    for (i = 0; i < sizeof mt__trace_comm_defaults / sizeof mt__trace_comm_defaults[0]; i++)
        if (mt__trace_match(name, mt__trace_comm_defaults[i].pattern, mt__trace_comm_defaults[i].prefix))
            return MT_TRACE_COMM;
    return MT_TRACE_COMPUTE;
}

static uint8_t mt__trace_facts(const char *name)
{
    static const char *const nvfp4[] = {"nvf4", "fp4", "e2m1", NULL};
    static const char *const fp8[] = {"e4m3", "fp8", "_f8", "mxf8", NULL};
    static const char *const mxfp8[] = {"mxf8", "bstensorop", "mxfp8", NULL};
    static const char *const a2a[] = {"SendRecv", "AllToAll", "alltoall", NULL};
    uint8_t f = 0;
    int is4 = mt__trace_any(name, nvfp4);
    if (is4)
        f |= F_NVFP4;
    /* an NVFP4 GEMM carries E4M3 scales ("ue4m3xe2m1"): not FP8 evidence */
    if (!is4 && mt__trace_any(name, fp8))
        f |= F_FP8;
    if (!is4 && mt__trace_any(name, mxfp8))
        f |= F_MXFP8;
    if (strstr(name, "deep_ep"))
        f |= F_DEEPEP;
    if (strstr(name, "hybrid_ep"))
        f |= F_HYBRIDEP;
    if (mt__trace_any(name, a2a))
        f |= F_ALLTOALL;
    return f;
}

/* (Re)computes class and facts of every interned name. */
static int mt__trace_classify_all(mt_trace *t)
{
    uint8_t *c = realloc(t->cls, t->nnames ? t->nnames : 1);
    uint8_t *f;
    size_t i;
    if (!c)
        return -ENOMEM;
    t->cls = c;
    if (!(f = realloc(t->facts, t->nnames ? t->nnames : 1)))
        return -ENOMEM;
    t->facts = f;
    for (i = 0; i < t->nnames; i++) {
        t->cls[i] = (uint8_t)mt_trace_classify(t, mt__trace_name(t, (uint32_t)i));
        t->facts[i] = mt__trace_facts(mt__trace_name(t, (uint32_t)i));
    }
    return 0;
}

int mt_trace_add_class(mt_trace *t, const char *spec, mt_diag *d)
{
    static const struct {
        const char *name;
        mt_trace_class cls;
    } classes[] = {{"communication", MT_TRACE_COMM},
                   {"compute", MT_TRACE_COMPUTE},
                   {"memcpy", MT_TRACE_MEMCPY},
                   {"other", MT_TRACE_OTHER}};
    const char *colon = spec ? strchr(spec, ':') : NULL;
    const char *pat;
    mt__trace_rule *r;
    size_t i, k = colon ? (size_t)(colon - spec) : 0;
    for (i = 0; colon && i < sizeof classes / sizeof classes[0]; i++)
        if (strlen(classes[i].name) == k && !strncmp(spec, classes[i].name, k))
            break;
    if (!colon || i == sizeof classes / sizeof classes[0]) {
        mt_diag_add(d, NULL, 0, "trace.class",
                    "'%s' is not a kernel class rule: write class:pattern with class one of "
                    "communication, compute, memcpy, other",
                    spec ? spec : "(null)");
        return -EINVAL;
    }
    pat = colon + 1;
    if (*pat == '^')
        pat++;
    if (!*pat) {
        mt_diag_add(d, NULL, 0, "trace.class", "'%s': the pattern is empty", spec);
        return -EINVAL;
    }
    if (!(r = realloc(t->rules, (t->nrules + 1) * sizeof *r)))
        return -ENOMEM;
    t->rules = r;
    r += t->nrules;
    if (!(r->pattern = strdup(pat)))
        return -ENOMEM;
    r->prefix = colon[1] == '^';
    r->cls = classes[i].cls;
    t->nrules++;
    return mt__trace_classify_all(t);
}

/* ---- the stream parser ---------------------------------------------------------------- */

enum { CAT_NONE, CAT_KERNEL, CAT_MEMCPY, CAT_RUNTIME, CAT_ANNOT, CAT_OTHER };
enum { K_OTHER, K_CAT, K_NAME, K_PH, K_TS, K_DUR, K_PID, K_TID, K_ARGS };
enum { A_OTHER, A_DEVICE, A_STREAM };
/* how a field arrived */
enum { V_ABSENT = 0, V_OK, V_STRING, V_NUMBER, V_BOOL, V_NULL, V_MAP, V_ARRAY, V_BAD };

typedef struct mt__trace_ev {
    int cat, ph_x, ph_seen;
    int name_v, ts_v, dur_v, pid_v, tid_v, dev_v, stream_v;
    int64_t ts, dur, pid, tid, dev, stream;
    char *name;
    size_t name_len, name_cap;
} mt__trace_ev;

typedef struct mt__trace_ctx {
    mt_trace *t;
    const char *label;
    char types[TRACE__MAXDEPTH];
    int depth;
    int ev_depth; /* depth of an event object, 0 before the events array */
    int saw_events;
    int top_key_events; /* the current top-level key is "traceEvents" */
    int ev_key, args_key, in_args;
    size_t ev_index;
    mt__trace_ev ev;
    char err[512];
    char field[96];
} mt__trace_ctx;

static int mt__trace_fail(mt__trace_ctx *c, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int mt__trace_fail(mt__trace_ctx *c, const char *field, const char *fmt, ...)
{
    va_list ap;
    if (!c->err[0]) {
        va_start(ap, fmt);
        vsnprintf(c->err, sizeof c->err, fmt, ap);
        va_end(ap);
        snprintf(c->field, sizeof c->field, "%s", field ? field : "");
    }
    return 0; /* cancels the parse */
}

static const char *mt__trace_vname(int v)
{
    switch (v) {
    case V_STRING:
        return "a string";
    case V_NUMBER:
        return "a number";
    case V_BOOL:
        return "a boolean";
    case V_NULL:
        return "null";
    case V_MAP:
        return "an object";
    case V_ARRAY:
        return "an array";
    default:
        return "malformed";
    }
}

/* Is the value being delivered a direct member of the event object / args? */
static int mt__trace_at_event(const mt__trace_ctx *c)
{
    return c->ev_depth && c->depth == c->ev_depth && c->types[c->depth - 1] == 'm';
}
static int mt__trace_at_args(const mt__trace_ctx *c)
{
    return c->ev_depth && c->in_args && c->depth == c->ev_depth + 1 &&
           c->types[c->depth - 1] == 'm';
}

/* Records how a value of a kept field arrived when it is not what we read. */
static void mt__trace_mark(mt__trace_ctx *c, int how)
{
    if (mt__trace_at_event(c)) {
        switch (c->ev_key) {
        case K_NAME:
            c->ev.name_v = how;
            break;
        case K_TS:
            c->ev.ts_v = how;
            break;
        case K_DUR:
            c->ev.dur_v = how;
            break;
        case K_PID:
            c->ev.pid_v = how;
            break;
        case K_TID:
            c->ev.tid_v = how;
            break;
        default:
            break;
        }
    } else if (mt__trace_at_args(c)) {
        if (c->args_key == A_DEVICE)
            c->ev.dev_v = how;
        else if (c->args_key == A_STREAM)
            c->ev.stream_v = how;
    }
}

static int mt__trace_null(void *ctx)
{
    mt__trace_mark(ctx, V_NULL);
    return 1;
}

static int mt__trace_bool(void *ctx, int b)
{
    (void)b;
    mt__trace_mark(ctx, V_BOOL);
    return 1;
}

/* An integer field (pid, tid, device, stream): exact integers only. */
static int mt__trace_int(const char *s, size_t n, int64_t *out)
{
    int64_t ns;
    if (mt_trace_us_to_ns(s, n, &ns) || ns % 1000)
        return -1;
    *out = ns / 1000;
    return 0;
}

static int mt__trace_number(void *ctx, const char *s, size_t n)
{
    mt__trace_ctx *c = ctx;
    int64_t v;
    if (mt__trace_at_event(c)) {
        switch (c->ev_key) {
        case K_TS:
        case K_DUR:
            if (mt_trace_us_to_ns(s, n, &v)) {
                (c->ev_key == K_TS ? &c->ev.ts_v : &c->ev.dur_v)[0] = V_BAD;
                break;
            }
            if (c->ev_key == K_TS)
                c->ev.ts = v, c->ev.ts_v = V_OK;
            else
                c->ev.dur = v, c->ev.dur_v = V_OK;
            break;
        case K_PID:
            c->ev.pid_v = mt__trace_int(s, n, &c->ev.pid) ? V_BAD : V_OK;
            break;
        case K_TID:
            c->ev.tid_v = mt__trace_int(s, n, &c->ev.tid) ? V_BAD : V_OK;
            break;
        default:
            mt__trace_mark(c, V_NUMBER);
        }
    } else if (mt__trace_at_args(c)) {
        if (c->args_key == A_DEVICE)
            c->ev.dev_v = mt__trace_int(s, n, &c->ev.dev) ? V_BAD : V_OK;
        else if (c->args_key == A_STREAM)
            c->ev.stream_v = mt__trace_int(s, n, &c->ev.stream) ? V_BAD : V_OK;
    }
    return 1;
}

static int mt__trace_eq(const unsigned char *s, size_t n, const char *lit)
{
    return strlen(lit) == n && !memcmp(s, lit, n);
}

static int mt__trace_string(void *ctx, const unsigned char *s, size_t n)
{
    mt__trace_ctx *c = ctx;
    if (!mt__trace_at_event(c)) {
        mt__trace_mark(c, V_STRING);
        return 1;
    }
    switch (c->ev_key) {
    case K_CAT:
        c->ev.cat = mt__trace_eq(s, n, "kernel")                                        ? CAT_KERNEL
                    : mt__trace_eq(s, n, "gpu_memcpy") || mt__trace_eq(s, n, "gpu_memset") ? CAT_MEMCPY
                    : mt__trace_eq(s, n, "cuda_runtime") || mt__trace_eq(s, n, "cuda_driver")
                        ? CAT_RUNTIME
                    : mt__trace_eq(s, n, "user_annotation") || mt__trace_eq(s, n, "gpu_user_annotation")
                        ? CAT_ANNOT
                        : CAT_OTHER;
        break;
    case K_PH:
        c->ev.ph_seen = 1;
        c->ev.ph_x = mt__trace_eq(s, n, "X");
        break;
    case K_NAME:
        if (n + 1 > c->ev.name_cap) {
            size_t cap = c->ev.name_cap ? c->ev.name_cap : 256;
            char *p;
            while (cap < n + 1)
                cap *= 2;
            if (!(p = realloc(c->ev.name, cap)))
                return mt__trace_fail(c, NULL, "out of memory");
            c->ev.name = p;
            c->ev.name_cap = cap;
        }
        memcpy(c->ev.name, s, n);
        c->ev.name[n] = '\0';
        c->ev.name_len = n;
        c->ev.name_v = V_OK;
        break;
    default:
        mt__trace_mark(c, V_STRING);
    }
    return 1;
}

static int mt__trace_map_key(void *ctx, const unsigned char *s, size_t n)
{
    mt__trace_ctx *c = ctx;
    if (c->depth == 1 && c->types[0] == 'm') {
        c->top_key_events = mt__trace_eq(s, n, "traceEvents");
    } else if (mt__trace_at_event(c)) {
        c->ev_key = mt__trace_eq(s, n, "cat")    ? K_CAT
                    : mt__trace_eq(s, n, "name") ? K_NAME
                    : mt__trace_eq(s, n, "ph")   ? K_PH
                    : mt__trace_eq(s, n, "ts")   ? K_TS
                    : mt__trace_eq(s, n, "dur")  ? K_DUR
                    : mt__trace_eq(s, n, "pid")  ? K_PID
                    : mt__trace_eq(s, n, "tid")  ? K_TID
                    : mt__trace_eq(s, n, "args") ? K_ARGS
                                              : K_OTHER;
    } else if (mt__trace_at_args(c)) {
        c->args_key = mt__trace_eq(s, n, "device")   ? A_DEVICE
                      : mt__trace_eq(s, n, "stream") ? A_STREAM
                                                  : A_OTHER;
    }
    return 1;
}

static int mt__trace_push(mt__trace_ctx *c, char type)
{
    if (c->depth >= TRACE__MAXDEPTH)
        return mt__trace_fail(c, NULL, "JSON nested deeper than %d levels", TRACE__MAXDEPTH);
    c->types[c->depth++] = type;
    return 1;
}

static int mt__trace_start_map(void *ctx)
{
    mt__trace_ctx *c = ctx;
    if (c->depth == 0) {
        /* the object format: {"traceEvents": [...], ...} */
    } else if (c->ev_depth && c->depth == c->ev_depth - 1 && c->types[c->depth - 1] == 'a') {
        mt__trace_ev *e = &c->ev;
        char *keep = e->name;
        size_t cap = e->name_cap;
        memset(e, 0, sizeof *e);
        e->name = keep;
        e->name_cap = cap;
        c->ev_key = K_OTHER;
        c->in_args = 0;
    } else if (mt__trace_at_event(c) && c->ev_key == K_ARGS) {
        c->in_args = 1;
        c->args_key = A_OTHER;
    } else {
        mt__trace_mark(c, V_MAP);
    }
    return mt__trace_push(c, 'm');
}

static int mt__trace_start_array(void *ctx)
{
    mt__trace_ctx *c = ctx;
    if (c->depth == 0) {
        /* the array format: [event, ...] */
        c->ev_depth = 2;
        c->saw_events = 1;
    } else if (c->depth == 1 && c->types[0] == 'm' && c->top_key_events && !c->ev_depth) {
        c->ev_depth = 3;
        c->saw_events = 1;
    } else {
        mt__trace_mark(c, V_ARRAY);
    }
    return mt__trace_push(c, 'a');
}

static int mt__trace_end_array(void *ctx)
{
    mt__trace_ctx *c = ctx;
    c->depth--;
    if (c->ev_depth && c->depth == c->ev_depth - 2)
        c->ev_depth = 0; /* the events array closed */
    return 1;
}

int mt__trace_add(mt_trace *t, int kind, int64_t start, int64_t end, const char *name, size_t n,
                  int device, int stream)
{
    int gpu = kind == KIND_KERNEL || kind == KIND_MEMCPY;
    mt__trace_ival **v = gpu ? &t->iv : &t->rg, *iv;
    size_t *len = gpu ? &t->n : &t->nrg, *cap = gpu ? &t->cap : &t->rg_cap;
    long id;
    if (*len == *cap) {
        size_t nc = *cap ? *cap * 2 : 1024;
        mt__trace_ival *p = realloc(*v, nc * sizeof *p);
        if (!p)
            return -ENOMEM;
        *v = p;
        *cap = nc;
    }
    if ((id = mt__trace_intern(t, name, n)) < 0)
        return -ENOMEM;
    iv = &(*v)[(*len)++];
    iv->start = start;
    iv->end = end;
    iv->name = (uint32_t)id;
    iv->stream = stream;
    iv->device = gpu ? device : -1;
    iv->kind = (uint8_t)kind;
    if (kind == KIND_KERNEL)
        t->kernels++;
    else if (kind == KIND_MEMCPY)
        t->memcpys++;
    else if (kind == KIND_GRAPH)
        t->graph_launches++;
    return 0;
}

int mt__trace_launch(mt_trace *t, int64_t ts)
{
    if (t->nlts == t->lts_cap) {
        size_t nc = t->lts_cap ? t->lts_cap * 2 : 1024;
        int64_t *p = realloc(t->lts, nc * sizeof *p);
        if (!p)
            return -ENOMEM;
        t->lts = p;
        t->lts_cap = nc;
    }
    t->lts[t->nlts++] = ts;
    t->kernel_launches++;
    return 0;
}

static int mt__trace_cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static int mt__trace_cmp(const void *a, const void *b)
{
    const mt__trace_ival *x = a, *y = b;
    if (x->device != y->device)
        return x->device < y->device ? -1 : 1;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return 0;
}

/* Sorts v unless it already is (traces mostly arrive in order). */
static void mt__trace_sort(mt__trace_ival *v, size_t n)
{
    size_t i;
    for (i = 1; i < n; i++)
        if (mt__trace_cmp(&v[i - 1], &v[i]) > 0)
            break;
    if (i < n)
        qsort(v, n, sizeof *v, mt__trace_cmp);
}

int mt__trace_finish(mt_trace *t)
{
    if (t->n < t->cap) { /* give back the growth slack */
        mt__trace_ival *p = realloc(t->iv, (t->n ? t->n : 1) * sizeof *p);
        if (p)
            t->iv = p, t->cap = t->n ? t->n : 1;
    }
    mt__trace_sort(t->iv, t->n);
    mt__trace_sort(t->rg, t->nrg);
    if (t->nlts)
        qsort(t->lts, t->nlts, sizeof *t->lts, mt__trace_cmp_i64);
    return mt__trace_classify_all(t);
}

/* One stream of one device runs one kernel or copy at a time: two of its
 * events that overlap mean a corrupt trace (or several merged), and every
 * overlap figure drawn from it would be fiction (a kernel "hiding" another
 * on its own stream).  Overlaps up to TRACE__STREAM_SLACK_NS are timestamp
 * rounding (profilers print whole microseconds, or round ts and dur
 * separately) and pass.  iv is sorted by device, then start. */
#define TRACE__STREAM_SLACK_NS 1000

typedef struct mt__trace_lane {
    int32_t stream;
    size_t last; /* index in iv of the event that ends last so far */
} mt__trace_lane;

int mt__trace_check_streams(const mt_trace *t, const char *label, mt_diag *d)
{
    mt__trace_lane *lane = NULL;
    size_t nl = 0, cap = 0, i, bad = 0, first_a = 0, first_b = 0;
    int32_t dev = INT32_MIN;
    for (i = 0; i < t->n; i++) {
        const mt__trace_ival *v = &t->iv[i];
        size_t k;
        if (v->device != dev) {
            dev = v->device;
            nl = 0;
        }
        if (v->stream < 0)
            continue; /* a stream the trace did not name: nothing to check */
        for (k = 0; k < nl && lane[k].stream != v->stream; k++)
            ;
        if (k == nl) {
            if (nl == cap) {
                size_t nc = cap ? cap * 2 : 16;
                mt__trace_lane *p = realloc(lane, nc * sizeof *p);
                if (!p) {
                    free(lane);
                    mt_diag_add(d, label, 0, NULL, "out of memory reading the trace");
                    return -ENOMEM;
                }
                lane = p, cap = nc;
            }
            lane[nl].stream = v->stream;
            lane[nl++].last = i;
            continue;
        }
        if (t->iv[lane[k].last].end - v->start > TRACE__STREAM_SLACK_NS) {
            if (!bad++)
                first_a = lane[k].last, first_b = i;
        }
        if (v->end > t->iv[lane[k].last].end)
            lane[k].last = i;
    }
    free(lane);
    if (bad) {
        const mt__trace_ival *a = &t->iv[first_a], *b = &t->iv[first_b];
        mt_diag_add(d, label, 0, NULL,
                    "device %d, stream %d: '%.80s' (%" PRId64 ".%03d-%" PRId64
                    ".%03d us) and '%.80s' (from %" PRId64 ".%03d us) overlap by %" PRId64
                    ".%03d us on one stream, which a GPU never does (%zu such overlaps of more "
                    "than 1 us): the trace is corrupt or merged from several runs, and its "
                    "overlap figures would be fiction; refused",
                    (int)a->device, (int)a->stream, mt__trace_name(t, a->name), a->start / 1000,
                    (int)(a->start % 1000), a->end / 1000, (int)(a->end % 1000),
                    mt__trace_name(t, b->name), b->start / 1000, (int)(b->start % 1000),
                    (a->end - b->start) / 1000, (int)((a->end - b->start) % 1000), bad);
        return -EINVAL;
    }
    return 0;
}

static int mt__trace_add_ival(mt__trace_ctx *c, int kind, int64_t start, int64_t end)
{
    mt__trace_ev *e = &c->ev;
    if (mt__trace_add(c->t, kind, start, end, e->name, e->name_len, (int)e->dev, (int)e->stream))
        return mt__trace_fail(c, NULL, "out of memory");
    return 1;
}

/* An event object closed: keep it when it is GPU activity. */
static int mt__trace_event_done(mt__trace_ctx *c)
{
    mt__trace_ev *e = &c->ev;
    char f[64];
    const char *what = e->cat == CAT_KERNEL ? "kernel" : "memory copy";
    size_t i = c->ev_index++;
    if (e->ph_seen && !e->ph_x)
        return 1;
    if (e->cat == CAT_RUNTIME && e->name_v == V_OK) {
        if (!strcmp(e->name, "cudaGraphLaunch") || !strcmp(e->name, "cuGraphLaunch")) {
            /* kept with its time so replays can be placed against the steps */
            int64_t ts = e->ts_v == V_OK ? e->ts : 0, dur = 0;
            if (e->ts_v == V_OK && e->dur_v == V_OK && e->dur >= 0 && e->ts >= 0 &&
                e->ts <= INT64_MAX / 2 - e->dur)
                dur = e->dur;
            return mt__trace_add_ival(c, KIND_GRAPH, ts, ts + dur);
        }
        if (!strncmp(e->name, "cudaLaunchKernel", 16) || !strncmp(e->name, "cuLaunchKernel", 14)) {
            if (e->ts_v != V_OK)
                c->t->kernel_launches++; /* counted, but cannot be placed in a step */
            else if (mt__trace_launch(c->t, e->ts))
                return mt__trace_fail(c, NULL, "out of memory");
        }
        return 1;
    }
    if (e->cat == CAT_ANNOT) {
        /* a range without usable times cannot mark anything: skipped */
        if (e->name_v != V_OK || e->ts_v != V_OK || e->dur_v != V_OK || e->dur < 0 ||
            e->ts < 0 || e->ts > INT64_MAX / 2 - e->dur)
            return 1;
        return mt__trace_add_ival(c, KIND_RANGE, e->ts, e->ts + e->dur);
    }
    if (e->cat != CAT_KERNEL && e->cat != CAT_MEMCPY)
        return 1;
    if (e->name_v != V_OK) {
        snprintf(f, sizeof f, "traceEvents[%zu].name", i);
        return e->name_v == V_ABSENT
                   ? mt__trace_fail(c, f, "%s event without a \"name\"", what)
                   : mt__trace_fail(c, f, "%s event: \"name\" must be a string, not %s", what,
                                 mt__trace_vname(e->name_v));
    }
    if (e->ts_v != V_OK || e->dur_v != V_OK) {
        const char *k = e->ts_v != V_OK ? "ts" : "dur";
        int v = e->ts_v != V_OK ? e->ts_v : e->dur_v;
        snprintf(f, sizeof f, "traceEvents[%zu].%s", i, k);
        if (v == V_ABSENT)
            return mt__trace_fail(c, f, "%s event '%.80s' without \"%s\"", what, e->name, k);
        return mt__trace_fail(c, f,
                           "%s event '%.80s': \"%s\" must be a number of microseconds, not %s",
                           what, e->name, k, mt__trace_vname(v));
    }
    if (e->dur < 0) {
        snprintf(f, sizeof f, "traceEvents[%zu].dur", i);
        return mt__trace_fail(c, f, "%s event '%.80s': negative duration", what, e->name);
    }
    if (e->ts < 0 || e->ts > INT64_MAX / 2 - e->dur) {
        /* a profiler's clock starts at or after zero; bounding it keeps every
         * window difference inside int64 */
        snprintf(f, sizeof f, "traceEvents[%zu].ts", i);
        return mt__trace_fail(c, f, "%s event '%.80s': time out of range (negative or past 2^62 ns)",
                           what, e->name);
    }
    if (e->dev_v != V_OK) {
        if (e->dev_v != V_ABSENT) {
            snprintf(f, sizeof f, "traceEvents[%zu].args.device", i);
            return mt__trace_fail(c, f, "%s event '%.80s': \"device\" must be an integer, not %s",
                               what, e->name, mt__trace_vname(e->dev_v));
        }
        if (e->pid_v != V_OK) {
            snprintf(f, sizeof f, "traceEvents[%zu].pid", i);
            return mt__trace_fail(c, f,
                               "%s event '%.80s' names no device: give args.device or an "
                               "integer \"pid\"",
                               what, e->name);
        }
        e->dev = e->pid;
    }
    if (e->stream_v != V_OK)
        e->stream = e->tid_v == V_OK ? e->tid : -1;
    if (e->dev < INT32_MIN || e->dev > INT32_MAX || e->stream < INT32_MIN ||
        e->stream > INT32_MAX) {
        snprintf(f, sizeof f, "traceEvents[%zu]", i);
        return mt__trace_fail(c, f, "%s event '%.80s': device or stream out of range", what, e->name);
    }
    return mt__trace_add_ival(c, e->cat == CAT_KERNEL ? KIND_KERNEL : KIND_MEMCPY, e->ts,
                           e->ts + e->dur);
}

static int mt__trace_end_map(void *ctx)
{
    mt__trace_ctx *c = ctx;
    int ok = 1;
    c->depth--;
    if (c->ev_depth && c->depth == c->ev_depth - 1 && c->types[c->depth - 1] == 'a')
        ok = mt__trace_event_done(c);
    else if (c->ev_depth && c->in_args && c->depth == c->ev_depth)
        c->in_args = 0;
    return ok;
}

static const yajl_callbacks mt__trace_callbacks = {
    mt__trace_null,      mt__trace_bool,      NULL,           NULL,           mt__trace_number,
    mt__trace_string,    mt__trace_start_map, mt__trace_map_key, mt__trace_end_map, mt__trace_start_array,
    mt__trace_end_array,
};

/* ---- reading ---------------------------------------------------------------------------- */

typedef struct mt__trace_reader {
    FILE *f;
    gzFile gz;
    const char *mem;
    size_t mem_len, mem_off;
} mt__trace_reader;

/* Bytes read, 0 at the end, -1 on error (message in err). */
static long mt__trace_read(mt__trace_reader *r, unsigned char *buf, size_t cap, char *err, size_t errlen)
{
    if (r->mem) {
        size_t n = r->mem_len - r->mem_off < cap ? r->mem_len - r->mem_off : cap;
        memcpy(buf, r->mem + r->mem_off, n);
        r->mem_off += n;
        return (long)n;
    }
    if (r->gz) {
        int n = gzread(r->gz, buf, (unsigned)cap), zerr = Z_OK;
        const char *msg = gzerror(r->gz, &zerr);
        if (n < 0 || (zerr != Z_OK && zerr != Z_STREAM_END)) {
            snprintf(err, errlen, "cannot decompress (gzip): %s", msg ? msg : "error");
            return -1;
        }
        return n;
    } else {
        size_t n = fread(buf, 1, cap, r->f);
        if (n == 0 && ferror(r->f)) {
            snprintf(err, errlen, "cannot read: %s", strerror(errno ? errno : EIO));
            return -1;
        }
        return (long)n;
    }
}

/* Newlines in buf (for the line numbers of messages). */
static long mt__trace_lines(const unsigned char *buf, size_t n)
{
    const unsigned char *p = buf, *end = buf + n;
    long k = 0;
    while (p < end && (p = memchr(p, '\n', (size_t)(end - p))) != NULL)
        k++, p++;
    return k;
}

static mt_trace *mt__trace_load(mt__trace_reader *r, const char *label, mt_diag *d)
{
    mt__trace_ctx *c = calloc(1, sizeof *c);
    mt_trace *t = calloc(1, sizeof *t);
    unsigned char *buf = malloc(TRACE__CHUNK);
    yajl_handle h = NULL;
    long line = 1, n;
    char rerr[256] = "";
    yajl_status st = yajl_status_ok;
    if (!c || !t || !buf || !(h = yajl_alloc(&mt__trace_callbacks, NULL, c))) {
        mt_diag_add(d, label, 0, NULL, "out of memory reading the trace");
        goto fail;
    }
    c->t = t;
    c->label = label;
    while ((n = mt__trace_read(r, buf, TRACE__CHUNK, rerr, sizeof rerr)) > 0) {
        st = yajl_parse(h, buf, (size_t)n);
        if (st != yajl_status_ok) {
            size_t used = yajl_get_bytes_consumed(h);
            line += mt__trace_lines(buf, used < (size_t)n ? used : (size_t)n);
            break;
        }
        line += mt__trace_lines(buf, (size_t)n);
    }
    if (n < 0) {
        mt_diag_add(d, label, 0, NULL, "%s", rerr);
        goto fail;
    }
    if (st == yajl_status_ok)
        st = yajl_complete_parse(h);
    if (st == yajl_status_client_canceled) {
        mt_diag_add(d, label, c->field[0] ? 0 : (int)line, c->field[0] ? c->field : NULL, "%s",
                    c->err);
        goto fail;
    }
    if (st != yajl_status_ok) {
        unsigned char *msg = yajl_get_error(h, 0, NULL, 0);
        const char *m = (const char *)msg;
        /* yajl's "premature EOF" is the usual truncated download */
        mt_diag_add(d, label, (int)line, NULL, "not valid JSON (%s)%s", m ? m : "parse error",
                    m && strstr(m, "premature EOF") ? ": the file is truncated" : "");
        yajl_free_error(h, msg);
        goto fail;
    }
    if (!c->saw_events) {
        mt_diag_add(d, label, 0, "traceEvents",
                    "not a Chrome/Kineto trace: no \"traceEvents\" array (nor a top-level "
                    "array of events)");
        goto fail;
    }
    if (mt__trace_finish(t)) {
        mt_diag_add(d, label, 0, NULL, "out of memory reading the trace");
        goto fail;
    }
    if (mt__trace_check_streams(t, label, d))
        goto fail;
    yajl_free(h);
    free(c->ev.name);
    free(c);
    free(buf);
    return t;
fail:
    if (h)
        yajl_free(h);
    if (c)
        free(c->ev.name);
    free(c);
    free(buf);
    mt_trace_destroy(&t);
    return NULL;
}

mt_trace *mt_trace_parse(const char *text, size_t len, const char *label, mt_diag *d)
{
    mt__trace_reader r;
    memset(&r, 0, sizeof r);
    r.mem = text ? text : "";
    r.mem_len = text ? len : 0;
    return mt__trace_load(&r, label ? label : "(trace)", d);
}

mt_trace *mt__trace_json_open(const char *path, mt_diag *d)
{
    mt__trace_reader r;
    unsigned char magic[2] = {0};
    size_t got;
    mt_trace *t;
    memset(&r, 0, sizeof r);
    if (!(r.f = fopen(path, "rb"))) {
        mt_diag_add(d, path, 0, NULL, "cannot open the trace: %s", strerror(errno));
        return NULL;
    }
    got = fread(magic, 1, sizeof magic, r.f);
    if (got >= 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
        fclose(r.f);
        r.f = NULL;
        if (!(r.gz = gzopen(path, "rb"))) {
            mt_diag_add(d, path, 0, NULL, "cannot open the gzip trace: %s", strerror(errno));
            return NULL;
        }
        gzbuffer(r.gz, TRACE__CHUNK);
    } else {
        rewind(r.f);
    }
    t = mt__trace_load(&r, path, d);
    if (r.gz)
        gzclose(r.gz);
    if (r.f)
        fclose(r.f);
    return t;
}

void mt_trace_destroy(mt_trace **tp)
{
    mt_trace *t;
    size_t i;
    if (!tp || !*tp)
        return;
    t = *tp;
    for (i = 0; i < t->nrules; i++)
        free(t->rules[i].pattern);
    free(t->rules);
    free(t->iv);
    free(t->rg);
    free(t->lts);
    free(t->pool);
    free(t->names);
    free(t->cls);
    free(t->facts);
    free(t->hash);
    free(t);
    *tp = NULL;
}

size_t mt_trace_kernel_count(const mt_trace *t)
{
    return t->kernels;
}
size_t mt_trace_memcpy_count(const mt_trace *t)
{
    return t->memcpys;
}
size_t mt_trace_graph_launches(const mt_trace *t)
{
    return t->graph_launches;
}
size_t mt_trace_kernel_launches(const mt_trace *t)
{
    return t->kernel_launches;
}

size_t mt_trace_devices(const mt_trace *t, int *out, size_t max)
{
    size_t i, k = 0;
    int have = 0, last = 0;
    for (i = 0; i < t->n; i++) {
        if (t->iv[i].kind != KIND_KERNEL || (have && t->iv[i].device == last))
            continue;
        if (k < max)
            out[k] = t->iv[i].device;
        k++;
        have = 1;
        last = t->iv[i].device;
    }
    return k;
}

/* ---- sweeps ------------------------------------------------------------------------------- */

typedef struct span {
    int64_t s, e;
} span;

/* Merges spans sorted by start in place; returns the merged count. */
static size_t mt__trace_merge(span *v, size_t n)
{
    size_t i, k = 0;
    for (i = 0; i < n; i++) {
        if (v[i].e <= v[i].s)
            continue;
        if (k && v[i].s <= v[k - 1].e) {
            if (v[i].e > v[k - 1].e)
                v[k - 1].e = v[i].e;
        } else {
            v[k++] = v[i];
        }
    }
    return k;
}

static int64_t mt__trace_measure(const span *v, size_t n)
{
    int64_t sum = 0;
    size_t i;
    for (i = 0; i < n; i++)
        sum += v[i].e - v[i].s;
    return sum;
}

/* a minus b (both merged) into out (room for na + nb); returns count. */
static size_t mt__trace_minus(const span *a, size_t na, const span *b, size_t nb, span *out)
{
    size_t i, j = 0, k = 0;
    for (i = 0; i < na; i++) {
        int64_t cur = a[i].s;
        while (j < nb && b[j].e <= cur)
            j++;
        for (size_t jj = j; jj < nb && b[jj].s < a[i].e; jj++) {
            if (b[jj].s > cur)
                out[k].s = cur, out[k++].e = b[jj].s;
            if (b[jj].e > cur)
                cur = b[jj].e;
            if (cur >= a[i].e)
                break;
        }
        if (cur < a[i].e)
            out[k].s = cur, out[k++].e = a[i].e;
    }
    return k;
}

/* ---- host marks: steps and NVTX ranges --------------------------------------------------- */

/* The step number of a "ProfilerStep#N" mark, or -1. */
static long mt__trace_step_of(const char *name)
{
    const char *p;
    char *end;
    long v;
    if (strncmp(name, "ProfilerStep#", 13))
        return -1;
    p = name + 13;
    if (*p < '0' || *p > '9')
        return -1;
    v = strtol(p, &end, 10);
    return *end || v > INT32_MAX ? -1 : v;
}

size_t mt_trace_steps(const mt_trace *t, int *first, int *last)
{
    size_t i, n = 0;
    long lo = 0, hi = 0;
    for (i = 0; i < t->nrg; i++) {
        long s;
        if (t->rg[i].kind != KIND_RANGE || (s = mt__trace_step_of(mt__trace_name(t, t->rg[i].name))) < 0)
            continue;
        if (!n || s < lo)
            lo = s;
        if (!n || s > hi)
            hi = s;
        n++;
    }
    if (first)
        *first = (int)lo;
    if (last)
        *last = (int)hi;
    return n;
}

int mt_trace_step_window(const mt_trace *t, int first, int last, int64_t *start_ns,
                         int64_t *end_ns)
{
    size_t i;
    int have0 = 0, have1 = 0;
    if (last < first)
        return -EINVAL;
    for (i = 0; i < t->nrg; i++) {
        long s;
        if (t->rg[i].kind != KIND_RANGE || (s = mt__trace_step_of(mt__trace_name(t, t->rg[i].name))) < 0)
            continue;
        if (s == first && (!have0 || t->rg[i].start < *start_ns))
            *start_ns = t->rg[i].start, have0 = 1;
        if (s == last && (!have1 || t->rg[i].end > *end_ns))
            *end_ns = t->rg[i].end, have1 = 1;
    }
    return have0 && have1 ? 0 : -ENOENT;
}

static int mt__trace_has_ci(const char *name, const char *word)
{
    size_t n = strlen(word);
    for (; *name; name++)
        if (!strncasecmp(name, word, n))
            return 1;
    return 0;
}

/* Union of the ranges whose names contain word, clipped to [w0, w1). */
static int mt__trace_range_union(const mt_trace *t, const char *word, int64_t w0, int64_t w1,
                              size_t *count, int64_t *ns)
{
    span *v = malloc((t->nrg ? t->nrg : 1) * sizeof *v);
    size_t i, k = 0;
    if (!v)
        return -ENOMEM;
    for (i = 0; i < t->nrg; i++) {
        const mt__trace_ival *r = &t->rg[i];
        span s = {r->start < w0 ? w0 : r->start, r->end > w1 ? w1 : r->end};
        if (r->kind != KIND_RANGE || s.e <= s.s || !mt__trace_has_ci(mt__trace_name(t, r->name), word))
            continue;
        v[k++] = s; /* rg is sorted by start */
    }
    *count = k;
    k = mt__trace_merge(v, k);
    *ns = mt__trace_measure(v, k);
    free(v);
    return 0;
}

/* The first interval of device in t->iv (sorted by device). */
static size_t mt__trace_device_first(const mt_trace *t, int device)
{
    size_t a = 0, b = t->n; /* first interval of device */
    while (a < b) {
        size_t mid = a + (b - a) / 2;
        if (t->iv[mid].device < device)
            a = mid + 1;
        else
            b = mid;
    }
    return a;
}

/* One device's intervals clipped to the window, by class. */
typedef struct mt__trace_sets {
    span *all, *comm, *comp, *cp, *ex;
    size_t nk, nc, nx, nm;
} mt__trace_sets;

/* Sorts the device's intervals lo..hi clipped to [w0, w1) into the sets
 * and counts them in m. */
static void mt__trace_classify(const mt_trace *t, size_t lo, size_t hi, int64_t w0, int64_t w1,
                            mt__trace_sets *z, mt_trace_metrics *m)
{
    size_t i;
    z->nk = 0;
    for (i = lo; i < hi; i++) {
        const mt__trace_ival *v = &t->iv[i];
        span s = {v->start < w0 ? w0 : v->start, v->end > w1 ? w1 : v->end};
        if (s.e <= s.s)
            continue; /* outside the window (or empty) */
        if (v->kind == KIND_MEMCPY) {
            z->cp[z->nm++] = s;
            m->memcpys++;
            continue;
        }
        z->all[z->nk++] = s;
        m->kernels++;
        switch (t->cls[v->name]) {
        case MT_TRACE_COMM:
            z->comm[z->nc++] = s, m->comm_kernels++;
            break;
        case MT_TRACE_COMPUTE:
            z->comp[z->nx++] = s, m->compute_kernels++;
            break;
        case MT_TRACE_MEMCPY:
            z->cp[z->nm++] = s;
            break;
        default:
            break;
        }
    }
}

/* The sets merged and measured into m; top kernels: each instant of
 * exposed communication goes to the earliest-starting kernel covering it
 * (per[name] += ns), before the comm spans are merged away. */
static int mt__trace_exposed(const mt_trace *t, size_t lo, size_t hi, int64_t w0, int64_t w1,
                          mt__trace_sets *z, int64_t *per, mt_trace_metrics *m)
{
    size_t i, ncm, nxm, nex, j = 0, ci = 0, nc = z->nc;
    int64_t claimed = INT64_MIN;
    span *craw = malloc((nc ? nc : 1) * sizeof *craw);
    uint32_t *cname = malloc((nc ? nc : 1) * sizeof *cname);
    if (!craw || !cname) {
        free(craw), free(cname);
        return -ENOMEM;
    }
    for (i = lo; i < hi; i++) {
        const mt__trace_ival *v = &t->iv[i];
        span s = {v->start < w0 ? w0 : v->start, v->end > w1 ? w1 : v->end};
        if (v->kind == KIND_KERNEL && s.e > s.s && t->cls[v->name] == MT_TRACE_COMM)
            craw[ci] = s, cname[ci++] = v->name;
    }
    ncm = mt__trace_merge(z->comm, z->nc);
    nxm = mt__trace_merge(z->comp, z->nx);
    z->nk = mt__trace_merge(z->all, z->nk);
    z->nm = mt__trace_merge(z->cp, z->nm);
    nex = mt__trace_minus(z->comm, ncm, z->comp, nxm, z->ex);
    m->comm_ns = mt__trace_measure(z->comm, ncm);
    m->compute_ns = mt__trace_measure(z->comp, nxm);
    m->exposed_comm_ns = mt__trace_measure(z->ex, nex);
    m->hidden_ns = m->comm_ns - m->exposed_comm_ns;
    m->active_ns = mt__trace_measure(z->all, z->nk);
    m->memcpy_ns = mt__trace_measure(z->cp, z->nm);
    m->idle_ns = m->window_ns - m->active_ns;
    for (i = 0; i < ci; i++) {
        int64_t s = craw[i].s > claimed ? craw[i].s : claimed, e = craw[i].e;
        if (e <= s)
            continue;
        claimed = e;
        while (j < nex && z->ex[j].e <= s)
            j++;
        for (size_t jj = j; jj < nex && z->ex[jj].s < e; jj++) {
            int64_t a = z->ex[jj].s > s ? z->ex[jj].s : s, b = z->ex[jj].e < e ? z->ex[jj].e : e;
            if (b > a)
                per[cname[i]] += b - a;
        }
    }
    free(craw), free(cname);
    return 0;
}

/* Gaps of the active union all[0..nk) inside [w0, w1), edges included. */
static void mt__trace_gaps(const span *all, size_t nk, int64_t w0, int64_t w1, mt_trace_metrics *m)
{
    int64_t prev = w0;
    size_t i;
    for (i = 0; i <= nk; i++) {
        int64_t next = i < nk ? all[i].s : w1, g = next - prev;
        if (g > 0) {
            m->gaps++;
            if (g > m->max_gap_ns)
                m->max_gap_ns = g;
            if (g > m->gap_threshold_ns)
                m->gaps_above++, m->gaps_above_ns += g;
        }
        if (i < nk)
            prev = all[i].e;
    }
}

/* The MT_TRACE_TOP kernels with the most exposed time per[name] into m. */
static void mt__trace_top(const mt_trace *t, const int64_t *per, mt_trace_metrics *m)
{
    size_t i;
    for (i = 0; i < t->nnames; i++) {
        size_t k;
        if (per[i] <= 0)
            continue;
        for (k = m->ntop; k > 0 && m->top[k - 1].exposed_ns < per[i]; k--)
            if (k < MT_TRACE_TOP)
                m->top[k] = m->top[k - 1];
        if (k < MT_TRACE_TOP) {
            m->top[k].name = mt__trace_name(t, (uint32_t)i);
            m->top[k].exposed_ns = per[i];
            if (m->ntop < MT_TRACE_TOP)
                m->ntop++;
        }
    }
}

int mt_trace_metrics_get(const mt_trace *t, int device, const mt_trace_query *q,
                         mt_trace_metrics *m)
{
    size_t lo = 0, hi, nk = 0, ne;
    mt__trace_sets z;
    int64_t w0 = INT64_MAX, w1 = INT64_MIN, *per = NULL;
    int rc = 0;
    memset(m, 0, sizeof *m);
    memset(&z, 0, sizeof z);
    m->device = device;
    lo = mt__trace_device_first(t, device);
    for (hi = lo; hi < t->n && t->iv[hi].device == device; hi++)
        if (t->iv[hi].kind == KIND_KERNEL) {
            if (t->iv[hi].start < w0)
                w0 = t->iv[hi].start;
            if (t->iv[hi].end > w1)
                w1 = t->iv[hi].end;
            nk++;
        }
    if (!nk)
        return -ENOENT;
    if (q && q->has_window) {
        w0 = q->start_ns;
        w1 = q->end_ns;
    }
    if (w1 <= w0)
        return -EINVAL;
    m->window_start_ns = w0;
    m->window_end_ns = w1;
    m->window_ns = w1 - w0;
    m->gap_threshold_ns =
        q && q->gap_threshold_ns > 0 ? q->gap_threshold_ns : TRACE__DEFAULT_GAP_NS;
    ne = hi - lo;
    z.all = malloc(ne * sizeof *z.all);
    z.comm = malloc(ne * sizeof *z.comm);
    z.comp = malloc(ne * sizeof *z.comp);
    z.cp = malloc(ne * sizeof *z.cp);
    z.ex = malloc(2 * ne * sizeof *z.ex);
    per = calloc(t->nnames ? t->nnames : 1, sizeof *per);
    if (!z.all || !z.comm || !z.comp || !z.cp || !z.ex || !per) {
        rc = -ENOMEM;
        goto out;
    }
    mt__trace_classify(t, lo, hi, w0, w1, &z, m);
    if ((rc = mt__trace_exposed(t, lo, hi, w0, w1, &z, per, m)))
        goto out;
    mt__trace_gaps(z.all, z.nk, w0, w1, m);
    mt__trace_top(t, per, m);
    if ((rc = mt__trace_range_union(t, "dispatch", w0, w1, &m->dispatch_ranges, &m->dispatch_ns)) ||
        (rc = mt__trace_range_union(t, "combine", w0, w1, &m->combine_ranges, &m->combine_ns)))
        goto out;
out:
    free(z.all), free(z.comm), free(z.comp), free(z.cp), free(z.ex), free(per);
    return rc;
}

/* ---- evidence and printing ---------------------------------------------------------------- */

static int mt__trace_hidden_fraction(const mt_trace *t, double *frac)
{
    int64_t hidden = 0, comm = 0;
    size_t nd = mt_trace_devices(t, NULL, 0), i;
    int *dev = malloc((nd ? nd : 1) * sizeof *dev);
    if (!dev)
        return -ENOMEM;
    mt_trace_devices(t, dev, nd);
    for (i = 0; i < nd; i++) {
        mt_trace_metrics m;
        int rc = mt_trace_metrics_get(t, dev[i], NULL, &m);
        if (rc) {
            free(dev);
            return rc;
        }
        hidden += m.hidden_ns;
        comm += m.comm_ns;
    }
    free(dev);
    *frac = comm ? (double)hidden / (double)comm : 0.0;
    return 0;
}

/* How many sorted times in v fall in [a, b). */
static size_t mt__trace_count_in(const int64_t *v, size_t n, int64_t a, int64_t b)
{
    size_t lo = 0, hi = n, l2, h2;
    while (lo < hi) { /* first >= a */
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid] < a)
            lo = mid + 1;
        else
            hi = mid;
    }
    l2 = lo, h2 = n;
    while (l2 < h2) { /* first >= b */
        size_t mid = l2 + (h2 - l2) / 2;
        if (v[mid] < b)
            l2 = mid + 1;
        else
            h2 = mid;
    }
    return l2 - lo;
}

/* Graph replay against the step marks: which steps launched graphs, and how
 * many individual kernel launches the graphed and the eager steps made. */
static int mt__trace_graph_evidence(const mt_trace *t, mt_kv *ev)
{
    size_t i, steps = 0, gsteps = 0, esteps = 0, glaunch = 0, elaunch = 0;
    long gfirst = -1, glast = -1;
    int64_t *gts = malloc((t->nrg ? t->nrg : 1) * sizeof *gts);
    size_t ng = 0;
    int rc = 0;
    if (!gts)
        return -ENOMEM;
    for (i = 0; i < t->nrg; i++)
        if (t->rg[i].kind == KIND_GRAPH)
            gts[ng++] = t->rg[i].start; /* sorted: rg is sorted by start */
    for (i = 0; i < t->nrg; i++) {
        const mt__trace_ival *r = &t->rg[i];
        long s;
        size_t g, k, j;
        int64_t end = r->end;
        if (r->kind != KIND_RANGE || (s = mt__trace_step_of(mt__trace_name(t, r->name))) < 0)
            continue;
        /* a launch on the boundary of two steps (their rounded ends and
         * starts may overlap by a nanosecond) belongs to the later one */
        for (j = i + 1; j < t->nrg && t->rg[j].start < end; j++)
            if (t->rg[j].kind == KIND_RANGE && mt__trace_step_of(mt__trace_name(t, t->rg[j].name)) >= 0) {
                end = t->rg[j].start;
                break;
            }
        steps++;
        g = mt__trace_count_in(gts, ng, r->start, end);
        k = mt__trace_count_in(t->lts, t->nlts, r->start, end);
        if (g) {
            gsteps++, glaunch += k;
            if (gfirst < 0 || s < gfirst)
                gfirst = s;
            if (s > glast)
                glast = s;
        } else {
            esteps++, elaunch += k;
        }
    }
    free(gts);
    if (!steps)
        return 0;
    rc |= mt_kv_setf(ev, "trace.steps", "%zu", steps);
    rc |= mt_kv_setf(ev, "trace.graph_steps", "%zu", gsteps);
    if (gsteps) {
        rc |= mt_kv_setf(ev, "trace.graph_first_step", "%ld", gfirst);
        rc |= mt_kv_setf(ev, "trace.graph_last_step", "%ld", glast);
        rc |= mt_kv_setf(ev, "trace.launches_per_graph_step", "%.1f",
                         (double)glaunch / (double)gsteps);
    }
    if (esteps)
        rc |= mt_kv_setf(ev, "trace.launches_per_eager_step", "%.1f",
                         (double)elaunch / (double)esteps);
    return rc ? -ENOMEM : 0;
}

int mt_trace_evidence(const mt_trace *t, mt_kv *ev)
{
    size_t cnt[6] = {0}, i;
    double frac = 0;
    int rc = 0;
    for (i = 0; i < t->n; i++) {
        uint8_t f;
        int b;
        if (t->iv[i].kind != KIND_KERNEL)
            continue;
        f = t->facts[t->iv[i].name];
        for (b = 0; b < 6; b++)
            if (f & (1 << b))
                cnt[b]++;
    }
    if ((rc = mt__trace_hidden_fraction(t, &frac)))
        return rc;
    rc |= mt_kv_set(ev, "trace.available", "true");
    rc |= mt_kv_setf(ev, "trace.fp8_gemm", "%zu", cnt[0]);
    rc |= mt_kv_setf(ev, "trace.mxfp8_gemm", "%zu", cnt[1]);
    rc |= mt_kv_setf(ev, "trace.nvfp4_gemm", "%zu", cnt[2]);
    rc |= mt_kv_setf(ev, "trace.deepep_kernels", "%zu", cnt[3]);
    rc |= mt_kv_setf(ev, "trace.hybridep_kernels", "%zu", cnt[4]);
    rc |= mt_kv_setf(ev, "trace.alltoall_kernels", "%zu", cnt[5]);
    rc |= mt_kv_setf(ev, "trace.graph_launches", "%zu", t->graph_launches);
    rc |= mt_kv_setf(ev, "trace.kernel_launches", "%zu", t->kernel_launches);
    rc |= mt_kv_setf(ev, "trace.comm_hidden_fraction", "%.6f", frac);
    if (!rc)
        rc = mt__trace_graph_evidence(t, ev);
    return rc ? -ENOMEM : 0;
}

/* Nanoseconds as microseconds with three decimals, exactly. */
void mt_trace_print_us(FILE *out, int64_t ns)
{
    uint64_t a = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    fprintf(out, "%s%" PRIu64 ".%03u", ns < 0 ? "-" : "", a / 1000, (unsigned)(a % 1000));
}

static double mt__trace_share(int64_t part, int64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static void mt__trace_json_str(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(out, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(out, "\\u%04x", ch);
        else
            fputc(ch, out);
    }
    fputc('"', out);
}

void mt_trace_metrics_print(const mt_trace_metrics *m, FILE *out, int json)
{
    static const char *const keys[] = {"window_us",       "active_us",  "idle_us",
                                       "comm_us",         "compute_us", "hidden_comm_us",
                                       "exposed_comm_us", "memcpy_us",  "gaps_above_us"};
    const int64_t vals[] = {m->window_ns,       m->active_ns,  m->idle_ns,
                            m->comm_ns,         m->compute_ns, m->hidden_ns,
                            m->exposed_comm_ns, m->memcpy_ns,  m->gaps_above_ns};
    size_t i;
    if (json) {
        fprintf(out, "{\"device\": %d, \"window_start_us\": ", m->device);
        mt_trace_print_us(out, m->window_start_ns);
        fputs(", \"window_end_us\": ", out);
        mt_trace_print_us(out, m->window_end_ns);
        for (i = 0; i < sizeof keys / sizeof keys[0]; i++) {
            fprintf(out, ", \"%s\": ", keys[i]);
            mt_trace_print_us(out, vals[i]);
        }
        fprintf(out,
                ", \"kernels\": %zu, \"comm_kernels\": %zu, \"compute_kernels\": %zu, "
                "\"hidden_share_of_comm\": %.6f, \"exposed_comm_share_of_window\": %.6f, "
                "\"idle_share_of_window\": %.6f, \"gap_threshold_us\": ",
                m->kernels, m->comm_kernels, m->compute_kernels,
                mt__trace_share(m->hidden_ns, m->comm_ns) / 100,
                mt__trace_share(m->exposed_comm_ns, m->window_ns) / 100,
                mt__trace_share(m->idle_ns, m->window_ns) / 100);
        mt_trace_print_us(out, m->gap_threshold_ns);
        fprintf(out, ", \"gaps\": %zu, \"gaps_above\": %zu, \"dispatch_ranges\": %zu, "
                "\"combine_ranges\": %zu, \"dispatch_us\": ",
                m->gaps, m->gaps_above, m->dispatch_ranges, m->combine_ranges);
        mt_trace_print_us(out, m->dispatch_ns);
        fputs(", \"combine_us\": ", out);
        mt_trace_print_us(out, m->combine_ns);
        fputs(", \"top_exposed\": [", out);
        for (i = 0; i < m->ntop; i++) {
            fputs(i ? ", {\"name\": " : "{\"name\": ", out);
            mt__trace_json_str(out, m->top[i].name);
            fputs(", \"exposed_us\": ", out);
            mt_trace_print_us(out, m->top[i].exposed_ns);
            fputc('}', out);
        }
        fputs("]}", out);
        return;
    }
    fprintf(out, "device %d: window ", m->device);
    mt_trace_print_us(out, m->window_ns);
    fprintf(out, " us, %zu kernels (%zu communication, %zu compute)\n", m->kernels, m->comm_kernels,
            m->compute_kernels);
    for (i = 1; i < sizeof keys / sizeof keys[0] - 1; i++) {
        fprintf(out, "  %-16s ", keys[i]);
        mt_trace_print_us(out, vals[i]);
        if (i == 5)
            fprintf(out, " (%.3f%% of communication)\n", mt__trace_share(m->hidden_ns, m->comm_ns));
        else
            fprintf(out, " (%.3f%% of window)\n", mt__trace_share(vals[i], m->window_ns));
    }
    fprintf(out, "  gaps             %zu, %zu above ", m->gaps, m->gaps_above);
    mt_trace_print_us(out, m->gap_threshold_ns);
    fputs(" us totalling ", out);
    mt_trace_print_us(out, m->gaps_above_ns);
    fputs(" us\n", out);
    if (m->dispatch_ranges || m->combine_ranges) {
        fprintf(out, "  nvtx dispatch    ");
        mt_trace_print_us(out, m->dispatch_ns);
        fprintf(out, " us in %zu ranges; combine ", m->dispatch_ranges);
        mt_trace_print_us(out, m->combine_ns);
        fprintf(out, " us in %zu ranges\n", m->combine_ranges);
    }
    for (i = 0; i < m->ntop; i++) {
        fputs("  exposed         ", out);
        mt_trace_print_us(out, m->top[i].exposed_ns);
        fprintf(out, " us  %.100s\n", m->top[i].name);
    }
}
