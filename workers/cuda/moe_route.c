/*
 * moe_route.c - routing plans, top-k, permutation and EP layout (see
 * moe_route.h).
 */
#include "moe_route.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

uint64_t mt_moe_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [0, n) without modulo bias. */
static uint64_t below(uint64_t *st, uint64_t n)
{
    uint64_t lim = UINT64_MAX - UINT64_MAX % n, r;
    do
        r = mt_moe_splitmix64(st);
    while (r >= lim);
    return r % n;
}

/* A generator state for one purpose of one rank: the streams never overlap
 * in practice and never depend on call order. */
static uint64_t stream(uint64_t seed, uint64_t rank, uint64_t purpose)
{
    uint64_t s = seed ^ 0x6a09e667f3bcc909ULL;
    uint64_t a = mt_moe_splitmix64(&s) ^ (rank * 0xd1b54a32d192ed03ULL);
    return mt_moe_splitmix64(&a) ^ (purpose * 0x8cb92ba72f3d8dd7ULL);
}

static void shuffle_int(int *v, int n, uint64_t *st)
{
    int i;
    for (i = n - 1; i > 0; i--) {
        int j = (int)below(st, (uint64_t)i + 1), t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

int mt_moe_route_sizes_ok(int tokens, int topk, int experts, int ep)
{
    if (tokens < 1 || topk < 1 || experts < 1 || ep < 1 || topk > experts ||
        experts > MT_MOE_MAX_EXPERTS || topk > MT_MOE_MAX_TOPK || experts % ep)
        return -EINVAL;
    if ((int64_t)tokens * topk * ep >= INT32_MAX)
        return -EINVAL;
    return 0;
}

/* Experts in popularity order (hottest first), the same for every rank. */
static int popularity(int experts, uint64_t seed, int *order)
{
    uint64_t st = stream(seed, 0, 1);
    int e;
    for (e = 0; e < experts; e++)
        order[e] = e;
    shuffle_int(order, experts, &st);
    return 0;
}

int mt_moe_route_quotas(mt_moe_routing mode, double alpha, int tokens, int topk, int experts,
                        uint64_t seed, int64_t *quota)
{
    int *order, *capped, e, again;
    double *w;
    int64_t rem = (int64_t)tokens * topk;
    if (mt_moe_route_sizes_ok(tokens, topk, experts, 1) || !quota ||
        (mode != MT_MOE_ROUTE_BALANCED && mode != MT_MOE_ROUTE_ZIPF) ||
        (mode == MT_MOE_ROUTE_ZIPF && !(alpha >= 0 && alpha <= 100)))
        return -EINVAL;
    order = malloc(sizeof *order * (size_t)experts);
    capped = calloc((size_t)experts, sizeof *capped);
    w = malloc(sizeof *w * (size_t)experts);
    if (!order || !capped || !w) {
        free(order);
        free(capped);
        free(w);
        return -ENOMEM;
    }
    popularity(experts, seed, order);
    /* w[i]: weight of the i-th most popular expert */
    for (e = 0; e < experts; e++)
        w[e] = mode == MT_MOE_ROUTE_ZIPF ? pow((double)(e + 1), -alpha) : 1.0;
    for (e = 0; e < experts; e++)
        quota[e] = 0;
    /* water-filling: an expert whose share exceeds `tokens` takes exactly
     * `tokens` and the rest is shared again among the others */
    do {
        double sum = 0;
        again = 0;
        for (e = 0; e < experts; e++)
            if (!capped[e])
                sum += w[e];
        for (e = 0; e < experts; e++)
            if (!capped[e] && (double)rem * w[e] / sum > (double)tokens) {
                capped[e] = 1;
                quota[order[e]] = tokens;
                rem -= tokens;
                again = 1;
                break; /* hottest first: recompute the shares */
            }
    } while (again);
    /* cumulative rounding: the counts sum to rem exactly, each within one of
     * its share */
    {
        double sum = 0, cum = 0;
        int64_t prev = 0;
        int last = -1;
        for (e = 0; e < experts; e++)
            if (!capped[e]) {
                sum += w[e];
                last = e;
            }
        for (e = 0; e < experts; e++) {
            int64_t upto;
            if (capped[e])
                continue;
            cum += w[e];
            upto = e == last ? rem : (int64_t)floor((double)rem * (cum / sum) + 0.5);
            if (upto > rem)
                upto = rem;
            if (upto < prev)
                upto = prev;
            quota[order[e]] = upto - prev;
            prev = upto;
        }
    }
    /* a rounding up may have pushed one over the cap: move the excess on */
    for (e = 0; e < experts; e++) {
        int64_t over = quota[order[e]] - tokens;
        int f;
        for (f = 0; over > 0 && f < experts; f++) {
            int64_t room = tokens - quota[order[f]];
            int64_t mv = room < over ? room : over;
            if (f == e || mv <= 0)
                continue;
            quota[order[f]] += mv;
            quota[order[e]] -= mv;
            over -= mv;
        }
    }
    free(order);
    free(capped);
    free(w);
    return 0;
}

int mt_moe_route_generate(mt_moe_routing mode, double alpha, int tokens, int topk, int experts,
                          uint64_t seed, int rank, int32_t *ids)
{
    int64_t *quota, n = (int64_t)tokens * topk, p;
    int *runs, *order, *perm, e, t, j, rc;
    uint64_t st;
    if (!ids || rank < 0)
        return -EINVAL;
    quota = malloc(sizeof *quota * (size_t)(experts > 0 ? experts : 1));
    if (!quota)
        return -ENOMEM;
    rc = mt_moe_route_quotas(mode, alpha, tokens, topk, experts, seed, quota);
    if (rc) {
        free(quota);
        return rc;
    }
    runs = malloc(sizeof *runs * (size_t)n);
    order = malloc(sizeof *order * (size_t)experts);
    perm = malloc(sizeof *perm * (size_t)tokens);
    if (!runs || !order || !perm) {
        free(quota);
        free(runs);
        free(order);
        free(perm);
        return -ENOMEM;
    }
    /* Runs of each expert laid end to end, largest first; column t takes
     * positions t, t+T, t+2T, ...: a run is at most T long, so a column
     * never meets the same expert twice. */
    popularity(experts, seed, order);
    for (e = 1; e < experts; e++) { /* stable insertion sort by quota, descending */
        int v = order[e], i = e;
        while (i > 0 && quota[order[i - 1]] < quota[v]) {
            order[i] = order[i - 1];
            i--;
        }
        order[i] = v;
    }
    for (p = 0, e = 0; e < experts; e++) {
        int64_t q;
        for (q = 0; q < quota[order[e]]; q++)
            runs[p++] = order[e];
    }
    st = stream(seed, (uint64_t)rank + 1, 2);
    for (t = 0; t < tokens; t++)
        perm[t] = t;
    shuffle_int(perm, tokens, &st);
    for (t = 0; t < tokens; t++) {
        int32_t *row = ids + (int64_t)perm[t] * topk;
        for (j = 0; j < topk; j++)
            row[j] = runs[t + (int64_t)j * tokens];
        for (j = topk - 1; j > 0; j--) { /* slot order: shuffled too */
            int i = (int)below(&st, (uint64_t)j + 1);
            int32_t v = row[j];
            row[j] = row[i];
            row[i] = v;
        }
    }
    free(quota);
    free(runs);
    free(order);
    free(perm);
    return 0;
}

/* a is a better choice than b (b < 0: none yet): a total order, the same
 * as the GPU kernel's: numbers before NaN, larger first, ties to the lower id */
static int better(const float *row, int a, int b)
{
    int an, bn;
    if (b < 0)
        return 1;
    an = isnan(row[a]);
    bn = isnan(row[b]);
    if (an != bn)
        return bn;
    if (!an && row[a] != row[b])
        return row[a] > row[b];
    return a < b;
}

int mt_moe_topk(const float *logits, int tokens, int experts, int topk, int32_t *ids, float *probs)
{
    unsigned char taken[MT_MOE_MAX_EXPERTS];
    int t, e, j;
    if (!logits || !ids || mt_moe_route_sizes_ok(tokens, topk, experts, 1))
        return -EINVAL;
    for (t = 0; t < tokens; t++) {
        const float *row = logits + (int64_t)t * experts;
        memset(taken, 0, (size_t)experts);
        for (j = 0; j < topk; j++) {
            int best = -1;
            for (e = 0; e < experts; e++)
                if (!taken[e] && better(row, e, best))
                    best = e;
            taken[best] = 1;
            ids[(int64_t)t * topk + j] = best;
        }
        if (probs) {
            double m = -INFINITY, s = 0;
            float *pr = probs + (int64_t)t * experts;
            for (e = 0; e < experts; e++)
                if (row[e] > m)
                    m = row[e];
            for (e = 0; e < experts; e++)
                s += exp((double)row[e] - m);
            for (e = 0; e < experts; e++)
                pr[e] = (float)(exp((double)row[e] - m) / s);
        }
    }
    return 0;
}

int mt_moe_permute(const int32_t *ids, int tokens, int topk, int experts, int64_t *counts,
                   int64_t *offsets, int32_t *pos, int32_t *row_flat)
{
    int64_t n = (int64_t)tokens * topk, f, *next;
    int e;
    if (!ids || !counts || !offsets || !pos || mt_moe_route_sizes_ok(tokens, topk, experts, 1))
        return -EINVAL;
    for (e = 0; e < experts; e++)
        counts[e] = 0;
    for (f = 0; f < n; f++) {
        if (ids[f] < 0 || ids[f] >= experts)
            return -EINVAL;
        counts[ids[f]]++;
    }
    offsets[0] = 0;
    for (e = 0; e < experts; e++)
        offsets[e + 1] = offsets[e] + counts[e];
    next = malloc(sizeof *next * (size_t)experts);
    if (!next)
        return -ENOMEM;
    memcpy(next, offsets, sizeof *next * (size_t)experts);
    for (f = 0; f < n; f++) {
        int64_t r = next[ids[f]]++;
        pos[f] = (int32_t)r;
        if (row_flat)
            row_flat[r] = (int32_t)f;
    }
    free(next);
    return 0;
}

int mt_moe_ep_split(const int64_t *counts_all, int ep, int experts, int rank, int64_t *send,
                    int64_t *recv)
{
    int local, p, e;
    if (!counts_all || !send || !recv || ep < 1 || experts < 1 || experts % ep || rank < 0 ||
        rank >= ep)
        return -EINVAL;
    local = experts / ep;
    for (p = 0; p < ep; p++) {
        send[p] = recv[p] = 0;
        for (e = 0; e < local; e++) {
            int64_t out = counts_all[(int64_t)rank * experts + p * local + e];
            int64_t in = counts_all[(int64_t)p * experts + rank * local + e];
            if (out < 0 || in < 0)
                return -EINVAL;
            send[p] += out;
            recv[p] += in;
        }
    }
    return 0;
}

int mt_moe_chunk_begin(int local, int chunks, int c)
{
    if (chunks < 1 || c <= 0)
        return 0;
    if (c >= chunks)
        return local;
    return (int)((int64_t)c * (local / chunks));
}

void mt_moe_layout_destroy(mt_moe_layout **lp)
{
    mt_moe_layout *l;
    if (!lp || !(l = *lp))
        return;
    free(l->send_off);
    free(l->send_cnt);
    free(l->recv_off);
    free(l->recv_cnt);
    free(l->expert_rows);
    free(l->expert_off);
    free(l->chunk_begin);
    free(l->block_begin);
    free(l->blocks);
    free(l);
    *lp = NULL;
}

mt_moe_layout *mt_moe_layout_new(const int64_t *counts_all, int ep, int experts, int rank,
                                 int chunks)
{
    mt_moe_layout *l;
    int local, c, p, e, s, b = 0;
    int64_t *recv_base, acc;
    size_t cp;
    if (!counts_all || ep < 1 || experts < 1 || experts % ep || rank < 0 || rank >= ep)
        return NULL;
    local = experts / ep;
    if (chunks < 1 || chunks > local || chunks > MT_MOE_MAX_CHUNKS)
        return NULL;
    for (e = 0; e < ep * experts; e++)
        if (counts_all[e] < 0)
            return NULL;
    if (!(l = calloc(1, sizeof *l)))
        return NULL;
    cp = (size_t)chunks * (size_t)ep;
    l->ep = ep;
    l->experts = experts;
    l->local = local;
    l->chunks = chunks;
    l->rank = rank;
    l->send_off = calloc(cp, sizeof(int64_t));
    l->send_cnt = calloc(cp, sizeof(int64_t));
    l->recv_off = calloc(cp, sizeof(int64_t));
    l->recv_cnt = calloc(cp, sizeof(int64_t));
    l->expert_rows = calloc((size_t)local, sizeof(int64_t));
    l->expert_off = calloc((size_t)local + 1, sizeof(int64_t));
    l->chunk_begin = calloc((size_t)chunks + 1, sizeof(int));
    l->block_begin = calloc((size_t)chunks + 1, sizeof(int));
    l->blocks = calloc((size_t)local * (size_t)ep, sizeof(mt_moe_block));
    recv_base = calloc((size_t)ep + 1, sizeof(int64_t));
    if (!l->send_off || !l->send_cnt || !l->recv_off || !l->recv_cnt || !l->expert_rows ||
        !l->expert_off || !l->chunk_begin || !l->block_begin || !l->blocks || !recv_base) {
        free(recv_base);
        mt_moe_layout_destroy(&l);
        return NULL;
    }
    for (c = 0; c <= chunks; c++)
        l->chunk_begin[c] = mt_moe_chunk_begin(local, chunks, c);
    /* the permuted buffer is in global expert order */
    for (e = 0; e < experts; e++)
        l->send_rows += counts_all[(int64_t)rank * experts + e];
    for (c = 0; c < chunks; c++)
        for (p = 0; p < ep; p++) {
            int64_t off = 0, cnt = 0;
            for (e = 0; e < p * local + l->chunk_begin[c]; e++)
                off += counts_all[(int64_t)rank * experts + e];
            for (e = l->chunk_begin[c]; e < l->chunk_begin[c + 1]; e++)
                cnt += counts_all[(int64_t)rank * experts + p * local + e];
            l->send_off[c * ep + p] = off;
            l->send_cnt[c * ep + p] = cnt;
        }
    /* the receive buffer: [source][local expert] */
    for (s = 0; s < ep; s++) {
        acc = 0;
        for (e = 0; e < local; e++)
            acc += counts_all[(int64_t)s * experts + rank * local + e];
        recv_base[s + 1] = recv_base[s] + acc;
    }
    l->recv_rows = recv_base[ep];
    for (c = 0; c < chunks; c++)
        for (s = 0; s < ep; s++) {
            int64_t off = recv_base[s], cnt = 0;
            for (e = 0; e < l->chunk_begin[c]; e++)
                off += counts_all[(int64_t)s * experts + rank * local + e];
            for (e = l->chunk_begin[c]; e < l->chunk_begin[c + 1]; e++)
                cnt += counts_all[(int64_t)s * experts + rank * local + e];
            l->recv_off[c * ep + s] = off;
            l->recv_cnt[c * ep + s] = cnt;
        }
    /* the grouped buffer: [local expert][source], each expert aligned */
    acc = 0;
    for (e = 0; e < local; e++) {
        int64_t rows = 0;
        for (s = 0; s < ep; s++)
            rows += counts_all[(int64_t)s * experts + rank * local + e];
        l->expert_rows[e] = rows;
        l->expert_off[e] = acc;
        acc += (rows + MT_MOE_ROW_ALIGN - 1) / MT_MOE_ROW_ALIGN * MT_MOE_ROW_ALIGN;
    }
    l->expert_off[local] = acc;
    l->grouped_rows = acc;
    for (c = 0; c < chunks; c++) {
        l->block_begin[c] = b;
        for (e = l->chunk_begin[c]; e < l->chunk_begin[c + 1]; e++) {
            int64_t g = l->expert_off[e];
            for (s = 0; s < ep; s++) {
                int64_t r = recv_base[s],
                        rows = counts_all[(int64_t)s * experts + rank * local + e];
                int f;
                for (f = 0; f < e; f++)
                    r += counts_all[(int64_t)s * experts + rank * local + f];
                l->blocks[b].recv_row = r;
                l->blocks[b].grouped_row = g;
                l->blocks[b].rows = rows;
                g += rows;
                b++;
            }
        }
    }
    l->block_begin[chunks] = b;
    free(recv_base);
    return l;
}
