/*
 * test_cuda_ref.c - the CPU reference of the native MoE layer benchmark
 * (workers/cuda/moe_ref.c): bf16 and fp8 e4m3 rounding against known values
 * (every e4m3 code round-trips), the input generator, the layer's backward
 * against central finite differences at tiny sizes, EP and chunking
 * leaving the exact layer unchanged, and the stored-format modes staying
 * close to the exact one.
 */
#include "moe_ref.h"
#include "moe_route.h"
#include "testkit.h"

#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

START_TEST(bf16_known_values)
{
    ck_assert_uint_eq(mt_bf16_bits(1.0f), 0x3f80);
    ck_assert_uint_eq(mt_bf16_bits(-2.0f), 0xc000);
    ck_assert_uint_eq(mt_bf16_bits(-0.0f), 0x8000);
    ck_assert_uint_eq(mt_bf16_bits(1.0f + 0x1p-8f), 0x3f80);     /* tie: to even */
    ck_assert_uint_eq(mt_bf16_bits(1.0f + 3 * 0x1p-8f), 0x3f82); /* tie: to even, up */
    ck_assert_uint_eq(mt_bf16_bits(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
    ck_assert_uint_eq(mt_bf16_bits(3.0e38f), 0x7f62);
    ck_assert_uint_eq(mt_bf16_bits(3.4028235e38f), 0x7f80); /* rounds to infinity */
    ck_assert_uint_eq(mt_bf16_bits(INFINITY), 0x7f80);
    ck_assert(isnan(mt_bf16_value(mt_bf16_bits(NAN))));
    ck_assert(mt_bf16_round(3.14159265f) == 3.140625f);
    ck_assert(mt_bf16_value(0x4049) == 3.140625f);
}
END_TEST

START_TEST(e4m3_known_values)
{
    ck_assert_uint_eq(mt_e4m3_bits(1.0f), 0x38);
    ck_assert_uint_eq(mt_e4m3_bits(0.5f), 0x30);
    ck_assert_uint_eq(mt_e4m3_bits(-2.0f), 0xc0);
    ck_assert_uint_eq(mt_e4m3_bits(240.0f), 0x77);
    ck_assert_uint_eq(mt_e4m3_bits(448.0f), 0x7e);
    ck_assert_uint_eq(mt_e4m3_bits(464.0f), 0x7e); /* saturating, not NaN */
    ck_assert_uint_eq(mt_e4m3_bits(1e6f), 0x7e);
    ck_assert_uint_eq(mt_e4m3_bits(INFINITY), 0x7e);
    ck_assert_uint_eq(mt_e4m3_bits(-INFINITY), 0xfe);
    ck_assert_uint_eq(mt_e4m3_bits(NAN) & 0x7f, 0x7f);
    ck_assert_uint_eq(mt_e4m3_bits(0x1p-6f), 0x08);        /* smallest normal */
    ck_assert_uint_eq(mt_e4m3_bits(0x1p-9f), 0x01);        /* smallest subnormal */
    ck_assert_uint_eq(mt_e4m3_bits(0x1p-10f), 0x00);       /* tie to even: zero */
    ck_assert_uint_eq(mt_e4m3_bits(3 * 0x1p-10f), 0x02);   /* 1.5 ulp: to even, 2 */
    ck_assert_uint_eq(mt_e4m3_bits(7.5f * 0x1p-9f), 0x08); /* carries into the normals */
    ck_assert_uint_eq(mt_e4m3_bits(1.0625f), 0x38);        /* tie between 1 and 1.125 */
    ck_assert_uint_eq(mt_e4m3_bits(1.1875f), 0x3a);        /* tie between 1.125 and 1.25 */
    ck_assert_uint_eq(mt_e4m3_bits(1.2f), 0x3a);
    ck_assert(mt_e4m3_value(0x7e) == 448.0f);
    ck_assert(mt_e4m3_value(0x01) == 0x1p-9f);
    ck_assert(isnan(mt_e4m3_value(0xff)));
    ck_assert(mt_e4m3_round(300.0f) == 288.0f);
    ck_assert(mt_e4m3_round(-0.3f) == -0.3125f);
}
END_TEST

START_TEST(e4m3_every_code_round_trips)
{
    int b;
    for (b = 0; b < 256; b++) {
        float v = mt_e4m3_value((uint8_t)b);
        if ((b & 0x7f) == 0x7f) {
            ck_assert(isnan(v));
            continue;
        }
        ck_assert_msg(mt_e4m3_bits(v) == b, "code 0x%02x -> %g -> 0x%02x", b, v, mt_e4m3_bits(v));
        /* halfway to the next code rounds to the even one of the two */
        if ((b & 0x7f) < 0x7e) {
            float next = mt_e4m3_value((uint8_t)(b + 1)), mid = (v + next) / 2;
            int even = (b & 1) ? b + 1 : b;
            ck_assert_msg(mt_e4m3_bits(mid) == even, "halfway above 0x%02x", b);
        }
    }
    ck_assert(mt_moe_fp8_scale(0.0f) == 1.0f);
    ck_assert(mt_moe_fp8_scale(448.0f) == 1.0f);
    ck_assert(mt_moe_fp8_scale(2.0f) == 224.0f);
    ck_assert(mt_moe_fp8_scale(INFINITY) == 1.0f);
    ck_assert(mt_moe_fp8_scale(NAN) == 1.0f);
}
END_TEST

START_TEST(init_generator)
{
    uint64_t i;
    double s = 0, s2 = 0;
    for (i = 0; i < 100000; i++) {
        float v = mt_moe_init_uniform(42, MT_MOE_T_X, i);
        ck_assert(v >= -1.0f && v < 1.0f);
        ck_assert(v * 0x1p23f == floorf(v * 0x1p23f)); /* 24 bits: exact everywhere */
        ck_assert(v == mt_moe_init_uniform(42, MT_MOE_T_X, i));
        s += v;
        s2 += (double)v * v;
    }
    ck_assert(fabs(s / 1e5) < 0.01);
    ck_assert(fabs(s2 / 1e5 - 1.0 / 3) < 0.01);
    ck_assert(mt_moe_init_uniform(42, MT_MOE_T_X, 7) != mt_moe_init_uniform(43, MT_MOE_T_X, 7));
    ck_assert(mt_moe_init_uniform(42, MT_MOE_T_X, 7) != mt_moe_init_uniform(42, MT_MOE_T_W1, 7));
    ck_assert(mt_moe_init_scale(MT_MOE_T_W1, 64, 16) == 3.0f / 8.0f);
    ck_assert(mt_moe_init_scale(MT_MOE_T_W2, 64, 16) == 0.75f);
    ck_assert(mt_moe_init_scale(MT_MOE_T_X, 64, 16) == 1.0f);
}
END_TEST

START_TEST(rel_err_metric)
{
    float r[3] = {1.0f, -4.0f, 0.5f}, g[3] = {1.0f, -3.0f, 0.5f}, z[3] = {0, 0, 0};
    ck_assert(mt_moe_rel_err(g, r, 3) == 0.25);
    ck_assert(mt_moe_rel_err(r, r, 3) == 0.0);
    ck_assert(mt_moe_rel_err(z, z, 3) == 0.0);
    g[2] = NAN;
    ck_assert(isinf(mt_moe_rel_err(g, r, 3)));
    ck_assert(isinf(mt_moe_rel_err(r, z, 3)));
}
END_TEST

/* ---- the layer ---------------------------------------------------------------------- */

typedef struct layer {
    mt_moe_ref_cfg c;
    float *x, *wr, *w1, *w2, *dy;
    int32_t *ids;
} layer;

static float *gen(uint32_t tensor, size_t n, int H, int F, int round)
{
    float *v = malloc(sizeof *v * n);
    size_t i;
    for (i = 0; i < n; i++) {
        v[i] = mt_moe_init_uniform(5, tensor, i) * mt_moe_init_scale(tensor, H, F);
        if (round)
            v[i] = mt_bf16_round(v[i]);
    }
    return v;
}

static void layer_make(layer *l, int T, int H, int F, int E, int K, int ep, int chunks,
                       mt_moe_prec prec, mt_moe_routing m)
{
    int r, Tr = T / ep;
    l->c.tokens = T;
    l->c.hidden = H;
    l->c.ffn = F;
    l->c.experts = E;
    l->c.topk = K;
    l->c.ep = ep;
    l->c.chunks = chunks;
    l->c.prec = prec;
    l->x = gen(MT_MOE_T_X, (size_t)T * H, H, F, 1);
    l->wr = gen(MT_MOE_T_WR, (size_t)E * H, H, F, 0);
    l->w1 = gen(MT_MOE_T_W1, (size_t)E * 2 * F * H, H, F, 1);
    l->w2 = gen(MT_MOE_T_W2, (size_t)E * H * F, H, F, 1);
    l->dy = gen(MT_MOE_T_DY, (size_t)T * H, H, F, 1);
    l->ids = malloc(sizeof *l->ids * (size_t)T * K);
    for (r = 0; r < ep; r++)
        ck_assert_int_eq(mt_moe_route_generate(m, 1.0, Tr, K, E, 9, r, l->ids + (size_t)r * Tr * K),
                         0);
}

static void layer_free(layer *l)
{
    free(l->x);
    free(l->wr);
    free(l->w1);
    free(l->w2);
    free(l->dy);
    free(l->ids);
}

typedef struct outs {
    float *y, *dx, *dwr, *dw1, *dw2, *logits, *gates;
    double loss;
} outs;

static void run(const layer *l, outs *o)
{
    const mt_moe_ref_cfg *c = &l->c;
    mt_moe_ref_io io;
    size_t T = (size_t)c->tokens, H = (size_t)c->hidden, F = (size_t)c->ffn, E = (size_t)c->experts;
    memset(&io, 0, sizeof io);
    io.x = l->x;
    io.wr = l->wr;
    io.w1 = l->w1;
    io.w2 = l->w2;
    io.dy = l->dy;
    io.ids = l->ids;
    if (o) {
        io.y = o->y = malloc(sizeof(float) * T * H);
        io.dx = o->dx = malloc(sizeof(float) * T * H);
        io.dwr = o->dwr = malloc(sizeof(float) * (size_t)c->ep * E * H);
        io.dw1 = o->dw1 = malloc(sizeof(float) * E * 2 * F * H);
        io.dw2 = o->dw2 = malloc(sizeof(float) * E * H * F);
        io.logits = o->logits = malloc(sizeof(float) * T * E);
        io.gates = o->gates = malloc(sizeof(float) * T * (size_t)c->topk);
    }
    ck_assert_int_eq(mt_moe_ref_run(c, &io), 0);
    if (o)
        o->loss = io.loss;
}

static double loss_of(const layer *l)
{
    mt_moe_ref_io io;
    memset(&io, 0, sizeof io);
    io.x = l->x;
    io.wr = l->wr;
    io.w1 = l->w1;
    io.w2 = l->w2;
    io.dy = l->dy;
    io.ids = l->ids;
    ck_assert_int_eq(mt_moe_ref_run(&l->c, &io), 0);
    return io.loss;
}

static void outs_free(outs *o)
{
    free(o->y);
    free(o->dx);
    free(o->dwr);
    free(o->dw1);
    free(o->dw2);
    free(o->logits);
    free(o->gates);
}

/* dL/dv[i] by central differences (the step actually taken, in float) */
static double fd(layer *l, float *v, size_t i)
{
    float keep = v[i], up = keep + 1e-3f, dn = keep - 1e-3f;
    double lu, ld;
    v[i] = up;
    lu = loss_of(l);
    v[i] = dn;
    ld = loss_of(l);
    v[i] = keep;
    return (lu - ld) / ((double)up - (double)dn);
}

static void fd_check(layer *l, float *v, const float *grad, size_t n, const char *what)
{
    size_t i, step = n > 40 ? n / 40 : 1;
    double gmax = 0;
    for (i = 0; i < n; i++)
        gmax = fabs(grad[i]) > gmax ? fabs(grad[i]) : gmax;
    ck_assert_msg(gmax > 1e-6, "%s: gradient all zero", what);
    for (i = 0; i < n; i += step) {
        double num = fd(l, v, i);
        ck_assert_msg(fabs(num - grad[i]) <= 1e-4 * gmax + 1e-4 * fabs(num),
                      "%s[%zu]: analytic %.8g, finite differences %.8g", what, i, grad[i], num);
    }
}

START_TEST(backward_matches_finite_differences)
{
    layer l;
    outs o;
    layer_make(&l, 6, 8, 4, 4, 2, 1, 1, MT_MOE_EXACT, MT_MOE_ROUTE_BALANCED);
    run(&l, &o);
    fd_check(&l, l.x, o.dx, 6 * 8, "dx");
    fd_check(&l, l.w1, o.dw1, 4 * 2 * 4 * 8, "dW1");
    fd_check(&l, l.w2, o.dw2, 4 * 8 * 4, "dW2");
    fd_check(&l, l.wr, o.dwr, 4 * 8, "dWr");
    outs_free(&o);
    layer_free(&l);
}
END_TEST

START_TEST(backward_fd_two_ranks_zipf)
{
    layer l;
    outs o;
    size_t i;
    float *sum;
    layer_make(&l, 8, 16, 8, 4, 3, 2, 2, MT_MOE_EXACT, MT_MOE_ROUTE_ZIPF);
    run(&l, &o);
    fd_check(&l, l.x, o.dx, 8 * 16, "dx");
    fd_check(&l, l.w1, o.dw1, 4 * 2 * 8 * 16, "dW1");
    /* the router weights are replicated: each rank's own gradient, summed */
    sum = calloc(4 * 16, sizeof *sum);
    for (i = 0; i < 4 * 16; i++)
        sum[i] = o.dwr[i] + o.dwr[4 * 16 + i];
    fd_check(&l, l.wr, sum, 4 * 16, "dWr (both ranks)");
    free(sum);
    outs_free(&o);
    layer_free(&l);
}
END_TEST

START_TEST(ep_and_chunks_leave_the_layer_unchanged)
{
    layer a, b;
    outs oa, ob;
    size_t i, H = 16, E = 8, T = 32;
    float *dwr;
    layer_make(&a, 32, 16, 16, 8, 2, 1, 1, MT_MOE_EXACT, MT_MOE_ROUTE_BALANCED);
    layer_make(&b, 32, 16, 16, 8, 2, 4, 2, MT_MOE_EXACT, MT_MOE_ROUTE_BALANCED);
    memcpy(b.ids, a.ids, sizeof *a.ids * 32 * 2); /* the same routing */
    run(&a, &oa);
    run(&b, &ob);
    ck_assert(mt_moe_rel_err(ob.y, oa.y, T * H) < 1e-6);
    ck_assert(mt_moe_rel_err(ob.dx, oa.dx, T * H) < 1e-6);
    ck_assert(mt_moe_rel_err(ob.dw1, oa.dw1, E * 2 * 16 * H) < 1e-6);
    ck_assert(mt_moe_rel_err(ob.dw2, oa.dw2, E * H * 16) < 1e-6);
    dwr = calloc(E * H, sizeof *dwr);
    for (i = 0; i < 4 * E * H; i++)
        dwr[i % (E * H)] += ob.dwr[i];
    ck_assert(mt_moe_rel_err(dwr, oa.dwr, E * H) < 1e-6);
    ck_assert(fabs(oa.loss - ob.loss) < 1e-9 * (1 + fabs(oa.loss)));
    free(dwr);
    outs_free(&oa);
    outs_free(&ob);
    layer_free(&a);
    layer_free(&b);
}
END_TEST

/* The stored formats move the result by about their precision, no more:
 * bf16 well inside its tolerance, fp8 inside its own. */
START_TEST(stored_formats_close_to_exact)
{
    static const mt_moe_prec precs[] = {MT_MOE_BF16, MT_MOE_FP8};
    layer ex;
    outs oe;
    size_t p;
    layer_make(&ex, 64, 128, 64, 8, 2, 2, 2, MT_MOE_EXACT, MT_MOE_ROUTE_ZIPF);
    run(&ex, &oe);
    for (p = 0; p < 2; p++) {
        layer l = ex;
        outs o;
        double e_y, e_dx, e_w1, e_w2, tol = precs[p] == MT_MOE_FP8 ? 0.15 : 0.02;
        l.c.prec = precs[p];
        run(&l, &o);
        e_y = mt_moe_rel_err(o.y, oe.y, 64 * 128);
        e_dx = mt_moe_rel_err(o.dx, oe.dx, 64 * 128);
        e_w1 = mt_moe_rel_err(o.dw1, oe.dw1, 8 * 2 * 64 * 128);
        e_w2 = mt_moe_rel_err(o.dw2, oe.dw2, 8 * 128 * 64);
        ck_assert_msg(e_y > 0 && e_y < tol, "prec %d: y error %g", (int)precs[p], e_y);
        ck_assert_msg(e_dx < tol && e_w1 < tol && e_w2 < tol, "prec %d: %g %g %g", (int)precs[p],
                      e_dx, e_w1, e_w2);
        ck_assert(mt_moe_rel_err(o.logits, oe.logits, 64 * 8) < 1e-6);
        outs_free(&o);
    }
    outs_free(&oe);
    layer_free(&ex);
}
END_TEST

START_TEST(bad_config_refused)
{
    layer l;
    mt_moe_ref_io io;
    layer_make(&l, 4, 16, 16, 4, 2, 1, 1, MT_MOE_BF16, MT_MOE_ROUTE_BALANCED);
    memset(&io, 0, sizeof io);
    io.x = l.x;
    io.wr = l.wr;
    io.w1 = l.w1;
    io.w2 = l.w2;
    io.dy = l.dy;
    io.ids = l.ids;
    l.ids[1] = l.ids[0]; /* an expert twice for one token */
    ck_assert_int_eq(mt_moe_ref_run(&l.c, &io), -EINVAL);
    l.ids[1] = 4; /* out of range */
    ck_assert_int_eq(mt_moe_ref_run(&l.c, &io), -EINVAL);
    l.ids[1] = (l.ids[0] + 1) % 4;
    ck_assert_int_eq(mt_moe_ref_run(&l.c, &io), 0);
    l.c.chunks = 5;
    ck_assert_int_eq(mt_moe_ref_run(&l.c, &io), -EINVAL);
    l.c.chunks = 1;
    l.c.ep = 3; /* tokens and experts not divisible */
    ck_assert_int_eq(mt_moe_ref_run(&l.c, &io), -EINVAL);
    l.c.ep = 1;
    io.w2 = NULL;
    ck_assert_int_eq(mt_moe_ref_run(&l.c, &io), -EINVAL);
    ck_assert_int_eq(mt_moe_ref_run(NULL, &io), -EINVAL);
    layer_free(&l);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_ref");
    TCase *f = tcase_create("formats"), *l = tcase_create("layer");
    tcase_add_test(f, bf16_known_values);
    tcase_add_test(f, e4m3_known_values);
    tcase_add_test(f, e4m3_every_code_round_trips);
    tcase_add_test(f, init_generator);
    tcase_add_test(f, rel_err_metric);
    tcase_set_timeout(f, 60); /* 100,000 draws: seconds on a loaded 2-core machine */
    tcase_set_timeout(l, 240);
    tcase_add_test(l, backward_matches_finite_differences);
    tcase_add_test(l, backward_fd_two_ranks_zipf);
    tcase_add_test(l, ep_and_chunks_leave_the_layer_unchanged);
    tcase_add_test(l, stored_formats_close_to_exact);
    tcase_add_test(l, bad_config_refused);
    suite_add_tcase(s, f);
    suite_add_tcase(s, l);
    return tk_run(s);
}
