/*
 * moe_route.h - routing of the native MoE layer benchmark, in plain C: which
 * experts each token goes to, where its rows land after the permutation, how
 * many rows each expert-parallel (EP) rank sends to and receives from every
 * other, and the grouped layout the expert GEMMs read.
 *
 * The GPU program (moe.cu) computes the permutation itself every iteration,
 * as Megatron does; this module is the plan it is checked against and the
 * source of every size the host needs to launch GEMMs and NCCL calls.
 *
 * Routing is benchmark-only ("forced"): a plan is drawn from a seed, not
 * learnt.  Two modes:
 *   balanced  every expert gets tokens*topk/experts rows (the remainder, if
 *             any, one more row to the first experts in a seeded order);
 *   zipf      expert counts follow a Zipf law, count ~ 1/rank^alpha over a
 *             seeded popularity order of the experts (the same order on every
 *             EP rank, so hot experts are hot everywhere), each count capped
 *             at `tokens` (a token picks an expert at most once) and rounded
 *             so that the counts sum to tokens*topk exactly.
 * In both, the counts are exact (not sampled), which tokens get which experts
 * is a seeded shuffle, and every token gets topk distinct experts.
 *
 * Sizes: experts <= MT_MOE_MAX_EXPERTS, topk <= MT_MOE_MAX_TOPK, and
 * tokens*topk*ep < 2^31 (the GPU indexes rows with 32-bit integers).
 * Functions return 0 or a negative errno (-EINVAL for bad sizes or ids,
 * -ENOMEM); outputs are caller-allocated unless a function says otherwise.
 */
#ifndef MT_MOE_ROUTE_H
#define MT_MOE_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MT_MOE_MAX_EXPERTS 1024
#define MT_MOE_MAX_TOPK 32
#define MT_MOE_MAX_CHUNKS 16
#define MT_MOE_ROW_ALIGN 16 /* rows of each expert in the grouped layout start at a multiple */

typedef enum mt_moe_routing { MT_MOE_ROUTE_BALANCED = 0, MT_MOE_ROUTE_ZIPF = 1 } mt_moe_routing;

/* 0 when the sizes are usable (1 <= topk <= experts <= MT_MOE_MAX_EXPERTS,
 * topk <= MT_MOE_MAX_TOPK, tokens >= 1, ep >= 1, experts % ep == 0,
 * tokens*topk*ep < 2^31), else -EINVAL. */
int mt_moe_route_sizes_ok(int tokens, int topk, int experts, int ep);

/* The per-expert row counts of one rank's plan (identical on every rank):
 * quota[experts], summing to tokens*topk, each <= tokens.  alpha is used by
 * zipf only (alpha >= 0; 0 is uniform weights). */
int mt_moe_route_quotas(mt_moe_routing mode, double alpha, int tokens, int topk, int experts,
                        uint64_t seed, int64_t *quota);

/* The plan of EP rank `rank`: ids[tokens*topk] (token t's experts at
 * ids[t*topk .. t*topk+topk-1], distinct), with per-expert counts equal to
 * mt_moe_route_quotas().  Deterministic in (mode, alpha, sizes, seed, rank). */
int mt_moe_route_generate(mt_moe_routing mode, double alpha, int tokens, int topk, int experts,
                          uint64_t seed, int rank, int32_t *ids);

/* Router top-k: for each token the topk experts with the largest logits,
 * largest first, ties to the lower expert id; a NaN logit is never preferred
 * to a number.  probs (may be NULL) gets the softmax of each logits row.
 * logits[tokens*experts], ids[tokens*topk], probs[tokens*experts]. */
int mt_moe_topk(const float *logits, int tokens, int experts, int topk, int32_t *ids, float *probs);

/* The permutation (stable: rows of one expert in token-slot order):
 * counts[experts] rows per expert, offsets[experts+1] exclusive prefix sums,
 * pos[tokens*topk] the row of (token, slot) in the permuted buffer, and
 * row_flat[tokens*topk] (may be NULL) its inverse: the (token*topk + slot)
 * of each permuted row, which is what combine reads. */
int mt_moe_permute(const int32_t *ids, int tokens, int topk, int experts, int64_t *counts,
                   int64_t *offsets, int32_t *pos, int32_t *row_flat);

/* The EP split of rank `rank`: counts_all[ep*experts] holds every rank's
 * per-expert counts (row s = source rank s).  Experts are owned in blocks:
 * rank p owns experts [p*experts/ep, (p+1)*experts/ep).  send[p] rows go from
 * `rank` to p, recv[s] rows come from s. */
int mt_moe_ep_split(const int64_t *counts_all, int ep, int experts, int rank, int64_t *send,
                    int64_t *recv);

/* First local expert of chunk c when `local` experts are cut into `chunks`
 * chunks (the last chunk takes the remainder; chunks <= local). */
int mt_moe_chunk_begin(int local, int chunks, int c);

/* One contiguous block of rows moved between the receive buffer ([source]
 * [local expert] order) and the grouped buffer ([local expert][source]). */
typedef struct mt_moe_block {
    int64_t recv_row, grouped_row, rows;
} mt_moe_block;

/*
 * Everything one EP rank needs to move rows, for a given chunking of its
 * local experts (1 chunk: no overlap; more: communication of chunk c+1 can
 * hide under the expert GEMMs of chunk c).  Offsets and counts are in rows.
 *
 * Dispatch, chunk c: to peer p send send_cnt[c*ep+p] rows from the permuted
 * buffer at send_off[c*ep+p]; from peer s receive recv_cnt[c*ep+s] rows into
 * the receive buffer at recv_off[c*ep+s].  Combine is the mirror image (send
 * from recv_off, receive into send_off).  blocks[block_begin[c] ..
 * block_begin[c+1]) move chunk c between the receive buffer and the grouped
 * buffer, where local expert e has expert_rows[e] rows starting at
 * expert_off[e] (a multiple of MT_MOE_ROW_ALIGN; the gap rows are padding).
 */
typedef struct mt_moe_layout {
    int ep, experts, local, chunks, rank;
    int64_t send_rows;    /* rows of the permuted buffer: tokens*topk */
    int64_t recv_rows;    /* rows of the receive buffer */
    int64_t grouped_rows; /* rows of the grouped buffer, padding included */
    int64_t *send_off, *send_cnt, *recv_off, *recv_cnt; /* [chunks*ep] */
    int64_t *expert_rows;                               /* [local] */
    int64_t *expert_off;                                /* [local+1] */
    int *chunk_begin;                                   /* [chunks+1] local experts */
    int *block_begin;                                   /* [chunks+1] */
    mt_moe_block *blocks;                               /* [local*ep], chunk by chunk */
} mt_moe_layout;

/* Caller owns the return value (mt_moe_layout_destroy); NULL on bad sizes
 * (1 <= chunks <= min(local, MT_MOE_MAX_CHUNKS), negative counts) or OOM. */
mt_moe_layout *mt_moe_layout_new(const int64_t *counts_all, int ep, int experts, int rank,
                                 int chunks);
/* Frees *l and sets it to NULL; NULL-safe. */
void mt_moe_layout_destroy(mt_moe_layout **l);

/* splitmix64: the generator behind every seeded choice here (exposed for the
 * tests and the reference's input generation). */
uint64_t mt_moe_splitmix64(uint64_t *state);

#ifdef __cplusplus
}
#endif

#endif
