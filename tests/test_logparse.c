/*
 * test_logparse.c - the Megatron log parser on real log text: every variant
 * of shared/facts/megatron.md "Log formats" (Megatron-LM and Megatron-Bridge
 * lines as their training loops print them, launcher prefixes, terminal
 * hard-wraps, glued prints), the failure lines a run can end with, hostile
 * input (binary, NUL, non-UTF-8, lines over 1 MiB, truncated files), and
 * complete logs of real moetune-sim runs in both dialects checked against the
 * sim's own model.
 *
 * Needs MT_SIM_BIN (the built moetune-sim), moetune_sim and libcjson besides
 * testkit's definitions.
 */
#include "logparse.h"
#include "sim.h"
#include "testkit.h"

#include <check.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef MT_SIM_BIN
#error "MT_SIM_BIN must name the built moetune-sim"
#endif

extern char **environ;

/* ---- real lines ------------------------------------------------------------------ */

/* Megatron-LM main: timestamp with microseconds, --log-throughput, MoE aux loss. */
#define LM_IT1                                                                                     \
    " [2026-01-01 00:04:22.251668] iteration        1/       5 | consumed samples:         "       \
    "1024 | elapsed time per iteration (ms): 82251.7 | throughput per GPU (TFLOP/s/GPU): 73.3 | "  \
    "learning rate: 3.000000E-04 | global batch size:  1024 | lm loss: 1.162272E+01 | "            \
    "load_balancing_loss: 1.000294E+00 | loss scale: 1.0 | grad norm: 6.331 | number of "          \
    "skipped iterations:   0 | number of nan iterations:   0 |"
#define LM_IT2                                                                                     \
    " [2026-01-01 00:05:05.929770] iteration        2/       5 | consumed samples:         "       \
    "2048 | elapsed time per iteration (ms): 43678.1 | throughput per GPU (TFLOP/s/GPU): 138.1 | " \
    "learning rate: 2.604594E-04 | global batch size:  1024 | lm loss: 1.122687E+01 | "            \
    "load_balancing_loss: 1.000160E+00 | loss scale: 1.0 | grad norm: 5.912 | number of "          \
    "skipped iterations:   0 | number of nan iterations:   0 |"
/* Megatron-Bridge: no microseconds; "Step Time" printed before the iteration line. */
#define BR_STEP2 "Step Time : 43.68s GPU utilization: 138.1MODEL_TFLOP/s/GPU"
#define BR_IT2                                                                                     \
    " [2026-01-01 00:05:05] iteration        2/       5 | consumed samples:         2048 | "       \
    "elapsed time per iteration (ms): 43678.1 | throughput per GPU (TFLOP/s/GPU): 138.1 | "        \
    "learning rate: 2.604594E-04 | global batch size:  1024 | lm loss: 1.122687E+01 | "            \
    "load_balancing_loss: 1.000160E+00 | loss scale: 1.0 | grad norm: 5.912 | number of "          \
    "skipped iterations:   0 | number of nan iterations:   0 |"
#define MEM_MB                                                                                     \
    "[Rank 0] (after 1 iterations) memory (MB) | allocated: 35772.53 | max allocated: 55999.13 "   \
    "| reserved: 38298.60 | max reserved: 58525.20"
#define MEM_GB                                                                                     \
    "[Rank 8] (after 1 iterations) memory (GB) | mem-allocated-gigabytes: 37.51 | "                \
    "mem-max-allocated-gigabytes: 58.719 | mem-reserved-gigabytes: 40.159 | "                      \
    "mem-max-reserved-gigabytes: 61.368 | mem-alloc-retires: 0"
#define WORLD_LINE                                                                                 \
    "using world size: 16, data-parallel size: 8, context-parallel size: 1, hierarchical "         \
    "context-parallel sizes: None, tensor-model-parallel size: 1, "                                \
    "encoder-tensor-model-parallel size: 0, pipeline-model-parallel size: 2, "                     \
    "encoder-pipeline-model-parallel size: 0"
#define THEO_LINE                                                                                  \
    "Theoretical memory footprints: weight and optimizer=34628.12 MB, activation=20226.60 MB, "    \
    "total=54854.72 MB"
#define OOM_LINE                                                                                   \
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total "   \
    "capacity of 79.11 GiB of which 1.06 GiB is free. Including non-PyTorch memory, this "         \
    "process has 78.04 GiB memory in use. Of the allocated memory 74.12 GiB is allocated by "      \
    "PyTorch, and 2.31 GiB is reserved by PyTorch but unallocated."

static const double EPOCH_2026 = 1767225600.0; /* 2026-01-01 00:00:00 */

/* ---- helpers ---------------------------------------------------------------------- */

static mt_logparse *parse_chunked(const char *text, size_t len, size_t chunk)
{
    mt_logparse *p = mt_logparse_new();
    size_t o;
    ck_assert_ptr_nonnull(p);
    for (o = 0; o < len; o += chunk)
        mt_logparse_feed(p, text + o, len - o < chunk ? len - o : chunk);
    mt_logparse_finish(p);
    ck_assert_int_eq(mt_logparse_status(p), 0);
    return p;
}

static mt_logparse *parse(const char *text)
{
    return parse_chunked(text, strlen(text), 1 << 20);
}

/* The i-th record, copied out into one of a few rotating slots. */
static const mt_iteration *iter(const mt_logparse *p, size_t i)
{
    static mt_iteration slot[8];
    static unsigned k;
    mt_iteration *it = &slot[k++ % 8];
    ck_assert_msg(mt_logparse_iteration(p, i, it) == 0, "no iteration record %zu (have %zu)", i,
                  mt_logparse_iterations(p));
    return it;
}

static double loss(const mt_iteration *it, const char *key)
{
    int found;
    double v = mt_iteration_loss(it, key, &found);
    ck_assert_msg(found, "iteration %lld has no '%s'", (long long)it->iteration, key);
    return v;
}

static void expect_near(double got, double want, double tol, const char *what)
{
    ck_assert_msg(fabs(got - want) <= tol, "%s: got %.9g, want %.9g (+-%g)", what, got, want, tol);
}

/* The single event of a kind (asserts there is exactly one). */
static const mt_logevent *one_event(const mt_logparse *p, mt_logevent_kind kind)
{
    const mt_logevent *found = NULL;
    size_t i;
    for (i = 0; i < mt_logparse_events(p); i++)
        if (mt_logparse_event(p, i)->kind == kind) {
            ck_assert_msg(found == NULL, "more than one %s event", mt_logevent_kind_name(kind));
            found = mt_logparse_event(p, i);
        }
    ck_assert_msg(found != NULL, "no %s event", mt_logevent_kind_name(kind));
    return found;
}

static char *json_of(const mt_logparse *p)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(mt_logparse_print(p, f, 1), 0);
    fclose(f);
    return buf;
}

/* Text with a newline inserted every `width` bytes, as a terminal hard-wraps;
 * at_spaces: break after the last space within the width (fold -s). */
static char *wrap(const char *line, size_t width, int at_spaces)
{
    size_t n = strlen(line), o = 0, w = 0;
    char *out = malloc(n * 2 + 2);
    const char *p = line;
    while ((size_t)(p - line) < n) {
        size_t left = n - (size_t)(p - line), take = left < width ? left : width, k;
        if (at_spaces && take == width)
            for (k = take; k > width / 2; k--)
                if (p[k - 1] == ' ') {
                    take = k;
                    break;
                }
        memcpy(out + o, p, take);
        o += take;
        p += take;
        if ((size_t)(p - line) < n)
            out[o++] = '\n';
        w++;
    }
    out[o++] = '\n';
    out[o] = '\0';
    return out;
}

static char *cat(const char *const *parts)
{
    size_t n = 0, i;
    char *s;
    for (i = 0; parts[i]; i++)
        n += strlen(parts[i]) + 1;
    s = malloc(n + 1);
    s[0] = '\0';
    for (i = 0; parts[i]; i++) {
        strcat(s, parts[i]);
        strcat(s, "\n");
    }
    return s;
}

/* ---- iteration lines ---------------------------------------------------------------- */

START_TEST(lm_iteration_line_every_field)
{
    mt_logparse *p = parse(LM_IT1 "\n" LM_IT2 "\n");
    const mt_iteration *it = iter(p, 0);
    ck_assert_uint_eq(mt_logparse_iterations(p), 2);
    ck_assert_int_eq(it->iteration, 1);
    ck_assert_int_eq(it->total, 5);
    ck_assert_int_eq(it->consumed_samples, 1024);
    expect_near(it->timestamp, EPOCH_2026 + 4 * 60 + 22.251668, 1e-6, "timestamp");
    ck_assert_double_eq(it->elapsed_ms, 82251.7);
    ck_assert(it->has & MT_IT_TFLOPS);
    ck_assert_double_eq(it->tflops, 73.3);
    ck_assert_double_eq(it->lr, 3.0e-4);
    ck_assert_int_eq(it->global_batch, 1024);
    ck_assert_int_eq(it->n_losses, 2);
    ck_assert_double_eq(loss(it, "lm loss"), 1.162272e+01);
    ck_assert_double_eq(loss(it, "load_balancing_loss"), 1.000294e+00);
    ck_assert_double_eq(it->loss_scale, 1.0);
    ck_assert_double_eq(it->grad_norm, 6.331);
    ck_assert_int_eq(it->skipped, 0);
    ck_assert_int_eq(it->nan_count, 0);
    ck_assert_int_eq(it->rank, -1);
    ck_assert(it->has & MT_IT_COMPLETE);
    ck_assert(!(it->has & (MT_IT_WRAPPED | MT_IT_GLUED | MT_IT_STEP_TIME | MT_IT_ENERGY)));
    ck_assert_uint_eq(it->line, 1);
    ck_assert_int_eq(iter(p, 1)->iteration, 2);
    ck_assert_double_eq(iter(p, 1)->lr, 2.604594e-04);
    ck_assert_uint_eq(mt_logparse_events(p), 0);
    ck_assert_uint_eq(mt_logparse_counts_get(p)->garbage_lines, 0);
    mt_logparse_destroy(&p);
    ck_assert_ptr_null(p);
}
END_TEST

START_TEST(timestamps_without_microseconds_or_trimmed)
{
    static const char *const forms[] = {
        /* Bridge and older stacks: no .%f */
        " [2026-01-01 00:05:05] iteration        2/       5 | consumed samples:         2048 | "
        "elapsed time per iteration (ms): 43678.1 | learning rate: 2.604594E-04 | global batch "
        "size:  1024 | lm loss: 1.122687E+01 | loss scale: 1.0 | grad norm: 5.912 | number of "
        "skipped iterations:   0 | number of nan iterations:   0 |",
        /* leading space trimmed */
        "[2026-01-01 00:05:05.5] iteration        2/       5 | consumed samples:         2048 | "
        "elapsed time per iteration (ms): 43678.1 | learning rate: 2.604594E-04 | global batch "
        "size:  1024 | lm loss: 1.122687E+01 | loss scale: 1.0 | grad norm: 5.912 | number of "
        "skipped iterations:   0 | number of nan iterations:   0 |",
        /* timestamp trimmed away */
        "iteration        2/       5 | consumed samples:         2048 | elapsed time per iteration "
        "(ms): 43678.1 | learning rate: 2.604594E-04 | global batch size:  1024 | lm loss: "
        "1.122687E+01 | loss scale: 1.0 | grad norm: 5.912 | number of skipped iterations:   0 | "
        "number of nan iterations:   0 |",
        /* timestamp and the leading space trimmed, tab-indented by a pager */
        "\titeration 2/5 | consumed samples: 2048 | elapsed time per iteration (ms): 43678.1 | "
        "learning rate: 2.604594E-04 | global batch size: 1024 | lm loss: 1.122687E+01 | loss "
        "scale: 1.0 | grad norm: 5.912 | number of skipped iterations: 0 | number of nan "
        "iterations: 0 |",
    };
    size_t i;
    for (i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        mt_logparse *p = parse(forms[i]);
        const mt_iteration *it;
        ck_assert_uint_eq(mt_logparse_iterations(p), 1);
        it = iter(p, 0);
        ck_assert_int_eq(it->iteration, 2);
        ck_assert_int_eq(it->total, 5);
        ck_assert_double_eq(it->elapsed_ms, 43678.1);
        ck_assert_double_eq(loss(it, "lm loss"), 1.122687e+01);
        ck_assert_int_eq(it->nan_count, 0);
        ck_assert(!(it->has & MT_IT_TFLOPS)); /* no --log-throughput */
        if (i == 0)
            ck_assert_double_eq(it->timestamp, EPOCH_2026 + 5 * 60 + 5);
        else if (i == 1)
            ck_assert_double_eq(it->timestamp, EPOCH_2026 + 5 * 60 + 5.5);
        else
            ck_assert(!(it->has & MT_IT_TIMESTAMP));
        mt_logparse_destroy(&p);
    }
}
END_TEST

START_TEST(optional_fields)
{
    /* skipped samples, energy and power (--log-energy), num zeros, params
     * norm, Bridge's max attention logit; decoupled learning rate ignored */
    static const char newer[] =
        " [2026-02-06 20:55:02.918469] iteration      292/95367431 | consumed samples:         "
        "9344 | skipped samples:           64 | elapsed time per iteration (ms): 3075.7 | "
        "throughput per GPU (TFLOP/s/GPU): 478.0 | energy per GPU (J/iter/GPU): 1992.5 | power "
        "per GPU (W/GPU): 647.8 | learning rate: 9.568256E-08 | decoupled learning rate: "
        "1.000000E-07 | global batch size:    32 | lm loss: 2.401035E-02 | loss scale: 1.0 | grad "
        "norm: 1.797 | num zeros: 1234 | params norm: 241.562 | max attention logit: 87.125 | "
        "number of skipped iterations:   0 | number of nan iterations:   0 |\n";
    /* an older stack: num zeros as {:.1f}, fp16 loss scale, a skipped step */
    static const char older[] =
        " [2023-05-02 11:20:33] iteration      100/    1000 | consumed samples:        51200 | "
        "elapsed time per iteration (ms): 1520.4 | learning rate: 1.499999E-04 | global batch "
        "size:   512 | lm loss: 6.781234E+00 | loss scale: 65536.0 | grad norm: 2.051 | num "
        "zeros: 0.0 | params norm: 301.334 | number of skipped iterations:   1 | number of nan "
        "iterations:   0 |\n";
    mt_logparse *p = parse(newer);
    const mt_iteration *it = iter(p, 0);
    ck_assert_int_eq(it->iteration, 292);
    ck_assert_int_eq(it->total, 95367431);
    ck_assert_int_eq(it->consumed_samples, 9344);
    ck_assert(it->has & MT_IT_SKIPPED_SAMPLES);
    ck_assert_int_eq(it->skipped_samples, 64);
    ck_assert_double_eq(it->tflops, 478.0);
    ck_assert(it->has & MT_IT_ENERGY && it->has & MT_IT_POWER);
    ck_assert_double_eq(it->energy, 1992.5);
    ck_assert_double_eq(it->power, 647.8);
    ck_assert_double_eq(it->lr, 9.568256e-08);
    ck_assert_int_eq(it->global_batch, 32);
    ck_assert_double_eq(it->num_zeros, 1234);
    ck_assert_double_eq(it->params_norm, 241.562);
    ck_assert(it->has & MT_IT_MAX_LOGIT);
    ck_assert_double_eq(it->max_attention_logit, 87.125);
    ck_assert_int_eq(it->n_losses, 1); /* "decoupled learning rate" is no loss */
    mt_logparse_destroy(&p);

    p = parse(older);
    it = iter(p, 0);
    ck_assert(it->has & MT_IT_NUM_ZEROS);
    ck_assert_double_eq(it->num_zeros, 0.0);
    ck_assert_double_eq(it->loss_scale, 65536.0);
    ck_assert_int_eq(it->skipped, 1);
    ck_assert(!(it->has & (MT_IT_TFLOPS | MT_IT_ENERGY | MT_IT_POWER | MT_IT_MAX_LOGIT |
                           MT_IT_SKIPPED_SAMPLES)));
    expect_near(it->timestamp, 1683026433.0, 0, "2023-05-02 11:20:33");
    mt_logparse_destroy(&p);
}
END_TEST

START_TEST(several_loss_keys_and_nan)
{
    static const char text[] =
        " [2026-03-01 10:00:00.000001] iteration       41/     100 | consumed samples:       "
        "167936 | elapsed time per iteration (ms): 7012.3 | throughput per GPU (TFLOP/s/GPU): "
        "512.4 "
        "| learning rate: 2.985000E-04 | global batch size:  4096 | lm loss: 2.345678E+00 | "
        "load_balancing_loss: 1.012345E+00 | z_loss: 3.210000E-03 | mtp_1 loss: 2.456789E+00 | "
        "seq_load_balancing_loss: 1.000001E+00 | loss scale: 1.0 | grad norm: 0.873 | number of "
        "skipped iterations:   0 | number of nan iterations:   0 |\n"
        " [2026-03-01 10:00:07.000001] iteration       42/     100 | consumed samples:       "
        "172032 | elapsed time per iteration (ms): 7003.9 | throughput per GPU (TFLOP/s/GPU): "
        "513.0 "
        "| learning rate: 2.984000E-04 | global batch size:  4096 | lm loss: NAN | "
        "load_balancing_loss: nan | loss scale: 1.0 | grad norm: nan | number of skipped "
        "iterations:   0 | number of nan iterations:   1 |\n"
        /* a bare "loss" key, and a key given twice (the later value stands) */
        " [2026-03-01 10:00:14.000001] iteration       43/     100 | elapsed time per iteration "
        "(ms): 7001.0 | loss: 2.500000E+00 | lm loss: 2.400000E+00 | lm loss: 2.300000E+00 | "
        "number of skipped iterations:   0 | number of nan iterations:   0 |\n";
    mt_logparse *p = parse(text);
    const mt_iteration *a = iter(p, 0), *b = iter(p, 1), *c = iter(p, 2);
    mt_kv *ev = mt_kv_new();
    ck_assert_int_eq(a->n_losses, 5);
    ck_assert_str_eq(a->loss_key[0], "lm loss");
    ck_assert_str_eq(a->loss_key[2], "z_loss");
    ck_assert_double_eq(loss(a, "lm loss"), 2.345678);
    ck_assert_double_eq(loss(a, "load_balancing_loss"), 1.012345);
    ck_assert_double_eq(loss(a, "z_loss"), 3.21e-3);
    ck_assert_double_eq(loss(a, "mtp_1 loss"), 2.456789);
    ck_assert_double_eq(loss(a, "seq_load_balancing_loss"), 1.000001);
    /* keys are interned: the same text object across lines */
    ck_assert_ptr_eq(a->loss_key[0], b->loss_key[0]);
    ck_assert(isnan(loss(b, "lm loss")));
    ck_assert(isnan(loss(b, "load_balancing_loss")));
    ck_assert(b->has & MT_IT_GRAD_NORM && isnan(b->grad_norm));
    ck_assert_int_eq(b->nan_count, 1);
    ck_assert_int_eq(c->n_losses, 2);
    ck_assert_double_eq(loss(c, "loss"), 2.5);
    ck_assert_double_eq(loss(c, "lm loss"), 2.3);
    /* no NaN error line: the evidence still says which iteration went NaN */
    ck_assert_int_eq(mt_logparse_evidence(p, ev), 0);
    ck_assert_str_eq(mt_kv_get(ev, "log.nan"), "iteration 42: number of nan iterations: 1");
    mt_kv_destroy(&ev);
    mt_logparse_destroy(&p);
}
END_TEST

START_TEST(hard_wrapped_lines_are_reassembled)
{
    /* 55 cuts the "iteration i/n |" head itself */
    static const size_t widths[] = {80, 120, 100, 200, 55};
    size_t w;
    int at_spaces, prefixed;
    for (prefixed = 0; prefixed < 2; prefixed++)
        for (w = 0; w < sizeof widths / sizeof widths[0]; w++)
            for (at_spaces = 0; at_spaces < 2; at_spaces++) {
                const char *line1 = prefixed ? "7: " LM_IT1 : LM_IT1;
                const char *line2 = prefixed ? "7: " MEM_MB : MEM_MB;
                char *a = wrap(line1, widths[w], at_spaces),
                     *b = wrap(LM_IT2, widths[w], at_spaces);
                const char *const parts[] = {a, line2, b, THEO_LINE, NULL};
                char *text = cat(parts);
                mt_logparse *p = parse(text);
                const mt_iteration *i1, *i2;
                ck_assert_msg(mt_logparse_iterations(p) == 2, "width %zu%s: %zu iterations",
                              widths[w], at_spaces ? " (at spaces)" : "",
                              mt_logparse_iterations(p));
                i1 = iter(p, 0);
                i2 = iter(p, 1);
                ck_assert_msg(i1->has & MT_IT_WRAPPED && i1->has & MT_IT_COMPLETE,
                              "width %zu%s%s: not reassembled", widths[w],
                              at_spaces ? " (at spaces)" : "", prefixed ? " (srun prefix)" : "");
                ck_assert_int_eq(i1->iteration, 1);
                ck_assert_double_eq(i1->elapsed_ms, 82251.7);
                ck_assert_double_eq(i1->tflops, 73.3);
                ck_assert_double_eq(loss(i1, "load_balancing_loss"), 1.000294);
                ck_assert_double_eq(i1->grad_norm, 6.331);
                ck_assert_int_eq(i1->nan_count, 0);
                ck_assert_int_eq(i1->rank, prefixed ? 7 : -1);
                ck_assert_int_eq(i2->iteration, 2);
                ck_assert_double_eq(loss(i2, "lm loss"), 1.122687e+01);
                ck_assert_uint_eq(mt_logparse_counts_get(p)->wrapped_lines, 2);
                /* the lines around the wrapped ones are read as they are */
                ck_assert_uint_eq(mt_logparse_ranks(p), 1);
                ck_assert_int_eq(mt_logparse_event_count(p, MT_LOGEV_THEORETICAL_MEMORY), 1);
                mt_logparse_destroy(&p);
                free(text);
                free(a);
                free(b);
            }
}
END_TEST

START_TEST(prints_glued_after_the_final_bar)
{
    /* clang-format off */
    static const char text[] =
        LM_IT1 MEM_MB "\n"
        LM_IT2 "WARNING: HybridEP dispatcher backend unavailable: not supported on B200. "
        "Falling back to alltoall.\n"
        /* an RL run's extra fields after the nan field are fields, not a glued print */
        " [2026-01-01 00:05:49.957097] iteration        3/       5 | consumed samples:         "
        "3072 | elapsed time per iteration (ms): 44027.3 | learning rate: 1.650000E-04 | global "
        "batch size:  1024 | lm loss: 1.098531E+01 | loss scale: 1.0 | grad norm: 5.421 | number "
        "of skipped iterations:   0 | number of nan iterations:   0 | rollout tokens per sec: "
        "1234.5 | policy loss: 1.500000E-01 |\n";
    /* clang-format on */
    mt_logparse *p = parse(text);
    const mt_rank_memory *m;
    const mt_logevent *e;
    ck_assert_uint_eq(mt_logparse_iterations(p), 3);
    ck_assert(iter(p, 0)->has & MT_IT_GLUED);
    ck_assert(iter(p, 1)->has & MT_IT_GLUED);
    ck_assert(!(iter(p, 2)->has & MT_IT_GLUED));
    ck_assert_double_eq(loss(iter(p, 2), "policy loss"), 0.15);
    ck_assert_uint_eq(mt_logparse_counts_get(p)->glued_lines, 2);
    m = mt_logparse_memory_of(p, 0);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(m->max_reserved, llround(58525.20 * 1048576.0));
    e = one_event(p, MT_LOGEV_FALLBACK);
    ck_assert(e->flags & MT_LOGEV_F_DISPATCHER);
    ck_assert_int_eq(e->iteration, 2);
    ck_assert_str_eq(e->text, "WARNING: HybridEP dispatcher backend unavailable: not supported on "
                              "B200. Falling back to alltoall.");
    mt_logparse_destroy(&p);
}
END_TEST

/* ---- launcher prefixes --------------------------------------------------------------- */

START_TEST(srun_label_prefixes_keep_the_rank)
{
    static const char text[] =
        "0: using world size: 16, data-parallel size: 8, context-parallel size: 1, hierarchical "
        "context-parallel sizes: None, tensor-model-parallel size: 1, encoder-tensor-model-"
        "parallel size: 0, pipeline-model-parallel size: 2, encoder-pipeline-model-parallel "
        "size: 0\n"
        "0: ------------------------ arguments ------------------------\n"
        "0:   bf16 ............................................ True\n"
        " 9: WARNING: something else printed by rank 9 meanwhile\n"
        "0:   pipeline_model_parallel_size .................... 2\n"
        "0: -------------------- end of arguments ---------------------\n"
        "15: " LM_IT1 "\n"
        " 0: " MEM_MB "\n"
        " 8: [Rank 8] (after 1 iterations) memory (MB) | allocated: 30000.00 | max allocated: "
        "50000.00 | reserved: 32000.00 | max reserved: 52000.00\n"
        "11: " OOM_LINE "\n";
    mt_logparse *p = parse(text);
    mt_logworld w;
    const mt_logevent *e;
    ck_assert_int_eq(mt_logparse_world(p, &w), 0);
    ck_assert_int_eq(w.world, 16);
    ck_assert_int_eq(w.pp, 2);
    ck_assert_uint_eq(mt_kv_count(mt_logparse_args(p)), 2);
    ck_assert_str_eq(mt_kv_get(mt_logparse_args(p), "pipeline_model_parallel_size"), "2");
    ck_assert_int_eq(iter(p, 0)->rank, 15);
    ck_assert_uint_eq(mt_logparse_ranks(p), 2);
    ck_assert_int_eq(mt_logparse_memory_of(p, 8)->max_reserved, llround(52000.0 * 1048576.0));
    e = one_event(p, MT_LOGEV_OOM);
    ck_assert_int_eq(e->rank, 11);
    ck_assert(!strncmp(e->text, "torch.OutOfMemoryError: CUDA out of memory.", 43));
    mt_logparse_destroy(&p);
}
END_TEST

START_TEST(torchrun_prefixes_keep_the_rank)
{
    static const char text[] =
        "[default0]: " LM_IT1 "\n"
        "[default3]:[rank3]: Traceback (most recent call last):\n"
        "[default3]:[rank3]:   File \"/opt/megatron-lm/pretrain_gpt.py\", line 345, in <module>\n"
        "[default3]:[rank3]: " OOM_LINE "\n"
        "[rank1]:[E0101 00:16:57.964087 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=4821, OpType=ALLTOALL_BASE, "
        "NumelIn=8388608, NumelOut=8388608, Timeout(ms)=600000) ran for 600041 milliseconds "
        "before timing out.\n";
    mt_logparse *p = parse(text);
    ck_assert_int_eq(iter(p, 0)->rank, 0);
    ck_assert_double_eq(iter(p, 0)->elapsed_ms, 82251.7);
    ck_assert_int_eq(one_event(p, MT_LOGEV_TRACEBACK)->rank, 3);
    ck_assert_int_eq(one_event(p, MT_LOGEV_OOM)->rank, 3);
    ck_assert_int_eq(one_event(p, MT_LOGEV_WATCHDOG)->rank, 1);
    ck_assert(!strncmp(one_event(p, MT_LOGEV_WATCHDOG)->text, "[E0101 00:16:57", 15));
    mt_logparse_destroy(&p);
}
END_TEST

/* torchrun under srun -l, one task per node of 8 ranks: "T: [defaultL]:"
 * is rank T * 8 + L once the parser knows the layout (the measurement sets
 * it from the launcher's tasks per node); PyTorch's own "[rankN]:" inside
 * is the global rank already.  Without the layout the local rank stands,
 * as printed. */
START_TEST(srun_and_torchrun_prefixes_compose_the_global_rank)
{
    static const char text[] =
        "1: [default7]: " LM_IT1 "\n"
        "1: [default3]: " OOM_LINE "\n"
        "0: [default2]:[rank2]: Traceback (most recent call last):\n"
        "1: [default5]:[rank13]: Traceback (most recent call last):\n";
    int k;
    for (k = 0; k < 2; k++) {
        mt_logparse *p = mt_logparse_new();
        const mt_logevent *ev;
        size_t i;
        int tb[2] = {-1, -1}, n = 0;
        if (k)
            mt_logparse_set_ranks_per_task(p, 8);
        mt_logparse_feed(p, text, sizeof text - 1);
        mt_logparse_finish(p);
        ck_assert_int_eq(iter(p, 0)->rank, k ? 15 : 7);
        ck_assert_int_eq(one_event(p, MT_LOGEV_OOM)->rank, k ? 11 : 3);
        for (i = 0; i < mt_logparse_events(p); i++)
            if ((ev = mt_logparse_event(p, i))->kind == MT_LOGEV_TRACEBACK && n < 2)
                tb[n++] = ev->rank;
        ck_assert_int_eq(n, 2);
        ck_assert_int_eq(tb[0], 2);
        ck_assert_int_eq(tb[1], 13);
        mt_logparse_destroy(&p);
    }
}
END_TEST

/* ---- memory, arguments, world, validation, theoretical --------------------------------- */

START_TEST(memory_lines_mb_raw_and_gb)
{
    /* clang-format off */
    static const char text[] =
        MEM_MB "\n"
        /* older stacks print the raw float */
        "[Rank 4] (after 10 iterations) memory (MB) | allocated: 12345.6787109375 | max "
        "allocated: 23456.12890625 | reserved: 25600.0 | max reserved: 25600.0\n"
        MEM_GB "\n"
        /* a later report of rank 0: the max keeps the maximum */
        "[Rank 0] (after 2 iterations) memory (MB) | allocated: 36000.00 | max allocated: "
        "55000.00 | reserved: 38298.60 | max reserved: 60000.50\n";
    /* clang-format on */
    mt_logparse *p = parse(text);
    const mt_rank_memory *m0 = mt_logparse_memory_of(p, 0), *m4 = mt_logparse_memory_of(p, 4),
                         *m8 = mt_logparse_memory_of(p, 8);
    ck_assert_uint_eq(mt_logparse_ranks(p), 3);
    ck_assert_int_eq(mt_logparse_rank_memory(p, 0)->rank, 0);
    ck_assert_int_eq(mt_logparse_rank_memory(p, 2)->rank, 8);
    ck_assert(m0 && m4 && m8);
    ck_assert_int_eq(m0->after_iteration, 2);
    ck_assert_int_eq(m0->allocated, llround(36000.0 * 1048576));
    ck_assert_int_eq(m0->max_allocated, llround(55999.13 * 1048576));
    ck_assert_int_eq(m0->max_reserved, llround(60000.5 * 1048576));
    ck_assert(!m0->gigabytes);
    ck_assert_int_eq(m4->allocated, llround(12345.6787109375 * 1048576));
    ck_assert_int_eq(m4->max_allocated, llround(23456.12890625 * 1048576));
    ck_assert_int_eq(m4->max_reserved, 25600LL * 1048576);
    ck_assert(m8->gigabytes);
    ck_assert_int_eq(m8->allocated, 37510000000LL);
    ck_assert_int_eq(m8->max_allocated, 58719000000LL);
    ck_assert_int_eq(m8->reserved, 40159000000LL);
    ck_assert_int_eq(m8->max_reserved, 61368000000LL);
    ck_assert_ptr_null(mt_logparse_memory_of(p, 1));
    mt_logparse_destroy(&p);
}
END_TEST

START_TEST(arguments_dump_as_a_map)
{
    static const char text[] =
        "------------------------ arguments ------------------------\n"
        "  bf16 ............................................ True\n"
        "  cuda_graph_modules .............................. ['moe_router', 'moe_preprocess']\n"
        "  data_path ....................................... ['1.0', '/data/corpus_text']\n"
        "  fp8 ............................................. e4m3\n"
        "  fp8_recipe ...................................... blockwise\n"
        "  inference_dynamic_batching_buffer_overflow_factor  None\n"
        "Traceback is not a dump line and is no dump entry\n"
        "  moe_token_dispatcher_type ....................... flex\n"
        "  tokenizer_model ................................. \n"
        "-------------------- end of arguments ---------------------\n"
        "  after_the_dump .................................. 1\n";
    mt_logparse *p = parse(text);
    const mt_kv *a = mt_logparse_args(p);
    mt_kv *ev = mt_kv_new();
    ck_assert_uint_eq(mt_kv_count(a), 8);
    ck_assert_str_eq(mt_kv_get(a, "bf16"), "True");
    ck_assert_str_eq(mt_kv_get(a, "cuda_graph_modules"), "['moe_router', 'moe_preprocess']");
    ck_assert_str_eq(mt_kv_get(a, "data_path"), "['1.0', '/data/corpus_text']");
    ck_assert_str_eq(mt_kv_get(a, "inference_dynamic_batching_buffer_overflow_factor"), "None");
    ck_assert_str_eq(mt_kv_get(a, "tokenizer_model"), "");
    ck_assert_ptr_null(mt_kv_get(a, "after_the_dump"));
    /* the evidence keys are the argparse dests as printed (fp8 for --fp8-format) */
    ck_assert_int_eq(mt_logparse_evidence(p, ev), 0);
    ck_assert_str_eq(mt_kv_get(ev, "args.fp8"), "e4m3");
    ck_assert_str_eq(mt_kv_get(ev, "args.fp8_recipe"), "blockwise");
    ck_assert_str_eq(mt_kv_get(ev, "args.moe_token_dispatcher_type"), "flex");
    mt_kv_destroy(&ev);
    mt_logparse_destroy(&p);
}
END_TEST

START_TEST(world_size_line_current_and_older)
{
    mt_logparse *p = parse(WORLD_LINE "\n");
    mt_logworld w;
    mt_kv *ev = mt_kv_new();
    ck_assert_int_eq(mt_logparse_world(p, &w), 0);
    ck_assert_int_eq(w.world, 16);
    ck_assert_int_eq(w.dp, 8);
    ck_assert_int_eq(w.cp, 1);
    ck_assert_int_eq(w.tp, 1);
    ck_assert_int_eq(w.pp, 2);
    ck_assert_int_eq(mt_logparse_evidence(p, ev), 0);
    ck_assert_str_eq(mt_kv_get(ev, "log.world"), WORLD_LINE);
    mt_kv_destroy(&ev);
    mt_logparse_destroy(&p);

    p = parse("using world size: 8, data-parallel-size: 4, tensor-model-parallel size: 2, "
              "pipeline-model-parallel size: 1 \n");
    ck_assert_int_eq(mt_logparse_world(p, &w), 0);
    ck_assert_int_eq(w.world, 8);
    ck_assert_int_eq(w.dp, 4);
    ck_assert_int_eq(w.tp, 2);
    ck_assert_int_eq(w.pp, 1);
    ck_assert_int_eq(w.cp, -1);
    mt_logparse_destroy(&p);

    p = parse("no world here\n");
    ck_assert_int_eq(mt_logparse_world(p, &w), -ENOENT);
    mt_logparse_destroy(&p);
}
END_TEST

START_TEST(validation_and_theoretical_memory_lines)
{
    static const char text[] = LM_IT1
        "\n"
        "------------------------------------------------------------------------------------------"
        "\n"
        " validation loss at iteration 10 on validation set | lm loss value: 2.345678E+00 | lm "
        "loss PPL: 1.043997E+01 | \n"
        "------------------------------------------------------------------------------------------"
        "\n"
        " validation loss at the end of training for test data | lm loss value: 2.300000E+00 | lm "
        "loss PPL: 9.974182E+00 | \n" THEO_LINE "\n"
        "Theoretical memory footprints: weight and optimizer=1234.50 MB\n";
    mt_logparse *p = parse(text);
    double w, a, t;
    size_t i, nval = 0;
    for (i = 0; i < mt_logparse_events(p); i++) {
        const mt_logevent *e = mt_logparse_event(p, i);
        if (e->kind != MT_LOGEV_VALIDATION)
            continue;
        if (nval++ == 0) {
            ck_assert_int_eq(e->iteration, 10);
            ck_assert_double_eq(e->value, 2.345678);
        } else {
            ck_assert_int_eq(e->iteration, 1); /* the last iteration logged */
            ck_assert_double_eq(e->value, 2.3);
        }
    }
    ck_assert_uint_eq(nval, 2);
    ck_assert_uint_eq(mt_logparse_event_count(p, MT_LOGEV_THEORETICAL_MEMORY), 2);
    ck_assert_double_eq(mt_logparse_first(p, MT_LOGEV_THEORETICAL_MEMORY)->value, 54854.72);
    /* the later, older-form line (no activation estimate) is the one kept */
    ck_assert_int_eq(mt_logparse_theoretical(p, &w, &a, &t), 0);
    ck_assert_double_eq(w, 1234.5);
    ck_assert(isnan(a) && isnan(t));
    mt_logparse_destroy(&p);
}
END_TEST

/* ---- failure and evidence lines ------------------------------------------------------- */

START_TEST(oom_lines)
{
    static const char text[] = OOM_LINE
        "\n"
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.53 GiB (GPU 0; "
        "79.15 GiB total capacity; 75.12 GiB already allocated; 1.02 GiB free; 77.32 GiB "
        "reserved in total by PyTorch) If reserved memory is >> allocated memory try setting "
        "max_split_size_mb to avoid fragmentation.\n"
        "RuntimeError: CUDA error: out of memory\n"
        /* not an OOM: advice that mentions it */
        "UserWarning: To reduce the chance of running out of memory, set "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n";
    mt_logparse *p = parse(text);
    mt_kv *ev = mt_kv_new();
    ck_assert_uint_eq(mt_logparse_event_count(p, MT_LOGEV_OOM), 3);
    ck_assert_uint_eq(mt_logparse_events(p), 3);
    ck_assert_int_eq(mt_logparse_evidence(p, ev), 0);
    ck_assert_str_eq(mt_kv_get(ev, "log.oom"), OOM_LINE);
    ck_assert(strstr(mt_logparse_event(p, 1)->text, "torch.cuda.OutOfMemoryError") != NULL);
    mt_kv_destroy(&ev);
    mt_logparse_destroy(&p);
}
END_TEST

START_TEST(import_errors_naming_deepep_or_hybridep)
{
    static const char text[] =
        "ImportError: cannot import name 'packaging' from 'pkg_resources'\n"
        "ImportError: DeepEP is not installed. Please install DeepEP package from "
        "https://github.com/deepseek-ai/deepep.\n"
        "ModuleNotFoundError: No module named 'deep_ep'\n"
        "ImportError: cannot import name 'HybridEPBuffer' from 'deep_ep' "
        "(/usr/local/lib/python3.12/dist-packages/deep_ep/__init__.py)\n";
    mt_logparse *p = parse(text);
    mt_kv *ev = mt_kv_new();
    ck_assert_uint_eq(mt_logparse_event_count(p, MT_LOGEV_IMPORT_ERROR), 4);
    ck_assert(!(mt_logparse_event(p, 0)->flags & MT_LOGEV_F_DISPATCHER));
    ck_assert(mt_logparse_event(p, 1)->flags & MT_LOGEV_F_DISPATCHER);
    ck_assert(mt_logparse_event(p, 2)->flags & MT_LOGEV_F_DISPATCHER);
    ck_assert(mt_logparse_event(p, 3)->flags & MT_LOGEV_F_DISPATCHER);
    ck_assert_int_eq(mt_logparse_evidence(p, ev), 0);
    ck_assert_str_eq(mt_kv_get(ev, "log.import_error"),
                     "ImportError: DeepEP is not installed. Please install DeepEP package from "
                     "https://github.com/deepseek-ai/deepep.");
    mt_kv_destroy(&ev);
    mt_logparse_destroy(&p);

    p = parse("ImportError: cannot import name 'packaging' from 'pkg_resources'\n");
    ev = mt_kv_new();
    ck_assert_int_eq(mt_logparse_evidence(p, ev), 0);
    ck_assert_ptr_null(mt_kv_get(ev, "log.import_error"));
    mt_kv_destroy(&ev);
    mt_logparse_destroy(&p);
}
END_TEST

START_TEST(nccl_errors_and_infrastructure)
{
    static const struct {
        const char *line;
        mt_logevent_kind kind;
    } cases[] = {
        {"torch.distributed.DistBackendError: NCCL error in: "
         "../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error (run "
         "with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
         MT_LOGEV_NCCL_ERROR},
        {"ncclSystemError: System call (e.g. socket, malloc) or external library call failed or "
         "device error. ",
         MT_LOGEV_NCCL_ERROR},
        {"ncclUnhandledCudaError: Call to CUDA function failed.", MT_LOGEV_NCCL_ERROR},
        {"node3:2345:2398 [5] enqueue.cc:1453 NCCL WARN Cuda failure 'an illegal memory access "
         "was encountered'",
         MT_LOGEV_NCCL_ERROR},
        {"RuntimeError: NCCL communicator was aborted on rank 3.", MT_LOGEV_NCCL_ERROR},
        {"node3:2345:2401 [5] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from "
         "peer 10.0.0.12<49232> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid "
         "::ffff:10.0.0.11 remoteGid ::ffff:10.0.0.12",
         MT_LOGEV_INFRA},
        {"node7:811:902 [2] NCCL WARN NET/IB : mlx5_2:1 async fatal event: "
         "IBV_EVENT_PORT_ERR",
         MT_LOGEV_INFRA},
        {"ibv_poll_cq failed with status IBV_WC_RETRY_EXC_ERR (transport retry counter exceeded)",
         MT_LOGEV_INFRA},
        {"[Mon Jan  5 03:12:45 2026] NVRM: Xid (PCI:0000:b3:00): 79, pid=12345, name=python, GPU "
         "has fallen off the bus.",
         MT_LOGEV_INFRA},
        {"srun: error: Node failure on node12", MT_LOGEV_INFRA},
        {"slurmstepd: error: *** STEP 4821.0 ON node03 CANCELLED AT 2026-01-05T03:13:02 DUE TO "
         "NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***",
         MT_LOGEV_INFRA},
        {"srun: error: node17: task 96: node lost", MT_LOGEV_INFRA},
        /* workers/cuda's benchmark on a node that cannot host it */
        {"moetune-cuda-moe: no CUDA GPU is visible (cudaGetDeviceCount: CUDA driver version is "
         "insufficient for CUDA runtime version; CUDA_VISIBLE_DEVICES=(unset))",
         MT_LOGEV_INFRA},
        {"moetune-cuda-moe: too few GPUs visible: --expert-model-parallel-size 16 needs 16 GPUs "
         "in this node, 8 visible (CUDA_VISIBLE_DEVICES=(unset))",
         MT_LOGEV_INFRA},
        {"[rank5]:[E0105 03:13:02.000123 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) "
         "Rank 5] Process group watchdog thread terminated with exception: NCCL error",
         MT_LOGEV_NCCL_ERROR},
        {"[E ProcessGroupNCCL.cpp:475] [Rank 2] Watchdog caught collective operation timeout: "
         "WorkNCCL(SeqNum=77, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600343 milliseconds "
         "before timing out.",
         MT_LOGEV_WATCHDOG},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *text = malloc(strlen(cases[i].line) + 2);
        mt_logparse *p;
        const mt_logevent *e;
        sprintf(text, "%s\n", cases[i].line);
        p = parse(text);
        ck_assert_msg(mt_logparse_events(p) == 1, "case %zu: %zu events", i, mt_logparse_events(p));
        e = mt_logparse_event(p, 0);
        ck_assert_msg(e->kind == cases[i].kind, "case %zu: %s, want %s", i,
                      mt_logevent_kind_name(e->kind), mt_logevent_kind_name(cases[i].kind));
        mt_logparse_destroy(&p);
        free(text);
    }
    /* NCCL's informational lines about the IB transport are not failures */
    {
        mt_logparse *p = parse("node3:2345:2345 [5] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB "
                               "[1]mlx5_1:1/IB ; OOB ib0:10.0.0.11<0>\n"
                               "node3:2345:2345 [5] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via "
                               "P2P/IPC\n");
        mt_kv *ev = mt_kv_new();
        ck_assert_uint_eq(mt_logparse_events(p), 0);
        ck_assert_int_eq(mt_logparse_evidence(p, ev), 0);
        ck_assert_ptr_null(mt_kv_get(ev, "log.nccl_error"));
        ck_assert_ptr_null(mt_kv_get(ev, "log.infra"));
        mt_kv_destroy(&ev);
        mt_logparse_destroy(&p);
    }
    /* the watchdog line names its rank; evidence keeps the first of each */
    {
        mt_logparse *p = parse("[E ProcessGroupNCCL.cpp:475] [Rank 2] Watchdog caught collective "
                               "operation timeout: WorkNCCL(SeqNum=77, OpType=ALLREDUCE) ran for "
                               "600343 milliseconds before timing out.\n"
                               "ncclUnhandledCudaError: Call to CUDA function failed.\n"
                               "srun: error: Node failure on node12\n");
        mt_kv *ev = mt_kv_new();
        ck_assert_int_eq(one_event(p, MT_LOGEV_WATCHDOG)->rank, 2);
        ck_assert_int_eq(mt_logparse_evidence(p, ev), 0);
        ck_assert_str_eq(mt_kv_get(ev, "log.nccl_error"),
                         "ncclUnhandledCudaError: Call to CUDA function failed.");
        ck_assert_str_eq(mt_kv_get(ev, "log.infra"), "srun: error: Node failure on node12");
        ck_assert_ptr_nonnull(mt_kv_get(ev, "log.watchdog"));
        mt_kv_destroy(&ev);
        mt_logparse_destroy(&p);
    }
}
END_TEST

START_TEST(cuda_graph_capture_lines)
{
    mt_logparse *p = parse("Start CUDA Graphs capture...\n"
                           "Time spent in CUDA Graphs capture on rank 0: 4.512s\n");
    mt_kv *ev = mt_kv_new();
    ck_assert_uint_eq(mt_logparse_event_count(p, MT_LOGEV_CAPTURE), 2);
    ck_assert_double_eq(mt_logparse_event(p, 1)->value, 4.512);
    ck_assert_int_eq(mt_logparse_evidence(p, ev), 0);
    ck_assert_str_eq(mt_kv_get(ev, "log.cuda_graph_capture"),
                     "Time spent in CUDA Graphs capture on rank 0: 4.512s");
    mt_kv_destroy(&ev);
    mt_logparse_destroy(&p);

    p = parse("Creating 96 CUDA graphs\n");
    ev = mt_kv_new();
    ck_assert_double_eq(one_event(p, MT_LOGEV_CAPTURE)->value, 96);
    ck_assert_int_eq(mt_logparse_evidence(p, ev), 0);
    ck_assert_str_eq(mt_kv_get(ev, "log.cuda_graph_capture"), "Creating 96 CUDA graphs");
    mt_kv_destroy(&ev);
    mt_logparse_destroy(&p);

    p = parse("[default0]: Capture CUDA graph for training!!!\n");
    ev = mt_kv_new();
    ck_assert_int_eq(one_event(p, MT_LOGEV_CAPTURE)->rank, 0);
    ck_assert_int_eq(mt_logparse_evidence(p, ev), 0);
    ck_assert_str_eq(mt_kv_get(ev, "log.cuda_graph_capture"), "Capture CUDA graph for training!!!");
    mt_kv_destroy(&ev);
    mt_logparse_destroy(&p);
}
END_TEST

START_TEST(dispatcher_fallback_warnings)
{
    static const char text[] =
        "UserWarning: flash-attn not found. Falling back to unfused attention.\n"
        "WARNING: DeepEP is not supported on this platform. Falling back to alltoall.\n";
    mt_logparse *p = parse(text);
    mt_kv *ev = mt_kv_new();
    ck_assert_uint_eq(mt_logparse_event_count(p, MT_LOGEV_FALLBACK), 2);
    ck_assert(!(mt_logparse_event(p, 0)->flags & MT_LOGEV_F_DISPATCHER));
    ck_assert(mt_logparse_event(p, 1)->flags & MT_LOGEV_F_DISPATCHER);
    ck_assert_int_eq(mt_logparse_evidence(p, ev), 0);
    ck_assert_str_eq(
        mt_kv_get(ev, "log.dispatcher_fallback"),
        "WARNING: DeepEP is not supported on this platform. Falling back to alltoall.");
    mt_kv_destroy(&ev);
    mt_logparse_destroy(&p);
}
END_TEST

START_TEST(nan_errors_crashes_and_exceptions)
{
    static const char text[] =
        "Traceback (most recent call last):\n"
        "  File \"/opt/megatron-lm/megatron/core/rerun_state_machine.py\", line 521, in "
        "validate_result\n"
        "    raise RuntimeError(full_message)\n"
        "RuntimeError: Rank 3, node node0, device 3, iteration 5: Unexpected result nan "
        "(message='found NaN in local forward loss calculation')\n"
        "AssertionError: Rank 5: found NaN in local grad norm for bucket #0 in backward pass "
        "before data-parallel communication collective. Device: 5, node: node02\n"
        "Fatal Python error: Segmentation fault\n"
        "[rank0] Segmentation fault (core dumped)\n"
        "ValueError: num_layers (61) must be divisible by pipeline_model_parallel_size (8)\n";
    mt_logparse *p = parse(text);
    mt_kv *ev = mt_kv_new();
    ck_assert_uint_eq(mt_logparse_event_count(p, MT_LOGEV_TRACEBACK), 1);
    ck_assert_uint_eq(mt_logparse_event_count(p, MT_LOGEV_NAN), 2);
    ck_assert_int_eq(mt_logparse_first(p, MT_LOGEV_NAN)->rank, 3);
    ck_assert_int_eq(mt_logparse_event(p, 2)->rank, 5);
    ck_assert_uint_eq(mt_logparse_event_count(p, MT_LOGEV_CRASH), 2);
    ck_assert_int_eq(mt_logparse_event(p, 4)->rank, 0);
    ck_assert_uint_eq(mt_logparse_event_count(p, MT_LOGEV_EXCEPTION), 1);
    ck_assert_uint_eq(mt_logparse_events(p), 6);
    ck_assert_int_eq(mt_logparse_evidence(p, ev), 0);
    ck_assert(strstr(mt_kv_get(ev, "log.nan"), "Unexpected result nan") != NULL);
    mt_kv_destroy(&ev);
    mt_logparse_destroy(&p);
}
END_TEST

/* ---- Bridge Step Time ------------------------------------------------------------------ */

START_TEST(bridge_step_time_lines)
{
    /* Bridge's training_log prints Step Time first; the sim after; older
     * stacks say TFLOP/s/GPU; a log with Step Time lines only still gives
     * one record per step */
    static const char before[] = BR_STEP2 "\n" BR_IT2 "\n";
    static const char after[] = BR_IT2 "\nStep Time : 43.68s GPU utilization: 138.1TFLOP/s/GPU\n";
    static const char only[] = "Step Time : 44.03s GPU utilization: 137.0MODEL_TFLOP/s/GPU\n"
                               "Step Time : 45.65s GPU utilization: 132.1MODEL_TFLOP/s/GPU\n"
                               "Step Time : 44.71s GPU utilization: 134.9MODEL_TFLOP/s/GPU\n";
    const char *const both[] = {before, after};
    size_t i;
    mt_logparse *p;
    for (i = 0; i < 2; i++) {
        const mt_iteration *it;
        p = parse(both[i]);
        ck_assert_uint_eq(mt_logparse_iterations(p), 1);
        it = iter(p, 0);
        ck_assert(it->has & MT_IT_STEP_TIME);
        ck_assert(!(it->has & MT_IT_STEP_LINE_ONLY));
        ck_assert_double_eq(it->step_time_s, 43.68);
        ck_assert_double_eq(it->step_tflops, 138.1);
        ck_assert_double_eq(it->elapsed_ms, 43678.1);
        expect_near(it->timestamp, EPOCH_2026 + 5 * 60 + 5, 0, "Bridge timestamp");
        mt_logparse_destroy(&p);
    }
    p = parse(only);
    ck_assert_uint_eq(mt_logparse_iterations(p), 3);
    for (i = 0; i < 3; i++) {
        const mt_iteration *it = iter(p, i);
        ck_assert_int_eq(it->iteration, (int64_t)i + 1);
        ck_assert(it->has & MT_IT_STEP_LINE_ONLY && it->has & MT_IT_TFLOPS);
    }
    ck_assert_double_eq(iter(p, 0)->step_time_s, 44.03);
    ck_assert_double_eq(iter(p, 0)->elapsed_ms, 44030.0);
    ck_assert_double_eq(iter(p, 2)->tflops, 134.9);
    mt_logparse_destroy(&p);
}
END_TEST

/* ---- issue 14: what each stack really prints -------------------------------------------- */

START_TEST(enum_values_in_the_arguments_dump)
{
    /* main's print_args: str() of each value, so an enum list prints its
     * elements' repr and an enum scalar Class.member; the same dump format
     * (48 - len dots, sorted) in core_r0.15.0, v0.18, v0.19 and main */
    static const char text[] =
        "------------------------ arguments ------------------------\n"
        "  attention_backend ............................... AttnBackend.auto\n"
        "  cuda_graph_impl ................................. transformer_engine\n"
        "  cuda_graph_modules .............................. [<CudaGraphModule.moe_router: 4>, "
        "<CudaGraphModule.moe_preprocess: 5>]\n"
        "  cuda_graph_scope ................................ []\n"
        "  load ............................................ /ckpt/Qwen3.safetensors\n"
        "  log_interval .................................... 10\n"
        "  params_dtype .................................... torch.bfloat16\n"
        "  qk_layernorm_backend ............................ <AttnBackend.auto: 5>\n"
        "  mixed_list ...................................... [<CudaGraphModule.attn: 1>, 'x y']\n"
        "  tokenizer_model ................................. Qwen3.Model\n"
        "-------------------- end of arguments ---------------------\n";
    mt_logparse *p = parse(text);
    const mt_kv *a = mt_logparse_args(p);
    mt_kv *ev = mt_kv_new();
    /* the map keeps what was printed */
    ck_assert_str_eq(mt_kv_get(a, "cuda_graph_modules"),
                     "[<CudaGraphModule.moe_router: 4>, <CudaGraphModule.moe_preprocess: 5>]");
    ck_assert_str_eq(mt_kv_get(a, "attention_backend"), "AttnBackend.auto");
    /* the evidence has plain names, as a config value says them */
    ck_assert_int_eq(mt_logparse_evidence(p, ev), 0);
    ck_assert_str_eq(mt_kv_get(ev, "args.cuda_graph_modules"), "moe_router moe_preprocess");
    ck_assert_str_eq(mt_kv_get(ev, "args.attention_backend"), "auto");
    ck_assert_str_eq(mt_kv_get(ev, "args.qk_layernorm_backend"), "auto");
    ck_assert_str_eq(mt_kv_get(ev, "args.mixed_list"), "[attn, 'x y']");
    ck_assert_str_eq(mt_kv_get(ev, "args.cuda_graph_scope"), "[]");
    ck_assert_str_eq(mt_kv_get(ev, "args.cuda_graph_impl"), "transformer_engine");
    ck_assert_str_eq(mt_kv_get(ev, "args.params_dtype"), "torch.bfloat16");
    ck_assert_str_eq(mt_kv_get(ev, "args.load"), "/ckpt/Qwen3.safetensors");
    ck_assert_str_eq(mt_kv_get(ev, "args.tokenizer_model"), "Qwen3.Model");
    mt_kv_destroy(&ev);
    mt_logparse_destroy(&p);
}
END_TEST

/* Bridge >= 0.4 (training/config.py log_non_default_values, print_rank_0 of
 * the joined lines): optimizer, ddp and model against Mcore's defaults, as
 * repr, then every set field of the other configs. */
#define BR_SUMMARY                                                                                 \
    "\n"                                                                                           \
    "======================================================================\n"                     \
    "Configuration Summary (Non-Default Values vs Megatron Core)\n"                                \
    "======================================================================\n"                     \
    "\n"                                                                                           \
    "[optimizer] Non-default values (vs Mcore OptimizerConfig):\n"                                 \
    "  adam_beta2: 0.95  (Mcore default: 0.999)\n"                                                 \
    "  bf16: True  (Mcore default: False)\n"                                                       \
    "  lr: 0.0003  (Mcore default: None)\n"                                                        \
    "  use_distributed_optimizer: True  (Mcore default: False)\n"                                  \
    "\n"                                                                                           \
    "[ddp] Non-default values (vs Mcore DistributedDataParallelConfig):\n"                         \
    "  bucket_size: 40000000  (Mcore default: None)\n"                                             \
    "  grad_reduce_in_fp32: True  (Mcore default: False)\n"                                        \
    "  overlap_grad_reduce: True  (Mcore default: False)\n"                                        \
    "  overlap_param_gather: True  (Mcore default: False)\n"                                       \
    "\n"                                                                                           \
    "[model] Non-default values (vs Mcore TransformerConfig):\n"                                   \
    "  attention_backend: <AttnBackend.fused: 2>  (Mcore default: <AttnBackend.auto: 5>)\n"        \
    "  bf16: True  (Mcore default: False)\n"                                                       \
    "  cuda_graph_impl: 'transformer_engine'  (Mcore default: 'none')\n"                           \
    "  cuda_graph_modules: [<CudaGraphModule.moe_router: 4>, <CudaGraphModule.moe_preprocess: "    \
    "5>]  (Mcore default: 'full')\n"                                                               \
    "  expert_model_parallel_size: 8  (Mcore default: 1)\n"                                        \
    "  fp8: 'e4m3'  (Mcore default: None)\n"                                                       \
    "  fp8_recipe: 'mxfp8'  (Mcore default: 'delayed')\n"                                          \
    "  moe_flex_dispatcher_backend: 'deepep'  (Mcore default: 'deepep')\n"                         \
    "  moe_token_dispatcher_type: 'flex'  (Mcore default: 'allgather')\n"                          \
    "  num_moe_experts: 128  (Mcore default: None)\n"                                              \
    "  overlap_moe_expert_parallel_comm: True  (Mcore default: False)\n"                           \
    "  params_dtype: torch.bfloat16  (Mcore default: torch.float32)\n"                             \
    "  recompute_modules: ['moe_act', 'layernorm']  (Mcore default: ['core_attn'])\n"              \
    "  tensor_model_parallel_size: 2  (Mcore default: 1)\n"                                        \
    "\n"                                                                                           \
    "----------------------------------------------------------------------\n"                     \
    "Other Configuration Values:\n"                                                                \
    "----------------------------------------------------------------------\n"                     \
    "\n"                                                                                           \
    "[train]:\n"                                                                                   \
    "  global_batch_size: 1024\n"                                                                  \
    "  manual_gc: True\n"                                                                          \
    "  micro_batch_size: 1\n"                                                                      \
    "  train_iters: 50\n"                                                                          \
    "\n"                                                                                           \
    "[logger]:\n"                                                                                  \
    "  log_interval: 10\n"                                                                         \
    "  log_throughput: True\n"                                                                     \
    "\n"                                                                                           \
    "[ft]:\n"                                                                                      \
    "  enable_ft_package: False\n"                                                                 \
    "\n"                                                                                           \
    "======================================================================\n"

START_TEST(bridge_non_default_values_as_arguments)
{
    static const char text[] = BR_SUMMARY
        "Traceback (most recent call last):\n" /* after the block: read as ever */
        " [2026-01-01 00:05:05] iteration       10/      50 | consumed samples:        10240 | "
        "elapsed time per iteration (ms): 43678.1 | learning rate: 2.604594E-04 | global batch "
        "size:  1024 | lm loss: 1.122687E+01 | loss scale: 1.0 | grad norm: 5.912 | number of "
        "skipped iterations:   0 | number of nan iterations:   0 |\n";
    mt_logparse *p = parse(text);
    mt_kv *ev = mt_kv_new();
    const mt_kv *a = mt_logparse_args(p);
    ck_assert_int_eq(mt_logparse_evidence(p, ev), 0);
    /* field paths to Megatron dests */
    ck_assert_str_eq(mt_kv_get(ev, "args.tensor_model_parallel_size"), "2");
    ck_assert_str_eq(mt_kv_get(ev, "args.expert_model_parallel_size"), "8");
    ck_assert_str_eq(mt_kv_get(ev, "args.overlap_grad_reduce"), "True");
    ck_assert_str_eq(mt_kv_get(ev, "args.overlap_param_gather"), "True");
    ck_assert_str_eq(mt_kv_get(ev, "args.overlap_moe_expert_parallel_comm"), "True");
    ck_assert_str_eq(mt_kv_get(ev, "args.use_distributed_optimizer"), "True");
    ck_assert_str_eq(mt_kv_get(ev, "args.num_experts"), "128");
    ck_assert_str_eq(mt_kv_get(ev, "args.ddp_bucket_size"), "40000000");
    ck_assert_str_eq(mt_kv_get(ev, "args.accumulate_allreduce_grads_in_fp32"), "True");
    ck_assert_ptr_null(mt_kv_get(ev, "args.num_moe_experts"));
    ck_assert_ptr_null(mt_kv_get(ev, "args.bucket_size"));
    /* repr strings lose their quotes, as Megatron's dump prints them */
    ck_assert_str_eq(mt_kv_get(a, "moe_token_dispatcher_type"), "flex");
    ck_assert_str_eq(mt_kv_get(ev, "args.fp8"), "e4m3");
    ck_assert_str_eq(mt_kv_get(ev, "args.fp8_recipe"), "mxfp8");
    ck_assert_str_eq(mt_kv_get(ev, "args.moe_flex_dispatcher_backend"), "deepep");
    ck_assert_str_eq(mt_kv_get(ev, "args.bf16"), "True");
    ck_assert_str_eq(mt_kv_get(ev, "args.recompute_modules"), "['moe_act', 'layernorm']");
    ck_assert_str_eq(mt_kv_get(ev, "args.params_dtype"), "torch.bfloat16");
    /* enums as names, the Mcore default left out */
    ck_assert_str_eq(mt_kv_get(ev, "args.attention_backend"), "fused");
    ck_assert_str_eq(mt_kv_get(ev, "args.cuda_graph_modules"), "moe_router moe_preprocess");
    ck_assert_str_eq(mt_kv_get(ev, "args.cuda_graph_impl"), "transformer_engine");
    /* the other configs */
    ck_assert_str_eq(mt_kv_get(ev, "args.global_batch_size"), "1024");
    ck_assert_str_eq(mt_kv_get(ev, "args.manual_gc"), "True");
    ck_assert_str_eq(mt_kv_get(ev, "args.log_interval"), "10");
    ck_assert_ptr_null(mt_kv_get(ev, "args.enable_ft_package")); /* not a Megatron config */
    ck_assert_uint_eq(mt_kv_count(a), 27);
    /* the block is no event; what follows it is read as ever */
    ck_assert_uint_eq(mt_logparse_event_count(p, MT_LOGEV_TRACEBACK), 1);
    ck_assert_uint_eq(mt_logparse_events(p), 1);
    ck_assert_uint_eq(mt_logparse_iterations(p), 1);
    ck_assert_int_eq(iter(p, 0)->iteration, 10);
    mt_kv_destroy(&ev);
    mt_logparse_destroy(&p);

    /* srun -l prefixes every line; another rank's line inside does not end it */
    {
        const char *const parts[] = {
            "0: [model] Non-default values (vs Mcore TransformerConfig):",
            "3: WARNING: rank 3 says something meanwhile",
            "0:   tensor_model_parallel_size: 4  (Mcore default: 1)",
            "0:   moe_token_dispatcher_type: 'alltoall'  (Mcore default: 'allgather')",
            "0: ======================================================================",
            "0:   after_the_block: 1",
            NULL};
        char *t = cat(parts);
        p = parse(t);
        a = mt_logparse_args(p);
        ck_assert_str_eq(mt_kv_get(a, "tensor_model_parallel_size"), "4");
        ck_assert_str_eq(mt_kv_get(a, "moe_token_dispatcher_type"), "alltoall");
        ck_assert_ptr_null(mt_kv_get(a, "after_the_block"));
        ck_assert_uint_eq(mt_kv_count(a), 2);
        mt_logparse_destroy(&p);
        free(t);
    }
}
END_TEST

START_TEST(bridge_yaml_config_as_arguments)
{
    /* Bridge <= 0.3 (setup.py maybe_log_and_save_config): the whole
     * ConfigContainer through yaml.safe_dump (keys sorted, block style,
     * lists at their key's indent; enums, dtypes and callables as
     * _target_ mappings) */
    static const char text[] =
        "------- Task Configuration -------\n"
        "_target_: megatron.bridge.training.config.ConfigContainer\n"
        "comm_overlap:\n"
        "  _target_: megatron.bridge.training.comm_overlap.CommOverlapConfig\n"
        "  tp_comm_overlap: false\n"
        "ddp:\n"
        "  _target_: megatron.core.distributed.distributed_data_parallel_config."
        "DistributedDataParallelConfig\n"
        "  average_in_collective: true\n"
        "  bucket_size: null\n"
        "  overlap_grad_reduce: true\n"
        "  overlap_param_gather: true\n"
        "  use_distributed_optimizer: true\n"
        "logger:\n"
        "  log_interval: 1\n"
        "mixed_precision: bf16_mixed\n"
        "model:\n"
        "  _target_: megatron.bridge.models.qwen.qwen_provider.Qwen3MoEModelProvider30B_A3B\n"
        "  attention_backend:\n"
        "    _args_:\n"
        "    - 5\n"
        "    _call_: true\n"
        "    _target_: megatron.core.transformer.enums.AttnBackend\n"
        "  cuda_graph_scope:\n"
        "  - moe_router\n"
        "  - moe_preprocess\n"
        "  expert_model_parallel_size: 8\n"
        "  moe_token_dispatcher_type: alltoall\n"
        "  num_moe_experts: 128\n"
        "  params_dtype:\n"
        "    _call_: false\n"
        "    _target_: torch.bfloat16\n"
        "  pipeline_model_parallel_layout: null\n"
        "  recompute_modules:\n"
        "  - _args_:\n"
        "    - 1\n"
        "    _target_: some.Enum\n"
        "  tensor_model_parallel_size: 2\n"
        "  tokenizer_path: 'Qwen/Qwen3-30B-A3B'\n"
        "train:\n"
        "  global_batch_size: 512\n"
        "  train_iters: 50\n"
        "\n"
        "----------------------------------\n"
        "  after_the_block: 1\n";
    mt_logparse *p = parse(text);
    const mt_kv *a = mt_logparse_args(p);
    mt_kv *ev = mt_kv_new();
    ck_assert_str_eq(mt_kv_get(a, "tensor_model_parallel_size"), "2");
    ck_assert_str_eq(mt_kv_get(a, "expert_model_parallel_size"), "8");
    ck_assert_str_eq(mt_kv_get(a, "num_experts"), "128");
    ck_assert_str_eq(mt_kv_get(a, "moe_token_dispatcher_type"), "alltoall");
    ck_assert_str_eq(mt_kv_get(a, "overlap_grad_reduce"), "True");
    ck_assert_str_eq(mt_kv_get(a, "ddp_average_in_collective"), "True");
    ck_assert_str_eq(mt_kv_get(a, "ddp_bucket_size"), "None");
    ck_assert_str_eq(mt_kv_get(a, "tp_comm_overlap"), "False");
    ck_assert_str_eq(mt_kv_get(a, "mixed_precision"), "bf16_mixed");
    ck_assert_str_eq(mt_kv_get(a, "pipeline_model_parallel_layout"), "None");
    ck_assert_str_eq(mt_kv_get(a, "tokenizer_path"), "Qwen/Qwen3-30B-A3B");
    ck_assert_str_eq(mt_kv_get(a, "cuda_graph_scope"), "['moe_router', 'moe_preprocess']");
    ck_assert_str_eq(mt_kv_get(a, "log_interval"), "1");
    ck_assert_str_eq(mt_kv_get(a, "global_batch_size"), "512");
    /* mappings (an enum's number, a dtype) are no value: absent, not wrong */
    ck_assert_ptr_null(mt_kv_get(a, "attention_backend"));
    ck_assert_ptr_null(mt_kv_get(a, "params_dtype"));
    ck_assert_ptr_null(mt_kv_get(a, "recompute_modules"));
    ck_assert_ptr_null(mt_kv_get(a, "_target_"));
    ck_assert_ptr_null(mt_kv_get(a, "after_the_block"));
    ck_assert_int_eq(mt_logparse_evidence(p, ev), 0);
    ck_assert_str_eq(mt_kv_get(ev, "args.cuda_graph_scope"), "['moe_router', 'moe_preprocess']");
    ck_assert_uint_eq(mt_logparse_events(p), 0);
    mt_kv_destroy(&ev);
    mt_logparse_destroy(&p);

    /* a block cut short: what begins something else ends it and is read */
    p = parse("------- Task Configuration -------\n"
              "model:\n"
              "  tensor_model_parallel_size: 4\n"
              "ImportError: cannot import name 'buffer' from 'deep_ep'\n"
              "  expert_model_parallel_size: 8\n");
    a = mt_logparse_args(p);
    ck_assert_str_eq(mt_kv_get(a, "tensor_model_parallel_size"), "4");
    ck_assert_ptr_null(mt_kv_get(a, "expert_model_parallel_size"));
    ck_assert(one_event(p, MT_LOGEV_IMPORT_ERROR)->flags & MT_LOGEV_F_DISPATCHER);
    mt_logparse_destroy(&p);
}
END_TEST

/* Bridge's report_memory: MEMORY_KEYS in order, bytes as GB (1e9) rounded
 * to 5 significant digits, the two counts as they are. */
#define MEM_GB10                                                                                   \
    "[Rank 0] (after 2 iterations) memory (GB) | mem-allocated-gigabytes: 37.51 | "                \
    "mem-active-gigabytes: 37.492 | mem-inactive-gigabytes: 1.2346 | mem-reserved-gigabytes: "     \
    "40.159 | mem-max-allocated-gigabytes: 58.719 | mem-max-active-gigabytes: 58.7 | "             \
    "mem-max-inactive-gigabytes: 3.5791 | mem-max-reserved-gigabytes: 61.368 | "                   \
    "mem-alloc-retires: 2 | mem-allocated-count: 4187"

static void check_gb10(const mt_rank_memory *m)
{
    ck_assert_ptr_nonnull(m);
    ck_assert(m->gigabytes);
    ck_assert_int_eq(m->after_iteration, 2);
    ck_assert_int_eq(m->allocated, 37510000000LL);
    ck_assert_int_eq(m->active, 37492000000LL);
    ck_assert_int_eq(m->inactive, 1234600000LL);
    ck_assert_int_eq(m->reserved, 40159000000LL);
    ck_assert_int_eq(m->max_allocated, 58719000000LL);
    ck_assert_int_eq(m->max_active, 58700000000LL);
    ck_assert_int_eq(m->max_inactive, 3579100000LL);
    ck_assert_int_eq(m->max_reserved, 61368000000LL);
    ck_assert_int_eq(m->alloc_retries, 2);
    ck_assert_int_eq(m->alloc_count, 4187);
}

START_TEST(bridge_memory_line_all_ten_keys)
{
    mt_logparse *p = parse(MEM_GB10 "\n" MEM_MB "\n");
    const mt_rank_memory *m = mt_logparse_memory_of(p, 0);
    char *json;
    cJSON *o, *mem;
    /* the MB line of rank 0 after it: the latest values, the larger max */
    ck_assert_int_eq(m->allocated, llround(35772.53 * 1048576.0));
    ck_assert_int_eq(m->max_reserved, llround(58525.20 * 1048576.0));
    ck_assert_int_eq(m->max_inactive, 3579100000LL);
    mt_logparse_destroy(&p);

    p = parse(MEM_GB10 "\n");
    check_gb10(mt_logparse_memory_of(p, 0));
    json = json_of(p);
    o = cJSON_Parse(json);
    mem = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "memory"), 0);
    ck_assert_double_eq(cJSON_GetObjectItem(mem, "max_inactive_bytes")->valuedouble, 3579100000.0);
    ck_assert_double_eq(cJSON_GetObjectItem(mem, "alloc_retries")->valuedouble, 2.0);
    ck_assert_double_eq(cJSON_GetObjectItem(mem, "alloc_count")->valuedouble, 4187.0);
    cJSON_Delete(o);
    free(json);
    mt_logparse_destroy(&p);

    /* an MB line has none of Bridge's extra keys */
    p = parse(MEM_MB "\n");
    m = mt_logparse_memory_of(p, 0);
    ck_assert_int_eq(m->active, -1);
    ck_assert_int_eq(m->max_inactive, -1);
    ck_assert_int_eq(m->alloc_count, -1);
    mt_logparse_destroy(&p);
}
END_TEST

START_TEST(mtp_loss_energy_power_and_skipped_samples)
{
    /* main (--log-energy, MTP, samples skipped) and Bridge (its own
     * training_log: energy after throughput, no microseconds) */
    static const char *const lines[] = {
        " [2026-03-01 10:00:00.000001] iteration       20/     100 | consumed samples:        "
        "81920 | skipped samples:          128 | elapsed time per iteration (ms): 7012.3 | "
        "throughput per GPU (TFLOP/s/GPU): 512.4 | energy per GPU (J/iter/GPU): 4821.6 | power "
        "per GPU (W/GPU): 687.6 | learning rate: 2.985000E-04 | global batch size:  4096 | lm "
        "loss: 2.345678E+00 | mtp_1 loss: 2.456789E+00 | load_balancing_loss: 1.012345E+00 | "
        "loss scale: 1.0 | grad norm: 0.873 | number of skipped iterations:   0 | number of nan "
        "iterations:   0 |",
        " [2026-03-01 10:00:00] iteration       20/     100 | consumed samples:        81920 | "
        "skipped samples:          128 | elapsed time per iteration (ms): 7012.3 | throughput "
        "per GPU (TFLOP/s/GPU): 512.4 | energy per GPU (J/iter/GPU): 4821.6 | power per GPU "
        "(W/GPU): 687.6 | learning rate: 2.985000E-04 | global batch size:  4096 | lm loss: "
        "2.345678E+00 | mtp_1 loss: 2.456789E+00 | load_balancing_loss: 1.012345E+00 | loss "
        "scale: 1.0 | grad norm: 0.873 | number of skipped iterations:   0 | number of nan "
        "iterations:   0 |",
    };
    size_t i;
    for (i = 0; i < 2; i++) {
        mt_logparse *p = parse(lines[i]);
        const mt_iteration *it = iter(p, 0);
        ck_assert(it->has & MT_IT_SKIPPED_SAMPLES && it->has & MT_IT_ENERGY &&
                  it->has & MT_IT_POWER && it->has & MT_IT_COMPLETE);
        ck_assert_int_eq(it->skipped_samples, 128);
        ck_assert_double_eq(it->energy, 4821.6);
        ck_assert_double_eq(it->power, 687.6);
        ck_assert_double_eq(it->tflops, 512.4);
        ck_assert_int_eq(it->n_losses, 3);
        ck_assert_str_eq(it->loss_key[1], "mtp_1 loss");
        ck_assert_double_eq(loss(it, "mtp_1 loss"), 2.456789);
        mt_logparse_destroy(&p);
    }
}
END_TEST

START_TEST(skipped_iteration_zero_loss_is_no_sample)
{
    /* training_log averages each loss over the advanced iterations:
     * an interval of skipped ones prints 0.000000E+00 (0 / max(1, 0)) */
    static const char text[] =
        " [2026-01-01 00:01:00.000000] iteration        7/      50 | consumed samples:         "
        "7168 | elapsed time per iteration (ms): 43001.2 | learning rate: 2.604594E-04 | global "
        "batch size:  1024 | lm loss: 0.000000E+00 | load_balancing_loss: 0.000000E+00 | loss "
        "scale: 32768.0 | number of skipped iterations:   1 | number of nan iterations:   0 |\n"
        /* one of two skipped: the other's average stands */
        " [2026-01-01 00:02:00.000000] iteration        9/      50 | consumed samples:         "
        "9216 | elapsed time per iteration (ms): 43001.2 | learning rate: 2.604594E-04 | global "
        "batch size:  1024 | lm loss: 1.020000E+01 | load_balancing_loss: 1.000100E+00 | loss "
        "scale: 16384.0 | grad norm: 5.100 | number of skipped iterations:   1 | number of nan "
        "iterations:   0 |\n"
        /* not skipped: a zero is a value */
        " [2026-01-01 00:03:00.000000] iteration       10/      50 | consumed samples:        "
        "10240 | elapsed time per iteration (ms): 43001.2 | learning rate: 2.604594E-04 | global "
        "batch size:  1024 | lm loss: 1.010000E+01 | z_loss: 0.000000E+00 | loss scale: 16384.0 "
        "| grad norm: 5.000 | number of skipped iterations:   0 | number of nan iterations:   0 "
        "|\n";
    mt_logparse *p = parse(text);
    const mt_iteration *it = iter(p, 0);
    int found = 1;
    ck_assert_uint_eq(mt_logparse_iterations(p), 3);
    ck_assert_int_eq(it->skipped, 1);
    ck_assert_int_eq(it->n_losses, 0);
    (void)mt_iteration_loss(it, "lm loss", &found);
    ck_assert_int_eq(found, 0);
    ck_assert_double_eq(it->elapsed_ms, 43001.2); /* the rest of the line stands */
    it = iter(p, 1);
    ck_assert_int_eq(it->n_losses, 2);
    ck_assert_double_eq(loss(it, "lm loss"), 10.2);
    it = iter(p, 2);
    ck_assert_int_eq(it->n_losses, 2);
    ck_assert_double_eq(loss(it, "z_loss"), 0.0);
    mt_logparse_destroy(&p);
}
END_TEST

START_TEST(hard_wrapped_memory_lines_are_reassembled)
{
    /* 40 cuts the "... memory (MB)" head itself (folded at a space it would
     * leave a first piece narrower than any terminal) */
    static const size_t widths[] = {80, 100, 120, 55, 40};
    const char *const mems[] = {MEM_MB, MEM_GB10};
    size_t w, k;
    int at_spaces;
    for (k = 0; k < 2; k++)
        for (w = 0; w < sizeof widths / sizeof widths[0]; w++)
            for (at_spaces = 0; at_spaces < 2 - (widths[w] < 55); at_spaces++) {
                /* (an iteration line cut before its number is not one) */
                char *m = wrap(mems[k], widths[w], at_spaces),
                     *a = wrap(LM_IT1, widths[w] < 55 ? 55 : widths[w], 0);
                const char *const parts[] = {a, m, "INFO | a print of its own", THEO_LINE, NULL};
                char *text = cat(parts);
                size_t chunk;
                for (chunk = 1; chunk <= 4096; chunk *= 64) {
                    mt_logparse *p = parse_chunked(text, strlen(text), chunk);
                    const mt_rank_memory *r = mt_logparse_memory_of(p, 0);
                    ck_assert_msg(r != NULL, "width %zu: no memory record", widths[w]);
                    if (k == 0) {
                        ck_assert_msg(r->max_reserved == llround(58525.20 * 1048576.0),
                                      "width %zu%s: max reserved %lld", widths[w],
                                      at_spaces ? " (at spaces)" : "", (long long)r->max_reserved);
                        ck_assert_int_eq(r->allocated, llround(35772.53 * 1048576.0));
                        ck_assert_int_eq(r->reserved, llround(38298.60 * 1048576.0));
                        ck_assert_int_eq(r->max_allocated, llround(55999.13 * 1048576.0));
                    } else {
                        check_gb10(r);
                    }
                    ck_assert_uint_eq(mt_logparse_counts_get(p)->wrapped_lines, 2);
                    ck_assert_uint_eq(mt_logparse_iterations(p), 1);
                    ck_assert_int_eq(mt_logparse_event_count(p, MT_LOGEV_THEORETICAL_MEMORY), 1);
                    mt_logparse_destroy(&p);
                }
                free(text);
                free(m);
                free(a);
            }
}
END_TEST

START_TEST(cut_memory_lines_keep_their_fields)
{
    /* the same rule as for iteration lines: a line is wrapped when its
     * continuation follows; one cut (nothing follows, or a line that
     * begins something else) keeps the fields it has */
    static const char *const cut[] = {
        "[Rank 0] (after 1 iterations) memory (MB) | allocated: 35772.53 | max allocated: "
        "55999.13 |\n" LM_IT1 "\n",
        "[Rank 0] (after 1 iterations) memory (MB) | allocated: 35772.53 | max allocated: "
        "55999.13", /* the file ends there */
        "[Rank 0] (after 1 iterations) memory (MB) | allocated: 35772.53 | max allocated: "
        "55999.13\n 9: [Rank 9] (after 1 iterations) memory (MB) | allocated: 1.00\n",
    };
    size_t i;
    for (i = 0; i < 3; i++) {
        mt_logparse *p = parse(cut[i]);
        const mt_rank_memory *r = mt_logparse_memory_of(p, 0);
        ck_assert_ptr_nonnull(r);
        ck_assert_int_eq(r->allocated, llround(35772.53 * 1048576.0));
        ck_assert_int_eq(r->max_allocated, llround(55999.13 * 1048576.0));
        ck_assert_int_eq(r->reserved, -1);
        ck_assert_int_eq(r->max_reserved, -1);
        ck_assert_uint_eq(mt_logparse_counts_get(p)->wrapped_lines, 0);
        ck_assert_uint_eq(mt_logparse_iterations(p), i == 0);
        mt_logparse_destroy(&p);
    }
    {
        /* a whole line followed by text that makes no field with its last
         * one is not joined to it */
        mt_logparse *p = parse(MEM_MB "\n0 tokens dropped | by the router\n");
        ck_assert_int_eq(mt_logparse_memory_of(p, 0)->max_reserved, llround(58525.20 * 1048576.0));
        ck_assert_uint_eq(mt_logparse_counts_get(p)->wrapped_lines, 0);
        mt_logparse_destroy(&p);
    }
}
END_TEST

START_TEST(bridge_step_time_after_log_interval)
{
    /* Bridge prints Step Time (rank 0) only when iteration % log_interval ==
     * 0; with the last stage's lines missing they stand alone */
    static const char only[] = "[logger]:\n"
                               "  log_interval: 10\n"
                               "Step Time : 44.03s GPU utilization: 137.0MODEL_TFLOP/s/GPU\n"
                               "Step Time : 45.65s GPU utilization: 132.1MODEL_TFLOP/s/GPU\n"
                               "Step Time : 44.71s GPU utilization: 134.9MODEL_TFLOP/s/GPU\n";
    static const char mixed[] =
        "Step Time : 43.68s GPU utilization: 138.1MODEL_TFLOP/s/GPU\n"
        " [2026-01-01 00:05:05] iteration       10/      50 | consumed samples:        10240 | "
        "elapsed time per iteration (ms): 43678.1 | learning rate: 2.604594E-04 | global batch "
        "size:  1024 | lm loss: 1.122687E+01 | loss scale: 1.0 | grad norm: 5.912 | number of "
        "skipped iterations:   0 | number of nan iterations:   0 |\n"
        "Step Time : 43.70s GPU utilization: 138.0MODEL_TFLOP/s/GPU\n"
        " [2026-01-01 00:12:22] iteration       20/      50 | consumed samples:        20480 | "
        "elapsed time per iteration (ms): 43701.0 | learning rate: 2.504594E-04 | global batch "
        "size:  1024 | lm loss: 1.022687E+01 | loss scale: 1.0 | grad norm: 5.012 | number of "
        "skipped iterations:   0 | number of nan iterations:   0 |\n"
        "Step Time : 44.10s GPU utilization: 137.0MODEL_TFLOP/s/GPU\n";
    mt_logparse *p;
    char *text;
    size_t i;
    /* the interval from the config summary (the block begins at its header) */
    text = malloc(sizeof only + 128);
    snprintf(text, sizeof only + 128, "%s%s", "[train] Non-default values (vs Mcore X):\n", only);
    /* "[train] Non-default values" opens the block that "[logger]:" continues */
    p = parse(text);
    ck_assert_uint_eq(mt_logparse_iterations(p), 3);
    for (i = 0; i < 3; i++) {
        const mt_iteration *it = iter(p, i);
        ck_assert_int_eq(it->iteration, 10 * ((int64_t)i + 1));
        ck_assert(it->has & MT_IT_STEP_LINE_ONLY);
    }
    mt_logparse_destroy(&p);
    free(text);

    /* the interval from the iteration lines' spacing */
    p = parse(mixed);
    ck_assert_uint_eq(mt_logparse_iterations(p), 3);
    ck_assert_int_eq(iter(p, 0)->iteration, 10);
    ck_assert(iter(p, 0)->has & MT_IT_STEP_TIME && !(iter(p, 0)->has & MT_IT_STEP_LINE_ONLY));
    ck_assert_int_eq(iter(p, 1)->iteration, 20);
    ck_assert(iter(p, 1)->has & MT_IT_STEP_TIME);
    ck_assert_int_eq(iter(p, 2)->iteration, 30);
    ck_assert(iter(p, 2)->has & MT_IT_STEP_LINE_ONLY);
    ck_assert_double_eq(iter(p, 2)->step_time_s, 44.10);
    mt_logparse_destroy(&p);
}
END_TEST

/* ---- streaming ------------------------------------------------------------------------ */

typedef struct seen {
    int64_t iters[16];
    int ranks[16];
    int n;
} seen;

static void on_it(void *ctx, const mt_iteration *it)
{
    seen *s = ctx;
    if (s->n < 16) {
        s->iters[s->n] = it->iteration;
        s->ranks[s->n] = it->rank;
    }
    s->n++;
}

START_TEST(any_chunk_boundaries_give_the_same_result)
{
    /* clang-format off */
    static const char text[] =
        WORLD_LINE "\r\n"
        "------------------------ arguments ------------------------\r\n"
        "  bf16 ............................................ True\r\n"
        "-------------------- end of arguments ---------------------\r\n"
        LM_IT1 "\r\n"
        MEM_MB "\r\n"
        THEO_LINE "\r\n"
        OOM_LINE "\r\n"
        LM_IT2; /* no line end: a file cut after the last line */
    /* clang-format on */
    size_t len = strlen(text), chunk;
    mt_logparse *whole = parse(text);
    char *want = json_of(whole);
    ck_assert_uint_eq(mt_logparse_iterations(whole), 2); /* the unterminated last line too */
    ck_assert_uint_eq(mt_logparse_counts_get(whole)->lines, 9);
    for (chunk = 1; chunk < 64; chunk += chunk < 8 ? 1 : 7) {
        mt_logparse *p = parse_chunked(text, len, chunk);
        char *got = json_of(p);
        ck_assert_msg(!strcmp(got, want), "chunk %zu differs:\n%s\nwant\n%s", chunk, got, want);
        free(got);
        mt_logparse_destroy(&p);
    }
    free(want);
    mt_logparse_destroy(&whole);
}
END_TEST

START_TEST(carriage_returns_end_lines)
{
    /* a progress bar redrawn with CR, then a CRLF line */
    mt_logparse *p = parse("loading 10%\rloading 50%\rloading 100%\r\n" LM_IT1 "\r\n");
    ck_assert_uint_eq(mt_logparse_iterations(p), 1);
    ck_assert(iter(p, 0)->has & MT_IT_COMPLETE);
    ck_assert_uint_eq(mt_logparse_counts_get(p)->lines, 2);
    mt_logparse_destroy(&p);
}
END_TEST

START_TEST(per_rank_streams_and_progress_callback)
{
    static const char r0[] = LM_IT1 "\n" LM_IT2 "\n";
    static const char r1_out[] = MEM_MB "\n";
    static const char r1_err[] = OOM_LINE "\n";
    mt_logparse *p = mt_logparse_new();
    size_t i, n0 = strlen(r0), n1 = strlen(r1_out), n2 = strlen(r1_err);
    seen s = {{0}, {0}, 0};
    mt_logparse_on_iteration(p, on_it, &s);
    /* interleaved pipe reads of three streams, 13 bytes at a time */
    for (i = 0; i < n0 || i < n1 || i < n2; i += 13) {
        if (i < n0)
            mt_logparse_feed_rank(p, 3, r0 + i, n0 - i < 13 ? n0 - i : 13);
        if (i < n1)
            mt_logparse_feed_channel(p, 1, 0, r1_out + i, n1 - i < 13 ? n1 - i : 13);
        if (i < n2)
            mt_logparse_feed_channel(p, 1, 1, r1_err + i, n2 - i < 13 ? n2 - i : 13);
    }
    /* the callback fires as each line completes, before finish */
    ck_assert_int_eq(s.n, 2);
    mt_logparse_finish(p);
    ck_assert_int_eq(s.n, 2);
    ck_assert_int_eq(s.iters[0], 1);
    ck_assert_int_eq(s.iters[1], 2);
    ck_assert_int_eq(s.ranks[0], 3);
    ck_assert_int_eq(one_event(p, MT_LOGEV_OOM)->rank, 1);
    /* the memory line names its own rank (0), whoever's stream it was on */
    ck_assert_ptr_nonnull(mt_logparse_memory_of(p, 0));
    mt_logparse_destroy(&p);
}
END_TEST

START_TEST(truncated_file_keeps_closed_fields)
{
    /* the file ends in the middle of iteration 2's elapsed-time value */
    static const char text[] =
        LM_IT1 "\n [2026-01-01 00:05:05.929770] iteration        2/       5 | "
               "consumed samples:         2048 | elapsed time per iteration (ms): 436";
    mt_logparse *p = parse(text);
    const mt_iteration *it;
    ck_assert_uint_eq(mt_logparse_iterations(p), 2);
    it = iter(p, 1);
    ck_assert_int_eq(it->iteration, 2);
    ck_assert_int_eq(it->consumed_samples, 2048);
    ck_assert(!(it->has & MT_IT_ELAPSED)); /* a cut number is no number */
    ck_assert(!(it->has & MT_IT_COMPLETE));
    mt_logparse_destroy(&p);
}
END_TEST

START_TEST(read_file_and_missing_file)
{
    char *path = tk_write_temp("logparse", LM_IT1 "\n" MEM_MB "\n" LM_IT2);
    mt_logparse *p = mt_logparse_new();
    mt_diag *d = mt_diag_new();
    ck_assert_int_eq(mt_logparse_read_file(p, path, d), 0);
    ck_assert_uint_eq(mt_diag_count(d), 0);
    ck_assert_uint_eq(mt_logparse_iterations(p), 2);
    ck_assert_uint_eq(mt_logparse_ranks(p), 1);
    mt_logparse_destroy(&p);
    unlink(path);
    p = mt_logparse_new();
    ck_assert_int_eq(mt_logparse_read_file(p, path, d), -ENOENT);
    ck_assert_uint_eq(mt_diag_count(d), 1);
    ck_assert_str_eq(mt_diag_at(d, 0)->file, path);
    ck_assert(mt_diag_contains(d, "cannot open the log: No such file or directory"));
    mt_logparse_destroy(&p);
    mt_diag_destroy(&d);
    free(path);
}
END_TEST

/* ---- hostile input ----------------------------------------------------------------------- */

static uint64_t xs(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

START_TEST(binary_garbage_nul_and_non_utf8)
{
    static const char bad[] = "\nImportError: DeepEP \0\xff\xfe\xc3( broken\n";
    size_t n = 8u << 20, i;
    unsigned char *g = malloc(n);
    uint64_t s = 0x9e3779b97f4a7c15ULL;
    mt_logparse *p = mt_logparse_new();
    char *json;
    cJSON *doc;
    for (i = 0; i < n; i++)
        g[i] = (unsigned char)xs(&s);
    /* sprinkle pieces of real lines into the noise */
    for (i = 0; i + 600 < n; i += 65521) {
        memcpy(g + i, "\n", 1);
        memcpy(g + i + 1, LM_IT1, 200);
    }
    for (i = 0; i < n;) {
        size_t k = 1 + xs(&s) % 70000;
        if (k > n - i)
            k = n - i;
        mt_logparse_feed(p, (const char *)g + i, k);
        i += k;
    }
    /* a line with NUL and invalid UTF-8 inside, then a real line: parsing recovers */
    mt_logparse_feed(p, bad, sizeof bad - 1);
    mt_logparse_feed(p, "\n" LM_IT2 "\n", strlen(LM_IT2) + 2);
    mt_logparse_finish(p);
    ck_assert_int_eq(mt_logparse_status(p), 0);
    ck_assert_uint_eq(mt_logparse_counts_get(p)->bytes, n + sizeof bad - 1 + strlen(LM_IT2) + 2);
    ck_assert_uint_gt(mt_logparse_counts_get(p)->garbage_lines, 0);
    ck_assert_int_eq(iter(p, mt_logparse_iterations(p) - 1)->iteration, 2);
    ck_assert(iter(p, mt_logparse_iterations(p) - 1)->has & MT_IT_COMPLETE);
    {
        const mt_logevent *e = mt_logparse_event(p, mt_logparse_events(p) - 1);
        ck_assert_int_eq(e->kind, MT_LOGEV_IMPORT_ERROR);
        ck_assert_str_eq(e->text, "ImportError: DeepEP ?\xff\xfe\xc3( broken");
    }
    /* the JSON stays valid whatever the bytes were */
    json = json_of(p);
    doc = cJSON_Parse(json);
    ck_assert_msg(doc != NULL, "invalid JSON near: %.80s", cJSON_GetErrorPtr());
    cJSON_Delete(doc);
    free(json);
    {
        FILE *devnull = fopen("/dev/null", "w");
        ck_assert_int_eq(mt_logparse_print(p, devnull, 0), 0);
        fclose(devnull);
    }
    mt_logparse_destroy(&p);
    free(g);
}
END_TEST

START_TEST(lines_over_one_mib_are_cut)
{
    size_t big = 3u << 20, i;
    char *line = malloc(big);
    mt_logparse *p = mt_logparse_new();
    memset(line, 'x', big);
    memcpy(line, "ImportError: DeepEP ", 20);
    /* in one chunk, then split across many */
    mt_logparse_feed(p, line, big);
    mt_logparse_feed(p, "\n", 1);
    for (i = 0; i < big; i += 4096)
        mt_logparse_feed(p, line + i, big - i < 4096 ? big - i : 4096);
    mt_logparse_feed(p, "\n" LM_IT1 "\n", strlen(LM_IT1) + 2);
    mt_logparse_finish(p);
    ck_assert_int_eq(mt_logparse_status(p), 0);
    ck_assert_uint_eq(mt_logparse_counts_get(p)->truncated_lines, 2);
    ck_assert_uint_eq(mt_logparse_counts_get(p)->lines, 3);
    ck_assert_uint_eq(mt_logparse_event_count(p, MT_LOGEV_IMPORT_ERROR), 2);
    ck_assert_uint_eq(strlen(mt_logparse_event(p, 0)->text), MT_LOGPARSE_TEXT_MAX);
    ck_assert_uint_eq(mt_logparse_iterations(p), 1);
    mt_logparse_destroy(&p);
    free(line);
}
END_TEST

/* Inputs built to make a careless parser quadratic: one 1 MiB line that
 * repeats an event word, and a hard-wrapped line of 255 pieces repeated.  A
 * quadratic scan takes minutes here; a linear one well under a second. */
START_TEST(hostile_repetition_stays_linear)
{
    static const char head[] = " [2026-01-01 00:04:22.251668] iteration        1/       5 | "
                               "consumed samples:         1024 | elapsed time per iteration "
                               "(ms): 82251.7 | x: 1 | y: 2 | z: 3 | w: 4 | v: 5 |";
    static const char piece[] = " nan iterations: x | lm loss: 1.0 | nan iterations: x | lm loss: "
                                "1.0 | nan iterations: x | lm loss: 1.0 | nan iterations: x | lm "
                                "loss: 1.0 | nan iterations: x | lm loss: 1.0 | nan iteration";
    size_t n = 1u << 20, i, r;
    char *line = malloc(n + 1), first[256];
    mt_logparse *p = mt_logparse_new();
    struct timespec t0, t1;
    double dt;
    for (i = 0; i < n; i++)
        line[i] = "x NCCL WARN ibv_ Time spent in CUDA Graphs capture "[i % 52];
    line[n] = '\n';
    snprintf(first, sizeof first, "%-250s\n", head);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    mt_logparse_feed(p, line, n + 1);
    for (r = 0; r < 60; r++) {
        mt_logparse_feed(p, first, strlen(first));
        for (i = 0; i < 255; i++) {
            mt_logparse_feed(p, piece, sizeof piece - 1);
            mt_logparse_feed(p, "\n", 1);
        }
    }
    mt_logparse_finish(p);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    dt = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    ck_assert_msg(dt < 10.0, "%.1f s for 5 MB of repetition", dt);
    ck_assert_uint_eq(mt_logparse_iterations(p), 60);
    ck_assert_uint_eq(mt_logparse_counts_get(p)->wrapped_lines, 60);
    ck_assert_int_eq(iter(p, 59)->n_losses, 1);
    ck_assert_uint_eq(mt_logparse_event_count(p, MT_LOGEV_INFRA), 1);
    mt_logparse_destroy(&p);
    free(line);
}
END_TEST

START_TEST(events_and_iterations_are_capped)
{
    static const char warn[] =
        "node3:2345:2398 [5] enqueue.cc:1453 NCCL WARN Cuda failure 'unhandled "
        "cuda error'\n";
    mt_logparse *p = mt_logparse_new();
    mt_kv *ev = mt_kv_new();
    seen s = {{0}, {0}, 0};
    int i;
    for (i = 0; i < MT_LOGPARSE_MAX_EVENTS + 2000; i++)
        mt_logparse_feed(p, warn, strlen(warn));
    mt_logparse_feed(p, OOM_LINE "\n", strlen(OOM_LINE) + 1);
    mt_logparse_finish(p);
    ck_assert_uint_eq(mt_logparse_events(p), MT_LOGPARSE_MAX_EVENTS);
    ck_assert_uint_eq(mt_logparse_counts_get(p)->events_dropped, 2001);
    ck_assert_uint_eq(mt_logparse_event_count(p, MT_LOGEV_NCCL_ERROR),
                      MT_LOGPARSE_MAX_EVENTS + 2000);
    /* the OOM past the cap still decides the evidence */
    ck_assert_uint_eq(mt_logparse_event_count(p, MT_LOGEV_OOM), 1);
    ck_assert_int_eq(mt_logparse_evidence(p, ev), 0);
    ck_assert_str_eq(mt_kv_get(ev, "log.oom"), OOM_LINE);
    mt_kv_destroy(&ev);
    mt_logparse_destroy(&p);

    p = mt_logparse_new();
    mt_logparse_set_max_iterations(p, 1);
    mt_logparse_on_iteration(p, on_it, &s);
    mt_logparse_feed(p, LM_IT1 "\n" LM_IT2 "\n", strlen(LM_IT1) + strlen(LM_IT2) + 2);
    mt_logparse_finish(p);
    ck_assert_uint_eq(mt_logparse_iterations(p), 1);
    ck_assert_uint_eq(mt_logparse_counts_get(p)->iterations_dropped, 1);
    ck_assert_int_eq(s.n, 2); /* progress is reported all the same */
    mt_logparse_destroy(&p);
}
END_TEST

/* ---- printing ----------------------------------------------------------------------------- */

START_TEST(print_json_and_text)
{
    /* clang-format off */
    static const char text[] =
        WORLD_LINE "\n"
        "------------------------ arguments ------------------------\n"
        "  bf16 ............................................ True\n"
        "-------------------- end of arguments ---------------------\n"
        LM_IT1 "\n"
        MEM_GB "\n"
        THEO_LINE "\n"
        " [2026-01-01 00:05:05.929770] iteration        2/       5 | lm loss: NAN | number of "
        "nan iterations:   1 |\n"
        OOM_LINE "\n";
    /* clang-format on */
    mt_logparse *p = parse(text);
    char *json = json_of(p), *txt = NULL;
    size_t n = 0;
    FILE *f;
    cJSON *doc = cJSON_Parse(json), *its, *it0, *losses, *mem, *evs;
    ck_assert_msg(doc != NULL, "invalid JSON: %s", json);
    its = cJSON_GetObjectItem(doc, "iterations");
    ck_assert_int_eq(cJSON_GetArraySize(its), 2);
    it0 = cJSON_GetArrayItem(its, 0);
    ck_assert_double_eq(cJSON_GetObjectItem(it0, "elapsed_ms")->valuedouble, 82251.7);
    ck_assert_double_eq(cJSON_GetObjectItem(it0, "tflops_per_gpu")->valuedouble, 73.3);
    losses = cJSON_GetObjectItem(it0, "losses");
    ck_assert_double_eq(cJSON_GetObjectItem(losses, "lm loss")->valuedouble, 11.62272);
    losses = cJSON_GetObjectItem(cJSON_GetArrayItem(its, 1), "losses");
    ck_assert_str_eq(cJSON_GetObjectItem(losses, "lm loss")->valuestring, "NaN");
    mem = cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "memory"), 0);
    ck_assert_int_eq(cJSON_GetObjectItem(mem, "rank")->valueint, 8);
    ck_assert_double_eq(cJSON_GetObjectItem(mem, "max_reserved_bytes")->valuedouble, 61368000000.0);
    ck_assert_str_eq(
        cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "arguments"), "bf16")->valuestring, "True");
    ck_assert_int_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "world"), "pp")->valueint, 2);
    evs = cJSON_GetObjectItem(doc, "events");
    ck_assert_int_eq(cJSON_GetArraySize(evs), 2);
    ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(evs, 1), "kind")->valuestring, "oom");
    ck_assert_int_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "event_counts"), "oom")->valueint,
                     1);
    cJSON_Delete(doc);
    free(json);

    f = open_memstream(&txt, &n);
    ck_assert_int_eq(mt_logparse_print(p, f, 0), 0);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(txt, "world: 16 GPUs, data-parallel 8, context-parallel 1, "
                                      "tensor-parallel 1, pipeline-parallel 2\n"));
    ck_assert_ptr_nonnull(strstr(txt, "iterations: 2\n"));
    ck_assert_ptr_nonnull(strstr(txt, " lm loss 1.162272E+01, load_balancing_loss 1.000294E+00\n"));
    ck_assert_ptr_nonnull(strstr(txt, "  rank 8 (after 1 iterations): allocated 37.510 GB"));
    ck_assert_ptr_nonnull(strstr(txt, "  bf16 = True\n"));
    ck_assert_ptr_nonnull(strstr(txt, " oom: torch.OutOfMemoryError: CUDA out of memory."));
    free(txt);
    mt_logparse_destroy(&p);
}
END_TEST

/* ---- complete logs of real moetune-sim runs ---------------------------------------------- */

typedef struct simrun {
    char *out, *err;
    int code;
    sim_cfg cfg; /* the sim's configuration, from the same moetune config */
} simrun;

/* Renders the contract's config (plus sets) in its dialect, runs the sim as
 * a worker would (stdout and stderr to separate files), and builds the
 * sim's own configuration from the same moetune config. */
static simrun sim_run(const char *contract, const char *const *sets, const char *const *extra)
{
    tk *t = tk_open(contract);
    mt_rendered r;
    mt_strlist argv = {0};
    char outp[] = "/tmp/mt-logparse-out-XXXXXX", errp[] = "/tmp/mt-logparse-err-XXXXXX";
    char **envp, **args, err[256];
    int fo = mkstemp(outp), fe = mkstemp(errp), st = 0, bridge = strstr(contract, "bridge") != NULL;
    size_t i, n = 0, ne = 0, owned;
    posix_spawn_file_actions_t fa;
    pid_t pid;
    simrun s;
    const char *k, *v;
    static const char *const hw[][2] = {{"gpu", "--sim-gpu"},
                                        {"gpus_per_node", "--sim-gpus-per-node"},
                                        {"nodes", "--sim-nodes"},
                                        {"nvlink_domain", "--sim-nvlink-domain"}};
    memset(&s, 0, sizeof s);
    ck_assert(fo >= 0 && fe >= 0);
    for (i = 0; sets && sets[i]; i++)
        tk_set(t, sets[i]);
    mt_rendered_init(&r);
    ck_assert_int_eq(mt_render(t->reg, t->contract, t->cfg,
                               bridge ? MT_DIALECT_BRIDGE : MT_DIALECT_MLM, &r, t->diag),
                     0);
    mt_strlist_push(&argv, MT_SIM_BIN);
    if (bridge)
        mt_strlist_push(&argv, "--bridge");
    for (i = 0; i < r.argv.n; i++)
        mt_strlist_push(&argv, r.argv.v[i]);
    for (i = 0; i < sizeof hw / sizeof hw[0]; i++)
        if ((v = mt_kv_get(t->contract->hardware, hw[i][0])) != NULL) {
            mt_strlist_push(&argv, hw[i][1]);
            mt_strlist_push(&argv, v);
        }
    for (i = 0; extra && extra[i]; i++)
        mt_strlist_push(&argv, extra[i]);
    args = calloc(argv.n + 1, sizeof *args);
    for (i = 0; i < argv.n; i++)
        args[i] = argv.v[i];
    for (n = 0; environ[n]; n++)
        ;
    envp = calloc(n + mt_kv_count(r.env) + 1, sizeof *envp);
    for (i = 0; i < n; i++)
        if (strncmp(environ[i], "MOETUNE_SIM_", 12) && strncmp(environ[i], "WORLD_SIZE=", 11))
            envp[ne++] = environ[i];
    owned = ne;
    for (i = 0; mt_kv_entry(r.env, i, &k, &v) == 0; i++) {
        char *kv = malloc(strlen(k) + strlen(v) + 2);
        sprintf(kv, "%s=%s", k, v);
        envp[ne++] = kv;
    }
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fo, 1);
    posix_spawn_file_actions_adddup2(&fa, fe, 2);
    ck_assert_int_eq(posix_spawn(&pid, MT_SIM_BIN, &fa, NULL, args, envp), 0);
    posix_spawn_file_actions_destroy(&fa);
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    s.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    close(fo);
    close(fe);
    s.out = tk_slurp(outp);
    s.err = tk_slurp(errp);
    ck_assert(s.out && s.err);
    unlink(outp);
    unlink(errp);
    for (i = owned; i < ne; i++)
        free(envp[i]);
    free(envp);
    free(args);
    ck_assert_msg(sim_cfg_from_moetune(&s.cfg, t->cfg, t->contract->hardware, t->contract->view,
                                       err, sizeof err) == 0,
                  "%s", err);
    for (i = 0; extra && extra[i]; i++)
        if (!strcmp(extra[i], "--sim-gpu") && extra[i + 1])
            ck_assert_int_eq(sim_cfg_set(&s.cfg, "gpu", extra[i + 1], err, sizeof err), 0);
    mt_strlist_clear(&argv);
    mt_rendered_clear(&r);
    tk_close(&t);
    return s;
}

static void sim_done(simrun *s)
{
    free(s->out);
    free(s->err);
}

/* The run's two streams, fed the way the runner feeds pipe reads. */
static mt_logparse *parse_run(const simrun *s)
{
    mt_logparse *p = mt_logparse_new();
    size_t i, no = strlen(s->out), ne = strlen(s->err);
    for (i = 0; i < no || i < ne; i += 4096) {
        if (i < no)
            mt_logparse_feed_channel(p, -1, 0, s->out + i, no - i < 4096 ? no - i : 4096);
        if (i < ne)
            mt_logparse_feed_channel(p, -1, 1, s->err + i, ne - i < 4096 ? ne - i : 4096);
    }
    mt_logparse_finish(p);
    ck_assert_int_eq(mt_logparse_status(p), 0);
    return p;
}

/* "[sim] simulated wall time: W s (startup S s + N steps T s); ..." */
static double sim_steps_s(const char *out, int *steps)
{
    const char *l = strstr(out, "[sim] simulated wall time: ");
    double wall, startup, t;
    ck_assert_ptr_nonnull(l);
    ck_assert_int_eq(sscanf(l, "[sim] simulated wall time: %lf s (startup %lf s + %d steps %lf s)",
                            &wall, &startup, steps, &t),
                     4);
    return t;
}

static void check_sim_log(const char *contract, int gb)
{
    static const char *const sets[] = {"train_iters=8", "pipeline_model_parallel_size=2",
                                       "expert_model_parallel_size=8", NULL};
    char peaks_path[64];
    const char *extra[] = {"--sim-memory-file", peaks_path, NULL};
    simrun s;
    mt_logparse *p;
    mt_logworld w;
    mt_kv *ev = mt_kv_new();
    double sum = 0, steps_s, tw, ta, sw, sa;
    int steps, r;
    size_t i;
    char *peaks;
    snprintf(peaks_path, sizeof peaks_path, "/tmp/mt-logparse-peaks-%ld.txt", (long)getpid());
    s = sim_run(contract, sets, extra);
    p = parse_run(&s);
    ck_assert_msg(s.code == 0, "sim exit %d: %s", s.code, s.err);
    /* iterations: every one, with the sim's clock and learning-rate schedule */
    ck_assert_uint_eq(mt_logparse_iterations(p), 8);
    for (i = 0; i < 8; i++) {
        const mt_iteration *it = iter(p, i);
        ck_assert_int_eq(it->iteration, (int64_t)i + 1);
        ck_assert_int_eq(it->total, 8);
        ck_assert(it->has & MT_IT_COMPLETE && it->has & MT_IT_TFLOPS && it->has & MT_IT_TIMESTAMP);
        ck_assert_int_eq(it->global_batch, 1024);
        ck_assert_int_eq(it->consumed_samples, 1024 * ((int64_t)i + 1));
        ck_assert(isfinite(loss(it, "lm loss")) && isfinite(loss(it, "load_balancing_loss")));
        ck_assert_int_eq(it->nan_count, 0);
        ck_assert_int_eq(it->skipped, 0);
        if (gb) {
            ck_assert_msg(it->has & MT_IT_STEP_TIME, "Bridge iteration %zu lacks its Step Time", i);
            expect_near(it->step_time_s * 1000, it->elapsed_ms, 5.06, "Step Time vs elapsed");
            ck_assert_double_eq(it->step_tflops, it->tflops);
        }
        sum += it->elapsed_ms;
    }
    ck_assert_double_eq(iter(p, 0)->lr, 3.0e-4);
    ck_assert_double_eq(iter(p, 7)->lr, 3.0e-5);
    /* the sim's own clock: the steps' sum it reports */
    steps_s = sim_steps_s(s.out, &steps);
    ck_assert_int_eq(steps, 8);
    expect_near(sum / 1000.0, steps_s, 8 * 0.05e-3 + 0.5e-3, "sum of elapsed vs [sim] steps");
    /* world and arguments */
    ck_assert_int_eq(mt_logparse_world(p, &w), 0);
    ck_assert_int_eq(w.world, sim_world(&s.cfg));
    ck_assert_int_eq(w.dp, sim_dp(&s.cfg));
    ck_assert_int_eq(w.pp, 2);
    ck_assert_int_eq(w.tp, s.cfg.tensor_model_parallel_size);
    ck_assert_str_eq(mt_kv_get(mt_logparse_args(p), "pipeline_model_parallel_size"), "2");
    ck_assert_str_eq(mt_kv_get(mt_logparse_args(p), "expert_model_parallel_size"), "8");
    ck_assert_str_eq(mt_kv_get(mt_logparse_args(p), "train_iters"), "8");
    /* memory: one line per pipeline stage's data-parallel rank 0, each the
     * sim model's figure for that rank */
    ck_assert_uint_eq(mt_logparse_ranks(p), 2);
    for (i = 0; i < mt_logparse_ranks(p); i++) {
        const mt_rank_memory *m = mt_logparse_rank_memory(p, i);
        sim_mem sm;
        double tol = gb ? 0.5e6 + 1 : 0.005 * 1048576 + 1;
        sim_rank_memory(&s.cfg, m->rank, &sm);
        ck_assert_int_eq(m->gigabytes, gb);
        ck_assert_int_eq(m->after_iteration, 1);
        expect_near((double)m->allocated, sm.allocated, tol, "allocated");
        expect_near((double)m->max_allocated, sm.max_allocated, tol, "max allocated");
        expect_near((double)m->reserved, sm.reserved, tol, "reserved");
        expect_near((double)m->max_reserved, sm.max_reserved, tol, "max reserved");
    }
    ck_assert_int_eq(mt_logparse_rank_memory(p, 1)->rank, 8);
    /* and the sim's per-GPU side file agrees for those ranks */
    peaks = tk_slurp(peaks_path);
    ck_assert_ptr_nonnull(peaks);
    for (r = 0; r <= 8; r += 8) {
        char key[32];
        const char *l;
        double mib;
        snprintf(key, sizeof key, "rank=%d host=", r);
        l = strstr(peaks, key);
        ck_assert_ptr_nonnull(l);
        ck_assert_int_eq(sscanf(strstr(l, "peak_mib=") + 9, "%lf", &mib), 1);
        expect_near((double)mt_logparse_memory_of(p, r)->max_reserved / 1048576.0, mib,
                    gb ? 0.05 + 0.5e6 / 1048576.0 : 0.055, "memory file peak");
    }
    free(peaks);
    unlink(peaks_path);
    /* theoretical memory */
    sim_theoretical_memory(&s.cfg, &sw, &sa);
    ck_assert_int_eq(mt_logparse_theoretical(p, &tw, &ta, NULL), 0);
    /* %.2f of a binary double: half a cent and its rounding */
    expect_near(tw, sw, 0.00501, "theoretical weight and optimizer");
    expect_near(ta, sa, 0.00501, "theoretical activation");
    /* nothing went wrong */
    ck_assert_uint_eq(mt_logparse_events(p), 1);
    ck_assert_uint_eq(mt_logparse_counts_get(p)->garbage_lines, 0);
    ck_assert_int_eq(mt_logparse_evidence(p, ev), 0);
    ck_assert_ptr_nonnull(mt_kv_get(ev, "log.world"));
    ck_assert_str_eq(mt_kv_get(ev, "args.moe_token_dispatcher_type"), "alltoall");
    ck_assert_ptr_null(mt_kv_get(ev, "log.oom"));
    ck_assert_ptr_null(mt_kv_get(ev, "log.nan"));
    ck_assert_ptr_null(mt_kv_get(ev, "log.nccl_error"));
    mt_kv_destroy(&ev);
    mt_logparse_destroy(&p);
    sim_done(&s);
}

START_TEST(sim_log_megatron_lm)
{
    check_sim_log("qwen3-30b-a3b-h100x16.cfg", 0);
}
END_TEST

START_TEST(sim_log_megatron_bridge)
{
    check_sim_log("qwen3-30b-a3b-h100x16-bridge.cfg", 1);
}
END_TEST

START_TEST(sim_failures_are_events)
{
    static const char *const nan[] = {
        "--sim-inject", "nan", "--sim-inject-step", "3", "--sim-inject-rank", "5", NULL};
    static const char *const nccl[] = {
        "--sim-inject", "nccl", "--sim-inject-step", "2", "--sim-inject-rank", "4", NULL};
    static const char *const crash[] = {"--sim-inject", "crash", "--sim-inject-step", "2", NULL};
    static const char *const b200[] = {"--sim-gpu", "B200", NULL};
    static const char *const flex[] = {"moe_token_dispatcher_type=flex",
                                       "moe_flex_dispatcher_backend=hybridep", NULL};
    static const char *const oom[] = {"micro_batch_size=16", NULL};
    static const char *const graphs[] = {"cuda_graph_impl=transformer_engine",
                                         "cuda_graph_modules=moe_router,moe_preprocess",
                                         "train_iters=6", NULL};
    const char *c = "qwen3-30b-a3b-h100x16.cfg";
    simrun s;
    mt_logparse *p;
    mt_kv *ev;
    const mt_logevent *e;

    s = sim_run(c, NULL, nan);
    p = parse_run(&s);
    e = one_event(p, MT_LOGEV_NAN);
    ck_assert_int_eq(e->rank, 5);
    ck_assert_int_eq(iter(p, 2)->nan_count, 1);
    ck_assert(isnan(loss(iter(p, 2), "lm loss")));
    ev = mt_kv_new();
    ck_assert_int_eq(mt_logparse_evidence(p, ev), 0);
    ck_assert_str_eq(mt_kv_get(ev, "log.nan"), e->text);
    mt_kv_destroy(&ev);
    mt_logparse_destroy(&p);
    sim_done(&s);

    s = sim_run(c, NULL, nccl);
    p = parse_run(&s);
    /* DistBackendError and ncclSystemError on the failing rank's stderr */
    ck_assert_uint_eq(mt_logparse_event_count(p, MT_LOGEV_NCCL_ERROR), 2);
    ck_assert_int_eq(one_event(p, MT_LOGEV_WATCHDOG)->rank, 0);
    mt_logparse_destroy(&p);
    sim_done(&s);

    s = sim_run(c, NULL, crash);
    p = parse_run(&s);
    ck_assert_uint_eq(mt_logparse_event_count(p, MT_LOGEV_CRASH), 2);
    mt_logparse_destroy(&p);
    sim_done(&s);

    s = sim_run(c, oom, NULL);
    ck_assert_int_eq(s.code, 1);
    p = parse_run(&s);
    ck_assert_uint_eq(mt_logparse_iterations(p), 0);
    e = one_event(p, MT_LOGEV_OOM);
    ck_assert(
        !strncmp(e->text, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ", 62));
    mt_logparse_destroy(&p);
    sim_done(&s);

    s = sim_run(c, flex, b200);
    p = parse_run(&s);
    e = one_event(p, MT_LOGEV_FALLBACK);
    ck_assert(e->flags & MT_LOGEV_F_DISPATCHER);
    ev = mt_kv_new();
    ck_assert_int_eq(mt_logparse_evidence(p, ev), 0);
    ck_assert_str_eq(mt_kv_get(ev, "log.dispatcher_fallback"), e->text);
    ck_assert_str_eq(mt_kv_get(ev, "args.moe_flex_dispatcher_backend"), "hybridep");
    mt_kv_destroy(&ev);
    mt_logparse_destroy(&p);
    sim_done(&s);

    s = sim_run(c, graphs, NULL);
    p = parse_run(&s);
    ck_assert_uint_eq(mt_logparse_event_count(p, MT_LOGEV_CAPTURE), 2);
    e = mt_logparse_first(p, MT_LOGEV_CAPTURE);
    ck_assert_int_eq(e->iteration, 3); /* captured at warm-up (3) + 1 */
    ev = mt_kv_new();
    ck_assert_int_eq(mt_logparse_evidence(p, ev), 0);
    ck_assert(!strncmp(mt_kv_get(ev, "log.cuda_graph_capture"),
                       "Time spent in CUDA Graphs capture on rank 0: ", 45));
    mt_kv_destroy(&ev);
    mt_logparse_destroy(&p);
    sim_done(&s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("logparse");
    TCase *lines = tcase_create("lines"), *events = tcase_create("events"),
          *stream = tcase_create("stream"), *hostile = tcase_create("hostile"),
          *sim = tcase_create("sim");
    tcase_add_test(lines, lm_iteration_line_every_field);
    tcase_add_test(lines, timestamps_without_microseconds_or_trimmed);
    tcase_add_test(lines, optional_fields);
    tcase_add_test(lines, several_loss_keys_and_nan);
    tcase_add_test(lines, hard_wrapped_lines_are_reassembled);
    tcase_add_test(lines, prints_glued_after_the_final_bar);
    tcase_add_test(lines, srun_label_prefixes_keep_the_rank);
    tcase_add_test(lines, torchrun_prefixes_keep_the_rank);
    tcase_add_test(lines, srun_and_torchrun_prefixes_compose_the_global_rank);
    tcase_add_test(lines, memory_lines_mb_raw_and_gb);
    tcase_add_test(lines, arguments_dump_as_a_map);
    tcase_add_test(lines, world_size_line_current_and_older);
    tcase_add_test(lines, validation_and_theoretical_memory_lines);
    tcase_add_test(lines, bridge_step_time_lines);
    tcase_add_test(lines, enum_values_in_the_arguments_dump);
    tcase_add_test(lines, bridge_non_default_values_as_arguments);
    tcase_add_test(lines, bridge_yaml_config_as_arguments);
    tcase_add_test(lines, bridge_memory_line_all_ten_keys);
    tcase_add_test(lines, mtp_loss_energy_power_and_skipped_samples);
    tcase_add_test(lines, skipped_iteration_zero_loss_is_no_sample);
    tcase_add_test(lines, hard_wrapped_memory_lines_are_reassembled);
    tcase_add_test(lines, cut_memory_lines_keep_their_fields);
    tcase_add_test(lines, bridge_step_time_after_log_interval);
    tcase_add_test(events, oom_lines);
    tcase_add_test(events, import_errors_naming_deepep_or_hybridep);
    tcase_add_test(events, nccl_errors_and_infrastructure);
    tcase_add_test(events, cuda_graph_capture_lines);
    tcase_add_test(events, dispatcher_fallback_warnings);
    tcase_add_test(events, nan_errors_crashes_and_exceptions);
    tcase_add_test(stream, any_chunk_boundaries_give_the_same_result);
    tcase_add_test(stream, carriage_returns_end_lines);
    tcase_add_test(stream, per_rank_streams_and_progress_callback);
    tcase_add_test(stream, truncated_file_keeps_closed_fields);
    tcase_add_test(stream, print_json_and_text);
    tcase_add_test(stream, read_file_and_missing_file);
    tcase_add_test(hostile, binary_garbage_nul_and_non_utf8);
    tcase_add_test(hostile, lines_over_one_mib_are_cut);
    tcase_add_test(hostile, events_and_iterations_are_capped);
    tcase_add_test(hostile, hostile_repetition_stays_linear);
    tcase_add_test(sim, sim_log_megatron_lm);
    tcase_add_test(sim, sim_log_megatron_bridge);
    tcase_add_test(sim, sim_failures_are_events);
    tcase_set_timeout(hostile, 120);
    tcase_set_timeout(sim, 120);
    suite_add_tcase(s, lines);
    suite_add_tcase(s, events);
    suite_add_tcase(s, stream);
    suite_add_tcase(s, hostile);
    suite_add_tcase(s, sim);
    return tk_run(s);
}
