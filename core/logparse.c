/*
 * logparse.c - the Megatron-LM / Megatron-Bridge log reader.
 *
 * Shape: bytes -> per-source line buffer -> lines (split on LF and CR) ->
 * launcher prefix stripped -> hard-wrap reassembly -> one dispatch on the
 * line's first bytes (iteration, memory, arguments, world, Step Time,
 * theoretical memory, validation) -> otherwise one pass over the line that
 * looks at word starts only for the words that mark an event.  Lines are
 * parsed where they lie (in the caller's chunk when whole, else in the
 * source's buffer); nothing is allocated per line.
 *
 * Iteration lines are read field by field between '|' separators: only a
 * field closed by its '|' counts (Megatron closes every field), so a line
 * cut anywhere never yields a half number.  The last field Megatron prints,
 * "number of nan iterations: N |", marks a complete line: text after it is
 * another print glued on and is read as a line of its own; a line without it
 * is a terminal hard-wrap (or a truncated file) and waits for its
 * continuation pieces, each read once as it comes.  A memory line has no end
 * mark: it waits for the next line of its source, which continues it only
 * when it joins the cut field into a "key: number" again.  Every scan is linear in
 * the line: a word that repeats a million times costs a million small
 * steps, never a search of the line each.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include "logparse.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* No terminal wraps narrower; a shorter cut line is taken as it is. */
#define WRAP_MIN_WIDTH 40
#define WRAP_MAX_CHUNKS 256
#define LOSS_KEY_MAX 63
#define ARG_NAME_MAX 255

/*
 * An iteration as stored: what every line has inline, losses and the rarely
 * printed fields in pools; well under half of mt_iteration.  On long logs it
 * is storing records, not parsing, that bounds throughput (first touch of
 * fresh pages), and the memory held grows with it.
 */
typedef struct lp_rec {
    int64_t iteration, total, consumed_samples;
    double timestamp, elapsed_ms, tflops, lr, loss_scale, grad_norm, step_time_s, step_tflops;
    uint64_t line;
    uint32_t has;
    int32_t rank, global_batch, skipped, nan_count; /* clamped */
    uint32_t extra;                                 /* index in extra, or LP_NONE */
    uint32_t loss_first;                            /* index in loss */
    uint8_t n_losses;
} lp_rec;

#define LP_NONE UINT32_MAX
#define CFG_NONE 0
#define CFG_NON_DEFAULT 1 /* Bridge >= 0.4: "Non-default values" summary */
#define CFG_YAML 2        /* Bridge <= 0.3: "Task Configuration" YAML */
#define PEND_ITERATION 0
#define PEND_MEMORY 1
#define LP_RARE                                                                                    \
    (MT_IT_SKIPPED_SAMPLES | MT_IT_ENERGY | MT_IT_POWER | MT_IT_NUM_ZEROS | MT_IT_PARAMS_NORM |    \
     MT_IT_MAX_LOGIT)

typedef struct lp_extra {
    int64_t skipped_samples;
    double energy, power, num_zeros, params_norm, max_attention_logit;
} lp_extra;

typedef struct lp_loss {
    double value;
    const char *key; /* interned in mt_logparse.keys */
} lp_loss;

typedef struct lp_source {
    int rank, channel;
    uint64_t lineno;
    /* the current unterminated line */
    char *buf;
    size_t len, cap;
    int overflow;
    /* an iteration or memory line waiting for its hard-wrap continuation */
    int pending, pend_kind; /* PEND_ITERATION or PEND_MEMORY */
    char *pend;
    size_t pend_len, pend_cap, pend_width;
    size_t pend_resume; /* offset in pend where reading continues; 0: from the start */
    int pend_rank, pend_chunks;
    uint64_t pend_line;
    mt_iteration pend_it; /* what the pieces so far said */
    /* inside the arguments dump that args_rank opened */
    int in_args, args_rank;
} lp_source;

struct mt_logparse {
    lp_source **src;
    size_t nsrc, capsrc;
    lp_source *last;

    lp_rec *rec;
    size_t nrec, caprec, maxit;
    lp_loss *loss;
    size_t nloss, caploss;
    lp_extra *extra;
    size_t nextra, capextra;
    int64_t last_iteration;
    int ranks_per_task; /* srun task T, torchrun local rank L: rank T * this + L */

    mt_rank_memory *mem;
    size_t nmem, capmem;

    mt_logevent *ev;
    size_t nev, capev;
    uint64_t kind_count[MT_LOGEV_KINDS];
    mt_logevent first[MT_LOGEV_KINDS];
    mt_logevent first_import_dispatch, first_fallback_dispatch, capture_best;
    int have_import_dispatch, have_fallback_dispatch, capture_pri;

    mt_kv *args;
    /* inside a Bridge configuration block that cfg_src (rank cfg_rank) opened */
    lp_source *cfg_src;
    int cfg_mode, cfg_rank, cfg_seen; /* CFG_* */
    char cfg_sec[32];
    int y_depth; /* YAML: the open mappings */
    int y_ind[8];
    char y_key[8][48];
    int yl_active, yl_ind, yl_ok, yl_n; /* YAML: a block list being read */
    char yl_sec[48], yl_key[ARG_NAME_MAX + 1];
    char yl_buf[MT_LOGPARSE_ARG_MAX + 1];
    size_t yl_len;
    int have_world;
    mt_logworld world;
    char world_text[MT_LOGPARSE_TEXT_MAX + 1];
    int have_theo;
    double theo_w, theo_a, theo_t;

    char keys[MT_LOGPARSE_MAX_LOSS_KEYS][LOSS_KEY_MAX + 1];
    size_t key_len[MT_LOGPARSE_MAX_LOSS_KEYS];
    int nkeys;

    /* a Bridge "Step Time" line not yet matched with its iteration line */
    int step_pending, step_rank;
    double step_s, step_tf;
    uint32_t step_tf_has;
    uint64_t step_line;

    void (*cb)(void *ctx, const mt_iteration *it);
    void *cb_ctx;

    mt_logparse_counts counts;
    int status;
    char name[ARG_NAME_MAX + 1];
    char value[MT_LOGPARSE_ARG_MAX + 1];
};

/* ---- small scanners over [p, e): never read past e, never need a NUL ---- */

static int is_digit(int c)
{
    return (unsigned)(c - '0') < 10u;
}
static int is_alpha(int c)
{
    return (unsigned)((c | 32) - 'a') < 26u;
}
static int is_word(int c)
{
    return is_alpha(c) || is_digit(c) || c == '_';
}
static int is_space(int c)
{
    return c == ' ' || c == '\t';
}

static const char *skip_spaces(const char *p, const char *e)
{
    while (p < e && is_space((unsigned char)*p))
        p++;
    return p;
}

static const char *trim_end(const char *p, const char *e)
{
    while (e > p && is_space((unsigned char)e[-1]))
        e--;
    return e;
}

/* [p, e) starts with the literal. */
static int starts(const char *p, const char *e, const char *lit, size_t n)
{
    return (size_t)(e - p) >= n && !memcmp(p, lit, n);
}
#define STARTS(p, e, lit) starts((p), (e), (lit), sizeof(lit) - 1)

static const char *find(const char *p, const char *e, const char *lit, size_t n)
{
    if (p >= e)
        return NULL;
    return memmem(p, (size_t)(e - p), lit, n);
}
#define FIND(p, e, lit) find((p), (e), (lit), sizeof(lit) - 1)

/* Case-insensitive search for a lowercase needle; only on rare lines. */
static int contains_ci(const char *p, const char *e, const char *lower)
{
    size_t n = strlen(lower), i;
    for (; (size_t)(e - p) >= n; p++) {
        for (i = 0; i < n; i++) {
            int c = (unsigned char)p[i];
            if (c >= 'A' && c <= 'Z')
                c += 32;
            if (c != lower[i])
                break;
        }
        if (i == n)
            return 1;
    }
    return 0;
}

static int parse_i64(const char **pp, const char *e, int64_t *out)
{
    const char *p = *pp;
    int neg = 0;
    uint64_t v = 0;
    if (p < e && (*p == '-' || *p == '+'))
        neg = *p++ == '-';
    if (p >= e || !is_digit((unsigned char)*p))
        return -1;
    for (; p < e && is_digit((unsigned char)*p); p++) {
        if (v > (uint64_t)INT64_MAX / 10)
            return -1;
        v = v * 10 + (uint64_t)(*p - '0');
        if (v > (uint64_t)INT64_MAX)
            return -1;
    }
    *out = neg ? -(int64_t)v : (int64_t)v;
    *pp = p;
    return 0;
}

static const double pow10_exact[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                       1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                       1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* A number as Python prints it ("82251.7", "3.000000E-04", "35772.53125",
 * "nan", "NAN", "inf", "-Infinity").  Exact (one rounding) on the fast path:
 * up to 2^53 for the digits and |exponent| <= 22, which covers every field
 * Megatron formats; strtod on a bounded copy otherwise. */
static int parse_double(const char **pp, const char *e, double *out)
{
    const char *p = *pp, *start = p;
    int neg = 0, any = 0, exp10 = 0;
    uint64_t m = 0;
    if (p < e && (*p == '-' || *p == '+'))
        neg = *p++ == '-';
    if (p < e && ((*p | 32) == 'n' || (*p | 32) == 'i')) {
        if (e - p >= 3 && (p[0] | 32) == 'n' && (p[1] | 32) == 'a' && (p[2] | 32) == 'n') {
            *out = neg ? -NAN : NAN;
            *pp = p + 3;
            return 0;
        }
        if (e - p >= 3 && (p[0] | 32) == 'i' && (p[1] | 32) == 'n' && (p[2] | 32) == 'f') {
            p += 3;
            if (e - p >= 5 && !strncmp(p, "inity", 5))
                p += 5;
            *out = neg ? -INFINITY : INFINITY;
            *pp = p;
            return 0;
        }
        return -1;
    }
    for (; p < e && is_digit((unsigned char)*p); p++, any = 1) {
        if (m < 100000000000000000ULL)
            m = m * 10 + (uint64_t)(*p - '0');
        else
            exp10++;
    }
    if (p < e && *p == '.') {
        p++;
        for (; p < e && is_digit((unsigned char)*p); p++, any = 1)
            if (m < 100000000000000000ULL) {
                m = m * 10 + (uint64_t)(*p - '0');
                exp10--;
            }
    }
    if (!any)
        return -1;
    if (p < e && (*p == 'e' || *p == 'E')) {
        const char *q = p + 1;
        int eneg = 0, ev = 0, eany = 0;
        if (q < e && (*q == '+' || *q == '-'))
            eneg = *q++ == '-';
        for (; q < e && is_digit((unsigned char)*q); q++, eany = 1)
            if (ev < 100000)
                ev = ev * 10 + (*q - '0');
        if (eany) {
            exp10 += eneg ? -ev : ev;
            p = q;
        }
    }
    if (m == 0) {
        *out = neg ? -0.0 : 0.0;
    } else if (m <= (1ULL << 53) && exp10 >= -22 && exp10 <= 22) {
        double d = (double)m;
        *out = exp10 < 0 ? d / pow10_exact[-exp10] : d * pow10_exact[exp10];
        if (neg)
            *out = -*out;
    } else {
        char tmp[64];
        size_t n = (size_t)(p - start);
        if (n < sizeof tmp) {
            memcpy(tmp, start, n);
            tmp[n] = '\0';
            *out = strtod(tmp, NULL);
        } else {
            *out = (neg ? -1.0 : 1.0) * (double)m * pow(10.0, exp10);
        }
    }
    *pp = p;
    return 0;
}

/* Bytes to an integer count, clamped (garbage may say 1e300 MB). */
static int64_t to_bytes(double v, double unit)
{
    double b = v * unit;
    if (!(b >= 0))
        return -1;
    if (b > 9.0e18)
        return INT64_MAX;
    return (int64_t)llround(b);
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    int64_t era;
    unsigned yoe, doy, doe;
    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = (unsigned)(y - era * 400);
    doy = (153 * (m + (m > 2 ? (unsigned)-3 : 9)) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static int digits(const char *p, int n, int *v)
{
    int i, x = 0;
    for (i = 0; i < n; i++) {
        if (!is_digit((unsigned char)p[i]))
            return -1;
        x = x * 10 + (p[i] - '0');
    }
    *v = x;
    return 0;
}

/* "[YYYY-MM-DD HH:MM:SS]" or "[YYYY-MM-DD HH:MM:SS.ffffff]" at p. */
static int parse_timestamp(const char *p, const char *e, double *secs, const char **after)
{
    int y, mo, d, h, mi, s;
    double frac = 0, scale = 0.1;
    const char *q;
    if (e - p < 21 || p[0] != '[' || p[5] != '-' || p[8] != '-' || p[11] != ' ' || p[14] != ':' ||
        p[17] != ':')
        return -1;
    if (digits(p + 1, 4, &y) || digits(p + 6, 2, &mo) || digits(p + 9, 2, &d) ||
        digits(p + 12, 2, &h) || digits(p + 15, 2, &mi) || digits(p + 18, 2, &s))
        return -1;
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60)
        return -1;
    q = p + 20;
    if (q < e && *q == '.')
        for (q++; q < e && is_digit((unsigned char)*q); q++, scale /= 10)
            frac += (*q - '0') * scale;
    if (q >= e || *q != ']')
        return -1;
    *secs =
        (double)(days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400 + h * 3600 + mi * 60 + s) +
        frac;
    *after = q + 1;
    return 0;
}

/* The line as stored in an event: cut, control bytes as '?', NUL-terminated. */
static void copy_text(char *dst, size_t cap, const char *p, const char *e)
{
    size_t n = (size_t)(e - p), i;
    if (n > cap - 1)
        n = cap - 1;
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        dst[i] = (c < 0x20 && c != '\t') || c == 0x7f ? '?' : (char)c;
    }
    dst[n] = '\0';
}

/* ---- parser state ------------------------------------------------------------- */

mt_logparse *mt_logparse_new(void)
{
    mt_logparse *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->args = mt_kv_new();
    if (!p->args) {
        free(p);
        return NULL;
    }
    p->maxit = (size_t)1 << 20;
    p->last_iteration = -1;
    p->capture_pri = -1;
    return p;
}

void mt_logparse_destroy(mt_logparse **pp)
{
    mt_logparse *p;
    size_t i;
    if (!pp || !*pp)
        return;
    p = *pp;
    for (i = 0; i < p->nsrc; i++) {
        free(p->src[i]->buf);
        free(p->src[i]->pend);
        free(p->src[i]);
    }
    free(p->src);
    free(p->rec);
    free(p->loss);
    free(p->extra);
    free(p->mem);
    free(p->ev);
    mt_kv_destroy(&p->args);
    free(p);
    *pp = NULL;
}

void mt_logparse_set_max_iterations(mt_logparse *p, size_t n)
{
    p->maxit = n;
}

void mt_logparse_on_iteration(mt_logparse *p, void (*cb)(void *ctx, const mt_iteration *it),
                              void *ctx)
{
    p->cb = cb;
    p->cb_ctx = ctx;
}

int mt_logparse_status(const mt_logparse *p)
{
    return p->status;
}

/* Grows *v (element size sz) to hold need elements; 0 or -ENOMEM. */
static int grow(mt_logparse *p, void **v, size_t *cap, size_t need, size_t sz)
{
    size_t nc;
    void *nv;
    if (need <= *cap)
        return 0;
    nc = *cap ? *cap : 16;
    while (nc < need)
        nc *= 2;
    nv = realloc(*v, nc * sz);
    if (!nv) {
        p->status = -ENOMEM;
        return -ENOMEM;
    }
    *v = nv;
    *cap = nc;
    return 0;
}

/* ---- results: iterations -------------------------------------------------------- */

static const char *intern_key(mt_logparse *p, const char *k, size_t n)
{
    int i;
    if (n > LOSS_KEY_MAX)
        n = LOSS_KEY_MAX;
    for (i = 0; i < p->nkeys; i++)
        if (p->key_len[i] == n && !memcmp(p->keys[i], k, n))
            return p->keys[i];
    if (p->nkeys == MT_LOGPARSE_MAX_LOSS_KEYS)
        return NULL;
    /* raw bytes with control bytes shown as '?' (a sanitised key never
     * matches raw bytes again, so garbage keys cannot merge with real ones) */
    copy_text(p->keys[p->nkeys], LOSS_KEY_MAX + 1, k, k + n);
    p->key_len[p->nkeys] = n;
    return p->keys[p->nkeys++];
}

static int32_t clamp32(int64_t v)
{
    return v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : (int32_t)v;
}

/* Appends it to the store; 0, or -ENOMEM. */
static int store_iteration(mt_logparse *p, const mt_iteration *it)
{
    lp_rec *r;
    int j;
    if (grow(p, (void **)&p->rec, &p->caprec, p->nrec + 1, sizeof *p->rec) ||
        (it->n_losses && (p->nloss > UINT32_MAX - MT_LOGPARSE_MAX_LOSSES ||
                          grow(p, (void **)&p->loss, &p->caploss, p->nloss + (size_t)it->n_losses,
                               sizeof *p->loss))) ||
        (it->has & LP_RARE && (p->nextra >= UINT32_MAX || grow(p, (void **)&p->extra, &p->capextra,
                                                               p->nextra + 1, sizeof *p->extra))))
        return -ENOMEM;
    r = &p->rec[p->nrec++];
    r->iteration = it->iteration;
    r->total = it->total;
    r->consumed_samples = it->consumed_samples;
    r->timestamp = it->timestamp;
    r->elapsed_ms = it->elapsed_ms;
    r->tflops = it->tflops;
    r->lr = it->lr;
    r->loss_scale = it->loss_scale;
    r->grad_norm = it->grad_norm;
    r->step_time_s = it->step_time_s;
    r->step_tflops = it->step_tflops;
    r->line = it->line;
    r->has = it->has;
    r->rank = it->rank;
    r->global_batch = clamp32(it->global_batch);
    r->skipped = clamp32(it->skipped);
    r->nan_count = clamp32(it->nan_count);
    r->extra = LP_NONE;
    if (it->has & LP_RARE) {
        lp_extra *x = &p->extra[p->nextra];
        x->skipped_samples = it->skipped_samples;
        x->energy = it->energy;
        x->power = it->power;
        x->num_zeros = it->num_zeros;
        x->params_norm = it->params_norm;
        x->max_attention_logit = it->max_attention_logit;
        r->extra = (uint32_t)p->nextra++;
    }
    r->loss_first = (uint32_t)p->nloss;
    r->n_losses = (uint8_t)it->n_losses;
    for (j = 0; j < it->n_losses; j++) {
        p->loss[p->nloss].value = it->loss[j];
        p->loss[p->nloss++].key = it->loss_key[j];
    }
    return 0;
}

static void init_iteration(mt_iteration *it);

static void load_iteration(const mt_logparse *p, const lp_rec *r, mt_iteration *it)
{
    int j;
    init_iteration(it);
    it->iteration = r->iteration;
    it->total = r->total;
    it->consumed_samples = r->consumed_samples;
    it->timestamp = r->timestamp;
    it->elapsed_ms = r->elapsed_ms;
    it->tflops = r->tflops;
    it->lr = r->lr;
    it->loss_scale = r->loss_scale;
    it->grad_norm = r->grad_norm;
    it->step_time_s = r->step_time_s;
    it->step_tflops = r->step_tflops;
    it->line = r->line;
    it->has = r->has;
    it->rank = r->rank;
    it->global_batch = r->global_batch;
    it->skipped = r->skipped;
    it->nan_count = r->nan_count;
    if (r->extra != LP_NONE) {
        const lp_extra *x = &p->extra[r->extra];
        it->skipped_samples = x->skipped_samples;
        it->energy = x->energy;
        it->power = x->power;
        it->num_zeros = x->num_zeros;
        it->params_norm = x->params_norm;
        it->max_attention_logit = x->max_attention_logit;
    }
    it->n_losses = r->n_losses;
    for (j = 0; j < r->n_losses; j++) {
        it->loss_key[j] = p->loss[r->loss_first + (uint32_t)j].key;
        it->loss[j] = p->loss[r->loss_first + (uint32_t)j].value;
    }
}

static void emit_iteration(mt_logparse *p, const mt_iteration *it)
{
    /* the latest line, not the highest: a restarted run goes back, and its
     * Step Time lines and events belong to where it is now */
    p->last_iteration = it->iteration;
    if (p->nrec >= p->maxit)
        p->counts.iterations_dropped++;
    else
        (void)store_iteration(p, it); /* on OOM the status says so */
    if (p->cb)
        p->cb(p->cb_ctx, it);
}

/* Bridge prints "Step Time : %.2fs" and the iteration line's elapsed ms from
 * the same number: they agree to the rounding of the seconds. */
static int step_matches(uint32_t has, double elapsed_ms, double step_s)
{
    if (!(has & MT_IT_ELAPSED))
        return 1;
    return fabs(elapsed_ms - step_s * 1000.0) <= 5.1 + 1e-6 * fabs(elapsed_ms);
}

static void init_iteration(mt_iteration *it)
{
    memset(it, 0, sizeof *it);
    it->rank = -1;
    it->timestamp = it->elapsed_ms = it->tflops = it->energy = it->power = NAN;
    it->lr = it->loss_scale = it->grad_norm = it->num_zeros = it->params_norm = NAN;
    it->max_attention_logit = it->step_time_s = it->step_tflops = NAN;
}

/* Iterations between two log lines: the log interval of the arguments dump
 * (or Bridge's logger.log_interval), else the spacing of the last two
 * iteration lines, else 1 (moetune always renders --log-interval 1). */
static int64_t log_interval(const mt_logparse *p)
{
    const char *v = mt_kv_get(p->args, "log_interval");
    if (v) {
        int64_t n;
        const char *q = v, *e = v + strlen(v);
        if (parse_i64(&q, e, &n) == 0 && q == e && n >= 1)
            return n;
    }
    {
        const lp_rec *b = NULL;
        size_t i, k = 0;
        for (i = p->nrec; i-- > 0 && k < 64; k++) {
            const lp_rec *r = &p->rec[i];
            if (r->has & MT_IT_STEP_LINE_ONLY)
                continue;
            if (!b)
                b = r;
            else if (b->iteration > r->iteration && r->iteration >= 0)
                return b->iteration - r->iteration;
            else
                break;
        }
    }
    return 1;
}

/* A Step Time line with no iteration line of its own: Bridge prints it at
 * every log interval, so it stands for the iteration one interval on. */
static void emit_step_only(mt_logparse *p)
{
    mt_iteration it;
    int64_t n = log_interval(p);
    init_iteration(&it);
    it.iteration = p->last_iteration < 0               ? n
                   : p->last_iteration > INT64_MAX - n ? p->last_iteration
                                                       : p->last_iteration + n;
    if (p->nrec && p->rec[p->nrec - 1].has & MT_IT_TOTAL) {
        it.total = p->rec[p->nrec - 1].total;
        it.has |= MT_IT_TOTAL;
    }
    it.step_time_s = p->step_s;
    it.elapsed_ms = p->step_s * 1000.0;
    it.has |= MT_IT_STEP_TIME | MT_IT_STEP_LINE_ONLY | MT_IT_ELAPSED | p->step_tf_has;
    if (p->step_tf_has) {
        it.step_tflops = it.tflops = p->step_tf;
        it.has |= MT_IT_TFLOPS;
    }
    it.rank = p->step_rank;
    it.line = p->step_line;
    p->step_pending = 0;
    emit_iteration(p, &it);
}

static void attach_step(mt_iteration *it, double s, double tf, uint32_t tf_has)
{
    it->step_time_s = s;
    it->has |= MT_IT_STEP_TIME;
    if (tf_has) {
        it->step_tflops = tf;
        if (!(it->has & MT_IT_TFLOPS)) {
            it->tflops = tf;
            it->has |= MT_IT_TFLOPS;
        }
    }
}

/* An interval whose iterations were all skipped prints every loss as its
 * empty average, 0.000000E+00: no loss was measured, so none is kept. */
static void drop_skipped_losses(mt_iteration *it)
{
    int i, o = 0;
    if (!(it->has & MT_IT_SKIPPED) || it->skipped <= 0)
        return;
    for (i = 0; i < it->n_losses; i++)
        if (it->loss[i] != 0.0) {
            it->loss_key[o] = it->loss_key[i];
            it->loss[o++] = it->loss[i];
        }
    it->n_losses = o;
}

static void commit_iteration(mt_logparse *p, mt_iteration *it)
{
    drop_skipped_losses(it);
    if (p->step_pending) {
        if (step_matches(it->has, it->elapsed_ms, p->step_s)) {
            attach_step(it, p->step_s, p->step_tf, p->step_tf_has);
            p->step_pending = 0;
        } else {
            emit_step_only(p);
        }
    }
    emit_iteration(p, it);
}

/* ---- results: memory, events ------------------------------------------------------ */

static mt_rank_memory *rank_record(mt_logparse *p, int rank)
{
    size_t lo = 0, hi = p->nmem;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->mem[mid].rank == rank)
            return &p->mem[mid];
        if (p->mem[mid].rank < rank)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (p->nmem >= MT_LOGPARSE_MAX_RANKS) {
        p->counts.ranks_dropped++;
        return NULL;
    }
    if (grow(p, (void **)&p->mem, &p->capmem, p->nmem + 1, sizeof *p->mem))
        return NULL;
    memmove(p->mem + lo + 1, p->mem + lo, (p->nmem - lo) * sizeof *p->mem);
    p->nmem++;
    memset(&p->mem[lo], 0, sizeof p->mem[lo]);
    p->mem[lo].rank = rank;
    p->mem[lo].after_iteration = -1;
    p->mem[lo].allocated = p->mem[lo].max_allocated = -1;
    p->mem[lo].reserved = p->mem[lo].max_reserved = -1;
    p->mem[lo].active = p->mem[lo].max_active = -1;
    p->mem[lo].inactive = p->mem[lo].max_inactive = -1;
    p->mem[lo].alloc_retries = p->mem[lo].alloc_count = -1;
    return &p->mem[lo];
}

/* "[Rank N]", "[rankN]", "Rank N," in an event's text: the rank it names. */
static int rank_in_text(const char *p, const char *e)
{
    const char *q;
    for (q = p; q + 5 < e; q++) {
        const char *d;
        int64_t v;
        if ((q[0] != 'R' && q[0] != 'r') || memcmp(q + 1, "ank", 3) ||
            (q > p && is_word((unsigned char)q[-1])))
            continue;
        d = q + 4;
        if (d < e && *d == ' ')
            d++;
        if (parse_i64(&d, e, &v) || v < 0 || v > INT32_MAX)
            continue;
        if (d < e && (*d == ']' || *d == ',' || *d == ':'))
            return (int)v;
    }
    return -1;
}

static void add_event(mt_logparse *p, mt_logevent_kind kind, uint32_t flags, int rank,
                      const char *t, const char *e, double value, int64_t iteration, uint64_t line,
                      int capture_pri)
{
    mt_logevent ev;
    ev.kind = kind;
    ev.flags = flags;
    ev.rank = rank >= 0 ? rank : rank_in_text(t, e);
    ev.iteration = iteration;
    ev.value = value;
    ev.line = line;
    copy_text(ev.text, sizeof ev.text, t, e);
    if (!p->kind_count[kind]++)
        p->first[kind] = ev;
    if (kind == MT_LOGEV_IMPORT_ERROR && flags & MT_LOGEV_F_DISPATCHER &&
        !p->have_import_dispatch) {
        p->first_import_dispatch = ev;
        p->have_import_dispatch = 1;
    }
    if (kind == MT_LOGEV_FALLBACK && flags & MT_LOGEV_F_DISPATCHER && !p->have_fallback_dispatch) {
        p->first_fallback_dispatch = ev;
        p->have_fallback_dispatch = 1;
    }
    if (kind == MT_LOGEV_CAPTURE && capture_pri > p->capture_pri) {
        p->capture_best = ev;
        p->capture_pri = capture_pri;
    }
    if (p->nev >= MT_LOGPARSE_MAX_EVENTS)
        p->counts.events_dropped++;
    else if (grow(p, (void **)&p->ev, &p->capev, p->nev + 1, sizeof *p->ev) == 0)
        p->ev[p->nev++] = ev;
}

/* ---- iteration lines ----------------------------------------------------------- */

static int key_is(const char *k, size_t n, const char *lit)
{
    return strlen(lit) == n && !memcmp(k, lit, n);
}

static int key_starts(const char *k, size_t n, const char *lit)
{
    size_t m = strlen(lit);
    return n >= m && !memcmp(k, lit, m);
}

/* The fields of an iteration line moetune reads, by key: exact, or a
 * prefix where the key carries its unit ("elapsed time per iteration (ms)").
 * "number of nan iterations" closes the line; "decoupled learning rate" is
 * known and not kept (without it, it would not be a loss either). */
enum { IT_INT, IT_DOUBLE, IT_IGNORED };
typedef struct it_key {
    const char *key;
    int prefix;
    int type;
    size_t offset;
    uint32_t bit;
    int closes;
} it_key;
#define IT_(key, prefix, type, field, bit, closes)                                                \
    {key, prefix, type, offsetof(mt_iteration, field), bit, closes}
static const it_key it_keys[] = {
    IT_("consumed samples", 0, IT_INT, consumed_samples, MT_IT_CONSUMED, 0),
    IT_("skipped samples", 0, IT_INT, skipped_samples, MT_IT_SKIPPED_SAMPLES, 0),
    IT_("elapsed time per iteration", 1, IT_DOUBLE, elapsed_ms, MT_IT_ELAPSED, 0),
    IT_("energy per GPU", 1, IT_DOUBLE, energy, MT_IT_ENERGY, 0),
    IT_("throughput per GPU", 1, IT_DOUBLE, tflops, MT_IT_TFLOPS, 0),
    IT_("power per GPU", 1, IT_DOUBLE, power, MT_IT_POWER, 0),
    IT_("params norm", 0, IT_DOUBLE, params_norm, MT_IT_PARAMS_NORM, 0),
    IT_("learning rate", 0, IT_DOUBLE, lr, MT_IT_LR, 0),
    IT_("loss scale", 0, IT_DOUBLE, loss_scale, MT_IT_LOSS_SCALE, 0),
    IT_("global batch size", 0, IT_INT, global_batch, MT_IT_GBS, 0),
    IT_("grad norm", 0, IT_DOUBLE, grad_norm, MT_IT_GRAD_NORM, 0),
    /* an int now, "0.0" on older stacks */
    IT_("num zeros", 0, IT_DOUBLE, num_zeros, MT_IT_NUM_ZEROS, 0),
    IT_("number of skipped iterations", 0, IT_INT, skipped, MT_IT_SKIPPED, 0),
    IT_("number of nan iterations", 0, IT_INT, nan_count, MT_IT_NAN, 1),
    IT_("max attention logit", 0, IT_DOUBLE, max_attention_logit, MT_IT_MAX_LOGIT, 0),
    IT_("decoupled learning rate", 0, IT_IGNORED, lr, 0, 0),
};
#undef IT_

/* One "key: value" field of an iteration line; 1 when it was the closing
 * "number of nan iterations" field. */
static int iteration_field(mt_logparse *p, mt_iteration *it, const char *f, const char *fe)
{
    const char *colon = NULL, *q, *k, *ke, *v;
    size_t kn, ki;
    double d;
    f = skip_spaces(f, fe);
    fe = trim_end(f, fe);
    for (q = fe; q > f; q--)
        if (q[-1] == ':') {
            colon = q - 1;
            break;
        }
    if (!colon)
        return 0;
    k = f;
    ke = trim_end(k, colon);
    kn = (size_t)(ke - k);
    v = skip_spaces(colon + 1, fe);
    if (!kn || v >= fe)
        return 0;
    for (ki = 0; ki < sizeof it_keys / sizeof it_keys[0]; ki++) {
        const it_key *x = &it_keys[ki];
        if (x->key[0] != k[0] || !(x->prefix ? key_starts(k, kn, x->key) : key_is(k, kn, x->key)))
            continue;
        if (x->type == IT_INT) {
            int64_t n;
            if (parse_i64(&v, fe, &n) == 0 && v == fe) {
                *(int64_t *)((char *)it + x->offset) = n;
                it->has |= x->bit;
            }
        } else if (x->type == IT_DOUBLE) {
            if (parse_double(&v, fe, &d) == 0 && v == fe) {
                *(double *)((char *)it + x->offset) = d;
                it->has |= x->bit;
            }
        }
        return x->closes;
    }
    /* every other key with "loss" in it is a loss Megatron averaged over the
     * interval (lm loss, load_balancing_loss, z_loss, mtp_1 loss, ...) */
    if (kn >= 4 && memmem(k, kn, "loss", 4) && parse_double(&v, fe, &d) == 0 && v == fe) {
        const char *key;
        int j;
        for (j = 0; j < it->n_losses; j++)
            if (strlen(it->loss_key[j]) == (kn > LOSS_KEY_MAX ? LOSS_KEY_MAX : kn) &&
                !memcmp(it->loss_key[j], k, kn > LOSS_KEY_MAX ? LOSS_KEY_MAX : kn))
                break;
        if (j < it->n_losses) {
            it->loss[j] = d; /* repeated key: the later value */
            return 0;
        }
        if (it->n_losses == MT_LOGPARSE_MAX_LOSSES || !(key = intern_key(p, k, kn))) {
            p->counts.losses_dropped++;
            return 0;
        }
        it->loss_key[it->n_losses] = key;
        it->loss[it->n_losses++] = d;
    }
    return 0;
}

/*
 * Reads "key: value |" fields of an iteration line from q on.  Only a field
 * closed by its '|' is read; *resume gets where the first unclosed one
 * begins (a hard-wrapped line continues there).  *complete is set when the
 * closing nan field was read; *tail then points past it and the fields RL
 * runs add after it (text glued on), or is e.
 */
static void scan_fields(mt_logparse *p, mt_iteration *it, const char *q, const char *e,
                        int *complete, const char **tail, const char **resume)
{
    *complete = 0;
    *tail = e;
    while (q < e) {
        const char *bar = memchr(q, '|', (size_t)(e - q));
        if (!bar)
            break;
        if (iteration_field(p, it, q, bar)) {
            *complete = 1;
            it->has |= MT_IT_COMPLETE;
            /* RL runs add " key: number |" fields after it; anything else
             * there is another print glued on */
            for (q = bar + 1; q < e && *q == ' ' && (bar = memchr(q, '|', (size_t)(e - q))) != NULL;
                 q = bar + 1) {
                const char *c = bar, *v;
                double d;
                while (c > q && c[-1] != ':')
                    c--;
                v = skip_spaces(c, bar);
                if (c == q || parse_double(&v, bar, &d) || skip_spaces(v, bar) != bar)
                    break;
                iteration_field(p, it, q, bar);
            }
            *tail = q;
            break;
        }
        q = bar + 1;
    }
    *resume = q;
}

/*
 * Parses [t, e) as an iteration line (optional timestamp, "iteration i/n |",
 * fields).  -1 when it is not one.  Otherwise as scan_fields, except that
 * *resume is NULL while the "iteration i/n |" head itself is unclosed.
 */
static int scan_iteration(mt_logparse *p, const char *t, const char *e, mt_iteration *it,
                          int *complete, const char **tail, const char **resume)
{
    const char *q;
    double ts = 0;
    int has_ts = 0;
    init_iteration(it);
    *complete = 0;
    *tail = e;
    *resume = NULL;
    t = skip_spaces(t, e);
    if (t < e && *t == '[') {
        if (parse_timestamp(t, e, &ts, &q))
            return -1;
        has_ts = 1;
        t = skip_spaces(q, e);
    }
    if (!STARTS(t, e, "iteration"))
        return -1;
    q = skip_spaces(t + 9, e);
    if (q == t + 9 || parse_i64(&q, e, &it->iteration))
        return -1;
    if (has_ts) {
        it->timestamp = ts;
        it->has |= MT_IT_TIMESTAMP;
    }
    q = skip_spaces(q, e);
    if (q < e && *q == '/') {
        q = skip_spaces(q + 1, e);
        if (parse_i64(&q, e, &it->total) == 0)
            it->has |= MT_IT_TOTAL;
        q = skip_spaces(q, e);
    }
    if (q >= e || *q != '|')
        return 0;
    scan_fields(p, it, q + 1, e, complete, tail, resume);
    return 0;
}

/* ---- the other line forms ---------------------------------------------------------- */

/* The keys of a memory line: Megatron-LM's MB line, Bridge's GB line (its
 * MEMORY_KEYS with "bytes" renamed "gigabytes"; "retires" is Bridge's
 * spelling).  peak: the field keeps the maximum over lines; count: a number,
 * not an amount of memory. */
static const struct {
    const char *key;
    size_t off;
    int gb, peak, count;
} mem_keys[] = {
    {"allocated", offsetof(mt_rank_memory, allocated), 0, 0, 0},
    {"max allocated", offsetof(mt_rank_memory, max_allocated), 0, 1, 0},
    {"reserved", offsetof(mt_rank_memory, reserved), 0, 0, 0},
    {"max reserved", offsetof(mt_rank_memory, max_reserved), 0, 1, 0},
    {"mem-allocated-gigabytes", offsetof(mt_rank_memory, allocated), 1, 0, 0},
    {"mem-active-gigabytes", offsetof(mt_rank_memory, active), 1, 0, 0},
    {"mem-inactive-gigabytes", offsetof(mt_rank_memory, inactive), 1, 0, 0},
    {"mem-reserved-gigabytes", offsetof(mt_rank_memory, reserved), 1, 0, 0},
    {"mem-max-allocated-gigabytes", offsetof(mt_rank_memory, max_allocated), 1, 1, 0},
    {"mem-max-active-gigabytes", offsetof(mt_rank_memory, max_active), 1, 1, 0},
    {"mem-max-inactive-gigabytes", offsetof(mt_rank_memory, max_inactive), 1, 1, 0},
    {"mem-max-reserved-gigabytes", offsetof(mt_rank_memory, max_reserved), 1, 1, 0},
    {"mem-alloc-retires", offsetof(mt_rank_memory, alloc_retries), 1, 0, 1},
    {"mem-alloc-retries", offsetof(mt_rank_memory, alloc_retries), 1, 0, 1},
    {"mem-allocated-count", offsetof(mt_rank_memory, alloc_count), 1, 0, 1},
};

/* The line names the global rank itself, whoever's stream it came on.
 * Every "key: number" field counts, the last one too (a memory line has no
 * closing '|'); a hard-wrapped one arrives here reassembled. */
static void memory_line(mt_logparse *p, const char *t, const char *e)
{
    const char *q = t + 6, *f;
    int64_t r, after = -1;
    double unit;
    int gb;
    mt_rank_memory *m;
    if (parse_i64(&q, e, &r) || r < 0 || r > INT32_MAX || q >= e || *q != ']') {
        p->counts.garbage_lines++;
        return;
    }
    q = skip_spaces(q + 1, e);
    if (STARTS(q, e, "(after ")) {
        const char *a = q + 7;
        if (parse_i64(&a, e, &after) == 0)
            q = a;
    }
    f = FIND(q, e, "memory (");
    if (!f || e - f < 11 || f[9] != 'B' || f[10] != ')' || (f[8] != 'M' && f[8] != 'G')) {
        p->counts.garbage_lines++;
        return;
    }
    gb = f[8] == 'G';
    unit = gb ? 1e9 : 1024.0 * 1024.0;
    if (!(m = rank_record(p, (int)r)))
        return;
    m->gigabytes = gb;
    if (after >= 0)
        m->after_iteration = after;
    q = f + 11;
    while (q < e) {
        const char *bar = memchr(q, '|', (size_t)(e - q)), *fe = bar ? bar : e, *colon, *k, *ke, *v;
        double d;
        size_t kn, j;
        colon = memchr(q, ':', (size_t)(fe - q));
        if (colon) {
            k = skip_spaces(q, colon);
            ke = trim_end(k, colon);
            kn = (size_t)(ke - k);
            v = skip_spaces(colon + 1, fe);
            if (parse_double(&v, fe, &d) == 0 && skip_spaces(v, fe) == fe)
                for (j = 0; j < sizeof mem_keys / sizeof mem_keys[0]; j++) {
                    int64_t b, *dst;
                    if (mem_keys[j].gb != gb || !key_is(k, kn, mem_keys[j].key))
                        continue;
                    dst = (int64_t *)((char *)m + mem_keys[j].off);
                    b = mem_keys[j].count ? to_bytes(d, 1.0) : to_bytes(d, unit);
                    if (!mem_keys[j].peak || b > *dst)
                        *dst = b;
                    break;
                }
        }
        if (!bar)
            break;
        q = bar + 1;
    }
}

/* "  name ....... value" inside the arguments dump; -1 when not one. */
static int args_line(mt_logparse *p, const char *t, const char *e)
{
    const char *q = t, *v, *ve;
    size_t nn, dots = 0, vn;
    while (q < e && is_word((unsigned char)*q))
        q++;
    nn = (size_t)(q - t);
    if (!nn || nn > ARG_NAME_MAX || q >= e || *q != ' ')
        return -1;
    for (q++; q < e && *q == '.'; q++)
        dots++;
    /* Megatron pads with 48 - len(name) dots, none for long names */
    if ((!dots && nn < 48) || q >= e || *q != ' ')
        return -1;
    v = q + 1;
    ve = trim_end(v, e);
    memcpy(p->name, t, nn);
    p->name[nn] = '\0';
    vn = (size_t)(ve - v);
    if (vn > MT_LOGPARSE_ARG_MAX)
        vn = MT_LOGPARSE_ARG_MAX;
    copy_text(p->value, sizeof p->value, v, v + vn);
    if (mt_kv_count(p->args) >= MT_LOGPARSE_MAX_ARGS && !mt_kv_get(p->args, p->name)) {
        p->counts.args_dropped++;
        return 0;
    }
    if (mt_kv_set(p->args, p->name, p->value))
        p->status = -ENOMEM;
    return 0;
}

/* ---- Megatron-Bridge's configuration block ----------------------------------------- */

/*
 * Bridge prints no arguments dump.  Since 0.4 its setup logs the fields that
 * differ from Megatron Core's defaults ("[model] Non-default values (vs
 * Mcore TransformerConfig):" then "  field: repr  (Mcore default: repr)",
 * for optimizer, ddp and model) and every set field of the other configs
 * ("[train]:" then "  field: repr"); up to 0.3 it printed the whole
 * ConfigContainer as YAML between "------- Task Configuration -------" and
 * a line of dashes.  Either way a field <section>.<name> becomes the
 * argument of the Megatron dest that means the same: Bridge's config fields
 * are Megatron Core's dataclass fields, which Megatron-LM's argparse dests
 * mostly share (model.tensor_model_parallel_size, ddp.overlap_grad_reduce,
 * model.overlap_moe_expert_parallel_comm, logger.log_interval, ...), so a
 * field is its own dest except for the renames below; mixed_precision (a
 * recipe name, or its fields in the YAML) gives bf16, fp8, fp8_recipe, ...
 * and "mixed_precision" for the recipe name.  Sections not listed and
 * nested configs are left out.
 */
static const char *const bridge_sections[] = {
    "model",     "ddp",          "optimizer",       "train",     "validation", "scheduler",
    "logger",    "checkpoint",   "dataset",         "tokenizer", "rng",        "dist",
    "profiling", "comm_overlap", "mixed_precision", NULL};

static const struct {
    const char *section, *field, *dest;
} bridge_renames[] = {
    {"model", "num_moe_experts", "num_experts"},
    {"model", "layernorm_epsilon", "norm_epsilon"},
    {"model", "fp8_param", "fp8_param_gather"},
    {"mixed_precision", "fp8_param", "fp8_param_gather"},
    {"ddp", "bucket_size", "ddp_bucket_size"},
    {"ddp", "average_in_collective", "ddp_average_in_collective"},
    {"ddp", "grad_reduce_in_fp32", "accumulate_allreduce_grads_in_fp32"},
    {"ddp", "check_for_nan_in_grad", "check_for_nan_in_loss_and_grad"},
};

static void set_arg(mt_logparse *p, const char *name, const char *v, const char *ve)
{
    size_t vn = (size_t)(ve - v);
    if (vn > MT_LOGPARSE_ARG_MAX)
        vn = MT_LOGPARSE_ARG_MAX;
    copy_text(p->value, sizeof p->value, v, v + vn);
    if (mt_kv_count(p->args) >= MT_LOGPARSE_MAX_ARGS && !mt_kv_get(p->args, name)) {
        p->counts.args_dropped++;
        return;
    }
    if (mt_kv_set(p->args, name, p->value))
        p->status = -ENOMEM;
}

/* Bridge field sec.field = [v, ve) (a Python repr or a YAML scalar, quotes
 * already off) as the argument its Megatron dest names. */
static void bridge_set(mt_logparse *p, const char *sec, const char *f, size_t fn, const char *v,
                       const char *ve)
{
    const char *dest = NULL;
    size_t i;
    for (i = 0; bridge_sections[i] && strcmp(bridge_sections[i], sec); i++)
        ;
    if (!bridge_sections[i] || !fn || fn > ARG_NAME_MAX || *f == '_')
        return;
    for (i = 0; i < sizeof bridge_renames / sizeof bridge_renames[0]; i++)
        if (!strcmp(bridge_renames[i].section, sec) && key_is(f, fn, bridge_renames[i].field))
            dest = bridge_renames[i].dest;
    if (dest) {
        set_arg(p, dest, v, ve);
    } else {
        char name[ARG_NAME_MAX + 1];
        memcpy(name, f, fn);
        name[fn] = '\0';
        set_arg(p, name, v, ve);
    }
}

/* A quoted scalar without its quotes ('flex' as Python's str prints it). */
static void unquote(const char **v, const char **ve)
{
    if (*ve - *v >= 2 && (**v == '\'' || **v == '"') && (*ve)[-1] == **v) {
        (*v)++;
        (*ve)--;
    }
}

/* A YAML scalar as Python's str() prints the value. */
static void yaml_scalar(const char **v, const char **ve)
{
    size_t n = (size_t)(*ve - *v);
    if ((n == 4 && !memcmp(*v, "true", 4)) || (n == 4 && !memcmp(*v, "True", 4)))
        *v = "True", *ve = *v + 4;
    else if ((n == 5 && !memcmp(*v, "false", 5)) || (n == 5 && !memcmp(*v, "False", 5)))
        *v = "False", *ve = *v + 5;
    else if ((n == 4 && !memcmp(*v, "null", 4)) || (n == 1 && **v == '~'))
        *v = "None", *ve = *v + 4;
    else
        unquote(v, ve);
}

static void cfg_end(mt_logparse *p)
{
    p->cfg_src = NULL;
    p->cfg_mode = CFG_NONE;
}

static void cfg_start(mt_logparse *p, lp_source *s, int rank, int mode)
{
    p->cfg_src = s;
    p->cfg_rank = rank;
    p->cfg_mode = mode;
    p->cfg_seen = 0;
    p->cfg_sec[0] = '\0';
    p->y_depth = 0;
    p->yl_active = 0;
}

/* "[model] Non-default values (vs Mcore ...):" or "[train]:": the section. */
static int cfg_section(mt_logparse *p, const char *t, const char *e)
{
    const char *q = t + 1, *n = q;
    while (q < e && is_word((unsigned char)*q))
        q++;
    if (q == n || q >= e || *q != ']' || (size_t)(q - n) >= sizeof p->cfg_sec)
        return 0;
    if (!STARTS(q + 1, e, ":") && !STARTS(q + 1, e, " Non-default values"))
        return 0;
    memcpy(p->cfg_sec, n, (size_t)(q - n));
    p->cfg_sec[q - n] = '\0';
    p->cfg_seen = 1;
    return 1;
}

static int all_of(const char *t, const char *e, char c, int min)
{
    const char *q = t;
    while (q < e && *q == c)
        q++;
    return q - t >= min && trim_end(q, e) == q;
}

/* One line of the Non-default summary; 0 when it is not one (the block
 * ended before it). */
static int cfg_non_default(mt_logparse *p, int ind, const char *t, const char *e)
{
    const char *q, *v, *ve, *m;
    e = trim_end(t, e);
    if (all_of(t, e, '=', 10)) {
        if (p->cfg_seen)
            cfg_end(p); /* the closing rule */
        return 1;
    }
    if (all_of(t, e, '-', 10) || STARTS(t, e, "Configuration Summary") ||
        STARTS(t, e, "Other Configuration Values"))
        return 1;
    if (*t == '[')
        return cfg_section(p, t, e) ? 1 : (cfg_end(p), 0);
    q = t;
    while (q < e && is_word((unsigned char)*q))
        q++;
    if (!ind || q == t || e - q < 2 || q[0] != ':' || q[1] != ' ' || !p->cfg_sec[0]) {
        cfg_end(p);
        return 0;
    }
    v = skip_spaces(q + 2, e);
    ve = e;
    for (m = v; (m = FIND(m, e, "  (Mcore default: ")) != NULL; m++)
        ve = m;
    ve = trim_end(v, ve);
    unquote(&v, &ve);
    bridge_set(p, p->cfg_sec, t, (size_t)(q - t), v, ve);
    return 1;
}

static void yl_flush(mt_logparse *p)
{
    if (p->yl_active && p->yl_ok && p->yl_n && p->yl_len + 1 < sizeof p->yl_buf) {
        p->yl_buf[p->yl_len++] = ']';
        bridge_set(p, p->yl_sec, p->yl_key, strlen(p->yl_key), p->yl_buf, p->yl_buf + p->yl_len);
    }
    p->yl_active = 0;
}

static int line_start(const char *t, const char *e);

/* One line of the YAML dump; 0 when it is not one (the block ended). */
static int cfg_yaml(mt_logparse *p, int ind, const char *t, const char *e)
{
    const char *q, *v, *ve;
    e = trim_end(t, e);
    if (all_of(t, e, '-', 10)) {
        yl_flush(p);
        cfg_end(p);
        return 1;
    }
    if (*t == '-' && (e - t == 1 || t[1] == ' ')) {
        /* "- item" of a block list (PyYAML puts it at its key's indent) */
        if (!p->yl_active)
            return 1;
        if (ind < p->yl_ind) {
            yl_flush(p);
            return 1;
        }
        v = skip_spaces(t + 1, e);
        ve = e;
        q = v;
        while (q < ve && (is_word((unsigned char)*q) || *q == '.' || *q == '-' || *q == '+' ||
                          *q == '/' || *q == '\'' || *q == '"'))
            q++;
        if (v == ve || q != ve || p->yl_len + (size_t)(ve - v) + 8 >= sizeof p->yl_buf) {
            p->yl_ok = 0; /* a list of mappings (enums, callables): not an argument */
            return 1;
        }
        yaml_scalar(&v, &ve);
        if (p->yl_n)
            p->yl_len +=
                (size_t)snprintf(p->yl_buf + p->yl_len, sizeof p->yl_buf - p->yl_len, ", ");
        {
            const char *nq = v;
            double d;
            int bare = (parse_double(&nq, ve, &d) == 0 && nq == ve) ||
                       (ve - v == 4 && (!memcmp(v, "True", 4) || !memcmp(v, "None", 4))) ||
                       (ve - v == 5 && !memcmp(v, "False", 5));
            p->yl_len += (size_t)snprintf(p->yl_buf + p->yl_len, sizeof p->yl_buf - p->yl_len,
                                          bare ? "%.*s" : "'%.*s'", (int)(ve - v), v);
        }
        p->yl_n++;
        return 1;
    }
    if (line_start(t, e)) {
        yl_flush(p);
        cfg_end(p);
        return 0;
    }
    q = t;
    while (q < e && (is_word((unsigned char)*q) || *q == '-' || *q == '.'))
        q++;
    /* the top-level keys are the container's fields, snake_case: a glued
     * "WARNING: ..." or "ImportError: ..." is none */
    if (!ind)
        for (v = t; v < q; v++)
            if (!((*v >= 'a' && *v <= 'z') || is_digit((unsigned char)*v) || *v == '_'))
                q = t;
    if (q == t || q >= e || *q != ':' || (q + 1 < e && q[1] != ' ')) {
        if (!ind) {
            yl_flush(p);
            cfg_end(p);
            return 0;
        }
        return 1; /* a folded scalar's continuation */
    }
    if (p->yl_active) {
        if (ind <= p->yl_ind)
            yl_flush(p);
        else
            p->yl_active = 0; /* the key held a mapping, not a list */
    }
    while (p->y_depth > 0 && p->y_ind[p->y_depth - 1] >= ind)
        p->y_depth--;
    v = skip_spaces(q + 1, e);
    ve = e;
    if (v == ve) {
        /* "key:" opens a mapping or a block list */
        if (p->y_depth == 1 && (size_t)(q - t) <= ARG_NAME_MAX) {
            p->yl_active = 1;
            p->yl_ind = ind;
            p->yl_ok = 1;
            p->yl_n = 0;
            p->yl_len = 1;
            p->yl_buf[0] = '[';
            snprintf(p->yl_sec, sizeof p->yl_sec, "%s", p->y_key[0]);
            memcpy(p->yl_key, t, (size_t)(q - t));
            p->yl_key[q - t] = '\0';
        }
        if (p->y_depth < 8) {
            size_t kn =
                (size_t)(q - t) < sizeof p->y_key[0] ? (size_t)(q - t) : sizeof p->y_key[0] - 1;
            memcpy(p->y_key[p->y_depth], t, kn);
            p->y_key[p->y_depth][kn] = '\0';
            p->y_ind[p->y_depth++] = ind;
        }
        return 1;
    }
    yaml_scalar(&v, &ve);
    if (p->y_depth == 1)
        bridge_set(p, p->y_key[0], t, (size_t)(q - t), v, ve);
    else if (p->y_depth == 0 && key_is(t, (size_t)(q - t), "mixed_precision"))
        set_arg(p, "mixed_precision", v, ve);
    return 1;
}

static void world_line(mt_logparse *p, const char *t, const char *e)
{
    mt_logworld w = {-1, -1, -1, -1, -1};
    const char *q = t;
    while (q < e) {
        const char *comma = memchr(q, ',', (size_t)(e - q)), *ie = comma ? comma : e;
        const char *colon = memchr(q, ':', (size_t)(ie - q));
        if (colon) {
            const char *k = skip_spaces(q, colon), *ke = trim_end(k, colon),
                       *v = skip_spaces(colon + 1, ie);
            size_t kn = (size_t)(ke - k);
            int64_t n;
            int *dst = NULL;
            if (key_is(k, kn, "using world size"))
                dst = &w.world;
            else if (key_is(k, kn, "data-parallel size") || key_is(k, kn, "data-parallel-size"))
                dst = &w.dp;
            else if (key_is(k, kn, "context-parallel size"))
                dst = &w.cp;
            else if (key_is(k, kn, "tensor-model-parallel size"))
                dst = &w.tp;
            else if (key_is(k, kn, "pipeline-model-parallel size"))
                dst = &w.pp;
            if (dst && parse_i64(&v, ie, &n) == 0 && n >= 0 && n <= INT32_MAX)
                *dst = (int)n;
        }
        if (!comma)
            break;
        q = comma + 1;
    }
    if (w.world < 0) {
        p->counts.garbage_lines++;
        return;
    }
    p->world = w;
    p->have_world = 1;
    copy_text(p->world_text, sizeof p->world_text, t, trim_end(t, e));
}

/* "Step Time : 82.25s GPU utilization: 73.3MODEL_TFLOP/s/GPU" (older: TFLOP/s/GPU). */
static void step_line(mt_logparse *p, int rank, uint64_t line, const char *t, const char *e)
{
    const char *q = skip_spaces(t + 9, e), *u;
    double s, tf = NAN;
    uint32_t tf_has = 0;
    if (q >= e || *q != ':') {
        p->counts.garbage_lines++;
        return;
    }
    q = skip_spaces(q + 1, e);
    if (parse_double(&q, e, &s) || q >= e || *q != 's') {
        p->counts.garbage_lines++;
        return;
    }
    if ((u = FIND(q, e, "GPU utilization:"))) {
        u = skip_spaces(u + 16, e);
        if (parse_double(&u, e, &tf) == 0 &&
            (STARTS(u, e, "MODEL_TFLOP/s/GPU") || STARTS(u, e, "TFLOP/s/GPU")))
            tf_has = 1;
    }
    /* printed after its iteration line (the sim) or before it (Bridge's
     * training_log prints it first): attach to the last line when it fits */
    if (!p->step_pending && p->nrec) {
        lp_rec *last = &p->rec[p->nrec - 1];
        if (!(last->has & (MT_IT_STEP_TIME | MT_IT_STEP_LINE_ONLY)) &&
            step_matches(last->has, last->elapsed_ms, s) && last->iteration == p->last_iteration) {
            last->step_time_s = s;
            last->has |= MT_IT_STEP_TIME;
            if (tf_has) {
                last->step_tflops = tf;
                if (!(last->has & MT_IT_TFLOPS)) {
                    last->tflops = tf;
                    last->has |= MT_IT_TFLOPS;
                }
            }
            return;
        }
    }
    if (p->step_pending)
        emit_step_only(p);
    p->step_pending = 1;
    p->step_s = s;
    p->step_tf = tf;
    p->step_tf_has = tf_has;
    p->step_rank = rank;
    p->step_line = line;
}

/* "Theoretical memory footprints: weight and optimizer=X MB, activation=Y MB, total=Z MB" */
static void theoretical_line(mt_logparse *p, int rank, uint64_t line, const char *t, const char *e)
{
    static const char *const keys[3] = {"weight and optimizer=", "activation=", "total="};
    double v[3] = {NAN, NAN, NAN};
    int i;
    for (i = 0; i < 3; i++) {
        const char *q = find(t, e, keys[i], strlen(keys[i]));
        if (q) {
            q += strlen(keys[i]);
            if (parse_double(&q, e, &v[i]))
                v[i] = NAN;
        }
    }
    p->have_theo = 1;
    p->theo_w = v[0];
    p->theo_a = v[1];
    p->theo_t = v[2];
    add_event(p, MT_LOGEV_THEORETICAL_MEMORY, 0, rank, t, e, isnan(v[2]) ? v[0] : v[2],
              p->last_iteration, line, 0);
}

/* " validation loss at iteration 10 on validation set | lm loss value: ... | lm loss PPL: ... |" */
static void validation_line(mt_logparse *p, int rank, uint64_t line, const char *t, const char *e)
{
    const char *q = FIND(t, e, "iteration ");
    int64_t iter = -1;
    double v = NAN;
    if (q) {
        q += 10;
        if (parse_i64(&q, e, &iter))
            iter = -1;
    }
    if ((q = FIND(t, e, " value:"))) {
        q = skip_spaces(q + 7, e);
        if (parse_double(&q, e, &v))
            v = NAN;
    }
    add_event(p, MT_LOGEV_VALIDATION, 0, rank, t, e, v, iter >= 0 ? iter : p->last_iteration, line,
              0);
}

/* ---- events: one pass over word starts ----------------------------------------------- */

static const int kind_rank[MT_LOGEV_KINDS] = {
    /* lower wins when one line says several things */
    [MT_LOGEV_OOM] = 0,
    [MT_LOGEV_NAN] = 1,
    [MT_LOGEV_INFRA] = 2,
    [MT_LOGEV_NCCL_ERROR] = 3,
    [MT_LOGEV_WATCHDOG] = 4,
    [MT_LOGEV_IMPORT_ERROR] = 5,
    [MT_LOGEV_CRASH] = 6,
    [MT_LOGEV_CAPTURE] = 7,
    [MT_LOGEV_FALLBACK] = 8,
    [MT_LOGEV_EXCEPTION] = 9,
    [MT_LOGEV_TRACEBACK] = 10,
    [MT_LOGEV_VALIDATION] = 11,
    [MT_LOGEV_THEORETICAL_MEMORY] = 12,
};

typedef struct lp_match {
    int kind; /* -1 none */
    int capture_pri;
    double value;
    /* facts about the whole line, looked up once (a line repeating a word
     * must not cost a search of the line per repetition) */
    int ib, failure; /* -1 not yet known */
} lp_match;

/* The line mentions NCCL's InfiniBand transport. */
static int line_ib(lp_match *m, const char *t, const char *e)
{
    if (m->ib < 0)
        m->ib = FIND(t, e, "NET/IB") || FIND(t, e, "IBV_") || FIND(t, e, "ibv_");
    return m->ib;
}

/* The line says something failed. */
static int line_failure(lp_match *m, const char *t, const char *e)
{
    if (m->failure < 0)
        m->failure = FIND(t, e, "fail") || FIND(t, e, "rror");
    return m->failure;
}

static void consider(lp_match *m, int kind)
{
    if (m->kind < 0 || kind_rank[kind] < kind_rank[m->kind])
        m->kind = kind;
}

/* The number after the last ':' before 's' ("... on rank 0: 1.234s"). */
static double capture_seconds(const char *p, const char *e)
{
    const char *c = NULL, *q;
    double v;
    for (q = p; q < e; q++)
        if (*q == ':')
            c = q;
    if (!c)
        return NAN;
    q = skip_spaces(c + 1, e);
    return parse_double(&q, e, &v) == 0 ? v : NAN;
}

/* ---- the words of an event line ----
 * Each entry: a word's literal text, and either the event it is (consider
 * it) or what to do when it stands at a word start (act: a capture with its
 * priority, a word that counts only in context).  The first entry whose
 * text matches decides; the entries of one first letter keep their order. */
typedef void (*word_act)(lp_match *m, const char *t, const char *s, const char *e);

static void capture_at(lp_match *m, int pri, double value)
{
    consider(m, MT_LOGEV_CAPTURE);
    if (m->capture_pri < pri) {
        m->capture_pri = pri;
        if (pri >= 2)
            m->value = value;
    }
}

/* "CUDA error: out of memory"; a warning that mentions memory is not an OOM */
static void act_out_of_memory(lp_match *m, const char *t, const char *s, const char *e)
{
    (void)e;
    if (s - t >= 7 && !memcmp(s - 7, "error: ", 7))
        consider(m, MT_LOGEV_OOM);
}

static void act_capture_training(lp_match *m, const char *t, const char *s, const char *e)
{
    (void)t, (void)s, (void)e;
    capture_at(m, 1, NAN);
}

static void act_creating(lp_match *m, const char *t, const char *s, const char *e)
{
    const char *q = s + 9;
    int64_t n;
    (void)t;
    if (parse_i64(&q, e, &n) == 0 && STARTS(q, e, " CUDA graphs"))
        capture_at(m, 2, (double)n);
}

static void act_capture_start(lp_match *m, const char *t, const char *s, const char *e)
{
    (void)t, (void)s, (void)e;
    capture_at(m, 0, NAN);
}

static void act_capture_time(lp_match *m, const char *t, const char *s, const char *e)
{
    (void)t;
    /* the seconds only once a line: reading them scans to its end */
    capture_at(m, 3, m->capture_pri < 3 ? capture_seconds(s, e) : NAN);
}

/* NCCL's InfiniBand transport failing is the fabric, not NCCL */
static void act_nccl_warn(lp_match *m, const char *t, const char *s, const char *e)
{
    (void)s;
    consider(m, line_ib(m, t, e) ? MT_LOGEV_INFRA : MT_LOGEV_NCCL_ERROR);
}

/* ncclSystemError, ncclInternalError, ncclInvalidUsage, ... */
static void act_nccl_code(lp_match *m, const char *t, const char *s, const char *e)
{
    const char *q = s + 4;
    (void)t;
    if (!(e - s > 5 && s[4] >= 'A' && s[4] <= 'Z'))
        return;
    while (q < e && is_alpha((unsigned char)*q))
        q++;
    if ((q - s >= 9 && !memcmp(q - 5, "Error", 5)) ||
        (q - s == 16 && !memcmp(s, "ncclInvalidUsage", 16)) ||
        (q - s == 19 && !memcmp(s, "ncclInvalidArgument", 19)))
        consider(m, MT_LOGEV_NCCL_ERROR);
}

/* "Xid" as a word of its own: a GPU's error report */
static void act_xid(lp_match *m, const char *t, const char *s, const char *e)
{
    (void)t;
    if (e - s == 3 || s[3] == ' ' || s[3] == ':' || s[3] == '(')
        consider(m, MT_LOGEV_INFRA);
}

static void act_watchdog(lp_match *m, const char *t, const char *s, const char *e)
{
    const char *w = s + 8, *we = e - w > 48 ? w + 48 : e;
    (void)t;
    if (FIND(w, we, "caught") || FIND(w, we, "terminated") || FIND(w, we, "stuck") ||
        FIND(w, we, "timed out") || FIND(w, we, "timeout"))
        consider(m, MT_LOGEV_WATCHDOG);
}

static void act_ibv(lp_match *m, const char *t, const char *s, const char *e)
{
    (void)s;
    if (line_failure(m, t, e))
        consider(m, MT_LOGEV_INFRA);
}

typedef struct log_word {
    const char *text;
    size_t len;
    int kind;     /* MT_LOGEV_*, when act is NULL */
    word_act act;
} log_word;
#define W_(text, kind) {text, sizeof(text) - 1, kind, NULL}
#define A_(text, act) {text, sizeof(text) - 1, -1, act}
static const log_word log_words[] = {
    W_("OutOfMemoryError", MT_LOGEV_OOM),
    A_("out of memory", act_out_of_memory),
    W_("CUDA out of memory", MT_LOGEV_OOM),
    A_("Capture CUDA graph for training", act_capture_training),
    A_("Creating ", act_creating),
    A_("Start CUDA Graphs capture", act_capture_start),
    W_("Segmentation fault", MT_LOGEV_CRASH),
    W_("SIGSEGV", MT_LOGEV_CRASH),
    W_("SIGABRT", MT_LOGEV_CRASH),
    W_("SIGBUS", MT_LOGEV_CRASH),
    W_("SIGILL", MT_LOGEV_CRASH),
    W_("SIGFPE", MT_LOGEV_CRASH),
    A_("Time spent in CUDA Graphs capture", act_capture_time),
    W_("Traceback (most recent call last)", MT_LOGEV_TRACEBACK),
    W_("DistBackendError", MT_LOGEV_NCCL_ERROR),
    A_("NCCL WARN", act_nccl_warn),
    W_("NCCL error", MT_LOGEV_NCCL_ERROR),
    W_("NCCL communicator was aborted", MT_LOGEV_NCCL_ERROR),
    W_("NODE FAILURE", MT_LOGEV_INFRA),
    W_("NODE_FAIL", MT_LOGEV_INFRA),
    W_("Node failure", MT_LOGEV_INFRA),
    A_("nccl", act_nccl_code),
    W_("node lost", MT_LOGEV_INFRA),
    W_("node failure", MT_LOGEV_INFRA),
    /* moetune-cuda-moe on a node without a usable GPU: the node's fault */
    W_("no CUDA GPU is visible", MT_LOGEV_INFRA),
    A_("Xid", act_xid),
    W_("found NaN", MT_LOGEV_NAN),
    W_("found Inf", MT_LOGEV_NAN),
    W_("found nan", MT_LOGEV_NAN),
    W_("found inf", MT_LOGEV_NAN),
    W_("fallen off the bus", MT_LOGEV_INFRA),
    W_("falling back to", MT_LOGEV_FALLBACK),
    W_("Falling back to", MT_LOGEV_FALLBACK),
    W_("Fatal Python error", MT_LOGEV_CRASH),
    W_("Unexpected result nan", MT_LOGEV_NAN),
    W_("Unexpected result inf", MT_LOGEV_NAN),
    A_("Watchdog", act_watchdog),
    A_("watchdog", act_watchdog),
    W_("ImportError", MT_LOGEV_IMPORT_ERROR),
    W_("IBV_WC_", MT_LOGEV_INFRA),
    W_("ModuleNotFoundError", MT_LOGEV_IMPORT_ERROR),
    A_("ibv_", act_ibv),
    W_("transport retry counter exceeded", MT_LOGEV_INFRA),
    /* moetune-cuda-moe: this node cannot host the EP */
    W_("too few GPUs visible", MT_LOGEV_INFRA),
    W_("uncorrectable ECC", MT_LOGEV_INFRA),
    W_("core dumped", MT_LOGEV_CRASH),
};
#undef W_
#undef A_

/* For each byte, 1 + the index of the first log_words entry it begins
 * (0: no word begins with it), built once. */
static unsigned char word_first[256];
static pthread_once_t word_first_once = PTHREAD_ONCE_INIT;

static void word_first_build(void)
{
    size_t i = sizeof log_words / sizeof log_words[0];
    while (i-- > 0)
        word_first[(unsigned char)log_words[i].text[0]] = (unsigned char)(i + 1);
}

/* The word at s (a word start) of line [t, e). */
static void match_word(lp_match *m, const char *t, const char *s, const char *e)
{
    size_t i = word_first[(unsigned char)*s];
    for (i = i ? i - 1 : sizeof log_words / sizeof log_words[0];
         i < sizeof log_words / sizeof log_words[0]; i++) {
        const log_word *w = &log_words[i];
        if (w->text[0] != *s)
            continue;
        if (!starts(s, e, w->text, w->len))
            continue;
        if (w->act)
            w->act(m, t, s, e);
        else
            consider(m, w->kind);
        return;
    }
}

/* "SomeError: ..." / "pkg.mod.SomeException: ..." at the start of a line. */
static int exception_line(const char *t, const char *e)
{
    const char *q = t;
    while (q < e && (is_word((unsigned char)*q) || *q == '.'))
        q++;
    if (q >= e || *q != ':' || q - t < 5)
        return 0;
    return !memcmp(q - 5, "Error", 5) || (q - t >= 9 && !memcmp(q - 9, "Exception", 9));
}

static void event_line(mt_logparse *p, int rank, uint64_t line, const char *t, const char *e)
{
    lp_match m = {-1, -1, NAN, -1, -1};
    const char *s;
    int ctrl = 0;
    pthread_once(&word_first_once, word_first_build);
    for (s = t; s < e; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c == 0x7f) {
            if (c != '\t' && c != 0x1b)
                ctrl = 1;
            continue;
        }
        if (!word_first[c] || (s > t && is_word((unsigned char)s[-1])))
            continue;
        match_word(&m, t, s, e);
    }
    if (ctrl)
        p->counts.garbage_lines++;
    if (m.kind < 0 && exception_line(t, e))
        m.kind = MT_LOGEV_EXCEPTION;
    if (m.kind < 0)
        return;
    {
        uint32_t flags = 0;
        if ((m.kind == MT_LOGEV_IMPORT_ERROR || m.kind == MT_LOGEV_FALLBACK) &&
            (contains_ci(t, e, "deepep") || contains_ci(t, e, "deep_ep") ||
             contains_ci(t, e, "deep-ep") || contains_ci(t, e, "hybridep") ||
             contains_ci(t, e, "hybrid_ep") || contains_ci(t, e, "hybrid-ep")))
            flags |= MT_LOGEV_F_DISPATCHER;
        if (m.kind == MT_LOGEV_FALLBACK &&
            (contains_ci(t, e, "alltoall") || contains_ci(t, e, "dispatcher") ||
             contains_ci(t, e, "flex")))
            flags |= MT_LOGEV_F_DISPATCHER;
        add_event(p, (mt_logevent_kind)m.kind, flags, rank, t, trim_end(t, e),
                  m.kind == MT_LOGEV_CAPTURE ? m.value : NAN, p->last_iteration, line,
                  m.kind == MT_LOGEV_CAPTURE ? m.capture_pri : 0);
    }
}

/* ---- one line ------------------------------------------------------------------- */

static void body(mt_logparse *p, lp_source *s, int rank, const char *b, const char *e, size_t raw_n,
                 int depth);

static void iteration_done(mt_logparse *p, lp_source *s, int rank, mt_iteration *it, int complete,
                           const char *tail, const char *e, size_t raw_n, int depth, uint64_t line)
{
    it->rank = rank;
    it->line = line;
    commit_iteration(p, it);
    if (complete && skip_spaces(tail, e) < e && depth < 2) {
        p->counts.glued_lines++;
        body(p, s, rank, tail, e, raw_n, depth + 1);
    }
}

static void pend_start(mt_logparse *p, lp_source *s, int kind, int rank, const char *b,
                       const char *e, size_t raw_n, const mt_iteration *it, const char *resume)
{
    size_t n = (size_t)(e - b);
    if (grow(p, (void **)&s->pend, &s->pend_cap, n, 1))
        return;
    memcpy(s->pend, b, n);
    s->pend_len = n;
    s->pend_width = raw_n;
    s->pend_resume = resume ? (size_t)(resume - b) : 0;
    s->pend_rank = rank;
    s->pend_chunks = 1;
    s->pend_line = s->lineno;
    if (it)
        s->pend_it = *it;
    s->pend_kind = kind;
    s->pending = 1;
}

/* Reads what the latest piece added (linear in the line: earlier pieces are
 * never read again, except a head "iteration i/n |" still unclosed); commits
 * the line once complete, or regardless when force is set. */
static void pend_try(mt_logparse *p, lp_source *s, int force)
{
    int complete;
    const char *tail, *resume, *e = s->pend + s->pend_len;
    if (s->pend_kind == PEND_MEMORY) {
        /* a memory line has no end mark: it ends when no piece follows */
        if (!force)
            return;
        s->pending = 0;
        if (s->pend_chunks > 1)
            p->counts.wrapped_lines++;
        memory_line(p, skip_spaces(s->pend, e), e);
        return;
    }
    if (!s->pend_resume) {
        if (scan_iteration(p, s->pend, e, &s->pend_it, &complete, &tail, &resume) < 0) {
            s->pending = 0;
            return;
        }
    } else {
        scan_fields(p, &s->pend_it, s->pend + s->pend_resume, e, &complete, &tail, &resume);
    }
    if (resume)
        s->pend_resume = (size_t)(resume - s->pend);
    if (!complete && !force)
        return;
    s->pending = 0;
    if (s->pend_chunks > 1) {
        s->pend_it.has |= MT_IT_WRAPPED;
        p->counts.wrapped_lines++;
    }
    if (complete && skip_spaces(tail, e) < e)
        s->pend_it.has |= MT_IT_GLUED;
    iteration_done(p, s, s->pend_rank, &s->pend_it, complete, tail, e, s->pend_width, 1,
                   s->pend_line);
}

/* A line that begins something new, never a piece of a wrapped one. */
static int line_start(const char *t, const char *e)
{
    if (t >= e || *t == '[')
        return 1;
    if (STARTS(t, e, "iteration")) {
        const char *q = skip_spaces(t + 9, e);
        if (q > t + 9 && q < e && is_digit((unsigned char)*q))
            return 1;
    }
    return STARTS(t, e, "Step Time") || STARTS(t, e, "Theoretical memory") ||
           STARTS(t, e, "using world size") || STARTS(t, e, "Traceback") ||
           STARTS(t, e, "validation loss") || STARTS(t, e, "---") || exception_line(t, e);
}

/* The piece [b, e) continues the pending memory line when the field cut at
 * the wrap, joined with the piece's text up to its first '|', is one
 * "key: number" field again (a line that merely follows a whole memory line
 * makes none). */
static int memory_piece(const lp_source *s, const char *b, const char *e)
{
    char j[256];
    const char *pe = s->pend + s->pend_len, *ls = pe, *bar = memchr(b, '|', (size_t)(e - b)), *q,
               *je;
    size_t a, c;
    double d;
    while (ls > s->pend && ls[-1] != '|')
        ls--;
    a = (size_t)(pe - ls);
    c = (size_t)((bar ? bar : e) - b);
    if (a + c > sizeof j)
        return 0;
    memcpy(j, ls, a);
    memcpy(j + a, b, c);
    q = skip_spaces(j, j + a + c);
    je = trim_end(q, j + a + c);
    if (ls == s->pend) {
        /* cut inside the "[Rank r] (after i iterations) memory (MB)" head */
        const char *m = FIND(q, je, "] memory (");
        if (!m)
            m = FIND(q, je, " memory (");
        return m && je - m >= 4 && (je[-3] == 'M' || je[-3] == 'G') && je[-2] == 'B' &&
               je[-1] == ')' && bar;
    }
    if (q == je || !is_alpha((unsigned char)*q))
        return 0;
    while (q < je && (is_alpha((unsigned char)*q) || *q == '-' || *q == ' '))
        q++;
    if (q >= je || *q != ':')
        return 0;
    q = skip_spaces(q + 1, je);
    return parse_double(&q, je, &d) == 0 && q == je;
}

static int continuation(const lp_source *s, const char *b, const char *e, size_t raw_n)
{
    size_t n = (size_t)(e - b);
    /* a terminal wraps at its width; fold -s and pagers break earlier, at a
     * space, so the first piece can be shorter than the ones after it */
    if (raw_n > 2 * s->pend_width || s->pend_chunks >= WRAP_MAX_CHUNKS ||
        s->pend_len + n > MT_LOGPARSE_WRAP_MAX)
        return 0;
    if (line_start(skip_spaces(b, e), e))
        return 0;
    if (s->pend_kind == PEND_MEMORY)
        return memory_piece(s, b, e);
    /* every piece of a wrapped iteration line but a lone glued tail holds a '|' */
    return memchr(b, '|', n) != NULL;
}

static void body(mt_logparse *p, lp_source *s, int rank, const char *b, const char *e, size_t raw_n,
                 int depth)
{
    const char *t = skip_spaces(b, e);
    uint64_t line = s->lineno;
    if (t >= e)
        return;
    if (p->cfg_mode && p->cfg_src == s && rank == p->cfg_rank) {
        int ind = (int)(t - b);
        if (p->cfg_mode == CFG_NON_DEFAULT ? cfg_non_default(p, ind, t, e) : cfg_yaml(p, ind, t, e))
            return;
    }
    if (s->in_args && rank == s->args_rank) {
        if (*t == '-') {
            const char *q = t;
            while (q < e && *q == '-')
                q++;
            if (STARTS(q, e, " end of arguments")) {
                s->in_args = 0;
                return;
            }
        } else if (args_line(p, t, e) == 0) {
            return;
        }
    }
    switch (*t) {
    case '[':
    case 'i': {
        mt_iteration it;
        int complete;
        const char *tail, *resume;
        if (*t == '[' && t + 1 < e && is_alpha((unsigned char)t[1]) &&
            FIND(t, e, "] Non-default values (vs Mcore")) {
            cfg_start(p, s, rank, CFG_NON_DEFAULT);
            cfg_non_default(p, (int)(t - b), t, e);
            return;
        }
        if (*t == '[' && STARTS(t, e, "[Rank ")) {
            const char *q = t + 6;
            while (q < e && is_digit((unsigned char)*q))
                q++;
            if (STARTS(q, e, "] (after ") || FIND(q, e, "] memory (")) {
                if (depth == 0 && raw_n >= WRAP_MIN_WIDTH && !s->pending) {
                    /* held until the next line tells whether it continues it */
                    pend_start(p, s, PEND_MEMORY, rank, b, e, raw_n, NULL, NULL);
                    if (s->pending)
                        return;
                }
                memory_line(p, t, e);
                return;
            }
            break;
        }
        if (scan_iteration(p, t, e, &it, &complete, &tail, &resume) < 0)
            break;
        if (!complete && depth == 0 && raw_n >= WRAP_MIN_WIDTH && !s->pending) {
            /* a terminal hard-wrap: wait for the rest */
            pend_start(p, s, PEND_ITERATION, rank, b, e, raw_n, &it, resume);
            if (s->pending)
                return;
        }
        if (complete && skip_spaces(tail, e) < e)
            it.has |= MT_IT_GLUED;
        iteration_done(p, s, rank, &it, complete, tail, e, raw_n, depth, line);
        return;
    }
    case '-': {
        const char *q = t;
        while (q < e && *q == '-')
            q++;
        if (q - t >= 3 && STARTS(q, e, " arguments ")) {
            s->in_args = 1;
            s->args_rank = rank;
            return;
        }
        if (q - t >= 3 && STARTS(q, e, " end of arguments")) {
            s->in_args = 0;
            return;
        }
        if (q - t >= 3 && STARTS(q, e, " Task Configuration ")) {
            cfg_start(p, s, rank, CFG_YAML);
            return;
        }
        break;
    }
    case 'C':
        if (STARTS(t, e, "Configuration Summary (Non-Default Values")) {
            cfg_start(p, s, rank, CFG_NON_DEFAULT);
            return;
        }
        break;
    case 'u':
        if (STARTS(t, e, "using world size:")) {
            world_line(p, t, e);
            return;
        }
        break;
    case 'S':
        if (STARTS(t, e, "Step Time")) {
            step_line(p, rank, line, t, e);
            return;
        }
        break;
    case 'T':
        if (STARTS(t, e, "Theoretical memory footprints")) {
            theoretical_line(p, rank, line, t, trim_end(t, e));
            return;
        }
        break;
    case 'v':
        if (STARTS(t, e, "validation loss at")) {
            validation_line(p, rank, line, t, trim_end(t, e));
            return;
        }
        break;
    default:
        break;
    }
    event_line(p, rank, line, t, e);
}

/* One "[<name><N>]:" prefix at *bp: N, *bp past it; -1 when none. */
static int bracket_prefix(const char **bp, const char *e)
{
    const char *q = *bp, *a, *d;
    int64_t v;
    if (q >= e || *q != '[')
        return -1;
    a = ++q;
    while (q < e && is_alpha((unsigned char)*q) && q - a < 32)
        q++;
    d = q;
    if (q > a && q < e && is_digit((unsigned char)*q) && parse_i64(&q, e, &v) == 0 &&
        q - d <= 7 && e - q >= 2 && q[0] == ']' && q[1] == ':') {
        *bp = q + 2;
        return (int)v;
    }
    return -1;
}

/* srun -l: "<task>: " (Slurm pads the task number with spaces); torchrun
 * --tee: "[<role><L>]:" with the local rank L ("[default3]:"); then the
 * program's own "[rank<N>]:" (PyTorch's error records, N the global rank).
 * Each optional, in that order: *task, *local and *own get the numbers (-1
 * when absent); a lone bracket is taken as torchrun's. */
static int strip_prefix(const char **bp, const char *e, int *task, int *local, int *own)
{
    const char *b = *bp, *q = b, *d;
    int64_t v;
    while (q < e && *q == ' ' && q - b < 8)
        q++;
    d = q;
    if (q < e && is_digit((unsigned char)*q) && parse_i64(&q, e, &v) == 0 && q - d <= 7 &&
        e - q >= 2 && q[0] == ':' && q[1] == ' ') {
        *task = (int)v;
        b = q + 2;
    }
    if ((*local = bracket_prefix(&b, e)) >= 0)
        *own = bracket_prefix(&b, e);
    *bp = b;
    return *task >= 0 || *local >= 0;
}

/* The rank a line's prefixes name: the program's own global rank; else
 * torchrun's local rank inside srun's task, task * ranks_per_task + local,
 * when the layout is known; else the innermost number, as printed. */
static int prefix_rank(const mt_logparse *p, int task, int local, int own)
{
    if (own >= 0)
        return own;
    if (task >= 0 && local >= 0 && p->ranks_per_task > 0 &&
        (int64_t)task * p->ranks_per_task + local <= INT32_MAX)
        return task * p->ranks_per_task + local;
    return local >= 0 ? local : task;
}

void mt_logparse_set_ranks_per_task(mt_logparse *p, int n)
{
    if (p)
        p->ranks_per_task = n > 0 ? n : 0;
}

static void raw_line(mt_logparse *p, lp_source *s, const char *raw, size_t n)
{
    const char *b = raw, *e = raw + n;
    int task = -1, local = -1, own = -1, rank = s->rank;
    int prefixed = strip_prefix(&b, e, &task, &local, &own);
    if (prefixed && rank < 0)
        rank = prefix_rank(p, task, local, own);
    if (s->pending) {
        if (!prefixed && continuation(s, b, e, n)) {
            size_t k = (size_t)(e - b);
            if (grow(p, (void **)&s->pend, &s->pend_cap, s->pend_len + k, 1) == 0) {
                memcpy(s->pend + s->pend_len, b, k);
                s->pend_len += k;
                s->pend_chunks++;
                pend_try(p, s, 0);
            } else {
                pend_try(p, s, 1);
            }
            return;
        }
        /* another rank's line in a merged stream does not end the wrap */
        if (!(prefixed && rank != s->pend_rank))
            pend_try(p, s, 1);
    }
    body(p, s, rank, b, e, n, 0);
}

/* One line from the stream (without its LF); CR ends a line too. */
static void line_in(mt_logparse *p, lp_source *s, const char *line, size_t n, int truncated)
{
    const char *cr;
    p->counts.lines++;
    s->lineno++;
    if (n > MT_LOGPARSE_LINE_MAX) {
        n = MT_LOGPARSE_LINE_MAX;
        truncated = 1;
    }
    if (truncated)
        p->counts.truncated_lines++;
    while (n && (cr = memchr(line, '\r', n)) != NULL) {
        size_t k = (size_t)(cr - line);
        if (k)
            raw_line(p, s, line, k);
        line = cr + 1;
        n -= k + 1;
    }
    if (n)
        raw_line(p, s, line, n);
}

static void buf_append(mt_logparse *p, lp_source *s, const char *d, size_t n)
{
    if (s->overflow)
        return;
    if (n > MT_LOGPARSE_LINE_MAX - s->len) {
        n = MT_LOGPARSE_LINE_MAX - s->len;
        s->overflow = 1;
    }
    if (!n)
        return;
    if (grow(p, (void **)&s->buf, &s->cap, s->len + n, 1)) {
        s->overflow = 1;
        return;
    }
    memcpy(s->buf + s->len, d, n);
    s->len += n;
}

static lp_source *source(mt_logparse *p, int rank, int channel)
{
    size_t lo = 0, hi = p->nsrc;
    lp_source *s;
    if (rank < 0)
        rank = -1;
    if (p->last && p->last->rank == rank && p->last->channel == channel)
        return p->last;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        s = p->src[mid];
        if (s->rank == rank && s->channel == channel)
            return p->last = s;
        if (s->rank < rank || (s->rank == rank && s->channel < channel))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (p->nsrc >= MT_LOGPARSE_MAX_SOURCES)
        return NULL;
    if (grow(p, (void **)&p->src, &p->capsrc, p->nsrc + 1, sizeof *p->src))
        return NULL;
    if (!(s = calloc(1, sizeof *s))) {
        p->status = -ENOMEM;
        return NULL;
    }
    s->rank = rank;
    s->channel = channel;
    s->args_rank = -1;
    memmove(p->src + lo + 1, p->src + lo, (p->nsrc - lo) * sizeof *p->src);
    p->src[lo] = s;
    p->nsrc++;
    return p->last = s;
}

void mt_logparse_feed_channel(mt_logparse *p, int rank, int channel, const char *data, size_t n)
{
    lp_source *s = source(p, rank, channel);
    if (!s) {
        p->counts.sources_dropped_bytes += n;
        return;
    }
    p->counts.bytes += n;
    while (n) {
        const char *nl = memchr(data, '\n', n);
        size_t k;
        if (!nl) {
            buf_append(p, s, data, n);
            return;
        }
        k = (size_t)(nl - data);
        if (!s->len && !s->overflow) {
            line_in(p, s, data, k, 0); /* whole in the chunk: parse it in place */
        } else {
            buf_append(p, s, data, k);
            line_in(p, s, s->buf, s->len, s->overflow);
            s->len = 0;
            s->overflow = 0;
        }
        data += k + 1;
        n -= k + 1;
    }
}

void mt_logparse_feed(mt_logparse *p, const char *data, size_t n)
{
    mt_logparse_feed_channel(p, -1, 0, data, n);
}

void mt_logparse_feed_rank(mt_logparse *p, int rank, const char *data, size_t n)
{
    mt_logparse_feed_channel(p, rank, 0, data, n);
}

void mt_logparse_finish(mt_logparse *p)
{
    size_t i;
    for (i = 0; i < p->nsrc; i++) {
        lp_source *s = p->src[i];
        if (s->len || s->overflow) {
            line_in(p, s, s->buf, s->len, s->overflow);
            s->len = 0;
            s->overflow = 0;
        }
        if (s->pending)
            pend_try(p, s, 1);
    }
    if (p->step_pending)
        emit_step_only(p);
    if (p->cfg_mode == CFG_YAML)
        yl_flush(p); /* a list the input ended in */
}

int mt_logparse_read(mt_logparse *p, FILE *f)
{
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        mt_logparse_feed(p, buf, n);
    mt_logparse_finish(p);
    return ferror(f) ? -EIO : 0;
}

int mt_logparse_read_file(mt_logparse *p, const char *path, mt_diag *d)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    int rc, err;
    if (!f) {
        err = errno;
        mt_diag_add(d, path, 0, NULL, "cannot open the log: %s", strerror(err));
        return -err;
    }
    rc = mt_logparse_read(p, f);
    err = errno;
    if (rc)
        mt_diag_add(d, path, 0, NULL, "cannot read the log: %s", strerror(err ? err : EIO));
    if (f != stdin)
        fclose(f);
    return rc;
}

/* ---- results ---------------------------------------------------------------- */

double mt_iteration_loss(const mt_iteration *it, const char *key, int *found)
{
    int i;
    for (i = 0; i < it->n_losses; i++)
        if (!strcmp(it->loss_key[i], key)) {
            if (found)
                *found = 1;
            return it->loss[i];
        }
    if (found)
        *found = 0;
    return NAN;
}

size_t mt_logparse_iterations(const mt_logparse *p)
{
    return p->nrec;
}

int mt_logparse_iteration(const mt_logparse *p, size_t i, mt_iteration *out)
{
    if (i >= p->nrec)
        return -ERANGE;
    load_iteration(p, &p->rec[i], out);
    return 0;
}

size_t mt_logparse_ranks(const mt_logparse *p)
{
    return p->nmem;
}

const mt_rank_memory *mt_logparse_rank_memory(const mt_logparse *p, size_t i)
{
    return i < p->nmem ? &p->mem[i] : NULL;
}

const mt_rank_memory *mt_logparse_memory_of(const mt_logparse *p, int rank)
{
    size_t lo = 0, hi = p->nmem;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->mem[mid].rank == rank)
            return &p->mem[mid];
        if (p->mem[mid].rank < rank)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const mt_kv *mt_logparse_args(const mt_logparse *p)
{
    return p->args;
}

int mt_logparse_world(const mt_logparse *p, mt_logworld *w)
{
    if (!p->have_world)
        return -ENOENT;
    *w = p->world;
    return 0;
}

int mt_logparse_theoretical(const mt_logparse *p, double *weight_opt_mb, double *activation_mb,
                            double *total_mb)
{
    if (weight_opt_mb)
        *weight_opt_mb = p->have_theo ? p->theo_w : NAN;
    if (activation_mb)
        *activation_mb = p->have_theo ? p->theo_a : NAN;
    if (total_mb)
        *total_mb = p->have_theo ? p->theo_t : NAN;
    return p->have_theo ? 0 : -ENOENT;
}

size_t mt_logparse_events(const mt_logparse *p)
{
    return p->nev;
}

const mt_logevent *mt_logparse_event(const mt_logparse *p, size_t i)
{
    return i < p->nev ? &p->ev[i] : NULL;
}

uint64_t mt_logparse_event_count(const mt_logparse *p, mt_logevent_kind kind)
{
    return (unsigned)kind < MT_LOGEV_KINDS ? p->kind_count[kind] : 0;
}

const mt_logevent *mt_logparse_first(const mt_logparse *p, mt_logevent_kind kind)
{
    return (unsigned)kind < MT_LOGEV_KINDS && p->kind_count[kind] ? &p->first[kind] : NULL;
}

const char *mt_logevent_kind_name(mt_logevent_kind kind)
{
    static const char *const names[MT_LOGEV_KINDS] = {
        [MT_LOGEV_OOM] = "oom",
        [MT_LOGEV_NAN] = "nan",
        [MT_LOGEV_NCCL_ERROR] = "nccl_error",
        [MT_LOGEV_INFRA] = "infra",
        [MT_LOGEV_WATCHDOG] = "watchdog",
        [MT_LOGEV_IMPORT_ERROR] = "import_error",
        [MT_LOGEV_CAPTURE] = "cuda_graph_capture",
        [MT_LOGEV_FALLBACK] = "fallback",
        [MT_LOGEV_VALIDATION] = "validation",
        [MT_LOGEV_THEORETICAL_MEMORY] = "theoretical_memory",
        [MT_LOGEV_CRASH] = "crash",
        [MT_LOGEV_EXCEPTION] = "exception",
        [MT_LOGEV_TRACEBACK] = "traceback",
    };
    return (unsigned)kind < MT_LOGEV_KINDS ? names[kind] : "?";
}

const mt_logparse_counts *mt_logparse_counts_get(const mt_logparse *p)
{
    return &p->counts;
}

/* The first iteration that logged a NaN: its nan count, a non-finite loss
 * or grad norm. */
static int nan_from_iterations(const mt_logparse *p, char *buf, size_t n)
{
    size_t i;
    int j;
    for (i = 0; i < p->nrec; i++) {
        mt_iteration one, *it = &one;
        load_iteration(p, &p->rec[i], &one);
        if (it->has & MT_IT_NAN && it->nan_count > 0) {
            snprintf(buf, n, "iteration %lld: number of nan iterations: %lld",
                     (long long)it->iteration, (long long)it->nan_count);
            return 1;
        }
        for (j = 0; j < it->n_losses; j++)
            if (!isfinite(it->loss[j])) {
                snprintf(buf, n, "iteration %lld: %s: %g", (long long)it->iteration,
                         it->loss_key[j], it->loss[j]);
                return 1;
            }
        if (it->has & MT_IT_GRAD_NORM && !isfinite(it->grad_norm)) {
            snprintf(buf, n, "iteration %lld: grad norm: %g", (long long)it->iteration,
                     it->grad_norm);
            return 1;
        }
    }
    return 0;
}

/* An identifier at q: its end, or NULL.  upper: it must begin with A-Z. */
static const char *ident_end(const char *q, const char *e, int upper)
{
    if (q >= e || !(upper ? (*q >= 'A' && *q <= 'Z') : is_alpha((unsigned char)*q) || *q == '_'))
        return NULL;
    while (q < e && is_word((unsigned char)*q))
        q++;
    return q;
}

/* "Class.member" at [q, e): where the member begins, else NULL. */
static const char *enum_member(const char *q, const char *e)
{
    const char *c = ident_end(q, e, 1), *m;
    if (!c || c >= e || *c != '.' || !(m = ident_end(c + 1, e, 0)))
        return NULL;
    return c + 1;
}

/*
 * A dumped value as plugins compare it: Python prints an enum as
 * "AttnBackend.auto" (str) or, inside a list and in Bridge's repr,
 * "<AttnBackend.auto: 5>"; both become the member name, and a list of
 * enums its names separated by spaces ("[<CudaGraphModule.moe_router: 4>,
 * <CudaGraphModule.moe_preprocess: 5>]" -> "moe_router moe_preprocess").
 * Any other value is copied as it is.
 */
static const char *plain_value(const char *v, char *out, size_t cap)
{
    const char *e = v + strlen(v), *q = v, *m;
    size_t o = 0;
    int n = 0, words = 1;
    if ((m = enum_member(v, e)) && ident_end(m, e, 0) == e) {
        /* "AttnBackend.auto"; a class name of letters only, so that a file
         * name ("Qwen3.safetensors") is no enum */
        for (q = v; q + 1 < m && is_alpha((unsigned char)*q); q++)
            ;
        if (q + 1 == m)
            return m;
        q = v;
    }
    while (q < e && o + 1 < cap) {
        const char *me, *gt;
        if (*q == '<' && (m = enum_member(q + 1, e)) && (me = ident_end(m, e, 0)) && me < e &&
            *me == ':' && (gt = memchr(me, '>', (size_t)(e - me))) != NULL &&
            !memchr(me, '<', (size_t)(gt - me))) {
            size_t k = (size_t)(me - m);
            if (o + k + 1 >= cap)
                break;
            memcpy(out + o, m, k);
            o += k;
            q = gt + 1;
            n++;
            continue;
        }
        out[o++] = *q++;
    }
    out[o] = '\0';
    if (!n || q < e)
        return n ? out : v;
    /* a list (or tuple) of names only: the names */
    if (o >= 2 && ((out[0] == '[' && out[o - 1] == ']') || (out[0] == '(' && out[o - 1] == ')'))) {
        size_t i, w = 0;
        for (i = 1; i + 1 < o && words; i++)
            words = out[i] == ',' || out[i] == ' ' || is_word((unsigned char)out[i]);
        for (i = 1; words && i + 1 < o; i++) {
            char c = out[i];
            if (c != ',' && c != ' ')
                out[w++] = c;
            else if (w && out[w - 1] != ' ')
                out[w++] = ' ';
        }
        if (words) {
            while (w && out[w - 1] == ' ')
                w--;
            out[w] = '\0';
        }
    }
    return out;
}

int mt_logparse_evidence(const mt_logparse *p, mt_kv *evidence)
{
    static const struct {
        mt_logevent_kind kind;
        const char *key;
    } fails[] = {{MT_LOGEV_OOM, "log.oom"},
                 {MT_LOGEV_NAN, "log.nan"},
                 {MT_LOGEV_NCCL_ERROR, "log.nccl_error"},
                 {MT_LOGEV_INFRA, "log.infra"},
                 {MT_LOGEV_WATCHDOG, "log.watchdog"}};
    const char *k, *v;
    char key[ARG_NAME_MAX + 8], buf[160];
    size_t i;
    int rc = 0;
    for (i = 0; mt_kv_entry(p->args, i, &k, &v) == 0; i++) {
        char plain[MT_LOGPARSE_ARG_MAX + 1];
        snprintf(key, sizeof key, "args.%s", k);
        rc |= mt_kv_set(evidence, key, plain_value(v, plain, sizeof plain));
    }
    if (p->have_world)
        rc |= mt_kv_set(evidence, "log.world", p->world_text);
    if (p->have_fallback_dispatch)
        rc |= mt_kv_set(evidence, "log.dispatcher_fallback", p->first_fallback_dispatch.text);
    if (p->have_import_dispatch)
        rc |= mt_kv_set(evidence, "log.import_error", p->first_import_dispatch.text);
    if (p->capture_pri >= 0)
        rc |= mt_kv_set(evidence, "log.cuda_graph_capture", p->capture_best.text);
    for (i = 0; i < sizeof fails / sizeof fails[0]; i++)
        if (p->kind_count[fails[i].kind])
            rc |= mt_kv_set(evidence, fails[i].key, p->first[fails[i].kind].text);
    if (!p->kind_count[MT_LOGEV_NAN] && nan_from_iterations(p, buf, sizeof buf))
        rc |= mt_kv_set(evidence, "log.nan", buf);
    return rc ? -ENOMEM : 0;
}

/* ---- printing ----------------------------------------------------------------- */

/* Valid UTF-8 sequence length at s (max n bytes), 0 when invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    size_t len, i;
    unsigned c = s[0];
    uint32_t cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef)
        len = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4)
        len = 4, cp = c & 0x07;
    else
        return 0;
    if (len > n)
        return 0;
    for (i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return len;
}

static void json_str(FILE *out, const char *s)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s), i = 0;
    fputc('"', out);
    while (i < n) {
        unsigned c = u[i];
        size_t k;
        if (c == '"' || c == '\\') {
            fputc('\\', out);
            fputc((int)c, out);
            i++;
        } else if (c < 0x20 || c == 0x7f) {
            fprintf(out, "\\u%04x", c);
            i++;
        } else if ((k = utf8_len(u + i, n - i)) == 0) {
            fputs("\\ufffd", out);
            i++;
        } else {
            fwrite(u + i, 1, k, out);
            i += k;
        }
    }
    fputc('"', out);
}

static void json_num(FILE *out, double v)
{
    if (isnan(v))
        fputs("\"NaN\"", out);
    else if (isinf(v))
        fputs(v > 0 ? "\"Infinity\"" : "\"-Infinity\"", out);
    else
        fprintf(out, "%.15g", v);
}

static void json_iteration(FILE *out, const mt_iteration *it)
{
    static const struct {
        uint32_t bit;
        const char *name;
        size_t off;
    } dbl[] = {
        {MT_IT_TIMESTAMP, "timestamp", offsetof(mt_iteration, timestamp)},
        {MT_IT_ELAPSED, "elapsed_ms", offsetof(mt_iteration, elapsed_ms)},
        {MT_IT_TFLOPS, "tflops_per_gpu", offsetof(mt_iteration, tflops)},
        {MT_IT_ENERGY, "energy_j_per_gpu", offsetof(mt_iteration, energy)},
        {MT_IT_POWER, "power_w_per_gpu", offsetof(mt_iteration, power)},
        {MT_IT_LR, "learning_rate", offsetof(mt_iteration, lr)},
        {MT_IT_LOSS_SCALE, "loss_scale", offsetof(mt_iteration, loss_scale)},
        {MT_IT_GRAD_NORM, "grad_norm", offsetof(mt_iteration, grad_norm)},
        {MT_IT_NUM_ZEROS, "num_zeros", offsetof(mt_iteration, num_zeros)},
        {MT_IT_PARAMS_NORM, "params_norm", offsetof(mt_iteration, params_norm)},
        {MT_IT_MAX_LOGIT, "max_attention_logit", offsetof(mt_iteration, max_attention_logit)},
        {MT_IT_STEP_TIME, "step_time_s", offsetof(mt_iteration, step_time_s)},
    };
    static const struct {
        uint32_t bit;
        const char *name;
        size_t off;
    } ints[] = {
        {MT_IT_TOTAL, "total", offsetof(mt_iteration, total)},
        {MT_IT_CONSUMED, "consumed_samples", offsetof(mt_iteration, consumed_samples)},
        {MT_IT_SKIPPED_SAMPLES, "skipped_samples", offsetof(mt_iteration, skipped_samples)},
        {MT_IT_GBS, "global_batch_size", offsetof(mt_iteration, global_batch)},
        {MT_IT_SKIPPED, "skipped_iterations", offsetof(mt_iteration, skipped)},
        {MT_IT_NAN, "nan_iterations", offsetof(mt_iteration, nan_count)},
    };
    size_t i;
    int j;
    fprintf(out, "{\"iteration\":%lld", (long long)it->iteration);
    for (i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (it->has & ints[i].bit)
            fprintf(out, ",\"%s\":%lld", ints[i].name,
                    (long long)*(const int64_t *)((const char *)it + ints[i].off));
    for (i = 0; i < sizeof dbl / sizeof dbl[0]; i++)
        if (it->has & dbl[i].bit) {
            fprintf(out, ",\"%s\":", dbl[i].name);
            json_num(out, *(const double *)((const char *)it + dbl[i].off));
        }
    if (it->has & MT_IT_STEP_TIME && !isnan(it->step_tflops)) {
        fputs(",\"step_tflops_per_gpu\":", out);
        json_num(out, it->step_tflops);
    }
    fputs(",\"losses\":{", out);
    for (j = 0; j < it->n_losses; j++) {
        if (j)
            fputc(',', out);
        json_str(out, it->loss_key[j]);
        fputc(':', out);
        json_num(out, it->loss[j]);
    }
    fputc('}', out);
    if (it->rank >= 0)
        fprintf(out, ",\"rank\":%d", it->rank);
    fprintf(out, ",\"line\":%llu", (unsigned long long)it->line);
    if (it->has & MT_IT_STEP_LINE_ONLY)
        fputs(",\"step_line_only\":true", out);
    if (it->has & MT_IT_WRAPPED)
        fputs(",\"wrapped\":true", out);
    if (it->has & MT_IT_GLUED)
        fputs(",\"glued\":true", out);
    if (!(it->has & MT_IT_COMPLETE))
        fputs(",\"incomplete\":true", out);
    fputc('}', out);
}

static void json_bytes(FILE *out, const char *name, int64_t v)
{
    if (v >= 0)
        fprintf(out, ",\"%s\":%lld", name, (long long)v);
}

static void print_json(const mt_logparse *p, FILE *out)
{
    const mt_logparse_counts *c = &p->counts;
    const char *k, *v;
    size_t i;
    int first = 1;
    fprintf(out,
            "{\"bytes\":%llu,\"lines\":%llu,\"truncated_lines\":%llu,\"garbage_lines\":%llu,"
            "\"wrapped_lines\":%llu,\"glued_lines\":%llu,\"iterations_dropped\":%llu,"
            "\"events_dropped\":%llu",
            (unsigned long long)c->bytes, (unsigned long long)c->lines,
            (unsigned long long)c->truncated_lines, (unsigned long long)c->garbage_lines,
            (unsigned long long)c->wrapped_lines, (unsigned long long)c->glued_lines,
            (unsigned long long)c->iterations_dropped, (unsigned long long)c->events_dropped);
    fputs(",\"world\":", out);
    if (p->have_world)
        fprintf(out, "{\"world\":%d,\"dp\":%d,\"cp\":%d,\"tp\":%d,\"pp\":%d}", p->world.world,
                p->world.dp, p->world.cp, p->world.tp, p->world.pp);
    else
        fputs("null", out);
    fputs(",\"theoretical_memory_mb\":", out);
    if (p->have_theo) {
        fputs("{\"weight_and_optimizer\":", out);
        json_num(out, p->theo_w);
        fputs(",\"activation\":", out);
        json_num(out, p->theo_a);
        fputs(",\"total\":", out);
        json_num(out, p->theo_t);
        fputc('}', out);
    } else {
        fputs("null", out);
    }
    fputs(",\"iterations\":[", out);
    for (i = 0; i < p->nrec; i++) {
        mt_iteration it;
        load_iteration(p, &p->rec[i], &it);
        if (i)
            fputc(',', out);
        json_iteration(out, &it);
    }
    fputs("],\"memory\":[", out);
    for (i = 0; i < p->nmem; i++) {
        const mt_rank_memory *m = &p->mem[i];
        fprintf(out, "%s{\"rank\":%d,\"unit\":\"%s\"", i ? "," : "", m->rank,
                m->gigabytes ? "GB" : "MB");
        if (m->after_iteration >= 0)
            fprintf(out, ",\"after_iteration\":%lld", (long long)m->after_iteration);
        json_bytes(out, "allocated_bytes", m->allocated);
        json_bytes(out, "max_allocated_bytes", m->max_allocated);
        json_bytes(out, "reserved_bytes", m->reserved);
        json_bytes(out, "max_reserved_bytes", m->max_reserved);
        json_bytes(out, "active_bytes", m->active);
        json_bytes(out, "max_active_bytes", m->max_active);
        json_bytes(out, "inactive_bytes", m->inactive);
        json_bytes(out, "max_inactive_bytes", m->max_inactive);
        json_bytes(out, "alloc_retries", m->alloc_retries);
        json_bytes(out, "alloc_count", m->alloc_count);
        fputc('}', out);
    }
    fputs("],\"arguments\":{", out);
    for (i = 0; mt_kv_entry(p->args, i, &k, &v) == 0; i++) {
        if (i)
            fputc(',', out);
        json_str(out, k);
        fputc(':', out);
        json_str(out, v);
    }
    fputs("},\"event_counts\":{", out);
    for (i = 0; i < MT_LOGEV_KINDS; i++)
        if (p->kind_count[i]) {
            fprintf(out, "%s\"%s\":%llu", first ? "" : ",",
                    mt_logevent_kind_name((mt_logevent_kind)i),
                    (unsigned long long)p->kind_count[i]);
            first = 0;
        }
    fputs("},\"events\":[", out);
    for (i = 0; i < p->nev; i++) {
        const mt_logevent *e = &p->ev[i];
        fprintf(out, "%s{\"kind\":\"%s\",\"line\":%llu", i ? "," : "",
                mt_logevent_kind_name(e->kind), (unsigned long long)e->line);
        if (e->rank >= 0)
            fprintf(out, ",\"rank\":%d", e->rank);
        if (e->iteration >= 0)
            fprintf(out, ",\"iteration\":%lld", (long long)e->iteration);
        if (!isnan(e->value)) {
            fputs(",\"value\":", out);
            json_num(out, e->value);
        }
        if (e->flags & MT_LOGEV_F_DISPATCHER)
            fputs(",\"dispatcher\":true", out);
        fputs(",\"text\":", out);
        json_str(out, e->text);
        fputc('}', out);
    }
    fputs("]}\n", out);
}

static void text_opt(FILE *out, int have, const char *fmt, double v, int width)
{
    if (have)
        fprintf(out, fmt, width, v);
    else
        fprintf(out, " %*s", width, "-");
}

static void text_mib(FILE *out, const char *sep, const char *name, int64_t v, int gb)
{
    if (v < 0)
        fprintf(out, "%s%s -", sep, name);
    else if (gb)
        fprintf(out, "%s%s %.3f GB", sep, name, (double)v / 1e9);
    else
        fprintf(out, "%s%s %.2f MiB", sep, name, (double)v / (1024.0 * 1024.0));
}

static void print_text(const mt_logparse *p, FILE *out)
{
    const mt_logparse_counts *c = &p->counts;
    const char *k, *v;
    size_t i;
    int j;
    fprintf(out,
            "log: %llu bytes, %llu lines (%llu truncated, %llu garbage, %llu hard-wrapped, %llu "
            "glued)\n",
            (unsigned long long)c->bytes, (unsigned long long)c->lines,
            (unsigned long long)c->truncated_lines, (unsigned long long)c->garbage_lines,
            (unsigned long long)c->wrapped_lines, (unsigned long long)c->glued_lines);
    if (p->have_world)
        fprintf(out,
                "world: %d GPUs, data-parallel %d, context-parallel %d, tensor-parallel %d, "
                "pipeline-parallel %d\n",
                p->world.world, p->world.dp, p->world.cp, p->world.tp, p->world.pp);
    fprintf(out, "iterations: %zu", p->nrec);
    if (c->iterations_dropped)
        fprintf(out, " (+%llu not kept)", (unsigned long long)c->iterations_dropped);
    fputc('\n', out);
    if (p->nrec)
        fprintf(out, "  %-17s %12s %11s %13s %9s %4s %4s %5s  losses\n", "iteration", "elapsed ms",
                "TFLOP/s/GPU", "learning rate", "grad norm", "skip", "nan", "rank");
    for (i = 0; i < p->nrec; i++) {
        mt_iteration one, *it = &one;
        char iter[48];
        load_iteration(p, &p->rec[i], &one);
        if (it->has & MT_IT_TOTAL)
            snprintf(iter, sizeof iter, "%lld/%lld", (long long)it->iteration,
                     (long long)it->total);
        else
            snprintf(iter, sizeof iter, "%lld", (long long)it->iteration);
        fprintf(out, "  %-17s", iter);
        text_opt(out, it->has & MT_IT_ELAPSED, " %*.1f", it->elapsed_ms, 12);
        text_opt(out, it->has & MT_IT_TFLOPS, " %*.1f", it->tflops, 11);
        text_opt(out, it->has & MT_IT_LR, " %*.6E", it->lr, 13);
        text_opt(out, it->has & MT_IT_GRAD_NORM, " %*.3f", it->grad_norm, 9);
        text_opt(out, it->has & MT_IT_SKIPPED, " %*.0f", (double)it->skipped, 4);
        text_opt(out, it->has & MT_IT_NAN, " %*.0f", (double)it->nan_count, 4);
        text_opt(out, it->rank >= 0, " %*.0f", it->rank, 5);
        fputs(" ", out);
        for (j = 0; j < it->n_losses; j++)
            fprintf(out, "%s %s %.6E", j ? "," : "", it->loss_key[j], it->loss[j]);
        if (it->has & MT_IT_STEP_TIME)
            fprintf(out, "%s step %.2f s", it->n_losses ? "," : "", it->step_time_s);
        if (it->has & MT_IT_STEP_LINE_ONLY)
            fputs(" (Step Time line only)", out);
        fputc('\n', out);
    }
    if (p->nmem) {
        fprintf(out, "memory: %zu ranks\n", p->nmem);
        for (i = 0; i < p->nmem; i++) {
            const mt_rank_memory *m = &p->mem[i];
            fprintf(out, "  rank %d", m->rank);
            if (m->after_iteration >= 0)
                fprintf(out, " (after %lld iterations)", (long long)m->after_iteration);
            fputc(':', out);
            text_mib(out, " ", "allocated", m->allocated, m->gigabytes);
            text_mib(out, ", ", "max allocated", m->max_allocated, m->gigabytes);
            text_mib(out, ", ", "reserved", m->reserved, m->gigabytes);
            text_mib(out, ", ", "max reserved", m->max_reserved, m->gigabytes);
            if (m->max_active >= 0)
                text_mib(out, ", ", "max active", m->max_active, m->gigabytes);
            if (m->max_inactive >= 0)
                text_mib(out, ", ", "max inactive", m->max_inactive, m->gigabytes);
            if (m->alloc_retries >= 0)
                fprintf(out, ", alloc retries %lld", (long long)m->alloc_retries);
            fputc('\n', out);
        }
    }
    if (p->have_theo)
        fprintf(out,
                "theoretical memory (MB): weight and optimizer %.2f, activation %.2f, total %.2f\n",
                p->theo_w, p->theo_a, p->theo_t);
    fprintf(out, "arguments: %zu\n", mt_kv_count(p->args));
    for (i = 0; mt_kv_entry(p->args, i, &k, &v) == 0; i++)
        fprintf(out, "  %s = %s\n", k, v);
    fprintf(out, "events: %zu", p->nev);
    if (c->events_dropped)
        fprintf(out, " (+%llu not kept)", (unsigned long long)c->events_dropped);
    fputc('\n', out);
    for (i = 0; i < p->nev; i++) {
        const mt_logevent *e = &p->ev[i];
        fprintf(out, "  line %llu", (unsigned long long)e->line);
        if (e->rank >= 0)
            fprintf(out, " rank %d", e->rank);
        fprintf(out, " %s: %s\n", mt_logevent_kind_name(e->kind), e->text);
    }
}

int mt_logparse_print(const mt_logparse *p, FILE *out, int json)
{
    if (json)
        print_json(p, out);
    else
        print_text(p, out);
    return ferror(out) || fflush(out) ? -EIO : 0;
}
