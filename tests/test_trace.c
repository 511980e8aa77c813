/*
 * test_trace.c - the trace reader and the wall figures: a real Kineto trace
 * against its published reference figures, hand-built traces whose unions
 * are known exactly, gzip input, malformed input, and the sim's own traces
 * with EP overlap off and on.
 *
 * Needs MT_SIM_BIN (the built moetune-sim) besides testkit's definitions.
 */
#include "testkit.h"
#include "profile.h"
#include "trace.h"
#include "wall.h"

#include <check.h>
#include <errno.h>
#include <spawn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#ifndef MT_SIM_BIN
#error "MT_SIM_BIN must name the built moetune-sim"
#endif

extern char **environ;

#define REAL_TRACE MT_SOURCE_DIR "/../shared/data/traces/a100-2rank-nccl.json.gz"

/* +-0.01 us, in nanoseconds */
#define ck_assert_us(got_ns, want_us)                                                              \
    ck_assert_msg(llabs((long long)(got_ns) - (long long)((want_us)*1000.0 + 0.5)) <= 10,          \
                  "%s = %lld ns, want %.3f us", #got_ns, (long long)(got_ns), (double)(want_us))

static mt_trace *parse_ok(const char *json)
{
    mt_diag *d = mt_diag_new();
    mt_trace *t = mt_trace_parse(json, strlen(json), "hand.json", d);
    if (!t)
        mt_diag_print(d, stderr);
    ck_assert_msg(t != NULL, "the hand-built trace did not parse");
    mt_diag_destroy(&d);
    return t;
}

/* Parses bad input, expecting NULL and a message containing needle. */
static void parse_bad(const char *json, size_t len, const char *needle)
{
    mt_diag *d = mt_diag_new();
    mt_trace *t = mt_trace_parse(json, len, "bad.json", d);
    ck_assert_msg(t == NULL, "accepted bad input: %.60s", json);
    ck_assert_int_ge(mt_diag_count(d), 1);
    if (!mt_diag_contains(d, needle)) {
        mt_diag_print(d, stderr);
        ck_abort_msg("the message does not say '%s'", needle);
    }
    ck_assert_str_eq(mt_diag_at(d, 0)->file, "bad.json");
    mt_diag_destroy(&d);
}

/* ---- exact decimal microseconds -------------------------------------------------- */

START_TEST(us_text_exact)
{
    int64_t ns;
    ck_assert_int_eq(mt_trace_us_to_ns("4458676983543.183", 17, &ns), 0);
    ck_assert_int_eq(ns, 4458676983543183LL);
    ck_assert_int_eq(mt_trace_us_to_ns("41.407", 6, &ns), 0);
    ck_assert_int_eq(ns, 41407);
    ck_assert_int_eq(mt_trace_us_to_ns("7", 1, &ns), 0);
    ck_assert_int_eq(ns, 7000);
    ck_assert_int_eq(mt_trace_us_to_ns("1.5e3", 5, &ns), 0);
    ck_assert_int_eq(ns, 1500000);
    ck_assert_int_eq(mt_trace_us_to_ns("0.0004", 6, &ns), 0);
    ck_assert_int_eq(ns, 0);
    ck_assert_int_eq(mt_trace_us_to_ns("0.0005", 6, &ns), 0);
    ck_assert_int_eq(ns, 1);
    ck_assert_int_eq(mt_trace_us_to_ns("-2.25", 5, &ns), 0);
    ck_assert_int_eq(ns, -2250);
    /* a double would give ...543.18299: the text does not */
    ck_assert_int_eq(mt_trace_us_to_ns("1777000000000000.001", 20, &ns), 0);
    ck_assert_int_eq(ns, 1777000000000000001LL);
    ck_assert_int_eq(mt_trace_us_to_ns("1e30", 4, &ns), -ERANGE);
    ck_assert_int_eq(mt_trace_us_to_ns("1.2.3", 5, &ns), -EINVAL);
    ck_assert_int_eq(mt_trace_us_to_ns("", 0, &ns), -EINVAL);
    ck_assert_int_eq(mt_trace_us_to_ns("e5", 2, &ns), -EINVAL);
}
END_TEST

/* ---- the real trace --------------------------------------------------------------- */

START_TEST(real_trace_reference_figures)
{
    mt_diag *d = mt_diag_new();
    mt_trace *t;
    mt_trace_metrics m;
    mt_kv *ev = mt_kv_new();
    int dev[8];
    struct stat st;
    if (stat(REAL_TRACE, &st) != 0) {
        fprintf(stderr,
                "SKIP real_trace_reference_figures: %s is absent (the shared data "
                "directory sits beside the checkout)\n",
                REAL_TRACE);
        mt_diag_destroy(&d);
        mt_kv_destroy(&ev);
        return;
    }
    t = mt_trace_open(REAL_TRACE, d);
    if (!t)
        mt_diag_print(d, stderr);
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(mt_trace_kernel_count(t), 2700);
    ck_assert_uint_eq(mt_trace_devices(t, dev, 8), 1);
    ck_assert_int_eq(dev[0], 0);
    ck_assert_int_eq(mt_trace_metrics_get(t, 0, NULL, &m), 0);
    ck_assert_uint_eq(m.kernels, 2700);
    ck_assert_uint_eq(m.comm_kernels, 21);
    ck_assert_us(m.comm_ns, 46876.493);
    ck_assert_us(m.compute_ns, 115655.847);
    ck_assert_us(m.hidden_ns, 7317.025);
    ck_assert_msg(llabs((long long)(100000.0 * m.hidden_ns / m.comm_ns) - 15609) <= 1,
                  "hidden share %.4f%%, want 15.609%%", 100.0 * m.hidden_ns / m.comm_ns);
    ck_assert_us(m.active_ns, 155215.315);
    ck_assert_us(m.window_ns, 660551.005);
    ck_assert_us(m.idle_ns, 505335.690);
    ck_assert_int_eq(m.exposed_comm_ns, m.comm_ns - m.hidden_ns);
    /* the NCCL all-reduce is the exposed wall here */
    ck_assert_uint_ge(m.ntop, 1);
    ck_assert_ptr_nonnull(strstr(m.top[0].name, "AllReduce"));
    ck_assert_int_le(m.top[0].exposed_ns + (m.ntop > 1 ? m.top[1].exposed_ns : 0),
                     m.exposed_comm_ns);
    ck_assert_int_eq(mt_trace_evidence(t, ev), 0);
    ck_assert_str_eq(mt_kv_get(ev, "trace.available"), "true");
    ck_assert_str_eq(mt_kv_get(ev, "trace.comm_hidden_fraction"), "0.156092");
    ck_assert_str_eq(mt_kv_get(ev, "trace.graph_launches"), "0");
    ck_assert_str_eq(mt_kv_get(ev, "trace.hybridep_kernels"), "0");
    ck_assert_str_eq(mt_kv_get(ev, "trace.fp8_gemm"), "0");
    mt_kv_destroy(&ev);
    mt_trace_destroy(&t);
    ck_assert_ptr_null(t);
    mt_diag_destroy(&d);
}
END_TEST

/* Issue 18, item 13: the real trace with its 21 NCCL kernels moved from
 * stream 40 onto the compute stream 7: kernels overlapping on one stream,
 * which no GPU runs.  Read as it was, that trace "hid" 15.6% of its
 * communication behind kernels of its own stream; it is refused, naming
 * both events.  Overlaps up to 1 us (timestamp rounding) still pass. */
START_TEST(real_trace_with_overlaps_on_one_stream_is_refused)
{
    mt_diag *d = mt_diag_new();
    mt_trace *t;
    gzFile gz;
    struct stat st;
    size_t len = 0, cap = 1 << 20, moved = 0;
    char *text = malloc(cap), *p;
    int k;
    if (stat(REAL_TRACE, &st) != 0) {
        fprintf(stderr, "SKIP real_trace_with_overlaps_on_one_stream_is_refused: %s is absent\n",
                REAL_TRACE);
        free(text);
        mt_diag_destroy(&d);
        return;
    }
    ck_assert_ptr_nonnull(gz = gzopen(REAL_TRACE, "rb"));
    while ((k = gzread(gz, text + len, (unsigned)(cap - len - 1))) > 0) {
        len += (size_t)k;
        if (cap - len < 2)
            ck_assert_ptr_nonnull(text = realloc(text, cap *= 2));
    }
    gzclose(gz);
    text[len] = '\0';
    /* same length: the offsets of every other event stay as they were */
    for (p = text; (p = strstr(p, "\"tid\": 40,")); p += 10, moved++)
        memcpy(p, "\"tid\": 7, ", 10);
    for (p = text; (p = strstr(p, "\"stream\": 40,")); p += 13)
        memcpy(p, "\"stream\": 7, ", 13);
    ck_assert_uint_ge(moved, 21);
    t = mt_trace_parse(text, len, "a100-2rank-nccl-one-stream.json", d);
    ck_assert_msg(t == NULL, "a trace with NCCL and GEMM kernels overlapping on stream 7 was read");
    ck_assert_int_eq(mt_diag_count(d), 1);
    ck_assert_msg(mt_diag_contains(d, "device 0, stream 7: ") &&
                      mt_diag_contains(d, "on one stream, which a GPU never does") &&
                      mt_diag_contains(d, "ncclKernel_") && mt_diag_contains(d, "refused"),
                  "%s", mt_diag_at(d, 0)->message);
    mt_diag_destroy(&d);
    free(text);
    /* rounding: two kernels of one stream overlapping by 0.5 us pass */
    d = mt_diag_new();
    {
        static const char two[] =
            "{\"traceEvents\": ["
            "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"gemm_A\", \"pid\": 0, \"tid\": 7, "
            "\"ts\": 100.000, \"dur\": 50.500, \"args\": {\"device\": 0, \"stream\": 7}},"
            "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"gemm_B\", \"pid\": 0, \"tid\": 7, "
            "\"ts\": 150.000, \"dur\": 10, \"args\": {\"device\": 0, \"stream\": 7}}]}";
        t = mt_trace_parse(two, strlen(two), "rounded.json", d);
        ck_assert_msg(t != NULL, "%s", mt_diag_count(d) ? mt_diag_at(d, 0)->message : "");
        mt_trace_destroy(&t);
    }
    mt_diag_destroy(&d);
}
END_TEST

/* ---- hand-built traces -------------------------------------------------------------- */

/* One kernel event; ts and dur are microsecond text. */
#define K(name, dev, stream, ts, dur)                                                              \
    "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"" name "\", \"pid\": " #dev                  \
    ", \"tid\": " #stream ", \"ts\": " ts ", \"dur\": " dur ", \"args\": {\"device\": " #dev       \
    ", \"stream\": " #stream "}}"

START_TEST(hand_unions_exact)
{
    /* device 0, window 100..200 us:
     *   compute A [100,150) stream 7, nested B [110,120) stream 8,
     *   touching C [150,160) stream 7, identical D = C on stream 9;
     *   comm N1 [140,170) stream 20 (overlaps compute on [140,160)),
     *   comm N2 [180,200) stream 20, its copy on stream 21 (identical);
     *   a memcpy [170,175).  Kernels' union: [100,170) + [180,200) = 90 us;
     *   comm union 50, compute union 60, hidden 20, exposed 30, idle 10.
     * device 1 has one compute kernel and one comm kernel, disjoint. */
    const char *json =
        "{\"schemaVersion\": 1, \"traceEvents\": [\n" K("gemm_A", 0, 7, "100.000", "50") ",\n" K(
            "ncclDevKernel_AllReduce", 0, 20, "140",
            "30.0") ",\n" K("elementwise_B", 0, 8, "110",
                            "10") ",\n" K("gemm_C", 0, 7, "150",
                                          "10") ",\n" K("gemm_C", 0, 9, "150",
                                                        "10") ",\n" K("void "
                                                                      "hybrid_ep::dispatch_kernel<"
                                                                      "8>",
                                                                      0, 20, "180.0000",
                                                                      "20") ",\n" K("void "
                                                                                    "hybrid_ep::"
                                                                                    "dispatch_"
                                                                                    "kernel<8>",
                                                                                    0, 21, "180",
                                                                                    "20") ",\n"
                                                                                          "{\"ph\":"
                                                                                          " \"X\", "
                                                                                          "\"cat\":"
                                                                                          " \"gpu_"
                                                                                          "memcpy\""
                                                                                          ", "
                                                                                          "\"name\""
                                                                                          ": "
                                                                                          "\"Memcpy"
                                                                                          " HtoD\","
                                                                                          " \"pid\""
                                                                                          ": 0, "
                                                                                          "\"tid\":"
                                                                                          " 7, "
                                                                                          "\"ts\": "
                                                                                          "170, "
                                                                                          "\"dur\":"
                                                                                          " 5, "
                                                                                          "\"args\""
                                                                                          ": "
                                                                                          "{\"devic"
                                                                                          "e\": 0, "
                                                                                          "\"stream"
                                                                                          "\": "
                                                                                          "7}},\n"
                                                                                          "{\"ph\":"
                                                                                          " \"X\", "
                                                                                          "\"cat\":"
                                                                                          " \"cuda_"
                                                                                          "runtime"
                                                                                          "\", "
                                                                                          "\"name\""
                                                                                          ": "
                                                                                          "\"cudaGr"
                                                                                          "aphLaunc"
                                                                                          "h\", "
                                                                                          "\"pid\":"
                                                                                          " 1, "
                                                                                          "\"tid\":"
                                                                                          " 2, "
                                                                                          "\"ts\": "
                                                                                          "90, "
                                                                                          "\"dur\":"
                                                                                          " 3},\n"
                                                                                          "{\"ph\":"
                                                                                          " \"X\", "
                                                                                          "\"cat\":"
                                                                                          " \"cuda_"
                                                                                          "runtime"
                                                                                          "\", "
                                                                                          "\"name\""
                                                                                          ": "
                                                                                          "\"cudaLa"
                                                                                          "unchKern"
                                                                                          "el\", "
                                                                                          "\"pid\":"
                                                                                          " 1, "
                                                                                          "\"tid\":"
                                                                                          " 2, "
                                                                                          "\"ts\": "
                                                                                          "95, "
                                                                                          "\"dur\":"
                                                                                          " 3},\n"
                                                                                          "{\"ph\":"
                                                                                          " \"X\", "
                                                                                          "\"cat\":"
                                                                                          " \"cpu_"
                                                                                          "op\", "
                                                                                          "\"name\""
                                                                                          ": "
                                                                                          "\"aten::"
                                                                                          "mm\", "
                                                                                          "\"pid\":"
                                                                                          " 1, "
                                                                                          "\"tid\":"
                                                                                          " 2, "
                                                                                          "\"ts\": "
                                                                                          "\"not "
                                                                                          "read\", "
                                                                                          "\"dur\":"
                                                                                          " [1]},\n"
                                                                                          "{\"ph\":"
                                                                                          " \"f\", "
                                                                                          "\"cat\":"
                                                                                          " \"kerne"
                                                                                          "l\", "
                                                                                          "\"name\""
                                                                                          ": "
                                                                                          "\"flow\""
                                                                                          ", "
                                                                                          "\"ts\": "
                                                                                          "1},\n" K(
                                                                                              "sm90"
                                                                                              "_xmm"
                                                                                              "a_"
                                                                                              "gemm"
                                                                                              "_e4m"
                                                                                              "3bf1"
                                                                                              "6",
                                                                                              1, 7,
                                                                                              "1000"
                                                                                              ".000"
                                                                                              "5",
                                                                                              "0."
                                                                                              "999"
                                                                                              "5") ",\n" K("ncclDevKernel_SendRecv",
                                                                                                           1,
                                                                                                           20,
                                                                                                           "1002",
                                                                                                           "3") "\n"
                                                                                                                "], \"displayTimeUnit\": \"ms\"}";
    mt_trace *t = parse_ok(json);
    mt_trace_metrics m;
    mt_trace_query q;
    mt_kv *ev = mt_kv_new();
    int dev[4];
    ck_assert_uint_eq(mt_trace_kernel_count(t), 9);
    ck_assert_uint_eq(mt_trace_memcpy_count(t), 1);
    ck_assert_uint_eq(mt_trace_graph_launches(t), 1);
    ck_assert_uint_eq(mt_trace_kernel_launches(t), 1);
    ck_assert_uint_eq(mt_trace_devices(t, dev, 4), 2);
    ck_assert_int_eq(dev[0], 0);
    ck_assert_int_eq(dev[1], 1);

    ck_assert_int_eq(mt_trace_metrics_get(t, 0, NULL, &m), 0);
    ck_assert_int_eq(m.window_start_ns, 100000);
    ck_assert_int_eq(m.window_end_ns, 200000);
    ck_assert_int_eq(m.kernels, 7);
    ck_assert_int_eq(m.comm_kernels, 3);
    ck_assert_int_eq(m.active_ns, 90000);
    ck_assert_int_eq(m.comm_ns, 50000);
    ck_assert_int_eq(m.compute_ns, 60000);
    ck_assert_int_eq(m.hidden_ns, 20000);
    ck_assert_int_eq(m.exposed_comm_ns, 30000);
    ck_assert_int_eq(m.idle_ns, 10000);
    ck_assert_int_eq(m.memcpy_ns, 5000);
    ck_assert_uint_eq(m.gaps, 1);
    ck_assert_uint_eq(m.gaps_above, 0); /* 10 us < 20 us */
    ck_assert_int_eq(m.max_gap_ns, 10000);
    /* exposed time per kernel, never double counted across the two streams */
    ck_assert_uint_eq(m.ntop, 2);
    ck_assert_str_eq(m.top[0].name, "void hybrid_ep::dispatch_kernel<8>");
    ck_assert_int_eq(m.top[0].exposed_ns, 20000);
    ck_assert_str_eq(m.top[1].name, "ncclDevKernel_AllReduce");
    ck_assert_int_eq(m.top[1].exposed_ns, 10000);

    /* a window cutting through intervals: [145,185) */
    memset(&q, 0, sizeof q);
    q.has_window = 1;
    q.start_ns = 145000;
    q.end_ns = 185000;
    q.gap_threshold_ns = 5000;
    ck_assert_int_eq(mt_trace_metrics_get(t, 0, &q, &m), 0);
    ck_assert_int_eq(m.window_ns, 40000);
    ck_assert_int_eq(m.active_ns, 30000); /* [145,170) + [180,185) */
    ck_assert_int_eq(m.comm_ns, 30000);   /* [145,170) + [180,185) */
    ck_assert_int_eq(m.compute_ns, 15000);
    ck_assert_int_eq(m.hidden_ns, 15000);
    ck_assert_int_eq(m.idle_ns, 10000);
    ck_assert_uint_eq(m.gaps_above, 1);
    ck_assert_int_eq(m.gaps_above_ns, 10000);
    q.end_ns = q.start_ns;
    ck_assert_int_eq(mt_trace_metrics_get(t, 0, &q, &m), -EINVAL);

    /* device 1: sub-microsecond digits read exactly; disjoint comm and compute */
    ck_assert_int_eq(mt_trace_metrics_get(t, 1, NULL, &m), 0);
    ck_assert_int_eq(m.window_start_ns, 1000001); /* 1000.0005 rounds half up */
    ck_assert_int_eq(m.window_end_ns, 1005000);
    ck_assert_int_eq(m.compute_ns, 1000);
    ck_assert_int_eq(m.comm_ns, 3000);
    ck_assert_int_eq(m.hidden_ns, 0);
    ck_assert_int_eq(m.idle_ns, 999); /* 1001.001 .. 1002 */
    ck_assert_int_eq(mt_trace_metrics_get(t, 5, NULL, &m), -ENOENT);

    ck_assert_int_eq(mt_trace_evidence(t, ev), 0);
    ck_assert_str_eq(mt_kv_get(ev, "trace.hybridep_kernels"), "2");
    ck_assert_str_eq(mt_kv_get(ev, "trace.alltoall_kernels"), "1");
    ck_assert_str_eq(mt_kv_get(ev, "trace.fp8_gemm"), "1");
    ck_assert_str_eq(mt_kv_get(ev, "trace.nvfp4_gemm"), "0");
    ck_assert_str_eq(mt_kv_get(ev, "trace.graph_launches"), "1");
    /* hidden 20 of communication 50 + 3 */
    ck_assert_str_eq(mt_kv_get(ev, "trace.comm_hidden_fraction"), "0.377358");
    mt_kv_destroy(&ev);
    mt_trace_destroy(&t);
}
END_TEST

START_TEST(class_rules_extend)
{
    const char *json = "[" K("my_custom_a2a_kernel", 0, 3, "0", "10") ", " K(
        "gemm", 0, 4, "5", "10") ", " K("ncclDevKernel_Broadcast", 0, 5, "20", "4") "]";
    mt_trace *t = parse_ok(json);
    mt_diag *d = mt_diag_new();
    mt_trace_metrics m;
    ck_assert_int_eq(mt_trace_metrics_get(t, 0, NULL, &m), 0);
    ck_assert_int_eq(m.comm_ns, 4000);
    ck_assert_int_eq(m.compute_ns, 15000);
    ck_assert_int_eq(mt_trace_add_class(t, "communication:^my_custom_", d), 0);
    ck_assert_int_eq(mt_trace_add_class(t, "other:Broadcast", d), 0);
    ck_assert_int_eq(mt_trace_classify(t, "my_custom_x"), MT_TRACE_COMM);
    ck_assert_int_eq(mt_trace_classify(t, "x_my_custom_"), MT_TRACE_COMPUTE);
    ck_assert_int_eq(mt_trace_metrics_get(t, 0, NULL, &m), 0);
    ck_assert_int_eq(m.comm_ns, 10000);
    ck_assert_int_eq(m.compute_ns, 10000);
    ck_assert_int_eq(m.hidden_ns, 5000);
    ck_assert_int_eq(m.active_ns, 19000); /* "other" still counts as GPU-active */
    ck_assert_int_eq(mt_trace_add_class(t, "network:nccl", d), -EINVAL);
    ck_assert(mt_diag_contains(d, "communication, compute, memcpy, other"));
    ck_assert_int_eq(mt_trace_add_class(t, "compute:", d), -EINVAL);
    ck_assert(mt_diag_contains(d, "pattern is empty"));
    mt_diag_destroy(&d);
    mt_trace_destroy(&t);
}
END_TEST

/* ---- gzip ------------------------------------------------------------------------- */

static char *write_gz(const char *text, size_t len)
{
    char *path = malloc(64);
    int fd;
    gzFile gz;
    snprintf(path, 64, "/tmp/moetune-trace-gz-XXXXXX");
    ck_assert_int_ge(fd = mkstemp(path), 0);
    close(fd);
    ck_assert_ptr_nonnull(gz = gzopen(path, "wb"));
    ck_assert_int_eq(gzwrite(gz, text, (unsigned)len), (int)len);
    ck_assert_int_eq(gzclose(gz), Z_OK);
    return path;
}

START_TEST(gzip_input)
{
    const char *json = "{\"traceEvents\": [" K("gemm", 3, 7, "10.5", "2.25") ", " K(
        "ncclDevKernel_AllGather", 3, 20, "11", "4") "]}";
    char *gzp = write_gz(json, strlen(json)), *plain = tk_write_temp("trace", json);
    mt_diag *d = mt_diag_new();
    mt_trace *a = mt_trace_open(gzp, d), *b = mt_trace_open(plain, d);
    mt_trace_metrics ma, mb;
    FILE *f;
    long size;
    char *bytes;
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(mt_trace_metrics_get(a, 3, NULL, &ma), 0);
    ck_assert_int_eq(mt_trace_metrics_get(b, 3, NULL, &mb), 0);
    ck_assert_int_eq(ma.active_ns, 4500);
    ck_assert_int_eq(ma.hidden_ns, 1750);
    ck_assert(!memcmp(&ma, &mb, offsetof(mt_trace_metrics, ntop)));
    mt_trace_destroy(&a);
    mt_trace_destroy(&b);

    /* a truncated gzip file: a clear error, no crash */
    ck_assert_ptr_nonnull(f = fopen(gzp, "rb"));
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    rewind(f);
    bytes = malloc((size_t)size);
    ck_assert_int_eq(fread(bytes, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    ck_assert_ptr_nonnull(f = fopen(gzp, "wb"));
    fwrite(bytes, 1, (size_t)size / 2, f);
    fclose(f);
    mt_diag_clear(d);
    ck_assert_ptr_null(mt_trace_open(gzp, d));
    ck_assert_int_ge(mt_diag_count(d), 1);
    ck_assert_str_eq(mt_diag_at(d, 0)->file, gzp);
    ck_assert_msg(mt_diag_contains(d, "gzip") || mt_diag_contains(d, "truncated"), "message: %s",
                  mt_diag_at(d, 0)->message);
    mt_diag_clear(d);
    ck_assert_ptr_null(mt_trace_open("/nonexistent/trace.json.gz", d));
    ck_assert(mt_diag_contains(d, "cannot open the trace"));
    free(bytes);
    unlink(gzp), unlink(plain);
    free(gzp), free(plain);
    mt_diag_destroy(&d);
}
END_TEST

/* ---- malformed input ------------------------------------------------------------------ */

START_TEST(malformed_input)
{
    static const char garbage[] = "\x7f\x45\x4c\x46\x02\x01\x01\x00garbage\xff\xfe";
    const char *full = "{\"traceEvents\": [" K("gemm", 0, 7, "1", "2") "]}";
    char trunc[64];
    mt_diag *d = mt_diag_new();
    size_t n;
    /* truncated at every length: never a crash, never accepted */
    for (n = 0; n + 1 < strlen(full); n++) {
        mt_trace *t = mt_trace_parse(full, n, "cut.json", d);
        ck_assert_msg(t == NULL, "accepted a trace cut at %zu bytes", n);
    }
    mt_diag_destroy(&d);
    snprintf(trunc, sizeof trunc, "%.40s", full);
    parse_bad(trunc, strlen(trunc), "truncated");
    parse_bad(garbage, sizeof garbage - 1, "not valid JSON");
    parse_bad("", 0, "not valid JSON");
    parse_bad("{\"schemaVersion\": 1}", 20, "no \"traceEvents\" array");
    parse_bad("42", 2, "no \"traceEvents\" array");
    {
        const char *s = "{\"traceEvents\": [{\"cat\": \"kernel\", \"name\": \"k\", \"pid\": 0, "
                        "\"ts\": \"12.5\", \"dur\": 1}]}";
        parse_bad(s, strlen(s), "\"ts\" must be a number of microseconds, not a string");
    }
    {
        const char *s = "{\"traceEvents\": [{\"cat\": \"kernel\", \"name\": 5, \"pid\": 0, "
                        "\"ts\": 1, \"dur\": 1}]}";
        parse_bad(s, strlen(s), "\"name\" must be a string, not a number");
    }
    {
        const char *s = "{\"traceEvents\": [{\"cat\": \"kernel\", \"name\": \"k\", \"pid\": 0, "
                        "\"ts\": 1}]}";
        parse_bad(s, strlen(s), "without \"dur\"");
    }
    {
        const char *s = "{\"traceEvents\": [{\"cat\": \"kernel\", \"name\": \"k\", \"pid\": 0, "
                        "\"ts\": 1, \"dur\": -3}]}";
        parse_bad(s, strlen(s), "negative duration");
    }
    {
        const char *s = "{\"traceEvents\": [{\"cat\": \"gpu_memcpy\", \"name\": \"Memcpy\", "
                        "\"pid\": \"GPU 0\", \"ts\": 1, \"dur\": 1}]}";
        parse_bad(s, strlen(s), "names no device");
    }
    {
        const char *s = "{\"traceEvents\": [{\"cat\": \"kernel\", \"name\": \"k\", \"ts\": 1, "
                        "\"dur\": 1, \"args\": {\"device\": [0]}}]}";
        parse_bad(s, strlen(s), "\"device\" must be an integer, not an array");
    }
    {
        /* the field names the event */
        const char *s = "{\"traceEvents\": [{\"cat\": \"cpu_op\"}, {\"cat\": \"kernel\", "
                        "\"name\": \"k\", \"pid\": 0, \"ts\": 1, \"dur\": {}}]}";
        mt_diag *dd = mt_diag_new();
        ck_assert_ptr_null(mt_trace_parse(s, strlen(s), "f.json", dd));
        ck_assert_str_eq(mt_diag_at(dd, 0)->field, "traceEvents[1].dur");
        mt_diag_destroy(&dd);
    }
    {
        /* a syntax error names its line */
        const char *s = "{\"traceEvents\": [\n{\"cat\": \"kernel\",\n \"name\": \"k\" \"ts\": 1}]}";
        mt_diag *dd = mt_diag_new();
        ck_assert_ptr_null(mt_trace_parse(s, strlen(s), "f.json", dd));
        ck_assert_int_eq(mt_diag_at(dd, 0)->line, 3);
        mt_diag_destroy(&dd);
    }
    {
        /* deep nesting is refused, not recursed into */
        size_t k, len = 0;
        char *deep = malloc(5000);
        len += (size_t)sprintf(deep, "{\"traceEvents\": [{\"args\": ");
        for (k = 0; k < 1000; k++)
            deep[len++] = '[';
        deep[len] = '\0';
        parse_bad(deep, len, "nested deeper");
        free(deep);
    }
}
END_TEST

/* ---- the sim's traces ------------------------------------------------------------------ */

/* The Qwen3 example's base config plus sets, rendered as the worker launches
 * it, plus extra flags; runs the sim and returns the trace path (caller frees
 * and removes). */
static char *sim_trace_of(const char *contract, const char *const *sets, const char *const *extra,
                          const char *dir)
{
    tk *t = tk_open(contract);
    mt_rendered out;
    mt_strlist argv, envs;
    const char *k, *v;
    char tb[256], outp[] = "/tmp/moetune-trace-sim-XXXXXX", **envp, *path;
    static const char *const hw[][2] = {{"gpu", "--sim-gpu"},
                                        {"gpus_per_node", "--sim-gpus-per-node"},
                                        {"nodes", "--sim-nodes"},
                                        {"nvlink_domain", "--sim-nvlink-domain"}};
    size_t i, n, ne = 0;
    int fo, st;
    pid_t pid;
    posix_spawn_file_actions_t fa;
    memset(&argv, 0, sizeof argv);
    memset(&envs, 0, sizeof envs);
    for (i = 0; sets && sets[i]; i++)
        tk_set(t, sets[i]);
    mt_rendered_init(&out);
    ck_assert_int_eq(mt_render(t->reg, t->contract, t->cfg, MT_DIALECT_MLM, &out, t->diag), 0);
    mt_strlist_push(&argv, MT_SIM_BIN);
    for (i = 0; i < out.argv.n; i++)
        mt_strlist_push(&argv, out.argv.v[i]);
    for (i = 0; i < sizeof hw / sizeof hw[0]; i++)
        if ((v = mt_kv_get(t->contract->hardware, hw[i][0])) != NULL) {
            mt_strlist_push(&argv, hw[i][1]);
            mt_strlist_push(&argv, v);
        }
    snprintf(tb, sizeof tb, "%s/tb", dir);
    mt_strlist_push(&argv, "--profile");
    mt_strlist_push(&argv, "--use-pytorch-profiler");
    mt_strlist_push(&argv, "--tensorboard-dir");
    mt_strlist_push(&argv, tb);
    for (i = 0; extra && extra[i]; i++)
        mt_strlist_push(&argv, extra[i]);
    for (i = 0; mt_kv_entry(out.env, i, &k, &v) == 0; i++) {
        char buf[512];
        snprintf(buf, sizeof buf, "%s=%s", k, v);
        mt_strlist_push(&envs, buf);
    }
    for (n = 0; environ[n]; n++)
        ;
    envp = calloc(n + envs.n + 1, sizeof *envp);
    for (i = 0; i < n; i++)
        if (strncmp(environ[i], "MOETUNE_SIM_", 12) && strncmp(environ[i], "WORLD_SIZE=", 11))
            envp[ne++] = environ[i];
    for (i = 0; i < envs.n; i++)
        envp[ne++] = envs.v[i];
    {
        char **av = calloc(argv.n + 1, sizeof *av);
        for (i = 0; i < argv.n; i++)
            av[i] = argv.v[i];
        ck_assert_int_ge(fo = mkstemp(outp), 0);
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, fo, 1);
        posix_spawn_file_actions_adddup2(&fa, fo, 2);
        ck_assert_int_eq(posix_spawn(&pid, MT_SIM_BIN, &fa, NULL, av, envp), 0);
        posix_spawn_file_actions_destroy(&fa);
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        close(fo);
        free(av);
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        char *log = tk_slurp(outp);
        ck_abort_msg("the sim failed (status %d):\n%.2000s", st, log ? log : "");
    }
    unlink(outp);
    path = malloc(strlen(tb) + 32);
    sprintf(path, "%s/trace_rank0.json", tb);
    free(envp);
    mt_strlist_clear(&argv);
    mt_strlist_clear(&envs);
    mt_rendered_clear(&out);
    tk_close(&t);
    return path;
}

static char *sim_trace(const char *const *sets, const char *dir)
{
    return sim_trace_of("qwen3-30b-a3b-h100x16.cfg", sets, NULL, dir);
}

/* Runs the sim and opens its trace (the directory is removed again). */
static mt_trace *sim_open(const char *contract, const char *const *sets,
                          const char *const *extra);

static void rm_trace(const char *dir, char *path)
{
    char tb[300];
    unlink(path);
    snprintf(tb, sizeof tb, "%s/tb", dir);
    rmdir(tb);
    rmdir(dir);
    free(path);
}

START_TEST(sim_ep_overlap_hides_communication)
{
    static const char *const flex[] = {
        "moe_token_dispatcher_type=flex",        "moe_flex_dispatcher_backend=hybridep",
        "moe_flex_dispatcher_num_sms=32",        "moe_permute_fusion=true",
        "overlap_moe_expert_parallel_comm=true", NULL};
    char d1[] = "/tmp/moetune-trace-off-XXXXXX", d2[] = "/tmp/moetune-trace-on-XXXXXX";
    char *p1, *p2;
    mt_diag *d = mt_diag_new();
    mt_trace *off, *on;
    mt_kv *e1 = mt_kv_new(), *e2 = mt_kv_new();
    double f1, f2;
    mt_trace_metrics m;
    int dev[64];
    ck_assert_ptr_nonnull(mkdtemp(d1));
    ck_assert_ptr_nonnull(mkdtemp(d2));
    p1 = sim_trace(NULL, d1);
    p2 = sim_trace(flex, d2);
    off = mt_trace_open(p1, d);
    on = mt_trace_open(p2, d);
    if (!off || !on)
        mt_diag_print(d, stderr);
    ck_assert(off && on);
    ck_assert_uint_ge(mt_trace_devices(off, dev, 64), 1);
    ck_assert_int_eq(mt_trace_metrics_get(off, dev[0], NULL, &m), 0);
    ck_assert_int_gt(m.comm_ns, 0);
    ck_assert_int_gt(m.compute_ns, 0);
    ck_assert_int_le(m.active_ns, m.comm_ns + m.compute_ns + m.memcpy_ns);
    ck_assert_int_eq(mt_trace_evidence(off, e1), 0);
    ck_assert_int_eq(mt_trace_evidence(on, e2), 0);
    f1 = strtod(mt_kv_get(e1, "trace.comm_hidden_fraction"), NULL);
    f2 = strtod(mt_kv_get(e2, "trace.comm_hidden_fraction"), NULL);
    fprintf(stderr, "sim hidden communication: overlap off %.4f, on %.4f\n", f1, f2);
    ck_assert_msg(f1 < 0.05, "EP overlap off hides %.4f of communication", f1);
    ck_assert_msg(f2 > 0.15 && f2 > f1 + 0.1, "EP overlap on hides only %.4f (off %.4f)", f2, f1);
    ck_assert_str_eq(mt_kv_get(e1, "trace.hybridep_kernels"), "0");
    ck_assert_int_gt(atoi(mt_kv_get(e2, "trace.hybridep_kernels")), 0);
    ck_assert_int_gt(atoi(mt_kv_get(e1, "trace.alltoall_kernels")), 0);
    ck_assert_str_eq(mt_kv_get(e2, "trace.alltoall_kernels"), "0");
    ck_assert_str_eq(mt_kv_get(e1, "trace.graph_launches"), "0");
    ck_assert_str_eq(mt_kv_get(e1, "trace.fp8_gemm"), "0");
    ck_assert_int_gt(atoi(mt_kv_get(e1, "trace.kernel_launches")), 0);
    /* the profile: text, JSON, and the A/B side by side */
    {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        mt_profile pa, pb;
        mt_profile_opts o;
        mt_profile_opts_init(&o);
        ck_assert_int_eq(mt_profile_build(off, "off", &o, &pa, d), 0);
        ck_assert_int_eq(mt_profile_build(on, "on", &o, &pb, d), 0);
        mt_profile_print(&pb, f, 0);
        mt_profile_print(&pb, f, 1);
        mt_profile_compare(&pa, &pb, f, 0);
        mt_profile_compare(&pa, &pb, f, 1);
        fclose(f);
        ck_assert_ptr_nonnull(strstr(buf, "hidden_comm_us"));
        ck_assert_ptr_nonnull(strstr(buf, "\"trace.hybridep_kernels\""));
        ck_assert_ptr_nonnull(strstr(buf, "hidden_share_of_comm"));
        /* off: every bit of communication is exposed, and it is the wall */
        ck_assert_int_eq(pa.wall.wall, MT_WALL_IDX_COMM);
        ck_assert_int_lt(pb.exposed_ns, pa.exposed_ns);
        o.device = 9999;
        mt_profile_clear(&pa);
        ck_assert_int_eq(mt_profile_build(on, "on", &o, &pa, d), -ENOENT);
        ck_assert(mt_diag_contains(d, "device 9999"));
        mt_profile_clear(&pb);
        free(buf);
    }
    mt_kv_destroy(&e1), mt_kv_destroy(&e2);
    mt_trace_destroy(&off), mt_trace_destroy(&on);
    rm_trace(d1, p1), rm_trace(d2, p2);
    mt_diag_destroy(&d);
}
END_TEST

static mt_trace *sim_open(const char *contract, const char *const *sets,
                          const char *const *extra)
{
    char dir[] = "/tmp/moetune-trace-sim-XXXXXX", *path;
    mt_diag *d = mt_diag_new();
    mt_trace *t;
    ck_assert_ptr_nonnull(mkdtemp(dir));
    path = sim_trace_of(contract, sets, extra, dir);
    t = mt_trace_open(path, d);
    if (!t)
        mt_diag_print(d, stderr);
    ck_assert_ptr_nonnull(t);
    rm_trace(dir, path);
    mt_diag_destroy(&d);
    return t;
}

static mt_wall_verdict sim_wall(mt_trace *t)
{
    mt_profile p;
    mt_profile_opts o;
    mt_wall_verdict v;
    mt_diag *d = mt_diag_new();
    mt_profile_opts_init(&o);
    ck_assert_int_eq(mt_profile_build(t, "sim", &o, &p, d), 0);
    v = p.wall;
    fprintf(stderr, "  wall %s (runner-up %s, confidence %.2f): %s\n", mt_wall_name(v.wall),
            mt_wall_name(v.runner_up), v.confidence, v.reason);
    mt_profile_clear(&p);
    mt_diag_destroy(&d);
    return v;
}

/* The same A/B with the experts inside one NVLink domain (EP 8 of 16
 * GPUs) and TE graphs keeping the host's launches down: the overlap hides
 * enough that communication stops being the wall. */
START_TEST(sim_wall_moves_when_overlap_hides_comm)
{
    static const char *const off[] = {
        "moe_token_dispatcher_type=flex", "moe_flex_dispatcher_backend=hybridep",
        "moe_flex_dispatcher_num_sms=32", "moe_permute_fusion=true",
        "expert_model_parallel_size=8",   "cuda_graph_impl=transformer_engine",
        "cuda_graph_modules=attn moe_router moe_preprocess", NULL};
    static const char *const on[] = {
        "moe_token_dispatcher_type=flex", "moe_flex_dispatcher_backend=hybridep",
        "moe_flex_dispatcher_num_sms=32", "moe_permute_fusion=true",
        "expert_model_parallel_size=8",   "overlap_moe_expert_parallel_comm=true",
        "cuda_graph_impl=transformer_engine", "cuda_graph_modules=attn moe_router moe_preprocess",
        NULL};
    mt_trace *a = sim_open("qwen3-30b-a3b-h100x16.cfg", off, NULL);
    mt_trace *b = sim_open("qwen3-30b-a3b-h100x16.cfg", on, NULL);
    mt_wall_verdict va = sim_wall(a), vb = sim_wall(b);
    ck_assert_int_eq(va.wall, MT_WALL_IDX_COMM);
    ck_assert_int_eq(vb.wall, MT_WALL_IDX_COMPUTE);
    ck_assert_int_eq(vb.runner_up, MT_WALL_IDX_COMM);
    ck_assert(vb.exposed_share < va.exposed_share);
    mt_trace_destroy(&a), mt_trace_destroy(&b);
}
END_TEST

/* A fast Blackwell node with a fast dispatcher, no CUDA graphs and half the
 * contract's micro-batch (MBS 4): the GPU waits for the host's launches. */
START_TEST(sim_host_bound_blackwell)
{
    static const char *const sets[] = {
        "moe_token_dispatcher_type=flex", "moe_flex_dispatcher_backend=hybridep",
        "moe_flex_dispatcher_num_sms=32", "moe_permute_fusion=true", "micro_batch_size=4", NULL};
    mt_trace *t = sim_open("qwen3-30b-a3b-gb300x8.cfg", sets, NULL);
    mt_wall_verdict v = sim_wall(t);
    ck_assert_int_eq(v.wall, MT_WALL_IDX_HOST);
    ck_assert(v.idle_net_share > 0.1);
    mt_trace_destroy(&t);
}
END_TEST

static const mt_knob_verdict *verdict_for(const mt_verdicts *vs, const char *knob)
{
    size_t i;
    for (i = 0; i < vs->n; i++)
        if (!strcmp(vs->v[i].knob, knob))
            return &vs->v[i];
    return NULL;
}

/* The evidence of a sim trace of contract + sets, then what the plugins'
 * verify says of knob from it. */
static uint32_t trace_verdict(const char *contract, const char *const *sets,
                              const char *const *extra, const char *knob, mt_kv *ev)
{
    tk *t = tk_open(contract);
    mt_trace *tr = sim_open(contract, sets, extra);
    mt_verdicts vs = {0};
    mt_ctx_v1 ctx;
    const mt_knob_verdict *kv;
    uint32_t v;
    size_t i;
    for (i = 0; sets && sets[i]; i++)
        tk_set(t, sets[i]);
    ck_assert_int_eq(mt_trace_evidence(tr, ev), 0);
    ctx = mt_ctx_make(t->contract, t->cfg, ev, NULL);
    ck_assert_int_eq(mt_registry_verify(t->reg, &ctx, &vs, t->diag), 0);
    kv = verdict_for(&vs, knob);
    ck_assert_msg(kv != NULL, "no verdict for %s", knob);
    fprintf(stderr, "  %s: %s\n", knob, kv->evidence);
    v = kv->verdict;
    mt_verdicts_clear(&vs);
    mt_trace_destroy(&tr);
    tk_close(&t);
    return v;
}

START_TEST(sim_evidence_fp8)
{
    static const char *const fp8[] = {"fp8_format=e4m3", "fp8_recipe=mxfp8", NULL};
    mt_kv *ev = mt_kv_new(), *base = mt_kv_new();
    mt_trace *t = sim_open("qwen3-30b-a3b-gb300x8.cfg", NULL, NULL);
    ck_assert_uint_eq(trace_verdict("qwen3-30b-a3b-gb300x8.cfg", fp8, NULL, "fp8_recipe", ev),
                      MT_VERDICT_APPLIED);
    ck_assert_int_gt(atoi(mt_kv_get(ev, "trace.mxfp8_gemm")), 0);
    ck_assert_int_eq(mt_trace_evidence(t, base), 0);
    ck_assert_str_eq(mt_kv_get(base, "trace.fp8_gemm"), "0");
    ck_assert_str_eq(mt_kv_get(base, "trace.mxfp8_gemm"), "0");
    mt_kv_destroy(&ev), mt_kv_destroy(&base);
    mt_trace_destroy(&t);
}
END_TEST

START_TEST(sim_evidence_hybridep)
{
    static const char *const flex[] = {
        "moe_token_dispatcher_type=flex", "moe_flex_dispatcher_backend=hybridep",
        "moe_flex_dispatcher_num_sms=32", "moe_permute_fusion=true", NULL};
    mt_kv *ev = mt_kv_new();
    ck_assert_uint_eq(
        trace_verdict("qwen3-30b-a3b-gb300x8.cfg", flex, NULL, "moe_flex_dispatcher_backend", ev),
        MT_VERDICT_APPLIED);
    ck_assert_int_gt(atoi(mt_kv_get(ev, "trace.hybridep_kernels")), 0);
    ck_assert_str_eq(mt_kv_get(ev, "trace.alltoall_kernels"), "0");
    mt_kv_destroy(&ev);
}
END_TEST

/* Profiled steps 3 to 6 with 3 warm-up steps: steps 3 and 4 (the capture
 * step) run eagerly, 5 and 6 replay the graphs with fewer launches. */
START_TEST(sim_evidence_graph_replay_after_capture)
{
    static const char *const graphs[] = {
        "moe_token_dispatcher_type=flex",      "moe_flex_dispatcher_backend=hybridep",
        "moe_flex_dispatcher_num_sms=32",      "moe_permute_fusion=true",
        "cuda_graph_impl=transformer_engine",  "cuda_graph_modules=attn moe_router moe_preprocess",
        NULL};
    static const char *const steps[] = {"--profile-step-start", "3", "--profile-step-end", "7",
                                        NULL};
    mt_kv *ev = mt_kv_new(), *none = mt_kv_new();
    mt_trace *t;
    ck_assert_uint_eq(
        trace_verdict("qwen3-30b-a3b-gb300x8.cfg", graphs, steps, "cuda_graph_impl", ev),
        MT_VERDICT_APPLIED);
    ck_assert_str_eq(mt_kv_get(ev, "trace.steps"), "4");
    ck_assert_str_eq(mt_kv_get(ev, "trace.graph_first_step"), "5");
    ck_assert_str_eq(mt_kv_get(ev, "trace.graph_last_step"), "6");
    ck_assert(strtod(mt_kv_get(ev, "trace.launches_per_graph_step"), NULL) <
              strtod(mt_kv_get(ev, "trace.launches_per_eager_step"), NULL));
    /* only the eager steps profiled: graphs were captured, never replayed */
    {
        static const char *const early[] = {"--profile-step-start", "2", "--profile-step-end", "5",
                                            NULL};
        mt_kv *e2 = mt_kv_new();
        ck_assert_uint_ne(
            trace_verdict("qwen3-30b-a3b-gb300x8.cfg", graphs, early, "cuda_graph_impl", e2),
            MT_VERDICT_APPLIED);
        ck_assert_str_eq(mt_kv_get(e2, "trace.graph_launches"), "0");
        mt_kv_destroy(&e2);
    }
    /* no graphs configured: no graph launches */
    t = sim_open("qwen3-30b-a3b-gb300x8.cfg", NULL, steps);
    ck_assert_int_eq(mt_trace_evidence(t, none), 0);
    ck_assert_str_eq(mt_kv_get(none, "trace.graph_launches"), "0");
    ck_assert_str_eq(mt_kv_get(none, "trace.graph_steps"), "0");
    mt_trace_destroy(&t);
    mt_kv_destroy(&ev), mt_kv_destroy(&none);
}
END_TEST

/* ---- steps, NVTX ranges, ranks, the wall rule (hand-built) ------------------------------ */

START_TEST(hand_steps_nvtx_and_ranks)
{
    /* two devices, two steps; NVTX dispatch/combine ranges on the host */
    static const char json[] =
        "{\"traceEvents\": ["
        "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#7\",\"pid\":1,"
        "\"tid\":1,\"ts\":0,\"dur\":100},"
        "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#8\",\"pid\":1,"
        "\"tid\":1,\"ts\":100,\"dur\":100},"
        "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"MoE token_dispatch\",\"pid\":1,"
        "\"tid\":1,\"ts\":110,\"dur\":20},"
        "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"moe_dispatch_inner\",\"pid\":1,"
        "\"tid\":1,\"ts\":120,\"dur\":20},"
        "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"token_COMBINE\",\"pid\":1,"
        "\"tid\":1,\"ts\":160,\"dur\":10},"
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"gemm_a\",\"pid\":0,\"tid\":7,\"ts\":5,"
        "\"dur\":50,\"args\":{\"device\":0}},"
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"gemm_a\",\"pid\":0,\"tid\":7,\"ts\":100,"
        "\"dur\":40,\"args\":{\"device\":0}},"
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"ncclDevKernel_SendRecv\",\"pid\":0,"
        "\"tid\":8,\"ts\":130,\"dur\":30,\"args\":{\"device\":0}},"
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"gemm_a\",\"pid\":1,\"tid\":7,\"ts\":100,"
        "\"dur\":20,\"args\":{\"device\":1}},"
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"ncclDevKernel_SendRecv\",\"pid\":1,"
        "\"tid\":8,\"ts\":120,\"dur\":70,\"args\":{\"device\":1}}"
        "]}";
    mt_trace *t = parse_ok(json);
    mt_profile p;
    mt_profile_opts o;
    mt_diag *d = mt_diag_new();
    int lo, hi;
    int64_t a, b;
    ck_assert_uint_eq(mt_trace_steps(t, &lo, &hi), 2);
    ck_assert_int_eq(lo, 7);
    ck_assert_int_eq(hi, 8);
    ck_assert_int_eq(mt_trace_step_window(t, 8, 8, &a, &b), 0);
    ck_assert_int_eq(a, 100000);
    ck_assert_int_eq(b, 200000);
    ck_assert_int_eq(mt_trace_step_window(t, 8, 9, &a, &b), -ENOENT);
    ck_assert_int_eq(mt_trace_step_window(t, 8, 7, &a, &b), -EINVAL);
    mt_profile_opts_init(&o);
    o.has_steps = 1, o.first = 8, o.last = 8;
    ck_assert_int_eq(mt_profile_build(t, "hand", &o, &p, d), 0);
    ck_assert_uint_eq(p.ndev, 2);
    /* device 0 in [100, 200): gemm 100-140, nccl 130-160: comm 30, hidden 10,
     * exposed 20, idle 40.  device 1: gemm 100-120, nccl 120-190: comm 70,
     * exposed 70, idle 10 */
    ck_assert_int_eq(p.dev[0].comm_ns, 30000);
    ck_assert_int_eq(p.dev[0].hidden_ns, 10000);
    ck_assert_int_eq(p.dev[0].exposed_comm_ns, 20000);
    ck_assert_int_eq(p.dev[0].idle_ns, 40000);
    ck_assert_int_eq(p.dev[1].exposed_comm_ns, 70000);
    ck_assert_int_eq(p.exposed.min, 20000);
    ck_assert_int_eq(p.exposed.min_dev, 0);
    ck_assert_int_eq(p.exposed.max, 70000);
    ck_assert_int_eq(p.exposed.max_dev, 1);
    ck_assert_int_eq(p.idle.min, 10000);
    ck_assert_int_eq(p.idle.max, 40000);
    /* dispatch: 110-130 and 120-140 overlap: union 30 us in 2 ranges;
     * combine (any case): 10 us */
    ck_assert_uint_eq(p.dev[0].dispatch_ranges, 2);
    ck_assert_int_eq(p.dev[0].dispatch_ns, 30000);
    ck_assert_uint_eq(p.dev[0].combine_ranges, 1);
    ck_assert_int_eq(p.dev[0].combine_ns, 10000);
    /* exposed 90 of 200 us: communication */
    ck_assert_int_eq(p.wall.wall, MT_WALL_IDX_COMM);
    mt_profile_clear(&p);
    /* a window the trace does not mark */
    o.first = 3, o.last = 4;
    ck_assert_int_ne(mt_profile_build(t, "hand", &o, &p, d), 0);
    ck_assert(mt_diag_contains(d, "marks steps 7 to 8"));
    mt_trace_destroy(&t);
    mt_diag_destroy(&d);
}
END_TEST

/* Every rank marks its own steps: the window of a step runs from the earliest
 * rank's start to the latest rank's end, so that no rank's tail is cut off. */
START_TEST(step_window_spans_every_rank)
{
    static const char json[] =
        "{\"traceEvents\": ["
        "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#3\",\"pid\":1,"
        "\"tid\":1,\"ts\":5,\"dur\":100},"
        "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#3\",\"pid\":2,"
        "\"tid\":1,\"ts\":0,\"dur\":90},"
        "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#3\",\"pid\":3,"
        "\"tid\":1,\"ts\":10,\"dur\":115},"
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"gemm_a\",\"pid\":0,\"tid\":7,\"ts\":20,"
        "\"dur\":50,\"args\":{\"device\":0}}"
        "]}";
    mt_trace *t = parse_ok(json);
    int64_t a = 0, b = 0;
    ck_assert_int_eq(mt_trace_step_window(t, 3, 3, &a, &b), 0);
    ck_assert_int_eq(a, 0);
    ck_assert_int_eq(b, 125000);
    mt_trace_destroy(&t);
}
END_TEST

START_TEST(wall_rule)
{
    mt_wall_input in;
    mt_wall_verdict v;
    mt_profile_rules r;
    mt_wall_default_rules(&r);
    memset(&in, 0, sizeof in);
    in.window_ns = 1000000;
    in.headroom = -1;
    /* nothing crosses a threshold: compute, runner-up the closest */
    in.exposed_comm_ns = 100000; /* 10% of 20%: ratio 0.5 */
    in.idle_ns = 20000;
    in.gaps_per_device = 100;
    mt_wall_classify(&in, &r, &v);
    ck_assert_int_eq(v.wall, MT_WALL_IDX_COMPUTE);
    ck_assert_int_eq(v.runner_up, MT_WALL_IDX_COMM);
    ck_assert_double_eq_tol(v.confidence, 0.5, 1e-9);
    /* exposed 40%: communication, confidence 1 - 1/2 */
    in.exposed_comm_ns = 400000;
    mt_wall_classify(&in, &r, &v);
    ck_assert_int_eq(v.wall, MT_WALL_IDX_COMM);
    ck_assert_int_eq(v.runner_up, MT_WALL_IDX_COMPUTE);
    ck_assert_double_eq_tol(v.confidence, 0.5, 1e-9);
    /* exposed exactly at its 20% threshold ties with compute: a tie goes to
     * the earlier wall (memory, communication, host, compute), with no
     * confidence either way */
    in.exposed_comm_ns = 200000;
    mt_wall_classify(&in, &r, &v);
    ck_assert_int_eq(v.wall, MT_WALL_IDX_COMM);
    ck_assert_int_eq(v.runner_up, MT_WALL_IDX_COMPUTE);
    ck_assert_double_eq_tol(v.confidence, 0.0, 1e-12);
    in.exposed_comm_ns = 400000;
    /* idle 30% with many gaps beats exposed 40% (1.5 < 3) */
    in.idle_ns = 300000;
    mt_wall_classify(&in, &r, &v);
    ck_assert_int_eq(v.wall, MT_WALL_IDX_HOST);
    ck_assert_int_eq(v.runner_up, MT_WALL_IDX_COMM);
    /* ... unless the pipeline bubble explains it */
    in.bubble_share = 0.25;
    mt_wall_classify(&in, &r, &v);
    ck_assert_int_eq(v.wall, MT_WALL_IDX_COMM);
    ck_assert_double_eq_tol(v.idle_net_share, 0.05, 1e-9);
    /* ... or the idle time sits in a few long gaps: not the launch signature */
    in.bubble_share = 0;
    in.gaps_per_device = 2; /* 2 of 20: ratio 3 x 0.1 */
    mt_wall_classify(&in, &r, &v);
    ck_assert_int_eq(v.wall, MT_WALL_IDX_COMM);
    /* memory beats everything when the run ran out of it */
    in.oom = 1;
    mt_wall_classify(&in, &r, &v);
    ck_assert_int_eq(v.wall, MT_WALL_IDX_MEMORY);
    ck_assert_double_eq_tol(v.confidence, 1.0, 1e-9);
    in.oom = 0;
    in.headroom = 0.04, in.headroom_gate = 0.1; /* 2.5 */
    in.exposed_comm_ns = 100000;
    mt_wall_classify(&in, &r, &v);
    ck_assert_int_eq(v.wall, MT_WALL_IDX_MEMORY);
    ck_assert(strstr(v.reason, "headroom") != NULL);
    /* thresholds come from the contract */
    in.headroom = -1;
    r.comm_share = 0.05;
    mt_wall_classify(&in, &r, &v);
    ck_assert_int_eq(v.wall, MT_WALL_IDX_COMM);
    /* the bubble of a 1F1B pipeline */
    ck_assert_double_eq_tol(mt_wall_bubble_share(4, 1, 12), 3.0 / 15.0, 1e-12);
    ck_assert_double_eq_tol(mt_wall_bubble_share(4, 2, 12), 3.0 / 27.0, 1e-12);
    ck_assert_double_eq_tol(mt_wall_bubble_share(1, 1, 12), 0.0, 1e-12);
    ck_assert_str_eq(mt_wall_name(MT_WALL_IDX_HOST), "host");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("trace");
    TCase *t = tcase_create("trace");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, us_text_exact);
    tcase_add_test(t, real_trace_reference_figures);
    tcase_add_test(t, real_trace_with_overlaps_on_one_stream_is_refused);
    tcase_add_test(t, hand_unions_exact);
    tcase_add_test(t, class_rules_extend);
    tcase_add_test(t, gzip_input);
    tcase_add_test(t, malformed_input);
    tcase_add_test(t, sim_ep_overlap_hides_communication);
    tcase_add_test(t, sim_wall_moves_when_overlap_hides_comm);
    tcase_add_test(t, sim_host_bound_blackwell);
    tcase_add_test(t, sim_evidence_fp8);
    tcase_add_test(t, sim_evidence_hybridep);
    tcase_add_test(t, sim_evidence_graph_replay_after_capture);
    tcase_add_test(t, hand_steps_nvtx_and_ranks);
    tcase_add_test(t, step_window_spans_every_rank);
    tcase_add_test(t, wall_rule);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
