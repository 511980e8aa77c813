/*
 * test_cuda_log.c - what moetune-cuda-moe prints (workers/cuda/moe_log.c),
 * read back through moetune's own Megatron log parser (core/logparse.c):
 * iteration lines with the right step time, throughput and counts, memory
 * lines with the right bytes, the arguments dump and world line, the CUDA
 * graph capture and out-of-memory lines as events; and the command line
 * (workers/cuda/moe_args.c): defaults, Megatron spellings, every error
 * naming its flag.
 */
#include "logparse.h"
#include "moe_args.h"
#include "moe_log.h"
#include "render.h"
#include "testkit.h"

#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Runs fn into a memory stream and parses what it wrote. */
static mt_logparse *parse_text(const char *text)
{
    mt_logparse *p = mt_logparse_new();
    ck_assert_ptr_nonnull(p);
    mt_logparse_feed(p, text, strlen(text));
    mt_logparse_finish(p);
    ck_assert_int_eq(mt_logparse_status(p), 0);
    return p;
}

static char *captured(void (*fn)(FILE *, void *), void *ctx)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    ck_assert_ptr_nonnull(f);
    fn(f, ctx);
    fclose(f);
    return buf;
}

static void write_iterations(FILE *f, void *ctx)
{
    int i;
    (void)ctx;
    for (i = 1; i <= 3; i++) {
        mt_moe_iter_log l;
        l.wall = 1785585600.25 + i; /* 2026-08-01 12:00:00.25 UTC + i s */
        l.iteration = i;
        l.total = 3;
        l.consumed = 8LL * i;
        l.elapsed_ms = 12.25 * i;
        l.tflops = i == 2 ? -1 : 456.78;
        l.global_batch = 8;
        ck_assert_int_eq(mt_moe_log_iteration(f, &l), 0);
    }
}

START_TEST(iteration_lines_parse)
{
    char *text;
    mt_logparse *p;
    mt_iteration it;
    setenv("TZ", "UTC", 1);
    tzset();
    text = captured(write_iterations, NULL);
    ck_assert_msg(strstr(text, " iteration        1/       3 | consumed samples:            8 | "
                               "elapsed time per iteration (ms): 12.2 |") == text + 29,
                  "%s", text);
    p = parse_text(text);
    ck_assert_uint_eq(mt_logparse_iterations(p), 3);
    ck_assert_int_eq(mt_logparse_iteration(p, 0, &it), 0);
    ck_assert_int_eq(it.iteration, 1);
    ck_assert_int_eq(it.total, 3);
    ck_assert_int_eq(it.consumed_samples, 8);
    ck_assert_int_eq(it.global_batch, 8);
    ck_assert(fabs(it.elapsed_ms - 12.2) < 1e-9); /* printed %.1f, as Megatron */
    ck_assert(fabs(it.tflops - 456.8) < 1e-9);
    ck_assert(it.has & MT_IT_COMPLETE);
    ck_assert(it.has & MT_IT_ELAPSED);
    ck_assert(it.has & MT_IT_TIMESTAMP);
    ck_assert(fabs(it.timestamp - (1785585600.25 + 1)) < 1e-5);
    ck_assert_int_eq(it.n_losses, 0);
    ck_assert_int_eq(mt_logparse_iteration(p, 1, &it), 0);
    ck_assert(!(it.has & MT_IT_TFLOPS));
    ck_assert(fabs(it.elapsed_ms - 24.5) < 1e-9);
    ck_assert_int_eq(mt_logparse_iteration(p, 2, &it), 0);
    ck_assert_int_eq(it.consumed_samples, 24);
    ck_assert(fabs(it.elapsed_ms - 36.8) < 1e-9); /* 36.75 printed %.1f */
    ck_assert_uint_eq(mt_logparse_counts_get(p)->garbage_lines, 0);
    mt_logparse_destroy(&p);
    free(text);
}
END_TEST

static void write_memory(FILE *f, void *ctx)
{
    (void)ctx;
    ck_assert_int_eq(mt_moe_log_memory(f, 0, 1, 3LL << 30, 5LL << 30, 6LL << 30, 7LL << 30), 0);
    ck_assert_int_eq(
        mt_moe_log_memory(f, 1, 1, 1048576 * 3 / 2, 1048576 * 2, 1048576 * 4, 1048576 * 8), 0);
}

START_TEST(memory_lines_parse)
{
    char *text = captured(write_memory, NULL);
    mt_logparse *p = parse_text(text);
    const mt_rank_memory *m;
    ck_assert_uint_eq(mt_logparse_ranks(p), 2);
    m = mt_logparse_memory_of(p, 0);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(m->gigabytes, 0);
    ck_assert_int_eq(m->after_iteration, 1);
    ck_assert_int_eq(m->allocated, 3LL << 30);
    ck_assert_int_eq(m->max_allocated, 5LL << 30);
    ck_assert_int_eq(m->reserved, 6LL << 30);
    ck_assert_int_eq(m->max_reserved, 7LL << 30);
    m = mt_logparse_memory_of(p, 1);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(m->allocated, 1048576 * 3 / 2);
    ck_assert_int_eq(m->max_reserved, 1048576 * 8);
    mt_logparse_destroy(&p);
    free(text);
}
END_TEST

static void write_args(FILE *f, void *ctx)
{
    ck_assert_int_eq(mt_moe_log_args(f, (const mt_moe_args *)ctx), 0);
    ck_assert_int_eq(mt_moe_log_capture(f, 0, 0.0123), 0);
    ck_assert_int_eq(mt_moe_log_oom(f, 1, 1, 2.0 * 1048576 * 1024, 1e9, 80e9, 90e9), 0);
}

START_TEST(arguments_world_events_parse)
{
    mt_moe_args a;
    char err[256], *text;
    char *argv[] = {"x",
                    "--expert-model-parallel-size",
                    "4",
                    "--fp8-format",
                    "e4m3",
                    "--cuda-graph-scope",
                    "moe_router",
                    "moe_preprocess",
                    "--recompute-modules",
                    "moe_act",
                    NULL};
    mt_logparse *p;
    const mt_kv *args;
    const mt_logevent *ev;
    mt_logworld w;
    ck_assert_int_eq(mt_moe_args_parse(&a, 10, argv, err, sizeof err), 0);
    text = captured(write_args, &a);
    p = parse_text(text);
    args = mt_logparse_args(p);
    ck_assert_str_eq(mt_kv_get(args, "hidden_size"), "2048");
    ck_assert_str_eq(mt_kv_get(args, "expert_model_parallel_size"), "4");
    ck_assert_str_eq(mt_kv_get(args, "fp8"), "e4m3");
    ck_assert_str_eq(mt_kv_get(args, "cuda_graph_scope"), "['moe_router', 'moe_preprocess']");
    ck_assert_str_eq(mt_kv_get(args, "recompute_modules"), "['moe_act']");
    ck_assert_str_eq(mt_kv_get(args, "moe_router_force_load_balancing"), "True");
    ck_assert_str_eq(mt_kv_get(args, "benchmark_only"), "True");
    ck_assert_str_eq(mt_kv_get(args, "global_batch_size"), "4");
    ck_assert_int_eq(mt_logparse_world(p, &w), 0);
    ck_assert_int_eq(w.world, 4);
    ck_assert_int_eq(w.dp, 4);
    ck_assert_int_eq(w.tp, 1);
    ev = mt_logparse_first(p, MT_LOGEV_CAPTURE);
    ck_assert_ptr_nonnull(ev);
    ck_assert(fabs(ev->value - 0.012) < 1e-9);
    ev = mt_logparse_first(p, MT_LOGEV_OOM);
    ck_assert_ptr_nonnull(ev);
    ck_assert_ptr_nonnull(strstr(ev->text, "Tried to allocate 2048.00 MiB on rank 1"));
    mt_logparse_destroy(&p);
    free(text);
}
END_TEST

START_TEST(flops_counted)
{
    mt_moe_args a;
    mt_moe_args_defaults(&a);
    a.hidden = 7168;
    a.ffn = 2048;
    a.experts = 256;
    a.tokens = 8192;
    /* 8192 tokens x top-8 rows, SwiGLU: 6 H F per row forward, twice backward */
    ck_assert(mt_moe_expert_flops(&a, 65536, 1) == 6.0 * 65536 * 7168 * 2048);
    ck_assert(mt_moe_expert_flops(&a, 65536, 0) == 12.0 * 65536 * 7168 * 2048);
    ck_assert(mt_moe_layer_flops(&a, 65536) ==
              6.0 * 8192 * 7168 * 256 + 18.0 * 65536 * 7168 * 2048);
}
END_TEST

/* ---- the command line ---------------------------------------------------------------- */

static int parse(mt_moe_args *a, char *err, const char *line)
{
    char buf[1024], *argv[64], *tok, *save = NULL;
    int argc = 0;
    snprintf(buf, sizeof buf, "moetune-cuda-moe %s", line);
    for (tok = strtok_r(buf, " ", &save); tok && argc < 63; tok = strtok_r(NULL, " ", &save))
        argv[argc++] = tok;
    argv[argc] = NULL;
    return mt_moe_args_parse(a, argc, argv, err, 256);
}

START_TEST(args_defaults_and_megatron_names)
{
    mt_moe_args a;
    char err[256];
    ck_assert_int_eq(parse(&a, err, ""), 0);
    ck_assert_int_eq(a.hidden, 2048);
    ck_assert_int_eq(a.ffn, 768);
    ck_assert_int_eq(a.experts, 128);
    ck_assert_int_eq(a.topk, 8);
    ck_assert_int_eq(a.tokens, 4096);
    ck_assert_int_eq(a.ep, 1);
    ck_assert_int_eq(a.fp8, 0);
    ck_assert_int_eq(a.chunks, 1);
    ck_assert_int_eq(a.graph_scope, MT_MOE_GRAPH_NONE);
    ck_assert_int_eq(a.routing, MT_MOE_ROUTE_BALANCED);
    ck_assert_int_eq(parse(&a, err,
                           "--hidden-size 7168 --moe-ffn-hidden-size=2048 --num-experts 256 "
                           "--moe-router-topk 8 --micro-batch-size 2 --seq-length 4096 "
                           "--expert-model-parallel-size 8 --bf16 --fp8-format e4m3 "
                           "--fp8-recipe tensorwise --overlap-moe-expert-parallel-comm "
                           "--cuda-graph-impl local --cuda-graph-modules moe_router "
                           "--recompute-granularity selective --recompute-modules moe_act "
                           "--moe-router-dtype fp32 --train-iters 20 --moe-routing zipf "
                           "--zipf-alpha 0.9 --seed 7 --gemm-bench 5"),
                     0);
    ck_assert_int_eq(a.hidden, 7168);
    ck_assert_int_eq(a.ffn, 2048);
    ck_assert_int_eq(a.tokens, 8192);
    ck_assert_int_eq(a.ep, 8);
    ck_assert_int_eq(a.fp8, 1);
    ck_assert_int_eq(a.overlap, 1);
    ck_assert_int_eq(a.chunks, 4);
    ck_assert_int_eq(a.graph_scope, MT_MOE_GRAPH_ROUTER);
    ck_assert_int_eq(a.recompute_act, 1);
    ck_assert_int_eq(a.train_iters, 20);
    ck_assert_int_eq(a.routing, MT_MOE_ROUTE_ZIPF);
    ck_assert(a.zipf_alpha == 0.9);
    ck_assert_uint_eq(a.seed, 7);
    ck_assert_int_eq(a.gemm_bench, 5);
    ck_assert_str_eq(mt_moe_prec_name(&a), "fp8-e4m3");
    /* shorthand scopes; chunks never more than the local experts */
    ck_assert_int_eq(
        parse(&a, err,
              "--cuda-graph-scope router+preprocess --num-experts 4 "
              "--moe-router-topk 2 --expert-model-parallel-size 2 "
              "--overlap-moe-expert-parallel-comm --moe-overlap-chunks 8 --tokens 100"),
        0);
    ck_assert_int_eq(a.graph_scope, MT_MOE_GRAPH_ROUTER_PREPROCESS);
    ck_assert_str_eq(mt_moe_scope_name(a.graph_scope), "router+preprocess");
    ck_assert_int_eq(a.chunks, 2);
    ck_assert_int_eq(a.tokens, 100);
    ck_assert_int_eq(a.micro_batch, 1);
    ck_assert_int_eq(parse(&a, err, "--cuda-graph-scope moe_router --cuda-graph-impl none"), 0);
    ck_assert_int_eq(a.graph_scope, MT_MOE_GRAPH_NONE);
    ck_assert_int_eq(parse(&a, err, "--help"), 0);
    ck_assert_int_eq(a.help, 1);
}
END_TEST

/* every refusal names its flag */
START_TEST(args_errors_name_the_flag)
{
    static const struct {
        const char *line, *flag;
    } bad[] = {
        {"--hidden-size 100", "--hidden-size 100: must be a multiple of 16"},
        {"--hidden-size abc", "--hidden-size: 'abc' is not an integer"},
        {"--hidden-size", "--hidden-size: needs a value"},
        {"--moe-ffn-hidden-size 776", "--moe-ffn-hidden-size 776"},
        {"--num-experts 0", "--num-experts 0"},
        {"--num-experts 4 --moe-router-topk 5", "--moe-router-topk 5"},
        {"--num-experts 12 --expert-model-parallel-size 8", "--expert-model-parallel-size 8"},
        {"--fp8-format hybrid", "--fp8-format hybrid"},
        {"--fp8-recipe delayed", "--fp8-recipe delayed"},
        {"--cuda-graph-scope moe_preprocess", "--cuda-graph-scope moe_preprocess"},
        {"--cuda-graph-scope attn", "--cuda-graph-scope attn"},
        {"--cuda-graph-modules", "--cuda-graph-modules: needs a value"},
        {"--cuda-graph-impl full_iteration", "--cuda-graph-impl full_iteration"},
        {"--recompute-modules core_attn", "--recompute-modules core_attn"},
        {"--recompute-granularity full", "--recompute-granularity full"},
        {"--moe-routing random", "--moe-routing"},
        {"--moe-routing zipf --moe-router-force-load-balancing",
         "--moe-router-force-load-balancing"},
        {"--zipf-alpha -1", "--zipf-alpha -1"},
        {"--seed -3", "--seed"},
        {"--tokens 10 --seq-length 5", "--tokens"},
        {"--moe-overlap-chunks 2", "--moe-overlap-chunks"},
        {"--check", "--check"}, /* the default shape is too large for the CPU reference */
        {"--bf16=yes", "--bf16: takes no value"},
        {"--no-such-flag 3", "unknown flag --no-such-flag"},
        {"--hiden-size 2048", "unknown flag --hiden-size"},
        {"--fp16", "--fp16: changes what the MoE layer computes"},
        {"--tokenizer-type", "--tokenizer-type: needs a value"},
        {"--num-layers", "--num-layers: needs a value"},
        {"--moe-grouped-gemm=1", "--moe-grouped-gemm: takes no value"},
        {"stray", "unexpected argument 'stray'"},
        {"--tokens 100000000 --moe-router-topk 32 --num-experts 64", "--tokens"},
    };
    size_t i;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mt_moe_args a;
        char err[256];
        ck_assert_msg(parse(&a, err, bad[i].line) == -EINVAL, "accepted: %s", bad[i].line);
        ck_assert_msg(strstr(err, bad[i].flag) != NULL, "'%s': message '%s' lacks '%s'",
                      bad[i].line, err, bad[i].flag);
    }
    {
        mt_moe_args a;
        char err[256];
        ck_assert_int_eq(parse(&a, err,
                               "--check --tokens 64 --hidden-size 128 --moe-ffn-hidden-size 64 "
                               "--num-experts 8 --moe-router-topk 2"),
                         0);
        ck_assert_int_eq(a.check, 1);
    }
}
END_TEST

/* A contract's rendered Megatron command line (what a worker runs for a
 * contract with the cuda backend) parses unchanged: the layer's knobs are
 * read, the rest of the training command is accepted and listed. */
START_TEST(a_rendered_training_command_parses)
{
    tk *t = tk_open("qwen3-30b-a3b-h100x16.cfg");
    mt_rendered r;
    mt_moe_args a;
    char err[256], **argv;
    size_t i;
    tk_set(t, "expert_model_parallel_size=8");
    tk_set(t, "overlap_moe_expert_parallel_comm=true");
    tk_set(t, "cuda_graph_impl=transformer_engine");
    tk_set(t, "cuda_graph_modules=moe_router,moe_preprocess");
    mt_rendered_init(&r);
    ck_assert_int_eq(mt_render(t->reg, t->contract, t->cfg, MT_DIALECT_MLM, &r, t->diag), 0);
    argv = calloc(r.argv.n + 2, sizeof *argv);
    argv[0] = "moetune-cuda-moe";
    for (i = 0; i < r.argv.n; i++)
        argv[i + 1] = r.argv.v[i];
    ck_assert_msg(mt_moe_args_parse(&a, (int)r.argv.n + 1, argv, err, sizeof err) == 0, "%s",
                  err);
    ck_assert_int_eq(a.hidden, 2048);
    ck_assert_int_eq(a.ffn, 768);
    ck_assert_int_eq(a.experts, 128);
    ck_assert_int_eq(a.topk, 8);
    ck_assert_int_eq(a.ep, 8);
    ck_assert_int_eq(a.overlap, 1);
    ck_assert_int_eq(a.graph_scope, MT_MOE_GRAPH_ROUTER_PREPROCESS);
    ck_assert_int_gt(a.n_ignored, 5);
    ck_assert_ptr_nonnull(strstr(a.ignored, "--num-layers"));
    ck_assert_ptr_null(strstr(a.ignored, "--hidden-size"));
    free(argv);
    mt_rendered_clear(&r);
    tk_close(&t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_log");
    TCase *tc = tcase_create("log");
    tcase_add_test(tc, iteration_lines_parse);
    tcase_add_test(tc, memory_lines_parse);
    tcase_add_test(tc, arguments_world_events_parse);
    tcase_add_test(tc, flops_counted);
    tcase_add_test(tc, args_defaults_and_megatron_names);
    tcase_add_test(tc, args_errors_name_the_flag);
    tcase_add_test(tc, a_rendered_training_command_parses);
    suite_add_tcase(s, tc);
    return tk_run(s);
}
