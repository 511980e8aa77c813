/*
 * result_json.c - a finished run (mt_store_result: run, per-step samples
 * with their losses, per-GPU memory peaks) as JSON and back, so a worker
 * can ship what it measured and the coordinator store it with
 * mt_store_put_result.  Part of the message layer (proto.h, PROTOCOL.md
 * "result").
 *
 * Exactness: a finite double is written with the fewest of 15, 16 or 17
 * significant digits that read back to the same bits (cJSON's own printer
 * accepts 15 digits when they come within an epsilon, which is not exact);
 * NAN, +inf and -inf are the strings "nan", "inf", "-inf" as the store
 * writes losses; int64 values are exact integers (a decimal string beyond
 * +-2^53).  The exact numbers are raw cJSON items on the sending side and
 * ordinary numbers once parsed; the readers here accept both.
 *
 * Its interface: workers/proto.h.
 */
#include "proto.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TWO53 9007199254740992.0

#define fail mt_proto_fail /* proto.h */

/* ---- writing ----------------------------------------------------------------------- */

static cJSON *dbl_json(double v)
{
    char buf[40];
    int prec;
    if (isnan(v))
        return cJSON_CreateString("nan");
    if (isinf(v))
        return cJSON_CreateString(v > 0 ? "inf" : "-inf");
    for (prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    /* a locale with a decimal comma must not leak into JSON */
    for (char *c = buf; *c; c++)
        if (*c == ',')
            *c = '.';
    return cJSON_CreateRaw(buf);
}

static cJSON *i64_json(int64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", (long long)v);
    if (v > ((int64_t)1 << 53) || v < -((int64_t)1 << 53))
        return cJSON_CreateString(buf);
    return cJSON_CreateRaw(buf);
}

static void put(cJSON *o, const char *k, cJSON *v, int *ok)
{
    if (!v || !cJSON_AddItemToObject(o, k, v)) {
        cJSON_Delete(v);
        *ok = 0;
    }
}

static cJSON *str_or_null(const char *s)
{
    return s ? cJSON_CreateString(s) : cJSON_CreateNull();
}

cJSON *mt_proto_run_json(const mt_store_run *r)
{
    cJSON *o;
    int ok = 1;
    if (!r || !(o = cJSON_CreateObject()))
        return NULL;
    put(o, "config_id", str_or_null(r->config_id), &ok);
    put(o, "config_canonical", str_or_null(r->config_canonical), &ok);
    put(o, "kind", str_or_null(r->kind), &ok);
    put(o, "replicate", i64_json(r->replicate), &ok);
    put(o, "retry", i64_json(r->retry), &ok);
    put(o, "outcome", str_or_null(r->outcome), &ok);
    put(o, "evidence", str_or_null(r->evidence), &ok);
    put(o, "worker", str_or_null(r->worker), &ok);
    put(o, "fingerprint", str_or_null(r->fingerprint), &ok);
    put(o, "started", dbl_json(r->started), &ok);
    put(o, "ended", dbl_json(r->ended), &ok);
    put(o, "wall_s", dbl_json(r->wall_s), &ok);
    put(o, "sim_s", dbl_json(r->sim_s), &ok);
    put(o, "gpu_hours", dbl_json(r->gpu_hours), &ok);
    put(o, "log_path", str_or_null(r->log_path), &ok);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

cJSON *mt_proto_samples_json(const mt_store_sample *v, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    size_t i, k;
    int ok = a != NULL;
    for (i = 0; ok && i < n; i++) {
        cJSON *s = cJSON_CreateObject(), *l = cJSON_CreateObject();
        if (!s || !l || !cJSON_AddItemToArray(a, s)) {
            cJSON_Delete(s);
            cJSON_Delete(l);
            ok = 0;
            break;
        }
        put(s, "iteration", i64_json(v[i].iteration), &ok);
        put(s, "elapsed_ms", dbl_json(v[i].elapsed_ms), &ok);
        put(s, "tflops", dbl_json(v[i].tflops), &ok);
        put(s, "grad_norm", dbl_json(v[i].grad_norm), &ok);
        put(s, "skipped", i64_json(v[i].skipped), &ok);
        put(s, "nan", i64_json(v[i].nan), &ok);
        for (k = 0; ok && k < v[i].n_losses; k++)
            put(l, v[i].losses[k].key ? v[i].losses[k].key : "", dbl_json(v[i].losses[k].value),
                &ok);
        put(s, "losses", l, &ok);
    }
    if (!ok) {
        cJSON_Delete(a);
        return NULL;
    }
    return a;
}

cJSON *mt_proto_gpus_json(const mt_store_gpu_mem *v, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    size_t i;
    int ok = a != NULL;
    for (i = 0; ok && i < n; i++) {
        cJSON *g = cJSON_CreateObject();
        if (!g || !cJSON_AddItemToArray(a, g)) {
            cJSON_Delete(g);
            ok = 0;
            break;
        }
        put(g, "rank", i64_json(v[i].rank), &ok);
        put(g, "host", str_or_null(v[i].host), &ok);
        put(g, "gpu", i64_json(v[i].gpu), &ok);
        put(g, "peak_bytes", i64_json(v[i].peak_bytes), &ok);
        put(g, "alloc_bytes", i64_json(v[i].alloc_bytes), &ok);
        put(g, "source", str_or_null(v[i].source), &ok);
    }
    if (!ok) {
        cJSON_Delete(a);
        return NULL;
    }
    return a;
}

/* ---- reading ----------------------------------------------------------------------- */

/* The number a value holds: a number, a raw number (sending side), or, when
 * special, one of "nan", "inf", "-inf".  0 or -1. */
static int read_dbl(const cJSON *v, int special, double *out)
{
    if (cJSON_IsNumber(v)) {
        *out = v->valuedouble;
        return isfinite(*out) ? 0 : -1;
    }
    if (cJSON_IsRaw(v) && v->valuestring) {
        char *end;
        errno = 0;
        *out = strtod(v->valuestring, &end);
        return *end == '\0' && end != v->valuestring && isfinite(*out) ? 0 : -1;
    }
    if (special && cJSON_IsString(v)) {
        if (!strcmp(v->valuestring, "nan")) {
            *out = NAN;
            return 0;
        }
        if (!strcmp(v->valuestring, "inf")) {
            *out = INFINITY;
            return 0;
        }
        if (!strcmp(v->valuestring, "-inf")) {
            *out = -INFINITY;
            return 0;
        }
    }
    return -1;
}

/* An exact integer in [lo, hi]: a number within +-2^53, a raw integer, or
 * a decimal string (beyond 2^53). */
static int read_i64(const cJSON *v, long long lo, long long hi, long long *out)
{
    const char *s = NULL;
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (!isfinite(d) || d != floor(d) || d > TWO53 || d < -TWO53)
            return -1;
        *out = (long long)d;
        return *out >= lo && *out <= hi ? 0 : -1;
    }
    if (cJSON_IsRaw(v) || cJSON_IsString(v))
        s = v->valuestring;
    if (s) {
        char *end;
        long long x;
        const char *p = s[0] == '-' ? s + 1 : s;
        if (*p < '0' || *p > '9')
            return -1;
        errno = 0;
        x = strtoll(s, &end, 10);
        if (errno || *end || x < lo || x > hi)
            return -1;
        *out = x;
        return 0;
    }
    return -1;
}

static int str_field(const cJSON *o, const char *k, int nullable, const char **out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (cJSON_IsString(v)) {
        *out = v->valuestring;
        return 0;
    }
    if (nullable && cJSON_IsNull(v)) {
        *out = NULL;
        return 0;
    }
    return -1;
}

static int hex16(const char *s)
{
    size_t i;
    for (i = 0; i < 16; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return s[16] == '\0';
}

/* A map key, printable for an error message. */
static const char *keyshow(const char *k, char *buf, size_t cap)
{
    size_t i, o = 0;
    for (i = 0; k && k[i] && o + 5 < cap && i < 40; i++)
        buf[o++] = (unsigned char)k[i] >= 0x20 && (unsigned char)k[i] < 0x7f ? k[i] : '?';
    if (k && k[i] && o + 4 < cap) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
    return buf;
}

void mt_proto_result_release(mt_store_result *r)
{
    size_t i;
    if (!r)
        return;
    for (i = 0; r->samples && i < r->n_samples; i++)
        free((void *)r->samples[i].losses);
    free((void *)r->samples);
    free((void *)r->gpus);
    memset(r, 0, sizeof *r);
}

/* The run object into r (strings borrowed from run); 0 or fail()'s code. */
static int read_run(const cJSON *run, mt_store_run *r, char *err, size_t errlen)
{
    static const char *const dbl_keys[] = {"started", "ended", "wall_s", "sim_s", "gpu_hours"};
    double *dst[5];
    long long x;
    size_t i;
    if (str_field(run, "config_id", 0, &r->config_id) || !hex16(r->config_id))
        return fail(err, errlen, -EINVAL, "field \"run.config_id\": expected 16 hex digits");
    if (str_field(run, "config_canonical", 1, &r->config_canonical))
        return fail(err, errlen, -EINVAL,
                    "field \"run.config_canonical\": expected a string or null");
    if (str_field(run, "kind", 0, &r->kind) || !r->kind[0])
        return fail(err, errlen, -EINVAL, "field \"run.kind\": expected a non-empty string");
    if (read_i64(cJSON_GetObjectItemCaseSensitive(run, "replicate"), 0, INT_MAX, &x))
        return fail(err, errlen, -EINVAL, "field \"run.replicate\": expected an integer >= 0");
    r->replicate = (int)x;
    if (read_i64(cJSON_GetObjectItemCaseSensitive(run, "retry"), 0, INT_MAX, &x))
        return fail(err, errlen, -EINVAL, "field \"run.retry\": expected an integer >= 0");
    r->retry = (int)x;
    if (str_field(run, "outcome", 0, &r->outcome) || !r->outcome[0])
        return fail(err, errlen, -EINVAL, "field \"run.outcome\": expected a non-empty string");
    if (str_field(run, "evidence", 1, &r->evidence))
        return fail(err, errlen, -EINVAL, "field \"run.evidence\": expected a string or null");
    if (str_field(run, "worker", 1, &r->worker))
        return fail(err, errlen, -EINVAL, "field \"run.worker\": expected a string or null");
    if (str_field(run, "fingerprint", 1, &r->fingerprint))
        return fail(err, errlen, -EINVAL, "field \"run.fingerprint\": expected a string or null");
    if (str_field(run, "log_path", 1, &r->log_path))
        return fail(err, errlen, -EINVAL, "field \"run.log_path\": expected a string or null");
    dst[0] = &r->started, dst[1] = &r->ended, dst[2] = &r->wall_s, dst[3] = &r->sim_s,
    dst[4] = &r->gpu_hours;
    for (i = 0; i < 5; i++)
        if (read_dbl(cJSON_GetObjectItemCaseSensitive(run, dbl_keys[i]), 1, dst[i]))
            return fail(err, errlen, -EINVAL,
                        "field \"run.%s\": expected a number or \"nan\", \"inf\", \"-inf\"",
                        dbl_keys[i]);
    r->id = -1;
    return 0;
}

/* Sample i's losses object l into s->losses (allocated, s owns it, set
 * before it is filled so that a failure releases it); 0 or fail()'s code. */
static int read_losses(const cJSON *l, size_t i, mt_store_sample *s, char *err, size_t errlen)
{
    const cJSON *le;
    mt_store_loss *lv;
    size_t k, nl;
    char kb[64];
    nl = (size_t)cJSON_GetArraySize(l);
    if (nl && !(lv = calloc(nl, sizeof *lv)))
        return fail(err, errlen, -ENOMEM, "samples: out of memory");
    if (!nl)
        lv = NULL;
    s->losses = lv;
    k = 0;
    cJSON_ArrayForEach(le, l)
    {
        if (k >= nl)
            break;
        lv[k].key = le->string ? le->string : "";
        if (read_dbl(le, 1, &lv[k].value))
            return fail(err, errlen, -EINVAL,
                        "field \"samples[%zu].losses.%s\": expected a number or \"nan\", "
                        "\"inf\", \"-inf\"",
                        i, keyshow(le->string, kb, sizeof kb));
        k++;
    }
    s->n_losses = k;
    return 0;
}

/* Sample object e, index i, into s; 0 or fail()'s code. */
static int read_sample(const cJSON *e, size_t i, mt_store_sample *s, char *err, size_t errlen)
{
    static const char *const sd[] = {"elapsed_ms", "tflops", "grad_norm"};
    double *sdst[3];
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(e, "losses");
    long long x;
    size_t k;
    if (!cJSON_IsObject(e))
        return fail(err, errlen, -EINVAL, "field \"samples[%zu]\": expected an object", i);
    if (read_i64(cJSON_GetObjectItemCaseSensitive(e, "iteration"), LONG_MIN, LONG_MAX, &x))
        return fail(err, errlen, -EINVAL, "field \"samples[%zu].iteration\": expected an integer",
                    i);
    s->iteration = (long)x;
    sdst[0] = &s->elapsed_ms, sdst[1] = &s->tflops, sdst[2] = &s->grad_norm;
    for (k = 0; k < 3; k++)
        if (read_dbl(cJSON_GetObjectItemCaseSensitive(e, sd[k]), 1, sdst[k]))
            return fail(err, errlen, -EINVAL,
                        "field \"samples[%zu].%s\": expected a number or \"nan\", \"inf\", "
                        "\"-inf\"",
                        i, sd[k]);
    if (read_i64(cJSON_GetObjectItemCaseSensitive(e, "skipped"), 0, LONG_MAX, &x))
        return fail(err, errlen, -EINVAL,
                    "field \"samples[%zu].skipped\": expected an integer >= 0", i);
    s->skipped = (long)x;
    if (read_i64(cJSON_GetObjectItemCaseSensitive(e, "nan"), 0, LONG_MAX, &x))
        return fail(err, errlen, -EINVAL, "field \"samples[%zu].nan\": expected an integer >= 0",
                    i);
    s->nan = (long)x;
    if (!cJSON_IsObject(l))
        return fail(err, errlen, -EINVAL, "field \"samples[%zu].losses\": expected an object", i);
    return read_losses(l, i, s, err, errlen);
}

/* GPU row object e, index i, into g; 0 or fail()'s code. */
static int read_gpu(const cJSON *e, size_t i, mt_store_gpu_mem *g, char *err, size_t errlen)
{
    long long x;
    if (!cJSON_IsObject(e))
        return fail(err, errlen, -EINVAL, "field \"gpus[%zu]\": expected an object", i);
    if (read_i64(cJSON_GetObjectItemCaseSensitive(e, "rank"), -1, INT_MAX, &x))
        return fail(err, errlen, -EINVAL, "field \"gpus[%zu].rank\": expected an integer >= -1", i);
    g->rank = (int)x;
    if (read_i64(cJSON_GetObjectItemCaseSensitive(e, "gpu"), -1, INT_MAX, &x))
        return fail(err, errlen, -EINVAL, "field \"gpus[%zu].gpu\": expected an integer >= -1", i);
    g->gpu = (int)x;
    if (read_i64(cJSON_GetObjectItemCaseSensitive(e, "peak_bytes"), LLONG_MIN, LLONG_MAX, &x))
        return fail(err, errlen, -EINVAL, "field \"gpus[%zu].peak_bytes\": expected an integer", i);
    g->peak_bytes = x;
    if (read_i64(cJSON_GetObjectItemCaseSensitive(e, "alloc_bytes"), LLONG_MIN, LLONG_MAX, &x))
        return fail(err, errlen, -EINVAL, "field \"gpus[%zu].alloc_bytes\": expected an integer",
                    i);
    g->alloc_bytes = x;
    if (str_field(e, "host", 1, &g->host))
        return fail(err, errlen, -EINVAL, "field \"gpus[%zu].host\": expected a string or null", i);
    if (str_field(e, "source", 1, &g->source))
        return fail(err, errlen, -EINVAL, "field \"gpus[%zu].source\": expected a string or null",
                    i);
    return 0;
}

int mt_proto_result_to_store(const cJSON *run, const cJSON *samples, const cJSON *gpus,
                             mt_store_result *out, char *err, size_t errlen)
{
    mt_store_sample *sv = NULL;
    mt_store_gpu_mem *gv = NULL;
    const cJSON *e;
    size_t i, n;
    int rc;

    memset(out, 0, sizeof *out);
    if (!cJSON_IsObject(run))
        return fail(err, errlen, -EINVAL, "field \"run\": expected an object");
    if (!cJSON_IsArray(samples))
        return fail(err, errlen, -EINVAL, "field \"samples\": expected an array");
    if (!cJSON_IsArray(gpus))
        return fail(err, errlen, -EINVAL, "field \"gpus\": expected an array");
    if ((rc = read_run(run, &out->run, err, errlen)))
        return rc;

    /* the samples */
    n = (size_t)cJSON_GetArraySize(samples);
    if (n && !(sv = calloc(n, sizeof *sv)))
        return fail(err, errlen, -ENOMEM, "samples: out of memory");
    out->samples = sv;
    i = 0;
    cJSON_ArrayForEach(e, samples)
    {
        if (i >= n)
            break;
        out->n_samples = i + 1;
        if ((rc = read_sample(e, i, &sv[i], err, errlen)))
            goto bad;
        i++;
    }
    out->n_samples = i;

    /* the GPU rows */
    n = (size_t)cJSON_GetArraySize(gpus);
    if (n && !(gv = calloc(n, sizeof *gv))) {
        rc = fail(err, errlen, -ENOMEM, "gpus: out of memory");
        goto bad;
    }
    out->gpus = gv;
    i = 0;
    cJSON_ArrayForEach(e, gpus)
    {
        if (i >= n)
            break;
        if ((rc = read_gpu(e, i, &gv[i], err, errlen)))
            goto bad;
        i++;
    }
    out->n_gpus = i;
    return 0;
bad:
    mt_proto_result_release(out);
    return rc;
}
