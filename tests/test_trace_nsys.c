/*
 * test_trace_nsys.c - the Nsight Systems SQLite reader.  Every fixture is an
 * SQLite file built here at run time with the exporter's own table and
 * column names and types (a subset of the columns; NOT NULL constraints are
 * left off so that damaged rows can be written): hand-built kernels whose
 * unions are known exactly, activation evidence, absent tables, damaged
 * rows and files, and the same intervals read from a Kineto JSON trace.
 */
#include "testkit.h"
#include "trace.h"
#include "trace_int.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- fixtures ------------------------------------------------------------------------ */

#define S_STRINGS "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);"
#define S_KERNEL                                                                                   \
    "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, deviceId INTEGER, "      \
    "contextId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER, "              \
    "demangledName INTEGER, shortName INTEGER, mangledName INTEGER, gridId INTEGER, "              \
    "graphNodeId INTEGER);"
#define S_MEMCPY                                                                                   \
    "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER, end INTEGER, deviceId INTEGER, "      \
    "contextId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER, "              \
    "bytes INTEGER, copyKind INTEGER, srcKind INTEGER, dstKind INTEGER, graphNodeId INTEGER);"
#define S_MEMSET                                                                                   \
    "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER, end INTEGER, deviceId INTEGER, "      \
    "contextId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER, "              \
    "value INTEGER, bytes INTEGER, graphNodeId INTEGER, memKind INTEGER);"
#define S_RUNTIME                                                                                  \
    "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, end INTEGER, eventClass INTEGER, "   \
    "globalTid INTEGER, correlationId INTEGER, nameId INTEGER, returnValue INTEGER, "              \
    "callchainId INTEGER);"
#define S_NVTX                                                                                     \
    "CREATE TABLE NVTX_EVENTS (start INTEGER, end INTEGER, eventType INTEGER, rangeId INTEGER, "   \
    "category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, "        \
    "textId INTEGER, domainId INTEGER);"
#define S_MEMCPY_OPER                                                                              \
    "CREATE TABLE ENUM_CUDA_MEMCPY_OPER (id INTEGER PRIMARY KEY, name TEXT, label TEXT);"          \
    "INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (1, 'CUDA_MEMCPY_KIND_HTOD', 'Host-to-Device'), "    \
    "(2, 'CUDA_MEMCPY_KIND_DTOH', 'Device-to-Host'), (8, 'CUDA_MEMCPY_KIND_DTOD', "                \
    "'Device-to-Device');"
#define S_ALL S_STRINGS S_KERNEL S_MEMCPY S_MEMSET S_RUNTIME S_NVTX S_MEMCPY_OPER

/* ENUM_NSYS_EVENT_TYPE */
enum { NVTX_MARK = 34, NVTX_PUSH_POP = 59, NVTX_START_END = 60, NVTX_DOMAIN_CREATE = 75 };

typedef struct fx {
    char dir[64];
    char path[128];
    sqlite3 *db;
    int next_id; /* next StringIds id */
    int corr;    /* next correlationId */
} fx;

static void fx_exec(fx *f, const char *sql)
{
    char *err = NULL;
    if (sqlite3_exec(f->db, sql, NULL, NULL, &err) != SQLITE_OK)
        ck_abort_msg("fixture SQL failed: %s\n  %s", err ? err : "?", sql);
}

static void fx_execf(fx *f, const char *fmt, ...)
{
    va_list ap;
    char *sql;
    va_start(ap, fmt);
    sql = sqlite3_vmprintf(fmt, ap);
    va_end(ap);
    ck_assert_ptr_nonnull(sql);
    fx_exec(f, sql);
    sqlite3_free(sql);
}

/* A new export in a fresh temporary directory, with the given schema. */
static fx *fx_new(const char *schema)
{
    fx *f = calloc(1, sizeof *f);
    ck_assert_ptr_nonnull(f);
    snprintf(f->dir, sizeof f->dir, "/tmp/moetune-nsys-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(f->dir));
    snprintf(f->path, sizeof f->path, "%s/report.sqlite", f->dir);
    ck_assert_int_eq(
        sqlite3_open_v2(f->path, &f->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL),
        SQLITE_OK);
    f->next_id = 1;
    f->corr = 1;
    fx_exec(f, "BEGIN");
    if (schema)
        fx_exec(f, schema);
    return f;
}

/* Finishes writing; the file can be read from here on. */
static void fx_close(fx *f)
{
    if (f->db) {
        fx_exec(f, "COMMIT");
        ck_assert_int_eq(sqlite3_close(f->db), SQLITE_OK);
        f->db = NULL;
    }
}

static void fx_free(fx **fp)
{
    fx *f = *fp;
    if (!f)
        return;
    if (f->db)
        sqlite3_close(f->db);
    unlink(f->path);
    rmdir(f->dir);
    free(f);
    *fp = NULL;
}

/* Adds a string to StringIds; returns its id. */
static int fx_str(fx *f, const char *s)
{
    int id = f->next_id++;
    fx_execf(f, "INSERT INTO StringIds (id, value) VALUES (%d, %Q)", id, s);
    return id;
}

/* A kernel row named by demangledName (full) and shortName. */
static void fx_kernel(fx *f, long long start, long long end, int dev, int stream, int demangled,
                      int shortname)
{
    int c = f->corr++;
    fx_execf(f,
             "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, "
             "correlationId, globalPid, demangledName, shortName, mangledName, gridId) VALUES "
             "(%lld, %lld, %d, 1, %d, %d, 4242, %d, %d, NULL, %d)",
             start, end, dev, stream, c, demangled, shortname, c);
}

static void fx_memcpy(fx *f, long long start, long long end, int dev, int stream, int kind)
{
    fx_execf(f,
             "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, contextId, streamId, "
             "correlationId, globalPid, bytes, copyKind, srcKind, dstKind) VALUES "
             "(%lld, %lld, %d, 1, %d, %d, 4242, 1048576, %d, 1, 2)",
             start, end, dev, stream, f->corr++, kind);
}

static void fx_memset(fx *f, long long start, long long end, int dev, int stream)
{
    fx_execf(f,
             "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET (start, end, deviceId, contextId, streamId, "
             "correlationId, globalPid, value, bytes, memKind) VALUES "
             "(%lld, %lld, %d, 1, %d, %d, 4242, 0, 4096, 2)",
             start, end, dev, stream, f->corr++);
}

static void fx_runtime(fx *f, long long start, long long end, int name)
{
    fx_execf(f,
             "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, "
             "correlationId, nameId, returnValue) VALUES (%lld, %lld, 1, 77, %d, %d, 0)",
             start, end, f->corr++, name);
}

/* An NVTX event; end < 0 writes NULL, text NULL writes the name by textId. */
static void fx_nvtx(fx *f, long long start, long long end, int type, const char *text, int textid)
{
    char endv[32], idv[32];
    if (end < 0)
        snprintf(endv, sizeof endv, "NULL");
    else
        snprintf(endv, sizeof endv, "%lld", end);
    if (textid > 0)
        snprintf(idv, sizeof idv, "%d", textid);
    else
        snprintf(idv, sizeof idv, "NULL");
    fx_execf(f,
             "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, textId, domainId) "
             "VALUES (%lld, %s, %d, %Q, 77, %s, 0)",
             start, endv, type, text, idv);
}

static mt_trace *open_ok(const char *path)
{
    mt_diag *d = mt_diag_new();
    mt_trace *t = mt_trace_open(path, d);
    if (!t)
        mt_diag_print(d, stderr);
    ck_assert_msg(t != NULL, "the export %s was not read", path);
    ck_assert_uint_eq(mt_diag_count(d), 0);
    mt_diag_destroy(&d);
    return t;
}

/* Expects path to be refused with one entry naming it and containing every
 * needle (NULL-terminated). */
static void open_bad(const char *path, ...)
{
    mt_diag *d = mt_diag_new();
    mt_trace *t = mt_trace_open(path, d);
    va_list ap;
    const char *needle;
    ck_assert_msg(t == NULL, "a bad export was accepted");
    ck_assert_uint_eq(mt_diag_count(d), 1);
    ck_assert_str_eq(mt_diag_at(d, 0)->file, path);
    va_start(ap, path);
    while ((needle = va_arg(ap, const char *))) {
        const mt_diag_item *it = mt_diag_at(d, 0);
        if (!strstr(it->message, needle) && !(it->field && strstr(it->field, needle))) {
            mt_diag_print(d, stderr);
            va_end(ap);
            ck_abort_msg("the message does not say '%s'", needle);
        }
    }
    va_end(ap);
    mt_diag_destroy(&d);
}

/* ---- the hand-built layout shared by the figure and equivalence tests --------------------- */

enum { IV_KERNEL, IV_HTOD, IV_MEMSET };

typedef struct ival {
    const char *name;
    int dev, stream;
    long long start, end; /* ns */
    int kind;
} ival;

/* device 0, window 100..200 us:
 *   compute A [100,150) stream 7, nested B [110,120) stream 8,
 *   touching C [150,160) stream 7, identical D = C on stream 9;
 *   comm N1 [140,170) stream 20 (overlaps compute on [140,160)),
 *   comm N2 [180,200) stream 20, its twin on stream 21;
 *   a copy [170,175).  Kernels' union: [100,170) + [180,200) = 90 us;
 *   comm union 50, compute union 60, hidden 20, exposed 30, idle 10, one gap.
 * device 1, window 1000..1125 us:
 *   compute [1000,1040.001) s7 and [1030,1050) s8, [1100,1110) s7;
 *   comm AllGather [1045,1060) s20, SendRecv [1055,1065) s21,
 *   AllGather [1120,1125) s20; a memset [1070,1075).
 *   compute union 60.001 - 0.001 overlap = 60, comm union 25, hidden 5,
 *   exposed 20, active 80, idle 45, gaps 35 (above 20 us) and 10. */
static const ival layout[] = {
    {"void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>"
     "(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8::Params)",
     0, 7, 100000, 150000, IV_KERNEL},
    {"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>", 0, 8,
     110000, 120000, IV_KERNEL},
    {"gemm_C", 0, 7, 150000, 160000, IV_KERNEL},
    {"gemm_C", 0, 9, 150000, 160000, IV_KERNEL},
    {"ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 0, 20, 140000,
     170000, IV_KERNEL},
    {"ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 0, 20,
     180000, 200000, IV_KERNEL},
    {"ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 0, 21,
     180000, 200000, IV_KERNEL},
    {"Memcpy HtoD", 0, 7, 170000, 175000, IV_HTOD},
    {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1", 1, 7,
     1000000, 1040001, IV_KERNEL},
    {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1", 1, 8,
     1030000, 1050000, IV_KERNEL},
    {"ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 1, 20, 1045000, 1060000,
     IV_KERNEL},
    {"ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", 1, 21, 1055000, 1065000,
     IV_KERNEL},
    {"Memset", 1, 7, 1070000, 1075000, IV_MEMSET},
    {"triton_poi_fused_add_mul_0", 1, 7, 1100000, 1110000, IV_KERNEL},
    {"ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 1, 20, 1120000, 1125000,
     IV_KERNEL},
};
#define NLAYOUT (sizeof layout / sizeof layout[0])

/* The layout as an export: full names in demangledName, a short one in shortName. */
static fx *layout_export(void)
{
    fx *f = fx_new(S_ALL);
    int shortname = fx_str(f, "kernel");
    size_t i;
    for (i = 0; i < NLAYOUT; i++) {
        const ival *v = &layout[i];
        if (v->kind == IV_KERNEL)
            fx_kernel(f, v->start, v->end, v->dev, v->stream, fx_str(f, v->name), shortname);
        else if (v->kind == IV_HTOD)
            fx_memcpy(f, v->start, v->end, v->dev, v->stream, 1);
        else
            fx_memset(f, v->start, v->end, v->dev, v->stream);
    }
    return f;
}

/* The layout as Kineto JSON, times as exact decimal microseconds. */
static char *layout_json(void)
{
    size_t cap = 16384, len = 0, i;
    char *s = malloc(cap);
    ck_assert_ptr_nonnull(s);
    len += (size_t)snprintf(s + len, cap - len, "{\"traceEvents\": [\n");
    for (i = 0; i < NLAYOUT; i++) {
        const ival *v = &layout[i];
        const char *cat = v->kind == IV_KERNEL ? "kernel"
                          : v->kind == IV_HTOD ? "gpu_memcpy"
                                               : "gpu_memset";
        long long dur = v->end - v->start;
        len += (size_t)snprintf(s + len, cap - len,
                                "%s{\"ph\": \"X\", \"cat\": \"%s\", \"name\": \"%s\", \"pid\": %d, "
                                "\"tid\": %d, \"ts\": %lld.%03lld, \"dur\": %lld.%03lld, "
                                "\"args\": {\"device\": %d, \"stream\": %d}}",
                                i ? ",\n" : "", cat, v->name, v->dev, v->stream, v->start / 1000,
                                v->start % 1000, dur / 1000, dur % 1000, v->dev, v->stream);
        ck_assert_uint_lt(len, cap);
    }
    len += (size_t)snprintf(s + len, cap - len, "\n]}");
    ck_assert_uint_lt(len, cap);
    return s;
}

/* ---- (1) exact figures ----------------------------------------------------------------- */

START_TEST(figures_exact)
{
    fx *f = layout_export();
    mt_trace *t;
    mt_trace_metrics m;
    int dev[4];
    size_t i, ranges = 0, graphs = 0;
    int name_fwd = fx_str(f, "forward");
    /* a kernel CUPTI could not time (both 0) is no interval */
    fx_kernel(f, 0, 0, 0, 7, fx_str(f, "untimed_kernel"), 1);
    /* NVTX: a push/pop range by text, a start/end range by textId; a mark, a
     * range never closed and a domain creation are not ranges */
    fx_nvtx(f, 90000, 210000, NVTX_PUSH_POP, "step 1", 0);
    fx_nvtx(f, 100000, 150000, NVTX_START_END, NULL, name_fwd);
    fx_nvtx(f, 95000, -1, NVTX_MARK, "mark", 0);
    fx_nvtx(f, 96000, -1, NVTX_PUSH_POP, "open range", 0);
    fx_nvtx(f, 1000, 1000, NVTX_DOMAIN_CREATE, "NCCL", 0);
    fx_close(f);

    t = open_ok(f->path);
    ck_assert_uint_eq(mt_trace_kernel_count(t), 13);
    ck_assert_uint_eq(mt_trace_memcpy_count(t), 2);
    ck_assert_uint_eq(mt_trace_graph_launches(t), 0);
    ck_assert_uint_eq(mt_trace_kernel_launches(t), 0);
    ck_assert_uint_eq(mt_trace_devices(t, dev, 4), 2);
    ck_assert_int_eq(dev[0], 0);
    ck_assert_int_eq(dev[1], 1);

    ck_assert_int_eq(mt_trace_metrics_get(t, 0, NULL, &m), 0);
    ck_assert_int_eq(m.window_start_ns, 100000);
    ck_assert_int_eq(m.window_end_ns, 200000);
    ck_assert_uint_eq(m.kernels, 7);
    ck_assert_uint_eq(m.comm_kernels, 3);
    ck_assert_uint_eq(m.compute_kernels, 4);
    ck_assert_uint_eq(m.memcpys, 1);
    ck_assert_int_eq(m.active_ns, 90000);
    ck_assert_int_eq(m.comm_ns, 50000);
    ck_assert_int_eq(m.compute_ns, 60000);
    ck_assert_int_eq(m.hidden_ns, 20000);
    ck_assert_int_eq(m.exposed_comm_ns, 30000);
    ck_assert_int_eq(m.memcpy_ns, 5000);
    ck_assert_int_eq(m.idle_ns, 10000);
    ck_assert_uint_eq(m.gaps, 1);
    ck_assert_uint_eq(m.gaps_above, 0);
    ck_assert_int_eq(m.max_gap_ns, 10000);
    /* names come from demangledName, not shortName */
    ck_assert_uint_eq(m.ntop, 2);
    ck_assert_str_eq(
        m.top[0].name,
        "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)");
    ck_assert_int_eq(m.top[0].exposed_ns, 20000);
    ck_assert_str_eq(m.top[1].name,
                     "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)");
    ck_assert_int_eq(m.top[1].exposed_ns, 10000);

    ck_assert_int_eq(mt_trace_metrics_get(t, 1, NULL, &m), 0);
    ck_assert_int_eq(m.window_start_ns, 1000000);
    ck_assert_int_eq(m.window_end_ns, 1125000);
    ck_assert_int_eq(m.window_ns, 125000);
    ck_assert_uint_eq(m.kernels, 6);
    ck_assert_uint_eq(m.comm_kernels, 3);
    ck_assert_int_eq(m.compute_ns, 60000);
    ck_assert_int_eq(m.comm_ns, 25000);
    ck_assert_int_eq(m.hidden_ns, 5000);
    ck_assert_int_eq(m.exposed_comm_ns, 20000);
    ck_assert_int_eq(m.active_ns, 80000);
    ck_assert_int_eq(m.idle_ns, 45000);
    ck_assert_int_eq(m.memcpy_ns, 5000);
    ck_assert_uint_eq(m.gaps, 2);
    ck_assert_uint_eq(m.gaps_above, 1);
    ck_assert_int_eq(m.gaps_above_ns, 35000);
    ck_assert_int_eq(m.max_gap_ns, 35000);
    ck_assert_uint_eq(m.ntop, 2);
    ck_assert_str_eq(m.top[0].name,
                     "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)");
    ck_assert_int_eq(m.top[0].exposed_ns, 15000);
    ck_assert_str_eq(m.top[1].name, "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)");
    ck_assert_int_eq(m.top[1].exposed_ns, 5000);
    ck_assert_int_eq(mt_trace_metrics_get(t, 2, NULL, &m), -ENOENT);

    /* the two NVTX ranges, host-side, by text and by textId */
    for (i = 0; i < t->nrg; i++) {
        const char *name = t->pool + t->names[t->rg[i].name];
        ck_assert_int_eq(t->rg[i].device, -1);
        if (t->rg[i].kind == KIND_GRAPH) {
            graphs++;
            continue;
        }
        ck_assert_int_eq(t->rg[i].kind, KIND_RANGE);
        if (ranges++ == 0) {
            ck_assert_str_eq(name, "step 1");
            ck_assert_int_eq(t->rg[i].start, 90000);
            ck_assert_int_eq(t->rg[i].end, 210000);
        } else {
            ck_assert_str_eq(name, "forward");
            ck_assert_int_eq(t->rg[i].start, 100000);
            ck_assert_int_eq(t->rg[i].end, 150000);
        }
    }
    ck_assert_uint_eq(ranges, 2);
    ck_assert_uint_eq(graphs, 0);
    /* the copy is named by its copyKind */
    for (i = 0; i < t->n; i++)
        if (t->iv[i].kind == KIND_MEMCPY)
            ck_assert_str_eq(t->pool + t->names[t->iv[i].name],
                             t->iv[i].device == 0 ? "Memcpy HtoD" : "Memset");
    mt_trace_destroy(&t);
    fx_free(&f);
}
END_TEST

/* shortName names a kernel where demangledName is NULL or is not a column */
START_TEST(short_name_fallback)
{
    fx *f = fx_new(S_STRINGS "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, "
                             "deviceId INTEGER, streamId INTEGER, shortName INTEGER);");
    mt_trace *t;
    mt_trace_metrics m;
    fx_str(f, "ncclKernel_AllReduce_RING_LL_Sum_half");
    fx_str(f, "gemm");
    fx_exec(f,
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (0, 100, 3, 7, 1), (50, 80, 3, 8, 2)");
    fx_close(f);
    t = open_ok(f->path);
    ck_assert_int_eq(mt_trace_metrics_get(t, 3, NULL, &m), 0);
    ck_assert_int_eq(m.comm_ns, 100);
    ck_assert_int_eq(m.hidden_ns, 30);
    mt_trace_destroy(&t);
    fx_free(&f);

    f = fx_new(S_ALL);
    fx_str(f, "ncclKernel_AllReduce_RING_LL_Sum_half"); /* 1 */
    fx_exec(f, "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, streamId, "
               "demangledName, shortName) VALUES (10, 20, 0, 7, NULL, 1)");
    fx_close(f);
    t = open_ok(f->path);
    ck_assert_int_eq(mt_trace_metrics_get(t, 0, NULL, &m), 0);
    ck_assert_int_eq(m.comm_ns, 10);
    mt_trace_destroy(&t);
    fx_free(&f);
}
END_TEST

/* ---- (2) evidence ---------------------------------------------------------------------- */

START_TEST(evidence_keys)
{
    fx *f = fx_new(S_ALL);
    mt_trace *t;
    mt_kv *ev = mt_kv_new();
    int s = fx_str(f, "kernel");
    int fp8 = fx_str(f, "sm90_xmma_gemm_e4m3bf16_e4m3f32_f32_tn_n_tilesize128x128x128_"
                        "warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas");
    int mx = fx_str(f, "cutlass3x_sm100_bstensorop_s256x128x32gemm_block_scaled_ue8m0xe4m3_"
                       "ue8m0xe4m3_f32_bf16_bf16_128x128x128_1x1x1_0_tnn_align32_1sm");
    int fp4 = fx_str(f, "cutlass3x_sm100_bstensorop_s256x128x64gemm_block_scaled_ue4m3xe2m1_"
                        "ue4m3xe2m1_f32_bf16_bf16_128x128x256_1x1x1_0_tnn_align32_1sm");
    int disp = fx_str(f, "void hybrid_ep::dispatch_kernel<128, 7168, true>(hybrid_ep::"
                         "DispatchParams)");
    int comb = fx_str(f, "void hybrid_ep::combine_kernel<128, 7168>(hybrid_ep::CombineParams)");
    int deep = fx_str(f, "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*)");
    int g1 = fx_str(f, "cudaGraphLaunch_v10000"), g2 = fx_str(f, "cuGraphLaunch");
    int l1 = fx_str(f, "cudaLaunchKernel_v7000"), l2 = fx_str(f, "cuLaunchKernelEx");
    int other = fx_str(f, "cudaMemcpyAsync_v3020");
    /* comm [50,150) + [200,250) + [300,350) = 200 us; compute [0,100) hides 50 */
    fx_kernel(f, 0, 100000, 0, 7, fp8, s);
    fx_kernel(f, 50000, 150000, 0, 20, disp, s);
    fx_kernel(f, 50000, 150000, 0, 21, disp, s);
    fx_kernel(f, 200000, 250000, 0, 20, comb, s);
    fx_kernel(f, 300000, 350000, 0, 22, deep, s);
    fx_kernel(f, 400000, 410000, 0, 7, mx, s);
    fx_kernel(f, 420000, 430000, 0, 7, fp4, s);
    fx_runtime(f, 1000, 2000, g1);
    fx_runtime(f, 3000, 4000, g1);
    fx_runtime(f, 5000, 6000, g2);
    fx_runtime(f, 7000, 7100, l1);
    fx_runtime(f, 7200, 7300, l1);
    fx_runtime(f, 7400, 7500, l1);
    fx_runtime(f, 7600, 7700, l1);
    fx_runtime(f, 7800, 7900, l2);
    fx_runtime(f, 8000, 9000, other);
    fx_close(f);

    t = open_ok(f->path);
    ck_assert_uint_eq(mt_trace_graph_launches(t), 3);
    ck_assert_uint_eq(mt_trace_kernel_launches(t), 5);
    ck_assert_int_eq(mt_trace_evidence(t, ev), 0);
    ck_assert_str_eq(mt_kv_get(ev, "trace.available"), "true");
    ck_assert_str_eq(mt_kv_get(ev, "trace.fp8_gemm"), "2"); /* e4m3 and the MXFP8 one */
    ck_assert_str_eq(mt_kv_get(ev, "trace.mxfp8_gemm"), "1");
    ck_assert_str_eq(mt_kv_get(ev, "trace.nvfp4_gemm"), "1");
    ck_assert_str_eq(mt_kv_get(ev, "trace.hybridep_kernels"), "3");
    ck_assert_str_eq(mt_kv_get(ev, "trace.deepep_kernels"), "1");
    ck_assert_str_eq(mt_kv_get(ev, "trace.alltoall_kernels"), "0");
    ck_assert_str_eq(mt_kv_get(ev, "trace.graph_launches"), "3");
    ck_assert_str_eq(mt_kv_get(ev, "trace.kernel_launches"), "5");
    ck_assert_str_eq(mt_kv_get(ev, "trace.comm_hidden_fraction"), "0.250000");
    mt_kv_destroy(&ev);
    mt_trace_destroy(&t);
    fx_free(&f);
}
END_TEST

/* ---- (3) absent tables and bad input ------------------------------------------------------ */

START_TEST(optional_tables_absent)
{
    fx *f = fx_new(S_STRINGS S_KERNEL);
    mt_trace *t;
    mt_kv *ev = mt_kv_new();
    fx_kernel(f, 10, 30, 0, 7, fx_str(f, "gemm"), 1);
    fx_close(f);
    t = open_ok(f->path);
    ck_assert_uint_eq(mt_trace_kernel_count(t), 1);
    ck_assert_uint_eq(mt_trace_memcpy_count(t), 0);
    ck_assert_uint_eq(t->nrg, 0);
    ck_assert_int_eq(mt_trace_evidence(t, ev), 0);
    ck_assert_str_eq(mt_kv_get(ev, "trace.graph_launches"), "0");
    ck_assert_str_eq(mt_kv_get(ev, "trace.comm_hidden_fraction"), "0.000000");
    mt_kv_destroy(&ev);
    mt_trace_destroy(&t);
    fx_free(&f);

    /* an export of a run with no kernels at all: empty, not an error */
    f = fx_new(S_STRINGS S_KERNEL S_NVTX);
    fx_close(f);
    t = open_ok(f->path);
    ck_assert_uint_eq(mt_trace_kernel_count(t), 0);
    mt_trace_destroy(&t);
    fx_free(&f);
}
END_TEST

START_TEST(no_kernel_table)
{
    fx *f = fx_new(S_STRINGS S_NVTX S_RUNTIME);
    fx_nvtx(f, 1, 2, NVTX_PUSH_POP, "x", 0);
    fx_close(f);
    open_bad(f->path, "not an Nsight Systems export: no CUPTI_ACTIVITY_KIND_KERNEL table", NULL);
    fx_free(&f);

    /* a valid database with no tables at all */
    f = fx_new("CREATE TABLE unrelated (x INTEGER);");
    fx_close(f);
    open_bad(f->path, "no CUPTI_ACTIVITY_KIND_KERNEL table", NULL);
    fx_free(&f);

    /* kernels whose names cannot be resolved */
    f = fx_new(S_KERNEL);
    fx_close(f);
    open_bad(f->path, "no StringIds table", NULL);
    fx_free(&f);

    /* a kernel table without a column this reader needs */
    f = fx_new(S_STRINGS "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, "
                         "streamId INTEGER, shortName INTEGER);");
    fx_close(f);
    open_bad(f->path, "CUPTI_ACTIVITY_KIND_KERNEL", "no column \"deviceId\"", NULL);
    fx_free(&f);
}
END_TEST

/* One bad row in an otherwise good export: the entry's field is the cell
 * ("TABLE[rowid N].COLUMN") and its message says what is wrong. */
static void bad_row(const char *sql, const char *field, const char *what)
{
    fx *f = fx_new(S_ALL);
    mt_diag *d = mt_diag_new();
    mt_trace *t;
    fx_str(f, "gemm");                   /* 1 */
    fx_str(f, "cudaLaunchKernel_v7000"); /* 2 */
    fx_kernel(f, 0, 10, 0, 7, 1, 1);
    fx_kernel(f, 20, 30, 0, 7, 1, 1);
    fx_memcpy(f, 40, 50, 0, 7, 1);
    fx_runtime(f, 0, 5, 2);
    fx_nvtx(f, 0, 100, NVTX_PUSH_POP, "step", 0);
    fx_exec(f, sql);
    fx_close(f);
    t = mt_trace_open(f->path, d);
    ck_assert_msg(t == NULL, "accepted: %s", sql);
    ck_assert_uint_eq(mt_diag_count(d), 1);
    if (!mt_diag_at(d, 0)->field || strcmp(mt_diag_at(d, 0)->field, field) ||
        !mt_diag_contains(d, what)) {
        mt_diag_print(d, stderr);
        ck_abort_msg("want field %s and a message saying '%s'", field, what);
    }
    ck_assert_str_eq(mt_diag_at(d, 0)->file, f->path);
    mt_diag_destroy(&d);
    fx_free(&f);
}

START_TEST(bad_rows)
{
    /* rowid 3: the third kernel */
    bad_row("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, streamId, "
            "demangledName, shortName) VALUES (40, NULL, 0, 7, 1, 1)",
            "CUPTI_ACTIVITY_KIND_KERNEL[rowid 3].end", "end is NULL");
    bad_row("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, streamId, "
            "demangledName, shortName) VALUES (NULL, 40, 0, 7, 1, 1)",
            "CUPTI_ACTIVITY_KIND_KERNEL[rowid 3].start", "start is NULL");
    bad_row("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, streamId, "
            "demangledName, shortName) VALUES (50, 40, 0, 7, 1, 1)",
            "CUPTI_ACTIVITY_KIND_KERNEL[rowid 3].end", "end 40 ns is before start 50 ns");
    bad_row("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, streamId, "
            "demangledName, shortName) VALUES (40, 50, 0, 7, 99, 1)",
            "CUPTI_ACTIVITY_KIND_KERNEL[rowid 3].demangledName",
            "string id 99 is not in StringIds");
    bad_row("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, streamId, "
            "demangledName, shortName) VALUES ('soon', 50, 0, 7, 1, 1)",
            "CUPTI_ACTIVITY_KIND_KERNEL[rowid 3].start", "start must be an integer, not text");
    bad_row("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, streamId, "
            "demangledName, shortName) VALUES (40, 50.5, 0, 7, 1, 1)",
            "CUPTI_ACTIVITY_KIND_KERNEL[rowid 3].end", "not a real number");
    bad_row("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, streamId, "
            "demangledName, shortName) VALUES (40, 50, 0, 7, 'gemm', 1)",
            "CUPTI_ACTIVITY_KIND_KERNEL[rowid 3].demangledName", "not text");
    bad_row("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, streamId, "
            "demangledName, shortName) VALUES (40, 50, 4294967296, 7, 1, 1)",
            "CUPTI_ACTIVITY_KIND_KERNEL[rowid 3].deviceId", "out of range");
    bad_row("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, streamId, "
            "demangledName, shortName) VALUES (-40, 50, 0, 7, 1, 1)",
            "CUPTI_ACTIVITY_KIND_KERNEL[rowid 3].start", "negative");
    bad_row("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, streamId, "
            "demangledName, shortName) VALUES (40, 50, 0, 7, NULL, NULL)",
            "CUPTI_ACTIVITY_KIND_KERNEL[rowid 3].demangledName", "the kernel has no name");
    bad_row("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, streamId, "
            "demangledName, shortName) VALUES (40, 50, NULL, 7, 1, 1)",
            "CUPTI_ACTIVITY_KIND_KERNEL[rowid 3].deviceId", "deviceId is NULL");
    /* the other tables */
    bad_row("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, streamId, copyKind) "
            "VALUES (60, 55, 0, 7, 1)",
            "CUPTI_ACTIVITY_KIND_MEMCPY[rowid 2].end", "before start");
    bad_row("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, streamId, copyKind) "
            "VALUES (60, 65, 0, 7, NULL)",
            "CUPTI_ACTIVITY_KIND_MEMCPY[rowid 2].copyKind", "copyKind is NULL");
    bad_row("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET (start, end, deviceId, streamId) "
            "VALUES (60, NULL, 0, 7)",
            "CUPTI_ACTIVITY_KIND_MEMSET[rowid 1].end", "end is NULL");
    bad_row("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, nameId) VALUES (6, 9, 1234)",
            "CUPTI_ACTIVITY_KIND_RUNTIME[rowid 2].nameId", "string id 1234 is not in StringIds");
    bad_row("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, nameId) VALUES (6, NULL, 2)",
            "CUPTI_ACTIVITY_KIND_RUNTIME[rowid 2].end", "end is NULL");
    bad_row("INSERT INTO NVTX_EVENTS (start, end, eventType, textId) VALUES (1, 5, 59, 777)",
            "NVTX_EVENTS[rowid 2].textId", "string id 777 is not in StringIds");
    bad_row("INSERT INTO NVTX_EVENTS (start, end, eventType, text) VALUES (9, 5, 60, 'r')",
            "NVTX_EVENTS[rowid 2].end", "before start");
    bad_row("INSERT INTO NVTX_EVENTS (start, end, eventType, text) VALUES (1, 5, 59, x'00ff')",
            "NVTX_EVENTS[rowid 2].text", "text must be text, not a blob");
    /* a string id whose text is missing */
    bad_row("INSERT INTO StringIds (id, value) VALUES (50, x'41'); "
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, streamId, "
            "demangledName, shortName) VALUES (40, 50, 0, 7, 50, 1)",
            "CUPTI_ACTIVITY_KIND_KERNEL[rowid 3].demangledName", "string id 50 has a blob");
}
END_TEST

/* StringIds without its primary key: duplicate ids are refused. */
START_TEST(duplicate_string_ids)
{
    fx *f = fx_new("CREATE TABLE StringIds (id INTEGER, value TEXT);" S_KERNEL);
    fx_exec(f, "INSERT INTO StringIds VALUES (1, 'gemm'), (2, 'nccl'), (1, 'other')");
    fx_kernel(f, 0, 10, 0, 7, 1, 1);
    fx_close(f);
    open_bad(f->path, "StringIds", "string id 1 appears more than once", NULL);
    fx_free(&f);

    /* without the key but unique: read (by a join the planner can index) */
    f = fx_new("CREATE TABLE StringIds (id INTEGER, value TEXT);" S_KERNEL);
    fx_exec(f, "INSERT INTO StringIds VALUES (1, 'gemm'), (2, 'nccl_x')");
    fx_kernel(f, 0, 10, 0, 7, 1, 1);
    fx_kernel(f, 5, 20, 0, 8, 2, 2);
    fx_close(f);
    {
        mt_trace *t = open_ok(f->path);
        mt_trace_metrics m;
        ck_assert_int_eq(mt_trace_metrics_get(t, 0, NULL, &m), 0);
        ck_assert_int_eq(m.comm_ns, 15);
        ck_assert_int_eq(m.hidden_ns, 5);
        mt_trace_destroy(&t);
    }
    fx_free(&f);
}
END_TEST

static unsigned char *slurp_bin(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    unsigned char *buf;
    long n;
    ck_assert_ptr_nonnull(fp);
    ck_assert_int_eq(fseek(fp, 0, SEEK_END), 0);
    n = ftell(fp);
    ck_assert_int_gt(n, 0);
    rewind(fp);
    buf = malloc((size_t)n);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, fp), (size_t)n);
    fclose(fp);
    *len = (size_t)n;
    return buf;
}

static void write_bin(const char *path, const unsigned char *buf, size_t len)
{
    FILE *fp = fopen(path, "wb");
    ck_assert_ptr_nonnull(fp);
    ck_assert_uint_eq(fwrite(buf, 1, len, fp), len);
    ck_assert_int_eq(fclose(fp), 0);
}

/* Refused with one entry naming the file, whatever the words. */
static void open_refused(const char *path)
{
    mt_diag *d = mt_diag_new();
    mt_trace *t = mt_trace_open(path, d);
    ck_assert_ptr_null(t);
    ck_assert_uint_eq(mt_diag_count(d), 1);
    ck_assert_str_eq(mt_diag_at(d, 0)->file, path);
    mt_diag_destroy(&d);
}

START_TEST(damaged_files)
{
    fx *f = fx_new(S_ALL);
    unsigned char *good, *bad;
    size_t len, i, cut;
    unsigned seed = 12345;
    int name = fx_str(f, "gemm"), k;
    for (k = 0; k < 3000; k++)
        fx_kernel(f, k * 100LL, k * 100LL + 50, k % 2, 7, name, name);
    fx_close(f);
    good = slurp_bin(f->path, &len);
    ck_assert_uint_gt(len, 40000);
    bad = malloc(len);
    ck_assert_ptr_nonnull(bad);

    /* garbage after a valid header */
    memcpy(bad, good, len);
    for (i = 100; i < len; i++)
        bad[i] = (unsigned char)((seed = seed * 1103515245u + 12345u) >> 16);
    write_bin(f->path, bad, len);
    open_bad(f->path, "damaged or truncated", NULL);

    /* the header alone, and only the magic */
    write_bin(f->path, good, 100);
    open_refused(f->path);
    write_bin(f->path, (const unsigned char *)"SQLite format 3", 16);
    open_refused(f->path);

    /* truncated at several points: refused or read, never a crash */
    for (cut = 512; cut < len; cut += len / 7) {
        mt_diag *d = mt_diag_new();
        mt_trace *t;
        write_bin(f->path, good, cut);
        t = mt_trace_open(f->path, d);
        ck_assert_msg(t == NULL, "a file truncated to %zu of %zu bytes was accepted", cut, len);
        ck_assert_uint_eq(mt_diag_count(d), 1);
        mt_diag_destroy(&d);
    }

    /* garbage in the pages past the schema (the table's rows) */
    memcpy(bad, good, len);
    for (i = 8192; i < len; i++)
        bad[i] = (unsigned char)((seed = seed * 1103515245u + 12345u) >> 16);
    write_bin(f->path, bad, len);
    open_refused(f->path);

    /* bytes flipped here and there: whatever comes back, nothing crashes */
    for (k = 0; k < 40; k++) {
        mt_diag *d = mt_diag_new();
        mt_trace *t;
        memcpy(bad, good, len);
        for (i = 0; i < 24; i++) {
            size_t at = 100 + ((seed = seed * 1103515245u + 12345u) >> 8) % (len - 100);
            bad[at] ^= (unsigned char)(1u << (seed % 8));
        }
        write_bin(f->path, bad, len);
        t = mt_trace_open(f->path, d);
        ck_assert((t == NULL) == (mt_diag_count(d) == 1));
        mt_trace_destroy(&t);
        mt_diag_destroy(&d);
    }
    free(good);
    free(bad);
    fx_free(&f);
}
END_TEST

/* ---- (4) the same intervals from Kineto JSON ------------------------------------------------ */

static void same_metrics(const mt_trace_metrics *a, const mt_trace_metrics *b)
{
    size_t i;
    ck_assert_int_eq(a->window_start_ns, b->window_start_ns);
    ck_assert_int_eq(a->window_end_ns, b->window_end_ns);
    ck_assert_int_eq(a->window_ns, b->window_ns);
    ck_assert_uint_eq(a->kernels, b->kernels);
    ck_assert_uint_eq(a->comm_kernels, b->comm_kernels);
    ck_assert_uint_eq(a->compute_kernels, b->compute_kernels);
    ck_assert_uint_eq(a->memcpys, b->memcpys);
    ck_assert_int_eq(a->active_ns, b->active_ns);
    ck_assert_int_eq(a->comm_ns, b->comm_ns);
    ck_assert_int_eq(a->compute_ns, b->compute_ns);
    ck_assert_int_eq(a->hidden_ns, b->hidden_ns);
    ck_assert_int_eq(a->exposed_comm_ns, b->exposed_comm_ns);
    ck_assert_int_eq(a->memcpy_ns, b->memcpy_ns);
    ck_assert_int_eq(a->idle_ns, b->idle_ns);
    ck_assert_uint_eq(a->gaps, b->gaps);
    ck_assert_uint_eq(a->gaps_above, b->gaps_above);
    ck_assert_int_eq(a->gaps_above_ns, b->gaps_above_ns);
    ck_assert_int_eq(a->max_gap_ns, b->max_gap_ns);
    ck_assert_uint_eq(a->ntop, b->ntop);
    for (i = 0; i < a->ntop; i++) {
        ck_assert_str_eq(a->top[i].name, b->top[i].name);
        ck_assert_int_eq(a->top[i].exposed_ns, b->top[i].exposed_ns);
    }
}

START_TEST(kineto_equivalence)
{
    fx *f = layout_export();
    char *json = layout_json();
    mt_diag *d = mt_diag_new();
    mt_trace *js = mt_trace_parse(json, strlen(json), "layout.json", d), *db;
    mt_kv *ej = mt_kv_new(), *es = mt_kv_new();
    int dj[4], ds[4];
    size_t nd, i;
    const char *k1, *v1, *k2, *v2;
    if (!js)
        mt_diag_print(d, stderr);
    ck_assert_ptr_nonnull(js);
    fx_close(f);
    db = open_ok(f->path);
    ck_assert_uint_eq(mt_trace_kernel_count(js), mt_trace_kernel_count(db));
    ck_assert_uint_eq(mt_trace_memcpy_count(js), mt_trace_memcpy_count(db));
    nd = mt_trace_devices(js, dj, 4);
    ck_assert_uint_eq(nd, 2);
    ck_assert_uint_eq(mt_trace_devices(db, ds, 4), nd);
    for (i = 0; i < nd; i++) {
        mt_trace_metrics a, b;
        mt_trace_query q;
        ck_assert_int_eq(dj[i], ds[i]);
        ck_assert_int_eq(mt_trace_metrics_get(js, dj[i], NULL, &a), 0);
        ck_assert_int_eq(mt_trace_metrics_get(db, ds[i], NULL, &b), 0);
        same_metrics(&a, &b);
        /* and through a window that cuts intervals, with another threshold */
        memset(&q, 0, sizeof q);
        q.has_window = 1;
        q.start_ns = i ? 1040000 : 145000;
        q.end_ns = i ? 1112345 : 185000;
        q.gap_threshold_ns = 5000;
        ck_assert_int_eq(mt_trace_metrics_get(js, dj[i], &q, &a), 0);
        ck_assert_int_eq(mt_trace_metrics_get(db, ds[i], &q, &b), 0);
        same_metrics(&a, &b);
    }
    ck_assert_int_eq(mt_trace_evidence(js, ej), 0);
    ck_assert_int_eq(mt_trace_evidence(db, es), 0);
    ck_assert_uint_eq(mt_kv_count(ej), mt_kv_count(es));
    for (i = 0; mt_kv_entry(ej, i, &k1, &v1) == 0; i++) {
        ck_assert_int_eq(mt_kv_entry(es, i, &k2, &v2), 0);
        ck_assert_str_eq(k1, k2);
        ck_assert_str_eq(v1, v2);
    }
    mt_kv_destroy(&ej);
    mt_kv_destroy(&es);
    mt_trace_destroy(&js);
    mt_trace_destroy(&db);
    mt_diag_destroy(&d);
    free(json);
    fx_free(&f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("test_trace_nsys");
    TCase *tc = tcase_create("all");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, figures_exact);
    tcase_add_test(tc, short_name_fallback);
    tcase_add_test(tc, evidence_keys);
    tcase_add_test(tc, optional_tables_absent);
    tcase_add_test(tc, no_kernel_table);
    tcase_add_test(tc, bad_rows);
    tcase_add_test(tc, duplicate_string_ids);
    tcase_add_test(tc, damaged_files);
    tcase_add_test(tc, kineto_equivalence);
    suite_add_tcase(s, tc);
    return tk_run(s);
}
