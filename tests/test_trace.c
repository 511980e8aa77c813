/*
 * test_trace.c - the trace reader and the wall figures: a real Kineto trace
 * against its published reference figures, hand-built traces whose unions
 * are known exactly, gzip input, malformed input, and the sim's own traces
 * with EP overlap off and on.
 *
 * Needs MT_SIM_BIN (the built moetune-sim) besides testkit's definitions.
 */
#include "testkit.h"
#include "trace.h"

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
static char *sim_trace(const char *const *sets, const char *dir)
{
    tk *t = tk_open("qwen3-30b-a3b-h100x16.cfg");
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
    mt_strlist_free(&argv);
    mt_strlist_free(&envs);
    mt_rendered_free(&out);
    tk_close(&t);
    return path;
}

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
    /* printing: text and JSON */
    {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        ck_assert_int_eq(mt_trace_print(on, -1, f, 0), 0);
        ck_assert_int_eq(mt_trace_print(on, -1, f, 1), 0);
        ck_assert_int_eq(mt_trace_print(on, 9999, f, 0), -ENOENT);
        fclose(f);
        ck_assert_ptr_nonnull(strstr(buf, "hidden_comm_us"));
        ck_assert_ptr_nonnull(strstr(buf, "\"trace.hybridep_kernels\""));
        free(buf);
    }
    mt_kv_destroy(&e1), mt_kv_destroy(&e2);
    mt_trace_destroy(&off), mt_trace_destroy(&on);
    rm_trace(d1, p1), rm_trace(d2, p2);
    mt_diag_destroy(&d);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("trace");
    TCase *t = tcase_create("trace");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, us_text_exact);
    tcase_add_test(t, real_trace_reference_figures);
    tcase_add_test(t, hand_unions_exact);
    tcase_add_test(t, class_rules_extend);
    tcase_add_test(t, gzip_input);
    tcase_add_test(t, malformed_input);
    tcase_add_test(t, sim_ep_overlap_hides_communication);
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
