/*
 * moe_ref.h - the CPU reference of the native MoE layer benchmark: one MoE
 * layer, forward and backward, in double precision with the GPU's storage
 * roundings (bf16, fp8 e4m3) applied where the GPU stores a tensor in that
 * format, so that what remains between the two is accumulation order.
 *
 * The layer (every EP rank the same; T tokens of hidden size H, E experts of
 * FFN size F, top-k):
 *   logits = x Wr^T                         FP32 router, Wr [E][H]
 *   p      = softmax(logits); gate[t][j] = p[t][id[t][j]]   (no renormalisation)
 *   h      = x_e W1_e^T                     W1 [E][2F][H] (gate half, then up half)
 *   act    = silu(h[:, :F]) * h[:, F:]      SwiGLU
 *   o      = act W2_e^T                     W2 [E][H][F]
 *   y[t]   = sum_j gate[t][j] * o(t, j)
 * and its backward from dy, giving dx, dWr (per EP rank: each rank's own
 * tokens), dW1, dW2 (summed over every token routed to the expert).  The
 * routing ids are an input (the benchmark's forced plan).
 *
 * Storage formats (what the GPU keeps, so what the reference rounds to):
 *   BF16: x, dy, W1, W2, h, act, o, y, g*dy, d_act, d_h, dx_expert, dx in
 *         bf16; Wr, logits, p, gates, dgate, dlogits, dWr, dW1, dW2 in fp32.
 *   FP8:  as BF16, and the forward expert GEMMs read e4m3 copies of x_e, W1,
 *         act, W2 with per-tensor current scaling: one scale per (EP rank,
 *         expert chunk) and tensor, scale = 448 / amax (1 when amax is 0),
 *         the GEMM result multiplied by the two inverse scales.  The
 *         backward GEMMs read the bf16 tensors.
 *   EXACT: no rounding at all (for finite differences).
 *
 * Tolerances the GPU is held to (--check), as max|gpu - ref| / max|ref| per
 * tensor: MT_MOE_TOL_BF16 and MT_MOE_TOL_FP8 below.
 *
 * Rounding helpers and the deterministic input generator are shared with
 * the GPU code (which must produce the same bits: RNE, saturating e4m3).
 */
#ifndef MT_MOE_REF_H
#define MT_MOE_REF_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __CUDACC__
#define MT_MOE_HD __host__ __device__
#else
#define MT_MOE_HD
#endif

typedef enum mt_moe_prec { MT_MOE_EXACT = 0, MT_MOE_BF16 = 1, MT_MOE_FP8 = 2 } mt_moe_prec;

/* --check tolerances (normalised max error, see above) */
#define MT_MOE_TOL_BF16 2e-2
#define MT_MOE_TOL_FP8 6e-2
/* router probabilities and gates are FP32 end to end */
#define MT_MOE_TOL_ROUTER 1e-4

#define MT_MOE_E4M3_MAX 448.0f

/* Input generator: a value in [-1, 1) from (seed, tensor, index) alone, with
 * 24 random bits, so exactly representable in float on host and device. */
static inline MT_MOE_HD float mt_moe_init_uniform(uint64_t seed, uint32_t tensor, uint64_t index)
{
    uint64_t z = seed * 0x9e3779b97f4a7c15ULL + ((uint64_t)tensor << 48) + index;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (float)((int32_t)(z >> 40) - (1 << 23)) * (1.0f / (float)(1 << 23));
}

/* The tensors of the generator (tensor argument above). */
enum { MT_MOE_T_X = 1, MT_MOE_T_WR = 2, MT_MOE_T_W1 = 3, MT_MOE_T_W2 = 4, MT_MOE_T_DY = 5 };

/* The scale a tensor's uniform values are multiplied by (then rounded to
 * bf16, except Wr): router logits and FFN pre-activations of standard
 * deviation about 1.  Element i of a tensor is
 * mt_moe_init_uniform(seed, tensor, i) * mt_moe_init_scale(tensor, H, F),
 * indexed over all ranks and experts (a rank holds a slice). */
static inline MT_MOE_HD float mt_moe_init_scale(uint32_t tensor, int hidden, int ffn)
{
    if (tensor == MT_MOE_T_WR || tensor == MT_MOE_T_W1)
        return 3.0f / sqrtf((float)hidden);
    if (tensor == MT_MOE_T_W2)
        return 3.0f / sqrtf((float)ffn);
    return 1.0f;
}

/* bf16 with round to nearest even; NaN stays NaN (quiet), overflow is inf. */
uint16_t mt_bf16_bits(float x);
float mt_bf16_value(uint16_t b);
float mt_bf16_round(float x);
/* fp8 e4m3 (OCP "e4m3fn": no infinities, NaN 0x7f/0xff, max 448) with round
 * to nearest even and saturation to +-448 (CUDA's __NV_SATFINITE). */
uint8_t mt_e4m3_bits(float x);
float mt_e4m3_value(uint8_t b);
float mt_e4m3_round(float x);
/* Current scaling: 448 / amax, or 1 when amax is 0 or not finite. */
float mt_moe_fp8_scale(float amax);

typedef struct mt_moe_ref_cfg {
    int tokens; /* of every rank together: rank r owns tokens [r*T/ep, (r+1)*T/ep) */
    int hidden, ffn, experts, topk, ep, chunks;
    mt_moe_prec prec;
} mt_moe_ref_cfg;

typedef struct mt_moe_ref_io {
    /* inputs, caller's */
    const float *x;     /* [tokens][hidden] */
    const float *wr;    /* [experts][hidden] */
    const float *w1;    /* [experts][2*ffn][hidden] */
    const float *w2;    /* [experts][hidden][ffn] */
    const float *dy;    /* [tokens][hidden] */
    const int32_t *ids; /* [tokens][topk], distinct per token */
    /* outputs, caller-allocated; any may be NULL except where noted */
    float *logits; /* [tokens][experts] */
    float *gates;  /* [tokens][topk] */
    float *y;      /* [tokens][hidden] */
    float *dx;     /* [tokens][hidden] */
    float *dwr;    /* [ep][experts][hidden] */
    float *dw1;    /* [experts][2*ffn][hidden] */
    float *dw2;    /* [experts][hidden][ffn] */
    double loss;   /* sum(y * dy) with y before its final rounding */
} mt_moe_ref_io;

/* Runs the layer.  0, -EINVAL (sizes, NULL inputs, ids out of range or
 * repeated within a token, tokens % ep, chunks outside 1..experts/ep) or
 * -ENOMEM. */
int mt_moe_ref_run(const mt_moe_ref_cfg *c, mt_moe_ref_io *io);

/* max|got - ref| / max|ref| (0/0 is 0; a NaN or infinity in got where ref
 * is finite gives INFINITY). */
double mt_moe_rel_err(const float *got, const float *ref, size_t n);

#ifdef __cplusplus
}
#endif

#endif
