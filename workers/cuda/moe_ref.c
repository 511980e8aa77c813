/*
 * moe_ref.c - the CPU reference of one MoE layer and the number formats the
 * GPU stores (see moe_ref.h).
 */
#include "moe_ref.h"
#include "moe_route.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- number formats ------------------------------------------------------------ */

static uint32_t f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float f32_value(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

uint16_t mt_bf16_bits(float x)
{
    uint32_t u = f32_bits(x);
    if (isnan(x))
        return (uint16_t)((u >> 16) | 0x40); /* quiet */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float mt_bf16_value(uint16_t b)
{
    return f32_value((uint32_t)b << 16);
}

float mt_bf16_round(float x)
{
    return mt_bf16_value(mt_bf16_bits(x));
}

/*
 * e4m3: bias 7, 3 mantissa bits, subnormals m * 2^-9.  The positive codes are
 * in value order, so rounding is "nearest multiple of the local ulp", and a
 * carry out of the mantissa lands on the next exponent's code by itself.
 */
uint8_t mt_e4m3_bits(float x)
{
    uint8_t sign = signbit(x) ? 0x80 : 0;
    float a = fabsf(x);
    int e;
    unsigned code;
    if (isnan(x))
        return 0x7f;
    if (a >= MT_MOE_E4M3_MAX) /* saturate, infinities included */
        return (uint8_t)(sign | 0x7e);
    if (a < 0x1p-6f) { /* subnormal: multiples of 2^-9 (8 of them reach 2^-6) */
        code = (unsigned)rintf(a * 0x1p9f);
    } else {
        float q;
        (void)frexpf(a, &e);         /* a = f * 2^e, f in [0.5, 1): exponent e - 1 */
        e -= 1;                      /* -6 .. 8 */
        q = rintf(ldexpf(a, 3 - e)); /* 8 .. 16 */
        code = (unsigned)((e + 7) << 3) + (unsigned)q - 8u;
    }
    if (code > 0x7e)
        code = 0x7e;
    return (uint8_t)(sign | code);
}

float mt_e4m3_value(uint8_t b)
{
    int ex = (b >> 3) & 0xf, m = b & 7;
    float v;
    if ((b & 0x7f) == 0x7f)
        return NAN;
    v = ex ? ldexpf(1.0f + (float)m / 8.0f, ex - 7) : ldexpf((float)m, -9);
    return b & 0x80 ? -v : v;
}

float mt_e4m3_round(float x)
{
    return mt_e4m3_value(mt_e4m3_bits(x));
}

float mt_moe_fp8_scale(float amax)
{
    if (!(amax > 0.0f) || isinf(amax))
        return 1.0f;
    return MT_MOE_E4M3_MAX / amax;
}

double mt_moe_rel_err(const float *got, const float *ref, size_t n)
{
    double md = 0, mr = 0;
    size_t i;
    for (i = 0; i < n; i++) {
        double d;
        if (!isfinite(ref[i]))
            continue;
        if (!isfinite(got[i]))
            return INFINITY;
        d = fabs((double)got[i] - (double)ref[i]);
        if (d > md)
            md = d;
        if (fabs((double)ref[i]) > mr)
            mr = fabs((double)ref[i]);
    }
    if (md == 0)
        return 0;
    return mr > 0 ? md / mr : INFINITY;
}

/* ---- the layer --------------------------------------------------------------------- */

typedef struct ref {
    const mt_moe_ref_cfg *c;
    int T, H, F, E, K, L, G; /* L local experts per rank, G amax groups */
    int64_t N;               /* rows: T*K */
} ref;

/* storage rounding of a bf16 tensor, and of an fp32 one */
static double rb(const ref *r, double v)
{
    return r->c->prec == MT_MOE_EXACT ? v : (double)mt_bf16_round((float)v);
}

static double rf(const ref *r, double v)
{
    return r->c->prec == MT_MOE_EXACT ? v : (double)(float)v;
}

/* the fp8 scaling group of a global expert: (owner rank, chunk) */
static int group_of(const ref *r, int e)
{
    int owner = e / r->L, le = e % r->L, c;
    for (c = 0; c + 1 < r->c->chunks && le >= mt_moe_chunk_begin(r->L, r->c->chunks, c + 1); c++)
        ;
    return owner * r->c->chunks + c;
}

static double silu(double a)
{
    return a / (1.0 + exp(-a));
}

/* Quantizes v (n values) in place as the GPU's quantize kernel does:
 * q = e4m3(v * scale) in float, and stores q * inv (the dequantized value
 * the GEMM effectively multiplies) ... kept apart: q in place, inv out. */
static void quantize(double *v, size_t n, float scale)
{
    size_t i;
    for (i = 0; i < n; i++)
        v[i] = (double)mt_e4m3_round((float)v[i] * scale);
}

typedef struct bufs {
    double *logits, *p, *g, *h, *act, *o, *y, *dg, *dlog, *dxacc;
    double *xq, *actq, *w1q, *w2q; /* FP8 only: quantized copies */
    float *inv_x, *inv_act, *inv_w1, *inv_w2;
} bufs;

static void free_bufs(bufs *b)
{
    free(b->logits);
    free(b->p);
    free(b->g);
    free(b->h);
    free(b->act);
    free(b->o);
    free(b->y);
    free(b->dg);
    free(b->dlog);
    free(b->dxacc);
    free(b->xq);
    free(b->actq);
    free(b->w1q);
    free(b->w2q);
    free(b->inv_x);
    free(b->inv_act);
    free(b->inv_w1);
    free(b->inv_w2);
}

static int validate(const mt_moe_ref_cfg *c, const mt_moe_ref_io *io)
{
    int64_t f;
    int t, j, i;
    if (!c || !io || !io->x || !io->wr || !io->w1 || !io->w2 || !io->dy || !io->ids)
        return -EINVAL;
    if (c->hidden < 1 || c->ffn < 1 || c->ep < 1 || c->tokens % c->ep ||
        mt_moe_route_sizes_ok(c->tokens, c->topk, c->experts, c->ep) || c->chunks < 1 ||
        c->chunks > c->experts / c->ep ||
        (c->prec != MT_MOE_EXACT && c->prec != MT_MOE_BF16 && c->prec != MT_MOE_FP8))
        return -EINVAL;
    for (t = 0; t < c->tokens; t++)
        for (j = 0; j < c->topk; j++) {
            f = (int64_t)t * c->topk + j;
            if (io->ids[f] < 0 || io->ids[f] >= c->experts)
                return -EINVAL;
            for (i = 0; i < j; i++)
                if (io->ids[(int64_t)t * c->topk + i] == io->ids[f])
                    return -EINVAL;
        }
    return 0;
}

static void router_forward(const ref *r, const mt_moe_ref_io *io, bufs *b)
{
    int t, e, j, hh;
    for (t = 0; t < r->T; t++) {
        double m = -INFINITY, s = 0;
        for (e = 0; e < r->E; e++) {
            double acc = 0;
            for (hh = 0; hh < r->H; hh++)
                acc += (double)io->x[(int64_t)t * r->H + hh] * io->wr[(int64_t)e * r->H + hh];
            b->logits[(int64_t)t * r->E + e] = rf(r, acc);
            if (rf(r, acc) > m)
                m = rf(r, acc);
        }
        for (e = 0; e < r->E; e++)
            s += exp(b->logits[(int64_t)t * r->E + e] - m);
        for (e = 0; e < r->E; e++)
            b->p[(int64_t)t * r->E + e] = rf(r, exp(b->logits[(int64_t)t * r->E + e] - m) / s);
        for (j = 0; j < r->K; j++)
            b->g[(int64_t)t * r->K + j] = b->p[(int64_t)t * r->E + io->ids[(int64_t)t * r->K + j]];
    }
}

/* FP8: amax per group of the expert inputs and weights, then quantized
 * copies (rows in flat order; weights per expert). */
static void fp8_inputs(const ref *r, const mt_moe_ref_io *io, bufs *b)
{
    int64_t f;
    int e, G = r->G, g;
    float *amx = calloc((size_t)G, sizeof *amx), *amw1 = calloc((size_t)G, sizeof *amw1),
          *amw2 = calloc((size_t)G, sizeof *amw2);
    size_t w1n = (size_t)2 * r->F * r->H, w2n = (size_t)r->H * r->F, i;
    if (!amx || !amw1 || !amw2)
        goto out;
    for (f = 0; f < r->N; f++) {
        const float *xr = io->x + (f / r->K) * r->H;
        g = group_of(r, io->ids[f]);
        for (i = 0; i < (size_t)r->H; i++)
            if (fabsf(xr[i]) > amx[g] || isnan(xr[i]))
                amx[g] = fabsf(xr[i]);
    }
    for (e = 0; e < r->E; e++) {
        g = group_of(r, e);
        for (i = 0; i < w1n; i++)
            if (fabsf(io->w1[e * w1n + i]) > amw1[g])
                amw1[g] = fabsf(io->w1[e * w1n + i]);
        for (i = 0; i < w2n; i++)
            if (fabsf(io->w2[e * w2n + i]) > amw2[g])
                amw2[g] = fabsf(io->w2[e * w2n + i]);
    }
    for (g = 0; g < G; g++) {
        b->inv_x[g] = 1.0f / mt_moe_fp8_scale(amx[g]);
        b->inv_w1[g] = 1.0f / mt_moe_fp8_scale(amw1[g]);
        b->inv_w2[g] = 1.0f / mt_moe_fp8_scale(amw2[g]);
    }
    for (f = 0; f < r->N; f++) {
        g = group_of(r, io->ids[f]);
        for (i = 0; i < (size_t)r->H; i++)
            b->xq[f * r->H + (int64_t)i] = io->x[(f / r->K) * r->H + (int64_t)i];
        quantize(b->xq + f * r->H, (size_t)r->H, mt_moe_fp8_scale(amx[g]));
    }
    for (e = 0; e < r->E; e++) {
        g = group_of(r, e);
        for (i = 0; i < w1n; i++)
            b->w1q[e * w1n + i] = io->w1[e * w1n + i];
        for (i = 0; i < w2n; i++)
            b->w2q[e * w2n + i] = io->w2[e * w2n + i];
        quantize(b->w1q + e * w1n, w1n, mt_moe_fp8_scale(amw1[g]));
        quantize(b->w2q + e * w2n, w2n, mt_moe_fp8_scale(amw2[g]));
    }
out:
    free(amx);
    free(amw1);
    free(amw2);
}

static void fp8_act(const ref *r, const mt_moe_ref_io *io, bufs *b)
{
    float *am = calloc((size_t)r->G, sizeof *am);
    int64_t f;
    int g, i;
    if (!am)
        return;
    for (f = 0; f < r->N; f++) {
        g = group_of(r, io->ids[f]);
        for (i = 0; i < r->F; i++) {
            float v = fabsf((float)b->act[f * r->F + i]);
            if (v > am[g] || isnan(v))
                am[g] = v;
        }
    }
    for (g = 0; g < r->G; g++)
        b->inv_act[g] = 1.0f / mt_moe_fp8_scale(am[g]);
    for (f = 0; f < r->N; f++) {
        g = group_of(r, io->ids[f]);
        for (i = 0; i < r->F; i++)
            b->actq[f * r->F + i] = b->act[f * r->F + i];
        quantize(b->actq + f * r->F, (size_t)r->F, mt_moe_fp8_scale(am[g]));
    }
    free(am);
}

static void experts_forward(const ref *r, const mt_moe_ref_io *io, bufs *b)
{
    int64_t f;
    int i, hh, fp8 = r->c->prec == MT_MOE_FP8;
    size_t w1n = (size_t)2 * r->F * r->H, w2n = (size_t)r->H * r->F;
    if (fp8)
        fp8_inputs(r, io, b);
    for (f = 0; f < r->N; f++) {
        int e = io->ids[f], g = group_of(r, e);
        const float *xr = io->x + (f / r->K) * r->H;
        for (i = 0; i < 2 * r->F; i++) {
            double acc = 0;
            if (fp8) {
                const double *w = b->w1q + e * w1n + (size_t)i * r->H, *xq = b->xq + f * r->H;
                for (hh = 0; hh < r->H; hh++)
                    acc += xq[hh] * w[hh];
                acc *= (double)(b->inv_w1[g] * b->inv_x[g]);
            } else {
                const float *w = io->w1 + e * w1n + (size_t)i * r->H;
                for (hh = 0; hh < r->H; hh++)
                    acc += (double)xr[hh] * w[hh];
            }
            b->h[f * 2 * r->F + i] = rb(r, acc);
        }
        for (i = 0; i < r->F; i++) {
            const double *hr = b->h + f * 2 * r->F;
            b->act[f * r->F + i] = rb(r, silu(hr[i]) * hr[r->F + i]);
        }
    }
    if (fp8)
        fp8_act(r, io, b);
    for (f = 0; f < r->N; f++) {
        int e = io->ids[f], g = group_of(r, e);
        for (hh = 0; hh < r->H; hh++) {
            double acc = 0;
            if (fp8) {
                const double *w = b->w2q + e * w2n + (size_t)hh * r->F, *a = b->actq + f * r->F;
                for (i = 0; i < r->F; i++)
                    acc += a[i] * w[i];
                acc *= (double)(b->inv_w2[g] * b->inv_act[g]);
            } else {
                const float *w = io->w2 + e * w2n + (size_t)hh * r->F;
                for (i = 0; i < r->F; i++)
                    acc += b->act[f * r->F + i] * w[i];
            }
            b->o[f * r->H + hh] = rb(r, acc);
        }
    }
}

static void combine(const ref *r, mt_moe_ref_io *io, bufs *b)
{
    int t, j, hh;
    io->loss = 0;
    for (t = 0; t < r->T; t++)
        for (hh = 0; hh < r->H; hh++) {
            double acc = 0;
            for (j = 0; j < r->K; j++)
                acc += b->g[(int64_t)t * r->K + j] * b->o[((int64_t)t * r->K + j) * r->H + hh];
            io->loss += acc * io->dy[(int64_t)t * r->H + hh];
            b->y[(int64_t)t * r->H + hh] = rb(r, acc);
        }
}

static void backward(const ref *r, mt_moe_ref_io *io, bufs *b, double *dact, double *dh,
                     double *dw1, double *dw2, double *dwr)
{
    int64_t f;
    int t, j, e, i, hh, Tr = r->T / r->c->ep;
    size_t w1n = (size_t)2 * r->F * r->H, w2n = (size_t)r->H * r->F;
    double *dout = malloc(sizeof *dout * (size_t)r->H);
    if (!dout)
        return;
    memset(b->dxacc, 0, sizeof *b->dxacc * (size_t)r->T * r->H);
    for (f = 0; f < r->N; f++) {
        const float *dyr = io->dy + (f / r->K) * r->H;
        const float *xr = io->x + (f / r->K) * r->H;
        double dgf = 0, *ha = b->h + f * 2 * r->F;
        e = io->ids[f];
        for (hh = 0; hh < r->H; hh++) {
            dout[hh] = rb(r, b->g[f] * dyr[hh]);
            dgf += (double)dyr[hh] * b->o[f * r->H + hh];
        }
        b->dg[f] = rf(r, dgf);
        for (i = 0; i < r->F; i++) {
            const float *w = io->w2 + e * w2n;
            double acc = 0;
            for (hh = 0; hh < r->H; hh++)
                acc += dout[hh] * w[(size_t)hh * r->F + i];
            dact[i] = rb(r, acc);
        }
        for (hh = 0; hh < r->H; hh++)
            for (i = 0; i < r->F; i++)
                dw2[e * w2n + (size_t)hh * r->F + i] += dout[hh] * b->act[f * r->F + i];
        for (i = 0; i < r->F; i++) {
            double a = ha[i], bb = ha[r->F + i], s = 1.0 / (1.0 + exp(-a));
            dh[i] = rb(r, dact[i] * bb * s * (1.0 + a * (1.0 - s)));
            dh[r->F + i] = rb(r, dact[i] * a * s);
        }
        for (hh = 0; hh < r->H; hh++) {
            double acc = 0;
            for (i = 0; i < 2 * r->F; i++)
                acc += dh[i] * io->w1[e * w1n + (size_t)i * r->H + hh];
            b->dxacc[(f / r->K) * r->H + hh] += rb(r, acc);
        }
        for (i = 0; i < 2 * r->F; i++)
            for (hh = 0; hh < r->H; hh++)
                dw1[e * w1n + (size_t)i * r->H + hh] += dh[i] * xr[hh];
    }
    /* router */
    for (t = 0; t < r->T; t++) {
        double S = 0;
        const double *p = b->p + (int64_t)t * r->E;
        double *dl = b->dlog + (int64_t)t * r->E;
        for (j = 0; j < r->K; j++)
            S += p[io->ids[(int64_t)t * r->K + j]] * b->dg[(int64_t)t * r->K + j];
        for (e = 0; e < r->E; e++) {
            double dp = 0;
            for (j = 0; j < r->K; j++)
                if (io->ids[(int64_t)t * r->K + j] == e)
                    dp = b->dg[(int64_t)t * r->K + j];
            dl[e] = rf(r, p[e] * (dp - S));
        }
        for (e = 0; e < r->E; e++)
            for (hh = 0; hh < r->H; hh++)
                dwr[((int64_t)(t / Tr) * r->E + e) * r->H + hh] +=
                    dl[e] * io->x[(int64_t)t * r->H + hh];
        for (hh = 0; hh < r->H; hh++) {
            double acc = 0;
            for (e = 0; e < r->E; e++)
                acc += dl[e] * io->wr[(int64_t)e * r->H + hh];
            b->dxacc[(int64_t)t * r->H + hh] += rf(r, acc);
        }
    }
    free(dout);
}

static void out_f(float *dst, const double *src, size_t n)
{
    size_t i;
    if (dst)
        for (i = 0; i < n; i++)
            dst[i] = (float)src[i];
}

int mt_moe_ref_run(const mt_moe_ref_cfg *c, mt_moe_ref_io *io)
{
    ref r;
    bufs b;
    double *dact = NULL, *dh = NULL, *dw1 = NULL, *dw2 = NULL, *dwr = NULL;
    size_t i, w1all, w2all;
    int rc = validate(c, io);
    if (rc)
        return rc;
    memset(&b, 0, sizeof b);
    r.c = c;
    r.T = c->tokens;
    r.H = c->hidden;
    r.F = c->ffn;
    r.E = c->experts;
    r.K = c->topk;
    r.L = c->experts / c->ep;
    r.G = c->ep * c->chunks;
    r.N = (int64_t)r.T * r.K;
    w1all = (size_t)r.E * 2 * r.F * r.H;
    w2all = (size_t)r.E * r.H * r.F;
#define ALLOC(p, n) (((p) = calloc((size_t)(n), sizeof *(p))) != NULL)
    if (!ALLOC(b.logits, (size_t)r.T * r.E) || !ALLOC(b.p, (size_t)r.T * r.E) || !ALLOC(b.g, r.N) ||
        !ALLOC(b.h, (size_t)r.N * 2 * r.F) || !ALLOC(b.act, (size_t)r.N * r.F) ||
        !ALLOC(b.o, (size_t)r.N * r.H) || !ALLOC(b.y, (size_t)r.T * r.H) || !ALLOC(b.dg, r.N) ||
        !ALLOC(b.dlog, (size_t)r.T * r.E) || !ALLOC(b.dxacc, (size_t)r.T * r.H) ||
        !ALLOC(dact, r.F) || !ALLOC(dh, 2 * r.F) || !ALLOC(dw1, w1all) || !ALLOC(dw2, w2all) ||
        !ALLOC(dwr, (size_t)c->ep * r.E * r.H)) {
        rc = -ENOMEM;
        goto out;
    }
    if (c->prec == MT_MOE_FP8 &&
        (!ALLOC(b.xq, (size_t)r.N * r.H) || !ALLOC(b.actq, (size_t)r.N * r.F) ||
         !ALLOC(b.w1q, w1all) || !ALLOC(b.w2q, w2all) || !ALLOC(b.inv_x, r.G) ||
         !ALLOC(b.inv_act, r.G) || !ALLOC(b.inv_w1, r.G) || !ALLOC(b.inv_w2, r.G))) {
        rc = -ENOMEM;
        goto out;
    }
#undef ALLOC
    router_forward(&r, io, &b);
    experts_forward(&r, io, &b);
    combine(&r, io, &b);
    backward(&r, io, &b, dact, dh, dw1, dw2, dwr);
    out_f(io->logits, b.logits, (size_t)r.T * r.E);
    out_f(io->gates, b.g, (size_t)r.N);
    out_f(io->y, b.y, (size_t)r.T * r.H);
    if (io->dx)
        for (i = 0; i < (size_t)r.T * r.H; i++)
            io->dx[i] = (float)rb(&r, b.dxacc[i]);
    out_f(io->dwr, dwr, (size_t)c->ep * r.E * r.H);
    out_f(io->dw1, dw1, w1all);
    out_f(io->dw2, dw2, w2all);
out:
    free_bufs(&b);
    free(dact);
    free(dh);
    free(dw1);
    free(dw2);
    free(dwr);
    return rc;
}
