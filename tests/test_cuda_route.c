/*
 * test_cuda_route.c - the routing of the native MoE layer benchmark
 * (workers/cuda/moe_route.c), on the CPU: forced plans (balanced and Zipf:
 * exact counts, distinct experts per token, determinism by seed), router
 * top-k, the permutation and its inverse, the EP split, and the chunked EP
 * layout driven through a simulated all-to-all and back.
 */
#include "moe_route.h"
#include "testkit.h"

#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int64_t sum64(const int64_t *v, int n)
{
    int64_t s = 0;
    int i;
    for (i = 0; i < n; i++)
        s += v[i];
    return s;
}

static int cmp_desc(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* every token's experts distinct and in range; counts of the plan */
static void plan_counts(const int32_t *ids, int T, int K, int E, int64_t *counts)
{
    int t, j, i;
    memset(counts, 0, sizeof *counts * (size_t)E);
    for (t = 0; t < T; t++)
        for (j = 0; j < K; j++) {
            int32_t e = ids[t * K + j];
            ck_assert_int_ge(e, 0);
            ck_assert_int_lt(e, E);
            for (i = 0; i < j; i++)
                ck_assert_msg(ids[t * K + i] != e, "token %d has expert %d twice", t, e);
            counts[e]++;
        }
}

START_TEST(balanced_counts_equal)
{
    int64_t q[8], c[8];
    int32_t *ids = malloc(sizeof *ids * 100 * 2);
    int e;
    ck_assert_int_eq(mt_moe_route_quotas(MT_MOE_ROUTE_BALANCED, 0, 100, 2, 8, 7, q), 0);
    for (e = 0; e < 8; e++)
        ck_assert_int_eq(q[e], 25);
    ck_assert_int_eq(mt_moe_route_generate(MT_MOE_ROUTE_BALANCED, 0, 100, 2, 8, 7, 3, ids), 0);
    plan_counts(ids, 100, 2, 8, c);
    for (e = 0; e < 8; e++)
        ck_assert_int_eq(c[e], 25);
    free(ids);
    /* not divisible: counts differ by at most one and sum to T*K */
    {
        int64_t q6[6], lo = 1000, hi = 0;
        ck_assert_int_eq(mt_moe_route_quotas(MT_MOE_ROUTE_BALANCED, 0, 10, 4, 6, 1, q6), 0);
        ck_assert_int_eq(sum64(q6, 6), 40);
        for (e = 0; e < 6; e++) {
            lo = q6[e] < lo ? q6[e] : lo;
            hi = q6[e] > hi ? q6[e] : hi;
        }
        ck_assert_int_le(hi - lo, 1);
    }
}
END_TEST

START_TEST(zipf_skew_order)
{
    enum { T = 4096, K = 2, E = 64 };
    int64_t q[E], s[E], c[E];
    int32_t *ids = malloc(sizeof *ids * T * K);
    double h = 0;
    int e;
    ck_assert_int_eq(mt_moe_route_quotas(MT_MOE_ROUTE_ZIPF, 1.0, T, K, E, 11, q), 0);
    ck_assert_int_eq(sum64(q, E), (int64_t)T * K);
    memcpy(s, q, sizeof s);
    qsort(s, E, sizeof s[0], cmp_desc);
    /* no cap reached here (the hottest share is about 1728 < T): the i-th
     * largest count is T*K / i / H_E, within one of rounding */
    for (e = 1; e <= E; e++)
        h += 1.0 / e;
    for (e = 0; e < E; e++) {
        double want = (double)T * K / (e + 1) / h;
        ck_assert_msg(fabs((double)s[e] - want) <= 1.0, "rank %d: %lld, Zipf wants %.2f", e + 1,
                      (long long)s[e], want);
    }
    ck_assert_int_gt(s[0], 5 * s[E / 2]); /* skewed indeed */
    ck_assert_int_eq(mt_moe_route_generate(MT_MOE_ROUTE_ZIPF, 1.0, T, K, E, 11, 0, ids), 0);
    plan_counts(ids, T, K, E, c);
    for (e = 0; e < E; e++)
        ck_assert_int_eq(c[e], q[e]);
    /* the hot experts are the same on another rank */
    ck_assert_int_eq(mt_moe_route_generate(MT_MOE_ROUTE_ZIPF, 1.0, T, K, E, 11, 5, ids), 0);
    plan_counts(ids, T, K, E, c);
    for (e = 0; e < E; e++)
        ck_assert_int_eq(c[e], q[e]);
    free(ids);
}
END_TEST

START_TEST(zipf_cap_at_tokens)
{
    /* alpha 3: the hottest expert would take 83% of 4 slots a token: capped at
     * one per token, the rest shared */
    int64_t q[8], s[8];
    int32_t ids[50 * 4];
    int64_t c[8];
    int e;
    ck_assert_int_eq(mt_moe_route_quotas(MT_MOE_ROUTE_ZIPF, 3.0, 50, 4, 8, 2, q), 0);
    ck_assert_int_eq(sum64(q, 8), 200);
    memcpy(s, q, sizeof s);
    qsort(s, 8, sizeof s[0], cmp_desc);
    ck_assert_int_eq(s[0], 50);
    for (e = 0; e < 8; e++)
        ck_assert_int_le(q[e], 50);
    for (e = 1; e < 8; e++)
        ck_assert_int_le(s[e], s[e - 1]);
    ck_assert_int_eq(mt_moe_route_generate(MT_MOE_ROUTE_ZIPF, 3.0, 50, 4, 8, 2, 1, ids), 0);
    plan_counts(ids, 50, 4, 8, c);
    for (e = 0; e < 8; e++)
        ck_assert_int_eq(c[e], q[e]);
    /* topk == experts: every token takes every expert */
    ck_assert_int_eq(mt_moe_route_quotas(MT_MOE_ROUTE_ZIPF, 2.0, 30, 8, 8, 2, q), 0);
    for (e = 0; e < 8; e++)
        ck_assert_int_eq(q[e], 30);
}
END_TEST

START_TEST(plans_deterministic_by_seed)
{
    enum { T = 512, K = 4, E = 32 };
    int32_t *a = malloc(sizeof *a * T * K), *b = malloc(sizeof *b * T * K);
    mt_moe_routing m;
    for (m = MT_MOE_ROUTE_BALANCED; m <= MT_MOE_ROUTE_ZIPF; m++) {
        ck_assert_int_eq(mt_moe_route_generate(m, 1.2, T, K, E, 99, 2, a), 0);
        ck_assert_int_eq(mt_moe_route_generate(m, 1.2, T, K, E, 99, 2, b), 0);
        ck_assert(!memcmp(a, b, sizeof *a * T * K));
        ck_assert_int_eq(mt_moe_route_generate(m, 1.2, T, K, E, 100, 2, b), 0);
        ck_assert(memcmp(a, b, sizeof *a * T * K));
        ck_assert_int_eq(mt_moe_route_generate(m, 1.2, T, K, E, 99, 3, b), 0);
        ck_assert(memcmp(a, b, sizeof *a * T * K)); /* other tokens, other rank */
    }
    free(a);
    free(b);
}
END_TEST

START_TEST(bad_sizes_refused)
{
    int64_t q[4];
    int32_t ids[16];
    ck_assert_int_eq(mt_moe_route_quotas(MT_MOE_ROUTE_BALANCED, 0, 4, 5, 4, 1, q), -EINVAL);
    ck_assert_int_eq(mt_moe_route_quotas(MT_MOE_ROUTE_ZIPF, -1, 4, 2, 4, 1, q), -EINVAL);
    ck_assert_int_eq(mt_moe_route_quotas(MT_MOE_ROUTE_ZIPF, NAN, 4, 2, 4, 1, q), -EINVAL);
    ck_assert_int_eq(mt_moe_route_quotas((mt_moe_routing)7, 0, 4, 2, 4, 1, q), -EINVAL);
    ck_assert_int_eq(mt_moe_route_generate(MT_MOE_ROUTE_BALANCED, 0, 0, 2, 4, 1, 0, ids), -EINVAL);
    ck_assert_int_eq(mt_moe_route_sizes_ok(8, 2, 6, 4), -EINVAL);        /* 6 % 4 */
    ck_assert_int_eq(mt_moe_route_sizes_ok(1 << 28, 8, 64, 1), -EINVAL); /* 2^31 rows */
    ck_assert_int_eq(mt_moe_route_sizes_ok(8, 33, 64, 1), -EINVAL);
    ck_assert_int_eq(mt_moe_route_sizes_ok(8, 2, 2048, 1), -EINVAL);
    ck_assert_int_eq(mt_moe_route_sizes_ok(8, 2, 8, 8), 0);
}
END_TEST

START_TEST(topk_order_ties_nan)
{
    float lg[2 * 5] = {0.5f, 2.0f, -1.0f, 2.0f,  1.0f, /* tie 2.0: expert 1 before 3 */
                       NAN,  3.0f, NAN,   -7.0f, 3.0f};
    int32_t ids[2 * 3];
    float pr[10];
    ck_assert_int_eq(mt_moe_topk(lg, 2, 5, 3, ids, pr), 0);
    ck_assert_int_eq(ids[0], 1);
    ck_assert_int_eq(ids[1], 3);
    ck_assert_int_eq(ids[2], 4);
    ck_assert_int_eq(ids[3], 1); /* numbers before NaN, ties to the lower id */
    ck_assert_int_eq(ids[4], 4);
    ck_assert_int_eq(ids[5], 3);
    {
        double s = 0;
        int e;
        for (e = 0; e < 5; e++)
            s += pr[e];
        ck_assert(fabs(s - 1.0) < 1e-6);
        ck_assert(fabs(pr[1] - pr[3]) < 1e-7);
        ck_assert(pr[1] > pr[4] && pr[4] > pr[0] && pr[0] > pr[2]);
    }
    ck_assert_int_eq(mt_moe_topk(lg, 2, 5, 6, ids, NULL), -EINVAL);
}
END_TEST

START_TEST(permutation_bijective_stable)
{
    enum { T = 300, K = 3, E = 7 };
    int32_t ids[T * K], pos[T * K], inv[T * K];
    int64_t counts[E], offs[E + 1];
    unsigned char *seen = calloc(T * K, 1);
    int f, e;
    ck_assert_int_eq(mt_moe_route_generate(MT_MOE_ROUTE_ZIPF, 0.8, T, K, E, 5, 0, ids), 0);
    ck_assert_int_eq(mt_moe_permute(ids, T, K, E, counts, offs, pos, inv), 0);
    ck_assert_int_eq(offs[E], T * K);
    for (f = 0; f < T * K; f++) {
        ck_assert_int_ge(pos[f], 0);
        ck_assert_int_lt(pos[f], T * K);
        ck_assert(!seen[pos[f]]);
        seen[pos[f]] = 1;
        ck_assert_int_eq(inv[pos[f]], f); /* the inverse */
        /* the row lies in its expert's range */
        ck_assert_int_ge(pos[f], offs[ids[f]]);
        ck_assert_int_lt(pos[f], offs[ids[f]] + counts[ids[f]]);
    }
    for (e = 0; e < E; e++) /* stable: token-slot order inside an expert */
        for (f = (int)offs[e] + 1; f < offs[e + 1]; f++)
            ck_assert_int_lt(inv[f - 1], inv[f]);
    free(seen);
    ids[4] = E;
    ck_assert_int_eq(mt_moe_permute(ids, T, K, E, counts, offs, pos, inv), -EINVAL);
}
END_TEST

START_TEST(ep_split_counts)
{
    /* ep 2, 4 experts: rank 0 owns 0-1, rank 1 owns 2-3 */
    int64_t all[2 * 4] = {5, 1, 2, 7,  /* from rank 0 */
                          0, 3, 4, 9}; /* from rank 1 */
    int64_t s0[2], r0[2], s1[2], r1[2];
    ck_assert_int_eq(mt_moe_ep_split(all, 2, 4, 0, s0, r0), 0);
    ck_assert_int_eq(mt_moe_ep_split(all, 2, 4, 1, s1, r1), 0);
    ck_assert_int_eq(s0[0], 6);
    ck_assert_int_eq(s0[1], 9);
    ck_assert_int_eq(s1[0], 3);
    ck_assert_int_eq(s1[1], 13);
    ck_assert_int_eq(r0[0], s0[0]);
    ck_assert_int_eq(r0[1], s1[0]);
    ck_assert_int_eq(r1[0], s0[1]);
    ck_assert_int_eq(r1[1], s1[1]);
    ck_assert_int_eq(mt_moe_ep_split(all, 3, 4, 0, s0, r0), -EINVAL);
    ck_assert_int_eq(mt_moe_ep_split(all, 2, 4, 2, s0, r0), -EINVAL);
}
END_TEST

/* A row's label: (source rank, flat index) packed. */
#define LABEL(r, f) ((int64_t)(r) << 32 | (int64_t)(f))

/*
 * The layout end to end on the CPU: every rank's permuted buffer of labels,
 * dispatched chunk by chunk with the tables (send_off/cnt to recv_off/cnt),
 * reordered into the grouped buffer, checked (each grouped row's label was
 * routed to that expert, every row arrives once, padding untouched), then
 * brought back (grouped -> receive order -> combine) to where it started.
 */
static void layout_roundtrip(int ep, int E, int T, int K, int chunks, mt_moe_routing m)
{
    int L = E / ep, r, p, c, e, f;
    int64_t *all = calloc((size_t)(ep * E), sizeof *all), offs[1025];
    int32_t **ids = calloc((size_t)ep, sizeof *ids), *pos = malloc(sizeof *pos * T * K);
    int32_t **inv = calloc((size_t)ep, sizeof *inv);
    int64_t **send = calloc((size_t)ep, sizeof *send), **recv = calloc((size_t)ep, sizeof *recv);
    int64_t **grp = calloc((size_t)ep, sizeof *grp), **back = calloc((size_t)ep, sizeof *back);
    mt_moe_layout **lay = calloc((size_t)ep, sizeof *lay);
    for (r = 0; r < ep; r++) {
        ids[r] = malloc(sizeof(int32_t) * T * K);
        inv[r] = malloc(sizeof(int32_t) * T * K);
        ck_assert_int_eq(mt_moe_route_generate(m, 1.1, T, K, E, 3, r, ids[r]), 0);
        ck_assert_int_eq(mt_moe_permute(ids[r], T, K, E, all + r * E, offs, pos, inv[r]), 0);
    }
    for (r = 0; r < ep; r++) {
        lay[r] = mt_moe_layout_new(all, ep, E, r, chunks);
        ck_assert_ptr_nonnull(lay[r]);
        ck_assert_int_eq(lay[r]->send_rows, T * K);
        send[r] = malloc(sizeof(int64_t) * T * K);
        back[r] = calloc((size_t)T * K, sizeof(int64_t));
        for (f = 0; f < T * K; f++)
            send[r][f] = LABEL(r, inv[r][f]);
        recv[r] = calloc((size_t)lay[r]->recv_rows + 1, sizeof(int64_t));
        grp[r] = malloc(sizeof(int64_t) * (size_t)(lay[r]->grouped_rows + 1));
        for (f = 0; f < lay[r]->grouped_rows; f++)
            grp[r][f] = -1;
        for (e = 0; e < L; e++) {
            ck_assert_int_eq(lay[r]->expert_off[e] % MT_MOE_ROW_ALIGN, 0);
            ck_assert_int_ge(lay[r]->expert_off[e + 1] - lay[r]->expert_off[e],
                             lay[r]->expert_rows[e]);
        }
    }
    /* dispatch: r sends chunk c to p; p receives it from r */
    for (c = 0; c < chunks; c++)
        for (r = 0; r < ep; r++)
            for (p = 0; p < ep; p++) {
                int64_t n = lay[r]->send_cnt[c * ep + p];
                ck_assert_int_eq(n, lay[p]->recv_cnt[c * ep + r]);
                memcpy(recv[p] + lay[p]->recv_off[c * ep + r],
                       send[r] + lay[r]->send_off[c * ep + p], sizeof(int64_t) * (size_t)n);
            }
    for (r = 0; r < ep; r++) {
        int64_t moved = 0;
        for (c = 0; c < chunks; c++) {
            int b;
            for (b = lay[r]->block_begin[c]; b < lay[r]->block_begin[c + 1]; b++) {
                const mt_moe_block *k = &lay[r]->blocks[b];
                memcpy(grp[r] + k->grouped_row, recv[r] + k->recv_row, sizeof(int64_t) * k->rows);
                moved += k->rows;
            }
        }
        ck_assert_int_eq(moved, lay[r]->recv_rows);
        for (e = 0; e < L; e++) {
            int64_t i;
            for (i = lay[r]->expert_off[e]; i < lay[r]->expert_off[e + 1]; i++) {
                int64_t lab = grp[r][i];
                if (i >= lay[r]->expert_off[e] + lay[r]->expert_rows[e]) {
                    ck_assert_int_eq(lab, -1); /* padding */
                    continue;
                }
                ck_assert_int_ne(lab, -1);
                ck_assert_int_eq(ids[lab >> 32][lab & 0xffffffff], r * L + e);
            }
        }
    }
    /* and back: grouped -> receive order -> combine into the permuted buffer */
    for (r = 0; r < ep; r++) {
        int b;
        memset(recv[r], 0xff, sizeof(int64_t) * (size_t)lay[r]->recv_rows);
        for (b = 0; b < lay[r]->block_begin[chunks]; b++) {
            const mt_moe_block *k = &lay[r]->blocks[b];
            memcpy(recv[r] + k->recv_row, grp[r] + k->grouped_row, sizeof(int64_t) * k->rows);
        }
    }
    for (c = 0; c < chunks; c++)
        for (r = 0; r < ep; r++)
            for (p = 0; p < ep; p++)
                memcpy(back[p] + lay[p]->send_off[c * ep + r],
                       recv[r] + lay[r]->recv_off[c * ep + p],
                       sizeof(int64_t) * (size_t)lay[r]->recv_cnt[c * ep + p]);
    for (r = 0; r < ep; r++) {
        ck_assert(!memcmp(back[r], send[r], sizeof(int64_t) * T * K));
        mt_moe_layout_destroy(&lay[r]);
        ck_assert_ptr_null(lay[r]);
        free(ids[r]);
        free(inv[r]);
        free(send[r]);
        free(recv[r]);
        free(grp[r]);
        free(back[r]);
    }
    free(all);
    free(ids);
    free(inv);
    free(pos);
    free(send);
    free(recv);
    free(grp);
    free(back);
    free(lay);
}

START_TEST(layout_roundtrip_ep1)
{
    layout_roundtrip(1, 16, 200, 4, 1, MT_MOE_ROUTE_BALANCED);
    layout_roundtrip(1, 16, 200, 4, 4, MT_MOE_ROUTE_ZIPF);
}
END_TEST

START_TEST(layout_roundtrip_ep4_chunks)
{
    layout_roundtrip(4, 32, 128, 8, 1, MT_MOE_ROUTE_BALANCED);
    layout_roundtrip(4, 32, 128, 8, 3, MT_MOE_ROUTE_ZIPF); /* 8 local experts, 3 uneven chunks */
    layout_roundtrip(2, 6, 37, 5, 3, MT_MOE_ROUTE_ZIPF);
}
END_TEST

START_TEST(layout_bad_input)
{
    int64_t all[4] = {1, 2, 3, 4};
    mt_moe_layout *l = NULL;
    ck_assert_ptr_null(mt_moe_layout_new(all, 2, 2, 0, 2)); /* 1 local expert, 2 chunks */
    ck_assert_ptr_null(mt_moe_layout_new(all, 3, 2, 0, 1));
    all[1] = -1;
    ck_assert_ptr_null(mt_moe_layout_new(all, 1, 4, 0, 1));
    mt_moe_layout_destroy(&l);
    mt_moe_layout_destroy(NULL);
    ck_assert_int_eq(mt_moe_chunk_begin(10, 3, 0), 0);
    ck_assert_int_eq(mt_moe_chunk_begin(10, 3, 1), 3);
    ck_assert_int_eq(mt_moe_chunk_begin(10, 3, 2), 6);
    ck_assert_int_eq(mt_moe_chunk_begin(10, 3, 3), 10);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_route");
    TCase *tc = tcase_create("route");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, balanced_counts_equal);
    tcase_add_test(tc, zipf_skew_order);
    tcase_add_test(tc, zipf_cap_at_tokens);
    tcase_add_test(tc, plans_deterministic_by_seed);
    tcase_add_test(tc, bad_sizes_refused);
    tcase_add_test(tc, topk_order_ties_nan);
    tcase_add_test(tc, permutation_bijective_stable);
    tcase_add_test(tc, ep_split_counts);
    tcase_add_test(tc, layout_roundtrip_ep1);
    tcase_add_test(tc, layout_roundtrip_ep4_chunks);
    tcase_add_test(tc, layout_bad_input);
    suite_add_tcase(s, tc);
    return tk_run(s);
}
